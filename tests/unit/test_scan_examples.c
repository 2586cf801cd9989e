/* Every example of Theano's scan documentation (examples/scan/, one graph file each)
 * run on the inputs tests/data/gen/scan.py wrote, each call's outputs
 * compared with the values NumPy loops computed there (the ones the
 * documentation prints, where it prints some). Updates apply between
 * calls, so the Gibbs chain's second call continues the random stream and
 * the shared counter goes on counting. Each example also runs with the
 * optimizer off, and after the graph is written out and read back (the
 * bodies survive the round trip). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct {
    const char *name, *func;
    int calls;
    const char *inputs[12];
    const char *outputs[4];
} example;

static const example EXAMPLES[] = {
    {"power", "power", 1, {"A", "k"}, {"final_result"}},
    {"polynomial", "calculate_polynomial", 1, {"coefficients", "x"}, {"polynomial"}},
    {"triangular", "triangular_sequence", 1, {"up_to"}, {"scan_result"}},
    {"set_value", "assign_values_at_positions", 1, {"location", "values", "output_model"}, {"result"}},
    {"gibbs", "gibbs10", 2, {"sample"}, {"last_sample"}},
    {"shared_updates", "f", 2, {NULL}, {"b", "c"}},
    {"rnn", "rnn", 1, {"u", "x0", "y0", "W", "W_in_1", "W_in_2", "W_feedback", "W_out"}, {"x_vals", "y_vals"}},
    {"rnn_lookahead", "rnn_lookahead", 1,
     {"u", "x0", "y0", "W", "W_in_1", "W_in_2", "W_feedback", "W_out", "W_in_3"}, {"x_vals", "y_vals"}},
    {"power_of_2", "f", 1, {"max_value"}, {"values"}},
    {"reduce_sum", "sum", 1, {"xs"}, {"total", "partial_sums"}},
    {"horner_foldr", "horner", 1, {"coefficients", "x"}, {"value"}},
};

static tg_array *load_npy(const char *fmt, const char *a, const char *b, const char *c) {
    char path[512];
    snprintf(path, sizeof path, fmt, TG_TEST_DATA, a, b, c);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *r = tg_npy_load(path, ctx);
    if (!r) fail_msg("%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return r;
}

static void run_example(const example *e, tg_graph *g, const char *preset) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = preset};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, e->func, ctx), &o, ctx);
    if (!f) fail_msg("%s: %s", e->name, tg_ctx_message(ctx));
    tg_array *in[12] = {0}, *out[4] = {0};
    int nin = 0, nout = 0;
    while (nin < 12 && e->inputs[nin]) {
        assert_string_equal(tg_function_input_id(f, nin), e->inputs[nin]);
        in[nin] = load_npy("%s/scan/%s.in.%s.npy%s", e->name, e->inputs[nin], "");
        nin++;
    }
    while (nout < 4 && e->outputs[nout]) nout++;
    for (int call = 0; call < e->calls; call++) {
        if (tg_function_call(f, in, out, ctx)) fail_msg("%s: %s", e->name, tg_ctx_message(ctx));
        for (int k = 0; k < nout; k++) {
            char cs[8];
            snprintf(cs, sizeof cs, "%d", call);
            tg_array *want = load_npy("%s/scan/%s.%s.%s.npy", e->name, cs, e->outputs[k]);
            char msg[4096];
            if (!tu_arrays_close(out[k], want, 1e-12, 1e-12, msg, sizeof msg))
                fail_msg("%s (%s), call %d, output %s: %s", e->name, preset, call, e->outputs[k], msg);
            tg_array_free(want);
            tg_array_free(out[k]);
        }
    }
    for (int i = 0; i < nin; i++) tg_array_free(in[i]);
    tg_function_free(f);
    tg_ctx_free(ctx);
}

static void test_examples(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof EXAMPLES / sizeof EXAMPLES[0]; i++) {
        const example *e = &EXAMPLES[i];
        char path[512];
        snprintf(path, sizeof path, "%s/examples/scan/%s.json", TG_SOURCE_DIR, e->name);
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tg_graph_load(path, ctx);
        if (!g) fail_msg("%s", tg_ctx_message(ctx));
        /* Written out first (shared state is the graph's: each run below
         * starts from a fresh copy). */
        char *text = tg_graph_to_string(g, ctx);
        run_example(e, g, "fast_run");
        tg_graph_free(g);
        g = tg_graph_load(path, ctx);
        run_example(e, g, "none");
        assert_non_null(text);
        char dir[512];
        snprintf(dir, sizeof dir, "%s/examples/scan", TG_SOURCE_DIR);
        tg_graph *g2 = tg_graph_load_string(text, strlen(text), dir, "saved", ctx);
        if (!g2) fail_msg("%s reloaded: %s", e->name, tg_ctx_message(ctx));
        run_example(e, g2, "fast_run");
        tg_string_free(text);
        tg_graph_free(g2);
        tg_graph_free(g);
        tg_ctx_free(ctx);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_examples)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
