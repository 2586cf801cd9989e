/* The NaN guard (tg/debug.h): Theano's NanGuardMode, but it names the
 * node that made the first bad value, and stays cheap.
 *
 * Cheap: after each node, one branch-free pass over each float output
 * counts the elements that fail |x| <= T (T the big threshold, or the
 * largest finite value when big is off): NaN fails every comparison and
 * infinity exceeds any finite T, so a clean array costs one vectorised
 * read and nothing else. Only an array that fails is looked at again,
 * element by element, to tell NaN, infinity and big apart and to compute
 * the statistics.
 *
 * Right: a node's inputs were all checked before it ran (function inputs
 * and shared values when the call began, the others as outputs of earlier
 * nodes), so the first node with a bad output is the one that made it,
 * unless one of its inputs is a constant that already held the bad value.
 * To show that node's inputs as they were (an in-place node has
 * overwritten one), the call is run again up to that node, which is
 * possible because a stopped call applies no update.
 *
 * In place: a training step's gemm that writes a weight matrix's update
 * over it (vm.h, commit_at) would lose the weights if its result were
 * bad, so hooks that may stop a call make it copy them first, which at
 * batch 1 cost more than the rest of the step. The guard instead proves,
 * before the node runs, that its result will pass the check, from the
 * largest magnitudes of its operands (commit_ok): |beta*z + alpha*x@y|
 * is at most |beta| max|z| + |alpha| K max|x| max|y|, and rounding adds
 * at most (K+2) units in the last place of that. Within the threshold,
 * the node runs in place and its output is not read again; otherwise it
 * copies and is checked like any other. The bound on the weights comes
 * from the check at a call's start (the same pass), or from the previous
 * call's proof, so a guarded training loop reads the 784x500 weights
 * only once, when they first come in.
 *
 * On a device: a function placed on the GPU gets hooks that see device
 * arrays as they are (tg_function_set_hooks_device). A float output that
 * lives on the device is reduced there (the backend's `stats`: counts,
 * min, max and sum in one pass) and only that small struct comes back, so
 * the guard never downloads a clean array; the only download is of the
 * culprit's inputs, in the second run, for the report.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "debug/guard.h"
#include "ops/control.h"
#include "ops/scan.h"
#include "tg/debug.h"
#include "vm/vm.h"

struct tg_nanguard {
    tg_function *f;
    const tg_backend *be; /* f runs partly on this device (stats on it) */
    bool nan, inf, big_on;
    double big;
    double fast_t; /* the fast pass flags !(|x| <= fast_t) */
    float fast_tf; /* the same for float32: the largest float <= fast_t */
    uint64_t calls;
    /* The function's outputs and update values that are constants (a
     * file's constant, or one constant folding made): checked once, at
     * the first call (they never change), and reported at every call.
     * const_bad: -2 not checked yet, -1 all clean, else the index into
     * fg->outputs of the first bad one, whose bits and statistics follow. */
    int const_bad;
    unsigned const_w;
    tg_stats const_st;
    /* What is_bad last found (tg_composite_locate's last call is on the
     * result of the body op it locates), and the kinds of bad value it
     * answers for (locate_fused: one kind per re-run of the body). */
    unsigned last_w;
    tg_stats last_st;
    unsigned locate_kind;
    bool found;
    tg_offence off;
    /* Per entry of f->shared: 1 + the version (tg_shared.version) of the
     * value this guard's checks covered when its last call ended well (the
     * value it checked at the call's start, or the update it checked as
     * its node's output), 0: none. Such a value is not read again at the
     * next call's start: at batch 1 the MLP's 784x500 weights were read
     * twice a call, once as the gemm's output and once as shared state. */
    uint64_t *seen;
    /* For the committers (vm.h, commit_at; NULL when f has none): per
     * entry of f->shared. */
    struct bound {
        double mag;   /* a bound on the value's largest magnitude */
        uint64_t ver; /* the version (tg_shared.version) it holds for */
        bool ok;      /* mag known */
        double next;  /* the same for the update the call in progress
                         makes: commit_ok's proof, or the check of the
                         committer's output */
        bool next_ok;
    } *bound;
    int64_t nread; /* elements the checks read in the last call */
    /* The second run: stop before node `capture` and copy its inputs. */
    int capture;
    tg_array **cap;
    int ncap;
    /* A guard on a scan's body (locate_in_body): the hooks count the
     * steps (the body's calls: node 0 runs first in each), and the
     * second run stops at node `capture` of step `capture_step`. */
    bool count_steps;
    int64_t steps, capture_step;
    /* The offence's path (tg_offence.path): depth levels of path_cap. */
    tg_offence_level *path;
    int depth, path_cap;
};

/* ---- statistics ---- */

/* The running statistics of tg_array_stats; one element at a time. */
typedef struct stat_acc {
    double lo, hi, sum;
    int64_t nfin, nnan, ninf, nbig;
} stat_acc;

static inline void stat_add(stat_acc *s, double v, bool fl, bool big_on, double big) {
    if (fl && isnan(v)) {
        s->nnan++;
    } else if (fl && isinf(v)) {
        s->ninf++;
    } else {
        s->nfin++;
        s->sum += v;
        if (v < s->lo) s->lo = v;
        if (v > s->hi) s->hi = v;
        if (big_on && fabs(v) > big) s->nbig++;
    }
}

void tg_array_stats(const tg_array *a, double big, tg_stats *st) {
    memset(st, 0, sizeof *st);
    st->min = st->max = st->mean = NAN;
    if (!a) return;
    int64_t n = tg_array_size(a);
    st->size = n;
    bool fl = tg_dtype_is_float(a->dtype);
    bool big_on = isfinite(big) && big > 0;
    stat_acc s = {.lo = INFINITY, .hi = -INFINITY};
    bool contig = tg_array_is_contiguous(a);
    /* the contiguous float loops read memory directly (no per-element
     * index arithmetic) */
    if (contig && a->dtype == TG_FLOAT64) {
        const double *x = (const double *)a->data;
        for (int64_t i = 0; i < n; i++) stat_add(&s, x[i], true, big_on, big);
    } else if (contig && a->dtype == TG_FLOAT32) {
        const float *x = (const float *)a->data;
        for (int64_t i = 0; i < n; i++) stat_add(&s, x[i], true, big_on, big);
    } else {
        for (int64_t i = 0; i < n; i++) stat_add(&s, tg_array_get_flat(a, i), fl, big_on, big);
    }
    st->nan = s.nnan;
    st->inf = s.ninf;
    st->big = s.nbig;
    if (s.nfin) {
        st->min = s.lo;
        st->max = s.hi;
        st->mean = s.sum / (double)s.nfin;
        if (!isfinite(st->mean)) {
            /* The sum of finite values overflowed ([1e308, 8e307]): sum
             * them divided by their count instead, whose partial sums
             * never pass the largest magnitude. Only then: it costs a
             * second pass and a division per element. */
            double m = 0, inv = 1.0 / (double)s.nfin;
            for (int64_t i = 0; i < n; i++) {
                double v = tg_array_get_flat(a, i);
                if (isfinite(v)) m += v * inv;
            }
            st->mean = m;
        }
    }
}

/* ---- the checks ---- */

/* Whether any element fails |x| <= t, and the largest magnitude (which
 * means something only when none fails; the bound of commit_ok): the one
 * pass every float output gets. OR- and max-reductions (no early exit, no
 * counting) keep the loop branch-free and vectorised; arrays of millions
 * of elements are split across threads, smaller ones stay on this one (a
 * parallel region costs more than it saves there, and wakes threads
 * OpenBLAS wants). */
enum { PAR_MIN = 1 << 21 };

#define FAILS_MAG(SUF, T, ABS)                                                 \
    static int fails_mag_##SUF(const T *x, int64_t n, T t, double *mag) {      \
        int c = 0;                                                             \
        T m = 0;                                                               \
        _Pragma("omp simd reduction(| : c) reduction(max : m)")                \
        for (int64_t i = 0; i < n; i++) {                                      \
            T a = ABS(x[i]);                                                   \
            c |= !(a <= t);                                                    \
            m = a > m ? a : m;                                                 \
        }                                                                      \
        *mag = m;                                                              \
        return c;                                                              \
    }
FAILS_MAG(f64, double, fabs)
FAILS_MAG(f32, float, fabsf)

static int fails_mag_par(const char *x, int64_t n, bool f64, double t, double *mag) {
    int c = 0;
    double m = 0;
    int64_t chunk = 1 << 16, nchunks = (n + chunk - 1) / chunk;
#pragma omp parallel for reduction(| : c) reduction(max : m) schedule(static)
    for (int64_t k = 0; k < nchunks; k++) {
        int64_t lo = k * chunk, len = n - lo < chunk ? n - lo : chunk;
        double mk;
        c |= f64 ? fails_mag_f64((const double *)x + lo, len, t, &mk)
                 : fails_mag_f32((const float *)x + lo, len, (float)t, &mk);
        m = mk > m ? mk : m;
    }
    *mag = m;
    return c;
}

/* Whether a's elements fill one block of memory in some order of its
 * axes (C order, a transpose): then they can be read as a vector. */
static bool dense_block(const tg_array *a) {
    int64_t sh[TG_MAX_NDIM], st[TG_MAX_NDIM];
    int m = 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] > 1) {
            if (a->strides[d] <= 0) return false;
            int i = m++;
            for (; i > 0 && st[i - 1] > a->strides[d]; i--) {
                st[i] = st[i - 1];
                sh[i] = sh[i - 1];
            }
            st[i] = a->strides[d];
            sh[i] = a->shape[d];
        }
    int64_t want = (int64_t)tg_isize(a->dtype);
    for (int i = 0; i < m; i++) {
        if (st[i] != want) return false;
        want *= sh[i];
    }
    return true;
}

/* Whether an element of a fails |x| <= T (NaN, an infinity, a value
 * above the threshold), and into *mag the largest magnitude when none
 * does. Float32 and float64 arrays that fill one block of memory (C
 * order, a transpose) in one vectorised pass; float16 and strided views
 * element by element. */
static bool fast_fails_mag(tg_nanguard *g, const tg_array *a, double *mag) {
    int64_t n = tg_array_size_inline(a);
    g->nread += n;
    *mag = 0;
    if (n == 0) return false;
    bool f64 = a->dtype == TG_FLOAT64;
    if ((f64 || a->dtype == TG_FLOAT32) && dense_block(a)) {
        double t = f64 ? g->fast_t : g->fast_tf;
        if (n >= PAR_MIN) return fails_mag_par(a->data, n, f64, t, mag);
        return f64 ? fails_mag_f64((const double *)a->data, n, t, mag)
                   : fails_mag_f32((const float *)a->data, n, (float)t, mag);
    }
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = fabs(tg_array_get_flat(a, i));
        if (!(v <= g->fast_t)) return true;
        m = v > m ? v : m;
    }
    *mag = m;
    return false;
}

/* The largest float <= t (FLT_MAX above it): a float32 x has
 * |x| <= t exactly when |x| <= that float, where (float)t, rounded to
 * the nearest, would let through the floats between t and it (t =
 * 16777219 rounds to 16777220). */
static float float_floor(double t) {
    if (t >= FLT_MAX) return FLT_MAX;
    float f = (float)t;
    return (double)f > t ? nextafterf(f, 0) : f;
}

static bool fast_fails(tg_nanguard *g, const tg_array *a) {
    double mag;
    return fast_fails_mag(g, a, &mag);
}

/* The TG_BAD_* bits the options care about in a (0: clean), with its
 * statistics. Integer and bool arrays are always clean. */
static unsigned classify(tg_nanguard *g, const tg_array *a, tg_stats *st) {
    if (!a || !tg_dtype_is_float(a->dtype) || !fast_fails(g, a)) return 0;
    tg_array_stats(a, g->big_on ? g->big : INFINITY, st);
    unsigned w = 0;
    if (g->nan && st->nan) w |= TG_BAD_NAN;
    if (g->inf && st->inf) w |= TG_BAD_INF;
    if (g->big_on && st->big) w |= TG_BAD_BIG;
    return w;
}

/* classify, with the largest magnitude of a clean float32 or float64
 * array into *mag (*mag_ok). */
static unsigned classify_mag(tg_nanguard *g, const tg_array *a, tg_stats *st, double *mag, bool *mag_ok) {
    *mag_ok = false;
    if (!a || (a->dtype != TG_FLOAT32 && a->dtype != TG_FLOAT64)) return classify(g, a, st);
    if (!fast_fails_mag(g, a, mag)) {
        *mag_ok = true;
        return 0;
    }
    return classify(g, a, st);
}

/* classify for an array on the device: the statistics are computed there
 * and only they come back. The bits (>= 0), or the status (negative) with
 * ctx set. */
static int classify_device(tg_nanguard *g, const tg_array *a, tg_stats *st, tg_ctx *ctx) {
    tg_backend_stats b;
    g->nread += tg_array_size_inline(a);
    int rc = g->be->tools->stats(a, g->big_on ? g->big : INFINITY, &b, ctx);
    if (rc) return rc; /* statuses are negative */
    *st = (tg_stats){.size = b.size, .nan = b.nan, .inf = b.pinf + b.ninf, .big = b.big,
                     .min = b.finite ? b.min : NAN, .max = b.finite ? b.max : NAN,
                     .mean = b.finite ? b.sum / (double)b.finite : NAN};
    unsigned w = 0;
    if (g->nan && st->nan) w |= TG_BAD_NAN;
    if (g->inf && st->inf) w |= TG_BAD_INF;
    if (g->big_on && st->big) w |= TG_BAD_BIG;
    return (int)w;
}

static bool is_bad(const tg_array *a, void *ud) {
    tg_nanguard *g = ud;
    memset(&g->last_st, 0, sizeof g->last_st);
    g->last_w = classify(g, a, &g->last_st);
    return (g->last_w & g->locate_kind) != 0;
}

static const char *what_str(unsigned w) {
    return w & TG_BAD_NAN ? "NaN" : w & TG_BAD_INF ? "an infinity" : "a value above the threshold";
}

static int count_of(unsigned w, const tg_stats *st) {
    return (int)(w & TG_BAD_NAN ? st->nan : w & TG_BAD_INF ? st->inf : st->big);
}

/* ---- hooks ---- */

/* For a scan that made a bad value: the first step whose results hold
 * one, the lowest row (the steps axis) holding a bad element among its
 * stacked float outputs (not those the optimizer keeps only the last
 * rows of, attrs.keep_last: a ring); -1 when it cannot be told. Only on
 * an offence: element by element. */
static int64_t scan_step(const tg_nanguard *g, const tg_node *n, tg_array *const *out) {
    if (strcmp(n->op->name, "scan")) return -1;
    json_object *kl = NULL;
    if (n->attrs && json_object_object_get_ex(n->attrs, "keep_last", &kl) && !json_object_is_type(kl, json_type_array))
        kl = NULL;
    int64_t best = -1;
    for (int j = 0; j < n->nout; j++) {
        const tg_array *a = out[j];
        if (!a || !tg_dtype_is_float(a->dtype) || a->ndim < 1 || a->shape[0] == 0 ||
            (g->be && g->be->is_device(a)))
            continue;
        if (kl && (j >= (int)json_object_array_length(kl) ||
                   json_object_get_int64(json_object_array_get_idx(kl, (size_t)j)) != 0))
            continue;
        int64_t size = tg_array_size(a), row = size / a->shape[0];
        int64_t stop = best >= 0 ? best * row : size;
        for (int64_t i = 0; i < stop; i++) {
            double v = tg_array_get_flat(a, i);
            if ((g->nan && isnan(v)) || (g->inf && isinf(v)) || (g->big_on && isfinite(v) && fabs(v) > g->big)) {
                best = i / row;
                break;
            }
        }
    }
    return best;
}

static int after_hook(void *ud, const tg_function *f, int k, tg_array *const *in,
                      tg_array *const *out, tg_ctx *ctx) {
    (void)in;
    tg_nanguard *g = ud;
    const tg_node *n = f->sched[k].node;
    if (g->count_steps && k == 0) g->steps++;
    const bool committer = g->bound && k >= f->commit_at;
    /* Written over the shared value: only after commit_ok proved it clean
     * (the VM runs a committer in place under these hooks only then). */
    if (committer && out[0] && out[0] == f->shared[f->commit_shared[k - f->commit_at]]->value) return TG_OK;
    for (int j = 0; j < n->nout; j++) {
        const tg_array *a = out[j];
        if (!a || !tg_dtype_is_float(a->dtype)) continue;
        /* A view of a checked input holds nothing new. */
        if (j == 0 && n->op->view_of >= 0 && n->op->view_of < n->nin &&
            n->inputs[n->op->view_of]->kind != TG_VAR_CONSTANT)
            continue;
        tg_stats st;
        unsigned w;
        if (g->be && g->be->is_device(a)) {
            int r = classify_device(g, a, &st, ctx);
            if (r < 0) return r;
            w = (unsigned)r;
        } else if (committer) {
            /* the update of a shared variable: its magnitude, for the
             * next call's proof */
            struct bound *b = &g->bound[f->commit_shared[k - f->commit_at]];
            w = classify_mag(g, a, &st, &b->next, &b->next_ok);
        } else {
            w = classify(g, a, &st);
        }
        if (!w) continue;
        g->found = true;
        g->off.where = TG_OFFENCE_NODE;
        g->off.node = k;
        g->off.output = j;
        g->off.var = n->outputs[j]->id;
        g->off.what = w;
        g->off.stats = st;
        g->off.step = scan_step(g, n, out);
        return TG_ESTOPPED; /* the message is set once the culprit is known */
    }
    return TG_OK;
}

static int before_hook(void *ud, const tg_function *f, int k, tg_array *const *in, tg_ctx *ctx) {
    tg_nanguard *g = ud;
    if (g->count_steps && k == 0) g->steps++;
    if (k != g->capture || (g->count_steps && g->steps - 1 != g->capture_step)) return TG_OK;
    int nin = f->sched[k].node->nin;
    g->cap = tg_calloc((size_t)nin + 1, sizeof *g->cap);
    if (!g->cap) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    g->ncap = nin;
    for (int i = 0; i < nin; i++) {
        if (!in[i]) continue;
        if (g->be && g->be->is_device(in[i])) {
            /* The one download: the culprit's inputs, for the report. */
            int rc = g->be->to_host(in[i], &g->cap[i], ctx);
            if (rc) return rc;
        } else if (!(g->cap[i] = tg_array_copy(in[i], in[i]->dtype))) {
            return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        }
    }
    return TG_ESTOPPED;
}

/* The largest magnitude of a float32 or float64 operand of a committer,
 * into *mag; false when it cannot be had cheaply (a strided view of more
 * than a few thousand elements, another dtype) or is not finite. */
static bool operand_mag(tg_nanguard *g, const tg_array *a, double *mag) {
    if (!a || (a->dtype != TG_FLOAT32 && a->dtype != TG_FLOAT64)) return false;
    if (!dense_block(a) && tg_array_size_inline(a) > 4096) return false;
    return !fast_fails_mag(g, a, mag);
}

/* Whether committer k (gemm or gemv: z, alpha, A, x, beta; ger: z,
 * alpha, x, y; another committer, an increment or a set, never: its result
 * is checked in a buffer of its own) may write its result over the
 * shared value z: when that
 * result is sure to pass the check (the file's comment), from the bound
 * on z's magnitude and its operands' largest magnitudes. Reading the
 * operands must cost less than what it saves (a copy of z and a read of
 * the result): at most twice z's size. */
static bool commit_ok(void *ud, const tg_function *f, int k, tg_array *const *in) {
    tg_nanguard *g = ud;
    const int i = f->commit_shared[k - f->commit_at];
    struct bound *bd = &g->bound[i];
    const tg_node *n = f->sched[k].node;
    const tg_array *z = in[0], *a = in[2], *b = in[3];
    if (strcmp(n->op->name, "gemm") && strcmp(n->op->name, "gemv") && strcmp(n->op->name, "ger")) return false;
    /* (a call of f made without tg_nanguard_call has had no start check) */
    if (!bd->ok || bd->ver != f->shared[i]->version || !z || !a || !b || n->nin < 4) return false;
    const bool f64 = z->dtype == TG_FLOAT64;
    if (!f64 && z->dtype != TG_FLOAT32) return false;
    const bool ger = n->nin == 4;
    const double alpha = tg_load_f64(in[1]->dtype, in[1]->data),
                 beta = ger ? 1 : tg_load_f64(in[4]->dtype, in[4]->data);
    const double K = ger ? 1 : (double)a->shape[a->ndim - 1];
    const double eps = f64 ? DBL_EPSILON : FLT_EPSILON, tiny = f64 ? DBL_TRUE_MIN : FLT_TRUE_MIN;
    if (!isfinite(alpha) || !isfinite(beta) || (K + 2) * eps > 0.25) return false;
    if ((double)tg_array_size_inline(a) + (double)tg_array_size_inline(b) > 2.0 * (double)tg_array_size_inline(z))
        return false;
    double ma, mb;
    if (!operand_mag(g, a, &ma) || !operand_mag(g, b, &mb)) return false;
    /* Each term of the result passes through at most K + 2 roundings
     * (two products, the scaling by alpha and the additions), so the
     * computed value is within (1 + gamma) of the bound, gamma =
     * (K+2)u / (1 - (K+2)u) < 2 (K+2) eps here; an underflow adds at
     * most the smallest subnormal per rounding. */
    const double grow = 1 + 2 * (K + 2) * eps;
    double bound = fabs(beta) * bd->mag + fabs(alpha) * K * ma * mb;
    bound = bound * grow + (K + 2) * tiny;
    if (!(bound <= (f64 ? g->fast_t : (double)g->fast_tf))) return false;
    /* BLAS may sum x@y before scaling it by alpha: that sum must not
     * overflow either (an alpha of 1e-30 would hide it from the bound) */
    if (!(K * ma * mb * grow <= (f64 ? DBL_MAX : FLT_MAX))) return false;
    bd->next = bound;
    bd->next_ok = true;
    return true;
}

static void set_hooks(tg_nanguard *g, bool capture) {
    tg_hooks h = {.before = capture ? before_hook : NULL, .after = capture ? NULL : after_hook, .ud = g};
    if (g->be)
        tg_function_set_hooks_device(g->f, &h);
    else if (!capture && g->bound)
        tg_function_set_hooks_commit(g->f, &h, commit_ok);
    else
        tg_function_set_hooks(g->f, &h);
}

/* ---- inside a scan's or an op_from_graph's body ---- */

/* Run node n (a scan or an op_from_graph) once on copies of ins with bg
 * guarding its body, as the guarded call would; TG_ESTOPPED when bg
 * stopped it. */
static int run_node_on(const tg_node *n, tg_array *const *ins, int nin, tg_ctx *ctx) {
    tg_array *small[16] = {0}, **cp = nin <= 16 ? small : tg_calloc((size_t)nin, sizeof *cp);
    tg_array *osmall[16] = {0}, **outs = n->nout <= 16 ? osmall : tg_calloc((size_t)n->nout, sizeof *outs);
    int rc = TG_OK;
    if (!cp || !outs) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
    /* copies: the node may overwrite an input in place */
    for (int i = 0; !rc && i < nin; i++)
        if (ins[i] && !(cp[i] = tg_array_copy(ins[i], ins[i]->dtype))) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
    if (!rc) rc = n->op->run((tg_node *)n, cp, outs, ctx);
    for (int i = 0; cp && i < nin; i++) tg_array_free(cp[i]);
    for (int k = 0; outs && k < n->nout; k++) tg_array_free(outs[k]);
    if (cp != small) tg_free(cp);
    if (outs != osmall) tg_free(outs);
    return rc;
}

/* A level more on g's path (zeroed, step -1); NULL when out of memory or
 * past PATH_MAX_DEPTH levels (the path then ends at the level above). */
enum { PATH_MAX_DEPTH = 64 };

static tg_offence_level *path_push(tg_nanguard *g) {
    if (g->depth >= PATH_MAX_DEPTH) return NULL;
    if (g->depth == g->path_cap) {
        int cap = g->path_cap ? 2 * g->path_cap : 4;
        tg_offence_level *p = tg_realloc(g->path, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        g->path = p;
        g->path_cap = cap;
    }
    tg_offence_level *l = &g->path[g->depth++];
    memset(l, 0, sizeof *l);
    l->step = -1;
    return l;
}

/* The fused op of composite node n (of a function or a body) that made
 * the bad value, from its inputs as they were (cap), into level l.
 *
 * The rule of a node of the function, op by op: a body op made a kind of
 * bad value (NaN, Inf, big) when its result holds it and none of its
 * operands does. An operand bad in another way does not excuse it: in
 * q = x / c with c = [1e11, 0] the NaN of 0/0 is the division's, though
 * c is above the threshold (a body that counted c as "not clean" found
 * no op at all). One re-run of the body per kind the guard checks, each
 * answering for that kind only; the first body op found by any of them
 * is named (the exp that made the infinity a later mul by 0 turned into
 * the NaN, as with every operand clean). Only at an offence, on the
 * node's inputs: up to three runs of one fused loop. */
static void locate_fused(tg_nanguard *g, const tg_node *n, tg_array *const *cap, tg_offence_level *l,
                         tg_ctx *ctx) {
    static const unsigned kinds[] = {TG_BAD_NAN, TG_BAD_INF, TG_BAD_BIG};
    bool on[] = {g->nan, g->inf, g->big_on};
    tg_composite_where best = {.body_node = -1};
    unsigned best_w = 0;
    tg_stats best_st = {0};
    for (int i = 0; cap && i < 3; i++) {
        if (!on[i]) continue;
        tg_composite_where w;
        g->locate_kind = kinds[i];
        int rc = tg_composite_locate(n, cap, is_bad, g, &w, ctx);
        if (rc != TG_OK) break;
        if (w.body_node < 0 || (best.body_node >= 0 && w.body_node >= best.body_node)) continue;
        best = w;
        best_w = g->last_w;
        best_st = g->last_st;
    }
    g->locate_kind = 0;
    if (best.body_node >= 0) {
        l->fused_op = best.op;
        l->fused_var = best.var;
        l->norigins = best.norigins;
        l->origins = best.origins;
        l->fused_what = best_w;
        l->fused_stats = best_st;
    }
}

static bool has_body(const tg_node *n) {
    return !strcmp(n->op->name, "scan") || !strcmp(n->op->name, "op_from_graph");
}

/* Level l of the path: scheduled node k of fn, which made what off says
 * (its output, variable, statistics and step). */
static void level_fill(tg_offence_level *l, const tg_function *fn, int k, const tg_offence *off) {
    l->fn = fn;
    l->node = k;
    l->key = tg_function_node_key(fn, k);
    l->op = fn->sched[k].node->op->name;
    l->output = off->output;
    l->var = off->var;
    l->var_as_written = tg_opt_record_standin(&fn->record, l->var);
    l->what = off->what;
    l->stats = off->stats;
    l->step = off->step;
    l->norigins = tg_function_node_origins(fn, k, &l->origins);
}

/* Level l's node by its name as written (debug.h): a loop the optimizer
 * rebuilt, 'R:scan', stands for 'R'. */
const char *tg_offence_level_name(const tg_offence_level *l) {
    if (l->fused_op) return l->key;
    if (l->norigins == 1) return l->origins[0];
    const char *colon = strchr(l->key, ':');
    size_t n = colon ? (size_t)(colon - l->key) : 0;
    for (int i = 0; n && i < l->norigins; i++)
        if (!strncmp(l->origins[i], l->key, n) && !l->origins[i][n]) return l->origins[i];
    return l->key;
}

/* For a scan or op_from_graph n, the last level of g's path, that made a
 * bad value: run it again on its inputs as they were (cap) with a guard
 * on its body, to name the body node that made it and the step (scan),
 * a level more on the path. When that node is a fused composite of the
 * body, its fused op (the composite re-run op by op at that step); when
 * it is a scan or op_from_graph itself, the same again one level down, on
 * its inputs at that step. Nothing when it cannot be told (the body did
 * not reproduce it). */
static void locate_in_body(tg_nanguard *g, const tg_node *n, tg_array *const *cap, int ncap) {
    bool scan = !strcmp(n->op->name, "scan");
    tg_function *bf = NULL;
    tg_ctx *c2 = tg_ctx_new();
    if (!c2) return;
    if (scan) {
        if (tg_scan_compile_body((tg_node *)n, c2) == TG_OK) bf = ((scan_p *)n->a.extra)->fn;
    } else {
        bf = ((tg_ofg *)n->a.extra)->f;
    }
    if (!bf || bf->hooked) {
        tg_ctx_free(c2);
        return;
    }
    tg_nanguard_options o = {.no_nan = !g->nan, .no_inf = !g->inf, .big = g->big_on ? g->big : INFINITY};
    tg_nanguard *bg = tg_nanguard_new(bf, &o, c2);
    if (!bg) {
        tg_ctx_free(c2);
        return;
    }
    bg->count_steps = scan;
    int nin = ncap < n->nin ? ncap : n->nin;
    int rc = run_node_on(n, cap, nin, c2);
    tg_offence_level *l;
    if (rc == TG_ESTOPPED && bg->found && bg->off.where == TG_OFFENCE_NODE && (l = path_push(g))) {
        int k = bg->off.node;
        const tg_node *bn = bf->sched[k].node;
        int64_t step = bg->steps - 1;
        if (scan) g->path[g->depth - 2].step = step;
        level_fill(l, bf, k, &bg->off);
        bool fused = !strcmp(bn->op->name, "composite"), inner = has_body(bn);
        if (fused || inner) {
            /* Again up to that node at that step, for its inputs. */
            bg->capture = k;
            bg->capture_step = step;
            bg->steps = 0;
            set_hooks(bg, true);
            rc = run_node_on(n, cap, nin, c2);
            set_hooks(bg, false);
            if (rc == TG_ESTOPPED && bg->cap) {
                if (fused)
                    locate_fused(g, bn, bg->cap, l, c2);
                else
                    locate_in_body(g, bn, bg->cap, bg->ncap); /* (l may move: not used after) */
            }
        }
    }
    tg_nanguard_free(bg);
    tg_ctx_free(c2);
}

/* ---- the guard ---- */

tg_nanguard *tg_nanguard_new(tg_function *f, const tg_nanguard_options *opts, tg_ctx *ctx) {
    double big = opts ? opts->big : 0;
    if (isnan(big) || big < 0) {
        tg_errorf(ctx, TG_EINVAL, "nanguard: the big threshold must be positive, got %g", big);
        return NULL;
    }
    tg_nanguard *g = tg_calloc(1, sizeof *g);
    if (!g) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    g->f = f;
    if (f->on_device) {
        /* Without the device's statistics, hooks get host copies. */
        const tg_backend *be = tg_backend_cuda();
        if (be && be->tools && be->tools->stats) g->be = be;
    }
    g->nan = !(opts && opts->no_nan);
    g->inf = !(opts && opts->no_inf);
    g->big = big == 0 ? 1e10 : big;
    g->big_on = isfinite(g->big);
    g->fast_t = g->big_on ? g->big : DBL_MAX;
    g->fast_tf = float_floor(g->fast_t);
    g->capture = -1;
    g->const_bad = -2;
    g->seen = tg_calloc((size_t)f->nshared + 1, sizeof *g->seen);
    bool commits = !g->be && f->lend && f->commit_at < f->nsched;
    if (commits) g->bound = tg_calloc((size_t)f->nshared + 1, sizeof *g->bound);
    if (!g->seen || (commits && !g->bound)) {
        tg_free(g->seen);
        tg_free(g->bound);
        tg_free(g);
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    if (g->nan || g->inf || g->big_on) set_hooks(g, false);
    return g;
}

static void drop_capture(tg_nanguard *g) {
    for (int i = 0; i < g->ncap; i++) tg_array_free(g->cap[i]);
    tg_free(g->cap);
    g->cap = NULL;
    g->ncap = 0;
}

void tg_nanguard_free(tg_nanguard *g) {
    if (!g) return;
    /* Only the guard's own hooks: a profile or the caller may have put
     * theirs on since (as tg_profile_free does). */
    if (g->f && g->f->hooks.ud == g) tg_function_set_hooks(g->f, NULL);
    drop_capture(g);
    tg_free(g->path);
    tg_free(g->seen);
    tg_free(g->bound);
    tg_free(g);
}

const tg_offence *tg_nanguard_offence(const tg_nanguard *g) { return g->found ? &g->off : NULL; }

int64_t tg_nanguard_elements_read(const tg_nanguard *g) { return g->nread; }

const tg_array *tg_nanguard_node_input(const tg_nanguard *g, int i) {
    return g->found && g->cap && i >= 0 && i < g->ncap ? g->cap[i] : NULL;
}

/* An input or shared value that is bad when the call begins; with mag,
 * also the largest magnitude of a clean one into *mag (*mag_ok). */
static bool check_value(tg_nanguard *g, const tg_array *a, tg_offence_where where, const char *id, double *mag,
                        bool *mag_ok) {
    tg_stats st;
    unsigned w = mag ? classify_mag(g, a, &st, mag, mag_ok) : classify(g, a, &st);
    if (!w) return false;
    g->found = true;
    g->off.where = where;
    g->off.node = -1;
    g->off.var = id;
    g->off.what = w;
    g->off.stats = st;
    return true;
}

/* The file's variable constant v stands for when the optimizer made it
 * (constant folding replaced that node output by v), else NULL. */
static const char *folded_from(const tg_function *f, const tg_var *v) {
    const char *o = tg_opt_record_standin(&f->record, v->id);
    return o == v->id || !strcmp(o, v->id) ? NULL : o;
}

/* " (folded from 'z')", or "". */
static const char *folded_note(const tg_offence *o, char *buf, size_t size) {
    if (!o->folded_from) return "";
    snprintf(buf, size, " (folded from '%s')", o->folded_from);
    return buf;
}

/* The outputs and update values that are constants: a NaN that constant
 * folding put in one (the function returns log(-1)) is in no node's
 * output, and the file's own constant returned as is neither. They do
 * not change, so the first call checks them once; an offence found then
 * is the offence of every call (it would be handed out each time). */
static bool check_constant_outputs(tg_nanguard *g) {
    const tg_function *f = g->f;
    const tg_fgraph *fg = f->fg;
    if (g->const_bad == -2) {
        g->const_bad = -1;
        for (int i = 0; i < fg->nout + fg->nupd && g->const_bad < 0; i++) {
            const tg_var *v = fg->outputs[i];
            if (v->kind != TG_VAR_CONSTANT || !v->value) continue;
            tg_stats st;
            unsigned w = classify(g, v->value, &st);
            if (!w) continue;
            g->const_bad = i;
            g->const_w = w;
            g->const_st = st;
        }
    }
    if (g->const_bad < 0) return false;
    int i = g->const_bad;
    const tg_var *v = fg->outputs[i];
    g->found = true;
    g->off.where = TG_OFFENCE_CONSTANT;
    g->off.node = -1;
    g->off.output = i;
    g->off.var = v->id;
    g->off.what = g->const_w;
    g->off.stats = g->const_st;
    g->off.folded_from = folded_from(f, v);
    g->off.update_of = i >= fg->nout ? fg->upd_shared[i - fg->nout]->id : NULL;
    return true;
}

int tg_nanguard_call(tg_nanguard *g, tg_array *const *inputs, tg_array **outputs, tg_ctx *ctx) {
    tg_function *f = g->f;
    drop_capture(g);
    g->found = false;
    memset(&g->off, 0, sizeof g->off);
    g->off.node = -1;
    g->off.step = -1;
    g->off.body_node = -1;
    g->depth = 0;
    g->off.call = ++g->calls;
    g->nread = 0;
    bool on = g->nan || g->inf || g->big_on;
    for (int i = 0; on && inputs && i < f->fg->nin && !g->found; i++)
        if (check_value(g, inputs[i], TG_OFFENCE_INPUT, f->fg->inputs[i]->id, NULL, NULL))
            return tg_errorf(ctx, TG_ESTOPPED, "call %llu: input '%s' holds %s (%d of %lld elements)",
                             (unsigned long long)g->off.call, g->off.var, what_str(g->off.what),
                             count_of(g->off.what, &g->off.stats), (long long)g->off.stats.size);
    for (int i = 0; on && i < f->nshared && !g->found; i++) {
        tg_shared *sh = f->shared[i];
        bool bad;
        if (g->seen[i] == sh->version + 1) continue; /* checked, unchanged since */
        if (!sh->value && sh->dev && g->be && tg_dtype_is_float(sh->dev->dtype)) {
            /* A value a device update left there is checked there: only
             * its statistics come back, not the array. */
            tg_stats st;
            int w = classify_device(g, sh->dev, &st, ctx);
            if (w < 0) return w;
            if ((bad = w != 0)) {
                g->found = true;
                g->off = (tg_offence){.where = TG_OFFENCE_SHARED, .node = -1, .step = -1, .var = sh->id, .what = (unsigned)w,
                                      .stats = st, .call = g->off.call};
            }
        } else {
            const tg_array *sv = tg_shared_value(sh, ctx);
            if (!sv && sh->dev) return ctx && ctx->status ? ctx->status : TG_ERUNTIME;
            /* one a committer overwrites in place: its magnitude too */
            struct bound *b = g->bound && f->lend[i] >= 0 ? &g->bound[i] : NULL;
            bad = check_value(g, sv, TG_OFFENCE_SHARED, sh->id, b ? &b->mag : NULL, b ? &b->ok : NULL);
            if (b) b->ver = sh->version;
        }
        if (bad)
            return tg_errorf(ctx, TG_ESTOPPED,
                             "call %llu: shared variable '%s' holds %s (%d of %lld elements)",
                             (unsigned long long)g->off.call, g->off.var, what_str(g->off.what),
                             count_of(g->off.what, &g->off.stats), (long long)g->off.stats.size);
    }
    if (on && check_constant_outputs(g)) {
        char fb[256];
        const char *note = folded_note(&g->off, fb, sizeof fb);
        if (g->off.update_of)
            return tg_errorf(ctx, TG_ESTOPPED,
                             "call %llu: constant '%s'%s, the new value of shared variable '%s', holds %s (%d of %lld elements)",
                             (unsigned long long)g->off.call, g->off.var, note, g->off.update_of,
                             what_str(g->off.what), count_of(g->off.what, &g->off.stats),
                             (long long)g->off.stats.size);
        return tg_errorf(ctx, TG_ESTOPPED, "call %llu: constant '%s'%s, output '%s', holds %s (%d of %lld elements)",
                         (unsigned long long)g->off.call, g->off.var, note, tg_function_output_id(f, g->off.output),
                         what_str(g->off.what), count_of(g->off.what, &g->off.stats),
                         (long long)g->off.stats.size);
    }
    int rc = tg_function_call(f, inputs, outputs, ctx);
    if (rc == TG_OK && on) /* every value the shared state holds now was checked */
        for (int i = 0; i < f->nshared; i++) {
            struct bound *b = g->bound && f->lend[i] >= 0 ? &g->bound[i] : NULL;
            if (b && b->ver != f->shared[i]->version) {
                /* updated, by its committer (which set next): b held for
                 * the value the call began with */
                b->mag = b->next;
                b->ok = b->next_ok;
                b->ver = f->shared[i]->version;
            }
            g->seen[i] = f->shared[i]->version + 1;
        }
    if (rc != TG_ESTOPPED || !g->found) return rc;

    /* Again, up to the culprit, for its inputs as they were. */
    int k = g->off.node;
    const tg_node *n = f->sched[k].node;
    int nout = f->fg->nout;
    tg_array *small[8] = {0}, **scratch = nout <= 8 ? small : tg_calloc((size_t)nout, sizeof *scratch);
    if (!scratch) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    g->capture = k;
    set_hooks(g, true);
    rc = tg_function_call(f, inputs, scratch, ctx);
    set_hooks(g, false);
    g->capture = -1;
    if (scratch != small) tg_free(scratch);
    if (rc != TG_ESTOPPED || !g->cap) return rc ? rc : tg_errorf(ctx, TG_ERUNTIME, "nanguard: the second run did not reach node %d", k);
    /* A constant input holding the bad value already is the source, if it
     * holds the output's worst kind of bad value: a NaN made by dividing
     * by a constant's 0 is the node's, whether or not another element of
     * that constant is above the threshold. (Every other input was
     * checked before the node ran.) */
    unsigned worst = g->off.what & -g->off.what; /* NaN, then Inf, then big */
    for (int i = 0; i < g->ncap && i < n->nin; i++) {
        if (n->inputs[i]->kind != TG_VAR_CONSTANT) continue;
        tg_stats st;
        unsigned w = classify(g, g->cap[i], &st);
        if (!(w & worst)) continue;
        char fb[256];
        g->off.where = TG_OFFENCE_CONSTANT;
        g->off.var = n->inputs[i]->id;
        g->off.what = w & g->off.what;
        g->off.stats = st;
        g->off.folded_from = folded_from(f, n->inputs[i]);
        return tg_errorf(ctx, TG_ESTOPPED, "call %llu: constant '%s'%s read by node '%s' (%s) holds %s (%d of %lld elements)",
                         (unsigned long long)g->off.call, g->off.var, folded_note(&g->off, fb, sizeof fb),
                         tg_function_node_key(f, k), n->op->name, what_str(g->off.what),
                         count_of(g->off.what, &st), (long long)st.size);
    }
    /* The way down: the node, then (in a body) the body nodes. */
    g->depth = 0;
    tg_offence_level *top = path_push(g);
    if (top) {
        level_fill(top, f, k, &g->off);
        if (!strcmp(n->op->name, "composite")) {
            tg_ctx *c2 = tg_ctx_new();
            if (c2) locate_fused(g, n, g->cap, top, c2);
            tg_ctx_free(c2);
        } else if (has_body(n)) {
            locate_in_body(g, n, g->cap, g->ncap);
        }
        /* The offence's fields of the node that made it, from the path. */
        const tg_offence_level *last = &g->path[g->depth - 1];
        g->off.step = g->path[0].step;
        if (g->depth > 1) {
            g->off.body_fn = last->fn;
            g->off.body_node = last->node;
        }
        if (g->depth > 1 || last->fused_op) {
            g->off.body_op = last->fused_op ? last->fused_op : last->op;
            g->off.body_var = last->fused_op ? last->fused_var : last->var;
            g->off.body_what = last->fused_op ? last->fused_what : last->what;
            g->off.body_stats = last->fused_op ? last->fused_stats : last->stats;
            g->off.norigins = last->norigins;
            g->off.origins = last->origins;
        }
        g->off.depth = g->depth;
        g->off.path = g->path;
    }
    /* A node of a gradient's expansion names no node of the file: say
     * which derivative it (or the body op's origins) belongs to. */
    char note[512] = "";
    if (f->record.ngrads) {
        /* (a body's origins are keys of the body, not of the file) */
        bool fused = g->off.body_op && !g->off.body_fn;
        const char *const *keys = fused ? g->off.origins : NULL;
        int nk = fused ? g->off.norigins : tg_function_node_origins(f, k, &keys);
        tg_opt_record_grad_note(&f->record, keys, nk, note, sizeof note);
    }
    /* A loop is named as written, as the body nodes of the chain are: the
     * scan the optimizer rebuilt, 'H:scan' with output 'H:scan.1', stands
     * for 'H' and its 'LH'. */
    bool loop = g->depth > 1 && has_body(n);
    const char *nname = loop ? tg_offence_level_name(&g->path[0]) : tg_function_node_key(f, k);
    const char *oname = loop ? g->path[0].var_as_written : g->off.var;
    /* The body op's own result says what it made: its exp made an
     * infinity that a later mul by 0 turned into the output's NaN. */
    char became[256] = "";
    unsigned made = g->off.what;
    if (g->off.body_op && g->off.body_what && !(g->off.body_what & g->off.what & -g->off.what)) {
        made = g->off.body_what;
        snprintf(became, sizeof became, " (%d of %lld elements), and the output '%s' holds %s",
                 count_of(made, &g->off.body_stats), (long long)g->off.body_stats.size, oname,
                 what_str(g->off.what));
    }
    /* Which node made it, the way down: ": its exp" (a fused op),
     * ": its log 'lh'" (a body node), ": its scan 'LR', at step 2 of its
     * loop its log 'l'" (a body node of a body node). */
    char chain[1024] = "";
    size_t cl = 0;
    for (int i = 1; i < g->depth && cl < sizeof chain; i++) {
        const tg_offence_level *l = &g->path[i], *up = &g->path[i - 1];
        /* the names as written: a fused op by the body node it stands
         * for, not the composite's own variable */
        const char *op = l->fused_op ? l->fused_op : l->op;
        const char *var = !l->fused_op ? l->var_as_written : l->norigins ? l->origins[0] : l->fused_var;
        int w;
        if (i == 1)
            w = snprintf(chain + cl, sizeof chain - cl, ": its %s '%s'", op, var);
        else if (up->step >= 0)
            w = snprintf(chain + cl, sizeof chain - cl, ", at step %lld of its loop its %s '%s'",
                         (long long)up->step + 1, op, var);
        else
            w = snprintf(chain + cl, sizeof chain - cl, ", in its body its %s '%s'", op, var);
        cl += w > 0 ? (size_t)w : 0;
    }
    if (g->depth <= 1 && g->off.body_op) snprintf(chain, sizeof chain, ": its %s", g->off.body_op);
    if (*became)
        return tg_errorf(ctx, TG_ESTOPPED, "call %llu: node '%s' (%s%s%s%s) made %s%s (%d of %lld elements)",
                         (unsigned long long)g->off.call, nname, n->op->name, chain,
                         *note ? "; " : "", note, what_str(made), became, count_of(g->off.what, &g->off.stats),
                         (long long)g->off.stats.size);
    char step[64] = "";
    if (g->off.step >= 0) snprintf(step, sizeof step, ", first at step %lld of the loop", (long long)g->off.step + 1);
    return tg_errorf(ctx, TG_ESTOPPED, "call %llu: node '%s' (%s%s%s%s) made %s in output '%s' (%d of %lld elements)%s",
                     (unsigned long long)g->off.call, nname, n->op->name, chain, *note ? "; " : "", note,
                     what_str(g->off.what), oname, count_of(g->off.what, &g->off.stats), (long long)g->off.stats.size,
                     step);
}
