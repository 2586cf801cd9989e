/* The local rewrites: constant folding, canonicalize, stabilize,
 * specialize. Each is a function from one node to "applied or not"; the
 * table at the end gives its name, pass, tags and the ops it fires on.
 *
 * Every rewrite keeps the value and the type of what it replaces. Where
 * broadcasting could make a simpler expression smaller than the original
 * (x*y/y is x only when y cannot stretch x), the rewrite checks the
 * static shapes and declines when it cannot be sure.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/control.h"
#include "rewrite/engine.h"
#include "tensor/tensor.h"

/* ---- helpers ---- */

static const char *attrs_str(const tg_node *n) {
    return n->attrs ? json_object_to_json_string_ext(n->attrs, JSON_C_TO_STRING_PLAIN) : NULL;
}

/* new can stand for old: same dtype and ndim, no contradicting length. */
static bool fits(const tg_var *newv, const tg_var *old) {
    return newv && tg_type_compatible(&old->type, &newv->type);
}

/* Replace n's output 0 by newv when the types agree; else decline (the
 * engine drops what was built). */
static int swap(tg_rw *rw, tg_node *n, tg_var *newv) {
    if (!newv) return tg_rw_ctx(rw) && tg_rw_ctx(rw)->status ? tg_rw_ctx(rw)->status : TG_ENOMEM;
    if (!fits(newv, n->outputs[0])) return 0;
    int rc = tg_rw_replace(rw, n->outputs[0], newv);
    return rc ? rc : 1;
}

/* swap, for a rewrite that drops a subexpression (x*y/y -> x): not where
 * what dies with n could fail at run time (an assert, a division by zero,
 * lengths that do not broadcast), so that every preset fails as the
 * unoptimized function does (docs/optimizer.md). */
static int swap_checked(tg_rw *rw, tg_node *n, tg_var *newv) {
    if (newv && tg_rw_drops_check(n, newv)) return 0;
    return swap(rw, n, newv);
}

/* A scalar (0-d, or every length statically 1) constant's value. */
static bool scalar_const(const tg_var *v, double *out) {
    if (v->kind != TG_VAR_CONSTANT || !v->value || tg_array_size(v->value) != 1) return false;
    *out = tg_array_get_flat(v->value, 0);
    return true;
}

static bool is_float(const tg_var *v) { return tg_dtype_is_float(v->type.dtype); }
static tg_var *negated(tg_rw *rw, tg_var *z);

/* x in dtype dt: x itself, or cast(x, dt). A float-only op (exp,
 * true_div, ...) of an integer or bool x computes on x converted to the
 * float of its dtype (FORMAT.md s7); a rewrite that takes x out from under
 * it and negates or subtracts it must convert first, as an integer neg or
 * sub wraps (uint8 -1 is 255) and a bool one cannot be built. */
static tg_var *as_dtype(tg_rw *rw, tg_var *x, tg_dtype dt) {
    if (!x || x->type.dtype == dt) return x;
    char attrs[48];
    snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", tg_dtype_name(dt));
    return tg_rw_op1(rw, "cast", x, attrs);
}

/* The most operands a rule rebuilds an n-ary add or mul with (it declines
 * beyond). */
enum { MAX_OPERANDS = 64 };

/* Declare producer p replaced too when the node being rewritten is the
 * one reader of its output: it dies with the replacement, which stands
 * for it in the record and the origins. */
static int match_if_dies(tg_rw *rw, tg_node *p) {
    return p && tg_rw_single_client(p->outputs[0]) ? tg_rw_match(rw, p) : TG_OK;
}

/* x has the run-time shape of n's output for sure (no other input of n
 * stretches it) and n's dtype. */
static bool stands_for(const tg_var *x, const tg_node *n) {
    return x->type.dtype == n->outputs[0]->type.dtype && x->type.ndim == n->outputs[0]->type.ndim &&
           tg_rw_keeps_shape(x, (const tg_var *const *)n->inputs, n->nin);
}

/* ---- constant folding ---- */

enum { FOLD_MAX_ELEMS = 1 << 20 };

static int constant_folding(tg_rw *rw, tg_node *n) {
    const tg_op *op = n->op;
    if (op->flags & (TG_OPF_SIDE_EFFECT | TG_OPF_DERIVED | TG_OPF_LAZY)) return 0;
    if (!strncmp(op->name, "random_", 7)) return 0;
    if (n->nin == 0 || n->nout > 8) return 0;
    for (int i = 0; i < n->nin; i++)
        if (n->inputs[i]->kind != TG_VAR_CONSTANT || !n->inputs[i]->value) return 0;
    /* An op_from_graph or scan whose body prints or asserts does so at
     * each call, not once here. */
    if (tg_rw_has_effect(n)) return 0;
    /* Only results of known, moderate size: a constant alloc of 10^8
     * elements stays a node. */
    for (int k = 0; k < n->nout; k++) {
        const tg_type *t = &n->outputs[k]->type;
        int64_t size = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) return 0;
            size *= t->shape[d];
            if (size > FOLD_MAX_ELEMS) return 0;
        }
    }
    tg_array *in[16], *out[8] = {0};
    if (n->nin > 16) return 0;
    for (int i = 0; i < n->nin; i++) in[i] = n->inputs[i]->value;
    tg_ctx quiet = {0};
    int rc = op->run(n, in, out, &quiet);
    bool ok = rc == 0;
    for (int k = 0; ok && k < n->nout; k++) ok = out[k] && tg_type_accepts(&n->outputs[k]->type, out[k]);
    if (!ok) {
        /* A kernel error (a division by zero, a bad index) is the run's to
         * report, with the node, when the function is called. */
        for (int k = 0; k < n->nout; k++) tg_array_free(out[k]);
        return 0;
    }
    /* A view (dimshuffle, subtensor of a constant) becomes an array of
     * its own, in C order: as a .tgf saves and restores it. A transposed
     * view made a gemm call BLAS with another transpose flag in the
     * compiled function than in its restored copy, and OpenBLAS sums in
     * another order there (random_graphs tools seed 95112: 1 ulp). */
    for (int k = 0; k < n->nout; k++) {
        bool shared = !tg_array_is_contiguous(out[k]);
        for (int i = 0; i < n->nin && !shared; i++) shared = out[k]->buf == in[i]->buf;
        if (shared) {
            tg_array *own = tg_array_copy(out[k], out[k]->dtype);
            tg_array_free(out[k]);
            out[k] = own;
        }
    }
    for (int k = 0; k < n->nout; k++) {
        tg_var *c = tg_rw_const_array(rw, out[k]);
        out[k] = NULL;
        if (!c) {
            for (int j = k + 1; j < n->nout; j++) tg_array_free(out[j]);
            return TG_ENOMEM;
        }
        if (n->outputs[k]->nclients && (rc = tg_rw_replace(rw, n->outputs[k], c))) {
            for (int j = k + 1; j < n->nout; j++) tg_array_free(out[j]);
            return rc;
        }
    }
    return 1;
}

/* ---- canonicalize ---- */

/* x*x -> sqr(x) */
static int mul_self_to_sqr(tg_rw *rw, tg_node *n) {
    if (n->nin != 2 || n->inputs[0] != n->inputs[1] || n->inputs[0]->type.dtype == TG_BOOL) return 0;
    return swap(rw, n, tg_rw_op1(rw, "sqr", n->inputs[0], NULL));
}

/* y is a constant with an element that is 0, inf or NaN. A factor y
 * cancelled against a divisor y stands for 1 only where y is finite and
 * non-zero: (x*y)/y and (x/y)*y are NaN there as written, whatever x
 * (x*0/0, x*inf/inf), and a cancellation that a variable's values may
 * undo (docs/optimizer.md) must not be made where a constant's values
 * surely do (Theano's canonicalizer folded the constants, 0/0 = NaN). */
static bool const_breaks_cancel(const tg_var *y) {
    if (y->kind != TG_VAR_CONSTANT || !y->value) return false;
    int64_t n = tg_array_size(y->value);
    for (int64_t i = 0; i < n; i++) {
        double v = tg_array_get_flat(y->value, i);
        if (v == 0 || !isfinite(v)) return true;
    }
    return false;
}

/* (.. * y * ..) / y -> (.. * ..) */
static int mul_div_cancel(tg_rw *rw, tg_node *n) {
    tg_var *y = n->inputs[1];
    tg_node *m = tg_rw_producer(n->inputs[0], "mul");
    if (!m) return 0;
    int at = -1;
    for (int i = 0; i < m->nin && at < 0; i++)
        if (m->inputs[i] == y) at = i;
    if (at < 0 || const_breaks_cancel(y)) return 0;
    tg_var *rest[MAX_OPERANDS];
    int nr = 0;
    if (m->nin - 1 > MAX_OPERANDS) return 0;
    for (int i = 0; i < m->nin; i++)
        if (i != at) rest[nr++] = m->inputs[i];
    tg_var *r = nr == 1 ? rest[0] : tg_rw_op(rw, "mul", nr, rest, NULL);
    if (!r) return TG_ENOMEM;
    /* y must not have stretched the rest, and the dtype must stay. */
    tg_var *others[2] = {y, m->outputs[0]};
    if (r->type.dtype != n->outputs[0]->type.dtype || r->type.ndim != n->outputs[0]->type.ndim ||
        !tg_rw_keeps_shape(r, (const tg_var *const *)others, 2))
        return 0;
    if (tg_rw_match(rw, m)) return TG_ENOMEM;
    return swap_checked(rw, n, r);
}

/* a and b hold the same values for sure: the same variable, equal
 * constants, or the same op with the same attrs applied to such inputs,
 * looked at `depth` producers deep. Rewrites make their own copies of a
 * node (1 - sigmoid(x) -> sigmoid(-x), once for each of two readers),
 * which the merge pass joins only after them. */
static bool same_value(const tg_var *a, const tg_var *b, int depth) {
    if (a == b) return true;
    if (!tg_type_equal(&a->type, &b->type)) return false;
    if (a->kind == TG_VAR_CONSTANT && b->kind == TG_VAR_CONSTANT)
        return a->value && b->value && a->value->dtype == b->value->dtype && tg_array_equal(a->value, b->value);
    const tg_node *p = a->owner, *q = b->owner;
    if (depth <= 0 || !p || !q || p->op != q->op || p->nin != q->nin || p->nout != 1 || q->nout != 1) return false;
    if (tg_rw_has_effect(p) || !strncmp(p->op->name, "random_", 7)) return false;
    const json_object *pa = p->attrs, *qa = q->attrs;
    if (pa && !json_object_object_length((json_object *)pa)) pa = NULL;
    if (qa && !json_object_object_length((json_object *)qa)) qa = NULL;
    if ((pa == NULL) != (qa == NULL) || (pa && !json_object_equal((json_object *)pa, (json_object *)qa)))
        return false;
    for (int i = 0; i < p->nin; i++)
        if (!same_value(p->inputs[i], q->inputs[i], depth - 1)) return false;
    return true;
}

/* v's true_div producer, or that of the x of v = neg(x), whose neg node
 * goes to *ng (NULL: v is not negated). NULL: no quotient there. */
static tg_node *quotient(const tg_var *v, tg_node **ng) {
    *ng = tg_rw_producer(v, "neg");
    return tg_rw_producer(*ng ? (*ng)->inputs[0] : v, "true_div");
}

/* (a / y) * .. * y -> a * .. (Theano's local_mul_canonizer cancelling a
 * factor against a divisor), the quotient perhaps negated, and
 * (a / (y1 * y2)) * .. * y1 * y2 -> a * .. likewise. This is how
 * the chain rule writes the derivative of log(f(x)) when f' has f as a
 * factor: for log(sigmoid x), g / s * s * (1 - s), NaN once s underflows
 * to 0 (x < -745), which becomes g * (1 - s) and then g * sigmoid(-x);
 * for log(1 - sigmoid x), -(g / (1 - s)) * s * (1 - s) -> -g * s; for
 * binary_crossentropy(sigmoid x, t), g (s - t) / (s (1 - s)) * s * (1 - s)
 * -> g (s - t). As with mul_div_cancel, the NaN that y = 0 or inf gave as
 * written goes. */
static int mul_quotient_cancel(tg_rw *rw, tg_node *n) {
    if (n->nin < 2 || n->nin > MAX_OPERANDS || !is_float(n->outputs[0])) return 0;
    for (int i = 0; i < n->nin; i++) {
        tg_node *ng, *q = quotient(n->inputs[i], &ng);
        tg_var *f = ng ? ng->inputs[0] : n->inputs[i];
        /* G / p * p with p a softmax is part of the softmax's gradient,
         * which softmax_grad_quotient rewrites whole */
        if (!q || tg_rw_producer(q->inputs[1], "softmax")) continue;
        /* the divisor's factors: y itself, or those of a product y */
        tg_var *y = q->inputs[1], *fac[8] = {y};
        int nf = 1;
        tg_node *ym = tg_rw_producer(y, "mul");
        /* each factor matched to another operand of n */
        bool used[MAX_OPERANDS] = {false};
        int got = 0;
        for (int pass = 0; pass < 2 && !got; pass++) {
            if (pass == 1) {
                if (!ym || ym->nin > 8) break;
                nf = ym->nin;
                for (int k = 0; k < nf; k++) fac[k] = ym->inputs[k];
            }
            memset(used, 0, sizeof used);
            used[i] = true;
            got = 0;
            for (int k = 0; k < nf; k++) {
                int j = 0;
                while (j < n->nin && (used[j] || !same_value(n->inputs[j], fac[k], 3))) j++;
                if (j == n->nin) break;
                used[j] = true;
                got++;
            }
            if (got != nf) got = 0;
        }
        if (!got) continue;
        bool breaks = const_breaks_cancel(y);
        for (int k = 0; k < nf && !breaks; k++) breaks = const_breaks_cancel(fac[k]);
        if (breaks) continue;
        /* a must not be stretched by y, nor change the dtype */
        tg_var *a = q->inputs[0];
        if (a->type.dtype != n->outputs[0]->type.dtype) return 0;
        tg_var *in[MAX_OPERANDS];
        int k = 0;
        for (int m = 0; m < n->nin; m++)
            if (m == i)
                in[k++] = a;
            else if (!used[m])
                in[k++] = n->inputs[m];
        tg_var *r = k == 1 ? in[0] : tg_rw_op(rw, "mul", k, in, NULL);
        if (!r) return TG_ENOMEM;
        if (!stands_for(r, n)) {
            /* What is left is smaller than the product: the gradient of
             * a sum or mean of log(exp x) is (1 / exp x) * exp x with the
             * seed 1 a scalar, and exp x stretched it. A fill of a
             * cancelled factor's shape (computed anyway), else of another
             * operand's, gives the shape back: zeros_like(y) + r. */
            tg_var *span = NULL;
            for (int pass = 0; pass < 2 && !span; pass++)
                for (int m = 0; m < n->nin && !span; m++)
                    if (m != i && used[m] == (pass == 0) && stands_for(n->inputs[m], n)) span = n->inputs[m];
            if (!span || r->type.dtype != span->type.dtype) return 0;
            /* exp x has x's shape: the fill need not keep exp x alive */
            for (const tg_node *p = span->owner;
                 p && p->nin == 1 && p->nout == 1 && (p->op->flags & TG_OPF_ELEMWISE) && !tg_rw_may_raise(p) &&
                 tg_type_equal(&p->inputs[0]->type, &span->type);
                 p = span->owner)
                span = p->inputs[0];
            tg_var *z = tg_rw_op1(rw, "zeros_like", span, NULL);
            if (!z || !(r = tg_rw_op2(rw, "add", z, r))) return TG_ENOMEM;
            if (!stands_for(r, n)) return 0;
        }
        if (ng && !(r = tg_rw_op1(rw, "neg", r, NULL))) return TG_ENOMEM;
        if (match_if_dies(rw, ng) || (tg_rw_single_client(f) && match_if_dies(rw, q))) return TG_ENOMEM;
        return swap_checked(rw, n, r);
    }
    return 0;
}

/* f(g(x)) -> x for inverse pairs (log(exp x), neg(neg x)). */
static int inverse_pair(tg_rw *rw, tg_node *n, const char *inner) {
    tg_node *p = tg_rw_producer(n->inputs[0], inner);
    if (!p || p->outputs[0]->type.dtype != p->inputs[0]->type.dtype) return 0;
    tg_var *x = p->inputs[0];
    if (!stands_for(x, n)) return 0;
    if (tg_rw_match(rw, p)) return TG_ENOMEM;
    return swap(rw, n, x);
}
/* x >= 0 (or NaN) wherever it is defined: an op whose values are never
 * negative, a sum, product, quotient or maximum of such values (x*x
 * included), their reductions (sum, prod, mean, max, min), or a constant
 * with no negative element; looked at `depth` producers deep. That holds
 * of floats (which overflow to inf, not past it) at each step: an unsigned
 * or bool value is never negative, but a signed integer abs, sqr, x*x,
 * sum or product wraps (int8 12*12 is -112, abs(-128) is -128), so of a
 * signed integer only a maximum, relu, max or min of such values and a
 * constant count. */
static bool never_negative_at(const tg_var *x, int depth) {
    static const char *const ops[] = {"exp",  "sqr",  "abs",  "softplus", "sigmoid", "relu",
                                      "sqrt", "exp2", "cosh", "softmax",  "erfc",    NULL};
    char kind = tg_dtype_kind(x->type.dtype);
    if (kind == 'u' || kind == 'b') return true;
    bool wraps = kind != 'f';
    const tg_node *p = x->owner;
    if (p) {
        const char *op = p->op->name;
        for (int i = 0; ops[i]; i++)
            if (!strcmp(op, ops[i]) && (!wraps || !strcmp(op, "relu"))) return true;
        if (depth <= 0) return false;
        /* sums, products, quotients, means and extremes of such values */
        bool sum = wraps ? !strcmp(op, "max") || !strcmp(op, "min")
                         : !strcmp(op, "add") || !strcmp(op, "mul") || !strcmp(op, "true_div") ||
                               !strcmp(op, "sum") || !strcmp(op, "prod") || !strcmp(op, "mean") ||
                               !strcmp(op, "max") || !strcmp(op, "min");
        if (!wraps && !strcmp(op, "mul") && p->nin == 2 && p->inputs[0] == p->inputs[1]) return true;
        if (!strcmp(op, "maximum")) {
            for (int i = 0; i < p->nin; i++)
                if (never_negative_at(p->inputs[i], depth - 1)) return true;
            return false;
        }
        if (!sum) return false;
        for (int i = 0; i < p->nin; i++)
            if (!never_negative_at(p->inputs[i], depth - 1)) return false;
        return true;
    }
    if (x->kind != TG_VAR_CONSTANT || !x->value) return false;
    int64_t n = tg_array_size(x->value);
    if (n > 4096) return false;
    for (int64_t i = 0; i < n; i++)
        if (tg_array_get_flat(x->value, i) < 0) return false;
    return true;
}
static bool never_negative(const tg_var *x) { return never_negative_at(x, 4); }

/* exp(log x) -> x where log is defined: switch(x >= 0, x, nan) (as
 * PyTensor's local_exp_log does), x alone when x is never negative. A
 * negative x gives NaN as written, and that NaN is what nanguard must
 * find: the bare x hid it (and a finite value flowed on). */
static int exp_log(tg_rw *rw, tg_node *n) {
    tg_node *p = tg_rw_producer(n->inputs[0], "log");
    if (!p || p->outputs[0]->type.dtype != p->inputs[0]->type.dtype) return 0;
    tg_var *x = p->inputs[0];
    if (!stands_for(x, n)) return 0;
    if (match_if_dies(rw, p)) return TG_ENOMEM;
    if (never_negative(x)) return swap(rw, n, x);
    tg_dtype dt = x->type.dtype;
    tg_var *pick[3] = {tg_rw_op2(rw, "ge", x, tg_rw_const(rw, dt, 0)), x, tg_rw_const(rw, dt, NAN)};
    return swap(rw, n, tg_rw_op(rw, "switch", 3, pick, NULL));
}
static int log_exp(tg_rw *rw, tg_node *n) { return inverse_pair(rw, n, "exp"); }
static int neg_neg(tg_rw *rw, tg_node *n) { return inverse_pair(rw, n, "neg"); }

/* x - x -> zeros_like(x) */
static int sub_self(tg_rw *rw, tg_node *n) {
    if (n->inputs[0] != n->inputs[1] || n->inputs[0]->type.dtype != n->outputs[0]->type.dtype) return 0;
    return swap_checked(rw, n, tg_rw_op1(rw, "zeros_like", n->inputs[0], NULL));
}

/* add(add(a, b), c) -> add(a, b, c) (and mul), when the inner sum has no
 * other reader and every operand already has the result's dtype (so no
 * promotion changes where rounding happens). The n-ary op folds from the
 * left, so in floats only an inner op that the fold meets first merges:
 * the first operand, or the second of two (a + (b + c) is (b + c) + a,
 * bit for bit); a + (b + c) as add(a, b, c) rounds a + b first, which
 * can overflow (3e38 * (10 * 0.1) is inf) or cancel (1e30 + (-1e30 + 1)
 * is 0) where the expression as written does not. Integers wrap the
 * same in any order. */
static int flatten(tg_rw *rw, tg_node *n) {
    tg_dtype dt = n->outputs[0]->type.dtype;
    /* (float16's n-ary add and mul compute in float32 and round once;
     * as written each step rounds: (65504 + 65504) - 65504 is inf) */
    if (dt == TG_FLOAT16) return 0;
    bool fl = tg_dtype_is_float(dt);
    tg_var *ops[64];
    int no = 0, found = 0;
    for (int i = 0; i < n->nin; i++) {
        tg_var *v = n->inputs[i];
        tg_node *p = v->owner;
        bool first = i == 0 || (i == 1 && n->nin == 2 && !found);
        if (p && p->op == n->op && tg_rw_single_client(v) && v->type.dtype == dt && (!fl || first) &&
            no + p->nin <= 64) {
            bool same = true;
            for (int k = 0; k < p->nin; k++) same &= p->inputs[k]->type.dtype == dt;
            if (same) {
                /* (the second of two goes first: a + (b + c) is (b + c) + a) */
                if (i == 1 && fl) {
                    tg_var *a = ops[0];
                    no = 0;
                    for (int k = 0; k < p->nin; k++) ops[no++] = p->inputs[k];
                    ops[no++] = a;
                } else {
                    for (int k = 0; k < p->nin; k++) ops[no++] = p->inputs[k];
                }
                if (tg_rw_match(rw, p)) return TG_ENOMEM;
                found++;
                continue;
            }
        }
        if (no == 64) return 0;
        ops[no++] = v;
    }
    if (!found) return 0;
    return swap(rw, n, tg_rw_op(rw, n->op->name, no, ops, NULL));
}

/* The one element of constant v cast to the integer dtype dt (NumPy's
 * cast: wrapped to its width), widened to 64 bits: sums and products of
 * such values modulo 2^64, cut to dt's width, are those of dt's wrapping
 * arithmetic, exactly (a double holds 53 bits). */
static uint64_t int_bits(const tg_var *v, tg_dtype dt) {
    uint64_t b = 0;
    tg_cast_strided(dt, &b, 0, v->value->dtype, tg_array_data(v->value), 0, 1);
    return (uint64_t)tg_load_i64(dt, &b);
}

/* A new constant of dtype dt and ndim nd (every length 1) holding bits
 * (an integer dt, cut to its width) or v. */
static tg_var *one_const(tg_rw *rw, tg_dtype dt, int nd, uint64_t bits, double v) {
    int64_t ones[TG_MAX_NDIM];
    for (int d = 0; d < nd; d++) ones[d] = 1;
    tg_array *c = tg_array_new(dt, nd, ones);
    if (c && tg_dtype_is_float(dt))
        tg_store_f64(dt, tg_array_data(c), v);
    else if (c)
        tg_store_i64(dt, tg_array_data(c), (int64_t)bits);
    return tg_rw_const_array(rw, c);
}

/* add(x, c1, c2) -> add(x, c1+c2); add(x, 0) -> x; mul likewise with 1.
 * Constants of one element, combined in the result's dtype: integers
 * exactly, wrapping as the dtype does; floats summed (or multiplied) in
 * float64, then rounded. One of ndim k (a gradient's dimshuffle of a
 * scalar makes [1]) broadcasts as k leading ones: where the other
 * operands have at least as many axes, the constants become one 0-d
 * constant (a lone [c] too, so that the gemm rewrites, which take
 * scalar coefficients, see c), else one of the most axes among them; a
 * neutral one is dropped only in the first case (and where the result
 * keeps its dtype without it: `fits`). For floats the additive identity
 * is -0.0: x + 0.0 turns x = -0.0 into +0.0 (IEEE, NumPy), so add(x,
 * 0.0) stays and add(x, -0.0) -> x; the constants' sum starts from -0.0
 * so that it is -0.0 only where every one is. */
static int collect_constants(tg_rw *rw, tg_node *n) {
    bool is_add = !strcmp(n->op->name, "add");
    tg_dtype dt = n->outputs[0]->type.dtype;
    if (dt == TG_BOOL) return 0;
    bool fl = tg_dtype_is_float(dt);
    double acc = is_add ? (fl ? -0.0 : 0) : 1;
    uint64_t iacc = is_add ? 0 : 1;
    int nconst = 0, cnd = 0, rnd = 0; /* the most axes of the constants, of the rest */
    tg_var *rest[MAX_OPERANDS];
    int nr = 0;
    if (n->nin > MAX_OPERANDS) return 0;
    for (int i = 0; i < n->nin; i++) {
        tg_var *x = n->inputs[i];
        double v;
        if (scalar_const(x, &v)) {
            acc = is_add ? acc + v : acc * v;
            if (!fl) iacc = is_add ? iacc + int_bits(x, dt) : iacc * int_bits(x, dt);
            nconst++;
            if (x->type.ndim > cnd) cnd = x->type.ndim;
        } else {
            rest[nr++] = x;
            if (x->type.ndim > rnd) rnd = x->type.ndim;
        }
    }
    if (!fl && tg_dtype_size(dt) < 8) iacc &= ((uint64_t)1 << (8 * tg_dtype_size(dt))) - 1;
    bool neutral = fl ? (is_add ? acc == 0 && signbit(acc) : acc == 1) : iacc == (is_add ? 0u : 1u);
    if (nconst == 0 || nr == 0) return 0;
    int ond = cnd <= rnd ? 0 : cnd; /* the axes of the one constant */
    if (neutral && !ond) {
        /* (fits declines a replacement whose dtype the constants set;
         * they are then still made one 0-d constant below) */
        tg_var *r = nr == 1 ? (stands_for(rest[0], n) ? rest[0] : NULL) : tg_rw_op(rw, n->op->name, nr, rest, NULL);
        if (nr > 1 && !r) return tg_rw_ctx(rw) && tg_rw_ctx(rw)->status ? tg_rw_ctx(rw)->status : TG_ENOMEM;
        int got = r ? swap(rw, n, r) : 0;
        if (got || (nconst == 1 && !cnd)) return got;
    } else if (nconst == 1 && ond == cnd) {
        return 0; /* a lone constant in the form it would be given */
    }
    if (!(rest[nr++] = one_const(rw, dt, ond, iacc, acc))) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op(rw, n->op->name, nr, rest, NULL));
}

/* The order of a dimshuffle, or of a transpose as one. */
static bool order_of(const tg_node *n, int *order, int *norder) {
    if (!strcmp(n->op->name, "dimshuffle")) {
        *norder = n->a.norder;
        memcpy(order, n->a.order, sizeof(int) * (size_t)n->a.norder);
        return true;
    }
    if (!strcmp(n->op->name, "transpose")) {
        int nd = n->inputs[0]->type.ndim;
        *norder = nd;
        if (n->a.axis_null)
            for (int i = 0; i < nd; i++) order[i] = nd - 1 - i;
        else
            for (int i = 0; i < nd; i++) order[i] = n->a.axes[i] < 0 ? n->a.axes[i] + nd : n->a.axes[i];
        return true;
    }
    return false;
}

static tg_var *dimshuffle(tg_rw *rw, tg_var *x, const int *order, int norder) {
    char buf[256];
    int k = snprintf(buf, sizeof buf, "{\"order\": [");
    for (int i = 0; i < norder; i++)
        if (order[i] < 0)
            k += snprintf(buf + k, sizeof buf - (size_t)k, "%s\"x\"", i ? ", " : "");
        else
            k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%d", i ? ", " : "", order[i]);
    snprintf(buf + k, sizeof buf - (size_t)k, "]}");
    return tg_rw_op1(rw, "dimshuffle", x, buf);
}

static bool identity_order(const int *order, int norder, int ndim) {
    if (norder != ndim) return false;
    for (int i = 0; i < norder; i++)
        if (order[i] != i) return false;
    return true;
}

/* A dimshuffle of x by order that moves no value: each axis stays where
 * it is, or is a length-1 axis of x dropped and put back in its place
 * (order ['x', 1] of a [1, n] x, which the gradient of a sum over a
 * length-1 axis writes and dimshuffle_merge composes). */
static bool keeps_layout(const int *order, int norder, const tg_var *x) {
    if (norder != x->type.ndim) return false;
    for (int i = 0; i < norder; i++)
        if (order[i] != i && !(order[i] < 0 && x->type.shape[i] == 1)) return false;
    return true;
}

static bool is_dimshuffle(const tg_node *n) {
    return n && (!strcmp(n->op->name, "dimshuffle") || !strcmp(n->op->name, "transpose"));
}

/* How many elementwise ops a dimshuffle that waits for one above it
 * (dimshuffle_lift) looks through, and (requeue_below) how many nodes
 * below a merged pair are looked at for those that waited. */
enum { LIFT_LOOK = 4, LIFT_BUDGET = 32 };

/* A dimshuffle that lifts through the ops below it to meet one below
 * them may have left that one waiting (dimshuffle_lift); when the pair
 * merges away, the dimshuffles feeding the elementwise ops that make v,
 * its input, up to LIFT_LOOK of them down, are looked at again. */
static int requeue_below_from(tg_rw *rw, const tg_var *v, int hops, int *budget) {
    const tg_node *e = v->owner;
    if (!e || !(e->op->flags & TG_OPF_ELEMWISE)) return TG_OK;
    for (int i = 0; i < e->nin && *budget > 0; i++) {
        tg_node *k = e->inputs[i]->owner;
        if (!k) continue;
        --*budget;
        if (is_dimshuffle(k)) {
            if (tg_rw_requeue(rw, k)) return TG_ENOMEM;
        } else if (hops + 1 < LIFT_LOOK && requeue_below_from(rw, e->inputs[i], hops + 1, budget)) {
            return TG_ENOMEM;
        }
    }
    return TG_OK;
}

static int requeue_below(tg_rw *rw, const tg_var *v) {
    int budget = LIFT_BUDGET;
    return requeue_below_from(rw, v, 0, &budget);
}

/* transpose -> dimshuffle, dimshuffle(dimshuffle x) -> one, identity
 * dimshuffle (or one that moves no value) -> x. */
static int dimshuffle_merge(tg_rw *rw, tg_node *n) {
    int o2[TG_MAX_NDIM], n2;
    if (!order_of(n, o2, &n2)) return 0;
    tg_var *x = n->inputs[0];
    if (keeps_layout(o2, n2, x)) return requeue_below(rw, x) ? TG_ENOMEM : swap(rw, n, x);
    tg_node *p = x->owner;
    int o1[TG_MAX_NDIM], n1;
    if (p && order_of(p, o1, &n1)) {
        int o[TG_MAX_NDIM];
        for (int i = 0; i < n2; i++) o[i] = o2[i] < 0 ? -1 : o1[o2[i]];
        /* An axis the outer one drops must be one the inner one added or
         * a length-1 axis of the input; the composed order drops it the
         * same way. */
        if (tg_rw_match(rw, p) || requeue_below(rw, p->inputs[0])) return TG_ENOMEM;
        if (keeps_layout(o, n2, p->inputs[0])) return swap(rw, n, p->inputs[0]);
        return swap(rw, n, dimshuffle(rw, p->inputs[0], o, n2));
    }
    if (!strcmp(n->op->name, "transpose")) return swap(rw, n, dimshuffle(rw, x, o2, n2));
    return 0;
}

/* How a dimshuffle n of an elementwise result lifts through the op e
 * that makes it (dimshuffle_lift): the order for each of e's inputs in
 * oi[i] (ni[i] entries; 0 for a scalar input, which broadcasts
 * anywhere). NULL when it does not: e is not elementwise with one output
 * read only by n, or has more than 8 inputs, or n drops an axis that is
 * not statically length 1 in some input. Every input must have been
 * broadcast to the output exactly along the axes the order keeps (no
 * input may be dropped: a length-1 axis of the output is length 1 in
 * every input, so that holds). */
static tg_node *lift_plan(const tg_node *n, int (*oi)[TG_MAX_NDIM], int *ni) {
    int o[TG_MAX_NDIM], no;
    if (!order_of(n, o, &no)) return NULL;
    tg_var *y = n->inputs[0];
    tg_node *e = y->owner;
    if (!e || !(e->op->flags & TG_OPF_ELEMWISE) || e->nout != 1 || !tg_rw_single_client(y) ||
        e->nin > 8)
        return NULL;
    int m = y->type.ndim;
    for (int i = 0; i < e->nin; i++) {
        const tg_var *a = e->inputs[i];
        int k = a->type.ndim, pad = m - k;
        ni[i] = 0;
        if (k == 0) continue;
        bool keeps[TG_MAX_NDIM] = {0};
        for (int j = 0; j < no; j++) {
            if (o[j] < 0 || o[j] < pad) {
                oi[i][ni[i]++] = -1;
            } else {
                oi[i][ni[i]++] = o[j] - pad;
                keeps[o[j] - pad] = true;
            }
        }
        /* Input axes the order drops must be length 1 statically. */
        for (int d = 0; d < k; d++)
            if (!keeps[d] && a->type.shape[d] != 1) return NULL;
    }
    return e;
}

/* An order that moves every axis and adds or drops none. */
static bool is_permutation(const tg_node *m) {
    int o[TG_MAX_NDIM], no;
    if (!order_of(m, o, &no) || no != m->inputs[0]->type.ndim) return false;
    bool seen[TG_MAX_NDIM] = {0};
    for (int i = 0; i < no; i++) {
        if (o[i] < 0 || o[i] >= no || seen[o[i]]) return false;
        seen[o[i]] = true;
    }
    return true;
}

/* The dimshuffle that will lift down to n's output through the
 * elementwise ops reading it (n -> f -> m, each result read once), or
 * NULL. Through more than one op (n -> f -> g -> m, up to LIFT_LOOK),
 * only a permutation m over ops whose results have its rank along the
 * way: such an order lifts through any elementwise op. */
static tg_node *lifts_above(const tg_node *n) {
    const tg_var *z = n->outputs[0];
    int nd = z->type.ndim;
    for (int hops = 0; hops < LIFT_LOOK; hops++) {
        if (!tg_rw_single_client(z)) return NULL;
        const tg_node *e = z->clients[0].node;
        if (!(e->op->flags & TG_OPF_ELEMWISE) || e->nout != 1 || e->nin > 8 ||
            !tg_rw_single_client(e->outputs[0]))
            return NULL;
        const tg_var *y = e->outputs[0];
        tg_node *m = y->clients[0].node;
        int oi[8][TG_MAX_NDIM], ni[8];
        if (is_dimshuffle(m))
            return lift_plan(m, oi, ni) && (hops == 0 || is_permutation(m)) ? m : NULL;
        if (y->type.ndim != nd) return NULL;
        z = y;
    }
    return NULL;
}

/* dimshuffle(f(a, b)) -> f(dimshuffle(a), dimshuffle(b)) for an
 * elementwise f read only here (Theano's local_dimshuffle_lift): the
 * dimshuffles move towards the inputs, where they merge with others and
 * leave the elementwise ops next to each other for fusion.
 *
 * The pass visits inputs first, so in a chain that alternates
 * dimshuffles and elementwise ops (`exp(exp(x.T).T)...`) each dimshuffle
 * would be lifted through every op below it before the one above came
 * down to meet it: n^2/2 new nodes for n pairs. A dimshuffle that one
 * above will come down to (n -> f -> m, and m lifts through f) waits for
 * it instead, and m is looked at first: the two merge, and what they
 * merge into goes on down alone. When they cancel, the dimshuffle below
 * that waited on n is looked at again (requeue_below). */
static int dimshuffle_lift(tg_rw *rw, tg_node *n) {
    int oi[8][TG_MAX_NDIM], ni[8];
    tg_node *e = lift_plan(n, oi, ni);
    if (!e) return 0;
    tg_node *m = lifts_above(n);
    if (m) return tg_rw_requeue(rw, m) ? TG_ENOMEM : 0;
    tg_var *ins[8];
    for (int i = 0; i < e->nin; i++) {
        tg_var *a = e->inputs[i];
        int k = a->type.ndim;
        ins[i] = !k || identity_order(oi[i], ni[i], k) ? a : dimshuffle(rw, a, oi[i], ni[i]);
        if (!ins[i]) return TG_ENOMEM;
    }
    if (tg_rw_match(rw, e)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op_json(rw, e->op, e->nin, ins, e->attrs));
}

/* A constant reshape target: the product of its entries other than one
 * -1 in *prod, whether it has the -1 in *minus1. False when the shape is
 * not a constant int vector, or has another negative entry or a -1 with
 * a zero beside it (a reshape that always fails). */
static bool reshape_target(const tg_var *s, int64_t *prod, bool *minus1) {
    if (s->kind != TG_VAR_CONSTANT || !s->value || s->value->ndim != 1) return false;
    int64_t p = 1, n = tg_array_size(s->value);
    bool f = false;
    for (int64_t i = 0; i < n; i++) {
        double d = tg_array_get_flat(s->value, i);
        if (d == -1 && !f) {
            f = true;
        } else {
            if (d < 0 || d > (double)(INT64_MAX / 2) || (p && (int64_t)d > INT64_MAX / p)) return false;
            p *= (int64_t)d;
        }
    }
    if (f && p == 0) return false;
    *prod = p;
    *minus1 = f;
    return true;
}

/* Whether a reshape of x to t2 cannot succeed where the reshape of x to
 * t1 fails: every size that t2 accepts, t1 accepts (a size P for a
 * target without -1, the multiples of P with one). */
static bool reshape_check_implied(const tg_var *t1, const tg_var *t2) {
    int64_t p1, p2;
    bool f1, f2;
    if (!reshape_target(t1, &p1, &f1) || !reshape_target(t2, &p2, &f2)) return false;
    if (!f2) return f1 ? p2 % p1 == 0 : p1 == p2;
    return f1 && p2 % p1 == 0;
}

/* reshape(x) to x's own static shape -> x; reshape(reshape x) ->
 * reshape x; flatten(x) to x's ndim -> x. The chain merges only where
 * the inner reshape's size check survives: it has another reader (so it
 * still runs), or the outer target's check implies it (Theano's
 * local_reshape_chain drops it, and with it the error of a size the
 * inner target does not take). */
static int reshape_useless(tg_rw *rw, tg_node *n) {
    tg_var *x = n->inputs[0];
    if (tg_rw_type_same_known(&x->type, &n->outputs[0]->type)) return swap(rw, n, x);
    tg_node *p = x->owner;
    if (!strcmp(n->op->name, "reshape") && p && !strcmp(p->op->name, "reshape") &&
        (x->nclients >= 2 || reshape_check_implied(p->inputs[1], n->inputs[1]))) {
        tg_var *in[2] = {p->inputs[0], n->inputs[1]};
        if (tg_rw_match(rw, p)) return TG_ENOMEM;
        return swap(rw, n, tg_rw_op(rw, "reshape", 2, in, NULL));
    }
    return 0;
}

/* Whether every value of dtype `from` is a value of `to`, exactly: a
 * bool anywhere; an integer into an integer whose range holds it, or into
 * a float whose significand holds its bits (int8/uint8 -> float16,
 * 16-bit -> float32, 32-bit -> float64); a float into a float as wide or
 * wider. NumPy's safe casting is wider than this: int64 and uint64 ->
 * float64 round (2^53 + 1 -> 2^53). */
static bool cast_exact(tg_dtype from, tg_dtype to) {
    if (from == to || from == TG_BOOL) return true;
    if (to == TG_BOOL) return false;
    size_t fs = tg_dtype_size(from), ts = tg_dtype_size(to);
    if (tg_dtype_is_float(from)) return tg_dtype_is_float(to) && ts >= fs;
    bool fsigned = tg_dtype_kind(from) == 'i';
    if (tg_dtype_is_float(to)) {
        size_t bits = fs * 8 - fsigned, digits = ts == 2 ? 11 : ts == 4 ? 24 : 53;
        return bits <= digits;
    }
    if (fsigned) return tg_dtype_kind(to) == 'i' && ts >= fs;
    return tg_dtype_kind(to) == 'i' ? ts > fs : ts >= fs;
}

/* cast(cast(x, a), b) == cast(x, b) for every x: x -> a keeps every value
 * (then a -> b sees x's own value, and a conversion to a float or bool,
 * or from an integer to an integer (wrapping), depends on the value
 * alone), except from an integer x through a float a to an integer b: a
 * float out of b's range does not wrap as an integer does (uint32 3e9 ->
 * float64 -> int32 is INT32_MIN, uint32 -> int32 wraps to -1294967296),
 * so there x must fit b as well. */
static bool cast_chain_merges(tg_dtype x, tg_dtype a, tg_dtype b) {
    if (!cast_exact(x, a)) return false;
    if (tg_dtype_is_int(x) && tg_dtype_is_float(a) && tg_dtype_is_int(b)) return cast_exact(x, b);
    return true;
}

/* cast to the same dtype -> x; cast(cast(x, a), b) -> cast(x, b) when
 * that gives the same values (cast_chain_merges); identity(x) -> x. */
static int cast_useless(tg_rw *rw, tg_node *n) {
    tg_var *x = n->inputs[0];
    if (x->type.dtype == n->outputs[0]->type.dtype) return swap(rw, n, x);
    tg_node *p = tg_rw_producer(x, "cast");
    if (p && cast_chain_merges(p->inputs[0]->type.dtype, x->type.dtype, n->outputs[0]->type.dtype)) {
        if (tg_rw_match(rw, p)) return TG_ENOMEM;
        if (p->inputs[0]->type.dtype == n->outputs[0]->type.dtype) return swap(rw, n, p->inputs[0]);
        return swap(rw, n, tg_rw_op1(rw, "cast", p->inputs[0], attrs_str(n)));
    }
    return 0;
}

static int identity_useless(tg_rw *rw, tg_node *n) { return swap(rw, n, n->inputs[0]); }

/* The producer p of y that an argmax (or argmin, *op) with n's attrs
 * goes through, *op then what it becomes there; NULL when it does not. */
static tg_node *argmax_through(const tg_var *y, const tg_node *n, const char **op) {
    static const char *const increasing[] = {"exp",  "exp2",    "expm1", "sigmoid", "tanh", "softplus",
                                             "arctan", "sinh", "arcsinh", "erf", NULL};
    tg_node *p = y->owner;
    if (!p || p->nin != 1 || p->nout != 1) return NULL;
    const tg_var *x = p->inputs[0];
    if (x->type.dtype == TG_BOOL || x->type.ndim != y->type.ndim) return NULL;
    const char *f = p->op->name;
    bool ok = false;
    if (!strcmp(f, "softmax") || !strcmp(f, "log_softmax")) {
        ok = p->a.axis_mask == n->a.axis_mask;
    } else if (!strcmp(f, "neg")) {
        if (!tg_dtype_is_float(x->type.dtype)) return NULL;
        *op = !strcmp(*op, "argmax") ? "argmin" : "argmax";
        ok = true;
    } else {
        for (int i = 0; increasing[i] && !ok; i++) ok = !strcmp(f, increasing[i]);
    }
    return ok ? p : NULL;
}

static bool is_argmax(const tg_node *a) { return !strcmp(a->op->name, "argmax") || !strcmp(a->op->name, "argmin"); }

/* How many readers of a variable argmax_pushdown looks through (past
 * that, it goes down alone: a variable read by thousands costs no
 * more). */
enum { ARGMAX_LOOK = 8 };

/* a, a live argmax or argmin, has n's attrs and type. */
static bool argmax_like(const tg_node *a, const tg_node *n) {
    return !tg_rw_dead(a) && is_argmax(a) && a->a.axis_null == n->a.axis_null && a->a.axis_mask == n->a.axis_mask &&
           a->a.keepdims == n->a.keepdims && tg_type_equal(&a->outputs[0]->type, &n->outputs[0]->type);
}

/* The argmaxes and argmins like n that read f(v), for f a reader of v
 * other than `from` that they go through into v: through[i], the i-th
 * of them, with neg[i] whether f is a neg (at most ARGMAX_LOOK readers
 * of v and of each f(v) are looked at). With limit 1, the first. */
static int argmax_readers_through(const tg_var *v, const tg_node *from, const tg_node *n, tg_node **through,
                                  bool *neg, int limit) {
    int k = 0;
    if (v->nclients > ARGMAX_LOOK) return 0;
    for (int i = 0; i < v->nclients && k < limit; i++) {
        const tg_node *f = v->clients[i].node;
        if (!f || f == from || f->nout != 1 || f->outputs[0]->nclients > ARGMAX_LOOK) continue;
        const tg_var *y = f->outputs[0];
        const char *op = "argmax";
        if (argmax_through(y, n, &op) != f) continue;
        for (int j = 0; j < y->nclients && k < limit; j++) {
            tg_node *m = y->clients[j].node;
            if (m && m != n && argmax_like(m, n)) {
                neg[k] = !strcmp(f->op->name, "neg");
                through[k++] = m;
            }
        }
    }
    return k;
}

/* How far up, and past how many readers, argmax_above looks: far enough
 * that argmaxes spaced along a chain wait for each other (4 steps up,
 * one every 6 steps of a 24,000-step chain of tanh walked it 4,000
 * times: 3.9 s), with a bound on what an argmax with none above looks
 * at (argmax_up recurses a step a hop). */
enum { ARGMAX_UP = 256, ARGMAX_BUDGET = 1024 };

/* An argmax or argmin like n that reads a variable at least `min` and at
 * most ARGMAX_UP steps above v (hops taken so far), each step through an
 * op it goes through, the first through a reader of v other than
 * `from`; *budget bounds the readers looked at. */
static tg_node *argmax_up(const tg_var *v, const tg_node *from, const tg_node *n, int hops, int min, int *budget) {
    if (v->nclients > ARGMAX_LOOK) return NULL;
    for (int i = 0; i < v->nclients; i++) {
        const tg_node *g = v->clients[i].node;
        if (!g || g == from || g->nout != 1) continue;
        if (--*budget < 0) return NULL;
        const tg_var *w = g->outputs[0];
        const char *op = "argmax";
        if (w->nclients > ARGMAX_LOOK || argmax_through(w, n, &op) != g) continue;
        if (hops + 1 >= min)
            for (int j = 0; j < w->nclients; j++) {
                tg_node *m = w->clients[j].node;
                if (m && m != n && argmax_like(m, n)) return m;
            }
        if (hops + 1 < ARGMAX_UP) {
            tg_node *m = argmax_up(w, NULL, n, hops + 1, min, budget);
            if (m) return m;
        }
    }
    return NULL;
}

/* An argmax or argmin like n whose way down will take n along, so that n
 * waits for it (argmax_pushdown). Its way passes x, n's input, coming
 * from another reader of x (it takes the readers of x along); or passes
 * u, where n's way goes after its first step (x = p(u)), coming from
 * another reader of u than p (it takes the argmaxes of p(u) along: n on
 * a side branch of a chain, `argmax(exp(t_k))` for each t_k =
 * tanh(t_{k-1})). It reads a variable further from the graph's inputs
 * than x, so that no two wait for each other: at least one step above x,
 * or two above u. Up to ARGMAX_UP steps are looked at; past that an
 * argmax goes down on its own, walking the chain below it (argmaxes
 * spaced further apart than that walk n^2 / (2 * ARGMAX_UP) steps in
 * all). */
static tg_node *argmax_above(const tg_node *n) {
    const tg_var *x = n->inputs[0];
    int budget = ARGMAX_BUDGET;
    if (x->nclients > ARGMAX_LOOK) return NULL;
    tg_node *m = argmax_up(x, n, n, 0, 1, &budget);
    if (m) return m;
    const tg_node *p = x->owner;
    return argmax_up(p->inputs[0], p, n, 0, 2, &budget);
}

/* argmax(f(x)) -> argmax(x), argmin too, for f that keeps the order of
 * the values it compares (Theano's local_argmax_pushdown): softmax and
 * log_softmax over the argmax's axes, and the strictly increasing
 * elementwise functions of one input; neg(x) of floats swaps argmax and
 * argmin. A classifier's prediction, argmax(softmax(logits)), stops
 * computing the softmax. Where f rounds two different values to one (a
 * saturated sigmoid, exp past overflow) the result is the index of the
 * true extreme rather than the first of the tie; where a softmax row
 * holds a NaN (all of it NaN, index 0 as written) it is the NaN's index,
 * as argmax(x) gives.
 *
 * It goes all the way down in one application, and takes with it the
 * argmaxes like it that it passes (an argmax of every step of a chain of
 * such ops); an argmax with one above that will pass its input waits for
 * it. A step at a time, each went down the whole chain below it, a new
 * node a step: n^2/2. An argmax of the bottom already there is taken. */
static int argmax_pushdown(tg_rw *rw, tg_node *n) {
    const char *op = n->op->name;
    if (!argmax_through(n->inputs[0], n, &op)) return 0;
    tg_node *m = argmax_above(n);
    if (m) return tg_rw_requeue(rw, m) ? TG_ENOMEM : 0;
    /* The way down: the argmaxes passed, and how many negations lie
     * above each (its op flips at each one below it). */
    tg_node **passed = NULL;
    int *flips_at = NULL, npassed = 0, cap = 0, flips = 0, rc = TG_OK;
    tg_var *v = n->inputs[0];
    const tg_node *from = n; /* the reader of v the way came up through */
    for (tg_node *p; (p = argmax_through(v, n, &op));) {
        /* Those that read v, and those that read f(v) for another reader
         * f they go through (side branches; one negation more where f is
         * a neg). */
        tg_node *side[ARGMAX_LOOK * ARGMAX_LOOK];
        bool side_neg[ARGMAX_LOOK * ARGMAX_LOOK];
        int nside = v != n->inputs[0] ? argmax_readers_through(v, from, n, side, side_neg, ARGMAX_LOOK * ARGMAX_LOOK) : 0;
        for (int i = -nside; v != n->inputs[0] && v->nclients <= ARGMAX_LOOK && i < v->nclients; i++) {
            tg_node *a = i < 0 ? side[-i - 1] : v->clients[i].node;
            if (!a || a == n || !argmax_like(a, n)) continue;
            if (npassed == cap) {
                cap = cap ? 2 * cap : 16;
                tg_node **p2 = tg_realloc(passed, sizeof *p2 * (size_t)cap);
                if (p2) passed = p2;
                int *f2 = p2 ? tg_realloc(flips_at, sizeof *f2 * (size_t)cap) : NULL;
                if (f2) flips_at = f2;
                if (!p2 || !f2) {
                    rc = TG_ENOMEM;
                    goto done;
                }
            }
            flips_at[npassed] = flips - (i < 0 && side_neg[-i - 1]);
            passed[npassed++] = a;
        }
        flips += !strcmp(p->op->name, "neg");
        from = p;
        v = p->inputs[0];
    }
    /* At the bottom, v: its argmax and argmin, taken or made once. */
    tg_var *at[2] = {NULL, NULL};
    for (int i = 0; v->nclients <= ARGMAX_LOOK && i < v->nclients; i++) {
        tg_node *a = v->clients[i].node;
        if (a && argmax_like(a, n)) at[strcmp(a->op->name, "argmax") != 0] = a->outputs[0];
    }
    if ((rc = match_if_dies(rw, n->inputs[0]->owner))) goto done;
    /* n first: the others only once it applied */
    for (int k = npassed; k >= 0; k--) {
        tg_node *a = k < npassed ? passed[k] : n;
        int below = flips - (k < npassed ? flips_at[k] : 0);
        int which = (strcmp(a->op->name, "argmax") != 0) ^ (below & 1);
        if (!at[which] && !(at[which] = tg_rw_op1(rw, which ? "argmin" : "argmax", v, attrs_str(n)))) {
            rc = swap(rw, n, NULL);
            goto done;
        }
        if (a == n) {
            if ((rc = swap(rw, n, at[which])) != 1) goto done;
        } else {
            int r = tg_rw_match(rw, a);
            if (r || (r = tg_rw_replace(rw, a->outputs[0], at[which]))) {
                rc = r;
                goto done;
            }
        }
    }
done:
    tg_free(passed);
    tg_free(flips_at);
    return rc;
}

/* shape(x) -> the constant, when x's type gives every length; shape_i(x)
 * when it gives that axis's (Theano's constant shapes). The lengths that
 * gradients read (reshape back to shape(x), mean's count) become
 * constants that fold and let reshape_useless see a reshape to x's own
 * shape. Only where x is computed anyway (another reader, a function
 * output, or no producer): otherwise the fold would also drop x's
 * computation, and with it an error that computing x raises at run time
 * (lengths that contradict the static ones), which the unoptimized
 * function reports. */
static int shape_static(tg_rw *rw, tg_node *n) {
    const tg_var *x = n->inputs[0];
    if (x->owner && x->nclients < 2) return 0;
    int nd = x->type.ndim;
    if (!strcmp(n->op->name, "shape_i")) {
        int64_t i = n->a.i < 0 ? n->a.i + nd : n->a.i;
        if (i < 0 || i >= nd || x->type.shape[i] < 0) return 0;
        return swap(rw, n, tg_rw_const(rw, TG_INT64, (double)x->type.shape[i]));
    }
    for (int d = 0; d < nd; d++)
        if (x->type.shape[d] < 0) return 0;
    int64_t len = nd;
    return swap(rw, n, tg_rw_const_array(rw, tg_array_new_from(TG_INT64, 1, &len, x->type.shape)));
}

/* ---- sums to a shape the gradient has already ---- */

/* One axis's run-time length, as far as the graph shows it: a static
 * length (len >= 0), or axis d of variable v (every variable whose axis
 * reduces to the same (v, d) has the same length there at run time). */
typedef struct axis_len {
    const tg_var *v;
    int d;
    int64_t len;
} axis_len;

static bool axis_same(axis_len a, axis_len b) {
    return a.len >= 0 || b.len >= 0 ? a.len == b.len : a.v == b.v && a.d == b.d;
}

/* Where v's axis d has its length from, following the ops that give an
 * output axis an input's length: a broadcasting elementwise op whose
 * operands agree (each either 1 there or of one length), sum_to (its
 * target's shape), the fills, pool2d_grad, softmax and log_softmax (their
 * input's shape), the increments and sets (their input 0's), take (its
 * input's axes and its indices'), dimshuffle, dot of matrices, conv2d's batch and
 * channels. Anything else, or past *budget steps: (v, d) itself, which
 * proves nothing beyond v. */
static axis_len axis_of(const tg_var *v, int d, int *budget) {
    axis_len self = {v, d, v->type.shape[d]};
    if (self.len >= 0) {
        self.v = NULL;
        return self;
    }
    const tg_node *p = v->owner;
    if (--*budget < 0 || !p || p->nout != 1) return self;
    const char *op = p->op->name;
    const int nd = v->type.ndim;
    if (p->op->flags & TG_OPF_ELEMWISE) {
        /* the operands' lengths other than 1 (missing axes count as 1) */
        axis_len got = {NULL, 0, 1};
        bool have = false;
        for (int i = 0; i < p->nin; i++) {
            const tg_var *x = p->inputs[i];
            int k = d - (nd - x->type.ndim);
            if (k < 0 || x->type.shape[k] == 1) continue;
            axis_len a = axis_of(x, k, budget);
            if (a.len == 1) continue;
            if (have && !axis_same(got, a)) return self;
            got = a;
            have = true;
        }
        return got;
    }
    if (!strcmp(op, "sum_to"))
        return p->inputs[1]->type.ndim == nd ? axis_of(p->inputs[1], d, budget) : self;
    if (!strcmp(op, "take") && p->nin == 2) { /* x's axes, the indices' in place of the one taken */
        const tg_var *x = p->inputs[0], *ix = p->inputs[1];
        int ax = p->a.axes[0] < 0 ? p->a.axes[0] + x->type.ndim : p->a.axes[0];
        if (ax < 0 || ax >= x->type.ndim || nd != x->type.ndim - 1 + ix->type.ndim) return self;
        if (d < ax) return axis_of(x, d, budget);
        if (d < ax + ix->type.ndim) return axis_of(ix, d - ax, budget);
        return axis_of(x, d - ix->type.ndim + 1, budget);
    }
    if (!strcmp(op, "zeros_like") || !strcmp(op, "ones_like") || !strcmp(op, "pool2d_grad") ||
        !strcmp(op, "softmax") || !strcmp(op, "log_softmax") || !strcmp(op, "take_add") ||
        !strcmp(op, "take_set") || !strcmp(op, "inc_subtensor") || !strcmp(op, "set_subtensor"))
        return p->inputs[0]->type.ndim == nd ? axis_of(p->inputs[0], d, budget) : self;
    if (!strcmp(op, "dimshuffle") && d < p->a.norder) {
        if (p->a.order[d] < 0) return (axis_len){NULL, 0, 1};
        return axis_of(p->inputs[0], p->a.order[d], budget);
    }
    if (!strcmp(op, "dot") && nd == 2 && p->inputs[0]->type.ndim == 2 && p->inputs[1]->type.ndim == 2)
        return axis_of(p->inputs[d], d, budget);
    if (!strcmp(op, "matmul") && p->inputs[0]->type.ndim >= 2 && p->inputs[1]->type.ndim >= 2) {
        /* rows from a, columns from b; a batch axis from the operand
         * that has one where the other is a matrix */
        const tg_var *a = p->inputs[0], *b = p->inputs[1];
        if (d == nd - 2) return axis_of(a, a->type.ndim - 2, budget);
        if (d == nd - 1) return axis_of(b, b->type.ndim - 1, budget);
        if (b->type.ndim == 2 && a->type.ndim == nd) return axis_of(a, d, budget);
        if (a->type.ndim == 2 && b->type.ndim == nd) return axis_of(b, d, budget);
        return self;
    }
    if (!strcmp(op, "conv2d") && d < 2 && nd == 4)
        return axis_of(p->inputs[d], 0, budget);
    return self;
}

/* sum_to(g, x) -> g where g has x's shape at run time for sure, axis by
 * axis (there is nothing to sum). The gradient of a bias added to a
 * convolution or a product writes one for the other operand, whose batch
 * length is unknown until run time: it copied the gradient at every call
 * (the convnet example's first layer: 2.8 million values). */
static int sum_to_useless(tg_rw *rw, tg_node *n) {
    const tg_var *g = n->inputs[0], *x = n->inputs[1];
    if (g->type.ndim != x->type.ndim || g->type.dtype != n->outputs[0]->type.dtype) return 0;
    int budget = 256;
    for (int d = 0; d < x->type.ndim; d++)
        if (!axis_same(axis_of(g, d, &budget), axis_of(x, d, &budget))) return 0;
    return swap_checked(rw, n, n->inputs[0]);
}

/* ---- fills (the seeds and broadcasts that grad writes) ---- */

/* ones_like(s) / zeros_like(s) of a scalar: the constant (grad's seed
 * ones_like(cost) no longer keeps the cost's computation alive). */
static int fill_scalar(tg_rw *rw, tg_node *n) {
    const tg_var *x = n->inputs[0];
    if (x->type.ndim != 0 || n->outputs[0]->type.ndim != 0) return 0;
    return swap_checked(rw, n, tg_rw_const(rw, n->outputs[0]->type.dtype, !strcmp(n->op->name, "ones_like")));
}

/* u = z + c (read by n alone), z = zeros_like(a): a fill of a's shape
 * with c. Returns c and sets *zv to z, or NULL. */
static tg_var *fill_of(const tg_var *u, tg_dtype dt, tg_var **zv) {
    tg_node *p = tg_rw_producer(u, "add");
    if (!p || p->nin != 2 || !tg_rw_single_client(u) || u->type.dtype != dt) return NULL;
    for (int k = 0; k < 2; k++) {
        tg_var *z = p->inputs[k], *c = p->inputs[1 - k];
        if (tg_rw_producer(z, "zeros_like") && c->type.dtype == dt && z->type.dtype == dt) {
            *zv = z;
            return c;
        }
    }
    return NULL;
}

/* For tg_rw_keeps_shape_by: o's axis d and x's axis dx have one length
 * for sure (axis_of: the same source, as the gradient of a sum over a
 * batch of unknown length has the batch's rows); ud, the steps left. */
static bool axis_same_by(const tg_var *o, int d, const tg_var *x, int dx, void *ud) {
    return axis_same(axis_of(o, d, ud), axis_of(x, dx, ud));
}

/* Does an operand of n other than inputs[i] span its result: of n's
 * dtype and rank, its shape the broadcast of all[0..na) for sure? */
static bool other_spans(const tg_node *n, int i, const tg_var *const *all, int na) {
    const tg_var *out = n->outputs[0];
    for (int k = 0; k < n->nin; k++)
        if (k != i && n->inputs[k]->type.dtype == out->type.dtype && n->inputs[k]->type.ndim == out->type.ndim &&
            tg_rw_keeps_shape_by(n->inputs[k], all, na, axis_same_by, &(int){256}))
            return true;
    return false;
}

/* op(.., zeros_like(a) + c, ..) for an arithmetic op: when another
 * operand x spans the result (its shape is the broadcast of everything,
 * the zeros included, for sure: static lengths, or the same source of an
 * unknown one), the fill adds nothing: op(.., c, ..). Otherwise the fill
 * moves past the op, zeros_like(a) + op(.., c, ..), towards a reader
 * that spans it (grad of a sum or mean broadcasts the seed so, and a
 * product with the full-size operand follows). Exact: 0 + v is v. */
static int fill_sink(tg_rw *rw, tg_node *n) {
    tg_dtype dt = n->outputs[0]->type.dtype;
    if (!tg_dtype_is_float(dt) || n->nin > 16) return 0;
    for (int i = 0; i < n->nin; i++) {
        tg_var *a;
        tg_var *c = fill_of(n->inputs[i], dt, &a);
        /* A divisor 0 + c is +0 where c is -0: its sign would flip an
         * infinity. */
        if (!c || (i > 0 && !strcmp(n->op->name, "true_div"))) continue;
        tg_var *ins[16], *all[18];
        int na = 0;
        for (int k = 0; k < n->nin; k++) ins[k] = k == i ? c : n->inputs[k];
        for (int k = 0; k < n->nin; k++) all[na++] = ins[k];
        all[na++] = a;
        bool spanned = other_spans(n, i, (const tg_var *const *)all, na);
        tg_node *p = n->inputs[i]->owner;
        if (tg_rw_match(rw, p)) return TG_ENOMEM;
        tg_var *r = tg_rw_op_json(rw, n->op, n->nin, ins, n->attrs);
        if (!r) return TG_ENOMEM;
        if (!spanned) {
            r = tg_rw_op2(rw, "add", a, r);
        } else if (r->type.ndim != n->outputs[0]->type.ndim) {
            return 0;
        }
        /* Spanned: every operand of n and of the fill (a, c) is 1 or the
         * spanning operand's length on each axis, so neither could fail
         * to broadcast (where the lengths are unknown until run time,
         * the static check alone would keep the fill). */
        const tg_node *shown[2] = {n, p};
        if (r && (spanned ? tg_rw_drops_check_proven(n, r, shown, 2) : tg_rw_drops_check(n, r))) return 0;
        return swap(rw, n, r);
    }
    return 0;
}

/* add(.., zeros_like(a), ..) where another operand x spans the result
 * (its shape is the broadcast of every operand and a): the zeros add
 * nothing, add(.., ..) without them (x alone when one operand is left).
 * The gradient of a mean or sum over an axis is a fill of the input's
 * shape, and once add flattening has merged that fill into the sum of
 * the other gradient terms, the zeros were an array of the input's size
 * written and read back on every call (fill_sink sees the fill only
 * while it is an add of two). Exact but for the sign of a zero: -0 + 0
 * is +0, here -0, as fill_sink does. */
static int add_zeros_like(tg_rw *rw, tg_node *n) {
    tg_dtype dt = n->outputs[0]->type.dtype;
    if (n->nin < 2 || n->nin > 16) return 0;
    for (int i = 0; i < n->nin; i++) {
        tg_node *z = tg_rw_producer(n->inputs[i], "zeros_like");
        if (!z || n->inputs[i]->type.dtype != dt) continue;
        const tg_var *all[17];
        int na = 0;
        for (int k = 0; k < n->nin; k++) all[na++] = n->inputs[k];
        all[na++] = z->inputs[0];
        if (!other_spans(n, i, all, na)) continue;
        tg_var *ins[16];
        int m = 0;
        for (int k = 0; k < n->nin; k++)
            if (k != i) ins[m++] = n->inputs[k];
        tg_var *r = m == 1 ? ins[0] : tg_rw_op(rw, "add", m, ins, NULL);
        /* (n's operands, a's shape among them, are spanned: n could not
         * fail to broadcast) */
        const tg_node *shown[1] = {n};
        if (r && tg_rw_drops_check_proven(n, r, shown, 1)) return 0;
        return swap(rw, n, r);
    }
    return 0;
}

/* ---- stabilize ---- */

/* The operand of add(1, x) / add(x, 1) of floats, or NULL. An integer
 * 1 + x wraps (int8 127 + 1 is -128, whose log is NaN), which log1p,
 * computing in float, would not. */
static tg_var *one_plus(const tg_var *v, tg_node **p) {
    tg_node *a = tg_rw_producer(v, "add");
    if (!a || a->nin != 2 || !is_float(a->outputs[0])) return NULL;
    double c;
    for (int i = 0; i < 2; i++)
        if (scalar_const(a->inputs[i], &c) && c == 1 && a->inputs[i]->type.ndim == 0) {
            tg_var *x = a->inputs[1 - i];
            if (x->type.dtype != a->outputs[0]->type.dtype || x->type.ndim != a->outputs[0]->type.ndim)
                return NULL;
            *p = a;
            return x;
        }
    return NULL;
}

/* log(1 + x) -> log1p(x); log(1 + exp x) -> softplus(x) */
static int log1p_rule(tg_rw *rw, tg_node *n) {
    tg_node *a;
    tg_var *x = one_plus(n->inputs[0], &a);
    if (!x) return 0;
    if (tg_rw_match(rw, a)) return TG_ENOMEM;
    tg_node *e = tg_rw_producer(x, "exp");
    if (e && e->outputs[0]->type.dtype == e->inputs[0]->type.dtype) {
        if (tg_rw_match(rw, e)) return TG_ENOMEM;
        return swap(rw, n, tg_rw_op1(rw, "softplus", e->inputs[0], NULL));
    }
    return swap(rw, n, tg_rw_op1(rw, "log1p", x, NULL));
}

/* log1p(exp x) -> softplus(x) */
static int log1p_exp(tg_rw *rw, tg_node *n) {
    tg_node *e = tg_rw_producer(n->inputs[0], "exp");
    if (!e || e->outputs[0]->type.dtype != e->inputs[0]->type.dtype) return 0;
    if (tg_rw_match(rw, e)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op1(rw, "softplus", e->inputs[0], NULL));
}

/* exp(x) - 1 -> expm1(x) */
static int expm1_rule(tg_rw *rw, tg_node *n) {
    double c;
    tg_node *e = tg_rw_producer(n->inputs[0], "exp");
    if (!e || n->inputs[1]->type.ndim != 0 || !scalar_const(n->inputs[1], &c) || c != 1) return 0;
    if (!stands_for(e->outputs[0], n) || e->inputs[0]->type.dtype != e->outputs[0]->type.dtype) return 0;
    if (tg_rw_match(rw, e)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op1(rw, "expm1", e->inputs[0], NULL));
}

/* log(sigmoid x) -> -softplus(-x); log(1 - sigmoid x) -> -softplus(x) */
static int log_sigmoid(tg_rw *rw, tg_node *n) {
    tg_var *v = n->inputs[0];
    tg_node *s = tg_rw_producer(v, "sigmoid");
    if (s) {
        if (s->inputs[0]->type.dtype != s->outputs[0]->type.dtype) return 0;
        if (tg_rw_match(rw, s)) return TG_ENOMEM;
        return swap(rw, n, tg_rw_op1(rw, "neg", tg_rw_op1(rw, "softplus", negated(rw, s->inputs[0]), NULL), NULL));
    }
    tg_node *d = tg_rw_producer(v, "sub");
    double c;
    if (!d || d->inputs[0]->type.ndim != 0 || !scalar_const(d->inputs[0], &c) || c != 1) return 0;
    s = tg_rw_producer(d->inputs[1], "sigmoid");
    if (!s || s->inputs[0]->type.dtype != s->outputs[0]->type.dtype || !stands_for(s->outputs[0], d))
        return 0;
    if (tg_rw_match(rw, d) || tg_rw_match(rw, s)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op1(rw, "neg", tg_rw_op1(rw, "softplus", s->inputs[0], NULL), NULL));
}

/* 1 - sigmoid(x) -> sigmoid(-x) (Theano's local_1msigmoid): as written
 * the difference cancels to 0 once sigmoid(x) rounds to 1 (x > 37 in
 * float64), where sigmoid(-x) keeps its digits; the derivative of a
 * sigmoid, s * (1 - s), gains them too. */
static int sigmoid_1m(tg_rw *rw, tg_node *n) {
    double c;
    tg_node *s = tg_rw_producer(n->inputs[1], "sigmoid");
    if (!s || !scalar_const(n->inputs[0], &c) || c != 1 || !stands_for(s->outputs[0], n) ||
        s->inputs[0]->type.dtype != s->outputs[0]->type.dtype)
        return 0;
    if (match_if_dies(rw, s)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op1(rw, "sigmoid", negated(rw, s->inputs[0]), NULL));
}

/* log(softmax(x)) -> log_softmax(x) */
static int log_softmax_rule(tg_rw *rw, tg_node *n) {
    tg_node *s = tg_rw_producer(n->inputs[0], "softmax");
    if (!s) return 0;
    if (tg_rw_match(rw, s)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op1(rw, "log_softmax", s->inputs[0], attrs_str(s)));
}

/* log(sum(exp x)) -> logsumexp(x), computed max-shifted */
static int logsumexp_rule(tg_rw *rw, tg_node *n) {
    tg_node *s = tg_rw_producer(n->inputs[0], "sum");
    if (!s) return 0;
    tg_node *e = tg_rw_producer(s->inputs[0], "exp");
    if (!e || !is_float(e->inputs[0]) || e->inputs[0]->type.dtype != s->outputs[0]->type.dtype) return 0;
    if (tg_rw_match(rw, s) || tg_rw_match(rw, e)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op1(rw, "logsumexp", e->inputs[0], attrs_str(s)));
}

/* t = [neg] (u / y') or [neg] mul(.., [neg] (u / y'), ..) with y' the
 * same value as y: t * y with that quotient cancelled (NULL: t is not
 * such a term; *fail on no memory). */
static tg_var *term_times(tg_rw *rw, tg_var *t, const tg_var *y, bool *fail) {
    tg_node *p = tg_rw_producer(t, "neg");
    bool neg = p != NULL;
    if (p) t = p->inputs[0];
    tg_node *m = tg_rw_producer(t, "mul");
    int nf = m ? m->nin : 1;
    if (nf > MAX_OPERANDS) return NULL;
    for (int k = 0; k < nf; k++) {
        tg_node *fn, *q = quotient(m ? m->inputs[k] : t, &fn);
        bool fneg = fn != NULL;
        if (!q || !same_value(q->inputs[1], y, 3)) continue;
        tg_var *in[MAX_OPERANDS];
        for (int j = 0; j < nf; j++) in[j] = m ? m->inputs[j] : t;
        /* an integer u in the quotient's float dtype, as u / y' computed
         * it: neg(u) and a product or sum of integers would wrap */
        in[k] = is_float(q->inputs[0]) ? q->inputs[0] : as_dtype(rw, q->inputs[0], q->outputs[0]->type.dtype);
        tg_var *r = nf == 1 ? in[0] : tg_rw_op(rw, "mul", nf, in, NULL);
        if (r && neg != fneg) r = tg_rw_op1(rw, "neg", r, NULL);
        if (!r) *fail = true;
        return r;
    }
    return NULL;
}

/* (.. + u/y + ..) * y -> (.. + u + ..) with the other terms times y: the
 * product distributed over a sum one of whose terms (perhaps inside a
 * product, perhaps negated) divides by y. This is how the chain rule
 * writes the gradient of a written-out logistic cost,
 * -y log p - (1 - y) log(1 - p) with p a sigmoid: (-(a / (1 - p)) + b / p)
 * * p * (1 - p), NaN as written once p rounds to 0 or 1 (|x| > 745), which
 * becomes -a p + b (1 - p): p - y, finite. */
static int mul_sum_quotient(tg_rw *rw, tg_node *n) {
    if (n->nin < 2 || n->nin > MAX_OPERANDS || !is_float(n->outputs[0])) return 0;
    for (int i = 0; i < n->nin; i++) {
        tg_var *av = n->inputs[i];
        tg_node *an = tg_rw_producer(av, "neg");
        tg_node *a = tg_rw_producer(an ? an->inputs[0] : av, "add");
        if (!a || a->nin > MAX_OPERANDS) continue;
        for (int j = 0; j < n->nin; j++) {
            if (j == i) continue;
            tg_var *y = n->inputs[j], *terms[MAX_OPERANDS];
            int hits = 0;
            bool fail = false;
            for (int k = 0; k < a->nin; k++) {
                tg_var *c = term_times(rw, a->inputs[k], y, &fail);
                if (fail) return TG_ENOMEM;
                if (c) hits++;
                /* an integer term times y in the sum's float dtype, as
                 * (.. + t + ..) * y computed it (int8 t * y wraps) */
                tg_var *t = a->inputs[k];
                if (!c && !is_float(t)) t = as_dtype(rw, t, a->outputs[0]->type.dtype);
                terms[k] = c ? c : tg_rw_op2(rw, "mul", t, y);
                if (!terms[k]) return TG_ENOMEM;
            }
            if (!hits || const_breaks_cancel(y)) continue;
            tg_var *sum = tg_rw_op(rw, "add", a->nin, terms, NULL);
            if (sum && an) sum = tg_rw_op1(rw, "neg", sum, NULL);
            if (!sum) return TG_ENOMEM;
            tg_var *in[MAX_OPERANDS];
            int k = 0;
            for (int m = 0; m < n->nin; m++)
                if (m == i)
                    in[k++] = sum;
                else if (m != j)
                    in[k++] = n->inputs[m];
            tg_var *r = k == 1 ? in[0] : tg_rw_op(rw, "mul", k, in, NULL);
            if (!r) return TG_ENOMEM;
            if (!stands_for(r, n)) return 0;
            return swap(rw, n, r);
        }
    }
    return 0;
}

/* binary_crossentropy(sigmoid(x), t) = -(t log s + (1 - t) log(1 - s))
 * -> t softplus(-x) + (1 - t) softplus(x) (TensorFlow's
 * sigmoid_cross_entropy_with_logits, PyTorch's BCEWithLogits): as
 * written, log(1 - s) is -inf once s rounds to 1 (x > 37 in float64, 17
 * in float32), inf for t = 0 and 0 * -inf = NaN for t = 1. */
static int sigmoid_binary_xent(tg_rw *rw, tg_node *n) {
    tg_node *s = tg_rw_producer(n->inputs[0], "sigmoid");
    tg_var *t = n->inputs[1];
    tg_dtype dt = n->outputs[0]->type.dtype;
    if (!s || !tg_dtype_is_float(dt) || s->inputs[0]->type.dtype != dt || t->type.dtype != dt) return 0;
    tg_var *x = s->inputs[0];
    if (match_if_dies(rw, s)) return TG_ENOMEM;
    tg_var *one = tg_rw_const(rw, dt, 1);
    tg_var *r = tg_rw_op2(rw, "add", tg_rw_op2(rw, "mul", t, tg_rw_op1(rw, "softplus", negated(rw, x), NULL)),
                          tg_rw_op2(rw, "mul", tg_rw_op2(rw, "sub", one, t), tg_rw_op1(rw, "softplus", x, NULL)));
    if (!r) return TG_ENOMEM;
    return stands_for(r, n) ? swap(rw, n, r) : 0;
}

/* The sum of `e` over one axis of an nd-dimensional e, with that axis
 * kept: sum(e, axis=a, keepdims=true), or sum(e, axis=a) with the axis
 * put back by dimshuffle or expand_dims (Theano's
 * e.sum(axis=1).dimshuffle(0, 'x')), or the sum of a vector. The sum
 * node, and the axis in *ax. */
static tg_node *sum_keeping_axis(const tg_var *v, const tg_var *e, int *ax) {
    int nd = e->type.ndim;
    tg_node *s = tg_rw_producer(v, "sum"), *d = NULL;
    if (!s) {
        d = tg_rw_producer(v, "dimshuffle");
        if (!d) d = tg_rw_producer(v, "expand_dims");
        if (!d || !(s = tg_rw_producer(d->inputs[0], "sum")) || s->a.keepdims) return NULL;
    } else if (!s->a.keepdims && nd != 1) {
        return NULL; /* (the sum of a vector is a scalar: it broadcasts back) */
    }
    if (nd < 1 || s->inputs[0] != e || s->outputs[0]->type.dtype != e->type.dtype) return NULL;
    /* (a null axis is every axis: one only for a vector) */
    uint32_t mask = s->a.axis_null ? (nd == 1 ? 1u : 0u) : s->a.axis_mask;
    if (__builtin_popcount(mask) != 1) return NULL;
    *ax = __builtin_ctz(mask);
    if (d && !strcmp(d->op->name, "dimshuffle")) {
        /* 0 .. ax-1, "x", ax .. nd-2 */
        if (d->a.norder != nd) return NULL;
        for (int k = 0; k < nd; k++)
            if (d->a.order[k] != (k < *ax ? k : k == *ax ? -1 : k - 1)) return NULL;
    } else if (d) {
        int a = d->a.axes[0] < 0 ? d->a.axes[0] + nd : d->a.axes[0];
        if (d->a.naxes != 1 || a != *ax) return NULL;
    }
    return s;
}

/* The sum of e over several axes, or every axis (a null axis), with the
 * axes kept, or over every axis to a scalar (which broadcasts back): the
 * sum node, or NULL. */
static tg_node *sum_kept(const tg_var *v, const tg_var *e) {
    tg_node *s = tg_rw_producer(v, "sum");
    if (!s || (!s->a.keepdims && s->outputs[0]->type.ndim != 0) || s->inputs[0] != e ||
        s->outputs[0]->type.dtype != e->type.dtype)
        return NULL;
    return s;
}

/* The sum of e over several axes without keepdims, its axes put back in
 * their places by a dimshuffle (Theano's e.sum(axis=(0, 2)).dimshuffle('x',
 * 0, 'x')) or an expand_dims: the sum node, or NULL. (One axis is
 * sum_keeping_axis's.) */
static tg_node *sum_put_back(const tg_var *v, const tg_var *e) {
    int nd = e->type.ndim;
    tg_node *d = tg_rw_producer(v, "dimshuffle");
    if (!d) d = tg_rw_producer(v, "expand_dims");
    tg_node *s = d ? tg_rw_producer(d->inputs[0], "sum") : NULL;
    if (!s || s->a.keepdims || s->inputs[0] != e || s->outputs[0]->type.dtype != e->type.dtype || nd < 2 ||
        v->type.ndim != nd)
        return NULL;
    uint32_t mask = s->a.axis_mask;
    if (!mask || mask >> nd) return NULL;
    if (!strcmp(d->op->name, "expand_dims")) return d->a.axis_mask == mask ? s : NULL;
    if (d->a.norder != nd) return NULL;
    for (int k = 0, kept = 0; k < nd; k++)
        if (d->a.order[k] != (mask >> k & 1u ? -1 : kept++)) return NULL;
    return s;
}

/* "{"axis": [..], "keepdims": true}" for the axes of mask. */
static void kept_axes_attrs(uint32_t mask, char *buf, size_t cap) {
    int len = snprintf(buf, cap, "{\"axis\": [");
    for (int d = 0, first = 1; d < 32 && len > 0 && (size_t)len < cap; d++)
        if (mask >> d & 1u) {
            len += snprintf(buf + len, cap - (size_t)len, "%s%d", first ? "" : ", ", d);
            first = 0;
        }
    if (len > 0 && (size_t)len < cap) snprintf(buf + len, cap - (size_t)len, "], \"keepdims\": true}");
}

/* exp(z) / s with s = sum(exp(z)) over the axes of s (sum_kept,
 * sum_put_back): the softmax over those axes, exp(z - logsumexp(z, axes,
 * keepdims)). */
static tg_var *softmax_over(tg_rw *rw, tg_var *z, const tg_node *s) {
    char attrs[160];
    kept_axes_attrs(s->a.axis_mask, attrs, sizeof attrs);
    return tg_rw_op1(rw, "exp", tg_rw_op2(rw, "sub", z, tg_rw_op1(rw, "logsumexp", z, attrs)), NULL);
}

/* exp(x) / sum(exp(x), axis=a, keepdims) -> softmax(x, axis=a), computed
 * max-shifted (Theano's softmax_simplifier): as written, a logit above
 * 709 (88 in float32) overflowed exp and gave inf / inf = NaN. A log of
 * it then becomes log_softmax. */
static int softmax_simplify(tg_rw *rw, tg_node *n) {
    tg_node *e = tg_rw_producer(n->inputs[0], "exp");
    if (!e || !is_float(e->inputs[0]) || e->inputs[0]->type.ndim < 1) return 0;
    tg_var *ev = e->outputs[0];
    int ax;
    tg_node *s = sum_keeping_axis(n->inputs[1], ev, &ax), *sk = NULL;
    if (!s && !(s = sk = sum_kept(n->inputs[1], ev)) && !(s = sk = sum_put_back(n->inputs[1], ev))) return 0;
    /* What dies with the division counts as replaced (the record). */
    tg_node *d = n->inputs[1]->owner != s ? n->inputs[1]->owner : NULL;
    bool d_dies = !d || tg_rw_single_client(d->outputs[0]);
    bool s_dies = d_dies && tg_rw_single_client(s->outputs[0]);
    bool e_dies = s_dies && ev->nclients == 2;
    if ((d && d_dies && tg_rw_match(rw, d)) || (s_dies && tg_rw_match(rw, s)) ||
        (e_dies && tg_rw_match(rw, e)))
        return TG_ENOMEM;
    if (sk) /* over several axes */
        return swap(rw, n, softmax_over(rw, e->inputs[0], sk));
    char attrs[32];
    snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ax);
    return swap(rw, n, tg_rw_op1(rw, "softmax", e->inputs[0], attrs));
}

static int softmax_xent_index(tg_rw *rw, tg_node *n, tg_node *s);

/* log(exp(a) + exp(b)) -> max(a, b) + softplus(-|a - b|) (Theano's
 * local_log_add; numpy.logaddexp): as written exp overflowed above 709
 * (inf) or underflowed below -745 (log 0 = -inf). Where a == b, a + log 2,
 * which also keeps two infinities of one sign (inf - inf is NaN). */
static int logaddexp_rule(tg_rw *rw, tg_node *n) {
    tg_node *s = tg_rw_producer(n->inputs[0], "add");
    if (!s || s->nin != 2) return 0;
    tg_node *ea = tg_rw_producer(s->inputs[0], "exp"), *eb = tg_rw_producer(s->inputs[1], "exp");
    if (!ea || !eb) return 0;
    tg_var *a = ea->inputs[0], *b = eb->inputs[0];
    tg_dtype dt = n->outputs[0]->type.dtype;
    if (!is_float(a) || a->type.dtype != dt || b->type.dtype != dt) return 0;
    if (tg_rw_single_client(s->outputs[0]) &&
        (tg_rw_match(rw, s) || match_if_dies(rw, ea) || match_if_dies(rw, eb)))
        return TG_ENOMEM;
    tg_var *d = tg_rw_op1(rw, "abs", tg_rw_op2(rw, "sub", a, b), NULL);
    tg_var *far = tg_rw_op2(rw, "add", tg_rw_op2(rw, "maximum", a, b),
                            tg_rw_op1(rw, "softplus", tg_rw_op1(rw, "neg", d, NULL), NULL));
    tg_var *pick[3] = {tg_rw_op2(rw, "eq", a, b), tg_rw_op2(rw, "add", a, tg_rw_const(rw, dt, log(2.0))),
                       far};
    return swap(rw, n, tg_rw_op(rw, "switch", 3, pick, NULL));
}

/* categorical_crossentropy(softmax(x), t) with one-hot t ->
 * -sum(t * log_softmax(x), axis=-1): no log of a probability that
 * underflowed to 0. Class indices: softmax_xent_index. */
static int softmax_xent(tg_rw *rw, tg_node *n) {
    tg_node *s = tg_rw_producer(n->inputs[0], "softmax");
    tg_var *t = n->inputs[1];
    if (!s) return 0;
    int nd = s->outputs[0]->type.ndim;
    int ax = s->a.axes[0] < 0 ? s->a.axes[0] + nd : s->a.axes[0];
    if (s->a.axis_null || ax != nd - 1) return 0;
    if (n->a.mode == 1) return softmax_xent_index(rw, n, s);
    if (t->type.ndim != nd || !is_float(t)) return 0;
    if (tg_rw_match(rw, s)) return TG_ENOMEM;
    tg_var *ls = tg_rw_op1(rw, "log_softmax", s->inputs[0], attrs_str(s));
    tg_var *prod = tg_rw_op2(rw, "mul", t, ls);
    tg_var *sum = tg_rw_op1(rw, "sum", prod, "{\"axis\": -1}");
    return swap(rw, n, tg_rw_op1(rw, "neg", sum, NULL));
}

/* The same with integer class indices t (one per row of x) ->
 * -log_softmax(x)[t] (Theano's crossentropy_softmax_argmax_1hot; PyTorch's
 * cross_entropy, nll_loss of log_softmax): no log of a probability that
 * underflowed to 0. log_softmax subtracts the row's max m before the pick,
 * log(sum(exp(x - m))) - (x[t] - m); logsumexp(x) - x[t] cancelled two
 * numbers of the logits' size (0 for x = [1e308, 1e308], not log 2; about
 * 1e-6 lost at logits of 1e10). The picked value is
 * sum(switch(t[..., None] == arange(k), log_softmax(x), 0)) over the class
 * axis, so that a -inf logit (a masked class) is never multiplied by 0.
 * A row holding +inf, NaN or only -inf is NaN in log_softmax, as the
 * softmax as written is. An index outside [0, k) is still a run-time
 * error, through an assert. */
static int softmax_xent_index(tg_rw *rw, tg_node *n, tg_node *s) {
    tg_var *x = s->inputs[0], *t = n->inputs[1];
    int nd = x->type.ndim;
    char tk = tg_dtype_kind(t->type.dtype);
    if (!is_float(x) || x->type.dtype != n->outputs[0]->type.dtype || t->type.ndim != nd - 1 ||
        (tk != 'i' && tk != 'u'))
        return 0;
    if (tg_rw_match(rw, s)) return TG_ENOMEM;
    char order[16 * TG_MAX_NDIM + 32], axis[32];
    int len = snprintf(order, sizeof order, "{\"order\": [");
    for (int d = 0; d < nd - 1; d++) len += snprintf(order + len, sizeof order - (size_t)len, "%d, ", d);
    snprintf(order + len, sizeof order - (size_t)len, "\"x\"]}");
    snprintf(axis, sizeof axis, "{\"i\": %d}", nd - 1);
    tg_var *k = tg_rw_op(rw, "shape_i", 1, &x, axis);
    tg_var *range[3] = {tg_rw_const(rw, TG_INT64, 0), k, tg_rw_const(rw, TG_INT64, 1)};
    tg_var *hit = tg_rw_op2(rw, "eq", tg_rw_op1(rw, "dimshuffle", t, order),
                            tg_rw_op(rw, "arange", 3, range, NULL));
    tg_var *pick[3] = {hit, tg_rw_op1(rw, "log_softmax", x, attrs_str(s)), tg_rw_const(rw, x->type.dtype, 0)};
    tg_var *picked = tg_rw_op1(rw, "sum", tg_rw_op(rw, "switch", 3, pick, NULL), "{\"axis\": -1}");
    tg_var *check[3] = {
        tg_rw_op1(rw, "neg", picked, NULL),
        tg_rw_op2(rw, "ge", t, tg_rw_const(rw, t->type.dtype, 0)),
        tg_rw_op2(rw, "lt", t, k),
    };
    return swap(rw, n,
                tg_rw_op(rw, "assert", 3, check,
                         "{\"message\": \"categorical_crossentropy: a class index is out of range "
                         "(each must be at least 0 and less than the number of classes)\"}"));
}

/* The gradient of categorical_crossentropy(softmax(x), t) as the chain
 * rule writes it, mul(sub(G, sum(mul(G, p))), p) with p = softmax(x) and
 * G = neg(true_div(mul(ge, t), p)), is ge * (p * sum(t) - t): for one-hot
 * rows, p - t (Theano's crossentropy_softmax_1hot_with_bias_dx). No
 * division by a probability that underflowed to 0 (which gave 0/0). */
static tg_node *producer_either(tg_var *v, const char *op, tg_var *with, tg_var **other) {
    tg_node *m = tg_rw_producer(v, op);
    if (!m || m->nin != 2) return NULL;
    if (m->inputs[0] == with) {
        *other = m->inputs[1];
        return m;
    }
    if (m->inputs[1] == with) {
        *other = m->inputs[0];
        return m;
    }
    return NULL;
}

/* The chain rule's gradient through p = softmax(x) of an upstream
 * gradient G = u / p (or -(u / p)): mul(sub(G, sum(G * p, axis,
 * keepdims)), p), among the operands of n, a product. The sum's operand
 * may already read u (or -u): mul_quotient_cancel turns G * p into it.
 * Fills *g with the parts; false when n is not that. */
typedef struct softmax_grad {
    int at_sub, at_p; /* operands of n */
    tg_node *sub, *su, *gp, *ng, *dv, *sm;
    tg_var *p, *u;
    bool neg;
    int ax;
} softmax_grad;

static bool softmax_grad_parts(tg_node *n, softmax_grad *g) {
    memset(g, 0, sizeof *g);
    for (int i = 0; i < n->nin; i++) {
        tg_node *sub = tg_rw_producer(n->inputs[i], "sub");
        if (!sub) continue;
        tg_var *G = sub->inputs[0];
        tg_node *su = tg_rw_producer(sub->inputs[1], "sum");
        tg_node *ng, *dv = quotient(G, &ng);
        if (!su || !dv || !su->a.keepdims || su->a.axis_null || su->a.naxes != 1) continue;
        tg_var *pv = dv->inputs[1], *u = dv->inputs[0];
        tg_node *sm = tg_rw_producer(pv, "softmax");
        if (!sm || sm->a.axis_null) continue;
        int at_p = -1;
        for (int j = 0; j < n->nin && at_p < 0; j++)
            if (j != i && n->inputs[j] == pv) at_p = j;
        if (at_p < 0) continue;
        /* the sum's operand: G * p, or what that became */
        tg_var *other, *x = su->inputs[0];
        tg_node *gp = producer_either(x, "mul", pv, &other);
        tg_node *nu = tg_rw_producer(x, "neg");
        if (gp ? other != G : ng ? !nu || nu->inputs[0] != u : x != u) continue;
        /* over the softmax's axis */
        int nd = pv->type.ndim;
        int ax = sm->a.axes[0] < 0 ? sm->a.axes[0] + nd : sm->a.axes[0];
        if ((su->a.axes[0] < 0 ? su->a.axes[0] + nd : su->a.axes[0]) != ax) continue;
        if (u->type.dtype != pv->type.dtype || G->type.ndim != nd) continue;
        *g = (softmax_grad){i, at_p, sub, su, gp, ng, dv, sm, pv, u, ng != NULL, ax};
        return true;
    }
    return false;
}

/* n with operands at_sub and at_p replaced by r. */
static int softmax_grad_swap(tg_rw *rw, tg_node *n, const softmax_grad *g, tg_var *r) {
    if (!r) return TG_ENOMEM;
    tg_node *parts[] = {g->sub, g->su, g->gp, g->ng, g->dv};
    for (int i = 0; i < 5; i++)
        if (parts[i] && tg_rw_single_client(parts[i]->outputs[0]) && tg_rw_match(rw, parts[i])) return TG_ENOMEM;
    if (n->nin == 2) return swap(rw, n, r);
    tg_var *in[MAX_OPERANDS];
    int k = 0;
    if (n->nin > MAX_OPERANDS) return 0;
    for (int i = 0; i < n->nin; i++)
        if (i == g->at_sub)
            in[k++] = r;
        else if (i != g->at_p)
            in[k++] = n->inputs[i];
    return swap(rw, n, tg_rw_op(rw, "mul", k, in, NULL));
}

/* The gradient of categorical_crossentropy(softmax(x), t) as the chain
 * rule writes it: G = -(ge * t) / p, ge the upstream gradient with a
 * length-1 class axis, is ge * (p * sum(t) - t): for one-hot rows, p - t
 * (Theano's crossentropy_softmax_1hot_with_bias_dx). No division by a
 * probability that underflowed to 0 (which gave 0/0). */
static int softmax_xent_grad(tg_rw *rw, tg_node *n) {
    softmax_grad g;
    if (!softmax_grad_parts(n, &g) || !g.neg) return 0;
    tg_node *mt = tg_rw_producer(g.u, "mul");
    if (!mt || mt->nin != 2) return 0;
    /* ge is the operand with a length-1 last axis (the dimshuffled
     * upstream gradient); t has p's shape. */
    int nd = g.p->type.ndim;
    tg_var *ge = NULL, *t = NULL;
    for (int k = 0; k < 2 && !ge; k++)
        if (mt->inputs[k]->type.ndim == nd && mt->inputs[k]->type.shape[nd - 1] == 1 &&
            mt->inputs[1 - k]->type.ndim == nd) {
            ge = mt->inputs[k];
            t = mt->inputs[1 - k];
        }
    if (!ge || t->type.dtype != g.p->type.dtype || g.ax != nd - 1) return 0;
    if (tg_rw_single_client(g.u) && tg_rw_match(rw, mt)) return TG_ENOMEM;
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"keepdims\": true}", g.ax);
    tg_var *st = tg_rw_op1(rw, "sum", t, attrs);
    tg_var *d = tg_rw_op2(rw, "sub", tg_rw_op2(rw, "mul", g.p, st), t);
    return softmax_grad_swap(rw, n, &g, tg_rw_op2(rw, "mul", ge, d));
}

/* Any other upstream gradient G = u / p: (G - sum(G * p)) * p is
 * u - p * sum(u) (Theano's local_logsoftmax_grad, for the derivative of
 * log(softmax(x)): u the gradient of the log). As written it divided by
 * a probability that underflowed to 0: NaN for every element of the row
 * once the logits spread by more than 745. */
static int softmax_grad_quotient(tg_rw *rw, tg_node *n) {
    softmax_grad g;
    if (!softmax_grad_parts(n, &g)) return 0;
    tg_var *u = g.u;
    /* u spread to p's shape (where it broadcast against p in G) */
    const tg_var *both[2] = {u, g.p};
    if (u->type.ndim != g.p->type.ndim || !tg_rw_keeps_shape(u, both, 2))
        u = tg_rw_op2(rw, "add", u, tg_rw_op1(rw, "zeros_like", g.p, NULL));
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"keepdims\": true}", g.ax);
    tg_var *ps = tg_rw_op2(rw, "mul", g.p, tg_rw_op1(rw, "sum", u, attrs));
    return softmax_grad_swap(rw, n, &g, g.neg ? tg_rw_op2(rw, "sub", ps, u) : tg_rw_op2(rw, "sub", u, ps));
}

/* d = 1 + exp(z) (in either order, the 1 a scalar constant): the exp
 * node. */
static tg_node *one_plus_exp(const tg_var *d) {
    tg_node *a = tg_rw_producer(d, "add");
    double c;
    if (!a || a->nin != 2) return NULL;
    for (int k = 0; k < 2; k++) {
        tg_node *e = tg_rw_producer(a->inputs[1 - k], "exp");
        if (e && scalar_const(a->inputs[k], &c) && c == 1 && is_float(e->outputs[0])) return e;
    }
    return NULL;
}

/* -z, without a double negation: x when z is neg(x) of floats (an
 * integer neg(x) wraps as written: uint8 -1 is 255, int8 -(-128) is
 * -128). */
static tg_var *negated(tg_rw *rw, tg_var *z) {
    tg_node *m = tg_rw_producer(z, "neg");
    return m && is_float(z) ? m->inputs[0] : tg_rw_op1(rw, "neg", z, NULL);
}

/* A written-out sigmoid (Theano's local_exp_over_1_plus_exp and
 * local_1_over_1_plus_exp): 1 / (1 + exp(z)) -> sigmoid(-z) (so
 * 1 / (1 + exp(-x)) -> sigmoid(x)), reciprocal(1 + exp(z)) the same, and
 * exp(z) / (1 + exp(z)) -> sigmoid(z). Then log of it becomes a softplus;
 * exp(z) / (1 + exp(z)) as written is inf / inf = NaN for z > 709. An
 * integer or bool z is negated in exp's float dtype, cast first, as exp
 * converts it (uint8 -z wraps: z = 1 gave sigmoid(255)). */
static int sigmoid_simplify(tg_rw *rw, tg_node *n) {
    bool recip = !strcmp(n->op->name, "reciprocal");
    tg_var *d = n->inputs[recip ? 0 : 1];
    tg_node *e = one_plus_exp(d);
    if (!e) return 0;
    tg_var *z = e->inputs[0];
    double c = 0;
    bool one = recip || (scalar_const(n->inputs[0], &c) && c == 1);
    if (!one && n->inputs[0] != e->outputs[0]) return 0;
    /* what dies with the division counts as replaced (the record) */
    if (tg_rw_single_client(d) &&
        (tg_rw_match(rw, d->owner) ||
         (e->outputs[0]->nclients == 1 + (n->inputs[0] == e->outputs[0]) && tg_rw_match(rw, e))))
        return TG_ENOMEM;
    z = as_dtype(rw, z, e->outputs[0]->type.dtype);
    return swap(rw, n, tg_rw_op1(rw, "sigmoid", one && z ? negated(rw, z) : z, NULL));
}

/* d = exp(a) + exp(b) with e one of the two (the same node): the other
 * exp node, of the same type as e. */
static tg_node *other_exp(const tg_var *d, const tg_node *e) {
    tg_node *a = tg_rw_producer(d, "add");
    if (!a || a->nin != 2) return NULL;
    for (int k = 0; k < 2; k++) {
        tg_node *o = tg_rw_producer(a->inputs[1 - k], "exp");
        if (a->inputs[k] == e->outputs[0] && o && tg_type_equal(&o->outputs[0]->type, &e->outputs[0]->type) &&
            tg_type_equal(&a->outputs[0]->type, &e->outputs[0]->type))
            return o;
    }
    return NULL;
}

/* p is a dimshuffle (or transpose) with this order. */
static bool same_order(const tg_node *p, const int *order, int norder) {
    int o[64], no = 0;
    if (p->a.norder > 64 || !order_of(p, o, &no) || no != norder) return false;
    return !memcmp(o, order, sizeof(int) * (size_t)norder);
}

/* In a product, exp(z) times B / D, where D is 1 + exp(z) (the same
 * exp: sigmoid), exp(z) + exp(w) (sigmoid(z - w)) or a sum of exp(z) over
 * one axis with the axis kept (softmax; over several axes, the
 * softmax_over form) -> the sigmoid or softmax of z times B, the neg of
 * the quotient kept (Theano's local_sigm_times_exp). This is how the
 * chain rule writes the derivatives of a written-out sigmoid, of a
 * written-out log(exp(a) + exp(b)) and of a written-out log(sum(exp(x))):
 * as written inf / inf = NaN once the exp overflows (in them or in the
 * forward pass). An integer or bool z (and w) is cast to exp's float dtype
 * first, and an integer B to the quotient's, before a - b or neg(B): in
 * the integer dtype they wrap (uint8 0 - 1 is 255), and of bools they
 * cannot be built. */
/* A sum whose every term is a quotient by one divisor, each perhaps
 * negated: the chain rule's derivative of a written-out sigmoid e / (1 + e)
 * by e is g / (1 + e) - (g * s) / (1 + e). Its first quotient, the terms'
 * numerators (float, of the quotient's dtype) in nums and their signs in
 * neg; NULL when it is not that form. */
static tg_node *quotient_terms(const tg_node *a, tg_var **nums, bool *neg) {
    tg_node *q0 = NULL;
    if (a->nin > MAX_OPERANDS) return NULL;
    for (int k = 0; k < a->nin; k++) {
        tg_var *t = a->inputs[k];
        tg_node *p;
        neg[k] = false;
        while ((p = tg_rw_producer(t, "neg"))) {
            neg[k] = !neg[k];
            t = p->inputs[0];
        }
        tg_node *q = tg_rw_producer(t, "true_div");
        if (!q || (q0 && q->inputs[1] != q0->inputs[1]) || !is_float(q->inputs[0]) ||
            q->inputs[0]->type.dtype != q->outputs[0]->type.dtype ||
            q->outputs[0]->type.dtype != a->outputs[0]->type.dtype)
            return NULL;
        if (!q0) q0 = q;
        nums[k] = q->inputs[0];
    }
    return q0;
}

static int exp_ratio_times_exp(tg_rw *rw, tg_node *n, bool softmax) {
    if (n->nin > MAX_OPERANDS) return 0;
    for (int i = 0; i < n->nin; i++) {
        /* exp(z), or a dimshuffle of it when the quotient has the same
         * one (dimshuffle_lift moved a broadcast of their product onto
         * both: the gradient of a reduction that read it) */
        tg_node *ds = tg_rw_producer(n->inputs[i], "dimshuffle");
        int order[64], norder = 0;
        if (ds && (ds->a.norder > 64 || !order_of(ds, order, &norder))) continue;
        tg_node *e = tg_rw_producer(ds ? ds->inputs[0] : n->inputs[i], "exp");
        if (!e || !is_float(e->outputs[0])) continue;
        for (int j = 0; j < n->nin; j++) {
            if (j == i) continue;
            /* the quotient, under a neg and a broadcast of a scalar (the
             * gradient of a sum over a vector), and e's dimshuffle */
            tg_var *f = n->inputs[j];
            bool neg = false, scalar = false, same = !ds;
            for (int w = 0; w < 3; w++) {
                tg_node *p = tg_rw_producer(f, "neg");
                if (p) {
                    neg = !neg;
                    f = p->inputs[0];
                } else if ((p = tg_rw_producer(f, "dimshuffle")) && p->inputs[0]->type.ndim == 0) {
                    scalar = true;
                    f = p->inputs[0];
                } else if (p && !same && same_order(p, order, norder)) {
                    same = true;
                    f = p->inputs[0];
                }
            }
            tg_node *q = tg_rw_producer(f, "true_div"), *terms = NULL;
            tg_var *nums[MAX_OPERANDS];
            bool negs[MAX_OPERANDS];
            if (!q && !softmax && (terms = tg_rw_producer(f, "add")) && !(q = quotient_terms(terms, nums, negs)))
                terms = NULL;
            int ax = 0;
            tg_node *e2 = NULL, *sk = NULL;
            if (!q || !same || (scalar && (terms ? terms->outputs[0] : q->inputs[0])->type.ndim != 0) ||
                (softmax ? !sum_keeping_axis(q->inputs[1], e->outputs[0], &ax) &&
                               !(sk = sum_kept(q->inputs[1], e->outputs[0]))
                         : one_plus_exp(q->inputs[1]) != e && !(e2 = other_exp(q->inputs[1], e))))
                continue;
            char attrs[32];
            snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ax);
            tg_var *in[MAX_OPERANDS];
            for (int k = 0; k < n->nin; k++) in[k] = n->inputs[k];
            tg_dtype et = e->outputs[0]->type.dtype;
            tg_var *z = as_dtype(rw, e->inputs[0], et), *b = q->inputs[0];
            if (terms) { /* e * (u/D - v/D) = (e/D) * (u - v) */
                for (int k = 0; k < terms->nin; k++)
                    if (negs[k] && !(nums[k] = tg_rw_op1(rw, "neg", nums[k], NULL))) return TG_ENOMEM;
                b = tg_rw_op(rw, "add", terms->nin, nums, NULL);
            } else if (neg && !is_float(b))
                b = as_dtype(rw, b, q->outputs[0]->type.dtype);
            if (!z || !b) return TG_ENOMEM;
            if (e2) /* exp(a) / (exp(a) + exp(b)) = sigmoid(a - b) */
                in[i] = tg_rw_op1(rw, "sigmoid", tg_rw_op2(rw, "sub", z, as_dtype(rw, e2->inputs[0], et)), NULL);
            else if (sk)
                in[i] = softmax_over(rw, z, sk);
            else
                in[i] = tg_rw_op1(rw, softmax ? "softmax" : "sigmoid", z, softmax ? attrs : NULL);
            in[j] = neg ? tg_rw_op1(rw, "neg", b, NULL) : b;
            if (ds) {
                in[i] = dimshuffle(rw, in[i], order, norder);
                if (!scalar) in[j] = dimshuffle(rw, in[j], order, norder);
            }
            return swap(rw, n, tg_rw_op(rw, "mul", n->nin, in, NULL));
        }
    }
    return 0;
}

/* The softmax that a written-out y = e / s computes, e = exp(z): s, the
 * sum node of e under it (s itself, or what dimshuffle or expand_dims put
 * the axis back on), the axes it sums (mask, of e's nd), and the one axis
 * (ax: softmax) or -1 (several, or every axis: softmax_over). */
typedef struct written_softmax {
    const tg_var *s;
    tg_node *sum;
    uint32_t mask;
    int ax, nd;
} written_softmax;

static bool written_softmax_of(const tg_var *s, const tg_var *e, written_softmax *w) {
    int ax = -1, nd = e->type.ndim;
    tg_node *sum = sum_keeping_axis(s, e, &ax);
    if (!sum && !(sum = sum_kept(s, e)) && !(sum = sum_put_back(s, e))) return false;
    uint32_t mask = ax >= 0 ? 1u << ax : sum->a.axis_mask;
    if (!mask || mask >> nd) return false;
    *w = (written_softmax){s, sum, mask, ax, nd};
    return true;
}

/* The written-out softmax that the terms of a, a sum in its gradient,
 * divide by: the divisor of the first quotient under them (through negs,
 * views and sums). */
static bool written_softmax_in(const tg_node *a, const tg_var *e, written_softmax *w) {
    static const char *const through[] = {"neg", "dimshuffle", "transpose", "expand_dims", "reshape", "sum_to", "sum"};
    for (int k = 0; k < a->nin; k++) {
        const tg_var *t = a->inputs[k];
        for (int depth = 0; depth < 8 && t->owner; depth++) {
            const tg_node *p = t->owner;
            if (!strcmp(p->op->name, "true_div")) return written_softmax_of(p->inputs[1], e, w);
            size_t i = 0;
            while (i < sizeof through / sizeof through[0] && strcmp(p->op->name, through[i])) i++;
            if (i == sizeof through / sizeof through[0]) break;
            t = p->inputs[0];
        }
    }
    return false;
}

/* Axis i of a value of shape K (kept: e's with 1 at the softmax's axes)
 * or D (those axes gone) as an axis of K; -1 beyond. */
static int k_axis(const written_softmax *w, bool kept, int i) {
    if (kept) return i < w->nd ? i : -1;
    for (int a = 0; a < w->nd; a++)
        if (!(w->mask >> a & 1u) && i-- == 0) return a;
    return -1;
}

/* A dimshuffle from K or D (kin) to K or D (kout) that keeps the values:
 * it takes away or puts back length-1 softmax axes, nothing else. */
static bool keeps_values(const written_softmax *w, const int *o, int no, bool kin, bool kout) {
    if (no != (kout ? w->nd : w->nd - __builtin_popcount(w->mask))) return false;
    for (int k = 0; k < no; k++) {
        int at = k_axis(w, kout, k);
        if (o[k] < 0 ? at < 0 || !(w->mask >> at & 1u) : k_axis(w, kin, o[k]) != at) return false;
    }
    return true;
}

/* c is a constant shape, the lengths of v's type (all static): a
 * shape(v) that shape_static folded. */
static bool static_shape_of(const tg_var *c, const tg_var *v) {
    if (c->kind != TG_VAR_CONSTANT || !c->value || c->value->dtype != TG_INT64 || c->value->ndim != 1 ||
        c->value->shape[0] != v->type.ndim)
        return false;
    for (int d = 0; d < v->type.ndim; d++)
        if (v->type.shape[d] < 0 || (int64_t)tg_array_get_flat(c->value, d) != v->type.shape[d]) return false;
    return true;
}

/* t, a term of the gradient, is a sum over the softmax's axes, sum_to(x,
 * s) or sum(x, those axes), under views that keep its values: dimshuffles
 * and expand_dims that take away or put back those (length 1) axes, and
 * reshapes to the shape of s or of the sum (shape(s) or shape(sum), or
 * the constant shape_static made of it). So the chain rule writes the
 * gradient of the sum when dimshuffle or expand_dims put its axis back
 * (dimshuffle(reshape(sum_to(x, s), shape(sum)))), and that of a sum to
 * a scalar (its dimshuffle to e's ndim). t has e's ndim, or none when the
 * sum is over every axis. The sum_to or sum node, or NULL. Where each of
 * the softmax's axes has length 1 the chain rule writes no sum, a sum over
 * them being the term itself: then NULL, and *bare the value under the
 * views (of e's ndim, length 1 at those axes), where they stop at
 * anything else. */
static tg_node *summed_term(const written_softmax *w, const tg_var *t, const tg_var **bare) {
    int nr = w->nd - __builtin_popcount(w->mask);
    *bare = NULL;
    if (t->type.ndim != w->nd && !(nr == 0 && t->type.ndim == 0)) return NULL;
    for (int depth = 0; depth < 8; depth++) {
        tg_node *p = t->owner;
        if (!p || p->nout != 1) return NULL;
        const char *op = p->op->name;
        if (!strcmp(op, "sum_to")) return p->inputs[1] == w->s ? p : NULL;
        if (!strcmp(op, "sum")) return p->inputs[0]->type.ndim == w->nd && p->a.axis_mask == w->mask ? p : NULL;
        if (depth > 0 && (!strcmp(op, "neg") || !strcmp(op, "true_div"))) {
            bool ones = t->type.ndim == w->nd;
            for (int a = 0; a < w->nd && ones; a++) ones = !(w->mask >> a & 1u) || t->type.shape[a] == 1;
            if (ones) *bare = t;
            return NULL;
        }
        const tg_var *x = p->inputs[0];
        bool kin = x->type.ndim == w->nd, kout = t->type.ndim == w->nd, ok;
        int o[TG_MAX_NDIM], no = 0;
        if (!kin && x->type.ndim != nr) return NULL;
        if (order_of(p, o, &no)) {
            ok = keeps_values(w, o, no, kin, kout);
        } else if (!strcmp(op, "expand_dims")) {
            ok = !kin && kout && p->a.axis_mask == w->mask;
        } else if (!strcmp(op, "reshape")) {
            tg_node *sh = tg_rw_producer(p->inputs[1], "shape");
            ok = sh ? sh->inputs[0] == w->s || sh->inputs[0] == w->sum->outputs[0]
                    : static_shape_of(p->inputs[1], w->s) || static_shape_of(p->inputs[1], w->sum->outputs[0]);
        } else {
            return NULL;
        }
        if (!ok) return NULL;
        t = x;
    }
    return NULL;
}

/* v's run-time shape is e's wherever e's length may differ from 1 (v may
 * have more leading axes, and be longer where e has length 1), for sure:
 * from static lengths, or from how v is made (e itself, a broadcasting
 * elementwise op with such an operand, a fill of one, a sum_to to one),
 * so that it holds when lengths are unknown until run time. */
static bool covers(const tg_var *v, const tg_var *e, int depth) {
    int nd = e->type.ndim, off = v->type.ndim - nd;
    if (off < 0) return false;
    if (v == e) return true;
    bool known = true;
    for (int d = 0; d < nd && known; d++)
        known = e->type.shape[d] == 1 || (e->type.shape[d] >= 0 && v->type.shape[d + off] == e->type.shape[d]);
    if (known) return true;
    const tg_node *p = v->owner;
    if (depth <= 0 || !p || p->nout != 1) return false;
    const char *op = p->op->name;
    if (!strcmp(op, "sum_to")) return covers(p->inputs[1], e, depth - 1);
    if (!(p->op->flags & TG_OPF_ELEMWISE) && strcmp(op, "zeros_like") && strcmp(op, "ones_like")) return false;
    for (int i = 0; i < p->nin; i++)
        if (covers(p->inputs[i], e, depth - 1)) return true;
    return false;
}

/* v's run-time shape broadcasts to e's without stretching it (v has at
 * most e's ndim, each of its lengths e's or 1), for sure: from static
 * lengths, or from how v is made (e, s, a broadcasting elementwise op of
 * such operands, a fill of one, a sum_to to one). */
static bool within(const written_softmax *w, const tg_var *v, const tg_var *e, int depth) {
    if (v->type.ndim > e->type.ndim) return false;
    if (v == e || v == w->s || tg_rw_keeps_shape(e, &v, 1)) return true;
    const tg_node *p = v->owner;
    if (depth <= 0 || !p || p->nout != 1) return false;
    const char *op = p->op->name;
    if (!strcmp(op, "sum_to")) return within(w, p->inputs[1], e, depth - 1);
    if (!(p->op->flags & TG_OPF_ELEMWISE) && strcmp(op, "zeros_like") && strcmp(op, "ones_like")) return false;
    for (int i = 0; i < p->nin; i++)
        if (!within(w, p->inputs[i], e, depth - 1)) return false;
    return true;
}

/* The chain rule's gradient through a written-out softmax y = e / s,
 * e = exp(z), s = sum(e) over the softmax's axes with them kept: e times a
 * sum of terms each u / s, -(u / s), that summed over those axes (a sum
 * over them with keepdims), sum_to(.., s) or sum_to(.., e), or a fill
 * (zeros_like) -> the softmax times the same sum without the 1 / s:
 * g / s + sum(-(g y) / s) -> softmax(z) * (g - sum(g y)). s is the same
 * along those axes, so a sum over them of u / s is sum(u) / s; and
 * sum_to(u / s, T) = sum_to(u, T) / s for T = s or T of e's lengths, as
 * sum_to sums only leading axes and axes where T has length 1, where s
 * has length 1 too. Lengths unknown until run time need no static one:
 * the chain rule then writes sum_to(g / s, e) for the quotient's own
 * term, which becomes g where g and T have e's shape for sure (covers and
 * within: made from e and s), and a sum_to(u / s, s) becomes the sum over
 * the softmax's axes where u is no wider than e; else the sum_to is kept
 * with its target (so a u wider than e has that axis summed too), where
 * s does not stretch u, and otherwise the rule declines. One
 * axis kept by keepdims, or put back by dimshuffle or expand_dims after a
 * plain sum (the terms then views of the sums: summed_term), gives
 * softmax(z, axis); several axes with keepdims, or every axis (a null
 * axis, kept or summed to a scalar), exp(z - logsumexp(z, axes)), the
 * forms of softmax_simplify. As written, e and s overflow together past
 * 709 (88 in float32): inf / inf = NaN. */
static int written_softmax_grad(tg_rw *rw, tg_node *n) {
    if (n->nin > MAX_OPERANDS) return 0;
    for (int i = 0; i < n->nin; i++) {
        tg_node *e = tg_rw_producer(n->inputs[i], "exp");
        if (!e || !is_float(e->outputs[0]) || e->outputs[0]->type.ndim < 1) continue;
        const tg_var *ev = e->outputs[0];
        for (int j = 0; j < n->nin; j++) {
            tg_node *a = j == i ? NULL : tg_rw_producer(n->inputs[j], "add");
            written_softmax w;
            if (!a || a->nin > MAX_OPERANDS || !written_softmax_in(a, ev, &w)) continue;
            /* the sums over the softmax's axes, made again */
            char kept[160];
            kept_axes_attrs(w.mask, kept, sizeof kept);
            tg_var *parts[MAX_OPERANDS];
            int np = 0;
            bool ok = true;
            for (int k = 0; k < a->nin && ok; k++) {
                tg_var *t = a->inputs[k];
                tg_node *p = tg_rw_producer(t, "zeros_like");
                if (p) { /* a fill no larger than e adds nothing */
                    const tg_var *x = p->inputs[0];
                    ok = x->type.dtype == ev->type.dtype && tg_rw_keeps_shape(ev, &x, 1);
                    continue;
                }
                bool neg = false;
                for (; (p = tg_rw_producer(t, "neg")); t = p->inputs[0]) neg = !neg;
                tg_node *over = NULL;
                const tg_var *bare = NULL;
                if (!tg_rw_producer(t, "true_div")) {
                    over = tg_rw_producer(t, "sum_to");
                    /* sum_to(.., T), T of e's lengths: no views around */
                    if (!over || over->inputs[1] == w.s || !covers(over->inputs[1], ev, 6))
                        over = summed_term(&w, t, &bare);
                }
                if (over || bare) {
                    /* (a bare term: the quotient's own, seen through views) */
                    t = over ? over->inputs[0] : (tg_var *)bare;
                    for (; (p = tg_rw_producer(t, "neg")); t = p->inputs[0]) neg = !neg;
                }
                tg_node *q = tg_rw_producer(t, "true_div");
                if (!q || q->inputs[0]->type.dtype != ev->type.dtype || !same_value(q->inputs[1], w.s, 2)) {
                    ok = false;
                    break;
                }
                tg_var *u = q->inputs[0];
                const tg_var *to = over && !strcmp(over->op->name, "sum_to") ? over->inputs[1] : NULL;
                if (to && to != w.s && covers(u, ev, 6) && within(&w, u, ev, 6) && within(&w, to, ev, 6)) {
                    /* u, u / s and T have e's shape: sum_to(u / s, T) is
                     * u / s */
                } else if (over && u->type.ndim == w.nd && (!to || (to == w.s && within(&w, u, ev, 6)))) {
                    /* a sum over the softmax's axes, or sum_to(u / s, s)
                     * for a u no wider than e (which sums just those
                     * axes: where s has length 1, u / s has it too or e
                     * not), made again: no e or s needed for a shape */
                    u = tg_rw_op1(rw, "sum", u, kept);
                } else if (to) {
                    /* sum_to(u, T) adds up what sum_to(u / s, T) does
                     * where s does not stretch u (a scalar s, or u of e's
                     * lengths at least) */
                    if (w.s->type.ndim && !covers(u, ev, 6)) {
                        ok = false;
                        break;
                    }
                    u = tg_rw_op2(rw, "sum_to", u, over->inputs[1]);
                } else if (over) {
                    ok = false; /* a sum whose axes would not be e's */
                    break;
                }
                if (neg) u = tg_rw_op1(rw, "neg", u, NULL);
                if (!u) return TG_ENOMEM;
                parts[np++] = u;
            }
            if (!ok || !np) continue;
            tg_var *in[MAX_OPERANDS];
            for (int k = 0; k < n->nin; k++) in[k] = n->inputs[k];
            /* an integer or bool z in exp's float dtype (softmax_over
             * subtracts from it) */
            tg_var *z = as_dtype(rw, e->inputs[0], ev->type.dtype);
            if (!z) return TG_ENOMEM;
            if (w.ax >= 0) {
                char attrs[32];
                snprintf(attrs, sizeof attrs, "{\"axis\": %d}", w.ax);
                in[i] = tg_rw_op1(rw, "softmax", z, attrs);
            } else {
                in[i] = softmax_over(rw, z, w.sum);
            }
            in[j] = np == 1 ? parts[0] : tg_rw_op(rw, "add", np, parts, NULL);
            tg_var *r = tg_rw_op(rw, "mul", n->nin, in, NULL);
            if (!r) return TG_ENOMEM;
            /* Each part is its term times s (a fill, nothing), and s
             * broadcasts to e, which both products hold: the run-time
             * shape is n's whether or not the static lengths show it. */
            if (r->type.dtype != n->outputs[0]->type.dtype || r->type.ndim != n->outputs[0]->type.ndim) return 0;
            return swap(rw, n, r);
        }
    }
    return 0;
}
static int sigmoid_times_exp(tg_rw *rw, tg_node *n) { return exp_ratio_times_exp(rw, n, false); }
static int softmax_times_exp(tg_rw *rw, tg_node *n) { return exp_ratio_times_exp(rw, n, true); }

/* A switch one of whose branches is zero: its node, and in *keep the
 * position (1 or 2) of the other branch. */
static tg_node *zero_switch(const tg_var *v, int *keep) {
    tg_node *s = tg_rw_producer(v, "switch");
    if (!s || s->nin != 3) return NULL;
    for (int b = 1; b <= 2; b++) {
        const tg_var *z = s->inputs[b];
        if (tg_rw_is_const_value(z, 0) || tg_rw_producer(z, "zeros_like")) {
            *keep = 3 - b;
            return s;
        }
    }
    return NULL;
}

/* The sign of a zero that zero_switch found: 1 for -0, 0 for +0 (a
 * zeros_like), -1 for a constant holding both. */
static int zero_sign(const tg_var *z) {
    if (z->kind != TG_VAR_CONSTANT || !z->value) return 0;
    int64_t n = tg_array_size(z->value);
    int s = signbit(tg_array_get_flat(z->value, 0)) ? 1 : 0;
    for (int64_t i = 1; i < n; i++)
        if ((signbit(tg_array_get_flat(z->value, i)) ? 1 : 0) != s) return -1;
    return s;
}

/* switch(c1, switch(c2, x, 0), 0) -> switch(c1 and c2, x, 0), and the
 * forms with a zero in the then-branch (`or`, and `not` where the two
 * keep x on opposite sides), one condition where both are the same
 * variable. switch_sink moves a zero switch past a product and leaves it
 * on the product's result, which is often the kept branch of the next
 * one (the chain rule through relu(x * w) ..., or switch(c, 0, t) * y
 * repeated): stacked, each one moved past every product above it, n^2/2
 * new nodes, and where the products are read twice (the gradient of
 * each w) every stack was copied, a graph of n^2/2 switches. Merged as
 * they form, the stack is one switch, which moves past the next product
 * in one step. The inner zero must not stretch the result, nor its
 * switch change x's dtype, and both zeros have one sign (the merged
 * switch picks the outer one). */
static int switch_merge(tg_rw *rw, tg_node *n) {
    int keep1, keep2;
    if (zero_switch(n->outputs[0], &keep1) != n) return 0;
    tg_node *s = zero_switch(n->inputs[keep1], &keep2);
    if (!s) return 0;
    tg_var *x = s->inputs[keep2], *z1 = n->inputs[3 - keep1], *z2 = s->inputs[3 - keep2];
    tg_var *c1 = n->inputs[0], *c2 = s->inputs[0];
    if (s->outputs[0]->type.dtype != x->type.dtype) return 0;
    if (z2->type.ndim && !tg_rw_keeps_shape(x, (const tg_var *const *)&z2, 1)) return 0;
    int sg1 = zero_sign(z1), sg2 = zero_sign(z2);
    if (sg1 < 0 || sg1 != sg2) return 0;
    tg_var *c = c1;
    if (c1 == c2) {
        if (keep1 != keep2) return 0; /* zero everywhere: rare, left as is */
    } else {
        /* keep1 == 1: x where c1 and (c2, or not c2); keep1 == 2: zero
         * where c1 or (c2, or not c2). */
        tg_var *d = keep1 == keep2 ? c2 : tg_rw_op1(rw, "logical_not", c2, NULL);
        c = d ? tg_rw_op2(rw, keep1 == 1 ? "logical_and" : "logical_or", c1, d) : NULL;
        if (!c) return TG_ENOMEM;
        /* The conditions stand for n: s, below, may stand for the stack
         * merged so far, which the merged switch stands for. */
        if (tg_rw_stands_for(rw, c->owner, n) || (d != c2 && tg_rw_stands_for(rw, d->owner, n)))
            return TG_ENOMEM;
    }
    if (match_if_dies(rw, s)) return TG_ENOMEM;
    tg_var *in[3] = {c, z1, z1};
    in[keep1] = x;
    return swap(rw, n, tg_rw_op(rw, "switch", 3, in, NULL));
}

/* mul(.., switch(c, 0, x), ..) -> switch(c, 0, mul(.., x, ..)) and
 * true_div(switch(c, 0, x), y) -> switch(c, 0, true_div(x, y)) (Theano's
 * local_mul_switch_sink and local_div_switch_sink): where the switch
 * picks 0 the product is 0 even when another operand is inf or NaN there.
 * The gradient of switch(c, f(x), 0) is switch(c, g, 0) times f'(x), and
 * f' is often infinite where c is false (log, sqrt, a division at 0): as
 * written, 0 * inf made the gradient NaN. Elsewhere the values are the
 * same (a product with a selected 0 may lose its sign: 0, not -0). Not
 * where the switch's zero changes x's dtype. */
static int switch_sink(tg_rw *rw, tg_node *n) {
    bool div = !strcmp(n->op->name, "true_div");
    int last = div ? 1 : n->nin;
    for (int i = 0; i < last; i++) {
        int keep;
        tg_node *s = zero_switch(n->inputs[i], &keep);
        /* A zero wider than x (int64 0 or a float64 constant beside an
         * int8 or float32 x) widens the product as written: moved past
         * it, the product would be computed in x's dtype (an int8 product
         * wrapped, a float32 quotient overflowed, in a result of the same
         * dtype as before). */
        if (!s || s->inputs[keep]->type.dtype != s->outputs[0]->type.dtype) continue;
        tg_var *in[MAX_OPERANDS];
        if (n->nin > MAX_OPERANDS) return 0;
        for (int k = 0; k < n->nin; k++) in[k] = k == i ? s->inputs[keep] : n->inputs[k];
        if (match_if_dies(rw, s)) return TG_ENOMEM;
        tg_var *inner = tg_rw_op(rw, n->op->name, n->nin, in, NULL);
        /* The product stands for the product only: the switch it passed
         * (which may stand for a whole merged stack) goes on above. */
        if (inner && tg_rw_stands_for(rw, inner->owner, n)) return TG_ENOMEM;
        tg_var *sw[3] = {s->inputs[0], s->inputs[1], s->inputs[2]};
        sw[keep] = inner;
        return swap(rw, n, inner ? tg_rw_op(rw, "switch", 3, sw, NULL) : NULL);
    }
    return 0;
}

/* ---- specialize ---- */

/* pow(x, 0.5) (recip: pow(x, -0.5)) as C's pow gives it, NumPy's power:
 * sqrt where they agree, and where they do not, pow's value. At -inf pow
 * gives +inf (+0 for -0.5) and sqrt NaN; at -0 pow gives +0 (+inf) and
 * sqrt -0 (whose reciprocal is -inf), which adding +0 makes +0. The
 * switch and the add fuse with the sqrt into one kernel. (Specialize runs
 * after canonicalize, whose collect_constants would drop the + 0.) */
static tg_var *pow_half(tg_rw *rw, tg_var *x, bool recip) {
    tg_dtype dt = x->type.dtype;
    tg_var *r = tg_rw_op2(rw, "add", tg_rw_op1(rw, "sqrt", x, NULL), tg_rw_const(rw, dt, 0));
    if (recip) r = tg_rw_op1(rw, "reciprocal", r, NULL);
    tg_var *in[3] = {tg_rw_op2(rw, "eq", x, tg_rw_const(rw, dt, -INFINITY)),
                     tg_rw_const(rw, dt, recip ? 0 : INFINITY), r};
    return tg_rw_op(rw, "switch", 3, in, NULL); /* NULL when out of memory */
}

/* pow(x, 2) -> sqr, 0.5 -> sqrt, 1 -> x, -1 -> reciprocal, -0.5 ->
 * reciprocal(sqrt) (for floats through pow_half) */
static int pow_specialize(tg_rw *rw, tg_node *n) {
    double c;
    tg_var *x = n->inputs[0];
    if (n->inputs[1]->type.ndim != 0 || !scalar_const(n->inputs[1], &c)) return 0;
    if (x->type.dtype == TG_BOOL) return 0;
    tg_var *r;
    if (c == 2)
        r = tg_rw_op1(rw, "sqr", x, NULL);
    else if (c == 1)
        r = x;
    else if (c == 0.5)
        r = is_float(x) ? pow_half(rw, x, false) : tg_rw_op1(rw, "sqrt", x, NULL);
    else if (c == -1 && is_float(n->outputs[0]))
        r = tg_rw_op1(rw, "reciprocal", x, NULL);
    else if (c == -0.5)
        r = is_float(x) ? pow_half(rw, x, true) : tg_rw_op1(rw, "reciprocal", tg_rw_op1(rw, "sqrt", x, NULL), NULL);
    else
        return 0;
    if (!r) return TG_ENOMEM;
    if (r->type.dtype != n->outputs[0]->type.dtype) return 0;
    return swap(rw, n, r);
}

/* A term of a sum: coef * dot(x, y). coef is NULL for 1, or a scalar
 * variable of the dot's dtype; neg flips the sign. */
typedef struct term {
    tg_node *prod; /* the dot/outer node */
    tg_var *coef;
    tg_node *mulnode; /* the mul around it, or NULL */
} term;

static bool product_term(tg_var *v, const char *prod, term *t) {
    memset(t, 0, sizeof *t);
    tg_node *d = tg_rw_producer(v, prod);
    if (d && tg_rw_single_client(v)) {
        t->prod = d;
        return true;
    }
    tg_node *m = tg_rw_producer(v, "mul");
    if (!m || m->nin != 2 || !tg_rw_single_client(v)) return false;
    for (int i = 0; i < 2; i++) {
        tg_var *c = m->inputs[i], *p = m->inputs[1 - i];
        d = tg_rw_producer(p, prod);
        if (d && tg_rw_single_client(p) && c->type.ndim == 0 &&
            c->type.dtype == p->type.dtype) {
            t->prod = d;
            t->coef = c;
            t->mulnode = m;
            return true;
        }
    }
    return false;
}

static bool float_blas(tg_dtype dt) { return dt == TG_FLOAT32 || dt == TG_FLOAT64; }

/* z's run-time shape is the product's, for sure. */
static bool same_static(const tg_type *a, const tg_type *b) { return tg_rw_type_same_known(a, b); }

/* r, the rewrite of operands `side` and zi of n (an add of at most
 * MAX_OPERANDS terms), added to n's other terms; NULL when out of
 * memory. */
static tg_var *with_other_terms(tg_rw *rw, const tg_node *n, tg_var *r, int side, int zi) {
    tg_var *in[MAX_OPERANDS];
    int k = 0;
    in[k++] = r;
    for (int m = 0; m < n->nin; m++)
        if (m != side && m != zi) in[k++] = n->inputs[m];
    return tg_rw_op(rw, "add", k, in, NULL);
}

/* blas_update with the product term (dot when pi is 0, outer when 1) at
 * n's operand `side` and z at operand zi: the rewrite's result (> 0), or
 * 0 when they do not fit. */
static int blas_try(tg_rw *rw, tg_node *n, int pi, int side, int zi) {
    static const char *const prods[] = {"dot", "outer"};
    bool is_sub = !strcmp(n->op->name, "sub");
    tg_dtype dt = n->outputs[0]->type.dtype;
    term t;
    if (!product_term(n->inputs[side], prods[pi], &t)) return 0;
    tg_var *pv = t.prod->outputs[0];
    tg_var *z = n->inputs[zi];
    if (pv->type.dtype != dt || z->type.dtype != dt || !same_static(&z->type, &pv->type)) return 0;
    tg_var *x = t.prod->inputs[0], *y = t.prod->inputs[1];
    if (x->type.dtype != dt || y->type.dtype != dt) return 0;
    const char *op;
    if (pi == 1)
        op = "ger";
    else if (x->type.ndim == 2 && y->type.ndim == 2)
        op = "gemm";
    else if (x->type.ndim == 2 && y->type.ndim == 1)
        op = "gemv";
    else
        return 0;
    /* A coefficient that is the constant 0 stays a multiplication: BLAS
     * with beta 0 ignores z, where 0 * NaN and 0 * inf are NaN as written
     * (NumPy). z + 0*dot(x, y) stays as written; 0*z + dot(x, y) is
     * gemm(0*z, 1, x, y, 1). An alpha read at run time may be 0 (the
     * kernels then still form the product, blas.c); a beta read at run
     * time stays a multiplication, as it could be 0. */
    double c0;
    if (t.coef && scalar_const(t.coef, &c0) && c0 == 0) return 0;
    /* z's coefficient: b*z0 with b a nonzero constant scalar of the dtype. */
    tg_var *beta = NULL;
    tg_node *zm = tg_rw_producer(z, "mul");
    if (pi == 0 && zm && zm->nin == 2 && tg_rw_single_client(z)) {
        for (int i = 0; i < 2 && !beta; i++)
            if (zm->inputs[i]->type.ndim == 0 && zm->inputs[i]->type.dtype == dt &&
                scalar_const(zm->inputs[i], &c0) && c0 != 0 &&
                same_static(&zm->inputs[1 - i]->type, &pv->type)) {
                beta = zm->inputs[i];
                z = zm->inputs[1 - i];
            }
    }
    bool beta_from_zm = beta != NULL;
    tg_var *alpha = t.coef ? t.coef : tg_rw_const(rw, dt, 1);
    if (is_sub) alpha = tg_rw_op1(rw, "neg", alpha, NULL);
    if (!alpha) return TG_ENOMEM;
    tg_var *r;
    if (pi == 1) {
        tg_var *in[4] = {z, alpha, x, y};
        r = tg_rw_op(rw, "ger", 4, in, NULL);
    } else {
        if (!beta) beta = tg_rw_const(rw, dt, 1);
        tg_var *in[5] = {z, alpha, x, y, beta};
        r = tg_rw_op(rw, op, 5, in, NULL);
    }
    if (r && n->nin > 2 && (r = with_other_terms(rw, n, r, side, zi)) && !stands_for(r, n)) return 0;
    /* (matched last: a try that does not fit records nothing) */
    if ((beta_from_zm && tg_rw_match(rw, zm)) || tg_rw_match(rw, t.prod) || (t.mulnode && tg_rw_match(rw, t.mulnode)))
        return TG_ENOMEM;
    return swap(rw, n, r);
}

/* sum_to(matmul(a, b), w) that sums the batch axes away, w a matrix:
 * the weight gradient of a product of a batch of inputs with one matrix
 * (x [B, T, D] times W [D, N]; W's gradient sums x_b^T g_b over the
 * batch) -> dot(A, G), A = a's matrices side by side [D, B*T], G = b's
 * stacked [B*T, N]: one product of the batch's rows, as the weight
 * gradient of a Linear layer is computed for a sequence. As written,
 * B products (slower than one as tall), a [B, D, N] intermediate, and
 * its sum; and blas_update then folds an SGD step into the dot, as for
 * a matrix of inputs. The batch axes must have one length in a and b at
 * run time (matmul would broadcast a 1 against B), and w the product's
 * last two (sum_to sums only the batch). A and G are views of a and b
 * when their layout allows (a the transpose of x: A is x's rows, read
 * transposed), else copies. The sums go in another order: the values
 * agree to rounding, not bit for bit. */
static int matmul_batch_sum(tg_rw *rw, tg_node *n) {
    tg_var *m = n->inputs[0], *w = n->inputs[1];
    tg_node *p = tg_rw_producer(m, "matmul");
    const int nd = m->type.ndim;
    if (!p || !tg_rw_single_client(m) || w->type.ndim != 2 || nd < 3) return 0;
    tg_var *a = p->inputs[0], *b = p->inputs[1];
    tg_dtype dt = m->type.dtype;
    if (a->type.ndim != nd || b->type.ndim != nd || !tg_dtype_is_float(dt) || a->type.dtype != dt ||
        b->type.dtype != dt || n->outputs[0]->type.dtype != dt)
        return 0;
    int budget = 256;
    for (int d = 0; d < nd - 2; d++)
        if (!axis_same(axis_of(a, d, &budget), axis_of(b, d, &budget))) return 0;
    axis_len rows = axis_of(w, 0, &budget), cols = axis_of(w, 1, &budget);
    if (!axis_same(axis_of(m, nd - 2, &budget), rows) || !axis_same(axis_of(m, nd - 1, &budget), cols)) return 0;
    if (rows.len <= 0 || cols.len <= 0) return 0; /* the reshapes need both */
    /* a's rows axis first, then the batch, then its columns: composed
     * with a dimshuffle that makes a (the transpose of x) */
    int perm[TG_MAX_NDIM], o1[TG_MAX_NDIM], n1, order[TG_MAX_NDIM];
    perm[0] = nd - 2;
    for (int d = 0; d < nd - 2; d++) perm[d + 1] = d;
    perm[nd - 1] = nd - 1;
    tg_var *src = a;
    bool composed = a->owner && order_of(a->owner, o1, &n1) && n1 == nd && a->owner->inputs[0]->type.ndim == nd;
    for (int i = 0; composed && i < nd; i++) composed = o1[i] >= 0;
    for (int i = 0; i < nd; i++) order[i] = composed ? o1[perm[i]] : perm[i];
    if (composed) src = a->owner->inputs[0];
    int64_t two = 2, sa[2] = {rows.len, -1}, sb[2] = {-1, cols.len};
    tg_var *A = tg_rw_op2(rw, "reshape", dimshuffle(rw, src, order, nd),
                          tg_rw_const_array(rw, tg_array_new_from(TG_INT64, 1, &two, sa)));
    tg_var *G = tg_rw_op2(rw, "reshape", b, tg_rw_const_array(rw, tg_array_new_from(TG_INT64, 1, &two, sb)));
    if (!A || !G) return TG_ENOMEM;
    if (tg_rw_match(rw, p)) return TG_ENOMEM;
    return swap(rw, n, tg_rw_op2(rw, "dot", A, G));
}

/* add(z, a*dot(x, y)) / sub(z, a*dot(x, y)) -> gemm or gemv; with outer:
 * ger. z may itself be b*z0. A sum of more terms (flatten_add_mul made
 * z + a*dot(x, y) + c one add) keeps the others: add(gemm(..), c..), as
 * Theano's gemm optimizer took its terms from a sum of several. */
static int blas_update(tg_rw *rw, tg_node *n) {
    bool is_sub = !strcmp(n->op->name, "sub");
    if (n->nin < 2 || (n->nin > 2 && (is_sub || n->nin > MAX_OPERANDS))) return 0;
    if (!float_blas(n->outputs[0]->type.dtype)) return 0;
    for (int pi = 0; pi < 2; pi++)
        for (int side = is_sub ? 1 : 0; side < n->nin; side++)
            for (int zi = 0; zi < n->nin; zi++) {
                if (zi == side) continue;
                int rc = blas_try(rw, n, pi, side, zi);
                if (rc) return rc;
            }
    return 0;
}

/* z - c*gemm(z, a, x, y, b) -> gemm(z, -c*a, x, y, 1 - c*b), and with add
 * 1 + c*b (gemv likewise), c and b constants, the gemm read by this node
 * alone: an SGD step with weight decay, W - lr*(dot(x.T, g) + wd*W),
 * whose gradient blas_update made gemm(W, 1, x.T, g, wd), is one gemm over
 * W (which the in-place pass may then write over W) instead of the gemm,
 * its copy of W and an elementwise pass. Not where the new beta is 0
 * (BLAS would ignore z) or the new alpha is (z's product term would go).
 * The coefficients are combined in float64 and rounded once: the values
 * agree to rounding. */
static int gemm_fold(tg_rw *rw, tg_node *n) {
    static const char *const prods[] = {"gemm", "gemv"};
    bool is_sub = !strcmp(n->op->name, "sub");
    tg_dtype dt = n->outputs[0]->type.dtype;
    if (n->nin != 2 || !float_blas(dt)) return 0;
    for (int pi = 0; pi < 2; pi++)
        for (int side = is_sub ? 1 : 0; side < 2; side++) {
            term t;
            if (!product_term(n->inputs[side], prods[pi], &t)) continue;
            tg_node *G = t.prod;
            tg_var *z = n->inputs[1 - side];
            double c = 1, a, b;
            if (G->inputs[0] != z || G->outputs[0]->type.dtype != dt || z->type.dtype != dt ||
                !same_static(&z->type, &G->outputs[0]->type) || (t.coef && !scalar_const(t.coef, &c)) ||
                !scalar_const(G->inputs[4], &b))
                continue;
            double s = is_sub ? -c : c, nb = 1 + s * b;
            if (s == 0 || nb == 0 || !isfinite(nb) || !isfinite(s)) continue;
            tg_var *alpha = G->inputs[1];
            if (scalar_const(alpha, &a)) {
                if (a * s == 0 || !isfinite(a * s)) continue;
                alpha = tg_rw_const(rw, dt, a * s);
            } else if (s != 1) {
                alpha = tg_rw_op2(rw, "mul", alpha, tg_rw_const(rw, dt, s));
            }
            tg_var *in[5] = {z, alpha, G->inputs[2], G->inputs[3], tg_rw_const(rw, dt, nb)};
            if (!alpha || !in[4]) return TG_ENOMEM;
            tg_var *r = tg_rw_op(rw, prods[pi], 5, in, NULL);
            if (!r) return TG_ENOMEM;
            if (tg_rw_match(rw, G) || (t.mulnode && tg_rw_match(rw, t.mulnode))) return TG_ENOMEM;
            return swap(rw, n, r);
        }
    return 0;
}

/* ---- sparse updates ---- */

enum { SPARSE_LEVELS = 8 };

/* v = inc(..inc(zeros, g1, i1).., gk, ik): take_add or inc_subtensor
 * applied, one after another, to an array of zeros (zeros_like(w), or a
 * constant of zeros), each result read by the next alone and v by its
 * reader alone, every g in v's dtype. Fills lv[0..k) innermost first and
 * *shape_of with w (the zeros' shape, which is v's), or returns 0. */
static int sparse_chain(const tg_var *v, tg_node **lv, const tg_var **shape_of, tg_node **zeros) {
    const tg_dtype dt = v->type.dtype;
    tg_node *up[SPARSE_LEVELS];
    int k = 0;
    for (;;) {
        tg_node *p = v->owner;
        if (!p || (strcmp(p->op->name, "take_add") && strcmp(p->op->name, "inc_subtensor"))) break;
        if (k == SPARSE_LEVELS || !tg_rw_single_client(v) || p->outputs[0]->type.dtype != dt ||
            p->inputs[1]->type.dtype != dt)
            return 0;
        up[k++] = p;
        v = p->inputs[0];
    }
    if (!k || v->type.dtype != dt) return 0;
    tg_node *z = tg_rw_producer(v, "zeros_like");
    if (z) {
        *shape_of = z->inputs[0];
        *zeros = tg_rw_single_client(v) ? z : NULL;
    } else if (tg_rw_is_const_value(v, 0)) {
        *shape_of = v;
        *zeros = NULL;
    } else {
        return 0;
    }
    for (int i = 0; i < k; i++) lv[i] = up[k - 1 - i];
    return k;
}

/* Whether the take_add q of a chain over zeros of w's shape adds rows
 * of exactly the indexed shape (y neither broadcast nor stretched, for
 * sure) through a vector of indices: then the rows of several such
 * increments in a row can be one take_add of the rows and indices joined
 * (the same additions in the same order). *ax: the axis. */
static bool take_rows_exact(const tg_node *q, const tg_var *w, int *ax) {
    if (strcmp(q->op->name, "take_add")) return false;
    const tg_var *y = q->inputs[1], *ix = q->inputs[2];
    int nd = w->type.ndim, a = q->a.axes[0] < 0 ? q->a.axes[0] + nd : q->a.axes[0];
    if (ix->type.ndim != 1 || y->type.ndim != nd || a < 0 || a >= nd) return false;
    int budget = 256;
    for (int d = 0; d < nd; d++)
        if (!axis_same(axis_of(y, d, &budget), d == a ? axis_of(ix, 0, &budget) : axis_of(w, d, &budget)))
            return false;
    *ax = a;
    return true;
}

/* z + c*inc(zeros, g, i) -> inc(z, c*g, i), for take_add and
 * inc_subtensor (grad's gradient of take and subtensor: the rows read,
 * put back into zeros of the whole array's shape), c a finite constant
 * scalar, or 1, or -1 for a neg or a sub; a chain of such increments
 * (a table read at several places) is rebuilt on z one after another.
 * The SGD step of an embedding table, E - lr * grad(E), then adds into
 * the rows read and nothing else, where as written it wrote an array of
 * zeros the size of the table, added the rows into it and swept the
 * whole table again; the in-place pass then lets the step write the
 * table where it lies (take_add's commit_ready, ops/build.c). Only
 * where z has the zeros' shape for sure (the increment's result has
 * z's shape, and the sum had it). The values agree to rounding: where
 * an index repeats, c*(g1 + g2) is now c*g1 + c*g2, added to z in
 * turn; an index that occurs once gives the same bits but for the sign
 * of a zero. A coefficient that is not a constant stays as written: a
 * non-finite one makes every element NaN there, and here only the rows
 * read. */
static int sparse_update(tg_rw *rw, tg_node *n) {
    bool is_sub = !strcmp(n->op->name, "sub");
    const tg_dtype dt = n->outputs[0]->type.dtype;
    if (n->nin < 2 || n->nin > MAX_OPERANDS || (is_sub && n->nin != 2)) return 0;
    if (!tg_dtype_is_float(dt) && !tg_dtype_is_int(dt)) return 0;
    for (int side = is_sub ? 1 : 0; side < n->nin; side++) {
        /* the term: inc, neg(inc), c*inc / inc*c */
        tg_var *t = n->inputs[side], *coef = NULL;
        tg_node *wrap = NULL;
        double c = 1;
        bool neg = is_sub;
        tg_node *p = t->owner;
        if (p && tg_rw_single_client(t) && !strcmp(p->op->name, "neg") && t->type.dtype == dt) {
            wrap = p;
            neg = !neg;
            t = p->inputs[0];
        } else if (p && tg_rw_single_client(t) && !strcmp(p->op->name, "mul") && p->nin == 2 && tg_dtype_is_float(dt) &&
                   t->type.dtype == dt) {
            for (int i = 0; i < 2 && !coef; i++) {
                const tg_var *ci = p->inputs[i];
                if (ci->type.ndim == 0 && ci->type.dtype == dt && scalar_const(ci, &c) && isfinite(c)) {
                    coef = p->inputs[i];
                    t = p->inputs[1 - i];
                }
            }
            if (!coef) continue;
            wrap = p;
        }
        tg_node *lv[SPARSE_LEVELS], *zeros;
        const tg_var *w;
        int k = t->type.dtype == dt ? sparse_chain(t, lv, &w, &zeros) : 0;
        if (!k) continue;
        for (int zi = 0; zi < n->nin; zi++) {
            tg_var *z = n->inputs[zi];
            if (zi == side || z->type.dtype != dt || z->type.ndim != w->type.ndim) continue;
            int budget = 256;
            bool same = true;
            for (int d = 0; d < w->type.ndim && same; d++)
                same = axis_same(axis_of(z, d, &budget), axis_of(w, d, &budget));
            if (!same) continue;
            tg_var *r = z, *cv = coef;
            if (coef && neg) cv = tg_rw_const(rw, dt, -c);
            for (int i = 0, j; i < k && r; i = j) {
                tg_node *q = lv[i];
                tg_var *in[TG_MAX_NDIM * 3 + 2];
                if (q->nin > (int)(sizeof in / sizeof in[0])) return 0;
                for (int m = 0; m < q->nin; m++) in[m] = q->inputs[m];
                /* take_adds in a row, each of whole rows: one, of the
                 * rows and indices joined, which the table's update can
                 * then write in place (a table read at several places) */
                int ax, ax2;
                j = i + 1;
                if (take_rows_exact(q, w, &ax))
                    while (j < k && take_rows_exact(lv[j], w, &ax2) && ax2 == ax) j++;
                if (j - i > 1) {
                    tg_var *ys[SPARSE_LEVELS], *is[SPARSE_LEVELS];
                    for (int m = i; m < j; m++) {
                        ys[m - i] = lv[m]->inputs[1];
                        is[m - i] = lv[m]->inputs[2];
                    }
                    char at[32];
                    snprintf(at, sizeof at, "{\"axis\": %d}", ax);
                    in[1] = tg_rw_op(rw, "join", j - i, ys, at);
                    in[2] = tg_rw_op(rw, "join", j - i, is, "{\"axis\": 0}");
                    if (!in[1] || !in[2]) return TG_ENOMEM;
                }
                in[0] = r;
                in[1] = cv ? tg_rw_op2(rw, "mul", cv, in[1]) : neg ? tg_rw_op1(rw, "neg", in[1], NULL) : in[1];
                r = in[1] ? tg_rw_op_json(rw, q->op, q->nin, in, q->attrs) : NULL;
            }
            if (r && n->nin > 2) r = with_other_terms(rw, n, r, side, zi);
            if (!r) return TG_ENOMEM;
            for (int i = 0; i < k; i++)
                if (tg_rw_match(rw, lv[i])) return TG_ENOMEM;
            if ((wrap && tg_rw_match(rw, wrap)) || (zeros && tg_rw_match(rw, zeros))) return TG_ENOMEM;
            return swap(rw, n, r);
        }
    }
    return 0;
}

/* ---- control flow ---- */

/* ifelse(c, t.., e..) with a constant c -> the branch it names. */
static int ifelse_const_cond(tg_rw *rw, tg_node *n) {
    const tg_var *c = n->inputs[0];
    if (c->kind != TG_VAR_CONSTANT || !c->value) return 0;
    bool taken = tg_ifelse_truth(c->value);
    int k = n->nout, done = 0;
    for (int i = 0; i < k; i++) {
        tg_var *o = n->outputs[i], *v = n->inputs[taken ? 1 + i : 1 + k + i];
        if (!o->nclients) continue;
        if (!fits(v, o)) return 0;
    }
    for (int i = 0; i < k; i++) {
        tg_var *o = n->outputs[i];
        if (!o->nclients) continue;
        int rc = tg_rw_replace(rw, o, n->inputs[taken ? 1 + i : 1 + k + i]);
        if (rc) return rc;
        done = 1;
    }
    return done;
}

/* switch(c, a, b) with c a constant that is true everywhere -> a, false
 * everywhere -> b (Theano's local_useless_switch), when that branch has
 * the result's dtype and, for sure, its shape. The gradient of pow(x, 3)
 * masks y = 0 as switch(3 != 0, .., 0), which folds to such a switch. */
enum { SWITCH_COND_MAX = 1 << 16 };

static int switch_const_cond(tg_rw *rw, tg_node *n) {
    const tg_var *c = n->inputs[0];
    if (c->kind != TG_VAR_CONSTANT || !c->value) return 0;
    int64_t size = tg_array_size(c->value);
    if (size < 1 || size > SWITCH_COND_MAX) return 0;
    bool taken = tg_array_get_flat(c->value, 0) != 0; /* NaN is true, as in the kernel */
    for (int64_t i = 1; i < size; i++)
        if ((tg_array_get_flat(c->value, i) != 0) != taken) return 0;
    tg_var *v = n->inputs[taken ? 1 : 2];
    return stands_for(v, n) ? swap_checked(rw, n, v) : 0;
}

/* ifelse(c, .. x .., .. x ..): an output whose two branches are the same
 * variable is that variable (the condition need not be known). */
static int ifelse_same_branches(tg_rw *rw, tg_node *n) {
    int k = n->nout, done = 0;
    for (int i = 0; i < k; i++) {
        tg_var *o = n->outputs[i], *t = n->inputs[1 + i];
        if (!o->nclients || t != n->inputs[1 + k + i] || !fits(t, o)) continue;
        int rc = tg_rw_replace(rw, o, t);
        if (rc) return rc;
        done = 1;
    }
    return done;
}

/* What inlining one op_from_graph node builds into. */
typedef struct inliner {
    tg_rw *rw;
    const tg_node *ofg;
} inliner;

static tg_var *rw_constant(void *ud, tg_array *a) { return tg_rw_const_array(((inliner *)ud)->rw, a); }

static tg_node *rw_body_node(void *ud, const tg_node *bn, tg_var *const *ins) {
    inliner *in = ud;
    tg_node *c = tg_rw_node(in->rw, bn->op, bn->nin, ins, bn->nout, bn->attrs);
    if (!c) return NULL;
    /* Its errors name bn as the call of the op_from_graph does ("in the
     * body of 'f'"), with bn's name and trace. */
    char where[300];
    snprintf(where, sizeof where, "in the body of '%s'", tg_ofg_name(in->ofg));
    if (tg_node_moved_from(c, in->ofg, where, bn, true)) {
        tg_errorf(tg_rw_ctx(in->rw), TG_ENOMEM, "out of memory while optimizing");
        return NULL;
    }
    return c;
}

/* op_from_graph -> its body's nodes, reading the node's inputs (Theano's
 * inline OpFromGraph). Nested op_from_graph nodes of the body come along
 * as nodes and are inlined in turn from the worklist. */
static int inline_op_from_graph(tg_rw *rw, tg_node *n) {
    const tg_ofg *o = n->a.extra;
    if (!o || !o->g) return 0;
    tg_var *small[8], **outs = n->nout <= 8 ? small : tg_calloc((size_t)n->nout, sizeof *outs);
    if (!outs) return TG_ENOMEM;
    inliner in = {rw, n};
    tg_ofg_target t = {rw_constant, rw_body_node, &in, tg_rw_ctx(rw)};
    int rc = tg_ofg_copy_body(n, &t, outs);
    for (int k = 0; k < n->nout && !rc; k++)
        if (n->outputs[k]->nclients) rc = tg_rw_replace(rw, n->outputs[k], outs[k]);
    if (outs != small) tg_free(outs);
    return rc ? rc : 1;
}

/* ---- the table ---- */

const tg_rw_rule tg_rw_rules[] = {
    {"inline_op_from_graph", "inline", "inline", "op_from_graph", inline_op_from_graph},
    /* Scan first: what it moves out of loops meets the other rewrites. */
    {"scan_inline", "scan", NULL, "scan", tg_rw_scan_inline},
    {"scan_drop_outputs", "scan", NULL, "scan", tg_rw_scan_drop_outputs},
    {"scan_merge_outputs", "scan", NULL, "scan", tg_rw_scan_merge_outputs},
    {"scan_hoist", "scan", NULL, "scan", tg_rw_scan_hoist},
    {"scan_push_seq", "scan", NULL, "scan", tg_rw_scan_push_seq},
    {"scan_keep_last", "scan", NULL, "scan", tg_rw_scan_keep_last},
    {"scan_merge", "scan", NULL, "scan", tg_rw_scan_merge},
    {"scan_acc_sum", "scan", NULL, "scan", tg_rw_scan_acc_sum},
    {"scan_drop_recurrent", "scan", NULL, "scan", tg_rw_scan_drop_recurrent},
    {"scan_sum_dot", "scan", NULL, "scan", tg_rw_scan_sum_dot},
    {"scan_pull_out", "scan", NULL, "scan", tg_rw_scan_pull_out},
    {"scan_prune", "scan", NULL, "scan", tg_rw_scan_prune},
    {"slice_product_reuse", "scan", NULL, "matmul dot", tg_rw_slice_product_reuse},
    {"scan_reuse_step_product", "scan", NULL, "matmul dot", tg_rw_scan_reuse_step_product},
    {"constant_folding", "canonicalize", "constant_folding", NULL, constant_folding},
    {"ifelse_const_cond", "canonicalize", "ifelse", "ifelse", ifelse_const_cond},
    {"ifelse_same_branches", "canonicalize", "ifelse", "ifelse", ifelse_same_branches},
    {"switch_const_cond", "canonicalize", NULL, "switch", switch_const_cond},
    {"mul_self_to_sqr", "canonicalize", NULL, "mul", mul_self_to_sqr},
    {"mul_div_cancel", "canonicalize", NULL, "true_div", mul_div_cancel},
    {"mul_quotient_cancel", "canonicalize", NULL, "mul", mul_quotient_cancel},
    /* The gradient rules of stabilize, here too: nodes come in order, so
     * they see the chain rule's products before dimshuffle_lift spreads
     * the broadcast of a reduction's gradient over their operands. Tagged
     * stabilize, so that --exclude stabilize turns them off. */
    {"softmax_crossentropy_grad", "canonicalize", "stabilize softmax_crossentropy", "mul", softmax_xent_grad},
    {"softmax_grad_quotient", "canonicalize", "stabilize", "mul", softmax_grad_quotient},
    {"sigmoid_times_exp", "canonicalize", "stabilize sigmoid", "mul", sigmoid_times_exp},
    {"softmax_times_exp", "canonicalize", "stabilize", "mul", softmax_times_exp},
    {"written_softmax_grad", "canonicalize", "stabilize", "mul", written_softmax_grad},
    {"exp_log", "canonicalize", NULL, "exp", exp_log},
    {"log_exp", "canonicalize", NULL, "log", log_exp},
    {"neg_neg", "canonicalize", NULL, "neg", neg_neg},
    {"sub_self", "canonicalize", NULL, "sub", sub_self},
    {"flatten_add_mul", "canonicalize", NULL, "add mul", flatten},
    {"collect_constants", "canonicalize", NULL, "add mul", collect_constants},
    {"dimshuffle_merge", "canonicalize", "dimshuffle", "dimshuffle transpose", dimshuffle_merge},
    {"dimshuffle_lift", "canonicalize", "dimshuffle", "dimshuffle transpose", dimshuffle_lift},
    {"reshape_useless", "canonicalize", NULL, "reshape flatten", reshape_useless},
    {"cast_useless", "canonicalize", NULL, "cast", cast_useless},
    {"identity_useless", "canonicalize", NULL, "identity", identity_useless},
    {"sum_to_useless", "canonicalize", NULL, "sum_to", sum_to_useless},
    {"shape_static", "canonicalize", "constant_folding", "shape shape_i", shape_static},
    {"argmax_pushdown", "canonicalize", NULL, "argmax argmin", argmax_pushdown},
    {"fill_scalar", "canonicalize", "fill", "ones_like zeros_like", fill_scalar},
    {"fill_sink", "canonicalize", "fill", "mul true_div add sub", fill_sink},
    {"add_zeros_like", "canonicalize", "fill", "add", add_zeros_like},
    {"log1p", "stabilize", NULL, "log", log1p_rule},
    {"log1p_exp_to_softplus", "stabilize", NULL, "log1p", log1p_exp},
    {"expm1", "stabilize", NULL, "sub", expm1_rule},
    {"sigmoid_1m", "stabilize", "sigmoid", "sub", sigmoid_1m},
    {"log_sigmoid", "stabilize", NULL, "log", log_sigmoid},
    {"softmax_simplify", "stabilize", NULL, "true_div", softmax_simplify},
    {"log_softmax", "stabilize", NULL, "log", log_softmax_rule},
    {"logsumexp", "stabilize", NULL, "log", logsumexp_rule},
    {"logaddexp", "stabilize", "logsumexp", "log", logaddexp_rule},
    {"softmax_crossentropy", "stabilize", NULL, "categorical_crossentropy", softmax_xent},
    {"sigmoid_binary_crossentropy", "stabilize", "sigmoid", "binary_crossentropy", sigmoid_binary_xent},
    {"softmax_crossentropy_grad", "stabilize", "softmax_crossentropy", "mul", softmax_xent_grad},
    {"softmax_grad_quotient", "stabilize", NULL, "mul", softmax_grad_quotient},
    /* again, for the copies that stabilize made (sigmoid_1m) */
    {"mul_quotient_cancel", "stabilize", NULL, "mul", mul_quotient_cancel},
    {"mul_sum_quotient", "stabilize", NULL, "mul", mul_sum_quotient},
    {"sigmoid_simplify", "stabilize", "sigmoid", "true_div reciprocal", sigmoid_simplify},
    {"sigmoid_times_exp", "stabilize", "sigmoid", "mul", sigmoid_times_exp},
    {"softmax_times_exp", "stabilize", NULL, "mul", softmax_times_exp},
    {"written_softmax_grad", "stabilize", NULL, "mul", written_softmax_grad},
    {"switch_merge", "stabilize", NULL, "switch", switch_merge},
    {"switch_sink", "stabilize", NULL, "mul true_div", switch_sink},
    /* Constants that stabilize and specialize make (a negated step size)
     * fold too. */
    {"constant_folding", "stabilize", "constant_folding", NULL, constant_folding},
    {"constant_folding", "specialize", "constant_folding", NULL, constant_folding},
    {"pow_specialize", "specialize", NULL, "pow", pow_specialize},
    {"matmul_batch_sum", "specialize", "gemm", "sum_to", matmul_batch_sum},
    {"blas_update", "specialize", "gemm", "add sub", blas_update},
    {"gemm_fold", "specialize", "gemm", "add sub", gemm_fold},
    {"sparse_update", "specialize", NULL, "add sub", sparse_update},
};
const int tg_rw_nrules = (int)(sizeof tg_rw_rules / sizeof tg_rw_rules[0]);
