/* Products (FORMAT.md s7, linear algebra): dot, matmul, outer, gemm, gemv,
 * ger.
 *
 * float32 and float64 go through OpenBLAS. Any strides give a right
 * result: a matrix with unit-stride rows (C-contiguous, or rows a multiple
 * of the item size apart) is passed with CblasNoTrans and that leading
 * dimension, one with unit-stride columns (the transpose of such a matrix)
 * with CblasTrans, anything else (zero, negative or odd strides) is copied
 * first. Vectors go to BLAS with their stride as the increment when it is
 * a multiple of the item size, negative ones too (x[::-1]: BLAS takes the
 * element at the lowest address and walks it backwards, vec_base), and are
 * copied otherwise (stride 0 or odd). One-row and one-column products use
 * gemv, a single element dot. Copies go to buffers from the running
 * function's pool, so a function called again allocates none.
 *
 * float16 converts to float32, multiplies there and rounds the result once
 * (NumPy accumulates float16 products in float32 too). Integers use a
 * blocked loop in unsigned arithmetic of at least 32 bits, which wraps as
 * NumPy's fixed-width integers do; bool is the logical or of ands.
 *
 * beta == 0 follows BLAS: z is not read at all, so NaN or garbage in z
 * does not reach the result. alpha == 0 does not (BLAS then skips the
 * product): for floats the product is still formed and added times alpha,
 * so an inf or NaN in it gives NaN, as alpha*dot(x, y) + beta*z does in
 * NumPy; the optimizer makes gemm, gemv and ger from such sums with a
 * learning rate read at run time, which may be 0.
 */
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"
#include "ops/op.h"
#include "tensor/tensor.h"

typedef enum blas_kind { B_DOT, B_MATMUL, B_OUTER, B_GEMM, B_GEMV, B_GER } blas_kind;
typedef struct blas_impl {
    blas_kind kind;
} blas_impl;

/* Kernel failures, turned into messages by the callers (the batched loop
 * runs kernels on threads that must not touch ctx). */
enum { K_OK = 0, K_NOMEM = -1, K_BIG = -2 };

static int kernel_error(tg_ctx *ctx, int k) {
    if (k == K_BIG)
        return tg_errorf(ctx, TG_ESHAPE, "a dimension of the product exceeds BLAS's int range (%d)", INT_MAX);
    return tg_errorf(ctx, TG_ENOMEM, "out of memory");
}

/* ---- OpenBLAS's thread count (op.h) ---- */

/* OpenBLAS's OpenMP build (which the build links where it is installed:
 * CMakeLists.txt) runs a call on as many of GNU OpenMP's threads as the
 * calling thread's omp_get_max_threads(), read on every call, and its
 * openblas_set_num_threads sets that too (omp_set_num_threads). So there
 * the guard sets and puts back the calling thread's OpenMP count itself:
 * it is the thread's own, not the process's, and in a forked child,
 * whose count core.c sets to 1 (GNU OpenMP's pool does not survive
 * fork), OpenBLAS's count is its parent's until its next call, and
 * putting that back would have made the child's next parallel loop wait
 * forever for threads it does not have. */
bool tg_blas_shares_omp(void) {
    static int on = -1; /* read once; every thread reads the same */
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) __atomic_store_n(&on, v = openblas_get_parallel() == 2, __ATOMIC_RELAXED);
    return v;
}

tg_blas_guard tg_blas_single(void) {
    const bool omp = tg_blas_shares_omp();
    tg_blas_guard g = {omp ? omp_get_max_threads() : openblas_get_num_threads()};
    if (g.saved > 1) {
        if (omp) omp_set_num_threads(1);
        else
            openblas_set_num_threads(1);
    } else {
        g.saved = 0;
    }
    return g;
}

void tg_blas_restore(tg_blas_guard g) {
    if (g.saved <= 1) return;
    if (tg_blas_shares_omp()) omp_set_num_threads(g.saved);
    else
        openblas_set_num_threads(g.saved);
}

/* ---- operands as BLAS sees them ---- */

typedef struct mat {
    const char *data;
    int64_t rows, cols;
    int64_t rs, cs; /* byte strides */
} mat;

/* alpha/beta kept exactly for every dtype class (int64 does not fit a
 * double). */
typedef struct scal {
    double f;
    int64_t i;
} scal;

static const scal S_ONE = {1, 1}, S_ZERO = {0, 0};

static scal scal_load(tg_dtype dt, const void *p) {
    scal s = {tg_load_f64(dt, p), 0};
    if (!tg_dtype_is_float(dt)) s.i = tg_load_i64(dt, p);
    return s;
}

static bool scal_is_zero(tg_dtype dt, scal s) { return tg_dtype_is_float(dt) ? s.f == 0 : s.i == 0; }

/* Can BLAS read m directly? Sets the transpose flag and the leading
 * dimension (elements). A length-1 dimension's stride is irrelevant. */
static bool blas_layout(const mat *m, int64_t e, CBLAS_TRANSPOSE *tr, int64_t *ld) {
    int64_t r = m->rows, c = m->cols;
    if ((c <= 1 || m->cs == e) && (r <= 1 || (m->rs % e == 0 && m->rs / e >= (c > 1 ? c : 1)))) {
        *tr = CblasNoTrans;
        *ld = r <= 1 ? (c > 1 ? c : 1) : m->rs / e;
    } else if ((r <= 1 || m->rs == e) && (c <= 1 || (m->cs % e == 0 && m->cs / e >= (r > 1 ? r : 1)))) {
        *tr = CblasTrans;
        *ld = c <= 1 ? (r > 1 ? r : 1) : m->cs / e;
    } else {
        return false;
    }
    return *ld <= INT_MAX;
}

/* A C-contiguous copy of m, for layouts BLAS cannot take, in a buffer
 * from the running function's pool (tg_buffer_new; NULL when out of
 * memory). */
static tg_buffer *mat_copy(const mat *m, tg_dtype dt) {
    size_t e = tg_isize(dt);
    tg_buffer *c = tg_buffer_new((size_t)(m->rows * m->cols) * e + 1);
    if (!c) return NULL;
    for (int64_t i = 0; i < m->rows; i++)
        tg_cast_strided(dt, (char *)c->data + (size_t)(i * m->cols) * e, (int64_t)e, dt, m->data + i * m->rs,
                        m->cs, m->cols);
    return c;
}

/* BLAS increment for n elements s bytes apart, negative for a reversed
 * vector; 0 when BLAS cannot take them as they are (stride 0: BLAS
 * forbids an increment of 0 in ger and gemv; or not a multiple of the item
 * size). */
static int64_t vec_inc(int64_t n, int64_t s, int64_t e) {
    if (n <= 1) return 1;
    if (s != 0 && s % e == 0 && s / e <= INT_MAX && s / e >= -INT_MAX) return s / e;
    return 0;
}

/* The pointer BLAS takes with that increment for the vector whose
 * element 0 is at data: for a negative increment, the element at the
 * lowest address, logical element n - 1 (reference BLAS starts a
 * negative-increment walk at x[(1 - n) * incx]). */
static const char *vec_base(const char *data, int64_t n, int64_t s) {
    return s < 0 && n > 1 ? data + (n - 1) * s : data;
}

/* A vector for BLAS: p/inc, or a contiguous copy in *tmp (a pooled
 * buffer). */
static int vec_for_blas(tg_dtype dt, const char *data, int64_t n, int64_t s, const char **p, int *inc,
                        tg_buffer **tmp) {
    int64_t e = (int64_t)tg_isize(dt);
    int64_t i = vec_inc(n, s, e);
    if (i) {
        *p = vec_base(data, n, s);
        *inc = (int)i;
        return K_OK;
    }
    if (!(*tmp = tg_buffer_new((size_t)(n * e)))) return K_NOMEM;
    tg_cast_strided(dt, (*tmp)->data, e, dt, data, s, n);
    *p = (*tmp)->data;
    *inc = 1;
    return K_OK;
}

/* ---- OpenBLAS's threads, by the size of the call ----
 *
 * OpenBLAS splits a product among its threads from 64x64x64 on, and a
 * gemv, ger or dot from about 10,000 elements: waking them, and their
 * spinning afterwards beside tg's own OpenMP threads, costs more than
 * they save well beyond that (2-core VM, the MLP's training step, float32,
 * OPENBLAS_NUM_THREADS=1 against the default: batch 1 0.062 against 0.168
 * ms, batch 10 0.27 against 0.40, batch 30 0.59 against 0.58, batch 60
 * 1.00 against 0.94, batch 200 3.5 against 2.3; alone, a 784x500 ger
 * 0.049 ms on one thread, 0.059 on two, a 2000x2000 one 0.29 and 0.15).
 * So a product of fewer than 8M multiply-adds, and a matrix-vector
 * product, rank-1 update or dot over fewer than 1M elements, runs on one
 * thread (tg_blas_for, op.h). Measured on two cores: where waking threads
 * is cheaper and there are more of them, they pay off sooner, and
 * TG_BLAS_SERIAL_BELOW=L3,L2 sets the two limits (multiply-adds, elements;
 * 0: OpenBLAS decides, as before). */
static double par_min[2]; /* products, matrix-vector work */
static pthread_once_t par_once = PTHREAD_ONCE_INIT;

static void read_par_min(void) {
    par_min[0] = 8.0 * 1024 * 1024;
    par_min[1] = 1024.0 * 1024;
    /* two whole numbers, or one for both; anything else: the defaults,
     * as for any unreadable setting of the environment */
    const char *e = getenv("TG_BLAS_SERIAL_BELOW");
    if (e && *e >= '0' && *e <= '9') {
        char *end;
        unsigned long long a = strtoull(e, &end, 10), b = a;
        if (*end == ',' && end[1] >= '0' && end[1] <= '9') b = strtoull(end + 1, &end, 10);
        if (!*end) {
            par_min[0] = (double)a;
            par_min[1] = (double)b;
        }
    }
}

tg_blas_guard tg_blas_for(double M, double N, double K) {
    pthread_once(&par_once, read_par_min);
    const double work = M * N * K, min = par_min[M == 1 || N == 1 || K == 1];
    return work < min ? tg_blas_single() : (tg_blas_guard){0};
}

/* C = beta*C over n contiguous elements, before a rank-1 update (gemm's
 * beta: 0 clears, so that a NaN in C does not survive as 0*NaN). */
static void scale_c(tg_dtype dt, char *C, int64_t M, int64_t N, double beta) {
    const size_t e = tg_isize(dt);
    if (beta == 1) return;
    if (beta == 0) {
        memset(C, 0, (size_t)(M * N) * e);
        return;
    }
    const bool one = M * N <= INT_MAX;
    for (int64_t i = 0; i < (one ? 1 : M); i++) {
        const int n = (int)(one ? M * N : N);
        char *c = C + (size_t)(i * N) * e;
        if (dt == TG_FLOAT64)
            cblas_dscal(n, beta, (double *)c, 1);
        else
            cblas_sscal(n, (float)beta, (float *)c, 1);
    }
}

/* C (M x N, row stride N) += alpha x y^T, x and y BLAS vectors: the ger
 * op, and gemm with an inner length of 1. */
static void ger_float(bool d, int64_t M, int64_t N, double alpha, const char *x, int64_t ix, const char *y,
                      int64_t iy, char *C) {
    if (d)
        cblas_dger(CblasRowMajor, (int)M, (int)N, alpha, (const double *)x, (int)ix, (const double *)y, (int)iy,
                   (double *)C, (int)N);
    else
        cblas_sger(CblasRowMajor, (int)M, (int)N, (float)alpha, (const float *)x, (int)ix, (const float *)y,
                   (int)iy, (float *)C, (int)N);
}

/* ---- kernels: C (M x N, C-contiguous) = alpha*A@B + beta*C ---- */

static int gemm_float_body(tg_dtype dt, const mat *A, const mat *B, double alpha, double beta, char *C);

static int gemm_float(tg_dtype dt, const mat *A, const mat *B, double alpha, double beta, char *C) {
    tg_blas_guard g = tg_blas_for((double)A->rows, (double)B->cols, (double)A->cols);
    int rc = gemm_float_body(dt, A, B, alpha, beta, C);
    tg_blas_restore(g);
    return rc;
}

static int gemm_float_body(tg_dtype dt, const mat *A, const mat *B, double alpha, double beta, char *C) {
    const int64_t M = A->rows, K = A->cols, N = B->cols, e = (int64_t)tg_isize(dt);
    const bool d = dt == TG_FLOAT64;
    tg_buffer *t0 = NULL, *t1 = NULL;
    int rc = K_OK;
    if (M == 0 || N == 0) return K_OK;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) return K_BIG;
    if (K == 0) {
        for (int64_t i = 0; i < M * N; i++) {
            double c = beta == 0 ? 0 : beta * tg_load_f64(dt, C + i * e);
            tg_store_f64(dt, C + i * e, c);
        }
        return K_OK;
    }
    if (M == 1 || N == 1) {
        /* gemv and dot scale y by beta: with beta 0 a NaN there would
         * survive as 0*NaN in some kernels, so clear it. */
        if (beta == 0) memset(C, 0, (size_t)(M * N * e));
    }
    if (M == 1 && N == 1) {
        const char *pa, *pb;
        int ia, ib;
        if ((rc = vec_for_blas(dt, A->data, K, A->cs, &pa, &ia, &t0)) ||
            (rc = vec_for_blas(dt, B->data, K, B->rs, &pb, &ib, &t1)))
            goto done;
        if (d) {
            double r = cblas_ddot((int)K, (const double *)pa, ia, (const double *)pb, ib);
            *(double *)C = alpha * r + (beta == 0 ? 0 : beta * *(double *)C);
        } else {
            float r = cblas_sdot((int)K, (const float *)pa, ia, (const float *)pb, ib);
            *(float *)C = (float)alpha * r + (beta == 0 ? 0 : (float)beta * *(float *)C);
        }
        goto done;
    }
    if (N == 1 || M == 1) {
        /* The matrix operand and the vector: A and B's column, or B and
         * A's row (then the product is B^T a). */
        const mat *m = N == 1 ? A : B;
        const char *pm = m->data, *pv;
        int iv;
        CBLAS_TRANSPOSE t;
        int64_t ld;
        if (N == 1) {
            if ((rc = vec_for_blas(dt, B->data, K, B->rs, &pv, &iv, &t0))) goto done;
        } else {
            if ((rc = vec_for_blas(dt, A->data, K, A->cs, &pv, &iv, &t0))) goto done;
        }
        if (!blas_layout(m, e, &t, &ld)) {
            if (!(t1 = mat_copy(m, dt))) {
                rc = K_NOMEM;
                goto done;
            }
            pm = t1->data;
            t = CblasNoTrans;
            ld = m->cols;
        }
        /* The stored matrix is rows x cols (NoTrans) or cols x rows. */
        int sr = (int)(t == CblasNoTrans ? m->rows : m->cols),
            sc = (int)(t == CblasNoTrans ? m->cols : m->rows);
        CBLAS_TRANSPOSE op = (N == 1) == (t == CblasNoTrans) ? CblasNoTrans : CblasTrans;
        if (d)
            cblas_dgemv(CblasRowMajor, op, sr, sc, alpha, (const double *)pm, (int)ld, (const double *)pv, iv,
                        beta, (double *)C, 1);
        else
            cblas_sgemv(CblasRowMajor, op, sr, sc, (float)alpha, (const float *)pm, (int)ld,
                        (const float *)pv, iv, (float)beta, (float *)C, 1);
        goto done;
    }
    if (K == 1 && vec_inc(M, A->rs, e) && vec_inc(N, B->cs, e)) {
        /* An outer product (a training step's weight update at batch 1):
         * a rank-1 update, which OpenBLAS's gemm runs at a third of ger's
         * speed (784x500 float32: 0.11 against 0.045 ms, one thread). */
        scale_c(dt, C, M, N, beta);
        ger_float(d, M, N, alpha, vec_base(A->data, M, A->rs), vec_inc(M, A->rs, e), vec_base(B->data, N, B->cs),
                  vec_inc(N, B->cs, e), C);
        goto done;
    }
    CBLAS_TRANSPOSE ta, tb;
    int64_t lda, ldb;
    const char *pa = A->data, *pb = B->data;
    if (!blas_layout(A, e, &ta, &lda)) {
        if (!(t0 = mat_copy(A, dt))) {
            rc = K_NOMEM;
            goto done;
        }
        pa = t0->data;
        ta = CblasNoTrans;
        lda = K;
    }
    if (!blas_layout(B, e, &tb, &ldb)) {
        if (!(t1 = mat_copy(B, dt))) {
            rc = K_NOMEM;
            goto done;
        }
        pb = t1->data;
        tb = CblasNoTrans;
        ldb = N;
    }
    if (d)
        cblas_dgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, alpha, (const double *)pa, (int)lda,
                    (const double *)pb, (int)ldb, beta, (double *)C, (int)N);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, (float)alpha, (const float *)pa, (int)lda,
                    (const float *)pb, (int)ldb, (float)beta, (float *)C, (int)N);
done:
    tg_buffer_unref(t0);
    tg_buffer_unref(t1);
    return rc;
}

static int gemm_half(const mat *A, const mat *B, double alpha, double beta, char *C) {
    const int64_t M = A->rows, K = A->cols, N = B->cols;
    int rc = K_NOMEM;
    float *a = tg_malloc((size_t)(M * K) * 4 + 1), *b = tg_malloc((size_t)(K * N) * 4 + 1),
          *c = tg_malloc((size_t)(M * N) * 4 + 1);
    if (!a || !b || !c) goto done;
    for (int64_t i = 0; i < M; i++)
        tg_cast_strided(TG_FLOAT32, a + i * K, 4, TG_FLOAT16, A->data + i * A->rs, A->cs, K);
    for (int64_t k = 0; k < K; k++)
        tg_cast_strided(TG_FLOAT32, b + k * N, 4, TG_FLOAT16, B->data + k * B->rs, B->cs, N);
    if (beta != 0) tg_cast_strided(TG_FLOAT32, c, 4, TG_FLOAT16, C, 2, M * N);
    mat fa = {(const char *)a, M, K, K * 4, 4}, fb = {(const char *)b, K, N, N * 4, 4};
    if ((rc = gemm_float(TG_FLOAT32, &fa, &fb, alpha, beta, (char *)c))) goto done;
    tg_cast_strided(TG_FLOAT16, C, 2, TG_FLOAT32, c, 4, M * N);
done:
    tg_free(a);
    tg_free(b);
    tg_free(c);
    return rc;
}

/* Integer products by blocks of JB output columns: one row of C at a
 * time accumulates k-outer, j-inner (unit-stride B rows vectorise), in
 * unsigned U (wraps as NumPy's integers; signed overflow would be
 * undefined), skipping a zero a[i,k]. */
#define JB 256
#define INT_GEMM(SUF, T, U)                                                                                  \
    static void lgemm_##SUF(const mat *A, const mat *B, U alpha, U beta, char *C, int64_t i0, int64_t i1) {  \
        const int64_t K = A->cols, N = B->cols;                                                              \
        U acc[JB];                                                                                           \
        for (int64_t i = i0; i < i1; i++) {                                                                  \
            T *crow = (T *)C + i * N;                                                                        \
            for (int64_t j0 = 0; j0 < N; j0 += JB) {                                                         \
                const int64_t nj = N - j0 < JB ? N - j0 : JB;                                                \
                for (int64_t jj = 0; jj < nj; jj++) acc[jj] = 0;                                             \
                for (int64_t k = 0; k < K; k++) {                                                            \
                    const U a = (U) * (const T *)(A->data + i * A->rs + k * A->cs);                          \
                    if (!a) continue;                                                                        \
                    const char *bp = B->data + k * B->rs + j0 * B->cs;                                       \
                    if (B->cs == (int64_t)sizeof(T)) {                                                       \
                        const T *b = (const T *)bp;                                                          \
                        _Pragma("omp simd") for (int64_t jj = 0; jj < nj; jj++) acc[jj] += a * (U)b[jj];     \
                    } else {                                                                                 \
                        for (int64_t jj = 0; jj < nj; jj++)                                                  \
                            acc[jj] += a * (U) * (const T *)(bp + jj * B->cs);                               \
                    }                                                                                        \
                }                                                                                            \
                if (beta)                                                                                    \
                    for (int64_t jj = 0; jj < nj; jj++)                                                      \
                        crow[j0 + jj] = (T)(alpha * acc[jj] + beta * (U)crow[j0 + jj]);                      \
                else                                                                                         \
                    for (int64_t jj = 0; jj < nj; jj++) crow[j0 + jj] = (T)(alpha * acc[jj]);                \
            }                                                                                                \
        }                                                                                                    \
    }
INT_GEMM(i8, int8_t, uint32_t)
INT_GEMM(u8, uint8_t, uint32_t)
INT_GEMM(i16, int16_t, uint32_t)
INT_GEMM(u16, uint16_t, uint32_t)
INT_GEMM(i32, int32_t, uint32_t)
INT_GEMM(u32, uint32_t, uint32_t)
INT_GEMM(i64, int64_t, uint64_t)
INT_GEMM(u64, uint64_t, uint64_t)

static void bgemm(const mat *A, const mat *B, bool alpha, bool beta, char *C, int64_t i0, int64_t i1) {
    const int64_t K = A->cols, N = B->cols;
    uint8_t acc[JB];
    for (int64_t i = i0; i < i1; i++) {
        uint8_t *crow = (uint8_t *)C + i * N;
        for (int64_t j0 = 0; j0 < N; j0 += JB) {
            const int64_t nj = N - j0 < JB ? N - j0 : JB;
            memset(acc, 0, sizeof acc);
            for (int64_t k = 0; k < K; k++) {
                if (!A->data[i * A->rs + k * A->cs]) continue;
                const char *bp = B->data + k * B->rs + j0 * B->cs;
                for (int64_t jj = 0; jj < nj; jj++) acc[jj] |= bp[jj * B->cs] != 0;
            }
            for (int64_t jj = 0; jj < nj; jj++)
                crow[j0 + jj] = (uint8_t)((alpha && acc[jj]) || (beta && crow[j0 + jj]));
        }
    }
}

static void int_rows(tg_dtype dt, const mat *A, const mat *B, scal alpha, scal beta, char *C, int64_t i0,
                     int64_t i1) {
    uint32_t a32 = (uint32_t)alpha.i, b32 = (uint32_t)beta.i;
    uint64_t a64 = (uint64_t)alpha.i, b64 = (uint64_t)beta.i;
    switch (dt) {
    case TG_BOOL: bgemm(A, B, alpha.i != 0, beta.i != 0, C, i0, i1); break;
    case TG_INT8: lgemm_i8(A, B, a32, b32, C, i0, i1); break;
    case TG_UINT8: lgemm_u8(A, B, a32, b32, C, i0, i1); break;
    case TG_INT16: lgemm_i16(A, B, a32, b32, C, i0, i1); break;
    case TG_UINT16: lgemm_u16(A, B, a32, b32, C, i0, i1); break;
    case TG_INT32: lgemm_i32(A, B, a32, b32, C, i0, i1); break;
    case TG_UINT32: lgemm_u32(A, B, a32, b32, C, i0, i1); break;
    case TG_INT64: lgemm_i64(A, B, a64, b64, C, i0, i1); break;
    case TG_UINT64: lgemm_u64(A, B, a64, b64, C, i0, i1); break;
    default: break;
    }
}

static int gemm_any(tg_dtype dt, const mat *A, const mat *B, scal alpha, scal beta, char *C) {
    if (dt == TG_FLOAT32 || dt == TG_FLOAT64) return gemm_float(dt, A, B, alpha.f, beta.f, C);
    if (A->rows == 0 || B->cols == 0) return K_OK;
    if (dt == TG_FLOAT16) return gemm_half(A, B, alpha.f, beta.f, C);
    const int64_t M = A->rows;
    const double work = (double)M * (double)B->cols * (double)(A->cols + 1);
    if (M > 1 && work >= TG_PARALLEL_MIN && omp_get_max_threads() > 1 && !omp_in_parallel()) {
        int nth = omp_get_max_threads();
        if (nth > M) nth = (int)M;
#pragma omp parallel num_threads(nth)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t i0 = M * t / nt, i1 = M * (t + 1) / nt;
            int_rows(dt, A, B, alpha, beta, C, i0, i1);
        }
    } else {
        int_rows(dt, A, B, alpha, beta, C, 0, M);
    }
    return K_OK;
}

/* C += alpha * (A @ B) with alpha a float zero (+0 or -0), after the
 * BLAS call that skipped the product: formed into a scratch matrix and
 * added elementwise, as beta*z + alpha*dot(x, y) is written: 0 * inf and
 * 0 * NaN are NaN there, and -0 + 0 is 0. C is A.rows by
 * B.cols, contiguous. */
static int add_zero_times_product(tg_dtype dt, const mat *A, const mat *B, double alpha, char *C) {
    const int64_t n = A->rows * B->cols, e = (int64_t)tg_isize(dt);
    if (n == 0) return K_OK;
    char *T = tg_malloc((size_t)(n * e));
    if (!T) return K_NOMEM;
    int k = gemm_any(dt, A, B, S_ONE, S_ZERO, T);
    if (!k)
        for (int64_t i = 0; i < n; i++)
            tg_store_f64(dt, C + i * e, tg_load_f64(dt, C + i * e) + alpha * tg_load_f64(dt, T + i * e));
    tg_free(T);
    return k;
}

/* ---- shapes ---- */

static void add_shape(tg_str *s, int n, const int64_t *sh) {
    tg_str_addf(s, "(");
    for (int i = 0; i < n; i++) {
        if (sh[i] < 0)
            tg_str_addf(s, "%sNone", i ? ", " : "");
        else
            tg_str_addf(s, "%s%lld", i ? ", " : "", (long long)sh[i]);
    }
    tg_str_addf(s, n == 1 ? ",)" : ")");
}

/* NumPy's message, naming the node's inputs ia and ib. */
static int not_aligned(tg_ctx *ctx, int ia, int ib, int na, const int64_t *sa, int nb, const int64_t *sb,
                       int64_t ka, int da, int64_t kb, int db) {
    tg_str s = {0};
    tg_str_addf(&s, "inputs[%d] and inputs[%d]: shapes ", ia, ib);
    add_shape(&s, na, sa);
    tg_str_addf(&s, " and ");
    add_shape(&s, nb, sb);
    int rc = tg_errorf(ctx, TG_ESHAPE, "%s not aligned: %lld (dim %d) != %lld (dim %d)", s.s ? s.s : "",
                       (long long)ka, da, (long long)kb, db);
    tg_str_free(&s);
    return rc;
}

static bool len_conflict(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

/* Output shape of dot/matmul of inputs ia and ib given (static or
 * run-time) shapes; -1 lengths allowed for static inference. */
static int product_shape(blas_kind k, int ia, int ib, int na, const int64_t *sa, int nb, const int64_t *sb,
                         int *nd, int64_t *out, tg_ctx *ctx) {
    if (k == B_DOT) {
        if (na > 2 || nb > 2)
            return tg_errorf(ctx, TG_ETYPE,
                             "dot takes operands of at most 2 dimensions (got %d and %d); use matmul", na,
                             nb);
        if (na == 0 || nb == 0) {
            const int64_t *s = na == 0 ? sb : sa;
            *nd = na == 0 ? nb : na;
            memcpy(out, s, sizeof(int64_t) * (size_t)*nd);
            return TG_OK;
        }
        int64_t ka = sa[na - 1], kb = sb[0];
        if (len_conflict(ka, kb)) return not_aligned(ctx, ia, ib, na, sa, nb, sb, ka, na - 1, kb, 0);
        *nd = 0;
        if (na == 2) out[(*nd)++] = sa[0];
        if (nb == 2) out[(*nd)++] = sb[1];
        return TG_OK;
    }
    if (na == 0 || nb == 0)
        return tg_errorf(ctx, TG_ETYPE,
                         "matmul: inputs[%d] is 0-d; operands need at least 1 dimension (use mul)",
                         na == 0 ? ia : ib);
    int64_t ka = sa[na - 1], kb = nb == 1 ? sb[0] : sb[nb - 2];
    if (len_conflict(ka, kb))
        return not_aligned(ctx, ia, ib, na, sa, nb, sb, ka, na - 1, kb, nb == 1 ? 0 : nb - 2);
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, bn = ba > bb ? ba : bb;
    if (bn + 2 > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ETYPE, "matmul: the result would have more than %d dimensions", TG_MAX_NDIM);
    int ja = 0, jb = 0;
    if (tg_batch_broadcast(ba, sa, bb, sb, out, &ja, &jb) < 0) {
        tg_str s = {0};
        tg_str_addf(&s, "inputs[%d] and inputs[%d]: batch dimensions of shapes ", ia, ib);
        add_shape(&s, na, sa);
        tg_str_addf(&s, " and ");
        add_shape(&s, nb, sb);
        int rc = tg_errorf(ctx, TG_ESHAPE, "%s do not broadcast: %lld (dim %d) != %lld (dim %d)",
                           s.s ? s.s : "", (long long)sa[ja], ja, (long long)sb[jb], jb);
        tg_str_free(&s);
        return rc;
    }
    *nd = bn;
    if (na >= 2) out[(*nd)++] = sa[na - 2];
    if (nb >= 2) out[(*nd)++] = sb[nb - 1];
    return TG_OK;
}

/* gemm, gemv, ger: inputs `idx` (the arrays) share one integer or float
 * dtype; alpha/beta (weak ones already took it) must have it too. */
static int same_dtype(tg_node *n, const int *idx, int cnt, const int *scal_idx, int nscal, tg_dtype *dt,
                      tg_ctx *ctx) {
    static const char *const names[3][5] = {
        {"z", "alpha", "x", "y", "beta"}, {"z", "alpha", "A", "x", "beta"}, {"A", "alpha", "x", "y", ""}};
    const blas_impl *im = n->op->impl;
    const char *const *nm = names[im->kind == B_GEMM ? 0 : im->kind == B_GEMV ? 1 : 2];
    *dt = n->inputs[idx[0]]->type.dtype;
    for (int i = 0; i < cnt; i++) {
        tg_dtype d = n->inputs[idx[i]]->type.dtype;
        if (d != *dt || !(tg_dtype_is_float(d) || tg_dtype_is_int(d)))
            return tg_errorf(ctx, TG_ETYPE,
                             "%s needs %s, %s and %s of one integer or float dtype; got %s %s, %s %s, %s %s",
                             n->op->name, nm[idx[0]], nm[idx[1]], nm[idx[2]], nm[idx[0]],
                             tg_dtype_name(n->inputs[idx[0]]->type.dtype), nm[idx[1]],
                             tg_dtype_name(n->inputs[idx[1]]->type.dtype), nm[idx[2]],
                             tg_dtype_name(n->inputs[idx[2]]->type.dtype));
    }
    for (int i = 0; i < nscal; i++) {
        tg_dtype d = n->inputs[scal_idx[i]]->type.dtype;
        if (d != *dt)
            return tg_errorf(
                ctx, TG_ETYPE,
                "inputs[%d] '%s' (%s) is %s: %s's %s must have %s's dtype %s (or be a weak inline scalar)",
                scal_idx[i], nm[scal_idx[i]], n->inputs[scal_idx[i]]->id, tg_dtype_name(d), n->op->name,
                nm[scal_idx[i]], nm[idx[0]], tg_dtype_name(*dt));
    }
    return TG_OK;
}

/* alpha/beta: a weak scalar takes the dtype of z (A for ger); a weak
 * float cannot become an integer (0.5 would silently be 0). */
static int take_scalar(tg_node *n, int i, tg_dtype dt, tg_ctx *ctx) {
    const tg_var *v = n->inputs[i];
    if (v->weak && tg_dtype_is_float(v->type.dtype) && !tg_dtype_is_float(dt))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[%d] (%s) is a float but %s computes in %s's dtype %s; write an integer", i,
                         i == 1 ? "alpha" : "beta", n->op->name,
                         ((const blas_impl *)n->op->impl)->kind == B_GER ? "A" : "z", tg_dtype_name(dt));
    return tg_weak_take(n, i, dt, ctx);
}

static int need_ndim(tg_node *n, int i, const char *name, int nd, tg_ctx *ctx) {
    if (n->inputs[i]->type.ndim != nd)
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s' (%s of %s) must have %d dimension%s, not %d", i,
                         n->inputs[i]->id, name, n->op->name, nd, nd == 1 ? "" : "s",
                         n->inputs[i]->type.ndim);
    return TG_OK;
}

static int blas_infer(tg_node *n, tg_ctx *ctx) {
    const blas_impl *im = n->op->impl;
    int rc;
    tg_dtype dt = TG_DTYPE_INVALID;
    int64_t shape[TG_MAX_NDIM] = {0};
    int nd = 0;
    switch (im->kind) {
    case B_DOT:
    case B_MATMUL: {
        if ((rc = tg_weak_resolve(n, 0, 2, &dt, ctx))) return rc;
        const tg_type *a = &n->inputs[0]->type, *b = &n->inputs[1]->type;
        if ((rc = product_shape(im->kind, 0, 1, a->ndim, a->shape, b->ndim, b->shape, &nd, shape, ctx)))
            return rc;
        break;
    }
    case B_OUTER: {
        if ((rc = tg_weak_resolve(n, 0, 2, &dt, ctx))) return rc;
        nd = 2;
        int64_t la = 1, lb = 1;
        const tg_type *a = &n->inputs[0]->type, *b = &n->inputs[1]->type;
        for (int d = 0; d < a->ndim; d++) la = a->shape[d] < 0 || la < 0 ? -1 : la * a->shape[d];
        for (int d = 0; d < b->ndim; d++) lb = b->shape[d] < 0 || lb < 0 ? -1 : lb * b->shape[d];
        shape[0] = la;
        shape[1] = lb;
        break;
    }
    case B_GEMM:
    case B_GEMV: { /* z, alpha, x (A), y (x), beta */
        const bool mm = im->kind == B_GEMM;
        tg_dtype zd = n->inputs[0]->type.dtype;
        if ((rc = take_scalar(n, 1, zd, ctx)) || (rc = take_scalar(n, 4, zd, ctx))) return rc;
        if ((rc = same_dtype(n, (int[]){0, 2, 3}, 3, (int[]){1, 4}, 2, &dt, ctx))) return rc;
        if ((rc = need_ndim(n, 0, "z", mm ? 2 : 1, ctx)) || (rc = need_ndim(n, 1, "alpha", 0, ctx)) ||
            (rc = need_ndim(n, 2, mm ? "x" : "A", 2, ctx)) ||
            (rc = need_ndim(n, 3, mm ? "y" : "x", mm ? 2 : 1, ctx)) || (rc = need_ndim(n, 4, "beta", 0, ctx)))
            return rc;
        const tg_type *x = &n->inputs[2]->type, *y = &n->inputs[3]->type, *z = &n->inputs[0]->type;
        if ((rc = product_shape(B_DOT, 2, 3, 2, x->shape, y->ndim, y->shape, &nd, shape, ctx))) return rc;
        for (int d = 0; d < nd; d++) {
            if (len_conflict(shape[d], z->shape[d]))
                return tg_errorf(ctx, TG_ESHAPE,
                                 "inputs[0] 'z' has length %lld in dimension %d but the product %s has %lld",
                                 (long long)z->shape[d], d, mm ? "dot(x, y)" : "dot(A, x)",
                                 (long long)shape[d]);
            if (shape[d] < 0) shape[d] = z->shape[d];
        }
        break;
    }
    case B_GER: { /* A, alpha, x, y */
        tg_dtype ad = n->inputs[0]->type.dtype;
        if ((rc = take_scalar(n, 1, ad, ctx))) return rc;
        if ((rc = same_dtype(n, (int[]){0, 2, 3}, 3, (int[]){1}, 1, &dt, ctx))) return rc;
        if ((rc = need_ndim(n, 0, "A", 2, ctx)) || (rc = need_ndim(n, 1, "alpha", 0, ctx)) ||
            (rc = need_ndim(n, 2, "x", 1, ctx)) || (rc = need_ndim(n, 3, "y", 1, ctx)))
            return rc;
        const tg_type *A = &n->inputs[0]->type, *x = &n->inputs[2]->type, *y = &n->inputs[3]->type;
        if (len_conflict(A->shape[0], x->shape[0]) || len_conflict(A->shape[1], y->shape[0]))
            return tg_errorf(ctx, TG_ESHAPE, "ger: A is (%lld, %lld) but x and y have lengths %lld and %lld",
                             (long long)A->shape[0], (long long)A->shape[1], (long long)x->shape[0],
                             (long long)y->shape[0]);
        nd = 2;
        shape[0] = A->shape[0] >= 0 ? A->shape[0] : x->shape[0];
        shape[1] = A->shape[1] >= 0 ? A->shape[1] : y->shape[0];
        break;
    }
    }
    tg_set_out_type(n, 0, dt, nd, shape);
    return TG_OK;
}

/* ---- run ---- */

/* The last two dimensions of a (a row for 1-D when vector_is_row, else a
 * column; 0-d is 1 x 1), starting at data. */
static mat as_mat(const tg_array *a, const char *data, bool vector_is_row) {
    const int64_t e = (int64_t)tg_isize(a->dtype);
    mat m = {data, 1, 1, e, e};
    if (a->ndim >= 2) {
        m.rows = a->shape[a->ndim - 2];
        m.cols = a->shape[a->ndim - 1];
        m.rs = a->strides[a->ndim - 2];
        m.cs = a->strides[a->ndim - 1];
    } else if (a->ndim == 1 && vector_is_row) {
        m.cols = a->shape[0];
        m.cs = a->strides[0];
        m.rs = m.cols * e;
    } else if (a->ndim == 1) {
        m.rows = a->shape[0];
        m.rs = a->strides[0];
    }
    return m;
}

/* in itself when it has dtype dt, else a converted copy in *tmp. */
static tg_array *as_dtype(tg_array *in, tg_dtype dt, tg_array **tmp) {
    *tmp = NULL;
    if (in->dtype == dt) return in;
    *tmp = tg_array_copy(in, dt);
    return *tmp;
}

/* dot with a 0-d operand: the elementwise product, as NumPy. */
static int scalar_times(tg_dtype dt, const tg_array *s, const tg_array *a, char *out, tg_ctx *ctx) {
    tg_array *ca = tg_array_copy(a, dt);
    if (!ca) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    const int64_t n = tg_array_size_inline(a);
    const size_t e = tg_isize(dt);
    const double sf = tg_load_f64(dt, s->data);
    const int64_t si = tg_dtype_is_float(dt) ? 0 : tg_load_i64(dt, s->data);
    for (int64_t i = 0; i < n; i++) {
        const char *p = ca->data + (size_t)i * e;
        if (tg_dtype_is_float(dt))
            tg_store_f64(dt, out + (size_t)i * e, sf * tg_load_f64(dt, p));
        else if (dt == TG_BOOL)
            out[i] = si && p[0];
        else
            tg_store_i64(dt, out + (size_t)i * e, (int64_t)((uint64_t)si * (uint64_t)tg_load_i64(dt, p)));
    }
    tg_array_free(ca);
    return TG_OK;
}

/* True when dimensions 0..nd-1 of a collapse into one of stride
 * a->strides[nd-1] (so a batch of matrices is one tall matrix). */
static bool rows_collapse(const tg_array *a, int nd) {
    for (int d = 0; d + 1 < nd; d++)
        if (a->shape[d] != 1 && a->strides[d] != a->strides[d + 1] * a->shape[d + 1]) return false;
    return true;
}

/* Product bi of a batched matmul over the broadcast batch axes (bn of
 * them; a has ba, b bb) into o. */
static int batch_product(tg_dtype dt, const tg_array *a, const tg_array *b, int bn, int ba, int bb,
                         const int64_t *shape, int64_t bi, char *o) {
    const char *pa = a->data, *pb = b->data;
    int64_t r = bi;
    for (int d = bn - 1; d >= 0; d--) {
        int64_t idx = r % shape[d];
        r /= shape[d];
        int ia = d - (bn - ba), ib = d - (bn - bb);
        if (ia >= 0 && a->shape[ia] != 1) pa += idx * a->strides[ia];
        if (ib >= 0 && b->shape[ib] != 1) pb += idx * b->strides[ib];
    }
    mat A = as_mat(a, pa, true), B = as_mat(b, pb, false);
    return gemm_any(dt, &A, &B, S_ONE, S_ZERO, o);
}

static int run_product(blas_kind kind, tg_dtype dt, tg_array *a, tg_array *b, tg_array **out, tg_ctx *ctx) {
    int64_t shape[TG_MAX_NDIM];
    int nd = 0, rc, k;
    if ((rc = product_shape(kind, 0, 1, a->ndim, a->shape, b->ndim, b->shape, &nd, shape, ctx))) return rc;
    if ((rc = tg_array_prepare(out, dt, nd, shape, ctx))) return rc;
    char *o = (*out)->data;
    if (kind == B_DOT && (a->ndim == 0 || b->ndim == 0))
        return a->ndim == 0 ? scalar_times(dt, a, b, o, ctx) : scalar_times(dt, b, a, o, ctx);
    if (b->ndim <= 2 && (a->ndim <= 2 || rows_collapse(a, a->ndim - 1))) {
        /* One product; a batch of a against one b is one tall matrix. */
        mat A = as_mat(a, a->data, true), B = as_mat(b, b->data, false);
        if (a->ndim > 2) {
            A.rows = 1;
            for (int d = 0; d < a->ndim - 1; d++) A.rows *= a->shape[d];
        }
        if ((k = gemm_any(dt, &A, &B, S_ONE, S_ZERO, o))) return kernel_error(ctx, k);
        return TG_OK;
    }
    /* Batched matmul over the broadcast batch dimensions. */
    const int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
    const int bn = nd - (a->ndim >= 2) - (b->ndim >= 2);
    int64_t nbatch = 1;
    for (int d = 0; d < bn; d++) nbatch *= shape[d];
    const int64_t M = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1, N = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
    const int64_t K = a->shape[a->ndim - 1];
    const size_t osz = (size_t)(M * N) * tg_isize(dt);
    /* Threads over the batch for the loop kernels. BLAS products run one
     * after another on BLAS's own threads: OpenBLAS called from several
     * threads at once contends for its buffers (slower than one thread
     * for a batch of 8x8 products). */
    int nth = nbatch > 1 && !(dt == TG_FLOAT32 || dt == TG_FLOAT64) &&
                      (double)nbatch * (double)M * (double)N * (double)(K + 1) >= TG_PARALLEL_MIN
                  ? omp_get_max_threads()
                  : 1;
    if (nth > nbatch) nth = (int)nbatch;
    int err = 0;
    /* (no team for one thread: see TG_PAR_FOR) */
    if (nth > 1) {
#pragma omp parallel for schedule(static) num_threads(nth) reduction(min : err)
        for (int64_t bi = 0; bi < nbatch; bi++) {
            int e = batch_product(dt, a, b, bn, ba, bb, shape, bi, o + (size_t)bi * osz);
            if (e < err) err = e;
        }
    } else {
        for (int64_t bi = 0; bi < nbatch; bi++) {
            int e = batch_product(dt, a, b, bn, ba, bb, shape, bi, o + (size_t)bi * osz);
            if (e < err) err = e;
        }
    }
    return err ? kernel_error(ctx, err) : TG_OK;
}

/* A flat view of a when its elements are equally spaced (1-D, or
 * C-contiguous), else a contiguous copy; *tmp holds what to free. */
static mat flat_vector(tg_array *a, tg_dtype dt, bool row, tg_array **tmp) {
    *tmp = NULL;
    int64_t n = tg_array_size_inline(a), s = (int64_t)tg_isize(dt);
    const char *p = a->data;
    if (a->ndim == 1) {
        s = a->strides[0];
    } else if (!tg_array_is_contiguous(a)) {
        if (!(*tmp = tg_array_copy(a, dt))) return (mat){NULL, 0, 0, 0, 0};
        p = (*tmp)->data;
    }
    const int64_t e = (int64_t)tg_isize(dt);
    return row ? (mat){p, 1, n, n * e, s} : (mat){p, n, 1, s, e};
}

/* out[0] starts as a copy of src (gemm's z, ger's A): or is src itself
 * when the node works in place and src is ours to overwrite and is not
 * read by the product (overlapping operands would read partly updated
 * values): takes_over. */
static bool takes_over(const tg_node *n, tg_array *const *in) {
    const tg_array *src = in[0];
    if (!n->inplace || n->inplace[0] != 0 || !tg_array_is_exclusive(src) || !tg_array_is_contiguous(src))
        return false;
    for (int i = 1; i < n->nin; i++)
        if (in[i]->buf == src->buf) return false;
    return true;
}

static int start_from(tg_node *n, tg_array *const *in, tg_array **out, bool copy, tg_ctx *ctx) {
    tg_array *src = in[0];
    if (takes_over(n, in)) {
        tg_array_free(*out);
        *out = tg_array_ref(src);
        return TG_OK;
    }
    int rc = tg_array_prepare(out, src->dtype, src->ndim, src->shape, ctx);
    if (rc || !copy) return rc;
    /* A plain copy on this thread when it can be one: waking OpenMP's
     * threads for it left them spinning, on a 2-core machine, through the
     * BLAS call that follows, whose own threads then waited for a core
     * (the MLP's training step ran 3x slower). */
    if (tg_array_is_contiguous(src) && tg_array_is_contiguous(*out)) {
        memcpy((*out)->data, src->data, (size_t)tg_array_size_inline(src) * tg_isize(src->dtype));
        return TG_OK;
    }
    return tg_array_assign(*out, src, ctx);
}

/* Whether gemm_float takes A and B as they are: no copy, no scratch, so
 * no failure (its branches, in its order). */
static bool gemm_float_ready(int64_t e, const mat *A, const mat *B) {
    const int64_t M = A->rows, K = A->cols, N = B->cols;
    CBLAS_TRANSPOSE t;
    int64_t ld;
    if (M == 0 || N == 0) return true;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) return false;
    if (K == 0) return true;
    if (M == 1 && N == 1) return vec_inc(K, A->cs, e) && vec_inc(K, B->rs, e);
    if (N == 1) return vec_inc(K, B->rs, e) && blas_layout(A, e, &t, &ld);
    if (M == 1) return vec_inc(K, A->cs, e) && blas_layout(B, e, &t, &ld);
    if (K == 1 && vec_inc(M, A->rs, e) && vec_inc(N, B->cs, e)) return true;
    return blas_layout(A, e, &t, &ld) && blas_layout(B, e, &t, &ld);
}

/* tg_op.commit_ready for gemm, gemv and ger: float32 or float64 operands
 * of the output's dtype whose shapes agree, laid out as BLAS takes them,
 * input 0 taken over (start_from), and an alpha that is not 0 (a zero one
 * adds 0 * the product from a scratch matrix). Then blas_run allocates
 * nothing and its only calls are to BLAS. */
static bool blas_commit_ready(const tg_node *n, tg_array *const *in) {
    const blas_impl *im = n->op->impl;
    const tg_dtype dt = n->outputs[0]->type.dtype;
    const int64_t e = (int64_t)tg_isize(dt);
    if (dt != TG_FLOAT32 && dt != TG_FLOAT64) return false;
    for (int i = 0; i < n->nin; i++)
        if (!in[i] || in[i]->dtype != dt || in[i]->ndim > 2) return false;
    if (in[1]->ndim != 0 || tg_load_f64(dt, in[1]->data) == 0 || !takes_over(n, in)) return false;
    if (im->kind == B_GER) {
        const tg_array *A = in[0], *x = in[2], *y = in[3];
        if (A->ndim != 2 || x->ndim != 1 || y->ndim != 1) return false;
        const int64_t M = A->shape[0], N = A->shape[1];
        if (M != x->shape[0] || N != y->shape[0]) return false;
        if (M == 0 || N == 0) return true;
        return M <= INT_MAX && N <= INT_MAX && vec_inc(M, x->strides[0], e) && vec_inc(N, y->strides[0], e);
    }
    const tg_array *z = in[0], *A = in[2], *x = in[3];
    const bool mm = im->kind == B_GEMM;
    if (A->ndim != 2 || x->ndim != (mm ? 2 : 1) || z->ndim != (mm ? 2 : 1) || in[4]->ndim != 0) return false;
    const int64_t M = A->shape[0], K = A->shape[1], N = mm ? x->shape[1] : 1;
    if (K != x->shape[0] || z->shape[0] != M || (mm && z->shape[1] != N)) return false;
    mat MA = as_mat(A, A->data, true), MX = as_mat(x, x->data, false);
    return gemm_float_ready(e, &MA, &MX);
}

static int blas_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const blas_impl *im = n->op->impl;
    const tg_dtype dt = n->outputs[0]->type.dtype;
    int rc = TG_OK, k;
    tg_array *t0 = NULL, *t1 = NULL;
    switch (im->kind) {
    case B_DOT:
    case B_MATMUL: {
        tg_array *a = as_dtype(in[0], dt, &t0), *b = as_dtype(in[1], dt, &t1);
        if (!a || !b) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            break;
        }
        rc = run_product(im->kind, dt, a, b, &out[0], ctx);
        break;
    }
    case B_OUTER: {
        tg_array *a = as_dtype(in[0], dt, &t0), *b = as_dtype(in[1], dt, &t1);
        tg_array *fa = NULL, *fb = NULL;
        if (!a || !b) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            break;
        }
        mat A = flat_vector(a, dt, false, &fa), B = flat_vector(b, dt, true, &fb);
        if (!A.data || !B.data) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        } else if (!(rc = tg_array_prepare(&out[0], dt, 2, (int64_t[]){A.rows, B.cols}, ctx))) {
            if ((k = gemm_any(dt, &A, &B, S_ONE, S_ZERO, out[0]->data))) rc = kernel_error(ctx, k);
        }
        tg_array_free(fa);
        tg_array_free(fb);
        break;
    }
    case B_GEMM:
    case B_GEMV: {
        tg_array *z = in[0], *A = in[2], *x = in[3];
        const scal alpha = scal_load(dt, in[1]->data), beta = scal_load(dt, in[4]->data);
        const bool mm = im->kind == B_GEMM;
        const int64_t M = A->shape[0], K = A->shape[1], N = mm ? x->shape[1] : 1;
        if (K != x->shape[0]) {
            rc = not_aligned(ctx, 2, 3, A->ndim, A->shape, x->ndim, x->shape, K, 1, x->shape[0], 0);
            break;
        }
        if (z->shape[0] != M || (mm && z->shape[1] != N)) {
            tg_str s = {0};
            add_shape(&s, z->ndim, z->shape);
            tg_str_addf(&s, " but %s has ", mm ? "dot(x, y)" : "dot(A, x)");
            add_shape(&s, mm ? 2 : 1, (int64_t[]){M, N});
            rc = tg_errorf(ctx, TG_ESHAPE, "inputs[0] 'z' has shape %s", s.s ? s.s : "");
            tg_str_free(&s);
            break;
        }
        const bool bz = scal_is_zero(dt, beta);
        if ((rc = start_from(n, in, out, !bz, ctx))) break;
        mat MA = as_mat(A, A->data, true), MX = as_mat(x, x->data, false);
        if ((k = gemm_any(dt, &MA, &MX, alpha, bz ? S_ZERO : beta, out[0]->data)) ||
            (tg_dtype_is_float(dt) && alpha.f == 0 &&
             (k = add_zero_times_product(dt, &MA, &MX, alpha.f, out[0]->data))))
            rc = kernel_error(ctx, k);
        break;
    }
    case B_GER: {
        tg_array *A = in[0], *x = in[2], *y = in[3];
        const scal alpha = scal_load(dt, in[1]->data);
        const int64_t M = A->shape[0], N = A->shape[1], e = (int64_t)tg_isize(dt);
        if (M != x->shape[0] || N != y->shape[0]) {
            rc = tg_errorf(ctx, TG_ESHAPE, "ger: A is (%lld, %lld) but x and y have lengths %lld and %lld",
                           (long long)M, (long long)N, (long long)x->shape[0], (long long)y->shape[0]);
            break;
        }
        if ((rc = start_from(n, in, out, true, ctx))) break;
        if (tg_dtype_is_float(dt) && alpha.f == 0) { /* A stays, but for 0 * inf and 0 * NaN */
            mat MX = as_mat(x, x->data, false), MY = as_mat(y, y->data, true);
            if ((k = add_zero_times_product(dt, &MX, &MY, alpha.f, out[0]->data))) rc = kernel_error(ctx, k);
            break;
        }
        int64_t ix = vec_inc(M, x->strides[0], e), iy = vec_inc(N, y->strides[0], e);
        if ((dt == TG_FLOAT32 || dt == TG_FLOAT64) && ix && iy && M > 0 && N > 0 && M <= INT_MAX &&
            N <= INT_MAX) {
            tg_blas_guard g = tg_blas_for((double)M, (double)N, 1);
            ger_float(dt == TG_FLOAT64, M, N, alpha.f, vec_base(x->data, M, x->strides[0]), ix,
                      vec_base(y->data, N, y->strides[0]), iy, out[0]->data);
            tg_blas_restore(g);
            break;
        }
        mat MX = as_mat(x, x->data, false), MY = as_mat(y, y->data, true);
        if ((k = gemm_any(dt, &MX, &MY, alpha, S_ONE, out[0]->data))) rc = kernel_error(ctx, k);
        break;
    }
    }
    tg_array_free(t0);
    tg_array_free(t1);
    return rc;
}

static void blas_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                      double *bytes) {
    const blas_impl *im = n->op->impl;
    double b = 0;
    for (int i = 0; i < n->nin; i++)
        b += (double)tg_array_size_inline(in[i]) * (double)tg_isize(in[i]->dtype);
    b += (double)tg_array_size_inline(out[0]) * (double)tg_isize(out[0]->dtype);
    /* 2 flops per multiply-add, k of them per output element; ger's one
     * (A + alpha x y^T) is one too. outer (x y^T) and a dot with a 0-d
     * operand (a scaling) make each element with one multiplication, and
     * nothing to add: mn flops, not 2mn. */
    double k = 1, per = 2;
    if (im->kind == B_GEMM || im->kind == B_GEMV)
        k = (double)in[2]->shape[1];
    else if ((im->kind == B_DOT || im->kind == B_MATMUL) && in[0]->ndim >= 1 && in[1]->ndim >= 1)
        k = (double)in[0]->shape[in[0]->ndim - 1];
    else if (im->kind == B_OUTER || im->kind == B_DOT)
        per = 1;
    *flops = per * k * (double)tg_array_size_inline(out[0]);
    *bytes = b;
}

#define BLAS_OP(NAME, KIND, NIN, INPLACE)                                                                    \
    static const blas_impl impl_##NAME = {KIND};                                                             \
    const tg_op tg_op_##NAME = {                                                                             \
        .name = #NAME,                                                                                       \
        .nin_min = NIN,                                                                                      \
        .nin_max = NIN,                                                                                      \
        .nout = 1,                                                                                           \
        .infer = blas_infer,                                                                                 \
        .run = blas_run,                                                                                     \
        .cost = blas_cost,                                                                                   \
        .view_of = -1,                                                                                       \
        .inplace_inputs = INPLACE,                                                                           \
        .commit_ready = INPLACE ? blas_commit_ready : NULL,                                                  \
        .impl = &impl_##NAME,                                                                                \
        .grad = tg_grad_blas,                                                                                \
    };

BLAS_OP(dot, B_DOT, 2, 0)
BLAS_OP(matmul, B_MATMUL, 2, 0)
BLAS_OP(outer, B_OUTER, 2, 0)
BLAS_OP(gemm, B_GEMM, 5, 1u)
BLAS_OP(gemv, B_GEMV, 5, 1u)
BLAS_OP(ger, B_GER, 4, 1u)
