/* Arrays: construction and reference counts, views that share buffers,
 * slicing as Python slices, reshape (view or copy), copies with casts,
 * broadcasting assignment, output preparation without allocation,
 * strided iteration (merged axes, threads), printing as NumPy prints, and
 * allocation failures injected at every allocation. Expected values are
 * worked out by hand, or come from Python/NumPy (tensor_tables.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tensor/tensor.h"
#include "tensor_tables.h"
#include "testutil.h"

/* ---- a counting allocator that can fail on purpose ---- */

typedef struct alloc_state {
    int64_t live;       /* blocks held */
    int64_t calls;      /* allocations attempted (not frees) */
    int64_t fail_from;  /* the first failing attempt; -1: never */
} alloc_state;

static void *counting_realloc(void *ud, void *p, size_t n) {
    alloc_state *s = ud;
    if (n == 0) {
        if (p) s->live--;
        free(p);
        return NULL;
    }
    if (s->fail_from >= 0 && s->calls >= s->fail_from) {
        s->calls++;
        return NULL;
    }
    s->calls++;
    void *q = realloc(p, n);
    if (q && !p) s->live++;
    return q;
}

static alloc_state g_alloc;

static void alloc_count(int64_t fail_from) {
    g_alloc = (alloc_state){0, 0, fail_from};
    tg_set_allocator(counting_realloc, &g_alloc);
}

static void alloc_reset(void) { tg_set_allocator(NULL, NULL); }

/* ---- helpers ---- */

static tg_array *iota(tg_dtype dt, int nd, const int64_t *shape) {
    tg_array *a = tg_array_new(dt, nd, shape);
    assert_non_null(a);
    for (int64_t i = 0; i < tg_array_size(a); i++)
        tg_store_f64(dt, (char *)tg_array_data(a) + i * (int64_t)tg_dtype_size(dt), (double)i);
    return a;
}

static long refs(const tg_array *a) { return atomic_load(&((tg_array *)a)->refcount); }
static long buf_refs(const tg_array *a) { return atomic_load(&a->buf->refcount); }

static void assert_values(const tg_array *a, const double *want, int64_t n) {
    assert_int_equal(tg_array_size(a), n);
    for (int64_t i = 0; i < n; i++)
        if (tg_array_get_flat(a, i) != want[i])
            fail_msg("element %lld is %g, want %g", (long long)i, tg_array_get_flat(a, i), want[i]);
}

/* ---- construction ---- */

static void test_new_and_accessors(void **state) {
    (void)state;
    int64_t shape[3] = {2, 3, 4};
    tg_array *a = tg_array_new(TG_INT16, 3, shape);
    assert_non_null(a);
    assert_int_equal(tg_array_dtype(a), TG_INT16);
    assert_int_equal(tg_array_ndim(a), 3);
    assert_int_equal(tg_array_size(a), 24);
    assert_int_equal(tg_array_strides(a)[0], 24);
    assert_int_equal(tg_array_strides(a)[1], 8);
    assert_int_equal(tg_array_strides(a)[2], 2);
    assert_true(tg_array_is_contiguous(a));
    assert_int_equal((uintptr_t)tg_array_data(a) % 64, 0);
    for (int64_t i = 0; i < 24; i++) assert_true(tg_array_get_flat(a, i) == 0);
    /* References: ref adds one, free drops one. */
    assert_int_equal(refs(a), 1);
    assert_ptr_equal(tg_array_ref(a), a);
    assert_int_equal(refs(a), 2);
    tg_array_free(a);
    assert_int_equal(refs(a), 1);
    tg_array_free(a);
    tg_array_free(NULL);
    assert_null(tg_array_ref(NULL));

    double d[6] = {1, 2, 3, 4, 5, 6};
    int64_t s2[2] = {2, 3};
    tg_array *b = tg_array_new_from(TG_FLOAT64, 2, s2, d);
    assert_values(b, d, 6);
    assert_ptr_not_equal(tg_array_data(b), d);
    tg_array_free(b);

    tg_array *s = tg_array_new_scalar(TG_UINT8, 258.0); /* as NumPy: wraps to 2 */
    assert_int_equal(tg_array_ndim(s), 0);
    assert_int_equal(tg_array_size(s), 1);
    assert_true(tg_array_get_flat(s, 0) == 2);
    tg_array_free(s);
    s = tg_array_new_scalar(TG_FLOAT16, 0.1);
    assert_int_equal(*(uint16_t *)tg_array_data(s), 0x2e66); /* np.float16(0.1) */
    tg_array_free(s);

    /* Zero-size arrays have a valid data pointer. */
    int64_t z[2] = {0, 5};
    tg_array *e = tg_array_new(TG_FLOAT32, 2, z);
    assert_non_null(e);
    assert_int_equal(tg_array_size(e), 0);
    assert_non_null(tg_array_data(e));
    assert_true(tg_array_is_contiguous(e));
    tg_array_free(e);
}

static void test_new_rejects_bad_arguments(void **state) {
    (void)state;
    int64_t neg[2] = {2, -1}, huge[3] = {INT64_MAX / 2, 4, 1}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t big[2] = {INT64_MAX / 8 + 1, 1};
    assert_null(tg_array_new(TG_FLOAT64, 2, neg));
    assert_null(tg_array_new(TG_FLOAT64, 3, huge));
    assert_null(tg_array_new(TG_FLOAT64, 2, big)); /* size fits, bytes overflow */
    assert_null(tg_array_new(TG_FLOAT64, 9, nine));
    assert_null(tg_array_new(TG_FLOAT64, -1, NULL));
    assert_null(tg_array_new((tg_dtype)TG_NDTYPES, 0, NULL));
    assert_null(tg_array_new(TG_DTYPE_INVALID, 0, NULL));
    assert_int_equal(tg_shape_size(2, neg), -1);
    assert_int_equal(tg_shape_size(3, huge), -1);
    assert_int_equal(tg_shape_size(0, NULL), 1);
    /* a zero extent does not excuse the others (NumPy: "array is too big") */
    int64_t zbig[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0}, zok[3] = {3, 0, 5};
    assert_int_equal(tg_shape_size(3, zbig), -1);
    assert_null(tg_array_new(TG_FLOAT32, 3, zbig));
    assert_int_equal(tg_shape_size(3, zok), 0);
    tg_array *z = tg_array_new(TG_FLOAT32, 3, zok);
    assert_non_null(z);
    assert_int_equal(z->strides[0], 20); /* as NumPy: (20, 20, 4) */
    assert_int_equal(z->strides[1], 20);
    assert_int_equal(z->strides[2], 4);
    tg_array_free(z);
}

/* ---- views ---- */

static void test_transpose_shares_buffer(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[3] = {2, 3, 4};
    tg_array *a = iota(TG_FLOAT64, 3, shape);
    tg_array *t = tg_array_view_transpose(a, NULL, ctx); /* reverse: (4, 3, 2) */
    assert_non_null(t);
    assert_int_equal(buf_refs(a), 2);
    assert_int_equal(tg_array_shape(t)[0], 4);
    assert_int_equal(tg_array_shape(t)[2], 2);
    assert_false(tg_array_is_contiguous(t));
    /* t[k, j, i] = a[i, j, k] = 12 i + 4 j + k; flat index of t is 6 k + 2 j + i. */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                assert_true(tg_array_get_flat(t, 6 * k + 2 * j + i) == 12 * i + 4 * j + k);
    /* Writing through the view changes the base. */
    ((double *)tg_array_data(t))[0] = -5; /* t[0,0,0] = a[0,0,0] */
    assert_true(tg_array_get_flat(a, 0) == -5);
    int axes[3] = {1, -1, 0}; /* negative axes count from the end */
    tg_array *u = tg_array_view_transpose(a, axes, ctx);
    assert_non_null(u);
    assert_int_equal(tg_array_shape(u)[0], 3);
    assert_int_equal(tg_array_shape(u)[1], 4);
    assert_int_equal(tg_array_shape(u)[2], 2);
    int dup[3] = {0, 0, 1}, out[3] = {0, 1, 3};
    assert_null(tg_array_view_transpose(a, dup, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "permutation"));
    assert_null(tg_array_view_transpose(a, out, ctx));
    /* The buffer outlives the base while a view holds it. */
    tg_array_free(a);
    assert_int_equal(buf_refs(t), 2);
    assert_true(tg_array_get_flat(t, 6 * 3 + 2 * 2 + 1) == 12 + 8 + 3);
    tg_array_free(t);
    assert_int_equal(buf_refs(u), 1);
    tg_array_free(u);
    tg_ctx_free(ctx);
}

static void test_dimshuffle(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[3] = {2, 1, 3};
    tg_array *a = iota(TG_INT32, 3, shape);
    int order[4] = {2, -1, 0, -1}; /* drop the length-1 axis 1, add two */
    tg_array *d = tg_array_view_dimshuffle(a, 4, order, ctx);
    assert_non_null(d);
    int64_t want_shape[4] = {3, 1, 2, 1};
    for (int i = 0; i < 4; i++) assert_int_equal(tg_array_shape(d)[i], want_shape[i]);
    /* d[k, 0, i, 0] = a[i, 0, k] = 3 i + k */
    double want[6] = {0, 3, 1, 4, 2, 5};
    assert_values(d, want, 6);
    ((int32_t *)tg_array_data(d))[0] = 42;
    assert_true(tg_array_get_flat(a, 0) == 42);
    /* 0-d to (1, 1) and back. */
    tg_array *s = tg_array_new_scalar(TG_FLOAT32, 2.5);
    int two[2] = {-1, -1};
    tg_array *s2 = tg_array_view_dimshuffle(s, 2, two, ctx);
    assert_int_equal(tg_array_ndim(s2), 2);
    assert_true(tg_array_get_flat(s2, 0) == 2.5);
    tg_array *s0 = tg_array_view_dimshuffle(s2, 0, NULL, ctx);
    assert_non_null(s0);
    assert_int_equal(tg_array_ndim(s0), 0);
    /* Errors: dropping a long axis, a repeated or out-of-range axis. */
    int drop[2] = {1, 2};
    assert_null(tg_array_view_dimshuffle(a, 2, drop, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_ESHAPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "cannot drop axis 0 of length 2"));
    int rep[3] = {0, 0, 2}, far[3] = {0, 1, 3}, neg[3] = {0, -2, 2};
    assert_null(tg_array_view_dimshuffle(a, 3, rep, ctx));
    assert_null(tg_array_view_dimshuffle(a, 3, far, ctx));
    assert_null(tg_array_view_dimshuffle(a, 3, neg, ctx));
    assert_null(tg_array_view_dimshuffle(a, 9, order, ctx));
    tg_array *arrs[] = {a, d, s, s2, s0};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

static void test_slice_normalize_matches_python(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_ARRAY_LEN(slice_cases); i++) {
        const slice_case *c = &slice_cases[i];
        int64_t a = c->start, b = c->stop, s = c->step == INT64_MIN ? 0 : c->step;
        int64_t n = tg_slice_normalize(c->len, &a, &b, &s);
        if (n != c->count || (n && a != c->first))
            fail_msg("len %lld [%lld:%lld:%lld]: %lld elements from %lld, Python: %lld from %lld",
                     (long long)c->len, (long long)c->start, (long long)c->stop, (long long)c->step,
                     (long long)n, (long long)a, (long long)c->count, (long long)c->first);
    }
    /* Huge steps and bounds do not overflow. */
    int64_t a = 0, b = TG_SLICE_NONE, s = INT64_MAX;
    assert_int_equal(tg_slice_normalize(5, &a, &b, &s), 1);
    a = TG_SLICE_NONE, b = TG_SLICE_NONE, s = -INT64_MAX;
    assert_int_equal(tg_slice_normalize(5, &a, &b, &s), 1);
    assert_int_equal(a, 4);
    a = INT64_MIN + 1, b = INT64_MAX, s = 2;
    assert_int_equal(tg_slice_normalize(5, &a, &b, &s), 3);
    assert_int_equal(a, 0);
}

/* Slicing a vector of 0..len-1 gives Python's range(start, stop, step). */
static void test_slice_views_match_python(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    for (size_t i = 0; i < TG_ARRAY_LEN(slice_cases); i++) {
        const slice_case *c = &slice_cases[i];
        if (c->step == INT64_MIN) continue;
        tg_array *a = iota(TG_INT64, 1, &c->len);
        tg_array *v = tg_array_view_slice(a, 0, c->start, c->stop, c->step, ctx);
        assert_non_null(v);
        assert_int_equal(tg_array_shape(v)[0], c->count);
        for (int64_t k = 0; k < c->count; k++)
            assert_true(tg_array_get_flat(v, k) == (double)(c->first + k * c->step));
        tg_array_free(v);
        tg_array_free(a);
    }
    tg_ctx_free(ctx);
}

static void test_slice_3d_shares_buffer(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[3] = {2, 3, 4};
    tg_array *a = iota(TG_FLOAT32, 3, shape);
    /* a[:, ::-2, 1:3] has shape (2, 2, 2): rows 2 and 0, columns 1 and 2. */
    tg_array *s = tg_array_view_slice(a, 1, TG_SLICE_NONE, TG_SLICE_NONE, -2, ctx);
    tg_array *s2 = tg_array_view_slice(s, 2, 1, 3, 1, ctx);
    assert_non_null(s2);
    double want[8] = {9, 10, 1, 2, 21, 22, 13, 14};
    assert_values(s2, want, 8);
    assert_int_equal(buf_refs(a), 3);
    ((float *)tg_array_data(s2))[0] = -1; /* a[0, 2, 1] */
    assert_true(tg_array_get_flat(a, 9) == -1);
    /* Empty slices and errors. */
    tg_array *e = tg_array_view_slice(a, 2, 3, 1, 1, ctx);
    assert_int_equal(tg_array_shape(e)[2], 0);
    assert_int_equal(tg_array_size(e), 0);
    assert_null(tg_array_view_slice(a, 3, 0, 1, 1, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "axis 3"));
    assert_null(tg_array_view_slice(a, 0, 0, 1, 0, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "step cannot be zero"));
    tg_array *arrs[] = {a, s, s2, e};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

static void test_reshape_view_or_copy(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[2] = {2, 3};
    tg_array *a = iota(TG_FLOAT64, 2, shape);
    /* Contiguous: a view, -1 inferred. */
    int64_t r[3] = {3, -1, 1};
    tg_array *v = tg_array_reshape(a, 3, r, ctx);
    assert_non_null(v);
    assert_ptr_equal(tg_array_data(v), tg_array_data(a));
    assert_int_equal(tg_array_shape(v)[1], 2);
    assert_int_equal(buf_refs(a), 2);
    ((double *)tg_array_data(v))[5] = 50;
    assert_true(tg_array_get_flat(a, 5) == 50);
    /* Not contiguous: a copy in C order of the transpose. */
    tg_array *t = tg_array_view_transpose(a, NULL, ctx);
    int64_t flat = 6;
    tg_array *c = tg_array_reshape(t, 1, &flat, ctx);
    assert_non_null(c);
    assert_true(c->buf != a->buf);
    assert_true(tg_array_is_contiguous(c));
    double want[6] = {0, 3, 1, 4, 2, 50};
    assert_values(c, want, 6);
    /* To 0-d and from 0-d. */
    tg_array *one = tg_array_new_scalar(TG_INT8, 7);
    int64_t ones[2] = {1, -1};
    tg_array *o2 = tg_array_reshape(one, 2, ones, ctx);
    assert_non_null(o2);
    assert_int_equal(tg_array_shape(o2)[1], 1);
    tg_array *o0 = tg_array_reshape(o2, 0, NULL, ctx);
    assert_int_equal(tg_array_ndim(o0), 0);
    assert_true(tg_array_get_flat(o0, 0) == 7);
    /* Zero-size. */
    int64_t zs[2] = {0, 4}, zr[3] = {2, 0, -1};
    tg_array *z = tg_array_new(TG_BOOL, 2, zs);
    int64_t zr_ok[3] = {2, 0, 7};
    tg_array *z2 = tg_array_reshape(z, 3, zr_ok, ctx);
    assert_non_null(z2);
    assert_null(tg_array_reshape(z, 3, zr, ctx)); /* -1 with a zero: ambiguous, as NumPy */
    /* Errors, with NumPy's wording. */
    int64_t bad[2] = {4, 2}, two[2] = {-1, -1}, negd[2] = {-2, -3}, inf[2] = {4, -1};
    assert_null(tg_array_reshape(a, 2, bad, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_ESHAPE);
    assert_string_equal(tg_ctx_message(ctx), "cannot reshape array of size 6 into shape (4, 2)");
    assert_null(tg_array_reshape(a, 2, inf, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "cannot reshape array of size 6 into shape (4, -1)"));
    assert_null(tg_array_reshape(a, 2, two, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "only specify one unknown dimension"));
    assert_null(tg_array_reshape(a, 2, negd, ctx));
    int64_t hugeshape[3] = {INT64_MAX, INT64_MAX, 0};
    assert_null(tg_array_reshape(a, 3, hugeshape, ctx));
    assert_null(tg_array_reshape(a, 9, bad, ctx));
    tg_array *arrs[] = {a, v, t, c, one, o2, o0, z, z2};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

/* ---- copies, assignment, equality ---- */

static void test_copy_converts_and_compacts(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    double d[6] = {-1.5, 0.0, 2.7, 300.0, NAN, -0.0};
    int64_t shape[2] = {2, 3};
    tg_array *a = tg_array_new_from(TG_FLOAT64, 2, shape, d);
    tg_array *t = tg_array_view_transpose(a, NULL, ctx);
    tg_array *i16 = tg_array_copy(t, TG_INT16);
    assert_true(tg_array_is_contiguous(i16));
    assert_int_equal(tg_array_shape(i16)[0], 3);
    /* transpose order: -1.5, 300, 0, NaN, 2.7, -0 -> truncated; NaN -> 0 via int32's INT32_MIN */
    double want[6] = {-1, 300, 0, 0, 2, 0};
    assert_values(i16, want, 6);
    tg_array *b = tg_array_copy(a, TG_BOOL);
    double wantb[6] = {1, 0, 1, 1, 1, 0};
    assert_values(b, wantb, 6);
    tg_array *same = tg_array_copy(a, TG_FLOAT64);
    assert_true(same->buf != a->buf);
    assert_true(tg_array_equal(same, a)); /* NaN equals NaN */
    tg_array *arrs[] = {a, t, i16, b, same};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

static void test_assign_broadcasts_and_casts(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t ds[2] = {2, 3}, row[1] = {3}, col[2] = {2, 1}, lead[3] = {1, 1, 3}, bad[1] = {2};
    tg_array *d = tg_array_new(TG_FLOAT32, 2, ds);
    tg_array *r = iota(TG_INT32, 1, row), *c = iota(TG_UINT8, 2, col);
    tg_array *l = iota(TG_FLOAT64, 3, lead), *b = iota(TG_INT32, 1, bad);
    assert_int_equal(tg_array_assign(d, r, ctx), 0);
    double w1[6] = {0, 1, 2, 0, 1, 2};
    assert_values(d, w1, 6);
    assert_int_equal(tg_array_assign(d, c, ctx), 0);
    double w2[6] = {0, 0, 0, 1, 1, 1};
    assert_values(d, w2, 6);
    assert_int_equal(tg_array_assign(d, l, ctx), 0); /* leading length-1 axes of src */
    assert_values(d, w1, 6);
    tg_array *s = tg_array_new_scalar(TG_BOOL, 1);
    assert_int_equal(tg_array_assign(d, s, ctx), 0);
    double w3[6] = {1, 1, 1, 1, 1, 1};
    assert_values(d, w3, 6);
    assert_int_equal(tg_array_assign(d, b, ctx), TG_ESHAPE);
    assert_string_equal(tg_ctx_message(ctx), "could not broadcast shape (2,) into shape (2, 3)");
    int64_t lb[3] = {2, 1, 3};
    tg_array *l2 = tg_array_new(TG_FLOAT64, 3, lb);
    assert_int_equal(tg_array_assign(d, l2, ctx), TG_ESHAPE);
    /* Into a strided view: only the view's elements of the base change. */
    tg_array *v = tg_array_view_slice(d, 1, TG_SLICE_NONE, TG_SLICE_NONE, -2, ctx);
    tg_array *two = tg_array_new_scalar(TG_FLOAT64, 7);
    assert_int_equal(tg_array_assign(v, two, ctx), 0);
    double w4[6] = {7, 1, 7, 7, 1, 7};
    assert_values(d, w4, 6);
    tg_array *arrs[] = {d, r, c, l, b, s, l2, v, two};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

/* Views of one buffer that overlap: dst gets src as it was, as NumPy's
 * assignment does (by hand: x[...] = x.T on [[1, 2], [3, 4]] is
 * [[1, 3], [2, 4]]; x[1:] = x[:-1] on [0, 1, 2, 3] is [0, 0, 1, 2], and
 * x[:-1] = x[1:] is [1, 2, 3, 3]; x[::-1] = x reverses; x = x is x). An
 * element-by-element copy gave [[1, 3], [3, 4]] and [0, 0, 0, 0]. */
static void test_assign_overlapping_views(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t s2[2] = {2, 2}, s4[1] = {4};
    tg_array *sq = iota(TG_FLOAT64, 2, s2);
    for (int i = 0; i < 4; i++) ((double *)tg_array_data(sq))[i] = i + 1;
    tg_array *t = tg_array_view_transpose(sq, NULL, ctx);
    assert_int_equal(tg_array_assign(sq, t, ctx), 0);
    assert_values(sq, ((double[]){1, 3, 2, 4}), 4);
    tg_array *x = iota(TG_INT32, 1, s4);
    tg_array *tail = tg_array_view_slice(x, 0, 1, TG_SLICE_NONE, 1, ctx);
    tg_array *head = tg_array_view_slice(x, 0, TG_SLICE_NONE, -1, 1, ctx);
    assert_int_equal(tg_array_assign(tail, head, ctx), 0);
    assert_values(x, ((double[]){0, 0, 1, 2}), 4);
    assert_int_equal(tg_array_assign(head, tail, ctx), 0);
    assert_values(x, ((double[]){0, 1, 2, 2}), 4);
    tg_array *rev = tg_array_view_slice(x, 0, TG_SLICE_NONE, TG_SLICE_NONE, -1, ctx);
    assert_int_equal(tg_array_assign(rev, x, ctx), 0);
    assert_values(x, ((double[]){2, 2, 1, 0}), 4);
    assert_int_equal(tg_array_assign(x, x, ctx), 0);
    assert_values(x, ((double[]){2, 2, 1, 0}), 4);
    tg_array *arrs[] = {sq, t, x, tail, head, rev};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

/* Same-dtype copies take a typed loop per item size (1, 2, 4, 8 bytes):
 * every dtype, through tg_cast_strided with reversed, strided, zero
 * (broadcast) and mixed strides, lengths 0, 1, 2 and odd ones, and
 * through tg_array_copy of transposed and reversed 2-D views and
 * tg_array_assign into a strided view. Each element has its own bit
 * pattern (NaN payloads and -0 for the float dtypes: a copy moves bits,
 * never values), and the expected bytes come from a plain loop over the
 * same addresses; the gaps of a strided destination stay as they were. */
static void fill_distinct(unsigned char *p, size_t nbytes, unsigned seed) {
    for (size_t i = 0; i < nbytes; i++) p[i] = (unsigned char)(i * 37u + seed * 101u + (i >> 8) * 13u + 1u);
}

static void test_copy_same_dtype_layouts(void **state) {
    (void)state;
    enum { N = 61, MID = 4 * N * 8, CAP = 2 * MID + 8 };
    static const int64_t lens[] = {0, 1, 2, 3, 7, 16, N};
    /* (source, destination) strides in items; negative ones start at the
     * far end of the buffer */
    static const int64_t strides[][2] = {{1, 1},  {-1, 1}, {1, -1}, {2, 1},  {1, 3},  {-3, 2},
                                         {0, 1},  {0, -2}, {0, 3},  {-1, -1}, {3, 3}, {4, -4}};
    for (int dt = 0; dt < TG_NDTYPES; dt++) {
        const int64_t e = (int64_t)tg_dtype_size((tg_dtype)dt);
        for (size_t l = 0; l < TG_ARRAY_LEN(lens); l++)
            for (size_t k = 0; k < TG_ARRAY_LEN(strides); k++) {
                const int64_t n = lens[l], ss = strides[k][0] * e, ds = strides[k][1] * e;
                unsigned char src[CAP], dst[CAP], want[CAP];
                fill_distinct(src, sizeof src, (unsigned)(dt + 3 * k));
                if (dt == TG_FLOAT64) { /* a NaN with a payload and -0 among them */
                    memcpy(src + MID, (uint64_t[]){0x7ff4000000000abcull}, 8);
                    memcpy(src + MID - 8, (uint64_t[]){0x8000000000000000ull}, 8);
                    memcpy(src + MID + 8, (uint64_t[]){0x8000000000000000ull}, 8);
                }
                memset(dst, 0xa5, sizeof dst);
                memset(want, 0xa5, sizeof want);
                const int64_t s0 = MID, d0 = MID; /* room for 4 * N items either way */
                for (int64_t i = 0; i < n; i++) memcpy(want + d0 + i * ds, src + s0 + i * ss, (size_t)e);
                tg_cast_strided((tg_dtype)dt, dst + d0, ds, (tg_dtype)dt, src + s0, ss, n);
                for (size_t b = 0; b < sizeof dst; b++)
                    if (dst[b] != want[b])
                        fail_msg("%s, %lld items, strides %lld -> %lld: the byte %lld from the first "
                                 "destination item is 0x%02x, want 0x%02x",
                                 tg_dtype_name((tg_dtype)dt), (long long)n, (long long)strides[k][0],
                                 (long long)strides[k][1], (long long)((int64_t)b - d0), dst[b], want[b]);
            }
    }
    /* Arrays: a transposed (5, 7) view and one reversed along both axes,
     * compacted by tg_array_copy; an assignment into every other column
     * of a reversed view. */
    tg_ctx *ctx = tg_ctx_new();
    for (int dt = 0; dt < TG_NDTYPES; dt++) {
        const int64_t e = (int64_t)tg_dtype_size((tg_dtype)dt);
        tg_array *a = tg_array_new((tg_dtype)dt, 2, (int64_t[]){7, 5});
        fill_distinct(tg_array_data(a), (size_t)(35 * e), (unsigned)dt);
        const unsigned char *ad = tg_array_data(a);
        tg_array *t = tg_array_view_transpose(a, NULL, ctx);
        tg_array *r0 = tg_array_view_slice(a, 0, TG_SLICE_NONE, TG_SLICE_NONE, -1, ctx);
        tg_array *r = tg_array_view_slice(r0, 1, TG_SLICE_NONE, TG_SLICE_NONE, -1, ctx);
        tg_array *ct = tg_array_copy(t, (tg_dtype)dt), *cr = tg_array_copy(r, (tg_dtype)dt);
        assert_non_null(ct);
        assert_non_null(cr);
        const unsigned char *pt = tg_array_data(ct), *pr = tg_array_data(cr);
        for (int64_t i = 0; i < 5; i++)
            for (int64_t j = 0; j < 7; j++)
                if (memcmp(pt + (i * 7 + j) * e, ad + (j * 5 + i) * e, (size_t)e))
                    fail_msg("%s: copy of the transpose differs at (%lld, %lld)", tg_dtype_name((tg_dtype)dt),
                             (long long)i, (long long)j);
        for (int64_t i = 0; i < 7; i++)
            for (int64_t j = 0; j < 5; j++)
                if (memcmp(pr + (i * 5 + j) * e, ad + ((6 - i) * 5 + 4 - j) * e, (size_t)e))
                    fail_msg("%s: copy of x[::-1, ::-1] differs at (%lld, %lld)", tg_dtype_name((tg_dtype)dt),
                             (long long)i, (long long)j);
        /* d (7, 9) filled with 0x5a; d[::-1, ::2] = t.T (= a) */
        tg_array *d = tg_array_new((tg_dtype)dt, 2, (int64_t[]){7, 9});
        memset(tg_array_data(d), 0x5a, (size_t)(63 * e));
        tg_array *d0 = tg_array_view_slice(d, 0, TG_SLICE_NONE, TG_SLICE_NONE, -1, ctx);
        tg_array *dv = tg_array_view_slice(d0, 1, TG_SLICE_NONE, TG_SLICE_NONE, 2, ctx);
        tg_array *tt = tg_array_view_transpose(t, NULL, ctx);
        assert_int_equal(tg_array_assign(dv, tt, ctx), 0);
        const unsigned char *pd = tg_array_data(d);
        for (int64_t i = 0; i < 7; i++)
            for (int64_t j = 0; j < 9; j++) {
                const unsigned char *got = pd + (i * 9 + j) * e;
                if (j % 2 == 0) {
                    if (memcmp(got, ad + ((6 - i) * 5 + j / 2) * e, (size_t)e))
                        fail_msg("%s: d[::-1, ::2] = x: d[%lld, %lld] differs", tg_dtype_name((tg_dtype)dt),
                                 (long long)i, (long long)j);
                } else {
                    for (int64_t b = 0; b < e; b++)
                        if (got[b] != 0x5a)
                            fail_msg("%s: d[::-1, ::2] = x wrote d[%lld, %lld]", tg_dtype_name((tg_dtype)dt),
                                     (long long)i, (long long)j);
                }
            }
        tg_array *arrs[] = {a, t, r0, r, ct, cr, d, d0, dv, tt};
        for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    }
    tg_ctx_free(ctx);
}

/* Assignments whose innermost run is short walk the longest outer axis
 * innermost (join along the last axis of (n, 2) arrays): into columns 1-2
 * of a (3, 50, 5) array from a (3, 50, 2) one, from its transpose's
 * transpose (other strides), and a broadcast row; every element by a
 * plain loop, the other columns untouched. */
static void test_assign_short_rows(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t sd[3] = {3, 50, 5}, ss[3] = {3, 50, 2}, sr[3] = {2, 50, 3};
    tg_array *src = iota(TG_FLOAT32, 3, ss), *srt = iota(TG_FLOAT32, 3, sr);
    tg_array *rowb = iota(TG_FLOAT32, 2, (int64_t[]){1, 2});
    /* srt (2, 50, 3) transposed to (3, 50, 2): element [i][j][k] = srt[k][j][i] */
    tg_array *tr = tg_array_view_dimshuffle(srt, 3, (int[]){2, 1, 0}, ctx);
    assert_non_null(tr);
    const tg_array *srcs[3] = {src, tr, rowb};
    for (int c = 0; c < 3; c++) {
        tg_array *d = tg_array_new(TG_FLOAT32, 3, sd);
        for (int64_t i = 0; i < 750; i++) ((float *)tg_array_data(d))[i] = -1;
        tg_array *v = tg_array_view_slice(d, 2, 1, 3, 1, ctx);
        assert_int_equal(tg_array_assign(v, srcs[c], ctx), 0);
        const float *pd = tg_array_data(d);
        for (int64_t i = 0; i < 3; i++)
            for (int64_t j = 0; j < 50; j++)
                for (int64_t k = 0; k < 5; k++) {
                    double want = k < 1 || k > 2 ? -1
                                  : c == 0   ? (double)((i * 50 + j) * 2 + k - 1)
                                  : c == 1   ? (double)(((k - 1) * 50 + j) * 3 + i)
                                             : (double)(k - 1);
                    if (pd[(i * 50 + j) * 5 + k] != want)
                        fail_msg("source %d: d[%lld, %lld, %lld] is %g, want %g", c, (long long)i, (long long)j,
                                 (long long)k, pd[(i * 50 + j) * 5 + k], want);
                }
        tg_array_free(v);
        tg_array_free(d);
    }
    tg_array *arrs[] = {src, srt, rowb, tr};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

static void test_equal(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    double x[4] = {1, NAN, -0.0, 4}, y[4] = {1, NAN, 0.0, 4}, z[4] = {1, NAN, 0.0, 5};
    int64_t n = 4, s22[2] = {2, 2};
    tg_array *a = tg_array_new_from(TG_FLOAT64, 1, &n, x), *b = tg_array_new_from(TG_FLOAT64, 1, &n, y);
    tg_array *c = tg_array_new_from(TG_FLOAT64, 1, &n, z), *f = tg_array_copy(a, TG_FLOAT32);
    tg_array *m = tg_array_new_from(TG_FLOAT64, 2, s22, x);
    assert_true(tg_array_equal(a, b));
    assert_false(tg_array_equal(a, c));
    assert_false(tg_array_equal(a, f)); /* dtypes differ */
    assert_false(tg_array_equal(a, m)); /* shapes differ */
    /* Strided against contiguous. */
    tg_array *mt = tg_array_view_transpose(m, NULL, ctx), *mtc = tg_array_copy(mt, TG_FLOAT64);
    assert_true(tg_array_equal(mt, mtc));
    assert_false(tg_array_equal(m, mtc));
    tg_array *arrs[] = {a, b, c, f, m, mt, mtc};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

/* ---- output preparation ---- */

static void test_prepare_reuses_without_allocating(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t s6[2] = {2, 3}, s3[1] = {3}, s100[1] = {100}, s40k[1] = {40000};
    tg_array *slot = NULL;
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 2, s6, ctx), 0);
    assert_non_null(slot);
    tg_array *first = slot;
    void *data = tg_array_data(slot);
    /* Same or smaller, any dtype that fits: same array, no allocation. */
    alloc_count(-1);
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 2, s6, ctx), 0);
    assert_int_equal(tg_array_prepare(&slot, TG_INT16, 1, s3, ctx), 0);
    assert_int_equal(tg_array_prepare(&slot, TG_BOOL, 0, NULL, ctx), 0);
    alloc_reset();
    assert_int_equal(g_alloc.calls, 0);
    assert_ptr_equal(slot, first);
    assert_ptr_equal(tg_array_data(slot), data);
    assert_int_equal(tg_array_ndim(slot), 0);
    assert_int_equal(tg_array_dtype(slot), TG_BOOL);
    /* Larger: a new array. */
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 1, s100, ctx), 0);
    assert_int_equal(tg_array_shape(slot)[0], 100);
    assert_true(tg_array_is_contiguous(slot));
    /* Someone else holds the array, or a view holds its buffer: not reused. */
    tg_array *held = tg_array_ref(slot);
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 1, s100, ctx), 0);
    assert_ptr_not_equal(slot, held);
    assert_int_equal(refs(held), 1);
    tg_array *view = tg_array_view_slice(slot, 0, 0, 10, 1, ctx);
    tg_array *before = slot;
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 1, s100, ctx), 0);
    assert_ptr_not_equal(slot, before);
    assert_int_equal(buf_refs(view), 1); /* the old header went, the view kept the buffer */
    /* A much smaller result does not pin a large buffer. */
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 1, s40k, ctx), 0);
    tg_array *large = slot;
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 0, NULL, ctx), 0);
    assert_ptr_not_equal(slot, large);
    /* Bad requests. */
    int64_t neg[1] = {-1};
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 1, neg, ctx), TG_ESHAPE);
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 9, s100, ctx), TG_EINVAL);
    /* An empty shape whose other extents times the item size pass 2^63 - 1
     * (NumPy: "array is too big"), into a slot it would fit: refused, not
     * its strides overflowing (UBSan in the reuse path); with 1-byte items
     * it is an array. */
    int64_t zmax[2] = {0, INT64_MAX};
    assert_int_equal(tg_array_prepare(&slot, TG_FLOAT64, 2, zmax, ctx), TG_ESHAPE);
    assert_null(tg_array_new(TG_FLOAT64, 2, zmax));
    assert_int_equal(tg_array_prepare(&slot, TG_INT8, 2, zmax, ctx), 0);
    assert_int_equal(tg_array_shape(slot)[1], INT64_MAX);
    assert_non_null(slot); /* a failure leaves the slot as it was */
    tg_array_free(slot);
    tg_array_free(held);
    tg_array_free(view);
    tg_ctx_free(ctx);
}

/* ---- broadcasting and iteration ---- */

static void test_broadcast_shapes(void **state) {
    (void)state;
    int64_t a[3] = {4, 1, 3}, b[2] = {5, 1}, c[1] = {3}, z[2] = {0, 1}, bad[1] = {2};
    const int64_t *sh[3] = {a, b, c};
    int nd[3] = {3, 2, 1}, out_nd = -1, bad_dim = -1;
    int64_t out[TG_MAX_NDIM];
    assert_int_equal(tg_broadcast_shapes(3, nd, sh, &out_nd, out, &bad_dim), 0);
    assert_int_equal(out_nd, 3);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 5);
    assert_int_equal(out[2], 3);
    const int64_t *sh2[2] = {z, b};
    int nd2[2] = {2, 2};
    assert_int_equal(tg_broadcast_shapes(2, nd2, sh2, &out_nd, out, &bad_dim), -1); /* 0 vs 5 */
    assert_int_equal(bad_dim, 0);
    const int64_t *sh3[2] = {a, bad};
    int nd3[2] = {3, 1};
    assert_int_equal(tg_broadcast_shapes(2, nd3, sh3, &out_nd, out, &bad_dim), -1);
    assert_int_equal(bad_dim, 2);
    /* Zero lengths broadcast against 1; no operands give 0-d. */
    int64_t one[2] = {1, 1};
    const int64_t *sh4[2] = {z, one};
    assert_int_equal(tg_broadcast_shapes(2, nd2, sh4, &out_nd, out, &bad_dim), 0);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    assert_int_equal(tg_broadcast_shapes(0, NULL, NULL, &out_nd, out, NULL), 0);
    assert_int_equal(out_nd, 0);
}

typedef struct iter_log {
    int calls;
    int64_t last_n;
} iter_log;

/* out = 10 * x + y (float64), counting calls. */
static void axpy_inner(int64_t n, char **p, const int64_t *s, void *ud) {
    iter_log *log = ud;
    __atomic_fetch_add(&log->calls, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&log->last_n, n, __ATOMIC_RELAXED);
    for (int64_t i = 0; i < n; i++)
        *(double *)(p[0] + i * s[0]) = 10 * *(double *)(p[1] + i * s[1]) + *(double *)(p[2] + i * s[2]);
}

static void run_axpy(tg_array *out, const tg_array *x, const tg_array *y, iter_log *log, bool par) {
    int64_t st[3][TG_MAX_NDIM];
    const tg_array *ops[3] = {out, x, y};
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < out->ndim; d++) {
            int off = out->ndim - ops[k]->ndim;
            st[k][d] = d < off || ops[k]->shape[d - off] == 1 ? 0 : ops[k]->strides[d - off];
        }
    char *base[3] = {out->data, x->data, y->data};
    tg_iter_run(3, base, out->ndim, out->shape, (const int64_t(*)[TG_MAX_NDIM])st, axpy_inner, log, par);
}

static void test_iter_merges_axes(void **state) {
    (void)state;
    int64_t s[3] = {2, 3, 4};
    tg_array *x = iota(TG_FLOAT64, 3, s), *y = iota(TG_FLOAT64, 3, s), *o = tg_array_new(TG_FLOAT64, 3, s);
    iter_log log = {0};
    run_axpy(o, x, y, &log, false);
    assert_int_equal(log.calls, 1); /* all contiguous: one run of 24 */
    assert_int_equal(log.last_n, 24);
    for (int i = 0; i < 24; i++) assert_true(tg_array_get_flat(o, i) == 11 * i);
    /* y broadcast along the last axis (shape (2, 3, 1)): runs of 4. */
    int64_t s1[3] = {2, 3, 1};
    tg_array *yb = iota(TG_FLOAT64, 3, s1);
    log = (iter_log){0};
    run_axpy(o, x, yb, &log, false);
    assert_int_equal(log.calls, 6);
    assert_int_equal(log.last_n, 4);
    for (int i = 0; i < 24; i++) assert_true(tg_array_get_flat(o, i) == 10 * i + i / 4);
    /* Length-1 axes are dropped: (2, 1, 12) contiguous is one run. */
    int64_t s2[3] = {2, 1, 12};
    tg_array *x2 = iota(TG_FLOAT64, 3, s2), *o2 = tg_array_new(TG_FLOAT64, 3, s2);
    log = (iter_log){0};
    run_axpy(o2, x2, x2, &log, false);
    assert_int_equal(log.calls, 1);
    /* A transposed operand: correct values with any strides. */
    tg_array *xt = tg_array_view_transpose(x, NULL, NULL);
    int64_t st[3] = {4, 3, 2};
    tg_array *ot = tg_array_new(TG_FLOAT64, 3, st), *zt = tg_array_new(TG_FLOAT64, 3, st);
    run_axpy(ot, xt, zt, &log, false);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++)
                assert_true(tg_array_get_flat(ot, 6 * k + 2 * j + i) == 10 * (12 * i + 4 * j + k));
    /* 0-d: one call of one element; zero-size: no call. */
    tg_array *a0 = tg_array_new_scalar(TG_FLOAT64, 2), *b0 = tg_array_new_scalar(TG_FLOAT64, 3);
    tg_array *o0 = tg_array_new_scalar(TG_FLOAT64, 0);
    log = (iter_log){0};
    run_axpy(o0, a0, b0, &log, true);
    assert_int_equal(log.calls, 1);
    assert_int_equal(log.last_n, 1);
    assert_true(tg_array_get_flat(o0, 0) == 23);
    int64_t sz[2] = {3, 0};
    tg_array *e = tg_array_new(TG_FLOAT64, 2, sz);
    log = (iter_log){0};
    run_axpy(e, e, e, &log, true);
    assert_int_equal(log.calls, 0);
    tg_array *arrs[] = {x, y, o, yb, x2, o2, xt, ot, zt, a0, b0, o0, e};
    for (size_t i = 0; i < TG_ARRAY_LEN(arrs); i++) tg_array_free(arrs[i]);
}

/* Above TG_PARALLEL_MIN the work is split over threads; every element is
 * still written exactly once, for many rows and for one long row. */
static void test_iter_parallel(void **state) {
    (void)state;
    int64_t shapes[3][2] = {{300, 301}, {1, 200003}, {3, 70001}};
    for (int c = 0; c < 3; c++) {
        tg_array *x = iota(TG_FLOAT64, 2, shapes[c]);
        int64_t rs[2] = {1, shapes[c][1]};
        tg_array *y = iota(TG_FLOAT64, 2, rs); /* broadcast over rows */
        tg_array *o = tg_array_new(TG_FLOAT64, 2, shapes[c]);
        iter_log log = {0};
        run_axpy(o, x, y, &log, true);
        int64_t n = tg_array_size(o), cols = shapes[c][1];
        const double *po = tg_array_data(o);
        for (int64_t i = 0; i < n; i++)
            if (po[i] != 10.0 * (double)i + (double)(i % cols))
                fail_msg("shape (%lld, %lld): element %lld is %g", (long long)shapes[c][0],
                         (long long)cols, (long long)i, po[i]);
        tg_array_free(x);
        tg_array_free(y);
        tg_array_free(o);
    }
}

/* ---- printing, compared with np.array2string(a, separator=", ") ---- */

static char *print_to_string(const tg_array *a) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tg_array_print(f, a);
    fclose(f);
    return buf;
}

static void check_print(const tg_array *a, const char *want) {
    char *got = print_to_string(a);
    if (strcmp(got, want) != 0) fail_msg("printed:\n%s\nwant:\n%s", got, want);
    free(got);
}

static void test_print_like_numpy(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    double d3[3] = {0, 0.5, 1};
    int64_t n3 = 3, n2 = 2, s234[3] = {2, 3, 4}, s2k[2] = {2, 1000}, s203[3] = {2, 0, 3};
    tg_array *a = tg_array_new_from(TG_FLOAT64, 1, &n3, d3);
    check_print(a, "float64 (3,)\n[0. , 0.5, 1. ]\n");
    tg_array *b = iota(TG_INT64, 3, s234);
    check_print(b, "int64 (2, 3, 4)\n"
                   "[[[ 0,  1,  2,  3],\n  [ 4,  5,  6,  7],\n  [ 8,  9, 10, 11]],\n\n"
                   " [[12, 13, 14, 15],\n  [16, 17, 18, 19],\n  [20, 21, 22, 23]]]\n");
    tg_array *c = iota(TG_FLOAT64, 2, s2k);
    check_print(c, "float64 (2, 1000)\n"
                   "[[0.000e+00, 1.000e+00, 2.000e+00, ..., 9.970e+02, 9.980e+02, 9.990e+02],\n"
                   " [1.000e+03, 1.001e+03, 1.002e+03, ..., 1.997e+03, 1.998e+03, 1.999e+03]]\n");
    uint8_t bo[2] = {1, 0};
    tg_array *d = tg_array_new_from(TG_BOOL, 1, &n2, bo);
    check_print(d, "bool (2,)\n[ True, False]\n");
    tg_array *e = tg_array_new_scalar(TG_FLOAT64, 3);
    check_print(e, "float64 ()\n3.\n");
    double nf[3] = {1.5, NAN, -INFINITY};
    tg_array *f = tg_array_new_from(TG_FLOAT64, 1, &n3, nf);
    check_print(f, "float64 (3,)\n[ 1.5,  nan, -inf]\n");
    uint16_t hf[2] = {0x2e66, 0x3400}; /* float16 0.1, 0.25 */
    tg_array *g = tg_array_new_from(TG_FLOAT16, 1, &n2, hf);
    check_print(g, "float16 (2,)\n[0.1 , 0.25]\n");
    float third = 1.0f / 3;
    int64_t n1 = 1;
    tg_array *h = tg_array_new_from(TG_FLOAT32, 1, &n1, &third);
    check_print(h, "float32 (1,)\n[0.33333334]\n");
    uint64_t u[2] = {UINT64_MAX, 5};
    tg_array *i = tg_array_new_from(TG_UINT64, 1, &n2, u);
    check_print(i, "uint64 (2,)\n[18446744073709551615,                    5]\n");
    double sm[2] = {1e-5, 1};
    tg_array *j = tg_array_new_from(TG_FLOAT64, 1, &n2, sm);
    check_print(j, "float64 (2,)\n[1.e-05, 1.e+00]\n");
    tg_array *k = tg_array_new(TG_FLOAT64, 3, s203);
    check_print(k, "float64 (2, 0, 3)\n[]\n");
    double nz[2] = {-0.0, 1e16};
    tg_array *l = tg_array_new_from(TG_FLOAT64, 1, &n2, nz);
    check_print(l, "float64 (2,)\n[-0.e+00,  1.e+16]\n");
    /* A strided view prints its own elements. */
    tg_array *bt = tg_array_view_slice(b, 2, TG_SLICE_NONE, TG_SLICE_NONE, -3, ctx);
    check_print(bt, "int64 (2, 3, 2)\n"
                    "[[[ 3,  0],\n  [ 7,  4],\n  [11,  8]],\n\n"
                    " [[15, 12],\n  [19, 16],\n  [23, 20]]]\n");
    tg_array *arrs[] = {a, b, c, d, e, f, g, h, i, j, k, l, bt};
    for (size_t x = 0; x < TG_ARRAY_LEN(arrs); x++) tg_array_free(arrs[x]);
    tg_ctx_free(ctx);
}

/* tg_array_brief: the values on one line (NumPy's repr, its newlines
 * and indents single spaces), or "(shape) of v" when every element is
 * the same; nothing for anything else. Expected texts from NumPy 1.24:
 * repr(np.arange(4).reshape(2, 1, 2)) is "[[[0, 1]],\n\n [[2, 3]]]". */
static void check_brief(const tg_array *a, int64_t max, const char *want) {
    tg_str b = {0};
    bool got = tg_array_brief(a, max, &b);
    if (!want) {
        assert_false(got);
        assert_int_equal(b.len, 0);
    } else {
        assert_true(got);
        if (!b.s || strcmp(b.s, want)) fail_msg("brief: '%s', want '%s'", b.s ? b.s : "", want);
    }
    tg_str_free(&b);
}

static void test_brief(void **state) {
    (void)state;
    double d3[3] = {0, 0.5, 1}, same[5] = {2.5, 2.5, 2.5, 2.5, 2.5};
    int64_t n3 = 3, n5 = 5, n6 = 6, s22[2] = {2, 2}, s212[3] = {2, 1, 2}, s2k[2] = {2, 1000}, s203[3] = {2, 0, 3};
    tg_array *a = tg_array_new_from(TG_FLOAT64, 1, &n3, d3);
    check_brief(a, 8, "[0. , 0.5, 1. ]");
    check_brief(a, 2, NULL); /* three different values */
    int64_t m22[4] = {1, 2, 3, 4};
    tg_array *b = tg_array_new_from(TG_INT64, 2, s22, m22);
    check_brief(b, 8, "[[1, 2], [3, 4]]");
    tg_array *c = iota(TG_INT64, 3, s212);
    check_brief(c, 8, "[[[0, 1]], [[2, 3]]]");
    tg_array *d = tg_array_new_scalar(TG_FLOAT64, 3);
    check_brief(d, 8, "3.");
    tg_array *e = tg_array_new(TG_FLOAT64, 2, s2k); /* zeros */
    check_brief(e, 8, "(2, 1000) of 0.");
    tg_array *f = tg_array_new_from(TG_FLOAT64, 1, &n5, same);
    check_brief(f, 4, "(5,) of 2.5");
    check_brief(f, 8, "[2.5, 2.5, 2.5, 2.5, 2.5]");
    double nn[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    tg_array *g = tg_array_new_from(TG_FLOAT64, 1, &n6, nn);
    check_brief(g, 2, "(6,) of nan");
    tg_array *h = tg_array_new(TG_FLOAT64, 3, s203);
    check_brief(h, 8, "[]");
    float third[3] = {1.0f / 3, 1.0f / 3, 1.0f / 3};
    tg_array *i = tg_array_new_from(TG_FLOAT32, 1, &n3, third);
    check_brief(i, 2, "(3,) of 0.33333334");
    /* equal as doubles, not as int64s; -0. and 0. print apart */
    int64_t big[3] = {INT64_C(4611686018427387904), INT64_C(4611686018427387905), INT64_C(4611686018427387904)};
    tg_array *j = tg_array_new_from(TG_INT64, 1, &n3, big);
    check_brief(j, 2, NULL);
    double zeros[3] = {0.0, -0.0, 0.0};
    tg_array *k = tg_array_new_from(TG_FLOAT64, 1, &n3, zeros);
    check_brief(k, 2, NULL);
    /* a strided view: every other element of [7, 1, 7, 2, 7, 3] */
    int64_t six = 6, sv[6] = {7, 1, 7, 2, 7, 3};
    tg_array *l = tg_array_new_from(TG_INT64, 1, &six, sv);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *m = tg_array_view_slice(l, 0, 0, TG_SLICE_NONE, 2, ctx);
    check_brief(m, 2, "(3,) of 7");
    tg_array *arrs[] = {a, b, c, d, e, f, g, h, i, j, k, l, m};
    for (size_t x = 0; x < TG_ARRAY_LEN(arrs); x++) tg_array_free(arrs[x]);
    tg_ctx_free(ctx);
}

/* ---- allocation failures ---- */

/* Run op with the allocator failing at the 0th, 1st, ... attempt until it
 * succeeds: each failure must be clean (NULL or an error, nothing
 * leaked), and the final success must leak nothing once freed. */
typedef tg_array *(*alloc_op)(const tg_array *src, tg_ctx *ctx);

static tg_array *op_copy(const tg_array *a, tg_ctx *ctx) {
    (void)ctx;
    return tg_array_copy(a, TG_FLOAT32);
}
static tg_array *op_transpose(const tg_array *a, tg_ctx *ctx) { return tg_array_view_transpose(a, NULL, ctx); }
static tg_array *op_slice(const tg_array *a, tg_ctx *ctx) { return tg_array_view_slice(a, 0, 1, 2, 1, ctx); }
static tg_array *op_dimshuffle(const tg_array *a, tg_ctx *ctx) {
    int order[3] = {1, -1, 0};
    return tg_array_view_dimshuffle(a, 3, order, ctx);
}
static tg_array *op_reshape_copy(const tg_array *a, tg_ctx *ctx) {
    tg_array *t = tg_array_view_transpose(a, NULL, ctx);
    if (!t) return NULL;
    int64_t n = -1;
    tg_array *r = tg_array_reshape(t, 1, &n, ctx);
    tg_array_free(t);
    return r;
}
static tg_array *op_new(const tg_array *a, tg_ctx *ctx) {
    (void)ctx;
    return tg_array_new(TG_INT64, a->ndim, a->shape);
}
static tg_array *op_prepare(const tg_array *a, tg_ctx *ctx) {
    tg_array *slot = NULL;
    if (tg_array_prepare(&slot, TG_FLOAT64, a->ndim, a->shape, ctx)) return NULL;
    return slot;
}

static void test_allocation_failures(void **state) {
    (void)state;
    alloc_op ops[] = {op_copy, op_transpose, op_slice, op_dimshuffle, op_reshape_copy, op_new, op_prepare};
    int64_t s[2] = {3, 4};
    tg_array *a = iota(TG_FLOAT64, 2, s);
    tg_ctx *ctx = tg_ctx_new();
    for (size_t k = 0; k < TG_ARRAY_LEN(ops); k++) {
        bool ok = false;
        for (int64_t fail = 0; fail < 50 && !ok; fail++) {
            alloc_count(fail);
            tg_ctx_clear(ctx);
            tg_array *r = ops[k](a, ctx);
            if (r) {
                ok = true;
                tg_array_free(r);
            }
            alloc_reset();
            if (g_alloc.live != 0)
                fail_msg("op %zu, failing from allocation %lld: %lld blocks leaked", k, (long long)fail,
                         (long long)g_alloc.live);
            if (!r && tg_ctx_status(ctx) != 0 && tg_ctx_status(ctx) != TG_ENOMEM)
                fail_msg("op %zu: status %d on allocation failure", k, tg_ctx_status(ctx));
        }
        assert_true(ok);
    }
    tg_array_free(a);
    tg_ctx_free(ctx);
}

/* ---- transparent huge pages for large buffers ---- */

static const void *huge_aligned(const tg_array *a) {
    uintptr_t huge = (uintptr_t)2 << 20;
    return (const void *)(((uintptr_t)tg_array_data((tg_array *)a) + huge - 1) & ~(huge - 1));
}

/* With TG_THP=1, a buffer of 4 MiB or more is offered for huge pages (its
 * 2 MiB-aligned part) and a smaller one is not; without it, or with
 * TG_THP=0, none is (read once per process: each case in a child, before
 * its first large buffer). Runs first. */
/* In the child: 0 when a 1 MiB buffer is not advised and a 16 MiB one
 * is exactly when *want. */
static int buffers_advised(void *want) {
    tg_array *small = tg_array_new(TG_FLOAT64, 1, (int64_t[]){1 << 17});
    tg_array *big = tg_array_new(TG_FLOAT64, 1, (int64_t[]){2 << 20});
    return !(small && big && !tu_advised_huge(tg_array_data(small)) &&
             tu_advised_huge(huge_aligned(big)) == *(bool *)want);
}

static void check_thp_child(const char *thp, bool want_big) {
    if (tu_child_env("TG_THP", thp, buffers_advised, &want_big))
        fail_msg("TG_THP=%s: a 16 MiB buffer should%s be advised", thp ? thp : "(unset)", want_big ? "" : " not");
}

static void test_large_buffers_advised_huge(void **state) {
    (void)state;
    struct stat st;
    if (stat("/sys/kernel/mm/transparent_hugepage", &st) != 0) skip(); /* kernel without THP */
    check_thp_child("1", true);
    check_thp_child(NULL, false);
    check_thp_child("0", false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_buffers_advised_huge),
        cmocka_unit_test(test_new_and_accessors),
        cmocka_unit_test(test_new_rejects_bad_arguments),
        cmocka_unit_test(test_transpose_shares_buffer),
        cmocka_unit_test(test_dimshuffle),
        cmocka_unit_test(test_slice_normalize_matches_python),
        cmocka_unit_test(test_slice_views_match_python),
        cmocka_unit_test(test_slice_3d_shares_buffer),
        cmocka_unit_test(test_reshape_view_or_copy),
        cmocka_unit_test(test_copy_converts_and_compacts),
        cmocka_unit_test(test_assign_broadcasts_and_casts),
        cmocka_unit_test(test_assign_overlapping_views),
        cmocka_unit_test(test_copy_same_dtype_layouts),
        cmocka_unit_test(test_assign_short_rows),
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_prepare_reuses_without_allocating),
        cmocka_unit_test(test_broadcast_shapes),
        cmocka_unit_test(test_iter_merges_axes),
        cmocka_unit_test(test_iter_parallel),
        cmocka_unit_test(test_print_like_numpy),
        cmocka_unit_test(test_brief),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
