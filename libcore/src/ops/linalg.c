/* The linear-algebra family beyond the products (FORMAT.md s7): cholesky,
 * matrix_inverse, det, solve, batched over leading dimensions, through
 * the LAPACK routines in OpenBLAS. Debian's OpenBLAS ships no lapacke.h
 * and exports no LAPACKE_* symbols, so the Fortran routines are declared
 * here (LP64: 32-bit integers; the hidden character lengths of gfortran
 * are passed explicitly).
 *
 * LAPACK is column-major: a C-order matrix is its transpose there. Each
 * op works on a contiguous copy in the compute dtype and picks the
 * routine's triangle or transposes so that the result is right in C
 * order. Integers and bool compute in tg_dtype_float_of(); float16 is
 * refused, as NumPy's linalg does. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "grad/grad.h"

typedef size_t flen; /* gfortran's hidden CHARACTER length */

void spotrf_(const char *uplo, const int *n, float *a, const int *lda,
             int *info, flen l1);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda,
             int *info, flen l1);
void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv,
             int *info);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv,
             int *info);
void sgesv_(const int *n, const int *nrhs, float *a, const int *lda,
            int *ipiv, float *b, const int *ldb, int *info);
void dgesv_(const int *n, const int *nrhs, double *a, const int *lda,
            int *ipiv, double *b, const int *ldb, int *info);
void ssysv_(const char *uplo, const int *n, const int *nrhs, float *a,
            const int *lda, int *ipiv, float *b, const int *ldb, float *work,
            const int *lwork, int *info, flen l1);
void dsysv_(const char *uplo, const int *n, const int *nrhs, double *a,
            const int *lda, int *ipiv, double *b, const int *ldb,
            double *work, const int *lwork, int *info, flen l1);
void sposv_(const char *uplo, const int *n, const int *nrhs, float *a,
            const int *lda, float *b, const int *ldb, int *info, flen l1);
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a,
            const int *lda, double *b, const int *ldb, int *info, flen l1);

/* ---- helpers ---- */

/* OpenBLAS's LAPACK splits even a 3x3 solve among its threads, whose
 * wake-up costs far more than the work: a batch of 3,333 inverses of 3x3
 * took 10.6-15 ms with two threads, 0.7-1.3 ms with one (NumPy, threaded:
 * 28 ms; tgprof, 2 cores). The threads pay off from order 128 or so
 * (inverse of 256x256: 1.1 ms against 1.6; a determinant or a Cholesky
 * factor gains less, or loses). Matrices of order up to
 * LAPACK_SINGLE_MAX run with one thread (tg_blas_single). */
#define LAPACK_SINGLE_MAX 100
#define SINGLE_THREADED(NAME)                                                            \
    static int NAME##_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) { \
        const tg_array *a = in[0];                                                      \
        bool small = a->ndim >= 2 && a->shape[a->ndim - 1] <= LAPACK_SINGLE_MAX;        \
        tg_blas_guard g = small ? tg_blas_single() : (tg_blas_guard){0};              \
        int rc = NAME##_body(n, in, out, ctx);                                          \
        tg_blas_restore(g);                                                             \
        return rc;                                                                      \
    }

static const char *type_s(const tg_var *v, char *buf, size_t size) {
    tg_type_str(&v->type, buf, size);
    return buf;
}

/* The compute dtype of input i, or a TG_ETYPE error. */
static int compute_dtype(const tg_node *n, int i, tg_dtype *out,
                         tg_ctx *ctx) {
    char buf[160];
    const tg_var *v = n->inputs[i];
    tg_dtype dt = tg_dtype_float_of(v->type.dtype);
    if (dt == TG_FLOAT16)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[%d] '%s': float16 is not supported in "
                         "linear algebra, got %s",
                         i, v->id, type_s(v, buf, sizeof buf));
    *out = dt;
    return TG_OK;
}

/* Input i must be a stack of square matrices (ndim >= 2). */
static int want_square(const tg_node *n, int i, tg_ctx *ctx) {
    char buf[160];
    const tg_var *v = n->inputs[i];
    const tg_type *t = &v->type;
    if (t->ndim < 2)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[%d] '%s': expected a matrix (2 or more "
                         "dimensions), got %s",
                         i, v->id, type_s(v, buf, sizeof buf));
    int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1];
    if (r >= 0 && c >= 0 && r != c)
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[%d] '%s': expected square matrices, got %s",
                         i, v->id, type_s(v, buf, sizeof buf));
    return TG_OK;
}

static int check_square_run(const tg_array *a, int64_t *nmat, int *nn,
                            tg_ctx *ctx) {
    int64_t r = a->shape[a->ndim - 2], c = a->shape[a->ndim - 1];
    if (r != c)
        return tg_errorf(ctx, TG_ESHAPE,
                         "last 2 dimensions of the array must be square, got "
                         "%lld x %lld",
                         (long long)r, (long long)c);
    if (r > INT_MAX / 2)
        return tg_errorf(ctx, TG_EUNSUPPORTED,
                         "matrices of order %lld are too large for LAPACK",
                         (long long)r);
    int64_t m = 1;
    for (int i = 0; i < a->ndim - 2; i++) m *= a->shape[i];
    *nmat = m;
    *nn = (int)r;
    return TG_OK;
}

/* A C-contiguous copy of a in dt, its last two axes swapped when
 * `transpose` (so that LAPACK reads a itself, column-major). */
static tg_array *work_copy(const tg_array *a, tg_dtype dt, bool transpose,
                           tg_ctx *ctx) {
    tg_array *c;
    if (transpose && a->ndim >= 2) {
        int64_t sh[TG_MAX_NDIM], st[TG_MAX_NDIM];
        memcpy(sh, a->shape, sizeof sh);
        memcpy(st, a->strides, sizeof st);
        int k = a->ndim;
        sh[k - 2] = a->shape[k - 1];
        sh[k - 1] = a->shape[k - 2];
        st[k - 2] = a->strides[k - 1];
        st[k - 1] = a->strides[k - 2];
        tg_array *v = tg_array_view_raw(a, a->dtype, k, sh, st, a->data);
        if (!v) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            return NULL;
        }
        c = tg_array_copy(v, dt);
        tg_array_free(v);
    } else {
        c = tg_array_copy(a, dt);
    }
    if (!c) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return c;
}

static void cost_cubic(const tg_node *n, tg_array *const *in,
                       tg_array *const *out, double *flops, double *bytes) {
    TG_UNUSED(out);
    *flops = 0;
    *bytes = 0;
    const tg_array *a = in[0];
    if (!a || a->ndim < 2) return;
    double nn = (double)a->shape[a->ndim - 1];
    double m = (double)tg_array_size_inline(a) / (nn > 0 ? nn * nn : 1);
    /* cholesky n^3/3, LU 2n^3/3, inverse 2n^3, solve LU + 2n^2 per rhs. */
    const char *name = n->op->name;
    double f = name[0] == 'c' ? nn * nn * nn / 3
               : name[0] == 'm' ? 2 * nn * nn * nn
                                : 2 * nn * nn * nn / 3;
    const tg_array *b = name[0] == 's' ? in[1] : NULL;
    if (b && b->ndim == 1) {
        f += 2 * nn * nn;
    } else if (b && b->ndim >= 2) {
        /* One factorization and solve per matrix of the broadcast batch. */
        int ka = a->ndim - 2, kb = b->ndim - 2, ko = ka > kb ? ka : kb;
        m = 1;
        for (int d = 0; d < ko; d++) {
            int ja = d - (ko - ka), jb = d - (ko - kb);
            int64_t la = ja >= 0 ? a->shape[ja] : 1, lb = jb >= 0 ? b->shape[jb] : 1;
            m *= (double)(la == 1 ? lb : la);
        }
        f += 2 * nn * nn * (double)b->shape[b->ndim - 1];
    }
    *flops = m * f;
    for (int i = 0; i < n->nin; i++)
        if (in[i])
            *bytes += 2.0 * (double)tg_array_size_inline(in[i]) *
                      (double)tg_isize(in[i]->dtype);
}

/* ---- cholesky ---- */

static const char *const keys_chol[] = {"lower", NULL};

static int chol_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_bool(n, "lower", true, &n->a.flag, ctx);
}

static int sq_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt = TG_FLOAT64;
    int rc = want_square(n, 0, ctx);
    if (rc || (rc = compute_dtype(n, 0, &dt, ctx))) return rc;
    const tg_type *t = &n->inputs[0]->type;
    int64_t shape[TG_MAX_NDIM];
    memcpy(shape, t->shape, sizeof shape);
    int k = t->ndim;
    if (shape[k - 1] < 0) shape[k - 1] = shape[k - 2];
    if (shape[k - 2] < 0) shape[k - 2] = shape[k - 1];
    tg_set_out_type(n, 0, dt, k, shape);
    return TG_OK;
}

static int chol_body(tg_node *n, tg_array *const *in, tg_array **out,
                    tg_ctx *ctx) {
    const tg_array *a = in[0];
    int64_t nmat = 0;
    int nn = 0;
    int rc = check_square_run(a, &nmat, &nn, ctx);
    if (rc) return rc;
    tg_dtype dt = n->outputs[0]->type.dtype;
    tg_array *w = work_copy(a, dt, false, ctx);
    if (!w) return TG_ENOMEM;
    /* C order's lower triangle is column-major's upper one. */
    bool lower = n->a.flag;
    const char *uplo = lower ? "U" : "L";
    int lda = nn > 0 ? nn : 1;
    size_t isz = tg_isize(dt);
    for (int64_t b = 0; b < nmat && nn > 0; b++) {
        char *m = w->data + b * (int64_t)nn * nn * (int64_t)isz;
        int info = 0;
        if (dt == TG_FLOAT64) dpotrf_(uplo, &nn, (double *)(void *)m, &lda, &info, 1);
        else spotrf_(uplo, &nn, (float *)(void *)m, &lda, &info, 1);
        if (info > 0) {
            tg_array_free(w);
            return tg_errorf(ctx, TG_ERUNTIME,
                             "matrix is not positive definite (leading minor "
                             "of order %d)",
                             info);
        }
        for (int i = 0; i < nn; i++)
            for (int j = 0; j < nn; j++)
                if (lower ? j > i : j < i)
                    memset(m + ((int64_t)i * nn + j) * (int64_t)isz, 0, isz);
    }
    tg_array_free(*out);
    *out = w;
    return TG_OK;
}

SINGLE_THREADED(chol)

const tg_op tg_op_cholesky = {
    .name = "cholesky", .nin_min = 1, .nin_max = 1, .nout = 1,
    .flags = TG_OPF_FLOAT_ONLY, .attr_keys = keys_chol,
    .parse_attrs = chol_parse, .infer = sq_infer, .run = chol_run,
    .cost = cost_cubic, .view_of = -1, .grad = tg_grad_linalg};

/* ---- LU: matrix_inverse and det ---- */

static int lu(tg_dtype dt, int nn, char *m, int *ipiv) {
    int info = 0;
    if (dt == TG_FLOAT64) dgetrf_(&nn, &nn, (double *)(void *)m, &nn, ipiv, &info);
    else sgetrf_(&nn, &nn, (float *)(void *)m, &nn, ipiv, &info);
    return info;
}

static int inv_body(tg_node *n, tg_array *const *in, tg_array **out,
                   tg_ctx *ctx) {
    const tg_array *a = in[0];
    int64_t nmat = 0;
    int nn = 0;
    int rc = check_square_run(a, &nmat, &nn, ctx);
    if (rc) return rc;
    tg_dtype dt = n->outputs[0]->type.dtype;
    tg_array *w = NULL;
    int *ipiv = NULL;
    /* LAPACK reads the C-order copy of A as A^T, and solving A^T Y = I
     * gives Y = inv(A)^T column-major, which read in C order is inv(A). */
    if (!(w = work_copy(a, dt, false, ctx))) return TG_ENOMEM;
    if ((rc = tg_array_prepare(out, dt, a->ndim, a->shape, ctx))) goto done;
    if (nn == 0) goto done;
    if (!(ipiv = tg_malloc((size_t)nn * sizeof *ipiv))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    size_t isz = tg_isize(dt);
    int64_t msz = (int64_t)nn * nn * (int64_t)isz;
    for (int64_t b = 0; b < nmat; b++) {
        char *m = w->data + b * msz, *o = out[0]->data + b * msz;
        memset(o, 0, (size_t)msz);
        for (int i = 0; i < nn; i++)
            tg_store_f64(dt, o + ((int64_t)i * nn + i) * (int64_t)isz, 1.0);
        int info = 0;
        if (dt == TG_FLOAT64)
            dgesv_(&nn, &nn, (double *)(void *)m, &nn, ipiv, (double *)(void *)o,
                   &nn, &info);
        else
            sgesv_(&nn, &nn, (float *)(void *)m, &nn, ipiv, (float *)(void *)o,
                   &nn, &info);
        if (info > 0) {
            rc = tg_errorf(ctx, TG_ERUNTIME, "singular matrix");
            goto done;
        }
    }
done:
    tg_array_free(w);
    tg_free(ipiv);
    return rc;
}

SINGLE_THREADED(inv)

const tg_op tg_op_matrix_inverse = {
    .name = "matrix_inverse", .nin_min = 1, .nin_max = 1, .nout = 1,
    .flags = TG_OPF_FLOAT_ONLY, .infer = sq_infer, .run = inv_run,
    .cost = cost_cubic, .view_of = -1, .grad = tg_grad_linalg};

static int det_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt = TG_FLOAT64;
    int rc = want_square(n, 0, ctx);
    if (rc || (rc = compute_dtype(n, 0, &dt, ctx))) return rc;
    const tg_type *t = &n->inputs[0]->type;
    tg_set_out_type(n, 0, dt, t->ndim - 2, t->shape);
    return TG_OK;
}

static int det_body(tg_node *n, tg_array *const *in, tg_array **out,
                   tg_ctx *ctx) {
    const tg_array *a = in[0];
    int64_t nmat = 0;
    int nn = 0;
    int rc = check_square_run(a, &nmat, &nn, ctx);
    if (rc) return rc;
    tg_dtype dt = n->outputs[0]->type.dtype;
    tg_array *w = NULL;
    int *ipiv = NULL;
    if ((rc = tg_array_prepare(out, dt, a->ndim - 2, a->shape, ctx))) return rc;
    if (nmat == 0) return TG_OK;
    if (!(w = work_copy(a, dt, false, ctx))) return TG_ENOMEM;
    if (nn > 0 && !(ipiv = tg_malloc((size_t)nn * sizeof *ipiv))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    size_t isz = tg_isize(dt);
    int64_t msz = (int64_t)nn * nn * (int64_t)isz;
    for (int64_t b = 0; b < nmat; b++) {
        char *m = w->data + b * msz;
        double d = 1.0;
        if (nn > 0) {
            /* As NumPy's det: sign * exp(sum of log |u_ii|) over U's
             * diagonal, in the compute dtype, so that no partial product
             * overflows or underflows (diag(1e200, 1e200, 1e-200) is
             * 1e200, not inf). A singular U has an exact zero on its
             * diagonal (info > 0): log 0 = -inf and the result +0, as
             * NumPy gives. */
            lu(dt, nn, m, ipiv);
            double sign = 1.0, logd = 0.0;
            float logf_ = 0.0f;
            bool zero = false;
            for (int i = 0; i < nn; i++) {
                double u = tg_load_f64(dt, m + ((int64_t)i * nn + i) * (int64_t)isz);
                if (ipiv[i] != i + 1) u = -u;
                if (u < 0) sign = -sign;
                zero |= u == 0;
                if (dt == TG_FLOAT64) logd += log(fabs(u));
                else logf_ += logf(fabsf((float)u));
            }
            d = zero ? 0.0 : dt == TG_FLOAT64 ? sign * exp(logd) : (double)((float)sign * expf(logf_));
        }
        tg_store_f64(dt, out[0]->data + b * (int64_t)isz, d);
    }
done:
    tg_array_free(w);
    tg_free(ipiv);
    return rc;
}

SINGLE_THREADED(det)

const tg_op tg_op_det = {
    .name = "det", .nin_min = 1, .nin_max = 1, .nout = 1,
    .flags = TG_OPF_FLOAT_ONLY, .infer = det_infer, .run = det_run,
    .cost = cost_cubic, .view_of = -1, .grad = tg_grad_linalg};

/* ---- solve ---- */

static const char *const keys_solve[] = {"assume_a", NULL};
static const char *const assume_choices[] = {"gen", "sym", "pos", NULL};

static int solve_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_enum(n, "assume_a", assume_choices, 0, &n->a.mode, ctx);
}

/* b is one vector shared by every matrix of a when it has 1 dimension
 * (NumPy 2's rule), else a stack of matrices with a's order of rows whose
 * batch dimensions broadcast against a's. */
static int solve_infer(tg_node *n, tg_ctx *ctx) {
    char b1[160], b2[160];
    tg_dtype da = TG_FLOAT64, db = TG_FLOAT64;
    int rc = want_square(n, 0, ctx);
    if (rc || (rc = compute_dtype(n, 0, &da, ctx)) ||
        (rc = compute_dtype(n, 1, &db, ctx)))
        return rc;
    const tg_var *A = n->inputs[0], *B = n->inputs[1];
    const tg_type *ta = &A->type, *tb = &B->type;
    int k = ta->ndim;
    int64_t nrow = ta->shape[k - 1] >= 0 ? ta->shape[k - 1] : ta->shape[k - 2];
    bool vec = tb->ndim == 1;
    int rowax = vec ? 0 : tb->ndim - 2;
    if (tb->ndim == 0 ||
        (nrow >= 0 && tb->shape[rowax] >= 0 && tb->shape[rowax] != nrow))
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[1] '%s': %s does not match the matrices "
                         "inputs[0] '%s' %s (expected a vector of their "
                         "order, or a stack of matrices with as many rows)",
                         B->id, type_s(B, b1, sizeof b1), A->id,
                         type_s(A, b2, sizeof b2));
    tg_dtype dt = tg_dtype_promote(da, db);
    int64_t shape[TG_MAX_NDIM];
    if (vec) {
        memcpy(shape, ta->shape, sizeof shape);
        shape[k - 2] = nrow >= 0 ? nrow : tb->shape[0];
        tg_set_out_type(n, 0, dt, k - 1, shape);
        return TG_OK;
    }
    int dA = 0, dB = 0;
    int ko = tg_batch_broadcast(k - 2, ta->shape, tb->ndim - 2, tb->shape, shape, &dA, &dB);
    if (ko < 0)
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[0] '%s' %s and inputs[1] '%s' %s: the batch "
                         "dimensions (all but the last 2) do not broadcast: "
                         "length %lld (dimension %d of a) against %lld "
                         "(dimension %d of b)",
                         A->id, type_s(A, b2, sizeof b2), B->id,
                         type_s(B, b1, sizeof b1), (long long)ta->shape[dA], dA,
                         (long long)tb->shape[dB], dB);
    shape[ko] = tb->shape[rowax] >= 0 ? tb->shape[rowax] : nrow;
    shape[ko + 1] = tb->shape[rowax + 1];
    tg_set_out_type(n, 0, dt, ko + 2, shape);
    return TG_OK;
}

static int solve_one(int mode, tg_dtype dt, int nn, int nrhs, char *a,
                     char *b, int *ipiv, tg_ctx *ctx) {
    int info = 0, ldb = nn > 0 ? nn : 1;
    bool f64 = dt == TG_FLOAT64;
    if (mode == 0) {
        if (f64) dgesv_(&nn, &nrhs, (double *)(void *)a, &nn, ipiv, (double *)(void *)b, &ldb, &info);
        else sgesv_(&nn, &nrhs, (float *)(void *)a, &nn, ipiv, (float *)(void *)b, &ldb, &info);
        if (info > 0) return tg_errorf(ctx, TG_ERUNTIME, "singular matrix");
    } else if (mode == 2) {
        /* a is A column-major (the C-order copy of A^T), so "U" reads
         * A's upper triangle: SciPy's default (lower=False). */
        if (f64) dposv_("U", &nn, &nrhs, (double *)(void *)a, &nn, (double *)(void *)b, &ldb, &info, 1);
        else sposv_("U", &nn, &nrhs, (float *)(void *)a, &nn, (float *)(void *)b, &ldb, &info, 1);
        if (info > 0)
            return tg_errorf(ctx, TG_ERUNTIME, "matrix is not positive definite");
    } else {
        int lwork = -1;
        double q = 0;
        float qf = 0;
        if (f64) dsysv_("U", &nn, &nrhs, (double *)(void *)a, &nn, ipiv, (double *)(void *)b, &ldb, &q, &lwork, &info, 1);
        else ssysv_("U", &nn, &nrhs, (float *)(void *)a, &nn, ipiv, (float *)(void *)b, &ldb, &qf, &lwork, &info, 1);
        lwork = (int)(f64 ? q : qf);
        if (lwork < 1) lwork = 1;
        void *work = tg_malloc((size_t)lwork * tg_isize(dt));
        if (!work) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        if (f64) dsysv_("U", &nn, &nrhs, (double *)(void *)a, &nn, ipiv, (double *)(void *)b, &ldb, work, &lwork, &info, 1);
        else ssysv_("U", &nn, &nrhs, (float *)(void *)a, &nn, ipiv, (float *)(void *)b, &ldb, work, &lwork, &info, 1);
        tg_free(work);
        if (info > 0) return tg_errorf(ctx, TG_ERUNTIME, "singular matrix");
    }
    if (info < 0)
        return tg_errorf(ctx, TG_ERUNTIME, "LAPACK argument %d is invalid", -info);
    return TG_OK;
}

/* "(2, 3, 3)", NumPy's way of writing a shape. */
static void shape_add(tg_str *s, const tg_array *a) {
    tg_str_addf(s, "(");
    for (int d = 0; d < a->ndim; d++)
        tg_str_addf(s, "%s%lld", d ? ", " : "", (long long)a->shape[d]);
    tg_str_addf(s, a->ndim == 1 ? ",)" : ")");
}

static int solve_shape_error(const tg_array *A, const tg_array *B,
                             const char *what, tg_ctx *ctx) {
    tg_str s = {0};
    tg_str_addf(&s, "solve: a ");
    shape_add(&s, A);
    tg_str_addf(&s, " and b ");
    shape_add(&s, B);
    int rc = tg_errorf(ctx, TG_ESHAPE, "%s: %s", s.s ? s.s : "", what);
    tg_str_free(&s);
    return rc;
}

/* The flat index, in the stack x of kx batch dimensions (shape xs),
 * of the matrix that batch bi of the broadcast stack (ko dimensions,
 * shape os) reads. */
static int64_t batch_index(int ko, const int64_t *os, int kx,
                           const int64_t *xs, int64_t bi) {
    int64_t idx = 0, stride = 1;
    for (int d = ko - 1; d >= ko - kx; d--) {
        int64_t i = bi % os[d];
        bi /= os[d];
        int64_t l = xs[d - (ko - kx)];
        if (l != 1) idx += i * stride;
        stride *= l;
    }
    return idx;
}

static int solve_body(tg_node *n, tg_array *const *in, tg_array **out,
                     tg_ctx *ctx) {
    const tg_array *A = in[0], *B = in[1];
    int64_t nmat = 0;
    int nn = 0;
    int rc = check_square_run(A, &nmat, &nn, ctx);
    if (rc) return rc;
    tg_dtype dt = n->outputs[0]->type.dtype;
    bool vec = B->ndim == 1;
    int k = A->ndim;
    if (B->ndim == 0 || B->shape[vec ? 0 : B->ndim - 2] != nn)
        return solve_shape_error(A, B,
                                 "b does not match a (expected a vector of the "
                                 "matrices' order, or matrices with as many rows)",
                                 ctx);
    int64_t osh[TG_MAX_NDIM];
    int da = 0, db = 0, ko = 0;
    if (!vec && (ko = tg_batch_broadcast(k - 2, A->shape, B->ndim - 2, B->shape, osh, &da, &db)) < 0) {
        char what[160];
        snprintf(what, sizeof what,
                 "the batch dimensions (all but the last 2) do not "
                 "broadcast: length %lld (dimension %d of a) against %lld "
                 "(dimension %d of b)",
                 (long long)A->shape[da], da, (long long)B->shape[db], db);
        return solve_shape_error(A, B, what, ctx);
    }
    int64_t nrhs64 = vec ? 1 : B->shape[B->ndim - 1];
    if (nrhs64 > INT_MAX)
        return tg_errorf(ctx, TG_EUNSUPPORTED, "too many right-hand sides");
    int nrhs = (int)nrhs64;
    tg_array *wa = NULL, *wb = NULL, *wo = NULL, *res = NULL;
    int *ipiv = NULL;
    char *fa = NULL;
    size_t isz = tg_isize(dt);
    int64_t asz = (int64_t)nn * nn * (int64_t)isz,
            bsz = (int64_t)nn * nrhs * (int64_t)isz;
    /* LAPACK reads the C-order copy of A^T as A. */
    if (!(wa = work_copy(A, dt, true, ctx))) return TG_ENOMEM;
    if (nn > 0 && !(ipiv = tg_malloc((size_t)nn * sizeof *ipiv))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    if (vec) {
        /* One vector for every matrix of the stack: each solves its own
         * copy, in place in the output. */
        if (!(wb = work_copy(B, dt, false, ctx))) {
            rc = TG_ENOMEM;
            goto done;
        }
        if ((rc = tg_array_prepare(out, dt, k - 1, A->shape, ctx))) goto done;
        for (int64_t b = 0; b < nmat && nn > 0; b++) {
            char *o = out[0]->data + b * (int64_t)nn * (int64_t)isz;
            memcpy(o, wb->data, (size_t)nn * isz);
            if ((rc = solve_one(n->a.mode, dt, nn, 1, wa->data + b * asz, o,
                                ipiv, ctx)))
                goto done;
        }
        goto done;
    }
    /* The C-order copy of B^T is B column-major; the solutions come back
     * the same way, one stack of them in the broadcast batch shape, and
     * are transposed into the output. LAPACK overwrites A with its
     * factors, so each solve factors a fresh copy of its matrix (a matrix
     * of A may serve several of B's). */
    if (!(wb = work_copy(B, dt, true, ctx))) {
        rc = TG_ENOMEM;
        goto done;
    }
    int64_t nout = 1;
    for (int d = 0; d < ko; d++) nout *= osh[d];
    osh[ko] = nrhs;
    osh[ko + 1] = nn;
    if ((rc = tg_array_prepare(&wo, dt, ko + 2, osh, ctx))) goto done;
    if (nn > 0 && !(fa = tg_malloc((size_t)asz))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t b = 0; b < nout && nn > 0 && nrhs > 0; b++) {
        int64_t ia = batch_index(ko, osh, k - 2, A->shape, b),
                ib = batch_index(ko, osh, B->ndim - 2, B->shape, b);
        memcpy(fa, wa->data + ia * asz, (size_t)asz);
        memcpy(wo->data + b * bsz, wb->data + ib * bsz, (size_t)bsz);
        if ((rc = solve_one(n->a.mode, dt, nn, nrhs, fa, wo->data + b * bsz,
                            ipiv, ctx)))
            goto done;
    }
    {
        int64_t sh[TG_MAX_NDIM], st[TG_MAX_NDIM];
        memcpy(sh, wo->shape, sizeof sh);
        memcpy(st, wo->strides, sizeof st);
        sh[ko] = wo->shape[ko + 1];
        sh[ko + 1] = wo->shape[ko];
        st[ko] = wo->strides[ko + 1];
        st[ko + 1] = wo->strides[ko];
        if ((rc = tg_array_prepare(out, dt, ko + 2, sh, ctx))) goto done;
        if (!(res = tg_array_view_raw(wo, dt, ko + 2, sh, st, wo->data))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        rc = tg_array_assign(*out, res, ctx);
    }
done:
    tg_array_free(wa);
    tg_array_free(wb);
    tg_array_free(wo);
    tg_array_free(res);
    tg_free(ipiv);
    tg_free(fa);
    return rc;
}

SINGLE_THREADED(solve)

const tg_op tg_op_solve = {
    .name = "solve", .nin_min = 2, .nin_max = 2, .nout = 1,
    .flags = TG_OPF_FLOAT_ONLY, .attr_keys = keys_solve,
    .parse_attrs = solve_parse, .infer = solve_infer, .run = solve_run,
    .cost = cost_cubic, .view_of = -1, .grad = tg_grad_linalg};
