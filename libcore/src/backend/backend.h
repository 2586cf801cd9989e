/* Private: the interface between the core and a device backend (CUDA).
 *
 * ggml's habit: the core sees a backend only through this small struct of
 * function pointers, so that the CPU build compiles without the CUDA
 * headers. tg_backend_cuda() returns NULL when the build has no CUDA
 * backend.
 *
 * Device arrays are ordinary tg_array headers whose buffer holds device
 * memory (its `release` returns the block to the backend's pool); shape,
 * strides and views work on them unchanged, but only the backend's kernels
 * may read their data. The placement pass (rewrite/place.c) guarantees
 * that every other kernel sees host arrays.
 *
 * Shared variables keep a device copy between calls (graph.h, tg_shared):
 * to_device makes it, to_host brings it back when the host asks, copy
 * duplicates an update value on the device.
 */
#ifndef TG_BACKEND_INTERNAL_H
#define TG_BACKEND_INTERNAL_H

#include "graph/graph.h"
#include "rewrite/rewrite.h"

typedef int (*tg_kernel_fn)(tg_node *n, tg_array *const *in, tg_array **out,
                            tg_ctx *ctx);

/* Statistics of a float device array, computed on the device for the NaN
 * guard (debug/nanguard.c): only this struct comes back to the host. Over
 * the finite elements: their count, min, max and sum (min and max are NaN
 * when there is none); `big` counts the finite ones with |x| > big. */
typedef struct tg_backend_stats {
    int64_t size, nan, pinf, ninf, big, finite;
    double min, max, sum;
} tg_backend_stats;

/* What the tools (tgprof, the NaN guard) ask of a device beyond running
 * kernels. Every entry may be NULL (the tools then fall back to the host
 * clock, or to host copies). */
typedef struct tg_backend_tools {
    /* Timing events (the profiler): created once and reused; record
     * queues one on the stream the kernels run on, without waiting;
     * elapsed waits for `end` to complete and gives the milliseconds
     * between the two. */
    int (*event_create)(void **ev, tg_ctx *ctx);
    void (*event_destroy)(void *ev);
    int (*event_record)(void *ev, tg_ctx *ctx);
    int (*event_elapsed)(void *start, void *end, double *ms, tg_ctx *ctx);
    /* Wait until the device has finished all queued work. */
    int (*sync)(tg_ctx *ctx);
    /* Statistics of float device array a (float16, 32 or 64, any
     * strides); big <= 0 or not finite counts nothing as big. */
    int (*stats)(const tg_array *a, double big, tg_backend_stats *st, tg_ctx *ctx);
} tg_backend_tools;

typedef struct tg_backend {
    const char *name;
    /* True when a device can be used. The first call initialises the
     * device (lazily: a binary built with CUDA pays nothing on a machine
     * without a GPU until someone asks for the device); when there is
     * none, *why says why, in a few words. */
    bool (*available)(const char **why);
    /* The device kernel for node n as it is typed now, or NULL when the
     * backend has none for it (an op, a dtype or an attribute it does not
     * handle). */
    tg_kernel_fn (*kernel)(const tg_node *n);
    /* For a node with a device kernel: bit i set when input i is read on
     * the host or only for its shape (so that placement leaves it where
     * it is, with no transfer). */
    unsigned (*host_inputs)(const tg_node *n);
    /* Copies between host and device. *out follows the kernels' output
     * convention (reused when it fits). */
    int (*to_device)(const tg_array *src, tg_array **out, tg_ctx *ctx);
    int (*to_host)(const tg_array *src, tg_array **out, tg_ctx *ctx);
    bool (*is_device)(const tg_array *a);
    /* For the tools; NULL when the backend offers none. */
    const tg_backend_tools *tools;
    /* A new C-contiguous device array (*out, NULL on entry) holding the
     * values of device array src: an update value a function still holds
     * elsewhere becomes a shared variable's device copy this way. */
    int (*copy)(const tg_array *src, tg_array **out, tg_ctx *ctx);
} tg_backend;

/* The CUDA backend, or NULL when this build has none. */
const tg_backend *tg_backend_cuda(void);

/* Tests only (tests/unit/test_resident.c registers a mock device): make
 * tg_backend_cuda() return b (NULL: the build's own again). No library
 * caller uses it. */
void tg_backend_test_set(const tg_backend *b);

/* True when a lives in device memory (of any backend). */
bool tg_array_on_device(const tg_array *a);

/* The placement pass: with device "cuda", moves every node that has a
 * device kernel to the device and inserts `transfer` nodes where values
 * cross (rewrite/place.c), each recorded in rec (pass "place"). `device` NULL or "cpu": nothing to do. Sets
 * *kernels (fg->nnodes entries, owned by the caller; NULL when everything
 * runs on the CPU) to each scheduled node's kernel. An unknown device is
 * TG_EINVAL; "cuda" without a usable device prints one line on stderr (the
 * first time in the process) and leaves the graph on the CPU. */
int tg_place(tg_fgraph *fg, const char *device, tg_opt_record *rec,
             tg_kernel_fn **kernels, tg_ctx *ctx);

/* A placed function's graph linked again (a .tgf restored, a
 * tg_function_copy): fg is the graph placement left, transfers included,
 * with its nodes in schedule order; on_dev[k] says node k ran a device
 * kernel and tg_var.resident is set on the values that lived on the
 * device. Sets *kernels as tg_place does: a transfer's copy, the
 * backend's kernel where on_dev, the op's own elsewhere. Where the device
 * is missing, or the backend has no kernel for a node that had one, the
 * whole function stays on the CPU (transfers are the identity there and
 * no value is resident): *kernels NULL and why (why_size bytes) says why. Only running
 * out of memory is an error. */
int tg_place_relink(tg_fgraph *fg, const bool *on_dev, tg_kernel_fn **kernels, char *why, size_t why_size,
                    tg_ctx *ctx);

#endif
