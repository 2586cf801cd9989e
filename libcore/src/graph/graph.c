/* Variables, apply nodes, graphs and the id map. */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/op.h"

/* ---- id map: open addressing, FNV-1a ---- */

/* Open addressing, linear probing, at most half full. Each slot keeps the
 * key's hash beside the key, so that a probe compares hashes and reads a
 * key's characters only when they match: the keys are the variables' own
 * ids, spread over the heap, and on graphs of 100,000 nodes each string
 * compared was a cache miss (the optimizer looks up every id it makes in
 * the graph's map and its own). One slot is one 24-byte record, so a probe
 * reads one cache line, not one in each of three arrays. */
typedef struct idslot {
    uint64_t hash;
    const char *key; /* NULL: empty */
    void *val;
} idslot;

struct tg_idmap {
    size_t cap, n;
    idslot *slot;
};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

struct tg_idmap *tg_idmap_new(void) {
    struct tg_idmap *m = tg_calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = 64;
    m->slot = tg_calloc(m->cap, sizeof *m->slot);
    if (!m->slot) {
        tg_idmap_free(m);
        return NULL;
    }
    return m;
}

void tg_idmap_free(struct tg_idmap *m) {
    if (!m) return;
    tg_free(m->slot);
    tg_free(m);
}

static int idmap_grow(struct tg_idmap *m) {
    size_t cap = m->cap * 2;
    idslot *slot = tg_calloc(cap, sizeof *slot);
    if (!slot) return TG_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slot[i].key) continue;
        size_t j = m->slot[i].hash & (cap - 1);
        while (slot[j].key) j = (j + 1) & (cap - 1);
        slot[j] = m->slot[i];
    }
    tg_free(m->slot);
    m->slot = slot;
    m->cap = cap;
    return TG_OK;
}

/* The key is borrowed: it must outlive the map (it is the variable's id). */
int tg_idmap_put(struct tg_idmap *m, const char *id, void *v) {
    if ((m->n + 1) * 2 > m->cap && idmap_grow(m)) return TG_ENOMEM;
    uint64_t h = hash_str(id);
    size_t j = h & (m->cap - 1);
    while (m->slot[j].key) {
        if (m->slot[j].hash == h && strcmp(m->slot[j].key, id) == 0) {
            m->slot[j].val = v;
            return TG_OK;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->slot[j] = (idslot){h, id, v};
    m->n++;
    return TG_OK;
}

static void *idmap_find(const struct tg_idmap *m, const char *id, uint64_t h) {
    size_t j = h & (m->cap - 1);
    while (m->slot[j].key) {
        if (m->slot[j].hash == h && strcmp(m->slot[j].key, id) == 0) return m->slot[j].val;
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void *tg_idmap_get(const struct tg_idmap *m, const char *id) {
    return m ? idmap_find(m, id, hash_str(id)) : NULL;
}

void *tg_idmap_get2(const struct tg_idmap *a, const struct tg_idmap *b, const char *id) {
    uint64_t h = hash_str(id);
    /* both first probes under way before either is read */
    if (a) __builtin_prefetch(&a->slot[h & (a->cap - 1)]);
    if (b) __builtin_prefetch(&b->slot[h & (b->cap - 1)]);
    void *v = a ? idmap_find(a, id, h) : NULL;
    return v ? v : b ? idmap_find(b, id, h) : NULL;
}

/* ---- variables, nodes, shared state ---- */

tg_var *tg_var_new(const char *id, tg_var_kind kind) { return tg_var_new_in(NULL, id, kind); }

tg_var *tg_var_new_in(tg_arena *a, const char *id, tg_var_kind kind) {
    size_t len = strlen(id ? id : "");
    tg_var *v = tg_arena_alloc(a, sizeof *v + len + 1);
    if (!v) return NULL;
    v->arena = a;
    memcpy(v->inl_id, id ? id : "", len + 1);
    v->id = v->inl_id;
    v->kind = kind;
    v->json_index = -1;
    v->type.dtype = TG_DTYPE_INVALID;
    v->type.ndim = -1;
    return v;
}

/* A variable's clients, once they outgrow the inline slots, live where
 * the variable does: in its arena, or from the allocator when it has
 * none. In the arena, the lists of the variables the optimizer drops go
 * back to it for the next list or node of their size, not one by one to
 * the C library, which on a graph of 100,000 nodes spent more sorting
 * them out of a large heap than the rest of the work grew. */
static size_t clients_bytes(int n) { return (size_t)n * sizeof(tg_client); }

static void clients_release(tg_var *v) {
    if (!v->clients || v->clients == v->inl_clients) return;
    if (v->arena)
        tg_arena_release(v->arena, v->clients, clients_bytes(v->cclients));
    else
        tg_free(v->clients);
    v->clients = NULL;
    v->cclients = 0;
}

int tg_var_clients_reserve(tg_var *v, int need) {
    if (need <= v->cclients) return TG_OK;
    if (!v->clients && need <= 2) {
        v->clients = v->inl_clients;
        v->cclients = 2;
        return TG_OK;
    }
    int c = v->cclients ? v->cclients * 2 : 4;
    while (c < need) c *= 2;
    bool inl = v->clients == v->inl_clients;
    tg_client *p;
    if (v->arena) {
        if (!(p = tg_arena_alloc(v->arena, clients_bytes(c)))) return TG_ENOMEM;
        if (v->nclients) memcpy(p, v->clients, clients_bytes(v->nclients));
        if (!inl) clients_release(v);
    } else {
        if (!(p = tg_realloc(inl ? NULL : v->clients, clients_bytes(c)))) return TG_ENOMEM;
        if (inl) memcpy(p, v->inl_clients, clients_bytes(v->nclients));
    }
    v->clients = p;
    v->cclients = c;
    return TG_OK;
}

void tg_var_free(tg_var *v) {
    if (!v) return;
    if (v->id != v->inl_id) tg_free(v->id);
    tg_free(v->name);
    tg_array_free(v->value);
    tg_array_free(v->test_value);
    tg_shared_unref(v->shared);
    tg_var_release_block(v); /* (and its clients) */
}

void tg_var_set_constant(tg_var *v, tg_array *a) {
    v->value = a;
    v->inline_const = a->ndim == 0;
    v->type.dtype = a->dtype;
    v->type.ndim = a->ndim;
    for (int d = 0; d < a->ndim; d++) v->type.shape[d] = a->shape[d];
}

const char *tg_var_label(const tg_var *v) { return v->name ? v->name : v->id; }

/* One allocation holds the node and its inpos, outputs and inputs arrays
 * (they never change size): compiling a graph of 100,000 nodes makes
 * 300,000 fewer calls to malloc and free, which on such graphs were a
 * third of the compile time (bench_opt: fast_run on 10,000 nodes 0.026 ->
 * 0.023 s, on 100,000 0.43 -> 0.37 s). The arrays come first, the inputs
 * right before the node's header: a walk that reads a node's op and
 * inputs touches one or two cache lines, not the header and then the
 * arrays behind the large parsed attrs. The bytes before the node: */
static size_t node_prefix(int nin, int nout) {
    size_t ni = (size_t)(nin ? nin : 1), no = (size_t)(nout ? nout : 1);
    return (ni * sizeof(int) + 7) / 8 * 8 + (no + ni) * sizeof(tg_var *);
}

tg_node *tg_node_new(const tg_op *op, int nin, int nout) { return tg_node_new_in(NULL, op, nin, nout); }

tg_node *tg_node_new_in(tg_arena *a, const tg_op *op, int nin, int nout) {
    if (nin < 0 || nout < 0) return NULL;
    size_t ni = (size_t)(nin ? nin : 1), pre = node_prefix(nin, nout);
    char *block = tg_arena_alloc(a, pre + sizeof(tg_node));
    if (!block) return NULL;
    tg_node *n = (tg_node *)(block + pre); /* pre is a multiple of 8 */
    n->arena = a;
    n->op = op;
    n->nin = nin;
    n->nout = nout;
    n->json_index = -1;
    n->inpos = (int *)block;
    n->inputs = (tg_var **)n - ni;
    n->outputs = (tg_var **)(block + (ni * sizeof(int) + 7) / 8 * 8);
    return n;
}

void tg_node_free(tg_node *n) {
    if (!n) return;
    if (n->kstate) n->kstate->free(n->kstate);
    if (n->attrs) json_object_put(n->attrs);
    /* (small attrs own nothing: `a`, cold in a graph that rewrites left
     * behind, is not read) */
    if (!(n->aflags & TG_NODE_ASMALL)) {
        if (n->op && n->op->free_extra) n->op->free_extra(&n->a);
        tg_free(n->a.message);
        tg_free(n->a.index);
    }
    tg_free(n->name);
    tg_free(n->inplace);
    tg_free(n->origins);
    tg_oset_unref(n->oset);
    tg_free(n->grad_of);
    tg_free(n->moved);
    tg_trace_free(&n->trace);
    tg_node_release_block(n);
}

char **tg_origins_pack(const char *const *keys, int n) {
    size_t bytes = ((size_t)n + 1) * sizeof(char *), at;
    for (int i = 0; i < n; i++) bytes += strlen(keys[i]) + 1;
    char **o = tg_malloc(bytes);
    if (!o) return NULL;
    at = ((size_t)n + 1) * sizeof(char *);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(keys[i]) + 1;
        o[i] = (char *)o + at;
        memcpy(o[i], keys[i], len);
        at += len;
    }
    o[n] = NULL;
    return o;
}

char *tg_grad_of_pack(const char *of, const char *of_op, const char *by, const char *by_op) {
    const char *s[4] = {of ? of : "", of_op ? of_op : "", by ? by : "", by_op ? by_op : ""};
    size_t len[4], total = 0;
    for (int i = 0; i < 4; i++) total += (len[i] = strlen(s[i])) + 1;
    char *b = tg_malloc(total), *p = b;
    if (!b) return NULL;
    for (int i = 0; i < 4; i++) {
        memcpy(p, s[i], len[i] + 1);
        p += len[i] + 1;
    }
    return b;
}

void tg_grad_of_split(const char *block, const char *s[4]) {
    for (int i = 0; i < 4; i++) {
        s[i] = block;
        block += strlen(block) + 1;
    }
}

tg_node *tg_node_move(tg_arena *a, tg_node *n) {
    tg_node *c = tg_node_new_in(a, n->op, n->nin, n->nout);
    if (!c) return NULL;
    int *inpos = c->inpos;
    tg_var **inputs = c->inputs, **outputs = c->outputs;
    memcpy(c, n, offsetof(tg_node, a));
    if (n->aflags & TG_NODE_ASMALL)
        tg_node_small_attrs_copy(c, n);
    else
        c->a = n->a;
    c->inpos = inpos;
    c->inputs = inputs;
    c->outputs = outputs;
    c->arena = a;
    memcpy(inpos, n->inpos, sizeof *inpos * (size_t)n->nin);
    memcpy(inputs, n->inputs, sizeof *inputs * (size_t)n->nin);
    memcpy(outputs, n->outputs, sizeof *outputs * (size_t)n->nout);
    return c;
}

void tg_node_release_block(tg_node *n) {
    size_t pre = node_prefix(n->nin, n->nout); /* the block has the arrays */
    tg_arena_release(n->arena, (char *)n - pre, pre + sizeof *n);
}

tg_var *tg_var_move(tg_arena *a, tg_var *v) {
    size_t len = strlen(v->inl_id);
    tg_var *c = tg_arena_alloc(a, sizeof *c + len + 1);
    if (!c) return NULL;
    memcpy(c, v, sizeof *c + len + 1);
    c->arena = a;
    if (v->id == v->inl_id) c->id = c->inl_id;
    if (v->clients == v->inl_clients) {
        c->clients = c->inl_clients;
    } else if (v->clients) {
        /* a list of its own in the new arena (v's goes with v's block) */
        if (!(c->clients = tg_arena_alloc(a, clients_bytes(v->cclients)))) {
            tg_arena_release(a, c, sizeof *c + len + 1);
            return NULL;
        }
        memcpy(c->clients, v->clients, clients_bytes(v->nclients));
    }
    return c;
}

void tg_var_release_block(tg_var *v) {
    clients_release(v);
    /* inl_id keeps the id it was made with (a new id goes elsewhere) */
    tg_arena_release(v->arena, v, sizeof *v + strlen(v->inl_id) + 1);
}

/* The count in front of a trace's frames, as large as a frame so that
 * the frames after it stay aligned; `strings`, when set, holds the
 * frames' strings (tg_trace_frames_new_in). */
typedef union trace_head {
    struct {
        int refs;
        tg_trace_strings *strings;
    } h;
    tg_frame align;
} trace_head;

/* Each string copied once however many frames name it, into chunks
 * (tg_chunks_alloc). */
struct tg_trace_strings {
    int refs;
    struct tg_chunk *chunks;
};

tg_trace_strings *tg_trace_strings_new(void) {
    tg_trace_strings *s = tg_calloc(1, sizeof *s);
    if (s) s->refs = 1;
    return s;
}

char *tg_trace_strings_add(tg_trace_strings *s, const char *text, size_t len) {
    char *p = len < SIZE_MAX ? tg_chunks_alloc(&s->chunks, len + 1, 1) : NULL;
    if (!p) return NULL;
    memcpy(p, text, len);
    p[len] = 0;
    return p;
}

void tg_trace_strings_unref(tg_trace_strings *s) {
    if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    tg_chunks_free(&s->chunks);
    tg_free(s);
}

tg_frame *tg_trace_frames_new_in(size_t n, tg_trace_strings *s) {
    if (n > (SIZE_MAX - sizeof(trace_head)) / sizeof(tg_frame)) return NULL;
    trace_head *h = tg_calloc(1, sizeof *h + n * sizeof(tg_frame));
    if (!h) return NULL;
    h->h.refs = 1;
    h->h.strings = s;
    if (s) __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    return (tg_frame *)(h + 1);
}

tg_frame *tg_trace_frames_new(size_t n) { return tg_trace_frames_new_in(n, NULL); }

void tg_trace_free(tg_trace *t) {
    if (t->frames) {
        trace_head *h = (trace_head *)t->frames - 1;
        /* traces of a graph are shared by the functions compiled from it,
         * which may be freed on other threads */
        if (__atomic_sub_fetch(&h->h.refs, 1, __ATOMIC_ACQ_REL) == 0) {
            if (h->h.strings)
                tg_trace_strings_unref(h->h.strings);
            else
                for (int i = 0; i < t->n; i++) {
                    tg_free(t->frames[i].file);
                    tg_free(t->frames[i].function);
                    tg_free(t->frames[i].code);
                }
            tg_free(h);
        }
    }
    t->frames = NULL;
    t->n = 0;
}

int tg_trace_copy(tg_trace *dst, const tg_trace *src) {
    tg_trace t = *src;
    if (t.frames) __atomic_add_fetch(&((trace_head *)t.frames - 1)->h.refs, 1, __ATOMIC_RELAXED);
    tg_trace_free(dst);
    *dst = t;
    return TG_OK;
}

tg_shared *tg_shared_new(const char *id, const tg_type *t, tg_array *value) {
    /* the id in the same block: a model's thousand weights are a
     * thousand allocations fewer to restore and to free */
    size_t len = strlen(id);
    tg_shared *s = tg_calloc(1, sizeof *s + len + 1);
    if (!s) return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->users, 0);
    s->id = memcpy((char *)(s + 1), id, len + 1);
    s->type = *t;
    s->value = value ? tg_array_ref(value) : NULL;
    return s;
}

tg_shared *tg_shared_ref(tg_shared *s) {
    if (s) atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
    return s;
}

void tg_shared_unref(tg_shared *s) {
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1) return;
    tg_array_free(s->value);
    tg_array_free(s->dev);
    tg_array_free(s->spare);
    tg_free(s);
}

/* The copies of a shared value (graph.h). The device's are the device
 * backend's arrays; a download reuses the stale host array's memory when
 * nothing else holds it (a caller's borrowed pointer from
 * tg_function_shared_get is valid until the next call or set). */
tg_array *tg_shared_fetch(tg_shared *s, tg_ctx *ctx) {
    if (s->value || !s->dev) return s->value;
    const tg_backend *be = tg_backend_cuda();
    if (!be) {
        tg_errorf(ctx, TG_ERUNTIME, "shared variable '%s' lives on a device this build has no backend for", s->id);
        return NULL;
    }
    tg_array *h = s->spare && tg_array_is_exclusive(s->spare) ? s->spare : NULL;
    if (!h) tg_array_free(s->spare);
    s->spare = NULL;
    if (be->to_host(s->dev, &h, ctx)) {
        /* The device copy stays the value. */
        tg_array_free(h);
        return NULL;
    }
    s->value = h;
    return h;
}

void tg_shared_value_set(tg_shared *s, tg_array *value) {
    s->version++;
    tg_array_free(s->value);
    s->value = value;
    tg_array_free(s->dev);
    s->dev = NULL;
    tg_array_free(s->spare);
    s->spare = NULL;
}

void tg_shared_device_set(tg_shared *s, tg_array *dev) {
    s->version++;
    tg_array_free(s->dev);
    s->dev = dev;
    if (s->value) {
        tg_array_free(s->spare);
        s->spare = s->value;
        s->value = NULL;
    }
}

int tg_shared_fetch_vars(tg_var *const *vars, int n, tg_ctx *ctx) {
    for (int i = 0; i < n; i++) {
        tg_shared *s = vars[i]->kind == TG_VAR_SHARED ? vars[i]->shared : NULL;
        if (s && !s->value && s->dev && !tg_shared_fetch(s, ctx)) return ctx && ctx->status ? ctx->status : TG_ERUNTIME;
    }
    return TG_OK;
}

tg_array *tg_shared_device(tg_shared *s, tg_ctx *ctx) {
    if (s->dev) return s->dev;
    const tg_backend *be = tg_backend_cuda();
    if (!be || !s->value) {
        tg_errorf(ctx, TG_ERUNTIME, "shared variable '%s' has no value to put on the device", s->id);
        return NULL;
    }
    tg_array *d = NULL;
    if (be->to_device(s->value, &d, ctx)) {
        tg_array_free(d);
        return NULL;
    }
    s->dev = d;
    return d;
}

/* ---- attrs hash (merge's, rewrite/merge.c) ---- */

static uint64_t str_hash(uint64_t h, const char *s) {
    for (; s && *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* A JSON value, keys in any order (json_object_equal's equality): a
 * body's text could list them otherwise and still be equal. */
static uint64_t json_hash(json_object *o) {
    uint64_t h = tg_hash_mix(0x51ed270b27a4ce43ull, (uint64_t)json_object_get_type(o));
    switch (json_object_get_type(o)) {
    case json_type_boolean:
        return tg_hash_mix(h, (uint64_t)json_object_get_boolean(o));
    case json_type_int:
        return tg_hash_mix(h, (uint64_t)json_object_get_int64(o));
    case json_type_double: {
        double d = json_object_get_double(o);
        uint64_t b;
        memcpy(&b, &d, sizeof b);
        return tg_hash_mix(h, b);
    }
    case json_type_string:
        return str_hash(h, json_object_get_string(o));
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(o); i++)
            h = tg_hash_mix(h, json_hash(json_object_array_get_idx(o, i)));
        return h;
    case json_type_object: {
        uint64_t sum = 0;
        json_object_object_foreach(o, key, val) sum += tg_hash_finish(str_hash(0, key) ^ json_hash(val));
        return tg_hash_mix(h, sum);
    }
    default:
        return h;
    }
}

/* The attrs, as parsed (equality is checked on the canonical JSON). One
 * op over the same inputs with other attrs had one hash: the rows x[i]
 * of x, one subtensor each (an unrolled loop reads them so), all went to
 * one run of slots, and each lookup compared the attrs of every row
 * before it: 16,000 rows, 36 s. An op with attrs of its own kind (a
 * scan's body, a composite's) hashes their JSON. */
uint32_t tg_node_attrs_hash(const tg_node *n) {
    const tg_attrs *a = &n->a;
    uint64_t h = 0x2545f4914f6cdd1dull;
    if (n->op && (n->op->flags & TG_OPF_AXIS_SET)) {
        /* the axes as a set, not as written (tg_node_attrs_same) */
        h = tg_hash_mix(h, (uint64_t)a->axis_mask | (uint64_t)a->keepdims << 32);
        return (uint32_t)tg_hash_finish(tg_hash_mix(h, (uint64_t)a->ddof));
    }
    h = tg_hash_mix(h, (uint64_t)a->axis_null | (uint64_t)a->axis_is_list << 1 | (uint64_t)a->keepdims << 2 |
                   (uint64_t)a->flag << 3);
    h = tg_hash_mix(h, (uint64_t)a->axis_mask);
    h = tg_hash_mix(h, (uint64_t)a->naxes);
    for (int k = 0; k < a->naxes && k < TG_MAX_NDIM; k++) h = tg_hash_mix(h, (uint64_t)a->axes[k]);
    h = tg_hash_mix(h, (uint64_t)a->ddof);
    h = tg_hash_mix(h, (uint64_t)a->dtype);
    h = tg_hash_mix(h, (uint64_t)a->i);
    h = tg_hash_mix(h, (uint64_t)a->mode);
    h = tg_hash_mix(h, (uint64_t)a->norder);
    for (int k = 0; k < a->norder && k < TG_MAX_NDIM; k++) h = tg_hash_mix(h, (uint64_t)a->order[k]);
    h = tg_hash_mix(h, (uint64_t)a->nindex);
    for (int k = 0; k < a->nindex && a->index; k++) {
        const tg_index_entry *e = &a->index[k];
        h = tg_hash_mix(h, (uint64_t)e->is_slice);
        for (int j = 0; j < 3; j++)
            h = tg_hash_mix(tg_hash_mix(h, (uint64_t)e->v[j]), (uint64_t)e->given[j] | (uint64_t)(uint8_t)e->dyn[j] << 1);
    }
    h = str_hash(h, a->message);
    if (a->extra && n->attrs) h = tg_hash_mix(h, json_hash(n->attrs));
    return (uint32_t)tg_hash_finish(h);
}

bool tg_node_attrs_same(const tg_node *a, const tg_node *b) {
    if (a->op == b->op && (a->op->flags & TG_OPF_AXIS_SET))
        return a->a.axis_mask == b->a.axis_mask && a->a.keepdims == b->a.keepdims && a->a.ddof == b->a.ddof;
    if (!a->attrs || !b->attrs) {
        if (a->attrs == b->attrs) return true;
        /* NULL and {} are the same attrs. */
        const json_object *o = a->attrs ? a->attrs : b->attrs;
        return json_object_object_length((json_object *)o) == 0;
    }
    return json_object_equal(a->attrs, b->attrs);
}

bool tg_node_attrs_small(const tg_node *n) {
    tg_attrs small = {.dtype = n->a.dtype, .mode = n->a.mode};
    return (int)n->a.dtype >= 0 && (int)n->a.dtype <= INT8_MAX && n->a.mode == (int8_t)n->a.mode &&
           memcmp(&n->a, &small, sizeof small) == 0;
}

void tg_node_seal(tg_node *n) {
    n->ahash = tg_node_attrs_hash(n);
    n->aflags = TG_NODE_AHASH;
    if (tg_node_attrs_small(n)) {
        n->aflags |= TG_NODE_ASMALL;
        n->adtype = (int8_t)n->a.dtype;
        n->amode = (int8_t)n->a.mode;
    }
}

/* ---- descriptions for errors ---- */

void tg_node_describe(const tg_node *n, char *buf, size_t size) {
    char where[32] = "";
    if (n->json_index >= 0)
        snprintf(where, sizeof where, "nodes[%d] ", n->json_index);
    const char *out = n->nout > 0 && n->outputs[0] ? n->outputs[0]->id : "?";
    /* An output placement renamed "<id>:cuda" (its host copy took the
     * id) is named as the file names it: the origin it was renamed from
     * (a file node's one origin, or one of those a fused node stands for). */
    for (int i = 0; i < n->norigins; i++) {
        size_t k = n->origins[i] ? strlen(n->origins[i]) : 0;
        if (k && !strncmp(out, n->origins[i], k) && out[k] == ':') {
            out = n->origins[i];
            break;
        }
    }
    if (n->name)
        snprintf(buf, size, "%s(%s '%s' -> %s)", where, n->op ? n->op->name : "?",
                 n->name, out);
    else
        snprintf(buf, size, "%s(%s -> %s)", where, n->op ? n->op->name : "?",
                 out);
}

void tg_node_trace_str(const tg_node *n, char *buf, size_t size) {
    buf[0] = 0;
    if (!n->trace.n) return;
    const tg_frame *f = &n->trace.frames[n->trace.n - 1];
    int k = snprintf(buf, size, " [at %s", f->file ? f->file : "?");
    if (k < 0 || (size_t)k >= size) return;
    if (f->line >= 0) k += snprintf(buf + k, size - (size_t)k, ":%lld", (long long)f->line);
    if ((size_t)k >= size) return;
    if (f->function) k += snprintf(buf + k, size - (size_t)k, " in %s", f->function);
    if ((size_t)k >= size) return;
    if (f->code) k += snprintf(buf + k, size - (size_t)k, ": %s", f->code);
    if ((size_t)k >= size) return;
    snprintf(buf + k, size - (size_t)k, "]");
}

void tg_node_error_wrap(tg_ctx *ctx, const tg_node *n) { tg_node_error_wrap_note(ctx, n, NULL); }

/* How an error names n: as written (tg_node.moved) for a node moved out
 * of a body, else its description, which for a node a rewrite made (a
 * fused composite, a gemm) names the nodes of the file it stands for by
 * their keys (first output ids), at most four, since it has no place in
 * the file. */
static void describe_for_error(const tg_node *n, char *desc, size_t size) {
    if (n->moved) {
        snprintf(desc, size, "%s", n->moved);
        return;
    }
    tg_node_describe(n, desc, size);
    size_t k = strlen(desc);
    if (n->json_index < 0 && n->norigins > 0 && k && desc[k - 1] == ')') {
        k--;
        for (int i = 0; i < n->norigins && i < 4 && k < size; i++) {
            int w = snprintf(desc + k, size - k, "%s%s", i ? ", " : ", standing for ",
                             n->origins[i] ? n->origins[i] : "?");
            if (w < 0) break;
            k += (size_t)w;
        }
        if (k < size && n->norigins > 4) k += (size_t)snprintf(desc + k, size - k, " and %d more", n->norigins - 4);
        if (k < size) snprintf(desc + k, size - k, ")");
    }
}

/* The traces of the bodies n was moved out of (tg_node.moved), or "". */
static const char *moved_traces(const tg_node *n) { return n->moved ? n->moved + strlen(n->moved) + 1 : ""; }

void tg_node_error_parts(const tg_node *n, char *desc, size_t dsize, char *trace, size_t tsize) {
    describe_for_error(n, desc, dsize);
    tg_node_trace_str(n, trace, tsize);
    size_t k = strlen(trace);
    if (k < tsize) snprintf(trace + k, tsize - k, "%s", moved_traces(n));
}

void tg_error_wrap_parts(tg_ctx *ctx, const char *desc, const char *note, const char *trace) {
    if (!ctx) return;
    char d[1024], old[TG_CTX_MSG_MAX];
    snprintf(d, sizeof d, "%s", desc);
    size_t k = strlen(d);
    if (note && *note && k && d[k - 1] == ')') snprintf(d + k - 1, sizeof d - (k - 1), "; %s)", note);
    memcpy(old, ctx->msg, sizeof old);
    snprintf(ctx->msg, sizeof ctx->msg, "%s: %s%s", d, old, trace);
    for (char *s = ctx->msg; *s; s++)
        if (*s == '\n' || *s == '\r') *s = ' ';
}

void tg_node_error_wrap_note(tg_ctx *ctx, const tg_node *n, const char *note) {
    if (!ctx) return;
    char desc[1024], trace[TG_CTX_MSG_MAX];
    tg_node_error_parts(n, desc, sizeof desc, trace, sizeof trace);
    tg_error_wrap_parts(ctx, desc, note, trace);
}

static char *moved_pack(const char *desc, const char *traces) {
    size_t a = strlen(desc) + 1, b = strlen(traces) + 1;
    char *m = tg_malloc(a + b);
    if (!m) return NULL;
    memcpy(m, desc, a);
    memcpy(m + a, traces, b);
    return m;
}

int tg_node_moved_from(tg_node *n, const tg_node *outer, const char *where, const tg_node *bn, bool index) {
    char od[1024], bd[640], desc[2048], tr[1024], traces[2048];
    describe_for_error(outer, od, sizeof od);
    tg_node_describe(bn, bd, sizeof bd);
    const char *b = bd;
    if (!index && !strncmp(b, "nodes[", 6) && strchr(b, ' ')) b = strchr(b, ' ') + 1;
    snprintf(desc, sizeof desc, "%s: %s: %s", od, where, b);
    /* The node's own trace is bn's; the outer node's follows, as the
     * nested errors of the graph run as written give them. Without one
     * of its own, bn is placed by outer's. */
    tg_node_trace_str(outer, tr, sizeof tr);
    snprintf(traces, sizeof traces, "%s%s", bn->trace.n ? tr : "", moved_traces(outer));
    char *m = moved_pack(desc, traces);
    if (!m || tg_trace_copy(&n->trace, bn->trace.n ? &bn->trace : &outer->trace)) {
        tg_free(m);
        return TG_ENOMEM;
    }
    if (bn->name && (!n->name || strcmp(n->name, bn->name))) {
        char *nm = tg_strdup(bn->name);
        if (!nm) {
            tg_free(m);
            return TG_ENOMEM;
        }
        tg_free(n->name);
        n->name = nm;
    }
    tg_free(n->moved);
    n->moved = m;
    return TG_OK;
}

int tg_node_moved_copy(tg_node *c, const tg_node *n) {
    if (n->moved) return tg_node_moved_set(c, n->moved, moved_traces(n));
    tg_free(c->moved);
    c->moved = NULL;
    return TG_OK;
}

int tg_node_moved_set(tg_node *n, const char *desc, const char *traces) {
    char *m = moved_pack(desc, traces);
    if (!m) return TG_ENOMEM;
    tg_free(n->moved);
    n->moved = m;
    return TG_OK;
}

const char *tg_node_moved_traces(const tg_node *n) { return moved_traces(n); }

/* ---- types ---- */

void tg_type_str(const tg_type *t, char *buf, size_t size) {
    size_t k = 0;
    int w = snprintf(buf, size, "%s[",
                     (int)t->dtype >= 0 && t->dtype < TG_NDTYPES
                         ? tg_dtype_name(t->dtype)
                         : "?");
    if (w < 0) return;
    k = (size_t)w;
    for (int i = 0; i < t->ndim && k < size; i++) {
        if (t->shape[i] < 0)
            w = snprintf(buf + k, size - k, "%s?", i ? ", " : "");
        else
            w = snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
                         (long long)t->shape[i]);
        if (w < 0) return;
        k += (size_t)w;
    }
    if (k < size) snprintf(buf + k, size - k, "]");
}

bool tg_type_equal(const tg_type *a, const tg_type *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

bool tg_type_compatible(const tg_type *a, const tg_type *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] >= 0 && b->shape[i] >= 0 && a->shape[i] != b->shape[i])
            return false;
    return true;
}

bool tg_type_fits(const tg_type *t) {
    int64_t bytes = (int64_t)tg_dtype_size(t->dtype);
    /* a zero does not excuse the others (NumPy: "array is too big"), in
       either order: [0, 2^63 - 1] of float64 passed, [2^63 - 1, 0] not */
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > 0 && __builtin_mul_overflow(bytes, t->shape[i], &bytes)) return false;
    return true;
}

bool tg_type_accepts(const tg_type *t, const tg_array *a) {
    if (t->dtype != a->dtype || t->ndim != a->ndim) return false;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] >= 0 && t->shape[i] != a->shape[i]) return false;
    return true;
}

/* ---- graphs ---- */

tg_graph *tg_graph_alloc(void) {
    tg_graph *g = tg_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->ids = tg_idmap_new();
    g->arena = tg_arena_new();
    if (!g->ids || !g->arena) {
        tg_idmap_free(g->ids);
        tg_arena_unref(g->arena);
        tg_free(g);
        return NULL;
    }
    return g;
}

static int grow(void **arr, int *cap, int need, size_t elt) {
    if (need <= *cap) return TG_OK;
    int c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *p = tg_realloc(*arr, (size_t)c * elt);
    if (!p) return TG_ENOMEM;
    *arr = p;
    *cap = c;
    return TG_OK;
}

int tg_graph_add_var(tg_graph *g, tg_var *v) {
    if (grow((void **)&g->vars, &g->cvars, g->nvars + 1, sizeof *g->vars))
        return TG_ENOMEM;
    if (tg_idmap_put(g->ids, v->id, v)) return TG_ENOMEM;
    v->index = g->nvars;
    g->vars[g->nvars++] = v;
    return TG_OK;
}

int tg_graph_add_node(tg_graph *g, tg_node *n) {
    if (grow((void **)&g->nodes, &g->cnodes, g->nnodes + 1, sizeof *g->nodes))
        return TG_ENOMEM;
    n->index = g->nnodes;
    g->nodes[g->nnodes++] = n;
    return TG_OK;
}

tg_var *tg_graph_find(const tg_graph *g, const char *id) {
    return tg_idmap_get(g->ids, id);
}

static void fdecl_free(tg_fdecl *f) {
    tg_free(f->name);
    tg_free(f->inputs);
    tg_free(f->outputs);
    tg_free(f->updates);
    tg_free(f->order);
}

void tg_graph_free(tg_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->nnodes; i++) tg_node_free(g->nodes[i]);
    for (int i = 0; i < g->nvars; i++) tg_var_free(g->vars[i]);
    for (int i = 0; i < g->nfuncs; i++) fdecl_free(&g->funcs[i]);
    tg_free(g->funcs);
    tg_free(g->nodes);
    tg_free(g->vars);
    if (g->meta) json_object_put(g->meta);
    tg_idmap_free(g->ids);
    tg_free(g->name);
    tg_free(g->path);
    tg_free(g->dir);
    tg_arena_unref(g->arena);
    for (int i = 0; i < g->nwarnings; i++) tg_free(g->warnings[i]);
    tg_free(g->warnings);
    tg_free(g);
}

void tg_graph_warnf(tg_graph *g, const char *fmt, ...) {
    if (g->nwarnings >= TG_GRAPH_WARNINGS_MAX) {
        g->warnings_cut = true;
        return;
    }
    if (!g->warnings && !(g->warnings = tg_calloc(TG_GRAPH_WARNINGS_MAX, sizeof *g->warnings))) return;
    char buf[TG_CTX_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tg_one_line(buf);
    char *s = tg_malloc(strlen(buf) + 1);
    if (!s) return;
    strcpy(s, buf);
    g->warnings[g->nwarnings++] = s;
}

int tg_graph_warning_count(const tg_graph *g) { return g ? g->nwarnings + (g->warnings_cut ? 1 : 0) : 0; }
const char *tg_graph_warning(const tg_graph *g, int i) {
    if (!g || i < 0) return NULL;
    if (i < g->nwarnings) return g->warnings[i];
    return i == g->nwarnings && g->warnings_cut ? "more warnings than these were left out" : NULL;
}

int tg_graph_node_count(const tg_graph *g) { return g->nnodes; }
int tg_graph_var_count(const tg_graph *g) { return g->nvars; }
int tg_graph_function_count(const tg_graph *g) { return g->nfuncs; }
const char *tg_graph_function_name(const tg_graph *g, int i) {
    return i >= 0 && i < g->nfuncs ? g->funcs[i].name : NULL;
}

int tg_graph_function_find(const tg_graph *g, const char *name,
                           tg_ctx *ctx) {
    if (name) {
        for (int i = 0; i < g->nfuncs; i++)
            if (strcmp(g->funcs[i].name, name) == 0) return i;
        tg_str list = {0};
        for (int i = 0; i < g->nfuncs; i++)
            tg_str_addf(&list, "%s'%s'", i ? ", " : "", g->funcs[i].name);
        tg_errorf(ctx, TG_ENOTFOUND, "no function '%s' in %s (it has %s)",
                  name, g->path ? g->path : "the graph",
                  list.s ? list.s : "none");
        tg_str_free(&list);
        return -1;
    }
    if (g->nfuncs == 1) return 0;
    for (int i = 0; i < g->nfuncs; i++)
        if (strcmp(g->funcs[i].name, "main") == 0) return i;
    tg_str list = {0};
    for (int i = 0; i < g->nfuncs; i++)
        tg_str_addf(&list, "%s'%s'", i ? ", " : "", g->funcs[i].name);
    tg_errorf(ctx, TG_ENOTFOUND,
              "%s has %d functions and none is 'main': pick one of %s",
              g->path ? g->path : "the graph", g->nfuncs,
              list.s ? list.s : "none");
    tg_str_free(&list);
    return -1;
}

static void heap_push(int *h, int *n, int v) {
    int i = (*n)++;
    h[i] = v;
    while (i > 0 && h[(i - 1) / 2] > h[i]) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static int heap_pop(int *h, int *n) {
    int top = h[0];
    h[0] = h[--*n];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l] < h[m]) m = l;
        if (r < *n && h[r] < h[m]) m = r;
        if (m == i) break;
        int t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

/* Kahn's algorithm over producer -> consumer edges; ties keep file order,
 * so a file already in order stays as written. On a cycle, walk it from a
 * node left over to name the ids on it. */
int tg_graph_toposort(tg_graph *g, tg_ctx *ctx) {
    int n = g->nnodes, rc = TG_OK;
    int *indeg = tg_calloc((size_t)n + 1, sizeof *indeg);
    int *queue = tg_calloc((size_t)n + 1, sizeof *queue);
    tg_node **sorted = tg_calloc((size_t)n + 1, sizeof *sorted);
    if (!indeg || !queue || !sorted) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++) g->nodes[i]->index = i;
    for (int i = 0; i < n; i++) {
        tg_node *nd = g->nodes[i];
        for (int k = 0; k < nd->nin; k++)
            if (nd->inputs[k]->owner) indeg[i]++;
    }
    /* Consumers of each node's outputs: build once from the inputs. */
    int *ccount = tg_calloc((size_t)n + 1, sizeof *ccount);
    if (!ccount) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    int total = 0;
    for (int i = 0; i < n; i++) {
        tg_node *nd = g->nodes[i];
        for (int k = 0; k < nd->nin; k++)
            if (nd->inputs[k]->owner) {
                ccount[nd->inputs[k]->owner->index]++;
                total++;
            }
    }
    int *cstart = tg_calloc((size_t)n + 1, sizeof *cstart);
    int *cons = tg_calloc((size_t)total + 1, sizeof *cons);
    if (!cstart || !cons) {
        tg_free(ccount);
        tg_free(cstart);
        tg_free(cons);
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++) cstart[i + 1] = cstart[i] + ccount[i];
    memset(ccount, 0, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        tg_node *nd = g->nodes[i];
        for (int k = 0; k < nd->nin; k++)
            if (nd->inputs[k]->owner) {
                int p = nd->inputs[k]->owner->index;
                cons[cstart[p] + ccount[p]++] = i;
            }
    }
    /* A min-heap on the position: among the ready nodes the earliest
     * goes first, so a list already in order stays exactly as it is (a
     * saved graph loads back in the same order). */
    int hn = 0, nsorted = 0;
    for (int i = 0; i < n; i++)
        if (!indeg[i]) heap_push(queue, &hn, i);
    while (hn) {
        int i = heap_pop(queue, &hn);
        sorted[nsorted++] = g->nodes[i];
        for (int c = cstart[i]; c < cstart[i + 1]; c++)
            if (--indeg[cons[c]] == 0) heap_push(queue, &hn, cons[c]);
    }
    if (nsorted < n) {
        /* Every left-over node with indeg > 0 has a left-over producer:
         * follow producers until a node repeats. */
        int start = -1;
        for (int i = 0; i < n && start < 0; i++)
            if (indeg[i] > 0) start = i;
        int *seen = tg_calloc((size_t)n + 1, sizeof *seen);
        tg_str ids = {0};
        if (seen) {
            int cur = start, step = 1;
            while (!seen[cur]) {
                seen[cur] = step++;
                tg_node *nd = g->nodes[cur];
                int next = -1;
                for (int k = 0; k < nd->nin && next < 0; k++)
                    if (nd->inputs[k]->owner &&
                        indeg[nd->inputs[k]->owner->index] > 0)
                        next = nd->inputs[k]->owner->index;
                if (next < 0) break;
                cur = next;
            }
            /* cur starts the cycle; print it in data-flow order. */
            int first = cur, k = 0;
            int order[64];
            do {
                if (k < 64) order[k++] = cur;
                tg_node *nd = g->nodes[cur];
                int next = -1;
                for (int j = 0; j < nd->nin && next < 0; j++)
                    if (nd->inputs[j]->owner &&
                        indeg[nd->inputs[j]->owner->index] > 0 &&
                        seen[nd->inputs[j]->owner->index])
                        next = nd->inputs[j]->owner->index;
                if (next < 0) break;
                cur = next;
            } while (cur != first && k < 64);
            for (int j = k - 1; j >= 0; j--)
                tg_str_addf(&ids, "%s%s", j == k - 1 ? "" : " -> ",
                            g->nodes[order[j]]->outputs[0]->id);
            if (k) tg_str_addf(&ids, " -> %s", g->nodes[order[k - 1]]->outputs[0]->id);
        }
        rc = tg_errorf(ctx, TG_ELOAD, "nodes[%d]: the graph has a cycle: %s",
                       g->nodes[start]->json_index, ids.s ? ids.s : "?");
        tg_str_free(&ids);
        tg_free(seen);
    } else {
        if (n) memcpy(g->nodes, sorted, sizeof(tg_node *) * (size_t)n);
        for (int i = 0; i < n; i++) g->nodes[i]->index = i;
    }
    tg_free(ccount);
    tg_free(cstart);
    tg_free(cons);
fail:
    tg_free(indeg);
    tg_free(queue);
    tg_free(sorted);
    return rc;
}
