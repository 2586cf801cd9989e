/* Small helpers shared by the benchmarks. */
#ifndef TG_BENCH_COMMON_H
#define TG_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tools/common/ompspin.h"
#include "tg/tg.h"

/* The benchmarks run with the tools' OpenMP setting (ompspin.h): glibc
 * passes the program's arguments to its constructors. */
__attribute__((constructor)) static void bench_omp_respawn(int argc, char **argv, char **envp) {
    (void)argc;
    (void)envp;
    tg_omp_respawn(argv);
}

/* What a peer's command starts with: peers run in the environment the
 * benchmark was started with (a GOMP_SPINCOUNT that tg_omp_respawn set
 * is tg's, not theirs: PyTorch and numexpr use libgomp too). */
static inline const char *bench_peer_env(void) {
    return getenv("TG_OMP_RESPAWNED") ? "env -u GOMP_SPINCOUNT -u TG_OMP_RESPAWNED " : "";
}

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bench_die(const char *what, tg_ctx *ctx) {
    fprintf(stderr, "%s: %s\n", what, tg_ctx_message(ctx));
    exit(1);
}

/* Calls per second of step(ud): `warmup` calls, then the best of 3 rounds
 * of at least min_s seconds each. */
static inline double bench_rate(void (*step)(void *), void *ud, int warmup, double min_s) {
    for (int i = 0; i < warmup; i++) step(ud);
    double best = 0;
    for (int r = 0; r < 3; r++) {
        long n = 0;
        double t0 = bench_now(), t;
        do {
            step(ud);
            n++;
            t = bench_now() - t0;
        } while (t < min_s);
        if (n / t > best) best = n / t;
    }
    return best;
}

/* One call of a compiled function with one output, for bench_rate. */
typedef struct bench_call {
    tg_function *f;
    tg_array *in[2];
    tg_ctx *ctx;
} bench_call;

static inline void bench_run_call(void *ud) {
    bench_call *s = ud;
    tg_array *out[1];
    if (tg_function_call(s->f, s->in, out, s->ctx)) bench_die("call", s->ctx);
    tg_array_free(out[0]);
}

/* Run a peer script (bench/peers/NAME) with the Python `py` and return its
 * stdout (caller frees), or NULL when it cannot run (no NumPy). */
static inline char *bench_peer_py(const char *py, const char *script, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s%s %s/peers/%s %s 2>/dev/null", bench_peer_env(), py, TG_BENCH_DIR, script, args);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n - 1 == 0) { /* more to come: grow */
            char *b2 = realloc(buf, cap * 2);
            if (!b2) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b2;
            cap *= 2;
        }
    }
    if (buf) buf[n] = 0;
    int rc = pclose(p);
    if (rc != 0 || n == 0 || !buf) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* bench_peer_py with Debian's python3. */
static inline char *bench_peer(const char *script, const char *args) {
    return bench_peer_py("/usr/bin/python3", script, args);
}

/* The value for key "name" in the peer's "name value" lines; < 0 when absent. */
static inline double bench_peer_value(const char *out, const char *name) {
    if (!out) return -1;
    size_t len = strlen(name);
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncmp(p, name, len) && p[len] == ' ') return atof(p + len + 1);
    }
    return -1;
}

#endif
