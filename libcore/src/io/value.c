/* Values and types in JSON (FORMAT.md sections 2 and 5), ids, base64. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/io.h"
#include "tensor/tensor.h"

bool tg_id_valid(const char *id) {
    size_t n = strlen(id);
    if (n < 1 || n > 128 || id[0] == '.' || id[0] == '-') return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
              c == '-'))
            return false;
    }
    return true;
}

/* ---- base64 ---- */

static const char B64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tg_base64_encode(const void *data, size_t n) {
    const unsigned char *p = data;
    size_t out = (n + 2) / 3 * 4;
    char *s = tg_malloc(out + 1), *o = s;
    if (!s) return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = B64[(v >> 6) & 63];
        *o++ = B64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = 0;
    return s;
}

static int b64val(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

void *tg_base64_decode(const char *s, size_t len, size_t *out_n) {
    if (len % 4) return NULL;
    size_t pad = 0;
    if (len && s[len - 1] == '=') pad++;
    if (len > 1 && s[len - 2] == '=') pad++;
    size_t n = len / 4 * 3 - pad;
    unsigned char *out = tg_malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            bool last = i + 4 == len;
            if (last && s[i + k] == '=' && k >= 2 && k >= 4 - (int)pad) {
                v[k] = 0;
                continue;
            }
            v[k] = b64val(s[i + k]);
            if (v[k] < 0) {
                tg_free(out);
                return NULL;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
                     (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if (o < n) out[o++] = (unsigned char)(w >> 16);
        if (o < n) out[o++] = (unsigned char)(w >> 8);
        if (o < n) out[o++] = (unsigned char)w;
    }
    *out_n = n;
    return out;
}

/* ---- types ---- */

static bool get_int(json_object *o, int64_t *v) {
    if (!json_object_is_type(o, json_type_int)) return false;
    *v = json_object_get_int64(o);
    return true;
}

int tg_type_from_json(json_object *o, tg_type *t, const char *where,
                      tg_ctx *ctx) {
    if (!json_object_is_type(o, json_type_object))
        return tg_errorf(ctx, TG_ELOAD, "%s: expected an object {\"dtype\", \"shape\"}",
                         where);
    json_object *jd = NULL, *js = NULL, *jb = NULL;
    json_object_object_foreach(o, key, val) {
        if (strcmp(key, "dtype") == 0)
            jd = val;
        else if (strcmp(key, "shape") == 0)
            js = val;
        else if (strcmp(key, "broadcastable") == 0)
            jb = val;
        else
            return tg_errorf(ctx, TG_ELOAD, "%s.%s: unknown key", where, key);
    }
    if (!jd || !json_object_is_type(jd, json_type_string))
        return tg_errorf(ctx, TG_ELOAD, "%s.dtype: expected a dtype name", where);
    t->dtype = tg_dtype_from_name(json_object_get_string(jd));
    if (t->dtype == TG_DTYPE_INVALID)
        return tg_errorf(ctx, TG_ELOAD,
                         "%s.dtype: unknown dtype '%s' (expected bool, int8..int64, "
                         "uint8..uint64, float16, float32 or float64)",
                         where, json_object_get_string(jd));
    if (js && jb)
        return tg_errorf(ctx, TG_ELOAD, "%s: give shape or broadcastable, not both",
                         where);
    json_object *arr = js ? js : jb;
    const char *what = js ? "shape" : "broadcastable";
    if (!arr)
        return tg_errorf(ctx, TG_ELOAD, "%s: missing shape", where);
    if (!json_object_is_type(arr, json_type_array))
        return tg_errorf(ctx, TG_ELOAD, "%s.%s: expected an array", where, what);
    size_t n = json_object_array_length(arr);
    if (n > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD, "%s.%s: %zu dimensions (at most %d)", where,
                         what, n, TG_MAX_NDIM);
    t->ndim = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(arr, i);
        if (js) {
            int64_t v;
            if (!e) {
                t->shape[i] = -1;
            } else if (get_int(e, &v) && v >= 0) {
                t->shape[i] = v;
            } else {
                return tg_errorf(ctx, TG_ELOAD,
                                 "%s.shape[%zu]: expected a non-negative integer "
                                 "or null",
                                 where, i);
            }
        } else {
            if (!json_object_is_type(e, json_type_boolean))
                return tg_errorf(ctx, TG_ELOAD,
                                 "%s.broadcastable[%zu]: expected true or false",
                                 where, i);
            t->shape[i] = json_object_get_boolean(e) ? 1 : -1;
        }
    }
    return TG_OK;
}

json_object *tg_type_to_json(const tg_type *t) {
    json_object *o = json_object_new_object(), *s = json_object_new_array();
    json_object_object_add(o, "dtype", json_object_new_string(tg_dtype_name(t->dtype)));
    for (int i = 0; i < t->ndim; i++)
        json_object_array_add(s, t->shape[i] >= 0 ? json_object_new_int64(t->shape[i]) : NULL);
    json_object_object_add(o, "shape", s);
    return o;
}

/* ---- values ---- */

/* Nested-list shape: walk the first element of each level. */
static int nested_shape(json_object *d, int64_t *shape, int *ndim) {
    int nd = 0;
    json_object *cur = d;
    while (json_object_is_type(cur, json_type_array)) {
        if (nd >= TG_MAX_NDIM) return -1;
        size_t n = json_object_array_length(cur);
        shape[nd++] = (int64_t)n;
        if (!n) break;
        cur = json_object_array_get_idx(cur, 0);
    }
    *ndim = nd;
    return 0;
}

typedef struct fill_state {
    tg_array *a;
    int64_t pos, n;
    const char *where;
    tg_ctx *ctx;
} fill_state;

static int store_elem(fill_state *st, json_object *e) {
    if (st->pos >= st->n)
        return tg_errorf(st->ctx, TG_ELOAD,
                         "%s.data: more elements than the shape holds (%lld)",
                         st->where, (long long)st->n);
    tg_dtype dt = st->a->dtype;
    char *p = st->a->data + st->pos * (int64_t)tg_dtype_size(dt);
    char k = tg_dtype_kind(dt);
    switch (json_object_get_type(e)) {
    case json_type_boolean:
        tg_store_i64(dt, p, json_object_get_boolean(e) ? 1 : 0);
        break;
    case json_type_int: {
        if (k == 'b') {
            int64_t v = json_object_get_int64(e);
            if (v != 0 && v != 1)
                return tg_errorf(st->ctx, TG_ELOAD,
                                 "%s.data[%lld]: %lld is not a bool (0, 1, true or false)",
                                 st->where, (long long)st->pos, (long long)v);
            tg_store_i64(dt, p, v);
        } else if (k == 'f') {
            tg_store_f64(dt, p, (double)json_object_get_int64(e));
        } else if (dt == TG_UINT64) {
            uint64_t v = json_object_get_uint64(e);
            int64_t sv = json_object_get_int64(e);
            if (sv < 0)
                return tg_errorf(st->ctx, TG_ELOAD,
                                 "%s.data[%lld]: %lld does not fit uint64", st->where,
                                 (long long)st->pos, (long long)sv);
            memcpy(p, &v, 8);
        } else {
            int64_t v = json_object_get_int64(e);
            size_t bits = tg_dtype_size(dt) * 8;
            bool fits;
            if (k == 'i')
                fits = bits == 64 || (v >= -(INT64_C(1) << (bits - 1)) &&
                                      v < (INT64_C(1) << (bits - 1)));
            else
                fits = v >= 0 && (bits == 64 || v < (INT64_C(1) << bits));
            if (!fits)
                return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %lld does not fit %s",
                                 st->where, (long long)st->pos, (long long)v,
                                 tg_dtype_name(dt));
            tg_store_i64(dt, p, v);
        }
        break;
    }
    case json_type_double: {
        double v = json_object_get_double(e);
        if (k != 'f') {
            if (v != floor(v) || k == 'b')
                return tg_errorf(st->ctx, TG_ELOAD,
                                 "%s.data[%lld]: %g is not a valid %s", st->where,
                                 (long long)st->pos, v, tg_dtype_name(dt));
            if (fabs(v) >= 9.2e18)
                return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %g does not fit %s",
                                 st->where, (long long)st->pos, v, tg_dtype_name(dt));
            json_object *iv = json_object_new_int64((int64_t)v);
            int rc = store_elem(st, iv);
            json_object_put(iv);
            return rc;
        }
        tg_store_f64(dt, p, v);
        break;
    }
    case json_type_string: {
        const char *s = json_object_get_string(e);
        double v;
        if (strcmp(s, "nan") == 0)
            v = NAN;
        else if (strcmp(s, "inf") == 0)
            v = INFINITY;
        else if (strcmp(s, "-inf") == 0)
            v = -INFINITY;
        else
            return tg_errorf(st->ctx, TG_ELOAD,
                             "%s.data[%lld]: unexpected string '%.40s' (only \"nan\", "
                             "\"inf\", \"-inf\")",
                             st->where, (long long)st->pos, s);
        if (k != 'f')
            return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %s in a %s value",
                             st->where, (long long)st->pos, s, tg_dtype_name(dt));
        tg_store_f64(dt, p, v);
        break;
    }
    default:
        return tg_errorf(st->ctx, TG_ELOAD,
                         "%s.data[%lld]: expected a number, a boolean or "
                         "\"nan\"/\"inf\"/\"-inf\"",
                         st->where, (long long)st->pos);
    }
    st->pos++;
    return TG_OK;
}

/* Nested data must be rectangular: depth d has length shape[d]. Flat data
 * (a single list of every element) is accepted too. */
static int fill_nested(fill_state *st, json_object *d, int depth, int ndim,
                       const int64_t *shape) {
    if (depth == ndim) {
        if (json_object_is_type(d, json_type_array))
            return tg_errorf(st->ctx, TG_ELOAD,
                             "%s.data: nested deeper than the shape's %d dimensions",
                             st->where, ndim);
        return store_elem(st, d);
    }
    if (!json_object_is_type(d, json_type_array) ||
        (int64_t)json_object_array_length(d) != shape[depth])
        return tg_errorf(st->ctx, TG_ELOAD,
                         "%s.data: does not match the shape (dimension %d should "
                         "have %lld entries)",
                         st->where, depth, (long long)shape[depth]);
    size_t n = json_object_array_length(d);
    for (size_t i = 0; i < n; i++) {
        int rc = fill_nested(st, json_object_array_get_idx(d, i), depth + 1, ndim, shape);
        if (rc) return rc;
    }
    return TG_OK;
}

tg_array *tg_value_from_json(json_object *v, tg_dtype dt, int ndim,
                             const int64_t *shape, const char *dir,
                             const char *where, bool *weak, tg_ctx *ctx) {
    if (weak) *weak = false;
    json_object *jdata = NULL, *jb64 = NULL, *jnpy = NULL, *jd = NULL, *js = NULL;
    bool bare = false;
    if (!v) {
        tg_errorf(ctx, TG_ELOAD, "%s: expected a value, got null", where);
        return NULL;
    }
    switch (json_object_get_type(v)) {
    case json_type_int:
    case json_type_double:
    case json_type_boolean:
        jdata = v;
        bare = true;
        break;
    case json_type_object: {
        json_object_object_foreach(v, key, val) {
            if (strcmp(key, "data") == 0)
                jdata = val;
            else if (strcmp(key, "base64") == 0)
                jb64 = val;
            else if (strcmp(key, "npy") == 0)
                jnpy = val;
            else if (strcmp(key, "dtype") == 0)
                jd = val;
            else if (strcmp(key, "shape") == 0)
                js = val;
            else {
                tg_errorf(ctx, TG_ELOAD, "%s.%s: unknown key in a value", where, key);
                return NULL;
            }
        }
        int count = (json_object_object_get_ex(v, "data", NULL)) + (jb64 != NULL) + (jnpy != NULL);
        if (count != 1) {
            tg_errorf(ctx, TG_ELOAD, "%s: a value needs exactly one of data, base64, npy",
                      where);
            return NULL;
        }
        break;
    }
    default:
        tg_errorf(ctx, TG_ELOAD, "%s: expected a value (an object, a number or a boolean)",
                  where);
        return NULL;
    }
    /* dtype */
    tg_dtype vdt = dt;
    bool dtype_given = false;
    if (jd) {
        if (!json_object_is_type(jd, json_type_string) ||
            (vdt = tg_dtype_from_name(json_object_get_string(jd))) == TG_DTYPE_INVALID) {
            tg_errorf(ctx, TG_ELOAD, "%s.dtype: unknown dtype", where);
            return NULL;
        }
        dtype_given = true;
        if (dt != TG_DTYPE_INVALID && vdt != dt) {
            tg_errorf(ctx, TG_ETYPE, "%s.dtype: %s, but the variable is %s", where,
                      tg_dtype_name(vdt), tg_dtype_name(dt));
            return NULL;
        }
    }
    /* shape */
    int64_t vshape[TG_MAX_NDIM];
    int vnd = 0;
    bool shape_given = false;
    if (js) {
        if (!json_object_is_type(js, json_type_array) ||
            json_object_array_length(js) > TG_MAX_NDIM) {
            tg_errorf(ctx, TG_ELOAD, "%s.shape: expected an array of at most %d lengths",
                      where, TG_MAX_NDIM);
            return NULL;
        }
        vnd = (int)json_object_array_length(js);
        for (int i = 0; i < vnd; i++) {
            json_object *e = json_object_array_get_idx(js, (size_t)i);
            if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0) {
                tg_errorf(ctx, TG_ELOAD, "%s.shape[%d]: expected a non-negative integer",
                          where, i);
                return NULL;
            }
            vshape[i] = json_object_get_int64(e);
        }
        shape_given = true;
    } else if (ndim >= 0 && shape) {
        bool known = true;
        for (int i = 0; i < ndim; i++) known &= shape[i] >= 0;
        if (known) {
            vnd = ndim;
            memcpy(vshape, shape, sizeof(int64_t) * (size_t)ndim);
            shape_given = true;
        }
    }
    if (!shape_given && jdata && json_object_is_type(jdata, json_type_array)) {
        /* Shape from nesting when the type leaves lengths open. */
        if (nested_shape(jdata, vshape, &vnd)) {
            tg_errorf(ctx, TG_ELOAD, "%s.data: nested more than %d deep", where, TG_MAX_NDIM);
            return NULL;
        }
        if (ndim >= 0 && vnd != ndim) {
            tg_errorf(ctx, TG_ESHAPE, "%s.data: %d dimensions, but the type has %d", where,
                      vnd, ndim);
            return NULL;
        }
        shape_given = true;
    }
    if (ndim >= 0 && shape_given && vnd != ndim) {
        tg_errorf(ctx, TG_ESHAPE, "%s.shape: %d dimensions, but the variable has %d", where,
                  vnd, ndim);
        return NULL;
    }
    if (ndim >= 0 && shape)
        for (int i = 0; i < vnd && i < ndim; i++)
            if (shape[i] >= 0 && shape[i] != vshape[i]) {
                tg_errorf(ctx, TG_ESHAPE,
                          "%s.shape[%d]: length %lld, but the variable's type says %lld",
                          where, i, (long long)vshape[i], (long long)shape[i]);
                return NULL;
            }
    /* npy: everything comes from the file. */
    if (jnpy) {
        if (!json_object_is_type(jnpy, json_type_string)) {
            tg_errorf(ctx, TG_ELOAD, "%s.npy: expected a path", where);
            return NULL;
        }
        const char *rel = json_object_get_string(jnpy);
        if (!dir) {
            tg_errorf(ctx, TG_ELOAD, "%s.npy: npy values need a file's folder", where);
            return NULL;
        }
        if (rel[0] == '/' || rel[0] == 0 || strstr(rel, "..") || strchr(rel, '\\')) {
            tg_errorf(ctx, TG_ELOAD,
                      "%s.npy: '%s' leaves the graph's folder (no absolute paths, no ..)",
                      where, rel);
            return NULL;
        }
        tg_str path = {0};
        tg_str_addf(&path, "%s/%s", dir, rel);
        if (path.oom) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            return NULL;
        }
        tg_array *a = tg_npy_load(path.s, ctx);
        tg_str_free(&path);
        if (!a) {
            tg_error_prefix(ctx, "%s.npy", where);
            return NULL;
        }
        bool ok = (vdt == TG_DTYPE_INVALID || vdt == a->dtype) &&
                  (!shape_given || (vnd == a->ndim &&
                                    !memcmp(vshape, a->shape, sizeof(int64_t) * (size_t)vnd)));
        if (!ok) {
            tg_errorf(ctx, TG_ETYPE,
                      "%s.npy: the file holds %s with %d dimensions, which does not "
                      "match the declared type",
                      where, tg_dtype_name(a->dtype), a->ndim);
            tg_array_free(a);
            return NULL;
        }
        return a;
    }
    /* Scalars written without a dtype are weak (FORMAT.md s5). */
    bool scalar_data = jdata && !json_object_is_type(jdata, json_type_array);
    if (vdt == TG_DTYPE_INVALID) {
        if (!scalar_data || (shape_given && vnd != 0)) {
            tg_errorf(ctx, TG_ELOAD, "%s: a value needs a dtype (only scalars may omit it)",
                      where);
            return NULL;
        }
        json_type jt = json_object_get_type(jdata);
        vdt = jt == json_type_boolean ? TG_BOOL
              : jt == json_type_int   ? TG_INT64
                                      : TG_FLOAT64;
        if (jt == json_type_string) vdt = TG_FLOAT64;
        if (weak) *weak = true;
    }
    (void)dtype_given;
    (void)bare;
    if (!shape_given) vnd = 0;
    int64_t n = tg_shape_size(vnd, vshape), nbytes;
    size_t isz = tg_dtype_size(vdt);
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)isz, &nbytes)) {
        tg_errorf(ctx, TG_ELOAD, "%s.shape: absurd size", where);
        return NULL;
    }
    if (jb64) {
        if (!json_object_is_type(jb64, json_type_string)) {
            tg_errorf(ctx, TG_ELOAD, "%s.base64: expected a string", where);
            return NULL;
        }
        size_t slen = (size_t)json_object_get_string_len(jb64);
        if ((uint64_t)nbytes != (uint64_t)(slen / 4 * 3) - (slen && json_object_get_string(jb64)[slen - 1] == '=') -
                                    (slen > 1 && json_object_get_string(jb64)[slen - 2] == '=') ||
            slen % 4) {
            tg_errorf(ctx, TG_ELOAD,
                      "%s.base64: %zu characters do not encode the %lld bytes the shape "
                      "and dtype need",
                      where, slen, (long long)nbytes);
            return NULL;
        }
        size_t got = 0;
        void *bytes = tg_base64_decode(json_object_get_string(jb64), slen, &got);
        if (!bytes) {
            tg_errorf(ctx, TG_ELOAD, "%s.base64: not valid base64", where);
            return NULL;
        }
        tg_array *a = tg_array_new_from(vdt, vnd, vshape, bytes);
        tg_free(bytes);
        if (!a) tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", where);
        if (a && vdt == TG_BOOL)
            for (int64_t i = 0; i < n; i++)
                if (((unsigned char *)a->data)[i] > 1) {
                    tg_array_free(a);
                    tg_errorf(ctx, TG_ELOAD, "%s.base64: bool data holds a byte other than 0 or 1", where);
                    return NULL;
                }
        return a;
    }
    /* data: never allocate more than the JSON could fill. */
    int64_t have = 1;
    if (json_object_is_type(jdata, json_type_array)) {
        /* An upper bound on the elements the JSON holds: its text length. */
        have = (int64_t)json_object_array_length(jdata);
        int64_t inner = 1;
        json_object *cur = jdata;
        while (json_object_is_type(cur, json_type_array) && json_object_array_length(cur)) {
            cur = json_object_array_get_idx(cur, 0);
            if (json_object_is_type(cur, json_type_array))
                inner *= (int64_t)json_object_array_length(cur) ? (int64_t)json_object_array_length(cur) : 1;
            if (inner > n) break;
        }
        if (__builtin_mul_overflow(have, inner, &have)) have = INT64_MAX;
    }
    if (n > have && n > 1) {
        tg_errorf(ctx, TG_ELOAD,
                  "%s.data: holds fewer elements than the shape's %lld", where, (long long)n);
        return NULL;
    }
    tg_array *a = tg_array_empty(vdt, vnd, vshape);
    if (!a) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", where);
        return NULL;
    }
    fill_state st = {a, 0, n, where, ctx};
    int rc;
    if (!json_object_is_type(jdata, json_type_array)) {
        if (n != 1) {
            /* A scalar given for a non-scalar shape. */
            tg_array_free(a);
            tg_errorf(ctx, TG_ESHAPE, "%s.data: one number for a shape of %lld elements",
                      where, (long long)n);
            return NULL;
        }
        rc = store_elem(&st, jdata);
    } else {
        int64_t nshape[TG_MAX_NDIM];
        int nnd = 0;
        nested_shape(jdata, nshape, &nnd);
        if (nnd == 1 && vnd != 1)
            rc = fill_nested(&st, jdata, 0, 1, &n); /* flat C-order list */
        else
            rc = fill_nested(&st, jdata, 0, vnd, vshape);
        if (!rc && st.pos != n)
            rc = tg_errorf(ctx, TG_ELOAD, "%s.data: %lld elements for a shape of %lld",
                           where, (long long)st.pos, (long long)n);
    }
    if (rc) {
        tg_array_free(a);
        return NULL;
    }
    return a;
}

/* ---- writing ---- */

static json_object *elem_json(const tg_array *a, const char *p) {
    switch (tg_dtype_kind(a->dtype)) {
    case 'b': return json_object_new_boolean(*(const uint8_t *)p != 0);
    case 'i': return json_object_new_int64(tg_load_i64(a->dtype, p));
    case 'u':
        if (a->dtype == TG_UINT64) return json_object_new_uint64(*(const uint64_t *)p);
        return json_object_new_int64(tg_load_i64(a->dtype, p));
    default: {
        double v = tg_load_f64(a->dtype, p);
        if (isnan(v)) return json_object_new_string("nan");
        if (isinf(v)) return json_object_new_string(v > 0 ? "inf" : "-inf");
        return json_object_new_double(v);
    }
    }
}

static json_object *nested_json(const tg_array *a, int d, const char *p) {
    if (d == a->ndim) return elem_json(a, p);
    json_object *arr = json_object_new_array_ext((int)a->shape[d]);
    for (int64_t i = 0; i < a->shape[d]; i++)
        json_object_array_add(arr, nested_json(a, d + 1, p + i * a->strides[d]));
    return arr;
}

json_object *tg_value_to_json(const tg_array *a) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "dtype", json_object_new_string(tg_dtype_name(a->dtype)));
    json_object *s = json_object_new_array();
    for (int i = 0; i < a->ndim; i++) json_object_array_add(s, json_object_new_int64(a->shape[i]));
    json_object_object_add(o, "shape", s);
    int64_t n = tg_array_size_inline(a);
    if (n <= 256) {
        json_object_object_add(o, "data", nested_json(a, 0, a->data));
    } else {
        tg_array *c = tg_array_is_contiguous(a) ? tg_array_ref((tg_array *)a)
                                                : tg_array_copy(a, a->dtype);
        char *b = c ? tg_base64_encode(c->data, (size_t)n * tg_dtype_size(a->dtype)) : NULL;
        json_object_object_add(o, "base64", json_object_new_string(b ? b : ""));
        tg_free(b);
        tg_array_free(c);
    }
    return o;
}
