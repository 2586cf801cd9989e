/* Helpers shared by the unit tests. */
#ifndef TG_TESTUTIL_H
#define TG_TESTUTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tg/tg.h"

/* Load a graph from a JSON string; fails the test (printing the loader's
 * message) when it does not load. */
tg_graph *tu_load(const char *json);
/* JSON written with ' for " (readable in C): a copy with every ' made "
 * (free it), and tu_load of that. */
char *tu_dq(const char *s);
tg_graph *tu_load_sq(const char *json);
/* The whole file at path, NUL-terminated (free it); *len its length.
 * Fails the test when it cannot be read. */
void *tu_read_file(const char *path, size_t *len);
/* Load expecting failure: returns the status and copies the message. */
int tu_load_fail(const char *json, char *msg, size_t size);

/* Compare got against want: same dtype and shape, values within
 * |g - w| <= atol + rtol * |w| (NaN equals NaN, infinities exactly).
 * rtol/atol < 0 pick the defaults for the dtype. Returns true when they
 * match; otherwise writes both sides into msg. */
bool tu_arrays_close(const tg_array *got, const tg_array *want, double rtol,
                     double atol, char *msg, size_t size);
#define tu_assert_close(got, want, rtol, atol)                              \
    do {                                                                    \
        char tu_msg_[4096];                                                 \
        if (!tu_arrays_close((got), (want), (rtol), (atol), tu_msg_,        \
                             sizeof tu_msg_))                               \
            fail_msg("%s", tu_msg_);                                        \
    } while (0)

/* |got - want| <= tol in double precision (equal infinities and two NaNs
 * match). cmocka's assert_float_equal rounds both sides to float, and its
 * macro casts only the first term of an expression. */
#define tu_assert_near(got, want, tol)                                      \
    do {                                                                    \
        double tu_g_ = (got), tu_w_ = (want);                               \
        if (!(tu_g_ == tu_w_ || fabs(tu_g_ - tu_w_) <= (tol) ||             \
              (isnan(tu_g_) && isnan(tu_w_))))                              \
            fail_msg("got %.17g, want %.17g (tolerance %g)", tu_g_, tu_w_,  \
                     (double)(tol));                                        \
    } while (0)

/* Call f with each of its allocations failing in turn (the first, then
 * the second, ...) until a call succeeds: every failed call must leave an
 * "out of memory" or "cannot allocate" message (the sanitizer build checks
 * that nothing leaks). out receives the successful call's results; returns
 * how many calls failed. Fails the test when none succeeds in 200. */
long tu_call_failing_each(tg_function *f, tg_array *const *in, tg_array **out, tg_ctx *ctx);
/* Make the library's k-th allocation from now fail (through
 * tg_set_allocator); 0 puts the default allocator back. */
void tu_fail_allocation(long k);

/* What the library allocated between tu_count_begin and tu_count_end
 * (through tg_set_allocator): the calls that allocated, the bytes they
 * asked for, and the most it held at once beyond what it held at the
 * start. What was allocated meanwhile is freed later by the default
 * allocator as usual (both are libc's). */
typedef struct tu_alloc_count {
    double allocs, bytes, peak;
} tu_alloc_count;
void tu_count_begin(void);
tu_alloc_count tu_count_end(void);

/* A float64 array from literal data. */
tg_array *tu_f64(int ndim, const int64_t *shape, const double *data);

/* Compile function `name` (NULL: the default) of g and call it once;
 * fails the test on error. outputs receives new references. */
void tu_call(tg_graph *g, const char *name, tg_array *const *inputs,
             tg_array **outputs);
/* Same with a preset ("none": the graph as written). */
void tu_call_preset(tg_graph *g, const char *name, const char *preset,
                    tg_array *const *inputs, tg_array **outputs);

/* One training function on two devices: function `fname` of the graph
 * file `path`, compiled once with device "cpu" and once with `device`
 * (the same options otherwise), called `steps` times (at most 8) with the
 * same inputs. Each step's first output (the cost) and then each shared
 * variable named in `weights` (NULL-terminated) must agree to rtol/atol.
 * The two functions stay in the pair for the caller's own checks
 * (f[1] is the one on `device`); tu_pair_free frees them. */
typedef struct tu_pair {
    tg_graph *g[2];
    tg_function *f[2];
} tu_pair;
void tu_train_pair(tu_pair *p, const char *path, const char *fname, const char *device, tg_array *const *inputs,
                   int steps, const char *const *weights, double rtol, double atol);
void tu_pair_free(tu_pair *p);

/* Whether the mapping that holds p has the kernel's huge-page advice
 * (MADV_HUGEPAGE: "hg" among its VmFlags in /proc/self/smaps). */
bool tu_advised_huge(const void *p);

/* fn(arg) in a child process whose environment variable `name` is
 * `value` (NULL: unset), for what a process reads once; its return value
 * is the child's exit status, which this returns (fails the test if the
 * child did not exit). */
int tu_child_env(const char *name, const char *value, int (*fn)(void *), void *arg);
/* fn(arg) in a forked child, whose return value is its exit status, which
 * this returns; a child still running after 60 s (a hang) is stopped, and
 * a child killed by a signal fails the test. */
int tu_forked(int (*fn)(void *), void *arg);

/* A .tgf file's header text (b, n bytes) after `key` up to the next `end`
 * replaced by `with`, padded with spaces to the same length, and the two
 * checksums made again: a file that says something else there but is
 * otherwise sound (fails the test when key is missing or with does not
 * fit). */
void tu_tgf_patch_header(unsigned char *b, size_t n, const char *key, char end, const char *with);

#endif
