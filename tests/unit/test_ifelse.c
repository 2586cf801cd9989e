/* ifelse (FORMAT.md s7): lazy evaluation, where each branch holds a node
 * that fails when it runs (integer division by zero, a false assert, the
 * Cholesky factor of a matrix that is not positive definite), so running
 * the wrong branch fails the test; nested ifelse; values shared by both
 * branches; branch values used elsewhere; many calls alternating the
 * condition; the gradient by finite differences; the rewrites; merge
 * around branches; .tgf save and restore; the profiler. Expected values
 * are worked out by hand in the comments. */
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

static tg_array *i64(int n, const int64_t *v) {
    int64_t shape[1] = {n};
    tg_array *a = tg_array_new(TG_INT64, 1, shape);
    memcpy(tg_array_data(a), v, sizeof *v * (size_t)n);
    return a;
}

/* Call and expect success; the caller frees outputs. */
static void call_ok(tg_function *f, tg_array *const *in, tg_array **out) {
    tg_ctx *ctx = tg_ctx_new();
    if (tg_function_call(f, in, out, ctx)) fail_msg("call failed: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
}

/* Call and expect failure with a message containing `what`. */
static void call_fails(tg_function *f, tg_array *const *in, tg_array **out, const char *what) {
    tg_ctx *ctx = tg_ctx_new();
    int rc = tg_function_call(f, in, out, ctx);
    if (rc == 0) fail_msg("the call succeeded; expected an error with '%s'", what);
    if (!strstr(tg_ctx_message(ctx), what)) fail_msg("error '%s' lacks '%s'", tg_ctx_message(ctx), what);
    tg_ctx_free(ctx);
}

static void expect_i64(const tg_array *a, int n, const int64_t *want) {
    assert_int_equal(tg_array_dtype(a), TG_INT64);
    assert_int_equal(tg_array_size(a), n);
    for (int i = 0; i < n; i++)
        if ((int64_t)tg_array_get_flat(a, i) != want[i])
            fail_msg("element %d: got %lld, want %lld", i, (long long)tg_array_get_flat(a, i),
                     (long long)want[i]);
}

static void expect_scalar(const tg_array *a, double want) {
    assert_int_equal(tg_array_ndim(a), 0);
    if (fabs(tg_array_get_flat(a, 0) - want) > 1e-12) fail_msg("got %.17g, want %.17g", tg_array_get_flat(a, 0), want);
}

static bool has_op(const tg_function *f, const char *op) {
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_op(f, k), op)) return true;
    return false;
}

static int node_of(const tg_function *f, const char *op) {
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_op(f, k), op)) return k;
    return -1;
}

/* then: (x // y + 1, sum(cholesky(A)));  else: (assert(2x, all(x <= 100)), sum(A)).
 * x // y fails for y = 0, the assert for x > 100, cholesky for A not
 * positive definite. */
static const char *TWO_OUT =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
    "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
    "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}},"
    "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}},"
    "{\"id\":\"A\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,2]}}],"
    "\"nodes\":["
    "{\"op\":\"int_div\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q\"]},"
    "{\"op\":\"add\",\"inputs\":[\"q\",{\"value\":1}],\"outputs\":[\"t1\"]},"
    "{\"op\":\"cholesky\",\"inputs\":[\"A\"],\"outputs\":[\"L\"]},"
    "{\"op\":\"sum\",\"inputs\":[\"L\"],\"outputs\":[\"t2\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":2}],\"outputs\":[\"x2\"]},"
    "{\"op\":\"le\",\"inputs\":[\"x\",{\"value\":100}],\"outputs\":[\"small\"]},"
    "{\"op\":\"all\",\"inputs\":[\"small\"],\"outputs\":[\"ok\"]},"
    "{\"op\":\"assert\",\"inputs\":[\"x2\",\"ok\"],\"outputs\":[\"e1\"],\"attrs\":{\"message\":\"x too big\"}},"
    "{\"op\":\"sum\",\"inputs\":[\"A\"],\"outputs\":[\"e2\"]},"
    "{\"op\":\"ifelse\",\"inputs\":[\"c\",\"t1\",\"t2\",\"e1\",\"e2\"],\"outputs\":[\"r1\",\"r2\"]}],"
    "\"functions\":{\"main\":{\"inputs\":[\"c\",\"x\",\"y\",\"A\"],\"outputs\":[\"r1\",\"r2\"]}}}";

static void test_lazy_both_branches(void **state) {
    (void)state;
    tg_graph *g = tu_load(TWO_OUT);
    const char *presets[] = {"none", "fast_compile", "fast_run"};
    int64_t x_big[3] = {4, 6, 800}, x_ok[3] = {4, 6, 8}, y_ok[3] = {2, 3, 4}, y_zero[3] = {0, 0, 0};
    /* [[4, 2], [2, 3]] is positive definite: L = [[2, 0], [1, sqrt 2]];
     * [[1, 2], [2, 1]] is not (eigenvalues 3 and -1). */
    double pd[4] = {4, 2, 2, 3}, npd[4] = {1, 2, 2, 1};
    int64_t s22[2] = {2, 2};
    for (int p = 0; p < 3; p++) {
        tg_function *f = compile_opts(g, "main", presets[p], NULL);
        tg_array *out[2] = {0};
        /* then, with x too big for the else-branch's assert */
        tg_array *c1 = tg_array_new_scalar(TG_BOOL, 1), *c0 = tg_array_new_scalar(TG_BOOL, 0);
        tg_array *xb = i64(3, x_big), *xo = i64(3, x_ok), *yo = i64(3, y_ok), *yz = i64(3, y_zero);
        tg_array *Apd = tu_f64(2, s22, pd), *Anpd = tu_f64(2, s22, npd);
        tg_array *in1[4] = {c1, xb, yo, Apd};
        call_ok(f, in1, out);
        /* 4//2+1, 6//3+1, 800//4+1; 2 + 1 + sqrt(2) */
        expect_i64(out[0], 3, (int64_t[]){3, 3, 201});
        expect_scalar(out[1], 3 + 1.4142135623730951);
        tg_array_free(out[0]);
        tg_array_free(out[1]);
        /* else, with y = 0 (the division would fail) and A not PD. */
        tg_array *in2[4] = {c0, xo, yz, Anpd};
        call_ok(f, in2, out);
        expect_i64(out[0], 3, (int64_t[]){8, 12, 16});
        expect_scalar(out[1], 6);
        tg_array_free(out[0]);
        tg_array_free(out[1]);
        /* The guards are real: each failing node fails when its branch
         * is taken. */
        tg_array *in3[4] = {c1, xo, yz, Apd};
        call_fails(f, in3, out, "division by zero");
        tg_array *in4[4] = {c1, xo, yo, Anpd};
        call_fails(f, in4, out, "cholesky");
        tg_array *in5[4] = {c0, xb, yo, Apd};
        call_fails(f, in5, out, "x too big");
        tg_array *arrs[] = {c1, c0, xb, xo, yo, yz, Apd, Anpd};
        for (int i = 0; i < 8; i++) tg_array_free(arrs[i]);
        tg_function_free(f);
    }
    tg_graph_free(g);
}

/* r = ifelse(c1, ifelse(c2, x // y, 3x), assert(x - 1, all(x <= 100)))
 * with a condition of another dtype (int32, non-zero is true). */
static const char *NESTED =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
    "{\"id\":\"c1\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}},"
    "{\"id\":\"c2\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
    "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}},"
    "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}}],"
    "\"nodes\":["
    "{\"op\":\"int_div\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":3}],\"outputs\":[\"x3\"]},"
    "{\"op\":\"ifelse\",\"inputs\":[\"c2\",\"q\",\"x3\"],\"outputs\":[\"inner\"]},"
    "{\"op\":\"sub\",\"inputs\":[\"x\",{\"value\":1}],\"outputs\":[\"xm\"]},"
    "{\"op\":\"le\",\"inputs\":[\"x\",{\"value\":100}],\"outputs\":[\"small\"]},"
    "{\"op\":\"all\",\"inputs\":[\"small\"],\"outputs\":[\"ok\"]},"
    "{\"op\":\"assert\",\"inputs\":[\"xm\",\"ok\"],\"outputs\":[\"e\"],\"attrs\":{\"message\":\"x too big\"}},"
    "{\"op\":\"ifelse\",\"inputs\":[\"c1\",\"inner\",\"e\"],\"outputs\":[\"r\"]}],"
    "\"functions\":{\"main\":{\"inputs\":[\"c1\",\"c2\",\"x\",\"y\"],\"outputs\":[\"r\"]}}}";

static void test_nested(void **state) {
    (void)state;
    tg_graph *g = tu_load(NESTED);
    const char *presets[] = {"none", "fast_run"};
    int64_t xb[3] = {10, 20, 300}, xs[3] = {10, 20, 30}, yz[3] = {0, 0, 0}, yo[3] = {5, 4, 3};
    for (int p = 0; p < 2; p++) {
        tg_function *f = compile_opts(g, "main", presets[p], NULL);
        tg_array *out[1] = {0};
        tg_array *t = tg_array_new_scalar(TG_INT32, 7), *fl = tg_array_new_scalar(TG_INT32, 0);
        tg_array *t2 = tg_array_new_scalar(TG_FLOAT64, 0.5), *f2 = tg_array_new_scalar(TG_FLOAT64, 0);
        tg_array *XB = i64(3, xb), *XS = i64(3, xs), *YZ = i64(3, yz), *YO = i64(3, yo);
        /* c1, c2 true: x // y (x big: the assert must not run). */
        tg_array *a[4] = {t, t2, XB, YO};
        call_ok(f, a, out);
        expect_i64(out[0], 3, (int64_t[]){2, 5, 100});
        tg_array_free(out[0]);
        /* c1 true, c2 false: 3x, y = 0 and x big. */
        tg_array *b[4] = {t, f2, XB, YZ};
        call_ok(f, b, out);
        expect_i64(out[0], 3, (int64_t[]){30, 60, 900});
        tg_array_free(out[0]);
        /* c1 false: x - 1, y = 0 (neither inner branch may run). */
        tg_array *c[4] = {fl, t2, XS, YZ};
        call_ok(f, c, out);
        expect_i64(out[0], 3, (int64_t[]){9, 19, 29});
        tg_array_free(out[0]);
        /* and each guard fails when reached */
        tg_array *d[4] = {t, t2, XS, YZ};
        call_fails(f, d, out, "division by zero");
        tg_array *e[4] = {fl, f2, XB, YO};
        call_fails(f, e, out, "x too big");
        tg_array *arrs[] = {t, fl, t2, f2, XB, XS, YZ, YO};
        for (int i = 0; i < 8; i++) tg_array_free(arrs[i]);
        tg_function_free(f);
    }
    tg_graph_free(g);
}

/* s = 10x is read by both branches (so it is computed before the
 * branch); the then-branch also divides by y; t and e are also function
 * outputs in the second function (so neither branch is lazy there). */
static const char *SHARED =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
    "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
    "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}},"
    "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}}],"
    "\"nodes\":["
    "{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":10}],\"outputs\":[\"s\"]},"
    "{\"op\":\"int_div\",\"inputs\":[\"s\",\"y\"],\"outputs\":[\"t\"]},"
    "{\"op\":\"sub\",\"inputs\":[\"s\",{\"value\":1}],\"outputs\":[\"e\"]},"
    "{\"op\":\"ifelse\",\"inputs\":[\"c\",\"t\",\"e\"],\"outputs\":[\"r\"]},"
    "{\"op\":\"add\",\"inputs\":[\"r\",\"s\"],\"outputs\":[\"z\"]}],"
    "\"functions\":{\"lazy\":{\"inputs\":[\"c\",\"x\",\"y\"],\"outputs\":[\"z\"]},"
    "\"eager\":{\"inputs\":[\"c\",\"x\",\"y\"],\"outputs\":[\"z\",\"t\",\"e\"]}}}";

static void test_shared_and_used_elsewhere(void **state) {
    (void)state;
    tg_graph *g = tu_load(SHARED);
    int64_t x[3] = {1, 2, 3}, y[3] = {2, 5, 7}, yz[3] = {1, 0, 1};
    tg_array *X = i64(3, x), *Y = i64(3, y), *YZ = i64(3, yz);
    tg_array *c1 = tg_array_new_scalar(TG_BOOL, 1), *c0 = tg_array_new_scalar(TG_BOOL, 0);
    for (int p = 0; p < 2; p++) {
        tg_function *f = compile_opts(g, "lazy", p ? "fast_run" : "none", NULL);
        tg_array *out[3] = {0};
        /* s = [10, 20, 30]; then: s // y + s = [5, 4, 4] + s */
        call_ok(f, (tg_array *[]){c1, X, Y}, out);
        expect_i64(out[0], 3, (int64_t[]){15, 24, 34});
        tg_array_free(out[0]);
        /* else: (s - 1) + s, with a zero in y */
        call_ok(f, (tg_array *[]){c0, X, YZ}, out);
        expect_i64(out[0], 3, (int64_t[]){19, 39, 59});
        tg_array_free(out[0]);
        tg_function_free(f);
        /* Both branches are outputs: computed whatever c says. */
        f = compile_opts(g, "eager", p ? "fast_run" : "none", NULL);
        call_ok(f, (tg_array *[]){c0, X, Y}, out);
        expect_i64(out[0], 3, (int64_t[]){19, 39, 59});
        expect_i64(out[1], 3, (int64_t[]){5, 4, 4});
        expect_i64(out[2], 3, (int64_t[]){9, 19, 29});
        for (int i = 0; i < 3; i++) tg_array_free(out[i]);
        call_fails(f, (tg_array *[]){c0, X, YZ}, out, "division by zero");
        tg_function_free(f);
    }
    tg_array_free(X);
    tg_array_free(Y);
    tg_array_free(YZ);
    tg_array_free(c1);
    tg_array_free(c0);
    tg_graph_free(g);
}

/* Many calls, the condition alternating, with arrays larger than what the
 * VM keeps between calls (so the frees around skipped blocks matter): u =
 * exp(x) is made before the branch and last read inside the then-branch;
 * the then-branch's own values are large too. Under ASan nothing leaks and
 * every value is right on every call. */
static void test_many_calls_alternating(void **state) {
    (void)state;
    /* t = sqr(u) + 1 (then), e = neg(x) (else), r = ifelse(c, t, e) and
     * the scalar sum(u) also read after the branch; u = k*x. */
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2000]}},"
        "{\"id\":\"k\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":["
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"k\"],\"outputs\":[\"u\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"ex\"]},"
        "{\"op\":\"sqr\",\"inputs\":[\"u\"],\"outputs\":[\"u2\"]},"
        "{\"op\":\"add\",\"inputs\":[\"u2\",\"ex\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"e\"]},"
        "{\"op\":\"ifelse\",\"inputs\":[\"c\",\"t\",\"e\"],\"outputs\":[\"r\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"r\"],\"outputs\":[\"sr\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"c\",\"x\",\"k\"],\"outputs\":[\"sr\",\"r\"]}}}";
    tg_graph *g = tu_load(json);
    double *xv = malloc(sizeof *xv * 2000);
    double sx = 0, sx2 = 0, sex = 0;
    for (int i = 0; i < 2000; i++) {
        xv[i] = (double)(i % 7) * 0.125 - 0.25;
        sx += xv[i];
        sx2 += xv[i] * xv[i];
        sex += exp(xv[i]);
    }
    int64_t shape[1] = {2000};
    tg_array *X = tu_f64(1, shape, xv);
    for (int p = 0; p < 2; p++) {
        for (int nogc = 0; nogc < 2; nogc++) {
            tg_ctx *ctx = tg_ctx_new();
            tg_compile_options o = {.preset = p ? "fast_run" : "none", .no_gc = nogc};
            tg_function *f = tg_function_compile(g, 0, &o, ctx);
            assert_non_null(f);
            for (int call = 0; call < 60; call++) {
                bool c = (call % 3) != 1;
                double k = 1 + call % 5;
                tg_array *C = tg_array_new_scalar(TG_BOOL, c), *K = tg_array_new_scalar(TG_FLOAT64, k);
                tg_array *out[2] = {0};
                call_ok(f, (tg_array *[]){C, X, K}, out);
                /* then: sum(k^2 x^2 + exp x); else: -sum(x) */
                double want = c ? k * k * sx2 + sex : -sx;
                double got = tg_array_get_flat(out[0], 0);
                if (fabs(got - want) > 1e-9 * fabs(want) + 1e-9)
                    fail_msg("call %d (c=%d, k=%g): got %.17g, want %.17g", call, c, k, got, want);
                int i = 1234;
                double wi = c ? k * k * xv[i] * xv[i] + exp(xv[i]) : -xv[i];
                if (fabs(tg_array_get_flat(out[1], i) - wi) > 1e-12)
                    fail_msg("call %d: r[%d] = %g, want %g", call, i, tg_array_get_flat(out[1], i), wi);
                tg_array_free(out[0]);
                tg_array_free(out[1]);
                tg_array_free(C);
                tg_array_free(K);
            }
            tg_function_free(f);
            tg_ctx_free(ctx);
        }
    }
    tg_array_free(X);
    free(xv);
    tg_graph_free(g);
}

/* The gradient through ifelse against finite differences, both branches
 * taken (the conditions depend on the inputs but never flip under the
 * small steps: sum(x) > 0 for x in (0.2, 0.9)). */
static void test_grad(void **state) {
    (void)state;
    int fails = 0;
    const char *vars = V("x", "[2,3]") "," V("y", "[2,3]");
    /* then: x*y, else: exp(x); cond true */
    fails += check_case("ifelse then", vars,
                        N1("sum", "x", "sx") "," "{\"op\":\"gt\",\"inputs\":[\"sx\",{\"value\":0}],\"outputs\":[\"cnd\"]}" ","
                        "{\"op\":\"mul\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"xy\"]},"
                        N1("exp", "x", "ex") ","
                        "{\"op\":\"ifelse\",\"inputs\":[\"cnd\",\"xy\",\"ex\"],\"outputs\":[\"r\"]}," COST("r"),
                        0.2, 0.9);
    fails += check_case("ifelse else", vars,
                        N1("sum", "x", "sx") "," "{\"op\":\"lt\",\"inputs\":[\"sx\",{\"value\":0}],\"outputs\":[\"cnd\"]}" ","
                        "{\"op\":\"mul\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"xy\"]},"
                        N1("exp", "y", "ey") ","
                        "{\"op\":\"ifelse\",\"inputs\":[\"cnd\",\"xy\",\"ey\"],\"outputs\":[\"r\"]}," COST("r"),
                        0.2, 0.9);
    /* two outputs, one branch value used twice */
    fails += check_case("ifelse two outputs", vars,
                        N1("sum", "y", "sumy") "," "{\"op\":\"gt\",\"inputs\":[\"sumy\",{\"value\":0}],\"outputs\":[\"cnd\"]}" ","
                        N1("tanh", "x", "tx") "," N1("sin", "y", "syy") ","
                        "{\"op\":\"ifelse\",\"inputs\":[\"cnd\",\"tx\",\"x\",\"syy\",\"tx\"],\"outputs\":[\"r1\",\"r2\"]},"
                        N2("mul", "r1", "r2", "r") "," COST("r"),
                        0.2, 0.9);
    assert_int_equal(fails, 0);
}

/* A constant condition folds the ifelse away (the rewrite record says
 * so); equal branches too. */
static void test_rewrites(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}},"
        "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}}],"
        "\"nodes\":["
        "{\"op\":\"int_div\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q\"]},"
        "{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"n\"]},"
        "{\"op\":\"ifelse\",\"inputs\":[{\"value\":0},\"q\",\"n\"],\"outputs\":[\"r\"]},"
        "{\"op\":\"ifelse\",\"inputs\":[\"c\",\"n\",\"n\"],\"outputs\":[\"s\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"x\",\"y\",\"c\"],\"outputs\":[\"r\",\"s\"]}}}";
    tg_graph *g = tu_load(json);
    tg_function *f = compile_opts(g, "main", "fast_run", NULL);
    assert_false(has_op(f, "ifelse"));
    assert_false(has_op(f, "int_div"));
    bool cc = false, sb = false;
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info ri;
        assert_int_equal(tg_function_rewrite_get(f, i, &ri), 0);
        cc |= !strcmp(ri.name, "ifelse_const_cond");
        sb |= !strcmp(ri.name, "ifelse_same_branches");
    }
    assert_true(cc);
    assert_true(sb);
    int64_t x[3] = {1, -2, 3}, y[3] = {0, 0, 0};
    tg_array *X = i64(3, x), *Y = i64(3, y), *C = tg_array_new_scalar(TG_BOOL, 1), *out[2] = {0};
    call_ok(f, (tg_array *[]){X, Y, C}, out);
    expect_i64(out[0], 3, (int64_t[]){-1, 2, -3});
    expect_i64(out[1], 3, (int64_t[]){-1, 2, -3});
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_function_free(f);
    /* Without the rewrites (preset none) the VM still skips the branch. */
    f = compile_opts(g, "main", "none", NULL);
    assert_true(has_op(f, "ifelse"));
    call_ok(f, (tg_array *[]){X, Y, C}, out);
    expect_i64(out[0], 3, (int64_t[]){-1, 2, -3});
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_function_free(f);
    tg_array_free(X);
    tg_array_free(Y);
    tg_array_free(C);
    tg_graph_free(g);
}

/* Merge must not join a node of one branch with its twin in a nested
 * ifelse of the other branch: r = ifelse(c1, x // y, ifelse(c2, x // y,
 * x)); with c1 = c2 = false and y = 0 nothing may divide. Fusion keeps a
 * branch's nodes in their branch too (x // y + 1 fuses inside it). */
static void test_merge_keeps_branches(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"c1\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
        "{\"id\":\"c2\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
        "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}}],"
        "\"nodes\":["
        "{\"op\":\"int_div\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q1\"]},"
        "{\"op\":\"add\",\"inputs\":[\"q1\",{\"value\":1}],\"outputs\":[\"t1\"]},"
        "{\"op\":\"int_div\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q2\"]},"
        "{\"op\":\"add\",\"inputs\":[\"q2\",{\"value\":1}],\"outputs\":[\"t2\"]},"
        "{\"op\":\"ifelse\",\"inputs\":[\"c2\",\"t2\",\"x\"],\"outputs\":[\"inner\"]},"
        "{\"op\":\"ifelse\",\"inputs\":[\"c1\",\"t1\",\"inner\"],\"outputs\":[\"r\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"c1\",\"c2\",\"x\",\"y\"],\"outputs\":[\"r\"]}}}";
    tg_graph *g = tu_load(json);
    tg_function *f = compile_opts(g, "main", "fast_run", NULL);
    int64_t x[3] = {6, 8, 10}, y0[3] = {0, 0, 0}, y2[3] = {2, 2, 2};
    tg_array *X = i64(3, x), *Y0 = i64(3, y0), *Y2 = i64(3, y2);
    tg_array *T = tg_array_new_scalar(TG_BOOL, 1), *F = tg_array_new_scalar(TG_BOOL, 0), *out[1] = {0};
    call_ok(f, (tg_array *[]){F, F, X, Y0}, out);
    expect_i64(out[0], 3, (int64_t[]){6, 8, 10});
    tg_array_free(out[0]);
    call_ok(f, (tg_array *[]){F, T, X, Y2}, out);
    expect_i64(out[0], 3, (int64_t[]){4, 5, 6});
    tg_array_free(out[0]);
    call_ok(f, (tg_array *[]){T, F, X, Y2}, out);
    expect_i64(out[0], 3, (int64_t[]){4, 5, 6});
    tg_array_free(out[0]);
    call_fails(f, (tg_array *[]){F, T, X, Y0}, out, "division by zero");
    tg_function_free(f);
    tg_array *arrs[] = {X, Y0, Y2, T, F};
    for (int i = 0; i < 5; i++) tg_array_free(arrs[i]);
    tg_graph_free(g);
}

/* Saved to a .tgf and restored: the restored function is still lazy. */
static void test_tgf_roundtrip(void **state) {
    (void)state;
    tg_graph *g = tu_load(NESTED);
    tg_function *f = compile_opts(g, "main", "fast_run", NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/tg-ifelse-%ld.tgf", P_tmpdir, (long)getpid());
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf_save_info info = {.source = g};
    if (tg_tgf_save(path, &f, 1, &info, ctx)) fail_msg("save: %s", tg_ctx_message(ctx));
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("load: %s", tg_ctx_message(ctx));
    tg_function *r = tg_tgf_function(t, 0);
    assert_int_equal(tg_function_node_count(r), tg_function_node_count(f));
    for (int k = 0; k < tg_function_node_count(f); k++)
        assert_string_equal(tg_function_node_key(r, k), tg_function_node_key(f, k));
    int64_t xb[3] = {10, 20, 300}, yz[3] = {0, 0, 0};
    tg_array *XB = i64(3, xb), *YZ = i64(3, yz), *out[1] = {0};
    tg_array *t1 = tg_array_new_scalar(TG_INT32, 1), *f2 = tg_array_new_scalar(TG_FLOAT64, 0);
    call_ok(r, (tg_array *[]){t1, f2, XB, YZ}, out);
    expect_i64(out[0], 3, (int64_t[]){30, 60, 900});
    tg_array_free(out[0]);
    tg_array *z1 = tg_array_new_scalar(TG_INT32, 0), *t2 = tg_array_new_scalar(TG_FLOAT64, 1);
    call_fails(r, (tg_array *[]){t1, t2, XB, YZ}, out, "division by zero");
    call_fails(r, (tg_array *[]){z1, t2, XB, YZ}, out, "x too big");
    tg_array_free(z1);
    tg_array_free(t2);
    tg_array_free(XB);
    tg_array_free(YZ);
    tg_array_free(t1);
    tg_array_free(f2);
    tg_tgf_free(t);
    tg_function_free(f);
    tg_ctx_free(ctx);
    unlink(path);
    tg_graph_free(g);
}

/* The profiler sees one schedule position per node; a skipped node just
 * has fewer calls. */
static void test_profile(void **state) {
    (void)state;
    tg_graph *g = tu_load(SHARED);
    tg_function *f = compile_opts(g, "lazy", "none", NULL);
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = tg_profile_new(f, 2, ctx);
    assert_non_null(p);
    int64_t x[3] = {1, 2, 3}, y[3] = {2, 5, 7};
    tg_array *X = i64(3, x), *Y = i64(3, y), *out[1] = {0};
    tg_array *T = tg_array_new_scalar(TG_BOOL, 1), *F = tg_array_new_scalar(TG_BOOL, 0);
    for (int i = 0; i < 5; i++) { /* then, else, then, else, then */
        if (tg_profile_call(p, (tg_array *[]){i % 2 ? F : T, X, Y}, out, ctx))
            fail_msg("profile call: %s", tg_ctx_message(ctx));
        expect_i64(out[0], 3, i % 2 ? (int64_t[]){19, 39, 59} : (int64_t[]){15, 24, 34});
        tg_array_free(out[0]);
    }
    int kd = node_of(f, "int_div"), ks = node_of(f, "sub"), ki = node_of(f, "ifelse"), km = node_of(f, "mul");
    assert_true(kd >= 0 && ks >= 0 && ki >= 0 && km >= 0);
    /* the blocks come just before the ifelse, then-block first */
    assert_true(km < kd && kd < ks && ks < ki);
    tg_profile_node st;
    assert_int_equal(tg_profile_node_get(p, kd, &st), 0);
    assert_int_equal(st.calls, 3);
    assert_int_equal(tg_profile_node_get(p, ks, &st), 0);
    assert_int_equal(st.calls, 2);
    assert_int_equal(tg_profile_node_get(p, ki, &st), 0);
    assert_int_equal(st.calls, 5);
    assert_int_equal(tg_profile_node_get(p, km, &st), 0);
    assert_int_equal(st.calls, 5);
    tg_profile_free(p);
    tg_array *arrs[] = {X, Y, T, F};
    for (int i = 0; i < 4; i++) tg_array_free(arrs[i]);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* Load errors name the input. */
static void test_errors(void **state) {
    (void)state;
    char msg[1024];
    const char *head =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
        "{\"id\":\"v\",\"type\":{\"dtype\":\"bool\",\"shape\":[2]}},"
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float32\",\"shape\":[3]}},"
        "{\"id\":\"m\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,1]}}],\"nodes\":[";
    struct {
        const char *node, *want;
    } cases[] = {
        {"{\"op\":\"ifelse\",\"inputs\":[\"c\",\"a\",\"b\"],\"outputs\":[\"r\"]}", "inputs[2] 'b'"},
        {"{\"op\":\"ifelse\",\"inputs\":[\"c\",\"a\",\"m\"],\"outputs\":[\"r\"]}", "inputs[2] 'm'"},
        {"{\"op\":\"ifelse\",\"inputs\":[\"v\",\"a\",\"a\"],\"outputs\":[\"r\"]}", "inputs[0] 'v'"},
        {"{\"op\":\"ifelse\",\"inputs\":[\"c\",\"a\",\"a\",\"a\"],\"outputs\":[\"r\"]}", "needs 3 inputs"},
        {"{\"op\":\"ifelse\",\"inputs\":[\"c\",\"a\",\"a\"],\"outputs\":[\"r\"],\"attrs\":{\"n\":1}}", "attrs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[2048];
        snprintf(json, sizeof json, "%s%s]}", head, cases[i].node);
        int rc = tu_load_fail(json, msg, sizeof msg);
        assert_true(rc != 0);
        if (!strstr(msg, cases[i].want)) fail_msg("case %zu: '%s' lacks '%s'", i, msg, cases[i].want);
        if (!strstr(msg, "nodes[0]")) fail_msg("case %zu: '%s' does not name the node", i, msg);
    }
    /* output shape: the lengths both branches agree on */
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
                          "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,4]}},"
                          "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,5]}},"
                          "{\"id\":\"r\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,null]}}],"
                          "\"nodes\":[{\"op\":\"ifelse\",\"inputs\":[\"c\",\"a\",\"b\"],\"outputs\":[\"r\"]}]}");
    tg_graph_free(g);
}

/* A chain of n ifelse nodes, sequential (both branches read the last
 * result: r_i = ifelse(k > i, r + u, 2r)) or nested (only the
 * then-branch reads it, so each ifelse holds the whole chain before it
 * in its then-block: r_i = ifelse(k > i, r + u, i * u)); u = 2k is made
 * before them all and read in every block. Linking once scanned every
 * slot for every control point and merge's hash put these nodes in a
 * few runs of its table, both quadratic: 20,000 of them now link and
 * optimize in well under a second. */
static char *ifelse_chain_json(int n, bool nested) {
    size_t cap = 256 + (size_t)n * 512, len = 0;
    char *j = malloc(cap);
    assert_non_null(j);
    len += (size_t)snprintf(j + len, cap - len,
                            "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                            "{\"id\":\"k\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}}],\"nodes\":["
                            "{\"op\":\"mul\",\"inputs\":[\"k\",{\"value\":2}],\"outputs\":[\"u\"]}");
    for (int i = 0; i < n; i++) {
        char prev[64];
        if (i) snprintf(prev, sizeof prev, "\"r%d\"", i - 1);
        else
            snprintf(prev, sizeof prev, "{\"value\":{\"dtype\":\"int64\",\"data\":0}}");
        len += (size_t)snprintf(j + len, cap - len,
                                ",{\"op\":\"gt\",\"inputs\":[\"k\",{\"value\":%d}],\"outputs\":[\"c%d\"]}"
                                ",{\"op\":\"add\",\"inputs\":[%s,\"u\"],\"outputs\":[\"t%d\"]}",
                                i, i, prev, i);
        if (nested)
            len += (size_t)snprintf(j + len, cap - len,
                                    ",{\"op\":\"mul\",\"inputs\":[\"u\",{\"value\":%d}],\"outputs\":[\"e%d\"]}", i, i);
        else
            len += (size_t)snprintf(j + len, cap - len,
                                    ",{\"op\":\"mul\",\"inputs\":[%s,{\"value\":2}],\"outputs\":[\"e%d\"]}", prev, i);
        len += (size_t)snprintf(j + len, cap - len,
                                ",{\"op\":\"ifelse\",\"inputs\":[\"c%d\",\"t%d\",\"e%d\"],\"outputs\":[\"r%d\"]}", i,
                                i, i, i);
        assert_true(len < cap);
    }
    snprintf(j + len, cap - len, "],\"functions\":{\"main\":{\"inputs\":[\"k\"],\"outputs\":[\"r%d\"]}}}", n - 1);
    return j;
}

static void test_long_chains(void **state) {
    (void)state;
    const int n = 20000;
    for (int nested = 0; nested < 2; nested++) {
        char *json = ifelse_chain_json(n, nested);
        tg_graph *g = tu_load(json);
        free(json);
        for (int p = 0; p < 2; p++) {
            tg_function *f = compile_opts(g, "main", p ? "fast_run" : "none", NULL);
            int64_t ks[3] = {n, n - 3, 0};
            for (int c = 0; c < 3; c++) {
                int64_t k = ks[c], want;
                /* sequential: + 2k while i < k, then doubled n - k times;
                 * nested: all then-branches (k = n), else the last else */
                if (nested) want = k >= n ? 2 * k * n : 2 * k * (n - 1);
                else
                    want = 2 * k * k << (n - k < 62 ? n - k : 0);
                tg_array *K = tg_array_new_scalar(TG_INT64, (double)k), *out[1] = {0};
                call_ok(f, (tg_array *[]){K}, out);
                expect_i64(out[0], 1, &want);
                tg_array_free(out[0]);
                tg_array_free(K);
            }
            tg_function_free(f);
        }
        tg_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lazy_both_branches),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_shared_and_used_elsewhere),
        cmocka_unit_test(test_many_calls_alternating),
        cmocka_unit_test(test_grad),
        cmocka_unit_test(test_rewrites),
        cmocka_unit_test(test_merge_keeps_branches),
        cmocka_unit_test(test_tgf_roundtrip),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_long_chains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
