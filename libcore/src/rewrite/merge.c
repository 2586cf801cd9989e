/* The merge pass (Theano's MergeOptimizer): equal constants become one,
 * then nodes that apply the same op with the same attrs to the same
 * inputs become one (common subexpressions). One walk in topological
 * order with a hash table, so a node's inputs are already merged when it
 * is looked up and chains of duplicates fold in one pass. */
#include <string.h>

#include "rewrite/engine.h"
#include "tensor/tensor.h"

static uint64_t const_hash(const tg_var *v) {
    const tg_array *a = v->value;
    uint64_t h = tg_hash_mix(1469598103934665603ull, (uint64_t)a->dtype);
    h = tg_hash_mix(h, (uint64_t)a->ndim);
    for (int d = 0; d < a->ndim; d++) h = tg_hash_mix(h, (uint64_t)a->shape[d]);
    int64_t n = tg_array_size(a);
    int64_t step = n > 256 ? n / 256 : 1; /* a sample; equality is checked */
    for (int64_t i = 0; i < n; i += step) {
        double x = tg_array_get_flat(a, i);
        uint64_t b;
        memcpy(&b, &x, sizeof b);
        h = tg_hash_mix(h, b);
    }
    return tg_hash_finish(h);
}

/* (one array: the loader gives equal inline scalars one) */
static bool const_equal(const tg_var *a, const tg_var *b) {
    return tg_type_equal(&a->type, &b->type) &&
           (a->value == b->value || (tg_array_equal(a->value, b->value) && a->value->dtype == b->value->dtype));
}

uint64_t tg_rw_merge_hash(const tg_node *n) {
    uint64_t h = tg_hash_mix(1469598103934665603ull, (uint64_t)(uintptr_t)n->op);
    h = tg_hash_mix(h, n->aflags & TG_NODE_AHASH ? n->ahash : tg_node_attrs_hash(n));
    h = tg_hash_mix(h, (uint64_t)n->nin);
    for (int i = 0; i < n->nin; i++) h = tg_hash_mix(h, (uint64_t)(uintptr_t)n->inputs[i]);
    return tg_hash_finish(h);
}

static bool node_equal(const tg_node *a, const tg_node *b) {
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout) return false;
    for (int i = 0; i < a->nin; i++)
        if (a->inputs[i] != b->inputs[i]) return false;
    if ((a->inplace == NULL) != (b->inplace == NULL)) return false;
    if (a->inplace && memcmp(a->inplace, b->inplace, (size_t)a->nout)) return false;
    if (!tg_node_attrs_same(a, b)) return false;
    for (int k = 0; k < a->nout; k++)
        if (!tg_type_equal(&a->outputs[k]->type, &b->outputs[k]->type)) return false;
    return true;
}

/* Open addressing, at least half empty. A slot is the hash beside the
 * entry, so that a probe reads one cache line (on large graphs the table
 * is far bigger than the cache) and compares entries only when the hashes
 * agree. */
typedef struct tslot {
    uint64_t hash;
    void *x; /* NULL: empty */
} tslot;

typedef struct table {
    tslot *slot;
    size_t cap, n;
} table;

/* Room for n entries at first; the table doubles when half full. */
static int table_init(table *t, size_t n) {
    t->cap = 64;
    t->n = 0;
    while (t->cap < n * 2) t->cap *= 2;
    t->slot = tg_calloc(t->cap, sizeof *t->slot);
    return t->slot ? TG_OK : TG_ENOMEM;
}

static void table_free(table *t) { tg_free(t->slot); }

static int table_grow(table *t) {
    size_t cap = t->cap * 2;
    tslot *slot = tg_calloc(cap, sizeof *slot);
    if (!slot) return TG_ENOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slot[i].x) continue;
        size_t j = (size_t)t->slot[i].hash & (cap - 1);
        while (slot[j].x) j = (j + 1) & (cap - 1);
        slot[j] = t->slot[i];
    }
    tg_free(t->slot);
    t->slot = slot;
    t->cap = cap;
    return TG_OK;
}

/* The first entry equal to x (by eq), or x itself after inserting it;
 * NULL when out of memory. */
static void *table_find_or_add(table *t, uint64_t h, void *x, bool (*eq)(const void *, const void *)) {
    size_t i = (size_t)h & (t->cap - 1);
    while (t->slot[i].x) {
        if (t->slot[i].hash == h && eq(t->slot[i].x, x)) return t->slot[i].x;
        i = (i + 1) & (t->cap - 1);
    }
    if ((t->n + 1) * 2 > t->cap) {
        if (table_grow(t)) return NULL;
        for (i = (size_t)h & (t->cap - 1); t->slot[i].x;) i = (i + 1) & (t->cap - 1);
    }
    t->slot[i].x = x;
    t->slot[i].hash = h;
    t->n++;
    return x;
}

static bool eq_const(const void *a, const void *b) { return const_equal(a, b); }
static bool eq_node(const void *a, const void *b) { return node_equal(a, b); }

int tg_rw_merge(tg_rw *rw) {
    tg_fgraph *fg = tg_rw_fgraph(rw);
    table t = {0};
    tg_regions reg = {0};
    int rc = TG_OK;
    /* Few variables are constants: the table grows as they come. */
    if (table_init(&t, 32)) goto nomem;
    /* Constants first: a node's inputs must be canonical when it is
     * hashed. The function's outputs keep their own variables. */
    for (int i = 0; i < fg->nconsts; i++) {
        TG_SWEEP_PREFETCH(fg->consts, i, fg->nconsts);
        /* A constant's value pointer is on another line than its header,
         * and its value elsewhere again: fetch the line of the constant 8
         * on (whose first line came 8 steps ago), then the value of the
         * one 4 on. */
        if (i + 8 < fg->nconsts) __builtin_prefetch(&fg->consts[i + 8]->value);
        if (i + 4 < fg->nconsts && fg->consts[i + 4]->value) __builtin_prefetch(fg->consts[i + 4]->value);
        tg_var *v = fg->consts[i];
        if (!v->value || !v->nclients) continue;
        tg_var *same = table_find_or_add(&t, const_hash(v), v, eq_const);
        if (!same) goto nomem;
        if (same == v) continue;
        bool is_output = false;
        for (int k = 0; k < v->nclients; k++) is_output |= v->clients[k].node == NULL;
        if (is_output) continue;
        if ((rc = tg_rw_replace(rw, v, same))) goto done;
    }
    table_free(&t);
    memset(&t, 0, sizeof t);
    if (table_init(&t, (size_t)fg->nnodes)) goto nomem;
    /* With a lazy ifelse, two equal nodes merge only when one's region
     * holds the other's (graph/regions.c): merging a node of one branch
     * with its twin in the other branch, or in a nested ifelse's branch,
     * would make it run where neither ran before (a division by zero the
     * branch guarded against). Regions of the graph as it is now: merging
     * within them only ever takes readers away from other nodes. */
    uint64_t lazy_ops[TG_OPSET_WORDS] = {0};
    for (int o = 0; o < tg_op_count(); o++)
        if (tg_op_at(o)->flags & TG_OPF_LAZY) tg_opset_add(lazy_ops, tg_op_at(o));
    /* (no lazy op among those fg may have: no sweep to find one) */
    bool lazy = false, maybe_lazy = tg_opset_meet(fg->opseen, lazy_ops);
    for (int i = 0; i < fg->nnodes && maybe_lazy && !lazy; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, fg->nnodes);
        lazy = !tg_rw_dead(fg->nodes[i]) && (fg->nodes[i]->op->flags & TG_OPF_LAZY);
    }
    if (lazy) {
        if ((rc = tg_rw_toposort(rw))) goto done;
        if ((rc = tg_regions_compute(fg, &reg, tg_rw_ctx(rw)))) goto done;
        for (int i = 0; i < fg->nnodes; i++) fg->nodes[i]->index = i;
    }
    int nnodes = fg->nnodes; /* nodes appended meanwhile are not merged */
    for (int i = 0; i < nnodes; i++) {
        /* cold on large graphs: fetch ahead the header and inputs of the
         * nodes to hash next */
        if (i + 16 < nnodes) {
            tg_prefetch_node(fg->nodes[i + 16]);
            __builtin_prefetch(&fg->nodes[i + 16]->ahash);
        }
        /* and the table slot of the node 8 on, whose header and inputs
         * came in 8 steps ago: a table of 100,000 nodes is far bigger
         * than the cache, and each lookup would wait for its miss. (Only
         * a hint: merging the nodes before it may change its inputs.) */
        if (i + 8 < nnodes)
            __builtin_prefetch(&t.slot[(size_t)tg_rw_merge_hash(fg->nodes[i + 8]) & (t.cap - 1)]);
        tg_node *n = fg->nodes[i];
        /* (two prints, or two op_from_graph whose bodies print, print twice) */
        if (tg_rw_dead(n) || tg_rw_has_effect(n)) continue;
        tg_node *same = table_find_or_add(&t, tg_rw_merge_hash(n), n, eq_node);
        if (!same) goto nomem;
        if (same == n) continue;
        if (lazy && !tg_regions_nested(&reg, reg.of[n->index], reg.of[same->index])) continue;
        for (int k = 0; k < n->nout; k++)
            if ((rc = tg_rw_replace(rw, n->outputs[k], same->outputs[k]))) goto done;
        /* (pruned first: the entry lists what died with it, nothing as
         * n shares its inputs with same) */
        tg_rw_prune(rw, n);
        tg_node *pair[2] = {n, same};
        if ((rc = tg_rw_record(rw, "merge_nodes", pair, 2, same))) goto done;
    }
    goto done;
nomem:
    rc = tg_errorf(tg_rw_ctx(rw), TG_ENOMEM, "out of memory while merging");
done:
    table_free(&t);
    tg_regions_free(&reg);
    return rc;
}
