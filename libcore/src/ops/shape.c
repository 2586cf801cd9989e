/* The shape family (FORMAT.md s7, "Shape and indexing"): shape, shape_i,
 * reshape, flatten, dimshuffle, transpose, squeeze, expand_dims. Every one
 * but shape and shape_i returns a view of its input when the layout allows
 * it (reshape and flatten copy only when no strides can express the
 * result, as NumPy); the indexing ops live in subtensor.c. */
#include <stdio.h>
#include <string.h>

#include "grad/grad.h"
#include "ops/shape.h"

/* ---- helpers shared with subtensor.c ---- */

int tg_shape_store_view(tg_array **out, const tg_array *a, int ndim,
                        const int64_t *shape, const int64_t *strides,
                        char *data, tg_ctx *ctx) {
    tg_array *o = *out;
    if (o && o != a &&
        atomic_load_explicit(&o->refcount, memory_order_relaxed) == 1) {
        if (o->buf != a->buf) {
            atomic_fetch_add_explicit(&a->buf->refcount, 1,
                                      memory_order_relaxed);
            tg_buffer_unref(o->buf);
            o->buf = a->buf;
        }
        o->dtype = a->dtype;
        o->ndim = ndim;
        for (int i = 0; i < ndim; i++) {
            o->shape[i] = shape[i];
            o->strides[i] = strides[i];
        }
        o->data = data;
        return TG_OK;
    }
    tg_array *v = tg_array_view_raw(a, a->dtype, ndim, shape, strides, data);
    if (!v) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    tg_array_free(o);
    *out = v;
    return TG_OK;
}

bool tg_shape_attr_get(const tg_node *n, const char *key, json_object **v) {
    *v = NULL;
    return n->attrs && json_object_object_get_ex(n->attrs, key, v);
}

int tg_shape_attr_put(tg_node *n, const char *key, json_object *value,
                      tg_ctx *ctx) {
    if (!n->attrs && !(n->attrs = json_object_new_object())) {
        json_object_put(value);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    if (json_object_object_add(n->attrs, key, value) != 0) {
        json_object_put(value);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    return TG_OK;
}

void tg_shape_str(int ndim, const int64_t *shape, char *buf, size_t size) {
    size_t len = 0;
    int w = snprintf(buf, size, "(");
    len = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < ndim && len < size; i++) {
        w = snprintf(buf + len, size - len, i ? ",%lld" : "%lld",
                     (long long)shape[i]);
        if (w > 0) len += (size_t)w;
    }
    if (len < size)
        snprintf(buf + len, size - len, ndim == 1 ? ",)" : ")");
}

void tg_shape_cost_view(const tg_node *n, tg_array *const *in,
                        tg_array *const *out, double *flops, double *bytes) {
    TG_UNUSED(n);
    TG_UNUSED(in);
    TG_UNUSED(out);
    *flops = 0;
    *bytes = 0;
}

static const char *type_s(const tg_var *v, char *buf, size_t size) {
    tg_type_str(&v->type, buf, size);
    return buf;
}

/* The stride a new length-1 axis at position k gets: the one a C-contiguous
 * layout would give it, so that inserting it keeps contiguous data
 * recognisably contiguous. strides[k+1..] must be set. */
static int64_t new_axis_stride(const tg_array *a, int ndim,
                               const int64_t *shape, const int64_t *strides,
                               int k) {
    if (k + 1 < ndim) return strides[k + 1] * (shape[k + 1] ? shape[k + 1] : 1);
    return (int64_t)tg_dtype_size(a->dtype);
}

/* Strides that give a's data the new shape without copying, or false when
 * none exist (NumPy's _attempt_nocopy_reshape, C order). a is not empty and
 * nshape has the same size. */
static bool reshape_strides(const tg_array *a, int nnd, const int64_t *nshape,
                            int64_t *nstr) {
    int64_t odims[TG_MAX_NDIM], ostr[TG_MAX_NDIM];
    int ond = 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != 1) {
            odims[ond] = a->shape[i];
            ostr[ond++] = a->strides[i];
        }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nnd && oi < ond) {
        int64_t np_ = nshape[ni], op_ = odims[oi];
        while (np_ != op_) {
            if (np_ < op_) {
                if (nj >= nnd) return false;
                np_ *= nshape[nj++];
            } else {
                if (oj >= ond) return false;
                op_ *= odims[oj++];
            }
        }
        for (int ok = oi; ok < oj - 1; ok++)
            if (ostr[ok] != odims[ok + 1] * ostr[ok + 1]) return false;
        nstr[nj - 1] = ostr[oj - 1];
        for (int nk = nj - 1; nk > ni; nk--)
            nstr[nk - 1] = nstr[nk] * nshape[nk];
        ni = nj++;
        oi = oj++;
    }
    int64_t last = ni >= 1 ? nstr[ni - 1] : (int64_t)tg_dtype_size(a->dtype);
    for (int nk = ni; nk < nnd; nk++) nstr[nk] = last;
    return true;
}

/* Give a the shape nshape (fully resolved, same size): a view when strides
 * can express it, else a C-contiguous copy in *out (reused between calls
 * when nobody else holds it). */
static int reshape_into(const tg_array *a, int nnd, const int64_t *nshape,
                        tg_array **out, tg_ctx *ctx) {
    int64_t nstr[TG_MAX_NDIM];
    int64_t size = tg_array_size_inline(a);
    if (size > 0 && reshape_strides(a, nnd, nshape, nstr))
        return tg_shape_store_view(out, a, nnd, nshape, nstr, a->data, ctx);
    int rc = tg_array_prepare(out, a->dtype, nnd, nshape, ctx);
    if (rc || size == 0) return rc;
    /* Copy through a view of the output with a's shape: the same bytes in
     * C order. */
    int64_t cs[TG_MAX_NDIM];
    tg_strides_contiguous(a->dtype, a->ndim, a->shape, cs);
    tg_array *dst = tg_array_view_raw(*out, a->dtype, a->ndim, a->shape, cs,
                                      (*out)->data);
    if (!dst) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    rc = tg_array_assign(dst, a, ctx);
    tg_array_free(dst);
    return rc;
}

/* A copy costs a read and a write of every byte; a view nothing. */
static void cost_maybe_copy(const tg_node *n, tg_array *const *in,
                            tg_array *const *out, double *flops,
                            double *bytes) {
    TG_UNUSED(n);
    *flops = 0;
    *bytes = 0;
    if (in[0] && out[0] && in[0]->buf != out[0]->buf)
        *bytes = 2.0 * (double)tg_array_size_inline(out[0]) *
                 (double)tg_dtype_size(out[0]->dtype);
}

/* ---- shape, shape_i ---- */

static int shape_infer(tg_node *n, tg_ctx *ctx) {
    TG_UNUSED(ctx);
    int64_t len = n->inputs[0]->type.ndim;
    tg_set_out_type(n, 0, TG_INT64, 1, &len);
    return TG_OK;
}

static int shape_run(tg_node *n, tg_array *const *in, tg_array **out,
                     tg_ctx *ctx) {
    TG_UNUSED(n);
    const tg_array *x = in[0];
    int64_t len = x->ndim;
    int rc = tg_array_prepare(out, TG_INT64, 1, &len, ctx);
    if (rc) return rc;
    int64_t *d = (int64_t *)(void *)out[0]->data;
    for (int i = 0; i < x->ndim; i++) d[i] = x->shape[i];
    return TG_OK;
}

static void cost_small(const tg_node *n, tg_array *const *in,
                       tg_array *const *out, double *flops, double *bytes) {
    TG_UNUSED(n);
    TG_UNUSED(in);
    *flops = 0;
    *bytes = out[0] ? (double)tg_array_size_inline(out[0]) * 8.0 : 0;
}

static const char *const keys_i[] = {"i", NULL};

static int shape_i_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_int(n, "i", false, 0, &n->a.i, ctx);
}

static int shape_i_infer(tg_node *n, tg_ctx *ctx) {
    int nd = n->inputs[0]->type.ndim;
    if (n->a.i < -nd || n->a.i >= nd)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.i: axis %lld is out of range for an input of "
                         "%d dimensions",
                         (long long)n->a.i, nd);
    tg_set_out_type(n, 0, TG_INT64, 0, NULL);
    return TG_OK;
}

static int shape_i_run(tg_node *n, tg_array *const *in, tg_array **out,
                       tg_ctx *ctx) {
    const tg_array *x = in[0];
    int64_t i = n->a.i < 0 ? n->a.i + x->ndim : n->a.i;
    int rc = tg_array_prepare(out, TG_INT64, 0, NULL, ctx);
    if (rc) return rc;
    *(int64_t *)(void *)out[0]->data = x->shape[i];
    return TG_OK;
}

const tg_op tg_op_shape = {
    .name = "shape", .nin_min = 1, .nin_max = 1, .nout = 1,
    .flags = TG_OPF_NONDIFF, .infer = shape_infer, .run = shape_run,
    .cost = cost_small, .view_of = -1};

const tg_op tg_op_shape_i = {
    .name = "shape_i", .nin_min = 1, .nin_max = 1, .nout = 1,
    .flags = TG_OPF_NONDIFF, .attr_keys = keys_i,
    .parse_attrs = shape_i_parse, .infer = shape_i_infer,
    .run = shape_i_run, .cost = cost_small, .view_of = -1};

/* ---- reshape ---- */

static int reshape_mismatch(tg_ctx *ctx, int status, const char *who,
                            int64_t size, int nnd, const int64_t *req) {
    char s[200];
    tg_shape_str(nnd, req, s, sizeof s);
    /* NumPy's wording, but with the requested shape as given. */
    return tg_errorf(ctx, status,
                     "%scannot reshape array of size %lld into shape %s", who,
                     (long long)size, s);
}

/* Check the requested shape req (entries as given) against size (-1:
 * unknown) and resolve the -1 entry into res (-1 stays when size is
 * unknown). */
static int reshape_resolve(int nnd, const int64_t *req, int64_t size,
                           int64_t *res, int status, const char *who,
                           tg_ctx *ctx) {
    int unknown = -1;
    int64_t prod = 1;
    bool overflow = false;
    for (int i = 0; i < nnd; i++) {
        res[i] = req[i];
        if (req[i] == -1) {
            if (unknown >= 0)
                return tg_errorf(ctx, status,
                                 "%scan only specify one unknown dimension",
                                 who);
            unknown = i;
        } else if (req[i] < 0) {
            return tg_errorf(ctx, status,
                             "%sshape entry %d is %lld: only -1 (once) may be "
                             "negative",
                             who, i, (long long)req[i]);
        } else if (!overflow && tg_mul_overflow_i64(prod, req[i], &prod)) {
            overflow = true;
        }
    }
    if (size < 0) return TG_OK;
    if (overflow) return reshape_mismatch(ctx, status, who, size, nnd, req);
    if (unknown >= 0) {
        if (prod == 0 || size % prod != 0)
            return reshape_mismatch(ctx, status, who, size, nnd, req);
        res[unknown] = size / prod;
    } else if (prod != size) {
        return reshape_mismatch(ctx, status, who, size, nnd, req);
    }
    return TG_OK;
}

/* Product of the static lengths, -1 when one is unknown. */
static int64_t static_size(const tg_type *t) {
    int64_t s = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) return -1;
        if (tg_mul_overflow_i64(s, t->shape[i], &s)) return -1;
    }
    return s;
}

static int reshape_infer(tg_node *n, tg_ctx *ctx) {
    char buf[160];
    const tg_var *x = n->inputs[0], *s = n->inputs[1];
    if (!tg_dtype_is_int(s->type.dtype) || s->type.ndim != 1)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': expected an integer vector, got %s",
                         s->id, type_s(s, buf, sizeof buf));
    int64_t nnd = s->type.shape[0];
    if (nnd < 0)
        return tg_errorf(ctx, TG_ELOAD,
                         "inputs[1] '%s': the length of the new shape must be "
                         "known when the graph is loaded, got %s",
                         s->id, type_s(s, buf, sizeof buf));
    if (nnd > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD,
                         "inputs[1] '%s': %lld dimensions, at most %d are "
                         "supported",
                         s->id, (long long)nnd, TG_MAX_NDIM);
    int64_t shape[TG_MAX_NDIM];
    for (int i = 0; i < nnd; i++) shape[i] = -1;
    const tg_array *c = tg_const_input(n, 1);
    if (c) {
        int64_t req[TG_MAX_NDIM];
        for (int i = 0; i < nnd; i++) {
            unsigned long long u;
            if (tg_shape_len_too_large(c->dtype, c->data + i * c->strides[0], &u))
                return tg_errorf(ctx, TG_ESHAPE,
                                 "inputs[1] '%s': shape entry %d is %llu: too "
                                 "large (more than 2^63 - 1)",
                                 s->id, i, u);
            req[i] = tg_load_len(c->dtype, c->data + i * c->strides[0]);
        }
        char who[200];
        snprintf(who, sizeof who, "inputs[1] '%s': ", s->id);
        int rc = reshape_resolve((int)nnd, req, static_size(&x->type), shape,
                                 TG_ESHAPE, who, ctx);
        if (rc) return rc;
    } else if (s->owner && !strcmp(s->owner->op->name, "shape") && s->owner->inputs[0]->type.ndim == nnd) {
        /* reshape(x, shape(z)), as gradients write it: z's lengths,
         * where they are known */
        for (int i = 0; i < nnd; i++) shape[i] = s->owner->inputs[0]->type.shape[i];
    }
    tg_set_out_type(n, 0, x->type.dtype, (int)nnd, shape);
    return TG_OK;
}

static int reshape_run(tg_node *n, tg_array *const *in, tg_array **out,
                       tg_ctx *ctx) {
    const tg_array *x = in[0], *s = in[1];
    int nnd = n->outputs[0]->type.ndim;
    if (s->ndim != 1 || s->shape[0] != nnd)
        return tg_errorf(ctx, TG_ESHAPE,
                         "the new shape has %lld entries, expected %d",
                         (long long)(s->ndim == 1 ? s->shape[0] : -1), nnd);
    int64_t req[TG_MAX_NDIM], res[TG_MAX_NDIM];
    for (int i = 0; i < nnd; i++) {
        unsigned long long u;
        if (tg_shape_len_too_large(s->dtype, s->data + i * s->strides[0], &u))
            return tg_errorf(ctx, TG_ESHAPE,
                             "shape entry %d is %llu: too large (more than "
                             "2^63 - 1)",
                             i, u);
        req[i] = tg_load_len(s->dtype, s->data + i * s->strides[0]);
    }
    int rc = reshape_resolve(nnd, req, tg_array_size_inline(x), res,
                             TG_ESHAPE, "", ctx);
    if (rc) return rc;
    return reshape_into(x, nnd, res, out, ctx);
}

const tg_op tg_op_reshape = {
    .name = "reshape", .nin_min = 2, .nin_max = 2, .nout = 1,
    .infer = reshape_infer, .run = reshape_run, .cost = cost_maybe_copy,
    .view_of = 0, .grad = tg_grad_shape};

/* ---- flatten ---- */

static const char *const keys_ndim[] = {"ndim", NULL};

static int flatten_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_int(n, "ndim", true, 1, &n->a.i, ctx);
}

static int flatten_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[0]->type;
    int64_t nd = n->a.i;
    if (nd < 1 || (nd > 1 && nd > t->ndim))
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.ndim: %lld is out of range for an input of %d "
                         "dimensions (expected 1 to %d)",
                         (long long)nd, t->ndim, t->ndim > 1 ? t->ndim : 1);
    int64_t shape[TG_MAX_NDIM];
    for (int i = 0; i < nd - 1; i++) shape[i] = t->shape[i];
    int64_t last = 1;
    for (int i = (int)nd - 1; i < t->ndim; i++) {
        if (t->shape[i] < 0 || tg_mul_overflow_i64(last, t->shape[i], &last)) {
            last = -1;
            break;
        }
    }
    /* An axis of static length 0 makes the product 0 whatever the others. */
    for (int i = (int)nd - 1; i < t->ndim; i++)
        if (t->shape[i] == 0) last = 0;
    shape[nd - 1] = last;
    tg_set_out_type(n, 0, t->dtype, (int)nd, shape);
    return TG_OK;
}

static int flatten_run(tg_node *n, tg_array *const *in, tg_array **out,
                       tg_ctx *ctx) {
    const tg_array *x = in[0];
    int nd = (int)n->a.i;
    int64_t shape[TG_MAX_NDIM];
    for (int i = 0; i < nd - 1; i++) shape[i] = x->shape[i];
    int64_t last = 1;
    for (int i = nd - 1; i < x->ndim; i++) last *= x->shape[i];
    shape[nd - 1] = last;
    return reshape_into(x, nd, shape, out, ctx);
}

const tg_op tg_op_flatten = {
    .name = "flatten", .nin_min = 1, .nin_max = 1, .nout = 1,
    .attr_keys = keys_ndim, .parse_attrs = flatten_parse,
    .infer = flatten_infer, .run = flatten_run, .cost = cost_maybe_copy,
    .view_of = 0, .grad = tg_grad_shape};

/* ---- dimshuffle ---- */

static const char *const keys_order[] = {"order", NULL};

static int dimshuffle_parse(tg_node *n, tg_ctx *ctx) {
    json_object *v;
    if (!tg_shape_attr_get(n, "order", &v))
        return tg_errorf(ctx, TG_ELOAD, "attrs.order: required");
    if (!json_object_is_type(v, json_type_array))
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.order: expected a list of input axes and \"x\"");
    size_t len = json_object_array_length(v);
    if (len > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.order: %zu dimensions, at most %d are supported",
                         len, TG_MAX_NDIM);
    for (size_t k = 0; k < len; k++) {
        json_object *e = json_object_array_get_idx(v, k);
        if (json_object_is_type(e, json_type_string) &&
            strcmp(json_object_get_string(e), "x") == 0) {
            n->a.order[k] = -1;
            continue;
        }
        if (!json_object_is_type(e, json_type_int))
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.order[%zu]: expected an input axis (a "
                             "non-negative integer) or \"x\"",
                             k);
        int64_t ax = json_object_get_int64(e);
        if (ax < 0 || ax >= TG_MAX_NDIM)
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.order[%zu]: axis %s is out of range (input "
                             "axes are counted from 0, without negatives)",
                             k, tg_json_text(e));
        for (size_t j = 0; j < k; j++)
            if (n->a.order[j] == ax)
                return tg_errorf(ctx, TG_ELOAD,
                                 "attrs.order[%zu]: axis %lld is repeated",
                                 k, (long long)ax);
        n->a.order[k] = (int)ax;
    }
    n->a.norder = (int)len;
    return TG_OK;
}

static int dimshuffle_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[0]->type;
    bool kept[TG_MAX_NDIM] = {false};
    int64_t shape[TG_MAX_NDIM];
    for (int k = 0; k < n->a.norder; k++) {
        int o = n->a.order[k];
        if (o < 0) {
            shape[k] = 1;
            continue;
        }
        if (o >= t->ndim)
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.order[%d]: axis %d is out of range for an "
                             "input of %d dimensions",
                             k, o, t->ndim);
        kept[o] = true;
        shape[k] = t->shape[o];
    }
    for (int i = 0; i < t->ndim; i++)
        if (!kept[i] && t->shape[i] >= 0 && t->shape[i] != 1) {
            char buf[160];
            tg_type_str(t, buf, sizeof buf);
            return tg_errorf(ctx, TG_ESHAPE,
                             "attrs.order: drops axis %d of inputs[0] '%s' (%s), "
                             "whose length is not 1",
                             i, n->inputs[0]->id, buf);
        }
    tg_set_out_type(n, 0, t->dtype, n->a.norder, shape);
    return TG_OK;
}

static int dimshuffle_run(tg_node *n, tg_array *const *in, tg_array **out,
                          tg_ctx *ctx) {
    const tg_array *x = in[0];
    int nd = n->a.norder;
    bool kept[TG_MAX_NDIM] = {false};
    int64_t shape[TG_MAX_NDIM], strides[TG_MAX_NDIM];
    for (int k = 0; k < nd; k++)
        if (n->a.order[k] >= 0) kept[n->a.order[k]] = true;
    for (int i = 0; i < x->ndim; i++)
        if (!kept[i] && x->shape[i] != 1)
            return tg_errorf(ctx, TG_ESHAPE,
                             "dimshuffle drops axis %d, whose length is %lld, "
                             "not 1",
                             i, (long long)x->shape[i]);
    for (int k = nd - 1; k >= 0; k--) {
        int o = n->a.order[k];
        if (o >= 0) {
            shape[k] = x->shape[o];
            strides[k] = x->strides[o];
        } else {
            shape[k] = 1;
            strides[k] = new_axis_stride(x, nd, shape, strides, k);
        }
    }
    return tg_shape_store_view(out, x, nd, shape, strides, x->data, ctx);
}

const tg_op tg_op_dimshuffle = {
    .name = "dimshuffle", .nin_min = 1, .nin_max = 1, .nout = 1,
    .attr_keys = keys_order, .parse_attrs = dimshuffle_parse,
    .infer = dimshuffle_infer, .run = dimshuffle_run,
    .cost = tg_shape_cost_view, .view_of = 0, .grad = tg_grad_shape};

/* ---- transpose ---- */

static const char *const keys_axes[] = {"axes", NULL};

static int transpose_parse(tg_node *n, tg_ctx *ctx) {
    json_object *v;
    n->a.axis_null = true;
    n->a.naxes = 0;
    if (!tg_shape_attr_get(n, "axes", &v))
        return tg_shape_attr_put(n, "axes", NULL, ctx);
    if (!v) return TG_OK;
    if (!json_object_is_type(v, json_type_array))
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.axes: expected null or a list of integers");
    size_t len = json_object_array_length(v);
    if (len > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.axes: %zu axes, at most %d are supported", len,
                         TG_MAX_NDIM);
    for (size_t k = 0; k < len; k++) {
        json_object *e = json_object_array_get_idx(v, k);
        if (!json_object_is_type(e, json_type_int))
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.axes[%zu]: expected an integer", k);
        int64_t ax = json_object_get_int64(e);
        if (ax < -TG_MAX_NDIM || ax >= TG_MAX_NDIM)
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.axes[%zu]: axis %s is out of range", k,
                             tg_json_text(e));
        n->a.axes[k] = (int)ax;
    }
    n->a.axis_null = false;
    n->a.naxes = (int)len;
    return TG_OK;
}

/* The permutation: perm[k] is the input axis of output axis k. */
static void transpose_perm(const tg_node *n, int nd, int *perm) {
    for (int k = 0; k < nd; k++)
        perm[k] = n->a.axis_null ? nd - 1 - k
                                 : (n->a.axes[k] < 0 ? n->a.axes[k] + nd
                                                     : n->a.axes[k]);
}

static int transpose_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[0]->type;
    int nd = t->ndim, perm[TG_MAX_NDIM];
    if (!n->a.axis_null) {
        if (n->a.naxes != nd)
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.axes: %d axes given for an input of %d "
                             "dimensions",
                             n->a.naxes, nd);
        bool seen[TG_MAX_NDIM] = {false};
        for (int k = 0; k < nd; k++) {
            int ax = n->a.axes[k] < 0 ? n->a.axes[k] + nd : n->a.axes[k];
            if (ax < 0 || ax >= nd)
                return tg_errorf(ctx, TG_ELOAD,
                                 "attrs.axes[%d]: axis %d is out of range for "
                                 "an input of %d dimensions",
                                 k, n->a.axes[k], nd);
            if (seen[ax])
                return tg_errorf(ctx, TG_ELOAD,
                                 "attrs.axes[%d]: axis %d is repeated", k,
                                 n->a.axes[k]);
            seen[ax] = true;
        }
    }
    transpose_perm(n, nd, perm);
    int64_t shape[TG_MAX_NDIM];
    for (int k = 0; k < nd; k++) shape[k] = t->shape[perm[k]];
    tg_set_out_type(n, 0, t->dtype, nd, shape);
    return TG_OK;
}

static int transpose_run(tg_node *n, tg_array *const *in, tg_array **out,
                         tg_ctx *ctx) {
    const tg_array *x = in[0];
    int perm[TG_MAX_NDIM];
    int64_t shape[TG_MAX_NDIM], strides[TG_MAX_NDIM];
    transpose_perm(n, x->ndim, perm);
    for (int k = 0; k < x->ndim; k++) {
        shape[k] = x->shape[perm[k]];
        strides[k] = x->strides[perm[k]];
    }
    return tg_shape_store_view(out, x, x->ndim, shape, strides, x->data, ctx);
}

const tg_op tg_op_transpose = {
    .name = "transpose", .nin_min = 1, .nin_max = 1, .nout = 1,
    .attr_keys = keys_axes, .parse_attrs = transpose_parse,
    .infer = transpose_infer, .run = transpose_run,
    .cost = tg_shape_cost_view, .view_of = 0, .grad = tg_grad_shape};

/* ---- squeeze ---- */

static const char *const keys_axis[] = {"axis", NULL};

static int squeeze_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_axis(n, "axis", true, true, true, ctx);
}

static int squeeze_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[0]->type;
    if (n->a.axis_null) {
        n->a.axis_mask = 0;
        for (int i = 0; i < t->ndim; i++)
            if (t->shape[i] == 1) n->a.axis_mask |= 1u << i;
    } else {
        int rc = tg_axes_normalize(n, t->ndim, ctx);
        if (rc) return rc;
        for (int i = 0; i < t->ndim; i++)
            if ((n->a.axis_mask >> i & 1) && t->shape[i] >= 0 &&
                t->shape[i] != 1)
                return tg_errorf(ctx, TG_ESHAPE,
                                 "attrs.axis: cannot select an axis to squeeze "
                                 "out which has size not equal to one (axis %d "
                                 "has length %lld)",
                                 i, (long long)t->shape[i]);
    }
    int64_t shape[TG_MAX_NDIM];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++)
        if (!(n->a.axis_mask >> i & 1)) shape[nd++] = t->shape[i];
    tg_set_out_type(n, 0, t->dtype, nd, shape);
    return TG_OK;
}

static int squeeze_run(tg_node *n, tg_array *const *in, tg_array **out,
                       tg_ctx *ctx) {
    const tg_array *x = in[0];
    int64_t shape[TG_MAX_NDIM], strides[TG_MAX_NDIM];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (!(n->a.axis_mask >> i & 1)) {
            shape[nd] = x->shape[i];
            strides[nd++] = x->strides[i];
        } else if (x->shape[i] != 1) {
            return tg_errorf(ctx, TG_ESHAPE,
                             "cannot select an axis to squeeze out which has "
                             "size not equal to one (axis %d has length %lld)",
                             i, (long long)x->shape[i]);
        }
    }
    return tg_shape_store_view(out, x, nd, shape, strides, x->data, ctx);
}

const tg_op tg_op_squeeze = {
    .name = "squeeze", .nin_min = 1, .nin_max = 1, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = squeeze_parse,
    .infer = squeeze_infer, .run = squeeze_run, .cost = tg_shape_cost_view,
    .view_of = 0, .grad = tg_grad_shape};

/* ---- expand_dims ---- */

static int expand_dims_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_axis(n, "axis", false, true, false, ctx);
}

static int expand_dims_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[0]->type;
    int nd = t->ndim + n->a.naxes;
    if (nd > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.axis: the result would have %d dimensions, at "
                         "most %d are supported",
                         nd, TG_MAX_NDIM);
    int rc = tg_axes_normalize(n, nd, ctx);
    if (rc) return rc;
    int64_t shape[TG_MAX_NDIM];
    for (int k = 0, i = 0; k < nd; k++)
        shape[k] = (n->a.axis_mask >> k & 1) ? 1 : t->shape[i++];
    tg_set_out_type(n, 0, t->dtype, nd, shape);
    return TG_OK;
}

static int expand_dims_run(tg_node *n, tg_array *const *in, tg_array **out,
                           tg_ctx *ctx) {
    const tg_array *x = in[0];
    int nd = x->ndim + n->a.naxes;
    int64_t shape[TG_MAX_NDIM], strides[TG_MAX_NDIM];
    for (int k = nd - 1, i = x->ndim - 1; k >= 0; k--) {
        if (n->a.axis_mask >> k & 1) {
            shape[k] = 1;
            strides[k] = new_axis_stride(x, nd, shape, strides, k);
        } else {
            shape[k] = x->shape[i];
            strides[k] = x->strides[i--];
        }
    }
    return tg_shape_store_view(out, x, nd, shape, strides, x->data, ctx);
}

const tg_op tg_op_expand_dims = {
    .name = "expand_dims", .nin_min = 1, .nin_max = 1, .nout = 1,
    .attr_keys = keys_axis, .parse_attrs = expand_dims_parse,
    .infer = expand_dims_infer, .run = expand_dims_run,
    .cost = tg_shape_cost_view, .view_of = 0, .grad = tg_grad_shape};
