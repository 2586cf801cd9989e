/* The elementwise side of a transformer block: a layer norm and a GELU
 * (the tanh form), forward and backward, float32: y = gelu(ln(x) * g + b)
 * and, for an incoming gradient gy, the gradients of sum(y * gy) in x, g
 * and b, one function of four outputs. No matrix product: what is left is
 * reductions over rows and elementwise loops, where the number of passes
 * over memory is the time. tg compiles it three ways in the same run:
 * fast_run (fusion with extra outputs, a result read again after the
 * group, as d = x - mean(x) by the division after the variance, coming
 * out of the loop that makes it first; and recomputation, the backward's
 * loop computing z^2 and 1 + tanh(u) again from z and tanh(u) instead of
 * reading them), fast_run with --exclude fuse_multi_output --exclude
 * fuse_recompute (a producer joins only when the group reads all of it,
 * Theano's rule: column "theano") and --exclude fusion (one loop per op).
 * Peers (bench/peers/layernorm.py): the same forward and backward by hand
 * in NumPy, and PyTorch's autograd of F.layer_norm and F.gelu(approximate=
 * 'tanh') (ATen's own fused layer-norm kernels) with 1 and 2 threads.
 * Best of 3 rounds of at least MIN_SECONDS, ms per call. The three tg
 * functions must agree (exit 1 otherwise).
 *
 * With TG_DEVICE=cuda the three functions are compiled for the GPU: x, g,
 * b and gy are uploaded once (device arrays passed as inputs, PyTorch's
 * resident case) and the four outputs come back to the host at each call,
 * as a tg call returns them; the GPU's fast_run must agree with the CPU's.
 * The peer is then PyTorch on the same GPU (layernorm.py cuda, run with
 * $TG_BENCH_PYTHON, default python3): inputs resident and the four
 * results copied to the host ("torch"), and with nothing copied ("torch
 * res", synchronised once per round).
 *   bench_layernorm [MIN_SECONDS [ROWSxCOLS...]]
 *   bench_layernorm --json ROWSxCOLS    print the graph (for tgprof, tgc)
 */
#include <math.h>
#include <omp.h>

#include "backend/backend.h"
#include "bench_common.h"
#include "vm/vm.h"

/* The graph: x (n, d), g (d), b (d), gy (n, d) -> y, gx, gg, gb. */
static char *graph_json(long n, long d) {
    static const char *fmt =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[%ld,%ld]}},"
        "{\"id\":\"g\",\"type\":{\"dtype\":\"float32\",\"shape\":[%ld]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float32\",\"shape\":[%ld]}},"
        "{\"id\":\"gy\",\"type\":{\"dtype\":\"float32\",\"shape\":[%ld,%ld]}}],"
        "\"nodes\":["
        "{\"op\":\"mean\",\"inputs\":[\"x\"],\"outputs\":[\"m\"],\"attrs\":{\"axis\":-1,\"keepdims\":true}},"
        "{\"op\":\"sub\",\"inputs\":[\"x\",\"m\"],\"outputs\":[\"dx\"]},"
        "{\"op\":\"sqr\",\"inputs\":[\"dx\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"mean\",\"inputs\":[\"s\"],\"outputs\":[\"v\"],\"attrs\":{\"axis\":-1,\"keepdims\":true}},"
        "{\"op\":\"add\",\"inputs\":[\"v\",{\"value\":1e-5}],\"outputs\":[\"ve\"]},"
        "{\"op\":\"sqrt\",\"inputs\":[\"ve\"],\"outputs\":[\"sd\"]},"
        "{\"op\":\"true_div\",\"inputs\":[\"dx\",\"sd\"],\"outputs\":[\"xh\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"xh\",\"g\"],\"outputs\":[\"xg\"]},"
        "{\"op\":\"add\",\"inputs\":[\"xg\",\"b\"],\"outputs\":[\"z\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"z\",\"z\"],\"outputs\":[\"z2\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"z2\",\"z\"],\"outputs\":[\"z3\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"z3\",{\"value\":0.044715}],\"outputs\":[\"c3\"]},"
        "{\"op\":\"add\",\"inputs\":[\"z\",\"c3\"],\"outputs\":[\"a\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"a\",{\"value\":0.7978845608}],\"outputs\":[\"u\"]},"
        "{\"op\":\"tanh\",\"inputs\":[\"u\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"add\",\"inputs\":[\"t\",{\"value\":1}],\"outputs\":[\"t1\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"z\",\"t1\"],\"outputs\":[\"zt\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"zt\",{\"value\":0.5}],\"outputs\":[\"y\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"y\",\"gy\"],\"outputs\":[\"yg\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"yg\"],\"outputs\":[\"cost\"]},"
        "{\"op\":\"grad\",\"inputs\":[\"cost\",\"x\",\"g\",\"b\"],\"outputs\":[\"gx\",\"gg\",\"gb\"]}],"
        "\"functions\":{\"step\":{\"inputs\":[\"x\",\"g\",\"b\",\"gy\"],\"outputs\":[\"y\",\"gx\",\"gg\",\"gb\"]}}}";
    size_t len = strlen(fmt) + 128;
    char *s = malloc(len);
    if (s) snprintf(s, len, fmt, n, d, d, d, n, d);
    return s;
}

typedef struct ln_call {
    tg_function *f;
    tg_array *in[4];
    tg_ctx *ctx;
} ln_call;

static void run_step(void *ud) {
    ln_call *s = ud;
    tg_array *out[4];
    if (tg_function_call(s->f, s->in, out, s->ctx)) bench_die("call", s->ctx);
    for (int k = 0; k < 4; k++) tg_array_free(out[k]);
}

static tg_array *noise(int ndim, const int64_t *shape, float lo, float hi, unsigned seed) {
    tg_array *a = tg_array_new(TG_FLOAT32, ndim, shape);
    float *p = tg_array_data(a);
    uint64_t s = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (int64_t i = 0; i < tg_array_size(a); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = lo + (hi - lo) * (float)((double)(s >> 40) / 16777216.0);
    }
    return a;
}

/* Largest |a - b| / (1 + |b|) over the elements of two float32 arrays. */
static double rel_diff(const tg_array *a, const tg_array *b) {
    const float *x = tg_array_data(a), *y = tg_array_data(b);
    double worst = 0;
    for (int64_t i = 0; i < tg_array_size(a); i++) {
        double e = fabs((double)x[i] - (double)y[i]) / (1 + fabs((double)y[i]));
        if (e > worst || e != e) worst = e != e ? INFINITY : e;
    }
    return worst;
}

static const char *const MODES[3] = {"fast_run", "theano", "unfused"};

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--json")) {
        long n = 0, d = 0;
        if (sscanf(argv[2], "%ldx%ld", &n, &d) != 2 || n < 1 || d < 1) {
            fprintf(stderr, "bench_layernorm: bad size '%s' (ROWSxCOLS)\n", argv[2]);
            return 2;
        }
        char *json = graph_json(n, d);
        if (!json) return 1;
        puts(json);
        free(json);
        return 0;
    }
    double min_s = argc > 1 ? atof(argv[1]) : 0.5;
    const char *dflt[] = {"128x768", "2048x768", "8192x1024"};
    int nsizes = argc > 2 ? argc - 2 : 3;
    tg_ctx *ctx = tg_ctx_new();
    const char *dev = getenv("TG_DEVICE");
    const bool cuda = dev && !strcmp(dev, "cuda");
    const tg_backend *be = cuda ? tg_backend_cuda() : NULL;
    if (cuda) {
        const char *why = "this build has no CUDA backend";
        if (!be || !be->available(&why)) {
            printf("bench_layernorm: TG_DEVICE=cuda: %s: nothing to measure\n", why);
            tg_ctx_free(ctx);
            return 0;
        }
    }
    printf("layer norm + GELU (tanh), forward and backward (gradients in x, g, b), float32,\n"
           "ms per call, best of 3 rounds of %.2f s; ",
           min_s);
    if (cuda)
        printf("tg on the GPU, the inputs resident, the 4 outputs copied to the host each call\n");
    else
        printf("tg with %d threads\n", omp_get_max_threads());
    if (cuda)
        printf("%-10s %8s %8s %8s %8s %8s %9s %8s\n", "rows x d", "fast_run", "theano", "unfused", "nodes", "torch",
               "torch res", "tg/torch");
    else
        printf("%-10s %8s %8s %8s %8s %8s %8s %8s %8s\n", "rows x d", "fast_run", "theano", "unfused", "nodes",
               "numpy", "torch 1", "torch 2", "tg/t2");
    int rc = 0;
    for (int si = 0; si < nsizes; si++) {
        const char *spec = argc > 2 ? argv[2 + si] : dflt[si];
        long n = 0, d = 0;
        if (sscanf(spec, "%ldx%ld", &n, &d) != 2 || n < 1 || d < 1) {
            fprintf(stderr, "bench_layernorm: bad size '%s' (ROWSxCOLS)\n", spec);
            return 2;
        }
        char *json = graph_json(n, d);
        tg_graph *g = json ? tg_graph_load_string(json, strlen(json), NULL, "layernorm", ctx) : NULL;
        free(json);
        if (!g) bench_die("layernorm", ctx);
        int64_t nd[2] = {n, d}, dd[1] = {d};
        ln_call call = {.ctx = ctx};
        call.in[0] = noise(2, nd, -2, 2, 1);
        call.in[1] = noise(1, dd, 0.5f, 1.5f, 2);
        call.in[2] = noise(1, dd, -0.5f, 0.5f, 3);
        call.in[3] = noise(2, nd, -1, 1, 4);
        double ms[3];
        int nodes[3];
        tg_array *res[3][4], *host[4], *cpu[4] = {NULL};
        if (cuda) {
            /* The CPU's fast_run, to check the GPU's against; then the
             * inputs go up once. */
            tg_compile_options o = {.preset = "fast_run", .device = "cpu"};
            tg_function *fc = tg_function_compile(g, 0, &o, ctx);
            if (!fc || tg_function_call(fc, call.in, cpu, ctx)) bench_die("cpu", ctx);
            tg_function_free(fc);
            for (int k = 0; k < 4; k++) {
                host[k] = call.in[k];
                call.in[k] = NULL;
                if (be->to_device(host[k], &call.in[k], ctx)) bench_die("upload", ctx);
            }
        }
        for (int m = 0; m < 3; m++) {
            static const char *const single[] = {"fuse_multi_output", "fuse_recompute", NULL},
                                     *const none[] = {"fusion", NULL};
            tg_compile_options o = {.preset = "fast_run", .exclude = m == 1 ? single : m == 2 ? none : NULL};
            call.f = tg_function_compile(g, 0, &o, ctx);
            if (!call.f) bench_die(MODES[m], ctx);
            if (cuda && !call.f->on_device) {
                fprintf(stderr, "bench_layernorm: %s: nothing was placed on the GPU\n", MODES[m]);
                return 1;
            }
            nodes[m] = tg_function_node_count(call.f);
            if (tg_function_call(call.f, call.in, res[m], ctx)) bench_die(MODES[m], ctx);
            ms[m] = 1e3 / bench_rate(run_step, &call, 2, min_s);
            tg_function_free(call.f);
        }
        for (int k = 0; cuda && k < 4; k++) {
            double tol = k >= 2 ? 1e-6 * (double)n : 1e-4, e = rel_diff(res[0][k], cpu[k]);
            if (!(e <= tol)) {
                fprintf(stderr, "bench_layernorm: %s: output %d on the GPU differs from the CPU's by %.3g (relative)\n",
                        spec, k, e);
                rc = 1;
            }
            tg_array_free(cpu[k]);
            tg_array_free(host[k]);
        }
        for (int m = 1; m < 3; m++)
            for (int k = 0; k < 4; k++) {
                /* gg and gb sum n rows: their rounding grows with n */
                double tol = k >= 2 ? 1e-6 * (double)n : 1e-4, e = rel_diff(res[0][k], res[m][k]);
                if (!(e <= tol)) {
                    fprintf(stderr, "bench_layernorm: %s: output %d differs from %s by %.3g (relative)\n", spec, k,
                            MODES[m], e);
                    rc = 1;
                }
            }
        for (int m = 0; m < 3; m++)
            for (int k = 0; k < 4; k++) tg_array_free(res[m][k]);
        for (int k = 0; k < 4; k++) tg_array_free(call.in[k]);
        tg_graph_free(g);
        char args[64];
        char nn[32];
        snprintf(nn, sizeof nn, "%d/%d/%d", nodes[0], nodes[1], nodes[2]);
        if (cuda) {
            snprintf(args, sizeof args, "cuda %g %ld %ld", min_s, n, d);
            char *p = bench_peer_py(getenv("TG_BENCH_PYTHON") ? getenv("TG_BENCH_PYTHON") : "python3",
                                    "layernorm.py", args);
            double th = bench_peer_value(p, "torch_ms"), tr = bench_peer_value(p, "torch_res_ms");
            char a[2][16] = {"-", "-"}, ratio[16] = "-";
            if (th > 0) snprintf(a[0], sizeof a[0], "%.3f", th);
            if (tr > 0) snprintf(a[1], sizeof a[1], "%.3f", tr);
            if (th > 0) snprintf(ratio, sizeof ratio, "%.2f", ms[0] / th);
            printf("%-10s %8.3f %8.3f %8.3f %8s %8s %9s %8s\n", spec, ms[0], ms[1], ms[2], nn, a[0], a[1], ratio);
            fflush(stdout);
            free(p);
            continue;
        }
        snprintf(args, sizeof args, "1 %g %ld %ld", min_s, n, d);
        char *p1 = bench_peer("layernorm.py", args);
        snprintf(args, sizeof args, "2 %g %ld %ld", min_s, n, d);
        char *p2 = bench_peer("layernorm.py", args);
        double np_ms = bench_peer_value(p1, "numpy_ms"), t1 = bench_peer_value(p1, "torch_ms"),
               t2 = bench_peer_value(p2, "torch_ms");
        char a[3][16];
        double peer[3] = {np_ms, t1, t2};
        for (int k = 0; k < 3; k++) {
            if (peer[k] > 0)
                snprintf(a[k], sizeof a[k], "%.3f", peer[k]);
            else
                snprintf(a[k], sizeof a[k], "-");
        }
        char ratio[16] = "-";
        if (t2 > 0) snprintf(ratio, sizeof ratio, "%.2f", ms[0] / t2);
        printf("%-10s %8.3f %8.3f %8.3f %8s %8s %8s %8s %8s\n", spec, ms[0], ms[1], ms[2], nn, a[0], a[1], a[2],
               ratio);
        fflush(stdout);
        free(p1);
        free(p2);
    }
    if (cuda)
        printf("(nodes: scheduled nodes of each tg function, transfers included; tg/torch: tg's fast_run time over\n"
               "PyTorch's, both with the inputs on the GPU and the outputs copied to the host)\n");
    else
        printf("(nodes: scheduled nodes of each tg function; tg/t2: tg's fast_run time over PyTorch's with 2 "
               "threads)\n");
    tg_ctx_free(ctx);
    return rc;
}
