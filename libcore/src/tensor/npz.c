/* NumPy .npz archives: a zip file whose members are .npy files, stored
 * (np.savez) or deflated (np.savez_compressed), with zip64 records where a
 * size or an offset needs them (NumPy writes each member's local header
 * with a zip64 field whatever its size).
 *
 * Opening maps the file and reads its central directory, checking every
 * size and offset against the file before anything is allocated for it;
 * each member's local header is checked too (its signature, its name
 * against the directory's), so a damaged archive is refused when it is
 * opened, not half-way through reading it. Arrays are read on demand.
 * A stored member is read as a .npy in place; a deflated one is inflated
 * straight into the array's buffer (its .npy header first, into a small
 * buffer, to learn the array's size), never into a copy of the whole
 * member. Every member's CRC-32 is checked.
 *
 * A deflated member cannot claim more than 1032 bytes per compressed byte
 * (deflate's limit), and the .npy header inside it must agree with the
 * size the directory gives: a hostile archive cannot make us allocate
 * more than its data can fill. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "io/io.h"
#include "tensor/tensor.h"

enum {
    SIG_LOCAL = 0x04034b50,
    SIG_CENTRAL = 0x02014b50,
    SIG_END = 0x06054b50,
    SIG_END64 = 0x06064b50,
    SIG_LOCATOR64 = 0x07064b50,
    SIG_DESCRIPTOR = 0x08074b50,
    LOCAL_LEN = 30,
    CENTRAL_LEN = 46,
    END_LEN = 22,
    END64_LEN = 56,
    LOCATOR64_LEN = 20,
    EXTRA_ZIP64 = 0x0001,
    METHOD_STORED = 0,
    METHOD_DEFLATED = 8,
    DEFLATE_MAX_RATIO = 1032,
    /* the preamble of a .npy version 2 or 3 and its longest header (npy.c) */
    NPY_HEAD_MAX = 12 + 65536,
};

typedef struct npz_member {
    const char *name;   /* the array's name: the stored name less ".npy" */
    const char *stored; /* the name in the archive */
    uint64_t data;      /* where the member's bytes start */
    uint64_t csize, usize;
    uint32_t crc;
    uint16_t method;
} npz_member;

struct tg_npz {
    const unsigned char *b;
    size_t len;
    void *map; /* owned mapping, or NULL (tg_npz_open_mem) */
    char *what;
    int n;
    npz_member *m;
    char *names; /* one block: each member's stored name and name */
};

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- reading the directory ---- */

/* The end record: its position, the directory's offset, size and count,
 * from the zip64 records when there are. */
static int find_directory(const tg_npz *z, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count,
                          size_t *end_at, tg_ctx *ctx) {
    const unsigned char *b = z->b;
    size_t len = z->len, lo = len > END_LEN + 65535 ? len - END_LEN - 65535 : 0;
    if (len < END_LEN)
        return tg_errorf(ctx, TG_EPARSE, "%s: not a .npz file (%zu bytes, too short for a zip archive)",
                         z->what, len);
    /* The last end signature whose comment ends within the file. */
    size_t pos = (size_t)-1;
    for (size_t p = len - END_LEN + 1; p-- > lo;)
        if (rd32(b + p) == SIG_END && p + END_LEN + rd16(b + p + 20) <= len) {
            pos = p;
            break;
        }
    if (pos == (size_t)-1)
        return tg_errorf(ctx, TG_EPARSE, "%s: not a .npz file (no zip directory at its end)", z->what);
    const unsigned char *e = b + pos;
    if (rd16(e + 4) != 0 || rd16(e + 6) != 0 || rd16(e + 8) != rd16(e + 10))
        return tg_errorf(ctx, TG_EUNSUPPORTED, "%s: the zip archive spans several disks", z->what);
    *count = rd16(e + 10);
    *cd_size = rd32(e + 12);
    *cd_off = rd32(e + 16);
    *end_at = pos;
    if (pos >= LOCATOR64_LEN && rd32(b + pos - LOCATOR64_LEN) == SIG_LOCATOR64) {
        const unsigned char *l = b + pos - LOCATOR64_LEN;
        uint64_t at = rd64(l + 8);
        if (rd32(l + 4) != 0 || rd32(l + 16) > 1)
            return tg_errorf(ctx, TG_EUNSUPPORTED, "%s: the zip archive spans several disks", z->what);
        if (at > pos - LOCATOR64_LEN || pos - LOCATOR64_LEN - at < END64_LEN || rd32(b + at) != SIG_END64)
            return tg_errorf(ctx, TG_EPARSE, "%s: corrupt zip64 end record", z->what);
        const unsigned char *e64 = b + at;
        if (rd32(e64 + 16) != 0 || rd32(e64 + 20) != 0 || rd64(e64 + 24) != rd64(e64 + 32))
            return tg_errorf(ctx, TG_EUNSUPPORTED, "%s: the zip archive spans several disks", z->what);
        *count = rd64(e64 + 32);
        *cd_size = rd64(e64 + 40);
        *cd_off = rd64(e64 + 48);
        *end_at = (size_t)at;
    }
    if (*cd_off > *end_at || *cd_size > *end_at - *cd_off)
        return tg_errorf(ctx, TG_EPARSE,
                         "%s: corrupt zip archive (its directory, %llu bytes at %llu, runs past its end "
                         "record at %zu)",
                         z->what, (unsigned long long)*cd_size, (unsigned long long)*cd_off, *end_at);
    if (*count > *cd_size / CENTRAL_LEN || *count > INT_MAX)
        return tg_errorf(ctx, TG_EPARSE,
                         "%s: corrupt zip archive (%llu members claimed in a directory of %llu bytes)",
                         z->what, (unsigned long long)*count, (unsigned long long)*cd_size);
    return TG_OK;
}

/* The sizes and offset a zip64 extra field gives for those saturated in
 * the header (in that order, each only when saturated). */
static bool zip64_extra(const unsigned char *x, size_t xlen, uint64_t *usize, uint64_t *csize,
                        uint64_t *off) {
    while (xlen >= 4) {
        uint16_t id = rd16(x), n = rd16(x + 2);
        if ((size_t)n > xlen - 4) return false;
        if (id == EXTRA_ZIP64) {
            const unsigned char *p = x + 4, *end = p + n;
            uint64_t *f[3] = {usize, csize, off};
            for (int k = 0; k < 3; k++) {
                if (!f[k] || *f[k] != 0xffffffffu) continue;
                if (end - p < 8) return false;
                *f[k] = rd64(p);
                p += 8;
            }
            return true;
        }
        x += 4 + n;
        xlen -= 4 + (size_t)n;
    }
    return true;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A name that occurs twice in names[0..n) (sorted in place), or NULL. */
static const char *first_duplicate(const char **names, int n) {
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) return names[i];
    return NULL;
}

static int read_directory(tg_npz *z, tg_ctx *ctx) {
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    size_t end_at = 0;
    int rc = find_directory(z, &cd_off, &cd_size, &count, &end_at, ctx);
    if (rc) return rc;
    /* Both name blocks fit in twice the directory, plus two NULs each. */
    if (!(z->m = tg_calloc(count ? count : 1, sizeof *z->m)) ||
        !(z->names = tg_malloc(2 * cd_size + 2 * count + 1)))
        return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", z->what);
    const unsigned char *p = z->b + cd_off, *end = p + cd_size;
    char *nb = z->names;
    for (uint64_t k = 0; k < count; k++) {
        if (end - p < CENTRAL_LEN || rd32(p) != SIG_CENTRAL)
            return tg_errorf(ctx, TG_EPARSE, "%s: corrupt zip directory (entry %llu of %llu)", z->what,
                             (unsigned long long)k + 1, (unsigned long long)count);
        uint16_t flags = rd16(p + 8), method = rd16(p + 10);
        uint32_t crc = rd32(p + 16);
        uint64_t csize = rd32(p + 20), usize = rd32(p + 24), off = rd32(p + 42);
        size_t nlen = rd16(p + 28), xlen = rd16(p + 30), clen = rd16(p + 32);
        if ((size_t)(end - p) - CENTRAL_LEN < nlen + xlen + clen)
            return tg_errorf(ctx, TG_EPARSE, "%s: corrupt zip directory (entry %llu runs past it)",
                             z->what, (unsigned long long)k + 1);
        const char *name = (const char *)p + CENTRAL_LEN;
        if (memchr(name, 0, nlen))
            return tg_errorf(ctx, TG_EPARSE, "%s: corrupt zip directory (a name holds a NUL byte)",
                             z->what);
        char *stored = nb;
        memcpy(stored, name, nlen);
        stored[nlen] = 0;
        nb += nlen + 1;
        if (!zip64_extra(p + CENTRAL_LEN + nlen, xlen, &usize, &csize, &off))
            return tg_errorf(ctx, TG_EPARSE, "%s: member '%s': corrupt zip64 field", z->what, stored);
        p += CENTRAL_LEN + nlen + xlen + clen;
        if (nlen && stored[nlen - 1] == '/' && usize == 0) { /* a folder */
            nb = stored;
            continue;
        }
        if (flags & 0x41)
            return tg_errorf(ctx, TG_EUNSUPPORTED, "%s: member '%s' is encrypted", z->what, stored);
        if (method != METHOD_STORED && method != METHOD_DEFLATED)
            return tg_errorf(ctx, TG_EUNSUPPORTED,
                             "%s: member '%s' uses compression method %u (tg reads stored and "
                             "deflated members, as np.savez and np.savez_compressed write them)",
                             z->what, stored, method);
        if (method == METHOD_STORED ? usize != csize
                                    : usize / DEFLATE_MAX_RATIO > csize + 1)
            return tg_errorf(ctx, TG_EPARSE,
                             "%s: member '%s': its size, %llu bytes, cannot come from %llu %s bytes",
                             z->what, stored, (unsigned long long)usize, (unsigned long long)csize,
                             method == METHOD_STORED ? "stored" : "deflated");
        /* The local header: where the data starts. */
        if (off > cd_off || cd_off - off < LOCAL_LEN || rd32(z->b + off) != SIG_LOCAL)
            return tg_errorf(ctx, TG_EPARSE, "%s: member '%s': no local header at offset %llu",
                             z->what, stored, (unsigned long long)off);
        const unsigned char *lh = z->b + off;
        size_t lnlen = rd16(lh + 26), lxlen = rd16(lh + 28);
        uint64_t data = off + LOCAL_LEN + lnlen + lxlen;
        if (data > cd_off || csize > cd_off - data)
            return tg_errorf(ctx, TG_EPARSE,
                             "%s: member '%s': its %llu bytes at offset %llu run past the archive's "
                             "data",
                             z->what, stored, (unsigned long long)csize, (unsigned long long)data);
        if (lnlen != nlen || memcmp(lh + LOCAL_LEN, stored, nlen) != 0)
            return tg_errorf(ctx, TG_EPARSE,
                             "%s: member '%s': its local header names another member", z->what,
                             stored);
        char *key = nb;
        size_t klen = nlen >= 4 && !strcmp(stored + nlen - 4, ".npy") ? nlen - 4 : nlen;
        memcpy(key, stored, klen);
        key[klen] = 0;
        nb += klen + 1;
        z->m[z->n++] = (npz_member){.name = key, .stored = stored, .data = data, .csize = csize,
                                   .usize = usize, .crc = crc, .method = method};
    }
    const char **names = tg_malloc((z->n ? (size_t)z->n : 1) * sizeof *names);
    if (!names) return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", z->what);
    for (int i = 0; i < z->n; i++) names[i] = z->m[i].name;
    const char *dup = first_duplicate(names, z->n);
    if (dup) {
        int a = tg_npz_find(z, dup), b = a + 1;
        while (strcmp(z->m[b].name, dup)) b++;
        rc = tg_errorf(ctx, TG_EPARSE, "%s: two members hold the array '%s' ('%s' and '%s')", z->what,
                       dup, z->m[a].stored, z->m[b].stored);
    }
    tg_free(names);
    return rc;
}

static tg_npz *npz_new(const char *what, tg_ctx *ctx) {
    tg_npz *z = tg_calloc(1, sizeof *z);
    if (!z || !(z->what = tg_strdup(what))) {
        tg_free(z);
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    return z;
}

tg_npz *tg_npz_open_mem(const void *buf, size_t len, const char *what, tg_ctx *ctx) {
    tg_npz *z = npz_new(what ? what : "<memory>", ctx);
    if (!z) return NULL;
    z->b = buf;
    z->len = len;
    if (read_directory(z, ctx)) {
        tg_npz_close(z);
        return NULL;
    }
    return z;
}

tg_npz *tg_npz_open(const char *path, tg_ctx *ctx) {
    size_t len;
    int fd = tg_file_open_regular(path, &len, ctx);
    if (fd < 0) return NULL;
    tg_npz *z = npz_new(path, ctx);
    if (!z) {
        close(fd);
        return NULL;
    }
    z->len = len;
    if (z->len) {
        void *m = mmap(NULL, z->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            tg_errorf(ctx, TG_EIO, "%s: cannot map: %s", path, strerror(errno));
            close(fd);
            tg_npz_close(z);
            return NULL;
        }
        z->map = m;
        z->b = m;
    } else {
        z->b = (const unsigned char *)"";
    }
    close(fd);
    if (read_directory(z, ctx)) {
        tg_npz_close(z);
        return NULL;
    }
    return z;
}

void tg_npz_close(tg_npz *z) {
    if (!z) return;
    if (z->map) munmap(z->map, z->len);
    tg_free(z->m);
    tg_free(z->names);
    tg_free(z->what);
    tg_free(z);
}

int tg_npz_count(const tg_npz *z) { return z->n; }

const char *tg_npz_name(const tg_npz *z, int i) {
    return i >= 0 && i < z->n ? z->m[i].name : NULL;
}

int tg_npz_find(const tg_npz *z, const char *name) {
    for (int i = 0; i < z->n; i++)
        if (!strcmp(z->m[i].name, name)) return i;
    return -1;
}

/* ---- reading an array ---- */

typedef struct inflater {
    z_stream zs;
    const unsigned char *in;
    uint64_t in_left; /* compressed bytes not yet given to zs */
    uint32_t crc;
    bool ended;
    const char *what;
} inflater;

static voidpf zalloc_tg(voidpf ud, uInt n, uInt size) {
    (void)ud;
    return tg_malloc((size_t)n * size);
}
static void zfree_tg(voidpf ud, voidpf p) {
    (void)ud;
    tg_free(p);
}

/* Give zs the next piece of the member once it has used the last
 * (avail_in is 32 bits wide). */
static void feed(inflater *s) {
    if (s->zs.avail_in || !s->in_left) return;
    uInt k = s->in_left > (1u << 30) ? 1u << 30 : (uInt)s->in_left;
    s->zs.next_in = (Bytef *)s->in;
    s->zs.avail_in = k;
    s->in += k;
    s->in_left -= k;
}

/* Inflate exactly n bytes into dst (summing their CRC). */
static int inflate_into(inflater *s, unsigned char *dst, size_t n, tg_ctx *ctx) {
    while (n) {
        if (s->ended)
            return tg_errorf(ctx, TG_EPARSE, "%s: the member inflates to less than its stated size",
                             s->what);
        feed(s);
        uInt chunk = n > (1u << 30) ? 1u << 30 : (uInt)n;
        s->zs.next_out = dst;
        s->zs.avail_out = chunk;
        int r = inflate(&s->zs, Z_NO_FLUSH);
        size_t got = chunk - s->zs.avail_out;
        s->crc = tg_crc32_zip(s->crc, dst, got);
        dst += got;
        n -= got;
        if (r == Z_STREAM_END)
            s->ended = true;
        else if (r == Z_MEM_ERROR)
            return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", s->what);
        else if (r == Z_BUF_ERROR && !got) {
            if (!s->zs.avail_in && s->in_left) continue;
            return tg_errorf(ctx, TG_EPARSE, "%s: the deflated data ends early", s->what);
        } else if (r != Z_OK && r != Z_BUF_ERROR)
            return tg_errorf(ctx, TG_EPARSE, "%s: corrupt deflated data (%s)", s->what,
                             s->zs.msg ? s->zs.msg : "inflate failed");
    }
    return TG_OK;
}

static tg_array *read_deflated(const tg_npz *z, const npz_member *m, const char *what,
                               tg_ctx *ctx) {
    inflater s = {.in = z->b + m->data, .in_left = m->csize, .what = what};
    s.zs.zalloc = zalloc_tg;
    s.zs.zfree = zfree_tg;
    unsigned char *head = NULL;
    tg_array *raw = NULL, *out = NULL;
    if (inflateInit2(&s.zs, -MAX_WBITS) != Z_OK) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
#if SIZE_MAX < UINT64_MAX
    if (m->usize > SIZE_MAX) {
        tg_errorf(ctx, TG_ENOMEM, "%s: %llu bytes do not fit in this process's memory", what,
                  (unsigned long long)m->usize);
        inflateEnd(&s.zs);
        return NULL;
    }
#endif
    size_t usize = (size_t)m->usize;
    size_t hcap = usize < NPY_HEAD_MAX ? usize : NPY_HEAD_MAX, hoff, hlen;
    size_t pre = hcap < 12 ? hcap : 12;
    tg_npy_info h;
    if (!(head = tg_malloc(hcap ? hcap : 1))) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", what);
        goto done;
    }
    if (inflate_into(&s, head, pre, ctx) ||
        tg_npy_parse_preamble(head, pre, usize, what, &hoff, &hlen, ctx) ||
        inflate_into(&s, head + pre, hoff + hlen - pre, ctx) ||
        tg_npy_parse_header((const char *)head + hoff, hlen, hoff + hlen, usize, what, &h, ctx))
        goto done;
    if (!(raw = tg_npy_raw_array(&h))) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory for %lld bytes", what, (long long)h.nbytes);
        goto done;
    }
    tg_prefault(raw->data, (size_t)h.nbytes);
    if (inflate_into(&s, (unsigned char *)raw->data, (size_t)h.nbytes, ctx)) goto done;
    /* Bytes after the data (NumPy writes none): read for the CRC. */
    for (size_t rest = usize - h.data_off - (size_t)h.nbytes; rest;) {
        size_t k = rest < hcap ? rest : hcap;
        if (inflate_into(&s, head, k, ctx)) goto done;
        rest -= k;
    }
    if (!s.ended) { /* the stream must end here */
        unsigned char one;
        s.zs.next_out = &one;
        s.zs.avail_out = 1;
        feed(&s);
        int r = inflate(&s.zs, Z_NO_FLUSH);
        if (r != Z_STREAM_END || s.zs.avail_out == 0) {
            tg_errorf(ctx, TG_EPARSE, "%s: the member %s its stated size of %llu bytes", what,
                      s.zs.avail_out == 0 ? "inflates past" : "does not end at",
                      (unsigned long long)m->usize);
            goto done;
        }
    }
    if (s.crc != m->crc) {
        tg_errorf(ctx, TG_EPARSE, "%s: CRC-32 mismatch (the archive is corrupt)", what);
        goto done;
    }
    out = tg_npy_finish(raw, &h, what, ctx);
    raw = NULL;
done:
    inflateEnd(&s.zs);
    tg_free(head);
    tg_array_free(raw);
    return out;
}

tg_array *tg_npz_read(const tg_npz *z, int i, tg_ctx *ctx) {
    if (i < 0 || i >= z->n) {
        tg_errorf(ctx, TG_EINVAL, "%s: no array number %d (it holds %d)", z->what, i, z->n);
        return NULL;
    }
    const npz_member *m = &z->m[i];
    tg_str what = {0};
    tg_str_addf(&what, "%s: array '%s'", z->what, m->name);
    if (what.oom) {
        tg_str_free(&what);
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", z->what);
        return NULL;
    }
    tg_array *a = NULL;
    if (m->method == METHOD_DEFLATED) {
        a = read_deflated(z, m, what.s, ctx);
    } else if (tg_crc32_zip(0, z->b + m->data, (size_t)m->csize) != m->crc) {
        tg_errorf(ctx, TG_EPARSE, "%s: CRC-32 mismatch (the archive is corrupt)", what.s);
    } else {
        a = tg_npy_load_mem(z->b + m->data, (size_t)m->csize, what.s, ctx);
    }
    tg_str_free(&what);
    return a;
}

typedef struct by_size {
    uint64_t size;
    int i;
} by_size;

static int larger_first(const void *a, const void *b) {
    const by_size *x = a, *y = b;
    return x->size != y->size ? (x->size < y->size) - (x->size > y->size) : (x->i > y->i) - (x->i < y->i);
}

int tg_npz_read_many(const tg_npz *z, int n, const int *idx, tg_array **out, tg_ctx *ctx) {
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (n <= 0) return TG_OK;
    int nt = n > 1 && !omp_in_parallel() ? omp_get_max_threads() : 1;
    if (nt > n) nt = n;
    if (nt > 64) nt = 64;
    if (nt == 1) { /* no team to open */
        for (int i = 0; i < n; i++)
            if (!(out[i] = tg_npz_read(z, idx[i], ctx))) {
                for (int j = 0; j < i; j++) {
                    tg_array_free(out[j]);
                    out[j] = NULL;
                }
                return tg_ctx_status(ctx);
            }
        return TG_OK;
    }
    /* Largest first, so that the last to start are the short ones; a
     * context per thread for the reads' errors. */
    by_size *order = tg_malloc((size_t)n * sizeof *order);
    tg_ctx *cs[64] = {0};
    bool ok = order != NULL;
    for (int t = 0; t < nt && ok; t++) ok = (cs[t] = tg_ctx_new()) != NULL;
    if (ok) {
        for (int i = 0; i < n; i++)
            order[i] = (by_size){idx[i] >= 0 && idx[i] < z->n ? z->m[idx[i]].usize : 0, i};
        qsort(order, (size_t)n, sizeof *order, larger_first);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
        for (int j = 0; j < n; j++) {
            int i = order[j].i;
            out[i] = tg_npz_read(z, idx[i], cs[omp_get_thread_num()]);
        }
    }
    for (int t = 0; t < nt; t++) tg_ctx_free(cs[t]);
    tg_free(order);
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (!out[i]) first = i;
    if (ok && first < 0) return TG_OK;
    for (int i = 0; i < n; i++) {
        tg_array_free(out[i]);
        out[i] = NULL;
    }
    if (!ok) return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", z->what);
    /* The first failure in idx's order, read again for its line (out of
     * memory may not come back: then that is the line). */
    tg_array *again = tg_npz_read(z, idx[first], ctx);
    if (!again) return tg_ctx_status(ctx);
    tg_array_free(again);
    return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", z->what);
}

/* ---- writing ---- */

static void put16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}
static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* The next n bytes of the archive, counted in *pos. */
static int write_all(int fd, const void *buf, size_t n, uint64_t *pos, const char *path, tg_ctx *ctx) {
    int rc = tg_file_write_all(fd, buf, n, path, ctx);
    if (!rc) *pos += n;
    return rc;
}

/* A local header or a directory entry: its fixed part (hlen bytes at
 * head), the stored name (name, then ".npy"), then its extra field (the
 * xlen bytes after the fixed part). */
static int write_record(int fd, const unsigned char *head, size_t hlen, const char *name, size_t nlen,
                        size_t xlen, uint64_t *pos, const char *path, tg_ctx *ctx) {
    return write_all(fd, head, hlen, pos, path, ctx) || write_all(fd, name, nlen, pos, path, ctx) ||
                   write_all(fd, ".npy", 4, pos, path, ctx) || write_all(fd, head + hlen, xlen, pos, path, ctx)
               ? TG_EIO
               : TG_OK;
}

typedef struct npz_out {
    uint32_t crc;
    uint64_t size, csize, off;
    bool utf8, deflated;
} npz_out;

/* 1980-01-01 00:00, the earliest a zip date can say: the archive is the
 * same bytes whenever it is written. */
enum { DOS_DATE = (0 << 9) | (1 << 5) | 1, DOS_TIME = 0 };

/* What a member's local header and its directory entry share, from the
 * version needed to extract to the extra field's length (26 bytes): zip64
 * (version 4.5), the sizes in the zip64 field. A deflated member's local
 * header has no CRC or sizes (flag bit 3): a data descriptor after the
 * data gives them, since the compressed size is known only once written
 * (and the file may be a pipe, with no going back). */
static void put_common(unsigned char *p, const npz_out *r, size_t nlen, unsigned xlen, bool local) {
    bool later = local && r->deflated;
    put16(p, 45);
    put16(p + 2, (r->utf8 ? 0x800 : 0) | (r->deflated ? 8 : 0));
    put16(p + 4, r->deflated ? METHOD_DEFLATED : METHOD_STORED);
    put16(p + 6, DOS_TIME);
    put16(p + 8, DOS_DATE);
    put32(p + 10, later ? 0 : r->crc);
    put32(p + 14, 0xffffffffu);
    put32(p + 18, 0xffffffffu);
    put16(p + 22, (uint32_t)(nlen + 4));
    put16(p + 24, xlen);
}

/* ---- deflating (tg_npz_save_compressed) ---- */

/* A member is deflated in pieces of PIECE bytes on the OpenMP threads, as
 * pigz does: each piece is a raw deflate stream of its own, primed with
 * the DICT bytes before it (so that matches reach back across the cut),
 * ended by a sync flush, which ends on a byte boundary with no final
 * block; the last piece ends with the final block. Their concatenation is
 * one deflate stream, which any inflater reads. The .npy header is the
 * first piece. The cuts depend on the sizes only, so the bytes do not
 * depend on the number of threads. GROUP pieces are deflated at once and
 * then written in order, which bounds the memory held to GROUP pieces'
 * output. */
enum { PIECE = 1 << 20, GROUP = 16, DICT = 32768 };

typedef struct piece_out {
    unsigned char *buf;
    size_t len, cap;
} piece_out;

/* Deflate len bytes at in (primed with the dlen bytes at dict) into o:
 * false when out of memory. */
static bool deflate_piece(z_stream *zs, const unsigned char *in, size_t len, const unsigned char *dict,
                          size_t dlen, bool last, piece_out *o) {
    if (deflateReset(zs) != Z_OK ||
        (dlen && deflateSetDictionary(zs, dict, (uInt)dlen) != Z_OK))
        return false;
    size_t need = deflateBound(zs, (uLong)len) + 64;
    if (o->cap < need) {
        unsigned char *b = tg_realloc(o->buf, need);
        if (!b) return false;
        o->buf = b;
        o->cap = need;
    }
    zs->next_in = (Bytef *)in;
    zs->avail_in = (uInt)len;
    zs->next_out = o->buf;
    zs->avail_out = (uInt)o->cap;
    for (;;) {
        int r = deflate(zs, last ? Z_FINISH : Z_SYNC_FLUSH);
        if (r == Z_STREAM_ERROR) return false;
        if (last ? r == Z_STREAM_END : zs->avail_in == 0 && (zs->avail_out > 0 || r == Z_BUF_ERROR))
            break;
        /* out of room (deflateBound is for Z_FINISH; a flush may need a
         * few bytes more); with room left deflate has made all it can */
        if (zs->avail_out > 0) return false;
        size_t used = o->cap - zs->avail_out;
        unsigned char *b = tg_realloc(o->buf, o->cap * 2);
        if (!b) return false;
        o->buf = b;
        o->cap *= 2;
        zs->next_out = b + used;
        zs->avail_out = (uInt)(o->cap - used);
    }
    o->len = o->cap - zs->avail_out;
    return true;
}

/* A member to deflate: its .npy header, then nbytes of data, in npieces
 * pieces (the header the first). */
typedef struct member_in {
    const tg_str *hdr;
    const unsigned char *data;
    size_t nbytes, npieces;
    int level;
} member_in;

/* Deflate pieces g + j0, g + j0 + step, ... (j < ng) of m into out[j], on
 * one stream: false when out of memory. */
static bool deflate_some(const member_in *m, size_t g, int j0, int step, int ng, piece_out *out) {
    z_stream zs = {.zalloc = zalloc_tg, .zfree = zfree_tg};
    if (deflateInit2(&zs, m->level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
    bool ok = true;
    const unsigned char *hdr = (const unsigned char *)m->hdr->s;
    size_t hlen = m->hdr->len;
    for (int j = j0; j < ng && ok; j += step) {
        size_t k = g + (size_t)j; /* piece k: 0 the header, k >= 1 data */
        const unsigned char *in = hdr, *dict = NULL;
        size_t len = hlen, dlen = 0;
        if (k > 0) {
            size_t at = (k - 1) * PIECE;
            in = m->data + at;
            len = m->nbytes - at < PIECE ? m->nbytes - at : PIECE;
            dlen = k == 1 ? (hlen < DICT ? hlen : DICT) : DICT;
            dict = k == 1 ? hdr + hlen - dlen : in - DICT;
        }
        ok = deflate_piece(&zs, in, len, dict, dlen, k == m->npieces - 1, &out[j]);
    }
    deflateEnd(&zs);
    return ok;
}

/* Deflate the member's bytes, its .npy header hdr then nbytes of data,
 * into fd at *pos: the compressed size in *csize. */
static int deflate_member(int fd, const tg_str *hdr, const unsigned char *data, size_t nbytes, int level,
                          uint64_t *pos, uint64_t *csize, const char *path, tg_ctx *ctx) {
    member_in m = {hdr, data, nbytes, 1 + (nbytes + PIECE - 1) / PIECE, level};
    piece_out out[GROUP] = {{0}};
    uint64_t start = *pos;
    int rc = TG_OK;
    for (size_t g = 0; g < m.npieces && !rc; g += GROUP) {
        int ng = (int)(m.npieces - g < GROUP ? m.npieces - g : GROUP);
        int nt = ng > 2 && !omp_in_parallel() ? omp_get_max_threads() : 1;
        if (nt > ng) nt = ng;
        bool failed = false;
        if (nt == 1) { /* no team to open: most members are small */
            failed = !deflate_some(&m, g, 0, 1, ng, out);
        } else {
#pragma omp parallel num_threads(nt) reduction(|| : failed)
            failed = !deflate_some(&m, g, omp_get_thread_num(), omp_get_num_threads(), ng, out);
        }
        if (failed) rc = tg_errorf(ctx, TG_ENOMEM, "%s: out of memory while deflating", path);
        for (int j = 0; j < ng && !rc; j++) rc = write_all(fd, out[j].buf, out[j].len, pos, path, ctx);
    }
    for (int j = 0; j < GROUP; j++) tg_free(out[j].buf);
    *csize = *pos - start;
    return rc;
}

/* Write the archive: stored members, or deflated at `level` (0-9, or
 * Z_DEFAULT_COMPRESSION) when deflated. */
static int save(const char *path, int n, const char *const *names, const tg_array *const *arrays,
                bool deflated, int level, tg_ctx *ctx) {
    for (int i = 0; i < n; i++)
        if (!names[i][0] || strlen(names[i]) > 65535 - 4)
            return tg_errorf(ctx, TG_EINVAL, "%s: array %d: a name must be 1 to 65531 bytes", path, i);
    npz_out *rec = tg_calloc(n ? (size_t)n : 1, sizeof *rec);
    const char **sorted = tg_malloc((n ? (size_t)n : 1) * sizeof *sorted);
    if (!rec || !sorted) {
        tg_free(rec);
        tg_free(sorted);
        return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
    }
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    const char *dup = first_duplicate(sorted, n);
    int rc = dup ? tg_errorf(ctx, TG_EINVAL, "%s: two arrays named '%s'", path, dup) : TG_OK;
    tg_free(sorted);
    if (rc) {
        tg_free(rec);
        return rc;
    }
    tg_file_save sv;
    rc = tg_file_begin(path, &sv, ctx);
    if (rc) {
        tg_free(rec);
        return rc;
    }
    uint64_t pos = 0;
    tg_str hdr = {0};
    for (int i = 0; i < n && !rc; i++) {
        const tg_array *a = arrays[i];
        tg_array *c = NULL;
        hdr.len = 0;
        if (tg_npy_header(a, &hdr)) {
            rc = tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
            break;
        }
        size_t isz = tg_dtype_size(a->dtype), nbytes = (size_t)tg_array_size_inline(a) * isz;
        bool big = false;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        big = isz > 1;
#endif
        if (!tg_array_is_contiguous(a) || big) {
            if (!(c = tg_array_copy(a, a->dtype))) {
                rc = tg_errorf(ctx, TG_ENOMEM, "%s: out of memory for %zu bytes", path, nbytes);
                break;
            }
            tg_npy_to_le(c->data, (int64_t)(nbytes / isz), isz);
            a = c;
        }
        size_t nlen = strlen(names[i]);
        npz_out *r = &rec[i];
        r->size = hdr.len + nbytes;
        r->csize = r->size;
        r->off = pos;
        r->deflated = deflated;
        r->crc = tg_crc32_zip(tg_crc32_zip(0, hdr.s, hdr.len), a->data, nbytes);
        for (const char *q = names[i]; *q; q++) r->utf8 |= (unsigned char)*q >= 0x80;
        unsigned char lh[LOCAL_LEN + 20];
        put32(lh, SIG_LOCAL);
        put_common(lh + 4, r, nlen, 20, true);
        put16(lh + 30, EXTRA_ZIP64);
        put16(lh + 32, 16);
        put64(lh + 34, deflated ? 0 : r->size);
        put64(lh + 42, deflated ? 0 : r->size);
        rc = write_record(sv.fd, lh, LOCAL_LEN, names[i], nlen, 20, &pos, path, ctx);
        if (!rc && !deflated)
            rc = write_all(sv.fd, hdr.s, hdr.len, &pos, path, ctx) ||
                         write_all(sv.fd, a->data, nbytes, &pos, path, ctx)
                     ? TG_EIO
                     : TG_OK;
        if (!rc && deflated &&
            !(rc = deflate_member(sv.fd, &hdr, (const unsigned char *)a->data, nbytes, level, &pos,
                                  &r->csize, path, ctx))) {
            /* the data descriptor, zip64 (the local header has its field) */
            unsigned char dd[24];
            put32(dd, SIG_DESCRIPTOR);
            put32(dd + 4, r->crc);
            put64(dd + 8, r->csize);
            put64(dd + 16, r->size);
            rc = write_all(sv.fd, dd, sizeof dd, &pos, path, ctx);
        }
        tg_array_free(c);
    }
    tg_str_free(&hdr);
    uint64_t cd_off = pos;
    for (int i = 0; i < n && !rc; i++) {
        npz_out *r = &rec[i];
        size_t nlen = strlen(names[i]);
        unsigned char ch[CENTRAL_LEN + 28];
        put32(ch, SIG_CENTRAL);
        put16(ch + 4, 3 << 8 | 45); /* made on Unix */
        put_common(ch + 6, r, nlen, 28, false);
        put16(ch + 32, 0);
        put16(ch + 34, 0);
        put16(ch + 36, 0);
        put32(ch + 38, 0100644u << 16); /* a regular file, rw-r--r-- */
        put32(ch + 42, 0xffffffffu);
        put16(ch + 46, EXTRA_ZIP64);
        put16(ch + 48, 24);
        put64(ch + 50, r->size);
        put64(ch + 58, r->csize);
        put64(ch + 66, r->off);
        rc = write_record(sv.fd, ch, CENTRAL_LEN, names[i], nlen, 28, &pos, path, ctx);
    }
    if (!rc) {
        uint64_t cd_size = pos - cd_off;
        bool z64 = n >= 0xffff || cd_off >= 0xffffffffu || cd_size >= 0xffffffffu;
        unsigned char e[END64_LEN + LOCATOR64_LEN + END_LEN], *p = e;
        if (z64) {
            put32(p, SIG_END64);
            put64(p + 4, END64_LEN - 12);
            put16(p + 12, 3 << 8 | 45);
            put16(p + 14, 45);
            put32(p + 16, 0);
            put32(p + 20, 0);
            put64(p + 24, (uint64_t)n);
            put64(p + 32, (uint64_t)n);
            put64(p + 40, cd_size);
            put64(p + 48, cd_off);
            p += END64_LEN;
            put32(p, SIG_LOCATOR64);
            put32(p + 4, 0);
            put64(p + 8, pos);
            put32(p + 16, 1);
            p += LOCATOR64_LEN;
        }
        put32(p, SIG_END);
        put16(p + 4, 0);
        put16(p + 6, 0);
        put16(p + 8, z64 ? 0xffff : (uint32_t)n);
        put16(p + 10, z64 ? 0xffff : (uint32_t)n);
        put32(p + 12, z64 ? 0xffffffffu : (uint32_t)cd_size);
        put32(p + 16, z64 ? 0xffffffffu : (uint32_t)cd_off);
        put16(p + 20, 0);
        p += END_LEN;
        rc = write_all(sv.fd, e, (size_t)(p - e), &pos, path, ctx);
    }
    tg_free(rec);
    if (rc) {
        tg_file_abort(&sv);
        return rc;
    }
    return tg_file_finish(&sv, ctx);
}

int tg_npz_save(const char *path, int n, const char *const *names, const tg_array *const *arrays,
                tg_ctx *ctx) {
    return save(path, n, names, arrays, false, 0, ctx);
}

int tg_npz_save_compressed(const char *path, int n, const char *const *names,
                           const tg_array *const *arrays, int level, tg_ctx *ctx) {
    if (level < -1 || level > 9)
        return tg_errorf(ctx, TG_EINVAL, "%s: compression level %d (expected 0 to 9, or -1 for 6)", path,
                         level);
    return save(path, n, names, arrays, true, level, ctx);
}
