/* Private: symbolic differentiation (reverse mode).
 *
 * A `grad(cost, w1..wn)` node of a file is expanded when the file is
 * loaded: the graph of the vector-Jacobian products is built node by node
 * from each op's grad rule, in reverse topological order, and the grad
 * node's outputs become the gradients. New nodes carry the creation trace
 * of the node they differentiate.
 */
#ifndef TG_GRAD_H
#define TG_GRAD_H

#include "ops/op.h"

typedef struct tg_gb {
    tg_graph *g;
    tg_node **nodes; /* built, in order */
    int nnodes, cnodes;
    const tg_node *origin; /* trace source for new nodes */
    const tg_node *by;     /* the grad, rop or lop node being expanded */
    tg_ctx *ctx;
    int serial;
    const char *prefix; /* ids of new variables: "<prefix>.<serial>" */
} tg_gb;

/* One node of op `op` over `in` (attrs: JSON text or NULL), typed at once;
 * returns its output 0, or NULL with ctx set. */
tg_var *tg_gb_op(tg_gb *b, const char *op, int nin, tg_var *const *in, const char *attrs);
/* Shorthands. */
tg_var *tg_gb_op1(tg_gb *b, const char *op, tg_var *x, const char *attrs);
tg_var *tg_gb_op2(tg_gb *b, const char *op, tg_var *x, tg_var *y);
/* A node of op `op` with nout outputs over `in`, attrs a JSON object
 * (borrowed; a reference is taken) or NULL; parsed and typed. Returns the
 * node (its outputs are new variables of b->g), or NULL with ctx set. */
tg_node *tg_gb_node(tg_gb *b, const tg_op *op, int nin, tg_var *const *in, int nout, json_object *attrs);
/* A strong scalar constant of dtype dt. */
tg_var *tg_gb_const(tg_gb *b, tg_dtype dt, double v);
/* A constant holding a (the reference is taken over, even on failure). */
tg_var *tg_gb_const_array(tg_gb *b, tg_array *a);
/* A reverse pass over nodes[0..nn) (topological, built by b): the
 * gradients seed[s] of f[s] flow back; res[j] gets the gradient reaching
 * w[j] (float variables), or NULL when none does. For ops whose gradient
 * differentiates a body of their own (op_from_graph). */
int tg_gb_lop(tg_gb *b, tg_node *const *nodes, int nn, int nseed, tg_var *const *f, tg_var *const *seed,
              int nw, tg_var *const *w, tg_var **res);
/* g summed back to x's run-time shape (undoing broadcasting). */
tg_var *tg_gb_sum_to(tg_gb *b, tg_var *g, tg_var *x);
/* g cast to dtype dt (g itself when it has it; NULL stays NULL). */
tg_var *tg_gb_cast(tg_gb *b, tg_var *g, tg_dtype dt);

/* Connection patterns (Theano's connection_pattern), which the check of
 * attrs.disconnected follows: conn[i * n->nout + k] is set when output k
 * of n depends on its input i. scan (tg_scan_connection, scan_grad.c:
 * through the recurrence, to a fixed point) and op_from_graph
 * (tg_ofg_connection, control.c) work theirs out from the body; every
 * other op has every input connected to every output. TG_OK, or
 * TG_ENOMEM with ctx set. */
int tg_grad_connection(const tg_node *n, bool *conn, tg_ctx *ctx);
int tg_scan_connection(const tg_node *n, bool *conn, tg_ctx *ctx);
int tg_ofg_connection(const tg_node *n, bool *conn, tg_ctx *ctx);
/* The same for a body's function 0 (its nodes in topological order):
 * conn[o * nin + i] is set when body output o depends on body input i
 * (nested scans and op_from_graphs by their own patterns). */
int tg_grad_body_connection(const tg_graph *body, bool *conn, tg_ctx *ctx);

/* The gradient rules of the op families (rules.c). */
int tg_grad_elemwise(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_reduce(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_blas(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_shape(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_nn(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
/* More rules (rules_more.c). */
int tg_grad_varstd(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_matmul(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_outer(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_build(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_conv(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_pool(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_linalg(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
int tg_grad_debug(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);

/* Expand the derived node n of g (op `grad`, `lop` or `rop`; its inputs
 * are typed): the new nodes are returned in *out (caller frees the array;
 * the nodes belong to the caller until added to g), ending with identities
 * that produce n's outputs. `lop(f, w.., u)` is the reverse pass seeded
 * with u; `grad` is lop of a scalar seeded with ones; `rop(f, w.., v..)`
 * is computed by two reverse passes (the "double lop" trick): a lop seeded
 * with a dummy u = zeros_like(f), then the reverse pass of those results,
 * seeded with the v's, back to u, which gives J v (lop is linear in u, so
 * the result never reads u's value). Errors: a cost that is not a scalar,
 * a u or v of the wrong shape, a w that f does not depend on
 * (attrs.disconnected "raise"; through scan and op_from_graph nodes by
 * their connection patterns, above), an op without a gradient rule on the
 * path (for rop, also on the gradient graph's own path). */
int tg_grad_expand(tg_graph *g, tg_node *n, tg_node ***out, int *nout, tg_ctx *ctx);

#endif
