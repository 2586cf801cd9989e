/* Function graphs: cloning what a function needs (and nothing else),
 * clients, replacing a variable, re-sorting after a replacement, traces
 * kept on clones. */
#include <string.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "testutil.h"

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
    /* Clones are new objects with the trace copied. */
    assert_ptr_not_equal(fg->nodes[0], g->nodes[0]);
    assert_int_equal(fg->nodes[0]->trace.n, 1);
    assert_string_equal(fg->nodes[0]->trace.frames[0].file, "m.py");
    /* The shared state is the graph's own (shared, not copied). */
    tg_var *w = fg_find(fg, "w");
    assert_ptr_equal(w->shared, tg_graph_find(g, "w")->shared);
    tg_fgraph_free(fg);
    tg_ctx_free(ctx);
    tg_graph_free(g);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_takes_what_is_needed),
        cmocka_unit_test(test_replace_and_resort),
        cmocka_unit_test(test_node_description),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
