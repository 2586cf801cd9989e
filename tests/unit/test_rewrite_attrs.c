/* Attrs in the optimizer. A rewrite that wrote attrs text that does not
 * parse fails the compile with one line naming the rule, the node it
 * rewrote and what is wrong, quoting the start of the text only (it
 * quoted the whole text, bodies and all: a 2 KB line for scans nested 9
 * deep, megabytes for big bodies). Attrs taken from a node are copied
 * as they are, never written out and parsed again: a body node moved out
 * of its scan keeps bodies as deep as the file had them (the data files
 * tests/data/ops/nested_*.json run those graphs); a copy of such a
 * function (tg_function_copy, which loads the optimized graph again)
 * gives the same values. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "io/io.h"
#include "rewrite/engine.h"
#include "tg/tgf.h"
#include "vm/vm.h"

static const char *SQ =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
    "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"y\"]},"
    "{\"op\":\"sum\",\"inputs\":[\"y\"],\"outputs\":[\"s\"],\"name\":\"total\"}]}";

static char *bad_text; /* what the test rule writes */

/* A test rule: sum(y) -> sum(y) with bad_text as its attrs. */
static int sum_bad_attrs(tg_rw *rw, tg_node *n) {
    tg_var *v = tg_rw_op1(rw, "sum", n->inputs[0], bad_text);
    if (!v) return TG_EINVAL;
    int rc = tg_rw_replace(rw, n->outputs[0], v);
    return rc ? rc : 1;
}

/* The compile's error with bad_text as the rule's attrs. */
static char *compile_error(void) {
    static const tg_rw_rule rule = {"test_bad_attrs", "canonicalize", NULL, "sum", sum_bad_attrs};
    tg_rw_test_rule_set(&rule);
    tg_graph *g = tu_load(SQ);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = "fast_run"};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, NULL, ctx), &o, ctx);
    tg_rw_test_rule_set(NULL);
    assert_null(f);
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    char *msg = strdup(tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    tg_graph_free(g);
    return msg;
}

static void test_deep_text_one_line(void **state) {
    (void)state;
    /* {"a":[[[...]]]} 40 levels deep and 20 KB long. */
    size_t n = 20000;
    bad_text = malloc(n + 1);
    assert_non_null(bad_text);
    memset(bad_text, ' ', n);
    memcpy(bad_text, "{\"a\":", 5);
    for (int i = 0; i < 40; i++) bad_text[5 + i] = '[';
    for (int i = 0; i < 40; i++) bad_text[n - 1 - i] = i ? ']' : '}';
    bad_text[n] = 0;
    char *msg = compile_error();
    printf("  %s\n", msg);
    assert_null(strchr(msg, '\n'));
    assert_true(strlen(msg) < 400);
    assert_non_null(strstr(msg, "optimizer (test_bad_attrs) rewriting nodes[1] (sum 'total' -> s)"));
    assert_non_null(strstr(msg, "bad attrs for the sum it built: nested more than 32 levels deep at byte 36 of 20000"));
    assert_non_null(strstr(msg, "({\"a\":[[[[["));
    assert_non_null(strstr(msg, "...)"));
    free(msg);
    free(bad_text);
}

static void test_short_text_whole(void **state) {
    (void)state;
    /* A newline in the text does not break the line. */
    bad_text = strdup("{\"axis\":\n0,}");
    char *msg = compile_error();
    printf("  %s\n", msg);
    assert_null(strchr(msg, '\n'));
    assert_non_null(strstr(msg, "at byte 11 of 12 ({\"axis\": 0,})"));
    free(msg);
    free(bad_text);
}

/* The optimized function of a data file, its copy, and both called on
 * the file's input give the file's output (NumPy's). */
static void copy_same(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/ops/%s.json", TG_TEST_DATA, name);
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(path, ctx);
    if (!g) fail_msg("%s: %s", name, tg_ctx_message(ctx));
    json_object *tests = NULL, *c, *io;
    assert_true(json_object_object_get_ex(g->meta, "tests", &tests));
    c = json_object_array_get_idx(tests, 0);
    assert_true(json_object_object_get_ex(c, "inputs", &io));
    tg_array *x = tg_value_from_json(json_object_object_get(io, "x"), TG_FLOAT64, -1, NULL, NULL, "x", NULL, ctx);
    assert_true(json_object_object_get_ex(c, "outputs", &io));
    tg_array *want =
        tg_value_from_json(json_object_object_get(io, "y"), TG_DTYPE_INVALID, -1, NULL, NULL, "y", NULL, ctx);
    if (!x || !want) fail_msg("%s: %s", name, tg_ctx_message(ctx));
    tg_compile_options o = {.preset = "fast_run"};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, NULL, ctx), &o, ctx);
    if (!f) fail_msg("%s: compile: %s", name, tg_ctx_message(ctx));
    tg_function *cp = tg_function_copy(f, NULL, NULL, 0, ctx);
    if (!cp) fail_msg("%s: copy: %s", name, tg_ctx_message(ctx));
    tg_function *fs[2] = {f, cp};
    for (int k = 0; k < 2; k++) {
        tg_array *y = NULL;
        char msg[4096];
        if (tg_function_call(fs[k], &x, &y, ctx)) fail_msg("%s: call: %s", name, tg_ctx_message(ctx));
        if (!tu_arrays_close(y, want, 1e-12, 1e-15, msg, sizeof msg))
            fail_msg("%s: %s: %s", name, k ? "the copy" : "f", msg);
        tg_array_free(y);
    }
    tg_function_free(cp);
    tg_function_free(f);
    tg_array_free(x);
    tg_array_free(want);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

static void test_deep_bodies_copied(void **state) {
    (void)state;
    copy_same("nested_scan_9");
    copy_same("nested_scan_30");
    copy_same("nested_scan_30_loops");
    copy_same("nested_scan_ofg_30");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deep_text_one_line),
        cmocka_unit_test(test_short_text_whole),
        cmocka_unit_test(test_deep_bodies_copied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
