/* .npz archives: what NumPy's savez and savez_compressed wrote in
 * tests/data/npz (tests/data/gen/npz.py) loads with the values of the
 * formulas there; archives tg writes load again, are the same bytes each
 * time, and are saved atomically; 65,536 members take the zip64 end
 * record; damaged and hostile archives (every prefix, byte flips, each
 * structural lie) are refused with one line naming the archive and the
 * member, never a crash; allocation failures are clean. NumPy reading
 * tg's archives is checked by tests/tools/tgc_run.sh. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <omp.h>
#include <zlib.h>

#include "io/io.h"
#include "io/tgf.h"
#include "tensor/tensor.h"
#include "testutil.h"

static const char *data_path(const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/npz/%s", TG_TEST_DATA, name);
    return path;
}

/* A new empty file in /tmp, its path into path. */
static void tmp_file(char *path, size_t size, const char *stem) {
    snprintf(path, size, "/tmp/%s_XXXXXX", stem);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

static void put16(unsigned char *p, unsigned v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Open the archive at buf (a copy of exactly len bytes, so that the
 * sanitizers see any read past it) and read every member: the first
 * error's message, or NULL when everything read. */
static char *open_and_read_all(const unsigned char *buf, size_t len, tg_ctx *ctx) {
    static char msg[TG_CTX_MSG_MAX];
    unsigned char *p = malloc(len ? len : 1);
    memcpy(p, buf, len);
    tg_ctx_clear(ctx);
    tg_npz *z = tg_npz_open_mem(p, len, "t.npz", ctx);
    bool ok = z != NULL;
    for (int i = 0; ok && i < tg_npz_count(z); i++) {
        tg_array *a = tg_npz_read(z, i, ctx);
        ok = a != NULL;
        tg_array_free(a);
    }
    tg_npz_close(z);
    free(p);
    if (ok) return NULL;
    snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
    assert_non_null(strstr(msg, "t.npz"));
    assert_null(strchr(msg, '\n'));
    return msg;
}

/* ---- archives written by NumPy ---- */

static tg_array *read_named(const tg_npz *z, const char *name, tg_ctx *ctx) {
    int i = tg_npz_find(z, name);
    if (i < 0) fail_msg("no array '%s'", name);
    tg_array *a = tg_npz_read(z, i, ctx);
    if (!a) fail_msg("%s", tg_ctx_message(ctx));
    return a;
}

static void check_numpy_arrays(const char *file, bool with_big) {
    tg_ctx *ctx = tg_ctx_new();
    tg_npz *z = tg_npz_open(data_path(file), ctx);
    if (!z) fail_msg("%s", tg_ctx_message(ctx));
    static const char *const names[] = {"f8", "i2_be", "u1_F", "b", "scalar", "empty", "big"};
    assert_int_equal(tg_npz_count(z), with_big ? 7 : 6);
    for (int i = 0; i < tg_npz_count(z); i++) assert_string_equal(tg_npz_name(z, i), names[i]);
    assert_int_equal(tg_npz_find(z, "nope"), -1);
    assert_int_equal(tg_npz_find(z, "f8.npy"), -1);

    tg_array *a = read_named(z, "f8", ctx);
    assert_int_equal(tg_array_dtype(a), TG_FLOAT64);
    assert_int_equal(tg_array_ndim(a), 2);
    assert_int_equal(tg_array_shape(a)[0], 3);
    assert_int_equal(tg_array_shape(a)[1], 4);
    for (int i = 0; i < 12; i++) assert_true(tg_array_get_flat(a, i) == i / 4.0);
    tg_array_free(a);

    a = read_named(z, "i2_be", ctx); /* big-endian on disk */
    assert_int_equal(tg_array_dtype(a), TG_INT16);
    for (int i = 0; i < 6; i++) assert_int_equal(((const int16_t *)tg_array_data(a))[i], i - 3);
    tg_array_free(a);

    a = read_named(z, "u1_F", ctx); /* Fortran order on disk, C order read */
    assert_int_equal(tg_array_dtype(a), TG_UINT8);
    assert_int_equal(tg_array_shape(a)[0], 2);
    assert_int_equal(tg_array_shape(a)[1], 3);
    for (int i = 0; i < 6; i++) assert_int_equal(((const uint8_t *)tg_array_data(a))[i], 7 * i);
    tg_array_free(a);

    a = read_named(z, "b", ctx);
    assert_int_equal(tg_array_dtype(a), TG_BOOL);
    const uint8_t *bv = tg_array_data(a);
    assert_true(bv[0] == 1 && bv[1] == 0 && bv[2] == 1);
    tg_array_free(a);

    a = read_named(z, "scalar", ctx);
    assert_int_equal(tg_array_dtype(a), TG_FLOAT32);
    assert_int_equal(tg_array_ndim(a), 0);
    assert_true(tg_array_get_flat(a, 0) == 2.5);
    tg_array_free(a);

    a = read_named(z, "empty", ctx);
    assert_int_equal(tg_array_dtype(a), TG_INT64);
    assert_int_equal(tg_array_shape(a)[0], 0);
    assert_int_equal(tg_array_shape(a)[1], 2);
    tg_array_free(a);

    if (with_big) {
        a = read_named(z, "big", ctx);
        assert_int_equal(tg_array_shape(a)[0], 100000);
        const double *d = tg_array_data(a);
        for (int i = 0; i < 100000; i++)
            if (d[i] != i % 7) fail_msg("big[%d] = %g", i, d[i]);
        tg_array_free(a);
    }
    tg_npz_close(z);
    tg_ctx_free(ctx);
}

static void test_savez_loads(void **state) {
    (void)state;
    check_numpy_arrays("stored.npz", false);
}

static void test_savez_compressed_loads(void **state) {
    (void)state;
    check_numpy_arrays("compressed.npz", true);
}

static void test_positional_empty_and_other_members(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_npz *z = tg_npz_open(data_path("positional.npz"), ctx);
    assert_non_null(z);
    assert_int_equal(tg_npz_count(z), 2);
    assert_string_equal(tg_npz_name(z, 0), "arr_0");
    assert_string_equal(tg_npz_name(z, 1), "arr_1");
    assert_null(tg_npz_name(z, 2));
    tg_array *a = tg_npz_read(z, 1, ctx);
    assert_int_equal(tg_array_dtype(a), TG_FLOAT64);
    for (int i = 0; i < 4; i++) assert_true(tg_array_get_flat(a, i) == i);
    tg_array_free(a);
    assert_null(tg_npz_read(z, 2, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "no array number 2 (it holds 2)"));
    tg_npz_close(z);

    z = tg_npz_open(data_path("empty.npz"), ctx);
    assert_non_null(z);
    assert_int_equal(tg_npz_count(z), 0);
    tg_npz_close(z);

    /* zipfile's archive: a folder (skipped), a member that is not a .npy
     * (listed by its whole name, refused when read). */
    z = tg_npz_open(data_path("other_members.npz"), ctx);
    assert_non_null(z);
    assert_int_equal(tg_npz_count(z), 2);
    assert_string_equal(tg_npz_name(z, 0), "x");
    assert_string_equal(tg_npz_name(z, 1), "readme.txt");
    a = tg_npz_read(z, 0, ctx);
    assert_true(tg_array_get_flat(a, 1) == 2.0);
    tg_array_free(a);
    assert_null(tg_npz_read(z, 1, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "other_members.npz: array 'readme.txt': not a .npy file"));
    tg_npz_close(z);
    tg_ctx_free(ctx);
}

/* tg_npz_read_many: NumPy's deflated archive read whole at once equals
 * the arrays read one by one, in the order asked (the same member twice
 * included); a member that fails (or a number out of range) fails the
 * call with that member's line, and nothing is returned. */
static void test_read_many(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_npz *z = tg_npz_open(data_path("compressed.npz"), ctx);
    assert_non_null(z);
    int n = tg_npz_count(z);
    assert_int_equal(n, 7);
    int idx[9];
    for (int i = 0; i < n; i++) idx[i] = n - 1 - i; /* backwards */
    idx[n] = tg_npz_find(z, "big");
    idx[n + 1] = tg_npz_find(z, "big");
    tg_array *out[9];
    assert_int_equal(tg_npz_read_many(z, n + 2, idx, out, ctx), TG_OK);
    for (int i = 0; i < n + 2; i++) {
        tg_array *one = tg_npz_read(z, idx[i], ctx);
        assert_non_null(one);
        assert_non_null(out[i]);
        assert_int_equal(tg_array_dtype(out[i]), tg_array_dtype(one));
        assert_int_equal(tg_array_size(out[i]), tg_array_size(one));
        assert_memory_equal(tg_array_data(out[i]), tg_array_data(one),
                            (size_t)tg_array_size(one) * tg_dtype_size(tg_array_dtype(one)));
        tg_array_free(one);
    }
    /* the formula of the big one: i % 7 */
    assert_true(tg_array_get_flat(out[n], 99999) == 99999 % 7);
    for (int i = 0; i < n + 2; i++) tg_array_free(out[i]);
    idx[3] = 42;
    assert_int_equal(tg_npz_read_many(z, n, idx, out, ctx), TG_EINVAL);
    assert_non_null(strstr(tg_ctx_message(ctx), "no array number 42 (it holds 7)"));
    for (int i = 0; i < n; i++) assert_null(out[i]);
    assert_int_equal(tg_npz_read_many(z, 0, idx, out, ctx), TG_OK);
    tg_npz_close(z);

    /* zipfile's archive: the member that is not a .npy fails the call. */
    z = tg_npz_open(data_path("other_members.npz"), ctx);
    assert_non_null(z);
    int two[2] = {0, 1};
    tg_ctx_clear(ctx);
    assert_int_not_equal(tg_npz_read_many(z, 2, two, out, ctx), TG_OK);
    assert_non_null(strstr(tg_ctx_message(ctx), "other_members.npz: array 'readme.txt': not a .npy file"));
    assert_null(out[0]);
    assert_null(out[1]);
    tg_npz_close(z);
    tg_ctx_free(ctx);
}

static void test_open_errors(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    assert_null(tg_npz_open("/nonexistent/a.npz", ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "/nonexistent/a.npz: cannot open"));
    assert_null(tg_npz_open("/tmp", ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "/tmp: not a regular file"));
    char path[64];
    tmp_file(path, sizeof path, "tg_npz");
    assert_null(tg_npz_open(path, ctx)); /* empty */
    assert_non_null(strstr(tg_ctx_message(ctx), "not a .npz file (0 bytes, too short for a zip archive)"));
    /* a .npy is not an archive */
    assert_null(tg_npz_open(TG_TEST_DATA "/npy/float64_C_le.npy", ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "not a .npz file (no zip directory at its end)"));
    unlink(path);
    tg_ctx_free(ctx);
}

/* ---- writing ---- */

static tg_array *ramp(tg_dtype dt, int ndim, const int64_t *shape) {
    tg_array *d = tg_array_new(TG_FLOAT64, ndim, shape);
    int64_t n = tg_array_size(d);
    for (int64_t i = 0; i < n; i++) ((double *)tg_array_data(d))[i] = (double)(i % 50);
    tg_array *a = tg_array_copy(d, dt); /* cast */
    tg_array_free(d);
    return a;
}

/* Save the arrays stored (level < -1) or deflated at level. */
static int save_as(int level, const char *path, int n, const char *const *names, const tg_array *const *arrs,
                   tg_ctx *ctx) {
    return level < -1 ? tg_npz_save(path, n, names, arrs, ctx)
                      : tg_npz_save_compressed(path, n, names, arrs, level, ctx);
}

static void round_trips(int level) {
    tg_ctx *ctx = tg_ctx_new();
    char dir[] = "/tmp/tg_npz_XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.npz", dir);
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    tg_array *arrs[TG_NDTYPES + 2];
    const char *names[TG_NDTYPES + 2];
    char nbuf[TG_NDTYPES + 2][32];
    int n = 0;
    for (int dt = 0; dt < TG_NDTYPES; dt++, n++) {
        arrs[n] = ramp((tg_dtype)dt, 2, s23);
        snprintf(nbuf[n], sizeof nbuf[n], "%s", tg_dtype_name((tg_dtype)dt));
        names[n] = nbuf[n];
    }
    /* a view in another order (written in C order) and a UTF-8 name */
    tg_array *base = ramp(TG_FLOAT64, 2, s23);
    arrs[n] = tg_array_view_transpose(base, NULL, ctx);
    names[n++] = "transposed";
    arrs[n] = ramp(TG_INT32, 1, s4);
    names[n++] = "\xc3\xa9t\xc3\xa9";
    assert_int_equal(save_as(level, path, n, names, (const tg_array *const *)arrs, ctx), 0);

    tg_npz *z = tg_npz_open(path, ctx);
    assert_non_null(z);
    assert_int_equal(tg_npz_count(z), n);
    for (int i = 0; i < n; i++) {
        assert_string_equal(tg_npz_name(z, i), names[i]);
        tg_array *b = tg_npz_read(z, i, ctx);
        assert_non_null(b);
        assert_int_equal(tg_array_dtype(b), tg_array_dtype(arrs[i]));
        assert_int_equal(tg_array_ndim(b), tg_array_ndim(arrs[i]));
        for (int d = 0; d < tg_array_ndim(b); d++)
            assert_int_equal(tg_array_shape(b)[d], tg_array_shape(arrs[i])[d]);
        for (int64_t k = 0; k < tg_array_size(b); k++)
            assert_true(tg_array_get_flat(b, k) == tg_array_get_flat(arrs[i], k));
        tg_array_free(b);
    }
    /* the transpose's element (1, 0) is base's (0, 1) */
    assert_true(tg_array_get_flat(arrs[TG_NDTYPES], 1) == 3.0);
    tg_npz_close(z);

    /* The same arrays make the same bytes (no date, no order of its own). */
    size_t l1, l2;
    unsigned char *b1 = tu_read_file(path, &l1);
    assert_int_equal(save_as(level, path, n, names, (const tg_array *const *)arrs, ctx), 0);
    unsigned char *b2 = tu_read_file(path, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(b1, b2, l1);
    free(b1);
    free(b2);

    /* Bad names are refused before anything is written; the old file stays. */
    const char *dup[] = {"a", "b", "a"};
    assert_int_equal(save_as(level, path, 3, dup, (const tg_array *const *)arrs, ctx), TG_EINVAL);
    assert_non_null(strstr(tg_ctx_message(ctx), "two arrays named 'a'"));
    const char *empty[] = {""};
    assert_int_equal(save_as(level, path, 1, empty, (const tg_array *const *)arrs, ctx), TG_EINVAL);
    b1 = tu_read_file(path, &l1);
    assert_int_equal(l1, l2);
    free(b1);
    /* A folder that does not exist: an error, nothing written. */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/no/such/a.npz", dir);
    assert_int_not_equal(save_as(level, bad, 1, names, (const tg_array *const *)arrs, ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "no/such/a.npz"));

    for (int i = 0; i < n; i++) tg_array_free(arrs[i]);
    tg_array_free(base);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* no temporary left behind */
    tg_ctx_free(ctx);
}

static void test_save_round_trips(void **state) {
    (void)state;
    round_trips(-2);
}

static void test_save_compressed_round_trips(void **state) {
    (void)state;
    round_trips(-1);
    round_trips(1);
    round_trips(9);
}

/* A member deflated in pieces on the threads: more pieces than one group
 * (16 MiB) holds, checked without tg's reader: zlib inflates the whole
 * member as one stream into the stored archive's member bytes, and the
 * data descriptor after it gives zlib's CRC-32 and both sizes. The bytes
 * are the same with one thread and with three. */
static void test_save_compressed_pieces(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    char path[64], stored[64];
    tmp_file(path, sizeof path, "tg_npz_deflate");
    tmp_file(stored, sizeof stored, "tg_npz_stored");
    int64_t n = (int64_t)(18.5 * (1 << 20) / 8); /* 18.5 MiB: 19 pieces of data */
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    double *w = tg_array_data(a);
    uint32_t x = 12345;
    for (int64_t i = 0; i < n; i++) { /* runs, repeats and noise */
        x = x * 1664525u + 1013904223u;
        w[i] = i % 7 == 0 ? (double)(x >> 8) : (double)(i % 3000) / 16;
    }
    const char *names[] = {"w"};
    const tg_array *arrs[] = {a};
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(tg_npz_save_compressed(path, 1, names, arrs, 1, ctx), 0);
    size_t l1, l3, ls;
    unsigned char *b1 = tu_read_file(path, &l1);
    omp_set_num_threads(3);
    assert_int_equal(tg_npz_save_compressed(path, 1, names, arrs, 1, ctx), 0);
    omp_set_num_threads(threads);
    unsigned char *b3 = tu_read_file(path, &l3);
    assert_int_equal(l1, l3);
    assert_memory_equal(b1, b3, l1);
    assert_true(l1 < (size_t)n * 8 / 2); /* it did deflate */

    /* The stored member's bytes: the .npy file itself. */
    assert_int_equal(tg_npz_save(stored, 1, names, arrs, ctx), 0);
    unsigned char *bs = tu_read_file(stored, &ls);
    size_t sdata = 30 + (bs[26] | bs[27] << 8) + (bs[28] | bs[29] << 8);
    size_t usize = rd32(bs + 30 + (bs[26] | bs[27] << 8) + 4); /* its zip64 field */
    assert_true(usize > (size_t)n * 8 && sdata + usize <= ls);

    /* The local header: deflated (8), sizes in a descriptor (flag bit 3). */
    assert_int_equal(rd32(b1), 0x04034b50);
    assert_int_equal(b1[6] & 8, 8);
    assert_int_equal(b1[8], 8);
    size_t data = 30 + (b1[26] | b1[27] << 8) + (b1[28] | b1[29] << 8);
    z_stream zs = {0};
    assert_int_equal(inflateInit2(&zs, -MAX_WBITS), Z_OK);
    unsigned char *out = malloc(usize + 1);
    zs.next_in = b1 + data;
    zs.avail_in = (uInt)(l1 - data);
    zs.next_out = out;
    zs.avail_out = (uInt)usize + 1;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    assert_int_equal(zs.total_out, usize);
    assert_memory_equal(out, bs + sdata, usize);
    size_t dd = data + zs.total_in;
    inflateEnd(&zs);
    assert_int_equal(rd32(b1 + dd), 0x08074b50);
    assert_int_equal(rd32(b1 + dd + 4), (uint32_t)crc32(0, out, (uInt)usize));
    assert_int_equal(rd32(b1 + dd + 8), zs.total_in);
    assert_int_equal(rd32(b1 + dd + 12), 0);
    assert_int_equal(rd32(b1 + dd + 16), usize);
    assert_int_equal(rd32(b1 + dd + 24), 0x02014b50); /* then the directory */

    /* tg reads it back. */
    tg_npz *z = tg_npz_open(path, ctx);
    assert_non_null(z);
    tg_array *b = tg_npz_read(z, 0, ctx);
    assert_non_null(b);
    assert_memory_equal(tg_array_data(b), w, (size_t)n * 8);
    tg_array_free(b);
    tg_npz_close(z);

    /* A level out of range: refused, the file kept. */
    assert_int_equal(tg_npz_save_compressed(path, 1, names, arrs, 10, ctx), TG_EINVAL);
    assert_non_null(strstr(tg_ctx_message(ctx), "compression level 10 (expected 0 to 9"));
    free(b3);
    b3 = tu_read_file(path, &l3);
    assert_int_equal(l1, l3);

    free(out);
    free(b1);
    free(b3);
    free(bs);
    tg_array_free(a);
    unlink(path);
    unlink(stored);
    tg_ctx_free(ctx);
}

/* Deflated members need no seeking back, so a pipe takes the archive. */
static void test_save_compressed_to_pipe(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int64_t n = 300000;
    tg_array *a = ramp(TG_FLOAT32, 1, &n);
    int64_t s2[2] = {2, 3};
    tg_array *b = ramp(TG_INT16, 2, s2);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fds[1]);
        tg_ctx *ctx = tg_ctx_new();
        const char *names[] = {"a", "b"};
        const tg_array *arrs[] = {a, b};
        int rc = tg_npz_save_compressed(p, 2, names, arrs, 6, ctx);
        if (rc) fprintf(stderr, "%s\n", tg_ctx_message(ctx));
        _exit(rc ? 1 : 0);
    }
    close(fds[1]);
    size_t len = 0, cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    for (ssize_t k; (k = read(fds[0], buf + len, cap - len)) != 0;) {
        if (k < 0 && errno == EINTR) continue;
        assert_true(k > 0);
        len += (size_t)k;
        if (len == cap) buf = realloc(buf, cap *= 2);
    }
    close(fds[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tg_ctx *ctx = tg_ctx_new();
    tg_npz *z = tg_npz_open_mem(buf, len, "pipe", ctx);
    assert_non_null(z);
    tg_array *ra = read_named(z, "a", ctx), *rb = read_named(z, "b", ctx);
    assert_int_equal(tg_array_size(ra), n);
    for (int64_t i = 0; i < n; i++) assert_true(tg_array_get_flat(ra, i) == (double)(i % 50));
    assert_int_equal(tg_array_dtype(rb), TG_INT16);
    assert_true(tg_array_get_flat(rb, 5) == 5);
    assert_true(len < (size_t)n * 4 / 10); /* a ramp deflates well */
    tg_array_free(ra);
    tg_array_free(rb);
    tg_npz_close(z);
    tg_array_free(a);
    tg_array_free(b);
    free(buf);
    tg_ctx_free(ctx);
}

/* 65,536 members: more than the end record's 16-bit count, so the zip64
 * end record and its locator carry it. */
static void test_many_members_zip64(void **state) {
    (void)state;
    enum { N = 65536 };
    tg_ctx *ctx = tg_ctx_new();
    char path[64];
    tmp_file(path, sizeof path, "tg_npz_many");
    tg_array **arrs = malloc(N * sizeof *arrs);
    char **names = malloc(N * sizeof *names);
    for (int i = 0; i < N; i++) {
        arrs[i] = tg_array_new_scalar(TG_INT32, (double)(i * 3));
        names[i] = malloc(16);
        snprintf(names[i], 16, "m%d", i);
    }
    assert_int_equal(tg_npz_save(path, N, (const char *const *)names, (const tg_array *const *)arrs, ctx), 0);
    size_t len;
    unsigned char *b = tu_read_file(path, &len);
    assert_true(len > 98);
    assert_int_equal(rd32(b + len - 22), 0x06054b50);
    assert_int_equal(rd32(b + len - 42), 0x07064b50);
    assert_int_equal(rd32(b + len - 98), 0x06064b50);
    free(b);
    tg_npz *z = tg_npz_open(path, ctx);
    if (!z) fail_msg("%s", tg_ctx_message(ctx));
    assert_int_equal(tg_npz_count(z), N);
    for (int i = 0; i < N; i += 4099) {
        assert_string_equal(tg_npz_name(z, i), names[i]);
        tg_array *a = tg_npz_read(z, i, ctx);
        assert_true(tg_array_get_flat(a, 0) == i * 3);
        tg_array_free(a);
    }
    tg_array *last = tg_npz_read(z, N - 1, ctx);
    assert_true(tg_array_get_flat(last, 0) == (N - 1) * 3.0);
    tg_array_free(last);
    tg_npz_close(z);
    for (int i = 0; i < N; i++) {
        tg_array_free(arrs[i]);
        free(names[i]);
    }
    free(arrs);
    free(names);
    unlink(path);
    tg_ctx_free(ctx);
}

/* ---- damaged and hostile archives ---- */

/* A small archive tg writes: "a" (float64 [2]) then "bb" (int8 [3]).
 * Layout: local header 0, name 30, zip64 field, .npy; the directory's
 * entries 46 bytes and the name and a 28-byte zip64 field each. */
static unsigned char *small_archive(size_t *len, tg_ctx *ctx) {
    char path[64];
    tmp_file(path, sizeof path, "tg_npz_small");
    int64_t s2[1] = {2}, s3[1] = {3};
    tg_array *a = ramp(TG_FLOAT64, 1, s2), *b = ramp(TG_INT8, 1, s3);
    const tg_array *arrs[] = {a, b};
    const char *names[] = {"a", "bb"};
    assert_int_equal(tg_npz_save(path, 2, names, arrs, ctx), 0);
    unsigned char *buf = tu_read_file(path, len);
    unlink(path);
    tg_array_free(a);
    tg_array_free(b);
    return buf;
}

static size_t cd_offset(const unsigned char *b, size_t len) { return rd32(b + len - 22 + 16); }

static void test_structural_lies_refused(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    size_t len;
    unsigned char *good = small_archive(&len, ctx), *p = malloc(len);
    assert_null(open_and_read_all(good, len, ctx));
    size_t cd = cd_offset(good, len), cd2 = cd + 46 + 5 + 28; /* the second entry */
    size_t data_a = 30 + 5 + 20;                              /* a.npy's bytes */
#define EXPECT(what)                                                                        \
    do {                                                                                    \
        char *m_ = open_and_read_all(p, len, ctx);                                          \
        if (!m_ || !strstr(m_, what)) fail_msg("want '%s', got '%s'", what, m_ ? m_ : "success"); \
        memcpy(p, good, len);                                                               \
    } while (0)
    memcpy(p, good, len);
    p[data_a + 130] ^= 1; /* a data byte */
    EXPECT("t.npz: array 'a': CRC-32 mismatch (the archive is corrupt)");
    put16(p + cd + 10, 12); /* bzip2 */
    EXPECT("t.npz: member 'a.npy' uses compression method 12");
    put16(p + cd + 8, 1); /* encrypted */
    EXPECT("t.npz: member 'a.npy' is encrypted");
    p[30] = 'z'; /* the local header's name */
    EXPECT("t.npz: member 'a.npy': its local header names another member");
    put32(p + cd + 42, 7); /* no local header there */
    EXPECT("t.npz: member 'a.npy': no local header at offset 7");
    put32(p + cd2 + 42, 0xfffffff0u); /* past the directory */
    EXPECT("t.npz: member 'bb.npy': no local header at offset");
    put16(p + len - 22 + 4, 1); /* disk 1 */
    EXPECT("t.npz: the zip archive spans several disks");
    put16(p + len - 22 + 10, 1000); /* entries: more than fit */
    put16(p + len - 22 + 8, 1000);
    EXPECT("corrupt zip archive (1000 members claimed in a directory of");
    put32(p + len - 22 + 16, (uint32_t)len); /* the directory past the end */
    EXPECT("its directory, ");
    p[cd + 46 + 1] = 0; /* "a\0npy" */
    EXPECT("t.npz: corrupt zip directory (a name holds a NUL byte)");
    /* The stored size disagreeing with the stored length. */
    size_t z64 = cd + 46 + 5 + 4; /* the first entry's zip64 usize */
    p[z64] ^= 1;
    EXPECT("t.npz: member 'a.npy': its size");
    p[len - 22] = 'X'; /* no end record */
    EXPECT("t.npz: not a .npz file (no zip directory at its end)");
#undef EXPECT
    /* Every prefix fails cleanly (the end record is what is cut). */
    for (size_t n = 0; n < len; n++) assert_non_null(open_and_read_all(good, n, ctx));
    free(p);
    free(good);
    tg_ctx_free(ctx);
}

/* Two members of one name: renamed in both the directory and the local
 * header, so that only the duplicate is wrong. */
static void test_duplicate_members_refused(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    char path[64];
    tmp_file(path, sizeof path, "tg_npz_dup");
    int64_t s2[1] = {2};
    tg_array *a = ramp(TG_FLOAT64, 1, s2);
    const tg_array *arrs[] = {a, a};
    const char *names[] = {"x", "y"};
    assert_int_equal(tg_npz_save(path, 2, names, arrs, ctx), 0);
    size_t len;
    unsigned char *b = tu_read_file(path, &len);
    for (size_t i = 0; i < len; i++) /* every "y.npy" -> "x.npy" */
        if (i + 5 <= len && !memcmp(b + i, "y.npy", 5)) b[i] = 'x';
    char *m = open_and_read_all(b, len, ctx);
    assert_non_null(m);
    assert_string_equal(m, "t.npz: two members hold the array 'x' ('x.npy' and 'x.npy')");
    free(b);
    unlink(path);
    tg_array_free(a);
    tg_ctx_free(ctx);
}

/* Deflated members: a flipped byte in the stream, a stream cut short, a
 * size larger than deflate can reach, a stated size smaller than what the
 * stream holds; and single-byte corruptions anywhere. */
static void test_deflated_damage(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    size_t len;
    unsigned char *good = tu_read_file(data_path("compressed.npz"), &len), *p = malloc(len);
    assert_null(open_and_read_all(good, len, ctx));
    /* The first member, f8.npy: NumPy's local header has a zip64 field. */
    size_t nlen = good[26] | good[27] << 8, xlen = good[28] | good[29] << 8;
    size_t data = 30 + nlen + xlen, cd = cd_offset(good, len);
    memcpy(p, good, len);
    for (size_t k = 0; k < 8; k++) p[data + 20 + k] ^= 0x55;
    char *m = open_and_read_all(p, len, ctx);
    assert_non_null(m);
    assert_non_null(strstr(m, "t.npz: array 'f8': "));
    /* The directory's sizes of f8.npy (NumPy's directory has no zip64
     * field for small members). */
    uint32_t csize = rd32(good + cd + 20), usize = rd32(good + cd + 24);
    memcpy(p, good, len);
    put32(p + cd + 24, csize * 1040u + 5000u);
    m = open_and_read_all(p, len, ctx);
    assert_non_null(m);
    assert_non_null(strstr(m, "t.npz: member 'f8.npy': its size, "));
    assert_non_null(strstr(m, "cannot come from"));
    memcpy(p, good, len);
    put32(p + cd + 16, rd32(good + cd + 16) ^ 1); /* the checksum */
    m = open_and_read_all(p, len, ctx);
    assert_non_null(m);
    assert_string_equal(m, "t.npz: array 'f8': CRC-32 mismatch (the archive is corrupt)");
    memcpy(p, good, len);
    put32(p + cd + 24, usize - 8); /* the stream holds 8 bytes more */
    m = open_and_read_all(p, len, ctx);
    assert_non_null(m);
    assert_non_null(strstr(m, "t.npz: array 'f8': "));
    memcpy(p, good, len);
    put32(p + cd + 24, usize + 8); /* ... 8 bytes fewer */
    m = open_and_read_all(p, len, ctx);
    assert_non_null(m);
    assert_non_null(strstr(m, "t.npz: array 'f8': the member inflates to less than its stated size"));
    memcpy(p, good, len);
    put32(p + cd + 20, csize / 2); /* the stream cut in half */
    m = open_and_read_all(p, len, ctx);
    assert_non_null(m);
    assert_non_null(strstr(m, "t.npz: array 'f8': "));
    /* Anything may load or fail; nothing may crash. */
    uint64_t seed = 7;
    for (int i = 0; i < 3000; i++) {
        memcpy(p, good, len);
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        p[(seed >> 33) % len] = (unsigned char)(seed >> 20);
        (void)open_and_read_all(p, len, ctx);
    }
    free(p);
    free(good);
    tg_ctx_free(ctx);
}

/* Large buffers' CRC-32 is summed in pieces on the threads and combined:
 * the same as zlib's in one go, for lengths that cut the pieces anywhere,
 * and an archive of such arrays reads back. */
static void test_crc_in_pieces(void **state) {
    (void)state;
    size_t old = tg_crc32c_par_min, n = (size_t)3 << 20;
    tg_crc32c_par_min = 4096;
    unsigned char *b = malloc(n);
    uint64_t seed = 1;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        b[i] = (unsigned char)(seed >> 56);
    }
    const size_t lens[] = {0, 1, 4095, 4096, 8193, 65537, (size_t)1 << 20, n - 3, n};
    for (size_t k = 0; k < TG_ARRAY_LEN(lens); k++) {
        uint32_t want = (uint32_t)crc32_z(0, b, lens[k]);
        assert_int_equal(tg_crc32_zip(0, b, lens[k]), want);
        /* continued from a sum so far */
        assert_int_equal(tg_crc32_zip(tg_crc32_zip(0, b, 17), b + 17, lens[k] > 17 ? lens[k] - 17 : 0),
                         (uint32_t)crc32_z(0, b, lens[k] > 17 ? lens[k] : 17));
    }
    tg_ctx *ctx = tg_ctx_new();
    char path[64];
    tmp_file(path, sizeof path, "tg_npz_crc");
    int64_t shape[1] = {(int64_t)n};
    tg_array *a = tg_array_new_from(TG_UINT8, 1, shape, b);
    const tg_array *arrs[] = {a};
    const char *names[] = {"bytes"};
    assert_int_equal(tg_npz_save(path, 1, names, arrs, ctx), 0);
    tg_npz *z = tg_npz_open(path, ctx);
    tg_array *c = tg_npz_read(z, 0, ctx);
    assert_non_null(c);
    assert_memory_equal(tg_array_data(c), b, n);
    tg_array_free(c);
    tg_npz_close(z);
    tg_array_free(a);
    unlink(path);
    tg_ctx_free(ctx);
    free(b);
    tg_crc32c_par_min = old;
}

/* ---- allocation failures ---- */

static void test_allocation_failures(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    char path[64];
    tmp_file(path, sizeof path, "tg_npz_oom");
    const char *files[] = {"stored.npz", "compressed.npz"};
    for (size_t f = 0; f < TG_ARRAY_LEN(files); f++) {
        bool done = false;
        for (long k = 1; k < 400 && !done; k++) {
            tg_ctx_clear(ctx);
            tu_fail_allocation(k);
            tg_npz *z = tg_npz_open(data_path(files[f]), ctx);
            int n = z ? tg_npz_count(z) : 0;
            tg_array **arrs = calloc((size_t)n + 1, sizeof *arrs);
            const char **names = calloc((size_t)n + 1, sizeof *names);
            int *idx = calloc((size_t)n + 1, sizeof *idx);
            for (int i = 0; i < n; i++) {
                names[i] = tg_npz_name(z, i);
                idx[i] = i;
            }
            bool ok = z != NULL && tg_npz_read_many(z, n, idx, arrs, ctx) == TG_OK;
            free(idx);
            if (ok)
                ok = tg_npz_save(path, n, names, (const tg_array *const *)arrs, ctx) == 0 &&
                     tg_npz_save_compressed(path, n, names, (const tg_array *const *)arrs, 1, ctx) == 0;
            tu_fail_allocation(0);
            if (ok)
                done = true;
            else if (!strstr(tg_ctx_message(ctx), "out of memory"))
                fail_msg("%s, allocation %ld failing: %s", files[f], k, tg_ctx_message(ctx));
            for (int i = 0; i < n; i++) tg_array_free(arrs[i]);
            free(arrs);
            free(names);
            tg_npz_close(z);
        }
        assert_true(done);
    }
    unlink(path);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_savez_loads),
        cmocka_unit_test(test_savez_compressed_loads),
        cmocka_unit_test(test_positional_empty_and_other_members),
        cmocka_unit_test(test_read_many),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_save_round_trips),
        cmocka_unit_test(test_save_compressed_round_trips),
        cmocka_unit_test(test_save_compressed_pieces),
        cmocka_unit_test(test_save_compressed_to_pipe),
        cmocka_unit_test(test_many_members_zip64),
        cmocka_unit_test(test_structural_lies_refused),
        cmocka_unit_test(test_duplicate_members_refused),
        cmocka_unit_test(test_deflated_damage),
        cmocka_unit_test(test_crc_in_pieces),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
