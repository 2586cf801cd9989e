/* The CUDA backend against the CPU kernels (ggml's test-backend-ops habit):
 * every GPU kernel runs on the same inputs as the CPU kernel of the same
 * node, and the results must agree to rounding. Each case is a one-node
 * graph compiled twice, with device "cpu" and "cuda"; on a GPU the cuda
 * function must hold the node plus one transfer per input and output
 * (proof that the node ran on the device). Without a GPU (or a build
 * without CUDA) the GPU cases are skipped; the fallback test checks that
 * device "cuda" then runs on the CPU with the same results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "testutil.h"

#ifdef TG_HAVE_CUDA
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cuda/cuda.h"
#endif

static bool have_gpu(void) {
    const tg_backend *be = tg_backend_cuda();
    return be && be->available(NULL);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

enum { R_SIGNED, R_POSITIVE, R_SMALLINT };

static tg_array *rand_array(tg_dtype dt, int ndim, const int64_t *shape, int range) {
    tg_array *a = tg_array_new(dt, ndim, shape);
    assert_non_null(a);
    int64_t n = tg_array_size(a);
    for (int64_t i = 0; i < n; i++) {
        double v = range == R_POSITIVE ? 0.1 + 1.9 * urand()
                 : range == R_SMALLINT ? floor(urand() * 3) - 1
                                       : 4 * urand() - 2;
        if (dt == TG_FLOAT64)
            ((double *)tg_array_data(a))[i] = v;
        else if (dt == TG_FLOAT16)
            ((uint16_t *)tg_array_data(a))[i] = tg_float_to_half((float)v);
        else
            ((float *)tg_array_data(a))[i] = (float)v;
    }
    return a;
}

typedef struct operand {
    int ndim;
    int64_t shape[4];
} operand;

static void shape_json(char *buf, size_t size, const operand *o) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < o->ndim; d++) k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "," : "", (long long)o->shape[d]);
    snprintf(buf + k, size - k, "]");
}

static int count_op(const tg_function *f, const char *op) {
    int c = 0;
    for (int i = 0; i < tg_function_node_count(f); i++) c += strcmp(tg_function_node_op(f, i), op) == 0;
    return c;
}

/* g's first function compiled as written (preset none: the kernels, not
 * the optimizer, are compared; it would drop an identity, for one) for
 * the CPU into *fc and for the GPU into *fg; a failure names `what`. */
static void compile_both(tg_graph *g, tg_ctx *ctx, const char *what, tg_function **fc, tg_function **fg) {
    tg_compile_options cpu = {.preset = "none", .device = "cpu"}, gpu = {.preset = "none", .device = "cuda"};
    *fc = tg_function_compile(g, 0, &cpu, ctx);
    *fg = tg_function_compile(g, 0, &gpu, ctx);
    if (!*fc || !*fg) fail_msg("%s: %s", what, tg_ctx_message(ctx));
}

/* Run `op` (with attrs, a JSON object or NULL) on nin inputs of dtype dt
 * on both devices and compare. */
static void check_op(const char *op, const char *attrs, tg_dtype dt, int nin, const operand *ops, int range) {
    /* sum_to reads its second input's shape only, and the BLAS updates
     * their scalars alpha and beta: those stay on the host. */
    const int nup = !strcmp(op, "sum_to") || !strcmp(op, "ger") ? nin - 1
                  : !strcmp(op, "gemm") || !strcmp(op, "gemv") ? nin - 2
                                                               : nin;
    char json[4096], shp[64];
    size_t k = (size_t)snprintf(json, sizeof json, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[");
    for (int i = 0; i < nin; i++) {
        shape_json(shp, sizeof shp, &ops[i]);
        k += (size_t)snprintf(json + k, sizeof json - k, "%s{\"id\":\"x%d\",\"type\":{\"dtype\":\"%s\",\"shape\":%s}}",
                              i ? "," : "", i, tg_dtype_name(dt), shp);
    }
    k += (size_t)snprintf(json + k, sizeof json - k, "],\"nodes\":[{\"op\":\"%s\",\"inputs\":[", op);
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(json + k, sizeof json - k, "%s\"x%d\"", i ? "," : "", i);
    k += (size_t)snprintf(json + k, sizeof json - k, "],\"outputs\":[\"y\"]%s%s}],\"functions\":{\"f\":{\"inputs\":[",
                          attrs ? ",\"attrs\":" : "", attrs ? attrs : "");
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(json + k, sizeof json - k, "%s\"x%d\"", i ? "," : "", i);
    snprintf(json + k, sizeof json - k, "],\"outputs\":[\"y\"]}}}");

    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *fc, *fg;
    compile_both(g, ctx, op, &fc, &fg);
    /* On the device: the node, a transfer per input and one back. */
    if (count_op(fg, "transfer") != nup + 1)
        fail_msg("%s %s: %d transfers, expected %d (the node did not go to the GPU)", op, tg_dtype_name(dt),
                 count_op(fg, "transfer"), nup + 1);
    /* The output keeps its id. */
    assert_string_equal(tg_function_output_id(fg, 0), "y");
    tg_array *in[4] = {0}, *yc = NULL, *yg = NULL;
    for (int i = 0; i < nin; i++) in[i] = rand_array(dt, ops[i].ndim, ops[i].shape, range);
    if (tg_function_call(fc, in, &yc, ctx) || tg_function_call(fg, in, &yg, ctx))
        fail_msg("%s: %s", op, tg_ctx_message(ctx));
    /* A second call reuses the pooled device buffers: same result. */
    tg_array *yg2 = NULL;
    if (tg_function_call(fg, in, &yg2, ctx)) fail_msg("%s: %s", op, tg_ctx_message(ctx));
    char msg[4096];
    /* float16: one half ulp, where a float32 function's last-place
     * difference moves the final rounding. */
    double rtol = dt == TG_FLOAT64 ? 1e-12 : dt == TG_FLOAT16 ? 1e-3 : 2e-5,
           atol = dt == TG_FLOAT64 ? 1e-13 : dt == TG_FLOAT16 ? 1e-6 : 1e-6;
    if (!tu_arrays_close(yg, yc, rtol, atol, msg, sizeof msg))
        fail_msg("%s %s (attrs %s): GPU vs CPU\n%s", op, tg_dtype_name(dt), attrs ? attrs : "-", msg);
    if (!tg_array_equal(yg, yg2)) fail_msg("%s: second call differs", op);
    for (int i = 0; i < nin; i++) tg_array_free(in[i]);
    tg_array_free(yc);
    tg_array_free(yg);
    tg_array_free(yg2);
    tg_function_free(fc);
    tg_function_free(fg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

static const tg_dtype FLOATS[] = {TG_FLOAT32, TG_FLOAT64};

static void test_unary(void **state) {
    if (!have_gpu()) skip();
    static const char *const pos[] = {"log", "sqrt", "log1p", NULL};
    static const char *const any[] = {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "sqr", "identity",
                                      "reciprocal", "softplus", "expm1", NULL};
    operand o = {2, {3, 70}};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; pos[i]; i++) check_op(pos[i], NULL, FLOATS[t], 1, &o, R_POSITIVE);
        for (int i = 0; any[i]; i++) check_op(any[i], NULL, FLOATS[t], 1, &o, R_SIGNED);
    }
}

static void test_binary_broadcast(void **state) {
    if (!have_gpu()) skip();
    static const char *const ops[] = {"add", "sub", "mul", "true_div", "maximum", "minimum", NULL};
    static const char *const cmp[] = {"eq", "neq", "lt", "le", "gt", "ge", NULL};
    /* (4, 1, 3) with (5, 1): the output is (4, 5, 3); a 0-d operand; the
     * same shape (the contiguous fast path). */
    operand bc[2] = {{3, {4, 1, 3}}, {2, {5, 1}}}, sc[2] = {{2, {6, 7}}, {0, {0}}}, eq[2] = {{2, {9, 40}}, {2, {9, 40}}};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; ops[i]; i++) {
            check_op(ops[i], NULL, FLOATS[t], 2, bc, R_POSITIVE);
            check_op(ops[i], NULL, FLOATS[t], 2, sc, R_POSITIVE);
            check_op(ops[i], NULL, FLOATS[t], 2, eq, R_SIGNED);
        }
        check_op("pow", NULL, FLOATS[t], 2, bc, R_POSITIVE);
        for (int i = 0; cmp[i]; i++) {
            check_op(cmp[i], NULL, FLOATS[t], 2, bc, R_SMALLINT);
            check_op(cmp[i], NULL, FLOATS[t], 2, eq, R_SMALLINT);
        }
        operand three[3] = {{2, {5, 4}}, {1, {4}}, {2, {5, 1}}};
        check_op("add", NULL, FLOATS[t], 3, three, R_SIGNED);
        check_op("mul", NULL, FLOATS[t], 3, three, R_SIGNED);
    }
}

static void test_reduce(void **state) {
    if (!have_gpu()) skip();
    static const char *const ops[] = {"sum", "max", "min", "mean", "prod", NULL};
    static const char *const attrs[] = {"{\"axis\":0}", "{\"axis\":[1,2]}", "{\"axis\":null}",
                                        "{\"axis\":-1,\"keepdims\":true}", "{\"axis\":[0,2]}", NULL};
    operand o = {3, {4, 5, 6}}, big = {2, {3, 3000}};
    for (int t = 0; t < 2; t++)
        for (int i = 0; ops[i]; i++) {
            for (int a = 0; attrs[a]; a++) check_op(ops[i], attrs[a], FLOATS[t], 1, &o, R_POSITIVE);
            if (strcmp(ops[i], "prod")) check_op(ops[i], "{\"axis\":1}", FLOATS[t], 1, &big, R_POSITIVE);
        }
}

static void test_sum_to(void **state) {
    if (!have_gpu()) skip();
    operand o[2] = {{3, {4, 5, 3}}, {2, {5, 1}}};
    for (int t = 0; t < 2; t++) check_op("sum_to", NULL, FLOATS[t], 2, o, R_SIGNED);
}

/* Reductions the launcher cuts into pieces (few outputs, many elements
 * each: partials combined by a second kernel), in both layouts: one block
 * per output (a conv bias gradient, axes 0, 2, 3 of (64, 32, 40, 40); a
 * whole array) and one thread per output (axis 0 of (20000, 16)); and a
 * broadcast whose axes merge (the bias added over (N, C, H, W)). */
static void test_reduce_pieces(void **state) {
    if (!have_gpu()) skip();
    static const char *const ops[] = {"sum", "max", "min", "mean", NULL};
    operand conv = {4, {64, 32, 40, 40}}, col = {2, {20000, 16}}, flat = {1, {300001}};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; ops[i]; i++) {
            /* positive: no sum cancels to near 0, where float32's
             * rounding would outweigh the relative tolerance */
            check_op(ops[i], "{\"axis\":[0,2,3]}", FLOATS[t], 1, &conv, R_POSITIVE);
            check_op(ops[i], "{\"axis\":0}", FLOATS[t], 1, &col, R_POSITIVE);
            check_op(ops[i], "{\"axis\":null}", FLOATS[t], 1, &flat, R_POSITIVE);
        }
        operand st[2] = {{4, {64, 32, 40, 40}}, {4, {1, 32, 1, 1}}}, st2[2] = {{2, {20000, 16}}, {1, {16}}};
        check_op("sum_to", NULL, FLOATS[t], 2, st, R_POSITIVE);
        check_op("sum_to", NULL, FLOATS[t], 2, st2, R_POSITIVE);
        operand bias[2] = {{4, {8, 32, 20, 20}}, {4, {1, 32, 1, 1}}};
        check_op("add", NULL, FLOATS[t], 2, bias, R_SIGNED);
    }
    /* float16: accumulated in double, rounded once (means: a sum of
     * 100,000 would pass float16's largest value) */
    check_op("mean", "{\"axis\":[0,2,3]}", TG_FLOAT16, 1, &conv, R_POSITIVE);
    check_op("mean", "{\"axis\":0}", TG_FLOAT16, 1, &col, R_POSITIVE);
}

/* flatten and reshape stay on the device: a view of a contiguous input,
 * a device copy of a transposed one; the new shape is read on the host. */
static void test_reshape_on_device(void **state) {
    if (!have_gpu()) skip();
    operand o = {3, {4, 3, 5}};
    for (int t = 0; t < 2; t++) check_op("flatten", "{\"ndim\":2}", FLOATS[t], 1, &o, R_SIGNED);
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[4,3,5]}}],"
        "\"nodes\":[{\"op\":\"dimshuffle\",\"inputs\":[\"x\"],\"outputs\":[\"t\"],\"attrs\":{\"order\":[2,0,1]}},"
        "{\"op\":\"flatten\",\"inputs\":[\"t\"],\"outputs\":[\"f\"],\"attrs\":{\"ndim\":2}},"
        "{\"op\":\"exp\",\"inputs\":[\"f\"],\"outputs\":[\"e\"]},"
        "{\"op\":\"reshape\",\"inputs\":[\"e\",{\"value\":{\"dtype\":\"int64\",\"shape\":[2],\"data\":[3,20]}}],"
        "\"outputs\":[\"y\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}";
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *fc, *fg;
    compile_both(g, ctx, "f", &fc, &fg);
    /* one upload, one download: nothing in between went to the host */
    assert_int_equal(count_op(fg, "transfer"), 2);
    int64_t xs[3] = {4, 3, 5};
    tg_array *x = rand_array(TG_FLOAT32, 3, xs, R_SIGNED), *yc = NULL, *yg = NULL;
    if (tg_function_call(fc, &x, &yc, ctx) || tg_function_call(fg, &x, &yg, ctx))
        fail_msg("%s", tg_ctx_message(ctx));
    tu_assert_close(yg, yc, 1e-6, 0);
    assert_int_equal(tg_array_shape(yg)[0], 3);
    tg_array_free(x);
    tg_array_free(yc);
    tg_array_free(yg);
    tg_function_free(fc);
    tg_function_free(fg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Inputs of 1 MiB and more go up through the pinned staging buffers
 * (cuda.c), in pieces of 8 MiB taken in turn: two inputs of 20 MB (two
 * whole pieces and a partial one each, the second input reusing the
 * buffers the first has just filled) and a small one that takes the
 * plain copy, then a second call with other values (no stale piece may
 * survive). x - y is correctly rounded in float32 on both devices and
 * s is a power of two, so the GPU's outputs must equal the CPU's bit for
 * bit. */
static void test_large_uploads(void **state) {
    if (!have_gpu()) skip();
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[5000001]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"float32\",\"shape\":[5000001]}},"
        "{\"id\":\"s\",\"type\":{\"dtype\":\"float32\",\"shape\":[1]}}],"
        "\"nodes\":[{\"op\":\"sub\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"d\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"d\",\"s\"],\"outputs\":[\"z\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\",\"y\",\"s\"],\"outputs\":[\"z\"]}}}";
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *fc, *fg;
    compile_both(g, ctx, "f", &fc, &fg);
    assert_int_equal(count_op(fg, "transfer"), 4); /* x, y, s up; z down */
    int64_t n = 5000001, one = 1;
    for (int call = 0; call < 2; call++) {
        tg_array *in[3] = {rand_array(TG_FLOAT32, 1, &n, R_SIGNED), rand_array(TG_FLOAT32, 1, &n, R_SIGNED),
                           tg_array_new(TG_FLOAT32, 1, &one)};
        ((float *)tg_array_data(in[2]))[0] = call ? 0.5f : 2.0f;
        tg_array *zc = NULL, *zg = NULL;
        if (tg_function_call(fc, in, &zc, ctx) || tg_function_call(fg, in, &zg, ctx))
            fail_msg("%s", tg_ctx_message(ctx));
        const float *x = tg_array_data(in[0]), *y = tg_array_data(in[1]), *z = tg_array_data(zg);
        /* by hand at the ends of the pieces, then all of it against the CPU */
        const int64_t at[] = {0, 2097151, 2097152, 4194304, 4999999, 5000000};
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
            assert_true(z[at[i]] == (x[at[i]] - y[at[i]]) * (call ? 0.5f : 2.0f));
        assert_true(tg_array_equal(zg, zc));
        for (int i = 0; i < 3; i++) tg_array_free(in[i]);
        tg_array_free(zc);
        tg_array_free(zg);
    }
    tg_function_free(fc);
    tg_function_free(fg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

static void test_nn(void **state) {
    if (!have_gpu()) skip();
    operand rows = {2, {7, 33}}, wide = {3, {2, 3, 700}}, pt[2] = {{2, {6, 10}}, {2, {6, 10}}};
    for (int t = 0; t < 2; t++) {
        check_op("softmax", NULL, FLOATS[t], 1, &rows, R_SIGNED);
        check_op("softmax", NULL, FLOATS[t], 1, &wide, R_SIGNED);
        check_op("log_softmax", NULL, FLOATS[t], 1, &rows, R_SIGNED);
        check_op("log_softmax", NULL, FLOATS[t], 1, &wide, R_SIGNED);
        check_op("categorical_crossentropy", NULL, FLOATS[t], 2, pt, R_POSITIVE);
        check_op("zeros_like", NULL, FLOATS[t], 1, &rows, R_SIGNED);
        check_op("ones_like", NULL, FLOATS[t], 1, &rows, R_SIGNED);
    }
}

/* float16 arrays: half storage, float compute on the GPU as on the CPU
 * (elementwise, comparisons to bool, reductions, sum_to, softmax, fills),
 * each node on the device with a transfer per input and one back. */
static void test_float16(void **state) {
    if (!have_gpu()) skip();
    const tg_dtype h = TG_FLOAT16;
    static const char *const pos[] = {"log", "sqrt", "log1p", NULL};
    static const char *const any[] = {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "sqr", "identity",
                                      "reciprocal", "softplus", "expm1", NULL};
    static const char *const bin[] = {"add", "sub", "mul", "true_div", "maximum", "minimum", "pow", NULL};
    static const char *const cmp[] = {"eq", "neq", "lt", "le", "gt", "ge", NULL};
    operand o = {2, {3, 70}}, bc[2] = {{3, {4, 1, 3}}, {2, {5, 1}}}, eq[2] = {{2, {9, 40}}, {2, {9, 40}}};
    for (int i = 0; pos[i]; i++) check_op(pos[i], NULL, h, 1, &o, R_POSITIVE);
    for (int i = 0; any[i]; i++) check_op(any[i], NULL, h, 1, &o, R_SIGNED);
    for (int i = 0; bin[i]; i++) {
        check_op(bin[i], NULL, h, 2, bc, R_POSITIVE);
        check_op(bin[i], NULL, h, 2, eq, R_SIGNED);
    }
    for (int i = 0; cmp[i]; i++) check_op(cmp[i], NULL, h, 2, bc, R_SMALLINT);
    operand three[3] = {{2, {5, 4}}, {1, {4}}, {2, {5, 1}}};
    check_op("add", NULL, h, 3, three, R_SIGNED);
    check_op("mul", NULL, h, 3, three, R_SIGNED);
    /* reductions accumulate in double, as the CPU's */
    static const char *const red[] = {"sum", "max", "min", "mean", NULL};
    static const char *const attrs[] = {"{\"axis\":0}", "{\"axis\":[1,2]}", "{\"axis\":null}",
                                        "{\"axis\":-1,\"keepdims\":true}", "{\"axis\":[0,2]}", NULL};
    operand r3 = {3, {4, 5, 6}}, big = {2, {3, 3000}};
    for (int i = 0; red[i]; i++) {
        for (int a = 0; attrs[a]; a++) check_op(red[i], attrs[a], h, 1, &r3, R_SIGNED);
        check_op(red[i], "{\"axis\":1}", h, 1, &big, R_SIGNED);
    }
    check_op("prod", "{\"axis\":0}", h, 1, &r3, R_POSITIVE);
    operand st[2] = {{3, {4, 5, 3}}, {2, {5, 1}}};
    check_op("sum_to", NULL, h, 2, st, R_SIGNED);
    operand rows = {2, {7, 33}}, wide = {3, {2, 3, 700}};
    check_op("softmax", NULL, h, 1, &rows, R_SIGNED);
    check_op("softmax", NULL, h, 1, &wide, R_SIGNED);
    check_op("log_softmax", NULL, h, 1, &rows, R_SIGNED);
    check_op("log_softmax", NULL, h, 1, &wide, R_SIGNED);
    check_op("zeros_like", NULL, h, 1, &rows, R_SIGNED);
    check_op("ones_like", NULL, h, 1, &rows, R_SIGNED);
}

static void test_dot(void **state) {
    if (!have_gpu()) skip();
    operand mm[2] = {{2, {6, 7}}, {2, {7, 5}}}, vm[2] = {{1, {7}}, {2, {7, 5}}}, mv[2] = {{2, {6, 7}}, {1, {7}}},
            vv[2] = {{1, {7}}, {1, {7}}}, big[2] = {{2, {60, 784}}, {2, {784, 500}}};
    for (int t = 0; t < 2; t++) {
        check_op("dot", NULL, FLOATS[t], 2, mm, R_SIGNED);
        check_op("dot", NULL, FLOATS[t], 2, vm, R_SIGNED);
        check_op("dot", NULL, FLOATS[t], 2, mv, R_SIGNED);
        check_op("dot", NULL, FLOATS[t], 2, vv, R_SIGNED);
        check_op("matmul", NULL, FLOATS[t], 2, mm, R_SIGNED);
    }
    /* cuBLAS's float32 sums of 784 products differ from OpenBLAS's more
     * than the element tolerance above: checked in float64 only. */
    check_op("dot", NULL, TG_FLOAT64, 2, big, R_SIGNED);
}

/* gemm (beta z + alpha x y), gemv (beta z + alpha A x) and ger (A + alpha
 * x y^T) through cuBLAS, with the scalars read on the host. */
static void test_blas_updates(void **state) {
    if (!have_gpu()) skip();
    const operand s0 = {0, {0}};
    operand gemm[5] = {{2, {6, 5}}, s0, {2, {6, 7}}, {2, {7, 5}}, s0};
    operand gemv[5] = {{1, {6}}, s0, {2, {6, 7}}, {1, {7}}, s0};
    operand ger[4] = {{2, {6, 5}}, s0, {1, {6}}, {1, {5}}};
    operand empty[5] = {{2, {6, 5}}, s0, {2, {6, 0}}, {2, {0, 5}}, s0}; /* beta z */
    for (int t = 0; t < 2; t++) {
        check_op("gemm", NULL, FLOATS[t], 5, gemm, R_SIGNED);
        check_op("gemm", NULL, FLOATS[t], 5, empty, R_SIGNED);
        check_op("gemv", NULL, FLOATS[t], 5, gemv, R_SIGNED);
        check_op("ger", NULL, FLOATS[t], 4, ger, R_SIGNED);
    }
}

/* alpha 0 (a learning rate of 0 read at run time): cuBLAS skips the
 * product, but 0 * inf is NaN as written, and as the CPU gives. x's row 0
 * holds an inf: with y all ones, dot(x, y)'s row 0 is inf, times 0 NaN;
 * the other rows are z's (beta 1). Same for ger with x[0] = inf. */
static void test_blas_zero_alpha(void **state) {
    if (!have_gpu()) skip();
    static const char *const graphs[] = {
        "{'format':'tg-graph','version':1,'variables':[{'id':'z','type':{'dtype':'float64','shape':[3,2]}},"
        "{'id':'a','type':{'dtype':'float64','shape':[]}},{'id':'x','type':{'dtype':'float64','shape':[3,4]}},"
        "{'id':'y','type':{'dtype':'float64','shape':[4,2]}}],'nodes':[{'op':'gemm','inputs':['z','a','x','y',"
        "{'value':1.0}],'outputs':['r']}],'functions':{'f':{'inputs':['z','a','x','y'],'outputs':['r']}}}",
        "{'format':'tg-graph','version':1,'variables':[{'id':'z','type':{'dtype':'float64','shape':[3,2]}},"
        "{'id':'a','type':{'dtype':'float64','shape':[]}},{'id':'x','type':{'dtype':'float64','shape':[3]}},"
        "{'id':'y','type':{'dtype':'float64','shape':[2]}}],'nodes':[{'op':'ger','inputs':['z','a','x','y'],"
        "'outputs':['r']}],'functions':{'f':{'inputs':['z','a','x','y'],'outputs':['r']}}}",
    };
    for (int k = 0; k < 2; k++) {
        tg_graph *g = tu_load_sq(graphs[k]);
        tg_ctx *ctx = tg_ctx_new();
        tg_function *fc, *fg;
        compile_both(g, ctx, k ? "ger" : "gemm", &fc, &fg);
        const int64_t zs[2] = {3, 2}, xs[2] = {3, 4}, ys[2] = {4, 2}, xv = 3, yv = 2;
        tg_array *in[4] = {tg_array_new(TG_FLOAT64, 2, zs), tg_array_new(TG_FLOAT64, 0, NULL),
                           k ? tg_array_new(TG_FLOAT64, 1, &xv) : tg_array_new(TG_FLOAT64, 2, xs),
                           k ? tg_array_new(TG_FLOAT64, 1, &yv) : tg_array_new(TG_FLOAT64, 2, ys)};
        double *z = tg_array_data(in[0]), *x = tg_array_data(in[2]), *y = tg_array_data(in[3]);
        for (int i = 0; i < 6; i++) z[i] = i + 1;
        for (int64_t i = 0; i < tg_array_size(in[2]); i++) x[i] = 1;
        for (int64_t i = 0; i < tg_array_size(in[3]); i++) y[i] = 1;
        x[0] = INFINITY;
        *(double *)tg_array_data(in[1]) = 0.0;
        tg_array *yc = NULL, *yg = NULL;
        if (tg_function_call(fc, in, &yc, ctx) || tg_function_call(fg, in, &yg, ctx))
            fail_msg("%s: %s", k ? "ger" : "gemm", tg_ctx_message(ctx));
        const double *c = tg_array_data(yc), *d = tg_array_data(yg);
        for (int i = 0; i < 6; i++) {
            bool nan_row = i < 2;
            if (nan_row ? !isnan(c[i]) || !isnan(d[i]) : c[i] != i + 1 || d[i] != i + 1)
                fail_msg("%s element %d: CPU %g, GPU %g, want %s", k ? "ger" : "gemm", i, c[i], d[i],
                         nan_row ? "NaN" : "z's");
        }
        for (int i = 0; i < 4; i++) tg_array_free(in[i]);
        tg_array_free(yc);
        tg_array_free(yg);
        tg_function_free(fc);
        tg_function_free(fg);
        tg_graph_free(g);
        tg_ctx_free(ctx);
    }
}

/* The MLP of examples/mlp.json trained for three steps on each device:
 * the cost of every step and the weights after agree. This is the
 * transposes (views of device arrays), the products, the broadcasts and
 * sum_to of the backward pass, and the updates coming back to the host. */
static void test_mlp_training(void **state) {
    int64_t xs[2] = {60, 784}, ys[2] = {60, 10};
    rng_state = 42;
    tg_array *x = rand_array(TG_FLOAT32, 2, xs, R_POSITIVE), *y = tg_array_new(TG_FLOAT32, 2, ys);
    for (int r = 0; r < 60; r++) ((float *)tg_array_data(y))[r * 10 + r % 10] = 1;
    tg_array *in[2] = {x, y};
    static const char *const w[] = {"W1", "b1", "W2", "b2", NULL};
    tu_pair p;
    tu_train_pair(&p, TG_SOURCE_DIR "/examples/mlp.json", "train", "cuda", in, 3, w, 1e-4, 1e-5);
    if (have_gpu()) {
        /* The products and the elementwise work went to the GPU. */
        assert_true(count_op(p.f[1], "transfer") > 0);
    } else {
        assert_int_equal(count_op(p.f[1], "transfer"), 0);
    }
    tu_pair_free(&p);
    tg_array_free(x);
    tg_array_free(y);
}

/* Runs everywhere: an unknown device is an error naming it; a graph file
 * holding transfer nodes runs on the CPU as the identity. */
static void test_device_option(void **state) {
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":"
                          "{\"dtype\":\"float64\",\"shape\":[2]}}],\"nodes\":[{\"op\":\"transfer\",\"inputs\":[\"x\"],"
                          "\"outputs\":[\"t\"],\"attrs\":{\"to\":\"cuda\"}},{\"op\":\"exp\",\"inputs\":[\"t\"],"
                          "\"outputs\":[\"y\"]}],\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}");
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options bad = {.device = "tpu"};
    assert_null(tg_function_compile(g, 0, &bad, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    assert_non_null(strstr(tg_ctx_message(ctx), "'tpu'"));
    tg_ctx_clear(ctx);
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    tg_array *x = tu_f64(1, (int64_t[]){2}, (double[]){0, 1}), *y = NULL;
    assert_int_equal(tg_function_call(f, &x, &y, ctx), TG_OK);
    assert_true(fabs(tg_array_get_flat(y, 0) - 1) < 1e-15 && fabs(tg_array_get_flat(y, 1) - M_E) < 1e-15);
    tg_array_free(x);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    /* A bad transfer target is a load error naming the attribute. */
    char msg[512];
    assert_int_equal(tu_load_fail("{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":"
                                  "{\"dtype\":\"float64\",\"shape\":[2]}}],\"nodes\":[{\"op\":\"transfer\",\"inputs\":"
                                  "[\"x\"],\"outputs\":[\"t\"],\"attrs\":{\"to\":\"gpu\"}}],\"functions\":{\"f\":"
                                  "{\"inputs\":[\"x\"],\"outputs\":[\"t\"]}}}",
                                  msg, sizeof msg),
                     TG_ELOAD);
    assert_non_null(strstr(msg, "attrs.to"));
}

/* Hooks (the profiler's, the NaN guard's) read node values: on the GPU
 * they get host copies, so a hook that reads every output sees the right
 * numbers and no device pointer. */
static int sum_after(void *ud, const tg_function *f, int node, tg_array *const *in, tg_array *const *out,
                     tg_ctx *ctx) {
    if (strcmp(tg_function_node_op(f, node), "exp") == 0) *(double *)ud = tg_array_get_flat(out[0], 1);
    return 0;
}

static void test_hooks_see_host_values(void **state) {
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":"
                          "{\"dtype\":\"float64\",\"shape\":[3]}}],\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],"
                          "\"outputs\":[\"y\"]}],\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}");
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.device = "cuda"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    double seen = 0;
    tg_hooks h = {.after = sum_after, .ud = &seen};
    tg_function_set_hooks(f, &h);
    tg_array *x = tu_f64(1, (int64_t[]){3}, (double[]){0, 2, 4}), *y = NULL;
    assert_int_equal(tg_function_call(f, &x, &y, ctx), TG_OK);
    assert_true(fabs(seen - exp(2.0)) < 1e-12);
    assert_true(fabs(tg_array_get_flat(y, 2) - exp(4.0)) < 1e-12);
    tg_array_free(x);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* cuBLAS is opened with dlopen when the device is, not linked: its
 * initialisers cost every process 0.4 s and 200 MB. So it is not in this
 * process until asked for (this test runs first, before anything opens
 * the device); then it is, with every function the backend calls; and a
 * library that is not there is refused with a line naming it. None of
 * this needs a GPU. */
#ifdef TG_HAVE_CUDA
static bool mapped(const char *lib) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    bool found = false;
    assert_non_null(f);
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

static void test_cublas_opened_lazily(void **state) {
    (void)state;
    assert_false(mapped("libcublas"));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *why = NULL;
        setenv("TG_CUBLAS", "/nonexistent/libcublas.so.99", 1);
        bool ok = tg_cuda_blas_load(&why);
        _exit(!ok && why && strstr(why, "cuBLAS not found") && strstr(why, "/nonexistent/libcublas.so.99")
                  ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_false(mapped("libcublas"));
    const char *why = "unset";
    assert_true(tg_cuda_blas_load(&why));
    assert_null(why);
    assert_true(mapped("libcublas"));
    assert_true(tg_cuda_blas_load(NULL)); /* once: the same answer */
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef TG_HAVE_CUDA
        cmocka_unit_test(test_cublas_opened_lazily),
#endif
        cmocka_unit_test(test_device_option),   cmocka_unit_test(test_unary), cmocka_unit_test(test_binary_broadcast),
        cmocka_unit_test(test_reduce),          cmocka_unit_test(test_sum_to), cmocka_unit_test(test_reduce_pieces),
        cmocka_unit_test(test_reshape_on_device), cmocka_unit_test(test_nn), cmocka_unit_test(test_large_uploads),
        cmocka_unit_test(test_dot),             cmocka_unit_test(test_blas_updates), cmocka_unit_test(test_blas_zero_alpha),
        cmocka_unit_test(test_mlp_training),      cmocka_unit_test(test_float16),
        cmocka_unit_test(test_hooks_see_host_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
