/* The profiler's overhead: the MLP's training function (examples/mlp.json,
 * `train`, 600 examples of 784 features) per call without hooks and with
 * tgprof's counters attached (tg_profile_call, a timeline kept), in
 * alternating blocks so that both see the same machine. Target: at most 5%
 * more time per call. Beside it, the worst case: a chain of 2,000 scalar
 * `add` nodes, where the hooks' fixed cost per node is all there is.
 *
 *   bench_prof [N_EXAMPLES] [BLOCKS]
 */
#include "bench_common.h"

static uint64_t rng = 0x2012201220122012ull;
static double uniform(void) { /* splitmix64, as examples/mlp_data.c */
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Seconds per call over `calls` calls, with a profile attached or not. */
static double block(tg_function *f, tg_array **in, int nout, int calls, bool prof, tg_ctx *ctx) {
    tg_array *out[4] = {0};
    tg_profile *p = prof ? tg_profile_new(f, calls, ctx) : NULL;
    if (prof && !p) bench_die("profile", ctx);
    double t0 = bench_now();
    for (int i = 0; i < calls; i++) {
        int rc = p ? tg_profile_call(p, in, out, ctx) : tg_function_call(f, in, out, ctx);
        if (rc) bench_die("call", ctx);
        for (int k = 0; k < nout; k++) tg_array_free(out[k]);
    }
    double t = (bench_now() - t0) / calls;
    tg_profile_free(p);
    return t;
}

/* Median per-call times of both modes over `blocks` alternating blocks,
 * and the median of the per-pair ratios (robust to the machine's load
 * drifting between blocks). */
static void compare(tg_function *f, tg_array **in, int nout, int calls, int blocks, double *plain,
                    double *prof, double *ratio, tg_ctx *ctx) {
    double *a = malloc(sizeof(double) * (size_t)blocks), *b = malloc(sizeof(double) * (size_t)blocks),
           *r = malloc(sizeof(double) * (size_t)blocks);
    for (int i = 0; i < blocks; i++) {
        bool first = i % 2; /* alternate which mode goes first */
        if (first) b[i] = block(f, in, nout, calls, true, ctx);
        a[i] = block(f, in, nout, calls, false, ctx);
        if (!first) b[i] = block(f, in, nout, calls, true, ctx);
        r[i] = b[i] / a[i];
    }
    qsort(a, (size_t)blocks, sizeof *a, cmp_double);
    qsort(b, (size_t)blocks, sizeof *b, cmp_double);
    qsort(r, (size_t)blocks, sizeof *r, cmp_double);
    *plain = a[blocks / 2];
    *prof = b[blocks / 2];
    *ratio = r[blocks / 2];
    free(a);
    free(b);
    free(r);
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 600;
    int blocks = argc > 2 ? atoi(argv[2]) : 9;
    if (n < 1 || blocks < 1) {
        fprintf(stderr, "usage: bench_prof [N_EXAMPLES] [BLOCKS]\n");
        return 2;
    }
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(TG_BENCH_DIR "/../examples/mlp.json", ctx);
    if (!g) bench_die("load", ctx);
    int fi = tg_graph_function_find(g, "train", ctx);
    tg_function *f = fi >= 0 ? tg_function_compile(g, fi, NULL, ctx) : NULL;
    if (!f) bench_die("compile", ctx);
    int64_t xs[2] = {n, 784}, ys[2] = {n, 10};
    tg_array *in[2] = {tg_array_new(TG_FLOAT32, 2, xs), tg_array_new(TG_FLOAT32, 2, ys)};
    float *xd = tg_array_data(in[0]), *yd = tg_array_data(in[1]);
    for (int64_t i = 0; i < n * 784; i++) xd[i] = (float)uniform();
    for (int64_t i = 0; i < n; i++) yd[i * 10 + (int64_t)(uniform() * 10) % 10] = 1.0f;
    int nout = tg_function_output_count(f);
    if (nout > 4) {
        fprintf(stderr, "bench_prof: train has %d outputs (at most 4 expected)\n", nout);
        return 1;
    }
    block(f, in, nout, 3, false, ctx); /* warm up */
    double plain, prof, ratio;
    compare(f, in, nout, 5, blocks, &plain, &prof, &ratio, ctx);
    printf("Profiler overhead: MLP train (%lld x 784 -> 500 -> 10, %d nodes), median of %d blocks of 5 calls\n",
           (long long)n, tg_function_node_count(f), blocks);
    printf("  %-28s %9.3f ms/call\n", "no hooks", plain * 1e3);
    printf("  %-28s %9.3f ms/call\n", "tgprof counters + timeline", prof * 1e3);
    printf("  %-28s %+8.2f %%   (target <= +5%%)\n", "overhead", (ratio - 1) * 100);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_function_free(f);
    tg_graph_free(g);

    /* The worst case: nodes that do almost nothing. */
    int nodes = 2000;
    size_t cap = (size_t)nodes * 96 + 1024, k = 0;
    char *json = malloc(cap);
    k += (size_t)snprintf(json + k, cap - k,
                          "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"v0\","
                          "\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":[");
    for (int i = 0; i < nodes; i++)
        k += (size_t)snprintf(json + k, cap - k,
                              "%s{\"op\":\"add\",\"inputs\":[\"v%d\",{\"value\":1.0}],\"outputs\":[\"v%d\"]}",
                              i ? "," : "", i, i + 1);
    snprintf(json + k, cap - k, "]}");
    g = tg_graph_load_string(json, strlen(json), NULL, "chain", ctx);
    if (!g) bench_die("load", ctx);
    f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) bench_die("compile", ctx);
    tg_array *x = tg_array_new_scalar(TG_FLOAT64, 0.0);
    block(f, &x, 1, 20, false, ctx);
    compare(f, &x, 1, 50, blocks, &plain, &prof, &ratio, ctx);
    printf("Worst case: a chain of %d scalar float64 add nodes\n", nodes);
    printf("  %-28s %9.1f ns/node\n", "no hooks", plain * 1e9 / nodes);
    printf("  %-28s %9.1f ns/node   (+%.1f ns per node)\n", "tgprof counters + timeline", prof * 1e9 / nodes,
           (prof - plain) * 1e9 / nodes);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    free(json);
    tg_ctx_free(ctx);
    return 0;
}
