/* NumPy .npy files: versions 1, 2 and 3; every dtype of tg in either byte
 * order; C and Fortran order. The header is a Python dict literal that we
 * parse strictly: anything unexpected (object arrays, pickles, structured
 * dtypes, a shape that does not match the data) is refused. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "io/io.h"
#include "tensor/tensor.h"

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

typedef struct hdr_parse {
    const char *s, *end;
} hdr_parse;

static void skip_ws(hdr_parse *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n'))
        p->s++;
}

static bool eat(hdr_parse *p, char c) {
    skip_ws(p);
    if (p->s < p->end && *p->s == c) {
        p->s++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes (enough for .npy keys and dtype
 * descriptors). */
static bool parse_str(hdr_parse *p, char *out, size_t size) {
    skip_ws(p);
    if (p->s >= p->end || (*p->s != '\'' && *p->s != '"')) return false;
    char q = *p->s++;
    size_t k = 0;
    while (p->s < p->end && *p->s != q) {
        if (*p->s == '\\' || k + 1 >= size) return false;
        out[k++] = *p->s++;
    }
    if (p->s >= p->end) return false;
    p->s++;
    out[k] = 0;
    return true;
}

static int dtype_from_descr(const char *d, bool *swap) {
    char order = d[0];
    const char *t = d + 1;
    static const struct {
        const char *code;
        tg_dtype dt;
    } codes[] = {{"b1", TG_BOOL},    {"i1", TG_INT8},     {"i2", TG_INT16},
                 {"i4", TG_INT32},   {"i8", TG_INT64},    {"u1", TG_UINT8},
                 {"u2", TG_UINT16},  {"u4", TG_UINT32},   {"u8", TG_UINT64},
                 {"f2", TG_FLOAT16}, {"f4", TG_FLOAT32},  {"f8", TG_FLOAT64}};
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return -1;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(t, codes[i].code) == 0) {
            size_t sz = tg_dtype_size(codes[i].dt);
            if (order == '|' && sz != 1) return -1;
            *swap = order == '>' && sz > 1;
            return (int)codes[i].dt;
        }
    return -1;
}

static void swap_bytes(char *p, int64_t n, size_t sz) {
    for (int64_t i = 0; i < n; i++, p += sz)
        for (size_t a = 0, b = sz - 1; a < b; a++, b--) {
            char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

tg_array *tg_npy_load_mem(const void *buf, size_t len, const char *what,
                          tg_ctx *ctx) {
    const unsigned char *b = buf;
    if (len < 10 || memcmp(b, MAGIC, 6) != 0) {
        tg_errorf(ctx, TG_EPARSE, "%s: not a .npy file (bad magic)", what);
        return NULL;
    }
    int major = b[6];
    size_t hlen, off;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        off = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) {
            tg_errorf(ctx, TG_EPARSE, "%s: truncated .npy header", what);
            return NULL;
        }
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
               (size_t)b[11] << 24;
        off = 12;
    } else {
        tg_errorf(ctx, TG_EPARSE, "%s: unsupported .npy version %d", what, major);
        return NULL;
    }
    if (hlen > len - off || hlen > (1u << 20)) {
        tg_errorf(ctx, TG_EPARSE, "%s: .npy header length %zu runs past the end",
                  what, hlen);
        return NULL;
    }
    hdr_parse p = {(const char *)b + off, (const char *)b + off + hlen};
    char descr[32] = "", key[32];
    int have = 0, ndim = 0;
    bool fortran = false;
    int64_t shape[TG_MAX_NDIM];
    if (!eat(&p, '{')) goto bad;
    for (;;) {
        if (eat(&p, '}')) break;
        if (!parse_str(&p, key, sizeof key) || !eat(&p, ':')) goto bad;
        skip_ws(&p);
        if (strcmp(key, "descr") == 0) {
            if (!parse_str(&p, descr, sizeof descr)) {
                tg_errorf(ctx, TG_EUNSUPPORTED,
                          "%s: unsupported .npy dtype (structured or not a "
                          "string descriptor)",
                          what);
                return NULL;
            }
            have |= 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if ((size_t)(p.end - p.s) >= 4 && strncmp(p.s, "True", 4) == 0) {
                fortran = true;
                p.s += 4;
            } else if ((size_t)(p.end - p.s) >= 5 && strncmp(p.s, "False", 5) == 0) {
                fortran = false;
                p.s += 5;
            } else
                goto bad;
            have |= 2;
        } else if (strcmp(key, "shape") == 0) {
            if (!eat(&p, '(')) goto bad;
            for (;;) {
                if (eat(&p, ')')) break;
                skip_ws(&p);
                if (p.s >= p.end || !isdigit((unsigned char)*p.s)) goto bad;
                int64_t v = 0;
                while (p.s < p.end && isdigit((unsigned char)*p.s)) {
                    if (v > (INT64_MAX - 9) / 10) goto bad;
                    v = v * 10 + (*p.s++ - '0');
                }
                if (p.s < p.end && *p.s == 'L') p.s++;
                if (ndim >= TG_MAX_NDIM) {
                    tg_errorf(ctx, TG_EUNSUPPORTED,
                              "%s: more than %d dimensions", what, TG_MAX_NDIM);
                    return NULL;
                }
                shape[ndim++] = v;
                if (eat(&p, ',')) continue;
                if (eat(&p, ')')) break;
                goto bad;
            }
            have |= 4;
        } else {
            goto bad;
        }
        if (eat(&p, ',')) continue;
        if (eat(&p, '}')) break;
        goto bad;
    }
    if (have != 7) goto bad;
    bool swap = false;
    int dt = dtype_from_descr(descr, &swap);
    if (dt < 0) {
        tg_errorf(ctx, TG_EUNSUPPORTED,
                  "%s: unsupported .npy dtype '%s' (object, pickled, complex, "
                  "string and structured arrays are refused)",
                  what, descr);
        return NULL;
    }
    int64_t n = tg_shape_size(ndim, shape), nbytes;
    size_t isz = tg_dtype_size((tg_dtype)dt);
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)isz, &nbytes)) {
        tg_errorf(ctx, TG_EPARSE, "%s: absurd .npy shape", what);
        return NULL;
    }
    size_t data_off = off + hlen;
    if ((uint64_t)nbytes > len - data_off) {
        tg_errorf(ctx, TG_EPARSE,
                  "%s: truncated .npy data: the header promises %lld bytes, "
                  "the file holds %zu",
                  what, (long long)nbytes, len - data_off);
        return NULL;
    }
    tg_array *a;
    if (!fortran || ndim < 2) {
        a = tg_array_new_from((tg_dtype)dt, ndim, shape, b + data_off);
        if (!a) goto oom;
    } else {
        /* Fortran order: the data is the C-order transpose. */
        int64_t rshape[TG_MAX_NDIM];
        int axes[TG_MAX_NDIM];
        for (int i = 0; i < ndim; i++) {
            rshape[i] = shape[ndim - 1 - i];
            axes[i] = ndim - 1 - i;
        }
        tg_array *t = tg_array_new_from((tg_dtype)dt, ndim, rshape, b + data_off);
        if (!t) goto oom;
        tg_array *v = tg_array_view_transpose(t, axes, ctx);
        tg_array_free(t);
        if (!v) return NULL;
        a = tg_array_copy(v, (tg_dtype)dt);
        tg_array_free(v);
        if (!a) goto oom;
    }
    if (swap) swap_bytes(a->data, n, isz);
    if (dt == TG_BOOL)
        for (int64_t i = 0; i < n; i++)
            if (((unsigned char *)a->data)[i] > 1) {
                tg_array_free(a);
                tg_errorf(ctx, TG_EPARSE, "%s: bool data holds a byte other than 0 or 1",
                          what);
                return NULL;
            }
    return a;
bad:
    tg_errorf(ctx, TG_EPARSE, "%s: malformed .npy header", what);
    return NULL;
oom:
    tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", what);
    return NULL;
}

tg_array *tg_npy_load(const char *path, tg_ctx *ctx) {
    size_t len;
    char *buf = tg_file_read(path, &len, ctx);
    if (!buf) return NULL;
    tg_array *a = tg_npy_load_mem(buf, len, path, ctx);
    tg_free(buf);
    return a;
}

static const char *descr_of(tg_dtype dt) {
    static const char *const d[TG_NDTYPES] = {"|b1", "|i1", "<i2", "<i4",
                                              "<i8", "|u1", "<u2", "<u4",
                                              "<u8", "<f2", "<f4", "<f8"};
    return d[dt];
}

int tg_npy_save(const char *path, const tg_array *a, tg_ctx *ctx) {
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr_of(a->dtype));
    for (int i = 0; i < a->ndim; i++)
        k += snprintf(hdr + k, sizeof hdr - (size_t)k, "%lld,%s",
                      (long long)a->shape[i], i + 1 < a->ndim ? " " : "");
    if (a->ndim > 1) k--; /* NumPy writes (2, 3) but (3,) */
    k += snprintf(hdr + k, sizeof hdr - (size_t)k, "), }");
    /* Pad with spaces so that the data starts at a multiple of 64, newline
     * last. */
    size_t total = 10 + (size_t)k + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)k + pad + 1;
    int64_t n = tg_array_size_inline(a);
    size_t isz = tg_dtype_size(a->dtype), nbytes = (size_t)n * isz;
    size_t flen = 10 + hlen + nbytes;
    char *out = tg_malloc(flen);
    if (!out) return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
    memcpy(out, MAGIC, 6);
    out[6] = 1;
    out[7] = 0;
    out[8] = (char)(hlen & 0xff);
    out[9] = (char)(hlen >> 8);
    memcpy(out + 10, hdr, (size_t)k);
    memset(out + 10 + k, ' ', pad);
    out[10 + hlen - 1] = '\n';
    tg_array *c = NULL;
    if (tg_array_is_contiguous(a)) {
        if (nbytes) memcpy(out + 10 + hlen, a->data, nbytes);
    } else {
        c = tg_array_copy(a, a->dtype);
        if (!c) {
            tg_free(out);
            return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
        }
        if (nbytes) memcpy(out + 10 + hlen, c->data, nbytes);
        tg_array_free(c);
    }
    int rc = tg_file_write_atomic(path, out, flen, ctx);
    tg_free(out);
    return rc;
}
