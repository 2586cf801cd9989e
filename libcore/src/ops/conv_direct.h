/* Direct convolution for conv2d's forward op (conv_direct.c): float32
 * and float64, NCHW, stride 1, no dilation, AVX-512; and the AVX-512
 * products and copies of conv2d_grad_weights's path without BLAS (conv.c,
 * gw_direct). Private to ops/conv.c. */
#ifndef TG_OPS_CONV_DIRECT_H
#define TG_OPS_CONV_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this CPU runs the direct kernels (AVX-512F). */
bool tg_conv_direct_available(void);

/* y (N, O, OH, OW) = conv(x (N, C, H, W), w (O, C, K, L)), both C-contiguous
 * float32, padded by (ph, pw) on each side, stride 1, no dilation, the
 * kernel read reversed in both spatial dimensions when flip; OH = H + 2ph -
 * K + 1, OW = W + 2pw - L + 1, both > 0. nth: OpenMP threads. Returns false
 * when out of memory (y unchanged then). */
bool tg_conv_direct_f32(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                        int64_t L, int64_t ph, int64_t pw, bool flip, const float *x,
                        const float *w, float *y, int nth);
/* The same in float64. */
bool tg_conv_direct_f64(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                        int64_t L, int64_t ph, int64_t pw, bool flip, const double *x,
                        const double *w, double *y, int nth);

/* The tiling tg_conv_direct takes for these sizes: "rows", "flat",
 * "channels" or "batch" (conv_direct.c's header); TG_CONV_TILES set to one
 * of them forces it. NULL without AVX-512 support in the build. */
const char *tg_conv_direct_tiling_f32(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                                      int64_t K, int64_t L, int64_t ph, int64_t pw);
const char *tg_conv_direct_tiling_f64(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                                      int64_t K, int64_t L, int64_t ph, int64_t pw);

/* The weight gradient's product over a chunk of G images (AVX-512; call
 * only where tg_conv_direct_available()):
 *   part[m][r] = sum over g < G, p < P of A_g[m][p] * B_g[r][p],
 * part (M, R) row-major, written. A_g's row m: a + g * astride + m * lda,
 * read to P (the last vector under a mask). B_g's row r: b + g * bstride +
 * boff[r], read to P rounded up to the vector (16 float32, 8 float64):
 * every entry there must be finite, as it is multiplied by the zeros
 * A_g's mask gives past P. The sums' order depends on the shapes alone. */
void tg_conv_gw_chunk_f32(int64_t M, int64_t R, int64_t P, int64_t G, const float *a,
                          int64_t lda, int64_t astride, const float *b, const int64_t *boff,
                          int64_t bstride, float *part);
void tg_conv_gw_chunk_f64(int64_t M, int64_t R, int64_t P, int64_t G, const double *a,
                          int64_t lda, int64_t astride, const double *b, const int64_t *boff,
                          int64_t bstride, double *part);

/* The weight gradient of a stride-1, undilated convolution, for small
 * planes (AVX-512; call only where tg_conv_direct_available()):
 *   dw[o][c][a][b] = sum over n, then the output pixels (oy, ox) whose
 *   input (oy + a - ph, ox + b - pw) lies inside x, of gy[n][o][oy][ox]
 *   x[n][c][oy + a - ph][ox + b - pw],
 * x (N, C, H, W), gy (N, O, OH, OW) with OH = H + 2ph - K + 1 and OW =
 * W + 2pw - L + 1, dw (O, C, K, L) written, unflipped; the sums' order
 * depends on the shapes alone. Returns 0, or 1 when gy holds an infinity
 * or a NaN (whose products with the border's zeros, which this sum leaves
 * out, are NaN: the caller takes another path; dw unchanged), or -1 when
 * out of memory. */
int tg_conv_gw_batch_f32(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                         int64_t L, int64_t ph, int64_t pw, const float *x, const float *gy,
                         float *dw, int nth);
int tg_conv_gw_batch_f64(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t K,
                         int64_t L, int64_t ph, int64_t pw, const double *x, const double *gy,
                         double *dw, int nth);

/* One image x (C, H, W) copied into the inside of buf (C, Hp, Wp) at (ph,
 * pw); returns whether every value of x is finite. buf's border must be
 * zero already: the copy may write zeros over it, and up to 15 (float32)
 * or 7 (float64) entries past buf's end, which buf must have room for.
 * AVX-512 only. */
bool tg_conv_pad_finite_f32(int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp,
                            int64_t Wp, const float *x, float *buf);
bool tg_conv_pad_finite_f64(int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp,
                            int64_t Wp, const double *x, double *buf);

/* rows pieces of n entries, src + r * sstride, copied to dst + r *
 * dstride (dstride >= n) in order. Past each piece zeros may be written,
 * up to 15 (float32) or 7 (float64) entries past the last piece (dst must
 * have room for them); what lies between the pieces must be zero already
 * or not matter. AVX-512 only. */
void tg_conv_spread_f32(int64_t rows, int64_t n, const float *src, int64_t sstride, float *dst,
                        int64_t dstride);
void tg_conv_spread_f64(int64_t rows, int64_t n, const double *src, int64_t sstride,
                        double *dst, int64_t dstride);

#endif
