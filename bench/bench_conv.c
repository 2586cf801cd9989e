/* conv2d forward in float32, tg beside PyTorch (peers/conv.py, measured in
 * the same run with the same thread count) and beside the GEMM-only bound:
 * the time of one sgemm as large as the whole im2col product (out channels
 * x in channels*kernel x batch*output pixels), which is what an im2col
 * convolution cannot beat. Then conv2d_grad_weights and conv2d_grad_inputs
 * in float32 on the same cases (the convnet example's two layers at batch
 * 600, two wider ones): tg, tg's im2col + BLAS path (TG_CONV=im2col) and PyTorch
 * (torch.nn.grad.conv2d_weight, conv2d_input). Best of REPS calls, in ms and GFLOP/s (2
 * flops per multiply-add of the direct definition). tg runs with the
 * threads OpenMP gives it (OMP_NUM_THREADS); so do OpenBLAS and torch.
 * Arguments: bench_conv [REPS]. */
#include <cblas.h>
#include <omp.h>

#include "bench_common.h"

typedef struct bcase {
    const char *name, *border;
    int64_t N, C, H, W, O, K, pad;
} bcase;

/* The convnet example's two layers at batch 600 (outputs 24 and 8 pixels
 * wide: the direct path's narrow rows), then two wider cases; the forward
 * and both gradients on each. */
static const bcase CASES[] = {
    {"convnet_l1", "valid", 600, 1, 28, 28, 8, 5, 0},
    {"convnet_l2", "valid", 600, 8, 12, 12, 16, 5, 0},
    {"c3x32x32_k5x5x32", "valid", 64, 3, 32, 32, 32, 5, 0},
    {"c32x16x16_k3x3x64", "half", 64, 32, 16, 16, 64, 3, 1},
    {"c128x4x4_k3x3x128", "half", 64, 128, 4, 4, 128, 3, 1},
    {"c512x2x2_k3x3x512", "half", 64, 512, 2, 2, 512, 3, 1},
};
#define GW_CASES CASES

static void fill(float *p, int64_t n, uint64_t s) {
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
}

/* The table of one gradient op (weights: conv2d_grad_weights(x, gy, shp);
 * else conv2d_grad_inputs(w, gy, shp)) over GW_CASES: tg as it chooses,
 * tg's im2col + BLAS path (TG_CONV=im2col), torch's time from the peer
 * ("gw_CASE" or "gi_CASE"). */
static void grad_table(bool weights, int reps, int nth, const char *peer, bool torch,
                       tg_ctx *ctx) {
    const char *op = weights ? "conv2d_grad_weights" : "conv2d_grad_inputs";
    printf("\n%s, float32, best of %d, %d threads\n", op, reps, nth);
    printf("  %-18s %6s %9s %8s %10s %8s %9s %8s %9s %8s\n", "case", "border", "tg ms", "GFLOP/s",
           "im2col ms", "GFLOP/s", "torch ms", "GFLOP/s", "tg/im2col", "tg/torch");
    for (size_t k = 0; k < sizeof GW_CASES / sizeof GW_CASES[0]; k++) {
        const bcase *b = &GW_CASES[k];
        int64_t OH = b->H + 2 * b->pad - b->K + 1, OW = b->W + 2 * b->pad - b->K + 1;
        int64_t xs[4] = {b->N, b->C, b->H, b->W}, gs[4] = {b->N, b->O, OH, OW};
        int64_t ws[4] = {b->O, b->C, b->K, b->K};
        const int64_t *first = weights ? xs : ws, *shp = weights ? ws : xs;
        double flops = 2.0 * (double)(b->N * b->O * OH * OW) * (double)(b->C * b->K * b->K);
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                 "{\"id\":\"a\",\"type\":{\"dtype\":\"float32\",\"shape\":[%lld,%lld,%lld,%lld]}},"
                 "{\"id\":\"gy\",\"type\":{\"dtype\":\"float32\",\"shape\":[%lld,%lld,%lld,%lld]}},"
                 "{\"id\":\"shp\",\"type\":{\"dtype\":\"int64\",\"shape\":[4]},"
                 "\"constant\":{\"dtype\":\"int64\",\"shape\":[4],\"data\":[%lld,%lld,%lld,%lld]}}],"
                 "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"a\",\"gy\",\"shp\"],"
                 "\"outputs\":[\"g\"],\"attrs\":{\"border_mode\":\"%s\"}}],"
                 "\"functions\":{\"main\":{\"inputs\":[\"a\",\"gy\"],\"outputs\":[\"g\"]}}}",
                 (long long)first[0], (long long)first[1], (long long)first[2],
                 (long long)first[3], (long long)gs[0], (long long)gs[1], (long long)gs[2],
                 (long long)gs[3], (long long)shp[0], (long long)shp[1], (long long)shp[2],
                 (long long)shp[3], op, b->border);
        tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, b->name, ctx);
        if (!g) bench_die(b->name, ctx);
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        if (!f) bench_die(b->name, ctx);
        tg_array *a = tg_array_new(TG_FLOAT32, 4, first), *gy = tg_array_new(TG_FLOAT32, 4, gs);
        fill(tg_array_data(a), tg_array_size(a), 5);
        fill(tg_array_data(gy), tg_array_size(gy), 6);
        tg_array *in[2] = {a, gy}, *out = NULL;
        double best[2] = {1e30, 1e30};
        /* tg as it chooses, then the im2col + BLAS path */
        for (int path = 0; path < 2; path++) {
            if (path) setenv("TG_CONV", "im2col", 1);
            for (int r = 0; r < reps + 1; r++) {
                double t0 = bench_now();
                if (tg_function_call(f, in, &out, ctx)) bench_die(b->name, ctx);
                double t = bench_now() - t0;
                if (r && t < best[path]) best[path] = t;
                tg_array_free(out);
                out = NULL;
            }
            unsetenv("TG_CONV");
        }
        char key[64];
        snprintf(key, sizeof key, "%s_%s", weights ? "gw" : "gi", b->name);
        double tms = torch ? bench_peer_value(peer, key) : -1;
        printf("  %-18s %6s %9.2f %8.1f %10.2f %8.1f", b->name, b->border, best[0] * 1e3,
               flops / best[0] / 1e9, best[1] * 1e3, flops / best[1] / 1e9);
        if (tms > 0)
            printf(" %9.2f %8.1f %8.2fx %7.2fx\n", tms, flops / (tms * 1e-3) / 1e9,
                   best[0] / best[1], best[0] * 1e3 / tms);
        else
            printf(" %9s %8s %8.2fx %8s\n", "-", "-", best[0] / best[1], "-");
        tg_array_free(a);
        tg_array_free(gy);
        tg_function_free(f);
        tg_graph_free(g);
    }
    printf("  tg/im2col, tg/torch: tg's time over theirs (below 1 is faster)\n");
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 1) reps = 1;
    tg_ctx *ctx = tg_ctx_new();
    int nth = omp_get_max_threads();
    char args[64];
    snprintf(args, sizeof args, "%d %d", reps, nth);
    char *peer = bench_peer("conv.py", args);
    bool torch = peer && !strstr(peer, "torch: not installed");
    printf("conv2d forward, float32, best of %d, %d threads%s\n", reps, nth,
           torch ? "" : "\ntorch: not installed (tg and the GEMM bound only)");
    printf("  %-18s %6s %9s %8s %9s %8s %9s %8s %8s %8s\n", "case", "border", "tg ms", "GFLOP/s",
           "gemm ms", "GFLOP/s", "torch ms", "GFLOP/s", "tg/gemm", "tg/torch");
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const bcase *b = &CASES[k];
        int64_t OH = b->H + 2 * b->pad - b->K + 1, OW = b->W + 2 * b->pad - b->K + 1;
        int64_t xs[4] = {b->N, b->C, b->H, b->W}, ws[4] = {b->O, b->C, b->K, b->K};
        double flops = 2.0 * (double)(b->N * b->O * OH * OW) * (double)(b->C * b->K * b->K);
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                 "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[%lld,%lld,%lld,%lld]}},"
                 "{\"id\":\"w\",\"type\":{\"dtype\":\"float32\",\"shape\":[%lld,%lld,%lld,%lld]}}],"
                 "\"nodes\":[{\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"border_mode\":\"%s\"}}]}",
                 (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3],
                 (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3],
                 b->border);
        tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, b->name, ctx);
        if (!g) bench_die(b->name, ctx);
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        if (!f) bench_die(b->name, ctx);
        tg_array *x = tg_array_new(TG_FLOAT32, 4, xs), *w = tg_array_new(TG_FLOAT32, 4, ws);
        fill(tg_array_data(x), tg_array_size(x), 1);
        fill(tg_array_data(w), tg_array_size(w), 2);
        tg_array *in[2] = {x, w}, *out = NULL;
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            double t0 = bench_now();
            if (tg_function_call(f, in, &out, ctx)) bench_die(b->name, ctx);
            double t = bench_now() - t0;
            if (r && t < best) best = t; /* the first call allocates */
            tg_array_free(out);
            out = NULL;
        }
        /* The GEMM-only bound: one sgemm of the im2col product's size. */
        int M = (int)b->O, Kd = (int)(b->C * b->K * b->K), Nd = (int)(b->N * OH * OW);
        float *A = malloc(sizeof(float) * (size_t)M * (size_t)Kd),
              *B = malloc(sizeof(float) * (size_t)Kd * (size_t)Nd),
              *C = malloc(sizeof(float) * (size_t)M * (size_t)Nd);
        if (!A || !B || !C) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        fill(A, (int64_t)M * Kd, 3);
        fill(B, (int64_t)Kd * Nd, 4);
        double gbest = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            double t0 = bench_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, Nd, Kd, 1.0f, A, Kd, B, Nd,
                        0.0f, C, Nd);
            double t = bench_now() - t0;
            if (r && t < gbest) gbest = t;
        }
        free(A);
        free(B);
        free(C);
        double tms = torch ? bench_peer_value(peer, b->name) : -1;
        printf("  %-18s %6s %9.2f %8.1f %9.2f %8.1f", b->name, b->border, best * 1e3,
               flops / best / 1e9, gbest * 1e3, flops / gbest / 1e9);
        if (tms > 0)
            printf(" %9.2f %8.1f %7.2fx %7.2fx\n", tms, flops / (tms * 1e-3) / 1e9, best / gbest,
                   best * 1e3 / tms);
        else
            printf(" %9s %8s %7.2fx %8s\n", "-", "-", best / gbest, "-");
        tg_array_free(x);
        tg_array_free(w);
        tg_function_free(f);
        tg_graph_free(g);
    }
    printf("  tg/gemm, tg/torch: tg's time over theirs (below 1 is faster)\n");

    grad_table(true, reps, nth, peer, torch, ctx);
    grad_table(false, reps, nth, peer, torch, ctx);
    free(peer);
    tg_ctx_free(ctx);
    return 0;
}
