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
    for (int c = 0; c < 4; c++) {
        long long base = live_bytes;
        peak_bytes = live_bytes;
        assert_int_equal(tg_function_call(f, in, &y, ctx), 0);
        /* Headers and small arrays: well under one unit. The first call
         * starts from an empty pool; later ones may hold beside the live
         * set the buffers they will take again (their sizes' last use in
         * the previous call), at most one of the largest unit. */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_peak_is_live_set),
        cmocka_unit_test(test_pool_steady_loop_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
