/* Debugging ops (FORMAT.md s7): print, assert, breakpoint.
 *
 * Each passes its inputs through unchanged (the outputs are references to
 * the input arrays, no copy) and has a side effect, so the optimizer must
 * neither merge nor fold them (TG_OPF_SIDE_EFFECT). print and breakpoint
 * write one line to standard error with a single call, so that lines from
 * several threads or processes do not interleave. Under tgdebug a
 * breakpoint is caught by the debugger's hooks before the node runs; here
 * it only logs the hit and goes on.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "grad/grad.h"

enum { SHOW_SHAPE = 1, SHOW_MIN = 2, SHOW_MAX = 4, SHOW_MEAN = 8 };

static const char *const SHOW_NAMES[] = {"shape", "min", "max", "mean", NULL};

/* Pass input `from` through as output `to`. */
static void pass(tg_array *const *in, tg_array **out, int from, int to) {
    tg_array *r = tg_array_ref(in[from]);
    tg_array_free(out[to]);
    out[to] = r;
}

/* %.6g, with NaN written "nan" whatever its sign bit. */
static void add_num(tg_str *s, const char *key, double v) {
    if (v != v)
        tg_str_addf(s, " %s=nan", key);
    else
        tg_str_addf(s, " %s=%.6g", key, v);
}

/* Append " shape=(2, 3) min=.. max=.. mean=.." for the fields in `show`. */
static void describe(tg_str *s, const tg_array *a, int show) {
    if (show & SHOW_SHAPE) {
        tg_str_addf(s, " shape=(");
        for (int d = 0; d < a->ndim; d++)
            tg_str_addf(s, "%s%lld", d ? ", " : "", (long long)a->shape[d]);
        tg_str_addf(s, a->ndim == 1 ? ",)" : ")");
    }
    int64_t n = tg_array_size_inline(a);
    if (!(show & (SHOW_MIN | SHOW_MAX | SHOW_MEAN))) return;
    if (n == 0) {
        if (show & SHOW_MIN) tg_str_addf(s, " min=n/a");
        if (show & SHOW_MAX) tg_str_addf(s, " max=n/a");
        if (show & SHOW_MEAN) tg_str_addf(s, " mean=n/a");
        return;
    }
    /* Walk the elements in C order with strides (any layout). */
    int64_t idx[TG_MAX_NDIM] = {0};
    const char *p = a->data;
    bool isf = tg_dtype_is_float(a->dtype), isu = tg_dtype_kind(a->dtype) == 'u';
    double fmin = INFINITY, fmax = -INFINITY, sum = 0;
    bool nan = false;
    int64_t imin = INT64_MAX, imax = INT64_MIN;
    uint64_t umin = UINT64_MAX, umax = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = tg_load_f64(a->dtype, p);
        sum += v;
        if (isf) {
            if (v != v) nan = true;
            if (v < fmin) fmin = v;
            if (v > fmax) fmax = v;
        } else if (isu) {
            uint64_t u = (uint64_t)tg_load_i64(a->dtype, p);
            if (u < umin) umin = u;
            if (u > umax) umax = u;
        } else {
            int64_t x = tg_load_i64(a->dtype, p);
            if (x < imin) imin = x;
            if (x > imax) imax = x;
        }
        for (int d = a->ndim - 1; d >= 0; d--) {
            p += a->strides[d];
            if (++idx[d] < a->shape[d]) break;
            p -= a->strides[d] * a->shape[d];
            idx[d] = 0;
        }
    }
    if (nan) fmin = fmax = NAN; /* as NumPy's min and max */
    if (show & SHOW_MIN) {
        if (isf)
            add_num(s, "min", fmin);
        else if (isu)
            tg_str_addf(s, " min=%llu", (unsigned long long)umin);
        else
            tg_str_addf(s, " min=%lld", (long long)imin);
    }
    if (show & SHOW_MAX) {
        if (isf)
            add_num(s, "max", fmax);
        else if (isu)
            tg_str_addf(s, " max=%llu", (unsigned long long)umax);
        else
            tg_str_addf(s, " max=%lld", (long long)imax);
    }
    if (show & SHOW_MEAN) add_num(s, "mean", sum / (double)n);
}

static int emit(tg_str *s) {
    if (s->oom || !s->s) {
        tg_str_free(s);
        return TG_ENOMEM;
    }
    fprintf(stderr, "%s\n", s->s);
    fflush(stderr);
    tg_str_free(s);
    return TG_OK;
}

/* ---- print ---- */

static const char *const PRINT_KEYS[] = {"message", "show", NULL};

static int print_attrs(tg_node *n, tg_ctx *ctx) {
    int rc = tg_attr_string(n, "message", "", &n->a.message, ctx);
    if (rc) return rc;
    json_object *v = NULL;
    if (!n->attrs || !json_object_object_get_ex(n->attrs, "show", &v)) {
        /* Canonical form: the default list written out. */
        json_object *arr = json_object_new_array();
        if (!arr) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        for (int i = 0; SHOW_NAMES[i]; i++)
            json_object_array_add(arr, json_object_new_string(SHOW_NAMES[i]));
        if (json_object_object_add(n->attrs, "show", arr)) {
            json_object_put(arr);
            return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        }
        n->a.mode = SHOW_SHAPE | SHOW_MIN | SHOW_MAX | SHOW_MEAN;
        return TG_OK;
    }
    if (!json_object_is_type(v, json_type_array))
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.show: expected a list of \"shape\", \"min\", \"max\", \"mean\"");
    n->a.mode = 0;
    for (size_t i = 0; i < json_object_array_length(v); i++) {
        json_object *e = json_object_array_get_idx(v, i);
        int bit = -1;
        if (json_object_is_type(e, json_type_string))
            for (int k = 0; SHOW_NAMES[k]; k++)
                if (!strcmp(json_object_get_string(e), SHOW_NAMES[k])) bit = k;
        if (bit < 0)
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.show[%zu]: expected \"shape\", \"min\", \"max\" or \"mean\"",
                             i);
        n->a.mode |= 1 << bit;
    }
    return TG_OK;
}

static int pass_infer(tg_node *n, tg_ctx *ctx) {
    int rc = tg_weak_resolve(n, 0, 1, &(tg_dtype){0}, ctx);
    if (rc) return rc;
    const tg_type *t = &n->inputs[0]->type;
    tg_set_out_type(n, 0, t->dtype, t->ndim, t->shape);
    return TG_OK;
}

static int print_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    tg_str s = {0};
    const char *msg = n->a.message && n->a.message[0] ? n->a.message : tg_var_label(n->inputs[0]);
    tg_str_addf(&s, "%s:", msg);
    describe(&s, in[0], n->a.mode);
    if (emit(&s)) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    pass(in, out, 0, 0);
    return TG_OK;
}

/* ---- assert ---- */

static const char *const ASSERT_KEYS[] = {"message", NULL};

static int assert_attrs(tg_node *n, tg_ctx *ctx) {
    return tg_attr_string(n, "message", "", &n->a.message, ctx);
}

static int assert_infer(tg_node *n, tg_ctx *ctx) {
    int rc = pass_infer(n, ctx);
    for (int i = 1; !rc && i < n->nin; i++) rc = tg_weak_take(n, i, TG_BOOL, ctx);
    return rc;
}

/* Every element non-zero (NaN counts as true, as in NumPy). */
static bool all_true(const tg_array *a) {
    int64_t n = tg_array_size_inline(a), idx[TG_MAX_NDIM] = {0};
    const char *p = a->data;
    size_t isz = tg_isize(a->dtype);
    bool isf = tg_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < n; i++) {
        bool nz = false;
        if (isf) {
            nz = tg_load_f64(a->dtype, p) != 0;
        } else {
            for (size_t b = 0; b < isz; b++) nz |= p[b] != 0;
        }
        if (!nz) return false;
        for (int d = a->ndim - 1; d >= 0; d--) {
            p += a->strides[d];
            if (++idx[d] < a->shape[d]) break;
            p -= a->strides[d] * a->shape[d];
            idx[d] = 0;
        }
    }
    return true;
}

static int assert_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    for (int i = 1; i < n->nin; i++)
        if (!all_true(in[i])) {
            if (n->a.message && n->a.message[0])
                return tg_errorf(ctx, TG_ERUNTIME, "assertion failed: %s", n->a.message);
            return tg_errorf(ctx, TG_ERUNTIME, "assertion failed: inputs[%d] '%s' is false", i,
                             tg_var_label(n->inputs[i]));
        }
    pass(in, out, 0, 0);
    return TG_OK;
}

/* ---- breakpoint ---- */

static int bp_attrs(tg_node *n, tg_ctx *ctx) {
    if (n->nout != n->nin - 1)
        return tg_errorf(ctx, TG_ELOAD,
                         "outputs: breakpoint has one output per monitored input (%d), got %d",
                         n->nin - 1, n->nout);
    return TG_OK;
}

static int bp_infer(tg_node *n, tg_ctx *ctx) {
    int rc = tg_weak_take(n, 0, TG_BOOL, ctx);
    if (rc) return rc;
    if (n->inputs[0]->type.ndim != 0)
        return tg_errorf(ctx, TG_ETYPE, "inputs[0] '%s': the condition must be a scalar",
                         n->inputs[0]->id);
    for (int i = 1; i < n->nin; i++) {
        if ((rc = tg_weak_resolve(n, i, 1, &(tg_dtype){0}, ctx))) return rc;
        const tg_type *t = &n->inputs[i]->type;
        tg_set_out_type(n, i - 1, t->dtype, t->ndim, t->shape);
    }
    return TG_OK;
}

static int bp_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    if (tg_load_f64(in[0]->dtype, in[0]->data) != 0) {
        tg_str s = {0};
        tg_str_addf(&s, "breakpoint %s hit:", n->outputs[0]->id);
        for (int i = 1; i < n->nin; i++) {
            tg_str_addf(&s, " %s", tg_var_label(n->inputs[i]));
            describe(&s, in[i], SHOW_SHAPE | SHOW_MIN | SHOW_MAX);
        }
        if (emit(&s)) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    for (int i = 1; i < n->nin; i++) pass(in, out, i, i - 1);
    return TG_OK;
}

static void pass_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                      double *bytes) {
    (void)out;
    double b = 0, f = 0;
    for (int i = 0; i < n->nin; i++) {
        double sz = (double)tg_array_size_inline(in[i]);
        b += sz * (double)tg_isize(in[i]->dtype);
        f += sz;
    }
    *flops = f;
    *bytes = b;
}

const tg_op tg_op_print = {.name = "print",
                           .nin_min = 1,
                           .nin_max = 1,
                           .nout = 1,
                           .flags = TG_OPF_SIDE_EFFECT,
                           .attr_keys = PRINT_KEYS,
                           .parse_attrs = print_attrs,
                           .infer = pass_infer,
                           .run = print_run,
                           .cost = pass_cost,
                           .view_of = 0, .grad = tg_grad_debug};

const tg_op tg_op_assert = {.name = "assert",
                            .nin_min = 2,
                            .nin_max = -1,
                            .nout = 1,
                            .flags = TG_OPF_SIDE_EFFECT,
                            .attr_keys = ASSERT_KEYS,
                            .parse_attrs = assert_attrs,
                            .infer = assert_infer,
                            .run = assert_run,
                            .cost = pass_cost,
                            .view_of = 0, .grad = tg_grad_debug};

/* view_of covers output 0 only: every output i is input i + 1. */
const tg_op tg_op_breakpoint = {.name = "breakpoint",
                                .nin_min = 2,
                                .nin_max = -1,
                                .nout = -1,
                                .flags = TG_OPF_SIDE_EFFECT,
                                .parse_attrs = bp_attrs,
                                .infer = bp_infer,
                                .run = bp_run,
                                .cost = pass_cost,
                                .view_of = 1, .grad = tg_grad_debug};
