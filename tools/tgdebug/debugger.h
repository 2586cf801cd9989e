/* tgdebug's debugger: breakpoints on the nodes of a compiled function,
 * caught through the VM's hooks (tg_function_set_hooks), shared by
 * `tgdebug run` (log every hit and go on) and `tgdebug serve` (pause the
 * run on a worker thread and serve the state over HTTP).
 *
 * A breakpoint is either the `breakpoint` op of the graph (FORMAT.md s7:
 * hit before the node runs when its condition is true; the monitored
 * values are its inputs 1..n) or one set from outside with
 * `--break NODE [--when EXPR]` (hit after the node ran when EXPR holds, or
 * every time without --when). NODE is a node key (its first output's id)
 * or a node name, of the file as written: a key the optimizer removed
 * maps through the origins (tg_function_node_origins) to the scheduled
 * nodes that stand for it.
 *
 * The --when language (docs/tgdebug-serve.md):
 *   cond  := and ('or' and)*
 *   and   := atom ('and' atom)*
 *   atom  := '(' cond ')' | 'not' atom | pred | value CMP number
 *   pred  := ('any' | 'all') '(' ('isnan' | 'isinf' | 'isfinite') '(' var ')' ')'
 *   value := ('max' | 'min' | 'mean' | 'sum') '(' var | 'abs' '(' var ')' ')'
 *          | 'call'
 *   var   := 'x' | 'x'N (output N) | 'in'N (input N)
 *   CMP   := < <= > >= == !=
 */
#ifndef TGDEBUG_DEBUGGER_H
#define TGDEBUG_DEBUGGER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "core/core.h"
#include "tg/tg.h"

/* A parsed --when expression: a tree in one array, root last. */
typedef struct dbg_expr dbg_expr;

/* Parse EXPR; NULL with one line in err ("column 7: expected ')'"). */
dbg_expr *dbg_expr_parse(const char *text, char *err, size_t errsize);
void dbg_expr_free(dbg_expr *e);
/* Evaluate e on a node's outputs and inputs (each indexed as the
 * expression's x<N> and in<N>; the caller checked dbg_expr_max_vars) at
 * call `call`. The hooks do the same in two halves: inputs before the
 * node runs, outputs after. */
bool dbg_expr_eval(dbg_expr *e, tg_array *const *outs, tg_array *const *ins, long call);
/* The largest output / input index the expression names (-1: none). */
void dbg_expr_max_vars(const dbg_expr *e, int *max_out, int *max_in);

/* Statistics of one monitored value (NaNs and infinities are counted and
 * left out of min, max and mean; n is the element count). */
typedef struct dbg_stats {
    int64_t n, nan, inf;
    double min, max, mean; /* of the finite elements; NaN when none */
} dbg_stats;
void dbg_stats_of(const tg_array *a, dbg_stats *st);

/* One monitored value at a hit. */
typedef struct dbg_value {
    char name[32];  /* "x0", "in1", "m1" */
    const char *id; /* the variable's id, borrowed from f */
    bool is_out;    /* an output (out=J of the value API) or an input */
    int index;      /* J */
    tg_array *a;    /* a reference, held while the hit lasts */
    dbg_stats st;
} dbg_value;

typedef struct dbg_hit {
    int node;   /* schedule position */
    bool after; /* after the node ran (else before) */
    long call;  /* 1-based */
    char reason[512];
    int nvals;
    dbg_value *vals;
} dbg_hit;

/* A breakpoint set from outside. */
typedef struct dbg_bp {
    const char *spec;  /* NODE as given (borrowed from argv) */
    const char *when;  /* EXPR as given, or NULL */
    dbg_expr *expr;
    int nnodes;
    int *nodes;        /* schedule positions it watches */
    char note[512];    /* how NODE was found ("fused into composite c7") */
    long hits;
} dbg_bp;

typedef struct dbg dbg;
/* What a hit does: log it (run), or pause until told (serve). Return 0 to
 * go on, or a status (TG_ESTOPPED with a message on ctx) to end the call. */
typedef int (*dbg_hit_fn)(dbg *d, dbg_hit *h, tg_ctx *ctx);

struct dbg {
    tg_function *f;
    int nbps;
    dbg_bp *bps;
    int **node_bps; /* per scheduled node: the breakpoints on it, -1 ended */
    tg_hooks inner; /* the profile's hooks, run inside ours (may be empty) */
    pthread_mutex_t *inner_lock; /* held around inner.after (may be NULL) */
    dbg_hit_fn on_hit;
    void *ud;
    long call;      /* the call running (1-based) */
    long hits;
    bool step;      /* pause after the next node that runs */
    int stop;       /* end the run at the next node (read and written atomically) */
    char *pending;  /* reasons of a hit found before the node ran */
    /* The running node's inputs that it may overwrite in place (its
     * inplace map), copied before it runs when a pause can follow it (a
     * breakpoint on it, or a step): a pause after it shows these, what
     * the node read, instead of the buffers it wrote over. nsaved (the
     * node's input count) entries, NULL where not copied; dropped by its
     * after hook (by the next before hook or dbg_free when it failed). */
    tg_array **saved;
    int nsaved;
};

/* Add --break NODE [--when EXPR] (to be resolved by dbg_attach). false
 * with one line on stderr for a --when that does not parse. */
bool dbg_add_break(dbg *d, const char *node, const char *when);

/* Resolve every breakpoint against f (g: the graph as loaded, for node
 * names and the keys the optimizer removed; NULL for a .tgf), make the
 * per-node tables, and attach the hooks to f (keeping the hooks f had,
 * such as a profile's, and running them inside). TG_EXIT_USAGE with one
 * line on stderr for an unknown node (naming the nearest keys) or a --when
 * naming a value the node does not have; TG_EXIT_OK otherwise. Each
 * resolved breakpoint is described on stderr when `verbose`. */
int dbg_attach(dbg *d, tg_function *f, const tg_graph *g, bool verbose);
/* Detach the hooks and free what dbg_add_break and dbg_attach made. */
void dbg_free(dbg *d);

/* Free the values of a hit (their references). */
void dbg_hit_clear(dbg_hit *h);

/* "x0 float32 (3,) min=.. max=.. mean=.. nan=0 inf=0" */
void dbg_value_describe(const dbg_value *v, tg_str *s);

/* What `run` and `serve` share: their options, and the function loaded
 * with its inputs. */
typedef struct dbg_opts {
    const char *tool; /* "tgdebug run" */
    const char *path, *fname, *preset;
    cli_taglist inc, exc; /* --include, --exclude */
    long calls;
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs;
    /* serve only */
    const char *bind;
    long port;
} dbg_opts;

typedef cli_session dbg_session;

/* Parse argv after the subcommand's name into o and d's breakpoints;
 * `serve` takes --port and --bind too. -1: --help or --version was
 * printed (exit 0); else TG_EXIT_OK or TG_EXIT_USAGE (one line said
 * why). */
int dbg_opts_parse(int argc, char **argv, bool serve, dbg_opts *o, dbg *d, void (*usage)(FILE *));
/* Load o->path (a graph or a .tgf), compile o->fname, read the -i values.
 * TG_EXIT_USAGE with one line on stderr when any of it fails. */
int dbg_session_open(const dbg_opts *o, dbg_session *s);
void dbg_session_close(dbg_session *s);
/* Call the function once; outputs are freed first. */
int dbg_session_call(dbg_session *s, tg_ctx *ctx);

/* The `tgdebug run` and `tgdebug serve` subcommands. */
int tgdebug_run(int argc, char **argv);
int tgdebug_serve(int argc, char **argv);

#endif
