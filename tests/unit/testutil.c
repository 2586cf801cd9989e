#define _GNU_SOURCE /* memmem */
#include "testutil.h"

#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/tgf.h"
#include "tensor/tensor.h"

tg_graph *tu_load(const char *json) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "test", ctx);
    if (!g) {
        char msg[TG_CTX_MSG_MAX + 32];
        snprintf(msg, sizeof msg, "load failed: %s", tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        fail_msg("%s", msg);
    }
    tg_ctx_free(ctx);
    return g;
}

char *tu_dq(const char *s) {
    char *r = strdup(s);
    if (!r) fail_msg("out of memory");
    for (char *p = r; *p; p++)
        if (*p == '\'') *p = '"';
    return r;
}

tg_graph *tu_load_sq(const char *json) {
    char *j = tu_dq(json);
    tg_graph *g = tu_load(j);
    free(j);
    return g;
}

int tu_load_fail(const char *json, char *msg, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "test", ctx);
    int st = tg_ctx_status(ctx);
    if (msg) snprintf(msg, size, "%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    if (g) {
        tg_graph_free(g);
        fail_msg("expected the graph to be rejected, but it loaded");
    }
    return st;
}

static void default_tol(tg_dtype dt, double *rtol, double *atol) {
    double r = 0;
    switch (dt) {
    case TG_FLOAT64: r = 1e-12; break;
    case TG_FLOAT32: r = 1e-5; break;
    case TG_FLOAT16: r = 1e-3; break;
    default: r = 0; break;
    }
    if (*rtol < 0) *rtol = r;
    if (*atol < 0) *atol = r;
}

static void shape_txt(const tg_array *a, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < a->ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
                              (long long)a->shape[i]);
    if (k < size) snprintf(buf + k, size - k, ")");
}

bool tu_arrays_close(const tg_array *got, const tg_array *want, double rtol,
                     double atol, char *msg, size_t size) {
    char gs[128], ws[128];
    if (!got) {
        snprintf(msg, size, "got no array");
        return false;
    }
    shape_txt(got, gs, sizeof gs);
    shape_txt(want, ws, sizeof ws);
    if (got->dtype != want->dtype || got->ndim != want->ndim ||
        memcmp(got->shape, want->shape, sizeof(int64_t) * (size_t)got->ndim)) {
        snprintf(msg, size, "got %s %s, want %s %s", tg_dtype_name(got->dtype),
                 gs, tg_dtype_name(want->dtype), ws);
        return false;
    }
    default_tol(want->dtype, &rtol, &atol);
    int64_t n = tg_array_size(want);
    bool is_float = tg_dtype_is_float(want->dtype);
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        double g = tg_array_get_flat(got, i), w = tg_array_get_flat(want, i);
        if (!is_float && (want->dtype == TG_INT64 || want->dtype == TG_UINT64)) {
            /* Exact 64-bit comparison: doubles lose the low bits. */
            int64_t gi, wi;
            int64_t idx[TG_MAX_NDIM];
            int64_t r = i;
            for (int d = want->ndim - 1; d >= 0; d--) {
                idx[d] = r % want->shape[d];
                r /= want->shape[d];
            }
            const char *pg = got->data, *pw = want->data;
            for (int d = 0; d < want->ndim; d++) {
                pg += idx[d] * got->strides[d];
                pw += idx[d] * want->strides[d];
            }
            memcpy(&gi, pg, 8);
            memcpy(&wi, pw, 8);
            ok = gi == wi;
            if (!ok) {
                const bool u = want->dtype == TG_UINT64;
                snprintf(msg, size, "%s %s: element %lld differs: got %s%" PRIu64 ", want %s%" PRIu64 " (exact)",
                         tg_dtype_name(want->dtype), ws, (long long)i, !u && gi < 0 ? "-" : "",
                         !u && gi < 0 ? 0 - (uint64_t)gi : (uint64_t)gi, !u && wi < 0 ? "-" : "",
                         !u && wi < 0 ? 0 - (uint64_t)wi : (uint64_t)wi);
                return false;
            }
        } else if (isnan(w)) {
            ok = isnan(g);
        } else if (isinf(w)) {
            ok = g == w;
        } else {
            ok = fabs(g - w) <= atol + rtol * fabs(w);
        }
        if (!ok) {
            snprintf(msg, size,
                     "%s %s: element %lld differs: got %.17g, want %.17g "
                     "(rtol %g, atol %g)",
                     tg_dtype_name(want->dtype), ws, (long long)i, g, w, rtol,
                     atol);
            return false;
        }
    }
    return true;
}

/* An allocator that fails its fail_at-th allocation. */
static long alloc_n, alloc_fail_at;
static void *failing_realloc(void *ud, void *p, size_t size) {
    (void)ud;
    if (size == 0) {
        free(p);
        return NULL;
    }
    if (++alloc_n == alloc_fail_at) return NULL;
    return realloc(p, size);
}

void tu_fail_allocation(long k) {
    alloc_n = 0;
    alloc_fail_at = k;
    tg_set_allocator(k ? failing_realloc : NULL, NULL);
}

/* (signed: what was allocated before the count began may be freed) */
static long long count_held, count_peak;
static double count_allocs, count_bytes;

static void *counting_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    long long was = p ? (long long)malloc_usable_size(p) : 0;
    if (n == 0) {
        free(p);
        count_held -= was;
        return NULL;
    }
    void *q = realloc(p, n);
    if (q) {
        count_allocs += 1;
        count_bytes += (double)n;
        count_held += (long long)malloc_usable_size(q) - was;
        if (count_held > count_peak) count_peak = count_held;
    }
    return q;
}

void tu_count_begin(void) {
    count_held = count_peak = 0;
    count_allocs = count_bytes = 0;
    tg_set_allocator(counting_realloc, NULL);
}

tu_alloc_count tu_count_end(void) {
    tg_set_allocator(NULL, NULL);
    return (tu_alloc_count){count_allocs, count_bytes, (double)count_peak};
}

long tu_call_failing_each(tg_function *f, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    for (long k = 1; k < 200; k++) {
        tu_fail_allocation(k);
        int rc = tg_function_call(f, in, out, ctx);
        tu_fail_allocation(0);
        if (rc == 0) return k - 1;
        const char *m = tg_ctx_message(ctx);
        if (!strstr(m, "out of memory") && !strstr(m, "cannot allocate"))
            fail_msg("allocation %ld failed: %s", k, m);
        tg_ctx_clear(ctx);
    }
    fail_msg("no call succeeded with one allocation failing");
    return -1;
}

tg_array *tu_f64(int ndim, const int64_t *shape, const double *data) {
    return tg_array_new_from(TG_FLOAT64, ndim, shape, data);
}

void tu_call(tg_graph *g, const char *name, tg_array *const *inputs,
             tg_array **outputs) {
    tu_call_preset(g, name, NULL, inputs, outputs);
}

void tu_call_preset(tg_graph *g, const char *name, const char *preset,
                    tg_array *const *inputs, tg_array **outputs) {
    tg_ctx *ctx = tg_ctx_new();
    char msg[TG_CTX_MSG_MAX + 32];
    int idx = tg_graph_function_find(g, name, ctx);
    tg_compile_options o = {.preset = preset};
    tg_function *f = idx >= 0 ? tg_function_compile(g, idx, &o, ctx) : NULL;
    if (!f || tg_function_call(f, inputs, outputs, ctx)) {
        snprintf(msg, sizeof msg, "call failed: %s", tg_ctx_message(ctx));
        tg_function_free(f);
        tg_ctx_free(ctx);
        fail_msg("%s", msg);
    }
    tg_function_free(f);
    tg_ctx_free(ctx);
}

void tu_train_pair(tu_pair *p, const char *path, const char *fname, const char *device, tg_array *const *inputs,
                   int steps, const char *const *weights, double rtol, double atol) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *cost[2][8] = {{0}};
    const char *dev[2] = {"cpu", device};
    assert_true(steps > 0 && steps <= 8);
    for (int d = 0; d < 2; d++) {
        p->g[d] = tg_graph_load(path, ctx);
        if (!p->g[d]) fail_msg("%s", tg_ctx_message(ctx));
        tg_compile_options o = {.device = dev[d]};
        p->f[d] = tg_function_compile(p->g[d], tg_graph_function_find(p->g[d], fname, ctx), &o, ctx);
        if (!p->f[d]) fail_msg("%s", tg_ctx_message(ctx));
        for (int s = 0; s < steps; s++)
            if (tg_function_call(p->f[d], inputs, &cost[d][s], ctx)) fail_msg("%s: %s", dev[d], tg_ctx_message(ctx));
    }
    for (int s = 0; s < steps; s++) tu_assert_close(cost[1][s], cost[0][s], rtol, atol);
    for (int i = 0; weights && weights[i]; i++)
        tu_assert_close(tg_function_shared_get(p->f[1], weights[i]), tg_function_shared_get(p->f[0], weights[i]),
                        rtol, atol);
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < steps; s++) tg_array_free(cost[d][s]);
    tg_ctx_free(ctx);
}

void tu_pair_free(tu_pair *p) {
    for (int d = 0; d < 2; d++) {
        tg_function_free(p->f[d]);
        tg_graph_free(p->g[d]);
    }
}

void *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

bool tu_advised_huge(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    bool in = false, hg = false;
    if (!f) return false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && !strncmp(line, "VmFlags:", 8)) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return hg;
}

int tu_forked(int (*fn)(void *), void *arg) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60);
        _exit(fn(arg));
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the forked child was killed by signal %d (a hang stopped by the alarm)", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

typedef struct env_call {
    const char *name, *value;
    int (*fn)(void *);
    void *arg;
} env_call;

static int with_env(void *p) {
    env_call *c = p;
    if (c->value) setenv(c->name, c->value, 1);
    else unsetenv(c->name);
    return c->fn(c->arg);
}

int tu_child_env(const char *name, const char *value, int (*fn)(void *), void *arg) {
    env_call c = {name, value, fn, arg};
    return tu_forked(with_env, &c);
}

void tu_tgf_patch_header(unsigned char *b, size_t n, const char *key, char end, const char *with) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[24 + i];
    assert_true(64 + hlen <= n);
    char *h = (char *)b + 64, *k = memmem(h, hlen, key, strlen(key));
    if (!k) fail_msg("no %s in the header", key);
    char *v = k + strlen(key), *e = memchr(v, end, (size_t)(h + hlen - v));
    assert_non_null(e);
    size_t room = (size_t)(e - v), len = strlen(with);
    if (len > room) fail_msg("%s: no room for %s", key, with);
    memcpy(v, with, len);
    memset(v + len, ' ', room - len);
    uint32_t c = tg_crc32c(0, b + 64, hlen);
    for (int i = 0; i < 4; i++) b[48 + i] = (unsigned char)(c >> 8 * i);
    c = tg_crc32c(0, b, 56);
    for (int i = 0; i < 4; i++) b[56 + i] = (unsigned char)(c >> 8 * i);
}
