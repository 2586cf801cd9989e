/* Private: the NaN guard's device reduction (stats.cu), called from the
 * host side of the backend (events.c). Plain C types only, so that C
 * files can include this without the CUDA headers. */
#ifndef TG_CUDA_STATS_H
#define TG_CUDA_STATS_H

#include <stdint.h>

#include "backend/cuda/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { TG_CU_STATS_F16 = 0, TG_CU_STATS_F32 = 1, TG_CU_STATS_F64 = 2 };

/* The array: n elements; when it is not contiguous, element i (C order)
 * is at sum(idx[d] * strides[d]) elements from the data pointer. */
typedef struct tg_cu_stats_in {
    int dtype; /* TG_CU_STATS_* */
    int ndim, contiguous;
    int64_t n;
    int64_t shape[TG_CU_MAXD], strides[TG_CU_MAXD];
    double big; /* count the finite elements with |x| > big; INFINITY: none */
} tg_cu_stats_in;

/* Counts over every element; min, max and sum over the finite ones (min
 * and max NaN when there is none). */
typedef struct tg_cu_stats_out {
    int64_t nan, pinf, ninf, big, finite;
    double min, max, sum;
} tg_cu_stats_out;

/* Reduce on `stream` (after the work already queued there) and wait for
 * the few bytes of the result: the only copy to the host. Returns 0 or a
 * CUDA error code (cudaError_t). Serialised by a lock (one scratch
 * buffer, allocated at the first call and kept). */
int tg_cu_stats(const tg_cu_stats_in *p, const void *data, tg_cu_stats_out *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
