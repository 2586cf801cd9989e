/* Gradient rules (vector-Jacobian products) of the op families. Each
 * builds nodes with the builder: gout are the gradients of the outputs,
 * gin receives the gradients of the inputs (NULL: none). Broadcasting is
 * undone with sum_to. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grad/grad.h"

#define OP1(name, x) tg_gb_op1(b, name, x, NULL)
#define OP2(name, x, y) tg_gb_op2(b, name, x, y)
#define MUL(x, y) OP2("mul", x, y)
#define DIV(x, y) OP2("true_div", x, y)
#define ADD(x, y) OP2("add", x, y)
#define SUB(x, y) OP2("sub", x, y)
#define NEG(x) OP1("neg", x)
#define K(v) tg_gb_const(b, dt, v)

static tg_var *op3(tg_gb *b, const char *op, tg_var *x, tg_var *y, tg_var *z) {
    tg_var *in[3] = {x, y, z};
    return x && y && z ? tg_gb_op(b, op, 3, in, NULL) : NULL;
}

/* switch(c, g, 0) */
static tg_var *where(tg_gb *b, tg_var *c, tg_var *g, bool g_first) {
    tg_var *z = tg_gb_const(b, g ? g->type.dtype : TG_FLOAT64, 0);
    return g_first ? op3(b, "switch", c, g, z) : op3(b, "switch", c, z, g);
}

static int done(tg_gb *b, tg_node *n, tg_var **gin) {
    for (int k = 0; k < n->nin; k++)
        if (gin[k] == NULL && b->ctx && b->ctx->status != TG_OK) return b->ctx->status;
    return TG_OK;
}

/* ---- elementwise ---- */

int tg_grad_elemwise(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name;
    tg_var *g = gout[0], *out = n->outputs[0];
    tg_var *x = n->inputs[0], *y = n->nin > 1 ? n->inputs[1] : NULL;
    tg_dtype dt = g->type.dtype;
    tg_ctx_clear(b->ctx);
    if (!strcmp(op, "add")) {
        for (int k = 0; k < n->nin; k++) gin[k] = tg_gb_sum_to(b, g, n->inputs[k]);
    } else if (!strcmp(op, "sub")) {
        gin[0] = tg_gb_sum_to(b, g, x);
        gin[1] = tg_gb_sum_to(b, NEG(g), y);
    } else if (!strcmp(op, "mul")) {
        for (int k = 0; k < n->nin; k++) {
            tg_var *p = g;
            for (int j = 0; j < n->nin && p; j++)
                if (j != k) p = MUL(p, n->inputs[j]);
            gin[k] = tg_gb_sum_to(b, p, n->inputs[k]);
        }
    } else if (!strcmp(op, "true_div")) {
        gin[0] = tg_gb_sum_to(b, DIV(g, y), x);
        gin[1] = tg_gb_sum_to(b, NEG(DIV(MUL(g, out), y)), y);
    } else if (!strcmp(op, "pow")) {
        /* As PyTorch's: y x^(y-1) is 0 * inf at x = 0, y = 0, and x^y
         * log x is 0 * -inf at x = 0, y > 0; both derivatives are 0
         * there (x^0 is constant, and 0^y stays 0 for y > 0). */
        /* The masked branches read x as 1 there, so that their own
         * gradients (second derivatives) are finite times 0, not inf
         * times 0. */
        tg_var *y0 = OP2("eq", y, K(0));
        tg_var *x1 = op3(b, "switch", y0, K(1), x);
        tg_var *dx = where(b, y0, MUL(y, OP2("pow", x1, SUB(y, K(1)))), false);
        tg_var *flat = OP2("logical_and", OP2("eq", x, K(0)), OP2("ge", y, K(0)));
        tg_var *logx = OP1("log", op3(b, "switch", flat, K(1), x));
        gin[0] = tg_gb_sum_to(b, MUL(g, dx), x);
        gin[1] = tg_gb_sum_to(b, MUL(g, where(b, flat, MUL(out, logx), false)), y);
    } else if (!strcmp(op, "maximum") || !strcmp(op, "minimum")) {
        tg_var *m = OP2(op[1] == 'a' ? "ge" : "le", x, y); /* ties go to x */
        gin[0] = tg_gb_sum_to(b, where(b, m, ADD(g, OP1("zeros_like", out)), true), x);
        gin[1] = tg_gb_sum_to(b, where(b, m, ADD(g, OP1("zeros_like", out)), false), y);
    } else if (!strcmp(op, "arctan2")) {
        tg_var *r = ADD(OP1("sqr", x), OP1("sqr", y));
        gin[0] = tg_gb_sum_to(b, DIV(MUL(g, y), r), x);
        gin[1] = tg_gb_sum_to(b, NEG(DIV(MUL(g, x), r)), y);
    } else if (!strcmp(op, "mod")) {
        gin[0] = tg_gb_sum_to(b, g, x);
        gin[1] = tg_gb_sum_to(b, NEG(MUL(g, OP2("int_div", x, y))), y);
    } else if (!strcmp(op, "switch")) {
        tg_var *gg = ADD(g, OP1("zeros_like", out));
        gin[1] = tg_gb_sum_to(b, where(b, x, gg, true), n->inputs[1]);
        gin[2] = tg_gb_sum_to(b, where(b, x, gg, false), n->inputs[2]);
    } else if (!strcmp(op, "clip")) {
        tg_var *lo = n->inputs[1], *hi = n->inputs[2];
        tg_var *gg = ADD(g, OP1("zeros_like", out));
        gin[0] = tg_gb_sum_to(b, where(b, OP2("logical_and", OP2("ge", x, lo), OP2("le", x, hi)), gg, true), x);
        /* clip is NumPy's minimum(maximum(x, lo), hi): where lo > hi,
         * every element is hi, and the gradient follows it there
         * (Theano's masks, x < lo to lo and x > hi to hi, gave both of
         * them the element when hi < x < lo). */
        tg_var *lo_le_hi = OP2("le", lo, hi);
        gin[1] = tg_gb_sum_to(b, where(b, OP2("logical_and", OP2("lt", x, lo), lo_le_hi), gg, true), lo);
        gin[2] = tg_gb_sum_to(b, where(b, OP2("logical_or", OP2("gt", x, hi), OP1("logical_not", lo_le_hi)), gg, true), hi);
    } else if (!strcmp(op, "cast") || !strcmp(op, "identity")) {
        gin[0] = g;
    } else if (!strcmp(op, "neg")) {
        gin[0] = NEG(g);
    } else if (!strcmp(op, "abs")) {
        gin[0] = MUL(g, OP1("sign", x));
    } else if (!strcmp(op, "exp")) {
        gin[0] = MUL(g, out);
    } else if (!strcmp(op, "exp2")) {
        gin[0] = MUL(MUL(g, out), K(M_LN2));
    } else if (!strcmp(op, "expm1")) {
        gin[0] = MUL(g, ADD(out, K(1)));
    } else if (!strcmp(op, "log")) {
        gin[0] = DIV(g, x);
    } else if (!strcmp(op, "log2")) {
        gin[0] = DIV(g, MUL(x, K(M_LN2)));
    } else if (!strcmp(op, "log10")) {
        gin[0] = DIV(g, MUL(x, K(M_LN10)));
    } else if (!strcmp(op, "log1p")) {
        gin[0] = DIV(g, ADD(x, K(1)));
    } else if (!strcmp(op, "sqrt")) {
        gin[0] = DIV(MUL(g, K(0.5)), out);
    } else if (!strcmp(op, "sqr")) {
        gin[0] = MUL(MUL(g, K(2)), x);
    } else if (!strcmp(op, "reciprocal")) {
        gin[0] = NEG(MUL(g, OP1("sqr", out)));
    } else if (!strcmp(op, "sin")) {
        gin[0] = MUL(g, OP1("cos", x));
    } else if (!strcmp(op, "cos")) {
        gin[0] = NEG(MUL(g, OP1("sin", x)));
    } else if (!strcmp(op, "tan")) {
        gin[0] = MUL(g, ADD(K(1), OP1("sqr", out)));
    } else if (!strcmp(op, "arcsin") || !strcmp(op, "arccos")) {
        tg_var *d = DIV(g, OP1("sqrt", SUB(K(1), OP1("sqr", x))));
        gin[0] = op[3] == 's' ? d : NEG(d);
    } else if (!strcmp(op, "arctan")) {
        gin[0] = DIV(g, ADD(K(1), OP1("sqr", x)));
    } else if (!strcmp(op, "sinh")) {
        gin[0] = MUL(g, OP1("cosh", x));
    } else if (!strcmp(op, "cosh")) {
        gin[0] = MUL(g, OP1("sinh", x));
    } else if (!strcmp(op, "tanh")) {
        gin[0] = MUL(g, SUB(K(1), OP1("sqr", out)));
    } else if (!strcmp(op, "arcsinh")) {
        gin[0] = DIV(g, OP1("sqrt", ADD(OP1("sqr", x), K(1))));
    } else if (!strcmp(op, "arccosh")) {
        gin[0] = DIV(g, OP1("sqrt", SUB(OP1("sqr", x), K(1))));
    } else if (!strcmp(op, "arctanh")) {
        gin[0] = DIV(g, SUB(K(1), OP1("sqr", x)));
    } else if (!strcmp(op, "sigmoid")) {
        gin[0] = MUL(MUL(g, out), SUB(K(1), out));
    } else if (!strcmp(op, "softplus")) {
        gin[0] = MUL(g, OP1("sigmoid", x));
    } else if (!strcmp(op, "relu")) {
        gin[0] = where(b, OP2("gt", x, K(0)), g, true);
    } else if (!strcmp(op, "erf") || !strcmp(op, "erfc")) {
        tg_var *d = MUL(MUL(g, K(M_2_SQRTPI)), OP1("exp", NEG(OP1("sqr", x))));
        gin[0] = op[3] ? NEG(d) : d;
    } else if (!strcmp(op, "gammaln")) {
        gin[0] = MUL(g, OP1("digamma", x));
    } else if (!strcmp(op, "digamma")) {
        gin[0] = MUL(g, OP1("trigamma", x));
    } else if (!strcmp(op, "trigamma")) {
        gin[0] = MUL(g, OP2("polygamma", K(2), x));
    } else if (!strcmp(op, "polygamma")) {
        /* d/dx polygamma(n, x) = polygamma(n + 1, x), n + 1 in the
         * gradient's dtype; n, an order, gets none (as floor's input) */
        tg_var *n1 = ADD(tg_gb_cast(b, x, dt), K(1));
        gin[1] = tg_gb_sum_to(b, MUL(g, OP2("polygamma", n1, y)), y);
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return done(b, n, gin);
}

/* ---- reductions ---- */

/* v (a reduction's result) with the reduced axes put back as length 1. */
static tg_var *keep_axes(tg_gb *b, tg_node *n, tg_var *v) {
    int nd = n->inputs[0]->type.ndim;
    if (n->a.keepdims || !n->a.axis_mask) return v;
    char order[256];
    int k = snprintf(order, sizeof order, "{\"order\": [");
    for (int d = 0, j = 0; d < nd; d++)
        k += snprintf(order + k, sizeof order - (size_t)k, "%s", d ? ", " : ""),
            k += (n->a.axis_mask >> d) & 1u ? snprintf(order + k, sizeof order - (size_t)k, "\"x\"")
                                             : snprintf(order + k, sizeof order - (size_t)k, "%d", j++);
    snprintf(order + k, sizeof order - (size_t)k, "]}");
    return tg_gb_op1(b, "dimshuffle", v, order);
}

int tg_grad_reduce(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name;
    tg_var *x = n->inputs[0], *out = n->outputs[0];
    if (!strcmp(op, "var") || !strcmp(op, "std")) return tg_grad_varstd(b, n, gout, gin);
    tg_ctx_clear(b->ctx);
    tg_var *g = keep_axes(b, n, gout[0]);
    tg_var *gx = ADD(OP1("zeros_like", x), g); /* broadcast to x's shape */
    tg_dtype dt = gx ? gx->type.dtype : TG_FLOAT64;
    if (!strcmp(op, "sum")) {
        gin[0] = gx;
    } else if (!strcmp(op, "mean")) {
        tg_var *nx = OP1("prod", OP1("shape", x)), *no = OP1("prod", OP1("shape", out));
        char attrs[64];
        snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", tg_dtype_name(dt));
        if (dt != TG_FLOAT16) {
            gin[0] = DIV(MUL(gx, tg_gb_op1(b, "cast", no, attrs)), tg_gb_op1(b, "cast", nx, attrs));
        } else {
            /* a count over 65504 is inf in float16 (the gradient was 0 or
             * NaN): the ratio of the counts in float64, then in float16 */
            tg_var *frac = DIV(tg_gb_op1(b, "cast", no, "{\"dtype\": \"float64\"}"),
                               tg_gb_op1(b, "cast", nx, "{\"dtype\": \"float64\"}"));
            gin[0] = MUL(gx, tg_gb_op1(b, "cast", frac, attrs));
        }
    } else if (!strcmp(op, "max") || !strcmp(op, "min")) {
        gin[0] = where(b, OP2("eq", x, keep_axes(b, n, out)), gx, true);
    } else if (!strcmp(op, "logsumexp")) {
        /* softmax(x) = exp(x - out). Where a whole group is -inf (log 0
         * in a log-space sum: a masked or impossible path of CTC or an
         * HMM), out is -inf and x - out NaN; the gradient there is 0
         * (PyTorch and JAX give the NaN; their users asked for 0, their
         * issues 31829 and 6811): subtracting 0 instead leaves exp(-inf)
         * = 0. A group with a +inf keeps the NaN. */
        tg_var *m = keep_axes(b, n, out);
        tg_dtype od = out->type.dtype;
        tg_var *shift = op3(b, "switch", OP2("eq", m, tg_gb_const(b, od, -INFINITY)), tg_gb_const(b, od, 0), m);
        gin[0] = MUL(gx, OP1("exp", SUB(x, shift)));
    } else if (!strcmp(op, "prod")) {
        /* The product of the others, prod / x, is 0 / 0 at a zero. As
         * Theano's Prod (without no_zeros_in_input), by the zeros in
         * x's group: none, prod / x; one, the product of the others at
         * the zero and 0 elsewhere; more, 0. Written so that its own
         * gradient (a second derivative) is right at the zeros too
         * (Theano refuses it; PyTorch's cumulative products agree): a
         * division only by nonzero (x with its zeros made 1), and the 0s
         * that a zero makes carry that zero, s = the sum of the group's
         * zeros (0, whose derivative by each zero is 1): s * rest / x
         * where one zero makes it, (s - x) * rest at either of two
         * zeros. */
        const char *at = n->attrs ? json_object_to_json_string(n->attrs) : NULL;
        tg_dtype xd = x->type.dtype;
        tg_var *z = OP2("eq", x, tg_gb_const(b, xd, 0));
        tg_var *nonzero = op3(b, "switch", z, tg_gb_const(b, xd, 1), x);
        tg_var *rest = keep_axes(b, n, tg_gb_op1(b, "prod", nonzero, at));
        tg_var *nzeros = keep_axes(b, n, tg_gb_op1(b, "sum", z, at));
        tg_var *s = keep_axes(b, n, tg_gb_op1(b, "sum", where(b, z, x, true), at));
#define NZ(k) OP2("eq", nzeros, tg_gb_const(b, TG_INT64, k))
        tg_var *one = op3(b, "switch", z, rest, DIV(MUL(s, rest), nonzero));
        tg_var *two = where(b, OP2("logical_and", NZ(2), z), MUL(SUB(s, x), rest), true);
        tg_var *some = op3(b, "switch", NZ(1), one, two);
        gin[0] = MUL(gx, op3(b, "switch", NZ(0), DIV(rest, nonzero), some));
#undef NZ
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return done(b, n, gin);
}

/* ---- products ---- */

static tg_var *T(tg_gb *b, tg_var *v) { return v->type.ndim < 2 ? v : OP1("transpose", v); }

int tg_grad_blas(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name;
    tg_var *g = gout[0];
    tg_ctx_clear(b->ctx);
    if (!strcmp(op, "dot") || !strcmp(op, "matmul")) {
        tg_var *x = n->inputs[0], *y = n->inputs[1];
        int a = x->type.ndim, c = y->type.ndim;
        if (a == 2 && c == 2) {
            gin[0] = OP2("dot", g, T(b, y));
            gin[1] = OP2("dot", T(b, x), g);
        } else if (a == 2 && c == 1) {
            gin[0] = OP2("outer", g, y);
            gin[1] = OP2("dot", T(b, x), g);
        } else if (a == 1 && c == 2) {
            gin[0] = OP2("dot", y, g);
            gin[1] = OP2("outer", x, g);
        } else if (a == 1 && c == 1) {
            gin[0] = MUL(g, y);
            gin[1] = MUL(g, x);
        } else if (!strcmp(op, "dot") && (a == 0 || c == 0)) {
            /* NumPy's dot with a 0-d operand is the product */
            gin[0] = tg_gb_sum_to(b, MUL(g, y), x);
            gin[1] = tg_gb_sum_to(b, MUL(g, x), y);
        } else if (!strcmp(op, "matmul")) {
            return tg_grad_matmul(b, n, gout, gin);
        } else {
            return tg_errorf(b->ctx, TG_EUNSUPPORTED,
                             "the gradient of %s of %d-d and %d-d operands is not implemented yet", op, a, c);
        }
    } else if (!strcmp(op, "outer")) {
        if (n->inputs[0]->type.ndim != 1 || n->inputs[1]->type.ndim != 1) return tg_grad_outer(b, n, gout, gin);
        gin[0] = OP2("dot", g, n->inputs[1]);
        gin[1] = OP2("dot", n->inputs[0], g);
    } else if (!strcmp(op, "gemm") || !strcmp(op, "gemv")) {
        tg_var *z = n->inputs[0], *al = n->inputs[1], *x = n->inputs[2], *y = n->inputs[3], *be = n->inputs[4];
        gin[0] = MUL(g, be);
        if (!strcmp(op, "gemm")) {
            gin[2] = MUL(OP2("dot", g, T(b, y)), al);
            gin[3] = MUL(OP2("dot", T(b, x), g), al);
        } else {
            gin[2] = MUL(OP2("outer", g, y), al);
            gin[3] = MUL(OP2("dot", T(b, x), g), al);
        }
        gin[1] = OP1("sum", MUL(g, OP2("dot", x, y)));
        gin[4] = OP1("sum", MUL(g, z));
    } else if (!strcmp(op, "ger")) {
        tg_var *A = n->inputs[0], *al = n->inputs[1], *x = n->inputs[2], *y = n->inputs[3];
        (void)A;
        gin[0] = g;
        gin[2] = MUL(OP2("dot", g, y), al);
        gin[3] = MUL(OP2("dot", T(b, g), x), al);
        gin[1] = OP1("sum", MUL(g, OP2("outer", x, y)));
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return done(b, n, gin);
}

/* ---- shapes and indexing ---- */

int tg_grad_shape(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name;
    tg_var *g = gout[0], *x = n->inputs[0];
    tg_ctx_clear(b->ctx);
    if (!strcmp(op, "reshape") || !strcmp(op, "flatten") || !strcmp(op, "squeeze") ||
        !strcmp(op, "expand_dims")) {
        gin[0] = OP2("reshape", g, OP1("shape", x));
    } else if (!strcmp(op, "transpose") || !strcmp(op, "dimshuffle")) {
        /* The inverse permutation; axes dimshuffle dropped (length 1) come
         * back as "x", axes it added go. */
        int nd = x->type.ndim, pos[TG_MAX_NDIM];
        for (int d = 0; d < nd; d++) pos[d] = -1;
        if (!strcmp(op, "transpose")) {
            for (int i = 0; i < nd; i++) {
                int ax = n->a.axis_null || !n->a.naxes ? nd - 1 - i : n->a.axes[i];
                if (ax < 0) ax += nd;
                pos[ax] = i;
            }
        } else {
            for (int i = 0; i < n->a.norder; i++)
                if (n->a.order[i] >= 0) pos[n->a.order[i]] = i;
        }
        /* Number the kept output axes of g once the added ones are gone. */
        int outnd = n->outputs[0]->type.ndim, newpos[TG_MAX_NDIM], j = 0;
        for (int i = 0; i < outnd; i++) {
            bool added = !strcmp(op, "dimshuffle") && n->a.order[i] < 0;
            newpos[i] = added ? -1 : j++;
        }
        char attrs[256];
        int k = snprintf(attrs, sizeof attrs, "{\"order\": [");
        for (int d = 0; d < nd; d++)
            k += pos[d] < 0 ? snprintf(attrs + k, sizeof attrs - (size_t)k, "%s\"x\"", d ? ", " : "")
                            : snprintf(attrs + k, sizeof attrs - (size_t)k, "%s%d", d ? ", " : "", newpos[pos[d]]);
        snprintf(attrs + k, sizeof attrs - (size_t)k, "]}");
        tg_var *gs = g;
        /* Drop the added axes (length 1) by a reshape to the kept lengths. */
        if (j != outnd) {
            char ds[256];
            int q = snprintf(ds, sizeof ds, "{\"order\": [");
            bool first = true;
            for (int i = 0; i < outnd; i++)
                if (newpos[i] >= 0) {
                    q += snprintf(ds + q, sizeof ds - (size_t)q, "%s%d", first ? "" : ", ", i);
                    first = false;
                }
            snprintf(ds + q, sizeof ds - (size_t)q, "]}");
            gs = tg_gb_op1(b, "dimshuffle", g, ds);
        }
        gin[0] = tg_gb_op1(b, "dimshuffle", gs, attrs);
    } else if (!strcmp(op, "subtensor")) {
        /* The gradient goes back into a zero array at the same place. */
        int nin = n->nin + 1;
        tg_var *in[TG_MAX_NDIM * 3 + 2];
        in[0] = OP1("zeros_like", x);
        in[1] = g;
        for (int k = 1; k < n->nin; k++) in[k + 1] = n->inputs[k];
        const char *attrs = n->attrs ? json_object_to_json_string(n->attrs) : NULL;
        gin[0] = in[0] ? tg_gb_op(b, "inc_subtensor", nin, in, attrs) : NULL;
    } else if (!strcmp(op, "set_subtensor") || !strcmp(op, "inc_subtensor")) {
        const char *attrs = n->attrs ? json_object_to_json_string(n->attrs) : NULL;
        tg_var *in[TG_MAX_NDIM * 3 + 2];
        in[0] = g;
        for (int k = 2; k < n->nin; k++) in[k - 1] = n->inputs[k];
        tg_var *part = tg_gb_op(b, "subtensor", n->nin - 1, in, attrs);
        gin[1] = tg_gb_sum_to(b, part, n->inputs[1]);
        if (op[0] == 's') {
            in[0] = g;
            in[1] = tg_gb_const(b, g->type.dtype, 0);
            for (int k = 2; k < n->nin; k++) in[k] = n->inputs[k];
            gin[0] = tg_gb_op(b, "set_subtensor", n->nin, in, attrs);
        } else {
            gin[0] = g;
        }
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return done(b, n, gin);
}

/* ---- neural networks ---- */

int tg_grad_nn(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    const char *op = n->op->name;
    tg_var *g = gout[0], *x = n->inputs[0], *out = n->outputs[0];
    tg_dtype dt = out->type.dtype;
    tg_ctx_clear(b->ctx);
    if (!strcmp(op, "softmax") || !strcmp(op, "log_softmax")) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"keepdims\": true}", n->a.naxes ? n->a.axes[0] : -1);
        if (op[0] == 's') {
            tg_var *s = tg_gb_op1(b, "sum", MUL(g, out), attrs);
            gin[0] = MUL(SUB(g, s), out);
        } else {
            tg_var *s = tg_gb_op1(b, "sum", g, attrs);
            gin[0] = SUB(g, MUL(OP1("exp", out), s));
        }
    } else if (!strcmp(op, "categorical_crossentropy")) {
        tg_var *p = x, *t = n->inputs[1];
        char order[128];
        int nd = p->type.ndim, k = snprintf(order, sizeof order, "{\"order\": [");
        for (int d = 0; d < nd - 1; d++) k += snprintf(order + k, sizeof order - (size_t)k, "%d, ", d);
        snprintf(order + k, sizeof order - (size_t)k, "\"x\"]}");
        tg_var *ge = tg_gb_op1(b, "dimshuffle", g, order);
        tg_var *dense = t;
        if (!tg_dtype_is_float(t->type.dtype) && t->type.ndim == nd - 1) {
            /* one-hot from class indices: eq(t[..., None], arange(k)) */
            char sh[64], dta[64];
            snprintf(sh, sizeof sh, "{\"i\": %d}", nd - 1);
            snprintf(dta, sizeof dta, "{\"dtype\": \"%s\"}", tg_dtype_name(dt));
            tg_var *kk = tg_gb_op1(b, "shape_i", p, sh);
            tg_var *zero = tg_gb_const(b, TG_INT64, 0), *one = tg_gb_const(b, TG_INT64, 1);
            tg_var *ar = op3(b, "arange", zero, kk, one);
            tg_var *te = tg_gb_op1(b, "dimshuffle", t, order);
            dense = tg_gb_op1(b, "cast", OP2("eq", te, ar), dta);
        } else {
            gin[1] = NEG(MUL(ge, OP1("log", p)));
        }
        gin[0] = NEG(DIV(MUL(ge, dense), p));
    } else if (!strcmp(op, "binary_crossentropy")) {
        tg_var *p = x, *t = n->inputs[1];
        gin[0] = tg_gb_sum_to(b, DIV(MUL(g, SUB(p, t)), MUL(p, SUB(K(1), p))), p);
        gin[1] = tg_gb_sum_to(b, MUL(g, SUB(OP1("log1p", NEG(p)), OP1("log", p))), t);
    } else {
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "the gradient of %s is not implemented yet", op);
    }
    return done(b, n, gin);
}
