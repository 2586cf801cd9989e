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

/* (fabs: never negative otherwise; a NaN's sign bit clear, as the CPU's) */
template <typename T> __device__ inline T softplus_(T x) {
    return fabs((x > 0 ? x : T(0)) + log1p(exp(-fabs(x))));
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

/* T computes, S is the inputs' storage, O the output's; I is the type
 * of the flat index (32 bits when n allows: a cheaper division). The
 * loops over the operands run to the constant TG_CU_MAXIN, unrolled, with
 * the count tested inside: indexed by a run-time count, in, v and off
 * lived in local memory (an 80 to 96-byte stack frame, `nvcc -Xptxas -v`),
 * and a broadcast add of 8192 x 1024 and 8192 x 1 took 0.21 ms on an
 * H200, several times what its 64 MiB of traffic needs. */
template <typename T, typename S, typename O, typename I>
__global__ void ew_kernel(tg_cu_ew p, O *out, const S *a0, const S *a1,
                          const S *a2, const S *a3) {
    const S *in[TG_CU_MAXIN] = {a0, a1, a2, a3};
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < (I)p.n;
         i += (I)gridDim.x * blockDim.x) {
        T v[TG_CU_MAXIN] = {};
        if (p.flat) {
#pragma unroll
            for (int k = 0; k < TG_CU_MAXIN; k++)
                if (k < p.nin) v[k] = ld<T>(in[k][i]);
        } else {
            int64_t off[TG_CU_MAXIN] = {0, 0, 0, 0};
            I r = i;
            for (int d = p.ndim - 1; d > 0; d--) {
                const I len = (I)p.shape[d], q = r / len, idx = r - q * len;
                r = q;
#pragma unroll
                for (int k = 0; k < TG_CU_MAXIN; k++)
                    if (k < p.nin) off[k] += (int64_t)idx * p.strides[k][d];
            }
            if (p.ndim > 0) {
#pragma unroll
                for (int k = 0; k < TG_CU_MAXIN; k++)
                    if (k < p.nin) off[k] += (int64_t)r * p.strides[k][0];
            }
#pragma unroll
            for (int k = 0; k < TG_CU_MAXIN; k++)
                if (k < p.nin) v[k] = ld<T>(in[k][off[k]]);
        }
        T acc;
        if (p.op < TG_CU_UNARY_END) {
            acc = unary<T>(p.op, v[0]);
        } else {
            /* add and mul take any number of inputs, left to right. */
            acc = binary<T>(p.op, v[0], v[1]);
#pragma unroll
            for (int k = 2; k < TG_CU_MAXIN; k++)
                if (k < p.nin) acc = binary<T>(p.op, acc, v[k]);
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

/* Reductions. The host (cuda.c) merges adjacent axes and picks one of
 * two layouts, and how many pieces each output's reduction is cut into
 * (p.nsplit, p.chunk reduced elements each) so that the whole GPU works
 * even when there are few outputs (a convolution's bias gradient: 64
 * outputs of 3 million elements each):
 *   row: one block per (output, piece); its threads stride over the
 *        reduced elements, which lie side by side (a contiguous innermost
 *        reduced axis), and combine in shared memory;
 *   col: one thread per (output, piece), walking its reduced elements in
 *        order; neighbouring threads have neighbouring outputs (a
 *        contiguous innermost kept axis: sum over the batch axis).
 * With one piece the result is stored directly; with several, each piece
 * writes its partial (in the accumulator's type) and red_finish combines
 * an output's partials in order. Every order is fixed: the same inputs
 * give the same bits from call to call. I is the type of the reduced
 * index (32 bits when nr allows: a cheaper division). */
template <typename A> __device__ inline A red_init(int op) {
    return op == TG_CU_MAX ? A(-INFINITY) : op == TG_CU_MIN ? A(INFINITY) : op == TG_CU_PROD ? A(1) : A(0);
}

/* a combined with x; NaN wins for max and min. */
template <typename A> __device__ inline A red_step(int op, A a, A x) {
    switch (op) {
    case TG_CU_MAX: return (x > a || x != x) ? x : a;
    case TG_CU_MIN: return (x < a || x != x) ? x : a;
    case TG_CU_PROD: return a * x;
    default: return a + x;
    }
}

/* An output's value from its combined elements (mean divides). */
template <typename T, typename A> __device__ inline T red_final(const tg_cu_red &p, A v) {
    return st<T>(p.op == TG_CU_MEAN ? (p.nr ? v / (A)p.nr : A(NAN)) : v);
}

__device__ inline int64_t kept_offset(const tg_cu_red &p, int64_t o) {
    int64_t base = 0;
    for (int d = p.nkept - 1; d >= 0; d--) {
        base += (o % p.kshape[d]) * p.kstride[d];
        o /= p.kshape[d];
    }
    return base;
}

template <typename T, typename A, typename I>
__global__ void red_row(tg_cu_red p, T *out, A *part, const T *in) {
    __shared__ A sh[256];
    const int64_t nw = p.nout * p.nsplit;
    for (int64_t w = blockIdx.x; w < nw; w += gridDim.x) {
        const int64_t o = w / p.nsplit, piece = w - o * p.nsplit;
        const int64_t base = kept_offset(p, o);
        const I j0 = (I)(piece * p.chunk);
        const I j1 = (I)(p.nr - (int64_t)j0 < p.chunk ? p.nr : (int64_t)j0 + p.chunk);
        A acc = red_init<A>(p.op);
        for (I j = j0 + (I)threadIdx.x; j < j1; j += (I)blockDim.x) {
            int64_t off = base;
            I q = j;
            for (int d = p.nred - 1; d > 0; d--) {
                const I len = (I)p.rshape[d], qq = q / len;
                off += (int64_t)(q - qq * len) * p.rstride[d];
                q = qq;
            }
            off += (int64_t)q * p.rstride[0];
            acc = red_step<A>(p.op, acc, ld<A>(in[off]));
        }
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) sh[threadIdx.x] = red_step<A>(p.op, sh[threadIdx.x], sh[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            A v = sh[0];
            if (p.nsplit > 1)
                part[w] = v;
            else
                out[o] = red_final<T, A>(p, v);
        }
        __syncthreads();
    }
}

template <typename T, typename A>
__global__ void red_col(tg_cu_red p, T *out, A *part, const T *in) {
    const int64_t nt = p.nout * p.nsplit;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < nt; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t piece = t / p.nout, o = t - piece * p.nout;
        const int64_t j0 = piece * p.chunk, j1 = p.nr - j0 < p.chunk ? p.nr : j0 + p.chunk;
        A acc = red_init<A>(p.op);
        if (p.nred == 1) {
            /* One reduced axis (the usual case once the host merged
             * them): a plain strided walk, with no odometer, whose index
             * array lives in local memory. */
            const int64_t st = p.rstride[0];
            int64_t off = kept_offset(p, o) + j0 * st;
            for (int64_t j = j0; j < j1; j++, off += st) acc = red_step<A>(p.op, acc, ld<A>(in[off]));
        } else {
            int64_t idx[TG_CU_MAXD], off = kept_offset(p, o), q = j0;
            for (int d = p.nred - 1; d >= 0; d--) {
                idx[d] = q % p.rshape[d];
                q /= p.rshape[d];
                off += idx[d] * p.rstride[d];
            }
            for (int64_t j = j0; j < j1; j++) {
                acc = red_step<A>(p.op, acc, ld<A>(in[off]));
                for (int d = p.nred - 1; d >= 0; d--) { /* the next element: odometer */
                    off += p.rstride[d];
                    if (++idx[d] < p.rshape[d]) break;
                    off -= idx[d] * p.rstride[d];
                    idx[d] = 0;
                }
            }
        }
        if (p.nsplit > 1)
            part[piece * p.nout + o] = acc;
        else
            out[o] = red_final<T, A>(p, acc);
    }
}

/* Each output's partials, in piece order: part[o * nsplit + piece] (row)
 * or part[piece * nout + o] (col). */
template <typename T, typename A>
__global__ void red_finish(tg_cu_red p, T *out, const A *part) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < p.nout; o += (int64_t)gridDim.x * blockDim.x) {
        A v = red_init<A>(p.op);
        for (int64_t k = 0; k < p.nsplit; k++)
            v = red_step<A>(p.op, v, part[p.col ? k * p.nout + o : o * p.nsplit + k]);
        out[o] = red_final<T, A>(p, v);
    }
}

unsigned grid_for(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535 ? 65535 : b);
}

template <typename T, typename A>
int red_launch(const tg_cu_red *p, T *out, A *part, const T *in, cudaStream_t s) {
    if (p->col) {
        red_col<T, A><<<grid_for(p->nout * p->nsplit, 256), 256, 0, s>>>(*p, out, part, in);
    } else {
        unsigned g = grid_for(p->nout * p->nsplit, 1); /* a block per (output, piece) */
        if (p->nr <= INT32_MAX)
            red_row<T, A, unsigned><<<g, 256, 0, s>>>(*p, out, part, in);
        else
            red_row<T, A, int64_t><<<g, 256, 0, s>>>(*p, out, part, in);
    }
    if (p->nsplit > 1) red_finish<T, A><<<grid_for(p->nout, 256), 256, 0, s>>>(*p, out, part);
    return (int)cudaGetLastError();
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

template <typename T, typename S, typename O>
void ew_launch(unsigned g, cudaStream_t s, const tg_cu_ew &p, O *out, const S *a0, const S *a1, const S *a2,
               const S *a3) {
    if (p.n <= INT32_MAX)
        ew_kernel<T, S, O, unsigned><<<g, 256, 0, s>>>(p, out, a0, a1, a2, a3);
    else
        ew_kernel<T, S, O, int64_t><<<g, 256, 0, s>>>(p, out, a0, a1, a2, a3);
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
            ew_launch<float, __half, unsigned char>(g, s, *p, (unsigned char *)out, i0, i1, i2, i3);
        else
            ew_launch<float, __half, __half>(g, s, *p, (__half *)out, i0, i1, i2, i3);
    } else if (p->f64) {
        const double *i0 = (const double *)a[0], *i1 = (const double *)a[1],
                     *i2 = (const double *)a[2], *i3 = (const double *)a[3];
        if (p->out_bool)
            ew_launch<double, double, unsigned char>(g, s, *p, (unsigned char *)out, i0, i1, i2, i3);
        else
            ew_launch<double, double, double>(g, s, *p, (double *)out, i0, i1, i2, i3);
    } else {
        const float *i0 = (const float *)a[0], *i1 = (const float *)a[1],
                    *i2 = (const float *)a[2], *i3 = (const float *)a[3];
        if (p->out_bool)
            ew_launch<float, float, unsigned char>(g, s, *p, (unsigned char *)out, i0, i1, i2, i3);
        else
            ew_launch<float, float, float>(g, s, *p, (float *)out, i0, i1, i2, i3);
    }
    return (int)cudaGetLastError();
}

extern "C" int tg_cu_reduce(const tg_cu_red *p, void *out, void *part, const void *in,
                            void *stream) {
    if (p->nout == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    /* float32 sums accumulate in double: closer to the CPU's pairwise
     * sums than a float accumulator over long rows; float16 in double as
     * the CPU (reduce.c's row_sum_d), rounded to half once. */
    if (p->f16) return red_launch<__half, double>(p, (__half *)out, (double *)part, (const __half *)in, s);
    if (p->f64) return red_launch<double, double>(p, (double *)out, (double *)part, (const double *)in, s);
    return red_launch<float, double>(p, (float *)out, (double *)part, (const float *)in, s);
}

extern "C" int tg_cu_sm_count(void) {
    static int n = 0;
    if (!n) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0)
            n = v;
        else
            n = 1;
        cudaGetLastError();
    }
    return n;
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
