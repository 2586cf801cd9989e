/* Private: the parsed attributes of the convolution ops (ops/conv.c) and
 * the pooling ops (ops/pool.c), which their parse_attrs leave in
 * n->a.extra. Shared with the cuDNN kernels (backend/cuda/cudnn.c), which
 * read the same attributes rather than parsing them again. */
#ifndef TG_OPS_CONVPOOL_H
#define TG_OPS_CONVPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/status.h"

/* conv2d, conv2d_grad_inputs, conv2d_grad_weights */
enum { BM_VALID, BM_FULL, BM_HALF, BM_EXPLICIT };

typedef struct conv_p {
    int bmode;
    int64_t pad[2]; /* explicit padding */
    int64_t sub[2];
    int64_t dil[2];
    bool flip;
} conv_p;

/* The padding of dimension d (0 rows, 1 columns) for a kernel of length
 * k; the output length for an input of length `in`: -1 when the dilated
 * kernel does not fit the padded input, -2 when a length is unknown
 * (negative), -3 when the dilated kernel or the padded input would pass
 * 2^63 - 1 (static lengths can be that large); both lengths at once,
 * with the kernels' error when the kernel does not fit. */
int64_t tg_conv_pad(const conv_p *p, int d, int64_t k);
int64_t tg_conv_out_len(const conv_p *p, int d, int64_t in, int64_t k);
int tg_conv_out_lengths(const conv_p *p, int64_t H, int64_t W, int64_t K, int64_t L, int64_t *OH, int64_t *OW,
                        tg_ctx *ctx);

/* pool2d, pool2d_grad (mode: the order of the names in "mode") */
enum { PM_MAX, PM_SUM, PM_AVG_INC, PM_AVG_EXC };

typedef struct pool_p {
    int64_t ws[2], stride[2], pad[2];
    bool ignore_border;
    int mode;
} pool_p;

/* Theano's Pool.out_shape for dimension d (0 rows, 1 columns) of length v;
 * -1 (unknown) stays -1. */
int64_t tg_pool_out_len(const pool_p *p, int d, int64_t v);

#endif
