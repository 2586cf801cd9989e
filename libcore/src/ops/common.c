/* Helpers shared by the op families: attribute readers, weak scalars,
 * static broadcasting. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "ops/op.h"

/* ---- attributes ---- */

static json_object *attr_get(tg_node *n, const char *key) {
    json_object *v = NULL;
    if (n->attrs && json_object_object_get_ex(n->attrs, key, &v)) return v;
    return NULL;
}

static bool attr_present(tg_node *n, const char *key) {
    return n->attrs && json_object_object_get_ex(n->attrs, key, NULL);
}

static int attr_put(tg_node *n, const char *key, json_object *v, tg_ctx *ctx) {
    if (!n->attrs && !(n->attrs = json_object_new_object())) {
        json_object_put(v);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    if (json_object_object_add(n->attrs, key, v)) {
        json_object_put(v);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    return TG_OK;
}

const char *tg_json_text(json_object *v) {
    const char *t = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
    return t ? t : "(a value)";
}

int tg_attr_int(tg_node *n, const char *key, bool has_default, int64_t def,
                int64_t *out, tg_ctx *ctx) {
    if (!attr_present(n, key)) {
        if (!has_default)
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by %s", key, n->op->name);
        *out = def;
        return attr_put(n, key, json_object_new_int64(def), ctx);
    }
    json_object *v = attr_get(n, key);
    if (!json_object_is_type(v, json_type_int))
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected an integer", key);
    *out = json_object_get_int64(v);
    /* named as written, not as the clamped value */
    if (tg_json_int_past_int64(v))
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: %s is out of range (at most 2^63 - 1)", key,
                         tg_json_text(v));
    return TG_OK;
}

bool tg_json_int_pair(json_object *v, int64_t lo, int64_t *out) {
    if (!v || !json_object_is_type(v, json_type_array) || json_object_array_length(v) != 2)
        return false;
    for (int i = 0; i < 2; i++) {
        json_object *e = json_object_array_get_idx(v, (size_t)i);
        if (!json_object_is_type(e, json_type_int)) return false;
        out[i] = json_object_get_int64(e);
        if (out[i] < lo || out[i] > INT_MAX) return false;
    }
    return true;
}

int tg_attr_int_pair(tg_node *n, const char *key, const int64_t *def, int64_t lo,
                     int64_t *out, tg_ctx *ctx) {
    if (!attr_present(n, key)) {
        if (!def) return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by %s", key, n->op->name);
        out[0] = def[0];
        out[1] = def[1];
        json_object *l = json_object_new_array();
        if (l && (json_object_array_add(l, json_object_new_int64(def[0])) ||
                  json_object_array_add(l, json_object_new_int64(def[1])))) {
            json_object_put(l);
            l = NULL;
        }
        if (!l) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return attr_put(n, key, l, ctx);
    }
    if (!tg_json_int_pair(attr_get(n, key), lo, out))
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected a list of two integers from %lld "
                         "to %d", key, (long long)lo, INT_MAX);
    return TG_OK;
}

int tg_attr_bool(tg_node *n, const char *key, bool def, bool *out, tg_ctx *ctx) {
    if (!attr_present(n, key)) {
        *out = def;
        return attr_put(n, key, json_object_new_boolean(def), ctx);
    }
    json_object *v = attr_get(n, key);
    if (!json_object_is_type(v, json_type_boolean))
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected true or false", key);
    *out = json_object_get_boolean(v);
    return TG_OK;
}

int tg_attr_dtype(tg_node *n, const char *key, tg_dtype def, tg_dtype *out, tg_ctx *ctx) {
    if (!attr_present(n, key)) {
        if (def == TG_DTYPE_INVALID)
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by %s", key, n->op->name);
        *out = def;
        return attr_put(n, key, json_object_new_string(tg_dtype_name(def)), ctx);
    }
    json_object *v = attr_get(n, key);
    tg_dtype dt = json_object_is_type(v, json_type_string)
                      ? tg_dtype_from_name(json_object_get_string(v))
                      : TG_DTYPE_INVALID;
    if (dt == TG_DTYPE_INVALID)
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected a dtype name (bool, int8.., "
                         "float64)", key);
    *out = dt;
    return TG_OK;
}

int tg_attr_enum(tg_node *n, const char *key, const char *const *choices, int def, int *out,
                 tg_ctx *ctx) {
    if (!attr_present(n, key)) {
        if (def < 0) return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by %s", key, n->op->name);
        *out = def;
        return attr_put(n, key, json_object_new_string(choices[def]), ctx);
    }
    json_object *v = attr_get(n, key);
    if (json_object_is_type(v, json_type_string))
        for (int i = 0; choices[i]; i++)
            if (strcmp(json_object_get_string(v), choices[i]) == 0) {
                *out = i;
                return TG_OK;
            }
    tg_str list = {0};
    for (int i = 0; choices[i]; i++) tg_str_addf(&list, "%s\"%s\"", i ? ", " : "", choices[i]);
    int rc = tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected one of %s", key, list.s ? list.s : "");
    tg_str_free(&list);
    return rc;
}

int tg_attr_string(tg_node *n, const char *key, const char *def, char **out, tg_ctx *ctx) {
    const char *s = def;
    if (!attr_present(n, key)) {
        if (!def) return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by %s", key, n->op->name);
        int rc = attr_put(n, key, json_object_new_string(def), ctx);
        if (rc) return rc;
    } else {
        json_object *v = attr_get(n, key);
        if (!json_object_is_type(v, json_type_string))
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected a string", key);
        s = json_object_get_string(v);
    }
    char *c = tg_strdup(s);
    if (!c) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    tg_free(*out);
    *out = c;
    return TG_OK;
}

int tg_attr_axis(tg_node *n, const char *key, bool allow_null, bool allow_list,
                 bool has_default, tg_ctx *ctx) {
    tg_attrs *a = &n->a;
    a->axis_null = false;
    a->axis_is_list = false;
    a->naxes = 0;
    if (!attr_present(n, key)) {
        if (!has_default)
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by %s", key, n->op->name);
        /* The default of every op with an optional axis is null. */
        a->axis_null = true;
        return attr_put(n, key, NULL, ctx);
    }
    json_object *v = attr_get(n, key);
    const char *expect = allow_list ? (allow_null ? "null, an integer or a list of integers"
                                                  : "an integer or a list of integers")
                                    : (allow_null ? "null or an integer" : "an integer");
    if (!v) {
        if (!allow_null) return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected %s", key, expect);
        a->axis_null = true;
        return TG_OK;
    }
    if (json_object_is_type(v, json_type_int)) {
        int64_t x = json_object_get_int64(v);
        if (x < -TG_MAX_NDIM - 1 || x > TG_MAX_NDIM)
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s: axis %s is out of range", key,
                             tg_json_text(v));
        a->naxes = 1;
        a->axes[0] = (int)x;
        return TG_OK;
    }
    if (allow_list && json_object_is_type(v, json_type_array)) {
        size_t m = json_object_array_length(v);
        if (m > TG_MAX_NDIM)
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s: more than %d axes", key, TG_MAX_NDIM);
        a->axis_is_list = true;
        for (size_t i = 0; i < m; i++) {
            json_object *e = json_object_array_get_idx(v, i);
            if (!json_object_is_type(e, json_type_int))
                return tg_errorf(ctx, TG_ELOAD, "attrs.%s[%zu]: expected an integer", key, i);
            int64_t x = json_object_get_int64(e);
            if (x < -TG_MAX_NDIM - 1 || x > TG_MAX_NDIM)
                return tg_errorf(ctx, TG_ELOAD, "attrs.%s[%zu]: axis %s is out of range", key,
                                 i, tg_json_text(e));
            a->axes[a->naxes++] = (int)x;
        }
        return TG_OK;
    }
    return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected %s", key, expect);
}

int tg_axes_normalize(tg_node *n, int ndim, tg_ctx *ctx) {
    tg_attrs *a = &n->a;
    a->axis_mask = 0;
    if (a->axis_null) {
        a->axis_mask = ndim ? (uint32_t)((1u << ndim) - 1) : 0;
        return TG_OK;
    }
    for (int i = 0; i < a->naxes; i++) {
        int ax = a->axes[i];
        if (ax < -ndim || ax >= ndim)
            return tg_errorf(ctx, TG_ELOAD,
                             "attrs.axis: axis %d is out of bounds for an input of %d "
                             "dimension%s",
                             ax, ndim, ndim == 1 ? "" : "s");
        if (ax < 0) ax += ndim;
        if (a->axis_mask & (1u << ax))
            return tg_errorf(ctx, TG_ELOAD, "attrs.axis: axis %d is repeated", ax);
        a->axis_mask |= 1u << ax;
    }
    return TG_OK;
}

/* ---- weak scalars ---- */

/* Convert the weak constant at input i to dt (a fresh strong array). An
 * integer meeting an integer dtype must fit; a float never becomes an
 * integer (NumPy's same_kind casting refuses it: x[i] += 2.5 of an int8
 * x, and n_steps 2.5 is no count), where it was silently truncated. */
static int weak_convert(tg_node *n, int i, tg_dtype dt, tg_ctx *ctx) {
    tg_var *v = n->inputs[i];
    tg_array *a = v->value;
    if (a->dtype != dt) {
        char from = tg_dtype_kind(a->dtype), to = tg_dtype_kind(dt);
        if (from == 'f' && (to == 'i' || to == 'u')) {
            double x = tg_load_f64(a->dtype, a->data);
            char num[40];
            for (int p = 15; p <= 17; p++) {
                snprintf(num, sizeof num, "%.*g", p, x);
                if (strtod(num, NULL) == x || x != x) break;
            }
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d]: the Python float %s cannot become %s (NumPy's same_kind "
                             "casting refuses float to integer)",
                             i, num, tg_dtype_name(dt));
        }
        if (from == 'u' && to != 'f') {
            /* (held as uint64 only past int64: fits nothing else) */
            uint64_t x = *(const uint64_t *)a->data;
            if (dt != TG_UINT64)
                return tg_errorf(ctx, TG_ETYPE,
                                 "inputs[%d]: the Python integer %llu is out of bounds for %s",
                                 i, (unsigned long long)x, tg_dtype_name(dt));
        } else if (from == 'i' && (to == 'i' || to == 'u')) {
            int64_t x = *(const int64_t *)a->data;
            size_t bits = tg_dtype_size(dt) * 8;
            bool fits = to == 'i' ? bits == 64 || (x >= -(INT64_C(1) << (bits - 1)) &&
                                                   x < (INT64_C(1) << (bits - 1)))
                                  : x >= 0 && (bits == 64 || x < (INT64_C(1) << bits));
            if (!fits)
                return tg_errorf(ctx, TG_ETYPE,
                                 "inputs[%d]: the Python integer %lld is out of bounds for %s",
                                 i, (long long)x, tg_dtype_name(dt));
        }
        tg_array *c = tg_array_copy(a, dt);
        if (!c) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        tg_array_free(v->value);
        v->value = c;
    }
    v->type.dtype = dt;
    v->weak = false;
    return TG_OK;
}

/* What a weak scalar of kind k becomes when it meets dtype dt (FORMAT.md
 * s5): ints take an int or float dtype, floats take a float dtype and give
 * float64 against ints, booleans take anything. Bool arrays meeting a weak
 * int or float become int64 / float64 (NumPy: the Python type's default). */
static tg_dtype weak_meets(char k, tg_dtype dt) {
    char dk = tg_dtype_kind(dt);
    if (k == 'b') return dt;
    if (k == 'i') return dk == 'b' ? TG_INT64 : dt;
    /* float */
    return dk == 'f' ? dt : TG_FLOAT64;
}

/* NumPy's type numbers order the dtypes by how much their promotion rules
 * know about the others (float16 last: it was added last). */
static int numpy_type_num(tg_dtype dt) {
    switch (dt) {
    case TG_BOOL: return 0;
    case TG_INT8: return 1;
    case TG_UINT8: return 2;
    case TG_INT16: return 3;
    case TG_UINT16: return 4;
    case TG_INT32: return 5;
    case TG_UINT32: return 6;
    case TG_INT64: return 7;
    case TG_UINT64: return 8;
    case TG_FLOAT32: return 11;
    case TG_FLOAT64: return 12;
    case TG_FLOAT16: return 23;
    default: return -1;
    }
}

/* np.result_type of several array dtypes. Pairwise promotion is not
 * associative ((int8, uint8) then float16 is float32, but int8 and uint8
 * each meet float16 as float16); NumPy promotes every dtype with the one of
 * the highest type number first, then combines those, which makes the
 * answer independent of the order. */
static tg_dtype promote_seq(tg_node *n, int first, int count) {
    tg_dtype main = TG_DTYPE_INVALID, res = TG_DTYPE_INVALID;
    for (int i = first; i < first + count; i++) {
        const tg_var *v = n->inputs[i];
        if (!v->weak && (main == TG_DTYPE_INVALID ||
                         numpy_type_num(v->type.dtype) > numpy_type_num(main)))
            main = v->type.dtype;
    }
    for (int i = first; i < first + count && main != TG_DTYPE_INVALID; i++) {
        const tg_var *v = n->inputs[i];
        if (v->weak) continue;
        tg_dtype p = tg_dtype_promote(main, v->type.dtype);
        res = res == TG_DTYPE_INVALID ? p : tg_dtype_promote(res, p);
    }
    return res;
}

int tg_weak_resolve(tg_node *n, int first, int count, tg_dtype *out, tg_ctx *ctx) {
    tg_dtype strong = promote_seq(n, first, count);
    char weak_kind = 0; /* the highest kind among weak scalars: b < i < f */
    for (int i = first; i < first + count; i++) {
        tg_var *v = n->inputs[i];
        if (v->weak) {
            char k = tg_dtype_kind(v->type.dtype);
            int rank = k == 'b' ? 1 : k == 'f' ? 3 : 2;
            int cur = weak_kind == 'b' ? 1 : weak_kind == 'f' ? 3 : weak_kind ? 2 : 0;
            if (rank > cur) weak_kind = k == 'u' ? 'i' : k;
        }
    }
    tg_dtype res;
    if (strong == TG_DTYPE_INVALID) {
        /* Only weak scalars: they take their default dtypes (an integer
         * past int64 among them: uint64, as NumPy 2 gives 2**64 - 1 + 1). */
        bool past = false;
        for (int i = first; i < first + count; i++)
            past |= n->inputs[i]->weak && n->inputs[i]->type.dtype == TG_UINT64;
        res = weak_kind == 'f' ? TG_FLOAT64 : weak_kind == 'i' ? (past ? TG_UINT64 : TG_INT64) : TG_BOOL;
    } else {
        res = weak_kind ? weak_meets(weak_kind, strong) : strong;
    }
    for (int i = first; i < first + count; i++)
        if (n->inputs[i]->weak) {
            int rc = weak_convert(n, i, res, ctx);
            if (rc) return rc;
        }
    *out = res;
    return TG_OK;
}

int tg_weak_take(tg_node *n, int i, tg_dtype dt, tg_ctx *ctx) {
    if (!n->inputs[i]->weak) return TG_OK;
    return weak_convert(n, i, dt, ctx);
}

/* ---- static broadcasting ---- */

int tg_infer_broadcast(tg_node *n, int first, int count, tg_type *t, tg_ctx *ctx) {
    int nd = 0;
    for (int i = first; i < first + count; i++)
        if (n->inputs[i]->type.ndim > nd) nd = n->inputs[i]->type.ndim;
    t->ndim = nd;
    /* Per output axis: 1 until something says otherwise; -1 when an input
     * has an unknown length there and nobody fixes it. */
    for (int d = 0; d < nd; d++) {
        int64_t len = 1;
        bool unknown = false;
        int fixed_by = -1;
        for (int i = first; i < first + count; i++) {
            const tg_type *it = &n->inputs[i]->type;
            int off = nd - it->ndim;
            if (d < off) continue;
            int64_t l = it->shape[d - off];
            if (l < 0) {
                unknown = true;
            } else if (l != 1) {
                if (len != 1 && len != l)
                    return tg_errorf(ctx, TG_ESHAPE,
                                     "inputs[%d] and inputs[%d] ('%s' and '%s') do not "
                                     "broadcast: lengths %lld and %lld in dimension %d",
                                     fixed_by, i, n->inputs[fixed_by]->id, n->inputs[i]->id,
                                     (long long)len, (long long)l, d);
                len = l;
                fixed_by = i;
            }
        }
        t->shape[d] = len != 1 ? len : unknown ? -1 : 1;
    }
    return TG_OK;
}

bool tg_op_take_input(const tg_node *n, tg_array *const *in, int k, tg_array **slot) {
    if (!n->inplace || n->inplace[0] != k) return false;
    tg_array *a = in[k];
    if (a->buf->nbytes <= TG_VM_KEEP_BYTES || !tg_array_is_exclusive(a) ||
        !tg_array_is_contiguous(a))
        return false;
    if (*slot != a) {
        tg_array_free(*slot);
        *slot = tg_array_ref(a);
    }
    return true;
}

int tg_batch_broadcast(int ka, const int64_t *a, int kb, const int64_t *b, int64_t *out, int *ja, int *jb) {
    int ko = ka > kb ? ka : kb;
    for (int d = 0; d < ko; d++) {
        int ia = d - (ko - ka), ib = d - (ko - kb);
        int64_t la = ia >= 0 ? a[ia] : 1, lb = ib >= 0 ? b[ib] : 1;
        if (la == 1)
            out[d] = lb;
        else if (lb == 1)
            out[d] = la;
        else if (la < 0 || lb < 0)
            out[d] = la < 0 ? lb : la;
        else if (la != lb) {
            *ja = ia;
            *jb = ib;
            return -1;
        } else
            out[d] = la;
    }
    return ko;
}
