/* scan's cost per step: a running sum over a float64 sequence, the
 * smallest body (one scalar `add`), so that what is timed is the loop:
 * moving the body's input views, the nested function's dispatch, landing
 * the step's value in its row. tg: the best of 15 calls of N steps minus
 * the best of 15 calls of 1 step, divided by N - 1. Peer
 * (peers/scan_steps.py): the same loop in Python, with NumPy scalars and
 * with floats, storing every step as scan does.
 *   bench_scan_steps [N]   (default 1000000) */
#include "bench_common.h"

static const char *GRAPH =
    "{\"format\": \"tg-graph\", \"version\": 1,"
    " \"variables\": [{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [null]}}],"
    " \"nodes\": [{\"op\": \"scan\", \"inputs\": [\"x\", {\"value\": {\"dtype\": \"float64\", \"data\": 0.0}}],"
    "   \"outputs\": [\"s\"], \"attrs\": {\"n_sequences\": 1, \"sequence_taps\": [[0]], \"n_recurrent\": 1,"
    "   \"output_taps\": [[-1]], \"n_nonrecurrent\": 0, \"n_non_sequences\": 0, \"has_n_steps\": false,"
    "   \"has_until\": false, \"body\": {\"variables\": ["
    "     {\"id\": \"b.x\", \"type\": {\"dtype\": \"float64\", \"shape\": []}},"
    "     {\"id\": \"b.s\", \"type\": {\"dtype\": \"float64\", \"shape\": []}}],"
    "   \"nodes\": [{\"op\": \"add\", \"inputs\": [\"b.s\", \"b.x\"], \"outputs\": [\"b.t\"]}],"
    "   \"inputs\": [\"b.x\", \"b.s\"], \"outputs\": [\"b.t\"]}}}],"
    " \"functions\": {\"main\": {\"inputs\": [\"x\"], \"outputs\": [\"s\"]}}}";

static double best_call(tg_function *f, tg_array *x, tg_ctx *ctx, double *last) {
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        tg_array *out;
        double t0 = bench_now();
        if (tg_function_call(f, &x, &out, ctx)) bench_die("call", ctx);
        double t = bench_now() - t0;
        if (t < best) best = t;
        int64_t n = tg_array_shape(out)[0];
        *last = n ? tg_array_get_flat(out, n - 1) : 0;
        tg_array_free(out);
    }
    return best;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
    if (n < 2) n = 2;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(GRAPH, strlen(GRAPH), NULL, "bench_scan_steps", ctx);
    if (!g) bench_die("load", ctx);
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) bench_die("compile", ctx);
    int64_t one = 1;
    tg_array *x1 = tg_array_new(TG_FLOAT64, 1, &one), *xn = tg_array_new(TG_FLOAT64, 1, &n);
    ((double *)tg_array_data(x1))[0] = 1.0;
    for (int64_t i = 0; i < n; i++) ((double *)tg_array_data(xn))[i] = 1.0;
    double last1, lastn;
    double t1 = best_call(f, x1, ctx, &last1), tn = best_call(f, xn, ctx, &lastn);
    if (lastn != (double)n) {
        fprintf(stderr, "bench_scan_steps: the sum of %lld ones came out %g\n", (long long)n, lastn);
        return 1;
    }
    double per = (tn - t1) / (double)(n - 1);
    printf("scan of %lld steps, body: one scalar add (running sum), float64\n", (long long)n);
    printf("%-28s %10s %14s\n", "", "ns/step", "Msteps/s");
    printf("%-28s %10.1f %14.2f\n", "tg scan", per * 1e9, 1e-6 / per);
    char args[32];
    snprintf(args, sizeof args, "%lld", (long long)n);
    char *peer = bench_peer("scan_steps.py", args);
    if (!peer) {
        printf("(peer: NumPy is not available)\n");
    } else {
        const char *names[2] = {"numpy_ns_per_step", "python_ns_per_step"};
        const char *labels[2] = {"Python loop, NumPy scalars", "Python loop, floats"};
        for (int k = 0; k < 2; k++) {
            const char *at = strstr(peer, names[k]);
            if (!at) continue;
            double ns = atof(at + strlen(names[k]));
            printf("%-28s %10.1f %14.2f\n", labels[k], ns, 1e3 / ns);
        }
        free(peer);
    }
    tg_array_free(x1);
    tg_array_free(xn);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return 0;
}
