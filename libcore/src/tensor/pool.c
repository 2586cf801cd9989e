/* A function's pool of freed buffers (tensor.h, tg_bufpool).
 *
 * Why: without it, each call of a function allocates every intermediate
 * above TG_VM_KEEP_BYTES and frees it after its last reader. glibc gives
 * the freed memory at the top of the heap back to the kernel once it
 * passes the trim threshold, and blocks past the mmap threshold are
 * unmapped on free, so the next call faults the same memory in again, a
 * 4 KiB page at a time: the MLP's training step at batch 600 (float32,
 * 1.2 MB intermediates) made 9 brk calls and 1,330 page faults per
 * call, 25 ms a call against 7 with the memory kept. How often glibc
 * trims depends on the process's history (its mmap threshold rises with
 * the largest block freed so far), so the same step in two programs
 * differed by 3x.
 *
 * What: while a call runs on a thread, buffers that thread frees (plain
 * library memory above TG_VM_KEEP_BYTES) go to the running function's
 * pool instead of to free(), and buffers it allocates come from the pool
 * when one of exactly that size is there (the most recently pooled, whose
 * memory is likeliest in the cache). A training step then allocates no
 * large buffer after its first calls.
 *
 * Peak: kept as they are, the dead intermediates of a call whose sizes
 * all differ (a chain of joins, each longer than the last) stayed beside
 * the live ones to the call's end: 2.0 GB for what needs 0.37 GiB live
 * (0.56 GB without the pool). So a take that finds no buffer of its size
 * first frees pooled buffers, oldest first, totalling at least what it
 * allocates: those of sizes that this call will not ask for again, by
 * the counts of the sizes the last call asked for (all of them on a
 * first call, or for sizes the last call did not ask for). The buffers
 * a repeat of the last call will take back later in the call stay, so
 * that a loop that asks for the same sizes every call, once it has run
 * a few, allocates nothing; but only while live and pooled bytes stay
 * within the last call's live peak plus its largest buffer (beyond
 * that the oldest go), or the join chain's calls held more each time,
 * towards the sum of all its intermediates again.
 *
 * Bounds: a buffer that sat in the pool through a whole call without
 * being taken is freed at the end of that call, so a function called with
 * another batch size does not keep the old sizes; the pool holds at most
 * `budget` bytes (TG_POOL_MIB, default a sixteenth of the memory and
 * at least 256 MiB; 0 turns the pool off) and at most
 * TG_BUFPOOL_SLOTS buffers, the oldest going first. Between calls a function
 * therefore keeps at most what its last call freed, within the budget,
 * and its last outputs' buffers (vm/function.c: they come back through
 * the pool at the next call's start, when the caller let go of them);
 * tg_function_trim gives both back. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tensor/tensor.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define POOL_SANITIZED 1
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#define POOL_SANITIZED 0
#endif

static _Thread_local tg_bufpool *active;

static size_t default_budget(void) {
    const char *e = getenv("TG_POOL_MIB");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        if (*end == 0 && v <= (1ull << 30)) return (size_t)v << 20;
        /* not a number of MiB: the default, as for any unreadable
         * setting of the environment */
    }
    /* A pool holds no more than its function's last call freed, memory
     * the call had in use anyway; the budget only bounds it. With 256 MiB
     * at most (the old default), a call whose intermediates came to more
     * gave one back each time, and took it again from the kernel page by
     * page on the next call: the layer-norm benchmark's 8192 x 1024
     * float32 step (288 MiB), 55 ms a call instead of 33. */
    size_t b = (size_t)256 << 20;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0 && (size_t)pages * (size_t)psize / 16 > b) b = (size_t)pages * (size_t)psize / 16;
    return b;
}

void tg_bufpool_init(tg_bufpool *p) {
    memset(p, 0, sizeof *p);
    p->budget = default_budget();
}

/* Take entry i out of the list (unpoisoned), keeping the order. */
static tg_buffer *unlink_at(tg_bufpool *p, int i) {
    tg_buffer *b = p->bufs[i];
    p->bytes -= b->nbytes;
    p->n--;
    memmove(p->bufs + i, p->bufs + i + 1, (size_t)(p->n - i) * sizeof *p->bufs);
    memmove(p->when + i, p->when + i + 1, (size_t)(p->n - i) * sizeof *p->when);
    POOL_UNPOISON(b->data, b->nbytes);
    return b;
}

static void drop(tg_bufpool *p, int i) {
    tg_buffer *b = unlink_at(p, i);
    tg_free_aligned(b->data);
    tg_free(b);
}

/* The entry of `size` in p->sizes, added (counts 0) when `add` and the
 * table has room; NULL otherwise. Open addressing, at most 3/4 full. */
static tg_bufpool_size *size_entry(tg_bufpool *p, size_t size, bool add) {
    unsigned h = (unsigned)(((uint64_t)size * 0x9E3779B97F4A7C15ull) >> 56);
    for (;; h = (h + 1) % TG_BUFPOOL_SIZES) {
        tg_bufpool_size *e = &p->sizes[h];
        if (e->size == size) return e;
        if (e->size) continue;
        if (!add || p->nsizes >= TG_BUFPOOL_SIZES * 3 / 4) return NULL;
        p->nsizes++;
        *e = (tg_bufpool_size){size, 0, 0};
        return e;
    }
}

/* This call's counts become the last call's; sizes it did not ask for
 * are forgotten. */
static void sizes_roll(tg_bufpool *p) {
    if (!p->nsizes) return;
    bool gone = false;
    for (int i = 0; i < TG_BUFPOOL_SIZES; i++) {
        tg_bufpool_size *e = &p->sizes[i];
        e->last = e->now;
        e->now = 0;
        gone |= e->size && !e->last;
    }
    if (!gone) return;
    tg_bufpool_size old[TG_BUFPOOL_SIZES];
    memcpy(old, p->sizes, sizeof old);
    memset(p->sizes, 0, sizeof p->sizes);
    p->nsizes = 0;
    for (int i = 0; i < TG_BUFPOOL_SIZES; i++)
        if (old[i].size && old[i].last) size_entry(p, old[i].size, true)->last = old[i].last;
}

/* Whether pooled buffer i is more than this call will take of its size,
 * if it asks for what the last call did: of the buffers of that size in
 * the pool, those past the number still to be asked for (the oldest). */
static bool surplus(tg_bufpool *p, int i) {
    size_t size = p->bufs[i]->nbytes;
    const tg_bufpool_size *e = size_entry(p, size, false);
    uint32_t left = e && e->last > e->now ? e->last - e->now : 0;
    uint32_t have = 0;
    for (int j = i; j < p->n; j++) have += p->bufs[j]->nbytes == size;
    return have > left;
}

/* Before allocating `need` bytes anew: free surplus buffers, oldest
 * first, until as many bytes went as come. A dead intermediate then
 * holds no memory that a later one takes from malloc. The buffers a
 * repeat of the last call will take later stay (so that a loop that asks
 * for the same sizes every call allocates nothing once it has run a
 * few), but only while live and pooled bytes stay within the last call's
 * live peak and its largest buffer: kept beyond that, they made a chain
 * whose sizes all differ hold more after each call. */
static void make_room(tg_bufpool *p, size_t need) {
    size_t freed = 0;
    for (int i = 0; i < p->n && freed < need;) {
        if (!surplus(p, i)) {
            i++;
            continue;
        }
        freed += p->bufs[i]->nbytes;
        drop(p, i);
    }
    while (p->limit && p->n && p->live + p->bytes + need > p->limit) drop(p, 0);
}

static void took(tg_bufpool *p, size_t nbytes) {
    p->live += nbytes;
    if (p->live > p->live_peak) p->live_peak = p->live;
    if (nbytes > p->largest) p->largest = nbytes;
}

tg_bufpool *tg_bufpool_enter(tg_bufpool *p) {
    p->call++;
    p->live = p->live_peak = p->largest = 0;
    tg_bufpool *prev = active;
    active = p->budget ? p : NULL;
    return prev;
}

void tg_bufpool_leave(tg_bufpool *p, tg_bufpool *prev) {
    active = prev;
    /* what sat here through this whole call */
    for (int i = p->n - 1; i >= 0; i--)
        if (p->when[i] < p->call) drop(p, i);
    sizes_roll(p);
    if (p->live_peak) p->limit = p->live_peak + p->largest;
}

void tg_bufpool_clear(tg_bufpool *p) {
    while (p->n) drop(p, p->n - 1);
}

tg_buffer *tg_bufpool_take(size_t nbytes) {
    tg_bufpool *p = active;
    if (!p || nbytes <= TG_VM_KEEP_BYTES) return NULL;
    tg_bufpool_size *e = size_entry(p, nbytes, true);
    if (e) e->now++;
    for (int i = p->n - 1; i >= 0; i--) {
        tg_buffer *b = p->bufs[i];
        if (b->nbytes != nbytes) continue;
        unlink_at(p, i);
#if POOL_SANITIZED
        /* as AddressSanitizer's malloc does: a kernel that reads what it
         * did not write sees garbage, not the last call's values */
        memset(b->data, 0xbe, nbytes);
#endif
        atomic_init(&b->refcount, 1);
        p->hits++;
        took(p, nbytes);
        return b;
    }
    p->misses++;
    make_room(p, nbytes);
    took(p, nbytes);
    return NULL;
}

bool tg_bufpool_put(tg_buffer *b) {
    tg_bufpool *p = active;
    if (!p || b->release || b->nbytes <= TG_VM_KEEP_BYTES || b->nbytes > p->budget) return false;
    p->live = p->live > b->nbytes ? p->live - b->nbytes : 0;
    if (p->n == TG_BUFPOOL_SLOTS) drop(p, 0);
    while (p->n && p->bytes + b->nbytes > p->budget) drop(p, 0);
    p->bufs[p->n] = b;
    p->when[p->n] = p->call;
    p->n++;
    p->bytes += b->nbytes;
    POOL_POISON(b->data, b->nbytes);
    return true;
}

void tg_bufpool_free(tg_bufpool *p) {
    if (active == p) active = NULL;
    tg_bufpool_clear(p);
}
