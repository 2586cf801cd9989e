/* bench_cuda: one training step of the 2012 paper's MLP (examples/mlp.json:
 * 784-500-10, tanh, softmax, mean cross-entropy, SGD updates of W1 b1 W2
 * b2), batch 60 and 1024, float32: tg with device "cuda", tg on the CPU,
 * and PyTorch on the same GPU in the same run (peers/mlp_torch.py, run
 * with $TG_BENCH_PYTHON, default python3).
 *
 * One tg call is a whole step: x and y go up, the cost and the updated
 * weights come back (shared values live on the host in this version), so
 * PyTorch is timed two ways: with the data resident on the GPU, and
 * copying x, y up and reading the cost back each step.
 *
 * Usage: bench_cuda [STEPS]   (default 200) */
#include "backend/backend.h"
#include "bench_common.h"

static double time_steps(tg_function *f, tg_array **in, int steps, tg_ctx *ctx) {
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = bench_now();
        for (int s = 0; s < steps; s++) {
            tg_array *cost = NULL;
            if (tg_function_call(f, in, &cost, ctx)) bench_die("call", ctx);
            tg_array_free(cost);
        }
        double ms = (bench_now() - t0) / steps * 1e3;
        if (ms < best) best = ms;
    }
    return best;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    if (steps <= 0) {
        fprintf(stderr, "usage: bench_cuda [STEPS]\n");
        return 2;
    }
    const tg_backend *be = tg_backend_cuda();
    const char *why = "this build has no CUDA backend";
    if (!be || !be->available(&why)) {
        printf("bench_cuda: %s: nothing to measure\n", why);
        return 0;
    }
    tg_ctx *ctx = tg_ctx_new();
    printf("MLP 784-500-10 training step, float32, ms per step (best of 5 rounds of %d steps)\n", steps);
    printf("%6s | %9s | %9s | %14s | %10s | %s\n", "batch", "tg cuda", "tg cpu", "torch resident", "torch h2d",
           "tg cuda / torch h2d");
    static const int batches[] = {60, 1024};
    for (int b = 0; b < 2; b++) {
        int B = batches[b];
        double ms[2];
        for (int d = 0; d < 2; d++) {
            /* A fresh graph per device: the weights start equal. */
            tg_graph *g = tg_graph_load(TG_BENCH_DIR "/../examples/mlp.json", ctx);
            if (!g) bench_die("load", ctx);
            tg_compile_options o = {.device = d ? "cpu" : "cuda"};
            tg_function *f = tg_function_compile(g, tg_graph_function_find(g, "train", ctx), &o, ctx);
            if (!f) bench_die("compile", ctx);
            int64_t xs[2] = {B, 784}, ys[2] = {B, 10};
            tg_array *x = tg_array_new(TG_FLOAT32, 2, xs), *y = tg_array_new(TG_FLOAT32, 2, ys);
            for (int64_t i = 0; i < B * 784; i++) ((float *)tg_array_data(x))[i] = (float)((i * 7919) % 1000) / 1000.f;
            for (int r = 0; r < B; r++) ((float *)tg_array_data(y))[r * 10 + r % 10] = 1;
            tg_array *in[2] = {x, y};
            int n = d ? (steps / 10 > 5 ? steps / 10 : 5) : steps;
            time_steps(f, in, n / 5 + 1, ctx); /* warm-up: pool, cuBLAS */
            ms[d] = time_steps(f, in, n, ctx);
            tg_array_free(x);
            tg_array_free(y);
            tg_function_free(f);
            tg_graph_free(g);
        }
        char args[64], key[64];
        snprintf(args, sizeof args, "%d %d", B, steps);
        const char *py = getenv("TG_BENCH_PYTHON") ? getenv("TG_BENCH_PYTHON") : "python3";
        char *out = bench_peer_py(py, "mlp_torch.py", args);
        snprintf(key, sizeof key, "torch_resident_%d", B);
        double tr = bench_peer_value(out, key);
        snprintf(key, sizeof key, "torch_h2d_%d", B);
        double th = bench_peer_value(out, key);
        if (tr < 0)
            printf("%6d | %9.3f | %9.3f | %14s | %10s | (PyTorch with CUDA not available to %s)\n", B, ms[0], ms[1],
                   "-", "-", py);
        else
            printf("%6d | %9.3f | %9.3f | %14.3f | %10.3f | %.2f\n", B, ms[0], ms[1], tr, th, ms[0] / th);
        free(out);
    }
    tg_ctx_free(ctx);
    return 0;
}
