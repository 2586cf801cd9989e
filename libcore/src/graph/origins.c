/* Origin sets: a node's origins while the optimizer grows them.
 *
 * A rewrite gives each node it makes the union of the origins of the
 * nodes it replaces (rewrite/engine.c). Copied, that union costs as much
 * as the lists it unites, and a chain that the rewrites fold into one
 * node a step at a time (constant collection turns `x + 1 + 1 + ...`
 * into one add, each fold of the growing add making a new one) copies a
 * list of every length up to the chain's: quadratic time and memory,
 * 28 s and 1.4 GB for 10,000 adds. Here a union refers to the sets it
 * unites instead (a DAG of reference-counted sets), so each fold costs
 * the number of nodes it replaced, and the list is written out once,
 * for the node that survives (tg_node_origins_settle). */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include "graph/graph.h"

struct tg_oset {
    int refs;
    int n;       /* keys (a leaf) or kids (a union) */
    bool leaf;
    int total;   /* keys counted with repeats, saturating: a size bound */
    uint64_t stamp;       /* the last flatten that reached it */
    struct tg_oset *link; /* a list of sets being freed */
    /* n pointers: a leaf's keys (the strings follow them, copied), or a
     * union's kids (each holding a reference) */
    void *items[];
};

/* Stamps tell a flatten which sets it has reached; unique per flatten,
 * so that compiles in several threads (each with its own sets) may
 * flatten at once. */
static _Atomic uint64_t flatten_stamps;

static int sat_add(int a, int b) { return a > INT_MAX - b ? INT_MAX : a + b; }

tg_oset *tg_oset_leaf(const char *const *keys, int n) {
    size_t bytes = sizeof(tg_oset) + (size_t)n * sizeof(void *), at = bytes;
    for (int i = 0; i < n; i++) bytes += strlen(keys[i]) + 1;
    tg_oset *s = tg_malloc(bytes);
    if (!s) return NULL;
    *s = (tg_oset){.refs = 1, .n = n, .leaf = true, .total = n};
    for (int i = 0; i < n; i++) {
        size_t len = strlen(keys[i]) + 1;
        s->items[i] = (char *)s + at;
        memcpy(s->items[i], keys[i], len);
        at += len;
    }
    return s;
}

tg_oset *tg_oset_union(tg_oset *const *kids, int n) {
    tg_oset *s = tg_malloc(sizeof(tg_oset) + (size_t)n * sizeof(void *));
    if (!s) return NULL;
    *s = (tg_oset){.refs = 1, .n = n};
    for (int i = 0; i < n; i++) {
        kids[i]->refs++;
        s->items[i] = kids[i];
        s->total = sat_add(s->total, kids[i]->total);
    }
    return s;
}

void tg_oset_unref(tg_oset *s) {
    /* a list, not recursion: a folded chain of 100,000 nodes is a
     * DAG as deep */
    if (!s || --s->refs > 0) return;
    s->link = NULL;
    while (s) {
        tg_oset *next = s->link;
        if (!s->leaf)
            for (int i = 0; i < s->n; i++) {
                tg_oset *k = s->items[i];
                if (--k->refs == 0) {
                    k->link = next;
                    next = k;
                }
            }
        tg_free(s);
        s = next;
    }
}

int tg_oset_total(const tg_oset *s) { return s->total; }
bool tg_oset_is_leaf(const tg_oset *s) { return s->leaf; }

/* Which of keys[0..n) appear there for the first time: an open-address
 * table of their hashes and positions, on the stack for up to 128 keys.
 * A scan of the keys kept so far (what the optimizer did below 64 keys)
 * made a .tgf restore compare strings n^2 / 2 times per composite node
 * (its origins, each fused node's, some 64 keys): a quarter of the
 * restore of bench_tgf's 10,000-node chain. */
static uint32_t key_hash(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

int tg_origins_first(const char *const *keys, int n, bool *first) {
    enum { SMALL = 256 };
    uint32_t small_slot[SMALL], small_hash[SMALL / 2];
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    uint32_t *slot = cap <= SMALL ? small_slot : tg_malloc(cap * sizeof *slot);
    uint32_t *hash = n <= SMALL / 2 ? small_hash : tg_malloc(((size_t)n + 1) * sizeof *hash);
    if (!slot || !hash) {
        if (slot != small_slot) tg_free(slot);
        if (hash != small_hash) tg_free(hash);
        return -1;
    }
    memset(slot, 0, cap * sizeof *slot); /* 0: empty, else a position + 1 */
    int kept = 0;
    for (int i = 0; i < n; i++) {
        uint32_t h = hash[i] = key_hash(keys[i]);
        size_t at = h & (cap - 1);
        bool is_first = true;
        for (; slot[at]; at = (at + 1) & (cap - 1)) {
            uint32_t j = slot[at] - 1;
            if (hash[j] == h && strcmp(keys[j], keys[i]) == 0) {
                is_first = false;
                break;
            }
        }
        if (first) first[i] = is_first;
        if (is_first) {
            slot[at] = (uint32_t)i + 1;
            kept++;
        }
    }
    if (slot != small_slot) tg_free(slot);
    if (hash != small_hash) tg_free(hash);
    return kept;
}

char **tg_origins_pack_unique(const char *const *keys, int n, int *nkeys) {
    bool small_first[128], *first = n <= 128 ? small_first : tg_malloc((size_t)n + 1);
    const char *small_u[128], **u = n <= 128 ? small_u : tg_malloc(sizeof *u * ((size_t)n + 1));
    char **packed = NULL;
    int kept = first && u ? tg_origins_first(keys, n, first) : -1;
    if (kept >= 0) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (first[i]) u[k++] = keys[i];
        if ((packed = tg_origins_pack(u, kept))) *nkeys = kept;
    }
    if (first != small_first) tg_free(first);
    if (u != small_u) tg_free(u);
    return packed;
}

char **tg_oset_flatten(tg_oset *s, int *nkeys) {
    /* Depth first, kids in order, each key where it first appears: the
     * list the copies made, as each was the union, in order and without
     * repeats, of the lists it united. A set reached again adds nothing
     * new and is skipped; the keys of the leaves reached, repeats and
     * all, are then kept where each first appears. */
    uint64_t stamp = atomic_fetch_add(&flatten_stamps, 1) + 1;
    typedef struct {
        tg_oset *s;
        int next;
    } frame;
    frame small[64], *stack = small;
    int sp = 0, cap = 64, n = 0, kcap = 0, rc = TG_OK;
    const char **keys = NULL;
    char **packed = NULL;
    s->stamp = stamp;
    stack[sp++] = (frame){s, 0};
    while (sp && !rc) {
        frame *f = &stack[sp - 1];
        if (f->s->leaf) {
            if (n > INT_MAX - f->s->n) {
                rc = TG_ENOMEM;
                break;
            }
            if (n + f->s->n > kcap) {
                int c = kcap ? kcap : 16;
                while (c < n + f->s->n) c = c > INT_MAX / 2 ? INT_MAX : c * 2;
                const char **k = tg_realloc(keys, sizeof *k * (size_t)c);
                if (!k) {
                    rc = TG_ENOMEM;
                    break;
                }
                keys = k;
                kcap = c;
            }
            for (int i = 0; i < f->s->n; i++) keys[n++] = f->s->items[i];
            sp--;
            continue;
        }
        if (f->next == f->s->n) {
            sp--;
            continue;
        }
        tg_oset *k = f->s->items[f->next++];
        if (k->stamp == stamp) continue;
        k->stamp = stamp;
        if (sp == cap) {
            frame *g = tg_malloc(sizeof *g * (size_t)cap * 2);
            if (!g) {
                rc = TG_ENOMEM;
                break;
            }
            memcpy(g, stack, sizeof *g * (size_t)sp);
            if (stack != small) tg_free(stack);
            stack = g;
            cap *= 2;
        }
        stack[sp++] = (frame){k, 0};
    }
    if (!rc) packed = tg_origins_pack_unique(keys, n, nkeys);
    if (stack != small) tg_free(stack);
    tg_free(keys);
    return packed;
}

int tg_node_origins_settle(tg_node *n) {
    if (!n->oset || n->oset->leaf) return TG_OK;
    int k = 0;
    char **o = tg_oset_flatten(n->oset, &k);
    if (!o) return TG_ENOMEM;
    tg_free(n->origins);
    n->origins = o;
    n->norigins = k;
    tg_oset_unref(n->oset);
    n->oset = NULL;
    return TG_OK;
}
