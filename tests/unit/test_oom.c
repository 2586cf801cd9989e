/* Out of memory through the library's entry points, on the example graphs
 * (the graphs of examples/): loading, compiling under each preset, calling,
 * saving and restoring .tgf files, profiling and the NaN guard. Each step
 * runs once with its k-th allocation failing, for every k (or, where a
 * step makes many, the first ones and a spread over the rest): it must
 * fail with one "out of memory" line (or succeed with the right result,
 * where the allocation was one it can do without), leave what it was
 * given as it was, and leak nothing (the sanitizer build's leak check,
 * asked whenever a failed step left blocks allocated, and at exit). Then
 * the step with no failure gives the right result.
 *
 * TG_OOM_ALL=1 sweeps every allocation of every step (about half an hour
 * under the sanitizers: reoptimizing rnn.json's .tgf alone makes 8,000);
 * TG_OOM_BUDGET=N tries N allocations of each step (default: all of a
 * step making up to 630, then fewer, down to 64, as steps grow);
 * TG_OOM_VERBOSE=1 prints each step's counts, TG_OOM_TRACE=1 where each
 * allocation a step did without was made, TG_OOM_LIVE=1 where those were
 * made after which a failed step left blocks allocated (a leak, or a
 * cache). An argument runs the tests whose names match it.
 *
 * json-c's own allocations (it parses graph files and .tgf headers, and
 * builds the text tg writes) go to the C library, not through tg's
 * allocator, and are not swept here. A sweep that failed them (malloc and
 * its kin defined in this program, failing the calls made from inside
 * libjson-c; tried 2026-12-04) found json-c 0.16 itself unsafe: a parse
 * whose key copy fails passes the NULL key on and crashes, a string
 * buffer that cannot grow is cut short in silence (a base64 value came
 * back empty), and a tokener made in part is leaked. What it showed of
 * tg: a parse that ran out returns nothing and reports success, which
 * the loaders printed as "invalid JSON: success"; tg_json_parse_object
 * (io/value.c) now calls that out of memory. */
#include <dirent.h>
#include <execinfo.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

#define EX TG_SOURCE_DIR "/examples/"

/* ---- the failing allocator ----
 *
 * Kernels may allocate from OpenMP threads: the counters are atomic. `live`
 * counts the blocks allocated and not yet freed, so that a step that must
 * leave nothing behind can be checked at each k (the leak check at exit
 * only says that something leaked, not at which k). */
static atomic_long oom_n, oom_at, oom_live;
static atomic_bool oom_hit;
/* Where the failing allocation was made: printed when a step mishandles
 * it, and with TG_OOM_TRACE=1 for each one a step did without
 * (symbolized in the sanitizer build). */
static bool oom_trace;
static void *oom_frames[24];
static int oom_depth;

static void print_trace(void) {
    for (int i = 1; i < oom_depth; i++) {
#ifdef __SANITIZE_ADDRESS__
        char buf[512];
        __sanitizer_symbolize_pc(oom_frames[i], "%f %S", buf, sizeof buf);
        printf("      %s\n", buf);
#else
        printf("      %p\n", oom_frames[i]);
#endif
    }
}

static void *oom_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (n == 0) {
        if (p) atomic_fetch_sub(&oom_live, 1);
        free(p);
        return NULL;
    }
    if (atomic_fetch_add(&oom_n, 1) + 1 == atomic_load(&oom_at)) {
        atomic_store(&oom_hit, true);
        oom_depth = backtrace(oom_frames, 24);
        return NULL;
    }
    void *q = realloc(p, n);
    if (q && !p) atomic_fetch_add(&oom_live, 1);
    return q;
}

static void oom_arm(long at) {
    atomic_store(&oom_n, 0);
    atomic_store(&oom_at, at);
    atomic_store(&oom_live, 0);
    atomic_store(&oom_hit, false);
    tg_set_allocator(oom_realloc, NULL);
}

static void oom_disarm(void) { tg_set_allocator(NULL, NULL); }

static long env_long(const char *name, long dflt) {
    const char *e = getenv(name);
    return e && *e ? atol(e) : dflt;
}

/* ---- one step, swept ----
 *
 * run() makes the call; after a success done() checks what it made and
 * frees it; after a failure failed() (optional) checks that what the
 * step was given is as it was. `pure`: a step leaves no block allocated
 * once what it made is freed (no buffer pool), but for what the process
 * caches (blocks left are then asked of the leak checker). */
typedef struct step step;
struct step {
    const char *what;
    void (*before)(step *s); /* optional: before each run, not failing */
    int (*run)(step *s, tg_ctx *ctx);
    void (*done)(step *s);
    void (*failed)(step *s);
    bool pure;
    /* what the steps work on */
    const char *path, *dir, *name, *preset;
    int fidx;
    const char *json;
    size_t len;
    tg_graph *g;
    tg_function *f, *fs[8];
    int nf;
    tg_array **in;
    tg_array *out[8];
    tg_array *snap[8];
    tg_graph *gmade;
    tg_function *fmade;
    tg_tgf *tmade;
    tg_tgf *t;
    char *smade;
    tg_profile *prof;
    tg_nanguard *guard;
    const tg_tgf_load_options *lopts;
    long tolerated; /* successes with an allocation failing */
    long budget;    /* allocations to try, where before() is slow (0: by n) */
};

/* The status of a call that returned NULL: one with no error on ctx is
 * a failure that nothing reported. */
static int made(const void *p, const tg_ctx *ctx) {
    if (p) return TG_OK;
    if (tg_ctx_status(ctx) == TG_OK) {
        print_trace();
        fail_msg("returned NULL with no error on ctx (allocation %ld failing)", atomic_load(&oom_at));
    }
    return tg_ctx_status(ctx);
}

static void check_oom_message(const step *s, long k, const tg_ctx *ctx, int rc) {
    const char *m = tg_ctx_message(ctx);
    if (!strstr(m, "out of memory") && !strstr(m, "cannot allocate")) {
        print_trace();
        fail_msg("%s: allocation %ld failed: status %d (%s), message '%s'", s->what, k, rc, tg_status_str(rc), m);
    }
    if (tg_ctx_status(ctx) != rc) fail_msg("%s: allocation %ld: returned %d, ctx holds %d", s->what, k, rc,
                                           tg_ctx_status(ctx));
}

/* Blocks a failed step left allocated are either leaked or kept by a
 * cache of the process (the composite kernels' signatures): the leak
 * checker tells them apart where there is one (it prints what leaked). */
static bool leaked(void) {
#ifdef __SANITIZE_ADDRESS__
    return __lsan_do_recoverable_leak_check() != 0;
#else
    return false;
#endif
}

/* Which k to try: all of 1..n when n <= budget, else the first budget/2
 * and budget/2 spread evenly over the rest (deterministic). */
static long next_k(long k, long n, long budget) {
    if (n <= budget || k < budget / 2) return k + 1;
    long rest = n - budget / 2, half = budget - budget / 2;
    long i = (k - budget / 2) * half / rest + 1; /* the next spread point */
    long nk = budget / 2 + (rest * i + half - 1) / half;
    return nk > k ? nk : k + 1;
}

/* The step with nothing failing must succeed, and make the right thing. */
static void run_clean(step *s, tg_ctx *ctx, const char *when) {
    if (s->before) s->before(s);
    oom_arm(0);
    int rc = s->run(s, ctx);
    oom_disarm();
    if (rc) fail_msg("%s: fails %s: %s", s->what, when, tg_ctx_message(ctx));
    s->done(s);
}

static void sweep(step *s) {
    tg_ctx *ctx = tg_ctx_new();
    oom_trace = env_long("TG_OOM_TRACE", 0) != 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Twice without failure: the first warms what the library keeps for
     * the process (op tables, compiled kernels), the second counts. */
    for (int w = 0; w < 2; w++) run_clean(s, ctx, "with no allocation failing");
    long n = atomic_load(&oom_n);
    /* A run takes time about in proportion to its allocations: the
     * smaller steps are swept whole, the larger ones at fewer points. */
    long budget = env_long("TG_OOM_ALL", 0) ? n + 1 : env_long("TG_OOM_BUDGET", 0);
    if (budget <= 0) budget = s->budget ? s->budget : n ? 400000 / n : 1;
    if (budget < 64) budget = 64;
    long tried = 0;
    s->tolerated = 0;
    for (long k = 1; k <= n; k = next_k(k, n, budget)) {
        tried++;
        if (s->before) s->before(s);
        oom_arm(k);
        int rc = s->run(s, ctx);
        /* Nothing fails from here on, and blocks are still counted, so
         * that what done() frees is counted too. */
        atomic_store(&oom_at, 0);
        bool hit = atomic_load(&oom_hit);
        if (rc == TG_OK) {
            /* Succeeded: it must have done without the block, and made
             * the right thing. */
            s->done(s);
            if (hit) {
                s->tolerated++;
                if (oom_trace) {
                    printf("%s: did without allocation %ld of %ld:\n", s->what, k, n);
                    print_trace();
                }
            }
        } else {
            if (!hit)
                fail_msg("%s: failed at allocation %ld, which did not fail: %s", s->what, k, tg_ctx_message(ctx));
            check_oom_message(s, k, ctx, rc);
            if (s->failed) s->failed(s);
        }
        long live = atomic_load(&oom_live);
        oom_disarm();
        if (s->pure && live != 0 && getenv("TG_OOM_LIVE")) {
            printf("%s: k %ld live %ld\n", s->what, k, live);
            print_trace();
        }
        if (s->pure && live != 0 && leaked()) {
            print_trace();
            fail_msg("%s: allocation %ld %s, and %ld blocks were left allocated (%s)", s->what, k,
                     rc ? "failed" : "failed (the step did without it)", live, tg_ctx_message(ctx));
        }
        tg_ctx_clear(ctx);
    }
    /* And once more with nothing failing. */
    run_clean(s, ctx, "after the sweep");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (env_long("TG_OOM_VERBOSE", 0))
        printf("%-40s %6ld allocations, %5ld tried, %3ld tolerated, %.2f s\n", s->what, n, tried, s->tolerated,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    tg_ctx_free(ctx);
}

/* ---- the examples ---- */

typedef struct example {
    const char *file;  /* under examples/ */
    const char *fname; /* the function swept */
    const char *const *shared;
    int nin, nout;
    tg_array *in[2];
    tg_array *want[8]; /* its outputs on the first call (preset none) */
} example;

static const char *const mlp_shared[] = {"W1", "b1", "W2", "b2", NULL};
static const char *const rnn_shared[] = {"Emb", "Wx", "Wh", "bh", "Wy", "by", NULL};
static const char *const conv_shared[] = {"w1", "b1", "w2", "b2", "W3", "b3", NULL};
static const char *const no_shared[] = {NULL};

static example examples[4];
static example *cur; /* the example the steps work on */

static tg_graph *load_file(const char *path) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(path, ctx);
    if (!g) fail_msg("%s: %s", path, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return g;
}

static tg_function *compile(tg_graph *g, const char *fname, const char *preset) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.preset = preset};
    int i = tg_graph_function_find(g, fname, ctx);
    tg_function *f = i >= 0 ? tg_function_compile(g, i, &o, ctx) : NULL;
    if (!f) fail_msg("compile %s: %s", fname, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

static int find_fn(const tg_graph *g, const char *fname) {
    tg_ctx *ctx = tg_ctx_new();
    int i = tg_graph_function_find(g, fname, ctx);
    tg_ctx_free(ctx);
    assert_true(i >= 0);
    return i;
}

static void call_ok(tg_function *f, tg_array **in, tg_array **out) {
    tg_ctx *ctx = tg_ctx_new();
    if (tg_function_call(f, in, out, ctx)) fail_msg("call: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
}

static tg_array *npy(const char *path) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = tg_npy_load(path, ctx);
    if (!a) fail_msg("%s: %s", path, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return a;
}

/* x (rows, 784) in [0, 1), y one-hot: the data of mlp and convnet. */
static void digits(example *e, int64_t rows) {
    int64_t xs[2] = {rows, 784}, ys[2] = {rows, 10};
    e->in[0] = tg_array_new(TG_FLOAT32, 2, xs);
    e->in[1] = tg_array_new(TG_FLOAT32, 2, ys);
    float *x = tg_array_data(e->in[0]), *y = tg_array_data(e->in[1]);
    uint32_t r = 12345;
    for (int64_t i = 0; i < rows * 784; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / 16777216.0f;
    }
    for (int64_t i = 0; i < rows; i++) y[i * 10 + (i * 7) % 10] = 1;
}

static void example_path(char *buf, size_t size, const example *e) {
    snprintf(buf, size, "%s%s", EX, e->file);
}

static int setup(void **state) {
    (void)state;
    examples[0] = (example){"mlp.json", "train", mlp_shared, 2, 1, {0}, {0}};
    digits(&examples[0], 8);
    examples[1] = (example){"rnn.json", "train", rnn_shared, 2, 1, {0}, {0}};
    examples[1].in[0] = npy(EX "rnn/x.npy");
    examples[1].in[1] = npy(EX "rnn/y.npy");
    examples[2] = (example){"convnet.json", "train", conv_shared, 2, 1, {0}, {0}};
    digits(&examples[2], 2);
    examples[3] = (example){"ifelse.json", "grad", no_shared, 1, 2, {0}, {0}};
    examples[3].in[0] = tu_f64(1, (int64_t[]){2}, (double[]){3, 4});
    /* What the first call gives: the graph as written, on a fresh load. */
    for (int i = 0; i < 4; i++) {
        example *e = &examples[i];
        char path[512];
        example_path(path, sizeof path, e);
        tg_graph *g = load_file(path);
        tg_function *f = compile(g, e->fname, "none");
        call_ok(f, e->in, e->want);
        tg_function_free(f);
        tg_graph_free(g);
    }
    /* The costs the examples start from: a softmax over ten classes
     * whose last layer starts at zero, and ifelse's sin(0.6) + sin(0.8). */
    tu_assert_near(tg_array_get_flat(examples[0].want[0], 0), log(10.0), 1e-5);
    tu_assert_near(tg_array_get_flat(examples[2].want[0], 0), log(10.0), 1e-5);
    tu_assert_near(tg_array_get_flat(examples[3].want[0], 0), sin(0.6) + sin(0.8), 1e-12);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 2; j++) tg_array_free(examples[i].in[j]);
        for (int j = 0; j < 8; j++) tg_array_free(examples[i].want[j]);
    }
    return 0;
}

static double rtol_of(const example *e) { return e->want[0] && tg_array_dtype(e->want[0]) == TG_FLOAT64 ? 1e-10 : 1e-4; }

/* The outputs of a call against the example's first-call values. */
static void check_outputs(const step *s, tg_array **out, int nout, const example *e) {
    for (int j = 0; j < nout; j++) {
        char msg[4096];
        if (!out[j]) fail_msg("%s: output %d missing", s->what, j);
        if (!tu_arrays_close(out[j], e->want[j], rtol_of(e), 1e-5, msg, sizeof msg))
            fail_msg("%s: output %d: %s", s->what, j, msg);
    }
}

static void free_outputs(tg_array **out, int n) {
    for (int j = 0; j < n; j++) {
        tg_array_free(out[j]);
        out[j] = NULL;
    }
}

/* A function made while an allocation failed, and made anyway, computes
 * the first call's values; its shared values are put back after. */
static void check_first_call(const step *s, tg_function *f) {
    tg_array *keep[8] = {0}, *out[8] = {0};
    tg_ctx *ctx = tg_ctx_new();
    for (int j = 0; cur->shared[j]; j++) {
        const tg_array *v = tg_function_shared_get(f, cur->shared[j]);
        assert_non_null(v);
        keep[j] = tg_array_copy(v, tg_array_dtype(v));
    }
    call_ok(f, cur->in, out);
    check_outputs(s, out, cur->nout, cur);
    free_outputs(out, cur->nout);
    for (int j = 0; cur->shared[j]; j++) {
        if (tg_function_shared_set(f, cur->shared[j], keep[j], ctx)) fail_msg("%s", tg_ctx_message(ctx));
        tg_array_free(keep[j]);
    }
    tg_ctx_free(ctx);
}

/* ---- loading ---- */

static int run_load(step *s, tg_ctx *ctx) {
    s->gmade = tg_graph_load(s->path, ctx);
    return made(s->gmade, ctx);
}

static int run_load_string(step *s, tg_ctx *ctx) {
    s->gmade = tg_graph_load_string(s->json, s->len, s->dir, s->name, ctx);
    return made(s->gmade, ctx);
}

/* A loaded graph compiles and computes the first call's values. */
static void done_load(step *s) {
    assert_int_equal(tg_graph_function_count(s->gmade), tg_graph_function_count(s->g));
    assert_int_equal(tg_graph_node_count(s->gmade), tg_graph_node_count(s->g));
    if (atomic_load(&oom_hit)) {
        tg_function *f = compile(s->gmade, cur->fname, "none");
        check_first_call(s, f);
        tg_function_free(f);
    }
    tg_graph_free(s->gmade);
    s->gmade = NULL;
}

static int run_to_string(step *s, tg_ctx *ctx) {
    s->smade = tg_graph_to_string(s->g, ctx);
    return made(s->smade, ctx);
}

/* The text a step wrote (s->smade, freed) loads again; its node count,
 * or -1 when no count is expected. */
static void loads_back(step *s, const char *dir, int nodes) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(s->smade, strlen(s->smade), dir, "written", ctx);
    if (!g) fail_msg("%s: what it wrote does not load: %s", s->what, tg_ctx_message(ctx));
    if (nodes >= 0) assert_int_equal(tg_graph_node_count(g), nodes);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    tg_string_free(s->smade);
    s->smade = NULL;
}

/* The text written loads again into the same graph. */
static void done_to_string(step *s) { loads_back(s, EX, tg_graph_node_count(s->g)); }

static char tmpdir[64];

/* Nothing in the folder but `keep` (NULL: nothing at all): a failed save
 * leaves no temporary file behind. */
static void check_folder(const step *s, const char *keep) {
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (keep && !strcmp(de->d_name, keep)) continue;
        closedir(d);
        fail_msg("%s: left %s in the folder", s->what, de->d_name);
    }
    closedir(d);
}

static int run_graph_save(step *s, tg_ctx *ctx) { return tg_graph_save(s->g, s->name, ctx); }
static void done_graph_save(step *s) { assert_int_equal(unlink(s->name), 0); }
static void failed_graph_save(step *s) { check_folder(s, NULL); }

static void test_load(void **state) {
    (void)state;
    for (int i = 0; i < 4; i++) {
        cur = &examples[i];
        char path[512], what[128];
        example_path(path, sizeof path, cur);
        step s = {.what = what, .run = run_load, .done = done_load, .pure = true, .path = path};
        s.g = load_file(path);
        snprintf(what, sizeof what, "load %s", cur->file);
        sweep(&s);
        /* The same text from memory, npy paths relative to examples/. */
        char *json = tu_read_file(path, &s.len);
        s.json = json;
        s.dir = EX;
        s.name = cur->file;
        s.run = run_load_string;
        snprintf(what, sizeof what, "load_string %s", cur->file);
        sweep(&s);
        free(json);
        /* Writing the graph back, as text and to a file. */
        s.run = run_to_string, s.done = done_to_string;
        snprintf(what, sizeof what, "graph_to_string %s", cur->file);
        sweep(&s);
        char file[128];
        snprintf(tmpdir, sizeof tmpdir, "/tmp/tg-oom-XXXXXX");
        assert_non_null(mkdtemp(tmpdir));
        snprintf(file, sizeof file, "%s/g.json", tmpdir);
        s.name = file;
        s.run = run_graph_save, s.done = done_graph_save, s.failed = failed_graph_save;
        snprintf(what, sizeof what, "graph_save %s", cur->file);
        sweep(&s);
        assert_int_equal(rmdir(tmpdir), 0);
        /* What loaded after the sweeps computes the first call's values. */
        tg_function *f = compile(s.g, cur->fname, "none");
        tg_array *out[8] = {0};
        call_ok(f, cur->in, out);
        check_outputs(&s, out, cur->nout, cur);
        free_outputs(out, cur->nout);
        tg_function_free(f);
        tg_graph_free(s.g);
    }
}

/* ---- compiling ---- */

static int run_compile(step *s, tg_ctx *ctx) {
    tg_compile_options o = {.preset = s->preset};
    s->fmade = tg_function_compile(s->g, s->fidx, &o, ctx);
    return made(s->fmade, ctx);
}

static void done_compile(step *s) {
    assert_true(tg_function_node_count(s->fmade) > 0);
    if (atomic_load(&oom_hit)) check_first_call(s, s->fmade);
    tg_function_free(s->fmade);
    s->fmade = NULL;
}

static const char *const presets[] = {"none", "fast_compile", "fast_run"};

static void compile_example(int i) {
    cur = &examples[i];
    char path[512], what[128];
    example_path(path, sizeof path, cur);
    for (int p = 0; p < 3; p++) {
        step s = {.what = what, .run = run_compile, .done = done_compile, .pure = true, .preset = presets[p]};
        snprintf(what, sizeof what, "compile %s %s", cur->file, presets[p]);
        s.g = load_file(path);
        s.fidx = find_fn(s.g, cur->fname);
        sweep(&s);
        /* The graph is as it was: compiled now, it computes the first
         * call's values. */
        tg_function *f = compile(s.g, cur->fname, presets[p]);
        tg_array *out[8] = {0};
        call_ok(f, cur->in, out);
        check_outputs(&s, out, cur->nout, cur);
        free_outputs(out, cur->nout);
        tg_function_free(f);
        tg_graph_free(s.g);
    }
}

static void test_compile_mlp(void **state) { (void)state; compile_example(0); }
static void test_compile_rnn(void **state) { (void)state; compile_example(1); }
static void test_compile_convnet(void **state) { (void)state; compile_example(2); }
static void test_compile_ifelse(void **state) { (void)state; compile_example(3); }

/* ---- calling ---- */

/* Each call starts from the shared values the example starts from. */
static void snapshot(step *s, tg_function *f) {
    for (int j = 0; cur->shared[j]; j++) {
        const tg_array *v = tg_function_shared_get(f, cur->shared[j]);
        assert_non_null(v);
        s->snap[j] = tg_array_copy(v, tg_array_dtype(v));
    }
}

static void free_snapshot(step *s) {
    for (int j = 0; j < 8; j++) {
        tg_array_free(s->snap[j]);
        s->snap[j] = NULL;
    }
}

static void before_call(step *s) {
    tg_ctx *ctx = tg_ctx_new();
    for (int j = 0; cur->shared[j]; j++)
        if (tg_function_shared_set(s->f, cur->shared[j], s->snap[j], ctx))
            fail_msg("set %s: %s", cur->shared[j], tg_ctx_message(ctx));
    tg_ctx_free(ctx);
}

/* A failed call leaves the shared values as they were. */
static void failed_call(step *s) {
    for (int j = 0; cur->shared[j]; j++)
        if (!tg_array_equal(tg_function_shared_get(s->f, cur->shared[j]), s->snap[j]))
            fail_msg("%s: a failed call changed %s", s->what, cur->shared[j]);
    for (int j = 0; j < cur->nout; j++)
        if (s->out[j]) fail_msg("%s: a failed call returned output %d", s->what, j);
}

static int run_call(step *s, tg_ctx *ctx) { return tg_function_call(s->f, s->in, s->out, ctx); }

static void done_call(step *s) {
    check_outputs(s, s->out, cur->nout, cur);
    free_outputs(s->out, cur->nout);
}

static void sweep_call(step *s, tg_function *f, const char *what) {
    s->what = what;
    s->f = f;
    s->in = cur->in;
    s->before = before_call;
    s->run = run_call;
    s->done = done_call;
    s->failed = failed_call;
    s->pure = false; /* the buffer pool keeps what a call freed */
    snapshot(s, f);
    sweep(s);
    free_snapshot(s);
}

static void test_call(void **state) {
    (void)state;
    for (int i = 0; i < 4; i++) {
        cur = &examples[i];
        char path[512], what[128];
        example_path(path, sizeof path, cur);
        for (int p = 0; p < 3; p++) {
            step s = {0};
            tg_graph *g = load_file(path);
            tg_function *f = compile(g, cur->fname, presets[p]);
            snprintf(what, sizeof what, "call %s %s", cur->file, presets[p]);
            sweep_call(&s, f, what);
            tg_function_free(f);
            tg_graph_free(g);
        }
    }
}

/* ---- compiled-function files ---- */

static int run_save(step *s, tg_ctx *ctx) {
    tg_tgf_save_info info = {.source = s->g};
    return tg_tgf_save(s->path, s->fs, s->nf, &info, ctx);
}

static void done_save(step *s) { assert_int_equal(unlink(s->path), 0); }
static void failed_save(step *s) { check_folder(s, NULL); }

static int run_tgf_load(step *s, tg_ctx *ctx) {
    s->tmade = tg_tgf_load(s->path, s->lopts, ctx);
    return made(s->tmade, ctx);
}

/* A restored file computes the first call's values. */
static void check_tgf(step *s, tg_tgf *t) {
    tg_ctx *ctx = tg_ctx_new();
    int i = tg_tgf_function_find(t, cur->fname, ctx);
    tg_ctx_free(ctx);
    assert_true(i >= 0);
    tg_array *out[8] = {0};
    call_ok(tg_tgf_function(t, i), cur->in, out);
    check_outputs(s, out, cur->nout, cur);
    free_outputs(out, cur->nout);
}

static void done_tgf_load(step *s) {
    check_tgf(s, s->tmade);
    tg_tgf_free(s->tmade);
    s->tmade = NULL;
}

static int run_save_state(step *s, tg_ctx *ctx) { return tg_tgf_save_state(s->t, s->name, ctx); }
static void done_save_state(step *s) { assert_int_equal(unlink(s->name), 0); }
static void failed_save_state(step *s) { check_folder(s, "f.tgf"); }

static int run_export(step *s, tg_ctx *ctx) {
    s->smade = tg_tgf_export(s->t, s->fidx, ctx);
    return made(s->smade, ctx);
}

static void done_export(step *s) { loads_back(s, NULL, -1); }

static int run_original(step *s, tg_ctx *ctx) {
    s->gmade = tg_tgf_original(s->t, ctx);
    return made(s->gmade, ctx);
}

static void done_original(step *s) {
    assert_int_equal(tg_graph_node_count(s->gmade), tg_graph_node_count(s->g));
    tg_graph_free(s->gmade);
    s->gmade = NULL;
}

static int run_copy(step *s, tg_ctx *ctx) {
    const char *ids[1] = {cur->shared[0]};
    const tg_array *vals[1] = {s->snap[0]};
    s->fmade = tg_function_copy(s->f, ids, vals, cur->shared[0] ? 1 : 0, ctx);
    return made(s->fmade, ctx);
}

static void done_copy(step *s) {
    tg_array *out[8] = {0};
    call_ok(s->fmade, cur->in, out);
    check_outputs(s, out, cur->nout, cur);
    free_outputs(out, cur->nout);
    tg_function_free(s->fmade);
    s->fmade = NULL;
}

static void tgf_example(int i) {
    cur = &examples[i];
    char path[512], what[128], file[128], state_file[128];
    example_path(path, sizeof path, cur);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg-oom-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(file, sizeof file, "%s/f.tgf", tmpdir);
    snprintf(state_file, sizeof state_file, "%s/state.tgf", tmpdir);
    step s = {.what = what, .path = file, .g = load_file(path)};
    s.nf = tg_graph_function_count(s.g);
    assert_true(s.nf <= 8);
    for (int j = 0; j < s.nf; j++) s.fs[j] = compile(s.g, tg_graph_function_name(s.g, j), "fast_run");

    snprintf(what, sizeof what, "tgf_save %s", cur->file);
    s.run = run_save, s.done = done_save, s.failed = failed_save, s.pure = true;
    sweep(&s);

    tg_ctx *ctx = tg_ctx_new();
    tg_tgf_save_info info = {.source = s.g};
    if (tg_tgf_save(file, s.fs, s.nf, &info, ctx)) fail_msg("save: %s", tg_ctx_message(ctx));
    static const tg_tgf_load_options mapped = {0}, read = {.no_mmap = true}, reopt = {.reoptimize = true};
    const tg_tgf_load_options *lo[3] = {&mapped, &read, &reopt};
    const char *lname[3] = {"", " no_mmap", " reoptimize"};
    for (int l = 0; l < 3; l++) {
        snprintf(what, sizeof what, "tgf_load%s %s", lname[l], cur->file);
        s.run = run_tgf_load, s.done = done_tgf_load, s.failed = NULL, s.lopts = lo[l];
        sweep(&s);
    }

    /* What a loaded file offers. */
    s.t = tg_tgf_load(file, NULL, ctx);
    if (!s.t) fail_msg("load: %s", tg_ctx_message(ctx));
    s.name = state_file;
    snprintf(what, sizeof what, "tgf_save_state %s", cur->file);
    s.run = run_save_state, s.done = done_save_state, s.failed = failed_save_state;
    sweep(&s);
    s.fidx = tg_tgf_function_find(s.t, cur->fname, ctx);
    assert_true(s.fidx >= 0);
    snprintf(what, sizeof what, "tgf_export %s", cur->file);
    s.run = run_export, s.done = done_export, s.failed = NULL;
    sweep(&s);
    snprintf(what, sizeof what, "tgf_original %s", cur->file);
    s.run = run_original, s.done = done_original;
    sweep(&s);

    /* Copying a restored function (before any call changes its shared
     * values), and calling it. */
    int fi = tg_tgf_function_find(s.t, cur->fname, ctx);
    assert_true(fi >= 0);
    tg_function *f = tg_tgf_function(s.t, fi);
    /* (each copy's call updates the shared values it does not swap) */
    step cp = {.what = what, .f = f, .before = before_call, .run = run_copy, .done = done_copy, .pure = true};
    snprintf(what, sizeof what, "function_copy %s", cur->file);
    snapshot(&cp, f);
    sweep(&cp);
    before_call(&cp);
    free_snapshot(&cp);
    step c = {0};
    char cwhat[128];
    snprintf(cwhat, sizeof cwhat, "call restored %s", cur->file);
    sweep_call(&c, f, cwhat);

    tg_tgf_free(s.t);
    tg_ctx_free(ctx);
    for (int j = 0; j < s.nf; j++) tg_function_free(s.fs[j]);
    tg_graph_free(s.g);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(tmpdir), 0);
}

static void test_tgf_mlp(void **state) { (void)state; tgf_example(0); }
static void test_tgf_rnn(void **state) { (void)state; tgf_example(1); }
static void test_tgf_convnet(void **state) { (void)state; tgf_example(2); }
static void test_tgf_ifelse(void **state) { (void)state; tgf_example(3); }

/* ---- the profiler and the NaN guard ---- */

static int run_profile_new(step *s, tg_ctx *ctx) {
    s->prof = tg_profile_new(s->f, 2, ctx);
    return made(s->prof, ctx);
}

static void done_profile_new(step *s) {
    /* with the profiles of the scan's or op_from_graph's body */
    assert_int_equal(tg_profile_body_count(s->prof), s->nf);
    tg_profile_free(s->prof);
    s->prof = NULL;
}

static int run_profile_call(step *s, tg_ctx *ctx) { return tg_profile_call(s->prof, s->in, s->out, ctx); }

static int run_origins(step *s, tg_ctx *ctx) {
    tg_profile_origin *o = NULL;
    int n = tg_profile_origins(s->prof, &o, ctx);
    if (n < 0) return n;
    assert_true(n > 0);
    tg_profile_origins_free(o);
    return TG_OK;
}

static void done_nothing(step *s) { (void)s; }

static int run_guard_new(step *s, tg_ctx *ctx) {
    s->guard = tg_nanguard_new(s->f, NULL, ctx);
    return made(s->guard, ctx);
}

static void done_guard_new(step *s) {
    tg_nanguard_free(s->guard);
    s->guard = NULL;
}

static int run_guard_call(step *s, tg_ctx *ctx) { return tg_nanguard_call(s->guard, s->in, s->out, ctx); }

/* A guarded call that finds a NaN: stopping there is its success. */
static int run_guard_offence(step *s, tg_ctx *ctx) {
    int rc = tg_nanguard_call(s->guard, s->in, s->out, ctx);
    if (rc == TG_ESTOPPED) {
        const tg_offence *o = tg_nanguard_offence(s->guard);
        if (!o) fail_msg("%s: stopped with no offence", s->what);
        tg_ctx_clear(ctx);
        return TG_OK;
    }
    if (rc == TG_OK) fail_msg("%s: no offence found", s->what);
    return rc;
}

static void done_guard_offence(step *s) {
    const tg_offence *o = tg_nanguard_offence(s->guard);
    assert_non_null(o);
    assert_int_equal(o->where, TG_OFFENCE_NODE);
    for (int j = 0; j < cur->nout; j++) assert_null(s->out[j]);
}

/* A function whose bodies are not compiled yet: the profile compiles
 * them. */
static void before_fresh(step *s) {
    tg_function_free(s->f);
    s->f = compile(s->g, cur->fname, "fast_run");
}

static void hooks_example(int i) {
    cur = &examples[i];
    char path[512], what[128];
    example_path(path, sizeof path, cur);
    tg_graph *g = load_file(path);
    tg_function *f = compile(g, cur->fname, "fast_run");
    tg_ctx *ctx = tg_ctx_new();
    step s = {.what = what, .f = f, .run = run_profile_new, .done = done_profile_new, .pure = true};
    s.prof = tg_profile_new(f, 0, ctx);
    assert_non_null(s.prof);
    s.nf = tg_profile_body_count(s.prof);
    tg_profile_free(s.prof);
    snprintf(what, sizeof what, "profile_new %s", cur->file);
    sweep(&s);
    if (s.nf) {
        step fresh = {.what = what, .g = g, .nf = s.nf, .before = before_fresh, .run = run_profile_new,
                      .done = done_profile_new, .budget = 64};
        snprintf(what, sizeof what, "profile_new (compiling bodies) %s", cur->file);
        sweep(&fresh);
        tg_function_free(fresh.f);
    }

    s.prof = tg_profile_new(f, 2, ctx);
    assert_non_null(s.prof);
    step c = {.prof = s.prof};
    char cwhat[128];
    snprintf(cwhat, sizeof cwhat, "profile_call %s", cur->file);
    c.run = run_profile_call;
    c.what = cwhat, c.f = f, c.in = cur->in, c.before = before_call, c.done = done_call, c.failed = failed_call;
    snapshot(&c, f);
    sweep(&c);
    snprintf(what, sizeof what, "profile_origins %s", cur->file);
    s.run = run_origins, s.done = done_nothing;
    sweep(&s);
    tg_profile_free(s.prof);
    s.prof = NULL;

    snprintf(what, sizeof what, "nanguard_new %s", cur->file);
    s.run = run_guard_new, s.done = done_guard_new;
    sweep(&s);
    c.guard = tg_nanguard_new(f, NULL, ctx);
    assert_non_null(c.guard);
    snprintf(cwhat, sizeof cwhat, "nanguard_call %s", cur->file);
    c.run = run_guard_call;
    sweep(&c);
    free_snapshot(&c);
    tg_nanguard_free(c.guard);

    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

static void test_hooks_mlp(void **state) { (void)state; hooks_example(0); }
static void test_hooks_rnn(void **state) { (void)state; hooks_example(1); }
static void test_hooks_ifelse(void **state) { (void)state; hooks_example(3); }

/* At x = 0 the backward pass of ifelse.json's untaken branch divides by
 * zero: the guard finds the NaN (looking into the op_from_graph's body,
 * which compiles and runs it again) with each allocation failing. */
static void test_nanguard_offence(void **state) {
    (void)state;
    cur = &examples[3];
    tg_graph *g = load_file(EX "ifelse.json");
    tg_function *f = compile(g, "grad", "fast_run");
    tg_ctx *ctx = tg_ctx_new();
    tg_array *x = tu_f64(1, (int64_t[]){2}, (double[]){0, 0});
    tg_array *in[1] = {x};
    step s = {.what = "nanguard offence ifelse.json", .f = f, .in = in, .run = run_guard_offence,
              .done = done_guard_offence};
    s.guard = tg_nanguard_new(f, NULL, ctx);
    assert_non_null(s.guard);
    sweep(&s);
    tg_nanguard_free(s.guard);
    tg_array_free(x);
    tg_ctx_free(ctx);
    tg_function_free(f);
    tg_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]); /* one test, or a pattern */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_compile_mlp),
        cmocka_unit_test(test_compile_rnn),
        cmocka_unit_test(test_compile_convnet),
        cmocka_unit_test(test_compile_ifelse),
        cmocka_unit_test(test_call),
        cmocka_unit_test(test_tgf_mlp),
        cmocka_unit_test(test_tgf_rnn),
        cmocka_unit_test(test_tgf_convnet),
        cmocka_unit_test(test_tgf_ifelse),
        cmocka_unit_test(test_hooks_mlp),
        cmocka_unit_test(test_hooks_rnn),
        cmocka_unit_test(test_hooks_ifelse),
        cmocka_unit_test(test_nanguard_offence),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
