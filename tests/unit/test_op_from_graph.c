/* op_from_graph (FORMAT.md s7): a body run as a nested function (values by
 * hand, nested bodies, repeated calls), its gradient against finite
 * differences, the inlining rewrite (same values, named in the record),
 * .tgf save, restore and export, an ifelse inside a body (still lazy),
 * and the errors: bad inputs named, a failure inside the body naming the
 * outer node and the inner one; attrs.disconnected by the body's
 * connections (an ignored input, one feeding only an unused output). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcheck.h"
#include "testutil.h"

static tg_function *compile_opts(tg_graph *g, const char *fname, const char *preset, const char *inc) {
    tg_ctx *ctx = tg_ctx_new();
    int idx = tg_graph_function_find(g, fname, ctx);
    if (idx < 0) fail_msg("no function %s: %s", fname, tg_ctx_message(ctx));
    const char *incl[2] = {inc, NULL};
    tg_compile_options o = {.preset = preset, .include = inc ? incl : NULL};
    tg_function *f = tg_function_compile(g, idx, &o, ctx);
    if (!f) fail_msg("compile %s (%s): %s", fname, preset, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

static tg_array *vec(int n, const double *v) {
    int64_t shape[1] = {n};
    return tu_f64(1, shape, v);
}

static void expect_vec(const tg_array *a, int n, const double *want) {
    tg_array *w = vec(n, want);
    tu_assert_close(a, w, 1e-12, 1e-12);
    tg_array_free(w);
}

static bool has_op(const tg_function *f, const char *op) {
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_op(f, k), op)) return true;
    return false;
}

/* sumprod(x, y) = (x + y, inner(x, y)) with inner(u, v) = 2uv, itself an
 * op_from_graph in the body. */
#define INNER_BODY                                                                              \
    "{\"variables\":[{\"id\":\"u\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"         \
    "{\"id\":\"v\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],"                        \
    "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"u\",\"v\"],\"outputs\":[\"uv\"]},"                \
    "{\"op\":\"mul\",\"inputs\":[\"uv\",{\"value\":2}],\"outputs\":[\"uv2\"]}],"                \
    "\"inputs\":[\"u\",\"v\"],\"outputs\":[\"uv2\"]}"
#define OUTER_BODY                                                                              \
    "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"         \
    "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],"                        \
    "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"ab\"]},"                \
    "{\"op\":\"op_from_graph\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"m\"],"                  \
    "\"attrs\":{\"name\":\"inner\",\"body\":" INNER_BODY "}}],"                                 \
    "\"inputs\":[\"a\",\"b\"],\"outputs\":[\"ab\",\"m\"]}"

static const char *SUMPROD =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
    "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
    "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
    "\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"s\",\"p\"],\"name\":\"sp\","
    "\"attrs\":{\"name\":\"sumprod\",\"body\":" OUTER_BODY "}},"
    "{\"op\":\"sum\",\"inputs\":[\"p\"],\"outputs\":[\"c\"]}],"
    "\"functions\":{\"main\":{\"inputs\":[\"x\",\"y\"],\"outputs\":[\"s\",\"p\",\"c\"]}}}";

static void check_sumprod(tg_function *f) {
    double xs[2][3] = {{1, 2, 3}, {-1, 0.5, 4}}, ys[2][3] = {{4, 5, 6}, {2, 2, -0.25}};
    for (int call = 0; call < 4; call++) {
        const double *x = xs[call % 2], *y = ys[call % 2];
        tg_array *X = vec(3, x), *Y = vec(3, y), *out[3] = {0};
        tg_ctx *ctx = tg_ctx_new();
        if (tg_function_call(f, (tg_array *[]){X, Y}, out, ctx)) fail_msg("call: %s", tg_ctx_message(ctx));
        double s[3], p[3], c = 0;
        for (int i = 0; i < 3; i++) {
            s[i] = x[i] + y[i];
            p[i] = 2 * x[i] * y[i];
            c += p[i];
        }
        expect_vec(out[0], 3, s);
        expect_vec(out[1], 3, p);
        assert_true(fabs(tg_array_get_flat(out[2], 0) - c) < 1e-12);
        for (int i = 0; i < 3; i++) tg_array_free(out[i]);
        tg_array_free(X);
        tg_array_free(Y);
        tg_ctx_free(ctx);
    }
}

static void test_values(void **state) {
    (void)state;
    tg_graph *g = tu_load(SUMPROD);
    const char *presets[] = {"none", "fast_compile", "fast_run"};
    for (int p = 0; p < 3; p++) {
        tg_function *f = compile_opts(g, "main", presets[p], NULL);
        assert_true(has_op(f, "op_from_graph"));
        check_sumprod(f);
        tg_function_free(f);
    }
    tg_graph_free(g);
}

/* Inlining (opt-in): the same values, no op_from_graph left, and the
 * record names the rewrite, once per body (the nested one too). */
static void test_inline(void **state) {
    (void)state;
    tg_graph *g = tu_load(SUMPROD);
    const char *presets[] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_function *f = compile_opts(g, "main", presets[p], "inline");
        assert_false(has_op(f, "op_from_graph"));
        int n = 0;
        for (int i = 0; i < tg_function_rewrite_count(f); i++) {
            tg_rewrite_info ri;
            assert_int_equal(tg_function_rewrite_get(f, i, &ri), 0);
            if (!strcmp(ri.name, "inline_op_from_graph")) {
                n++;
                assert_string_equal(ri.pass, "inline");
            }
        }
        assert_int_equal(n, 2);
        check_sumprod(f);
        tg_function_free(f);
    }
    /* fast_run alone does not inline */
    tg_function *f = compile_opts(g, "main", "fast_run", NULL);
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info ri;
        tg_function_rewrite_get(f, i, &ri);
        assert_string_not_equal(ri.name, "inline_op_from_graph");
    }
    tg_function_free(f);
    tg_graph_free(g);
}

/* Gradients through op_from_graph against finite differences. */
static void test_grad(void **state) {
    (void)state;
    int fails = 0;
    const char *vars = V("x", "[2,3]") "," V("y", "[3]");
    /* body(a, b) = (tanh(a) * b, exp(a) + sin(b)), with a constant 0.5 */
    const char *body =
        "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
        "{\"id\":\"h\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},\"constant\":{\"data\":0.5}}],"
        "\"nodes\":[{\"op\":\"tanh\",\"inputs\":[\"a\"],\"outputs\":[\"ta\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"ta\",\"b\"],\"outputs\":[\"o1\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"a\"],\"outputs\":[\"ea\"]},"
        "{\"op\":\"sin\",\"inputs\":[\"b\"],\"outputs\":[\"sb\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"sb\",\"h\"],\"outputs\":[\"sbh\"]},"
        "{\"op\":\"add\",\"inputs\":[\"ea\",\"sbh\"],\"outputs\":[\"o2\"]}],"
        "\"inputs\":[\"a\",\"b\"],\"outputs\":[\"o1\",\"o2\"]}";
    char nodes[8192];
    snprintf(nodes, sizeof nodes,
             "{\"op\":\"op_from_graph\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"r1\",\"r2\"],"
             "\"attrs\":{\"name\":\"f\",\"body\":%s}}," N2("mul", "r1", "r2", "r") "," COST("r"),
             body);
    fails += check_case("op_from_graph", vars, nodes, 0.1, 0.9);
    /* only one output reaches the cost; a nested op_from_graph */
    snprintf(nodes, sizeof nodes,
             "{\"op\":\"op_from_graph\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"s\",\"r\"],"
             "\"attrs\":{\"name\":\"sp\",\"body\":"
             "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
             "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
             "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"ab\"]},"
             "{\"op\":\"op_from_graph\",\"inputs\":[\"ab\",\"b\"],\"outputs\":[\"m\"],"
             "\"attrs\":{\"name\":\"inner\",\"body\":" INNER_BODY "}}],"
             "\"inputs\":[\"a\",\"b\"],\"outputs\":[\"ab\",\"m\"]}}}," COST("r"));
    fails += check_case("nested op_from_graph", V("x", "[3]") "," V("y", "[3]"), nodes, 0.1, 0.9);
    assert_int_equal(fails, 0);
}

/* An ifelse inside a body stays lazy in the nested function: with c
 * false, a // 0 is never computed. */
static void test_ifelse_in_body(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
        "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[2]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"c\",\"x\",\"y\"],\"outputs\":[\"r\"],"
        "\"attrs\":{\"name\":\"safe_div\",\"body\":"
        "{\"variables\":[{\"id\":\"k\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
        "{\"id\":\"a\",\"type\":{\"dtype\":\"int64\",\"shape\":[2]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"int64\",\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"int_div\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"q\"]},"
        "{\"op\":\"ifelse\",\"inputs\":[\"k\",\"q\",\"a\"],\"outputs\":[\"o\"]}],"
        "\"inputs\":[\"k\",\"a\",\"b\"],\"outputs\":[\"o\"]}}}]}";
    tg_graph *g = tu_load(json);
    tg_function *f = compile_opts(g, "main", "fast_run", NULL);
    int64_t shape[1] = {2};
    tg_array *X = tg_array_new(TG_INT64, 1, shape), *Y0 = tg_array_new(TG_INT64, 1, shape),
             *Y3 = tg_array_new(TG_INT64, 1, shape);
    int64_t *x = tg_array_data(X), *y0 = tg_array_data(Y0), *y3 = tg_array_data(Y3);
    x[0] = 7, x[1] = -9, y0[0] = y0[1] = 0, y3[0] = y3[1] = 3;
    tg_array *T = tg_array_new_scalar(TG_BOOL, 1), *F = tg_array_new_scalar(TG_BOOL, 0), *out[1] = {0};
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, (tg_array *[]){F, X, Y0}, out, ctx), 0);
    assert_int_equal((int64_t)tg_array_get_flat(out[0], 0), 7);
    assert_int_equal((int64_t)tg_array_get_flat(out[0], 1), -9);
    tg_array_free(out[0]);
    assert_int_equal(tg_function_call(f, (tg_array *[]){T, X, Y3}, out, ctx), 0);
    /* floor division: 7 // 3 = 2, -9 // 3 = -3 */
    assert_int_equal((int64_t)tg_array_get_flat(out[0], 0), 2);
    assert_int_equal((int64_t)tg_array_get_flat(out[0], 1), -3);
    tg_array_free(out[0]);
    /* A failure inside the body names the outer node and the inner one. */
    assert_true(tg_function_call(f, (tg_array *[]){T, X, Y0}, out, ctx) != 0);
    const char *m = tg_ctx_message(ctx);
    if (!strstr(m, "nodes[0] (op_from_graph") || !strstr(m, "safe_div") || !strstr(m, "int_div") ||
        !strstr(m, "division by zero"))
        fail_msg("error '%s' should name the op_from_graph node, its body and the int_div node", m);
    tg_ctx_free(ctx);
    tg_array *arrs[] = {X, Y0, Y3, T, F};
    for (int i = 0; i < 5; i++) tg_array_free(arrs[i]);
    tg_function_free(f);
    tg_graph_free(g);
}

/* Saved, restored and exported: the body attrs survive. */
static void test_tgf(void **state) {
    (void)state;
    tg_graph *g = tu_load(SUMPROD);
    tg_function *f = compile_opts(g, "main", "fast_run", NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/tg-ofg-%ld.tgf", P_tmpdir, (long)getpid());
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf_save_info info = {.source = g};
    if (tg_tgf_save(path, &f, 1, &info, ctx)) fail_msg("save: %s", tg_ctx_message(ctx));
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("load: %s", tg_ctx_message(ctx));
    tg_function *r = tg_tgf_function(t, 0);
    assert_true(has_op(r, "op_from_graph"));
    check_sumprod(r);
    char *json = tg_tgf_export(t, 0, ctx);
    if (!json) fail_msg("export: %s", tg_ctx_message(ctx));
    assert_non_null(strstr(json, "\"sumprod\""));
    assert_non_null(strstr(json, "\"inner\""));
    tg_graph *g2 = tu_load(json);
    tg_function *f2 = compile_opts(g2, "main", "none", NULL);
    check_sumprod(f2);
    tg_function_free(f2);
    tg_graph_free(g2);
    tg_string_free(json);
    tg_tgf_free(t);
    unlink(path);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

static void test_errors(void **state) {
    (void)state;
    char msg[1024];
    const char *head =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
        "{\"id\":\"y32\",\"type\":{\"dtype\":\"float32\",\"shape\":[3]}},"
        "{\"id\":\"m\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,3]}},"
        "{\"id\":\"y4\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}}],\"nodes\":[";
    const char *body1 =
        "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"a\"],\"outputs\":[\"na\"]}],"
        "\"inputs\":[\"a\"],\"outputs\":[\"na\"]}";
    const char *shared_body =
        "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},\"shared\":{\"data\":1.0}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"aw\"]}],"
        "\"inputs\":[\"a\"],\"outputs\":[\"aw\"]}";
    struct {
        const char *in, *outs, *body, *extra, *want;
    } cases[] = {
        {"\"y32\"", "\"r\"", body1, "", "inputs[0] 'y32': the body's input 'a' is float64[3], got float32[3]"},
        {"\"m\"", "\"r\"", body1, "", "inputs[0] 'm'"},
        {"\"y4\"", "\"r\"", body1, "", "inputs[0] 'y4'"},
        {"\"x\",\"x\"", "\"r\"", body1, "", "the body takes 1 input, the node gives 2"},
        {"\"x\"", "\"r\",\"r2\"", body1, "", "the body has 1 output, the node lists 2"},
        {"\"x\"", "\"r\"", shared_body, "", "attrs.body.variables[1]: 'w' is shared"},
        {"\"x\"", "\"r\"", "{\"variables\":[],\"nodes\":[],\"inputs\":[],\"outputs\":[\"zz\"]}", "",
         "attrs.body"},
        {"\"x\"", "\"r\"", body1, ",\"inline\":true", "inline"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[4096];
        snprintf(json, sizeof json,
                 "%s{\"op\":\"op_from_graph\",\"inputs\":[%s],\"outputs\":[%s],\"attrs\":{\"body\":%s%s}}]}",
                 head, cases[i].in, cases[i].outs, cases[i].body, cases[i].extra);
        int rc = tu_load_fail(json, msg, sizeof msg);
        assert_true(rc != 0);
        if (!strstr(msg, cases[i].want)) fail_msg("case %zu: '%s' lacks '%s'", i, msg, cases[i].want);
        if (!strstr(msg, "nodes[0]")) fail_msg("case %zu: '%s' does not name the node", i, msg);
    }
    /* no body at all */
    char json[1024];
    snprintf(json, sizeof json, "%s{\"op\":\"op_from_graph\",\"inputs\":[\"x\"],\"outputs\":[\"r\"]}]}", head);
    assert_true(tu_load_fail(json, msg, sizeof msg) != 0);
    assert_non_null(strstr(msg, "attrs.body: missing"));
}

/* A weak scalar input takes the body input's dtype; the default name is
 * written back into the canonical attrs. */
static void test_weak_and_default_name(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"x\",{\"value\":3}],\"outputs\":[\"r\"],"
        "\"attrs\":{\"body\":{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float32\",\"shape\":[2]}},"
        "{\"id\":\"k\",\"type\":{\"dtype\":\"float32\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",\"k\"],\"outputs\":[\"ak\"]}],"
        "\"inputs\":[\"a\",\"k\"],\"outputs\":[\"ak\"]}}}]}";
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    char *s = tg_graph_to_string(g, ctx);
    assert_non_null(s);
    /* without the blanks the writer puts in */
    size_t k = 0;
    for (size_t i = 0; s[i]; i++)
        if (s[i] != ' ' && s[i] != '\n') s[k++] = s[i];
    s[k] = 0;
    assert_non_null(strstr(s, "\"name\":\"op_from_graph\""));
    tg_string_free(s);
    tg_function *f = compile_opts(g, "main", "fast_run", NULL);
    int64_t shape[1] = {2};
    tg_array *X = tg_array_new(TG_FLOAT32, 1, shape), *out[1] = {0};
    float *x = tg_array_data(X);
    x[0] = 1.5f, x[1] = -2;
    assert_int_equal(tg_function_call(f, (tg_array *[]){X}, out, ctx), 0);
    assert_int_equal(tg_array_dtype(out[0]), TG_FLOAT32);
    assert_true(tg_array_get_flat(out[0], 0) == 4.5 && tg_array_get_flat(out[0], 1) == -6);
    tg_array_free(out[0]);
    tg_array_free(X);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}


/* rop through op_from_graph and ifelse: r = ifelse(c, sq(x), 3x) with
 * sq(a) = a*a as a body; rop(r, x, v) = 2 x v when c, else 3 v (by hand). */
static void test_rop(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
        "{\"id\":\"v\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"x\"],\"outputs\":[\"s\"],"
        "\"attrs\":{\"name\":\"sq\",\"body\":{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",\"a\"],\"outputs\":[\"aa\"]}],"
        "\"inputs\":[\"a\"],\"outputs\":[\"aa\"]}}},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":3}],\"outputs\":[\"x3\"]},"
        "{\"op\":\"ifelse\",\"inputs\":[\"c\",\"s\",\"x3\"],\"outputs\":[\"r\"]},"
        "{\"op\":\"rop\",\"inputs\":[\"r\",\"x\",\"v\"],\"outputs\":[\"jv\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"c\",\"x\",\"v\"],\"outputs\":[\"jv\"]}}}";
    tg_graph *g = tu_load(json);
    double x[3] = {0.5, -2, 3}, v[3] = {1, 0.25, -1};
    tg_array *X = vec(3, x), *Vv = vec(3, v);
    for (int c = 0; c < 2; c++) {
        tg_array *C = tg_array_new_scalar(TG_BOOL, c), *out[1] = {0};
        tu_call(g, "main", (tg_array *[]){C, X, Vv}, out);
        double want[3];
        for (int i = 0; i < 3; i++) want[i] = c ? 2 * x[i] * v[i] : 3 * v[i];
        expect_vec(out[0], 3, want);
        tg_array_free(out[0]);
        tg_array_free(C);
    }
    tg_array_free(X);
    tg_array_free(Vv);
    tg_graph_free(g);
}

/* attrs.disconnected through op_from_graph follows the body's
 * connections (Theano's connection_pattern): an input the body's used
 * outputs ignore is disconnected. body (a, b) -> (2a, 3b); grad(c, ws)
 * with attrs (NULL: none) over x, y. */
#define DISC_BODY2                                                                              \
    "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"            \
    "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"                           \
    "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",{\"value\":2}],\"outputs\":[\"a2\"]},"        \
    "{\"op\":\"mul\",\"inputs\":[\"b\",{\"value\":3}],\"outputs\":[\"b3\"]}],"                  \
    "\"inputs\":[\"a\",\"b\"],\"outputs\":[\"a2\",\"b3\"]}"
/* body (a, b) -> 2a: b ignored */
#define DISC_BODY1                                                                              \
    "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"            \
    "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"                           \
    "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",{\"value\":2}],\"outputs\":[\"a2\"]}],"       \
    "\"inputs\":[\"a\",\"b\"],\"outputs\":[\"a2\"]}"
/* body (a, b) -> the op_from_graph of DISC_BODY1 over (a, b): nested */
#define DISC_NESTED                                                                             \
    "{\"variables\":[{\"id\":\"p\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"            \
    "{\"id\":\"q\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"                           \
    "\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"p\",\"q\"],\"outputs\":[\"r\"],"        \
    "\"attrs\":{\"name\":\"inner\",\"body\":" DISC_BODY1 "}}],"                                 \
    "\"inputs\":[\"p\",\"q\"],\"outputs\":[\"r\"]}"

static char *disc_json(const char *body, const char *outs, const char *used, const char *attrs) {
    char *j = malloc(16384);
    snprintf(j, 16384,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
             "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
             "\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"x\",\"y\"],\"outputs\":[%s],"
             "\"attrs\":{\"name\":\"f\",\"body\":%s}},"
             "{\"op\":\"sum\",\"inputs\":[\"%s\"],\"outputs\":[\"c\"]},"
             "{\"op\":\"grad\",\"inputs\":[\"c\",\"x\",\"y\"],\"outputs\":[\"gx\",\"gy\"]%s%s}],"
             "\"functions\":{\"main\":{\"inputs\":[\"x\",\"y\"],\"outputs\":[\"gx\",\"gy\"]}}}",
             outs, body, used, attrs ? ",\"attrs\":" : "", attrs ? attrs : "");
    return j;
}

/* Loads with attrs and gives gx = kx, gy = ky everywhere. */
static void expect_disc_grads(const char *body, const char *outs, const char *used, const char *attrs, double kx,
                              double ky) {
    char *j = disc_json(body, outs, used, attrs);
    tg_graph *g = tu_load(j);
    free(j);
    double x[3] = {0.5, -2, 3}, y[3] = {1, 0.25, -1}, wx[3] = {kx, kx, kx}, wy[3] = {ky, ky, ky};
    tg_array *X = vec(3, x), *Y = vec(3, y), *out[2] = {0};
    tu_call(g, "main", (tg_array *[]){X, Y}, out);
    expect_vec(out[0], 3, wx);
    expect_vec(out[1], 3, wy);
    for (int i = 0; i < 2; i++) tg_array_free(out[i]);
    tg_array_free(X);
    tg_array_free(Y);
    tg_graph_free(g);
}

static void test_disconnected(void **state) {
    (void)state;
    struct {
        const char *what, *body, *outs, *used;
    } raise[] = {
        {"the body ignores b", DISC_BODY1, "\"r\"", "r"},
        {"b feeds only the unused output", DISC_BODY2, "\"r\",\"s\"", "r"},
        {"a nested body ignores b", DISC_NESTED, "\"r\"", "r"},
    };
    for (size_t i = 0; i < sizeof raise / sizeof raise[0]; i++) {
        char msg[2048];
        char *j = disc_json(raise[i].body, raise[i].outs, raise[i].used, NULL);
        int rc = tu_load_fail(j, msg, sizeof msg);
        free(j);
        if (rc == TG_OK || !strstr(msg, "inputs[2]: the cost 'c' does not depend on 'y'"))
            fail_msg("%s: '%s' does not name y", raise[i].what, msg);
        /* "ignore" and "warn": zeros */
        expect_disc_grads(raise[i].body, raise[i].outs, raise[i].used, "{\"disconnected\":\"ignore\"}", 2, 0);
        expect_disc_grads(raise[i].body, raise[i].outs, raise[i].used, "{\"disconnected\":\"warn\"}", 2, 0);
    }
    /* the cost on s, which y feeds: now x is the disconnected one */
    expect_disc_grads(DISC_BODY2, "\"r\",\"s\"", "s", "{\"disconnected\":\"ignore\"}", 0, 3);
    char msg[2048];
    char *j = disc_json(DISC_BODY2, "\"r\",\"s\"", "s", NULL);
    int rc = tu_load_fail(j, msg, sizeof msg);
    free(j);
    if (rc == TG_OK || !strstr(msg, "inputs[1]: the cost 'c' does not depend on 'x'"))
        fail_msg("cost on s: '%s' does not name x", msg);
}

/* A body with no nodes (the identity): its lop is the cotangent itself,
 * under both presets. Expanding it inlined nothing, and the gradient
 * copied the inlined nodes from a builder whose node list was still NULL
 * (UBSan: memcpy from NULL; random_graphs more 21100207). */
static void test_empty_body_lop(void **state) {
    (void)state;
    const char *j = "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                    "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
                    "{\"id\":\"c\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]},"
                    "\"constant\":{\"data\":[1,-2,4]}}],"
                    "\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"b\"],\"outputs\":[\"y\"],"
                    "\"attrs\":{\"name\":\"id\",\"body\":{\"variables\":[{\"id\":\"p\",\"type\":"
                    "{\"dtype\":\"float64\",\"shape\":[3]}}],\"nodes\":[],\"inputs\":[\"p\"],"
                    "\"outputs\":[\"p\"]}}},"
                    "{\"op\":\"lop\",\"inputs\":[\"y\",\"b\",\"c\"],\"outputs\":[\"lb\"]}],"
                    "\"functions\":{\"main\":{\"inputs\":[\"b\"],\"outputs\":[\"y\",\"lb\"]}}}";
    tg_graph *g = tu_load(j);
    double b[3] = {0.5, 7, -3}, c[3] = {1, -2, 4};
    tg_array *B = vec(3, b);
    for (int preset = 0; preset < 2; preset++) {
        tg_array *out[2] = {0};
        tu_call_preset(g, "main", preset ? "fast_run" : "none", (tg_array *[]){B}, out);
        expect_vec(out[0], 3, b);
        expect_vec(out[1], 3, c);
        for (int i = 0; i < 2; i++) tg_array_free(out[i]);
    }
    tg_array_free(B);
    tg_graph_free(g);
}

/* y = 2 * outer(a) (node 'ss'), outer's body calling inner (node 'inn'),
 * whose body asserts a > 0 (node 'chk'); each node has a trace. */
#define J(...) #__VA_ARGS__
static const char *NESTED_ASSERT = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "a", "type": {"dtype": "float64", "shape": []}}],
    "nodes": [{"op": "op_from_graph", "name": "ss", "inputs": ["a"], "outputs": ["q"],
               "trace": [{"file": "model.py", "line": 20, "function": "build", "code": "q = outer(a)"}],
               "attrs": {"name": "outer", "body": {
                   "variables": [{"id": "b", "type": {"dtype": "float64", "shape": []}}],
                   "nodes": [{"op": "neg", "inputs": ["b"], "outputs": ["nb"]},
                             {"op": "op_from_graph", "name": "inn", "inputs": ["b"], "outputs": ["r"],
                              "trace": [{"file": "model.py", "line": 12, "function": "outer", "code": "r = inner(b)"}],
                              "attrs": {"name": "inner", "body": {
                                  "variables": [{"id": "c", "type": {"dtype": "float64", "shape": []}}],
                                  "nodes": [{"op": "gt", "inputs": ["c", {"value": 0}], "outputs": ["pos"]},
                                            {"op": "assert", "name": "chk", "inputs": ["c", "pos"], "outputs": ["cc"],
                                             "attrs": {"message": "c>0"},
                                             "trace": [{"file": "model.py", "line": 5, "function": "inner",
                                                        "code": "assert c > 0"}]},
                                            {"op": "sqrt", "inputs": ["cc"], "outputs": ["s"]}],
                                  "inputs": ["c"], "outputs": ["s"]}}},
                             {"op": "add", "inputs": ["nb", "r"], "outputs": ["o"]}],
                   "inputs": ["b"], "outputs": ["o"]}}},
              {"op": "mul", "inputs": ["q", {"value": 2.0}], "outputs": ["y"]}],
    "functions": {"main": {"inputs": ["a"], "outputs": ["y"]}}});

/* A body node that inlining moved out (two levels) fails with the words
 * of the bodies run as nested functions: each op_from_graph node, "in
 * the body of" its name, down to 'chk', then the traces innermost first.
 * It was named "(assert 'chk' -> ..., standing for q)" with the outer
 * node's trace. */
static void test_inline_error_names_body_node(void **state) {
    (void)state;
    const char *want = "nodes[0] (op_from_graph 'ss' -> q): in the body of 'outer': nodes[1] (op_from_graph "
                       "'inn' -> r): in the body of 'inner': nodes[1] (assert 'chk' -> cc): assertion failed: c>0 "
                       "[at model.py:5 in inner: assert c > 0] [at model.py:12 in outer: r = inner(b)] "
                       "[at model.py:20 in build: q = outer(a)]";
    tg_graph *g = tu_load(NESTED_ASSERT);
    tg_array *a = tg_array_new_scalar(TG_FLOAT64, -1.0);
    for (int p = 0; p < 2; p++) {
        tg_function *f = compile_opts(g, "main", p ? "fast_run" : "none", p ? "inline" : NULL);
        if (p) assert_false(has_op(f, "op_from_graph"));
        tg_array *out = NULL;
        tg_ctx *ctx = tg_ctx_new();
        assert_int_not_equal(tg_function_call(f, &a, &out, ctx), 0);
        if (strcmp(tg_ctx_message(ctx), want))
            fail_msg("%s:\n  want: %s\n  got:  %s", p ? "inlined" : "none", want, tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        tg_function_free(f);
    }
    tg_array_free(a);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_inline),
        cmocka_unit_test(test_grad),
        cmocka_unit_test(test_rop),
        cmocka_unit_test(test_ifelse_in_body),
        cmocka_unit_test(test_tgf),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_weak_and_default_name),
        cmocka_unit_test(test_disconnected),
        cmocka_unit_test(test_empty_body_lop),
        cmocka_unit_test(test_inline_error_names_body_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
