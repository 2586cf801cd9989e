/* tg/tgf.h: compiled-function files (.tgf).
 *
 * A .tgf file holds the optimized graph of one or more functions of a
 * graph, their schedules, the values of their shared variables and
 * constants (raw, 64-byte aligned, memory-mapped on load), the record of
 * the rewrites that produced them, the original graph (for
 * reoptimization) and a fingerprint of the build that wrote it. Loading
 * does not run the optimizer: the saved graph is linked as it is, so a
 * restored function computes bit for bit what the saved one did. The
 * layout is in schemas/tgf.md.
 *
 * Ownership: tg_tgf_load returns a set owned by the caller (tg_tgf_free);
 * the functions in it are borrowed from it unless taken with
 * tg_tgf_function_take. Functions loaded from one file share their shared
 * variables, as the functions of one graph do.
 *
 * A restored function keeps its rewrite record, node origins and the
 * optimizer's pass profile of the compile that made it
 * (tg_function_rewrite_get, tg_function_node_origins,
 * tg_function_pass_get); its tg_function_optimize_seconds is 0 and its
 * tg_function_compile_seconds the time it took to restore, since nothing
 * was optimized (the original compile time stays in the file's header).
 */
#ifndef TG_TGF_H
#define TG_TGF_H

#include <stdbool.h>
#include <stddef.h>

#include "tg/function.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The file format version this build writes and the newest it reads. */
#define TG_TGF_VERSION 4

typedef struct tg_tgf tg_tgf;

typedef struct tg_tgf_save_info {
    /* The graph the functions were compiled from, kept in the file so that
     * loading with `reoptimize` can compile it again; NULL: none. */
    const tg_graph *source;
    /* The options they were compiled with (recorded; NULL: defaults). */
    const tg_compile_options *options;
} tg_tgf_save_info;

/* Save functions fs[0..n-1] (compiled from the same graph, so that their
 * shared variables are one set) to path, atomically: a temporary file
 * beside it, fsync, rename, fsync of the folder, so that a crash at any
 * point leaves the previous file intact. Shared variables are written with
 * their current values. Errors: TG_EIO, TG_ENOMEM, TG_EINVAL (also when
 * two of the functions hold different states of one shared variable:
 * compiled from two loads of a graph, or a copy with it swapped). */
TG_API int tg_tgf_save(const char *path, tg_function *const *fs, int n,
                       const tg_tgf_save_info *info, tg_ctx *ctx);

typedef struct tg_tgf_load_options {
    /* Compile the saved original graph again with `options` (NULL: the
     * options the file was compiled with) instead of using the saved
     * optimized graphs (TG_ENOTFOUND when the file keeps no original). */
    bool reoptimize;
    const tg_compile_options *options;
    /* Read the file into memory instead of mapping it (for a file that
     * may change while it is in use, as on a network filesystem): one
     * block, in which the arrays then live, as they would in the
     * mapping. */
    bool no_mmap;
} tg_tgf_load_options;

/* Whether path names a .tgf file: its name ends in ".tgf" (any case), or
 * it is a regular file whose first bytes are a .tgf's magic number, which
 * tools use to read a checkpoint saved under any name. A name that is
 * neither (a JSON graph, "-", a FIFO, a file that cannot be read) gives
 * false, and the caller's JSON loader reports what is wrong with it. */
TG_API bool tg_tgf_is_file(const char *path);

/* Load a file. A damaged or hostile file (bad magic, checksum, lengths
 * past the end, absurd shapes, a header that is not valid JSON, a graph
 * that does not load) is TG_EPARSE or TG_ELOAD with one line naming the
 * file and what is wrong; a file from a newer format version is
 * TG_EVERSION. Nothing is allocated from a size the file gives before it
 * is checked against the file's length. A file built by another tg
 * version, with another BLAS or with a backend this build lacks still
 * loads (its functions run on the CPU kernels); tg_tgf_warning says so. */
TG_API tg_tgf *tg_tgf_load(const char *path, const tg_tgf_load_options *opts,
                           tg_ctx *ctx);
/* The same from memory (copied; `what` names it in errors). */
TG_API tg_tgf *tg_tgf_load_buffer(const void *data, size_t len,
                                  const char *what,
                                  const tg_tgf_load_options *opts,
                                  tg_ctx *ctx);
TG_API void tg_tgf_free(tg_tgf *t);

/* One line on how the file's build differs from this one, or NULL. */
TG_API const char *tg_tgf_warning(const tg_tgf *t);
TG_API int tg_tgf_function_count(const tg_tgf *t);
/* Function i (borrowed; NULL when out of range or already taken). */
TG_API tg_function *tg_tgf_function(tg_tgf *t, int i);
/* Index of the function called name; NULL name: the only one, or "main".
 * TG_ENOTFOUND (negative) with a message listing the names otherwise. */
TG_API int tg_tgf_function_find(const tg_tgf *t, const char *name,
                                tg_ctx *ctx);
/* Take function i out of the set: the caller owns it (tg_function_free). */
TG_API tg_function *tg_tgf_function_take(tg_tgf *t, int i);
/* Save every function of t still in it with its current shared values
 * (a checkpoint), keeping the original graph and options, and the times
 * of the compile that made each function. Functions loaded with
 * reoptimize are saved with the options that compiled them (the
 * caller's, or else the file's) and the times of that compile. */
TG_API int tg_tgf_save_state(tg_tgf *t, const char *path, tg_ctx *ctx);
/* The saved optimized graph of function i as interchange JSON (values
 * inline), which loads again with tg_graph_load_string; free with
 * tg_string_free. */
TG_API char *tg_tgf_export(const tg_tgf *t, int i, tg_ctx *ctx);

/* The original graph the file keeps (the one its functions were compiled
 * from, for reoptimization), loaded, its shared variables those of the
 * file's functions with their current values; the caller frees it
 * (tg_graph_free) before t. NULL with TG_ENOTFOUND when the file keeps
 * none, TG_ELOAD when it is damaged. */
TG_API tg_graph *tg_tgf_original(tg_tgf *t, tg_ctx *ctx);

/* Theano's function.copy(swap=...): a new function computing what f does,
 * sharing f's shared variables except those named in swap_ids, which get
 * state of their own starting from swap_values[k] (copied, and converted
 * as tg_function_shared_set converts a value). The copy is linked from
 * f's optimized graph without optimizing again; it keeps f's rewrite
 * record, node origins and optimizer profile (tg_function_pass_get,
 * tg_function_rewrite_stats_get), with a compile time of its own (the
 * link) and an optimize time of 0, as a restored function has. Errors:
 * TG_ENOTFOUND (an id f does not use), TG_ETYPE and TG_ESHAPE (a swap
 * value that does not fit, as for tg_function_shared_set), TG_EINVAL (no
 * id or no value, or an id given twice), TG_ENOMEM. */
TG_API tg_function *tg_function_copy(const tg_function *f,
                                     const char *const *swap_ids,
                                     const tg_array *const *swap_values,
                                     int nswap, tg_ctx *ctx);

/* Theano's fn(n_calls=N): call f n times with the same inputs, applying
 * the updates after each call; outputs receives the last call's outputs.
 * Stops at the first failing call (its error on ctx). */
TG_API int tg_function_call_n(tg_function *f, tg_array *const *inputs,
                              tg_array **outputs, long n, tg_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
