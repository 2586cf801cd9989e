/* Single elementwise ops and reductions on 10^7 float64, tg beside NumPy
 * measured in the same run (NumPy allocating its result, as one writes
 * it, and with out= where the op has it). Target: within 1.2x of NumPy,
 * or faster. tg runs with the threads OpenMP gives it (OMP_NUM_THREADS). */
#include <math.h>
#include <omp.h>

#include "bench_common.h"

typedef struct bop {
    const char *name, *op, *attrs;
    int nin;
} bop;

static const bop OPS[] = {
    {"add", "add", NULL, 2},       {"mul", "mul", NULL, 2},         {"sub", "sub", NULL, 2},
    {"true_div", "true_div", NULL, 2}, {"maximum", "maximum", NULL, 2}, {"exp", "exp", NULL, 1},
    {"log", "log", NULL, 1},       {"tanh", "tanh", NULL, 1},       {"sqrt", "sqrt", NULL, 1},
    {"abs", "abs", NULL, 1},       {"sum", "sum", NULL, 1},         {"mean", "mean", NULL, 1},
    {"max", "max", NULL, 1},       {"argmax", "argmax", NULL, 1},   {"std", "std", NULL, 1},
    {"sum_axis0", "sum", "{\"axis\":0}", 1},
};

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 10000000;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    tg_ctx *ctx = tg_ctx_new();
    tg_array *x = tg_array_new(TG_FLOAT64, 1, &n), *y = tg_array_new(TG_FLOAT64, 1, &n);
    double *xd = tg_array_data(x), *yd = tg_array_data(y);
    uint64_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xd[i] = 0.1 + (double)(s >> 11) / 9007199254740992.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        yd[i] = 0.1 + (double)(s >> 11) / 9007199254740992.0;
    }
    char args[64];
    snprintf(args, sizeof args, "%lld %d", (long long)n, reps);
    char *peer = bench_peer("elemwise.py", args);
    printf("float64, %lld elements, best of %d, %d OpenMP threads%s\n", (long long)n, reps,
           omp_get_max_threads(), peer ? "" : "\nnumpy: not installed (tg only)");
    printf("  %-10s %10s %10s %10s %12s %8s\n", "op", "tg ms", "GB/s", "numpy ms", "numpy out=", "ratio");
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++) {
        const bop *b = &OPS[k];
        int64_t rows = n / 1000;
        char json[1024];
        /* sum_axis0 reduces a (n/1000, 1000) matrix over its rows. */
        bool mat = !strcmp(b->name, "sum_axis0");
        if (mat)
            snprintf(json, sizeof json,
                     "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":"
                     "\"float64\",\"shape\":[%lld, 1000]}}],\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"x\"],"
                     "\"outputs\":[\"z\"],\"attrs\":%s}]}",
                     (long long)rows, b->op, b->attrs);
        else
            snprintf(json, sizeof json,
                     "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":"
                     "\"float64\",\"shape\":[null]}},{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],"
                     "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"x\"%s],\"outputs\":[\"z\"]}],"
                     "\"functions\":{\"f\":{\"inputs\":[\"x\"%s],\"outputs\":[\"z\"]}}}",
                     b->op, b->nin == 2 ? ",\"y\"" : "", b->nin == 2 ? ",\"y\"" : "");
        tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, b->name, ctx);
        if (!g) bench_die(b->name, ctx);
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        if (!f) bench_die(b->name, ctx);
        tg_array *in[2] = {x, y}, *out = NULL;
        tg_array *xm = NULL;
        if (mat) {
            int64_t shp[2] = {rows, 1000};
            xm = tg_array_reshape(x, 2, shp, ctx);
            in[0] = xm;
        }
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            double t0 = bench_now();
            if (tg_function_call(f, in, &out, ctx)) bench_die(b->name, ctx);
            double t = bench_now() - t0;
            if (r && t < best) best = t; /* the first call allocates */
            tg_array_free(out);
        }
        double bytes = (double)n * 8 * (b->nin + (strstr("sum mean max argmax std sum_axis0", b->name) ? 0 : 1));
        double np_ms = bench_peer_value(peer, b->name), np_out = -1;
        char key[64];
        snprintf(key, sizeof key, "%s_out", b->name);
        np_out = bench_peer_value(peer, key);
        printf("  %-10s %10.2f %10.1f", b->name, best * 1e3, bytes / best / 1e9);
        if (np_ms > 0) {
            printf(" %10.2f", np_ms);
            if (np_out > 0) printf(" %12.2f", np_out); else printf(" %12s", "-");
            printf(" %7.2fx", best * 1e3 / (np_out > 0 && np_out < np_ms ? np_out : np_ms));
        }
        printf("\n");
        tg_array_free(xm);
        tg_function_free(f);
        tg_graph_free(g);
    }
    printf("  ratio: tg time / NumPy's best time (below 1 is faster than NumPy)\n");
    free(peer);
    tg_array_free(x);
    tg_array_free(y);
    tg_ctx_free(ctx);
    return 0;
}
