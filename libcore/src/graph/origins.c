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

/* Append key to keys[0..*n) unless it is there (seen: a set of them past
 * a few dozen, else a scan). */
static int add_key(const char ***keys, int *n, int *cap, struct tg_idmap *seen, const char *key) {
    if (seen) {
        if (tg_idmap_get(seen, key)) return TG_OK;
        if (tg_idmap_put(seen, key, (void *)1)) return TG_ENOMEM;
    } else {
        for (int j = 0; j < *n; j++)
            if (strcmp((*keys)[j], key) == 0) return TG_OK;
    }
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 16;
        const char **k = tg_realloc(*keys, sizeof *k * (size_t)c);
        if (!k) return TG_ENOMEM;
        *keys = k;
        *cap = c;
    }
    (*keys)[(*n)++] = key;
    return TG_OK;
}

char **tg_oset_flatten(tg_oset *s, int *nkeys) {
    /* Depth first, kids in order, each key where it first appears: the
     * list the copies made, as each was the union, in order and without
     * repeats, of the lists it united. A set reached again adds nothing
     * new and is skipped. */
    uint64_t stamp = atomic_fetch_add(&flatten_stamps, 1) + 1;
    typedef struct {
        tg_oset *s;
        int next;
    } frame;
    frame small[64], *stack = small;
    int sp = 0, cap = 64, n = 0, kcap = 0, rc = TG_OK;
    const char **keys = NULL;
    struct tg_idmap *seen = s->total > 64 ? tg_idmap_new() : NULL;
    char **packed = NULL;
    if (s->total > 64 && !seen) return NULL;
    s->stamp = stamp;
    stack[sp++] = (frame){s, 0};
    while (sp && !rc) {
        frame *f = &stack[sp - 1];
        if (f->s->leaf) {
            for (int i = 0; i < f->s->n && !rc; i++) rc = add_key(&keys, &n, &kcap, seen, f->s->items[i]);
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
    if (!rc && (packed = tg_origins_pack(keys, n))) *nkeys = n;
    if (stack != small) tg_free(stack);
    tg_free(keys);
    if (seen) tg_idmap_free(seen);
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
