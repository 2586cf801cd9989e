/* Arenas: the memory of one function graph's nodes and variables.
 *
 * A graph of 100,000 nodes is made of a few hundred thousand small
 * blocks, allocated in topological order by the clone, a few tens of
 * thousands more by the rewrites, and most of them freed again when the
 * optimizer prunes what it replaced. From the C library's allocator they
 * land wherever earlier frees left room, so that a walk in topological
 * order jumps about the heap; and freeing them hands each to the
 * allocator's bins, which coalesce them with their neighbours, touching
 * cold memory again. An arena hands out consecutive pieces of 64 KiB
 * chunks instead (in the order the blocks are made: a walk sweeps memory)
 * and takes a released block back on a list of blocks of its size, for
 * the next block of that size; nothing is coalesced and nothing is
 * returned to the allocator until the arena goes.
 *
 * The arena lives as long as anything allocated from it: its owner (the
 * function graph) holds one reference and every live block another, so
 * that a node moved into another graph, or freed after its graph, still
 * finds its arena. Blocks larger than TG_ARENA_MAX come from tg_calloc and
 * go back to tg_free (a node with hundreds of inputs; rare).
 *
 * Not thread-safe: one function graph is built and rewritten by one
 * thread at a time.
 *
 * Under AddressSanitizer, free space and released blocks are poisoned and
 * every block has a poisoned red zone after it, so that a use after
 * release or an overrun is still reported. */
#include <string.h>

#include "core/core.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
enum { ARENA_REDZONE = 16 };
#else
#define ARENA_POISON(p, n) ((void)(p), (void)(n))
#define ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
enum { ARENA_REDZONE = 0 };
#endif

/* Chunks grow from 4 KiB (the body of a small composite or scan is a
 * graph of its own, with an arena of its own) to 64 KiB, less the
 * allocator's header: below glibc's threshold for mmap, so that they come
 * from the heap (and reuse what earlier work freed, already faulted in)
 * rather than from fresh zero pages. */
enum { ARENA_CHUNK_MIN = 4 * 1024 - 64, ARENA_CHUNK_MAX = 64 * 1024 - 64, ARENA_ALIGN = 16 };

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size; /* bytes, this header included */
    char data[];
} arena_chunk;

struct tg_arena {
    long refs; /* the owner's, if it has not let go, and one per live block */
    char *cur, *end;
    arena_chunk *chunks;
    size_t next_chunk; /* the size of the next chunk */
    size_t chunk_bytes, live_bytes; /* held in chunks; in live blocks there */
    void *free[TG_ARENA_MAX / ARENA_ALIGN + 1]; /* released blocks by size class */
};

static size_t size_class(size_t n) { return (n + ARENA_ALIGN - 1) / ARENA_ALIGN; }

tg_arena *tg_arena_new(void) {
    tg_arena *a = tg_calloc(1, sizeof *a);
    if (a) {
        a->refs = 1;
        a->next_chunk = ARENA_CHUNK_MIN;
    }
    return a;
}

static void arena_destroy(tg_arena *a) {
    for (arena_chunk *c = a->chunks, *next; c; c = next) {
        next = c->next;
        ARENA_UNPOISON(c, c->size);
        tg_free(c);
    }
    tg_free(a);
}

void *tg_arena_alloc(tg_arena *a, size_t n) {
    if (!a) return tg_calloc(1, n);
    if (n > TG_ARENA_MAX) {
        void *p = tg_calloc(1, n);
        if (p) a->refs++;
        return p;
    }
    size_t k = size_class(n ? n : 1), bytes = k * ARENA_ALIGN;
    char *p = a->free[k];
    if (p) {
        ARENA_UNPOISON(p, sizeof(void *));
        memcpy(&a->free[k], p, sizeof(void *));
        ARENA_POISON(p, bytes);
    } else {
        size_t step = bytes + ARENA_REDZONE;
        if ((size_t)(a->end - a->cur) < step) {
            /* (the rest of the last chunk is left: blocks are small) */
            size_t size = a->next_chunk;
            arena_chunk *c = tg_malloc(size);
            if (!c) return NULL;
            c->next = a->chunks;
            c->size = size;
            a->chunk_bytes += size;
            a->chunks = c;
            a->cur = c->data;
            a->end = (char *)c + size;
            if (a->next_chunk < ARENA_CHUNK_MAX)
                a->next_chunk = (a->next_chunk + 64) * 2 - 64;
            ARENA_POISON(a->cur, (size_t)(a->end - a->cur));
        }
        p = a->cur;
        a->cur += step;
    }
    a->live_bytes += bytes;
    /* only the n bytes asked for: past them is out of bounds */
    ARENA_UNPOISON(p, n);
    memset(p, 0, n);
    a->refs++;
    return p;
}

void tg_arena_release(tg_arena *a, void *p, size_t n) {
    if (!p) return;
    if (!a) {
        tg_free(p);
        return;
    }
    if (n > TG_ARENA_MAX) {
        tg_free(p);
    } else {
        size_t k = size_class(n ? n : 1);
        a->live_bytes -= k * ARENA_ALIGN;
        ARENA_UNPOISON(p, sizeof(void *));
        memcpy(p, &a->free[k], sizeof(void *));
        a->free[k] = p;
        ARENA_POISON(p, k * ARENA_ALIGN);
    }
    if (--a->refs == 0) arena_destroy(a);
}

void tg_arena_unref(tg_arena *a) {
    if (a && --a->refs == 0) arena_destroy(a);
}

void tg_arena_usage(const tg_arena *a, size_t *live, size_t *held) {
    *live = a ? a->live_bytes : 0;
    *held = a ? a->chunk_bytes : 0;
}

/* ---- chunk lists (core.h) ---- */

struct tg_chunk {
    struct tg_chunk *next;
    size_t used, cap; /* bytes of data */
    _Alignas(16) char data[];
};

enum { CHUNKS_MIN = 1024 - 64, CHUNKS_MAX = 64 * 1024 - 64, CHUNKS_OWN = 4096 };

void *tg_chunks_alloc(struct tg_chunk **list, size_t n, size_t align) {
    struct tg_chunk *c = *list;
    size_t at = c ? (c->used + align - 1) & ~(align - 1) : 0;
    if (!c || at > c->cap || c->cap - at < n) {
        bool own = n >= CHUNKS_OWN;
        size_t cap = own ? n : c ? (c->cap + 64) * 2 - 64 : CHUNKS_MIN;
        if (cap > CHUNKS_MAX && !own) cap = CHUNKS_MAX;
        if (cap < n) cap = n;
        struct tg_chunk *k;
        if (cap > SIZE_MAX - sizeof *k || !(k = tg_malloc(sizeof *k + cap))) return NULL;
        k->cap = cap;
        if (own && c) { /* the newest chunk goes on filling */
            k->used = n;
            k->next = c->next;
            c->next = k;
            return k->data;
        }
        k->used = 0;
        k->next = c;
        *list = c = k;
        at = 0;
    }
    c->used = at + n;
    return c->data + at;
}

void tg_chunks_free(struct tg_chunk **list) {
    for (struct tg_chunk *c = *list, *next; c; c = next) {
        next = c->next;
        tg_free(c);
    }
    *list = NULL;
}
