/* The derived variables rop and lop against products worked out by hand,
 * the Gauss-Newton product J^T J v against a Jacobian from finite
 * differences, and the gradient checkers tg_verify_grad / tg_check_grad
 * passing on correct gradients and failing on a wrong one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define J(...) #__VA_ARGS__

static const double W[6] = {1, 2, -1, 0.5, -3, 4}; /* 2x3 */
static const double X[3] = {0.3, -0.2, 0.7};
static const double V[3] = {1.5, -0.5, 2.0};
static const double U[2] = {-1.0, 0.25};
static const double VW[6] = {0.1, -0.2, 0.3, 1.0, 0.0, -1.0};

static tg_array *arr(int ndim, int64_t a, int64_t b, const double *d) {
    int64_t shape[2] = {a, b};
    return tg_array_new_from(TG_FLOAT64, ndim, shape, d);
}

static void expect(const tg_array *got, int n, const double *want, double tol) {
    assert_int_equal(tg_array_size(got), n);
    for (int i = 0; i < n; i++)
        if (fabs(tg_array_get_flat(got, i) - want[i]) > tol)
            fail_msg("element %d: got %.17g, want %.17g", i, tg_array_get_flat(got, i), want[i]);
}

/* f = W x: rop(f, x, v) = W v, rop(f, W, V) = V x, rop over both = V x + W v;
 * lop(f, x, u) = W^T u, lop(f, W, u) = u x^T. */
static void test_linear(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "W", "type": {"dtype": "float64", "shape": [2, 3]}},
                      {"id": "x", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "v", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "V", "type": {"dtype": "float64", "shape": [2, 3]}},
                      {"id": "u", "type": {"dtype": "float64", "shape": [2]}}],
        "nodes": [{"op": "dot", "inputs": ["W", "x"], "outputs": ["f"]},
                  {"op": "rop", "inputs": ["f", "x", "v"], "outputs": ["jv_x"]},
                  {"op": "rop", "inputs": ["f", "W", "V"], "outputs": ["jv_W"]},
                  {"op": "rop", "inputs": ["f", "W", "x", "V", "v"], "outputs": ["jv_both"]},
                  {"op": "lop", "inputs": ["f", "x", "W", "u"], "outputs": ["gx", "gW"]}],
        "functions": {"main": {"inputs": ["W", "x", "v", "V", "u"],
                               "outputs": ["jv_x", "jv_W", "jv_both", "gx", "gW"]}}});
    tg_graph *g = tu_load(json);
    tg_array *in[5] = {arr(2, 2, 3, W), arr(1, 3, 0, X), arr(1, 3, 0, V), arr(2, 2, 3, VW), arr(1, 2, 0, U)};
    tg_array *out[5];
    tu_call(g, "main", in, out);
    double wv[2], vx[2], both[2], wtu[3], uxt[6];
    for (int i = 0; i < 2; i++) {
        wv[i] = vx[i] = 0;
        for (int j = 0; j < 3; j++) {
            wv[i] += W[i * 3 + j] * V[j];
            vx[i] += VW[i * 3 + j] * X[j];
            uxt[i * 3 + j] = U[i] * X[j];
        }
        both[i] = wv[i] + vx[i];
    }
    for (int j = 0; j < 3; j++) wtu[j] = W[j] * U[0] + W[3 + j] * U[1];
    expect(out[0], 2, wv, 1e-12);
    expect(out[1], 2, vx, 1e-12);
    expect(out[2], 2, both, 1e-12);
    expect(out[3], 3, wtu, 1e-12);
    expect(out[4], 6, uxt, 1e-12);
    for (int i = 0; i < 5; i++) {
        tg_array_free(in[i]);
        tg_array_free(out[i]);
    }
    tg_graph_free(g);
}

/* f = tanh(W x): rop(f, x, v) = (1 - f^2) * (W v), lop(f, x, u) = W^T ((1 - f^2) * u). */
static void test_nonlinear(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "W", "type": {"dtype": "float64", "shape": [2, 3]}},
                      {"id": "x", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "v", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "u", "type": {"dtype": "float64", "shape": [2]}}],
        "nodes": [{"op": "dot", "inputs": ["W", "x"], "outputs": ["a"]},
                  {"op": "tanh", "inputs": ["a"], "outputs": ["f"]},
                  {"op": "rop", "inputs": ["f", "x", "v"], "outputs": ["jv"]},
                  {"op": "lop", "inputs": ["f", "x", "u"], "outputs": ["ju"]}],
        "functions": {"main": {"inputs": ["W", "x", "v", "u"], "outputs": ["jv", "ju"]}}});
    tg_graph *g = tu_load(json);
    tg_array *in[4] = {arr(2, 2, 3, W), arr(1, 3, 0, X), arr(1, 3, 0, V), arr(1, 2, 0, U)};
    tg_array *out[2];
    tu_call(g, "main", in, out);
    double jv[2], ju[3] = {0, 0, 0}, d[2];
    for (int i = 0; i < 2; i++) {
        double a = 0, wv = 0;
        for (int j = 0; j < 3; j++) {
            a += W[i * 3 + j] * X[j];
            wv += W[i * 3 + j] * V[j];
        }
        d[i] = 1 - tanh(a) * tanh(a);
        jv[i] = d[i] * wv;
    }
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 2; i++) ju[j] += W[i * 3 + j] * d[i] * U[i];
    expect(out[0], 2, jv, 1e-12);
    expect(out[1], 3, ju, 1e-12);
    for (int i = 0; i < 4; i++) tg_array_free(in[i]);
    for (int i = 0; i < 2; i++) tg_array_free(out[i]);
    tg_graph_free(g);
}

/* The Gauss-Newton product of Theano's 2012 paper (section 3.2):
 * lop(f, w, rop(f, w, v)) = J^T J v, with J from central differences of f. */
static void test_gauss_newton(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "W", "type": {"dtype": "float64", "shape": [2, 3]}},
                      {"id": "x", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "v", "type": {"dtype": "float64", "shape": [3]}}],
        "nodes": [{"op": "dot", "inputs": ["W", "x"], "outputs": ["a"]},
                  {"op": "sigmoid", "inputs": ["a"], "outputs": ["s"]},
                  {"op": "mul", "inputs": ["s", "a"], "outputs": ["f"]},
                  {"op": "rop", "inputs": ["f", "x", "v"], "outputs": ["jv"]},
                  {"op": "lop", "inputs": ["f", "x", "jv"], "outputs": ["gv"]}],
        "functions": {"f": {"inputs": ["W", "x"], "outputs": ["f"]},
                      "gn": {"inputs": ["W", "x", "v"], "outputs": ["gv"]}}});
    tg_graph *g = tu_load(json);
    tg_array *in[3] = {arr(2, 2, 3, W), arr(1, 3, 0, X), arr(1, 3, 0, V)};
    tg_array *out[1];
    tu_call(g, "gn", in, out);
    double jac[2][3], h = 1e-6;
    for (int j = 0; j < 3; j++) {
        double xp[3], xm[3];
        memcpy(xp, X, sizeof xp);
        memcpy(xm, X, sizeof xm);
        xp[j] += h;
        xm[j] -= h;
        tg_array *ip[2] = {in[0], arr(1, 3, 0, xp)}, *im[2] = {in[0], arr(1, 3, 0, xm)}, *fp, *fm;
        tu_call(g, "f", ip, &fp);
        tu_call(g, "f", im, &fm);
        for (int i = 0; i < 2; i++) jac[i][j] = (tg_array_get_flat(fp, i) - tg_array_get_flat(fm, i)) / (2 * h);
        tg_array_free(ip[1]);
        tg_array_free(im[1]);
        tg_array_free(fp);
        tg_array_free(fm);
    }
    double jv[2] = {0, 0}, want[3] = {0, 0, 0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) jv[i] += jac[i][j] * V[j];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 2; i++) want[j] += jac[i][j] * jv[i];
    expect(out[0], 3, want, 1e-7);
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_array_free(out[0]);
    tg_graph_free(g);
}

/* rop through a broadcast and a reduction: f = sum(x * b, axis 1) with b a
 * row; w = b; rop(f, b, vb)[i] = sum_j x[i,j] vb[j]. */
static void test_broadcast_reduce(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [2, 3]}},
                      {"id": "b", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "vb", "type": {"dtype": "float64", "shape": [3]}}],
        "nodes": [{"op": "mul", "inputs": ["x", "b"], "outputs": ["xb"]},
                  {"op": "sum", "inputs": ["xb"], "outputs": ["f"], "attrs": {"axis": [1]}},
                  {"op": "rop", "inputs": ["f", "b", "vb"], "outputs": ["jv"]}],
        "functions": {"main": {"inputs": ["x", "b", "vb"], "outputs": ["jv"]}}});
    tg_graph *g = tu_load(json);
    tg_array *in[3] = {arr(2, 2, 3, W), arr(1, 3, 0, X), arr(1, 3, 0, V)}, *out[1];
    tu_call(g, "main", in, out);
    double want[2];
    for (int i = 0; i < 2; i++) want[i] = W[i * 3] * V[0] + W[i * 3 + 1] * V[1] + W[i * 3 + 2] * V[2];
    expect(out[0], 2, want, 1e-12);
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_array_free(out[0]);
    tg_graph_free(g);
}


/* rop(f, x, v) of many ops against the directional difference
 * (f(x + h v) - f(x - h v)) / 2h: the second reverse pass goes through the
 * gradient rules' own graphs, so each op's rule must itself be
 * differentiable in its output gradient. */
static void test_rop_directional(void **state) {
    (void)state;
    static const char *UNARY[] = {"neg", "abs", "exp", "log1p", "sqr", "sqrt", "sin", "tanh", "sigmoid",
                                  "softplus", "relu", "erf", "softmax", "log_softmax", NULL};
    static const char *MORE[] = {
        "{\"op\":\"max\",\"inputs\":[\"x\"],\"outputs\":[\"f\"],\"attrs\":{\"axis\":[1]}}",
        "{\"op\":\"prod\",\"inputs\":[\"x\"],\"outputs\":[\"f\"],\"attrs\":{\"axis\":[0]}}",
        "{\"op\":\"logsumexp\",\"inputs\":[\"x\"],\"outputs\":[\"f\"],\"attrs\":{\"axis\":[1]}}",
        "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"matmul\",\"inputs\":[\"x\",\"t\"],\"outputs\":[\"f\"]}",
        "{\"op\":\"pow\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"f\"]}",
        "{\"op\":\"true_div\",\"inputs\":[\"x\",{\"value\":3}],\"outputs\":[\"d\"]},"
        "{\"op\":\"maximum\",\"inputs\":[\"x\",\"d\"],\"outputs\":[\"f\"]}",
        NULL};
    const double xs[6] = {0.3, 1.2, 0.7, 0.45, 2.0, 0.9}, vs[6] = {1.0, -0.5, 0.25, 2.0, -1.5, 0.75};
    int nu = (int)(sizeof UNARY / sizeof *UNARY) - 1, nm = (int)(sizeof MORE / sizeof *MORE) - 1;
    for (int t = 0; t < nu + nm; t++) {
        char nodes[512], json[2048];
        if (t < nu)
            snprintf(nodes, sizeof nodes, "{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"f\"]}", UNARY[t]);
        else
            snprintf(nodes, sizeof nodes, "%s", MORE[t - nu]);
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                 "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}},"
                 "{\"id\":\"v\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}}],"
                 "\"nodes\":[%s,{\"op\":\"rop\",\"inputs\":[\"f\",\"x\",\"v\"],\"outputs\":[\"jv\"]}],"
                 "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"f\"]},"
                 "\"jv\":{\"inputs\":[\"x\",\"v\"],\"outputs\":[\"jv\"]}}}",
                 nodes);
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, nodes, ctx);
        if (!g) fail_msg("%s", tg_ctx_message(ctx));
        double h = 1e-6, xp[6], xm[6];
        for (int i = 0; i < 6; i++) {
            xp[i] = xs[i] + h * vs[i];
            xm[i] = xs[i] - h * vs[i];
        }
        tg_array *in[2] = {arr(2, 2, 3, xs), arr(2, 2, 3, vs)}, *ip = arr(2, 2, 3, xp), *im = arr(2, 2, 3, xm);
        tg_array *jv, *fp, *fm;
        tu_call(g, "jv", in, &jv);
        tu_call(g, "f", &ip, &fp);
        tu_call(g, "f", &im, &fm);
        int64_t n = tg_array_size(fp);
        assert_int_equal(tg_array_size(jv), n);
        for (int64_t i = 0; i < n; i++) {
            double want = (tg_array_get_flat(fp, i) - tg_array_get_flat(fm, i)) / (2 * h);
            double got = tg_array_get_flat(jv, i);
            if (fabs(got - want) > 1e-6 * (1 + fabs(want)))
                fail_msg("%s: element %lld: rop %.12g, differences %.12g", nodes, (long long)i, got, want);
        }
        tg_array_free(in[0]);
        tg_array_free(in[1]);
        tg_array_free(ip);
        tg_array_free(im);
        tg_array_free(jv);
        tg_array_free(fp);
        tg_array_free(fm);
        tg_graph_free(g);
        tg_ctx_free(ctx);
    }
}

static void expect_load_error(const char *nodes, const char *substr) {
    char json[2048], msg[1024];
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
             "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
             "{\"id\":\"u\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]}},"
             "{\"id\":\"n\",\"type\":{\"dtype\":\"int64\",\"shape\":[3]}}],"
             "\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"f\"]},%s]}",
             nodes);
    int rc = tu_load_fail(json, msg, sizeof msg);
    assert_int_not_equal(rc, TG_OK);
    if (!strstr(msg, substr)) fail_msg("message '%s' lacks '%s'", msg, substr);
}

static void test_errors(void **state) {
    (void)state;
    expect_load_error("{\"op\":\"lop\",\"inputs\":[\"f\",\"x\",\"u\"],\"outputs\":[\"g\"]}",
                      "must have the shape of f 'f'");
    expect_load_error("{\"op\":\"rop\",\"inputs\":[\"f\",\"x\",\"u\"],\"outputs\":[\"g\"]}",
                      "must have the shape of w 'x'");
    expect_load_error("{\"op\":\"rop\",\"inputs\":[\"f\",\"x\",\"y\",\"x\"],\"outputs\":[\"g\"]}",
                      "as many v's as w's");
    expect_load_error("{\"op\":\"rop\",\"inputs\":[\"f\",\"y\",\"x\"],\"outputs\":[\"g\"]}",
                      "f 'f' does not depend on 'y'");
    expect_load_error("{\"op\":\"lop\",\"inputs\":[\"f\",\"x\",\"f\"],\"outputs\":[\"g\",\"h\"]}",
                      "needs 1 outputs");
    expect_load_error("{\"op\":\"rop\",\"inputs\":[\"f\",\"n\",\"x\"],\"outputs\":[\"g\"]}",
                      "cannot differentiate with respect to 'n' of dtype int64");
}

/* A disconnected w with "ignore" gives zeros. */
static void test_disconnected_ignore(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "y", "type": {"dtype": "float64", "shape": [3]}}],
        "nodes": [{"op": "exp", "inputs": ["x"], "outputs": ["f"]},
                  {"op": "rop", "inputs": ["f", "y", "x"], "outputs": ["jv"], "attrs": {"disconnected": "ignore"}},
                  {"op": "lop", "inputs": ["f", "y", "x"], "outputs": ["ju"], "attrs": {"disconnected": "ignore"}}],
        "functions": {"main": {"inputs": ["x", "y"], "outputs": ["jv", "ju"]}}});
    tg_graph *g = tu_load(json);
    tg_array *in[2] = {arr(1, 3, 0, X), arr(1, 3, 0, V)}, *out[2];
    tu_call(g, "main", in, out);
    double zeros[3] = {0, 0, 0};
    expect(out[0], 3, zeros, 0);
    expect(out[1], 3, zeros, 0);
    for (int i = 0; i < 2; i++) {
        tg_array_free(in[i]);
        tg_array_free(out[i]);
    }
    tg_graph_free(g);
}

/* "warn" gives zeros too, and one warning on the graph per disconnected
 * w, naming the node and both ids (Theano warns); "raise" and "ignore"
 * leave none, nor does a connected w. */
static void test_disconnected_warn(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "y", "type": {"dtype": "float64", "shape": [3]}}],
        "nodes": [{"op": "exp", "inputs": ["x"], "outputs": ["f"]},
                  {"op": "sum", "inputs": ["f"], "outputs": ["c"]},
                  {"op": "grad", "inputs": ["c", "y", "x"], "outputs": ["gy", "gx"], "attrs": {"disconnected": "warn"}},
                  {"op": "grad", "inputs": ["c", "y"], "outputs": ["gy2"], "attrs": {"disconnected": "ignore"}}],
        "functions": {"main": {"inputs": ["x", "y"], "outputs": ["gy", "gx", "gy2"]}}});
    tg_graph *g = tu_load(json);
    assert_int_equal(tg_graph_warning_count(g), 1);
    const char *w = tg_graph_warning(g, 0);
    if (!strstr(w, "nodes[2] (grad -> gy): inputs[1]: the cost 'c' does not depend on 'y' "
                   "(attrs.disconnected is \"warn\"): its gradient is zeros"))
        fail_msg("warning: %s", w);
    assert_null(tg_graph_warning(g, 1));
    assert_null(tg_graph_warning(g, -1));
    tg_array *in[2] = {arr(1, 3, 0, X), arr(1, 3, 0, V)}, *out[3];
    tu_call(g, "main", in, out);
    double zeros[3] = {0, 0, 0}, ex[3];
    for (int i = 0; i < 3; i++) ex[i] = exp(X[i]);
    expect(out[0], 3, zeros, 0);
    expect(out[1], 3, ex, 1e-15);
    expect(out[2], 3, zeros, 0);
    for (int i = 0; i < 2; i++) tg_array_free(in[i]);
    for (int i = 0; i < 3; i++) tg_array_free(out[i]);
    tg_graph_free(g);
}

static const char *MLP = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "W", "type": {"dtype": "float64", "shape": [2, 3]}},
                  {"id": "x", "type": {"dtype": "float64", "shape": [3]}},
                  {"id": "k", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "dot", "inputs": ["W", "x"], "outputs": ["a"]},
              {"op": "tanh", "inputs": ["a"], "outputs": ["t"]},
              {"op": "mul", "inputs": ["t", "k"], "outputs": ["tk"]},
              {"op": "exp", "inputs": ["x"], "outputs": ["ex"]},
              {"op": "sum", "inputs": ["ex"], "outputs": ["se"]},
              {"op": "add", "inputs": ["tk", "se"], "outputs": ["f"]}],
    "functions": {"f": {"inputs": ["W", "x", "k"], "outputs": ["f", "a"]}}});

static void test_verify_grad_passes(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t zero = 0;
    tg_array *k = tg_array_new_scalar(TG_INT64, 3);
    tg_array *in[3] = {arr(2, 2, 3, W), arr(1, 3, 0, X), k};
    int rc = tg_verify_grad(MLP, strlen(MLP), "f", in, 0, 0, 42, ctx);
    if (rc) fail_msg("%s", tg_ctx_message(ctx));
    /* A scalar f, float32 inputs, a reduction and a broadcast. */
    const char *j32 = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float32", "shape": [2, 3]}},
                      {"id": "b", "type": {"dtype": "float32", "shape": [3]}}],
        "nodes": [{"op": "add", "inputs": ["x", "b"], "outputs": ["s"]},
                  {"op": "sigmoid", "inputs": ["s"], "outputs": ["g"]},
                  {"op": "mean", "inputs": ["g"], "outputs": ["f"]}]});
    int64_t s23[2] = {2, 3}, s3 = 3;
    float xs[6] = {0.1f, -0.4f, 0.8f, 1.2f, -0.9f, 0.3f}, bs[3] = {0.5f, -0.25f, 0.1f};
    tg_array *in32[2] = {tg_array_new_from(TG_FLOAT32, 2, s23, xs), tg_array_new_from(TG_FLOAT32, 1, &s3, bs)};
    rc = tg_verify_grad(j32, strlen(j32), NULL, in32, 0, 0, 7, ctx);
    if (rc) fail_msg("%s", tg_ctx_message(ctx));
    (void)zero;
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    for (int i = 0; i < 2; i++) tg_array_free(in32[i]);
    tg_ctx_free(ctx);
}

/* tg_check_grad with hand-written gradients of c = sum(sin(x) * y):
 * right (cos(x) * y, sin(x)) passes; wrong (sin(x) * y for x) fails and
 * names the input, the element and both values. */
static void test_check_grad(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}},
                      {"id": "y", "type": {"dtype": "float64", "shape": [3]}}],
        "nodes": [{"op": "sin", "inputs": ["x"], "outputs": ["sx"]},
                  {"op": "mul", "inputs": ["sx", "y"], "outputs": ["p"]},
                  {"op": "sum", "inputs": ["p"], "outputs": ["c"]},
                  {"op": "cos", "inputs": ["x"], "outputs": ["cx"]},
                  {"op": "mul", "inputs": ["cx", "y"], "outputs": ["gx"]},
                  {"op": "identity", "inputs": ["sx"], "outputs": ["gy"]}],
        "functions": {"cost": {"inputs": ["x", "y"], "outputs": ["c"]},
                      "right": {"inputs": ["x", "y"], "outputs": ["gx", "gy"]},
                      "wrong": {"inputs": ["x", "y"], "outputs": ["p", "gy"]},
                      "short": {"inputs": ["x", "y"], "outputs": ["gx"]}}});
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *in[2] = {arr(1, 3, 0, X), arr(1, 3, 0, V)};
    int rc = tg_check_grad(g, "cost", "right", in, 0, 0, ctx);
    if (rc) fail_msg("%s", tg_ctx_message(ctx));
    rc = tg_check_grad(g, "cost", "wrong", in, 0, 0, ctx);
    assert_int_equal(rc, TG_ERUNTIME);
    const char *m = tg_ctx_message(ctx);
    /* Element 0: sin(0.3) * 1.5 = 0.44328..., against cos(0.3) * 1.5 = 1.43300... */
    if (!strstr(m, "input 'x' element [0]") || !strstr(m, "0.44328") || !strstr(m, "1.43300"))
        fail_msg("unexpected message: %s", m);
    rc = tg_check_grad(g, "cost", "short", in, 0, 0, ctx);
    assert_int_equal(rc, TG_EINVAL);
    for (int i = 0; i < 2; i++) tg_array_free(in[i]);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disconnected_warn),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_nonlinear),
        cmocka_unit_test(test_gauss_newton),
        cmocka_unit_test(test_broadcast_reduce),
        cmocka_unit_test(test_rop_directional),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_disconnected_ignore),
        cmocka_unit_test(test_verify_grad_passes),
        cmocka_unit_test(test_check_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
