/* Values and types in JSON (FORMAT.md sections 2 and 5), ids, base64.
 *
 * Everything here reads hostile input: sizes come from the file, so no
 * allocation is made before the JSON is known to hold the data it claims
 * (data is walked once to validate and count, then once to store; base64
 * must have exactly the length the shape needs).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "tensor/tensor.h"

bool tg_id_valid(const char *id) {
    if (!id) return false;
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

/* JSON Schema's "integer" is any number with no fractional part, so 3.0
 * counts: accept what the schema accepts. */
bool tg_json_int_past_int64(json_object *o) {
    return json_object_is_type(o, json_type_int) && json_object_get_int64(o) == INT64_MAX &&
           json_object_get_uint64(o) > (uint64_t)INT64_MAX;
}

bool tg_json_get_int(json_object *o, int64_t *out) {
    if (json_object_is_type(o, json_type_int)) {
        if (tg_json_int_past_int64(o)) return false;
        *out = json_object_get_int64(o);
        return true;
    }
    if (json_object_is_type(o, json_type_double)) {
        double d = json_object_get_double(o);
        if (!(d == floor(d)) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
            return false;
        *out = (int64_t)d;
        return true;
    }
    return false;
}

const char *tg_json_error_text(enum json_tokener_error e) {
#define TG_STR2(x) #x
#define TG_STR(x) TG_STR2(x)
    if (e == json_tokener_error_depth)
        return "nested more than " TG_STR(TG_JSON_DEPTH) " levels deep (the parser's limit)";
    if (e == json_tokener_continue) return "unexpected end of input";
    return json_tokener_error_desc(e);
}

const char tg_json_not_object[] = "expected a JSON object";

/* json-c, strict or not, reads a string in single quotes ('a'), which
 * JSON does not have: the text's first single quote outside a string in
 * double quotes (text json-c took, whose structure is sound up to
 * there), or len. tg's own walks of the text (the NUL search, the huge
 * integers) know only double quotes: a single-quoted string holding a
 * double quote or a bracket led the NUL search's stack below its
 * first frame. */
static size_t single_quote_at(const char *s, size_t len) {
    if (!memchr(s, '\'', len)) return len;
    /* (memchr from quote to quote: a file of traces whose code quotes
     * with ' is scanned at memchr's speed, not a byte at a time) */
    size_t i = 0;
    while (i < len) {
        const char *dq = memchr(s + i, '"', len - i);
        size_t open = dq ? (size_t)(dq - s) : len;
        const char *sq = memchr(s + i, '\'', open - i);
        if (sq) return (size_t)(sq - s);
        if (!dq) return len;
        /* the string's end: the first " after an even run of backslashes */
        size_t j = open + 1;
        for (;;) {
            const char *c = memchr(s + j, '"', len - j);
            if (!c) return len;
            size_t k = (size_t)(c - s), b = 0;
            while (k - b > open + 1 && s[k - b - 1] == '\\') b++;
            j = k + 1;
            if (b % 2 == 0) break;
        }
        i = j;
    }
    return len;
}

json_object *tg_json_parse_object(json_tokener *tok, const char *s, size_t len, int depth,
                                  tg_json_fail *fail) {
    *fail = (tg_json_fail){TG_OK, 0, NULL};
    if (len > (size_t)INT32_MAX) {
        *fail = (tg_json_fail){TG_EPARSE, 0, "too large for the JSON parser"};
        return NULL;
    }
    json_tokener *own = tok ? NULL : json_tokener_new_ex(depth);
    if (!tok && !(tok = own)) {
        fail->status = TG_ENOMEM;
        return NULL;
    }
    json_tokener_reset(tok);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(tok, s, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok), rest = end;
    if (jerr == json_tokener_continue && !o) {
        /* A number or literal that ends the text (`5`, `null`) waits for
         * a character that ends it: the end of the input is one. (Other
         * text the input ends too early stays unfinished.) */
        o = json_tokener_parse_ex(tok, "", 1);
        /* (`null` parses to NULL) */
        if (json_tokener_get_error(tok) == json_tokener_success) jerr = json_tokener_success;
    }
    if (own) json_tokener_free(own);
    while (rest < len && (s[rest] == ' ' || s[rest] == '\n' || s[rest] == '\t' || s[rest] == '\r')) rest++;
    fail->at = end;
    if (jerr != json_tokener_success) {
        *fail = (tg_json_fail){TG_EPARSE, end, tg_json_error_text(jerr)};
    } else if (!o && rest < len) {
        fail->status = TG_ENOMEM; /* stopped short, with nothing to say */
    } else if (rest < len) {
        *fail = (tg_json_fail){TG_EPARSE, rest, "text after the end"};
    } else if (!json_object_is_type(o, json_type_object)) {
        *fail = (tg_json_fail){TG_EPARSE, 0, tg_json_not_object};
    } else if ((rest = single_quote_at(s, len)) < len) {
        *fail = (tg_json_fail){TG_EPARSE, rest, "a string in single quotes (JSON's strings take double quotes)"};
    }
    if (fail->status) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

void tg_json_line_col(const char *s, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && s[i]; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* ---- NUL characters ---- */

/* One container on the way to a string: an array and the index in it, or
 * an object and its current key (an offset and length in the text, as
 * written, escapes and all). */
typedef struct nul_frame {
    bool arr;
    long idx;
    size_t key, klen;
} nul_frame;

/* The JSON path of frames 0..d into buf (cap > 8): "variables[0].name".
 * A key is quoted as written, cut to 64 bytes at a character boundary; a
 * path that does not fit ends in "...". */
static void nul_path(const char *t, const nul_frame *st, int d, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int j = 0; j <= d; j++) {
        char comp[96];
        size_t m;
        if (st[j].arr) {
            m = (size_t)snprintf(comp, sizeof comp, "[%ld]", st[j].idx);
        } else {
            size_t k = st[j].klen;
            bool cut = k > 64;
            if (cut)
                for (k = 64; k && ((unsigned char)t[st[j].key + k] & 0xc0) == 0x80; k--) {}
            m = (size_t)snprintf(comp, sizeof comp, "%s%.*s%s", j ? "." : "", (int)k, t + st[j].key,
                                 cut ? "..." : "");
        }
        if (n + m + 4 > cap) {
            memcpy(buf + n, "...", 4);
            return;
        }
        memcpy(buf + n, comp, m + 1);
        n += m;
    }
}

/* (io.h.) Run on text json-c parsed: the walk trusts its syntax. The
 * search for the six characters comes first, so that a text without one
 * costs a memmem. */
bool tg_json_find_nul(const char *t, size_t len, char *buf, size_t cap) {
    if (!memmem(t, len, "\\u0000", 6)) return false;
    nul_frame st[TG_JSON_DEPTH + 1];
    int d = -1;
    bool want_key = false;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (c == '{' || c == '[') {
            if (++d > TG_JSON_DEPTH) return false;
            st[d] = (nul_frame){c == '[', 0, 0, 0};
            want_key = c == '{';
        } else if ((c == '}' || c == ']') && d >= 0) {
            d--;
        } else if (c == ',' && d >= 0) {
            if (st[d].arr)
                st[d].idx++;
            else
                want_key = true;
        } else if (c == '"') {
            size_t b = ++i;
            bool nul = false;
            for (; i < len && t[i] != '"'; i++)
                if (t[i] == '\\') {
                    if (i + 5 < len && !memcmp(t + i + 1, "u0000", 5)) nul = true;
                    i++;
                }
            if (d >= 0 && !st[d].arr && want_key) {
                st[d].key = b;
                st[d].klen = i - b;
                want_key = false;
            }
            if (nul && d >= 0) {
                nul_path(t, st, d, buf, cap);
                return true;
            }
        }
    }
    return false;
}

/* ---- base64 ---- */

static const char B64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int64_t tg_json_find_huge_int(const char *t, size_t len) {
    static const char MINUS[] = "9223372036854775808", PLUS[] = "18446744073709551615";
    size_t i = 0;
    while (i < len) {
        char c = t[i];
        if (c == '"') { /* skip the string, escapes and all */
            for (i++; i < len && t[i] != '"'; i++)
                if (t[i] == '\\') i++;
            i++;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) {
            i++;
            continue;
        }
        size_t start = i, d0 = c == '-' ? i + 1 : i, d = d0;
        while (d < len && t[d] >= '0' && t[d] <= '9') d++;
        size_t e = d;
        while (e < len && (t[e] == '.' || t[e] == 'e' || t[e] == 'E' || t[e] == '+' || t[e] == '-' ||
                           (t[e] >= '0' && t[e] <= '9')))
            e++;
        /* an integer: digits only; leading zeros are not JSON, but count
         * the digits from the first nonzero one all the same */
        if (e == d) {
            size_t nz = d0;
            while (nz + 1 < d && t[nz] == '0') nz++;
            const char *lim = c == '-' ? MINUS : PLUS;
            size_t nd = d - nz, nl = strlen(lim);
            if (nd > nl || (nd == nl && memcmp(t + nz, lim, nl) > 0)) return (int64_t)start;
        }
        i = e > i ? e : i + 1;
    }
    return -1;
}

char *tg_base64_encode(const void *data, size_t n) {
    const unsigned char *p = data;
    if (n > (SIZE_MAX - 8) / 4 * 3) return NULL;
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

/* The number of bytes a padded base64 text of len characters holds, or
 * (size_t)-1 when the length or the padding is malformed. */
static size_t b64_decoded_len(const char *s, size_t len) {
    if (len % 4) return (size_t)-1;
    size_t pad = 0;
    if (len && s[len - 1] == '=') pad++;
    if (len > 1 && s[len - 2] == '=') {
        if (!pad) return (size_t)-1;
        pad++;
    }
    return len / 4 * 3 - pad;
}

/* Decode into out, which holds exactly b64_decoded_len bytes. */
static bool b64_decode_into(const char *s, size_t len, unsigned char *out) {
    size_t n = b64_decoded_len(s, len), o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            /* '=' only as the padding of the last group */
            if (s[i + k] == '=' && i + 4 == len && k >= 2 && (k == 3 || s[i + 3] == '=')) {
                v[k] = 0;
                continue;
            }
            if ((v[k] = b64val(s[i + k])) < 0) return false;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        if (o < n) out[o++] = (unsigned char)(w >> 16);
        if (o < n) out[o++] = (unsigned char)(w >> 8);
        if (o < n) out[o++] = (unsigned char)w;
    }
    return true;
}

void *tg_base64_decode(const char *s, size_t len, size_t *out_n) {
    size_t n = b64_decoded_len(s, len);
    if (n == (size_t)-1) return NULL;
    unsigned char *out = tg_malloc(n + 1);
    if (!out) return NULL;
    if (!b64_decode_into(s, len, out)) {
        tg_free(out);
        return NULL;
    }
    *out_n = n;
    return out;
}

/* ---- types ---- */

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
            return tg_errorf(ctx, TG_ELOAD, "%s.%.100s: unknown key", where, key);
    }
    if (!jd || !json_object_is_type(jd, json_type_string))
        return tg_errorf(ctx, TG_ELOAD, "%s.dtype: expected a dtype name", where);
    tg_dtype dt = tg_dtype_from_name(json_object_get_string(jd));
    if (dt == TG_DTYPE_INVALID)
        return tg_errorf(ctx, TG_ELOAD,
                         "%s.dtype: unknown dtype '%.40s' (expected bool, int8..int64, "
                         "uint8..uint64, float16, float32 or float64)",
                         where, json_object_get_string(jd));
    if (json_object_object_get_ex(o, "shape", NULL) &&
        json_object_object_get_ex(o, "broadcastable", NULL))
        return tg_errorf(ctx, TG_ELOAD, "%s: give shape or broadcastable, not both", where);
    bool is_shape = !jb;
    json_object *arr = is_shape ? js : jb;
    const char *what = is_shape ? "shape" : "broadcastable";
    if (!json_object_object_get_ex(o, what, NULL))
        return tg_errorf(ctx, TG_ELOAD, "%s: missing shape", where);
    if (!json_object_is_type(arr, json_type_array))
        return tg_errorf(ctx, TG_ELOAD, "%s.%s: expected an array", where, what);
    size_t n = json_object_array_length(arr);
    if (n > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ELOAD, "%s.%s: %zu dimensions (at most %d)", where, what, n,
                         TG_MAX_NDIM);
    tg_type r = {dt, (int)n, {0}};
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(arr, i);
        int64_t v;
        if (is_shape) {
            if (!e)
                r.shape[i] = -1;
            else if (tg_json_get_int(e, &v) && v >= 0)
                r.shape[i] = v;
            else if (json_object_is_type(e, json_type_int) && tg_json_int_past_int64(e))
                return tg_errorf(ctx, TG_ELOAD, "%s.shape[%zu]: the length %s is too large (at most 2^63 - 1)",
                                 where, i, json_object_to_json_string(e));
            else
                return tg_errorf(ctx, TG_ELOAD,
                                 "%s.shape[%zu]: expected a non-negative integer or null", where,
                                 i);
        } else {
            if (!json_object_is_type(e, json_type_boolean))
                return tg_errorf(ctx, TG_ELOAD, "%s.broadcastable[%zu]: expected true or false",
                                 where, i);
            r.shape[i] = json_object_get_boolean(e) ? 1 : -1;
        }
    }
    if (!tg_type_fits(&r)) {
        char buf[200];
        tg_type_str(&r, buf, sizeof buf);
        return tg_errorf(ctx, TG_ELOAD, "%s.shape: %s holds more than 2^63 - 1 bytes", where, buf);
    }
    *t = r;
    return TG_OK;
}

void tg_json_put(json_object *o, const char *key, json_object *val, bool *ok) {
    if (!val || !o || json_object_object_add(o, key, val) != 0) {
        json_object_put(val);
        *ok = false;
    }
}

void tg_json_push(json_object *arr, json_object *val, bool *ok) {
    if (!val || !arr || json_object_array_add(arr, val) != 0) {
        json_object_put(val);
        *ok = false;
    }
}

json_object *tg_type_to_json(const tg_type *t) {
    bool ok = true;
    json_object *o = json_object_new_object(), *s = json_object_new_array();
    tg_json_put(o, "dtype", json_object_new_string(tg_dtype_name(t->dtype)), &ok);
    for (int i = 0; i < t->ndim && s; i++) {
        if (t->shape[i] >= 0)
            tg_json_push(s, json_object_new_int64(t->shape[i]), &ok);
        else if (json_object_array_add(s, NULL) != 0)
            ok = false;
    }
    tg_json_put(o, "shape", s, &ok);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* ---- values ---- */

/* Nested-list shape: the length of each level along the first elements. */
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

/* The data walk: a first pass with a == NULL validates and counts, the
 * second stores into a. */
typedef struct fill_state {
    tg_array *a;
    tg_dtype dt;
    int64_t pos, n;
    const char *where;
    tg_ctx *ctx;
} fill_state;

/* An integer element: v, or (when big) the uint64 u above INT64_MAX. */
static int store_int(fill_state *st, char *p, int64_t v, bool big, uint64_t u) {
    tg_dtype dt = st->dt;
    char k = tg_dtype_kind(dt);
    size_t bits = tg_dtype_size(dt) * 8;
    bool fits;
    switch (k) {
    case 'f':
        if (p) tg_store_f64(dt, p, big ? (double)u : (double)v);
        return TG_OK;
    case 'b':
        if (big || (v != 0 && v != 1))
            return tg_errorf(st->ctx, TG_ELOAD,
                             "%s.data[%lld]: not a bool (true, false, 0 or 1)", st->where,
                             (long long)st->pos);
        if (p) *(uint8_t *)p = (uint8_t)v;
        return TG_OK;
    case 'u':
        fits = big ? bits == 64 : v >= 0 && (bits == 64 || v < (INT64_C(1) << bits));
        break;
    default:
        fits = !big && (bits == 64 || (v >= -(INT64_C(1) << (bits - 1)) &&
                                       v < (INT64_C(1) << (bits - 1))));
        break;
    }
    if (!fits) {
        if (big)
            return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %llu does not fit %s",
                             st->where, (long long)st->pos, (unsigned long long)u,
                             tg_dtype_name(dt));
        return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %lld does not fit %s", st->where,
                         (long long)st->pos, (long long)v, tg_dtype_name(dt));
    }
    if (p) {
        if (dt == TG_UINT64) {
            uint64_t w = big ? u : (uint64_t)v;
            memcpy(p, &w, 8);
        } else {
            tg_store_i64(dt, p, v);
        }
    }
    return TG_OK;
}

static int store_elem(fill_state *st, json_object *e) {
    if (st->pos >= st->n)
        return tg_errorf(st->ctx, TG_ELOAD, "%s.data: more elements than the shape holds (%lld)",
                         st->where, (long long)st->n);
    tg_dtype dt = st->dt;
    char *p = st->a ? st->a->data + st->pos * (int64_t)tg_dtype_size(dt) : NULL;
    char k = tg_dtype_kind(dt);
    int rc = TG_OK;
    switch (json_object_get_type(e)) {
    case json_type_boolean:
        if (p) tg_store_i64(dt, p, json_object_get_boolean(e) ? 1 : 0);
        break;
    case json_type_int: {
        int64_t v = json_object_get_int64(e);
        uint64_t u = json_object_get_uint64(e);
        rc = store_int(st, p, v, v == INT64_MAX && u > (uint64_t)INT64_MAX, u);
        break;
    }
    case json_type_double: {
        double v = json_object_get_double(e);
        if (k == 'f') {
            if (p) tg_store_f64(dt, p, v);
            break;
        }
        if (v != floor(v))
            return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %g is not a valid %s",
                             st->where, (long long)st->pos, v, tg_dtype_name(dt));
        if (v >= -9223372036854775808.0 && v < 9223372036854775808.0)
            rc = store_int(st, p, (int64_t)v, false, 0);
        else if (v >= 0 && v < 18446744073709551616.0)
            rc = store_int(st, p, INT64_MAX, true, (uint64_t)v);
        else
            return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %g does not fit %s",
                             st->where, (long long)st->pos, v, tg_dtype_name(dt));
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
                             "%s.data[%lld]: unexpected string '%.40s' (only \"nan\", \"inf\", "
                             "\"-inf\")",
                             st->where, (long long)st->pos, s);
        if (k != 'f')
            return tg_errorf(st->ctx, TG_ELOAD, "%s.data[%lld]: %s in a %s value", st->where,
                             (long long)st->pos, s, tg_dtype_name(dt));
        if (p) tg_store_f64(dt, p, v);
        break;
    }
    default:
        return tg_errorf(st->ctx, TG_ELOAD,
                         "%s.data[%lld]: expected a number, a boolean or \"nan\"/\"inf\"/\"-inf\"",
                         st->where, (long long)st->pos);
    }
    if (rc) return rc;
    st->pos++;
    return TG_OK;
}

/* Nested data must be rectangular: depth d has length shape[d]. */
static int fill_nested(fill_state *st, json_object *d, int depth, int ndim,
                       const int64_t *shape) {
    if (depth == ndim) {
        if (json_object_is_type(d, json_type_array))
            return tg_errorf(st->ctx, TG_ELOAD,
                             "%s.data: nested deeper than the shape's %d dimensions", st->where,
                             ndim);
        return store_elem(st, d);
    }
    if (!json_object_is_type(d, json_type_array) ||
        (int64_t)json_object_array_length(d) != shape[depth])
        return tg_errorf(st->ctx, TG_ELOAD,
                         "%s.data: does not match the shape (dimension %d should have %lld "
                         "entries)",
                         st->where, depth, (long long)shape[depth]);
    size_t n = json_object_array_length(d);
    for (size_t i = 0; i < n; i++) {
        int rc = fill_nested(st, json_object_array_get_idx(d, i), depth + 1, ndim, shape);
        if (rc) return rc;
    }
    return TG_OK;
}

/* "(2, ?)"; s NULL: every length unknown. */
void tg_shape_text(int nd, const int64_t *s, char *buf, size_t size) {
    size_t o = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < nd && o < size; i++) {
        if (!s || s[i] < 0)
            o += (size_t)snprintf(buf + o, size - o, "%s?", i ? ", " : "");
        else
            o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)s[i]);
    }
    if (o < size) snprintf(buf + o, size - o, "%s)", nd == 1 ? "," : "");
}

/* Walk data against the shape: a scalar for a one-element shape, a flat
 * list in C order, or nested lists matching the shape. */
static int fill(fill_state *st, json_object *data, int nd, const int64_t *shape) {
    st->pos = 0;
    int rc;
    if (!json_object_is_type(data, json_type_array)) {
        if (st->n != 1)
            return tg_errorf(st->ctx, TG_ESHAPE,
                             "%s.data: one number for a shape of %lld elements", st->where,
                             (long long)st->n);
        rc = store_elem(st, data);
    } else {
        int64_t dshape[TG_MAX_NDIM];
        int dnd = 0;
        if (nested_shape(data, dshape, &dnd) == 0 && dnd == 1 && nd != 1) {
            /* a flat C-order list */
            if (dshape[0] != st->n) {
                char sh[160];
                tg_shape_text(nd, shape, sh, sizeof sh);
                return tg_errorf(st->ctx, TG_ELOAD, "%s.data: %lld elements for a shape of %lld %s",
                                 st->where, (long long)dshape[0], (long long)st->n, sh);
            }
            rc = fill_nested(st, data, 0, 1, &st->n);
        } else
            rc = fill_nested(st, data, 0, nd, shape);
    }
    if (!rc && st->pos != st->n)
        rc = tg_errorf(st->ctx, TG_ELOAD, "%s.data: %lld elements for a shape of %lld",
                       st->where, (long long)st->pos, (long long)st->n);
    return rc;
}

/* A value's shape must fit the variable's type exactly (FORMAT.md s3):
 * same number of dimensions, every static length equal. */
static bool shape_agrees(int vnd, const int64_t *vshape, int ndim, const int64_t *shape,
                         const char *where, tg_ctx *ctx) {
    if (ndim < 0) return true;
    bool ok = vnd == ndim;
    for (int i = 0; ok && shape && i < ndim; i++) ok = shape[i] < 0 || shape[i] == vshape[i];
    if (!ok) {
        char want[160], got[160];
        tg_shape_text(ndim, shape, want, sizeof want);
        tg_shape_text(vnd, vshape, got, sizeof got);
        tg_errorf(ctx, TG_ESHAPE, "%s: the value has shape %s, but the variable's type says %s",
                  where, got, want);
    }
    return ok;
}

static tg_array *value_npy(json_object *jnpy, const char *dir, const char *where,
                           tg_ctx *ctx) {
    if (!json_object_is_type(jnpy, json_type_string)) {
        tg_errorf(ctx, TG_ELOAD, "%s.npy: expected a path", where);
        return NULL;
    }
    const char *rel = json_object_get_string(jnpy);
    /* Relative, inside the graph's folder: no absolute path, no "..",
     * no backslash (a Windows separator). */
    if (rel[0] == '/' || rel[0] == 0 || strstr(rel, "..") || strchr(rel, '\\') ||
        (size_t)json_object_get_string_len(jnpy) != strlen(rel)) {
        tg_errorf(ctx, TG_ELOAD,
                  "%s.npy: '%.200s' leaves the graph's folder (no absolute paths, no ..)", where,
                  rel);
        return NULL;
    }
    if (!dir) {
        tg_errorf(ctx, TG_ELOAD, "%s.npy: npy values need a graph loaded from a file", where);
        return NULL;
    }
    tg_str path = {0};
    tg_str_addf(&path, "%s/%s", dir, rel);
    if (path.oom || !path.s) {
        tg_str_free(&path);
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    tg_array *a = tg_npy_load(path.s, ctx);
    tg_str_free(&path);
    if (!a) tg_error_prefix(ctx, "%s.npy", where);
    return a;
}

tg_array *tg_value_from_json(json_object *v, tg_dtype dt, int ndim,
                             const int64_t *shape, const char *dir,
                             const char *where, bool *weak, tg_ctx *ctx) {
    if (weak) *weak = false;
    json_object *jdata = NULL, *jb64 = NULL, *jnpy = NULL, *jd = NULL, *js = NULL;
    /* presence, not value: {"dtype": null} is an error, not a default */
    bool has_data = false, has_b64 = false, has_npy = false, has_dt = false, has_shape = false;
    switch (json_object_get_type(v)) {
    case json_type_int:
    case json_type_double:
    case json_type_boolean:
        jdata = v;
        has_data = true;
        break;
    case json_type_object: {
        json_object_object_foreach(v, key, val) {
            if (strcmp(key, "data") == 0) {
                jdata = val;
                has_data = true;
            } else if (strcmp(key, "base64") == 0) {
                jb64 = val;
                has_b64 = true;
            } else if (strcmp(key, "npy") == 0) {
                jnpy = val;
                has_npy = true;
            } else if (strcmp(key, "dtype") == 0) {
                jd = val;
                has_dt = true;
            } else if (strcmp(key, "shape") == 0) {
                js = val;
                has_shape = true;
            } else {
                tg_errorf(ctx, TG_ELOAD, "%s.%.100s: unknown key in a value", where, key);
                return NULL;
            }
        }
        if (has_data + has_b64 + has_npy != 1) {
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
    bool scalar_data = has_data && !json_object_is_type(jdata, json_type_array);

    /* dtype: the value's, else the variable's */
    tg_dtype vdt = dt;
    if (has_dt) {
        if (!json_object_is_type(jd, json_type_string) ||
            (vdt = tg_dtype_from_name(json_object_get_string(jd))) == TG_DTYPE_INVALID) {
            tg_errorf(ctx, TG_ELOAD, "%s.dtype: unknown dtype", where);
            return NULL;
        }
        if (dt != TG_DTYPE_INVALID && vdt != dt) {
            tg_errorf(ctx, TG_ETYPE, "%s.dtype: %s, but the variable is %s", where,
                      tg_dtype_name(vdt), tg_dtype_name(dt));
            return NULL;
        }
    }
    /* shape: the value's, else the variable's static one */
    int64_t vshape[TG_MAX_NDIM] = {0};
    int vnd = 0;
    bool shape_known = false;
    if (has_shape) {
        if (!json_object_is_type(js, json_type_array) ||
            json_object_array_length(js) > TG_MAX_NDIM) {
            tg_errorf(ctx, TG_ELOAD, "%s.shape: expected an array of at most %d lengths", where,
                      TG_MAX_NDIM);
            return NULL;
        }
        vnd = (int)json_object_array_length(js);
        for (int i = 0; i < vnd; i++) {
            if (!tg_json_get_int(json_object_array_get_idx(js, (size_t)i), &vshape[i]) ||
                vshape[i] < 0) {
                tg_errorf(ctx, TG_ELOAD, "%s.shape[%d]: expected a non-negative integer", where,
                          i);
                return NULL;
            }
        }
        shape_known = true;
        if (!shape_agrees(vnd, vshape, ndim, shape, where, ctx)) return NULL;
    } else if (ndim >= 0 && shape) {
        bool known = true;
        for (int i = 0; i < ndim; i++) known &= shape[i] >= 0;
        if (known) {
            vnd = ndim;
            memcpy(vshape, shape, sizeof(int64_t) * (size_t)ndim);
            shape_known = true;
        }
    }
    /* With no type to lean on (an inline constant), only a scalar may leave
     * out its dtype and shape (FORMAT.md s5). */
    if (dt == TG_DTYPE_INVALID && ndim < 0 && !scalar_data && (!has_dt || !has_shape)) {
        tg_errorf(ctx, TG_ELOAD, "%s: a value needs dtype and shape unless its data is a scalar",
                  where);
        return NULL;
    }

    tg_array *a = NULL;
    if (has_npy) {
        a = value_npy(jnpy, dir, where, ctx);
        if (!a) return NULL;
        if (vdt != TG_DTYPE_INVALID && a->dtype != vdt) {
            tg_errorf(ctx, TG_ETYPE, "%s.npy: the file holds %s, but the %s is %s", where,
                      tg_dtype_name(a->dtype), has_dt ? "value" : "variable", tg_dtype_name(vdt));
            goto fail;
        }
        if (!shape_agrees(a->ndim, a->shape, shape_known ? vnd : ndim,
                          shape_known ? vshape : shape, where, ctx))
            goto fail;
        return a;
    }

    if (vdt == TG_DTYPE_INVALID) {
        /* Only a scalar gets here (checked above): it is weak. */
        if (!scalar_data) {
            tg_errorf(ctx, TG_ELOAD, "%s: a value needs a dtype (only scalars may omit it)",
                      where);
            return NULL;
        }
        json_type jt = json_object_get_type(jdata);
        vdt = jt == json_type_boolean ? TG_BOOL : jt == json_type_int ? TG_INT64 : TG_FLOAT64;
        /* An integer past int64 (to 2^64 - 1) is held as a uint64, as
         * NumPy 2 holds a Python int it meets (uint64 + 2**64 - 1 is
         * uint64) or that stands alone (np.asarray(2**64 - 1)). */
        if (jt == json_type_int && json_object_get_int64(jdata) == INT64_MAX &&
            json_object_get_uint64(jdata) > (uint64_t)INT64_MAX)
            vdt = TG_UINT64;
        if (weak) *weak = true;
    }
    if (!shape_known && has_data && !scalar_data) {
        if (nested_shape(jdata, vshape, &vnd)) {
            tg_errorf(ctx, TG_ELOAD, "%s.data: nested more than %d deep", where, TG_MAX_NDIM);
            return NULL;
        }
        shape_known = true;
    }
    if (!shape_known) vnd = 0; /* shape defaults to [] */
    /* Agree with the variable's type before anything is allocated. */
    if (!shape_agrees(vnd, vshape, ndim, shape, where, ctx)) return NULL;
    int64_t n = tg_shape_size(vnd, vshape), nbytes;
    size_t isz = tg_dtype_size(vdt);
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)isz, &nbytes)) {
        tg_errorf(ctx, TG_ELOAD, "%s.shape: the value would be larger than memory", where);
        return NULL;
    }
    if (has_b64) {
        if (!json_object_is_type(jb64, json_type_string)) {
            tg_errorf(ctx, TG_ELOAD, "%s.base64: expected a string", where);
            return NULL;
        }
        const char *s = json_object_get_string(jb64);
        size_t slen = (size_t)json_object_get_string_len(jb64);
        size_t have = b64_decoded_len(s, slen);
        if (have == (size_t)-1 || (uint64_t)have != (uint64_t)nbytes) {
            tg_errorf(ctx, TG_ELOAD,
                      "%s.base64: %zu characters do not encode the %lld bytes the shape and "
                      "dtype need",
                      where, slen, (long long)nbytes);
            return NULL;
        }
        if (!(a = tg_array_empty(vdt, vnd, vshape))) goto oom;
        if (!b64_decode_into(s, slen, (unsigned char *)a->data)) {
            tg_errorf(ctx, TG_ELOAD, "%s.base64: not valid base64", where);
            goto fail;
        }
        if (vdt == TG_BOOL)
            for (int64_t i = 0; i < n; i++)
                if (((unsigned char *)a->data)[i] > 1) {
                    tg_errorf(ctx, TG_ELOAD, "%s.base64: bool data holds a byte other than 0 or 1",
                              where);
                    goto fail;
                }
        return a;
    }
    /* data: validate and count first, so that a shape the data does not
     * back never reaches the allocator. */
    fill_state st = {NULL, vdt, 0, n, where, ctx};
    if (fill(&st, jdata, vnd, vshape)) return NULL;
    if (!(a = tg_array_empty(vdt, vnd, vshape))) goto oom;
    st.a = a;
    if (fill(&st, jdata, vnd, vshape)) goto fail;
    return a;
oom:
    tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", where);
fail:
    tg_array_free(a);
    return NULL;
}

/* ---- writing ---- */

/* The shortest text that reads back as the same value of dt, always with a
 * '.' or an exponent so that it reads back as a float (a bare weak scalar
 * must stay a float). */
json_object *tg_json_new_float(double v, tg_dtype dt) {
    char buf[40];
    /* Whole numbers as written by people: 65504.0, not 6.55e+04. */
    if (v == floor(v) && fabs(v) < 1e16) {
        tg_snprintf_c(buf, sizeof buf, "%.1f", v);
        return json_object_new_double_s(v, buf);
    }
    int lo = dt == TG_FLOAT16 ? 3 : dt == TG_FLOAT32 ? 6 : 15, hi = lo + 3;
    if (dt == TG_FLOAT64) hi = 17;
    for (int prec = lo; prec <= hi; prec++) {
        tg_snprintf_c(buf, sizeof buf, "%.*g", prec, v);
        double back = tg_strtod_c(buf, NULL);
        if (dt == TG_FLOAT32 ? (float)back == (float)v
            : dt == TG_FLOAT16 ? tg_float_to_half((float)back) == tg_float_to_half((float)v)
                               : back == v)
            break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    return json_object_new_double_s(v, buf);
}

static json_object *elem_json(const tg_array *a, const char *p) {
    switch (tg_dtype_kind(a->dtype)) {
    case 'b': return json_object_new_boolean(*(const uint8_t *)p != 0);
    case 'i': return json_object_new_int64(tg_load_i64(a->dtype, p));
    case 'u':
        if (a->dtype == TG_UINT64) {
            uint64_t u;
            memcpy(&u, p, 8);
            return json_object_new_uint64(u);
        }
        return json_object_new_int64(tg_load_i64(a->dtype, p));
    default: {
        double v = tg_load_f64(a->dtype, p);
        if (isnan(v)) return json_object_new_string("nan");
        if (isinf(v)) return json_object_new_string(v > 0 ? "inf" : "-inf");
        return tg_json_new_float(v, a->dtype);
    }
    }
}

static json_object *nested_json(const tg_array *a, int d, const char *p) {
    if (d == a->ndim) return elem_json(a, p);
    json_object *arr = json_object_new_array_ext((int)a->shape[d]);
    bool ok = arr != NULL;
    for (int64_t i = 0; ok && i < a->shape[d]; i++)
        tg_json_push(arr, nested_json(a, d + 1, p + i * a->strides[d]), &ok);
    if (!ok) {
        json_object_put(arr);
        return NULL;
    }
    return arr;
}

/* Whether the float array a holds a NaN that "nan" does not read back as:
 * one with its sign bit set (inf - inf on x86, NumPy's x + (c - c)) or another
 * payload. "nan" reads as the dtype's positive quiet NaN (what storing
 * C's NAN makes), and the format has no other spelling, so such an array
 * is written bit for bit (base64). */
static bool odd_nan(const tg_array *a, int d, const char *p, const unsigned char *canon) {
    if (d == a->ndim) {
        size_t w = tg_dtype_size(a->dtype);
        return isnan(tg_load_f64(a->dtype, p)) && memcmp(p, canon, w) != 0;
    }
    for (int64_t i = 0; i < a->shape[d]; i++)
        if (odd_nan(a, d + 1, p + i * a->strides[d], canon)) return true;
    return false;
}

json_object *tg_value_to_json(const tg_array *a) {
    bool ok = true;
    json_object *o = json_object_new_object(), *s = json_object_new_array();
    tg_json_put(o, "dtype", json_object_new_string(tg_dtype_name(a->dtype)), &ok);
    for (int i = 0; i < a->ndim; i++) tg_json_push(s, json_object_new_int64(a->shape[i]), &ok);
    tg_json_put(o, "shape", s, &ok);
    int64_t n = tg_array_size_inline(a);
    bool bits = false;
    if (n <= 256 && tg_dtype_kind(a->dtype) == 'f') {
        unsigned char canon[8] = {0};
        tg_store_f64(a->dtype, canon, NAN);
        bits = odd_nan(a, 0, a->data, canon);
    }
    if (n <= 256 && !bits) {
        tg_json_put(o, "data", nested_json(a, 0, a->data), &ok);
    } else {
        tg_array *c = tg_array_is_contiguous(a) ? tg_array_ref((tg_array *)a)
                                                : tg_array_copy(a, a->dtype);
        char *b = c ? tg_base64_encode(c->data, (size_t)n * tg_dtype_size(a->dtype)) : NULL;
        tg_json_put(o, "base64", b ? json_object_new_string(b) : NULL, &ok);
        tg_free(b);
        tg_array_free(c);
    }
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}
