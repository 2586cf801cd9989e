/* What the tools ask of the CUDA device (tg_backend_tools): timing events
 * for tgprof, a full synchronisation for its exact mode, and the NaN
 * guard's statistics computed on the device (stats.cu).
 *
 * Events are ordinary timing events (not cudaEventDisableTiming) recorded
 * on the compute stream, where every kernel and cuBLAS call runs; an
 * upload makes the compute stream wait for its copy, so a pair of events
 * around an upload brackets the copy too. Recording costs a few
 * microseconds on the host and never waits; only reading an elapsed time
 * waits, for its end event, which the profiler does once per call after
 * the call has finished.
 */
#include <cuda_runtime_api.h>
#include <math.h>

#include "backend/backend.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/stats.h"

static int check(cudaError_t e, tg_ctx *ctx) {
    if (e == cudaSuccess) return TG_OK;
    /* The runtime keeps a failed call's error as the thread's last error:
     * cleared, or the next kernel launch (kernels.cu returns
     * cudaGetLastError()) would fail with it. */
    cudaGetLastError();
    return tg_errorf(ctx, e == cudaErrorMemoryAllocation ? TG_ENOMEM : TG_ERUNTIME, "CUDA: %s",
                     cudaGetErrorString(e));
}

static int ev_create(void **ev, tg_ctx *ctx) {
    *ev = NULL;
    if (!tg_cuda_available()) return tg_errorf(ctx, TG_ERUNTIME, "no CUDA device");
    cudaEvent_t e;
    int rc = check(cudaEventCreateWithFlags(&e, cudaEventDefault), ctx);
    if (!rc) *ev = e;
    return rc;
}

static void ev_destroy(void *ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

static int ev_record(void *ev, tg_ctx *ctx) {
    return check(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)tg_cuda_compute_stream()), ctx);
}

static int ev_elapsed(void *start, void *end, double *ms, tg_ctx *ctx) {
    float f = 0;
    int rc = check(cudaEventSynchronize((cudaEvent_t)end), ctx);
    if (!rc) rc = check(cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)end), ctx);
    *ms = rc ? 0 : (double)f;
    return rc;
}

static int dev_sync(tg_ctx *ctx) {
    if (!tg_cuda_available()) return TG_OK;
    return check(cudaDeviceSynchronize(), ctx);
}

static int dev_stats(const tg_array *a, double big, tg_backend_stats *st, tg_ctx *ctx) {
    int code = a->dtype == TG_FLOAT64   ? TG_CU_STATS_F64
             : a->dtype == TG_FLOAT32   ? TG_CU_STATS_F32
             : a->dtype == TG_FLOAT16   ? TG_CU_STATS_F16
                                        : -1;
    if (code < 0)
        return tg_errorf(ctx, TG_ETYPE, "CUDA statistics: expected a float array, got %s",
                         tg_dtype_name(a->dtype));
    if (a->ndim > TG_CU_MAXD)
        return tg_errorf(ctx, TG_EINVAL, "CUDA statistics: %d dimensions (at most %d)", a->ndim, TG_CU_MAXD);
    tg_cu_stats_in p = {.dtype = code, .ndim = a->ndim, .contiguous = tg_array_is_contiguous(a)};
    p.n = tg_array_size_inline(a);
    p.big = isfinite(big) && big > 0 ? big : INFINITY;
    int64_t e = (int64_t)tg_isize(a->dtype);
    for (int d = 0; d < a->ndim; d++) {
        p.shape[d] = a->shape[d];
        p.strides[d] = a->strides[d] / e;
    }
    tg_cu_stats_out o;
    int rc = check((cudaError_t)tg_cu_stats(&p, a->data, &o, tg_cuda_compute_stream()), ctx);
    if (rc) return rc;
    *st = (tg_backend_stats){.size = p.n, .nan = o.nan, .pinf = o.pinf, .ninf = o.ninf, .big = o.big,
                             .finite = o.finite, .min = o.min, .max = o.max, .sum = o.sum};
    return TG_OK;
}

const tg_backend_tools tg_cuda_tools = {
    .event_create = ev_create,
    .event_destroy = ev_destroy,
    .event_record = ev_record,
    .event_elapsed = ev_elapsed,
    .sync = dev_sync,
    .stats = dev_stats,
};
