/* Function graphs: cloning what a function needs (and nothing else),
 * clients, replacing a variable, re-sorting after a replacement, traces
 * kept on clones; the sort's order and cycle check on a node array that is
 * not topological; the id map; the arenas that hold a graph's nodes and
 * variables. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "testutil.h"
#include "vm/vm.h"

static const char *json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]}},"
    "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]},\"shared\":{\"data\":[1,2]}}],"
    "\"nodes\":["
    "{\"op\":\"mul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"a\"],\"trace\":[{\"file\":\"m.py\",\"line\":3}]},"
    "{\"op\":\"exp\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]},"
    "{\"op\":\"neg\",\"inputs\":[\"a\"],\"outputs\":[\"c\"]},"
    "{\"op\":\"add\",\"inputs\":[\"b\",\"c\"],\"outputs\":[\"d\"]},"
    "{\"op\":\"sqrt\",\"inputs\":[\"x\"],\"outputs\":[\"unused\"]}],"
    "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"d\"]},"
    "\"g\":{\"inputs\":[\"x\"],\"outputs\":[\"unused\"]}}}";

static tg_var *fg_find(tg_fgraph *fg, const char *id) {
    for (int i = 0; i < fg->nvars; i++)
        if (!strcmp(fg->vars[i]->id, id)) return fg->vars[i];
    return NULL;
}

static void test_clone_takes_what_is_needed(void **state) {
    (void)state;
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_fgraph *fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx);
    assert_non_null(fg);
    assert_int_equal(fg->nnodes, 4); /* sqrt is not needed by f */
    assert_null(fg_find(fg, "unused"));
    /* Topological order: mul before exp and neg, add last. */
    assert_string_equal(fg->nodes[0]->op->name, "mul");
    assert_string_equal(fg->nodes[3]->op->name, "add");
    /* Clients: a feeds exp and neg. */
    tg_var *a = fg_find(fg, "a");
    assert_int_equal(a->nclients, 2);
    /* Clones are new objects with the trace of the original: its frames,
     * shared (tg_trace_copy), which outlive the graph. */
    assert_ptr_not_equal(fg->nodes[0], g->nodes[0]);
    assert_int_equal(fg->nodes[0]->trace.n, 1);
    assert_ptr_equal(fg->nodes[0]->trace.frames, tg_graph_find(g, "a")->owner->trace.frames);
    /* The shared state is the graph's own (shared, not copied). */
    tg_var *w = fg_find(fg, "w");
    assert_ptr_equal(w->shared, tg_graph_find(g, "w")->shared);
    /* A second clone shares them too; freeing the graph and one clone
     * leaves the other's trace whole (under ASan: no use after free, no
     * leak). */
    tg_fgraph *fg2 = tg_fgraph_from_decl(g, &g->funcs[0], ctx);
    assert_non_null(fg2);
    assert_ptr_equal(fg2->nodes[0]->trace.frames, fg->nodes[0]->trace.frames);
    tg_graph_free(g);
    tg_fgraph_free(fg2);
    assert_int_equal(fg->nodes[0]->trace.n, 1);
    assert_string_equal(fg->nodes[0]->trace.frames[0].file, "m.py");
    assert_int_equal(fg->nodes[0]->trace.frames[0].line, 3);
    assert_null(fg->nodes[0]->trace.frames[0].code);
    /* a copy onto a node that had a trace drops that one's reference */
    tg_trace t = {0};
    assert_int_equal(tg_trace_copy(&t, &fg->nodes[0]->trace), TG_OK);
    assert_int_equal(tg_trace_copy(&t, &fg->nodes[0]->trace), TG_OK);
    assert_int_equal(tg_trace_copy(&fg->nodes[1]->trace, &t), TG_OK);
    tg_trace_free(&t);
    assert_int_equal(t.n, 0);
    assert_null(t.frames);
    tg_fgraph_free(fg);
    tg_ctx_free(ctx);
}

/* Functions compiled from one graph share its traces and may be made and
 * freed on several threads at once: the count must be exact, or the
 * frames go too early (a use after free) or never (a leak), which the
 * sanitizer build reports. */
static void *copy_traces(void *arg) {
    const tg_trace *src = arg;
    for (int i = 0; i < 100000; i++) {
        tg_trace t = {0};
        if (tg_trace_copy(&t, src)) return arg;
        tg_trace_free(&t);
    }
    return NULL;
}

static void test_trace_shared_across_threads(void **state) {
    (void)state;
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_fgraph *fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx);
    assert_non_null(fg);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, copy_traces, &fg->nodes[0]->trace), 0);
    for (int i = 0; i < 2; i++) {
        void *r;
        assert_int_equal(pthread_join(th[i], &r), 0);
        assert_null(r);
    }
    tg_graph_free(g);
    assert_string_equal(fg->nodes[0]->trace.frames[0].file, "m.py");
    tg_fgraph_free(fg);
    tg_ctx_free(ctx);
}

static void test_replace_and_resort(void **state) {
    (void)state;
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_fgraph *fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx);
    /* Replace c (= -a) by b: d = b + b, and the neg node is unreachable. */
    tg_var *b = fg_find(fg, "b"), *c = fg_find(fg, "c");
    int before = b->nclients;
    assert_int_equal(tg_fgraph_replace(fg, c, b), 0);
    assert_int_equal(c->nclients, 0);
    assert_int_equal(b->nclients, before + 1);
    tg_node *add = fg->nodes[3];
    assert_ptr_equal(add->inputs[0], b);
    assert_ptr_equal(add->inputs[1], b);
    assert_int_equal(tg_fgraph_toposort(fg, ctx), 0);
    assert_int_equal(fg->nnodes, 3);
    for (int i = 0; i < fg->nnodes; i++) assert_string_not_equal(fg->nodes[i]->op->name, "neg");
    /* Replacing an output variable moves the function's output. */
    tg_var *d = fg_find(fg, "d");
    assert_int_equal(tg_fgraph_replace(fg, d, b), 0);
    assert_ptr_equal(fg->outputs[0], b);
    assert_int_equal(tg_fgraph_toposort(fg, ctx), 0);
    assert_int_equal(fg->nnodes, 2);
    tg_fgraph_free(fg);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* The sort is a depth-first walk from the outputs, inputs in order,
 * emitting each node after its inputs: worked out by hand below for an
 * array in which two nodes come after their reader (as the optimizer
 * appends what it builds). An unreachable node is dropped and taken off
 * its inputs' reader lists, unless the optimizer pruned it (TG_NODE_DEAD:
 * it is off them already). */
static const char *json2 =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]}}],"
    "\"nodes\":["
    "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"p\"]},"
    "{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"q\"]},"
    "{\"op\":\"add\",\"inputs\":[\"p\",\"q\"],\"outputs\":[\"r\"]},"
    "{\"op\":\"sqrt\",\"inputs\":[\"r\"],\"outputs\":[\"o\"]}],"
    "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"o\"]}}}";

/* json2's function graph, and its nodes exp, neg, add and sqrt. */
static tg_fgraph *json2_fgraph(tg_graph **g, tg_ctx *ctx, tg_node **e, tg_node **ng, tg_node **a, tg_node **s) {
    *g = tu_load(json2);
    tg_fgraph *fg = tg_fgraph_from_decl(*g, &(*g)->funcs[0], ctx);
    assert_non_null(fg);
    assert_int_equal(fg->nnodes, 4);
    *e = fg_find(fg, "p")->owner;
    *ng = fg_find(fg, "q")->owner;
    *a = fg_find(fg, "r")->owner;
    *s = fg_find(fg, "o")->owner;
    return fg;
}

/* A node `op` of fg reading x, its output `out` read by nothing; pruned
 * as the optimizer prunes (off x's readers, marked dead) or not. */
static tg_node *unread_node(tg_fgraph *fg, const char *op, tg_var *x, const char *out, bool pruned) {
    tg_node *u = tg_node_new(tg_op_find(op), 1, 1);
    assert_non_null(u);
    u->inputs[0] = x;
    u->outputs[0] = tg_var_new(out, TG_VAR_RESULT);
    u->outputs[0]->owner = u;
    assert_int_equal(tg_fgraph_add_node(fg, u), 0);
    if (pruned) {
        tg_fgraph_remove_client(x, u, 0);
        u->rwflags = TG_NODE_DEAD;
    }
    return u;
}

static void test_sort_order_drop_and_cycle(void **state) {
    (void)state;
    tg_graph *g;
    tg_ctx *ctx = tg_ctx_new();
    tg_node *e, *ng, *a, *s;
    tg_fgraph *fg = json2_fgraph(&g, ctx, &e, &ng, &a, &s);
    /* Reorder the array: sqrt, add, neg, exp (every node after its reader). */
    fg->nodes[0] = s;
    fg->nodes[1] = a;
    fg->nodes[2] = ng;
    fg->nodes[3] = e;
    /* Two unreachable nodes reading x: one still attached, one pruned. */
    tg_var *x = fg->inputs[0];
    int readers = x->nclients;
    tg_node *u1 = unread_node(fg, "tanh", x, "u1", false), *u2 = unread_node(fg, "abs", x, "u2", false);
    assert_int_equal(x->nclients, readers + 2);
    tg_fgraph_remove_client(x, u2, 0); /* what pruning does */
    u2->rwflags = TG_NODE_DEAD;
    tg_var *v1 = u1->outputs[0], *v2 = u2->outputs[0];
    assert_int_equal(tg_fgraph_toposort(fg, ctx), 0);
    /* From o: sqrt -> add -> p (exp, emitted) -> q (neg, emitted) ->
     * add emitted -> sqrt emitted. */
    assert_int_equal(fg->nnodes, 4);
    assert_ptr_equal(fg->nodes[0], e);
    assert_ptr_equal(fg->nodes[1], ng);
    assert_ptr_equal(fg->nodes[2], a);
    assert_ptr_equal(fg->nodes[3], s);
    for (int i = 0; i < 4; i++) assert_int_equal(fg->nodes[i]->index, i);
    assert_int_equal(x->nclients, readers); /* u1 taken off, u2 was off */
    for (int i = 0; i < x->nclients; i++) assert_true(x->clients[i].node == e || x->clients[i].node == ng);
    assert_null(v1->owner);
    assert_null(v2->owner);
    tg_var_free(v1);
    tg_var_free(v2);
    /* A cycle (which the loader never lets in): exp reads add's output.
     * A pruned node before it is freed by the sweep that finds the cycle:
     * the failed sort takes it off the list too (freeing fg after would
     * free it twice). */
    tg_var *v3 = unread_node(fg, "abs", x, "u3", true)->outputs[0];
    tg_var *r = a->outputs[0];
    tg_fgraph_remove_client(x, e, 0);
    e->inputs[0] = r;
    assert_int_equal(tg_fgraph_add_client(r, e, 0), 0);
    assert_int_equal(tg_fgraph_toposort(fg, ctx), TG_ELOAD);
    assert_non_null(strstr(tg_ctx_message(ctx), "the graph has a cycle at '"));
    assert_int_equal(fg->nnodes, 4);
    for (int i = 0; i < fg->nnodes; i++) {
        assert_true(fg->nodes[i] == e || fg->nodes[i] == ng || fg->nodes[i] == a || fg->nodes[i] == s);
        assert_int_equal(fg->nodes[i]->index, i);
    }
    assert_null(v3->owner);
    tg_var_free(v3);
    tg_fgraph_free(fg);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* A node marked pruned whose output is still read (an optimizer bug the
 * sort must survive) is sorted as any other: kept, after its input, before
 * its reader. */
static void test_sort_keeps_pruned_node_still_read(void **state) {
    (void)state;
    tg_graph *g;
    tg_ctx *ctx = tg_ctx_new();
    tg_node *e, *ng, *a, *s;
    tg_fgraph *fg = json2_fgraph(&g, ctx, &e, &ng, &a, &s);
    ng->rwflags = TG_NODE_DEAD;
    assert_int_equal(tg_fgraph_toposort(fg, ctx), 0);
    assert_int_equal(fg->nnodes, 4);
    assert_ptr_equal(fg->nodes[0], e);
    assert_ptr_equal(fg->nodes[1], ng);
    assert_ptr_equal(fg->nodes[2], a);
    assert_ptr_equal(fg->nodes[3], s);
    assert_ptr_equal(fg_find(fg, "q")->owner, ng);
    ng->rwflags = 0;
    tg_fgraph_free(fg);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* Many keys (growth from 64 slots, collisions), replacement of a key's
 * value, absent keys, and the two-map lookup. */
static void test_idmap(void **state) {
    (void)state;
    enum { N = 5000 };
    static char keys[N][16];
    struct tg_idmap *m = tg_idmap_new(), *m2 = tg_idmap_new();
    assert_non_null(m);
    assert_non_null(m2);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "v%d", i);
        assert_int_equal(tg_idmap_put(i % 2 ? m2 : m, keys[i], (void *)(intptr_t)(i + 1)), 0);
    }
    for (int i = 0; i < N; i++) {
        assert_ptr_equal(tg_idmap_get(i % 2 ? m2 : m, keys[i]), (void *)(intptr_t)(i + 1));
        assert_null(tg_idmap_get(i % 2 ? m : m2, keys[i]));
        assert_ptr_equal(tg_idmap_get2(m, m2, keys[i]), (void *)(intptr_t)(i + 1));
        assert_ptr_equal(tg_idmap_get2(m2, m, keys[i]), (void *)(intptr_t)(i + 1));
    }
    assert_null(tg_idmap_get(m, "v5000"));
    assert_null(tg_idmap_get2(m, m2, "w1"));
    assert_ptr_equal(tg_idmap_get2(NULL, m2, "v1"), (void *)(intptr_t)2);
    assert_ptr_equal(tg_idmap_get2(m, NULL, "v0"), (void *)(intptr_t)1);
    assert_null(tg_idmap_get2(NULL, NULL, "v0"));
    /* put on a present key replaces its value (a copy of the key string
     * finds it: keys compare by content) */
    char copy[16];
    strcpy(copy, "v42");
    assert_int_equal(tg_idmap_put(m, copy, (void *)(intptr_t)7), 0);
    assert_ptr_equal(tg_idmap_get(m, "v42"), (void *)(intptr_t)7);
    tg_idmap_free(m);
    tg_idmap_free(m2);
}

static void test_node_description(void **state) {
    (void)state;
    tg_graph *g = tu_load(json);
    char buf[256], tr[256];
    tg_node_describe(g->nodes[0], buf, sizeof buf);
    assert_string_equal(buf, "nodes[0] (mul -> a)");
    tg_node_trace_str(g->nodes[0], tr, sizeof tr);
    assert_string_equal(tr, " [at m.py:3]");
    tg_graph_free(g);
}

/* ---- the clone's recorded order ---- */

/* Two function graphs made the same way: the same variables and nodes in
 * the same order, wired the same. */
static void same_fgraph(const char *what, const tg_fgraph *a, const tg_fgraph *b) {
    if (a->nvars != b->nvars || a->nnodes != b->nnodes || a->nin != b->nin || a->nout != b->nout ||
        a->nupd != b->nupd)
        fail_msg("%s: %d/%d vars, %d/%d nodes", what, a->nvars, b->nvars, a->nnodes, b->nnodes);
    for (int i = 0; i < a->nvars; i++)
        if (strcmp(a->vars[i]->id, b->vars[i]->id) || a->vars[i]->kind != b->vars[i]->kind ||
            a->vars[i]->nclients != b->vars[i]->nclients || !a->vars[i]->owner != !b->vars[i]->owner)
            fail_msg("%s: variable %d is '%s' and '%s'", what, i, a->vars[i]->id, b->vars[i]->id);
    for (int i = 0; i < a->nnodes; i++) {
        const tg_node *x = a->nodes[i], *y = b->nodes[i];
        if (x->op != y->op || x->nin != y->nin || x->nout != y->nout)
            fail_msg("%s: node %d is %s and %s", what, i, x->op->name, y->op->name);
        for (int k = 0; k < x->nin; k++)
            if (x->inputs[k]->index != y->inputs[k]->index || x->inpos[k] != y->inpos[k])
                fail_msg("%s: node %d, input %d differs", what, i, k);
        for (int k = 0; k < x->nout; k++)
            if (x->outputs[k]->index != y->outputs[k]->index) fail_msg("%s: node %d, output %d differs", what, i, k);
    }
    for (int i = 0; i < a->nin; i++)
        if (a->inputs[i]->index != b->inputs[i]->index) fail_msg("%s: input %d differs", what, i);
    for (int i = 0; i < a->nout + a->nupd; i++)
        if (a->outputs[i]->index != b->outputs[i]->index) fail_msg("%s: output %d differs", what, i);
    for (int i = 0; i < a->nupd; i++)
        if (a->upd_shared[i]->index != b->upd_shared[i]->index) fail_msg("%s: update %d differs", what, i);
}

/* Every graph file of the op tests, the scan tests and the examples,
 * loaded (those that fail to load, op tests of load errors, skipped) and
 * handed to fn, then freed; returns how many. */
typedef void graph_file_fn(const char *name, tg_graph *g, tg_ctx *ctx, void *ud);
static int each_graph_file(graph_file_fn *fn, void *ud) {
    const char *dirs[] = {TG_TEST_DATA "/ops", TG_TEST_DATA "/scan", TG_TEST_DATA "/../../examples"};
    int files = 0;
    tg_ctx *ctx = tg_ctx_new();
    for (int d = 0; d < 3; d++) {
        DIR *dir = opendir(dirs[d]);
        assert_non_null(dir);
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t n = strlen(e->d_name);
            if (n < 6 || strcmp(e->d_name + n - 5, ".json")) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
            tg_ctx_clear(ctx);
            tg_graph *g = tg_graph_load(path, ctx);
            if (!g) continue;
            files++;
            fn(e->d_name, g, ctx, ud);
            tg_graph_free(g);
        }
        closedir(dir);
    }
    tg_ctx_free(ctx);
    return files;
}

/* The loader records each function's walk; the clone replays it. The
 * replay makes what the walk makes, for every function of every graph
 * file of the op tests and the examples (without a record, the clone
 * walks); a graph whose counts changed since is walked again. */
static void replay_file(const char *name, tg_graph *g, tg_ctx *ctx, void *ud) {
    int *funcs = ud;
    for (int f = 0; f < g->nfuncs; f++) {
        tg_fdecl *fd = &g->funcs[f];
        if (!fd->order) fail_msg("%s: function %d has no record", name, f);
        tg_fgraph *replayed = tg_fgraph_from_decl(g, fd, ctx);
        int *order = fd->order;
        fd->order = NULL;
        tg_fgraph *walked = tg_fgraph_from_decl(g, fd, ctx);
        /* a record for other counts is not replayed */
        fd->order = order;
        fd->order_nodes++;
        tg_fgraph *stale = tg_fgraph_from_decl(g, fd, ctx);
        fd->order_nodes--;
        assert_non_null(replayed);
        assert_non_null(walked);
        assert_non_null(stale);
        same_fgraph(name, replayed, walked);
        same_fgraph(name, stale, walked);
        tg_fgraph_free(replayed);
        tg_fgraph_free(walked);
        tg_fgraph_free(stale);
        (*funcs)++;
    }
}

static void test_clone_replay(void **state) {
    (void)state;
    int funcs = 0, files = each_graph_file(replay_file, &funcs);
    printf("  %d functions of %d files replayed\n", funcs, files);
    assert_true(files >= 100);
}

/* ---- arenas ---- */

/* Every byte the library holds goes through tg_set_allocator's hook: a
 * counting hook sees whether an arena gives all of it back. */
static long g_live;

static void *counting_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (n == 0) {
        if (p) g_live--;
        free(p);
        return NULL;
    }
    void *q = realloc(p, n);
    if (q && !p) g_live++;
    return q;
}

static bool all_zero(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

static void test_arena_blocks(void **state) {
    (void)state;
    g_live = 0;
    tg_set_allocator(counting_realloc, NULL);
    tg_arena *a = tg_arena_new();
    assert_non_null(a);
    /* Zeroed, 16-byte aligned, in the order asked for, not overlapping:
     * consecutive blocks follow one another (a 40-byte block takes 48). */
    unsigned char *p1 = tg_arena_alloc(a, 40), *p2 = tg_arena_alloc(a, 40);
    assert_non_null(p1);
    assert_non_null(p2);
    assert_int_equal((uintptr_t)p1 % 16, 0);
    assert_int_equal((uintptr_t)p2 % 16, 0);
    assert_true(p2 >= p1 + 48 && p2 < p1 + 48 + 64);
    assert_true(all_zero(p1, 40) && all_zero(p2, 40));
    memset(p1, 0xab, 40);
    memset(p2, 0xcd, 40);
    /* A released block is the next one of its size class, zeroed again;
     * a block of another class is not it. */
    tg_arena_release(a, p1, 40);
    unsigned char *p3 = tg_arena_alloc(a, 64);
    unsigned char *p4 = tg_arena_alloc(a, 33); /* 33..48: p1's class */
    assert_ptr_not_equal(p3, p1);
    assert_ptr_equal(p4, p1);
    assert_true(all_zero(p4, 33));
    assert_int_equal(p2[0], 0xcd); /* its neighbour untouched */
    /* Large blocks come from the allocator, zeroed; 0 bytes is a block. */
    unsigned char *big = tg_arena_alloc(a, TG_ARENA_MAX + 1);
    unsigned char *none = tg_arena_alloc(a, 0);
    assert_non_null(big);
    assert_non_null(none);
    assert_true(all_zero(big, TG_ARENA_MAX + 1));
    /* More than a chunk's worth: still zeroed, still distinct. */
    unsigned char *many[400];
    for (int i = 0; i < 400; i++) {
        many[i] = tg_arena_alloc(a, 1000);
        assert_non_null(many[i]);
        assert_true(all_zero(many[i], 1000));
        memset(many[i], i & 0xff, 1000);
    }
    for (int i = 0; i < 400; i++) assert_int_equal(many[i][999], i & 0xff);
    /* The owner lets go first: the blocks stay good until the last goes,
     * and then every chunk is given back. */
    tg_arena_unref(a);
    assert_int_equal(p2[39], 0xcd);
    assert_true(g_live > 0);
    for (int i = 0; i < 400; i++) tg_arena_release(a, many[i], 1000);
    tg_arena_release(a, big, TG_ARENA_MAX + 1);
    tg_arena_release(a, none, 0);
    tg_arena_release(a, p2, 40);
    tg_arena_release(a, p3, 64);
    assert_true(g_live > 0);
    tg_arena_release(a, p4, 33);
    assert_int_equal(g_live, 0);
    /* No arena: the allocator itself. */
    void *q = tg_arena_alloc(NULL, 24);
    assert_non_null(q);
    assert_int_equal(g_live, 1);
    tg_arena_release(NULL, q, 24);
    assert_int_equal(g_live, 0);
    tg_set_allocator(NULL, NULL);
}

/* The loader makes a graph's nodes in its arena, the clone a function
 * graph's in the function graph's, in topological order; a node taken
 * out of its function graph outlives it, and everything is given back. */
static void test_arena_graphs(void **state) {
    (void)state;
    g_live = 0;
    tg_set_allocator(counting_realloc, NULL);
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    assert_non_null(g->arena);
    for (int i = 0; i < g->nnodes; i++) assert_ptr_equal(g->nodes[i]->arena, g->arena);
    tg_fgraph *fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx);
    assert_non_null(fg);
    assert_non_null(fg->arena);
    assert_ptr_not_equal(fg->arena, g->arena);
    for (int i = 0; i < fg->nnodes; i++) {
        assert_ptr_equal(fg->nodes[i]->arena, fg->arena);
        if (i) assert_true((char *)fg->nodes[i] > (char *)fg->nodes[i - 1]);
    }
    for (int i = 0; i < fg->nvars; i++) assert_ptr_equal(fg->vars[i]->arena, fg->arena);
    /* Take `add` (last) out and keep it past the function graph. */
    tg_node *add = fg->nodes[--fg->nnodes];
    assert_string_equal(add->op->name, "add");
    tg_fgraph_free(fg);
    tg_graph_free(g);
    assert_string_equal(add->op->name, "add");
    assert_int_equal(add->nin, 2);
    assert_true(g_live > 0);
    tg_node_free(add);
    tg_ctx_free(ctx);
    assert_int_equal(g_live, 0);
    tg_set_allocator(NULL, NULL);
}

/* Under AddressSanitizer, touching a released block or writing past a
 * block's end is reported (the child dies); in other builds, nothing to
 * see. */
static void test_arena_poison(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    for (int which = 0; which < 3; which++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            freopen("/dev/null", "w", stderr);
            tg_arena *a = tg_arena_new();
            volatile char *p = tg_arena_alloc(a, 40), *q = tg_arena_alloc(a, 40);
            tg_arena_release(a, (char *)p, 40);
            if (which == 1) p[20] = 1;  /* after release */
            if (which == 2) q[44] = 1;  /* past the end */
            tg_arena_release(a, (char *)q, 40);
            tg_arena_unref(a);
            _exit(0);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        assert_true(which == 0 ? clean : !clean);
    }
#else
    skip();
#endif
}

/* Each pointer between an fgraph's nodes and variables agrees with the
 * other side: inputs with the clients (by inpos), outputs with owners. */
static void check_links(const tg_fgraph *fg) {
    for (int i = 0; i < fg->nnodes; i++) {
        const tg_node *n = fg->nodes[i];
        assert_int_equal(n->index, i);
        for (int k = 0; k < n->nin; k++) {
            const tg_var *v = n->inputs[k];
            assert_ptr_equal(fg->vars[v->index], v);
            assert_true(n->inpos[k] >= 0 && n->inpos[k] < v->nclients);
            assert_ptr_equal(v->clients[n->inpos[k]].node, n);
            assert_int_equal(v->clients[n->inpos[k]].index, k);
        }
        for (int k = 0; k < n->nout; k++) {
            assert_ptr_equal(n->outputs[k]->owner, n);
            assert_int_equal(n->outputs[k]->owner_index, k);
        }
    }
    for (int r = 0; r < fg->nout; r++) {
        const tg_var *v = fg->outputs[r];
        bool found = false;
        for (int c = 0; c < v->nclients; c++) found |= !v->clients[c].node && v->clients[c].index == r;
        assert_true(found);
    }
}

/* Compaction moves every node and variable into a new arena, nodes in
 * order each followed by what it makes, with the same graph, and gives
 * every byte of the old arena back. */
static void test_compact(void **state) {
    (void)state;
    g_live = 0;
    tg_set_allocator(counting_realloc, NULL);
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_fgraph *fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx);
    assert_non_null(fg);
    /* d = b + b: the neg node goes, its block waits in the arena. */
    assert_int_equal(tg_fgraph_replace(fg, fg_find(fg, "c"), fg_find(fg, "b")), 0);
    assert_int_equal(tg_fgraph_toposort(fg, ctx), 0);
    assert_int_equal(fg->nnodes, 3);
    check_links(fg);
    const char *ops[3];
    for (int i = 0; i < 3; i++) ops[i] = fg->nodes[i]->op->name;
    tg_arena *old = fg->arena;
    tg_node *old_mul = fg->nodes[0];
    /* Not worth it on its own (far under a megabyte): nothing moves. */
    assert_int_equal(tg_fgraph_compact(fg, false, ctx), 0);
    assert_ptr_equal(fg->arena, old);
    assert_ptr_equal(fg->nodes[0], old_mul);
    assert_int_equal(tg_fgraph_compact(fg, true, ctx), 0);
    assert_ptr_not_equal(fg->arena, old);
    assert_int_equal(fg->nnodes, 3);
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(fg->nodes[i]->arena, fg->arena);
        assert_string_equal(fg->nodes[i]->op->name, ops[i]);
        /* the node, then its output, then the next node */
        assert_true((char *)fg->nodes[i]->outputs[0] > (char *)fg->nodes[i]);
        if (i) assert_true((char *)fg->nodes[i] > (char *)fg->nodes[i - 1]->outputs[0]);
    }
    for (int i = 0; i < fg->nvars; i++) assert_ptr_equal(fg->vars[i]->arena, fg->arena);
    check_links(fg);
    /* What the nodes owned came along: the trace, the shared state. */
    assert_int_equal(fg->nodes[0]->trace.n, 1);
    assert_string_equal(fg->nodes[0]->trace.frames[0].file, "m.py");
    assert_string_equal(fg->nodes[2]->inputs[0]->id, "b");
    assert_ptr_equal(fg_find(fg, "w")->shared, tg_graph_find(g, "w")->shared);
    assert_ptr_equal(fg->outputs[0], fg_find(fg, "d"));
    tg_fgraph_free(fg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    assert_int_equal(g_live, 0);
    tg_set_allocator(NULL, NULL);
}

/* A variable's clients that outgrow the inline slots live in its arena
 * (graph.c): growing to 50 readers, each longer list replaces the last,
 * whose bytes go back to the arena, so that what the arena holds live is
 * the variable and one list of 64 entries, and nothing else; freeing the
 * variable gives every byte back, and the allocator sees only the arena's
 * chunks. A variable outside any arena keeps its list on the heap. */
static void test_clients_in_arena(void **state) {
    (void)state;
    g_live = 0;
    tg_set_allocator(counting_realloc, NULL);
    tg_arena *a = tg_arena_new();
    assert_non_null(a);
    tg_var *v = tg_var_new_in(a, "v", TG_VAR_INPUT), *h = tg_var_new("h", TG_VAR_INPUT);
    assert_non_null(v);
    assert_non_null(h);
    size_t live0, held, live;
    tg_arena_usage(a, &live0, &held);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(tg_fgraph_add_client(v, NULL, i), 0);
        assert_int_equal(tg_fgraph_add_client(h, NULL, i), 0);
    }
    assert_int_equal(v->nclients, 50);
    assert_int_equal(v->cclients, 64);
    for (int i = 0; i < 50; i++) {
        assert_null(v->clients[i].node);
        assert_int_equal(v->clients[i].index, i);
        assert_int_equal(h->clients[i].index, i);
    }
    tg_arena_usage(a, &live, &held);
    assert_int_equal(live - live0, 64 * sizeof(tg_client));
    tg_var_free(v);
    tg_arena_usage(a, &live, &held);
    assert_int_equal(live, 0);
    tg_var_free(h);
    tg_arena_unref(a);
    assert_int_equal(g_live, 0);
    tg_set_allocator(NULL, NULL);
}

/* ---- origin sets ---- */

/* The reference: expand a set's keys depth first (every repeat), then
 * keep each key where it first appears: what copying each union made. */
typedef struct {
    const char **keys;
    int nkeys;        /* a leaf's */
    int kids[4], nk;  /* a union's, by index */
} ref_set;

static void ref_expand(const ref_set *sets, int i, const char **out, int *n) {
    if (sets[i].keys)
        for (int k = 0; k < sets[i].nkeys; k++) out[(*n)++] = sets[i].keys[k];
    for (int k = 0; k < sets[i].nk; k++) ref_expand(sets, sets[i].kids[k], out, n);
}

static void test_origin_sets(void **state) {
    (void)state;
    g_live = 0;
    tg_set_allocator(counting_realloc, NULL);
    /* Small sets, repeats within and across leaves, a set reached twice. */
    static const char *l0[] = {"a", "b"}, *l1[] = {"b", "c", "a"}, *l2[] = {"d"};
    ref_set ref[] = {
        {l0, 2, {0}, 0}, {l1, 3, {0}, 0}, {l2, 1, {0}, 0},
        {NULL, 0, {1, 2}, 2},    /* 3: b c a d */
        {NULL, 0, {2, 3, 0}, 3}, /* 4: d, then 3, then 0 again */
    };
    tg_oset *s[5];
    for (int i = 0; i < 3; i++) s[i] = tg_oset_leaf(ref[i].keys, ref[i].nkeys);
    tg_oset *k3[] = {s[1], s[2]}, *k4[] = {s[2], NULL, s[0]};
    s[3] = tg_oset_union(k3, 2);
    k4[1] = s[3];
    s[4] = tg_oset_union(k4, 3);
    assert_true(tg_oset_is_leaf(s[0]) && !tg_oset_is_leaf(s[4]));
    assert_int_equal(tg_oset_total(s[4]), 1 + 4 + 2);
    int n = 0;
    char **o = tg_oset_flatten(s[4], &n);
    const char *want[] = {"d", "b", "c", "a"};
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) assert_string_equal(o[i], want[i]);
    assert_null(o[4]);
    tg_free(o);
    /* The sets hold copies: the leaves' keys may go. Dropping the sets in
     * any order frees each once, when its last holder lets go. */
    for (int i = 0; i < 5; i++) tg_oset_unref(s[i == 4 ? 0 : i + 1]);
    assert_int_equal(g_live, 0);

    /* Many keys (the flatten's set of seen keys): leaves of 100 keys
     * overlapping by half, united in a chain, against the reference. */
    enum { NL = 30, W = 100 };
    static char names[NL * W / 2 + W][8];
    static const char *lk[NL][W];
    ref_set r2[2 * NL];
    for (int i = 0; i < NL * W / 2 + W; i++) snprintf(names[i], sizeof names[i], "k%d", i);
    tg_oset *sets[2 * NL];
    for (int i = 0; i < NL; i++) {
        for (int k = 0; k < W; k++) lk[i][k] = names[(i * W / 2 + k * 7) % (NL * W / 2 + W)];
        r2[i] = (ref_set){lk[i], W, {0}, 0};
        sets[i] = tg_oset_leaf(lk[i], W);
    }
    /* union j: (union j-1, leaf j), the first just leaf 0 */
    for (int j = 0; j < NL; j++) {
        tg_oset *kids[2] = {j ? sets[NL + j - 1] : sets[0], sets[j]};
        int nk = j ? 2 : 1;
        r2[NL + j] = (ref_set){NULL, 0, {j ? NL + j - 1 : 0, j}, nk};
        sets[NL + j] = tg_oset_union(kids, nk);
    }
    static const char *all[NL * W];
    int na = 0;
    ref_expand(r2, 2 * NL - 1, all, &na);
    assert_int_equal(na, NL * W);
    int nu = 0;
    for (int i = 0; i < na; i++) { /* first appearances, in place */
        bool seen = false;
        for (int j = 0; j < nu && !seen; j++) seen = !strcmp(all[j], all[i]);
        if (!seen) all[nu++] = all[i];
    }
    assert_true(nu < na && nu > 64); /* repeats to leave out; a set of them */
    o = tg_oset_flatten(sets[2 * NL - 1], &n);
    assert_non_null(o);
    assert_int_equal(n, nu);
    for (int i = 0; i < n; i++) assert_string_equal(o[i], all[i]);
    tg_free(o);
    for (int i = 0; i < 2 * NL; i++) tg_oset_unref(sets[i]);
    assert_int_equal(g_live, 0);

    /* A chain of 200,000 unions, each of the one before and a new leaf
     * (what folding an add chain builds): flattened and freed without
     * recursion, the keys in chain order. */
    enum { DEPTH = 200000 };
    tg_oset *top = NULL;
    for (int i = 0; i < DEPTH; i++) {
        char key[16];
        snprintf(key, sizeof key, "a%d", i);
        const char *kp = key;
        tg_oset *leaf = tg_oset_leaf(&kp, 1);
        tg_oset *kids[2] = {top, leaf};
        tg_oset *u = top ? tg_oset_union(kids, 2) : tg_oset_union(&leaf, 1);
        assert_non_null(u);
        tg_oset_unref(leaf);
        tg_oset_unref(top);
        top = u;
    }
    o = tg_oset_flatten(top, &n);
    assert_int_equal(n, DEPTH);
    assert_string_equal(o[0], "a0");
    assert_string_equal(o[12345], "a12345");
    assert_string_equal(o[DEPTH - 1], "a199999");
    tg_free(o);
    tg_oset_unref(top);
    assert_int_equal(g_live, 0);

    /* A flat list: which keys come first (equal strings at different
     * addresses are one key), against a scan of every pair, for lists
     * that fit the stack's table and lists that do not. */
    static char pool[6000][12];
    static const char *list[6000];
    static bool first[6000];
    for (int len = 0; len <= 6000; len = len ? len * 5 : 1) {
        int n = len > 6000 ? 6000 : len;
        for (int i = 0; i < n; i++) {
            snprintf(pool[i], sizeof pool[i], "n%d", (i * 37) % (n / 3 + 1)); /* about 3 of each */
            list[i] = pool[i];
        }
        int want = 0;
        for (int i = 0; i < n; i++) {
            bool again = false;
            for (int j = 0; j < i && !again; j++) again = !strcmp(list[j], list[i]);
            want += !again;
        }
        memset(first, 0, sizeof first);
        assert_int_equal(tg_origins_first(list, n, first), want);
        for (int i = 0; i < n; i++) {
            bool again = false;
            for (int j = 0; j < i && !again; j++) again = !strcmp(list[j], list[i]);
            assert_int_equal(first[i], !again);
        }
        int nk = -1;
        o = tg_origins_pack_unique(list, n, &nk);
        assert_non_null(o);
        assert_int_equal(nk, want);
        for (int i = 0, k = 0; i < n; i++)
            if (first[i]) assert_string_equal(o[k++], list[i]);
        assert_null(o[nk]);
        tg_free(o);
        if (len == 6000) break;
    }
    assert_int_equal(g_live, 0);
    tg_set_allocator(NULL, NULL);
}

/* ---- sealed attrs ---- */

/* A node's sealed hash is still the hash of its attrs, and "small attrs"
 * still means an `a` of zeros but for a.dtype and a.mode, equal to the
 * copies: nothing changed them after the seal. Returns how many nodes
 * were sealed. */
static int check_sealed(const char *what, tg_node *const *nodes, int n) {
    static const tg_attrs zero;
    int sealed = 0;
    for (int i = 0; i < n; i++) {
        const tg_node *x = nodes[i];
        if (!(x->aflags & TG_NODE_AHASH)) {
            if (x->aflags) fail_msg("%s: node %d (%s): no hash, flags %d", what, i, x->op->name, x->aflags);
            continue;
        }
        sealed++;
        if (x->ahash != tg_node_attrs_hash(x))
            fail_msg("%s: node %d (%s): the sealed hash is not its attrs' hash", what, i, x->op->name);
        tg_attrs rest = x->a;
        rest.dtype = 0;
        rest.mode = 0;
        bool small = memcmp(&rest, &zero, sizeof zero) == 0 && x->a.dtype >= 0 && x->a.dtype < 128 &&
                     x->a.mode >= -128 && x->a.mode < 128;
        if (!!(x->aflags & TG_NODE_ASMALL) != small)
            fail_msg("%s: node %d (%s): marked %s attrs", what, i, x->op->name, small ? "large" : "small");
        if (small && (x->adtype != (int)x->a.dtype || x->amode != x->a.mode))
            fail_msg("%s: node %d (%s): the copies of dtype and mode differ", what, i, x->op->name);
    }
    return sealed;
}

/* The loader seals every node once its attrs are parsed and inferred;
 * the clone copies the seal (and, where `a` is small, the two numbers
 * instead of `a`); the optimizer seals what it builds. Over every graph
 * of the op tests, the scan tests and the examples, each function
 * compiled with none and fast_run, every seal is still true. Attrs that two nodes
 * share hash alike, different ones (almost always) apart: sums over
 * axis 0 (written twice) and over axis 1 of the same input. */
typedef struct sealed_count {
    int loaded, small, compiled;
} sealed_count;

static void sealed_file(const char *name, tg_graph *g, tg_ctx *ctx, void *ud) {
    sealed_count *k = ud;
    const char *presets[] = {"none", "fast_run"};
    int s = check_sealed(name, g->nodes, g->nnodes);
    if (s != g->nnodes) fail_msg("%s: %d of %d nodes sealed", name, s, g->nnodes);
    k->loaded += s;
    for (int i = 0; i < g->nnodes; i++) k->small += !!(g->nodes[i]->aflags & TG_NODE_ASMALL);
    for (int f = 0; f < g->nfuncs; f++)
        for (int p = 0; p < 2; p++) {
            tg_compile_options o = {.preset = presets[p]};
            tg_ctx_clear(ctx);
            tg_function *fn = tg_function_compile(g, f, &o, ctx);
            if (!fn) continue; /* (a function the op test expects to fail) */
            k->compiled += check_sealed(name, fn->fg->nodes, fn->fg->nnodes);
            tg_function_free(fn);
        }
}

static void test_sealed_attrs(void **state) {
    (void)state;
    sealed_count k = {0};
    int files = each_graph_file(sealed_file, &k);
    printf("  %d files: %d nodes loaded (%d with small attrs), %d compiled, sealed\n", files, k.loaded, k.small,
           k.compiled);
    assert_true(files >= 100);
    assert_true(k.small > k.loaded / 4 && k.small < k.loaded);
    assert_true(k.compiled > 1000);

    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\","
                          "\"type\":{\"dtype\":\"float64\",\"shape\":[3,4]}}],\"nodes\":["
                          "{\"op\":\"sum\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"attrs\":{\"axis\":0}},"
                          "{\"op\":\"sum\",\"inputs\":[\"x\"],\"outputs\":[\"b\"],\"attrs\":{\"axis\":1}},"
                          "{\"op\":\"sum\",\"inputs\":[\"x\"],\"outputs\":[\"c\"],\"attrs\":{\"keepdims\":false,\"axis\":0}},"
                          "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"d\"]}]}");
    assert_int_equal(g->nnodes, 4);
    assert_true(g->nodes[0]->ahash != g->nodes[1]->ahash);
    assert_true(g->nodes[0]->ahash == g->nodes[2]->ahash);
    assert_true(g->nodes[3]->aflags & TG_NODE_ASMALL);
    assert_int_equal(g->nodes[3]->adtype, TG_FLOAT64);
    assert_false(g->nodes[0]->aflags & TG_NODE_ASMALL);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_takes_what_is_needed),
        cmocka_unit_test(test_trace_shared_across_threads),
        cmocka_unit_test(test_replace_and_resort),
        cmocka_unit_test(test_node_description),
        cmocka_unit_test(test_sort_order_drop_and_cycle),
        cmocka_unit_test(test_sort_keeps_pruned_node_still_read),
        cmocka_unit_test(test_idmap),
        cmocka_unit_test(test_clone_replay),
        cmocka_unit_test(test_arena_blocks),
        cmocka_unit_test(test_arena_graphs),
        cmocka_unit_test(test_arena_poison),
        cmocka_unit_test(test_compact),
        cmocka_unit_test(test_clients_in_arena),
        cmocka_unit_test(test_origin_sets),
        cmocka_unit_test(test_sealed_attrs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
