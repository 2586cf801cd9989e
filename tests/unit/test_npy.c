/* .npy files: every file NumPy wrote in tests/data/npy (each dtype, C and
 * Fortran order, both byte orders, versions 1, 2 and 3) loads with the
 * values of tests/data/gen/npy.py; every malformed class is refused with a
 * one-line message naming the file; saves are byte-identical to NumPy's,
 * round-trip every dtype, and are atomic; no prefix or corruption of a
 * file crashes the reader; allocation failures are clean. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/tensor.h"
#include "testutil.h"

static char *data_path(const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/npy/%s", TG_TEST_DATA, name);
    return path;
}

/* A fresh empty folder for files written by a test. */
static void make_tmpdir(char *dir, size_t size) {
    snprintf(dir, size, "/tmp/tg_npy_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* ---- files written by NumPy ---- */

static void test_numpy_files_load(void **state) {
    (void)state;
    char line[512];
    FILE *f = fopen(data_path("EXPECT"), "r");
    assert_non_null(f);
    tg_ctx *ctx = tg_ctx_new();
    int n = 0, fortran = 0, big = 0, v2 = 0, v3 = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *name = strtok(line, "\t"), *dts = strtok(NULL, "\t"), *shp = strtok(NULL, "\t");
        tg_array *a = tg_npy_load(data_path(name), ctx);
        if (!a) fail_msg("%s: %s", name, tg_ctx_message(ctx));
        assert_int_equal(tg_array_dtype(a), tg_dtype_from_name(dts));
        int64_t shape[8];
        int nd = 0;
        for (char *t = shp ? strtok(shp, ",") : NULL; t; t = strtok(NULL, ",")) shape[nd++] = atoll(t);
        assert_int_equal(tg_array_ndim(a), nd);
        for (int d = 0; d < nd; d++) assert_int_equal(tg_array_shape(a)[d], shape[d]);
        assert_true(tg_array_is_contiguous(a));
        /* Values: arange(size) % 100 in C order (bools: odd). */
        for (int64_t i = 0; i < tg_array_size(a); i++) {
            double want = tg_array_dtype(a) == TG_BOOL ? (double)((i % 100) % 2 == 1) : (double)(i % 100);
            if (tg_array_get_flat(a, i) != want)
                fail_msg("%s: element %lld is %g, want %g", name, (long long)i, tg_array_get_flat(a, i), want);
        }
        /* The same bytes from memory give the same array. */
        size_t len;
        void *buf = tu_read_file(data_path(name), &len);
        tg_array *m = tg_npy_load_mem(buf, len, name, ctx);
        assert_non_null(m);
        assert_true(tg_array_equal(a, m));
        fortran += strstr(name, "_F") != NULL;
        big += strstr(name, "_be") != NULL;
        v2 += ((unsigned char *)buf)[6] == 2;
        v3 += ((unsigned char *)buf)[6] == 3;
        free(buf);
        tg_array_free(m);
        tg_array_free(a);
        n++;
    }
    fclose(f);
    tg_ctx_free(ctx);
    assert_true(n >= 45);
    assert_true(fortran >= 20 && big >= 18 && v2 >= 1 && v3 >= 1);
}

static void test_malformed_files_refused(void **state) {
    (void)state;
    char line[512];
    FILE *f = fopen(data_path("BAD"), "r");
    assert_non_null(f);
    tg_ctx *ctx = tg_ctx_new();
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *name = strtok(line, "\t"), *sub = strtok(NULL, "");
        tg_ctx_clear(ctx);
        tg_array *a = tg_npy_load(data_path(name), ctx);
        if (a) fail_msg("%s loaded", name);
        const char *msg = tg_ctx_message(ctx);
        if (!strstr(msg, sub) || !strstr(msg, name) || strchr(msg, '\n'))
            fail_msg("%s: '%s' lacks '%s' or the file name", name, msg, sub);
        /* The in-memory reader agrees and names what it was given. */
        size_t len;
        void *buf = tu_read_file(data_path(name), &len);
        tg_ctx_clear(ctx);
        assert_null(tg_npy_load_mem(buf, len, "input x", ctx));
        if (!strstr(tg_ctx_message(ctx), sub) || strncmp(tg_ctx_message(ctx), "input x: ", 9))
            fail_msg("%s from memory: '%s'", name, tg_ctx_message(ctx));
        free(buf);
        n++;
    }
    fclose(f);
    assert_true(n >= 30);
    /* Files that are not there or not files. */
    assert_null(tg_npy_load("/nonexistent/x.npy", ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EIO);
    assert_non_null(strstr(tg_ctx_message(ctx), "/nonexistent/x.npy: cannot open"));
    assert_null(tg_npy_load("/tmp", ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "not a regular file"));
    tg_ctx_free(ctx);
}

/* Every prefix of a good file, and single-byte corruptions of its header,
 * either load or fail cleanly (the sanitizers check "cleanly"). */
static void test_prefixes_and_corruption(void **state) {
    (void)state;
    const char *names[] = {"float64_C_le.npy", "int16_F_be.npy", "float64_v2.npy", "int16_v3.npy"};
    tg_ctx *ctx = tg_ctx_new();
    for (size_t k = 0; k < TG_ARRAY_LEN(names); k++) {
        size_t len;
        unsigned char *buf = tu_read_file(data_path(names[k]), &len);
        for (size_t n = 0; n < len; n++) {
            unsigned char *p = malloc(n ? n : 1); /* exact size: ASan sees overreads */
            memcpy(p, buf, n);
            assert_null(tg_npy_load_mem(p, n, names[k], ctx));
            free(p);
        }
        uint64_t seed = 99;
        for (int i = 0; i < 3000; i++) {
            unsigned char *p = malloc(len);
            memcpy(p, buf, len);
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            size_t at = (size_t)(seed >> 33) % 128;
            p[at] = (unsigned char)(seed >> 20);
            tg_array *a = tg_npy_load_mem(p, len, names[k], ctx);
            tg_array_free(a);
            free(p);
        }
        free(buf);
    }
    tg_ctx_free(ctx);
}

/* A header promising far more than the file holds is refused before any
 * large allocation. */
static void test_lying_header_allocates_nothing_big(void **state) {
    (void)state;
    static const char hdr[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000,), }";
    unsigned char buf[256];
    size_t hl = sizeof hdr - 1, pad = (64 - (10 + hl + 1) % 64) % 64, total = 10 + hl + pad + 1;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)((total - 10) & 0xff);
    buf[9] = (unsigned char)((total - 10) >> 8);
    memcpy(buf + 10, hdr, hl);
    memset(buf + 10 + hl, ' ', pad);
    buf[total - 1] = '\n';
    memset(buf + total, 0, 16);
    tg_ctx *ctx = tg_ctx_new();
    assert_null(tg_npy_load_mem(buf, total + 16, "lie", ctx));
    assert_string_equal(tg_ctx_message(ctx),
                        "lie: truncated .npy data: the header promises 800000000000 bytes, the file holds 16");
    tg_ctx_free(ctx);
}

/* Bool bytes other than 0 and 1 read as True, as NumPy reads them. */
static void test_bool_bytes_normalised(void **state) {
    (void)state;
    size_t len;
    unsigned char *buf = tu_read_file(data_path("bool_C_le.npy"), &len);
    buf[len - 24] = 2;
    buf[len - 23] = 255;
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = tg_npy_load_mem(buf, len, "b", ctx);
    assert_non_null(a);
    const uint8_t *p = tg_array_data(a);
    assert_int_equal(p[0], 1);
    assert_int_equal(p[1], 1);
    assert_int_equal(p[2], 0);
    tg_array_free(a);
    free(buf);
    tg_ctx_free(ctx);
}

/* ---- writing ---- */

/* tg writes exactly the bytes NumPy writes for C-order little-endian
 * arrays (np.save, format 1.0). */
static void test_save_matches_numpy_bytes(void **state) {
    (void)state;
    const char *names[] = {"float64_C_le.npy", "bool_C_le.npy", "uint16_C_le.npy", "scalar_int32.npy",
                           "empty_float32.npy", "float32_F_2d.npy"};
    char dir[64], out[128];
    make_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out.npy", dir);
    tg_ctx *ctx = tg_ctx_new();
    for (size_t k = 0; k < TG_ARRAY_LEN(names); k++) {
        tg_array *a = tg_npy_load(data_path(names[k]), ctx);
        assert_non_null(a);
        assert_int_equal(tg_npy_save(out, a, ctx), 0);
        size_t n1, n2;
        unsigned char *want = tu_read_file(data_path(names[k]), &n1), *got = tu_read_file(out, &n2);
        if (strstr(names[k], "_F")) {
            /* NumPy kept Fortran order; tg writes C order: same header
             * length, same values. */
            tg_array *b = tg_npy_load(out, ctx);
            assert_true(tg_array_equal(a, b));
            assert_non_null(strstr((char *)got + 10, "'fortran_order': False"));
            tg_array_free(b);
        } else if (n1 != n2 || memcmp(want, got, n1) != 0) {
            fail_msg("%s: tg's bytes differ from NumPy's", names[k]);
        }
        assert_int_equal((n2 - tg_dtype_size(tg_array_dtype(a)) * (size_t)tg_array_size(a)) % 64, 0);
        free(want);
        free(got);
        tg_array_free(a);
    }
    unlink(out);
    rmdir(dir);
    tg_ctx_free(ctx);
}

/* Every dtype, 0-d to 3-d, strided sources, round-trips through a file. */
static void test_save_round_trips(void **state) {
    (void)state;
    char dir[64], out[128];
    make_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/rt.npy", dir);
    tg_ctx *ctx = tg_ctx_new();
    int64_t shapes[4][3] = {{0}, {7}, {3, 5}, {2, 3, 4}};
    for (int dt = 0; dt < TG_NDTYPES; dt++)
        for (int nd = 0; nd <= 3; nd++) {
            tg_array *a = tg_array_new((tg_dtype)dt, nd, shapes[nd]);
            for (int64_t i = 0; i < tg_array_size(a); i++)
                tg_store_f64((tg_dtype)dt, (char *)tg_array_data(a) + i * (int64_t)tg_dtype_size(dt),
                             (double)(i * 37 % 23) - 5.5);
            tg_array *src = nd >= 2 ? tg_array_view_transpose(a, NULL, ctx) : tg_array_ref(a);
            assert_int_equal(tg_npy_save(out, src, ctx), 0);
            tg_array *b = tg_npy_load(out, ctx);
            if (!b || !tg_array_equal(src, b))
                fail_msg("%s %d-d does not round-trip: %s", tg_dtype_name(dt), nd, tg_ctx_message(ctx));
            tg_array_free(a);
            tg_array_free(src);
            tg_array_free(b);
        }
    /* The folder holds the file and nothing else (no temporaries left). */
    assert_int_equal(count_entries(dir), 1);
    unlink(out);
    rmdir(dir);
    tg_ctx_free(ctx);
}

/* A failed save leaves the old file intact and no temporary behind. */
static void test_save_is_atomic(void **state) {
    (void)state;
    char dir[64], path[128], sub[128];
    make_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/keep.npy", dir);
    tg_ctx *ctx = tg_ctx_new();
    int64_t n = 3;
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    /* The target is a non-empty folder: the final rename fails. */
    snprintf(sub, sizeof sub, "%s/dir.npy", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    char inner[160];
    snprintf(inner, sizeof inner, "%s/x", sub);
    fclose(fopen(inner, "w"));
    assert_int_equal(tg_npy_save(sub, a, ctx), TG_EIO);
    assert_non_null(strstr(tg_ctx_message(ctx), sub));
    assert_int_equal(count_entries(dir), 2); /* keep.npy and dir.npy: no temporary */
    assert_int_equal(tg_npy_save("/nonexistent-dir/x.npy", a, ctx), TG_EIO);
    assert_non_null(strstr(tg_ctx_message(ctx), "/nonexistent-dir/x.npy"));
    size_t len;
    char *old = tu_read_file(path, &len);
    assert_int_equal(len, 3);
    free(old);
    /* Success replaces it. */
    assert_int_equal(tg_npy_save(path, a, ctx), 0);
    tg_array *b = tg_npy_load(path, ctx);
    assert_true(tg_array_equal(a, b));
    assert_int_equal(count_entries(dir), 2);
    tg_array_free(a);
    tg_array_free(b);
    unlink(inner);
    rmdir(sub);
    unlink(path);
    rmdir(dir);
    tg_ctx_free(ctx);
}

/* A contiguous array goes to the file from where it lies: saving 8 MiB
 * holds no second 8 MiB (it made a copy of header and data first, so that
 * a 2 GiB output took 2 GiB more); a transposed view is copied once. The
 * bytes are still NumPy's: the header, then the data in C order. */
static void test_save_streams_contiguous(void **state) {
    (void)state;
    char dir[64], out[128];
    make_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/big.npy", dir);
    tg_ctx *ctx = tg_ctx_new();
    int64_t shape[2] = {1024, 1024};
    tg_array *a = tg_array_new(TG_FLOAT64, 2, shape);
    double *d = (double *)a->data;
    for (int64_t i = 0; i < shape[0] * shape[1]; i++) d[i] = (double)i * 0.5 - 7.0;
    size_t nbytes = (size_t)(shape[0] * shape[1]) * sizeof(double);
    tu_count_begin();
    assert_int_equal(tg_npy_save(out, a, ctx), 0);
    tu_alloc_count c = tu_count_end();
    if (c.peak > (double)nbytes / 8)
        fail_msg("saving %zu contiguous bytes held %.0f bytes at once", nbytes, c.peak);
    size_t len;
    unsigned char *f = (unsigned char *)tu_read_file(out, &len);
    assert_int_equal(len, 128 + nbytes); /* NumPy's header for this shape is 128 bytes */
    assert_memory_equal(f + 128, d, nbytes);
    free(f);
    /* The transpose: one copy, and the file holds it in C order. */
    int perm[2] = {1, 0};
    tg_array *t = tg_array_view_transpose(a, perm, ctx);
    assert_non_null(t);
    tu_count_begin();
    assert_int_equal(tg_npy_save(out, t, ctx), 0);
    c = tu_count_end();
    assert_true(c.peak >= (double)nbytes && c.peak < 1.5 * (double)nbytes);
    f = (unsigned char *)tu_read_file(out, &len);
    assert_int_equal(len, 128 + nbytes);
    double got;
    memcpy(&got, f + 128 + 8 * (3 * 1024 + 5), 8); /* t[3][5] = a[5][3] */
    assert_true(got == d[5 * 1024 + 3]);
    free(f);
    tg_array_free(t);
    tg_array_free(a);
    unlink(out);
    rmdir(dir);
    tg_ctx_free(ctx);
}

/* ---- allocation failures ---- */

typedef struct alloc_state {
    int64_t live, calls, fail_from;
} alloc_state;

static void *counting_realloc(void *ud, void *p, size_t n) {
    alloc_state *s = ud;
    if (n == 0) {
        if (p) s->live--;
        free(p);
        return NULL;
    }
    if (s->fail_from >= 0 && s->calls++ >= s->fail_from) return NULL;
    void *q = realloc(p, n);
    if (q && !p) s->live++;
    return q;
}

static void test_allocation_failures(void **state) {
    (void)state;
    char dir[64], out[128];
    make_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/a.npy", dir);
    tg_ctx *ctx = tg_ctx_new();
    const char *names[] = {"float64_C_le.npy", "int32_F_be.npy"};
    for (size_t k = 0; k < TG_ARRAY_LEN(names); k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s", data_path(names[k]));
        bool loaded = false, saved = false;
        for (int64_t fail = 0; fail < 40 && !(loaded && saved); fail++) {
            alloc_state s = {0, 0, fail};
            tg_set_allocator(counting_realloc, &s);
            tg_ctx_clear(ctx);
            tg_array *a = tg_npy_load(path, ctx);
            if (a) {
                loaded = true;
                int rc = tg_npy_save(out, a, ctx);
                if (rc == 0)
                    saved = true;
                else
                    assert_int_equal(rc, TG_ENOMEM);
                tg_array_free(a);
            } else {
                assert_int_equal(tg_ctx_status(ctx), TG_ENOMEM);
            }
            tg_set_allocator(NULL, NULL);
            if (s.live) fail_msg("%s failing at allocation %lld: %lld blocks leaked", names[k],
                                 (long long)fail, (long long)s.live);
        }
        assert_true(loaded && saved);
    }
    assert_int_equal(count_entries(dir), 1);
    unlink(out);
    rmdir(dir);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numpy_files_load),
        cmocka_unit_test(test_malformed_files_refused),
        cmocka_unit_test(test_prefixes_and_corruption),
        cmocka_unit_test(test_lying_header_allocates_nothing_big),
        cmocka_unit_test(test_bool_bytes_normalised),
        cmocka_unit_test(test_save_matches_numpy_bytes),
        cmocka_unit_test(test_save_round_trips),
        cmocka_unit_test(test_save_is_atomic),
        cmocka_unit_test(test_save_streams_contiguous),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
