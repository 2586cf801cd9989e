/* NumPy .npy files: versions 1.0, 2.0 and 3.0; every dtype of tg in either
 * byte order; C and Fortran order.
 *
 * The header is a Python dict literal, parsed strictly: exactly the keys
 * descr, fortran_order and shape; anything else (object arrays, pickles,
 * structured, complex or string dtypes, a shape whose data the file does
 * not hold) is refused with one line naming the file. Sizes are checked
 * against the file's length before anything is allocated, so a lying
 * header cannot make us allocate an absurd amount. Files are read straight
 * into the array's buffer (no second copy of the whole file). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "tensor/tensor.h"

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
/* NumPy writes headers of a few hundred bytes for tg's dtypes; this is
 * generous and bounds the work of a hostile file. */
#define HEADER_MAX 65536

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG true
#else
#define HOST_BIG false
#endif


/* ---- the header ---- */

typedef struct hdr_parse {
    const char *s, *end;
} hdr_parse;

static void skip_ws(hdr_parse *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' ||
                             *p->s == '\r'))
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

static bool eat_word(hdr_parse *p, const char *w) {
    size_t n = strlen(w);
    skip_ws(p);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n) != 0) return false;
    p->s += n;
    return true;
}

/* A quoted Python string without escapes (enough for the keys and the
 * descriptors of the dtypes we accept). */
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
    static const struct {
        const char *code;
        tg_dtype dt;
    } codes[] = {{"b1", TG_BOOL},    {"i1", TG_INT8},    {"i2", TG_INT16},
                 {"i4", TG_INT32},   {"i8", TG_INT64},   {"u1", TG_UINT8},
                 {"u2", TG_UINT16},  {"u4", TG_UINT32},  {"u8", TG_UINT64},
                 {"f2", TG_FLOAT16}, {"f4", TG_FLOAT32}, {"f8", TG_FLOAT64}};
    char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return -1;
    for (size_t i = 0; i < TG_ARRAY_LEN(codes); i++)
        if (strcmp(d + 1, codes[i].code) == 0) {
            size_t sz = tg_dtype_size(codes[i].dt);
            if (order == '|' && sz != 1) return -1;
            *swap = sz > 1 && order != '=' && order != '|' &&
                    (order == '>') != HOST_BIG;
            return (int)codes[i].dt;
        }
    return -1;
}

/* The magic string and version: the length of the preamble and header
 * (where the data starts) from the first bytes b[0..n). */
int tg_npy_parse_preamble(const unsigned char *b, size_t n, size_t file_len,
                          const char *what, size_t *hoff, size_t *hlen,
                          tg_ctx *ctx) {
    if (n < 8 || memcmp(b, MAGIC, 6) != 0)
        return tg_errorf(ctx, TG_EPARSE, "%s: not a .npy file (bad magic)", what);
    int major = b[6], minor = b[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return tg_errorf(ctx, TG_EVERSION, "%s: unsupported .npy version %d.%d",
                         what, major, minor);
    size_t off = major == 1 ? 10 : 12;
    if (n < off)
        return tg_errorf(ctx, TG_EPARSE, "%s: truncated .npy header", what);
    size_t len = (size_t)b[8] | (size_t)b[9] << 8;
    if (major > 1) len |= (size_t)b[10] << 16 | (size_t)b[11] << 24;
    if (len > HEADER_MAX)
        return tg_errorf(ctx, TG_EPARSE, "%s: .npy header too long (%zu bytes)",
                         what, len);
    if (len > file_len - off)
        return tg_errorf(ctx, TG_EPARSE,
                         "%s: .npy header length %zu runs past the end of the "
                         "file (%zu bytes)",
                         what, len, file_len);
    *hoff = off;
    *hlen = len;
    return TG_OK;
}

/* The header dict in h[0..len); file_len checks that the data is there. */
int tg_npy_parse_header(const char *h, size_t len, size_t data_off,
                        size_t file_len, const char *what, tg_npy_info *info,
                        tg_ctx *ctx) {
    hdr_parse p = {h, h + len};
    char descr[32] = "", key[32];
    int have = 0;
    info->ndim = 0;
    info->fortran = false;
    if (!eat(&p, '{')) goto bad;
    while (!eat(&p, '}')) {
        if (!parse_str(&p, key, sizeof key) || !eat(&p, ':')) goto bad;
        int bit;
        if (strcmp(key, "descr") == 0) {
            bit = 1;
            if (!parse_str(&p, descr, sizeof descr))
                return tg_errorf(ctx, TG_EUNSUPPORTED,
                                 "%s: unsupported .npy dtype (a structured "
                                 "dtype or not a plain descriptor)",
                                 what);
        } else if (strcmp(key, "fortran_order") == 0) {
            bit = 2;
            if (eat_word(&p, "True"))
                info->fortran = true;
            else if (eat_word(&p, "False"))
                info->fortran = false;
            else
                goto bad;
        } else if (strcmp(key, "shape") == 0) {
            bit = 4;
            info->ndim = 0;
            if (!eat(&p, '(')) goto bad;
            while (!eat(&p, ')')) {
                skip_ws(&p);
                if (p.s >= p.end || !isdigit((unsigned char)*p.s)) goto bad;
                int64_t v = 0;
                while (p.s < p.end && isdigit((unsigned char)*p.s)) {
                    if (v > (INT64_MAX - 9) / 10)
                        return tg_errorf(ctx, TG_EPARSE,
                                         "%s: .npy shape entry too large", what);
                    v = v * 10 + (*p.s++ - '0');
                }
                if (p.s < p.end && *p.s == 'L') p.s++; /* Python 2 longs */
                if (info->ndim >= TG_MAX_NDIM)
                    return tg_errorf(ctx, TG_EUNSUPPORTED,
                                     "%s: .npy array has more than %d dimensions",
                                     what, TG_MAX_NDIM);
                info->shape[info->ndim++] = v;
                if (!eat(&p, ',') && (skip_ws(&p), p.s < p.end && *p.s != ')'))
                    goto bad;
            }
        } else {
            return tg_errorf(ctx, TG_EPARSE, "%s: unexpected key '%s' in the .npy header",
                             what, key);
        }
        if (have & bit) goto bad; /* a key given twice */
        have |= bit;
        if (!eat(&p, ',') && (skip_ws(&p), p.s < p.end && *p.s != '}')) goto bad;
    }
    skip_ws(&p);
    if (p.s != p.end) goto bad;
    if (have != 7)
        return tg_errorf(ctx, TG_EPARSE,
                         "%s: the .npy header lacks '%s'", what,
                         !(have & 1) ? "descr" : !(have & 2) ? "fortran_order" : "shape");
    int dt = dtype_from_descr(descr, &info->swap);
    if (dt < 0)
        return tg_errorf(ctx, TG_EUNSUPPORTED,
                         "%s: unsupported .npy dtype '%s' (object, pickled, "
                         "complex, string and structured arrays are refused)",
                         what, descr);
    info->dt = (tg_dtype)dt;
    int64_t n = tg_shape_size(info->ndim, info->shape), nbytes;
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)tg_dtype_size(info->dt), &nbytes))
        return tg_errorf(ctx, TG_EPARSE, "%s: .npy shape too large (its size overflows)",
                         what);
    if ((uint64_t)nbytes > file_len - data_off)
        return tg_errorf(ctx, TG_EPARSE,
                         "%s: truncated .npy data: the header promises %lld "
                         "bytes, the file holds %zu",
                         what, (long long)nbytes, file_len - data_off);
    info->data_off = data_off;
    info->nbytes = nbytes;
    return TG_OK;
bad:
    return tg_errorf(ctx, TG_EPARSE, "%s: malformed .npy header", what);
}

/* ---- the data ---- */

static void swap_bytes(char *p, int64_t n, size_t sz) {
    for (int64_t i = 0; i < n; i++, p += sz)
        for (size_t a = 0, b = sz - 1; a < b; a++, b--) {
            char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

void tg_npy_to_le(void *p, int64_t n, size_t sz) {
    if (HOST_BIG) swap_bytes(p, n, sz);
}

/* An array for the file's data as stored: C order, or for Fortran order
 * the C-order array of the reversed shape (its transpose). */
tg_array *tg_npy_raw_array(const tg_npy_info *h) {
    int64_t shape[TG_MAX_NDIM];
    for (int i = 0; i < h->ndim; i++)
        shape[i] = h->fortran ? h->shape[h->ndim - 1 - i] : h->shape[i];
    return tg_array_empty(h->dt, h->ndim, shape);
}

/* Turn the raw array (filled) into the result: native byte order, bools
 * 0/1, C order. Consumes raw. */
tg_array *tg_npy_finish(tg_array *raw, const tg_npy_info *h, const char *what,
                        tg_ctx *ctx) {
    int64_t n = tg_array_size_inline(raw);
    if (h->swap) swap_bytes(raw->data, n, tg_dtype_size(h->dt));
    if (h->dt == TG_BOOL) /* NumPy reads any non-zero byte as True */
        for (int64_t i = 0; i < n; i++)
            if (((unsigned char *)raw->data)[i] > 1) ((unsigned char *)raw->data)[i] = 1;
    if (!h->fortran || h->ndim < 2) return raw;
    tg_array *v = tg_array_view_transpose(raw, NULL, ctx);
    tg_array_free(raw);
    if (!v) return NULL;
    tg_array *a = tg_array_copy(v, h->dt);
    tg_array_free(v);
    if (!a) tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", what);
    return a;
}

tg_array *tg_npy_load_mem(const void *buf, size_t len, const char *what,
                          tg_ctx *ctx) {
    const unsigned char *b = buf;
    size_t hoff = 0, hlen = 0;
    tg_npy_info h;
    if (!what) what = "<memory>";
    if (tg_npy_parse_preamble(b, len, len, what, &hoff, &hlen, ctx)) return NULL;
    if (tg_npy_parse_header((const char *)b + hoff, hlen, hoff + hlen, len, what, &h, ctx))
        return NULL;
    tg_array *raw = tg_npy_raw_array(&h);
    if (!raw) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    if (h.nbytes) memcpy(raw->data, b + h.data_off, (size_t)h.nbytes);
    return tg_npy_finish(raw, &h, what, ctx);
}

static int read_at(int fd, void *buf, size_t n, size_t off, const char *path,
                   tg_ctx *ctx) {
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return tg_errorf(ctx, TG_EIO, "%s: read failed: %s", path,
                             r < 0 ? strerror(errno) : "unexpected end of file");
        p += r;
        n -= (size_t)r;
        off += (size_t)r;
    }
    return TG_OK;
}

tg_array *tg_npy_load(const char *path, tg_ctx *ctx) {
    tg_array *raw = NULL;
    char *hdr = NULL;
    size_t flen, hoff = 0, hlen = 0;
    int fd = tg_file_open_regular(path, &flen, ctx);
    if (fd < 0) return NULL;
    unsigned char pre[12];
    size_t npre = flen < sizeof pre ? flen : sizeof pre;
    if (read_at(fd, pre, npre, 0, path, ctx)) goto fail;
    if (tg_npy_parse_preamble(pre, npre, flen, path, &hoff, &hlen, ctx)) goto fail;
    if (!(hdr = tg_malloc(hlen + 1))) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (read_at(fd, hdr, hlen, hoff, path, ctx)) goto fail;
    tg_npy_info h;
    if (tg_npy_parse_header(hdr, hlen, hoff + hlen, flen, path, &h, ctx)) goto fail;
    if (!(raw = tg_npy_raw_array(&h))) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory for %lld bytes", path,
                  (long long)h.nbytes);
        goto fail;
    }
    if (read_at(fd, raw->data, (size_t)h.nbytes, h.data_off, path, ctx)) goto fail;
    close(fd);
    tg_free(hdr);
    return tg_npy_finish(raw, &h, path, ctx);
fail:
    close(fd);
    tg_free(hdr);
    tg_array_free(raw);
    return NULL;
}

/* ---- writing ---- */

static const char *descr_of(tg_dtype dt) {
    static const char *const d[TG_NDTYPES] = {
        "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8",
        "<f2", "<f4", "<f8"};
    return d[dt];
}

int tg_npy_header(const tg_array *a, tg_str *out) {
    /* Version 1.0, little-endian, C order, the header as NumPy writes it:
     * padded with spaces to a multiple of 64 bytes, ending in a newline. */
    tg_str hdr = {0};
    tg_str_addf(&hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                descr_of(a->dtype));
    for (int i = 0; i < a->ndim; i++)
        tg_str_addf(&hdr, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
    tg_str_addf(&hdr, "%s), }", a->ndim == 1 ? "," : "");
    size_t pad = (64 - (10 + hdr.len + 1) % 64) % 64;
    size_t hlen = hdr.len + pad + 1;
    char pre[10] = {MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], MAGIC[4], MAGIC[5], 1, 0,
                    (char)(hlen & 0xff), (char)(hlen >> 8)};
    tg_str_add(out, pre, sizeof pre);
    if (hdr.s) tg_str_add(out, hdr.s, hdr.len);
    for (size_t i = 0; i < pad; i++) tg_str_add(out, " ", 1);
    tg_str_add(out, "\n", 1);
    bool oom = hdr.oom || out->oom;
    tg_str_free(&hdr);
    return oom ? TG_ENOMEM : TG_OK;
}

int tg_npy_save(const char *path, const tg_array *a, tg_ctx *ctx) {
    /* The header, then the data straight from the array (a copy only for
     * a view or a big-endian host): a 2 GiB output takes no 2 GiB more. */
    tg_str hdr = {0};
    tg_array *c = NULL;
    tg_file_save sv;
    int rc;
    if (tg_npy_header(a, &hdr)) {
        rc = tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    int64_t n = tg_array_size_inline(a);
    size_t isz = tg_dtype_size(a->dtype), nbytes = (size_t)n * isz;
    const tg_array *src = a;
    if (!tg_array_is_contiguous(a) || (HOST_BIG && isz > 1 && nbytes)) {
        if (!(c = tg_array_copy(a, a->dtype))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "%s: out of memory for %zu bytes", path, nbytes);
            goto done;
        }
        tg_npy_to_le(c->data, n, isz);
        src = c;
    }
    if ((rc = tg_file_begin(path, &sv, ctx))) goto done;
    if ((rc = tg_file_write_all(sv.fd, hdr.s, hdr.len, path, ctx)) ||
        (nbytes && (rc = tg_file_write_all(sv.fd, src->data, nbytes, path, ctx)))) {
        tg_file_abort(&sv);
        goto done;
    }
    rc = tg_file_finish(&sv, ctx);
done:
    tg_array_free(c);
    tg_str_free(&hdr);
    return rc;
}
