/* Broadcasting and strided n-ary iteration. */
#include <omp.h>
#include <string.h>

#include "tensor/tensor.h"

int tg_broadcast_shapes(int n, const int *ndims, const int64_t *const *shapes,
                        int *out_ndim, int64_t *out_shape, int *bad_dim) {
    int nd = 0;
    for (int k = 0; k < n; k++)
        if (ndims[k] > nd) nd = ndims[k];
    for (int d = 0; d < nd; d++) out_shape[d] = 1;
    for (int k = 0; k < n; k++) {
        int off = nd - ndims[k];
        for (int d = 0; d < ndims[k]; d++) {
            int64_t l = shapes[k][d], *o = &out_shape[off + d];
            if (l == *o) continue;
            if (*o == 1) {
                *o = l;
            } else if (l != 1) {
                if (bad_dim) *bad_dim = off + d;
                *out_ndim = nd;
                return -1;
            }
        }
    }
    *out_ndim = nd;
    return 0;
}

/* Merge axes, drop length-1 axes, then walk the outer axes with an
 * odometer and call fn on the innermost run. */
typedef struct iter_plan {
    int nops, ndim;
    int64_t shape[TG_MAX_NDIM];
    int64_t strides[TG_ITER_MAX_OPS][TG_MAX_NDIM];
} iter_plan;

static void plan_build(iter_plan *p, int nops, int ndim, const int64_t *shape,
                       const int64_t (*strides)[TG_MAX_NDIM]) {
    int nd = 0;
    p->nops = nops;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        if (nd > 0) {
            /* Merge with the previous kept axis when, for every operand,
             * stepping the previous axis once equals stepping this one
             * through its whole length. */
            bool merge = true;
            for (int k = 0; k < nops && merge; k++)
                merge = p->strides[k][nd - 1] == strides[k][d] * shape[d];
            if (merge) {
                p->shape[nd - 1] *= shape[d];
                for (int k = 0; k < nops; k++) p->strides[k][nd - 1] = strides[k][d];
                continue;
            }
        }
        p->shape[nd] = shape[d];
        for (int k = 0; k < nops; k++) p->strides[k][nd] = strides[k][d];
        nd++;
    }
    if (nd == 0) {
        p->shape[0] = 1;
        for (int k = 0; k < nops; k++) p->strides[k][0] = 0;
        nd = 1;
    }
    p->ndim = nd;
}

/* Runs outer indices [begin, end) of the flattened outer axes. */
static void plan_run(const iter_plan *p, char **base, int64_t begin,
                     int64_t end, tg_inner_fn fn, void *ud) {
    int nd = p->ndim, nops = p->nops;
    int64_t inner = p->shape[nd - 1];
    int64_t in_strides[TG_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) in_strides[k] = p->strides[k][nd - 1];
    int64_t idx[TG_MAX_NDIM] = {0};
    /* Decompose begin into outer indices. */
    int64_t r = begin;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = r % p->shape[d];
        r /= p->shape[d];
    }
    char *ptr[TG_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) {
        ptr[k] = base[k];
        for (int d = 0; d < nd - 1; d++) ptr[k] += idx[d] * p->strides[k][d];
    }
    for (int64_t o = begin; o < end; o++) {
        fn(inner, ptr, in_strides, ud);
        for (int d = nd - 2; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < nops; k++) ptr[k] += p->strides[k][d];
            if (idx[d] < p->shape[d]) break;
            for (int k = 0; k < nops; k++) ptr[k] -= p->strides[k][d] * idx[d];
            idx[d] = 0;
        }
    }
}

void tg_iter_run(int nops, char **base, int ndim, const int64_t *shape,
                 const int64_t (*strides)[TG_MAX_NDIM], tg_inner_fn fn,
                 void *ud, bool parallel) {
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) total *= shape[d];
    if (total == 0) return;
    iter_plan p;
    plan_build(&p, nops, ndim, shape, strides);
    int nd = p.ndim;
    int64_t outer = 1;
    for (int d = 0; d < nd - 1; d++) outer *= p.shape[d];
    int nthreads = parallel && total >= TG_PARALLEL_MIN && !omp_in_parallel()
                       ? omp_get_max_threads()
                       : 1;
    if (nthreads <= 1) {
        plan_run(&p, base, 0, outer, fn, ud);
        return;
    }
    if (outer >= nthreads) {
#pragma omp parallel for schedule(static) num_threads(nthreads)
        for (int t = 0; t < nthreads; t++) {
            int64_t b = outer * t / nthreads, e = outer * (t + 1) / nthreads;
            if (b < e) plan_run(&p, base, b, e, fn, ud);
        }
        return;
    }
    /* Few outer rows, long inner runs: split each inner run. */
    int64_t inner = p.shape[nd - 1];
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int t = 0; t < nthreads; t++) {
        int64_t b = inner * t / nthreads, e = inner * (t + 1) / nthreads;
        if (b >= e) continue;
        iter_plan q = p;
        q.shape[nd - 1] = e - b;
        char *bb[TG_ITER_MAX_OPS];
        for (int k = 0; k < nops; k++) bb[k] = base[k] + b * p.strides[k][nd - 1];
        plan_run(&q, bb, 0, outer, fn, ud);
    }
}
