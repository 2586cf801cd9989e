/* VM dispatch: a chain of 10,000 scalar float64 `add` nodes, called many
 * times; nanoseconds per node. Beside it, the same chain in NumPy (float64
 * scalars) and in plain Python floats, measured in the same run. Target:
 * at most 50 ns per node.
 *
 * Then small kernels: one-node functions on inputs far below the size
 * where kernels go parallel (softmax of a batch of 1, a 2x2 pool of an
 * 8x8 image, a batch of 4x4 products, ...), ns per call, against the same
 * expression in NumPy (peers/vm_small.py). What this watches is the fixed
 * cost of a kernel: a call, a result reused, and no OpenMP team when one
 * thread will do (libgomp's costs a system call). */
#include "bench_common.h"

typedef struct small_case {
    const char *name; /* the peer's name for it too */
    const char *dtype;
    int ndim;
    int64_t shape[4];
    const char *node; /* the node's op and attrs, reading x (and c, a constant of x's shape) */
} small_case;

static const small_case small_cases[] = {
    {"softmax", "float32", 2, {1, 10}, "\"op\":\"softmax\",\"inputs\":[\"x\"]"},
    {"log_softmax", "float32", 2, {1, 10}, "\"op\":\"log_softmax\",\"inputs\":[\"x\"]"},
    {"crossentropy", "float64", 2, {4, 10}, "\"op\":\"categorical_crossentropy\",\"inputs\":[\"x\",\"c\"]"},
    {"sum_axis1", "float64", 2, {4, 10}, "\"op\":\"sum\",\"inputs\":[\"x\"],\"attrs\":{\"axis\":1}"},
    {"max_pool_2x2", "float32", 4, {1, 1, 8, 8},
     "\"op\":\"pool2d\",\"inputs\":[\"x\"],\"attrs\":{\"ws\":[2,2]}"},
    {"conv2d_3x3", "float32", 4, {1, 1, 8, 8}, "\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\"]"},
    {"matmul_8x4x4", "float32", 3, {8, 4, 4}, "\"op\":\"matmul\",\"inputs\":[\"x\",\"c\"]"},
};

/* x in [0.1, 0.9): positive (a probability for the crossentropy). */
static double small_value(int64_t i) { return 0.1 + 0.8 * (double)((i * 37) % 101) / 101.0; }

/* Best ns per call of the one-node function of case c. */
static double small_time(const small_case *c, tg_ctx *ctx) {
    char shp[64] = "", data[4096] = "";
    size_t k = 0, d = 0;
    int64_t n = 1;
    for (int i = 0; i < c->ndim; i++) {
        k += (size_t)snprintf(shp + k, sizeof shp - k, "%s%lld", i ? "," : "", (long long)c->shape[i]);
        n *= c->shape[i];
    }
    for (int64_t i = 0; i < n; i++)
        d += (size_t)snprintf(data + d, sizeof data - d, "%s%g", i ? "," : "", small_value(i * 7 + 3));
    char json[8192];
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[%s]}},"
             "{\"id\":\"c\",\"type\":{\"dtype\":\"%s\",\"shape\":[%s]},\"constant\":{\"data\":[%s]}},"
             "{\"id\":\"w\",\"type\":{\"dtype\":\"%s\",\"shape\":[2,1,3,3]},\"constant\":{\"data\":"
             "[1,2,3,4,5,6,7,8,9,-1,0,1,-2,0,2,-1,0,1]}}],"
             "\"nodes\":[{%s,\"outputs\":[\"y\"]}],\"functions\":{\"main\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}",
             c->dtype, shp, c->dtype, shp, data, c->dtype, c->node);
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, c->name, ctx);
    if (!g) bench_die(c->name, ctx);
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) bench_die(c->name, ctx);
    tg_array *x = tg_array_new(tg_dtype_from_name(c->dtype), c->ndim, c->shape), *y = NULL;
    for (int64_t i = 0; i < n; i++) {
        if (!strcmp(c->dtype, "float32")) ((float *)tg_array_data(x))[i] = (float)small_value(i);
        else ((double *)tg_array_data(x))[i] = small_value(i);
    }
    double best = 1e30;
    for (int rep = 0; rep < 7; rep++) {
        int calls = 20000;
        double t0 = bench_now();
        for (int i = 0; i < calls; i++) {
            if (tg_function_call(f, &x, &y, ctx)) bench_die(c->name, ctx);
            tg_array_free(y);
            y = NULL;
        }
        double t = (bench_now() - t0) / calls;
        if (t < best) best = t;
    }
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    return best * 1e9;
}

int main(int argc, char **argv) {
    int nodes = argc > 1 ? atoi(argv[1]) : 10000;
    size_t cap = (size_t)nodes * 96 + 1024, k = 0;
    char *json = malloc(cap);
    k += (size_t)snprintf(json + k, cap - k,
                          "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"v0\","
                          "\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":[");
    for (int i = 0; i < nodes; i++)
        k += (size_t)snprintf(json + k, cap - k,
                              "%s{\"op\":\"add\",\"inputs\":[\"v%d\",{\"value\":1.0}],\"outputs\":[\"v%d\"]}",
                              i ? "," : "", i, i + 1);
    snprintf(json + k, cap - k, "]}");
    tg_ctx *ctx = tg_ctx_new();
    double t0 = bench_now();
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "chain", ctx);
    if (!g) bench_die("load", ctx);
    /* As written: this measures the VM's dispatch per node; fast_run would
     * collapse the chain (the constants collect into one add). */
    tg_compile_options o = {.preset = "none"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) bench_die("compile", ctx);
    double t_load = bench_now() - t0;
    tg_array *x = tg_array_new_scalar(TG_FLOAT64, 0.0), *y = NULL;
    for (int i = 0; i < 20; i++) { /* warm up */
        if (tg_function_call(f, &x, &y, ctx)) bench_die("call", ctx);
        tg_array_free(y);
    }
    double best = 1e30;
    for (int rep = 0; rep < 7; rep++) {
        int calls = 200;
        t0 = bench_now();
        for (int i = 0; i < calls; i++) {
            tg_function_call(f, &x, &y, ctx);
            tg_array_free(y);
        }
        double t = (bench_now() - t0) / calls;
        if (t < best) best = t;
    }
    tg_function_call(f, &x, &y, ctx);
    double result = tg_array_get_flat(y, 0);
    tg_array_free(y);
    char args[32];
    snprintf(args, sizeof args, "%d", nodes);
    char *peer = bench_peer("vm_chain.py", args);
    double np_ns = bench_peer_value(peer, "numpy_ns_per_node");
    double py_ns = bench_peer_value(peer, "python_ns_per_node");
    printf("VM dispatch: a chain of %d scalar float64 add nodes (load+compile %.1f ms)\n", nodes, t_load * 1e3);
    printf("  %-28s %8.1f ns/node   (result %.0f, target <= 50)\n", "tg", best * 1e9 / nodes, result);
    if (np_ns > 0) printf("  %-28s %8.1f ns/node\n", "NumPy float64 scalars", np_ns);
    else printf("  %-28s %8s\n", "NumPy float64 scalars", "numpy: not installed");
    if (py_ns > 0) printf("  %-28s %8.1f ns/node\n", "Python floats", py_ns);
    free(peer);

    char *speer = bench_peer("vm_small.py", "");
    printf("\nSmall kernels: a one-node function per call, ns (NumPy: the same expression)\n");
    printf("  %-14s %-8s %-12s %10s %10s\n", "op", "dtype", "shape", "tg", "NumPy");
    for (size_t i = 0; i < sizeof small_cases / sizeof small_cases[0]; i++) {
        const small_case *c = &small_cases[i];
        char shp[48] = "";
        size_t k = 0;
        for (int j = 0; j < c->ndim; j++)
            k += (size_t)snprintf(shp + k, sizeof shp - k, "%s%lld", j ? "x" : "", (long long)c->shape[j]);
        double t = small_time(c, ctx), np_t = bench_peer_value(speer, c->name);
        printf("  %-14s %-8s %-12s %10.0f", c->name, c->dtype, shp, t);
        if (np_t > 0) printf(" %10.0f\n", np_t);
        else printf(" %10s\n", "-");
    }
    free(speer);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    free(json);
    return 0;
}
