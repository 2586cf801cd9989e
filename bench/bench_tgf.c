/* Compiled-function files: compiling from JSON against restoring from a
 * .tgf, and the restore throughput of large weights.
 *
 *   bench_tgf [NODES] [WEIGHT_MIB]     defaults 10000 and 256
 *
 * 1. A generated chain of NODES elementwise nodes (add, mul, tanh, sub on a
 *    float64 vector, with a shared scalar every 10 nodes): load the JSON
 *    and compile (preset fast_run) against tg_tgf_load of the saved file.
 * 2. The MLP example (examples/mlp.json, every function): the same.
 *    Both again with each load in a fresh process (cold caches and
 *    first-touch page faults: what one `tgc run` pays), and the start-up
 *    of a process that loads nothing.
 * 3. A function whose shared weights are WEIGHT_MIB MiB of float32: the
 *    time of tg_tgf_load (memory-mapped, every array's CRC-32C checked)
 *    as GiB/s of weights, beside reading the file into memory instead
 *    (no_mmap). The file has just been written, so it is in the page
 *    cache: this measures the restore, not the disk.
 * Times are the median of several runs. */
#include <stdint.h>
#include <unistd.h>

#include "bench_common.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static char *chain_json(int nodes) {
    size_t cap = (size_t)nodes * 160 + 4096, n = 0;
    char *s = malloc(cap);
    n += (size_t)sprintf(s + n, "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
                                "{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [16]}}");
    int nsh = nodes / 10 + 1;
    for (int k = 0; k < nsh; k++)
        n += (size_t)sprintf(s + n, ", {\"id\": \"w%d\", \"type\": {\"dtype\": \"float64\", \"shape\": []},"
                                    " \"shared\": {\"data\": 0.%d}}",
                             k, k % 10);
    n += (size_t)sprintf(s + n, "], \"nodes\": [");
    static const char *ops[4] = {"add", "mul", "tanh", "sub"};
    for (int i = 0; i < nodes; i++) {
        const char *op = ops[i % 4], *prev = i ? NULL : "x";
        char pv[32];
        if (!prev) {
            snprintf(pv, sizeof pv, "v%d", i - 1);
            prev = pv;
        }
        if (i % 4 == 2)
            n += (size_t)sprintf(s + n, "%s{\"op\": \"%s\", \"inputs\": [\"%s\"], \"outputs\": [\"v%d\"]}",
                                 i ? ", " : "", op, prev, i);
        else
            n += (size_t)sprintf(s + n, "%s{\"op\": \"%s\", \"inputs\": [\"%s\", \"w%d\"], \"outputs\": [\"v%d\"]}",
                                 i ? ", " : "", op, prev, i / 10, i);
    }
    n += (size_t)sprintf(s + n, "]}");
    return s;
}

/* Compile every function of the graph text (or file) and save them. */
static double compile_all(const char *json, const char *path, const char *out, tg_ctx *ctx) {
    double t0 = bench_now();
    tg_graph *g = json ? tg_graph_load_string(json, strlen(json), NULL, "chain", ctx) : tg_graph_load(path, ctx);
    if (!g) bench_die("load", ctx);
    int nf = tg_graph_function_count(g);
    tg_function *fs[16];
    for (int i = 0; i < nf && i < 16; i++)
        if (!(fs[i] = tg_function_compile(g, i, NULL, ctx))) bench_die("compile", ctx);
    double t = bench_now() - t0;
    if (out) {
        tg_tgf_save_info info = {.source = g};
        if (tg_tgf_save(out, fs, nf, &info, ctx)) bench_die("save", ctx);
    }
    for (int i = 0; i < nf && i < 16; i++) tg_function_free(fs[i]);
    tg_graph_free(g);
    return t;
}

static double restore(const char *path, bool no_mmap, tg_ctx *ctx) {
    tg_tgf_load_options lo = {.no_mmap = no_mmap};
    double t0 = bench_now();
    tg_tgf *t = tg_tgf_load(path, &lo, ctx);
    double t1 = bench_now() - t0;
    if (!t) bench_die("restore", ctx);
    tg_tgf_free(t);
    return t1;
}

static void compare(const char *what, const char *json, const char *path, const char *tgf, tg_ctx *ctx) {
    enum { RUNS = 7 };
    double c[RUNS], r[RUNS];
    compile_all(json, path, tgf, ctx);
    for (int i = 0; i < RUNS; i++) c[i] = compile_all(json, path, NULL, ctx);
    for (int i = 0; i < RUNS; i++) r[i] = restore(tgf, false, ctx);
    double mc = median(c, RUNS), mr = median(r, RUNS);
    printf("%-28s compile from JSON %9.3f ms   restore from .tgf %9.3f ms   %6.1fx faster\n", what,
           mc * 1e3, mr * 1e3, mc / mr);
}

/* The same, each in a fresh process (this program run again with
 * --child): what `tgc run` pays for its one load, cold caches and
 * first-touch page faults included. Process start-up is not timed (the
 * child times its own load), and is printed apart: that of this program
 * doing nothing. */
static int child(const char *mode, const char *path) {
    tg_ctx *ctx = tg_ctx_new();
    double t = !strcmp(mode, "compile") ? compile_all(NULL, path, NULL, ctx) : restore(path, false, ctx);
    printf("%.9f\n", t);
    tg_ctx_free(ctx);
    return 0;
}

static double run_child(const char *mode, const char *path) {
    char cmd[4300];
    if (path)
        snprintf(cmd, sizeof cmd, "/proc/%ld/exe --child %s '%s'", (long)getpid(), mode, path);
    else
        snprintf(cmd, sizeof cmd, "/proc/%ld/exe --child %s", (long)getpid(), mode);
    double t0 = bench_now();
    FILE *p = popen(cmd, "r");
    double t = -1;
    if (!p || fscanf(p, "%lf", &t) != 1) t = -1;
    if (p) pclose(p);
    return !strcmp(mode, "none") ? bench_now() - t0 : t;
}

static void compare_fresh(const char *what, const char *json_path, const char *tgf) {
    enum { RUNS = 7 };
    double c[RUNS], r[RUNS];
    for (int i = 0; i < RUNS; i++) {
        c[i] = run_child("compile", json_path);
        r[i] = run_child("restore", tgf);
    }
    double mc = median(c, RUNS), mr = median(r, RUNS);
    if (mc <= 0 || mr <= 0) {
        printf("%-28s (fresh process: the child failed)\n", what);
        return;
    }
    printf("%-28s compile from JSON %9.3f ms   restore from .tgf %9.3f ms   %6.1fx faster (fresh process)\n",
           what, mc * 1e3, mr * 1e3, mc / mr);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child")) return child(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "--child")) return 0; /* start-up alone */
    int nodes = argc > 1 ? atoi(argv[1]) : 10000;
    long mib = argc > 2 ? atol(argv[2]) : 256;
    if (nodes < 1 || mib < 1) {
        fprintf(stderr, "usage: bench_tgf [NODES] [WEIGHT_MIB]\n");
        return 2;
    }
    tg_ctx *ctx = tg_ctx_new();
    char dir[] = "/tmp/tg_bench_tgf.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char p1[64], p2[64], p3[64], mlp[4096];
    snprintf(p1, sizeof p1, "%s/chain.tgf", dir);
    snprintf(p2, sizeof p2, "%s/mlp.tgf", dir);
    snprintf(p3, sizeof p3, "%s/big.tgf", dir);
    snprintf(mlp, sizeof mlp, "%s/../examples/mlp.json", TG_BENCH_DIR);

    char *json = chain_json(nodes);
    char what[64], pj[64];
    snprintf(what, sizeof what, "chain of %d nodes", nodes);
    compare(what, json, NULL, p1, ctx);
    snprintf(pj, sizeof pj, "%s/chain.json", dir);
    FILE *jf = fopen(pj, "w");
    if (!jf || fputs(json, jf) < 0 || fclose(jf)) bench_die("write chain.json", ctx);
    free(json);
    compare("mlp example (all functions)", NULL, mlp, p2, ctx);
    compare_fresh(what, pj, p1);
    compare_fresh("mlp example (all functions)", mlp, p2);
    double st[7];
    for (int i = 0; i < 7; i++) st[i] = run_child("none", NULL);
    printf("process start-up and exit, not in the figures above: %.1f ms\n", median(st, 7) * 1e3);

    /* Large weights: w of unknown static length, so that any size fits. */
    const char *bj = "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
                     "{\"id\": \"w\", \"type\": {\"dtype\": \"float32\", \"shape\": [null]},"
                     " \"shared\": {\"data\": [0.0], \"shape\": [1]}}],"
                     " \"nodes\": [{\"op\": \"sum\", \"inputs\": [\"w\"], \"outputs\": [\"s\"]}]}";
    tg_graph *g = tg_graph_load_string(bj, strlen(bj), NULL, "big", ctx);
    if (!g) bench_die("big", ctx);
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    int64_t n = (int64_t)mib * 1024 * 1024 / 4;
    tg_array *w = tg_array_new(TG_FLOAT32, 1, &n);
    if (!f || !w) bench_die("big", ctx);
    float *d = tg_array_data(w);
    for (int64_t i = 0; i < n; i++) d[i] = (float)(i % 1000) * 0.5f;
    if (tg_function_shared_set(f, "w", w, ctx)) bench_die("set", ctx);
    tg_array_free(w);
    double t0 = bench_now();
    if (tg_tgf_save(p3, &f, 1, NULL, ctx)) bench_die("save big", ctx);
    double ts = bench_now() - t0;
    tg_function_free(f);
    tg_graph_free(g);
    enum { RUNS = 5 };
    double rm[RUNS], rr[RUNS];
    for (int i = 0; i < RUNS; i++) rm[i] = restore(p3, false, ctx);
    for (int i = 0; i < RUNS; i++) rr[i] = restore(p3, true, ctx);
    double gib = (double)mib / 1024.0, m1 = median(rm, RUNS), m2 = median(rr, RUNS);
    printf("%ld MiB of float32 weights: save %.3f s (%.2f GiB/s, fsync included); restore "
           "memory-mapped %.3f s = %.2f GiB/s; read into memory %.3f s = %.2f GiB/s "
           "(checksums checked in both)\n",
           mib, ts, gib / ts, m1, gib / m1, m2, gib / m2);
    unlink(p1);
    unlink(p2);
    unlink(p3);
    unlink(pj);
    rmdir(dir);
    tg_ctx_free(ctx);
    return 0;
}
