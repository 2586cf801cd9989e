/* VM dispatch: a chain of 10,000 scalar float64 `add` nodes, called many
 * times; nanoseconds per node. Beside it, the same chain in NumPy (float64
 * scalars) and in plain Python floats, measured in the same run. Target:
 * at most 50 ns per node. */
#include "bench_common.h"

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
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    free(json);
    return 0;
}
