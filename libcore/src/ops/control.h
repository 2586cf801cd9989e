/* Private: the control-flow ops (control.c): ifelse and op_from_graph. */
#ifndef TG_CONTROL_H
#define TG_CONTROL_H

#include "ops/op.h"
#include "tg/function.h"

struct tg_gb;

/* An op_from_graph node's attrs.extra: the body as loaded (one function,
 * "body"), and the function compiled from it at the node's first run. */
typedef struct tg_ofg {
    tg_graph *g;
    tg_function *f;
} tg_ofg;

/* ifelse's reading of its condition: non-zero (NaN included) is true. */
bool tg_ifelse_truth(const tg_array *c);

/* attrs.name of an op_from_graph node (borrowed). */
const char *tg_ofg_name(const tg_node *n);

/* Compile the body of op_from_graph node n into its tg_ofg's f unless
 * done (its first run does; the profiler, to hook it beforehand). */
int tg_ofg_compile_body(tg_node *n, tg_ctx *ctx);

/* Where the body of an op_from_graph node is copied to (the gradient
 * builder or the optimizer): constant(ud, a) makes a constant holding a
 * (which it takes), node(ud, bn, ins) a node like the body's bn reading
 * ins; either returns NULL on failure, with ctx's status set or out of
 * memory. */
typedef struct tg_ofg_target {
    tg_var *(*constant)(void *ud, tg_array *a);
    tg_node *(*node)(void *ud, const tg_node *bn, tg_var *const *ins);
    void *ud;
    tg_ctx *ctx;
} tg_ofg_target;

/* Copy the body of op_from_graph node n into t, reading n's inputs; out[k]
 * (n->nout entries) receives the copy of body output k. Body constants
 * become new constants of the target's graph. */
int tg_ofg_copy_body(const tg_node *n, const tg_ofg_target *t, tg_var **out);

/* tg_ofg_copy_body into the gradient builder b. */
int tg_ofg_inline_gb(struct tg_gb *b, const tg_node *n, tg_var **out);

#endif
