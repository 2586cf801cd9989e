/* The MLP training step of the 2012 paper (784 -> 500 tanh -> 10 softmax,
 * cross-entropy, SGD; examples/mlp.json's `train`), in examples per
 * second, for batch 1, 10 and 60 in float32 and float64, beside:
 *   - the time of the step's BLAS calls alone in OpenBLAS (its five
 *     products: x W1, h W2, h^T d2, d2 W2^T, x^T d1), the bound tg's
 *     per-node work must vanish beside: with OpenBLAS's own threads, and
 *     on one thread (tg picks one thread for small products, ops/blas.c;
 *     BLAS/tg compares tg with the faster of the two);
 *   - the same step written by hand in NumPy, and PyTorch with 1 and 2
 *     threads (peers/mlp.py), measured in the same run.
 * Targets (issue 5): at batch 60 faster than every peer and within 1.25x
 * of the BLAS-only time; at batch 1 within 1.5x of it.
 *
 *   build-bench/bench/bench_mlp [MIN_SECONDS]
 */
#include <cblas.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_common.h"

void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);

static const int batches[] = {1, 10, 60};
enum { NB = 3 };
static double min_s = 0.3;


typedef struct blas_step {
    int b, f64;
    void *x, *W1, *h, *W2, *a, *d2, *gW2, *d1, *gW1;
} blas_step;

static void gemm(int f64, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const void *A,
                 int lda, const void *B, int ldb, void *C, int ldc) {
    if (f64)
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, A, lda, B, ldb, 0.0, C, ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

static void run_blas(void *ud) {
    blas_step *s = ud;
    int b = s->b, f = s->f64;
    gemm(f, CblasNoTrans, CblasNoTrans, b, 500, 784, s->x, 784, s->W1, 500, s->h, 500);
    gemm(f, CblasNoTrans, CblasNoTrans, b, 10, 500, s->h, 500, s->W2, 10, s->a, 10);
    gemm(f, CblasTrans, CblasNoTrans, 500, 10, b, s->h, 500, s->d2, 10, s->gW2, 10);
    gemm(f, CblasNoTrans, CblasTrans, b, 500, 10, s->d2, 10, s->W2, 10, s->d1, 500);
    gemm(f, CblasTrans, CblasNoTrans, 784, 500, b, s->x, 784, s->d1, 500, s->gW1, 500);
}

static tg_array *randn(tg_dtype dt, int nd, const int64_t *shape, double scale, unsigned *seed) {
    tg_array *a = tg_array_new(TG_FLOAT64, nd, shape);
    double *p = tg_array_data(a);
    for (int64_t i = 0; i < tg_array_size(a); i++) p[i] = ((double)rand_r(seed) / RAND_MAX - 0.5) * scale;
    tg_array *c = tg_array_copy(a, dt);
    tg_array_free(a);
    return c;
}

/* examples/mlp.json with dtype dt and fresh weights, in a temporary
 * folder. */
static char *write_graph(const char *dt, char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/examples/mlp.json", TG_BENCH_DIR "/..");
    FILE *in = fopen(path, "rb");
    if (!in) return NULL;
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *src = malloc((size_t)n + 1);
    if (fread(src, 1, (size_t)n, in) != (size_t)n) exit(1);
    src[n] = 0;
    fclose(in);
    /* float32 -> dt everywhere (types, inline values) */
    char *out = malloc((size_t)n * 2 + 1), *o = out;
    for (char *p = src; *p;) {
        if (!strncmp(p, "\"base64\": \"", 11)) {
            /* b1's zeros: as many elements as the float32 bytes held */
            char *e = strchr(p + 11, '"');
            long chars = e - (p + 11), pad = 0;
            for (char *q = e - 1; q > p && *q == '='; q--) pad++;
            long count = (chars / 4 * 3 - pad) / 4;
            o += sprintf(o, "\"data\": [");
            for (long i = 0; i < count; i++) o += sprintf(o, i ? ", 0" : "0");
            o += sprintf(o, "]");
            p = e + 1;
        } else if (!strncmp(p, "float32", 7)) {
            o += sprintf(o, "%s", dt);
            p += 7;
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
    free(src);
    snprintf(path, sizeof path, "%s/mlp", dir);
    mkdir(path, 0700);
    tg_dtype t = strcmp(dt, "float64") ? TG_FLOAT32 : TG_FLOAT64;
    unsigned seed = 7;
    int64_t s1[2] = {784, 500}, s2[2] = {500, 10};
    tg_array *W1 = randn(t, 2, s1, 0.1, &seed), *W2 = randn(t, 2, s2, 0.1, &seed);
    tg_ctx *ctx = tg_ctx_new();
    snprintf(path, sizeof path, "%s/mlp/W1.npy", dir);
    if (tg_npy_save(path, W1, ctx)) bench_die("npy", ctx);
    snprintf(path, sizeof path, "%s/mlp/W2.npy", dir);
    if (tg_npy_save(path, W2, ctx)) bench_die("npy", ctx);
    tg_ctx_free(ctx);
    tg_array_free(W1);
    tg_array_free(W2);
    char *gpath = malloc(700);
    snprintf(gpath, 700, "%s/mlp.json", dir);
    FILE *g = fopen(gpath, "wb");
    fputs(out, g);
    fclose(g);
    free(out);
    return gpath;
}

int main(int argc, char **argv) {
    if (argc > 1) min_s = atof(argv[1]);
    char dir[] = "/tmp/tg-bench-mlp-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char args[64];
    snprintf(args, sizeof args, "1,10,60 %g", min_s);
    char *peer = bench_peer("mlp.py", args);
    printf("MLP training step (784-500-10), examples per second (higher is better); OMP threads: %s\n",
           getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "default");
    printf("%-8s %5s %10s %10s %10s %8s %10s %10s %10s\n", "dtype", "batch", "tg", "BLAS-only", "BLAS 1t",
           "BLAS/tg", "numpy", "torch 1t", "torch 2t");
    const char *dts[2] = {"float32", "float64"};
    for (int di = 0; di < 2; di++) {
        char *gpath = write_graph(dts[di], dir);
        if (!gpath) {
            fprintf(stderr, "cannot read examples/mlp.json\n");
            return 1;
        }
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tg_graph_load(gpath, ctx);
        if (!g) bench_die("load", ctx);
        tg_dtype dt = di ? TG_FLOAT64 : TG_FLOAT32;
        for (int bi = 0; bi < NB; bi++) {
            int b = batches[bi];
            bench_call s = {.ctx = ctx};
            s.f = tg_function_compile(g, tg_graph_function_find(g, "train", ctx), NULL, ctx);
            if (!s.f) bench_die("compile", ctx);
            unsigned seed = 3;
            int64_t xs[2] = {b, 784}, ys[2] = {b, 10};
            s.in[0] = randn(dt, 2, xs, 1.0, &seed);
            s.in[1] = tg_array_new(dt, 2, ys);
            for (int i = 0; i < b; i++) {
                int64_t k = (i * 7) % 10;
                tg_array *y1 = tg_array_new_scalar(dt, 1.0);
                memcpy((char *)tg_array_data(s.in[1]) + (i * 10 + k) * tg_dtype_size(dt), tg_array_data(y1),
                       tg_dtype_size(dt));
                tg_array_free(y1);
            }
            double tg_rate = bench_rate(bench_run_call, &s, 10, min_s) * b;
            size_t es = tg_dtype_size(dt);
            blas_step bs = {.b = b, .f64 = di};
            void **bufs[] = {&bs.x, &bs.W1, &bs.h, &bs.W2, &bs.a, &bs.d2, &bs.gW2, &bs.d1, &bs.gW1};
            size_t sizes[] = {(size_t)b * 784, 784 * 500, (size_t)b * 500, 5000, (size_t)b * 10, (size_t)b * 10,
                              5000, (size_t)b * 500, 784 * 500};
            for (int k = 0; k < 9; k++) *bufs[k] = calloc(sizes[k], es);
            double blas_rate = bench_rate(run_blas, &bs, 10, min_s) * b;
            int nth = openblas_get_num_threads();
            openblas_set_num_threads(1);
            double blas1_rate = bench_rate(run_blas, &bs, 10, min_s) * b;
            openblas_set_num_threads(nth);
            double best = blas_rate > blas1_rate ? blas_rate : blas1_rate;
            for (int k = 0; k < 9; k++) free(*bufs[k]);
            char key[64];
            double pv[3];
            const char *pn[3] = {"numpy", "torch1", "torch2"};
            for (int k = 0; k < 3; k++) {
                snprintf(key, sizeof key, "%s_%s_%d", pn[k], dts[di], b);
                pv[k] = bench_peer_value(peer, key);
            }
            printf("%-8s %5d %10.0f %10.0f %10.0f %8.2f", dts[di], b, tg_rate, blas_rate, blas1_rate, best / tg_rate);
            for (int k = 0; k < 3; k++)
                if (pv[k] > 0)
                    printf(" %10.0f", pv[k]);
                else
                    printf(" %10s", "-");
            printf("\n");
            tg_array_free(s.in[0]);
            tg_array_free(s.in[1]);
            tg_function_free(s.f);
        }
        tg_graph_free(g);
        tg_ctx_free(ctx);
        unlink(gpath);
        free(gpath);
    }
    char p[700];
    snprintf(p, sizeof p, "%s/mlp/W1.npy", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/mlp/W2.npy", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/mlp", dir);
    rmdir(p);
    rmdir(dir);
    if (!peer) printf("peers: numpy not installed\n");
    else if (strstr(peer, "torch: not installed")) printf("torch: not installed (apt-get install python3-torch)\n");
    printf("BLAS/tg is tg's time over the faster BLAS-only time (target: <= 1.25 at batch 60, <= 1.5 at batch 1)\n");
    free(peer);
    return 0;
}
