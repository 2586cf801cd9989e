/* The NaN guard's cost (tgdebug nanguard, tg/debug.h) on the MLP's
 * training function (examples/mlp.json, `train`, float32), per call:
 * plain, and under the guard (every node's float outputs checked for NaN,
 * Inf and |x| > 1e10), for batches of 1, 60 and 600. Two functions, each
 * compiled from its own load of the graph (so each trains its own
 * weights, as a guarded training loop does), are called in alternating
 * pairs, so both see the same load; the ratio is the median of the
 * per-pair ratios. Beside it, the guard's extra time per call, the
 * elements its checks read in a call (tg_nanguard_elements_read: a
 * weight update proved clean in place is not read), and NumPy doing
 * NanGuardMode's checks (np.isnan, np.isinf and the big test, one array
 * at a time; and np.isfinite alone) over arrays of the sizes the guard
 * checks in one call (peers/nanguard.py). Last, the ratio again with the
 * plain calls made by a function that shares the guarded one's weights:
 * they change between guarded calls, so the guard reads them again at
 * every call's start.
 * Target (issue 9): the guarded call at most 2x the plain one.
 *
 *   build-bench/bench/bench_nanguard [PAIRS]
 */
#include <math.h>

#include "bench_common.h"
#include "debug/guard.h"
#include "vm/vm.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A hook that adds up the sizes of the float outputs a call makes (what
 * the guard reads, with the shared values), skipping views as it does. */
typedef struct sizes {
    char list[8192];
    size_t len;
    int64_t total;
} sizes;

static int size_hook(void *ud, const tg_function *f, int k, tg_array *const *in, tg_array *const *out,
                     tg_ctx *ctx) {
    (void)in;
    (void)ctx;
    sizes *s = ud;
    const tg_node *n = f->sched[k].node;
    for (int j = 0; j < n->nout; j++) {
        if (!out[j] || !tg_dtype_is_float(out[j]->dtype)) continue;
        if (j == 0 && n->op->view_of >= 0) continue;
        int64_t m = tg_array_size(out[j]);
        s->total += m;
        if (s->len < sizeof s->list - 32) s->len += (size_t)snprintf(s->list + s->len, sizeof s->list - s->len, "%lld,", (long long)m);
    }
    return TG_OK;
}

int main(int argc, char **argv) {
    int pairs = argc > 1 ? atoi(argv[1]) : 200;
    if (pairs < 5) pairs = 5;
    static const int batches[] = {1, 60, 600};
    printf("NaN guard on the MLP's train (examples/mlp.json, float32), ms per call (lower is better); OMP threads: %s\n",
           getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "default");
    printf("%5s %8s %8s %9s %8s %8s %11s %8s %14s %12s %9s\n", "batch", "output", "read", "plain", "guarded",
           "ratio", "guard extra", "nodes", "numpy isnan+", "numpy", "ratio,");
    printf("%5s %8s %8s %9s %8s %8s %11s %8s %14s %12s %9s\n", "", "elements", "", "", "", "(median)", "per call",
           "", "isinf+big", "isfinite", "shared W");
    char path[700];
    snprintf(path, sizeof path, "%s/../examples/mlp.json", TG_BENCH_DIR);
    for (int bi = 0; bi < 3; bi++) {
        int b = batches[bi];
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tg_graph_load(path, ctx), *g2 = tg_graph_load(path, ctx);
        if (!g || !g2) bench_die("load", ctx);
        int fi = tg_graph_function_find(g, "train", ctx);
        tg_function *fp = tg_function_compile(g, fi, NULL, ctx), *fg = tg_function_compile(g2, fi, NULL, ctx),
                    *fs = tg_function_compile(g2, fi, NULL, ctx);
        if (!fp || !fg || !fs) bench_die("compile", ctx);
        int64_t xs[2] = {b, 784}, ys[2] = {b, 10};
        tg_array *in[2] = {tg_array_new(TG_FLOAT32, 2, xs), tg_array_new(TG_FLOAT32, 2, ys)};
        float *x = tg_array_data(in[0]), *y = tg_array_data(in[1]);
        unsigned seed = 5;
        for (int64_t i = 0; i < (int64_t)b * 784; i++) x[i] = (float)rand_r(&seed) / (float)RAND_MAX;
        for (int i = 0; i < b; i++) y[i * 10 + (i * 7) % 10] = 1.0f;
        tg_array *out[1];
        /* The float outputs of a call, and the shared values (the arrays the
         * guard covers; NumPy checks arrays of these sizes). */
        sizes sz = {0};
        tg_hooks h = {.after = size_hook, .ud = &sz};
        tg_function_set_hooks(fp, &h);
        if (tg_function_call(fp, in, out, ctx)) bench_die("call", ctx);
        tg_array_free(out[0]);
        tg_function_set_hooks(fp, NULL);
        /* and the shared values */
        for (int i = 0; i < fp->nshared; i++) {
            const tg_array *a = tg_shared_value(fp->shared[i], NULL);
            if (!a || !tg_dtype_is_float(a->dtype)) continue;
            sz.total += tg_array_size(a);
            if (sz.len < sizeof sz.list - 32)
                sz.len += (size_t)snprintf(sz.list + sz.len, sizeof sz.list - sz.len, "%lld,", (long long)tg_array_size(a));
        }
        tg_nanguard *ng = tg_nanguard_new(fg, NULL, ctx);
        if (!ng) bench_die("nanguard", ctx);
        for (int i = 0; i < 5; i++) {
            if (tg_function_call(fp, in, out, ctx)) bench_die("call", ctx);
            tg_array_free(out[0]);
            if (tg_nanguard_call(ng, in, out, ctx)) bench_die("guarded call", ctx);
            tg_array_free(out[0]);
        }
        int np_ = b >= 600 ? pairs / 4 : pairs;
        if (np_ < 5) np_ = 5;
        double *ratio = malloc(sizeof *ratio * (size_t)np_), *tp = malloc(sizeof *tp * (size_t)np_),
               *tq = malloc(sizeof *tq * (size_t)np_);
        double *ratio_s = malloc(sizeof *ratio_s * (size_t)np_);
        for (int round = 0; round < 2; round++)
            for (int p = 0; p < np_; p++) {
                double t0 = bench_now();
                if (tg_function_call(round ? fs : fp, in, out, ctx)) bench_die("call", ctx);
                double t1 = bench_now();
                tg_array_free(out[0]);
                double t2 = bench_now();
                if (tg_nanguard_call(ng, in, out, ctx)) bench_die("guarded call", ctx);
                double t3 = bench_now();
                tg_array_free(out[0]);
                if (round) {
                    ratio_s[p] = (t3 - t2) / (t1 - t0);
                    continue;
                }
                tp[p] = t1 - t0;
                tq[p] = t3 - t2;
                ratio[p] = tq[p] / tp[p];
            }
        /* what a call of the guarded training loop reads */
        if (tg_nanguard_call(ng, in, out, ctx)) bench_die("guarded call", ctx);
        tg_array_free(out[0]);
        if (tg_nanguard_call(ng, in, out, ctx)) bench_die("guarded call", ctx);
        tg_array_free(out[0]);
        long long nread = (long long)tg_nanguard_elements_read(ng);
        qsort(ratio, (size_t)np_, sizeof *ratio, cmp_d);
        qsort(ratio_s, (size_t)np_, sizeof *ratio_s, cmp_d);
        qsort(tp, (size_t)np_, sizeof *tp, cmp_d);
        qsort(tq, (size_t)np_, sizeof *tq, cmp_d);
        double plain = tp[np_ / 2] * 1e3, guarded = tq[np_ / 2] * 1e3;
        char args[8300];
        snprintf(args, sizeof args, "%s %d", sz.list, 30);
        char *peer = bench_peer("nanguard.py", args);
        double p1 = bench_peer_value(peer, "numpy_isnan_isinf"), p2 = bench_peer_value(peer, "numpy_isfinite");
        printf("%5d %8lld %8lld %9.3f %8.3f %8.2f %11.3f %8d", b, (long long)sz.total, nread, plain, guarded,
               ratio[np_ / 2], guarded - plain, tg_function_node_count(fg));
        if (p1 > 0)
            printf(" %14.3f %12.3f", p1, p2);
        else
            printf(" %14s %12s", "-", "-");
        printf(" %9.2f\n", ratio_s[np_ / 2]);
        free(peer);
        free(ratio);
        free(ratio_s);
        free(tp);
        free(tq);
        tg_nanguard_free(ng);
        tg_array_free(in[0]);
        tg_array_free(in[1]);
        tg_function_free(fp);
        tg_function_free(fg);
        tg_function_free(fs);
        tg_graph_free(g);
        tg_graph_free(g2);
        tg_ctx_free(ctx);
    }
    printf("ratio: guarded over plain, the median of %d alternating pairs (target: at most 2); output elements: "
           "the float outputs and shared values of a call; read: what the guard's checks read in a call of a "
           "guarded training loop; guard extra and the peers' columns: ms per call for the same arrays; "
           "ratio, shared W: the plain calls update the guarded function's weights\n",
           pairs);
    return 0;
}
