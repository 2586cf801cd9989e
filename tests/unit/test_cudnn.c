/* The cuDNN kernels (backend/cuda/cudnn.c) and their host-side decisions
 * (backend/dnn.c).
 *
 * Everywhere: the algorithm policy's decision in every case, its names
 * (an unknown one is an error listing the valid ones), the mapping from
 * conv2d's and pool2d's attributes to cuDNN's descriptor parameters (in
 * cuDNN's own enum values) against hand-worked numbers, the cases that
 * stay on the CPU, the node state's lifetime, and a conv net run with
 * device "cuda" (on the CPU without a GPU).
 *
 * With a GPU (skipped otherwise): every kernel against the CPU kernel on
 * the same random inputs, over strides, dilations, paddings, flips and
 * dtypes (float16 within a float16 tolerance); each policy with a shape
 * change between calls; a conv net's gradient and training steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cudnn.h"
#include "backend/dnn.h"
#include "graph/graph.h"
#include "vm/vm.h"
#include "testutil.h"

static bool have_gpu(void) {
    const tg_backend *be = tg_backend_cuda();
    return be && be->available(NULL);
}

/* ---- the policy ---- */

static void test_policy_decide(void **state) {
    const int64_t cur[3] = {2, 3, 4}, moved[3] = {2, 3, 5}; /* only the last length differs */
#define G TG_DNN_GUESS
#define T TG_DNN_TIME
#define R TG_DNN_REUSE
    static const struct {
        tg_dnn_policy p;
        bool chosen, same, supports;
        tg_dnn_action want;
    } cases[] = {
        /* nothing chosen yet: the policy's way of choosing */
        {TG_DNN_GUESS_ONCE, false, true, false, G},
        {TG_DNN_GUESS_ON_SHAPE_CHANGE, false, true, false, G},
        {TG_DNN_TIME_ONCE, false, true, false, T},
        {TG_DNN_TIME_ON_SHAPE_CHANGE, false, true, false, T},
        {TG_DNN_TIME_ONCE, false, false, true, T},
        /* the same lengths: keep it, whatever the support flag says */
        {TG_DNN_GUESS_ONCE, true, true, false, R},
        {TG_DNN_GUESS_ON_SHAPE_CHANGE, true, true, false, R},
        {TG_DNN_TIME_ONCE, true, true, true, R},
        {TG_DNN_TIME_ON_SHAPE_CHANGE, true, true, true, R},
        /* new lengths the old algorithm supports: _once keeps it */
        {TG_DNN_GUESS_ONCE, true, false, true, R},
        {TG_DNN_TIME_ONCE, true, false, true, R},
        {TG_DNN_GUESS_ON_SHAPE_CHANGE, true, false, true, G},
        {TG_DNN_TIME_ON_SHAPE_CHANGE, true, false, true, T},
        /* new lengths it does not support: everyone chooses again */
        {TG_DNN_GUESS_ONCE, true, false, false, G},
        {TG_DNN_TIME_ONCE, true, false, false, T},
        {TG_DNN_GUESS_ON_SHAPE_CHANGE, true, false, false, G},
        {TG_DNN_TIME_ON_SHAPE_CHANGE, true, false, false, T},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_dnn_action got = tg_dnn_decide(cases[i].p, cases[i].chosen, cases[i].same ? cur : moved, cur, 3,
                                          cases[i].supports);
        if (got != cases[i].want)
            fail_msg("case %zu (%s, chosen %d, same %d, supports %d): got %d, want %d", i,
                     tg_dnn_policy_name(cases[i].p), cases[i].chosen, cases[i].same, cases[i].supports, got,
                     cases[i].want);
    }
#undef G
#undef T
#undef R
}

static void expect_bad_name(int rc, tg_ctx *ctx, const char *name) {
    assert_int_equal(rc, TG_EINVAL);
    const char *m = tg_ctx_message(ctx);
    assert_non_null(strstr(m, name));
    static const char *const valid[] = {"guess_once", "guess_on_shape_change", "time_once", "time_on_shape_change"};
    for (int i = 0; i < 4; i++)
        if (!strstr(m, valid[i])) fail_msg("'%s' does not list %s", m, valid[i]);
    tg_ctx_clear(ctx);
}

static void test_policy_names(void **state) {
    static const struct {
        const char *name;
        tg_dnn_policy p;
    } names[] = {{"guess_once", TG_DNN_GUESS_ONCE},
                 {"guess_on_shape_change", TG_DNN_GUESS_ON_SHAPE_CHANGE},
                 {"time_once", TG_DNN_TIME_ONCE},
                 {"time_on_shape_change", TG_DNN_TIME_ON_SHAPE_CHANGE}};
    tg_ctx *ctx = tg_ctx_new();
    tg_dnn_policy p;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tg_dnn_policy_parse(names[i].name, &p, ctx), TG_OK);
        assert_int_equal(p, names[i].p);
        assert_string_equal(tg_dnn_policy_name(p), names[i].name);
    }
    /* The default is time_once, and a node nobody configured (0) has it. */
    assert_int_equal(TG_DNN_TIME_ONCE, 0);
    assert_int_equal(tg_dnn_policy_parse(NULL, &p, ctx), TG_OK);
    assert_int_equal(p, TG_DNN_TIME_ONCE);
    expect_bad_name(tg_dnn_policy_parse("fastest", &p, ctx), ctx, "'fastest'");
    expect_bad_name(tg_dnn_policy_parse("", &p, ctx), ctx, "''");
    /* The environment variable, when no name is given. */
    setenv("TG_DNN_CONV_ALGO", "guess_on_shape_change", 1);
    assert_int_equal(tg_dnn_policy_parse(NULL, &p, ctx), TG_OK);
    assert_int_equal(p, TG_DNN_GUESS_ON_SHAPE_CHANGE);
    assert_int_equal(tg_dnn_policy_parse("time_once", &p, ctx), TG_OK); /* a given name wins */
    assert_int_equal(p, TG_DNN_TIME_ONCE);
    setenv("TG_DNN_CONV_ALGO", "", 1);
    assert_int_equal(tg_dnn_policy_parse(NULL, &p, ctx), TG_OK);
    assert_int_equal(p, TG_DNN_TIME_ONCE);
    setenv("TG_DNN_CONV_ALGO", "Time_Once", 1);
    int rc = tg_dnn_policy_parse(NULL, &p, ctx);
    assert_non_null(strstr(tg_ctx_message(ctx), "TG_DNN_CONV_ALGO"));
    expect_bad_name(rc, ctx, "'Time_Once'");
    unsetenv("TG_DNN_CONV_ALGO");
    tg_ctx_free(ctx);
}

static const char EXP_GRAPH[] =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\","
    "\"shape\":[3]}}],\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
    "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}";

/* The compile option: an unknown name is TG_EINVAL on any device; a
 * valid one reaches every node of a function placed on the GPU. */
static void test_policy_option(void **state) {
    tg_graph *g = tu_load(EXP_GRAPH);
    tg_ctx *ctx = tg_ctx_new();
    const char *dev[2] = {"cpu", "cuda"};
    for (int d = 0; d < 2; d++) {
        tg_compile_options bad = {.device = dev[d], .dnn_conv_algo = "sometimes"};
        assert_null(tg_function_compile(g, 0, &bad, ctx));
        expect_bad_name(tg_ctx_status(ctx), ctx, "'sometimes'");
    }
    setenv("TG_DNN_CONV_ALGO", "bogus", 1);
    assert_null(tg_function_compile(g, 0, NULL, ctx));
    expect_bad_name(tg_ctx_status(ctx), ctx, "'bogus'");
    unsetenv("TG_DNN_CONV_ALGO");
    tg_compile_options o = {.device = "cuda", .dnn_conv_algo = "guess_on_shape_change"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    if (f->on_device)
        for (int k = 0; k < f->fg->nnodes; k++) assert_int_equal(f->fg->nodes[k]->dnn_algo, TG_DNN_GUESS_ON_SHAPE_CHANGE);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* A node's kernel state goes with the node: freed once, when the
 * compiled function is. */
static int nfreed;
static void count_free(tg_kstate *p);
static tg_kstate counted = {count_free};
static void count_free(tg_kstate *p) {
    assert_ptr_equal(p, &counted);
    nfreed++;
}

static void test_node_state_lifetime(void **state) {
    tg_graph *g = tu_load(EXP_GRAPH);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    tg_node *n = f->sched[0].node;
    n->kstate = &counted;
    nfreed = 0;
    tg_array *x = tu_f64(1, (int64_t[]){3}, (double[]){0, 1, 2}), *y = NULL;
    assert_int_equal(tg_function_call(f, &x, &y, ctx), TG_OK);
    assert_int_equal(nfreed, 0);
    tg_function_free(f);
    assert_int_equal(nfreed, 1);
    /* The graph's own node (the function's is a clone) has none. */
    assert_null(g->nodes[0]->kstate);
    tg_array_free(x);
    tg_array_free(y);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* ---- attributes as cuDNN descriptors ---- */

/* A graph with one node of `op` (attrs a JSON object or NULL) on 4-d
 * float64 inputs of unknown lengths; its parsed attributes are
 * g->nodes[0]->a.extra. */
static tg_graph *attrs_graph(const char *op, const char *attrs) {
    char json[2048];
    const int nin = !strcmp(op, "pool2d") ? 1 : 2;
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null,null,null]}},"
             "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null,null,null]}}],"
             "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"a\"%s],\"outputs\":[\"y\"]%s%s}],"
             "\"functions\":{\"f\":{\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}}}",
             op, nin == 2 ? ",\"b\"" : "", attrs ? ",\"attrs\":" : "", attrs ? attrs : "");
    return tu_load(json);
}

static void test_conv_map(void **state) {
    /* attrs, kernel (K, L); then pads, strides, dilations, mode, all
     * worked by hand from FORMAT.md: full pads k_dilated - 1, half
     * k_dilated // 2, with k_dilated = (k - 1) * dilation + 1. */
    static const struct {
        const char *attrs;
        int64_t K, L;
        int pad[2], stride[2], dil[2], mode;
    } cases[] = {
        {NULL, 3, 3, {0, 0}, {1, 1}, {1, 1}, 0},
        {"{\"border_mode\":\"full\"}", 3, 5, {2, 4}, {1, 1}, {1, 1}, 0},
        {"{\"border_mode\":\"half\"}", 3, 4, {1, 2}, {1, 1}, {1, 1}, 0},
        {"{\"border_mode\":\"half\",\"filter_dilation\":[2,3]}", 3, 3, {2, 3}, {1, 1}, {2, 3}, 0},
        {"{\"border_mode\":\"full\",\"filter_dilation\":[2,1]}", 3, 2, {4, 1}, {1, 1}, {2, 1}, 0},
        {"{\"border_mode\":[2,1],\"subsample\":[2,3],\"filter_flip\":false}", 3, 3, {2, 1}, {2, 3}, {1, 1}, 1},
        {"{\"border_mode\":[0,7],\"filter_flip\":true}", 1, 2, {0, 7}, {1, 1}, {1, 1}, 0},
        {"{\"border_mode\":\"valid\",\"filter_flip\":false,\"filter_dilation\":[3,1],\"subsample\":[1,4]}", 2, 2,
         {0, 0}, {1, 4}, {3, 1}, 1},
    };
    /* cuDNN's numbers: CUDNN_CONVOLUTION 0, CUDNN_CROSS_CORRELATION 1. */
    assert_int_equal(TG_DNN_CONVOLUTION, 0);
    assert_int_equal(TG_DNN_CROSS_CORRELATION, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_graph *g = attrs_graph("conv2d", cases[i].attrs);
        tg_dnn_conv d;
        assert_true(tg_dnn_conv_map(g->nodes[0]->a.extra, cases[i].K, cases[i].L, &d));
        for (int k = 0; k < 2; k++) {
            if (d.pad[k] != cases[i].pad[k] || d.stride[k] != cases[i].stride[k] || d.dil[k] != cases[i].dil[k])
                fail_msg("case %zu (%s) dim %d: pad %d stride %d dil %d, want %d %d %d", i,
                         cases[i].attrs ? cases[i].attrs : "{}", k, d.pad[k], d.stride[k], d.dil[k],
                         cases[i].pad[k], cases[i].stride[k], cases[i].dil[k]);
        }
        assert_int_equal(d.mode, cases[i].mode);
        tg_graph_free(g);
    }
}

/* Output lengths by hand, and the CPU kernel's output shape for the same
 * case: the GPU kernels check shapes with these. */
static void test_conv_lengths(void **state) {
    static const struct {
        const char *attrs;
        int64_t in, k, want;
    } cases[] = {
        {"{\"subsample\":[2,2]}", 7, 3, 3},                           /* (7 - 3) // 2 + 1 */
        {"{\"border_mode\":\"full\"}", 5, 3, 7},                      /* 5 + 4 - 3 + 1 */
        {"{\"filter_dilation\":[2,2]}", 7, 3, 3},                     /* k_dilated 5 */
        {"{\"border_mode\":\"half\",\"subsample\":[3,3]}", 10, 4, 4}, /* pad 2: (14 - 4) // 3 + 1 */
        {"{\"border_mode\":[3,3],\"filter_dilation\":[2,2]}", 1, 2, 5}, /* (1 + 6 - 3) // 1 + 1 */
        {NULL, 2, 3, -1},                                            /* does not fit */
        {"{\"filter_dilation\":[3,3]}", 6, 3, -1},                   /* k_dilated 7 > 6 */
    };
    tg_ctx *ctx = tg_ctx_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_graph *g = attrs_graph("conv2d", cases[i].attrs);
        const conv_p *p = g->nodes[0]->a.extra;
        for (int d = 0; d < 2; d++)
            assert_int_equal(tg_conv_out_len(p, d, cases[i].in, cases[i].k), cases[i].want);
        /* The CPU kernel agrees (or fails the same way). */
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        assert_non_null(f);
        int64_t xs[4] = {1, 1, cases[i].in, cases[i].in}, ws[4] = {1, 1, cases[i].k, cases[i].k};
        tg_array *in[2] = {tg_array_new(TG_FLOAT64, 4, xs), tg_array_new(TG_FLOAT64, 4, ws)}, *y = NULL;
        int rc = tg_function_call(f, in, &y, ctx);
        if (cases[i].want < 0) {
            assert_int_equal(rc, TG_ESHAPE);
            assert_non_null(strstr(tg_ctx_message(ctx), "impossible output shape"));
            tg_ctx_clear(ctx);
        } else {
            assert_int_equal(rc, TG_OK);
            assert_int_equal(tg_array_shape(y)[2], cases[i].want);
            assert_int_equal(tg_array_shape(y)[3], cases[i].want);
        }
        tg_array_free(in[0]);
        tg_array_free(in[1]);
        tg_array_free(y);
        tg_function_free(f);
        tg_graph_free(g);
    }
    tg_ctx_free(ctx);
}

static void test_pool_map(void **state) {
    /* cuDNN's numbers: CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING 1,
     * _EXCLUDE_PADDING 2, CUDNN_POOLING_MAX_DETERMINISTIC 3. */
    static const struct {
        const char *attrs;
        int64_t H, W;
        bool ok;
        int mode, window[2], pad[2], stride[2];
    } cases[] = {
        {"{\"ws\":[2,2]}", 8, 6, true, 3, {2, 2}, {0, 0}, {2, 2}}, /* stride defaults to ws */
        {"{\"ws\":[2,2]}", -1, -1, true, 3, {2, 2}, {0, 0}, {2, 2}},
        {"{\"ws\":[3,2],\"stride\":[2,1],\"pad\":[1,1],\"mode\":\"max\"}", 9, 7, true, 3, {3, 2}, {1, 1}, {2, 1}},
        {"{\"ws\":[3,3],\"stride\":[1,2],\"pad\":[2,1],\"mode\":\"average_inc_pad\"}", 5, 5, true, 1, {3, 3},
         {2, 1}, {1, 2}},
        {"{\"ws\":[3,3],\"mode\":\"average_exc_pad\"}", 9, 9, true, 2, {3, 3}, {0, 0}, {3, 3}},
        /* cuDNN has no sum */
        {"{\"ws\":[2,2],\"mode\":\"sum\"}", 8, 8, false, 0, {0, 0}, {0, 0}, {0, 0}},
        /* ignore_border false: only without partial windows, which needs
         * the lengths: 6 = 3 windows of 2; 5 leaves a partial one. */
        {"{\"ws\":[2,2],\"ignore_border\":false}", 4, 6, true, 3, {2, 2}, {0, 0}, {2, 2}},
        {"{\"ws\":[2,2],\"ignore_border\":false}", 5, 6, false, 0, {0, 0}, {0, 0}, {0, 0}},
        {"{\"ws\":[2,2],\"ignore_border\":false}", 4, -1, false, 0, {0, 0}, {0, 0}, {0, 0}},
        /* stride 1 < ws 3: (v - 1 - 3 + 1) // 1 + 1 = v - 2 windows either way */
        {"{\"ws\":[3,3],\"stride\":[1,1],\"ignore_border\":false}", 5, 7, true, 3, {3, 3}, {0, 0}, {1, 1}},
        /* ws 3, stride 2: 7 gives 3 either way; 6 gives 3 without, 2 with */
        {"{\"ws\":[3,3],\"stride\":[2,2],\"ignore_border\":false,\"mode\":\"average_exc_pad\"}", 7, 7, true, 2,
         {3, 3}, {0, 0}, {2, 2}},
        {"{\"ws\":[3,3],\"stride\":[2,2],\"ignore_border\":false}", 7, 6, false, 0, {0, 0}, {0, 0}, {0, 0}},
        /* shorter than the window: one partial window without the border */
        {"{\"ws\":[3,3],\"ignore_border\":false}", 2, 3, false, 0, {0, 0}, {0, 0}, {0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_graph *g = attrs_graph("pool2d", cases[i].attrs);
        tg_dnn_pool d;
        bool ok = tg_dnn_pool_map(g->nodes[0]->a.extra, cases[i].H, cases[i].W, &d);
        if (ok != cases[i].ok) fail_msg("case %zu (%s): map gives %d, want %d", i, cases[i].attrs, ok, cases[i].ok);
        if (ok) {
            assert_int_equal(d.mode, cases[i].mode);
            for (int k = 0; k < 2; k++) {
                assert_int_equal(d.window[k], cases[i].window[k]);
                assert_int_equal(d.pad[k], cases[i].pad[k]);
                assert_int_equal(d.stride[k], cases[i].stride[k]);
            }
        }
        tg_graph_free(g);
    }
}

/* Theano's pooled lengths, by hand, and the CPU kernel's for the same
 * case. */
static void test_pool_lengths(void **state) {
    static const struct {
        const char *attrs;
        int64_t v, want;
    } cases[] = {
        {"{\"ws\":[2,2]}", 7, 3},
        {"{\"ws\":[2,2],\"ignore_border\":false}", 7, 4},
        {"{\"ws\":[3,3],\"stride\":[1,1],\"ignore_border\":false}", 7, 5},
        {"{\"ws\":[3,3],\"stride\":[2,2],\"pad\":[1,1]}", 7, 4}, /* (7 + 2 - 3) // 2 + 1 */
        {"{\"ws\":[3,3],\"stride\":[2,2],\"ignore_border\":false}", 6, 3},
        {"{\"ws\":[4,4]}", 3, 0},
    };
    tg_ctx *ctx = tg_ctx_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_graph *g = attrs_graph("pool2d", cases[i].attrs);
        for (int d = 0; d < 2; d++)
            assert_int_equal(tg_pool_out_len(g->nodes[0]->a.extra, d, cases[i].v), cases[i].want);
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        assert_non_null(f);
        int64_t xs[4] = {1, 1, cases[i].v, cases[i].v};
        tg_array *in[2] = {tg_array_new(TG_FLOAT64, 4, xs), tg_array_new(TG_FLOAT64, 4, xs)}, *y = NULL;
        if (tg_function_call(f, in, &y, ctx)) fail_msg("%s", tg_ctx_message(ctx));
        assert_int_equal(tg_array_shape(y)[2], cases[i].want);
        tg_array_free(in[0]);
        tg_array_free(in[1]);
        tg_array_free(y);
        tg_function_free(f);
        tg_graph_free(g);
    }
    tg_ctx_free(ctx);
}

static void test_softmax_map(void **state) {
    const int64_t s3[3] = {2, 3, 4};
    int d[4];
    assert_true(tg_dnn_softmax_map(3, s3, 1, d));
    assert_true(d[0] == 2 && d[1] == 3 && d[2] == 4 && d[3] == 1);
    assert_true(tg_dnn_softmax_map(3, s3, 0, d));
    assert_true(d[0] == 1 && d[1] == 2 && d[2] == 12 && d[3] == 1);
    assert_true(tg_dnn_softmax_map(3, s3, 2, d));
    assert_true(d[0] == 6 && d[1] == 4 && d[2] == 1 && d[3] == 1);
    const int64_t s1[1] = {5};
    assert_true(tg_dnn_softmax_map(1, s1, 0, d));
    assert_true(d[0] == 1 && d[1] == 5 && d[2] == 1);
    /* cuDNN's strides are ints: 2^31 elements do not fit. */
    const int64_t big[2] = {65536, 32768};
    assert_false(tg_dnn_softmax_map(2, big, 1, d));
    assert_false(tg_dnn_softmax_map(3, s3, 3, d));
    assert_int_equal(TG_DNN_SOFTMAX_ACCURATE, 1);
    assert_int_equal(TG_DNN_SOFTMAX_LOG, 2);
    assert_int_equal(TG_DNN_SOFTMAX_MODE_CHANNEL, 1);
}

/* ---- one-node graphs on both devices ---- */

typedef struct arg {
    tg_dtype dt;
    int ndim;
    int64_t shape[5]; /* -1: declared unknown */
} arg;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform in [-1, 1), in dtype dt (float16 by rounding a float64). */
static tg_array *rand_array(tg_dtype dt, int ndim, const int64_t *shape) {
    tg_array *a = tg_array_new(TG_FLOAT64, ndim, shape);
    assert_non_null(a);
    for (int64_t i = 0; i < tg_array_size(a); i++) ((double *)tg_array_data(a))[i] = 2 * urand() - 1;
    if (dt == TG_FLOAT64) return a;
    tg_array *c = tg_array_copy(a, dt);
    tg_array_free(a);
    return c;
}

static tg_array *shape_vec(const int64_t *s) {
    tg_array *a = tg_array_new(TG_INT64, 1, (int64_t[]){4});
    memcpy(tg_array_data(a), s, 4 * sizeof(int64_t));
    return a;
}

static void graph_json(char *json, size_t size, const char *op, const char *attrs, int nin, const arg *args) {
    size_t k = (size_t)snprintf(json, size, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[");
    for (int i = 0; i < nin; i++) {
        k += (size_t)snprintf(json + k, size - k, "%s{\"id\":\"x%d\",\"type\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                              i, tg_dtype_name(args[i].dt));
        for (int d = 0; d < args[i].ndim; d++) {
            if (args[i].shape[d] < 0)
                k += (size_t)snprintf(json + k, size - k, "%snull", d ? "," : "");
            else
                k += (size_t)snprintf(json + k, size - k, "%s%lld", d ? "," : "", (long long)args[i].shape[d]);
        }
        k += (size_t)snprintf(json + k, size - k, "]}}");
    }
    k += (size_t)snprintf(json + k, size - k, "],\"nodes\":[{\"op\":\"%s\",\"inputs\":[", op);
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(json + k, size - k, "%s\"x%d\"", i ? "," : "", i);
    k += (size_t)snprintf(json + k, size - k, "],\"outputs\":[\"y\"]%s%s}],\"functions\":{\"f\":{\"inputs\":[",
                          attrs ? ",\"attrs\":" : "", attrs ? attrs : "");
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(json + k, size - k, "%s\"x%d\"", i ? "," : "", i);
    snprintf(json + k, size - k, "],\"outputs\":[\"y\"]}}}");
}

static int count_op(const tg_function *f, const char *op) {
    int c = 0;
    for (int i = 0; i < tg_function_node_count(f); i++) c += strcmp(tg_function_node_op(f, i), op) == 0;
    return c;
}

/* The scheduled node of f running `op` (the first). */
static tg_node *find_node(const tg_function *f, const char *op) {
    for (int k = 0; k < f->nsched; k++)
        if (!strcmp(f->sched[k].node->op->name, op)) return f->sched[k].node;
    return NULL;
}

static double max_abs(const tg_array *a) {
    double m = 0;
    for (int64_t i = 0; i < tg_array_size(a); i++) m = fmax(m, fabs(tg_array_get_flat(a, i)));
    return m;
}

typedef struct pair {
    tg_graph *g;
    tg_function *cpu, *gpu;
} pair;

static pair pair_compile(const char *json, const char *policy) {
    pair p = {.g = tu_load(json)};
    tg_ctx *ctx = tg_ctx_new();
    /* As written: the kernels are compared, not the optimizer's work. */
    tg_compile_options c = {.preset = "none", .device = "cpu"},
                       g = {.preset = "none", .device = "cuda", .dnn_conv_algo = policy};
    p.cpu = tg_function_compile(p.g, 0, &c, ctx);
    p.gpu = tg_function_compile(p.g, 0, &g, ctx);
    if (!p.cpu || !p.gpu) fail_msg("%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return p;
}

static void pair_free(pair *p) {
    tg_function_free(p->cpu);
    tg_function_free(p->gpu);
    tg_graph_free(p->g);
}

/* Call both on `in`; the GPU's result within rtol of the CPU's and an
 * absolute tolerance of rtol times the largest magnitude of the result
 * (sums of many products cancel). Returns the CPU's result when keep. */
static tg_array *pair_check(pair *p, tg_array **in, double rtol, const char *what, bool keep) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *yc = NULL, *yg = NULL;
    if (tg_function_call(p->cpu, in, &yc, ctx)) fail_msg("%s (CPU): %s", what, tg_ctx_message(ctx));
    if (tg_function_call(p->gpu, in, &yg, ctx)) fail_msg("%s (GPU): %s", what, tg_ctx_message(ctx));
    /* The convolution's algorithm: an FFT or Winograd one computes in
     * transformed coordinates, whose rounding errors reach about 1e-3 of
     * the largest magnitude in float32 (winograd_nonfused on a 5x5
     * kernel: 2.3e-3 measured on an H100), so within 1e-2 of it. */
    tg_cudnn_stats st = {.algo = -1};
    for (int k = 0; k < p->gpu->nsched && st.algo < 0; k++) tg_cudnn_node_stats(p->gpu->sched[k].node, &st);
    double tol = st.approx && rtol < 1e-2 ? 1e-2 : rtol;
    char msg[4096];
    if (!tu_arrays_close(yg, yc, tol, tol * fmax(max_abs(yc), 1e-30), msg, sizeof msg))
        fail_msg("%s: GPU vs CPU (cuDNN algorithm %s)\n%s", what, st.algo_name ? st.algo_name : "-", msg);
    if (tol != rtol && !tu_arrays_close(yg, yc, rtol, rtol * fmax(max_abs(yc), 1e-30), msg, sizeof msg))
        print_message("%s: algorithm %s, within 1e-2 of the largest magnitude but not %g:\n  %s\n", what,
                      st.algo_name ? st.algo_name : "-", rtol, msg);
    tg_array_free(yg);
    tg_ctx_free(ctx);
    if (keep) return yc;
    tg_array_free(yc);
    return NULL;
}

/* The node ran on cuDNN: it sits between transfers and has cuDNN state,
 * and nothing went back to the host. */
static void expect_on_cudnn(const pair *p, const char *op, int ntransfers, const char *what) {
    if (count_op(p->gpu, "transfer") != ntransfers)
        fail_msg("%s: %d transfers, expected %d (the node did not go to the GPU)", what,
                 count_op(p->gpu, "transfer"), ntransfers);
    tg_cudnn_stats st = {0};
    if (!tg_cudnn_node_stats(find_node(p->gpu, op), &st)) fail_msg("%s: the node holds no cuDNN state", what);
    if (st.nhost) fail_msg("%s: %d calls ran on the CPU", what, st.nhost);
}

static double tol_for(tg_dtype dt) { return dt == TG_FLOAT64 ? 1e-10 : dt == TG_FLOAT32 ? 1e-4 : 1e-2; }

/* ---- convolutions on the GPU ---- */

static const struct conv_case {
    int64_t x[4], w[4];
    const char *attrs;
} CONV_CASES[] = {
    {{2, 3, 9, 8}, {4, 3, 3, 3}, NULL},
    {{2, 2, 6, 7}, {3, 2, 3, 2}, "{\"border_mode\":\"full\"}"},
    {{1, 3, 10, 9}, {2, 3, 3, 3}, "{\"border_mode\":\"half\",\"filter_dilation\":[2,2]}"},
    {{2, 2, 11, 10}, {3, 2, 3, 3}, "{\"border_mode\":[2,1],\"subsample\":[2,3]}"},
    {{2, 3, 12, 11}, {2, 3, 2, 3}, "{\"filter_flip\":false,\"subsample\":[2,1],\"filter_dilation\":[1,2]}"},
    {{3, 4, 7, 7}, {5, 4, 1, 1}, "{\"subsample\":[2,2]}"},
    {{1, 2, 5, 6}, {2, 2, 2, 2}, "{\"border_mode\":[3,0],\"filter_flip\":false}"},
    {{1, 1, 4, 4}, {1, 1, 3, 3}, "{\"border_mode\":\"full\",\"filter_dilation\":[2,1],\"subsample\":[1,2]}"},
    {{8, 16, 32, 32}, {32, 16, 5, 5}, "{\"border_mode\":\"half\"}"},
};

/* conv2d, conv2d_grad_inputs and conv2d_grad_weights of one case. */
static void check_conv_case(const struct conv_case *c, tg_dtype dt, const char *policy) {
    char json[4096], what[256];
    const double tol = tol_for(dt);
    tg_array *x = rand_array(dt, 4, c->x), *w = rand_array(dt, 4, c->w);
    arg fa[2] = {{dt, 4, {c->x[0], c->x[1], c->x[2], c->x[3]}}, {dt, 4, {c->w[0], c->w[1], c->w[2], c->w[3]}}};
    graph_json(json, sizeof json, "conv2d", c->attrs, 2, fa);
    snprintf(what, sizeof what, "conv2d %s %s", tg_dtype_name(dt), c->attrs ? c->attrs : "{}");
    pair p = pair_compile(json, policy);
    tg_array *in[3] = {x, w, NULL};
    tg_array *y = pair_check(&p, in, tol, what, true);
    /* A second call reuses the algorithm and the pooled buffers. */
    tg_array_free(pair_check(&p, in, tol, what, false));
    expect_on_cudnn(&p, "conv2d", 3, what);
    pair_free(&p);
    const int64_t *ys = tg_array_shape(y);
    tg_array *gy = rand_array(dt, 4, ys);
    /* grad_inputs(w, gy, shp = x's shape): shp stays on the host. */
    arg ga[3] = {fa[1], {dt, 4, {ys[0], ys[1], ys[2], ys[3]}}, {TG_INT64, 1, {4}}};
    graph_json(json, sizeof json, "conv2d_grad_inputs", c->attrs, 3, ga);
    snprintf(what, sizeof what, "conv2d_grad_inputs %s %s", tg_dtype_name(dt), c->attrs ? c->attrs : "{}");
    p = pair_compile(json, policy);
    in[0] = w;
    in[1] = gy;
    in[2] = shape_vec(c->x);
    tg_array_free(pair_check(&p, in, tol, what, false));
    expect_on_cudnn(&p, "conv2d_grad_inputs", 3, what);
    pair_free(&p);
    tg_array_free(in[2]);
    /* grad_weights(x, gy, shp = w's shape) */
    ga[0] = fa[0];
    graph_json(json, sizeof json, "conv2d_grad_weights", c->attrs, 3, ga);
    snprintf(what, sizeof what, "conv2d_grad_weights %s %s", tg_dtype_name(dt), c->attrs ? c->attrs : "{}");
    p = pair_compile(json, policy);
    in[0] = x;
    in[2] = shape_vec(c->w);
    tg_array_free(pair_check(&p, in, tol, what, false));
    expect_on_cudnn(&p, "conv2d_grad_weights", 3, what);
    pair_free(&p);
    tg_array_free(in[2]);
    tg_array_free(gy);
    tg_array_free(y);
    tg_array_free(x);
    tg_array_free(w);
}

static void test_conv_gpu(void **state) {
    if (!have_gpu()) skip();
    for (size_t i = 0; i < sizeof CONV_CASES / sizeof CONV_CASES[0]; i++) {
        check_conv_case(&CONV_CASES[i], TG_FLOAT32, NULL);
        check_conv_case(&CONV_CASES[i], TG_FLOAT64, NULL);
    }
}

/* float16 storage, float32 compute: against the CPU kernel, which also
 * computes in float32 and rounds once. */
static void test_conv_float16_gpu(void **state) {
    if (!have_gpu()) skip();
    for (size_t i = 0; i < sizeof CONV_CASES / sizeof CONV_CASES[0]; i++)
        check_conv_case(&CONV_CASES[i], TG_FLOAT16, "guess_once");
}

/* Errors read as on the CPU (the words of ops/conv.c). */
static void test_conv_errors_gpu(void **state) {
    if (!have_gpu()) skip();
    char json[4096];
    arg fa[2] = {{TG_FLOAT32, 4, {-1, -1, -1, -1}}, {TG_FLOAT32, 4, {-1, -1, -1, -1}}};
    graph_json(json, sizeof json, "conv2d", NULL, 2, fa);
    pair p = pair_compile(json, NULL);
    tg_ctx *ctx = tg_ctx_new();
    static const int64_t shapes[][2][4] = {{{1, 2, 5, 5}, {1, 3, 3, 3}}, {{1, 2, 2, 5}, {1, 2, 3, 3}}};
    for (int c = 0; c < 2; c++) {
        tg_array *in[2] = {rand_array(TG_FLOAT32, 4, shapes[c][0]), rand_array(TG_FLOAT32, 4, shapes[c][1])}, *y = NULL;
        char cpu_msg[1024];
        assert_int_equal(tg_function_call(p.cpu, in, &y, ctx), TG_ESHAPE);
        snprintf(cpu_msg, sizeof cpu_msg, "%s", tg_ctx_message(ctx));
        tg_ctx_clear(ctx);
        assert_int_equal(tg_function_call(p.gpu, in, &y, ctx), TG_ESHAPE);
        assert_string_equal(tg_ctx_message(ctx), cpu_msg);
        tg_ctx_clear(ctx);
        tg_array_free(in[0]);
        tg_array_free(in[1]);
    }
    tg_ctx_free(ctx);
    pair_free(&p);
}

/* Each policy, with the lengths changing between calls: the results stay
 * right, and the node chooses as its policy says. */
static void test_policies_gpu(void **state) {
    if (!have_gpu()) skip();
    static const char *const policies[] = {"guess_once", "guess_on_shape_change", "time_once",
                                           "time_on_shape_change", NULL};
    static const char *const ops[] = {"conv2d", "conv2d_grad_inputs", "conv2d_grad_weights"};
    const int64_t xa[4] = {2, 3, 9, 9}, xb[4] = {3, 3, 12, 7}, w4[4] = {4, 3, 3, 3};
    const int64_t ya[4] = {2, 4, 7, 7}, yb[4] = {3, 4, 10, 5}; /* valid: H - 2 */
    for (int pi = 0; pi < 5; pi++) {
        const char *pol = policies[pi];
        const bool timed = !pol || !strncmp(pol, "time", 4), once = !pol || strstr(pol, "_once");
        for (int o = 0; o < 3; o++) {
            char json[4096], what[256];
            const arg un = {TG_FLOAT32, 4, {-1, -1, -1, -1}}, wk = {TG_FLOAT32, 4, {4, 3, 3, 3}},
                      sh = {TG_INT64, 1, {4}};
            arg a[3] = {o == 1 ? wk : un, o == 0 ? wk : un, sh};
            graph_json(json, sizeof json, ops[o], NULL, o == 0 ? 2 : 3, a);
            pair p = pair_compile(json, pol);
            for (int call = 0; call < 3; call++) {
                const int64_t *xs = call ? xb : xa, *ys = call ? yb : ya;
                tg_array *x = rand_array(TG_FLOAT32, 4, xs), *w = rand_array(TG_FLOAT32, 4, w4),
                         *gy = rand_array(TG_FLOAT32, 4, ys), *in[3];
                if (o == 0) {
                    in[0] = x, in[1] = w, in[2] = NULL;
                } else if (o == 1) {
                    in[0] = w, in[1] = gy, in[2] = shape_vec(xs);
                } else {
                    in[0] = x, in[1] = gy, in[2] = shape_vec(w4);
                }
                snprintf(what, sizeof what, "%s, policy %s, call %d", ops[o], pol ? pol : "(default)", call + 1);
                tg_array_free(pair_check(&p, in, 1e-4, what, false));
                tg_cudnn_stats st = {0};
                if (!tg_cudnn_node_stats(find_node(p.gpu, ops[o]), &st)) fail_msg("%s: no cuDNN state", what);
                const int chosen = st.nguess + st.ntime;
                assert_int_equal(timed ? st.nguess : st.ntime, 0);
                assert_true(st.algo >= 0);
                assert_int_equal(st.nhost, 0);
                const int want = call == 0 ? 1 : once ? 1 + st.nfallback : 2;
                if (chosen != want)
                    fail_msg("%s: %d choices (%d guessed, %d timed, %d fallbacks), expected %d", what, chosen,
                             st.nguess, st.ntime, st.nfallback, want);
                if (!once) assert_int_equal(st.nfallback, 0);
                tg_array_free(x);
                tg_array_free(w);
                tg_array_free(gy);
                tg_array_free(in[2]);
            }
            pair_free(&p);
        }
    }
}

/* ---- pooling on the GPU ---- */

static const struct pool_case {
    int ndim;
    int64_t x[5];
    const char *attrs;
} POOL_CASES[] = {
    {4, {2, 3, 8, 6}, "{\"ws\":[2,2]}"},
    {4, {2, 3, 9, 7}, "{\"ws\":[3,2],\"stride\":[2,1],\"pad\":[1,1],\"mode\":\"max\"}"},
    {4, {2, 2, 9, 7}, "{\"ws\":[3,3],\"stride\":[2,2],\"pad\":[1,2],\"mode\":\"average_inc_pad\"}"},
    {4, {2, 2, 9, 7}, "{\"ws\":[3,3],\"stride\":[2,2],\"pad\":[1,2],\"mode\":\"average_exc_pad\"}"},
    {3, {3, 10, 10}, "{\"ws\":[2,3],\"stride\":[1,2],\"mode\":\"average_exc_pad\"}"},
    {2, {11, 9}, "{\"ws\":[3,3],\"stride\":[2,2],\"mode\":\"average_inc_pad\"}"},
    {5, {2, 2, 2, 6, 6}, "{\"ws\":[2,2],\"ignore_border\":false}"},
    {4, {1, 2, 7, 5}, "{\"ws\":[3,3],\"stride\":[1,1],\"ignore_border\":false,\"mode\":\"average_exc_pad\"}"},
    {4, {4, 8, 33, 31}, "{\"ws\":[3,3],\"stride\":[2,2],\"pad\":[1,1],\"mode\":\"max\"}"},
};

static void check_pool_case(const struct pool_case *c, tg_dtype dt) {
    char json[4096], what[256];
    const double tol = dt == TG_FLOAT16 ? 2e-3 : tol_for(dt);
    arg xa = {dt, c->ndim, {0}};
    memcpy(xa.shape, c->x, sizeof c->x);
    graph_json(json, sizeof json, "pool2d", c->attrs, 1, &xa);
    snprintf(what, sizeof what, "pool2d %s %dd %s", tg_dtype_name(dt), c->ndim, c->attrs);
    pair p = pair_compile(json, NULL);
    tg_array *x = rand_array(dt, c->ndim, c->x), *in[3] = {x, NULL, NULL};
    tg_array *y = pair_check(&p, in, tol, what, true);
    expect_on_cudnn(&p, "pool2d", 2, what);
    pair_free(&p);
    /* The gradient at (x, y = pool2d(x) by the CPU, gy). */
    const int64_t *ys = tg_array_shape(y);
    arg ga[3] = {xa, {dt, c->ndim, {0}}, {dt, c->ndim, {0}}};
    memcpy(ga[1].shape, ys, sizeof(int64_t) * (size_t)c->ndim);
    ga[2] = ga[1];
    graph_json(json, sizeof json, "pool2d_grad", c->attrs, 3, ga);
    snprintf(what, sizeof what, "pool2d_grad %s %dd %s", tg_dtype_name(dt), c->ndim, c->attrs);
    p = pair_compile(json, NULL);
    in[1] = y;
    in[2] = rand_array(dt, c->ndim, ys);
    tg_array_free(pair_check(&p, in, tol, what, false));
    expect_on_cudnn(&p, "pool2d_grad", 4, what);
    pair_free(&p);
    tg_array_free(in[2]);
    tg_array_free(y);
    tg_array_free(x);
}

static void test_pool_gpu(void **state) {
    if (!have_gpu()) skip();
    static const tg_dtype dts[] = {TG_FLOAT32, TG_FLOAT64, TG_FLOAT16};
    for (size_t i = 0; i < sizeof POOL_CASES / sizeof POOL_CASES[0]; i++)
        for (int t = 0; t < 3; t++) check_pool_case(&POOL_CASES[i], dts[t]);
}

/* Ties in max pooling: every maximum of a window gets its gradient (the
 * CPU's rule, which cuDNN does not follow: the backend's own kernel runs
 * it), with overlapping windows and padding. */
static void test_pool_ties_gpu(void **state) {
    if (!have_gpu()) skip();
    static const tg_dtype dts[] = {TG_FLOAT32, TG_FLOAT64, TG_FLOAT16};
    static const char *const attrs[] = {"{\"ws\":[2,2]}", "{\"ws\":[3,3],\"stride\":[1,1],\"pad\":[1,1]}",
                                        "{\"ws\":[3,2],\"stride\":[2,1]}"};
    const int64_t xs[4] = {2, 2, 7, 6};
    for (int t = 0; t < 3; t++)
        for (int a = 0; a < 3; a++) {
            char json[4096], what[256];
            tg_array *x64 = rand_array(TG_FLOAT64, 4, xs);
            double *xv = tg_array_data(x64);
            for (int i = 0; i < 42; i++) xv[42 + i] = 0.25; /* plane 1: all ties */
            xv[0] = xv[1] = xv[6] = xv[7] = 0.75;           /* a tied maximum in plane 0 */
            tg_array *x = tg_array_copy(x64, dts[t]), *in[3] = {x, NULL, NULL};
            arg xa = {dts[t], 4, {2, 2, 7, 6}};
            graph_json(json, sizeof json, "pool2d", attrs[a], 1, &xa);
            pair p = pair_compile(json, NULL);
            tg_array *y = pair_check(&p, in, 0, "pool2d with ties", true);
            pair_free(&p);
            const int64_t *ys = tg_array_shape(y);
            arg ga[3] = {xa, {dts[t], 4, {ys[0], ys[1], ys[2], ys[3]}}, {dts[t], 4, {ys[0], ys[1], ys[2], ys[3]}}};
            graph_json(json, sizeof json, "pool2d_grad", attrs[a], 3, ga);
            snprintf(what, sizeof what, "pool2d_grad with ties %s %s", tg_dtype_name(dts[t]), attrs[a]);
            p = pair_compile(json, NULL);
            in[1] = y;
            in[2] = rand_array(dts[t], 4, ys);
            /* The same sums in the same order: equal. */
            tg_array_free(pair_check(&p, in, 0, what, false));
            expect_on_cudnn(&p, "pool2d_grad", 4, what);
            pair_free(&p);
            tg_array_free(in[2]);
            tg_array_free(y);
            tg_array_free(x);
            tg_array_free(x64);
        }
}

/* What cuDNN cannot reproduce stays on the CPU: no transfers, the CPU's
 * result. */
static void test_pool_refused(void **state) {
    static const struct {
        int64_t decl[4], x[4]; /* declared (-1: unknown) and given lengths */
        const char *attrs;
    } cases[] = {
        {{1, 2, 6, 6}, {1, 2, 6, 6}, "{\"ws\":[2,2],\"mode\":\"sum\"}"},
        {{1, 2, 5, 6}, {1, 2, 5, 6}, "{\"ws\":[2,2],\"ignore_border\":false}"},
        {{1, 2, -1, -1}, {1, 2, 4, 6}, "{\"ws\":[2,2],\"ignore_border\":false}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[4096];
        arg xa = {TG_FLOAT64, 4, {cases[i].decl[0], cases[i].decl[1], cases[i].decl[2], cases[i].decl[3]}};
        graph_json(json, sizeof json, "pool2d", cases[i].attrs, 1, &xa);
        pair p = pair_compile(json, NULL);
        assert_int_equal(count_op(p.gpu, "transfer"), 0);
        tg_array *x = rand_array(TG_FLOAT64, 4, cases[i].x);
        tg_array_free(pair_check(&p, &x, 0, cases[i].attrs, false));
        tg_array_free(x);
        pair_free(&p);
    }
}

/* Strided operands: x arrives as a device view (dimshuffle of an NHWC
 * array, its strides those of the transposition), which the kernels copy
 * to C order first: float32 and float64 through the backend's copy,
 * float16 through cudnnTransformTensor. conv2d and pool2d of it against
 * the CPU. */
static void test_strided_gpu(void **state) {
    if (!have_gpu()) skip();
    static const tg_dtype dts[] = {TG_FLOAT32, TG_FLOAT64, TG_FLOAT16};
    static const char *const nodes[] = {
        "{\"op\":\"conv2d\",\"inputs\":[\"xs\",\"w\"],\"outputs\":[\"y\"],"
        "\"attrs\":{\"border_mode\":\"half\",\"subsample\":[2,1]}}",
        "{\"op\":\"pool2d\",\"inputs\":[\"xs\"],\"outputs\":[\"y\"],"
        "\"attrs\":{\"ws\":[3,2],\"stride\":[2,1],\"pad\":[1,1],\"mode\":\"average_exc_pad\"}}",
        "{\"op\":\"pool2d\",\"inputs\":[\"xs\"],\"outputs\":[\"y\"],\"attrs\":{\"ws\":[2,2]}}",
    };
    const int64_t xs[4] = {2, 9, 8, 3}, ws[4] = {4, 3, 3, 3}; /* x (N, H, W, C) */
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 3; k++) {
            char json[4096], what[256];
            const char *dn = tg_dtype_name(dts[t]);
            snprintf(json, sizeof json,
                     "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[2,9,8,3]}},"
                     "{\"id\":\"w\",\"type\":{\"dtype\":\"%s\",\"shape\":[4,3,3,3]}}],\"nodes\":["
                     "{\"op\":\"dimshuffle\",\"inputs\":[\"x\"],\"outputs\":[\"xs\"],"
                     "\"attrs\":{\"order\":[0,3,1,2]}},%s],"
                     "\"functions\":{\"f\":{\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}}}",
                     dn, dn, nodes[k]);
            snprintf(what, sizeof what, "%s of a dimshuffled %s array", k ? "pool2d" : "conv2d", dn);
            pair p = pair_compile(json, NULL);
            tg_array *in[2] = {rand_array(dts[t], 4, xs), rand_array(dts[t], 4, ws)};
            tg_array_free(pair_check(&p, in, dts[t] == TG_FLOAT16 && k ? 2e-3 : tol_for(dts[t]), what, false));
            tg_cudnn_stats st = {0};
            const char *op = k ? "pool2d" : "conv2d";
            if (!tg_cudnn_node_stats(find_node(p.gpu, op), &st) || st.nhost)
                fail_msg("%s: did not run on cuDNN", what);
            tg_array_free(in[0]);
            tg_array_free(in[1]);
            pair_free(&p);
        }
}

/* ---- softmax on the GPU ---- */

static void test_softmax_gpu(void **state) {
    if (!have_gpu()) skip();
    static const char *const ops[] = {"softmax", "log_softmax"};
    static const tg_dtype dts[] = {TG_FLOAT32, TG_FLOAT64};
    const arg s3 = {TG_FLOAT32, 3, {4, 5, 6}}, s4 = {TG_FLOAT32, 4, {2, 3, 40, 5}};
    static const char *const axes[] = {"{\"axis\":0}", "{\"axis\":1}", "{\"axis\":-2}"};
    for (int o = 0; o < 2; o++)
        for (int t = 0; t < 2; t++)
            for (int s = 0; s < 2; s++)
                for (int a = 0; a < 3; a++) {
                    char json[4096], what[256];
                    arg x = s ? s4 : s3;
                    x.dt = dts[t];
                    graph_json(json, sizeof json, ops[o], axes[a], 1, &x);
                    snprintf(what, sizeof what, "%s %s %dd %s", ops[o], tg_dtype_name(dts[t]), x.ndim, axes[a]);
                    pair p = pair_compile(json, NULL);
                    tg_array *in = rand_array(dts[t], x.ndim, x.shape);
                    tg_array_free(pair_check(&p, &in, dts[t] == TG_FLOAT64 ? 1e-12 : 1e-5, what, false));
                    expect_on_cudnn(&p, ops[o], 2, what);
                    tg_array_free(in);
                    pair_free(&p);
                }
    /* The last axis: the backend's own kernel, or cuDNN when asked. */
    for (int o = 0; o < 2; o++)
        for (int t = 0; t < 2; t++) {
            char json[4096], what[256];
            arg x = {dts[t], 2, {7, 300}};
            graph_json(json, sizeof json, ops[o], NULL, 1, &x);
            snprintf(what, sizeof what, "%s %s last axis, TG_CUDA_SOFTMAX=cudnn", ops[o], tg_dtype_name(dts[t]));
            setenv("TG_CUDA_SOFTMAX", "cudnn", 1);
            pair p = pair_compile(json, NULL);
            unsetenv("TG_CUDA_SOFTMAX");
            tg_array *in = rand_array(dts[t], 2, x.shape);
            tg_array_free(pair_check(&p, &in, dts[t] == TG_FLOAT64 ? 1e-12 : 1e-5, what, false));
            expect_on_cudnn(&p, ops[o], 2, what);
            pair_free(&p);
            p = pair_compile(json, NULL);
            tg_cudnn_stats st = {0};
            tg_array_free(pair_check(&p, &in, dts[t] == TG_FLOAT64 ? 1e-12 : 1e-5, what, false));
            assert_false(tg_cudnn_node_stats(find_node(p.gpu, ops[o]), &st));
            assert_int_equal(count_op(p.gpu, "transfer"), 2);
            pair_free(&p);
            tg_array_free(in);
        }
}

/* ---- a conv net ---- */

/* conv2d -> pool2d -> sum, and its gradient with respect to the input
 * and the kernel: conv2d_grad_inputs, conv2d_grad_weights and
 * pool2d_grad on the GPU, against the CPU. Runs everywhere: without a GPU
 * the "cuda" function is the CPU's. */
static void test_convnet_gradient(void **state) {
    static const char *const dts[] = {"float32", "float64"};
    for (int t = 0; t < 2; t++) {
        char json[4096];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                 "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[3,2,10,9]}},"
                 "{\"id\":\"w\",\"type\":{\"dtype\":\"%s\",\"shape\":[4,2,3,3]}}],\"nodes\":["
                 "{\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"c\"],"
                 "\"attrs\":{\"border_mode\":\"half\",\"subsample\":[1,1]}},"
                 "{\"op\":\"tanh\",\"inputs\":[\"c\"],\"outputs\":[\"a\"]},"
                 "{\"op\":\"pool2d\",\"inputs\":[\"a\"],\"outputs\":[\"p\"],\"attrs\":{\"ws\":[2,2]}},"
                 "{\"op\":\"sum\",\"inputs\":[\"p\"],\"outputs\":[\"s\"]},"
                 "{\"op\":\"grad\",\"inputs\":[\"s\",\"x\",\"w\"],\"outputs\":[\"gx\",\"gw\"]}],"
                 "\"functions\":{\"f\":{\"inputs\":[\"x\",\"w\"],\"outputs\":[\"s\",\"gx\",\"gw\"]}}}",
                 dts[t], dts[t]);
        tg_graph *g = tu_load(json);
        tg_ctx *ctx = tg_ctx_new();
        tg_compile_options oc = {.device = "cpu"}, og = {.device = "cuda"};
        tg_function *fc = tg_function_compile(g, 0, &oc, ctx), *fg = tg_function_compile(g, 0, &og, ctx);
        if (!fc || !fg) fail_msg("%s", tg_ctx_message(ctx));
        const tg_dtype dt = t ? TG_FLOAT64 : TG_FLOAT32;
        tg_array *in[2] = {rand_array(dt, 4, (int64_t[]){3, 2, 10, 9}), rand_array(dt, 4, (int64_t[]){4, 2, 3, 3})};
        tg_array *oc3[3] = {0}, *og3[3] = {0};
        if (tg_function_call(fc, in, oc3, ctx) || tg_function_call(fg, in, og3, ctx))
            fail_msg("%s", tg_ctx_message(ctx));
        const double tol = t ? 1e-10 : 1e-4;
        for (int k = 0; k < 3; k++) tu_assert_close(og3[k], oc3[k], tol, tol * fmax(max_abs(oc3[k]), 1e-30));
        static const char *const dnn_ops[] = {"conv2d", "conv2d_grad_inputs", "conv2d_grad_weights", "pool2d",
                                              "pool2d_grad"};
        for (int k = 0; k < 5; k++)
            if (!find_node(fc, dnn_ops[k])) fail_msg("the optimized gradient has no %s", dnn_ops[k]);
        if (have_gpu()) {
            for (int k = 0; k < 5; k++) {
                tg_node *n = find_node(fg, dnn_ops[k]);
                tg_cudnn_stats st = {0};
                if (!n || !tg_cudnn_node_stats(n, &st)) fail_msg("%s did not run on cuDNN", dnn_ops[k]);
            }
        } else {
            assert_int_equal(count_op(fg, "transfer"), 0);
            for (int k = 0; k < 3; k++) assert_true(tg_array_equal(og3[k], oc3[k]));
        }
        for (int k = 0; k < 3; k++) {
            tg_array_free(oc3[k]);
            tg_array_free(og3[k]);
        }
        tg_array_free(in[0]);
        tg_array_free(in[1]);
        tg_function_free(fc);
        tg_function_free(fg);
        tg_graph_free(g);
        tg_ctx_free(ctx);
    }
}

/* examples/convnet.json trained three steps on each device: the costs of
 * every step and the weights after agree. */
static void test_convnet_training(void **state) {
    const int64_t xs[2] = {16, 784}, ys[2] = {16, 10};
    tg_array *x64 = rand_array(TG_FLOAT64, 2, xs), *x = tg_array_copy(x64, TG_FLOAT32), *y = tg_array_new(TG_FLOAT32, 2, ys);
    for (int r = 0; r < 16; r++) ((float *)tg_array_data(y))[r * 10 + r % 10] = 1;
    tg_array *in[2] = {x, y};
    static const char *const w[] = {"w1", "b1", "w2", "b2", "W3", "b3", NULL};
    tu_pair p;
    tu_train_pair(&p, TG_SOURCE_DIR "/examples/convnet.json", "train", "cuda", in, 3, w, 1e-4, 1e-5);
    if (have_gpu()) {
        tg_cudnn_stats st = {0};
        assert_true(tg_cudnn_node_stats(find_node(p.f[1], "conv2d"), &st));
        assert_true(tg_cudnn_node_stats(find_node(p.f[1], "pool2d"), &st));
    }
    tu_pair_free(&p);
    tg_array_free(x64);
    tg_array_free(x);
    tg_array_free(y);
}

int main(void) {
    /* The default policy is under test: not the caller's. */
    unsetenv("TG_DNN_CONV_ALGO");
    unsetenv("TG_CUDA_SOFTMAX");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_decide),     cmocka_unit_test(test_policy_names),
        cmocka_unit_test(test_policy_option),     cmocka_unit_test(test_node_state_lifetime),
        cmocka_unit_test(test_conv_map),          cmocka_unit_test(test_conv_lengths),
        cmocka_unit_test(test_pool_map),          cmocka_unit_test(test_pool_lengths),
        cmocka_unit_test(test_softmax_map),       cmocka_unit_test(test_pool_refused),
        cmocka_unit_test(test_convnet_gradient),  cmocka_unit_test(test_convnet_training),
        cmocka_unit_test(test_conv_gpu),          cmocka_unit_test(test_conv_float16_gpu),
        cmocka_unit_test(test_conv_errors_gpu),   cmocka_unit_test(test_policies_gpu),
        cmocka_unit_test(test_pool_gpu),          cmocka_unit_test(test_pool_ties_gpu),
        cmocka_unit_test(test_softmax_gpu),       cmocka_unit_test(test_strided_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
