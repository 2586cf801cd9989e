/* Elementwise fusion: the 2010 paper's expressions a**2 + b**2 + 2*a*b
 * (paper1) and 2*a + 3*b (paper2) on float64 vectors of 10^3, 10^5 and
 * 10^7 elements, as one composite node (compiled kernel, and the
 * block-wise interpreter), as separate elementwise nodes, against NumPy
 * and numexpr (bench/peers/fusion.py) and against the memory-bandwidth
 * bound: the 24 bytes per element the expression must move (a and b read,
 * the result written) at the bandwidth of a triad loop (x = y + s*z, also
 * 24 bytes per element) measured in the same run with the same threads.
 * Target at 10^7: within 1.3x of the bound. The output is reused from
 * call to call (checked: the same buffer comes back).
 *   bench_fusion [N...]
 */
#include <math.h>
#include <omp.h>

#include "bench_common.h"
#include "ops/composite.h"

static const char *const EXPR[2] = {"paper1", "paper2"};

/* Body nodes of each expression (over x, w). */
static const char *const BODY[2] = {
    "{\"op\":\"sqr\",\"inputs\":[\"x\"],\"outputs\":[\"x2\"]},"
    "{\"op\":\"sqr\",\"inputs\":[\"w\"],\"outputs\":[\"w2\"]},"
    "{\"op\":\"mul\",\"inputs\":[{\"value\":2},\"x\",\"w\"],\"outputs\":[\"xw\"]},"
    "{\"op\":\"add\",\"inputs\":[\"x2\",\"w2\",\"xw\"],\"outputs\":[\"r\"]}",
    "{\"op\":\"mul\",\"inputs\":[{\"value\":2},\"x\"],\"outputs\":[\"x2\"]},"
    "{\"op\":\"mul\",\"inputs\":[{\"value\":3},\"w\"],\"outputs\":[\"w3\"]},"
    "{\"op\":\"add\",\"inputs\":[\"x2\",\"w3\"],\"outputs\":[\"r\"]}"};
/* The same as separate nodes of the graph (over a, b). */
static const char *const UNFUSED[2] = {
    "{\"op\":\"sqr\",\"inputs\":[\"a\"],\"outputs\":[\"a2\"]},"
    "{\"op\":\"sqr\",\"inputs\":[\"b\"],\"outputs\":[\"b2\"]},"
    "{\"op\":\"mul\",\"inputs\":[{\"value\":2},\"a\",\"b\"],\"outputs\":[\"ab\"]},"
    "{\"op\":\"add\",\"inputs\":[\"a2\",\"b2\",\"ab\"],\"outputs\":[\"r\"]}",
    "{\"op\":\"mul\",\"inputs\":[{\"value\":2},\"a\"],\"outputs\":[\"a2\"]},"
    "{\"op\":\"mul\",\"inputs\":[{\"value\":3},\"b\"],\"outputs\":[\"b3\"]},"
    "{\"op\":\"add\",\"inputs\":[\"a2\",\"b3\"],\"outputs\":[\"r\"]}"};

static tg_function *make(int e, bool fused, tg_graph **gp, tg_ctx *ctx) {
    char json[4096];
    const char *vars = "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
                       "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}";
    if (fused)
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[%s],\"nodes\":["
                 "{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"r\"],\"attrs\":{"
                 "\"body\":{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                 "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":[%s],"
                 "\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}}}]}",
                 vars, BODY[e]);
    else
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[%s],\"nodes\":[%s]}", vars,
                 UNFUSED[e]);
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, EXPR[e], ctx);
    if (!g) bench_die(EXPR[e], ctx);
    /* The separate nodes run as written: fast_run would fuse them into the
     * same composite. */
    tg_compile_options o = {.preset = fused ? "fast_run" : "none"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) bench_die(EXPR[e], ctx);
    *gp = g;
    return f;
}

/* Best time of one call (ms), over batches of about 20 ms. *reused: the
 * output buffer came back the same on every call after the first. */
static double time_calls(tg_function *f, tg_array *const *in, bool *reused, tg_ctx *ctx) {
    tg_array *out = NULL;
    if (tg_function_call(f, in, &out, ctx)) bench_die("call", ctx);
    const void *first = tg_array_data(out);
    tg_array_free(out);
    *reused = true;
    double t0 = bench_now();
    if (tg_function_call(f, in, &out, ctx)) bench_die("call", ctx);
    double one = bench_now() - t0;
    *reused &= tg_array_data(out) == first;
    tg_array_free(out);
    int k = one > 0.02 ? 1 : (int)(0.02 / (one > 1e-7 ? one : 1e-7));
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        t0 = bench_now();
        for (int i = 0; i < k; i++) {
            if (tg_function_call(f, in, &out, ctx)) bench_die("call", ctx);
            *reused &= tg_array_data(out) == first;
            tg_array_free(out);
        }
        double t = (bench_now() - t0) / k;
        if (t < best) best = t;
    }
    return best * 1e3;
}

/* Triad bandwidth (bytes/s) on n elements, best of batches. */
static double triad(int64_t n) {
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n),
           *z = malloc(sizeof(double) * (size_t)n);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        x[i] = 0;
        y[i] = (double)i;
        z[i] = 1.0 / (double)(i + 1);
    }
    volatile double s = 3.0;
    double best = 1e30;
    int k = n >= 1000000 ? 1 : (int)(20000000 / n);
    for (int r = 0; r < 15; r++) {
        double t0 = bench_now(), sc = s;
        for (int j = 0; j < k; j++) {
#pragma omp parallel for simd schedule(static) if (n >= TG_COMPOSITE_PAR_MIN)
            for (int64_t i = 0; i < n; i++) x[i] = y[i] + sc * z[i];
        }
        double t = (bench_now() - t0) / k;
        if (t < best) best = t;
    }
    if (x[n / 2] != y[n / 2] + 3.0 * z[n / 2]) printf("triad: wrong result\n");
    free(x);
    free(y);
    free(z);
    return 24.0 * (double)n / best;
}

int main(int argc, char **argv) {
    int64_t sizes[8] = {1000, 100000, 10000000};
    int nsizes = 3;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = atoll(argv[i]);
    }
    tg_ctx *ctx = tg_ctx_new();
    int threads = omp_get_max_threads();
    char args[256];
    int off = snprintf(args, sizeof args, "%d", threads);
    for (int i = 0; i < nsizes; i++)
        off += snprintf(args + off, sizeof args - (size_t)off, " %lld", (long long)sizes[i]);
    char *peer = bench_peer("fusion.py", args);
    printf("float64, %d OpenMP threads, best of batches%s\n", threads,
           peer ? "" : "\nnumpy: not installed (tg only)");
    printf("  %-7s %9s %9s %9s %9s %9s %9s %9s %9s %7s %6s\n", "expr", "n", "fused ms", "interp ms",
           "nodes ms", "numpy ms", "numexpr", "bound ms", "triad GB/s", "/bound", "reuse");
    int bad = 0;
    for (int si = 0; si < nsizes; si++) {
        int64_t n = sizes[si];
        tg_array *a = tg_array_new(TG_FLOAT64, 1, &n), *b = tg_array_new(TG_FLOAT64, 1, &n);
        double *ad = tg_array_data(a), *bd = tg_array_data(b);
        uint64_t s = 99;
        for (int64_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ad[i] = (double)(s >> 11) / 9007199254740992.0;
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            bd[i] = (double)(s >> 11) / 9007199254740992.0;
        }
        tg_array *in[2] = {a, b};
        double bw = triad(n), bound = 24.0 * (double)n / bw * 1e3;
        for (int e = 0; e < 2; e++) {
            tg_graph *gf, *gu;
            tg_function *ff = make(e, true, &gf, ctx), *fu = make(e, false, &gu, ctx);
            bool r1, r2, r3;
            double fused = time_calls(ff, in, &r1, ctx);
            tg_composite_force_interp(true);
            tg_graph *gi;
            tg_function *fi = make(e, true, &gi, ctx);
            double interp = time_calls(fi, in, &r2, ctx);
            tg_composite_force_interp(false);
            double nodes = time_calls(fu, in, &r3, ctx);
            /* The fused result, exactly the unfused one. */
            tg_array *o1 = NULL, *o2 = NULL;
            if (tg_function_call(ff, in, &o1, ctx) || tg_function_call(fu, in, &o2, ctx))
                bench_die("check", ctx);
            if (!tg_array_equal(o1, o2)) {
                printf("  %s n=%lld: fused and unfused results differ\n", EXPR[e], (long long)n);
                bad = 1;
            }
            tg_array_free(o1);
            tg_array_free(o2);
            char key[64];
            snprintf(key, sizeof key, "numpy_%s_%lld", EXPR[e], (long long)n);
            double np_ms = bench_peer_value(peer, key);
            snprintf(key, sizeof key, "numexpr_%s_%lld", EXPR[e], (long long)n);
            double ne_ms = bench_peer_value(peer, key);
            printf("  %-7s %9lld %9.4f %9.4f %9.4f", EXPR[e], (long long)n, fused, interp, nodes);
            if (np_ms > 0) printf(" %9.4f", np_ms); else printf(" %9s", "-");
            if (ne_ms > 0) printf(" %9.4f", ne_ms); else printf(" %9s", "-");
            printf(" %9.4f %9.1f %6.2fx %6s\n", bound, bw / 1e9, fused / bound,
                   r1 && r2 && r3 ? "yes" : "no");
            tg_function_free(ff);
            tg_function_free(fu);
            tg_function_free(fi);
            tg_graph_free(gf);
            tg_graph_free(gu);
            tg_graph_free(gi);
        }
        tg_array_free(a);
        tg_array_free(b);
    }
    printf("  fused: one composite node, compiled kernel; interp: the same node in the\n"
           "  block-wise interpreter; nodes: separate elementwise nodes (as written, preset none); bound: 24 bytes\n"
           "  per element at the triad bandwidth; /bound: fused / bound (target at 10^7:\n"
           "  1.3x or less); reuse: the output buffer is the same on every call.\n");
    free(peer);
    tg_ctx_free(ctx);
    return bad;
}
