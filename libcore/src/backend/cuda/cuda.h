/* Private: what the CUDA backend offers beyond the tg_backend interface,
 * for tests, benchmarks and tools built with CUDA. */
#ifndef TG_CUDA_INTERNAL_H
#define TG_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

typedef struct tg_cuda_pool_stats {
    uint64_t mallocs; /* blocks taken from cudaMalloc */
    uint64_t reuses;  /* requests served from a free list */
    uint64_t frees;   /* blocks given back by tg_cuda_pool_trim */
    size_t bytes_held, bytes_in_use, peak_in_use;
} tg_cuda_pool_stats;

struct tg_backend;
const struct tg_backend *tg_cuda_backend_get(void);
/* The tools' services (events.c): events, synchronisation, statistics. */
extern const struct tg_backend_tools tg_cuda_tools;

/* dlopen a CUDA library: `path` when given (an environment variable's
 * value), else <base>.<major>, <base>, then the toolkit's folder; NULL
 * with "<what> not found (<the first try's error>)" in why. */
void *tg_cuda_dlopen(const char *path, const char *base, int major, const char *what, char *why,
                     size_t why_len);
/* Open cuBLAS (dlopen; once per process, $TG_CUBLAS overriding the
 * library's name): true when it and every function the backend calls
 * were found; *why otherwise. The device does this when it is opened. */
bool tg_cuda_blas_load(const char **why);
/* True when a device is usable (opens it on first call). */
bool tg_cuda_available(void);
void *tg_cuda_compute_stream(void);
/* Wait for the compute stream (benchmarks). */
int tg_cuda_sync(tg_ctx *ctx);
/* New device / host copies of a (the caller frees them); NULL with ctx
 * set on failure. */
tg_array *tg_cuda_upload(const tg_array *a, tg_ctx *ctx);
tg_array *tg_cuda_download(const tg_array *a, tg_ctx *ctx);
void tg_cuda_pool_get_stats(tg_cuda_pool_stats *st);
/* Give every cached block back to the driver. */
void tg_cuda_pool_trim(void);
/* For the cuDNN and composite kernels (cudnn.c, nvrtc.c): a C-contiguous
 * device array from the pool, contents undefined (NULL with ctx set on
 * failure); the kernels' output convention (*slot reused when it is a
 * device array nobody else holds and big enough); a C-contiguous device
 * copy of a device array (a itself, referenced, when it is one; strided
 * float32 and float64 only). */
tg_array *tg_cuda_empty(tg_dtype dt, int ndim, const int64_t *shape, tg_ctx *ctx);
int tg_cuda_prepare(tg_array **slot, tg_dtype dt, int ndim, const int64_t *shape, tg_ctx *ctx);
int tg_cuda_contiguous(const tg_array *a, tg_array **out, tg_ctx *ctx);

#endif
