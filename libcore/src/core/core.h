/* Private: allocation through the hook, the error context, small helpers
 * shared by the whole library. */
#ifndef TG_CORE_INTERNAL_H
#define TG_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/status.h"

#define TG_CTX_MSG_MAX 2048

struct tg_ctx {
    int status;
    char msg[TG_CTX_MSG_MAX];
};

/* Allocation: every byte the library holds goes through the hook of
 * tg_set_allocator. tg_malloc(0) returns a valid unique pointer. */
void *tg_malloc(size_t n);
void *tg_calloc(size_t count, size_t size); /* NULL on overflow */
void *tg_realloc(void *p, size_t n);
void tg_free(void *p);
char *tg_strdup(const char *s);
char *tg_strndup(const char *s, size_t n);
/* 64-byte aligned blocks for array data (also through the hook). */
/* A map from pointers to pointers (open addressing on the address), for
 * passes that remember what they did per object: zero-initialised is
 * empty; a key is never NULL. tg_ptrmap_put: TG_OK, or TG_ENOMEM with the
 * map unchanged. tg_ptrmap_free releases the table, not what it holds. */
typedef struct tg_ptrmap {
    const void **key;
    void **val;
    size_t n, cap; /* cap: 0 or a power of two */
} tg_ptrmap;
void *tg_ptrmap_get(const tg_ptrmap *m, const void *k);
int tg_ptrmap_put(tg_ptrmap *m, const void *k, void *v);
void tg_ptrmap_free(tg_ptrmap *m);

void *tg_malloc_aligned(size_t n);
void tg_free_aligned(void *p);

/* An arena (core/arena.c): the small blocks of one function graph, handed
 * out in order from large chunks and taken back by size for reuse. It
 * lives while its owner holds it or any block from it is live. A NULL
 * arena means the plain allocator: tg_arena_alloc(NULL, n) is
 * tg_calloc(1, n) and tg_arena_release(NULL, p, n) is tg_free(p). */
typedef struct tg_arena tg_arena;
enum { TG_ARENA_MAX = 1024 }; /* larger blocks: tg_calloc / tg_free */
tg_arena *tg_arena_new(void); /* the owner's reference; NULL: no memory */
/* n zeroed bytes, 16-byte aligned; NULL: no memory. */
void *tg_arena_alloc(tg_arena *a, size_t n);
/* Give back a block of n bytes (the n it was allocated with). */
void tg_arena_release(tg_arena *a, void *p, size_t n);
/* The owner lets go; the arena goes with its last block. */
void tg_arena_unref(tg_arena *a);
/* Bytes in live blocks from the chunks, and bytes of chunks held. */
void tg_arena_usage(const tg_arena *a, size_t *live, size_t *held);

/* Blocks that live and go together (core/arena.c): bump-allocated from a
 * list of chunks, from 1 KiB doubling to 64 KiB, a block of 4 KiB or more
 * in a chunk of its own (the newest chunk goes on filling), all freed at
 * once by tg_chunks_free. One allocation per chunk, not per block. A
 * list is a pointer, NULL when empty. */
struct tg_chunk;
/* n bytes (not zeroed), aligned to `align` (1, 2, 4, 8 or 16); NULL: no
 * memory. */
void *tg_chunks_alloc(struct tg_chunk **list, size_t n, size_t align);
void tg_chunks_free(struct tg_chunk **list);

/* Record a failure on ctx (ctx may be NULL: then nothing is recorded) and
 * return status, so that `return tg_errorf(ctx, TG_EINVAL, ...)` reads
 * well. The message is one line of text (tg_one_line). */
int tg_errorf(tg_ctx *ctx, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int tg_verrorf(tg_ctx *ctx, int status, const char *fmt, va_list ap);
/* Make s one line of printable text, in place: a newline, carriage
 * return or tab becomes a space, any other control character '?' (a name
 * holding ESC [ 2 J must not clear the terminal an error is printed on). */
void tg_one_line(char *s);
/* Prefix the message already on ctx with "prefix: " (for adding the file
 * name or the node around an error raised deeper). */
void tg_error_prefix(tg_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A growable string, for messages and JSON. */
typedef struct tg_str {
    char *s;
    size_t len, cap;
    bool oom;
} tg_str;
void tg_str_addf(tg_str *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tg_str_add(tg_str *b, const char *s, size_t n);
void tg_str_free(tg_str *b);

/* Numbers as programs read them back, whatever locale the host process
 * set: tg_str_addf above, tg_snprintf_c and tg_strtod_c format and read
 * in the "C" locale ('.' for the decimal point). A host that called
 * setlocale(LC_ALL, "") in a locale with a decimal comma (de_DE, fr_FR,
 * ru_RU...) otherwise got "0,125" in .tgf headers and exported JSON (files
 * that no longer load) and fused kernels whose C source did not compile
 * ("0x1,4p+1"). Messages (tg_errorf) keep the host's locale. */
int tg_snprintf_c(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
double tg_strtod_c(const char *s, char **end);
float tg_strtof_c(const char *s, char **end);

/* Monotonic time in nanoseconds. */
uint64_t tg_now_ns(void);

/* Checked arithmetic for sizes taken from files. */
static inline bool tg_mul_overflow_i64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

#define TG_UNUSED(x) ((void)(x))
#define TG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
