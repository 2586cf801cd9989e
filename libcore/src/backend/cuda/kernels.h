/* Private: the CUDA kernels' launchers (kernels.cu), called from the host
 * side of the backend (cuda.c). Plain C types only, so that C files can
 * include this without the CUDA headers; streams are passed as void*.
 * Every launcher queues work on `stream` and returns 0, or a CUDA error
 * code (cudaError_t) when the launch failed. */
#ifndef TG_CUDA_KERNELS_H
#define TG_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_CU_MAXD 8
#define TG_CU_MAXIN 4

/* The float dtypes of tg_cu_softmax and tg_cu_fill (0 and 1 are the old
 * f64 flag's values). float16 is stored as half and computed in float. */
enum { TG_CU_DT_F32 = 0, TG_CU_DT_F64 = 1, TG_CU_DT_F16 = 2 };

/* Elementwise op codes. */
enum {
    TG_CU_NEG, TG_CU_ABS, TG_CU_EXP, TG_CU_LOG, TG_CU_TANH, TG_CU_SIGMOID,
    TG_CU_RELU, TG_CU_SQR, TG_CU_SQRT, TG_CU_IDENTITY, TG_CU_RECIPROCAL,
    TG_CU_SOFTPLUS, TG_CU_LOG1P, TG_CU_EXPM1,
    TG_CU_UNARY_END,
    TG_CU_ADD = TG_CU_UNARY_END, TG_CU_SUB, TG_CU_MUL, TG_CU_DIV,
    TG_CU_MAXIMUM, TG_CU_MINIMUM, TG_CU_POW,
    TG_CU_CMP_BEGIN,
    TG_CU_EQ = TG_CU_CMP_BEGIN, TG_CU_NEQ, TG_CU_LT, TG_CU_LE, TG_CU_GT,
    TG_CU_GE,
    TG_CU_NOPS
};

/* The operands of an elementwise launch: the output is C-contiguous with
 * `shape`; input k is read at sum(idx[d] * strides[k][d]) elements
 * (stride 0 on broadcast axes). */
typedef struct tg_cu_ew {
    int op, nin, ndim;
    int f64;      /* 1: double, 0: float (inputs and a float output) */
    int out_bool; /* comparisons: the output is bool (one byte) */
    int flat;     /* every input is contiguous with the output's shape */
    int f16;      /* 1: float16 storage, float compute (f64 is 0); with
                   * TG_CU_IDENTITY a bit copy of 2-byte elements */
    int64_t n;
    int64_t shape[TG_CU_MAXD];
    int64_t strides[TG_CU_MAXIN][TG_CU_MAXD];
} tg_cu_ew;

int tg_cu_elemwise(const tg_cu_ew *p, void *out, void *const *in, void *stream);

/* Reductions: the input is seen as `nkept` kept axes (the output's, C
 * order) and `nred` reduced axes, each with a length and a stride in
 * elements. */
enum { TG_CU_SUM, TG_CU_MAX, TG_CU_MIN, TG_CU_PROD, TG_CU_MEAN };
typedef struct tg_cu_red {
    int op, f64;
    int nkept, nred;
    int64_t kshape[TG_CU_MAXD], kstride[TG_CU_MAXD];
    int64_t rshape[TG_CU_MAXD], rstride[TG_CU_MAXD];
    int64_t nout, nr;
    int f16; /* 1: float16 in and out, accumulated in double */
    /* The launch (kernels.cu): col 1 for one thread per output (the
     * innermost kept axis contiguous), 0 for one block per output; each
     * output's nr elements in nsplit pieces of chunk elements. */
    int col;
    int64_t nsplit, chunk;
} tg_cu_red;

/* part: nout * nsplit doubles when nsplit > 1 (the partials), else
 * unused. */
int tg_cu_reduce(const tg_cu_red *p, void *out, void *part, const void *in, void *stream);
/* The device's multiprocessor count (1 when it cannot be read). */
int tg_cu_sm_count(void);

/* Row-wise softmax / log_softmax over the last axis of a C-contiguous
 * (rows, len) block; dt is a TG_CU_DT_* code. */
int tg_cu_softmax(int dt, int log, int64_t rows, int64_t len, void *out,
                  const void *in, void *stream);
/* out[r] = -sum_i t[r, i] * log(p[r, i]), both C-contiguous (rows, len). */
int tg_cu_xent(int f64, int64_t rows, int64_t len, void *out, const void *p,
               const void *t, void *stream);
/* Fill n elements of dtype dt (TG_CU_DT_*) with v. */
int tg_cu_fill(int dt, int64_t n, double v, void *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
