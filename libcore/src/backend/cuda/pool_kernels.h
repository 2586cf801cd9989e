/* Private: the max-pooling gradient kernel (pool_kernels.cu), called by
 * the cuDNN kernels (cudnn.c). Plain C types, as kernels.h. */
#ifndef TG_CUDA_POOL_KERNELS_H
#define TG_CUDA_POOL_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C-contiguous operands: x and gx (planes, h, w), y and gy (planes, oh,
 * ow); windows of wh x ww at strides sh, sw over the input padded by ph,
 * pw. */
typedef struct tg_cu_pool {
    int64_t planes, h, w, oh, ow;
    int64_t wh, ww, sh, sw, ph, pw;
} tg_cu_pool;

enum { TG_CU_F32, TG_CU_F64, TG_CU_F16 };

/* gx: every element equal to its window's maximum y gets the window's gy
 * (ties all get it, as ops/pool.c). Queued on stream; 0 or a cudaError_t. */
int tg_cu_maxpool_grad(int dtype, const tg_cu_pool *p, const void *x, const void *y, const void *gy, void *gx,
                       void *stream);

#ifdef __cplusplus
}
#endif
#endif
