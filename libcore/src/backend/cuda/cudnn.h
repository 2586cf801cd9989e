/* Private: the cuDNN kernels (cudnn.c), which cuda.c's kernel lookup asks
 * first. In a build without cuDNN the lookup finds none, and those nodes
 * run on the CPU (or on the backend's own kernels: softmax). */
#ifndef TG_CUDNN_INTERNAL_H
#define TG_CUDNN_INTERNAL_H

#include "backend/backend.h"

/* What a cuDNN node did so far (tests read it). */
typedef struct tg_cudnn_stats {
    int nguess, ntime; /* algorithm choices, by heuristic and by timing */
    int nfallback;     /* choices made again because a _once algorithm
                          did not support new shapes */
    int algo;          /* the algorithm in use (-1: none chosen) */
    const char *algo_name; /* its name ("implicit_precomp_gemm", "fft"...;
                              NULL: none chosen) */
    bool approx;       /* an FFT or Winograd algorithm: sums rounded
                          otherwise than a float32 product's (errors of
                          about 1e-4 of the result's largest magnitude
                          where a GEMM algorithm's are about 1e-6) */
    int nhost;         /* calls cuDNN turned down, run by the CPU kernel */
} tg_cudnn_stats;

#ifdef TG_HAVE_CUDNN
/* The cuDNN kernel for n (conv2d, conv2d_grad_inputs,
 * conv2d_grad_weights, pool2d, pool2d_grad; softmax and log_softmax over
 * an axis other than the last, or any axis with TG_CUDA_SOFTMAX=cudnn),
 * or NULL when cuDNN cannot reproduce the CPU kernel's result for its
 * dtypes and attributes, or cannot be initialised (one line on stderr). */
tg_kernel_fn tg_cudnn_kernel(const tg_node *n);
/* n's statistics; false when n holds no cuDNN state (it has not run on
 * cuDNN). */
bool tg_cudnn_node_stats(const tg_node *n, tg_cudnn_stats *st);
#else
static inline tg_kernel_fn tg_cudnn_kernel(const tg_node *n) {
    (void)n;
    return NULL;
}
static inline bool tg_cudnn_node_stats(const tg_node *n, tg_cudnn_stats *st) {
    (void)n;
    (void)st;
    return false;
}
#endif

#endif
