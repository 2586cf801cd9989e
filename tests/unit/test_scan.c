/* The scan op: loops worked out by hand-written C loops (independent of
 * the op), every kind of input and output, `until`, go_backwards, zero
 * steps, and the load and run-time errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/scan.h"
#include "testutil.h"
#include "vm/vm.h"

#define J(...) #__VA_ARGS__

static tg_array *vec(int64_t n, const double *d) { return tg_array_new_from(TG_FLOAT64, 1, &n, d); }
static tg_array *mat(int64_t a, int64_t b, const double *d) {
    int64_t s[2] = {a, b};
    return tg_array_new_from(TG_FLOAT64, 2, s, d);
}
static tg_array *i64(int64_t v) {
    tg_array *a = tg_array_new(TG_INT64, 0, NULL);
    *(int64_t *)tg_array_data(a) = v;
    return a;
}

static void expect(const tg_array *got, int nd, const int64_t *shape, const double *want) {
    assert_int_equal(tg_array_ndim(got), nd);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        if (tg_array_shape(got)[d] != shape[d])
            fail_msg("dimension %d: got %lld, want %lld", d, (long long)tg_array_shape(got)[d],
                     (long long)shape[d]);
        n *= shape[d];
    }
    for (int64_t i = 0; i < n; i++)
        if (fabs(tg_array_get_flat(got, i) - want[i]) > 1e-12 * (1 + fabs(want[i])))
            fail_msg("element %lld: got %.17g, want %.17g", (long long)i, tg_array_get_flat(got, i),
                     want[i]);
}

/* A**k by a recurrent output with taps [-1] and a non-sequence. */
static const char *POW = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "A", "type": {"dtype": "float64", "shape": [null]}},
                  {"id": "k", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "ones_like", "inputs": ["A"], "outputs": ["one"]},
              {"op": "scan", "inputs": ["k", "one", "A"], "outputs": ["res"],
               "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 1,
                         "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "b.p", "type": {"dtype": "float64", "shape": [null]}},
                                                {"id": "b.A", "type": {"dtype": "float64", "shape": [null]}}],
                                  "nodes": [{"op": "mul", "inputs": ["b.p", "b.A"], "outputs": ["b.o"]}],
                                  "inputs": ["b.p", "b.A"], "outputs": ["b.o"]}}}],
    "functions": {"main": {"inputs": ["A", "k"], "outputs": ["res"]}}});

static void test_power(void **state) {
    (void)state;
    tg_graph *g = tu_load(POW);
    const double a[4] = {1, 2, 3, -0.5};
    for (int64_t k = 0; k <= 5; k++) {
        tg_array *in[2] = {vec(4, a), i64(k)}, *out[1];
        tu_call(g, "main", in, out);
        double want[20];
        for (int t = 0; t < k; t++)
            for (int i = 0; i < 4; i++) want[t * 4 + i] = pow(a[i], t + 1);
        expect(out[0], 2, (int64_t[]){k, 4}, want);
        tg_array_free(out[0]);
        tg_array_free(in[0]);
        tg_array_free(in[1]);
    }
    tg_graph_free(g);
}

/* Every kind at once: a sequence x with taps [-2, 0, 1] (past, present,
 * future), a recurrent output h with taps [-1, -3] (init of 3 rows), a
 * recurrent y with taps [-1] (per-step init), a non-recurrent z, a
 * non-sequence w:
 *   h[t] = 0.5*h[t-1] - 0.25*h[t-3] + x[t-2]*w + x[t+1]
 *   y[t] = y[t-1] + x[t]
 *   z[t] = h[t] * y[t]            (reads the step's own outputs) */
static const char *MIX = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, 2]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [3, 2]}},
                  {"id": "y0", "type": {"dtype": "float64", "shape": [2]}},
                  {"id": "w", "type": {"dtype": "float64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["x", "h0", "y0", "w"], "outputs": ["h", "y", "z"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[-2, 0, 1]], "n_recurrent": 2,
                         "output_taps": [[-1, -3], [-1]], "n_nonrecurrent": 1, "n_non_sequences": 1,
                         "has_n_steps": false, "has_until": false, "go_backwards": GOBACK,
                         "body": {"variables": [
                             {"id": "b.xm2", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.x0", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.xp1", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.h1", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.h3", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.y1", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.w", "type": {"dtype": "float64", "shape": []}}],
                           "nodes": [{"op": "mul", "inputs": ["b.h1", {"value": 0.5}], "outputs": ["b.a"]},
                                     {"op": "mul", "inputs": ["b.h3", {"value": -0.25}], "outputs": ["b.b"]},
                                     {"op": "mul", "inputs": ["b.xm2", "b.w"], "outputs": ["b.c"]},
                                     {"op": "add", "inputs": ["b.a", "b.b", "b.c", "b.xp1"], "outputs": ["b.h"]},
                                     {"op": "add", "inputs": ["b.y1", "b.x0"], "outputs": ["b.y"]},
                                     {"op": "mul", "inputs": ["b.h", "b.y"], "outputs": ["b.z"]}],
                           "inputs": ["b.xm2", "b.x0", "b.xp1", "b.h1", "b.h3", "b.y1", "b.w"],
                           "outputs": ["b.h", "b.y", "b.z"]}}}],
    "functions": {"main": {"inputs": ["x", "h0", "y0", "w"], "outputs": ["h", "y", "z"]}}});

/* Rows the scan node of f copied in its last run instead of having the
 * body's kernel write them in place. */
static int64_t scan_copies(const tg_function *f) {
    for (int k = 0; k < f->nsched; k++)
        if (!strcmp(f->sched[k].op->name, "scan")) return ((const scan_p *)f->sched[k].node->a.extra)->copies;
    fail_msg("no scan node");
    return -1;
}

static void run_mix(bool back) {
    char *json = strdup(MIX);
    char *at = strstr(json, "GOBACK");
    memcpy(at, back ? "true  " : "false ", 6);
    tg_graph *g = tu_load(json);
    free(json);
    enum { L = 7 };
    double x[L * 2], h0[6] = {1, -1, 0.5, 2, -0.25, 0.75}, y0[2] = {0.1, 0.2}, w = 1.5;
    for (int i = 0; i < L * 2; i++) x[i] = sin(1.0 + i);
    tg_array *in[4] = {mat(L, 2, x), mat(3, 2, h0), vec(2, y0), tg_array_new_scalar(TG_FLOAT64, w)};
    tg_array *out[3];
    tu_call(g, "main", in, out);
    /* Every step of every output landed in its row: nothing copied. */
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    tg_array *o2[3];
    assert_int_equal(tg_function_call(f, in, o2, ctx), 0);
    assert_int_equal(scan_copies(f), 0);
    for (int i = 0; i < 3; i++) tg_array_free(o2[i]);
    tg_function_free(f);
    tg_ctx_free(ctx);
    /* span 3: L - 3 steps; step t reads x rows t+2-2, t+2, t+3 */
    const int T = L - 3;
    double xs[L * 2];
    for (int r = 0; r < L; r++)
        for (int c = 0; c < 2; c++) xs[r * 2 + c] = x[(back ? L - 1 - r : r) * 2 + c];
    double H[(3 + T) * 2], Y[T * 2], Z[T * 2], yp[2] = {y0[0], y0[1]};
    memcpy(H, h0, sizeof h0);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < 2; c++) {
            double h = 0.5 * H[(3 + t - 1) * 2 + c] - 0.25 * H[(3 + t - 3) * 2 + c] +
                       xs[(t + 2 - 2) * 2 + c] * w + xs[(t + 2 + 1) * 2 + c];
            H[(3 + t) * 2 + c] = h;
            double y = yp[c] + xs[(t + 2) * 2 + c];
            yp[c] = y;
            Y[t * 2 + c] = y;
            Z[t * 2 + c] = h * y;
        }
    expect(out[0], 2, (int64_t[]){T, 2}, H + 6);
    expect(out[1], 2, (int64_t[]){T, 2}, Y);
    expect(out[2], 2, (int64_t[]){T, 2}, Z);
    for (int i = 0; i < 4; i++) tg_array_free(in[i]);
    for (int i = 0; i < 3; i++) tg_array_free(out[i]);
    tg_graph_free(g);
}

static void test_taps(void **state) {
    (void)state;
    run_mix(false);
}
static void test_go_backwards(void **state) {
    (void)state;
    run_mix(true);
}

/* until: s[t] = s[t-1] + t-th element; stops once s > limit (that step
 * kept); n_steps is the maximum. Enough steps to grow the stack. */
static const char *UNTIL = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null]}},
                  {"id": "s0", "type": {"dtype": "float64", "shape": []}},
                  {"id": "lim", "type": {"dtype": "float64", "shape": []}},
                  {"id": "n", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["n", "x", "s0", "lim"], "outputs": ["s", "d"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 1, "n_non_sequences": 1,
                         "has_n_steps": true, "has_until": true,
                         "body": {"variables": [
                             {"id": "b.x", "type": {"dtype": "float64", "shape": []}},
                             {"id": "b.s1", "type": {"dtype": "float64", "shape": []}},
                             {"id": "b.l", "type": {"dtype": "float64", "shape": []}}],
                           "nodes": [{"op": "add", "inputs": ["b.s1", "b.x"], "outputs": ["b.s"]},
                                     {"op": "mul", "inputs": ["b.s", {"value": 2}], "outputs": ["b.d"]},
                                     {"op": "gt", "inputs": ["b.s", "b.l"], "outputs": ["b.stop"]}],
                           "inputs": ["b.x", "b.s1", "b.l"], "outputs": ["b.s", "b.d", "b.stop"]}}}],
    "functions": {"main": {"inputs": ["x", "s0", "lim", "n"], "outputs": ["s", "d"]}}});

static void test_until(void **state) {
    (void)state;
    tg_graph *g = tu_load(UNTIL);
    enum { L = 100 };
    double x[L];
    for (int i = 0; i < L; i++) x[i] = 1.0 + 0.01 * i;
    const double lims[] = {-1, 0.5, 40.0, 1e9};
    const int64_t ns[] = {L, L, L, 60};
    for (int c = 0; c < 4; c++) {
        tg_array *in[4] = {vec(L, x), tg_array_new_scalar(TG_FLOAT64, 0),
                           tg_array_new_scalar(TG_FLOAT64, lims[c]), i64(ns[c])};
        tg_array *out[2];
        tu_call(g, "main", in, out);
        double S[L], D[L], s = 0;
        int64_t T = 0;
        for (; T < ns[c];) {
            s += x[T];
            S[T] = s;
            D[T] = 2 * s;
            T++;
            if (s > lims[c]) break;
        }
        expect(out[0], 1, &T, S);
        expect(out[1], 1, &T, D);
        for (int i = 0; i < 4; i++) tg_array_free(in[i]);
        for (int i = 0; i < 2; i++) tg_array_free(out[i]);
    }
    tg_graph_free(g);
}

/* Zero steps: 0 rows of the per-step shape. */
static void test_zero_steps(void **state) {
    (void)state;
    tg_graph *g = tu_load(UNTIL);
    double x[3] = {1, 2, 3};
    tg_array *in[4] = {vec(3, x), tg_array_new_scalar(TG_FLOAT64, 0),
                       tg_array_new_scalar(TG_FLOAT64, 5), i64(0)};
    tg_array *out[2];
    tu_call(g, "main", in, out);
    int64_t zero = 0;
    expect(out[0], 1, &zero, NULL);
    expect(out[1], 1, &zero, NULL);
    for (int i = 0; i < 4; i++) tg_array_free(in[i]);
    for (int i = 0; i < 2; i++) tg_array_free(out[i]);
    tg_graph_free(g);
}

/* Run-time errors name the scan node and the step. */
static void call_fail(const char *json, tg_array *const *in, const char *const *want) {
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    tg_array *out[4] = {0};
    int rc = tg_function_call(f, in, out, ctx);
    assert_int_not_equal(rc, 0);
    const char *msg = tg_ctx_message(ctx);
    for (int i = 0; want[i]; i++)
        if (!strstr(msg, want[i])) fail_msg("message lacks '%s': %s", want[i], msg);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

static void test_run_errors(void **state) {
    (void)state;
    /* A sequence too short for n_steps. */
    double x[3] = {1, 2, 3};
    tg_array *in[4] = {vec(3, x), tg_array_new_scalar(TG_FLOAT64, 0),
                       tg_array_new_scalar(TG_FLOAT64, 5), i64(4)};
    call_fail(UNTIL, in,
              (const char *[]){"(scan -> s", "sequence 0 ('x') has 3 rows, but 4 steps with taps [0] need 4",
                               NULL});
    for (int i = 0; i < 4; i++) tg_array_free(in[i]);
    /* A body output whose shape changes between steps: the recurrent
     * output grows by concatenation. */
    const char *grow = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "v0", "type": {"dtype": "float64", "shape": [null]}},
                      {"id": "n", "type": {"dtype": "int64", "shape": []}}],
        "nodes": [{"op": "scan", "inputs": ["n", "v0"], "outputs": ["v"],
                   "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1,
                             "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                             "has_n_steps": true, "has_until": false,
                             "body": {"variables": [{"id": "b.v", "type": {"dtype": "float64", "shape": [null]}}],
                                      "nodes": [{"op": "join", "inputs": ["b.v", "b.v"], "outputs": ["b.w"],
                                                 "attrs": {"axis": 0}}],
                                      "inputs": ["b.v"], "outputs": ["b.w"]}}}],
        "functions": {"main": {"inputs": ["v0", "n"], "outputs": ["v"]}}});
    /* An error inside the body: the scan node, the step, the body's node. */
    const char *div = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "int64", "shape": [null]}}],
        "nodes": [{"op": "scan", "inputs": ["x"], "outputs": ["y"], "name": "divider",
                   "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [],
                             "n_nonrecurrent": 1, "n_non_sequences": 0, "has_n_steps": false, "has_until": false,
                             "body": {"variables": [{"id": "b.x", "type": {"dtype": "int64", "shape": []}}],
                                      "nodes": [{"op": "int_div", "inputs": [{"value": 10}, "b.x"], "outputs": ["b.q"]}],
                                      "inputs": ["b.x"], "outputs": ["b.q"]}}}],
        "functions": {"main": {"inputs": ["x"], "outputs": ["y"]}}});
    int64_t four = 4;
    tg_array *xd = tg_array_new(TG_INT64, 1, &four);
    int64_t *xp = tg_array_data(xd);
    xp[0] = 1, xp[1] = 2, xp[2] = 0, xp[3] = 4;
    call_fail(div, &xd, (const char *[]){"scan 'divider' -> y", "step 2, in the body: nodes[0] (int_div -> b.q)",
                                         "division by zero", NULL});
    tg_array_free(xd);
    double v0[2] = {1, 2};
    tg_array *in2[2] = {vec(2, v0), i64(3)};
    call_fail(grow, in2, (const char *[]){"scan", "-> v", "step 0", "(4,)", "(2,)", NULL});
    for (int i = 0; i < 2; i++) tg_array_free(in2[i]);
}

/* n_steps of 2^63 - 1 (a uint64 2^64 - 1 counts as it): a recurrent
 * output's stack would have n_steps + its initial rows, a sequence's
 * error names the rows n_steps needs; both passed int64 (UBSan: signed
 * integer overflow in scan_run). */
static void test_huge_n_steps(void **state) {
    (void)state;
    const char *rec = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "n", "type": {"dtype": "int64", "shape": []}},
                      {"id": "h0", "type": {"dtype": "float64", "shape": [2]}}],
        "nodes": [{"op": "scan", "inputs": ["n", "h0"], "outputs": ["h"],
                   "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1,
                             "output_taps": [[-2]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                             "has_n_steps": true, "has_until": false,
                             "body": {"variables": [{"id": "b.h", "type": {"dtype": "float64", "shape": []}}],
                                      "nodes": [{"op": "add", "inputs": ["b.h", {"value": 1.0}], "outputs": ["b.s"]}],
                                      "inputs": ["b.h"], "outputs": ["b.s"]}}}],
        "functions": {"main": {"inputs": ["n", "h0"], "outputs": ["h"]}}});
    double h0[2] = {0, 0};
    tg_array *in[2] = {i64(INT64_MAX), vec(2, h0)};
    call_fail(rec, in, (const char *[]){"(scan -> h", "recurrent output 0: 9223372036854775807 steps after its 2 "
                                        "initial rows make more than 2^63 - 1 rows", NULL});
    for (int i = 0; i < 2; i++) tg_array_free(in[i]);
    const char *seq = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "n", "type": {"dtype": "int64", "shape": []}},
                      {"id": "x", "type": {"dtype": "float64", "shape": [null]}}],
        "nodes": [{"op": "scan", "inputs": ["n", "x"], "outputs": ["y"],
                   "attrs": {"n_sequences": 1, "sequence_taps": [[-2, 2]], "n_recurrent": 0,
                             "output_taps": [], "n_nonrecurrent": 1, "n_non_sequences": 0,
                             "has_n_steps": true, "has_until": false,
                             "body": {"variables": [{"id": "b.a", "type": {"dtype": "float64", "shape": []}},
                                                    {"id": "b.b", "type": {"dtype": "float64", "shape": []}}],
                                      "nodes": [{"op": "add", "inputs": ["b.a", "b.b"], "outputs": ["b.s"]}],
                                      "inputs": ["b.a", "b.b"], "outputs": ["b.s"]}}}],
        "functions": {"main": {"inputs": ["n", "x"], "outputs": ["y"]}}});
    double x[3] = {1, 2, 3};
    tg_array *in2[2] = {i64(INT64_MAX), vec(3, x)};
    /* 2^63 - 1 + 4 = 9223372036854775811 */
    call_fail(seq, in2, (const char *[]){"(scan -> y", "sequence 0 ('x') has 3 rows, but 9223372036854775807 "
                                         "steps with taps [-2, 2] need 9223372036854775811", NULL});
    for (int i = 0; i < 2; i++) tg_array_free(in2[i]);
}

/* Load errors: each inconsistency is one line naming the attr or input. */
static void load_fail(const char *json, const char *const *want) {
    char msg[2048];
    int rc = tu_load_fail(json, msg, sizeof msg);
    assert_int_not_equal(rc, 0);
    for (int i = 0; want[i]; i++)
        if (!strstr(msg, want[i])) fail_msg("message lacks '%s': %s", want[i], msg);
    assert_null(strchr(msg, '\n'));
}

static char *subst(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    assert_non_null(at);
    size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
    char *r = malloc(n);
    snprintf(r, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return r;
}

static void test_load_errors(void **state) {
    (void)state;
    struct {
        const char *from, *to;
        const char *want[4];
    } cases[] = {
        {"\"output_taps\": [[-1]]", "\"output_taps\": [[1]]", {"attrs.output_taps[0][0]", "negative", NULL}},
        {"\"output_taps\": [[-1]]", "\"output_taps\": [[-1, -1]]", {"attrs.output_taps[0][1]", "twice", NULL}},
        {"\"output_taps\": [[-1]]", "\"output_taps\": []", {"attrs.output_taps", "1 tap list", NULL}},
        {"\"output_taps\": [[-1]]", "\"output_taps\": [[-2]]", {"inputs[1]", "initial state", "2 dimensions", NULL}},
        {"\"n_non_sequences\": 1", "\"n_non_sequences\": 0", {"attrs.body.inputs", "takes 2", "give it 1", NULL}},
        {"\"n_recurrent\": 1", "\"n_recurrent\": 2", {"attrs.output_taps", NULL}},
        {"\"has_n_steps\": true", "\"has_n_steps\": false", {"has_n_steps", "n_steps", NULL}},
        {"\"has_until\": false", "\"has_until\": 1", {"attrs.has_until", NULL}},
        {"\"has_until\": false", "\"has_until\": false, \"truncate_gradient\": 0", {"attrs.truncate_gradient", NULL}},
        {"\"has_until\": false", "\"has_until\": false, \"colour\": 1", {"colour", NULL}},
        {"\"inputs\": [\"k\", \"one\", \"A\"]", "\"inputs\": [\"k\", \"one\", \"A\", \"A\"]", {"inputs", "3 inputs", "gives 4", NULL}},
        {"\"inputs\": [\"k\", \"one\", \"A\"]", "\"inputs\": [\"A\", \"one\", \"A\"]", {"inputs[0]", "n_steps", NULL}},
        /* a weak float n_steps ran int(2.5) steps */
        {"\"inputs\": [\"k\", \"one\", \"A\"]", "\"inputs\": [{\"value\": 2.5}, \"one\", \"A\"]",
         {"inputs[0]", "(n_steps): expected an integer scalar, got float64", NULL}},
        {"{\"id\": \"b.A\", \"type\": {\"dtype\": \"float64\"", "{\"id\": \"b.A\", \"type\": {\"dtype\": \"float32\"", {"attrs.body.inputs[1]", "'b.A'", "non-sequence 0", NULL}},
        {"\"has_until\": false", "\"has_until\": true", {"attrs.body.outputs", "gives 1", "until 1", NULL}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *j = subst(POW, cases[c].from, cases[c].to);
        load_fail(j, cases[c].want);
        free(j);
    }
    /* A body holding shared state. */
    char *j1 = subst(POW, "\"nodes\": [{\"op\": \"mul\", \"inputs\": [\"b.p\", \"b.A\"]",
                     "\"nodes\": [{\"op\": \"mul\", \"inputs\": [\"b.p\", \"b.A\", \"b.S\"]");
    char *j2 = subst(j1, "\"id\": \"b.A\", \"type\": {\"dtype\": \"float64\", \"shape\": [null]}}",
                     "\"id\": \"b.A\", \"type\": {\"dtype\": \"float64\", \"shape\": [null]}}, "
                     "{\"id\": \"b.S\", \"type\": {\"dtype\": \"float64\", \"shape\": []}, \"shared\": {\"data\": 2.0}}");
    load_fail(j2, (const char *[]){"attrs.body.variables[2]", "'b.S' is shared", NULL});
    free(j1);
    free(j2);
}

/* Outputs that are views of the body's inputs (a transpose of the step's
 * slice) or a body input itself (the state passed through unchanged), and
 * a strided (transposed) sequence: each lands in its row by a copy. */
static void test_view_outputs(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3, 2, 4]}},
                      {"id": "h0", "type": {"dtype": "float64", "shape": [2]}}],
        "nodes": [{"op": "transpose", "inputs": ["x"], "outputs": ["xt"], "attrs": {"axes": [2, 1, 0]}},
                  {"op": "scan", "inputs": ["xt", "h0"], "outputs": ["h", "v"],
                   "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                             "output_taps": [[-1]], "n_nonrecurrent": 1, "n_non_sequences": 0,
                             "has_n_steps": false, "has_until": false,
                             "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [2, 3]}},
                                                    {"id": "b.h", "type": {"dtype": "float64", "shape": [2]}}],
                                      "nodes": [{"op": "transpose", "inputs": ["b.x"], "outputs": ["b.t"]}],
                                      "inputs": ["b.x", "b.h"], "outputs": ["b.h", "b.t"]}}}],
        "functions": {"main": {"inputs": ["x", "h0"], "outputs": ["h", "v"]}}});
    tg_graph *g = tu_load(json);
    double x[24], h0[2] = {3.5, -1};
    for (int i = 0; i < 24; i++) x[i] = i;
    int64_t s3[3] = {3, 2, 4};
    tg_array *in[2] = {tg_array_new_from(TG_FLOAT64, 3, s3, x), vec(2, h0)}, *out[2];
    tu_call(g, "main", in, out);
    /* Both outputs are copied each step (4 steps, 2 outputs). */
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    tg_array *o2[2];
    assert_int_equal(tg_function_call(f, in, o2, ctx), 0);
    assert_int_equal(scan_copies(f), 8);
    for (int i = 0; i < 2; i++) tg_array_free(o2[i]);
    tg_function_free(f);
    tg_ctx_free(ctx);
    /* xt = x.transpose(2, 1, 0): shape (4, 2, 3); step t's slice xt[t]
     * (2, 3), transposed back: v[t][a][b] = xt[t][b][a] = x[a][b][t]. */
    double H[8], V[4 * 3 * 2];
    for (int t = 0; t < 4; t++) {
        H[t * 2] = 3.5;
        H[t * 2 + 1] = -1;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++) V[(t * 3 + a) * 2 + b] = x[(a * 2 + b) * 4 + t];
    }
    expect(out[0], 2, (int64_t[]){4, 2}, H);
    expect(out[1], 3, (int64_t[]){4, 3, 2}, V);
    for (int i = 0; i < 2; i++) {
        tg_array_free(in[i]);
        tg_array_free(out[i]);
    }
    tg_graph_free(g);
}

/* Steps allocate nothing in steady state: a call of 400 steps makes as
 * many allocations as a call of 4 (the stacks are allocated once, each
 * step's outputs land in their rows, the body's buffers are reused). The
 * body: h[t] = tanh(W h[t-1] + x[t]), y[t] = 2 h[t], rows of 600 float64
 * (larger than what the VM keeps between calls by default). */
static long nallocs;
static void *counting_realloc(void *ud, void *ptr, size_t size) {
    (void)ud;
    if (size && !ptr) nallocs++;
    if (!size) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

static void test_no_alloc_per_step(void **state) {
    (void)state;
    const char *json = J({"format": "tg-graph", "version": 1,
        "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, 600]}},
                      {"id": "h0", "type": {"dtype": "float64", "shape": [600]}},
                      {"id": "W", "type": {"dtype": "float64", "shape": [600, 600]}}],
        "nodes": [{"op": "scan", "inputs": ["x", "h0", "W"], "outputs": ["h", "y"],
                   "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                             "output_taps": [[-1]], "n_nonrecurrent": 1, "n_non_sequences": 1,
                             "has_n_steps": false, "has_until": false,
                             "body": {"variables": [
                                 {"id": "b.x", "type": {"dtype": "float64", "shape": [600]}},
                                 {"id": "b.h1", "type": {"dtype": "float64", "shape": [600]}},
                                 {"id": "b.W", "type": {"dtype": "float64", "shape": [600, 600]}}],
                               "nodes": [{"op": "dot", "inputs": ["b.W", "b.h1"], "outputs": ["b.a"]},
                                         {"op": "add", "inputs": ["b.a", "b.x"], "outputs": ["b.s"]},
                                         {"op": "tanh", "inputs": ["b.s"], "outputs": ["b.h"]},
                                         {"op": "mul", "inputs": ["b.h", {"value": 2}], "outputs": ["b.y"]}],
                               "inputs": ["b.x", "b.h1", "b.W"], "outputs": ["b.h", "b.y"]}}}],
        "functions": {"main": {"inputs": ["x", "h0", "W"], "outputs": ["h", "y"]}}});
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    enum { N = 600, L = 400 };
    double *x = malloc(sizeof(double) * N * L), *h0 = malloc(sizeof(double) * N),
           *W = malloc(sizeof(double) * N * N);
    for (int i = 0; i < N * L; i++) x[i] = 0.1 * sin(i);
    for (int i = 0; i < N; i++) h0[i] = 0.01 * i;
    for (int i = 0; i < N * N; i++) W[i] = 0.001 * cos(i);
    long counts[2];
    tg_array *in[3] = {mat(L, N, x), vec(N, h0), mat(N, N, W)};
    tg_array *in4 = mat(4, N, x);
    for (int c = 0; c < 2; c++) {
        tg_array *use[3] = {c ? in[0] : in4, in[1], in[2]};
        tg_array *out[2];
        assert_int_equal(tg_function_call(f, use, out, ctx), 0); /* warm */
        tg_array_free(out[0]);
        tg_array_free(out[1]);
        tg_set_allocator(counting_realloc, NULL);
        nallocs = 0;
        int rc = tg_function_call(f, use, out, ctx);
        counts[c] = nallocs;
        tg_set_allocator(NULL, NULL);
        assert_int_equal(rc, 0);
        /* The last step, by hand. */
        int64_t T = c ? L : 4;
        double *h = malloc(sizeof(double) * N), *hn = malloc(sizeof(double) * N);
        memcpy(h, h0, sizeof(double) * N);
        for (int64_t t = 0; t < T; t++) {
            for (int i = 0; i < N; i++) {
                double s = 0;
                for (int k = 0; k < N; k++) s += W[i * N + k] * h[k];
                hn[i] = tanh(s + x[t * N + i]);
            }
            memcpy(h, hn, sizeof(double) * N);
        }
        const double *got = tg_array_data(out[0]), *goty = tg_array_data(out[1]);
        for (int i = 0; i < N; i++) {
            assert_true(fabs(got[(T - 1) * N + i] - h[i]) < 1e-12);
            assert_true(fabs(goty[(T - 1) * N + i] - 2 * h[i]) < 1e-12);
        }
        free(h);
        free(hn);
        tg_array_free(out[0]);
        tg_array_free(out[1]);
    }
    assert_int_equal(scan_copies(f), 0);
    if (counts[1] != counts[0])
        fail_msg("4 steps: %ld allocations, 400 steps: %ld", counts[0], counts[1]);
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_array_free(in4);
    free(x);
    free(h0);
    free(W);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_power),      cmocka_unit_test(test_taps),
        cmocka_unit_test(test_go_backwards), cmocka_unit_test(test_until),
        cmocka_unit_test(test_zero_steps), cmocka_unit_test(test_run_errors), cmocka_unit_test(test_huge_n_steps),
        cmocka_unit_test(test_load_errors), cmocka_unit_test(test_no_alloc_per_step),
        cmocka_unit_test(test_view_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
