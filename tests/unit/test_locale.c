/* tg in a host process whose locale writes numbers with a decimal comma
 * (setlocale(LC_ALL, "de_DE.UTF-8"), as a GUI program's setlocale(LC_ALL,
 * "") does in Germany): fused kernels still compile, a .tgf saved there
 * restores, exported JSON reads back, arrays print with '.'. Before, the
 * kernels' C source had "0x1,4p+1" (the compiler failed and the
 * interpreter ran), and the .tgf header had "0,125" (it did not load).
 *
 * The locale is built with localedef into a folder of its own (LOCPATH),
 * from the `locales` package's sources; without them the tests skip. */
#define _GNU_SOURCE
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "ops/composite.h"

static char dir[256];

static int make_locale(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "%s/tg-locale-test-%ld", P_tmpdir, (long)getpid());
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && localedef -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null 2>&1; "
             "test -d '%s/de_DE.UTF-8'",
             dir, dir, dir);
    if (system(cmd) != 0) return 0; /* the tests skip */
    setenv("LOCPATH", dir, 1);
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("TG_CACHE_DIR", cache, 1);
    setlocale(LC_ALL, "de_DE.UTF-8");
    return 0;
}

static int drop_locale(void **state) {
    (void)state;
    setlocale(LC_ALL, "C");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Skips unless the comma locale is in force: then the test can fail. */
static void need_comma(void) {
    char buf[16];
    snprintf(buf, sizeof buf, "%.1f", 2.5);
    if (strcmp(buf, "2,5") != 0) {
        print_message("no de_DE locale (localedef or the locales package missing): skipped\n");
        skip();
    }
}

/* d = (a * 2.5 + 0.125) * w, w shared = 0.25: the first two fuse into a
 * composite whose constants go into C source. */
static const char *GRAPH =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
    "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
    "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},\"shared\":{\"data\":0.25}}],\"nodes\":["
    "{\"op\":\"mul\",\"inputs\":[\"a\",{\"value\":2.5}],\"outputs\":[\"b\"]},"
    "{\"op\":\"add\",\"inputs\":[\"b\",{\"value\":0.125}],\"outputs\":[\"c\"]},"
    "{\"op\":\"exp\",\"inputs\":[\"c\"],\"outputs\":[\"e\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"e\",\"w\"],\"outputs\":[\"d\"]}],"
    "\"functions\":{\"main\":{\"inputs\":[\"a\"],\"outputs\":[\"d\"]}}}";

enum { N = 1000 };

static void check(tg_function *f, const tg_array *a, tg_ctx *ctx) {
    tg_array *out[1] = {0};
    tg_array *in[1] = {(tg_array *)a};
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    const double *x = tg_array_data(a), *d = tg_array_data(out[0]);
    for (int i = 0; i < N; i++)
        if (fabs(d[i] - exp(x[i] * 2.5 + 0.125) * 0.25) > 1e-15 * exp(x[i] * 2.5 + 0.125))
            fail_msg("d[%d] = %.17g, want %.17g", i, d[i], exp(x[i] * 2.5 + 0.125) * 0.25);
    tg_array_free(out[0]);
}

static void test_kernels_and_tgf(void **state) {
    (void)state;
    need_comma();
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(GRAPH);
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    int64_t n = N;
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    double *x = tg_array_data(a);
    for (int i = 0; i < N; i++) x[i] = (i % 37) * 0.0625 - 1.0;
    tg_kcache_stats s0 = tg_kcache_stats_get();
    check(f, a, ctx);
    tg_kcache_stats s1 = tg_kcache_stats_get();
    /* the kernel compiled (failures: the compiler rejected the source) */
    assert_int_equal(s1.failures - s0.failures, 0);
    assert_int_equal(s1.compiles - s0.compiles, 1);

    char path[300];
    snprintf(path, sizeof path, "%s/f.tgf", dir);
    tg_tgf_save_info info = {.source = g};
    assert_int_equal(tg_tgf_save(path, &f, 1, &info, ctx), TG_OK);
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("restore: %s", tg_ctx_message(ctx));
    check(tg_tgf_function(t, 0), a, ctx);
    tg_tgf_free(t);

    tg_array_free(a);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* The graph as JSON text: '.' decimals, and it loads again. */
static void test_json_text(void **state) {
    (void)state;
    need_comma();
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(GRAPH);
    char *s = tg_graph_to_string(g, ctx);
    assert_non_null(s);
    assert_non_null(strstr(s, "0.125"));
    assert_non_null(strstr(s, "2.5"));
    assert_null(strstr(s, "0,125"));
    tg_graph *g2 = tg_graph_load_string(s, strlen(s), NULL, "again", ctx);
    if (!g2) fail_msg("reload: %s", tg_ctx_message(ctx));
    tg_graph_free(g2);
    tg_string_free(s);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Printed arrays: NumPy's repr (array([ 1.5  ,  0.125, -2.   ])), '.'
 * for the point. */
static void test_print(void **state) {
    (void)state;
    need_comma();
    int64_t n = 3;
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    double *x = tg_array_data(a);
    x[0] = 1.5;
    x[1] = 0.125;
    x[2] = -2.0;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tg_array_print(f, a);
    fclose(f);
    assert_string_equal(buf, "float64 (3,)\n[ 1.5  ,  0.125, -2.   ]\n");
    free(buf);
    /* rounded at the 8 digits of NumPy's precision: another path */
    x[0] = 1.0 / 3.0;
    x[1] = 2.5;
    x[2] = 0.125;
    f = open_memstream(&buf, &len);
    tg_array_print(f, a);
    fclose(f);
    assert_string_equal(buf, "float64 (3,)\n[0.33333333, 2.5       , 0.125     ]\n");
    free(buf);
    tg_array_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_and_tgf),
        cmocka_unit_test(test_json_text),
        cmocka_unit_test(test_print),
    };
    return cmocka_run_group_tests(tests, make_locale, drop_locale);
}
