/* The profiler's overhead: the MLP's training function (examples/mlp.json,
 * `train`, 600 examples of 784 features) per call without hooks and with
 * tgprof's counters attached (tg_profile_call, a timeline kept), calls
 * alternating so that both see the same machine. Target: at most 5% more
 * time per call. Beside it, the worst case: a chain of 2,000 scalar `add`
 * nodes, where the hooks' fixed cost per node is all there is.
 *
 *   bench_prof [N_EXAMPLES] [PAIRS]
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

static double one_call(tg_function *f, tg_profile *p, tg_array **in, int nout, tg_ctx *ctx) {
    tg_array *out[4] = {0};
    double t0 = bench_now();
    int rc = p ? tg_profile_call(p, in, out, ctx) : tg_function_call(f, in, out, ctx);
    double t = bench_now() - t0;
    if (rc) bench_die("call", ctx);
    for (int k = 0; k < nout; k++) tg_array_free(out[k]);
    return t;
}

typedef struct figures {
    double plain, prof;  /* median seconds per call */
    double best_plain, best_prof;
    double ratio;        /* median of the per-pair ratios */
} figures;

/* Two functions compiled from the same graph (so they share, and train,
 * the same weights): fp plain, fq with the profile p attached. Calls
 * alternate between them, which one goes first alternating too, so that
 * each pair sees the same load on a shared machine. */
static figures compare(tg_function *fp, tg_function *fq, tg_profile *p, tg_array **in, int nout, int pairs,
                       tg_ctx *ctx) {
    double *a = malloc(sizeof(double) * (size_t)pairs), *b = malloc(sizeof(double) * (size_t)pairs),
           *r = malloc(sizeof(double) * (size_t)pairs);
    for (int i = 0; i < pairs; i++) {
        if (i % 2) b[i] = one_call(fq, p, in, nout, ctx);
        a[i] = one_call(fp, NULL, in, nout, ctx);
        if (!(i % 2)) b[i] = one_call(fq, p, in, nout, ctx);
        r[i] = b[i] / a[i];
    }
    qsort(a, (size_t)pairs, sizeof *a, cmp_double);
    qsort(b, (size_t)pairs, sizeof *b, cmp_double);
    qsort(r, (size_t)pairs, sizeof *r, cmp_double);
    figures fg = {a[pairs / 2], b[pairs / 2], a[0], b[0], r[pairs / 2]};
    free(a);
    free(b);
    free(r);
    return fg;
}

static tg_function *compile(tg_graph *g, const char *name, const char *preset, tg_ctx *ctx) {
    int fi = tg_graph_function_find(g, name, ctx);
    tg_compile_options co = {.preset = preset};
    tg_function *f = fi >= 0 ? tg_function_compile(g, fi, &co, ctx) : NULL;
    if (!f) bench_die("compile", ctx);
    return f;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 600;
    int pairs = argc > 2 ? atoi(argv[2]) : 31;
    if (n < 1 || pairs < 1) {
        fprintf(stderr, "usage: bench_prof [N_EXAMPLES] [PAIRS]\n");
        return 2;
    }
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(TG_BENCH_DIR "/../examples/mlp.json", ctx);
    if (!g) bench_die("load", ctx);
    tg_function *fp = compile(g, "train", NULL, ctx), *fq = compile(g, "train", NULL, ctx);
    int64_t xs[2] = {n, 784}, ys[2] = {n, 10};
    tg_array *in[2] = {tg_array_new(TG_FLOAT32, 2, xs), tg_array_new(TG_FLOAT32, 2, ys)};
    float *xd = tg_array_data(in[0]), *yd = tg_array_data(in[1]);
    for (int64_t i = 0; i < n * 784; i++) xd[i] = (float)uniform();
    for (int64_t i = 0; i < n; i++) yd[i * 10 + (int64_t)(uniform() * 10) % 10] = 1.0f;
    int nout = tg_function_output_count(fp);
    if (nout > 4) {
        fprintf(stderr, "bench_prof: train has %d outputs (at most 4 expected)\n", nout);
        return 1;
    }
    for (int i = 0; i < 3; i++) { /* warm up both */
        one_call(fp, NULL, in, nout, ctx);
        one_call(fq, NULL, in, nout, ctx);
    }
    /* The control: the same two functions, neither profiled, shows how
     * far apart two identical functions measure here. */
    figures aa = compare(fp, fq, NULL, in, nout, pairs, ctx);
    tg_profile *p = tg_profile_new(fq, pairs, ctx);
    if (!p) bench_die("profile", ctx);
    figures m = compare(fp, fq, p, in, nout, pairs, ctx);
    int mlp_nodes = tg_function_node_count(fp);
    printf("Profiler overhead: MLP train (%lld x 784 -> 500 -> 10, %d nodes), %d alternating pairs of calls\n",
           (long long)n, mlp_nodes, pairs);
    printf("  %-28s %9.3f ms/call median, %9.3f best\n", "no hooks", m.plain * 1e3, m.best_plain * 1e3);
    printf("  %-28s %9.3f ms/call median, %9.3f best\n", "tgprof counters + timeline", m.prof * 1e3,
           m.best_prof * 1e3);
    printf("  %-28s %+8.2f %% median of the pairs, %+.2f %% best against best   (target <= +5%%)\n", "overhead",
           (m.ratio - 1) * 100, (m.best_prof / m.best_plain - 1) * 100);
    printf("  %-28s %+8.2f %% median of the pairs   (control: neither profiled, the noise floor)\n",
           "plain against plain", (aa.ratio - 1) * 100);
    /* An upper bound that load cannot blur: everything outside the
     * kernels in the profiled calls (binding, updates, the VM loop, and
     * the profiler's hooks and bookkeeping), as a share of the call. */
    double outside = (double)(tg_profile_total_ns(p) - tg_profile_nodes_ns(p)) / (double)tg_profile_calls(p) * 1e-9;
    printf("  %-28s %+8.3f %%   (%.1f us of %.1f ms per profiled call)\n", "time outside kernels",
           outside / m.prof * 100, outside * 1e6, m.prof * 1e3);
    tg_profile_free(p);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_function_free(fp);
    tg_function_free(fq);
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
    /* Unoptimized: the optimizer would fold the chain into one node. */
    fp = compile(g, NULL, "none", ctx);
    fq = compile(g, NULL, "none", ctx);
    tg_array *x = tg_array_new_scalar(TG_FLOAT64, 0.0);
    for (int i = 0; i < 20; i++) {
        one_call(fp, NULL, &x, 1, ctx);
        one_call(fq, NULL, &x, 1, ctx);
    }
    p = tg_profile_new(fq, 0, ctx);
    if (!p) bench_die("profile", ctx);
    figures c = compare(fp, fq, p, &x, 1, 200, ctx);
    printf("Worst case: a chain of %d scalar float64 add nodes, 200 pairs of calls\n", nodes);
    printf("  %-28s %9.1f ns/node (best)\n", "no hooks", c.best_plain * 1e9 / nodes);
    printf("  %-28s %9.1f ns/node (best)   (+%.1f ns per node)\n", "tgprof counters", c.best_prof * 1e9 / nodes,
           (c.best_prof - c.best_plain) * 1e9 / nodes);
    /* What that fixed cost predicts for the MLP: on a loaded machine a
     * steadier figure than the MLP's own ratio. */
    printf("  %-28s %+8.3f %%   (per-node cost x %d nodes / the MLP's best call)\n", "predicted MLP overhead",
           (c.best_prof - c.best_plain) / nodes * mlp_nodes / m.best_plain * 100, mlp_nodes);
    tg_profile_free(p);
    tg_array_free(x);
    tg_function_free(fp);
    tg_function_free(fq);
    tg_graph_free(g);
    free(json);
    tg_ctx_free(ctx);
    return 0;
}
