/* tgdebug's --when language (tools/tgdebug/break.c): every form evaluated
 * on small arrays whose reductions are worked out by hand, NumPy's NaN
 * rules, precedence of and over or, and parse errors with their column. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "debugger.h"
#include "testutil.h"

static tg_array *f64(int n, const double *v) {
    int64_t shape[1] = {n};
    return tg_array_new_from(TG_FLOAT64, 1, shape, v);
}

/* EXPR on outputs outs[0..] and inputs ins[0..] at call `call`. */
static bool holds(const char *text, tg_array *const *outs, tg_array *const *ins, long call) {
    char err[256] = "";
    dbg_expr *e = dbg_expr_parse(text, err, sizeof err);
    if (!e) fail_msg("'%s' did not parse: %s", text, err);
    bool r = dbg_expr_eval(e, outs, ins, call);
    dbg_expr_free(e);
    return r;
}

static void test_reductions(void **state) {
    (void)state;
    /* x = [-3, 1, 2]: max 2, min -3, max |x| 3, mean 0, sum 0. */
    tg_array *x = f64(3, (double[]){-3, 1, 2});
    tg_array *outs[1] = {x};
    assert_true(holds("max(abs(x))>2.5", outs, NULL, 1));
    assert_false(holds("max(abs(x))>3", outs, NULL, 1));
    assert_true(holds("max(abs(x))>=3", outs, NULL, 1));
    assert_true(holds("max(x)==2", outs, NULL, 1));
    assert_true(holds("min(x)<0", outs, NULL, 1));
    assert_true(holds("min(x0)==-3", outs, NULL, 1));
    assert_true(holds("mean(x)==0", outs, NULL, 1));
    assert_true(holds("sum(x)<=0 and sum(x)>=0", outs, NULL, 1));
    assert_true(holds("mean(abs(x))==2", outs, NULL, 1));
    assert_true(holds("mean(x)!=1", outs, NULL, 1));
    assert_false(holds("any(isnan(x))", outs, NULL, 1));
    assert_true(holds("all(isfinite(x))", outs, NULL, 1));
    tg_array_free(x);
}

static void test_nan_and_inf(void **state) {
    (void)state;
    /* y = [1, nan, inf]: NaN propagates through every reduction, so every
     * comparison with one is false; any/all see each element. */
    tg_array *y = f64(3, (double[]){1, NAN, INFINITY});
    tg_array *outs[1] = {y};
    assert_true(holds("any(isnan(x))", outs, NULL, 1));
    assert_true(holds("any(isinf(x))", outs, NULL, 1));
    assert_false(holds("all(isfinite(x))", outs, NULL, 1));
    assert_false(holds("all(isnan(x))", outs, NULL, 1));
    assert_false(holds("max(x)>0", outs, NULL, 1));
    assert_false(holds("max(x)<=0", outs, NULL, 1));
    assert_true(holds("not max(x)>0", outs, NULL, 1));
    assert_true(holds("max(x)!=0", outs, NULL, 1)); /* NaN != 0, as in NumPy */
    /* z = [inf, -inf, 2]: max |z| is inf. */
    tg_array *z = f64(3, (double[]){INFINITY, -INFINITY, 2});
    outs[0] = z;
    assert_true(holds("max(abs(x))>1e308", outs, NULL, 1));
    assert_true(holds("min(x)<-1e308", outs, NULL, 1));
    assert_false(holds("any(isnan(x))", outs, NULL, 1));
    /* An empty array: max is NaN (false), sum is 0. */
    tg_array *e = f64(0, NULL);
    outs[0] = e;
    assert_false(holds("max(x)<1", outs, NULL, 1));
    assert_true(holds("sum(x)==0", outs, NULL, 1));
    assert_false(holds("any(isnan(x))", outs, NULL, 1));
    assert_true(holds("all(isnan(x))", outs, NULL, 1)); /* vacuous, as np.all([]) */
    tg_array_free(y);
    tg_array_free(z);
    tg_array_free(e);
}

static void test_calls_inputs_precedence(void **state) {
    (void)state;
    tg_array *a = f64(2, (double[]){10, 20}), *b = f64(1, (double[]){-1});
    int64_t shape[1] = {2};
    tg_array *i = tg_array_new_from(TG_INT32, 1, shape, (int32_t[]){5, -7});
    tg_array *outs[2] = {a, i}, *ins[2] = {b, a};
    assert_true(holds("call>=3", outs, ins, 3));
    assert_false(holds("call>=3", outs, ins, 2));
    assert_true(holds("call==2", outs, ins, 2));
    assert_true(holds("mean(x1)==-1", outs, ins, 1));  /* int32 output 1: (5 - 7) / 2 */
    assert_true(holds("max(abs(x1))==7", outs, ins, 1));
    assert_true(holds("min(in0)<0 and max(in1)==20", outs, ins, 1));
    /* and binds tighter than or: call==1 or (call==2 and max(x)>100). */
    assert_true(holds("call==1 or call==2 and max(x)>100", outs, ins, 1));
    assert_false(holds("call==1 or call==2 and max(x)>100", outs, ins, 2));
    assert_false(holds("(call==1 or call==2) and max(x)>100", outs, ins, 1));
    assert_true(holds(" ( call == 2 ) or not ( sum(x) < 0 ) ", outs, ins, 5));
    dbg_expr *e = dbg_expr_parse("max(x2)>0 or min(in4)<0 and call>1", (char[64]){0}, 64);
    assert_non_null(e);
    int mo, mi;
    dbg_expr_max_vars(e, &mo, &mi);
    assert_int_equal(mo, 2);
    assert_int_equal(mi, 4);
    dbg_expr_free(e);
    tg_array_free(a);
    tg_array_free(b);
    tg_array_free(i);
}

static void test_parse_errors(void **state) {
    (void)state;
    static const struct {
        const char *text, *err;
    } cases[] = {
        {"", "column 1: expected a condition"},
        {"max(abs(x))>", "column 13: expected a number"},
        {"max(x) >= 1 or", "column 15: expected a condition"},
        {"foo(x)>1", "column 1: unknown name 'foo'"},
        {"max(y)>1", "column 5: 'y' is not a value"},
        {"max(in)>1", "column 5: 'in' is not a value"},
        {"max(x1234)>1", "column 5: 'x1234' is not a value"},
        {"max(x)", "column 7: expected a comparison"},
        {"max(x)>1e", "column 9: unexpected 'e' after the number"},
        {"max(x)>0x10", "column 8: expected a number"},
        {"max(x)>inf", "column 8: expected a number"},
        {"any(isnan(x)", "column 13: expected ')' before the end"},
        {"any(x)", "column 5: expected isnan(..), isinf(..) or isfinite(..)"},
        {"max(x)>1 andd call>1", "column 10: unexpected 'andd'"},
        {"(call>1", "column 8: expected ')' before the end"},
        {"call>1)", "column 7: unexpected ')'"},
        {"max abs(x)>1", "column 5: expected '('"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char err[256] = "";
        dbg_expr *e = dbg_expr_parse(cases[k].text, err, sizeof err);
        if (e || strncmp(err, cases[k].err, strlen(cases[k].err)))
            fail_msg("'%s': got '%s', want '%s...'", cases[k].text, e ? "(parsed)" : err, cases[k].err);
        dbg_expr_free(e);
    }
}

/* text: `open`, n times, then `mid`, then `close`, n times (a new string). */
static char *nested(const char *open, int n, const char *mid, const char *close) {
    size_t lo = strlen(open), lm = strlen(mid), lc = strlen(close);
    char *s = malloc((size_t)n * (lo + lc) + lm + 1), *p = s;
    assert_non_null(s);
    for (int i = 0; i < n; i++, p += lo) memcpy(p, open, lo);
    memcpy(p, mid, lm);
    p += lm;
    for (int i = 0; i < n; i++, p += lc) memcpy(p, close, lc);
    *p = 0;
    return s;
}

/* Deep nesting is an error at the column of the level past 256, not a
 * stack overflow; 256 levels and a long chain of 'and' (no nesting)
 * parse and evaluate. */
static void test_depth(void **state) {
    (void)state;
    char err[256];
    static const struct {
        const char *open, *close;
        int n, column;
    } deep[] = {{"(", ")", 20000, 257}, {"not ", "", 30000, 1025}, {"not (", ")", 20000, 641}};
    for (size_t k = 0; k < sizeof deep / sizeof deep[0]; k++) {
        char *text = nested(deep[k].open, deep[k].n, "call>1", deep[k].close), want[128];
        snprintf(want, sizeof want, "column %d: nested deeper than 256 levels", deep[k].column);
        err[0] = 0;
        dbg_expr *e = dbg_expr_parse(text, err, sizeof err);
        if (e || strncmp(err, want, strlen(want)))
            fail_msg("%d x '%s': got '%s', want '%s...'", deep[k].n, deep[k].open, e ? "(parsed)" : err, want);
        dbg_expr_free(e);
        free(text);
    }
    char *ok = nested("(", 256, "call==2", ")");
    assert_true(holds(ok, NULL, NULL, 2));
    assert_false(holds(ok, NULL, NULL, 3));
    free(ok);
    char *nots = nested("not ", 256, "call==2", "");
    assert_true(holds(nots, NULL, NULL, 2)); /* an even number of nots */
    free(nots);
    /* 50,000 terms: eval loops along the chain */
    char *chain = nested("call>=1 and ", 50000, "call==2", "");
    assert_true(holds(chain, NULL, NULL, 2));
    assert_false(holds(chain, NULL, NULL, 3));
    free(chain);
    char *ors = nested("call==7 or ", 50000, "call==2", "");
    assert_true(holds(ors, NULL, NULL, 2));
    assert_false(holds(ors, NULL, NULL, 3));
    free(ors);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_nan_and_inf),
        cmocka_unit_test(test_calls_inputs_precedence),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_depth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
