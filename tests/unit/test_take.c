/* take, take_set and take_add on the layouts their kernels treat apart
 * (ops/build.c): contiguous int64 and int32 indices read where they lie
 * (checked and wrapped in the loop that uses them), any other index dtype
 * or layout through a resolved copy; blocks of 1, 2, 4 and 8 bytes copied
 * as one element, others by memcpy; the gather split between threads in
 * the middle of a row. Every expected value comes from a plain loop here
 * over the same data (x's elements differ from each other, so that a wrong
 * row, a wrong element or a missed wrap shows), and a call must allocate
 * nothing of the indices' size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { MSG_MAX = 4096 };

static uint64_t rng_s = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int64_t prod(const int64_t *shape, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= shape[i];
    return p;
}

/* The element at C-order position i of a (any strides). */
static const char *elem(const tg_array *a, int64_t i) {
    const char *p = tg_array_data(a);
    const int64_t *sh = tg_array_shape(a), *st = tg_array_strides(a);
    for (int d = tg_array_ndim(a) - 1; d >= 0; d--) {
        p += (i % sh[d]) * st[d];
        i /= sh[d];
    }
    return p;
}

/* Element i of a as an integer / double (plain loads by dtype). */
static double get_num(tg_dtype dt, const char *p) {
    switch (dt) {
    case TG_BOOL: case TG_UINT8: return *(const uint8_t *)p;
    case TG_INT8: return *(const int8_t *)p;
    case TG_INT16: return *(const int16_t *)(const void *)p;
    case TG_INT32: return *(const int32_t *)(const void *)p;
    case TG_INT64: return (double)*(const int64_t *)(const void *)p;
    case TG_FLOAT32: return *(const float *)(const void *)p;
    case TG_FLOAT64: return *(const double *)(const void *)p;
    default: fail_msg("dtype %s not used here", tg_dtype_name(dt));
    }
    return 0;
}

/* An array of dt and shape with elements that differ from each other. */
static tg_array *distinct(tg_dtype dt, int nd, const int64_t *shape) {
    tg_array *a = tg_array_new(dt, nd, shape);
    char *p = tg_array_data(a);
    int64_t n = tg_array_size(a);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        switch (dt) {
        case TG_BOOL: p[i] = (char)(r & 1); break;
        case TG_UINT8: case TG_INT8: ((uint8_t *)p)[i] = (uint8_t)(i * 37 + 11); break;
        case TG_INT16: ((int16_t *)(void *)p)[i] = (int16_t)(i * 7919 - 20000); break;
        case TG_INT32: ((int32_t *)(void *)p)[i] = (int32_t)(r >> 33) - (1 << 30); break;
        case TG_INT64: ((int64_t *)(void *)p)[i] = (int64_t)(r >> 1) - ((int64_t)1 << 62); break;
        case TG_FLOAT32: ((float *)(void *)p)[i] = (float)i * 0.5f - 1000.25f; break;
        case TG_FLOAT64: ((double *)(void *)p)[i] = (double)(int64_t)(r >> 12) * 0x1p-20; break;
        default: fail_msg("dtype %s not used here", tg_dtype_name(dt));
        }
    }
    return a;
}

/* Indices of dtype dt holding iv (C order, shape ishape), laid out as
 * `lay`: 0 contiguous, 1 a reversed view (step -1 on the last axis),
 * 2 every other element of a buffer twice as long. */
static tg_array *indices(tg_dtype dt, int nd, const int64_t *ishape,
                         const int64_t *iv, int lay) {
    int64_t m = prod(ishape, 0, nd), bshape[TG_MAX_NDIM];
    memcpy(bshape, ishape, (size_t)nd * sizeof *bshape);
    if (lay == 2) bshape[nd - 1] *= 2;
    tg_array *b = tg_array_new(dt, nd, bshape);
    size_t isz = tg_dtype_size(dt);
    int64_t last = nd ? ishape[nd - 1] : 1;
    for (int64_t i = 0; i < m; i++) {
        int64_t row = i / last, col = i % last, at;
        if (lay == 1) at = row * last + (last - 1 - col);
        else if (lay == 2) at = row * last * 2 + col * 2;
        else at = i;
        char *p = (char *)tg_array_data(b) + at * (int64_t)isz;
        switch (dt) {
        case TG_INT8: *(int8_t *)p = (int8_t)iv[i]; break;
        case TG_INT16: *(int16_t *)(void *)p = (int16_t)iv[i]; break;
        case TG_INT32: *(int32_t *)(void *)p = (int32_t)iv[i]; break;
        case TG_INT64: *(int64_t *)(void *)p = iv[i]; break;
        case TG_UINT32: *(uint32_t *)(void *)p = (uint32_t)iv[i]; break;
        case TG_UINT64: *(uint64_t *)(void *)p = (uint64_t)iv[i]; break;
        default: fail_msg("index dtype %s not used here", tg_dtype_name(dt));
        }
    }
    if (lay == 0 || nd == 0) return b;
    tg_ctx *ctx = tg_ctx_new();
    tg_array *v = lay == 1 ? tg_array_view_slice(b, nd - 1, last - 1, -last - 1, -1, ctx)
                           : tg_array_view_slice(b, nd - 1, 0, bshape[nd - 1], 2, ctx);
    if (!v) fail_msg("view: %s", tg_ctx_message(ctx));
    if (m > 1) assert_false(tg_array_is_contiguous(v));
    tg_ctx_free(ctx);
    tg_array_free(b);
    return v;
}

static void shape_json(char *buf, size_t size, int nd, const int64_t *shape) {
    int k = snprintf(buf, size, "[");
    for (int d = 0; d < nd; d++)
        k += snprintf(buf + k, size - (size_t)k, "%s%lld", d ? "," : "", (long long)shape[d]);
    snprintf(buf + k, size - (size_t)k, "]");
}

static void var_json(char *buf, size_t size, const char *id, const tg_array *a) {
    char s[128];
    shape_json(s, sizeof s, tg_array_ndim(a), tg_array_shape(a));
    snprintf(buf, size, "{'id':'%s','type':{'dtype':'%s','shape':%s}}", id,
             tg_dtype_name(tg_array_dtype(a)), s);
}

/* The function `op`(x, [y,] i) along axis ax (y NULL: take). */
static tg_function *compile_op(const char *op, const tg_array *x, const tg_array *y,
                               const tg_array *i, int ax) {
    char vx[256], vy[256] = "", vi[256], json[2048];
    var_json(vx, sizeof vx, "x", x);
    var_json(vi, sizeof vi, "i", i);
    if (y) {
        char t[240];
        var_json(t, sizeof t, "y", y);
        snprintf(vy, sizeof vy, ",%s", t);
    }
    snprintf(json, sizeof json,
             "{'format':'tg-graph','version':1,'variables':[%s%s,%s],"
             "'nodes':[{'op':'%s','inputs':['x'%s,'i'],'outputs':['z'],'attrs':{'axis':%d}}],"
             "'functions':{'f':{'inputs':['x'%s,'i'],'outputs':['z']}}}",
             vx, vy, vi, op, y ? ",'y'" : "", ax, y ? ",'y'" : "");
    tg_graph *g = tu_load_sq(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("compile %s: %s", op, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    tg_graph_free(g);
    return f;
}

/* Call f on in; returns the output, or NULL with the message in msg. */
static tg_array *call(tg_function *f, tg_array *const *in, char *msg, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *out[1] = {NULL};
    int rc = tg_function_call(f, in, out, ctx);
    snprintf(msg, size, "%s", rc ? tg_ctx_message(ctx) : "");
    tg_ctx_free(ctx);
    return rc ? NULL : out[0];
}

/* NumPy's take by a plain loop: out bytes (C order). */
static char *want_take(const tg_array *x, int ax, const int64_t *iv, int64_t m) {
    const int64_t *sh = tg_array_shape(x);
    int nd = tg_array_ndim(x);
    int64_t outer = prod(sh, 0, ax), len = sh[ax], post = prod(sh, ax + 1, nd);
    size_t isz = tg_dtype_size(tg_array_dtype(x));
    char *w = malloc((size_t)(outer * m * post) * isz + 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < m; j++) {
            int64_t k = iv[j] < 0 ? iv[j] + len : iv[j];
            for (int64_t p = 0; p < post; p++)
                memcpy(w + ((o * m + j) * post + p) * (int64_t)isz,
                       elem(x, (o * len + k) * post + p), isz);
        }
    return w;
}

static void random_indices(int64_t *iv, int64_t m, int64_t len) {
    for (int64_t j = 0; j < m; j++) iv[j] = (int64_t)(rnd() % (uint64_t)(2 * len)) - len;
    if (m > 2) { /* both ends */
        iv[0] = -len;
        iv[m - 1] = len - 1;
        iv[m / 2] = iv[1];
    }
}

static void check_take(const char *what, const tg_array *x, int ax, tg_dtype idt, int ind,
                       const int64_t *ishape, int lay) {
    int64_t m = prod(ishape, 0, ind), len = tg_array_shape(x)[ax];
    int64_t *iv = calloc((size_t)m + 1, sizeof *iv);
    random_indices(iv, m, len);
    tg_array *i = indices(idt, ind, ishape, iv, lay);
    tg_function *f = compile_op("take", x, NULL, i, ax);
    tg_array *in[2] = {(tg_array *)x, i};
    char msg[MSG_MAX];
    for (int rep = 0; rep < 2; rep++) { /* the second call reuses what the first left */
        tg_array *z = call(f, in, msg, sizeof msg);
        if (!z) fail_msg("%s: %s", what, msg);
        char *w = want_take(x, ax, iv, m);
        int64_t n = tg_array_size(z);
        size_t isz = tg_dtype_size(tg_array_dtype(x));
        assert_true(tg_array_is_contiguous(z));
        for (int64_t t = 0; t < n; t++)
            if (memcmp((char *)tg_array_data(z) + t * (int64_t)isz, w + t * (int64_t)isz, isz))
                fail_msg("%s (%s indices, layout %d, m %lld): element %lld is %g, want %g", what,
                         tg_dtype_name(idt), lay, (long long)m, (long long)t,
                         get_num(tg_array_dtype(x), (char *)tg_array_data(z) + t * (int64_t)isz),
                         get_num(tg_array_dtype(x), w + t * (int64_t)isz));
        free(w);
        tg_array_free(z);
    }
    tg_function_free(f);
    tg_array_free(i);
    free(iv);
}

/* Every element size with blocks of 1 element (1-d, and an inner axis)
 * and of several (rows), under each index dtype and layout. */
static void test_take_layouts(void **state) {
    (void)state;
    static const tg_dtype xdt[] = {TG_UINT8, TG_INT16, TG_FLOAT32, TG_FLOAT64, TG_BOOL};
    static const struct {
        int nd;
        int64_t shape[3];
        int ax;
    } xs[] = {{1, {37}, 0}, {1, {1}, 0}, {2, {5, 37}, 1}, {2, {37, 3}, 0},
              {3, {4, 37, 2}, 1}, {3, {4, 37, 2}, -2}, {3, {2, 37, 1}, 1}};
    static const struct {
        tg_dtype dt;
        int lay;
    } ids[] = {{TG_INT64, 0}, {TG_INT32, 0}, {TG_INT64, 1}, {TG_INT32, 2},
               {TG_INT16, 0}, {TG_UINT32, 0}, {TG_INT8, 1}, {TG_UINT64, 0}};
    static const struct {
        int nd;
        int64_t shape[2];
    } ims[] = {{1, {23}}, {1, {1}}, {1, {0}}, {0, {0}}, {2, {3, 5}}};
    char what[160];
    for (size_t a = 0; a < sizeof xdt / sizeof *xdt; a++)
        for (size_t b = 0; b < sizeof xs / sizeof *xs; b++) {
            tg_array *x = distinct(xdt[a], xs[b].nd, xs[b].shape);
            int ax = xs[b].ax < 0 ? xs[b].ax + xs[b].nd : xs[b].ax;
            for (size_t c = 0; c < sizeof ids / sizeof *ids; c++)
                for (size_t d = 0; d < sizeof ims / sizeof *ims; d++) {
                    bool neg = ids[c].dt == TG_UINT32 || ids[c].dt == TG_UINT64;
                    if (neg || (ims[d].nd == 0 && ids[c].lay)) continue;
                    snprintf(what, sizeof what, "take %s x%zu axis %d", tg_dtype_name(xdt[a]), b, ax);
                    check_take(what, x, ax, ids[c].dt, ims[d].nd, ims[d].shape, ids[c].lay);
                }
            tg_array_free(x);
        }
    /* unsigned indices: no negative ones */
    int64_t sh[1] = {9}, ish[1] = {12};
    tg_array *x = distinct(TG_FLOAT64, 1, sh);
    int64_t iv[12];
    for (int j = 0; j < 12; j++) iv[j] = (j * 5) % 9;
    for (int k = 0; k < 2; k++) {
        tg_array *i = indices(k ? TG_UINT64 : TG_UINT32, 1, ish, iv, 0);
        tg_function *f = compile_op("take", x, NULL, i, 0);
        tg_array *in[2] = {x, i};
        char msg[MSG_MAX];
        tg_array *z = call(f, in, msg, sizeof msg);
        if (!z) fail_msg("unsigned: %s", msg);
        for (int j = 0; j < 12; j++)
            assert_memory_equal((char *)tg_array_data(z) + 8 * j, elem(x, iv[j]), 8);
        tg_array_free(z);
        tg_function_free(f);
        tg_array_free(i);
    }
    tg_array_free(x);
}

/* x itself not contiguous (a transpose, a reversed view), and sizes past
 * the parallel threshold, split between threads inside a row. */
static void test_take_strided_and_parallel(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int64_t sh[2] = {37, 5};
    tg_array *b = distinct(TG_FLOAT64, 2, sh);
    int axes[2] = {1, 0};
    tg_array *xt = tg_array_view_transpose(b, axes, ctx);
    tg_array *xr = tg_array_view_slice(b, 0, 36, -38, -1, ctx);
    assert_non_null(xt);
    assert_non_null(xr);
    int64_t ish[1] = {23};
    check_take("take of a transpose, axis 1", xt, 1, TG_INT64, 1, ish, 0);
    check_take("take of a transpose, axis 0", xt, 0, TG_INT32, 1, ish, 0);
    check_take("take of a reversed view", xr, 0, TG_INT64, 1, ish, 0);
    tg_array_free(xt);
    tg_array_free(xr);
    tg_array_free(b);

    int64_t s1[1] = {1000}, s2[2] = {3, 50}, s3[2] = {7, 4};
    tg_array *x1 = distinct(TG_FLOAT64, 1, s1), *x2 = distinct(TG_FLOAT32, 2, s2),
             *x3 = distinct(TG_INT16, 2, s3);
    int64_t big[1] = {100003}, mid[1] = {30001};
    check_take("take 1-d, 100003 int64", x1, 0, TG_INT64, 1, big, 0);
    check_take("take 1-d, 100003 int32", x1, 0, TG_INT32, 1, big, 0);
    check_take("take 1-d, 100003 reversed", x1, 0, TG_INT64, 1, big, 1);
    check_take("take axis 1 of (3, 50), 30001", x2, 1, TG_INT64, 1, mid, 0);
    check_take("take axis 1 of (3, 50), 30001 int32", x2, 1, TG_INT32, 1, mid, 0);
    check_take("take rows of (7, 4) int16, 30001", x3, 0, TG_INT32, 1, mid, 0);
    tg_array_free(x1);
    tg_array_free(x2);
    tg_array_free(x3);
    tg_ctx_free(ctx);
}

static void expect_error(const char *op, tg_array *x, tg_array *y, tg_array *i, int ax,
                         const char *want) {
    tg_function *f = compile_op(op, x, y, i, ax);
    tg_array *in[3] = {x, y ? y : i, i};
    char msg[MSG_MAX];
    tg_array *z = call(f, in, msg, sizeof msg);
    if (z) fail_msg("%s: ran, expected an error containing '%s'", op, want);
    if (!strstr(msg, want) || !strstr(msg, op))
        fail_msg("%s: expected '%s' (and the node) in: %s", op, want, msg);
    tg_function_free(f);
}

/* An index out of range is the first one in C order, named as given,
 * also when threads each found one, and when nothing is gathered. */
static void test_take_errors(void **state) {
    (void)state;
    int64_t s1[1] = {37};
    tg_array *x = distinct(TG_FLOAT64, 1, s1);
    int64_t m = 100003, ish[1] = {m};
    int64_t *iv = malloc((size_t)m * sizeof *iv);
    random_indices(iv, m, 37);
    iv[70001] = -38;
    iv[90001] = 37;
    static const tg_dtype dts[] = {TG_INT64, TG_INT32, TG_INT16};
    for (int lay = 0; lay < 2; lay++)
        for (int k = 0; k < 3; k++) {
            tg_array *i = indices(dts[k], 1, ish, iv, lay);
            expect_error("take", x, NULL, i, 0, "index -38 is out of bounds for axis 0 with size 37");
            tg_array_free(i);
        }
    iv[70001] = 5;
    tg_array *i = indices(TG_INT64, 1, ish, iv, 0);
    expect_error("take", x, NULL, i, 0, "index 37 is out of bounds for axis 0 with size 37");
    tg_array_free(i);
    iv[3] = INT64_MIN;
    i = indices(TG_INT64, 1, ish, iv, 0);
    expect_error("take", x, NULL, i, 0, "index -9223372036854775808 is out of bounds");
    tg_array_free(i);
    iv[3] = INT64_MAX;
    i = indices(TG_INT64, 1, ish, iv, 0);
    expect_error("take", x, NULL, i, 0, "index 9223372036854775807 is out of bounds");
    tg_array_free(i);
    iv[3] = INT32_MIN;
    i = indices(TG_INT32, 1, ish, iv, 0);
    expect_error("take", x, NULL, i, 0, "index -2147483648 is out of bounds");
    tg_array_free(i);
    /* past 2^63 - 1: named as given */
    int64_t three[1] = {3}, uv[3] = {1, -1, 2};
    i = indices(TG_UINT64, 1, three, uv, 0);
    expect_error("take", x, NULL, i, 0, "index 18446744073709551615 is out of bounds");
    tg_array_free(i);
    tg_array_free(x);
    free(iv);

    /* nothing to gather: still checked, as before (NumPy 1.24's
     * np.zeros((0, 3))[:, [5]] warns that it will raise) */
    int64_t s0[2] = {0, 3}, one[1] = {1}, v5[1] = {5}, v0[1] = {0};
    x = tg_array_new(TG_FLOAT64, 2, s0);
    i = indices(TG_INT64, 1, one, v5, 0);
    expect_error("take", x, NULL, i, 1, "index 5 is out of bounds for axis 1 with size 3");
    tg_array_free(i);
    tg_array_free(x);
    int64_t z0[1] = {0};
    x = tg_array_new(TG_FLOAT64, 1, z0);
    i = indices(TG_INT32, 1, one, v0, 0);
    expect_error("take", x, NULL, i, 0, "index 0 is out of bounds for axis 0 with size 0");
    tg_array_free(i);
    tg_array_free(x);
}

/* take_add / take_set by a plain loop, in order: out bytes. y is the
 * indexed shape's values (C order, in x's dtype). */
static void want_setadd(bool add, tg_dtype dt, char *r, const tg_array *x, int ax,
                        const int64_t *iv, int64_t m, const char *y) {
    const int64_t *sh = tg_array_shape(x);
    int nd = tg_array_ndim(x);
    int64_t outer = prod(sh, 0, ax), len = sh[ax], post = prod(sh, ax + 1, nd);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < m; j++) {
            int64_t k = iv[j] < 0 ? iv[j] + len : iv[j];
            for (int64_t p = 0; p < post; p++) {
                int64_t at = (o * len + k) * post + p, from = (o * m + j) * post + p;
                switch (dt) {
#define C_(D, T, E)                                                              \
    case D: {                                                                    \
        T *a = (T *)(void *)r + at;                                              \
        T b = ((const T *)(const void *)y)[from];                                \
        *a = add ? (T)(E) : b;                                                   \
    } break;
                C_(TG_BOOL, uint8_t, *a | b)
                C_(TG_INT8, int8_t, (uint8_t)*a + (uint8_t)b)
                C_(TG_INT32, int32_t, (uint32_t)*a + (uint32_t)b)
                C_(TG_FLOAT32, float, *a + b)
                C_(TG_FLOAT64, double, *a + b)
#undef C_
                default: fail_msg("dtype %s not used here", tg_dtype_name(dt));
                }
            }
        }
}

static void check_setadd(const char *op, tg_dtype dt, int nd, const int64_t *shape, int ax,
                         tg_dtype idt, int lay, int64_t m, bool y_scalar) {
    tg_array *x = distinct(dt, nd, shape);
    int64_t len = shape[ax], ysh[TG_MAX_NDIM];
    int yd = 0;
    for (int d = 0; d < nd; d++) ysh[yd++] = d == ax ? m : shape[d];
    if (y_scalar) yd = 0;
    tg_array *y = distinct(dt, yd, ysh);
    int64_t *iv = calloc((size_t)m + 1, sizeof *iv), ish[1] = {m};
    random_indices(iv, m, len);
    tg_array *i = indices(idt, 1, ish, iv, lay);
    tg_function *f = compile_op(op, x, y, i, ax);
    tg_array *in[3] = {x, y, i};
    /* y as the loop reads it: broadcast to the indexed shape */
    int64_t yn = 1;
    for (int d = 0; d < nd; d++) yn *= d == ax ? m : shape[d];
    size_t isz = tg_dtype_size(dt);
    char *yv = malloc((size_t)yn * isz + 1);
    for (int64_t t = 0; t < yn; t++) memcpy(yv + t * (int64_t)isz, y_scalar ? elem(y, 0) : elem(y, t), isz);
    int64_t n = tg_array_size(x);
    char *w = malloc((size_t)n * isz + 1), *x0 = malloc((size_t)n * isz + 1);
    memcpy(w, tg_array_data(x), (size_t)n * isz);
    memcpy(x0, w, (size_t)n * isz);
    want_setadd(!strcmp(op, "take_add"), dt, w, x, ax, iv, m, yv);
    char msg[MSG_MAX];
    for (int rep = 0; rep < 2; rep++) {
        tg_array *z = call(f, in, msg, sizeof msg);
        if (!z) fail_msg("%s: %s", op, msg);
        for (int64_t t = 0; t < n; t++)
            if (memcmp((char *)tg_array_data(z) + t * (int64_t)isz, w + t * (int64_t)isz, isz))
                fail_msg("%s %s axis %d (%s indices, layout %d, m %lld%s): element %lld is %g, want %g",
                         op, tg_dtype_name(dt), ax, tg_dtype_name(idt), lay, (long long)m,
                         y_scalar ? ", y a scalar" : "", (long long)t,
                         get_num(dt, (char *)tg_array_data(z) + t * (int64_t)isz),
                         get_num(dt, w + t * (int64_t)isz));
        tg_array_free(z);
        if (memcmp(tg_array_data(x), x0, (size_t)n * isz)) fail_msg("%s wrote into its input x", op);
    }
    free(x0);
    free(w);
    free(yv);
    free(iv);
    tg_function_free(f);
    tg_array_free(i);
    tg_array_free(y);
    tg_array_free(x);
}

/* Repeated and negative indices add each time (np.add.at) and the last
 * set wins, on 1-d x, rows, an inner axis, past the parallel threshold,
 * with y read in place, broadcast, and indices through the copy. */
static void test_take_set_add(void **state) {
    (void)state;
    static const char *const ops[] = {"take_add", "take_set"};
    static const tg_dtype dts[] = {TG_FLOAT64, TG_FLOAT32, TG_INT8, TG_INT32, TG_BOOL};
    static const struct {
        tg_dtype dt;
        int lay;
    } ids[] = {{TG_INT64, 0}, {TG_INT32, 0}, {TG_INT64, 1}, {TG_INT16, 0}};
    int64_t s1[1] = {11}, s2[2] = {7, 3}, s3[2] = {3, 9};
    for (int o = 0; o < 2; o++)
        for (size_t a = 0; a < sizeof dts / sizeof *dts; a++)
            for (size_t c = 0; c < sizeof ids / sizeof *ids; c++) {
                check_setadd(ops[o], dts[a], 1, s1, 0, ids[c].dt, ids[c].lay, 1000, false);
                check_setadd(ops[o], dts[a], 1, s1, 0, ids[c].dt, ids[c].lay, 1, false);
                check_setadd(ops[o], dts[a], 1, s1, 0, ids[c].dt, ids[c].lay, 0, false);
                check_setadd(ops[o], dts[a], 2, s2, 0, ids[c].dt, ids[c].lay, 101, false);
                check_setadd(ops[o], dts[a], 2, s3, 1, ids[c].dt, ids[c].lay, 101, false);
                check_setadd(ops[o], dts[a], 1, s1, 0, ids[c].dt, ids[c].lay, 57, true);
            }
    /* past the parallel threshold: outer rows split between threads */
    int64_t s4[2] = {3, 1000};
    check_setadd("take_add", TG_FLOAT64, 2, s4, 1, TG_INT64, 0, 30001, false);
    check_setadd("take_add", TG_FLOAT64, 1, s4 + 1, 0, TG_INT32, 0, 100003, false);
    check_setadd("take_set", TG_FLOAT32, 2, s4, 1, TG_INT32, 0, 30001, false);

    /* errors, before x is written */
    int64_t one[1] = {3}, bad[3] = {1, 11, -12};
    tg_array *x = distinct(TG_FLOAT64, 1, s1), *y = distinct(TG_FLOAT64, 1, one);
    for (int k = 0; k < 2; k++) {
        tg_array *i = indices(k ? TG_INT32 : TG_INT64, 1, one, bad, 0);
        expect_error("take_add", x, y, i, 0, "index 11 is out of bounds for axis 0 with size 11");
        expect_error("take_set", x, y, i, 0, "index 11 is out of bounds for axis 0 with size 11");
        tg_array_free(i);
    }
    tg_array_free(x);
    tg_array_free(y);
}

/* y of a wider dtype is added in the sum's dtype and rounded once, per
 * element in order: float32 x, float64 y. */
static void test_take_add_wider_y(void **state) {
    (void)state;
    int64_t sx[1] = {5}, sy[1] = {40};
    tg_array *x = distinct(TG_FLOAT32, 1, sx), *y = distinct(TG_FLOAT64, 1, sy);
    int64_t iv[40];
    random_indices(iv, 40, 5);
    for (int k = 0; k < 2; k++) {
        tg_array *i = indices(k ? TG_INT32 : TG_INT64, 1, sy, iv, 0);
        tg_function *f = compile_op("take_add", x, y, i, 0);
        tg_array *in[3] = {x, y, i};
        char msg[MSG_MAX];
        tg_array *z = call(f, in, msg, sizeof msg);
        if (!z) fail_msg("%s", msg);
        float w[5];
        memcpy(w, tg_array_data(x), sizeof w);
        for (int j = 0; j < 40; j++) {
            int64_t r = iv[j] < 0 ? iv[j] + 5 : iv[j];
            w[r] = (float)((double)w[r] + ((const double *)tg_array_data(y))[j]);
        }
        for (int t = 0; t < 5; t++)
            if (((const float *)tg_array_data(z))[t] != w[t])
                fail_msg("element %d is %.9g, want %.9g", t, ((const float *)tg_array_data(z))[t],
                         w[t]);
        tg_array_free(z);
        tg_function_free(f);
        tg_array_free(i);
    }
    tg_array_free(x);
    tg_array_free(y);
}

/* take_add(t, t, i), t an intermediate big enough to be updated in
 * place: y is t as it was before any update. */
static void test_take_add_y_is_x(void **state) {
    (void)state;
    enum { L = 1000 };
    int64_t sh[1] = {L};
    tg_array *x = distinct(TG_FLOAT64, 1, sh);
    int64_t iv[L];
    random_indices(iv, L, L);
    tg_array *i = indices(TG_INT64, 1, sh, iv, 0);
    tg_graph *g = tu_load_sq(
        "{'format':'tg-graph','version':1,'variables':["
        "{'id':'x','type':{'dtype':'float64','shape':[1000]}},"
        "{'id':'i','type':{'dtype':'int64','shape':[1000]}}],"
        "'nodes':[{'op':'mul','inputs':['x',{'value':2.0}],'outputs':['t']},"
        "{'op':'take_add','inputs':['t','t','i'],'outputs':['z']}],"
        "'functions':{'f':{'inputs':['x','i'],'outputs':['z']}}}");
    tg_array *in[2] = {x, i}, *out[1] = {NULL};
    tu_call(g, NULL, in, out);
    double t0[L], w[L];
    for (int j = 0; j < L; j++) w[j] = t0[j] = 2.0 * ((const double *)tg_array_data(x))[j];
    for (int j = 0; j < L; j++) w[iv[j] < 0 ? iv[j] + L : iv[j]] += t0[j];
    for (int j = 0; j < L; j++)
        if (((const double *)tg_array_data(out[0]))[j] != w[j])
            fail_msg("element %d is %.17g, want %.17g", j, ((const double *)tg_array_data(out[0]))[j],
                     w[j]);
    tg_array_free(out[0]);
    tg_graph_free(g);
    tg_array_free(i);
    tg_array_free(x);
}

/* A call reads contiguous int64 and int32 indices, and a y that needs no
 * broadcast or cast, where they lie: a second call allocates nothing of
 * their size (take's output is the slot's again, take_add's is x's 8000
 * bytes); a copy of 10^7 indices page-faulted at every call. */
static void test_take_allocates_no_copy(void **state) {
    (void)state;
    enum { M = 100000 };
    int64_t sx[1] = {1000}, si[1] = {M};
    tg_array *x = distinct(TG_FLOAT64, 1, sx), *y = distinct(TG_FLOAT64, 1, si);
    int64_t *iv = malloc(M * sizeof *iv);
    random_indices(iv, M, 1000);
    char msg[MSG_MAX];
    for (int k = 0; k < 2; k++) {
        tg_array *i = indices(k ? TG_INT32 : TG_INT64, 1, si, iv, 0);
        tg_function *f = compile_op("take", x, NULL, i, 0);
        tg_array *in[3] = {x, i, NULL};
        tg_array_free(call(f, in, msg, sizeof msg));
        tu_count_begin();
        tg_array *z = call(f, in, msg, sizeof msg);
        tu_alloc_count c = tu_count_end();
        if (!z) fail_msg("take: %s", msg);
        if (c.bytes >= M * 4)
            fail_msg("take (%s indices) allocated %.0f bytes in %.0f calls", k ? "int32" : "int64",
                     c.bytes, c.allocs);
        tg_array_free(z);
        tg_function_free(f);

        f = compile_op("take_add", x, y, i, 0);
        in[0] = x;
        in[1] = y;
        in[2] = i;
        tg_array_free(call(f, in, msg, sizeof msg));
        tu_count_begin();
        z = call(f, in, msg, sizeof msg);
        c = tu_count_end();
        if (!z) fail_msg("take_add: %s", msg);
        if (c.bytes >= M * 4)
            fail_msg("take_add (%s indices) allocated %.0f bytes in %.0f calls", k ? "int32" : "int64",
                     c.bytes, c.allocs);
        tg_array_free(z);
        tg_function_free(f);
        tg_array_free(i);
    }
    free(iv);
    tg_array_free(x);
    tg_array_free(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_layouts),
        cmocka_unit_test(test_take_strided_and_parallel),
        cmocka_unit_test(test_take_errors),
        cmocka_unit_test(test_take_set_add),
        cmocka_unit_test(test_take_add_wider_y),
        cmocka_unit_test(test_take_add_y_is_x),
        cmocka_unit_test(test_take_allocates_no_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
