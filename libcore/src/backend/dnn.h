/* Private: the host-side decisions of the cuDNN kernels
 * (backend/cuda/cudnn.c), kept apart from cuDNN so that they build
 * everywhere and are tested without a GPU: the algorithm policy and its
 * decision, and how the attributes of conv2d, pool2d and softmax map onto
 * cuDNN's descriptors (with the cases cuDNN cannot reproduce exactly,
 * which stay on the CPU).
 *
 * The constants that stand for cuDNN enum values carry those values, so
 * that the tests check the mapping in cuDNN's own numbers; cudnn.c
 * asserts at compile time that they agree with cudnn.h.
 */
#ifndef TG_BACKEND_DNN_H
#define TG_BACKEND_DNN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "ops/convpool.h"

/* ---- the algorithm policy (Theano's dnn.conv.algo_*) ----
 * How a convolution node picks its cuDNN algorithm, for each of forward,
 * backward-data and backward-filter: "guess" asks cuDNN's heuristic
 * (cudnnGetConvolution*Algorithm_v7), "time" runs every algorithm once
 * and keeps the fastest (cudnnFind*AlgorithmEx). "_once" chooses at the
 * first call and keeps that algorithm for later shapes while it still
 * supports them; "_on_shape_change" chooses again whenever the shapes
 * change. time_once is 0: a node nobody configured uses it. */
typedef enum tg_dnn_policy {
    TG_DNN_TIME_ONCE = 0,
    TG_DNN_GUESS_ONCE,
    TG_DNN_GUESS_ON_SHAPE_CHANGE,
    TG_DNN_TIME_ON_SHAPE_CHANGE,
    TG_DNN_NPOLICIES
} tg_dnn_policy;

/* The policy called `name`; NULL reads the environment variable
 * TG_DNN_CONV_ALGO (unset or empty: time_once). An unknown name is
 * TG_EINVAL, with a message that lists the valid ones. */
int tg_dnn_policy_parse(const char *name, tg_dnn_policy *out, tg_ctx *ctx);
const char *tg_dnn_policy_name(tg_dnn_policy p);

typedef enum tg_dnn_action { TG_DNN_REUSE, TG_DNN_GUESS, TG_DNN_TIME } tg_dnn_action;

/* What to do before running a convolution under policy p: `chosen` says
 * whether an algorithm was chosen before, for the n lengths `old`; `cur`
 * are the lengths now; old_supports, whether the old algorithm runs on
 * them (read only when the lengths differ). */
tg_dnn_action tg_dnn_decide(tg_dnn_policy p, bool chosen, const int64_t *old, const int64_t *cur, int n,
                            bool old_supports);

/* ---- conv2d and its gradients ---- */

enum { TG_DNN_CONVOLUTION = 0, TG_DNN_CROSS_CORRELATION = 1 }; /* cudnnConvolutionMode_t */

typedef struct tg_dnn_conv {
    int pad[2], stride[2], dil[2];
    int mode; /* filter_flip: a true convolution; else a cross-correlation */
} tg_dnn_conv;

/* cuDNN's convolution descriptor for a (K, L) kernel; false when a value
 * does not fit cuDNN's int. */
bool tg_dnn_conv_map(const conv_p *p, int64_t K, int64_t L, tg_dnn_conv *d);

/* ---- pool2d and its gradient ---- */

enum { TG_DNN_POOL_AVG_INC = 1, TG_DNN_POOL_AVG_EXC = 2, TG_DNN_POOL_MAX = 3 }; /* cudnnPoolingMode_t */

typedef struct tg_dnn_pool {
    int mode;
    int window[2], pad[2], stride[2];
} tg_dnn_pool;

/* cuDNN's pooling descriptor for inputs of lengths H, W (-1: unknown);
 * false when cuDNN cannot give the CPU kernel's result: mode "sum" (cuDNN
 * has none), and ignore_border false with partial windows at the end, or
 * lengths unknown so that there might be some (cuDNN has no partial
 * windows: its padding is the same on both sides). */
bool tg_dnn_pool_map(const pool_p *p, int64_t H, int64_t W, tg_dnn_pool *d);

/* ---- softmax and log_softmax ---- */

enum { TG_DNN_SOFTMAX_ACCURATE = 1, TG_DNN_SOFTMAX_LOG = 2 }; /* cudnnSoftmaxAlgorithm_t */
enum { TG_DNN_SOFTMAX_MODE_CHANNEL = 1 };                     /* cudnnSoftmaxMode_t */

/* The softmax over `axis` (normalised, 0 <= axis < ndim) of an array of
 * that shape as cuDNN's (N, C, H, W) tensor in mode CHANNEL: (the lengths
 * before the axis, the axis, the lengths after it, 1). false when a
 * length does not fit cuDNN's int. */
bool tg_dnn_softmax_map(int ndim, const int64_t *shape, int axis, int dims[4]);

#endif
