/* Status strings, the error context, the allocator hook. */
#define _GNU_SOURCE
#include "core/core.h"

#include <locale.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "tg/dtype.h"

#ifndef TG_VERSION_STRING
#define TG_VERSION_STRING "0.1.0"
#endif

const char *tg_version(void) { return TG_VERSION_STRING; }

const char *tg_status_str(int status) {
    switch (status) {
#define TG_STATUS_CASE_(name, value, desc) \
    case value:                            \
        return desc;
        TG_STATUS_LIST(TG_STATUS_CASE_)
#undef TG_STATUS_CASE_
    }
    return "unknown status";
}

/* ---- allocator hook ---- */

static void *default_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (n == 0) {
        free(p);
        return NULL;
    }
    return realloc(p, n);
}

/* GNU OpenMP's thread pool does not survive fork(): the child keeps the
 * pool's bookkeeping but not its threads, and its first parallel region
 * of more than one thread waits for them forever. A child of a process
 * that ran any parallel loop (an elementwise op on a large array, a
 * reduction, a fused kernel, a checksum) hung on its next one: a Python
 * frontend's multiprocessing workers (fork is its default on Linux), a
 * server that forks per request. So a forked child runs tg's OpenMP code
 * on one thread, as PyTorch's children do: every parallel region (the
 * checksum's too) takes its thread count from omp_get_max_threads() or
 * the default, and a team of one never touches the pool. Watched from start-up, so that no fork
 * is missed. (A program that exec()s after fork is not affected.) */
static void on_fork_child(void) { omp_set_num_threads(1); }
__attribute__((constructor)) static void watch_fork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

static tg_realloc_fn g_realloc = default_realloc;
static void *g_realloc_ud;

void tg_set_allocator(tg_realloc_fn fn, void *ud) {
    g_realloc = fn ? fn : default_realloc;
    g_realloc_ud = fn ? ud : NULL;
}

void *tg_malloc(size_t n) { return g_realloc(g_realloc_ud, NULL, n ? n : 1); }

void *tg_calloc(size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) return NULL;
    void *p = tg_malloc(n);
    if (p) memset(p, 0, n ? n : 1);
    return p;
}

void *tg_realloc(void *p, size_t n) {
    return g_realloc(g_realloc_ud, p, n ? n : 1);
}

void tg_free(void *p) {
    if (p) g_realloc(g_realloc_ud, p, 0);
}

char *tg_strdup(const char *s) { return s ? tg_strndup(s, strlen(s)) : NULL; }

char *tg_strndup(const char *s, size_t n) {
    char *d = tg_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* With TG_THP=1, large blocks (arrays, a file read into memory) are
 * offered to the kernel for transparent huge pages: fresh memory is
 * faulted in a page at a time on first touch, and 2 MiB pages take 512
 * times fewer faults. Only the 2 MiB-aligned part of the block, and only
 * where THP is "madvise" or "always" (elsewhere the call fails
 * harmlessly). This was the default until 2026-12-04: on a VM whose host
 * takes back the guest's free memory in 2 MiB blocks (free page
 * reporting), a huge page is cold memory on first touch, 10-15 times
 * slower than 4 KiB pages of recently freed memory, and `tgc run` of a
 * graph over a 4096 x 4096 float64 input took 1.3-2.2 s with the advice
 * against 0.33-0.39 s without; it paid only where a process took the
 * same memory back at once (docs/optimizer.md). */
enum { HUGE_MIN = 4 << 20 };

static void advise_huge(void *p, size_t n) {
    static atomic_int off = -1; /* read once; every thread reads the same */
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) {
        const char *e = getenv("TG_THP");
        atomic_store_explicit(&off, o = !(e && !strcmp(e, "1")), memory_order_relaxed);
    }
    if (o) return;
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

/* Aligned blocks: over-allocate through the hook and keep the original
 * pointer just before the aligned address. */
void *tg_malloc_aligned(size_t n) {
    size_t total;
    if (__builtin_add_overflow(n, (size_t)64 + sizeof(void *), &total))
        return NULL;
    char *raw = tg_malloc(total);
    if (!raw) return NULL;
    uintptr_t a = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)a)[-1] = raw;
    if (n >= HUGE_MIN) advise_huge((void *)a, n);
    return (void *)a;
}

void tg_free_aligned(void *p) {
    if (p) tg_free(((void **)p)[-1]);
}

/* ---- error context ---- */

tg_ctx *tg_ctx_new(void) { return tg_calloc(1, sizeof(tg_ctx)); }
void tg_ctx_free(tg_ctx *ctx) { tg_free(ctx); }
const char *tg_ctx_message(const tg_ctx *ctx) { return ctx ? ctx->msg : ""; }
int tg_ctx_status(const tg_ctx *ctx) { return ctx ? ctx->status : TG_OK; }
void tg_ctx_clear(tg_ctx *ctx) {
    if (ctx) {
        ctx->status = TG_OK;
        ctx->msg[0] = 0;
    }
}

void tg_one_line(char *s) {
    for (; *s; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t') *s = ' ';
        else if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

int tg_verrorf(tg_ctx *ctx, int status, const char *fmt, va_list ap) {
    if (ctx) {
        vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
        tg_one_line(ctx->msg);
        ctx->status = status;
    }
    return status;
}

int tg_errorf(tg_ctx *ctx, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tg_verrorf(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

/* A chain of prefixes too long for the message loses its middle, not
 * its end: the end is the cause (what is wrong), the start the outermost
 * place, and each level between them one more "nodes[0] (scan -> h):
 * attrs.body" (a load error 30 bodies down, or a gradient's through
 * scans nested as deep, ran past 2 KB and the cause was cut off). The
 * cut falls between levels (after a ": ") where one is near, else
 * between UTF-8 characters. */
enum { KEEP_TAIL = TG_CTX_MSG_MAX * 5 / 8 };

static size_t utf8_back(const char *s, size_t i) {
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) i--;
    return i;
}

void tg_error_prefix(tg_ctx *ctx, const char *fmt, ...) {
    if (!ctx) return;
    char prefix[TG_CTX_MSG_MAX], old[TG_CTX_MSG_MAX], all[2 * TG_CTX_MSG_MAX + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, ctx->msg, sizeof old);
    int n = snprintf(all, sizeof all, "%s: %s", prefix, old);
    if (n < (int)sizeof ctx->msg) {
        memcpy(ctx->msg, all, (size_t)n + 1);
    } else {
        static const char mark[] = " ... ";
        size_t len = strlen(all), head = sizeof ctx->msg - 1 - (sizeof mark - 1) - KEEP_TAIL;
        size_t tail = len - KEEP_TAIL; /* where the kept end starts */
        const char *lvl = strstr(all + tail, ": ");
        if (lvl && (size_t)(lvl - all) < tail + 200) tail = (size_t)(lvl - all) + 2;
        else
            while (tail < len && ((unsigned char)all[tail] & 0xc0) == 0x80) tail++;
        size_t cut = head;
        while (cut > head - 200 && !(all[cut - 1] == ':' && all[cut] == ' ')) cut--;
        cut = all[cut - 1] == ':' && all[cut] == ' ' ? cut - 1 : utf8_back(all, head);
        /* a cut made before: the new one takes it in (one cut) */
        const char *before = strstr(all + cut, mark);
        if (before && (size_t)(before - all) + sizeof mark - 1 > tail) tail = (size_t)(before - all) + sizeof mark - 1;
        snprintf(ctx->msg, sizeof ctx->msg, "%.*s%s%s", (int)cut, all, mark, all + tail);
    }
    tg_one_line(ctx->msg);
}

/* ---- strings ---- */

void tg_str_add(tg_str *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = tg_realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

/* The "C" locale, made once (NULL only when out of memory: then the
 * host's locale is used). uselocale switches the calling thread alone. */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }
static locale_t get_c_locale(void) {
    pthread_once(&c_locale_once, make_c_locale);
    return c_locale;
}
static locale_t enter_c_locale(void) {
    locale_t c = get_c_locale();
    return c ? uselocale(c) : (locale_t)0;
}
static void leave_c_locale(locale_t old) {
    if (old) uselocale(old);
}

int tg_snprintf_c(char *buf, size_t size, const char *fmt, ...) {
    locale_t old = enter_c_locale();
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    leave_c_locale(old);
    return n;
}

double tg_strtod_c(const char *s, char **end) {
    locale_t c = get_c_locale();
    return c ? strtod_l(s, end, c) : strtod(s, end);
}

float tg_strtof_c(const char *s, char **end) {
    locale_t c = get_c_locale();
    return c ? strtof_l(s, end, c) : strtof(s, end);
}

void tg_str_addf(tg_str *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    locale_t old = enter_c_locale();
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) goto done;
    if ((size_t)n < sizeof small) {
        tg_str_add(b, small, (size_t)n);
        goto done;
    }
    char *big = tg_malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        goto done;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    tg_str_add(b, big, (size_t)n);
    tg_free(big);
done:
    leave_c_locale(old);
}

void tg_str_free(tg_str *b) {
    tg_free(b->s);
    memset(b, 0, sizeof *b);
}

uint64_t tg_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- pointer map ---- */

static size_t ptrmap_slot(const tg_ptrmap *m, const void *k) {
    size_t i = (size_t)(((uintptr_t)k >> 4) * 0x9e3779b97f4a7c15ull >> 32) & (m->cap - 1);
    while (m->key[i] && m->key[i] != k) i = (i + 1) & (m->cap - 1);
    return i;
}

void *tg_ptrmap_get(const tg_ptrmap *m, const void *k) {
    if (!m->cap) return NULL;
    size_t i = ptrmap_slot(m, k);
    return m->key[i] ? m->val[i] : NULL;
}

int tg_ptrmap_put(tg_ptrmap *m, const void *k, void *v) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        tg_ptrmap b = {tg_calloc(cap, sizeof *b.key), tg_calloc(cap, sizeof *b.val), m->n, cap};
        if (!b.key || !b.val) {
            tg_free(b.key);
            tg_free(b.val);
            return TG_ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t j = ptrmap_slot(&b, m->key[i]);
                b.key[j] = m->key[i];
                b.val[j] = m->val[i];
            }
        tg_free(m->key);
        tg_free(m->val);
        *m = b;
    }
    size_t i = ptrmap_slot(m, k);
    if (!m->key[i]) m->n++;
    m->key[i] = k;
    m->val[i] = v;
    return TG_OK;
}

void tg_ptrmap_free(tg_ptrmap *m) {
    tg_free(m->key);
    tg_free(m->val);
    *m = (tg_ptrmap){0};
}
