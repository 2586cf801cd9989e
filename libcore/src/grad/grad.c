/* Reverse-mode differentiation: the gradient builder, the `grad` derived
 * op expanded at load, and `sum_to`, which sums a gradient back to the
 * run-time shape of a broadcast operand. */
#include <stdio.h>
#include <string.h>

#include "grad/grad.h"

/* ---- the builder ---- */

static int gb_push(tg_gb *b, tg_node *n) {
    if (b->nnodes == b->cnodes) {
        int c = b->cnodes ? b->cnodes * 2 : 32;
        tg_node **p = tg_realloc(b->nodes, sizeof *p * (size_t)c);
        if (!p) return TG_ENOMEM;
        b->nodes = p;
        b->cnodes = c;
    }
    b->nodes[b->nnodes++] = n;
    return TG_OK;
}

static tg_var *gb_new_var(tg_gb *b, tg_var_kind kind) {
    char id[160];
    do snprintf(id, sizeof id, "%.100s.%d", b->prefix, b->serial++);
    while (tg_graph_find(b->g, id));
    tg_var *v = tg_var_new(id, kind);
    if (!v || tg_graph_add_var(b->g, v)) {
        tg_var_free(v);
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    return v;
}

tg_var *tg_gb_op(tg_gb *b, const char *opname, int nin, tg_var *const *in, const char *attrs) {
    const tg_op *op = tg_op_find(opname);
    if (!op) {
        tg_errorf(b->ctx, TG_EUNSUPPORTED, "gradient: op '%s' is not available", opname);
        return NULL;
    }
    int nout = op->nout > 0 ? op->nout : 1;
    tg_node *n = tg_node_new(op, nin, nout);
    if (!n) {
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < nin; i++) n->inputs[i] = in[i];
    if (attrs && !(n->attrs = json_tokener_parse(attrs))) {
        tg_node_free(n);
        tg_errorf(b->ctx, TG_EINVAL, "gradient: bad attrs %s for %s", attrs, opname);
        return NULL;
    }
    if (b->origin && tg_trace_copy(&n->trace, &b->origin->trace)) {
        tg_node_free(n);
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    for (int k = 0; k < nout; k++) {
        tg_var *v = gb_new_var(b, TG_VAR_RESULT);
        if (!v) {
            tg_node_free(n);
            return NULL;
        }
        v->owner = n;
        v->owner_index = k;
        n->outputs[k] = v;
    }
    if (gb_push(b, n)) {
        tg_node_free(n);
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    if ((op->parse_attrs && op->parse_attrs(n, b->ctx)) || op->infer(n, b->ctx)) {
        tg_error_prefix(b->ctx, "gradient node %s", opname);
        return NULL;
    }
    return n->outputs[0];
}

tg_var *tg_gb_op1(tg_gb *b, const char *op, tg_var *x, const char *attrs) {
    return x ? tg_gb_op(b, op, 1, &x, attrs) : NULL;
}

tg_var *tg_gb_op2(tg_gb *b, const char *op, tg_var *x, tg_var *y) {
    tg_var *in[2] = {x, y};
    return x && y ? tg_gb_op(b, op, 2, in, NULL) : NULL;
}

tg_var *tg_gb_const(tg_gb *b, tg_dtype dt, double v) {
    tg_var *c = gb_new_var(b, TG_VAR_CONSTANT);
    if (!c) return NULL;
    c->value = tg_array_new_scalar(dt, v);
    if (!c->value) {
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    c->inline_const = true;
    c->type.dtype = dt;
    c->type.ndim = 0;
    return c;
}

tg_var *tg_gb_sum_to(tg_gb *b, tg_var *g, tg_var *x) {
    if (!g) return NULL;
    /* Nothing to undo when the static shapes say no broadcasting. */
    if (g->type.ndim == x->type.ndim) {
        bool same = true;
        for (int d = 0; d < x->type.ndim; d++)
            same &= x->type.shape[d] >= 0 && x->type.shape[d] == g->type.shape[d];
        if (same) return g;
    }
    return tg_gb_op2(b, "sum_to", g, x);
}

/* ---- the engine ---- */

static bool differentiable(tg_dtype dt) { return tg_dtype_is_float(dt); }

/* Accumulate contribution c into acc[v]. */
static int accumulate(tg_gb *b, tg_var **acc, const tg_var *v, tg_var *c) {
    if (!c) return TG_OK;
    if (!acc[v->index]) {
        acc[v->index] = c;
        return TG_OK;
    }
    tg_var *s = tg_gb_op2(b, "add", acc[v->index], c);
    if (!s) return b->ctx ? b->ctx->status : TG_ENOMEM;
    acc[v->index] = s;
    return TG_OK;
}

int tg_grad_expand(tg_graph *g, tg_node *gn, tg_node ***out, int *nout, tg_ctx *ctx) {
    int rc = TG_OK, nvars0 = g->nvars;
    tg_gb b = {.g = g, .ctx = ctx, .origin = gn, .prefix = gn->outputs[0]->id};
    tg_var *cost = gn->inputs[0];
    char desc[256];
    tg_node_describe(gn, desc, sizeof desc);
    tg_var **acc = tg_calloc((size_t)nvars0 + 1, sizeof *acc);
    char *dep = tg_calloc((size_t)nvars0 + 1, 1);   /* depends on some w */
    char *need = tg_calloc((size_t)nvars0 + 1, 1);  /* an ancestor of cost */
    tg_var **gout = NULL, **gin = NULL;
    if (!acc || !dep || !need) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    if (cost->type.ndim != 0) {
        rc = tg_errorf(ctx, TG_ETYPE, "inputs[0]: the cost '%s' must be a scalar, not %d-dimensional",
                       cost->id, cost->type.ndim);
        goto done;
    }
    if (!differentiable(cost->type.dtype)) {
        rc = tg_errorf(ctx, TG_ETYPE, "inputs[0]: the cost '%s' is %s; it must be a float", cost->id,
                       tg_dtype_name(cost->type.dtype));
        goto done;
    }
    int nw = gn->nin - 1;
    if (gn->nout != nw) {
        rc = tg_errorf(ctx, TG_ELOAD, "outputs: grad of %d variables needs %d outputs, got %d", nw, nw,
                       gn->nout);
        goto done;
    }
    for (int j = 1; j < gn->nin; j++) dep[gn->inputs[j]->index] = 1;
    /* Forward: what depends on the w's (nodes are in topological order,
     * and every node before gn is typed). */
    int last = -1;
    for (int i = 0; i < g->nnodes && g->nodes[i] != gn; i++) {
        tg_node *n = g->nodes[i];
        bool d = false;
        for (int k = 0; k < n->nin; k++) d |= n->inputs[k]->index < nvars0 && dep[n->inputs[k]->index];
        if (d)
            for (int k = 0; k < n->nout; k++) dep[n->outputs[k]->index] = 1;
        last = i;
    }
    /* Backward: what the cost needs. */
    need[cost->index] = 1;
    for (int i = last; i >= 0; i--) {
        tg_node *n = g->nodes[i];
        bool nd = false;
        for (int k = 0; k < n->nout; k++) nd |= need[n->outputs[k]->index];
        if (nd)
            for (int k = 0; k < n->nin; k++) need[n->inputs[k]->index] = 1;
    }
    for (int j = 1; j < gn->nin; j++) {
        const tg_var *w = gn->inputs[j];
        if (!differentiable(w->type.dtype)) {
            rc = tg_errorf(ctx, TG_ETYPE, "inputs[%d]: cannot differentiate with respect to '%s' of dtype %s",
                           j, w->id, tg_dtype_name(w->type.dtype));
            goto done;
        }
        if (!need[w->index] && gn->a.mode == 0) {
            rc = tg_errorf(ctx, TG_ELOAD,
                           "inputs[%d]: the cost '%s' does not depend on '%s' (attrs.disconnected is "
                           "\"raise\"; use \"warn\" or \"ignore\" to get zeros)",
                           j, cost->id, w->id);
            goto done;
        }
    }
    acc[cost->index] = tg_gb_op1(&b, "ones_like", cost, NULL);
    if (!acc[cost->index]) {
        rc = ctx ? ctx->status : TG_ENOMEM;
        goto done;
    }
    int maxio = 1;
    for (int i = 0; i <= last; i++) {
        if (g->nodes[i]->nin > maxio) maxio = g->nodes[i]->nin;
        if (g->nodes[i]->nout > maxio) maxio = g->nodes[i]->nout;
    }
    gout = tg_calloc((size_t)maxio, sizeof *gout);
    gin = tg_calloc((size_t)maxio, sizeof *gin);
    if (!gout || !gin) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = last; i >= 0 && !rc; i--) {
        tg_node *n = g->nodes[i];
        bool any = false, relevant = false;
        for (int k = 0; k < n->nout; k++) {
            gout[k] = acc[n->outputs[k]->index];
            any |= gout[k] != NULL;
        }
        for (int k = 0; k < n->nin; k++)
            relevant |= n->inputs[k]->index < nvars0 && dep[n->inputs[k]->index] &&
                        differentiable(n->inputs[k]->type.dtype);
        if (!any || !relevant) continue;
        for (int k = 0; k < n->nin; k++) gin[k] = NULL;
        if (n->op->flags & TG_OPF_NONDIFF) continue;
        if (!n->op->grad) {
            char nd[256];
            tg_node_describe(n, nd, sizeof nd);
            rc = tg_errorf(ctx, TG_EUNSUPPORTED, "the gradient of %s (op %s) is not implemented yet", nd,
                           n->op->name);
            break;
        }
        b.origin = n;
        if ((rc = n->op->grad(&b, n, gout, gin))) {
            char nd[256];
            tg_node_describe(n, nd, sizeof nd);
            tg_error_prefix(ctx, "differentiating %s", nd);
            break;
        }
        for (int k = 0; k < n->nin && !rc; k++) {
            tg_var *v = n->inputs[k];
            if (!gin[k] || v->index >= nvars0 || !dep[v->index] || !differentiable(v->type.dtype)) continue;
            /* Gradients keep their input's dtype. */
            if (gin[k]->type.dtype != v->type.dtype) {
                char attrs[64];
                snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", tg_dtype_name(v->type.dtype));
                gin[k] = tg_gb_op1(&b, "cast", gin[k], attrs);
                if (!gin[k]) {
                    rc = ctx ? ctx->status : TG_ENOMEM;
                    break;
                }
            }
            rc = accumulate(&b, acc, v, gin[k]);
        }
    }
    /* The grad node's outputs become identities of the gradients (or zeros
     * for a w the cost does not reach). */
    b.origin = gn;
    for (int j = 1; j < gn->nin && !rc; j++) {
        tg_var *w = gn->inputs[j], *gw = acc[w->index];
        if (!gw && !(gw = tg_gb_op1(&b, "zeros_like", w, NULL))) {
            rc = ctx ? ctx->status : TG_ENOMEM;
            break;
        }
        const tg_op *idop = tg_op_find("identity");
        tg_node *idn = tg_node_new(idop, 1, 1);
        if (!idn || gb_push(&b, idn)) {
            tg_node_free(idn);
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            break;
        }
        idn->inputs[0] = gw;
        idn->outputs[0] = gn->outputs[j - 1];
        idn->outputs[0]->owner = idn;
        idn->outputs[0]->owner_index = 0;
        idn->json_index = gn->json_index;
        if (gn->name && !(idn->name = tg_strdup(gn->name))) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        if (!rc) rc = tg_trace_copy(&idn->trace, &gn->trace);
        if (!rc) rc = idop->infer(idn, ctx);
    }
done:
    if (rc) {
        if (ctx && ctx->status == TG_OK) ctx->status = rc;
        for (int i = 0; i < b.nnodes; i++) {
            /* Outputs handed over to identities belong to the grad node. */
            tg_node *n = b.nodes[i];
            for (int k = 0; k < n->nout; k++)
                if (n->outputs[k] && n->outputs[k]->owner == n && n->op == tg_op_find("identity"))
                    n->outputs[k]->owner = gn;
            tg_node_free(n);
        }
        tg_free(b.nodes);
        *out = NULL;
        *nout = 0;
    } else {
        *out = b.nodes;
        *nout = b.nnodes;
    }
    (void)desc;
    tg_free(acc);
    tg_free(dep);
    tg_free(need);
    tg_free(gout);
    tg_free(gin);
    return rc;
}

/* ---- the `grad` op: a place holder in the table so that files can name
 * it; the loader expands it (tg_grad_expand) and it never runs. ---- */

static const char *const GRAD_KEYS[] = {"disconnected", NULL};
static const char *const DISC[] = {"raise", "warn", "ignore", NULL};

static int grad_attrs(tg_node *n, tg_ctx *ctx) {
    return tg_attr_enum(n, "disconnected", DISC, 0, &n->a.mode, ctx);
}

static int grad_infer(tg_node *n, tg_ctx *ctx) {
    return tg_errorf(ctx, TG_ELOAD, "grad must be expanded by the loader");
}

static int grad_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    return tg_errorf(ctx, TG_ERUNTIME, "grad nodes are expanded when the graph is loaded");
}

static void no_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *f, double *by) {
    *f = 0;
    *by = 0;
}

const tg_op tg_op_grad = {
    .name = "grad",
    .nin_min = 2,
    .nin_max = -1,
    .nout = -1,
    .flags = TG_OPF_DERIVED,
    .attr_keys = GRAD_KEYS,
    .parse_attrs = grad_attrs,
    .infer = grad_infer,
    .run = grad_run,
    .cost = no_cost,
    .view_of = -1,
};

/* ---- sum_to(g, x): g summed over the axes along which x was broadcast,
 * giving x's run-time shape (leading axes g has and x lacks, and axes
 * where x has length 1). ---- */

static int sum_to_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *g = &n->inputs[0]->type, *x = &n->inputs[1]->type;
    if (g->ndim < x->ndim)
        return tg_errorf(ctx, TG_ETYPE, "sum_to: the gradient has fewer dimensions than its target");
    tg_set_out_type(n, 0, g->dtype, x->ndim, x->shape);
    return TG_OK;
}

static void acc_loop(int64_t n, char **p, const int64_t *s, void *ud) {
    tg_dtype dt = *(tg_dtype *)ud;
    if (dt == TG_FLOAT64)
        for (int64_t i = 0; i < n; i++) *(double *)(p[0] + i * s[0]) += *(const double *)(p[1] + i * s[1]);
    else if (dt == TG_FLOAT32)
        for (int64_t i = 0; i < n; i++) *(float *)(p[0] + i * s[0]) += *(const float *)(p[1] + i * s[1]);
    else
        for (int64_t i = 0; i < n; i++)
            tg_store_f64(dt, p[0] + i * s[0], tg_load_f64(dt, p[0] + i * s[0]) + tg_load_f64(dt, p[1] + i * s[1]));
}

static int sum_to_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *g = in[0], *x = in[1];
    int off = g->ndim - x->ndim;
    if (off < 0) return tg_errorf(ctx, TG_ESHAPE, "sum_to: gradient of lower rank than its target");
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != g->shape[d + off] && x->shape[d] != 1)
            return tg_errorf(ctx, TG_ESHAPE, "sum_to: length %lld cannot be summed to %lld (dimension %d)",
                             (long long)g->shape[d + off], (long long)x->shape[d], d);
    int rc = tg_array_prepare(&out[0], g->dtype, x->ndim, x->shape, ctx);
    if (rc) return rc;
    memset(out[0]->data, 0, (size_t)tg_array_size_inline(out[0]) * tg_dtype_size(g->dtype));
    int64_t st[2][TG_MAX_NDIM];
    for (int d = 0; d < g->ndim; d++) {
        st[1][d] = g->strides[d];
        int xd = d - off;
        st[0][d] = xd < 0 || x->shape[xd] == 1 ? 0 : out[0]->strides[xd];
    }
    char *base[2] = {out[0]->data, g->data};
    tg_dtype dt = g->dtype;
    /* Not parallel: several threads could add into one output element. */
    tg_iter_run(2, base, g->ndim, g->shape, (const int64_t(*)[TG_MAX_NDIM])st, acc_loop, &dt, false);
    return TG_OK;
}

static void sum_to_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *f, double *by) {
    *f = (double)tg_array_size_inline(in[0]);
    *by = *f * (double)tg_dtype_size(in[0]->dtype);
}

static int sum_to_grad(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    /* The gradient of a sum over broadcast axes is the broadcast. */
    tg_var *z = tg_gb_op1(b, "zeros_like", n->inputs[0], NULL);
    gin[0] = tg_gb_op2(b, "add", z, gout[0]);
    return gin[0] ? TG_OK : TG_ENOMEM;
}

const tg_op tg_op_sum_to = {
    .name = "sum_to",
    .nin_min = 2,
    .nin_max = 2,
    .nout = 1,
    .infer = sum_to_infer,
    .run = sum_to_run,
    .cost = sum_to_cost,
    .view_of = -1,
    .grad = sum_to_grad,
};
