/* What a function holds while it runs and between calls: the pool does
 * not keep dead intermediates past the call's live set; a function does
 * not keep its outputs' buffers (nor the inputs they view) for the
 * caller's lifetime; readers of a shared variable do not keep its old
 * values; a failed call lets go of what it made. Memory is counted with
 * a counting allocator (every byte the library holds goes through it),
 * the expected figures worked out by hand from the graphs. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static long long live_bytes, peak_bytes;
typedef struct hdr {
    size_t n;
    size_t pad;
} hdr;
static void *count_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    hdr *h = p ? (hdr *)p - 1 : NULL;
    if (h) live_bytes -= (long long)h->n;
    if (n == 0) {
        free(h);
        return NULL;
    }
    hdr *r = realloc(h, n + sizeof(hdr));
    if (!r) {
        if (h) live_bytes += (long long)h->n;
        return NULL;
    }
    r->n = n;
    live_bytes += (long long)n;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
    return r + 1;
}

static tg_function *compile_none(const char *json, const char *name) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(json);
    int i = tg_graph_function_find(g, name, ctx);
    tg_function *f = i >= 0 ? tg_function_compile(g, i, &(tg_compile_options){.preset = "none"}, ctx) : NULL;
    if (!f) fail_msg("compile failed: %s", tg_ctx_message(ctx));
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return f;
}

static tg_array *filled(int64_t n, double v0) {
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    for (int64_t i = 0; i < n; i++) ((double *)tg_array_data(a))[i] = v0 + 1e-3 * (double)(i % 11);
    return a;
}

/* ---- 1: the pool holds no dead intermediate past the live set ---- */

/* R rounds of s_r = sin(y_{r-1}); y_r = join(s_r, z), y_{-1} = x: every
 * intermediate a different size. */
enum { JN = 16384, JM = 16384, JR = 8 };

static char *joinchain_json(void) {
    size_t cap = 8192, k = 0;
    char *json = malloc(cap);
    k += (size_t)snprintf(json + k, cap - k,
                          "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
                          "{\"id\":\"z\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":[");
    for (int r = 0; r < JR; r++) {
        char prev[16];
        if (r) snprintf(prev, sizeof prev, "y%d", r - 1);
        else
            snprintf(prev, sizeof prev, "x");
        k += (size_t)snprintf(json + k, cap - k,
                              "%s{\"op\":\"sin\",\"inputs\":[\"%s\"],\"outputs\":[\"s%d\"]},"
                              "{\"op\":\"join\",\"inputs\":[\"s%d\",\"z\"],\"outputs\":[\"y%d\"],"
                              "\"attrs\":{\"axis\":0}}",
                              r ? "," : "", prev, r, r, r);
    }
    snprintf(json + k, cap - k, "],\"functions\":{\"main\":{\"inputs\":[\"x\",\"z\"],\"outputs\":[\"y%d\"]}}}",
             JR - 1);
    return json;
}

static void test_pool_peak_is_live_set(void **state) {
    (void)state;
    char *json = joinchain_json();
    tg_set_allocator(count_realloc, NULL);
    live_bytes = 0;
    tg_function *f = compile_none(json, "main");
    tg_array *in[2] = {filled(JN, 0.25), filled(JM, -0.5)}, *y = NULL;
    tg_ctx *ctx = tg_ctx_new();
    /* By hand: sin_r holds y_{r-1} and s_r (2 (n + r m) elements), join_r
     * holds s_r and y_r (2n + (2r + 1) m); the most is join_{R-1}'s,
     * 2n + (2R - 1) m float64s, 2.125 MiB. Keeping every dead
     * intermediate instead came to the sum of all of them, 10 MiB. */
    const long long live = (2LL * JN + (2LL * JR - 1) * JM) * 8, unit = (long long)JM * 8;
    /* from before the first call: what the function holds between calls
     * counts */
    long long base = live_bytes;
    for (int c = 0; c < 6; c++) {
        peak_bytes = live_bytes;
        assert_int_equal(tg_function_call(f, in, &y, ctx), 0);
        /* Headers and small arrays: well under one unit. The first call
         * starts from an empty pool; later ones may hold beside the live
         * set buffers they will take again, at most the largest one
         * (y_{R-1}, R + 1 units). */
        long long allow = live + (c ? (JR + 1) * unit : 0) + unit / 2;
        if (peak_bytes - base > allow)
            fail_msg("call %d: peak %lld bytes above its inputs, %lld by hand (+ slack %lld)", c, peak_bytes - base,
                     live, allow - live);
        /* y_{R-1}: R sines of x, then z after each */
        assert_int_equal(tg_array_size(y), JN + (int64_t)JR * JM);
        for (int64_t i = 0; i < JN; i += 1001) {
            double v = 0.25 + 1e-3 * (double)(i % 11);
            for (int r = 0; r < JR; r++) v = sin(v);
            assert_true(fabs(tg_array_get_flat(y, i) - v) < 1e-15);
        }
        assert_true(tg_array_get_flat(y, JN + (int64_t)(JR - 1) * JM + 3) == -0.5 + 1e-3 * 3);
        tg_array_free(y);
    }
    tg_function_free(f);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
    free(json);
}

/* A loop that asks for the same sizes every call, with a buffer of one
 * size freed before one of another is made and the first size asked for
 * again: from its fourth call on it allocates nothing large. (Its second
 * call has to make room for a buffer the first call's output held, and
 * frees the join's, which the third call allocates again.) */
static int large_allocs;
static void *count_large(void *ud, void *p, size_t n) {
    if (!p && n > 4096) large_allocs++;
    return count_realloc(ud, p, n);
}

static void test_pool_steady_loop_allocates_nothing(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
        "{\"id\":\"z\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":["
        "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"a\"],\"outputs\":[\"sa\"]},"
        "{\"op\":\"join\",\"inputs\":[\"x\",\"z\"],\"outputs\":[\"b\"],\"attrs\":{\"axis\":0}},"
        "{\"op\":\"sum\",\"inputs\":[\"b\"],\"outputs\":[\"sb\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"sb\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"add\",\"inputs\":[\"c\",\"sa\"],\"outputs\":[\"y\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"x\",\"z\"],\"outputs\":[\"y\"]}}}";
    tg_set_allocator(count_large, NULL);
    live_bytes = 0;
    tg_function *f = compile_none(json, "main");
    tg_array *in[2] = {filled(20000, 0.0), filled(30000, 1.0)}, *y = NULL;
    tg_ctx *ctx = tg_ctx_new();
    double sa = 0, sb = 0;
    for (int i = 0; i < 20000; i++) sa += exp(1e-3 * (i % 11)), sb += 1e-3 * (i % 11);
    for (int i = 0; i < 30000; i++) sb += 1.0 + 1e-3 * (i % 11);
    for (int c = 0; c < 6; c++) {
        large_allocs = 0;
        assert_int_equal(tg_function_call(f, in, &y, ctx), 0);
        if (c >= 3 && large_allocs) fail_msg("call %d allocated %d large buffers", c, large_allocs);
        assert_true(fabs(tg_array_get_flat(y, 7) - (7e-3 * sb + sa)) < 1e-9 * fabs(sb + sa));
        tg_array_free(y);
    }
    tg_function_free(f);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
}

/* ---- 2: outputs are the caller's, not kept by the function ---- */

/* r = dot(A, B)[0]: the caller gets the row (8 KiB) in a buffer of its
 * own, not a view pinning the product (512 KiB); between calls the
 * function keeps at most what the call freed (the product, in its pool),
 * and tg_function_trim gives that back. */
static void test_output_view_of_intermediate(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"A\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
        "{\"id\":\"B\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}}],\"nodes\":["
        "{\"op\":\"dot\",\"inputs\":[\"A\",\"B\"],\"outputs\":[\"C\"]},"
        "{\"op\":\"subtensor\",\"inputs\":[\"C\"],\"outputs\":[\"r\"],\"attrs\":{\"index\":[0]}}],"
        "\"functions\":{\"main\":{\"inputs\":[\"A\",\"B\"],\"outputs\":[\"r\"]}}}";
    enum { M = 64, K = 256, N = 1024 };
    tg_set_allocator(count_realloc, NULL);
    live_bytes = 0;
    tg_function *f = compile_none(json, "main");
    tg_array *in[2] = {tg_array_new(TG_FLOAT64, 2, (int64_t[]){M, K}), tg_array_new(TG_FLOAT64, 2, (int64_t[]){K, N})};
    double *a = tg_array_data(in[0]), *b = tg_array_data(in[1]);
    for (int i = 0; i < M * K; i++) a[i] = (double)(i % 5) - 2;
    for (int i = 0; i < K * N; i++) b[i] = (double)(i % 3);
    tg_ctx *ctx = tg_ctx_new();
    const long long C = (long long)M * N * 8, r = N * 8, slack = 16 * 1024;
    long long base = live_bytes;
    for (int c = 0; c < 4; c++) {
        tg_array *y = NULL;
        assert_int_equal(tg_function_call(f, in, &y, ctx), 0);
        for (int j = 0; j < N; j += 37) {
            double v = 0;
            for (int k = 0; k < K; k++) v += a[k] * b[k * N + j];
            assert_true(tg_array_get_flat(y, j) == v);
        }
        /* the row, and the product freed into the pool */
        if (live_bytes - base > C + r + slack)
            fail_msg("call %d: %lld bytes held with the row, %lld by hand", c, live_bytes - base, C + r);
        if (c == 3) {
            tg_function_trim(f);
            if (live_bytes - base > r + slack)
                fail_msg("after trim: %lld bytes held with the row, %lld by hand", live_bytes - base, r);
        }
        tg_array_free(y);
    }
    tg_function_trim(f);
    if (live_bytes - base > slack) fail_msg("after trim: %lld bytes held, none by hand", live_bytes - base);
    tg_function_free(f);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
}

/* Outputs that view an input (X.T, reshape(X)): once the caller has let
 * go of them and of X, nothing holds X's memory (inputs are borrowed). */
static void test_output_view_of_input(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"X\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}}],\"nodes\":["
        "{\"op\":\"transpose\",\"inputs\":[\"X\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"reshape\",\"inputs\":[\"X\",{\"value\":{\"data\":[-1],\"dtype\":\"int64\",\"shape\":[1]}}],"
        "\"outputs\":[\"r\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"X\"],\"outputs\":[\"t\",\"r\"]}}}";
    tg_set_allocator(count_realloc, NULL);
    live_bytes = 0;
    tg_function *f = compile_none(json, "main");
    tg_ctx *ctx = tg_ctx_new();
    long long base = live_bytes;
    for (int c = 0; c < 2; c++) {
        tg_array *X = tg_array_new(TG_FLOAT64, 2, (int64_t[]){256, 512}), *out[2] = {0};
        for (int i = 0; i < 256 * 512; i++) ((double *)tg_array_data(X))[i] = i;
        assert_int_equal(tg_function_call(f, &X, out, ctx), 0);
        assert_true(tg_array_get_flat(out[1], 1000) == 1000);
        assert_int_equal(tg_array_shape(out[0])[0], 512);
        tg_array_free(out[0]);
        tg_array_free(out[1]);
        tg_array_free(X);
        /* X was 1 MiB */
        if (live_bytes - base > 16 * 1024)
            fail_msg("call %d: %lld bytes held after the caller freed X and the outputs", c, live_bytes - base);
    }
    tg_function_free(f);
    tg_ctx_free(ctx);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
}

/* y = x + 1 + 1 ... (6 nodes), -O none: each node holds its input and
 * its output, 2 vectors; the function keeps no third (its last output)
 * through the next call, and from the third call on allocates nothing
 * large (the output takes back the buffer the caller let go of). Then a
 * call with a vector an eighth the size: its output is handed over in a
 * buffer of its size, not in the old output's, which goes. */
static void test_output_not_kept(void **state) {
    (void)state;
    char json[4096];
    size_t k = (size_t)snprintf(json, sizeof json,
                                "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                                "{\"id\":\"x0\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":[");
    for (int i = 0; i < 6; i++)
        k += (size_t)snprintf(json + k, sizeof json - k,
                              "%s{\"op\":\"add\",\"inputs\":[\"x%d\",{\"value\":1}],\"outputs\":[\"x%d\"]}", i ? "," : "",
                              i, i + 1);
    snprintf(json + k, sizeof json - k, "],\"functions\":{\"main\":{\"inputs\":[\"x0\"],\"outputs\":[\"x6\"]}}}");
    tg_set_allocator(count_large, NULL);
    live_bytes = 0;
    tg_function *f = compile_none(json, "main");
    tg_ctx *ctx = tg_ctx_new();
    long long base0 = live_bytes;
    const int64_t n = 65536, m = n / 8;
    const long long vec = n * 8, slack = 16 * 1024;
    tg_array *x = filled(n, 2.0), *y = NULL;
    /* from before the first call: what the function holds between calls
     * counts */
    long long base = live_bytes;
    for (int c = 0; c < 4; c++) {
        peak_bytes = live_bytes;
        large_allocs = 0;
        assert_int_equal(tg_function_call(f, &x, &y, ctx), 0);
        if (peak_bytes - base > 2 * vec + slack)
            fail_msg("call %d: peak %lld bytes above the input, 2 vectors (%lld) by hand", c, peak_bytes - base,
                     2 * vec);
        if (c >= 2 && large_allocs) fail_msg("call %d allocated %d large buffers", c, large_allocs);
        assert_true(tg_array_get_flat(y, 5) == 2.0 + 5e-3 + 6);
        tg_array_free(y);
    }
    tg_array_free(x);
    x = filled(m, 2.0);
    assert_int_equal(tg_function_call(f, &x, &y, ctx), 0);
    tg_function_trim(f);
    /* the small input and output, nothing else */
    if (live_bytes - base0 > 2 * (m * 8) + slack)
        fail_msg("small call: %lld bytes held, %lld by hand", live_bytes - base0, 2 * m * 8);
    tg_array_free(y);
    tg_array_free(x);
    tg_function_free(f);
    tg_ctx_free(ctx);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
}

/* ---- 3: readers of a shared variable keep no old value of it ---- */

/* W (256 x 256 float64, 512 KiB) read by f and g (sum(dot(x, W))) and
 * halved by upd. Calls upd, upd, f, upd, g, upd, upd: by hand, what is
 * held beyond W's value is the updater's double buffer (the value its
 * last update replaced, to be written over by the next), one W; after
 * tg_function_trim of the three, nothing. */
static void test_shared_readers_keep_no_old_value(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,256]}},"
        "{\"id\":\"W\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]},\"shared\":{\"data\":[[1]]}}],"
        "\"nodes\":["
        "{\"op\":\"dot\",\"inputs\":[\"x\",\"W\"],\"outputs\":[\"h\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"h\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"W\",{\"value\":0.5}],\"outputs\":[\"W2\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"s\"]},"
        "\"g\":{\"inputs\":[\"x\"],\"outputs\":[\"s\"]},"
        "\"upd\":{\"inputs\":[],\"outputs\":[],\"updates\":{\"W\":\"W2\"}}}}";
    const char *presets[] = {"none", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_set_allocator(count_realloc, NULL);
        live_bytes = 0;
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tu_load(json);
        tg_function *fn[3];
        const char *names[3] = {"f", "g", "upd"};
        for (int i = 0; i < 3; i++) {
            fn[i] = tg_function_compile(g, tg_graph_function_find(g, names[i], ctx),
                                        &(tg_compile_options){.preset = presets[p]}, ctx);
            if (!fn[i]) fail_msg("compile %s: %s", names[i], tg_ctx_message(ctx));
        }
        tg_array *W = tg_array_new(TG_FLOAT64, 2, (int64_t[]){256, 256});
        for (int i = 0; i < 256 * 256; i++) ((double *)tg_array_data(W))[i] = 1;
        assert_int_equal(tg_function_shared_set(fn[2], "W", W, ctx), 0);
        tg_array_free(W);
        tg_array *x = tg_array_new(TG_FLOAT64, 2, (int64_t[]){1, 256}), *s = NULL;
        for (int i = 0; i < 256; i++) ((double *)tg_array_data(x))[i] = 1;
        const long long w = 256 * 256 * 8, slack = 64 * 1024;
        long long base = live_bytes;
        const int seq[] = {2, 2, 0, 2, 1, 2, 2};
        int halvings = 0;
        for (int c = 0; c < 7; c++) {
            if (seq[c] == 2) {
                assert_int_equal(tg_function_call(fn[2], NULL, NULL, ctx), 0);
                halvings++;
                continue;
            }
            assert_int_equal(tg_function_call(fn[seq[c]], &x, &s, ctx), 0);
            /* sum over 256 x 256 of 0.5^halvings */
            assert_true(tg_array_get_flat(s, 0) == 65536.0 * ldexp(1, -halvings));
            tg_array_free(s);
        }
        if (live_bytes - base > w + slack)
            fail_msg("%s: %lld bytes held beyond W's value, one W (%lld) by hand", presets[p], live_bytes - base, w);
        for (int i = 0; i < 3; i++) tg_function_trim(fn[i]);
        if (live_bytes - base > slack)
            fail_msg("%s: %lld bytes held beyond W's value after trimming, none by hand", presets[p],
                     live_bytes - base);
        for (int i = 0; i < 3; i++) tg_function_free(fn[i]);
        tg_graph_free(g);
        tg_array_free(x);
        tg_ctx_free(ctx);
        assert_int_equal(live_bytes, 0);
        tg_set_allocator(NULL, NULL);
    }
}

/* ---- 4: a failed call lets go of what it made ---- */

/* sin, cos, tanh and exp of x (512 KiB each), then sin(x) + z with z of
 * 3 elements, which fails. What the call made goes to the pool (counted
 * by tg_function_pool_stats), and tg_function_trim gives it back. */
static void test_failed_call_releases(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
        "{\"id\":\"z\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":["
        "{\"op\":\"sin\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
        "{\"op\":\"cos\",\"inputs\":[\"x\"],\"outputs\":[\"b\"]},"
        "{\"op\":\"tanh\",\"inputs\":[\"x\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"d\"]},"
        "{\"op\":\"add\",\"inputs\":[\"a\",\"z\"],\"outputs\":[\"bad\"]},"
        "{\"op\":\"add\",\"inputs\":[\"bad\",\"b\",\"c\",\"d\"],\"outputs\":[\"y\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"x\",\"z\"],\"outputs\":[\"y\"]}}}";
    tg_set_allocator(count_realloc, NULL);
    live_bytes = 0;
    tg_function *f = compile_none(json, "main");
    tg_ctx *ctx = tg_ctx_new();
    tg_array *in[2] = {filled(65536, 0.5), filled(3, 0.0)}, *y = NULL;
    const long long slack = 16 * 1024;
    long long base = live_bytes;
    for (int c = 0; c < 2; c++) {
        assert_int_not_equal(tg_function_call(f, in, &y, ctx), 0);
        assert_non_null(strstr(tg_ctx_message(ctx), "bad"));
        tg_pool_stats ps;
        tg_function_pool_stats(f, &ps);
        if (live_bytes - base > ps.bytes + slack)
            fail_msg("call %d: %lld bytes held after the failure, %lld of them pooled", c, live_bytes - base,
                     (long long)ps.bytes);
    }
    tg_function_trim(f);
    if (live_bytes - base > slack) fail_msg("%lld bytes held after the failure and trim, none by hand", live_bytes - base);
    tg_function_free(f);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_peak_is_live_set),
        cmocka_unit_test(test_pool_steady_loop_allocates_nothing),
        cmocka_unit_test(test_output_view_of_intermediate),
        cmocka_unit_test(test_output_view_of_input),
        cmocka_unit_test(test_output_not_kept),
        cmocka_unit_test(test_shared_readers_keep_no_old_value),
        cmocka_unit_test(test_failed_call_releases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
