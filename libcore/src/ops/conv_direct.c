/* Direct convolution for conv2d's forward op: float32 and float64, NCHW,
 * stride 1, no dilation, on CPUs with AVX-512F (chosen at run time; conv.c
 * keeps its im2col + gemm path for everything else).
 *
 * Why: the im2col products of small convolutions are skinny (K = C*kh*kw
 * of 75 or 288) and their column buffer is 25x the input, so the gemm
 * alone stays far from the CPU's peak. Here each output vector of 16
 * pixels (8 in float64; one row y, columns x0..x0+15) is accumulated in a
 * register,
 *   out[o][y][x0..] += w[o][c][a][b] * in_padded[c][y+a][x0+b..],
 * for a block of OCB output channels x NV such vectors at once: each
 * input vector load feeds OCB FMAs and each weight broadcast feeds NV, so
 * the loop is bound by the FMAs, not by the loads. The accumulators stay
 * in registers over the whole reduction (c, a, b) and are stored once,
 * masked where the row ends before the vector does.
 *
 * Borders: each image is copied once into a zero-padded buffer (C, Hp,
 * Wp), Hp = H + 2ph, rows Wp = W + pw apart (a row's right border is the
 * next row's left; W + 2pw where pw > L - 1), with 16 (+ pw) zeros of
 * slack after it: a vector whose row ends early reads past the row (into
 * the next row or the slack); those lanes are never stored. The weights
 * are repacked once per call to (O/OCB, C, K, L, OCB), flipped when
 * filter_flip, with zero channels up to a multiple of OCB (computed and
 * not stored), so the broadcasts walk memory in order.
 *
 * Narrow outputs: a row of OW pixels takes ceil(OW / 16) vectors, so an
 * 8-pixel row leaves half of each idle. Where it takes fewer vectors, the
 * tiles run over the padded plane flattened instead: a vector covers 16
 * consecutive positions f = y * Wp + x of it, whose inputs are as
 * consecutive (in_padded[f + a * Wp + b]); the positions x >= OW are not
 * outputs (their sums, of the next row's pixels, are dropped), and the
 * others, in up to three row pieces, are packed (compress) and stored at
 * their rows. Each output's sum is the same, in the same order, either
 * way: the same bits. (convnet's 8x8 outputs from 12x12: 6 vectors a
 * plane instead of 8; 24x24 from 28x28: 42 instead of 48; its input
 * gradients, "full" convolutions whose padded rows are all outputs: 12x12
 * from 8x8, 9 instead of 12; 28x28 from 24x24, 49 instead of 56.)
 *
 * Channel tiles: where the output has few pixels and 16 or more
 * channels (the convnet's second layer, 8x8 outputs of 16 channels: a
 * flat vector's lanes a third idle), a vector holds VL output channels of
 * one pixel instead, and a tile is 24 pixels (R rows of 24 / R columns,
 * R = 1..4, whichever computes fewest positions) x one vector, or 12
 * pixels x two: per tap, one or two weight loads and a broadcast of each
 * pixel's input, FMAs bound again. The weights are repacked (C, K, L,
 * ov VL) for each block of channels, one block after the other, each
 * tap's channels together. The accumulators leave through a
 * small buffer, each channel's pixels stored at their rows. The sums run
 * in the same order as the other tilings: the same bits. A call takes
 * them where they compute a tenth fewer lanes (outputs or not) than the
 * vector groups (tg_conv_direct_tiling says which; TG_CONV_TILES=rows,
 * flat, channels or batch forces one). convnet's second layer: 72 positions x
 * 16 channels a plane against 96 x 16.
 *
 * Batch tiles: where the output plane is smaller still (CIFAR's last
 * layers: 4x4 or 2x2 pixels of 128 to 512 channels, "half" borders), a
 * per-image tile of 24 pixels computes more positions than there are
 * outputs, and most of each window lies on the border. There a tile is
 * P images at one output pixel instead (P = 16 or 24 with one vector of
 * channels, half that with two): the input is transposed once to (C, Hp,
 * Wb, Np), the images innermost (Wb = W + 2pw; Np: N rounded up to P,
 * zeros past N), so a tap's P inputs are consecutive, and each tile reads
 * only the taps whose input lies inside the image: a window of a 2x2
 * output's corner with a 3x3 kernel, 4 of its 9. Every term left out is
 * a weight times a border zero, which adds a zero to a sum that is never
 * -0 but by underflow: the same values as the other tilings (a zero's
 * sign may differ where each term before the left-out one underflowed to
 * -0). Where a weight is infinite or NaN the border's terms are NaN, and
 * every tap is read. The threads share (channel block, stretch of pixels)
 * items, each over every image, its input channels in stretches that
 * stay in the cache; the outputs leave through a buffer, images O * OH *
 * OW apart.
 *
 * Threads: with at least as many images as threads, each thread takes
 * whole images (its own padded buffer); with fewer, all images are padded
 * first and the threads share (image, channel block, vector group) items.
 *
 * Also here, for conv.c's weight gradient without BLAS (gw_direct): its
 * products over a chunk of images (tg_conv_gw_chunk), the padded copy of
 * an image that checks it is finite, and the spread of gy's rows. */
#ifndef CONV_DIRECT_T /* the file itself; the kernels are at the end */
#include "ops/conv_direct.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tensor/tensor.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_DIRECT 1
#include <immintrin.h>
#else
#define HAVE_DIRECT 0
#endif

/* The register block: OCB output channels x NV vectors of 16 pixels:
 * OCB*NV accumulators + NV input vectors of the 32 zmm registers. */
#ifndef TG_CONV_OCB
#define TG_CONV_OCB 8
#endif
#ifndef TG_CONV_NV
#define TG_CONV_NV 3
#endif
#define OCB TG_CONV_OCB
#define NV TG_CONV_NV
/* Zeros after a padded image: what a row vector (16 lanes) or a channel
 * tile's row (up to 24 pixels) reads past the last row's outputs. */
#define SLACK 24
/* A channel tile: CH_P(ov) pixels x ov vectors of output channels. */
#define CH_P(ov) ((ov) == 1 ? 24 : 12)
enum { CH_PMAX = 24, CH_RMAX = 4 };
/* Batch tiles: the bytes of inputs and weights a stretch of input
 * channels may read (see run_bitem). */
#ifndef TG_CONV_BT_CACHE
#define TG_CONV_BT_CACHE (256 << 10)
#endif
#define BT_CACHE ((int64_t)TG_CONV_BT_CACHE)

bool tg_conv_direct_available(void) {
#if HAVE_DIRECT
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

#if HAVE_DIRECT

typedef struct dgeom {
    int64_t C, H, W, O, K, L, ph, pw;
    /* Wp: the padded buffer's row stride (see pad_image); slack: the
     * zeros after its last plane */
    int64_t Hp, Wp, plane, OH, OW, xt, ntile, nb, ngroup, slack;
    /* Tiles over the flat padded plane (see the header) instead of rows. */
    bool flat;
    /* Channel tiles instead (see the header): opad, O rounded up to
     * whole vectors; nvec of them in ncb blocks of one or two; for a
     * block of ov vectors, tiles of cr[ov] rows x CH_P(ov) / cr[ov]
     * columns, cxt[ov] of them across a row, cnt[ov] in all. */
    bool ch;
    int64_t opad, nvec, ncb, cr[3], cxt[3], cnt[3];
    /* Batch tiles instead (see the header; the channel blocks as for
     * channel tiles): bp images a tile of one vector (bp / 2 of two),
     * the input transposed to (C, Hp, Wb, Np); skip: taps over the
     * border left out (every weight finite, set by the call). */
    bool bt, skip;
    int64_t N, bp, Wb, Np, bps, cblk;
} dgeom;

/* The k in [0, K) with 0 <= i + k - pad < n, as [*k0, *k1) (k1 == k0:
 * none): the taps of output row (or column) i whose input lies inside
 * the image of n rows, or, with i a tap and K the output rows, the
 * output rows whose input through that tap does. */
static inline void inside(int64_t i, int64_t K, int64_t pad, int64_t n, int64_t *k0, int64_t *k1) {
    const int64_t lo = pad > i ? pad - i : 0, hi = n + pad - i < K ? n + pad - i : K;
    *k0 = lo;
    *k1 = hi > lo ? hi : lo;
}

/* A flat vector's lanes that are outputs: at most this many row pieces
 * (16 lanes over rows of Wp >= 8 positions). */
enum { FLAT_MIN_WP = 8, FLAT_SEGS = 3 };

#define TARGET __attribute__((target("avx512f")))
/* The register blocks, unrolled over every tap, are thousands of loads
 * each: clang's AddressSanitizer gives each a check and a branch, and then
 * takes many minutes over each function (the fuzzers' build: 7 minutes for
 * this file, over 15 with the channel tiles). There their loads go
 * unchecked; GCC's sanitizer build (the unit tests, which run every block
 * of every tiling) checks them in a few seconds. */
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCK_ATTR __attribute__((no_sanitize("address", "undefined")))
#endif
#endif
#ifndef BLOCK_ATTR
#define BLOCK_ATTR
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX) /* name_f32, name_f64 */

static int kernel_class(const dgeom *d) {
    if (d->L == 3) return d->K == 3 ? 2 : 1;
    if (d->L == 5) return d->K == 5 ? 4 : 3;
    return 0;
}

/* The kernels, written once below for T (float, double) and expanded for
 * each by including this file again with CONV_DIRECT_T set. */
#define CONV_DIRECT_T 1
#define T float
#define SFX _f32
#define VL 16
#define VEC __m512
#define MASK __mmask16
#define ZERO _mm512_setzero_ps
#define LOADU _mm512_loadu_ps
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define MSTORE _mm512_mask_storeu_ps
#define MCOMPRESS _mm512_maskz_compress_ps
#define MLOADZ _mm512_maskz_loadu_ps
#define STOREU _mm512_storeu_ps
#define FMUL _mm512_mul_ps
#define CMP_UNORD(u, v) _mm512_cmp_ps_mask(u, v, _CMP_UNORD_Q)
#define HSUM _mm512_reduce_add_ps
#define UINT uint32_t
#define EXP_MASK 0x7f800000u
#define IDX_T int32_t
#define PERMX2 _mm512_permutex2var_ps
#include "conv_direct.c"
#undef T
#undef SFX
#undef VL
#undef VEC
#undef MASK
#undef ZERO
#undef LOADU
#undef SET1
#undef FMA
#undef MSTORE
#undef MCOMPRESS
#undef MLOADZ
#undef STOREU
#undef FMUL
#undef CMP_UNORD
#undef HSUM
#undef UINT
#undef EXP_MASK
#undef IDX_T
#undef PERMX2
#define T double
#define SFX _f64
#define VL 8
#define VEC __m512d
#define MASK __mmask8
#define ZERO _mm512_setzero_pd
#define LOADU _mm512_loadu_pd
#define SET1 _mm512_set1_pd
#define FMA _mm512_fmadd_pd
#define MSTORE _mm512_mask_storeu_pd
#define MCOMPRESS _mm512_maskz_compress_pd
#define MLOADZ _mm512_maskz_loadu_pd
#define STOREU _mm512_storeu_pd
#define FMUL _mm512_mul_pd
#define CMP_UNORD(u, v) _mm512_cmp_pd_mask(u, v, _CMP_UNORD_Q)
#define HSUM _mm512_reduce_add_pd
#define UINT uint64_t
#define EXP_MASK 0x7ff0000000000000ull
#define IDX_T int64_t
#define PERMX2 _mm512_permutex2var_pd
#include "conv_direct.c"

#else

bool tg_conv_direct_f32(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                        int64_t L, int64_t ph, int64_t pw, bool flip, const float *x,
                        const float *w, float *y, int nth) {
    (void)N, (void)C, (void)H, (void)W, (void)O, (void)K, (void)L, (void)ph, (void)pw;
    (void)flip, (void)x, (void)w, (void)y, (void)nth;
    return false;
}

bool tg_conv_direct_f64(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                        int64_t L, int64_t ph, int64_t pw, bool flip, const double *x,
                        const double *w, double *y, int nth) {
    (void)N, (void)C, (void)H, (void)W, (void)O, (void)K, (void)L, (void)ph, (void)pw;
    (void)flip, (void)x, (void)w, (void)y, (void)nth;
    return false;
}

const char *tg_conv_direct_tiling_f32(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                                      int64_t K, int64_t L, int64_t ph, int64_t pw) {
    (void)N, (void)C, (void)H, (void)W, (void)O, (void)K, (void)L, (void)ph, (void)pw;
    return NULL;
}

const char *tg_conv_direct_tiling_f64(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                                      int64_t K, int64_t L, int64_t ph, int64_t pw) {
    (void)N, (void)C, (void)H, (void)W, (void)O, (void)K, (void)L, (void)ph, (void)pw;
    return NULL;
}

void tg_conv_gw_chunk_f32(int64_t M, int64_t R, int64_t P, int64_t G, const float *a,
                          int64_t lda, int64_t astride, const float *b, const int64_t *boff,
                          int64_t bstride, float *part) {
    (void)M, (void)R, (void)P, (void)G, (void)a, (void)lda, (void)astride, (void)b;
    (void)boff, (void)bstride, (void)part;
}

void tg_conv_gw_chunk_f64(int64_t M, int64_t R, int64_t P, int64_t G, const double *a,
                          int64_t lda, int64_t astride, const double *b, const int64_t *boff,
                          int64_t bstride, double *part) {
    (void)M, (void)R, (void)P, (void)G, (void)a, (void)lda, (void)astride, (void)b;
    (void)boff, (void)bstride, (void)part;
}

bool tg_conv_pad_finite_f32(int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp,
                            int64_t Wp, const float *x, float *buf) {
    (void)C, (void)H, (void)W, (void)ph, (void)pw, (void)Hp, (void)Wp, (void)x, (void)buf;
    return false;
}

bool tg_conv_pad_finite_f64(int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp,
                            int64_t Wp, const double *x, double *buf) {
    (void)C, (void)H, (void)W, (void)ph, (void)pw, (void)Hp, (void)Wp, (void)x, (void)buf;
    return false;
}

void tg_conv_spread_f32(int64_t rows, int64_t n, const float *src, int64_t sstride, float *dst,
                        int64_t dstride) {
    (void)rows, (void)n, (void)src, (void)sstride, (void)dst, (void)dstride;
}

int tg_conv_gw_batch_f32(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                         int64_t L, int64_t ph, int64_t pw, const float *x, const float *gy,
                         float *dw, int nth) {
    (void)N, (void)C, (void)H, (void)W, (void)O, (void)K, (void)L, (void)ph, (void)pw;
    (void)x, (void)gy, (void)dw, (void)nth;
    return -1;
}

int tg_conv_gw_batch_f64(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                         int64_t L, int64_t ph, int64_t pw, const double *x, const double *gy,
                         double *dw, int nth) {
    (void)N, (void)C, (void)H, (void)W, (void)O, (void)K, (void)L, (void)ph, (void)pw;
    (void)x, (void)gy, (void)dw, (void)nth;
    return -1;
}

void tg_conv_spread_f64(int64_t rows, int64_t n, const double *src, int64_t sstride,
                        double *dst, int64_t dstride) {
    (void)rows, (void)n, (void)src, (void)sstride, (void)dst, (void)dstride;
}

#endif

#else /* CONV_DIRECT_T: the kernels for T */

/* Where a flat vector's outputs go: for vector v, n[v] row pieces, piece
 * k the lanes sel[v][k], stored at dst[v][k] (channel 0's; channels
 * ostride apart) lane for lane under that mask; or, where that address
 * would fall before the plane (cnt[v][k] != 0), packed to the lowest
 * lanes first (compress) and stored under cnt[v][k]. */
typedef struct FN(segs) {
    int n[NV];
    T *dst[NV][FLAT_SEGS];
    MASK sel[NV][FLAT_SEGS], cnt[NV][FLAT_SEGS];
} FN(segs);

/* One block: OCB channels (nout of them stored) x nv vectors; lc: the
 * kernel width when fixed at compile time (its loop unrolled), else 0; kc:
 * the same for the kernel height. in:
 * the padded image; off[v]: the offset of vector v's first input (row y,
 * column x0); wb: the block's packed weights (C, K, L, OCB); dst[v]:
 * channel 0's output vector, channels ostride apart, stored under mask[v];
 * or, when sg, the flat vectors' pieces sg says (dst and mask unused). */
TARGET BLOCK_ATTR static inline __attribute__((always_inline)) void
FN(block)(const int nv, const int kc, const int lc, const dgeom *d, const T *in,
      const int64_t *off, const T *wb, T *const *dst, const MASK *mask,
      const FN(segs) *sg, int64_t ostride, int nout) {
    VEC acc[OCB][NV];
#pragma GCC unroll 32
    for (int o = 0; o < OCB; o++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) acc[o][v] = ZERO();
    const T *p[NV];
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) p[v] = in + off[v];
    const int64_t C = d->C, K = kc ? kc : d->K, L = lc ? lc : d->L, Wp = d->Wp, plane = d->plane;
    for (int64_t c = 0; c < C; c++) {
#pragma GCC unroll 8
        for (int64_t a = 0; a < K; a++) {
            const int64_t r = c * plane + a * Wp;
#pragma GCC unroll 8
            for (int64_t b = 0; b < L; b++, wb += OCB) {
                VEC xv[NV];
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++) xv[v] = LOADU(p[v] + r + b);
#pragma GCC unroll 32
                for (int o = 0; o < OCB; o++) {
                    const VEC wv = SET1(wb[o]);
#pragma GCC unroll 8
                    for (int v = 0; v < nv; v++) acc[o][v] = FMA(wv, xv[v], acc[o][v]);
                }
            }
        }
    }
    if (sg) {
        for (int o = 0; o < nout; o++)
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                for (int k = 0; k < sg->n[v]; k++) {
                    if (sg->cnt[v][k])
                        MSTORE(sg->dst[v][k] + o * ostride, sg->cnt[v][k],
                               MCOMPRESS(sg->sel[v][k], acc[o][v]));
                    else
                        MSTORE(sg->dst[v][k] + o * ostride, sg->sel[v][k], acc[o][v]);
                }
        return;
    }
    for (int o = 0; o < nout; o++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            MSTORE(dst[v] + o * ostride, mask[v], acc[o][v]);
}

/* The blocks, one function per nv and kernel class (any; width 3; 3x3;
 * width 5; 5x5): the block inlined with nv and the fixed lengths
 * constant, their loops unrolled. */
#define BLOCK_FN(n, kc, lc)                                                                        \
    TARGET BLOCK_ATTR static void FN(block##n##_##kc##lc)(                                         \
        const dgeom *d, const T *in, const int64_t *off, const T *wb, T *const *dst,               \
        const MASK *mask, const FN(segs) *sg, int64_t ostride, int nout) {                         \
        (void)sg;                                                                                  \
        FN(block)(n, kc, lc, d, in, off, wb, dst, mask, NULL, ostride, nout);                      \
    }                                                                                              \
    TARGET BLOCK_ATTR static void FN(blockf##n##_##kc##lc)(                                        \
        const dgeom *d, const T *in, const int64_t *off, const T *wb, T *const *dst,               \
        const MASK *mask, const FN(segs) *sg, int64_t ostride, int nout) {                         \
        FN(block)(n, kc, lc, d, in, off, wb, dst, mask, sg, ostride, nout);                        \
    }
#define BLOCK_FNS(n)                                                                          \
    BLOCK_FN(n, 0, 0) BLOCK_FN(n, 0, 3) BLOCK_FN(n, 3, 3) BLOCK_FN(n, 0, 5) BLOCK_FN(n, 5, 5)
BLOCK_FNS(1)
#if NV >= 2
BLOCK_FNS(2)
#endif
#if NV >= 3
BLOCK_FNS(3)
#endif
#if NV >= 4
BLOCK_FNS(4)
#endif
#if NV > 4
#error "TG_CONV_NV: at most 4"
#endif

typedef void (*FN(block_fn))(const dgeom *, const T *, const int64_t *, const T *,
                         T *const *, const MASK *, const FN(segs) *, int64_t, int);

#if NV == 1
#define BLOCK_ROW(b, c) {NULL, FN(b##1_##c)}
#elif NV == 2
#define BLOCK_ROW(b, c) {NULL, FN(b##1_##c), FN(b##2_##c)}
#elif NV == 3
#define BLOCK_ROW(b, c) {NULL, FN(b##1_##c), FN(b##2_##c), FN(b##3_##c)}
#else
#define BLOCK_ROW(b, c) {NULL, FN(b##1_##c), FN(b##2_##c), FN(b##3_##c), FN(b##4_##c)}
#endif
/* [flat][kernel class][nv]: rows, then flat tiles (each compiled apart,
 * so that the rows' blocks stay as they were); the classes any, width 3,
 * 3x3, width 5, 5x5. */
static const FN(block_fn) FN(BLOCKS)[2][5][NV + 1] = {
    {BLOCK_ROW(block, 00), BLOCK_ROW(block, 03), BLOCK_ROW(block, 33), BLOCK_ROW(block, 05),
     BLOCK_ROW(block, 55)},
    {BLOCK_ROW(blockf, 00), BLOCK_ROW(blockf, 03), BLOCK_ROW(blockf, 33), BLOCK_ROW(blockf, 05),
     BLOCK_ROW(blockf, 55)}};


/* Vector groups g0..g1-1 (NV vectors each; the last may hold fewer) of
 * channel block ob for one padded image; yn: the image's output. */
static void FN(run_groups)(const dgeom *d, const T *in, const T *wr, int64_t ob, int64_t g0,
                       int64_t g1, T *yn) {
    const int64_t ohw = d->OH * d->OW;
    const T *wb = wr + ob * d->C * d->K * d->L * OCB;
    int nout = (int)(d->O - ob * OCB < OCB ? d->O - ob * OCB : OCB);
    T *yo = yn + ob * OCB * ohw;
    for (int64_t g = g0; g < g1; g++) {
        /* Groups of as even a size as can be (16 vectors in 3s: 3, 3, 3,
         * 3, 2, 2, not 3, 3, 3, 3, 3, 1: a lone vector would do 8 FMAs
         * per 9 loads). */
        int64_t t0 = d->ntile * g / d->ngroup, nv = d->ntile * (g + 1) / d->ngroup - t0;
        int64_t off[NV];
        T *dst[NV];
        MASK mask[NV];
        FN(segs) sg;
        for (int64_t v = 0; v < nv; v++) {
            int64_t t = t0 + v;
            if (d->flat) {
                /* positions f0 .. f0 + VL - 1; row y's outputs are its
                 * positions y * Wp .. y * Wp + OW - 1 */
                const int64_t f0 = t * VL;
                int k = 0;
                for (int64_t y = f0 / d->Wp; y < d->OH && y * d->Wp < f0 + VL; y++) {
                    int64_t l0 = y * d->Wp - f0, l1 = l0 + d->OW; /* lanes [l0, l1) */
                    if (l0 < 0) l0 = 0;
                    if (l1 > VL) l1 = VL;
                    if (l1 <= l0) continue;
                    /* lane l is output x = f0 + l - y * Wp of row y */
                    const int64_t at = y * d->OW + f0 - y * d->Wp;
                    sg.sel[v][k] = (MASK)(((1u << (l1 - l0)) - 1u) << l0);
                    if (at >= 0) {
                        sg.dst[v][k] = yo + at;
                        sg.cnt[v][k] = 0;
                    } else {
                        sg.dst[v][k] = yo + at + l0;
                        sg.cnt[v][k] = (MASK)((1u << (l1 - l0)) - 1u);
                    }
                    k++;
                }
                sg.n[v] = k;
                off[v] = f0;
            } else {
                int64_t y = t / d->xt, x0 = (t % d->xt) * VL;
                int64_t lanes = d->OW - x0 < VL ? d->OW - x0 : VL;
                off[v] = y * d->Wp + x0;
                dst[v] = yo + y * d->OW + x0;
                mask[v] = (MASK)((1u << lanes) - 1u);
            }
        }
        FN(BLOCKS)[d->flat][kernel_class(d)][nv](d, in, off, wb, dst, mask, &sg, ohw, nout);
    }
}

/* ---- channel tiles ----
 *
 * One tile: CH_P(ov) output pixels (R rows of X = CH_P(ov) / R columns,
 * each row at in + roff[r]) x ov vectors of VL output channels, one
 * accumulator per pixel and vector:
 *   acc[i][j] += in_padded[c][y_i + a][x_i + b] * w[c][a][b][channels of j],
 * a broadcast of the pixel's input against a load of the weights, which
 * the repacking lays out (C, K, L, ov VL) for each channel block. Each
 * output's sum runs over c,
 * a, b in the same order as in the row and flat tiles: the same bits.
 * The accumulators go to tmp (ov, P, VL), for run_ctiles to store. */
TARGET BLOCK_ATTR static inline __attribute__((always_inline)) void
FN(cblock)(const int ov, const int R, const int kc, const int lc, const dgeom *d, const T *in,
           const int64_t *roff, const T *wb, T *tmp, T *y) {
    const int P = CH_P(ov), X = P / R;
    VEC acc[CH_PMAX][2];
#pragma GCC unroll 24
    for (int i = 0; i < P; i++)
#pragma GCC unroll 2
        for (int j = 0; j < ov; j++) acc[i][j] = ZERO();
    const int64_t C = d->C, K = kc ? kc : d->K, L = lc ? lc : d->L, Wp = d->Wp,
                  plane = d->plane, ws = ov * VL;
    for (int64_t c = 0; c < C; c++)
#pragma GCC unroll 8
        for (int64_t a = 0; a < K; a++) {
            const T *q[CH_RMAX];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) q[r] = in + roff[r] + c * plane + a * Wp;
#pragma GCC unroll 8
            for (int64_t b = 0; b < L; b++, wb += ws) {
                /* Each tap's broadcasts straight from memory: told that
                 * q[r][x + 1] now is q[r][x] at the next tap, GCC keeps
                 * the values in registers from one tap to the next, which
                 * takes more registers than there are (spills). */
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) __asm__("" : "+r"(q[r]));
                VEC wv[2];
#pragma GCC unroll 2
                for (int j = 0; j < ov; j++) wv[j] = LOADU(wb + j * VL);
#pragma GCC unroll 24
                for (int i = 0; i < P; i++) {
                    const VEC xv = SET1(q[i / X][i % X]);
#pragma GCC unroll 2
                    for (int j = 0; j < ov; j++) acc[i][j] = FMA(wv[j], xv, acc[i][j]);
                }
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) q[r]++;
            }
        }
#pragma GCC unroll 2
    for (int j = 0; j < ov; j++)
#pragma GCC unroll 24
        for (int i = 0; i < P; i++) STOREU(tmp + (j * P + i) * VL, acc[i][j]);
    if (!y) return;
    /* A whole tile of whole channel vectors: its outputs straight from
     * tmp, every offset a constant but the row's (unrolled). */
    const int64_t ohw = d->OH * d->OW, OW = d->OW;
#pragma GCC unroll 2
    for (int j = 0; j < ov; j++)
#pragma GCC unroll 16
        for (int l = 0; l < VL; l++) {
            T *yo = y + (j * VL + l) * ohw;
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
#pragma GCC unroll 24
                for (int x = 0; x < X; x++) yo[r * OW + x] = tmp[(j * P + r * X + x) * VL + l];
        }
}

#define CBLOCK_FN(ov, R, k)                                                                        \
    TARGET BLOCK_ATTR static void FN(cblock##ov##_##R##_##k)(                                      \
        const dgeom *d, const T *in, const int64_t *roff, const T *wb, T *tmp, T *y) {             \
        FN(cblock)(ov, R, k, k, d, in, roff, wb, tmp, y);                                          \
    }
#define CBLOCK_FNS(ov, R) CBLOCK_FN(ov, R, 0) CBLOCK_FN(ov, R, 3) CBLOCK_FN(ov, R, 5)
CBLOCK_FNS(1, 1) CBLOCK_FNS(1, 2) CBLOCK_FNS(1, 3) CBLOCK_FNS(1, 4)
CBLOCK_FNS(2, 1) CBLOCK_FNS(2, 2) CBLOCK_FNS(2, 3) CBLOCK_FNS(2, 4)
typedef void (*FN(cblock_fn))(const dgeom *, const T *, const int64_t *, const T *, T *, T *);
#define CBLOCK_ROW(ov, k)                                                                     \
    {NULL, FN(cblock##ov##_1_##k), FN(cblock##ov##_2_##k), FN(cblock##ov##_3_##k),             \
     FN(cblock##ov##_4_##k)}
/* [class: any, 3x3, 5x5][ov][R] */
static const FN(cblock_fn) FN(CBLOCKS)[3][3][CH_RMAX + 1] = {
    {{NULL}, CBLOCK_ROW(1, 0), CBLOCK_ROW(2, 0)},
    {{NULL}, CBLOCK_ROW(1, 3), CBLOCK_ROW(2, 3)},
    {{NULL}, CBLOCK_ROW(1, 5), CBLOCK_ROW(2, 5)}};

/* Tiles t0..t1-1 of channel block cb for one padded image; yn: the
 * image's output. A tile's rows past the last are computed again from
 * the last (not stored); its columns past the row's end read on into
 * the next row or the slack (not stored either). */
static void FN(run_ctiles)(const dgeom *d, const T *in, const T *wc, int64_t cb, int64_t t0,
                           int64_t t1, T *yn) {
    T tmp[2 * CH_PMAX * VL];
    const int64_t v0 = d->nvec * cb / d->ncb, ov = d->nvec * (cb + 1) / d->ncb - v0;
    const int64_t R = d->cr[ov], X = CH_P(ov) / R, xt = d->cxt[ov], ohw = d->OH * d->OW;
    const T *wb = wc + v0 * VL * d->C * d->K * d->L;
    const int cls = d->K == 3 && d->L == 3 ? 1 : d->K == 5 && d->L == 5 ? 2 : 0;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t y0 = t / xt * R, x0 = t % xt * X;
        int64_t roff[CH_RMAX];
        for (int64_t r = 0; r < R; r++)
            roff[r] = (y0 + r < d->OH ? y0 + r : d->OH - 1) * d->Wp + x0;
        const int64_t nr = d->OH - y0 < R ? d->OH - y0 : R, nx = d->OW - x0 < X ? d->OW - x0 : X;
        /* (whole tiles of whole vectors: stored by the block) */
        const bool whole = nr == R && nx == X && (v0 + ov) * VL <= d->O;
        FN(CBLOCKS)[cls][ov][R](d, in, roff, wb, tmp,
                                whole ? yn + v0 * VL * ohw + y0 * d->OW + x0 : NULL);
        if (whole) continue;
        for (int64_t j = 0; j < ov; j++)
            for (int64_t l = 0; l < VL; l++) {
                const int64_t o = (v0 + j) * VL + l;
                if (o >= d->O) break;
                T *yo = yn + o * ohw + y0 * d->OW + x0;
                const T *src = tmp + j * CH_P(ov) * VL + l;
                for (int64_t r = 0; r < nr; r++)
                    for (int64_t x = 0; x < nx; x++) yo[r * d->OW + x] = src[(r * X + x) * VL];
            }
    }
}

/* ---- batch tiles ----
 *
 * One tile: P images at one output pixel x ov vectors of VL output
 * channels, one accumulator per image and vector:
 *   acc[i][j] += xb[c][y + a][x + b][n0 + i] * w[c][a][b][channels of j]
 * over the taps a0 <= a < a1, b0 <= b < b1 (the others lie on the
 * border; all of them where every weight is not finite), c, a, b in the
 * order of the other tilings, here for c0 <= c < c1 only: the sums
 * start from zero when first, else from tmp, and go back to tmp (ov, P,
 * VL), the same bits as one run over every c. in: xb at (c 0, row y,
 * column x, image n0); wb: the channel block's (C, K, L, ov VL)
 * weights. */
TARGET BLOCK_ATTR static inline __attribute__((always_inline)) void
FN(bblock)(const int ov, const int P, const dgeom *d, const T *in, const T *wb, int64_t c0,
           int64_t c1, int64_t a0, int64_t a1, int64_t b0, int64_t b1, bool first, T *tmp) {
    VEC acc[CH_PMAX][2];
#pragma GCC unroll 24
    for (int i = 0; i < P; i++)
#pragma GCC unroll 2
        for (int j = 0; j < ov; j++) acc[i][j] = first ? ZERO() : LOADU(tmp + (j * P + i) * VL);
    const int64_t Np = d->Np, rs = d->Wb * Np, ps = d->bps, ws = ov * VL, L = d->L,
                  kl = d->K * L;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t a = a0; a < a1; a++) {
            const T *q = in + c * ps + a * rs + b0 * Np;
            const T *w = wb + (c * kl + a * L + b0) * ws;
            for (int64_t b = b0; b < b1; b++, q += Np, w += ws) {
                VEC wv[2];
#pragma GCC unroll 2
                for (int j = 0; j < ov; j++) wv[j] = LOADU(w + j * VL);
#pragma GCC unroll 24
                for (int i = 0; i < P; i++) {
                    const VEC xv = SET1(q[i]);
#pragma GCC unroll 2
                    for (int j = 0; j < ov; j++) acc[i][j] = FMA(wv[j], xv, acc[i][j]);
                }
            }
        }
#pragma GCC unroll 2
    for (int j = 0; j < ov; j++)
#pragma GCC unroll 24
        for (int i = 0; i < P; i++) STOREU(tmp + (j * P + i) * VL, acc[i][j]);
}

#define BBLOCK_FN(ov, P)                                                                           \
    TARGET BLOCK_ATTR static void FN(bblock##ov##_##P)(                                            \
        const dgeom *d, const T *in, const T *wb, int64_t c0, int64_t c1, int64_t a0, int64_t a1,  \
        int64_t b0, int64_t b1, bool first, T *tmp) {                                              \
        FN(bblock)(ov, P, d, in, wb, c0, c1, a0, a1, b0, b1, first, tmp);                          \
    }
BBLOCK_FN(1, 16) BBLOCK_FN(1, 24) BBLOCK_FN(2, 8) BBLOCK_FN(2, 12)

/* An item of run_batch's: channel block cb (one vector: tiles of bp
 * images; two: of bp / 2), every image, pixels p0..p1-1. The input
 * channels in stretches of cblk, each over all the item's tiles while its
 * weights and inputs stay in the cache, the sums kept between stretches
 * in abuf (2 Np VL a pixel); then the outputs. */
static void FN(run_bitem)(const dgeom *d, const T *xb, const T *wr, int64_t cb, int64_t p0,
                          int64_t p1, T *abuf, T *y) {
    const int64_t v0 = d->nvec * cb / d->ncb, ov = d->nvec * (cb + 1) / d->ncb - v0;
    const int64_t P = d->bp / ov, ohw = d->OH * d->OW, ysz = d->O * ohw;
    const int64_t ntile = (d->N + P - 1) / P, pstride = ntile * P * ov * VL;
    const T *wb = wr + v0 * VL * d->C * d->K * d->L;
    for (int64_t c0 = 0; c0 < d->C; c0 += d->cblk) {
        const int64_t c1 = d->C - c0 < d->cblk ? d->C : c0 + d->cblk;
        for (int64_t pix = p0; pix < p1; pix++) {
            const int64_t oy = pix / d->OW, ox = pix % d->OW;
            int64_t a0 = 0, a1 = d->K, b0 = 0, b1 = d->L;
            if (d->skip) {
                inside(oy, d->K, d->ph, d->H, &a0, &a1);
                inside(ox, d->L, d->pw, d->W, &b0, &b1);
            }
            const T *in = xb + (oy * d->Wb + ox) * d->Np;
            T *acc = abuf + (pix - p0) * pstride;
            const bool first = c0 == 0;
            for (int64_t t = 0; t < ntile; t++, in += P, acc += P * ov * VL) {
                if (ov == 1) {
                    if (P == 24) FN(bblock1_24)(d, in, wb, c0, c1, a0, a1, b0, b1, first, acc);
                    else FN(bblock1_16)(d, in, wb, c0, c1, a0, a1, b0, b1, first, acc);
                } else {
                    if (P == 12) FN(bblock2_12)(d, in, wb, c0, c1, a0, a1, b0, b1, first, acc);
                    else FN(bblock2_8)(d, in, wb, c0, c1, a0, a1, b0, b1, first, acc);
                }
            }
        }
    }
    for (int64_t pix = p0; pix < p1; pix++)
        for (int64_t t = 0; t < ntile; t++) {
            const int64_t n0 = t * P, ni = d->N - n0 < P ? d->N - n0 : P;
            const T *acc = abuf + (pix - p0) * pstride + t * P * ov * VL;
            for (int64_t j = 0; j < ov; j++)
                for (int64_t l = 0; l < VL; l++) {
                    const int64_t o = (v0 + j) * VL + l;
                    if (o >= d->O) break;
                    T *yo = y + n0 * ysz + o * ohw + pix;
                    const T *src = acc + j * P * VL + l;
                    for (int64_t i = 0; i < ni; i++) yo[i * ysz] = src[i * VL];
                }
        }
}

/* Batch tiles over all N images: x transposed into a zeroed (C, Hp, Wb,
 * Np) (channels bps apart), then the items (channel block, stretch of
 * pixels), about 4 per thread, shared. False when out of memory. */
static bool FN(run_batch)(const dgeom *d, const T *x, const T *wr, T *y, int nth) {
    const int64_t Np = d->Np, rs = d->Wb * Np, ps = d->bps, ohw = d->OH * d->OW;
    int64_t chunks = (4 * nth + d->ncb - 1) / d->ncb;
    if (chunks > ohw) chunks = ohw;
    const int64_t most = (ohw + chunks - 1) / chunks, asz = most * 2 * Np * VL;
    T *xb = tg_calloc((size_t)(d->C * ps), sizeof(T));
    T *abuf = tg_malloc((size_t)(nth * asz) * sizeof(T));
    if (!xb || !abuf) {
        tg_free(xb);
        tg_free(abuf);
        return false;
    }
    const int64_t C = d->C, H = d->H, W = d->W, N = d->N;
    TG_PAR_FOR(nth, c, C, {
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < H; i++) {
                const T *src = x + ((n * C + c) * H + i) * W;
                T *dst = xb + c * ps + (i + d->ph) * rs + d->pw * Np + n;
                for (int64_t j = 0; j < W; j++) dst[j * Np] = src[j];
            }
    });
    TG_PAR_FOR(nth, it, d->ncb * chunks, {
        const int64_t k = it % chunks;
        FN(run_bitem)(d, xb, wr, it / chunks, ohw * k / chunks, ohw * (k + 1) / chunks,
                      abuf + omp_get_thread_num() * asz, y);
    });
    tg_free(xb);
    tg_free(abuf);
    return true;
}

/* Image xn (C, H, W) into buf (C, Hp, Wp) + slack, zero-padded: row i of
 * channel c at c * plane + (i + ph) * Wp + pw. */
static void FN(pad_image)(const dgeom *d, const T *xn, T *buf) {
    if (d->ph == 0 && d->pw == 0) {
        memcpy(buf, xn, (size_t)(d->C * d->plane) * sizeof(T));
        memset(buf + d->C * d->plane, 0, (size_t)d->slack * sizeof(T));
        return;
    }
    memset(buf, 0, (size_t)(d->C * d->plane + d->slack) * sizeof(T));
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t i = 0; i < d->H; i++)
            memcpy(buf + c * d->plane + (i + d->ph) * d->Wp + d->pw, xn + (c * d->H + i) * d->W,
                   (size_t)d->W * sizeof(T));
}

/* Image n's blocks: channel tiles or row/flat vector groups. */
static void FN(run_image)(const dgeom *d, const T *in, const T *wr, T *yn) {
    if (d->ch)
        for (int64_t cb = 0; cb < d->ncb; cb++) {
            const int64_t ov = d->nvec * (cb + 1) / d->ncb - d->nvec * cb / d->ncb;
            FN(run_ctiles)(d, in, wr, cb, 0, d->cnt[ov], yn);
        }
    else
        for (int64_t ob = 0; ob < d->nb; ob++) FN(run_groups)(d, in, wr, ob, 0, d->ngroup, yn);
}

/* This thread's share of the images (an `omp for`: all of them outside a
 * parallel region), padded one at a time into buf. */
static void FN(image_share)(const dgeom *d, int64_t N, const T *x, const T *wr, T *y, T *buf) {
    const int64_t ysz = d->O * d->OH * d->OW;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        FN(pad_image)(d, x + n * d->C * d->H * d->W, buf);
        FN(run_image)(d, buf, wr, y + n * ysz);
    }
}

/* The geometry and the tiling of a call (see the header). tiles: "rows",
 * "flat", "channels" or "batch" to force one (the tests), else NULL. */
static void FN(plan)(dgeom *d, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                     int64_t L, int64_t ph, int64_t pw, const char *tiles) {
    *d = (dgeom){.N = N, .C = C, .H = H, .W = W, .O = O, .K = K, .L = L, .ph = ph, .pw = pw};
    d->Hp = H + 2 * ph;
    /* Rows pw zeros apart, not 2 pw: a row's right border is the next
     * row's left one (and the last row's, the next plane's first pw
     * entries or the slack, zeros too). A window reaches at most L - 1
     * entries past its row's data, so with pw <= L - 1 every output x <
     * OW = W + 2pw - L + 1 <= Wp reads only its row, the zeros after it
     * and the rows below: fewer positions that are not outputs for the
     * flat tiles (none for a "full" convolution, the input gradient's). */
    d->Wp = pw <= L - 1 ? W + pw : W + 2 * pw;
    d->slack = SLACK + (d->Wp < W + 2 * pw ? pw : 0);
    d->plane = d->Hp * d->Wp;
    d->OH = d->Hp - K + 1;
    d->OW = W + 2 * pw - L + 1;
    d->xt = (d->OW + VL - 1) / VL;
    d->ntile = d->OH * d->xt;
    /* Flat tiles where they are fewer (the last row's positions past OW
     * are not covered); the buffer's slack covers what their last vector
     * reads past the plane, as for rows. */
    const int64_t nflat = ((d->OH - 1) * d->Wp + d->OW + VL - 1) / VL;
    if (tiles ? !strcmp(tiles, "flat") && d->Wp >= FLAT_MIN_WP
              : d->Wp >= FLAT_MIN_WP && nflat < d->ntile) {
        d->flat = true;
        d->ntile = nflat;
    }
    d->nb = (O + OCB - 1) / OCB;
    d->ngroup = (d->ntile + NV - 1) / NV;
    /* Channel tiles: blocks of one or two vectors of channels; each
     * block's tiles of R rows by the R that computes fewest positions. */
    d->nvec = (O + VL - 1) / VL;
    d->opad = d->nvec * VL;
    d->ncb = (d->nvec + 1) / 2;
    double ch_lanes = 0;
    for (int ov = 1; ov <= 2; ov++) {
        int64_t best = -1;
        for (int64_t R = 1; R <= CH_RMAX; R++) {
            const int64_t X = CH_P(ov) / R, xt = (d->OW + X - 1) / X, n = (d->OH + R - 1) / R * xt;
            if (best < 0 || n * R * X < best) {
                best = n * R * X;
                d->cr[ov] = R;
                d->cxt[ov] = xt;
                d->cnt[ov] = n;
            }
        }
    }
    for (int64_t cb = 0; cb < d->ncb; cb++) {
        const int64_t ov = d->nvec * (cb + 1) / d->ncb - d->nvec * cb / d->ncb;
        ch_lanes += (double)(d->cnt[ov] * CH_P(ov)) * (double)(ov * VL);
    }
    /* The lanes each computes, outputs or not: channel tiles where they
     * compute a tenth fewer than the vector groups (each lane costs one
     * FMA per tap either way). */
    const double px_lanes = (double)(d->ntile * VL) * (double)(d->nb * OCB);
    d->ch = tiles ? !strcmp(tiles, "channels") : ch_lanes * 1.1 < px_lanes;
    /* Batch tiles: bp = 16 or 24 images, whichever pads N less (24 on a
     * tie); their lanes per image, the taps inside the image only (the
     * FMAs of one image's outputs: the rows' and the columns' counts
     * multiply), plus a lane's worth for each output's scalar store. */
    d->Wb = W + 2 * pw;
    const int64_t n24 = (N + 23) / 24 * 24, n16 = (N + 15) / 16 * 16;
    d->bp = n16 < n24 ? 16 : 24;
    d->Np = d->bp == 16 ? n16 : n24;
    /* an input channel's stretch, a line more than Hp Wb Np: channels
     * 4 KiB apart would all fall in the same few sets of the cache */
    d->bps = d->Hp * d->Wb * d->Np + VL;
    /* input channels a stretch: its inputs (Hp Wb Np) and weights (K L
     * 2 VL) in BT_CACHE bytes */
    const int64_t per_c = (int64_t)sizeof(T) * (d->Hp * d->Wb * d->Np + K * L * 2 * VL);
    d->cblk = BT_CACHE / per_c > 1 ? BT_CACHE / per_c : 1;
    int64_t rows = 0, cols = 0, k0, k1;
    for (int64_t y = 0; y < d->OH; y++) {
        inside(y, K, ph, H, &k0, &k1);
        rows += k1 - k0;
    }
    for (int64_t x = 0; x < d->OW; x++) {
        inside(x, L, pw, W, &k0, &k1);
        cols += k1 - k0;
    }
    const double taps = (double)rows * (double)cols * (double)C;
    const double bt_lanes = (double)d->Np / (double)(N > 0 ? N : 1) * (double)d->opad *
                            (taps + (double)(d->OH * d->OW * VL));
    const double other = (d->ch ? ch_lanes : px_lanes) * (double)(C * K * L);
    d->bt = tiles ? !strcmp(tiles, "batch") : N >= 8 && bt_lanes * 1.2 < other;
    if (d->bt) d->ch = false;
}

/* VL rows of VL entries transposed in registers: at level s (VL/2 down
 * to 1), rows i and i + s (bit s of i clear) swap the entries whose row
 * and column differ in bit s; after every level each entry's row and
 * column have traded all their bits. */
TARGET static inline __attribute__((always_inline)) void FN(transpose)(VEC *v) {
#pragma GCC unroll 4
    for (int s = VL / 2; s >= 1; s /= 2) {
        IDX_T lo[VL], hi[VL];
        for (int j = 0; j < VL; j++) {
            lo[j] = (IDX_T)(j & s ? VL + j - s : j);
            hi[j] = (IDX_T)(j & s ? VL + j : j + s);
        }
        const __m512i il = _mm512_loadu_si512(lo), ih = _mm512_loadu_si512(hi);
#pragma GCC unroll 16
        for (int i = 0; i < VL; i++) {
            if (i & s) continue;
            const VEC a = v[i], b = v[i + s];
            v[i] = PERMX2(a, il, b);
            v[i + s] = PERMX2(a, ih, b);
        }
    }
}

/* Block k of the repacked weights: cw, channel block k of the channel
 * and batch tiles (ov vectors from v0: (C, K, L, ov VL) at v0 VL C K L);
 * else the vector groups' block k ((C, K, L, OCB) at k OCB C K L); zeros
 * past O. From w (O, C, K, L), each (K, L) read reversed when flip: row r
 * = c K L + t takes w's entry c K L + t, or c K L + K L - 1 - t. cw: VL
 * channels by VL entries at a time, read as vectors, transposed in
 * registers and stored as vectors (each a row's VL channels); the vector
 * groups' narrower rows entry by entry. Whether every weight read is
 * finite. */
TARGET static bool FN(repack_block)(const dgeom *d, bool cw, bool flip, const T *w, T *wr,
                                    int64_t k) {
    const int64_t kl = d->K * d->L, ckl = d->C * kl;
    const int64_t v0 = d->nvec * k / d->ncb, o0 = cw ? v0 * VL : k * OCB;
    const int64_t width = cw ? (d->nvec * (k + 1) / d->ncb - v0) * VL : OCB;
    T *base = wr + o0 * ckl;
    if (!cw) {
        bool bad = false;
        for (int64_t o = o0; o < o0 + width; o++) {
            T *dst = base + (o - o0);
            if (o >= d->O) {
                for (int64_t r = 0; r < ckl; r++) dst[r * width] = 0;
                continue;
            }
            const T *src = w + o * ckl;
            for (int64_t r = 0, c = 0, t = 0; r < ckl; r++) {
                const T v = src[flip ? c * kl + kl - 1 - t : r];
                UINT u;
                memcpy(&u, &v, sizeof u);
                bad |= (~u & EXP_MASK) == 0; /* all exponent bits set: inf, NaN */
                dst[r * width] = v;
                if (++t == kl) t = 0, c++;
            }
        }
        return !bad;
    }
    const VEC z = ZERO();
    MASK bad = 0;
    for (int64_t j = 0; j < width / VL; j++) {
        const int64_t oj = o0 + j * VL;
        for (int64_t s0 = 0; s0 < ckl; s0 += VL) {
            const int64_t n = ckl - s0 < VL ? ckl - s0 : VL;
            const MASK m = (MASK)(n == VL ? ~0u : (1u << n) - 1u);
            VEC v[VL];
#pragma GCC unroll 16
            for (int i = 0; i < VL; i++) {
                v[i] = oj + i < d->O ? MLOADZ(m, w + (oj + i) * ckl + s0) : z;
                bad |= CMP_UNORD(FMUL(v[i], z), z);
            }
            FN(transpose)(v);
            /* v[i]: source column s0 + i of the VL channels */
            for (int64_t i = 0; i < n; i++) {
                const int64_t sc = s0 + i, c = sc / kl;
                const int64_t r = flip ? c * kl + kl - 1 - (sc - c * kl) : sc;
                STOREU(base + r * width + j * VL, v[i]);
            }
        }
    }
    return !bad;
}

bool FN(tg_conv_direct)(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                        int64_t L, int64_t ph, int64_t pw, bool flip, const T *x,
                        const T *w, T *y, int nth) {
    dgeom d;
    FN(plan)(&d, N, C, H, W, O, K, L, ph, pw, getenv("TG_CONV_TILES"));
    const int64_t ckl = C * K * L, isz = C * d.plane + d.slack, ysz = O * d.OH * d.OW;
    const bool cw = d.ch || d.bt; /* weights (C, K, L, ov VL) a block */
    /* Weights: (nb, C, K, L, OCB) for the vector groups, each channel
     * block's (C, K, L, ov VL) one after the other for the channel and
     * batch tiles (repack_block); flipped when flip, zero past O. */
    const int64_t op = cw ? d.opad : d.nb * OCB, nob = cw ? d.ncb : d.nb;
    T *wr = tg_malloc((size_t)(ckl * op) * sizeof(T));
    if (!wr) return false;
    if (nth < 1) nth = 1;
    bool finite = true;
    if (nth > 1 && nob > 1 && ckl * op >= ((int64_t)1 << 16)) {
#pragma omp parallel for schedule(static) num_threads(nth) reduction(&& : finite)
        for (int64_t ob = 0; ob < nob; ob++)
            finite = FN(repack_block)(&d, cw, flip, w, wr, ob) && finite;
    } else {
        for (int64_t ob = 0; ob < nob; ob++)
            finite = FN(repack_block)(&d, cw, flip, w, wr, ob) && finite;
    }
    if (d.bt) {
        d.skip = finite;
        const bool ok = FN(run_batch)(&d, x, wr, y, nth);
        tg_free(wr);
        return ok;
    }
    const bool per_image = N >= nth;
    T *bufs = tg_malloc((size_t)((per_image ? nth : N) * isz) * sizeof(T));
    if (!bufs) {
        tg_free(wr);
        return false;
    }
    if (per_image) {
        /* (no team for one thread: see TG_PAR_FOR) */
        if (nth > 1) {
#pragma omp parallel num_threads(nth)
            FN(image_share)(&d, N, x, wr, y, bufs + omp_get_thread_num() * isz);
        } else {
            FN(image_share)(&d, N, x, wr, y, bufs);
        }
    } else {
        for (int64_t n = 0; n < N; n++) FN(pad_image)(&d, x + n * C * H * W, bufs + n * isz);
        /* Items: (image, block, chunk of its groups or tiles), about 4 per
         * thread. */
        const int64_t nblk = d.ch ? d.ncb : d.nb, per = N * nblk;
        const int64_t most = d.ch ? d.cnt[d.nvec > 1 ? 2 : 1] : d.ngroup;
        int64_t chunks = (4 * nth + per - 1) / per;
        if (chunks > most) chunks = most;
        const int64_t items = per * chunks;
        TG_PAR_FOR(nth, it, items, {
            int64_t n = it / (nblk * chunks), ob = it / chunks % nblk, ch = it % chunks;
            if (d.ch) {
                const int64_t ov = d.nvec * (ob + 1) / d.ncb - d.nvec * ob / d.ncb;
                FN(run_ctiles)(&d, bufs + n * isz, wr, ob, d.cnt[ov] * ch / chunks,
                               d.cnt[ov] * (ch + 1) / chunks, y + n * ysz);
            } else {
                FN(run_groups)(&d, bufs + n * isz, wr, ob, d.ngroup * ch / chunks,
                               d.ngroup * (ch + 1) / chunks, y + n * ysz);
            }
        });
    }
    tg_free(bufs);
    tg_free(wr);
    return true;
}

/* Which tiling a call of these sizes takes (tg_conv_direct_tiling). */
const char *FN(tg_conv_direct_tiling)(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                                      int64_t K, int64_t L, int64_t ph, int64_t pw) {
    dgeom d;
    FN(plan)(&d, N, C, H, W, O, K, L, ph, pw, getenv("TG_CONV_TILES"));
    return d.bt ? "batch" : d.ch ? "channels" : d.flat ? "flat" : "rows";
}

/* ---- the weight gradient's products ----
 *
 * One block of part: mr rows of a (output channels) by nr rows of b, each
 * entry a vector of partial sums over p kept in a register through all G
 * images, then summed across its lanes once. Per vector of p: mr + nr
 * loads for mr * nr FMAs (4 x 6: 10 loads, 24 FMAs; 24 accumulators + 4 +
 * 1 of the 32 registers). The last vector of a's rows is loaded under a
 * mask (zeros past P); b's rows are read whole (see the header). */
TARGET BLOCK_ATTR static inline __attribute__((always_inline)) void
FN(gw_block)(const int mr, const int nr, int64_t P, int64_t G, const T *a, int64_t lda,
             int64_t astride, const T *b, const int64_t *boff, int64_t bstride, T *part,
             int64_t R) {
    VEC acc[4][6];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 6
        for (int j = 0; j < nr; j++) acc[i][j] = ZERO();
    const int64_t nfull = P / VL, rem = P % VL;
    const MASK m = (MASK)((1u << rem) - 1u);
    for (int64_t g = 0; g < G; g++, a += astride, b += bstride) {
        const T *bp[6];
#pragma GCC unroll 6
        for (int j = 0; j < nr; j++) bp[j] = b + boff[j];
        for (int64_t v = 0; v <= nfull; v++) {
            if (v == nfull && !rem) break;
            VEC av[4];
#pragma GCC unroll 4
            for (int i = 0; i < mr; i++)
                av[i] = v < nfull ? LOADU(a + i * lda + v * VL) : MLOADZ(m, a + i * lda + v * VL);
#pragma GCC unroll 6
            for (int j = 0; j < nr; j++) {
                const VEC bv = LOADU(bp[j] + v * VL);
#pragma GCC unroll 4
                for (int i = 0; i < mr; i++) acc[i][j] = FMA(av[i], bv, acc[i][j]);
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 6
        for (int j = 0; j < nr; j++) part[i * R + j] = HSUM(acc[i][j]);
}

#define GW_FN(mr, nr)                                                                              \
    TARGET BLOCK_ATTR static void FN(gw_block##mr##nr)(                                            \
        int64_t P, int64_t G, const T *a, int64_t lda, int64_t astride, const T *b,                \
        const int64_t *boff, int64_t bstride, T *part, int64_t R) {                                \
        FN(gw_block)(mr, nr, P, G, a, lda, astride, b, boff, bstride, part, R);                    \
    }
#define GW_FNS(mr) GW_FN(mr, 1) GW_FN(mr, 2) GW_FN(mr, 3) GW_FN(mr, 4) GW_FN(mr, 5) GW_FN(mr, 6)
GW_FNS(1)
GW_FNS(2)
GW_FNS(3)
GW_FNS(4)
typedef void (*FN(gw_fn))(int64_t, int64_t, const T *, int64_t, int64_t, const T *,
                          const int64_t *, int64_t, T *, int64_t);
#define GW_ROW(mr)                                                                            \
    {FN(gw_block##mr##1), FN(gw_block##mr##2), FN(gw_block##mr##3), FN(gw_block##mr##4),       \
     FN(gw_block##mr##5), FN(gw_block##mr##6)}
static const FN(gw_fn) FN(GW_BLOCKS)[4][6] = {GW_ROW(1), GW_ROW(2), GW_ROW(3), GW_ROW(4)};

void FN(tg_conv_gw_chunk)(int64_t M, int64_t R, int64_t P, int64_t G, const T *a, int64_t lda,
                          int64_t astride, const T *b, const int64_t *boff, int64_t bstride,
                          T *part) {
    /* Blocks of as even a size as can be (25 rows: 5 blocks of 5, not
     * four of 6 and one of 1, whose 4 + 1 loads would feed 4 FMAs). */
    const int64_t mb = (M + 3) / 4, nb = (R + 5) / 6;
    for (int64_t bi = 0; bi < mb; bi++) {
        const int64_t i0 = M * bi / mb, mr = M * (bi + 1) / mb - i0;
        for (int64_t bj = 0; bj < nb; bj++) {
            const int64_t j0 = R * bj / nb, nr = R * (bj + 1) / nb - j0;
            FN(GW_BLOCKS)[mr - 1][nr - 1](P, G, a + i0 * lda, lda, astride, b, boff + j0,
                                          bstride, part + i0 * R + j0, R);
        }
    }
}

/* ---- the weight gradient by batch ----
 *
 * For small planes: dw[o][c][a][b] = sum over n, then the pixels (oy, ox)
 * whose input (oy + a - ph, ox + b - pw) lies inside the image, of
 * gy[n][o][oy][ox] x[n][c][..]. One tile: GWB_MR output channels
 * (broadcasts of gy) x nv vectors of VL input channels (loads of x), one
 * tap, its accumulators kept through the whole sum; x transposed to (N,
 * H, W, Cp) and gy to (N, OH OW, Op), channels innermost. */
#define GWB_MR 6
typedef struct FN(gwbq) {
    int64_t N, C, H, W, O, K, L, ph, pw, OH, OW, Cp, Op;
    const T *xc, *gt;
    T *dt; /* (K L, Op, Cp) */
} FN(gwbq);

TARGET BLOCK_ATTR static inline __attribute__((always_inline)) void
FN(gwb_block)(const int nv, const FN(gwbq) *q, int64_t o0, int64_t c0, int64_t a, int64_t b) {
    VEC acc[GWB_MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < GWB_MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) acc[i][j] = ZERO();
    /* output pixels whose input is inside the image */
    int64_t oy0, oy1, ox0, ox1;
    inside(a, q->OH, q->ph, q->H, &oy0, &oy1);
    inside(b, q->OW, q->pw, q->W, &ox0, &ox1);
    const int64_t ohw = q->OH * q->OW, Op = q->Op, Cp = q->Cp;
    for (int64_t n = 0; n < q->N; n++)
        for (int64_t oy = oy0; oy < oy1; oy++) {
            const T *g = q->gt + (n * ohw + oy * q->OW + ox0) * Op + o0;
            const T *xp = q->xc + ((n * q->H + oy + a - q->ph) * q->W + ox0 + b - q->pw) * Cp + c0;
            for (int64_t ox = ox0; ox < ox1; ox++, g += Op, xp += Cp) {
                VEC xv[4];
#pragma GCC unroll 4
                for (int j = 0; j < nv; j++) xv[j] = LOADU(xp + j * VL);
#pragma GCC unroll 6
                for (int i = 0; i < GWB_MR; i++) {
                    const VEC gv = SET1(g[i]);
#pragma GCC unroll 4
                    for (int j = 0; j < nv; j++) acc[i][j] = FMA(gv, xv[j], acc[i][j]);
                }
            }
        }
    T *dst = q->dt + ((a * q->L + b) * Op + o0) * Cp + c0;
#pragma GCC unroll 6
    for (int i = 0; i < GWB_MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) STOREU(dst + i * Cp + j * VL, acc[i][j]);
}

#define GWB_FN(nv)                                                                                 \
    TARGET BLOCK_ATTR static void FN(gwb_block##nv)(const FN(gwbq) * q, int64_t o0, int64_t c0,    \
                                                    int64_t a, int64_t b) {                        \
        FN(gwb_block)(nv, q, o0, c0, a, b);                                                        \
    }
GWB_FN(1) GWB_FN(2) GWB_FN(3) GWB_FN(4)

/* Image n of gy (O, OH OW) into gt (OH OW, Op), zeros past O; whether it
 * is finite (v - v: 0, else NaN). */
static bool FN(gwb_gy)(const FN(gwbq) *q, const T *gy, T *gt, int64_t n) {
    const int64_t ohw = q->OH * q->OW, O = q->O, Op = q->Op;
    T bad = 0;
    for (int64_t p = 0; p < ohw; p++)
        for (int64_t o = 0; o < Op; o++) {
            const T v = o < O ? gy[(n * O + o) * ohw + p] : 0;
            bad += v - v;
            gt[(n * ohw + p) * Op + o] = v;
        }
    return bad == 0;
}

int FN(tg_conv_gw_batch)(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                         int64_t L, int64_t ph, int64_t pw, const T *x, const T *gy, T *dw,
                         int nth) {
    FN(gwbq) q = {.N = N, .C = C, .H = H, .W = W, .O = O, .K = K, .L = L, .ph = ph, .pw = pw};
    q.OH = H + 2 * ph - K + 1;
    q.OW = W + 2 * pw - L + 1;
    q.Cp = (C + VL - 1) / VL * VL;
    q.Op = (O + GWB_MR - 1) / GWB_MR * GWB_MR;
    const int64_t ohw = q.OH * q.OW, kl = K * L, hw = H * W;
    T *xc = tg_malloc((size_t)(N * hw * q.Cp) * sizeof(T));
    T *gt = tg_malloc((size_t)(N * ohw * q.Op) * sizeof(T));
    T *dt = tg_malloc((size_t)(kl * q.Op * q.Cp) * sizeof(T));
    if (!xc || !gt || !dt) {
        tg_free(xc);
        tg_free(gt);
        tg_free(dt);
        return -1;
    }
    if (nth < 1) nth = 1;
    /* gy (N, O, OH OW) to (N, OH OW, Op), zeros past O */
    bool finite = true;
    const int64_t Op = q.Op, Cp = q.Cp;
    if (nth > 1) {
#pragma omp parallel for schedule(static) num_threads(nth) reduction(&& : finite)
        for (int64_t n = 0; n < N; n++) finite = FN(gwb_gy)(&q, gy, gt, n) && finite;
    } else {
        for (int64_t n = 0; n < N; n++) finite = FN(gwb_gy)(&q, gy, gt, n) && finite;
    }
    if (!finite) {
        tg_free(xc);
        tg_free(gt);
        tg_free(dt);
        return 1;
    }
    /* x (N, C, H W) to (N, H W, Cp), zeros past C */
    TG_PAR_FOR(nth, n, N, {
        for (int64_t p = 0; p < hw; p++)
            for (int64_t c = 0; c < Cp; c++)
                xc[(n * hw + p) * Cp + c] = c < C ? x[(n * C + c) * hw + p] : 0;
    });
    q.xc = xc;
    q.gt = gt;
    q.dt = dt;
    /* items: (tap, block of GWB_MR channels, block of up to 4 vectors) */
    const int64_t nvec = Cp / VL, ncb = (nvec + 3) / 4, nob = Op / GWB_MR;
    TG_PAR_FOR(nth, it, kl * nob * ncb, {
        const int64_t t = it / (nob * ncb), ob = it / ncb % nob, cb = it % ncb;
        const int64_t v0 = nvec * cb / ncb, nv = nvec * (cb + 1) / ncb - v0;
        const int64_t a = t / L, b = t % L, o0 = ob * GWB_MR, c0 = v0 * VL;
        if (nv == 4) FN(gwb_block4)(&q, o0, c0, a, b);
        else if (nv == 3) FN(gwb_block3)(&q, o0, c0, a, b);
        else if (nv == 2) FN(gwb_block2)(&q, o0, c0, a, b);
        else FN(gwb_block1)(&q, o0, c0, a, b);
    });
    /* dt (K L, Op, Cp) to dw (O, C, K L) */
    TG_PAR_FOR(nth, o, O, {
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < kl; t++) dw[(o * C + c) * kl + t] = dt[(t * Op + o) * Cp + c];
    });
    tg_free(xc);
    tg_free(gt);
    tg_free(dt);
    return 0;
}

/* x (C, H, W) into the inside of buf (C, Hp, Wp); whether every value
 * copied is finite. The stores are whole vectors (AMD's masked stores are
 * slow), their lanes past a row zeros: over the border (zeros), the next
 * row (written after) or the slack after buf (see the header). */
TARGET bool FN(tg_conv_pad_finite)(int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw,
                                   int64_t Hp, int64_t Wp, const T *x, T *buf) {
    const VEC z = ZERO();
    MASK bad = 0;
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < H; i++) {
            const T *src = x + (c * H + i) * W;
            T *dst = buf + (c * Hp + i + ph) * Wp + pw;
            for (int64_t j = 0; j < W; j += VL) {
                const int64_t n = W - j < VL ? W - j : VL;
                const MASK m = (MASK)((1u << n) - 1u);
                const VEC v = MLOADZ(m, src + j);
                /* v * 0 is NaN exactly where v is not finite */
                bad |= CMP_UNORD(FMUL(v, z), z);
                STOREU(dst + j, v);
            }
        }
    return !bad;
}

/* rows pieces of n entries, src sstride apart, to dst dstride apart
 * (dstride >= n), whole-vector stores as above. */
TARGET void FN(tg_conv_spread)(int64_t rows, int64_t n, const T *src, int64_t sstride, T *dst,
                               int64_t dstride) {
    for (int64_t r = 0; r < rows; r++, src += sstride, dst += dstride)
        for (int64_t j = 0; j < n; j += VL) {
            const int64_t k = n - j < VL ? n - j : VL;
            STOREU(dst + j, MLOADZ((MASK)((1u << k) - 1u), src + j));
        }
}

#endif /* CONV_DIRECT_T */
