/* tg/function.h: compiled functions and the VM.
 *
 * A function is compiled from one function of a graph: the part of the
 * graph it needs is cloned, (later) optimized, scheduled and linked to
 * storage. Calling it runs the schedule; shared variables keep their values
 * between calls and are shared by every function of the same graph.
 *
 * Ownership: tg_function_compile returns a function owned by the caller,
 * freed with tg_function_free(); it keeps what it needs of the graph, which
 * may be freed first. Arrays passed in are borrowed; arrays returned in
 * outputs[] are new references owned by the caller.
 */
#ifndef TG_FUNCTION_H
#define TG_FUNCTION_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/array.h"
#include "tg/graph.h"
#include "tg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_function tg_function;

typedef struct tg_compile_options {
    const char *preset; /* "none", "fast_compile", "fast_run" (default) */
    bool no_gc;         /* keep intermediates between calls */
    /* Rewrite tags (a pass name, a rewrite name, or a group tag such as
     * "fusion" or "inplace") to turn on beyond the preset, and to turn off
     * (Theano's optimizer_including / optimizer_excluding). NULL-terminated
     * lists; NULL for none. An unknown tag is TG_EINVAL. */
    const char *const *include;
    const char *const *exclude;
    /* Where the nodes run: "cpu" (NULL: the environment variable
     * TG_DEVICE, else "cpu") or "cuda": every node with a GPU kernel runs
     * on the GPU, `transfer` nodes move values across; inputs come from
     * the host and outputs go back to it. Shared variables that GPU nodes
     * read stay on the GPU between calls, and their updates are made
     * there: the host value comes back only when something on the host
     * reads it (tg_function_shared_get, saving, a CPU function of the
     * same graph). Without a usable GPU (or a build without CUDA) one
     * line on stderr says so and the function runs on the CPU. Anything
     * else is TG_EINVAL. */
    const char *device;
    /* How each cuDNN convolution node (device "cuda") chooses its
     * algorithm, for the forward pass and both gradients: "guess_once",
     * "guess_on_shape_change", "time_once" or "time_on_shape_change"
     * (Theano's dnn.conv.algo_*). NULL: the environment variable
     * TG_DNN_CONV_ALGO, else "time_once". Anything else is TG_EINVAL. */
    const char *dnn_conv_algo;
} tg_compile_options;

/* Compile function `index` of g (see tg_graph_function_find). Errors:
 * TG_EMISSING (names the missing input and the node that needs it),
 * TG_ELOAD, TG_ENOMEM. */
TG_API tg_function *tg_function_compile(tg_graph *g, int index,
                                        const tg_compile_options *opts,
                                        tg_ctx *ctx);
TG_API void tg_function_free(tg_function *f);

TG_API const char *tg_function_name(const tg_function *f);
TG_API int tg_function_input_count(const tg_function *f);
TG_API int tg_function_output_count(const tg_function *f);
TG_API const char *tg_function_input_id(const tg_function *f, int i);
TG_API const char *tg_function_output_id(const tg_function *f, int i);
/* The declared type of input i: dtype, ndim, and shape (-1 unknown);
 * TG_DTYPE_INVALID, -1 and NULL for an i out of range (as the ids are
 * NULL). */
TG_API tg_dtype tg_function_input_dtype(const tg_function *f, int i);
TG_API int tg_function_input_ndim(const tg_function *f, int i);
TG_API const int64_t *tg_function_input_shape(const tg_function *f, int i);
TG_API int tg_function_node_count(const tg_function *f);

/* Call f. inputs has one array per input, converted to the declared dtype
 * when the cast is safe (TG_ETYPE otherwise; TG_ESHAPE for a shape that
 * contradicts a static length). outputs receives one new reference per
 * output (the caller frees them). Updates of shared variables are applied
 * together after the outputs (the optimizer may have an update written
 * over the variable's value, an SGD step's gemm over its weights, when
 * nothing else holds that value; an array the caller holds keeps its
 * values). Outputs are not copied, as NumPy's and PyTorch's views are
 * not: an output that is an input, or a view of one (a transpose, a
 * reshape, a subtensor), shares that input's memory, and outputs that
 * are one variable, or views of one value, share theirs (Theano copied
 * an output that aliased an input unless told to borrow it). Writing into
 * an input's data after the call changes such outputs: take a
 * tg_array_copy of one first. An update never writes over memory that
 * an output the caller holds shares. Run-time failures (TG_ERUNTIME, TG_ESHAPE) name the node and
 * its creation trace; shared values are then unchanged, and what the
 * call made goes to the pool (tg_function_trim frees it).
 * A function runs one call at a time: a call while another is running (in
 * another thread, or from a hook of that call) is refused with TG_EBUSY.
 * Threads each take their own copy (tg_function_copy); copies and the
 * functions of one graph share the shared variables they do not swap. A
 * call that updates a shared variable runs apart from every other call
 * that reads or updates it: while one runs, a call that would read or
 * update that variable is refused with TG_EBUSY (naming the variable),
 * as is an update while calls reading it run; calls that only read run
 * together. Nothing waits: a thread that gets TG_EBUSY calls again later
 * (or serves readers from copies with values of their own, the swap).
 * Graphs may be loaded, and functions compiled, copied, called, saved
 * and freed, in several threads at once, each in one thread at a time,
 * where a graph and the functions compiled from it (or the functions of
 * one restored .tgf with their set) count as one: they share parsed
 * attributes, whose json-c objects are not thread-safe. A copy
 * (tg_function_copy, made in the thread that holds f) shares nothing
 * with f but the shared variables it does not swap, and goes to any
 * thread. tg_function_shared_get and _set are not for a variable that a
 * running call of another function updates. */
TG_API int tg_function_call(tg_function *f, tg_array *const *inputs,
                            tg_array **outputs, tg_ctx *ctx);

/* Memory between calls. A call frees each intermediate of more than
 * 4 KiB after its last reader, into the function's pool, and takes the
 * buffers it allocates from there when one of the size is in it (when
 * none is, it first frees pooled buffers of sizes the call will not ask
 * for again, as many bytes as it allocates, so that dead intermediates
 * do not add to its peak); what sat in the pool through a whole call is
 * freed at its end. So a function
 * called again with the same shapes allocates nothing large, and page
 * faults nothing in again (glibc returns freed memory to the kernel, and
 * each 4 KiB page of it comes back as a fault: the MLP's training step at
 * batch 600 took 25 ms a call that way, 7 ms with the pool). Between
 * calls the pool holds at most what the last call freed, and at most
 * TG_POOL_MIB MiB (environment, read when the function is made: default
 * a sixteenth of the memory, at least 256; 0 turns the pool off); the
 * function also keeps its last outputs' buffers, which are the caller's
 * while it holds them and which the next call takes back through the
 * pool once it has let go of them. It keeps no output that views an
 * input, and hands over an output that views less than half of a
 * buffer the call made as a copy of its own. tg_function_trim frees what
 * the pool holds, the outputs' buffers the caller let go of, and the
 * values its updates replaced (kept for the next update to write over). */
TG_API void tg_function_trim(tg_function *f);
typedef struct tg_pool_stats {
    int buffers;        /* in the pool now */
    int64_t bytes;      /* their size */
    int64_t budget;     /* the most it holds (TG_POOL_MIB); 0: no pool */
    uint64_t reused;    /* buffers of more than 4 KiB that calls took from it */
    uint64_t allocated; /* and that calls allocated, none of the size being in it */
} tg_pool_stats;
TG_API void tg_function_pool_stats(const tg_function *f, tg_pool_stats *out);

/* Shared variables: the current value (borrowed: valid until the next
 * call or set of any function that updates the variable; brought back from the GPU first when a function placed
 * there updated it, and NULL when that copy fails, or for an id f does
 * not use) and replacing it (a copy is taken, converted to the variable's
 * dtype when the cast is safe, as a call's inputs are, and the next call
 * on the GPU uploads it). Errors: TG_ENOTFOUND (an id f does not use),
 * TG_ETYPE (a dtype that does not cast safely), TG_ESHAPE (a shape that
 * contradicts the variable's), TG_EINVAL (no id or no array), TG_ENOMEM. */
TG_API const tg_array *tg_function_shared_get(const tg_function *f,
                                              const char *id);
TG_API int tg_function_shared_set(tg_function *f, const char *id,
                                  const tg_array *value, tg_ctx *ctx);

/* Hooks run before and after each node. With none set, the VM pays one
 * branch per node. `node` is the schedule position; the tg_node_info
 * accessors below read it. A hook returning non-zero stops the call with
 * that status (its message set on ctx by the hook). */
typedef struct tg_hooks {
    int (*before)(void *ud, const tg_function *f, int node,
                  tg_array *const *inputs, tg_ctx *ctx);
    int (*after)(void *ud, const tg_function *f, int node,
                 tg_array *const *inputs, tg_array *const *outputs,
                 tg_ctx *ctx);
    void *ud;
} tg_hooks;
TG_API void tg_function_set_hooks(tg_function *f, const tg_hooks *hooks);

/* ---- what the optimizer did ----
 *
 * A node's key is the id of its first output: unique in a graph, and
 * stable from the file through every rewrite (a rewrite's new nodes get
 * fresh ids). The rewrite record lists, in the order they were applied,
 * each rewrite's name, its pass, the nodes it removed (those it replaced,
 * and those that died with them) and the nodes it created, by key:
 * replayed over the nodes of the function compiled with preset "none"
 * (drop the removed keys, add the created ones, entry by entry), it ends
 * at the scheduled nodes. A node that lives on under its key (a merge's
 * survivor, an in-place node) is removed and created by one entry. Every
 * scheduled node maps back to the original nodes of the graph file it
 * stands for (its origins): a node the optimizer left alone stands for
 * itself; a fused `composite` for every node it swallowed. Strings are
 * borrowed from f. */
typedef struct tg_rewrite_info {
    const char *name; /* "mul_self_to_sqr", "fuse_elemwise", ... */
    const char *pass; /* "merge", "canonicalize", "stabilize", ... */
    int nremoved;
    const char *const *removed; /* keys of the nodes it removed */
    int ncreated;
    const char *const *created; /* keys of the nodes it created */
} tg_rewrite_info;
TG_API int tg_function_rewrite_count(const tg_function *f);
/* Entry i of the record. TG_EINVAL when i is out of range. */
TG_API int tg_function_rewrite_get(const tg_function *f, int i,
                                   tg_rewrite_info *info);
/* The key of scheduled node `node` (NULL out of range). */
TG_API const char *tg_function_node_key(const tg_function *f, int node);
/* The keys of the original nodes that scheduled node `node` stands for;
 * returns how many (>= 1, or 0 for a node made from nothing original,
 * such as a folded constant's producer, or for a node out of range, *keys
 * then NULL). *keys is borrowed from f. */
TG_API int tg_function_node_origins(const tg_function *f, int node,
                                    const char *const **keys);

/* Expanding a grad, rop or lop node of the file makes nodes of its own,
 * keyed "<its output id>.<n>", that name no node of the file. For such a
 * key (a scheduled node's own, or one among a node's origins): the node
 * whose derivative it takes part in, by key and op (both "" for the
 * expansion's own nodes, such as the seed of the cost), and the grad, rop
 * or lop node that made it, by key and op. Theano left such nodes
 * nameless; PyTorch names them after the forward op (MulBackward0). */
typedef struct tg_key_gradient {
    const char *of;    /* "r": the node differentiated, or "" */
    const char *of_op; /* "sqrt", or "" */
    const char *by;    /* "gx": the grad, rop or lop node */
    const char *by_op; /* "grad", "rop" or "lop" */
} tg_key_gradient;
/* Fills *out and returns true for such a key; false for any other. The
 * strings are borrowed from f. */
TG_API bool tg_function_key_gradient(const tg_function *f, const char *key,
                                     tg_key_gradient *out);

/* The optimizer's own profile: one entry per pass that ran, in order. */
typedef struct tg_pass_stats {
    const char *name;
    double seconds;
    int nodes_before, nodes_after;
    int applied; /* rewrites applied */
} tg_pass_stats;
TG_API int tg_function_pass_count(const tg_function *f);
TG_API int tg_function_pass_get(const tg_function *f, int i,
                                tg_pass_stats *st);
/* Per rewrite: how often it was tried, how often it applied, and the time
 * spent in it. */
typedef struct tg_rewrite_stats {
    const char *name;
    const char *pass;
    long tried, applied;
    double seconds;
} tg_rewrite_stats;
TG_API int tg_function_rewrite_stats_count(const tg_function *f);
TG_API int tg_function_rewrite_stats_get(const tg_function *f, int i,
                                         tg_rewrite_stats *st);
/* Seconds spent compiling f (clone, optimize, link) and, of that, in the
 * optimizer. */
TG_API double tg_function_compile_seconds(const tg_function *f);
TG_API double tg_function_optimize_seconds(const tg_function *f);

/* Scheduled nodes, for tools (NULL, or -1 for the counts, for a node out
 * of range). */
TG_API const char *tg_function_node_op(const tg_function *f, int node);
TG_API const char *tg_function_node_label(const tg_function *f, int node);
TG_API int tg_function_node_ninputs(const tg_function *f, int node);
TG_API int tg_function_node_noutputs(const tg_function *f, int node);

#ifdef __cplusplus
}
#endif
#endif
