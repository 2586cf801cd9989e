/* The gradient of max pooling with Theano's rule (ops/pool.c): every
 * element equal to its window's maximum gets the window's gradient, ties
 * included. cuDNN's backward pass gives a tie's gradient to one element,
 * so pool2d_grad in mode max runs this kernel (cudnn.c); the average modes
 * go through cuDNN.
 *
 * One thread per input element gathers from the windows that cover it,
 * row by row as the CPU kernel adds them, so the sums round as the CPU's
 * do, with no atomics. float16 computes in float32, as the CPU does. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "pool_kernels.h"

namespace {

__device__ inline float acc_of(float v) { return v; }
__device__ inline double acc_of(double v) { return v; }
__device__ inline float acc_of(__half v) { return __half2float(v); }
__device__ inline void store(float *p, float v) { *p = v; }
__device__ inline void store(double *p, double v) { *p = v; }
__device__ inline void store(__half *p, float v) { *p = __float2half_rn(v); }

/* The windows k (0 <= k < n) with k * s <= i + pad < k * s + ws. */
__device__ inline void cover(int64_t i, int64_t pad, int64_t ws, int64_t s, int64_t n, int64_t *k0, int64_t *k1) {
    const int64_t ip = i + pad, lo = ip - ws + 1;
    *k0 = lo <= 0 ? 0 : (lo + s - 1) / s;
    *k1 = ip / s + 1;
    if (*k1 > n) *k1 = n;
}

template <typename T, typename A>
__global__ void maxpool_grad(tg_cu_pool p, const T *x, const T *y, const T *gy, T *gx) {
    const int64_t n = p.planes * p.h * p.w;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = e % p.w, r = (e / p.w) % p.h, pl = e / (p.h * p.w);
        const A v = acc_of(x[e]);
        int64_t i0, i1, j0, j1;
        cover(r, p.ph, p.wh, p.sh, p.oh, &i0, &i1);
        cover(c, p.pw, p.ww, p.sw, p.ow, &j0, &j1);
        A acc = 0;
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = j0; j < j1; j++) {
                const int64_t o = (pl * p.oh + i) * p.ow + j;
                if (acc_of(y[o]) == v) acc += acc_of(gy[o]);
            }
        store(gx + e, acc);
    }
}

unsigned blocks_for(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

} // namespace

extern "C" int tg_cu_maxpool_grad(int dtype, const tg_cu_pool *p, const void *x, const void *y, const void *gy,
                                  void *gx, void *stream) {
    const int64_t n = p->planes * p->h * p->w;
    if (n == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned g = blocks_for(n);
    if (dtype == TG_CU_F64)
        maxpool_grad<double, double><<<g, 256, 0, s>>>(*p, (const double *)x, (const double *)y,
                                                        (const double *)gy, (double *)gx);
    else if (dtype == TG_CU_F16)
        maxpool_grad<__half, float><<<g, 256, 0, s>>>(*p, (const __half *)x, (const __half *)y,
                                                       (const __half *)gy, (__half *)gx);
    else
        maxpool_grad<float, float><<<g, 256, 0, s>>>(*p, (const float *)x, (const float *)y, (const float *)gy,
                                                      (float *)gx);
    return (int)cudaGetLastError();
}
