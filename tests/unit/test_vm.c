/* The VM: schedules, storage, freeing, shared updates, functions from
 * intermediate variables, missing inputs, hooks, run-time errors, one
 * call at a time, updates apart from other calls, shared state's
 * references from threads. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "tg/profile.h"
#include "testutil.h"
#include "vm/vm.h"

static tg_function *compile(tg_graph *g, const char *name) {
    tg_ctx *ctx = tg_ctx_new();
    int i = tg_graph_function_find(g, name, ctx);
    tg_function *f = i >= 0 ? tg_function_compile(g, i, &(tg_compile_options){.preset = "none"}, ctx) : NULL;
    if (!f) {
        char msg[TG_CTX_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("compile failed: %s", msg);
    }
    tg_ctx_free(ctx);
    return f;
}

static tg_array *scalar(double v) { return tg_array_new_scalar(TG_FLOAT64, v); }

static double value0(const tg_array *a) { return tg_array_get_flat(a, 0); }

/* y = (x + 1) * x; z = y - 2, written out of order: the loader sorts. */
static const char *chain_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
    "\"nodes\":["
    "{\"op\":\"sub\",\"inputs\":[\"y\",{\"value\":2}],\"outputs\":[\"z\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"x1\",\"x\"],\"outputs\":[\"y\"]},"
    "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":1}],\"outputs\":[\"x1\"]}]}";

static void test_schedule_out_of_order(void **state) {
    (void)state;
    tg_graph *g = tu_load(chain_json);
    tg_function *f = compile(g, NULL);
    assert_int_equal(tg_function_input_count(f), 1);
    assert_int_equal(tg_function_output_count(f), 1);
    assert_string_equal(tg_function_output_id(f, 0), "z");
    tg_array *x = scalar(3), *out[1] = {0};
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, &x, out, ctx), 0);
    assert_true(value0(out[0]) == (3 + 1) * 3 - 2);
    tg_array_free(out[0]);
    /* A second call reuses storage and still computes. */
    tg_array_free(x);
    x = scalar(-1.5);
    assert_int_equal(tg_function_call(f, &x, out, ctx), 0);
    assert_true(value0(out[0]) == (-1.5 + 1) * -1.5 - 2);
    tg_array_free(out[0]);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* Updates apply together: {a: b, b: a} swaps, which sequential updates
 * could not do. */
static void test_updates_applied_together(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]},\"shared\":{\"data\":[1,2]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]},\"shared\":{\"data\":[10,20]}}],"
        "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"s\"]}],"
        "\"functions\":{\"swap\":{\"inputs\":[],\"outputs\":[\"s\"],"
        "\"updates\":{\"a\":\"b\",\"b\":\"a\"}}}}";
    tg_graph *g = tu_load(json);
    tg_function *f = compile(g, "swap");
    tg_array *out[1] = {0};
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, NULL, out, ctx), 0);
    assert_true(tg_array_get_flat(out[0], 1) == 22);
    tg_array_free(out[0]);
    const tg_array *a = tg_function_shared_get(f, "a"), *b = tg_function_shared_get(f, "b");
    assert_true(tg_array_get_flat(a, 0) == 10 && tg_array_get_flat(a, 1) == 20);
    assert_true(tg_array_get_flat(b, 0) == 1 && tg_array_get_flat(b, 1) == 2);
    /* The new shared values must not alias each other. */
    assert_ptr_not_equal(tg_array_data(a), tg_array_data(b));
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* Shared state is shared by every function of a graph, and a counter
 * incremented each call counts calls. */
static const char *counter_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":["
    "{\"id\":\"n\",\"type\":{\"dtype\":\"int64\",\"shape\":[]},\"shared\":{\"data\":0}}],"
    "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"n\",{\"value\":1}],\"outputs\":[\"n1\"]}],"
    "\"functions\":{\"step\":{\"inputs\":[],\"outputs\":[\"n\"],\"updates\":{\"n\":\"n1\"}},"
    "\"peek\":{\"inputs\":[],\"outputs\":[\"n\"]}}}";

static void test_shared_between_functions(void **state) {
    (void)state;
    tg_graph *g = tu_load(counter_json);
    tg_function *step = compile(g, "step"), *peek = compile(g, "peek");
    tg_ctx *ctx = tg_ctx_new();
    tg_array *out[1];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tg_function_call(step, NULL, out, ctx), 0);
        /* Outputs are computed before the updates apply. */
        assert_int_equal((int)value0(out[0]), i);
        assert_int_equal(tg_array_dtype(out[0]), TG_INT64);
        tg_array_free(out[0]);
    }
    assert_int_equal(tg_function_call(peek, NULL, out, ctx), 0);
    assert_int_equal((int)value0(out[0]), 3);
    tg_array_free(out[0]);
    tg_ctx_free(ctx);
    tg_function_free(step);
    tg_function_free(peek);
    tg_graph_free(g);
}

/* A function may start from an intermediate variable (Theano: compile
 * from intermediate variables): x1 is cut loose and becomes an argument. */
static void test_function_from_intermediate(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":["
        "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":1}],\"outputs\":[\"x1\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"x1\",{\"value\":10}],\"outputs\":[\"y\"]}],"
        "\"functions\":{\"tail\":{\"inputs\":[\"x1\"],\"outputs\":[\"y\"]}}}";
    tg_graph *g = tu_load(json);
    tg_function *f = compile(g, "tail");
    assert_int_equal(tg_function_node_count(f), 1);
    tg_array *x1 = scalar(5), *out[1];
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, &x1, out, ctx), 0);
    assert_true(value0(out[0]) == 50);
    tg_array_free(out[0]);
    tg_array_free(x1);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A needed input that the function does not list: the error names the
 * input and the node that needs it (Theano's MissingInputError). */
static void test_missing_input(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"],\"name\":\"scale\"}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}";
    char msg[TG_CTX_MSG_MAX];
    int st = tu_load_fail(json, msg, sizeof msg);
    assert_int_equal(st, TG_EMISSING);
    assert_non_null(strstr(msg, "'w'"));
    assert_non_null(strstr(msg, "scale"));
    assert_non_null(strstr(msg, "nodes[0]"));
}

/* Hooks see every node in schedule order, before and after; a hook can
 * stop the call. */
typedef struct hook_log {
    int before, after, stop_at;
    char ops[16][16];
} hook_log;

static int before_hook(void *ud, const tg_function *f, int node,
                       tg_array *const *inputs, tg_ctx *ctx) {
    hook_log *l = ud;
    (void)inputs;
    if (node == l->stop_at) {
        tg_ctx_clear(ctx);
        return TG_ESTOPPED;
    }
    snprintf(l->ops[l->before % 16], 16, "%s", tg_function_node_op(f, node));
    l->before++;
    return 0;
}

static int after_hook(void *ud, const tg_function *f, int node,
                      tg_array *const *inputs, tg_array *const *outputs,
                      tg_ctx *ctx) {
    hook_log *l = ud;
    (void)f, (void)inputs, (void)ctx;
    assert_non_null(outputs[0]);
    assert_int_equal(node, l->after);
    l->after++;
    return 0;
}

static void test_hooks(void **state) {
    (void)state;
    tg_graph *g = tu_load(chain_json);
    tg_function *f = compile(g, NULL);
    hook_log log = {.stop_at = -1};
    tg_hooks h = {before_hook, after_hook, &log};
    tg_function_set_hooks(f, &h);
    tg_array *x = scalar(2), *out[1];
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, &x, out, ctx), 0);
    tg_array_free(out[0]);
    assert_int_equal(log.before, 3);
    assert_int_equal(log.after, 3);
    assert_string_equal(log.ops[0], "add");
    assert_string_equal(log.ops[1], "mul");
    assert_string_equal(log.ops[2], "sub");
    log = (hook_log){.stop_at = 1};
    assert_int_equal(tg_function_call(f, &x, out, ctx), TG_ESTOPPED);
    tg_function_set_hooks(f, NULL);
    assert_int_equal(tg_function_call(f, &x, out, ctx), 0);
    assert_true(value0(out[0]) == 4);
    tg_array_free(out[0]);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* Intermediates are freed after their last reader: a chain of large
 * elementwise nodes holds at most a few buffers at once. Measured with a
 * counting allocator. */
static size_t live_bytes, peak_bytes;
typedef struct hdr { size_t n; size_t pad; } hdr;
static void *count_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    hdr *h = p ? (hdr *)p - 1 : NULL;
    if (h) live_bytes -= h->n;
    if (n == 0) {
        free(h);
        return NULL;
    }
    hdr *r = realloc(h, n + sizeof(hdr));
    if (!r) {
        if (h) live_bytes += h->n;
        return NULL;
    }
    r->n = n;
    live_bytes += n;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
    return r + 1;
}

static void test_intermediates_freed(void **state) {
    (void)state;
    /* 20 chained elementwise nodes over 1 MiB vectors. */
    char json[8192];
    size_t k = (size_t)snprintf(json, sizeof json,
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"x0\",\"type\":{\"dtype\":\"float64\",\"shape\":[131072]}}],"
        "\"nodes\":[");
    for (int i = 0; i < 20; i++)
        k += (size_t)snprintf(json + k, sizeof json - k,
                              "%s{\"op\":\"add\",\"inputs\":[\"x%d\",{\"value\":1}],\"outputs\":[\"x%d\"]}",
                              i ? "," : "", i, i + 1);
    snprintf(json + k, sizeof json - k, "]}");
    tg_set_allocator(count_realloc, NULL);
    live_bytes = peak_bytes = 0;
    tg_graph *g = tu_load(json);
    tg_function *f = compile(g, NULL);
    int64_t n = 131072;
    tg_array *x = tg_array_new(TG_FLOAT64, 1, &n), *out[1];
    size_t base = live_bytes;
    peak_bytes = live_bytes;
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, &x, out, ctx), 0);
    assert_true(tg_array_get_flat(out[0], 7) == 20);
    /* Without freeing, 20 MiB would be live; with it, about two vectors. */
    size_t mib = 1 << 20;
    if (peak_bytes - base > 3 * mib + mib / 2)
        fail_msg("peak %zu bytes above the inputs: intermediates not freed",
                 peak_bytes - base);
    tg_array_free(out[0]);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
}

/* The function's pool of freed buffers (tensor/pool.c): a function
 * called again with the same shapes allocates no large buffer; its
 * results are never overwritten while the caller holds them; another
 * shape's buffers are let go after a call that did not use them;
 * TG_POOL_MIB=0 turns it off; tg_function_trim empties it. Counted with
 * the counting allocator. */
static int large_allocs;
static void *count_large(void *ud, void *p, size_t n) {
    if (!p && n > 4096) large_allocs++;
    return count_realloc(ud, p, n);
}

/* y = exp(-((x + 1) * 2)) ... five nodes, each a fresh vector. */
static const char *pool_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],"
    "\"nodes\":["
    "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":1}],\"outputs\":[\"a\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"a\",{\"value\":2}],\"outputs\":[\"b\"]},"
    "{\"op\":\"neg\",\"inputs\":[\"b\"],\"outputs\":[\"c\"]},"
    "{\"op\":\"exp\",\"inputs\":[\"c\"],\"outputs\":[\"d\"]},"
    "{\"op\":\"sub\",\"inputs\":[\"d\",\"x\"],\"outputs\":[\"y\"]}]}";

static tg_array *ramp(int64_t n, double v0) {
    tg_array *x = tg_array_new(TG_FLOAT64, 1, &n);
    for (int64_t i = 0; i < n; i++) ((double *)tg_array_data(x))[i] = v0 + (double)(i % 7) * 0.25;
    return x;
}

/* exp(-2 (x + 1)) - x at element i, by hand */
static void check_pool_out(const tg_array *y, int64_t n, double v0) {
    assert_int_equal(tg_array_size(y), n);
    for (int64_t i = 0; i < n; i += 997) {
        double x = v0 + (double)(i % 7) * 0.25;
        assert_true(fabs(tg_array_get_flat(y, i) - (exp(-2 * (x + 1)) - x)) < 1e-12);
    }
}

static void test_buffer_pool(void **state) {
    (void)state;
    tg_set_allocator(count_large, NULL);
    live_bytes = 0;
    tg_graph *g = tu_load(pool_json);
    tg_function *f = compile(g, NULL);
    tg_ctx *ctx = tg_ctx_new();
    const int64_t n = 100000; /* 800 kB vectors */
    tg_array *x = ramp(n, -1.5), *y = NULL;
    assert_int_equal(tg_function_call(f, &x, &y, ctx), 0);
    check_pool_out(y, n, -1.5);
    tg_array_free(y);
    tg_pool_stats pc;
    tg_function_pool_stats(f, &pc);
    assert_true(pc.buffers >= 1 && pc.bytes >= (int64_t)n * 8);
    /* Again: from the third call on, nothing large is allocated (the
     * output's slot array is reused once the caller let it go, the rest
     * comes from the pool; the first call's output took a pooled buffer,
     * so the second still allocates one). */
    for (int k = 0; k < 3; k++) {
        large_allocs = 0;
        assert_int_equal(tg_function_call(f, &x, &y, ctx), 0);
        if (k) assert_int_equal(large_allocs, 0);
        check_pool_out(y, n, -1.5);
        tg_array_free(y);
    }
    tg_function_pool_stats(f, &pc);
    assert_true(pc.reused >= 3);
    /* A result the caller holds is never written again. */
    tg_array *x2 = ramp(n, 0.5), *y1 = NULL, *y2 = NULL;
    assert_int_equal(tg_function_call(f, &x, &y1, ctx), 0);
    assert_int_equal(tg_function_call(f, &x2, &y2, ctx), 0);
    assert_int_equal(tg_function_call(f, &x2, &y, ctx), 0);
    check_pool_out(y1, n, -1.5);
    check_pool_out(y2, n, 0.5);
    check_pool_out(y, n, 0.5);
    assert_true(tg_array_data(y1) != tg_array_data(y2) && tg_array_data(y2) != tg_array_data(y));
    tg_array_free(y1);
    tg_array_free(y2);
    tg_array_free(y);
    /* Another length: the old length's buffers sat through the call and
     * are gone after it; what is pooled is the new length's. */
    const int64_t m = 30000;
    tg_array *xs = ramp(m, 2.0);
    assert_int_equal(tg_function_call(f, &xs, &y, ctx), 0);
    check_pool_out(y, m, 2.0);
    tg_array_free(y);
    tg_function_pool_stats(f, &pc);
    assert_true(pc.buffers >= 1);
    assert_true(pc.bytes % ((int64_t)m * 8) == 0 && pc.bytes <= (int64_t)m * 8 * 5);
    /* tg_function_trim gives it back */
    size_t before = live_bytes;
    tg_function_trim(f);
    tg_function_pool_stats(f, &pc);
    assert_int_equal(pc.buffers, 0);
    assert_int_equal(pc.bytes, 0);
    assert_true(live_bytes + (size_t)m * 8 <= before);
    tg_function_free(f);
    /* TG_POOL_MIB=0: every call allocates its intermediates again. */
    setenv("TG_POOL_MIB", "0", 1);
    f = compile(g, NULL);
    unsetenv("TG_POOL_MIB");
    for (int k = 0; k < 3; k++) {
        large_allocs = 0;
        assert_int_equal(tg_function_call(f, &x, &y, ctx), 0);
        check_pool_out(y, n, -1.5);
        tg_array_free(y);
        if (k) assert_true(large_allocs >= 3);
    }
    tg_function_pool_stats(f, &pc);
    assert_int_equal(pc.budget, 0);
    assert_int_equal(pc.buffers, 0);
    tg_function_free(f);
    tg_array_free(x);
    tg_array_free(x2);
    tg_array_free(xs);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    assert_int_equal(live_bytes, 0);
    tg_set_allocator(NULL, NULL);
}

/* A run-time failure names the node and its trace, and leaves shared
 * values unchanged. */
static void test_runtime_error_keeps_state(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"d\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}},"
        "{\"id\":\"n\",\"type\":{\"dtype\":\"int64\",\"shape\":[]},\"shared\":{\"data\":7}}],"
        "\"nodes\":[{\"op\":\"int_div\",\"inputs\":[\"n\",\"d\"],\"outputs\":[\"q\"],"
        "\"trace\":[{\"file\":\"model.py\",\"line\":12,\"function\":\"build\",\"code\":\"q = n // d\"}]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"d\"],\"outputs\":[\"q\"],\"updates\":{\"n\":\"q\"}}}}";
    tg_graph *g = tu_load(json);
    tg_function *f = compile(g, "f");
    tg_array *d = tg_array_new_scalar(TG_INT64, 0), *out[1];
    tg_ctx *ctx = tg_ctx_new();
    assert_int_not_equal(tg_function_call(f, &d, out, ctx), 0);
    const char *msg = tg_ctx_message(ctx);
    assert_non_null(strstr(msg, "division by zero"));
    assert_non_null(strstr(msg, "nodes[0]"));
    assert_non_null(strstr(msg, "model.py:12"));
    assert_true(tg_array_get_flat(tg_function_shared_get(f, "n"), 0) == 7);
    tg_array_free(d);
    d = tg_array_new_scalar(TG_INT64, 2);
    assert_int_equal(tg_function_call(f, &d, out, ctx), 0);
    assert_true(value0(out[0]) == 3);
    assert_true(tg_array_get_flat(tg_function_shared_get(f, "n"), 0) == 3);
    tg_array_free(out[0]);
    tg_array_free(d);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* ---- shared values overwritten in place (the SGD step's gemm) ---- */

enum { SR = 32, SC = 24, SB = 5 }; /* W, V: SR x SC float64 (6 KiB: past
                                      what the VM keeps, so the pass acts) */

static double w0(int i, int j) { return 0.01 * (i - j) + 0.5 * sin(i * 7 + j); }
static double v0(int i, int j) { return 0.02 * (i + j) - 0.25 * cos(i + 3 * j); }

/* W <- W - 0.1 x^T g and V <- V - 0.1 x^T h, the cost reading both: the
 * optimizer makes each update one gemm over its weights. "peek" also
 * returns W as it was. */
static char *sgd_json(void) {
    tg_str s = {0};
    tg_str_addf(&s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                    "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,%d]}},"
                    "{\"id\":\"g\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,%d]}},"
                    "{\"id\":\"h\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,%d]}}",
                SR, SC, SC);
    for (int w = 0; w < 2; w++) {
        tg_str_addf(&s, ",{\"id\":\"%s\",\"type\":{\"dtype\":\"float64\",\"shape\":[%d,%d]},\"shared\":{\"data\":[",
                    w ? "V" : "W", SR, SC);
        for (int i = 0; i < SR; i++) {
            tg_str_addf(&s, "%s[", i ? "," : "");
            for (int j = 0; j < SC; j++) tg_str_addf(&s, "%s%.17g", j ? "," : "", w ? v0(i, j) : w0(i, j));
            tg_str_addf(&s, "]");
        }
        tg_str_addf(&s, "]}}");
    }
    tg_str_addf(&s, "],\"nodes\":["
                    "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xT\"]},"
                    "{\"op\":\"dot\",\"inputs\":[\"xT\",\"g\"],\"outputs\":[\"d\"]},"
                    "{\"op\":\"mul\",\"inputs\":[\"d\",{\"value\":0.1}],\"outputs\":[\"sd\"]},"
                    "{\"op\":\"sub\",\"inputs\":[\"W\",\"sd\"],\"outputs\":[\"W1\"]},"
                    "{\"op\":\"dot\",\"inputs\":[\"xT\",\"h\"],\"outputs\":[\"e\"]},"
                    "{\"op\":\"mul\",\"inputs\":[\"e\",{\"value\":0.1}],\"outputs\":[\"se\"]},"
                    "{\"op\":\"sub\",\"inputs\":[\"V\",\"se\"],\"outputs\":[\"V1\"]},"
                    "{\"op\":\"dot\",\"inputs\":[\"x\",\"W\"],\"outputs\":[\"y\"]},"
                    "{\"op\":\"dot\",\"inputs\":[\"x\",\"V\"],\"outputs\":[\"yv\"]},"
                    "{\"op\":\"add\",\"inputs\":[\"y\",\"yv\"],\"outputs\":[\"yy\"]},"
                    "{\"op\":\"mul\",\"inputs\":[\"yy\",\"g\"],\"outputs\":[\"c\"]},"
                    "{\"op\":\"sum\",\"inputs\":[\"c\"],\"outputs\":[\"cost\"]}],"
                    "\"functions\":{"
                    "\"step\":{\"inputs\":[\"x\",\"g\",\"h\"],\"outputs\":[\"cost\"],"
                    "\"updates\":{\"W\":\"W1\",\"V\":\"V1\"}},"
                    "\"peek\":{\"inputs\":[\"x\",\"g\",\"h\"],\"outputs\":[\"cost\",\"W\"],"
                    "\"updates\":{\"W\":\"W1\"}}}}");
    return s.s;
}

static tg_array *batch(int rows, int cols, double scale) {
    tg_array *a = tg_array_new(TG_FLOAT64, 2, (int64_t[]){rows, cols});
    double *p = tg_array_data(a);
    for (int i = 0; i < rows * cols; i++) p[i] = scale * sin(0.37 * i + scale);
    return a;
}

/* m <- m - 0.1 x^T g by loops. */
static void sgd_ref(double *m, const tg_array *x, const tg_array *g) {
    const double *px = tg_array_data((tg_array *)x), *pg = tg_array_data((tg_array *)g);
    int64_t n = tg_array_shape(x)[0];
    for (int i = 0; i < SR; i++)
        for (int j = 0; j < SC; j++) {
            double acc = 0;
            for (int64_t b = 0; b < n; b++) acc += px[b * SR + i] * pg[b * SC + j];
            m[i * SC + j] -= 0.1 * acc;
        }
}

static void assert_matrix(const tg_array *a, const double *want, double tol) {
    assert_int_equal(tg_array_size(a), SR * SC);
    for (int i = 0; i < SR * SC; i++)
        if (fabs(tg_array_get_flat(a, i) - want[i]) > tol * (1 + fabs(want[i])))
            fail_msg("element %d: %.17g, want %.17g", i, tg_array_get_flat(a, i), want[i]);
}

/* a's values, bit for bit those of b */
static void assert_same(const tg_array *a, const tg_array *b) {
    assert_int_equal(tg_array_size(a), tg_array_size(b));
    assert_memory_equal(tg_array_data((tg_array *)a), tg_array_data((tg_array *)b),
                        (size_t)tg_array_size(a) * sizeof(double));
}

static tg_array *shared_copy(const tg_function *f, const char *id) {
    const tg_array *a = tg_function_shared_get(f, id);
    return tg_array_copy(a, tg_array_dtype(a));
}

static const void *shared_data(const tg_function *f, const char *id) {
    return tg_array_data((tg_array *)tg_function_shared_get(f, id));
}

/* One call of f on in, then the same SGD steps by loops on W and V (V's
 * update from in[2]; none when V is NULL): the shared values must agree. */
static void step_checked(tg_function *f, tg_array *const *in, double *W, double *V, tg_ctx *ctx) {
    tg_array *out[1] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), 0);
    tg_array_free(out[0]);
    sgd_ref(W, in[0], in[1]);
    assert_matrix(tg_function_shared_get(f, "W"), W, 1e-12);
    if (!V) return;
    sgd_ref(V, in[0], in[2]);
    assert_matrix(tg_function_shared_get(f, "V"), V, 1e-12);
}

static int count_before(void *ud, const tg_function *f, int node, tg_array *const *in, tg_ctx *ctx) {
    (void)f, (void)node, (void)in, (void)ctx;
    ++*(int *)ud;
    return 0;
}

static void test_shared_updated_in_place(void **state) {
    (void)state;
    char *json = sgd_json();
    tg_graph *g = tu_load(json);
    tg_free(json);
    tg_ctx *ctx = tg_ctx_new();
    int fi = tg_graph_function_find(g, "step", ctx);
    tg_function *f = tg_function_compile(g, fi, &(tg_compile_options){.preset = "fast_run"}, ctx);
    assert_non_null(f);
    double W[SR * SC], V[SR * SC];
    for (int i = 0; i < SR; i++)
        for (int j = 0; j < SC; j++) W[i * SC + j] = w0(i, j), V[i * SC + j] = v0(i, j);
    tg_array *in[3] = {batch(SB, SR, 1.0), batch(SB, SC, 0.5), batch(SB, SC, -0.75)}, *out[2] = {0};
    /* Each update is a gemm over its weights, in place, run last. */
    int n = tg_function_node_count(f), ngemm = 0;
    for (int k = 0; k < n; k++) ngemm += !strcmp(tg_function_node_op(f, k), "gemm");
    assert_int_equal(ngemm, 2);
    assert_string_equal(tg_function_node_op(f, n - 1), "gemm");
    assert_string_equal(tg_function_node_op(f, n - 2), "gemm");
    assert_true(tg_node_commits(f->sched[n - 1].node) && tg_node_commits(f->sched[n - 2].node));
    const void *pw = shared_data(f, "W"), *pv = shared_data(f, "V");
    for (int step = 0; step < 3; step++) {
        step_checked(f, in, W, V, ctx);
        /* written where they were */
        assert_ptr_equal(shared_data(f, "W"), pw);
        assert_ptr_equal(shared_data(f, "V"), pv);
    }

    /* A caller holding the value: it keeps what it holds; the update is
     * made beside it. */
    tg_array *held = tg_array_ref((tg_array *)tg_function_shared_get(f, "W")), *was = shared_copy(f, "W");
    step_checked(f, in, W, V, ctx);
    assert_same(held, was);
    tg_array_free(was);
    assert_ptr_not_equal(shared_data(f, "W"), tg_array_data(held));
    assert_ptr_equal(shared_data(f, "V"), pv);
    tg_array_free(held);

    /* A call that fails in the last gemm (h's rows do not match x's)
     * changes neither variable, though W's gemm could run in place. */
    tg_array *wkeep = shared_copy(f, "W"), *vkeep = shared_copy(f, "V");
    tg_array *bad[3] = {in[0], in[1], batch(SB - 1, SC, -0.75)};
    assert_int_not_equal(tg_function_call(f, bad, out, ctx), 0);
    assert_int_equal(tg_ctx_status(ctx), TG_ESHAPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "V1"));
    tg_array_free(bad[2]);
    assert_same(tg_function_shared_get(f, "W"), wkeep);
    assert_same(tg_function_shared_get(f, "V"), vkeep);
    tg_array_free(wkeep);
    tg_array_free(vkeep);
    pw = shared_data(f, "W");
    step_checked(f, in, W, V, ctx);
    assert_ptr_equal(shared_data(f, "W"), pw);

    /* With hooks (a debugger may stop the call at any node) nothing is
     * overwritten: the update goes to a buffer of its own. */
    int seen = 0;
    tg_function_set_hooks(f, &(tg_hooks){count_before, NULL, &seen});
    step_checked(f, in, W, V, ctx);
    assert_int_equal(seen, n);
    assert_ptr_not_equal(shared_data(f, "W"), pw);
    tg_function_set_hooks(f, NULL);

    /* The profiler only watches: its calls overwrite as plain ones do,
     * and it reports the gemms' outputs as their inputs' buffers. */
    step_checked(f, in, W, V, ctx); /* in place again */
    pw = shared_data(f, "W");
    tg_profile *prof = tg_profile_new(f, 0, ctx);
    assert_non_null(prof);
    assert_int_equal(tg_profile_call(prof, in, out, ctx), 0);
    tg_array_free(out[0]);
    sgd_ref(W, in[0], in[1]);
    sgd_ref(V, in[0], in[2]);
    assert_matrix(tg_function_shared_get(f, "W"), W, 1e-12);
    assert_matrix(tg_function_shared_get(f, "V"), V, 1e-12);
    assert_ptr_equal(shared_data(f, "W"), pw);
    for (int k = n - 2; k < n; k++) {
        tg_profile_output po;
        assert_int_equal(tg_profile_output_get(prof, k, 0, &po), 0);
        assert_int_equal(po.kind, TG_PROFILE_OUT_INPLACE);
    }
    tg_profile_free(prof);
    tg_function_free(f);

    /* "peek" returns W as it was: no gemm may overwrite it. */
    fi = tg_graph_function_find(g, "peek", ctx);
    f = tg_function_compile(g, fi, &(tg_compile_options){.preset = "fast_run"}, ctx);
    assert_non_null(f);
    for (int k = 0; k < tg_function_node_count(f); k++) assert_false(tg_node_commits(f->sched[k].node));
    was = shared_copy(f, "W");
    tg_array *vwas = shared_copy(f, "V");
    assert_int_equal(tg_function_call(f, in, out, ctx), 0);
    sgd_ref(W, in[0], in[1]);
    assert_same(out[1], was);
    assert_matrix(tg_function_shared_get(f, "W"), W, 1e-12);
    assert_same(tg_function_shared_get(f, "V"), vwas);
    tg_array_free(was);
    tg_array_free(vwas);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* V's update reads W, which W's own update would overwrite: W's gemm
 * copies (the rule: no node that could overwrite a shared variable reads
 * it), V's works in place, and V is computed from W as it was. */
static void test_shared_read_by_other_update(void **state) {
    (void)state;
    char *json = sgd_json();
    /* V1 = V - 0.1 dot(W, k) in place of V - 0.1 x^T h */
    tg_str s = {0};
    const char *cut = strstr(json, "{\"op\":\"dot\",\"inputs\":[\"xT\",\"h\"]");
    assert_non_null(cut);
    tg_str_addf(&s, "%.*s{\"op\":\"dot\",\"inputs\":[\"W\",\"k\"]%s", (int)(cut - json), json,
                cut + strlen("{\"op\":\"dot\",\"inputs\":[\"xT\",\"h\"]"));
    tg_free(json);
    char *k_decl = strstr(s.s, "{\"id\":\"h\"");
    assert_non_null(k_decl);
    tg_str t = {0};
    tg_str_addf(&t, "%.*s{\"id\":\"k\",\"type\":{\"dtype\":\"float64\",\"shape\":[%d,%d]}},%s", (int)(k_decl - s.s),
                s.s, SC, SC, k_decl);
    tg_str_free(&s);
    /* "step" reads k where it read h */
    char *inputs = strstr(t.s, "\"step\":{\"inputs\":[\"x\",\"g\",\"h\"]");
    assert_non_null(inputs);
    inputs[strlen("\"step\":{\"inputs\":[\"x\",\"g\",\"")] = 'k';
    tg_graph *g = tu_load(t.s);
    tg_str_free(&t);
    tg_ctx *ctx = tg_ctx_new();
    int fi = tg_graph_function_find(g, "step", ctx);
    tg_function *f = tg_function_compile(g, fi, &(tg_compile_options){.preset = "fast_run"}, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    int n = tg_function_node_count(f), commits = 0;
    for (int i = 0; i < n; i++) {
        const tg_node *nd = f->sched[i].node;
        if (!tg_node_commits(nd)) continue;
        commits++;
        assert_string_equal(nd->inputs[nd->inplace[0]]->id, "V");
    }
    assert_int_equal(commits, 1);
    double W[SR * SC], V[SR * SC];
    for (int i = 0; i < SR; i++)
        for (int j = 0; j < SC; j++) W[i * SC + j] = w0(i, j), V[i * SC + j] = v0(i, j);
    tg_array *in[3] = {batch(SB, SR, 1.0), batch(SB, SC, 0.5), batch(SC, SC, 0.3)}, *out[1] = {0};
    const double *pk = tg_array_data(in[2]);
    for (int step = 0; step < 2; step++) {
        assert_int_equal(tg_function_call(f, in, out, ctx), 0);
        tg_array_free(out[0]);
        for (int i = 0; i < SR; i++) /* V -= 0.1 W k, with W before its step */
            for (int j = 0; j < SC; j++) {
                double acc = 0;
                for (int q = 0; q < SC; q++) acc += W[i * SC + q] * pk[q * SC + j];
                V[i * SC + j] -= 0.1 * acc;
            }
        sgd_ref(W, in[0], in[1]);
        assert_matrix(tg_function_shared_get(f, "W"), W, 1e-12);
        assert_matrix(tg_function_shared_get(f, "V"), V, 1e-12);
    }
    for (int i = 0; i < 3; i++) tg_array_free(in[i]);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* Inputs: safe casts are accepted (int32 -> float64), unsafe ones and
 * wrong shapes refused with the input named. */
static void test_input_conversion(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":2}],\"outputs\":[\"y\"]}]}";
    tg_graph *g = tu_load(json);
    tg_function *f = compile(g, NULL);
    tg_ctx *ctx = tg_ctx_new();
    int64_t two = 2, three = 3;
    int32_t idata[2] = {3, -4};
    tg_array *xi = tg_array_new_from(TG_INT32, 1, &two, idata), *out[1];
    assert_int_equal(tg_function_call(f, &xi, out, ctx), 0);
    assert_int_equal(tg_array_dtype(out[0]), TG_FLOAT64);
    assert_true(tg_array_get_flat(out[0], 1) == -8);
    tg_array_free(out[0]);
    tg_array *xf = tg_array_new(TG_FLOAT32, 1, &two);
    tg_array *xw = tg_array_new(TG_FLOAT64, 1, &three);
    /* float32 -> float64 is safe too. */
    assert_int_equal(tg_function_call(f, &xf, out, ctx), 0);
    tg_array_free(out[0]);
    assert_int_equal(tg_function_call(f, &xw, out, ctx), TG_ESHAPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "'x'"));
    tg_array_free(xi);
    tg_array_free(xf);
    tg_array_free(xw);
    tg_function_free(f);
    tg_graph_free(g);
    /* float64 -> float32 is not safe: refused, as Theano refused. */
    const char *json32 =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[null]}}],"
        "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}";
    g = tu_load(json32);
    f = compile(g, NULL);
    tg_array *x64 = tg_array_new(TG_FLOAT64, 1, &three);
    assert_int_equal(tg_function_call(f, &x64, out, ctx), TG_ETYPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "'x'"));
    assert_non_null(strstr(tg_ctx_message(ctx), "float64"));
    tg_array_free(x64);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A long elementwise chain, 4,000 nodes: the optimizer fuses nearly all
 * of it, and the compiled function keeps an arena of what is left, not
 * of everything the clone and the rewrites made (compared with preset
 * none, where every node lives); the values are those of the chain
 * worked out here in plain C. */
static void test_optimized_function_memory(void **state) {
    (void)state;
    enum { N = 4000 };
    size_t cap = (size_t)N * 96 + 512, len = 0;
    char *js = malloc(cap);
    len += (size_t)snprintf(js + len, cap - len,
                            "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\","
                            "\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],\"nodes\":[");
    static const char *ops[4] = {"add", "mul", "tanh", "sub"};
    for (int i = 0; i < N; i++) {
        char prev[16];
        snprintf(prev, sizeof prev, i ? "v%d" : "x", i - 1);
        if (i % 4 == 2)
            len += (size_t)snprintf(js + len, cap - len, "%s{\"op\":\"tanh\",\"inputs\":[\"%s\"],\"outputs\":[\"v%d\"]}",
                                    i ? "," : "", prev, i);
        else
            len += (size_t)snprintf(js + len, cap - len, "%s{\"op\":\"%s\",\"inputs\":[\"%s\",\"x\"],\"outputs\":[\"v%d\"]}",
                                    i ? "," : "", ops[i % 4], prev, i);
    }
    snprintf(js + len, cap - len, "]}");
    tg_graph *g = tu_load(js);
    free(js);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *fn = tg_function_compile(g, 0, &(tg_compile_options){.preset = "none"}, ctx);
    tg_function *fr = tg_function_compile(g, 0, NULL, ctx);
    if (!fn || !fr) fail_msg("%s", tg_ctx_message(ctx));
    size_t live_n, held_n, live_r, held_r;
    tg_arena_usage(fn->fg->arena, &live_n, &held_n);
    tg_arena_usage(fr->fg->arena, &live_r, &held_r);
    assert_true(held_n > ((size_t)2 << 20)); /* the whole chain: megabytes */
    assert_true(fr->fg->nnodes < N / 20);
    assert_true(held_r < ((size_t)1 << 18)); /* what is left: kilobytes */
    assert_true(live_r <= held_r);
    int64_t shape[1] = {3};
    double xs[3] = {0.3, -0.7, 1.9};
    tg_array *x = tu_f64(1, shape, xs), *out = NULL;
    double want[3];
    for (int e = 0; e < 3; e++) {
        double v = xs[e];
        for (int i = 0; i < N; i++) {
            switch (i % 4) {
            case 0: v = v + xs[e]; break;
            case 1: v = v * xs[e]; break;
            case 2: v = tanh(v); break;
            default: v = v - xs[e]; break;
            }
        }
        want[e] = v;
    }
    tg_array *w = tu_f64(1, shape, want);
    for (int which = 0; which < 2; which++) {
        assert_int_equal(tg_function_call(which ? fr : fn, &x, &out, ctx), 0);
        tu_assert_close(out, w, 1e-12, 1e-12);
        tg_array_free(out);
    }
    tg_array_free(w);
    tg_array_free(x);
    tg_function_free(fn);
    tg_function_free(fr);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* One call at a time: a hook of a call that calls the function again,
 * and a second thread calling it while the first one's call runs, get
 * TG_EBUSY and one line; the running call is unharmed, and the function
 * takes calls again once it returns (also after a failed call). */
typedef struct busy_state {
    tg_function *f;
    int inner_rc;
    char inner_msg[TG_CTX_MSG_MAX];
    /* the two-thread case */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool inside, tried, threaded;
} busy_state;

/* The second call: its status and message into b. */
static void try_call(busy_state *b, double v) {
    tg_array *x = scalar(v), *out[1] = {0};
    tg_ctx *c2 = tg_ctx_new();
    b->inner_rc = tg_function_call(b->f, &x, out, c2);
    snprintf(b->inner_msg, sizeof b->inner_msg, "%s", tg_ctx_message(c2));
    tg_array_free(out[0]);
    tg_array_free(x);
    tg_ctx_free(c2);
}

static int reenter_hook(void *ud, const tg_function *f, int node, tg_array *const *inputs, tg_ctx *ctx) {
    (void)f;
    (void)inputs;
    (void)ctx;
    busy_state *b = ud;
    if (node != 0) return 0;
    if (b->threaded) {
        /* hold the call until the other thread has tried */
        pthread_mutex_lock(&b->mu);
        b->inside = true;
        pthread_cond_broadcast(&b->cv);
        while (!b->tried) pthread_cond_wait(&b->cv, &b->mu);
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    try_call(b, 5);
    return 0;
}

static void *second_caller(void *ud) {
    busy_state *b = ud;
    pthread_mutex_lock(&b->mu);
    while (!b->inside) pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    try_call(b, 7);
    pthread_mutex_lock(&b->mu);
    b->tried = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void test_one_call_at_a_time(void **state) {
    (void)state;
    tg_graph *g = tu_load(chain_json);
    tg_function *f = compile(g, NULL);
    busy_state b = {.f = f, .inner_rc = 99};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    tg_function_set_hooks(f, &(tg_hooks){.before = reenter_hook, .ud = &b});
    tg_array *x = scalar(3), *out[1] = {0};
    tg_ctx *ctx = tg_ctx_new();

    /* from a hook of the running call */
    assert_int_equal(tg_function_call(f, &x, out, ctx), TG_OK);
    assert_true(value0(out[0]) == (3 + 1) * 3 - 2);
    tg_array_free(out[0]);
    out[0] = NULL;
    assert_int_equal(b.inner_rc, TG_EBUSY);
    assert_non_null(strstr(b.inner_msg, "already running a call"));

    /* from another thread while the call runs */
    b.threaded = true;
    b.inner_rc = 99;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, second_caller, &b), 0);
    assert_int_equal(tg_function_call(f, &x, out, ctx), TG_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(b.inner_rc, TG_EBUSY);
    assert_true(value0(out[0]) == (3 + 1) * 3 - 2);
    tg_array_free(out[0]);
    out[0] = NULL;

    /* free again after a call that failed (a missing input) */
    tg_function_set_hooks(f, NULL);
    tg_array *none[1] = {NULL};
    assert_int_not_equal(tg_function_call(f, none, out, ctx), TG_OK);
    assert_int_equal(tg_function_call(f, &x, out, ctx), TG_OK);
    assert_true(value0(out[0]) == (3 + 1) * 3 - 2);
    tg_array_free(out[0]);

    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A call that updates a shared variable runs apart from every other call
 * that reads or updates it: `step` (n <- n + 1) and `look` (n + 10) of
 * one graph, each calling the other from a hook of its running call (as
 * another thread would meanwhile), get TG_EBUSY and a line naming the
 * variable; two readers run together; after the refusals every call
 * works and the counter counts the steps that ran. */
static const char *claim_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":["
    "{\"id\":\"n\",\"type\":{\"dtype\":\"int64\",\"shape\":[]},\"shared\":{\"data\":0}}],"
    "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"n\",{\"value\":1}],\"outputs\":[\"n1\"]},"
    "{\"op\":\"add\",\"inputs\":[\"n\",{\"value\":10}],\"outputs\":[\"n10\"]}],"
    "\"functions\":{\"step\":{\"inputs\":[],\"outputs\":[\"n1\"],\"updates\":{\"n\":\"n1\"}},"
    "\"look\":{\"inputs\":[],\"outputs\":[\"n10\"]}}}";

typedef struct claim_state {
    tg_function *other;
    int rc;
    double value;
    char msg[TG_CTX_MSG_MAX];
} claim_state;

static int claim_hook(void *ud, const tg_function *f, int node, tg_array *const *inputs, tg_ctx *ctx) {
    (void)f;
    (void)node;
    (void)inputs;
    (void)ctx;
    claim_state *c = ud;
    tg_array *out[1] = {0};
    tg_ctx *c2 = tg_ctx_new();
    c->rc = tg_function_call(c->other, NULL, out, c2);
    c->value = out[0] ? value0(out[0]) : -1;
    snprintf(c->msg, sizeof c->msg, "%s", tg_ctx_message(c2));
    tg_array_free(out[0]);
    tg_ctx_free(c2);
    return 0;
}

static double call0(tg_function *f) {
    tg_array *out[1] = {0};
    tg_ctx *ctx = tg_ctx_new();
    int rc = tg_function_call(f, NULL, out, ctx);
    if (rc) fail_msg("call of %s: %s", tg_function_name(f), tg_ctx_message(ctx));
    double v = value0(out[0]);
    tg_array_free(out[0]);
    tg_ctx_free(ctx);
    return v;
}

static void test_update_excludes_other_calls(void **state) {
    (void)state;
    tg_graph *g = tu_load(claim_json);
    tg_function *step = compile(g, "step"), *look = compile(g, "look"), *look2 = compile(g, "look");

    /* a reader while the update runs */
    claim_state c = {.other = look, .rc = 99};
    tg_function_set_hooks(step, &(tg_hooks){.before = claim_hook, .ud = &c});
    assert_true(call0(step) == 1);
    assert_int_equal(c.rc, TG_EBUSY);
    assert_non_null(strstr(c.msg, "function 'look' reads shared variable 'n'"));
    assert_non_null(strstr(c.msg, "is updating"));
    tg_function_set_hooks(step, NULL);

    /* an update while a reader runs */
    c = (claim_state){.other = step, .rc = 99};
    tg_function_set_hooks(look, &(tg_hooks){.before = claim_hook, .ud = &c});
    assert_true(call0(look) == 1 + 10);
    assert_int_equal(c.rc, TG_EBUSY);
    assert_non_null(strstr(c.msg, "function 'step' updates shared variable 'n'"));
    assert_non_null(strstr(c.msg, "is reading"));

    /* two readers at once */
    c = (claim_state){.other = look2, .rc = 99};
    assert_true(call0(look) == 1 + 10);
    assert_int_equal(c.rc, TG_OK);
    assert_true(c.value == 1 + 10);
    tg_function_set_hooks(look, NULL);

    /* nothing left claimed: the refused step did not count */
    assert_true(call0(step) == 2);
    assert_true(call0(look) == 2 + 10);
    assert_true(call0(look2) == 2 + 10);
    tg_function_free(step);
    tg_function_free(look);
    tg_function_free(look2);
    tg_graph_free(g);
}

/* Copies of a function in several threads share its shared state
 * (tg_function_copy), so taking and dropping references to it from two
 * threads at once must count every one: with a plain counter the two
 * threads' increments and decrements overwrote each other (a copy freed
 * in one thread while another made one freed the state under the
 * others: "malloc(): unaligned tcache chunk detected"). */
enum { REF_ROUNDS = 5000000 };

static atomic_int ref_ready;

static void *ref_many(void *ud) {
    tg_shared *s = ud;
    /* start together */
    atomic_fetch_add(&ref_ready, 1);
    while (atomic_load(&ref_ready) < 2) {
    }
    for (int i = 0; i < REF_ROUNDS; i++) tg_shared_ref(s);
    return NULL;
}

static void test_shared_refcount_threads(void **state) {
    (void)state;
    tg_type t = {.dtype = TG_FLOAT64, .ndim = 0};
    tg_shared *s = tg_shared_new("w", &t, NULL);
    assert_non_null(s);
    /* two threads take references at once: every one must count (a lost
     * one shows as a smaller total, and would have freed the state one
     * release early) */
    pthread_t a, b;
    atomic_store(&ref_ready, 0);
    assert_int_equal(pthread_create(&a, NULL, ref_many, s), 0);
    assert_int_equal(pthread_create(&b, NULL, ref_many, s), 0);
    assert_int_equal(pthread_join(a, NULL), 0);
    assert_int_equal(pthread_join(b, NULL), 0);
    assert_int_equal((long)atomic_load(&s->refcount), 1 + 2L * REF_ROUNDS);
    for (long i = 0; i < 2L * REF_ROUNDS; i++) tg_shared_unref(s);
    tg_shared_unref(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_out_of_order),
        cmocka_unit_test(test_updates_applied_together),
        cmocka_unit_test(test_shared_between_functions),
        cmocka_unit_test(test_function_from_intermediate),
        cmocka_unit_test(test_missing_input),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_intermediates_freed),
        cmocka_unit_test(test_buffer_pool),
        cmocka_unit_test(test_runtime_error_keeps_state),
        cmocka_unit_test(test_shared_updated_in_place),
        cmocka_unit_test(test_shared_read_by_other_update),
        cmocka_unit_test(test_input_conversion),
        cmocka_unit_test(test_optimized_function_memory),
        cmocka_unit_test(test_one_call_at_a_time),
        cmocka_unit_test(test_update_excludes_other_calls),
        cmocka_unit_test(test_shared_refcount_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
