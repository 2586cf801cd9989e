/* conv2d's direct path (libcore/src/ops/conv_direct.c: float32 and
 * float64, stride 1, AVX-512) against its im2col path and against a naive
 * loop in this file, forced one way or the other through TG_CONV=direct /
 * TG_CONV=im2col: output widths around the vectors (1, 7, 15, 16, 17, 33),
 * every border mode, filter_flip both ways, channel counts that are not
 * multiples of the 8-channel block, batch 1 and 3 (both thread layouts),
 * narrow outputs tiled over the flattened plane, the same cases again
 * with output channels in the vectors (channel tiles, TG_CONV_TILES) and
 * again with images in them (batch tiles, border taps left out; infinite
 * weights), the tiling each size takes and the small planes of many
 * channels that now take the direct path,
 * float16 through the float32 path, float64 (its own kernels); two small
 * cases worked out by hand; and every allocation of a call failing in
 * turn. The random values are quarters in [-4, 4), so every product and
 * partial sum is exact in float32 and the paths must agree exactly. On a
 * CPU without AVX-512 both settings run im2col and the test still checks
 * that against the naive loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_direct.h"
#include "tensor/tensor.h"
#include "testutil.h"

static uint64_t lcg = 2024;
static int64_t rnd(int64_t lo, int64_t hi) { /* in [lo, hi) */
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (int64_t)((lcg >> 33) % (uint64_t)(hi - lo));
}

static tg_array *rand_arr(tg_dtype dt, const int64_t *shape) {
    tg_array *a = tg_array_new(dt, 4, shape);
    assert_non_null(a);
    size_t e = tg_dtype_size(dt);
    for (int64_t i = 0; i < tg_array_size(a); i++)
        tg_store_f64(dt, a->data + (size_t)i * e, (double)rnd(-16, 16) / 4);
    return a;
}
static tg_array *rand_f32(const int64_t *shape) { return rand_arr(TG_FLOAT32, shape); }

/* A graph y = conv2d(x, w) with the given attrs (a JSON object body). */
static tg_graph *conv_graph(const char *dtype, const int64_t *xs, const int64_t *ws,
                            const char *attrs) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld,%lld,%lld]}},"
             "{\"id\":\"w\",\"type\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld,%lld,%lld]}}],"
             "\"nodes\":[{\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"],"
             "\"attrs\":{%s}}]}",
             dtype, (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3], dtype,
             (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3], attrs);
    return tu_load(json);
}

/* y = conv2d(x, w) under TG_CONV=mode. */
static tg_array *run_mode(tg_graph *g, tg_array *x, tg_array *w, const char *mode) {
    setenv("TG_CONV", mode, 1);
    tg_array *in[2] = {x, w}, *out[1] = {NULL};
    tu_call_preset(g, NULL, "none", in, out);
    unsetenv("TG_CONV");
    return out[0];
}

/* Theano's conv2d by its definition: pad, flip the kernel when flip,
 * correlate; sums in double, the result in x's dtype (float32, float64). */
static tg_array *naive(const tg_array *x, const tg_array *w, int64_t ph, int64_t pw,
                       bool flip) {
    const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    const int64_t O = w->shape[0], K = w->shape[2], L = w->shape[3];
    const int64_t OH = H + 2 * ph - K + 1, OW = W + 2 * pw - L + 1;
    int64_t ys[4] = {N, O, OH, OW};
    const tg_dtype dt = x->dtype;
    const size_t e = tg_dtype_size(dt);
    tg_array *y = tg_array_new(dt, 4, ys);
    assert_non_null(y);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t a = 0; a < K; a++)
                            for (int64_t b = 0; b < L; b++) {
                                int64_t r = i + a - ph, q = j + b - pw;
                                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                                int64_t ka = flip ? K - 1 - a : a, kb = flip ? L - 1 - b : b;
                                size_t xi = (size_t)(((n * C + c) * H + r) * W + q),
                                       wi = (size_t)(((o * C + c) * K + ka) * L + kb);
                                s += tg_load_f64(dt, x->data + xi * e) *
                                     tg_load_f64(dt, w->data + wi * e);
                            }
                    tg_store_f64(dt, y->data + (size_t)(((n * O + o) * OH + i) * OW + j) * e, s);
                }
    return y;
}

enum { B_VALID, B_HALF, B_FULL, B_EXPLICIT, NBORDER };
static const char *const BORDER_NAMES[NBORDER] = {"valid", "half", "full", "[1, 2]"};

static void pads(int border, int64_t K, int64_t L, int64_t *ph, int64_t *pw) {
    switch (border) {
    case B_HALF: *ph = K / 2, *pw = L / 2; break;
    case B_FULL: *ph = K - 1, *pw = L - 1; break;
    case B_EXPLICIT: *ph = 1, *pw = 2; break;
    default: *ph = 0, *pw = 0;
    }
}

static void random_shapes(tg_dtype dt) {
    static const int64_t OWS[] = {1, 7, 15, 16, 17, 33};
    static const int64_t COUTS[] = {1, 3, 9, 17};
    int ran = 0;
    for (size_t wi = 0; wi < sizeof OWS / sizeof OWS[0]; wi++)
        for (int border = 0; border < NBORDER; border++)
            for (int flip = 0; flip < 2; flip++)
                for (int64_t N = 1; N <= 3; N += 2) {
                    int64_t C = rnd(1, 6), O = COUTS[rnd(0, 4)], K = rnd(1, 6), L = rnd(1, 6);
                    int64_t ph, pw;
                    pads(border, K, L, &ph, &pw);
                    /* The input width that gives output width OWS[wi]:
                     * OW - L + 1 with "full" (a kernel at most OW wide),
                     * else a wider kernel while it would be < 1. */
                    if (border == B_FULL && L > OWS[wi]) L = OWS[wi];
                    pads(border, K, L, &ph, &pw);
                    int64_t W = OWS[wi] - 2 * pw + L - 1;
                    while (W < 1) {
                        L++;
                        pads(border, K, L, &ph, &pw);
                        W = OWS[wi] - 2 * pw + L - 1;
                    }
                    int64_t H = rnd(1, 10) + (K - 1 - 2 * ph > 0 ? K - 1 - 2 * ph : 0);
                    int64_t xs[4] = {N, C, H, W}, ws[4] = {O, C, K, L};
                    char attrs[128];
                    snprintf(attrs, sizeof attrs, "\"border_mode\":%s%s%s,\"filter_flip\":%s",
                             border == B_EXPLICIT ? "" : "\"", BORDER_NAMES[border],
                             border == B_EXPLICIT ? "" : "\"", flip ? "true" : "false");
                    tg_graph *g = conv_graph(tg_dtype_name(dt), xs, ws, attrs);
                    tg_array *x = rand_arr(dt, xs), *w = rand_arr(dt, ws);
                    tg_array *want = naive(x, w, ph, pw, flip);
                    tg_array *yd = run_mode(g, x, w, "direct"), *yi = run_mode(g, x, w, "im2col");
                    assert_int_equal(want->shape[3], OWS[wi]);
                    tu_assert_close(yd, want, 0, 0);
                    tu_assert_close(yi, want, 0, 0);
                    /* Auto (direct from width 8 on, and narrower where
                     * channel tiles fill their vectors) agrees too. */
                    tg_array *in[2] = {x, w}, *ya[1] = {NULL};
                    tu_call_preset(g, NULL, "none", in, ya);
                    tu_assert_close(ya[0], want, 0, 0);
                    tg_array_free(ya[0]);
                    tg_array_free(yd);
                    tg_array_free(yi);
                    tg_array_free(want);
                    tg_array_free(x);
                    tg_array_free(w);
                    tg_graph_free(g);
                    ran++;
                }
    assert_int_equal(ran, 6 * NBORDER * 2 * 2);
}
static void test_random_shapes(void **state) {
    (void)state;
    random_shapes(TG_FLOAT32);
}
/* float64 has its own kernels (8 lanes a vector). */
static void test_random_shapes_f64(void **state) {
    (void)state;
    random_shapes(TG_FLOAT64);
}

/* Large enough for both thread layouts (TG_PARALLEL_MIN products and up):
 * batch 1 (threads share channel blocks of one image) and 5 (whole images
 * per thread), 20 output channels (blocks of 8, 8, 4), width 26 to 29;
 * each kernel class the direct path unrolls (3x3, 5x5, width 3 or 5 with
 * another height) and one it does not (4x2). */
static void threaded(void) {
    static const int64_t KS[][2] = {{3, 3}, {5, 5}, {2, 3}, {4, 5}, {4, 2}};
    for (int64_t N = 1; N <= 5; N += 4)
        for (size_t k = 0; k < sizeof KS / sizeof KS[0]; k++) {
            int64_t xs[4] = {N, 4, 12, 30}, ws[4] = {20, 4, KS[k][0], KS[k][1]};
            tg_graph *g = conv_graph("float32", xs, ws, "\"border_mode\":\"valid\"");
            tg_array *x = rand_f32(xs), *w = rand_f32(ws);
            tg_array *want = naive(x, w, 0, 0, true);
            tg_array *yd = run_mode(g, x, w, "direct"), *yi = run_mode(g, x, w, "im2col");
            tu_assert_close(yd, want, 0, 0);
            tu_assert_close(yi, want, 0, 0);
            tg_array_free(yd);
            tg_array_free(yi);
            tg_array_free(want);
            tg_array_free(x);
            tg_array_free(w);
            tg_graph_free(g);
        }
}

static void test_threaded(void **state) {
    (void)state;
    threaded();
}

/* Narrow outputs, where the tiles run over the flattened padded plane
 * (conv_direct.c): the convnet example's two layers (24x24 from 28x28, one
 * input channel; 8x8 from 12x12, 8 channels) and their input gradients'
 * "full" convolutions (padded rows shared: every position an output),
 * padded rows of 9 to 12 positions (vectors of 16 lanes over pieces of
 * three rows), "half" and uneven borders, a border wider than the kernel
 * (rows not shared), in float32 and float64, batch 1 and 5 (both thread
 * layouts), both flips. */
static void flat_tiles(void) {
    static const int64_t SH[][8] = {
        /* C, H, W, O, K, L, ph, pw */
        {1, 28, 28, 8, 5, 5, 0, 0}, {8, 12, 12, 16, 5, 5, 0, 0}, {16, 8, 8, 8, 5, 5, 4, 4},
        {8, 24, 24, 1, 5, 5, 4, 4}, {3, 7, 9, 5, 2, 2, 0, 0},    {2, 11, 10, 9, 3, 3, 0, 0},
        {5, 6, 12, 3, 1, 5, 0, 0},  {4, 9, 11, 17, 4, 2, 0, 0},  {3, 6, 6, 9, 3, 3, 1, 1},
        {2, 5, 7, 4, 3, 5, 2, 3},   {2, 5, 7, 4, 3, 3, 1, 3},    {3, 4, 9, 5, 2, 4, 0, 1},
        /* 32 and 48 channels (two and three vectors of float32), 8x8 */
        {4, 10, 10, 32, 3, 3, 0, 0}, {3, 8, 8, 48, 3, 3, 1, 1},
    };
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof SH / sizeof SH[0]; k++)
            for (int64_t N = 1; N <= 5; N += 4)
                for (int flip = 0; flip < 2; flip++) {
                    const tg_dtype dt = d ? TG_FLOAT64 : TG_FLOAT32;
                    int64_t xs[4] = {N, SH[k][0], SH[k][1], SH[k][2]};
                    int64_t ws[4] = {SH[k][3], SH[k][0], SH[k][4], SH[k][5]};
                    char attrs[96];
                    snprintf(attrs, sizeof attrs, "\"border_mode\":[%d, %d],\"filter_flip\":%s",
                             (int)SH[k][6], (int)SH[k][7], flip ? "true" : "false");
                    tg_graph *g = conv_graph(tg_dtype_name(dt), xs, ws, attrs);
                    tg_array *x = rand_arr(dt, xs), *w = rand_arr(dt, ws);
                    tg_array *want = naive(x, w, SH[k][6], SH[k][7], flip);
                    tg_array *yd = run_mode(g, x, w, "direct");
                    tu_assert_close(yd, want, 0, 0);
                    tg_array_free(yd);
                    tg_array_free(want);
                    tg_array_free(x);
                    tg_array_free(w);
                    tg_graph_free(g);
                }
}

static void test_flat_tiles(void **state) {
    (void)state;
    setenv("TG_CONV_TILES", "flat", 1); /* (the 8x8 cases take channel tiles else) */
    flat_tiles();
    unsetenv("TG_CONV_TILES");
}

/* Channel tiles (conv_direct.c: a vector holds 16 output channels of one
 * pixel, 8 in float64; tiles of 1 to 4 rows; blocks of one or two vectors;
 * channel counts that fill the vectors or not), forced by TG_CONV_TILES on
 * every case above: the same exact values. */
static void test_channel_tiles(void **state) {
    (void)state;
    setenv("TG_CONV_TILES", "channels", 1);
    random_shapes(TG_FLOAT32);
    random_shapes(TG_FLOAT64);
    flat_tiles();
    unsetenv("TG_CONV_TILES");
}

/* The same on the larger cases, both thread layouts (the items of one
 * image are its channel blocks' tiles). */
static void test_channel_tiles_threaded(void **state) {
    (void)state;
    setenv("TG_CONV_TILES", "channels", 1);
    threaded();
    unsetenv("TG_CONV_TILES");
}

/* Batch tiles (conv_direct.c: a vector's lanes are output channels, a
 * tile P images at one pixel, the input transposed, the taps over the
 * border left out), forced by TG_CONV_TILES on every case above, both
 * dtypes, both thread layouts: the same exact values (the left-out terms
 * are zeros). */
static void test_batch_tiles(void **state) {
    (void)state;
    setenv("TG_CONV_TILES", "batch", 1);
    random_shapes(TG_FLOAT32);
    random_shapes(TG_FLOAT64);
    flat_tiles();
    threaded();
    unsetenv("TG_CONV_TILES");
}

/* Where conv2d takes batch tiles by itself: small planes of many channels
 * (a CIFAR network's last layers), 4x4 and 2x2 outputs, "half" borders;
 * batch 20 and 37 (tiles of 24 images, the last partly past N), 20 and
 * 40 output channels (blocks of one and of two vectors, the last partly
 * past O), both flips, float32 and float64: the tiling the direct kernel
 * reports, and the values of conv2d as it chooses (no TG_CONV) and of
 * im2col, against the naive loop. */
static void test_batch_tiles_auto(void **state) {
    (void)state;
    static const int64_t SH[][4] = {{20, 24, 4, 20}, {37, 16, 2, 40}}; /* N, C, H=W, O */
    const bool avx = tg_conv_direct_tiling_f32(1, 1, 1, 1, 1, 1, 1, 0, 0) != NULL;
    unsetenv("TG_CONV_TILES");
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof SH / sizeof SH[0]; k++)
            for (int flip = 0; flip < 2; flip++) {
                const tg_dtype dt = d ? TG_FLOAT64 : TG_FLOAT32;
                int64_t xs[4] = {SH[k][0], SH[k][1], SH[k][2], SH[k][2]};
                int64_t ws[4] = {SH[k][3], SH[k][1], 3, 3};
                if (avx && !d)
                    assert_string_equal(tg_conv_direct_tiling_f32(xs[0], xs[1], xs[2], xs[3],
                                                                  ws[0], 3, 3, 1, 1),
                                        "batch");
                char attrs[96];
                snprintf(attrs, sizeof attrs, "\"border_mode\":\"half\",\"filter_flip\":%s",
                         flip ? "true" : "false");
                tg_graph *g = conv_graph(tg_dtype_name(dt), xs, ws, attrs);
                tg_array *x = rand_arr(dt, xs), *w = rand_arr(dt, ws);
                tg_array *want = naive(x, w, 1, 1, flip);
                tg_array *in[2] = {x, w}, *ya[1] = {NULL};
                tu_call_preset(g, NULL, "none", in, ya);
                tg_array *yi = run_mode(g, x, w, "im2col");
                tu_assert_close(ya[0], want, 0, 0);
                tu_assert_close(yi, want, 0, 0);
                tg_array_free(ya[0]);
                tg_array_free(yi);
                tg_array_free(want);
                tg_array_free(x);
                tg_array_free(w);
                tg_graph_free(g);
            }
}

/* An infinite weight: its products with the border's zeros are NaN, so
 * batch tiles read every tap there, as the row tiles do: the same values,
 * NaN where the weight's tap lies on the border (tap (0, 0) without flip:
 * output row 0 and column 0), inf or -inf where it meets the image. */
static void test_batch_tiles_nonfinite(void **state) {
    (void)state;
    int64_t xs[4] = {20, 8, 4, 4}, ws[4] = {16, 8, 3, 3};
    tg_graph *g = conv_graph("float32", xs, ws, "\"border_mode\":\"half\",\"filter_flip\":false");
    tg_array *x = rand_f32(xs), *w = rand_f32(ws);
    /* x away from zero, so that inf * x is never NaN inside the image */
    for (int64_t i = 0; i < tg_array_size(x); i++)
        if (((float *)x->data)[i] == 0) ((float *)x->data)[i] = 0.25f;
    ((float *)w->data)[0] = INFINITY; /* o 0, c 0, tap (0, 0) */
    setenv("TG_CONV_TILES", "batch", 1);
    tg_array *yb = run_mode(g, x, w, "direct");
    setenv("TG_CONV_TILES", "rows", 1);
    tg_array *yr = run_mode(g, x, w, "direct");
    unsetenv("TG_CONV_TILES");
    tu_assert_close(yb, yr, 0, 0);
    const float *y = (const float *)yb->data;
    for (int64_t n = 0; n < 20; n++)
        for (int64_t i = 0; i < 4; i++)
            for (int64_t j = 0; j < 4; j++) {
                const float v = y[((n * 16 + 0) * 4 + i) * 4 + j];
                if (i == 0 || j == 0) assert_true(isnan(v));
                else assert_true(isinf(v));
            }
    tg_array_free(yb);
    tg_array_free(yr);
    tg_array_free(x);
    tg_array_free(w);
    tg_graph_free(g);
}

/* The tiling each size takes: rows for rows of 16 (no idle lane), flat
 * tiles for the convnet's first layer (24 of 28 positions a row), channel
 * tiles for its second (8x8 outputs, 16 channels: a third of a flat
 * vector's lanes idle, none of a channel vector's), but not in float64
 * (8 lanes: the rows fill them) nor where the channels would fill half a
 * vector (8 of them). */
static void test_tiling_choice(void **state) {
    (void)state;
    if (!tg_conv_direct_tiling_f32(64, 1, 1, 1, 1, 1, 1, 0, 0)) skip(); /* no AVX-512 build */
    unsetenv("TG_CONV_TILES");
    assert_string_equal(tg_conv_direct_tiling_f32(64, 32, 16, 16, 64, 3, 3, 1, 1), "rows");
    assert_string_equal(tg_conv_direct_tiling_f32(64, 1, 28, 28, 8, 5, 5, 0, 0), "flat");
    assert_string_equal(tg_conv_direct_tiling_f32(64, 8, 12, 12, 16, 5, 5, 0, 0), "channels");
    /* (in float64 a row of 8 fills a vector) */
    assert_string_equal(tg_conv_direct_tiling_f64(64, 8, 12, 12, 16, 5, 5, 0, 0), "rows");
    assert_string_equal(tg_conv_direct_tiling_f32(64, 8, 12, 12, 8, 5, 5, 0, 0), "flat");
    /* small planes of many channels: batch tiles (4x4 from 4x4 "half":
     * 100 of the 144 taps inside the image, 16 outputs a 24-pixel tile),
     * not for one image (Np would be 16 or 24 of it) */
    assert_string_equal(tg_conv_direct_tiling_f32(64, 128, 4, 4, 128, 3, 3, 1, 1), "batch");
    assert_string_equal(tg_conv_direct_tiling_f32(64, 512, 2, 2, 512, 3, 3, 1, 1), "batch");
    assert_string_equal(tg_conv_direct_tiling_f64(64, 128, 4, 4, 128, 3, 3, 1, 1), "batch");
    assert_string_equal(tg_conv_direct_tiling_f32(1, 128, 4, 4, 128, 3, 3, 1, 1), "channels");
    setenv("TG_CONV_TILES", "rows", 1);
    assert_string_equal(tg_conv_direct_tiling_f32(64, 8, 12, 12, 16, 5, 5, 0, 0), "rows");
    unsetenv("TG_CONV_TILES");
}

/* float16 computes in float32 (the direct path) and rounds back. */
static void test_float16(void **state) {
    (void)state;
    int64_t xs[4] = {2, 3, 5, 19}, ws[4] = {5, 3, 3, 2};
    tg_graph *g = conv_graph("float16", xs, ws, "\"border_mode\":\"half\"");
    tg_array *x32 = rand_f32(xs), *w32 = rand_f32(ws);
    tg_array *x = tg_array_copy(x32, TG_FLOAT16), *w = tg_array_copy(w32, TG_FLOAT16);
    assert_non_null(x);
    assert_non_null(w);
    tg_array *want32 = naive(x32, w32, 1, 1, true), *want = tg_array_copy(want32, TG_FLOAT16);
    tg_array *yd = run_mode(g, x, w, "direct");
    tu_assert_close(yd, want, 0, 0);
    tg_array_free(yd);
    tg_array_free(want);
    tg_array_free(want32);
    tg_array_free(x);
    tg_array_free(w);
    tg_array_free(x32);
    tg_array_free(w32);
    tg_graph_free(g);
}

/* Worked by hand. x = 1..9 as 3x3, w = [[1, 2], [3, 4]], valid:
 * correlation (no flip) y[0][0] = 1*1 + 2*2 + 3*4 + 4*5 = 37, then 47, 67,
 * 77; convolution (flip: the kernel read as [[4, 3], [2, 1]]) 4*1 + 3*2 +
 * 2*4 + 1*5 = 23, then 33, 53, 63. And a row x_j = j + 1 (j < 33) with w =
 * [1, 2, 3], half, no flip: y_j = x_{j-1} + 2 x_j + 3 x_{j+1} = 6j + 8, but
 * y_32 = 32 + 2*33 = 98 (x_33 is padding). */
static void test_by_hand(void **state) {
    (void)state;
    int64_t xs[4] = {1, 1, 3, 3}, ws[4] = {1, 1, 2, 2};
    tg_array *x = tg_array_new(TG_FLOAT32, 4, xs), *w = tg_array_new(TG_FLOAT32, 4, ws);
    for (int i = 0; i < 9; i++) ((float *)x->data)[i] = (float)(i + 1);
    for (int i = 0; i < 4; i++) ((float *)w->data)[i] = (float)(i + 1);
    static const float CORR[4] = {37, 47, 67, 77}, CONV[4] = {23, 33, 53, 63};
    for (int flip = 0; flip < 2; flip++) {
        tg_graph *g = conv_graph("float32", xs, ws, flip ? "\"filter_flip\":true"
                                                         : "\"filter_flip\":false");
        tg_array *y = run_mode(g, x, w, "direct");
        assert_int_equal(y->shape[2], 2);
        assert_int_equal(y->shape[3], 2);
        for (int i = 0; i < 4; i++)
            assert_true(((float *)y->data)[i] == (flip ? CONV : CORR)[i]);
        tg_array_free(y);
        tg_graph_free(g);
    }
    tg_array_free(x);
    tg_array_free(w);
    int64_t rs[4] = {1, 1, 1, 33}, ks[4] = {1, 1, 1, 3};
    tg_array *r = tg_array_new(TG_FLOAT32, 4, rs), *k = tg_array_new(TG_FLOAT32, 4, ks);
    for (int j = 0; j < 33; j++) ((float *)r->data)[j] = (float)(j + 1);
    for (int j = 0; j < 3; j++) ((float *)k->data)[j] = (float)(j + 1);
    tg_graph *g = conv_graph("float32", rs, ks, "\"border_mode\":\"half\",\"filter_flip\":false");
    tg_array *y = run_mode(g, r, k, "direct");
    assert_int_equal(y->shape[3], 33);
    for (int j = 0; j < 33; j++)
        assert_true(((float *)y->data)[j] == (j == 32 ? 98.0f : (float)(6 * j + 8)));
    tg_array_free(y);
    tg_array_free(r);
    tg_array_free(k);
    tg_graph_free(g);
}

/* Each allocation of a call on the direct path failing in turn: an "out
 * of memory" (or, for the result, "cannot allocate") error, nothing leaked
 * (the sanitizer build checks), until the call has allocated all it needs
 * and gives the right values. */
static void test_out_of_memory(void **state) {
    (void)state;
    int64_t xs[4] = {3, 3, 9, 20}, ws[4] = {10, 3, 3, 3};
    tg_graph *g = conv_graph("float32", xs, ws, "\"border_mode\":\"half\"");
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options opts = {.preset = "none"};
    tg_function *f = tg_function_compile(g, 0, &opts, ctx);
    assert_non_null(f);
    tg_array *x = rand_f32(xs), *w = rand_f32(ws), *in[2] = {x, w};
    tg_array *want = naive(x, w, 1, 1, true);
    setenv("TG_CONV", "direct", 1);
    /* row tiles, then batch tiles (the transposed input, the sums) */
    for (int bt = 0; bt < 2; bt++) {
        if (bt) setenv("TG_CONV_TILES", "batch", 1);
        tg_array *out[1] = {NULL};
        long failed = tu_call_failing_each(f, in, out, ctx);
        tu_assert_close(out[0], want, 0, 0);
        tg_array_free(out[0]);
        assert_true(failed >= 3); /* at least the result, the weights, the padded images */
    }
    unsetenv("TG_CONV_TILES");
    unsetenv("TG_CONV");
    tg_array_free(want);
    tg_array_free(x);
    tg_array_free(w);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_random_shapes_f64),
        cmocka_unit_test(test_threaded),
        cmocka_unit_test(test_flat_tiles),
        cmocka_unit_test(test_channel_tiles),
        cmocka_unit_test(test_channel_tiles_threaded),
        cmocka_unit_test(test_batch_tiles),
        cmocka_unit_test(test_batch_tiles_auto),
        cmocka_unit_test(test_batch_tiles_nonfinite),
        cmocka_unit_test(test_tiling_choice),
        cmocka_unit_test(test_float16),
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
