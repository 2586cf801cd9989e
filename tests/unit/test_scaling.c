/* tg's work grows linearly with the graph, on every shape of
 * bench/shapes.h: each shape is loaded, compiled (fast_run), saved to a
 * .tgf and restored, with S and with 4 S steps, and what each of the four
 * does is counted, not timed, so that the test means the same on any
 * machine: the library's allocations (calls and bytes asked for, through
 * the allocator hook, and the most held at once) and, for the compile,
 * the rewrites tried and applied and the nodes left. Each count of 4 S
 * steps must stay under 5 times that of S (4 times plus what does not
 * grow with the graph); a rule or a pass that revisits what came before,
 * as those docs/optimizer.md lists did, gives 16. Then, at a few steps,
 * the optimized function must compute what the graph as written
 * computes (preset none), and the restored one exactly what it computes.
 *
 * Composites run in the block interpreter here (TG_COMPOSITE=interp):
 * compiling their C is the C compiler's time, and is cached. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "../../bench/shapes.h"

typedef struct counts {
    tu_alloc_count load, compile, save, restore;
    double tried, applied, nodes;
} counts;

enum { NPHASES = 4 };
static const char *const PHASE[NPHASES] = {"load", "compile", "save", "restore"};

/* A .tgf path of its own in the temporary folder. */
static char *tgf_path(void) {
    const char *dir = getenv("TMPDIR");
    char *p = malloc(4096);
    assert_non_null(p);
    snprintf(p, 4096, "%s/tg-scaling-%ld.tgf", dir && *dir ? dir : "/tmp", (long)getpid());
    return p;
}

static tg_graph *load_shape(const shape_def *sh, int steps) {
    tg_str s = {0};
    sh->gen(&s, steps);
    assert_false(s.oom);
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(s.s, s.len, NULL, sh->name, ctx);
    if (!g) fail_msg("%s, %d steps: %s", sh->name, steps, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    tg_str_free(&s);
    return g;
}

static tg_function *compile(tg_graph *g, const char *preset, const char *what) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = preset};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) fail_msg("%s (%s): %s", what, preset, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

/* Load, compile, save and restore `steps` steps of sh, counting. */
static counts measure(const shape_def *sh, int steps) {
    counts c = {0};
    tg_str s = {0};
    sh->gen(&s, steps);
    assert_false(s.oom);
    tg_ctx *ctx = tg_ctx_new();
    tu_count_begin();
    tg_graph *g = tg_graph_load_string(s.s, s.len, NULL, sh->name, ctx);
    c.load = tu_count_end();
    if (!g) fail_msg("%s, %d steps: %s", sh->name, steps, tg_ctx_message(ctx));
    tg_str_free(&s);
    tu_count_begin();
    tg_function *f = compile(g, "fast_run", sh->name);
    c.compile = tu_count_end();
    c.nodes = tg_function_node_count(f);
    for (int i = 0; i < tg_function_rewrite_stats_count(f); i++) {
        tg_rewrite_stats rs;
        assert_int_equal(tg_function_rewrite_stats_get(f, i, &rs), 0);
        c.tried += (double)rs.tried;
        c.applied += (double)rs.applied;
    }
    char *path = tgf_path();
    tg_tgf_save_info info = {.source = g};
    tu_count_begin();
    int rc = tg_tgf_save(path, &f, 1, &info, ctx);
    c.save = tu_count_end();
    if (rc) fail_msg("%s, %d steps, save: %s", sh->name, steps, tg_ctx_message(ctx));
    tu_count_begin();
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    c.restore = tu_count_end();
    if (!t) fail_msg("%s, %d steps, restore: %s", sh->name, steps, tg_ctx_message(ctx));
    assert_int_equal(tg_function_node_count(tg_tgf_function(t, 0)), (int)c.nodes);
    tg_tgf_free(t);
    unlink(path);
    free(path);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return c;
}

/* 4x the steps: at most 5x the work, and a little for counts near 0. */
static bool linear(double small, double big) { return big <= 5.0 * small + 16.0; }

static void check_growth(const char *shape, const char *what, double small, double big) {
    if (!linear(small, big))
        fail_msg("%s: %s grew from %.0f to %.0f (%.1fx) for 4x the steps", shape, what, small, big,
                 small > 0 ? big / small : 0.0);
}

/* Inputs for f: every element a value in (0.5, 1.5) from a fixed
 * sequence (logs, divisions and softmax stay finite). */
static void make_inputs(const tg_function *f, tg_array **in) {
    unsigned state = 12345;
    for (int i = 0; i < tg_function_input_count(f); i++) {
        int nd = tg_function_input_ndim(f, i);
        const int64_t *shape = tg_function_input_shape(f, i);
        int64_t n = 1;
        for (int d = 0; d < nd; d++) n *= shape[d];
        double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
        for (int64_t k = 0; k < n; k++) {
            state = state * 1103515245u + 12345u;
            v[k] = 0.5 + (double)(state >> 8 & 0xffff) / 65536.0;
        }
        in[i] = tu_f64(nd, shape, v);
        free(v);
    }
}

/* The optimized function against the graph as written. */
static void check_values(const shape_def *sh, int steps) {
    tg_graph *g = load_shape(sh, steps);
    tg_function *fr = compile(g, "fast_run", sh->name), *fn = compile(g, "none", sh->name);
    int nin = tg_function_input_count(fr), nout = tg_function_output_count(fr);
    tg_array **in = calloc((size_t)nin + 1, sizeof *in), **got = calloc((size_t)nout + 1, sizeof *got),
             **want = calloc((size_t)nout + 1, sizeof *want);
    assert_true(in && got && want);
    make_inputs(fr, in);
    tg_ctx *ctx = tg_ctx_new();
    if (tg_function_call(fr, in, got, ctx)) fail_msg("%s fast_run: %s", sh->name, tg_ctx_message(ctx));
    if (tg_function_call(fn, in, want, ctx)) fail_msg("%s none: %s", sh->name, tg_ctx_message(ctx));
    for (int i = 0; i < nout; i++) {
        char msg[4096];
        if (!tu_arrays_close(got[i], want[i], 1e-9, 1e-12, msg, sizeof msg))
            fail_msg("%s, output %d: %s", sh->name, i, msg);
        tg_array_free(want[i]);
    }
    /* restored: the same results, bit for bit */
    char *path = tgf_path();
    tg_tgf_save_info info = {.source = g};
    if (tg_tgf_save(path, &fr, 1, &info, ctx)) fail_msg("%s, save: %s", sh->name, tg_ctx_message(ctx));
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("%s, restore: %s", sh->name, tg_ctx_message(ctx));
    if (tg_function_call(tg_tgf_function(t, 0), in, want, ctx))
        fail_msg("%s restored: %s", sh->name, tg_ctx_message(ctx));
    for (int i = 0; i < nout; i++) {
        char msg[4096];
        if (!tu_arrays_close(want[i], got[i], 0, 0, msg, sizeof msg))
            fail_msg("%s, output %d restored: %s", sh->name, i, msg);
        tg_array_free(got[i]);
        tg_array_free(want[i]);
    }
    tg_tgf_free(t);
    unlink(path);
    free(path);
    for (int i = 0; i < nin; i++) tg_array_free(in[i]);
    free(in);
    free(got);
    free(want);
    tg_ctx_free(ctx);
    tg_function_free(fr);
    tg_function_free(fn);
    tg_graph_free(g);
}

static void test_shape(const shape_def *sh) {
    /* the fan-in and fan-out shapes have a node per step; the others a
     * few: 300 and 1,200 steps, 300 to 7,200 nodes */
    enum { STEPS = 300 };
    counts a = measure(sh, STEPS), b = measure(sh, 4 * STEPS);
    const tu_alloc_count *ta[NPHASES] = {&a.load, &a.compile, &a.save, &a.restore},
                *tb[NPHASES] = {&b.load, &b.compile, &b.save, &b.restore};
    bool print = getenv("TG_SCALING_PRINT") != NULL;
    for (int p = 0; p < NPHASES; p++) {
        char what[64];
        if (print)
            print_message("%-13s %-8s allocs %8.0f -> %8.0f  bytes %10.0f -> %10.0f  most held %9.0f -> %9.0f\n",
                          sh->name, PHASE[p], ta[p]->allocs, tb[p]->allocs, ta[p]->bytes, tb[p]->bytes,
                          ta[p]->peak, tb[p]->peak);
        snprintf(what, sizeof what, "%s: allocations", PHASE[p]);
        check_growth(sh->name, what, ta[p]->allocs, tb[p]->allocs);
        snprintf(what, sizeof what, "%s: bytes allocated", PHASE[p]);
        check_growth(sh->name, what, ta[p]->bytes, tb[p]->bytes);
        snprintf(what, sizeof what, "%s: bytes held at most", PHASE[p]);
        check_growth(sh->name, what, ta[p]->peak, tb[p]->peak);
    }
    if (print)
        print_message("%-13s compile  tried %6.0f -> %6.0f  applied %5.0f -> %5.0f  nodes %4.0f -> %4.0f\n",
                      sh->name, a.tried, b.tried, a.applied, b.applied, a.nodes, b.nodes);
    check_growth(sh->name, "rewrites tried", a.tried, b.tried);
    check_growth(sh->name, "rewrites applied", a.applied, b.applied);
    check_growth(sh->name, "nodes left", a.nodes, b.nodes);
    check_values(sh, 40);
}

#define SHAPE_TEST(i)                                                                              \
    static void test_shape_##i(void **state) {                                                     \
        (void)state;                                                                               \
        test_shape(&SHAPES[i]);                                                                    \
    }
SHAPE_TEST(0)
SHAPE_TEST(1)
SHAPE_TEST(2)
SHAPE_TEST(3)
SHAPE_TEST(4)
SHAPE_TEST(5)
SHAPE_TEST(6)
SHAPE_TEST(7)
SHAPE_TEST(8)
SHAPE_TEST(9)
SHAPE_TEST(10)
SHAPE_TEST(11)
SHAPE_TEST(12)
SHAPE_TEST(13)

/* The bound itself: linear growth with a fixed part passes, n log n at
 * these sizes passes, n^2 (and n^1.5) fails. */
static void test_bound(void **state) {
    (void)state;
    assert_true(linear(1000, 4000));
    assert_true(linear(1000 + 500, 4000 + 500));
    assert_true(linear(300 * 8.2, 1200 * 10.2)); /* n log2 n */
    assert_false(linear(300.0 * 300, 1200.0 * 1200));
    assert_false(linear(300 * 17.3, 1200 * 34.6)); /* n^1.5 */
    assert_true(linear(0, 16));
    assert_false(linear(0, 17));
}

int main(void) {
    setenv("TG_COMPOSITE", "interp", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_0),  cmocka_unit_test(test_shape_1),
        cmocka_unit_test(test_shape_2),  cmocka_unit_test(test_shape_3),
        cmocka_unit_test(test_shape_4),  cmocka_unit_test(test_shape_5),
        cmocka_unit_test(test_shape_6),  cmocka_unit_test(test_shape_7),
        cmocka_unit_test(test_shape_8),  cmocka_unit_test(test_shape_9),
        cmocka_unit_test(test_shape_10), cmocka_unit_test(test_shape_11),
        cmocka_unit_test(test_shape_12), cmocka_unit_test(test_shape_13),
        cmocka_unit_test(test_bound),
    };
    _Static_assert(NSHAPES == 14, "one test per shape");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
