/* Ops on the layouts and index patterns the other benchmarks leave out,
 * where an implementation that only has fast paths for contiguous data
 * falls to a per-element loop: reductions of a transposed matrix,
 * reductions and products of a reversed vector, stacking along the last
 * axis, flattening a transposed view, gathers (take) with random indices
 * and from a small table, scatter-adds (take_add), and integer abs and
 * floor division. tg beside NumPy (peers/layouts.py) on arrays of the
 * same shapes and value ranges, best of REPS calls each; tg with the
 * threads OpenMP gives it. The cases came from an audit that found tg
 * 3 to 80 times slower than NumPy on each (2026-12-06).
 *
 *   build-bench/bench/bench_layouts [N [REPS]]     (default 10^7, 10)
 */
#include <omp.h>

#include "bench_common.h"
#include "core/core.h"

/* An input: dtype, shape (of N: rows x cols with cols given; a vector of
 * N / div), and how to fill it. */
typedef enum { FILL_F, FILL_IDX, FILL_TABLE_IDX, FILL_SIGNED } fill_kind;
typedef struct bin {
    const char *id, *dtype;
    int64_t cols; /* 0: a vector */
    int64_t div;  /* the vector's length (or the matrix's element count) is N / div */
    fill_kind fill;
} bin;

typedef struct bcase {
    const char *name, *nodes;
    bin in[3];
    int nin;
} bcase;

#define REV "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"r\"],\"attrs\":{\"index\":[{\"step\":-1}]}}"
#define TR "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]}"
#define F64(id, cols, div) {id, "float64", cols, div, FILL_F}

static const bcase CASES[] = {
    {"sum_T", TR ",{\"op\":\"sum\",\"inputs\":[\"t\"],\"outputs\":[\"z\"]}", {F64("x", 1000, 1)}, 1},
    {"sum_T_axis1", TR ",{\"op\":\"sum\",\"inputs\":[\"t\"],\"outputs\":[\"z\"],\"attrs\":{\"axis\":1}}",
     {F64("x", 1000, 1)}, 1},
    {"max_T", TR ",{\"op\":\"max\",\"inputs\":[\"t\"],\"outputs\":[\"z\"]}", {F64("x", 1000, 1)}, 1},
    {"max_T_axis1", TR ",{\"op\":\"max\",\"inputs\":[\"t\"],\"outputs\":[\"z\"],\"attrs\":{\"axis\":1}}",
     {F64("x", 1000, 1)}, 1},
    {"argmax_T_axis1", TR ",{\"op\":\"argmax\",\"inputs\":[\"t\"],\"outputs\":[\"z\"],\"attrs\":{\"axis\":1}}",
     {F64("x", 1000, 1)}, 1},
    {"max_rev", REV ",{\"op\":\"max\",\"inputs\":[\"r\"],\"outputs\":[\"z\"]}", {F64("x", 0, 1)}, 1},
    {"argmax_rev", REV ",{\"op\":\"argmax\",\"inputs\":[\"r\"],\"outputs\":[\"z\"]}", {F64("x", 0, 1)}, 1},
    {"dot_rev", REV ",{\"op\":\"dot\",\"inputs\":[\"r\",\"y\"],\"outputs\":[\"z\"]}", {F64("x", 0, 1), F64("y", 0, 1)},
     2},
    {"stack_axis1", "{\"op\":\"stack\",\"inputs\":[\"x\",\"y\",\"w\"],\"outputs\":[\"z\"],\"attrs\":{\"axis\":1}}",
     {F64("x", 0, 10), F64("y", 0, 10), F64("w", 0, 10)}, 3},
    {"flatten_T", TR ",{\"op\":\"flatten\",\"inputs\":[\"t\"],\"outputs\":[\"z\"]}", {F64("x", 2500, 1)}, 1},
    {"take_random", "{\"op\":\"take\",\"inputs\":[\"x\",\"i\"],\"outputs\":[\"z\"]}",
     {F64("x", 0, 1), {"i", "int64", 0, 1, FILL_IDX}}, 2},
    {"take_table", "{\"op\":\"take\",\"inputs\":[\"x\",\"i\"],\"outputs\":[\"z\"]}",
     {F64("x", 0, 10000), {"i", "int64", 0, 1, FILL_TABLE_IDX}}, 2},
    {"take_add", "{\"op\":\"take_add\",\"inputs\":[\"x\",\"y\",\"i\"],\"outputs\":[\"z\"]}",
     {F64("x", 0, 10), F64("y", 0, 1), {"i", "int64", 0, 1, FILL_TABLE_IDX}}, 3},
    {"abs_int64", "{\"op\":\"abs\",\"inputs\":[\"x\"],\"outputs\":[\"z\"]}", {{"x", "int64", 0, 1, FILL_SIGNED}}, 1},
    {"int_div_int64_7", "{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":7}],\"outputs\":[\"z\"]}",
     {{"x", "int64", 0, 1, FILL_SIGNED}}, 1},
    {"int_div_fused", "{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":7}],\"outputs\":[\"q\"]},"
                      "{\"op\":\"mul\",\"inputs\":[\"q\",{\"value\":3}],\"outputs\":[\"m\"]},"
                      "{\"op\":\"add\",\"inputs\":[\"m\",\"x\"],\"outputs\":[\"z\"]}",
     {{"x", "int64", 0, 1, FILL_SIGNED}}, 1},
};

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* The input's array for size n; idx_bound: the length of the array the
 * indices of a case index (its first input). */
static tg_array *make_input(const bin *b, int64_t n, int64_t idx_bound, uint64_t *seed) {
    int64_t len = n / b->div, shp[2] = {b->cols ? len / b->cols : len, b->cols};
    tg_dtype dt = !strcmp(b->dtype, "int64") ? TG_INT64 : TG_FLOAT64;
    tg_array *a = tg_array_new(dt, b->cols ? 2 : 1, shp);
    int64_t m = tg_array_size(a);
    if (dt == TG_FLOAT64) {
        double *d = tg_array_data(a);
        for (int64_t i = 0; i < m; i++) d[i] = 0.1 + (double)lcg(seed) / 9007199254740992.0;
    } else {
        int64_t *d = tg_array_data(a);
        for (int64_t i = 0; i < m; i++)
            d[i] = b->fill == FILL_SIGNED ? (int64_t)(lcg(seed) % 2000001) - 1000000
                                          : (int64_t)(lcg(seed) % (uint64_t)idx_bound);
    }
    return a;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 10000000;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 10000 || n % 10000) {
        fprintf(stderr, "bench_layouts: N must be a multiple of 10000\n");
        return 2;
    }
    char args[64];
    snprintf(args, sizeof args, "%lld %d", (long long)n, reps);
    char *peer = bench_peer("layouts.py", args);
    printf("layouts and index patterns, %lld elements (float64 [0.1, 1.1); int64 in +-10^6), best of %d, "
           "%d OpenMP threads%s\n",
           (long long)n, reps, omp_get_max_threads(), peer ? "" : "\nnumpy: not installed (tg only)");
    printf("  %-16s %-44s %10s %10s %8s\n", "case", "numpy", "tg ms", "numpy ms", "ratio");
    static const char *const NP[] = {
        "np.sum(x.T)",        "np.sum(x.T, axis=1)", "np.max(x.T)",          "np.max(x.T, axis=1)",
        "np.argmax(x.T, axis=1)", "np.max(x[::-1])",    "np.argmax(x[::-1])",  "np.dot(x[::-1], y)",   "np.stack((x, y, w), axis=1)",
        "x.T.flatten()",      "x[i] (i random)",     "x[i] (x of N/10^4)",   "x + np.bincount(i, y, len(x))",
        "np.abs(x)",          "x // 7",               "(x // 7) * 3 + x",
    };
    tg_ctx *ctx = tg_ctx_new();
    uint64_t seed = 12345;
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const bcase *c = &CASES[k];
        tg_str js = {0};
        tg_str_addf(&js, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[");
        for (int i = 0; i < c->nin; i++)
            tg_str_addf(&js, "%s{\"id\":\"%s\",\"type\":{\"dtype\":\"%s\",\"shape\":%s}}", i ? "," : "", c->in[i].id,
                        c->in[i].dtype, c->in[i].cols ? "[null,null]" : "[null]");
        tg_str_addf(&js, "],\"nodes\":[%s],\"functions\":{\"f\":{\"inputs\":[", c->nodes);
        for (int i = 0; i < c->nin; i++) tg_str_addf(&js, "%s\"%s\"", i ? "," : "", c->in[i].id);
        tg_str_addf(&js, "],\"outputs\":[\"z\"]}}}");
        if (js.oom) bench_die("out of memory", ctx);
        tg_graph *g = tg_graph_load_string(js.s, js.len, NULL, c->name, ctx);
        if (!g) bench_die(c->name, ctx);
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        if (!f) bench_die(c->name, ctx);
        tg_array *in[3] = {0};
        int64_t bound = n / c->in[0].div;
        for (int i = 0; i < c->nin; i++) in[i] = make_input(&c->in[i], n, bound, &seed);
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            tg_array *out = NULL;
            double t0 = bench_now();
            if (tg_function_call(f, in, &out, ctx)) bench_die(c->name, ctx);
            double t = bench_now() - t0;
            if (r && t < best) best = t; /* the first call allocates */
            tg_array_free(out);
        }
        double np_ms = bench_peer_value(peer, c->name);
        printf("  %-16s %-44s %10.2f", c->name, NP[k], best * 1e3);
        if (np_ms > 0) printf(" %10.2f %7.2fx", np_ms, best * 1e3 / np_ms);
        printf("\n");
        for (int i = 0; i < c->nin; i++) tg_array_free(in[i]);
        tg_function_free(f);
        tg_graph_free(g);
        tg_str_free(&js);
    }
    printf("  ratio: tg time / NumPy's (below 1 is faster than NumPy)\n");
    free(peer);
    tg_ctx_free(ctx);
    return 0;
}
