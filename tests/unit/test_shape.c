/* The shape family beyond tests/data/ops/shape_*.json: the load-time
 * errors (a file that fails to load has no cases to run), and that views
 * share their input's buffer while copies do not, across repeated calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "testutil.h"
#include "tensor/tensor.h"

static char *graph_json(const char *vars, const char *nodes,
                        const char *funcs) {
    char buf[8192];
    snprintf(buf, sizeof buf,
             "{'format':'tg-graph','version':1,'variables':[%s],"
             "'nodes':[%s]%s%s}",
             vars, nodes, funcs ? ",'functions':" : "", funcs ? funcs : "");
    return tu_dq(buf); /* JSON written with ' for " (readable in C) */
}

typedef struct load_case {
    const char *vars, *node, *want;
} load_case;

#define X23 "{'id':'x','type':{'dtype':'float32','shape':[2,3]}}"
#define XU2 "{'id':'x','type':{'dtype':'float32','shape':[null,null]}}"
#define X3 "{'id':'x','type':{'dtype':'int32','shape':[3]}}"
#define IDX(attrs, extra)                                                    \
    "{'op':'subtensor','inputs':['x'" extra "],'outputs':['y'],"             \
    "'attrs':{'index':" attrs "}}"

static const load_case load_cases[] = {
    /* shape_i */
    {X23, "{'op':'shape_i','inputs':['x'],'outputs':['y'],'attrs':{'i':2}}",
     "axis 2 is out of range"},
    {X23, "{'op':'shape_i','inputs':['x'],'outputs':['y'],'attrs':{'i':-3}}",
     "axis -3 is out of range"},
    {X23, "{'op':'shape_i','inputs':['x'],'outputs':['y']}", "attrs.i"},
    /* reshape */
    {X23 ",{'id':'s','type':{'dtype':'float32','shape':[2]}}",
     "{'op':'reshape','inputs':['x','s'],'outputs':['y']}",
     "expected an integer vector"},
    {X23 ",{'id':'s','type':{'dtype':'int64','shape':[null]}}",
     "{'op':'reshape','inputs':['x','s'],'outputs':['y']}",
     "must be known when the graph is loaded"},
    {X23, "{'op':'reshape','inputs':['x',{'value':{'dtype':'int64','shape':[2],"
          "'data':[4,2]}}],'outputs':['y']}",
     "cannot reshape array of size 6 into shape (4,2)"},
    {XU2, "{'op':'reshape','inputs':['x',{'value':{'dtype':'int64','shape':[2],"
          "'data':[-1,-1]}}],'outputs':['y']}",
     "can only specify one unknown dimension"},
    {X23, "{'op':'reshape','inputs':['x',{'value':{'dtype':'int64','shape':[2],"
          "'data':[-1,4]}}],'outputs':['y']}",
     "cannot reshape array of size 6 into shape (-1,4)"},
    /* flatten */
    {X23, "{'op':'flatten','inputs':['x'],'outputs':['y'],'attrs':{'ndim':0}}",
     "attrs.ndim"},
    {X23, "{'op':'flatten','inputs':['x'],'outputs':['y'],'attrs':{'ndim':3}}",
     "attrs.ndim"},
    /* dimshuffle */
    {X23, "{'op':'dimshuffle','inputs':['x'],'outputs':['y']}",
     "attrs.order: required"},
    {X23, "{'op':'dimshuffle','inputs':['x'],'outputs':['y'],"
          "'attrs':{'order':[0,0]}}",
     "repeated"},
    {X23, "{'op':'dimshuffle','inputs':['x'],'outputs':['y'],"
          "'attrs':{'order':[0,2]}}",
     "axis 2 is out of range"},
    {X23, "{'op':'dimshuffle','inputs':['x'],'outputs':['y'],"
          "'attrs':{'order':[1]}}",
     "drops axis 0"},
    {X23, "{'op':'dimshuffle','inputs':['x'],'outputs':['y'],"
          "'attrs':{'order':['y',0,1]}}",
     "attrs.order[0]"},
    {X23, "{'op':'dimshuffle','inputs':['x'],'outputs':['y'],"
          "'attrs':{'order':[-1,0]}}",
     "attrs.order[0]"},
    /* transpose */
    {X23, "{'op':'transpose','inputs':['x'],'outputs':['y'],"
          "'attrs':{'axes':[0]}}",
     "1 axes given for an input of 2 dimensions"},
    {X23, "{'op':'transpose','inputs':['x'],'outputs':['y'],"
          "'attrs':{'axes':[1,-1]}}",
     "repeated"},
    {X23, "{'op':'transpose','inputs':['x'],'outputs':['y'],"
          "'attrs':{'axes':[0,2]}}",
     "out of range"},
    {X23, "{'op':'transpose','inputs':['x'],'outputs':['y'],"
          "'attrs':{'axes':'a'}}",
     "attrs.axes"},
    /* integers of 2^63 and more (json-c clamps them to 2^63 - 1) are
     * named as written */
    {X23, "{'op':'dimshuffle','inputs':['x'],'outputs':['y'],"
          "'attrs':{'order':[1,18446744073709551614]}}",
     "attrs.order[1]: axis 18446744073709551614 is out of range"},
    {X23, "{'op':'transpose','inputs':['x'],'outputs':['y'],"
          "'attrs':{'axes':[0,9223372036854775808]}}",
     "attrs.axes[1]: axis 9223372036854775808 is out of range"},
    {X23, "{'op':'sum','inputs':['x'],'outputs':['y'],'attrs':{'axis':[0,18446744073709551615]}}",
     "attrs.axis[1]: axis 18446744073709551615 is out of range"},
    {X23, "{'op':'sum','inputs':['x'],'outputs':['y'],'attrs':{'axis':9223372036854775808}}",
     "attrs.axis: axis 9223372036854775808 is out of range"},
    {X23, "{'op':'flatten','inputs':['x'],'outputs':['y'],'attrs':{'ndim':18446744073709551615}}",
     "attrs.ndim: 18446744073709551615 is out of range (at most 2^63 - 1)"},
    {X23, "{'op':'var','inputs':['x'],'outputs':['y'],'attrs':{'ddof':9223372036854775808}}",
     "attrs.ddof: 9223372036854775808 is out of range (at most 2^63 - 1)"},
    {X23, "{'op':'softmax','inputs':['x'],'outputs':['y'],'attrs':{'axis':9223372036854775807}}",
     "attrs.axis: axis 9223372036854775807 is out of range"},
    /* squeeze, expand_dims */
    {X23, "{'op':'squeeze','inputs':['x'],'outputs':['y'],'attrs':{'axis':1}}",
     "cannot select an axis to squeeze out"},
    {X23, "{'op':'squeeze','inputs':['x'],'outputs':['y'],'attrs':{'axis':5}}",
     "attrs.axis"},
    {X3, "{'op':'expand_dims','inputs':['x'],'outputs':['y']}", "attrs.axis"},
    {X3, "{'op':'expand_dims','inputs':['x'],'outputs':['y'],"
         "'attrs':{'axis':2}}",
     "attrs.axis"},
    /* subtensor */
    {X3, IDX("[{'step':0}]", ""), "slice step cannot be zero"},
    {X3, IDX("[3]", ""), "index 3 is out of bounds for axis 0 with size 3"},
    {X3, IDX("[18446744073709551615]", ""), "attrs.index[0]: index 18446744073709551615 is out of bounds"},
    {X3, IDX("[-4]", ""), "index -4 is out of bounds for axis 0 with size 3"},
    {X3, IDX("[0,1]", ""), "too many indices"},
    {X3, IDX("['$1']", ",{'value':1}"), "refers to 2 extra input(s)"},
    {X3, IDX("[0]", ",{'value':1}"), "refers to 0 extra input(s)"},
    {X3, IDX("[{'start':'$1'}]", ",{'value':1},{'value':2}"),
     "not used by attrs.index"},
    {X3, IDX("['$0']", ",{'value':1.5}"), "expected an integer scalar"},
    {X3, IDX("['$0']", ",{'value':true}"), "expected an integer scalar"},
    {X3, IDX("['$0']", ",{'value':{'dtype':'int64','shape':[1],'data':[0]}}"),
     "expected an integer scalar"},
    {X3, IDX("[{'begin':1}]", ""), "unknown key"},
    {X3, IDX("[1.5]", ""), "attrs.index[0]"},
    {X3, IDX("['$x']", ""), "attrs.index[0]"},
    {X3, IDX("[{'start':'0'}]", ""), "attrs.index[0].start"},
    {X3, "{'op':'subtensor','inputs':['x'],'outputs':['y']}",
     "attrs.index: required"},
    {X3, IDX("['$0']", ",{'value':{'dtype':'int8','shape':[],'data':7}}"),
     "index 7 is out of bounds for axis 0 with size 3"},
    {X3, IDX("[{'step':'$0'}]", ",{'value':{'dtype':'int8','shape':[],'data':0}}"),
     "slice step cannot be zero"},
    /* set_subtensor, inc_subtensor */
    {X3 ",{'id':'v','type':{'dtype':'float64','shape':[]}}",
     "{'op':'set_subtensor','inputs':['x','v'],'outputs':['y'],"
     "'attrs':{'index':[0]}}",
     "cannot cast float64 to int32"},
    {"{'id':'x','type':{'dtype':'uint8','shape':[3]}},"
     "{'id':'v','type':{'dtype':'int64','shape':[]}}",
     "{'op':'inc_subtensor','inputs':['x','v'],'outputs':['y'],"
     "'attrs':{'index':[0]}}",
     "cannot cast int64 to uint8"},
    {X3 ",{'id':'v','type':{'dtype':'int32','shape':[3]}}",
     "{'op':'set_subtensor','inputs':['x','v'],'outputs':['y'],"
     "'attrs':{'index':[{'stop':2}]}}",
     "does not broadcast"},
    {X23 ",{'id':'v','type':{'dtype':'float32','shape':[2,3]}}",
     "{'op':'inc_subtensor','inputs':['x','v'],'outputs':['y'],"
     "'attrs':{'index':[0]}}",
     "does not broadcast"},
    {X23 ",{'id':'v','type':{'dtype':'float32','shape':[]}}",
     "{'op':'set_subtensor','inputs':['x','v',{'value':1}],'outputs':['y'],"
     "'attrs':{'index':[{'step':2}]}}",
     "refers to 0 extra input(s)"},
};

static void test_load_errors(void **state) {
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof load_cases / sizeof load_cases[0]; i++) {
        const load_case *c = &load_cases[i];
        char *json = graph_json(c->vars, c->node, NULL);
        char msg[TG_CTX_MSG_MAX];
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "test", ctx);
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        if (g) {
            printf("case %zu: loaded, expected an error containing '%s'\n", i,
                   c->want);
            failures++;
            tg_graph_free(g);
        } else if (!strstr(msg, c->want)) {
            printf("case %zu: expected '%s' in: %s\n", i, c->want, msg);
            failures++;
        }
        tg_ctx_free(ctx);
        free(json);
    }
    if (failures) fail_msg("%d load case(s) failed", failures);
}

/* Views point into the input's buffer; a reshape that needs a copy, and
 * set_subtensor, do not. Each function is called twice, so that the
 * second call goes through the reuse of the previous output. */
static const char *views_vars =
    "{'id':'x','type':{'dtype':'float64','shape':[3,4]}}";
static const char *views_nodes =
    "{'op':'transpose','inputs':['x'],'outputs':['t']},"
    "{'op':'subtensor','inputs':['x'],'outputs':['s'],"
    " 'attrs':{'index':[{'start':1},{'step':2}]}},"
    "{'op':'reshape','inputs':['x',{'value':{'dtype':'int64','shape':[2],"
    " 'data':[2,6]}}],'outputs':['r']},"
    "{'op':'reshape','inputs':['t',{'value':{'dtype':'int64','shape':[1],"
    " 'data':[12]}}],'outputs':['rt']},"
    "{'op':'dimshuffle','inputs':['s'],'outputs':['d'],"
    " 'attrs':{'order':[1,'x',0]}},"
    "{'op':'set_subtensor','inputs':['x',{'value':0}],'outputs':['z'],"
    " 'attrs':{'index':[0]}}";
static const char *views_funcs =
    "{'main':{'inputs':['x'],'outputs':['t','s','r','rt','d','z']}}";

static bool inside(const tg_array *v, const tg_array *a) {
    const char *p = tg_array_data(v), *b = tg_array_data(a);
    return p >= b && p < b + tg_array_size(a) * 8;
}

static void test_views_share(void **state) {
    (void)state;
    char *json = graph_json(views_vars, views_nodes, views_funcs);
    tg_graph *g = tu_load(json);
    free(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, NULL, ctx),
                                         NULL, ctx);
    assert_non_null(f);
    for (int call = 0; call < 2; call++) {
        int64_t shape[2] = {3, 4};
        double data[12];
        for (int i = 0; i < 12; i++) data[i] = call * 100 + i;
        tg_array *x = tg_array_new_from(TG_FLOAT64, 2, shape, data);
        tg_array *out[6] = {0};
        assert_int_equal(tg_function_call(f, &x, out, ctx), 0);
        assert_true(inside(out[0], x));  /* transpose */
        assert_true(inside(out[1], x));  /* subtensor */
        assert_true(inside(out[2], x));  /* reshape of contiguous data */
        assert_false(inside(out[3], x)); /* reshape of a transpose: a copy */
        assert_true(inside(out[4], x));  /* dimshuffle of a subtensor */
        assert_false(inside(out[5], x)); /* set_subtensor copies */
        /* s = x[1:, ::2] = [[4, 6], [8, 10]] (+100 on the second call) */
        assert_true(tg_array_get_flat(out[1], 0) == call * 100 + 4);
        assert_true(tg_array_get_flat(out[1], 3) == call * 100 + 10);
        /* rt = x.T.ravel(): 0, 4, 8, 1, ... */
        assert_true(tg_array_get_flat(out[3], 1) == call * 100 + 4);
        assert_true(tg_array_get_flat(out[3], 3) == call * 100 + 1);
        /* d[j, 0, i] = s[i, j]: flat order d = s.T = 4, 8, 6, 10 */
        assert_true(tg_array_get_flat(out[4], 1) == call * 100 + 8);
        /* z: row 0 zeroed, x untouched */
        assert_true(tg_array_get_flat(out[5], 3) == 0);
        assert_true(tg_array_get_flat(out[5], 4) == call * 100 + 4);
        assert_true(tg_array_get_flat(x, 0) == call * 100);
        for (int i = 0; i < 6; i++) tg_array_free(out[i]);
        tg_array_free(x);
    }
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* reshape(y, shape(z)), as gradients write it, has z's static lengths
 * (where they are known): the optimizer's shape tests can then see that
 * such a gradient spans the result (mul_quotient_cancel). A reshape to a
 * run-time shape of another origin knows none. */
static void test_reshape_to_shape_of(void **state) {
    (void)state;
    char *json = graph_json("{'id':'y','type':{'dtype':'float64','shape':[6]}},"
                            "{'id':'z','type':{'dtype':'float32','shape':[2,null,3]}},"
                            "{'id':'w','type':{'dtype':'int64','shape':[3]}}",
                            "{'op':'shape','inputs':['z'],'outputs':['s']},"
                            "{'op':'reshape','inputs':['y','s'],'outputs':['r']},"
                            "{'op':'reshape','inputs':['y','w'],'outputs':['q']}",
                            "{'main':{'inputs':['y','z','w'],'outputs':['r','q']}}");
    tg_graph *g = tu_load(json);
    free(json);
    const tg_var *r = tg_graph_find(g, "r"), *q = tg_graph_find(g, "q");
    assert_non_null(r);
    assert_non_null(q);
    assert_int_equal(r->type.ndim, 3);
    assert_int_equal(r->type.shape[0], 2);
    assert_int_equal(r->type.shape[1], -1);
    assert_int_equal(r->type.shape[2], 3);
    assert_int_equal(r->type.dtype, TG_FLOAT64);
    for (int d = 0; d < 3; d++) assert_int_equal(q->type.shape[d], -1);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_views_share),
        cmocka_unit_test(test_reshape_to_shape_of),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
