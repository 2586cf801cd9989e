/* Compiled-function files: the checksum, save -> load -> call giving the
 * same bits, shared state across the functions of a file, checkpoints,
 * the rewrite record and origins surviving a save, copy with swapped
 * shared variables, call N times, every truncation and a flipped byte in
 * every header position refused cleanly, and a save killed with SIGKILL
 * halfway leaving the previous file intact. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/tgf.h"
#include "testutil.h"
#include "vm/vm.h"

/* w is shared and updated: w <- w * 0.5 + x; out = sum(w * x) + c. */
static const char *GRAPH =
    "{\"format\": \"tg-graph\", \"version\": 1,"
    " \"variables\": ["
    "  {\"id\": \"w\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]},"
    "   \"shared\": {\"data\": [1.0, 2.0, 3.0]}},"
    "  {\"id\": \"c\", \"type\": {\"dtype\": \"float64\", \"shape\": []}, \"constant\": {\"data\": 0.25}},"
    "  {\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}],"
    " \"nodes\": ["
    "  {\"op\": \"mul\", \"inputs\": [\"w\", \"x\"], \"outputs\": [\"wx\"]},"
    "  {\"op\": \"sum\", \"inputs\": [\"wx\"], \"outputs\": [\"s\"]},"
    "  {\"op\": \"add\", \"inputs\": [\"s\", \"c\"], \"outputs\": [\"out\"]},"
    "  {\"op\": \"mul\", \"inputs\": [\"w\", {\"value\": 0.5}], \"outputs\": [\"wh\"]},"
    "  {\"op\": \"add\", \"inputs\": [\"wh\", \"x\"], \"outputs\": [\"w_next\"]}],"
    " \"functions\": {"
    "  \"train\": {\"inputs\": [\"x\"], \"outputs\": [\"out\"], \"updates\": {\"w\": \"w_next\"}},"
    "  \"predict\": {\"inputs\": [\"x\"], \"outputs\": [\"out\"]}}}";

static char dir[64];

static int setup(void **state) {
    (void)state;
    strcpy(dir, "/tmp/tg_test_tgf.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *path_in(const char *name) {
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static tg_array *vec3(double a, double b, double c) {
    int64_t shp[1] = {3};
    double d[3] = {a, b, c};
    return tu_f64(1, shp, d);
}

static double call1(tg_function *f, tg_array *x) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *out = NULL;
    if (tg_function_call(f, &x, &out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    double v = tg_array_get_flat(out, 0);
    tg_array_free(out);
    tg_ctx_free(ctx);
    return v;
}

/* Compile both functions of the graph `json` and save them to name. */
static void save_graph_text(const char *name, const char *json, tg_graph **gout, tg_function **fs) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(json);
    fs[0] = tg_function_compile(g, tg_graph_function_find(g, "train", ctx), NULL, ctx);
    fs[1] = tg_function_compile(g, tg_graph_function_find(g, "predict", ctx), NULL, ctx);
    assert_non_null(fs[0]);
    assert_non_null(fs[1]);
    tg_tgf_save_info info = {.source = g};
    if (tg_tgf_save(path_in(name), fs, 2, &info, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    *gout = g;
}

/* Compile both functions of GRAPH and save them to name. */
static void save_graph(const char *name, tg_graph **gout, tg_function **fs) {
    save_graph_text(name, GRAPH, gout, fs);
}

/* What save_graph made. */
static void free_saved(tg_graph *g, tg_function **fs) {
    tg_function_free(fs[0]);
    tg_function_free(fs[1]);
    tg_graph_free(g);
}

/* f saved alone to name (info may be NULL) and loaded back; a failure of
 * either names `what`. */
static tg_tgf *round_trip(const char *name, tg_function *f, const tg_tgf_save_info *info, const char *what,
                          tg_ctx *ctx) {
    if (tg_tgf_save(path_in(name), &f, 1, info, ctx)) fail_msg("%s: %s", what, tg_ctx_message(ctx));
    tg_tgf *t = tg_tgf_load(path_in(name), NULL, ctx);
    if (!t) fail_msg("%s: %s", what, tg_ctx_message(ctx));
    return t;
}

/* Long buffers take the hardware path's three interleaved streams (blocks
 * of 4096 bytes, combined by shifting): it must agree with the table on
 * every length around the block boundaries, at several alignments, and
 * both with a plain bit-by-bit CRC written here. */
static uint32_t crc_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void test_crc32c_long(void **state) {
    (void)state;
    size_t cap = 3 * 4096 * 5 + 64;
    unsigned char *buf = malloc(cap);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < cap; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    size_t lens[] = {3 * 4096 - 1, 3 * 4096, 3 * 4096 + 1, 3 * 4096 + 8, 6 * 4096 + 13,
                     3 * 4096 * 5};
    for (int off = 0; off < 8; off += 3)
        for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
            uint32_t want = crc_bitwise(buf + off, lens[i]);
            assert_int_equal(tg_crc32c_sw(0, buf + off, lens[i]), want);
            assert_int_equal(tg_crc32c(0, buf + off, lens[i]), want);
        }
    free(buf);
}

/* From tg_crc32c_par_min bytes on (16 MiB; 1 MiB here, to keep the
 * bit-by-bit reference quick), the buffer is checked in pieces on the
 * OpenMP threads and their CRCs combined: the same value as one
 * bit-by-bit pass, for any number of threads, length around the
 * threshold, alignment and starting value. Combining alone: CRC("1234")
 * and CRC("56789") give the check value of "123456789". */
static void test_crc32c_parallel(void **state) {
    (void)state;
    assert_int_equal(tg_crc32c_combine(tg_crc32c(0, "1234", 4), tg_crc32c(0, "56789", 5), 5), 0xE3069283u);
    assert_int_equal(tg_crc32c_combine(0xE3069283u, 0, 0), 0xE3069283u);
    size_t cap = (3u << 20) + 64;
    unsigned char *buf = malloc(cap);
    assert_non_null(buf);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < cap; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    const size_t lens[] = {(1u << 20) - 1, 1u << 20, (1u << 20) + 5, (2u << 20) + 4097, (3u << 20) + 13};
    const int threads[] = {1, 2, 3, 7};
    int keep = omp_get_max_threads();
    size_t keep_min = tg_crc32c_par_min;
    tg_crc32c_par_min = 1u << 20;
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        uint32_t want = crc_bitwise(buf + 3, lens[i]);
        for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
            omp_set_num_threads(threads[t]);
            assert_int_equal(tg_crc32c(0, buf + 3, lens[i]), want);
            /* continuing from the CRC of a first part */
            assert_int_equal(tg_crc32c(tg_crc32c(0, buf + 3, 100), buf + 103, lens[i] - 100), want);
        }
    }
    /* A forked child of this process (whose OpenMP threads it does not
     * have) checks on one thread rather than hang; an alarm ends it if it
     * hangs after all. */
    omp_set_num_threads(2);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        _exit(tg_crc32c(0, buf + 3, (3u << 20) + 13) == crc_bitwise(buf + 3, (3u << 20) + 13) ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    omp_set_num_threads(keep);
    tg_crc32c_par_min = keep_min;
    free(buf);
}

static void test_crc32c_known_values(void **state) {
    (void)state;
    /* The check value of CRC-32C (RFC 3720 appendix B.4 and the CRC
     * catalogue): "123456789" -> 0xE3069283; 32 zero bytes -> 0x8A9136AA. */
    assert_int_equal(tg_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(tg_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    unsigned char z[32] = {0};
    assert_int_equal(tg_crc32c(0, z, 32), 0x8A9136AAu);
    assert_int_equal(tg_crc32c(0, "", 0), 0u);
    /* The hardware and table paths agree on every length and alignment,
     * and the checksum continues across pieces. */
    unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 37 + 11);
    for (int off = 0; off < 8; off++)
        for (int n = 0; n + off <= 300; n += 7) {
            uint32_t a = tg_crc32c(0, buf + off, (size_t)n), b = tg_crc32c_sw(0, buf + off, (size_t)n);
            assert_int_equal(a, b);
            uint32_t c = tg_crc32c(tg_crc32c(0, buf + off, (size_t)n / 2), buf + off + n / 2,
                                   (size_t)(n - n / 2));
            assert_int_equal(a, c);
        }
}

/* The same whether the file is mapped or read into memory (no_mmap: the
 * arrays then live in the block it was read into). */
static void save_load_same_bits(bool no_mmap) {
    tg_graph *g;
    tg_function *fs[2];
    save_graph("a.tgf", &g, fs);
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf_load_options lo = {.no_mmap = no_mmap};
    tg_tgf *t = tg_tgf_load(path_in("a.tgf"), &lo, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    assert_null(tg_tgf_warning(t));
    assert_int_equal(tg_tgf_function_count(t), 2);
    int ti = tg_tgf_function_find(t, "train", ctx), pi = tg_tgf_function_find(t, "predict", ctx);
    assert_true(ti >= 0 && pi >= 0);
    tg_function *tr = tg_tgf_function(t, ti), *pr = tg_tgf_function(t, pi);
    assert_int_equal(tg_function_node_count(tr), tg_function_node_count(fs[0]));
    for (int k = 0; k < tg_function_node_count(tr); k++)
        assert_string_equal(tg_function_node_key(tr, k), tg_function_node_key(fs[0], k));
    tg_array *x = vec3(0.1, -0.2, 0.3);
    /* By hand: w = (1, 2, 3); out = 0.1 - 0.4 + 0.9 + 0.25 = 0.85. */
    for (int call = 0; call < 4; call++) {
        double a = call1(fs[0], x), b = call1(tr, x);
        assert_memory_equal(&a, &b, sizeof a);
        if (call == 0) assert_true(a > 0.85 - 1e-12 && a < 0.85 + 1e-12);
    }
    /* predict sees train's updates in both: one set of shared state. */
    double a = call1(fs[1], x), b = call1(pr, x);
    assert_memory_equal(&a, &b, sizeof a);
    const tg_array *w1 = tg_function_shared_get(fs[0], "w"), *w2 = tg_function_shared_get(tr, "w");
    assert_true(tg_array_equal(w1, w2));
    /* Unknown function names are refused with the list. */
    assert_true(tg_tgf_function_find(t, "nope", ctx) < 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "'train'"));
    tg_array_free(x);
    tg_tgf_free(t);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}

static void test_save_load_same_bits_and_shared_state(void **state) {
    (void)state;
    save_load_same_bits(false);
}

static void test_save_load_read_into_memory(void **state) {
    (void)state;
    save_load_same_bits(true);
}

static void test_checkpoint_resume_exact(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *fs[2];
    save_graph("b.tgf", &g, fs);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *x = vec3(0.3, 0.7, -1.1);
    /* Straight: 7 calls. Resumed: 3 calls, checkpoint, load, 4 calls. */
    for (int i = 0; i < 7; i++) call1(fs[0], x);
    tg_tgf *t = tg_tgf_load(path_in("b.tgf"), NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *tr = tg_tgf_function(t, tg_tgf_function_find(t, "train", ctx));
    for (int i = 0; i < 3; i++) call1(tr, x);
    if (tg_tgf_save_state(t, path_in("b3.tgf"), ctx)) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf_free(t);
    t = tg_tgf_load(path_in("b3.tgf"), NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tr = tg_tgf_function(t, tg_tgf_function_find(t, "train", ctx));
    for (int i = 0; i < 4; i++) call1(tr, x);
    const tg_array *w1 = tg_function_shared_get(fs[0], "w"), *w2 = tg_function_shared_get(tr, "w");
    assert_memory_equal(tg_array_data(w1), tg_array_data(w2), 3 * sizeof(double));
    /* The checkpoint keeps the original graph: reoptimizing it gives a
     * function that starts from the checkpointed values too. */
    tg_tgf_free(t);
    tg_tgf_load_options lo = {.reoptimize = true};
    t = tg_tgf_load(path_in("b3.tgf"), &lo, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tr = tg_tgf_function(t, tg_tgf_function_find(t, "train", ctx));
    for (int i = 0; i < 4; i++) call1(tr, x);
    w2 = tg_function_shared_get(tr, "w");
    assert_memory_equal(tg_array_data(w1), tg_array_data(w2), 3 * sizeof(double));
    tg_tgf_free(t);
    tg_array_free(x);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}

/* tg_tgf_original: the kept graph loads with the functions' shared state,
 * current values included. w0 = (1, 2, 3), x = (0.3, 0.7, -1.1), two
 * training calls: w = (0.8, 1.7, 0.4), then (0.7, 1.55, -0.9), and
 * predict = 0.21 + 1.085 + 0.99 + 0.25 = 2.535. One more call through a
 * function compiled from the original graph: w = (0.65, 1.475, -1.55),
 * which the file's predict sees: 0.195 + 1.0325 + 1.705 + 0.25 = 3.1825. */
static void test_original_graph(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *fs[2];
    save_graph("o.tgf", &g, fs);
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf *t = tg_tgf_load(path_in("o.tgf"), NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *tr = tg_tgf_function(t, tg_tgf_function_find(t, "train", ctx));
    tg_function *pr = tg_tgf_function(t, tg_tgf_function_find(t, "predict", ctx));
    tg_array *x = vec3(0.3, 0.7, -1.1);
    call1(tr, x);
    call1(tr, x);
    tg_graph *o = tg_tgf_original(t, ctx);
    if (!o) fail_msg("%s", tg_ctx_message(ctx));
    assert_int_equal(tg_graph_node_count(o), 5);
    assert_int_equal(tg_graph_function_count(o), 2);
    tg_compile_options none = {.preset = "none"};
    tg_function *op = tg_function_compile(o, tg_graph_function_find(o, "predict", ctx), &none, ctx);
    tg_function *ot = tg_function_compile(o, tg_graph_function_find(o, "train", ctx), &none, ctx);
    assert_non_null(op);
    assert_non_null(ot);
    assert_float_equal(call1(op, x), 2.535, 1e-12);
    call1(ot, x);
    assert_float_equal(call1(pr, x), 3.1825, 1e-12);
    tg_function_free(op);
    tg_function_free(ot);
    tg_graph_free(o);
    tg_tgf_free(t);
    /* A file saved without its source keeps no original graph. */
    t = round_trip("o2.tgf", fs[1], NULL, "no source", ctx);
    assert_null(tg_tgf_original(t, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_ENOTFOUND);
    assert_non_null(strstr(tg_ctx_message(ctx), "keeps no original graph"));
    tg_tgf_free(t);
    tg_array_free(x);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}

static void test_record_and_origins_survive(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(GRAPH);
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, "train", ctx),
                                         &(tg_compile_options){.preset = "none"}, ctx);
    assert_non_null(f);
    /* Stand in for the optimizer: a record entry, and a node that stands
     * for two original nodes. */
    const char *rm[2] = {"wx", "s"}, *cr[1] = {"s"};
    assert_int_equal(tg_opt_record_add(&f->record, "fuse_test", "fusion", rm, 2, cr, 1), 0);
    int k_s = -1;
    for (int k = 0; k < f->nsched; k++)
        if (!strcmp(tg_function_node_key(f, k), "s")) k_s = k;
    assert_true(k_s >= 0);
    tg_node *n = f->sched[k_s].node;
    const char *two[2] = {"wx", "s"};
    tg_free(n->origins);
    n->origins = tg_origins_pack(two, 2);
    assert_non_null(n->origins);
    n->norigins = 2;
    tg_tgf *t = round_trip("r.tgf", f, NULL, "record", ctx);
    tg_function *h = tg_tgf_function_take(t, 0);
    tg_tgf_free(t); /* h outlives the set it came from */
    assert_int_equal(tg_function_rewrite_count(h), 1);
    tg_rewrite_info ri;
    assert_int_equal(tg_function_rewrite_get(h, 0, &ri), 0);
    assert_string_equal(ri.name, "fuse_test");
    assert_string_equal(ri.pass, "fusion");
    assert_int_equal(ri.nremoved, 2);
    assert_string_equal(ri.removed[1], "s");
    assert_int_equal(ri.ncreated, 1);
    const char *const *keys;
    assert_int_equal(tg_function_node_origins(h, k_s, &keys), 2);
    assert_string_equal(keys[0], "wx");
    assert_string_equal(keys[1], "s");
    /* A node left alone stands for itself. */
    int other = k_s == 0 ? 1 : 0;
    assert_int_equal(tg_function_node_origins(h, other, &keys), 1);
    assert_string_equal(keys[0], tg_function_node_key(h, other));
    /* No original graph in this file: --reoptimize is refused. */
    tg_tgf_load_options lo = {.reoptimize = true};
    assert_null(tg_tgf_load(path_in("r.tgf"), &lo, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_ENOTFOUND);
    tg_function_free(h);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* A fast_run compile: the optimizer's passes come back with the function,
 * and an output the optimizer folded into a constant keeps its declared
 * id (the constant's own id differs). */
/* b has a's optimizer profile: per pass and, with `rewrites`, per
 * rewrite (a .tgf keeps no such table), names, counts and times alike. */
static void same_profile(const tg_function *a, const tg_function *b, bool rewrites) {
    assert_true(tg_function_pass_count(a) > 0);
    if (tg_function_pass_count(b) != tg_function_pass_count(a))
        fail_msg("%d passes, the original %d", tg_function_pass_count(b), tg_function_pass_count(a));
    for (int i = 0; i < tg_function_pass_count(a); i++) {
        tg_pass_stats x, y;
        assert_int_equal(tg_function_pass_get(a, i, &x), 0);
        assert_int_equal(tg_function_pass_get(b, i, &y), 0);
        assert_string_equal(x.name, y.name);
        assert_true(x.seconds == y.seconds);
        assert_int_equal(x.nodes_before, y.nodes_before);
        assert_int_equal(x.nodes_after, y.nodes_after);
        assert_int_equal(x.applied, y.applied);
    }
    if (!rewrites) return;
    assert_true(tg_function_rewrite_stats_count(a) > 0);
    assert_int_equal(tg_function_rewrite_stats_count(b), tg_function_rewrite_stats_count(a));
    for (int i = 0; i < tg_function_rewrite_stats_count(a); i++) {
        tg_rewrite_stats x, y;
        assert_int_equal(tg_function_rewrite_stats_get(a, i, &x), 0);
        assert_int_equal(tg_function_rewrite_stats_get(b, i, &y), 0);
        assert_string_equal(x.name, y.name);
        assert_string_equal(x.pass, y.pass);
        assert_true(x.tried == y.tried && x.applied == y.applied && x.seconds == y.seconds);
    }
}

static void test_passes_and_output_ids_survive(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load("{\"format\": \"tg-graph\", \"version\": 1,"
                          " \"variables\": [{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}],"
                          " \"nodes\": ["
                          "  {\"op\": \"mul\", \"inputs\": [\"x\", {\"value\": 3}], \"outputs\": [\"y\"]},"
                          "  {\"op\": \"add\", \"inputs\": [{\"value\": 1}, {\"value\": 2}], \"outputs\": [\"k\"]}],"
                          " \"functions\": {\"main\": {\"inputs\": [\"x\"], \"outputs\": [\"y\", \"k\"]}}}");
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    assert_true(tg_function_pass_count(f) > 0);
    tg_tgf *t = round_trip("p.tgf", f, NULL, "passes", ctx);
    tg_function *h = tg_tgf_function(t, 0);
    assert_int_equal(tg_function_pass_count(h), tg_function_pass_count(f));
    for (int i = 0; i < tg_function_pass_count(f); i++) {
        tg_pass_stats a, b;
        assert_int_equal(tg_function_pass_get(f, i, &a), 0);
        assert_int_equal(tg_function_pass_get(h, i, &b), 0);
        assert_string_equal(a.name, b.name);
        assert_true(a.seconds == b.seconds);
        assert_int_equal(a.nodes_before, b.nodes_before);
        assert_int_equal(a.nodes_after, b.nodes_after);
        assert_int_equal(a.applied, b.applied);
    }
    assert_true(tg_function_optimize_seconds(h) == 0); /* nothing optimized now */
    /* and a copy of the restored function keeps them, past the file */
    tg_tgf *t2 = round_trip("p2.tgf", f, NULL, "passes", ctx);
    tg_function *hc = tg_function_copy(tg_tgf_function(t2, 0), NULL, NULL, 0, ctx);
    if (!hc) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf_free(t2);
    same_profile(f, hc, false);
    tg_function_free(hc);
    assert_string_equal(tg_function_output_id(h, 0), "y");
    assert_string_equal(tg_function_output_id(h, 1), "k");
    /* And the values: (1, 2) * 3 and 1 + 2. */
    double xv[2] = {1, 2};
    tg_array *x = tg_array_new(TG_FLOAT64, 1, (int64_t[]){2}), *out[2] = {NULL, NULL};
    memcpy(tg_array_data(x), xv, sizeof xv);
    if (tg_function_call(h, &x, out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    const double *y = tg_array_data(out[0]);
    assert_true(y[0] == 3 && y[1] == 6);
    assert_true(*(const int64_t *)tg_array_data(out[1]) == 3);
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(x);
    tg_tgf_free(t);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* The nodes a grad's expansion makes name no node of the file: the
 * function keeps, by key, which derivative each takes part in, errors and
 * tg_function_key_gradient say it, and a .tgf, a restored function's copy
 * and its composites' origin groups keep it. sum(sqrt(x) * x) and its
 * gradient 1.5 sqrt(x), written by the chain rule as
 * sqrt(x) + x / (2 sqrt(x)): NaN at x = 0. */
static const char *GRAD_GRAPH =
    "{\"format\": \"tg-graph\", \"version\": 1,"
    " \"variables\": [{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [null]}},"
    "                {\"id\": \"y\", \"type\": {\"dtype\": \"float64\", \"shape\": [null]}}],"
    " \"nodes\": ["
    "  {\"op\": \"sqrt\", \"inputs\": [\"x\"], \"outputs\": [\"r\"]},"
    "  {\"op\": \"mul\", \"inputs\": [\"r\", \"x\"], \"outputs\": [\"m\"]},"
    "  {\"op\": \"sum\", \"inputs\": [\"m\"], \"outputs\": [\"c\"]},"
    "  {\"op\": \"grad\", \"inputs\": [\"c\", \"x\"], \"outputs\": [\"gx\"]},"
    "  {\"op\": \"maximum\", \"inputs\": [\"x\", \"y\"], \"outputs\": [\"mx\"]},"
    "  {\"op\": \"sum\", \"inputs\": [\"mx\"], \"outputs\": [\"cm\"]},"
    "  {\"op\": \"grad\", \"inputs\": [\"cm\", \"x\"], \"outputs\": [\"gm\"]},"
    "  {\"op\": \"rop\", \"inputs\": [\"r\", \"x\", \"y\"], \"outputs\": [\"jv\"]},"
    "  {\"op\": \"sum\", \"inputs\": [\"gx\"], \"outputs\": [\"sg\"]},"
    "  {\"op\": \"grad\", \"inputs\": [\"sg\", \"x\"], \"outputs\": [\"hx\"]}],"
    " \"functions\": {\"f\": {\"inputs\": [\"x\"], \"outputs\": [\"c\", \"gx\"]},"
    "               \"h\": {\"inputs\": [\"x\"], \"outputs\": [\"hx\"]},"
    "               \"g\": {\"inputs\": [\"x\", \"y\"], \"outputs\": [\"gm\"]},"
    "               \"j\": {\"inputs\": [\"x\", \"y\"], \"outputs\": [\"jv\"]}}}";

/* The scheduled node of op `op` (the first), or -1. */
static int sched_of(const tg_function *f, const char *op) {
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_op(f, k), op)) return k;
    return -1;
}

/* The first composite of f whose origins hold key, or -1. */
static int composite_of(const tg_function *f, const char *key) {
    for (int k = 0; k < tg_function_node_count(f); k++) {
        if (strcmp(tg_function_node_op(f, k), "composite")) continue;
        const char *const *keys;
        int no = tg_function_node_origins(f, k, &keys);
        for (int j = 0; j < no; j++)
            if (!strcmp(keys[j], key)) return k;
    }
    return -1;
}

static void expect_grad(const tg_function *f, const char *key, const char *of, const char *of_op,
                        const char *by, const char *by_op) {
    tg_key_gradient kg;
    if (!tg_function_key_gradient(f, key, &kg)) fail_msg("%s: no gradient entry", key);
    assert_string_equal(kg.of, of);
    assert_string_equal(kg.of_op, of_op);
    assert_string_equal(kg.by, by);
    assert_string_equal(kg.by_op, by_op);
}

/* A composite writing two outputs over two inputs of its own (fusion's
 * extra output, each placed) is saved and restored with both places, and
 * computes the same: u = softmax(a), w = softmax(b), p = exp(u) + w (an
 * output), q = p * u * w; values by hand. */
static void test_multi_output_inplace(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[20000]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[20000]}}],\"nodes\":["
        "{\"op\":\"softmax\",\"inputs\":[\"a\"],\"outputs\":[\"u\"]},{\"op\":\"softmax\",\"inputs\":[\"b\"],\"outputs\":[\"w\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"u\"],\"outputs\":[\"pe\"]},{\"op\":\"add\",\"inputs\":[\"pe\",\"w\"],\"outputs\":[\"p\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"p\",\"u\",\"w\"],\"outputs\":[\"q\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"a\",\"b\"],\"outputs\":[\"q\",\"p\"]}}}");
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf *t = round_trip("multi_inplace.tgf", f, NULL, "multi-output in place", ctx);
    tg_function *r = tg_tgf_function(t, 0);
    int kc = sched_of(r, "composite");
    assert_true(kc >= 0);
    const tg_node *c = r->sched[kc].node;
    assert_int_equal(c->nout, 2);
    assert_non_null(c->inplace);
    assert_true(c->inplace[0] >= 0 && c->inplace[1] >= 0 && c->inplace[0] != c->inplace[1]);
    int64_t n = 20000;
    double *av = malloc(sizeof *av * (size_t)n), *bv = malloc(sizeof *bv * (size_t)n);
    double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0;
    for (int64_t k = 0; k < n; k++) {
        av[k] = sin((double)k * 0.37) * 4;
        bv[k] = cos((double)k * 0.11) * 3;
        ma = fmax(ma, av[k]);
        mb = fmax(mb, bv[k]);
    }
    for (int64_t k = 0; k < n; k++) {
        sa += exp(av[k] - ma);
        sb += exp(bv[k] - mb);
    }
    tg_array *in[2] = {tu_f64(1, &n, av), tu_f64(1, &n, bv)};
    for (int which = 0; which < 2; which++)
        for (int rep = 0; rep < 2; rep++) {
            tg_array *out[2] = {NULL, NULL};
            if (tg_function_call(which ? r : f, in, out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
            for (int64_t k = 0; k < n; k++) {
                double u = exp(av[k] - ma) / sa, w = exp(bv[k] - mb) / sb, p = exp(u) + w;
                tu_assert_near(tg_array_get_flat(out[1], k), p, 1e-15);
                tu_assert_near(tg_array_get_flat(out[0], k), p * u * w, 1e-15);
            }
            tg_array_free(out[0]);
            tg_array_free(out[1]);
        }
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    free(av);
    free(bv);
    tg_tgf_free(t);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* How an error names a fused node is kept, in the function and in its
 * file, for a composite one of whose fused ops can fail at run time
 * (integer int_div, mod, pow: test_composite's
 * test_fused_error_names_node) and for no other; describing every fused
 * node was half of the fusion pass. q = x op y, r = q * z fused into one
 * composite of two fused nodes, for each op and dtype: names for both
 * nodes, as the unfused graph names them, or none. */
static void test_fused_names_kept_where_ops_fail(void **state) {
    (void)state;
    static const struct {
        const char *op, *dtype;
        int names;
    } cases[] = {
        {"int_div", "int32", 2}, {"mod", "int64", 2},  {"pow", "int16", 2},    {"int_div", "float64", 0},
        {"mod", "float32", 0},   {"pow", "float64", 0}, {"add", "int32", 0},    {"true_div", "int32", 0},
        {"maximum", "int8", 0},  {"sub", "float32", 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *j = NULL;
        assert_true(asprintf(&j,
                             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                             "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[4]}},"
                             "{\"id\":\"y\",\"type\":{\"dtype\":\"%s\",\"shape\":[4]}},"
                             "{\"id\":\"z\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}}],\"nodes\":["
                             "{\"op\":\"%s\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"q\"]},"
                             "{\"op\":\"mul\",\"inputs\":[\"q\",\"z\"],\"outputs\":[\"r\"],"
                             "\"trace\":[{\"file\":\"m.py\",\"line\":4}]}],"
                             "\"functions\":{\"f\":{\"inputs\":[\"x\",\"y\",\"z\"],\"outputs\":[\"r\"]}}}",
                             cases[c].dtype, cases[c].dtype, cases[c].op) > 0);
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tu_load(j);
        tg_function *f = tg_function_compile(g, tg_graph_function_find(g, "f", ctx), NULL, ctx);
        if (!f) fail_msg("%s", tg_ctx_message(ctx));
        tg_tgf *t = round_trip("fused.tgf", f, NULL, cases[c].op, ctx);
        for (int w = 0; w < 2; w++) {
            tg_function *h = w ? tg_tgf_function(t, 0) : f;
            int kc = sched_of(h, "composite");
            if (kc < 0) fail_msg("%s %s: no composite", cases[c].op, cases[c].dtype);
            const tg_node *cn = h->sched[kc].node;
            if (tg_composite_who_count(cn) != cases[c].names)
                fail_msg("%s %s%s: names for %d fused nodes, want %d", cases[c].op, cases[c].dtype,
                         w ? " restored" : "", tg_composite_who_count(cn), cases[c].names);
            if (!cases[c].names) continue;
            const char *d, *tr;
            char want[64];
            snprintf(want, sizeof want, "nodes[0] (%s -> q)", cases[c].op);
            tg_composite_who(cn, 0, &d, &tr);
            assert_string_equal(d, want);
            assert_string_equal(tr, "");
            tg_composite_who(cn, 1, &d, &tr);
            assert_string_equal(d, "nodes[1] (mul -> r)");
            assert_string_equal(tr, " [at m.py:4]");
        }
        tg_tgf_free(t);
        tg_function_free(f);
        tg_graph_free(g);
        tg_ctx_free(ctx);
        free(j);
    }
}

static void test_gradient_nodes_named(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(GRAD_GRAPH);
    tg_compile_options none = {.preset = "none"};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, "f", ctx), &none, ctx);
    assert_non_null(f);
    /* x / (2 sqrt x), the derivative of sqrt: the division's key. */
    int k = sched_of(f, "true_div");
    assert_true(k >= 0);
    const char *key = tg_function_node_key(f, k);
    assert_true(!strncmp(key, "gx.", 3));
    expect_grad(f, key, "r", "sqrt", "gx", "grad");
    /* The file's own nodes, and the grad node's output, are not such keys. */
    tg_key_gradient kg;
    assert_false(tg_function_key_gradient(f, "r", &kg));
    assert_false(tg_function_key_gradient(f, "gx", &kg));
    assert_false(tg_function_key_gradient(f, "nonesuch", &kg));
    /* The values: c = 0 + 1 + 8, gx = (nan, 1.5, 3). */
    tg_array *x = vec3(0, 1, 4), *out[2] = {NULL, NULL};
    if (tg_function_call(f, &x, out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    const double *gv = tg_array_data(out[1]);
    assert_true(tg_array_get_flat(out[0], 0) == 9 && isnan(gv[0]) && gv[1] == 1.5 && gv[2] == 3);
    tg_array_free(out[0]);
    tg_array_free(out[1]);

    /* Saved and restored (fast_run: the division fused into a composite
     * whose origins are grad keys), and copied. */
    tg_function *h = tg_function_compile(g, tg_graph_function_find(g, "f", ctx), NULL, ctx);
    assert_non_null(h);
    tg_tgf *t = round_trip("grad.tgf", h, NULL, "gradient nodes", ctx);
    tg_function *fs[2] = {tg_tgf_function(t, 0), NULL};
    fs[1] = tg_function_copy(fs[0], NULL, NULL, 0, ctx);
    if (!fs[1]) fail_msg("%s", tg_ctx_message(ctx));
    for (int i = 0; i < 2; i++) {
        expect_grad(fs[i], key, "r", "sqrt", "gx", "grad");
        /* (the first composite makes m and r; the second, the
         * gradient, holds the division) */
        int kc = composite_of(fs[i], key);
        assert_true(kc >= 0);
        /* The composite's origin groups: the one that holds the division
         * is the division alone. */
        const tg_node *cn = fs[i]->sched[kc].node;
        int nf, nk, nf0, nk0;
        const char *const *keys, *const *keys0;
        const int *st = tg_composite_origin_groups(cn, &nf, &keys, &nk);
        {
            assert_non_null(st);
            int start = -1, len = 0;
            for (int j = 0; j < nf; j++)
                if (st[j + 1] - st[j] == 1 && !strcmp(keys[st[j]], key)) start = st[j], len = 1;
            assert_true(start >= 0 && len == 1);
            const int *st0 = tg_composite_origin_groups(h->sched[composite_of(h, key)].node, &nf0, &keys0, &nk0);
            assert_int_equal(nf, nf0);
            assert_memory_equal(st, st0, sizeof *st * (size_t)(nf + 1));
            assert_int_equal(nk, nk0);
            for (int j = 0; j < nk; j++) assert_string_equal(keys[j], keys0[j]);
        }
    }
    tg_function_free(fs[1]);
    tg_tgf_free(t);
    tg_function_free(h);

    /* A run-time error in such a node says whose derivative it is: the
     * gradient of maximum(x, y) runs ge(x, y) before maximum itself when
     * nothing is optimized, and the lengths do not broadcast. */
    tg_function *m = tg_function_compile(g, tg_graph_function_find(g, "g", ctx), &none, ctx);
    assert_non_null(m);
    int64_t two = 2;
    tg_array *ins[2] = {x, tu_f64(1, &two, (double[]){1, 2})}, *gm = NULL;
    assert_int_not_equal(tg_function_call(m, ins, &gm, ctx), 0);
    const char *msg = tg_ctx_message(ctx);
    if (!strstr(msg, "; from grad gm, differentiating mx (maximum)): shapes (3,) and (2,) do not broadcast"))
        fail_msg("message: %s", msg);
    tg_function_free(m);

    /* An rop's nodes say rop. */
    tg_function *j = tg_function_compile(g, tg_graph_function_find(g, "j", ctx), &none, ctx);
    assert_non_null(j);
    int kd = sched_of(j, "true_div");
    assert_true(kd >= 0);
    tg_key_gradient kj;
    assert_true(tg_function_key_gradient(j, tg_function_node_key(j, kd), &kj));
    assert_string_equal(kj.by, "jv");
    assert_string_equal(kj.by_op, "rop");
    tg_function_free(j);

    /* A second derivative: the nodes of grad hx differentiate nodes of
     * grad gx, which differentiate the file's; the chain leads back.
     * hx = d/dx sum(1.5 sqrt(x)) = 0.75 / sqrt(x): (0.75, 0.375, 0.25) at
     * (1, 4, 9). */
    tg_function *hf = tg_function_compile(g, tg_graph_function_find(g, "h", ctx), &none, ctx);
    assert_non_null(hf);
    int chained = 0;
    for (int q = 0; q < tg_function_node_count(hf); q++) {
        tg_key_gradient k1, k2;
        if (!tg_function_key_gradient(hf, tg_function_node_key(hf, q), &k1) || strcmp(k1.by, "hx") ||
            strncmp(k1.of, "gx.", 3))
            continue;
        assert_true(tg_function_key_gradient(hf, k1.of, &k2));
        assert_string_equal(k2.by, "gx");
        chained++;
    }
    assert_true(chained > 0);
    tg_array *x149 = vec3(1, 4, 9), *hv = NULL;
    if (tg_function_call(hf, &x149, &hv, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    const double *hd = tg_array_data(hv);
    assert_true(fabs(hd[0] - 0.75) < 1e-12 && fabs(hd[1] - 0.375) < 1e-12 && fabs(hd[2] - 0.25) < 1e-12);
    tg_array_free(hv);
    tg_array_free(x149);
    tg_function_free(hf);

    tg_array_free(ins[1]);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* A format version 2 file (tests/fuzz/corpus_tgf/grad_v2.tgf, written by
 * tg before version 3 from tests/data/tgdebug/grad_sqrt.json) still loads
 * and runs; it has no gradients' table and no origin groups. */
static void test_version_2_file(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf *t = tg_tgf_load(TG_TEST_DATA "/../fuzz/corpus_tgf/grad_v2.tgf", NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *f = tg_tgf_function(t, 0);
    tg_array *x = vec3(0, 1, 4), *out[2] = {NULL, NULL};
    if (tg_function_call(f, &x, out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    const double *gv = tg_array_data(out[1]);
    assert_true(tg_array_get_flat(out[0], 0) == 9 && isnan(gv[0]) && gv[1] == 1.5 && gv[2] == 3);
    for (int k = 0; k < tg_function_node_count(f); k++) {
        tg_key_gradient kg;
        assert_false(tg_function_key_gradient(f, tg_function_node_key(f, k), &kg));
        int nf, nk;
        const char *const *keys;
        assert_null(tg_composite_origin_groups(f->sched[k].node, &nf, &keys, &nk));
    }
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(x);
    tg_tgf_free(t);
    tg_ctx_free(ctx);
}

/* ---- run-time errors of restored functions ---- */

/* The message of f's call on `in`, which must fail, into msg. */
static void call_error(tg_function *f, tg_array *const *in, char *msg, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *out[4] = {0};
    assert_true(tg_function_output_count(f) <= 4);
    if (!tg_function_call(f, in, out, ctx)) fail_msg("the call did not fail");
    snprintf(msg, size, "%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
}

/* Function fn of `json`, compiled with `preset`, fails on `in` with
 * `want` (NULL: whatever it says, which is printed); restored from a
 * .tgf, copied, and restored from a checkpoint of the restored one
 * (tgc run F.tgf --save-state), it fails with the same words, as the
 * graph file names its nodes. */
static void restored_fails_alike(const char *json, const char *fn, const char *preset, tg_array *const *in,
                                 const char *want, const char *what) {
    static int seq;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(json);
    tg_compile_options o = {.preset = preset};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, fn, ctx), &o, ctx);
    if (!f) fail_msg("%s: %s", what, tg_ctx_message(ctx));
    char a[TG_CTX_MSG_MAX], b[TG_CTX_MSG_MAX], name[64], ckpt[64];
    call_error(f, in, a, sizeof a);
    if (want && strcmp(a, want)) fail_msg("%s, compiled:\n  want: %s\n  got:  %s", what, want, a);
    if (!want) printf("  %s: %s\n", what, a);
    snprintf(name, sizeof name, "err%d.tgf", seq);
    snprintf(ckpt, sizeof ckpt, "err%d.ckpt.tgf", seq++);
    tg_tgf_save_info info = {.source = g};
    tg_tgf *t = round_trip(name, f, &info, what, ctx);
    tg_function *r = tg_tgf_function(t, 0), *c = tg_function_copy(r, NULL, NULL, 0, ctx);
    if (!c) fail_msg("%s: copy: %s", what, tg_ctx_message(ctx));
    if (tg_tgf_save_state(t, path_in(ckpt), ctx)) fail_msg("%s: save_state: %s", what, tg_ctx_message(ctx));
    tg_tgf *t2 = tg_tgf_load(path_in(ckpt), NULL, ctx);
    if (!t2) fail_msg("%s: %s", what, tg_ctx_message(ctx));
    tg_function *again[3] = {r, c, tg_tgf_function(t2, 0)};
    static const char *const how[3] = {"restored", "copied", "restored from a checkpoint"};
    for (int i = 0; i < 3; i++) {
        call_error(again[i], in, b, sizeof b);
        if (strcmp(a, b)) fail_msg("%s, %s:\n  want: %s\n  got:  %s", what, how[i], a, b);
    }
    tg_tgf_free(t2);
    tg_function_free(c);
    tg_tgf_free(t);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

static void free_all(tg_array **a, int n) {
    for (int i = 0; i < n; i++) tg_array_free(a[i]);
}

static tg_array *ivec(int n, const int64_t *v) {
    int64_t shp[1] = {n};
    tg_array *a = tg_array_new(TG_INT64, 1, shp);
    memcpy(tg_array_data(a), v, sizeof *v * (size_t)n);
    return a;
}

#define J(...) #__VA_ARGS__

/* x + 1, then 'the_div' (x + 1) // y, then * 3, fused into one composite
 * under fast_run; %s: the lengths of x and y. */
static const char *IDZ = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "int64", "shape": [%s]}},
                  {"id": "y", "type": {"dtype": "int64", "shape": [%s]}}],
    "nodes": [{"op": "add", "inputs": ["x", {"value": 1}], "outputs": ["a"], "name": "a_plus"},
              {"op": "int_div", "inputs": ["a", "y"], "outputs": ["q"], "name": "the_div",
               "trace": [{"file": "model.py", "line": 3, "function": "build", "code": "q = a // y"}]},
              {"op": "mul", "inputs": ["q", {"value": 3}], "outputs": ["m"]}],
    "functions": {"f": {"inputs": ["x", "y"], "outputs": ["m"]}}});

/* An unused exp first, then 'the_div' x // y: nodes[1] of the file is
 * the schedule's first node. */
static const char *IDZ2 = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "x", "type": {"dtype": "int64", "shape": [3]}},
                  {"id": "y", "type": {"dtype": "int64", "shape": [3]}}],
    "nodes": [{"op": "exp", "inputs": ["x"], "outputs": ["unused"]},
              {"op": "int_div", "inputs": ["x", "y"], "outputs": ["q"], "name": "the_div"}],
    "functions": {"f": {"inputs": ["x", "y"], "outputs": ["q"]}}});

/* ps_t = ps_{t-1} + cholesky(A) over 3 steps in scan 'loop': scan_hoist
 * moves the body node 'chk' out of the loop (test_scanopt's graph). */
static const char *MOVED_CHOL = J({"format": "tg-graph", "version": 1,
    "variables": [{"id": "A", "type": {"dtype": "float64", "shape": [2, 2]}},
                  {"id": "z0", "type": {"dtype": "float64", "shape": [2, 2]}}],
    "nodes": [{"op": "scan", "name": "loop", "inputs": [{"value": 3}, "z0", "A"], "outputs": ["ps"],
               "trace": [{"file": "model.py", "line": 10, "function": "build", "code": "ps = scan(step)"}],
               "attrs": {"n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]],
                         "n_nonrecurrent": 0, "n_non_sequences": 1, "has_n_steps": true, "has_until": false,
                         "body": {"variables": [{"id": "z", "type": {"dtype": "float64", "shape": [2, 2]}},
                                                {"id": "A", "type": {"dtype": "float64", "shape": [2, 2]}}],
                                  "nodes": [{"op": "cholesky", "name": "chk", "inputs": ["A"], "outputs": ["L"],
                                             "trace": [{"file": "model.py", "line": 5, "function": "step",
                                                        "code": "L = cholesky(A)"}]},
                                            {"op": "add", "inputs": ["z", "L"], "outputs": ["zn"]}],
                                  "inputs": ["z", "A"], "outputs": ["zn"]}}}],
    "functions": {"main": {"inputs": ["A", "z0"], "outputs": ["ps"]}}});

/* A restored function's run-time errors are the compiled one's, word for
 * word: a node of the file by its place there (the restore named the
 * int_div nodes[0], its place in the schedule, where the file has an
 * exp), the fused node of a composite and its trace, a node a rewrite
 * made by the keys it stands for, a gradient's node by the derivative,
 * and a node moved out of a scan body by the words of the loop as
 * written. The expected words are the graph file's: the node's index
 * there, its name and trace, as the -O none run gives them. */
static void test_restored_errors_name_nodes_alike(void **state) {
    (void)state;
    char json[4096];
    /* 1 // 0 */
    tg_array *in[2] = {ivec(3, (int64_t[]){1, 2, 3}), ivec(3, (int64_t[]){1, 0, 2})};
    restored_fails_alike(IDZ2, "f", "fast_run", in, "nodes[1] (int_div 'the_div' -> q): integer division by zero",
                         "a node of the file");
    snprintf(json, sizeof json, IDZ, "3", "3");
    restored_fails_alike(json, "f", "fast_run", in,
                         "nodes[1] (int_div 'the_div' -> q): integer division by zero [at model.py:3 in build: "
                         "q = a // y], fused into (composite -> m, standing for a, q, m)",
                         "a fused node");
    free_all(in, 2);
    /* lengths 3 and 2 */
    snprintf(json, sizeof json, IDZ, "null", "null");
    tg_array *in32[2] = {ivec(3, (int64_t[]){1, 2, 3}), ivec(2, (int64_t[]){1, 2})};
    restored_fails_alike(json, "f", "fast_run", in32,
                         "(composite -> m, standing for a, q, m): shapes (3,) and (2,) do not broadcast",
                         "a node a rewrite made");
    free_all(in32, 2);
    /* the gradient of maximum(x, y) runs ge(x, y) first under -O none */
    tg_array *g32[2] = {vec3(1, 2, 3), tu_f64(1, (int64_t[]){2}, (double[]){1, 2})};
    restored_fails_alike(GRAD_GRAPH, "g", "none", g32,
                         "(ge -> gm.4; from grad gm, differentiating mx (maximum)): shapes (3,) and (2,) do not "
                         "broadcast",
                         "a gradient's node");
    free_all(g32, 2);
    /* [[1, 2], [2, 1]] has the eigenvalue -1 */
    tg_array *chol[2] = {tu_f64(2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 1}),
                         tu_f64(2, (int64_t[]){2, 2}, (double[]){0, 0, 0, 0})};
    restored_fails_alike(MOVED_CHOL, "main", "fast_run", chol,
                         "nodes[0] (scan 'loop' -> ps): in the body, hoisted out of the loop: nodes[0] (cholesky "
                         "'chk' -> L): matrix is not positive definite (leading minor of order 2) [at model.py:5 "
                         "in step: L = cholesky(A)] [at model.py:10 in build: ps = scan(step)]",
                         "a node moved out of a scan body");
    free_all(chol, 2);
}

/* A format version 3 file (tests/fuzz/corpus_tgf/grad_v3.tgf, written by
 * tg before version 4: gx = grad(sum(log_softmax(x) * y), x), fused)
 * still loads and runs, with its gradients' table; it did not keep the
 * nodes' places in the graph file, so no node is named by one (its place
 * in the schedule is not). */
static void test_version_3_file(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf *t = tg_tgf_load(TG_TEST_DATA "/../fuzz/corpus_tgf/grad_v3.tgf", NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *f = tg_tgf_function(t, 0);
    int64_t four = 4;
    tg_array *in[2] = {tu_f64(1, &four, (double[]){1, 2, 3, 4}), tu_f64(1, &four, (double[]){0, 1, 0, 0})}, *gx = NULL;
    if (tg_function_call(f, in, &gx, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    /* y - softmax(x) sum(y) */
    double z = exp(1) + exp(2) + exp(3) + exp(4);
    for (int i = 0; i < 4; i++) {
        double want = (i == 1) - exp(i + 1) / z, got = tg_array_get_flat(gx, i);
        if (fabs(got - want) > 1e-12) fail_msg("gx[%d] = %.17g, want %.17g", i, got, want);
    }
    int grads = 0;
    for (int k = 0; k < tg_function_node_count(f); k++) {
        tg_key_gradient kg;
        grads += tg_function_key_gradient(f, tg_function_node_key(f, k), &kg);
        const tg_node *n = f->sched[k].node;
        char desc[256];
        tg_node_describe(n, desc, sizeof desc);
        if (n->json_index != -1 || !strncmp(desc, "nodes[", 6) || n->moved || tg_composite_who_count(n))
            fail_msg("schedule[%d] is named %s", k, desc);
    }
    assert_true(grads > 0);
    tg_array_free(gx);
    free_all(in, 2);
    tg_tgf_free(t);
    tg_ctx_free(ctx);
}

/* The fuzz_tgf seeds (tests/fuzz/corpus_tgf) serve only when they get
 * past the preamble, the header and the array table. Read as the fuzz
 * target reads them (tests/fuzz/fuzz_tgf.c: a seed whose byte 63 is odd,
 * the _nocrc, _fixcrc and regress_ ones, gets its preamble and header
 * checksums written and its reserved words zeroed, and the other
 * checksums are skipped; tgc refuses such a file as it is), each one
 * loads and exports a graph that loads again, or is refused in a graph
 * section (or about one of its nodes: "schedule[3]: ..."), the part its
 * finding was about. A reader check that stops
 * seeds earlier shows here (three had stray bytes in unused shape slots
 * of the array table, which the reader refuses since it checks them). */
static void seed_wr32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_fuzz_seeds_reach_graph_sections(void **state) {
    (void)state;
    const char *dname = TG_TEST_DATA "/../fuzz/corpus_tgf";
    DIR *d = opendir(dname);
    assert_non_null(d);
    struct dirent *de;
    int n = 0, loaded = 0;
    while ((de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        if (nl < 5 || strcmp(de->d_name + nl - 4, ".tgf")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dname, de->d_name);
        size_t size;
        unsigned char *buf = tu_read_file(path, &size);
        assert_non_null(buf);
        tg_tgf_fuzz_no_checksums = size >= 64 && (buf[63] & 1);
        if (tg_tgf_fuzz_no_checksums) {
            uint64_t hlen = 0;
            for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[24 + i];
            if (hlen <= size - 64) seed_wr32(buf + 48, tg_crc32c(0, buf + 64, (size_t)hlen));
            memset(buf + 52, 0, 4);
            memset(buf + 60, 0, 4);
            seed_wr32(buf + 56, tg_crc32c(0, buf, 56));
        }
        tg_ctx *ctx = tg_ctx_new();
        tg_tgf *t = tg_tgf_load_buffer(buf, size, de->d_name, NULL, ctx);
        tg_tgf_fuzz_no_checksums = false;
        const char *m = tg_ctx_message(ctx);
        if (!t && !strstr(m, ": graph section: ") && !strstr(m, ": schedule["))
            fail_msg("seed %s stops before the graph sections: %s", de->d_name, m);
        for (int i = 0; t && i < tg_tgf_function_count(t); i++) {
            char *s = tg_tgf_export(t, i, ctx);
            if (!s) fail_msg("seed %s: export: %s", de->d_name, tg_ctx_message(ctx));
            tg_graph *g = tg_graph_load_string(s, strlen(s), NULL, "export", ctx);
            if (!g) fail_msg("seed %s: the export does not load: %s", de->d_name, tg_ctx_message(ctx));
            tg_graph_free(g);
            tg_string_free(s);
        }
        loaded += t != NULL;
        n++;
        tg_tgf_free(t);
        tg_ctx_free(ctx);
        free(buf);
    }
    closedir(d);
    printf("  %d seeds, %d load\n", n, loaded);
    assert_true(n >= 20);
}

static void test_copy_swap_and_call_n(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(GRAPH);
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, "train", ctx), NULL, ctx);
    tg_array *x = vec3(1, 1, 1), *w0 = vec3(10, 20, 30);
    const char *ids[1] = {"w"};
    const tg_array *vals[1] = {w0};
    tg_function *c = tg_function_copy(f, ids, vals, 1, ctx);
    if (!c) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *shared = tg_function_copy(f, NULL, NULL, 0, ctx);
    assert_non_null(shared);
    /* Both keep f's optimizer profile, as they keep its rewrite record
     * (tgprof prints it): they lost it. */
    assert_int_equal(tg_function_rewrite_count(c), tg_function_rewrite_count(f));
    same_profile(f, c, true);
    same_profile(f, shared, true);
    /* The swapped copy starts from (10, 20, 30): 60 + 0.25. */
    double v = call1(c, x);
    assert_true(v == 60.25);
    /* f is untouched by the swapped copy's update: 1 + 2 + 3 + 0.25. */
    v = call1(f, x);
    assert_true(v == 6.25);
    /* The unswapped copy shares f's w, which f just updated to
     * w * 0.5 + 1 = (1.5, 2, 2.5): 6 + 0.25. */
    v = call1(shared, x);
    assert_true(v == 6.25);
    /* call_n: 3 more calls of c, by hand: w goes (6, 11, 16) ->
     * (4, 6.5, 9) -> (3, 4.25, 5.5) -> (2.5, 3.125, 3.75); the third call
     * reads (3, 4.25, 5.5): 12.75 + 0.25. */
    tg_array *out = NULL;
    assert_int_equal(tg_function_call_n(c, &x, &out, 3, ctx), 0);
    assert_true(tg_array_get_flat(out, 0) == 13.0);
    const tg_array *wc = tg_function_shared_get(c, "w");
    assert_true(tg_array_get_flat(wc, 0) == 2.5 && tg_array_get_flat(wc, 1) == 3.125 &&
                tg_array_get_flat(wc, 2) == 3.75);
    tg_array_free(out);
    /* Bad swaps. */
    const char *bad_id[1] = {"nope"};
    assert_null(tg_function_copy(f, bad_id, vals, 1, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_ENOTFOUND);
    int64_t s2[1] = {2};
    double d2[2] = {1, 2};
    tg_array *w2 = tu_f64(1, s2, d2);
    const tg_array *bad_val[1] = {w2};
    assert_null(tg_function_copy(f, ids, bad_val, 1, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_ESHAPE);
    assert_string_equal(tg_ctx_message(ctx),
                        "swap: shared variable 'w' is float64[3], got an array of shape (2,) (dimension 0)");
    /* a safe cast is taken (int8 into float64; every dtype casts to
     * float64 safely, as in NumPy: test_copy_unfolded has an unsafe one) */
    int64_t s3[1] = {3};
    tg_array *i8 = tg_array_new(TG_INT8, 1, s3);
    ((int8_t *)tg_array_data(i8))[0] = 4, ((int8_t *)tg_array_data(i8))[1] = 5, ((int8_t *)tg_array_data(i8))[2] = 6;
    const tg_array *i8_val[1] = {i8};
    tg_function *ci = tg_function_copy(f, ids, i8_val, 1, ctx);
    if (!ci) fail_msg("%s", tg_ctx_message(ctx));
    const tg_array *wi = tg_function_shared_get(ci, "w");
    assert_int_equal(wi->dtype, TG_FLOAT64);
    assert_true(tg_array_get_flat(wi, 0) == 4 && tg_array_get_flat(wi, 2) == 6);
    tg_function_free(ci);
    const char *twice[2] = {"w", "w"};
    const tg_array *two_vals[2] = {w0, w0};
    assert_null(tg_function_copy(f, twice, two_vals, 2, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    const char *no_id[1] = {NULL};
    assert_null(tg_function_copy(f, no_id, vals, 1, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    const tg_array *no_val[1] = {NULL};
    assert_null(tg_function_copy(f, ids, no_val, 1, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_EINVAL);
    /* tg_function_shared_set checks as the copy does */
    assert_int_equal(tg_function_shared_set(f, "w", w2, ctx), TG_ESHAPE);
    assert_string_equal(tg_ctx_message(ctx),
                        "shared variable 'w' is float64[3], got an array of shape (2,) (dimension 0)");
    assert_int_equal(tg_function_shared_set(f, "w", NULL, ctx), TG_EINVAL);
    assert_int_equal(tg_function_shared_set(f, NULL, w0, ctx), TG_EINVAL);
    assert_null(tg_function_shared_get(f, NULL));
    assert_int_equal(tg_function_shared_set(f, "w", i8, ctx), TG_OK);
    assert_true(tg_array_get_flat(tg_function_shared_get(f, "w"), 1) == 5);
    /* accessors out of range */
    assert_null(tg_function_input_shape(f, 1));
    assert_int_equal(tg_function_input_ndim(f, -1), -1);
    assert_int_equal(tg_function_input_dtype(f, 7), TG_DTYPE_INVALID);
    assert_null(tg_function_node_op(f, -1));
    assert_null(tg_function_node_label(f, tg_function_node_count(f)));
    assert_int_equal(tg_function_node_ninputs(f, -1), -1);
    assert_int_equal(tg_function_node_noutputs(f, 1 << 20), -1);
    tg_array_free(i8);
    assert_int_not_equal(tg_function_call_n(c, &x, &out, 0, ctx), 0);
    tg_array_free(w2);
    tg_array_free(x);
    tg_array_free(w0);
    tg_function_free(c);
    tg_function_free(shared);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* A file keeps one value per shared variable. Functions holding two
 * states of one were saved as one, the other lost without a word: train
 * from one load of GRAPH and predict from another, or train with a copy
 * of itself whose w is swapped. Refused now (TG_EINVAL, naming both and
 * the variable), and the file that was there stays; the same functions
 * from one load still save. */
static void test_save_two_states_refused(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g1 = tu_load(GRAPH), *g2 = tu_load(GRAPH);
    tg_function *train = tg_function_compile(g1, tg_graph_function_find(g1, "train", ctx), NULL, ctx);
    tg_function *pred2 = tg_function_compile(g2, tg_graph_function_find(g2, "predict", ctx), NULL, ctx);
    tg_function *pred1 = tg_function_compile(g1, tg_graph_function_find(g1, "predict", ctx), NULL, ctx);
    assert_true(train && pred1 && pred2);
    tg_function *ok[2] = {train, pred1};
    if (tg_tgf_save(path_in("two.tgf"), ok, 2, NULL, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    size_t len0;
    char *before = tu_read_file(path_in("two.tgf"), &len0);
    tg_array *x = vec3(1, 1, 1);
    (void)call1(train, x); /* train's w moves on; predict's of g2 does not */
    tg_function *mixed[2] = {train, pred2};
    assert_int_equal(tg_tgf_save(path_in("two.tgf"), mixed, 2, NULL, ctx), TG_EINVAL);
    assert_string_equal(tg_ctx_message(ctx),
                        "tg_tgf_save: functions 'train' and 'predict' hold two states of shared variable 'w' "
                        "(compiled from two loads of the graph, or a copy with it swapped); a file keeps one: "
                        "save them to separate files");
    const char *ids[1] = {"w"};
    tg_array *w0 = vec3(10, 20, 30);
    const tg_array *vals[1] = {w0};
    tg_function *swapped = tg_function_copy(pred1, ids, vals, 1, ctx);
    assert_non_null(swapped);
    tg_function *with_copy[2] = {train, swapped};
    assert_int_equal(tg_tgf_save(path_in("two.tgf"), with_copy, 2, NULL, ctx), TG_EINVAL);
    assert_non_null(strstr(tg_ctx_message(ctx), "'w'"));
    size_t len1;
    char *after = tu_read_file(path_in("two.tgf"), &len1);
    assert_true(len0 == len1 && !memcmp(before, after, len0));
    free(before);
    free(after);
    tg_array_free(w0);
    tg_array_free(x);
    tg_function_free(swapped);
    tg_function_free(train);
    tg_function_free(pred1);
    tg_function_free(pred2);
    tg_graph_free(g1);
    tg_graph_free(g2);
    tg_ctx_free(ctx);
}

/* An SGD step in float32 compiled without constant folding: the gemm
 * rewrite reads W + neg(0.01) * (x^T x), and neg's 0.01 is a constant the
 * file wrote weak. A copy loads f's optimized graph from its text, where
 * that constant was written bare again: a weak float alone is float64,
 * and the copy refused gemm's float64 alpha (TG_ETYPE) though f ran. A
 * constant a rewrite hands to a new reader is now written with its
 * dtype. By hand: W = [[1, 2], [3, 4]], x = [[1, 0], [0, 2]], x^T x =
 * [[1, 0], [0, 4]]; out = sum(W) before the update. */
static void test_copy_unfolded(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load_sq(
        "{'format':'tg-graph','version':1,'variables':["
        "{'id':'W','type':{'dtype':'float32','shape':[2,2]},'shared':{'data':[[1,2],[3,4]]}},"
        "{'id':'x','type':{'dtype':'float32','shape':[2,2]}}],"
        "'nodes':[{'op':'transpose','inputs':['x'],'outputs':['xt']},"
        "{'op':'dot','inputs':['xt','x'],'outputs':['gW']},"
        "{'op':'mul','inputs':[{'value':0.01},'gW'],'outputs':['step']},"
        "{'op':'sub','inputs':['W','step'],'outputs':['W_next']},"
        "{'op':'sum','inputs':['W'],'outputs':['out'],'attrs':{'axis':null}}],"
        "'functions':{'train':{'inputs':['x'],'outputs':['out'],'updates':{'W':'W_next'}}}}");
    const char *exc[] = {"constant_folding", NULL};
    tg_compile_options o = {.exclude = exc};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    bool gemm = false;
    for (int k = 0; k < tg_function_node_count(f); k++) gemm |= !strcmp(tg_function_node_op(f, k), "gemm");
    assert_true(gemm);
    int64_t shp[2] = {2, 2};
    tg_array *x = tg_array_new(TG_FLOAT32, 2, shp), *out = NULL;
    float *xd = tg_array_data(x);
    xd[0] = 1, xd[1] = 0, xd[2] = 0, xd[3] = 2;
    if (tg_function_call(f, &x, &out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    assert_true(tg_array_get_flat(out, 0) == 10);
    tg_array_free(out);
    tg_function *c = tg_function_copy(f, NULL, NULL, 0, ctx);
    if (!c) fail_msg("%s", tg_ctx_message(ctx));
    /* the copy shares W, updated once: 0.99 + 2 + 3 + 3.96 */
    if (tg_function_call(c, &x, &out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    assert_float_equal(tg_array_get_flat(out, 0), 9.95, 2e-6);
    tg_array_free(out);
    const tg_array *w = tg_function_shared_get(f, "W");
    float want[4] = {1 - 0.02f, 2, 3, 4 - 0.08f};
    for (int i = 0; i < 4; i++) assert_float_equal(tg_array_get_flat(w, i), want[i], 1e-6);
    /* float64 into the float32 W is not a safe cast */
    tg_array *w64 = tu_f64(2, shp, (double[]){1, 2, 3, 4});
    assert_int_equal(tg_function_shared_set(f, "W", w64, ctx), TG_ETYPE);
    assert_string_equal(tg_ctx_message(ctx),
                        "shared variable 'W' is float32[2, 2]: a float64 value cannot be cast to it safely");
    tg_array_free(w64);
    tg_function_free(c);
    tg_function_free(f);
    tg_array_free(x);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* In-place hints from the file (an optimized graph exported and loaded
 * again) that merging makes stale: the two copies of maximum(x, x) are
 * one result after merge, which both readers claimed to overwrite. The
 * optimizer drops the hints that no longer hold, so the function saves
 * and restores (it did not load: "input 't' is overwritten in place but
 * read elsewhere too"; found by fuzz_run), and computes what the
 * unoptimized one does: y = max(x, x) + 1.5, e = exp(max(x, x)), by hand
 * for x = [0, 1, 2]. */
static void test_stale_inplace_hints_dropped(void **state) {
    (void)state;
    const char *json =
        "{\"format\": \"tg-graph\", \"version\": 1,"
        " \"variables\": [{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [3]}}],"
        " \"nodes\": ["
        "  {\"op\": \"maximum\", \"inputs\": [\"x\", \"x\"], \"outputs\": [\"t\"]},"
        "  {\"op\": \"add\", \"inputs\": [\"t\", {\"value\": 1.5}], \"outputs\": [\"y\"], \"inplace\": {\"0\": 0}},"
        "  {\"op\": \"maximum\", \"inputs\": [\"x\", \"x\"], \"outputs\": [\"t2\"]},"
        "  {\"op\": \"exp\", \"inputs\": [\"t2\"], \"outputs\": [\"e\"], \"inplace\": {\"0\": 0}}],"
        " \"functions\": {\"f\": {\"inputs\": [\"x\"], \"outputs\": [\"y\", \"e\"]}}}";
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    const char *presets[2] = {"fast_compile", "fast_run"};
    for (int p = 0; p < 2; p++) {
        tg_compile_options o = {.preset = presets[p]};
        tg_function *f = tg_function_compile(g, 0, &o, ctx);
        if (!f) fail_msg("%s", tg_ctx_message(ctx));
        /* merged: one maximum left */
        int nmax = 0;
        for (int i = 0; i < tg_function_node_count(f); i++) nmax += !strcmp(tg_function_node_op(f, i), "maximum");
        assert_int_equal(nmax, 1);
        tg_tgf_save_info info = {.source = g, .options = &o};
        tg_tgf *t = round_trip("stale.tgf", f, &info, presets[p], ctx);
        tg_array *x = vec3(0, 1, 2), *out[2] = {NULL, NULL}, *back[2] = {NULL, NULL};
        if (tg_function_call(f, &x, out, ctx) || tg_function_call(tg_tgf_function(t, 0), &x, back, ctx))
            fail_msg("%s", tg_ctx_message(ctx));
        for (int i = 0; i < 3; i++) {
            tu_assert_near(tg_array_get_flat(out[0], i), i + 1.5, 0);
            tu_assert_near(tg_array_get_flat(out[1], i), exp((double)i), 1e-15 * exp((double)i));
        }
        for (int k = 0; k < 2; k++) {
            assert_true(tg_array_equal(out[k], back[k]));
            tg_array_free(out[k]);
            tg_array_free(back[k]);
        }
        tg_array_free(x);
        tg_tgf_free(t);
        tg_function_free(f);
    }
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* A conv2d whose input lengths are unknown until run time: its output
 * type had -2 for the unknown lengths (the "unknown" of the length
 * helper, not of a type), which a restore refuses as a negative length
 * ("'y': a negative length"; found by fuzz_run). Saved, restored and
 * called, it gives the 1x1x2x2 sums of a 2x2 kernel of ones over 3x3
 * inputs 0..8: 8, 12, 20, 24 by hand. */
static void test_unknown_conv_lengths_restore(void **state) {
    (void)state;
    const char *json =
        "{\"format\": \"tg-graph\", \"version\": 1,"
        " \"variables\": [{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [null, null, null, null]}},"
        "  {\"id\": \"w\", \"type\": {\"dtype\": \"float64\", \"shape\": [null, null, null, null]}}],"
        " \"nodes\": [{\"op\": \"conv2d\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]}],"
        " \"functions\": {\"f\": {\"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]}}}";
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf_save_info info = {.source = g};
    tg_tgf *t = round_trip("conv.tgf", f, &info, "conv2d", ctx);
    int64_t xs[4] = {1, 1, 3, 3}, ws[4] = {1, 1, 2, 2};
    double xd[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, wd[4] = {1, 1, 1, 1}, want[4] = {8, 12, 20, 24};
    tg_array *in[2] = {tu_f64(4, xs, xd), tu_f64(4, ws, wd)}, *y = NULL;
    if (tg_function_call(tg_tgf_function(t, 0), in, &y, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    assert_int_equal(tg_array_size(y), 4);
    for (int i = 0; i < 4; i++) tu_assert_near(tg_array_get_flat(y, i), want[i], 0);
    tg_array_free(y);
    for (int i = 0; i < 2; i++) tg_array_free(in[i]);
    tg_tgf_free(t);
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* Every prefix of a file, and the file with any one byte of its preamble
 * and header changed, is refused with one line naming it; nothing
 * crashes or leaks (the ASan build runs this too). */
static void test_damaged_files_refused(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *fs[2];
    save_graph("c.tgf", &g, fs);
    size_t n;
    unsigned char *b = tu_read_file(path_in("c.tgf"), &n);
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf *t = tg_tgf_load_buffer(b, n, "c.tgf", NULL, ctx);
    assert_non_null(t);
    tg_tgf_free(t);
    for (size_t len = 0; len < n; len += len < 200 ? 1 : 61) {
        t = tg_tgf_load_buffer(b, len, "c.tgf", NULL, ctx);
        if (t) fail_msg("a file cut to %zu of %zu bytes loaded", len, n);
        const char *m = tg_ctx_message(ctx);
        assert_true(!strncmp(m, "c.tgf: ", 7));
        assert_null(strchr(m, '\n'));
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[24 + i];
    for (size_t i = 0; i < 64 + hlen; i += i < 64 ? 1 : 13) {
        b[i] ^= 0x20;
        t = tg_tgf_load_buffer(b, n, "c.tgf", NULL, ctx);
        if (t) fail_msg("a file with byte %zu changed loaded", i);
        b[i] ^= 0x20;
    }
    /* A flipped bit in the data: the array's checksum. */
    uint64_t doff = 0;
    for (int i = 7; i >= 0; i--) doff = doff << 8 | b[32 + i];
    b[doff] ^= 1;
    assert_null(tg_tgf_load_buffer(b, n, "c.tgf", NULL, ctx));
    assert_non_null(strstr(tg_ctx_message(ctx), "checksum"));
    /* The same file on disk, mapped and read into memory. */
    FILE *fp = fopen(path_in("c_bad.tgf"), "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
    for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
        tg_tgf_load_options lo = {.no_mmap = no_mmap};
        assert_null(tg_tgf_load(path_in("c_bad.tgf"), &lo, ctx));
        assert_non_null(strstr(tg_ctx_message(ctx), "checksum"));
        assert_null(strchr(tg_ctx_message(ctx), '\n'));
    }
    free(b);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}

const char *openblas_get_config(void);

/* A file built with another BLAS loads and runs, with one warning line
 * that names both BLAS configurations (issue 6's restore rules); one
 * whose BLAS differs from this build's only by USE_OPENMP (the pthreads
 * and OpenMP builds of one OpenBLAS: the same kernels) loads without one. */
static void test_other_blas(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *fs[2];
    save_graph("blas.tgf", &g, fs);
    size_t n;
    unsigned char *orig = tu_read_file(path_in("blas.tgf"), &n), *b = malloc(n);
    assert_non_null(b);
    tg_ctx *ctx = tg_ctx_new();
    const char *mine = openblas_get_config();
    tg_tgf *t = tg_tgf_load_buffer(orig, n, "blas.tgf", NULL, ctx);
    assert_non_null(t);
    assert_null(tg_tgf_warning(t));
    tg_tgf_free(t);

    memcpy(b, orig, n);
    tu_tgf_patch_header(b, n, "\"blas\":\"", '"', "OpenBLAS 0.2.9 NO_AFFINITY generic");
    t = tg_tgf_load_buffer(b, n, "blas.tgf", NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    const char *w = tg_tgf_warning(t);
    char want[512];
    snprintf(want, sizeof want, "(this build has '%s')", mine);
    const char *pre = "blas.tgf: loaded anyway, running on the CPU kernels; built with BLAS 'OpenBLAS 0.2.9 "
                      "NO_AFFINITY generic";
    if (!w || strncmp(w, pre, strlen(pre)) || !strstr(w, want) || strchr(w, '\n'))
        fail_msg("warning: %s", w ? w : "(none)");
    tg_array *x = vec3(1, 1, 1);
    assert_true(call1(tg_tgf_function(t, 1), x) == 6.25); /* sum(w * x) + c, w = 1, 2, 3 */
    tg_tgf_free(t);

    /* this build's words without USE_OPENMP, or a word less than it */
    const char *omp = strstr(mine, "USE_OPENMP ");
    if (omp) {
        char other[512];
        snprintf(other, sizeof other, "%.*s%s", (int)(omp - mine), mine, omp + 11);
        memcpy(b, orig, n);
        tu_tgf_patch_header(b, n, "\"blas\":\"", '"', other);
        t = tg_tgf_load_buffer(b, n, "blas.tgf", NULL, ctx);
        if (!t) fail_msg("%s", tg_ctx_message(ctx));
        if (tg_tgf_warning(t)) fail_msg("'%s' against '%s': %s", other, mine, tg_tgf_warning(t));
        assert_true(call1(tg_tgf_function(t, 1), x) == 6.25);
        tg_tgf_free(t);
    }
    const char *last = strrchr(mine, ' ');
    if (last) {
        char fewer[512];
        snprintf(fewer, sizeof fewer, "%.*s", (int)(last - mine), mine);
        memcpy(b, orig, n);
        tu_tgf_patch_header(b, n, "\"blas\":\"", '"', fewer);
        t = tg_tgf_load_buffer(b, n, "blas.tgf", NULL, ctx);
        assert_non_null(t);
        assert_non_null(tg_tgf_warning(t));
        assert_non_null(strstr(tg_tgf_warning(t), "built with BLAS"));
        tg_tgf_free(t);
    }
    tg_array_free(x);
    free(b);
    free(orig);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}

/* The preamble's checksum after a change to bytes 0-55. */
static void fix_preamble(unsigned char *b) {
    uint32_t c = tg_crc32c(0, b, 56);
    for (int i = 0; i < 4; i++) b[56 + i] = (unsigned char)(c >> 8 * i);
}

/* b (n bytes) is refused with one line naming the file and `field`. */
static void refused(const unsigned char *b, size_t n, const char *field, tg_ctx *ctx) {
    tg_tgf *t = tg_tgf_load_buffer(b, n, "fx.tgf", NULL, ctx);
    if (t) fail_msg("loaded with %s changed", field);
    const char *m = tg_ctx_message(ctx);
    if (strncmp(m, "fx.tgf: ", 8) || !strstr(m, field) || strchr(m, '\n'))
        fail_msg("%s: '%s'", field, m);
}

/* The fields schemas/tgf.md fixes are checked, with valid checksums
 * (one line naming the file and the field for each): the preamble's
 * flags (none is defined), the header's version against the preamble's
 * and the layout it names (version 1 keeps its arrays in the header; a
 * version 2 file has version 2 sections), the fingerprint (required; its
 * byte order "little": the arrays are read as little-endian), and the
 * array table's zero bytes (2-7, 92-95, the unused lengths). */
static void test_fixed_fields_refused(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *fs[2];
    save_graph("fx.tgf", &g, fs);
    size_t n;
    unsigned char *orig = tu_read_file(path_in("fx.tgf"), &n), *b = malloc(n);
    assert_non_null(b);
    tg_ctx *ctx = tg_ctx_new();
    memcpy(b, orig, n);
    b[12] = 1;
    fix_preamble(b);
    refused(b, n, "preamble: flags 0x1", ctx);
    memcpy(b, orig, n);
    tu_tgf_patch_header(b, n, "\"version\":", ',', "2");
    refused(b, n, "header.version: 2, but the preamble says format version 4", ctx);
    memcpy(b, orig, n);
    b[8] = 1;
    tu_tgf_patch_header(b, n, "\"version\":", ',', "1");
    refused(b, n, "header.array_table: not in a format version 1 file", ctx);
    memcpy(b, orig, n);
    b[8] = 2;
    tu_tgf_patch_header(b, n, "\"version\":", ',', "2");
    refused(b, n, "graph_section: a format version 4 section in a version 2 file", ctx);
    memcpy(b, orig, n);
    b[8] = 3;
    tu_tgf_patch_header(b, n, "\"version\":", ',', "3");
    refused(b, n, "graph_section: a format version 4 section in a version 3 file", ctx);
    memcpy(b, orig, n);
    tu_tgf_patch_header(b, n, "\"byte_order\":\"", '"', "middle");
    refused(b, n, "header.fingerprint.byte_order: 'middle'", ctx);
    memcpy(b, orig, n);
    tu_tgf_patch_header(b, n, "\"finger", '"', "prinx");
    refused(b, n, "header.fingerprint: expected an object", ctx);
    /* The header against tgf-header.schema.json: no key it does not
     * list, at any level; each of its type; the required ones present
     * (renamed to a key that comes later in the same object, which the
     * parse keeps in its place). */
    static const struct {
        const char *key;
        char end;
        const char *with, *field;
    } keys[] = {
        {"\"origin", '"', "ax", "header: unknown key 'originax'"},
        {"\"compile_", '"', "secondz", "header.functions[0]: unknown key 'compile_secondz'"},
        {"\"tg_vers", '"', "iox", "header.fingerprint: unknown key 'tg_versiox'"},
        {"\"preset\":", ',', "7", "header.options.preset: expected a string"},
        {"\"backends\":[", ']', "1", "header.fingerprint.backends: expected an array of strings"},
        {"\"backends\":[", ']', "", "header.fingerprint.backends: expected at least one backend"},
        {"\"compile_seconds\":", ',', "\"s\"", "header.functions[0].compile_seconds: expected a number"},
        {"\"no_gc\":", '}', "0", "header.options.no_gc: expected true or false"},
        {"\"fingerprint\":{\"", '"', "byte_order", "header.fingerprint.tg_version: missing (a string)"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        memcpy(b, orig, n);
        tu_tgf_patch_header(b, n, keys[i].key, keys[i].end, keys[i].with);
        refused(b, n, keys[i].field, ctx);
    }

    /* The array table's record 0 (its checksum not checked here: the
     * refusal is the zero bytes'). */
    uint64_t hlen = 0, doff = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | orig[24 + i];
    for (int i = 7; i >= 0; i--) doff = doff << 8 | orig[32 + i];
    char *h = strndup((const char *)orig + 64, hlen);
    const char *at = strstr(h, "\"array_table\":{\"offset\":");
    assert_non_null(at);
    unsigned long long toff = strtoull(at + strlen("\"array_table\":{\"offset\":"), NULL, 10);
    free(h);
    unsigned char *rec = b + doff + toff;
    static const struct {
        int byte;
        const char *field;
    } pads[] = {{2, "array table[0]: bytes 2-7 are not zero"},
                {7, "array table[0]: bytes 2-7 are not zero"},
                {92, "array table[0]: bytes 92-95 are not zero"},
                {95, "array table[0]: bytes 92-95 are not zero"},
                {8 + 8 * 7, "array table[0]: shape[7] is not zero"}};
    tg_tgf_fuzz_no_checksums = true;
    memcpy(b, orig, n);
    tg_tgf *t = tg_tgf_load_buffer(b, n, "fx.tgf", NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf_free(t);
    assert_true(rec[1] < 8);
    for (size_t i = 0; i < sizeof pads / sizeof *pads; i++) {
        memcpy(b, orig, n);
        rec[pads[i].byte] = 0x40;
        refused(b, n, pads[i].field, ctx);
    }
    tg_tgf_fuzz_no_checksums = false;
    free(b);
    free(orig);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}

static int hook_fd = -1;
static void stop_after_first_write(size_t written) {
    if (written < (1u << 20)) return;
    /* Tell the parent a part of the file is on disk, then wait to die. */
    char c = 'w';
    if (write(hook_fd, &c, 1) != 1) _exit(3);
    for (;;) pause();
}

/* How many entries of the test's folder are named name, or, for a name
 * ending in '*', begin with what is before it. */
static int count_named(const char *name) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = strlen(name);
    bool prefix = n && name[n - 1] == '*';
    int c = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (prefix ? !strncmp(e->d_name, name, n - 1) : !strcmp(e->d_name, name)) c++;
    closedir(d);
    return c;
}

static void write_x(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputc('x', f);
    assert_int_equal(fclose(f), 0);
}

/* Set a file's times to `seconds` ago. */
static void age_file(const char *path, long seconds) {
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= seconds;
    ts[1] = ts[0];
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* kill -9 in the middle of a save leaves the previous file as it was,
 * and the next save but one, an hour on, removes its temporary. */
static void test_kill_during_save_keeps_old_file(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *fs[2];
    save_graph("k.tgf", &g, fs);
    size_t n0;
    unsigned char *before = tu_read_file(path_in("k.tgf"), &n0);
    tg_ctx *ctx = tg_ctx_new();
    /* A large constant makes the file big: a graph with 4 MiB of data. */
    char *json = NULL;
    size_t jl = 0;
    FILE *m = open_memstream(&json, &jl);
    fprintf(m, "{\"format\": \"tg-graph\", \"version\": 1, \"variables\": ["
               "{\"id\": \"w\", \"type\": {\"dtype\": \"float64\", \"shape\": [524288]},"
               " \"shared\": {\"data\": [");
    for (int i = 0; i < 524288; i++) fprintf(m, "%s%d", i ? "," : "", i % 1000);
    fprintf(m, "]}}], \"nodes\": [{\"op\": \"mul\", \"inputs\": [\"w\", {\"value\": 2}],"
               " \"outputs\": [\"y\"]}]}");
    fclose(m);
    tg_graph *bg = tu_load(json);
    free(json);
    tg_function *bf = tg_function_compile(bg, 0, NULL, ctx);
    assert_non_null(bf);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        hook_fd = p[1];
        tg_tgf_write_hook = stop_after_first_write;
        tg_tgf_save(path_in("k.tgf"), &bf, 1, NULL, ctx);
        _exit(4); /* the hook should have stopped us */
    }
    close(p[1]);
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* The old file is byte for byte what it was and still loads. */
    size_t n1;
    unsigned char *after = tu_read_file(path_in("k.tgf"), &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    tg_tgf *t = tg_tgf_load(path_in("k.tgf"), NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf_free(t);
    /* The killed save's temporary is there. Beside it, two hours old,
     * names the sweep must leave: a live process's (pid 1), another
     * file's, and two not of the form. */
    char killed[64], live[64];
    snprintf(killed, sizeof killed, "k.tgf.tmp.%ld.*", (long)pid);
    assert_int_equal(count_named(killed), 1);
    snprintf(live, sizeof live, "k.tgf.tmp.%d.0", 1);
    const char *keep[] = {live, "j.tgf.tmp.999999999.0", "k.tgf.tmp.999999999.x", "k.tgfx.tmp.999999999.0"};
    for (int i = 0; i < 4; i++) write_x(path_in(keep[i]));
    for (int i = 0; i < 4; i++) age_file(path_in(keep[i]), 7200);
    /* A save that completes replaces the file; the temporary, fresh, stays
     * (its writer could be in another PID namespace or on another machine),
     * and goes at the first save once it is an hour old. */
    assert_int_equal(tg_tgf_save(path_in("k.tgf"), &bf, 1, NULL, ctx), 0);
    assert_int_equal(count_named(killed), 1);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, killed, strlen(killed) - 1)) age_file(path_in(e->d_name), 3700);
    closedir(d);
    write_x(path_in("k.tgf.tmp.999999999.7")); /* dead, but fresh */
    assert_int_equal(tg_tgf_save(path_in("k.tgf"), &bf, 1, NULL, ctx), 0);
    assert_int_equal(count_named(killed), 0);
    assert_int_equal(count_named("k.tgf.tmp.999999999.7"), 1);
    for (int i = 0; i < 4; i++) assert_int_equal(count_named(keep[i]), 1);
    t = tg_tgf_load(path_in("k.tgf"), NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_array *out = NULL;
    assert_int_equal(tg_function_call(tg_tgf_function(t, 0), NULL, &out, ctx), 0);
    assert_true(tg_array_get_flat(out, 524287) == 2.0 * (524287 % 1000));
    tg_array_free(out);
    tg_tgf_free(t);
    free(before);
    free(after);
    tg_function_free(bf);
    tg_graph_free(bg);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}

/* ---- graph sections written by hand ---- */

/* A graph section built field by field (schemas/tgf.md), to reach the
 * decoder's checks with what the encoder never writes. */
typedef struct sec {
    unsigned char b[4096];
    size_t n;
    const char *strs[32];
    uint32_t nstrs;
} sec;

static void s8(sec *S, uint8_t v) { S->b[S->n++] = v; }
static void s32(sec *S, uint32_t v) {
    for (int i = 0; i < 4; i++) s8(S, (uint8_t)(v >> (8 * i)));
}
static void s64(sec *S, uint64_t v) {
    s32(S, (uint32_t)v);
    s32(S, (uint32_t)(v >> 32));
}
/* The string's index in the table (strings are given up front). */
static uint32_t si(sec *S, const char *str) {
    for (uint32_t i = 0; i < S->nstrs; i++)
        if (!strcmp(S->strs[i], str)) return i;
    fail_msg("string '%s' not in the table", str);
    return 0;
}
#define NO 0xffffffffu
static void sec_begin(sec *S, const char *const *strs) {
    memset(S, 0, sizeof *S);
    memcpy(S->b, "TGG\x02", 4);
    S->n = 4;
    while (strs[S->nstrs]) S->strs[S->nstrs] = strs[S->nstrs], S->nstrs++;
    s32(S, S->nstrs);
    for (uint32_t i = 0; i < S->nstrs; i++) {
        s32(S, (uint32_t)strlen(S->strs[i]));
        memcpy(S->b + S->n, S->strs[i], strlen(S->strs[i]));
        S->n += strlen(S->strs[i]);
    }
}
/* flags: 1 weak, 2 inline, 4 declared, 8 type given; len -1: unknown. */
static void sec_var(sec *S, const char *id, int kind, int flags, tg_dtype dt, int nd,
                    const int64_t *shape, uint32_t k, uint32_t tk) {
    s32(S, si(S, id));
    s32(S, NO);
    s8(S, (uint8_t)kind);
    s8(S, (uint8_t)flags);
    s8(S, (uint8_t)dt);
    s8(S, (uint8_t)nd);
    for (int d = 0; d < nd; d++) s64(S, (uint64_t)shape[d]);
    s32(S, k);
    s32(S, tk);
}
/* A node of one output, no attrs, no trace, no origins; ip: the input
 * its output overwrites, or -1. */
static void sec_node_an(sec *S, const char *op, uint32_t attrs, uint32_t name, int nin, const uint32_t *in,
                        uint32_t out, int ip) {
    s32(S, si(S, op));
    s32(S, attrs);
    s32(S, name);
    s32(S, (uint32_t)nin);
    for (int k = 0; k < nin; k++) s32(S, in[k]);
    s32(S, 1);
    s32(S, out);
    s8(S, ip >= 0);
    if (ip >= 0) s8(S, (uint8_t)ip);
    s32(S, 0);
    s32(S, NO);
}
static void sec_node(sec *S, const char *op, int nin, const uint32_t *in, uint32_t out, int ip) {
    sec_node_an(S, op, NO, NO, nin, in, out, ip);
}
/* The function (inputs, one output declared as its own id), no updates,
 * an empty record. */
static void sec_end(sec *S, int nin, const uint32_t *in, uint32_t out, const char *out_id) {
    s32(S, (uint32_t)nin);
    for (int k = 0; k < nin; k++) s32(S, in[k]);
    s32(S, 1);
    s32(S, out);
    s32(S, si(S, out_id));
    s32(S, 0);
    s32(S, 0);
    s32(S, 0);
}

/* The one node y = add(x, c) (variables 0, 1 -> 2) and the function
 * x -> y. */
static void sec_sum(sec *S) {
    static const uint32_t in2[2] = {0, 1}, in1[1] = {0};
    s32(S, 1);
    sec_node(S, "add", 2, in2, 2, -1);
    sec_end(S, 1, in1, 2, "y");
}

static tg_shared *sec_shared(void *ud, const char *id, const tg_type *type, tg_array *value,
                             tg_ctx *ctx) {
    (void)ud;
    (void)ctx;
    return tg_shared_new(id, type, value);
}

/* The bytes the library asks for, in all, while the hook is set. */
static size_t g_asked;
static void *asking_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (n == 0) {
        free(p);
        return NULL;
    }
    g_asked += n;
    return realloc(p, n);
}

/* Decode the n bytes of a section at b: the function graph, or NULL with
 * the message in msg; asked (unless NULL): the bytes the decoder asked
 * the allocator for. */
static tg_fgraph *decode_bytes(const unsigned char *b, size_t n, tg_array *const *arrays, int narrays,
                               size_t *asked, char *msg, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tgf_decoded d;
    tg_fgraph *fg = NULL;
    msg[0] = 0;
    g_asked = 0;
    if (asked) tg_set_allocator(asking_realloc, NULL);
    int rc = tgf_graph_decode(b, n, arrays, narrays, sec_shared, NULL, "t", &d, ctx);
    if (asked) {
        tg_set_allocator(NULL, NULL);
        *asked = g_asked;
    }
    if (rc) {
        snprintf(msg, size, "%s", tg_ctx_message(ctx));
    } else {
        fg = d.fg;
        for (int i = 0; i < fg->nout; i++) tg_free(d.out_ids[i]);
        tg_free(d.out_ids);
        tg_opt_record_free(&d.record);
        tg_free(d.strpool);
    }
    tg_ctx_free(ctx);
    return fg;
}

/* Decode S: the function graph, or NULL with the message in msg. */
static tg_fgraph *sec_decode(const sec *S, tg_array *const *arrays, int narrays, char *msg,
                             size_t size) {
    return decode_bytes(S->b, S->n, arrays, narrays, NULL, msg, size);
}

static tg_var *fg_var(tg_fgraph *fg, const char *id) {
    for (int i = 0; i < fg->nvars; i++)
        if (!strcmp(fg->vars[i]->id, id)) return fg->vars[i];
    fail_msg("no variable '%s'", id);
    return NULL;
}

/* What the JSON loader refuses the decoder refuses too: bool data other
 * than 0 and 1, a test value of a node output with no declared type, an
 * inline constant whose type leaves a length open. */
static void test_section_loader_rules(void **state) {
    (void)state;
    static const char *const strs[] = {"x", "c", "y", "add", "exp", NULL};
    int64_t s3[1] = {3}, open1[1] = {-1};
    double d3[3] = {1, 2, 3};
    tg_array *f3 = tu_f64(1, s3, d3), *b3 = tg_array_new(TG_BOOL, 1, s3);
    ((unsigned char *)tg_array_data(b3))[1] = 2;
    tg_array *arrays[2] = {f3, b3};
    char msg[512];
    uint32_t in1[1] = {0};
    sec S;
    /* bool data: a constant holding the byte 2 */
    sec_begin(&S, strs);
    s32(&S, 3);
    sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_BOOL, 1, s3, NO, NO);
    sec_var(&S, "c", TG_VAR_CONSTANT, 4 | 8, TG_BOOL, 1, s3, 1, NO);
    sec_var(&S, "y", TG_VAR_RESULT, 0, TG_BOOL, 1, s3, NO, NO);
    sec_sum(&S);
    assert_null(sec_decode(&S, arrays, 2, msg, sizeof msg));
    assert_non_null(strstr(msg, "bool data holds a byte other than 0 or 1"));
    /* an inline constant of type float64[?] */
    sec_begin(&S, strs);
    s32(&S, 3);
    sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
    sec_var(&S, "c", TG_VAR_CONSTANT, 2, TG_FLOAT64, 1, open1, 0, NO);
    sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 1, s3, NO, NO);
    sec_sum(&S);
    assert_null(sec_decode(&S, arrays, 2, msg, sizeof msg));
    assert_non_null(strstr(msg, "inline constant 'c' leaves a length of its type open"));
    /* the same declared (not inline) loads */
    sec_begin(&S, strs);
    s32(&S, 3);
    sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
    sec_var(&S, "c", TG_VAR_CONSTANT, 4 | 8, TG_FLOAT64, 1, open1, 0, NO);
    sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 1, s3, NO, NO);
    sec_sum(&S);
    tg_fgraph *fg = sec_decode(&S, arrays, 2, msg, sizeof msg);
    if (!fg) fail_msg("%s", msg);
    tg_fgraph_free(fg);
    /* a test value on an undeclared node output */
    sec_begin(&S, strs);
    s32(&S, 2);
    sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
    sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 1, s3, NO, 0);
    s32(&S, 1);
    sec_node(&S, "exp", 1, in1, 1, -1);
    sec_end(&S, 1, in1, 1, "y");
    assert_null(sec_decode(&S, arrays, 2, msg, sizeof msg));
    assert_non_null(strstr(msg, "'y' has a test value but no declared type"));
    /* an integer in a node's attrs past uint64 (2^70 in a composite's
     * body constant), which json-c clamps to 2^64 - 1: quoted as written,
     * as the JSON graph loader quotes it, with the node named */
    static const char *const cstrs[] = {
        "x", "y", "composite",
        "{\"body\":{\"variables\":[{\"id\":\"x0\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}},"
        "{\"id\":\"c0\",\"type\":{\"dtype\":\"int64\",\"shape\":[]},\"constant\":{\"dtype\":\"int64\","
        "\"shape\":[],\"data\":1180591620717411303424}}],\"nodes\":[{\"op\":\"add\",\"inputs\":[\"x0\","
        "\"c0\"],\"outputs\":[\"t0\"]}],\"inputs\":[\"x0\"],\"outputs\":[\"t0\"]}}",
        NULL};
    for (int huge = 0; huge < 2; huge++) {
        sec_begin(&S, cstrs);
        if (!huge) { /* the same with 7: it loads */
            char *d = memmem(S.b, S.n, "1180591620717411303424", 22);
            assert_non_null(d);
            memset(d, ' ', 22);
            d[21] = '7';
        }
        s32(&S, 2);
        sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_INT64, 1, s3, NO, NO);
        sec_var(&S, "y", TG_VAR_RESULT, 0, TG_INT64, 1, s3, NO, NO);
        s32(&S, 1);
        sec_node_an(&S, "composite", 3 /* the attrs string */, NO, 1, in1, 1, -1);
        sec_end(&S, 1, in1, 1, "y");
        fg = sec_decode(&S, arrays, 2, msg, sizeof msg);
        if (!huge) {
            if (!fg) fail_msg("%s", msg);
            tg_fgraph_free(fg);
            continue;
        }
        assert_null(fg);
        if (strcmp(msg, "t: schedule[0]: (composite -> y): attrs: the integer 1180591620717411303424 is "
                        "out of range (int64 and uint64 end at -2^63 and 2^64 - 1)"))
            fail_msg("%s", msg);
    }
    tg_array_free(f3);
    tg_array_free(b3);
}

/* Version 3 sections: a node's origin groups (only a composite's, rising
 * to its origin count) and the gradients' table after the passes. */
static void sec_v3(sec *S, const char *const *strs, int ngroups, const uint32_t *ends) {
    static const uint32_t in2[2] = {0, 1};
    int64_t s3[1] = {3};
    sec_begin(S, strs);
    S->b[3] = 0x03;
    s32(S, 3);
    sec_var(S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
    sec_var(S, "c", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
    sec_var(S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 1, s3, NO, NO);
    s32(S, 1);
    /* add(x, c) -> y standing for y.1 and y.2, a gradient's nodes */
    s32(S, si(S, "add"));
    s32(S, NO);
    s32(S, NO);
    s32(S, 2);
    s32(S, in2[0]);
    s32(S, in2[1]);
    s32(S, 1);
    s32(S, 2);
    s8(S, 0);
    s32(S, 0);
    s32(S, 2);
    s32(S, si(S, "y.1"));
    s32(S, si(S, "y.2"));
    s32(S, (uint32_t)ngroups);
    for (int k = 0; k < ngroups; k++) s32(S, ends[k]);
    sec_end(S, 2, in2, 2, "y");
}

static void test_section_version_3(void **state) {
    (void)state;
    static const char *const strs[] = {"x", "c", "y", "add", "y.1", "y.2", "g", "grad", "exp", NULL};
    char msg[512];
    sec S;
    /* no groups, and the table: y.1 is the expansion's own, y.2 from exp */
    sec_v3(&S, strs, 0, NULL);
    s32(&S, 2);
    s32(&S, si(&S, "y.1"));
    s32(&S, NO);
    s32(&S, NO);
    s32(&S, si(&S, "g"));
    s32(&S, si(&S, "grad"));
    s32(&S, si(&S, "y.2"));
    s32(&S, si(&S, "x"));
    s32(&S, si(&S, "exp"));
    s32(&S, si(&S, "g"));
    s32(&S, si(&S, "grad"));
    tg_ctx *ctx = tg_ctx_new();
    tgf_decoded d;
    if (tgf_graph_decode(S.b, S.n, NULL, 0, sec_shared, NULL, "t", &d, ctx))
        fail_msg("%s", tg_ctx_message(ctx));
    assert_int_equal(d.record.ngrads, 2);
    const tg_grad_origin *o = tg_opt_record_grad(&d.record, "y.2");
    assert_non_null(o);
    assert_string_equal(o->of, "x");
    assert_string_equal(o->of_op, "exp");
    assert_string_equal(o->by, "g");
    o = tg_opt_record_grad(&d.record, "y.1");
    assert_non_null(o);
    assert_string_equal(o->of, "");
    assert_null(tg_opt_record_grad(&d.record, "y"));
    char note[256];
    const char *keys[2] = {"y.1", "y.2"};
    tg_opt_record_grad_note(&d.record, keys, 2, note, sizeof note);
    assert_string_equal(note, "from grad g, differentiating x (exp)");
    tg_fgraph_free(d.fg);
    for (int i = 0; i < 1; i++) tg_free(d.out_ids[i]);
    tg_free(d.out_ids);
    tg_opt_record_free(&d.record);
    tg_free(d.strpool);
    tg_ctx_free(ctx);
    /* the table cut short */
    sec_v3(&S, strs, 0, NULL);
    s32(&S, 2);
    s32(&S, si(&S, "y.1"));
    assert_null(sec_decode(&S, NULL, 0, msg, sizeof msg));
    assert_non_null(strstr(msg, "2 gradient nodes do not fit"));
    /* a key that is no string of the table */
    sec_v3(&S, strs, 0, NULL);
    s32(&S, 1);
    for (int k = 0; k < 5; k++) s32(&S, k == 3 ? 99 : si(&S, "g"));
    assert_null(sec_decode(&S, NULL, 0, msg, sizeof msg));
    assert_non_null(strstr(msg, "gradient nodes: string 99 is not in the table"));
    /* origin groups on a node that is not a composite, or that do not
     * rise to the origin count */
    static const uint32_t two[2] = {1, 2}, bad[1] = {1};
    sec_v3(&S, strs, 2, two);
    s32(&S, 0);
    assert_null(sec_decode(&S, NULL, 0, msg, sizeof msg));
    assert_non_null(strstr(msg, "bad origin groups"));
    sec_v3(&S, strs, 1, bad);
    s32(&S, 0);
    assert_null(sec_decode(&S, NULL, 0, msg, sizeof msg));
    assert_non_null(strstr(msg, "bad origin groups"));
}


/* A version 4 section of one node `op` (attrs: string index or NO)
 * reading int64 x and making y, with its file index ji, its moved words
 * (moved, then traces, or NO) and the count nw of its fused nodes' names,
 * of which one is written (who: its two string indices), then an empty
 * gradients' table. */
static void sec_v4(sec *S, const char *const *strs, const char *op, uint32_t attrs, uint32_t ji, uint32_t moved,
                   uint32_t traces, uint32_t nw, const uint32_t *who) {
    static const uint32_t in1[1] = {0};
    int64_t s3[1] = {3};
    sec_begin(S, strs);
    S->b[3] = 0x04;
    s32(S, 2);
    sec_var(S, "x", TG_VAR_INPUT, 4 | 8, TG_INT64, 1, s3, NO, NO);
    sec_var(S, "y", TG_VAR_RESULT, 0, TG_INT64, 1, s3, NO, NO);
    s32(S, 1);
    s32(S, si(S, op));
    s32(S, attrs);
    s32(S, NO);
    s32(S, ji);
    s32(S, 1);
    s32(S, 0);
    s32(S, 1);
    s32(S, 1);
    s8(S, 0);
    s32(S, 0);
    s32(S, NO);
    s32(S, moved);
    if (moved != NO) s32(S, traces);
    s32(S, nw);
    for (uint32_t k = 0; k < 2 * nw && k < 2; k++) s32(S, who[k]); /* (at most one pair) */
    sec_end(S, 1, in1, 1, "y");
    s32(S, 0);
}

/* Version 4 sections: a node's place in the graph file, the words of a
 * node moved out of a body, and a composite's names of its fused nodes,
 * each checked against the section as the rest is. */
static void test_section_version_4(void **state) {
    (void)state;
    static char longer[1100];
    memset(longer, 'a', 1024); /* a description of 1024 bytes: tg writes at most 1023 */
    static const char *const strs[] = {
        "x", "y", "neg", "composite",
        "{\"body\":{\"variables\":[{\"id\":\"x0\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}},"
        "{\"id\":\"c0\",\"type\":{\"dtype\":\"int64\",\"shape\":[]},\"constant\":{\"dtype\":\"int64\","
        "\"shape\":[],\"data\":7}}],\"nodes\":[{\"op\":\"int_div\",\"inputs\":[\"x0\","
        "\"c0\"],\"outputs\":[\"t0\"]}],\"inputs\":[\"x0\"],\"outputs\":[\"t0\"]}}",
        "nodes[1] (int_div 'd' -> q)", " [at m.py:3 in f: q = a // 7]",
        "nodes[0] (scan 'loop' -> ps): in the body, hoisted out of the loop: nodes[0] (neg -> y)", "", longer,
        NULL};
    enum { ATTRS = 4, DESC = 5, TRACE = 6, MOVED = 7, EMPTY = 8, LONG = 9 };
    char msg[512];
    sec S;
    /* a composite at nodes[7] of its file, naming its one fused node */
    uint32_t who[2] = {DESC, TRACE};
    sec_v4(&S, strs, "composite", ATTRS, 7, NO, NO, 1, who);
    tg_fgraph *fg = sec_decode(&S, NULL, 0, msg, sizeof msg);
    if (!fg) fail_msg("%s", msg);
    const tg_node *n = fg->nodes[0];
    char desc[256];
    tg_node_describe(n, desc, sizeof desc);
    assert_string_equal(desc, "nodes[7] (composite -> y)");
    assert_null(n->moved);
    assert_int_equal(tg_composite_who_count(n), 1);
    const char *d, *t;
    tg_composite_who(n, 0, &d, &t);
    assert_string_equal(d, strs[DESC]);
    assert_string_equal(t, strs[TRACE]);
    tg_fgraph_free(fg);
    /* a node moved out of a body, made by a rewrite (no place) */
    sec_v4(&S, strs, "neg", NO, NO, MOVED, EMPTY, 0, NULL);
    if (!(fg = sec_decode(&S, NULL, 0, msg, sizeof msg))) fail_msg("%s", msg);
    n = fg->nodes[0];
    assert_int_equal(n->json_index, -1);
    assert_non_null(n->moved);
    assert_string_equal(n->moved, strs[MOVED]);
    assert_string_equal(tg_node_moved_traces(n), "");
    assert_int_equal(tg_composite_who_count(n), 0);
    tg_fgraph_free(fg);
    /* what is refused, naming the node */
    static const struct {
        const char *op;
        uint32_t ji, nw, who[2];
        const char *why;
    } bad[] = {
        {"neg", 0x80000000u, 0, {0, 0}, "t: graph section: schedule[0]: node index 2147483648 is past 2^31 - 1"},
        {"neg", 1, 1, {DESC, TRACE},
         "t: graph section: schedule[0]: names of fused nodes on a node that is not a composite (neg)"},
        {"composite", 1, 100, {DESC, TRACE}, "t: graph section: 100 fused-node names do not fit in what is left of it"},
        {"composite", 1, 1, {DESC, 99}, "t: graph section: schedule[0].fused: string 99 is not in the table (10 strings)"},
        {"composite", 1, 1, {LONG, TRACE},
         "t: graph section: schedule[0]: a fused node's description or trace is longer than tg writes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sec_v4(&S, strs, bad[i].op, strcmp(bad[i].op, "neg") ? ATTRS : NO, bad[i].ji, NO, NO, bad[i].nw, bad[i].who);
        if ((fg = sec_decode(&S, NULL, 0, msg, sizeof msg))) {
            tg_fgraph_free(fg);
            fail_msg("case %zu loaded", i);
        }
        if (strcmp(msg, bad[i].why)) fail_msg("case %zu:\n  want: %s\n  got:  %s", i, bad[i].why, msg);
    }
}

/* ---- strings named many times ---- */

/* A graph section of any size (sec's buffer is 4 KiB). */
typedef struct bsec {
    unsigned char *b;
    size_t n, cap;
} bsec;

static void b8(bsec *S, uint8_t v) {
    if (S->n == S->cap) {
        S->cap = S->cap ? 2 * S->cap : 4096;
        S->b = realloc(S->b, S->cap);
        assert_non_null(S->b);
    }
    S->b[S->n++] = v;
}
static void b32(bsec *S, uint32_t v) {
    for (int i = 0; i < 4; i++) b8(S, (uint8_t)(v >> (8 * i)));
}


/* A version 4 section of y = neg(x) whose strings are "x", "y", "neg",
 * "k" and a long string L of `big` bytes, which the node names `frames`
 * times in its trace (file, function and code of each frame), `origins`
 * times among its origins and `removed` times in the one rewrite's
 * removed keys. */
static void bsec_make(bsec *S, size_t big, uint32_t frames, uint32_t origins, uint32_t removed) {
    enum { X, Y, NEG, K, L };
    static const char *const strs[] = {"x", "y", "neg", "k"};
    memset(S, 0, sizeof *S);
    b8(S, 'T'), b8(S, 'G'), b8(S, 'G'), b8(S, 4);
    b32(S, 5);
    for (int i = 0; i < 4; i++) {
        b32(S, (uint32_t)strlen(strs[i]));
        for (const char *c = strs[i]; *c; c++) b8(S, (uint8_t)*c);
    }
    b32(S, (uint32_t)big);
    for (size_t i = 0; i < big; i++) b8(S, 'a');
    b32(S, 2); /* the variables: x, y, float64 scalars */
    for (int v = 0; v < 2; v++) {
        b32(S, v == 0 ? X : Y);
        b32(S, NO);
        b8(S, v == 0 ? TG_VAR_INPUT : TG_VAR_RESULT), b8(S, v == 0 ? 4 | 8 : 0), b8(S, TG_FLOAT64), b8(S, 0);
        b32(S, NO);
        b32(S, NO);
    }
    b32(S, 1); /* the node */
    b32(S, NEG), b32(S, NO), b32(S, NO), b32(S, 0);
    b32(S, 1), b32(S, 0), b32(S, 1), b32(S, 1);
    b8(S, 0);
    b32(S, frames);
    for (uint32_t k = 0; k < frames; k++) {
        b32(S, L);
        b32(S, k), b32(S, 0);
        b32(S, L), b32(S, L);
    }
    b32(S, origins);
    for (uint32_t k = 0; k < origins; k++) b32(S, L);
    b32(S, 0); /* no origin groups */
    b32(S, NO), b32(S, 0); /* not moved, no fused nodes */
    b32(S, 1), b32(S, 0), b32(S, 1), b32(S, 1), b32(S, Y), b32(S, 0); /* x -> y */
    b32(S, 1); /* one rewrite */
    b32(S, K), b32(S, K), b32(S, removed);
    for (uint32_t k = 0; k < removed; k++) b32(S, L);
    b32(S, 0);
    b32(S, 0), b32(S, 0); /* no passes, no gradients' nodes */
}

/* Decode S with the bytes asked for in *asked: the graph, or NULL with
 * the message in msg. */
static tg_fgraph *bsec_decode(const bsec *S, size_t *asked, char *msg, size_t size) {
    return decode_bytes(S->b, S->n, NULL, 0, asked, msg, size);
}

/* A section that names one long string many times (16 KiB, in 2,048
 * trace frames of one node: 56 KiB of frames) asked for a copy of it per
 * name, 96 MiB for a section of 56 KiB, so that a file of a few MB could
 * ask for many GB. The frames now share one copy of each string, and a
 * section's other names (origins, a rewrite's keys) may copy at most 16
 * times its length out of its table before it is refused. */
static void test_section_repeated_strings(void **state) {
    (void)state;
    enum { BIG = 16384 };
    char msg[512];
    size_t asked;
    bsec S;
    bsec_make(&S, BIG, 2048, 0, 0);
    tg_fgraph *fg = bsec_decode(&S, &asked, msg, sizeof msg);
    if (!fg) fail_msg("%s", msg);
    /* the table, the long string once more for the frames, the frames,
     * a few small blocks */
    if (asked > 3 * S.n) fail_msg("a section of %zu bytes asked for %zu", S.n, asked);
    const tg_trace *t = &fg->nodes[0]->trace;
    assert_int_equal(t->n, 2048);
    assert_int_equal(t->frames[2047].line, 2047);
    assert_int_equal(strlen(t->frames[2047].code), BIG);
    assert_int_equal(strspn(t->frames[0].file, "a"), BIG);
    /* a copy of the trace keeps its strings after the graph is gone */
    tg_trace copy = {0};
    assert_int_equal(tg_trace_copy(&copy, t), TG_OK);
    tg_fgraph_free(fg);
    assert_int_equal(strlen(copy.frames[5].function), BIG);
    tg_trace_free(&copy);
    free(S.b);
    /* as many names as the file's 16 times its length still load */
    bsec_make(&S, BIG, 0, 15, 0);
    if (!(fg = bsec_decode(&S, &asked, msg, sizeof msg))) fail_msg("%s", msg);
    assert_int_equal(fg->nodes[0]->norigins, 15);
    tg_fgraph_free(fg);
    free(S.b);
    static const struct {
        uint32_t origins, removed;
        const char *why;
    } bad[] = {
        {4096, 0, "t: graph section: schedule[0].origins: names strings so often that reading them would copy "
                  "more than 527280 bytes out of a section of 32955, which tg never writes"},
        {0, 4096, "t: graph section: rewrites: names strings so often that reading them would copy "
                  "more than 527280 bytes out of a section of 32955, which tg never writes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bsec_make(&S, BIG, 0, bad[i].origins, bad[i].removed);
        fg = bsec_decode(&S, &asked, msg, sizeof msg);
        free(S.b);
        if (fg) {
            tg_fgraph_free(fg);
            fail_msg("case %zu loaded, asking for %zu bytes", i, asked);
        }
        if (strcmp(msg, bad[i].why)) fail_msg("case %zu:\n  want: %s\n  got:  %s", i, bad[i].why, msg);
        if (asked > 64 * (size_t)BIG * 16) fail_msg("case %zu asked for %zu bytes", i, asked);
    }
}

/* A NUL character in a string of a .tgf is refused, as the JSON loader
 * refuses one (format-choices.md): tg keeps names as C strings, so
 * "p\u0000" was restored as a function named 'p', and two body ids
 * "x0\u0000a" and "x0\u0000b" as one 'x0', silently. The error names the
 * file and the field: the header's (\u0000 in its JSON), the original
 * graph's, a node's attrs' (JSON text in a graph section), and a graph
 * section string holding a NUL byte, by the field that uses it. */
static void test_nul_refused(void **state) {
    (void)state;
    static const char WHY[] = "contains a NUL character (\\u0000), which tg does not accept";
    tg_graph *g;
    tg_function *fs[2];
    save_graph("nul.tgf", &g, fs);
    size_t n;
    unsigned char *orig = tu_read_file(path_in("nul.tgf"), &n), *b = malloc(n);
    assert_non_null(b);
    tg_ctx *ctx = tg_ctx_new();
    /* the header: the second function's name "predict" as "p\u0000" */
    memcpy(b, orig, n);
    tu_tgf_patch_header(b, n, "\"name\":\"p", '"', "\\u0000");
    tg_tgf *t = tg_tgf_load_buffer(b, n, "nul.tgf", NULL, ctx);
    if (t) fail_msg("loaded, function 1 named '%s'", tg_function_name(tg_tgf_function(t, 1)));
    const char *m = tg_ctx_message(ctx);
    if (strncmp(m, "nul.tgf: header: functions[1].name: ", 36) || !strstr(m, WHY) || strchr(m, '\n'))
        fail_msg("%s", m);

    /* the original graph: its function "predict" as "p\u0000" (the
     * array's checksum not checked) */
    uint64_t doff = 0;
    for (int i = 7; i >= 0; i--) doff = doff << 8 | orig[32 + i];
    memcpy(b, orig, n);
    unsigned char *q = memmem(b + doff, n - doff, "\"predict\":{", 11);
    assert_non_null(q);
    memcpy(q + 1, "p\\u0000", 7);
    tg_tgf_fuzz_no_checksums = true;
    t = tg_tgf_load_buffer(b, n, "nul.tgf", NULL, ctx);
    tg_tgf_fuzz_no_checksums = false;
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_graph *o = tg_tgf_original(t, ctx);
    if (o) fail_msg("the original loaded, %d functions", tg_graph_function_count(o));
    m = tg_ctx_message(ctx);
    if (strncmp(m, "nul.tgf: the original graph (array ", 35) || !strstr(m, "): functions.p\\u0000: ") ||
        !strstr(m, WHY) || strchr(m, '\n'))
        fail_msg("%s", m);
    tg_tgf_free(t);

    /* a node's attrs in a graph section: a composite whose body declares
     * x0\u0000a and reads x0\u0000b */
    static const char *const strs[] = {
        "x", "y", "composite",
        "{\"body\":{\"variables\":[{\"id\":\"x0\\u0000a\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x0\\u0000b\"],\"outputs\":[\"t0\"]}],"
        "\"inputs\":[\"x0\\u0000a\"],\"outputs\":[\"t0\"]}}",
        "n#m", NULL};
    static const uint32_t in1[1] = {0};
    int64_t s3[1] = {3};
    char msg[512];
    sec S;
    for (int named = 0; named < 2; named++) {
        sec_begin(&S, strs);
        s32(&S, 2);
        sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
        sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 1, s3, NO, NO);
        s32(&S, 1);
        /* the attrs, or the node's name */
        sec_node_an(&S, "composite", named ? NO : 3, named ? si(&S, "n#m") : NO, 1, in1, 1, -1);
        sec_end(&S, 1, in1, 1, "y");
        if (named) { /* "n#m" with a NUL byte for # */
            unsigned char *h = memmem(S.b, S.n, "n#m", 3);
            assert_non_null(h);
            h[1] = 0;
        }
        tg_fgraph *fg = sec_decode(&S, NULL, 0, msg, sizeof msg);
        if (fg) {
            tg_fgraph_free(fg);
            fail_msg("a section with %s loaded", named ? "a NUL byte in a node's name" : "\\u0000 in attrs");
        }
        const char *want = named ? "t: graph section: schedule[0].name: string 4 holds a NUL byte, which tg "
                                   "does not accept (its strings would end there)"
                                 : "t: schedule[0]: (composite -> y): attrs: body.variables[0].id: ";
        if (strncmp(msg, want, strlen(want)) || (!named && !strstr(msg, WHY)) || strchr(msg, '\n'))
            fail_msg("%s", msg);
    }
    free(b);
    free(orig);
    free_saved(g, fs);
    tg_ctx_free(ctx);
}
/* The decoder names the field of a bad string where it finds one (it
 * makes those names only for an error): a variable's id or name, a
 * node's op or name. A NUL byte is found anywhere in a string, in the
 * eight bytes read at once of a long one as in its tail. */
static void test_section_field_names(void **state) {
    (void)state;
    static const char *const strs[] = {"x", "c", "y", "add", "abcdefghij#klmnopqrst", "ab#", "h\xc3\xa9llo", NULL};
    static const uint32_t in2[2] = {0, 1};
    int64_t s3[1] = {3};
    char msg[512];
    sec S;
    for (int c = 0; c < 9; c++) {
        sec_begin(&S, strs);
        s32(&S, 3);
        sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
        sec_var(&S, "c", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, s3, NO, NO);
        sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 1, s3, NO, NO);
        uint32_t name_at = 0;
        s32(&S, 1);
        sec_node(&S, "add", 2, in2, 2, -1);
        sec_end(&S, 2, in2, 2, "y");
        /* where the fields are: the magic number and the string table,
         * the variable count, three variables of 28 bytes (id, name,
         * kind to rank, a length, two array indices), the node count;
         * the node's op, its attrs, its name */
        size_t vars_at = 8;
        for (int i = 0; strs[i]; i++) vars_at += 4 + strlen(strs[i]);
        vars_at += 4;
        size_t node_at = vars_at + 3 * 28 + 4;
        const char *want = NULL;
        unsigned char *h;
        switch (c) {
        case 0: /* variable 1's id: string 77 */
            memcpy(S.b + vars_at + 28, "\x4d\0\0\0", 4);
            want = "t: graph section: variables[1].id: string 77 is not in the table (7 strings)";
            break;
        case 1: /* variable 2's name: string 7 */
            memcpy(S.b + vars_at + 2 * 28 + 4, "\x07\0\0\0", 4);
            want = "t: graph section: variables[2].name: string 7 is not in the table (7 strings)";
            break;
        case 2: /* the node's op: string 1000 */
            memcpy(S.b + node_at, "\xe8\x03\0\0", 4);
            want = "t: graph section: schedule[0].op: string 1000 is not in the table (7 strings)";
            break;
        case 3: /* the node's name: the long string, a NUL byte in its second word */
        case 4: /* the short one */
            name_at = c == 3 ? 4 : 5;
            memcpy(S.b + node_at + 8, &name_at, 4);
            h = memmem(S.b, S.n, strs[name_at], strlen(strs[name_at]));
            assert_non_null(h);
            h[strchr(strs[name_at], '#') - strs[name_at]] = 0;
            want = c == 3 ? "t: graph section: schedule[0].name: string 4 holds a NUL byte"
                          : "t: graph section: schedule[0].name: string 5 holds a NUL byte";
            break;
        case 5: /* the long name as it is: loads, named */
        case 6: /* a name that is not ASCII: loads, named */
            name_at = c == 5 ? 4 : 6;
            memcpy(S.b + node_at + 8, &name_at, 4);
            break;
        case 7: /* a NUL byte in a table that is not all ASCII */
            h = memmem(S.b, S.n, "ab#", 3);
            h[2] = 0;
            name_at = 5;
            memcpy(S.b + node_at + 8, &name_at, 4);
            want = "t: graph section: schedule[0].name: string 5 holds a NUL byte";
            break;
        default: /* string 1 not UTF-8, the table cut in string 4: string 1 is named */
            h = memmem(S.b, S.n, "\x01\0\0\0c", 5);
            assert_non_null(h);
            h[4] = (char)0xff;
            S.n = (size_t)((unsigned char *)memmem(S.b, S.n, "abcdefghij", 10) - S.b) + 3;
            want = "t: graph section: string 1 is not UTF-8 text";
            break;
        }
        tg_fgraph *fg = sec_decode(&S, NULL, 0, msg, sizeof msg);
        if (!want) {
            if (!fg) fail_msg("case %d: %s", c, msg);
            assert_int_equal(fg->nnodes, 1);
            assert_string_equal(fg->nodes[0]->name, strs[name_at]);
            tg_fgraph_free(fg);
            continue;
        }
        if (fg) {
            tg_fgraph_free(fg);
            fail_msg("case %d loaded", c);
        }
        if (strncmp(msg, want, strlen(want)) || strchr(msg, '\n')) fail_msg("case %d: %s", c, msg);
    }
}

/* What the export writes loads with the types the section has: a length
 * the saved type fixes and the op leaves open is declared, and a weak
 * constant stays weak only where the op reading it leaves its dtype. */
/* An in-place hint made under the saved types, which the decoder's
 * inference refines so that they no longer agree (y = sum_to(exp(x),
 * like) saved as float64[?, 4] over x's [3, 4], inferred [1, 4] from
 * like): dropped, and the file loads (older optimizers wrote such hints;
 * the kernel takes the buffer over only when the shapes agree). One the
 * saved types already refuse is refused. */
static void test_section_stale_inplace_dropped(void **state) {
    (void)state;
    static const char *const strs[] = {"x", "like", "e", "y", "exp", "sum_to", NULL};
    int64_t s34[2] = {3, 4}, s14[2] = {1, 4}, open4[2] = {-1, 4};
    static const uint32_t in_x[1] = {0}, in_st[2] = {2, 1}, args[2] = {0, 1};
    char msg[512];
    for (int refuse = 0; refuse < 2; refuse++) {
        sec S;
        sec_begin(&S, strs);
        s32(&S, 4);
        sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 2, s34, NO, NO);
        sec_var(&S, "like", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 2, s14, NO, NO);
        sec_var(&S, "e", TG_VAR_RESULT, 0, TG_FLOAT64, 2, s34, NO, NO);
        sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 2, refuse ? s14 : open4, NO, NO);
        s32(&S, 2);
        sec_node(&S, "exp", 1, in_x, 2, -1);
        sec_node(&S, "sum_to", 2, in_st, 3, 0);
        sec_end(&S, 2, args, 3, "y");
        tg_fgraph *fg = sec_decode(&S, NULL, 0, msg, sizeof msg);
        if (refuse) {
            assert_null(fg);
            assert_non_null(strstr(msg, "cannot be written over input 0"));
            continue;
        }
        if (!fg) fail_msg("%s", msg);
        tg_node *st = fg_var(fg, "y")->owner;
        assert_string_equal(st->op->name, "sum_to");
        assert_int_equal(st->outputs[0]->type.shape[0], 1);
        assert_true(!st->inplace || st->inplace[0] == -1);
        tg_fgraph_free(fg);
    }
}

/* A hint on a shared variable: W <- gemm(W, a, A, X, b), the gemm
 * overwriting W, is kept; refused (one line naming W) where W is also
 * returned as it was, or read by V's update gemm, which may itself
 * overwrite V (tg_inplace_shared_ok: the VM could run it after W's). */
static void test_section_shared_inplace(void **state) {
    (void)state;
    static const char *const strs[] = {"W", "a", "A", "X", "b", "Wn", "V", "Vn", "K", "gemm", NULL};
    int64_t s22[2] = {2, 2}, s23[2] = {2, 3}, s32v[2] = {3, 2};
    double w[4] = {1, 2, 3, 4}, v[4] = {-1, 0.5, 2, 0}, alpha = -0.1, beta = 1;
    tg_array *arrays[4] = {tu_f64(2, s22, w), tu_f64(0, NULL, &alpha), tu_f64(0, NULL, &beta), tu_f64(2, s22, v)};
    static const uint32_t gw[5] = {0, 1, 2, 3, 4}, gv[5] = {6, 1, 0, 8, 4};
    char msg[512];
    for (int c = 0; c < 3; c++) {
        sec S;
        sec_begin(&S, strs);
        s32(&S, 9);
        sec_var(&S, "W", TG_VAR_SHARED, 4 | 8, TG_FLOAT64, 2, s22, 0, NO);
        sec_var(&S, "a", TG_VAR_CONSTANT, 2, TG_FLOAT64, 0, NULL, 1, NO);
        sec_var(&S, "A", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 2, s23, NO, NO);
        sec_var(&S, "X", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 2, s32v, NO, NO);
        sec_var(&S, "b", TG_VAR_CONSTANT, 2, TG_FLOAT64, 0, NULL, 2, NO);
        sec_var(&S, "Wn", TG_VAR_RESULT, 0, TG_FLOAT64, 2, s22, NO, NO);
        sec_var(&S, "V", TG_VAR_SHARED, 4 | 8, TG_FLOAT64, 2, s22, 3, NO);
        sec_var(&S, "Vn", TG_VAR_RESULT, 0, TG_FLOAT64, 2, s22, NO, NO);
        sec_var(&S, "K", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 2, s22, NO, NO);
        s32(&S, c == 2 ? 2 : 1);
        sec_node(&S, "gemm", 5, gw, 5, 0);
        if (c == 2) sec_node(&S, "gemm", 5, gv, 7, 0);
        /* inputs A, X, K; one output: Wn (c 0, 2), W itself (c 1) */
        s32(&S, 3);
        s32(&S, 2);
        s32(&S, 3);
        s32(&S, 8);
        s32(&S, 1);
        s32(&S, c == 1 ? 0 : 5);
        s32(&S, si(&S, c == 1 ? "W" : "Wn"));
        s32(&S, c == 2 ? 2 : 1); /* updates */
        s32(&S, 0);
        s32(&S, 5);
        if (c == 2) {
            s32(&S, 6);
            s32(&S, 7);
        }
        s32(&S, 0);
        s32(&S, 0);
        tg_fgraph *fg = sec_decode(&S, arrays, 4, msg, sizeof msg);
        if (c == 0) {
            if (!fg) fail_msg("%s", msg);
            tg_node *g = fg_var(fg, "Wn")->owner;
            assert_true(g->inplace && g->inplace[0] == 0 && tg_node_commits(g));
            tg_fgraph_free(fg);
            continue;
        }
        assert_null(fg);
        assert_non_null(strstr(msg, "shared variable 'W' is overwritten in place"));
        assert_null(strchr(msg, '\n'));
    }
    for (int i = 0; i < 4; i++) tg_array_free(arrays[i]);
}

static void test_section_export_types(void **state) {
    (void)state;
    static const char *const strs[] = {"x", "c", "y", "add", "exp", NULL};
    int64_t s3[1] = {3}, open1[1] = {-1};
    double two = 2.0;
    tg_array *c = tu_f64(0, NULL, &two);
    tg_array *arrays[1] = {c};
    char msg[512];
    uint32_t in1[1] = {0};
    sec S;
    /* exp(x: float64[?]) saved as float64[3] */
    sec_begin(&S, strs);
    s32(&S, 2);
    sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, TG_FLOAT64, 1, open1, NO, NO);
    sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 1, s3, NO, NO);
    s32(&S, 1);
    sec_node(&S, "exp", 1, in1, 1, -1);
    sec_end(&S, 1, in1, 1, "y");
    tg_fgraph *fg = sec_decode(&S, arrays, 1, msg, sizeof msg);
    if (!fg) fail_msg("%s", msg);
    tg_var *y = fg_var(fg, "y");
    assert_true(y->declared && y->type_given);
    assert_int_equal(y->type.shape[0], 3);
    tg_fgraph_free(fg);
    /* add(x, 2.0 weak): float64 x keeps it weak, float32 x does not (a
     * bare 2.0 would become float32 there, the sum float32) */
    for (int f32 = 0; f32 < 2; f32++) {
        sec_begin(&S, strs);
        s32(&S, 3);
        sec_var(&S, "x", TG_VAR_INPUT, 4 | 8, f32 ? TG_FLOAT32 : TG_FLOAT64, 0, NULL, NO, NO);
        sec_var(&S, "c", TG_VAR_CONSTANT, 1 | 2, TG_FLOAT64, 0, NULL, 0, NO);
        sec_var(&S, "y", TG_VAR_RESULT, 0, TG_FLOAT64, 0, NULL, NO, NO);
        sec_sum(&S);
        fg = sec_decode(&S, arrays, 1, msg, sizeof msg);
        if (!fg) fail_msg("%s", msg);
        tg_var *cv = fg_var(fg, "c");
        assert_int_equal(cv->weak_in_file, !f32);
        assert_false(cv->weak);
        assert_int_equal(cv->type.dtype, TG_FLOAT64);
        assert_ptr_equal(cv->value, c);
        assert_int_equal(fg_var(fg, "y")->type.dtype, TG_FLOAT64);
        /* the trial leaves what the op noted for the run as it was */
        assert_int_equal(fg->nodes[0]->a.mode, TG_FLOAT64);
        assert_int_equal(fg->nodes[0]->a.dtype, TG_FLOAT64);
        tg_fgraph_free(fg);
    }
    tg_array_free(c);
}

/* The function of `json` compiled (fast_run), saved alone, restored and
 * exported; the export loaded, compiled with preset none and called on x:
 * its outputs in out (nout of them), its output ids checked against ids. */
static void export_and_run(const char *name, const char *json, tg_array *x, int nout, tg_array **out,
                           const char *const *ids) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tu_load(json);
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("%s: %s", name, tg_ctx_message(ctx));
    tg_tgf_save_info info = {.source = g};
    tg_tgf *t = round_trip(name, f, &info, name, ctx);
    char *s = tg_tgf_export(t, 0, ctx);
    if (!s) fail_msg("%s: %s", name, tg_ctx_message(ctx));
    tg_graph *e = tg_graph_load_string(s, strlen(s), NULL, "export", ctx);
    if (!e) fail_msg("%s: the export does not load: %s\n%s", name, tg_ctx_message(ctx), s);
    tg_compile_options none = {.preset = "none"};
    tg_function *h = tg_function_compile(e, 0, &none, ctx);
    if (!h) fail_msg("%s: %s", name, tg_ctx_message(ctx));
    if (tg_function_output_count(h) != nout) fail_msg("%s: %d outputs in\n%s", name, tg_function_output_count(h), s);
    for (int k = 0; k < nout; k++)
        if (strcmp(tg_function_output_id(h, k), ids[k]))
            fail_msg("%s: output %d is '%s', expected '%s':\n%s", name, k, tg_function_output_id(h, k), ids[k], s);
    if (tg_function_call(h, &x, out, ctx)) fail_msg("%s: %s", name, tg_ctx_message(ctx));
    tg_function_free(h);
    tg_graph_free(e);
    tg_string_free(s);
    tg_tgf_free(t);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* A constant folded to a NaN with its sign bit set keeps it through the
 * export: x + (c - c) with c = (inf, 1) is (-nan, 2) as NumPy computes it
 * on x86 (0xFFF8000000000000: inf - inf gives the default NaN, negative,
 * and 1 + NaN keeps it); the export wrote the folded (-nan, 0) as
 * ["nan", 0.0], a positive NaN. */
static void test_export_keeps_nan_bits(void **state) {
    (void)state;
    static const char *json =
        "{\"format\": \"tg-graph\", \"version\": 1,"
        " \"variables\": [{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}},"
        "  {\"id\": \"c\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]},"
        "   \"constant\": {\"dtype\": \"float64\", \"shape\": [2], \"data\": [\"inf\", 1]}}],"
        " \"nodes\": [{\"op\": \"sub\", \"inputs\": [\"c\", \"c\"], \"outputs\": [\"d\"]},"
        "  {\"op\": \"add\", \"inputs\": [\"x\", \"d\"], \"outputs\": [\"y\"]}],"
        " \"functions\": {\"main\": {\"inputs\": [\"x\"], \"outputs\": [\"y\"]}}}";
    int64_t two = 2;
    tg_array *x = tu_f64(1, &two, (double[]){1, 2}), *y = NULL;
    export_and_run("nan.tgf", json, x, 1, &y, (const char *const[]){"y"});
    uint64_t bits[2];
    memcpy(bits, tg_array_data(y), sizeof bits);
    if (bits[0] != 0xFFF8000000000000u || bits[1] != 0x4000000000000000u)
        fail_msg("y is 0x%016llx 0x%016llx, expected 0xfff8000000000000 0x4000000000000000",
                 (unsigned long long)bits[0], (unsigned long long)bits[1]);
    tg_array_free(y);
    tg_array_free(x);
}

/* An output listed twice that a rewrite replaced (mul(x, 1) is x) is
 * exported as one identity(x) -> y that both listings name: the second
 * was left as x, so the export's outputs were (y, x). */
static void test_export_output_listed_twice(void **state) {
    (void)state;
    static const char *json =
        "{\"format\": \"tg-graph\", \"version\": 1,"
        " \"variables\": [{\"id\": \"x\", \"type\": {\"dtype\": \"float64\", \"shape\": [2]}}],"
        " \"nodes\": [{\"op\": \"mul\", \"inputs\": [\"x\", {\"value\": 1}], \"outputs\": [\"y\"]}],"
        " \"functions\": {\"main\": {\"inputs\": [\"x\"], \"outputs\": [\"y\", \"y\"]}}}";
    int64_t two = 2;
    tg_array *x = tu_f64(1, &two, (double[]){1.5, -2}), *out[2] = {NULL, NULL};
    export_and_run("twice.tgf", json, x, 2, out, (const char *const[]){"y", "y"});
    for (int k = 0; k < 2; k++) {
        const double *v = tg_array_data(out[k]);
        if (v[0] != 1.5 || v[1] != -2) fail_msg("output %d is (%g, %g), expected (1.5, -2)", k, v[0], v[1]);
        tg_array_free(out[k]);
    }
    tg_array_free(x);
}

/* save_state copies the kept original graph's text, its references moved
 * to the new file's arrays, w's to its value now: the file is the one
 * loading and writing the graph again gives, byte for byte, and the
 * original compiled from it predicts with w after two training calls,
 * (0.7, 1.55, -0.9) as in test_original_graph: 2.535. A text that
 * mentions tgf_array other than as a reference (here a variable's name,
 * or a meta holding {"tgf_array": 0}, which json-c writes as a reference
 * is written) is loaded and written again, with the same values, and
 * meta as it was (FORMAT.md: kept as is), not renumbered to w's array.
 * A graph's name, written before the variables, is copied with them. */
static void test_save_state_copies_original(void **state) {
    (void)state;
    static const char *named = "{\"id\": \"x\", \"name\": \"not a {\\\"tgf_array\\\":0} reference\",";
    static const char *meta = ", \"meta\": {\"note\": {\"tgf_array\": 0}}}";
    char *other = malloc(strlen(GRAPH) + strlen(named) + 1), *metad = malloc(strlen(GRAPH) + strlen(meta) + 1);
    const char *at = strstr(GRAPH, "{\"id\": \"x\",");
    assert_non_null(at);
    sprintf(other, "%.*s%s%s", (int)(at - GRAPH), GRAPH, named, at + strlen("{\"id\": \"x\","));
    sprintf(metad, "%.*s%s", (int)strlen(GRAPH) - 1, GRAPH, meta);
    /* a name (before the variables) is copied too, its quotes escaped */
    static const char *name = " \"name\": \"a \\\"named\\\" graph\",";
    char *namedg = malloc(strlen(GRAPH) + strlen(name) + 1);
    at = strstr(GRAPH, "\"version\": 1,") + strlen("\"version\": 1,");
    sprintf(namedg, "%.*s%s%s", (int)(at - GRAPH), GRAPH, name, at);
    const char *texts[4] = {GRAPH, other, metad, namedg};
    for (int v = 0; v < 4; v++) {
        tg_graph *g;
        tg_function *fs[2];
        save_graph_text("s.tgf", texts[v], &g, fs);
        tg_ctx *ctx = tg_ctx_new();
        tg_tgf *t = tg_tgf_load(path_in("s.tgf"), NULL, ctx);
        if (!t) fail_msg("%s", tg_ctx_message(ctx));
        tg_function *tr = tg_tgf_function(t, tg_tgf_function_find(t, "train", ctx));
        tg_array *x = vec3(0.3, 0.7, -1.1);
        call1(tr, x);
        call1(tr, x);
        unsigned long c0 = tg_tgf_original_copies;
        if (tg_tgf_save_state(t, path_in("s1.tgf"), ctx)) fail_msg("%s", tg_ctx_message(ctx));
        assert_int_equal(tg_tgf_original_copies - c0, v == 0 || v == 3 ? 1 : 0);
        tg_tgf_reparse_original = true;
        int rc = tg_tgf_save_state(t, path_in("s2.tgf"), ctx);
        tg_tgf_reparse_original = false;
        if (rc) fail_msg("%s", tg_ctx_message(ctx));
        assert_int_equal(tg_tgf_original_copies - c0, v == 0 || v == 3 ? 1 : 0);
        size_t n1, n2;
        char *b1 = tu_read_file(path_in("s1.tgf"), &n1), *b2 = tu_read_file(path_in("s2.tgf"), &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(b1, b2, n1);
        free(b1);
        free(b2);
        tg_tgf *t1 = tg_tgf_load(path_in("s1.tgf"), NULL, ctx);
        if (!t1) fail_msg("%s", tg_ctx_message(ctx));
        tg_graph *o = tg_tgf_original(t1, ctx);
        if (!o) fail_msg("%s", tg_ctx_message(ctx));
        if (v == 2) {
            const char *m = json_object_to_json_string_ext(o->meta, JSON_C_TO_STRING_PLAIN);
            if (strcmp(m, "{\"note\":{\"tgf_array\":0}}")) fail_msg("meta became %s", m);
        }
        tg_compile_options none = {.preset = "none"};
        tg_function *op = tg_function_compile(o, tg_graph_function_find(o, "predict", ctx), &none, ctx);
        assert_non_null(op);
        double p = call1(op, x);
        assert_true(fabs(p - 2.535) < 1e-12);
        tg_function_free(op);
        tg_graph_free(o);
        tg_tgf_free(t1);
        tg_tgf_free(t);
        tg_array_free(x);
        free_saved(g, fs);
        tg_ctx_free(ctx);
    }
    free(other);
    free(metad);
    free(namedg);
}

/* An integer past uint64 in the kept original graph (here in meta: the
 * graph was saved with the string "1180591620717411303424", its quotes
 * then made spaces), which json-c would take as 2^64 - 1: refused with
 * the value as written and where it is, as the graph loader refuses it
 * in a file, not kept clamped. */
static void test_original_huge_int(void **state) {
    (void)state;
    static const char *meta = ", \"meta\": {\"n\": \"1180591620717411303424\"}}";
    char *text = malloc(strlen(GRAPH) + strlen(meta) + 1);
    sprintf(text, "%.*s%s", (int)strlen(GRAPH) - 1, GRAPH, meta);
    tg_graph *g;
    tg_function *fs[2];
    save_graph_text("h.tgf", text, &g, fs);
    size_t n;
    unsigned char *b = tu_read_file(path_in("h.tgf"), &n);
    unsigned char *q = memmem(b, n, "\"n\":\"1180591620717411303424\"", 28);
    assert_non_null(q);
    q[4] = q[27] = ' ';
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf_fuzz_no_checksums = true; /* (the original's array changed) */
    tg_tgf *t = tg_tgf_load_buffer(b, n, "h.tgf", NULL, ctx);
    tg_tgf_fuzz_no_checksums = false;
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    assert_null(tg_tgf_original(t, ctx));
    const char *m = tg_ctx_message(ctx);
    if (strncmp(m, "h.tgf: the original graph (array ", 33) ||
        !strstr(m, "): line 1, column ") ||
        !strstr(m, ": the integer 1180591620717411303424 is out of range"))
        fail_msg("%s", m);
    tg_tgf_free(t);
    tg_ctx_free(ctx);
    free(b);
    free(text);
    free_saved(g, fs);
}

/* op_from_graph bodies nested `depth` deep around exp(a), as JSON text
 * (malloc'd). */
static char *nested_json(int depth) {
    size_t cap = (size_t)depth * 400 + 1024, n = 0;
    char *j = malloc(cap);
    static const char *var = "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],";
    n += (size_t)snprintf(j + n, cap - n,
                          "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":"
                          "{\"dtype\":\"float64\",\"shape\":[3]}}],\"nodes\":[{\"op\":\"op_from_graph\","
                          "\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"name\":\"top\",\"body\":");
    for (int d = 0; d < depth; d++)
        n += (size_t)snprintf(j + n, cap - n,
                              "%s\"nodes\":[{\"op\":\"op_from_graph\",\"inputs\":[\"a\"],\"outputs\":[\"b\"],"
                              "\"attrs\":{\"name\":\"f%d\",\"body\":",
                              var, d);
    n += (size_t)snprintf(j + n, cap - n, "%s\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]}],"
                          "\"inputs\":[\"a\"],\"outputs\":[\"b\"]}", var);
    for (int d = 0; d < depth; d++) n += (size_t)snprintf(j + n, cap - n, "}}],\"inputs\":[\"a\"],\"outputs\":[\"b\"]}");
    n += (size_t)snprintf(j + n, cap - n, "}}],\"functions\":{\"main\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}");
    assert_true(n < cap);
    return j;
}

/* Composites of one body restored from a file share its parsed form
 * (composite.c keeps the parsed body with each of the few body objects
 * it saw last): twelve bodies, more than it keeps, each in three nodes,
 * so that entries are replaced while restored functions still use the
 * bodies they held. y = sum_k sum_r sum(tanh(x_r * c_k + d_k)), three
 * sets restored from the file at once and freed out of order, each
 * against the sum worked out here. */
static void test_shared_bodies_restore(void **state) {
    (void)state;
    enum { K = 12, R = 3 };
    size_t cap = 64 * 1024, n = 0;
    char *j = malloc(cap);
    n += (size_t)snprintf(j + n, cap - n, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[");
    for (int r = 0; r < R; r++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"id\":\"x%d\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}",
                              r ? "," : "", r);
    n += (size_t)snprintf(j + n, cap - n, "],\"nodes\":[");
    for (int k = 0; k < K; k++)
        for (int r = 0; r < R; r++)
            n += (size_t)snprintf(j + n, cap - n,
                                  "%s{\"op\":\"mul\",\"inputs\":[\"x%d\",{\"value\":%d.5}],\"outputs\":[\"m%d_%d\"]},"
                                  "{\"op\":\"add\",\"inputs\":[\"m%d_%d\",{\"value\":-%d.25}],\"outputs\":[\"a%d_%d\"]},"
                                  "{\"op\":\"tanh\",\"inputs\":[\"a%d_%d\"],\"outputs\":[\"t%d_%d\"]},"
                                  "{\"op\":\"sum\",\"inputs\":[\"t%d_%d\"],\"outputs\":[\"s%d_%d\"]}",
                                  k || r ? "," : "", r, k, k, r, k, r, k % 5, k, r, k, r, k, r, k, r, k, r);
    for (int i = 1; i < K * R; i++)
        n += (size_t)snprintf(j + n, cap - n, ",{\"op\":\"add\",\"inputs\":[\"%s%d\",\"s%d_%d\"],\"outputs\":[\"y%d\"]}",
                              i == 1 ? "s0_" : "y", i == 1 ? 0 : i - 1, i / R, i % R, i);
    n += (size_t)snprintf(j + n, cap - n,
                          "],\"functions\":{\"main\":{\"inputs\":[\"x0\",\"x1\",\"x2\"],\"outputs\":[\"y%d\"]}}}",
                          K * R - 1);
    assert_true(n < cap);
    const double xv[R][3] = {{0.1, -0.4, 0.9}, {1.5, 0.0, -2.0}, {0.25, 0.5, 0.75}};
    double want = 0;
    for (int k = 0; k < K; k++)
        for (int r = 0; r < R; r++)
            for (int e = 0; e < 3; e++) want += tanh(xv[r][e] * (k + 0.5) - (k % 5 + 0.25));
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(j, n, NULL, "bodies", ctx);
    free(j);
    if (!g) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf *t0 = round_trip("bodies.tgf", f, &(tg_tgf_save_info){.source = g}, "bodies", ctx);
    tg_array *x[R];
    int64_t shp[1] = {3};
    for (int r = 0; r < R; r++) x[r] = tu_f64(1, shp, xv[r]);
    tg_tgf *t[3] = {t0, NULL, NULL};
    for (int i = 1; i < 3; i++)
        if (!(t[i] = tg_tgf_load(path_in("bodies.tgf"), NULL, ctx))) fail_msg("%s", tg_ctx_message(ctx));
    for (int order = 0; order < 3; order++) {
        /* free one set (the middle one first), check the others, restore
         * it again */
        int victim = (order + 1) % 3;
        tg_tgf_free(t[victim]);
        t[victim] = NULL;
        for (int i = 0; i < 3; i++) {
            if (!t[i]) continue;
            tg_function *h = tg_tgf_function(t[i], 0);
            int fused = 0;
            for (int s = 0; s < tg_function_node_count(h); s++)
                fused += !strcmp(tg_function_node_op(h, s), "composite");
            assert_true(fused >= K * R);
            tg_array *out = NULL;
            if (tg_function_call(h, x, &out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
            double got = tg_array_get_flat(out, 0);
            if (fabs(got - want) > 1e-12) fail_msg("set %d: %.17g, want %.17g", i, got, want);
            tg_array_free(out);
        }
        if (!(t[victim] = tg_tgf_load(path_in("bodies.tgf"), NULL, ctx))) fail_msg("%s", tg_ctx_message(ctx));
    }
    for (int i = 0; i < 3; i++) tg_tgf_free(t[i]);
    for (int r = 0; r < R; r++) tg_array_free(x[r]);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Whatever loads from JSON restores from its .tgf: a node's attrs hold
 * its bodies, and the graph section's parser refused attrs nested past
 * 64 levels, so a file with bodies 20 deep was saved and then refused
 * ("the attrs of a op_from_graph node are not a JSON object"). The
 * deepest nesting the loader takes round-trips, reoptimized too; one
 * deeper is refused with the limit named. */
static void test_deep_bodies_restore(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    int depth = 1;
    tg_graph *g = NULL;
    for (;; depth++) {
        char *j = nested_json(depth + 1);
        tg_graph *h = tg_graph_load_string(j, strlen(j), NULL, "nested", ctx);
        free(j);
        if (!h) break;
        tg_graph_free(g);
        g = h;
    }
    assert_non_null(g);
    assert_true(depth >= 20);
    assert_non_null(strstr(tg_ctx_message(ctx), "nested more than 128 levels deep"));
    tg_ctx_clear(ctx);
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    tg_tgf *t = round_trip("deep.tgf", f, &(tg_tgf_save_info){.source = g}, "deep bodies", ctx);
    tg_array *x = vec3(0.5, 1, 2);
    assert_true(call1(tg_tgf_function(t, 0), x) == exp(0.5));
    tg_tgf_free(t);
    tg_tgf_load_options ro = {.reoptimize = true};
    t = tg_tgf_load(path_in("deep.tgf"), &ro, ctx);
    if (!t) fail_msg("reoptimized: %s", tg_ctx_message(ctx));
    assert_true(call1(tg_tgf_function(t, 0), x) == exp(0.5));
    tg_tgf_free(t);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_known_values),
        cmocka_unit_test(test_crc32c_long),
        cmocka_unit_test(test_crc32c_parallel),
        cmocka_unit_test(test_passes_and_output_ids_survive),
        cmocka_unit_test(test_save_load_same_bits_and_shared_state),
        cmocka_unit_test(test_save_load_read_into_memory),
        cmocka_unit_test(test_checkpoint_resume_exact),
        cmocka_unit_test(test_original_graph),
        cmocka_unit_test(test_save_state_copies_original),
        cmocka_unit_test(test_original_huge_int),
        cmocka_unit_test(test_deep_bodies_restore),
        cmocka_unit_test(test_shared_bodies_restore),
        cmocka_unit_test(test_record_and_origins_survive),
        cmocka_unit_test(test_gradient_nodes_named),
        cmocka_unit_test(test_fused_names_kept_where_ops_fail),
        cmocka_unit_test(test_multi_output_inplace),
        cmocka_unit_test(test_version_2_file),
        cmocka_unit_test(test_version_3_file),
        cmocka_unit_test(test_restored_errors_name_nodes_alike),
        cmocka_unit_test(test_fuzz_seeds_reach_graph_sections),
        cmocka_unit_test(test_copy_swap_and_call_n),
        cmocka_unit_test(test_copy_unfolded),
        cmocka_unit_test(test_save_two_states_refused),
        cmocka_unit_test(test_stale_inplace_hints_dropped),
        cmocka_unit_test(test_unknown_conv_lengths_restore),
        cmocka_unit_test(test_damaged_files_refused),
        cmocka_unit_test(test_other_blas),
        cmocka_unit_test(test_fixed_fields_refused),
        cmocka_unit_test(test_kill_during_save_keeps_old_file),
        cmocka_unit_test(test_section_loader_rules),
        cmocka_unit_test(test_section_field_names),
        cmocka_unit_test(test_section_export_types),
        cmocka_unit_test(test_export_keeps_nan_bits),
        cmocka_unit_test(test_export_output_listed_twice),
        cmocka_unit_test(test_section_stale_inplace_dropped),
        cmocka_unit_test(test_section_shared_inplace),
        cmocka_unit_test(test_section_version_3),
        cmocka_unit_test(test_section_version_4),
        cmocka_unit_test(test_nul_refused),
        cmocka_unit_test(test_section_repeated_strings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
