/* Max pooling over 2x2 windows 2 apart, the convnets' pooling, which has
 * loops of its own (ops/pool.c): forward and gradient on inputs large
 * enough for threads, float32 and float64, with ties (values on a
 * quarter grid) and NaNs, on shapes whose windows tile the image and on
 * odd ones (the last row and column left out; the gradient there goes
 * through the general loop and must be 0). Expected values come from a
 * loop written here. The op-data files (tests/data/ops/pool_*.json) cover
 * the other window shapes, strides, paddings and modes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor.h"
#include "testutil.h"

static const char *pool_json(const char *dt) {
    static char json[1024];
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null,null,null]}},"
             "{\"id\":\"gy\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null,null,null]}}],"
             "\"nodes\":[{\"op\":\"pool2d\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
             "\"attrs\":{\"ws\":[2,2],\"mode\":\"max\"}},"
             "{\"op\":\"pool2d_grad\",\"inputs\":[\"x\",\"y\",\"gy\"],\"outputs\":[\"gx\"],"
             "\"attrs\":{\"ws\":[2,2],\"mode\":\"max\"}}],"
             "\"functions\":{\"main\":{\"inputs\":[\"x\",\"gy\"],\"outputs\":[\"y\",\"gx\"]}}}",
             dt, dt);
    return json;
}

static bool same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void check_shape(tg_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W) {
    const int64_t OH = H / 2, OW = W / 2;
    int64_t xs[4] = {N, C, H, W}, ys[4] = {N, C, OH, OW};
    tg_array *x = tg_array_new(dt, 4, xs), *gy = tg_array_new(dt, 4, ys);
    uint64_t s = 99;
    for (int64_t i = 0; i < N * C * H * W; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)(s >> 59); /* 0..31 */
        double v = (double)((int)(s >> 40) % 9 - 4) * 0.25; /* ties are common */
        if (k == 0) v = NAN;
        if (k == 1) v = -INFINITY;
        tg_store_f64(dt, (char *)tg_array_data(x) + i * (int64_t)tg_dtype_size(dt), v);
    }
    for (int64_t i = 0; i < N * C * OH * OW; i++)
        tg_store_f64(dt, (char *)tg_array_data(gy) + i * (int64_t)tg_dtype_size(dt), 1.0 + (double)(i % 13));
    tg_graph *g = tu_load(pool_json(tg_dtype_name(dt)));
    tg_array *in[2] = {x, gy}, *out[2] = {0};
    tu_call(g, NULL, in, out);
    assert_int_equal(tg_array_size(out[0]), N * C * OH * OW);
    assert_int_equal(tg_array_size(out[1]), N * C * H * W);
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {
                double m = -INFINITY;
                bool nan = false;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) {
                        double v = tg_array_get_flat(x, (p * H + 2 * i + a) * W + 2 * j + b);
                        nan |= isnan(v);
                        if (v > m) m = v;
                    }
                if (nan) m = NAN;
                double got = tg_array_get_flat(out[0], (p * OH + i) * OW + j);
                if (!same(got, m))
                    fail_msg("%s %lldx%lld: y[%lld,%lld,%lld] = %g, want %g", tg_dtype_name(dt), (long long)H,
                             (long long)W, (long long)p, (long long)i, (long long)j, got, m);
            }
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t a = 0; a < H; a++)
            for (int64_t b = 0; b < W; b++) {
                double want = 0;
                if (a < 2 * OH && b < 2 * OW) {
                    int64_t o = (p * OH + a / 2) * OW + b / 2;
                    double m = tg_array_get_flat(out[0], o);
                    if (tg_array_get_flat(x, (p * H + a) * W + b) == m) want = tg_array_get_flat(gy, o);
                }
                double got = tg_array_get_flat(out[1], (p * H + a) * W + b);
                if (got != want)
                    fail_msg("%s %lldx%lld: gx[%lld,%lld,%lld] = %g, want %g", tg_dtype_name(dt), (long long)H,
                             (long long)W, (long long)p, (long long)a, (long long)b, got, want);
            }
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(x);
    tg_array_free(gy);
    tg_graph_free(g);
}

static void test_max2x2_tiled(void **state) {
    (void)state;
    check_shape(TG_FLOAT32, 6, 5, 24, 24);
    check_shape(TG_FLOAT64, 6, 5, 24, 24);
    check_shape(TG_FLOAT32, 1, 1, 2, 2);
}

static void test_max2x2_odd(void **state) {
    (void)state;
    check_shape(TG_FLOAT32, 4, 7, 25, 31);
    check_shape(TG_FLOAT64, 4, 7, 25, 31);
    check_shape(TG_FLOAT64, 2, 3, 3, 1); /* no output column */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max2x2_tiled),
        cmocka_unit_test(test_max2x2_odd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
