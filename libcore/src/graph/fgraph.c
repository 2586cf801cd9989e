/* Function graphs: the part of a graph one function needs, cloned, with
 * each variable's clients. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "ops/op.h"

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

static int fg_add_var(tg_fgraph *fg, tg_var *v) {
    bool c = v->kind == TG_VAR_CONSTANT;
    if (grow((void **)&fg->vars, &fg->cvars, fg->nvars + 1, sizeof *fg->vars) ||
        (c && grow((void **)&fg->consts, &fg->cconsts, fg->nconsts + 1, sizeof *fg->consts)))
        return TG_ENOMEM;
    v->index = fg->nvars;
    fg->vars[fg->nvars++] = v;
    if (c) fg->consts[fg->nconsts++] = v;
    return TG_OK;
}

static int add_client(tg_var *v, tg_node *node, int index) {
    if (tg_var_clients_reserve(v, v->nclients + 1)) return TG_ENOMEM;
    v->clients[v->nclients].node = node;
    v->clients[v->nclients].index = index;
    if (node) node->inpos[index] = v->nclients;
    v->nclients++;
    return TG_OK;
}

/* Swap-remove; the entry moved into the hole gets its new position. A
 * function output (node NULL) is found by a search: there are few. */
static void remove_client(tg_var *v, tg_node *node, int index) {
    int at = -1;
    if (node) {
        int p = node->inpos[index];
        if (p >= 0 && p < v->nclients && v->clients[p].node == node && v->clients[p].index == index)
            at = p;
    } else {
        for (int i = 0; i < v->nclients && at < 0; i++)
            if (!v->clients[i].node && v->clients[i].index == index) at = i;
    }
    if (at < 0) return;
    v->clients[at] = v->clients[--v->nclients];
    if (at < v->nclients && v->clients[at].node)
        v->clients[at].node->inpos[v->clients[at].index] = at;
}

void tg_fgraph_remove_client(tg_var *v, tg_node *node, int index) { remove_client(v, node, index); }

int tg_fgraph_add_var(tg_fgraph *fg, tg_var *v) { return fg_add_var(fg, v); }

int tg_fgraph_add_client(tg_var *v, tg_node *node, int index) { return add_client(v, node, index); }

void tg_fgraph_free(tg_fgraph *fg) {
    if (!fg) return;
    for (int i = 0; i < fg->nnodes; i++) tg_node_free(fg->nodes[i]);
    for (int i = 0; i < fg->nvars; i++) tg_var_free(fg->vars[i]);
    tg_free(fg->nodes);
    tg_free(fg->vars);
    tg_free(fg->consts);
    tg_free(fg->inputs);
    tg_free(fg->outputs);
    tg_free(fg->upd_shared);
    tg_arena_unref(fg->arena);
    tg_free(fg);
}

/* A copy of v for a function graph: same id, name, type, value and shared
 * state; no producer and no clients yet. */
static tg_var *clone_var(tg_arena *a, const tg_var *v, tg_var_kind kind) {
    tg_var *c = tg_var_new_in(a, v->id, kind);
    if (!c) return NULL;
    if (v->name && !(c->name = tg_strdup(v->name))) {
        tg_var_free(c);
        return NULL;
    }
    c->type = v->type;
    c->weak = v->weak;
    /* only a constant is written inline ({"value": ...}) or weak */
    c->weak_in_file = kind == TG_VAR_CONSTANT && v->weak_in_file;
    c->inline_const = kind == TG_VAR_CONSTANT && v->inline_const;
    c->declared = v->declared;
    c->type_given = v->type_given;
    c->json_index = v->json_index;
    if (kind == TG_VAR_CONSTANT && v->value) c->value = tg_array_ref(v->value);
    if (kind == TG_VAR_SHARED) c->shared = tg_shared_ref(v->shared);
    if (v->test_value) c->test_value = tg_array_ref(v->test_value);
    return c;
}

/* n's parsed attrs into c (whose canonical attrs are n's): a copy of
 * `a` with its own index and message, and the op-specific data rebuilt
 * from the canonical attrs. */
static int clone_attrs(tg_node *c, const tg_node *n, tg_ctx *ctx) {
    c->a = n->a;
    c->a.message = NULL;
    c->a.extra = NULL;
    c->a.index = NULL;
    if (n->a.index) {
        if (!(c->a.index = tg_calloc((size_t)n->a.nindex + 1, sizeof *c->a.index))) return TG_ENOMEM;
        memcpy(c->a.index, n->a.index, (size_t)n->a.nindex * sizeof *c->a.index);
    }
    if (n->a.message && !(c->a.message = tg_strdup(n->a.message))) return TG_ENOMEM;
    if (n->a.extra && n->op->parse_attrs) {
        tg_attrs keep = c->a;
        /* (c's attrs are n's object: an op that can takes n's data) */
        if (n->op->share_extra ? n->op->share_extra(c, n, ctx) : n->op->parse_attrs(c, ctx))
            return TG_ENOMEM;
        keep.extra = c->a.extra;
        keep.message = c->a.message ? c->a.message : keep.message;
        if (c->a.index != keep.index) { /* parsed again: keep the new one */
            tg_free(keep.index);
            keep.index = c->a.index;
        }
        c->a = keep;
    }
    return TG_OK;
}

static tg_node *clone_node(tg_arena *a, const tg_node *n, tg_ctx *ctx) {
    tg_node *c = tg_node_new_in(a, n->op, n->nin, n->nout);
    if (!c) return NULL;
    c->json_index = n->json_index;
    /* The same attrs, so the same hash. Where they are two small numbers
     * (an elementwise op's dtypes: most of a large graph), `a`, three
     * lines of a graph out of the cache, is not read. */
    c->aflags = n->aflags;
    c->ahash = n->ahash;
    c->adtype = n->adtype;
    c->amode = n->amode;
    if (n->attrs) c->attrs = json_object_get(n->attrs);
    if ((n->name && !(c->name = tg_strdup(n->name))) || tg_trace_copy(&c->trace, &n->trace)) goto fail;
    if (n->aflags & TG_NODE_ASMALL)
        tg_node_small_attrs_copy(c, n);
    else if (clone_attrs(c, n, ctx))
        goto fail;
    if (n->inplace) {
        c->inplace = tg_malloc((size_t)n->nout);
        if (!c->inplace) goto fail;
        memcpy(c->inplace, n->inplace, (size_t)n->nout);
    }
    if (n->norigins) {
        if (!(c->origins = tg_origins_pack((const char *const *)n->origins, n->norigins)))
            goto fail;
        c->norigins = n->norigins;
    }
    if (n->grad_of) {
        const char *s[4];
        tg_grad_of_split(n->grad_of, s);
        if (!(c->grad_of = tg_grad_of_pack(s[0], s[1], s[2], s[3]))) goto fail;
    }
    if (tg_node_moved_copy(c, n)) goto fail;
    return c;
fail:
    tg_node_free(c);
    return NULL;
}

/* Iterative depth-first walk from the outputs back to the inputs, cloning
 * as it goes; post-order gives a topological order. map[] sends a graph
 * variable's index to its clone. */
typedef struct walk_item {
    const tg_node *node;
    int next_input;
} walk_item;

/* The walk's order as it is recorded (tg_fdecl.order). */
typedef struct walk_rec {
    int *ev;
    int n, cap;
    bool oom;
} walk_rec;

static void rec_add(walk_rec *r, int e) {
    if (!r || r->oom) return;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        int *ev = tg_realloc(r->ev, (size_t)cap * sizeof *ev);
        if (!ev) {
            r->oom = true;
            return;
        }
        r->ev = ev;
        r->cap = cap;
    }
    r->ev[r->n++] = e;
}

/* A constant or shared value of the graph, cloned into fg. */
static tg_var *clone_leaf(tg_fgraph *fg, const tg_var *v) {
    tg_var *c = clone_var(fg->arena, v, v->kind);
    if (c && fg_add_var(fg, c)) {
        tg_var_free(c);
        return NULL;
    }
    return c;
}

/* Node n of the graph, cloned into fg once its inputs are (map). */
static int clone_step(tg_fgraph *fg, tg_var **map, const tg_node *n, tg_ctx *ctx) {
    tg_node *c = clone_node(fg->arena, n, ctx);
    if (!c) return TG_ENOMEM;
    if (c->inplace) fg->inplace_hints = true;
    for (int k = 0; k < n->nin; k++) c->inputs[k] = map[n->inputs[k]->index];
    for (int k = 0; k < n->nout; k++) {
        const tg_var *o = n->outputs[k];
        /* An output cut loose as a function input (mapped already): the
         * node still needs a result variable of its own. */
        bool loose = map[o->index] != NULL;
        tg_var *oc = clone_var(fg->arena, o, TG_VAR_RESULT);
        if (!oc || fg_add_var(fg, oc)) {
            tg_var_free(oc);
            tg_node_free(c);
            return TG_ENOMEM;
        }
        if (!loose) map[o->index] = oc;
        oc->owner = c;
        oc->owner_index = k;
        c->outputs[k] = oc;
    }
    if (tg_fgraph_add_node(fg, c)) {
        tg_node_free(c);
        return TG_ENOMEM;
    }
    return TG_OK;
}

/* The recorded order (tg_fdecl.order), cloned event by event. Fetching
 * ahead as the walk cannot: the node 16 events on (its header, the input
 * array before it, its attrs), then the variables of the one 8 on (the
 * four lines of each: the clone copies the type and the id), whose header
 * came in 8 steps ago. */
static int replay(tg_fgraph *fg, tg_var **map, const tg_graph *g, const tg_fdecl *fd, tg_ctx *ctx) {
    const int *ev = fd->order;
    int n = fd->norder;
    for (int i = 0; i < n; i++) {
        if (i + 16 < n) {
            const char *p = ev[i + 16] >= 0 ? (const char *)g->nodes[ev[i + 16]]
                                            : (const char *)g->vars[~ev[i + 16]];
            for (int l = -64; l < (int)sizeof(tg_node); l += 64) __builtin_prefetch(p + l);
        }
        if (i + 8 < n && ev[i + 8] >= 0) {
            const tg_node *m = g->nodes[ev[i + 8]];
            for (int k = 0; k < m->nout && k < 2; k++)
                for (int l = 0; l < (int)sizeof(tg_var) + 32; l += 64)
                    __builtin_prefetch((const char *)m->outputs[k] + l);
            for (int k = 0; k < m->nin && k < 4; k++) __builtin_prefetch(m->inputs[k]);
        }
        if (ev[i] >= 0) {
            if (clone_step(fg, map, g->nodes[ev[i]], ctx)) return TG_ENOMEM;
        } else {
            const tg_var *v = g->vars[~ev[i]];
            if (!(map[v->index] = clone_leaf(fg, v))) return TG_ENOMEM;
        }
    }
    return TG_OK;
}

/* With build false, the same walk and the same errors without making
 * anything (the loader's check of every function): map[] then sends a
 * variable to itself once seen; with rec, what the walk would make is
 * recorded in order. TG_OK or an error status; *out: the graph when
 * building. */
static int walk_decl(const tg_graph *g, const tg_fdecl *fd, bool build, tg_fgraph **out,
                     walk_rec *rec, tg_ctx *ctx) {
    tg_fgraph *fg = build ? tg_calloc(1, sizeof *fg) : NULL;
    tg_var **map = tg_calloc((size_t)g->nvars + 1, sizeof *map);
    bool replaying = build && fd->order && fd->order_nodes == g->nnodes && fd->order_vars == g->nvars;
    char *node_done = replaying ? NULL : tg_calloc((size_t)g->nnodes + 1, 1);
    /* written before read: no zeroing (megabytes on large graphs) */
    walk_item *stack = replaying ? NULL : tg_malloc(((size_t)g->nnodes + 1) * sizeof *stack);
    int nroots = fd->nout + fd->nupd, rc = TG_OK;
    if ((build && (!fg || !(fg->arena = tg_arena_new()))) || !map ||
        (!replaying && (!node_done || !stack)))
        goto oom;
    tg_arena *arena = build ? fg->arena : NULL;
    if (build) {
        fg->nin = fd->nin;
        fg->nout = fd->nout;
        fg->nupd = fd->nupd;
        fg->inputs = tg_calloc((size_t)fd->nin + 1, sizeof *fg->inputs);
        fg->outputs = tg_calloc((size_t)nroots + 1, sizeof *fg->outputs);
        fg->upd_shared = tg_calloc((size_t)fd->nupd + 1, sizeof *fg->upd_shared);
        if (!fg->inputs || !fg->outputs || !fg->upd_shared) goto oom;
    }

    /* Inputs first: an intermediate listed as an input is cut loose. */
    for (int i = 0; i < fd->nin; i++) {
        const tg_var *v = fd->inputs[i];
        if (map[v->index]) {
            if (build) fg->inputs[i] = map[v->index];
            continue;
        }
        tg_var *c = build ? clone_var(arena, v, TG_VAR_INPUT) : (tg_var *)v;
        if (build && (!c || fg_add_var(fg, c))) {
            tg_var_free(c);
            goto oom;
        }
        map[v->index] = c;
        if (build) fg->inputs[i] = c;
    }
    for (int i = 0; i < fd->nupd; i++) {
        const tg_var *s = fd->updates[i].shared;
        if (!map[s->index]) {
            tg_var *c = build ? clone_var(arena, s, TG_VAR_SHARED) : (tg_var *)s;
            if (build && (!c || fg_add_var(fg, c))) {
                tg_var_free(c);
                goto oom;
            }
            map[s->index] = c;
        }
        if (build) fg->upd_shared[i] = map[s->index];
    }

    if (replaying && replay(fg, map, g, fd, ctx)) goto oom;
    for (int r = 0; r < nroots && !replaying; r++) {
        const tg_var *root = r < fd->nout ? fd->outputs[r]
                                          : fd->updates[r - fd->nout].value;
        const tg_node *need_by = NULL;
        /* Leaves are cloned when first met; nodes through the stack. */
        const tg_var *pending = root;
        int sp = 0;
        for (;;) {
            if (pending) {
                const tg_var *v = pending;
                pending = NULL;
                if (!map[v->index]) {
                    if (v->owner) {
                        if (!node_done[v->owner->index]) {
                            node_done[v->owner->index] = 1; /* on stack */
                            stack[sp].node = v->owner;
                            stack[sp].next_input = 0;
                            sp++;
                        }
                    } else if (v->kind == TG_VAR_INPUT) {
                        char desc[256];
                        if (need_by) {
                            tg_node_describe(need_by, desc, sizeof desc);
                            rc = tg_errorf(ctx, TG_EMISSING,
                                      "function '%s': input '%s' is needed by "
                                      "%s but is not among the function's "
                                      "inputs",
                                      fd->name, v->id, desc);
                        } else {
                            rc = tg_errorf(ctx, TG_EMISSING,
                                      "function '%s': output '%s' is a free "
                                      "input that is not among the "
                                      "function's inputs",
                                      fd->name, v->id);
                        }
                        goto fail;
                    } else {
                        tg_var *c = build ? clone_leaf(fg, v) : (tg_var *)v;
                        if (!c) goto oom;
                        map[v->index] = c;
                        rec_add(rec, ~v->index);
                    }
                }
            }
            if (!sp) break;
            walk_item *top = &stack[sp - 1];
            if (top->next_input < top->node->nin) {
                const tg_var *in = top->node->inputs[top->next_input++];
                if (!map[in->index]) {
                    if (in->owner && node_done[in->owner->index] == 1 &&
                        !map[in->index]) {
                        /* A node already on the stack: a cycle, which the
                         * loader rules out; refuse rather than loop. */
                        rc = tg_errorf(ctx, TG_ELOAD, "the graph has a cycle at '%s'",
                                  in->id);
                        goto fail;
                    }
                    need_by = top->node;
                    pending = in;
                }
                continue;
            }
            /* All inputs cloned: clone the node. */
            const tg_node *n = top->node;
            sp--;
            node_done[n->index] = 2;
            rec_add(rec, n->index);
            if (!build) {
                for (int k = 0; k < n->nout; k++) map[n->outputs[k]->index] = n->outputs[k];
                continue;
            }
            if (clone_step(fg, map, n, ctx)) goto oom;
        }
    }
    if (build)
        for (int r = 0; r < nroots; r++)
            fg->outputs[r] = map[(r < fd->nout ? fd->outputs[r] : fd->updates[r - fd->nout].value)->index];
    /* Clients of the function outputs. */
    for (int r = 0; build && r < nroots; r++)
        if (add_client(fg->outputs[r], NULL, r)) goto oom;
    tg_free(map);
    tg_free(node_done);
    tg_free(stack);
    *out = fg;
    return TG_OK;
oom:
    rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
fail:
    tg_free(map);
    tg_free(node_done);
    tg_free(stack);
    tg_fgraph_free(fg);
    *out = NULL;
    return rc ? rc : TG_ENOMEM;
}

tg_fgraph *tg_fgraph_from_decl(const tg_graph *g, const tg_fdecl *fd, tg_ctx *ctx) {
    tg_fgraph *fg;
    walk_decl(g, fd, true, &fg, NULL, ctx);
    return fg;
}

int tg_fdecl_check(const tg_graph *g, tg_fdecl *fd, tg_ctx *ctx) {
    tg_fgraph *none;
    walk_rec rec = {0};
    int rc = walk_decl(g, fd, false, &none, &rec, ctx);
    tg_free(fd->order);
    fd->order = NULL;
    fd->norder = 0;
    if (rc || rec.oom) {
        tg_free(rec.ev);
        return rc; /* (out of memory for the record: the clones walk) */
    }
    fd->order = rec.ev;
    fd->norder = rec.n;
    fd->order_nodes = g->nnodes;
    fd->order_vars = g->nvars;
    return TG_OK;
}

int tg_fgraph_add_node(tg_fgraph *fg, tg_node *n) {
    if (grow((void **)&fg->nodes, &fg->cnodes, fg->nnodes + 1,
             sizeof *fg->nodes))
        return TG_ENOMEM;
    for (int k = 0; k < n->nin; k++)
        if (add_client(n->inputs[k], n, k)) {
            for (int j = 0; j < k; j++) remove_client(n->inputs[j], n, j);
            return TG_ENOMEM;
        }
    n->index = fg->nnodes;
    fg->nodes[fg->nnodes++] = n;
    tg_opset_add(fg->opseen, n->op);
    return TG_OK;
}

int tg_fgraph_replace(tg_fgraph *fg, tg_var *old, tg_var *newv) {
    if (old == newv) return TG_OK;
    for (int i = 0; i < old->nclients; i++) {
        tg_client cl = old->clients[i];
        if (add_client(newv, cl.node, cl.index)) return TG_ENOMEM;
        if (cl.node)
            cl.node->inputs[cl.index] = newv;
        else
            fg->outputs[cl.index] = newv;
    }
    old->nclients = 0;
    return TG_OK;
}

/* Depth-first from the outputs; nodes no output needs are dropped (and
 * freed, with their outputs left in fg->vars for the function's lifetime).
 *
 * The walk runs over a compact copy of the edges (each node's producers
 * by position, in input order), made by one sweep down the node array:
 * chasing the pointers themselves (node -> input variable -> producer ->
 * ...) waited for one cache miss after another on long chains, 150 ns a
 * node at 100,000 nodes, where the sweep's loads are independent of one
 * another and overlap. Same walk, same order. */
typedef struct iwalk {
    int node, next;
} iwalk;

/* A node the optimizer pruned (TG_NODE_DEAD), freed where the edge sweep
 * meets it, while it is in the cache: nothing reads its outputs (its
 * readers are gone, it is off its inputs' lists). false, and nothing
 * done, if something does read one after all (an optimizer bug; the walk
 * then treats the node as any other). */
static bool drop_pruned(tg_node *d) {
    for (int k = 0; k < d->nout; k++)
        if (d->outputs[k]->nclients) return false;
    for (int k = 0; k < d->nout; k++) d->outputs[k]->owner = NULL;
    tg_node_free(d);
    return true;
}

/* The edges of fg's nodes (first, edge, *ne), each node's producers by
 * position, read from producer->index, which every change to fg->nodes
 * keeps equal to the position (tg_fgraph_add_node, the sorts, the
 * linker's layout). Pruned nodes are dropped on the way (state 3) unless
 * already dropped (skipped). false: a node whose index is not its place
 * was met (the edges are then wrong, and are made again). TG_ENOMEM as
 * *rc. */
static bool sweep_edges(tg_fgraph *fg, char *state, size_t *first, int **edge, size_t *cap,
                        size_t *ne, int *rc) {
    int n = fg->nnodes;
    bool placed = true;
    *ne = 0;
    for (int i = 0; i < n; i++) {
        /* three steps ahead: the node 24 on, the input variables of the
         * one 12 on, the producers of the one 6 on (none of a pruned
         * node, whose inputs are not read) */
        if (i + 24 < n && state[i + 24] != 3) tg_prefetch_node(fg->nodes[i + 24]);
        if (i + 12 < n && state[i + 12] != 3) tg_prefetch_node_vars(fg->nodes[i + 12]);
        if (i + 6 < n && state[i + 6] != 3) {
            const tg_node *m = fg->nodes[i + 6];
            for (int k = 0; k < m->nin && k < 4 && !(m->rwflags & TG_NODE_DEAD); k++)
                if (m->inputs[k]->owner) __builtin_prefetch(m->inputs[k]->owner);
        }
        first[i] = *ne;
        if (state[i] == 3) continue;
        tg_node *nd = fg->nodes[i];
        if ((nd->rwflags & TG_NODE_DEAD) && drop_pruned(nd)) {
            state[i] = 3;
            continue;
        }
        placed &= nd->index == i;
        if (*ne + (size_t)nd->nin > *cap) {
            while (*ne + (size_t)nd->nin > *cap) *cap *= 2;
            int *e2 = tg_realloc(*edge, *cap * sizeof **edge);
            if (!e2) {
                *rc = TG_ENOMEM;
                return true;
            }
            *edge = e2;
        }
        for (int k = 0; k < nd->nin; k++) {
            const tg_node *p = nd->inputs[k]->owner;
            (*edge)[(*ne)++] = p ? p->index : -1;
        }
    }
    first[n] = *ne;
    return placed;
}

int tg_fgraph_toposort(tg_fgraph *fg, tg_ctx *ctx) {
    int n = fg->nnodes, rc = TG_OK;
    int nroots = fg->nout + fg->nupd;
    size_t cap = 2 * (size_t)n + 16, ne = 0;
    /* order, stack and the edges are written before read: no zeroing */
    tg_node **order = tg_malloc(((size_t)n + 1) * sizeof *order);
    char *state = tg_calloc((size_t)n + 1, 1);
    iwalk *stack = tg_malloc(((size_t)n + 1) * sizeof *stack);
    size_t *first = tg_malloc(((size_t)n + 1) * sizeof *first);
    int *edge = tg_malloc(cap * sizeof *edge);
    if (!order || !state || !stack || !first || !edge) goto nomem;
    /* One sweep, trusting each node's index; when one was not its place,
     * the positions written out and a second. */
    if (!sweep_edges(fg, state, first, &edge, &cap, &ne, &rc) && !rc) {
        for (int i = 0; i < n; i++)
            if (state[i] != 3) fg->nodes[i]->index = i;
        sweep_edges(fg, state, first, &edge, &cap, &ne, &rc);
    }
    if (rc) goto nomem;
    int norder = 0;
    for (int r = 0; r < nroots; r++) {
        tg_var *v = fg->outputs[r];
        if (!v->owner || state[v->owner->index]) continue;
        int sp = 0;
        stack[sp++] = (iwalk){v->owner->index, 0};
        state[v->owner->index] = 1;
        while (sp) {
            iwalk *top = &stack[sp - 1];
            int at = top->node;
            if (first[at] + (size_t)top->next < first[at + 1]) {
                int j = edge[first[at] + (size_t)top->next++];
                if (j < 0) continue;
                if (state[j] == 1) {
                    rc = tg_errorf(ctx, TG_ELOAD, "the graph has a cycle at '%s'",
                                   fg->nodes[at]->inputs[top->next - 1]->id);
                    goto done;
                }
                if (!state[j]) {
                    state[j] = 1;
                    stack[sp++] = (iwalk){j, 0};
                }
                continue;
            }
            state[at] = 2;
            order[norder++] = fg->nodes[at];
            sp--;
        }
    }
    for (int i = 0; i < n; i++) {
        /* The dead are cold: fetch the nodes 16 on, then the variables
         * of those 8 on (their headers came in 8 steps ago). */
        if (i + 16 < n && !state[i + 16]) tg_prefetch_node(fg->nodes[i + 16]);
        if (i + 8 < n && !state[i + 8]) tg_prefetch_node_vars(fg->nodes[i + 8]);
        if (!state[i]) {
            tg_node *d = fg->nodes[i];
            /* a node the optimizer pruned is off its inputs' lists already */
            if (!(d->rwflags & TG_NODE_DEAD))
                for (int k = 0; k < d->nin; k++) remove_client(d->inputs[k], d, k);
            for (int k = 0; k < d->nout; k++) d->outputs[k]->owner = NULL;
            tg_node_free(d);
        }
    }
    if (norder) memcpy(fg->nodes, order, sizeof(tg_node *) * (size_t)norder);
    fg->nnodes = norder;
    for (int i = 0; i < norder; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, norder);
        fg->nodes[i]->index = i;
    }
    goto done;
nomem:
    rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
done:
    if (rc && state) {
        /* the nodes dropped before the failure leave the list */
        int k = 0;
        for (int i = 0; i < n; i++)
            if (state[i] != 3) {
                fg->nodes[k] = fg->nodes[i];
                fg->nodes[k]->index = k;
                k++;
            }
        fg->nnodes = k;
    }
    tg_free(order);
    tg_free(state);
    tg_free(stack);
    tg_free(first);
    tg_free(edge);
    return rc;
}

/* ---- compaction ---- */

static bool var_ok(const tg_fgraph *fg, const tg_var *v) {
    return v && v->index >= 0 && v->index < fg->nvars && fg->vars[v->index] == v;
}

static bool node_ok(const tg_fgraph *fg, const tg_node *n) {
    return n && n->index >= 0 && n->index < fg->nnodes && fg->nodes[n->index] == n;
}

/* Every pointer between fg's nodes and variables stays inside fg: then
 * the positions (index) map each old block to its copy. */
static bool closed(const tg_fgraph *fg) {
    for (int i = 0; i < fg->nnodes; i++) {
        const tg_node *n = fg->nodes[i];
        if (!node_ok(fg, n)) return false;
        for (int k = 0; k < n->nin; k++)
            if (!var_ok(fg, n->inputs[k])) return false;
        for (int k = 0; k < n->nout; k++)
            if (!var_ok(fg, n->outputs[k])) return false;
    }
    for (int i = 0; i < fg->nvars; i++) {
        const tg_var *v = fg->vars[i];
        if (!var_ok(fg, v) || (v->owner && !node_ok(fg, v->owner))) return false;
        for (int c = 0; c < v->nclients; c++)
            if (v->clients[c].node && !node_ok(fg, v->clients[c].node)) return false;
    }
    for (int i = 0; i < fg->nin; i++)
        if (!var_ok(fg, fg->inputs[i])) return false;
    for (int i = 0; i < fg->nout + fg->nupd; i++)
        if (!var_ok(fg, fg->outputs[i])) return false;
    for (int i = 0; i < fg->nupd; i++)
        if (!var_ok(fg, fg->upd_shared[i])) return false;
    return true;
}

int tg_fgraph_compact(tg_fgraph *fg, bool always, tg_ctx *ctx) {
    size_t live, held;
    tg_arena_usage(fg->arena, &live, &held);
    if (!fg->arena || (!always && held < 2 * live + ((size_t)1 << 20)) || !closed(fg))
        return TG_OK;
    tg_arena *na = tg_arena_new();
    tg_node **nn = tg_calloc((size_t)fg->nnodes + 1, sizeof *nn);
    tg_var **nv = tg_calloc((size_t)fg->nvars + 1, sizeof *nv);
    if (!na || !nn || !nv) goto nomem;
    /* Each node, then the variables it makes: a walk in schedule order
     * reads them one after the other. The rest (inputs, constants,
     * leftovers of removed nodes) after. */
    for (int i = 0; i < fg->nnodes; i++) {
        /* the node 16 on, the variables of the one 8 on: on a large graph
         * every node left is a cold read */
        if (i + 16 < fg->nnodes) tg_prefetch_node(fg->nodes[i + 16]);
        if (i + 8 < fg->nnodes) {
            const tg_node *m = fg->nodes[i + 8];
            for (int k = 0; k < m->nout && k < 2; k++) __builtin_prefetch(m->outputs[k]);
        }
        tg_node *n = fg->nodes[i];
        if (!(nn[i] = tg_node_move(na, n))) goto nomem;
        for (int k = 0; k < n->nout; k++) {
            int j = n->outputs[k]->index;
            if (!nv[j] && !(nv[j] = tg_var_move(na, fg->vars[j]))) goto nomem;
        }
    }
    for (int j = 0; j < fg->nvars; j++)
        if (!nv[j] && !(nv[j] = tg_var_move(na, fg->vars[j]))) goto nomem;
    /* The copies still point at the old blocks: send them to the copies. */
    for (int i = 0; i < fg->nnodes; i++) {
        tg_node *c = nn[i];
        for (int k = 0; k < c->nin; k++) c->inputs[k] = nv[c->inputs[k]->index];
        for (int k = 0; k < c->nout; k++) c->outputs[k] = nv[c->outputs[k]->index];
    }
    for (int j = 0; j < fg->nvars; j++) {
        tg_var *c = nv[j];
        if (c->owner) c->owner = nn[c->owner->index];
        for (int k = 0; k < c->nclients; k++)
            if (c->clients[k].node) c->clients[k].node = nn[c->clients[k].node->index];
    }
    for (int i = 0; i < fg->nin; i++) fg->inputs[i] = nv[fg->inputs[i]->index];
    for (int i = 0; i < fg->nout + fg->nupd; i++) fg->outputs[i] = nv[fg->outputs[i]->index];
    for (int i = 0; i < fg->nupd; i++) fg->upd_shared[i] = nv[fg->upd_shared[i]->index];
    for (int i = 0; i < fg->nconsts; i++) fg->consts[i] = nv[fg->consts[i]->index];
    /* Nothing points at the old blocks now; what they owned, the copies
     * own. */
    for (int i = 0; i < fg->nnodes; i++) {
        tg_node_release_block(fg->nodes[i]);
        fg->nodes[i] = nn[i];
    }
    for (int j = 0; j < fg->nvars; j++) {
        tg_var_release_block(fg->vars[j]);
        fg->vars[j] = nv[j];
    }
    tg_arena_unref(fg->arena);
    fg->arena = na;
    tg_free(nn);
    tg_free(nv);
    return TG_OK;
nomem:
    /* Give back the copies' blocks alone: the originals own everything. */
    for (int i = 0; nn && i < fg->nnodes; i++)
        if (nn[i]) tg_node_release_block(nn[i]);
    for (int j = 0; nv && j < fg->nvars; j++)
        if (nv[j]) tg_var_release_block(nv[j]);
    tg_arena_unref(na);
    tg_free(nn);
    tg_free(nv);
    return tg_errorf(ctx, TG_ENOMEM, "out of memory");
}

/* ---- overwriting a shared variable (graph.h) ---- */

void tg_shared_check_free(tg_shared_check *c) {
    tg_free(c->fam);
    memset(c, 0, sizeof *c);
}

/* The conditions on n alone, for its input k (graph.h): an op that can
 * work on a shared value, one output, of the variable's dtype and ndim,
 * that is the variable's update and read by no node. */
static bool commit_candidate(const tg_fgraph *fg, const tg_node *n, int k) {
    const tg_var *w = n->inputs[k];
    if (w->kind != TG_VAR_SHARED || !n->op->commit_ready || k >= 32 || !((n->op->inplace_inputs >> k) & 1u) ||
        n->nout != 1)
        return false;
    const tg_var *o = n->outputs[0];
    if (o->type.dtype != w->type.dtype || o->type.ndim != w->type.ndim) return false;
    bool update = false;
    for (int i = 0; i < o->nclients; i++) {
        const tg_client *cl = &o->clients[i];
        if (cl->node) return false;
        if (cl->index >= fg->nout) {
            if (cl->index - fg->nout >= fg->nupd || fg->upd_shared[cl->index - fg->nout] != w) return false;
            update = true;
        }
    }
    return update;
}

/* Whether n could overwrite a shared variable it reads, whatever the
 * hints say: such a node may run in the committers' block. */
static bool may_commit(const tg_fgraph *fg, const tg_node *n) {
    if (!n->op->commit_ready || n->nout != 1) return false;
    for (int k = 0; k < n->nin && k < 32; k++)
        if (commit_candidate(fg, n, k)) return true;
    return false;
}

bool tg_inplace_shared_ok(const tg_fgraph *fg, const tg_node *n, int k, tg_shared_check *c) {
    if (!commit_candidate(fg, n, k)) return false;
    /* The variables that may be its buffer: w, its views, ifelse outputs
     * that may be it or them. */
    if (!c->famcap) {
        if (!(c->fam = tg_malloc(sizeof *c->fam * 16))) {
            c->oom = true;
            return false;
        }
        c->famcap = 16;
    }
    int nfam = 1;
    c->fam[0] = n->inputs[k];
    for (int f = 0; f < nfam; f++) {
        const tg_var *v = c->fam[f];
        for (int i = 0; i < v->nclients; i++) {
            const tg_node *r = v->clients[i].node;
            if (!r || r == n) { /* a function output; n itself, but for input k */
                if (r == n && f == 0 && v->clients[i].index == k) continue;
                return false;
            }
            if (may_commit(fg, r)) return false;
            if (r->op->view_of < 0 && !(r->op->flags & TG_OPF_LAZY)) continue;
            for (int j = 0; j < r->nout; j++) {
                bool have = false;
                for (int q = 0; q < nfam && !have; q++) have = c->fam[q] == r->outputs[j];
                if (have) continue;
                if (nfam == c->famcap) {
                    const tg_var **g = tg_realloc(c->fam, sizeof *g * (size_t)c->famcap * 2);
                    if (!g) {
                        c->oom = true;
                        return false;
                    }
                    c->fam = g;
                    c->famcap *= 2;
                }
                c->fam[nfam++] = r->outputs[j];
            }
        }
    }
    return true;
}

void tg_fgraph_commit_last(tg_fgraph *fg) {
    int n = fg->nnodes, k = 0, m = 0;
    for (int i = 0; i < n; i++) m += tg_node_commits(fg->nodes[i]);
    if (!m) return;
    /* Stable: the others first, then the committers, each in order. */
    tg_node **tail = tg_malloc(sizeof *tail * (size_t)m);
    if (!tail) return; /* they stay where they are: the VM runs them in place only when last */
    int t = 0;
    for (int i = 0; i < n; i++) {
        tg_node *nd = fg->nodes[i];
        if (tg_node_commits(nd)) tail[t++] = nd;
        else
            fg->nodes[k++] = nd;
    }
    for (int i = 0; i < t; i++) fg->nodes[k++] = tail[i];
    for (int i = 0; i < n; i++) fg->nodes[i]->index = i;
    tg_free(tail);
}
