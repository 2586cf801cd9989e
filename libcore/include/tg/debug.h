/* tg/debug.h: finding where values go wrong (what `tgdebug` is made of).
 *
 * The NaN guard (Theano's NanGuardMode, made to name the culprit): it
 * calls a function with hooks after every node that check the node's
 * results for NaN, infinities and values of huge magnitude. The first
 * offence stops the call. The node it names is the one that *made* the
 * bad value (its inputs were clean, its outputs are not), never one that
 * only passed it on; a bad value fed in (an input, a shared value, a
 * constant) is named as such. Inside a fused `composite` node the guard
 * re-runs the fused body op by op and names the original op; inside a
 * `scan` or an `op_from_graph` it runs the node again with its body
 * guarded, level by level through nested ones, and names the way down to
 * the body node that made the value, with each loop's step
 * (tg_offence.path).
 *
 * Ownership: tg_nanguard_new returns a guard owned by the caller, freed
 * with tg_nanguard_free (which takes its hooks off the function); the
 * function is borrowed and must outlive it. Strings and arrays a guard
 * returns are borrowed from it (or from the function), valid until its
 * next call or its free.
 */
#ifndef TG_DEBUG_H
#define TG_DEBUG_H

#include <stdbool.h>
#include <stdint.h>

#include "tg/array.h"
#include "tg/function.h"
#include "tg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Statistics of an array: element count, NaN and infinity counts, the
 * count of finite elements whose magnitude exceeds `big` (0 when big is
 * not finite or <= 0), and min, max and mean over the finite elements
 * (NaN when there is none). Any dtype; integers and bools have no NaN or
 * infinity. */
typedef struct tg_stats {
    int64_t size, nan, inf, big;
    double min, max, mean;
} tg_stats;
TG_API void tg_array_stats(const tg_array *a, double big, tg_stats *st);

typedef struct tg_nanguard_options {
    bool no_nan;   /* do not look for NaN */
    bool no_inf;   /* do not look for infinities */
    double big;    /* flag finite |x| > big; 0: 1e10; INFINITY: off */
} tg_nanguard_options;

typedef enum tg_offence_where {
    TG_OFFENCE_NONE = 0,
    TG_OFFENCE_INPUT,    /* a function input was bad when the call began */
    TG_OFFENCE_SHARED,   /* a shared value was bad when the call began */
    TG_OFFENCE_CONSTANT, /* a constant of the graph: read by `node`, or
                            (node -1) a function output or update value */
    TG_OFFENCE_NODE      /* node `node` made it */
} tg_offence_where;

enum { TG_BAD_NAN = 1, TG_BAD_INF = 2, TG_BAD_BIG = 4 };

/* One level of the way down from the guarded function's node to the node
 * that made the bad value, when that is inside the body of a `scan` or an
 * `op_from_graph` (any depth: a scan of scans, an op_from_graph in a
 * loop, ...). Level 0 is the node of the function; level i + 1 is the node
 * of the body of level i's node that made the value, found by running
 * level i's node once more on its inputs as they were (at that step) with
 * its body guarded. Strings and fn are borrowed from the functions. */
typedef struct tg_offence_level {
    const tg_function *fn; /* the function the node is in: the guarded
                              one at level 0, else the compiled body of
                              the node of level i - 1 */
    int node;              /* its schedule position in fn */
    const char *key;       /* tg_function_node_key(fn, node) */
    const char *op;        /* its op */
    int output;            /* which output of it holds the bad value */
    const char *var;       /* that output's id (in fn, as optimized) */
    const char *var_as_written; /* the variable as written that it stands
                                   for (var itself when no rewrite made it):
                                   "Li" for a rebuilt loop's "Hi:scan.1" */
    unsigned what;         /* TG_BAD_* bits of that output */
    tg_stats stats;        /* and its statistics */
    /* A scan: the step of its loop (from 0, in the order the loop ran) at
     * which its body made the value (the node of the next level did, at
     * that step); at the last level, the first step whose results hold a
     * bad value (from the rows of its stacked outputs). -1 for other ops,
     * or when it cannot be told. */
    int64_t step;
    /* A fused `composite`: the fused op that made the value (NULL when it
     * could not be told apart, or not a composite), its body variable,
     * and what that op's result held (it may differ from `what`: an
     * infinity a later fused op multiplied by 0). */
    const char *fused_op;
    const char *fused_var;
    unsigned fused_what;
    tg_stats fused_stats;
    /* The nodes as written that the node (in a composite: the fused op)
     * stands for (keys): of the file at level 0, of the body as written
     * of the node of level i - 1 below it. */
    int norigins;
    const char *const *origins;
} tg_offence_level;

typedef struct tg_offence {
    tg_offence_where where;
    uint64_t call;    /* 1 for the guard's first call */
    const char *var;  /* id of the bad value */
    int node;         /* schedule position; -1 for INPUT and SHARED, and
                         for a CONSTANT that no node reads */
    int output;       /* output index of `node` (NODE); for a CONSTANT
                         with node -1, which value of the function it is:
                         output `output` when below
                         tg_function_output_count(f), else the new value
                         of the (output - count)-th updated shared
                         variable (its id: update_of) */
    unsigned what;    /* TG_BAD_* bits found */
    tg_stats stats;   /* of the bad value */
    /* CONSTANT: the id of the variable of the graph file the constant
     * stands for when the optimizer made it (constant folding replaced
     * that node output by it: the node that made the bad value is that
     * variable's owner), else NULL (a constant of the file, or a restored
     * function, whose record keeps no replacements). */
    const char *folded_from;
    const char *update_of; /* CONSTANT, node -1: the shared variable it
                              updates, or NULL (an output) */
    /* NODE, when the node is a fused `composite`: the body op that made
     * the value (NULL when it could not be told apart), the body variable,
     * and the original nodes of the file that op stood for (keys). */
    const char *body_op;
    const char *body_var;
    int norigins;
    const char *const *origins;
    /* With body_op: what that op's result held (TG_BAD_* bits and its
     * statistics); it may differ from `what`, the output's (an infinity
     * that a later body op multiplied by 0 is a NaN in the output). */
    unsigned body_what;
    tg_stats body_stats;
    /* NODE, when the node is a `scan`: the first step (from 0, in the
     * order the loop ran) whose results hold a bad value, from the rows
     * of its stacked outputs; -1 when it cannot be told (no stacked float
     * output, a keep_last ring, outputs on a device). */
    int64_t step;
    /* NODE, when the node is a `scan` or an `op_from_graph`: the compiled
     * function the innermost body node that made the bad value is in
     * (its inputs clean, its output not; borrowed from its node) and its
     * position in that function's schedule, found by running the node
     * once more on its inputs with the body guarded (and again, level by
     * level, for a scan or op_from_graph in that body); body_fn NULL and
     * body_node -1 when it could not be told. body_op and body_var then
     * name that node's op (inside a fused body composite, the fused op)
     * and its output, origins the nodes of its body as written that it
     * stands for, and step (scan) is the step of the node's own loop at
     * which its body made it. The whole way down is in path. */
    const tg_function *body_fn;
    int body_node;
    /* NODE: the way from the node (path[0]: node, output, var, what,
     * stats and step as above) down through the bodies of scans and
     * op_from_graphs to the node that made the value (path[depth - 1]);
     * depth 1 when that is the node itself (or its body could not be
     * told), more for a body node (2: one level down, as body_fn and
     * body_node say). 0 and NULL for the other offences. Borrowed from
     * the guard. */
    int depth;
    const tg_offence_level *path;
} tg_offence;

typedef struct tg_nanguard tg_nanguard;

/* Guard f. The guard takes f's hooks (tg_function_set_hooks): a function
 * is not guarded and profiled at once. TG_EINVAL for a negative or NaN
 * big, TG_ENOMEM. */
TG_API tg_nanguard *tg_nanguard_new(tg_function *f, const tg_nanguard_options *opts,
                                    tg_ctx *ctx);
TG_API void tg_nanguard_free(tg_nanguard *g);

/* Call the function as tg_function_call does, checking the inputs and
 * shared values first, then every node's float outputs as they are made.
 * On an offence the call stops before the updates (shared values are as
 * before it), nothing is returned in outputs, the offence is kept
 * (tg_nanguard_offence) and the status is TG_ESTOPPED with one line on
 * ctx. Other failures are the function's own. */
TG_API int tg_nanguard_call(tg_nanguard *g, tg_array *const *inputs, tg_array **outputs,
                            tg_ctx *ctx);
/* The offence of the last call, or NULL when it was clean. */
TG_API const tg_offence *tg_nanguard_offence(const tg_nanguard *g);
/* A level's node by its name as written: its key, or, for a node the
 * optimizer made, the one file node it stands for; a loop the optimizer
 * rebuilt, 'R:scan', stands for 'R' (among its origins, with any node it
 * took in). The string is the level's. */
TG_API const char *tg_offence_level_name(const tg_offence_level *l);
/* For a NODE or CONSTANT offence: the node's inputs as they were when it
 * ran (copies: an in-place node has overwritten its own); NULL outside
 * 0 <= i < tg_function_node_ninputs(f, node). */
TG_API const tg_array *tg_nanguard_node_input(const tg_nanguard *g, int i);

#ifdef __cplusplus
}
#endif
#endif
