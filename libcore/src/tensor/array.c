/* Arrays: buffers, headers, views, copies. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor.h"

/* ---- buffers ---- */

tg_buffer *tg_buffer_new(size_t nbytes) {
    tg_buffer *b = tg_bufpool_take(nbytes); /* NULL outside a call */
    if (b) return b;
    b = tg_malloc(sizeof *b);
    if (!b) return NULL;
    b->data = tg_malloc_aligned(nbytes ? nbytes : 1);
    if (!b->data) {
        tg_free(b);
        return NULL;
    }
    atomic_init(&b->refcount, 1);
    b->nbytes = nbytes;
    b->release = NULL;
    b->release_ud = NULL;
    return b;
}

void tg_buffer_unref(tg_buffer *b) {
    if (!b) return;
    if (atomic_fetch_sub_explicit(&b->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (b->release) {
        b->release(b);
    } else {
        if (tg_bufpool_put(b)) return; /* a call is running: kept for it */
        tg_free_aligned(b->data);
    }
    tg_free(b);
}

void tg_window_release(tg_buffer *b) {
    tg_window *w = b->release_ud;
    tg_buffer_unref(w->base);
    tg_free(w);
}

tg_array *tg_window_array(const tg_array *base, char *data, tg_dtype dt, int ndim,
                          const int64_t *shape) {
    tg_window *w = tg_malloc(sizeof *w);
    tg_buffer *b = tg_malloc(sizeof *b);
    tg_array *a = tg_malloc(sizeof *a);
    int64_t n = tg_shape_size(ndim, shape), nb;
    if (!w || !b || !a || n < 0 || __builtin_mul_overflow(n, (int64_t)tg_isize(dt), &nb)) {
        tg_free(w);
        tg_free(b);
        tg_free(a);
        return NULL;
    }
    atomic_fetch_add_explicit(&base->buf->refcount, 1, memory_order_relaxed);
    w->base = base->buf;
    w->armed = false;
    atomic_init(&b->refcount, 1);
    b->data = data;
    b->nbytes = (size_t)nb;
    b->release = tg_window_release;
    b->release_ud = w;
    atomic_init(&a->refcount, 1);
    a->dtype = dt;
    a->ndim = ndim;
    memcpy(a->shape, shape, sizeof(int64_t) * (size_t)ndim);
    tg_strides_contiguous(dt, ndim, shape, a->strides);
    a->data = data;
    a->buf = b;
    return a;
}

/* ---- headers ---- */

/* The element count, or -1 for a negative extent or a count that does not
 * fit.  As in NumPy, a zero extent does not excuse the others: (2^40, 2^40,
 * 0) is too big, since its strides could not be written down. */
int64_t tg_shape_size(int ndim, const int64_t *shape) {
    int64_t n = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] == 0) {
            zero = true;
            continue;
        }
        if (__builtin_mul_overflow(n, shape[i], &n)) return -1;
    }
    return zero ? 0 : n;
}

void tg_strides_contiguous(tg_dtype dt, int ndim, const int64_t *shape,
                           int64_t *strides) {
    int64_t s = (int64_t)tg_dtype_size(dt);
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        /* saturate rather than overflow: only a shape no array can have
         * gets here, and its caller refuses it by its byte count */
        if (__builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s))
            s = INT64_MAX;
    }
}

/* NumPy's "array is too big": the item size times every extent but the
 * zeros must fit int64, an empty array's too ((0, 2^63 - 1) of float64
 * is refused), so that its strides can be written down. */
static bool extents_fit(tg_dtype dt, int ndim, const int64_t *shape) {
    int64_t b = (int64_t)tg_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || (shape[i] > 0 && __builtin_mul_overflow(b, shape[i], &b)))
            return false;
    return true;
}

tg_array *tg_array_empty(tg_dtype dt, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TG_MAX_NDIM || (int)dt < 0 || dt >= TG_NDTYPES)
        return NULL;
    int64_t n = tg_shape_size(ndim, shape), nbytes;
    if (n < 0 || !extents_fit(dt, ndim, shape) ||
        __builtin_mul_overflow(n, (int64_t)tg_dtype_size(dt), &nbytes))
        return NULL;
    tg_array *a = tg_malloc(sizeof *a);
    if (!a) return NULL;
    a->buf = tg_buffer_new((size_t)nbytes);
    if (!a->buf) {
        tg_free(a);
        return NULL;
    }
    atomic_init(&a->refcount, 1);
    a->dtype = dt;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) a->shape[i] = shape[i];
    tg_strides_contiguous(dt, ndim, shape, a->strides);
    a->data = a->buf->data;
    return a;
}

tg_array *tg_array_new(tg_dtype dt, int ndim, const int64_t *shape) {
    tg_array *a = tg_array_empty(dt, ndim, shape);
    if (a) memset(a->data, 0, a->buf->nbytes);
    return a;
}

tg_array *tg_array_new_from(tg_dtype dt, int ndim, const int64_t *shape,
                            const void *data) {
    if (!data) return tg_array_new(dt, ndim, shape);
    tg_array *a = tg_array_empty(dt, ndim, shape);
    if (a && a->buf->nbytes) memcpy(a->data, data, a->buf->nbytes);
    return a;
}

tg_array *tg_array_new_scalar(tg_dtype dt, double v) {
    tg_array *a = tg_array_empty(dt, 0, NULL);
    if (a) tg_store_f64(dt, a->data, v);
    return a;
}

tg_array *tg_array_view_raw(const tg_array *a, tg_dtype dt, int ndim,
                            const int64_t *shape, const int64_t *strides,
                            char *data) {
    tg_array *v = tg_malloc(sizeof *v);
    if (!v) return NULL;
    atomic_init(&v->refcount, 1);
    v->dtype = dt;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = shape[i];
        v->strides[i] = strides[i];
    }
    v->data = data;
    v->buf = a->buf;
    atomic_fetch_add_explicit(&a->buf->refcount, 1, memory_order_relaxed);
    return v;
}

tg_array *tg_array_ref(tg_array *a) {
    if (a) atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
    return a;
}

void tg_array_free(tg_array *a) {
    if (!a) return;
    if (atomic_fetch_sub_explicit(&a->refcount, 1, memory_order_acq_rel) != 1)
        return;
    tg_buffer_unref(a->buf);
    tg_free(a);
}

tg_dtype tg_array_dtype(const tg_array *a) { return a->dtype; }
int tg_array_ndim(const tg_array *a) { return a->ndim; }
const int64_t *tg_array_shape(const tg_array *a) { return a->shape; }
const int64_t *tg_array_strides(const tg_array *a) { return a->strides; }
int64_t tg_array_size(const tg_array *a) { return tg_array_size_inline(a); }
void *tg_array_data(const tg_array *a) { return a->data; }

bool tg_array_is_contiguous(const tg_array *a) {
    int64_t s = (int64_t)tg_isize(a->dtype);
    for (int i = a->ndim - 1; i >= 0; i--) {
        if (a->shape[i] == 0) return true;
        if (a->shape[i] != 1 && a->strides[i] != s) return false;
        s *= a->shape[i];
    }
    return true;
}

const char *tg_array_elem_flat(const tg_array *a, int64_t i) {
    const char *p = a->data;
    for (int d = a->ndim - 1; d >= 0; d--) {
        int64_t len = a->shape[d];
        p += (i % len) * a->strides[d];
        i /= len;
    }
    return p;
}

double tg_array_get_flat(const tg_array *a, int64_t i) {
    return tg_load_f64(a->dtype, tg_array_elem_flat(a, i));
}

/* A reused buffer may be larger than needed; past 16 times the need (and
 * a few KiB) it is given back rather than pinned by a small result. */
int tg_array_prepare(tg_array **slot, tg_dtype dt, int ndim,
                     const int64_t *shape, tg_ctx *ctx) {
    tg_array *a = *slot;
    if ((unsigned)dt >= TG_NDTYPES || ndim < 0 || ndim > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_EINVAL, "cannot make an array of %d dimensions",
                         ndim);
    int64_t sz = tg_shape_size(ndim, shape);
    if (sz < 0 || !extents_fit(dt, ndim, shape))
        return tg_errorf(ctx, TG_ESHAPE, "invalid or too large array shape");
    if (a && tg_array_is_exclusive(a) &&
        (!a->buf->release || (tg_buffer_window(a->buf) && tg_buffer_window(a->buf)->armed))) {
        int64_t s = (int64_t)tg_isize(dt);
        int64_t need = s;
        bool ok = true;
        for (int i = 0; i < ndim; i++)
            ok &= shape[i] >= 0 && !__builtin_mul_overflow(need, shape[i], &need);
        size_t have = a->buf->nbytes;
        if (ok && (uint64_t)need <= have &&
            (have <= 4096 || (uint64_t)need >= have / 16)) {
            a->dtype = dt;
            a->ndim = ndim;
            for (int i = ndim - 1; i >= 0; i--) {
                a->shape[i] = shape[i];
                a->strides[i] = s;
                s *= shape[i] > 0 ? shape[i] : 1;
            }
            a->data = a->buf->data;
            if (a->buf->release) tg_buffer_window(a->buf)->armed = false; /* once */
            return TG_OK;
        }
    }
    tg_array *n = tg_array_empty(dt, ndim, shape);
    if (!n)
        return tg_errorf(ctx, TG_ENOMEM,
                         "cannot allocate an array of %lld elements of %s",
                         (long long)sz, tg_dtype_name(dt));
    tg_array_free(a);
    *slot = n;
    return TG_OK;
}

/* ---- views ---- */

tg_array *tg_array_view_transpose(const tg_array *a, const int *axes,
                                  tg_ctx *ctx) {
    int64_t shape[TG_MAX_NDIM], strides[TG_MAX_NDIM];
    bool seen[TG_MAX_NDIM] = {0};
    for (int i = 0; i < a->ndim; i++) {
        int ax = axes ? axes[i] : a->ndim - 1 - i;
        if (ax < 0) ax += a->ndim;
        if (ax < 0 || ax >= a->ndim || seen[ax]) {
            tg_errorf(ctx, TG_EINVAL, "axes do not form a permutation of %d axes",
                      a->ndim);
            return NULL;
        }
        seen[ax] = true;
        shape[i] = a->shape[ax];
        strides[i] = a->strides[ax];
    }
    tg_array *v = tg_array_view_raw(a, a->dtype, a->ndim, shape, strides, a->data);
    if (!v) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return v;
}

tg_array *tg_array_view_dimshuffle(const tg_array *a, int n, const int *order,
                                   tg_ctx *ctx) {
    int64_t shape[TG_MAX_NDIM], strides[TG_MAX_NDIM];
    bool used[TG_MAX_NDIM] = {0};
    if (n < 0 || n > TG_MAX_NDIM) {
        tg_errorf(ctx, TG_EINVAL, "dimshuffle to %d dimensions", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (order[i] == -1) {
            shape[i] = 1;
            strides[i] = 0;
            continue;
        }
        if (order[i] < 0 || order[i] >= a->ndim || used[order[i]]) {
            tg_errorf(ctx, TG_EINVAL, "dimshuffle order entry %d is invalid",
                      order[i]);
            return NULL;
        }
        used[order[i]] = true;
        shape[i] = a->shape[order[i]];
        strides[i] = a->strides[order[i]];
    }
    for (int d = 0; d < a->ndim; d++)
        if (!used[d] && a->shape[d] != 1) {
            tg_errorf(ctx, TG_ESHAPE,
                      "cannot drop axis %d of length %lld (only length 1 can "
                      "be dropped)",
                      d, (long long)a->shape[d]);
            return NULL;
        }
    tg_array *v = tg_array_view_raw(a, a->dtype, n, shape, strides, a->data);
    if (!v) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return v;
}

/* Python's slice.indices: clamp start and stop into [0, len] for a
 * positive step, [-1, len - 1] for a negative one. */
int64_t tg_slice_normalize(int64_t len, int64_t *start, int64_t *stop,
                           int64_t *step) {
    int64_t st = *step == TG_SLICE_NONE || *step == 0 ? 1 : *step;
    int64_t lo = st > 0 ? 0 : -1, hi = st > 0 ? len : len - 1;
    int64_t b, e;
    if (*start == TG_SLICE_NONE) {
        b = st > 0 ? lo : hi;
    } else {
        b = *start;
        if (b < 0) {
            b += len;
            if (b < lo) b = lo;
        } else if (b > hi) {
            b = hi;
        }
    }
    if (*stop == TG_SLICE_NONE) {
        e = st > 0 ? hi : lo;
    } else {
        e = *stop;
        if (e < 0) {
            e += len;
            if (e < lo) e = lo;
        } else if (e > hi) {
            e = hi;
        }
    }
    /* Written so that a huge step cannot overflow. */
    int64_t n;
    if (st > 0)
        n = e > b ? (e - b - 1) / st + 1 : 0;
    else
        n = b > e ? (b - e - 1) / -st + 1 : 0;
    *start = b;
    *stop = e;
    *step = st;
    return n;
}

tg_array *tg_array_view_slice(const tg_array *a, int axis, int64_t start,
                              int64_t stop, int64_t step, tg_ctx *ctx) {
    if (axis < 0 || axis >= a->ndim) {
        tg_errorf(ctx, TG_EINVAL, "axis %d out of range for %d dimensions",
                  axis, a->ndim);
        return NULL;
    }
    if (step == 0) {
        tg_errorf(ctx, TG_EINVAL, "slice step cannot be zero");
        return NULL;
    }
    int64_t n = tg_slice_normalize(a->shape[axis], &start, &stop, &step);
    int64_t shape[TG_MAX_NDIM], strides[TG_MAX_NDIM];
    memcpy(shape, a->shape, sizeof shape);
    memcpy(strides, a->strides, sizeof strides);
    shape[axis] = n;
    /* With one element or none the stride is never used; keeping the old
     * one avoids overflowing stride * step for a huge step. */
    if (n > 1) strides[axis] = a->strides[axis] * step;
    char *data = a->data + (n ? start * a->strides[axis] : 0);
    tg_array *v = tg_array_view_raw(a, a->dtype, a->ndim, shape, strides, data);
    if (!v) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return v;
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
                              (long long)shape[i]);
    if (k < size) snprintf(buf + k, size - k, ndim == 1 ? ",)" : ")");
}

tg_array *tg_array_reshape(const tg_array *a, int ndim, const int64_t *shape,
                           tg_ctx *ctx) {
    int64_t out[TG_MAX_NDIM], known = 1, size = tg_array_size_inline(a);
    int infer = -1;
    if (ndim < 0 || ndim > TG_MAX_NDIM) {
        tg_errorf(ctx, TG_EINVAL, "cannot reshape to %d dimensions", ndim);
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                tg_errorf(ctx, TG_ESHAPE, "can only specify one unknown dimension");
                return NULL;
            }
            infer = i;
        } else if (shape[i] < 0) {
            tg_errorf(ctx, TG_ESHAPE, "negative dimension %lld in reshape",
                      (long long)shape[i]);
            return NULL;
        } else if (known >= 0 && __builtin_mul_overflow(known, shape[i], &known)) {
            known = -1; /* too large: cannot match any size */
        }
    }
    if (infer >= 0 && known > 0 && size % known == 0) out[infer] = size / known;
    if ((infer >= 0 && (known <= 0 || size % known)) ||
        (infer < 0 && known != size)) {
        char s[256];
        shape_text(ndim, shape, s, sizeof s);
        tg_errorf(ctx, TG_ESHAPE, "cannot reshape array of size %lld into shape %s",
                  (long long)size, s);
        return NULL;
    }
    int64_t strides[TG_MAX_NDIM];
    if (tg_array_is_contiguous(a)) {
        tg_strides_contiguous(a->dtype, ndim, out, strides);
    } else {
        /* Not C-contiguous: a copy (the header promises views only of
         * contiguous data). */
        tg_array *c = tg_array_copy(a, a->dtype);
        if (!c) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            return NULL;
        }
        c->ndim = ndim;
        memcpy(c->shape, out, sizeof(int64_t) * (size_t)ndim);
        tg_strides_contiguous(c->dtype, ndim, out, c->strides);
        return c;
    }
    tg_array *v = tg_array_view_raw(a, a->dtype, ndim, out, strides, a->data);
    if (!v) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return v;
}

/* ---- copies ---- */

typedef struct cast_ud {
    tg_dtype to, from;
} cast_ud;

static void cast_inner(int64_t n, char **p, const int64_t *s, void *ud) {
    cast_ud *c = ud;
    tg_cast_strided(c->to, p[0], s[0], c->from, p[1], s[1], n);
}

/* The bytes a's elements lie in, [*lo, *hi); false when a has none. */
static bool extent(const tg_array *a, uintptr_t *lo, uintptr_t *hi) {
    uintptr_t l = (uintptr_t)a->data, h = l + tg_dtype_size(a->dtype);
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 0) return false;
        int64_t span = a->strides[d] * (a->shape[d] - 1);
        if (span > 0) h += (uintptr_t)span;
        else l -= (uintptr_t)-span;
    }
    *lo = l;
    *hi = h;
    return true;
}

/* Whether writing dst element by element could change src elements not
 * yet read: their bytes meet, and dst is not src itself (each element
 * read, then written over with itself). */
static bool overlaps(const tg_array *dst, const tg_array *src) {
    uintptr_t dl, dh, sl, sh;
    if (!extent(dst, &dl, &dh) || !extent(src, &sl, &sh) || dh <= sl || sh <= dl) return false;
    if (dst->data != src->data || dst->dtype != src->dtype || dst->ndim != src->ndim) return true;
    for (int d = 0; d < dst->ndim; d++)
        if (dst->shape[d] != src->shape[d] || (dst->strides[d] != src->strides[d] && dst->shape[d] > 1))
            return true;
    return false;
}

/* The iterator copies the innermost run (after merging axes) in one
 * call; where that run is short and an outer axis is long (join along the
 * last axis of (n, 2) arrays: a call per two elements, 2.5x NumPy's
 * time), the longest outer axis goes innermost instead. Each element is
 * still written once, so the order does not change the result; not where
 * dst repeats an element (a zero stride), whose last write would change. */
static void longest_inner(int nd, int64_t *shape, int64_t (*st)[TG_MAX_NDIM]) {
    int64_t run = 1, s0 = 0, s1 = 0;
    int d = nd - 1, best = -1;
    for (int k = 0; k < nd; k++)
        if (shape[k] > 1 && st[0][k] == 0) return;
    for (; d >= 0; d--) { /* the merged innermost run, as tg_iter_run merges */
        if (shape[d] == 1) continue;
        if (run == 1) {
            run = shape[d];
            s0 = st[0][d];
            s1 = st[1][d];
        } else if (st[0][d] == s0 * run && st[1][d] == s1 * run) {
            run *= shape[d];
        } else {
            break;
        }
    }
    if (run >= 16) return;
    for (int k = 0; k <= d; k++)
        if (shape[k] > 1 && (best < 0 || shape[k] > shape[best])) best = k;
    if (best < 0 || shape[best] < 4 * run) return;
    int64_t l = shape[best], a = st[0][best], b = st[1][best];
    for (int k = best; k < nd - 1; k++) {
        shape[k] = shape[k + 1];
        st[0][k] = st[0][k + 1];
        st[1][k] = st[1][k + 1];
    }
    shape[nd - 1] = l;
    st[0][nd - 1] = a;
    st[1][nd - 1] = b;
}

int tg_array_assign(tg_array *dst, const tg_array *src, tg_ctx *ctx) {
    /* Views of one buffer that overlap (x[...] = x.T, x[1:] = x[:-1]):
     * NumPy copies src first, so that dst gets src as it was. */
    if (overlaps(dst, src)) {
        tg_array *tmp = tg_array_copy(src, src->dtype);
        if (!tmp) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        int rc = tg_array_assign(dst, tmp, ctx);
        tg_array_free(tmp);
        return rc;
    }
    /* Broadcast src to dst's shape: align trailing axes, stride 0 where
     * src has length 1 or lacks the axis; extra leading axes of src must
     * have length 1 (NumPy's rule for assignment). */
    int64_t st[2][TG_MAX_NDIM];
    int off = dst->ndim - src->ndim;
    bool bad = false;
    for (int d = 0; d < -off; d++) bad |= src->shape[d] != 1;
    for (int d = 0; d < dst->ndim && !bad; d++) {
        st[0][d] = dst->strides[d];
        if (d < off) {
            st[1][d] = 0;
        } else {
            int64_t l = src->shape[d - off];
            if (l == dst->shape[d])
                st[1][d] = src->strides[d - off];
            else if (l == 1)
                st[1][d] = 0;
            else
                bad = true;
        }
    }
    if (bad) {
        char a[256], b[256];
        shape_text(src->ndim, src->shape, a, sizeof a);
        shape_text(dst->ndim, dst->shape, b, sizeof b);
        return tg_errorf(ctx, TG_ESHAPE,
                         "could not broadcast shape %s into shape %s",
                         a, b);
    }
    char *base[2] = {dst->data, src->data};
    cast_ud ud = {dst->dtype, src->dtype};
    int64_t shape[TG_MAX_NDIM];
    memcpy(shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim);
    longest_inner(dst->ndim, shape, st);
    tg_iter_run(2, base, dst->ndim, shape, (const int64_t(*)[TG_MAX_NDIM])st,
                cast_inner, &ud, true);
    return TG_OK;
}

tg_array *tg_array_copy(const tg_array *a, tg_dtype dt) {
    tg_array *c = tg_array_empty(dt, a->ndim, a->shape);
    if (!c) return NULL;
    if (tg_array_assign(c, a, NULL)) {
        tg_array_free(c);
        return NULL;
    }
    return c;
}

bool tg_array_equal(const tg_array *a, const tg_array *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    int64_t n = tg_array_size_inline(a);
    size_t isz = tg_dtype_size(a->dtype);
    bool fl = tg_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < n; i++) {
        const char *pa = tg_array_elem_flat(a, i), *pb = tg_array_elem_flat(b, i);
        if (memcmp(pa, pb, isz) == 0) continue;
        if (fl) {
            double x = tg_load_f64(a->dtype, pa), y = tg_load_f64(b->dtype, pb);
            if (x == y || (isnan(x) && isnan(y))) continue;
        }
        return false;
    }
    return true;
}
