/* Private: variables, apply nodes, graphs and function graphs.
 *
 * A tg_graph is what a file holds: every variable and node, the functions,
 * `meta`. A tg_fgraph is the part of a graph one function needs, cloned,
 * with each variable's clients so that replacing a variable is cheap; the
 * optimizer rewrites fgraphs and the VM links them.
 */
#ifndef TG_GRAPH_INTERNAL_H
#define TG_GRAPH_INTERNAL_H

#include <json-c/json.h>

#include "tg/graph.h"
#include "tensor/tensor.h"

typedef struct tg_op tg_op;
typedef struct tg_node tg_node;
typedef struct tg_var tg_var;

/* A static type: dtype and shape, -1 for a length unknown until run time. */
typedef struct tg_type {
    tg_dtype dtype;
    int ndim;
    int64_t shape[TG_MAX_NDIM];
} tg_type;

/* One frame of a creation trace (innermost last). Any field may be NULL /
 * -1 when the file did not give it. */
typedef struct tg_frame {
    char *file;
    int64_t line;
    char *function;
    char *code;
} tg_frame;

typedef struct tg_trace {
    int n;
    tg_frame *frames; /* from tg_trace_frames_new, shared by the copies */
} tg_trace;

/* Shared state: one per shared variable of a graph, referenced by every
 * function compiled from it, so that `train` and `predict` see the same
 * weights.
 *
 * A function placed on a device keeps a device copy (`dev`) that it reads
 * without an upload and into which it stores its update without a
 * download; the host value is then stale until something on the host
 * asks for it. Stale is `value` NULL with `dev` set (the old host array
 * waits in `spare`, for the download to reuse), so that the CPU's call
 * path, which compares `value` with what its slot holds, needs no test
 * of its own when nothing is on a device. Readers go through
 * tg_shared_value (which brings the value back when it is stale) and
 * writers through tg_shared_value_set / tg_shared_device_set, which keep
 * the copies consistent.
 *
 * Functions in different threads share it (copies of one function, the
 * functions of one graph), so its reference count is atomic, and `users`
 * keeps a call that updates the variable apart from every other call
 * that reads or updates it (tg_function_call): n > 0 calls that only
 * read it are running, -1 one that updates it, 0 none. */
typedef struct tg_shared {
    atomic_long refcount;
    atomic_long users;
    char *id;
    tg_type type;
    tg_array *value; /* the host value; NULL while stale */
    tg_array *dev;   /* the device copy, or NULL; the value when stale,
                        else equal to it */
    tg_array *spare; /* while stale: the old host array, or NULL */
    uint64_t version; /* counts the new values assigned (updates, in place
                         or not; sets): what a reader that checked one
                         value compares (the NaN guard) */
} tg_shared;

typedef enum tg_var_kind {
    TG_VAR_INPUT = 0, /* free input: declared, no producer, no value */
    TG_VAR_CONSTANT,
    TG_VAR_SHARED,
    TG_VAR_RESULT /* produced by a node */
} tg_var_kind;

typedef struct tg_client {
    tg_node *node; /* NULL: the variable is an output of the fgraph */
    int index;     /* input index at node, or output index */
} tg_client;

struct tg_var {
    /* What the passes and the linker touch on every visit first, in one
     * cache line: on graphs of 100,000 nodes the walks are bound by memory
     * latency, not by the work per node. */
    tg_var_kind kind;
    int index; /* position in its graph's or fgraph's var list */
    tg_node *owner; /* producing node, or NULL */
    int owner_index;
    int nclients, cclients;
    tg_client *clients;
    void *mark; /* scratch for passes (clone maps, visit marks) */
    char *id;
    tg_type type;
    char *name; /* NULL: the id is the name */
    bool weak;         /* a weak inline scalar (FORMAT.md s5) */
    bool weak_in_file; /* written weak: saved as a bare scalar again, so
                          that it stays weak (weak is cleared by infer) */
    bool inline_const; /* written inline as {"value": ...} */
    bool declared;     /* listed in `variables` */
    bool type_given;   /* the file gave a type (checked on node outputs) */
    bool resident;     /* placement: a shared value or constant the device
                          reads where it lives (its device copy), with no
                          transfer node (rewrite/place.c) */
    int json_index;    /* variables[i], or -1 */
    tg_array *value;   /* constant value; NULL otherwise */
    tg_shared *shared; /* shared state; NULL otherwise */
    tg_array *test_value;
    struct tg_arena *arena; /* where the variable lives (tg_var_new_in), or
                               NULL: the allocator */
    /* Most variables have one or two readers and a short id: both live
     * in the variable's own allocation until they outgrow it (clients
     * then moves to the variable's arena, or the heap without one; id
     * points elsewhere once replaced). */
    tg_client inl_clients[2];
    char inl_id[];
};
/* Make v->clients hold at least `need` entries (moving them off the
 * inline slots when they outgrow them). TG_OK or TG_ENOMEM. */
int tg_var_clients_reserve(tg_var *v, int need);

/* Subtensor index entry (FORMAT.md s7): an integer, or a slice whose
 * parts may each be a constant, absent, or the k-th extra input. */
typedef struct tg_index_entry {
    bool is_slice;
    int64_t v[3];   /* int: v[0]; slice: start, stop, step */
    bool given[3];  /* slice part present (not null) */
    int8_t dyn[3];  /* extra input number (0-based), or -1 */
} tg_index_entry;

/* Parsed attributes. One struct for every op keeps the op table simple:
 * each op's parse_attrs fills the fields it uses. The canonical JSON form
 * (defaults filled in) is kept in tg_node.attrs for saving, comparing and
 * hashing. */
typedef struct tg_attrs {
    /* axis / axes: reductions, transpose, squeeze, softmax, join... */
    bool axis_null;
    bool axis_is_list;
    int naxes;
    int axes[TG_MAX_NDIM]; /* as written (may be negative) */
    uint32_t axis_mask;    /* normalised by infer: bit i = axis i */
    bool keepdims;
    int64_t ddof;
    tg_dtype dtype; /* cast, arange, eye, random */
    int64_t i;      /* shape_i, flatten's ndim, split's n */
    int norder;
    int order[TG_MAX_NDIM]; /* dimshuffle; -1 is "x" */
    int nindex;
    tg_index_entry *index; /* nindex entries (subtensor ops), owned */
    bool flag; /* cholesky lower, ... */
    int mode;  /* solve assume_a, pool mode, ... */
    char *message;
    void *extra; /* op-specific; freed by op->free_extra */
} tg_attrs;

/* The head of a device kernel's per-node state (tg_node.kstate): the
 * state's first member, whose `free` releases the whole state. */
typedef struct tg_kstate {
    void (*free)(struct tg_kstate *s);
} tg_kstate;

struct tg_node {
    /* Hot fields first (see tg_var); the parsed attrs, large, last. */
    const tg_op *op;
    int nin, nout;
    tg_var **inputs;
    int *inpos; /* in a function graph: where in inputs[i]->clients this
                   node's entry for input i is, so that removing it is
                   O(1) however many readers the input has */
    tg_var **outputs;
    int index;
    uint8_t rwflags; /* the optimizer's: dead (TG_NODE_DEAD), on the worklist */
    int8_t dnn_algo; /* cuDNN algorithm policy (backend/dnn.h), set by compile */
    uint8_t aflags;  /* TG_NODE_AHASH, TG_NODE_ASMALL: what tg_node_seal found */
    void *mark;
    json_object *attrs; /* canonical attrs, owned (may be NULL: none) */
    int8_t *inplace; /* nout entries: input index whose buffer output i
                        overwrites, or -1; NULL when none */
    /* The keys (first output ids) of the original nodes this node stands
     * for, when a rewrite made it; NULL: an original node, standing for
     * itself. Owned, in one block (tg_origins_pack): the pointers, a
     * NULL, then the strings they point to; one tg_free releases it. */
    char **origins;
    int norigins;
    /* The hash of the attrs (tg_node_attrs_hash), valid with TG_NODE_AHASH:
     * computed while a new node's attrs are in the cache, so that merge,
     * which hashes every node of a graph long out of it, reads this line
     * instead of the three of `a` (and, for a body, its whole JSON). */
    uint32_t ahash;
    /* While the optimizer runs: the origins of a node that rewrites made,
     * as a set shared with the nodes it replaced (a union; origins is
     * then NULL until tg_node_origins_settle writes them out), or a copy
     * of origins kept for the next union (a leaf). NULL otherwise, and
     * always once the optimizer is done. */
    struct tg_oset *oset;
    int json_index; /* nodes[i] in the file, or -1 for a node made later */
    int8_t adtype, amode; /* with TG_NODE_ASMALL: a.dtype and a.mode */
    /* For a node that expanding a grad, rop or lop node of the file made:
     * which derivative it takes part in, as one owned block of four
     * NUL-terminated strings (tg_grad_of_pack): the key of the node it
     * differentiates ("" for the expansion's own nodes, such as the seed
     * of the cost), that node's op, then the grad, rop or lop node's key
     * and op. NULL: any other node. */
    char *grad_of;
    /* For a node a rewrite moved out of a body (scan_hoist, scan_push_seq,
     * scan_inline, scan_pull_out, inline_op_from_graph): how an error
     * names it, as the run of the graph as written would, in one owned
     * block of two NUL-terminated strings (tg_node_moved_from): the
     * description ("nodes[0] (scan 'loop' -> ps): in the body, hoisted
     * out of the loop: (int_div 'chk' -> q)"), then the traces of the
     * nodes whose bodies it was in (" [at model.py:10 in build: ...]"),
     * which follow the node's own. NULL: any other node. */
    char *moved;
    char *name;
    tg_trace trace;
    /* A device kernel's state for this node, kept across calls for the
     * life of the function and freed with the node (the cuDNN kernels:
     * descriptors, the algorithms chosen and the shapes they were chosen
     * for). NULL: none. */
    tg_kstate *kstate;
    struct tg_arena *arena; /* where the node lives (tg_node_new_in), or NULL */
    tg_attrs a;
};

/* In tg_node.rwflags: the optimizer pruned the node (rewrite/engine.c,
 * tg_rw_prune), which took it off its inputs' reader lists; the next
 * topological sort frees it. */
enum { TG_NODE_DEAD = 1 };

/* In tg_node.aflags, set by tg_node_seal once the node's attrs are final
 * (parsed and inferred) and never changed after: ahash holds their hash;
 * `a` holds nothing but a.dtype and a.mode, both copied to adtype and
 * amode (an elementwise op's: its output and computation dtypes), so that
 * a copy of the node (the clone's) need not read `a`, three lines. */
enum { TG_NODE_AHASH = 1, TG_NODE_ASMALL = 2 };

/* The hash of a node's attrs (as parsed; any op-specific ones by their
 * canonical JSON): equal attrs, equal hashes. */
uint32_t tg_node_attrs_hash(const tg_node *n);
/* Whether two nodes' attrs mean the same: their JSON is equal (NULL and
 * {} alike), or, for an op of one axis set (TG_OPF_AXIS_SET, ops/op.h),
 * once inferred, the same axes, keepdims and ddof however the axes were
 * written. Same attrs, same hash. */
bool tg_node_attrs_same(const tg_node *a, const tg_node *b);
/* Record the hash of n's attrs, and whether `a` is small (aflags, with
 * the copies). For nodes whose attrs are final: the loader's and the
 * optimizer's, once inferred. */
void tg_node_seal(tg_node *n);
/* Whether `a` holds nothing but a.dtype and a.mode, each in an int8. */
bool tg_node_attrs_small(const tg_node *n);
/* A copy's `a` from a node sealed with TG_NODE_ASMALL: the two numbers
 * its seal keeps, without reading n->a (three lines, cold on a large
 * graph); the rest of c->a stays as made, zero. */
static inline void tg_node_small_attrs_copy(tg_node *c, const tg_node *n) {
    c->a.dtype = n->adtype;
    c->a.mode = n->amode;
}

/* One more word into a hash. Each step is one-to-one in h (a product by
 * an odd constant, an xor with a right shift): hashes that differ stay
 * different whatever follows. Boost's hash_combine, used before, is not
 * (h ^ f(h) loses bits), and over the twenty-odd words of a node's attrs
 * and inputs it made 16 of 2,000 rows `x[i]` share a hash with another
 * row, how many depending on where the process's memory lay. */
static inline uint64_t tg_hash_mix(uint64_t h, uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

/* A table's slot is a hash's low bits, and tg_hash_mix moves high bits
 * down by only two places a step: nodes whose inputs are variables a
 * fixed stride apart in their arena (gt(k, c) for each of 20,000
 * constants c) differed only in the high bits, so they fell into a few
 * runs of slots and each lookup probed its way along one, quadratic:
 * merge took 1.4 of the 2.7 s of tgc check of a chain of 20,000 ifelse
 * nodes. MurmurHash3's finalizer spreads every bit over the low ones. */
static inline uint64_t tg_hash_finish(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

typedef struct tg_update {
    tg_var *shared; /* the shared variable */
    tg_var *value;  /* its next value */
} tg_update;

typedef struct tg_fdecl {
    char *name;
    int json_inputs_given; /* false: implicit main */
    int nin, nout, nupd;
    tg_var **inputs;
    tg_var **outputs;
    tg_update *updates;
    /* What the clone's depth-first walk made, in order, recorded by
     * tg_fdecl_check when the graph was loaded (NULL: not recorded): a
     * node's position in the graph's node list (>= 0), or ~index of a
     * variable without a producer (a constant or shared value met on the
     * way). tg_fgraph_from_decl replays it instead of walking again: a
     * sweep whose next nodes can be fetched ahead, where the walk waits
     * for one cache miss after another (node, input, producer, ...) on
     * graphs bigger than the cache. Kept with the node and variable counts
     * it was made for; another count and the walk runs. */
    int *order;
    int norder, order_nodes, order_vars;
} tg_fdecl;

struct tg_graph {
    char *name;
    char *path; /* file it came from, or a label */
    char *dir;  /* folder for npy paths */
    tg_var **vars;
    int nvars, cvars;
    tg_node **nodes; /* topological order after load */
    int nnodes, cnodes;
    tg_fdecl *funcs;
    int nfuncs;
    json_object *meta;  /* kept as is */
    struct tg_idmap *ids; /* id -> var */
    /* Where the loader makes the nodes and variables (in file order, for
     * the walks that clone functions out of the graph); the graph holds
     * the owner's reference. Others may come from the allocator. */
    struct tg_arena *arena;
    /* a grad, rop or lop node was expanded (some nodes carry grad_of):
     * compiling a function looks for them only then */
    bool has_grads;
    /* What the load found worth saying that is not an error (a gradient
     * with attrs.disconnected "warn"), at most TG_GRAPH_WARNINGS_MAX. */
    char **warnings;
    int nwarnings;
    bool warnings_cut; /* more were found */
};

enum { TG_GRAPH_WARNINGS_MAX = 64 };
/* Record one warning on g (formatted, made one line); silently nothing
 * when out of memory or past the cap (then warnings_cut). */
void tg_graph_warnf(tg_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

enum { TG_OPSET_WORDS = 16 }; /* 1024 bits */

/* The part of a graph one function needs, cloned. */
typedef struct tg_fgraph {
    tg_var **inputs;
    int nin;
    tg_var **outputs; /* outputs, then update values */
    int nout;         /* function outputs */
    int nupd;         /* update values follow the outputs */
    tg_var **upd_shared;
    tg_var **vars;
    int nvars, cvars;
    /* Its constants among vars, in the order they joined (some may have no
     * readers left): merge reads these instead of sweeping every variable
     * (on 100,000 nodes, 150,000 variables of cold memory, 4 to 12 ms a
     * sweep). Every way a variable joins adds to it (tg_fgraph_add_var,
     * the optimizer's new variables); the optimizer's final compaction and
     * tg_fgraph_compact, which free or move variables, keep it. */
    tg_var **consts;
    int nconsts, cconsts;
    tg_node **nodes; /* topological */
    int nnodes, cnodes;
    /* Where its nodes and variables are made (tg_node_new_in and
     * tg_var_new_in), so that they lie in memory in the order they were
     * made; NULL: the allocator. The fgraph holds the owner's reference. */
    struct tg_arena *arena;
    /* The ops its nodes may have: bit tg_opset_bit(op) is set by
     * tg_fgraph_add_node (the only way a node joins an fgraph) and never
     * cleared, so a clear bit means no node has that op (a set one may be
     * another op's, or a node since removed). A pass whose rules match
     * none of them, or merge asking whether any node is lazy, then skips
     * a sweep over every node: on 100,000 nodes, memory-bound, 3 ms each. */
    uint64_t opseen[TG_OPSET_WORDS];
    /* A node was cloned with in-place hints from its file (a graph the
     * optimizer wrote, exported and loaded again): the optimizer checks
     * them once it is done (rewrite/engine.c). */
    bool inplace_hints;
} tg_fgraph;

/* Which bit of an op set stands for op. */
static inline unsigned tg_opset_bit(const tg_op *op) {
    return (unsigned)(((uint64_t)(uintptr_t)op * 0x9e3779b97f4a7c15ull) >> 54); /* 10 bits */
}
static inline void tg_opset_add(uint64_t *set, const tg_op *op) {
    unsigned b = tg_opset_bit(op);
    set[b / 64] |= 1ull << (b % 64);
}
/* Whether two op sets share a bit. */
static inline bool tg_opset_meet(const uint64_t *a, const uint64_t *b) {
    uint64_t any = 0;
    for (int i = 0; i < TG_OPSET_WORDS; i++) any |= a[i] & b[i];
    return any != 0;
}

/* Fetching ahead, for walks over graphs that outgrow the cache: their
 * misses then overlap instead of each waiting for the last. GCC 12 takes
 * a function whose only effect is a prefetch for one without effects and
 * deletes its calls: these are macros or always_inline.
 *
 * In a sweep over a node or variable array: the entry 16 places on (for
 * writing). */
#define TG_SWEEP_PREFETCH(arr, i, n)                                                       \
    do {                                                                                   \
        if ((i) + 16 < (n)) __builtin_prefetch((arr)[(i) + 16], 1);                        \
    } while (0)

/* A node's header and the input array just before it (graph.c,
 * tg_node_new). */
static inline __attribute__((always_inline)) void tg_prefetch_node(const tg_node *m) {
    __builtin_prefetch(m);
    __builtin_prefetch((const char *)m - 64);
}

/* The variables a node reads (its first four) and makes (its first two):
 * for a node whose header came in a few steps earlier. */
static inline __attribute__((always_inline)) void tg_prefetch_node_vars(const tg_node *m) {
    for (int k = 0; k < m->nin && k < 4; k++) __builtin_prefetch(m->inputs[k]);
    for (int k = 0; k < m->nout && k < 2; k++) __builtin_prefetch(m->outputs[k]);
}

/* ---- id map ---- */
struct tg_idmap *tg_idmap_new(void);
void tg_idmap_free(struct tg_idmap *m);
int tg_idmap_put(struct tg_idmap *m, const char *id, void *v);
void *tg_idmap_get(const struct tg_idmap *m, const char *id);
/* The entry for id in a, else in b (either may be NULL), the two probes
 * overlapped: for maps far bigger than the cache, one miss's wait
 * instead of two. */
void *tg_idmap_get2(const struct tg_idmap *a, const struct tg_idmap *b, const char *id);

/* ---- variables and nodes ---- */
tg_var *tg_var_new(const char *id, tg_var_kind kind);
/* The same, in an arena (NULL: the allocator); freed by tg_var_free. */
tg_var *tg_var_new_in(struct tg_arena *a, const char *id, tg_var_kind kind);
/* Make v (a new constant) hold a, which it takes, and type it exactly:
 * a scalar is written inline ({"value": ...}) when saved. */
void tg_var_set_constant(tg_var *v, tg_array *a);
void tg_var_free(tg_var *v);
tg_node *tg_node_new(const tg_op *op, int nin, int nout);
/* The same, in an arena (NULL: the allocator); freed by tg_node_free. */
tg_node *tg_node_new_in(struct tg_arena *a, const tg_op *op, int nin, int nout);
/* A copy of n in arena a that takes over everything n owns (its inputs
 * and outputs are the same variables); NULL: no memory, n unchanged.
 * Then tg_node_release_block(n) gives back n's block alone. */
tg_node *tg_node_move(struct tg_arena *a, tg_node *n);
void tg_node_release_block(tg_node *n);
/* The same for a variable (its clients are the same nodes, in a list of
 * its own in a); tg_var_release_block(v) gives back v's block and its
 * list of clients. */
tg_var *tg_var_move(struct tg_arena *a, tg_var *v);
void tg_var_release_block(tg_var *v);
void tg_node_free(tg_node *n);
/* A node's origins as one block holding n + 1 pointers (the last NULL)
 * and the n strings they point to, copied from keys (NULL when n is 0):
 * one allocation where a list of tg_strdup copies made n + 1, which on
 * graphs of 100,000 nodes the allocator then had to take back one by
 * one. NULL: no memory. */
char **tg_origins_pack(const char *const *keys, int n);
/* first[i]: whether keys[i] is not among keys[0..i) (by hash, in time
 * linear in the keys' length; first NULL: only counted). Returns how
 * many are; -1: no memory. */
int tg_origins_first(const char *const *keys, int n, bool *first);
/* tg_origins_pack of keys[0..n), each once, where it first appears;
 * *nkeys: how many. NULL: no memory. */
char **tg_origins_pack_unique(const char *const *keys, int n, int *nkeys);
/* Origin sets (origins.c): reference-counted, a leaf holding copies of
 * keys, or the union of other sets in order (each referenced), so that a
 * union costs the number of sets it unites, not their keys. */
typedef struct tg_oset tg_oset;
tg_oset *tg_oset_leaf(const char *const *keys, int n);
tg_oset *tg_oset_union(tg_oset *const *kids, int n);
void tg_oset_unref(tg_oset *s); /* NULL is ignored */
int tg_oset_total(const tg_oset *s); /* keys counted with repeats (a bound) */
bool tg_oset_is_leaf(const tg_oset *s);
/* The set's keys, each once, in the order of a depth-first walk (where
 * each first appears), packed as tg_origins_pack does; NULL: no memory. */
char **tg_oset_flatten(tg_oset *s, int *nkeys);
/* Write out the origins of a node whose oset is a union (else nothing
 * to do) and drop the set. TG_ENOMEM. */
int tg_node_origins_settle(tg_node *n);
/* (ops/composite.c; declared here because composite.h's kernel type
 * clashes with the backends') Which original nodes each fused node of a
 * composite stood for: fused node j (body variable t<j>) stood for
 * keys[starts[j] .. starts[j + 1]). The keys are the node's origins, or,
 * when two fused nodes stood for one original node (a rewrite that made
 * two nodes of one), a list of their own that repeats it (the origins
 * name each node once). Returns the starts (*nfused + 1 of them), or NULL
 * when the node does not know: not a composite, one read from a graph
 * file, or one whose origins grew past its groups (merge folded an equal
 * composite into it). */
const int *tg_composite_origin_groups(const tg_node *n, int *nfused, const char *const **keys, int *nkeys);
/* The keys to write as n's origins (a .tgf, a copy): its groups' keys with
 * their starts (returned) when it has groups, else its origins (NULL). */
static inline const int *tg_node_origin_keys(const tg_node *n, const char *const **keys, int *nkeys, int *nfused) {
    const int *st = n->origins ? tg_composite_origin_groups(n, nfused, keys, nkeys) : NULL;
    if (!st) {
        *keys = (const char *const *)n->origins;
        *nkeys = n->norigins;
    }
    return st;
}
/* Give a composite node whose origins are the keys of its groups (read
 * back from a compiled-function file, or copied) the groups' starts
 * (copied): nfused + 1 of them, 0 first, rising (each fused node stood
 * for at least one), the last the node's origin count. A key the groups
 * repeat then stays in the origins once. TG_EINVAL when they are not so,
 * TG_ENOMEM. */
int tg_composite_set_origin_groups(tg_node *n, const int *starts, int nfused);
/* After composite node n's run failed in the op of one of its fused
 * nodes (an integer division by zero): how the error names that node,
 * as it would unfused (tg_node_error_parts' desc and trace, borrowed
 * from n), and, when n knows them, the keys it stood for (*keys, *nkeys
 * left as they are otherwise). false when the run did not fail in a
 * fused op, or n does not know its fused nodes (one read from a graph or
 * compiled-function file). */
bool tg_composite_failed_node(const tg_node *n, const char **desc, const char **trace,
                              const char *const **keys, int *nkeys);
/* How many fused nodes composite node n can name in an error (above): 0
 * when it knows none (not a composite, or one read from a graph file or
 * a .tgf before format version 4). */
int tg_composite_who_count(const tg_node *n);
/* Fused node j's (j below tg_composite_who_count) description and trace
 * text, as tg_composite_failed_node gives them (borrowed from n). */
void tg_composite_who(const tg_node *n, int j, const char **desc, const char **trace);
/* Give composite node n the names of its nfused fused nodes (a .tgf
 * restore, a copy): parts holds each one's description and trace text,
 * in turn (2 * nfused strings, copied). TG_EINVAL when n is no parsed
 * composite or nfused < 1, TG_EPARSE when a description is 1024 bytes or
 * longer or a trace text TG_CTX_MSG_MAX (longer than tg makes them),
 * TG_ENOMEM; n is unchanged then. */
int tg_composite_who_set(tg_node *n, const char *const *parts, int nfused);

/* A node's grad_of block (above), the four strings copied; NULL for
 * "of" or "of_op" is "". NULL: no memory. */
char *tg_grad_of_pack(const char *of, const char *of_op, const char *by, const char *by_op);
/* The four strings of a grad_of block, in its order. */
void tg_grad_of_split(const char *block, const char *s[4]);
const char *tg_var_label(const tg_var *v); /* name, or id */
/* n zeroed frames for a trace to fill in, read-only once filled: a block
 * with a reference count in front, so that the copies of a trace (a clone
 * or a rewrite gives each node the trace of the node it stands for) share
 * it. Exported graphs give every node a trace, and copying its strings
 * took more than half of a fast_run compile of such graphs. NULL: no
 * memory. */
tg_frame *tg_trace_frames_new(size_t n);
/* Strings that the frames of many traces point into, so that a trace
 * read from a file need not copy a string for each frame that names it
 * (a .tgf's frames are positions in its string table: copying each
 * frame's strings let a small file that names one long string in many
 * frames ask for far more memory than its size). _new holds one
 * reference, NULL: no memory; _add copies len bytes of text (and a NUL)
 * into s, which keeps them until its last reference goes: NULL, no
 * memory. Only one thread adds, before the frames are shared. */
typedef struct tg_trace_strings tg_trace_strings;
tg_trace_strings *tg_trace_strings_new(void);
char *tg_trace_strings_add(tg_trace_strings *s, const char *text, size_t len);
void tg_trace_strings_unref(tg_trace_strings *s); /* NULL: nothing */
/* As tg_trace_frames_new, for frames whose strings point into s (or are
 * NULL), which the frames hold a reference on rather than freeing their
 * strings one by one. s NULL: tg_trace_frames_new. */
tg_frame *tg_trace_frames_new_in(size_t n, tg_trace_strings *s);
/* Drops t's reference (the strings of its n frames go with the last). */
void tg_trace_free(tg_trace *t);
/* dst (freed first) shares src's frames. TG_OK. */
int tg_trace_copy(tg_trace *dst, const tg_trace *src);
tg_shared *tg_shared_new(const char *id, const tg_type *t, tg_array *value);
tg_shared *tg_shared_ref(tg_shared *s);
void tg_shared_unref(tg_shared *s);
/* The host value of s (borrowed), brought back from the device first when
 * a placed function updated it there since (one download, kept: a second
 * read costs nothing). NULL, with ctx set, when that download fails (s->dev
 * is then still set), or when s has no value at all. */
tg_array *tg_shared_fetch(tg_shared *s, tg_ctx *ctx);
static inline tg_array *tg_shared_value(tg_shared *s, tg_ctx *ctx) {
    return __builtin_expect(s->value != NULL, 1) ? s->value : tg_shared_fetch(s, ctx);
}
/* Make `value` (taken over) the host value; the device copy, now out of
 * date, is dropped. */
void tg_shared_value_set(tg_shared *s, tg_array *value);
/* Make `dev` (a device array, taken over) the value: the host copy is
 * stale until tg_shared_value brings it back. */
void tg_shared_device_set(tg_shared *s, tg_array *dev);
/* The device copy of s (borrowed), uploaded from the host value when
 * there is none. NULL with ctx set when the upload fails. */
tg_array *tg_shared_device(tg_shared *s, tg_ctx *ctx);
/* Bring the host values of the shared variables among vars up to date
 * (writers that cannot fail halfway, such as the file encoders, call this
 * first and then read tg_shared_value(s, NULL)). */
int tg_shared_fetch_vars(tg_var *const *vars, int n, tg_ctx *ctx);

/* "nodes[12] (dot 'logit' -> xw)": how errors name a node. */
void tg_node_describe(const tg_node *n, char *buf, size_t size);
/* " [at model.py:12 in build: xw = T.dot(x, w)]", innermost frame, or ""
 * when the node has no trace. */
void tg_node_trace_str(const tg_node *n, char *buf, size_t size);
/* Prefix the message on ctx with the node's description and append its
 * trace: what the VM does to every run-time error. */
void tg_node_error_wrap(tg_ctx *ctx, const tg_node *n);
/* The same, with `note` (when not NULL or "") added inside the node's
 * parentheses after "; ": what the VM says of a node made by a gradient's
 * expansion. */
void tg_node_error_wrap_note(tg_ctx *ctx, const tg_node *n, const char *note);
/* The two parts of what tg_node_error_wrap_note puts around a message:
 * the node's description ("nodes[3] (int_div 'q' -> q)"; for a node a
 * rewrite made, what it stands for) and the trace text after the message
 * (its creation trace, then those of the bodies it was moved out of; ""
 * when none), each cut to its buffer. */
void tg_node_error_parts(const tg_node *n, char *desc, size_t dsize, char *trace, size_t tsize);
/* Wrap the message on ctx as "desc: message trace", note (when not NULL
 * or "") added inside desc's closing parenthesis after "; ". */
void tg_error_wrap_parts(tg_ctx *ctx, const char *desc, const char *note, const char *trace);
/* Give n, which a rewrite built outside from body node bn of `outer` (a
 * scan or op_from_graph node), bn's name and creation trace, and the
 * description errors give it (tg_node.moved): outer's, then `where` ("in
 * the body of 'f'"), then bn's, with its place in the body only when
 * `index` (a body that rewrites edited has other places). TG_OK or
 * TG_ENOMEM. */
int tg_node_moved_from(tg_node *n, const tg_node *outer, const char *where, const tg_node *bn, bool index);
/* n->moved copied onto c (freed first; NULL clears it). TG_OK or TG_ENOMEM. */
int tg_node_moved_copy(tg_node *c, const tg_node *n);
/* n->moved made of its two parts (copied; the old block freed): what a
 * .tgf keeps of it. TG_OK or TG_ENOMEM (n unchanged). */
int tg_node_moved_set(tg_node *n, const char *desc, const char *traces);
/* The second part of n->moved, the traces of the bodies n was moved out
 * of ("" when it was not moved). */
const char *tg_node_moved_traces(const tg_node *n);

/* "float32[3, ?]" */
void tg_type_str(const tg_type *t, char *buf, size_t size);
bool tg_type_equal(const tg_type *a, const tg_type *b);
/* Same dtype and ndim, and no static length contradicts the other. */
bool tg_type_compatible(const tg_type *a, const tg_type *b);
/* Whether the static lengths of t (the unknown ones and zeros left out)
 * times its item size stay within 2^63 - 1 bytes: no array of a type that does not
 * can exist, and every size computed from the static lengths (the
 * optimizer's, the VM's) can then be multiplied out without overflow. */
bool tg_type_fits(const tg_type *t);
/* Does array a fit type t (dtype equal, ndim equal, static lengths)? */
bool tg_type_accepts(const tg_type *t, const tg_array *a);

/* ---- graphs ---- */
tg_graph *tg_graph_alloc(void);
int tg_graph_add_var(tg_graph *g, tg_var *v);
int tg_graph_add_node(tg_graph *g, tg_node *n);
tg_var *tg_graph_find(const tg_graph *g, const char *id);
/* Sort g->nodes topologically; a cycle is a TG_ELOAD error naming ids on
 * it. */
int tg_graph_toposort(tg_graph *g, tg_ctx *ctx);

/* ---- function graphs ---- */
/* Clone what function `fd` of g needs: the outputs and update values,
 * backwards, stopping at the function's inputs (which are cut loose),
 * constants and shared variables. A free input that is needed but not
 * listed is TG_EMISSING naming it and the node that needs it. */
tg_fgraph *tg_fgraph_from_decl(const tg_graph *g, const tg_fdecl *fd,
                               tg_ctx *ctx);
/* The checks tg_fgraph_from_decl makes (every free input the outputs need
 * is among the function's inputs; no cycle), with its errors, without
 * making the graph; the walk's order is recorded into fd for the clones to
 * replay (without memory for it, the check alone). TG_OK or the error's
 * status. */
int tg_fdecl_check(const tg_graph *g, tg_fdecl *fd, tg_ctx *ctx);
void tg_fgraph_free(tg_fgraph *fg);
/* Add a node (already wired to fg's variables) and its outputs. */
int tg_fgraph_add_node(tg_fgraph *fg, tg_node *n);
/* Whether a node of a function graph may overwrite its input `in` in
 * place: it is the input's one reader (a function output counts as one)
 * and the input is no shared value. The rule a .tgf restore checks
 * (io/tgfgraph.c) and the optimizer keeps (rewrite/engine.c). */
static inline bool tg_inplace_input_ok(const tg_var *in) {
    return in->kind != TG_VAR_SHARED && in->nclients == 1;
}
/* Whether node n of fg may overwrite the shared variable it reads as input
 * k (Theano's updated input marked mutable: an SGD step's gemm writing
 * the weights where they are, instead of copying them first):
 *   - n's op can run on a shared value (op->commit_ready), input k is one
 *     it may overwrite, n has one output, of the variable's dtype and ndim;
 *   - that output is the variable's update, and no node reads it (only
 *     the function: its update, and outputs): n is a sink, which can run
 *     after every node that is not one like it (the committers: the
 *     optimizer puts them last, tg_fgraph_commit_last, and the VM
 *     overwrites a shared value only when they are);
 *   - n reads the variable at input k only; no function output is it or
 *     a view of it; and no node that could be such a committer reads it
 *     or its views (followed through view ops and ifelse outputs), so
 *     that every other reader runs before the committers.
 * The rule the optimizer (rewrite/inplace.c) and a .tgf restore
 * (io/tgfgraph.c) apply. c holds scratch (zeroed to start; freed with
 * tg_shared_check_free); c->oom says a false came from an allocation. */
typedef struct tg_shared_check {
    const tg_var **fam;
    int famcap;
    bool oom;
} tg_shared_check;
void tg_shared_check_free(tg_shared_check *c);
bool tg_inplace_shared_ok(const tg_fgraph *fg, const tg_node *n, int k, tg_shared_check *c);
/* Either rule, by the kind of n's input k. */
static inline bool tg_inplace_hint_ok(const tg_fgraph *fg, const tg_node *n, int k, tg_shared_check *c) {
    const tg_var *in = n->inputs[k];
    return in->kind == TG_VAR_SHARED ? tg_inplace_shared_ok(fg, n, k, c) : tg_inplace_input_ok(in);
}
/* Whether node n overwrites a shared variable (a hint on a shared input):
 * such nodes are sinks, and the optimizer puts them last
 * (tg_fgraph_commit_last), where the VM runs them once nothing else can
 * fail (vm/function.c). */
static inline bool tg_node_commits(const tg_node *n) {
    return n->inplace && n->nout == 1 && n->inplace[0] >= 0 && n->inplace[0] < n->nin &&
           n->inputs[n->inplace[0]]->kind == TG_VAR_SHARED;
}
/* Move the nodes that commit to the end of fg->nodes, in their order
 * (they are sinks: the order stays topological); indices follow. */
void tg_fgraph_commit_last(tg_fgraph *fg);
/* Append a variable (a new node's output) to fg's list. */
int tg_fgraph_add_var(tg_fgraph *fg, tg_var *v);
/* Add a reader of v: input `index` of node, or (node NULL) output
 * `index` of the function. */
int tg_fgraph_add_client(tg_var *v, tg_node *node, int index);
/* Remove node's entry for input `index` from v's clients, O(1). */
void tg_fgraph_remove_client(tg_var *v, tg_node *node, int index);
/* Replace every use of `old` by `new` (clients move over; outputs too). */
int tg_fgraph_replace(tg_fgraph *fg, tg_var *old, tg_var *newv);
/* Recompute fg->nodes in topological order, dropping unreachable nodes. */
int tg_fgraph_toposort(tg_fgraph *fg, tg_ctx *ctx);
/* After the optimizer: when fg's arena holds more than twice what its
 * live nodes and variables need, and a megabyte more (the blocks of the
 * nodes that rewrites replaced wait there for reuse), or `always`, move
 * them into a new arena, in order, and let the old one go. TG_OK (also
 * when nothing was moved) or TG_ENOMEM (fg unchanged). */
int tg_fgraph_compact(tg_fgraph *fg, bool always, tg_ctx *ctx);

/* ---- lazy regions (regions.c) ---- */
/* Where each node of fg runs with respect to the ifelse nodes: region 0 is
 * the eager code; the ifelse at position k of fg->nodes has regions
 * 1 + 2k (its then-branch) and 2 + 2k (its else-branch), children of the
 * region the ifelse itself runs in. of[k] is node k's region. */
typedef struct tg_regions {
    int nnodes, nreg;
    bool lazy; /* fg has an ifelse: else every node is in region 0 */
    int *of;
    int *parent, *depth; /* per region */
} tg_regions;
/* fg->nodes must be in topological order. Uses the nodes' mark (left
 * NULL). TG_ENOMEM only. */
int tg_regions_compute(const tg_fgraph *fg, tg_regions *r, tg_ctx *ctx);
void tg_regions_free(tg_regions *r);
/* One of regions a and b contains the other (or they are equal): a node of
 * one may stand for a node of the other without running where it would
 * not have run. */
bool tg_regions_nested(const tg_regions *r, int a, int b);

#endif
