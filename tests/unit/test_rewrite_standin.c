/* The optimizer's record of replaced variables (what `tgdebug compare`
 * follows from an optimized value back to the file's): y = x*x becomes
 * sqr(x), a new variable 'y:sqr' that stands for 'y'; a chain of two
 * rewrites is followed back to the file's variable; a variable no rewrite
 * made stands for itself; and the test-only rule hook adds a rewrite that
 * --exclude can turn off by name. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "rewrite/engine.h"
#include "vm/vm.h"

static tg_function *compile(const char *json, const char *const *exclude) {
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = "fast_run", .exclude = exclude};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, NULL, ctx), &o, ctx);
    if (!f) fail_msg("compile: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    tg_graph_free(g);
    return f;
}

static const char *SQ =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
    "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"y\"]},"
    "{\"op\":\"sum\",\"inputs\":[\"y\"],\"outputs\":[\"s\"]}]}";

static void test_sqr_stands_for_y(void **state) {
    (void)state;
    tg_function *f = compile(SQ, NULL);
    int k = -1;
    for (int i = 0; i < tg_function_node_count(f); i++)
        if (!strcmp(tg_function_node_op(f, i), "sqr")) k = i;
    assert_true(k >= 0);
    const char *id = f->sched[k].node->outputs[0]->id;
    assert_string_not_equal(id, "y");
    assert_string_equal(tg_opt_record_standin(&f->record, id), "y");
    assert_string_equal(tg_opt_record_standin(&f->record, "x"), "x");
    assert_string_equal(tg_opt_record_standin(&f->record, "s"), "s");
    tg_function_free(f);
}

static void test_chain_followed_back(void **state) {
    (void)state;
    tg_opt_record r = {0};
    assert_int_equal(tg_opt_record_vmap_add(&r, "a", "a:exp"), TG_OK);
    assert_int_equal(tg_opt_record_vmap_add(&r, "b", "b:neg"), TG_OK);
    assert_int_equal(tg_opt_record_vmap_add(&r, "a:exp", "a:expm1"), TG_OK);
    assert_string_equal(tg_opt_record_standin(&r, "a:expm1"), "a");
    assert_string_equal(tg_opt_record_standin(&r, "a:exp"), "a");
    assert_string_equal(tg_opt_record_standin(&r, "b:neg"), "b");
    assert_string_equal(tg_opt_record_standin(&r, "c"), "c");
    /* many pairs: the packed buffer grows */
    char o[32], n[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(o, sizeof o, "v%d", i);
        snprintf(n, sizeof n, "v%d", i + 1);
        assert_int_equal(tg_opt_record_vmap_add(&r, o, n), TG_OK);
    }
    assert_string_equal(tg_opt_record_standin(&r, "v5000"), "v0");
    tg_opt_record_free(&r);
}

/* A test rule: sum(y) -> prod(y) (wrong on purpose), in canonicalize. */
static int sum_to_prod(tg_rw *rw, tg_node *n) {
    tg_var *v = tg_rw_op1(rw, "prod", n->inputs[0], NULL);
    int rc = tg_rw_replace(rw, n->outputs[0], v);
    return rc ? rc : 1;
}

static void test_test_rule_hook(void **state) {
    (void)state;
    static const tg_rw_rule rule = {"test_sum_to_prod", "canonicalize", NULL, "sum", sum_to_prod};
    tg_rw_test_rule_set(&rule);
    tg_function *f = compile(SQ, NULL);
    bool seen = false;
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info r;
        tg_function_rewrite_get(f, i, &r);
        if (!strcmp(r.name, "test_sum_to_prod")) seen = r.nremoved == 1 && !strcmp(r.removed[0], "s");
    }
    assert_true(seen);
    tg_function_free(f);
    const char *exc[] = {"test_sum_to_prod", NULL};
    f = compile(SQ, exc);
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info r;
        tg_function_rewrite_get(f, i, &r);
        assert_string_not_equal(r.name, "test_sum_to_prod");
    }
    tg_function_free(f);
    tg_rw_test_rule_set(NULL);
    /* Without the rule its name is no tag any more. */
    tg_graph *g = tu_load(SQ);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.exclude = exc};
    assert_null(tg_function_compile(g, 0, &o, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqr_stands_for_y),
        cmocka_unit_test(test_chain_followed_back),
        cmocka_unit_test(test_test_rule_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
