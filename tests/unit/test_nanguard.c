/* The NaN guard (tg/debug.h): statistics worked out by hand; the node
 * that made a NaN is named, not the nodes that passed it on, with and
 * without fusion (inside a composite, the body op and the file's node it
 * stood for, and what that op made); NaN fed in is the input's; a
 * constant holding NaN is the constant's, when it holds the output's kind
 * of bad value; constants returned or used as updates are checked, and
 * one constant folding made names the node it was folded from; integer
 * values are not checked; float32 against a threshold float32 cannot
 * hold; the call number counts, and a stopped call leaves the shared
 * values as they were, and a training step's gemm overwrites its weights
 * only when its result provably passes; inside nested bodies (a scan of scans, an
 * op_from_graph in a scan, a scan in that) the whole way down is named,
 * with the step of each loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "debug/guard.h"
#include "vm/vm.h"
#include "testutil.h"

static tg_function *compile(tg_graph *g, const char *preset) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = preset};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, NULL, ctx), &o, ctx);
    if (!f) fail_msg("compile: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

static void test_stats_by_hand(void **state) {
    (void)state;
    int64_t shape[1] = {6};
    double d[6] = {1, NAN, -3, INFINITY, 2e11, -INFINITY};
    tg_array *a = tu_f64(1, shape, d);
    tg_stats st;
    tg_array_stats(a, 1e10, &st);
    assert_int_equal(st.size, 6);
    assert_int_equal(st.nan, 1);
    assert_int_equal(st.inf, 2);
    assert_int_equal(st.big, 1);
    assert_true(st.min == -3);
    assert_true(st.max == 2e11);
    assert_true(fabs(st.mean - (1 - 3 + 2e11) / 3) < 1e-3);
    tg_array_stats(a, INFINITY, &st);
    assert_int_equal(st.big, 0);
    tg_array_free(a);
    /* finite values whose sum overflows: the mean does not */
    int64_t sh3[1] = {3};
    double d3[3] = {1e308, 8e307, NAN};
    a = tu_f64(1, sh3, d3);
    tg_array_stats(a, INFINITY, &st);
    assert_true(st.mean == 9e307 || fabs(st.mean - 9e307) <= 1e-15 * 9e307);
    assert_true(st.max == 1e308 && st.min == 8e307);
    tg_array_free(a);
    /* int64: no NaN, no infinity; min, max, mean still. */
    int64_t sh2[1] = {3};
    tg_array *b = tg_array_new(TG_INT64, 1, sh2);
    int64_t *p = tg_array_data(b);
    p[0] = 4;
    p[1] = -2;
    p[2] = 7;
    tg_array_stats(b, 1e10, &st);
    assert_int_equal(st.nan + st.inf + st.big, 0);
    assert_true(st.min == -2 && st.max == 7 && st.mean == 3);
    tg_array_free(b);
}

/* x -> a = x*0.5 + 1 -> h = tanh(a)^2 -> d = h - 2 (< 0) -> lg = log(d)
 * -> o = exp(lg*3) -> cost = sum(o). */
static const char *DEEP =
    "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[4]}}],"
    "'nodes':[{'op':'mul','inputs':['x',{'value':0.5}],'outputs':['a1']},"
    "{'op':'add','inputs':['a1',{'value':1.0}],'outputs':['a2']},"
    "{'op':'tanh','inputs':['a2'],'outputs':['h2']},"
    "{'op':'sqr','inputs':['h2'],'outputs':['h3']},"
    "{'op':'sub','inputs':['h3',{'value':2.0}],'outputs':['d']},"
    "{'op':'log','inputs':['d'],'outputs':['lg'],'trace':[{'file':'m.py','line':7,'code':'lg = log(d)'}]},"
    "{'op':'mul','inputs':['lg',{'value':3.0}],'outputs':['o1']},"
    "{'op':'exp','inputs':['o1'],'outputs':['o2']},"
    "{'op':'sum','inputs':['o2'],'outputs':['cost']}]}";

static void run_deep(const char *preset, const double *xv, tg_offence *got, const tg_function **fo,
                     tg_function **keep) {
    tg_graph *g = tu_load_sq(DEEP);
    tg_function *f = compile(g, preset);
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {4};
    tg_array *x = tu_f64(1, shape, xv), *out[1] = {NULL};
    tg_nanguard *ng = tg_nanguard_new(f, NULL, ctx);
    assert_non_null(ng);
    int rc = tg_nanguard_call(ng, &x, out, ctx);
    const tg_offence *o = tg_nanguard_offence(ng);
    if (o) {
        assert_int_equal(rc, TG_ESTOPPED);
        *got = *o;
        /* strings are borrowed from ng / f: copy what the tests read */
        got->var = strdup(o->var);
        got->body_op = o->body_op ? strdup(o->body_op) : NULL;
        got->origins = NULL;
        if (o->norigins) {
            char **keys = calloc((size_t)o->norigins, sizeof *keys);
            for (int i = 0; i < o->norigins; i++) keys[i] = strdup(o->origins[i]);
            got->origins = (const char *const *)keys;
        }
        if (o->node >= 0) {
            /* lg's input d, as it was: every entry below zero */
            const tg_array *in0 = tg_nanguard_node_input(ng, 0);
            assert_non_null(in0);
            tg_stats st;
            tg_array_stats(in0, 1e10, &st);
            assert_true(st.max < 0 || o->body_op != NULL);
        }
    } else {
        assert_int_equal(rc, TG_OK);
        memset(got, 0, sizeof *got);
        tg_array_free(out[0]);
    }
    tg_nanguard_free(ng);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    *fo = f;
    *keep = f;
}

static void free_off(tg_offence *o) {
    free((char *)o->var);
    free((char *)o->body_op);
    for (int i = 0; i < o->norigins; i++) free((char *)o->origins[i]);
    free((void *)o->origins);
}

static void test_deep_log_unoptimized(void **state) {
    (void)state;
    double xv[4] = {1, 2, 3, 4};
    tg_offence o;
    const tg_function *f;
    tg_function *keep;
    run_deep("none", xv, &o, &f, &keep);
    assert_int_equal(o.where, TG_OFFENCE_NODE);
    assert_string_equal(tg_function_node_key(f, o.node), "lg");
    assert_string_equal(tg_function_node_op(f, o.node), "log");
    assert_int_equal(o.node, 5); /* the sixth node: the five before are clean */
    assert_int_equal(o.what, TG_BAD_NAN);
    assert_int_equal(o.stats.nan, 4);
    assert_int_equal(o.call, 1);
    free_off(&o);
    tg_function_free(keep);
}

static void test_deep_log_fused(void **state) {
    (void)state;
    double xv[4] = {1, 2, 3, 4};
    tg_offence o;
    const tg_function *f;
    tg_function *keep;
    run_deep("fast_run", xv, &o, &f, &keep);
    assert_int_equal(o.where, TG_OFFENCE_NODE);
    assert_string_equal(tg_function_node_op(f, o.node), "composite");
    assert_non_null(o.body_op);
    assert_string_equal(o.body_op, "log");
    assert_int_equal(o.norigins, 1);
    assert_string_equal(o.origins[0], "lg");
    free_off(&o);
    tg_function_free(keep);
}

static void test_nan_input_is_the_input(void **state) {
    (void)state;
    double xv[4] = {1, NAN, 3, 4};
    tg_offence o;
    const tg_function *f;
    tg_function *keep;
    run_deep("fast_run", xv, &o, &f, &keep);
    assert_int_equal(o.where, TG_OFFENCE_INPUT);
    assert_string_equal(o.var, "x");
    assert_int_equal(o.node, -1);
    assert_int_equal(o.stats.nan, 1);
    free_off(&o);
    tg_function_free(keep);
}

/* A constant [nan, 1] added to x: the constant is the source. */
static void test_nan_constant(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq("{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[2]}},"
                       "{'id':'c','type':{'dtype':'float64','shape':[2]},'constant':{'data':['nan',1]}}],"
                       "'nodes':[{'op':'add','inputs':['x','c'],'outputs':['y']}]}");
    tg_function *f = compile(g, "none");
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {2};
    double xv[2] = {1, 2};
    tg_array *x = tu_f64(1, shape, xv), *out[1] = {NULL};
    tg_nanguard *ng = tg_nanguard_new(f, NULL, ctx);
    assert_int_equal(tg_nanguard_call(ng, &x, out, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_non_null(o);
    assert_int_equal(o->where, TG_OFFENCE_CONSTANT);
    assert_string_equal(o->var, "c");
    assert_non_null(strstr(tg_ctx_message(ctx), "constant 'c'"));
    tg_nanguard_free(ng);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* k = 10^12 (int64, above 1e10 but not checked) + 1, then cast to
 * float64: the cast is the first node with a value above 1e10. */
static void test_integers_not_checked(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq("{'format':'tg-graph','version':1,'variables':[{'id':'k','type':{'dtype':'int64','shape':[1]}}],"
                       "'nodes':[{'op':'add','inputs':['k',{'value':1}],'outputs':['k1']},"
                       "{'op':'cast','inputs':['k1'],'outputs':['kf'],'attrs':{'dtype':'float64'}}]}");
    tg_function *f = compile(g, "none");
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {1};
    tg_array *k = tg_array_new(TG_INT64, 1, shape), *out[1] = {NULL};
    *(int64_t *)tg_array_data(k) = 1000000000000LL;
    tg_nanguard *ng = tg_nanguard_new(f, NULL, ctx);
    assert_int_equal(tg_nanguard_call(ng, &k, out, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_string_equal(o->var, "kf");
    assert_int_equal(o->what, TG_BAD_BIG);
    tg_nanguard_free(ng);
    /* --big inf: nothing to find. */
    tg_nanguard_options opt = {.big = INFINITY};
    ng = tg_nanguard_new(f, &opt, ctx);
    assert_int_equal(tg_nanguard_call(ng, &k, out, ctx), TG_OK);
    assert_null(tg_nanguard_offence(ng));
    tg_array_free(out[0]);
    tg_nanguard_free(ng);
    tg_array_free(k);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* s_next = s * 10 from s = 1, threshold 1e3: calls 1..3 make 10, 100,
 * 1000; call 4 makes 1e4. The stopped call applies no update (s stays
 * 1000); with threshold 500 the next call finds the shared value itself. */
static void test_calls_and_shared(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq("{'format':'tg-graph','version':1,'variables':[{'id':'s','type':{'dtype':'float64','shape':[]},"
                       "'shared':{'data':1}}],'nodes':[{'op':'mul','inputs':['s',{'value':10.0}],'outputs':['s2']}],"
                       "'functions':{'step':{'inputs':[],'outputs':[],'updates':{'s':'s2'}}}}");
    tg_function *f = compile(g, "fast_run");
    tg_ctx *ctx = tg_ctx_new();
    tg_nanguard_options opt = {.big = 1e3};
    tg_nanguard *ng = tg_nanguard_new(f, &opt, ctx);
    int rc = TG_OK;
    int calls = 0;
    while (calls < 10 && (rc = tg_nanguard_call(ng, NULL, NULL, ctx)) == TG_OK) calls++;
    assert_int_equal(rc, TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->call, 4);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_true(o->stats.max == 1e4);
    assert_true(tg_array_get_flat(tg_function_shared_get(f, "s"), 0) == 1000);
    tg_nanguard_free(ng);
    opt.big = 500;
    ng = tg_nanguard_new(f, &opt, ctx);
    assert_int_equal(tg_nanguard_call(ng, NULL, NULL, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_SHARED);
    assert_string_equal(o->var, "s");
    tg_nanguard_free(ng);
    /* A guard does not read again a value its last call checked (the
     * update it checked as the node's output), but a value set since, or
     * updated by an unguarded call, it does. */
    tg_array *one = tg_array_new_scalar(TG_FLOAT64, 1), *nan = tg_array_new_scalar(TG_FLOAT64, NAN);
    assert_int_equal(tg_function_shared_set(f, "s", one, ctx), TG_OK);
    opt.big = 1e3;
    ng = tg_nanguard_new(f, &opt, ctx);
    assert_int_equal(tg_nanguard_call(ng, NULL, NULL, ctx), TG_OK); /* s = 10 */
    assert_int_equal(tg_function_shared_set(f, "s", nan, ctx), TG_OK);
    assert_int_equal(tg_nanguard_call(ng, NULL, NULL, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_SHARED);
    assert_true(o->what & TG_BAD_NAN);
    assert_int_equal(tg_function_shared_set(f, "s", one, ctx), TG_OK);
    assert_int_equal(tg_nanguard_call(ng, NULL, NULL, ctx), TG_OK); /* s = 10 */
    tg_function *f2 = compile(g, "fast_run"); /* the same step, unguarded */
    for (int i = 0; i < 3; i++) assert_int_equal(tg_function_call(f2, NULL, NULL, ctx), TG_OK); /* 1e4 */
    assert_int_equal(tg_nanguard_call(ng, NULL, NULL, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_SHARED);
    assert_true(o->what & TG_BAD_BIG);
    tg_function_free(f2);
    tg_array_free(one);
    tg_array_free(nan);
    tg_nanguard_free(ng);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* An SGD step, W <- W - 0.25 x^T g (GR x GC weights of dtype dt, any
 * batch), which the optimizer makes one gemm written over W: `step`
 * alone, `fwd` with the forward product x W (read before the update), and
 * `decay` with weight decay, W - 0.25 (x^T g + 0.5 W) (a gemm with beta
 * 0.875). */
enum { GR = 48, GC = 40 };

static tg_graph *sgd_graph(const char *dt) {
    tg_str s = {0};
    tg_str_addf(&s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                    "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,%d]}},"
                    "{\"id\":\"g\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,%d]}},"
                    "{\"id\":\"W\",\"type\":{\"dtype\":\"%s\",\"shape\":[%d,%d]},\"shared\":{\"data\":[",
                dt, GR, dt, GC, dt, GR, GC);
    for (int i = 0; i < GR; i++) {
        tg_str_addf(&s, "%s[", i ? "," : "");
        for (int j = 0; j < GC; j++) tg_str_addf(&s, "%s0", j ? "," : "");
        tg_str_addf(&s, "]");
    }
    tg_str_addf(&s, "]}}],\"nodes\":["
                    "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xT\"]},"
                    "{\"op\":\"dot\",\"inputs\":[\"xT\",\"g\"],\"outputs\":[\"d\"]},"
                    "{\"op\":\"mul\",\"inputs\":[\"d\",{\"value\":0.25}],\"outputs\":[\"sd\"]},"
                    "{\"op\":\"sub\",\"inputs\":[\"W\",\"sd\"],\"outputs\":[\"W1\"]},"
                    "{\"op\":\"dot\",\"inputs\":[\"x\",\"W\"],\"outputs\":[\"y\"]},"
                    "{\"op\":\"sum\",\"inputs\":[\"y\"],\"outputs\":[\"cost\"]},"
                    "{\"op\":\"mul\",\"inputs\":[\"W\",{\"value\":0.5}],\"outputs\":[\"wW\"]},"
                    "{\"op\":\"add\",\"inputs\":[\"d\",\"wW\"],\"outputs\":[\"dd\"]},"
                    "{\"op\":\"mul\",\"inputs\":[\"dd\",{\"value\":0.25}],\"outputs\":[\"sdd\"]},"
                    "{\"op\":\"sub\",\"inputs\":[\"W\",\"sdd\"],\"outputs\":[\"W2\"]}],"
                    "\"functions\":{\"step\":{\"inputs\":[\"x\",\"g\"],\"outputs\":[],\"updates\":{\"W\":\"W1\"}},"
                    "\"fwd\":{\"inputs\":[\"x\",\"g\"],\"outputs\":[\"cost\"],\"updates\":{\"W\":\"W1\"}},"
                    "\"decay\":{\"inputs\":[\"x\",\"g\"],\"outputs\":[],\"updates\":{\"W\":\"W2\"}}}}");
    tg_graph *g = tu_load(s.s);
    tg_str_free(&s);
    return g;
}

static tg_array *filled(int rows, int cols, double (*fn)(int, int)) {
    tg_array *a = tg_array_new(TG_FLOAT64, 2, (int64_t[]){rows, cols});
    double *p = tg_array_data(a);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) p[i * cols + j] = fn(i, j);
    return a;
}

/* quarters in [-2, 2): every product and sum below is exact */
static double quarters(int i, int j) { return (double)((i * 7 + j * 3) % 16 - 8) / 4; }
static double quarters_b(int i, int j) { return (double)((i * 5 + j * 11 + 3) % 16 - 8) / 4; }
static double plus_2048(int i, int j) { return (void)i, (void)j, 2048; }
static double pm_2048(int i, int j) { return (void)j, i ? -2048 : 2048; }
static double plus_64(int i, int j) { return (void)i, (void)j, 64; }
static double near_minus_big(int i, int j) { return (void)i, (void)j, -999000; }

static const double *w_of(const tg_function *f) {
    return tg_array_data((tg_array *)tg_function_shared_get(f, "W"));
}

/* W - 0.25 x^T g into w, by loops. */
static void sgd_by_hand(double *w, const tg_array *x, const tg_array *g) {
    const double *px = tg_array_data((tg_array *)x), *pg = tg_array_data((tg_array *)g);
    for (int i = 0; i < GR; i++)
        for (int j = 0; j < GC; j++) w[i * GC + j] -= 0.25 * (px[i] * pg[j] + px[GR + i] * pg[GC + j]);
}

/* The step's gemm overwrites W in place under the guard when its result
 * provably passes the check (nanguard.c, commit_ok), and is checked, on a
 * copy, when the bound says it might not: then a bad result stops the
 * call and W is left as it was. The bound on W comes from the check at
 * a call's start: after W is set anew, the old bound is not used. */
static void test_inplace_update(void **state) {
    (void)state;
    tg_graph *g = sgd_graph("float64");
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options co = {.preset = "fast_run"};
    tg_function *fs[2];
    for (int k = 0; k < 2; k++) {
        fs[k] = tg_function_compile(g, tg_graph_function_find(g, k ? "fwd" : "step", ctx), &co, ctx);
        assert_non_null(fs[k]);
        int n = tg_function_node_count(fs[k]);
        assert_string_equal(tg_function_node_op(fs[k], n - 1), "gemm");
    }
    tg_nanguard_options opt = {.big = 1e6};
    tg_array *w0 = filled(GR, GC, quarters);
    double ref[GR * GC];
    memcpy(ref, tg_array_data(w0), sizeof ref);

    /* Clean steps, with and without a forward product reading W first:
     * written where W lies, exactly the loops' values. */
    tg_array *x = filled(2, GR, quarters), *gr = filled(2, GC, quarters_b);
    tg_array *in[2] = {x, gr};
    for (int k = 0; k < 2; k++) {
        tg_function *f = fs[k];
        assert_int_equal(tg_function_shared_set(f, "W", w0, ctx), TG_OK);
        memcpy(ref, tg_array_data(w0), sizeof ref);
        tg_nanguard *ng = tg_nanguard_new(f, &opt, ctx);
        assert_non_null(ng);
        const double *at = w_of(f);
        for (int step = 0; step < 20; step++) {
            tg_array *out[1] = {NULL};
            assert_int_equal(tg_nanguard_call(ng, in, out, ctx), TG_OK);
            tg_array_free(out[0]);
            sgd_by_hand(ref, x, gr);
            assert_ptr_equal(w_of(f), at);
            assert_memory_equal(w_of(f), ref, sizeof ref);
            /* W read when it comes in, then neither as shared state nor
             * as the gemm's output */
            if (step == 0)
                assert_true(tg_nanguard_elements_read(ng) >= GR * GC);
            else
                assert_true(tg_nanguard_elements_read(ng) < GR * GC);
        }
        tg_nanguard_free(ng);
    }
    tg_function *f = fs[0];
    tg_nanguard *ng = tg_nanguard_new(f, &opt, ctx);
    assert_non_null(ng);
    tg_array_free(x);
    tg_array_free(gr);

    /* x^T g is 2048*2048 - 2048*2048 = 0, but the bound, 0.25 * 2 * 2048^2
     * > 1e6, cannot tell: a copy, checked, and the step goes through. */
    assert_int_equal(tg_function_shared_set(f, "W", w0, ctx), TG_OK);
    memcpy(ref, tg_array_data(w0), sizeof ref);
    x = filled(2, GR, plus_2048);
    gr = filled(2, GC, pm_2048);
    in[0] = x;
    in[1] = gr;
    const double *at = w_of(f);
    assert_int_equal(tg_nanguard_call(ng, in, NULL, ctx), TG_OK);
    assert_memory_equal(w_of(f), ref, sizeof ref);
    assert_ptr_not_equal(w_of(f), at);
    tg_array_free(gr);

    /* Now x^T g is 2 * 2048^2: W would pass 1e6. The gemm is named and W
     * is left as it was. */
    gr = filled(2, GC, plus_2048);
    in[1] = gr;
    assert_int_equal(tg_nanguard_call(ng, in, NULL, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_string_equal(tg_function_node_op(f, o->node), "gemm");
    assert_true(o->what & TG_BAD_BIG);
    assert_memory_equal(w_of(f), ref, sizeof ref);
    tg_array_free(x);
    tg_array_free(gr);

    /* A clean step in place (the bound on W: 2), then W set to -999000:
     * a step of 0.25 * 2 * 64^2 = 2048 takes it past -1e6, which the
     * bound from W's old value (2 + 2048) would have let through. */
    x = filled(2, GR, plus_64);
    gr = filled(2, GC, plus_64);
    in[0] = x;
    in[1] = gr;
    tg_array *small[2] = {filled(2, GR, quarters), filled(2, GC, quarters_b)};
    assert_int_equal(tg_function_shared_set(f, "W", w0, ctx), TG_OK);
    at = w_of(f);
    assert_int_equal(tg_nanguard_call(ng, small, NULL, ctx), TG_OK);
    assert_ptr_equal(w_of(f), at);
    tg_array *big = filled(GR, GC, near_minus_big);
    assert_int_equal(tg_function_shared_set(f, "W", big, ctx), TG_OK);
    /* f called directly, its hooks still the guard's but with no check
     * at the start: the bound it has is for W's old value, not used */
    assert_int_equal(tg_function_call(f, in, NULL, ctx), TG_ESTOPPED);
    assert_memory_equal(w_of(f), tg_array_data(big), sizeof ref);
    assert_int_equal(tg_nanguard_call(ng, in, NULL, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_true(o->what & TG_BAD_BIG);
    assert_memory_equal(w_of(f), tg_array_data(big), sizeof ref);

    tg_array *objs[] = {x, gr, small[0], small[1], big, w0};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tg_array_free(objs[i]);
    tg_nanguard_free(ng);
    tg_function_free(fs[0]);
    tg_function_free(fs[1]);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

static uint64_t rng_state = 88172645463325252ull;
static double urand(void) { /* [0, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Uniform in [-scale, scale), or in [0, scale) when positive. */
static tg_array *rand_matrix(tg_dtype dt, int rows, int cols, double scale, bool positive) {
    tg_array *a = tg_array_new(dt, 2, (int64_t[]){rows, cols});
    for (int64_t i = 0; i < (int64_t)rows * cols; i++)
        tg_store_f64(dt, (char *)tg_array_data(a) + i * (int64_t)tg_dtype_size(dt),
                     (positive ? urand() : 2 * urand() - 1) * scale);
    return a;
}

/* The proof against the plain step, on random weights, batches and
 * magnitudes from 1 to 10^6 (the threshold): the guarded step stops
 * exactly when the plain step's result passes the threshold (no offence
 * missed by a proof, none invented), at the gemm, leaving W as it was;
 * otherwise its W is the plain step's. Steps follow each other on the
 * same weights half the time (bounds carried from call to call), float32
 * and float64, with and without weight decay; both the in-place and the
 * copying path are taken. */
static void test_inplace_random(void **state) {
    (void)state;
    const double T = 1e6;
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options co = {.preset = "fast_run"};
    int in_place = 0, copied = 0, stopped = 0;
    for (int t = 0; t < 2; t++) {
        const tg_dtype dt = t ? TG_FLOAT64 : TG_FLOAT32;
        const double rtol = t ? 1e-14 : 1e-6;
        tg_graph *g1 = sgd_graph(tg_dtype_name(dt)), *g2 = sgd_graph(tg_dtype_name(dt));
        for (int fn = 0; fn < 2; fn++) {
            const char *name = fn ? "decay" : "step";
            tg_function *fg = tg_function_compile(g1, tg_graph_function_find(g1, name, ctx), &co, ctx),
                        *fp = tg_function_compile(g2, tg_graph_function_find(g2, name, ctx), &co, ctx);
            assert_true(fg && fp);
            tg_nanguard_options opt = {.big = T};
            tg_nanguard *ng = tg_nanguard_new(fg, &opt, ctx);
            assert_non_null(ng);
            bool fresh = true;
            for (int trial = 0; trial < 150; trial++) {
                if (fresh || urand() < 0.5) {
                    tg_array *w = rand_matrix(dt, GR, GC, pow(10, 6 * urand()), false);
                    assert_int_equal(tg_function_shared_set(fg, "W", w, ctx), TG_OK);
                    assert_int_equal(tg_function_shared_set(fp, "W", w, ctx), TG_OK);
                    tg_array_free(w);
                }
                /* 0.25 b max|x| max|g| from 0.01 T to 10 T, same signs a
                 * third of the time (the bound then nearly met) */
                const int b = 1 + trial % 7;
                const double step = T * pow(10, 3 * urand() - 2), split = pow(10, urand() - 0.5);
                const double sx = sqrt(step / (0.25 * b)) * split, sg = sqrt(step / (0.25 * b)) / split;
                const bool same = urand() < 1.0 / 3;
                tg_array *in[2] = {rand_matrix(dt, b, GR, sx, same), rand_matrix(dt, b, GC, sg, same)};
                tg_array *was = tg_array_copy(tg_function_shared_get(fg, "W"), dt);
                const void *at = tg_array_data((tg_array *)tg_function_shared_get(fg, "W"));
                int rc = tg_nanguard_call(ng, in, NULL, ctx);
                assert_int_equal(tg_function_call(fp, in, NULL, ctx), TG_OK);
                const tg_array *want = tg_function_shared_get(fp, "W"), *got = tg_function_shared_get(fg, "W");
                bool bad = false;
                for (int64_t i = 0; i < GR * GC && !bad; i++) bad = !(fabs(tg_array_get_flat(want, i)) <= T);
                if (bad) {
                    if (rc != TG_ESTOPPED) fail_msg("trial %d (%s, %s): a bad step went through", trial, tg_dtype_name(dt), name);
                    const tg_offence *o = tg_nanguard_offence(ng);
                    assert_int_equal(o->where, TG_OFFENCE_NODE);
                    assert_string_equal(tg_function_node_op(fg, o->node), "gemm");
                    assert_memory_equal(tg_array_data((tg_array *)got), tg_array_data(was),
                                        (size_t)GR * GC * tg_dtype_size(dt));
                    /* the plain function goes on from the guarded one's weights */
                    assert_int_equal(tg_function_shared_set(fp, "W", got, ctx), TG_OK);
                    stopped++;
                    fresh = true;
                } else {
                    if (rc != TG_OK) fail_msg("trial %d (%s, %s): %s", trial, tg_dtype_name(dt), name, tg_ctx_message(ctx));
                    tu_assert_close(got, want, rtol, 0);
                    if (tg_array_data((tg_array *)got) == at)
                        in_place++;
                    else
                        copied++;
                    fresh = false;
                }
                tg_array_free(was);
                tg_array_free(in[0]);
                tg_array_free(in[1]);
            }
            tg_nanguard_free(ng);
            tg_function_free(fg);
            tg_function_free(fp);
        }
        tg_graph_free(g1);
        tg_graph_free(g2);
    }
    /* every path taken, many times */
    if (in_place < 50 || copied < 20 || stopped < 20)
        fail_msg("in place %d, copied %d, stopped %d", in_place, copied, stopped);
    tg_ctx_free(ctx);
}

/* Guard the function of json compiled with preset, call it `calls` times
 * (or until an offence) on x (NULL: no inputs); returns the status of
 * the last call, the guard and the function left for the test to read
 * and free. */
static int guard_calls(const char *json, const char *preset, const tg_nanguard_options *opt, tg_array *x, int calls,
                       tg_graph **g, tg_function **f, tg_nanguard **ng, tg_ctx *ctx) {
    *g = tu_load_sq(json);
    *f = compile(*g, preset);
    *ng = tg_nanguard_new(*f, opt, ctx);
    assert_non_null(*ng);
    int rc = TG_OK;
    for (int i = 0; i < calls && rc == TG_OK; i++) {
        tg_array *out[2] = {NULL, NULL};
        rc = tg_nanguard_call(*ng, x ? &x : NULL, out, ctx);
        tg_array_free(out[0]);
        tg_array_free(out[1]);
    }
    return rc;
}

static void guard_done(tg_graph *g, tg_function *f, tg_nanguard *ng) {
    tg_nanguard_free(ng);
    tg_function_free(f);
    tg_graph_free(g);
}

/* z = log(c), c = -1, returned: constant folding makes z a NaN constant
 * that no node makes at run time. The guard checks such outputs, and
 * names the file's variable it was folded from; every call reports it.
 * With -O none the log node makes it. */
static const char *FOLD_OUT =
    "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[2]}},"
    "{'id':'c','type':{'dtype':'float64','shape':[]},'constant':{'data':-1}}],"
    "'nodes':[{'op':'log','inputs':['c'],'outputs':['z']},{'op':'mul','inputs':['x',{'value':2.0}],'outputs':['y']}],"
    "'functions':{'main':{'inputs':['x'],'outputs':['y','z']}}}";

static void test_folded_constant_output(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {2};
    double xv[2] = {1, 2};
    tg_array *x = tu_f64(1, shape, xv);
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    assert_int_equal(guard_calls(FOLD_OUT, "fast_run", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_non_null(o);
    assert_int_equal(o->where, TG_OFFENCE_CONSTANT);
    assert_int_equal(o->node, -1);
    assert_int_equal(o->output, 1);
    assert_int_equal(o->what, TG_BAD_NAN);
    assert_int_equal(o->stats.nan, 1);
    assert_non_null(o->folded_from);
    assert_string_equal(o->folded_from, "z");
    assert_null(o->update_of);
    assert_null(tg_nanguard_node_input(ng, 0));
    assert_non_null(strstr(tg_ctx_message(ctx), "(folded from 'z'), output 'z', holds NaN"));
    /* checked once, reported at every call */
    tg_array *out[2] = {NULL, NULL};
    assert_int_equal(tg_nanguard_call(ng, &x, out, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->call, 2);
    assert_int_equal(o->where, TG_OFFENCE_CONSTANT);
    guard_done(g, f, ng);
    assert_int_equal(guard_calls(FOLD_OUT, "none", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_string_equal(tg_function_node_key(f, o->node), "z");
    guard_done(g, f, ng);
    /* --no-nan: nothing else is wrong */
    tg_nanguard_options opt = {.no_nan = true};
    assert_int_equal(guard_calls(FOLD_OUT, "fast_run", &opt, x, 2, &g, &f, &ng, ctx), TG_OK);
    assert_null(tg_nanguard_offence(ng));
    guard_done(g, f, ng);
    tg_array_free(x);
    tg_ctx_free(ctx);
}

/* The file's own NaN constant returned as is: no rewrite made it. */
static void test_file_constant_output(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {2};
    double xv[2] = {1, 2};
    tg_array *x = tu_f64(1, shape, xv);
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    const char *json = "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[2]}},"
                       "{'id':'c','type':{'dtype':'float64','shape':[]},'constant':{'data':'nan'}}],"
                       "'nodes':[{'op':'mul','inputs':['x',{'value':2.0}],'outputs':['y']}],"
                       "'functions':{'main':{'inputs':['x'],'outputs':['y','c']}}}";
    const char *presets[] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        assert_int_equal(guard_calls(json, presets[p], NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
        const tg_offence *o = tg_nanguard_offence(ng);
        assert_int_equal(o->where, TG_OFFENCE_CONSTANT);
        assert_string_equal(o->var, "c");
        assert_int_equal(o->output, 1);
        assert_null(o->folded_from);
        guard_done(g, f, ng);
    }
    tg_array_free(x);
    tg_ctx_free(ctx);
}

/* The folded NaN as the new value of shared w: found at call 1 (before,
 * call 2 found w holding it), w left as it was. */
static void test_folded_constant_update(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    const char *json = "{'format':'tg-graph','version':1,'variables':[{'id':'w','type':{'dtype':'float64','shape':[]},"
                       "'shared':{'data':1}},{'id':'c','type':{'dtype':'float64','shape':[]},'constant':{'data':-1}}],"
                       "'nodes':[{'op':'log','inputs':['c'],'outputs':['z']},{'op':'add','inputs':['w',{'value':1.0}],'outputs':['o']}],"
                       "'functions':{'main':{'inputs':[],'outputs':['o'],'updates':{'w':'z'}}}}";
    assert_int_equal(guard_calls(json, "fast_run", NULL, NULL, 3, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->call, 1);
    assert_int_equal(o->where, TG_OFFENCE_CONSTANT);
    assert_int_equal(o->node, -1);
    assert_int_equal(o->output, 1); /* after the one output */
    assert_non_null(o->update_of);
    assert_string_equal(o->update_of, "w");
    assert_string_equal(o->folded_from, "z");
    assert_non_null(strstr(tg_ctx_message(ctx), "the new value of shared variable 'w'"));
    assert_true(tg_array_get_flat(tg_function_shared_get(f, "w"), 0) == 1);
    guard_done(g, f, ng);
    tg_ctx_free(ctx);
}

/* A folded NaN vector read by a dot: the constant, folded from z. */
static void test_folded_constant_read(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {3};
    double xv[3] = {1, 2, 3};
    tg_array *x = tu_f64(1, shape, xv);
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    const char *json = "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[3]}},"
                       "{'id':'c','type':{'dtype':'float64','shape':[3]},'constant':{'data':[1,-1,2]}}],"
                       "'nodes':[{'op':'log','inputs':['c'],'outputs':['z']},{'op':'dot','inputs':['x','z'],'outputs':['y']}]}";
    assert_int_equal(guard_calls(json, "fast_run", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_CONSTANT);
    assert_true(o->node >= 0);
    assert_string_equal(tg_function_node_key(f, o->node), "y");
    assert_non_null(o->folded_from);
    assert_string_equal(o->folded_from, "z");
    assert_int_equal(o->stats.nan, 1);
    guard_done(g, f, ng);
    tg_array_free(x);
    tg_ctx_free(ctx);
}

/* q = x / c, c = [1e11, 0], x = [1, 0]: q = [1e-11, NaN]. c holds a big
 * value, but a big value explains no NaN: q made it. */
static void test_big_constant_explains_no_nan(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {2};
    double xv[2] = {1, 0};
    tg_array *x = tu_f64(1, shape, xv);
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    const char *json = "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[2]}},"
                       "{'id':'c','type':{'dtype':'float64','shape':[2]},'constant':{'data':[1e11,0]}}],"
                       "'nodes':[{'op':'true_div','inputs':['x','c'],'outputs':['q']}]}";
    assert_int_equal(guard_calls(json, "none", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_string_equal(tg_function_node_key(f, o->node), "q");
    assert_int_equal(o->what, TG_BAD_NAN);
    guard_done(g, f, ng);
    /* q = x * c with c = [1e11, 1], x = [1, 1]: q = [1e11, 1] is big, as
     * c is: the same kind of bad value, so c is the source. */
    const char *json2 = "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[2]}},"
                        "{'id':'c','type':{'dtype':'float64','shape':[2]},'constant':{'data':[1e11,1]}}],"
                        "'nodes':[{'op':'mul','inputs':['x','c'],'outputs':['q']}]}";
    double xv2[2] = {1, 1};
    tg_array *x2 = tu_f64(1, shape, xv2);
    assert_int_equal(guard_calls(json2, "none", NULL, x2, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_CONSTANT);
    assert_string_equal(o->var, "c");
    assert_int_equal(o->what, TG_BAD_BIG);
    guard_done(g, f, ng);
    tg_array_free(x);
    tg_array_free(x2);
    tg_ctx_free(ctx);
}

/* float32 exp(x) * 0 + 1, fused: exp(100) is an infinity, which the mul
 * by 0 makes the output's NaN. The body op found is the exp, and what it
 * made is an infinity. */
static void test_fused_body_op_made_inf(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {3};
    tg_array *x = tg_array_new(TG_FLOAT32, 1, shape);
    float *xd = tg_array_data(x);
    xd[0] = 1;
    xd[1] = 100;
    xd[2] = 2;
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    const char *json = "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float32','shape':[3]}}],"
                       "'nodes':[{'op':'exp','inputs':['x'],'outputs':['e']},"
                       "{'op':'mul','inputs':['e',{'value':0.0}],'outputs':['z']},"
                       "{'op':'add','inputs':['z',{'value':1.0}],'outputs':['o']}]}";
    assert_int_equal(guard_calls(json, "fast_run", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_string_equal(tg_function_node_op(f, o->node), "composite");
    assert_int_equal(o->what, TG_BAD_NAN);
    assert_non_null(o->body_op);
    assert_string_equal(o->body_op, "exp");
    assert_int_equal(o->body_what, TG_BAD_INF);
    assert_int_equal(o->body_stats.inf, 1);
    assert_int_equal(o->body_stats.nan, 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "(composite: its exp) made an infinity (1 of 3 elements), and the output 'o' holds NaN"));
    guard_done(g, f, ng);
    tg_array_free(x);
    tg_ctx_free(ctx);
}

/* A rewrite that makes two nodes of one: exp(log a) is
 * switch(ge(a, 0), a, nan), both standing for c, and fusion puts them in
 * one composite with a = x*y, b = log a (an output, so it stays) and
 * d = y - c: body t0 mul (a), t1 ge and t2 switch (c), t3 log (b), t4
 * sub (d). The NaN of log(-1) is b's, by hand. The composite's origins
 * name c once; its groups repeat it. The groups once indexed the
 * origins, so that the union the rewrite engine made of them (each key
 * once) shifted every group after c's: t3 was named d, and without d
 * (not an output) a NULL past the end. The same from the function's
 * .tgf and from a copy of it. */
static const char *PAIR =
    "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[3]}},"
    "{'id':'y','type':{'dtype':'float64','shape':[3]}}],"
    "'nodes':[{'op':'mul','inputs':['x','y'],'outputs':['a']},"
    "{'op':'log','inputs':['a'],'outputs':['b']},"
    "{'op':'exp','inputs':['b'],'outputs':['c']},"
    "{'op':'sum','inputs':['c'],'outputs':['s'],'attrs':{'axis':null}},"
    "{'op':'sub','inputs':['y','c'],'outputs':['d']}],"
    "'functions':{'main':{'inputs':['x','y'],'outputs':['s','b','d']}}}";

static void expect_pair_b(tg_function *f, tg_array *const *in, tg_ctx *ctx) {
    tg_nanguard *ng = tg_nanguard_new(f, NULL, ctx);
    assert_non_null(ng);
    tg_array *out[3] = {NULL, NULL, NULL};
    assert_int_equal(tg_nanguard_call(ng, in, out, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_non_null(o);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_string_equal(tg_function_node_op(f, o->node), "composite");
    assert_non_null(o->body_op);
    assert_string_equal(o->body_op, "log");
    assert_string_equal(o->body_var, "t3");
    assert_int_equal(o->norigins, 1);
    assert_string_equal(o->origins[0], "b");
    /* the composite's origins: each original node once */
    const char *const *keys;
    int no = tg_function_node_origins(f, o->node, &keys);
    assert_int_equal(no, 4);
    const char *want[4] = {"a", "c", "b", "d"};
    for (int i = 0; i < 4; i++) assert_string_equal(keys[i], want[i]);
    for (int i = 0; i < 3; i++) tg_array_free(out[i]);
    tg_nanguard_free(ng);
}

static void test_fused_rewrite_pair(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {3};
    tg_array *in[2] = {tu_f64(1, shape, (double[]){1, -1, 2}), tu_f64(1, shape, (double[]){1, 2, 3})};
    tg_graph *g = tu_load_sq(PAIR);
    tg_function *f = compile(g, "fast_run");
    /* the optimized graph is as the comment says */
    int nc = 0;
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_op(f, k), "composite")) {
            nc++;
            int nf, nk;
            const char *const *gk;
            const int *st = tg_composite_origin_groups(f->sched[k].node, &nf, &gk, &nk);
            assert_non_null(st);
            assert_int_equal(nf, 5);
            assert_int_equal(nk, 5);
            const char *want[5] = {"a", "c", "c", "b", "d"};
            for (int j = 0; j < 5; j++) {
                assert_int_equal(st[j], j);
                assert_string_equal(gk[j], want[j]);
            }
        }
    assert_int_equal(nc, 1);
    expect_pair_b(f, in, ctx);
    char dir[] = "/tmp/tg_test_nanguard.XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/pair.tgf", dir);
    if (tg_tgf_save(path, &f, 1, NULL, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    expect_pair_b(tg_tgf_function(t, 0), in, ctx);
    tg_function *c = tg_function_copy(tg_tgf_function(t, 0), NULL, NULL, 0, ctx);
    if (!c) fail_msg("%s", tg_ctx_message(ctx));
    expect_pair_b(c, in, ctx);
    tg_function_free(c);
    tg_tgf_free(t);
    unlink(path);
    rmdir(dir);
    tg_function_free(f);
    tg_graph_free(g);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
}

/* A float32 threshold that float32 cannot hold: 16777219 lies between
 * the floats 16777218 and 16777220; 16777220 is above it. */
static void test_float32_threshold(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {2};
    tg_array *x = tg_array_new(TG_FLOAT32, 1, shape);
    float *xd = tg_array_data(x);
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    const char *json = "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float32','shape':[2]}}],"
                       "'nodes':[{'op':'mul','inputs':['x',{'value':2.0}],'outputs':['y']}]}";
    tg_nanguard_options opt = {.big = 16777219};
    xd[0] = 1;
    xd[1] = 8388610; /* y = 16777220 */
    assert_int_equal(guard_calls(json, "none", &opt, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_int_equal(o->what, TG_BAD_BIG);
    assert_int_equal(o->stats.big, 1);
    guard_done(g, f, ng);
    xd[1] = 8388609; /* y = 16777218 */
    assert_int_equal(guard_calls(json, "none", &opt, x, 1, &g, &f, &ng, ctx), TG_OK);
    guard_done(g, f, ng);
    tg_array_free(x);
    /* the threshold itself passes, as in float64 */
    x = tg_array_new(TG_FLOAT32, 1, shape);
    xd = tg_array_data(x);
    xd[0] = 1;
    xd[1] = 4;
    opt.big = 8;
    assert_int_equal(guard_calls(json, "none", &opt, x, 1, &g, &f, &ng, ctx), TG_OK);
    guard_done(g, f, ng);
    tg_array_free(x);
    tg_ctx_free(ctx);
}

/* A scan h_t = h_{t-1} - 1, l_t = log(h_t) from h0 = 2.5: the third
 * step (index 2) is the first with a NaN. */
static void test_scan_step(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    const char *json =
        "{'format':'tg-graph','version':1,'variables':[{'id':'h0','type':{'dtype':'float64','shape':[]}}],"
        "'nodes':[{'op':'scan','inputs':[{'value':{'dtype':'int64','data':4}},'h0'],'outputs':['H','L'],"
        "'attrs':{'body':{'variables':[{'id':'h','type':{'dtype':'float64','shape':[]}}],"
        "'nodes':[{'op':'sub','inputs':['h',{'value':1.0}],'outputs':['h1']},{'op':'log','inputs':['h1'],'outputs':['l']}],"
        "'inputs':['h'],'outputs':['h1','l']},'n_sequences':0,'sequence_taps':[],'n_recurrent':1,'output_taps':[[-1]],"
        "'n_nonrecurrent':1,'n_non_sequences':0,'has_n_steps':true,'has_until':false}}],"
        "'functions':{'main':{'inputs':['h0'],'outputs':['L']}}}";
    tg_array *h0 = tg_array_new_scalar(TG_FLOAT64, 2.5);
    const char *presets[] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_graph *g;
        tg_function *f;
        tg_nanguard *ng;
        assert_int_equal(guard_calls(json, presets[p], NULL, h0, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
        const tg_offence *o = tg_nanguard_offence(ng);
        assert_int_equal(o->where, TG_OFFENCE_NODE);
        assert_string_equal(tg_function_node_op(f, o->node), "scan");
        assert_int_equal(o->step, 2);
        assert_non_null(strstr(tg_ctx_message(ctx), "first at step 3 of the loop"));
        guard_done(g, f, ng);
    }
    /* not a scan: no step */
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    double xv[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    tg_array *x = tu_f64(1, shape, xv);
    assert_int_equal(guard_calls(DEEP, "none", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    assert_int_equal(tg_nanguard_offence(ng)->step, -1);
    guard_done(g, f, ng);
    tg_array_free(x);
    tg_array_free(h0);
    tg_ctx_free(ctx);
}

/* Inside a body: the same scan names its body's log 'l' at step 3 (index
 * 2); a body whose log feeds a mul (fused into a composite of the body)
 * names the fused log and the body node 'lg' it stands for; an
 * op_from_graph whose body takes sqrt(a - b) of a = [1, 2], b = [2, 1]
 * names its sqrt (no step). */
static void test_body_node(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    static const char *const bodies[] = {
        "'nodes':[{'op':'sub','inputs':['h',{'value':1.0}],'outputs':['h1']},{'op':'log','inputs':['h1'],'outputs':['l']}],"
        "'inputs':['h'],'outputs':['h1','l']",
        "'nodes':[{'op':'sub','inputs':['h',{'value':1.0}],'outputs':['h1']},{'op':'log','inputs':['h1'],'outputs':['lg']},"
        "{'op':'mul','inputs':['lg',{'value':2.0}],'outputs':['l']}],'inputs':['h'],'outputs':['h1','l']",
    };
    tg_array *h0 = tg_array_new_scalar(TG_FLOAT64, 2.5);
    for (int b = 0; b < 2; b++) {
        char json[2048];
        snprintf(json, sizeof json,
                 "{'format':'tg-graph','version':1,'variables':[{'id':'h0','type':{'dtype':'float64','shape':[]}}],"
                 "'nodes':[{'op':'scan','inputs':[{'value':{'dtype':'int64','data':4}},'h0'],'outputs':['H','L'],"
                 "'attrs':{'body':{'variables':[{'id':'h','type':{'dtype':'float64','shape':[]}}],%s},"
                 "'n_sequences':0,'sequence_taps':[],'n_recurrent':1,'output_taps':[[-1]],"
                 "'n_nonrecurrent':1,'n_non_sequences':0,'has_n_steps':true,'has_until':false}}],"
                 "'functions':{'main':{'inputs':['h0'],'outputs':['L']}}}",
                 bodies[b]);
        const char *presets[] = {"none", "fast_run"};
        for (int p = 0; p < 2; p++) {
            tg_graph *g;
            tg_function *f;
            tg_nanguard *ng;
            assert_int_equal(guard_calls(json, presets[p], NULL, h0, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
            const tg_offence *o = tg_nanguard_offence(ng);
            assert_string_equal(tg_function_node_op(f, o->node), "scan");
            assert_non_null(o->body_fn);
            assert_int_equal(o->step, 2);
            assert_string_equal(o->body_op, "log");
            assert_true(o->body_what & TG_BAD_NAN);
            assert_int_equal(o->norigins, 1);
            if (b == 0) {
                assert_string_equal(tg_function_node_key(o->body_fn, o->body_node), "l");
                assert_string_equal(o->origins[0], "l");
                assert_non_null(strstr(tg_ctx_message(ctx), "(scan: its log 'l') made NaN"));
            } else {
                /* the body runs optimized: log and mul are one composite */
                assert_string_equal(tg_function_node_op(o->body_fn, o->body_node), "composite");
                assert_string_equal(o->origins[0], "lg");
            }
            assert_non_null(strstr(tg_ctx_message(ctx), "first at step 3 of the loop"));
            guard_done(g, f, ng);
        }
    }
    const char *ofg =
        "{'format':'tg-graph','version':1,'variables':[{'id':'x','type':{'dtype':'float64','shape':[2]}}],"
        "'nodes':[{'op':'op_from_graph','inputs':['x',{'value':{'dtype':'float64','shape':[2],'data':[2,1]}}],'outputs':['z'],"
        "'attrs':{'name':'dist','body':{'variables':[{'id':'a','type':{'dtype':'float64','shape':[2]}},"
        "{'id':'b','type':{'dtype':'float64','shape':[2]}}],'nodes':[{'op':'sub','inputs':['a','b'],'outputs':['d']},"
        "{'op':'sqrt','inputs':['d'],'outputs':['s']},{'op':'mul','inputs':['s',{'value':3.0}],'outputs':['r']}],"
        "'inputs':['a','b'],'outputs':['r']}}}],'functions':{'main':{'inputs':['x'],'outputs':['z']}}}";
    double xv[2] = {1, 2};
    int64_t shape[1] = {2};
    tg_array *x = tu_f64(1, shape, xv);
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    assert_int_equal(guard_calls(ofg, "none", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_string_equal(tg_function_node_op(f, o->node), "op_from_graph");
    assert_non_null(o->body_fn);
    assert_string_equal(o->body_op, "sqrt");
    assert_int_equal(o->step, -1);
    assert_int_equal(o->norigins, 1);
    assert_string_equal(o->origins[0], "s");
    assert_int_equal(o->body_stats.nan, 1);
    guard_done(g, f, ng);
    tg_array_free(x);
    tg_array_free(h0);
    tg_ctx_free(ctx);
}

/* Nested bodies. The outer loop (an epoch loop) is w_k = w_{k-1} - 1
 * from w0 = 2.25 (1.25, 0.25, -0.75) over xs = [1, -1.5, 5]; its body
 * runs, on xs and w_k, an inner scan (an RNN over the sequence) h_t =
 * h_{t-1} + xs[t] from h0 = w_k, l_t = log(h_t): at outer step 1 h =
 * 2.25, 0.75, 5.25 (clean); at outer step 2 h = 1.25, -0.25, 4.25, so the
 * first NaN is made at outer step 2, inner step 2 (indices 1, 1). The
 * scan of scans returns LL, the 3 x 3 stack of the inner l: step 3 adds
 * one more NaN (h = 0.25, -1.25, 3.75), 2 of 9. */
#define INNER_SCAN(SEQ, H0)                                                                                      \
    "{'op':'scan','inputs':['" SEQ "','" H0 "'],'outputs':['Hi','Li'],"                                         \
    "'attrs':{'body':{'variables':[{'id':'xt','type':{'dtype':'float64','shape':[]}},"                          \
    "{'id':'h','type':{'dtype':'float64','shape':[]}}],"                                                       \
    "'nodes':[{'op':'add','inputs':['h','xt'],'outputs':['h1']},{'op':'log','inputs':['h1'],'outputs':['l']}],"  \
    "'inputs':['xt','h'],'outputs':['h1','l']},'n_sequences':1,'sequence_taps':[[0]],'n_recurrent':1,"         \
    "'output_taps':[[-1]],'n_nonrecurrent':1,'n_non_sequences':0,'has_n_steps':false,'has_until':false}}"
/* The outer loop around BODY_NODES (reading w, xo; making w1 and the
 * per-step output OUT), from w0 = W0. */
#define OUTER_SCAN(W0, BODY_NODES, OUT)                                                                            \
    "{'format':'tg-graph','version':1,'variables':[{'id':'xs','type':{'dtype':'float64','shape':[3]}}],"        \
    "'nodes':[{'op':'scan','inputs':[{'value':{'dtype':'int64','data':3}},{'value':" W0 "},'xs'],"             \
    "'outputs':['E','LL'],'attrs':{'body':{'variables':[{'id':'w','type':{'dtype':'float64','shape':[]}},"      \
    "{'id':'xo','type':{'dtype':'float64','shape':[3]}}],"                                                     \
    "'nodes':[{'op':'sub','inputs':['w',{'value':1.0}],'outputs':['w1']}," BODY_NODES "],"                      \
    "'inputs':['w','xo'],'outputs':['w1','" OUT "']},'n_sequences':0,'sequence_taps':[],'n_recurrent':1,"      \
    "'output_taps':[[-1]],'n_nonrecurrent':1,'n_non_sequences':1,'has_n_steps':true,'has_until':false}}],"     \
    "'functions':{'main':{'inputs':['xs'],'outputs':['LL']}}}"

/* Level i of o's path is the node keys[i] as written, of op ops[i] (at
 * the last level, the fused op when the body fused it into a composite),
 * at step steps[i] (from 0; -1 for none); the last level stands for the
 * body node as written `origin`, and the offence's own fields agree. */
static void assert_path(const tg_offence *o, int depth, const char *const *keys, const char *const *ops,
                        const int64_t *steps, const char *origin) {
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    assert_int_equal(o->depth, depth);
    assert_non_null(o->path);
    for (int i = 0; i < depth; i++) {
        const tg_offence_level *l = &o->path[i];
        assert_non_null(l->fn);
        assert_string_equal(tg_function_node_key(l->fn, l->node), l->key);
        assert_string_equal(tg_function_node_op(l->fn, l->node), l->op);
        assert_true(l->what & TG_BAD_NAN);
        assert_true(l->stats.nan > 0);
        if (i < depth - 1 || !l->fused_op) {
            /* (a body runs optimized: a rebuilt loop's key is new, it
             * stands for the node as written) */
            assert_true(l->norigins >= 1);
            assert_string_equal(l->origins[0], keys[i]);
            assert_string_equal(l->op, ops[i]);
        } else {
            /* fused by the body's optimizer: the fused op and its node */
            assert_string_equal(l->op, "composite");
            assert_string_equal(l->fused_op, ops[i]);
            assert_true(l->fused_what & TG_BAD_NAN);
        }
        assert_int_equal(l->step, steps[i]);
    }
    /* level 0 is the offence's node; the last one the fields of old */
    assert_int_equal(o->path[0].node, o->node);
    assert_int_equal(o->step, steps[0]);
    const tg_offence_level *last = &o->path[depth - 1];
    assert_ptr_equal(o->body_fn, last->fn);
    assert_int_equal(o->body_node, last->node);
    assert_string_equal(o->body_op, ops[depth - 1]);
    assert_int_equal(last->norigins, 1);
    assert_int_equal(o->norigins, 1);
    assert_string_equal(last->origins[0], origin);
    assert_string_equal(o->origins[0], origin);
    assert_int_equal(o->body_stats.nan, 1);
}

static void test_nested_bodies(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {3};
    double xa[3] = {1, -1.5, 5}, xb[3] = {2, 0.5, 3};
    tg_array *x1 = tu_f64(1, shape, xa), *x2 = tu_f64(1, shape, xb);
    /* a scan of scans: E at step 2 -> Hi at step 2 -> l */
    const char *scan_scan = OUTER_SCAN("2.25", INNER_SCAN("xo", "w1"), "Li");
    /* an op_from_graph in a scan: from w0 = 1.25, xs = [2, 0.5, 3], its
     * sqrt(xo + w1) is clean at step 1 (w1 = 0.25) and takes sqrt(-0.25)
     * at step 2 (w1 = -0.75): E at step 2 -> z -> s */
    const char *ofg_scan = OUTER_SCAN(
        "1.25",
        "{'op':'op_from_graph','inputs':['xo','w1'],'outputs':['z'],'attrs':{'name':'dist','body':{'variables':["
        "{'id':'a','type':{'dtype':'float64','shape':[3]}},{'id':'b','type':{'dtype':'float64','shape':[]}}],"
        "'nodes':[{'op':'add','inputs':['a','b'],'outputs':['d']},{'op':'sqrt','inputs':['d'],'outputs':['s']},"
        "{'op':'mul','inputs':['s',{'value':3.0}],'outputs':['r']}],'inputs':['a','b'],'outputs':['r']}}}",
        "z");
    /* the inner scan of the first inside an op_from_graph in the loop:
     * E at step 2 -> z -> Hi at step 2 -> l */
    const char *scan_ofg_scan = OUTER_SCAN(
        "2.25",
        "{'op':'op_from_graph','inputs':['xo','w1'],'outputs':['z'],'attrs':{'name':'rnn','body':{'variables':["
        "{'id':'a','type':{'dtype':'float64','shape':[3]}},{'id':'b','type':{'dtype':'float64','shape':[]}}],"
        "'nodes':[" INNER_SCAN("a", "b") ",{'op':'mul','inputs':['Li',{'value':3.0}],'outputs':['r']}],"
        "'inputs':['a','b'],'outputs':['r']}}}",
        "z");
    static const char *const k1[] = {"E", "Hi", "l"}, *const o1[] = {"scan", "scan", "log"};
    static const int64_t s1[] = {1, 1, -1};
    static const char *const k2[] = {"E", "z", "s"}, *const o2[] = {"scan", "op_from_graph", "sqrt"};
    static const int64_t s2[] = {1, -1, -1};
    static const char *const k3[] = {"E", "z", "Hi", "l"}, *const o3[] = {"scan", "op_from_graph", "scan", "log"};
    static const int64_t s3[] = {1, -1, 1, -1};
    const char *presets[] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_graph *g;
        tg_function *f;
        tg_nanguard *ng;
        assert_int_equal(guard_calls(scan_scan, presets[p], NULL, x1, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
        const tg_offence *o = tg_nanguard_offence(ng);
        assert_path(o, 3, k1, o1, s1, "l");
        assert_string_equal(o->path[0].var_as_written, "LL"); /* (fast_run rebuilds the loop: var E:scan.1) */
        assert_int_equal(o->stats.nan, 2);
        assert_int_equal(o->path[1].stats.nan, 1); /* Li at outer step 2: [log 1.25, NaN, log 4.25] */
        assert_string_equal(o->path[1].var_as_written, "Li");
        assert_non_null(strstr(tg_ctx_message(ctx), "(2 of 9 elements), first at step 2 of the loop"));
        assert_non_null(strstr(tg_ctx_message(ctx), "(scan: its scan 'Li', at step 2 of its loop its log 'l') made"));
        guard_done(g, f, ng);

        assert_int_equal(guard_calls(ofg_scan, presets[p], NULL, x2, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
        o = tg_nanguard_offence(ng);
        assert_path(o, 3, k2, o2, s2, "s");
        assert_non_null(strstr(tg_ctx_message(ctx), "(scan: its op_from_graph 'z', in its body its sqrt 's') made NaN in output '"));
        guard_done(g, f, ng);

        assert_int_equal(guard_calls(scan_ofg_scan, presets[p], NULL, x1, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
        o = tg_nanguard_offence(ng);
        assert_path(o, 4, k3, o3, s3, "l");
        assert_non_null(strstr(tg_ctx_message(ctx), "(scan: its op_from_graph 'z', in its body its scan 'Li', at step 2 of its loop its log 'l') made NaN"));
        guard_done(g, f, ng);
    }
    /* One level: the path is the node and its body node; a node that is
     * not in a body is the path alone. */
    tg_graph *g;
    tg_function *f;
    tg_nanguard *ng;
    double xv[4] = {1, 2, 3, 4};
    int64_t sh4[1] = {4};
    tg_array *x = tu_f64(1, sh4, xv);
    assert_int_equal(guard_calls(DEEP, "none", NULL, x, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    const tg_offence *o = tg_nanguard_offence(ng);
    assert_int_equal(o->depth, 1);
    assert_string_equal(o->path[0].key, "lg");
    assert_string_equal(o->path[0].op, "log");
    assert_null(o->path[0].fused_op);
    assert_null(o->body_fn);
    guard_done(g, f, ng);
    /* a NaN fed in: no path */
    double nv[4] = {1, NAN, 3, 4};
    tg_array *xn = tu_f64(1, sh4, nv);
    assert_int_equal(guard_calls(DEEP, "none", NULL, xn, 1, &g, &f, &ng, ctx), TG_ESTOPPED);
    o = tg_nanguard_offence(ng);
    assert_int_equal(o->where, TG_OFFENCE_INPUT);
    assert_int_equal(o->depth, 0);
    guard_done(g, f, ng);
    tg_array_free(xn);
    tg_array_free(x);
    tg_array_free(x1);
    tg_array_free(x2);
    tg_ctx_free(ctx);
}

/* Freeing a guard takes off its own hooks only: hooks put on after it
 * (a profile's, the caller's) keep running. */
static int count_after(void *ud, const tg_function *f, int node, tg_array *const *in, tg_array *const *out,
                       tg_ctx *ctx) {
    (void)f, (void)node, (void)in, (void)out, (void)ctx;
    ++*(int *)ud;
    return 0;
}

static void test_free_keeps_later_hooks(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq(DEEP);
    tg_function *f = compile(g, "none");
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[1] = {4};
    const double xv[4] = {1, 2, 3, 4};
    tg_array *x = tu_f64(1, shape, xv), *out = NULL;
    int ran = 0;
    tg_nanguard *ng = tg_nanguard_new(f, NULL, ctx);
    assert_non_null(ng);
    tg_hooks mine = {.after = count_after, .ud = &ran};
    tg_function_set_hooks(f, &mine);
    tg_nanguard_free(ng);
    /* DEEP is nine nodes; log of a negative number is NaN, not an error */
    assert_int_equal(tg_function_call(f, &x, &out, ctx), TG_OK);
    assert_int_equal(ran, 9);
    tg_array_free(out);
    /* the other way round: the guard's own hooks come off with it */
    ng = tg_nanguard_new(f, NULL, ctx);
    tg_nanguard_free(ng);
    ran = 0;
    out = NULL;
    assert_int_equal(tg_function_call(f, &x, &out, ctx), TG_OK);
    assert_int_equal(ran, 0);
    tg_array_free(out);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

static void test_bad_options(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq(DEEP);
    tg_function *f = compile(g, "none");
    tg_ctx *ctx = tg_ctx_new();
    tg_nanguard_options opt = {.big = -1};
    assert_null(tg_nanguard_new(f, &opt, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    opt.big = NAN;
    assert_null(tg_nanguard_new(f, &opt, ctx));
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_by_hand),
        cmocka_unit_test(test_deep_log_unoptimized),
        cmocka_unit_test(test_deep_log_fused),
        cmocka_unit_test(test_nan_input_is_the_input),
        cmocka_unit_test(test_nan_constant),
        cmocka_unit_test(test_integers_not_checked),
        cmocka_unit_test(test_calls_and_shared),
        cmocka_unit_test(test_inplace_update),
        cmocka_unit_test(test_inplace_random),
        cmocka_unit_test(test_folded_constant_output),
        cmocka_unit_test(test_file_constant_output),
        cmocka_unit_test(test_folded_constant_update),
        cmocka_unit_test(test_folded_constant_read),
        cmocka_unit_test(test_big_constant_explains_no_nan),
        cmocka_unit_test(test_fused_body_op_made_inf),
        cmocka_unit_test(test_fused_rewrite_pair),
        cmocka_unit_test(test_float32_threshold),
        cmocka_unit_test(test_scan_step),
        cmocka_unit_test(test_body_node),
        cmocka_unit_test(test_nested_bodies),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_free_keeps_later_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
