/* Products (FORMAT.md s7, linear algebra): dot, matmul, outer, gemm, gemv,
 * ger. float32 and float64 go through OpenBLAS; any strides give a right
 * result: a matrix whose rows or columns are unit-stride is passed with
 * the matching transpose flag and leading dimension, anything else is
 * copied first. Integers, bool and float16 use a blocked loop (float16
 * accumulates in float32; integers wrap as NumPy's).
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"

typedef enum blas_kind { B_DOT, B_MATMUL, B_OUTER, B_GEMM, B_GEMV, B_GER } blas_kind;
typedef struct blas_impl {
    blas_kind kind;
} blas_impl;

/* ---- a matrix operand as BLAS sees it ---- */

typedef struct mat {
    const char *data;
    int64_t rows, cols;
    int64_t rs, cs; /* byte strides */
} mat;

/* Can BLAS read m directly? Sets the transpose flag and leading
 * dimension (in elements). */
static bool blas_layout(const mat *m, size_t isz, CBLAS_TRANSPOSE *tr, int64_t *ld) {
    int64_t e = (int64_t)isz;
    if (m->cols <= 1 && m->rows <= 1) {
        *tr = CblasNoTrans;
        *ld = m->cols > 0 ? m->cols : 1;
        return true;
    }
    if ((m->cs == e || m->cols <= 1) && m->rs % e == 0 && m->rs / e >= (m->cols > 0 ? m->cols : 1)) {
        *tr = CblasNoTrans;
        *ld = m->rows <= 1 ? (m->cols > 0 ? m->cols : 1) : m->rs / e;
        return true;
    }
    if ((m->rs == e || m->rows <= 1) && m->cs % e == 0 && m->cs / e >= (m->rows > 0 ? m->rows : 1)) {
        *tr = CblasTrans;
        *ld = m->cols <= 1 ? (m->rows > 0 ? m->rows : 1) : m->cs / e;
        return true;
    }
    return false;
}

/* A contiguous copy of m (row-major), for layouts BLAS cannot take. */
static char *mat_copy(const mat *m, size_t isz) {
    char *c = tg_malloc((size_t)(m->rows * m->cols) * isz + 1);
    if (!c) return NULL;
    for (int64_t i = 0; i < m->rows; i++)
        for (int64_t j = 0; j < m->cols; j++)
            memcpy(c + (size_t)(i * m->cols + j) * isz, m->data + i * m->rs + j * m->cs, isz);
    return c;
}

/* C (rows x cols, row-major contiguous, dtype dt) = alpha*A@B + beta*C.
 * beta == 0 ignores C's contents (BLAS semantics). */
static int gemm_any(tg_dtype dt, const mat *A, const mat *B, double alpha, double beta, char *C,
                    tg_ctx *ctx) {
    int64_t M = A->rows, K = A->cols, N = B->cols;
    size_t isz = tg_dtype_size(dt);
    if (dt == TG_FLOAT32 || dt == TG_FLOAT64) {
        if (M == 0 || N == 0) return TG_OK;
        if (K == 0) {
            for (int64_t i = 0; i < M * N; i++) {
                double c = beta == 0 ? 0 : beta * tg_load_f64(dt, C + i * (int64_t)isz);
                tg_store_f64(dt, C + i * (int64_t)isz, c);
            }
            return TG_OK;
        }
        CBLAS_TRANSPOSE ta, tb;
        int64_t lda, ldb;
        char *ca = NULL, *cb = NULL;
        const char *pa = A->data, *pb = B->data;
        if (!blas_layout(A, isz, &ta, &lda)) {
            if (!(ca = mat_copy(A, isz))) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
            pa = ca;
            ta = CblasNoTrans;
            lda = K;
        }
        if (!blas_layout(B, isz, &tb, &ldb)) {
            if (!(cb = mat_copy(B, isz))) {
                tg_free(ca);
                return tg_errorf(ctx, TG_ENOMEM, "out of memory");
            }
            pb = cb;
            tb = CblasNoTrans;
            ldb = N;
        }
        if (N == 1 && ta == CblasNoTrans && B->rows == K) {
            /* matrix-vector: gemv is faster for one column */
            int64_t incb = cb ? 1 : (tb == CblasNoTrans ? ldb : 1);
            if (dt == TG_FLOAT64)
                cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)M, (int)K, alpha, (const double *)pa,
                            (int)lda, (const double *)pb, (int)incb, beta, (double *)C, 1);
            else
                cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)M, (int)K, (float)alpha,
                            (const float *)pa, (int)lda, (const float *)pb, (int)incb,
                            (float)beta, (float *)C, 1);
        } else if (dt == TG_FLOAT64) {
            cblas_dgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, alpha, (const double *)pa,
                        (int)lda, (const double *)pb, (int)ldb, beta, (double *)C, (int)N);
        } else {
            cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, (float)alpha,
                        (const float *)pa, (int)lda, (const float *)pb, (int)ldb, (float)beta,
                        (float *)C, (int)N);
        }
        tg_free(ca);
        tg_free(cb);
        return TG_OK;
    }
    /* Other dtypes: a plain loop (i, k, j order for locality). */
    bool fl = dt == TG_FLOAT16;
    char kind = tg_dtype_kind(dt);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            char *cp = C + (i * N + j) * (int64_t)isz;
            if (fl) {
                float acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (float)tg_load_f64(dt, A->data + i * A->rs + k * A->cs) *
                           (float)tg_load_f64(dt, B->data + k * B->rs + j * B->cs);
                double c = beta == 0 ? 0 : beta * tg_load_f64(dt, cp);
                tg_store_f64(dt, cp, (double)((float)alpha * acc) + c);
            } else if (kind == 'b') {
                uint8_t acc = 0;
                for (int64_t k = 0; k < K && !acc; k++)
                    acc = A->data[i * A->rs + k * A->cs] && B->data[k * B->rs + j * B->cs];
                uint8_t c = beta == 0 ? 0 : (uint8_t)(*cp && beta != 0);
                *cp = (uint8_t)((acc && alpha != 0) || c);
            } else {
                uint64_t acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (uint64_t)tg_load_i64(dt, A->data + i * A->rs + k * A->cs) *
                           (uint64_t)tg_load_i64(dt, B->data + k * B->rs + j * B->cs);
                uint64_t c = beta == 0 ? 0 : (uint64_t)(int64_t)beta * (uint64_t)tg_load_i64(dt, cp);
                tg_store_i64(dt, cp, (int64_t)((uint64_t)(int64_t)alpha * acc + c));
            }
        }
    }
    return TG_OK;
}

/* ---- shapes ---- */

static int not_aligned(tg_ctx *ctx, int status, int na, const int64_t *sa, int nb,
                       const int64_t *sb, int64_t ka, int da, int64_t kb, int db) {
    tg_str s = {0};
    tg_str_addf(&s, "shapes (");
    for (int i = 0; i < na; i++) tg_str_addf(&s, "%s%lld", i ? ", " : "", (long long)sa[i]);
    tg_str_addf(&s, na == 1 ? ",) and (" : ") and (");
    for (int i = 0; i < nb; i++) tg_str_addf(&s, "%s%lld", i ? ", " : "", (long long)sb[i]);
    tg_str_addf(&s, nb == 1 ? ",)" : ")");
    int rc = tg_errorf(ctx, status, "%s not aligned: %lld (dim %d) != %lld (dim %d)",
                       s.s ? s.s : "", (long long)ka, da, (long long)kb, db);
    tg_str_free(&s);
    return rc;
}

static bool len_conflict(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

/* Output shape of dot/matmul given (static or run-time) shapes; -1 lengths
 * allowed for static inference. Returns 0 or an error. */
static int product_shape(blas_kind k, int na, const int64_t *sa, int nb, const int64_t *sb,
                         int *nd, int64_t *out, int status, tg_ctx *ctx) {
    if (k == B_DOT) {
        if (na > 2 || nb > 2)
            return tg_errorf(ctx, TG_ETYPE, "dot takes operands of at most 2 dimensions (got %d and %d); use matmul", na, nb);
        if (na == 0 || nb == 0) {
            const int64_t *s = na == 0 ? sb : sa;
            *nd = na == 0 ? nb : na;
            memcpy(out, s, sizeof(int64_t) * (size_t)*nd);
            return TG_OK;
        }
        int64_t ka = sa[na - 1], kb = nb == 1 ? sb[0] : sb[0];
        if (len_conflict(ka, kb)) return not_aligned(ctx, status, na, sa, nb, sb, ka, na - 1, kb, 0);
        *nd = 0;
        if (na == 2) out[(*nd)++] = sa[0];
        if (nb == 2) out[(*nd)++] = sb[1];
        return TG_OK;
    }
    /* matmul */
    if (na == 0 || nb == 0)
        return tg_errorf(ctx, TG_ETYPE, "matmul: operands must have at least 1 dimension (got %d and %d)", na, nb);
    int64_t ka = sa[na - 1], kb = nb == 1 ? sb[0] : sb[nb - 2];
    if (len_conflict(ka, kb))
        return not_aligned(ctx, status, na, sa, nb, sb, ka, na - 1, kb, nb == 1 ? 0 : nb - 2);
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, bn = ba > bb ? ba : bb;
    if (bn + 2 > TG_MAX_NDIM) return tg_errorf(ctx, TG_ETYPE, "matmul: too many dimensions");
    for (int d = 0; d < bn; d++) {
        int ia = d - (bn - ba), ib = d - (bn - bb);
        int64_t la = ia >= 0 ? sa[ia] : 1, lb = ib >= 0 ? sb[ib] : 1;
        if (la == 1)
            out[d] = lb;
        else if (lb == 1)
            out[d] = la;
        else if (la < 0 || lb < 0)
            out[d] = la < 0 ? lb : la;
        else if (la != lb)
            return tg_errorf(ctx, status, "matmul: batch dimensions %lld and %lld do not broadcast",
                             (long long)la, (long long)lb);
        else
            out[d] = la;
    }
    *nd = bn;
    if (na >= 2) out[(*nd)++] = sa[na - 2];
    if (nb >= 2) out[(*nd)++] = sb[nb - 1];
    return TG_OK;
}

static int same_dtype(tg_node *n, const int *idx, int cnt, tg_dtype *dt, tg_ctx *ctx) {
    *dt = n->inputs[idx[0]]->type.dtype;
    for (int i = 1; i < cnt; i++)
        if (n->inputs[idx[i]]->type.dtype != *dt)
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] is %s but inputs[%d] is %s: %s needs one dtype",
                             idx[0], tg_dtype_name(*dt), idx[i],
                             tg_dtype_name(n->inputs[idx[i]]->type.dtype), n->op->name);
    return TG_OK;
}

static int need_ndim(tg_node *n, int i, int nd, tg_ctx *ctx) {
    if (n->inputs[i]->type.ndim != nd)
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s' must have %d dimension%s, not %d", i,
                         n->inputs[i]->id, nd, nd == 1 ? "" : "s", n->inputs[i]->type.ndim);
    return TG_OK;
}

static int blas_infer(tg_node *n, tg_ctx *ctx) {
    const blas_impl *im = n->op->impl;
    int rc;
    tg_dtype dt = TG_DTYPE_INVALID;
    int64_t shape[TG_MAX_NDIM];
    int nd = 0;
    switch (im->kind) {
    case B_DOT:
    case B_MATMUL: {
        if ((rc = tg_weak_resolve(n, 0, 2, &dt, ctx))) return rc;
        const tg_type *a = &n->inputs[0]->type, *b = &n->inputs[1]->type;
        if ((rc = product_shape(im->kind, a->ndim, a->shape, b->ndim, b->shape, &nd, shape,
                                TG_ESHAPE, ctx)))
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
    case B_GEMM: { /* z, alpha, x, y, beta */
        tg_dtype zd = n->inputs[0]->type.dtype;
        if ((rc = tg_weak_take(n, 1, zd, ctx)) || (rc = tg_weak_take(n, 4, zd, ctx))) return rc;
        if ((rc = same_dtype(n, (int[]){0, 1, 2, 3, 4}, 5, &dt, ctx))) return rc;
        if ((rc = need_ndim(n, 0, 2, ctx)) || (rc = need_ndim(n, 1, 0, ctx)) ||
            (rc = need_ndim(n, 2, 2, ctx)) || (rc = need_ndim(n, 3, 2, ctx)) ||
            (rc = need_ndim(n, 4, 0, ctx)))
            return rc;
        const tg_type *x = &n->inputs[2]->type, *y = &n->inputs[3]->type, *z = &n->inputs[0]->type;
        if ((rc = product_shape(B_DOT, 2, x->shape, 2, y->shape, &nd, shape, TG_ESHAPE, ctx))) return rc;
        for (int d = 0; d < 2; d++) {
            if (len_conflict(shape[d], z->shape[d]))
                return tg_errorf(ctx, TG_ESHAPE, "inputs[0] 'z' has length %lld in dimension %d but dot(x, y) has %lld",
                                 (long long)z->shape[d], d, (long long)shape[d]);
            if (shape[d] < 0) shape[d] = z->shape[d];
        }
        break;
    }
    case B_GEMV: { /* z, alpha, A, x, beta */
        tg_dtype zd = n->inputs[0]->type.dtype;
        if ((rc = tg_weak_take(n, 1, zd, ctx)) || (rc = tg_weak_take(n, 4, zd, ctx))) return rc;
        if ((rc = same_dtype(n, (int[]){0, 1, 2, 3, 4}, 5, &dt, ctx))) return rc;
        if ((rc = need_ndim(n, 0, 1, ctx)) || (rc = need_ndim(n, 1, 0, ctx)) ||
            (rc = need_ndim(n, 2, 2, ctx)) || (rc = need_ndim(n, 3, 1, ctx)) ||
            (rc = need_ndim(n, 4, 0, ctx)))
            return rc;
        const tg_type *A = &n->inputs[2]->type, *x = &n->inputs[3]->type, *z = &n->inputs[0]->type;
        if ((rc = product_shape(B_DOT, 2, A->shape, 1, x->shape, &nd, shape, TG_ESHAPE, ctx))) return rc;
        if (len_conflict(shape[0], z->shape[0]))
            return tg_errorf(ctx, TG_ESHAPE, "inputs[0] 'z' has length %lld but dot(A, x) has %lld",
                             (long long)z->shape[0], (long long)shape[0]);
        if (shape[0] < 0) shape[0] = z->shape[0];
        break;
    }
    case B_GER: { /* A, alpha, x, y */
        tg_dtype ad = n->inputs[0]->type.dtype;
        if ((rc = tg_weak_take(n, 1, ad, ctx))) return rc;
        if ((rc = same_dtype(n, (int[]){0, 1, 2, 3}, 4, &dt, ctx))) return rc;
        if ((rc = need_ndim(n, 0, 2, ctx)) || (rc = need_ndim(n, 1, 0, ctx)) ||
            (rc = need_ndim(n, 2, 1, ctx)) || (rc = need_ndim(n, 3, 1, ctx)))
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

/* ---- kernels ---- */

static mat as_mat(const tg_array *a, bool vector_is_row) {
    mat m;
    m.data = a->data;
    if (a->ndim == 2) {
        m.rows = a->shape[0];
        m.cols = a->shape[1];
        m.rs = a->strides[0];
        m.cs = a->strides[1];
    } else if (a->ndim == 1) {
        if (vector_is_row) {
            m.rows = 1;
            m.cols = a->shape[0];
            m.rs = a->shape[0] * a->strides[0];
            m.cs = a->strides[0];
        } else {
            m.rows = a->shape[0];
            m.cols = 1;
            m.rs = a->strides[0];
            m.cs = (int64_t)tg_dtype_size(a->dtype);
        }
    } else {
        m.rows = m.cols = 1;
        m.rs = m.cs = (int64_t)tg_dtype_size(a->dtype);
    }
    return m;
}

/* A contiguous copy of `in` converted to dt when needed (borrowed
 * otherwise). */
static tg_array *as_dtype(tg_array *in, tg_dtype dt, tg_array **tmp) {
    *tmp = NULL;
    if (in->dtype == dt) return in;
    *tmp = tg_array_copy(in, dt);
    return *tmp;
}

static int scalar_times(tg_dtype dt, tg_array *s, tg_array *a, char *out, int64_t n, tg_ctx *ctx) {
    /* dot with a 0-d operand: elementwise product. */
    tg_array *ca = tg_array_is_contiguous(a) ? tg_array_ref(a) : tg_array_copy(a, dt);
    if (!ca) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    size_t isz = tg_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        const char *p = ca->data + (size_t)i * isz;
        if (tg_dtype_is_float(dt))
            tg_store_f64(dt, out + (size_t)i * isz, tg_load_f64(dt, s->data) * tg_load_f64(dt, p));
        else if (dt == TG_BOOL)
            out[i] = s->data[0] && p[0];
        else
            tg_store_i64(dt, out + (size_t)i * isz,
                         (int64_t)((uint64_t)tg_load_i64(dt, s->data) * (uint64_t)tg_load_i64(dt, p)));
    }
    tg_array_free(ca);
    return TG_OK;
}

static int blas_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const blas_impl *im = n->op->impl;
    tg_dtype dt = n->outputs[0]->type.dtype;
    int rc = TG_OK;
    int64_t shape[TG_MAX_NDIM];
    int nd = 0;
    tg_array *t0 = NULL, *t1 = NULL;
    switch (im->kind) {
    case B_DOT:
    case B_MATMUL: {
        tg_array *a = as_dtype(in[0], dt, &t0), *b = as_dtype(in[1], dt, &t1);
        if (!a || !b) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            break;
        }
        if ((rc = product_shape(im->kind, a->ndim, a->shape, b->ndim, b->shape, &nd, shape,
                                TG_ESHAPE, ctx)))
            break;
        if ((rc = tg_array_prepare(&out[0], dt, nd, shape, ctx))) break;
        char *o = out[0]->data;
        if (im->kind == B_DOT && (a->ndim == 0 || b->ndim == 0)) {
            rc = a->ndim == 0 ? scalar_times(dt, a, b, o, tg_array_size_inline(b), ctx)
                              : scalar_times(dt, b, a, o, tg_array_size_inline(a), ctx);
            break;
        }
        if (a->ndim <= 2 && b->ndim <= 2) {
            mat A = as_mat(a, true), B = as_mat(b, false);
            rc = gemm_any(dt, &A, &B, 1.0, 0.0, o, ctx);
            break;
        }
        /* Batched matmul: broadcast batch dimensions. */
        int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
        int bn = nd - (a->ndim >= 2) - (b->ndim >= 2);
        int64_t nbatch = 1;
        for (int d = 0; d < bn; d++) nbatch *= shape[d];
        int64_t M = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1, N = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
        size_t osz = (size_t)(M * N) * tg_dtype_size(dt);
        int nth = nbatch > 1 && M * N < 4096 ? omp_get_max_threads() : 1;
        int err = 0;
#pragma omp parallel for schedule(static) num_threads(nth)
        for (int64_t bi = 0; bi < nbatch; bi++) {
            const char *pa = a->data, *pb = b->data;
            int64_t r = bi;
            for (int d = bn - 1; d >= 0; d--) {
                int64_t idx = r % shape[d];
                r /= shape[d];
                int ia = d - (bn - ba), ib = d - (bn - bb);
                if (ia >= 0 && a->shape[ia] != 1) pa += idx * a->strides[ia];
                if (ib >= 0 && b->shape[ib] != 1) pb += idx * b->strides[ib];
            }
            mat A, B;
            if (a->ndim >= 2) {
                A = (mat){pa, a->shape[a->ndim - 2], a->shape[a->ndim - 1], a->strides[a->ndim - 2],
                          a->strides[a->ndim - 1]};
            } else {
                A = as_mat(a, true);
            }
            if (b->ndim >= 2) {
                B = (mat){pb, b->shape[b->ndim - 2], b->shape[b->ndim - 1], b->strides[b->ndim - 2],
                          b->strides[b->ndim - 1]};
            } else {
                B = as_mat(b, false);
            }
            if (gemm_any(dt, &A, &B, 1.0, 0.0, o + (size_t)bi * osz, NULL)) err = 1;
        }
        if (err) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        break;
    }
    case B_OUTER: {
        tg_array *a = as_dtype(in[0], dt, &t0), *b = as_dtype(in[1], dt, &t1);
        if (!a || !b) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            break;
        }
        /* Flatten both (NumPy's outer ravels its inputs). */
        tg_array *fa = tg_array_is_contiguous(a) ? tg_array_ref(a) : tg_array_copy(a, dt);
        tg_array *fb = tg_array_is_contiguous(b) ? tg_array_ref(b) : tg_array_copy(b, dt);
        if (!fa || !fb) {
            tg_array_free(fa);
            tg_array_free(fb);
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            break;
        }
        int64_t la = tg_array_size_inline(fa), lb = tg_array_size_inline(fb);
        int64_t e = (int64_t)tg_dtype_size(dt);
        shape[0] = la;
        shape[1] = lb;
        if (!(rc = tg_array_prepare(&out[0], dt, 2, shape, ctx))) {
            mat A = {fa->data, la, 1, e, e}, B = {fb->data, 1, lb, lb * e, e};
            rc = gemm_any(dt, &A, &B, 1.0, 0.0, out[0]->data, ctx);
        }
        tg_array_free(fa);
        tg_array_free(fb);
        break;
    }
    case B_GEMM:
    case B_GEMV: {
        tg_array *z = in[0], *A = in[2], *x = in[3];
        double alpha = tg_load_f64(dt, in[1]->data), beta = tg_load_f64(dt, in[4]->data);
        int64_t M = A->shape[0], K = A->shape[1];
        int64_t N = im->kind == B_GEMM ? x->shape[1] : 1;
        int64_t kx = x->shape[0];
        if (K != kx) {
            rc = not_aligned(ctx, TG_ESHAPE, A->ndim, A->shape, x->ndim, x->shape, K, 1, kx, 0);
            break;
        }
        if (z->shape[0] != M || (im->kind == B_GEMM && z->shape[1] != N)) {
            rc = tg_errorf(ctx, TG_ESHAPE, "z has shape (%lld%s%lld) but the product has (%lld, %lld)",
                           (long long)z->shape[0], z->ndim == 2 ? ", " : "",
                           (long long)(z->ndim == 2 ? z->shape[1] : 0), (long long)M, (long long)N);
            break;
        }
        /* The output starts as a copy of z (in place when the optimizer
         * made this node work in place and z is ours to overwrite). */
        if (n->inplace && n->inplace[0] == 0 && tg_array_is_exclusive(z) && tg_array_is_contiguous(z)) {
            tg_array_free(out[0]);
            out[0] = tg_array_ref(z);
        } else {
            if ((rc = tg_array_prepare(&out[0], dt, z->ndim, z->shape, ctx))) break;
            if (beta != 0 && (rc = tg_array_assign(out[0], z, ctx))) break;
        }
        mat MA = as_mat(A, true), MX = as_mat(x, false);
        rc = gemm_any(dt, &MA, &MX, alpha, beta, out[0]->data, ctx);
        break;
    }
    case B_GER: {
        tg_array *A = in[0], *x = in[2], *y = in[3];
        double alpha = tg_load_f64(dt, in[1]->data);
        if (A->shape[0] != x->shape[0] || A->shape[1] != y->shape[0]) {
            rc = tg_errorf(ctx, TG_ESHAPE, "ger: A is (%lld, %lld) but x and y have lengths %lld and %lld",
                           (long long)A->shape[0], (long long)A->shape[1], (long long)x->shape[0],
                           (long long)y->shape[0]);
            break;
        }
        if (n->inplace && n->inplace[0] == 0 && tg_array_is_exclusive(A) && tg_array_is_contiguous(A)) {
            tg_array_free(out[0]);
            out[0] = tg_array_ref(A);
        } else {
            if ((rc = tg_array_prepare(&out[0], dt, 2, A->shape, ctx))) break;
            if ((rc = tg_array_assign(out[0], A, ctx))) break;
        }
        mat MX = as_mat(x, false), MY = as_mat(y, true);
        rc = gemm_any(dt, &MX, &MY, alpha, 1.0, out[0]->data, ctx);
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
        b += (double)tg_array_size_inline(in[i]) * (double)tg_dtype_size(in[i]->dtype);
    b += (double)tg_array_size_inline(out[0]) * (double)tg_dtype_size(out[0]->dtype);
    double k = 1;
    if (im->kind == B_GEMM || im->kind == B_GEMV)
        k = (double)in[2]->shape[1];
    else if ((im->kind == B_DOT || im->kind == B_MATMUL) && in[0]->ndim >= 1)
        k = (double)in[0]->shape[in[0]->ndim - 1];
    *flops = 2.0 * k * (double)tg_array_size_inline(out[0]);
    *bytes = b;
}

#define BLAS_OP(NAME, KIND, NIN)                                                  \
    static const blas_impl impl_##NAME = {KIND};                                  \
    const tg_op tg_op_##NAME = {                                                  \
        .name = #NAME,                                                            \
        .nin_min = NIN,                                                           \
        .nin_max = NIN,                                                           \
        .nout = 1,                                                                \
        .infer = blas_infer,                                                      \
        .run = blas_run,                                                          \
        .cost = blas_cost,                                                        \
        .view_of = -1,                                                            \
        .impl = &impl_##NAME,                                                     \
    };

BLAS_OP(dot, B_DOT, 2)
BLAS_OP(matmul, B_MATMUL, 2)
BLAS_OP(outer, B_OUTER, 2)
BLAS_OP(gemm, B_GEMM, 5)
BLAS_OP(gemv, B_GEMV, 5)
BLAS_OP(ger, B_GER, 4)
