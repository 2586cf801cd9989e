/* The composite op: building one from fused nodes (the fusion pass's entry
 * point), numerics against the unfused ops at sizes above the parallel
 * threshold, the kernel cache (miss, disk hit, memory hit, concurrent
 * compiles, no compiler), load errors, saving, the gradient. The values
 * against NumPy are in tests/data/ops/composite_*.json (test_opdata). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "graph/graph.h"
#include "ops/composite.h"
#include "tensor/tensor.h"

/* A fresh, empty cache folder for this process, made the current one. */
static char cache_dir[256];
static void fresh_cache(const char *tag) {
    snprintf(cache_dir, sizeof cache_dir, "%s/tg-cache-test-%ld-%s", P_tmpdir, (long)getpid(), tag);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    assert_int_equal(system(cmd), 0);
    setenv("TG_CACHE_DIR", cache_dir, 1);
}
static void drop_cache(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    assert_int_equal(system(cmd), 0);
}

/* A graph with one composite over float64 vectors a, b of length n whose
 * body computes a**2 + b**2 + K*a*b and tanh(a) * exp(b); K makes the body
 * (and so the kernel) distinct per test. */
static char *paper_graph(double k, const char *len) {
    char *s = NULL;
    int r = asprintf(&s,
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[%s]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[%s]}}],"
        "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\",\"z\"],"
        "\"attrs\":{\"body\":{\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"sqr\",\"inputs\":[\"x\"],\"outputs\":[\"x2\"]},"
        "{\"op\":\"sqr\",\"inputs\":[\"w\"],\"outputs\":[\"w2\"]},"
        "{\"op\":\"mul\",\"inputs\":[{\"value\":%.17g},\"x\",\"w\"],\"outputs\":[\"kxw\"]},"
        "{\"op\":\"add\",\"inputs\":[\"x2\",\"w2\",\"kxw\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"tanh\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"w\"],\"outputs\":[\"e\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"t\",\"e\"],\"outputs\":[\"te\"]}],"
        "\"inputs\":[\"x\",\"w\"],\"outputs\":[\"s\",\"te\"]}}}]}",
        len, len, k);
    assert_true(r > 0);
    return s;
}

/* The same computation as separate elementwise nodes. */
static char *paper_graph_unfused(double k, const char *len) {
    char *s = NULL;
    int r = asprintf(&s,
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[%s]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[%s]}}],"
        "\"nodes\":[{\"op\":\"sqr\",\"inputs\":[\"a\"],\"outputs\":[\"a2\"]},"
        "{\"op\":\"sqr\",\"inputs\":[\"b\"],\"outputs\":[\"b2\"]},"
        "{\"op\":\"mul\",\"inputs\":[{\"value\":%.17g},\"a\",\"b\"],\"outputs\":[\"kab\"]},"
        "{\"op\":\"add\",\"inputs\":[\"a2\",\"b2\",\"kab\"],\"outputs\":[\"y\"]},"
        "{\"op\":\"tanh\",\"inputs\":[\"a\"],\"outputs\":[\"t\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"b\"],\"outputs\":[\"e\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"t\",\"e\"],\"outputs\":[\"z\"]}]}",
        len, len, k);
    assert_true(r > 0);
    return s;
}

static tg_array *ramp(int64_t n, double scale, double off) {
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    double *d = tg_array_data(a);
    for (int64_t i = 0; i < n; i++) d[i] = off + scale * (double)((i * 7919) % 2003) / 2003.0;
    return a;
}

/* Values from the composite, by its first node. */
static tg_node *first_node(tg_graph *g) { return g->nodes[0]; }

/* Whether two elements of isz bytes (float32 or float64) are the same:
 * the same bits where the library is built with optimisation, whose
 * unfused loops call libmvec's vector variants as the kernels do; under
 * the sanitizers (no optimisation) those loops call scalar libm, which
 * rounds otherwise now and then (test_sincos_same_bits): there, to 4 ulp
 * of their own type, libmvec's documented accuracy (NaNs: both NaN). */
static bool same_value(const void *a, const void *b, size_t isz) {
#if defined(__SANITIZE_ADDRESS__)
    if (isz == 4) {
        float x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
        return x == y || fabsf(x - y) <= 4 * (nextafterf(fabsf(y), INFINITY) - fabsf(y));
    }
    double x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
    return x == y || fabs(x - y) <= 4 * (nextafter(fabs(y), INFINITY) - fabs(y));
#else
    return !memcmp(a, b, isz);
#endif
}

/* |x - y| in units in the last place of y. */
static double ulps(double x, double y) {
    if (x == y) return 0;
    return fabs(x - y) / (nextafter(fabs(y), INFINITY) - fabs(y));
}

static void check_against_unfused(double k, int64_t n, bool interp, int *mode) {
    char len[32];
    snprintf(len, sizeof len, "%lld", (long long)n);
    char *fj = paper_graph(k, len), *uj = paper_graph_unfused(k, len);
    tg_graph *gf = tu_load(fj), *gu = tu_load(uj);
    tg_array *in[2] = {ramp(n, 4, -2), ramp(n, 3, -1.5)};
    tg_array *of[2] = {0}, *ou[2] = {0};
    tg_composite_force_interp(interp);
    tu_call(gf, NULL, in, of);
    tg_composite_force_interp(false);
    tu_call_preset(gu, NULL, "none", in, ou); /* unfused: as written */
    /* The function ran a clone of the node; this one decides on first
     * use too, and a compiled kernel comes from the in-memory map. */
    tg_array *direct[2] = {0};
    tg_node *nd = first_node(gf);
    tg_ctx *ctx = tg_ctx_new();
    tg_composite_force_interp(interp);
    assert_int_equal(nd->op->run(nd, in, direct, ctx), TG_OK);
    tg_composite_force_interp(false);
    *mode = tg_composite_node_mode(nd);
    const double *y = tg_array_data(of[0]), *yu = tg_array_data(ou[0]);
    const double *z = tg_array_data(of[1]), *zu = tg_array_data(ou[1]);
    const double *yd = tg_array_data(direct[0]);
    double worst = 0;
    int64_t wi = 0;
    for (int64_t i = 0; i < n; i++) {
        if (y[i] != yu[i] || yd[i] != yu[i])
            fail_msg("y[%lld]: fused %.17g, unfused %.17g (arithmetic must match exactly)",
                     (long long)i, y[i], yu[i]);
        double u = ulps(z[i], zu[i]);
        if (u > worst) {
            worst = u;
            wi = i;
        }
    }
    /* The unfused ops' contiguous loops use libmvec (vmath.c), which glibc
     * documents as accurate to 4 ulp; the kernel may use scalar libm. */
    if (worst > 4)
        fail_msg("tanh(a)*exp(b) at %lld: %.17g, unfused %.17g: %.1f ulp (at most 4)",
                 (long long)wi, z[wi], zu[wi], worst);
    for (int i = 0; i < 2; i++) {
        tg_array_free(in[i]);
        tg_array_free(of[i]);
        tg_array_free(ou[i]);
        tg_array_free(direct[i]);
    }
    tg_ctx_free(ctx);
    tg_graph_free(gf);
    tg_graph_free(gu);
    free(fj);
    free(uj);
}

/* Several processes compile the same new body into an empty cache at once:
 * all succeed, the compiler runs once in all, one entry is left. (The
 * children may run parallel loops: a forked child runs them on one
 * thread; test_fork_child.) */
static void test_cache_concurrent(void **state) {
    (void)state;
    fresh_cache("conc");
    double k = 3.0 + (double)(getpid() % 1000) / 1024.0;
    enum { NPROC = 4 };
    pid_t pids[NPROC];
    for (int p = 0; p < NPROC; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            char *j = paper_graph(k, "5");
            tg_ctx *ctx = tg_ctx_new();
            tg_graph *g = tg_graph_load_string(j, strlen(j), NULL, "conc", ctx);
            tg_array *in[2] = {ramp(5, 1, 0), ramp(5, 2, 1)}, *out[2] = {0};
            tg_node *nd = g ? first_node(g) : NULL;
            int rc = nd ? nd->op->run(nd, in, out, ctx) : -1;
            const double *a = tg_array_data(in[0]), *b = tg_array_data(in[1]);
            bool ok = rc == 0 && tg_composite_node_mode(nd) == 1;
            for (int i = 0; ok && i < 5; i++)
                ok = ((const double *)tg_array_data(out[0]))[i] ==
                     (a[i] * a[i] + b[i] * b[i]) + k * a[i] * b[i];
            _exit(ok ? (int)tg_kcache_stats_get().compiles : 100);
        }
    }
    int compiles = 0;
    for (int p = 0; p < NPROC; p++) {
        int st;
        assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st) > 1) fail_msg("process %d failed (status %d)", p, WEXITSTATUS(st));
        compiles += WEXITSTATUS(st);
    }
    assert_int_equal(compiles, 1);
    tg_kcache_entry *e;
    int n;
    assert_int_equal(tg_kcache_list(cache_dir, &e, &n, NULL), TG_OK);
    assert_int_equal(n, 1);
    assert_non_null(strstr(e[0].first_line, "tg composite: 2 in, 2 out"));
    tg_free(e);
    drop_cache();
}

/* Miss (compiles), then from disk without the compiler, then from memory. */
static void test_cache_hit_miss(void **state) {
    (void)state;
    fresh_cache("hit");
    int mode;
    tg_kcache_stats s0 = tg_kcache_stats_get();
    check_against_unfused(1.25, 1000, false, &mode);
    assert_int_equal(mode, 1);
    tg_kcache_stats s1 = tg_kcache_stats_get();
    assert_int_equal(s1.compiles - s0.compiles, 1);
    assert_int_equal(s1.disk_hits - s0.disk_hits, 0);
    /* The second node (the graph's own, of the same body) takes the first
     * one's kernel from the body without asking the cache again. */
    assert_int_equal(s1.memory_hits - s0.memory_hits, 0);
    tg_kcache_forget();
    check_against_unfused(1.25, 1000, false, &mode);
    tg_kcache_stats s2 = tg_kcache_stats_get();
    assert_int_equal(s2.compiles - s1.compiles, 0);
    assert_int_equal(s2.disk_hits - s1.disk_hits, 1);
    int removed;
    assert_int_equal(tg_kcache_clear(cache_dir, &removed, NULL), TG_OK);
    assert_int_equal(removed, 1);
    tg_kcache_entry *e;
    int n;
    assert_int_equal(tg_kcache_list(cache_dir, &e, &n, NULL), TG_OK);
    assert_int_equal(n, 0);
    tg_free(e);
    drop_cache();
}

/* The .ccid files of the cache folder and the text of the last one;
 * their count. With empty_them, each is emptied after it is read. */
static int ccid_files(char *text, size_t cap, bool empty_them) {
    DIR *d = opendir(cache_dir);
    int n = 0;
    struct dirent *de;
    text[0] = 0;
    while (d && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len != 37 || strcmp(de->d_name + 32, ".ccid")) continue;
        n++;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", cache_dir, de->d_name);
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        size_t k = fread(text, 1, cap - 1, f);
        text[k] = 0;
        fclose(f);
        if (empty_them) assert_int_equal(truncate(p, 0), 0);
    }
    if (d) closedir(d);
    return n;
}

static void write_cc_wrapper(const char *path, int version, time_t mtime) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'wrapped cc %d'; exit 0; fi\nexec cc \"$@\"\n",
            version);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* Forget what this process knows (as a new process would), run the
 * kernel of test_cache_compiler_identity, and check how many compiler
 * runs, compiles and disk hits that took since `before`. */
static tg_kcache_stats run_as_new_process(tg_kcache_stats before, long runs, long compiles, long disk_hits) {
    int mode;
    tg_kcache_forget();
    check_against_unfused(7.75, 500, false, &mode);
    assert_int_equal(mode, 1);
    tg_kcache_stats s = tg_kcache_stats_get();
    assert_int_equal(s.compiler_runs - before.compiler_runs, runs);
    assert_int_equal(s.compiles - before.compiles, compiles);
    assert_int_equal(s.disk_hits - before.disk_hits, disk_hits);
    return s;
}

/* The compiler's identity is read by running `$TG_CC --version` once and
 * kept in the cache folder (<hash>.ccid): a new process (here: after
 * tg_kcache_forget) reads it from there without running the compiler;
 * an edited compiler (a new text, a new time) is run again and, with a
 * new identity, compiles again; a damaged .ccid is read again from the
 * compiler; `cache clear` removes it. */
static void test_cache_compiler_identity(void **state) {
    (void)state;
    fresh_cache("ccid");
    assert_int_equal(mkdir(cache_dir, 0755), 0);
    char cc[400], text[256];
    snprintf(cc, sizeof cc, "%s/cc-wrapper.sh", cache_dir);
    write_cc_wrapper(cc, 1, 1000000000);
    setenv("TG_CC", cc, 1);
    tg_kcache_stats s1 = run_as_new_process(tg_kcache_stats_get(), 1, 1, 0);
    assert_int_equal(ccid_files(text, sizeof text, false), 1);
    assert_string_equal(text, "tg-ccid 1\nwrapped cc 1\n");

    /* a new process: the identity from the folder, the kernel from disk */
    tg_kcache_stats s2 = run_as_new_process(s1, 0, 0, 1);

    /* the compiler edited in place (same size, a new time): run again;
     * its new identity is a new kernel */
    write_cc_wrapper(cc, 2, 1000000100);
    tg_kcache_stats s3 = run_as_new_process(s2, 1, 1, 0);
    assert_int_equal(ccid_files(text, sizeof text, false), 2);

    /* damaged (emptied) .ccid files: the compiler is run again, and the
     * same identity finds the kernel on disk */
    ccid_files(text, sizeof text, true);
    run_as_new_process(s3, 1, 0, 1);

    unsetenv("TG_CC");
    tg_kcache_forget();
    int removed;
    assert_int_equal(tg_kcache_clear(cache_dir, &removed, NULL), TG_OK);
    assert_int_equal(removed, 2);
    assert_int_equal(ccid_files(text, sizeof text, false), 0);
    drop_cache();
}

/* 100000 elements: above the parallel threshold and many interpreter
 * blocks; compiled and interpreted both match the unfused ops. */
static void test_numerics_large(void **state) {
    (void)state;
    fresh_cache("num");
    int mode;
    check_against_unfused(2.0, 100000, false, &mode);
    assert_int_equal(mode, 1);
    check_against_unfused(2.0, 100001, true, &mode);
    assert_int_equal(mode, 0);
    drop_cache();
}

/* TG_CC naming no compiler: the interpreter, the same values. */
static void test_no_compiler(void **state) {
    (void)state;
    fresh_cache("nocc");
    setenv("TG_CC", "/nonexistent/bin/cc", 1);
    tg_kcache_stats s0 = tg_kcache_stats_get();
    int mode;
    check_against_unfused(5.5, 3000, false, &mode);
    assert_int_equal(mode, 0);
    tg_kcache_stats s1 = tg_kcache_stats_get();
    assert_int_equal(s1.compiles, s0.compiles);
    assert_true(s1.failures > s0.failures);
    unsetenv("TG_CC");
    drop_cache();
}

/* The fusion pass's entry point: fuse c = a*b + 1 and d = exp(c) - a by
 * hand in an fgraph; the composite gives the unfused values, keeps the
 * output ids, carries the origins, and reads the 0-d constant from its
 * body. */
static void test_node_new(void **state) {
    (void)state;
    fresh_cache("api");
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float32\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"ab\"]},"
        "{\"op\":\"add\",\"inputs\":[\"ab\",{\"value\":1}],\"outputs\":[\"c\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"c\"],\"outputs\":[\"e\"]},"
        "{\"op\":\"sub\",\"inputs\":[\"e\",\"a\"],\"outputs\":[\"d\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"d\"],\"outputs\":[\"s\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\",\"s\"]}}}");
    tg_ctx *ctx = tg_ctx_new();
    tg_fgraph *fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx);
    assert_non_null(fg);
    assert_int_equal(fg->nnodes, 5);
    tg_node *fuse[4];
    for (int i = 0; i < 4; i++) fuse[i] = fg->nodes[i];
    assert_string_equal(fuse[3]->op->name, "sub");
    tg_var *ins[2] = {fg->inputs[0], fg->inputs[1]};
    tg_var *outs[2] = {fuse[1]->outputs[0], fuse[3]->outputs[0]}; /* c, d */
    /* tg_composite_io finds the same lists from the clients: c is an
     * fgraph output, d is read by sum; the constant 1 is left out. */
    tg_var **fi, **fo;
    int nfi, nfo;
    assert_int_equal(tg_composite_io(fuse, 4, &fi, &nfi, &fo, &nfo, ctx), TG_OK);
    assert_int_equal(nfi, 2);
    assert_ptr_equal(fi[0], ins[0]);
    assert_ptr_equal(fi[1], ins[1]);
    assert_int_equal(nfo, 2);
    assert_ptr_equal(fo[0], outs[0]);
    assert_ptr_equal(fo[1], outs[1]);
    tg_free(fi);
    tg_free(fo);
    tg_node *n = tg_composite_node_new(fuse, 4, ins, 2, outs, 2, ctx);
    if (!n) fail_msg("%s", tg_ctx_message(ctx));
    assert_string_equal(n->outputs[0]->id, "c");
    assert_string_equal(n->outputs[1]->id, "d");
    assert_int_equal(n->outputs[1]->type.dtype, TG_FLOAT64);
    assert_int_equal(n->outputs[1]->type.ndim, 2);
    assert_int_equal(n->norigins, 4);
    assert_string_equal(n->origins[0], "ab");
    assert_string_equal(n->origins[3], "d");
    /* The body: 4 nodes, the weak 1 resolved to a float64 constant. */
    const char *js = json_object_to_json_string_ext(n->attrs, JSON_C_TO_STRING_PLAIN);
    assert_non_null(strstr(js, "\"constant\""));
    assert_non_null(strstr(js, "\"op\":\"exp\""));
    assert_non_null(tg_composite_node_source(n));
    /* Misuse: an output not made by the set; a missing outside input; a
     * non-elementwise node. */
    tg_var *bad_out[1] = {fg->inputs[0]};
    assert_null(tg_composite_node_new(fuse, 4, ins, 2, bad_out, 1, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "not made by the fused nodes"));
    assert_null(tg_composite_node_new(fuse, 4, ins, 1, outs, 1, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "neither an input nor made by"));
    tg_node *sum_node = NULL;
    for (int i = 0; i < fg->nnodes; i++)
        if (!strcmp(fg->nodes[i]->op->name, "sum")) sum_node = fg->nodes[i];
    assert_null(tg_composite_node_new(&sum_node, 1, &sum_node->inputs[0], 1, &sum_node->outputs[0], 1, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "not an elementwise op"));
    /* Wire it in: the fused nodes drop out of the fgraph. */
    assert_int_equal(tg_fgraph_add_node(fg, n), TG_OK);
    for (int k = 0; k < 2; k++) assert_int_equal(tg_fgraph_replace(fg, outs[k], n->outputs[k]), TG_OK);
    assert_int_equal(tg_fgraph_toposort(fg, ctx), TG_OK);
    assert_int_equal(fg->nnodes, 2);
    /* Run it. */
    double av[6] = {0.5, -1, 2, 0, 0.25, -0.75};
    float bv[3] = {1.5f, -0.5f, 0.125f};
    int64_t sa[2] = {2, 3}, sb[1] = {3};
    tg_array *a = tu_f64(2, sa, av), *b = tg_array_new(TG_FLOAT32, 1, sb);
    memcpy(tg_array_data(b), bv, sizeof bv);
    tg_array *in[2] = {a, b}, *out[2] = {0};
    assert_int_equal(n->op->run(n, in, out, ctx), TG_OK);
    const double *c = tg_array_data(out[0]), *d = tg_array_data(out[1]);
    for (int i = 0; i < 6; i++) {
        double cw = av[i] * (double)bv[i % 3] + 1.0;
        assert_true(c[i] == cw);
        if (ulps(d[i], exp(cw) - av[i]) > 1) fail_msg("d[%d] = %.17g, want %.17g", i, d[i], exp(cw) - av[i]);
    }
    /* A second call reuses the outputs. */
    tg_array *keep = out[0];
    assert_int_equal(n->op->run(n, in, out, ctx), TG_OK);
    assert_ptr_equal(out[0], keep);
    for (int k = 0; k < 2; k++) tg_array_free(out[k]);
    tg_array_free(a);
    tg_array_free(b);
    /* tg_fgraph_add_node may not list a new node's outputs in fg->vars;
     * then tg_fgraph_free leaves them to us. */
    tg_var *made[2] = {n->outputs[0], n->outputs[1]};
    bool listed[2] = {false, false};
    for (int i = 0; i < fg->nvars; i++)
        for (int k = 0; k < 2; k++) listed[k] |= fg->vars[i] == made[k];
    tg_fgraph_free(fg);
    for (int k = 0; k < 2; k++)
        if (!listed[k]) tg_var_free(made[k]);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    drop_cache();
}

/* A bad body is one load error naming where. */
static void test_load_errors(void **state) {
    (void)state;
    static const struct {
        const char *body, *want;
    } cases[] = {
        {"{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
         "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]},"
         "{\"op\":\"nosuch\",\"inputs\":[\"y\"],\"outputs\":[\"z\"]}],"
         "\"inputs\":[\"x\"],\"outputs\":[\"z\"]}",
         "nodes[0] (composite -> r): attrs.body: nodes[1].op: unknown op 'nosuch'"},
        {"{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
         "\"nodes\":[{\"op\":\"sum\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
         "\"inputs\":[\"x\"],\"outputs\":[\"y\"]}",
         "is not an elementwise op"},
        {"{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]}}],"
         "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
         "\"inputs\":[\"x\"],\"outputs\":[\"y\"]}",
         "a body works on scalars"},
        {"{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
         "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"q\"],\"outputs\":[\"y\"]}],"
         "\"inputs\":[\"x\"],\"outputs\":[\"y\"]}",
         "attrs.body: nodes[0] (neg -> y): inputs[0]: 'q' is not declared"},
        {"{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}}],"
         "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
         "\"inputs\":[\"x\"],\"outputs\":[\"y\"]}",
         "inputs[0] 'a': expected int32 (the body's input 'x'), got float64"},
        {"{\"variables\":[], \"nodes\":[], \"inputs\":[], \"outputs\":[], \"extra\":1}",
         "attrs.body: (body).extra: unknown key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *j = NULL, msg[2048];
        assert_true(asprintf(&j,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"a\","
                             "\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],\"nodes\":[{\"op\":"
                             "\"composite\",\"inputs\":[\"a\"],\"outputs\":[\"r\"],\"attrs\":{"
                             "\"body\":%s}}]}",
                             cases[i].body) > 0);
        int rc = tu_load_fail(j, msg, sizeof msg);
        assert_true(rc < 0);
        if (!strstr(msg, cases[i].want)) fail_msg("case %zu: got '%s', want '%s'", i, msg, cases[i].want);
        free(j);
    }
}

/* Saved and loaded again: the same body, the same values. */
static void test_save_roundtrip(void **state) {
    (void)state;
    fresh_cache("save");
    char *j = paper_graph(0.5, "4");
    tg_graph *g = tu_load(j);
    char *s = tg_graph_to_string(g, NULL);
    assert_non_null(s);
    tg_graph *g2 = tu_load(s);
    char *s2 = tg_graph_to_string(g2, NULL);
    assert_string_equal(s, s2);
    tg_array *in[2] = {ramp(4, 1, 0), ramp(4, 1, 1)}, *o1[2] = {0}, *o2[2] = {0};
    tu_call(g, NULL, in, o1);
    tu_call(g2, NULL, in, o2);
    for (int k = 0; k < 2; k++) {
        assert_true(tg_array_equal(o1[k], o2[k]));
        tg_array_free(o1[k]);
        tg_array_free(o2[k]);
        tg_array_free(in[k]);
    }
    tg_string_free(s);
    tg_string_free(s2);
    tg_graph_free(g);
    tg_graph_free(g2);
    free(j);
    drop_cache();
}

/* The gradient goes through the body: y = x*x*w + 3x, cost sum(y):
 * d/dx = 2xw + 3, d/dw = x*x summed over the broadcast axis. */
static void test_grad(void **state) {
    (void)state;
    fresh_cache("grad");
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"],"
        "\"attrs\":{\"body\":{\"variables\":["
        "{\"id\":\"p\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"q\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"p\",\"p\",\"q\"],\"outputs\":[\"ppq\"]},"
        "{\"op\":\"mul\",\"inputs\":[{\"value\":3},\"p\"],\"outputs\":[\"p3\"]},"
        "{\"op\":\"add\",\"inputs\":[\"ppq\",\"p3\"],\"outputs\":[\"r\"]}],"
        "\"inputs\":[\"p\",\"q\"],\"outputs\":[\"r\"]}}},"
        "{\"op\":\"sum\",\"inputs\":[\"y\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"x\",\"w\"],\"outputs\":[\"gx\",\"gw\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\",\"w\"],\"outputs\":[\"gx\",\"gw\"]}}}");
    double xv[6] = {1, 2, 3, -1, 0.5, 4}, wv[3] = {2, -1, 0.5};
    int64_t sx[2] = {2, 3}, sw[1] = {3};
    tg_array *in[2] = {tu_f64(2, sx, xv), tu_f64(1, sw, wv)}, *out[2] = {0};
    tu_call(g, "f", in, out);
    double gx[6], gw[3] = {0, 0, 0};
    for (int i = 0; i < 6; i++) {
        gx[i] = 2 * xv[i] * wv[i % 3] + 3;
        gw[i % 3] += xv[i] * xv[i];
    }
    tg_array *wgx = tu_f64(2, sx, gx), *wgw = tu_f64(1, sw, gw);
    tu_assert_close(out[0], wgx, 1e-12, 0);
    tu_assert_close(out[1], wgw, 1e-12, 0);
    for (int k = 0; k < 2; k++) {
        tg_array_free(in[k]);
        tg_array_free(out[k]);
    }
    tg_array_free(wgx);
    tg_array_free(wgw);
    tg_graph_free(g);
    drop_cache();
}

/* Threads running one node at once, before it has decided how to run:
 * one compile, the same values everywhere. */
typedef struct thr {
    tg_node *nd;
    tg_array *in[2], *out[2];
    int rc;
} thr;
static void *thr_run(void *p) {
    thr *t = p;
    tg_ctx *ctx = tg_ctx_new();
    t->rc = t->nd->op->run(t->nd, t->in, t->out, ctx);
    tg_ctx_free(ctx);
    return NULL;
}
/* t ran the node of a paper_graph(k): it succeeded, and y = (a*a + b*b)
 * + k*a*b exactly (the unfused expression's order); its outputs freed. */
static void paper_check(thr *t, double k, const char *who) {
    assert_int_equal(t->rc, TG_OK);
    const double *a = tg_array_data(t->in[0]), *b = tg_array_data(t->in[1]), *y = tg_array_data(t->out[0]);
    for (int64_t i = 0; i < tg_array_size(t->in[0]); i++)
        if (y[i] != (a[i] * a[i] + b[i] * b[i]) + k * a[i] * b[i]) fail_msg("%s: y[%lld] = %.17g", who, (long long)i, y[i]);
    tg_array_free(t->out[0]);
    tg_array_free(t->out[1]);
    t->out[0] = t->out[1] = NULL;
}
static void test_threads(void **state) {
    (void)state;
    fresh_cache("thr");
    char *j = paper_graph(7.75, "50000");
    tg_graph *g = tu_load(j);
    tg_array *a = ramp(50000, 2, -1), *b = ramp(50000, 1, 0.5);
    thr t[4];
    pthread_t id[4];
    tg_kcache_stats s0 = tg_kcache_stats_get();
    for (int i = 0; i < 4; i++) {
        t[i] = (thr){.nd = first_node(g), .in = {a, b}};
        assert_int_equal(pthread_create(&id[i], NULL, thr_run, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_join(id[i], NULL), 0);
    assert_int_equal(tg_kcache_stats_get().compiles - s0.compiles, 1);
    for (int i = 0; i < 4; i++) {
        char who[32];
        snprintf(who, sizeof who, "thread %d", i);
        paper_check(&t[i], 7.75, who);
    }
    tg_array_free(a);
    tg_array_free(b);
    tg_graph_free(g);
    free(j);
    drop_cache();
}

/* A first call that compiles a kernel holds no lock that calls on other
 * threads need: the compiler (TG_CC, a wrapper) stops on a gate until
 * the main thread has run a broadcast composite, already compiled, three
 * times (each call of such a kernel takes the lock of the kernels'
 * decisions: row_kernel). Held across the compile, as it was, the lock
 * kept the main thread waiting until the wrapper gave up (30 s), which
 * the wrapper records. */
static bool exists_in_cache(const char *name) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", cache_dir, name);
    return access(p, F_OK) == 0;
}
static void touch_in_cache(const char *name) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", cache_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
}
/* A fresh cache folder whose compiler (TG_CC) is a wrapper of cc that,
 * once GATE is in the folder, touches STARTED and waits for RELEASE (30 s
 * at most: then it touches TIMEDOUT, and compiles). */
static void gate_cc(const char *tag) {
    fresh_cache(tag);
    assert_int_equal(mkdir(cache_dir, 0755), 0);
    char cc[400];
    snprintf(cc, sizeof cc, "%s/cc-gate.sh", cache_dir);
    FILE *f = fopen(cc, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\nif [ \"$1\" = --version ]; then exec cc --version; fi\n"
            "d='%s'\nif [ -e \"$d/GATE\" ]; then\n  touch \"$d/STARTED\"\n  i=0\n"
            "  while [ ! -e \"$d/RELEASE\" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n"
            "  [ -e \"$d/RELEASE\" ] || touch \"$d/TIMEDOUT\"\nfi\nexec cc \"$@\"\n",
            cache_dir);
    fclose(f);
    assert_int_equal(chmod(cc, 0755), 0);
    setenv("TG_CC", cc, 1);
    tg_kcache_forget();
}
static void test_compile_blocks_no_other_call(void **state) {
    (void)state;
    gate_cc("noblock");
    /* B: y = x * c + 1 with c (64, 1) constant along each row of x */
    tg_graph *gb = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                           "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[64,300]}},"
                           "{\"id\":\"c\",\"type\":{\"dtype\":\"float64\",\"shape\":[64,1]}}],"
                           "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"x\",\"c\"],\"outputs\":[\"y\"],"
                           "\"attrs\":{\"body\":{\"variables\":[{\"id\":\"u\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                           "{\"id\":\"v\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                           "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"u\",\"v\"],\"outputs\":[\"m\"]},"
                           "{\"op\":\"add\",\"inputs\":[\"m\",{\"value\":1}],\"outputs\":[\"r\"]}],"
                           "\"inputs\":[\"u\",\"v\"],\"outputs\":[\"r\"]}}}]}");
    tg_array *x = ramp(64 * 300, 0.5, -3), *c = ramp(64, 2, 1);
    int64_t xs[2] = {64, 300}, cs[2] = {64, 1};
    tg_array *xb = tg_array_reshape(x, 2, xs, NULL), *cb = tg_array_reshape(c, 2, cs, NULL);
    assert_non_null(xb);
    assert_non_null(cb);
    tg_node *nb = first_node(gb);
    tg_ctx *ctx = tg_ctx_new();
    tg_kcache_stats s0 = tg_kcache_stats_get();
    { /* B's first call compiles its kernel (reading c once a row) */
        tg_array *in[2] = {xb, cb}, *out[1] = {0};
        assert_int_equal(nb->op->run(nb, in, out, ctx), TG_OK);
        for (int64_t i = 0; i < 64 * 300; i++)
            assert_true(tg_array_get_flat(out[0], i) == tg_array_get_flat(x, i) * tg_array_get_flat(c, i / 300) + 1);
        tg_array_free(out[0]);
    }
    assert_int_equal(tg_kcache_stats_get().compiles - s0.compiles, 1);
    touch_in_cache("GATE"); /* from now on a compile stops at the gate */
    /* A: another body, compiled on its own thread, held at the gate */
    char *ja = paper_graph(3.25, "5000");
    tg_graph *ga = tu_load(ja);
    tg_array *a = ramp(5000, 2, -1), *b = ramp(5000, 1, 0.5);
    thr ta = {.nd = first_node(ga), .in = {a, b}};
    pthread_t ida;
    assert_int_equal(pthread_create(&ida, NULL, thr_run, &ta), 0);
    for (int i = 0; i < 3000 && !exists_in_cache("STARTED"); i++) usleep(10000);
    assert_true(exists_in_cache("STARTED"));
    for (int call = 0; call < 3; call++) { /* B while A compiles */
        tg_array *in[2] = {xb, cb}, *out[1] = {0};
        assert_int_equal(nb->op->run(nb, in, out, ctx), TG_OK);
        assert_true(tg_array_get_flat(out[0], 301) == tg_array_get_flat(x, 301) * tg_array_get_flat(c, 1) + 1);
        tg_array_free(out[0]);
    }
    bool waited = exists_in_cache("TIMEDOUT");
    touch_in_cache("RELEASE");
    assert_int_equal(pthread_join(ida, NULL), 0);
    if (waited) fail_msg("the calls of a compiled kernel waited for another node's compile");
    paper_check(&ta, 3.25, "A");
    assert_int_equal(tg_composite_node_mode(first_node(ga)), 1);
    tg_array_free(a);
    tg_array_free(b);
    tg_graph_free(ga);
    free(ja);
    tg_array_free(xb);
    tg_array_free(cb);
    tg_array_free(x);
    tg_array_free(c);
    tg_graph_free(gb);
    tg_ctx_free(ctx);
    unsetenv("TG_CC");
    tg_kcache_forget();
    drop_cache();
}

/* Nor does it hold the kernel cache's: the first call of a node whose
 * kernel is on disk (B, loaded again after the cache forgot it) while
 * another thread's compile (A) waits at the gate loads it and runs. Held
 * across the compile, as it was, the cache's lock kept that call waiting
 * until the wrapper gave up. */
static void test_compile_blocks_no_lookup(void **state) {
    (void)state;
    gate_cc("nolookup");
    char *jb = paper_graph(1.5, "5000"), *ja = paper_graph(3.25, "5000");
    tg_graph *gb = tu_load(jb), *ga = tu_load(ja);
    tg_array *a = ramp(5000, 2, -1), *b = ramp(5000, 1, 0.5);
    thr tb = {.nd = first_node(gb), .in = {a, b}};
    thr_run(&tb); /* B compiled, on disk */
    paper_check(&tb, 1.5, "B");
    tg_kcache_forget();
    tg_graph *gb2 = tu_load(jb); /* its first call reads B's kernel from the folder */
    touch_in_cache("GATE");
    thr ta = {.nd = first_node(ga), .in = {a, b}};
    pthread_t ida;
    assert_int_equal(pthread_create(&ida, NULL, thr_run, &ta), 0);
    for (int i = 0; i < 3000 && !exists_in_cache("STARTED"); i++) usleep(10000);
    assert_true(exists_in_cache("STARTED"));
    tg_kcache_stats s0 = tg_kcache_stats_get();
    for (int call = 0; call < 2; call++) { /* from the folder, then from memory */
        tb = (thr){.nd = first_node(call ? gb : gb2), .in = {a, b}};
        thr_run(&tb);
        paper_check(&tb, 1.5, "B");
    }
    tg_kcache_stats s1 = tg_kcache_stats_get();
    assert_int_equal(tg_composite_node_mode(first_node(gb2)), 1);
    bool waited = exists_in_cache("TIMEDOUT");
    touch_in_cache("RELEASE");
    assert_int_equal(pthread_join(ida, NULL), 0);
    if (waited) fail_msg("a kernel on disk waited for another kernel's compile");
    assert_int_equal(s1.disk_hits - s0.disk_hits, 1);
    assert_int_equal(s1.compiles - s0.compiles, 0);
    assert_int_equal(s1.failures - s0.failures, 0);
    paper_check(&ta, 3.25, "A");
    assert_int_equal(tg_composite_node_mode(first_node(ga)), 1);
    assert_int_equal(tg_kcache_stats_get().compiles - s0.compiles, 1);
    tg_array_free(a);
    tg_array_free(b);
    tg_graph_free(ga);
    tg_graph_free(gb);
    tg_graph_free(gb2);
    free(ja);
    free(jb);
    unsetenv("TG_CC");
    tg_kcache_forget();
    drop_cache();
}

/* A forked child of a process that ran parallel loops runs them again
 * (on one thread) instead of hanging: GNU OpenMP's pool does not come
 * along through fork(), and its next parallel region waited for the
 * parent's threads forever (core.c). The function fuses exp, tanh and a
 * multiplication into one composite over 2^21 float64 and sums it, both
 * above the parallel threshold; the child's values are the parent's, bit
 * for bit, and the sum is the one computed here. */
typedef struct fork_call {
    tg_function *f;
    tg_array *a;
    tg_ctx *ctx;
    double s;
    const double *d; /* the parent's results */
    int64_t n;
} fork_call;

/* test_fork_child's child: the call again, against the parent's results. */
static int fork_child(void *arg) {
    const fork_call *c = arg;
    tg_array *o2[2] = {0};
    if (tg_function_call(c->f, &c->a, o2, c->ctx) != TG_OK) return 2;
    if (*(const double *)tg_array_data(o2[0]) != c->s) return 3;
    if (memcmp(tg_array_data(o2[1]), c->d, (size_t)c->n * sizeof(double))) return 4;
    return 0;
}

static void test_fork_child(void **state) {
    (void)state;
    fresh_cache("fork");
    enum { N = 1 << 21 };
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":["
        "{\"op\":\"exp\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]},"
        "{\"op\":\"tanh\",\"inputs\":[\"b\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"c\",\"a\"],\"outputs\":[\"d\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"d\"],\"outputs\":[\"s\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"a\"],\"outputs\":[\"s\",\"d\"]}}}");
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    tg_array *a = ramp(N, 1.0 / N, -0.5);
    tg_array *out[2] = {0};
    assert_int_equal(tg_function_call(f, &a, out, ctx), TG_OK);
    const double *ad = tg_array_data(a), *d = tg_array_data(out[1]);
    double s = *(const double *)tg_array_data(out[0]), want = 0;
    for (int64_t i = 0; i < N; i++) want += tanh(exp(ad[i])) * ad[i];
    assert_true(fabs(s - want) <= 1e-9 * fabs(want) + 1e-9);
    fork_call c = {f, a, ctx, s, d, N};
    assert_int_equal(tu_forked(fork_child, &c), 0);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(a);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    drop_cache();
}

/* Nodes of one body share its kernel and source, one per mask of 0-d
 * inputs: y1 = a*b + a and y3 = b*a + b over vectors share a source; y2 =
 * a*s + a, with s 0-d, gets its own (s read once, before the loop). Two
 * compiles in a fresh cache, none for the third node; values by hand. */
static void test_kernel_per_body(void **state) {
    (void)state;
    fresh_cache("body");
    const char *body = "{\"body\":{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                       "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                       "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"m\"]},"
                       "{\"op\":\"add\",\"inputs\":[\"m\",\"x\"],\"outputs\":[\"r\"]}],"
                       "\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}}";
    char *j = NULL;
    assert_true(asprintf(&j,
                         "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                         "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[5]}},"
                         "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[5]}},"
                         "{\"id\":\"s\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":["
                         "{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y1\"],\"attrs\":%s},"
                         "{\"op\":\"composite\",\"inputs\":[\"a\",\"s\"],\"outputs\":[\"y2\"],\"attrs\":%s},"
                         "{\"op\":\"composite\",\"inputs\":[\"b\",\"a\"],\"outputs\":[\"y3\"],\"attrs\":%s}]}",
                         body, body, body) > 0);
    tg_graph *g = tu_load(j);
    int64_t five = 5;
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &five), *b = tg_array_new(TG_FLOAT64, 1, &five),
             *sc = tg_array_new(TG_FLOAT64, 0, NULL);
    double *pa = tg_array_data(a), *pb = tg_array_data(b);
    for (int i = 0; i < 5; i++) {
        pa[i] = i - 1.5;
        pb[i] = 0.25 * i + 2;
    }
    *(double *)tg_array_data(sc) = -3;
    tg_array *ins[3][2] = {{a, b}, {a, sc}, {b, a}}, *outs[3] = {0};
    tg_kcache_stats s0 = tg_kcache_stats_get();
    tg_ctx *ctx = tg_ctx_new();
    for (int k = 0; k < 3; k++) {
        tg_array *o[1] = {0};
        assert_int_equal(g->nodes[k]->op->run(g->nodes[k], ins[k], o, ctx), TG_OK);
        assert_int_equal(tg_composite_node_mode(g->nodes[k]), 1);
        outs[k] = o[0];
    }
    tg_kcache_stats s1 = tg_kcache_stats_get();
    assert_int_equal(s1.compiles - s0.compiles, 2);
    assert_int_equal(s1.memory_hits - s0.memory_hits, 0);
    for (int i = 0; i < 5; i++) {
        assert_true(((double *)tg_array_data(outs[0]))[i] == pa[i] * pb[i] + pa[i]);
        assert_true(((double *)tg_array_data(outs[1]))[i] == pa[i] * -3 + pa[i]);
        assert_true(((double *)tg_array_data(outs[2]))[i] == pb[i] * pa[i] + pb[i]);
    }
    const char *src0 = tg_composite_node_source(g->nodes[0]), *src1 = tg_composite_node_source(g->nodes[1]);
    assert_non_null(src0);
    assert_non_null(src1);
    assert_ptr_equal(tg_composite_node_source(g->nodes[2]), src0);
    assert_true(src0 != src1 && strcmp(src0, src1) != 0);
    assert_null(strstr(src0, "= *(const double *)p[2];"));
    assert_non_null(strstr(src1, "= *(const double *)p[2];"));
    for (int k = 0; k < 3; k++) tg_array_free(outs[k]);
    tg_array_free(a);
    tg_array_free(b);
    tg_array_free(sc);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    free(j);
    drop_cache();
}

/* A function's missing kernels are compiled at its first call, together
 * (tg_kcache_prefetch), each once, and its nodes then load them from the
 * disk; compiling the function alone runs no compiler. Three composites
 * of distinct bodies, a + b, a * b and a - b, and a fourth of a's body
 * again (no compile of its own); the values by hand. They were compiled
 * at their nodes' first runs, one after another. */
static void test_prefetch_at_first_call(void **state) {
    (void)state;
    fresh_cache("prefetch");
    static const char *const ops[] = {"add", "mul", "sub", "add"};
    tg_str js = {0};
    tg_str_addf(&js, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
                     "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":[");
    for (int k = 0; k < 4; k++)
        tg_str_addf(&js,
                    "%s{\"op\":\"composite\",\"inputs\":[\"%s\",\"b\"],\"outputs\":[\"y%d\"],\"attrs\":{\"body\":{"
                    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                    "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                    "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}],"
                    "\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}}}",
                    k ? "," : "", k == 3 ? "b" : "a", k, ops[k]);
    tg_str_addf(&js, "],\"functions\":{\"main\":{\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y0\",\"y1\",\"y2\",\"y3\"]}}}");
    assert_false(js.oom);
    tg_graph *g = tu_load(js.s);
    tg_ctx *ctx = tg_ctx_new();
    tg_kcache_stats s0 = tg_kcache_stats_get();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    tg_kcache_stats s1 = tg_kcache_stats_get();
    assert_int_equal(s1.compiles - s0.compiles, 0);
    assert_int_equal(s1.disk_hits - s0.disk_hits, 0);
    tg_array *in[2] = {ramp(100, 2, -1), ramp(100, 1, 0.5)}, *out[4] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    tg_kcache_stats s2 = tg_kcache_stats_get();
    assert_int_equal(s2.compiles - s1.compiles, 3);
    assert_int_equal(s2.disk_hits - s1.disk_hits, 3);
    assert_int_equal(s2.failures - s1.failures, 0);
    const double *a = tg_array_data(in[0]), *b = tg_array_data(in[1]);
    for (int i = 0; i < 100; i++) {
        double want[4] = {a[i] + b[i], a[i] * b[i], a[i] - b[i], b[i] + b[i]};
        for (int k = 0; k < 4; k++)
            if (((const double *)tg_array_data(out[k]))[i] != want[k])
                fail_msg("y%d[%d] = %.17g, want %.17g", k, i, ((const double *)tg_array_data(out[k]))[i], want[k]);
    }
    for (int k = 0; k < 4; k++) tg_array_free(out[k]);
    tg_function_free(f);
    /* Compiled again as a new process would (the kernels on disk, none
     * in memory): nothing to compile. */
    tg_kcache_forget();
    tg_kcache_stats s3 = tg_kcache_stats_get();
    assert_non_null(f = tg_function_compile(g, 0, NULL, ctx));
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    assert_int_equal(tg_kcache_stats_get().compiles - s3.compiles, 0);
    for (int k = 0; k < 4; k++) tg_array_free(out[k]);
    tg_function_free(f);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    tg_str_free(&js);
    drop_cache();
}

/* A composite node `out` = body(in1, in2) over float64 scalars x, w: the
 * body is `op`(x, w), or with op2, op2(op(x, x), w). */
static void add_comp(tg_str *js, bool first, const char *out, const char *in1, const char *in2, const char *op,
                     const char *op2) {
    tg_str_addf(js,
                "%s{\"op\":\"composite\",\"inputs\":[\"%s\",\"%s\"],\"outputs\":[\"%s\"],\"attrs\":{\"body\":{"
                "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":[",
                first ? "" : ",", in1, in2, out);
    if (op2)
        tg_str_addf(js,
                    "{\"op\":\"%s\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"t\"]},"
                    "{\"op\":\"%s\",\"inputs\":[\"t\",\"w\"],\"outputs\":[\"r\"]}",
                    op, op2);
    else
        tg_str_addf(js, "{\"op\":\"%s\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}", op);
    tg_str_addf(js, "],\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}}}");
}

/* The first call compiles together only the kernels of the nodes it is
 * sure to run, those outside every lazy ifelse branch; a branch's are
 * compiled when it runs (at their nodes' first runs, as before). The
 * backed-out first version compiled those of every branch at the first
 * call (test_ifelse's 20,000 branches: 19,999 compiles, more than 15
 * minutes). y0 = a + b and z = r*r + a run always; r = ifelse(c, a*b,
 * ifelse(c2, a-b, a/b)); five distinct bodies; the values by hand. */
static void test_prefetch_sure_nodes_only(void **state) {
    (void)state;
    fresh_cache("sure");
    tg_kcache_forget(); /* none of the earlier tests' kernels in memory */
    tg_str js = {0};
    tg_str_addf(&js, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
                     "{\"id\":\"c2\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
                     "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
                     "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":[");
    add_comp(&js, true, "y0", "a", "b", "add", NULL);
    add_comp(&js, false, "t", "a", "b", "mul", NULL);
    add_comp(&js, false, "e1", "a", "b", "sub", NULL);
    add_comp(&js, false, "e2", "a", "b", "true_div", NULL);
    tg_str_addf(&js, ",{\"op\":\"ifelse\",\"inputs\":[\"c2\",\"e1\",\"e2\"],\"outputs\":[\"e\"]}"
                     ",{\"op\":\"ifelse\",\"inputs\":[\"c\",\"t\",\"e\"],\"outputs\":[\"r\"]}");
    add_comp(&js, false, "z", "r", "a", "mul", "add");
    tg_str_addf(&js, "],\"functions\":{\"main\":{\"inputs\":[\"c\",\"c2\",\"a\",\"b\"],\"outputs\":[\"y0\",\"z\"]}}}");
    assert_false(js.oom);
    tg_graph *g = tu_load(js.s);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = "none"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    tg_array *A = ramp(100, 2, -1), *B = ramp(100, 1, 0.5);
    const double *a = tg_array_data(A), *b = tg_array_data(B);
    /* c, c2; the kernels compiled, and of those loaded from the folder:
     * y0's and z's compiled together before the nodes run, then loaded;
     * a branch's when it first runs, by its node's run (not loaded) */
    static const struct {
        bool c, c2;
        int compiles, disk_hits;
    } calls[] = {{true, false, 3, 2}, {false, true, 1, 0}, {false, false, 1, 0}, {true, true, 0, 0}};
    for (int q = 0; q < 4; q++) {
        tg_array *C = tg_array_new_scalar(TG_BOOL, calls[q].c), *C2 = tg_array_new_scalar(TG_BOOL, calls[q].c2);
        tg_array *in[4] = {C, C2, A, B}, *out[2] = {0};
        tg_kcache_stats s0 = tg_kcache_stats_get();
        if (tg_function_call(f, in, out, ctx)) fail_msg("call %d: %s", q, tg_ctx_message(ctx));
        tg_kcache_stats s1 = tg_kcache_stats_get();
        if (s1.compiles - s0.compiles != calls[q].compiles || s1.disk_hits - s0.disk_hits != calls[q].disk_hits)
            fail_msg("call %d (c=%d, c2=%d): %d compiles, %d from the folder; want %d, %d", q, calls[q].c,
                     calls[q].c2, (int)(s1.compiles - s0.compiles), (int)(s1.disk_hits - s0.disk_hits),
                     calls[q].compiles, calls[q].disk_hits);
        assert_int_equal(s1.failures - s0.failures, 0);
        for (int i = 0; i < 100; i++) {
            double r = calls[q].c ? a[i] * b[i] : calls[q].c2 ? a[i] - b[i] : a[i] / b[i];
            double want[2] = {a[i] + b[i], r * r + a[i]};
            for (int k = 0; k < 2; k++)
                if (((const double *)tg_array_data(out[k]))[i] != want[k])
                    fail_msg("call %d: out %d [%d] = %.17g, want %.17g", q, k, i,
                             ((const double *)tg_array_data(out[k]))[i], want[k]);
        }
        tg_array_free(out[0]);
        tg_array_free(out[1]);
        tg_array_free(C);
        tg_array_free(C2);
    }
    tg_function_free(f);
    tg_array_free(A);
    tg_array_free(B);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    tg_str_free(&js);
    drop_cache();
}

/* A lazy branch's kernels are compiled together when it first runs (as
 * the first call's are), not one after another at their nodes' runs:
 * r = ifelse(c, max(a*b + (a-b), ifelse(c2, min(a, b), a*a - b)),
 * (a/b)*(a/b) + a), y0 = (a+a)*b; nine distinct bodies. The then-block
 * has four of its own (the nested branch's two are not the block's: each
 * alone, compiled by its run); the else-block two. Compiled together,
 * they are then loaded from the folder by their nodes' runs (disk hits);
 * one at a time, each run compiled its own (no disk hit). The values by
 * hand. */
static void test_prefetch_branch_block(void **state) {
    (void)state;
    fresh_cache("block");
    tg_kcache_forget();
    tg_str js = {0};
    tg_str_addf(&js, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"c\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
                     "{\"id\":\"c2\",\"type\":{\"dtype\":\"bool\",\"shape\":[]}},"
                     "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
                     "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":[");
    add_comp(&js, true, "y0", "a", "b", "add", "mul");
    add_comp(&js, false, "t1", "a", "b", "mul", NULL);
    add_comp(&js, false, "t2", "a", "b", "sub", NULL);
    add_comp(&js, false, "t3", "t1", "t2", "add", NULL);
    add_comp(&js, false, "i1", "a", "b", "minimum", NULL);
    add_comp(&js, false, "i2", "a", "b", "mul", "sub");
    tg_str_addf(&js, ",{\"op\":\"ifelse\",\"inputs\":[\"c2\",\"i1\",\"i2\"],\"outputs\":[\"in\"]}");
    add_comp(&js, false, "t", "t3", "in", "maximum", NULL);
    add_comp(&js, false, "e1", "a", "b", "true_div", NULL);
    add_comp(&js, false, "e2", "e1", "a", "mul", "add");
    tg_str_addf(&js, ",{\"op\":\"ifelse\",\"inputs\":[\"c\",\"t\",\"e2\"],\"outputs\":[\"r\"]}"
                     "],\"functions\":{\"main\":{\"inputs\":[\"c\",\"c2\",\"a\",\"b\"],\"outputs\":[\"y0\",\"r\"]}}}");
    assert_false(js.oom);
    tg_graph *g = tu_load(js.s);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = "none"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    tg_array *A = ramp(100, 2, 0.5), *B = ramp(100, 1, 0.25);
    const double *a = tg_array_data(A), *b = tg_array_data(B);
    /* call 0: y0 alone (its run), the then-block's four together (then
     * loaded), the nested then-block's one (its run); call 1: the
     * else-block's two together; call 2: the nested else-block's one */
    static const struct {
        bool c, c2;
        int compiles, disk_hits;
    } calls[] = {{true, true, 6, 4}, {false, true, 2, 2}, {true, false, 1, 0}, {true, true, 0, 0}, {false, false, 0, 0}};
    for (int q = 0; q < 5; q++) {
        tg_array *C = tg_array_new_scalar(TG_BOOL, calls[q].c), *C2 = tg_array_new_scalar(TG_BOOL, calls[q].c2);
        tg_array *in[4] = {C, C2, A, B}, *out[2] = {0};
        tg_kcache_stats s0 = tg_kcache_stats_get();
        if (tg_function_call(f, in, out, ctx)) fail_msg("call %d: %s", q, tg_ctx_message(ctx));
        tg_kcache_stats s1 = tg_kcache_stats_get();
        if (s1.compiles - s0.compiles != calls[q].compiles || s1.disk_hits - s0.disk_hits != calls[q].disk_hits)
            fail_msg("call %d (c=%d, c2=%d): %d compiles, %d from the folder; want %d, %d", q, calls[q].c,
                     calls[q].c2, (int)(s1.compiles - s0.compiles), (int)(s1.disk_hits - s0.disk_hits),
                     calls[q].compiles, calls[q].disk_hits);
        assert_int_equal(s1.failures - s0.failures, 0);
        for (int i = 0; i < 100; i++) {
            double inner = calls[q].c2 ? fmin(a[i], b[i]) : a[i] * a[i] - b[i];
            double r = calls[q].c ? fmax(a[i] * b[i] + (a[i] - b[i]), inner)
                                  : (a[i] / b[i]) * (a[i] / b[i]) + a[i];
            double want[2] = {(a[i] + a[i]) * b[i], r};
            for (int k = 0; k < 2; k++)
                if (((const double *)tg_array_data(out[k]))[i] != want[k])
                    fail_msg("call %d: out %d [%d] = %.17g, want %.17g", q, k, i,
                             ((const double *)tg_array_data(out[k]))[i], want[k]);
        }
        tg_array_free(out[0]);
        tg_array_free(out[1]);
        tg_array_free(C);
        tg_array_free(C2);
    }
    tg_function_free(f);
    tg_array_free(A);
    tg_array_free(B);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    tg_str_free(&js);
    drop_cache();
}

/* The graph of test_prefetch_at_first_call: y0..y3 = a + b, a * b, a - b,
 * b + b (three distinct bodies). */
static tg_graph *four_graph(void) {
    static const char *const ops[] = {"add", "mul", "sub", "add"};
    tg_str js = {0};
    tg_str_addf(&js, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
                     "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":[");
    for (int k = 0; k < 4; k++) {
        char y[8];
        snprintf(y, sizeof y, "y%d", k);
        add_comp(&js, k == 0, y, k == 3 ? "b" : "a", "b", ops[k], NULL);
    }
    tg_str_addf(&js, "],\"functions\":{\"main\":{\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y0\",\"y1\",\"y2\",\"y3\"]}}}");
    assert_false(js.oom);
    tg_graph *g = tu_load(js.s);
    tg_str_free(&js);
    return g;
}

static void check_four(tg_array *const *in, tg_array *const *out) {
    const double *a = tg_array_data(in[0]), *b = tg_array_data(in[1]);
    for (int i = 0; i < 100; i++) {
        double want[4] = {a[i] + b[i], a[i] * b[i], a[i] - b[i], b[i] + b[i]};
        for (int k = 0; k < 4; k++)
            if (((const double *)tg_array_data(out[k]))[i] != want[k])
                fail_msg("y%d[%d] = %.17g, want %.17g", k, i, ((const double *)tg_array_data(out[k]))[i], want[k]);
    }
}

/* A first call with each of its allocations failing in turn fails with
 * "out of memory" every time (tu_call_failing_each, as test_conv_direct
 * and test_conv_grads check their calls): with every kernel in memory
 * there is nothing to compile, and the first call's look for missing
 * kernels allocates nothing. The backed-out first version allocated a
 * list of the function's nodes at every first call and went on silently
 * when that failed, so the first failing allocation went unreported and
 * the call succeeded. */
static void test_prefetch_first_call_out_of_memory(void **state) {
    (void)state;
    fresh_cache("oomcall");
    tg_kcache_forget(); /* none of the earlier tests' kernels in memory */
    tg_graph *g = four_graph();
    tg_ctx *ctx = tg_ctx_new();
    tg_array *in[2] = {ramp(100, 2, -1), ramp(100, 1, 0.5)}, *out[4] = {0};
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    for (int k = 0; k < 4; k++) tg_array_free(out[k]);
    tg_function_free(f);
    /* the kernels in memory: a new function's first call */
    assert_non_null(f = tg_function_compile(g, 0, NULL, ctx));
    tg_kcache_stats s0 = tg_kcache_stats_get();
    long failed = tu_call_failing_each(f, in, out, ctx);
    tg_kcache_stats s1 = tg_kcache_stats_get();
    check_four(in, out);
    assert_true(failed >= 4); /* at least the four results */
    assert_int_equal(s1.compiles - s0.compiles, 0);
    assert_int_equal(s1.failures - s0.failures, 0);
    for (int k = 0; k < 4; k++) tg_array_free(out[k]);
    tg_function_free(f);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    drop_cache();
}

/* The prefetch itself (tg_composite_prefetch, on the graph's nodes: a
 * function's are clones with the same kernels) with each of its
 * allocations failing in turn, three kernels to compile: TG_ENOMEM and
 * "out of memory" each time, what compiled stays compiled (each kernel is
 * compiled once over all the tries), and a call after it loads the three
 * from the folder. Then, with nothing to compile (the kernels on disk,
 * not in memory, the compiler probed), on the nodes of the graph loaded
 * again, it allocates nothing. */
static void test_prefetch_out_of_memory(void **state) {
    (void)state;
    fresh_cache("oompre");
    tg_kcache_forget(); /* none of the earlier tests' kernels in memory */
    tg_graph *g = four_graph();
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    /* the compiler probed first (its allocations are made once) */
    assert_int_equal(tg_kcache_wanted("probe the compiler"), 1);
    tg_kcache_stats s0 = tg_kcache_stats_get();
    long k = 1;
    for (; k < 200; k++) {
        tu_fail_allocation(k);
        int rc = tg_composite_prefetch(g->nodes, g->nnodes, NULL, NULL, ctx);
        tu_fail_allocation(0);
        if (rc == TG_OK) break;
        assert_int_equal(rc, TG_ENOMEM);
        if (!strstr(tg_ctx_message(ctx), "out of memory")) fail_msg("allocation %ld: %s", k, tg_ctx_message(ctx));
        tg_ctx_clear(ctx);
    }
    assert_true(k >= 3 && k < 200); /* the list of the kernels and of the compiles at least */
    tg_kcache_stats s1 = tg_kcache_stats_get();
    assert_int_equal(s1.compiles - s0.compiles, 3);
    assert_int_equal(s1.failures - s0.failures, 0);
    tg_array *in[2] = {ramp(100, 2, -1), ramp(100, 1, 0.5)}, *out[4] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    tg_kcache_stats s2 = tg_kcache_stats_get();
    assert_int_equal(s2.compiles - s1.compiles, 0);
    assert_int_equal(s2.disk_hits - s1.disk_hits, 3);
    check_four(in, out);
    for (int q = 0; q < 4; q++) tg_array_free(out[q]);
    tg_function_free(f);
    /* nothing to compile: nothing allocated */
    tg_graph *g2 = four_graph();
    tg_kcache_forget();
    assert_int_equal(tg_kcache_wanted("probe the compiler"), 1);
    tu_count_begin();
    int rc = tg_composite_prefetch(g2->nodes, g2->nnodes, NULL, NULL, ctx);
    tu_alloc_count c = tu_count_end();
    assert_int_equal(rc, TG_OK);
    if (c.allocs != 0) fail_msg("%g allocations with nothing to compile", c.allocs);
    assert_int_equal(tg_kcache_stats_get().compiles - s2.compiles, 0);
    tg_graph_free(g2);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    drop_cache();
}

/* A scan's body is a function of its own, run once per step
 * (tg_function_run_bound): its first step compiles its missing kernels
 * together, and no later step compiles anything. h_t = tanh(h_p) * 3 and
 * g_t = (g_p * g_p) - h_p over 5 steps: two bodies. The first version
 * prefetched only at tg_function_call, so a scan's body compiled its
 * kernels one after another at its first step. */
static void test_prefetch_scan_body(void **state) {
    (void)state;
    fresh_cache("scan");
    tg_kcache_forget(); /* none of the earlier tests' kernels in memory */
    tg_str js = {0};
    tg_str_addf(&js, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"h0\",\"type\":{\"dtype\":\"float64\",\"shape\":[8]}},"
                     "{\"id\":\"g0\",\"type\":{\"dtype\":\"float64\",\"shape\":[8]}},"
                     "{\"id\":\"k\",\"type\":{\"dtype\":\"int32\",\"shape\":[]}}],"
                     "\"nodes\":[{\"op\":\"scan\",\"inputs\":[\"k\",\"h0\",\"g0\"],\"outputs\":[\"hs\",\"gs\"],"
                     "\"attrs\":{\"n_sequences\":0,\"sequence_taps\":[],\"n_recurrent\":2,"
                     "\"output_taps\":[[-1],[-1]],\"n_nonrecurrent\":0,\"n_non_sequences\":0,"
                     "\"has_n_steps\":true,\"has_until\":false,\"name\":\"loop\",\"body\":{"
                     "\"variables\":[{\"id\":\"h_p\",\"type\":{\"dtype\":\"float64\",\"shape\":[8]}},"
                     "{\"id\":\"g_p\",\"type\":{\"dtype\":\"float64\",\"shape\":[8]}}],\"nodes\":[");
    tg_str_addf(&js, "{\"op\":\"tanh\",\"inputs\":[\"h_p\"],\"outputs\":[\"th\"]},"
                     "{\"op\":\"mul\",\"inputs\":[\"th\",{\"value\":3.0}],\"outputs\":[\"h_t\"]},"
                     "{\"op\":\"sqr\",\"inputs\":[\"g_p\"],\"outputs\":[\"g2\"]},"
                     "{\"op\":\"sub\",\"inputs\":[\"g2\",\"h_p\"],\"outputs\":[\"g_t\"]}],"
                     "\"inputs\":[\"h_p\",\"g_p\"],\"outputs\":[\"h_t\",\"g_t\"]}}}],"
                     "\"functions\":{\"main\":{\"inputs\":[\"h0\",\"g0\",\"k\"],\"outputs\":[\"hs\",\"gs\"]}}}");
    assert_false(js.oom);
    tg_graph *g = tu_load(js.s);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    int64_t n8 = 8;
    tg_array *H = tg_array_new(TG_FLOAT64, 1, &n8), *G = tg_array_new(TG_FLOAT64, 1, &n8);
    for (int i = 0; i < 8; i++) {
        ((double *)tg_array_data(H))[i] = 0.1 * i - 0.3;
        ((double *)tg_array_data(G))[i] = 0.05 * i;
    }
    tg_array *K = tg_array_new_scalar(TG_INT32, 5), *in[3] = {H, G, K}, *out[2] = {0};
    tg_kcache_stats s0 = tg_kcache_stats_get();
    if (tg_function_call(f, in, out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    tg_kcache_stats s1 = tg_kcache_stats_get();
    long nc = (long)(s1.compiles - s0.compiles);
    /* two kernels or more, compiled together, loaded from the folder */
    if (nc < 2 || s1.disk_hits - s0.disk_hits != nc || s1.failures != s0.failures)
        fail_msg("%ld compiles, %ld loaded from the folder, %ld failures", nc, (long)(s1.disk_hits - s0.disk_hits),
                 (long)(s1.failures - s0.failures));
    for (int i = 0; i < 8; i++) {
        double h = 0.1 * i - 0.3, gg = 0.05 * i;
        for (int t = 0; t < 5; t++) {
            double hn = tanh(h) * 3, gn = gg * gg - h;
            h = hn;
            gg = gn;
            tu_assert_near(tg_array_get_flat(out[0], t * 8 + i), h, 1e-14 * fabs(h) + 1e-300);
            tu_assert_near(tg_array_get_flat(out[1], t * 8 + i), gg, 1e-14 * fabs(gg) + 1e-300);
        }
    }
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    /* a second call: nothing compiled */
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    assert_int_equal(tg_kcache_stats_get().compiles - s1.compiles, 0);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(H);
    tg_array_free(G);
    tg_array_free(K);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    tg_str_free(&js);
    drop_cache();
}

/* sin(x) + cos(x) fused and compiled gives the unfused ops' bits: GCC
 * turned the two calls into one scalar sincos, which has no vector
 * variant, so the loop ran glibc's scalar sin and cos (and exp, and the
 * rest of the body) instead of libmvec's, as the unfused loops do: 508
 * of 1000 elements differed by an ulp. float64 and float32. (The
 * sanitizer build's own loops are not vectorised: there the unfused ops
 * call scalar libm, and the test asks for libmvec's 4 ulp of each term
 * instead.) */
static void test_sincos_same_bits(void **state) {
    (void)state;
    fresh_cache("sincos");
    for (int d = 0; d < 2; d++) {
        const char *dt = d ? "float32" : "float64";
        char *j = NULL;
        assert_true(asprintf(&j,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[1000]}}],\"nodes\":["
                             "{\"op\":\"sin\",\"inputs\":[\"x\"],\"outputs\":[\"s\"]},"
                             "{\"op\":\"cos\",\"inputs\":[\"x\"],\"outputs\":[\"c\"]},"
                             "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"e\"]},"
                             "{\"op\":\"add\",\"inputs\":[\"s\",\"c\",\"e\"],\"outputs\":[\"y\"]}]}",
                             dt) > 0);
        tg_graph *g = tu_load(j);
        tg_array *x64 = ramp(1000, 20, -10), *x = tg_array_copy(x64, d ? TG_FLOAT32 : TG_FLOAT64);
        tg_array *un[1] = {0}, *fu[1] = {0};
        tu_call_preset(g, NULL, "none", &x, un);
        tu_call_preset(g, NULL, "fast_run", &x, fu);
        size_t isz = d ? 4 : 8;
        int differ = 0;
        for (int64_t i = 0; i < 1000; i++) {
#if defined(__SANITIZE_ADDRESS__)
            (void)isz;
            /* (each term to 4 ulp of itself: the sum cancels) */
            double a = tg_array_get_flat(un[0], i), b = tg_array_get_flat(fu[0], i), v = tg_array_get_flat(x, i);
            double m = fabs(sin(v)) + fabs(cos(v)) + exp(v);
            differ += fabs(a - b) > (d ? 8 * 0x1p-23 : 8 * 0x1p-52) * m;
#else
            differ += memcmp((const char *)tg_array_data(un[0]) + i * (int64_t)isz,
                             (const char *)tg_array_data(fu[0]) + i * (int64_t)isz, isz) != 0;
#endif
        }
        if (differ) fail_msg("%s: %d of 1000 elements differ from the unfused ops'", dt, differ);
        tg_array_free(un[0]);
        tg_array_free(fu[0]);
        tg_array_free(x);
        tg_array_free(x64);
        tg_graph_free(g);
        free(j);
    }
    drop_cache();
}

/* A compiled kernel gives each element the same bits wherever it falls:
 * a short array (no whole block), a stretch starting off a block boundary,
 * a reversed and a step-2 view (the gathered path), and the long array
 * whose blocks threads share. Its body calls tanh and exp, whose vector
 * variants (libmvec) round differently from scalar libm: a vector loop
 * with a scalar remainder, or split among threads at any element, gave
 * the last elements of a call other bits (random_graphs tools seed 97099:
 * an exported graph's gradient 1 ulp off its function's). float64 and
 * float32. */
static void test_same_bits_any_layout(void **state) {
    (void)state;
    fresh_cache("bits");
    for (int d = 0; d < 2; d++) {
        const char *dt = d ? "float32" : "float64";
        tg_dtype t = d ? TG_FLOAT32 : TG_FLOAT64;
        size_t isz = d ? 4 : 8;
        char *j = NULL;
        assert_true(asprintf(&j,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[null]}},"
                             "{\"id\":\"b\",\"type\":{\"dtype\":\"%s\",\"shape\":[null]}}],\"nodes\":["
                             "{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"],\"attrs\":{\"body\":{"
                             "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}},"
                             "{\"id\":\"w\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}}],"
                             "\"nodes\":[{\"op\":\"tanh\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]},"
                             "{\"op\":\"exp\",\"inputs\":[\"w\"],\"outputs\":[\"e\"]},"
                             "{\"op\":\"mul\",\"inputs\":[\"t\",\"e\"],\"outputs\":[\"r\"]}],"
                             "\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}}}]}",
                             dt, dt, dt, dt) > 0);
        tg_graph *g = tu_load(j);
        tg_node *nd = first_node(g);
        enum { N = 70000 }; /* over TG_COMPOSITE_PAR_MIN: threads share the blocks */
        tg_array *fa = ramp(N, 4, -2), *fb = ramp(N, 3, -1.5);
        tg_array *a = tg_array_copy(fa, t), *b = tg_array_copy(fb, t);
        tg_ctx *ctx = tg_ctx_new();
        tg_array *ref[1] = {0}, *in[2] = {a, b};
        assert_int_equal(nd->op->run(nd, in, ref, ctx), TG_OK);
        assert_int_equal(tg_composite_node_mode(nd), 1); /* compiled, as in test_kernel_per_body */
        /* each case: a view of a and b, and where its element i is in ref */
        struct {
            int64_t start, stop, step, at, by;
        } cases[] = {{0, 13, 1, 0, 1}, {5, 45, 1, 5, 1}, {63, TG_SLICE_NONE, -1, 63, -1}, {1, 200, 2, 1, 2}, {N - 37, N, 1, N - 37, 1}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            tg_array *va = tg_array_view_slice(a, 0, cases[c].start, cases[c].stop, cases[c].step, ctx);
            tg_array *vb = tg_array_view_slice(b, 0, cases[c].start, cases[c].stop, cases[c].step, ctx);
            assert_non_null(va);
            assert_non_null(vb);
            tg_array *got[1] = {0}, *vin[2] = {va, vb};
            assert_int_equal(nd->op->run(nd, vin, got, ctx), TG_OK);
            const char *r = tg_array_data(ref[0]), *q = tg_array_data(got[0]);
            int64_t n = tg_array_size(got[0]);
            for (int64_t i = 0; i < n; i++) {
                int64_t k = cases[c].at + i * cases[c].by;
                if (memcmp(r + k * (int64_t)isz, q + i * (int64_t)isz, isz))
                    fail_msg("%s, case %zu, element %lld: %.17g, %.17g in the long array", dt, c, (long long)i,
                             tg_array_get_flat(got[0], i), tg_array_get_flat(ref[0], k));
            }
            tg_array_free(got[0]);
            tg_array_free(va);
            tg_array_free(vb);
        }
        tg_array_free(ref[0]);
        tg_array_free(a);
        tg_array_free(b);
        tg_array_free(fa);
        tg_array_free(fb);
        tg_ctx_free(ctx);
        tg_graph_free(g);
        free(j);
    }
    drop_cache();
}

/* Broadcast operands: the rows the kernel runs over are merged axes
 * (a bias (1, C, 1, 1) over (N, C, H, W) is N*C rows of H*W), an input
 * constant along a row is read once per row (a kernel of its own), and
 * threads take whole rows. None of it may change a bit: each case is
 * computed again on the operand copied out to the full shape (one
 * contiguous run), for a body that calls tanh (the blocked kernel) and
 * one that does not, float64 and float32, with 1 and 2 threads. */
static void test_same_bits_broadcast(void **state) {
    (void)state;
    fresh_cache("bcast");
    static const char *bodies[2] = {
        "{\"op\":\"add\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"tanh\",\"inputs\":[\"s\"],\"outputs\":[\"r\"]}",
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"sub\",\"inputs\":[\"s\",\"x\"],\"outputs\":[\"r\"]}"};
    static const int64_t bshapes[4][4] = {{1, 8, 1, 1}, {1, 1, 1, 13}, {40, 1, 12, 1}, {1, 1, 1, 1}};
    const int64_t ashape[4] = {40, 8, 12, 13}; /* 49,920 elements; 2 x that for threads */
    for (int d = 0; d < 2; d++)
        for (int bo = 0; bo < 2; bo++) {
            const char *dt = d ? "float32" : "float64";
            tg_dtype t = d ? TG_FLOAT32 : TG_FLOAT64;
            char *j = NULL;
            assert_true(asprintf(&j,
                                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                                 "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null,null,null]}},"
                                 "{\"id\":\"b\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null,null,null]}}],"
                                 "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"],"
                                 "\"attrs\":{\"body\":{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"%s\","
                                 "\"shape\":[]}},{\"id\":\"w\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}}],"
                                 "\"nodes\":[%s],\"inputs\":[\"x\",\"w\"],\"outputs\":[\"r\"]}}}]}",
                                 dt, dt, dt, dt, bodies[bo]) > 0);
            tg_graph *g = tu_load(j);
            tg_node *nd = first_node(g);
            tg_ctx *ctx = tg_ctx_new();
            for (int big = 0; big < 2; big++) {
                int64_t as[4] = {ashape[0] * (big + 1), ashape[1], ashape[2], ashape[3]};
                int64_t na = as[0] * as[1] * as[2] * as[3];
                tg_array *fa = ramp(na, 4, -2), *a0 = tg_array_copy(fa, t);
                tg_array *a = tg_array_reshape(a0, 4, as, ctx);
                assert_non_null(a);
                for (int c = 0; c < 4; c++) {
                    int64_t bs[4];
                    memcpy(bs, bshapes[c], sizeof bs);
                    if (bs[0] > 1) bs[0] = as[0];
                    int64_t nb = bs[0] * bs[1] * bs[2] * bs[3];
                    tg_array *fb = ramp(nb, 3, -1.5), *b0 = tg_array_copy(fb, t);
                    tg_array *b = tg_array_reshape(b0, 4, bs, ctx), *full = tg_array_empty(t, 4, as);
                    assert_non_null(b);
                    assert_int_equal(tg_array_assign(full, b, ctx), TG_OK);
                    tg_array *ref[1] = {0}, *rin[2] = {a, full};
                    assert_int_equal(nd->op->run(nd, rin, ref, ctx), TG_OK);
                    assert_int_equal(tg_composite_node_mode(nd), 1);
                    for (int th = 1; th <= 2; th++) {
                        omp_set_num_threads(th);
                        tg_array *got[1] = {0}, *in[2] = {a, b};
                        assert_int_equal(nd->op->run(nd, in, got, ctx), TG_OK);
                        assert_int_equal(tg_array_size(got[0]), na);
                        if (memcmp(tg_array_data(got[0]), tg_array_data(ref[0]), (size_t)na * tg_dtype_size(t))) {
                            int64_t i = 0;
                            while (tg_array_get_flat(got[0], i) == tg_array_get_flat(ref[0], i)) i++;
                            fail_msg("%s body %d, b case %d, %d threads, element %lld: %.17g, full: %.17g", dt, bo,
                                     c, th, (long long)i, tg_array_get_flat(got[0], i), tg_array_get_flat(ref[0], i));
                        }
                        tg_array_free(got[0]);
                    }
                    omp_set_num_threads(2);
                    tg_array_free(ref[0]);
                    tg_array_free(full);
                    tg_array_free(b);
                    tg_array_free(b0);
                    tg_array_free(fb);
                }
                tg_array_free(a);
                tg_array_free(a0);
                tg_array_free(fa);
            }
            tg_ctx_free(ctx);
            tg_graph_free(g);
            free(j);
        }
    drop_cache();
}

/* A body a frontend wrote whose output 0 is an identity of input 1, and
 * output 1 placed over input 1: the interpreter writes a block's outputs
 * one by one, so output 1 over b would have changed what output 0 reads.
 * With such a body no output is placed. a = exp(x), b = exp(y) are large
 * intermediates read only by the composite; values by hand. */
static void test_inplace_raw_output(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[6000]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[6000]}}],\"nodes\":["
        "{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},{\"op\":\"exp\",\"inputs\":[\"y\"],\"outputs\":[\"b\"]},"
        "{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"o0\",\"o1\"],\"inplace\":{\"1\":1},\"attrs\":{"
        "\"body\":{\"variables\":[{\"id\":\"p\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"q\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":["
        "{\"op\":\"identity\",\"inputs\":[\"q\"],\"outputs\":[\"t0\"]},{\"op\":\"mul\",\"inputs\":[\"p\",\"q\"],\"outputs\":[\"t1\"]}],"
        "\"inputs\":[\"p\",\"q\"],\"outputs\":[\"t0\",\"t1\"]}}}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\",\"y\"],\"outputs\":[\"o0\",\"o1\"]}}}");
    int64_t n = 6000;
    double *xv = malloc(sizeof *xv * (size_t)n), *yv = malloc(sizeof *yv * (size_t)n);
    for (int64_t k = 0; k < n; k++) {
        xv[k] = sin((double)k) * 2;
        yv[k] = cos((double)k * 0.5);
    }
    tg_array *in[2] = {tu_f64(1, &n, xv), tu_f64(1, &n, yv)};
    tg_composite_force_interp(true);
    for (int rep = 0; rep < 2; rep++) {
        tg_array *out[2] = {NULL, NULL};
        tu_call_preset(g, NULL, "none", in, out);
        for (int64_t k = 0; k < n; k++) {
            tu_assert_near(tg_array_get_flat(out[0], k), exp(yv[k]), 1e-15 * exp(yv[k]));
            tu_assert_near(tg_array_get_flat(out[1], k), exp(xv[k]) * exp(yv[k]), 1e-14 * exp(xv[k] + yv[k]));
        }
        tg_array_free(out[0]);
        tg_array_free(out[1]);
    }
    tg_composite_force_interp(false);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    free(xv);
    free(yv);
    tg_graph_free(g);
}

/* A body that emits no node, its output being its input (r = a): the
 * kernel's source has an empty loop body (it had "(null)", and every run
 * failed to compile it), compiles once, and copies a. */
static void test_empty_body(void **state) {
    (void)state;
    fresh_cache("empty");
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
        "{\"id\":\"r\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"a\"],\"outputs\":[\"r\"],\"attrs\":{\"body\":{"
        "\"variables\":[{\"id\":\"x0\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":[],\"inputs\":[\"x0\"],\"outputs\":[\"x0\"]}}}],"
        "\"functions\":{\"main\":{\"inputs\":[\"a\"],\"outputs\":[\"r\"]}}}");
    tg_kcache_stats s0 = tg_kcache_stats_get();
    int64_t n = 3;
    tg_array *in[1] = {tu_f64(1, &n, (const double[]){1, 2, 3})}, *out[1] = {NULL};
    tg_ctx *ctx = tg_ctx_new();
    tg_node *nd = first_node(g);
    assert_int_equal(nd->op->run(nd, in, out, ctx), TG_OK);
    assert_int_equal(tg_composite_node_mode(nd), 1);
    const char *src = tg_composite_node_source(nd);
    assert_non_null(src);
    assert_null(strstr(src, "(null)"));
    for (int64_t k = 0; k < n; k++) assert_true(tg_array_get_flat(out[0], k) == (double)(k + 1));
    tg_kcache_stats s1 = tg_kcache_stats_get();
    assert_int_equal(s1.compiles - s0.compiles, 1);
    assert_int_equal(s1.failures - s0.failures, 0);
    tg_array_free(out[0]);
    tg_array_free(in[0]);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    drop_cache();
}

/* The process-wide table of fused groups (the fusion pass's signatures)
 * kept every group ever fused, with a copy of its attrs and its parsed
 * body, after the functions were freed: 300 graphs that differ by a
 * constant, each compiled and freed, left 300 entries (a learning-rate
 * sweep grew 22 KB a compile, up to 4,096 entries and 650 MB). Entries
 * no node reads now go as the table grows; those of a live function
 * stay, and every function computes its own constant's values, also
 * while the table is swept under a fusion pass with 200 groups. */
static tg_graph *scaled_tanh(int ngroups, double c0) {
    tg_str j = {0};
    tg_str_addf(&j, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":"
                    "{\"dtype\":\"float64\",\"shape\":[4]}}],\"nodes\":[");
    for (int k = 0; k < ngroups; k++)
        tg_str_addf(&j, "%s{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":%.17g}],\"outputs\":[\"m%d\"]},"
                        "{\"op\":\"tanh\",\"inputs\":[\"m%d\"],\"outputs\":[\"t%d\"]},"
                        "{\"op\":\"sum\",\"inputs\":[\"t%d\"],\"outputs\":[\"s%d\"]}",
                    k ? "," : "", c0 + k, k, k, k, k, k);
    tg_str_addf(&j, "],\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[");
    for (int k = 0; k < ngroups; k++) tg_str_addf(&j, "%s\"s%d\"", k ? "," : "", k);
    tg_str_addf(&j, "]}}}");
    assert_false(j.oom);
    tg_graph *g = tu_load(j.s);
    tg_str_free(&j);
    return g;
}

static void check_scaled_tanh(tg_function *f, int ngroups, double c0) {
    int64_t sh[1] = {4};
    const double xv[4] = {-0.5, 0.25, 0.125, 1};
    tg_array *x = tu_f64(1, sh, xv), **out = calloc((size_t)ngroups, sizeof *out);
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_call(f, &x, out, ctx), 0);
    for (int k = 0; k < ngroups; k++) {
        double want = 0;
        for (int e = 0; e < 4; e++) want += tanh(xv[e] * (c0 + k));
        if (!(fabs(tg_array_get_flat(out[k], 0) - want) <= 1e-14))
            fail_msg("group %d: %.17g, want %.17g", k, tg_array_get_flat(out[k], 0), want);
        tg_array_free(out[k]);
    }
    free(out);
    tg_array_free(x);
    tg_ctx_free(ctx);
}

static void test_sig_table_bounded(void **state) {
    (void)state;
    tg_composite_force_interp(true); /* no compiler: the table is the subject */
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *keep_g = scaled_tanh(1, 0.75);
    tg_function *keep = tg_function_compile(keep_g, 0, NULL, ctx);
    assert_non_null(keep);
    int before = tg_composite_sig_entries();
    for (int i = 0; i < 300; i++) {
        tg_graph *g = scaled_tanh(1, 1000.5 + i);
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        assert_non_null(f);
        if (i % 50 == 0) check_scaled_tanh(f, 1, 1000.5 + i);
        tg_function_free(f);
        tg_graph_free(g);
    }
    int after = tg_composite_sig_entries();
    if (after > before + 2 * 64) fail_msg("%d entries after 300 compiles freed (%d before)", after, before);
    /* 200 groups in one pass: the table is swept under it */
    tg_graph *big = scaled_tanh(200, 5000.25);
    tg_function *fb = tg_function_compile(big, 0, NULL, ctx);
    assert_non_null(fb);
    check_scaled_tanh(fb, 200, 5000.25);
    tg_function_free(fb);
    tg_graph_free(big);
    /* the live function kept its body */
    check_scaled_tanh(keep, 1, 0.75);
    tg_function *again = tg_function_compile(keep_g, 0, NULL, ctx);
    assert_non_null(again);
    check_scaled_tanh(again, 1, 0.75);
    tg_function_free(again);
    tg_function_free(keep);
    tg_graph_free(keep_g);
    /* A table filled to its cap (4,096) by one function's groups, all
     * read while it lives, is swept again once they are not: it was
     * swept at the cap, found nothing to drop, and waited for a size it
     * could never reach. */
    big = scaled_tanh(4200, 9000.5);
    fb = tg_function_compile(big, 0, NULL, ctx);
    assert_non_null(fb);
    assert_true(tg_composite_sig_entries() >= 4000);
    tg_function_free(fb);
    tg_graph_free(big);
    for (int i = 0; i < 1100; i++) {
        tg_graph *g = scaled_tanh(1, 20000.5 + i);
        tg_function *f = tg_function_compile(g, 0, NULL, ctx);
        assert_non_null(f);
        tg_function_free(f);
        tg_graph_free(g);
    }
    int full_after = tg_composite_sig_entries();
    if (full_after > 200) fail_msg("%d entries after the full table's function was freed", full_after);
    tg_ctx_free(ctx);
    tg_composite_force_interp(false);
}

/* A run-time error in a fused node's op (integer division by zero, mod
 * by zero, an integer to a negative power) names that node, its op, name,
 * output and its own creation trace, as the graph run unfused does, then
 * the composite it was fused into. It named the composite and the trace
 * of its last node (r = q * z, model.py:20). The unfused message is
 * checked against the one written here by hand. */
static void test_fused_error_names_node(void **state) {
    (void)state;
    static const struct {
        const char *op, *code, *what;
    } cases[] = {
        {"int_div", "q = x // y", "integer division by zero"},
        {"mod", "q = x % y", "integer division by zero"},
        {"pow", "q = x ** y", "integers to negative integer powers are not allowed"},
    };
    for (int c = 0; c < 3; c++) {
        char *j = NULL;
        assert_true(asprintf(&j,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"x\",\"type\":{\"dtype\":\"int32\",\"shape\":[4]}},"
                             "{\"id\":\"y\",\"type\":{\"dtype\":\"int32\",\"shape\":[4]}},"
                             "{\"id\":\"z\",\"type\":{\"dtype\":\"int32\",\"shape\":[4]}}],\"nodes\":["
                             "{\"op\":\"%s\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q\"],\"name\":\"the_op\","
                             "\"trace\":[{\"file\":\"model.py\",\"line\":10,\"function\":\"build\",\"code\":\"%s\"}]},"
                             "{\"op\":\"mul\",\"inputs\":[\"q\",\"z\"],\"outputs\":[\"r\"],\"name\":\"the_product\","
                             "\"trace\":[{\"file\":\"model.py\",\"line\":20,\"function\":\"build\",\"code\":\"r = q * z\"}]}],"
                             "\"functions\":{\"f\":{\"inputs\":[\"x\",\"y\",\"z\"],\"outputs\":[\"r\"]}}}",
                             cases[c].op, cases[c].code) > 0);
        tg_graph *g = tu_load(j);
        int64_t four = 4;
        tg_array *in[3] = {tg_array_new(TG_INT32, 1, &four), tg_array_new(TG_INT32, 1, &four),
                           tg_array_new(TG_INT32, 1, &four)};
        int32_t *x = tg_array_data(in[0]), *y = tg_array_data(in[1]), *z = tg_array_data(in[2]);
        for (int i = 0; i < 4; i++) {
            x[i] = i + 1;
            y[i] = i == 1 ? (c == 2 ? -1 : 0) : 1;
            z[i] = 1;
        }
        char want[512], msg[3][TG_CTX_MSG_MAX];
        snprintf(want, sizeof want, "nodes[0] (%s 'the_op' -> q): %s [at model.py:10 in build: %s]",
                 cases[c].op, cases[c].what, cases[c].code);
        const char *presets[3] = {"none", "fast_run", "fast_run"};
        for (int p = 0; p < 3; p++) {
            tg_ctx *ctx = tg_ctx_new();
            tg_compile_options o = {.preset = presets[p]};
            tg_composite_force_interp(p == 2);
            tg_function *f = tg_function_compile(g, tg_graph_function_find(g, "f", ctx), &o, ctx);
            if (!f) fail_msg("%s", tg_ctx_message(ctx));
            if (p > 0) {
                int nc = 0;
                for (int k = 0; k < tg_function_node_count(f); k++)
                    nc += !strcmp(tg_function_node_op(f, k), "composite");
                assert_int_equal(nc, 1);
            }
            tg_array *out[1] = {NULL};
            assert_int_not_equal(tg_function_call(f, in, out, ctx), TG_OK);
            snprintf(msg[p], sizeof msg[p], "%s", tg_ctx_message(ctx));
            tg_composite_force_interp(false);
            tg_function_free(f);
            tg_ctx_free(ctx);
        }
        if (strcmp(msg[0], want)) fail_msg("unfused: '%s', want '%s'", msg[0], want);
        for (int p = 1; p < 3; p++) {
            size_t k = strlen(want);
            if (strncmp(msg[p], want, k) || strncmp(msg[p] + k, ", fused into (composite -> r, standing for q, r)", 48))
                fail_msg("%s fused: '%s', want '%s, fused into (composite -> r, standing for q, r)'", cases[c].op,
                         msg[p], want);
        }
        for (int i = 0; i < 3; i++) tg_array_free(in[i]);
        tg_graph_free(g);
        free(j);
    }
}

/* The interpreter takes threads from TG_COMPOSITE_PAR_MIN elements, each
 * with its own state: a stretch of every row (one long row), or whole
 * rows (many): the values of the unfused ops on one thread and on three;
 * and of two division-by-zero failures, the one the interpreter alone
 * meets first (the lower element; there the first fused node), whichever
 * thread meets it: q = x // y, r = q // z, a zero of z early and of y
 * late names r's node, the other way round q's. */
static void test_interp_threads(void **state) {
    (void)state;
    tg_composite_force_interp(true);
    for (int shape2d = 0; shape2d < 2; shape2d++) {
        const int64_t R = shape2d ? 300 : 1, C = shape2d ? 700 : 210000, N = R * C;
        char *j = NULL;
        assert_true(asprintf(&j,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[%lld,%lld]}},"
                             "{\"id\":\"y\",\"type\":{\"dtype\":\"int64\",\"shape\":[%lld,%lld]}},"
                             "{\"id\":\"z\",\"type\":{\"dtype\":\"int64\",\"shape\":[%lld,%lld]}}],\"nodes\":["
                             "{\"op\":\"int_div\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q\"]},"
                             "{\"op\":\"int_div\",\"inputs\":[\"q\",\"z\"],\"outputs\":[\"r\"]}],"
                             "\"functions\":{\"f\":{\"inputs\":[\"x\",\"y\",\"z\"],\"outputs\":[\"r\"]}}}",
                             (long long)R, (long long)C, (long long)R, (long long)C, (long long)R, (long long)C) > 0);
        tg_graph *g = tu_load(j);
        tg_ctx *ctx = tg_ctx_new();
        tg_compile_options o = {.preset = "fast_run"};
        tg_function *f = tg_function_compile(g, 0, &o, ctx);
        if (!f) fail_msg("%s", tg_ctx_message(ctx));
        assert_int_equal(tg_function_node_count(f), 1); /* one composite */
        int64_t sh[2] = {R, C};
        tg_array *in[3] = {tg_array_new(TG_INT64, 2, sh), tg_array_new(TG_INT64, 2, sh), tg_array_new(TG_INT64, 2, sh)};
        int64_t *x = tg_array_data(in[0]), *y = tg_array_data(in[1]), *z = tg_array_data(in[2]);
        for (int64_t i = 0; i < N; i++) {
            x[i] = (i * 7919) % 100003 - 50000;
            y[i] = i % 5 + 1;
            z[i] = -(i % 3) - 1;
        }
        for (int nt = 1; nt <= 3; nt += 2) {
            omp_set_num_threads(nt);
            tg_array *out[1] = {0};
            assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
            const int64_t *r = tg_array_data(out[0]);
            for (int64_t i = 0; i < N; i++) {
                int64_t q = x[i] / y[i] - (x[i] % y[i] != 0 && (x[i] < 0) != (y[i] < 0));
                int64_t w = q / z[i] - (q % z[i] != 0 && (q < 0) != (z[i] < 0));
                if (r[i] != w) fail_msg("%lld x %lld, %d threads: r[%lld] = %lld, want %lld", (long long)R, (long long)C, nt,
                                        (long long)i, (long long)r[i], (long long)w);
            }
            tg_array_free(out[0]);
        }
        /* two zeros, one early and one late, in y or in z */
        for (int which = 0; which < 2; which++) {
            int64_t early = 10, late = N - 300;
            (which ? y : z)[early] = 0;
            (which ? z : y)[late] = 0;
            char msg[2][TG_CTX_MSG_MAX];
            for (int k = 0; k < 2; k++) {
                omp_set_num_threads(k ? 3 : 1);
                tg_array *out[1] = {0};
                assert_int_not_equal(tg_function_call(f, in, out, ctx), TG_OK);
                snprintf(msg[k], sizeof msg[k], "%s", tg_ctx_message(ctx));
                tg_array_free(out[0]);
            }
            if (strcmp(msg[0], msg[1])) fail_msg("one thread: '%s'; three: '%s'", msg[0], msg[1]);
            if (!strstr(msg[0], which ? "(int_div -> q)" : "(int_div -> r)"))
                fail_msg("zero of %s first: '%s'", which ? "y" : "z", msg[0]);
            y[early] = y[late] = 1;
            z[early] = z[late] = -1;
        }
        for (int i = 0; i < 3; i++) tg_array_free(in[i]);
        tg_function_free(f);
        tg_ctx_free(ctx);
        tg_graph_free(g);
        free(j);
    }
    omp_set_num_threads(2);
    tg_composite_force_interp(false);
}

/* softplus of NaN in a compiled kernel has the bits of the unfused op's:
 * a NaN with its sign bit clear (docs/format-choices.md), payload kept.
 * The kernel's prelude, max(x, 0) + log1p(exp(-|x|)), gave the NaN the
 * sign of -|x|. float64 and float32; the ordinary values around them
 * alike. */
static void test_softplus_nan_bits(void **state) {
    (void)state;
    fresh_cache("softplus");
    static const uint64_t nan64[] = {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff8000000000123ull,
                                     0xfff8000000000456ull, 0x7ff0000000000789ull, 0xfff0000000000abcull};
    static const uint32_t nan32[] = {0x7fc00000u, 0xffc00000u, 0x7fc00123u, 0xffc00456u, 0x7f800789u, 0xff800abcu};
    static const double ord[] = {1.5, -2, 0, -INFINITY, INFINITY, 30, -30, 1e-300};
    enum { N = 37 };
    for (int d = 0; d < 2; d++) {
        const char *dt = d ? "float32" : "float64";
        char *fj = NULL, *uj = NULL;
        assert_true(asprintf(&fj,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[%d]}}],"
                             "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"a\"],\"outputs\":[\"y\"],"
                             "\"attrs\":{\"body\":{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}}],"
                             "\"nodes\":[{\"op\":\"softplus\",\"inputs\":[\"x\"],\"outputs\":[\"s\"]}],"
                             "\"inputs\":[\"x\"],\"outputs\":[\"s\"]}}}]}",
                             dt, N, dt) > 0);
        assert_true(asprintf(&uj,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[%d]}}],"
                             "\"nodes\":[{\"op\":\"softplus\",\"inputs\":[\"a\"],\"outputs\":[\"y\"]}]}",
                             dt, N) > 0);
        tg_graph *gf = tu_load(fj), *gu = tu_load(uj);
        int64_t n = N;
        tg_array *x = tg_array_new(d ? TG_FLOAT32 : TG_FLOAT64, 1, &n);
        for (int i = 0; i < N; i++) {
            int k = i % 14;
            if (d) {
                float v = k < 6 ? 0 : (float)ord[k - 6];
                if (k < 6) memcpy(&v, &nan32[k], 4);
                ((float *)tg_array_data(x))[i] = v;
            } else {
                double v = k < 6 ? 0 : ord[k - 6];
                if (k < 6) memcpy(&v, &nan64[k], 8);
                ((double *)tg_array_data(x))[i] = v;
            }
        }
        tg_array *un[1] = {0}, *fu[1] = {0};
        tu_call_preset(gu, NULL, "none", &x, un);
        tu_call_preset(gf, NULL, "none", &x, fu);
        tg_ctx *ctx = tg_ctx_new();
        tg_node *nd = first_node(gf);
        tg_array *direct[1] = {0};
        assert_int_equal(nd->op->run(nd, &x, direct, ctx), TG_OK);
        assert_int_equal(tg_composite_node_mode(nd), 1); /* compiled */
        size_t isz = d ? 4 : 8;
        for (int i = 0; i < N; i++) {
            uint64_t u = 0, f = 0, g = 0;
            memcpy(&u, (const char *)tg_array_data(un[0]) + i * isz, isz);
            memcpy(&f, (const char *)tg_array_data(fu[0]) + i * isz, isz);
            memcpy(&g, (const char *)tg_array_data(direct[0]) + i * isz, isz);
            /* (a NaN: the same bits in every build) */
            bool nan_in = i % 14 < 6;
            if (nan_in ? f != u || g != u : !same_value(&f, &u, isz) || !same_value(&g, &u, isz))
                fail_msg("%s softplus at %d: fused 0x%llx (direct 0x%llx), unfused 0x%llx", dt, i,
                         (unsigned long long)f, (unsigned long long)g, (unsigned long long)u);
            if (i % 14 < 6 && (u >> (isz * 8 - 1)))
                fail_msg("%s softplus(NaN) at %d: 0x%llx has its sign bit set", dt, i, (unsigned long long)u);
        }
        tg_array_free(un[0]);
        tg_array_free(fu[0]);
        tg_array_free(direct[0]);
        tg_array_free(x);
        tg_ctx_free(ctx);
        tg_graph_free(gf);
        tg_graph_free(gu);
        free(fj);
        free(uj);
    }
    drop_cache();
}

/* A 0-d input, and one constant along the rows (s of shape (R, 1) beside
 * y of (R, 16)), through a body that calls exp, tanh, sigmoid or log1p:
 * the same bits as the unfused op, whose loops call libmvec's vector
 * variant even for one element. Read once before the loop, op(s) was
 * moved out of it by GCC and computed by scalar libm, 1 ulp off now and
 * then: exp(-18.36106f) * 1 gave 0x32365a65 for the unfused 0x32365a64
 * (the audit's case, the first checked). float32 and float64. */
static void test_hoisted_scalar_same_bits(void **state) {
    (void)state;
    fresh_cache("hoist");
    static const char *const ops[] = {"exp", "tanh", "sigmoid", "log1p"};
    enum { R = 300 };
    for (int d = 0; d < 2; d++) {
        const char *dt = d ? "float64" : "float32";
        tg_dtype t = d ? TG_FLOAT64 : TG_FLOAT32;
        size_t isz = d ? 8 : 4;
        for (int o = 0; o < 4; o++) {
            char *j = NULL;
            assert_true(asprintf(&j,
                                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                                 "{\"id\":\"s\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}},"
                                 "{\"id\":\"k\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}},"
                                 "{\"id\":\"sr\",\"type\":{\"dtype\":\"%s\",\"shape\":[%d,1]}},"
                                 "{\"id\":\"y\",\"type\":{\"dtype\":\"%s\",\"shape\":[%d,16]}}],\"nodes\":["
                                 "{\"op\":\"%s\",\"inputs\":[\"s\"],\"outputs\":[\"e\"]},"
                                 "{\"op\":\"mul\",\"inputs\":[\"e\",\"k\"],\"outputs\":[\"z\"]},"
                                 "{\"op\":\"%s\",\"inputs\":[\"sr\"],\"outputs\":[\"er\"]},"
                                 "{\"op\":\"mul\",\"inputs\":[\"er\",\"y\"],\"outputs\":[\"zr\"]}],"
                                 "\"functions\":{\"z\":{\"inputs\":[\"s\",\"k\"],\"outputs\":[\"z\"]},"
                                 "\"zr\":{\"inputs\":[\"sr\",\"y\"],\"outputs\":[\"zr\"]}}}",
                                 dt, dt, dt, R, dt, R, ops[o], ops[o]) > 0);
            tg_graph *g = tu_load(j);
            tg_ctx *ctx = tg_ctx_new();
            tg_function *f[2][2];
            for (int fn = 0; fn < 2; fn++)
                for (int p = 0; p < 2; p++) {
                    tg_compile_options opt = {.preset = p ? "fast_run" : "none"};
                    f[fn][p] = tg_function_compile(g, tg_graph_function_find(g, fn ? "zr" : "z", ctx), &opt, ctx);
                    if (!f[fn][p]) fail_msg("%s", tg_ctx_message(ctx));
                }
            int64_t rs[2] = {R, 1}, ys[2] = {R, 16};
            tg_array *sr = tg_array_new(t, 2, rs), *y = tg_array_new(t, 2, ys);
            for (int64_t i = 0; i < R; i++) {
                double v = i == 0 ? -18.36106 : -20 + 40.0 * (double)((i * 7919) % R) / R;
                if (o == 3) v = fabs(v);
                tg_store_f64(t, (char *)tg_array_data(sr) + i * (int64_t)isz, v);
            }
            for (int64_t i = 0; i < R * 16; i++) tg_store_f64(t, (char *)tg_array_data(y) + i * (int64_t)isz, 1);
            tg_array *k = tg_array_new_scalar(t, 1);
            for (int64_t i = 0; i < R; i++) {
                tg_array *sv = tg_array_new_scalar(t, tg_array_get_flat(sr, i)), *in[2] = {sv, k};
                tg_array *out[2][1] = {{NULL}, {NULL}};
                for (int p = 0; p < 2; p++)
                    if (tg_function_call(f[0][p], in, out[p], ctx)) fail_msg("%s", tg_ctx_message(ctx));
                if (!same_value(tg_array_data(out[0][0]), tg_array_data(out[1][0]), isz)) {
                    uint64_t a = 0, b = 0;
                    memcpy(&a, tg_array_data(out[0][0]), isz);
                    memcpy(&b, tg_array_data(out[1][0]), isz);
                    fail_msg("%s(%.9g) %s, 0-d: fused 0x%llx, unfused 0x%llx", ops[o], tg_array_get_flat(sv, 0), dt,
                             (unsigned long long)b, (unsigned long long)a);
                }
#if !defined(__SANITIZE_ADDRESS__) /* (the vector variant's value: same_value) */
                if (d == 0 && o == 0 && i == 0) {
                    uint32_t a;
                    memcpy(&a, tg_array_data(out[0][0]), 4);
                    assert_int_equal(a, 0x32365a64u);
                }
#endif
                tg_array_free(sv);
                tg_array_free(out[0][0]);
                tg_array_free(out[1][0]);
            }
            tg_array *in[2] = {sr, y}, *out[2][1] = {{NULL}, {NULL}};
            for (int p = 0; p < 2; p++)
                if (tg_function_call(f[1][p], in, out[p], ctx)) fail_msg("%s", tg_ctx_message(ctx));
            for (int64_t i = 0; i < R * 16; i++)
                if (!same_value((char *)tg_array_data(out[0][0]) + i * (int64_t)isz,
                                (char *)tg_array_data(out[1][0]) + i * (int64_t)isz, isz))
                    fail_msg("%s(%.9g) %s, constant along a row: fused %.17g, unfused %.17g", ops[o],
                             tg_array_get_flat(sr, i / 16), dt, tg_array_get_flat(out[1][0], i),
                             tg_array_get_flat(out[0][0], i));
            tg_array_free(out[0][0]);
            tg_array_free(out[1][0]);
            tg_array_free(sr);
            tg_array_free(y);
            tg_array_free(k);
            for (int fn = 0; fn < 2; fn++)
                for (int p = 0; p < 2; p++) tg_function_free(f[fn][p]);
            tg_ctx_free(ctx);
            tg_graph_free(g);
            free(j);
        }
    }
    drop_cache();
}

/* Whether v is an argument where the unfused op (vmath.c) rounds
 * otherwise than the plain libmvec call a fused kernel makes, by design
 * (docs/format-choices.md): exp's and exp2's subnormal bands (sigmoid and
 * softplus through exp(-|v|)), and a subnormal argument of log, log2 and
 * log10, which vmath.c computes from its bits within 2 ulp (a subnormal
 * float32 of log: -88.603477 fused, -88.603470 unfused). */
static bool band_of(const char *op, double v, bool f64) {
    bool sg = !strcmp(op, "sigmoid") || !strcmp(op, "softplus");
    double e = sg ? -fabs(v) : v;
    if (!strcmp(op, "exp") || sg) return f64 ? e > -746 && e < -708 : e > -104 && e < -87;
    if (!strcmp(op, "exp2")) return f64 ? e > -1076 && e < -1022 : e > -151 && e < -126;
    if (!strcmp(op, "log") || !strcmp(op, "log2") || !strcmp(op, "log10"))
        return v > 0 && v < (f64 ? DBL_MIN : FLT_MIN);
    return false;
}

/* One input a (dtype xn, n elements) through a composite whose body reads
 * it as x (more body variables in bvars, each after a comma; the body's
 * nodes and outputs bnodes and bouts), and through the same ops unfused
 * under -O none (uvars, unodes): both give outputs `outs`. Each run on
 * x: fused[] and un[] (the caller's to free), the statuses frc and urc
 * (a failure's message in msg), the composite's mode after its run. */
typedef struct both_run {
    tg_array *fused[TG_COMPOSITE_MAX_IO], *un[TG_COMPOSITE_MAX_IO];
    int frc, urc, mode;
    char msg[TG_CTX_MSG_MAX];
} both_run;
static void run_fused_unfused(const char *xn, int64_t n, const char *bvars, const char *bnodes, const char *bouts,
                              const char *uvars, const char *unodes, const char *outs, tg_array *x, both_run *r) {
    char *fj = NULL, *uj = NULL;
    assert_true(asprintf(&fj,
                         "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                         "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[%lld]}}],"
                         "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"a\"],\"outputs\":[%s],"
                         "\"attrs\":{\"body\":{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"%s\","
                         "\"shape\":[]}}%s],\"nodes\":[%s],\"inputs\":[\"x\"],\"outputs\":[%s]}}}]}",
                         xn, (long long)n, outs, xn, bvars, bnodes, bouts) > 0);
    assert_true(asprintf(&uj,
                         "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                         "{\"id\":\"a\",\"type\":{\"dtype\":\"%s\",\"shape\":[%lld]}}%s],\"nodes\":[%s],"
                         "\"functions\":{\"f\":{\"inputs\":[\"a\"],\"outputs\":[%s]}}}",
                         xn, (long long)n, uvars, unodes, outs) > 0);
    tg_graph *gf = tu_load(fj), *gu = tu_load(uj);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options opt = {.preset = "none"};
    tg_function *fu = tg_function_compile(gu, tg_graph_function_find(gu, "f", ctx), &opt, ctx);
    if (!fu) fail_msg("%s", tg_ctx_message(ctx));
    memset(r, 0, sizeof *r);
    r->urc = tg_function_call(fu, (tg_array *const *)&x, r->un, ctx);
    tg_node *nd = first_node(gf);
    r->frc = nd->op->run(nd, (tg_array *const *)&x, r->fused, ctx);
    r->mode = tg_composite_node_mode(nd);
    snprintf(r->msg, sizeof r->msg, "%s", tg_ctx_message(ctx));
    tg_function_free(fu);
    tg_ctx_free(ctx);
    tg_graph_free(gf);
    tg_graph_free(gu);
    free(fj);
    free(uj);
}

/* The outputs (of nops) that differ between a composite of ops[] of one
 * input x and the unfused ops under -O none, each printed. The body is of
 * x's float dtype (float32 for a narrower x, as NumPy computes its ops);
 * with cast64, of float64, x cast first in both graphs. With bands, not
 * compared where the unfused op rounds otherwise by design (band_of). */
static int ops_differ(const tg_array *x, bool cast64, bool bands, const char *const *ops, int nops,
                      const char *what) {
    tg_dtype xt = tg_array_dtype(x);
    bool f64 = cast64 || xt == TG_FLOAT64;
    const char *xn = tg_dtype_name(xt), *ft = f64 ? "float64" : "float32";
    size_t isz = f64 ? 8 : 4;
    int64_t n = tg_array_size(x);
    tg_str body = {0}, outs = {0}, unf = {0}, youts = {0};
    if (cast64) {
        tg_str_addf(&body, "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"xd\"],"
                           "\"attrs\":{\"dtype\":\"float64\"}},");
        tg_str_addf(&unf, "{\"op\":\"cast\",\"inputs\":[\"a\"],\"outputs\":[\"ad\"],"
                          "\"attrs\":{\"dtype\":\"float64\"}},");
    }
    for (int k = 0; k < nops; k++) {
        const char *sep = k ? "," : "";
        tg_str_addf(&body, "%s{\"op\":\"%s\",\"inputs\":[\"%s\"],\"outputs\":[\"r%d\"]}", sep, ops[k],
                    cast64 ? "xd" : "x", k);
        tg_str_addf(&unf, "%s{\"op\":\"%s\",\"inputs\":[\"%s\"],\"outputs\":[\"y%d\"]}", sep, ops[k],
                    cast64 ? "ad" : "a", k);
        tg_str_addf(&outs, "%s\"r%d\"", sep, k);
        tg_str_addf(&youts, "%s\"y%d\"", sep, k);
    }
    both_run *r = malloc(sizeof *r);
    assert_non_null(r);
    run_fused_unfused(xn, n, "", body.s, outs.s, "", unf.s, youts.s, (tg_array *)x, r);
    if (r->urc || r->frc) fail_msg("%s", r->msg);
    assert_int_equal(r->mode, 1); /* compiled */
    tg_array **un = r->un, **fused = r->fused;
    int bad = 0;
    for (int k = 0; k < nops; k++) {
        assert_int_equal(tg_array_dtype(fused[k]), f64 ? TG_FLOAT64 : TG_FLOAT32);
        assert_int_equal(tg_array_dtype(un[k]), f64 ? TG_FLOAT64 : TG_FLOAT32);
        int differ = 0;
        int64_t first = -1;
        for (int64_t i = 0; i < n; i++)
            if (!(bands && band_of(ops[k], tg_array_get_flat(x, i), f64)) &&
                !same_value((const char *)tg_array_data(fused[k]) + i * (int64_t)isz,
                            (const char *)tg_array_data(un[k]) + i * (int64_t)isz, isz)) {
                differ++;
                if (first < 0) first = i;
            }
        bad += differ != 0;
        if (differ)
            print_message("%s of %s in the %s %s body: %d of %lld differ, first %s(%.9g): fused %.17g, "
                          "unfused %.17g\n",
                          ops[k], xn, ft, what, differ, (long long)n, ops[k], tg_array_get_flat(x, first),
                          tg_array_get_flat(fused[k], first), tg_array_get_flat(un[k], first));
        tg_array_free(un[k]);
        tg_array_free(fused[k]);
    }
    free(r);
    tg_str_free(&body);
    tg_str_free(&outs);
    tg_str_free(&unf);
    tg_str_free(&youts);
    return bad;
}

/* exp, log1p, tanh, sigmoid, softplus, sin and cos of an int8, uint8,
 * int16 or bool input (every value; a length that leaves a partial last
 * block), in a float32 body (the op of the input, computed in float32 as
 * NumPy's) and a float64 one (a cast first): the compiled kernel gives
 * the unfused ops' bits. The body converted the narrow value in its
 * vector loop, which GCC then ran at the narrow type's width with the
 * AVX2 variants (or, for sigmoid, not vectorised: scalar expf) where the
 * unfused op converts the input first and calls the AVX-512 ones:
 * sigmoid of int8 was an ulp off for 49 of the 256 values. One body per
 * op and one with the first five side by side. */
static void test_narrow_input_same_bits(void **state) {
    (void)state;
    fresh_cache("narrow");
    static const char *const ops[] = {"exp", "log1p", "tanh", "sigmoid", "softplus", "sin", "cos"};
    enum { NOPS = 7 };
    int bad = 0;
    static const struct {
        tg_dtype dt;
        int64_t n; /* every value, then a few again */
    } ins[] = {{TG_INT8, 256 + 9}, {TG_UINT8, 256 + 9}, {TG_INT16, 65536 + 5}, {TG_BOOL, 37}};
    for (size_t t = 0; t < sizeof ins / sizeof ins[0]; t++) {
        int64_t n = ins[t].n;
        tg_array *x = tg_array_new(ins[t].dt, 1, &n);
        for (int64_t i = 0; i < n; i++) {
            char *e = (char *)tg_array_data(x);
            if (ins[t].dt == TG_INT16) ((uint16_t *)e)[i] = (uint16_t)(i * 40503); /* (odd: a permutation) */
            else if (ins[t].dt == TG_BOOL) e[i] = (char)(i * 7 % 3 == 1);
            else ((uint8_t *)e)[i] = (uint8_t)(i * 167);
        }
        /* a float32 body (the op of x, in float32 as NumPy's) and a
         * float64 one (a cast first); one op each, then the first five */
        for (int d = 0; d < 2; d++)
            for (int o = 0; o <= NOPS; o++)
                bad += o == NOPS ? ops_differ(x, d, false, ops, 5, "five-op")
                                 : ops_differ(x, d, false, ops + o, 1, "one-op");
        tg_array_free(x);
    }
    drop_cache();
    if (bad) fail_msg("%d of the outputs above differ from the unfused ops'", bad);
}

/* int_div and mod in a body, by constants of the body: compiled (integers
 * divide by multiplying, as the compiler does for a constant divisor;
 * floats through the prelude's npy_divmod), with the unfused ops' bits,
 * for every integer dtype (divisors of both signs, 1 and 2, the ends of
 * the range; dividends at the ends of the range, multiples of the
 * divisor and one off, and a spread) and both float dtypes (divisors of
 * both signs, zeros of both signs, infinities, NaN; the special
 * dividends too). One body per dtype with every divisor (one kernel to
 * compile). A divisor of 0 or, signed, -1 leaves the body to the
 * interpreter (its error; NumPy's wrap of the most negative value), and
 * so does a float int_div beside a function with a vector variant. */
static void test_int_division_same_bits(void **state) {
    (void)state;
    fresh_cache("intdiv");
    static const tg_dtype dts[] = {TG_INT8, TG_INT16, TG_INT32, TG_INT64, TG_UINT8,
                                   TG_UINT16, TG_UINT32, TG_UINT64, TG_FLOAT32, TG_FLOAT64};
    static const char *const idivs[] = {"1", "2", "7", "100", "-3", "-128", "MIN", "MAX"};
    static const char *const fdivs[] = {"7", "-3", "0.5", "-0.1", "0", "-0.0",
                                        "{\"data\":\"inf\"}", "{\"data\":\"nan\"}"};
    enum { N = 203, ND = 8 };
    int bad = 0;
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        const tg_dtype dt = dts[t];
        const bool fl = tg_dtype_is_float(dt), sg = !fl && t < 4;
        const size_t e = tg_dtype_size(dt);
        const int bits = (int)e * 8;
        const char *dn = tg_dtype_name(dt);
        int64_t n = N;
        tg_array *x = tg_array_new(dt, 1, &n);
        uint64_t rng = 12345;
        for (int64_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            char *at = (char *)tg_array_data(x) + i * (int64_t)e;
            if (fl) {
                static const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-310, -5e-324,
                                            1e308, -1e308, 7.0, -7.0, 21.0, -21.0, 0.5};
                double v = i < 14 ? sp[i] : ((double)(int64_t)(rng >> 11) / 9007199254740992.0 - 0.5) * 1000;
                tg_store_f64(dt, at, v);
            } else {
                /* the ends of the range, small values of both signs, multiples of 7 and
                 * of 100 and one off, a spread */
                const uint64_t lo = sg ? UINT64_C(1) << (bits - 1) : 0;
                const uint64_t mask = bits == 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits) - 1;
                uint64_t v = i < 4 ? lo + (uint64_t)i : i < 8 ? lo - 1 - (uint64_t)(i - 4)
                             : i < 40 ? (uint64_t)(i - 24) : i < 80 ? (uint64_t)(7 * (i - 60)) + (uint64_t)(i % 3) - 1
                             : i < 100 ? (uint64_t)(100 * (i - 90)) + (uint64_t)(i % 3) - 1 : rng >> (i % 5 * 13);
                v &= mask;
                memcpy(at, &v, e);
            }
        }
        /* the divisors of this dtype: those that compile, then 0 and -1 */
        char dv[ND + 2][64];
        int nd = 0;
        for (int k = 0; k < ND; k++) {
            const char *d = fl ? fdivs[k] : idivs[k];
            if (!fl && !strcmp(d, "MIN")) {
                if (sg) snprintf(dv[nd++], 64, "%lld", bits == 64 ? (long long)INT64_MIN : -(1LL << (bits - 1)));
            } else if (!fl && !strcmp(d, "MAX") && sg) {
                snprintf(dv[nd++], 64, "%lld", bits == 64 ? (long long)INT64_MAX : (1LL << (bits - 1)) - 1);
            } else if (!fl && !strcmp(d, "MAX")) {
                snprintf(dv[nd++], 64, "%llu", bits == 64 ? ~0ULL : (1ULL << bits) - 1);
            } else if (fl || sg || d[0] != '-') { /* (no negative unsigned constant) */
                snprintf(dv[nd++], 64, "%s", d);
            }
        }
        const int ncomp = nd;
        if (!fl) snprintf(dv[nd++], 64, "0");
        if (sg) snprintf(dv[nd++], 64, "-1");
        /* one graph with every compiled divisor, then one per divisor of the interpreter */
        for (int from = 0; from < nd; from = from < ncomp ? ncomp : from + 1) {
            const int to = from < ncomp ? ncomp : from + 1;
            /* the divisors, then the nodes and outputs of the body (x -> tq, tr)
             * and of the unfused graph (a -> q, r) */
            tg_str dvars = {0}, nodes[2] = {{0}}, outs[2] = {{0}};
            for (int k = from; k < to; k++) {
                tg_str_addf(&dvars, ",{\"id\":\"d%d\",\"type\":{\"dtype\":\"%s\",\"shape\":[]},\"constant\":%s}", k,
                            dn, dv[k]);
                for (int u = 0; u < 2; u++) {
                    const char *xin = u ? "a" : "x", *pre = u ? "" : "t", *sep = k > from ? "," : "";
                    tg_str_addf(&nodes[u],
                                "%s{\"op\":\"int_div\",\"inputs\":[\"%s\",\"d%d\"],\"outputs\":[\"%sq%d\"]},"
                                "{\"op\":\"mod\",\"inputs\":[\"%s\",\"d%d\"],\"outputs\":[\"%sr%d\"]}",
                                sep, xin, k, pre, k, xin, k, pre, k);
                    tg_str_addf(&outs[u], "%s\"%sq%d\",\"%sr%d\"", sep, pre, k, pre, k);
                }
            }
            const int nout = 2 * (to - from);
            both_run *run = malloc(sizeof *run);
            assert_non_null(run);
            run_fused_unfused(dn, N, dvars.s, nodes[0].s, outs[0].s, dvars.s, nodes[1].s, outs[1].s, x, run);
            tg_array **un = run->un, **fused = run->fused;
            const int urc = run->urc, frc = run->frc;
            assert_int_equal(run->mode, from < ncomp ? 1 : 0);
            if (from >= ncomp && !strcmp(dv[from], "0")) { /* the error, both ways */
                assert_int_not_equal(urc, TG_OK);
                assert_int_not_equal(frc, TG_OK);
            } else {
                if (urc || frc) fail_msg("%s: %s", dn, run->msg);
                for (int o = 0; o < nout; o++) {
                    int differ = 0;
                    int64_t first = -1;
                    for (int64_t i = 0; i < n; i++)
                        if (memcmp((const char *)tg_array_data(fused[o]) + i * (int64_t)e,
                                   (const char *)tg_array_data(un[o]) + i * (int64_t)e, e)) {
                            differ++;
                            if (first < 0) first = i;
                        }
                    if (differ) {
                        bad++;
                        print_message("%s of %s by %s: %d of %d differ, first %.17g: fused %.17g, unfused %.17g\n",
                                      o % 2 ? "mod" : "int_div", dn, dv[from + o / 2], differ, N,
                                      tg_array_get_flat(x, first), tg_array_get_flat(fused[o], first),
                                      tg_array_get_flat(un[o], first));
                    }
                }
            }
            for (int o = 0; o < nout; o++) {
                tg_array_free(un[o]);
                tg_array_free(fused[o]);
            }
            free(run);
            tg_str_free(&dvars);
            for (int u = 0; u < 2; u++) {
                tg_str_free(&nodes[u]);
                tg_str_free(&outs[u]);
            }
        }
        tg_array_free(x);
    }
    /* Beside a function with a vector variant (sigmoid), a float int_div
     * (fmod, which has none) would make the loop scalar and the sigmoid
     * scalar libm's: the interpreter runs that body. */
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[5]}}],"
                          "\"nodes\":[{\"op\":\"composite\",\"inputs\":[\"a\"],\"outputs\":[\"q\",\"s\"],"
                          "\"attrs\":{\"body\":{\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\","
                          "\"shape\":[]}}],\"nodes\":[{\"op\":\"int_div\",\"inputs\":[\"x\",{\"value\":0.5}],"
                          "\"outputs\":[\"tq\"]},{\"op\":\"sigmoid\",\"inputs\":[\"x\"],\"outputs\":[\"ts\"]}],"
                          "\"inputs\":[\"x\"],\"outputs\":[\"tq\",\"ts\"]}}}]}");
    const double xv[5] = {-1.25, 0, 0.75, 3, -7};
    tg_array *x = tg_array_new_from(TG_FLOAT64, 1, (int64_t[]){5}, xv), *out[2] = {0};
    tg_ctx *ctx = tg_ctx_new();
    tg_node *node = first_node(g);
    assert_int_equal(node->op->run(node, (tg_array *const *)&x, out, ctx), TG_OK);
    assert_int_equal(tg_composite_node_mode(node), 0);
    const double wq[5] = {-3, 0, 1, 6, -14}; /* floor(x / 0.5) */
    for (int i = 0; i < 5; i++) assert_true(tg_array_get_flat(out[0], i) == wq[i]);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_graph_free(g);
    drop_cache();
    if (bad) fail_msg("%d of the outputs above differ from the unfused ops'", bad);
}

/* Many transcendental functions of one float32 or float64 input in one
 * body (the library's whole list: exp..erfc, sigmoid, softplus) and the
 * seven of exp, log1p, tanh, sigmoid, softplus, sin and cos: every output
 * of the compiled kernel has the unfused ops' bits, for a spread of
 * values with the special ones (signed zeros, infinities, NaN, subnormals,
 * the largest finite, huge arguments of sin and cos, the ends of the
 * domains), but where the unfused op rounds otherwise by design
 * (band_of). Built with -fno-builtin-sin/cos (kcache.c), GCC took sin and
 * cos for functions that may write memory and would not turn sigmoid's
 * and softplus's branches into selects beside them: the whole loop ran
 * scalar libm, and every output differed somewhere (float32 seven-op
 * body: exp 549 of the 2044 values, sigmoid 274, sin 277, cos 286;
 * float64: sin 702). */
static void test_many_functions_same_bits(void **state) {
    (void)state;
    fresh_cache("many");
    static const char *const seven[] = {"exp", "log1p", "tanh", "sigmoid", "softplus", "sin", "cos"};
    static const char *const all[] = {"exp",     "exp2",    "expm1",   "log",     "log2",    "log10",
                                      "log1p",   "sin",     "cos",     "tan",     "arcsin",  "arccos",
                                      "arctan",  "sinh",    "cosh",    "tanh",    "arcsinh", "arccosh",
                                      "arctanh", "erf",     "erfc",    "sigmoid", "softplus"};
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1, -1, 0.5, -0.5,
                                     1 - 0x1p-24, -1 + 0x1p-24, 1 + 0x1p-23, 1 - 0x1p-53, 1e-8, -1e-8,
                                     0x1p-149, -0x1p-149, 0x1p-126, 0x1p-1074, -0x1p-1022, 0x1.fffffep127,
                                     -0x1.fffffep127, 0x1.fffffffffffffp1023, 1e30, -1e30, 1e20, 1e6, 8e5 + 0.25,
                                     88.72, 88.73, -87.3, -103.9, -104, 709.78, 709.79, -745.2, 20, -20,
                                     3.14159265358979, 1.5707963267949, 1e300, -1e300};
    int64_t ns = (int64_t)TG_ARRAY_LEN(special), n = ns + 1000 + 1000 + 1; /* (a partial last block) */
    tg_array *x64 = tg_array_new(TG_FLOAT64, 1, &n);
    double *v = tg_array_data(x64);
    for (int64_t i = 0; i < ns; i++) v[i] = special[i];
    for (int64_t i = 0; i < 1000; i++) v[ns + i] = -25 + 50 * (double)((i * 7919) % 1000) / 1000.0;
    for (int64_t i = 0; i < 1001; i++) /* magnitudes 1e-40..1e40, both signs */
        v[ns + 1000 + i] = (i % 2 ? -1 : 1) * pow(10, -40 + 80 * (double)((i * 389) % 1001) / 1000.0);
    int bad = 0;
    for (int d = 0; d < 2; d++) {
        tg_array *x = tg_array_copy(x64, d ? TG_FLOAT64 : TG_FLOAT32);
        bad += ops_differ(x, false, true, seven, TG_ARRAY_LEN(seven), "seven-op");
        bad += ops_differ(x, false, true, all, TG_ARRAY_LEN(all), "all-function");
        tg_array_free(x);
    }
    tg_array_free(x64);
    drop_cache();
    if (bad) fail_msg("%d of the outputs above differ from the unfused ops'", bad);
}

/* gammaln, digamma, trigamma and polygamma in a compiled kernel
 * (elemwise.c's functions, all but gammaln from one text:
 * ops/special.h): the unfused ops' bits, float64 and float32 and (the
 * first three) an int8 input cast to float64, on the poles and both sides of them, the reflection's
 * negative non-integers, the recurrence's range and the series' (10 is
 * where one hands over to the other), huge arguments, infinities and
 * NaN. Beside exp (a vector function) the body goes to the interpreter,
 * as one with fmod does: the loop would run scalar, and exp's bits would
 * not be the unfused op's vector call's. */
static void test_special_same_bits(void **state) {
    (void)state;
    fresh_cache("special");
    static const char *const three[] = {"gammaln", "digamma", "trigamma"};
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1, 2, 3, -1, -2, -1e6, 0.5, -0.5,
                                     -1.5, -2.25, -0.999999, -1.000001, 1e-8, -1e-8, 1e-300, 9.999999,
                                     10, 10.000001, 30, 1e6, 1e15, 1e300, 0x1.fffffffffffffp1023,
                                     -0x1.fffffffffffffp1023, 171.6, 172.5, 4.5e15 + 0.5, -4.5e15 - 0.5};
    int64_t ns = (int64_t)TG_ARRAY_LEN(special), n = ns + 700;
    tg_array *x64 = tg_array_new(TG_FLOAT64, 1, &n);
    double *v = tg_array_data(x64);
    for (int64_t i = 0; i < ns; i++) v[i] = special[i];
    for (int64_t i = 0; i < 700; i++) v[ns + i] = -30 + 60 * (double)((i * 7919) % 700) / 700.0 + 0.001 * (double)(i % 7);
    int bad = 0;
    for (int d = 0; d < 2; d++) {
        tg_array *x = tg_array_copy(x64, d ? TG_FLOAT64 : TG_FLOAT32);
        bad += ops_differ(x, false, false, three, 3, "special-function");
        tg_array_free(x);
    }
    int64_t n8 = 256;
    tg_array *x8 = tg_array_new(TG_INT8, 1, &n8);
    for (int64_t i = 0; i < n8; i++) ((int8_t *)tg_array_data(x8))[i] = (int8_t)(i - 128);
    bad += ops_differ(x8, true, false, three, 3, "int8-input");
    tg_array_free(x8);
    both_run *r = malloc(sizeof *r);
    assert_non_null(r);
    /* polygamma(k, x) for k = 0 (digamma), 1 (trigamma), 2, 3 and 7 */
    static const int K[] = {0, 1, 2, 3, 7};
    for (int d = 0; d < 2; d++) {
        tg_str body = {0}, unf = {0}, bo = {0}, uo = {0};
        for (int k = 0; k < 5; k++) {
            const char *sep = k ? "," : "";
            tg_str_addf(&body, "%s{\"op\":\"polygamma\",\"inputs\":[{\"value\":%d},\"x\"],\"outputs\":[\"r%d\"]}", sep, K[k], k);
            tg_str_addf(&unf, "%s{\"op\":\"polygamma\",\"inputs\":[{\"value\":%d},\"a\"],\"outputs\":[\"y%d\"]}", sep, K[k], k);
            tg_str_addf(&bo, "%s\"r%d\"", sep, k);
            tg_str_addf(&uo, "%s\"y%d\"", sep, k);
        }
        tg_array *x = tg_array_copy(x64, d ? TG_FLOAT64 : TG_FLOAT32);
        size_t isz = d ? 8 : 4;
        run_fused_unfused(d ? "float64" : "float32", n, "", body.s, bo.s, "", unf.s, uo.s, x, r);
        if (r->urc || r->frc) fail_msg("%s", r->msg);
        assert_int_equal(r->mode, 1);
        for (int k = 0; k < 5; k++) {
            for (int64_t i = 0; i < n; i++)
                if (!same_value((const char *)tg_array_data(r->fused[k]) + isz * i,
                                (const char *)tg_array_data(r->un[k]) + isz * i, isz))
                    fail_msg("polygamma(%d, %.17g) %s: fused %.17g, unfused %.17g", K[k], tg_array_get_flat(x, i),
                             d ? "float64" : "float32", tg_array_get_flat(r->fused[k], i),
                             tg_array_get_flat(r->un[k], i));
            tg_array_free(r->fused[k]);
            tg_array_free(r->un[k]);
        }
        tg_array_free(x);
        tg_str_free(&body);
        tg_str_free(&unf);
        tg_str_free(&bo);
        tg_str_free(&uo);
    }
    /* beside exp: the interpreter, the same values */
    run_fused_unfused("float64", n, "",
                      "{\"op\":\"digamma\",\"inputs\":[\"x\"],\"outputs\":[\"d\"]},"
                      "{\"op\":\"exp\",\"inputs\":[\"d\"],\"outputs\":[\"r\"]}",
                      "\"r\"", "",
                      "{\"op\":\"digamma\",\"inputs\":[\"a\"],\"outputs\":[\"d\"]},"
                      "{\"op\":\"exp\",\"inputs\":[\"d\"],\"outputs\":[\"y\"]}",
                      "\"y\"", x64, r);
    if (r->urc || r->frc) fail_msg("%s", r->msg);
    assert_int_equal(r->mode, 0);
    for (int64_t i = 0; i < n; i++)
        if (!same_value((const char *)tg_array_data(r->fused[0]) + 8 * i, (const char *)tg_array_data(r->un[0]) + 8 * i, 8))
            fail_msg("exp(digamma(%.17g)): fused %.17g, unfused %.17g", v[i], tg_array_get_flat(r->fused[0], i),
                     tg_array_get_flat(r->un[0], i));
    tg_array_free(r->fused[0]);
    tg_array_free(r->un[0]);
    free(r);
    tg_array_free(x64);
    drop_cache();
    if (bad) fail_msg("%d of the outputs above differ from the unfused ops'", bad);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_concurrent), cmocka_unit_test(test_cache_hit_miss),
        cmocka_unit_test(test_cache_compiler_identity), cmocka_unit_test(test_kernel_per_body),
        cmocka_unit_test(test_numerics_large),   cmocka_unit_test(test_no_compiler),
        cmocka_unit_test(test_node_new),         cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_save_roundtrip),   cmocka_unit_test(test_grad),
        cmocka_unit_test(test_threads),         cmocka_unit_test(test_compile_blocks_no_other_call),
        cmocka_unit_test(test_compile_blocks_no_lookup),
        cmocka_unit_test(test_fork_child),
        cmocka_unit_test(test_same_bits_any_layout), cmocka_unit_test(test_same_bits_broadcast),
        cmocka_unit_test(test_sincos_same_bits), cmocka_unit_test(test_prefetch_at_first_call),
        cmocka_unit_test(test_prefetch_sure_nodes_only), cmocka_unit_test(test_prefetch_branch_block),
        cmocka_unit_test(test_prefetch_first_call_out_of_memory),
        cmocka_unit_test(test_prefetch_out_of_memory), cmocka_unit_test(test_prefetch_scan_body),
        cmocka_unit_test(test_inplace_raw_output), cmocka_unit_test(test_empty_body),
        cmocka_unit_test(test_sig_table_bounded), cmocka_unit_test(test_fused_error_names_node),
        cmocka_unit_test(test_softplus_nan_bits), cmocka_unit_test(test_hoisted_scalar_same_bits),
        cmocka_unit_test(test_narrow_input_same_bits), cmocka_unit_test(test_many_functions_same_bits),
        cmocka_unit_test(test_int_division_same_bits), cmocka_unit_test(test_interp_threads),
        cmocka_unit_test(test_special_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
