/* Arrays (dtype tables and half floats are test_dtype.c's): casts, views that
 * share buffers, reshape, broadcasting assignment, .npy files written by
 * NumPy in every dtype, order and byte order, malformed .npy files. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/tensor.h"
#include "testutil.h"

static void test_casts(void **state) {
    (void)state;
    double in[] = {-1.7, 2.9, 255.0, 0.0, -0.0};
    int64_t n = 5;
    tg_array *a = tg_array_new_from(TG_FLOAT64, 1, &n, in);
    tg_array *i8 = tg_array_copy(a, TG_INT8), *b = tg_array_copy(a, TG_BOOL), *u8 = tg_array_copy(a, TG_UINT8);
    int8_t *pi = tg_array_data(i8);
    uint8_t *pb = tg_array_data(b), *pu = tg_array_data(u8);
    assert_int_equal(pi[0], -1); /* truncation toward zero, as NumPy */
    assert_int_equal(pi[1], 2);
    assert_int_equal(pu[2], 255);
    assert_int_equal(pb[0], 1);
    assert_int_equal(pb[3], 0);
    assert_int_equal(pb[4], 0);
    /* integer wrap-around, as NumPy's astype */
    int64_t big[] = {300, -1, 65536 + 7};
    int64_t three = 3;
    tg_array *bi = tg_array_new_from(TG_INT64, 1, &three, big);
    tg_array *b8 = tg_array_copy(bi, TG_UINT8), *b16 = tg_array_copy(bi, TG_INT16);
    assert_int_equal(((uint8_t *)tg_array_data(b8))[0], 44);
    assert_int_equal(((uint8_t *)tg_array_data(b8))[1], 255);
    assert_int_equal(((int16_t *)tg_array_data(b16))[2], 7);
    tg_array *f16 = tg_array_copy(a, TG_FLOAT16);
    assert_int_equal(((uint16_t *)tg_array_data(f16))[1], tg_float_to_half(2.9f));
    tg_array *arrs[] = {a, i8, b, u8, bi, b8, b16, f16};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) tg_array_free(arrs[i]);
}

static tg_array *iota(tg_dtype dt, int nd, const int64_t *shape) {
    tg_array *a = tg_array_new(dt, nd, shape);
    for (int64_t i = 0; i < tg_array_size(a); i++) tg_store_f64(dt, (char *)tg_array_data(a) + i * (int64_t)tg_dtype_size(dt), (double)i);
    return a;
}

static void test_views_share_buffers(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[3] = {2, 3, 4};
    tg_array *a = iota(TG_FLOAT64, 3, shape);
    int axes[3] = {2, 0, 1};
    tg_array *t = tg_array_view_transpose(a, axes, ctx);
    assert_int_equal(tg_array_shape(t)[0], 4);
    assert_false(tg_array_is_contiguous(t));
    /* t[k, i, j] = a[i, j, k] = 12 i + 4 j + k */
    assert_true(tg_array_get_flat(t, 1 * 6 + 1 * 3 + 2) == 12 * 1 + 4 * 2 + 1);
    /* a slice a[:, ::-2, 1:3] */
    tg_array *s = tg_array_view_slice(a, 1, TG_SLICE_NONE, TG_SLICE_NONE, -2, ctx);
    tg_array *s2 = tg_array_view_slice(s, 2, 1, 3, 1, ctx);
    assert_int_equal(tg_array_shape(s2)[1], 2);
    assert_int_equal(tg_array_shape(s2)[2], 2);
    assert_true(tg_array_get_flat(s2, 0) == 4 * 2 + 1);     /* a[0, 2, 1] */
    assert_true(tg_array_get_flat(s2, 3) == 4 * 0 + 2);     /* a[0, 0, 2] */
    /* Writing through a view changes the base: they share the buffer. */
    ((double *)tg_array_data(s2))[0] = -1;
    assert_true(tg_array_get_flat(a, 9) == -1);
    int order[4] = {0, -1, 1, 2};
    tg_array *d = tg_array_view_dimshuffle(a, 4, order, ctx);
    assert_int_equal(tg_array_ndim(d), 4);
    assert_int_equal(tg_array_shape(d)[1], 1);
    int drop[2] = {1, 2};
    assert_null(tg_array_view_dimshuffle(a, 2, drop, ctx)); /* axis 0 has length 2 */
    assert_non_null(strstr(tg_ctx_message(ctx), "cannot drop axis 0"));
    /* Reshape: a view of contiguous data, a copy of a transpose. */
    int64_t r[2] = {-1, 6};
    tg_array *rv = tg_array_reshape(a, 2, r, ctx);
    assert_ptr_equal(tg_array_data(rv), tg_array_data(a));
    tg_array *rc = tg_array_reshape(t, 2, r, ctx);
    assert_ptr_not_equal(tg_array_data(rc), tg_array_data(a));
    assert_true(tg_array_get_flat(rc, 1) == 4); /* t[0, 0, 1] = a[0, 1, 0] */
    int64_t bad[2] = {5, 5};
    assert_null(tg_array_reshape(a, 2, bad, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "cannot reshape array of size 24 into shape (5, 5)"));
    tg_array *arrs[] = {a, t, s, s2, d, rv, rc};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) tg_array_free(arrs[i]);
    tg_ctx_free(ctx);
}

static void test_slice_normalize_matches_python(void **state) {
    (void)state;
    /* (len, start, stop, step) -> (count, start) from Python's slice.indices */
    struct { int64_t len, a, b, s, n, start; } c[] = {
        {5, TG_SLICE_NONE, TG_SLICE_NONE, -1, 5, 4}, {5, -2, TG_SLICE_NONE, 1, 2, 3},
        {5, 10, TG_SLICE_NONE, -2, 3, 4},           {5, 1, -1, 2, 2, 1},
        {5, -10, 10, 3, 2, 0},                       {0, TG_SLICE_NONE, TG_SLICE_NONE, -1, 0, -1},
        {5, 3, 1, 1, 0, 3},                          {5, TG_SLICE_NONE, -6, -1, 5, 4},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int64_t a = c[i].a, b = c[i].b, s = c[i].s;
        int64_t n = tg_slice_normalize(c[i].len, &a, &b, &s);
        if (n != c[i].n || (n && a != c[i].start))
            fail_msg("case %zu: got %lld elements from %lld, want %lld from %lld", i, (long long)n, (long long)a,
                     (long long)c[i].n, (long long)c[i].start);
    }
}

static void test_assign_broadcasts(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t ds[2] = {2, 3}, ss[1] = {3}, bs[1] = {2};
    tg_array *d = tg_array_new(TG_FLOAT32, 2, ds);
    tg_array *s = iota(TG_INT32, 1, ss), *b = iota(TG_INT32, 1, bs);
    assert_int_equal(tg_array_assign(d, s, ctx), 0);
    assert_true(tg_array_get_flat(d, 4) == 1);
    assert_int_equal(tg_array_assign(d, b, ctx), TG_ESHAPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "could not broadcast shape (2,) into shape (2, 3)"));
    tg_array_free(d);
    tg_array_free(s);
    tg_array_free(b);
    tg_ctx_free(ctx);
}

static void test_npy_from_numpy(void **state) {
    (void)state;
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/npy/EXPECT", TG_TEST_DATA);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    tg_ctx *ctx = tg_ctx_new();
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *name = strtok(line, "\t"), *dts = strtok(NULL, "\t"), *shp = strtok(NULL, "\t");
        snprintf(path, sizeof path, "%s/npy/%s", TG_TEST_DATA, name);
        tg_array *a = tg_npy_load(path, ctx);
        if (!a) fail_msg("%s: %s", name, tg_ctx_message(ctx));
        assert_int_equal(tg_array_dtype(a), tg_dtype_from_name(dts));
        int64_t shape[8];
        int nd = 0;
        for (char *t = shp ? strtok(shp, ",") : NULL; t; t = strtok(NULL, ",")) shape[nd++] = atoll(t);
        assert_int_equal(tg_array_ndim(a), nd);
        for (int d = 0; d < nd; d++) assert_int_equal(tg_array_shape(a)[d], shape[d]);
        for (int64_t i = 0; i < tg_array_size(a); i++) {
            double want = tg_array_dtype(a) == TG_BOOL ? (double)((i % 100) % 2 == 1) : (double)(i % 100);
            if (tg_array_get_flat(a, i) != want)
                fail_msg("%s: element %lld is %g, want %g", name, (long long)i, tg_array_get_flat(a, i), want);
        }
        /* Write it back and read it again. */
        char out[] = "/tmp/tg_npy_XXXXXX";
        int fd = mkstemp(out);
        close(fd);
        assert_int_equal(tg_npy_save(out, a, ctx), 0);
        tg_array *b = tg_npy_load(out, ctx);
        assert_non_null(b);
        assert_true(tg_array_equal(a, b));
        unlink(out);
        tg_array_free(a);
        tg_array_free(b);
        n++;
    }
    fclose(f);
    tg_ctx_free(ctx);
    assert_true(n >= 40);
}

static void test_npy_malformed(void **state) {
    (void)state;
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/npy/BAD", TG_TEST_DATA);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    tg_ctx *ctx = tg_ctx_new();
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *name = strtok(line, "\t"), *sub = strtok(NULL, "");
        snprintf(path, sizeof path, "%s/npy/%s", TG_TEST_DATA, name);
        tg_ctx_clear(ctx);
        tg_array *a = tg_npy_load(path, ctx);
        if (a) fail_msg("%s loaded", name);
        if (!strstr(tg_ctx_message(ctx), sub) || !strstr(tg_ctx_message(ctx), name))
            fail_msg("%s: '%s' lacks '%s' or the file name", name, tg_ctx_message(ctx), sub);
        n++;
    }
    fclose(f);
    tg_ctx_free(ctx);
    assert_true(n >= 10);
}

/* A failed save leaves the previous file intact. */
/* TG_PAR_FOR runs every iteration once; with one thread it opens no
 * OpenMP team (libgomp's costs a futex system call), with two it does. */
static void test_par_for(void **state) {
    (void)state;
    enum { N = 1000 };
    static int hits[N];
    for (int nth = 0; nth <= 2; nth++) {
        memset(hits, 0, sizeof hits);
        int in_team = 0, levels = 0;
        TG_PAR_FOR(nth, i, N, {
            hits[i]++;
            if (omp_in_parallel()) __atomic_fetch_add(&in_team, 1, __ATOMIC_RELAXED);
            if (i == 0) levels = omp_get_level();
        });
        for (int i = 0; i < N; i++) assert_int_equal(hits[i], 1);
        if (nth <= 1) {
            assert_int_equal(in_team, 0);
            assert_int_equal(levels, 0);
        } else {
            assert_int_equal(levels, 1);
            if (omp_get_thread_limit() >= 2) assert_int_equal(in_team, N);
        }
    }
}

static void test_npy_save_atomic(void **state) {
    (void)state;
    char path[] = "/tmp/tg_atomic_XXXXXX";
    int fd = mkstemp(path);
    assert_int_equal(write(fd, "old", 3), 3);
    close(fd);
    tg_ctx *ctx = tg_ctx_new();
    int64_t n = 3;
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    assert_int_equal(tg_npy_save("/nonexistent-dir/x.npy", a, ctx), TG_EIO);
    assert_int_equal(tg_npy_save(path, a, ctx), 0);
    tg_array *b = tg_npy_load(path, ctx);
    assert_true(tg_array_equal(a, b));
    tg_array_free(a);
    tg_array_free(b);
    unlink(path);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_casts),
        cmocka_unit_test(test_views_share_buffers),
        cmocka_unit_test(test_slice_normalize_matches_python),
        cmocka_unit_test(test_assign_broadcasts),
        cmocka_unit_test(test_npy_from_numpy),
        cmocka_unit_test(test_npy_malformed),
        cmocka_unit_test(test_npy_save_atomic),
        cmocka_unit_test(test_par_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
