/* The NaN guard's reduction on the device: for a float16/32/64 array (any
 * strides), the counts of NaN, +Inf, -Inf, finite elements and finite
 * elements above the big threshold, and the min, max and sum of the finite
 * ones, in one pass. Only those 64 bytes come back to the host, so the
 * guard checks a device array without downloading it (Theano's
 * NanGuardMode did the same with a GPU reduction per node).
 *
 * Two launches: every block reduces a grid-stride share of the elements
 * into one partial (a shared-memory tree), then one block reduces the
 * partials. The grid is fixed by the size, so the sum (and so the mean)
 * is the same from call to call. Each element is classified in double, as
 * the host's tg_array_stats does, so counts, min and max agree exactly;
 * the sum differs from the host's sequential one only by rounding. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>

#include "stats.h"

namespace {

constexpr int THREADS = 256;
constexpr int MAX_BLOCKS = 1024;

struct acc {
    long long nan, pinf, ninf, big, fin;
    double lo, hi, sum;
};

__device__ inline void acc_init(acc &a) {
    a.nan = a.pinf = a.ninf = a.big = a.fin = 0;
    a.lo = INFINITY;
    a.hi = -INFINITY;
    a.sum = 0;
}

__device__ inline void acc_add(acc &a, double v, double big) {
    if (isnan(v)) {
        a.nan++;
    } else if (isinf(v)) {
        if (v > 0)
            a.pinf++;
        else
            a.ninf++;
    } else {
        a.fin++;
        a.sum += v;
        if (v < a.lo) a.lo = v;
        if (v > a.hi) a.hi = v;
        if (fabs(v) > big) a.big++;
    }
}

__device__ inline void acc_merge(acc &a, const acc &b) {
    a.nan += b.nan;
    a.pinf += b.pinf;
    a.ninf += b.ninf;
    a.big += b.big;
    a.fin += b.fin;
    a.sum += b.sum;
    if (b.lo < a.lo) a.lo = b.lo;
    if (b.hi > a.hi) a.hi = b.hi;
}

struct geom {
    int ndim;
    long long shape[TG_CU_MAXD], strides[TG_CU_MAXD];
};

template <int DT> __device__ inline double load(const void *p, long long off) {
    if (DT == TG_CU_STATS_F64) return ((const double *)p)[off];
    if (DT == TG_CU_STATS_F32) return (double)((const float *)p)[off];
    return (double)__half2float(__ushort_as_half(((const unsigned short *)p)[off]));
}

/* Element i of the C-order walk, in elements from the data pointer. */
__device__ inline long long offset_of(const geom &g, long long i) {
    long long off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        long long len = g.shape[d];
        off += (i % len) * g.strides[d];
        i /= len;
    }
    return off;
}

/* The tree in shared memory: sh[0] ends up holding the block's total. */
__device__ inline void block_reduce(acc *sh) {
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) acc_merge(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
}

template <int DT, bool CONTIG>
__global__ void stats_blocks(const void *x, long long n, geom g, double big, acc *part) {
    __shared__ acc sh[THREADS];
    acc a;
    acc_init(a);
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        acc_add(a, load<DT>(x, CONTIG ? i : offset_of(g, i)), big);
    sh[threadIdx.x] = a;
    __syncthreads();
    block_reduce(sh);
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

__global__ void stats_final(const acc *part, int nb, acc *out) {
    __shared__ acc sh[THREADS];
    acc a;
    acc_init(a);
    for (int i = threadIdx.x; i < nb; i += blockDim.x) acc_merge(a, part[i]);
    sh[threadIdx.x] = a;
    __syncthreads();
    block_reduce(sh);
    if (threadIdx.x == 0) *out = sh[0];
}

template <int DT>
void launch(bool contig, int nb, cudaStream_t s, const void *x, long long n, const geom &g, double big,
            acc *part) {
    if (contig)
        stats_blocks<DT, true><<<nb, THREADS, 0, s>>>(x, n, g, big, part);
    else
        stats_blocks<DT, false><<<nb, THREADS, 0, s>>>(x, n, g, big, part);
}

/* The partials and the result (device), and the result's landing place
 * (pinned host memory, so the copy is a plain DMA). Kept for the process:
 * 64 KiB. */
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
acc *d_part; /* MAX_BLOCKS partials, then the result */
acc *h_out;

} // namespace

extern "C" int tg_cu_stats(const tg_cu_stats_in *p, const void *data, tg_cu_stats_out *out, void *stream) {
    out->nan = out->pinf = out->ninf = out->big = out->finite = 0;
    out->min = out->max = NAN;
    out->sum = 0;
    if (p->n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    geom g;
    g.ndim = p->ndim;
    for (int d = 0; d < TG_CU_MAXD; d++) {
        g.shape[d] = d < p->ndim ? p->shape[d] : 1;
        g.strides[d] = d < p->ndim ? p->strides[d] : 0;
    }
    long long nb = (p->n + THREADS - 1) / THREADS;
    if (nb > MAX_BLOCKS) nb = MAX_BLOCKS;
    pthread_mutex_lock(&lock);
    cudaError_t e = cudaSuccess;
    if (!d_part) {
        if ((e = cudaMalloc((void **)&d_part, sizeof(acc) * (MAX_BLOCKS + 1))) != cudaSuccess) {
            d_part = nullptr;
            goto done;
        }
        if ((e = cudaMallocHost((void **)&h_out, sizeof(acc))) != cudaSuccess) {
            cudaFree(d_part);
            d_part = nullptr;
            h_out = nullptr;
            goto done;
        }
    }
    switch (p->dtype) {
    case TG_CU_STATS_F64: launch<TG_CU_STATS_F64>(p->contiguous, (int)nb, s, data, p->n, g, p->big, d_part); break;
    case TG_CU_STATS_F32: launch<TG_CU_STATS_F32>(p->contiguous, (int)nb, s, data, p->n, g, p->big, d_part); break;
    default: launch<TG_CU_STATS_F16>(p->contiguous, (int)nb, s, data, p->n, g, p->big, d_part); break;
    }
    stats_final<<<1, THREADS, 0, s>>>(d_part, (int)nb, d_part + MAX_BLOCKS);
    if ((e = cudaGetLastError()) != cudaSuccess) goto done;
    if ((e = cudaMemcpyAsync(h_out, d_part + MAX_BLOCKS, sizeof(acc), cudaMemcpyDeviceToHost, s)) != cudaSuccess)
        goto done;
    if ((e = cudaStreamSynchronize(s)) != cudaSuccess) goto done;
    out->nan = h_out->nan;
    out->pinf = h_out->pinf;
    out->ninf = h_out->ninf;
    out->big = h_out->big;
    out->finite = h_out->fin;
    out->sum = h_out->sum;
    if (h_out->fin) {
        out->min = h_out->lo;
        out->max = h_out->hi;
    }
done:
    /* A failed call's error stays the thread's last error: cleared, so
     * that the next launch elsewhere (kernels.cu) does not report it. */
    if (e != cudaSuccess) cudaGetLastError();
    pthread_mutex_unlock(&lock);
    return (int)e;
}
