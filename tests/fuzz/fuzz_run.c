/* libFuzzer target: running what loads. Each function of the graph (four
 * at most, from one the hash picks) is compiled, with preset none or
 * fast_run as the input's hash says, and called twice on inputs of its
 * declared types: lengths the file leaves unknown are 0 to 4, values
 * small (integers -3 to 3 as the dtype allows, floats in [-3, 3] with a
 * NaN, an inf or a -0 now and then), all drawn from the hash. Nothing may crash, leak or trip a
 * sanitizer; a call may fail (a shape that does not match at run time, an
 * assert, a singular matrix), with its error on the context. One function
 * in four also goes through a .tgf file before its first call: saved,
 * restored, and called on the same inputs, it must give the same status
 * and the same outputs bit for bit (a violation aborts). A function of
 * fewer than 20,000 nodes is then called a third time under the NaN guard.
 *
 * So that each input costs milliseconds: fused bodies run in the
 * interpreter (no C compiler per input), a function whose inputs would
 * hold more than 2^16 elements is compiled but not called, and a call of
 * a function of 20,000 nodes or more stops after 20,000 (a hook; others
 * run without, as a user's calls do). One allocation of more than 64 MiB
 * fails, as it would on a machine without the memory: a graph asking for
 * an absurd array must get an error, not the allocation. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h" /* tg_errorf */
#include "tg/tg.h"

enum { MAX_FUNCTIONS = 4, MAX_ELEMENTS = 1 << 16, MAX_NODES = 20000 };
static const size_t MAX_ALLOC = (size_t)64 << 20;

static void *capped_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (n == 0) {
        free(p);
        return NULL;
    }
    return n > MAX_ALLOC ? NULL : realloc(p, n);
}

static uint64_t rng;
static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int budget_hook(void *ud, const tg_function *f, int node, tg_array *const *inputs, tg_ctx *ctx) {
    (void)f, (void)node, (void)inputs;
    int *left = ud;
    if (--*left > 0) return 0;
    return tg_errorf(ctx, TG_ESTOPPED, "fuzz_run: node budget spent");
}

/* The budget hook on f where its schedule could spend it, else none: a
 * hooked call runs as a debugger's does, copying the shared values it
 * would otherwise update in place (vm/function.c), a path the plain calls
 * must cover. */
static void budget_if_large(tg_function *f, const tg_hooks *h) {
    tg_function_set_hooks(f, tg_function_node_count(f) >= MAX_NODES ? h : NULL);
}

/* An input of f's declared type, or NULL when it would be too large. */
static tg_array *make_input(const tg_function *f, int i) {
    tg_dtype dt = tg_function_input_dtype(f, i);
    int nd = tg_function_input_ndim(f, i);
    const int64_t *decl = tg_function_input_shape(f, i);
    if (nd < 0 || nd > 8 || dt == TG_DTYPE_INVALID) return NULL;
    int64_t shape[8], n = 1;
    for (int d = 0; d < nd; d++) {
        shape[d] = decl && decl[d] >= 0 ? decl[d] : (int64_t)(next() % 5);
        if (shape[d] > MAX_ELEMENTS || (shape[d] && n > MAX_ELEMENTS / shape[d])) return NULL;
        n *= shape[d];
    }
    tg_array *v = tg_array_new(TG_FLOAT64, nd, shape);
    if (!v) return NULL;
    double *p = tg_array_data(v);
    char kind = tg_dtype_kind(dt);
    for (int64_t k = 0; k < n; k++) {
        uint64_t r = next();
        if (kind == 'b')
            p[k] = (double)(r & 1);
        else if (kind == 'u')
            p[k] = (double)(r % 4);
        else if (kind == 'i')
            p[k] = (double)(int)(r % 7) - 3;
        else
            switch (r % 64) {
            case 0: p[k] = NAN; break;
            case 1: p[k] = INFINITY; break;
            case 2: p[k] = -INFINITY; break;
            case 3: p[k] = -0.0; break;
            default: p[k] = (double)(int)(r % 61) / 10.0 - 3.0;
            }
    }
    tg_array *a = dt == TG_FLOAT64 ? tg_array_ref(v) : tg_array_copy(v, dt);
    tg_array_free(v);
    return a;
}

/* The same bytes: dtype, shape and every byte of the data (so NaNs of
 * the same payload compare equal, and -0 differs from 0). */
static bool same_bits(const tg_array *a, const tg_array *b) {
    if (tg_array_dtype(a) != tg_array_dtype(b) || tg_array_ndim(a) != tg_array_ndim(b)) return false;
    for (int d = 0; d < tg_array_ndim(a); d++)
        if (tg_array_shape(a)[d] != tg_array_shape(b)[d]) return false;
    tg_array *ca = tg_array_copy(a, tg_array_dtype(a)), *cb = tg_array_copy(b, tg_array_dtype(b));
    if (!ca || !cb) abort(); /* (small arrays: the cap cannot refuse them) */
    bool same = !memcmp(tg_array_data(ca), tg_array_data(cb), (size_t)tg_array_size(ca) * tg_dtype_size(tg_array_dtype(ca)));
    tg_array_free(ca);
    tg_array_free(cb);
    return same;
}

/* Call f once with the node budget; the outputs in out (NULLs on
 * failure). The status. */
static int call_once(tg_function *f, tg_array *const *in, tg_array **out, int nout, tg_ctx *ctx) {
    int left = MAX_NODES;
    tg_hooks h = {.before = budget_hook, .ud = &left};
    budget_if_large(f, &h);
    for (int k = 0; k < nout; k++) out[k] = NULL;
    int rc = tg_function_call(f, in, out, ctx);
    tg_ctx_clear(ctx);
    return rc;
}

static void free_outputs(tg_array **out, int nout) {
    for (int k = 0; k < nout; k++) {
        tg_array_free(out[k]);
        out[k] = NULL;
    }
}

/* Where a function is saved for the round trip below: memory-backed when
 * /dev/shm is there. */
static char tgf_path[64];
static void remove_tgf(void) { unlink(tgf_path); }

static void run_function(tg_graph *g, int index, const char *preset, bool round_trip, tg_ctx *ctx) {
    tg_compile_options o = {.preset = preset, .device = "cpu"};
    tg_function *f = tg_function_compile(g, index, &o, ctx);
    if (!f) return;
    int nin = tg_function_input_count(f), nout = tg_function_output_count(f);
    tg_array **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out),
             **back = calloc((size_t)nout + 1, sizeof *back);
    bool ok = in && out && back;
    for (int i = 0; ok && i < nin; i++) ok = (in[i] = make_input(f, i)) != NULL;
    /* Saved before the first call (its shared values as compiled), then
     * restored and called on the same inputs, the function must do
     * exactly what it did: the same status, the same outputs bit for bit
     * (issue 6: compile -> save -> restore -> run is bit-identical). */
    tg_tgf *t = NULL;
    if (ok && round_trip) {
        tg_tgf_save_info info = {.source = g, .options = &o};
        if (tg_tgf_save(tgf_path, &f, 1, &info, ctx) == TG_OK && !(t = tg_tgf_load(tgf_path, NULL, ctx)))
            abort(); /* what tg saved must load */
        tg_ctx_clear(ctx);
    }
    for (int call = 0; ok && call < 2; call++) {
        int rc = call_once(f, in, out, nout, ctx);
        if (call == 0 && t) {
            tg_function *r = tg_tgf_function(t, 0);
            if (!r || call_once(r, in, back, nout, ctx) != rc) abort();
            for (int k = 0; rc == TG_OK && k < nout; k++)
                if (!same_bits(out[k], back[k])) abort();
            free_outputs(back, nout);
        }
        free_outputs(out, nout);
    }
    /* Once more under the NaN guard: its proofs for the updates it lets
     * overwrite shared values in place (debug/nanguard.c), on whatever
     * the graph holds. Any status; no crash, no leak. */
    if (ok && tg_function_node_count(f) < MAX_NODES) {
        tg_function_set_hooks(f, NULL);
        tg_nanguard *ng = tg_nanguard_new(f, NULL, ctx);
        if (ng) {
            for (int k = 0; k < nout; k++) out[k] = NULL;
            tg_nanguard_call(ng, in, out, ctx);
            free_outputs(out, nout);
            tg_nanguard_free(ng);
        }
        tg_ctx_clear(ctx);
    }
    tg_tgf_free(t);
    for (int i = 0; in && i < nin; i++) tg_array_free(in[i]);
    free(in);
    free(out);
    free(back);
    tg_function_free(f);
}

/* TG_FUZZ_DIFF=DIR (a hunting mode, not run in CI): each function is
 * compiled with none and with fast_run and called once on the same
 * inputs; where the unoptimized call succeeds with finite values and the
 * optimized one fails, or gives another dtype or shape, or values apart
 * by more than a tolerance, the input goes to DIR with a line saying
 * what differed. */
static const char *diff_dir;
static const uint8_t *cur_data;
static size_t cur_size;

static void diff_report(const char *fn, const char *what) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < cur_size; i++) h = (h ^ cur_data[i]) * 1099511628211ull;
    char path[512];
    snprintf(path, sizeof path, "%s/%016llx.json", diff_dir, (unsigned long long)h);
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fwrite(cur_data, 1, cur_size, fp);
        fclose(fp);
    }
    fprintf(stderr, "DIFF %s function %s: %s\n", path, fn, what);
}

/* g and g2: the same file loaded twice, so that the shared values one
 * call updates are not those the other reads. */
static void diff_function(tg_graph *g, tg_graph *g2, int index, tg_ctx *ctx) {
    tg_compile_options on = {.preset = "none", .device = "cpu"}, or = {.preset = "fast_run", .device = "cpu"};
    tg_function *fn = tg_function_compile(g, index, &on, ctx);
    tg_ctx_clear(ctx);
    tg_function *fr = fn ? tg_function_compile(g2, index, &or, ctx) : NULL;
    char what[512];
    if (fn && !fr) {
        snprintf(what, sizeof what, "fast_run does not compile: %s", tg_ctx_message(ctx));
        diff_report(tg_graph_function_name(g, index), what);
    }
    tg_ctx_clear(ctx);
    if (!fn || !fr) {
        tg_function_free(fn);
        tg_function_free(fr);
        return;
    }
    int nin = tg_function_input_count(fn), nout = tg_function_output_count(fn);
    tg_array **in = calloc((size_t)nin + 1, sizeof *in), **a = calloc((size_t)nout + 1, sizeof *a),
             **b = calloc((size_t)nout + 1, sizeof *b);
    bool ok = in && a && b && tg_function_output_count(fr) == nout;
    for (int i = 0; ok && i < nin; i++) ok = (in[i] = make_input(fn, i)) != NULL;
    if (ok) {
        int left = MAX_NODES;
        tg_hooks h = {.before = budget_hook, .ud = &left};
        budget_if_large(fn, &h);
        int rn = tg_function_call(fn, in, a, ctx);
        bool budget = rn != TG_OK && strstr(tg_ctx_message(ctx), "budget");
        tg_ctx_clear(ctx);
        left = MAX_NODES;
        budget_if_large(fr, &h);
        int rr = tg_function_call(fr, in, b, ctx);
        snprintf(what, sizeof what, "%s", rr ? tg_ctx_message(ctx) : "");
        tg_ctx_clear(ctx);
        const char *name = tg_graph_function_name(g, index);
        if (rn == TG_OK && rr != TG_OK) {
            char w[600];
            snprintf(w, sizeof w, "none runs, fast_run fails: %s", what);
            diff_report(name, w);
        }
        for (int k = 0; rn == TG_OK && rr == TG_OK && !budget && k < nout; k++) {
            const tg_array *x = a[k], *y = b[k];
            bool shape = tg_array_ndim(x) == tg_array_ndim(y);
            for (int d = 0; shape && d < tg_array_ndim(x); d++) shape = tg_array_shape(x)[d] == tg_array_shape(y)[d];
            if (tg_array_dtype(x) != tg_array_dtype(y) || !shape) {
                snprintf(what, sizeof what, "output %d: dtype or shape differs (%s, ndim %d; %s, ndim %d)", k,
                         tg_dtype_name(tg_array_dtype(x)), tg_array_ndim(x), tg_dtype_name(tg_array_dtype(y)),
                         tg_array_ndim(y));
                diff_report(name, what);
                break;
            }
            tg_array *cx = tg_array_copy(x, TG_FLOAT64), *cy = tg_array_copy(y, TG_FLOAT64);
            if (!cx || !cy) abort();
            const double *px = tg_array_data(cx), *py = tg_array_data(cy);
            double tol = tg_array_dtype(x) == TG_FLOAT64 ? 1e-9 : tg_array_dtype(x) == TG_FLOAT16 ? 1e-2 : 1e-5;
            if (getenv("TG_FUZZ_DIFF_TOL")) tol = atof(getenv("TG_FUZZ_DIFF_TOL"));
            for (int64_t e = 0; e < tg_array_size(cx); e++) {
                double u = px[e], v = py[e];
                if (!isfinite(u)) continue;
                if (isfinite(v) && fabs(u - v) <= tol * (1 + fabs(u) + fabs(v))) continue;
                snprintf(what, sizeof what, "output %d element %lld: none %.17g, fast_run %.17g", k, (long long)e, u, v);
                diff_report(name, what);
                break;
            }
            tg_array_free(cx);
            tg_array_free(cy);
        }
    }
    for (int i = 0; in && i < nin; i++) tg_array_free(in[i]);
    if (a) free_outputs(a, nout);
    if (b) free_outputs(b, nout);
    free(in);
    free(a);
    free(b);
    tg_function_free(fn);
    tg_function_free(fr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool ready;
    if (!ready) {
        setenv("TG_COMPOSITE", "interp", 1);
        tg_set_allocator(capped_realloc, NULL);
        snprintf(tgf_path, sizeof tgf_path, "%s/tg_fuzz_run.%ld.tgf",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
        atexit(remove_tgf);
        diff_dir = getenv("TG_FUZZ_DIFF");
        ready = true;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the input */
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
    rng = h;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string((const char *)data, size, NULL, "fuzz", ctx);
    if (g && diff_dir) {
        cur_data = data;
        cur_size = size;
        int nf = tg_graph_function_count(g);
        tg_graph *g2 = tg_graph_load_string((const char *)data, size, NULL, "fuzz", ctx);
        for (int k = 0; g2 && k < nf && k < MAX_FUNCTIONS; k++) diff_function(g, g2, k, ctx);
        tg_graph_free(g2);
        tg_graph_free(g);
    } else if (g) {
        int nf = tg_graph_function_count(g), start = nf ? (int)(next() % (uint64_t)nf) : 0;
        for (int k = 0; k < nf && k < MAX_FUNCTIONS; k++)
            run_function(g, (start + k) % nf, next() & 1 ? "fast_run" : "none", (next() & 3) == 0, ctx);
        tg_graph_free(g);
    }
    tg_ctx_free(ctx);
    return 0;
}
