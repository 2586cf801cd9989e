/* The CUDA backend, host side: the device, its memory pool, two streams,
 * host<->device copies, and each op's device kernel (launching kernels.cu
 * or cuBLAS).
 *
 * The device is opened lazily, at the first call that needs it: a binary
 * built with CUDA runs on a machine without a GPU (or without a driver)
 * and only the request for the device fails, with one line, and the
 * function stays on the CPU.
 *
 * Memory (Theano's CNMeM habit): blocks come from cudaMalloc once and go
 * back to per-size-class free lists when their array dies; the next
 * request of that class takes one from the list. Nothing calls cudaFree
 * before tg_cuda_pool_trim (or process exit). Size classes are powers of
 * two from 256 bytes, so a block wastes at most half its size.
 *
 * Streams: kernels and cuBLAS run on the compute stream; copies run on the
 * transfer stream, ordered after the compute stream by an event (so that
 * a block freed by one kernel and reused by an upload is not overwritten
 * early) and the compute stream waits for an upload's event. Only a copy
 * to the host synchronises, and only with the transfer stream.
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda.h"
#include "backend/cuda/cudnn.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/nvrtc.h"
#include "ops/op.h"

/* ---- cuBLAS, opened with the device ----
 *
 * Not linked: loading libcublas (and the libcublasLt it needs) runs their
 * initialisers, 0.4 s and 200 MB at the start of every process that links
 * them, GPU or not (tgc --version took 0.42 s). It is opened with dlopen
 * when a device is first found, so a CPU run never pays for it, and a
 * machine with the CUDA runtime but no cuBLAS keeps its functions on the
 * CPU (the device is then unusable, with one line saying why). The
 * handle is never closed. */

#ifndef TG_CUDA_LIBDIR
#define TG_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* The header maps each name to its versioned symbol (cublasSgemm is
 * cublasSgemm_v2): look up the expanded name. */
#define BLAS_SYM_(name) #name
#define BLAS_SYM(name) BLAS_SYM_(name)

static struct {
    pthread_once_t once;
    bool ok;
    char why[300];
    __typeof__(cublasCreate) *create;
    __typeof__(cublasSetStream) *set_stream;
    __typeof__(cublasSgemm) *sgemm;
    __typeof__(cublasDgemm) *dgemm;
    __typeof__(cublasSscal) *sscal;
    __typeof__(cublasDscal) *dscal;
} blas = {.once = PTHREAD_ONCE_INIT};

void *tg_cuda_dlopen(const char *path, const char *base, int major, const char *what, char *why,
                     size_t why_len) {
    char names[3][300];
    int nn = 0;
    if (path && *path) {
        snprintf(names[nn++], sizeof names[0], "%s", path);
    } else {
        snprintf(names[nn++], sizeof names[0], "%s.%d", base, major);
        snprintf(names[nn++], sizeof names[0], "%s", base);
        snprintf(names[nn++], sizeof names[0], "%s/%s.%d", TG_CUDA_LIBDIR, base, major);
    }
    void *h = NULL;
    for (int i = 0; i < nn && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && i == 0) {
            const char *e = dlerror();
            snprintf(why, why_len, "%s not found (%s)", what, e ? e : names[0]);
        }
    }
    return h;
}

static void blas_open(void) {
    void *h = tg_cuda_dlopen(getenv("TG_CUBLAS"), "libcublas.so", CUBLAS_VER_MAJOR, "cuBLAS", blas.why,
                             sizeof blas.why);
    if (!h) return;
    bool found = true;
#define SYM(field, name) found = found && (*(void **)&blas.field = dlsym(h, BLAS_SYM(name))) != NULL
    SYM(create, cublasCreate);
    SYM(set_stream, cublasSetStream);
    SYM(sgemm, cublasSgemm);
    SYM(dgemm, cublasDgemm);
    SYM(sscal, cublasSscal);
    SYM(dscal, cublasDscal);
#undef SYM
    if (!found) {
        snprintf(blas.why, sizeof blas.why, "cuBLAS library unusable (a function is missing)");
        dlclose(h);
        return;
    }
    blas.why[0] = 0;
    blas.ok = true;
}

bool tg_cuda_blas_load(const char **why) {
    pthread_once(&blas.once, blas_open);
    if (why) *why = blas.ok ? NULL : blas.why;
    return blas.ok;
}

/* ---- the device ---- */

static struct {
    pthread_once_t once;
    bool ok;
    char why[320];
    cudaStream_t compute, transfer;
    cudaEvent_t ev_compute, ev_transfer;
    cublasHandle_t blas;
    pthread_mutex_t lock; /* the pool */
} dev = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static void dev_init(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(dev.why, sizeof dev.why, "no CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return;
    }
    if ((e = cudaSetDevice(0)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&dev.compute, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&dev.transfer, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&dev.ev_compute, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&dev.ev_transfer, cudaEventDisableTiming)) != cudaSuccess) {
        snprintf(dev.why, sizeof dev.why, "CUDA device 0 unusable (%s)", cudaGetErrorString(e));
        return;
    }
    const char *why;
    if (!tg_cuda_blas_load(&why)) {
        snprintf(dev.why, sizeof dev.why, "%s", why);
        return;
    }
    if (blas.create(&dev.blas) != CUBLAS_STATUS_SUCCESS) {
        snprintf(dev.why, sizeof dev.why, "cuBLAS could not be initialised");
        return;
    }
    blas.set_stream(dev.blas, dev.compute);
    dev.ok = true;
}

static bool cu_available(const char **why) {
    pthread_once(&dev.once, dev_init);
    if (why) *why = dev.ok ? NULL : dev.why;
    return dev.ok;
}

bool tg_cuda_available(void) { return cu_available(NULL); }

void *tg_cuda_compute_stream(void) { return cu_available(NULL) ? dev.compute : NULL; }

int tg_cuda_sync(tg_ctx *ctx) {
    if (!cu_available(NULL)) return TG_OK;
    cudaError_t e = cudaStreamSynchronize(dev.compute);
    if (e != cudaSuccess) return tg_errorf(ctx, TG_ERUNTIME, "CUDA: %s", cudaGetErrorString(e));
    return TG_OK;
}

static int cu_check(cudaError_t e, tg_ctx *ctx) {
    if (e == cudaSuccess) return TG_OK;
    cudaGetLastError(); /* or the next launch (kernels.cu) reports it again */
    return tg_errorf(ctx, e == cudaErrorMemoryAllocation ? TG_ENOMEM : TG_ERUNTIME, "CUDA: %s",
                     cudaGetErrorString(e));
}

/* ---- the pool ---- */

#define NCLASS 48
typedef struct block {
    void *ptr;
    size_t size;
    struct block *next;
} block;

static block *free_list[NCLASS];
static tg_cuda_pool_stats pool_stats;

static int size_class(size_t n, size_t *rounded) {
    int c = 0;
    size_t s = 256;
    while (s < n && c < NCLASS - 1) {
        s <<= 1;
        c++;
    }
    *rounded = s;
    return c;
}

static block *pool_get(size_t n) {
    size_t sz;
    int c = size_class(n ? n : 1, &sz);
    pthread_mutex_lock(&dev.lock);
    block *b = free_list[c];
    if (b) {
        free_list[c] = b->next;
        pool_stats.reuses++;
        pool_stats.bytes_in_use += b->size;
    }
    pthread_mutex_unlock(&dev.lock);
    if (b) goto got;
    /* The pool's bookkeeping outlives every function and array: it uses
     * the C allocator, not tg's hook (which counts what tg still holds). */
    b = calloc(1, sizeof *b);
    if (!b) return NULL;
    if (cudaMalloc(&b->ptr, sz) != cudaSuccess) {
        /* Give the cached blocks back and try once more. */
        cudaGetLastError();
        tg_cuda_pool_trim();
        if (cudaMalloc(&b->ptr, sz) != cudaSuccess) {
            cudaGetLastError();
            free(b);
            return NULL;
        }
    }
    b->size = sz;
    pthread_mutex_lock(&dev.lock);
    pool_stats.mallocs++;
    pool_stats.bytes_held += sz;
    pool_stats.bytes_in_use += sz;
    pthread_mutex_unlock(&dev.lock);
got:
    pthread_mutex_lock(&dev.lock);
    if (pool_stats.bytes_in_use > pool_stats.peak_in_use) pool_stats.peak_in_use = pool_stats.bytes_in_use;
    pthread_mutex_unlock(&dev.lock);
    return b;
}

static void pool_put(block *b) {
    size_t sz;
    int c = size_class(b->size, &sz);
    pthread_mutex_lock(&dev.lock);
    b->next = free_list[c];
    free_list[c] = b;
    pool_stats.bytes_in_use -= b->size;
    pthread_mutex_unlock(&dev.lock);
}

void tg_cuda_pool_trim(void) {
    if (!dev.ok) return;
    cudaDeviceSynchronize();
    pthread_mutex_lock(&dev.lock);
    for (int c = 0; c < NCLASS; c++) {
        while (free_list[c]) {
            block *b = free_list[c];
            free_list[c] = b->next;
            cudaFree(b->ptr);
            pool_stats.bytes_held -= b->size;
            pool_stats.frees++;
            free(b);
        }
    }
    pthread_mutex_unlock(&dev.lock);
}

void tg_cuda_pool_get_stats(tg_cuda_pool_stats *st) {
    pthread_mutex_lock(&dev.lock);
    *st = pool_stats;
    pthread_mutex_unlock(&dev.lock);
}

static void buffer_release(tg_buffer *buf) { pool_put(buf->release_ud); }

static bool cu_is_device(const tg_array *a) { return a && a->buf && a->buf->release == buffer_release; }

/* A C-contiguous device array; contents undefined. */
static tg_array *dev_empty(tg_dtype dt, int ndim, const int64_t *shape, tg_ctx *ctx) {
    int64_t n = tg_shape_size(ndim, shape);
    if (n < 0) {
        tg_errorf(ctx, TG_ENOMEM, "array too large");
        return NULL;
    }
    size_t nbytes = (size_t)n * tg_isize(dt);
    tg_array *a = tg_calloc(1, sizeof *a);
    tg_buffer *buf = tg_calloc(1, sizeof *buf);
    block *b = (a && buf) ? pool_get(nbytes) : NULL;
    if (!b) {
        tg_free(a);
        tg_free(buf);
        tg_errorf(ctx, TG_ENOMEM, "out of device memory (%zu bytes)", nbytes);
        return NULL;
    }
    atomic_init(&buf->refcount, 1);
    buf->data = b->ptr;
    buf->nbytes = nbytes;
    buf->release = buffer_release;
    buf->release_ud = b;
    atomic_init(&a->refcount, 1);
    a->dtype = dt;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) a->shape[i] = shape[i];
    tg_strides_contiguous(dt, ndim, shape, a->strides);
    a->data = b->ptr;
    a->buf = buf;
    return a;
}

/* The device form of tg_array_prepare: reuse *slot when it is a device
 * array nobody else holds and its block is big enough. */
static int dev_prepare(tg_array **slot, tg_dtype dt, int ndim, const int64_t *shape, tg_ctx *ctx) {
    tg_array *o = *slot;
    int64_t n = tg_shape_size(ndim, shape);
    if (o && cu_is_device(o) && tg_array_is_exclusive(o) && n >= 0 &&
        (size_t)n * tg_isize(dt) <= ((block *)o->buf->release_ud)->size) {
        o->dtype = dt;
        o->ndim = ndim;
        for (int i = 0; i < ndim; i++) o->shape[i] = shape[i];
        tg_strides_contiguous(dt, ndim, shape, o->strides);
        o->data = o->buf->data;
        o->buf->nbytes = (size_t)n * tg_isize(dt);
        return TG_OK;
    }
    tg_array_free(o);
    *slot = dev_empty(dt, ndim, shape, ctx);
    return *slot ? TG_OK : (ctx ? ctx->status : TG_ENOMEM);
}

/* ---- copies ---- */

/* Uploads from pageable memory: cudaMemcpyAsync stages them through the
 * driver's own pinned buffers, one thread copying, at about 6 GB/s on an
 * H200 (VGG's batch of 38.5 MB: 6 ms a step, where PyTorch's copy took
 * 4.5). An upload of STAGE_MIN bytes or more goes instead through two
 * pinned buffers of STAGE_BYTES, taken in turn: the host copies a piece
 * into one (on the OpenMP threads when the piece is large) while the DMA
 * engine sends the previous piece from the other, and a buffer is filled
 * again only after the event recorded behind its last copy. The host
 * array may go as soon as the call returns, as before. The buffers are
 * allocated at the first such upload and kept for the process; when
 * that allocation fails, or with TG_CUDA_STAGING=0, uploads are the
 * plain pageable copy. One upload at a time uses them (the lock). */
enum { STAGE_BYTES = 8 << 20, STAGE_MIN = 1 << 20, STAGE_PAR = 2 << 20 };
static struct {
    pthread_mutex_t lock;
    bool tried, ok;
    char *buf[2];
    cudaEvent_t done[2];
} stage = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The buffers and their events, once; false: use the plain copy. Under
 * stage.lock. */
static bool stage_ready(void) {
    if (stage.tried) return stage.ok;
    stage.tried = true;
    const char *env = getenv("TG_CUDA_STAGING");
    if (env && !strcmp(env, "0")) return false;
    char *b = NULL;
    if (cudaHostAlloc((void **)&b, 2 * (size_t)STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError(); /* (clear it: the plain copy follows) */
        return false;
    }
    if (cudaEventCreateWithFlags(&stage.done[0], cudaEventDisableTiming) != cudaSuccess) {
        cudaFreeHost(b);
        return false;
    }
    if (cudaEventCreateWithFlags(&stage.done[1], cudaEventDisableTiming) != cudaSuccess) {
        cudaEventDestroy(stage.done[0]);
        cudaFreeHost(b);
        return false;
    }
    stage.buf[0] = b;
    stage.buf[1] = b + STAGE_BYTES;
    stage.ok = true;
    return true;
}

/* memcpy, in as many pieces as there are OpenMP threads when n is large
 * and no parallel region is running. */
static void copy_par(char *dst, const char *src, size_t n) {
    int nt = n >= STAGE_PAR && !omp_in_parallel() ? omp_get_max_threads() : 1;
    if (nt > 8) nt = 8;
    if (nt <= 1) {
        memcpy(dst, src, n);
        return;
    }
    size_t step = (n / (size_t)nt + 63) & ~(size_t)63;
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (int i = 0; i < nt; i++) {
        size_t at = (size_t)i * step < n ? (size_t)i * step : n;
        size_t end = at + step < n ? at + step : n;
        memcpy(dst + at, src + at, end - at);
    }
}

/* Copy n bytes of host memory to dst on the transfer stream through the
 * pinned buffers. 1: they are not to be had (the caller copies plainly);
 * else TG_OK or an error. */
static int staged_upload(char *dst, const char *src, size_t n, tg_ctx *ctx) {
    pthread_mutex_lock(&stage.lock);
    if (!stage_ready()) {
        pthread_mutex_unlock(&stage.lock);
        return 1;
    }
    int rc = TG_OK, k = 0;
    for (size_t at = 0; at < n && !rc; at += STAGE_BYTES, k ^= 1) {
        size_t len = n - at < STAGE_BYTES ? n - at : STAGE_BYTES;
        /* (an event never recorded is complete) */
        rc = cu_check(cudaEventSynchronize(stage.done[k]), ctx);
        if (rc) break;
        copy_par(stage.buf[k], src + at, len);
        rc = cu_check(cudaMemcpyAsync(dst + at, stage.buf[k], len, cudaMemcpyHostToDevice, dev.transfer), ctx);
        if (!rc) rc = cu_check(cudaEventRecord(stage.done[k], dev.transfer), ctx);
    }
    pthread_mutex_unlock(&stage.lock);
    return rc;
}

static int cu_to_device(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (!cu_available(NULL)) return tg_errorf(ctx, TG_ERUNTIME, "no CUDA device");
    if (cu_is_device(src)) {
        tg_array_free(*out);
        *out = tg_array_ref((tg_array *)src);
        return TG_OK;
    }
    tg_array *tmp = NULL;
    const tg_array *h = src;
    if (!tg_array_is_contiguous(src)) {
        if (!(tmp = tg_array_copy(src, src->dtype))) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        h = tmp;
    }
    int rc = dev_prepare(out, src->dtype, src->ndim, src->shape, ctx);
    size_t nbytes = (size_t)tg_array_size_inline(src) * tg_isize(src->dtype);
    if (!rc && nbytes) {
        /* The block may have been freed by a kernel still queued on the
         * compute stream: order the copy after it. The copy from pageable
         * memory returns once the source has been staged, so the host
         * array may go right after. */
        rc = cu_check(cudaEventRecord(dev.ev_compute, dev.compute), ctx);
        if (!rc) rc = cu_check(cudaStreamWaitEvent(dev.transfer, dev.ev_compute, 0), ctx);
        /* (1: not staged, the plain copy) */
        if (!rc) rc = nbytes >= STAGE_MIN ? staged_upload((*out)->data, h->data, nbytes, ctx) : 1;
        if (rc == 1)
            rc = cu_check(cudaMemcpyAsync((*out)->data, h->data, nbytes, cudaMemcpyHostToDevice, dev.transfer), ctx);
        if (!rc) rc = cu_check(cudaEventRecord(dev.ev_transfer, dev.transfer), ctx);
        if (!rc) rc = cu_check(cudaStreamWaitEvent(dev.compute, dev.ev_transfer, 0), ctx);
    }
    tg_array_free(tmp);
    return rc;
}

static int make_contiguous(const tg_array *src, tg_array **dst, tg_ctx *ctx);

static int cu_to_host(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (!cu_is_device(src)) {
        tg_array_free(*out);
        *out = tg_array_ref((tg_array *)src);
        return TG_OK;
    }
    tg_array *c = NULL;
    int rc = make_contiguous(src, &c, ctx);
    if (rc) return rc;
    rc = tg_array_prepare(out, src->dtype, src->ndim, src->shape, ctx);
    size_t nbytes = (size_t)tg_array_size_inline(src) * tg_isize(src->dtype);
    if (!rc && nbytes) {
        rc = cu_check(cudaEventRecord(dev.ev_compute, dev.compute), ctx);
        if (!rc) rc = cu_check(cudaStreamWaitEvent(dev.transfer, dev.ev_compute, 0), ctx);
        if (!rc) rc = cu_check(cudaMemcpyAsync((*out)->data, c->data, nbytes, cudaMemcpyDeviceToHost, dev.transfer), ctx);
        /* The value is needed on the host now: the one synchronisation. */
        if (!rc) rc = cu_check(cudaStreamSynchronize(dev.transfer), ctx);
    }
    tg_array_free(c);
    return rc;
}

static int cu_copy(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (!tg_array_is_contiguous(src)) return make_contiguous(src, out, ctx);
    int rc = dev_prepare(out, src->dtype, src->ndim, src->shape, ctx);
    size_t nbytes = (size_t)tg_array_size_inline(src) * tg_isize(src->dtype);
    /* On the compute stream: after the kernel that made src, before any
     * that reuses the block. */
    if (!rc && nbytes)
        rc = cu_check(cudaMemcpyAsync((*out)->data, src->data, nbytes, cudaMemcpyDeviceToDevice, dev.compute), ctx);
    return rc;
}

tg_array *tg_cuda_upload(const tg_array *a, tg_ctx *ctx) {
    tg_array *o = NULL;
    if (cu_to_device(a, &o, ctx)) {
        tg_array_free(o);
        return NULL;
    }
    return o;
}

tg_array *tg_cuda_download(const tg_array *a, tg_ctx *ctx) {
    tg_array *o = NULL;
    if (cu_to_host(a, &o, ctx)) {
        tg_array_free(o);
        return NULL;
    }
    return o;
}

/* ---- messages: the CPU kernels' words, so that an error reads the same
 * on either device ---- */

static void add_shape(tg_str *s, int n, const int64_t *sh) {
    tg_str_addf(s, "(");
    for (int i = 0; i < n; i++) tg_str_addf(s, "%s%lld", i ? ", " : "", (long long)sh[i]);
    tg_str_addf(s, n == 1 ? ",)" : ")");
}

/* ---- elementwise ---- */

/* The kernels' dtype codes (TG_CU_DT_*): float16 is stored as half and
 * computed in float; -1 for a dtype the kernels do not take. */
static int dt_code(tg_dtype dt) {
    return dt == TG_FLOAT64 ? TG_CU_DT_F64 : dt == TG_FLOAT32 ? TG_CU_DT_F32 : dt == TG_FLOAT16 ? TG_CU_DT_F16 : -1;
}

static int launch_check(int e, tg_ctx *ctx) { return e ? cu_check((cudaError_t)e, ctx) : TG_OK; }

/* A C-contiguous device copy of src (or src itself when it already is). */
static int make_contiguous(const tg_array *src, tg_array **dst, tg_ctx *ctx) {
    if (tg_array_is_contiguous(src)) {
        *dst = tg_array_ref((tg_array *)src);
        return TG_OK;
    }
    const size_t isz = tg_isize(src->dtype);
    if (isz != 2 && isz != 4 && isz != 8)
        return tg_errorf(ctx, TG_EINVAL, "CUDA: cannot copy a strided %s array", tg_dtype_name(src->dtype));
    int rc = dev_prepare(dst, src->dtype, src->ndim, src->shape, ctx);
    if (rc) return rc;
    tg_cu_ew p = {.op = TG_CU_IDENTITY, .nin = 1, .ndim = src->ndim, .f64 = isz == 8, .f16 = isz == 2};
    p.n = tg_array_size_inline(src);
    int64_t e = (int64_t)tg_isize(src->dtype);
    for (int d = 0; d < src->ndim; d++) {
        p.shape[d] = src->shape[d];
        p.strides[0][d] = src->shape[d] == 1 ? 0 : src->strides[d] / e;
    }
    /* A bit copy: 4- and 8-byte elements move as float/double, 2-byte
     * ones as such. */
    void *in[1] = {src->data};
    return launch_check(tg_cu_elemwise(&p, (*dst)->data, in, dev.compute), ctx);
}

typedef struct ew_entry {
    const char *name;
    int code;
} ew_entry;

static const ew_entry ew_table[] = {
    {"neg", TG_CU_NEG},         {"abs", TG_CU_ABS},           {"exp", TG_CU_EXP},
    {"log", TG_CU_LOG},         {"tanh", TG_CU_TANH},         {"sigmoid", TG_CU_SIGMOID},
    {"relu", TG_CU_RELU},       {"sqr", TG_CU_SQR},           {"sqrt", TG_CU_SQRT},
    {"identity", TG_CU_IDENTITY}, {"reciprocal", TG_CU_RECIPROCAL}, {"softplus", TG_CU_SOFTPLUS},
    {"log1p", TG_CU_LOG1P},     {"expm1", TG_CU_EXPM1},       {"add", TG_CU_ADD},
    {"sub", TG_CU_SUB},         {"mul", TG_CU_MUL},           {"true_div", TG_CU_DIV},
    {"maximum", TG_CU_MAXIMUM}, {"minimum", TG_CU_MINIMUM},   {"pow", TG_CU_POW},
    {"eq", TG_CU_EQ},           {"neq", TG_CU_NEQ},           {"lt", TG_CU_LT},
    {"le", TG_CU_LE},           {"gt", TG_CU_GT},             {"ge", TG_CU_GE},
};

static int ew_code(const char *name) {
    for (size_t i = 0; i < sizeof ew_table / sizeof ew_table[0]; i++)
        if (strcmp(ew_table[i].name, name) == 0) return ew_table[i].code;
    return -1;
}

static int k_elemwise(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    int nd[TG_CU_MAXIN], bad;
    const int64_t *shapes[TG_CU_MAXIN];
    int64_t shape[TG_MAX_NDIM];
    int ondim;
    for (int k = 0; k < n->nin; k++) {
        nd[k] = in[k]->ndim;
        shapes[k] = in[k]->shape;
    }
    if (tg_broadcast_shapes(n->nin, nd, shapes, &ondim, shape, &bad))
        return tg_broadcast_error((const tg_array *const *)in, n->nin, ctx);
    const tg_dtype od = n->outputs[0]->type.dtype;
    int rc = dev_prepare(&out[0], od, ondim, shape, ctx);
    if (rc) return rc;
    tg_cu_ew p = {.op = ew_code(n->op->name), .nin = n->nin, .ndim = ondim,
                  .f64 = in[0]->dtype == TG_FLOAT64, .out_bool = od == TG_BOOL, .flat = 1,
                  .f16 = in[0]->dtype == TG_FLOAT16};
    p.n = tg_shape_size(ondim, shape);
    const int64_t e = (int64_t)tg_isize(in[0]->dtype);
    void *ptr[TG_CU_MAXIN];
    int64_t strides[TG_CU_MAXIN][TG_MAX_NDIM];
    for (int k = 0; k < n->nin; k++) {
        const tg_array *a = in[k];
        int off = ondim - a->ndim;
        if (a->ndim != ondim || !tg_shape_equal(ondim, a->shape, shape) || !tg_array_is_contiguous(a)) p.flat = 0;
        for (int d = 0; d < ondim; d++) {
            int ad = d - off;
            strides[k][d] = ad < 0 || a->shape[ad] == 1 ? 0 : a->strides[ad] / e;
        }
        ptr[k] = a->data;
    }
    /* The broadcast index costs a division per axis and element: axes of
     * length 1 dropped, and an axis merged into the one outside it when
     * every input steps through both as through one (a bias broadcast
     * over (N, C, H, W) becomes (N, C, H*W)). */
    p.ndim = 0;
    for (int d = 0; d < ondim; d++) {
        if (shape[d] == 1) continue;
        int j = p.ndim;
        bool merge = j > 0;
        for (int k = 0; k < n->nin && merge; k++) merge = p.strides[k][j - 1] == shape[d] * strides[k][d];
        if (merge) {
            p.shape[j - 1] *= shape[d];
            for (int k = 0; k < n->nin; k++) p.strides[k][j - 1] = strides[k][d];
            continue;
        }
        p.shape[j] = shape[d];
        for (int k = 0; k < n->nin; k++) p.strides[k][j] = strides[k][d];
        p.ndim++;
    }
    return launch_check(tg_cu_elemwise(&p, out[0]->data, ptr, dev.compute), ctx);
}

/* ---- reductions ---- */

/* How a reduction is launched (tg_cu_red's col, nsplit, chunk): the
 * axes merged where they are contiguous with each other, then one block
 * per output when the reduced elements lie side by side, else one thread
 * per output; an output's reduction is cut into pieces when there are
 * too few outputs to fill the GPU (8 blocks, or 2048 threads, per
 * multiprocessor), each piece at least 4096 elements (row) or 32 (col). */
static void red_plan(tg_cu_red *p, const tg_array *x, uint32_t mask) {
    const int64_t e = (int64_t)tg_isize(x->dtype);
    /* Axes of length 1 dropped; a run of axes of one kind merged when
     * each outer stride is the inner length times the inner stride. */
    int64_t sh[TG_MAX_NDIM], st[TG_MAX_NDIM];
    bool red[TG_MAX_NDIM];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        bool r = mask >> d & 1;
        int64_t stride = x->strides[d] / e;
        if (n && red[n - 1] == r && st[n - 1] == x->shape[d] * stride) {
            sh[n - 1] *= x->shape[d];
            st[n - 1] = stride;
            continue;
        }
        sh[n] = x->shape[d];
        st[n] = stride;
        red[n++] = r;
    }
    p->nkept = p->nred = 0;
    for (int d = 0; d < n; d++) {
        if (red[d]) {
            p->rshape[p->nred] = sh[d];
            p->rstride[p->nred++] = st[d];
        } else {
            p->kshape[p->nkept] = sh[d];
            p->kstride[p->nkept++] = st[d];
        }
    }
    const int64_t sms = tg_cu_sm_count();
    const bool inner_red = p->nred && p->rstride[p->nred - 1] == 1;
    p->col = !inner_red && p->nkept && p->kstride[p->nkept - 1] == 1;
    int64_t want = p->col ? (sms * 2048 + p->nout - 1) / p->nout : (sms * 8 + p->nout - 1) / p->nout;
    int64_t most = p->nr / (p->col ? 32 : 4096);
    p->nsplit = want < most ? want : most;
    if (p->nsplit < 2) p->nsplit = 1;
    p->chunk = p->nsplit > 1 ? (p->nr + p->nsplit - 1) / p->nsplit : p->nr;
    if (p->nsplit > 1) p->nsplit = (p->nr + p->chunk - 1) / p->chunk; /* no empty piece */
}

/* Reduce the axes of x in `mask` into a C-contiguous output of shape
 * (ndim, shape) whose element count is the product of the kept axes. */
static int reduce_into(int op, const tg_array *x, uint32_t mask, int ondim, const int64_t *oshape, tg_array **out,
                       tg_ctx *ctx) {
    int rc = dev_prepare(out, x->dtype, ondim, oshape, ctx);
    if (rc) return rc;
    tg_cu_red p = {.op = op, .f64 = x->dtype == TG_FLOAT64, .nout = 1, .nr = 1, .f16 = x->dtype == TG_FLOAT16};
    for (int d = 0; d < x->ndim; d++) {
        if (mask >> d & 1)
            p.nr *= x->shape[d];
        else
            p.nout *= x->shape[d];
    }
    if (p.nout != tg_array_size_inline(*out))
        return tg_errorf(ctx, TG_ESHAPE, "CUDA reduction: output size mismatch");
    if (p.nr == 0 && (op == TG_CU_MAX || op == TG_CU_MIN))
        return tg_errorf(ctx, TG_ERUNTIME, "zero-size array to reduction operation %s which has no identity",
                         op == TG_CU_MAX ? "max" : "min");
    if (p.nout == 0) return TG_OK;
    red_plan(&p, x, mask);
    /* The partials: from the pool, given back once queued (the next user
     * of the block is ordered after this work on the stream). */
    tg_array *part = NULL;
    if (p.nsplit > 1) {
        int64_t np = p.nout * p.nsplit;
        if (!(part = tg_cuda_empty(TG_FLOAT64, 1, &np, ctx))) return ctx ? ctx->status : TG_ENOMEM;
    }
    rc = launch_check(tg_cu_reduce(&p, (*out)->data, part ? part->data : NULL, x->data, dev.compute), ctx);
    tg_array_free(part);
    return rc;
}

static int red_code(const char *name) {
    return !strcmp(name, "sum") ? TG_CU_SUM : !strcmp(name, "max") ? TG_CU_MAX : !strcmp(name, "min") ? TG_CU_MIN
         : !strcmp(name, "prod") ? TG_CU_PROD : !strcmp(name, "mean") ? TG_CU_MEAN : -1;
}

static int k_reduce(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *x = in[0];
    uint32_t mask = n->a.axis_null ? (x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0) : n->a.axis_mask;
    int64_t oshape[TG_MAX_NDIM];
    int ond = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!(mask >> d & 1))
            oshape[ond++] = x->shape[d];
        else if (n->a.keepdims)
            oshape[ond++] = 1;
    }
    return reduce_into(red_code(n->op->name), x, mask, ond, oshape, out, ctx);
}

static int k_sum_to(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *g = in[0], *x = in[1];
    uint32_t mask;
    int rc = tg_sum_to_mask(g, x, &mask, ctx);
    if (rc) return rc;
    return reduce_into(TG_CU_SUM, g, mask, x->ndim, x->shape, out, ctx);
}

/* ---- nn ---- */

static int k_softmax(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    tg_array *x = NULL;
    int rc = make_contiguous(in[0], &x, ctx);
    if (rc) return rc;
    int64_t len = x->ndim ? x->shape[x->ndim - 1] : 1, size = tg_array_size_inline(x);
    if (!(rc = dev_prepare(&out[0], x->dtype, x->ndim, x->shape, ctx)))
        rc = launch_check(tg_cu_softmax(dt_code(x->dtype), strcmp(n->op->name, "log_softmax") == 0,
                                        len ? size / len : 0, len, out[0]->data, x->data, dev.compute),
                          ctx);
    tg_array_free(x);
    return rc;
}

static int k_xent(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    tg_array *p = NULL, *t = NULL;
    int rc;
    if (in[0]->ndim != in[1]->ndim || !tg_shape_equal(in[0]->ndim, in[0]->shape, in[1]->shape)) {
        tg_str s = {0};
        for (int d = 0; d < in[0]->ndim; d++) tg_str_addf(&s, "%s%lld", d ? ", " : "", (long long)in[0]->shape[d]);
        tg_str_addf(&s, ") and targets (");
        for (int d = 0; d < in[1]->ndim; d++) tg_str_addf(&s, "%s%lld", d ? ", " : "", (long long)in[1]->shape[d]);
        rc = tg_errorf(ctx, TG_ESHAPE, "probabilities (%s) do not match", s.s ? s.s : "");
        tg_str_free(&s);
        return rc;
    }
    if ((rc = make_contiguous(in[0], &p, ctx)) || (rc = make_contiguous(in[1], &t, ctx))) goto done;
    int nl = p->ndim - 1;
    int64_t len = p->shape[nl], rows = 1;
    for (int d = 0; d < nl; d++) rows *= p->shape[d];
    if (!(rc = dev_prepare(&out[0], p->dtype, nl, p->shape, ctx)))
        rc = launch_check(tg_cu_xent(p->dtype == TG_FLOAT64, rows, len, out[0]->data, p->data, t->data, dev.compute),
                          ctx);
done:
    tg_array_free(p);
    tg_array_free(t);
    return rc;
}

static int k_like(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_dtype od = n->outputs[0]->type.dtype;
    int rc = dev_prepare(&out[0], od, in[0]->ndim, in[0]->shape, ctx);
    if (rc) return rc;
    double v = strcmp(n->op->name, "ones_like") == 0 ? 1.0 : 0.0;
    return launch_check(tg_cu_fill(dt_code(od), tg_array_size_inline(in[0]), v, out[0]->data, dev.compute), ctx);
}

/* ---- products (cuBLAS) ---- */

/* How cuBLAS (column-major) reads a row-major (rows, cols) matrix view:
 * unit-stride rows are the column-major transpose (op N on the swapped
 * product), unit-stride columns op T. */
static bool gemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t e, cublasOperation_t *op,
                        int64_t *ld) {
    if ((cols <= 1 || cs == e) && (rows <= 1 || (rs % e == 0 && rs / e >= cols))) {
        *op = CUBLAS_OP_N;
        *ld = rows <= 1 ? (cols > 1 ? cols : 1) : rs / e;
        if (*ld < cols) *ld = cols > 1 ? cols : 1;
        return true;
    }
    if ((rows <= 1 || rs == e) && (cols <= 1 || (cs % e == 0 && cs / e >= rows))) {
        *op = CUBLAS_OP_T;
        *ld = cols <= 1 ? (rows > 1 ? rows : 1) : cs / e;
        if (*ld < rows) *ld = rows > 1 ? rows : 1;
        return true;
    }
    return false;
}

/* C (M, N, C-contiguous) = alpha * A (M, K) B (K, N) + beta * C; A and B
 * given as device pointers with byte strides. */
static int gemm_dev(tg_dtype dt, int64_t M, int64_t N, int64_t K, const char *A, int64_t ars, int64_t acs,
                    const char *B, int64_t brs, int64_t bcs, double alpha, double beta, char *C, tg_ctx *ctx) {
    const int64_t e = (int64_t)tg_isize(dt);
    cublasOperation_t opa, opb;
    int64_t lda, ldb;
    if (M == 0 || N == 0) return TG_OK;
    if (K == 0) {
        return beta == 0 ? cu_check(cudaMemsetAsync(C, 0, (size_t)(M * N * e), dev.compute), ctx)
                         : tg_errorf(ctx, TG_EINVAL, "CUDA gemm: empty product with beta != 0");
    }
    if (!gemm_layout(M, K, ars, acs, e, &opa, &lda) || !gemm_layout(K, N, brs, bcs, e, &opb, &ldb))
        return tg_errorf(ctx, TG_EINVAL, "CUDA gemm: operand layout not supported");
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX)
        return tg_errorf(ctx, TG_ESHAPE, "a dimension of the product exceeds cuBLAS's int range");
    /* Row-major C = A B is column-major C^T = B^T A^T. */
    cublasStatus_t s;
    if (dt == TG_FLOAT64)
        s = blas.dgemm(dev.blas, opb, opa, (int)N, (int)M, (int)K, &alpha, (const double *)B, (int)ldb,
                       (const double *)A, (int)lda, &beta, (double *)C, (int)N);
    else {
        float fa = (float)alpha, fb = (float)beta;
        s = blas.sgemm(dev.blas, opb, opa, (int)N, (int)M, (int)K, &fa, (const float *)B, (int)ldb,
                       (const float *)A, (int)lda, &fb, (float *)C, (int)N);
    }
    return s == CUBLAS_STATUS_SUCCESS ? TG_OK : tg_errorf(ctx, TG_ERUNTIME, "cuBLAS gemm failed (status %d)", (int)s);
}

/* As a (rows, cols) matrix: a vector is a row (first operand) or a column
 * (second operand). */
static void as_matrix(const tg_array *a, bool first, int64_t *r, int64_t *c, int64_t *rs, int64_t *cs) {
    int64_t e = (int64_t)tg_isize(a->dtype);
    if (a->ndim == 2) {
        *r = a->shape[0], *c = a->shape[1], *rs = a->strides[0], *cs = a->strides[1];
    } else if (first) {
        *r = 1, *c = a->shape[0], *rs = a->shape[0] * e, *cs = a->strides[0];
    } else {
        *r = a->shape[0], *c = 1, *rs = a->strides[0], *cs = e;
    }
}

/* The CPU kernels' words for operands in[i], in[i + 1] whose inner
 * lengths differ. */
static int not_aligned(tg_ctx *ctx, int i, const tg_array *a, const tg_array *b, int64_t ka, int dima, int64_t kb) {
    tg_str s = {0};
    tg_str_addf(&s, "inputs[%d] and inputs[%d]: shapes ", i, i + 1);
    add_shape(&s, a->ndim, a->shape);
    tg_str_addf(&s, " and ");
    add_shape(&s, b->ndim, b->shape);
    int rc = tg_errorf(ctx, TG_ESHAPE, "%s not aligned: %lld (dim %d) != %lld (dim 0)", s.s ? s.s : "",
                       (long long)ka, dima, (long long)kb);
    tg_str_free(&s);
    return rc;
}

static int k_dot(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    /* Views keep their strides: a transposed operand is read as such, and
     * only a layout cuBLAS cannot read is copied first. */
    tg_array *a = tg_array_ref(in[0]), *b = tg_array_ref(in[1]), *tmp = NULL;
    int64_t M, K, K2, N, ars, acs, brs, bcs, ld;
    cublasOperation_t op;
    int rc;
    as_matrix(a, true, &M, &K, &ars, &acs);
    as_matrix(b, false, &K2, &N, &brs, &bcs);
    if (K != K2) {
        rc = not_aligned(ctx, 0, a, b, K, a->ndim - 1, K2);
        goto done;
    }
    int64_t oshape[2];
    int ond = 0;
    if (a->ndim == 2) oshape[ond++] = M;
    if (b->ndim == 2) oshape[ond++] = N;
    if ((rc = dev_prepare(&out[0], n->outputs[0]->type.dtype, ond, oshape, ctx))) goto done;
    const int64_t e = (int64_t)tg_isize(a->dtype);
    if (!gemm_layout(M, K, ars, acs, e, &op, &ld)) {
        if ((rc = make_contiguous(a, &tmp, ctx))) goto done;
        tg_array_free(a);
        a = tmp;
        tmp = NULL;
        as_matrix(a, true, &M, &K, &ars, &acs);
    }
    if (!gemm_layout(K, N, brs, bcs, e, &op, &ld)) {
        if ((rc = make_contiguous(b, &tmp, ctx))) goto done;
        tg_array_free(b);
        b = tmp;
        tmp = NULL;
        as_matrix(b, false, &K2, &N, &brs, &bcs);
    }
    rc = gemm_dev(a->dtype, M, N, K, a->data, ars, acs, b->data, brs, bcs, 1.0, 0.0, out[0]->data, ctx);
done:
    tg_array_free(a);
    tg_array_free(b);
    return rc;
}

/* gemm, gemv, ger: alpha and beta are 0-d arrays the placement leaves
 * where they are (cu_host_inputs), normally host constants; one computed
 * on the device is read back (a synchronisation, as any host read). */
static int scalar_value(const tg_array *a, double *v, tg_ctx *ctx) {
    tg_array *h = NULL;
    const tg_array *s = a;
    if (cu_is_device(a)) {
        int rc = cu_to_host(a, &h, ctx);
        if (rc) {
            tg_array_free(h);
            return rc;
        }
        s = h;
    }
    *v = tg_load_f64(s->dtype, s->data);
    tg_array_free(h);
    return TG_OK;
}

/* out[0] starts as a copy of in[0] (gemm's z, ger's A), or is in[0]
 * itself when the node works in place and in[0] is ours to overwrite and
 * not read by the product: the CPU kernel's rule (ops/blas.c). */
static int dev_start_from(tg_node *n, tg_array *const *in, tg_array **out, bool copy, tg_ctx *ctx) {
    tg_array *src = in[0];
    bool inplace = n->inplace && n->inplace[0] == 0 && cu_is_device(src) && tg_array_is_exclusive(src) &&
                   tg_array_is_contiguous(src);
    for (int i = 1; inplace && i < n->nin; i++)
        if (in[i]->buf == src->buf) inplace = false;
    if (inplace) {
        tg_array_free(*out);
        *out = tg_array_ref(src);
        return TG_OK;
    }
    int rc = dev_prepare(out, src->dtype, src->ndim, src->shape, ctx);
    if (rc || !copy) return rc;
    tg_array *c = NULL;
    if ((rc = make_contiguous(src, &c, ctx))) return rc;
    size_t nbytes = (size_t)tg_array_size_inline(src) * tg_isize(src->dtype);
    if (nbytes)
        rc = cu_check(cudaMemcpyAsync((*out)->data, c->data, nbytes, cudaMemcpyDeviceToDevice, dev.compute), ctx);
    tg_array_free(c);
    return rc;
}

/* A device operand cuBLAS can read as a (rows, cols) matrix: itself, or a
 * C-contiguous copy (*tmp, the caller frees it). */
static int blas_operand(const tg_array *a, bool first, tg_array **tmp, const tg_array **use, tg_ctx *ctx) {
    int64_t r, c, rs, cs, ld;
    cublasOperation_t op;
    as_matrix(a, first, &r, &c, &rs, &cs);
    *use = a;
    if (gemm_layout(r, c, rs, cs, (int64_t)tg_isize(a->dtype), &op, &ld)) return TG_OK;
    int rc = make_contiguous(a, tmp, ctx);
    if (!rc) *use = *tmp;
    return rc;
}

/* C += alpha * (A @ B) for an alpha of +0 or -0, after the cuBLAS call
 * that skipped the product (as BLAS does): the product formed in a
 * scratch matrix, times alpha, added, so that 0 * inf and 0 * NaN are NaN
 * there, as on the CPU (blas.c) and as alpha*dot(x, y) + beta*z is
 * written. C is M by N, contiguous. */
static int dev_add_zero_product(tg_dtype dt, int64_t M, int64_t N, int64_t K, const char *A, int64_t ars,
                                int64_t acs, const char *B, int64_t brs, int64_t bcs, double alpha, char *C,
                                tg_ctx *ctx) {
    tg_array *t = NULL, *a = NULL;
    int rc = dev_prepare(&t, dt, 2, (int64_t[]){M, N}, ctx);
    if (!rc) rc = dev_prepare(&a, dt, 0, NULL, ctx);
    if (!rc) rc = gemm_dev(dt, M, N, K, A, ars, acs, B, brs, bcs, 1.0, 0.0, t->data, ctx);
    if (!rc) rc = launch_check(tg_cu_fill(dt_code(dt), 1, alpha, a->data, dev.compute), ctx);
    if (!rc) { /* t *= alpha (a broadcast), then C += t */
        tg_cu_ew p = {.op = TG_CU_MUL, .nin = 2, .ndim = 1, .f64 = dt == TG_FLOAT64, .n = M * N};
        p.shape[0] = M * N;
        p.strides[0][0] = 1;
        p.strides[1][0] = 0;
        void *mi[2] = {t->data, a->data};
        rc = launch_check(tg_cu_elemwise(&p, t->data, mi, dev.compute), ctx);
    }
    if (!rc) {
        tg_cu_ew p = {.op = TG_CU_ADD, .nin = 2, .ndim = 1, .f64 = dt == TG_FLOAT64, .flat = 1, .n = M * N};
        p.shape[0] = M * N;
        p.strides[0][0] = p.strides[1][0] = 1;
        void *ai[2] = {C, t->data};
        rc = launch_check(tg_cu_elemwise(&p, C, ai, dev.compute), ctx);
    }
    tg_array_free(t);
    tg_array_free(a);
    return rc;
}

static int k_blas(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const bool ger = !strcmp(n->op->name, "ger"), mm = !strcmp(n->op->name, "gemm");
    const tg_dtype dt = n->outputs[0]->type.dtype;
    double alpha, beta = 1.0;
    int rc = scalar_value(in[1], &alpha, ctx);
    if (!rc && !ger) rc = scalar_value(in[4], &beta, ctx);
    if (rc) return rc;
    tg_array *ta = NULL, *tb = NULL;
    const tg_array *A, *B; /* the product's operands */
    int64_t M, N, K, K2, ars, acs, brs, bcs;
    if (ger) { /* A + alpha x y^T: x as a column, y as a row */
        const tg_array *Z = in[0], *x = in[2], *y = in[3];
        if (Z->shape[0] != x->shape[0] || Z->shape[1] != y->shape[0])
            return tg_errorf(ctx, TG_ESHAPE, "ger: A is (%lld, %lld) but x and y have lengths %lld and %lld",
                             (long long)Z->shape[0], (long long)Z->shape[1], (long long)x->shape[0],
                             (long long)y->shape[0]);
        if ((rc = blas_operand(x, false, &ta, &A, ctx)) || (rc = blas_operand(y, true, &tb, &B, ctx))) goto done;
        as_matrix(A, false, &M, &K, &ars, &acs);
        as_matrix(B, true, &K2, &N, &brs, &bcs);
    } else { /* beta z + alpha dot(x, y) (gemm) or dot(A, x) (gemv) */
        const tg_array *Z = in[0], *a = in[2], *b = in[3];
        if (a->shape[1] != b->shape[0]) return not_aligned(ctx, 2, a, b, a->shape[1], 1, b->shape[0]);
        if (Z->shape[0] != a->shape[0] || (mm && Z->shape[1] != b->shape[1])) {
            tg_str s = {0};
            add_shape(&s, Z->ndim, Z->shape);
            tg_str_addf(&s, " but %s has ", mm ? "dot(x, y)" : "dot(A, x)");
            add_shape(&s, mm ? 2 : 1, (int64_t[]){a->shape[0], mm ? b->shape[1] : 1});
            rc = tg_errorf(ctx, TG_ESHAPE, "inputs[0] 'z' has shape %s", s.s ? s.s : "");
            tg_str_free(&s);
            return rc;
        }
        if ((rc = blas_operand(a, true, &ta, &A, ctx)) || (rc = blas_operand(b, false, &tb, &B, ctx))) goto done;
        as_matrix(A, true, &M, &K, &ars, &acs);
        as_matrix(B, false, &K2, &N, &brs, &bcs);
    }
    /* beta 0: z is not read (a NaN there does not leak into the result) */
    if ((rc = dev_start_from(n, in, out, ger || beta != 0.0, ctx))) goto done;
    if (K == 0 && beta != 0.0) { /* an empty product: beta z */
        const int64_t cnt = tg_array_size_inline(out[0]);
        cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
        if (cnt > INT32_MAX)
            rc = tg_errorf(ctx, TG_ESHAPE, "a dimension of the product exceeds cuBLAS's int range");
        else if (cnt && beta != 1.0 && dt == TG_FLOAT64)
            st = blas.dscal(dev.blas, (int)cnt, &beta, (double *)out[0]->data, 1);
        else if (cnt && beta != 1.0) {
            float fb = (float)beta;
            st = blas.sscal(dev.blas, (int)cnt, &fb, (float *)out[0]->data, 1);
        }
        if (!rc && st != CUBLAS_STATUS_SUCCESS)
            rc = tg_errorf(ctx, TG_ERUNTIME, "cuBLAS scal failed (status %d)", (int)st);
        goto done;
    }
    rc = gemm_dev(dt, M, N, K, A->data, ars, acs, B->data, brs, bcs, alpha, ger ? 1.0 : beta, out[0]->data, ctx);
    if (!rc && alpha == 0.0 && M > 0 && N > 0 && K > 0)
        rc = dev_add_zero_product(dt, M, N, K, A->data, ars, acs, B->data, brs, bcs, alpha, out[0]->data, ctx);
done:
    tg_array_free(ta);
    tg_array_free(tb);
    return rc;
}

/* ---- kernel selection ---- */

/* The CPU kernels of these ops only rewrite the array header (views):
 * they are right for device arrays too. */
static bool is_view_op(const char *name) { return !strcmp(name, "transpose") || !strcmp(name, "dimshuffle"); }

/* flatten and reshape: the CPU kernel gives a view of a contiguous input
 * (the header only, right for a device array too); any other input is
 * made contiguous on the device first. The new shape (reshape's second
 * input) is read on the host. Without this, a conv net's flatten sent
 * the last pooled activations to the host and back every step. */
static int k_reshape(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    if (tg_array_is_contiguous(in[0])) return n->op->run(n, in, out, ctx);
    tg_array *c = NULL;
    int rc = make_contiguous(in[0], &c, ctx);
    if (rc) return rc;
    tg_array *args[2] = {c, n->nin > 1 ? in[1] : NULL};
    rc = n->op->run(n, args, out, ctx);
    tg_array_free(c);
    return rc;
}

static tg_kernel_fn cu_kernel(const tg_node *n) {
    const char *name = n->op->name;
    /* composite: its body compiled by NVRTC (nvrtc.c), any number of
     * outputs; NULL keeps it on the CPU. */
    if (!strcmp(name, "composite")) return tg_nvrtc_kernel(n);
    tg_kernel_fn dnn = tg_cudnn_kernel(n); /* conv2d, pool2d, softmax: cudnn.c */
    if (dnn) return dnn;
    if (n->nout != 1) return NULL;
    const tg_type *ot = &n->outputs[0]->type;
    const tg_dtype dt = n->nin ? n->inputs[0]->type.dtype : ot->dtype;
    if (dt_code(dt) < 0) return NULL;
    if (is_view_op(name)) return n->op->run;
    if (!strcmp(name, "flatten") || !strcmp(name, "reshape")) return k_reshape;
    int code = ew_code(name);
    if (code >= 0) {
        if (n->nin > TG_CU_MAXIN || ot->ndim > TG_CU_MAXD) return NULL;
        if (code < TG_CU_UNARY_END ? n->nin != 1 : n->nin < 2) return NULL;
        if (code != TG_CU_ADD && code != TG_CU_MUL && code >= TG_CU_UNARY_END && n->nin != 2) return NULL;
        for (int k = 0; k < n->nin; k++)
            if (n->inputs[k]->type.dtype != dt) return NULL;
        if (code >= TG_CU_CMP_BEGIN ? ot->dtype != TG_BOOL : ot->dtype != dt) return NULL;
        return k_elemwise;
    }
    if (red_code(name) >= 0) return n->nin == 1 && ot->dtype == dt ? k_reduce : NULL;
    if (!strcmp(name, "sum_to")) return ot->dtype == dt ? k_sum_to : NULL;
    if (!strcmp(name, "zeros_like") || !strcmp(name, "ones_like")) return ot->dtype == dt ? k_like : NULL;
    if (!strcmp(name, "softmax") || !strcmp(name, "log_softmax")) {
        int nd = n->inputs[0]->type.ndim;
        int ax = n->a.axes[0] < 0 ? n->a.axes[0] + nd : n->a.axes[0];
        return nd >= 1 && ax == nd - 1 && ot->dtype == dt ? k_softmax : NULL;
    }
    /* float16 stops here: cross-entropy and the cuBLAS products have
     * float32/float64 kernels only. */
    if (dt == TG_FLOAT16) return NULL;
    if (!strcmp(name, "categorical_crossentropy"))
        return n->a.mode == 0 && n->inputs[1]->type.dtype == dt && ot->dtype == dt ? k_xent : NULL;
    if (!strcmp(name, "gemm") || !strcmp(name, "gemv") || !strcmp(name, "ger")) {
        const int arrays[3] = {0, 2, 3};
        for (int k = 0; k < 3; k++)
            if (n->inputs[arrays[k]]->type.dtype != dt) return NULL;
        return ot->dtype == dt ? k_blas : NULL;
    }
    if (!strcmp(name, "dot") || !strcmp(name, "matmul")) {
        int na = n->inputs[0]->type.ndim, nb = n->inputs[1]->type.ndim;
        if (na < 1 || na > 2 || nb < 1 || nb > 2 || n->inputs[1]->type.dtype != dt || ot->dtype != dt) return NULL;
        return k_dot;
    }
    return NULL;
}

static unsigned cu_host_inputs(const tg_node *n) {
    const char *name = n->op->name;
    /* sum_to reads only its second input's shape; alpha and beta of the
     * BLAS updates are scalars read on the host. */
    if (!strcmp(name, "sum_to") || !strcmp(name, "reshape")) return 2u;
    if (!strcmp(name, "gemm") || !strcmp(name, "gemv")) return 1u << 1 | 1u << 4;
    if (!strcmp(name, "ger")) return 1u << 1;
    if (!strcmp(name, "conv2d_grad_inputs") || !strcmp(name, "conv2d_grad_weights")) return 1u << 2; /* shp */
    return 0u;
}

static const tg_backend cuda_backend = {
    .name = "cuda",
    .available = cu_available,
    .kernel = cu_kernel,
    .host_inputs = cu_host_inputs,
    .to_device = cu_to_device,
    .to_host = cu_to_host,
    .is_device = cu_is_device,
    .tools = &tg_cuda_tools,
    .copy = cu_copy,
};

const tg_backend *tg_cuda_backend_get(void) { return &cuda_backend; }

tg_array *tg_cuda_empty(tg_dtype dt, int ndim, const int64_t *shape, tg_ctx *ctx) {
    return dev_empty(dt, ndim, shape, ctx);
}

int tg_cuda_prepare(tg_array **slot, tg_dtype dt, int ndim, const int64_t *shape, tg_ctx *ctx) {
    return dev_prepare(slot, dt, ndim, shape, ctx);
}

int tg_cuda_contiguous(const tg_array *a, tg_array **out, tg_ctx *ctx) { return make_contiguous(a, out, ctx); }
