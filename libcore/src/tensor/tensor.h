/* Private: the body of tg_array, allocation helpers and strided iteration.
 * Kernels include this. */
#ifndef TG_TENSOR_INTERNAL_H
#define TG_TENSOR_INTERNAL_H

#include <stdatomic.h>
#include <string.h>

#include "tg/array.h"
#include "core/core.h"

/* A reference-counted block of memory. data is 64-byte aligned when the
 * library allocated it. `release`, when set, frees foreign memory (a
 * memory-mapped file); otherwise data is freed with tg_free_aligned. */
typedef struct tg_buffer {
    atomic_long refcount;
    void *data;
    size_t nbytes;
    void (*release)(struct tg_buffer *b);
    void *release_ud;
} tg_buffer;

struct tg_array {
    atomic_long refcount;
    tg_dtype dtype;
    int ndim;
    int64_t shape[TG_MAX_NDIM];
    int64_t strides[TG_MAX_NDIM]; /* bytes */
    char *data;                   /* element 0, inside buf */
    tg_buffer *buf;
};

tg_buffer *tg_buffer_new(size_t nbytes);
void tg_buffer_unref(tg_buffer *b);

/* Intermediates whose buffer is at most this many bytes stay in their VM
 * slot between calls (reused without allocating); larger ones are freed
 * after their last reader, as Theano's VM with GC did, into the running
 * function's pool (below). In-place kernels only take over buffers larger
 * than this. */
#define TG_VM_KEEP_BYTES 4096

/* A function's pool of freed buffers (pool.c): while a call of the
 * function runs on a thread (tg_bufpool_enter .. tg_bufpool_leave), the
 * buffers of more than TG_VM_KEEP_BYTES that the thread frees are kept
 * here, and tg_buffer_new takes one of exactly the size it needs, so that
 * a function called again allocates (and page-faults) nothing. A take
 * that finds no buffer of its size first frees pooled buffers that this
 * call will not ask for again (as far as the last call tells), so that
 * dead buffers do not add to the call's peak. What sits unused through a
 * whole call is freed at its end; at most `budget` bytes (TG_POOL_MIB)
 * and TG_BUFPOOL_SLOTS buffers. Zero-initialised, it is off (budget 0). */
#define TG_BUFPOOL_SLOTS 64
/* The sizes a pool keeps counts for (a hash table; sizes past it count
 * as never asked for). */
#define TG_BUFPOOL_SIZES 256
typedef struct tg_bufpool_size {
    size_t size;       /* 0: an empty entry */
    uint32_t last, now; /* buffers of this size the last call asked for; this one so far */
} tg_bufpool_size;
typedef struct tg_bufpool {
    tg_buffer *bufs[TG_BUFPOOL_SLOTS]; /* oldest first */
    uint64_t when[TG_BUFPOOL_SLOTS];   /* the call each was pooled in */
    int n;
    size_t bytes, budget;
    uint64_t call;
    uint64_t hits, misses; /* buffers taken, and allocated for want of one */
    /* Bytes this call took from the pool or allocated for want of a
     * buffer, less what it put back: now, at most, and the largest one;
     * and what a miss lets live and pooled bytes grow to, from the last
     * call's (0: no bound yet). */
    size_t live, live_peak, largest, limit;
    int nsizes;            /* entries in use in sizes[] */
    tg_bufpool_size sizes[TG_BUFPOOL_SIZES];
} tg_bufpool;
/* An empty pool with the budget of the environment (TG_POOL_MIB). */
void tg_bufpool_init(tg_bufpool *p);
/* Make p the calling thread's pool; returns the one it replaces (a call
 * from a hook of another function's call), for tg_bufpool_leave. */
tg_bufpool *tg_bufpool_enter(tg_bufpool *p);
/* Restore prev, and free what sat in p through the whole call. */
void tg_bufpool_leave(tg_bufpool *p, tg_bufpool *prev);
void tg_bufpool_clear(tg_bufpool *p); /* free every pooled buffer */
void tg_bufpool_free(tg_bufpool *p);  /* the same, for a pool going away */
/* For tg_buffer_new and tg_buffer_unref: a pooled buffer of exactly
 * nbytes (refcount 1), or NULL; and keeping b (true) instead of freeing. */
tg_buffer *tg_bufpool_take(size_t nbytes);
bool tg_bufpool_put(tg_buffer *b);

/* An array of the given shape over a fresh uninitialised buffer. */
tg_array *tg_array_empty(tg_dtype dt, int ndim, const int64_t *shape);
/* A view header: same buffer as a (one more reference), given layout. */
tg_array *tg_array_view_raw(const tg_array *a, tg_dtype dt, int ndim,
                            const int64_t *shape, const int64_t *strides,
                            char *data);
void tg_strides_contiguous(tg_dtype dt, int ndim, const int64_t *shape,
                           int64_t *strides);
/* Product of the lengths; -1 on overflow past INT64_MAX/itemsize. */
int64_t tg_shape_size(int ndim, const int64_t *shape);

/* A window: a buffer header over `nbytes` bytes inside another buffer
 * (`base`, referenced), so that a kernel writes its result where it is
 * kept: scan puts a window over the row of its stacked output that a step
 * fills into the slot of the body's output, and the body's last kernel
 * writes that row through tg_array_prepare (ops/scan.c). Only while
 * `armed` does tg_array_prepare reuse a window; scan arms the one it
 * places for a step and disarms it after. */
typedef struct tg_window {
    tg_buffer *base;
    bool armed;
} tg_window;
void tg_window_release(tg_buffer *b);
/* A C-contiguous array of the given shape over a window at `data`
 * (inside base's buffer); NULL when out of memory. */
tg_array *tg_window_array(const tg_array *base, char *data, tg_dtype dt, int ndim,
                          const int64_t *shape);
static inline tg_window *tg_buffer_window(const tg_buffer *b) {
    return b->release == tg_window_release ? (tg_window *)b->release_ud : NULL;
}

/* Kernel output preparation. *slot may hold the array this output had on
 * the previous call: when nothing else references it (array and buffer
 * refcount 1) and its buffer is big enough, it is reshaped and reused, so
 * that a function called again does not allocate. Otherwise it is released
 * and a new C-contiguous array is made. The contents are uninitialised. */
int tg_array_prepare(tg_array **slot, tg_dtype dt, int ndim,
                     const int64_t *shape, tg_ctx *ctx);

/* True when a can be written in place (nobody else holds it or its
 * buffer). Acquire: what another thread did with the array before its
 * tg_array_free let go of it (reading it) comes before our writes. */
static inline bool tg_array_is_exclusive(const tg_array *a) {
    return atomic_load_explicit(&((tg_array *)a)->refcount,
                                memory_order_acquire) == 1 &&
           atomic_load_explicit(&a->buf->refcount, memory_order_acquire) == 1;
}

/* Hot-path helpers: inline forms of tg_dtype_size and a shape compare. */
static inline size_t tg_isize(tg_dtype dt) {
    static const unsigned char sz[TG_NDTYPES] = {
#define TG_ISIZE_(e, name, ctype, size, kind) size,
        TG_DTYPE_LIST(TG_ISIZE_)
#undef TG_ISIZE_
    };
    return sz[dt];
}

static inline bool tg_shape_equal(int nd, const int64_t *a, const int64_t *b) {
    for (int i = 0; i < nd; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static inline int64_t tg_array_size_inline(const tg_array *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
    return n;
}

/* Convert n elements between dtypes with strides (bytes). NumPy's unsafe
 * casting: float->int truncates toward zero, anything->bool is != 0. */
void tg_cast_strided(tg_dtype to, void *dst, int64_t dst_stride, tg_dtype from,
                     const void *src, int64_t src_stride, int64_t n);

/* Read/write one element as double or int64 (for small, cold paths). */
double tg_load_f64(tg_dtype dt, const void *p);
int64_t tg_load_i64(tg_dtype dt, const void *p);
/* An integer used as a length, index, count or offset: a uint64 past
 * 2^63 - 1 counts as 2^63 - 1 (too large for any array, as take's and
 * subtensor's indices), never as the negative int64 of its bits, which
 * reads as -1 where -1 means something (reshape's inferred length). */
int64_t tg_load_len(tg_dtype dt, const void *p);
void tg_store_f64(tg_dtype dt, void *p, double v);
void tg_store_i64(tg_dtype dt, void *p, int64_t v);

/* NumPy broadcasting of n shapes into out (ndim = max). Returns 0, or -1
 * when two lengths disagree (neither is 1); then *bad_dim is the output
 * axis. */
int tg_broadcast_shapes(int n, const int *ndims, const int64_t *const *shapes,
                        int *out_ndim, int64_t *out_shape, int *bad_dim);

/* Strided n-ary iteration: the shape is `ndim` long, each operand k has
 * strides[k][axis] (bytes, 0 for broadcast axes). The iterator merges
 * axes that are contiguous for every operand and calls
 * fn(n, ptrs, inner_strides, ud) on the innermost run. Up to
 * TG_ITER_MAX_OPS operands. Parallelised with OpenMP when the total size is
 * at least TG_PARALLEL_MIN elements and `parallel` is true. */
#define TG_ITER_MAX_OPS 8
#define TG_PARALLEL_MIN (1 << 16)

/* for (int64_t I = 0; I < N; I++) { BODY } on NTH threads (schedule
 * static), or in the calling thread with no team at all when NTH is 1 or
 * less. libgomp opens a team even for one thread, and closing it makes a
 * futex system call whether anyone waits or not (an `if` clause that is
 * false too): 1.3 us per region on the 2-core VM, more than the work of a
 * small node, paid by every kernel below TG_PARALLEL_MIN and by every
 * kernel under OMP_NUM_THREADS=1. BODY may call omp_get_thread_num() (0
 * when serial); it must hold no #pragma line (_Pragma is fine), and may
 * not leave the loop. */
#define TG_PAR_FOR(nth, I, N, ...)                                                  \
    do {                                                                            \
        const int tg_par_nth_ = (nth);                                              \
        const int64_t tg_par_n_ = (N);                                              \
        if (tg_par_nth_ > 1) {                                                      \
            _Pragma("omp parallel for schedule(static) num_threads(tg_par_nth_)")   \
            for (int64_t I = 0; I < tg_par_n_; I++) { __VA_ARGS__ }                 \
        } else {                                                                    \
            for (int64_t I = 0; I < tg_par_n_; I++) { __VA_ARGS__ }                 \
        }                                                                           \
    } while (0)
typedef void (*tg_inner_fn)(int64_t n, char **ptrs, const int64_t *strides,
                            void *ud);
void tg_iter_run(int nops, char **base, int ndim, const int64_t *shape,
                 const int64_t (*strides)[TG_MAX_NDIM], tg_inner_fn fn,
                 void *ud, bool parallel);

/* ---- .npy pieces that the .npz reader and writer share (npy.c) ---- */

typedef struct tg_npy_info {
    tg_dtype dt;
    bool swap, fortran;
    int ndim;
    int64_t shape[TG_MAX_NDIM];
    size_t data_off;
    int64_t nbytes;
} tg_npy_info;
/* From the first n bytes of a file of file_len bytes: where the header
 * starts (*hoff) and its length (*hlen). */
int tg_npy_parse_preamble(const unsigned char *b, size_t n, size_t file_len, const char *what,
                          size_t *hoff, size_t *hlen, tg_ctx *ctx);
/* The header dict h[0..len); the data, at data_off, must fit in file_len. */
int tg_npy_parse_header(const char *h, size_t len, size_t data_off, size_t file_len,
                        const char *what, tg_npy_info *info, tg_ctx *ctx);
/* The array the data is read into as stored (C order, or the transpose
 * of a Fortran-order array); NULL when out of memory. */
tg_array *tg_npy_raw_array(const tg_npy_info *h);
/* That array, filled, made the result (native byte order, bools 0/1, C
 * order). Consumes raw. */
tg_array *tg_npy_finish(tg_array *raw, const tg_npy_info *h, const char *what, tg_ctx *ctx);
/* Append the preamble and header NumPy writes for a (version 1.0,
 * little-endian, C order, padded to 64 bytes) to out: TG_OK or TG_ENOMEM. */
int tg_npy_header(const tg_array *a, tg_str *out);
/* Put n elements of sz bytes at p in the byte order that header states
 * (little-endian): nothing to do on a little-endian host. */
void tg_npy_to_le(void *p, int64_t n, size_t sz);

/* The address of element i (C order) of a, whatever its strides. */
const char *tg_array_elem_flat(const tg_array *a, int64_t i);

/* The values of a small array as one line (NumPy's repr of them), or
 * "(2, 3) of 0." for a larger one whose elements are all equal; false,
 * writing nothing, for any other (print.c). */
bool tg_array_brief(const tg_array *a, int64_t max_values, tg_str *out);

#endif
