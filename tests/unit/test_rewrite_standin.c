/* The optimizer's record of replaced variables (what `tgdebug compare`
 * follows from an optimized value back to the file's): y = x*x becomes
 * sqr(x), a new variable 'y:sqr' that stands for 'y'; a chain of two
 * rewrites is followed back to the file's variable; a variable no rewrite
 * made stands for itself; and the test-only rule hook adds a rewrite that
 * --exclude can turn off by name. */
#include <stdint.h>
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

/* The record's entries keep their keys in shared chunks (rewrite.h):
 * 5,000 entries of 0 to 3 removed and 0 to 2 created keys of 1 to 40
 * characters, and one key of 100,000 (larger than a chunk), all read back
 * as written, each list ending in NULL. Under ASan, a block that overran
 * its chunk, or a chunk left unfreed, fails the run. */
static void test_record_keys_kept(void **state) {
    (void)state;
    enum { N = 5000, BIG = 2501 }; /* (an entry with removed keys) */
    static char big[100001];
    memset(big, 'k', sizeof big - 1);
    tg_opt_record r = {0};
    char keys[5][48];
    const char *rm[3], *cr[2];
    for (int e = 0; e < N; e++) {
        int nr = e % 4, nc = e % 3;
        for (int i = 0; i < nr + nc; i++) {
            int len = 1 + (e * 7 + i * 13) % 40;
            for (int j = 0; j < len; j++) keys[i][j] = (char)('a' + (e + i + j) % 26);
            keys[i][len] = 0;
        }
        for (int i = 0; i < nr; i++) rm[i] = keys[i];
        for (int i = 0; i < nc; i++) cr[i] = keys[nr + i];
        if (e == BIG && nr) rm[0] = big;
        assert_int_equal(tg_opt_record_add(&r, "rule", "pass", rm, nr, cr, nc), TG_OK);
    }
    assert_int_equal(r.n, N);
    for (int e = 0; e < N; e++) {
        const tg_rw_entry *x = &r.entries[e];
        int nr = e % 4, nc = e % 3;
        assert_int_equal(x->nremoved, nr);
        assert_int_equal(x->ncreated, nc);
        assert_null(x->removed[nr]);
        assert_null(x->created[nc]);
        for (int i = 0; i < nr + nc; i++) {
            const char *got = i < nr ? x->removed[i] : x->created[i - nr];
            if (e == BIG && i == 0) {
                assert_string_equal(got, big);
                continue;
            }
            int len = 1 + (e * 7 + i * 13) % 40;
            assert_int_equal((int)strlen(got), len);
            for (int j = 0; j < len; j++) assert_int_equal(got[j], 'a' + (e + i + j) % 26);
            /* 16-byte aligned lists */
            assert_int_equal((uintptr_t)x->removed % 16, 0);
        }
    }
    tg_opt_record_free(&r);
    assert_int_equal(r.n, 0);
    assert_null(r.keys);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqr_stands_for_y),
        cmocka_unit_test(test_chain_followed_back),
        cmocka_unit_test(test_test_rule_hook),
        cmocka_unit_test(test_record_keys_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
