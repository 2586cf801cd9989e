/* The CUDA kernels: elementwise ops with broadcasting, reductions over any
 * axes, row-wise softmax and cross-entropy, fills. Each kernel is a
 * template over float and double; the launchers below pick the instance.
 * Formulas follow the CPU kernels (ops/elemwise.c) so that results agree
 * to rounding: sigmoid and softplus use the same overflow-safe forms, relu
 * and maximum/minimum propagate NaN as NumPy does.
 *
 * float16 arrays are stored as __half and computed in float, as the CPU
 * does (ops/elemwise.c, reduce.c, nn.c): each element is loaded into
 * float (reductions: double), computed, and rounded to half once at the
 * store, to nearest-even as the CPU's conversions (tensor/cast.c). */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "kernels.h"

namespace {

/* Loads into the compute type and stores from it: plain conversions, but
 * __half goes through float (or double) with one rounding. */
template <typename C, typename S> __device__ inline C ld(S x) { return (C)x; }
template <> __device__ inline float ld<float, __half>(__half x) { return __half2float(x); }
template <> __device__ inline double ld<double, __half>(__half x) { return (double)__half2float(x); }
template <typename S, typename C> __device__ inline S st(C x) { return (S)x; }
template <> __device__ inline __half st<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ inline __half st<__half, double>(double x) { return __double2half(x); }

template <typename T> __device__ inline T sigmoid_(T x) {
    if (x >= 0) return T(1) / (T(1) + exp(-x));
    T e = exp(x);
    return e / (T(1) + e);
}

template <typename T> __device__ inline T softplus_(T x) {
    return (x > 0 ? x : T(0)) + log1p(exp(-fabs(x)));
}

template <typename T> __device__ inline T unary(int op, T x) {
    switch (op) {
    case TG_CU_NEG: return -x;
    case TG_CU_ABS: return fabs(x);
    case TG_CU_EXP: return exp(x);
    case TG_CU_LOG: return log(x);
    case TG_CU_TANH: return tanh(x);
    case TG_CU_SIGMOID: return sigmoid_(x);
    case TG_CU_RELU: return x > 0 ? x : (x != x ? x : T(0));
    case TG_CU_SQR: return x * x;
    case TG_CU_SQRT: return sqrt(x);
    case TG_CU_RECIPROCAL: return T(1) / x;
    case TG_CU_SOFTPLUS: return softplus_(x);
    case TG_CU_LOG1P: return log1p(x);
    case TG_CU_EXPM1: return expm1(x);
    default: return x; /* identity */
    }
}

template <typename T> __device__ inline T binary(int op, T a, T b) {
    switch (op) {
    case TG_CU_ADD: return a + b;
    case TG_CU_SUB: return a - b;
    case TG_CU_MUL: return a * b;
    case TG_CU_DIV: return a / b;
    case TG_CU_MAXIMUM: return (a >= b || a != a) ? a : b;
    case TG_CU_MINIMUM: return (a <= b || a != a) ? a : b;
    case TG_CU_POW: return pow(a, b);
    case TG_CU_EQ: return a == b;
    case TG_CU_NEQ: return a != b;
    case TG_CU_LT: return a < b;
    case TG_CU_LE: return a <= b;
    case TG_CU_GT: return a > b;
    default: return a >= b; /* TG_CU_GE */
    }
}

/* T computes, S is the inputs' storage, O the output's. */
template <typename T, typename S, typename O>
__global__ void ew_kernel(tg_cu_ew p, O *out, const S *a0, const S *a1,
                          const S *a2, const S *a3) {
    const S *in[TG_CU_MAXIN] = {a0, a1, a2, a3};
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        T v[TG_CU_MAXIN];
        if (p.flat) {
            for (int k = 0; k < p.nin; k++) v[k] = ld<T>(in[k][i]);
        } else {
            int64_t off[TG_CU_MAXIN] = {0, 0, 0, 0}, r = i;
            for (int d = p.ndim - 1; d >= 0; d--) {
                int64_t idx = r % p.shape[d];
                r /= p.shape[d];
                for (int k = 0; k < p.nin; k++) off[k] += idx * p.strides[k][d];
            }
            for (int k = 0; k < p.nin; k++) v[k] = ld<T>(in[k][off[k]]);
        }
        T acc;
        if (p.op < TG_CU_UNARY_END) {
            acc = unary<T>(p.op, v[0]);
        } else {
            /* add and mul take any number of inputs, left to right. */
            acc = binary<T>(p.op, v[0], v[1]);
            for (int k = 2; k < p.nin; k++) acc = binary<T>(p.op, acc, v[k]);
        }
        out[i] = st<O>(acc);
    }
}

/* A strided bit copy of 2-byte elements into a C-contiguous output
 * (make_contiguous of float16 and 2-byte integers). */
__global__ void copy16_kernel(tg_cu_ew p, unsigned short *out,
                              const unsigned short *in) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off = 0, r = i;
        for (int d = p.ndim - 1; d >= 0; d--) {
            off += (r % p.shape[d]) * p.strides[0][d];
            r /= p.shape[d];
        }
        out[i] = in[off];
    }
}

/* One block per output element; threads stride over the reduced
 * elements and combine in shared memory. */
template <typename T, typename A>
__global__ void red_kernel(tg_cu_red p, T *out, const T *in) {
    __shared__ A sh[256];
    for (int64_t o = blockIdx.x; o < p.nout; o += gridDim.x) {
        int64_t base = 0, r = o;
        for (int d = p.nkept - 1; d >= 0; d--) {
            base += (r % p.kshape[d]) * p.kstride[d];
            r /= p.kshape[d];
        }
        A acc = p.op == TG_CU_MAX ? A(-INFINITY)
              : p.op == TG_CU_MIN ? A(INFINITY)
              : p.op == TG_CU_PROD ? A(1) : A(0);
        bool nan = false;
        for (int64_t j = threadIdx.x; j < p.nr; j += blockDim.x) {
            int64_t off = base, q = j;
            for (int d = p.nred - 1; d >= 0; d--) {
                off += (q % p.rshape[d]) * p.rstride[d];
                q /= p.rshape[d];
            }
            A x = ld<A>(in[off]);
            if (x != x) nan = true;
            switch (p.op) {
            case TG_CU_MAX: acc = x > acc ? x : acc; break;
            case TG_CU_MIN: acc = x < acc ? x : acc; break;
            case TG_CU_PROD: acc *= x; break;
            default: acc += x;
            }
        }
        if (nan && (p.op == TG_CU_MAX || p.op == TG_CU_MIN)) acc = A(NAN);
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) {
                A x = sh[threadIdx.x + s], y = sh[threadIdx.x];
                switch (p.op) {
                case TG_CU_MAX: y = (x > y || x != x) ? x : y; break;
                case TG_CU_MIN: y = (x < y || x != x) ? x : y; break;
                case TG_CU_PROD: y *= x; break;
                default: y += x;
                }
                sh[threadIdx.x] = y;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            A v = sh[0];
            if (p.op == TG_CU_MEAN) v = p.nr ? v / (A)p.nr : A(NAN);
            out[o] = st<T>(v);
        }
        __syncthreads();
    }
}

template <typename T> __device__ T block_reduce(T v, bool is_max, T *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            T x = sh[threadIdx.x + s], y = sh[threadIdx.x];
            sh[threadIdx.x] = is_max ? (x > y ? x : y) : x + y;
        }
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

/* T computes, S is the storage (float16: float over __half). */
template <typename T, typename S>
__global__ void softmax_kernel(int log_, int64_t rows, int64_t len, S *out,
                               const S *in) {
    __shared__ T sh[256];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const S *x = in + r * len;
        S *y = out + r * len;
        T m = -INFINITY;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            T xi = ld<T>(x[i]);
            m = xi > m ? xi : m;
        }
        m = block_reduce<T>(m, true, sh);
        T s = 0;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) s += exp(ld<T>(x[i]) - m);
        s = block_reduce<T>(s, false, sh);
        if (log_) {
            T ls = log(s);
            for (int64_t i = threadIdx.x; i < len; i += blockDim.x) y[i] = st<S>(ld<T>(x[i]) - m - ls);
        } else {
            for (int64_t i = threadIdx.x; i < len; i += blockDim.x) y[i] = st<S>(exp(ld<T>(x[i]) - m) / s);
        }
    }
}

template <typename T>
__global__ void xent_kernel(int64_t rows, int64_t len, T *out, const T *p,
                            const T *t) {
    __shared__ T sh[256];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        T s = 0;
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
            s += t[r * len + i] * log(p[r * len + i]);
        s = block_reduce<T>(s, false, sh);
        if (threadIdx.x == 0) out[r] = -s;
    }
}

template <typename T> __global__ void fill_kernel(int64_t n, T v, T *out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = v;
}

unsigned grid_for(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535 ? 65535 : b);
}

} // namespace

extern "C" int tg_cu_elemwise(const tg_cu_ew *p, void *out, void *const *in,
                              void *stream) {
    if (p->n == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(p->n, 256);
    void *a[TG_CU_MAXIN] = {0, 0, 0, 0};
    for (int k = 0; k < p->nin; k++) a[k] = in[k];
    if (p->f16 && p->op == TG_CU_IDENTITY && !p->out_bool) {
        /* a bit copy: NaN payloads kept, as the CPU's copy */
        copy16_kernel<<<g, 256, 0, s>>>(*p, (unsigned short *)out, (const unsigned short *)a[0]);
    } else if (p->f16) {
        const __half *i0 = (const __half *)a[0], *i1 = (const __half *)a[1],
                     *i2 = (const __half *)a[2], *i3 = (const __half *)a[3];
        if (p->out_bool)
            ew_kernel<float, __half, unsigned char><<<g, 256, 0, s>>>(*p, (unsigned char *)out, i0, i1, i2, i3);
        else
            ew_kernel<float, __half, __half><<<g, 256, 0, s>>>(*p, (__half *)out, i0, i1, i2, i3);
    } else if (p->f64) {
        const double *i0 = (const double *)a[0], *i1 = (const double *)a[1],
                     *i2 = (const double *)a[2], *i3 = (const double *)a[3];
        if (p->out_bool)
            ew_kernel<double, double, unsigned char><<<g, 256, 0, s>>>(*p, (unsigned char *)out, i0, i1, i2, i3);
        else
            ew_kernel<double, double, double><<<g, 256, 0, s>>>(*p, (double *)out, i0, i1, i2, i3);
    } else {
        const float *i0 = (const float *)a[0], *i1 = (const float *)a[1],
                    *i2 = (const float *)a[2], *i3 = (const float *)a[3];
        if (p->out_bool)
            ew_kernel<float, float, unsigned char><<<g, 256, 0, s>>>(*p, (unsigned char *)out, i0, i1, i2, i3);
        else
            ew_kernel<float, float, float><<<g, 256, 0, s>>>(*p, (float *)out, i0, i1, i2, i3);
    }
    return (int)cudaGetLastError();
}

extern "C" int tg_cu_reduce(const tg_cu_red *p, void *out, const void *in,
                            void *stream) {
    if (p->nout == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = (unsigned)(p->nout > 65535 ? 65535 : p->nout);
    /* float32 sums accumulate in double: closer to the CPU's pairwise
     * sums than a float accumulator over long rows; float16 in double as
     * the CPU (reduce.c's row_sum_d), rounded to half once. */
    if (p->f16)
        red_kernel<__half, double><<<g, 256, 0, s>>>(*p, (__half *)out, (const __half *)in);
    else if (p->f64)
        red_kernel<double, double><<<g, 256, 0, s>>>(*p, (double *)out, (const double *)in);
    else
        red_kernel<float, double><<<g, 256, 0, s>>>(*p, (float *)out, (const float *)in);
    return (int)cudaGetLastError();
}

extern "C" int tg_cu_softmax(int dt, int log_, int64_t rows, int64_t len,
                             void *out, const void *in, void *stream) {
    if (rows == 0 || len == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = (unsigned)(rows > 65535 ? 65535 : rows);
    if (dt == TG_CU_DT_F16) /* float32 math on the loaded halves, as nn.c */
        softmax_kernel<float, __half><<<g, 256, 0, s>>>(log_, rows, len, (__half *)out, (const __half *)in);
    else if (dt == TG_CU_DT_F64)
        softmax_kernel<double, double><<<g, 256, 0, s>>>(log_, rows, len, (double *)out, (const double *)in);
    else
        softmax_kernel<float, float><<<g, 256, 0, s>>>(log_, rows, len, (float *)out, (const float *)in);
    return (int)cudaGetLastError();
}

extern "C" int tg_cu_xent(int f64, int64_t rows, int64_t len, void *out,
                          const void *p, const void *t, void *stream) {
    if (rows == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = (unsigned)(rows > 65535 ? 65535 : rows);
    if (f64)
        xent_kernel<double><<<g, 256, 0, s>>>(rows, len, (double *)out, (const double *)p, (const double *)t);
    else
        xent_kernel<float><<<g, 256, 0, s>>>(rows, len, (float *)out, (const float *)p, (const float *)t);
    return (int)cudaGetLastError();
}

extern "C" int tg_cu_fill(int dt, int64_t n, double v, void *out, void *stream) {
    if (n == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (dt == TG_CU_DT_F16)
        fill_kernel<__half><<<grid_for(n, 256), 256, 0, s>>>(n, __double2half(v), (__half *)out);
    else if (dt == TG_CU_DT_F64)
        fill_kernel<double><<<grid_for(n, 256), 256, 0, s>>>(n, v, (double *)out);
    else
        fill_kernel<float><<<grid_for(n, 256), 256, 0, s>>>(n, (float)v, (float *)out);
    return (int)cudaGetLastError();
}
