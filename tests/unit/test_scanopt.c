/* The scan rewrites (libcore/src/rewrite/scanopt.c): each fires on a graph
 * made for it (the rewrite record names it) and the optimized function
 * computes what the graph run as written does (preset none); the RNN,
 * the ring of kept steps and the merged loops are also checked against
 * plain C loops written here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "vm/vm.h"

#define J(...) #__VA_ARGS__

static tg_function *compile(tg_graph *g, const char *preset) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = preset};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) {
        char msg[TG_CTX_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("compile failed: %s", msg);
    }
    tg_ctx_free(ctx);
    return f;
}

static int fired(const tg_function *f, const char *name) {
    int c = 0;
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info r;
        assert_int_equal(tg_function_rewrite_get(f, i, &r), 0);
        c += !strcmp(r.name, name);
    }
    return c;
}

/* The outer nodes scan_push_seq built (it moves every node it can in one
 * application): what its records created, less the scans. */
static int pushed_out(const tg_function *f) {
    int c = 0;
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info r;
        assert_int_equal(tg_function_rewrite_get(f, i, &r), 0);
        if (strcmp(r.name, "scan_push_seq")) continue;
        c += r.ncreated - 1;
    }
    return c;
}

/* The body of a scan node as its attrs hold it; NULL for any other node. */
static json_object *scan_body_json(const tg_node *n) {
    json_object *body = NULL;
    if (strcmp(n->op->name, "scan") || !n->attrs || !json_object_object_get_ex(n->attrs, "body", &body))
        return NULL;
    return body;
}

/* The nodes left in the bodies of f's scans. */
static int scan_body_nodes(const tg_function *f) {
    int c = 0;
    for (int k = 0; k < f->nsched; k++) {
        json_object *body = scan_body_json(f->sched[k].node), *nodes;
        if (!body || !json_object_object_get_ex(body, "nodes", &nodes)) continue;
        c += (int)json_object_array_length(nodes);
    }
    return c;
}

/* Outputs of f's scans that stack one of their body's inputs unchanged
 * (a copy of a sequence's rows, or of a non-sequence per step). */
static int scan_passthrough_outputs(const tg_function *f) {
    int c = 0;
    for (int k = 0; k < f->nsched; k++) {
        json_object *body = scan_body_json(f->sched[k].node), *ins, *outs;
        if (!body || !json_object_object_get_ex(body, "inputs", &ins) ||
            !json_object_object_get_ex(body, "outputs", &outs))
            continue;
        for (size_t o = 0; o < json_object_array_length(outs); o++)
            for (size_t i = 0; i < json_object_array_length(ins); i++)
                c += !strcmp(json_object_get_string(json_object_array_get_idx(outs, o)),
                             json_object_get_string(json_object_array_get_idx(ins, i)));
    }
    return c;
}

static void list_rewrites(const tg_function *f) {
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info r;
        tg_function_rewrite_get(f, i, &r);
        fprintf(stderr, "  applied: %s (%s)\n", r.name, r.pass);
    }
}

static int count_op(const tg_function *f, const char *op) {
    int c = 0;
    for (int i = 0; i < tg_function_node_count(f); i++) c += !strcmp(tg_function_node_op(f, i), op);
    return c;
}

static void call(tg_function *f, tg_array *const *in, tg_array **out) {
    tg_ctx *ctx = tg_ctx_new();
    if (tg_function_call(f, in, out, ctx)) {
        char msg[TG_CTX_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("call failed: %s", msg);
    }
    tg_ctx_free(ctx);
}

/* f's one output on in is the rows x cols matrix want (float64). */
static void expect_matrix(tg_function *f, tg_array *const *in, int64_t rows, int64_t cols, const double *want) {
    tg_array *out[1], *wa = tu_f64(2, (int64_t[]){rows, cols}, want);
    call(f, in, out);
    tu_assert_close(out[0], wa, 1e-12, 1e-12);
    tg_array_free(wa);
    tg_array_free(out[0]);
}

/* Deterministic values in [lo, hi). */
static double *fill(int64_t n, double lo, double hi, int seed) {
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1);
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        d[i] = lo + (hi - lo) * (double)(s >> 11) / 9007199254740992.0;
    }
    return d;
}

/* Random float64 inputs of the function's static shapes. */
static void inputs_for(const tg_function *f, tg_array **in, double lo, double hi) {
    for (int i = 0; i < tg_function_input_count(f); i++) {
        int nd = tg_function_input_ndim(f, i);
        const int64_t *shp = tg_function_input_shape(f, i);
        int64_t n = 1;
        for (int d = 0; d < nd; d++) n *= shp[d];
        double *d = fill(n, lo, hi, i);
        tg_array *a = tu_f64(nd, shp, d);
        free(d);
        if (tg_function_input_dtype(f, i) != TG_FLOAT64) {
            tg_array *c = tg_array_copy(a, tg_function_input_dtype(f, i));
            tg_array_free(a);
            a = c;
        }
        in[i] = a;
    }
}

/* Fast_run against none: `rewrite` fired at least `times` times and every
 * output agrees, on two calls (the second reuses storage). Returns the
 * optimized function for more checks (the caller frees it). */
static tg_function *check_against_none(tg_graph *g, const char *rewrite, int times, tg_array **in) {
    tg_function *ref = compile(g, "none"), *opt = compile(g, "fast_run");
    if (fired(opt, rewrite) < times) {
        fprintf(stderr, "%s fired %d times, expected %d\n", rewrite, fired(opt, rewrite), times);
        list_rewrites(opt);
        fail();
    }
    int nout = tg_function_output_count(ref);
    for (int rep = 0; rep < 2; rep++) {
        tg_array *o1[8] = {0}, *o2[8] = {0};
        call(ref, in, o1);
        call(opt, in, o2);
        for (int k = 0; k < nout; k++) {
            tu_assert_close(o2[k], o1[k], 1e-9, 1e-12);
            tg_array_free(o1[k]);
            tg_array_free(o2[k]);
        }
    }
    tg_function_free(ref);
    return opt;
}

static void free_all(tg_array **a, int n) {
    for (int i = 0; i < n; i++) tg_array_free(a[i]);
}

/* ---- scan_hoist ---- */

/* h[t] = h[t-1] * (exp(w) * 0.5) + x[t]: exp(w) * 0.5 is the same every
 * step and moves out (two nodes). */
static const char *HOIST = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [6, 3]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [3]}},
                  {"id": "w", "type": {"dtype": "float64", "shape": [3]}}],
    "nodes": [{"op": "scan", "inputs": ["x", "h0", "w"], "outputs": ["h"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 1,
                         "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [3]}},
                                                {"id": "b.h", "type": {"dtype": "float64", "shape": [3]}},
                                                {"id": "b.w", "type": {"dtype": "float64", "shape": [3]}}],
                                  "nodes": [{"op": "exp", "inputs": ["b.w"], "outputs": ["b.e"]},
                                            {"op": "mul", "inputs": ["b.e", {"value": 0.5}], "outputs": ["b.e2"]},
                                            {"op": "mul", "inputs": ["b.h", "b.e2"], "outputs": ["b.m"]},
                                            {"op": "add", "inputs": ["b.m", "b.x"], "outputs": ["b.o"]}],
                                  "inputs": ["b.x", "b.h", "b.w"], "outputs": ["b.o"]}}}],
    "functions": {"main": {"inputs": ["x", "h0", "w"], "outputs": ["h"]}}});

static void test_hoist(void **state) {
    (void)state;
    tg_graph *g = tu_load(HOIST);
    tg_array *in[3];
    tg_function *probe = compile(g, "none");
    inputs_for(probe, in, -1, 1);
    tg_function_free(probe);
    tg_function *opt = check_against_none(g, "scan_hoist", 1, in);
    /* exp runs outside, once. */
    assert_int_equal(count_op(opt, "exp") + count_op(opt, "composite"), 1);
    tg_array *out[1];
    call(opt, in, out);
    const double *x = tg_array_data(in[0]), *h0 = tg_array_data(in[1]), *w = tg_array_data(in[2]);
    double h[3], want[18];
    memcpy(h, h0, sizeof h);
    for (int t = 0; t < 6; t++)
        for (int i = 0; i < 3; i++) want[t * 3 + i] = h[i] = h[i] * exp(w[i]) * 0.5 + x[t * 3 + i];
    tg_array *wa = tu_f64(2, (int64_t[]){6, 3}, want);
    tu_assert_close(out[0], wa, 1e-12, 1e-12);
    tg_array_free(wa);
    tg_array_free(out[0]);
    free_all(in, 3);
    tg_function_free(opt);
    tg_graph_free(g);
}

/* y_t = ifelse(x_t > 0, x_t, x_t + k // d) + k * 2: k * 2 is needed
 * every step and moves out; k // d only under the else branch, and stays
 * in the body, where an untaken branch does not run it. */
static const char *HOIST_LAZY = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "int64", "shape": [null]}},
                  {"id": "k", "type": {"dtype": "int64", "shape": []}},
                  {"id": "d", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["x", "k", "d"], "outputs": ["y"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0,
                         "output_taps": [], "n_nonrecurrent": 1, "n_non_sequences": 2,
                         "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "int64", "shape": []}},
                                                {"id": "b.k", "type": {"dtype": "int64", "shape": []}},
                                                {"id": "b.d", "type": {"dtype": "int64", "shape": []}}],
                                  "nodes": [{"op": "gt", "inputs": ["b.x", {"value": 0}], "outputs": ["b.c"]},
                                            {"op": "int_div", "inputs": ["b.k", "b.d"], "outputs": ["b.q"]},
                                            {"op": "add", "inputs": ["b.x", "b.q"], "outputs": ["b.e"]},
                                            {"op": "ifelse", "inputs": ["b.c", "b.x", "b.e"], "outputs": ["b.y0"]},
                                            {"op": "mul", "inputs": ["b.k", {"value": 2}], "outputs": ["b.m"]},
                                            {"op": "add", "inputs": ["b.y0", "b.m"], "outputs": ["b.y"]}],
                                  "inputs": ["b.x", "b.k", "b.d"], "outputs": ["b.y"]}}}],
    "functions": {"main": {"inputs": ["x", "k", "d"], "outputs": ["y"]}}});

static void test_hoist_lazy(void **state) {
    (void)state;
    tg_graph *g = tu_load(HOIST_LAZY);
    tg_function *ref = compile(g, "none"), *opt = compile(g, "fast_run");
    assert_int_equal(fired(opt, "scan_hoist"), 1);
    assert_int_equal(count_op(opt, "int_div"), 0);
    /* d = 0 with every x_t > 0 (the division never runs), then d = 2
     * with a step taking the else branch. */
    const int64_t xs[2][3] = {{1, 2, 3}, {1, -2, 3}}, ds[2] = {0, 2}, want[2][3] = {{15, 16, 17}, {15, 15, 17}};
    for (int c = 0; c < 2; c++) {
        int64_t k = 7;
        tg_array *in[3] = {tg_array_new_from(TG_INT64, 1, (int64_t[]){3}, xs[c]),
                           tg_array_new_from(TG_INT64, 0, NULL, &k),
                           tg_array_new_from(TG_INT64, 0, NULL, &ds[c])};
        tg_array *w = tg_array_new_from(TG_INT64, 1, (int64_t[]){3}, want[c]);
        tg_function *fs[2] = {ref, opt};
        for (int f = 0; f < 2; f++) {
            tg_array *out[1];
            call(fs[f], in, out);
            tu_assert_close(out[0], w, 0, 0);
            tg_array_free(out[0]);
        }
        tg_array_free(w);
        free_all(in, 3);
    }
    tg_function_free(ref);
    tg_function_free(opt);
    tg_graph_free(g);
}

/* ---- scan_push_seq: a vanilla RNN ---- */

/* h[t] = tanh(x[t] @ W + h[t-1] @ U + b), x (T, batch 2, in 3), h (2, 4).
 * GOBACK is replaced by true or false. */
static const char *RNN = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [5, 2, 3]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [2, 4]}},
                  {"id": "W", "type": {"dtype": "float64", "shape": [3, 4]}},
                  {"id": "U", "type": {"dtype": "float64", "shape": [4, 4]}},
                  {"id": "b", "type": {"dtype": "float64", "shape": [4]}}],
    "nodes": [{"op": "scan", "inputs": ["x", "h0", "W", "U", "b"], "outputs": ["h"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 3,
                         "has_n_steps": false, "has_until": false, "go_backwards": GOBACK,
                         "body": {"variables": [{"id": "x_t", "type": {"dtype": "float64", "shape": [2, 3]}},
                                                {"id": "h_p", "type": {"dtype": "float64", "shape": [2, 4]}},
                                                {"id": "W_", "type": {"dtype": "float64", "shape": [3, 4]}},
                                                {"id": "U_", "type": {"dtype": "float64", "shape": [4, 4]}},
                                                {"id": "b_", "type": {"dtype": "float64", "shape": [4]}}],
                                  "nodes": [{"op": "dot", "inputs": ["x_t", "W_"], "outputs": ["xw"]},
                                            {"op": "dot", "inputs": ["h_p", "U_"], "outputs": ["hu"]},
                                            {"op": "add", "inputs": ["xw", "hu", "b_"], "outputs": ["s"]},
                                            {"op": "tanh", "inputs": ["s"], "outputs": ["h_t"]}],
                                  "inputs": ["x_t", "h_p", "W_", "U_", "b_"], "outputs": ["h_t"]}}}],
    "functions": {"main": {"inputs": ["x", "h0", "W", "U", "b"], "outputs": ["h"]}}});

/* The RNN by hand: rows of x in the order the loop reads them. */
static void rnn_by_hand(const tg_array *const *in, bool back, int T, double *out) {
    const double *x = tg_array_data(in[0]), *h0 = tg_array_data(in[1]), *W = tg_array_data(in[2]),
                 *U = tg_array_data(in[3]), *b = tg_array_data(in[4]);
    double h[8], hn[8];
    memcpy(h, h0, sizeof h);
    for (int t = 0; t < T; t++) {
        const double *xt = x + (back ? T - 1 - t : t) * 6;
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) {
                double s = b[j];
                for (int k = 0; k < 3; k++) s += xt[r * 3 + k] * W[k * 4 + j];
                for (int k = 0; k < 4; k++) s += h[r * 4 + k] * U[k * 4 + j];
                hn[r * 4 + j] = tanh(s);
            }
        memcpy(h, hn, sizeof h);
        memcpy(out + t * 8, h, sizeof h);
    }
}

static void run_rnn(bool back) {
    char *json = strdup(RNN);
    memcpy(strstr(json, "GOBACK"), back ? "true  " : "false ", 6);
    tg_graph *g = tu_load(json);
    free(json);
    tg_array *in[5];
    tg_function *probe = compile(g, "none");
    inputs_for(probe, in, -1, 1);
    tg_function_free(probe);
    tg_function *opt = check_against_none(g, "scan_push_seq", 1, in);
    /* The input projection runs outside: one product over every step. */
    assert_true(count_op(opt, "matmul") + count_op(opt, "dot") + count_op(opt, "gemm") >= 1);
    /* W is no longer read inside: it stops being a non-sequence. */
    assert_true(fired(opt, "scan_prune") >= 1);
    for (int i = 0; i < opt->fg->nnodes; i++)
        if (!strcmp(opt->fg->nodes[i]->op->name, "scan")) assert_int_equal(opt->fg->nodes[i]->nin, 4);
    tg_array *out[1];
    call(opt, in, out);
    double want[40];
    rnn_by_hand((const tg_array *const *)in, back, 5, want);
    tg_array *wa = tu_f64(3, (int64_t[]){5, 2, 4}, want);
    tu_assert_close(out[0], wa, 1e-12, 1e-12);
    tg_array_free(wa);
    tg_array_free(out[0]);
    free_all(in, 5);
    tg_function_free(opt);
    tg_graph_free(g);
}

static void test_push_rnn(void **state) {
    (void)state;
    run_rnn(false);
}

static void test_push_rnn_backwards(void **state) {
    (void)state;
    run_rnn(true);
}

/* The other operand orders: W @ x_t for a vector row (x_t^T W^T outside),
 * elementwise work on the row (x_t * 2 + c, two nodes pushed in turn),
 * and a matmul of a matrix row on the left. */
static const char *PUSH_MORE = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [4, 3]}},
                  {"id": "m", "type": {"dtype": "float64", "shape": [4, 3, 2]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [2]}},
                  {"id": "A", "type": {"dtype": "float64", "shape": [2, 3]}},
                  {"id": "c", "type": {"dtype": "float64", "shape": [3]}}],
    "nodes": [{"op": "scan", "inputs": ["x", "m", "h0", "A", "c"], "outputs": ["h", "y"],
               "attrs": {"n_sequences": 2, "sequence_taps": [[0], [0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 1, "n_non_sequences": 2,
                         "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [3]}},
                                                {"id": "b.m", "type": {"dtype": "float64", "shape": [3, 2]}},
                                                {"id": "b.h", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.A", "type": {"dtype": "float64", "shape": [2, 3]}},
                                                {"id": "b.c", "type": {"dtype": "float64", "shape": [3]}}],
                                  "nodes": [{"op": "mul", "inputs": ["b.x", {"value": 2}], "outputs": ["b.x2"]},
                                            {"op": "add", "inputs": ["b.x2", "b.c"], "outputs": ["b.xc"]},
                                            {"op": "dot", "inputs": ["b.A", "b.xc"], "outputs": ["b.ax"]},
                                            {"op": "matmul", "inputs": ["b.A", "b.m"], "outputs": ["b.am"]},
                                            {"op": "dot", "inputs": ["b.am", "b.h"], "outputs": ["b.amh"]},
                                            {"op": "add", "inputs": ["b.ax", "b.amh"], "outputs": ["b.s"]},
                                            {"op": "tanh", "inputs": ["b.s"], "outputs": ["b.o"]},
                                            {"op": "sum", "inputs": ["b.xc"], "outputs": ["b.y"]}],
                                  "inputs": ["b.x", "b.m", "b.h", "b.A", "b.c"], "outputs": ["b.o", "b.y"]}}}],
    "functions": {"main": {"inputs": ["x", "m", "h0", "A", "c"], "outputs": ["h", "y"]}}});

static void test_push_more(void **state) {
    (void)state;
    tg_graph *g = tu_load(PUSH_MORE);
    tg_array *in[5];
    tg_function *probe = compile(g, "none");
    inputs_for(probe, in, -1, 1);
    tg_function_free(probe);
    /* mul, add, dot(A, x_t) and matmul(A, m_t) move out (one
     * application); dot(am_t, h), add, tanh and sum(xc_t) stay. */
    tg_function *opt = check_against_none(g, "scan_push_seq", 1, in);
    assert_int_equal(scan_body_nodes(opt), 4);
    assert_true(pushed_out(opt) >= 4);
    tg_function_free(opt);
    free_all(in, 5);
    tg_graph_free(g);
}

/* Without n_steps the shortest sequence gives the steps. s0 (7 rows) is
 * read through x * 0.5, which moves out; s1 (5 rows) is never read, or
 * read through y * 3, which moves out too. scan_push_seq had dropped s1
 * whenever nothing in the body read its row, also where nothing made
 * from it stayed, and the loop ran 7 steps instead of 5 (silently with
 * null lengths; random_graphs scan 20300429). SHAPE0, SHAPE1: the
 * sequences' lengths; USE_Y: the second output reads y. */
static char *unread_seq_json(const char *len0, const char *len1, bool use_y) {
    char *j = malloc(4096);
    snprintf(j, 4096,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"s0\",\"type\":{\"dtype\":\"float64\",\"shape\":[%s,3]}},"
             "{\"id\":\"s1\",\"type\":{\"dtype\":\"float64\",\"shape\":[%s,3]}}],"
             "\"nodes\":[{\"op\":\"scan\",\"inputs\":[\"s0\",\"s1\"],\"outputs\":[\"o\",\"p\"],"
             "\"attrs\":{\"n_sequences\":2,\"sequence_taps\":[[0],[0]],\"n_recurrent\":0,"
             "\"output_taps\":[],\"n_nonrecurrent\":2,\"n_non_sequences\":0,\"has_n_steps\":false,"
             "\"has_until\":false,\"body\":{\"variables\":["
             "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
             "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
             "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":0.5}],\"outputs\":[\"t\"]},"
             "{\"op\":\"sum\",\"inputs\":[\"t\"],\"outputs\":[\"o\"]},"
             "{\"op\":\"mul\",\"inputs\":[\"%s\",{\"value\":3}],\"outputs\":[\"u\"]},"
             "{\"op\":\"sum\",\"inputs\":[\"u\"],\"outputs\":[\"p\"]}],"
             "\"inputs\":[\"x\",\"y\"],\"outputs\":[\"o\",\"p\"]}}}],"
             "\"functions\":{\"main\":{\"inputs\":[\"s0\",\"s1\"],\"outputs\":[\"o\",\"p\"]}}}",
             len0, len1, use_y ? "y" : "x");
    return j;
}

static void test_push_keeps_steps(void **state) {
    (void)state;
    double s0[21], s1[15];
    for (int i = 0; i < 21; i++) s0[i] = i;
    for (int i = 0; i < 15; i++) s1[i] = 100 - 2 * i;
    tg_array *in[2] = {tu_f64(2, (int64_t[]){7, 3}, s0), tu_f64(2, (int64_t[]){5, 3}, s1)};
    for (int known = 0; known < 2; known++)
        for (int use_y = 0; use_y < 2; use_y++) {
            char *j = unread_seq_json(known ? "7" : "null", known ? "5" : "null", use_y);
            tg_graph *g = tu_load(j);
            free(j);
            tg_function *f = compile(g, "fast_run");
            assert_true(fired(f, "scan_push_seq") >= 1);
            tg_array *out[2] = {0};
            call(f, in, out);
            /* five steps: o_t = 0.5 sum(s0[t]), p_t = 3 sum(s1[t]) or 3 sum(s0[t]) */
            double wo[5], wp[5];
            for (int t = 0; t < 5; t++) {
                wo[t] = 0.5 * (s0[3 * t] + s0[3 * t + 1] + s0[3 * t + 2]);
                wp[t] = 3 * (use_y ? s1[3 * t] + s1[3 * t + 1] + s1[3 * t + 2] : s0[3 * t] + s0[3 * t + 1] + s0[3 * t + 2]);
            }
            tg_array *a = tu_f64(1, (int64_t[]){5}, wo), *b = tu_f64(1, (int64_t[]){5}, wp);
            tu_assert_close(out[0], a, 1e-12, 1e-12);
            tu_assert_close(out[1], b, 1e-12, 1e-12);
            free_all(out, 2);
            tg_array_free(a);
            tg_array_free(b);
            tg_function_free(f);
            tg_graph_free(g);
        }
    free_all(in, 2);
}

/* ---- scan_keep_last ---- */

/* A body node that can fail (integer int_div, mod, pow) stays in the body:
 * moved out, it ran on every row of the sequence, also those that no step
 * reaches or whose lazy ifelse never takes its branch, and failed the call
 * where the loop as written does not ("integer division by zero" with
 * fast_run; -O none gave the values). h[t] = h[t-1] + q(x_t), int64, k =
 * 10, x = [1, 2, 0, 3], by hand:
 *   lazy    q = ifelse(x_t != 0, k // x_t, -1)      -> [10, 15, 14, 17]
 *   mod     q = ifelse(x_t != 0, k % x_t, -1)       -> [0, 0, -1, 0]
 *   until   q = k // x_t, until h > 5               -> [10]
 *   nsteps  q = k // x_t, n_steps 2                 -> [10, 15]
 *   shorter q = k // x_t + y_t, y = [1, 1] (2 steps) -> [11, 17]
 * A divisor that is a constant without a zero still moves out (k // 2 on
 * the sequence: h = [0, 1, 2, 4] for x = [1, 2, 4, 5]... by hand below). */
static char *guard_json(const char *kind) {
    bool lazy = !strcmp(kind, "lazy") || !strcmp(kind, "mod"), until = !strcmp(kind, "until"),
         nsteps = !strcmp(kind, "nsteps"), shorter = !strcmp(kind, "shorter"), cdiv = !strcmp(kind, "const");
    const char *op = !strcmp(kind, "mod") ? "mod" : "int_div";
    tg_str s = {0};
    tg_str_addf(&s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                    "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[null]}},"
                    "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[null]}},"
                    "{\"id\":\"k\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}}],"
                    "\"nodes\":[{\"op\":\"scan\",\"inputs\":[%s\"x\",%s{\"value\":{\"dtype\":\"int64\",\"data\":0}},\"k\"],"
                    "\"outputs\":[\"H\"],\"attrs\":{\"n_sequences\":%d,\"sequence_taps\":[[0]%s],\"n_recurrent\":1,"
                    "\"output_taps\":[[-1]],\"n_nonrecurrent\":0,\"n_non_sequences\":1,\"has_n_steps\":%s,"
                    "\"has_until\":%s,\"body\":{\"variables\":["
                    "{\"id\":\"xs\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}},"
                    "{\"id\":\"ys\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}},"
                    "{\"id\":\"hp\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}},"
                    "{\"id\":\"k_\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}}],\"nodes\":[",
                nsteps ? "{\"value\":2}," : "", shorter ? "\"y\"," : "", shorter ? 2 : 1, shorter ? ",[0]" : "",
                nsteps ? "true" : "false", until ? "true" : "false");
    if (cdiv)
        tg_str_addf(&s, "{\"op\":\"int_div\",\"inputs\":[\"xs\",{\"value\":2}],\"outputs\":[\"q\"]},");
    else
        tg_str_addf(&s, "{\"op\":\"%s\",\"inputs\":[\"k_\",\"xs\"],\"outputs\":[\"q0\"]},", op);
    if (lazy)
        tg_str_addf(&s, "{\"op\":\"neq\",\"inputs\":[\"xs\",{\"value\":0}],\"outputs\":[\"nz\"]},"
                        "{\"op\":\"ifelse\",\"inputs\":[\"nz\",\"q0\",{\"value\":-1}],\"outputs\":[\"q\"]},");
    else if (shorter)
        tg_str_addf(&s, "{\"op\":\"add\",\"inputs\":[\"q0\",\"ys\"],\"outputs\":[\"q\"]},");
    else if (!cdiv)
        tg_str_addf(&s, "{\"op\":\"identity\",\"inputs\":[\"q0\"],\"outputs\":[\"q\"]},");
    tg_str_addf(&s, "{\"op\":\"add\",\"inputs\":[\"hp\",\"q\"],\"outputs\":[\"hn\"]}");
    if (until) tg_str_addf(&s, ",{\"op\":\"gt\",\"inputs\":[\"hn\",{\"value\":5}],\"outputs\":[\"stop\"]}");
    tg_str_addf(&s, "],\"inputs\":[\"xs\",%s\"hp\",\"k_\"],\"outputs\":[\"hn\"%s]}}}],"
                    "\"functions\":{\"main\":{\"inputs\":[\"x\",\"y\",\"k\"],\"outputs\":[\"H\"]}}}",
                shorter ? "\"ys\"," : "", until ? ",\"stop\"" : "");
    return s.s;
}

/* Whether a body of f's scans still holds an `op` node. */
static bool body_has_op(const tg_function *f, const char *op) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"op\":\"%s\"", op);
    for (int k = 0; k < f->nsched; k++) {
        const tg_node *n = f->sched[k].node;
        if (!strcmp(n->op->name, "scan") && n->attrs &&
            strstr(json_object_to_json_string_ext(n->attrs, JSON_C_TO_STRING_PLAIN), pat))
            return true;
    }
    return false;
}

static void test_push_keeps_failing_nodes(void **state) {
    (void)state;
    struct {
        const char *kind;
        int64_t x[4];
        int n;
        int64_t want[4];
    } cases[] = {
        {"lazy", {1, 2, 0, 3}, 4, {10, 15, 14, 17}},  {"mod", {1, 2, 0, 3}, 4, {0, 0, -1, 0}},
        {"until", {1, 2, 0, 3}, 1, {10}},             {"nsteps", {1, 2, 0, 3}, 2, {10, 15}},
        {"shorter", {1, 2, 0, 3}, 2, {11, 17}},       {"const", {1, 2, 0, 5}, 4, {0, 1, 1, 3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *json = guard_json(cases[c].kind);
        tg_graph *g = tu_load(json);
        int64_t four = 4, two = 2;
        tg_array *in[3] = {tg_array_new(TG_INT64, 1, &four), tg_array_new(TG_INT64, 1, &two),
                           tg_array_new_scalar(TG_INT64, 10)};
        memcpy(tg_array_data(in[0]), cases[c].x, sizeof cases[c].x);
        ((int64_t *)tg_array_data(in[1]))[0] = ((int64_t *)tg_array_data(in[1]))[1] = 1;
        for (int pr = 0; pr < 2; pr++) {
            tg_function *f = compile(g, pr ? "fast_run" : "none");
            /* the const case moves its division out; the others keep it */
            const char *op = !strcmp(cases[c].kind, "mod") ? "mod" : "int_div";
            if (pr) assert_int_equal(body_has_op(f, op), strcmp(cases[c].kind, "const") != 0);
            tg_array *out;
            call(f, in, &out);
            if (tg_array_size(out) != cases[c].n) fail_msg("%s %d: %lld steps", cases[c].kind, pr, (long long)tg_array_size(out));
            for (int i = 0; i < cases[c].n; i++)
                if (tg_array_get_flat(out, i) != (double)cases[c].want[i])
                    fail_msg("%s (%s): h[%d] = %g, want %lld", cases[c].kind, pr ? "fast_run" : "none", i,
                             tg_array_get_flat(out, i), (long long)cases[c].want[i]);
            tg_array_free(out);
            tg_function_free(f);
        }
        free_all(in, 3);
        tg_graph_free(g);
        free(json);
    }
}

/* A**2 .. A**(k+1) keeping the last 2 (keep_last written by hand). */
static const char *POW_KEEP = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "A", "type": {"dtype": "float64", "shape": [2]}},
                  {"id": "k", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["k", "A", "A"], "outputs": ["res"],
               "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 1,
                         "has_n_steps": true, "has_until": false, "keep_last": [2],
                         "body": {"variables": [{"id": "b.p", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.A", "type": {"dtype": "float64", "shape": [2]}}],
                                  "nodes": [{"op": "mul", "inputs": ["b.p", "b.A"], "outputs": ["b.o"]}],
                                  "inputs": ["b.p", "b.A"], "outputs": ["b.o"]}}}]});

/* The RNN read only through h[-1] and h[-2:]: the scan keeps 2 steps. */
static const char *RNN_LAST_TAIL = J(
    {"op": "subtensor", "inputs": ["h"], "outputs": ["last"], "attrs": {"index": [-1]}},
    {"op": "subtensor", "inputs": ["h"], "outputs": ["two"], "attrs": {"index": [{"start": -2}]}}],
    "functions": {"main": {"inputs": ["x", "h0", "W", "U", "b"], "outputs": ["last", "two"]}}});

static void test_keep_last(void **state) {
    (void)state;
    /* The RNN graph with its function replaced. */
    char *json = malloc(strlen(RNN) + strlen(RNN_LAST_TAIL) + 16);
    strcpy(json, RNN);
    memcpy(strstr(json, "GOBACK"), "false ", 6);
    char *cut = strstr(json, "}}}]"); /* the end of the scan node */
    strcpy(cut + 3, ", ");
    strcat(json, RNN_LAST_TAIL);
    tg_graph *g = tu_load(json);
    free(json);
    tg_array *in[5];
    tg_function *probe = compile(g, "none");
    inputs_for(probe, in, -1, 1);
    tg_function_free(probe);
    tg_function *opt = check_against_none(g, "scan_keep_last", 1, in);
    /* The optimized scan keeps 2 steps. */
    int found = 0;
    for (int i = 0; i < opt->fg->nnodes; i++) {
        tg_node *n = opt->fg->nodes[i];
        if (strcmp(n->op->name, "scan")) continue;
        json_object *k = NULL;
        assert_true(json_object_object_get_ex(n->attrs, "keep_last", &k));
        assert_int_equal(json_object_get_int(json_object_array_get_idx(k, 0)), 2);
        assert_int_equal(n->outputs[0]->type.shape[0], 2);
        found++;
    }
    assert_int_equal(found, 1);
    tg_array *out[2];
    call(opt, in, out);
    double want[40];
    rnn_by_hand((const tg_array *const *)in, false, 5, want);
    tg_array *w1 = tu_f64(2, (int64_t[]){2, 4}, want + 32), *w2 = tu_f64(3, (int64_t[]){2, 2, 4}, want + 24);
    tu_assert_close(out[0], w1, 1e-12, 1e-12);
    tu_assert_close(out[1], w2, 1e-12, 1e-12);
    tg_array_free(w1);
    tg_array_free(w2);
    free_all(out, 2);
    free_all(in, 5);
    tg_function_free(opt);
    tg_graph_free(g);
}

/* A ring with several taps and an unknown number of steps:
 *   h[t] = 0.5*h[t-1] + 0.25*h[t-3] + x[t],  z[t] = h[t] * 2,
 * only z[-1] is read (h is read by no one: it keeps 1 step, in a ring of
 * 4 rows since its taps reach 3 back). n steps comes in at run time. */
static const char *RING = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, 2]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [3, 2]}},
                  {"id": "k", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["k", "x", "h0"], "outputs": ["h", "z"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1, -3]], "n_nonrecurrent": 1, "n_non_sequences": 0,
                         "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.h1", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.h3", "type": {"dtype": "float64", "shape": [2]}}],
                                  "nodes": [{"op": "mul", "inputs": ["b.h1", {"value": 0.5}], "outputs": ["b.a"]},
                                            {"op": "mul", "inputs": ["b.h3", {"value": 0.25}], "outputs": ["b.b"]},
                                            {"op": "add", "inputs": ["b.a", "b.b", "b.x"], "outputs": ["b.h"]},
                                            {"op": "mul", "inputs": ["b.h", {"value": 2}], "outputs": ["b.z"]}],
                                  "inputs": ["b.x", "b.h1", "b.h3"], "outputs": ["b.h", "b.z"]}}},
              {"op": "subtensor", "inputs": ["z"], "outputs": ["zl"], "attrs": {"index": [-1]}}],
    "functions": {"main": {"inputs": ["x", "h0", "k"], "outputs": ["zl"]}}});

static void test_keep_ring(void **state) {
    (void)state;
    tg_graph *g = tu_load(RING);
    tg_function *ref = compile(g, "none"), *opt = compile(g, "fast_run");
    if (!fired(opt, "scan_keep_last")) {
        list_rewrites(opt);
        fail_msg("scan_keep_last did not fire");
    }
    enum { L = 11 };
    double *x = fill(L * 2, -1, 1, 3), h0[6] = {1, -1, 0.5, 2, -0.25, 0.75};
    for (int64_t k = 1; k <= L; k++) {
        tg_array *in[3] = {tu_f64(2, (int64_t[]){L, 2}, x), tu_f64(2, (int64_t[]){3, 2}, h0),
                           tg_array_new(TG_INT64, 0, NULL)};
        *(int64_t *)tg_array_data(in[2]) = k;
        tg_array *o1, *o2;
        call(ref, in, &o1);
        call(opt, in, &o2);
        /* By hand. */
        double h[L + 3][2];
        memcpy(h, h0, sizeof h0);
        for (int t = 0; t < k; t++)
            for (int i = 0; i < 2; i++) h[t + 3][i] = 0.5 * h[t + 2][i] + 0.25 * h[t][i] + x[t * 2 + i];
        double want[2] = {2 * h[k + 2][0], 2 * h[k + 2][1]};
        tg_array *wa = tu_f64(1, (int64_t[]){2}, want);
        tu_assert_close(o2, wa, 1e-12, 1e-12);
        tu_assert_close(o1, wa, 1e-12, 1e-12);
        tg_array_free(wa);
        tg_array_free(o1);
        tg_array_free(o2);
        free_all(in, 3);
    }
    free(x);
    tg_function_free(ref);
    tg_function_free(opt);
    tg_graph_free(g);
}

/* A rewrite that rebuilds an output's reader (keep_last) changes the
 * output variable's id: a saved and restored function, and its export,
 * still answer to the declared id. */
static void test_keep_last_saved(void **state) {
    (void)state;
    tg_graph *g = tu_load(RING);
    tg_function *f = compile(g, "fast_run");
    assert_true(fired(f, "scan_keep_last") >= 1);
    assert_string_equal(tg_function_output_id(f, 0), "zl");
    char path[] = "/tmp/tg-scanopt-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf_save_info info = {0};
    assert_int_equal(tg_tgf_save(path, &f, 1, &info, ctx), 0);
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    assert_non_null(t);
    assert_string_equal(tg_function_output_id(tg_tgf_function(t, 0), 0), "zl");
    char *text = tg_tgf_export(t, 0, ctx);
    assert_non_null(text);
    tg_graph *e = tu_load(text);
    tg_function *fe = compile(e, "none");
    assert_string_equal(tg_function_output_id(fe, 0), "zl");
    /* The three agree. */
    double x[8] = {0.5, -1, 0.25, 2, -0.75, 1, 0.1, 0.3}, h0[6] = {1, -1, 0.5, 2, -0.25, 0.75};
    tg_array *in[3] = {tu_f64(2, (int64_t[]){4, 2}, x), tu_f64(2, (int64_t[]){3, 2}, h0),
                       tg_array_new(TG_INT64, 0, NULL)};
    *(int64_t *)tg_array_data(in[2]) = 4;
    tg_array *o1, *o2, *o3;
    call(f, in, &o1);
    call(tg_tgf_function(t, 0), in, &o2);
    call(fe, in, &o3);
    tu_assert_close(o2, o1, 0, 0);
    tu_assert_close(o3, o1, 0, 0);
    tg_array_free(o1);
    tg_array_free(o2);
    tg_array_free(o3);
    free_all(in, 3);
    tg_string_free(text);
    tg_function_free(fe);
    tg_graph_free(e);
    tg_tgf_free(t);
    tg_ctx_free(ctx);
    unlink(path);
    tg_function_free(f);
    tg_graph_free(g);
}

/* until: p[t] = 2 p[t-1] until p > 100; only the last value read. */
static const char *UNTIL = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "p0", "type": {"dtype": "float64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": [{"value": 1000}, "p0"], "outputs": ["p"],
               "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                         "has_n_steps": true, "has_until": true,
                         "body": {"variables": [{"id": "b.p", "type": {"dtype": "float64", "shape": []}}],
                                  "nodes": [{"op": "mul", "inputs": ["b.p", {"value": 2}], "outputs": ["b.q"]},
                                            {"op": "gt", "inputs": ["b.q", {"value": 100}], "outputs": ["b.stop"]}],
                                  "inputs": ["b.p"], "outputs": ["b.q", "b.stop"]}}},
              {"op": "subtensor", "inputs": ["p"], "outputs": ["pl"], "attrs": {"index": [-1]}}],
    "functions": {"main": {"inputs": ["p0"], "outputs": ["pl"]}}});

static void test_keep_until(void **state) {
    (void)state;
    tg_graph *g = tu_load(UNTIL);
    tg_array *in[1] = {tg_array_new_scalar(TG_FLOAT64, 0.75)};
    tg_function *opt = check_against_none(g, "scan_keep_last", 1, in);
    tg_array *out;
    call(opt, in, &out);
    /* 0.75 * 2^8 = 192 is the first above 100 */
    assert_true(fabs(tg_array_get_flat(out, 0) - 192) < 1e-12);
    tg_array_free(out);
    tg_array_free(in[0]);
    tg_function_free(opt);
    tg_graph_free(g);
}

/* keep_last written in a file: checked at load, run as the optimizer's,
 * and no gradient through it. */
static void test_keep_last_attr(void **state) {
    (void)state;
    char *json = strdup(POW_KEEP);
    tg_graph *g = tu_load(json);
    tg_array *in[2] = {tu_f64(1, (int64_t[]){2}, (double[]){2, -3}), tg_array_new(TG_INT64, 0, NULL)};
    *(int64_t *)tg_array_data(in[1]) = 5;
    tg_array *out[1];
    tu_call_preset(g, "main", "none", in, out);
    /* From init A, step t gives A**(t+2): the last 2 of 5 steps. */
    tg_array *want = tu_f64(2, (int64_t[]){2, 2}, (double[]){32, -243, 64, 729});
    tu_assert_close(out[0], want, 1e-12, 0);
    free_all(out, 1);
    tg_array_free(want);
    free_all(in, 2);
    tg_graph_free(g);
    char msg[512];
    char *bad = strdup(json);
    memcpy(strstr(bad, "[2]"), "[x]", 3);
    assert_int_not_equal(tu_load_fail(bad, msg, sizeof msg), 0);
    free(bad);
    /* A gradient through it is refused. */
    char *gj = malloc(strlen(json) + 200);
    strcpy(gj, json);
    strcpy(strstr(gj, "}}}]") + 3, ", {\"op\": \"sum\", \"inputs\": [\"res\"], \"outputs\": [\"s\"]},"
                                  " {\"op\": \"grad\", \"inputs\": [\"s\", \"A\"], \"outputs\": [\"gA\"]}]}");
    assert_int_not_equal(tu_load_fail(gj, msg, sizeof msg), 0);
    if (!strstr(msg, "keep_last")) fail_msg("unexpected message: %s", msg);
    free(gj);
    free(json);
}

/* ---- scan_merge ---- */

/* Two loops of k steps with the same body ids: a[t] = a[t-1] * w and
 * b[t] = b[t-1] + w. A third loop reads a (it must stay apart). */
#define POW_SCAN(out, init, op)                                                                     \
    "{\"op\": \"scan\", \"inputs\": [\"k\", \"" init "\", \"w\"], \"outputs\": [\"" out "\"],"      \
    "\"attrs\": {\"n_sequences\": 0, \"sequence_taps\": [], \"n_recurrent\": 1,"                   \
    "\"output_taps\": [[-1]], \"n_nonrecurrent\": 0, \"n_non_sequences\": 1,"                     \
    "\"has_n_steps\": true, \"has_until\": false,"                                                 \
    "\"body\": {\"variables\": [{\"id\": \"b.p\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}," \
    "{\"id\": \"b.w\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}],"                      \
    "\"nodes\": [{\"op\": \"" op "\", \"inputs\": [\"b.p\", \"b.w\"], \"outputs\": [\"b.o\"]}],"   \
    "\"inputs\": [\"b.p\", \"b.w\"], \"outputs\": [\"b.o\"]}}}"

static const char *MERGE =
    "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
    "{\"id\": \"k\", \"type\": {\"dtype\": \"int64\", \"shape\": []}},"
    "{\"id\": \"a0\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}},"
    "{\"id\": \"b0\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}},"
    "{\"id\": \"w\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}],"
    "\"nodes\": [" POW_SCAN("a", "a0", "mul") "," POW_SCAN("b", "b0", "add") ","
    "{\"op\": \"subtensor\", \"inputs\": [\"a\"], \"outputs\": [\"al\"], \"attrs\": {\"index\": [-1]}},"
    "{\"op\": \"scan\", \"inputs\": [\"k\", \"al\", \"w\"], \"outputs\": [\"c\"],"
    "\"attrs\": {\"n_sequences\": 0, \"sequence_taps\": [], \"n_recurrent\": 1,"
    "\"output_taps\": [[-1]], \"n_nonrecurrent\": 0, \"n_non_sequences\": 1,"
    "\"has_n_steps\": true, \"has_until\": false,"
    "\"body\": {\"variables\": [{\"id\": \"b.p\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}},"
    "{\"id\": \"b.w\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}],"
    "\"nodes\": [{\"op\": \"sub\", \"inputs\": [\"b.p\", \"b.w\"], \"outputs\": [\"b.o\"]}],"
    "\"inputs\": [\"b.p\", \"b.w\"], \"outputs\": [\"b.o\"]}}}],"
    "\"functions\": {\"main\": {\"inputs\": [\"k\", \"a0\", \"b0\", \"w\"], \"outputs\": [\"a\", \"b\", \"c\"]}}}";

static void test_merge(void **state) {
    (void)state;
    tg_graph *g = tu_load(MERGE);
    const double a0[3] = {1, -2, 0.5}, b0[3] = {0, 1, 2}, w[3] = {1.5, -0.5, 2};
    for (int64_t k = 0; k <= 4; k++) {
        tg_array *in[4] = {tg_array_new(TG_INT64, 0, NULL), tu_f64(1, (int64_t[]){3}, a0),
                           tu_f64(1, (int64_t[]){3}, b0), tu_f64(1, (int64_t[]){3}, w)};
        *(int64_t *)tg_array_data(in[0]) = k;
        if (k == 0) { /* -1 of 0 steps: an error either way; compare from k = 1 */
            free_all(in, 4);
            continue;
        }
        tg_function *opt = check_against_none(g, "scan_merge", 1, in);
        assert_int_equal(count_op(opt, "scan"), 2);
        tg_array *out[3];
        call(opt, in, out);
        double wa[12], wb[12], wc[12], a[3], b[3], c[3];
        memcpy(a, a0, sizeof a);
        memcpy(b, b0, sizeof b);
        for (int t = 0; t < k; t++)
            for (int i = 0; i < 3; i++) {
                wa[t * 3 + i] = a[i] *= w[i];
                wb[t * 3 + i] = b[i] += w[i];
            }
        memcpy(c, a, sizeof c);
        for (int t = 0; t < k; t++)
            for (int i = 0; i < 3; i++) wc[t * 3 + i] = c[i] -= w[i];
        const double *wants[3] = {wa, wb, wc};
        for (int o = 0; o < 3; o++) {
            tg_array *x = tu_f64(2, (int64_t[]){k, 3}, wants[o]);
            tu_assert_close(out[o], x, 1e-12, 1e-12);
            tg_array_free(x);
        }
        free_all(out, 3);
        free_all(in, 4);
        tg_function_free(opt);
    }
    tg_graph_free(g);
}

/* ---- BPTT: scan_sum_dot, scan_pull_out, scan_drop_outputs,
 * slice_product_reuse, scan_push_seq at a tap other than 0 ---- */

/* The RNN with cost = mean(h * y) and its gradients (WRT is replaced by
 * the list of variables). */
static const char *BPTT_TAIL = J(
    {"op": "mul", "inputs": ["h", "y"], "outputs": ["hy"]},
    {"op": "mean", "inputs": ["hy"], "outputs": ["cost"]},
    {"op": "grad", "inputs": ["cost", WRT], "outputs": [GOUT]}],
    "functions": {"main": {"inputs": ["x", "h0", "W", "U", "b", "y"], "outputs": ["cost", GOUT]}}});

/* BPTT by hand: the gradients of mean(h * y) for W (3x4), U (4x4), b (4)
 * and x (5x2x3). */
static void bptt_by_hand(tg_array *const *in, double *gW, double *gU, double *gb, double *gx) {
    const double *x = tg_array_data(in[0]), *W = tg_array_data(in[2]), *U = tg_array_data(in[3]),
                 *y = tg_array_data(in[5]);
    double h[6][8];
    rnn_by_hand((const tg_array *const *)in, false, 5, &h[1][0]);
    memcpy(h[0], tg_array_data(in[1]), sizeof h[0]);
    memset(gW, 0, sizeof(double) * 12);
    memset(gU, 0, sizeof(double) * 16);
    memset(gb, 0, sizeof(double) * 4);
    memset(gx, 0, sizeof(double) * 30);
    double carry[8] = {0};
    for (int t = 4; t >= 0; t--) {
        double d[8];
        for (int i = 0; i < 8; i++) {
            double dh = y[t * 8 + i] / 40.0 + carry[i];
            d[i] = dh * (1 - h[t + 1][i] * h[t + 1][i]);
        }
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) {
                gb[j] += d[r * 4 + j];
                for (int k = 0; k < 3; k++) gW[k * 4 + j] += x[t * 6 + r * 3 + k] * d[r * 4 + j];
                for (int k = 0; k < 4; k++) gU[k * 4 + j] += h[t][r * 4 + k] * d[r * 4 + j];
            }
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < 4; k++) {
                carry[r * 4 + k] = 0;
                for (int j = 0; j < 4; j++) carry[r * 4 + k] += d[r * 4 + j] * U[k * 4 + j];
            }
            for (int k = 0; k < 3; k++)
                for (int j = 0; j < 4; j++) gx[t * 6 + r * 3 + k] += d[r * 4 + j] * W[k * 4 + j];
        }
    }
}

/* back: the RNN reads x backwards (go_backwards), and its gradient's
 * reverse loop runs forwards. */
static void run_bptt(bool with_x, bool back) {
    char *json = malloc(strlen(RNN) + strlen(BPTT_TAIL) + 256);
    strcpy(json, RNN);
    memcpy(strstr(json, "GOBACK"), back ? "true  " : "false ", 6);
    /* y joins the variables. */
    char *v = strstr(json, "{\"id\": \"b\"");
    memmove(v + 63, v, strlen(v) + 1);
    memcpy(v, "{\"id\": \"y\", \"type\": {\"dtype\": \"float64\", \"shape\": [5, 2, 4]}}, ", 63);
    strcpy(strstr(json, "}}}]") + 3, ", ");
    const char *wrt = with_x ? "\"W\", \"U\", \"b\", \"x\"" : "\"W\", \"U\", \"b\"";
    const char *gout = with_x ? "\"gW\", \"gU\", \"gb\", \"gx\"" : "\"gW\", \"gU\", \"gb\"";
    char *tail = strdup(BPTT_TAIL);
    size_t len = strlen(json);
    for (const char *p = tail; *p;) {
        if (!strncmp(p, "WRT", 3)) {
            strcpy(json + len, wrt);
            len += strlen(wrt);
            p += 3;
        } else if (!strncmp(p, "GOUT", 4)) {
            strcpy(json + len, gout);
            len += strlen(gout);
            p += 4;
        } else {
            json[len++] = *p++;
        }
        json[len] = 0;
    }
    free(tail);
    tg_graph *g = tu_load(json);
    free(json);
    tg_array *in[6];
    tg_function *probe = compile(g, "none");
    inputs_for(probe, in, -1, 1);
    tg_function_free(probe);
    tg_function *opt = check_against_none(g, "scan_sum_dot", 2, in);
    /* The weights' gradients, accumulated in the reverse loop, are sums
     * of per-step products, then one product each outside. */
    assert_true(fired(opt, "scan_acc_sum") >= 2);
    assert_true(fired(opt, "scan_drop_recurrent") >= 1); /* both, at once */
    /* The products outside read the rows of h_{t-1} and x_t from the
     * sequences the reverse loop reads (in the order of its steps, which
     * runs forwards when the RNN reads x backwards), not from stacks it
     * copied. */
    assert_int_equal(scan_passthrough_outputs(opt), 0);
    if (!back) {
        /* The backward loop's products move out; its sequences are read
         * at tap 1; its x-projection is the forward one's. */
        assert_true(pushed_out(opt) >= 3);
        assert_true(fired(opt, "slice_product_reuse") >= 1);
        /* The reverse loop takes h_{t-1} @ U from the forward loop. */
        assert_true(fired(opt, "scan_reuse_step_product") >= 1);
        if (with_x)
            assert_true(fired(opt, "scan_pull_out") >= 1);
        else
            assert_true(fired(opt, "scan_drop_outputs") >= 1);
    }
    tg_array *out[5];
    call(opt, in, out);
    double gW[12], gU[16], gb[4], gx[30];
    if (!back) {
        bptt_by_hand(in, gW, gU, gb, gx);
    } else {
        /* the loop over x backwards is the loop over x reversed: the
         * weights' gradients are that loop's, x's come back reversed */
        tg_array *rin[6];
        memcpy(rin, in, sizeof rin);
        const double *x = tg_array_data(in[0]);
        double xr[30], gxr[30];
        for (int t = 0; t < 5; t++) memcpy(xr + t * 6, x + (4 - t) * 6, sizeof(double) * 6);
        rin[0] = tu_f64(3, (int64_t[]){5, 2, 3}, xr);
        bptt_by_hand(rin, gW, gU, gb, gxr);
        tg_array_free(rin[0]);
        for (int t = 0; t < 5; t++) memcpy(gx + t * 6, gxr + (4 - t) * 6, sizeof(double) * 6);
    }
    tg_array *w[4] = {tu_f64(2, (int64_t[]){3, 4}, gW), tu_f64(2, (int64_t[]){4, 4}, gU),
                      tu_f64(1, (int64_t[]){4}, gb), tu_f64(3, (int64_t[]){5, 2, 3}, gx)};
    int nout = with_x ? 4 : 3;
    for (int k = 0; k < nout; k++) tu_assert_close(out[k + 1], w[k], 1e-10, 1e-12);
    free_all(w, 4);
    free_all(out, nout + 1);
    free_all(in, 6);
    tg_function_free(opt);
    tg_graph_free(g);
}

static void test_bptt_weights(void **state) {
    (void)state;
    run_bptt(false, false);
    run_bptt(false, true);
}

static void test_bptt_with_inputs(void **state) {
    (void)state;
    run_bptt(true, false);
    run_bptt(true, true);
}

/* ---- scan_sum_dot over a sequence's rows ---- */

/* P = sum over the steps of x_t^T b_t and Q = sum of b_t^T x_t, b_t =
 * y_t * h_{t-1} and h_t = tanh(b_t + sum(x_{t-1})), with n_steps = 4 over
 * sequences of 6 rows: x read at taps [-1, 0], y at [0]. The products
 * outside read x's rows as the loop does (rows 1-4, or 4 down to 1
 * backwards), from x itself. */
static const char *SUMDOT_SEQ = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "n", "type": {"dtype": "int64", "shape": []}},
                  {"id": "x", "type": {"dtype": "float64", "shape": [6, 2, 3]}},
                  {"id": "y", "type": {"dtype": "float64", "shape": [6, 2, 4]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [2, 4]}}],
    "nodes": [{"op": "scan", "inputs": ["n", "x", "y", "h0"], "outputs": ["H", "P", "Q"],
               "attrs": {"n_sequences": 2, "sequence_taps": [[-1, 0], [0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 2, "n_non_sequences": 0,
                         "has_n_steps": true, "has_until": false, "go_backwards": GOBACK,
                         "body": {"variables": [{"id": "b.xm", "type": {"dtype": "float64", "shape": [2, 3]}},
                                                {"id": "b.x", "type": {"dtype": "float64", "shape": [2, 3]}},
                                                {"id": "b.y", "type": {"dtype": "float64", "shape": [2, 4]}},
                                                {"id": "b.h", "type": {"dtype": "float64", "shape": [2, 4]}}],
                                  "nodes": [{"op": "mul", "inputs": ["b.y", "b.h"], "outputs": ["b.b"]},
                                            {"op": "sum", "inputs": ["b.xm"], "outputs": ["b.sx"]},
                                            {"op": "add", "inputs": ["b.b", "b.sx"], "outputs": ["b.s"]},
                                            {"op": "tanh", "inputs": ["b.s"], "outputs": ["b.h_t"]},
                                            {"op": "transpose", "inputs": ["b.x"], "outputs": ["b.xT"]},
                                            {"op": "dot", "inputs": ["b.xT", "b.b"], "outputs": ["b.p"]},
                                            {"op": "transpose", "inputs": ["b.b"], "outputs": ["b.bT"]},
                                            {"op": "dot", "inputs": ["b.bT", "b.x"], "outputs": ["b.q"]}],
                                  "inputs": ["b.xm", "b.x", "b.y", "b.h"], "outputs": ["b.h_t", "b.p", "b.q"]}}},
              {"op": "sum", "inputs": ["P"], "outputs": ["S"], "attrs": {"axis": 0}},
              {"op": "sum", "inputs": ["Q"], "outputs": ["R"], "attrs": {"axis": 0}}],
    "functions": {"main": {"inputs": ["n", "x", "y", "h0"], "outputs": ["S", "H", "R"]}}});

static void run_sum_dot_seq(bool back) {
    char *json = strdup(SUMDOT_SEQ);
    memcpy(strstr(json, "GOBACK"), back ? "true  " : "false ", 6);
    tg_graph *g = tu_load(json);
    free(json);
    double *x = fill(36, -1, 1, 5), *y = fill(48, -1, 1, 6), *h0 = fill(8, -1, 1, 7);
    double h[8], S[12] = {0}, R[12] = {0}, H[32];
    memcpy(h, h0, sizeof h);
    for (int t = 0; t < 4; t++) {
        /* ops/scan.c: row t - min(taps) + tap, from the end backwards */
        int rm = back ? 5 - t : t, rc = back ? 4 - t : t + 1, ry = back ? 5 - t : t;
        double sx = 0, b[8];
        for (int i = 0; i < 6; i++) sx += x[rm * 6 + i];
        for (int i = 0; i < 8; i++) b[i] = y[ry * 8 + i] * h[i];
        for (int k = 0; k < 3; k++)
            for (int j = 0; j < 4; j++)
                for (int r = 0; r < 2; r++) {
                    S[k * 4 + j] += x[rc * 6 + r * 3 + k] * b[r * 4 + j];
                    R[j * 3 + k] += b[r * 4 + j] * x[rc * 6 + r * 3 + k];
                }
        for (int i = 0; i < 8; i++) H[t * 8 + i] = h[i] = tanh(b[i] + sx);
    }
    int64_t four = 4;
    tg_array *in[4] = {tg_array_new_from(TG_INT64, 0, NULL, &four), tu_f64(3, (int64_t[]){6, 2, 3}, x),
                       tu_f64(3, (int64_t[]){6, 2, 4}, y), tu_f64(2, (int64_t[]){2, 4}, h0)};
    tg_array *ws = tu_f64(2, (int64_t[]){3, 4}, S), *wh = tu_f64(3, (int64_t[]){4, 2, 4}, H),
             *wr = tu_f64(2, (int64_t[]){4, 3}, R);
    for (int ps = 0; ps < 2; ps++) {
        tg_function *f = compile(g, ps ? "fast_run" : "none");
        if (ps) {
            assert_int_equal(fired(f, "scan_sum_dot"), 2);
            assert_int_equal(scan_passthrough_outputs(f), 0);
        }
        tg_array *out[3];
        call(f, in, out);
        tu_assert_close(out[0], ws, 1e-12, 1e-12);
        tu_assert_close(out[1], wh, 1e-12, 1e-12);
        tu_assert_close(out[2], wr, 1e-12, 1e-12);
        free_all(out, 3);
        tg_function_free(f);
    }
    free_all(in, 4);
    tg_array_free(ws);
    tg_array_free(wh);
    tg_array_free(wr);
    free(x);
    free(y);
    free(h0);
    tg_graph_free(g);
}

static void test_sum_dot_seq(void **state) {
    (void)state;
    run_sum_dot_seq(false);
}

static void test_sum_dot_seq_backwards(void **state) {
    (void)state;
    run_sum_dot_seq(true);
}

/* ---- BPTT over 0 steps ---- */

/* h_t = tanh(x_t Wx + h_{t-1} Wh), batch 2, in 3, hidden 4, cost =
 * sum(h^2), and its gradients; the body's (and x's, h0's, the weights')
 * shapes are written %s: static, or not known. */
static const char *BPTT0 = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, %s, %s]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [%s, %s]}},
                  {"id": "Wx", "type": {"dtype": "float64", "shape": [%s, %s]}},
                  {"id": "Wh", "type": {"dtype": "float64", "shape": [%s, %s]}}],
    "nodes": [{"op": "scan", "inputs": ["x", "h0", "Wx", "Wh"], "outputs": ["H"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 2,
                         "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [%s, %s]}},
                                                {"id": "b.h", "type": {"dtype": "float64", "shape": [%s, %s]}},
                                                {"id": "b.Wx", "type": {"dtype": "float64", "shape": [%s, %s]}},
                                                {"id": "b.Wh", "type": {"dtype": "float64", "shape": [%s, %s]}}],
                                  "nodes": [{"op": "dot", "inputs": ["b.x", "b.Wx"], "outputs": ["b.xw"]},
                                            {"op": "dot", "inputs": ["b.h", "b.Wh"], "outputs": ["b.hw"]},
                                            {"op": "add", "inputs": ["b.xw", "b.hw"], "outputs": ["b.pre"]},
                                            {"op": "tanh", "inputs": ["b.pre"], "outputs": ["b.ht"]}],
                                  "inputs": ["b.x", "b.h", "b.Wx", "b.Wh"], "outputs": ["b.ht"]}}},
              {"op": "sqr", "inputs": ["H"], "outputs": ["H2"]},
              {"op": "sum", "inputs": ["H2"], "outputs": ["cost"]},
              {"op": "grad", "inputs": ["cost", "x", "h0", "Wx", "Wh"], "outputs": ["gx", "gh0", "gWx", "gWh"]}],
    "functions": {"main": {"inputs": ["x", "h0", "Wx", "Wh"], "outputs": ["gx", "gh0", "gWx", "gWh"]}}});

/* The gradients by hand over T steps (gx T*2*3, gh0 2*4, gWx 3*4, gWh 4*4). */
static void bptt0_by_hand(int T, const double *x, const double *h0, const double *Wx, const double *Wh,
                          double *gx, double *gh0, double *gWx, double *gWh) {
    double h[5][8];
    memcpy(h[0], h0, sizeof h[0]);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) {
                double a = 0;
                for (int k = 0; k < 3; k++) a += x[t * 6 + r * 3 + k] * Wx[k * 4 + j];
                for (int k = 0; k < 4; k++) a += h[t][r * 4 + k] * Wh[k * 4 + j];
                h[t + 1][r * 4 + j] = tanh(a);
            }
    memset(gx, 0, sizeof(double) * 6 * (size_t)(T ? T : 1));
    memset(gWx, 0, sizeof(double) * 12);
    memset(gWh, 0, sizeof(double) * 16);
    double carry[8] = {0};
    for (int t = T - 1; t >= 0; t--) {
        double d[8];
        for (int i = 0; i < 8; i++) d[i] = (2 * h[t + 1][i] + carry[i]) * (1 - h[t + 1][i] * h[t + 1][i]);
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) {
                for (int k = 0; k < 3; k++) gWx[k * 4 + j] += x[t * 6 + r * 3 + k] * d[r * 4 + j];
                for (int k = 0; k < 4; k++) gWh[k * 4 + j] += h[t][r * 4 + k] * d[r * 4 + j];
            }
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < 3; k++)
                for (int j = 0; j < 4; j++) gx[t * 6 + r * 3 + k] += d[r * 4 + j] * Wx[k * 4 + j];
            for (int k = 0; k < 4; k++) {
                carry[r * 4 + k] = 0;
                for (int j = 0; j < 4; j++) carry[r * 4 + k] += d[r * 4 + j] * Wh[k * 4 + j];
            }
        }
    }
    memcpy(gh0, carry, sizeof carry);
}

/* fast_run and none against the gradients by hand over 3 steps and 0
 * (zeros of the inputs' shapes). Static shapes: the weights' gradients
 * are one product each outside (scan_acc_sum, scan_sum_dot), the input's
 * too (scan_pull_out), and the reverse loop takes h_{t-1} Wh from the
 * forward loop (scan_reuse_step_product), whose stack of products is
 * (0, 2, 4) after 0 steps. Shapes not known: scan_pull_out declines
 * (the stack of delta_t would be (0, 0), which a (4, 3) Wx^T does not
 * multiply), as scan_acc_sum does (the increments' shapes are not
 * known), and the products x_t Wx and h_{t-1} Wh stay in the loops
 * (scan_push_seq: a loop that may run no step never multiplies
 * operands whose contracted lengths may differ), so
 * scan_reuse_step_product has no product to take: an h0 of 5 columns
 * over 0 steps gives zero gradients, where fast_run failed ("shapes
 * (1, 2, 5) and (4, 4) not aligned"). */
static void run_bptt0(bool known) {
    const char *b = known ? "2" : "null", *i = known ? "3" : "null", *hd = known ? "4" : "null";
    char json[8192];
    snprintf(json, sizeof json, BPTT0, b, i, b, hd, i, hd, hd, hd, b, i, b, hd, i, hd, hd, hd);
    tg_graph *g = tu_load(json);
    tg_function *fs[2] = {compile(g, "none"), compile(g, "fast_run")};
    assert_int_equal(fired(fs[1], "scan_reuse_step_product") >= 1, known);
    assert_int_equal(fired(fs[1], "scan_pull_out") > 0, known);
    assert_int_equal(fired(fs[1], "scan_acc_sum") >= 2, known);
    double *x = fill(18, -1, 1, 1), *h0 = fill(8, -1, 1, 2), *Wx = fill(12, -0.5, 0.5, 3),
           *Wh = fill(16, -0.5, 0.5, 4);
    for (int T = 3; T >= 0; T -= 3) {
        double gx[18], gh0[8], gWx[12], gWh[16];
        bptt0_by_hand(T, x, h0, Wx, Wh, gx, gh0, gWx, gWh);
        tg_array *in[4] = {tu_f64(3, (int64_t[]){T, 2, 3}, x), tu_f64(2, (int64_t[]){2, 4}, h0),
                           tu_f64(2, (int64_t[]){3, 4}, Wx), tu_f64(2, (int64_t[]){4, 4}, Wh)};
        tg_array *w[4] = {tu_f64(3, (int64_t[]){T, 2, 3}, gx), tu_f64(2, (int64_t[]){2, 4}, gh0),
                          tu_f64(2, (int64_t[]){3, 4}, gWx), tu_f64(2, (int64_t[]){4, 4}, gWh)};
        for (int f = 0; f < 2; f++) {
            tg_array *out[4];
            call(fs[f], in, out);
            for (int k = 0; k < 4; k++) tu_assert_close(out[k], w[k], 1e-10, 1e-12);
            free_all(out, 4);
        }
        free_all(in, 4);
        free_all(w, 4);
    }
    if (!known) { /* h0 (2, 5) against Wh (4, 4), over 0 steps: zeros */
        double zero[20] = {0}, h05[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        tg_array *in[4] = {tu_f64(3, (int64_t[]){0, 2, 3}, x), tu_f64(2, (int64_t[]){2, 5}, h05),
                           tu_f64(2, (int64_t[]){3, 4}, Wx), tu_f64(2, (int64_t[]){4, 4}, Wh)};
        tg_array *w[4] = {tu_f64(3, (int64_t[]){0, 2, 3}, zero), tu_f64(2, (int64_t[]){2, 5}, zero),
                          tu_f64(2, (int64_t[]){3, 4}, zero), tu_f64(2, (int64_t[]){4, 4}, zero)};
        for (int f = 0; f < 2; f++) {
            tg_array *out[4];
            call(fs[f], in, out);
            for (int k = 0; k < 4; k++) tu_assert_close(out[k], w[k], 0, 0);
            free_all(out, 4);
        }
        free_all(in, 4);
        free_all(w, 4);
    }
    free(x);
    free(h0);
    free(Wx);
    free(Wh);
    tg_function_free(fs[0]);
    tg_function_free(fs[1]);
    tg_graph_free(g);
}

static void test_bptt_zero_steps(void **state) {
    (void)state;
    run_bptt0(true);
}

static void test_bptt_zero_steps_unknown(void **state) {
    (void)state;
    run_bptt0(false);
}

/* ---- scan_acc_sum on a hand-written accumulator ---- */

/* acc_t = acc_{t-1} + x_t from alloc(0, 3), read as sum(A[-1:], axis=0);
 * XW (the rows' length) is replaced by 3 or by 1 (an increment that
 * broadcasts into the accumulator). */
static const char *ACC = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, XW]}}],
    "nodes": [{"op": "alloc", "inputs": [{"value": 0.0}, {"value": 3}], "outputs": ["z"]},
              {"op": "scan", "inputs": ["x", "z"], "outputs": ["A"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                         "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [XW]}},
                                                {"id": "b.acc", "type": {"dtype": "float64", "shape": [3]}}],
                                  "nodes": [{"op": "add", "inputs": ["b.acc", "b.x"], "outputs": ["b.acc_t"]}],
                                  "inputs": ["b.x", "b.acc"], "outputs": ["b.acc_t"]}}},
              {"op": "subtensor", "inputs": ["A"], "outputs": ["Al"], "attrs": {"index": [{"start": -1}]}},
              {"op": "sum", "inputs": ["Al"], "outputs": ["s"], "attrs": {"axis": 0}}],
    "functions": {"main": {"inputs": ["x"], "outputs": ["s"]}}});

/* The sum over T steps of rows of length w (3, or 1 broadcast), by hand,
 * under none and fast_run; 0 steps give zeros(3). */
static void run_acc(const char *xw, bool fires) {
    char *json = strdup(ACC);
    for (char *q; (q = strstr(json, "XW"));) memcpy(q, xw, 2);
    tg_graph *g = tu_load(json);
    free(json);
    int64_t w = xw[0] - '0';
    const char *presets[] = {"none", "fast_run"};
    for (int ps = 0; ps < 2; ps++) {
        tg_function *f = compile(g, presets[ps]);
        if (ps) assert_int_equal(fired(f, "scan_acc_sum") > 0, fires);
        for (int64_t T = 0; T <= 4; T += 4) {
            double *x = fill(T * w, -1, 1, (int)T), want[3] = {0, 0, 0};
            for (int64_t t = 0; t < T; t++)
                for (int i = 0; i < 3; i++) want[i] += x[t * w + (w == 1 ? 0 : i)];
            tg_array *in[1] = {tu_f64(2, (int64_t[]){T, w}, x)}, *out[1];
            call(f, in, out);
            tg_array *wa = tu_f64(1, (int64_t[]){3}, want);
            tu_assert_close(out[0], wa, 1e-12, 1e-12);
            tg_array_free(wa);
            tg_array_free(out[0]);
            tg_array_free(in[0]);
            free(x);
        }
        tg_function_free(f);
    }
    tg_graph_free(g);
}

/* The increment of the accumulator's static shape: the sum of the
 * stacked increments, zeros(3) after 0 steps (E's static per-step
 * shape). */
static void test_acc_sum(void **state) {
    (void)state;
    run_acc("3 ", true);
}

/* Rows of length 1 broadcast into the accumulator of 3: the rewrite
 * declines (sum(E, axis=0) would have E's length 1), and the loop's sum
 * is each row added to every element. */
static void test_acc_sum_broadcast(void **state) {
    (void)state;
    run_acc("1 ", false);
}

/* ---- scan_merge_outputs ---- */

/* c_t = c_{t-1} + x_t and y_t = c_t * x_t stacked three times: twice as
 * the body variable, once through an identity (as grad writes outputs).
 * The three stacks are one output of the optimized loop. */
static const char *DUP_OUT = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, 2]}},
                  {"id": "c0", "type": {"dtype": "float64", "shape": [2]}}],
    "nodes": [{"op": "scan", "inputs": ["x", "c0"], "outputs": ["C", "Y1", "Y2", "Y3"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 3, "n_non_sequences": 0,
                         "has_n_steps": false, "has_until": false, "go_backwards": GOBACK,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.c", "type": {"dtype": "float64", "shape": [2]}}],
                                  "nodes": [{"op": "add", "inputs": ["b.c", "b.x"], "outputs": ["b.c_t"]},
                                            {"op": "mul", "inputs": ["b.c_t", "b.x"], "outputs": ["b.y"]},
                                            {"op": "identity", "inputs": ["b.y"], "outputs": ["b.y_id"]}],
                                  "inputs": ["b.x", "b.c"], "outputs": ["b.c_t", "b.y", "b.y", "b.y_id"]}}},
              {"op": "sum", "inputs": ["Y2"], "outputs": ["s2"]}],
    "functions": {"main": {"inputs": ["x", "c0"], "outputs": ["C", "Y1", "s2", "Y3"]}}});

static void run_merge_outputs(bool back) {
    char *json = strdup(DUP_OUT);
    memcpy(strstr(json, "GOBACK"), back ? "true  " : "false ", 6);
    tg_graph *g = tu_load(json);
    free(json);
    for (int64_t T = 0; T <= 5; T += 5) {
        double *x = fill(T * 2, -1, 1, 3), c0[2] = {0.5, -0.25}, C[10], Y[10], s2 = 0;
        double c[2] = {c0[0], c0[1]};
        for (int64_t i = 0; i < T; i++) {
            int64_t t = back ? T - 1 - i : i; /* the row step i reads */
            for (int k = 0; k < 2; k++) {
                c[k] += x[t * 2 + k];
                C[i * 2 + k] = c[k];
                Y[i * 2 + k] = c[k] * x[t * 2 + k];
                s2 += Y[i * 2 + k];
            }
        }
        tg_array *in[2] = {tu_f64(2, (int64_t[]){T, 2}, x), tu_f64(1, (int64_t[]){2}, c0)};
        tg_array *wc = tu_f64(2, (int64_t[]){T, 2}, C), *wy = tu_f64(2, (int64_t[]){T, 2}, Y),
                 *ws = tu_f64(0, NULL, &s2);
        for (int ps = 0; ps < 2; ps++) {
            tg_function *f = compile(g, ps ? "fast_run" : "none");
            if (ps) {
                assert_int_equal(fired(f, "scan_merge_outputs"), 1);
                /* one scan left, with two outputs: C and the one stack of y */
                int scans = 0;
                for (int k = 0; k < f->nsched; k++)
                    if (!strcmp(f->sched[k].node->op->name, "scan")) {
                        scans++;
                        assert_int_equal(f->sched[k].node->nout, 2);
                    }
                assert_int_equal(scans, 1);
            }
            tg_array *out[4];
            call(f, in, out);
            tu_assert_close(out[0], wc, 1e-12, 1e-12);
            tu_assert_close(out[1], wy, 1e-12, 1e-12);
            tu_assert_close(out[2], ws, 1e-12, 1e-12);
            tu_assert_close(out[3], wy, 1e-12, 1e-12);
            free_all(out, 4);
            tg_function_free(f);
        }
        free_all(in, 2);
        tg_array_free(wc);
        tg_array_free(wy);
        tg_array_free(ws);
        free(x);
    }
    tg_graph_free(g);
}

static void test_merge_outputs(void **state) {
    (void)state;
    run_merge_outputs(false);
}

static void test_merge_outputs_backwards(void **state) {
    (void)state;
    run_merge_outputs(true);
}

/* ---- scan_inline ---- */

/* One step (n_steps the constant 1) with past, present and future taps
 * of a sequence read backwards, two taps of a recurrent output, and a
 * non-recurrent output. */
static const char *ONE = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [5, 2]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [3, 2]}},
                  {"id": "w", "type": {"dtype": "float64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": [{"value": 1}, "x", "h0", "w"], "outputs": ["h", "z"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[-2, 0, 1]], "n_recurrent": 1,
                         "output_taps": [[-1, -3]], "n_nonrecurrent": 1, "n_non_sequences": 1,
                         "has_n_steps": true, "has_until": false, "go_backwards": true,
                         "body": {"variables": [
                             {"id": "b.xm2", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.x0", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.xp1", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.h1", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.h3", "type": {"dtype": "float64", "shape": [2]}},
                             {"id": "b.w", "type": {"dtype": "float64", "shape": []}}],
                           "nodes": [{"op": "mul", "inputs": ["b.h1", {"value": 0.5}], "outputs": ["b.a"]},
                                     {"op": "mul", "inputs": ["b.xm2", "b.w"], "outputs": ["b.c"]},
                                     {"op": "add", "inputs": ["b.a", "b.h3", "b.c", "b.xp1"], "outputs": ["b.h"]},
                                     {"op": "mul", "inputs": ["b.h", "b.x0"], "outputs": ["b.z"]}],
                           "inputs": ["b.xm2", "b.x0", "b.xp1", "b.h1", "b.h3", "b.w"],
                           "outputs": ["b.h", "b.z"]}}}],
    "functions": {"main": {"inputs": ["x", "h0", "w"], "outputs": ["h", "z"]}}});

static void test_inline(void **state) {
    (void)state;
    tg_graph *g = tu_load(ONE);
    tg_array *in[3];
    tg_function *probe = compile(g, "none");
    inputs_for(probe, in, -1, 1);
    tg_function_free(probe);
    tg_function *opt = check_against_none(g, "scan_inline", 1, in);
    assert_int_equal(count_op(opt, "scan"), 0);
    /* By hand: read backwards, step 0 reads rows 4-0 (tap -2 -> x[4]),
     * 4-2 (tap 0 -> x[2]) and 4-3 (tap 1 -> x[1]); h[-1] is h0[2], h[-3]
     * h0[0]. */
    const double *x = tg_array_data(in[0]), *h0 = tg_array_data(in[1]);
    double w = tg_array_get_flat(in[2], 0), wh[2], wz[2];
    for (int i = 0; i < 2; i++) {
        wh[i] = 0.5 * h0[4 + i] + h0[i] + x[8 + i] * w + x[2 + i];
        wz[i] = wh[i] * x[4 + i];
    }
    tg_array *out[2];
    call(opt, in, out);
    tg_array *a = tu_f64(2, (int64_t[]){1, 2}, wh), *b = tu_f64(2, (int64_t[]){1, 2}, wz);
    tu_assert_close(out[0], a, 1e-12, 1e-12);
    tu_assert_close(out[1], b, 1e-12, 1e-12);
    tg_array_free(a);
    tg_array_free(b);
    free_all(out, 2);
    free_all(in, 3);
    tg_function_free(opt);
    tg_graph_free(g);
}

/* ONE with h0's or x's static shape changed (from -> to), compiled with
 * fast_run: scan_inline declines, and a call on inputs of those shapes
 * gives the scan's own error. */
static void inline_declines(const char *from, const char *to, const char *msg) {
    const char *q = strstr(ONE, from);
    assert_non_null(q);
    char *json = malloc(strlen(ONE) + strlen(to) + 1);
    sprintf(json, "%.*s%s%s", (int)(q - ONE), ONE, to, q + strlen(from));
    tg_graph *g = tu_load(json);
    free(json);
    tg_function *opt = compile(g, "fast_run");
    assert_int_equal(fired(opt, "scan_inline"), 0);
    assert_int_equal(count_op(opt, "scan"), 1);
    int64_t xr = strstr(to, "x\"") ? 3 : 5, hr = strstr(to, "h0") ? 4 : 3;
    double d[10] = {0}, w = 0.5;
    tg_array *in[3] = {tu_f64(2, (int64_t[]){xr, 2}, d), tu_f64(2, (int64_t[]){hr, 2}, d), tu_f64(0, NULL, &w)};
    tg_array *out[2] = {0};
    tg_ctx *ctx = tg_ctx_new();
    assert_int_not_equal(tg_function_call(opt, in, out, ctx), 0);
    if (!strstr(tg_ctx_message(ctx), msg)) fail_msg("got: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    free_all(in, 3);
    tg_function_free(opt);
    tg_graph_free(g);
}

/* The initial state must have exactly the rows the taps reach (3 for
 * taps [-1, -3]), statically (a static count that differs is a load
 * error): with its rows not known the loop and its check stay, and 4 rows
 * are an error, not rows 1 to 3 read as steps -3 to -1. A sequence
 * statically too short keeps the loop too. */
static void test_inline_declines(void **state) {
    (void)state;
    inline_declines("\"h0\", \"type\": {\"dtype\": \"float64\", \"shape\": [3, 2]",
                    "\"h0\", \"type\": {\"dtype\": \"float64\", \"shape\": [null, 2]",
                    "initial state 0 ('h0') has 4 rows, but the taps reach 3 steps back");
    /* x statically 3 rows, for taps [-2, 0, 1] that need 4: the scan's
     * message, not a row out of range. */
    inline_declines("\"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [5, 2]",
                    "\"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [3, 2]",
                    "sequence 0 ('x') has 3 rows");
}

/* ---- a sequence too short for n_steps, every preset ---- */

/* Each preset the tests below compile with: the loop as written, and the
 * optimizers whose scan rewrites read rows themselves (scan_inline), move
 * a sequence's reader out (scan_push_seq) or merge loops (scan_merge). */
static const char *const PRESETS[] = {"none", "fast_compile", "fast_run"};

/* f(in) fails with a message holding `want` (the scan's one line). */
static void call_fails(tg_function *f, tg_array *const *in, const char *want) {
    tg_array *out[4] = {0};
    tg_ctx *ctx = tg_ctx_new();
    assert_int_not_equal(tg_function_call(f, in, out, ctx), 0);
    const char *msg = tg_ctx_message(ctx);
    if (!strstr(msg, want) || !strstr(msg, "(scan -> ") || strchr(msg, '\n'))
        fail_msg("want one line naming the scan node with '%s', got: %s", want, msg);
    tg_ctx_free(ctx);
}

/* ONE (taps [-2, 0, 1], read backwards, n_steps the constant 1) with x of
 * unknown length: scan_inline declines (its subtensors would say only
 * "index out of range"), so every preset gives the scan's error for 3
 * rows, and reads the last rows of 5 or 7 (step 0 reads rows L-1, L-3,
 * L-4 for taps -2, 0, 1). */
static void test_short_inline(void **state) {
    (void)state;
    const char *from = "\"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [5, 2]";
    const char *to = "\"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [null, 2]";
    const char *q = strstr(ONE, from);
    assert_non_null(q);
    char *json = malloc(strlen(ONE) + strlen(to) + 1);
    sprintf(json, "%.*s%s%s", (int)(q - ONE), ONE, to, q + strlen(from));
    tg_graph *g = tu_load(json);
    free(json);
    double h0[6] = {1, 2, 3, 4, 5, 6}, w = 0.5, x[14];
    for (int i = 0; i < 14; i++) x[i] = 10 + i;
    for (int pr = 0; pr < 3; pr++) {
        tg_function *f = compile(g, PRESETS[pr]);
        assert_int_equal(fired(f, "scan_inline"), 0);
        for (int64_t L = 3; L <= 7; L += 2) {
            tg_array *in[3] = {tu_f64(2, (int64_t[]){L, 2}, x), tu_f64(2, (int64_t[]){3, 2}, h0),
                               tu_f64(0, NULL, &w)};
            if (L == 3) {
                call_fails(f, in, "sequence 0 ('x') has 3 rows, but 1 step with taps [-2, 0, 1] needs 4");
            } else {
                double wh[2], wz[2];
                for (int i = 0; i < 2; i++) {
                    wh[i] = 0.5 * h0[4 + i] + h0[i] + x[(L - 1) * 2 + i] * w + x[(L - 4) * 2 + i];
                    wz[i] = wh[i] * x[(L - 3) * 2 + i];
                }
                tg_array *out[2];
                call(f, in, out);
                tg_array *a = tu_f64(2, (int64_t[]){1, 2}, wh), *b = tu_f64(2, (int64_t[]){1, 2}, wz);
                tu_assert_close(out[0], a, 1e-12, 1e-12);
                tu_assert_close(out[1], b, 1e-12, 1e-12);
                tg_array_free(a);
                tg_array_free(b);
                free_all(out, 2);
            }
            free_all(in, 3);
        }
        tg_function_free(f);
    }
    tg_graph_free(g);
}

/* One step reading x[t-2] of x (unknown length) by rows: 2 rows have a
 * row 0, which the inlined step read as x[-2] (a value, no error); the
 * scan's error instead, and x[0] + h0 from 3 rows or more. */
static const char *ONE_PAST = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null, 2]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [2]}}],
    "nodes": [{"op": "scan", "inputs": [{"value": 1}, "x", "h0"], "outputs": ["h"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[-2]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                         "has_n_steps": true, "has_until": false, "go_backwards": GOBACK,
                         "body": {"variables": [{"id": "b.x", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.h", "type": {"dtype": "float64", "shape": [2]}}],
                                  "nodes": [{"op": "add", "inputs": ["b.h", "b.x"], "outputs": ["b.o"]}],
                                  "inputs": ["b.x", "b.h"], "outputs": ["b.o"]}}}],
    "functions": {"main": {"inputs": ["x", "h0"], "outputs": ["h"]}}});

static void test_short_inline_past(void **state) {
    (void)state;
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, h0[2] = {0.25, -0.5};
    for (int back = 0; back < 2; back++) {
        char *json = strdup(ONE_PAST);
        memcpy(strstr(json, "GOBACK"), back ? "true  " : "false ", 6);
        tg_graph *g = tu_load(json);
        free(json);
        for (int pr = 0; pr < 3; pr++) {
            tg_function *f = compile(g, PRESETS[pr]);
            for (int64_t L = 1; L <= 4; L++) {
                tg_array *in[2] = {tu_f64(2, (int64_t[]){L, 2}, x), tu_f64(1, (int64_t[]){2}, h0)};
                if (L < 3) {
                    char want[128];
                    snprintf(want, sizeof want,
                             "sequence 0 ('x') has %d row%s, but 1 step with taps [-2] needs 3", (int)L,
                             L == 1 ? "" : "s");
                    call_fails(f, in, want);
                } else {
                    /* Step 0 reads row 0 (the last row, backwards). */
                    int64_t r = back ? L - 1 : 0;
                    double want[2] = {h0[0] + x[r * 2], h0[1] + x[r * 2 + 1]};
                    expect_matrix(f, in, 1, 2, want);
                }
                free_all(in, 2);
            }
            tg_function_free(f);
        }
        tg_graph_free(g);
    }
}

/* h[t] = h[t-1] + y[t] + x[t+1] * w over n steps (NSTEPS: the input n or
 * the constant 3), x and y of unknown length: scan_push_seq moves x * w
 * out, a new sequence; x stays in the loop, unread, so that a short x is
 * still named as written, at its index. */
static const char *SHORT_PUSH = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "y", "type": {"dtype": "float64", "shape": [null, 2]}},
                  {"id": "x", "type": {"dtype": "float64", "shape": [null, 2]}},
                  {"id": "h0", "type": {"dtype": "float64", "shape": [2]}},
                  {"id": "w", "type": {"dtype": "float64", "shape": [2]}},
                  {"id": "n", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": [NSTEPS, "y", "x", "h0", "w"], "outputs": ["h"],
               "attrs": {"n_sequences": 2, "sequence_taps": [[0], [1]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 1,
                         "has_n_steps": true, "has_until": false, "go_backwards": GOBACK,
                         "body": {"variables": [{"id": "b.y", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.x", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.h", "type": {"dtype": "float64", "shape": [2]}},
                                                {"id": "b.w", "type": {"dtype": "float64", "shape": [2]}}],
                                  "nodes": [{"op": "mul", "inputs": ["b.x", "b.w"], "outputs": ["b.p"]},
                                            {"op": "add", "inputs": ["b.h", "b.y", "b.p"], "outputs": ["b.o"]}],
                                  "inputs": ["b.y", "b.x", "b.h", "b.w"], "outputs": ["b.o"]}}}],
    "functions": {"main": {"inputs": ["y", "x", "h0", "w", "n"], "outputs": ["h"]}}});

/* A chain of K elementwise nodes over a sequence, h_t = h_{t-1} +
 * f(x_t), f alternating tanh and sin: the whole chain moves out in one
 * application of scan_push_seq (one at a time, each move rebuilt the
 * scan: quadratic in the body), and the body keeps the add alone. */
static char *push_chain_json(int K) {
    size_t cap = 4096 + (size_t)K * 128, n = 0;
    char *j = malloc(cap);
    n += (size_t)snprintf(j + n, cap - n,
                          "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
                          "{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [5, 3]}},"
                          "{\"id\": \"h0\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}],"
                          "\"nodes\": [{\"op\": \"scan\", \"inputs\": [\"x\", \"h0\"], \"outputs\": [\"h\"],"
                          "\"attrs\": {\"n_sequences\": 1, \"sequence_taps\": [[0]], \"n_recurrent\": 1,"
                          "\"output_taps\": [[-1]], \"n_nonrecurrent\": 0, \"n_non_sequences\": 0,"
                          "\"has_n_steps\": false, \"has_until\": false, \"body\": {\"variables\": ["
                          "{\"id\": \"b.x\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}},"
                          "{\"id\": \"b.h\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}], \"nodes\": [");
    for (int k = 1; k <= K; k++)
        n += (size_t)snprintf(j + n, cap - n, "{\"op\": \"%s\", \"inputs\": [\"%s%d\"], \"outputs\": [\"v%d\"]},",
                              k % 2 ? "tanh" : "sin", k == 1 ? "b.x" : "v", k == 1 ? 0 : k - 1, k);
    /* (the first input is "b.x0": fixed below) */
    n += (size_t)snprintf(j + n, cap - n,
                          "{\"op\": \"add\", \"inputs\": [\"b.h\", \"v%d\"], \"outputs\": [\"b.o\"]}],"
                          "\"inputs\": [\"b.x\", \"b.h\"], \"outputs\": [\"b.o\"]}}}],"
                          "\"functions\": {\"main\": {\"inputs\": [\"x\", \"h0\"], \"outputs\": [\"h\"]}}}",
                          K);
    char *fix = strstr(j, "\"b.x0\"");
    memmove(fix + 4, fix + 5, strlen(fix + 5) + 1);
    return j;
}

static void test_push_chain(void **state) {
    (void)state;
    enum { K = 40 };
    char *json = push_chain_json(K);
    tg_graph *g = tu_load(json);
    free(json);
    double x[15], h0[3] = {0.25, -0.5, 1};
    for (int i = 0; i < 15; i++) x[i] = -1 + 0.13 * i;
    tg_array *in[2] = {tu_f64(2, (int64_t[]){5, 3}, x), tu_f64(1, (int64_t[]){3}, h0)};
    tg_function *f = compile(g, "fast_run");
    assert_int_equal(fired(f, "scan_push_seq"), 1);
    assert_int_equal(scan_body_nodes(f), 1);
    double want[15], h[3] = {h0[0], h0[1], h0[2]};
    for (int t = 0; t < 5; t++)
        for (int i = 0; i < 3; i++) {
            double v = x[t * 3 + i];
            for (int k = 1; k <= K; k++) v = k % 2 ? tanh(v) : sin(v);
            want[t * 3 + i] = h[i] += v;
        }
    expect_matrix(f, in, 5, 3, want);
    tg_function_free(f);
    free_all(in, 2);
    tg_graph_free(g);
}

/* h_t = h_{t-1} * u_1 * ... * u_K written as the chain a_k = a_{k-1} *
 * u_k in a scan's body, u_k = v * c_k, c_k = 1 + k / 1000, v the
 * sequence's row x_t (seq) or the non-sequence w over n_steps 3. The
 * recurrence keeps the chain in the body; each u_k that moves out
 * becomes a sequence (scan_push_seq) or a non-sequence (scan_hoist), and
 * a scan holds at most 256 taps and 256 non-sequences. */
static char *products_json(int K, bool seq) {
    size_t cap = 8192 + (size_t)K * 256, n = 0;
    char *j = malloc(cap);
    const char *v = seq ? "b.x" : "b.w";
    n += (size_t)snprintf(
        j + n, cap - n,
        "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
        "{\"id\": \"%s\", \"type\": {\"dtype\": \"float64\", \"shape\": %s}},"
        "{\"id\": \"h0\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}],"
        "\"nodes\": [{\"op\": \"scan\", \"inputs\": %s, \"outputs\": [\"h\"],"
        "\"attrs\": {\"n_sequences\": %d, \"sequence_taps\": %s, \"n_recurrent\": 1,"
        "\"output_taps\": [[-1]], \"n_nonrecurrent\": 0, \"n_non_sequences\": %d,"
        "\"has_n_steps\": %s, \"has_until\": false, \"body\": {\"variables\": ["
        "{\"id\": \"%s\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}},"
        "{\"id\": \"a0\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}], \"nodes\": [",
        seq ? "x" : "w", seq ? "[4, 2]" : "[2]", seq ? "[\"x\", \"h0\"]" : "[{\"value\": 3}, \"h0\", \"w\"]",
        seq ? 1 : 0, seq ? "[[0]]" : "[]", seq ? 0 : 1, seq ? "false" : "true", v);
    for (int k = 1; k <= K; k++)
        n += (size_t)snprintf(j + n, cap - n,
                              "{\"op\": \"mul\", \"inputs\": [\"%s\", {\"value\": %.17g}], \"outputs\": [\"u%d\"]},"
                              "{\"op\": \"mul\", \"inputs\": [\"a%d\", \"u%d\"], \"outputs\": [\"a%d\"]}%s",
                              v, 1 + k / 1000.0, k, k - 1, k, k, k < K ? "," : "");
    n += (size_t)snprintf(j + n, cap - n,
                          "], \"inputs\": %s, \"outputs\": [\"a%d\"]}}}],"
                          "\"functions\": {\"main\": {\"inputs\": %s, \"outputs\": [\"h\"]}}}",
                          seq ? "[\"b.x\", \"a0\"]" : "[\"a0\", \"b.w\"]", K, seq ? "[\"x\", \"h0\"]" : "[\"h0\", \"w\"]");
    return j;
}

/* `rule` moves `moved` of the K = 300 products out, and the function
 * gives the products worked out here. */
static void check_products(bool seq, const char *rule, int moved) {
    enum { K = 300 };
    char *json = products_json(K, seq);
    tg_graph *g = tu_load(json);
    free(json);
    double v[8], h0[2] = {1, -1};
    int T = seq ? 4 : 3;
    for (int i = 0; i < 8; i++) v[i] = 0.97 + 0.004 * i;
    tg_array *in[2] = {seq ? tu_f64(2, (int64_t[]){4, 2}, v) : tu_f64(1, (int64_t[]){2}, h0),
                       seq ? tu_f64(1, (int64_t[]){2}, h0) : tu_f64(1, (int64_t[]){2}, v)};
    tg_function *f = compile(g, "fast_run");
    assert_true(fired(f, rule) >= 1);
    assert_int_equal(scan_body_nodes(f), 2 * K - moved);
    double want[8], h[2] = {h0[0], h0[1]};
    for (int t = 0; t < T; t++)
        for (int i = 0; i < 2; i++) {
            for (int k = 1; k <= K; k++) h[i] *= v[(seq ? t * 2 : 0) + i] * (1 + k / 1000.0);
            want[t * 2 + i] = h[i];
        }
    expect_matrix(f, in, T, 2, want);
    tg_function_free(f);
    free_all(in, 2);
    tg_graph_free(g);
}

/* Over a sequence, with x's and h's taps: 254 move, 46 stay. One at a
 * time, the 255th move built a scan of 257 taps, and the compile failed
 * ("more than 256 taps"), as it did for the gradient of a scan of a few
 * hundred nodes. */
static void test_push_limit(void **state) {
    (void)state;
    check_products(true, "scan_push_seq", 254);
}

/* Over a non-sequence, with w: 255 move, 45 stay. Before, the compile
 * failed ("attrs.n_non_sequences: 301 is out of range"). */
static void test_hoist_limit(void **state) {
    (void)state;
    check_products(false, "scan_hoist", 255);
}

static void test_short_push(void **state) {
    (void)state;
    double d[16], h0[2] = {0.5, -1}, w[2] = {2, 3};
    for (int i = 0; i < 16; i++) d[i] = 1 + i;
    for (int c = 0; c < 4; c++) {
        bool back = c & 1, cst = c & 2;
        const char *q = strstr(SHORT_PUSH, "NSTEPS");
        char *json = malloc(strlen(SHORT_PUSH) + 64);
        sprintf(json, "%.*s%s%s", (int)(q - SHORT_PUSH), SHORT_PUSH, cst ? "{\"value\": 3}" : "\"n\"", q + 6);
        memcpy(strstr(json, "GOBACK"), back ? "true  " : "false ", 6);
        tg_graph *g = tu_load(json);
        free(json);
        for (int pr = 0; pr < 3; pr++) {
            tg_function *f = compile(g, PRESETS[pr]);
            if (pr == 2) assert_true(fired(f, "scan_push_seq") >= 1);
            /* (rows of y, rows of x): x needs n + 1 = 4, y 3. */
            const int64_t lens[5][2] = {{3, 3}, {2, 4}, {3, 4}, {5, 4}, {3, 7}};
            for (int k = 0; k < 5; k++) {
                int64_t ly = lens[k][0], lx = lens[k][1], three = 3;
                tg_array *in[5] = {tu_f64(2, (int64_t[]){ly, 2}, d), tu_f64(2, (int64_t[]){lx, 2}, d),
                                   tu_f64(1, (int64_t[]){2}, h0), tu_f64(1, (int64_t[]){2}, w),
                                   tg_array_new_from(TG_INT64, 0, NULL, &three)};
                if (k == 0) {
                    call_fails(f, in, "sequence 1 ('x') has 3 rows, but 3 steps with taps [1] need 4");
                } else if (k == 1) {
                    call_fails(f, in, "sequence 0 ('y') has 2 rows, but 3 steps with taps [0] need 3");
                } else {
                    /* Longer sequences give their first rows (the last,
                     * backwards): y row t, x row t + 1. */
                    double want[6], h[2] = {h0[0], h0[1]};
                    for (int t = 0; t < 3; t++)
                        for (int i = 0; i < 2; i++) {
                            int64_t ry = back ? ly - 1 - t : t, rx = back ? lx - 1 - (t + 1) : t + 1;
                            want[t * 2 + i] = h[i] += d[ry * 2 + i] + d[rx * 2 + i] * w[i];
                        }
                    expect_matrix(f, in, 3, 2, want);
                }
                free_all(in, 5);
            }
            tg_function_free(f);
        }
        tg_graph_free(g);
    }
}

/* Two loops over the same n steps, a[t] = a[t-1] + x[t] and b[t] =
 * b[t-1] + y[t-1] + y[t+1] (taps [-1, 1]), merged by fast_run into one
 * whose sequences are x then y: a short y is named with its numbers by
 * every preset (its index is the merged loop's, 1 there). */
static const char *SHORT_MERGE = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null]}},
                  {"id": "y", "type": {"dtype": "float64", "shape": [null]}},
                  {"id": "s0", "type": {"dtype": "float64", "shape": []}},
                  {"id": "n", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["n", "x", "s0"], "outputs": ["a"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                         "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "a.x", "type": {"dtype": "float64", "shape": []}},
                                                {"id": "a.s", "type": {"dtype": "float64", "shape": []}}],
                                  "nodes": [{"op": "add", "inputs": ["a.s", "a.x"], "outputs": ["a.o"]}],
                                  "inputs": ["a.x", "a.s"], "outputs": ["a.o"]}}},
              {"op": "scan", "inputs": ["n", "y", "s0"], "outputs": ["b"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[-1, 1]], "n_recurrent": 1,
                         "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                         "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "b.ym", "type": {"dtype": "float64", "shape": []}},
                                                {"id": "b.yp", "type": {"dtype": "float64", "shape": []}},
                                                {"id": "b.s", "type": {"dtype": "float64", "shape": []}}],
                                  "nodes": [{"op": "add", "inputs": ["b.s", "b.ym", "b.yp"], "outputs": ["b.o"]}],
                                  "inputs": ["b.ym", "b.yp", "b.s"], "outputs": ["b.o"]}}}],
    "functions": {"main": {"inputs": ["x", "y", "s0", "n"], "outputs": ["a", "b"]}}});

static void test_short_merge(void **state) {
    (void)state;
    tg_graph *g = tu_load(SHORT_MERGE);
    double d[8] = {1, 2, 4, 8, 16, 32, 64, 128}, s0 = 0.5;
    for (int pr = 0; pr < 3; pr++) {
        tg_function *f = compile(g, PRESETS[pr]);
        if (pr == 2) assert_int_equal(fired(f, "scan_merge"), 1);
        /* (rows of x, rows of y), 3 steps: x needs 3, y 5. */
        const int64_t lens[4][2] = {{2, 5}, {3, 4}, {3, 5}, {6, 8}};
        for (int k = 0; k < 4; k++) {
            int64_t three = 3;
            tg_array *in[4] = {tu_f64(1, &lens[k][0], d), tu_f64(1, &lens[k][1], d), tu_f64(0, NULL, &s0),
                               tg_array_new_from(TG_INT64, 0, NULL, &three)};
            if (k == 0) {
                call_fails(f, in, "sequence 0 ('x') has 2 rows, but 3 steps with taps [0] need 3");
            } else if (k == 1) {
                call_fails(f, in, "('y') has 4 rows, but 3 steps with taps [-1, 1] need 5");
            } else {
                double wa[3], wb[3], a = s0, b = s0;
                for (int t = 0; t < 3; t++) {
                    wa[t] = a += d[t];
                    wb[t] = b += d[t] + d[t + 2];
                }
                tg_array *out[2], *ea = tu_f64(1, (int64_t[]){3}, wa), *eb = tu_f64(1, (int64_t[]){3}, wb);
                call(f, in, out);
                tu_assert_close(out[0], ea, 1e-12, 1e-12);
                tu_assert_close(out[1], eb, 1e-12, 1e-12);
                tg_array_free(ea);
                tg_array_free(eb);
                free_all(out, 2);
            }
            free_all(in, 4);
        }
        tg_function_free(f);
    }
    tg_graph_free(g);
}

/* Excluding the tag leaves every scan as written. */
static void test_exclude_tag(void **state) {
    (void)state;
    tg_graph *g = tu_load(ONE);
    const char *const exc[] = {"scan", NULL};
    tg_compile_options o = {.preset = "fast_run", .exclude = exc};
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    assert_int_equal(fired(f, "scan_inline"), 0);
    assert_int_equal(count_op(f, "scan"), 1);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* The gradient of a loop whose body is a chain through K non-sequences,
 * a_k = tanh(a_{k-1} * w_k), a_0 = h_{t-1} + x_t, h_t = a_K, taken for
 * w_1 and w_2 only: the reverse loop accumulates every w_k's gradient,
 * and the K - 2 nobody reads go. One at a time, each rebuilt the loop
 * (40 applications here; 200 non-sequences, 5.9 s of `tgc check`); now
 * all at once. Gradients against BPTT done here with loops. */
static void test_drop_recurrent_many(void **state) {
    (void)state;
    enum { K = 40, T = 4 };
    tg_str j = {0};
    tg_str_addf(&j, "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
                "{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [%d, 2]}},"
                "{\"id\": \"h0\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}",
                T);
    for (int k = 1; k <= K; k++)
        tg_str_addf(&j, ",{\"id\": \"w%d\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}",
                    k);
    tg_str_addf(&j, "], \"nodes\": [{\"op\": \"scan\", \"inputs\": [\"x\", \"h0\"");
    for (int k = 1; k <= K; k++) tg_str_addf(&j, ", \"w%d\"", k);
    tg_str_addf(&j, "], \"outputs\": [\"h\"], \"attrs\": {\"n_sequences\": 1, \"sequence_taps\": [[0]],"
                "\"n_recurrent\": 1, \"output_taps\": [[-1]], \"n_nonrecurrent\": 0,"
                "\"n_non_sequences\": %d, \"has_n_steps\": false, \"has_until\": false,"
                "\"body\": {\"variables\": [{\"id\": \"b.x\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}},"
                "{\"id\": \"b.h\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}",
                K);
    for (int k = 1; k <= K; k++)
        tg_str_addf(&j, ",{\"id\": \"b.w%d\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}", k);
    tg_str_addf(&j, "], \"nodes\": [{\"op\": \"add\", \"inputs\": [\"b.h\", \"b.x\"], \"outputs\": [\"a0\"]}");
    for (int k = 1; k <= K; k++)
        tg_str_addf(&j, ",{\"op\": \"mul\", \"inputs\": [\"a%d\", \"b.w%d\"], \"outputs\": [\"m%d\"]},"
                    "{\"op\": \"tanh\", \"inputs\": [\"m%d\"], \"outputs\": [\"a%d\"]}",
                    k - 1, k, k, k, k);
    tg_str_addf(&j, "], \"inputs\": [\"b.x\", \"b.h\"");
    for (int k = 1; k <= K; k++) tg_str_addf(&j, ", \"b.w%d\"", k);
    tg_str_addf(&j, "], \"outputs\": [\"a%d\"]}}},"
                "{\"op\": \"sum\", \"inputs\": [\"h\"], \"outputs\": [\"cost\"]},"
                "{\"op\": \"grad\", \"inputs\": [\"cost\", \"w1\", \"w2\"], \"outputs\": [\"g1\", \"g2\"]}],"
                "\"functions\": {\"main\": {\"inputs\": [\"x\", \"h0\"",
                K);
    for (int k = 1; k <= K; k++) tg_str_addf(&j, ", \"w%d\"", k);
    tg_str_addf(&j, "], \"outputs\": [\"g1\", \"g2\"]}}}");
    assert_false(j.oom);
    tg_graph *g = tu_load(j.s);
    tg_str_free(&j);
    tg_function *f = compile(g, "fast_run");
    int drops = fired(f, "scan_drop_recurrent");
    assert_true(drops >= 1 && drops <= 2); /* 40 before */

    tg_array *in[2 + K];
    double *x = fill(T * 2, -1, 1, 1), *h0 = fill(2, -0.5, 0.5, 2), *w[K];
    in[0] = tu_f64(2, (int64_t[]){T, 2}, x);
    in[1] = tu_f64(1, (int64_t[]){2}, h0);
    for (int k = 0; k < K; k++) {
        w[k] = fill(2, 0.5, 1.5, 3 + k);
        in[2 + k] = tu_f64(1, (int64_t[]){2}, w[k]);
    }
    tg_array *out[2];
    call(f, in, out);
    for (int i = 0; i < 2; i++) {
        double a[T][K + 1], gw[2] = {0, 0}, h = h0[i];
        for (int t = 0; t < T; t++) {
            a[t][0] = h + x[t * 2 + i];
            for (int k = 1; k <= K; k++) a[t][k] = tanh(a[t][k - 1] * w[k - 1][i]);
            h = a[t][K];
        }
        double gh = 0; /* d cost / d h_t through step t + 1 */
        for (int t = T - 1; t >= 0; t--) {
            double gr = 1 + gh;
            for (int k = K; k >= 1; k--) {
                double gz = gr * (1 - a[t][k] * a[t][k]);
                if (k <= 2) gw[k - 1] += gz * a[t][k - 1];
                gr = gz * w[k - 1][i];
            }
            gh = gr;
        }
        for (int o = 0; o < 2; o++)
            if (!(fabs(tg_array_get_flat(out[o], i) - gw[o]) <= 1e-12 * (1 + fabs(gw[o]))))
                fail_msg("g%d[%d]: %.17g, loops %.17g", o + 1, i, tg_array_get_flat(out[o], i), gw[o]);
    }
    free_all(out, 2);
    free_all(in, 2 + K);
    free(x);
    free(h0);
    for (int k = 0; k < K; k++) free(w[k]);
    tg_function_free(f);
    tg_graph_free(g);
}

/* ---- checks the optimized loop keeps (docs/optimizer.md) ---- */

/* f(in) fails with a message holding `want`. */
static void fails_with(tg_function *f, tg_array *const *in, const char *want, const char *what) {
    tg_array *out[4] = {0};
    tg_ctx *ctx = tg_ctx_new();
    int rc = tg_function_call(f, in, out, ctx);
    if (!rc) {
        for (int k = 0; k < tg_function_output_count(f); k++) tg_array_free(out[k]);
        tg_ctx_free(ctx);
        fail_msg("%s: the call gave values; want it to fail with '%s'", what, want);
    }
    if (!strstr(tg_ctx_message(ctx), want)) {
        char msg[TG_CTX_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("%s: want '%s', got: %s", what, want, msg);
    }
    tg_ctx_free(ctx);
}

/* The number of outputs of f's one scan node. */
static int scan_nout(const tg_function *f) {
    for (int k = 0; k < f->nsched; k++)
        if (!strcmp(f->sched[k].node->op->name, "scan")) return f->sched[k].node->nout;
    return -1;
}

/* A map over int64 x whose function reads only O1 = 2 x_t: its other
 * outputs are O2 = assert(x_t, x_t > 0), O3 = x_t // d and O4 = x_t + 1.
 * The loop as written computes them all and fails where one does;
 * scan_drop_outputs dropped O2 and O3 with O4 (fast_run gave [2, -4, 6]
 * for x = [1, -2, 3]). Now only O4 goes. */
static const char *DROP_CHECKS = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "int64", "shape": [null]}},
                  {"id": "d", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["x", "d"], "outputs": ["O1", "O2", "O3", "O4"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [],
                         "n_nonrecurrent": 4, "n_non_sequences": 1, "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "xt", "type": {"dtype": "int64", "shape": []}},
                                                {"id": "db", "type": {"dtype": "int64", "shape": []}}],
                                  "nodes": [{"op": "mul", "inputs": ["xt", {"value": 2}], "outputs": ["o1"]},
                                            {"op": "gt", "inputs": ["xt", {"value": 0}], "outputs": ["c"]},
                                            {"op": "assert", "inputs": ["xt", "c"], "outputs": ["o2"],
                                             "attrs": {"message": "x must be positive"}},
                                            {"op": "int_div", "inputs": ["xt", "db"], "outputs": ["o3"]},
                                            {"op": "add", "inputs": ["xt", {"value": 1}], "outputs": ["o4"]}],
                                  "inputs": ["xt", "db"], "outputs": ["o1", "o2", "o3", "o4"]}}}],
    "functions": {"main": {"inputs": ["x", "d"], "outputs": ["O1"]}}});

/* Two accumulators nobody reads, A_t = A_{t-1} + assert(x_t, x_t >= 0)
 * and B_t = B_{t-1} + x_t, beside D = 2 x_t, which the function returns:
 * scan_drop_recurrent dropped A with its assert (fast_run gave D where
 * -O none fails); now only B goes. */
static const char *DROP_ACC_CHECK = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [null]}},
                  {"id": "z", "type": {"dtype": "float64", "shape": []}},
                  {"id": "w", "type": {"dtype": "float64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["x", "z", "w"], "outputs": ["A", "B", "D"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 2,
                         "output_taps": [[-1], [-1]], "n_nonrecurrent": 1, "n_non_sequences": 0,
                         "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "xt", "type": {"dtype": "float64", "shape": []}},
                                                {"id": "a", "type": {"dtype": "float64", "shape": []}},
                                                {"id": "b", "type": {"dtype": "float64", "shape": []}}],
                                  "nodes": [{"op": "ge", "inputs": ["xt", {"value": 0.0}], "outputs": ["c"]},
                                            {"op": "assert", "inputs": ["xt", "c"], "outputs": ["xa"],
                                             "attrs": {"message": "nonneg"}},
                                            {"op": "add", "inputs": ["a", "xa"], "outputs": ["a2"]},
                                            {"op": "add", "inputs": ["b", "xt"], "outputs": ["b2"]},
                                            {"op": "mul", "inputs": ["xt", {"value": 2.0}], "outputs": ["d"]}],
                                  "inputs": ["xt", "a", "b"], "outputs": ["a2", "b2", "d"]}}}],
    "functions": {"main": {"inputs": ["x", "z", "w"], "outputs": ["D"]}}});

static void test_drop_keeps_checks(void **state) {
    (void)state;
    int64_t three = 3;
    /* the unread map outputs */
    tg_graph *g = tu_load(DROP_CHECKS);
    for (int pr = 0; pr < 2; pr++) {
        tg_function *f = compile(g, pr ? "fast_run" : "none");
        if (pr) {
            assert_int_equal(fired(f, "scan_drop_outputs"), 1);
            assert_int_equal(scan_nout(f), 3); /* O4 went */
            assert_true(body_has_op(f, "assert") && body_has_op(f, "int_div"));
        }
        int64_t cases[3][4] = {{1, -2, 3, 1}, {1, 2, 3, 0}, {1, 2, 3, 1}}; /* x, then d */
        for (int c = 0; c < 3; c++) {
            tg_array *in[2] = {tg_array_new(TG_INT64, 1, &three),
                               tg_array_new_scalar(TG_INT64, (double)cases[c][3])};
            memcpy(tg_array_data(in[0]), cases[c], sizeof(int64_t) * 3);
            if (c == 0) fails_with(f, in, "assertion failed: x must be positive", PRESETS[2 * pr]);
            if (c == 1) fails_with(f, in, "integer division by zero", PRESETS[2 * pr]);
            if (c == 2) {
                tg_array *out;
                call(f, in, &out);
                for (int i = 0; i < 3; i++) assert_int_equal((int64_t)tg_array_get_flat(out, i), 2 * (i + 1));
                tg_array_free(out);
            }
            free_all(in, 2);
        }
        tg_function_free(f);
    }
    tg_graph_free(g);
    /* the unread accumulators */
    g = tu_load(DROP_ACC_CHECK);
    for (int pr = 0; pr < 2; pr++) {
        tg_function *f = compile(g, pr ? "fast_run" : "none");
        if (pr) {
            assert_int_equal(fired(f, "scan_drop_recurrent"), 1);
            assert_int_equal(scan_nout(f), 2); /* B went */
            assert_true(body_has_op(f, "assert"));
        }
        for (int c = 0; c < 2; c++) {
            double x[3] = {1, c ? 2 : -2, 3}, want[3] = {2, c ? 4 : -4, 6};
            tg_array *in[3] = {tu_f64(1, &three, x), tg_array_new_scalar(TG_FLOAT64, 0),
                               tg_array_new_scalar(TG_FLOAT64, 0)};
            if (!c) {
                fails_with(f, in, "assertion failed: nonneg", PRESETS[2 * pr]);
            } else {
                tg_array *out, *w = tu_f64(1, &three, want);
                call(f, in, &out);
                tu_assert_close(out, w, 0, 0);
                tg_array_free(out);
                tg_array_free(w);
            }
            free_all(in, 3);
        }
        tg_function_free(f);
    }
    tg_graph_free(g);
}

/* o_t = (x_t + c) * 2 over the rows of x (float64, rows of unknown
 * length; the number of rows written %s), c a non-sequence of unknown
 * length. */
static const char *PUSH_BCAST = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [%s, null]}},
                  {"id": "c", "type": {"dtype": "float64", "shape": [null]}}],
    "nodes": [{"op": "scan", "inputs": ["x", "c"], "outputs": ["O"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [],
                         "n_nonrecurrent": 1, "n_non_sequences": 1, "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "xt", "type": {"dtype": "float64", "shape": [null]}},
                                                {"id": "cb", "type": {"dtype": "float64", "shape": [null]}}],
                                  "nodes": [{"op": "add", "inputs": ["xt", "cb"], "outputs": ["s"]},
                                            {"op": "mul", "inputs": ["s", {"value": 2.0}], "outputs": ["o"]}],
                                  "inputs": ["xt", "cb"], "outputs": ["o"]}}}],
    "functions": {"main": {"inputs": ["x", "c"], "outputs": ["O"]}}});

/* o_t = tanh(x_t . M) for n_steps steps (written %s: the input n, or
 * the constant 2), x and M of unknown shapes. */
static const char *PUSH_DOT = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "n", "type": {"dtype": "int64", "shape": []}},
                  {"id": "x", "type": {"dtype": "float64", "shape": [null, null]}},
                  {"id": "M", "type": {"dtype": "float64", "shape": [null, null]}}],
    "nodes": [{"op": "scan", "inputs": [%s, "x", "M"], "outputs": ["O"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [],
                         "n_nonrecurrent": 1, "n_non_sequences": 1, "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "xt", "type": {"dtype": "float64", "shape": [null]}},
                                                {"id": "Mb", "type": {"dtype": "float64", "shape": [null, null]}}],
                                  "nodes": [{"op": "dot", "inputs": ["xt", "Mb"], "outputs": ["s"]},
                                            {"op": "tanh", "inputs": ["s"], "outputs": ["o"]}],
                                  "inputs": ["xt", "Mb"], "outputs": ["o"]}}}],
    "functions": {"main": {"inputs": [%s"x", "M"], "outputs": ["O"]}}});

/* scan_push_seq moved x_t + c and x_t . M out of loops that may run no
 * step: after 0 steps the loop as written combines nothing and gives an
 * empty output, where the node outside failed on x's rows ("shapes
 * (0, 3) and (4,) do not broadcast", "(4, 3) and (5, 2) not aligned" for
 * n_steps 0). Such a node now stays; it still moves out of a loop known
 * to run a step (2 rows of x, n_steps the constant 2), whose first step
 * meets the same shapes. Values by hand; mismatched shapes fail under
 * both presets. */
static void test_push_zero_steps(void **state) {
    (void)state;
    char json[4096];
    double xv[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, cv[4] = {0.5, -1, 2, 1};
    double Mv[10] = {0.1, -0.2, 0.3, 0.05, -0.1, 0.2, 0.4, 0.1, -0.3, 0.2};
    for (int known = 0; known < 2; known++) {
        snprintf(json, sizeof json, PUSH_BCAST, known ? "2" : "null");
        tg_graph *g = tu_load(json);
        for (int pr = 0; pr < 2; pr++) {
            tg_function *f = compile(g, pr ? "fast_run" : "none");
            if (pr) assert_int_equal(fired(f, "scan_push_seq") > 0, known);
            if (!known) { /* 0 rows of 3, c of 4: no step, no error */
                tg_array *in[2] = {tu_f64(2, (int64_t[]){0, 3}, xv), tu_f64(1, (int64_t[]){4}, cv)}, *out;
                call(f, in, &out);
                assert_int_equal(tg_array_size(out), 0);
                tg_array_free(out);
                free_all(in, 2);
            }
            tg_array *in[2] = {tu_f64(2, (int64_t[]){2, 3}, xv), tu_f64(1, (int64_t[]){3}, cv)};
            double want[6];
            for (int i = 0; i < 6; i++) want[i] = (xv[i] + cv[i % 3]) * 2;
            expect_matrix(f, in, 2, 3, want);
            tg_array_free(in[1]);
            in[1] = tu_f64(1, (int64_t[]){4}, cv);
            fails_with(f, in, "do not broadcast", PRESETS[2 * pr]);
            free_all(in, 2);
            tg_function_free(f);
        }
        tg_graph_free(g);

        snprintf(json, sizeof json, PUSH_DOT, known ? "{\"value\": 2}" : "\"n\"", known ? "" : "\"n\", ");
        g = tu_load(json);
        for (int pr = 0; pr < 2; pr++) {
            tg_function *f = compile(g, pr ? "fast_run" : "none");
            if (pr) assert_int_equal(fired(f, "scan_push_seq") > 0, known);
            if (pr) assert_int_equal(body_has_op(f, "dot"), !known);
            tg_array *in[3], **xm = known ? in : in + 1; /* (n, then x and M) */
            if (!known) in[0] = tg_array_new_scalar(TG_INT64, 0);
            xm[0] = tu_f64(2, (int64_t[]){4, 3}, xv);
            xm[1] = tu_f64(2, (int64_t[]){5, 2}, Mv);
            if (!known) { /* n_steps 0: (4, 3) and (5, 2) never meet */
                tg_array *out;
                call(f, in, &out);
                assert_int_equal(tg_array_size(out), 0);
                tg_array_free(out);
                tg_array_free(in[0]);
                in[0] = tg_array_new_scalar(TG_INT64, 2);
            }
            fails_with(f, in, "not aligned", PRESETS[2 * pr]);
            tg_array_free(xm[1]);
            xm[1] = tu_f64(2, (int64_t[]){3, 2}, Mv);
            double want[4];
            for (int t = 0; t < 2; t++)
                for (int j = 0; j < 2; j++) {
                    double a = 0;
                    for (int k = 0; k < 3; k++) a += xv[t * 3 + k] * Mv[k * 2 + j];
                    want[t * 2 + j] = tanh(a);
                }
            expect_matrix(f, in, 2, 2, want);
            free_all(in, known ? 2 : 3);
            tg_function_free(f);
        }
        tg_graph_free(g);
    }
}

/* z_t = z_{t-1} + a // b over the rows of xs (int64, of %s rows), a and b
 * non-sequences: a // b reads only them. */
static const char *HOIST_DIV = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "xs", "type": {"dtype": "int64", "shape": [%s]}},
                  {"id": "a", "type": {"dtype": "int64", "shape": []}},
                  {"id": "b", "type": {"dtype": "int64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": ["xs", {"value": {"dtype": "int64", "data": 0}}, "a", "b"], "outputs": ["ps"],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1, "output_taps": [[-1]],
                         "n_nonrecurrent": 0, "n_non_sequences": 2, "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "xi", "type": {"dtype": "int64", "shape": []}},
                                                {"id": "z", "type": {"dtype": "int64", "shape": []}},
                                                {"id": "a", "type": {"dtype": "int64", "shape": []}},
                                                {"id": "b", "type": {"dtype": "int64", "shape": []}}],
                                  "nodes": [{"op": "int_div", "inputs": ["a", "b"], "outputs": ["q"]},
                                            {"op": "add", "inputs": ["z", "q"], "outputs": ["zn"]}],
                                  "inputs": ["xi", "z", "a", "b"], "outputs": ["zn"]}}}],
    "functions": {"main": {"inputs": ["xs", "a", "b"], "outputs": ["ps"]}}});

/* z_t = z_{t-1} + cholesky(A), n steps. */
static const char *HOIST_CHOL = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "n", "type": {"dtype": "int64", "shape": []}},
                  {"id": "A", "type": {"dtype": "float64", "shape": [2, 2]}},
                  {"id": "z0", "type": {"dtype": "float64", "shape": [2, 2]}}],
    "nodes": [{"op": "scan", "inputs": ["n", "z0", "A"], "outputs": ["ps"],
               "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]],
                         "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "z", "type": {"dtype": "float64", "shape": [2, 2]}},
                                                {"id": "A", "type": {"dtype": "float64", "shape": [2, 2]}}],
                                  "nodes": [{"op": "cholesky", "inputs": ["A"], "outputs": ["L"]},
                                            {"op": "add", "inputs": ["z", "L"], "outputs": ["zn"]}],
                                  "inputs": ["z", "A"], "outputs": ["zn"]}}}],
    "functions": {"main": {"inputs": ["n", "A", "z0"], "outputs": ["ps"]}}});

/* z_t = z_{t-1} + ofg(a) over %s steps, the op_from_graph's body giving
 * sqrt(assert(a, a > 0)). */
static const char *HOIST_OFG = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "n", "type": {"dtype": "int64", "shape": []}},
                  {"id": "a", "type": {"dtype": "float64", "shape": []}}],
    "nodes": [{"op": "scan", "inputs": [%s, {"value": {"dtype": "float64", "data": 0}}, "a"], "outputs": ["ps"],
               "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]],
                         "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "z", "type": {"dtype": "float64", "shape": []}},
                                                {"id": "a", "type": {"dtype": "float64", "shape": []}}],
                                  "nodes": [{"op": "op_from_graph", "inputs": ["a"], "outputs": ["q"],
                                             "attrs": {"name": "ssqrt", "body": {
                                                 "variables": [{"id": "a", "type": {"dtype": "float64", "shape": []}}],
                                                 "nodes": [{"op": "gt", "inputs": ["a", {"value": 0}], "outputs": ["pos"]},
                                                           {"op": "assert", "inputs": ["a", "pos"], "outputs": ["aa"],
                                                            "attrs": {"message": "a>0"}},
                                                           {"op": "sqrt", "inputs": ["aa"], "outputs": ["r"]}],
                                                 "inputs": ["a"], "outputs": ["r"]}}},
                                            {"op": "add", "inputs": ["z", "q"], "outputs": ["zn"]}],
                                  "inputs": ["z", "a"], "outputs": ["zn"]}}}],
    "functions": {"main": {"inputs": [%s"a"], "outputs": ["ps"]}}});

static tg_array *i64_vec(int64_t n, const double *v) {
    tg_array *d = tu_f64(1, (int64_t[]){n}, v), *a = tg_array_copy(d, TG_INT64);
    tg_array_free(d);
    return a;
}

/* f(in) gives an empty result (the loop ran no step). */
static void gives_empty(tg_function *f, tg_array *const *in, const char *what) {
    tg_array *out = NULL;
    tg_ctx *ctx = tg_ctx_new();
    if (tg_function_call(f, in, &out, ctx)) {
        char msg[TG_CTX_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("%s: want an empty result after 0 steps, got: %s", what, msg);
    }
    tg_ctx_free(ctx);
    assert_int_equal(tg_array_size(out), 0);
    tg_array_free(out);
}

/* scan_hoist keeps in the loop what the loop as written may not run: a
 * node that may fail (a // b with b = 0, the cholesky of a matrix that is
 * not positive definite) when the loop may run no step (after 0 steps
 * the loop gives its empty output; the node outside failed the call),
 * and at any step count an op_from_graph whose body asserts (or prints:
 * outside it printed once per call, not once per step; its assert failed
 * a call of 0 steps). The loop that surely runs a step (xs of 3
 * rows, n_steps the constant 3) still hoists a // b; values by hand. */
static void test_hoist_keeps_effects_and_checks(void **state) {
    (void)state;
    char json[8192];
    for (int known = 0; known < 2; known++) {
        snprintf(json, sizeof json, HOIST_DIV, known ? "3" : "null");
        tg_graph *g = tu_load(json);
        for (int pr = 0; pr < 3; pr++) {
            tg_function *f = compile(g, PRESETS[pr]);
            if (pr == 2) assert_int_equal(fired(f, "scan_hoist") > 0, known);
            tg_array *in[3] = {i64_vec(3, (double[]){1, 2, 3}), tg_array_new_scalar(TG_INT64, 7),
                               tg_array_new_scalar(TG_INT64, 2)};
            tg_array *out = NULL, *want = i64_vec(3, (double[]){3, 6, 9});
            call(f, in, &out);
            assert_true(tg_array_equal(out, want));
            tg_array_free(out);
            tg_array_free(want);
            tg_array_free(in[2]);
            in[2] = tg_array_new_scalar(TG_INT64, 0);
            fails_with(f, in, "division by zero", PRESETS[pr]);
            if (!known) {
                tg_array_free(in[0]);
                in[0] = i64_vec(0, NULL);
                gives_empty(f, in, PRESETS[pr]);
            }
            free_all(in, 3);
            tg_function_free(f);
        }
        tg_graph_free(g);
    }

    tg_graph *g = tu_load(HOIST_CHOL);
    for (int pr = 0; pr < 3; pr++) {
        tg_function *f = compile(g, PRESETS[pr]);
        tg_array *in[3] = {tg_array_new_scalar(TG_INT64, 0), tu_f64(2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 1}),
                           tu_f64(2, (int64_t[]){2, 2}, (double[]){0, 0, 0, 0})};
        gives_empty(f, in, PRESETS[pr]);
        /* [[4, 2], [2, 3]] = L L^T, L = [[2, 0], [1, sqrt 2]]; 2 steps */
        tg_array_free(in[0]);
        tg_array_free(in[1]);
        in[0] = tg_array_new_scalar(TG_INT64, 2);
        in[1] = tu_f64(2, (int64_t[]){2, 2}, (double[]){4, 2, 2, 3});
        tg_array *out = NULL;
        call(f, in, &out);
        double r2 = sqrt(2.0), w[8] = {2, 0, 1, r2, 4, 0, 2, 2 * r2};
        tg_array *want = tu_f64(3, (int64_t[]){2, 2, 2}, w);
        tu_assert_close(out, want, 1e-15, 1e-15);
        tg_array_free(out);
        tg_array_free(want);
        free_all(in, 3);
        tg_function_free(f);
    }
    tg_graph_free(g);

    for (int known = 0; known < 2; known++) {
        snprintf(json, sizeof json, HOIST_OFG, known ? "{\"value\": 3}" : "\"n\"", known ? "" : "\"n\", ");
        g = tu_load(json);
        for (int pr = 0; pr < 3; pr++) {
            tg_function *f = compile(g, PRESETS[pr]);
            if (pr) assert_true(body_has_op(f, "assert"));
            tg_array *in[2], **a = known ? in : in + 1;
            if (!known) in[0] = tg_array_new_scalar(TG_INT64, 3);
            a[0] = tg_array_new_scalar(TG_FLOAT64, 4.0);
            tg_array *out = NULL, *want = tu_f64(1, (int64_t[]){3}, (double[]){2, 4, 6});
            call(f, in, &out);
            tu_assert_close(out, want, 0, 0);
            tg_array_free(out);
            tg_array_free(want);
            tg_array_free(a[0]);
            a[0] = tg_array_new_scalar(TG_FLOAT64, -1.0);
            fails_with(f, in, "assertion failed", PRESETS[pr]);
            if (!known) {
                tg_array_free(in[0]);
                in[0] = tg_array_new_scalar(TG_INT64, 0);
                gives_empty(f, in, PRESETS[pr]);
            }
            free_all(in, known ? 1 : 2);
            tg_function_free(f);
        }
        tg_graph_free(g);
    }
}

/* ---- errors of nodes moved out of a body ---- */

/* ps_t = ps_{t-1} + cholesky(A) over %s steps, in scan 'loop'; the body
 * node is 'chk', and both nodes carry a creation trace. */
static const char *MOVED_CHOL = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "A", "type": {"dtype": "float64", "shape": [2, 2]}},
                  {"id": "z0", "type": {"dtype": "float64", "shape": [2, 2]}}],
    "nodes": [{"op": "scan", "name": "loop", "inputs": [{"value": %s}, "z0", "A"], "outputs": ["ps"],
               "trace": [{"file": "model.py", "line": 10, "function": "build", "code": "ps = scan(step)"}],
               "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]],
                         "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "z", "type": {"dtype": "float64", "shape": [2, 2]}},
                                                {"id": "A", "type": {"dtype": "float64", "shape": [2, 2]}}],
                                  "nodes": [{"op": "cholesky", "name": "chk", "inputs": ["A"], "outputs": ["L"],
                                             "trace": [{"file": "model.py", "line": 5, "function": "step",
                                                        "code": "L = cholesky(A)"}]},
                                            {"op": "add", "inputs": ["z", "L"], "outputs": ["zn"]}],
                                  "inputs": ["z", "A"], "outputs": ["zn"]}}}],
    "functions": {"main": {"inputs": ["A", "z0"], "outputs": ["ps"]}}});

/* t_t = sum(xs_t + c) in scan 'loop': 'chk' (xs_t + c) reads only the
 * row of xs and c, and lengths that may not broadcast. */
static const char *MOVED_ADD = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "xs", "type": {"dtype": "float64", "shape": [3, null]}},
                  {"id": "c", "type": {"dtype": "float64", "shape": [null]}}],
    "nodes": [{"op": "scan", "name": "loop", "inputs": ["xs", "c"], "outputs": ["ps"],
               "trace": [{"file": "model.py", "line": 10, "function": "build", "code": "ps = scan(step)"}],
               "attrs": {"n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 0, "output_taps": [],
                         "n_nonrecurrent": 1, "n_non_sequences": 1, "has_n_steps": false, "has_until": false,
                         "body": {"variables": [{"id": "xi", "type": {"dtype": "float64", "shape": [null]}},
                                                {"id": "c", "type": {"dtype": "float64", "shape": [null]}}],
                                  "nodes": [{"op": "add", "name": "chk", "inputs": ["xi", "c"], "outputs": ["s"],
                                             "trace": [{"file": "model.py", "line": 5, "function": "step",
                                                        "code": "s = x + c"}]},
                                            {"op": "sum", "inputs": ["s"], "outputs": ["t"]}],
                                  "inputs": ["xi", "c"], "outputs": ["t"]}}}],
    "functions": {"main": {"inputs": ["xs", "c"], "outputs": ["ps"]}}});

/* f(in) fails with exactly `want`. */
static void fails_exactly(tg_function *f, tg_array *const *in, const char *want, const char *what) {
    tg_array *out[2] = {0};
    tg_ctx *ctx = tg_ctx_new();
    assert_int_not_equal(tg_function_call(f, in, out, ctx), 0);
    if (strcmp(tg_ctx_message(ctx), want)) {
        char msg[TG_CTX_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("%s:\n  want: %s\n  got:  %s", what, want, msg);
    }
    tg_ctx_free(ctx);
}

/* A body node that scan_hoist, scan_inline or scan_push_seq moved out of
 * scan 'loop' fails under fast_run with the words of the loop as written
 * (-O none): the scan, then the body node 'chk' by its op, name and body
 * key, its trace, then the scan's; where it no longer runs at a step, a
 * word on how it left. It was named "(cholesky -> ps, standing for ps)"
 * with the scan's trace. */
static void test_moved_errors_name_body_node(void **state) {
    (void)state;
    const char *chol = "nodes[0] (cholesky 'chk' -> L): matrix is not positive definite (leading minor of order 2) "
                       "[at model.py:5 in step: L = cholesky(A)] [at model.py:10 in build: ps = scan(step)]";
    char want[1024], json[8192];
    for (int steps = 1; steps <= 3; steps += 2) {
        snprintf(json, sizeof json, MOVED_CHOL, steps == 1 ? "1" : "3");
        tg_graph *g = tu_load(json);
        /* [[1, 2], [2, 1]] has the eigenvalue -1 */
        tg_array *in[2] = {tu_f64(2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 1}),
                           tu_f64(2, (int64_t[]){2, 2}, (double[]){0, 0, 0, 0})};
        tg_function *ref = compile(g, "none"), *opt = compile(g, "fast_run");
        assert_int_equal(fired(opt, steps == 1 ? "scan_inline" : "scan_hoist"), 1);
        snprintf(want, sizeof want, "nodes[0] (scan 'loop' -> ps): step 0, in the body: %s", chol);
        fails_exactly(ref, in, want, "none");
        snprintf(want, sizeof want, "nodes[0] (scan 'loop' -> ps): %s: %s",
                 steps == 1 ? "step 0, in the body" : "in the body, hoisted out of the loop", chol);
        fails_exactly(opt, in, want, steps == 1 ? "scan_inline" : "scan_hoist");
        free_all(in, 2);
        tg_function_free(ref);
        tg_function_free(opt);
        tg_graph_free(g);
    }

    tg_graph *g = tu_load(MOVED_ADD);
    tg_array *in[2] = {tu_f64(2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6}),
                       tu_f64(1, (int64_t[]){3}, (double[]){1, 2, 3})};
    tg_function *ref = compile(g, "none"), *opt = compile(g, "fast_run");
    assert_int_equal(fired(opt, "scan_push_seq"), 1);
    const char *tr = "[at model.py:5 in step: s = x + c] [at model.py:10 in build: ps = scan(step)]";
    snprintf(want, sizeof want,
             "nodes[0] (scan 'loop' -> ps): step 0, in the body: nodes[0] (add 'chk' -> s): shapes (2,) and (3,) do "
             "not broadcast %s", tr);
    fails_exactly(ref, in, want, "none");
    /* outside, the add meets every row at once: (3, 2) */
    snprintf(want, sizeof want,
             "nodes[0] (scan 'loop' -> ps): in the body, applied to the rows of every step at once: nodes[0] "
             "(add 'chk' -> s): shapes (3, 2) and (3,) do not broadcast %s", tr);
    fails_exactly(opt, in, want, "scan_push_seq");
    free_all(in, 2);
    tg_function_free(ref);
    tg_function_free(opt);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hoist),
        cmocka_unit_test(test_hoist_lazy),
        cmocka_unit_test(test_push_rnn),
        cmocka_unit_test(test_push_rnn_backwards),
        cmocka_unit_test(test_push_more),
        cmocka_unit_test(test_push_keeps_steps),
        cmocka_unit_test(test_push_keeps_failing_nodes),
        cmocka_unit_test(test_keep_last),
        cmocka_unit_test(test_keep_ring),
        cmocka_unit_test(test_keep_until),
        cmocka_unit_test(test_keep_last_saved),
        cmocka_unit_test(test_keep_last_attr),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_bptt_weights),
        cmocka_unit_test(test_bptt_with_inputs),
        cmocka_unit_test(test_bptt_zero_steps),
        cmocka_unit_test(test_bptt_zero_steps_unknown),
        cmocka_unit_test(test_acc_sum),
        cmocka_unit_test(test_merge_outputs),
        cmocka_unit_test(test_merge_outputs_backwards),
        cmocka_unit_test(test_sum_dot_seq),
        cmocka_unit_test(test_sum_dot_seq_backwards),
        cmocka_unit_test(test_acc_sum_broadcast),
        cmocka_unit_test(test_inline),
        cmocka_unit_test(test_inline_declines),
        cmocka_unit_test(test_short_inline),
        cmocka_unit_test(test_short_inline_past),
        cmocka_unit_test(test_short_push),
        cmocka_unit_test(test_push_chain),
        cmocka_unit_test(test_push_limit),
        cmocka_unit_test(test_hoist_limit),
        cmocka_unit_test(test_short_merge),
        cmocka_unit_test(test_exclude_tag),
        cmocka_unit_test(test_drop_recurrent_many),
        cmocka_unit_test(test_drop_keeps_checks),
        cmocka_unit_test(test_push_zero_steps),
        cmocka_unit_test(test_hoist_keeps_effects_and_checks),
        cmocka_unit_test(test_moved_errors_name_body_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
