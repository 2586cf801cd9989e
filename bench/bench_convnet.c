/* The training step of examples/convnet.json (`train`: 28x28 images,
 * conv 5x5 -> 8 channels, tanh, 2x2 max pooling, conv 5x5 -> 16, tanh,
 * pooling, 256 -> 10 softmax, cross-entropy, SGD; float32), in examples per
 * second, for batch 60 and 600, beside:
 *   - the same step with TG_CONV=im2col (every convolution and gradient
 *     through im2col and OpenBLAS, as on a CPU without AVX-512);
 *   - PyTorch with 1 and 2 threads (peers/convnet.py: the same layers,
 *     autograd and SGD), measured in the same run.
 * What the step costs node by node: tgprof examples/convnet.json -f train
 * -i x=X.npy -i y=Y.npy.
 *
 *   build-bench/bench/bench_convnet [MIN_SECONDS]
 */
#include "bench_common.h"

static const int batches[] = {60, 600};
enum { NB = 2 };
static double min_s = 0.3;

int main(int argc, char **argv) {
    if (argc > 1) min_s = atof(argv[1]);
    char args[64];
    snprintf(args, sizeof args, "60,600 %g", min_s);
    char *peer = bench_peer("convnet.py", args);
    printf("convnet training step (examples/convnet.json), float32, examples per second (higher is "
           "better); OMP threads: %s\n",
           getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "default");
    printf("%5s %10s %12s %10s %10s %10s\n", "batch", "tg", "tg im2col", "torch 1t", "torch 2t",
           "tg/torch");
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(TG_BENCH_DIR "/../examples/convnet.json", ctx);
    if (!g) bench_die("load", ctx);
    for (int bi = 0; bi < NB; bi++) {
        const int b = batches[bi];
        double rate[2];
        for (int path = 0; path < 2; path++) {
            if (path) setenv("TG_CONV", "im2col", 1);
            bench_call s = {.ctx = ctx};
            s.f = tg_function_compile(g, tg_graph_function_find(g, "train", ctx), NULL, ctx);
            if (!s.f) bench_die("compile", ctx);
            int64_t xs[2] = {b, 784}, ys[2] = {b, 10};
            s.in[0] = tg_array_new(TG_FLOAT32, 2, xs);
            s.in[1] = tg_array_new(TG_FLOAT32, 2, ys);
            float *x = tg_array_data(s.in[0]), *y = tg_array_data(s.in[1]);
            unsigned seed = 3;
            for (int64_t i = 0; i < (int64_t)b * 784; i++) x[i] = (float)rand_r(&seed) / (float)RAND_MAX;
            for (int i = 0; i < b; i++) y[i * 10 + (i * 7) % 10] = 1;
            rate[path] = bench_rate(bench_run_call, &s, 5, min_s) * b;
            unsetenv("TG_CONV");
            tg_array_free(s.in[0]);
            tg_array_free(s.in[1]);
            tg_function_free(s.f);
        }
        double pv[2];
        for (int t = 0; t < 2; t++) {
            char key[32];
            snprintf(key, sizeof key, "torch%d_%d", t + 1, b);
            pv[t] = bench_peer_value(peer, key);
        }
        printf("%5d %10.0f %12.0f", b, rate[0], rate[1]);
        for (int t = 0; t < 2; t++)
            if (pv[t] > 0) printf(" %10.0f", pv[t]);
            else printf(" %10s", "-");
        double best = pv[0] > pv[1] ? pv[0] : pv[1];
        if (best > 0) printf(" %9.2fx\n", best / rate[0]);
        else printf(" %10s\n", "-");
    }
    tg_graph_free(g);
    tg_ctx_free(ctx);
    if (!peer || strstr(peer, "torch: not installed"))
        printf("torch: not installed (apt-get install python3-torch)\n");
    printf("tg/torch: tg's time over the faster PyTorch's (below 1 is faster)\n");
    free(peer);
    return 0;
}
