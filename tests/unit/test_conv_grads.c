/* The convolution's gradients on their AVX-512 paths against the im2col
 * + BLAS path (TG_CONV=im2col) and against naive loops in this file.
 *
 * conv2d_grad_inputs (stride 1: the forward's direct kernel on gy padded,
 * the kernel's channels swapped, flip negated): every border mode with
 * strides 1 and 2, flip both ways, widths around the vectors, forced onto
 * the direct path (TG_CONV=direct) and as chosen.
 *
 * conv2d_grad_weights without BLAS (libcore/src/ops/conv.c, gw_direct, and
 * the AVX-512 products of conv_direct.c):
 * - output widths around the vectors (1, 7, 8, 9, 15, 16, 17, 33), every
 *   border mode, filter_flip both ways, strides 1 and 2, dilations 1 and
 *   2, output channel counts that are not multiples of the 4-row block,
 *   batches of 1, 3 and 13 images, float32 and float64 (quarters in
 *   [-4, 4): every product and partial sum is exact, so every path must
 *   agree exactly);
 * - many chunks of images with 1, 2 and 3 threads: the same bits;
 * - images holding an infinity or a NaN (the stride-1 path reads x past
 *   each output row and must not turn 0 * inf into NaN there);
 * - float16 through float32, a case worked out by hand, and every
 *   allocation of a call failing in turn;
 * - both gradients on small planes of many channels (4x4 and 2x2), as
 *   chosen (the weight gradient's sum by batch, tg_conv_gw_batch: the same
 *   bits on 1-3 threads, and another path where gy is not finite).
 * On a CPU without AVX-512 both settings run im2col, and the test still
 * checks that against the naive loop. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_direct.h"
#include "tensor/tensor.h"
#include "testutil.h"

static uint64_t lcg = 77;
static int64_t rnd(int64_t lo, int64_t hi) { /* in [lo, hi) */
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (int64_t)((lcg >> 33) % (uint64_t)(hi - lo));
}

/* Quarters in [-4, 4) (exact = true), or values in (-1, 1) with 24 bits. */
static tg_array *rand_arr(tg_dtype dt, const int64_t *shape, bool exact) {
    tg_array *a = tg_array_new(dt, 4, shape);
    assert_non_null(a);
    size_t e = tg_dtype_size(dt);
    for (int64_t i = 0; i < tg_array_size(a); i++) {
        double v = exact ? (double)rnd(-16, 16) / 4 : (double)rnd(-(1 << 24), 1 << 24) / (1 << 24);
        tg_store_f64(dt, a->data + (size_t)i * e, v);
    }
    return a;
}

typedef struct gwcase {
    int64_t N, C, H, W, O, K, L;
    int64_t ph, pw, sh, sw, dh, dw;
    bool flip;
    char border[32]; /* the border_mode attribute's JSON */
} gwcase;

/* The output length, 0 where the dilated kernel does not fit. */
static int64_t out_len(int64_t n, int64_t k, int64_t p, int64_t s, int64_t d) {
    const int64_t room = n + 2 * p - ((k - 1) * d + 1);
    return room < 0 ? 0 : room / s + 1;
}

/* A graph of one gradient op for the case: weights: dw =
 * conv2d_grad_weights(x, gy, shp (O, C, K, L)); else gx =
 * conv2d_grad_inputs(w, gy, shp (N, C, H, W)). Its inputs: the first
 * operand (x or w), then gy. */
static tg_graph *grad_graph(bool weights, const char *dtype, const gwcase *c) {
    const int64_t OH = out_len(c->H, c->K, c->ph, c->sh, c->dh);
    const int64_t OW = out_len(c->W, c->L, c->pw, c->sw, c->dw);
    const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, c->K, c->L};
    const int64_t *a = weights ? xs : ws, *shp = weights ? ws : xs;
    char json[2048];
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld,%lld,%lld]}},"
             "{\"id\":\"gy\",\"type\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld,%lld,%lld]}},"
             "{\"id\":\"shp\",\"type\":{\"dtype\":\"int64\",\"shape\":[4]},"
             "\"constant\":{\"dtype\":\"int64\",\"shape\":[4],\"data\":[%lld,%lld,%lld,%lld]}}],"
             "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"a\",\"gy\",\"shp\"],"
             "\"outputs\":[\"g\"],\"attrs\":{\"border_mode\":%s,\"subsample\":[%lld,%lld],"
             "\"filter_dilation\":[%lld,%lld],\"filter_flip\":%s}}],"
             "\"functions\":{\"main\":{\"inputs\":[\"a\",\"gy\"],\"outputs\":[\"g\"]}}}",
             dtype, (long long)a[0], (long long)a[1], (long long)a[2], (long long)a[3], dtype,
             (long long)c->N, (long long)c->O, (long long)OH, (long long)OW, (long long)shp[0],
             (long long)shp[1], (long long)shp[2], (long long)shp[3],
             weights ? "conv2d_grad_weights" : "conv2d_grad_inputs", c->border, (long long)c->sh,
             (long long)c->sw, (long long)c->dh, (long long)c->dw, c->flip ? "true" : "false");
    return tu_load(json);
}

/* The weight gradient by its definition: dw[o][c][a][b] = sum over n, i, j
 * of gy[n][o][i][j] x[n][c][i*sh + a*dh - ph][j*sw + b*dw - pw] (zero
 * outside x), the kernel's taps reversed when flip; sums in double. */
static tg_array *naive(const gwcase *k, const tg_array *x, const tg_array *gy) {
    const int64_t OH = gy->shape[2], OW = gy->shape[3];
    const int64_t ws[4] = {k->O, k->C, k->K, k->L};
    const tg_dtype dt = x->dtype;
    const size_t e = tg_dtype_size(dt);
    tg_array *w = tg_array_new(dt, 4, ws);
    assert_non_null(w);
    for (int64_t o = 0; o < k->O; o++)
        for (int64_t c = 0; c < k->C; c++)
            for (int64_t a = 0; a < k->K; a++)
                for (int64_t b = 0; b < k->L; b++) {
                    double s = 0;
                    for (int64_t n = 0; n < k->N; n++)
                        for (int64_t i = 0; i < OH; i++)
                            for (int64_t j = 0; j < OW; j++) {
                                int64_t r = i * k->sh + a * k->dh - k->ph;
                                int64_t q = j * k->sw + b * k->dw - k->pw;
                                if (r < 0 || r >= k->H || q < 0 || q >= k->W) continue;
                                size_t xi = (size_t)(((n * k->C + c) * k->H + r) * k->W + q);
                                size_t gi = (size_t)(((n * k->O + o) * OH + i) * OW + j);
                                s += tg_load_f64(dt, x->data + xi * e) *
                                     tg_load_f64(dt, gy->data + gi * e);
                            }
                    int64_t ka = k->flip ? k->K - 1 - a : a, kb = k->flip ? k->L - 1 - b : b;
                    tg_store_f64(dt, w->data + (size_t)(((o * k->C + c) * k->K + ka) * k->L + kb) * e,
                                 s);
                }
    return w;
}

/* dw under TG_CONV=mode (NULL: unset, the automatic choice). */
static tg_array *run_mode(tg_graph *g, tg_array *x, tg_array *gy, const char *mode) {
    if (mode) setenv("TG_CONV", mode, 1);
    tg_array *in[2] = {x, gy}, *out[1] = {NULL};
    tu_call_preset(g, NULL, "none", in, out);
    unsetenv("TG_CONV");
    return out[0];
}

/* The input gradient by its definition: gx[n][c][r][q] = sum of gy[n][o][i][j]
 * w[o][c][a][b] over the (o, i, j, a, b) with r = i*sh + a*dh - ph and q =
 * j*sw + b*dw - pw, the taps reversed when flip; sums in double. */
static tg_array *naive_gi(const gwcase *k, const tg_array *w, const tg_array *gy) {
    const int64_t OH = gy->shape[2], OW = gy->shape[3];
    const int64_t xs[4] = {k->N, k->C, k->H, k->W};
    const tg_dtype dt = w->dtype;
    const size_t e = tg_dtype_size(dt);
    double *acc = calloc((size_t)(k->N * k->C * k->H * k->W), sizeof(double));
    assert_non_null(acc);
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t o = 0; o < k->O; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double gv = tg_load_f64(dt, gy->data + (size_t)(((n * k->O + o) * OH + i) * OW + j) * e);
                    for (int64_t c = 0; c < k->C; c++)
                        for (int64_t a = 0; a < k->K; a++)
                            for (int64_t b = 0; b < k->L; b++) {
                                int64_t r = i * k->sh + a * k->dh - k->ph;
                                int64_t q = j * k->sw + b * k->dw - k->pw;
                                if (r < 0 || r >= k->H || q < 0 || q >= k->W) continue;
                                int64_t ka = k->flip ? k->K - 1 - a : a, kb = k->flip ? k->L - 1 - b : b;
                                double wv = tg_load_f64(dt, w->data + (size_t)(((o * k->C + c) * k->K + ka) * k->L + kb) * e);
                                acc[((n * k->C + c) * k->H + r) * k->W + q] += gv * wv;
                            }
                }
    tg_array *x = tg_array_new(dt, 4, xs);
    assert_non_null(x);
    for (int64_t t = 0; t < k->N * k->C * k->H * k->W; t++) tg_store_f64(dt, x->data + (size_t)t * e, acc[t]);
    free(acc);
    return x;
}

static tg_array *gy_for(const gwcase *c, tg_dtype dt, bool exact) {
    int64_t gs[4] = {c->N, c->O, out_len(c->H, c->K, c->ph, c->sh, c->dh),
                     out_len(c->W, c->L, c->pw, c->sw, c->dw)};
    return rand_arr(dt, gs, exact);
}

/* Pads for a border mode (0 valid, 1 half, 2 full, 3 explicit (1, 2)) of
 * a kernel with dilation. */
static void set_border(gwcase *c, int border) {
    const int64_t kh = (c->K - 1) * c->dh + 1, kw = (c->L - 1) * c->dw + 1;
    switch (border) {
    case 1: c->ph = kh / 2, c->pw = kw / 2, strcpy(c->border, "\"half\""); break;
    case 2: c->ph = kh - 1, c->pw = kw - 1, strcpy(c->border, "\"full\""); break;
    case 3: c->ph = 1, c->pw = 2, strcpy(c->border, "[1, 2]"); break;
    default: c->ph = 0, c->pw = 0, strcpy(c->border, "\"valid\"");
    }
}

static void check_case(const gwcase *c, tg_dtype dt) {
    int64_t xs[4] = {c->N, c->C, c->H, c->W};
    tg_graph *g = grad_graph(true, tg_dtype_name(dt), c);
    tg_array *x = rand_arr(dt, xs, true), *gy = gy_for(c, dt, true);
    tg_array *want = naive(c, x, gy);
    tg_array *ya = run_mode(g, x, gy, NULL), *yi = run_mode(g, x, gy, "im2col");
    tu_assert_close(ya, want, 0, 0);
    tu_assert_close(yi, want, 0, 0);
    tg_array_free(ya);
    tg_array_free(yi);
    tg_array_free(want);
    tg_array_free(x);
    tg_array_free(gy);
    tg_graph_free(g);
}

static void random_shapes(tg_dtype dt) {
    static const int64_t OWS[] = {1, 7, 8, 9, 15, 16, 17, 33};
    static const int64_t NS[] = {1, 3, 13};
    int ran = 0;
    for (size_t wi = 0; wi < sizeof OWS / sizeof OWS[0]; wi++)
        for (int border = 0; border < 4; border++)
            for (int flip = 0; flip < 2; flip++)
                for (int s = 1; s <= 2; s++) {
                    gwcase c = {.N = NS[rnd(0, 3)], .C = rnd(1, 6), .O = rnd(1, 10),
                                .K = rnd(1, 6), .L = rnd(1, 6), .sh = s, .sw = s,
                                .dh = rnd(1, 3), .dw = rnd(1, 3), .flip = flip};
                    set_border(&c, border);
                    /* the width that gives about OWS[wi] outputs, at least 1 */
                    const int64_t kw = (c.L - 1) * c.dw + 1, kh = (c.K - 1) * c.dh + 1;
                    c.W = (OWS[wi] - 1) * c.sw + kw - 2 * c.pw;
                    if (c.W < 1) c.W = 1;
                    while (out_len(c.W, c.L, c.pw, c.sw, c.dw) < 1) c.W++;
                    c.H = rnd(1, 9) + (kh - 2 * c.ph > 0 ? kh - 2 * c.ph : 0);
                    while (out_len(c.H, c.K, c.ph, c.sh, c.dh) < 1) c.H++;
                    check_case(&c, dt);
                    ran++;
                }
    assert_int_equal(ran, 8 * 4 * 2 * 2);
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

/* The convnet example's layers and two more shapes, with batches that make
 * many chunks and a short last one: the same bits with 1, 2 and 3 threads
 * (values that round, so that another order of the sums would show), and
 * close to the naive sums. */
static void test_threads_same_bits(void **state) {
    (void)state;
    static const gwcase CASES[] = {
        {.N = 61, .C = 8, .H = 12, .W = 12, .O = 16, .K = 5, .L = 5, .sh = 1, .sw = 1, .dh = 1, .dw = 1},
        {.N = 37, .C = 1, .H = 28, .W = 28, .O = 8, .K = 5, .L = 5, .sh = 1, .sw = 1, .dh = 1, .dw = 1},
        {.N = 29, .C = 3, .H = 17, .W = 19, .O = 6, .K = 3, .L = 3, .sh = 2, .sw = 2, .dh = 1, .dw = 1},
        {.N = 23, .C = 5, .H = 15, .W = 40, .O = 7, .K = 3, .L = 4, .sh = 1, .sw = 1, .dh = 2, .dw = 1},
    };
    const int saved = omp_get_max_threads();
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++)
        for (int d = 0; d < 2; d++) {
            const tg_dtype dt = d ? TG_FLOAT64 : TG_FLOAT32;
            gwcase c = CASES[k];
            c.flip = true;
            set_border(&c, k == 3 ? 1 : 0);
            int64_t xs[4] = {c.N, c.C, c.H, c.W};
            tg_graph *g = grad_graph(true, tg_dtype_name(dt), &c);
            tg_array *x = rand_arr(dt, xs, false), *gy = gy_for(&c, dt, false);
            tg_array *want = naive(&c, x, gy), *first = NULL;
            for (int nth = 1; nth <= 3; nth++) {
                omp_set_num_threads(nth);
                tg_array *y = run_mode(g, x, gy, NULL);
                tu_assert_close(y, want, d ? 1e-12 : 1e-4, d ? 1e-12 : 1e-4);
                if (!first) {
                    first = y;
                    continue;
                }
                /* (on a CPU without AVX-512, OpenBLAS's sums may differ) */
                if (tg_conv_direct_available())
                    assert_memory_equal(y->data, first->data, (size_t)tg_array_size(y) * tg_dtype_size(dt));
                tg_array_free(y);
            }
            omp_set_num_threads(saved);
            tg_array_free(first);
            tg_array_free(want);
            tg_array_free(x);
            tg_array_free(gy);
            tg_graph_free(g);
        }
}

/* An infinity at the last column of one image and a NaN in another: the
 * taps that never reach them stay finite and exact (the stride-1 path
 * would have read the infinity at the zeros past each output row), the
 * others are what the naive sums give (inf + finite: inf; inf - inf or
 * 0 * inf: NaN), on both paths. */
static void test_not_finite(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        const tg_dtype dt = d ? TG_FLOAT64 : TG_FLOAT32;
        const size_t e = tg_dtype_size(dt);
        gwcase c = {.N = 9, .C = 2, .H = 10, .W = 12, .O = 5, .K = 3, .L = 3, .sh = 1, .sw = 1,
                    .dh = 1, .dw = 1, .flip = false};
        set_border(&c, 0);
        int64_t xs[4] = {c.N, c.C, c.H, c.W};
        tg_graph *g = grad_graph(true, tg_dtype_name(dt), &c);
        tg_array *x = rand_arr(dt, xs, true), *gy = gy_for(&c, dt, true);
        /* image 2, channel 1, row 4, the last column; image 6, channel 0,
         * row 0, column 0 */
        tg_store_f64(dt, x->data + (size_t)(((2 * c.C + 1) * c.H + 4) * c.W + c.W - 1) * e, INFINITY);
        tg_store_f64(dt, x->data + (size_t)((6 * c.C) * c.H * c.W) * e, NAN);
        tg_array *want = naive(&c, x, gy);
        tg_array *ya = run_mode(g, x, gy, NULL), *yi = run_mode(g, x, gy, "im2col");
        tu_assert_close(ya, want, 0, 0);
        tu_assert_close(yi, want, 0, 0);
        /* channel 1's taps b < 2 never read column W - 1: finite; channel
         * 0's tap (0, 0) reads the NaN */
        for (int64_t o = 0; o < c.O; o++)
            for (int64_t a = 0; a < 3; a++)
                for (int64_t b = 0; b < 3; b++) {
                    double v1 = tg_load_f64(dt, ya->data + (size_t)(((o * 2 + 1) * 3 + a) * 3 + b) * e);
                    if (b < 2) assert_true(isfinite(v1));
                    double v0 = tg_load_f64(dt, ya->data + (size_t)(((o * 2) * 3 + a) * 3 + b) * e);
                    assert_true(a || b ? isfinite(v0) : isnan(v0));
                }
        tg_array_free(ya);
        tg_array_free(yi);
        tg_array_free(want);
        tg_array_free(x);
        tg_array_free(gy);
        tg_graph_free(g);
    }
}

/* gx under each setting against the naive sums, exactly (quarters). The
 * widths: the input's, which are the direct kernel's output rows. */
static void grad_inputs_shapes(tg_dtype dt) {
    static const int64_t WS[] = {1, 7, 8, 9, 15, 16, 17, 33};
    int ran = 0;
    for (size_t wi = 0; wi < sizeof WS / sizeof WS[0]; wi++)
        for (int border = 0; border < 4; border++)
            for (int flip = 0; flip < 2; flip++)
                for (int s = 1; s <= 2; s++) {
                    gwcase c = {.N = rnd(1, 4), .C = rnd(1, 10), .O = rnd(1, 6), .K = rnd(1, 6),
                                .L = rnd(1, 6), .sh = s, .sw = s, .dh = 1, .dw = 1, .flip = flip};
                    set_border(&c, border);
                    c.W = WS[wi];
                    while (out_len(c.W, c.L, c.pw, c.sw, c.dw) < 1) c.W++;
                    c.H = rnd(1, 9);
                    while (out_len(c.H, c.K, c.ph, c.sh, c.dh) < 1) c.H++;
                    int64_t ws[4] = {c.O, c.C, c.K, c.L};
                    tg_graph *g = grad_graph(false, tg_dtype_name(dt), &c);
                    tg_array *w = rand_arr(dt, ws, true), *gy = gy_for(&c, dt, true);
                    tg_array *want = naive_gi(&c, w, gy);
                    static const char *const MODES[3] = {NULL, "im2col", "direct"};
                    for (int m = 0; m < 3; m++) {
                        tg_array *y = run_mode(g, w, gy, MODES[m]);
                        tu_assert_close(y, want, 0, 0);
                        tg_array_free(y);
                    }
                    tg_array_free(want);
                    tg_array_free(w);
                    tg_array_free(gy);
                    tg_graph_free(g);
                    ran++;
                }
    assert_int_equal(ran, 8 * 4 * 2 * 2);
}

static void test_grad_inputs(void **state) {
    (void)state;
    grad_inputs_shapes(TG_FLOAT32);
    grad_inputs_shapes(TG_FLOAT64);
}

/* g's float32 result as chosen (no TG_CONV) on 1, 2 and 3 threads: close
 * to want, and the same bits each time; returns the first (the caller
 * frees it). */
static tg_array *same_bits_on_threads(tg_graph *g, tg_array *a, tg_array *b,
                                      const tg_array *want) {
    tg_array *first = NULL;
    const int saved = omp_get_max_threads();
    for (int nth = 1; nth <= 3; nth++) {
        omp_set_num_threads(nth);
        tg_array *y = run_mode(g, a, b, NULL);
        tu_assert_close(y, want, 1e-5, 1e-5);
        if (!first) {
            first = y;
            continue;
        }
        assert_memory_equal(y->data, first->data, (size_t)tg_array_size(y) * sizeof(float));
        tg_array_free(y);
    }
    omp_set_num_threads(saved);
    return first;
}

/* Small planes of many channels (a CIFAR network's last layers): 4x4 and
 * 2x2 "half", batch 20 and 37, 20 and 40 channels, float32 and float64:
 * the weight gradient as chosen (planes of 4 pixels or fewer take the
 * grouped im2col product, larger ones gw_direct) and the input gradient
 * as chosen (the direct kernel's batch tiles) and through im2col, against
 * the naive sums. */
static void test_small_planes(void **state) {
    (void)state;
    static const int64_t SH[][4] = {{20, 24, 4, 20}, {37, 16, 2, 40}}; /* N, C, H=W, O */
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof SH / sizeof SH[0]; k++) {
            const tg_dtype dt = d ? TG_FLOAT64 : TG_FLOAT32;
            gwcase c = {.N = SH[k][0], .C = SH[k][1], .H = SH[k][2], .W = SH[k][2],
                        .O = SH[k][3], .K = 3, .L = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
                        .flip = k == 0};
            set_border(&c, 1);
            check_case(&c, dt);
            int64_t ws[4] = {c.O, c.C, c.K, c.L};
            tg_graph *g = grad_graph(false, tg_dtype_name(dt), &c);
            tg_array *w = rand_arr(dt, ws, true), *gy = gy_for(&c, dt, true);
            tg_array *want = naive_gi(&c, w, gy);
            tg_array *ya = run_mode(g, w, gy, NULL), *yi = run_mode(g, w, gy, "im2col");
            tu_assert_close(ya, want, 0, 0);
            tu_assert_close(yi, want, 0, 0);
            tg_array_free(ya);
            tg_array_free(yi);
            tg_array_free(want);
            tg_array_free(w);
            tg_array_free(gy);
            tg_graph_free(g);
        }
}

/* The weight gradient of a small plane (tg_conv_gw_batch) on 1, 2 and 3
 * threads, values that round: the same bits each time, close to the
 * naive sums. And a gy holding an infinity: its products with the
 * border's zeros are NaN, which that sum leaves out, so the gradient
 * takes another path and agrees with im2col: NaN at tap (0, 0) of output
 * channel 0 (pixel (0, 0) reads the border there). */
static void test_small_planes_threads(void **state) {
    (void)state;
    gwcase c = {.N = 37, .C = 40, .H = 4, .W = 4, .O = 21, .K = 3, .L = 3, .sh = 1, .sw = 1,
                .dh = 1, .dw = 1, .flip = true};
    set_border(&c, 1);
    int64_t xs[4] = {c.N, c.C, c.H, c.W};
    tg_graph *g = grad_graph(true, "float32", &c);
    tg_array *x = rand_arr(TG_FLOAT32, xs, false), *gy = gy_for(&c, TG_FLOAT32, false);
    tg_array *want = naive(&c, x, gy), *first = same_bits_on_threads(g, x, gy, want);
    /* (quarters from here: every order of the sums gives the same) */
    tg_array *xe = rand_arr(TG_FLOAT32, xs, true), *ge = gy_for(&c, TG_FLOAT32, true);
    ((float *)ge->data)[0] = INFINITY; /* n 0, o 0, pixel (0, 0) */
    tg_array *ya = run_mode(g, xe, ge, NULL), *yi = run_mode(g, xe, ge, "im2col");
    tu_assert_close(ya, yi, 0, 0);
    /* (filter_flip: tap (0, 0) of the product is (2, 2) of the kernel) */
    for (int64_t ch = 0; ch < c.C; ch++)
        assert_true(isnan(((const float *)ya->data)[(0 * c.C + ch) * 9 + 8]));
    tg_array_free(ya);
    tg_array_free(yi);
    tg_array_free(xe);
    tg_array_free(ge);
    tg_array_free(first);
    tg_array_free(want);
    tg_array_free(x);
    tg_array_free(gy);
    tg_graph_free(g);
}

/* The convnet example's second layer (the direct path as chosen: 12x12
 * against 8x8), batch 40 on 1-3 threads, values that round: close to the
 * naive sums, and the same bits each time (every pixel is one sum in a
 * fixed order). */
static void test_grad_inputs_threads(void **state) {
    (void)state;
    gwcase c = {.N = 40, .C = 8, .H = 12, .W = 12, .O = 16, .K = 5, .L = 5, .sh = 1, .sw = 1,
                .dh = 1, .dw = 1, .flip = true};
    set_border(&c, 0);
    int64_t ws[4] = {c.O, c.C, c.K, c.L};
    tg_graph *g = grad_graph(false, "float32", &c);
    tg_array *w = rand_arr(TG_FLOAT32, ws, false), *gy = gy_for(&c, TG_FLOAT32, false);
    tg_array *want = naive_gi(&c, w, gy), *first = same_bits_on_threads(g, w, gy, want);
    tg_array_free(first);
    tg_array_free(want);
    tg_array_free(w);
    tg_array_free(gy);
    tg_graph_free(g);
}

/* float16 computes in float32 and rounds back. */
static void test_float16(void **state) {
    (void)state;
    gwcase c = {.N = 4, .C = 3, .H = 7, .W = 19, .O = 5, .K = 3, .L = 2, .sh = 1, .sw = 1,
                .dh = 1, .dw = 1, .flip = true};
    set_border(&c, 1);
    int64_t xs[4] = {c.N, c.C, c.H, c.W};
    tg_graph *g = grad_graph(true, "float16", &c);
    tg_array *x32 = rand_arr(TG_FLOAT32, xs, true), *gy32 = gy_for(&c, TG_FLOAT32, true);
    tg_array *x = tg_array_copy(x32, TG_FLOAT16), *gy = tg_array_copy(gy32, TG_FLOAT16);
    assert_non_null(x);
    assert_non_null(gy);
    tg_array *want32 = naive(&c, x32, gy32), *want = tg_array_copy(want32, TG_FLOAT16);
    tg_array *y = run_mode(g, x, gy, NULL);
    tu_assert_close(y, want, 0, 0);
    tg_array_free(y);
    tg_array_free(want);
    tg_array_free(want32);
    tg_array_free(x);
    tg_array_free(gy);
    tg_array_free(x32);
    tg_array_free(gy32);
    tg_graph_free(g);
}

/* Worked by hand: x = 1..9 as 3x3, gy = [[1, 2], [3, 4]], valid, no flip:
 * dw[a][b] = sum over i, j of gy[i][j] x[i + a][j + b]:
 * dw[0][0] = 1*1 + 2*2 + 3*4 + 4*5 = 37, dw[0][1] = 1*2 + 2*3 + 3*5 + 4*6
 * = 47, dw[1][0] = 1*4 + 2*5 + 3*7 + 4*8 = 67, dw[1][1] = 77; with flip the
 * taps reversed: 77, 67, 47, 37. Two images, the second the first's
 * negative with gy the same: 0 everywhere. */
static void test_by_hand(void **state) {
    (void)state;
    for (int flip = 0; flip < 2; flip++)
        for (int64_t N = 1; N <= 2; N++) {
            gwcase c = {.N = N, .C = 1, .H = 3, .W = 3, .O = 1, .K = 2, .L = 2, .sh = 1, .sw = 1,
                        .dh = 1, .dw = 1, .flip = flip};
            set_border(&c, 0);
            int64_t xs[4] = {N, 1, 3, 3}, gs[4] = {N, 1, 2, 2};
            tg_array *x = tg_array_new(TG_FLOAT32, 4, xs), *gy = tg_array_new(TG_FLOAT32, 4, gs);
            for (int64_t n = 0; n < N; n++) {
                for (int i = 0; i < 9; i++) ((float *)x->data)[n * 9 + i] = (float)(n ? -(i + 1) : i + 1);
                for (int i = 0; i < 4; i++) ((float *)gy->data)[n * 4 + i] = (float)(i + 1);
            }
            tg_graph *g = grad_graph(true, "float32", &c);
            tg_array *y = run_mode(g, x, gy, NULL);
            static const float CORR[4] = {37, 47, 67, 77};
            for (int i = 0; i < 4; i++)
                assert_true(((float *)y->data)[i] == (N == 2 ? 0.0f : CORR[flip ? 3 - i : i]));
            tg_array_free(y);
            tg_array_free(x);
            tg_array_free(gy);
            tg_graph_free(g);
        }
}

/* Each allocation of a call failing in turn, on the stride-1 path and on
 * the strided one: an "out of memory" (or, for the result, "cannot
 * allocate") error, nothing leaked (the sanitizer build checks), until
 * the call has allocated all it needs and gives the right values. */
static void test_out_of_memory(void **state) {
    (void)state;
    /* the weight gradient with strides 1 and 2, then the input gradient's
     * direct path, then the weight gradient by batch (a 2x2 plane, 16
     * channels) */
    for (int s = 1; s <= 4; s++) {
        const bool gi = s == 3, small = s == 4;
        gwcase c = {.N = 7, .C = small ? 16 : 3, .H = small ? 2 : 9, .W = small ? 2 : 20,
                    .O = 10, .K = 3, .L = 3, .sh = s == 2 ? 2 : 1, .sw = s == 2 ? 2 : 1,
                    .dh = 1, .dw = 1, .flip = true};
        set_border(&c, 1);
        int64_t xs[4] = {c.N, c.C, c.H, c.W}, ws[4] = {c.O, c.C, c.K, c.L};
        tg_graph *g = grad_graph(!gi, "float32", &c);
        tg_ctx *ctx = tg_ctx_new();
        tg_compile_options opts = {.preset = "none"};
        tg_function *f = tg_function_compile(g, 0, &opts, ctx);
        assert_non_null(f);
        tg_array *x = rand_arr(TG_FLOAT32, gi ? ws : xs, true), *gy = gy_for(&c, TG_FLOAT32, true);
        tg_array *in[2] = {x, gy};
        tg_array *want = gi ? naive_gi(&c, x, gy) : naive(&c, x, gy);
        tg_array *out[1] = {NULL};
        long failed = tu_call_failing_each(f, in, out, ctx);
        tu_assert_close(out[0], want, 0, 0);
        tg_array_free(out[0]);
        /* at least the result and the buffers (the flip's, the chunks'; the
         * kernel's, the padded images') */
        assert_true(failed >= 3);
        tg_array_free(want);
        tg_array_free(x);
        tg_array_free(gy);
        tg_function_free(f);
        tg_ctx_free(ctx);
        tg_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_random_shapes_f64),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_not_finite),
        cmocka_unit_test(test_float16),
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_grad_inputs),
        cmocka_unit_test(test_grad_inputs_threads),
        cmocka_unit_test(test_small_planes),
        cmocka_unit_test(test_small_planes_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
