/* The profiler's counters (tg/profile.h): calls and times per node, the
 * timeline's nesting, what each output is (new, view, in place), the
 * memory simulation against sizes worked out by hand, op classes,
 * detaching, and the bodies of scan and op_from_graph nodes (steps per
 * body node, nesting, their timeline). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "core/core.h"
#include "ops/op.h"
#include "ops/scan.h"
#include "vm/vm.h"

static tg_function *compile(tg_graph *g) {
    tg_ctx *ctx = tg_ctx_new();
    /* Unoptimized, so that the nodes are the file's (the optimizer's own
     * rewrites are tested with tgprof on the examples). */
    tg_compile_options co = {.preset = "none"};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, NULL, ctx), &co, ctx);
    if (!f) fail_msg("compile failed: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

static int find_node(const tg_function *f, const char *key) {
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (strcmp(tg_function_node_key(f, k), key) == 0) return k;
    fail_msg("no node '%s'", key);
    return -1;
}

/* a = exp(x) (800 bytes), b = reshape(a) (a view), c = b * 2 (800),
 * d = sum(c) (8, the output). With freeing: a lives until c has read b,
 * so the peak is a + c = 1600; without: 800 + 800 + 8. */
static const char *chain_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[100]}}],"
    "\"nodes\":["
    "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
    "{\"op\":\"reshape\",\"inputs\":[\"a\",{\"value\":{\"dtype\":\"int64\",\"shape\":[2],\"data\":[10,10]}}],"
    "\"outputs\":[\"b\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"b\",{\"value\":2.0}],\"outputs\":[\"c\"]},"
    "{\"op\":\"sum\",\"inputs\":[\"c\"],\"outputs\":[\"d\"]}]}";

static tg_array *ramp(int64_t n) {
    tg_array *x = tg_array_new(TG_FLOAT64, 1, &n);
    double *d = tg_array_data(x);
    for (int64_t i = 0; i < n; i++) d[i] = (double)i / (double)n;
    return x;
}

static void test_counts_and_memory(void **state) {
    (void)state;
    tg_graph *g = tu_load(chain_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 2, ctx);
    assert_non_null(p);
    tg_array *x = ramp(100), *out = NULL;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tg_profile_call(p, &x, &out, ctx), 0);
        tg_array_free(out);
        out = NULL;
    }
    assert_int_equal(tg_profile_calls(p), 3);
    uint64_t sum = 0;
    for (int k = 0; k < tg_function_node_count(f); k++) {
        tg_profile_node st;
        assert_int_equal(tg_profile_node_get(p, k, &st), 0);
        assert_int_equal(st.calls, 3);
        sum += st.ns;
    }
    assert_int_equal(sum, tg_profile_nodes_ns(p));
    assert_true(tg_profile_nodes_ns(p) <= tg_profile_total_ns(p));

    /* exp's cost: its elementwise estimate is positive; new 800 bytes. */
    tg_profile_node st;
    tg_profile_node_get(p, find_node(f, "a"), &st);
    assert_int_equal(st.bytes_new, 800);
    tg_profile_node_get(p, find_node(f, "b"), &st);
    assert_int_equal(st.bytes_new, 0);

    tg_profile_output o;
    assert_int_equal(tg_profile_output_get(p, find_node(f, "b"), 0, &o), 0);
    assert_string_equal(o.id, "b");
    assert_int_equal(o.kind, TG_PROFILE_OUT_VIEW);
    assert_int_equal(o.of, 0);
    assert_int_equal(o.ndim, 2);
    assert_int_equal(o.shape[0], 10);
    assert_int_equal(o.shape[1], 10);
    assert_int_equal(tg_profile_output_get(p, find_node(f, "c"), 0, &o), 0);
    assert_int_equal(o.kind, TG_PROFILE_OUT_NEW);
    assert_int_equal(o.bytes, 800);
    assert_int_equal(tg_profile_output_get(p, find_node(f, "c"), 1, &o), TG_EINVAL);
    assert_int_equal(tg_profile_node_get(p, -1, &st), TG_EINVAL);

    tg_profile_memory m;
    assert_int_equal(tg_profile_memory_get(p, &m, ctx), 0);
    assert_int_equal(m.peak, 1600);
    assert_int_equal(m.peak_no_gc, 1608);
    assert_int_equal(m.allocated, 1608);
    assert_int_equal(m.nnew, 3);
    assert_int_equal(m.nview, 1);
    assert_int_equal(m.ninplace, 0);
    /* Node by node: a (800), b views it, c (800 more; a goes after c, its
     * view's last reader), d (8; c goes after it). */
    int64_t run[4], after[4];
    assert_int_equal(tg_profile_memory_live(p, run, after, ctx), 0);
    int order[4] = {find_node(f, "a"), find_node(f, "b"), find_node(f, "c"), find_node(f, "d")};
    int64_t want_run[4] = {800, 800, 1600, 808}, want_after[4] = {800, 800, 800, 8};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(order[i], i); /* the only schedule of a chain */
        assert_int_equal(run[i], want_run[i]);
        assert_int_equal(after[i], want_after[i]);
    }

    /* The timeline kept the first 2 calls; each node lies inside its call
     * and after the node before it. */
    assert_int_equal(tg_profile_trace_count(p), 2);
    for (long c = 0; c < 2; c++) {
        uint64_t c0, c1, prev_end = 0;
        assert_int_equal(tg_profile_trace_call(p, c, &c0, &c1), 0);
        assert_true(c1 >= c0);
        prev_end = c0;
        for (int k = 0; k < tg_function_node_count(f); k++) {
            uint64_t s, d;
            assert_int_equal(tg_profile_trace_node(p, c, k, &s, &d), 0);
            assert_true(s >= prev_end);
            assert_true(s + d <= c1);
            prev_end = s + d;
        }
    }
    uint64_t a, b;
    assert_int_equal(tg_profile_trace_call(p, 2, &a, &b), TG_EINVAL);

    /* Freeing detaches: the function runs without hooks again. */
    tg_profile_free(p);
    assert_false(f->hooked);
    assert_int_equal(tg_function_call(f, &x, &out, ctx), 0);
    double want = 0;
    for (int i = 0; i < 100; i++) want += 2.0 * exp(i / 100.0);
    tu_assert_near(tg_array_get_flat(out, 0), want, 1e-9 * want);
    tg_array_free(out);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* gemm writing into z in place, a transpose view, and the cost estimate:
 * 2 * 64 * 64 * 64 flops for a 64x64 by 64x64 product. */
static const char *gemm_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[64,64]}}],"
    "\"nodes\":["
    "{\"op\":\"zeros_like\",\"inputs\":[\"x\"],\"outputs\":[\"z\"]},"
    "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":1.0},\"x\",\"x\",{\"value\":0.0}],\"outputs\":[\"g\"],"
    "\"inplace\":{\"0\":0}},"
    "{\"op\":\"transpose\",\"inputs\":[\"g\"],\"outputs\":[\"t\"]}]}";

static void test_inplace_view_cost(void **state) {
    (void)state;
    tg_graph *g = tu_load(gemm_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 0, ctx);
    int64_t shape[2] = {64, 64};
    tg_array *x = tg_array_new(TG_FLOAT64, 2, shape), *out = NULL;
    assert_int_equal(tg_profile_call(p, &x, &out, ctx), 0);
    tg_array_free(out);
    tg_profile_output o;
    tg_profile_output_get(p, find_node(f, "g"), 0, &o);
    assert_int_equal(o.kind, TG_PROFILE_OUT_INPLACE);
    assert_int_equal(o.of, 0);
    tg_profile_output_get(p, find_node(f, "t"), 0, &o);
    assert_int_equal(o.kind, TG_PROFILE_OUT_VIEW);
    tg_profile_node st;
    tg_profile_node_get(p, find_node(f, "g"), &st);
    assert_true(st.flops == 2.0 * 64 * 64 * 64);
    assert_int_equal(st.bytes_new, 0);
    tg_profile_memory m;
    assert_int_equal(tg_profile_memory_get(p, &m, ctx), 0);
    /* Only z is allocated (32768 bytes); g and t share it and t is the
     * output, so nothing is freed. */
    assert_int_equal(m.allocated, 64 * 64 * 8);
    assert_int_equal(m.peak, 64 * 64 * 8);
    assert_int_equal(m.ninplace, 1);
    assert_int_equal(m.nview, 1);
    assert_int_equal(tg_profile_trace_count(p), 0);
    tg_profile_free(p);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A fused composite counts each body op at the weight the op has unfused
 * (elemwise.c's table): sigmoid(2 (tanh(exp(v)) + v)) of 1000 elements,
 * exp 10 + tanh 10 + add 1 + mul 1 + sigmoid 12 = 34 flops an element,
 * 34,000 in all, as the five nodes unfused (it was 5 an element: one per
 * body node). */
static const char *fuse_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"v\",\"type\":{\"dtype\":\"float64\",\"shape\":[1000]}}],"
    "\"nodes\":["
    "{\"op\":\"exp\",\"inputs\":[\"v\"],\"outputs\":[\"e1\"]},"
    "{\"op\":\"tanh\",\"inputs\":[\"e1\"],\"outputs\":[\"t\"]},"
    "{\"op\":\"add\",\"inputs\":[\"t\",\"v\"],\"outputs\":[\"e2\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"e2\",{\"value\":2.0}],\"outputs\":[\"e3\"]},"
    "{\"op\":\"sigmoid\",\"inputs\":[\"e3\"],\"outputs\":[\"e4\"]}]}";

static double flops_sum(tg_graph *g, const char *preset, int *ncomposite) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options co = {.preset = preset};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, NULL, ctx), &co, ctx);
    if (!f) fail_msg("compile failed: %s", tg_ctx_message(ctx));
    tg_profile *p = tg_profile_new(f, 0, ctx);
    tg_array *x = ramp(1000), *out = NULL;
    assert_int_equal(tg_profile_call(p, &x, &out, ctx), 0);
    double sum = 0;
    *ncomposite = 0;
    for (int k = 0; k < tg_function_node_count(f); k++) {
        tg_profile_node st;
        tg_profile_node_get(p, k, &st);
        sum += st.flops;
        *ncomposite += strcmp(tg_function_node_op(f, k), "composite") == 0;
    }
    tg_array_free(out);
    tg_array_free(x);
    tg_profile_free(p);
    tg_function_free(f);
    tg_ctx_free(ctx);
    return sum;
}

static void test_composite_cost(void **state) {
    (void)state;
    tg_graph *g = tu_load(fuse_json);
    int nc;
    double unfused = flops_sum(g, "none", &nc);
    assert_int_equal(nc, 0);
    double fused = flops_sum(g, "fast_run", &nc);
    assert_int_equal(nc, 1);
    if (unfused != 34000.0 || fused != 34000.0)
        fail_msg("flops: unfused %g, fused %g, want 34000 both", unfused, fused);
    tg_graph_free(g);
}

/* Products count 2 flops per multiply-add, and outer (x y^T) one per
 * element: x of 3 and y of 4 make 12 products and add nothing (it counted
 * 24). By hand: ger (A + alpha x y^T, 3x4) 2 * 12 = 24; dot of two
 * 4-vectors 2 * 4 = 8; gemv of a 3x4 matrix 2 * 3 * 4 = 24; dot of a 0-d
 * 2.0 and A (a scaling) 12. */
static const char *products_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
    "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}},"
    "{\"id\":\"A\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,4]}}],"
    "\"nodes\":["
    "{\"op\":\"outer\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"o\"]},"
    "{\"op\":\"ger\",\"inputs\":[\"A\",{\"value\":1.0},\"x\",\"y\"],\"outputs\":[\"r\"]},"
    "{\"op\":\"dot\",\"inputs\":[\"y\",\"y\"],\"outputs\":[\"d\"]},"
    "{\"op\":\"gemv\",\"inputs\":[\"x\",{\"value\":1.0},\"A\",\"y\",{\"value\":0.0}],\"outputs\":[\"v\"]},"
    "{\"op\":\"dot\",\"inputs\":[{\"value\":2.0},\"A\"],\"outputs\":[\"s\"]}],"
    "\"functions\":{\"main\":{\"inputs\":[\"x\",\"y\",\"A\"],\"outputs\":[\"o\",\"r\",\"d\",\"v\",\"s\"]}}}";

static void test_product_cost(void **state) {
    (void)state;
    tg_graph *g = tu_load(products_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 0, ctx);
    int64_t n3 = 3, n4 = 4, s34[2] = {3, 4};
    tg_array *in[3] = {ramp(n3), ramp(n4), tg_array_new(TG_FLOAT64, 2, s34)}, *out[5] = {0};
    for (int i = 0; i < 12; i++) ((double *)tg_array_data(in[2]))[i] = i;
    assert_int_equal(tg_profile_call(p, in, out, ctx), 0);
    static const struct {
        const char *key;
        double flops;
    } want[] = {{"o", 12}, {"r", 24}, {"d", 8}, {"v", 24}, {"s", 12}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        tg_profile_node st;
        tg_profile_node_get(p, find_node(f, want[i].key), &st);
        if (st.flops != want[i].flops) fail_msg("%s: %g flops, want %g", want[i].key, st.flops, want[i].flops);
    }
    for (int i = 0; i < 5; i++) tg_array_free(out[i]);
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_profile_free(p);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A failed call is not counted and leaves the counters usable. */
static void test_failed_call(void **state) {
    (void)state;
    tg_graph *g = tu_load(chain_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 1, ctx);
    int64_t n = 7;
    tg_array *bad = tg_array_new(TG_FLOAT64, 1, &n), *out = NULL;
    assert_int_not_equal(tg_profile_call(p, &bad, &out, ctx), 0);
    assert_int_equal(tg_profile_calls(p), 0);
    assert_int_equal(tg_profile_total_ns(p), 0);
    tg_array_free(bad);
    tg_profile_free(p);
    assert_null(tg_profile_new(NULL, 0, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    assert_null(tg_profile_new(f, -1, ctx));
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* Time through rewrites: origins are set by hand here as the optimizer
 * will set them (a fused node standing for several file nodes, and one
 * file node stood for by two scheduled nodes). */
static void set_origins(tg_node *n, const char *const *keys, int count) {
    tg_free(n->origins);
    n->origins = tg_origins_pack(keys, count);
    assert_non_null(n->origins);
    n->norigins = count;
}

static void test_origins(void **state) {
    (void)state;
    tg_graph *g = tu_load(chain_json);
    tg_function *f = compile(g);
    int kc = find_node(f, "c"), kd = find_node(f, "d"), ka = find_node(f, "a"), kb = find_node(f, "b");
    set_origins(f->sched[kc].node, (const char *const[]){"b", "c", "c"}, 3);
    set_origins(f->sched[kd].node, (const char *const[]){"c", "d"}, 2);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 0, ctx);
    tg_array *x = ramp(100), *out = NULL;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tg_profile_call(p, &x, &out, ctx), 0);
        tg_array_free(out);
    }
    tg_profile_node na, nb, nc, nd;
    tg_profile_node_get(p, ka, &na);
    tg_profile_node_get(p, kb, &nb);
    tg_profile_node_get(p, kc, &nc);
    tg_profile_node_get(p, kd, &nd);
    tg_profile_origin *o = NULL;
    int n = tg_profile_origins(p, &o, ctx);
    /* a and b stand for themselves; c (fused) also for b, d also for c. */
    assert_int_equal(n, 4);
    uint64_t want[4] = {0};
    const char *keys[4] = {"a", "b", "c", "d"};
    want[0] = na.ns;
    want[1] = nb.ns + nc.ns; /* scheduled b (itself) and c (fused) */
    want[2] = nc.ns + nd.ns; /* listed twice by c, counted once */
    want[3] = nd.ns;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < 4 && strcmp(keys[j], o[i].key)) j++;
        assert_true(j < 4);
        assert_int_equal(o[i].ns, want[j]);
        if (j == 2) {
            assert_int_equal(o[i].nvia, 2);
            assert_int_equal(o[i].via[0], kc < kd ? kc : kd);
            assert_int_equal(o[i].via[1], kc < kd ? kd : kc);
        }
        if (i) assert_true(o[i - 1].ns >= o[i].ns);
    }
    tg_profile_origins_free(o);
    tg_profile_free(p);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

static void test_op_class(void **state) {
    (void)state;
    assert_string_equal(tg_profile_op_class("gemm"), "blas");
    assert_string_equal(tg_profile_op_class("exp"), "elemwise");
    assert_string_equal(tg_profile_op_class("sum"), "reduce");
    assert_string_equal(tg_profile_op_class("conv2d"), "conv");
    assert_string_equal(tg_profile_op_class("reshape"), "shape");
    assert_string_equal(tg_profile_op_class("composite"), "composite");
    assert_string_equal(tg_profile_op_class("ifelse"), "control");
    assert_string_equal(tg_profile_op_class("no_such_op"), "no_such_op");
    /* Every op of the table has a family: a new .def file in ops.def must
     * be listed in profile.c too. */
    static const char *const families[] = {"elemwise", "reduce", "blas", "shape", "build", "nn", "conv",
                                           "linalg", "random", "debug", "grad", "composite", "transfer",
                                           "control", NULL};
    for (int i = 0; i < tg_op_count(); i++) {
        const char *cls = tg_profile_op_class(tg_op_at(i)->name);
        bool known = false;
        for (int j = 0; families[j]; j++) known |= strcmp(families[j], cls) == 0;
        if (!known) fail_msg("op '%s' has no family (class '%s'): list its .def in profile.c", tg_op_at(i)->name, cls);
    }
}

/* ---- bodies: scan and op_from_graph ---- */

/* hs = scan over k steps of h_t = tanh(dot(W, h_{t-1})), from x: the
 * body's nodes run k times per call. */
static const char *scan_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}},"
    "{\"id\":\"W\",\"type\":{\"dtype\":\"float64\",\"shape\":[4,4]}},"
    "{\"id\":\"k\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}}],"
    "\"nodes\":[{\"op\":\"scan\",\"inputs\":[\"k\",\"x\",\"W\"],\"outputs\":[\"hs\"],\"attrs\":{"
    "\"n_sequences\":0,\"sequence_taps\":[],\"n_recurrent\":1,\"output_taps\":[[-1]],\"n_nonrecurrent\":0,"
    "\"n_non_sequences\":1,\"has_n_steps\":true,\"has_until\":false,\"name\":\"loop\",\"body\":{"
    "\"variables\":[{\"id\":\"h_p\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}},"
    "{\"id\":\"W_\",\"type\":{\"dtype\":\"float64\",\"shape\":[4,4]}}],"
    "\"nodes\":[{\"op\":\"dot\",\"inputs\":[\"W_\",\"h_p\"],\"outputs\":[\"d\"]},"
    "{\"op\":\"tanh\",\"inputs\":[\"d\"],\"outputs\":[\"h_t\"]}],"
    "\"inputs\":[\"h_p\",\"W_\"],\"outputs\":[\"h_t\"]}}}],"
    "\"functions\":{\"main\":{\"inputs\":[\"x\",\"W\",\"k\"],\"outputs\":[\"hs\"]}}}";

/* A scan of k steps whose body is a scan of m steps (g_t = sin(g_{t-1}))
 * and the last row of its result. */
static const char *nested_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}},"
    "{\"id\":\"k\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}},"
    "{\"id\":\"m\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}}],"
    "\"nodes\":[{\"op\":\"scan\",\"inputs\":[\"k\",\"x\",\"m\"],\"outputs\":[\"hs\"],\"attrs\":{"
    "\"n_sequences\":0,\"sequence_taps\":[],\"n_recurrent\":1,\"output_taps\":[[-1]],\"n_nonrecurrent\":0,"
    "\"n_non_sequences\":1,\"has_n_steps\":true,\"has_until\":false,\"name\":\"outer\",\"body\":{"
    "\"variables\":[{\"id\":\"h_p\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}},"
    "{\"id\":\"m_\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}}],"
    "\"nodes\":[{\"op\":\"scan\",\"inputs\":[\"m_\",\"h_p\"],\"outputs\":[\"gs\"],\"attrs\":{"
    "\"n_sequences\":0,\"sequence_taps\":[],\"n_recurrent\":1,\"output_taps\":[[-1]],\"n_nonrecurrent\":0,"
    "\"n_non_sequences\":0,\"has_n_steps\":true,\"has_until\":false,\"name\":\"inner\",\"body\":{"
    "\"variables\":[{\"id\":\"g_p\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}}],"
    "\"nodes\":[{\"op\":\"sin\",\"inputs\":[\"g_p\"],\"outputs\":[\"g_t\"]}],"
    "\"inputs\":[\"g_p\"],\"outputs\":[\"g_t\"]}}},"
    "{\"op\":\"subtensor\",\"inputs\":[\"gs\"],\"outputs\":[\"h_t\"],\"attrs\":{\"index\":[-1]}}],"
    "\"inputs\":[\"h_p\",\"m_\"],\"outputs\":[\"h_t\"]}}}],"
    "\"functions\":{\"main\":{\"inputs\":[\"x\",\"k\",\"m\"],\"outputs\":[\"hs\"]}}}";

/* y = op_from_graph{twice}(exp(x)), body: softmax, then the max of it
 * (nodes the optimizer leaves as they are). */
static const char *ofg_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}}],"
    "\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"ex\"]},"
    "{\"op\":\"op_from_graph\",\"inputs\":[\"ex\"],\"outputs\":[\"y\"],\"attrs\":{\"name\":\"twice\",\"body\":{"
    "\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}},"
    "{\"id\":\"o\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
    "\"nodes\":[{\"op\":\"softmax\",\"inputs\":[\"a\"],\"outputs\":[\"s\"]},"
    "{\"op\":\"max\",\"inputs\":[\"s\"],\"outputs\":[\"o\"]}],"
    "\"inputs\":[\"a\"],\"outputs\":[\"o\"]}}}],"
    "\"functions\":{\"main\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}";

static tg_array *int_scalar(int v) {
    tg_array *a = tg_array_new(TG_INT32, 0, NULL);
    *(int32_t *)tg_array_data(a) = v;
    return a;
}

/* Every node of body profile b ran `runs` times; returns the sum of their
 * times, each > 0. */
static uint64_t body_nodes_ran(const tg_profile *b, uint64_t runs) {
    const tg_function *bf = tg_profile_function(b);
    assert_true(tg_function_node_count(bf) > 0);
    uint64_t sum = 0;
    for (int k = 0; k < tg_function_node_count(bf); k++) {
        tg_profile_node st;
        assert_int_equal(tg_profile_node_get(b, k, &st), 0);
        if (st.calls != runs)
            fail_msg("body node '%s' ran %llu times, not %llu", tg_function_node_key(bf, k),
                     (unsigned long long)st.calls, (unsigned long long)runs);
        assert_true(st.ns > 0);
        sum += st.ns;
    }
    assert_int_equal(sum, tg_profile_nodes_ns(b));
    return sum;
}

enum { CALLS = 3, K = 5, M = 3 };

static void test_scan_body(void **state) {
    (void)state;
    tg_graph *g = tu_load(scan_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 2, ctx);
    assert_non_null(p);
    assert_int_equal(tg_profile_body_count(p), 1);
    int outer = -2;
    const tg_profile *b = tg_profile_body(p, 0, &outer);
    assert_non_null(b);
    assert_int_equal(outer, find_node(f, "hs"));
    assert_null(tg_profile_body(p, 1, NULL));
    assert_null(tg_profile_body(p, -1, NULL));
    int back = -2;
    assert_ptr_equal(tg_profile_parent(b, &back), p);
    assert_int_equal(back, outer);
    assert_null(tg_profile_parent(p, &back));
    assert_int_equal(back, -1);
    assert_ptr_equal(tg_profile_function(p), f);
    const tg_function *bf = tg_profile_function(b);
    assert_ptr_not_equal(bf, f);
    assert_true(bf->hooked);
    /* The body as written: dot then tanh (the optimizer leaves them). */
    assert_int_equal(tg_function_node_count(bf), 2);
    assert_string_equal(tg_function_node_op(bf, 0), "dot");
    assert_int_equal(tg_profile_body_count(b), 0);

    int64_t s44[2] = {4, 4};
    tg_array *x = ramp(4), *W = tg_array_new(TG_FLOAT64, 2, s44), *k = int_scalar(K), *out = NULL;
    double *w = tg_array_data(W);
    for (int i = 0; i < 16; i++) w[i] = 0.1 * (i % 5);
    tg_array *ins[3] = {x, W, k};
    for (int c = 0; c < CALLS; c++) {
        assert_int_equal(tg_profile_call(p, ins, &out, ctx), 0);
        assert_int_equal(out->shape[0], K);
        tg_array_free(out);
        out = NULL;
    }
    /* The outer node ran CALLS times; the body CALLS * K steps. */
    tg_profile_node sn;
    tg_profile_node_get(p, outer, &sn);
    assert_int_equal(sn.calls, CALLS);
    assert_int_equal(tg_profile_calls(b), CALLS);
    assert_int_equal(tg_profile_steps(b), CALLS * K);
    assert_int_equal(tg_profile_steps(p), CALLS);
    uint64_t in_body = body_nodes_ran(b, CALLS * K);
    /* The body's time is the scan node's; its nodes' time is within it. */
    assert_int_equal(tg_profile_total_ns(b), sn.ns);
    assert_true(in_body <= sn.ns);
    /* A body profile is not called on its own. */
    assert_int_equal(tg_profile_call((tg_profile *)b, ins, &out, ctx), TG_EINVAL);

    /* The timeline: the 2 kept calls, K steps of 2 nodes each, every run
     * within the scan node's event of its call, steps in order. */
    assert_int_equal(tg_profile_trace_count(p), 2);
    assert_int_equal(tg_profile_trace_body_count(p), 2 * K * 2);
    assert_int_equal(tg_profile_trace_body_count(b), 0);
    for (long i = 0; i < tg_profile_trace_body_count(p); i++) {
        tg_profile_body_event ev;
        assert_int_equal(tg_profile_trace_body_event(p, i, &ev), 0);
        assert_ptr_equal(ev.body, b);
        assert_int_equal(ev.call, i / (2 * K));
        assert_int_equal(ev.step, (i % (2 * K)) / 2);
        assert_int_equal(ev.node, i % 2);
        uint64_t s0, d0;
        assert_int_equal(tg_profile_trace_node(p, ev.call, outer, &s0, &d0), 0);
        assert_true(ev.start >= s0 && ev.start + ev.dur <= s0 + d0);
    }
    tg_profile_body_event ev;
    assert_int_equal(tg_profile_trace_body_event(p, 2 * K * 2, &ev), TG_EINVAL);
    tg_profile_free(p);
    /* Freeing the profile unhooks the body. */
    assert_false(bf->hooked);

    /* No bodies; a body timeline of at most 7 runs. */
    tg_profile_options o = {.trace_calls = 2, .no_bodies = true};
    p = tg_profile_new_opts(f, &o, ctx);
    assert_int_equal(tg_profile_body_count(p), 0);
    assert_false(bf->hooked);
    assert_int_equal(tg_profile_call(p, ins, &out, ctx), 0);
    tg_array_free(out);
    out = NULL;
    assert_int_equal(tg_profile_trace_body_count(p), 0);
    tg_profile_free(p);
    o = (tg_profile_options){.trace_calls = 2, .trace_body_events = 7};
    p = tg_profile_new_opts(f, &o, ctx);
    for (int c = 0; c < 2; c++) {
        assert_int_equal(tg_profile_call(p, ins, &out, ctx), 0);
        tg_array_free(out);
        out = NULL;
    }
    assert_int_equal(tg_profile_trace_body_count(p), 7);
    tg_profile_free(p);
    o.trace_body_events = -1;
    assert_null(tg_profile_new_opts(f, &o, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);

    tg_array_free(x);
    tg_array_free(W);
    tg_array_free(k);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

static int other_hook(void *ud, const tg_function *f, int node, tg_array *const *inputs, tg_ctx *ctx) {
    (void)f, (void)node, (void)inputs, (void)ctx;
    (*(int *)ud)++;
    return 0;
}

/* A body function that already has hooks keeps them: no body profile. */
static void test_body_hooked_elsewhere(void **state) {
    (void)state;
    tg_graph *g = tu_load(scan_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_node *sn = f->sched[find_node(f, "hs")].node;
    assert_int_equal(tg_scan_compile_body(sn, ctx), 0);
    tg_function *bf = ((scan_p *)sn->a.extra)->fn;
    int seen = 0;
    tg_hooks h = {.before = other_hook, .ud = &seen};
    tg_function_set_hooks(bf, &h);
    tg_profile *p = tg_profile_new(f, 0, ctx);
    assert_int_equal(tg_profile_body_count(p), 0);
    int64_t s44[2] = {4, 4};
    tg_array *x = ramp(4), *W = tg_array_new(TG_FLOAT64, 2, s44), *k = int_scalar(K), *out = NULL;
    memset(tg_array_data(W), 0, 16 * sizeof(double));
    tg_array *ins[3] = {x, W, k};
    assert_int_equal(tg_profile_call(p, ins, &out, ctx), 0);
    tg_array_free(out);
    assert_int_equal(seen, 2 * K); /* the other hooks saw every body node */
    tg_profile_free(p);
    assert_ptr_equal(bf->hooks.ud, &seen);
    tg_function_set_hooks(bf, NULL);
    tg_array_free(x);
    tg_array_free(W);
    tg_array_free(k);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A scan in a scan's body: the inner body runs outer steps x inner steps. */
static void test_nested_scan_body(void **state) {
    (void)state;
    tg_graph *g = tu_load(nested_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 1, ctx);
    assert_non_null(p);
    assert_int_equal(tg_profile_body_count(p), 1);
    int outer = -1, inner = -1;
    const tg_profile *bo = tg_profile_body(p, 0, &outer);
    assert_int_equal(outer, find_node(f, "hs"));
    assert_int_equal(tg_profile_body_count(bo), 1);
    const tg_profile *bi = tg_profile_body(bo, 0, &inner);
    const tg_function *fo = tg_profile_function(bo);
    assert_string_equal(tg_function_node_op(fo, inner), "scan");
    assert_ptr_equal(tg_profile_parent(bi, NULL), bo);
    tg_array *x = ramp(4), *k = int_scalar(K), *m = int_scalar(M), *out = NULL;
    tg_array *ins[3] = {x, k, m};
    for (int c = 0; c < CALLS; c++) {
        assert_int_equal(tg_profile_call(p, ins, &out, ctx), 0);
        tg_array_free(out);
        out = NULL;
    }
    assert_int_equal(tg_profile_calls(bo), CALLS);
    assert_int_equal(tg_profile_steps(bo), CALLS * K);
    /* The inner scan node ran once per outer step, its body M steps each. */
    tg_profile_node st;
    tg_profile_node_get(bo, inner, &st);
    assert_int_equal(st.calls, CALLS * K);
    assert_int_equal(tg_profile_calls(bi), CALLS * K);
    assert_int_equal(tg_profile_steps(bi), CALLS * K * M);
    uint64_t t_inner_body = body_nodes_ran(bi, CALLS * K * M);
    uint64_t t_outer_body = body_nodes_ran(bo, CALLS * K);
    tg_profile_node sn;
    tg_profile_node_get(p, outer, &sn);
    assert_int_equal(tg_profile_total_ns(bi), st.ns);
    assert_true(t_inner_body <= st.ns);
    assert_true(st.ns <= t_outer_body);
    assert_true(t_outer_body <= sn.ns);
    /* The timeline names the inner body's runs with their inner steps. */
    long n_in = 0;
    for (long i = 0; i < tg_profile_trace_body_count(p); i++) {
        tg_profile_body_event ev;
        tg_profile_trace_body_event(p, i, &ev);
        if (ev.body != bi) continue;
        assert_int_equal(ev.step, n_in % M);
        n_in++;
    }
    assert_int_equal(n_in, K * M * tg_function_node_count(tg_profile_function(bi)));
    tg_profile_free(p);
    tg_array_free(x);
    tg_array_free(k);
    tg_array_free(m);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* An op_from_graph's body: compiled when the profile is made (before its
 * first run), one step per run. */
static void test_ofg_body(void **state) {
    (void)state;
    tg_graph *g = tu_load(ofg_json);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 0, ctx);
    assert_int_equal(tg_profile_body_count(p), 1);
    int outer = -1;
    const tg_profile *b = tg_profile_body(p, 0, &outer);
    assert_int_equal(outer, find_node(f, "y"));
    const tg_function *bf = tg_profile_function(b);
    assert_int_equal(tg_function_node_count(bf), 2);
    assert_string_equal(tg_function_node_op(bf, 0), "softmax");
    assert_string_equal(tg_function_node_op(bf, 1), "max");
    tg_array *x = ramp(4), *out = NULL;
    for (int c = 0; c < CALLS; c++) {
        assert_int_equal(tg_profile_call(p, &x, &out, ctx), 0);
        tg_array_free(out);
        out = NULL;
    }
    assert_int_equal(tg_profile_calls(b), CALLS);
    assert_int_equal(tg_profile_steps(b), CALLS);
    uint64_t in_body = body_nodes_ran(b, CALLS);
    tg_profile_node sn;
    tg_profile_node_get(p, outer, &sn);
    assert_true(in_body <= sn.ns);
    assert_int_equal(tg_profile_total_ns(b), sn.ns);
    tg_profile_free(p);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_and_memory),
        cmocka_unit_test(test_inplace_view_cost),
        cmocka_unit_test(test_composite_cost),
        cmocka_unit_test(test_product_cost),
        cmocka_unit_test(test_failed_call),
        cmocka_unit_test(test_origins),
        cmocka_unit_test(test_op_class),
        cmocka_unit_test(test_scan_body),
        cmocka_unit_test(test_body_hooked_elsewhere),
        cmocka_unit_test(test_nested_scan_body),
        cmocka_unit_test(test_ofg_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
