/* exp, log, tanh, sigmoid and softplus at the ends of their range, beside
 * the same ops on ordinary arguments and beside NumPy (peers/tails.py)
 * on the same data, measured in the same run: the causal mask of an
 * attention layer (-1e9 or -inf in the upper triangle of each 64 x 64
 * tile of scores), log of probabilities half of which underflowed to 0,
 * sigmoid and softplus of logits far out (|x| of 200 to 1,000), and the
 * masked softmax itself over (8, 4, 64, 64) scores. ns per element, best
 * of REPS calls of one op compiled alone; tg with the threads OpenMP
 * gives it, NumPy on one.
 *
 *   build-bench/bench/bench_tails [N] [REPS]   (default 2^20 elements, 50)
 *
 * Before vmath.c guarded them, libmvec's vector functions sent each such argument to
 * the scalar function one lane at a time (3-22 ns an element against
 * 0.3-0.7). NumPy's own vector loops take them at full speed. */
#include <math.h>
#include <omp.h>

#include "bench_common.h"

/* The data, as peers/tails.py makes it: an ordinary argument for each i,
 * and whether i lies in the masked (upper) triangle of its 64 x 64 tile. */
static double ordinary(int64_t i) { return -3 + 6.0 * (double)((i * 7919) % 10007) / 10007.0; }
static int masked(int64_t i) { return i % 64 > (i / 64) % 64; }

typedef struct tcase {
    const char *name, *op, *attrs;
    int kind; /* 0 ordinary, 1 masked -1e9, 2 masked -inf, 3 |x| + 0.1, 4 |x| + 0.1 masked 0, 5 x * 300 masked */
} tcase;

static const tcase CASES[] = {
    {"exp", "exp", NULL, 0},          {"exp, mask -1e9", "exp", NULL, 1},    {"exp, mask -inf", "exp", NULL, 2},
    {"log", "log", NULL, 3},          {"log, half 0", "log", NULL, 4},       {"tanh", "tanh", NULL, 0},
    {"sigmoid", "sigmoid", NULL, 0},  {"sigmoid, |x|>=200", "sigmoid", NULL, 5},
    {"softplus", "softplus", NULL, 0}, {"softplus, |x|>=200", "softplus", NULL, 5},
    {"softmax", "softmax", "{\"axis\":-1}", 0}, {"softmax, mask -1e9", "softmax", "{\"axis\":-1}", 1},
    {"softmax, mask -inf", "softmax", "{\"axis\":-1}", 2},
};

static double value(int kind, int64_t i) {
    double o = ordinary(i);
    switch (kind) {
    case 1: return masked(i) ? -1e9 : o;
    case 2: return masked(i) ? -INFINITY : o;
    case 3: return fabs(o) + 0.1;
    case 4: return masked(i) ? 0 : fabs(o) + 0.1;
    case 5: return masked(i) ? (o < 0 ? -200 : 200) * (1 + fabs(o)) : o;
    default: return o;
    }
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 1 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 50;
    n = n / 4096 * 4096; /* whole (64, 64) tiles, and (8, 4, 64, 64) for softmax at 2^17 a group */
    if (n < 4096) n = 4096;
    tg_ctx *ctx = tg_ctx_new();
    char args[64];
    snprintf(args, sizeof args, "%lld %d", (long long)n, reps);
    char *peer = bench_peer("tails.py", args);
    printf("%lld elements, best of %d calls, ns per element; tg with %d OpenMP threads, NumPy with one%s\n",
           (long long)n, reps, omp_get_max_threads(), peer ? "" : "\n(peer: NumPy is not available)");
    printf("  %-20s %9s %9s %9s %9s\n", "", "tg f32", "NumPy f32", "tg f64", "NumPy f64");
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const tcase *c = &CASES[k];
        double t[2] = {0, 0}, p[2];
        for (int d = 0; d < 2; d++) {
            const char *dt = d ? "float64" : "float32";
            char json[1024];
            bool sm = !strcmp(c->op, "softmax");
            snprintf(json, sizeof json,
                     "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":"
                     "\"%s\",\"shape\":%s}}],\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]%s%s}]}",
                     dt, sm ? "[null,64]" : "[null]", c->op, c->attrs ? ",\"attrs\":" : "", c->attrs ? c->attrs : "");
            tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "bench", ctx);
            if (!g) bench_die("load", ctx);
            tg_compile_options o = {.preset = "none"};
            tg_function *f = tg_function_compile(g, 0, &o, ctx);
            if (!f) bench_die("compile", ctx);
            int64_t shape[2] = {sm ? n / 64 : n, 64};
            tg_array *x = tg_array_new(d ? TG_FLOAT64 : TG_FLOAT32, sm ? 2 : 1, shape);
            for (int64_t i = 0; i < n; i++) {
                double v = value(c->kind, i);
                if (d)
                    ((double *)tg_array_data(x))[i] = v;
                else
                    ((float *)tg_array_data(x))[i] = (float)v;
            }
            double best = 1e30;
            for (int r = 0; r < reps + 2; r++) {
                tg_array *y = NULL;
                double t0 = bench_now();
                if (tg_function_call(f, &x, &y, ctx)) bench_die("call", ctx);
                double dt_s = bench_now() - t0;
                tg_array_free(y);
                if (r >= 2 && dt_s < best) best = dt_s;
            }
            t[d] = best / (double)n * 1e9;
            char key[64];
            snprintf(key, sizeof key, "%zu_%s", k, d ? "f64" : "f32");
            p[d] = bench_peer_value(peer, key);
            tg_array_free(x);
            tg_function_free(f);
            tg_graph_free(g);
        }
        char pp[2][16];
        for (int d = 0; d < 2; d++) snprintf(pp[d], sizeof pp[d], p[d] >= 0 ? "%.3f" : "-", p[d]);
        printf("  %-20s %9.3f %9s %9.3f %9s\n", c->name, t[0], pp[0], t[1], pp[1]);
    }
    free(peer);
    tg_ctx_free(ctx);
    return 0;
}
