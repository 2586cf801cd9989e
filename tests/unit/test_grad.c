/* Symbolic gradients against central finite differences of the forward
 * function (float64), op by op, on shapes that broadcast and through
 * strided views; a second derivative (Hessian-vector product); the error
 * cases. The finite differences use only the forward kernels, so they are
 * independent of the gradient rules under test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "testutil.h"



static const char *UNARY[] = {"neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                              "sqrt", "sqr", "reciprocal", "sin", "cos", "tan", "arcsin", "arccos",
                              "arctan", "sinh", "cosh", "tanh", "arcsinh", "arctanh", "sigmoid",
                              "softplus", "relu", "erf", "erfc", "gammaln", "digamma", "identity",
                              NULL};
static const char *BINARY[] = {"add", "sub", "mul", "true_div", "pow", "maximum", "minimum",
                               "arctan2", NULL};

static void test_unary(void **state) {
    (void)state;
    int fails = 0;
    char nodes[512];
    for (int i = 0; UNARY[i]; i++) {
        snprintf(nodes, sizeof nodes, "{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]},%s,%s", UNARY[i],
                 N1("sin", "y", "sy"), N1("sum", "sy", "c"));
        bool pos = !strcmp(UNARY[i], "abs") || !strcmp(UNARY[i], "relu");
        fails += check_case(UNARY[i], V("x", "[2,3]"), nodes, pos ? 0.1 : 0.05, pos ? 0.9 : 0.6);
    }
    fails += check_case("arccosh", V("x", "[4]"),
                        N1("arccosh", "x", "y") "," N1("sin", "y", "sy") "," N1("sum", "sy", "c"), 1.2, 2.0);
    fails += check_case("trigamma", V("x", "[2,3]"),
                        N1("trigamma", "x", "y") "," N1("sin", "y", "sy") "," N1("sum", "sy", "c"), 0.6, 2.0);
    /* polygamma of a weak order, and of an int64 order that broadcasts
     * (no gradient reaches the order) */
    fails += check_case("polygamma", V("x", "[2,3]"),
                        "{\"op\":\"polygamma\",\"inputs\":[{\"value\":2},\"x\"],\"outputs\":[\"y\"]},"
                        N1("sin", "y", "sy") "," N1("sum", "sy", "c"), 0.8, 2.0);
    fails += check_case("polygamma_n", V("x", "[2,3]"),
                        "{\"op\":\"polygamma\",\"inputs\":[{\"value\":{\"dtype\":\"int64\",\"shape\":[2,1],\"data\":[3,4]}},\"x\"],\"outputs\":[\"y\"]},"
                        N1("sin", "y", "sy") "," N1("sum", "sy", "c"), 1.5, 3.0);
    if (fails) fail_msg("%d unary gradients differ", fails);
}

static void test_binary_broadcasting(void **state) {
    (void)state;
    int fails = 0;
    char nodes[512];
    for (int i = 0; BINARY[i]; i++) {
        snprintf(nodes, sizeof nodes, "{\"op\":\"%s\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"z\"]},%s,%s",
                 BINARY[i], N1("sin", "z", "sy"), N1("sum", "sy", "c"));
        /* y broadcasts along x's rows; then along a length-1 axis. */
        fails += check_case(BINARY[i], V("x", "[2,3]") "," V("y", "[3]"), nodes, 0.2, 0.9);
        fails += check_case(BINARY[i], V("x", "[2,1]") "," V("y", "[2,3]"), nodes, 0.2, 0.9);
    }
    fails += check_case("add3", V("x", "[2,3]") "," V("y", "[3]") "," V("w", "[2,1]"),
                        "{\"op\":\"add\",\"inputs\":[\"x\",\"y\",\"w\"],\"outputs\":[\"z\"]}," N1("sin", "z", "sy") "," N1("sum", "sy", "c"), -1, 1);
    fails += check_case("mul3", V("x", "[2,3]") "," V("y", "[3]") "," V("w", "[2,1]"),
                        "{\"op\":\"mul\",\"inputs\":[\"x\",\"y\",\"w\"],\"outputs\":[\"z\"]}," N1("sin", "z", "sy") "," N1("sum", "sy", "c"), -1, 1);
    fails += check_case("weak", V("x", "[3]"),
                        "{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":3}],\"outputs\":[\"z\"]}," N1("sin", "z", "sy") "," N1("sum", "sy", "c"), -1, 1);
    fails += check_case("switch_clip", V("x", "[2,3]") "," V("y", "[3]"),
                        "{\"op\":\"gt\",\"inputs\":[\"x\",{\"value\":0}],\"outputs\":[\"m\"]},"
                        "{\"op\":\"switch\",\"inputs\":[\"m\",\"x\",\"y\"],\"outputs\":[\"s\"]},"
                        "{\"op\":\"clip\",\"inputs\":[\"s\",{\"value\":-0.5},{\"value\":0.5}],\"outputs\":[\"z\"]},"
                        N1("sin", "z", "sy") "," N1("sum", "sy", "c"), -1, 1);
    /* clip with lo > hi is hi everywhere (NumPy's minimum(maximum(x, lo),
     * hi)): x in [0.1, 0.9], lo in [0.6, 1.4], hi in [-0.4, 0.4], so x
     * lies below lo, above hi, or between them (where Theano's masks gave
     * both lo and hi the element) */
    fails += check_case("clip_lo_above_hi", V("x", "[2,3]") "," V("l", "[3]") "," V("h", "[2,1]"),
                        "{\"op\":\"add\",\"inputs\":[\"l\",{\"value\":0.5}],\"outputs\":[\"lo\"]},"
                        "{\"op\":\"sub\",\"inputs\":[\"h\",{\"value\":0.5}],\"outputs\":[\"hi\"]},"
                        "{\"op\":\"clip\",\"inputs\":[\"x\",\"lo\",\"hi\"],\"outputs\":[\"z\"]},"
                        N1("sin", "z", "sy") "," N1("sum", "sy", "c"), 0.1, 0.9);
    if (fails) fail_msg("%d binary gradients differ", fails);
}

static void test_reductions(void **state) {
    (void)state;
    const char *ops[] = {"sum", "mean", "max", "min", "logsumexp", "prod", NULL};
    int fails = 0;
    char nodes[512];
    for (int i = 0; ops[i]; i++) {
        const char *axes[] = {"null", "1", "[0, 2]", "-1"};
        for (int a = 0; a < 4; a++) {
            snprintf(nodes, sizeof nodes,
                     "{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"r\"],\"attrs\":{\"axis\":%s,\"keepdims\":%s}},"
                     "%s,%s",
                     ops[i], axes[a], a == 2 ? "true" : "false", N1("sin", "r", "sy"), N1("sum", "sy", "c"));
            fails += check_case(ops[i], V("x", "[2,3,4]"), nodes, 0.1, 1.0);
        }
    }
    if (fails) fail_msg("%d reduction gradients differ", fails);
}

static void test_products_and_shapes(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("dot_mm", V("a", "[2,3]") "," V("b", "[3,4]"), N2("dot", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("dot_mv", V("a", "[2,3]") "," V("b", "[3]"), N2("dot", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("dot_vm", V("a", "[3]") "," V("b", "[3,2]"), N2("dot", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("dot_vv", V("a", "[3]") "," V("b", "[3]"), N2("dot", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("matmul", V("a", "[2,3]") "," V("b", "[3,2]"), N2("matmul", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("outer", V("a", "[2]") "," V("b", "[3]"), N2("outer", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("gemm", V("z", "[2,4]") "," V("x", "[2,3]") "," V("y", "[3,4]"),
                        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":0.7},\"x\",\"y\",{\"value\":-1.5}],\"outputs\":[\"r\"]},"
                        COST("r"), -1, 1);
    fails += check_case("transposed_dot", V("a", "[3,2]") "," V("b", "[3,4]"),
                        N1("transpose", "a", "at") "," N2("dot", "at", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("dimshuffle", V("a", "[2,1,3]"),
                        NA("dimshuffle", "a", "d", J({"order": [2, "x", 0]})) "," COST("d"), -1, 1);
    fails += check_case("reshape_flatten", V("a", "[2,3,2]"),
                        "{\"op\":\"reshape\",\"inputs\":[\"a\",{\"value\":{\"dtype\":\"int64\",\"shape\":[2],\"data\":[3,4]}}],\"outputs\":[\"r\"]},"
                        NA("flatten", "r", "f", J({"ndim": 1})) "," COST("f"), -1, 1);
    fails += check_case("subtensor", V("a", "[4,3]"),
                        NA("subtensor", "a", "s", J({"index": [{"start": 3, "stop": null, "step": -2}, 1]})) "," COST("s"), -1, 1);
    fails += check_case("set_inc_subtensor", V("a", "[4,3]") "," V("b", "[3]"),
                        "{\"op\":\"set_subtensor\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"s\"],\"attrs\":{\"index\":[1]}},"
                        "{\"op\":\"inc_subtensor\",\"inputs\":[\"s\",\"b\"],\"outputs\":[\"t\"],\"attrs\":{\"index\":[{\"start\":0,\"stop\":2}]}},"
                        COST("t"), -1, 1);
    if (fails) fail_msg("%d gradients differ", fails);
}

static void test_nn(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("softmax", V("x", "[2,4]"), NA("softmax", "x", "p", J({"axis": -1})) "," COST("p"), -2, 2);
    fails += check_case("softmax_axis0", V("x", "[3,2]"), NA("softmax", "x", "p", J({"axis": 0})) "," COST("p"), -2, 2);
    fails += check_case("log_softmax", V("x", "[2,4]"), NA("log_softmax", "x", "p", J({"axis": 1})) "," COST("p"), -2, 2);
    fails += check_case("cce_dense", V("x", "[2,4]") "," V("t", "[2,4]"),
                        N1("softmax", "x", "p") "," N2("categorical_crossentropy", "p", "t", "e") "," COST("e"), 0.1, 1);
    fails += check_case("cce_index", V("x", "[3,4]"),
                        N1("softmax", "x", "p") ","
                        "{\"op\":\"categorical_crossentropy\",\"inputs\":[\"p\",{\"value\":{\"dtype\":\"int64\",\"shape\":[3],\"data\":[3,0,1]}}],\"outputs\":[\"e\"]},"
                        COST("e"), -2, 2);
    fails += check_case("bce", V("x", "[5]") "," V("t", "[5]"),
                        N1("sigmoid", "x", "p") "," N2("binary_crossentropy", "p", "t", "e") "," COST("e"), 0.1, 0.9);
    if (fails) fail_msg("%d gradients differ", fails);
}

/* A gradient is a graph like any other: differentiate it again. With
 * c = sum(x^3), d c/d x = 3 x^2 and d/dx sum(v * 3x^2) = 6 x v. */
static void test_second_derivative(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" V("x", "[3]") "," V("v", "[3]") "],"
        "\"nodes\":[{\"op\":\"pow\",\"inputs\":[\"x\",{\"value\":3}],\"outputs\":[\"x3\"]},"
        N1("sum", "x3", "c") ","
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"x\"],\"outputs\":[\"gx\"]},"
        N2("mul", "gx", "v", "gv") "," N1("sum", "gv", "c2") ","
        "{\"op\":\"grad\",\"inputs\":[\"c2\",\"x\"],\"outputs\":[\"hv\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\",\"v\"],\"outputs\":[\"gx\",\"hv\"]}}}";
    tg_graph *g = tu_load(json);
    double xs[3] = {0.5, -1.0, 2.0}, vs[3] = {1.0, 2.0, -0.5};
    int64_t three = 3;
    tg_array *in[2] = {tg_array_new_from(TG_FLOAT64, 1, &three, xs), tg_array_new_from(TG_FLOAT64, 1, &three, vs)};
    tg_array *out[2];
    tu_call(g, "f", in, out);
    for (int i = 0; i < 3; i++) {
        assert_true(fabs(tg_array_get_flat(out[0], i) - 3 * xs[i] * xs[i]) < 1e-12);
        assert_true(fabs(tg_array_get_flat(out[1], i) - 6 * xs[i] * vs[i]) < 1e-12);
    }
    for (int i = 0; i < 2; i++) {
        tg_array_free(in[i]);
        tg_array_free(out[i]);
    }
    tg_graph_free(g);
}

/* The gradient gx of sum(gammaln(x)) and the Hessian-vector product hv
 * (the gradient of sum(gx * v)), as the start of a graph's text. */
#define GAMMALN_HV \
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" V("x", "[3]") "," V("v", "[3]") "]," \
    "\"nodes\":[" N1("gammaln", "x", "lg") "," N1("sum", "lg", "c") "," \
    "{\"op\":\"grad\",\"inputs\":[\"c\",\"x\"],\"outputs\":[\"gx\"]}," \
    N2("mul", "gx", "v", "gv") "," N1("sum", "gv", "c2") "," \
    "{\"op\":\"grad\",\"inputs\":[\"c2\",\"x\"],\"outputs\":[\"hv\"]}"

/* f(x, v) of json at x = GX and v = GV under both presets: its two
 * outputs must be want0 and want1 within tol0 and tol1. */
static const double GX[3] = {1.0, 0.5, 2.0}, GV[3] = {1.0, 2.0, -0.5};

static void check_xv(const char *json, const double *want0, double tol0, const double *want1,
                     double tol1) {
    const char *presets[] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_graph *g = tu_load(json);
        int64_t three = 3;
        tg_array *in[2] = {tg_array_new_from(TG_FLOAT64, 1, &three, GX),
                           tg_array_new_from(TG_FLOAT64, 1, &three, GV)};
        tg_array *out[2];
        tu_call_preset(g, "f", presets[p], in, out);
        for (int i = 0; i < 3; i++) {
            assert_true(fabs(tg_array_get_flat(out[0], i) - want0[i]) < tol0);
            assert_true(fabs(tg_array_get_flat(out[1], i) - want1[i]) < tol1);
        }
        for (int i = 0; i < 2; i++) {
            tg_array_free(in[i]);
            tg_array_free(out[i]);
        }
        tg_graph_free(g);
    }
}

/* The second derivative of gammaln is trigamma: the Hessian of
 * sum(gammaln(x)) is diag(psi1(x)), at x = 1, 1/2, 2 the closed forms
 * pi^2/6, pi^2/2 and pi^2/6 - 1 (Abramowitz and Stegun 6.4); the first
 * derivative psi(x): -gamma, -gamma - 2 ln 2, 1 - gamma. */
static void test_gammaln_second_derivative(void **state) {
    (void)state;
    const char *json =
        GAMMALN_HV "],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\",\"v\"],\"outputs\":[\"gx\",\"hv\"]}}}";
    const double euler = 0.57721566490153286061, pi2 = M_PI * M_PI;
    double psi[3] = {-euler, -euler - 2 * M_LN2, 1 - euler}, psi1[3] = {pi2 / 6, pi2 / 2, pi2 / 6 - 1};
    double hv[3];
    for (int i = 0; i < 3; i++) hv[i] = psi1[i] * GV[i];
    check_xv(json, psi, 1e-13, hv, 1e-12);
}

/* Third and fourth derivatives of gammaln: digamma's gradient is
 * trigamma, trigamma's polygamma(2, x), polygamma(n, x)'s polygamma(n + 1,
 * x). Closed forms (Abramowitz and Stegun 6.4): psi2(1) = -2 zeta(3),
 * psi2(1/2) = -14 zeta(3), psi3(1) = pi^4/15, psi3(1/2) = pi^4, and the
 * recurrence psi_n(x + 1) = psi_n(x) + (-1)^n n! / x^(n+1) for x = 2.
 * Both presets. */
static void test_gammaln_higher_derivatives(void **state) {
    (void)state;
    const char *json =
        GAMMALN_HV ","
        N1("sum", "hv", "c3") ","
        "{\"op\":\"grad\",\"inputs\":[\"c3\",\"x\"],\"outputs\":[\"t\"]},"
        N1("sum", "t", "c4") ","
        "{\"op\":\"grad\",\"inputs\":[\"c4\",\"x\"],\"outputs\":[\"q\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\",\"v\"],\"outputs\":[\"t\",\"q\"]}}}";
    const double zeta3 = 1.2020569031595942854, pi4 = M_PI * M_PI * M_PI * M_PI;
    const double psi2[3] = {-2 * zeta3, -14 * zeta3, -2 * zeta3 + 2};
    const double psi3[3] = {pi4 / 15, pi4, pi4 / 15 - 6};
    double t[3], q[3];
    for (int i = 0; i < 3; i++) {
        t[i] = psi2[i] * GV[i];
        q[i] = psi3[i] * GV[i];
    }
    check_xv(json, t, 1e-12, q, 1e-11);
}

/* Where the general formula divides zero by zero. The gradient of a
 * product at a zero is the product of the others: for prod over rows of
 * [[2, 0, 3], [0, 0, 4], [2, 5, 3]] that is [[0, 6, 0], [0, 0, 0],
 * [15, 6, 10]] (prod / x would give NaN at every zero). For x^y at x = 0:
 * d/dx is 0 where y = 0 (x^0 is constant), inf where 0 < y < 1, -inf
 * where y = -1 (-x^-2), and d/dy is 0 where y >= 0 (0^y stays 0), -inf
 * where y = -1 (inf * log 0). Both presets. */
static void test_zeros(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" V("a", "[3,3]") "," V("x", "[5]") "," V("y", "[5]") "],"
        "\"nodes\":[" NA("prod", "a", "p", J({"axis": 1})) "," N1("sum", "p", "c") ","
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"a\"],\"outputs\":[\"ga\"]},"
        N2("pow", "x", "y", "z") "," N1("sum", "z", "d") ","
        "{\"op\":\"grad\",\"inputs\":[\"d\",\"x\",\"y\"],\"outputs\":[\"gx\",\"gy\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"a\",\"x\",\"y\"],\"outputs\":[\"ga\",\"gx\",\"gy\"]}}}";
    tg_graph *g = tu_load(json);
    double as[9] = {2, 0, 3, 0, 0, 4, 2, 5, 3}, xs[5] = {0, 0, 0, 0, 2}, ys[5] = {0, 2, 0.5, -1, 3};
    double want_a[9] = {0, 6, 0, 0, 0, 0, 15, 6, 10};
    double want_x[5] = {0, 0, INFINITY, -INFINITY, 12};
    double want_y[5] = {0, 0, 0, -INFINITY, 8 * log(2.0)};
    int64_t s33[2] = {3, 3}, s5 = 5;
    tg_array *in[3] = {tu_f64(2, s33, as), tu_f64(1, &s5, xs), tu_f64(1, &s5, ys)};
    const char *presets[2] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_array *out[3];
        tu_call_preset(g, "f", presets[p], in, out);
        for (int i = 0; i < 9; i++) tu_assert_near(tg_array_get_flat(out[0], i), want_a[i], 1e-12);
        for (int i = 0; i < 5; i++) {
            tu_assert_near(tg_array_get_flat(out[1], i), want_x[i], 1e-12);
            tu_assert_near(tg_array_get_flat(out[2], i), want_y[i], 1e-12);
        }
        for (int i = 0; i < 3; i++) tg_array_free(out[i]);
    }
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_graph_free(g);
}

/* logsumexp over rows that are all -inf (log 0 in a log-space sum, as
 * CTC's or an HMM's dynamic programme writes an impossible path): the
 * value is -inf and the gradient 0, not NaN (docs/format-choices.md); rows
 * with some -inf are softmax as usual. By hand: [1, -inf, -inf] -> [1,
 * 0, 0]; [0, 0, log 2] sums to 4 -> [1/4, 1/4, 1/2]; and the rows of
 * the sum c = sum(l) weigh 1 each. Both presets (fast_run fuses it). */
static void test_logsumexp_neg_inf(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" V("x", "[3,3]") "],"
        "\"nodes\":[" NA("logsumexp", "x", "l", J({"axis": 1})) "," N1("sum", "l", "c") ","
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"x\"],\"outputs\":[\"gx\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"l\",\"gx\"]}}}";
    tg_graph *g = tu_load(json);
    double xs[9] = {-INFINITY, -INFINITY, -INFINITY, 1, -INFINITY, -INFINITY, 0, 0, log(2.0)};
    double want_l[3] = {-INFINITY, 1, log(4.0)}, want_g[9] = {0, 0, 0, 1, 0, 0, 0.25, 0.25, 0.5};
    int64_t s33[2] = {3, 3};
    tg_array *x = tu_f64(2, s33, xs);
    const char *presets[2] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_array *out[2];
        tu_call_preset(g, "f", presets[p], &x, out);
        for (int i = 0; i < 3; i++) tu_assert_near(tg_array_get_flat(out[0], i), want_l[i], 1e-12);
        for (int i = 0; i < 9; i++) tu_assert_near(tg_array_get_flat(out[1], i), want_g[i], 1e-12);
        for (int i = 0; i < 2; i++) tg_array_free(out[i]);
    }
    tg_array_free(x);
    tg_graph_free(g);
}

/* float16 mean, var and std over more elements than float16 can count
 * (65504 at most): the gradients are 1/N, 2 (x - m)/N and (x - m)/(N s)
 * for the cost sum(r), by hand from x as float16 holds it. They were 0:
 * the count, cast to float16 first, was inf. */
static void test_float16_counts(void **state) {
    (void)state;
    const char *ops[3] = {"mean", "var", "std"};
    enum { N = 70000 };
    int64_t shp[2] = {N, 2};
    double *xs = malloc(sizeof *xs * 2 * N);
    assert_non_null(xs);
    for (int i = 0; i < 2 * N; i++) xs[i] = (double)((i * 37) % 101) / 101.0;
    tg_array *x64 = tu_f64(2, shp, xs), *x = tg_array_copy(x64, TG_FLOAT16);
    double m[2] = {0, 0}, v[2] = {0, 0};
    for (int i = 0; i < 2 * N; i++) m[i % 2] += tg_array_get_flat(x, i) / N;
    for (int i = 0; i < 2 * N; i++) v[i % 2] += pow(tg_array_get_flat(x, i) - m[i % 2], 2) / N;
    for (int o = 0; o < 3; o++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":"
                 "\"float16\",\"shape\":[%d,2]}}],\"nodes\":["
                 "{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"r\"],\"attrs\":{\"axis\":0}},"
                 N1("sum", "r", "c") ",{\"op\":\"grad\",\"inputs\":[\"c\",\"x\"],\"outputs\":[\"gx\"]}],"
                 "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"gx\"]}}}",
                 N, ops[o]);
        tg_graph *g = tu_load(json);
        const char *presets[2] = {"none", "fast_run"};
        for (int p = 0; p < 2; p++) {
            tg_array *gx;
            tu_call_preset(g, "f", presets[p], &x, &gx);
            assert_int_equal(tg_array_dtype(gx), TG_FLOAT16);
            for (int i = 0; i < 2 * N; i += 997) {
                double d = tg_array_get_flat(x, i) - m[i % 2];
                double want = o == 0 ? 1.0 / N : o == 1 ? 2 * d / N : d / (N * sqrt(v[i % 2]));
                /* float16 holds these (about 1e-5) as subnormals, 6e-8 apart;
                 * x - m itself is within 2^-11 of 0.5 */
                tu_assert_near(tg_array_get_flat(gx, i), want, 1e-7 + 2e-3 * fabs(want));
            }
            tg_array_free(gx);
        }
        tg_graph_free(g);
    }
    tg_array_free(x);
    tg_array_free(x64);
    free(xs);
}

/* The logistic regression's hand-written gradients equal grad's. */
/* Second derivatives at the same zeros. For a row's product, the
 * Hessian has the product of all but x_i and x_j at (i, j), 0 on the
 * diagonal; its row sums (the Hessian times ones) for the rows [2, 0, 3],
 * [0, 0, 4], [2, 5, 3] are [3, 5, 2], [4, 4, 0], [8, 5, 7] (each a sum of
 * two entries, worked out by hand). For x^y by x: y (y - 1) x^(y - 2), at
 * (x, y) = (0, 0) 0 (x^0 is constant), (0, 2) 2, (2, 3) 12. Both were
 * NaN (0 * inf in the masked branches) or, for the products, 0 where a
 * zero's partner carries the derivative. */
static void test_zeros_second_derivative(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" V("a", "[3,3]") "," V("x", "[3]") "," V("y", "[3]") "],"
        "\"nodes\":[" NA("prod", "a", "p", J({"axis": 1})) "," N1("sum", "p", "c1") ","
        N2("pow", "x", "y", "z") "," N1("sum", "z", "c2") "," N2("add", "c1", "c2", "c") ","
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"a\",\"x\"],\"outputs\":[\"ga\",\"gx\"]},"
        N1("sum", "ga", "sa") "," N1("sum", "gx", "sx") "," N2("add", "sa", "sx", "s") ","
        "{\"op\":\"grad\",\"inputs\":[\"s\",\"a\",\"x\"],\"outputs\":[\"ha\",\"hx\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"a\",\"x\",\"y\"],\"outputs\":[\"ha\",\"hx\"]}}}";
    tg_graph *g = tu_load(json);
    double as[9] = {2, 0, 3, 0, 0, 4, 2, 5, 3}, xs[3] = {0, 0, 2}, ys[3] = {0, 2, 3};
    double want_a[9] = {3, 5, 2, 4, 4, 0, 8, 5, 7}, want_x[3] = {0, 2, 12};
    int64_t s33[2] = {3, 3}, s3 = 3;
    tg_array *in[3] = {tu_f64(2, s33, as), tu_f64(1, &s3, xs), tu_f64(1, &s3, ys)};
    const char *presets[2] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_array *out[2];
        tu_call_preset(g, "f", presets[p], in, out);
        for (int i = 0; i < 9; i++) tu_assert_near(tg_array_get_flat(out[0], i), want_a[i], 1e-12);
        for (int i = 0; i < 3; i++) tu_assert_near(tg_array_get_flat(out[1], i), want_x[i], 1e-12);
        for (int i = 0; i < 2; i++) tg_array_free(out[i]);
    }
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_graph_free(g);
}

static void test_logreg_matches_hand_written(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tools/logreg_manual.json", TG_TEST_DATA);
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(path, ctx);
    assert_non_null(g);
    char *text = tg_graph_to_string(g, ctx);
    tg_graph_free(g);
    /* Add grad(cost, w, b) and a function returning both gradients. */
    char *p = strstr(text, "\"nodes\": [");
    assert_non_null(p);
    size_t at = (size_t)(p - text) + strlen("\"nodes\": [");
    const char *ins = "{\"op\": \"grad\", \"inputs\": [\"cost\", \"w\", \"b\"], \"outputs\": [\"gw_sym\", \"gb_sym\"]}, ";
    char *full = malloc(strlen(text) + strlen(ins) + 256);
    memcpy(full, text, at);
    strcpy(full + at, ins);
    strcat(full, text + at);
    char *f = strstr(full, "\"functions\": {");
    assert_non_null(f);
    const char *fn = "\"functions\": {\"both\": {\"inputs\": [\"x\", \"y\"], \"outputs\": [\"gw\", \"gw_sym\", \"gb\", \"gb_sym\"]}, ";
    char *full2 = malloc(strlen(full) + strlen(fn) + 16);
    size_t fat = (size_t)(f - full);
    memcpy(full2, full, fat);
    strcpy(full2 + fat, fn);
    strcat(full2, full + fat + strlen("\"functions\": {"));
    tg_string_free(text);
    g = tg_graph_load_string(full2, strlen(full2), NULL, "logreg+grad", ctx);
    if (!g) fail_msg("%s", tg_ctx_message(ctx));
    int64_t xs[2] = {5, 784}, n5 = 5;
    tg_array *x = tg_array_new(TG_FLOAT64, 2, xs), *y = tg_array_new(TG_INT64, 1, &n5);
    uint64_t s = 7;
    for (int64_t i = 0; i < 5 * 784; i++) ((double *)tg_array_data(x))[i] = gc_urand(&s) - 0.5;
    for (int i = 0; i < 5; i++) ((int64_t *)tg_array_data(y))[i] = i % 2;
    tg_array *in[2] = {x, y}, *out[4];
    tu_call(g, "both", in, out);
    tu_assert_close(out[1], out[0], 1e-10, 1e-12);
    tu_assert_close(out[3], out[2], 1e-10, 1e-12);
    for (int i = 0; i < 4; i++) tg_array_free(out[i]);
    tg_array_free(x);
    tg_array_free(y);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    free(full);
    free(full2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_binary_broadcasting),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_products_and_shapes),
        cmocka_unit_test(test_nn),
        cmocka_unit_test(test_second_derivative),
        cmocka_unit_test(test_gammaln_second_derivative),
        cmocka_unit_test(test_gammaln_higher_derivatives),
        cmocka_unit_test(test_zeros),
        cmocka_unit_test(test_zeros_second_derivative),
        cmocka_unit_test(test_logsumexp_neg_inf),
        cmocka_unit_test(test_float16_counts),
        cmocka_unit_test(test_logreg_matches_hand_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
