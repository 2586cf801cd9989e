/* The cuDNN kernels: conv2d and both its gradients, pool2d and its
 * gradient, softmax and log_softmax (Theano's GpuDnn* ops).
 *
 * The host-side decisions live in backend/dnn.c (built and tested
 * everywhere): the attributes as cuDNN descriptors, the cases cuDNN
 * cannot reproduce exactly (the kernel lookup turns them down and the
 * node stays on the CPU), and the algorithm policy. This file only talks
 * to cuDNN.
 *
 * The handle is created at the first lookup of a kernel, which happens
 * only once the device is open (placement asks first), so a binary built
 * with cuDNN runs on a machine without a GPU. It runs on the backend's
 * compute stream; workspaces are arrays from the backend's pool, given
 * back right after the call they serve (the next user of the block is
 * ordered after it on the same stream, as for every pooled array).
 *
 * Per node (tg_node.kstate, freed with the node): the descriptors, and for
 * a convolution the algorithm chosen and the lengths it was chosen for.
 * Before each call tg_dnn_decide says whether to keep the algorithm, ask
 * the heuristic (cudnnGetConvolution*Algorithm_v7) or time them all
 * (cudnnFind*AlgorithmEx, on a workspace from the pool).
 *
 * Precision: float32 convolutions run with CUDNN_FMA_MATH, so that no
 * algorithm rounds the operands to TF32 on the tensor cores (cuDNN's
 * default allows it from Ampere on; the CPU computes in float32). float16
 * is storage only: convolutions compute in float32 (cuDNN's pseudo-half
 * configuration, tensor cores allowed), as the CPU kernels do.
 *
 * The gradient of max pooling is the one exception: cuDNN gives a tie's
 * gradient to one element of the window, Theano's rule to every maximum,
 * so it runs the backend's own kernel (pool_kernels.cu).
 *
 * Errors read as the CPU kernels' (ops/conv.c, ops/pool.c): the same
 * checks, in the same order, with the same words. A case cuDNN turns down
 * at run time (no algorithm for these lengths, a length beyond cuDNN's
 * int) runs the CPU kernel on host copies, with one line on stderr per
 * node.
 */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cudnn.h"
#include "backend/cuda/pool_kernels.h"
#include "backend/dnn.h"
#include "ops/convpool.h"
#include "ops/op.h"

/* dnn.h carries cuDNN's numbers, so that its tests check the mapping in
 * them. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(TG_DNN_CONVOLUTION, CUDNN_CONVOLUTION) && SAME(TG_DNN_CROSS_CORRELATION, CUDNN_CROSS_CORRELATION),
               "dnn.h: cudnnConvolutionMode_t");
_Static_assert(SAME(TG_DNN_POOL_MAX, CUDNN_POOLING_MAX_DETERMINISTIC) &&
                   SAME(TG_DNN_POOL_AVG_INC, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING) &&
                   SAME(TG_DNN_POOL_AVG_EXC, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING),
               "dnn.h: cudnnPoolingMode_t");
_Static_assert(SAME(TG_DNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_ACCURATE) && SAME(TG_DNN_SOFTMAX_LOG, CUDNN_SOFTMAX_LOG) &&
                   SAME(TG_DNN_SOFTMAX_MODE_CHANNEL, CUDNN_SOFTMAX_MODE_CHANNEL),
               "dnn.h: cudnnSoftmaxAlgorithm_t, cudnnSoftmaxMode_t");

/* ---- the handle ---- */

/* One handle for the process: cuDNN lets several threads call it, but
 * never two at once on the same handle, so every kernel holds `lock`. */
static struct {
    pthread_once_t once;
    bool ok;
    cudnnHandle_t h;
    pthread_mutex_t lock;
} dnn = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static void dnn_init(void) {
    /* A libcudnn of another major version than the header's would take
     * the same calls with other meanings. */
    size_t v = cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR) {
        fprintf(stderr, "tg: cuDNN %zu found, built for %d.x; conv2d, pool2d and softmax run on the CPU\n", v,
                CUDNN_MAJOR);
        return;
    }
    cudnnStatus_t s = cudnnCreate(&dnn.h);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetStream(dnn.h, (cudaStream_t)tg_cuda_compute_stream());
    if (s != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "tg: cuDNN could not be initialised (%s); conv2d, pool2d and softmax run on the CPU\n",
                cudnnGetErrorString(s));
        return;
    }
    dnn.ok = true;
}

static bool dnn_ready(void) {
    if (!tg_cuda_available()) return false;
    pthread_once(&dnn.once, dnn_init);
    return dnn.ok;
}

/* cuDNN 9's CUDNN_STATUS_ALLOC_FAILED is only the host's failure (4003);
 * the device's is 4004. */
static bool dnn_oom(cudnnStatus_t s) {
    return s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
           s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
}

static int dnn_check(cudnnStatus_t s, const char *what, tg_ctx *ctx) {
    if (s == CUDNN_STATUS_SUCCESS) return TG_OK;
    return tg_errorf(ctx, dnn_oom(s) ? TG_ENOMEM : TG_ERUNTIME, "cuDNN %s: %s", what, cudnnGetErrorString(s));
}

/* ---- per-node state ---- */

enum { K_CONV, K_CONV_GI, K_CONV_GW, K_POOL, K_POOL_GRAD, K_SOFTMAX, K_LOG_SOFTMAX };

#define NSHAPE 12 /* a convolution's three 4-d operands */

typedef struct dnn_state {
    tg_kstate head; /* first: tg_node.kstate points here */
    cudnnTensorDescriptor_t t[4];
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnPoolingDescriptor_t pool;
    bool chosen, warned;
    bool refused; /* no algorithm for `shapes`: the CPU runs them */
    int algo;
    cudnnMathType_t math;
    int64_t shapes[NSHAPE]; /* what algo was chosen for */
    tg_cudnn_stats st;
} dnn_state;

static void state_free(tg_kstate *p) {
    dnn_state *s = (dnn_state *)p;
    if (!s) return;
    for (int i = 0; i < 4; i++)
        if (s->t[i]) cudnnDestroyTensorDescriptor(s->t[i]);
    if (s->w) cudnnDestroyFilterDescriptor(s->w);
    if (s->conv) cudnnDestroyConvolutionDescriptor(s->conv);
    if (s->pool) cudnnDestroyPoolingDescriptor(s->pool);
    tg_free(s);
}

/* n's state, made at its first call with the descriptors its kind needs. */
static dnn_state *state_get(tg_node *n, int kind, tg_ctx *ctx) {
    if (n->kstate && n->kstate->free == state_free) return (dnn_state *)n->kstate;
    dnn_state *s = tg_calloc(1, sizeof *s);
    if (!s) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    s->head.free = state_free;
    s->algo = -1;
    s->st.algo = -1;
    cudnnStatus_t e = CUDNN_STATUS_SUCCESS;
    for (int i = 0; i < 4 && !e; i++) e = cudnnCreateTensorDescriptor(&s->t[i]);
    if (!e && kind <= K_CONV_GW) e = cudnnCreateFilterDescriptor(&s->w);
    if (!e && kind <= K_CONV_GW) e = cudnnCreateConvolutionDescriptor(&s->conv);
    if (!e && (kind == K_POOL || kind == K_POOL_GRAD)) e = cudnnCreatePoolingDescriptor(&s->pool);
    if (e) {
        state_free(&s->head);
        dnn_check(e, "descriptors", ctx);
        return NULL;
    }
    if (n->kstate) n->kstate->free(n->kstate);
    n->kstate = &s->head;
    return s;
}

bool tg_cudnn_node_stats(const tg_node *n, tg_cudnn_stats *st) {
    if (!n->kstate || n->kstate->free != state_free) return false;
    *st = ((const dnn_state *)n->kstate)->st;
    return true;
}

/* ---- helpers ---- */

static cudnnDataType_t dnn_type(tg_dtype dt) {
    return dt == TG_FLOAT64 ? CUDNN_DATA_DOUBLE : dt == TG_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

/* alpha and beta: double for double data, float otherwise (half too). */
static const void *scal(tg_dtype dt, int v) {
    static const float f[2] = {0, 1};
    static const double d[2] = {0, 1};
    return dt == TG_FLOAT64 ? (const void *)&d[v] : (const void *)&f[v];
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

/* Lengths of a 4-d operand cuDNN can describe: each, and the element
 * count (its strides are ints). */
static bool fits4(const int64_t *s) {
    return fits_int(s[0]) && fits_int(s[1]) && fits_int(s[2]) && fits_int(s[3]) &&
           fits_int(s[0] * s[1] * s[2] * s[3]);
}

static cudnnStatus_t set4(cudnnTensorDescriptor_t d, tg_dtype dt, const int64_t *s) {
    return cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, dnn_type(dt), (int)s[0], (int)s[1], (int)s[2], (int)s[3]);
}

static const char *node_id(const tg_node *n) { return n->nout ? n->outputs[0]->id : "?"; }

/* The CPU kernel on host copies of the inputs, its result copied back:
 * for what cuDNN turns down at run time. */
static int host_run(tg_node *n, dnn_state *s, const char *why, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_backend *be = tg_cuda_backend_get();
    tg_array *h[3] = {NULL, NULL, NULL}, *ho = NULL;
    int rc = TG_OK;
    if (s && !s->warned) {
        fprintf(stderr, "tg: cuDNN cannot run %s '%s' (%s); it runs on the CPU\n", n->op->name, node_id(n), why);
        s->warned = true;
    }
    if (s) s->st.nhost++;
    for (int i = 0; i < n->nin && i < 3 && !rc; i++) rc = be->to_host(in[i], &h[i], ctx);
    if (!rc) rc = n->op->run(n, h, &ho, ctx);
    if (!rc) rc = be->to_device(ho, out, ctx);
    for (int i = 0; i < 3; i++) tg_array_free(h[i]);
    tg_array_free(ho);
    return rc;
}

static int dev_zero(tg_array *a, tg_ctx *ctx) {
    size_t nbytes = (size_t)tg_array_size_inline(a) * tg_isize(a->dtype);
    if (!nbytes) return TG_OK;
    cudaError_t e = cudaMemsetAsync(a->data, 0, nbytes, (cudaStream_t)tg_cuda_compute_stream());
    return e == cudaSuccess ? TG_OK : tg_errorf(ctx, TG_ERUNTIME, "CUDA: %s", cudaGetErrorString(e));
}

/* A C-contiguous device copy of a (a itself when it is one): float32 and
 * float64 through the backend, float16 through cudnnTransformTensor. */
static int dnn_contiguous(const tg_array *a, tg_array **out, tg_ctx *ctx) {
    if (a->dtype != TG_FLOAT16 || tg_array_is_contiguous(a)) return tg_cuda_contiguous(a, out, ctx);
    /* Described with at least 4 dimensions (leading ones), as cuDNN's
     * Nd descriptors want. */
    int nd = a->ndim < 4 ? 4 : a->ndim, off = nd - a->ndim, dims[TG_MAX_NDIM], src[TG_MAX_NDIM], dst[TG_MAX_NDIM];
    int64_t run = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t len = d < off ? 1 : a->shape[d - off];
        int64_t st = d < off || len == 1 ? run : a->strides[d - off] / 2;
        if (!fits_int(len) || !fits_int(st) || !fits_int(run * len))
            return tg_errorf(ctx, TG_EINVAL, "CUDA: cannot copy a strided float16 array of this layout");
        dims[d] = (int)len;
        src[d] = (int)st;
        dst[d] = (int)run;
        run *= len;
    }
    if (!(*out = tg_cuda_empty(a->dtype, a->ndim, a->shape, ctx))) return ctx ? ctx->status : TG_ENOMEM;
    if (run == 0) return TG_OK;
    cudnnTensorDescriptor_t ds = NULL, dd = NULL;
    cudnnStatus_t e = cudnnCreateTensorDescriptor(&ds);
    if (!e) e = cudnnCreateTensorDescriptor(&dd);
    if (!e) e = cudnnSetTensorNdDescriptor(ds, CUDNN_DATA_HALF, nd, dims, src);
    if (!e) e = cudnnSetTensorNdDescriptor(dd, CUDNN_DATA_HALF, nd, dims, dst);
    if (!e) e = cudnnTransformTensor(dnn.h, scal(TG_FLOAT16, 1), ds, a->data, scal(TG_FLOAT16, 0), dd, (*out)->data);
    if (ds) cudnnDestroyTensorDescriptor(ds);
    if (dd) cudnnDestroyTensorDescriptor(dd);
    return dnn_check(e, "copy", ctx);
}

/* A workspace of n bytes from the pool (NULL for 0). */
static int workspace(size_t n, tg_array **ws, tg_ctx *ctx) {
    *ws = NULL;
    if (!n) return TG_OK;
    int64_t len = (int64_t)n;
    *ws = tg_cuda_empty(TG_UINT8, 1, &len, ctx);
    return *ws ? TG_OK : (ctx ? ctx->status : TG_ENOMEM);
}

/* ---- convolutions ----
 * The three directions differ only in which cuDNN calls they make; the
 * descriptors are the same: t[0] the image side (x, or dx), the filter
 * w (or dw), t[1] the output side (y, or dy). */

typedef struct perf {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnMathType_t math;
} perf;

#define NPERF 16

static cudnnStatus_t ws_size(int kind, dnn_state *s, int algo, size_t *size) {
    switch (kind) {
    case K_CONV:
        return cudnnGetConvolutionForwardWorkspaceSize(dnn.h, s->t[0], s->w, s->conv, s->t[1],
                                                       (cudnnConvolutionFwdAlgo_t)algo, size);
    case K_CONV_GI:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(dnn.h, s->w, s->t[1], s->conv, s->t[0],
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, size);
    default:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn.h, s->t[0], s->t[1], s->conv, s->w,
                                                              (cudnnConvolutionBwdFilterAlgo_t)algo, size);
    }
}

static int algo_count(int kind) {
    return kind == K_CONV ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
         : kind == K_CONV_GI ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                             : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

#define COPY_PERF(res, k)                                                                   \
    for (int i_ = 0; i_ < k; i_++)                                                          \
        out[i_] = (perf){(int)res[i_].algo, res[i_].status, res[i_].memory, res[i_].mathType};

/* The heuristic's candidates, best first. */
static cudnnStatus_t guess(int kind, dnn_state *s, perf *out, int *nout) {
    cudnnStatus_t e;
    int k = 0;
    if (kind == K_CONV) {
        cudnnConvolutionFwdAlgoPerf_t r[NPERF];
        e = cudnnGetConvolutionForwardAlgorithm_v7(dnn.h, s->t[0], s->w, s->conv, s->t[1], NPERF, &k, r);
        if (!e) COPY_PERF(r, k);
    } else if (kind == K_CONV_GI) {
        cudnnConvolutionBwdDataAlgoPerf_t r[NPERF];
        e = cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn.h, s->w, s->t[1], s->conv, s->t[0], NPERF, &k, r);
        if (!e) COPY_PERF(r, k);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t r[NPERF];
        e = cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn.h, s->t[0], s->t[1], s->conv, s->w, NPERF, &k, r);
        if (!e) COPY_PERF(r, k);
    }
    *nout = e ? 0 : k;
    return e;
}

/* Every algorithm timed on the real operands (out is overwritten), with
 * a workspace of ws_n bytes; fastest first. */
static cudnnStatus_t time_all(int kind, dnn_state *s, const void *a, const void *b, void *out_ptr, void *ws,
                              size_t ws_n, perf *out, int *nout) {
    cudnnStatus_t e;
    int k = 0;
    if (kind == K_CONV) {
        cudnnConvolutionFwdAlgoPerf_t r[NPERF];
        e = cudnnFindConvolutionForwardAlgorithmEx(dnn.h, s->t[0], a, s->w, b, s->conv, s->t[1], out_ptr, NPERF, &k,
                                                   r, ws, ws_n);
        if (!e) COPY_PERF(r, k);
    } else if (kind == K_CONV_GI) { /* a: w, b: dy, out: dx */
        cudnnConvolutionBwdDataAlgoPerf_t r[NPERF];
        e = cudnnFindConvolutionBackwardDataAlgorithmEx(dnn.h, s->w, a, s->t[1], b, s->conv, s->t[0], out_ptr, NPERF,
                                                        &k, r, ws, ws_n);
        if (!e) COPY_PERF(r, k);
    } else { /* a: x, b: dy, out: dw */
        cudnnConvolutionBwdFilterAlgoPerf_t r[NPERF];
        e = cudnnFindConvolutionBackwardFilterAlgorithmEx(dnn.h, s->t[0], a, s->t[1], b, s->conv, s->w, out_ptr,
                                                          NPERF, &k, r, ws, ws_n);
        if (!e) COPY_PERF(r, k);
    }
    *nout = e ? 0 : k;
    return e;
}

/* The math type a convolution of dtype dt runs with: FMA for float32 and
 * float64 (no TF32), the candidate's own for float16. */
static cudnnMathType_t math_for(tg_dtype dt, cudnnMathType_t cand) {
    return dt == TG_FLOAT16 ? cand : CUDNN_FMA_MATH;
}

static bool math_ok(tg_dtype dt, cudnnMathType_t m) {
    return dt == TG_FLOAT16 || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

_Static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT == 8 && CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT == 6 &&
                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT == 7 && CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING == 6 &&
                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING == 3 && CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD == 6,
               "algo_name: cuDNN's algorithm numbers");

/* The name of algorithm a of direction kind, and whether it is an FFT
 * or Winograd one (tg_cudnn_stats.approx). */
static const char *algo_name(int kind, int a, bool *approx) {
    static const char *const fwd[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
                                       "fft", "fft_tiling", "winograd", "winograd_nonfused"};
    static const char *const bwd_data[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd",
                                           "winograd_nonfused"};
    static const char *const bwd_filter[] = {"algo_0", "algo_1", "fft", "algo_3", "winograd",
                                             "winograd_nonfused", "fft_tiling"};
    const char *const *t = kind == K_CONV ? fwd : kind == K_CONV_GI ? bwd_data : bwd_filter;
    int n = (int)(kind == K_CONV      ? TG_ARRAY_LEN(fwd)
                  : kind == K_CONV_GI ? TG_ARRAY_LEN(bwd_data)
                                      : TG_ARRAY_LEN(bwd_filter));
    const char *name = a >= 0 && a < n ? t[a] : "other";
    *approx = !strncmp(name, "fft", 3) || !strncmp(name, "winograd", 8);
    return name;
}

/* Choose s's algorithm for the current descriptors (see the top): the
 * first candidate, best first, that succeeded and whose workspace size
 * cuDNN gives. *none: no candidate. */
static int choose(int kind, dnn_state *s, tg_dtype dt, bool timed, const void *a, const void *b, void *out_ptr,
                  bool *none, tg_ctx *ctx) {
    perf cand[NPERF];
    int k = 0, rc = TG_OK;
    cudnnStatus_t e;
    *none = false;
    /* Ask with the math type the node may run with. */
    if ((rc = dnn_check(cudnnSetConvolutionMathType(s->conv, dt == TG_FLOAT16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                        "math type", ctx)))
        return rc;
    if (timed) {
        /* The workspace: what the hungriest algorithm asks for, up to a
         * quarter of the free device memory (the pool rounds blocks up to
         * a power of two); those that need more are reported as failed
         * and skipped. When even that cannot be had, the algorithms that
         * need none are timed. */
        size_t want = 0, sz, free_b = 0, total_b = 0;
        for (int i = 0; i < algo_count(kind); i++)
            if (ws_size(kind, s, i, &sz) == CUDNN_STATUS_SUCCESS && sz > want) want = sz;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && want > free_b / 4) want = free_b / 4;
        cudaGetLastError();
        tg_array *ws = NULL;
        if (workspace(want, &ws, ctx)) {
            tg_ctx_clear(ctx);
            want = 0;
        }
        e = time_all(kind, s, a, b, out_ptr, ws ? ws->data : NULL, ws ? want : 0, cand, &k);
        tg_array_free(ws);
        s->st.ntime++;
    } else {
        e = guess(kind, s, cand, &k);
        s->st.nguess++;
    }
    /* cuDNN 9 may refuse the whole call (NOT_SUPPORTED and its sub-codes:
     * these lengths, or a missing engine library) rather than each
     * candidate: no algorithm, so the CPU runs it. */
    if (CUDNN_STATUS_CATEGORY(e) == CUDNN_STATUS_NOT_SUPPORTED) k = 0;
    else if ((rc = dnn_check(e, timed ? "finding an algorithm" : "choosing an algorithm", ctx))) return rc;
    /* TG_CUDNN_EXACT=1: no FFT or Winograd algorithm (their float32
     * errors reach about 1e-3 of the largest magnitude). */
    const char *ex = getenv("TG_CUDNN_EXACT");
    const bool exact = ex && *ex && strcmp(ex, "0");
    for (int i = 0; i < k; i++) {
        size_t sz;
        bool approx;
        if (cand[i].status != CUDNN_STATUS_SUCCESS || !math_ok(dt, cand[i].math)) continue;
        if (exact && (algo_name(kind, cand[i].algo, &approx), approx)) continue;
        cudnnMathType_t m = math_for(dt, cand[i].math);
        if (cudnnSetConvolutionMathType(s->conv, m) || ws_size(kind, s, cand[i].algo, &sz)) continue;
        s->chosen = true;
        s->algo = s->st.algo = cand[i].algo;
        s->st.algo_name = algo_name(kind, s->algo, &s->st.approx);
        s->math = m;
        return TG_OK;
    }
    s->chosen = false;
    s->algo = s->st.algo = -1;
    s->st.algo_name = NULL;
    s->st.approx = false;
    *none = true;
    return TG_OK;
}

/* The operands of one convolution call: the image-side and output-side
 * lengths, the kernel's. */
typedef struct conv_call {
    int64_t img[4], ker[4], res[4];
} conv_call;

/* One convolution in direction `kind` into *out (prepared): a and b are
 * x and w (forward), w and dy (inputs), x and dy (weights). */
static int conv_common(int kind, tg_node *n, const conv_call *c, const tg_array *a, const tg_array *b,
                       tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    tg_array *dst = *out;
    const tg_dtype dt = n->outputs[0]->type.dtype;
    tg_array *ca = NULL, *cb = NULL, *ws = NULL;
    tg_dnn_conv d;
    int rc;
    dnn_state *s = state_get(n, kind, ctx);
    if (!s) return ctx ? ctx->status : TG_ENOMEM;
    if (!fits4(c->img) || !fits4(c->ker) || !fits4(c->res) || !tg_dnn_conv_map(p, c->ker[2], c->ker[3], &d))
        return host_run(n, s, "a length beyond cuDNN's int", in, out, ctx);
    cudnnStatus_t e = set4(s->t[0], dt, c->img);
    if (!e) e = set4(s->t[1], dt, c->res);
    if (!e)
        e = cudnnSetFilter4dDescriptor(s->w, dnn_type(dt), CUDNN_TENSOR_NCHW, (int)c->ker[0], (int)c->ker[1],
                                       (int)c->ker[2], (int)c->ker[3]);
    if (!e)
        e = cudnnSetConvolution2dDescriptor(s->conv, d.pad[0], d.pad[1], d.stride[0], d.stride[1], d.dil[0], d.dil[1],
                                            (cudnnConvolutionMode_t)d.mode,
                                            dt == TG_FLOAT64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT);
    if ((rc = dnn_check(e, "descriptors", ctx))) return rc;
    if ((rc = dnn_contiguous(a, &ca, ctx)) || (rc = dnn_contiguous(b, &cb, ctx))) goto done;
    /* The algorithm (see the top). */
    int64_t shapes[NSHAPE];
    memcpy(shapes, c->img, sizeof c->img);
    memcpy(shapes + 4, c->ker, sizeof c->ker);
    memcpy(shapes + 8, c->res, sizeof c->res);
    size_t sz = 0;
    if (s->refused && !memcmp(shapes, s->shapes, sizeof shapes)) {
        rc = host_run(n, s, "no algorithm for these lengths", in, out, ctx);
        goto done;
    }
    s->refused = false;
    bool same = s->chosen && !memcmp(shapes, s->shapes, sizeof shapes);
    bool supports = false;
    if (s->chosen && !same)
        supports = !cudnnSetConvolutionMathType(s->conv, s->math) && !ws_size(kind, s, s->algo, &sz);
    tg_dnn_action act = tg_dnn_decide((tg_dnn_policy)n->dnn_algo, s->chosen, s->shapes, shapes, NSHAPE, supports);
    if (act != TG_DNN_REUSE) {
        bool none;
        /* Under a _once policy a new choice means the old one failed. */
        if (s->chosen && !same && (n->dnn_algo == TG_DNN_GUESS_ONCE || n->dnn_algo == TG_DNN_TIME_ONCE))
            s->st.nfallback++;
        if ((rc = choose(kind, s, dt, act == TG_DNN_TIME, ca->data, cb->data, dst->data, &none, ctx))) goto done;
        memcpy(s->shapes, shapes, sizeof shapes);
        if (none) {
            s->refused = true; /* not asked again for these lengths */
            rc = host_run(n, s, "no algorithm for these lengths", in, out, ctx);
            goto done;
        }
    } else if (!same) {
        memcpy(s->shapes, shapes, sizeof shapes); /* kept for the new lengths */
    }
    if ((rc = dnn_check(cudnnSetConvolutionMathType(s->conv, s->math), "math type", ctx)) ||
        (rc = dnn_check(ws_size(kind, s, s->algo, &sz), "workspace size", ctx)) || (rc = workspace(sz, &ws, ctx)))
        goto done;
    void *wp = ws ? ws->data : NULL;
    const void *one = scal(dt, 1), *zero = scal(dt, 0);
    if (kind == K_CONV)
        e = cudnnConvolutionForward(dnn.h, one, s->t[0], ca->data, s->w, cb->data, s->conv,
                                    (cudnnConvolutionFwdAlgo_t)s->algo, wp, sz, zero, s->t[1], dst->data);
    else if (kind == K_CONV_GI)
        e = cudnnConvolutionBackwardData(dnn.h, one, s->w, ca->data, s->t[1], cb->data, s->conv,
                                         (cudnnConvolutionBwdDataAlgo_t)s->algo, wp, sz, zero, s->t[0], dst->data);
    else
        e = cudnnConvolutionBackwardFilter(dnn.h, one, s->t[0], ca->data, s->t[1], cb->data, s->conv,
                                           (cudnnConvolutionBwdFilterAlgo_t)s->algo, wp, sz, zero, s->w, dst->data);
    rc = dnn_check(e, kind == K_CONV ? "convolution" : kind == K_CONV_GI ? "convolution gradient (inputs)"
                                                                          : "convolution gradient (weights)",
                   ctx);
done:
    tg_array_free(ca);
    tg_array_free(cb);
    tg_array_free(ws);
    return rc;
}


static int check_gy(const int64_t *want, const tg_array *gy, tg_ctx *ctx) {
    if (gy->ndim != 4 || gy->shape[0] != want[0] || gy->shape[1] != want[1] || gy->shape[2] != want[2] ||
        gy->shape[3] != want[3])
        return tg_errorf(ctx, TG_ESHAPE, "the output gradient has shape (%lld, %lld, %lld, %lld), "
                         "the convolution gives (%lld, %lld, %lld, %lld)",
                         (long long)gy->shape[0], (long long)gy->shape[1], (long long)gy->shape[2],
                         (long long)gy->shape[3], (long long)want[0], (long long)want[1], (long long)want[2],
                         (long long)want[3]);
    return TG_OK;
}

/* The shp input (on the host; read back when it is not). */
static int read_shp(const tg_array *s, int64_t *v, tg_ctx *ctx) {
    tg_array *h = NULL;
    const tg_backend *be = tg_cuda_backend_get();
    int rc = be->is_device(s) ? be->to_host(s, &h, ctx) : TG_OK;
    if (rc) goto done;
    const tg_array *a = h ? h : s;
    if (a->ndim != 1 || a->shape[0] != 4) {
        rc = tg_errorf(ctx, TG_ESHAPE, "the shape input must have 4 entries");
        goto done;
    }
    for (int k = 0; k < 4; k++) {
        v[k] = tg_load_i64(a->dtype, a->data + k * a->strides[0]);
        if (v[k] < 0) {
            rc = tg_errorf(ctx, TG_ESHAPE, "the shape input has a negative length %lld", (long long)v[k]);
            goto done;
        }
    }
done:
    tg_array_free(h);
    return rc;
}

/* A non-empty result of a convolution with an empty operand is all zeros
 * (empty sums); cuDNN takes no zero lengths. */
static bool empty_sums(const conv_call *c) {
    return tg_shape_size(4, c->img) == 0 || tg_shape_size(4, c->ker) == 0 || tg_shape_size(4, c->res) == 0;
}

static int k_conv(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    const tg_array *x = in[0], *w = in[1];
    if (x->ndim != 4 || w->ndim != 4) return tg_errorf(ctx, TG_ESHAPE, "expected 4-d inputs");
    if (w->shape[1] != x->shape[1])
        return tg_errorf(ctx, TG_ESHAPE, "the input has %lld channels but the kernel expects %lld",
                         (long long)x->shape[1], (long long)w->shape[1]);
    conv_call c = {.img = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]},
                   .ker = {w->shape[0], w->shape[1], w->shape[2], w->shape[3]}};
    int rc = tg_conv_out_lengths(p, x->shape[2], x->shape[3], w->shape[2], w->shape[3], &c.res[2], &c.res[3], ctx);
    if (rc) return rc;
    c.res[0] = x->shape[0];
    c.res[1] = w->shape[0];
    if ((rc = tg_cuda_prepare(out, n->outputs[0]->type.dtype, 4, c.res, ctx))) return rc;
    if (tg_array_size_inline(*out) == 0) return TG_OK;
    if (empty_sums(&c)) return dev_zero(*out, ctx);
    return conv_common(K_CONV, n, &c, x, w, in, out, ctx);
}

/* conv2d_grad_inputs(w, gy, shp) */
static int k_conv_gi(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    const tg_array *w = in[0], *gy = in[1];
    conv_call c;
    int rc = read_shp(in[2], c.img, ctx);
    if (rc) return rc;
    if (w->ndim != 4) return tg_errorf(ctx, TG_ESHAPE, "expected a 4-d kernel");
    if (w->shape[1] != c.img[1])
        return tg_errorf(ctx, TG_ESHAPE, "the shape has %lld channels but the kernel expects %lld",
                         (long long)c.img[1], (long long)w->shape[1]);
    memcpy(c.ker, w->shape, sizeof c.ker);
    c.res[0] = c.img[0];
    c.res[1] = w->shape[0];
    if ((rc = tg_conv_out_lengths(p, c.img[2], c.img[3], c.ker[2], c.ker[3], &c.res[2], &c.res[3], ctx)) ||
        (rc = check_gy(c.res, gy, ctx)))
        return rc;
    if ((rc = tg_cuda_prepare(out, n->outputs[0]->type.dtype, 4, c.img, ctx))) return rc;
    if (tg_array_size_inline(*out) == 0) return TG_OK;
    if (empty_sums(&c)) return dev_zero(*out, ctx);
    return conv_common(K_CONV_GI, n, &c, w, gy, in, out, ctx);
}

/* conv2d_grad_weights(x, gy, shp) */
static int k_conv_gw(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    const tg_array *x = in[0], *gy = in[1];
    conv_call c;
    int rc = read_shp(in[2], c.ker, ctx);
    if (rc) return rc;
    if (x->ndim != 4) return tg_errorf(ctx, TG_ESHAPE, "expected a 4-d input");
    if (c.ker[1] != x->shape[1])
        return tg_errorf(ctx, TG_ESHAPE, "the input has %lld channels but the shape says %lld",
                         (long long)x->shape[1], (long long)c.ker[1]);
    memcpy(c.img, x->shape, sizeof c.img);
    c.res[0] = c.img[0];
    c.res[1] = c.ker[0];
    if ((rc = tg_conv_out_lengths(p, c.img[2], c.img[3], c.ker[2], c.ker[3], &c.res[2], &c.res[3], ctx)) ||
        (rc = check_gy(c.res, gy, ctx)))
        return rc;
    if ((rc = tg_cuda_prepare(out, n->outputs[0]->type.dtype, 4, c.ker, ctx))) return rc;
    if (tg_array_size_inline(*out) == 0) return TG_OK;
    if (empty_sums(&c)) return dev_zero(*out, ctx);
    return conv_common(K_CONV_GW, n, &c, x, gy, in, out, ctx);
}

/* ---- pooling ---- */

/* x's last two dimensions pooled: as cuDNN's (N, C, H, W) with C the
 * dimension before them (1 for a matrix) and N the rest. */
static void pool_dims(const tg_array *x, int64_t *d) {
    const int nd = x->ndim;
    d[1] = nd >= 3 ? x->shape[nd - 3] : 1;
    d[0] = 1;
    for (int k = 0; k < nd - 3; k++) d[0] *= x->shape[k];
    d[2] = x->shape[nd - 2];
    d[3] = x->shape[nd - 1];
}

/* pool.c's pool_setup checks, on x; the cuDNN pooling in *pd (false in
 * *ok when cuDNN cannot run these lengths). */
static int pool_setup(tg_node *n, const tg_array *x, int64_t *oh, int64_t *ow, tg_dnn_pool *pd, bool *ok,
                      tg_ctx *ctx) {
    const pool_p *p = n->a.extra;
    if (x->ndim < 2) return tg_errorf(ctx, TG_ESHAPE, "expected at least 2 dimensions");
    const int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
    *oh = tg_pool_out_len(p, 0, H);
    *ow = tg_pool_out_len(p, 1, W);
    int64_t planes = 1;
    for (int k = 0; k < x->ndim - 2; k++) planes *= x->shape[k];
    /* A window with no element of the input: only with an empty image
     * (the padding is smaller than the window). */
    if (planes > 0 && *oh * *ow > 0 && (H == 0 || W == 0) && (p->mode == PM_MAX || p->mode == PM_AVG_EXC))
        return tg_errorf(ctx, TG_ESHAPE, "a pooling window holds no element of the input (shape %lldx%lld)",
                         (long long)H, (long long)W);
    *ok = tg_dnn_pool_map(p, H, W, pd);
    return TG_OK;
}

static int pool_desc(dnn_state *s, const tg_dnn_pool *pd, tg_ctx *ctx) {
    return dnn_check(cudnnSetPooling2dDescriptor(s->pool, (cudnnPoolingMode_t)pd->mode, CUDNN_PROPAGATE_NAN,
                                                 pd->window[0], pd->window[1], pd->pad[0], pd->pad[1], pd->stride[0],
                                                 pd->stride[1]),
                     "pooling descriptor", ctx);
}

static int k_pool(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *x = in[0];
    const tg_dtype dt = n->outputs[0]->type.dtype;
    int64_t oh, ow, shape[TG_MAX_NDIM], xd[4], yd[4];
    tg_dnn_pool pd;
    bool ok;
    int rc = pool_setup(n, x, &oh, &ow, &pd, &ok, ctx);
    if (rc) return rc;
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 2] = oh;
    shape[x->ndim - 1] = ow;
    if ((rc = tg_cuda_prepare(out, dt, x->ndim, shape, ctx))) return rc;
    if (tg_array_size_inline(*out) == 0) return TG_OK;
    if (tg_array_size_inline(x) == 0) return dev_zero(*out, ctx); /* average_inc_pad of padding only */
    dnn_state *s = state_get(n, K_POOL, ctx);
    if (!s) return ctx ? ctx->status : TG_ENOMEM;
    pool_dims(x, xd);
    memcpy(yd, xd, sizeof yd);
    yd[2] = oh;
    yd[3] = ow;
    if (!ok) return host_run(n, s, "partial windows", in, out, ctx);
    if (!fits4(xd) || !fits4(yd)) return host_run(n, s, "a length beyond cuDNN's int", in, out, ctx);
    tg_array *cx = NULL;
    cudnnStatus_t e = set4(s->t[0], dt, xd);
    if (!e) e = set4(s->t[1], dt, yd);
    if ((rc = dnn_check(e, "descriptors", ctx)) || (rc = pool_desc(s, &pd, ctx)) ||
        (rc = dnn_contiguous(x, &cx, ctx)))
        goto done;
    rc = dnn_check(cudnnPoolingForward(dnn.h, s->pool, scal(dt, 1), s->t[0], cx->data, scal(dt, 0), s->t[1],
                                       (*out)->data),
                   "pooling", ctx);
done:
    tg_array_free(cx);
    return rc;
}

/* pool2d_grad(x, y, gy) */
static int k_pool_grad(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *x = in[0];
    const tg_dtype dt = n->outputs[0]->type.dtype;
    int64_t oh, ow, xd[4], yd[4];
    tg_dnn_pool pd;
    bool ok;
    int rc = pool_setup(n, x, &oh, &ow, &pd, &ok, ctx);
    if (rc) return rc;
    for (int i = 1; i < 3; i++) {
        const tg_array *a = in[i];
        bool same = a->ndim == x->ndim && a->shape[x->ndim - 2] == oh && a->shape[x->ndim - 1] == ow;
        for (int k = 0; same && k < x->ndim - 2; k++) same = a->shape[k] == x->shape[k];
        if (!same) return tg_errorf(ctx, TG_ESHAPE, "inputs[%d]: its shape is not the pooled shape of inputs[0]", i);
    }
    if ((rc = tg_cuda_prepare(out, dt, x->ndim, x->shape, ctx))) return rc;
    if (tg_array_size_inline(x) == 0) return TG_OK;
    if (oh * ow == 0) return dev_zero(*out, ctx);
    dnn_state *s = state_get(n, K_POOL_GRAD, ctx);
    if (!s) return ctx ? ctx->status : TG_ENOMEM;
    pool_dims(x, xd);
    memcpy(yd, xd, sizeof yd);
    yd[2] = oh;
    yd[3] = ow;
    if (!ok) return host_run(n, s, "partial windows", in, out, ctx);
    if (!fits4(xd) || !fits4(yd)) return host_run(n, s, "a length beyond cuDNN's int", in, out, ctx);
    tg_array *c[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        if ((rc = dnn_contiguous(in[i], &c[i], ctx))) goto done;
    if (pd.mode == TG_DNN_POOL_MAX) {
        /* cuDNN gives a tie's gradient to one element, the CPU to all:
         * the backend's own kernel keeps the CPU's rule. */
        tg_cu_pool g = {.planes = xd[0] * xd[1], .h = xd[2], .w = xd[3], .oh = oh, .ow = ow,
                        .wh = pd.window[0], .ww = pd.window[1], .sh = pd.stride[0], .sw = pd.stride[1],
                        .ph = pd.pad[0], .pw = pd.pad[1]};
        int e = tg_cu_maxpool_grad(dt == TG_FLOAT64 ? TG_CU_F64 : dt == TG_FLOAT16 ? TG_CU_F16 : TG_CU_F32, &g,
                                   c[0]->data, c[1]->data, c[2]->data, (*out)->data, tg_cuda_compute_stream());
        if (e) rc = tg_errorf(ctx, TG_ERUNTIME, "CUDA: %s", cudaGetErrorString((cudaError_t)e));
        goto done;
    }
    cudnnStatus_t e = set4(s->t[0], dt, xd);
    if (!e) e = set4(s->t[1], dt, yd);
    if ((rc = dnn_check(e, "descriptors", ctx)) || (rc = pool_desc(s, &pd, ctx))) goto done;
    /* x and dx share t[0], y and dy t[1]. */
    rc = dnn_check(cudnnPoolingBackward(dnn.h, s->pool, scal(dt, 1), s->t[1], c[1]->data, s->t[1], c[2]->data,
                                        s->t[0], c[0]->data, scal(dt, 0), s->t[0], (*out)->data),
                   "pooling gradient", ctx);
done:
    for (int i = 0; i < 3; i++) tg_array_free(c[i]);
    return rc;
}

/* ---- softmax ---- */

static int softmax_axis(const tg_node *n, int ndim) { return n->a.axes[0] < 0 ? n->a.axes[0] + ndim : n->a.axes[0]; }

static int k_softmax(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *x = in[0];
    const tg_dtype dt = n->outputs[0]->type.dtype;
    const int log = !strcmp(n->op->name, "log_softmax");
    int dims[4];
    int rc = tg_cuda_prepare(out, dt, x->ndim, x->shape, ctx);
    if (rc) return rc;
    if (tg_array_size_inline(x) == 0) return TG_OK;
    dnn_state *s = state_get(n, log ? K_LOG_SOFTMAX : K_SOFTMAX, ctx);
    if (!s) return ctx ? ctx->status : TG_ENOMEM;
    if (!tg_dnn_softmax_map(x->ndim, x->shape, softmax_axis(n, x->ndim), dims))
        return host_run(n, s, "a length beyond cuDNN's int", in, out, ctx);
    tg_array *cx = NULL;
    cudnnStatus_t e = cudnnSetTensor4dDescriptor(s->t[0], CUDNN_TENSOR_NCHW, dnn_type(dt), dims[0], dims[1], dims[2],
                                                 dims[3]);
    if ((rc = dnn_check(e, "descriptors", ctx)) || (rc = dnn_contiguous(x, &cx, ctx))) goto done;
    rc = dnn_check(cudnnSoftmaxForward(dnn.h, log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                       CUDNN_SOFTMAX_MODE_CHANNEL, scal(dt, 1), s->t[0], cx->data, scal(dt, 0),
                                       s->t[0], (*out)->data),
                   "softmax", ctx);
done:
    tg_array_free(cx);
    return rc;
}

/* ---- the lookup ---- */

/* The kernels as the VM calls them: one at a time on the handle. */
#define LOCKED(fn)                                                                     \
    static int fn##_locked(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) { \
        pthread_mutex_lock(&dnn.lock);                                                 \
        int rc = fn(n, in, out, ctx);                                                  \
        pthread_mutex_unlock(&dnn.lock);                                               \
        return rc;                                                                     \
    }
LOCKED(k_conv)
LOCKED(k_conv_gi)
LOCKED(k_conv_gw)
LOCKED(k_pool)
LOCKED(k_pool_grad)
LOCKED(k_softmax)

static bool is_float(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64; }

tg_kernel_fn tg_cudnn_kernel(const tg_node *n) {
    static const struct {
        const char *name;
        int kind;
        tg_kernel_fn fn;
    } ops[] = {
        {"conv2d", K_CONV, k_conv_locked},
        {"conv2d_grad_inputs", K_CONV_GI, k_conv_gi_locked},
        {"conv2d_grad_weights", K_CONV_GW, k_conv_gw_locked},
        {"pool2d", K_POOL, k_pool_locked},
        {"pool2d_grad", K_POOL_GRAD, k_pool_grad_locked},
        {"softmax", K_SOFTMAX, k_softmax_locked},
        {"log_softmax", K_LOG_SOFTMAX, k_softmax_locked},
    };
    int i = 0, nops = (int)(sizeof ops / sizeof ops[0]);
    while (i < nops && strcmp(ops[i].name, n->op->name)) i++;
    if (i == nops || n->nout != 1) return NULL;
    const int kind = ops[i].kind;
    if (kind <= K_POOL_GRAD && !n->a.extra) return NULL; /* the parsed attributes */
    const tg_dtype dt = n->outputs[0]->type.dtype;
    if (!is_float(dt)) return NULL;
    /* The arrays the kernel reads are all of the output's dtype (the CPU
     * kernels convert mixed ones; these do not). */
    const int narrays = kind == K_CONV_GI || kind == K_CONV_GW ? 2 : n->nin;
    for (int k = 0; k < narrays; k++)
        if (n->inputs[k]->type.dtype != dt) return NULL;
    if (kind == K_POOL || kind == K_POOL_GRAD) {
        const tg_type *x = &n->inputs[0]->type;
        tg_dnn_pool pd;
        if (x->ndim < 2 || !tg_dnn_pool_map(n->a.extra, x->shape[x->ndim - 2], x->shape[x->ndim - 1], &pd))
            return NULL;
    }
    if (kind == K_SOFTMAX || kind == K_LOG_SOFTMAX) {
        /* The backend's own kernels take the last axis (one block per
         * row); cuDNN the others, and the last too with
         * TG_CUDA_SOFTMAX=cudnn. float16: the CPU's. */
        const int nd = n->inputs[0]->type.ndim, ax = softmax_axis(n, nd);
        const char *env = getenv("TG_CUDA_SOFTMAX");
        if (dt == TG_FLOAT16 || nd < 1 || ax < 0 || ax >= nd) return NULL;
        if (ax == nd - 1 && !(env && !strcmp(env, "cudnn"))) return NULL;
    }
    return dnn_ready() ? ops[i].fn : NULL;
}
