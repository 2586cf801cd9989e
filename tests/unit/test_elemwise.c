/* Elementwise kernels through compiled functions, beyond the data files
 * (tests/data/ops/elemwise_*.json): the caller's strided views as inputs,
 * sizes that take the parallel path, no allocation on repeated scalar
 * calls, results the caller keeps are never overwritten. Expected values
 * are worked out by hand in each test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"
#include "testutil.h"

static tg_function *compile(tg_graph *g) {
    tg_ctx *ctx = tg_ctx_new();
    int i = tg_graph_function_find(g, NULL, ctx);
    tg_function *f = i >= 0 ? tg_function_compile(g, i, &(tg_compile_options){.preset = "none"}, ctx) : NULL;
    if (!f) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("compile failed: %s", msg);
    }
    tg_ctx_free(ctx);
    return f;
}

/* ---- the caller's strided views ---- */

/* y = x * w + 1 with x given as a transposed view and w as a reversed
 * slice: the kernel walks the strides it is given. */
static void test_strided_caller_inputs(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,2]}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"p\"]},"
        "{\"op\":\"add\",\"inputs\":[\"p\",{\"value\":1}],\"outputs\":[\"y\"]}]}");
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    /* base = [[1,2,3],[4,5,6]]; x = base.T = [[1,4],[2,5],[3,6]] */
    const double bd[6] = {1, 2, 3, 4, 5, 6};
    tg_array *base = tg_array_new_from(TG_FLOAT64, 2, (int64_t[]){2, 3}, bd);
    int axes[2] = {1, 0};
    tg_array *x = tg_array_view_transpose(base, axes, ctx);
    /* w = [10, 20, 30][::-2] = [30, 10] */
    const double wd[3] = {10, 20, 30};
    tg_array *wbase = tg_array_new_from(TG_FLOAT64, 1, (int64_t[]){3}, wd);
    tg_array *w = tg_array_view_slice(wbase, 0, TG_SLICE_NONE, TG_SLICE_NONE, -2, ctx);
    assert_non_null(x);
    assert_non_null(w);
    assert_int_equal(tg_array_size(w), 2);
    tg_array *in[2] = {x, w}, *out[1] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), 0);
    /* [[1*30+1, 4*10+1], [2*30+1, 5*10+1], [3*30+1, 6*10+1]] */
    const double want[6] = {31, 41, 61, 51, 91, 61};
    tg_array *wa = tu_f64(2, (int64_t[]){3, 2}, want);
    tu_assert_close(out[0], wa, 0, 0);
    /* The inputs are untouched. */
    assert_true(tg_array_get_flat(base, 4) == 5 && tg_array_get_flat(wbase, 0) == 10);
    tg_array_free(wa);
    tg_array_free(out[0]);
    tg_array_free(x);
    tg_array_free(w);
    tg_array_free(base);
    tg_array_free(wbase);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* ---- the parallel path ---- */

/* Large enough for OpenMP chunks: d = a // b and m = a % b over int64 with
 * a broadcast row; a zero divisor in the last element is still seen. */
static void test_large_int_division(void **state) {
    (void)state;
    enum { R = 700, C = 200 }; /* 140,000 elements, above TG_PARALLEL_MIN */
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"int64\",\"shape\":[null,null]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"int64\",\"shape\":[null]}}],"
        "\"nodes\":[{\"op\":\"int_div\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"d\"]},"
        "{\"op\":\"mod\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"m\"]}]}");
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    int64_t *ad = malloc(sizeof(int64_t) * R * C), bd[C];
    for (int64_t i = 0; i < (int64_t)R * C; i++) ad[i] = i % 2 ? -i : i;
    for (int j = 0; j < C; j++) bd[j] = j % 3 == 0 ? -(j + 1) : j + 1;
    tg_array *a = tg_array_new_from(TG_INT64, 2, (int64_t[]){R, C}, ad);
    tg_array *b = tg_array_new_from(TG_INT64, 1, (int64_t[]){C}, bd);
    tg_array *in[2] = {a, b}, *out[2] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), 0);
    const int64_t *d = tg_array_data(out[0]), *m = tg_array_data(out[1]);
    int64_t bad = 0;
    for (int64_t i = 0; i < (int64_t)R * C; i++) {
        int64_t x = ad[i], y = bd[i % C];
        /* Floor division and the divisor-signed remainder, from C's
         * truncating ones. */
        int64_t q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
            q -= 1;
            r += y;
        }
        if (d[i] != q || m[i] != r) bad++;
        assert_true(x == d[i] * y + m[i]);
    }
    assert_int_equal(bad, 0);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    out[0] = out[1] = NULL;
    /* A zero divisor in the last column: an error, whichever thread saw
     * it. */
    tg_array_free(b);
    bd[C - 1] = 0;
    b = tg_array_new_from(TG_INT64, 1, (int64_t[]){C}, bd);
    in[1] = b;
    assert_int_not_equal(tg_function_call(f, in, out, ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "integer division by zero"));
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(a);
    tg_array_free(b);
    free(ad);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* Float16 through a broadcast and the parallel path: y = h * 2 + row,
 * every value exact in float16. */
static void test_large_float16(void **state) {
    (void)state;
    enum { R = 400, C = 256 };
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"h\",\"type\":{\"dtype\":\"float16\",\"shape\":[null,null]}},"
        "{\"id\":\"r\",\"type\":{\"dtype\":\"float16\",\"shape\":[null]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"h\",{\"value\":2}],\"outputs\":[\"t\"]},"
        "{\"op\":\"add\",\"inputs\":[\"t\",\"r\"],\"outputs\":[\"y\"]}]}");
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *h = tg_array_new(TG_FLOAT16, 2, (int64_t[]){R, C});
    tg_array *r = tg_array_new(TG_FLOAT16, 1, (int64_t[]){C});
    uint16_t *hd = tg_array_data(h), *rd = tg_array_data(r);
    for (int i = 0; i < R * C; i++) hd[i] = tg_float_to_half((float)(i % 64) - 32.0f);
    for (int j = 0; j < C; j++) rd[j] = tg_float_to_half(0.5f * (float)(j % 8));
    tg_array *in[2] = {h, r}, *out[1] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), 0);
    assert_int_equal(tg_array_dtype(out[0]), TG_FLOAT16);
    const uint16_t *y = tg_array_data(out[0]);
    int bad = 0;
    for (int i = 0; i < R * C; i++) {
        float want = 2.0f * ((float)(i % 64) - 32.0f) + 0.5f * (float)((i % C) % 8);
        if (tg_half_to_float(y[i]) != want) bad++;
    }
    assert_int_equal(bad, 0);
    tg_array_free(out[0]);
    tg_array_free(h);
    tg_array_free(r);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* ---- allocation ---- */

static long n_allocs;
static void *counting_realloc(void *ud, void *p, size_t size) {
    (void)ud;
    if (size == 0) {
        free(p);
        return NULL;
    }
    n_allocs++;
    return realloc(p, size);
}

/* A chain of scalar nodes (add, mul, sub, maximum, minimum, tanh, a
 * comparison, switch, an int32 operand) called again and again: once the first call has made the
 * results, later calls reuse them and allocate nothing but what they hand
 * back to the caller. */
static void test_scalar_chain_reuses_storage(void **state) {
    (void)state;
    char buf[16384];
    int len = snprintf(buf, sizeof buf,
                       "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                       "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                       "{\"id\":\"k\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}}],"
                       "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"v0\"]}");
    const char *ops[] = {"add", "mul", "sub", "maximum", "minimum"};
    int nchain = 40;
    for (int i = 1; i <= nchain; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len,
                        ",{\"op\":\"%s\",\"inputs\":[\"v%d\",\"x\"],\"outputs\":[\"v%d\"]}",
                        ops[i % 5], i - 1, i);
    len += snprintf(buf + len, sizeof buf - (size_t)len,
                    ",{\"op\":\"tanh\",\"inputs\":[\"v%d\"],\"outputs\":[\"e\"]}"
                    ",{\"op\":\"gt\",\"inputs\":[\"e\",{\"value\":0}],\"outputs\":[\"c\"]}"
                    ",{\"op\":\"switch\",\"inputs\":[\"c\",\"e\",\"k\"],\"outputs\":[\"s\"]}"
                    ",{\"op\":\"mul\",\"inputs\":[\"s\",\"k\"],\"outputs\":[\"y\"]}]}",
                    nchain);
    assert_true(len < (int)sizeof buf);
    tg_graph *g = tu_load(buf);
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *x = tg_array_new_scalar(TG_FLOAT64, 0.25);
    tg_array *k = tg_array_new_scalar(TG_INT32, 3);
    tg_array *in[2] = {x, k}, *out[1] = {0};
    for (int call = 0; call < 2; call++) {
        assert_int_equal(tg_function_call(f, in, out, ctx), 0);
        tg_array_free(out[0]);
        out[0] = NULL;
    }
    n_allocs = 0;
    tg_set_allocator(counting_realloc, NULL);
    int rc = tg_function_call(f, in, out, ctx);
    tg_set_allocator(NULL, NULL);
    assert_int_equal(rc, 0);
    /* At most the result handed back (an array and its buffer); the
     * int32 k that switch and mul convert to float64 stays on the stack. */
    assert_in_range(n_allocs, 0, 2);
    /* v0 = 0.5; then v_i = op(v_{i-1}, x) with x = 0.25, computed here the
     * way the graph says. */
    double v = 0.5;
    for (int i = 1; i <= nchain; i++) {
        switch (i % 5) {
        case 0: v = v + 0.25; break;
        case 1: v = v * 0.25; break;
        case 2: v = v - 0.25; break;
        case 3: v = v > 0.25 ? v : 0.25; break;
        default: v = v < 0.25 ? v : 0.25; break;
        }
    }
    double e = tanh(v), want = (e > 0 ? e : 3.0) * 3.0;
    assert_true(fabs(tg_array_get_flat(out[0], 0) - want) <= 1e-12 * fabs(want));
    tg_array_free(out[0]);
    tg_array_free(x);
    tg_array_free(k);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* float16 scalars compute in float32 on the stack: y = h * h + h. */
static void test_float16_scalars_reuse_storage(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"h\",\"type\":{\"dtype\":\"float16\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"h\",\"h\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"add\",\"inputs\":[\"t\",\"h\"],\"outputs\":[\"y\"]}]}");
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *h = tg_array_new_scalar(TG_FLOAT16, 1.5), *out[1] = {0};
    for (int call = 0; call < 2; call++) {
        assert_int_equal(tg_function_call(f, &h, out, ctx), 0);
        tg_array_free(out[0]);
        out[0] = NULL;
    }
    n_allocs = 0;
    tg_set_allocator(counting_realloc, NULL);
    int rc = tg_function_call(f, &h, out, ctx);
    tg_set_allocator(NULL, NULL);
    assert_int_equal(rc, 0);
    assert_in_range(n_allocs, 0, 2);
    assert_int_equal(tg_array_dtype(out[0]), TG_FLOAT16);
    assert_true(tg_array_get_flat(out[0], 0) == 1.5 * 1.5 + 1.5);
    tg_array_free(out[0]);
    tg_array_free(h);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A result the caller still holds is not overwritten by the next call. */
static void test_kept_result_not_overwritten(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"sqr\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"neg\",\"inputs\":[\"t\"],\"outputs\":[\"y\"],\"inplace\":{\"0\":0}}]}");
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    const float a[3] = {1, 2, 3}, b[3] = {-4, 5, 0.5f};
    tg_array *x1 = tg_array_new_from(TG_FLOAT32, 1, (int64_t[]){3}, a);
    tg_array *x2 = tg_array_new_from(TG_FLOAT32, 1, (int64_t[]){3}, b);
    tg_array *o1[1] = {0}, *o2[1] = {0};
    assert_int_equal(tg_function_call(f, &x1, o1, ctx), 0);
    assert_int_equal(tg_function_call(f, &x2, o2, ctx), 0);
    const float *p1 = tg_array_data(o1[0]), *p2 = tg_array_data(o2[0]);
    assert_true(p1[0] == -1 && p1[1] == -4 && p1[2] == -9);
    assert_true(p2[0] == -16 && p2[1] == -25 && p2[2] == -0.25f);
    /* The input the caller gave is untouched, in place or not. */
    assert_true(((const float *)tg_array_data(x2))[0] == -4);
    tg_array_free(o1[0]);
    tg_array_free(o2[0]);
    tg_array_free(x1);
    tg_array_free(x2);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* Shapes that do not broadcast, named as NumPy names them. */
static void test_broadcast_error_message(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],"
        "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}]}");
    tg_function *f = compile(g);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = tg_array_new(TG_FLOAT64, 2, (int64_t[]){3, 4});
    tg_array *b = tg_array_new(TG_FLOAT64, 1, (int64_t[]){5});
    tg_array *in[2] = {a, b}, *out[1] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_ESHAPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "shapes (3, 4) and (5,) do not broadcast"));
    tg_array_free(out[0]);
    tg_array_free(a);
    tg_array_free(b);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A node the optimizer made has no place in the file: its run-time error
 * names the file's nodes it stands for (here the fused mul and add). */
static void test_fused_error_names_origins(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",{\"value\":2}],\"outputs\":[\"twice\"]},"
        "{\"op\":\"add\",\"inputs\":[\"twice\",\"b\"],\"outputs\":[\"y\"]}]}");
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, &(tg_compile_options){.preset = "fast_run"}, ctx);
    assert_non_null(f);
    tg_array *a = tg_array_new(TG_FLOAT64, 1, (int64_t[]){3});
    tg_array *b = tg_array_new(TG_FLOAT64, 1, (int64_t[]){2});
    tg_array *in[2] = {a, b}, *out[1] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_ESHAPE);
    const char *m = tg_ctx_message(ctx), *s = strstr(m, "(composite -> y, standing for ");
    if (!s) fail_msg("message: %s", m);
    assert_non_null(strstr(s, "twice"));
    assert_non_null(strstr(m, "do not broadcast"));
    tg_array_free(out[0]);
    tg_array_free(a);
    tg_array_free(b);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* ---- one value, one result, whatever the layout ---- */

/* The libmvec-vectorised ops give each element the same bits wherever it
 * sits: in the vector body of a long contiguous array (the reference),
 * in the tail of a short one (13 elements), in a reversed view and in a
 * view of every other element. A loop's scalar epilogue and the strided
 * path had called scalar libm, which rounds differently: exp(x.T) and
 * exp(x).T differed in a third of their elements. */
static void test_same_bits_any_layout(void **state) {
    (void)state;
    static const char *const ops[] = {"exp", "log", "tanh", "sigmoid", "softplus", "erf", "sin", "arcsinh", "expm1"};
    for (int d = 0; d < 2; d++) {
        tg_dtype dt = d ? TG_FLOAT32 : TG_FLOAT64;
        size_t isz = d ? 4 : 8;
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            char json[512];
            snprintf(json, sizeof json,
                     "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null]}}],"
                     "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}",
                     d ? "float32" : "float64", ops[o]);
            tg_graph *g = tu_load(json);
            tg_function *f = compile(g);
            tg_ctx *ctx = tg_ctx_new();
            /* 64 values in (0.3, 2.9), in the domain of each op */
            double v[64], rev[64], wide[128] = {0};
            for (int i = 0; i < 64; i++) {
                v[i] = 0.3 + 2.6 * ((i * 37) % 64) / 64.0 + 1e-3 * i;
                rev[63 - i] = v[i];
                wide[2 * i] = v[i];
            }
            float vf[64], revf[64], widef[128] = {0};
            for (int i = 0; i < 64; i++) vf[i] = (float)v[i], revf[i] = (float)rev[i];
            for (int i = 0; i < 128; i++) widef[i] = (float)wide[i];
            const void *pv = d ? (const void *)vf : v, *pr = d ? (const void *)revf : rev,
                       *pw = d ? (const void *)widef : wide;
            tg_array *full = tg_array_new_from(dt, 1, (int64_t[]){64}, pv);
            tg_array *shortx = tg_array_new_from(dt, 1, (int64_t[]){13}, pv);
            tg_array *rbase = tg_array_new_from(dt, 1, (int64_t[]){64}, pr);
            tg_array *wbase = tg_array_new_from(dt, 1, (int64_t[]){128}, pw);
            tg_array *rview = tg_array_view_slice(rbase, 0, TG_SLICE_NONE, TG_SLICE_NONE, -1, ctx);
            tg_array *wview = tg_array_view_slice(wbase, 0, TG_SLICE_NONE, TG_SLICE_NONE, 2, ctx);
            assert_non_null(rview);
            assert_non_null(wview);
            tg_array *ref = NULL, *got[3] = {0}, *ins[3] = {shortx, rview, wview};
            assert_int_equal(tg_function_call(f, &full, &ref, ctx), 0);
            for (int k = 0; k < 3; k++) {
                assert_int_equal(tg_function_call(f, &ins[k], &got[k], ctx), 0);
                int64_t n = tg_array_size(got[k]);
                const char *a = tg_array_data(ref), *b = tg_array_data(got[k]);
                for (int64_t i = 0; i < n; i++)
                    if (memcmp(a + i * isz, b + i * isz, isz))
                        fail_msg("%s %s, input %d, element %lld: %.17g in the reference, %.17g here", ops[o],
                                 d ? "float32" : "float64", k, (long long)i, tg_array_get_flat(ref, i),
                                 tg_array_get_flat(got[k], i));
                tg_array_free(got[k]);
            }
            tg_array_free(ref);
            tg_array_free(full);
            tg_array_free(shortx);
            tg_array_free(rview);
            tg_array_free(wview);
            tg_array_free(rbase);
            tg_array_free(wbase);
            tg_ctx_free(ctx);
            tg_function_free(f);
            tg_graph_free(g);
        }
    }
}

/* abs of every signed integer width is branchless ((x ^ m) - m), so that
 * it vectorises; each element by a plain branch here, with NumPy's wrap
 * at the most negative value (np.abs(np.int64(-2**63)) is -2**63), over
 * 67 values (a vector body and a tail), contiguous, reversed and every
 * third one (the strided loop). */
static void test_abs_signed_ints(void **state) {
    (void)state;
    static const tg_dtype dts[] = {TG_INT8, TG_INT16, TG_INT32, TG_INT64};
    enum { N = 67 };
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        const tg_dtype dt = dts[t];
        const size_t e = tg_dtype_size(dt);
        const int bits = (int)e * 8;
        const int64_t lo = bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1)), hi = -(lo + 1);
        char json[512];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                 "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null]}}],"
                 "\"nodes\":[{\"op\":\"abs\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}",
                 tg_dtype_name(dt));
        tg_graph *g = tu_load(json);
        tg_function *f = compile(g);
        tg_ctx *ctx = tg_ctx_new();
        int64_t v[3 * N];
        for (int i = 0; i < 3 * N; i++) { /* every element different, both signs, the ends */
            int64_t w = (int64_t)((uint64_t)(i * 2654435761u) << (bits > 32 ? 29 : 0)) ^ (i * 7);
            v[i] = i % 11 == 3 ? lo : i % 13 == 5 ? hi : i % 17 == 2 ? 0 : i % 19 == 7 ? -1 : w;
        }
        tg_array *base = tg_array_new(dt, 1, (int64_t[]){3 * N});
        for (int i = 0; i < 3 * N; i++) tg_store_i64(dt, (char *)tg_array_data(base) + (size_t)i * e, v[i]);
        tg_array *views[3] = {tg_array_view_slice(base, 0, 0, N, 1, ctx),
                              tg_array_view_slice(base, 0, TG_SLICE_NONE, TG_SLICE_NONE, -1, ctx),
                              tg_array_view_slice(base, 0, 1, TG_SLICE_NONE, 3, ctx)};
        for (int k = 0; k < 3; k++) {
            tg_array *x = views[k], *y = NULL;
            assert_non_null(x);
            assert_int_equal(tg_function_call(f, &x, &y, ctx), 0);
            const int64_t n = tg_array_size(x);
            for (int64_t i = 0; i < n; i++) {
                const int64_t xi = tg_load_i64(dt, (const char *)tg_array_data(x) + i * tg_array_strides(x)[0]);
                const int64_t want = xi == lo ? lo : xi < 0 ? -xi : xi;
                const int64_t got = tg_load_i64(dt, (const char *)tg_array_data(y) + i * (int64_t)e);
                if (got != want)
                    fail_msg("abs %s, view %d, element %lld: abs(%lld) gave %lld, want %lld", tg_dtype_name(dt), k,
                             (long long)i, (long long)xi, (long long)got, (long long)want);
            }
            tg_array_free(y);
            tg_array_free(x);
        }
        tg_array_free(base);
        tg_ctx_free(ctx);
        tg_function_free(f);
        tg_graph_free(g);
    }
}

/* ---- integer division by an invariant divisor ---- */

/* Element i of an integer array of dtype dt (e bytes), as its bits
 * sign-extended (signed) or zero-extended (unsigned), little-endian. */
static uint64_t int_at(const char *p, size_t e, bool sgn) {
    uint64_t v = 0;
    memcpy(&v, p, e);
    if (sgn && e < 8 && (v >> (e * 8 - 1)) & 1) v |= ~UINT64_C(0) << (e * 8);
    return v;
}

/* int_div and mod of every integer dtype by a 0-d divisor (the same along
 * the whole loop, which divides by its reciprocal): divisors small and
 * large, powers of two and their neighbours, the ends of the range and
 * random ones, both signs; dividends at the ends of the range, at
 * multiples of the divisor and one off, and random, contiguous and every
 * other one. Each quotient and remainder against C's truncating `/` and
 * `%` turned into floor division by hand (NumPy's //, %); -1 wraps the
 * most negative value as NumPy does. */
static void test_int_division_invariant(void **state) {
    (void)state;
    static const tg_dtype dts[] = {TG_INT8, TG_INT16, TG_INT32, TG_INT64, TG_UINT8, TG_UINT16, TG_UINT32, TG_UINT64};
    enum { N = 160 };
    uint64_t rng = 0x9E3779B97F4A7C15u;
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        const tg_dtype dt = dts[t];
        const size_t e = tg_dtype_size(dt);
        const bool sgn = t < 4;
        const int bits = (int)e * 8;
        /* the range's ends as bit patterns of 64 bits */
        const uint64_t mask = bits == 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits) - 1;
        const int64_t smin = bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1)), smax = -(smin + 1);
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                 "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null]}},"
                 "{\"id\":\"d\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}}],"
                 "\"nodes\":[{\"op\":\"int_div\",\"inputs\":[\"x\",\"d\"],\"outputs\":[\"q\"]},"
                 "{\"op\":\"mod\",\"inputs\":[\"x\",\"d\"],\"outputs\":[\"r\"]}]}",
                 tg_dtype_name(dt), tg_dtype_name(dt));
        tg_graph *g = tu_load(json);
        tg_function *f = compile(g);
        tg_ctx *ctx = tg_ctx_new();
        uint64_t divs[96];
        int nd = 0;
        static const uint64_t SMALL[] = {1, 2, 3, 5, 6, 7, 10, 11, 13, 25, 100, 125, 127, 128, 129, 255, 256, 641, 1000,
                                         32767, 32768, 65535, 65536, 1000000007u, 2147483647u, 2147483648u,
                                         4294967295u, 4294967296u, 4294967297u};
        for (size_t k = 0; k < sizeof SMALL / sizeof SMALL[0]; k++) {
            divs[nd++] = SMALL[k] & mask;
            if (sgn) divs[nd++] = (0 - SMALL[k]) & mask;
        }
        /* large ones: 2^(bits-2), 2^(bits-1) - 1 and 2^(bits-1) (signed: the
         * most negative), the largest unsigned, random */
        divs[nd++] = (UINT64_C(1) << (bits - 2)) & mask;
        divs[nd++] = (uint64_t)smax & mask;
        divs[nd++] = (uint64_t)smin & mask;
        divs[nd++] = mask;
        for (int k = 0; k < 8; k++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            divs[nd++] = (rng >> (k % 4 * 8)) & mask;
        }
        tg_array *base = tg_array_new(dt, 1, (int64_t[]){2 * N}), *dv = tg_array_new(dt, 0, NULL);
        for (int k = 0; k < nd; k++) {
            const uint64_t db = divs[k];
            const int64_t ds = (int64_t)int_at((const char *)&db, e, sgn); /* signed: the value */
            if (db == 0) continue;
            memcpy(tg_array_data(dv), &db, e);
            for (int i = 0; i < 2 * N; i++) {
                uint64_t v;
                rng = rng * 6364136223846793005u + 1442695040888963407u;
                int m = i % 16, j = i / 16;
                if (m == 0) v = (uint64_t)smin; /* (unsigned: 2^(bits-1)) */
                else if (m == 1) v = (uint64_t)smax;
                else if (m == 2) v = sgn ? (uint64_t)-1 : mask;
                else if (m == 3) v = (uint64_t)(j - 2);
                else if (m < 8) v = db * (uint64_t)(j + m) + (uint64_t)(m - 5); /* multiples, one off */
                else if (m < 10) v = (uint64_t)smin + (uint64_t)(m - 7);
                else v = rng >> (m % 4 * 11);
                v &= mask;
                memcpy((char *)tg_array_data(base) + (size_t)i * e, &v, e);
            }
            tg_array *views[2] = {tg_array_view_slice(base, 0, 0, N, 1, ctx),
                                  tg_array_view_slice(base, 0, TG_SLICE_NONE, TG_SLICE_NONE, 2, ctx)};
            for (int w = 0; w < 2; w++) {
                tg_array *in[2] = {views[w], dv}, *out[2] = {0};
                assert_int_equal(tg_function_call(f, in, out, ctx), 0);
                for (int64_t i = 0; i < N; i++) {
                    const uint64_t xb = int_at((const char *)tg_array_data(views[w]) + i * tg_array_strides(views[w])[0], e, sgn);
                    const uint64_t qb = int_at((const char *)tg_array_data(out[0]) + i * (int64_t)e, e, sgn);
                    const uint64_t rb = int_at((const char *)tg_array_data(out[1]) + i * (int64_t)e, e, sgn);
                    uint64_t wq, wr;
                    if (!sgn) {
                        wq = xb / db;
                        wr = xb % db;
                    } else if (ds == -1) {
                        wq = int_at((const char *)&(uint64_t){(0 - xb) & mask}, e, true); /* wraps */
                        wr = 0;
                    } else {
                        const int64_t x = (int64_t)xb;
                        int64_t q = x / ds, r = x % ds;
                        if (r != 0 && ((r < 0) != (ds < 0))) {
                            q -= 1;
                            r += ds;
                        }
                        wq = (uint64_t)q;
                        wr = (uint64_t)r;
                    }
                    if (qb != wq || rb != wr)
                        fail_msg("%s, view %d: %lld // %lld gave %lld rem %lld, want %lld rem %lld (unsigned: %llu // %llu)",
                                 tg_dtype_name(dt), w, (long long)xb, (long long)ds, (long long)qb, (long long)rb,
                                 (long long)wq, (long long)wr, (unsigned long long)xb, (unsigned long long)db);
                }
                tg_array_free(out[0]);
                tg_array_free(out[1]);
            }
            tg_array_free(views[0]);
            tg_array_free(views[1]);
        }
        tg_array_free(base);
        tg_array_free(dv);
        tg_ctx_free(ctx);
        tg_function_free(f);
        tg_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strided_caller_inputs),
        cmocka_unit_test(test_large_int_division),
        cmocka_unit_test(test_large_float16),
        cmocka_unit_test(test_scalar_chain_reuses_storage),
        cmocka_unit_test(test_float16_scalars_reuse_storage),
        cmocka_unit_test(test_kept_result_not_overwritten),
        cmocka_unit_test(test_broadcast_error_message),
        cmocka_unit_test(test_fused_error_names_origins),
        cmocka_unit_test(test_same_bits_any_layout),
        cmocka_unit_test(test_abs_signed_ints),
        cmocka_unit_test(test_int_division_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
