/* Direct convolution for conv2d's forward op (conv_direct.c): float32
 * and float64, NCHW, stride 1, no dilation, AVX-512. Private to ops/conv.c. */
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

#endif
