/* tg/profile.h: per-node counters for a compiled function.
 *
 * A profile attaches to a function through its hooks (tg_function_set_hooks)
 * and counts, for every scheduled node, the calls and the nanoseconds spent
 * in its kernel, the op's cost estimate (flops, bytes moved), and what each
 * output is: a new buffer, a view of an input, or an input overwritten in
 * place. Calls made through tg_profile_call are timed as a whole, so that
 * the time outside the kernels (binding inputs, updates, the VM's own work)
 * shows as the difference. Optionally the start and duration of every node
 * of the first `trace_calls` calls are kept for a timeline (Chrome trace).
 *
 * On a function placed on a GPU (tg_compile_options.device "cuda"), the
 * nodes that run on the device are timed by the device itself: a pair of
 * events queued around each node's work, with no synchronisation, read
 * once per call after the call has finished (so a node's time is its time
 * on the device, and the host keeps queueing work ahead of the GPU as it
 * does unprofiled). The synchronous mode (tg_profile_set_sync) instead
 * waits for the device before and after each device node and reads the
 * host clock: exact wall time per node, without overlap. Copies back to
 * the host wait for the device anyway and are timed on the host clock in
 * both modes; host nodes always are. No device array is copied to the host
 * for profiling.
 *
 * Bodies (Theano's "Scan Op profiling"): the function of every scan and
 * op_from_graph node of f is profiled too, by a profile of its own (a
 * "body profile") hooked to that function, and so on down (a scan in a
 * scan's body, an op_from_graph in it...). Each body node then counts its
 * runs over every step and its time; the outer node keeps its own time,
 * the whole loop, so the loop's own overhead (moving the views along the
 * rows, landing each step's outputs, the per-step dispatch) is the outer
 * node's time less the body's nodes'. A scan's body, compiled at its first
 * run, is compiled when the profile is made; a body function that already
 * has hooks (a NaN guard, another profile) is left alone and has no body
 * profile. In a scan's body the cost estimate and what each output is are
 * read at the first step of each run only (every step has the same
 * shapes): the other steps pay for the two clock readings alone. Body
 * profiles are owned by the profile they hang from, freed with it, and read with the functions below (they take a body profile as
 * they take f's: tg_profile_node_get, tg_profile_origins...).
 *
 * The hook path allocates nothing: every array is sized when the profile is
 * made. Ownership: tg_profile_new returns a profile owned by the caller,
 * freed with tg_profile_free() (which detaches the hooks); it borrows f,
 * which must outlive it.
 */
#ifndef TG_PROFILE_H
#define TG_PROFILE_H

#include <stdint.h>

#include "tg/array.h"
#include "tg/function.h"
#include "tg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_profile tg_profile;

/* What an output of a node is, as seen on the last profiled call. */
typedef enum tg_profile_out_kind {
    TG_PROFILE_OUT_NEW = 0, /* a buffer of its own */
    TG_PROFILE_OUT_VIEW,    /* shares the buffer of input `of` */
    TG_PROFILE_OUT_INPLACE  /* overwrote the buffer of input `of` */
} tg_profile_out_kind;

typedef struct tg_profile_output {
    const char *id; /* the variable's id, borrowed from f */
    tg_profile_out_kind kind;
    int of;        /* input index for a view or in-place output, else -1 */
    int64_t bytes; /* the array's bytes (its buffer's for a new output) */
    tg_dtype dtype;
    int ndim; /* -1: never computed */
    int64_t shape[TG_MAX_NDIM];
} tg_profile_output;

typedef struct tg_profile_node {
    uint64_t calls;
    uint64_t ns;        /* total over every profiled call */
    double flops;       /* one run, from the op's cost (last call); 0 when
                           the op has no cost estimate */
    double bytes_moved; /* one run: bytes read and written, same source */
    int64_t bytes_new;  /* bytes of its new outputs (last call) */
} tg_profile_node;

/* Memory over one call, simulated from the schedule with the sizes of the
 * last profiled call: buffers are allocated when their node runs and, with
 * garbage collection, freed after the last node that reads them or any view
 * of them (the VM's free lists). Function inputs, shared values and
 * constants are not counted; outputs and update values are never freed. */
typedef struct tg_profile_memory {
    int64_t peak;       /* with intermediates freed after their last use */
    int64_t peak_no_gc; /* keeping every intermediate (tg_compile_options.no_gc) */
    int64_t allocated;  /* bytes of every new output of one call */
    int nnew, nview, ninplace; /* outputs of each kind */
} tg_profile_memory;

/* Make a profile for f and attach it (replacing any hooks f had).
 * trace_calls: how many calls (the first ones made through tg_profile_call)
 * keep a per-node timeline; 0 for none. The bodies of f's scan and
 * op_from_graph nodes are profiled, and with trace_calls > 0 the timeline
 * keeps the first TG_PROFILE_BODY_EVENTS runs of body nodes in the kept
 * calls (tg_profile_trace_body_event). Errors: TG_ENOMEM, TG_EINVAL. */
TG_API tg_profile *tg_profile_new(tg_function *f, long trace_calls, tg_ctx *ctx);

#define TG_PROFILE_BODY_EVENTS 65536L

typedef struct tg_profile_options {
    long trace_calls; /* as tg_profile_new's */
    bool no_bodies;   /* leave the bodies of scan and op_from_graph nodes
                         unprofiled (their hooks cost time per body node
                         per step) */
    long trace_body_events; /* with trace_calls > 0: how many runs of body
                               nodes the timeline keeps, in all bodies
                               together (the first ones in the kept
                               calls); 0 for none */
} tg_profile_options;
/* tg_profile_new with options (NULL: all zero, bodies profiled). */
TG_API tg_profile *tg_profile_new_opts(tg_function *f, const tg_profile_options *o,
                                       tg_ctx *ctx);
/* Detach from f and free. NULL is allowed. */
TG_API void tg_profile_free(tg_profile *p);

/* tg_function_call, timed. Same arguments, errors and ownership. On a
 * function placed on a device it also waits for the device at the end of
 * the call and reads the device times of its nodes; a call made with
 * tg_function_call directly has them read at the next call (or by
 * tg_profile_set_sync). A device error while reading them is
 * TG_ERUNTIME. */
TG_API int tg_profile_call(tg_profile *p, tg_array *const *inputs,
                           tg_array **outputs, tg_ctx *ctx);

/* How a node's time is measured. */
typedef enum tg_profile_clock {
    TG_PROFILE_CLOCK_HOST = 0, /* the host clock around the kernel call */
    TG_PROFILE_CLOCK_EVENTS,   /* device events around the node's work on
                                  the device, no synchronisation */
    TG_PROFILE_CLOCK_SYNC      /* the host clock, the device waited for
                                  before (and, synchronous, after) */
} tg_profile_clock;

/* Synchronous (true) or event (false, the default) timing of the device
 * nodes; no effect on a function that runs on the CPU. May be changed
 * between calls (times already read are kept). TG_EINVAL when p is NULL;
 * a device error reading pending times, TG_ERUNTIME. */
TG_API int tg_profile_set_sync(tg_profile *p, bool sync, tg_ctx *ctx);
TG_API bool tg_profile_sync(const tg_profile *p);
/* Which clock scheduled node `node` is timed with now
 * (TG_PROFILE_CLOCK_HOST when out of range). */
TG_API tg_profile_clock tg_profile_node_clock(const tg_profile *p, int node);

/* Calls that completed through tg_profile_call, and their total time.
 * For a body profile: the completed runs of its outer node, and the outer
 * node's time (the whole loop, tg_profile_node_get's ns on the parent). */
TG_API uint64_t tg_profile_calls(const tg_profile *p);
TG_API uint64_t tg_profile_total_ns(const tg_profile *p);
/* The sum of every node's time. For a body profile, the time in the
 * body's nodes over every step; tg_profile_total_ns less this is the
 * loop's own overhead. */
TG_API uint64_t tg_profile_nodes_ns(const tg_profile *p);
/* A body profile's steps over every completed run of its outer node (a
 * scan's steps summed; one per run of an op_from_graph); for a profile
 * made by tg_profile_new, its calls. */
TG_API uint64_t tg_profile_steps(const tg_profile *p);

/* The function a profile counts: f for tg_profile_new's, the body's
 * function for a body profile (owned by the outer node: name its nodes
 * with tg_function_node_key etc.). */
TG_API const tg_function *tg_profile_function(const tg_profile *p);
/* The body profiles directly under p, in the schedule order of their
 * outer nodes (a body of a body is under that body's profile). */
TG_API int tg_profile_body_count(const tg_profile *p);
/* Body i of p (NULL when out of range); *node (may be NULL) receives the
 * schedule position in p's function of its outer node. */
TG_API const tg_profile *tg_profile_body(const tg_profile *p, int i, int *node);
/* The profile p hangs from (NULL for a profile made by tg_profile_new),
 * and in *node (may be NULL) its outer node there (-1 with NULL). */
TG_API const tg_profile *tg_profile_parent(const tg_profile *p, int *node);

/* Counters of scheduled node `node` (0 .. tg_function_node_count - 1), and
 * of its output j. TG_EINVAL when out of range. */
TG_API int tg_profile_node_get(const tg_profile *p, int node, tg_profile_node *st);
TG_API int tg_profile_output_get(const tg_profile *p, int node, int j,
                                 tg_profile_output *out);

TG_API int tg_profile_memory_get(const tg_profile *p, tg_profile_memory *m,
                                 tg_ctx *ctx);

/* The same simulation node by node: live_run[k], the bytes live while
 * scheduled node k runs (its new outputs included), and live_after[k],
 * after the buffers it was the last reader of are freed. Each array has
 * tg_function_node_count entries (either may be NULL). TG_ENOMEM. */
TG_API int tg_profile_memory_live(const tg_profile *p, int64_t *live_run,
                                  int64_t *live_after, tg_ctx *ctx);

/* The timeline: how many calls were kept, and for call c the start and end
 * of the call and of each node, in nanoseconds from the profile's creation.
 * A node that did not run in that call (a failed call) has dur 0 and start
 * 0. TG_EINVAL when out of range. */
TG_API long tg_profile_trace_count(const tg_profile *p);
TG_API int tg_profile_trace_call(const tg_profile *p, long c, uint64_t *start,
                                 uint64_t *end);
TG_API int tg_profile_trace_node(const tg_profile *p, long c, int node,
                                 uint64_t *start, uint64_t *dur);

/* The body nodes' timeline: runs of body nodes (at any depth) during the
 * kept calls, the first ones up to the limit (tg_profile_options
 * .trace_body_events), in the order they ended. Read from the profile made
 * by tg_profile_new (a body profile has none: count 0). Each run falls
 * within its outer node's run, so within that node's event of call
 * `call`. */
typedef struct tg_profile_body_event {
    const tg_profile *body; /* the body profile of the node */
    int node;               /* its schedule position in the body's function */
    int64_t step;           /* the step of the outer node's run (a scan's:
                               0, 1, ... in the order they ran; 0 for an
                               op_from_graph), counted from the body's
                               schedule order: a step that ran no node is
                               not counted */
    long call;              /* the kept call (as tg_profile_trace_call) */
    uint64_t start, dur;    /* ns from the profile's creation */
} tg_profile_body_event;
TG_API long tg_profile_trace_body_count(const tg_profile *p);
/* TG_EINVAL when out of range. */
TG_API int tg_profile_trace_body_event(const tg_profile *p, long i, tg_profile_body_event *ev);

/* Time through the optimizer's rewrites: every original node of the graph
 * file that some scheduled node stands for (tg_function_node_origins), with
 * the summed time of the scheduled nodes standing for it (a fused node's
 * whole time goes to each node it swallowed: no split would be true) and
 * their schedule positions. Sorted slowest first, then by key. */
typedef struct tg_profile_origin {
    const char *key; /* borrowed from f */
    uint64_t ns;
    int nvia;
    const int *via; /* nvia schedule positions, ascending */
} tg_profile_origin;
/* *out receives a new array of the returned count, freed with
 * tg_profile_origins_free. Returns the count, or TG_ENOMEM. */
TG_API int tg_profile_origins(const tg_profile *p, tg_profile_origin **out,
                              tg_ctx *ctx);
TG_API void tg_profile_origins_free(tg_profile_origin *o);

/* The op family of an op name, Theano's "op class": "elemwise", "reduce",
 * "blas", "shape", "build", "nn", "conv", "linalg", "random", "debug",
 * "grad", "composite"; the op name itself for an op outside the table. */
TG_API const char *tg_profile_op_class(const char *op);

#ifdef __cplusplus
}
#endif
#endif
