/* Basic indexing (FORMAT.md s7): subtensor (a view), set_subtensor and
 * inc_subtensor (a copy of x with the selected part replaced or
 * incremented). The index attr is parsed once into n->a.index; its parts
 * may be constants or "$k", the k-th extra input (an integer scalar read at
 * run time). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"
#include "io/io.h"
#include "ops/shape.h"

static const char *const part_names[3] = {"start", "stop", "step"};

static const char *type_str_of(const tg_var *v, char *buf, size_t size) {
    tg_type_str(&v->type, buf, size);
    return buf;
}

/* What tells the three ops apart (tg_op.impl). */
typedef struct index_kind {
    int first; /* inputs before the extra (index) inputs */
    bool inc;
} index_kind;
static const index_kind kind_sub = {1, false}, kind_set = {2, false},
                        kind_inc = {2, true};

static int first_extra(const tg_node *n) {
    return ((const index_kind *)n->op->impl)->first;
}

/* ---- attrs ---- */

/* One integer of the index: a JSON integer or "$k". */
static int parse_int_part(json_object *e, const char *where, int64_t *v,
                          int8_t *dyn, tg_ctx *ctx) {
    *dyn = -1;
    *v = 0;
    if (json_object_is_type(e, json_type_int)) {
        *v = json_object_get_int64(e);
        /* 2^63..2^64-1 reads back clamped to 2^63 - 1: as a slice bound
         * that is past the end all the same, as an index the error names
         * it as written. */
        if (tg_json_int_past_int64(e) && !strstr(where, "]."))
            return tg_errorf(ctx, TG_ELOAD, "%s: index %s is out of bounds (lengths end at 2^63 - 1)",
                             where, tg_json_text(e));
        return TG_OK;
    }
    if (json_object_is_type(e, json_type_string)) {
        const char *s = json_object_get_string(e);
        size_t len = strlen(s);
        bool ok = len >= 2 && len <= 3 && s[0] == '$' && (len == 2 || s[1] != '0');
        for (size_t i = 1; ok && i < len; i++) ok = s[i] >= '0' && s[i] <= '9';
        if (ok) {
            int k = atoi(s + 1);
            if (k >= 3 * TG_MAX_NDIM)
                return tg_errorf(ctx, TG_ELOAD,
                                 "%s: \"%s\": an index has at most %d extra "
                                 "inputs",
                                 where, s, 3 * TG_MAX_NDIM);
            *dyn = (int8_t)k;
            return TG_OK;
        }
    }
    return tg_errorf(ctx, TG_ELOAD, "%s: expected an integer or \"$k\"%s",
                     where, strstr(where, "].") ? " or null" : "");
}

static json_object *part_json(const tg_index_entry *e, int p) {
    if (!e->given[p]) return NULL;
    if (e->dyn[p] >= 0) {
        char s[8];
        snprintf(s, sizeof s, "$%d", e->dyn[p]);
        return json_object_new_string(s);
    }
    return json_object_new_int64(e->v[p]);
}

/* The canonical index: integers and "$k" as they are, every slice with its
 * three keys. */
static json_object *index_json(const tg_attrs *a) {
    json_object *arr = json_object_new_array();
    if (!arr) return NULL;
    for (int k = 0; k < a->nindex; k++) {
        const tg_index_entry *e = &a->index[k];
        json_object *o;
        if (!e->is_slice) {
            o = part_json(e, 0);
        } else {
            o = json_object_new_object();
            for (int p = 0; o && p < 3; p++) {
                json_object *pv = part_json(e, p);
                if ((e->given[p] && !pv) ||
                    json_object_object_add(o, part_names[p], pv)) {
                    json_object_put(pv);
                    json_object_put(o);
                    o = NULL;
                }
            }
        }
        if (!o || json_object_array_add(arr, o)) {
            json_object_put(o);
            json_object_put(arr);
            return NULL;
        }
    }
    return arr;
}

static const char *const keys_index[] = {"index", NULL};

static int index_parse(tg_node *n, tg_ctx *ctx) {
    json_object *v;
    char where[64];
    if (!tg_shape_attr_get(n, "index", &v))
        return tg_errorf(ctx, TG_ELOAD, "attrs.index: required");
    if (!json_object_is_type(v, json_type_array))
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.index: expected a list of integers and "
                         "slices {\"start\", \"stop\", \"step\"}");
    size_t len = json_object_array_length(v);
    if (len > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.index: %zu entries, at most %d dimensions are "
                         "supported",
                         len, TG_MAX_NDIM);
    /* Out of the node: a node of any other op has no index, and keeping
     * eight entries in every node made large graphs a third bigger. */
    tg_free(n->a.index);
    n->a.nindex = 0;
    if (!(n->a.index = tg_calloc(len + 1, sizeof *n->a.index)))
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    for (size_t k = 0; k < len; k++) {
        json_object *e = json_object_array_get_idx(v, k);
        tg_index_entry *ie = &n->a.index[k];
        memset(ie, 0, sizeof *ie);
        ie->dyn[0] = ie->dyn[1] = ie->dyn[2] = -1;
        snprintf(where, sizeof where, "attrs.index[%zu]", k);
        if (!json_object_is_type(e, json_type_object)) {
            if (!json_object_is_type(e, json_type_int) &&
                !json_object_is_type(e, json_type_string))
                return tg_errorf(ctx, TG_ELOAD,
                                 "%s: expected an integer, \"$k\" or a slice "
                                 "{\"start\", \"stop\", \"step\"}",
                                 where);
            int rc = parse_int_part(e, where, &ie->v[0], &ie->dyn[0], ctx);
            if (rc) return rc;
            ie->given[0] = true;
            continue;
        }
        ie->is_slice = true;
        json_object_object_foreach(e, key, val) {
            int p = 0;
            while (p < 3 && strcmp(key, part_names[p]) != 0) p++;
            if (p == 3)
                return tg_errorf(ctx, TG_ELOAD,
                                 "%s: unknown key \"%s\" (expected start, "
                                 "stop, step)",
                                 where, key);
            if (!val) continue;
            char pw[96];
            snprintf(pw, sizeof pw, "%s.%s", where, key);
            int rc = parse_int_part(val, pw, &ie->v[p], &ie->dyn[p], ctx);
            if (rc) return rc;
            ie->given[p] = true;
            if (p == 2 && ie->dyn[2] < 0 && ie->v[2] == 0)
                return tg_errorf(ctx, TG_ELOAD, "%s: slice step cannot be zero",
                                 pw);
        }
    }
    n->a.nindex = (int)len;
    json_object *canon = index_json(&n->a);
    if (!canon) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return tg_shape_attr_put(n, "index", canon, ctx);
}

/* ---- static and run-time regions ---- */

/* The selected part of an array of shape `shape` whose element 0 is at
 * byte 0 and whose strides are `strides`: its shape, strides and byte
 * offset. */
typedef struct region {
    int ndim;
    int64_t shape[TG_MAX_NDIM];
    int64_t strides[TG_MAX_NDIM];
    int64_t offset;
} region;

/* An index, slice bound or step read from an integer scalar. A uint64
 * past INT64_MAX is INT64_MAX (as take reads it), not the negative int64
 * of its bits: out of bounds as an index, past either end as a slice
 * bound, where NumPy clamps it, and one element as a step. */
static int64_t index_load(const tg_array *a) {
    if (a->dtype == TG_UINT64) {
        uint64_t u;
        memcpy(&u, a->data, 8);
        return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    return tg_load_i64(a->dtype, a->data);
}

/* An index as the user wrote it, for an error: a (perhaps clamped) uint64
 * prints unsigned. src is the extra input it came from, or NULL. */
static const char *index_text(const tg_array *src, int64_t v, char *buf, size_t size) {
    if (src && src->dtype == TG_UINT64) {
        uint64_t u;
        memcpy(&u, src->data, 8);
        snprintf(buf, size, "%llu", (unsigned long long)u);
    } else {
        snprintf(buf, size, "%lld", (long long)v);
    }
    return buf;
}

/* Value of part p of entry e at load: true when known (a constant, or an
 * extra input that is a constant). */
static bool static_part(const tg_node *n, const tg_index_entry *e, int p,
                        int64_t *v) {
    if (!e->given[p]) return false;
    if (e->dyn[p] < 0) {
        *v = e->v[p];
        return true;
    }
    const tg_array *c = tg_const_input(n, first_extra(n) + e->dyn[p]);
    if (!c) return false;
    *v = index_load(c);
    return true;
}

/* A slice's start, stop or step as tg_slice_normalize takes it: a given
 * INT64_MIN is INT64_MIN + 1, since INT64_MIN there means "not given"
 * (as start or stop both lie below -len and clamp the same; as a step
 * both select one element), and `none` when not given. */
static int64_t slice_part(bool given, int64_t v, int64_t none) {
    return !given ? none : v == INT64_MIN ? INT64_MIN + 1 : v;
}

/* Check the index against the inputs' types and compute the region's
 * static type (dtype x's). */
static int index_infer(tg_node *n, tg_type *rt, tg_ctx *ctx) {
    char buf[160];
    const tg_type *t = &n->inputs[0]->type;
    int first = first_extra(n), nextra = n->nin - first;
    if (n->a.nindex > t->ndim)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.index: too many indices for array: array is "
                         "%d-dimensional, but %d were indexed",
                         t->ndim, n->a.nindex);
    bool used[3 * TG_MAX_NDIM] = {false};
    int maxk = -1;
    for (int k = 0; k < n->a.nindex; k++)
        for (int p = 0; p < 3; p++) {
            int d = n->a.index[k].dyn[p];
            if (d < 0) continue;
            used[d] = true;
            if (d > maxk) maxk = d;
        }
    if (nextra != maxk + 1)
        return tg_errorf(ctx, TG_ELOAD,
                         "attrs.index refers to %d extra input(s), but the "
                         "node has %d after its %s",
                         maxk + 1, nextra < 0 ? 0 : nextra,
                         first == 1 ? "first input" : "first two inputs");
    for (int d = 0; d < nextra; d++) {
        int i = first + d;
        tg_var *v = n->inputs[i];
        if (!used[d])
            return tg_errorf(ctx, TG_ELOAD,
                             "inputs[%d] '%s': not used by attrs.index (no "
                             "\"$%d\")",
                             i, v->id, d);
        if (!tg_dtype_is_int(v->type.dtype) || v->type.ndim != 0)
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s': expected an integer scalar, got %s",
                             i, v->id, type_str_of(v, buf, sizeof buf));
        if (v->weak) {
            int rc = tg_weak_take(n, i, TG_INT64, ctx);
            if (rc) return rc;
        }
    }
    rt->dtype = t->dtype;
    rt->ndim = 0;
    for (int k = 0; k < n->a.nindex; k++) {
        const tg_index_entry *e = &n->a.index[k];
        int64_t len = t->shape[k], v[3];
        bool known[3];
        for (int p = 0; p < 3; p++) known[p] = static_part(n, e, p, &v[p]);
        if (!e->is_slice) {
            if (known[0] && len >= 0 && (v[0] >= len || v[0] < -len)) {
                const tg_array *c = e->dyn[0] < 0 ? NULL : tg_const_input(n, first + e->dyn[0]);
                char txt[24];
                return tg_errorf(ctx, TG_ELOAD,
                                 "attrs.index[%d]: index %s is out of bounds "
                                 "for axis %d with size %lld",
                                 k, index_text(c, v[0], txt, sizeof txt), k, (long long)len);
            }
            continue;
        }
        if (known[2] && v[2] == 0)
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.index[%d].step: slice step cannot be zero",
                             k);
        int64_t cnt = -1;
        bool parts_known = (known[0] || !e->given[0]) &&
                           (known[1] || !e->given[1]) &&
                           (known[2] || !e->given[2]);
        int64_t step = slice_part(e->given[2], v[2], 1);
        if (len >= 0 && parts_known) {
            int64_t start = slice_part(e->given[0], v[0], TG_SLICE_NONE);
            int64_t stop = slice_part(e->given[1], v[1], TG_SLICE_NONE);
            cnt = tg_slice_normalize(len, &start, &stop, &step);
        } else if (!e->given[0] && !e->given[1] && known[2] == e->given[2] &&
                   (step == 1 || step == -1)) {
            cnt = len; /* a whole axis, perhaps reversed */
        }
        rt->shape[rt->ndim++] = cnt;
    }
    for (int k = n->a.nindex; k < t->ndim; k++)
        rt->shape[rt->ndim++] = t->shape[k];
    return TG_OK;
}

/* The region selected in an array of shape `shape` with `strides`, with
 * the extra inputs' values (ex: the node's extra inputs). */
static int index_region(const tg_node *n, int ndim, const int64_t *shape,
                        const int64_t *strides, tg_array *const *ex,
                        region *r, tg_ctx *ctx) {
    r->ndim = 0;
    r->offset = 0;
    bool empty = false;
    for (int k = 0; k < n->a.nindex; k++) {
        const tg_index_entry *e = &n->a.index[k];
        int64_t len = shape[k], v[3];
        for (int p = 0; p < 3; p++) {
            int d = e->dyn[p];
            v[p] = d < 0 ? e->v[p] : index_load(ex[d]);
        }
        if (!e->is_slice) {
            int64_t i = v[0] < 0 ? v[0] + len : v[0];
            char txt[24];
            if (i < 0 || i >= len)
                return tg_errorf(ctx, TG_ERUNTIME,
                                 "index %s is out of bounds for axis %d with "
                                 "size %lld",
                                 index_text(e->dyn[0] < 0 ? NULL : ex[e->dyn[0]], v[0], txt, sizeof txt), k,
                                 (long long)len);
            r->offset += i * strides[k];
            continue;
        }
        int64_t start = slice_part(e->given[0], v[0], TG_SLICE_NONE);
        int64_t stop = slice_part(e->given[1], v[1], TG_SLICE_NONE);
        int64_t step = slice_part(e->given[2], v[2], 1);
        if (step == 0)
            return tg_errorf(ctx, TG_ERUNTIME, "slice step cannot be zero");
        int64_t cnt = tg_slice_normalize(len, &start, &stop, &step);
        if (cnt > 0)
            r->offset += start * strides[k];
        else
            empty = true;
        r->shape[r->ndim] = cnt;
        /* With one element or none the stride is never used: a huge step
         * times the stride would overflow. */
        r->strides[r->ndim++] = cnt > 1 ? step * strides[k] : strides[k];
    }
    for (int k = n->a.nindex; k < ndim; k++) {
        if (shape[k] == 0) empty = true;
        r->shape[r->ndim] = shape[k];
        r->strides[r->ndim++] = strides[k];
    }
    /* An empty region reads nothing: keep its data pointer at element 0,
     * inside the buffer. */
    if (empty) r->offset = 0;
    return TG_OK;
}

/* ---- subtensor ---- */

static int subtensor_infer(tg_node *n, tg_ctx *ctx) {
    tg_type rt;
    int rc = index_infer(n, &rt, ctx);
    if (rc) return rc;
    tg_set_out_type(n, 0, rt.dtype, rt.ndim, rt.shape);
    return TG_OK;
}

static int subtensor_run(tg_node *n, tg_array *const *in, tg_array **out,
                         tg_ctx *ctx) {
    const tg_array *x = in[0];
    region r;
    int rc = index_region(n, x->ndim, x->shape, x->strides, in + 1, &r, ctx);
    if (rc) return rc;
    return tg_shape_store_view(out, x, r.ndim, r.shape, r.strides,
                               x->data + r.offset, ctx);
}

const tg_op tg_op_subtensor = {
    .name = "subtensor", .nin_min = 1, .nin_max = -1, .nout = 1,
    .attr_keys = keys_index, .parse_attrs = index_parse,
    .infer = subtensor_infer, .run = subtensor_run,
    .cost = tg_shape_cost_view, .view_of = 0, .impl = &kind_sub, .grad = tg_grad_shape};

/* ---- set_subtensor, inc_subtensor ---- */

/* NumPy's can_cast(from, to, "same_kind"): bool < unsigned < signed <
 * float, any size. */
static bool same_kind(tg_dtype from, tg_dtype to) {
    static const char order[] = "buif";
    return strchr(order, tg_dtype_kind(from)) <= strchr(order, tg_dtype_kind(to));
}

static int setinc_infer(tg_node *n, tg_ctx *ctx) {
    char b1[160], b2[160];
    tg_type rt;
    int rc = index_infer(n, &rt, ctx);
    if (rc) return rc;
    const tg_var *x = n->inputs[0], *y = n->inputs[1];
    if (y->weak && (rc = tg_weak_take(n, 1, x->type.dtype, ctx))) return rc;
    if (!same_kind(y->type.dtype, x->type.dtype))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': cannot cast %s to %s (the dtype of "
                         "inputs[0] '%s') under NumPy's same_kind rule",
                         y->id, tg_dtype_name(y->type.dtype),
                         tg_dtype_name(x->type.dtype), x->id);
    /* x[i] += y is add(x[i], y) written back into x: NumPy casts the sum,
     * of the promoted dtype, to x's (int64 + uint64 is a float64 sum,
     * which same_kind does not write into an int64). */
    tg_dtype sum = tg_dtype_promote(x->type.dtype, y->type.dtype);
    if (((const index_kind *)n->op->impl)->inc && !same_kind(sum, x->type.dtype))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': cannot add %s to %s (the dtype of inputs[0] '%s'): "
                         "the sum is %s, which NumPy's same_kind rule does not cast to %s",
                         y->id, tg_dtype_name(y->type.dtype), tg_dtype_name(x->type.dtype), x->id,
                         tg_dtype_name(sum), tg_dtype_name(x->type.dtype));
    /* y broadcasts to the region; extra leading axes of y must be 1, as
     * NumPy's assignment allows. */
    const tg_type *yt = &y->type;
    for (int j = 0; j < yt->ndim; j++) {
        int k = j - (yt->ndim - rt.ndim);
        int64_t yl = yt->shape[j];
        bool ok = k < 0 ? (yl < 0 || yl == 1)
                        : (yl < 0 || yl == 1 || rt.shape[k] < 0 ||
                           yl == rt.shape[k]);
        if (!ok) {
            tg_type_str(yt, b1, sizeof b1);
            tg_type_str(&rt, b2, sizeof b2);
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[1] '%s': %s does not broadcast to the "
                             "selected region %s",
                             y->id, b1, b2);
        }
    }
    tg_set_out_type(n, 0, x->type.dtype, x->type.ndim, x->type.shape);
    return TG_OK;
}

/* Strides that read y broadcast to the region's shape, or a TG_ESHAPE
 * error in NumPy's words. */
static int broadcast_value(const tg_array *y, const region *r, int64_t *ys,
                           tg_ctx *ctx) {
    int lead = y->ndim - r->ndim;
    bool ok = true;
    for (int j = 0; j < y->ndim && ok; j++) {
        int k = j - lead;
        if (k < 0) {
            ok = y->shape[j] == 1;
        } else if (y->shape[j] == r->shape[k]) {
            ys[k] = y->strides[j];
        } else {
            ok = y->shape[j] == 1;
            ys[k] = 0;
        }
    }
    for (int k = 0; k < -lead; k++) ys[k] = 0;
    if (ok) return TG_OK;
    char s1[200], s2[200];
    tg_shape_str(y->ndim, y->shape, s1, sizeof s1);
    tg_shape_str(r->ndim, r->shape, s2, sizeof s2);
    return tg_errorf(ctx, TG_ESHAPE,
                     "could not broadcast input array from shape %s into "
                     "shape %s",
                     s1, s2);
}

/* dst += src elementwise over one run (NumPy's add: integers wrap, bool is
 * logical or, float16 computed in float32 and rounded once). */
#define INC_LOOP(name, T, EXPR)                                              \
    static void name(int64_t n, char **p, const int64_t *s, void *ud) {     \
        TG_UNUSED(ud);                                                       \
        char *d = p[0];                                                      \
        const char *y = p[1];                                                \
        for (int64_t i = 0; i < n; i++, d += s[0], y += s[1]) {             \
            T *dp = (T *)(void *)d;                                          \
            T yv = *(const T *)(const void *)y;                              \
            *dp = EXPR;                                                      \
        }                                                                    \
    }
INC_LOOP(inc_bool, uint8_t, (uint8_t)(*dp | yv))
INC_LOOP(inc_i8, uint8_t, (uint8_t)(*dp + yv))
INC_LOOP(inc_i16, uint16_t, (uint16_t)(*dp + yv))
INC_LOOP(inc_i32, uint32_t, (uint32_t)(*dp + yv))
INC_LOOP(inc_i64, uint64_t, (uint64_t)(*dp + yv))
INC_LOOP(inc_f16, uint16_t,
         tg_float_to_half(tg_half_to_float(*dp) + tg_half_to_float(yv)))
INC_LOOP(inc_f32, float, *dp + yv)
INC_LOOP(inc_f64, double, *dp + yv)
#undef INC_LOOP

static tg_inner_fn inc_fn(tg_dtype dt) {
    switch (dt) {
    case TG_BOOL: return inc_bool;
    case TG_INT8: case TG_UINT8: return inc_i8;
    case TG_INT16: case TG_UINT16: return inc_i16;
    case TG_INT32: case TG_UINT32: return inc_i32;
    case TG_INT64: case TG_UINT64: return inc_i64;
    case TG_FLOAT16: return inc_f16;
    case TG_FLOAT32: return inc_f32;
    case TG_FLOAT64: return inc_f64;
    default: return NULL;
    }
}

/* dst = src elementwise over one run, elements of 1, 2, 4 or 8 bytes. */
#define SET_LOOP(name, T)                                                     \
    static void name(int64_t n, char **p, const int64_t *s, void *ud) {     \
        TG_UNUSED(ud);                                                       \
        char *d = p[0];                                                      \
        const char *y = p[1];                                                \
        for (int64_t i = 0; i < n; i++, d += s[0], y += s[1])               \
            *(T *)(void *)d = *(const T *)(const void *)y;                   \
    }
SET_LOOP(set_1, uint8_t)
SET_LOOP(set_2, uint16_t)
SET_LOOP(set_4, uint32_t)
SET_LOOP(set_8, uint64_t)
#undef SET_LOOP

static tg_inner_fn set_fn(tg_dtype dt) {
    switch (tg_isize(dt)) {
    case 1: return set_1;
    case 2: return set_2;
    case 4: return set_4;
    case 8: return set_8;
    default: return NULL;
    }
}

/* tg_op.commit_ready for set_subtensor and inc_subtensor: the update of
 * a shared value written where it lies (a ring buffer's row set each
 * call; the SGD step of a table read as a slice, which sparse_update
 * makes inc_subtensor(E, -lr * g, [a:b])), when setinc_run can neither
 * fail nor allocate: x taken over (tg_op_take_input's conditions), the
 * index in range and y broadcasting to the region (checked here as the
 * kernel will), y of x's dtype in a buffer of its own, so that the
 * kernel copies or adds in one pass without views or casts. */
static bool setinc_commit_ready(const tg_node *n, tg_array *const *in) {
    const tg_array *x = in[0], *y = in[1];
    bool inc = ((const index_kind *)n->op->impl)->inc;
    if (!n->inplace || n->inplace[0] != 0 || x->buf->nbytes <= TG_VM_KEEP_BYTES || !tg_array_is_exclusive(x) ||
        !tg_array_is_contiguous(x) || n->outputs[0]->type.dtype != x->dtype || y->dtype != x->dtype ||
        y->buf == x->buf || !(inc ? inc_fn(x->dtype) : set_fn(x->dtype)))
        return false;
    region r;
    int64_t ys[TG_MAX_NDIM];
    return !index_region(n, x->ndim, x->shape, x->strides, in + 2, &r, NULL) && !broadcast_value(y, &r, ys, NULL);
}

static int setinc_run(tg_node *n, tg_array *const *in, tg_array **out,
                      tg_ctx *ctx) {
    const tg_array *x = in[0], *y = in[1];
    tg_array *yc = NULL, *rv = NULL, *yv = NULL;
    bool inc = ((const index_kind *)n->op->impl)->inc;
    region r;
    int64_t ys[TG_MAX_NDIM];
    int rc = index_region(n, x->ndim, x->shape, x->strides, in + 2, &r, ctx);
    if (rc || (rc = broadcast_value(y, &r, ys, ctx))) goto done;
    /* In place (the optimizer's `inplace`): update x where it lies. */
    if (!tg_op_take_input(n, in, 0, out) &&
        ((rc = tg_array_prepare(out, x->dtype, x->ndim, x->shape, ctx)) ||
         (rc = tg_array_assign(*out, x, ctx))))
        goto done;
    /* The same region in the contiguous copy. */
    tg_array *o = *out;
    if ((rc = index_region(n, o->ndim, o->shape, o->strides, in + 2, &r, ctx)))
        goto done;
    int64_t size = 1;
    for (int k = 0; k < r.ndim; k++) size *= r.shape[k];
    if (size == 0) goto done;
    if (!inc && y->dtype == o->dtype && y->buf != o->buf && set_fn(o->dtype)) {
        /* one pass, no views (what a committed update runs) */
        int64_t st[2][TG_MAX_NDIM];
        for (int k = 0; k < r.ndim; k++) {
            st[0][k] = r.strides[k];
            st[1][k] = ys[k];
        }
        char *base[2] = {o->data + r.offset, y->data};
        tg_iter_run(2, base, r.ndim, r.shape, (const int64_t(*)[TG_MAX_NDIM])st, set_fn(o->dtype), NULL, true);
        goto done;
    }
    if (!inc) {
        rv = tg_array_view_raw(o, o->dtype, r.ndim, r.shape, r.strides,
                               o->data + r.offset);
        yv = tg_array_view_raw(y, y->dtype, r.ndim, r.shape, ys, y->data);
        if (!rv || !yv) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        rc = tg_array_assign(rv, yv, ctx);
        goto done;
    }
    tg_dtype sum = tg_dtype_promote(o->dtype, y->dtype);
    if (sum != o->dtype) {
        /* As NumPy's x[i] += y: the sum in the promoted dtype, rounded
         * once into x's. y cast to x's first rounded twice: float16 0.5
         * plus int16 2049 gave 2048, not 2050; float32 1 plus float64
         * 2^-24 + 2^-48 gave 1, not 1 + 2^-23. */
        rv = tg_array_view_raw(o, o->dtype, r.ndim, r.shape, r.strides, o->data + r.offset);
        tg_array *acc = rv ? tg_array_copy(rv, sum) : NULL;
        yc = acc ? tg_array_copy(y, sum) : NULL;
        if (!yc) {
            tg_array_free(acc);
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        if (!(rc = broadcast_value(yc, &r, ys, ctx))) {
            int64_t st[2][TG_MAX_NDIM];
            for (int k = 0; k < r.ndim; k++) {
                st[0][k] = acc->strides[k];
                st[1][k] = ys[k];
            }
            char *base[2] = {acc->data, yc->data};
            tg_iter_run(2, base, r.ndim, r.shape, (const int64_t(*)[TG_MAX_NDIM])st, inc_fn(sum), NULL, true);
            rc = tg_array_assign(rv, acc, ctx);
        }
        tg_array_free(acc);
        goto done;
    }
    if (y->dtype != o->dtype) { /* exact: y's values are x's */
        if (!(yc = tg_array_copy(y, o->dtype))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        y = yc;
        if ((rc = broadcast_value(y, &r, ys, ctx))) goto done;
    }
    int64_t st[2][TG_MAX_NDIM];
    for (int k = 0; k < r.ndim; k++) {
        st[0][k] = r.strides[k];
        st[1][k] = ys[k];
    }
    char *base[2] = {o->data + r.offset, y->data};
    tg_iter_run(2, base, r.ndim, r.shape, (const int64_t(*)[TG_MAX_NDIM])st,
                inc_fn(o->dtype), NULL, true);
done:
    tg_array_free(yc);
    tg_array_free(rv);
    tg_array_free(yv);
    return rc;
}

static void setinc_cost(const tg_node *n, tg_array *const *in,
                        tg_array *const *out, double *flops, double *bytes) {
    *flops = 0;
    *bytes = 0;
    if (!in[0] || !in[1] || !out[0]) return;
    double isz = (double)tg_dtype_size(in[0]->dtype);
    /* The region has at most y's broadcast size; y's own size is a fair
     * lower bound without recomputing the index. */
    double ny = (double)tg_array_size_inline(in[1]);
    bool inc = ((const index_kind *)n->op->impl)->inc;
    *bytes = 2.0 * (double)tg_array_size_inline(in[0]) * isz +
             (inc ? 3.0 : 2.0) * ny * isz;
    if (inc) *flops = ny;
}

const tg_op tg_op_set_subtensor = {
    .name = "set_subtensor", .nin_min = 2, .nin_max = -1, .nout = 1,
    .attr_keys = keys_index, .parse_attrs = index_parse,
    .infer = setinc_infer, .run = setinc_run, .cost = setinc_cost,
    .view_of = -1, .inplace_inputs = 1u, .commit_ready = setinc_commit_ready, .impl = &kind_set,
    .grad = tg_grad_shape};

const tg_op tg_op_inc_subtensor = {
    .name = "inc_subtensor", .nin_min = 2, .nin_max = -1, .nout = 1,
    .attr_keys = keys_index, .parse_attrs = index_parse,
    .infer = setinc_infer, .run = setinc_run, .cost = setinc_cost,
    .view_of = -1, .inplace_inputs = 1u, .commit_ready = setinc_commit_ready, .impl = &kind_inc,
    .grad = tg_grad_shape};
