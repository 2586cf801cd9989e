/* Neural-network ops (FORMAT.md s7): softmax, log_softmax,
 * categorical_crossentropy, binary_crossentropy.
 *
 * softmax and log_softmax work on a C-contiguous array in the compute
 * dtype (the input itself when it already is one, else a converted copy),
 * max-shifted so that large inputs do not overflow. Over the last axis
 * each row is contiguous and goes through the vectorised exp; over
 * another axis the `inner` columns that share the axis are processed
 * together in blocks, which keeps the loops unit-stride. float16 computes
 * in float32. Rows (or column blocks) are split over OpenMP threads.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "grad/grad.h"
#include "ops/op.h"
#include "ops/vmath.h"

enum { NN_SOFTMAX, NN_LOG_SOFTMAX };

typedef struct nn_impl {
    int kind;
} nn_impl;

enum { CHUNK = 256, COLS = 64 };

/* ---- softmax / log_softmax ---- */

static const char *const SM_KEYS[] = {"axis", NULL};

static int sm_attrs(tg_node *n, tg_ctx *ctx) {
    int64_t ax;
    int rc = tg_attr_int(n, "axis", true, -1, &ax, ctx);
    if (rc) return rc;
    if (ax < -TG_MAX_NDIM || ax >= TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD, "attrs.axis: axis %lld is out of range", (long long)ax);
    n->a.axis_null = false;
    n->a.axis_is_list = false;
    n->a.naxes = 1;
    n->a.axes[0] = (int)ax;
    return TG_OK;
}

static int sm_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *it = &n->inputs[0]->type;
    int rc = tg_weak_resolve(n, 0, 1, &(tg_dtype){0}, ctx);
    if (rc) return rc;
    if ((rc = tg_axes_normalize(n, it->ndim, ctx))) return rc;
    tg_set_out_type(n, 0, tg_dtype_float_of(it->dtype), it->ndim, it->shape);
    return TG_OK;
}

/* The max of a row, NaNs skipped (they reach the result through exp).
 * Eight lanes of `v > r ? v : r` vectorise as maxpd/maxps without
 * relaxing floating-point semantics. */
#define ROW_MAX(T, SFX)                                                          \
    static T row_max_##SFX(const T *src, int64_t len) {                          \
        T r[8];                                                                  \
        for (int j = 0; j < 8; j++) r[j] = -INFINITY;                            \
        int64_t i = 0;                                                           \
        for (; i + 8 <= len; i += 8)                                             \
            for (int j = 0; j < 8; j++) r[j] = src[i + j] > r[j] ? src[i + j] : r[j]; \
        for (; i < len; i++) r[0] = src[i] > r[0] ? src[i] : r[0];               \
        for (int j = 1; j < 8; j++) r[0] = r[j] > r[0] ? r[j] : r[0];            \
        return r[0];                                                             \
    }
ROW_MAX(double, f64)
ROW_MAX(float, f32)

/* One contiguous row of length len, src and dst may be the same. */
#define SM_ROW(T, SFX)                                                           \
    static void sm_row_##SFX(int kind, const T *src, T *dst, int64_t len) {      \
        T m = row_max_##SFX(src, len);                                           \
        double s = 0;                                                            \
        T buf[CHUNK];                                                            \
        if (kind == NN_SOFTMAX) {                                                \
            for (int64_t i0 = 0; i0 < len; i0 += CHUNK) {                        \
                int64_t c = len - i0 < CHUNK ? len - i0 : CHUNK;                 \
                _Pragma("omp simd") for (int64_t i = 0; i < c; i++) buf[i] =     \
                    src[i0 + i] - m;                                             \
                tg_vm_exp_##SFX(c, buf, dst + i0);                               \
                T ps = 0;                                                        \
                _Pragma("omp simd reduction(+ : ps)") for (int64_t i = 0; i < c; \
                                                           i++) ps +=            \
                    dst[i0 + i];                                                 \
                s += ps;                                                         \
            }                                                                    \
            T r = (T)(1.0 / s);                                                  \
            _Pragma("omp simd") for (int64_t i = 0; i < len; i++) dst[i] *= r;   \
        } else {                                                                 \
            for (int64_t i0 = 0; i0 < len; i0 += CHUNK) {                        \
                int64_t c = len - i0 < CHUNK ? len - i0 : CHUNK;                 \
                _Pragma("omp simd") for (int64_t i = 0; i < c; i++) buf[i] =     \
                    src[i0 + i] - m;                                             \
                tg_vm_exp_##SFX(c, buf, buf);                                    \
                T ps = 0;                                                        \
                _Pragma("omp simd reduction(+ : ps)") for (int64_t i = 0; i < c; \
                                                           i++) ps += buf[i];    \
                s += ps;                                                         \
            }                                                                    \
            T ls = (T)log(s);                                                    \
            _Pragma("omp simd") for (int64_t i = 0; i < len; i++) dst[i] =       \
                (src[i] - m) - ls;                                               \
        }                                                                        \
    }

/* Rows shorter than a chunk: several rows share one call of the
 * vectorised exp, which would otherwise run mostly in its scalar tail. */
#define SM_SHORT(T, SFX)                                                         \
    static void sm_short_##SFX(int kind, const T *src, T *dst, int64_t nrows,    \
                               int64_t len) {                                    \
        T buf[CHUNK], m[CHUNK];                                                  \
        int64_t g = CHUNK / len;                                                 \
        for (int64_t r0 = 0; r0 < nrows; r0 += g) {                              \
            int64_t nr = nrows - r0 < g ? nrows - r0 : g;                        \
            const T *s = src + r0 * len;                                         \
            T *d = dst + r0 * len;                                               \
            for (int64_t r = 0; r < nr; r++) {                                   \
                m[r] = row_max_##SFX(s + r * len, len);                          \
                for (int64_t i = 0; i < len; i++) buf[r * len + i] =             \
                    s[r * len + i] - m[r];                                       \
            }                                                                    \
            tg_vm_exp_##SFX(nr * len, buf, buf);                                 \
            for (int64_t r = 0; r < nr; r++) {                                   \
                const T *e = buf + r * len;                                      \
                double sum = 0;                                                  \
                for (int64_t i = 0; i < len; i++) sum += e[i];                   \
                if (kind == NN_SOFTMAX) {                                        \
                    T inv = (T)(1.0 / sum);                                      \
                    for (int64_t i = 0; i < len; i++) d[r * len + i] = e[i] * inv; \
                } else {                                                         \
                    T ls = (T)log(sum);                                          \
                    for (int64_t i = 0; i < len; i++) d[r * len + i] =           \
                        (s[r * len + i] - m[r]) - ls;                            \
                }                                                                \
            }                                                                    \
        }                                                                        \
    }

/* Columns j0..j0+nc of one [len, inner] slab: the axis has stride inner. */
#define SM_COLS(T, SFX)                                                          \
    static void sm_cols_##SFX(int kind, const T *src, T *dst, int64_t len,       \
                              int64_t inner, int nc) {                           \
        T m[COLS], sh[COLS];                                                     \
        double s[COLS];                                                          \
        for (int j = 0; j < nc; j++) {                                           \
            m[j] = -INFINITY;                                                    \
            s[j] = 0;                                                            \
        }                                                                        \
        for (int64_t k = 0; k < len; k++) {                                      \
            const T *r = src + k * inner;                                        \
            _Pragma("omp simd") for (int j = 0; j < nc; j++) m[j] =              \
                r[j] > m[j] ? r[j] : m[j];                                       \
        }                                                                        \
        for (int64_t k = 0; k < len; k++) {                                      \
            const T *r = src + k * inner;                                        \
            T e[COLS];                                                           \
            for (int j = 0; j < nc; j++) e[j] = r[j] - m[j];                     \
            tg_vm_exp_##SFX(nc, e, e);                                           \
            for (int j = 0; j < nc; j++) s[j] += e[j];                           \
            if (kind == NN_SOFTMAX) memcpy(dst + k * inner, e, sizeof(T) * (size_t)nc); \
        }                                                                        \
        if (kind == NN_SOFTMAX) {                                                \
            for (int j = 0; j < nc; j++) sh[j] = (T)(1.0 / s[j]);                \
            for (int64_t k = 0; k < len; k++) {                                  \
                T *r = dst + k * inner;                                          \
                _Pragma("omp simd") for (int j = 0; j < nc; j++) r[j] *= sh[j];  \
            }                                                                    \
        } else {                                                                 \
            for (int j = 0; j < nc; j++) sh[j] = (T)log(s[j]);                   \
            for (int64_t k = 0; k < len; k++) {                                  \
                const T *r = src + k * inner;                                    \
                T *w = dst + k * inner;                                          \
                _Pragma("omp simd") for (int j = 0; j < nc; j++) w[j] =          \
                    (r[j] - m[j]) - sh[j];                                       \
            }                                                                    \
        }                                                                        \
    }

SM_ROW(double, f64)
SM_ROW(float, f32)
SM_COLS(double, f64)
SM_COLS(float, f32)
SM_SHORT(double, f64)
SM_SHORT(float, f32)

/* src and dst: C-contiguous arrays of dtype wd (float32 or float64) viewed
 * as [outer, len, inner]. */
static void sm_compute(int kind, tg_dtype wd, const char *src, char *dst, int64_t outer,
                       int64_t len, int64_t inner) {
    int64_t total = outer * len * inner;
    size_t isz = tg_isize(wd);
    int nth = total >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
    if (inner == 1 && len <= CHUNK / 4) {
        int64_t g = (CHUNK / len) * 16, nb = (outer + g - 1) / g;
        TG_PAR_FOR(nth, b, nb, {
            int64_t r0 = b * g, nr = outer - r0 < g ? outer - r0 : g;
            size_t off = (size_t)(r0 * len) * isz;
            if (wd == TG_FLOAT64)
                sm_short_f64(kind, (const double *)(src + off), (double *)(dst + off), nr, len);
            else
                sm_short_f32(kind, (const float *)(src + off), (float *)(dst + off), nr, len);
        });
        return;
    }
    if (inner == 1) {
        TG_PAR_FOR(nth, o, outer, {
            size_t off = (size_t)(o * len) * isz;
            if (wd == TG_FLOAT64)
                sm_row_f64(kind, (const double *)(src + off), (double *)(dst + off), len);
            else
                sm_row_f32(kind, (const float *)(src + off), (float *)(dst + off), len);
        });
        return;
    }
    int64_t nblk = (inner + COLS - 1) / COLS;
    TG_PAR_FOR(nth, t, outer * nblk, {
        int64_t o = t / nblk, j0 = (t % nblk) * COLS;
        int nc = (int)(inner - j0 < COLS ? inner - j0 : COLS);
        size_t off = (size_t)(o * len * inner + j0) * isz;
        if (wd == TG_FLOAT64)
            sm_cols_f64(kind, (const double *)(src + off), (double *)(dst + off), len, inner, nc);
        else
            sm_cols_f32(kind, (const float *)(src + off), (float *)(dst + off), len, inner, nc);
    });
}

static int sm_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const nn_impl *im = n->op->impl;
    const tg_array *x = in[0];
    tg_dtype od = n->outputs[0]->type.dtype;
    tg_dtype wd = od == TG_FLOAT16 ? TG_FLOAT32 : od;
    tg_array *src = NULL, *tmp = NULL;
    int rc = tg_array_prepare(&out[0], od, x->ndim, x->shape, ctx);
    if (rc) return rc;
    int ax = n->a.axes[0] < 0 ? n->a.axes[0] + x->ndim : n->a.axes[0];
    int64_t outer = 1, len = x->shape[ax], inner = 1;
    for (int d = 0; d < ax; d++) outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
    if (outer * len * inner == 0) return TG_OK;
    if (x->dtype == wd && tg_array_is_contiguous(x)) {
        src = tg_array_ref((tg_array *)x);
    } else if (!(src = tg_array_copy(x, wd))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    tg_array *dst = out[0];
    if (od != wd) {
        /* float16: compute in place in the float32 copy. */
        dst = src;
        if (!tg_array_is_exclusive(src)) {
            if (!(tmp = tg_array_copy(src, wd))) {
                rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                goto fail;
            }
            dst = tmp;
        }
    }
    sm_compute(im->kind, wd, src->data, dst->data, outer, len, inner);
    if (dst != out[0]) rc = tg_array_assign(out[0], dst, ctx);
fail:
    tg_array_free(src);
    tg_array_free(tmp);
    return rc;
}

static void sm_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                    double *bytes) {
    (void)n;
    double sz = (double)tg_array_size_inline(in[0]);
    /* max, subtract, exp (~10), sum, scale */
    *flops = 14 * sz;
    *bytes = sz * (double)tg_isize(in[0]->dtype) + sz * (double)tg_isize(out[0]->dtype);
}

/* ---- categorical_crossentropy ---- */

static bool is_index_dtype(tg_dtype dt) { return tg_dtype_is_int(dt); }

static int cce_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *pt = &n->inputs[0]->type;
    tg_var *tv = n->inputs[1];
    int rc;
    if ((rc = tg_weak_resolve(n, 0, 1, &(tg_dtype){0}, ctx))) return rc;
    if (pt->ndim < 1)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[0] '%s': expected probabilities with at least one dimension "
                         "(classes last), got a scalar",
                         n->inputs[0]->id);
    if (tv->weak) {
        /* A weak int is a class index; a weak float or bool meets p. */
        tg_dtype want = tg_dtype_kind(tv->type.dtype) == 'i' ? TG_INT64 : pt->dtype;
        if ((rc = tg_weak_take(n, 1, want, ctx))) return rc;
    }
    const tg_type *tt = &tv->type;
    tg_dtype pf = tg_dtype_float_of(pt->dtype);
    if (is_index_dtype(tt->dtype) && tt->ndim == pt->ndim - 1) {
        for (int d = 0; d < tt->ndim; d++)
            if (tt->shape[d] >= 0 && pt->shape[d] >= 0 && tt->shape[d] != pt->shape[d])
                return tg_errorf(ctx, TG_ESHAPE,
                                 "inputs[1] '%s': %lld class indices in dimension %d for %lld "
                                 "rows of inputs[0] '%s'",
                                 tv->id, (long long)tt->shape[d], d, (long long)pt->shape[d],
                                 n->inputs[0]->id);
        int64_t shape[TG_MAX_NDIM];
        for (int d = 0; d < tt->ndim; d++)
            shape[d] = tt->shape[d] >= 0 ? tt->shape[d] : pt->shape[d];
        n->a.mode = 1;
        tg_set_out_type(n, 0, pf, pt->ndim - 1, shape);
        return TG_OK;
    }
    if (tt->ndim != pt->ndim)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': expected integer class indices with %d dimension%s or "
                         "targets of the shape of inputs[0] '%s' (%d dimension%s), got %s with %d "
                         "dimension%s",
                         tv->id, pt->ndim - 1, pt->ndim - 1 == 1 ? "" : "s", n->inputs[0]->id,
                         pt->ndim, pt->ndim == 1 ? "" : "s", tg_dtype_name(tt->dtype), tt->ndim,
                         tt->ndim == 1 ? "" : "s");
    int64_t shape[TG_MAX_NDIM];
    for (int d = 0; d < pt->ndim; d++) {
        if (tt->shape[d] >= 0 && pt->shape[d] >= 0 && tt->shape[d] != pt->shape[d])
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[1] '%s' has length %lld in dimension %d, inputs[0] '%s' "
                             "%lld: targets must have the shape of the probabilities",
                             tv->id, (long long)tt->shape[d], d, n->inputs[0]->id,
                             (long long)pt->shape[d]);
        shape[d] = tt->shape[d] >= 0 ? tt->shape[d] : pt->shape[d];
    }
    n->a.mode = 0;
    tg_set_out_type(n, 0, tg_dtype_promote(tt->dtype, pf), pt->ndim - 1, shape);
    return TG_OK;
}

/* The address of row r (C order over the leading ndim-1 axes). */
static const char *row_ptr(const tg_array *a, int nlead, int64_t r) {
    const char *p = a->data;
    for (int d = nlead - 1; d >= 0; d--) {
        p += (r % a->shape[d]) * a->strides[d];
        r /= a->shape[d];
    }
    return p;
}

/* sum_i t_i log p_i over row r of the dense targets. */
static double cce_row(const tg_array *p, const tg_array *t, int nl, int64_t r, int64_t k, int64_t ps,
                      int64_t ts) {
    const char *pr = row_ptr(p, nl, r), *tr = row_ptr(t, nl, r);
    double acc = 0;
    if (p->dtype == TG_FLOAT64 && ps == 8) {
        double lp[CHUNK];
        for (int64_t i0 = 0; i0 < k; i0 += CHUNK) {
            int64_t c = k - i0 < CHUNK ? k - i0 : CHUNK;
            tg_vm_log_f64(c, (const double *)pr + i0, lp);
            if (t->dtype == TG_FLOAT64 && ts == 8) {
                const double *tq = (const double *)tr + i0;
                double a = 0;
#pragma omp simd reduction(+ : a)
                for (int64_t i = 0; i < c; i++) a += tq[i] * lp[i];
                acc += a;
            } else {
                for (int64_t i = 0; i < c; i++) acc += tg_load_f64(t->dtype, tr + (i0 + i) * ts) * lp[i];
            }
        }
    } else {
        for (int64_t i = 0; i < k; i++)
            acc += tg_load_f64(t->dtype, tr + i * ts) * log(tg_load_f64(p->dtype, pr + i * ps));
    }
    return acc;
}

static int cce_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *p = in[0], *t = in[1];
    tg_dtype od = n->outputs[0]->type.dtype;
    int nl = p->ndim - 1;
    int64_t k = p->shape[nl];
    bool index = n->a.mode == 1;
    if (index ? !tg_shape_equal(nl, p->shape, t->shape)
              : !tg_shape_equal(p->ndim, p->shape, t->shape)) {
        tg_str s = {0};
        for (int d = 0; d < p->ndim; d++)
            tg_str_addf(&s, "%s%lld", d ? ", " : "", (long long)p->shape[d]);
        tg_str_addf(&s, ") and targets (");
        for (int d = 0; d < t->ndim; d++)
            tg_str_addf(&s, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        int rc = tg_errorf(ctx, TG_ESHAPE, "probabilities (%s) do not match%s", s.s ? s.s : "",
                           index ? " (one class index per row)" : "");
        tg_str_free(&s);
        return rc;
    }
    int rc = tg_array_prepare(&out[0], od, nl, p->shape, ctx);
    if (rc) return rc;
    int64_t rows = tg_array_size_inline(out[0]);
    size_t osz = tg_isize(od);
    char *o = out[0]->data;
    int64_t ps = p->strides[nl];
    if (index) {
        /* Validate first so that an error leaves no half-done work. */
        for (int64_t r = 0; r < rows; r++) {
            int64_t c = tg_load_len(t->dtype, row_ptr(t, nl, r));
            if (c < 0 || c >= k) {
                /* the index as given (a uint64 past 2^63 - 1 counts as
                   2^63 - 1) */
                char txt[24];
                if (t->dtype == TG_UINT64) {
                    uint64_t u;
                    memcpy(&u, row_ptr(t, nl, r), sizeof u);
                    snprintf(txt, sizeof txt, "%llu", (unsigned long long)u);
                } else {
                    snprintf(txt, sizeof txt, "%lld", (long long)c);
                }
                return tg_errorf(ctx, TG_ERUNTIME,
                                 "class index %s (target %lld) is out of range for %lld "
                                 "classes",
                                 txt, (long long)r, (long long)k);
            }
        }
        for (int64_t r = 0; r < rows; r++) {
            int64_t c = tg_load_i64(t->dtype, row_ptr(t, nl, r));
            double v = tg_load_f64(p->dtype, row_ptr(p, nl, r) + c * ps);
            tg_store_f64(od, o + (size_t)r * osz, -log(v));
        }
        return TG_OK;
    }
    int64_t ts = t->strides[nl];
    int nth = rows * k >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
    TG_PAR_FOR(nth, r, rows, { tg_store_f64(od, o + (size_t)r * osz, -cce_row(p, t, nl, r, k, ps, ts)); });
    return TG_OK;
}

static void cce_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                     double *bytes) {
    double ps = (double)tg_array_size_inline(in[0]);
    double ts = (double)tg_array_size_inline(in[1]);
    double os = (double)tg_array_size_inline(out[0]);
    bool index = n->a.mode == 1;
    /* log ~10 flops, a multiply and an add per element (dense). */
    *flops = index ? 10 * os : 12 * ps;
    *bytes = (index ? os : ps) * (double)tg_isize(in[0]->dtype) +
             ts * (double)tg_isize(in[1]->dtype) + os * (double)tg_isize(out[0]->dtype);
}

/* ---- binary_crossentropy ---- */

static int bce_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt;
    int rc = tg_weak_resolve(n, 0, 2, &dt, ctx);
    if (rc) return rc;
    tg_type t;
    if ((rc = tg_infer_broadcast(n, 0, 2, &t, ctx))) return rc;
    tg_set_out_type(n, 0, tg_dtype_float_of(dt), t.ndim, t.shape);
    return TG_OK;
}

/* -(t log p + (1 - t) log(1 - p)); log1p(-p) keeps log(1 - p) accurate for
 * small p. ptrs: out, p, t. */
#define BCE_INNER(T, SFX)                                                        \
    static void bce_inner_##SFX(int64_t n, char **ptrs, const int64_t *st,       \
                                void *ud) {                                      \
        (void)ud;                                                                \
        T *o = (T *)ptrs[0];                                                     \
        const char *pp = ptrs[1], *tp = ptrs[2];                                 \
        if (st[0] == (int64_t)sizeof(T) && st[1] == (int64_t)sizeof(T) &&           \
            st[2] == (int64_t)sizeof(T)) {    \
            const T *p = (const T *)pp, *t = (const T *)tp;                      \
            T a[CHUNK], b[CHUNK];                                                \
            for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {                          \
                int64_t c = n - i0 < CHUNK ? n - i0 : CHUNK;                     \
                _Pragma("omp simd") for (int64_t i = 0; i < c; i++) b[i] =       \
                    -p[i0 + i];                                                  \
                tg_vm_log_##SFX(c, p + i0, a);                                   \
                tg_vm_log1p_##SFX(c, b, b);                                      \
                _Pragma("omp simd") for (int64_t i = 0; i < c; i++) o[i0 + i] =  \
                    -(t[i0 + i] * a[i] + (1 - t[i0 + i]) * b[i]);                \
            }                                                                    \
            return;                                                              \
        }                                                                        \
        for (int64_t i = 0; i < n; i++) {                                        \
            T p = *(const T *)(pp + i * st[1]), t = *(const T *)(tp + i * st[2]); \
            *(T *)((char *)o + i * st[0]) =                                      \
                (T) - (t * log(p) + (1 - t) * log1p(-p));                        \
        }                                                                        \
    }

BCE_INNER(double, f64)
BCE_INNER(float, f32)

static int bce_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    tg_dtype od = n->outputs[0]->type.dtype;
    tg_dtype wd = od == TG_FLOAT16 ? TG_FLOAT32 : od;
    tg_array *conv[2] = {NULL, NULL}, *tmp = NULL;
    const tg_array *use[2];
    int nds[2] = {in[0]->ndim, in[1]->ndim}, ndim, rc = TG_OK;
    const int64_t *shs[2] = {in[0]->shape, in[1]->shape};
    int64_t shape[TG_MAX_NDIM];
    if (tg_broadcast_shapes(2, nds, shs, &ndim, shape, NULL))
        return tg_errorf(ctx, TG_ESHAPE, "probabilities and targets do not broadcast");
    if ((rc = tg_array_prepare(&out[0], od, ndim, shape, ctx))) return rc;
    for (int i = 0; i < 2; i++) {
        use[i] = in[i];
        if (in[i]->dtype != wd) {
            if (!(conv[i] = tg_array_copy(in[i], wd))) {
                rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                goto fail;
            }
            use[i] = conv[i];
        }
    }
    tg_array *dst = out[0];
    if (od != wd) {
        if (!(tmp = tg_array_empty(wd, ndim, shape))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
        dst = tmp;
    }
    char *base[3] = {dst->data, use[0]->data, use[1]->data};
    int64_t st[3][TG_MAX_NDIM];
    memcpy(st[0], dst->strides, sizeof(int64_t) * (size_t)ndim);
    for (int i = 0; i < 2; i++) {
        int off = ndim - use[i]->ndim;
        for (int d = 0; d < ndim; d++)
            st[i + 1][d] = d < off || use[i]->shape[d - off] != shape[d]
                               ? 0
                               : use[i]->strides[d - off];
    }
    if (tg_shape_size(ndim, shape) > 0)
        tg_iter_run(3, base, ndim, shape, (const int64_t(*)[TG_MAX_NDIM])st,
                    wd == TG_FLOAT64 ? bce_inner_f64 : bce_inner_f32, NULL, true);
    if (tmp) rc = tg_array_assign(out[0], tmp, ctx);
fail:
    tg_array_free(conv[0]);
    tg_array_free(conv[1]);
    tg_array_free(tmp);
    return rc;
}

static void bce_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                     double *bytes) {
    (void)n;
    double os = (double)tg_array_size_inline(out[0]);
    *flops = 25 * os; /* two logs and five arithmetic operations */
    *bytes = (double)tg_array_size_inline(in[0]) * (double)tg_isize(in[0]->dtype) +
             (double)tg_array_size_inline(in[1]) * (double)tg_isize(in[1]->dtype) +
             os * (double)tg_isize(out[0]->dtype);
}

static const nn_impl impl_softmax = {NN_SOFTMAX};
static const nn_impl impl_log_softmax = {NN_LOG_SOFTMAX};

const tg_op tg_op_softmax = {.name = "softmax",
                             .nin_min = 1,
                             .nin_max = 1,
                             .nout = 1,
                             .flags = TG_OPF_FLOAT_ONLY | TG_OPF_AXIS_SET,
                             .attr_keys = SM_KEYS,
                             .parse_attrs = sm_attrs,
                             .infer = sm_infer,
                             .run = sm_run,
                             .cost = sm_cost,
                             .view_of = -1,
                             .impl = &impl_softmax,
    .grad = tg_grad_nn};

const tg_op tg_op_log_softmax = {.name = "log_softmax",
                                 .nin_min = 1,
                                 .nin_max = 1,
                                 .nout = 1,
                                 .flags = TG_OPF_FLOAT_ONLY | TG_OPF_AXIS_SET,
                                 .attr_keys = SM_KEYS,
                                 .parse_attrs = sm_attrs,
                                 .infer = sm_infer,
                                 .run = sm_run,
                                 .cost = sm_cost,
                                 .view_of = -1,
                                 .impl = &impl_log_softmax,
    .grad = tg_grad_nn};

const tg_op tg_op_categorical_crossentropy = {.name = "categorical_crossentropy",
                                              .nin_min = 2,
                                              .nin_max = 2,
                                              .nout = 1,
                                              .infer = cce_infer,
                                              .run = cce_run,
                                              .cost = cce_cost,
                                              .view_of = -1,
    .grad = tg_grad_nn};

const tg_op tg_op_binary_crossentropy = {.name = "binary_crossentropy",
                                         .nin_min = 2,
                                         .nin_max = 2,
                                         .nout = 1,
                                         .infer = bce_infer,
                                         .run = bce_run,
                                         .cost = bce_cost,
                                         .view_of = -1,
    .grad = tg_grad_nn};
