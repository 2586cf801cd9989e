/* Debugging ops: print's line on standard error and its pass-through,
 * assert's run-time error (naming the message and the node), breakpoint's
 * log line when its condition holds (and silence otherwise), and the load
 * errors of their attributes. Standard error is captured by pointing file
 * descriptor 2 at a temporary file around each call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tensor/tensor.h"

typedef struct capture {
    int saved;
    FILE *tmp;
} capture;

static void capture_begin(capture *c) {
    fflush(stderr);
    c->tmp = tmpfile();
    assert_non_null(c->tmp);
    c->saved = dup(2);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->tmp), 2) >= 0);
}

/* Restore stderr; returns what was written (malloc'd). */
static char *capture_end(capture *c) {
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    long n = ftell(c->tmp);
    if (n < 0) n = 0;
    char *s = calloc(1, (size_t)n + 1);
    rewind(c->tmp);
    size_t got = fread(s, 1, (size_t)n, c->tmp);
    s[got] = 0;
    fclose(c->tmp);
    return s;
}

/* Call the graph's function with inputs; returns the status, the
 * outputs, the captured stderr and the error message. */
static int run(tg_graph *g, tg_array *const *in, tg_array **out, char **err, char *msg,
               size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("compile: %s", tg_ctx_message(ctx));
    capture c;
    capture_begin(&c);
    int rc = tg_function_call(f, in, out, ctx);
    *err = capture_end(&c);
    if (msg) snprintf(msg, size, "%s", tg_ctx_message(ctx));
    tg_function_free(f);
    tg_ctx_free(ctx);
    return rc;
}

static void test_print(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq(
        "{'format':'tg-graph','version':1,"
        "'variables':[{'id':'x','type':{'dtype':'float64','shape':[2,3]}}],"
        "'nodes':[{'op':'print','inputs':['x'],'outputs':['y'],"
        "'attrs':{'message':'hello'}}]}");
    int64_t shp[2] = {2, 3};
    double d[6] = {1, 2, 3, 4, 5, 6.5};
    tg_array *x = tu_f64(2, shp, d), *y = NULL;
    char *err;
    assert_int_equal(run(g, &x, &y, &err, NULL, 0), 0);
    assert_string_equal(err, "hello: shape=(2, 3) min=1 max=6.5 mean=3.58333\n");
    tu_assert_close(y, x, 0, 0);
    /* a reference to the input, not a copy */
    assert_ptr_equal(tg_array_data(y), tg_array_data(x));
    free(err);
    tg_array_free(y);
    tg_array_free(x);
    tg_graph_free(g);

    /* show a subset; no message: the input's name; a transposed int input */
    g = tu_load_sq("{'format':'tg-graph','version':1,"
             "'variables':[{'id':'v','name':'counts','type':{'dtype':'int32','shape':[null]}}],"
             "'nodes':[{'op':'print','inputs':['v'],'outputs':['w'],"
             "'attrs':{'show':['max','shape','min']}}]}");
    int32_t iv[3] = {-4, 7, 2};
    int64_t n3 = 3;
    x = tg_array_new_from(TG_INT32, 1, &n3, iv);
    assert_int_equal(run(g, &x, &y, &err, NULL, 0), 0);
    assert_string_equal(err, "counts: shape=(3,) min=-4 max=7\n");
    assert_true(tg_array_equal(x, y));
    free(err);
    tg_array_free(y);
    tg_array_free(x);
    /* empty */
    int64_t n0 = 0;
    x = tg_array_new(TG_INT32, 1, &n0);
    assert_int_equal(run(g, &x, &y, &err, NULL, 0), 0);
    assert_string_equal(err, "counts: shape=(0,) min=n/a max=n/a\n");
    free(err);
    tg_array_free(y);
    tg_array_free(x);
    tg_graph_free(g);

    /* a non-contiguous input: print of a transpose; NaN min and max */
    g = tu_load_sq("{'format':'tg-graph','version':1,"
             "'variables':[{'id':'x','type':{'dtype':'float32','shape':[2,2]}}],"
             "'nodes':[{'op':'transpose','inputs':['x'],'outputs':['t']},"
             "{'op':'print','inputs':['t'],'outputs':['y'],'attrs':{'message':'T',"
             "'show':['mean','min','max']}}]}");
    int64_t s22[2] = {2, 2};
    float fv[4] = {1, 2, 3, 10};
    x = tg_array_new_from(TG_FLOAT32, 2, s22, fv);
    assert_int_equal(run(g, &x, &y, &err, NULL, 0), 0);
    assert_string_equal(err, "T: min=1 max=10 mean=4\n");
    assert_true(tg_array_get_flat(y, 1) == 3); /* transposed */
    free(err);
    tg_array_free(y);
    tg_array_free(x);
    fv[2] = NAN;
    x = tg_array_new_from(TG_FLOAT32, 2, s22, fv);
    assert_int_equal(run(g, &x, &y, &err, NULL, 0), 0);
    assert_string_equal(err, "T: min=nan max=nan mean=nan\n");
    free(err);
    tg_array_free(y);
    tg_array_free(x);
    tg_graph_free(g);
}

static void test_assert(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq(
        "{'format':'tg-graph','version':1,"
        "'variables':[{'id':'x','type':{'dtype':'float64','shape':[3]}},"
        "{'id':'ok','type':{'dtype':'bool','shape':[]}}],"
        "'nodes':[{'op':'gt','inputs':['x',{'value':0}],'outputs':['pos']},"
        "{'op':'assert','inputs':['x','pos','ok'],'outputs':['y'],'name':'check',"
        "'attrs':{'message':'x must be positive'}}]}");
    int64_t n3 = 3;
    double good[3] = {1, 2, 3}, bad[3] = {1, -2, 3};
    tg_array *x = tu_f64(1, &n3, good), *ok = tg_array_new_scalar(TG_BOOL, 1), *y = NULL;
    tg_array *in[2] = {x, ok};
    char *err, msg[2048];
    assert_int_equal(run(g, in, &y, &err, msg, sizeof msg), 0);
    assert_string_equal(err, "");
    assert_ptr_equal(tg_array_data(y), tg_array_data(x));
    free(err);
    tg_array_free(y);
    y = NULL;
    /* an array condition with one false element */
    tg_array *xb = tu_f64(1, &n3, bad);
    in[0] = xb;
    assert_int_not_equal(run(g, in, &y, &err, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "assertion failed: x must be positive"));
    assert_non_null(strstr(msg, "check"));
    assert_non_null(strstr(msg, "assert"));
    free(err);
    /* a false scalar condition */
    tg_array *no = tg_array_new_scalar(TG_BOOL, 0);
    in[0] = x;
    in[1] = no;
    assert_int_not_equal(run(g, in, &y, &err, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "assertion failed: x must be positive"));
    free(err);
    tg_array_free(no);
    tg_array_free(xb);
    tg_array_free(ok);
    tg_array_free(x);
    tg_graph_free(g);

    /* no message: the condition is named; a float condition (0 is false)
     * and a weak inline one */
    g = tu_load_sq("{'format':'tg-graph','version':1,"
             "'variables':[{'id':'x','type':{'dtype':'int8','shape':[2]}},"
             "{'id':'c','type':{'dtype':'float32','shape':[2]}}],"
             "'nodes':[{'op':'assert','inputs':['x',{'value':true},'c'],'outputs':['y']}]}");
    int64_t n2 = 2;
    int8_t xv[2] = {1, 2};
    float cv[2] = {0.5f, 0.0f};
    x = tg_array_new_from(TG_INT8, 1, &n2, xv);
    tg_array *c = tg_array_new_from(TG_FLOAT32, 1, &n2, cv);
    in[0] = x;
    in[1] = c;
    assert_int_not_equal(run(g, in, &y, &err, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "assertion failed: inputs[2] 'c' is false"));
    free(err);
    tg_array_free(c);
    cv[1] = NAN; /* NaN is true */
    c = tg_array_new_from(TG_FLOAT32, 1, &n2, cv);
    in[1] = c;
    assert_int_equal(run(g, in, &y, &err, msg, sizeof msg), 0);
    assert_true(tg_array_equal(y, x));
    free(err);
    tg_array_free(y);
    tg_array_free(c);
    tg_array_free(x);
    tg_graph_free(g);
}

static void test_breakpoint(void **state) {
    (void)state;
    tg_graph *g = tu_load_sq(
        "{'format':'tg-graph','version':1,"
        "'variables':[{'id':'c','type':{'dtype':'bool','shape':[]}},"
        "{'id':'a','type':{'dtype':'float64','shape':[2]}},"
        "{'id':'b','type':{'dtype':'int64','shape':[]}}],"
        "'nodes':[{'op':'breakpoint','inputs':['c','a','b'],'outputs':['a2','b2']}],"
        "'functions':{'main':{'inputs':['c','a','b'],'outputs':['a2','b2']}}}");
    int64_t n2 = 2;
    double av[2] = {1.5, -2};
    tg_array *a = tu_f64(1, &n2, av), *b = tg_array_new_scalar(TG_INT64, 5);
    tg_array *t = tg_array_new_scalar(TG_BOOL, 1), *f = tg_array_new_scalar(TG_BOOL, 0);
    tg_array *in[3] = {t, a, b}, *out[2] = {NULL, NULL};
    char *err;
    assert_int_equal(run(g, in, out, &err, NULL, 0), 0);
    assert_string_equal(err,
                        "breakpoint a2 hit: a shape=(2,) min=-2 max=1.5 b shape=() min=5 max=5\n");
    assert_ptr_equal(tg_array_data(out[0]), tg_array_data(a));
    assert_ptr_equal(tg_array_data(out[1]), tg_array_data(b));
    free(err);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    in[0] = f;
    assert_int_equal(run(g, in, out, &err, NULL, 0), 0);
    assert_string_equal(err, "");
    assert_true(tg_array_equal(out[0], a));
    assert_true(tg_array_equal(out[1], b));
    free(err);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(a);
    tg_array_free(b);
    tg_array_free(t);
    tg_array_free(f);
    tg_graph_free(g);
}

static void test_load_errors(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"{'op':'breakpoint','inputs':['c','x'],'outputs':['y','z']}",
         "one output per monitored input"},
        {"{'op':'breakpoint','inputs':['x','x'],'outputs':['y']}", "condition must be a scalar"},
        {"{'op':'print','inputs':['x'],'outputs':['y'],'attrs':{'show':['median']}}",
         "attrs.show[0]"},
        {"{'op':'print','inputs':['x'],'outputs':['y'],'attrs':{'message':3}}",
         "attrs.message"},
        {"{'op':'assert','inputs':['x'],'outputs':['y']}", "at least 2 inputs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[1024], msg[2048];
        snprintf(buf, sizeof buf,
                 "{'format':'tg-graph','version':1,"
                 "'variables':[{'id':'x','type':{'dtype':'float64','shape':[2]}},"
                 "{'id':'c','type':{'dtype':'bool','shape':[]}}],'nodes':[%s]}",
                 cases[i][0]);
        char *j = tu_dq(buf);
        tu_load_fail(j, msg, sizeof msg);
        free(j);
        if (!strstr(msg, cases[i][1])) fail_msg("case %zu: %s", i, msg);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_assert),
        cmocka_unit_test(test_breakpoint),
        cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
