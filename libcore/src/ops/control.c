/* Control flow and nesting (FORMAT.md s7): `ifelse` and `op_from_graph`.
 *
 * ifelse(cond, t1..tn, e1..en) -> n outputs. The kernel only picks: each
 * output becomes a reference to the taken branch's value (no copy). The
 * laziness is the VM's (vm/function.c): at link time the nodes that only
 * one branch needs are laid out as blocks before the ifelse and skipped
 * when the other branch is taken, so the kernel never sees the other
 * branch computed. The op is TG_OPF_LAZY so that the optimizer does not
 * fold it and keeps its regions apart (graph/regions.c).
 *
 * op_from_graph(x1..xn) attrs {body, name}: a body used as one op. The body
 * is loaded with the node (tg_body_load) and compiled, with the optimizer,
 * into a function the node owns at its first run; a run calls that
 * function on the node's inputs and its outputs become the node's. Its
 * gradient inlines the body (docs/control-flow.md); the rewrite
 * `inline_op_from_graph` (pass `inline`, opt-in) inlines it in the graph.
 */
#include <stdio.h>
#include <string.h>

#include "grad/grad.h"
#include "io/io.h"
#include "ops/control.h"

/* ---- ifelse ---- */

static int ifelse_attrs(tg_node *n, tg_ctx *ctx) {
    if (n->nout < 1 || n->nin != 1 + 2 * n->nout)
        return tg_errorf(ctx, TG_ELOAD,
                         "inputs: ifelse(cond, t1..tn, e1..en) with %d output%s needs %d inputs, "
                         "got %d",
                         n->nout, n->nout == 1 ? "" : "s", 1 + 2 * n->nout, n->nin);
    return TG_OK;
}

static int ifelse_infer(tg_node *n, tg_ctx *ctx) {
    int rc, k = n->nout;
    if ((rc = ifelse_attrs(n, ctx))) return rc;
    if ((rc = tg_weak_take(n, 0, TG_BOOL, ctx))) return rc;
    if (n->inputs[0]->type.ndim != 0)
        return tg_errorf(ctx, TG_ETYPE, "inputs[0] '%s': the condition must be a scalar, not %d-dimensional",
                         n->inputs[0]->id, n->inputs[0]->type.ndim);
    for (int i = 0; i < k; i++) {
        tg_var *t = n->inputs[1 + i], *e = n->inputs[1 + k + i];
        /* A weak scalar takes the other branch's dtype (both weak: alone). */
        if (t->weak && !e->weak && (rc = tg_weak_take(n, 1 + i, e->type.dtype, ctx))) return rc;
        if (e->weak && (rc = tg_weak_take(n, 1 + k + i, t->type.dtype, ctx))) return rc;
        if (t->weak && (rc = tg_weak_take(n, 1 + i, t->type.dtype, ctx))) return rc;
        if (t->type.dtype != e->type.dtype)
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s': the else value is %s but the then value '%s' (inputs[%d]) is %s",
                             1 + k + i, e->id, tg_dtype_name(e->type.dtype), t->id, 1 + i,
                             tg_dtype_name(t->type.dtype));
        if (t->type.ndim != e->type.ndim)
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s': the else value has %d dimensions but the then value '%s' "
                             "(inputs[%d]) has %d",
                             1 + k + i, e->id, e->type.ndim, t->id, 1 + i, t->type.ndim);
        int64_t shape[TG_MAX_NDIM];
        for (int d = 0; d < t->type.ndim; d++)
            shape[d] = t->type.shape[d] == e->type.shape[d] ? t->type.shape[d] : -1;
        tg_set_out_type(n, i, t->type.dtype, t->type.ndim, shape);
    }
    return TG_OK;
}

bool tg_ifelse_truth(const tg_array *c) {
    return tg_load_f64(c->dtype, c->data) != 0;
}

static int ifelse_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    int k = n->nout;
    bool c = tg_ifelse_truth(in[0]);
    for (int i = 0; i < k; i++) {
        int from = c ? 1 + i : 1 + k + i;
        if (!in[from])
            return tg_errorf(ctx, TG_ERUNTIME, "the %s value '%s' was not computed", c ? "then" : "else",
                             n->inputs[from]->id);
        tg_array *r = tg_array_ref(in[from]);
        tg_array_free(out[i]);
        out[i] = r;
    }
    return TG_OK;
}

static void ifelse_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                        double *bytes) {
    (void)n, (void)in, (void)out;
    *flops = 0;
    *bytes = 0;
}

/* d ti = ifelse(cond, g, 0), d ei = ifelse(cond, 0, g); cond gets none. */
static int ifelse_grad(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    int k = n->nout;
    tg_var *cond = n->inputs[0];
    for (int i = 0; i < k; i++) {
        if (!gout[i]) continue;
        for (int side = 0; side < 2; side++) {
            tg_var *x = n->inputs[1 + side * k + i];
            if (!tg_dtype_is_float(x->type.dtype)) continue;
            tg_var *z = tg_gb_op1(b, "zeros_like", x, NULL);
            if (!z) return b->ctx && b->ctx->status ? b->ctx->status : TG_ENOMEM;
            tg_var *g = gout[i];
            if (g->type.dtype != x->type.dtype) {
                char attrs[64];
                snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", tg_dtype_name(x->type.dtype));
                if (!(g = tg_gb_op1(b, "cast", g, attrs)))
                    return b->ctx && b->ctx->status ? b->ctx->status : TG_ENOMEM;
            }
            tg_var *in[3] = {cond, side ? z : g, side ? g : z};
            if (!(gin[1 + side * k + i] = tg_gb_op(b, "ifelse", 3, in, NULL)))
                return b->ctx && b->ctx->status ? b->ctx->status : TG_ENOMEM;
        }
    }
    return TG_OK;
}

const tg_op tg_op_ifelse = {.name = "ifelse",
                            .nin_min = 3,
                            .nin_max = -1,
                            .nout = -1,
                            .flags = TG_OPF_LAZY,
                            .parse_attrs = ifelse_attrs,
                            .infer = ifelse_infer,
                            .run = ifelse_run,
                            .cost = ifelse_cost,
                            .view_of = -1,
                            .grad = ifelse_grad};

/* ---- op_from_graph ---- */

static const char *const OFG_KEYS[] = {"body", "name", NULL};

static void ofg_free_extra(tg_attrs *a) {
    tg_ofg *b = a->extra;
    if (!b) return;
    tg_function_free(b->f);
    tg_graph_free(b->g);
    tg_free(b);
    a->extra = NULL;
}

static int ofg_attrs(tg_node *n, tg_ctx *ctx) {
    json_object *jb;
    int rc;
    if (!n->attrs || !json_object_object_get_ex(n->attrs, "body", &jb))
        return tg_errorf(ctx, TG_ELOAD, "attrs.body: missing (a body: variables, nodes, inputs, outputs)");
    char *name = NULL;
    if ((rc = tg_attr_string(n, "name", "op_from_graph", &name, ctx))) return rc;
    tg_free(name);
    if (n->a.extra) ofg_free_extra(&n->a);
    tg_ofg *b = tg_calloc(1, sizeof *b);
    if (!b) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    if (!(b->g = tg_body_load(jb, "attrs.body", ctx))) {
        tg_free(b);
        return ctx ? ctx->status : TG_ELOAD;
    }
    tg_fdecl *fd = &b->g->funcs[0];
    for (int i = 0; i < b->g->nvars; i++)
        if (b->g->vars[i]->kind == TG_VAR_SHARED) {
            rc = tg_errorf(ctx, TG_ELOAD,
                           "attrs.body.variables[%d]: '%s' is shared; a body has no state of its own "
                           "(pass it as an input)",
                           b->g->vars[i]->json_index, b->g->vars[i]->id);
            goto fail;
        }
    if (n->nout != fd->nout) {
        rc = tg_errorf(ctx, TG_ELOAD, "outputs: the body has %d output%s, the node lists %d", fd->nout,
                       fd->nout == 1 ? "" : "s", n->nout);
        goto fail;
    }
    if (n->nin != fd->nin) {
        rc = tg_errorf(ctx, TG_ELOAD, "inputs: the body takes %d input%s, the node gives %d", fd->nin,
                       fd->nin == 1 ? "" : "s", n->nin);
        goto fail;
    }
    n->a.extra = b;
    return TG_OK;
fail:
    tg_graph_free(b->g);
    tg_free(b);
    return rc;
}

static int ofg_infer(tg_node *n, tg_ctx *ctx) {
    tg_ofg *b = n->a.extra;
    tg_fdecl *fd = &b->g->funcs[0];
    int rc;
    for (int i = 0; i < n->nin; i++) {
        const tg_type *want = &fd->inputs[i]->type;
        if (n->inputs[i]->weak && (rc = tg_weak_take(n, i, want->dtype, ctx))) return rc;
        const tg_type *got = &n->inputs[i]->type;
        if (!tg_type_compatible(want, got)) {
            char ws[160], gs[160];
            tg_type_str(want, ws, sizeof ws);
            tg_type_str(got, gs, sizeof gs);
            return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s': the body's input '%s' is %s, got %s", i,
                             tg_var_label(n->inputs[i]), fd->inputs[i]->id, ws, gs);
        }
    }
    for (int k = 0; k < n->nout; k++) {
        const tg_type *t = &fd->outputs[k]->type;
        tg_set_out_type(n, k, t->dtype, t->ndim, t->shape);
    }
    return TG_OK;
}

const char *tg_ofg_name(const tg_node *n) {
    json_object *jn;
    if (n->attrs && json_object_object_get_ex(n->attrs, "name", &jn) && json_object_is_type(jn, json_type_string))
        return json_object_get_string(jn);
    return "op_from_graph";
}

int tg_ofg_compile_body(tg_node *n, tg_ctx *ctx) {
    tg_ofg *b = n->a.extra;
    if (b->f) return TG_OK;
    /* Compiled once, at the first run (or when the profiler asks), with
     * the default optimizer. */
    if (!(b->f = tg_function_compile(b->g, 0, NULL, ctx))) {
        tg_error_prefix(ctx, "compiling the body of '%s'", tg_ofg_name(n));
        return ctx && ctx->status ? ctx->status : TG_ERUNTIME;
    }
    return TG_OK;
}

static int ofg_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    tg_ofg *b = n->a.extra;
    int rc;
    if (!b->f && (rc = tg_ofg_compile_body(n, ctx))) return rc;
    tg_array *small[16], **res = small;
    if (n->nout > 16 && !(res = tg_calloc((size_t)n->nout, sizeof *res)))
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    if ((rc = tg_function_call(b->f, in, res, ctx))) {
        tg_error_prefix(ctx, "in the body of '%s'", tg_ofg_name(n));
    } else {
        for (int k = 0; k < n->nout; k++) {
            tg_array_free(out[k]);
            out[k] = res[k];
        }
    }
    if (res != small) tg_free(res);
    return rc;
}

static void ofg_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                     double *bytes) {
    (void)in;
    double f = 0, by = 0;
    /* The body's own estimate needs its arrays; the profile of the body
     * is its own function's. Count what the node moves. */
    for (int k = 0; k < n->nout; k++)
        if (out[k]) by += (double)tg_array_size_inline(out[k]) * (double)tg_isize(out[k]->dtype);
    *flops = f;
    *bytes = by;
}

/* The body's nodes copied into t in their order, reading the node's
 * inputs; out[k] gets the copy of body output k. */
int tg_ofg_copy_body(const tg_node *n, const tg_ofg_target *t, tg_var **out) {
    const tg_ofg *o = n->a.extra;
    tg_graph *g = o->g;
    tg_fdecl *fd = &g->funcs[0];
    for (int i = 0; i < g->nvars; i++) g->vars[i]->mark = NULL;
    for (int i = 0; i < fd->nin; i++) fd->inputs[i]->mark = n->inputs[i];
    int rc = TG_OK;
    tg_var *small[16], **ins = small;
    int cap = 16;
#define FAILED (t->ctx && t->ctx->status ? t->ctx->status : TG_ENOMEM)
    for (int j = 0; j < g->nnodes && !rc; j++) {
        tg_node *bn = g->nodes[j];
        if (bn->nin > cap) {
            if (ins != small) tg_free(ins);
            cap = bn->nin;
            if (!(ins = tg_calloc((size_t)cap, sizeof *ins))) {
                ins = small;
                rc = tg_errorf(t->ctx, TG_ENOMEM, "out of memory");
                break;
            }
        }
        for (int i = 0; i < bn->nin && !rc; i++) {
            tg_var *v = bn->inputs[i];
            if (!v->mark) {
                if (v->kind != TG_VAR_CONSTANT || !v->value) {
                    rc = tg_errorf(t->ctx, TG_EINVAL, "body variable '%s' has no value", v->id);
                    break;
                }
                if (!(v->mark = t->constant(t->ud, tg_array_ref(v->value)))) rc = FAILED;
            }
            ins[i] = v->mark;
        }
        if (rc) break;
        tg_node *c = t->node(t->ud, bn, ins);
        if (!c) {
            rc = FAILED;
            break;
        }
        for (int k = 0; k < bn->nout; k++) bn->outputs[k]->mark = c->outputs[k];
    }
    for (int k = 0; k < fd->nout && !rc; k++) {
        tg_var *v = fd->outputs[k];
        if (!v->mark && v->kind == TG_VAR_CONSTANT) v->mark = t->constant(t->ud, tg_array_ref(v->value));
        if (!(out[k] = v->mark)) rc = FAILED;
    }
#undef FAILED
    for (int i = 0; i < g->nvars; i++) g->vars[i]->mark = NULL;
    if (ins != small) tg_free(ins);
    return rc;
}

static tg_var *gb_constant(void *ud, tg_array *a) { return tg_gb_const_array(ud, a); }

static tg_node *gb_node(void *ud, const tg_node *bn, tg_var *const *ins) {
    return tg_gb_node(ud, bn->op, bn->nin, ins, bn->nout, bn->attrs);
}

int tg_ofg_inline_gb(tg_gb *b, const tg_node *n, tg_var **out) {
    tg_ofg_target t = {gb_constant, gb_node, b, b->ctx};
    return tg_ofg_copy_body(n, &t, out);
}

/* Output k depends on input i when the body's output k depends on its
 * input i (Theano's OpFromGraph.connection_pattern). */
int tg_ofg_connection(const tg_node *n, bool *conn, tg_ctx *ctx) {
    const tg_ofg *o = n->a.extra;
    int nin = n->nin, nout = n->nout;
    bool *bc = tg_calloc((size_t)nin * (size_t)nout + 1, sizeof *bc);
    if (!bc) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    int rc = tg_grad_body_connection(o->g, bc, ctx);
    for (size_t i = 0; i < (size_t)nin && !rc; i++)
        for (size_t k = 0; k < (size_t)nout; k++) conn[i * (size_t)nout + k] = bc[k * (size_t)nin + i];
    tg_free(bc);
    return rc;
}

/* Theano's OpFromGraph grad with inlining: the body is copied into the
 * gradient graph and differentiated there (docs/control-flow.md). */
static int ofg_grad(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    int rc = TG_OK, first = b->nnodes;
    tg_var **outs = tg_calloc((size_t)n->nout + 1, sizeof *outs);
    tg_var **f = tg_calloc((size_t)n->nout + 1, sizeof *f);
    tg_var **seed = tg_calloc((size_t)n->nout + 1, sizeof *seed);
    tg_var **w = tg_calloc((size_t)n->nin + 1, sizeof *w);
    tg_var **res = tg_calloc((size_t)n->nin + 1, sizeof *res);
    int *at = tg_calloc((size_t)n->nin + 1, sizeof *at);
    tg_node **copy = NULL;
    if (!outs || !f || !seed || !w || !res || !at) {
        rc = tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = tg_ofg_inline_gb(b, n, outs))) goto done;
    int nseed = 0, nw = 0;
    for (int k = 0; k < n->nout; k++)
        if (gout[k] && tg_dtype_is_float(outs[k]->type.dtype)) {
            f[nseed] = outs[k];
            seed[nseed++] = gout[k];
        }
    for (int i = 0; i < n->nin; i++) {
        bool dup = false;
        for (int j = 0; j < nw; j++) dup |= w[j] == n->inputs[i];
        if (tg_dtype_is_float(n->inputs[i]->type.dtype) && !dup) {
            at[nw] = i;
            w[nw++] = n->inputs[i];
        }
    }
    if (!nseed || !nw) goto done;
    /* The pass builds more nodes (b->nodes may move): its own list. */
    int nn = b->nnodes - first;
    if (!(copy = tg_calloc((size_t)nn + 1, sizeof *copy))) {
        rc = tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    if (nn) /* (an empty body adds no node: b->nodes may still be NULL) */
        memcpy(copy, b->nodes + first, sizeof *copy * (size_t)nn);
    if ((rc = tg_gb_lop(b, copy, nn, nseed, f, seed, nw, w, res))) goto done;
    for (int j = 0; j < nw; j++) gin[at[j]] = res[j];
done:
    tg_free(outs);
    tg_free(f);
    tg_free(seed);
    tg_free(w);
    tg_free(res);
    tg_free(at);
    tg_free(copy);
    return rc;
}

const tg_op tg_op_op_from_graph = {.name = "op_from_graph",
                                   .nin_min = 0,
                                   .nin_max = -1,
                                   .nout = -1,
                                   .flags = 0,
                                   .attr_keys = OFG_KEYS,
                                   .parse_attrs = ofg_attrs,
                                   .infer = ofg_infer,
                                   .run = ofg_run,
                                   .cost = ofg_cost,
                                   .view_of = -1,
                                   .free_extra = ofg_free_extra,
                                   .grad = ofg_grad};
