/* Optimization time against graph size (the target: 10,000 nodes
 * under 1 s with fast_run, 100,000 under 12x that). The generated graphs
 * repeat a block that has a bit of everything the passes look at: an
 * MLP-like layer (dot, bias add, tanh) whose weight matrix every layer
 * shares, a long elementwise chain with patterns to stabilize and
 * canonicalize (log(1+x), x*x, neg(neg x), exp(x)-1, constants to
 * collect), and subexpressions computed twice (for merge).
 *
 *   build-bench/bench/bench_opt [--traces] [SIZES...]
 *       (default 1000 10000 100000); --traces: every node with a creation
 *       trace of two frames, as a frontend's exporter writes them
 *   build-bench/bench/bench_opt --loop N SIZE [PRESET]
 *       compile one graph N times and print each time, nothing else: a
 *       loop to run under perf or callgrind without the load in it
 *   build-bench/bench/bench_opt [--traces] --json SIZE
 *       print the generated graph (for tgc, tgviz, tgprof)
 */
#include "bench_common.h"
#include "core/core.h"

#include <sys/resource.h>

enum { BLOCK = 16 };

/* --traces: what each node carries after its outputs (empty: nothing). */
static char trace_text[256];

static char *gen(int nodes) {
    tg_str s = {0};
    int blocks = nodes / BLOCK;
    tg_str_addf(&s, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                    "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[16,32]}},"
                    "{\"id\":\"W\",\"type\":{\"dtype\":\"float64\",\"shape\":[32,32]}},"
                    "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[32]}}],\"nodes\":[");
    const char *h = "x";
    char prev[32];
    for (int i = 0; i < blocks; i++) {
#define NODE(op, ins, out) tg_str_addf(&s, "%s{\"op\":\"%s\",\"inputs\":[%s],\"outputs\":[\"%s%d\"]%s}", (i || strcmp(#out, "d") ? "," : ""), op, ins, #out, i, trace_text)
        char in[256];
        snprintf(in, sizeof in, "\"%s\",\"W\"", h);
        NODE("dot", in, d);
        snprintf(in, sizeof in, "\"d%d\",\"b\"", i);
        NODE("add", in, p);
        snprintf(in, sizeof in, "\"p%d\"", i);
        NODE("tanh", in, t);
        /* log(1 + t*t) and its twin */
        snprintf(in, sizeof in, "\"t%d\",\"t%d\"", i, i);
        NODE("mul", in, q);
        NODE("mul", in, q2x);
        snprintf(in, sizeof in, "{\"value\":1},\"q%d\"", i);
        NODE("add", in, o);
        snprintf(in, sizeof in, "\"o%d\"", i);
        NODE("log", in, l);
        /* neg(neg(l)) */
        snprintf(in, sizeof in, "\"l%d\"", i);
        NODE("neg", in, n1);
        snprintf(in, sizeof in, "\"n1%d\"", i);
        NODE("neg", in, n2);
        /* exp(n2) - 1 */
        snprintf(in, sizeof in, "\"n2%d\"", i);
        NODE("exp", in, e);
        snprintf(in, sizeof in, "\"e%d\",{\"value\":1}", i);
        NODE("sub", in, m);
        /* constants to collect: (m + 2) + 3 */
        snprintf(in, sizeof in, "\"m%d\",{\"value\":2}", i);
        NODE("add", in, c1);
        snprintf(in, sizeof in, "\"c1%d\",{\"value\":3}", i);
        NODE("add", in, c2);
        /* uses the twin, so merge has something to do */
        snprintf(in, sizeof in, "\"c2%d\",\"q2x%d\"", i, i);
        NODE("sub", in, r);
        snprintf(in, sizeof in, "\"r%d\",{\"value\":0.01}", i);
        NODE("mul", in, s);
        snprintf(in, sizeof in, "\"s%d\",\"t%d\"", i, i);
        NODE("add", in, h);
#undef NODE
        snprintf(prev, sizeof prev, "h%d", i);
        h = prev;
    }
    tg_str_addf(&s, "]}");
    return s.s;
}

/* The passes of the best fast_run compile of each size, to see which one
 * grows faster than the graph. */
enum { MAXPASS = 16 };
static int npass[8];
static char pass_name[8][MAXPASS][32];
static double pass_s[8][MAXPASS];

/* Compile g's first function with a preset; *t: how long it took. */
static tg_function *timed_compile(tg_graph *g, const char *preset, tg_ctx *ctx, double *t) {
    tg_compile_options o = {.preset = preset};
    double t0 = bench_now();
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    *t = bench_now() - t0;
    if (!f) bench_die("compile", ctx);
    return f;
}

static double best_compile(tg_graph *g, const char *preset, int reps, int *nodes_after, int slot) {
    double best = 1e30;
    tg_ctx *ctx = tg_ctx_new();
    for (int r = 0; r < reps; r++) {
        double t;
        tg_function *f = timed_compile(g, preset, ctx, &t);
        if (t < best) {
            best = t;
            if (slot >= 0) {
                npass[slot] = 0;
                for (int i = 0; i < tg_function_pass_count(f) && i < MAXPASS; i++) {
                    tg_pass_stats ps;
                    if (tg_function_pass_get(f, i, &ps)) continue;
                    snprintf(pass_name[slot][npass[slot]], 32, "%s", ps.name);
                    pass_s[slot][npass[slot]++] = ps.seconds;
                }
            }
        }
        *nodes_after = tg_function_node_count(f);
        tg_function_free(f);
    }
    tg_ctx_free(ctx);
    return best;
}

static int loop(int reps, int size, const char *preset) {
    char *json = gen(size);
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "bench", ctx);
    if (!g) bench_die("load", ctx);
    for (int r = 0; r < reps; r++) {
        double t;
        struct rusage u0, u1;
        getrusage(RUSAGE_SELF, &u0);
        tg_function *f = timed_compile(g, preset, ctx, &t);
        getrusage(RUSAGE_SELF, &u1);
        printf("%d nodes %s: %.4f s, %ld page faults\n", tg_graph_node_count(g), preset, t,
               u1.ru_minflt - u0.ru_minflt + u1.ru_majflt - u0.ru_majflt);
        tg_function_free(f);
    }
    tg_graph_free(g);
    tg_ctx_free(ctx);
    free(json);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The ratio again, from compiles of the two graphs in turn (10,000, then
 * 100,000, ROUNDS times): each pair sees the same minute of this shared
 * machine, and each 10,000-node compile follows a 100,000-node one, as a
 * compile follows other work in a real process, instead of the same
 * graph compiled a moment before (whose nodes are still in the cache).
 * Prints the median of the rounds' ratios, and their range. */
static void interleaved(void) {
    enum { ROUNDS = 7 };
    char *j10 = gen(10000), *j100 = gen(100000);
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g10 = tg_graph_load_string(j10, strlen(j10), NULL, "bench", ctx);
    tg_graph *g100 = tg_graph_load_string(j100, strlen(j100), NULL, "bench", ctx);
    if (!g10 || !g100) bench_die("load", ctx);
    double ratio[ROUNDS], b10 = 1e30, b100 = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t10, t100;
        tg_function_free(timed_compile(g10, "fast_run", ctx, &t10));
        tg_function_free(timed_compile(g100, "fast_run", ctx, &t100));
        ratio[r] = t100 / t10;
        if (t10 < b10) b10 = t10;
        if (t100 < b100) b100 = t100;
    }
    qsort(ratio, ROUNDS, sizeof *ratio, cmp_double);
    printf("in turn, %d rounds (each 10,000-node compile after a 100,000-node one): best %.4f s and %.4f s, "
           "ratio median %.1fx (%.1f-%.1f)\n",
           ROUNDS, b10, b100, ratio[ROUNDS / 2], ratio[0], ratio[ROUNDS - 1]);
    tg_graph_free(g10);
    tg_graph_free(g100);
    tg_ctx_free(ctx);
    free(j10);
    free(j100);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--traces")) {
        snprintf(trace_text, sizeof trace_text,
                 ",\"trace\":[{\"file\":\"/home/me/model/train.py\",\"line\":41,"
                 "\"function\":\"main\",\"code\":\"loss = net(x)\"},"
                 "{\"file\":\"/home/me/model/net.py\",\"line\":17,"
                 "\"function\":\"forward\",\"code\":\"h = tanh(x @ W + b)\"}]");
        argv++;
        argc--;
    }
    if (argc == 3 && !strcmp(argv[1], "--json")) {
        char *json = gen(atoi(argv[2]));
        fputs(json, stdout);
        free(json);
        return 0;
    }
    if (argc >= 4 && !strcmp(argv[1], "--loop"))
        return loop(atoi(argv[2]), atoi(argv[3]), argc > 4 ? argv[4] : "fast_run");
    int sizes[8] = {1000, 10000, 100000}, nsizes = 3;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = atoi(argv[i]);
    }
    printf("optimization time (compile = clone + optimize + link), best of 3%s\n",
           trace_text[0] ? ", every node with a trace of two frames" : "");
    printf("%9s %9s %10s %12s %12s %12s %10s\n", "nodes", "after", "load s", "none s", "fast_compile", "fast_run s",
           "us/node");
    double t10k = 0, t100k = 0;
    for (int k = 0; k < nsizes; k++) {
        char *json = gen(sizes[k]);
        tg_ctx *ctx = tg_ctx_new();
        double t0 = bench_now();
        tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "bench", ctx);
        double tload = bench_now() - t0;
        if (!g) bench_die("load", ctx);
        int n = tg_graph_node_count(g), after = 0, dummy;
        int reps = 3;
        double tn = best_compile(g, "none", reps, &dummy, -1);
        double tc = best_compile(g, "fast_compile", reps, &dummy, -1);
        double tr = best_compile(g, "fast_run", reps, &after, k);
        printf("%9d %9d %10.3f %12.4f %12.4f %12.4f %10.2f\n", n, after, tload, tn, tc, tr, tr / n * 1e6);
        if (sizes[k] == 10000) t10k = tr;
        if (sizes[k] == 100000) t100k = tr;
        tg_graph_free(g);
        tg_ctx_free(ctx);
        free(json);
    }
    printf("\nfast_run's passes (s)\n%-14s", "pass");
    for (int k = 0; k < nsizes; k++) printf(" %10d", sizes[k]);
    printf("\n");
    for (int i = 0; i < npass[0]; i++) {
        printf("%-14s", pass_name[0][i]);
        for (int k = 0; k < nsizes; k++) printf(" %10.4f", i < npass[k] ? pass_s[k][i] : 0);
        printf("\n");
    }
    if (t10k > 0) printf("10,000 nodes with fast_run: %.4f s (target < 1 s)\n", t10k);
    if (t10k > 0 && t100k > 0) {
        printf("100,000 / 10,000: %.1fx (target < 12x)\n", t100k / t10k);
        interleaved();
    }
    return 0;
}
