/* Gradient rules of the remaining families: var/std, batched matmul and
 * outer of matrices, the build ops (take, join, split, alloc, repeat...),
 * convolution and pooling, linear algebra, and the debugging ops. Same
 * conventions as rules.c: gout[i] is the gradient of output i (NULL:
 * zero), gin[j] receives that of input j (NULL: none). */
#include <stdio.h>
#include <string.h>

#include "grad/grad.h"

#define OP1(name, x) tg_gb_op1(b, name, x, NULL)
#define OP1A(name, x, attrs) tg_gb_op1(b, name, x, attrs)
#define OP2(name, x, y) tg_gb_op2(b, name, x, y)
#define MUL(x, y) OP2("mul", x, y)
#define DIV(x, y) OP2("true_div", x, y)
#define ADD(x, y) OP2("add", x, y)
#define SUB(x, y) OP2("sub", x, y)
#define NEG(x) OP1("neg", x)
#define I64(v) tg_gb_const(b, TG_INT64, v)

static tg_var *op3(tg_gb *b, const char *op, tg_var *x, tg_var *y, tg_var *z, const char *attrs) {
    tg_var *in[3] = {x, y, z};
    return x && y && z ? tg_gb_op(b, op, 3, in, attrs) : NULL;
}

static tg_var *op2a(tg_gb *b, const char *op, tg_var *x, tg_var *y, const char *attrs) {
    tg_var *in[2] = {x, y};
    return x && y ? tg_gb_op(b, op, 2, in, attrs) : NULL;
}

/* A builder failure leaves a NULL where a gradient was due; report the
 * builder's error then. */
static int finish(tg_gb *b, tg_node *n, tg_var **gin) {
    for (int k = 0; k < n->nin; k++)
        if (gin[k] == NULL && b->ctx && b->ctx->status != TG_OK) return b->ctx->status;
    return TG_OK;
}

static const char *attrs_of(const tg_node *n) {
    return n->attrs ? json_object_to_json_string(n->attrs) : NULL;
}

static tg_var *shape_i(tg_gb *b, tg_var *x, int i) {
    char a[48];
    snprintf(a, sizeof a, "{\"i\": %d}", i);
    return OP1A("shape_i", x, a);
}

static tg_var *cast_to(tg_gb *b, tg_var *v, tg_dtype dt) {
    char a[48];
    snprintf(a, sizeof a, "{\"dtype\": \"%s\"}", tg_dtype_name(dt));
    return v && v->type.dtype != dt ? OP1A("cast", v, a) : v;
}

/* dimshuffle(v) by `order`: each entry an axis of v, or -1 for "x". */
static tg_var *dimshuffle(tg_gb *b, tg_var *v, int norder, const int *order) {
    char a[256];
    int k = snprintf(a, sizeof a, "{\"order\": [");
    for (int i = 0; i < norder; i++)
        k += order[i] < 0 ? snprintf(a + k, sizeof a - (size_t)k, "%s\"x\"", i ? ", " : "")
                          : snprintf(a + k, sizeof a - (size_t)k, "%s%d", i ? ", " : "", order[i]);
    snprintf(a + k, sizeof a - (size_t)k, "]}");
    return v ? OP1A("dimshuffle", v, a) : NULL;
}

/* The last two axes swapped. */
static tg_var *swap_last(tg_gb *b, tg_var *v) {
    int nd = v ? v->type.ndim : 0, order[TG_MAX_NDIM];
    if (nd < 2) return v;
    for (int i = 0; i < nd; i++) order[i] = i;
    order[nd - 2] = nd - 1;
    order[nd - 1] = nd - 2;
    return dimshuffle(b, v, nd, order);
}

static tg_var *flat(tg_gb *b, tg_var *v) { return OP1A("flatten", v, "{\"ndim\": 1}"); }

static int norm(int ax, int nd) { return ax < 0 ? ax + nd : ax; }

/* ---- var, std ---- */

int tg_grad_varstd(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->inputs[0], *out = n->outputs[0], *g = gout[0];
    tg_dtype dt = out->type.dtype;
    int nd = x->type.ndim;
    tg_ctx_clear(b->ctx);
    /* d var / d x = 2 (x - mean) / (N - ddof): the mean's own derivative
     * sums to zero over the reduced axes. */
    char axes[256];
    int k = snprintf(axes, sizeof axes, "{\"axis\": ");
    uint32_t mask = n->a.axis_mask;
    if (!n->a.axis_null && !mask) {
        /* An empty axis list reduces nothing: the result is 0 (or NaN with
         * ddof >= 1) whatever x is. */
        gin[0] = MUL(g, tg_gb_const(b, dt, 0));
        return finish(b, n, gin);
    }
    if (n->a.axis_null) {
        mask = nd ? (uint32_t)((1ull << nd) - 1) : 0;
        k += snprintf(axes + k, sizeof axes - (size_t)k, "null");
    } else {
        k += snprintf(axes + k, sizeof axes - (size_t)k, "[");
        for (int d = 0, first = 1; d < nd; d++)
            if ((mask >> d) & 1u) {
                k += snprintf(axes + k, sizeof axes - (size_t)k, "%s%d", first ? "" : ", ", d);
                first = 0;
            }
        k += snprintf(axes + k, sizeof axes - (size_t)k, "]");
    }
    snprintf(axes + k, sizeof axes - (size_t)k, ", \"keepdims\": true}");
    tg_var *xc = cast_to(b, x, dt);
    tg_var *dev = SUB(xc, OP1A("mean", xc, axes));
    tg_var *ge = g, *oe = out;
    if (!n->a.keepdims && nd) {
        int order[TG_MAX_NDIM];
        for (int d = 0, j = 0; d < nd; d++) order[d] = (mask >> d) & 1u ? -1 : j++;
        ge = dimshuffle(b, g, nd, order);
        oe = dimshuffle(b, out, nd, order);
    }
    bool var = !strcmp(n->op->name, "var");
    if (dt != TG_FLOAT16) {
        tg_var *cnt = DIV(cast_to(b, OP1("prod", OP1("shape", x)), dt), cast_to(b, OP1("prod", OP1("shape", out)), dt));
        tg_var *den = SUB(cnt, tg_gb_const(b, dt, (double)n->a.ddof));
        gin[0] = var ? DIV(MUL(MUL(ge, dev), tg_gb_const(b, dt, 2)), den) : DIV(MUL(ge, dev), MUL(den, oe));
    } else {
        /* N in float16 is inf past 65504 (the gradient was 0): 2 / (N -
         * ddof) (var) or 1 / (N - ddof) (std) in float64, then in float16,
         * applied last, so that the product rounds to a subnormal once */
        tg_var *cnt = DIV(cast_to(b, OP1("prod", OP1("shape", x)), TG_FLOAT64),
                          cast_to(b, OP1("prod", OP1("shape", out)), TG_FLOAT64));
        tg_var *den = SUB(cnt, tg_gb_const(b, TG_FLOAT64, (double)n->a.ddof));
        tg_var *scale = cast_to(b, DIV(tg_gb_const(b, TG_FLOAT64, var ? 2 : 1), den), dt);
        gin[0] = MUL(var ? MUL(ge, dev) : DIV(MUL(ge, dev), oe), scale);
    }
    return finish(b, n, gin);
}

/* ---- products ---- */

int tg_grad_matmul(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->inputs[0], *y = n->inputs[1], *g = gout[0];
    int a = x->type.ndim, c = y->type.ndim, order[TG_MAX_NDIM];
    tg_ctx_clear(b->ctx);
    /* Vectors become matrices (a row on the left, a column on the right),
     * as matmul treats them; the batch axes broadcast. */
    tg_var *xe = x, *ye = y, *ge = g;
    if (a == 1) xe = dimshuffle(b, x, 2, (int[]){-1, 0});
    if (c == 1) ye = dimshuffle(b, y, 2, (int[]){0, -1});
    int gnd = g->type.ndim;
    if (c == 1) {
        for (int i = 0; i < gnd; i++) order[i] = i;
        order[gnd] = -1;
        ge = dimshuffle(b, ge, ++gnd, order);
    }
    if (a == 1) {
        for (int i = 0; i < gnd - 1; i++) order[i] = i;
        order[gnd - 1] = -1;
        order[gnd] = gnd - 1;
        ge = dimshuffle(b, ge, ++gnd, order);
    }
    tg_var *gx = tg_gb_sum_to(b, OP2("matmul", ge, swap_last(b, ye)), xe);
    tg_var *gy = tg_gb_sum_to(b, OP2("matmul", swap_last(b, xe), ge), ye);
    gin[0] = a == 1 ? OP2("reshape", gx, OP1("shape", x)) : gx;
    gin[1] = c == 1 ? OP2("reshape", gy, OP1("shape", y)) : gy;
    return finish(b, n, gin);
}

int tg_grad_outer(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    /* outer flattens its operands. */
    tg_var *x = n->inputs[0], *y = n->inputs[1], *g = gout[0];
    tg_ctx_clear(b->ctx);
    gin[0] = OP2("reshape", OP2("dot", g, flat(b, y)), OP1("shape", x));
    gin[1] = OP2("reshape", OP2("dot", flat(b, x), g), OP1("shape", y));
    return finish(b, n, gin);
}

/* ---- build ops ---- */

int tg_grad_build(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name;
    tg_var *g = gout[0], *x = n->inputs[0];
    char attrs[128];
    tg_ctx_clear(b->ctx);
    if (!strcmp(op, "take")) {
        int ax = norm(n->a.axes[0], x->type.ndim);
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ax);
        gin[0] = op3(b, "take_add", OP1("zeros_like", x), g, n->inputs[1], attrs);
    } else if (!strcmp(op, "take_add") || !strcmp(op, "take_set")) {
        tg_var *y = n->inputs[1], *idx = n->inputs[2];
        int nd = x->type.ndim, ax = norm(n->a.axes[0], nd);
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ax);
        tg_var *gy = op2a(b, "take", g, idx, attrs);
        if (op[5] == 'a') {
            gin[0] = g;
        } else {
            gin[0] = op3(b, "take_set", g, OP1("zeros_like", gy), idx, attrs);
            if (idx->type.ndim > 0) {
                /* Among repeated indices only the last write reaches the
                 * result: winner[i] = the last position that writes i. */
                tg_var *idxf = flat(b, idx);
                tg_var *pos = op3(b, "arange", I64(0), shape_i(b, idxf, 0), I64(1), NULL);
                tg_var *none = op2a(b, "alloc", I64(-1), shape_i(b, x, ax), NULL);
                tg_var *win = op3(b, "take_set", none, pos, idxf, "{\"axis\": 0}");
                tg_var *m = OP2("eq", op2a(b, "take", win, idxf, "{\"axis\": 0}"), pos);
                m = OP2("reshape", m, OP1("shape", idx));
                int order[TG_MAX_NDIM], k = 0, ind = idx->type.ndim;
                for (int d = 0; d < ax; d++) order[k++] = -1;
                for (int d = 0; d < ind; d++) order[k++] = d;
                for (int d = ax + 1; d < nd; d++) order[k++] = -1;
                m = dimshuffle(b, m, k, order);
                gy = op3(b, "switch", m, gy, tg_gb_const(b, g->type.dtype, 0), NULL);
            }
        }
        gin[1] = tg_gb_sum_to(b, gy, y);
    } else if (!strcmp(op, "join")) {
        int nd = n->outputs[0]->type.ndim, ax = norm(n->a.axes[0], nd);
        char sub[512];
        int k = snprintf(sub, sizeof sub, "{\"index\": [");
        for (int d = 0; d < ax; d++) k += snprintf(sub + k, sizeof sub - (size_t)k, "{\"start\": null, \"stop\": null}, ");
        snprintf(sub + k, sizeof sub - (size_t)k, "{\"start\": \"$0\", \"stop\": \"$1\"}]}");
        tg_var *off = I64(0);
        for (int i = 0; i < n->nin && off; i++) {
            tg_var *end = ADD(off, shape_i(b, n->inputs[i], ax));
            if (!n->inputs[i]->weak) gin[i] = op3(b, "subtensor", g, off, end, sub);
            off = end;
        }
    } else if (!strcmp(op, "stack")) {
        int nd = n->outputs[0]->type.ndim, ax = norm(n->a.axes[0], nd);
        for (int i = 0; i < n->nin; i++) {
            char sub[512];
            int k = snprintf(sub, sizeof sub, "{\"index\": [");
            for (int d = 0; d < ax; d++) k += snprintf(sub + k, sizeof sub - (size_t)k, "{\"start\": null, \"stop\": null}, ");
            snprintf(sub + k, sizeof sub - (size_t)k, "%d]}", i);
            gin[i] = OP1A("subtensor", g, sub);
        }
    } else if (!strcmp(op, "split")) {
        int ax = norm(n->a.axes[0], x->type.ndim);
        tg_var *parts[64], **pp = n->nout <= 64 ? parts : tg_malloc(sizeof *pp * (size_t)n->nout);
        if (!pp) return tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        bool ok = true;
        for (int k = 0; k < n->nout && ok; k++)
            ok = (pp[k] = gout[k] ? gout[k] : OP1("zeros_like", n->outputs[k])) != NULL;
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ax);
        gin[0] = ok ? tg_gb_op(b, "join", n->nout, pp, attrs) : NULL;
        if (pp != parts) tg_free(pp);
    } else if (!strcmp(op, "alloc")) {
        gin[0] = tg_gb_sum_to(b, g, x);
    } else if (!strcmp(op, "arange")) {
        /* out[i] = start + i * step, as Theano's ARange.grad: stop only
         * sets the length (no gradient). */
        tg_var *out = n->outputs[0];
        snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", tg_dtype_name(out->type.dtype));
        tg_var *i = op3(b, "arange", I64(0), shape_i(b, out, 0), I64(1), attrs);
        gin[0] = OP1("sum", g);
        gin[2] = OP1("sum", MUL(g, i));
    } else if (!strcmp(op, "repeat")) {
        /* Each input element's gradient is the sum over its copies: scatter
         * back with take_add along the repeated indices. */
        tg_var *r = n->inputs[1];
        if (n->a.axis_null) {
            tg_var *len = OP1("prod", OP1("shape", x));
            tg_var *idx = op2a(b, "repeat", op3(b, "arange", I64(0), len, I64(1), NULL), r, "{\"axis\": null}");
            tg_var *gf = op3(b, "take_add", flat(b, OP1("zeros_like", x)), g, idx, "{\"axis\": 0}");
            gin[0] = OP2("reshape", gf, OP1("shape", x));
        } else {
            int ax = norm(n->a.axes[0], x->type.ndim);
            tg_var *idx = op2a(b, "repeat", op3(b, "arange", I64(0), shape_i(b, x, ax), I64(1), NULL), r,
                               "{\"axis\": 0}");
            snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ax);
            gin[0] = op3(b, "take_add", OP1("zeros_like", x), g, idx, attrs);
        }
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return finish(b, n, gin);
}

/* ---- convolution and pooling ---- */

/* The three conv ops are bilinear; with <.,.> the sum of products,
 * <gy, conv2d(x, w)> = <conv2d_grad_inputs(w, gy), x>
 *                    = <conv2d_grad_weights(x, gy), w>,
 * from which each one's vector-Jacobian product follows. */
int tg_grad_conv(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name, *at = attrs_of(n);
    tg_var *g = gout[0], *p = n->inputs[0], *q = n->inputs[1];
    tg_ctx_clear(b->ctx);
    if (!strcmp(op, "conv2d")) {
        gin[0] = op3(b, "conv2d_grad_inputs", q, g, OP1("shape", p), at);
        gin[1] = op3(b, "conv2d_grad_weights", p, g, OP1("shape", q), at);
    } else if (!strcmp(op, "conv2d_grad_inputs")) { /* (w, gy) -> x-shaped */
        gin[0] = op3(b, "conv2d_grad_weights", g, q, OP1("shape", p), at);
        gin[1] = op2a(b, "conv2d", g, p, at);
    } else if (!strcmp(op, "conv2d_grad_weights")) { /* (x, gy) -> w-shaped */
        gin[0] = op3(b, "conv2d_grad_inputs", g, q, OP1("shape", p), at);
        gin[1] = op2a(b, "conv2d", p, g, at);
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return finish(b, n, gin);
}

static bool attr_pair(const tg_node *n, const char *key, int64_t v[2]) {
    json_object *o;
    if (!n->attrs || !json_object_object_get_ex(n->attrs, key, &o) || !json_object_is_type(o, json_type_array) ||
        json_object_array_length(o) != 2)
        return false;
    for (int i = 0; i < 2; i++) v[i] = json_object_get_int64(json_object_array_get_idx(o, (size_t)i));
    return true;
}

int tg_grad_pool(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *at = attrs_of(n);
    tg_var *g = gout[0], *x = n->inputs[0];
    tg_ctx_clear(b->ctx);
    if (!strcmp(n->op->name, "pool2d")) {
        gin[0] = op3(b, "pool2d_grad", x, n->outputs[0], g, at);
        return finish(b, n, gin);
    }
    if (!strcmp(n->op->name, "pool2d_grad_grad")) { /* linear in gg; x and y route */
        gin[2] = op3(b, "pool2d_grad", x, n->inputs[1], g, at);
        return finish(b, n, gin);
    }
    /* pool2d_grad(x, y, gy) is linear in gy: its transpose is the pooling
     * itself for the sum and average modes. In max mode it routes gy to the
     * window maxima (piecewise constant in x and y: no gradient there);
     * its transpose picks each window's routed element: a sum pooling of
     * g masked by the routes when windows do not overlap (ops the GPU
     * has), pool2d_grad_grad when they do. */
    if (n->a.mode != 0) {
        gin[2] = OP1A("pool2d", g, at);
    } else {
        int64_t ws[2], st[2];
        tg_var *y = n->inputs[1];
        if (!attr_pair(n, "ws", ws) || !attr_pair(n, "stride", st) || st[0] < ws[0] || st[1] < ws[1]) {
            /* overlapping windows: an element may be routed from one
             * window and not from another */
            gin[2] = op3(b, "pool2d_grad_grad", x, y, g, at);
            return finish(b, n, gin);
        }
        tg_var *route = op3(b, "pool2d_grad", x, y, OP1("ones_like", y), at);
        json_object *o = json_object_new_object();
        if (!o || json_object_object_add(o, "ws", json_object_get(json_object_object_get(n->attrs, "ws"))) ||
            json_object_object_add(o, "stride", json_object_get(json_object_object_get(n->attrs, "stride")))) {
            json_object_put(o);
            return tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
        }
        json_object *v;
        if (json_object_object_get_ex(n->attrs, "pad", &v)) json_object_object_add(o, "pad", json_object_get(v));
        if (json_object_object_get_ex(n->attrs, "ignore_border", &v))
            json_object_object_add(o, "ignore_border", json_object_get(v));
        json_object_object_add(o, "mode", json_object_new_string("sum"));
        gin[2] = OP1A("pool2d", MUL(g, route), json_object_to_json_string(o));
        json_object_put(o);
    }
    return finish(b, n, gin);
}

/* ---- linear algebra (matrices, or stacks of them: leading axes are
 * batch axes, as the forward ops treat them) ---- */

static tg_var *T2(tg_gb *b, tg_var *v) { return swap_last(b, v); }

static tg_var *dot(tg_gb *b, tg_var *x, tg_var *y) { return OP2("matmul", x, y); }

/* v with `extra` length-1 axes appended (to broadcast a per-matrix value
 * over its matrix). */
static tg_var *append_axes(tg_gb *b, tg_var *v, int extra, int at) {
    int nd = v ? v->type.ndim : 0, order[TG_MAX_NDIM];
    if (!v || nd + extra > TG_MAX_NDIM) return v;
    for (int i = 0, j = 0; i < nd + extra; i++) order[i] = i >= at && i < at + extra ? -1 : j++;
    return dimshuffle(b, v, nd + extra, order);
}

/* The mask of the lower (or upper) triangle, diagonal included, of A's
 * matrices (broadcasting over a stack), and in *eye the identity of their
 * order. */
static tg_var *triangle(tg_gb *b, tg_var *A, tg_dtype dt, bool lower, tg_var **eye) {
    tg_var *nn = shape_i(b, A, -1);
    tg_var *ar = op3(b, "arange", I64(0), nn, I64(1), NULL);
    tg_var *rows = dimshuffle(b, ar, 2, (int[]){0, -1}), *cols = dimshuffle(b, ar, 2, (int[]){-1, 0});
    char ea[48];
    snprintf(ea, sizeof ea, "{\"dtype\": \"%s\"}", tg_dtype_name(dt));
    *eye = op3(b, "eye", nn, nn, I64(0), ea);
    return OP2(lower ? "ge" : "le", rows, cols);
}

/* The gradient with respect to A of an op that reads one triangle of A as
 * the symmetric matrix it stands for, from S, the gradient with respect to
 * that symmetric matrix: tri(S + S^T) - diag(S). */
static tg_var *read_triangle(tg_gb *b, tg_var *A, tg_dtype dt, bool lower, tg_var *S) {
    tg_var *eye, *tri = triangle(b, A, dt, lower, &eye);
    return SUB(op3(b, "switch", tri, ADD(S, T2(b, S)), tg_gb_const(b, dt, 0), NULL), MUL(S, eye));
}

int tg_grad_linalg(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name;
    tg_var *g = gout[0], *A = n->inputs[0], *out = n->outputs[0];
    tg_dtype dt = out->type.dtype;
    tg_ctx_clear(b->ctx);
    int nd = A->type.ndim;
    if (!strcmp(op, "matrix_inverse")) {
        gin[0] = NEG(dot(b, dot(b, T2(b, out), g), T2(b, out)));
    } else if (!strcmp(op, "det")) {
        gin[0] = MUL(append_axes(b, MUL(g, out), 2, nd - 2), T2(b, OP1("matrix_inverse", A)));
    } else if (!strcmp(op, "solve")) {
        tg_var *x = out, *rhs = n->inputs[1];
        char at[48];
        snprintf(at, sizeof at, "{\"assume_a\": \"%s\"}",
                 n->a.mode == 1 ? "sym" : n->a.mode == 2 ? "pos" : "gen");
        tg_var *AT = n->a.mode ? A : T2(b, A), *gb;
        if (x->type.ndim == nd - 1 && nd > 2) {
            /* One vector for a stack of matrices: solve for columns. */
            int order[TG_MAX_NDIM];
            for (int i = 0; i < nd - 1; i++) order[i] = i;
            gb = dimshuffle(b, op2a(b, "solve", AT, append_axes(b, g, 1, nd - 1), at), nd - 1, order);
        } else {
            gb = op2a(b, "solve", AT, g, at);
        }
        /* The batch dimensions of A and b broadcast (NumPy's gufunc
         * rules): each gradient sums back over those its input was
         * stretched along, a shared vector b over the whole stack. */
        gin[1] = tg_gb_sum_to(b, gb, rhs);
        if (x->type.ndim == nd - 1) /* vectors: -gb x^T per matrix */
            gin[0] = NEG(MUL(append_axes(b, gb, 1, nd - 1), append_axes(b, x, 1, nd - 2)));
        else
            gin[0] = NEG(dot(b, gb, T2(b, x)));
        /* "sym" and "pos" read A's upper triangle only (SciPy's default,
         * lower=False): A[i][j] above the diagonal stands for both of its
         * places, and below it for none. */
        if (n->a.mode) gin[0] = read_triangle(b, A, dt, false, gin[0]);
        gin[0] = tg_gb_sum_to(b, gin[0], A);
    } else if (!strcmp(op, "cholesky")) {
        /* Murray (2016), as Theano's CholeskyGrad: with Phi the lower
         * triangle with the diagonal halved, S = L^-T Phi(L^T dL) L^-1; the
         * factorisation reads one triangle of A, which gets tri(S + S^T)
         * minus diag(S). An upper factor U is L^T. */
        bool lower = n->a.flag;
        tg_var *L = lower ? out : T2(b, out), *gL = lower ? g : T2(b, g);
        tg_var *eye, *tril = triangle(b, A, dt, true, &eye);
        tg_var *P = dot(b, T2(b, L), gL);
        P = SUB(op3(b, "switch", tril, P, tg_gb_const(b, dt, 0), NULL), MUL(MUL(P, eye), tg_gb_const(b, dt, 0.5)));
        tg_var *Li = OP1("matrix_inverse", L);
        gin[0] = read_triangle(b, A, dt, lower, dot(b, dot(b, T2(b, Li), P), Li));
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return finish(b, n, gin);
}

/* ---- debugging ops: the gradient passes through to the monitored
 * values; conditions get none. ---- */

int tg_grad_debug(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    (void)b;
    if (!strcmp(n->op->name, "breakpoint"))
        for (int k = 0; k < n->nout; k++) gin[k + 1] = gout[k];
    else
        gin[0] = gout[0];
    return TG_OK;
}
