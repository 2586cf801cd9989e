/* The building family (FORMAT.md s7, "Shape and indexing"): integer-array
 * indexing (take, take_set, take_add), joining and splitting (join, stack,
 * split) and the ops that make arrays from lengths and values (alloc,
 * zeros_like, ones_like, arange, eye, repeat). Kernels that move blocks
 * work on C-contiguous data (a strided input is copied once), so that the
 * inner loop is a memcpy of a whole trailing block. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "ops/shape.h"
#include "grad/grad.h"

/* ---- helpers ---- */

static const char *type_s(const tg_var *v, char *buf, size_t size) {
    tg_type_str(&v->type, buf, size);
    return buf;
}

static int norm_axis(int ax, int nd, int *out, tg_ctx *ctx) {
    if (ax < -nd || ax >= nd)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.axis: axis %d is out of bounds for an input of "
                         "%d dimension%s",
                         ax, nd, nd == 1 ? "" : "s");
    *out = ax < 0 ? ax + nd : ax;
    return TG_OK;
}

static int64_t prod(int from, int to, const int64_t *shape) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= shape[i];
    return p;
}

/* Static product, -1 when a length is unknown (0 wins over unknown). */
static int64_t static_prod(int from, int to, const int64_t *shape) {
    int64_t p = 1;
    bool unknown = false;
    for (int i = from; i < to; i++) {
        if (shape[i] == 0) return 0;
        if (shape[i] < 0) unknown = true;
        else p *= shape[i];
    }
    return unknown ? -1 : p;
}

/* Input i must be an integer scalar (a weak one becomes int64). */
static int want_int_scalar(tg_node *n, int i, tg_ctx *ctx) {
    char buf[160];
    tg_var *v = n->inputs[i];
    if (v->weak && tg_dtype_is_int(v->type.dtype)) {
        int rc = tg_weak_take(n, i, TG_INT64, ctx);
        if (rc) return rc;
    }
    if (v->type.ndim != 0 || !tg_dtype_is_int(v->type.dtype))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[%d] '%s': expected an integer scalar, got %s",
                         i, v->id, type_s(v, buf, sizeof buf));
    return TG_OK;
}

/* The value of a constant integer scalar input, or -1 when not constant. */
static int64_t const_len(const tg_node *n, int i) {
    const tg_array *c = tg_const_input(n, i);
    unsigned long long u;
    if (!c || c->ndim != 0 || tg_shape_len_too_large(c->dtype, c->data, &u)) return -1;
    int64_t v = tg_load_len(c->dtype, c->data);
    return v < 0 ? -1 : v;
}

/* a itself when C-contiguous, else a contiguous copy (*tmp owns it). */
static const tg_array *contiguous(const tg_array *a, tg_array **tmp,
                                  tg_ctx *ctx) {
    *tmp = NULL;
    if (tg_array_is_contiguous(a)) return a;
    *tmp = tg_array_copy(a, a->dtype);
    if (!*tmp) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return *tmp;
}

static void fill_bytes(char *dst, const void *elem, size_t isz, int64_t n) {
    if (n <= 0) return;
    memcpy(dst, elem, isz);
    int64_t done = 1;
    while (done < n) {
        int64_t c = done < n - done ? done : n - done;
        memcpy(dst + done * (int64_t)isz, dst, (size_t)c * isz);
        done += c;
    }
}

/* Reading and writing every output byte, and every input byte once. */
static void cost_copy(const tg_node *n, tg_array *const *in,
                      tg_array *const *out, double *flops, double *bytes) {
    *flops = 0;
    *bytes = 0;
    for (int i = 0; i < n->nin; i++)
        if (in[i])
            *bytes += (double)tg_array_size_inline(in[i]) *
                      (double)tg_isize(in[i]->dtype);
    for (int i = 0; i < n->nout; i++)
        if (out[i])
            *bytes += (double)tg_array_size_inline(out[i]) *
                      (double)tg_isize(out[i]->dtype);
}

static void cost_write(const tg_node *n, tg_array *const *in,
                       tg_array *const *out, double *flops, double *bytes) {
    TG_UNUSED(n);
    TG_UNUSED(in);
    *flops = 0;
    *bytes = out[0] ? (double)tg_array_size_inline(out[0]) *
                          (double)tg_isize(out[0]->dtype)
                    : 0;
}

/* NumPy's same_kind casting: bool < unsigned < signed < float. */
static bool same_kind(tg_dtype from, tg_dtype to) {
    static const char order[] = "buif";
    return strchr(order, tg_dtype_kind(from)) <=
           strchr(order, tg_dtype_kind(to));
}

/* ---- take, take_set, take_add ---- */

typedef struct take_kind {
    int idx; /* input number of the indices */
    int mode; /* 0 take, 1 set, 2 add */
} take_kind;
static const take_kind kind_take = {1, 0}, kind_tset = {2, 1},
                       kind_tadd = {2, 2};

static const char *const keys_axis[] = {"axis", NULL};

static int take_parse(tg_node *n, tg_ctx *ctx) {
    int64_t ax;
    int rc = tg_attr_int(n, "axis", true, 0, &ax, ctx);
    if (rc) return rc;
    if (ax < -TG_MAX_NDIM || ax >= TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD, "attrs.axis: axis %lld is out of range",
                         (long long)ax);
    n->a.naxes = 1;
    n->a.axes[0] = (int)ax;
    return TG_OK;
}

/* The indexed shape: x's with the axis replaced by idx's shape. */
static int take_shape(const tg_type *x, const tg_type *idx, int ax,
                      tg_type *t, tg_ctx *ctx) {
    int nd = x->ndim - 1 + idx->ndim;
    if (nd > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ESHAPE,
                         "the result would have %d dimensions, at most %d are "
                         "supported",
                         nd, TG_MAX_NDIM);
    t->ndim = nd;
    int k = 0;
    for (int i = 0; i < ax; i++) t->shape[k++] = x->shape[i];
    for (int i = 0; i < idx->ndim; i++) t->shape[k++] = idx->shape[i];
    for (int i = ax + 1; i < x->ndim; i++) t->shape[k++] = x->shape[i];
    return TG_OK;
}

static int take_infer(tg_node *n, tg_ctx *ctx) {
    char b1[160], b2[160];
    const take_kind *kd = n->op->impl;
    tg_var *x = n->inputs[0], *idx = n->inputs[kd->idx];
    int rc;
    if (idx->weak && tg_dtype_is_int(idx->type.dtype) &&
        (rc = tg_weak_take(n, kd->idx, TG_INT64, ctx)))
        return rc;
    if (!tg_dtype_is_int(idx->type.dtype))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[%d] '%s': expected integer indices, got %s",
                         kd->idx, idx->id, type_s(idx, b1, sizeof b1));
    if (x->type.ndim == 0)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[0] '%s': cannot index a 0-d array along an "
                         "axis",
                         x->id);
    int ax = 0;
    if ((rc = norm_axis(n->a.axes[0], x->type.ndim, &ax, ctx))) return rc;
    tg_type rt;
    if ((rc = take_shape(&x->type, &idx->type, ax, &rt, ctx))) return rc;
    if (kd->mode == 0) {
        tg_set_out_type(n, 0, x->type.dtype, rt.ndim, rt.shape);
        return TG_OK;
    }
    tg_var *y = n->inputs[1];
    if (y->weak && (rc = tg_weak_take(n, 1, x->type.dtype, ctx))) return rc;
    if (!same_kind(y->type.dtype, x->type.dtype))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': cannot cast %s to %s (the dtype of "
                         "inputs[0] '%s') under NumPy's same_kind rule",
                         y->id, tg_dtype_name(y->type.dtype),
                         tg_dtype_name(x->type.dtype), x->id);
    const tg_type *yt = &y->type;
    for (int j = 0; j < yt->ndim; j++) {
        int k = j - (yt->ndim - rt.ndim);
        int64_t yl = yt->shape[j];
        bool ok = k < 0 ? (yl < 0 || yl == 1)
                        : (yl < 0 || yl == 1 || rt.shape[k] < 0 ||
                           yl == rt.shape[k]);
        if (!ok)
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[1] '%s': %s does not broadcast to the "
                             "indexed shape %s",
                             y->id, type_s(y, b1, sizeof b1),
                             (tg_type_str(&rt, b2, sizeof b2), b2));
    }
    tg_set_out_type(n, 0, x->type.dtype, x->type.ndim, x->type.shape);
    return TG_OK;
}

/* The error for the index at flat position i (C order) of idx, named as
 * given: a uint64 past 2^63 - 1 is not the 2^63 - 1 it counts as. */
static int index_error(const tg_array *idx, int64_t i, int64_t len, int ax,
                       tg_ctx *ctx) {
    const char *p = idx->data;
    for (int d = idx->ndim - 1; d >= 0; d--) {
        p += (i % idx->shape[d]) * idx->strides[d];
        i /= idx->shape[d];
    }
    char txt[24];
    if (idx->dtype == TG_UINT64) {
        uint64_t u;
        memcpy(&u, p, sizeof u);
        snprintf(txt, sizeof txt, "%llu", (unsigned long long)u);
    } else {
        snprintf(txt, sizeof txt, "%lld", (long long)tg_load_len(idx->dtype, p));
    }
    return tg_errorf(ctx, TG_ERUNTIME,
                     "index %s is out of bounds for axis %d with size %lld",
                     txt, ax, (long long)len);
}

/* The indices as int64, negative ones resolved; an index out of range is
 * a run-time error naming it. *out is tg_malloc'd (NULL when empty). */
static int read_indices(const tg_array *idx, int64_t len, int ax,
                        int64_t **out, tg_ctx *ctx) {
    *out = NULL;
    int64_t m = tg_array_size_inline(idx);
    if (m == 0) return TG_OK;
    int64_t *v = tg_malloc((size_t)m * sizeof *v);
    if (!v) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    int64_t at[TG_MAX_NDIM] = {0};
    for (int64_t i = 0; i < m; i++) {
        const char *p = idx->data;
        for (int d = 0; d < idx->ndim; d++) p += at[d] * idx->strides[d];
        int64_t k = tg_load_len(idx->dtype, p);
        int64_t r = k < 0 ? k + len : k;
        if (r < 0 || r >= len) {
            tg_free(v);
            return index_error(idx, i, len, ax, ctx);
        }
        v[i] = r;
        for (int d = idx->ndim - 1; d >= 0; d--) {
            if (++at[d] < idx->shape[d]) break;
            at[d] = 0;
        }
    }
    *out = v;
    return TG_OK;
}

/* The indices of one run as the kernels read them: m contiguous int64
 * (wide) or int32 values, a negative one counting from the end. The usual
 * index dtypes, contiguous, are read where they lie (a copy of 10^7
 * indices cost more than the gather: an allocation that page-faults at
 * every call); any other dtype or layout is converted once to a resolved
 * int64 copy (own, read_indices). */
typedef struct take_idx {
    const void *p;
    int64_t m;
    bool wide;
    int64_t *own;
} take_idx;

/* Index j, wrapped when negative (its range is the caller's to check). */
static inline int64_t idx_at(const take_idx *ix, int64_t j, int64_t len) {
    int64_t k = ix->wide ? ((const int64_t *)ix->p)[j]
                         : ((const int32_t *)ix->p)[j];
    return k < 0 ? k + len : k;
}

/* The position of the first index out of [-len, len), or -1. */
static int64_t idx_first_bad(const take_idx *ix, int64_t len) {
    for (int64_t j = 0; j < ix->m; j++)
        if ((uint64_t)idx_at(ix, j, len) >= (uint64_t)len) return j;
    return -1;
}

/* ix for idx along an axis of length len. An index read in place is
 * checked here when `check`, else by the loop that reads it (take's
 * gather); the copy is always checked. */
static int take_indices(const tg_array *idx, int64_t len, int ax, bool check,
                        take_idx *ix, tg_ctx *ctx) {
    ix->m = tg_array_size_inline(idx);
    ix->own = NULL;
    ix->wide = true;
    if ((idx->dtype == TG_INT64 || idx->dtype == TG_INT32) &&
        tg_array_is_contiguous(idx)) {
        ix->p = idx->data;
        ix->wide = idx->dtype == TG_INT64;
        int64_t j = check ? idx_first_bad(ix, len) : -1;
        return j < 0 ? TG_OK : index_error(idx, j, len, ax, ctx);
    }
    int rc = read_indices(idx, len, ax, &ix->own, ctx);
    ix->p = ix->own;
    return rc;
}

/* Blocks [t0, t1) of take's result seen as (outer, m) blocks of blk bytes:
 * block o * m + j is x's block o * len + ix[j]. A block of 1, 2, 4 or 8
 * bytes (one element when post == 1, as in a 1-d take) is one load and
 * store, not a memcpy call; the outer position steps with j, not by a
 * division per block.
 * Returns false when an index was out of range (its block is then x's
 * first; the caller reports the index). */
static bool take_span(const take_idx *ix, char *dst, const char *src,
                      int64_t len, size_t blk, int64_t t0, int64_t t1) {
    int64_t m = ix->m, o = t0 / m, j = t0 - o * m, row = o * len;
    bool bad = false;
#define GATHER_(IT, B)                                                       \
    {                                                                        \
        const IT *ip = (const IT *)ix->p;                                    \
        for (int64_t t = t0; t < t1; t++) {                                  \
            int64_t k = ip[j];                                               \
            k += k < 0 ? len : 0;                                            \
            if (__builtin_expect((uint64_t)k >= (uint64_t)len, 0)) {         \
                bad = true;                                                  \
                k = 0;                                                       \
            }                                                                \
            memcpy(dst + t * (int64_t)(B), src + (row + k) * (int64_t)(B),   \
                   (B));                                                     \
            if (++j == m) {                                                  \
                j = 0;                                                       \
                row += len;                                                  \
            }                                                                \
        }                                                                    \
    }
#define GATHER_B_(B)                                                         \
    if (ix->wide) GATHER_(int64_t, B) else GATHER_(int32_t, B)
    switch (blk) {
    case 1: GATHER_B_(1) break;
    case 2: GATHER_B_(2) break;
    case 4: GATHER_B_(4) break;
    case 8: GATHER_B_(8) break;
    default: GATHER_B_(blk) break;
    }
#undef GATHER_B_
#undef GATHER_
    return !bad;
}

static int take_run(tg_node *n, tg_array *const *in, tg_array **out,
                    tg_ctx *ctx) {
    const tg_array *x = in[0], *idx = in[1];
    tg_array *tmp = NULL;
    take_idx ix;
    int ax = n->a.axes[0] < 0 ? n->a.axes[0] + x->ndim : n->a.axes[0];
    int64_t len = x->shape[ax];
    int64_t outer = prod(0, ax, x->shape), post = prod(ax + 1, x->ndim, x->shape);
    /* With nothing to gather the indices are still checked, as NumPy's. */
    int rc = take_indices(idx, len, ax, outer * post == 0 || len == 0, &ix, ctx);
    if (rc) return rc;
    tg_type xt = {.dtype = x->dtype, .ndim = x->ndim}, it = {.ndim = idx->ndim},
            rt;
    memcpy(xt.shape, x->shape, sizeof xt.shape);
    memcpy(it.shape, idx->shape, sizeof it.shape);
    if ((rc = take_shape(&xt, &it, ax, &rt, ctx)) ||
        (rc = tg_array_prepare(out, x->dtype, rt.ndim, rt.shape, ctx)))
        goto done;
    int64_t total = outer * ix.m;
    if (total * post == 0) goto done;
    const tg_array *xc = contiguous(x, &tmp, ctx);
    if (!xc) {
        rc = TG_ENOMEM;
        goto done;
    }
    size_t blk = (size_t)post * tg_isize(x->dtype);
    const char *src = xc->data;
    char *dst = out[0]->data;
    int nth = total * post >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
    int bad = 0;
    TG_PAR_FOR(nth, c, nth, {
        int64_t t0 = total * c / nth, t1 = total * (c + 1) / nth;
        if (t0 < t1 && !take_span(&ix, dst, src, len, blk, t0, t1))
            __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
    });
    if (bad) rc = index_error(idx, idx_first_bad(&ix, len), len, ax, ctx);
done:
    tg_array_free(tmp);
    tg_free(ix.own);
    return rc;
}

/* NumPy's add of two elements of one dtype, d[i] + s[i]: integers wrap,
 * bool is logical or, float16 rounded once per addition. */
#define ADD_CASES_(X)                                                        \
    X(case TG_BOOL:, uint8_t, (uint8_t)(d[i] | s[i]))                        \
    X(case TG_INT8: case TG_UINT8:, uint8_t, (uint8_t)(d[i] + s[i]))         \
    X(case TG_INT16: case TG_UINT16:, uint16_t, (uint16_t)(d[i] + s[i]))     \
    X(case TG_INT32: case TG_UINT32:, uint32_t, (uint32_t)(d[i] + s[i]))     \
    X(case TG_INT64: case TG_UINT64:, uint64_t, (uint64_t)(d[i] + s[i]))     \
    X(case TG_FLOAT16:, uint16_t,                                            \
      tg_float_to_half(tg_half_to_float(d[i]) + tg_half_to_float(s[i])))    \
    X(case TG_FLOAT32:, float, d[i] + s[i])                                  \
    X(case TG_FLOAT64:, double, d[i] + s[i])

/* dst[i] += src[i] for n contiguous elements. */
static void add_block(tg_dtype dt, char *dst, const char *src, int64_t n) {
    switch (dt) {
#define ADD_(CASES, T, EXPR)                                                 \
    CASES {                                                                  \
        T *d = (T *)(void *)dst;                                             \
        const T *s = (const T *)(const void *)src;                           \
        for (int64_t i = 0; i < n; i++) d[i] = EXPR;                         \
    }                                                                        \
    break;
    ADD_CASES_(ADD_)
#undef ADD_
    default: break;
    }
}

/* x's rows ix[j] (at dst; checked) += y's rows j (at src), j = 0..m-1 in
 * order, so that a repeated index adds each time (np.add.at); rows of
 * post elements of dt. One element per row (post == 1, a 1-d x) is added
 * in the loop, not by a call. */
static void add_rows(tg_dtype dt, char *dst, const char *src,
                     const take_idx *ix, int64_t len, int64_t post) {
    switch (dt) {
#define ROWS_(IT, T, EXPR)                                                   \
    {                                                                        \
        const IT *ip = (const IT *)ix->p;                                    \
        for (int64_t j = 0; j < ix->m; j++) {                                \
            int64_t k = ip[j];                                               \
            k += k < 0 ? len : 0;                                            \
            T *d = (T *)(void *)dst + k * post;                              \
            const T *s = (const T *)(const void *)src + j * post;            \
            if (post == 1) {                                                 \
                const int64_t i = 0;                                         \
                d[i] = EXPR;                                                 \
            } else {                                                         \
                for (int64_t i = 0; i < post; i++) d[i] = EXPR;              \
            }                                                                \
        }                                                                    \
    }
#define ADD_(CASES, T, EXPR)                                                 \
    CASES if (ix->wide) ROWS_(int64_t, T, EXPR) else ROWS_(int32_t, T, EXPR) \
    break;
    ADD_CASES_(ADD_)
#undef ADD_
#undef ROWS_
    default: break;
    }
}

/* x's rows ix[j] (at dst; checked) = y's rows j (at src), j = 0..m-1 in
 * order: the last of a repeated index wins. */
static void set_rows(char *dst, const char *src, const take_idx *ix,
                     int64_t len, size_t blk) {
#define SET_(IT, B)                                                          \
    {                                                                        \
        const IT *ip = (const IT *)ix->p;                                    \
        for (int64_t j = 0; j < ix->m; j++) {                                \
            int64_t k = ip[j];                                               \
            k += k < 0 ? len : 0;                                            \
            memcpy(dst + k * (int64_t)(B), src + j * (int64_t)(B), (B));     \
        }                                                                    \
    }
#define SET_B_(B) if (ix->wide) SET_(int64_t, B) else SET_(int32_t, B)
    switch (blk) {
    case 1: SET_B_(1) break;
    case 2: SET_B_(2) break;
    case 4: SET_B_(4) break;
    case 8: SET_B_(8) break;
    default: SET_B_(blk) break;
    }
#undef SET_B_
#undef SET_
}

static int take_setadd_run(tg_node *n, tg_array *const *in, tg_array **out,
                           tg_ctx *ctx) {
    const tg_array *x = in[0], *y = in[1], *idx = in[2];
    bool add = ((const take_kind *)n->op->impl)->mode == 2;
    tg_array *yb = NULL;
    take_idx ix;
    int ax = n->a.axes[0] < 0 ? n->a.axes[0] + x->ndim : n->a.axes[0];
    int64_t len = x->shape[ax];
    /* all checked before x is written */
    int rc = take_indices(idx, len, ax, true, &ix, ctx);
    if (rc) return rc;
    tg_type xt = {.dtype = x->dtype, .ndim = x->ndim}, it = {.ndim = idx->ndim},
            rt;
    memcpy(xt.shape, x->shape, sizeof xt.shape);
    memcpy(it.shape, idx->shape, sizeof it.shape);
    if ((rc = take_shape(&xt, &it, ax, &rt, ctx))) goto done;
    /* In place (the optimizer's `inplace`): update x where it lies. */
    if (!tg_op_take_input(n, in, 0, out) &&
        ((rc = tg_array_prepare(out, x->dtype, x->ndim, x->shape, ctx)) ||
         (rc = tg_array_assign(*out, x, ctx))))
        goto done;
    /* y broadcast to the indexed shape, contiguous, in x's dtype, or for
     * take_add in the dtype of the sum where it is wider (np.add.at adds
     * float16 0.5 and int16 2049 in float32 and rounds once: 2050; y cast
     * to x's dtype first rounded twice, 2048): y itself when it is that
     * already and is not in the buffer being written, else a copy. */
    tg_dtype sum = add ? tg_dtype_promote(x->dtype, y->dtype) : x->dtype;
    const char *src = y->data;
    if (y->dtype != sum || y->ndim != rt.ndim ||
        memcmp(y->shape, rt.shape, (size_t)rt.ndim * sizeof *rt.shape) ||
        !tg_array_is_contiguous(y) || y->buf == out[0]->buf) {
        if (!(yb = tg_array_empty(sum, rt.ndim, rt.shape))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        if ((rc = tg_array_assign(yb, y, ctx))) goto done;
        src = yb->data;
    }
    int64_t outer = prod(0, ax, x->shape), post = prod(ax + 1, x->ndim, x->shape);
    int64_t m = ix.m;
    if (outer * m * post == 0) goto done;
    size_t isz = tg_isize(x->dtype), blk = (size_t)post * isz;
    char *dst = out[0]->data;
    if (sum != x->dtype) { /* each row: x's in the sum's dtype, plus y's, back */
        size_t ssz = tg_isize(sum);
        char *acc = tg_malloc((size_t)post * ssz);
        if (!acc) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < m; j++) {
                char *d = dst + (o * len + idx_at(&ix, j, len)) * (int64_t)blk;
                tg_cast_strided(sum, acc, (int64_t)ssz, x->dtype, d, (int64_t)isz, post);
                add_block(sum, acc, src + (o * m + j) * post * (int64_t)ssz, post);
                tg_cast_strided(x->dtype, d, (int64_t)isz, sum, acc, (int64_t)ssz, post);
            }
        tg_free(acc);
        goto done;
    }
    /* Rows of different outer positions never collide; inside one, the
     * indices are applied in order (the last set wins, adds accumulate). */
    TG_PAR_FOR(outer * m * post >= TG_PARALLEL_MIN && outer > 1 ? omp_get_max_threads() : 1, o, outer, {
        char *d = dst + o * len * (int64_t)blk;
        const char *s = src + o * m * (int64_t)blk;
        if (add) add_rows(x->dtype, d, s, &ix, len, post);
        else set_rows(d, s, &ix, len, blk);
    });
done:
    tg_array_free(yb);
    tg_free(ix.own);
    return rc;
}

/* tg_op.commit_ready for take_set and take_add: the update of a shared
 * table (an embedding's SGD step, which the optimizer's sparse_update
 * makes take_add(E, -lr * g, idx)) written where it lies, when
 * take_setadd_run can neither fail nor allocate: x taken over
 * (tg_op_take_input's conditions), the indices int64 or int32,
 * contiguous and every one in range, and y of x's dtype, contiguous,
 * of the indexed shape and in a buffer of its own. */
static bool take_commit_ready(const tg_node *n, tg_array *const *in) {
    const tg_array *x = in[0], *y = in[1], *idx = in[2];
    if (!n->inplace || n->inplace[0] != 0 || x->ndim == 0 || x->buf->nbytes <= TG_VM_KEEP_BYTES ||
        !tg_array_is_exclusive(x) || !tg_array_is_contiguous(x) || n->outputs[0]->type.dtype != x->dtype)
        return false;
    int ax = n->a.axes[0] < 0 ? n->a.axes[0] + x->ndim : n->a.axes[0];
    if (ax < 0 || ax >= x->ndim || x->ndim - 1 + idx->ndim > TG_MAX_NDIM) return false;
    if ((idx->dtype != TG_INT64 && idx->dtype != TG_INT32) || !tg_array_is_contiguous(idx) || idx->buf == x->buf)
        return false;
    take_idx ix = {.p = idx->data, .m = tg_array_size_inline(idx), .wide = idx->dtype == TG_INT64};
    if (idx_first_bad(&ix, x->shape[ax]) >= 0) return false;
    tg_type xt = {.dtype = x->dtype, .ndim = x->ndim}, it = {.ndim = idx->ndim}, rt;
    memcpy(xt.shape, x->shape, sizeof xt.shape);
    memcpy(it.shape, idx->shape, sizeof it.shape);
    if (take_shape(&xt, &it, ax, &rt, NULL)) return false;
    return y->dtype == x->dtype && y->ndim == rt.ndim &&
           !memcmp(y->shape, rt.shape, (size_t)rt.ndim * sizeof *rt.shape) && tg_array_is_contiguous(y) &&
           y->buf != x->buf;
}

const tg_op tg_op_take = {
    .name = "take", .nin_min = 2, .nin_max = 2, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = take_parse, .infer = take_infer,
    .run = take_run, .cost = cost_copy, .view_of = -1, .impl = &kind_take, .grad = tg_grad_build};

const tg_op tg_op_take_set = {
    .name = "take_set", .nin_min = 3, .nin_max = 3, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = take_parse, .infer = take_infer,
    .run = take_setadd_run, .cost = cost_copy, .view_of = -1, .inplace_inputs = 1u,
    .commit_ready = take_commit_ready, .impl = &kind_tset, .grad = tg_grad_build};

const tg_op tg_op_take_add = {
    .name = "take_add", .nin_min = 3, .nin_max = 3, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = take_parse, .infer = take_infer,
    .run = take_setadd_run, .cost = cost_copy, .view_of = -1, .inplace_inputs = 1u,
    .commit_ready = take_commit_ready, .impl = &kind_tadd, .grad = tg_grad_build};

/* ---- join, stack ---- */

static int axis_required_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_axis(n, "axis", false, false, false, ctx);
}

/* The dtype of the operands first..nin-1: np.result_type, as
 * np.concatenate and np.stack give it; a weak scalar meets the strong
 * dtypes as in arithmetic (a Python float among integer arrays makes
 * float64, NumPy 2's stack([int8 x, 2.5])). */
static int join_dtype(tg_node *n, int first, tg_dtype *out, tg_ctx *ctx) {
    return tg_weak_resolve(n, first, n->nin - first, out, ctx);
}

static int join_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt;
    int rc = join_dtype(n, 0, &dt, ctx);
    if (rc) return rc;
    const tg_type *t0 = &n->inputs[0]->type;
    int nd = t0->ndim, ax = 0;
    if (nd == 0)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[0] '%s': zero-dimensional arrays cannot be "
                         "concatenated",
                         n->inputs[0]->id);
    if ((rc = norm_axis(n->a.axes[0], nd, &ax, ctx))) return rc;
    int64_t shape[TG_MAX_NDIM];
    memcpy(shape, t0->shape, sizeof shape);
    int64_t sum = 0;
    for (int i = 0; i < n->nin; i++) {
        const tg_type *t = &n->inputs[i]->type;
        if (t->ndim != nd)
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s': has %d dimensions, inputs[0] "
                             "'%s' has %d: all must have the same number",
                             i, n->inputs[i]->id, t->ndim, n->inputs[0]->id,
                             nd);
        for (int d = 0; d < nd; d++) {
            if (d == ax) continue;
            if (shape[d] >= 0 && t->shape[d] >= 0 && shape[d] != t->shape[d])
                return tg_errorf(ctx, TG_ESHAPE,
                                 "inputs[%d] '%s': length %lld in dimension "
                                 "%d, but %lld in an earlier input (only the "
                                 "join axis may differ)",
                                 i, n->inputs[i]->id, (long long)t->shape[d],
                                 d, (long long)shape[d]);
            if (shape[d] < 0) shape[d] = t->shape[d];
        }
        if (sum >= 0 && t->shape[ax] < 0)
            sum = -1;
        else if (sum >= 0 && __builtin_add_overflow(sum, t->shape[ax], &sum))
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[%d] '%s': the joined length along axis "
                             "%d passes 2^63 - 1",
                             i, n->inputs[i]->id, ax);
    }
    shape[ax] = sum;
    tg_set_out_type(n, 0, dt, nd, shape);
    return TG_OK;
}

static int join_run(tg_node *n, tg_array *const *in, tg_array **out,
                    tg_ctx *ctx) {
    int nd = in[0]->ndim;
    int ax = n->a.axes[0] < 0 ? n->a.axes[0] + nd : n->a.axes[0];
    int64_t shape[TG_MAX_NDIM];
    memcpy(shape, in[0]->shape, sizeof shape);
    shape[ax] = 0;
    for (int i = 0; i < n->nin; i++) {
        for (int d = 0; d < nd; d++)
            if (d != ax && in[i]->shape[d] != shape[d])
                return tg_errorf(ctx, TG_ESHAPE,
                                 "all the input array dimensions except for "
                                 "the concatenation axis must match exactly, "
                                 "but along dimension %d, the array at index "
                                 "0 has size %lld and the array at index %d "
                                 "has size %lld",
                                 d, (long long)shape[d], i,
                                 (long long)in[i]->shape[d]);
        shape[ax] += in[i]->shape[ax];
    }
    tg_dtype dt = n->outputs[0]->type.dtype;
    int rc = tg_array_prepare(out, dt, nd, shape, ctx);
    if (rc) return rc;
    tg_array *o = *out;
    int64_t off = 0;
    for (int i = 0; i < n->nin; i++) {
        if (tg_array_size_inline(in[i]) > 0) {
            tg_array *v = tg_array_view_raw(o, dt, nd, in[i]->shape, o->strides,
                                            o->data + off * o->strides[ax]);
            if (!v) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
            rc = tg_array_assign(v, in[i], ctx);
            tg_array_free(v);
            if (rc) return rc;
        }
        off += in[i]->shape[ax];
    }
    return TG_OK;
}

static int stack_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt;
    int rc = join_dtype(n, 0, &dt, ctx);
    if (rc) return rc;
    const tg_type *t0 = &n->inputs[0]->type;
    int nd = t0->ndim, ax = 0;
    if (nd + 1 > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ESHAPE,
                         "the result would have %d dimensions, at most %d are "
                         "supported",
                         nd + 1, TG_MAX_NDIM);
    if ((rc = norm_axis(n->a.axes[0], nd + 1, &ax, ctx))) return rc;
    int64_t shape[TG_MAX_NDIM];
    memcpy(shape, t0->shape, sizeof shape);
    for (int i = 1; i < n->nin; i++) {
        const tg_type *t = &n->inputs[i]->type;
        if (t->ndim != nd)
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s': has %d dimensions, inputs[0] "
                             "'%s' has %d: all must have the same shape",
                             i, n->inputs[i]->id, t->ndim, n->inputs[0]->id,
                             nd);
        for (int d = 0; d < nd; d++) {
            if (shape[d] >= 0 && t->shape[d] >= 0 && shape[d] != t->shape[d])
                return tg_errorf(ctx, TG_ESHAPE,
                                 "inputs[%d] '%s': length %lld in dimension "
                                 "%d, but %lld in an earlier input (all must "
                                 "have the same shape)",
                                 i, n->inputs[i]->id, (long long)t->shape[d],
                                 d, (long long)shape[d]);
            if (shape[d] < 0) shape[d] = t->shape[d];
        }
    }
    int64_t os[TG_MAX_NDIM];
    for (int d = 0, k = 0; d <= nd; d++)
        os[d] = d == ax ? n->nin : shape[k++];
    tg_set_out_type(n, 0, dt, nd + 1, os);
    return TG_OK;
}

static int stack_run(tg_node *n, tg_array *const *in, tg_array **out,
                     tg_ctx *ctx) {
    int nd = in[0]->ndim;
    int ax = n->a.axes[0] < 0 ? n->a.axes[0] + nd + 1 : n->a.axes[0];
    for (int i = 1; i < n->nin; i++)
        if (in[i]->ndim != nd || !tg_shape_equal(nd, in[i]->shape, in[0]->shape)) {
            char s1[200], s2[200];
            tg_shape_str(in[0]->ndim, in[0]->shape, s1, sizeof s1);
            tg_shape_str(in[i]->ndim, in[i]->shape, s2, sizeof s2);
            return tg_errorf(ctx, TG_ESHAPE,
                             "all input arrays must have the same shape: %s "
                             "at index 0, %s at index %d",
                             s1, s2, i);
        }
    int64_t shape[TG_MAX_NDIM];
    for (int d = 0, k = 0; d <= nd; d++)
        shape[d] = d == ax ? n->nin : in[0]->shape[k++];
    tg_dtype dt = n->outputs[0]->type.dtype;
    int rc = tg_array_prepare(out, dt, nd + 1, shape, ctx);
    if (rc) return rc;
    tg_array *o = *out;
    if (tg_array_size_inline(o) == 0) return TG_OK;
    int64_t st[TG_MAX_NDIM];
    for (int d = 0, k = 0; d <= nd; d++)
        if (d != ax) st[k++] = o->strides[d];
    for (int i = 0; i < n->nin; i++) {
        tg_array *v = tg_array_view_raw(o, dt, nd, in[0]->shape, st,
                                        o->data + i * o->strides[ax]);
        if (!v) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        rc = tg_array_assign(v, in[i], ctx);
        tg_array_free(v);
        if (rc) return rc;
    }
    return TG_OK;
}

const tg_op tg_op_join = {
    .name = "join", .nin_min = 1, .nin_max = -1, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = axis_required_parse,
    .infer = join_infer, .run = join_run, .cost = cost_copy, .view_of = -1, .grad = tg_grad_build};

const tg_op tg_op_stack = {
    .name = "stack", .nin_min = 1, .nin_max = -1, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = axis_required_parse,
    .infer = stack_infer, .run = stack_run, .cost = cost_copy, .view_of = -1, .grad = tg_grad_build};

/* ---- split ---- */

static const char *const keys_split[] = {"axis", "n", NULL};

static int split_parse(tg_node *n, tg_ctx *ctx) {
    int rc = tg_attr_axis(n, "axis", false, false, false, ctx);
    if (rc || (rc = tg_attr_int(n, "n", false, 0, &n->a.i, ctx))) return rc;
    if (n->a.i < 1 || n->a.i != n->nout)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.n: %lld, but the node lists %d output%s (n "
                         "must be at least 1 and equal the number of "
                         "outputs)",
                         (long long)n->a.i, n->nout, n->nout == 1 ? "" : "s");
    return TG_OK;
}

static int split_infer(tg_node *n, tg_ctx *ctx) {
    char buf[160];
    const tg_var *x = n->inputs[0];
    tg_var *s = n->inputs[1];
    if (s->type.ndim != 1 || !tg_dtype_is_int(s->type.dtype))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': expected an integer vector of "
                         "sizes, got %s",
                         s->id, type_s(s, buf, sizeof buf));
    if (s->type.shape[0] >= 0 && s->type.shape[0] != n->a.i)
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[1] '%s': %lld sizes for %lld outputs", s->id,
                         (long long)s->type.shape[0], (long long)n->a.i);
    if (x->type.ndim == 0)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[0] '%s': cannot split a 0-d array", x->id);
    int ax = 0, rc;
    if ((rc = norm_axis(n->a.axes[0], x->type.ndim, &ax, ctx))) return rc;
    const tg_array *c = tg_const_input(n, 1);
    int64_t sum = 0;
    bool big = false;
    for (int i = 0; i < n->nout; i++) {
        int64_t shape[TG_MAX_NDIM];
        memcpy(shape, x->type.shape, sizeof shape);
        shape[ax] = -1;
        if (c) {
            int64_t v = tg_load_len(c->dtype, c->data + i * c->strides[0]);
            if (v < 0)
                return tg_errorf(ctx, TG_ESHAPE,
                                 "inputs[1] '%s': size %d is negative (%lld)",
                                 s->id, i, (long long)v);
            shape[ax] = v;
            big |= __builtin_add_overflow(sum, v, &sum);
        }
        tg_set_out_type(n, i, x->type.dtype, x->type.ndim, shape);
    }
    if (c && x->type.shape[ax] >= 0 && big)
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[1] '%s': the sizes sum past 2^63 - 1, but axis "
                         "%d of inputs[0] '%s' has length %lld",
                         s->id, ax, x->id, (long long)x->type.shape[ax]);
    if (c && x->type.shape[ax] >= 0 && sum != x->type.shape[ax])
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[1] '%s': the sizes sum to %lld, but axis %d "
                         "of inputs[0] '%s' has length %lld",
                         s->id, (long long)sum, ax, x->id,
                         (long long)x->type.shape[ax]);
    return TG_OK;
}

/* An integer input exactly: a uint64 past 2^63 - 1 is not the negative
 * int64 of its bits. */
typedef __int128 i128;
static i128 load_int(const tg_array *a) {
    return a->dtype == TG_UINT64 ? (i128) * (const uint64_t *)a->data : (i128)tg_load_i64(a->dtype, a->data);
}

static const char *i128_text(i128 v, char *buf, size_t size) {
    char t[48];
    int n = 0;
    unsigned __int128 m = v < 0 ? (unsigned __int128)0 - (unsigned __int128)v : (unsigned __int128)v;
    do t[n++] = (char)('0' + (int)(m % 10)); while ((m /= 10) && n < 46);
    if (v < 0) t[n++] = '-';
    size_t k = 0;
    while (n > 0 && k + 1 < size) buf[k++] = t[--n];
    buf[k] = 0;
    return buf;
}

static int split_run(tg_node *n, tg_array *const *in, tg_array **out,
                     tg_ctx *ctx) {
    const tg_array *x = in[0], *s = in[1];
    int ax = n->a.axes[0] < 0 ? n->a.axes[0] + x->ndim : n->a.axes[0];
    if (s->shape[0] != n->nout)
        return tg_errorf(ctx, TG_ESHAPE, "%lld sizes for %d outputs",
                         (long long)s->shape[0], n->nout);
    /* The sum exactly, a uint64 size as given (it may pass int64). */
    i128 sum = 0;
    for (int i = 0; i < n->nout; i++) {
        int64_t v = tg_load_len(s->dtype, s->data + i * s->strides[0]);
        if (v < 0)
            return tg_errorf(ctx, TG_ESHAPE, "split size %d is negative (%lld)",
                             i, (long long)v);
        sum += s->dtype == TG_UINT64 ? (i128) * (const uint64_t *)(const void *)(s->data + i * s->strides[0])
                                     : (i128)v;
    }
    if (sum != x->shape[ax]) {
        char b[48];
        return tg_errorf(ctx, TG_ESHAPE,
                         "the split sizes sum to %s, but axis %d has length "
                         "%lld",
                         i128_text(sum, b, sizeof b), ax, (long long)x->shape[ax]);
    }
    int64_t off = 0;
    for (int i = 0; i < n->nout; i++) {
        int64_t v = tg_load_len(s->dtype, s->data + i * s->strides[0]);
        int64_t shape[TG_MAX_NDIM];
        memcpy(shape, x->shape, sizeof shape);
        shape[ax] = v;
        int rc = tg_shape_store_view(&out[i], x, x->ndim, shape, x->strides,
                                     x->data + (v ? off * x->strides[ax] : 0),
                                     ctx);
        if (rc) return rc;
        off += v;
    }
    return TG_OK;
}

const tg_op tg_op_split = {
    .name = "split", .nin_min = 2, .nin_max = 2, .nout = -1,
    .attr_keys = keys_split, .parse_attrs = split_parse, .infer = split_infer,
    .run = split_run, .cost = tg_shape_cost_view, .view_of = 0, .grad = tg_grad_build};

/* ---- alloc ---- */

static int alloc_infer(tg_node *n, tg_ctx *ctx) {
    tg_var *v = n->inputs[0];
    int k = n->nin - 1, rc;
    if (k > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD,
                         "%d dimensions, at most %d are supported", k,
                         TG_MAX_NDIM);
    if (v->weak) {
        tg_dtype dt;
        if ((rc = tg_weak_resolve(n, 0, 1, &dt, ctx))) return rc;
    }
    if (v->type.ndim > k)
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[0] '%s': has %d dimensions, more than the %d "
                         "lengths given",
                         v->id, v->type.ndim, k);
    int64_t shape[TG_MAX_NDIM];
    for (int i = 0; i < k; i++) {
        if ((rc = want_int_scalar(n, i + 1, ctx))) return rc;
        shape[i] = const_len(n, i + 1);
        int j = i - (k - v->type.ndim);
        int64_t vl = j >= 0 ? v->type.shape[j] : 1;
        if (vl > 1 || vl == 0) {
            if (shape[i] >= 0 && shape[i] != vl)
                return tg_errorf(ctx, TG_ESHAPE,
                                 "inputs[0] '%s': length %lld in dimension "
                                 "%d does not broadcast to %lld",
                                 v->id, (long long)vl, j, (long long)shape[i]);
            shape[i] = vl;
        }
    }
    tg_set_out_type(n, 0, v->type.dtype, k, shape);
    return TG_OK;
}

static int alloc_run(tg_node *n, tg_array *const *in, tg_array **out,
                     tg_ctx *ctx) {
    const tg_array *v = in[0];
    int k = n->nin - 1;
    int64_t shape[TG_MAX_NDIM];
    for (int i = 0; i < k; i++) {
        unsigned long long u;
        if (tg_shape_len_too_large(in[i + 1]->dtype, in[i + 1]->data, &u))
            return tg_errorf(ctx, TG_ESHAPE,
                             "length %llu for dimension %d is too large (more "
                             "than 2^63 - 1)",
                             u, i);
        shape[i] = tg_load_len(in[i + 1]->dtype, in[i + 1]->data);
        if (shape[i] < 0)
            return tg_errorf(ctx, TG_ESHAPE,
                             "negative dimensions are not allowed (length "
                             "%lld for dimension %d)",
                             (long long)shape[i], i);
    }
    bool ok = v->ndim <= k;
    for (int j = 0; ok && j < v->ndim; j++) {
        int64_t l = v->shape[j], d = shape[j + k - v->ndim];
        ok = l == 1 || l == d;
    }
    if (!ok) {
        char s1[200], s2[200];
        tg_shape_str(v->ndim, v->shape, s1, sizeof s1);
        tg_shape_str(k, shape, s2, sizeof s2);
        return tg_errorf(ctx, TG_ESHAPE,
                         "could not broadcast input array from shape %s into "
                         "shape %s",
                         s1, s2);
    }
    int rc = tg_array_prepare(out, v->dtype, k, shape, ctx);
    if (rc) return rc;
    int64_t size = tg_array_size_inline(*out);
    if (size == 0) return TG_OK;
    if (tg_array_size_inline(v) == 1) {
        fill_bytes(out[0]->data, v->data, tg_isize(v->dtype), size);
        return TG_OK;
    }
    return tg_array_assign(*out, v, ctx);
}

const tg_op tg_op_alloc = {
    .name = "alloc", .nin_min = 1, .nin_max = -1, .nout = 1,
    .infer = alloc_infer, .run = alloc_run, .cost = cost_write,
    .view_of = -1, .grad = tg_grad_build};

/* ---- zeros_like, ones_like ---- */

static int like_infer(tg_node *n, tg_ctx *ctx) {
    const tg_var *x = n->inputs[0];
    if (x->weak) {
        tg_dtype dt;
        int rc = tg_weak_resolve(n, 0, 1, &dt, ctx);
        if (rc) return rc;
    }
    tg_set_out_type(n, 0, x->type.dtype, x->type.ndim, x->type.shape);
    return TG_OK;
}

static int like_run(tg_node *n, tg_array *const *in, tg_array **out,
                    tg_ctx *ctx) {
    const tg_array *x = in[0];
    int rc = tg_array_prepare(out, x->dtype, x->ndim, x->shape, ctx);
    if (rc) return rc;
    int64_t size = tg_array_size_inline(*out);
    size_t isz = tg_isize(x->dtype);
    if (n->op->impl == NULL) {
        memset(out[0]->data, 0, (size_t)size * isz);
    } else {
        char one[8];
        tg_store_f64(x->dtype, one, 1.0);
        fill_bytes(out[0]->data, one, isz, size);
    }
    return TG_OK;
}

static const int ones_mark = 1;

const tg_op tg_op_zeros_like = {
    .name = "zeros_like", .nin_min = 1, .nin_max = 1, .nout = 1,
    .flags = TG_OPF_NONDIFF, .infer = like_infer, .run = like_run,
    .cost = cost_write, .view_of = -1};

const tg_op tg_op_ones_like = {
    .name = "ones_like", .nin_min = 1, .nin_max = 1, .nout = 1,
    .flags = TG_OPF_NONDIFF, .infer = like_infer, .run = like_run,
    .cost = cost_write, .view_of = -1, .impl = &ones_mark};

/* ---- arange ---- */

static const char *const keys_dtype[] = {"dtype", NULL};

/* The dtype attr's default depends on the inputs' dtypes, so parse only
 * records whether it was given; infer writes the default. */
static int arange_parse(tg_node *n, tg_ctx *ctx) {
    json_object *v;
    n->a.flag = tg_shape_attr_get(n, "dtype", &v);
    if (!n->a.flag) return TG_OK;
    int rc = tg_attr_dtype(n, "dtype", TG_DTYPE_INVALID, &n->a.dtype, ctx);
    if (rc) return rc;
    if (n->a.dtype == TG_BOOL)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.dtype: expected a numeric dtype, got bool");
    return TG_OK;
}

static bool is_num(tg_dtype dt) { return dt != TG_BOOL; }

static double load_num(const tg_array *a) {
    return tg_load_f64(a->dtype, a->data);
}

/* NumPy's length: ceil((stop - start) / step), at least 0; exact for
 * integers, in 128-bit arithmetic (stop - start may not fit int64, and a
 * uint64 input may pass it).
 * ARANGE_ZERO_STEP for a zero step; ARANGE_NO_LENGTH where NumPy says
 * "cannot compute length" or overflows: a NaN or infinite quotient, or a
 * length past int64. */
enum { ARANGE_ZERO_STEP = -1, ARANGE_NO_LENGTH = -2 };
static int64_t arange_len(bool ints, i128 i0, i128 i1, i128 is, double f0, double f1,
                          double fs) {
    if (ints) {
        if (is == 0) return ARANGE_ZERO_STEP;
        if ((is > 0 && i1 <= i0) || (is < 0 && i1 >= i0)) return 0;
        i128 d = is > 0 ? i1 - i0 : i0 - i1, st = is > 0 ? is : -is;
        i128 len = d / st + (d % st != 0);
        return len > INT64_MAX ? ARANGE_NO_LENGTH : (int64_t)len;
    }
    if (fs == 0) return ARANGE_ZERO_STEP;
    double q = (f1 - f0) / fs;
    /* NumPy's "underflow and divide-by-inf check": a zero quotient of a
     * non-zero distance is one element, or none when it is -0 (the step
     * points away from stop). */
    if (q == 0 && f1 - f0 != 0) return signbit(q) ? 0 : 1;
    double l = ceil(q);
    if (!(fabs(l) < 0x1p63)) return ARANGE_NO_LENGTH; /* (NaN too) */
    return l > 0 ? (int64_t)l : 0;
}

static int arange_infer(tg_node *n, tg_ctx *ctx) {
    char buf[160];
    bool ints = true;
    for (int i = 0; i < 3; i++) {
        tg_var *v = n->inputs[i];
        if (v->type.ndim != 0 || !is_num(v->type.dtype))
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s': expected a numeric scalar, got "
                             "%s",
                             i, v->id, type_s(v, buf, sizeof buf));
        if (v->weak) {
            int rc = tg_weak_take(n, i, v->type.dtype, ctx);
            if (rc) return rc;
        }
        if (!tg_dtype_is_int(v->type.dtype)) ints = false;
    }
    if (!n->a.flag) {
        n->a.dtype = ints ? TG_INT64 : TG_FLOAT64;
        int rc = tg_shape_attr_put(
            n, "dtype", json_object_new_string(tg_dtype_name(n->a.dtype)), ctx);
        if (rc) return rc;
        n->a.flag = true;
    }
    int64_t len = -1;
    const tg_array *c[3] = {tg_const_input(n, 0), tg_const_input(n, 1),
                            tg_const_input(n, 2)};
    if (c[0] && c[1] && c[2]) {
        len = arange_len(ints, load_int(c[0]), load_int(c[1]), load_int(c[2]), load_num(c[0]),
                         load_num(c[1]), load_num(c[2]));
        if (len < 0) len = -1; /* unknown: the run says why */
    }
    tg_set_out_type(n, 0, n->a.dtype, 1, &len);
    return TG_OK;
}

static int arange_run(tg_node *n, tg_array *const *in, tg_array **out,
                      tg_ctx *ctx) {
    bool ints = true;
    for (int i = 0; i < 3; i++)
        if (!tg_dtype_is_int(in[i]->dtype)) ints = false;
    i128 w0 = ints ? load_int(in[0]) : 0, w1 = ints ? load_int(in[1]) : 0;
    i128 ws = ints ? load_int(in[2]) : 0;
    double f0 = load_num(in[0]), f1 = load_num(in[1]), fs = load_num(in[2]);
    int64_t len = arange_len(ints, w0, w1, ws, f0, f1, fs);
    if (len == ARANGE_ZERO_STEP) return tg_errorf(ctx, TG_ERUNTIME, "arange: step is zero");
    if (len < 0 && ints) {
        char b0[48], b1[48], bs[48];
        return tg_errorf(ctx, TG_ERUNTIME,
                         "arange: cannot compute the length of start %s to stop %s by step %s "
                         "(more than 2^63 - 1 elements)",
                         i128_text(w0, b0, sizeof b0), i128_text(w1, b1, sizeof b1),
                         i128_text(ws, bs, sizeof bs));
    }
    /* the values in 64 bits, wrapping into the result dtype as a cast */
    int64_t i0 = (int64_t)(uint64_t)w0, is = (int64_t)(uint64_t)ws;
    if (len < 0)
        return tg_errorf(ctx, TG_ERUNTIME,
                         "arange: cannot compute the length of start %.17g to stop %.17g by "
                         "step %.17g (not finite, or more than 2^63 elements)",
                         f0, f1, fs);
    tg_dtype dt = n->a.dtype;
    /* Floats into an integer dtype: start and, when there is one, its
     * second value must fit int64 (NumPy's cast would overflow). */
    if (!ints && !tg_dtype_is_float(dt) && len > 0 &&
        !(fabs(f0) < 0x1p63 && (len == 1 || fabs(f0 + fs) < 0x1p63)))
        return tg_errorf(ctx, TG_ERUNTIME, "arange: start %.17g or start + step %.17g does not fit %s",
                         f0, f0 + fs, tg_dtype_name(dt));
    /* (the integers' second value, wrapping as NumPy's int64 does) */
    int64_t i01 = (int64_t)((uint64_t)i0 + (uint64_t)is);
    int rc = tg_array_prepare(out, dt, 1, &len, ctx);
    if (rc || len == 0) return rc;
    char *d = out[0]->data;
    /* As NumPy: the first two values in the result dtype, then
     * start + i * (second - first) in that dtype's arithmetic; the first
     * is start itself (-0.0 stays -0.0) and, with one element, the second
     * is never formed (an infinite step gives [start]). */
    switch (dt) {
    case TG_FLOAT64: {
        double *p = (double *)(void *)d, a = ints ? (double)i0 : f0;
        double b = len < 2 ? a : ints ? (double)i01 : f0 + fs, delta = b - a;
        p[0] = a;
        for (int64_t i = 1; i < len; i++) p[i] = a + (double)i * delta;
        break;
    }
    case TG_FLOAT32:
    case TG_FLOAT16: {
        float a = ints ? (float)i0 : (float)f0;
        float b = len < 2 ? a : ints ? (float)i01 : (float)(f0 + fs);
        if (dt == TG_FLOAT16) {
            a = tg_half_to_float(tg_float_to_half(a));
            b = tg_half_to_float(tg_float_to_half(b));
        }
        float delta = b - a;
        for (int64_t i = 0; i < len; i++) {
            float v = i == 0 ? a : a + (float)i * delta;
            if (dt == TG_FLOAT32) ((float *)(void *)d)[i] = v;
            else ((uint16_t *)(void *)d)[i] = tg_float_to_half(v);
        }
        break;
    }
    default: {
        int64_t a = ints ? i0 : (int64_t)f0;
        int64_t b = len < 2 ? a : ints ? i01 : (int64_t)(f0 + fs);
        uint64_t delta = (uint64_t)b - (uint64_t)a;
        size_t isz = tg_isize(dt);
        for (int64_t i = 0; i < len; i++)
            tg_store_i64(dt, d + i * (int64_t)isz,
                         (int64_t)((uint64_t)a + (uint64_t)i * delta));
        break;
    }
    }
    return TG_OK;
}

const tg_op tg_op_arange = {
    .name = "arange", .nin_min = 3, .nin_max = 3, .nout = 1,
    .attr_keys = keys_dtype,
    .parse_attrs = arange_parse, .infer = arange_infer, .run = arange_run,
    .cost = cost_write, .view_of = -1, .grad = tg_grad_build};

/* ---- eye ---- */

static int eye_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_dtype(n, "dtype", TG_FLOAT64, &n->a.dtype, ctx);
}

static int eye_infer(tg_node *n, tg_ctx *ctx) {
    for (int i = 0; i < 3; i++) {
        int rc = want_int_scalar(n, i, ctx);
        if (rc) return rc;
    }
    int64_t shape[2] = {const_len(n, 0), const_len(n, 1)};
    tg_set_out_type(n, 0, n->a.dtype, 2, shape);
    return TG_OK;
}

static int eye_run(tg_node *n, tg_array *const *in, tg_array **out,
                   tg_ctx *ctx) {
    int64_t shape[2], k = tg_load_len(in[2]->dtype, in[2]->data);
    for (int i = 0; i < 2; i++) {
        unsigned long long u;
        if (tg_shape_len_too_large(in[i]->dtype, in[i]->data, &u))
            return tg_errorf(ctx, TG_ESHAPE,
                             "length %llu for dimension %d is too large (more "
                             "than 2^63 - 1)",
                             u, i);
        shape[i] = tg_load_len(in[i]->dtype, in[i]->data);
        if (shape[i] < 0)
            return tg_errorf(ctx, TG_ESHAPE,
                             "negative dimensions are not allowed (%lld)",
                             (long long)shape[i]);
    }
    tg_dtype dt = n->a.dtype;
    int rc = tg_array_prepare(out, dt, 2, shape, ctx);
    if (rc) return rc;
    size_t isz = tg_isize(dt);
    char *d = out[0]->data, one[8];
    memset(d, 0, (size_t)(shape[0] * shape[1]) * isz);
    tg_store_f64(dt, one, 1.0);
    /* the diagonal k is any int64 (a uint64 saturates): only rows whose
       column i + k lies in [0, cols) are written, without forming i + k
       out of range */
    if (k < shape[1] && k > -shape[0]) {
        for (int64_t i = k < 0 ? -k : 0; i < shape[0] && i < shape[1] - k;
             i++)
            memcpy(d + (i * shape[1] + i + k) * (int64_t)isz, one, isz);
    }
    return TG_OK;
}

const tg_op tg_op_eye = {
    .name = "eye", .nin_min = 3, .nin_max = 3, .nout = 1,
    .flags = TG_OPF_NONDIFF, .attr_keys = keys_dtype, .parse_attrs = eye_parse,
    .infer = eye_infer, .run = eye_run, .cost = cost_write, .view_of = -1};

/* ---- repeat ---- */

static int repeat_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_axis(n, "axis", true, false, true, ctx);
}

static int repeat_infer(tg_node *n, tg_ctx *ctx) {
    char buf[160];
    const tg_var *x = n->inputs[0];
    tg_var *r = n->inputs[1];
    int rc;
    if (x->weak) {
        tg_dtype dt;
        if ((rc = tg_weak_resolve(n, 0, 1, &dt, ctx))) return rc;
    }
    if (r->weak && tg_dtype_is_int(r->type.dtype) &&
        (rc = tg_weak_take(n, 1, TG_INT64, ctx)))
        return rc;
    if (r->type.ndim > 1 || !tg_dtype_is_int(r->type.dtype))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': expected an integer scalar or "
                         "vector of repeats, got %s",
                         r->id, type_s(r, buf, sizeof buf));
    int nd = x->type.ndim, ax = 0;
    int64_t len;
    if (n->a.axis_null) {
        len = static_prod(0, nd, x->type.shape);
    } else {
        if ((rc = norm_axis(n->a.axes[0], nd, &ax, ctx))) return rc;
        len = x->type.shape[ax];
    }
    int64_t rl = r->type.ndim ? r->type.shape[0] : 1;
    if (r->type.ndim && rl >= 0 && rl != 1 && len >= 0 && rl != len)
        return tg_errorf(ctx, TG_ESHAPE,
                         "inputs[1] '%s': %lld repeats for an axis of length "
                         "%lld",
                         r->id, (long long)rl, (long long)len);
    int64_t out_len = -1;
    const tg_array *c = tg_const_input(n, 1);
    if (c) {
        int64_t m = tg_array_size_inline(c), sum = 0;
        bool neg = false;
        bool big = false;
        for (int64_t i = 0; i < m; i++) {
            int64_t v = tg_load_len(c->dtype, c->data + i * (c->ndim ? c->strides[0] : 0));
            if (v < 0) neg = true;
            else big |= __builtin_add_overflow(sum, v, &sum);
        }
        if (neg)
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[1] '%s': repeats may not contain "
                             "negative values",
                             r->id);
        if (m == 1 && len >= 0) big |= __builtin_mul_overflow(len, sum, &out_len);
        else if (m != 1) out_len = sum;
        if (big)
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[1] '%s': the repeats make more than 2^63 - 1 "
                             "elements",
                             r->id);
    }
    if (n->a.axis_null) {
        tg_set_out_type(n, 0, x->type.dtype, 1, &out_len);
    } else {
        int64_t shape[TG_MAX_NDIM];
        memcpy(shape, x->type.shape, sizeof shape);
        shape[ax] = out_len;
        tg_set_out_type(n, 0, x->type.dtype, nd, shape);
    }
    return TG_OK;
}

static int repeat_run(tg_node *n, tg_array *const *in, tg_array **out,
                      tg_ctx *ctx) {
    const tg_array *x = in[0], *r = in[1];
    tg_array *tmp = NULL;
    int64_t *rep = NULL;
    int rc = TG_OK;
    int nd = x->ndim, ax = 0;
    int64_t outer, len, post;
    if (n->a.axis_null) {
        outer = 1;
        len = tg_array_size_inline(x);
        post = 1;
    } else {
        ax = n->a.axes[0] < 0 ? n->a.axes[0] + nd : n->a.axes[0];
        outer = prod(0, ax, x->shape);
        len = x->shape[ax];
        post = prod(ax + 1, nd, x->shape);
    }
    int64_t m = r->ndim ? r->shape[0] : 1;
    if (m != 1 && m != len)
        return tg_errorf(ctx, TG_ESHAPE,
                         "operands could not be broadcast together with shape "
                         "(%lld,) (%lld,)",
                         (long long)len, (long long)m);
    if (len > 0 && !(rep = tg_malloc((size_t)len * sizeof *rep)))
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    int64_t total = 0;
    for (int64_t j = 0; j < len; j++) {
        const char *p = r->data + (m == 1 ? 0 : j * r->strides[0]);
        rep[j] = tg_load_len(r->dtype, p);
        if (rep[j] < 0) {
            rc = tg_errorf(ctx, TG_ESHAPE,
                           "repeats may not contain negative values");
            goto done;
        }
        if (__builtin_add_overflow(total, rep[j], &total)) {
            rc = tg_errorf(ctx, TG_ESHAPE, "the repeats make more than 2^63 - 1 elements");
            goto done;
        }
    }
    if (m == 1 && len == 0 && tg_load_len(r->dtype, r->data) < 0) {
        rc = tg_errorf(ctx, TG_ESHAPE, "repeats may not contain negative values");
        goto done;
    }
    int64_t shape[TG_MAX_NDIM];
    int ond = n->a.axis_null ? 1 : nd;
    if (n->a.axis_null) {
        shape[0] = total;
    } else {
        memcpy(shape, x->shape, sizeof shape);
        shape[ax] = total;
    }
    if ((rc = tg_array_prepare(out, x->dtype, ond, shape, ctx))) goto done;
    if (outer * total * post == 0) goto done;
    const tg_array *xc = contiguous(x, &tmp, ctx);
    if (!xc) {
        rc = TG_ENOMEM;
        goto done;
    }
    size_t blk = (size_t)post * tg_isize(x->dtype);
    const char *src = xc->data;
    char *dst = out[0]->data;
    TG_PAR_FOR(outer * total * post >= TG_PARALLEL_MIN && outer > 1 ? omp_get_max_threads() : 1, o, outer, {
        char *d = dst + o * total * (int64_t)blk;
        for (int64_t j = 0; j < len; j++) {
            const char *s = src + (o * len + j) * (int64_t)blk;
            for (int64_t t = 0; t < rep[j]; t++, d += blk) memcpy(d, s, blk);
        }
    });
done:
    tg_array_free(tmp);
    tg_free(rep);
    return rc;
}

const tg_op tg_op_repeat = {
    .name = "repeat", .nin_min = 2, .nin_max = 2, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = repeat_parse,
    .infer = repeat_infer, .run = repeat_run, .cost = cost_copy,
    .view_of = -1, .grad = tg_grad_build};
