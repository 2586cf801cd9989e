/* Reverse-mode differentiation: the gradient builder, the derived ops
 * `grad`, `lop` and `rop` expanded at load (rop by two reverse passes), and `sum_to`, which sums a gradient back to the
 * run-time shape of a broadcast operand. */
#include <stdio.h>
#include <string.h>

#include "grad/grad.h"
#include "io/io.h"

/* ---- the builder ---- */

static const char *node_key(const tg_node *n) { return n->nout ? n->outputs[0]->id : n->op->name; }

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
    json_object *ja = NULL;
    tg_json_fail jf;
    if (attrs && !(ja = tg_json_parse_object(NULL, attrs, strlen(attrs), TG_JSON_ATTRS_DEPTH, &jf))) {
        if (jf.status == TG_ENOMEM)
            tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        else
            tg_errorf(b->ctx, TG_EINVAL, "gradient: bad attrs %s for %s", attrs, opname);
        return NULL;
    }
    tg_node *n = tg_gb_node(b, op, nin, in, op->nout > 0 ? op->nout : 1, ja);
    json_object_put(ja);
    return n ? n->outputs[0] : NULL;
}

tg_node *tg_gb_node(tg_gb *b, const tg_op *op, int nin, tg_var *const *in, int nout, json_object *attrs) {
    const char *opname = op->name;
    tg_node *n = tg_node_new(op, nin, nout);
    if (!n) {
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < nin; i++) n->inputs[i] = in[i];
    if (attrs) n->attrs = json_object_get(attrs);
    if (b->origin && tg_trace_copy(&n->trace, &b->origin->trace)) {
        tg_node_free(n);
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    /* Which derivative the node takes part in, for the messages and tools
     * that name it: it has no place in the file. */
    if (b->by) {
        const tg_node *o = b->origin && b->origin != b->by ? b->origin : NULL;
        if (!(n->grad_of = tg_grad_of_pack(o ? node_key(o) : "", o ? o->op->name : "", node_key(b->by),
                                           b->by->op->name))) {
            tg_node_free(n);
            tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
            return NULL;
        }
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
    return n;
}

tg_var *tg_gb_op1(tg_gb *b, const char *op, tg_var *x, const char *attrs) {
    return x ? tg_gb_op(b, op, 1, &x, attrs) : NULL;
}

tg_var *tg_gb_op2(tg_gb *b, const char *op, tg_var *x, tg_var *y) {
    tg_var *in[2] = {x, y};
    return x && y ? tg_gb_op(b, op, 2, in, NULL) : NULL;
}

tg_var *tg_gb_const(tg_gb *b, tg_dtype dt, double v) {
    return tg_gb_const_array(b, tg_array_new_scalar(dt, v));
}

tg_var *tg_gb_const_array(tg_gb *b, tg_array *a) {
    if (!a) {
        tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    tg_var *c = gb_new_var(b, TG_VAR_CONSTANT);
    if (!c) {
        tg_array_free(a);
        return NULL;
    }
    tg_var_set_constant(c, a);
    return c;
}

tg_var *tg_gb_sum_to(tg_gb *b, tg_var *g, tg_var *x) {
    if (!g) return NULL;
    if (g->type.ndim < x->type.ndim) {
        /* x has leading axes the gradient lacks: a y of shape (1, 5)
         * written into the (5,) row x[2] by set_subtensor or take_set, as
         * NumPy's assignment allows. They have length 1 wherever the
         * forward op ran, so the gradient gets them as new axes. */
        char a[16 + 6 * TG_MAX_NDIM];
        int k = snprintf(a, sizeof a, "{\"order\": [");
        for (int d = 0; d < x->type.ndim; d++) {
            int from = d - (x->type.ndim - g->type.ndim);
            k += from < 0 ? snprintf(a + k, sizeof a - (size_t)k, "%s\"x\"", d ? ", " : "")
                          : snprintf(a + k, sizeof a - (size_t)k, "%s%d", d ? ", " : "", from);
        }
        snprintf(a + k, sizeof a - (size_t)k, "]}");
        g = tg_gb_op1(b, "dimshuffle", g, a);
        if (!g) return NULL;
    }
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

static int ctx_rc(const tg_gb *b) { return b->ctx && b->ctx->status ? b->ctx->status : TG_ENOMEM; }

/* Accumulate contribution c into acc[v]. */
static int accumulate(tg_gb *b, tg_var **acc, const tg_var *v, tg_var *c) {
    if (!c) return TG_OK;
    if (!acc[v->index]) {
        acc[v->index] = c;
        return TG_OK;
    }
    tg_var *s = tg_gb_op2(b, "add", acc[v->index], c);
    if (!s) return ctx_rc(b);
    acc[v->index] = s;
    return TG_OK;
}

tg_var *tg_gb_cast(tg_gb *b, tg_var *g, tg_dtype dt) {
    if (!g || g->type.dtype == dt) return g;
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", tg_dtype_name(dt));
    return tg_gb_op1(b, "cast", g, attrs);
}

/* ---- connection patterns ---- */

extern const tg_op tg_op_scan, tg_op_op_from_graph;

/* The ops whose outputs need not depend on all of their inputs. */
static bool has_pattern(const tg_op *op) { return op == &tg_op_scan || op == &tg_op_op_from_graph; }

int tg_grad_connection(const tg_node *n, bool *conn, tg_ctx *ctx) {
    if (n->op == &tg_op_scan) return tg_scan_connection(n, conn, ctx);
    if (n->op == &tg_op_op_from_graph) return tg_ofg_connection(n, conn, ctx);
    memset(conn, 1, (size_t)n->nin * (size_t)n->nout * sizeof *conn);
    return TG_OK;
}

/* v is a variable of graph g (its index names its row). */
static bool in_graph(const tg_graph *g, const tg_var *v) {
    return v->index >= 0 && v->index < g->nvars && g->vars[v->index] == v;
}

int tg_grad_body_connection(const tg_graph *body, bool *conn, tg_ctx *ctx) {
    const tg_fdecl *fd = &body->funcs[0];
    int nin = fd->nin, nout = fd->nout, rc = TG_OK;
    size_t words = ((size_t)nin + 63) / 64 + 1, cnc = 0;
    /* A row per variable: the body inputs it depends on, as bits; the
     * last row is every input (a variable not found in the body's list,
     * which should not happen: assume the worst). */
    uint64_t *bits = tg_calloc(((size_t)body->nvars + 1) * words, sizeof *bits);
    bool *nc = NULL;
    if (!bits) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    uint64_t *full = bits + (size_t)body->nvars * words;
    for (int i = 0; i < nin; i++) full[i / 64] |= (uint64_t)1 << (i % 64);
#define ROW(v)                                                                                                 \
    (in_graph(body, v) ? bits + (size_t)(v)->index * words : (v)->kind == TG_VAR_CONSTANT ? NULL : full)
    for (int i = 0; i < nin; i++) {
        uint64_t *r = in_graph(body, fd->inputs[i]) ? bits + (size_t)fd->inputs[i]->index * words : NULL;
        if (r) r[i / 64] |= (uint64_t)1 << (i % 64);
    }
    for (int j = 0; j < body->nnodes && !rc; j++) {
        const tg_node *bn = body->nodes[j];
        bool pat = has_pattern(bn->op);
        if (pat) {
            size_t sz = (size_t)bn->nin * (size_t)bn->nout + 1;
            if (sz > cnc) {
                tg_free(nc);
                if (!(nc = tg_malloc(sz))) {
                    rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                    break;
                }
                cnc = sz;
            }
            if ((rc = tg_grad_connection(bn, nc, ctx))) break;
        }
        for (int k = 0; k < bn->nout; k++) {
            if (!in_graph(body, bn->outputs[k])) continue;
            uint64_t *r = bits + (size_t)bn->outputs[k]->index * words;
            for (int i = 0; i < bn->nin; i++) {
                const uint64_t *s = ROW(bn->inputs[i]);
                if (!s || (pat && !nc[(size_t)i * (size_t)bn->nout + (size_t)k])) continue;
                for (size_t w = 0; w < words; w++) r[w] |= s[w];
            }
        }
    }
    for (int o = 0; o < nout && !rc; o++) {
        const uint64_t *r = ROW(fd->outputs[o]);
        for (int i = 0; i < nin; i++)
            conn[(size_t)o * (size_t)nin + (size_t)i] = r && (r[i / 64] >> (i % 64) & 1);
    }
#undef ROW
    tg_free(nc);
    tg_free(bits);
    return rc;
}

/* One reverse pass over nodes[0..nn) (topological order, typed): the
 * gradients seed[s] of the variables f[s] flow back to the w's, and res[j]
 * gets the sum of the vector-Jacobian products reaching w[j], or NULL
 * where none does. */
typedef struct pass {
    tg_node *const *nodes;
    int nn;
    int nseed;
    tg_var *const *f, *const *seed;
    int nw;
    tg_var *const *w;
    int w_at;         /* index of w[0] among the derived node's inputs (messages) */
    const char *what; /* how messages name f[0] */
    bool raise;       /* a w that no f depends on is an error */
    bool warn;        /* ... is a warning on the graph (zeros) */
} pass;

static int reverse(tg_gb *b, const pass *p, tg_var **res) {
    tg_ctx *ctx = b->ctx;
    int rc = TG_OK, nv = b->g->nvars;
    tg_var **acc = tg_calloc((size_t)nv + 1, sizeof *acc);
    char *dep = tg_calloc((size_t)nv + 1, 1);  /* depends on some w */
    char *need = tg_calloc((size_t)nv + 1, 1); /* an ancestor of some f */
    tg_var **gout = NULL, **gin = NULL;
    bool *conn = NULL; /* a connection pattern, cconn entries */
    size_t cconn = 0;
    if (!acc || !dep || !need) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int j = 0; j < p->nw; j++) dep[p->w[j]->index] = 1;
    for (int i = 0; i < p->nn; i++) {
        tg_node *n = p->nodes[i];
        bool d = false;
        for (int k = 0; k < n->nin; k++) d |= n->inputs[k]->index < nv && dep[n->inputs[k]->index];
        if (d)
            for (int k = 0; k < n->nout; k++) dep[n->outputs[k]->index] = 1;
    }
    /* What the f's depend on, through each node's connection pattern:
     * an input of a scan or op_from_graph node that none of its needed
     * outputs depends on (by its body) is not needed (only the check of
     * attrs.disconnected reads it). */
    const bool check = p->raise || p->warn;
    for (int s = 0; s < p->nseed && check; s++) need[p->f[s]->index] = 1;
    for (int i = p->nn - 1; i >= 0 && check; i--) {
        tg_node *n = p->nodes[i];
        bool nd = false;
        for (int k = 0; k < n->nout; k++) nd |= n->outputs[k]->index < nv && need[n->outputs[k]->index];
        if (!nd) continue;
        if (!has_pattern(n->op)) {
            for (int k = 0; k < n->nin; k++)
                if (n->inputs[k]->index < nv) need[n->inputs[k]->index] = 1;
            continue;
        }
        size_t sz = (size_t)n->nin * (size_t)n->nout + 1;
        if (sz > cconn) {
            tg_free(conn);
            if (!(conn = tg_malloc(sz))) {
                rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                goto done;
            }
            cconn = sz;
        }
        if ((rc = tg_grad_connection(n, conn, ctx))) goto done;
        for (int k = 0; k < n->nin; k++) {
            if (n->inputs[k]->index >= nv) continue;
            for (int o = 0; o < n->nout; o++)
                if (conn[(size_t)k * (size_t)n->nout + (size_t)o] && n->outputs[o]->index < nv &&
                    need[n->outputs[o]->index]) {
                    need[n->inputs[k]->index] = 1;
                    break;
                }
        }
    }
    for (int j = 0; j < p->nw; j++) {
        const tg_var *w = p->w[j];
        if (!differentiable(w->type.dtype)) {
            rc = tg_errorf(ctx, TG_ETYPE, "inputs[%d]: cannot differentiate with respect to '%s' of dtype %s",
                           p->w_at + j, w->id, tg_dtype_name(w->type.dtype));
            goto done;
        }
        if (!need[w->index] && p->raise) {
            rc = tg_errorf(ctx, TG_ELOAD,
                           "inputs[%d]: %s '%s' does not depend on '%s' (attrs.disconnected is "
                           "\"raise\"; use \"warn\" or \"ignore\" to get zeros)",
                           p->w_at + j, p->what, p->f[0]->id, w->id);
            goto done;
        }
        if (!need[w->index] && p->warn) {
            char desc[256];
            tg_node_describe(b->by, desc, sizeof desc);
            tg_graph_warnf(b->g, "%s: inputs[%d]: %s '%s' does not depend on '%s' (attrs.disconnected is "
                                 "\"warn\"): its gradient is zeros",
                           desc, p->w_at + j, p->what, p->f[0]->id, w->id);
        }
    }
    for (int s = 0; s < p->nseed && !rc; s++) {
        tg_var *sd = tg_gb_cast(b, p->seed[s], p->f[s]->type.dtype);
        rc = sd ? accumulate(b, acc, p->f[s], sd) : ctx_rc(b);
    }
    if (rc) goto done;
    int maxio = 1;
    for (int i = 0; i < p->nn; i++) {
        if (p->nodes[i]->nin > maxio) maxio = p->nodes[i]->nin;
        if (p->nodes[i]->nout > maxio) maxio = p->nodes[i]->nout;
    }
    gout = tg_calloc((size_t)maxio, sizeof *gout);
    gin = tg_calloc((size_t)maxio, sizeof *gin);
    if (!gout || !gin) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    const tg_node *origin = b->origin;
    for (int i = p->nn - 1; i >= 0 && !rc; i--) {
        tg_node *n = p->nodes[i];
        bool any = false, relevant = false;
        for (int k = 0; k < n->nout; k++) {
            gout[k] = n->outputs[k]->index < nv ? acc[n->outputs[k]->index] : NULL;
            any |= gout[k] != NULL;
        }
        for (int k = 0; k < n->nin; k++)
            relevant |= n->inputs[k]->index < nv && dep[n->inputs[k]->index] &&
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
        b->origin = n;
        if ((rc = n->op->grad(b, n, gout, gin))) {
            char nd[256];
            tg_node_describe(n, nd, sizeof nd);
            tg_error_prefix(ctx, "differentiating %s", nd);
            break;
        }
        for (int k = 0; k < n->nin && !rc; k++) {
            tg_var *v = n->inputs[k];
            if (!gin[k] || v->index >= nv || !dep[v->index] || !differentiable(v->type.dtype)) continue;
            /* Gradients keep their input's dtype. */
            if (!(gin[k] = tg_gb_cast(b, gin[k], v->type.dtype))) {
                rc = ctx_rc(b);
                break;
            }
            rc = accumulate(b, acc, v, gin[k]);
        }
    }
    b->origin = origin;
    for (int j = 0; j < p->nw && !rc; j++) res[j] = acc[p->w[j]->index];
done:
    tg_free(acc);
    tg_free(dep);
    tg_free(need);
    tg_free(conn);
    tg_free(gout);
    tg_free(gin);
    return rc;
}

int tg_gb_lop(tg_gb *b, tg_node *const *nodes, int nn, int nseed, tg_var *const *f, tg_var *const *seed,
              int nw, tg_var *const *w, tg_var **res) {
    pass p = {.nodes = nodes, .nn = nn, .nseed = nseed, .f = f, .seed = seed, .nw = nw, .w = w,
              .w_at = 0, .what = "f", .raise = false};
    for (int j = 0; j < nw; j++) res[j] = NULL;
    return reverse(b, &p, res);
}

/* Output k of the derived node gn becomes an identity of value (or zeros
 * like `like` when value is NULL). */
static int bind_output(tg_gb *b, tg_node *gn, int k, tg_var *value, tg_var *like) {
    tg_ctx *ctx = b->ctx;
    if (!value && !(value = tg_gb_op1(b, "zeros_like", like, NULL))) return ctx_rc(b);
    const tg_op *idop = tg_op_find("identity");
    tg_node *idn = tg_node_new(idop, 1, 1);
    if (!idn || gb_push(b, idn)) {
        tg_node_free(idn);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    idn->inputs[0] = value;
    idn->outputs[0] = gn->outputs[k];
    idn->outputs[0]->owner = idn;
    idn->outputs[0]->owner_index = 0;
    idn->json_index = gn->json_index;
    if (gn->name && !(idn->name = tg_strdup(gn->name))) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    int rc = tg_trace_copy(&idn->trace, &gn->trace);
    if (rc) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return idop->infer(idn, ctx);
}

extern const tg_op tg_op_grad, tg_op_lop, tg_op_rop;

/* u must have f's rank and a compatible static shape. */
static int check_like(tg_ctx *ctx, int at, const tg_var *u, const tg_var *f, const char *role) {
    if (!differentiable(u->type.dtype))
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d]: '%s' is %s; it must be a float", at, u->id,
                         tg_dtype_name(u->type.dtype));
    bool same = u->type.ndim == f->type.ndim;
    for (int d = 0; same && d < u->type.ndim; d++)
        same = u->type.shape[d] < 0 || f->type.shape[d] < 0 || u->type.shape[d] == f->type.shape[d];
    if (!same) {
        char a[160], c[160];
        tg_type_str(&u->type, a, sizeof a);
        tg_type_str(&f->type, c, sizeof c);
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d]: '%s' is %s but must have the shape of %s '%s' (%s)", at,
                         u->id, a, role, f->id, c);
    }
    return TG_OK;
}

int tg_grad_expand(tg_graph *g, tg_node *gn, tg_node ***out, int *nout, tg_ctx *ctx) {
    int rc = TG_OK;
    tg_gb b = {.g = g, .ctx = ctx, .origin = gn, .by = gn, .prefix = gn->outputs[0]->id};
    tg_var *f = gn->inputs[0];
    tg_var **res = NULL, **f2 = NULL, **s2 = NULL;
    tg_node **all = NULL;
    bool is_grad = gn->op == &tg_op_grad, is_rop = gn->op == &tg_op_rop;
    int pos = 0;
    while (pos < g->nnodes && g->nodes[pos] != gn) pos++;
    if (!differentiable(f->type.dtype)) {
        rc = tg_errorf(ctx, TG_ETYPE, "inputs[0]: %s '%s' is %s; it must be a float", is_grad ? "the cost" : "f",
                       f->id, tg_dtype_name(f->type.dtype));
        goto done;
    }
    if (is_grad && f->type.ndim != 0) {
        rc = tg_errorf(ctx, TG_ETYPE, "inputs[0]: the cost '%s' must be a scalar, not %d-dimensional", f->id,
                       f->type.ndim);
        goto done;
    }
    int nw = is_grad ? gn->nin - 1 : is_rop ? (gn->nin - 1) / 2 : gn->nin - 2;
    int want_out = is_rop ? 1 : nw;
    if (is_rop && (gn->nin - 1) % 2) {
        rc = tg_errorf(ctx, TG_ELOAD, "inputs: rop(f, w1..wn, v1..vn) needs as many v's as w's, got %d inputs",
                       gn->nin);
        goto done;
    }
    if (gn->nout != want_out) {
        rc = tg_errorf(ctx, TG_ELOAD, "outputs: %s of %d variables needs %d outputs, got %d", gn->op->name, nw,
                       want_out, gn->nout);
        goto done;
    }
    if (!is_grad && !is_rop && (rc = check_like(ctx, gn->nin - 1, gn->inputs[gn->nin - 1], f, "f")))
        goto done;
    for (int j = 0; is_rop && j < nw; j++)
        if ((rc = check_like(ctx, 1 + nw + j, gn->inputs[1 + nw + j], gn->inputs[1 + j], "w")))
            goto done;
    res = tg_calloc((size_t)nw + 1, sizeof *res);
    f2 = tg_calloc((size_t)nw + 1, sizeof *f2);
    s2 = tg_calloc((size_t)nw + 1, sizeof *s2);
    if (!res || !f2 || !s2) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    /* The output gradient: ones for a cost, u for lop; for rop a dummy u
     * (zeros, never read by the result: lop is linear in u, so a second
     * reverse pass, from the lop's outputs seeded with the v's back to u,
     * gives J v). */
    tg_var *seed = is_grad ? tg_gb_op1(&b, "ones_like", f, NULL)
                   : is_rop ? tg_gb_op1(&b, "zeros_like", f, NULL)
                            : gn->inputs[gn->nin - 1];
    if (!seed) {
        rc = ctx_rc(&b);
        goto done;
    }
    pass p1 = {.nodes = g->nodes, .nn = pos, .nseed = 1, .f = &f, .seed = &seed, .nw = nw,
               .w = gn->inputs + 1, .w_at = 1, .what = is_grad ? "the cost" : "f", .raise = gn->a.mode == 0,
               .warn = gn->a.mode == 1};
    if ((rc = reverse(&b, &p1, res))) goto done;
    if (!is_rop) {
        for (int j = 0; j < nw && !rc; j++) rc = bind_output(&b, gn, j, res[j], gn->inputs[1 + j]);
        goto done;
    }
    int n2 = 0;
    for (int j = 0; j < nw; j++)
        if (res[j]) {
            f2[n2] = res[j];
            s2[n2++] = gn->inputs[1 + nw + j];
        }
    tg_var *jv = NULL;
    if (n2) {
        int nall = pos + b.nnodes;
        if (!(all = tg_malloc(sizeof *all * (size_t)nall))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        memcpy(all, g->nodes, sizeof *all * (size_t)pos);
        memcpy(all + pos, b.nodes, sizeof *all * (size_t)b.nnodes);
        pass p2 = {.nodes = all, .nn = nall, .nseed = n2, .f = f2, .seed = s2, .nw = 1, .w = &seed,
                   .w_at = 0, .what = "f", .raise = false};
        if ((rc = reverse(&b, &p2, &jv))) goto done;
    }
    rc = bind_output(&b, gn, 0, jv, f);
done:
    if (rc) {
        if (ctx && ctx->status == TG_OK) ctx->status = rc;
        /* Outputs handed over to identities belong to the derived node. */
        for (int k = 0; k < gn->nout; k++)
            if (gn->outputs[k]->owner != gn) {
                gn->outputs[k]->owner = gn;
                gn->outputs[k]->owner_index = k;
            }
        for (int i = 0; i < b.nnodes; i++) tg_node_free(b.nodes[i]);
        tg_free(b.nodes);
        *out = NULL;
        *nout = 0;
    } else {
        *out = b.nodes;
        *nout = b.nnodes;
        g->has_grads = true;
    }
    tg_free(res);
    tg_free(f2);
    tg_free(s2);
    tg_free(all);
    return rc;
}

/* ---- the derived ops `grad`, `lop`, `rop`: place holders in the table so
 * that files can name them; the loader expands them (tg_grad_expand) and
 * they never run. ---- */

static const char *const GRAD_KEYS[] = {"disconnected", NULL};
static const char *const DISC[] = {"raise", "warn", "ignore", NULL};

static int grad_attrs(tg_node *n, tg_ctx *ctx) {
    return tg_attr_enum(n, "disconnected", DISC, 0, &n->a.mode, ctx);
}

static int grad_infer(tg_node *n, tg_ctx *ctx) {
    return tg_errorf(ctx, TG_ELOAD, "%s must be expanded by the loader", n->op->name);
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

const tg_op tg_op_lop = {
    .name = "lop",
    .nin_min = 3,
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

const tg_op tg_op_rop = {
    .name = "rop",
    .nin_min = 3,
    .nin_max = -1,
    .nout = 1,
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

/* The sum over the leading axes g has and x lacks and over those where x
 * has length 1: the reductions' sum (ops/reduce.c: pairwise in float64,
 * float16 too, rounded once; integers wrap, bool is "any"), laid out in x's
 * shape. */
int tg_sum_to_mask(const tg_array *g, const tg_array *x, uint32_t *mask, tg_ctx *ctx) {
    int off = g->ndim - x->ndim;
    if (off < 0) return tg_errorf(ctx, TG_ESHAPE, "sum_to: gradient of lower rank than its target");
    *mask = 0;
    for (int d = 0; d < g->ndim; d++) {
        int xd = d - off;
        if (xd < 0) {
            *mask |= 1u << d;
        } else if (x->shape[xd] != g->shape[d]) {
            if (x->shape[xd] != 1)
                return tg_errorf(ctx, TG_ESHAPE, "sum_to: length %lld cannot be summed to %lld (dimension %d)",
                                 (long long)g->shape[d], (long long)x->shape[xd], xd);
            *mask |= 1u << d;
        }
    }
    return TG_OK;
}

static int sum_to_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const tg_array *g = in[0], *x = in[1];
    uint32_t mask = 0;
    int rc = tg_sum_to_mask(g, x, &mask, ctx);
    if (rc) return rc;
    if (!mask) {
        /* Nothing to sum (the gradient of an add whose operands had one
         * shape at run time): the gradient itself, taken over when the
         * in-place pass lets this node overwrite it, else copied. */
        if (tg_op_take_input(n, in, 0, &out[0])) return TG_OK;
        rc = tg_array_prepare(&out[0], g->dtype, x->ndim, x->shape, ctx);
        return rc ? rc : tg_array_assign(out[0], g, ctx);
    }
    return tg_reduce_sum_into(g, mask, g->dtype, x->ndim, x->shape, out, ctx);
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
    /* its result may take over the gradient's buffer: only when the
     * shapes agree at run time, when there is nothing to sum */
    .inplace_inputs = 1u,
    .grad = sum_to_grad,
};
