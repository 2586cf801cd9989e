/* Random numbers (FORMAT.md s7): random_uniform, random_normal,
 * random_binomial, random_multinomial.
 *
 * Counter-based: Philox 4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel
 * random numbers: as easy as 1, 2, 3", SC 2011). The state is a uint64
 * vector [key, counter]. A Philox block is the function of (key, a 128-bit
 * counter) -> four 32-bit words; words 0-1 of the counter hold
 * `counter + b` (mod 2^64) and words 2-3 a sub-index (0 for uniform and
 * normal). Every sample element depends only on (key, counter, its own
 * index), never on which thread computed it, so the numbers are the same
 * on any machine and for any thread count. The new state is [key,
 * counter + the number of counter values used]:
 * - random_uniform, random_normal: one block gives two elements (two
 *   53-bit uniforms; Box-Muller turns them into two normals), so
 *   ceil(size / 2) blocks; element i comes from block i / 2.
 * - random_binomial: one counter value per element; its n Bernoulli draws
 *   take sub-indices 0, 1, ... (two draws per block). The cost is O(n) per
 *   element: meant for the small n of dropout masks and the like; n is at
 *   most 2^33 (TRIALS_MAX), where the 32-bit sub-indices run out.
 * - random_multinomial: one counter value per row of pvals; its n draws
 *   (two per block) each pick a category by the cumulative
 *   probabilities, the last category taking the rest (NumPy's rule).
 * A uniform in float32 or float16 is rounded from the float64 draw (and so
 * may round up to `high`, as NumPy's can).
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "grad/grad.h"
#include "ops/op.h"
#include "ops/shape.h"
#include "ops/vmath.h"

/* ---- Philox 4x32-10 ---- */

void tg_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

void tg_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static inline void block(uint64_t key, uint64_t ctr, uint32_t sub, uint32_t w[4]) {
    uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), sub, 0};
    uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
    tg_philox4x32_10(c, k, w);
}

/* A double in [0, 1) from 53 of the 64 bits. */
static inline double u53(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * 0x1.0p-53;
}

/* The two 53-bit uniforms of blocks ctr + k (sub-index 0), k < n <= GROUP:
 * eight blocks at a time in lanes, which the compiler vectorises (the
 * 32x32->64 multiplies are one instruction per lane group). */
enum { GROUP = 256 };

static void uniforms(uint64_t key, uint64_t ctr, int n, double *u0, double *u1) {
    for (int g = 0; g < n; g += 8) {
        uint32_t c0[8], c1[8], c2[8], c3[8];
        for (int l = 0; l < 8; l++) {
            uint64_t c = ctr + (uint64_t)(g + l);
            c0[l] = (uint32_t)c;
            c1[l] = (uint32_t)(c >> 32);
            c2[l] = 0;
            c3[l] = 0;
        }
        uint32_t ka = (uint32_t)key, kb = (uint32_t)(key >> 32);
        for (int r = 0; r < 10; r++) {
            for (int l = 0; l < 8; l++) {
                uint64_t p0 = (uint64_t)0xD2511F53u * c0[l], p1 = (uint64_t)0xCD9E8D57u * c2[l];
                uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ ka;
                uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ kb;
                c1[l] = (uint32_t)p1;
                c3[l] = (uint32_t)p0;
                c0[l] = n0;
                c2[l] = n2;
            }
            ka += 0x9E3779B9u;
            kb += 0xBB67AE85u;
        }
        for (int l = 0; l < 8 && g + l < n; l++) {
            u0[g + l] = u53(c0[l], c1[l]);
            u1[g + l] = u53(c2[l], c3[l]);
        }
    }
}

/* ---- Box-Muller's logarithm, sine and cosine ----
 *
 * Written out here in plain double arithmetic instead of taken from libm
 * or libmvec, whose versions differ from one CPU to the next (glibc picks
 * an AVX-512, AVX2, FMA or SSE variant at load time, and their last bits
 * differ: 0.5% of the normals of one draw between the AVX-512 and AVX2
 * ones, 9% against SSE). Each step below is one correctly rounded IEEE
 * operation, and the file is built with -ffp-contract=off, so the normals
 * are the same bits on every machine, as FORMAT.md s7 promises. Accuracy:
 * within a few units in the last place of the true values. */

/* log(x) for a normal positive x (here 1 - u, in [2^-53, 1]):
 * x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| < 0.1716, as the series
 * 2 (s + s^3/3 + s^5/5 + ...), cut after s^21 (the next term is below
 * 2^-60 of the sum); e log 2 in two parts, the first exact. */
static inline double rnd_log(double x) {
    uint64_t b, eb;
    memcpy(&b, &x, sizeof b);
    /* the biased exponent as a double: 2^52 + it, less 2^52 */
    eb = (b >> 52) | 0x4330000000000000ull;
    b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m, ed;
    memcpy(&m, &b, sizeof m);
    memcpy(&ed, &eb, sizeof ed);
    ed -= 0x1.0p52 + 1023;
    bool big = m > 1.4142135623730951;
    m = big ? 0.5 * m : m;
    ed = big ? ed + 1.0 : ed;
    double s = (m - 1.0) / (m + 1.0), z = s * s;
    double p = 1.0 / 21;
    p = p * z + 1.0 / 19;
    p = p * z + 1.0 / 17;
    p = p * z + 1.0 / 15;
    p = p * z + 1.0 / 13;
    p = p * z + 1.0 / 11;
    p = p * z + 1.0 / 9;
    p = p * z + 1.0 / 7;
    p = p * z + 1.0 / 5;
    p = p * z + 1.0 / 3;
    double s2 = 2.0 * s;
    /* log 2 = LN2_HI + LN2_LO, LN2_HI with 21 significant bits, so that
     * e * LN2_HI is exact for any exponent */
    const double LN2_HI = 0x1.62e42p-1, LN2_LO = 4.7493250390316726e-07;
    return ed * LN2_HI + (s2 + (s2 * z * p + ed * LN2_LO));
}

/* sin(2 pi u) and cos(2 pi u) for u in [0, 1): u = k/4 + r with
 * |r| <= 1/8 (exact), t = 2 pi r in [-pi/4, pi/4], the Taylor series of
 * sin t to t^19 and cos t to t^20 (the next terms are below 2^-60 of
 * them), then the quarter turns k. */
static inline void rnd_sincos_2pi(double u, double *sn, double *cs) {
    double kd = __builtin_rint(4.0 * u);
    double r = u - 0.25 * kd, t = r * 6.283185307179586, z = t * t;
    double ps = -1.0 / 121645100408832000.0; /* -1/19! */
    ps = ps * z + 1.0 / 355687428096000.0;   /* 1/17! */
    ps = ps * z - 1.0 / 1307674368000.0;     /* -1/15! */
    ps = ps * z + 1.0 / 6227020800.0;        /* 1/13! */
    ps = ps * z - 1.0 / 39916800.0;          /* -1/11! */
    ps = ps * z + 1.0 / 362880.0;            /* 1/9! */
    ps = ps * z - 1.0 / 5040.0;              /* -1/7! */
    ps = ps * z + 1.0 / 120.0;               /* 1/5! */
    ps = ps * z - 1.0 / 6.0;                 /* -1/3! */
    double pc = 1.0 / 2432902008176640000.0; /* 1/20! */
    pc = pc * z - 1.0 / 6402373705728000.0;  /* -1/18! */
    pc = pc * z + 1.0 / 20922789888000.0;    /* 1/16! */
    pc = pc * z - 1.0 / 87178291200.0;       /* -1/14! */
    pc = pc * z + 1.0 / 479001600.0;         /* 1/12! */
    pc = pc * z - 1.0 / 3628800.0;           /* -1/10! */
    pc = pc * z + 1.0 / 40320.0;             /* 1/8! */
    pc = pc * z - 1.0 / 720.0;               /* -1/6! */
    pc = pc * z + 1.0 / 24.0;                /* 1/4! */
    double st = t + t * z * ps, ct = 1.0 - (0.5 * z - z * z * pc);
    /* kd in 0..4; quarter turns k = kd mod 4 */
    bool odd = kd == 1.0 || kd == 3.0;
    double a = odd ? ct : st, c = odd ? st : ct;
    *sn = kd == 2.0 || kd == 3.0 ? -a : a;
    *cs = kd == 1.0 || kd == 2.0 ? -c : c;
}

/* Box-Muller over n pairs of uniforms, in place: u0 becomes
 * sqrt(-2 log(1 - u0)) cos(2 pi u1) and u1 the same with sin. 1 - u0 is in
 * (0, 1]: the logarithm stays finite. One variant per vector width; each
 * computes the same bits (every operation is rounded once, none fused). */
TG_CLONES static void box_muller(int n, double *restrict u0, double *restrict u1) {
    for (int k = 0; k < n; k++) {
        double rr = __builtin_sqrt(-2.0 * rnd_log(1.0 - u0[k])), sn, cs;
        rnd_sincos_2pi(u1[k], &sn, &cs);
        u1[k] = rr * sn;
        u0[k] = rr * cs;
    }
}

/* ---- attributes and types ---- */

enum { RU, RN, RB, RM };

/* The most trials of one binomial element or multinomial row: its draws
 * take 32-bit sub-indices, two per block, so past 2^33 they would repeat
 * (and n near 2^63 would loop for ever); a larger n is a run-time error
 * naming it as given. */
#define TRIALS_MAX (INT64_C(1) << 33)

typedef struct rnd_impl {
    int kind;
} rnd_impl;

static const char *const KEYS[] = {"dtype", NULL};

static int rnd_attrs(tg_node *n, tg_ctx *ctx) {
    const rnd_impl *im = n->op->impl;
    bool ints = im->kind == RB || im->kind == RM;
    int rc = tg_attr_dtype(n, "dtype", ints ? TG_INT64 : TG_FLOAT64, &n->a.dtype, ctx);
    if (rc) return rc;
    char k = tg_dtype_kind(n->a.dtype);
    if (ints ? k == 'b' : k != 'f')
        return tg_errorf(ctx, TG_ELOAD, "attrs.dtype: %s gives %s, not %s", n->op->name,
                         ints ? "integers or floats" : "floats", tg_dtype_name(n->a.dtype));
    return TG_OK;
}

static int check_rng(tg_node *n, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[0]->type;
    if (t->dtype != TG_UINT64 || t->ndim != 1 || (t->shape[0] >= 0 && t->shape[0] != 2))
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[0] '%s': expected the random state, a uint64 vector of "
                         "length 2 (key, counter)",
                         n->inputs[0]->id);
    int64_t two = 2;
    tg_set_out_type(n, 0, TG_UINT64, 1, &two);
    return TG_OK;
}

static int check_int(tg_node *n, int i, int maxdim, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[i]->type;
    if (!tg_dtype_is_int(t->dtype) || t->ndim > maxdim)
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s': expected an integer %s, got %s", i,
                         n->inputs[i]->id, maxdim ? "scalar or vector" : "scalar",
                         tg_dtype_name(t->dtype));
    return TG_OK;
}

/* (rng, size, a, b): a and b broadcast to size. */
static int rnd_infer(tg_node *n, tg_ctx *ctx) {
    const rnd_impl *im = n->op->impl;
    int rc = check_rng(n, ctx);
    if (rc) return rc;
    tg_dtype od = n->a.dtype;
    if (im->kind == RB) {
        if ((tg_dtype_is_int(n->inputs[2]->type.dtype) && (rc = tg_weak_take(n, 2, TG_INT64, ctx))) ||
            (rc = tg_weak_take(n, 3, TG_FLOAT64, ctx)))
            return rc;
        if ((rc = check_int(n, 2, TG_MAX_NDIM, ctx))) return rc;
    } else {
        if ((rc = tg_weak_take(n, 2, od, ctx)) || (rc = tg_weak_take(n, 3, od, ctx))) return rc;
    }
    if (tg_dtype_kind(n->inputs[3]->type.dtype) == 'b' ||
        (im->kind != RB && tg_dtype_kind(n->inputs[2]->type.dtype) == 'b'))
        return tg_errorf(ctx, TG_ETYPE, "the parameters of %s must be numbers, not bool",
                         n->op->name);
    const tg_type *st = &n->inputs[1]->type;
    if (!tg_dtype_is_int(st->dtype) || st->ndim != 1 || st->shape[0] < 0)
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[1] '%s': expected the sample's size, an integer vector whose "
                         "length is known when the graph is loaded",
                         n->inputs[1]->id);
    int nd = (int)st->shape[0];
    if (nd > TG_MAX_NDIM)
        return tg_errorf(ctx, TG_ETYPE, "inputs[1] '%s': more than %d dimensions",
                         n->inputs[1]->id, TG_MAX_NDIM);
    int64_t shape[TG_MAX_NDIM];
    for (int d = 0; d < nd; d++) shape[d] = -1;
    const tg_array *sz = tg_const_input(n, 1);
    if (sz) {
        for (int d = 0; d < nd; d++) {
            shape[d] = tg_load_len(sz->dtype, sz->data + d * sz->strides[0]);
            if (shape[d] < 0)
                return tg_errorf(ctx, TG_ESHAPE, "inputs[1] '%s': negative size %lld",
                                 n->inputs[1]->id, (long long)shape[d]);
        }
    }
    for (int i = 2; i < 4; i++) {
        const tg_type *pt = &n->inputs[i]->type;
        bool ok = pt->ndim <= nd;
        for (int d = 0; ok && d < pt->ndim; d++) {
            int64_t l = pt->shape[d], s = shape[nd - pt->ndim + d];
            ok = l < 0 || l == 1 || s < 0 || s == l;
        }
        if (!ok)
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[%d] '%s' does not broadcast to the sample's size", i,
                             n->inputs[i]->id);
    }
    tg_set_out_type(n, 1, od, nd, shape);
    return TG_OK;
}

/* (rng, n, pvals) */
static int mn_infer(tg_node *n, tg_ctx *ctx) {
    int rc = check_rng(n, ctx);
    if (rc) return rc;
    if ((tg_dtype_is_int(n->inputs[1]->type.dtype) && (rc = tg_weak_take(n, 1, TG_INT64, ctx))) ||
        (rc = check_int(n, 1, 1, ctx)))
        return rc;
    const tg_type *pt = &n->inputs[2]->type;
    if (pt->ndim < 1 || pt->ndim > 2 || tg_dtype_kind(pt->dtype) == 'b')
        return tg_errorf(ctx, TG_ETYPE,
                         "inputs[2] '%s': expected pvals, a vector or a (batch, k) matrix of "
                         "probabilities",
                         n->inputs[2]->id);
    const tg_type *nt = &n->inputs[1]->type;
    if (nt->ndim == 1) {
        int64_t rows = pt->ndim == 2 ? pt->shape[0] : 1;
        if (nt->shape[0] >= 0 && rows >= 0 && nt->shape[0] != rows && nt->shape[0] != 1)
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[1] '%s': %lld trial counts for %lld rows of pvals",
                             n->inputs[1]->id, (long long)nt->shape[0], (long long)rows);
    }
    tg_set_out_type(n, 1, n->a.dtype, pt->ndim, pt->shape);
    return TG_OK;
}

/* ---- running ---- */

static int read_state(const tg_array *s, uint64_t *key, uint64_t *ctr, tg_ctx *ctx) {
    if (s->ndim != 1 || s->shape[0] != 2)
        return tg_errorf(ctx, TG_ESHAPE, "the random state must have shape (2,)");
    *key = *(const uint64_t *)s->data;
    *ctr = *(const uint64_t *)(s->data + s->strides[0]);
    return TG_OK;
}

static int write_state(tg_array **slot, uint64_t key, uint64_t ctr, tg_ctx *ctx) {
    int64_t two = 2;
    int rc = tg_array_prepare(slot, TG_UINT64, 1, &two, ctx);
    if (rc) return rc;
    uint64_t *d = (uint64_t *)(*slot)->data;
    d[0] = key;
    d[1] = ctr;
    return TG_OK;
}

/* A parameter broadcast to shape and converted to dt, C-contiguous; a
 * single element stays a single element (*scalar set). */
static tg_array *param(const tg_array *a, int i, tg_dtype dt, int nd, const int64_t *shape,
                       bool *scalar, tg_ctx *ctx) {
    *scalar = tg_array_size_inline(a) == 1;
    if (*scalar) {
        tg_array *c = tg_array_copy(a, dt);
        if (!c) tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return c;
    }
    bool ok = a->ndim <= nd;
    int64_t st[TG_MAX_NDIM];
    int off = nd - a->ndim;
    for (int d = 0; ok && d < nd; d++) {
        if (d < off) {
            st[d] = 0;
            continue;
        }
        int64_t l = a->shape[d - off];
        ok = l == shape[d] || l == 1;
        st[d] = l == 1 ? 0 : a->strides[d - off];
    }
    if (!ok) {
        tg_str s = {0};
        for (int d = 0; d < a->ndim; d++)
            tg_str_addf(&s, "%s%lld", d ? ", " : "", (long long)a->shape[d]);
        tg_str_addf(&s, ") does not broadcast to the size (");
        for (int d = 0; d < nd; d++) tg_str_addf(&s, "%s%lld", d ? ", " : "", (long long)shape[d]);
        tg_errorf(ctx, TG_ESHAPE, "inputs[%d] of shape (%s)", i, s.s ? s.s : "");
        tg_str_free(&s);
        return NULL;
    }
    tg_array *v = tg_array_view_raw(a, a->dtype, nd, shape, st, a->data);
    if (!v) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    tg_array *c = tg_array_copy(v, dt);
    tg_array_free(v);
    if (!c) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return c;
}

static inline void store(tg_dtype od, char *o, int64_t i, double v) {
    if (od == TG_FLOAT64)
        ((double *)o)[i] = v;
    else if (od == TG_FLOAT32)
        ((float *)o)[i] = (float)v;
    else
        tg_store_f64(od, o + (size_t)i * tg_isize(od), v);
}

/* The largest count an integer dtype holds (a float one: any, rounded).
 * A count past it would wrap where NumPy's astype wraps it; tg refuses
 * an n that could give one instead (docs/format-choices.md). */
static int64_t count_max(tg_dtype d) {
    if (tg_dtype_is_float(d)) return INT64_MAX;
    bool u = tg_dtype_kind(d) == 'u';
    switch (tg_isize(d)) {
    case 1: return u ? UINT8_MAX : INT8_MAX;
    case 2: return u ? UINT16_MAX : INT16_MAX;
    case 4: return u ? (int64_t)UINT32_MAX : INT32_MAX;
    default: return INT64_MAX;
    }
}

static int narrow_error(tg_dtype od, int64_t n, tg_ctx *ctx) {
    return tg_errorf(ctx, TG_ERUNTIME,
                     "n %lld does not fit the sample's dtype %s (at most %lld): a count could wrap; "
                     "attrs.dtype int64 holds any",
                     (long long)n, tg_dtype_name(od), (long long)count_max(od));
}

static inline void store_count(tg_dtype od, char *o, int64_t i, int64_t v) {
    if (od == TG_INT64)
        ((int64_t *)o)[i] = v;
    else if (tg_dtype_is_float(od))
        tg_store_f64(od, o + (size_t)i * tg_isize(od), (double)v);
    else
        tg_store_i64(od, o + (size_t)i * tg_isize(od), v);
}

/* Successes in `trials` Bernoulli(p) draws from counter c. */
static int64_t binomial_count(uint64_t key, uint64_t c, int64_t trials, double p) {
    int64_t cnt = 0;
    for (int64_t j = 0; j < trials; j += 2) {
        uint32_t w[4];
        block(key, c, (uint32_t)(j >> 1), w);
        cnt += u53(w[0], w[1]) < p;
        if (j + 1 < trials) cnt += u53(w[2], w[3]) < p;
    }
    return cnt;
}

/* row[0..k) += the categories of `trials` draws from counter c, cr the
 * row's cumulative probabilities. */
static void multinomial_row(uint64_t key, uint64_t c, const double *cr, int64_t k, int64_t trials,
                            int64_t *row) {
    for (int64_t j = 0; j < trials; j += 2) {
        uint32_t w[4];
        block(key, c, (uint32_t)(j >> 1), w);
        double u[2] = {u53(w[0], w[1]), u53(w[2], w[3])};
        for (int e = 0; e < 2 && j + e < trials; e++) {
            /* The first category whose cumulative probability exceeds u,
             * among the first k - 1; else the last. */
            int64_t lo = 0, hi = k - 1;
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (cr[mid] > u[e])
                    hi = mid;
                else
                    lo = mid + 1;
            }
            row[lo]++;
        }
    }
}

static int rnd_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const rnd_impl *im = n->op->impl;
    uint64_t key, ctr;
    int rc = read_state(in[0], &key, &ctr, ctx);
    if (rc) return rc;
    const tg_array *sz = in[1];
    int nd = (int)sz->shape[0];
    int64_t shape[TG_MAX_NDIM];
    for (int d = 0; d < nd; d++) {
        unsigned long long u;
        if (tg_shape_len_too_large(sz->dtype, sz->data + d * sz->strides[0], &u))
            return tg_errorf(ctx, TG_ESHAPE, "size %llu is too large (more than 2^63 - 1)", u);
        shape[d] = tg_load_len(sz->dtype, sz->data + d * sz->strides[0]);
        if (shape[d] < 0) return tg_errorf(ctx, TG_ESHAPE, "negative size %lld", (long long)shape[d]);
    }
    int64_t total = tg_shape_size(nd, shape);
    if (total < 0) return tg_errorf(ctx, TG_ESHAPE, "the sample's size is too large");
    tg_dtype od = n->a.dtype;
    bool s0, s1;
    tg_array *a = NULL, *b = NULL;
    a = param(in[2], 2, im->kind == RB ? TG_INT64 : TG_FLOAT64, nd, shape, &s0, ctx);
    if (!a) return ctx ? ctx->status : TG_ENOMEM;
    if (!(b = param(in[3], 3, TG_FLOAT64, nd, shape, &s1, ctx))) {
        rc = ctx ? ctx->status : TG_ENOMEM;
        goto fail;
    }
    const double *pb = (const double *)b->data;
    int64_t nb = s1 ? 1 : total, na = s0 ? 1 : total;
    if (im->kind == RN) {
        /* NumPy's rule for a scale: a sign bit refuses it, -0 too; a NaN
         * is taken (its samples are NaN) */
        for (int64_t i = 0; i < nb; i++)
            if (signbit(pb[i]) && !isnan(pb[i])) {
                rc = tg_errorf(ctx, TG_ERUNTIME, "std must be non-negative, got %g", pb[i]);
                goto fail;
            }
    } else if (im->kind == RU) {
        /* NumPy refuses a range whose width is not finite (a NaN or
         * infinite bound, or -1e308 to 1e308): every sample would be inf
         * or NaN, none in [low, high). */
        const double *pa = (const double *)a->data;
        for (int64_t i = 0, m = s0 && s1 ? 1 : total; i < m; i++) {
            double lo = pa[s0 ? 0 : i], hi = pb[s1 ? 0 : i];
            if (!isfinite(hi - lo)) {
                rc = tg_errorf(ctx, TG_ERUNTIME, "high - low must be finite, got low %g and high %g", lo, hi);
                goto fail;
            }
        }
    } else if (im->kind == RB) {
        const int64_t *pa = (const int64_t *)a->data;
        for (int64_t i = 0; i < na; i++)
            /* (a uint64 n keeps its bits through the int64 copy) */
            if (in[2]->dtype == TG_UINT64 ? (uint64_t)pa[i] > (uint64_t)TRIALS_MAX
                                          : pa[i] > TRIALS_MAX) {
                rc = tg_errorf(ctx, TG_ERUNTIME,
                               "n %llu is too large: tg draws the trials one by one, at most "
                               "2^33 per element",
                               (unsigned long long)pa[i]);
                goto fail;
            } else if (pa[i] < 0) {
                rc = tg_errorf(ctx, TG_ERUNTIME, "n must be non-negative, got %lld",
                               (long long)pa[i]);
                goto fail;
            } else if (pa[i] > count_max(od)) {
                rc = narrow_error(od, pa[i], ctx);
                goto fail;
            }
        for (int64_t i = 0; i < nb; i++)
            if (!(pb[i] >= 0 && pb[i] <= 1)) {
                rc = tg_errorf(ctx, TG_ERUNTIME, "p must be in [0, 1], got %g", pb[i]);
                goto fail;
            }
    }
    if ((rc = tg_array_prepare(&out[1], od, nd, shape, ctx))) goto fail;
    char *o = out[1]->data;
    int64_t used;
    if (im->kind == RB) {
        const int64_t *pn = (const int64_t *)a->data;
        double work = 0; /* (in double: the sum may pass int64) */
        for (int64_t i = 0; i < na; i++) work += (double)pn[i];
        if (s0) work *= (double)total;
        int nth = work >= TG_PARALLEL_MIN / 4 || total >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
        /* (no team for one thread: see TG_PAR_FOR) */
        if (nth > 1) {
#pragma omp parallel for schedule(dynamic, 256) num_threads(nth)
            for (int64_t i = 0; i < total; i++)
                store_count(od, o, i, binomial_count(key, ctr + (uint64_t)i, pn[s0 ? 0 : i], pb[s1 ? 0 : i]));
        } else {
            for (int64_t i = 0; i < total; i++)
                store_count(od, o, i, binomial_count(key, ctr + (uint64_t)i, pn[s0 ? 0 : i], pb[s1 ? 0 : i]));
        }
        used = total;
    } else {
        const double *pa = (const double *)a->data;
        int64_t nblk = (total + 1) / 2, nch = (nblk + GROUP - 1) / GROUP;
        int nth = total >= TG_PARALLEL_MIN / 4 ? omp_get_max_threads() : 1;
        bool normal = im->kind == RN;
        TG_PAR_FOR(nth, ch, nch, {
            int64_t k0 = ch * GROUP;
            int nb = (int)(nblk - k0 < GROUP ? nblk - k0 : GROUP);
            double u0[GROUP], u1[GROUP];
            uniforms(key, ctr + (uint64_t)k0, nb, u0, u1);
            if (normal) {
                box_muller(nb, u0, u1);
            }
            for (int k = 0; k < nb; k++) {
                for (int e = 0; e < 2; e++) {
                    int64_t i = 2 * (k0 + k) + e;
                    if (i >= total) break;
                    double x = pa[s0 ? 0 : i], y = pb[s1 ? 0 : i], v = e ? u1[k] : u0[k];
                    /* uniform: low + (high - low) u; normal: mean + std z */
                    store(od, o, i, normal ? x + y * v : x + (y - x) * v);
                }
            }
        });
        used = nblk;
    }
    rc = write_state(&out[0], key, ctr + (uint64_t)used, ctx);
fail:
    tg_array_free(a);
    tg_array_free(b);
    return rc;
}

static int mn_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    uint64_t key, ctr;
    int rc = read_state(in[0], &key, &ctr, ctx);
    if (rc) return rc;
    const tg_array *pv = in[2], *nn = in[1];
    int64_t rows = pv->ndim == 2 ? pv->shape[0] : 1, k = pv->shape[pv->ndim - 1];
    int64_t nlen = nn->ndim ? nn->shape[0] : 1;
    if (nlen != 1 && nlen != rows)
        return tg_errorf(ctx, TG_ESHAPE, "%lld trial counts for %lld rows of pvals",
                         (long long)nlen, (long long)rows);
    tg_array *p = tg_array_copy(pv, TG_FLOAT64), *cnt = NULL;
    double *cum = NULL;
    if (!p) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    const double *pd = (const double *)p->data;
    int64_t *trials = tg_calloc((size_t)rows + 1, sizeof(int64_t));
    cum = tg_calloc((size_t)(rows * k) + 1, sizeof(double));
    if (!trials || !cum) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    for (int64_t r = 0; r < rows; r++) {
        const char *tp = nn->data + (nlen == 1 ? 0 : r * nn->strides[0]);
        int64_t t = tg_load_len(nn->dtype, tp);
        unsigned long long u = 0;
        if (tg_shape_len_too_large(nn->dtype, tp, &u) || t > TRIALS_MAX) {
            rc = tg_errorf(ctx, TG_ERUNTIME,
                           "n %llu is too large: tg draws the trials one by one, at most 2^33 "
                           "per row", nn->dtype == TG_UINT64 ? u : (unsigned long long)t);
            goto fail;
        }
        if (t < 0) {
            rc = tg_errorf(ctx, TG_ERUNTIME, "n must be non-negative, got %lld", (long long)t);
            goto fail;
        }
        if (t > count_max(n->a.dtype)) {
            rc = narrow_error(n->a.dtype, t, ctx);
            goto fail;
        }
        if (t > 0 && k == 0) {
            rc = tg_errorf(ctx, TG_ERUNTIME, "pvals has no categories");
            goto fail;
        }
        trials[r] = t;
        double s = 0;
        for (int64_t c = 0; c < k; c++) {
            double q = pd[r * k + c];
            if (!(q >= 0 && q <= 1)) {
                rc = tg_errorf(ctx, TG_ERUNTIME, "pvals must be in [0, 1], got %g", q);
                goto fail;
            }
            s += q;
            cum[r * k + c] = s;
        }
        if (k > 1 && cum[r * k + k - 2] > 1 + 1e-12) {
            rc = tg_errorf(ctx, TG_ERUNTIME,
                           "sum(pvals[:-1]) = %.17g > 1 (row %lld)", cum[r * k + k - 2],
                           (long long)r);
            goto fail;
        }
    }
    tg_dtype od = n->a.dtype;
    if ((rc = tg_array_prepare(&out[1], od, pv->ndim, pv->shape, ctx))) goto fail;
    if (!(cnt = tg_array_new(TG_INT64, pv->ndim, pv->shape))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    int64_t *cd = (int64_t *)cnt->data;
    double work = 0; /* (in double: the sum may pass int64) */
    for (int64_t r = 0; r < rows; r++) work += (double)trials[r];
    int nth = work >= TG_PARALLEL_MIN / 4 ? omp_get_max_threads() : 1;
    /* (no team for one thread: see TG_PAR_FOR) */
    if (nth > 1) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth)
        for (int64_t r = 0; r < rows; r++) multinomial_row(key, ctr + (uint64_t)r, cum + r * k, k, trials[r], cd + r * k);
    } else {
        for (int64_t r = 0; r < rows; r++) multinomial_row(key, ctr + (uint64_t)r, cum + r * k, k, trials[r], cd + r * k);
    }
    rc = tg_array_assign(out[1], cnt, ctx);
    if (!rc) rc = write_state(&out[0], key, ctr + (uint64_t)rows, ctx);
fail:
    tg_array_free(p);
    tg_array_free(cnt);
    tg_free(trials);
    tg_free(cum);
    return rc;
}

static void rnd_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                     double *bytes) {
    const rnd_impl *im = n->op->impl;
    double sz = (double)tg_array_size_inline(out[1]);
    /* Philox: 10 rounds of two multiplies and a few xors per block. */
    double draws = sz;
    if (im->kind == RB) draws = sz * (tg_array_size_inline(in[2]) == 1
                                          ? fmax(tg_load_f64(in[2]->dtype, in[2]->data), 1)
                                          : 1);
    *flops = draws * 40 + (im->kind == RN ? sz * 30 : 0);
    *bytes = sz * (double)tg_isize(out[1]->dtype) + 32;
}

/* A draw has no derivative by its parameters: as Theano's random ops
 * (grad_undefined), a gradient that would go through a sample back to
 * them is an error, not zero (a zero would train a model that samples
 * with learned parameters, a VAE written this way, on a wrong gradient).
 * Reached only when an output gets a gradient (a float sample: an integer
 * one, binomial's or multinomial's, carries none, as floor's) and a float
 * parameter depends on what is differentiated; the state and the size
 * are integers and never do. */
extern const tg_op tg_op_random_uniform, tg_op_random_normal;

static int rnd_grad(struct tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    (void)gout;
    (void)gin;
    return tg_errorf(b->ctx, TG_EINVAL,
                     "a random draw has no gradient by its parameters (Theano's grad_undefined): draw with "
                     "fixed ones and shift and scale the sample (%s), which has one",
                     n->op == &tg_op_random_uniform ? "low + (high - low) * random_uniform(rng, size, 0, 1)"
                     : n->op == &tg_op_random_normal ? "mean + std * random_normal(rng, size, 0, 1)"
                                                     : "or compute it from a uniform draw");
}

#define RND(NAME, KIND, NIN, INFER, RUN)                                         \
    static const rnd_impl impl_##NAME = {KIND};                                  \
    const tg_op tg_op_##NAME = {.name = #NAME,                                   \
                                .nin_min = NIN,                                  \
                                .nin_max = NIN,                                  \
                                .nout = 2,                                       \
                                .grad = rnd_grad,                                \
                                .attr_keys = KEYS,                               \
                                .parse_attrs = rnd_attrs,                        \
                                .infer = INFER,                                  \
                                .run = RUN,                                      \
                                .cost = rnd_cost,                                \
                                .view_of = -1,                                   \
                                .impl = &impl_##NAME};

RND(random_uniform, RU, 4, rnd_infer, rnd_run)
RND(random_normal, RN, 4, rnd_infer, rnd_run)
RND(random_binomial, RB, 4, rnd_infer, rnd_run)
RND(random_multinomial, RM, 3, mn_infer, mn_run)
