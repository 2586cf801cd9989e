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

/* Copy the body of op_from_graph node n into the gradient builder, reading
 * n's inputs; out[k] (n->nout entries) receives the copy of body output k.
 * Body constants become new constants of the builder's graph. */
int tg_ofg_inline_gb(struct tg_gb *b, const tg_node *n, tg_var **out);

#endif
