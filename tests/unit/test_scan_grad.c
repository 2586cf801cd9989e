/* The gradient of scan (back-propagation through time) against central
 * finite differences of the forward function (gradcheck.c): recurrent
 * outputs with one and several taps, sequences with past, present and
 * future taps, non-sequences, go_backwards, until, integer state beside
 * float state, nested scans; truncate_gradient against the truncated sum
 * worked out by hand; rop through scan against finite differences;
 * attrs.disconnected by the body's connections (an ignored non-sequence,
 * one feeding only an unused output, a state reached through two others). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcheck.h"
#include "testutil.h"

/* h[t] = tanh(h[t-1] W + x[t]) */
#define RNN_BODY J({"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [2]}}, \
                                  {"id": "b.h", "type": {"dtype": "float64", "shape": [2]}}, \
                                  {"id": "b.W", "type": {"dtype": "float64", "shape": [2, 2]}}], \
                    "nodes": [{"op": "dot", "inputs": ["b.h", "b.W"], "outputs": ["b.a"]}, \
                              {"op": "add", "inputs": ["b.a", "b.x"], "outputs": ["b.s"]}, \
                              {"op": "tanh", "inputs": ["b.s"], "outputs": ["b.o"]}], \
                    "inputs": ["b.x", "b.h", "b.W"], "outputs": ["b.o"]})
#define RNN_ATTRS(extra) "{\"n_sequences\": 1, \"sequence_taps\": [[0]], \"n_recurrent\": 1, " \
    "\"output_taps\": [[-1]], \"n_nonrecurrent\": 0, \"n_non_sequences\": 1, \"has_n_steps\": false, " \
    "\"has_until\": false" extra ", \"body\": " RNN_BODY "}"

static void test_rnn(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("rnn", V("x", "[5,2]") "," V("h0", "[2]") "," V("W", "[2,2]"),
                        "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
                        RNN_ATTRS("") "}," COST("h"), -1, 1);
    fails += check_case("rnn_backwards", V("x", "[5,2]") "," V("h0", "[2]") "," V("W", "[2,2]"),
                        "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
                        RNN_ATTRS(", \"go_backwards\": true") "}," COST("h"), -1, 1);
    /* Only the last state counts (a cost on one row of the stack). */
    fails += check_case("rnn_last", V("x", "[6,2]") "," V("h0", "[2]") "," V("W", "[2,2]"),
                        "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
                        RNN_ATTRS("") "}," NA("subtensor", "h", "hl", J({"index": [-1]})) "," COST("hl"),
                        -1, 1);
    /* truncate_gradient at least the number of steps: the full gradient. */
    fails += check_case("rnn_backwards_truncate_ge_steps", V("x", "[4,2]") "," V("h0", "[2]") "," V("W", "[2,2]"),
                        "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
                        RNN_ATTRS(", \"truncate_gradient\": 9, \"go_backwards\": true") "}," COST("h"), -1, 1);
    fails += check_case("rnn_truncate_ge_steps", V("x", "[4,2]") "," V("h0", "[2]") "," V("W", "[2,2]"),
                        "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
                        RNN_ATTRS(", \"truncate_gradient\": 4") "}," COST("h"), -1, 1);
    assert_int_equal(fails, 0);
}

/* Every kind at once (test_scan.c's MIX with a tanh): x taps [-2, 0, 1],
 * h taps [-1, -3] (init of 3 rows), y taps [-1], non-recurrent z, w. */
#define MIX_BODY J({"variables": [ \
        {"id": "b.xm2", "type": {"dtype": "float64", "shape": [2]}}, \
        {"id": "b.x0", "type": {"dtype": "float64", "shape": [2]}}, \
        {"id": "b.xp1", "type": {"dtype": "float64", "shape": [2]}}, \
        {"id": "b.h1", "type": {"dtype": "float64", "shape": [2]}}, \
        {"id": "b.h3", "type": {"dtype": "float64", "shape": [2]}}, \
        {"id": "b.y1", "type": {"dtype": "float64", "shape": [2]}}, \
        {"id": "b.w", "type": {"dtype": "float64", "shape": []}}], \
      "nodes": [{"op": "mul", "inputs": ["b.h1", {"value": 0.5}], "outputs": ["b.a"]}, \
                {"op": "mul", "inputs": ["b.h3", {"value": -0.25}], "outputs": ["b.b"]}, \
                {"op": "mul", "inputs": ["b.xm2", "b.w"], "outputs": ["b.c"]}, \
                {"op": "add", "inputs": ["b.a", "b.b", "b.c", "b.xp1"], "outputs": ["b.hs"]}, \
                {"op": "tanh", "inputs": ["b.hs"], "outputs": ["b.h"]}, \
                {"op": "mul", "inputs": ["b.x0", "b.w"], "outputs": ["b.xw"]}, \
                {"op": "add", "inputs": ["b.y1", "b.xw"], "outputs": ["b.y"]}, \
                {"op": "mul", "inputs": ["b.h", "b.y"], "outputs": ["b.z"]}], \
      "inputs": ["b.xm2", "b.x0", "b.xp1", "b.h1", "b.h3", "b.y1", "b.w"], \
      "outputs": ["b.h", "b.y", "b.z"]})
#define MIX_NODE(back) "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"y0\",\"w\"],\"outputs\":[\"h\",\"y\",\"z\"]," \
    "\"attrs\":{\"n_sequences\": 1, \"sequence_taps\": [[-2, 0, 1]], \"n_recurrent\": 2, " \
    "\"output_taps\": [[-1, -3], [-1]], \"n_nonrecurrent\": 1, \"n_non_sequences\": 1, " \
    "\"has_n_steps\": false, \"has_until\": false, \"go_backwards\": " back ", \"body\": " MIX_BODY "}}"
#define MIX_COST N1("sin", "h", "sh") "," N1("sum", "sh", "c1") "," N1("sin", "z", "sz") "," \
    N1("sum", "sz", "c2") "," N1("sum", "y", "c3") ",{\"op\":\"add\",\"inputs\":[\"c1\",\"c2\",\"c3\"],\"outputs\":[\"c\"]}"

static void test_taps(void **state) {
    (void)state;
    int fails = 0;
    const char *vars = V("x", "[8,2]") "," V("h0", "[3,2]") "," V("y0", "[2]") "," V("w", "[]");
    fails += check_case("mix", vars, MIX_NODE("false") "," MIX_COST, -1, 1);
    fails += check_case("mix_backwards", vars, MIX_NODE("true") "," MIX_COST, -1, 1);
    /* Only the non-recurrent output has a gradient from the cost. */
    fails += check_case("mix_z_only", vars, MIX_NODE("false") "," COST("z"), -1, 1);
    /* n_steps shorter than the sequence allows: the rows after are unused. */
    const char *node_n = "{\"op\":\"scan\",\"inputs\":[{\"value\": 3},\"x\",\"h0\",\"y0\",\"w\"],"
        "\"outputs\":[\"h\",\"y\",\"z\"],\"attrs\":{\"n_sequences\": 1, \"sequence_taps\": [[-2, 0, 1]], "
        "\"n_recurrent\": 2, \"output_taps\": [[-1, -3], [-1]], \"n_nonrecurrent\": 1, "
        "\"n_non_sequences\": 1, \"has_n_steps\": true, \"has_until\": false, \"go_backwards\": true, "
        "\"body\": " MIX_BODY "}}";
    char nodes[16384];
    snprintf(nodes, sizeof nodes, "%s,%s", node_n, MIX_COST);
    fails += check_case("mix_n_steps", vars, nodes, -1, 1);
    assert_int_equal(fails, 0);
}

/* A while loop: s[t] = s[t-1] + tanh(s[t-1]) * x[t] * w until s > 1.5
 * (n_steps 40 at most: it stops after 12 steps, checked below); the
 * gradient goes over the steps actually taken. */
static void test_until(void **state) {
    (void)state;
    const char *node = "{\"op\":\"scan\",\"inputs\":[{\"value\": 40},\"x\",\"s0\",\"w\"],\"outputs\":[\"s\"],"
        "\"attrs\":" J({"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1, "output_taps": [[-1]],
                        "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": true, "has_until": true,
                        "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": []}},
                                               {"id": "b.s1", "type": {"dtype": "float64", "shape": []}},
                                               {"id": "b.w", "type": {"dtype": "float64", "shape": []}}],
                                 "nodes": [{"op": "mul", "inputs": ["b.x", "b.w"], "outputs": ["b.a"]},
                                           {"op": "tanh", "inputs": ["b.s1"], "outputs": ["b.th"]},
                                           {"op": "mul", "inputs": ["b.a", "b.th"], "outputs": ["b.b"]},
                                           {"op": "add", "inputs": ["b.s1", "b.b"], "outputs": ["b.s"]},
                                           {"op": "gt", "inputs": ["b.s", {"value": 1.5}], "outputs": ["b.stop"]}],
                                 "inputs": ["b.x", "b.s1", "b.w"], "outputs": ["b.s", "b.stop"]}}) "}";
    char nodes[8192];
    snprintf(nodes, sizeof nodes, "%s,%s", node, COST("s"));
    assert_int_equal(check_case("until", V("x", "[40]") "," V("s0", "[]") "," V("w", "[]"), nodes, 0.2, 0.6), 0);
    /* It did stop early: the same inputs as check_case draws. */
    char full[16384];
    snprintf(full, sizeof full, "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": [%s], "
             "\"nodes\": [%s], \"functions\": {\"f\": {\"inputs\": [\"x\", \"s0\", \"w\"], "
             "\"outputs\": [\"s\"]}}}", V("x", "[40]") "," V("s0", "[]") "," V("w", "[]"), node);
    tg_graph *g = tu_load(full);
    uint64_t seed = 42;
    int64_t forty = 40;
    tg_array *in[3] = {tg_array_new(TG_FLOAT64, 1, &forty), tg_array_new(TG_FLOAT64, 0, NULL),
                       tg_array_new(TG_FLOAT64, 0, NULL)}, *s;
    for (int i = 0; i < 3; i++)
        for (int64_t e = 0; e < tg_array_size(in[i]); e++)
            ((double *)tg_array_data(in[i]))[e] = 0.2 + 0.4 * gc_urand(&seed);
    tu_call(g, "f", in, &s);
    int64_t T = tg_array_shape(s)[0];
    if (T != 12) fail_msg("the loop ran %lld steps", (long long)T);
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_array_free(s);
    tg_graph_free(g);
}

/* Integer state beside float state: k[t] = k[t-1] + 1 (int64, no
 * gradient), h[t] = tanh(h[t-1] * w + 0.1 * k[t-1]). */
static void test_int_state(void **state) {
    (void)state;
    const char *node = "{\"op\":\"scan\",\"inputs\":[{\"value\": 5},{\"value\": {\"dtype\": \"int64\", \"data\": 0}},"
        "\"h0\",\"w\"],\"outputs\":[\"k\",\"h\"],\"attrs\":"
        J({"n_sequences": 0, "sequence_taps": [], "n_recurrent": 2, "output_taps": [[-1], [-1]],
           "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": true, "has_until": false,
           "body": {"variables": [{"id": "b.k1", "type": {"dtype": "int64", "shape": []}},
                                  {"id": "b.h1", "type": {"dtype": "float64", "shape": [3]}},
                                  {"id": "b.w", "type": {"dtype": "float64", "shape": [3]}}],
                    "nodes": [{"op": "add", "inputs": ["b.k1", {"value": 1}], "outputs": ["b.k"]},
                              {"op": "cast", "inputs": ["b.k1"], "outputs": ["b.kf"], "attrs": {"dtype": "float64"}},
                              {"op": "mul", "inputs": ["b.kf", {"value": 0.1}], "outputs": ["b.kk"]},
                              {"op": "mul", "inputs": ["b.h1", "b.w"], "outputs": ["b.a"]},
                              {"op": "add", "inputs": ["b.a", "b.kk"], "outputs": ["b.s"]},
                              {"op": "tanh", "inputs": ["b.s"], "outputs": ["b.h"]}],
                    "inputs": ["b.k1", "b.h1", "b.w"], "outputs": ["b.k", "b.h"]}}) "}";
    char nodes[8192];
    snprintf(nodes, sizeof nodes, "%s,%s", node, COST("h"));
    assert_int_equal(check_case("int_state", V("h0", "[3]") "," V("w", "[3]"), nodes, -1, 1), 0);
}

/* A scan whose body holds a scan: the outer step runs an inner scan
 * over the elements of x[t] from r0 = sum(h[t-1]): r[e] = tanh(r[e-1] *
 * x[t][e] + 0.3), then h[t] = r * h[t-1] + x[t]. */
static void test_nested(void **state) {
    (void)state;
    const char *node = "{\"op\":\"scan\",\"inputs\":[\"X\",\"h0\"],\"outputs\":[\"h\"],\"attrs\":"
        J({"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1, "output_taps": [[-1]],
           "n_nonrecurrent": 0, "n_non_sequences": 0, "has_n_steps": false, "has_until": false,
           "body": {"variables": [{"id": "o.x", "type": {"dtype": "float64", "shape": [3]}},
                                  {"id": "o.h1", "type": {"dtype": "float64", "shape": [3]}}],
                    "nodes": [{"op": "sum", "inputs": ["o.h1"], "outputs": ["o.r0"]},
                              {"op": "scan", "inputs": ["o.x", "o.r0"], "outputs": ["o.r"],
                               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                                         "has_n_steps": false, "has_until": false,
                                         "body": {"variables": [{"id": "i.e", "type": {"dtype": "float64", "shape": []}},
                                                                {"id": "i.r1", "type": {"dtype": "float64", "shape": []}}],
                                                  "nodes": [{"op": "mul", "inputs": ["i.r1", "i.e"], "outputs": ["i.a"]},
                                                            {"op": "add", "inputs": ["i.a", {"value": 0.3}], "outputs": ["i.b"]},
                                                            {"op": "tanh", "inputs": ["i.b"], "outputs": ["i.r"]}],
                                                  "inputs": ["i.e", "i.r1"], "outputs": ["i.r"]}}},
                              {"op": "mul", "inputs": ["o.r", "o.h1"], "outputs": ["o.m"]},
                              {"op": "add", "inputs": ["o.m", "o.x"], "outputs": ["o.h"]}],
                    "inputs": ["o.x", "o.h1"], "outputs": ["o.h"]}}) "}";
    char nodes[8192];
    snprintf(nodes, sizeof nodes, "%s,%s", node, COST("h"));
    assert_int_equal(check_case("nested", V("X", "[4,3]") "," V("h0", "[3]"), nodes, -0.8, 0.8), 0);
}

/* truncate_gradient = 2 on h[t] = a h[t-1] + x[t] (scalars, 5 steps),
 * cost = sum(h): the reverse pass covers steps 3 and 4 only. By hand:
 * step t's total gradient is G4 = 1, G3 = 1 + a; d/dx[t] = G_t for t >= 3,
 * else 0; d/da = G4 h[3] + G3 h[2]; d/dh0 = 0 (the two steps do not read
 * it). With truncate_gradient = 5 (all steps) the full gradient: d/dh0 =
 * a + a^2 + ... + a^5. */
static void test_truncate(void **state) {
    (void)state;
    const char *json_fmt = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [5]}},
                      {"id": "h0", "type": {"dtype": "float64", "shape": []}},
                      {"id": "a", "type": {"dtype": "float64", "shape": []}}],
        "nodes": [{"op": "scan", "inputs": ["x", "h0", "a"], "outputs": ["h"],
                   "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1, "output_taps": [[-1]],
                             "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": false,
                             "has_until": false, "truncate_gradient": TRUNC,
                             "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": []}},
                                                    {"id": "b.h", "type": {"dtype": "float64", "shape": []}},
                                                    {"id": "b.a", "type": {"dtype": "float64", "shape": []}}],
                                      "nodes": [{"op": "mul", "inputs": ["b.h", "b.a"], "outputs": ["b.m"]},
                                                {"op": "add", "inputs": ["b.m", "b.x"], "outputs": ["b.o"]}],
                                      "inputs": ["b.x", "b.h", "b.a"], "outputs": ["b.o"]}}},
                  {"op": "sum", "inputs": ["h"], "outputs": ["c"]},
                  {"op": "grad", "inputs": ["c", "x", "h0", "a"], "outputs": ["gx", "gh0", "ga"]}],
        "functions": {"main": {"inputs": ["x", "h0", "a"], "outputs": ["gx", "gh0", "ga"]}}});
    const double x[5] = {0.3, -0.2, 0.5, 0.1, -0.4}, h0 = 0.7, a = 0.8;
    double h[6] = {h0};
    for (int t = 0; t < 5; t++) h[t + 1] = a * h[t] + x[t]; /* h[t+1] is step t */
    for (int c = 0; c < 2; c++) {
        char *json = strdup(json_fmt);
        char *at = strstr(json, "TRUNC");
        memcpy(at, c ? "    5" : "    2", 5);
        tg_graph *g = tu_load(json);
        free(json);
        int64_t five = 5;
        tg_array *in[3] = {tg_array_new_from(TG_FLOAT64, 1, &five, x), tg_array_new_scalar(TG_FLOAT64, h0),
                           tg_array_new_scalar(TG_FLOAT64, a)};
        tg_array *out[3];
        tu_call(g, "main", in, out);
        double gx[5], gh0, ga;
        if (c == 0) {
            double G4 = 1, G3 = 1 + a;
            for (int t = 0; t < 5; t++) gx[t] = t == 4 ? G4 : t == 3 ? G3 : 0;
            gh0 = 0;
            ga = G4 * h[4] + G3 * h[3];
        } else {
            double G[5];
            G[4] = 1;
            for (int t = 3; t >= 0; t--) G[t] = 1 + a * G[t + 1];
            ga = 0;
            for (int t = 0; t < 5; t++) {
                gx[t] = G[t];
                ga += G[t] * h[t];
            }
            gh0 = a * G[0];
        }
        for (int t = 0; t < 5; t++)
            if (fabs(tg_array_get_flat(out[0], t) - gx[t]) > 1e-12)
                fail_msg("truncate %d: gx[%d] = %.17g, want %.17g", c ? 5 : 2, t, tg_array_get_flat(out[0], t), gx[t]);
        if (fabs(tg_array_get_flat(out[1], 0) - gh0) > 1e-12)
            fail_msg("truncate %d: gh0 = %.17g, want %.17g", c ? 5 : 2, tg_array_get_flat(out[1], 0), gh0);
        if (fabs(tg_array_get_flat(out[2], 0) - ga) > 1e-12)
            fail_msg("truncate %d: ga = %.17g, want %.17g", c ? 5 : 2, tg_array_get_flat(out[2], 0), ga);
        for (int i = 0; i < 3; i++) {
            tg_array_free(in[i]);
            tg_array_free(out[i]);
        }
        tg_graph_free(g);
    }
}

/* truncate_gradient with several taps: h[t] = a h[t-1] + b h[t-2] + x[t]
 * (init of 2 rows), cost = h[last], 4 steps, truncated to 1 step: the
 * one reversed step (t = 3) sends a to position 2 and b to position 1,
 * neither of them the initial state; truncated to 3 steps: steps 1..3
 * reversed, init row 1 (position -1) gets step 1's tap -2... by hand. */
static void test_truncate_taps(void **state) {
    (void)state;
    const char *json_fmt = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [4]}},
                      {"id": "h0", "type": {"dtype": "float64", "shape": [2]}}],
        "nodes": [{"op": "scan", "inputs": ["x", "h0"], "outputs": ["h"],
                   "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1, "output_taps": [[-1, -2]],
                             "n_nonrecurrent": 0, "n_non_sequences": 0, "has_n_steps": false,
                             "has_until": false, "truncate_gradient": TRUNC,
                             "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": []}},
                                                    {"id": "b.h1", "type": {"dtype": "float64", "shape": []}},
                                                    {"id": "b.h2", "type": {"dtype": "float64", "shape": []}}],
                                      "nodes": [{"op": "mul", "inputs": ["b.h1", {"value": 0.5}], "outputs": ["b.m"]},
                                                {"op": "mul", "inputs": ["b.h2", {"value": 0.25}], "outputs": ["b.n"]},
                                                {"op": "add", "inputs": ["b.m", "b.n", "b.x"], "outputs": ["b.o"]}],
                                      "inputs": ["b.x", "b.h1", "b.h2"], "outputs": ["b.o"]}}},
                  {"op": "subtensor", "inputs": ["h"], "outputs": ["c"], "attrs": {"index": [-1]}},
                  {"op": "grad", "inputs": ["c", "x", "h0"], "outputs": ["gx", "gh0"]}],
        "functions": {"main": {"inputs": ["x", "h0"], "outputs": ["gx", "gh0"]}}});
    const double a = 0.5, b = 0.25, x[4] = {0.1, 0.2, 0.3, 0.4}, h0[2] = {1.0, -1.0};
    /* positions -2, -1 (init), 0..3 (steps). Reversing steps T-n..3 with
     * pending gradients: P[3] = 1; step t: total = P[t]; P[t-1] += a
     * total, P[t-2] += b total; gx[t] = total. Init rows get P[-2], P[-1]
     * from the reversed steps only. */
    for (int n = 1; n <= 4; n++) {
        double P[6] = {0}; /* index pos + 2 */
        double gx[4] = {0};
        P[3 + 2] = 1;
        for (int t = 3; t >= 4 - n; t--) {
            double tot = P[t + 2];
            gx[t] = tot;
            P[t - 1 + 2] += a * tot;
            P[t - 2 + 2] += b * tot;
        }
        double gh0[2] = {P[0], P[1]};
        char *json = strdup(json_fmt);
        char *at = strstr(json, "TRUNC");
        char num[8];
        snprintf(num, sizeof num, "%5d", n);
        memcpy(at, num, 5);
        tg_graph *g = tu_load(json);
        free(json);
        int64_t four = 4, two = 2;
        tg_array *in[2] = {tg_array_new_from(TG_FLOAT64, 1, &four, x), tg_array_new_from(TG_FLOAT64, 1, &two, h0)};
        tg_array *out[2];
        tu_call(g, "main", in, out);
        for (int t = 0; t < 4; t++)
            if (fabs(tg_array_get_flat(out[0], t) - gx[t]) > 1e-12)
                fail_msg("truncate %d: gx[%d] = %.17g, want %.17g", n, t, tg_array_get_flat(out[0], t), gx[t]);
        for (int r = 0; r < 2; r++)
            if (fabs(tg_array_get_flat(out[1], r) - gh0[r]) > 1e-12)
                fail_msg("truncate %d: gh0[%d] = %.17g, want %.17g", n, r, tg_array_get_flat(out[1], r), gh0[r]);
        for (int i = 0; i < 2; i++) {
            tg_array_free(in[i]);
            tg_array_free(out[i]);
        }
        tg_graph_free(g);
    }
}

/* rop(h, W, V) through the RNN against (h(W + eV) - h(W - eV)) / 2e. */
static void test_rop(void **state) {
    (void)state;
    const char *json = "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
        V("x", "[4,2]") "," V("h0", "[2]") "," V("W", "[2,2]") "," V("VW", "[2,2]") "],"
        "\"nodes\": [{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
        RNN_ATTRS("") "},"
        "{\"op\": \"rop\", \"inputs\": [\"h\", \"W\", \"VW\"], \"outputs\": [\"jv\"]}],"
        "\"functions\": {\"f\": {\"inputs\": [\"x\", \"h0\", \"W\"], \"outputs\": [\"h\"]},"
        "\"jv\": {\"inputs\": [\"x\", \"h0\", \"W\", \"VW\"], \"outputs\": [\"jv\"]}}}";
    tg_graph *g = tu_load(json);
    int64_t s42[2] = {4, 2}, s2[1] = {2}, s22[2] = {2, 2};
    const double x[8] = {0.1, -0.3, 0.5, 0.2, -0.4, 0.6, 0.3, -0.1}, h0[2] = {0.2, -0.5},
                 W[4] = {0.7, -0.4, 0.3, 0.9}, VW[4] = {0.5, 1.0, -0.8, 0.2};
    tg_array *in[4] = {tg_array_new_from(TG_FLOAT64, 2, s42, x), tg_array_new_from(TG_FLOAT64, 1, s2, h0),
                       tg_array_new_from(TG_FLOAT64, 2, s22, W), tg_array_new_from(TG_FLOAT64, 2, s22, VW)};
    tg_array *jv;
    tu_call(g, "jv", in, &jv);
    double e = 1e-6, Wp[4], Wm[4];
    for (int i = 0; i < 4; i++) {
        Wp[i] = W[i] + e * VW[i];
        Wm[i] = W[i] - e * VW[i];
    }
    tg_array *ip[3] = {in[0], in[1], tg_array_new_from(TG_FLOAT64, 2, s22, Wp)};
    tg_array *im[3] = {in[0], in[1], tg_array_new_from(TG_FLOAT64, 2, s22, Wm)};
    tg_array *hp, *hm;
    tu_call(g, "f", ip, &hp);
    tu_call(g, "f", im, &hm);
    for (int i = 0; i < 8; i++) {
        double num = (tg_array_get_flat(hp, i) - tg_array_get_flat(hm, i)) / (2 * e);
        if (fabs(num - tg_array_get_flat(jv, i)) > 1e-6)
            fail_msg("jv[%d] = %.12g, finite differences %.12g", i, tg_array_get_flat(jv, i), num);
    }
    for (int i = 0; i < 4; i++) tg_array_free(in[i]);
    tg_array_free(ip[2]);
    tg_array_free(im[2]);
    tg_array_free(jv);
    tg_array_free(hp);
    tg_array_free(hm);
    tg_graph_free(g);
}

/* The gradient of the gradient: d/dW of sum(grad(c, h0)) through the
 * reverse scan (a scan differentiated again). */
static void test_second_order(void **state) {
    (void)state;
    const char *nodes = "{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
        RNN_ATTRS("") "}," N1("sin", "h", "sh") "," N1("sum", "sh", "c0") ","
        "{\"op\":\"grad\",\"inputs\":[\"c0\",\"h0\"],\"outputs\":[\"g0\"]},"
        N1("sin", "g0", "sg") "," N1("sum", "sg", "c")
        ;
    assert_int_equal(check_case("second_order", V("x", "[3,2]") "," V("h0", "[2]") "," V("W", "[2,2]"),
                                nodes, -1, 1), 0);
}

/* A compiled gradient through scan (a reverse scan whose body holds a
 * grad node) saved to a .tgf, restored without optimizing again, and
 * copied, gives the same values bit for bit. */
static void test_tgf(void **state) {
    (void)state;
    const char *json = "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
        V("x", "[5,2]") "," V("h0", "[2]") "," V("W", "[2,2]") "],"
        "\"nodes\": [{\"op\":\"scan\",\"inputs\":[\"x\",\"h0\",\"W\"],\"outputs\":[\"h\"],\"attrs\":"
        RNN_ATTRS(", \"truncate_gradient\": 3") "}," COST("h") ","
        "{\"op\": \"grad\", \"inputs\": [\"c\", \"x\", \"h0\", \"W\"], \"outputs\": [\"gx\", \"gh0\", \"gW\"]}],"
        "\"functions\": {\"g\": {\"inputs\": [\"x\", \"h0\", \"W\"], \"outputs\": [\"gx\", \"gh0\", \"gW\"]}}}";
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    char path[] = "/tmp/tg_scan_grad_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    tg_tgf_save_info info = {.source = g};
    if (tg_tgf_save(path, &f, 1, &info, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *r = tg_tgf_function(t, 0), *c = tg_function_copy(f, NULL, NULL, 0, ctx);
    assert_non_null(c);
    int64_t s52[2] = {5, 2}, s2 = 2, s22[2] = {2, 2};
    const double x[10] = {0.1, -0.3, 0.5, 0.2, -0.4, 0.6, 0.3, -0.1, 0.2, 0.9}, h0[2] = {0.2, -0.5},
                 W[4] = {0.7, -0.4, 0.3, 0.9};
    tg_array *in[3] = {tg_array_new_from(TG_FLOAT64, 2, s52, x), tg_array_new_from(TG_FLOAT64, 1, &s2, h0),
                       tg_array_new_from(TG_FLOAT64, 2, s22, W)};
    tg_array *o1[3], *o2[3], *o3[3];
    assert_int_equal(tg_function_call(f, in, o1, ctx), 0);
    assert_int_equal(tg_function_call(r, in, o2, ctx), 0);
    assert_int_equal(tg_function_call(c, in, o3, ctx), 0);
    for (int i = 0; i < 3; i++) {
        assert_true(tg_array_equal(o1[i], o2[i]));
        assert_true(tg_array_equal(o1[i], o3[i]));
        tg_array_free(o1[i]);
        tg_array_free(o2[i]);
        tg_array_free(o3[i]);
        tg_array_free(in[i]);
    }
    close(fd);
    unlink(path);
    tg_function_free(c);
    tg_tgf_free(t);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* y_t = x_t * w over rows whose length the body does not know
 * statically, cost = sum(y): gx = w everywhere, gw = sum(x), by hand;
 * after 0 steps gx is zeros of x's shape (0, 3) (the reverse scan's
 * per-step gradient came out (0, 0) and could not be added into it) and
 * gw 0. Both presets. */
static void test_zero_steps(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, null]}},
                      {"id": "w", "type": {"dtype": "float64", "shape": []}}],
        "nodes": [{"op": "scan", "inputs": ["x", "w"], "outputs": ["Y"],
                   "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [],
                             "n_nonrecurrent": 1, "n_non_sequences": 1, "has_n_steps": false,
                             "has_until": false,
                             "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [null]}},
                                                    {"id": "b.w", "type": {"dtype": "float64", "shape": []}}],
                                      "nodes": [{"op": "mul", "inputs": ["b.x", "b.w"], "outputs": ["b.y"]}],
                                      "inputs": ["b.x", "b.w"], "outputs": ["b.y"]}}},
                  {"op": "sum", "inputs": ["Y"], "outputs": ["c"]},
                  {"op": "grad", "inputs": ["c", "x", "w"], "outputs": ["gx", "gw"]}],
        "functions": {"main": {"inputs": ["x", "w"], "outputs": ["gx", "gw"]}}});
    tg_graph *g = tu_load(json);
    const char *presets[2] = {"none", "fast_run"};
    for (int ps = 0; ps < 2; ps++)
        for (int64_t T = 0; T <= 3; T += 3) {
            const double x[9] = {0.5, -1, 2, 0.25, 3, -0.5, 1, 1, -2}, w = 1.5;
            double gx[9], gw = 0;
            for (int k = 0; k < T * 3; k++) {
                gx[k] = w;
                gw += x[k];
            }
            tg_array *in[2] = {tg_array_new_from(TG_FLOAT64, 2, (int64_t[]){T, 3}, x),
                               tg_array_new_scalar(TG_FLOAT64, w)};
            tg_array *out[2];
            tu_call_preset(g, "main", presets[ps], in, out);
            tg_array *want[2] = {tg_array_new_from(TG_FLOAT64, 2, (int64_t[]){T, 3}, gx),
                                 tg_array_new_scalar(TG_FLOAT64, gw)};
            for (int i = 0; i < 2; i++) {
                tu_assert_close(out[i], want[i], 1e-12, 1e-12);
                tg_array_free(out[i]);
                tg_array_free(want[i]);
                tg_array_free(in[i]);
            }
        }
    tg_graph_free(g);
}

/* ---- attrs.disconnected through scan: the body's connections decide
 * (Theano's connection_pattern), not the node's inputs. ---- */

/* vars, nodes (making the cost c), then gs = grad(c, ws) with attrs
 * (NULL: none) and function "g" of ins giving gs. */
static char *disc_json(const char *vars, const char *nodes, const char *ws, const char *gs, const char *attrs,
                       const char *ins) {
    char *j = malloc(32768);
    snprintf(j, 32768,
             "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": [%s], \"nodes\": [%s, "
             "{\"op\": \"grad\", \"inputs\": [\"c\", %s], \"outputs\": [%s]%s%s}], "
             "\"functions\": {\"g\": {\"inputs\": [%s], \"outputs\": [%s]}}}",
             vars, nodes, ws, gs, attrs ? ", \"attrs\": " : "", attrs ? attrs : "", ins, gs);
    return j;
}

/* grad(c, ws) with the default attrs (in a function of ins) is a load
 * error naming w. */
static void expect_disconnected(const char *what, const char *vars, const char *ins, const char *nodes,
                                const char *ws, const char *w) {
    char gs[256] = "";
    size_t k = 0;
    int nw = 1;
    for (const char *q = ws; *q; q++) nw += *q == ',';
    for (int i = 0; i < nw; i++) k += (size_t)snprintf(gs + k, sizeof gs - k, "%s\"g%d\"", i ? ", " : "", i);
    char *j = disc_json(vars, nodes, ws, gs, NULL, ins);
    char msg[2048], want[128];
    int rc = tu_load_fail(j, msg, sizeof msg);
    free(j);
    snprintf(want, sizeof want, "does not depend on '%s'", w);
    if (rc == TG_OK || !strstr(msg, want) || !strstr(msg, "disconnected"))
        fail_msg("%s: '%s' lacks \"%s\"", what, msg, want);
}

/* y_t = x_t * 2 with a non-sequence w that the body ignores (SCAN_IGN),
 * or that feeds only a second output z_t = x_t * w (SCAN_Z). */
#define DISC_VARS "{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [4]}}, " \
    "{\"id\": \"w\", \"type\": {\"dtype\": \"float64\", \"shape\": []}}"
#define SCAN_IGN "{\"op\": \"scan\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"], \"attrs\": " \
    J({"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [], "n_nonrecurrent": 1, \
       "n_non_sequences": 1, "has_n_steps": false, "has_until": false, \
       "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": []}}, \
                              {"id": "b.w", "type": {"dtype": "float64", "shape": []}}], \
                "nodes": [{"op": "mul", "inputs": ["b.x", {"value": 2.0}], "outputs": ["b.y"]}], \
                "inputs": ["b.x", "b.w"], "outputs": ["b.y"]}}) "}"
#define SCAN_Z "{\"op\": \"scan\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\", \"z\"], \"attrs\": " \
    J({"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [], "n_nonrecurrent": 2, \
       "n_non_sequences": 1, "has_n_steps": false, "has_until": false, \
       "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": []}}, \
                              {"id": "b.w", "type": {"dtype": "float64", "shape": []}}], \
                "nodes": [{"op": "mul", "inputs": ["b.x", {"value": 2.0}], "outputs": ["b.y"]}, \
                          {"op": "mul", "inputs": ["b.x", "b.w"], "outputs": ["b.z"]}], \
                "inputs": ["b.x", "b.w"], "outputs": ["b.y", "b.z"]}}) "}"

/* grad(c, x, w) with attrs of the graph vars/nodes at x, w: gx and gw
 * against the values given. */
static void expect_grads(const char *what, const char *nodes, const char *attrs, const double *gx, double gw) {
    char *j = disc_json(DISC_VARS, nodes, "\"x\", \"w\"", "\"gx\", \"gw\"", attrs, "\"x\", \"w\"");
    tg_graph *g = tu_load(j);
    free(j);
    const double x[4] = {0.5, -1, 2, 0.25};
    int64_t four = 4;
    tg_array *in[2] = {tg_array_new_from(TG_FLOAT64, 1, &four, x), tg_array_new_scalar(TG_FLOAT64, 1.5)}, *out[2];
    tu_call(g, "g", in, out);
    for (int t = 0; t < 4; t++)
        if (tg_array_get_flat(out[0], t) != gx[t])
            fail_msg("%s: gx[%d] = %.17g, want %.17g", what, t, tg_array_get_flat(out[0], t), gx[t]);
    if (tg_array_get_flat(out[1], 0) != gw)
        fail_msg("%s: gw = %.17g, want %.17g", what, tg_array_get_flat(out[1], 0), gw);
    for (int i = 0; i < 2; i++) {
        tg_array_free(in[i]);
        tg_array_free(out[i]);
    }
    tg_graph_free(g);
}

static void test_disconnected_nonsequence(void **state) {
    (void)state;
    const char *sum_y = SCAN_IGN ", {\"op\": \"sum\", \"inputs\": [\"y\"], \"outputs\": [\"c\"]}";
    expect_disconnected("ignored", DISC_VARS, "\"x\", \"w\"", sum_y, "\"w\"", "w");
    const double twos[4] = {2, 2, 2, 2};
    expect_grads("ignored, ignore", sum_y, "{\"disconnected\": \"ignore\"}", twos, 0);
    expect_grads("ignored, warn", sum_y, "{\"disconnected\": \"warn\"}", twos, 0);
    /* w feeds only z, which the cost does not use */
    const char *z_sum_y = SCAN_Z ", {\"op\": \"sum\", \"inputs\": [\"y\"], \"outputs\": [\"c\"]}";
    expect_disconnected("second output", DISC_VARS, "\"x\", \"w\"", z_sum_y, "\"x\", \"w\"", "w");
    expect_grads("second output, ignore", z_sum_y, "{\"disconnected\": \"ignore\"}", twos, 0);
    /* the cost uses z: connected, gx = w, gw = sum(x) */
    const double ws[4] = {1.5, 1.5, 1.5, 1.5};
    expect_grads("z", SCAN_Z ", {\"op\": \"sum\", \"inputs\": [\"z\"], \"outputs\": [\"c\"]}", NULL, ws, 1.75);
    /* both: y's gradient plus z's */
    const double both[4] = {3.5, 3.5, 3.5, 3.5};
    expect_grads("y and z", SCAN_Z ", {\"op\": \"sum\", \"inputs\": [\"y\"], \"outputs\": [\"cy\"]}, "
                 "{\"op\": \"sum\", \"inputs\": [\"z\"], \"outputs\": [\"cz\"]}, "
                 "{\"op\": \"add\", \"inputs\": [\"cy\", \"cz\"], \"outputs\": [\"c\"]}", NULL, both, 1.75);
}

/* Three states over 5 steps, in the order C, B, A: A_t = tanh(A_{t-1} w),
 * B_t = tanh(0.5 B_{t-1} [+ A_{t-1}]), C_t = tanh(0.5 C_{t-1} + B_{t-1});
 * cost on C. With B reading A, C depends on w and A0 through two states
 * (the fixed point over the recurrence): connected, and the gradient
 * matches finite differences; without, w and A0 feed only A: raise. */
static void rec3_nodes(char *buf, size_t size, bool b_reads_a) {
    snprintf(buf, size,
             "{\"op\": \"scan\", \"inputs\": [{\"value\": 5}, \"C0\", \"B0\", \"A0\", \"w\"], "
             "\"outputs\": [\"C\", \"B\", \"A\"], \"attrs\": "
             J({"n_sequences": 0, "sequence_taps": [], "n_recurrent": 3, "output_taps": [[-1], [-1], [-1]],
                "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": true, "has_until": false,
                "body": {"variables": [{"id": "b.C1", "type": {"dtype": "float64", "shape": []}},
                                       {"id": "b.B1", "type": {"dtype": "float64", "shape": []}},
                                       {"id": "b.A1", "type": {"dtype": "float64", "shape": []}},
                                       {"id": "b.w", "type": {"dtype": "float64", "shape": []}}],
                         "nodes": [{"op": "mul", "inputs": ["b.A1", "b.w"], "outputs": ["b.Aw"]},
                                   {"op": "tanh", "inputs": ["b.Aw"], "outputs": ["b.A"]},
                                   {"op": "mul", "inputs": ["b.B1", {"value": 0.5}], "outputs": ["b.Bh"]},
                                   {"op": "add", "inputs": ["b.Bh", "%s"], "outputs": ["b.Bs"]},
                                   {"op": "tanh", "inputs": ["b.Bs"], "outputs": ["b.B"]},
                                   {"op": "mul", "inputs": ["b.C1", {"value": 0.5}], "outputs": ["b.Ch"]},
                                   {"op": "add", "inputs": ["b.Ch", "b.B1"], "outputs": ["b.Cs"]},
                                   {"op": "tanh", "inputs": ["b.Cs"], "outputs": ["b.C"]}],
                         "inputs": ["b.C1", "b.B1", "b.A1", "b.w"], "outputs": ["b.C", "b.B", "b.A"]}}) "}, "
             COST("C"),
             b_reads_a ? "b.A1" : "b.Bh");
}

static void test_disconnected_recurrent(void **state) {
    (void)state;
    char nodes[8192];
    const char *vars = V("C0", "[]") "," V("B0", "[]") "," V("A0", "[]") "," V("w", "[]"),
               *ins = "\"C0\", \"B0\", \"A0\", \"w\"";
    rec3_nodes(nodes, sizeof nodes, false);
    expect_disconnected("B reads only B", vars, ins, nodes, "\"w\"", "w");
    expect_disconnected("B reads only B, A0", vars, ins, nodes, "\"C0\", \"A0\"", "A0");
    rec3_nodes(nodes, sizeof nodes, true);
    assert_int_equal(check_case("B reads A", vars, nodes, -1, 1), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnn),       cmocka_unit_test(test_taps),
        cmocka_unit_test(test_until),     cmocka_unit_test(test_int_state),
        cmocka_unit_test(test_nested),    cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_truncate_taps), cmocka_unit_test(test_rop),
        cmocka_unit_test(test_second_order), cmocka_unit_test(test_tgf),
        cmocka_unit_test(test_zero_steps),
        cmocka_unit_test(test_disconnected_nonsequence),
        cmocka_unit_test(test_disconnected_recurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
