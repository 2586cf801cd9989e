/* Reductions (FORMAT.md s7): sum prod mean max min all any logsumexp var
 * std argmax argmin, over any set of axes, with keepdims.
 *
 * The input is viewed with the kept axes first and the reduced axes last,
 * so that every output element reduces one run of `inner` elements. When
 * that run is contiguous (the reduced axes are trailing), rows are reduced
 * in place; when the reduced axes lead and the rest is contiguous (a sum
 * over the batch), whole rows are accumulated into the output; when the
 * reduced axes have no single stride the input is copied to that layout
 * first (in tiles), except where the order cannot change the result
 * (max, min, all, any, argmax of every element: memory is read in
 * order) and for the sum and mean of every element (read in memory's
 * order into the copy's summation tree: sum_view_leaves), and rows at a
 * large stride beside each other are reduced together ("layouts" below). Floats accumulate in double (float32 too, where NumPy stays in
 * float32: docs/format-choices.md) and sum pairwise, as NumPy does, var
 * and std in two passes (integer sums wrap in int64/uint64 as NumPy's);
 * a single long row is split over OpenMP threads, many rows are shared
 * among them.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"
#include "ops/op.h"
#include "ops/vmath.h"

typedef enum red_kind {
    R_SUM, R_PROD, R_MEAN, R_MAX, R_MIN, R_ALL, R_ANY, R_LSE, R_VAR, R_STD, R_ARGMAX, R_ARGMIN
} red_kind;

typedef struct red_impl {
    red_kind kind;
} red_impl;

static const char *const KEYS[] = {"axis", "keepdims", NULL};
static const char *const VAR_KEYS[] = {"axis", "keepdims", "ddof", NULL};

static int red_attrs(tg_node *n, tg_ctx *ctx) {
    const red_impl *im = n->op->impl;
    bool arg = im->kind == R_ARGMAX || im->kind == R_ARGMIN;
    int rc = tg_attr_axis(n, "axis", true, !arg, true, ctx);
    if (!rc) rc = tg_attr_bool(n, "keepdims", false, &n->a.keepdims, ctx);
    if (!rc && (im->kind == R_VAR || im->kind == R_STD)) {
        rc = tg_attr_int(n, "ddof", true, 0, &n->a.ddof, ctx);
    }
    return rc;
}

static tg_dtype out_dtype(red_kind k, tg_dtype in) {
    char kind = tg_dtype_kind(in);
    switch (k) {
    case R_SUM:
    case R_PROD:
        return kind == 'u' ? TG_UINT64 : kind == 'f' ? in : TG_INT64;
    case R_MEAN:
    case R_LSE:
    case R_VAR:
    case R_STD:
        return tg_dtype_float_of(in);
    case R_MAX:
    case R_MIN:
        return in;
    case R_ALL:
    case R_ANY:
        return TG_BOOL;
    default:
        return TG_INT64;
    }
}

static int red_infer(tg_node *n, tg_ctx *ctx) {
    const red_impl *im = n->op->impl;
    const tg_type *it = &n->inputs[0]->type;
    int rc = tg_weak_resolve(n, 0, 1, &(tg_dtype){0}, ctx);
    if (rc) return rc;
    if ((rc = tg_axes_normalize(n, it->ndim, ctx))) return rc;
    int64_t shape[TG_MAX_NDIM];
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (n->a.axis_mask & (1u << d)) {
            if (n->a.keepdims) shape[nd++] = 1;
        } else {
            shape[nd++] = it->shape[d];
        }
    }
    tg_set_out_type(n, 0, out_dtype(im->kind, it->dtype), nd, shape);
    return TG_OK;
}

/* ---- row reductions: one output element from n elements at stride s ---- */

/* The result of reducing a row, in a form every kind can store. */
typedef struct red_val {
    double d;
    int64_t i;
    uint64_t u;
} red_val;

#define CASES(X)                                                                 \
    case TG_BOOL: X(uint8_t); break;                                             \
    case TG_INT8: X(int8_t); break;                                              \
    case TG_INT16: X(int16_t); break;                                            \
    case TG_INT32: X(int32_t); break;                                            \
    case TG_INT64: X(int64_t); break;                                            \
    case TG_UINT8: X(uint8_t); break;                                            \
    case TG_UINT16: X(uint16_t); break;                                          \
    case TG_UINT32: X(uint32_t); break;                                          \
    case TG_UINT64: X(uint64_t); break;                                          \
    case TG_FLOAT32: X(float); break;                                            \
    case TG_FLOAT64: X(double); break;                                           \
    default: break;

#define AT(T, k) (*(const T *)(p + (k) * s))

/* Pairwise summation in double for floats (NumPy's accuracy), unrolled
 * for contiguous data. */
static double sum_f64(const double *p, int64_t n) {
    if (n <= 128) {
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            a0 += p[i];
            a1 += p[i + 1];
            a2 += p[i + 2];
            a3 += p[i + 3];
        }
        for (; i < n; i++) a0 += p[i];
        return (a0 + a1) + (a2 + a3);
    }
    int64_t h = (n / 2) & ~(int64_t)7;
    return sum_f64(p, h) + sum_f64(p + h, n - h);
}

static double sum_f32(const float *p, int64_t n) {
    if (n <= 128) {
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            a0 += p[i];
            a1 += p[i + 1];
            a2 += p[i + 2];
            a3 += p[i + 3];
        }
        for (; i < n; i++) a0 += p[i];
        return (a0 + a1) + (a2 + a3);
    }
    int64_t h = (n / 2) & ~(int64_t)7;
    return sum_f32(p, h) + sum_f32(p + h, n - h);
}

/* Pairwise sums of squared deviations from mean (var's second pass, which
 * NumPy also sums pairwise). Eight accumulators vectorise. */
static double sqdev_f64(const double *p, int64_t n, double mean) {
    if (n <= 128) {
        double r[8] = {0}, acc;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) r[j] += (p[i + j] - mean) * (p[i + j] - mean);
        acc = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) acc += (p[i] - mean) * (p[i] - mean);
        return acc;
    }
    int64_t h = (n / 2) & ~(int64_t)7;
    return sqdev_f64(p, h, mean) + sqdev_f64(p + h, n - h, mean);
}

static double sqdev_f32(const float *p, int64_t n, double mean) {
    if (n <= 128) {
        double r[8] = {0}, acc;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) r[j] += ((double)p[i + j] - mean) * ((double)p[i + j] - mean);
        acc = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) acc += ((double)p[i] - mean) * ((double)p[i] - mean);
        return acc;
    }
    int64_t h = (n / 2) & ~(int64_t)7;
    return sqdev_f32(p, h, mean) + sqdev_f32(p + h, n - h, mean);
}

static double load_d(tg_dtype dt, const char *p) { return tg_load_f64(dt, p); }

static double row_sqdev(tg_dtype dt, const char *p, int64_t n, int64_t s, double mean) {
    if (dt == TG_FLOAT64 && s == 8) return sqdev_f64((const double *)p, n, mean);
    if (dt == TG_FLOAT32 && s == 4) return sqdev_f32((const float *)p, n, mean);
    if (n > 128) {
        int64_t h = n / 2;
        return row_sqdev(dt, p, h, s, mean) + row_sqdev(dt, p + h * s, n - h, s, mean);
    }
    double acc = 0;
    if (dt == TG_FLOAT16) {
        for (int64_t i = 0; i < n; i++) {
            double d = load_d(dt, p + i * s) - mean;
            acc += d * d;
        }
        return acc;
    }
#define X(T)                                                                     \
    for (int64_t i = 0; i < n; i++) {                                            \
        double d = (double)AT(T, i) - mean;                                      \
        acc += d * d;                                                            \
    }
    switch (dt) { CASES(X) }
#undef X
    return acc;
}

static double row_sum_d(tg_dtype dt, const char *p, int64_t n, int64_t s) {
    if (dt == TG_FLOAT64 && s == 8) return sum_f64((const double *)p, n);
    if (dt == TG_FLOAT32 && s == 4) return sum_f32((const float *)p, n);
    if (n > 128 && tg_dtype_is_float(dt)) {
        /* Strided floats: pairwise too. */
        int64_t h = n / 2;
        return row_sum_d(dt, p, h, s) + row_sum_d(dt, p + h * s, n - h, s);
    }
    double acc = 0;
    if (dt == TG_FLOAT16) {
        for (int64_t k = 0; k < n; k++) acc += tg_half_to_float(AT(uint16_t, k));
        return acc;
    }
#define X(T) for (int64_t k = 0; k < n; k++) acc += (double)AT(T, k)
    switch (dt) { CASES(X) }
#undef X
    return acc;
}

/* max/min/argmax are compute-bound at SSE2 width (two compares per
 * element): AVX2 and AVX-512 variants (vmath.h). */
#define CLONES TG_CLONES

/* The max (or min) of the non-NaN values of q[0..n) (-inf or +inf when
 * there are none), and whether any is NaN. W lanes of accumulators
 * (four vectors of the widest clone, so that their chains overlap);
 * `v > r ? v : r` is maxpd exactly (a NaN in q never wins). NaNs are
 * found by the largest magnitude's bits, an integer max in lanes of the
 * element's width (above inf's bits: a NaN): a flag set by the float
 * compare `v != v` kept GCC from vectorising the loop at all, which then
 * ran at a third of NumPy's speed on one thread. */
#define EXT_KERNEL(NAME, T, W, S, ABSMASK, INFBITS)                              \
    CLONES static double NAME(const T *q, int64_t n, bool is_max, bool *nan) {   \
        T r[W], m = is_max ? -INFINITY : INFINITY;                               \
        S u[W], top = 0;                                                         \
        int64_t i = 0;                                                           \
        bool any = false;                                                        \
        if (n < W) /* a short row: no lanes to set up and combine */             \
            goto tail;                                                           \
        for (int j = 0; j < W; j++) {                                            \
            r[j] = m;                                                            \
            u[j] = 0;                                                            \
        }                                                                        \
        if (is_max) {                                                            \
            for (; i + W <= n; i += W)                                           \
                for (int j = 0; j < W; j++) {                                    \
                    T v = q[i + j];                                              \
                    S b;                                                         \
                    memcpy(&b, &q[i + j], sizeof b);                             \
                    b &= ABSMASK;                                                \
                    r[j] = v > r[j] ? v : r[j];                                  \
                    u[j] = b > u[j] ? b : u[j];                                  \
                }                                                                \
            for (int w = W / 2; w > 0; w /= 2) /* a tree, not one long chain */ \
                for (int j = 0; j < w; j++) r[j] = r[j + w] > r[j] ? r[j + w] : r[j]; \
        } else {                                                                 \
            for (; i + W <= n; i += W)                                           \
                for (int j = 0; j < W; j++) {                                    \
                    T v = q[i + j];                                              \
                    S b;                                                         \
                    memcpy(&b, &q[i + j], sizeof b);                             \
                    b &= ABSMASK;                                                \
                    r[j] = v < r[j] ? v : r[j];                                  \
                    u[j] = b > u[j] ? b : u[j];                                  \
                }                                                                \
            for (int w = W / 2; w > 0; w /= 2)                                   \
                for (int j = 0; j < w; j++) r[j] = r[j + w] < r[j] ? r[j + w] : r[j]; \
        }                                                                        \
        m = r[0];                                                                \
        for (int w = W / 2; w > 0; w /= 2)                                       \
            for (int j = 0; j < w; j++) u[j] = u[j + w] > u[j] ? u[j + w] : u[j]; \
        top = u[0];                                                              \
        any = top > (INFBITS);                                                   \
    tail:                                                                        \
        for (; i < n; i++) {                                                     \
            if (q[i] != q[i])                                                    \
                any = true;                                                      \
            else if (is_max ? q[i] > m : q[i] < m)                               \
                m = q[i];                                                        \
        }                                                                        \
        *nan = any;                                                              \
        return m;                                                                \
    }
EXT_KERNEL(ext_f64, double, 32, int64_t, INT64_MAX, 0x7ff0000000000000ll)
EXT_KERNEL(ext_f32, float, 64, int32_t, INT32_MAX, 0x7f800000)

/* The first index of the extreme of a contiguous row, or of its first
 * NaN. One pass in blocks that stay in L1: a block's extreme is
 * found vectorised, and only a block that improves on the best so far is
 * scanned for its index. */
#define ARGEXT_ROW(NAME, T, EXT)                                                 \
    /* The first k in [b0, b1) where q[k] == v (there is one): stretches of  \
     * 64 tested at once, as vectors, then the one that holds it. */         \
    CLONES static int64_t NAME##_find(const T *q, int64_t b0, int64_t b1, T v) { \
        int64_t k0 = b0;                                                         \
        for (; k0 + 64 <= b1; k0 += 64) {                                        \
            int hit = 0;                                                         \
            _Pragma("omp simd reduction(|:hit)")                                 \
            for (int64_t k = k0; k < k0 + 64; k++) hit |= q[k] == v;             \
            if (hit) break;                                                      \
        }                                                                        \
        for (int64_t k = k0; k < b1; k++)                                        \
            if (q[k] == v) return k;                                             \
        return b0;                                                               \
    }                                                                            \
    static int64_t NAME(const T *q, int64_t n, bool is_max) {                    \
        int64_t bestk = -1;                                                      \
        double m = 0;                                                            \
        if (n < 64) { /* a short row: one plain pass */                          \
            T e = q[0];                                                          \
            bestk = 0;                                                           \
            if (e != e) return 0;                                                \
            for (int64_t k = 1; k < n; k++) {                                    \
                if (q[k] != q[k]) return k;                                      \
                if (is_max ? q[k] > e : q[k] < e) {                              \
                    e = q[k];                                                    \
                    bestk = k;                                                   \
                }                                                                \
            }                                                                    \
            return bestk;                                                        \
        }                                                                        \
        for (int64_t b0 = 0; b0 < n; b0 += 1024) {                               \
            int64_t b1 = b0 + 1024 < n ? b0 + 1024 : n;                          \
            bool nan;                                                            \
            double bm = EXT(q + b0, b1 - b0, is_max, &nan);                      \
            if (nan)                                                             \
                for (int64_t k = b0; k < b1; k++)                                \
                    if (q[k] != q[k]) return k;                                  \
            if (bestk < 0 || (is_max ? bm > m : bm < m)) {                       \
                bestk = NAME##_find(q, b0, b1, bm);                              \
                m = bm;                                                          \
            }                                                                    \
        }                                                                        \
        return bestk < 0 ? 0 : bestk;                                            \
    }
ARGEXT_ROW(argext_f64, double, ext_f64)
ARGEXT_ROW(argext_f32, float, ext_f32)

/* argmax/argmin of a contiguous float row on AVX-512, in one pass. The
 * portable search above reads the row twice, and its second pass cannot
 * start before the first has combined its lanes: on rows of 100 to 1,000
 * that wait, and a mispredicted exit from the search, were most of its
 * time (1.4-1.8x NumPy's). Here each lane keeps its extreme and the pass
 * at which it was reached (a strict compare keeps the first of equals),
 * the tail is one masked vector, and the lanes are combined by value,
 * then by index, with no branch on the data. NaNs are found by a running
 * sum of the row (a NaN in the row makes it NaN); a row that has one, or
 * only seems to (an infinity of each sign, a sum that overflows both
 * ways), is left to the portable search, which returns its first NaN.
 * -1 means "not done". TG_REDUCE_PORTABLE in the environment (read once)
 * keeps the portable kernels everywhere (this search, and max/min below),
 * so that the tests can run them. */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_ARG512 1
#include <immintrin.h>

#define A512 __attribute__((target("avx512f")))
/* Lane by lane, b replaces a where b is better, or as good and earlier. */
#define ARG_MERGE(PS, EPI, MASKT, PRED, ra, ia, rb, ib)                                         \
    do {                                                                                       \
        MASKT g_ = _mm512_cmp_##PS##_mask(rb, ra, PRED) |                                      \
                   (_mm512_cmp_##PS##_mask(rb, ra, _CMP_EQ_OQ) & _mm512_cmplt_##EPI##_mask(ib, ia)); \
        ra = _mm512_mask_mov_##PS(ra, g_, rb);                                                 \
        ia = _mm512_mask_mov_##EPI(ia, g_, ib);                                                \
    } while (0)
/* TAB[0]: the lanes 0..L-1; TAB[b]: lane k's k ^ 2^(b-1), its partner at
 * step b of the combination. */
static const int64_t lanes64[4][8] = {{0, 1, 2, 3, 4, 5, 6, 7},
                                       {1, 0, 3, 2, 5, 4, 7, 6},
                                       {2, 3, 0, 1, 6, 7, 4, 5},
                                       {4, 5, 6, 7, 0, 1, 2, 3}};
static const int32_t lanes32[5][16] = {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                                        {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14},
                                        {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},
                                        {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},
                                        {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}};
/* One vector v at index base it into lane accumulators r, ix (and the sum s). */
#define ARG_STEP(PS, EPI, MASKT, PRED, v, it, r, ix, s)                                       \
    do {                                                                                       \
        MASKT g_ = _mm512_cmp_##PS##_mask(v, r, PRED);                                         \
        r = _mm512_mask_mov_##PS(r, g_, v);                                                    \
        ix = _mm512_mask_mov_##EPI(ix, g_, it);                                                \
        s = _mm512_add_##PS(s, v);                                                             \
    } while (0)
/* T, its vector, lanes L, mask type, the intrinsics' suffixes, the index
 * type of the lanes and their table. Four vectors of accumulators, named
 * (an array of them went through the stack). */
#define ARG512(NAME, PRED, T, VT, L, MASKT, PS, EPI, ITYPE, TAB)                               \
    A512 static int64_t NAME(const T *q, int64_t n) {                                          \
        VT r0 = _mm512_loadu_##PS(q), r1 = _mm512_loadu_##PS(q + L),                          \
           r2 = _mm512_loadu_##PS(q + 2 * L), r3 = _mm512_loadu_##PS(q + 3 * L);               \
        VT s0 = r0, s1 = r1, s2 = r2, s3 = r3;                                                 \
        __m512i i0 = _mm512_setzero_si512(), i1 = i0, i2 = i0, i3 = i0;                        \
        int64_t i = 4 * L;                                                                     \
        for (; i + 4 * L <= n; i += 4 * L) { /* a lane keeps the pass of its extreme */         \
            __m512i it = _mm512_set1_##EPI((ITYPE)i);                                          \
            VT v0 = _mm512_loadu_##PS(q + i), v1 = _mm512_loadu_##PS(q + i + L),              \
               v2 = _mm512_loadu_##PS(q + i + 2 * L), v3 = _mm512_loadu_##PS(q + i + 3 * L);  \
            ARG_STEP(PS, EPI, MASKT, PRED, v0, it, r0, i0, s0);                                \
            ARG_STEP(PS, EPI, MASKT, PRED, v1, it, r1, i1, s1);                                \
            ARG_STEP(PS, EPI, MASKT, PRED, v2, it, r2, i2, s2);                                \
            ARG_STEP(PS, EPI, MASKT, PRED, v3, it, r3, i3, s3);                                \
        }                                                                                      \
        const __m512i lane = _mm512_loadu_si512(TAB[0]); /* passes -> indices */               \
        i0 = _mm512_add_##EPI(i0, lane);                                                       \
        i1 = _mm512_add_##EPI(i1, _mm512_add_##EPI(lane, _mm512_set1_##EPI(L)));               \
        i2 = _mm512_add_##EPI(i2, _mm512_add_##EPI(lane, _mm512_set1_##EPI(2 * L)));           \
        i3 = _mm512_add_##EPI(i3, _mm512_add_##EPI(lane, _mm512_set1_##EPI(3 * L)));           \
        for (; i < n; i += L) { /* the tail; masked lanes read 0 and never win */              \
            MASKT lm = n - i >= L ? (MASKT)~0u : (MASKT)((1u << (n - i)) - 1);                 \
            VT v = _mm512_maskz_loadu_##PS(lm, q + i);                                         \
            __m512i iv = _mm512_add_##EPI(lane, _mm512_set1_##EPI((ITYPE)i));                  \
            MASKT g = _mm512_mask_cmp_##PS##_mask(lm, v, r0, PRED);                            \
            r0 = _mm512_mask_mov_##PS(r0, g, v);                                               \
            i0 = _mm512_mask_mov_##EPI(i0, g, iv);                                             \
            s0 = _mm512_add_##PS(s0, v);                                                       \
        }                                                                                      \
        s0 = _mm512_add_##PS(_mm512_add_##PS(s0, s1), _mm512_add_##PS(s2, s3));                \
        if (_mm512_cmp_##PS##_mask(s0, s0, _CMP_UNORD_Q)) return -1;                           \
        ARG_MERGE(PS, EPI, MASKT, PRED, r0, i0, r1, i1);                                       \
        ARG_MERGE(PS, EPI, MASKT, PRED, r2, i2, r3, i3);                                       \
        ARG_MERGE(PS, EPI, MASKT, PRED, r0, i0, r2, i2);                                       \
        /* within the vector: lane k against lane k ^ 1, then k ^ 2, ... */                    \
        for (int b = 1; 1 << (b - 1) < L; b++) {                                               \
            __m512i p = _mm512_loadu_si512(TAB[b]);                                            \
            VT rb = _mm512_permutexvar_##PS(p, r0);                                            \
            __m512i ib = _mm512_permutexvar_##EPI(p, i0);                                      \
            ARG_MERGE(PS, EPI, MASKT, PRED, r0, i0, rb, ib);                                   \
        }                                                                                      \
        return (ITYPE)_mm_cvtsi128_si64(_mm512_castsi512_si128(i0));                           \
    }
ARG512(argmax512_f64, _CMP_GT_OQ, double, __m512d, 8, __mmask8, pd, epi64, int64_t, lanes64)
ARG512(argmin512_f64, _CMP_LT_OQ, double, __m512d, 8, __mmask8, pd, epi64, int64_t, lanes64)
ARG512(argmax512_f32, _CMP_GT_OQ, float, __m512, 16, __mmask16, ps, epi32, int32_t, lanes32)
ARG512(argmin512_f32, _CMP_LT_OQ, float, __m512, 16, __mmask16, ps, epi32, int32_t, lanes32)

/* max/min of a contiguous float row on AVX-512: the portable kernel's
 * lanes (element i in lane i mod 4L), each `v > r ? v : r` (maxps) or
 * `v < r ? v : r` (minps), but with the tail as masked vectors (their
 * lanes past the row read FILL) where the portable one took it element by
 * element: on float32 rows of 100 that tail was 36 of them, and the
 * whole max 1.8x NumPy's. NaNs are found by a running sum as above; such
 * a row goes to the portable kernel (false: not done). */
#define EXT512(NAME, OP, RED, FILL, T, VT, L, MASKT, PS)                                          \
    A512 static bool NAME(const T *q, int64_t n, double *m) {                                   \
        const VT fill = _mm512_set1_##PS(FILL);                                                \
        VT r0 = fill, r1 = fill, r2 = fill, r3 = fill;                                         \
        VT s0 = _mm512_setzero_##PS(), s1 = s0, s2 = s0, s3 = s0;                              \
        int64_t i = 0;                                                                         \
        for (; i + 4 * L <= n; i += 4 * L) {                                                   \
            VT v0 = _mm512_loadu_##PS(q + i), v1 = _mm512_loadu_##PS(q + i + L),              \
               v2 = _mm512_loadu_##PS(q + i + 2 * L), v3 = _mm512_loadu_##PS(q + i + 3 * L);  \
            r0 = OP(v0, r0), r1 = OP(v1, r1), r2 = OP(v2, r2), r3 = OP(v3, r3);                \
            s0 = _mm512_add_##PS(s0, v0), s1 = _mm512_add_##PS(s1, v1);                        \
            s2 = _mm512_add_##PS(s2, v2), s3 = _mm512_add_##PS(s3, v3);                        \
        }                                                                                      \
        for (; i < n; i += L) {                                                                \
            MASKT lm = n - i >= L ? (MASKT)~0u : (MASKT)((1u << (n - i)) - 1);                 \
            VT v = _mm512_mask_loadu_##PS(fill, lm, q + i);                                    \
            r0 = OP(v, r0);                                                                    \
            s0 = _mm512_add_##PS(s0, _mm512_maskz_mov_##PS(lm, v));                            \
        }                                                                                      \
        s0 = _mm512_add_##PS(_mm512_add_##PS(s0, s1), _mm512_add_##PS(s2, s3));                \
        if (_mm512_cmp_##PS##_mask(s0, s0, _CMP_UNORD_Q)) return false;                        \
        *m = RED(OP(OP(r0, r1), OP(r2, r3)));                                                  \
        return true;                                                                           \
    }
EXT512(max512_f64, _mm512_max_pd, _mm512_reduce_max_pd, -INFINITY, double, __m512d, 8, __mmask8, pd)
EXT512(min512_f64, _mm512_min_pd, _mm512_reduce_min_pd, INFINITY, double, __m512d, 8, __mmask8, pd)
EXT512(max512_f32, _mm512_max_ps, _mm512_reduce_max_ps, -INFINITY, float, __m512, 16, __mmask16, ps)
EXT512(min512_f32, _mm512_min_ps, _mm512_reduce_min_ps, INFINITY, float, __m512, 16, __mmask16, ps)

static bool avx512_on(void) {
    static int v = -1;
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0)
        __atomic_store_n(&v, r = __builtin_cpu_supports("avx512f") && !getenv("TG_REDUCE_PORTABLE"),
                         __ATOMIC_RELAXED);
    return r;
}
#endif

/* The extreme of a contiguous float64/float32 row (NaN flagged). */
static double ext_row(tg_dtype dt, const char *p, int64_t n, bool is_max, bool *nan) {
#if HAVE_ARG512
    double m;
    if (n >= 8 && avx512_on() &&
        (dt == TG_FLOAT64 ? (is_max ? max512_f64 : min512_f64)((const double *)p, n, &m)
                          : (is_max ? max512_f32 : min512_f32)((const float *)p, n, &m))) {
        *nan = false;
        return m;
    }
#endif
    return dt == TG_FLOAT64 ? ext_f64((const double *)p, n, is_max, nan)
                            : ext_f32((const float *)p, n, is_max, nan);
}

/* argmax/argmin of a contiguous float64/float32 row. */
static int64_t argext_row(tg_dtype dt, const char *p, int64_t n, bool is_max) {
#if HAVE_ARG512
    /* four vectors at least; float32 indices are int32 lanes */
    if (n >= 32 && (dt == TG_FLOAT64 || n <= INT32_MAX) && avx512_on()) {
        int64_t k;
        if (dt == TG_FLOAT64)
            k = is_max ? argmax512_f64((const double *)p, n) : argmin512_f64((const double *)p, n);
        else if (n >= 64)
            k = is_max ? argmax512_f32((const float *)p, n) : argmin512_f32((const float *)p, n);
        else
            k = -1;
        if (k >= 0) return k;
    }
#endif
    return dt == TG_FLOAT64 ? argext_f64((const double *)p, n, is_max) : argext_f32((const float *)p, n, is_max);
}

/* ---- strided float rows: gathered into blocks for the contiguous kernels ----
 *
 * A row of float64/float32 at any other stride (x[::-1], x[::2], a column)
 * is copied, GATHER elements at a time in logical order, into a buffer on
 * the stack that the vector kernels above reduce; the per-element load
 * through the dtype's switch and the NaN test on every element cost 6-12x
 * NumPy's time. The results are those of the plain loop over the row in
 * logical order: the first NaN (its bits) for max/min, else the extreme
 * (for a zero extreme, -0.0 or +0.0 as the kernels' lanes meet them: set
 * by the row's layout, not by the number of threads), and argmax/argmin's
 * first index. */
#define GATHER 1024

static void gather_row(tg_dtype dt, const char *p, int64_t n, int64_t s, void *buf) {
    if (dt == TG_FLOAT64) {
        double *b = buf;
        for (int64_t k = 0; k < n; k++) b[k] = AT(double, k);
    } else {
        float *b = buf;
        for (int64_t k = 0; k < n; k++) b[k] = AT(float, k);
    }
}

/* The first element of the row for which pred holds: NaN (nan) or == v. */
static double first_match(tg_dtype dt, const char *p, int64_t n, int64_t s, bool nan, double v) {
    for (int64_t k = 0; k < n; k++) {
        double e = dt == TG_FLOAT64 ? AT(double, k) : (double)AT(float, k);
        if (nan ? e != e : e == v) return e;
    }
    return v;
}

static void ext_strided(tg_dtype dt, const char *p, int64_t n, int64_t s, bool is_max, char *out) {
    _Alignas(64) double buf[GATHER];
    double m = is_max ? -INFINITY : INFINITY;
    bool any = false;
    for (int64_t b = 0; b < n; b += GATHER) {
        int64_t len = n - b < GATHER ? n - b : GATHER;
        bool nan;
        gather_row(dt, p + b * s, len, s, buf);
        double bm = ext_row(dt, (const char *)buf, len, is_max, &nan);
        if (nan) {
            tg_store_f64(dt, out, first_match(dt, p, n, s, true, 0));
            return;
        }
        if (!any || (is_max ? bm > m : bm < m)) m = bm;
        any = true;
    }
    /* -0.0 == 0.0: the plain loop keeps the first zero it met */
    tg_store_f64(dt, out, m == 0 ? first_match(dt, p, n, s, false, 0) : m);
}

static int64_t argext_strided(tg_dtype dt, const char *p, int64_t n, int64_t s, bool is_max) {
    _Alignas(64) double buf[GATHER];
    double m = 0;
    int64_t best = -1;
    for (int64_t b = 0; b < n; b += GATHER) {
        int64_t len = n - b < GATHER ? n - b : GATHER;
        gather_row(dt, p + b * s, len, s, buf);
        int64_t k = argext_row(dt, (const char *)buf, len, is_max);
        double v = dt == TG_FLOAT64 ? buf[k] : (double)((const float *)buf)[k];
        if (v != v) return b + k; /* the first NaN: earlier blocks had none */
        if (best < 0 || (is_max ? v > m : v < m)) {
            m = v;
            best = b + k;
        }
    }
    return best;
}

/* Integer extremes of contiguous rows (no NaN): vectorised selects, and the
 * same one-pass blocked search for argmax/argmin. */
#define INT_CASES(X)                                                             \
    case TG_BOOL: X(uint8_t); break;                                             \
    case TG_INT8: X(int8_t); break;                                              \
    case TG_INT16: X(int16_t); break;                                            \
    case TG_INT32: X(int32_t); break;                                            \
    case TG_INT64: X(int64_t); break;                                            \
    case TG_UINT8: X(uint8_t); break;                                            \
    case TG_UINT16: X(uint16_t); break;                                          \
    case TG_UINT32: X(uint32_t); break;                                          \
    case TG_UINT64: X(uint64_t); break;                                          \
    default: break;

#define INT_EXT(T)                                                               \
    CLONES static T iext_##T(const T *q, int64_t n, bool is_max) {               \
        T m = q[0];                                                              \
        if (is_max)                                                              \
            for (int64_t k = 1; k < n; k++) m = q[k] > m ? q[k] : m;             \
        else                                                                     \
            for (int64_t k = 1; k < n; k++) m = q[k] < m ? q[k] : m;             \
        return m;                                                                \
    }                                                                            \
    static int64_t iargext_##T(const T *q, int64_t n, bool is_max) {             \
        int64_t bestk = 0;                                                       \
        T m = q[0];                                                              \
        for (int64_t b0 = 0; b0 < n; b0 += 1024) {                               \
            int64_t b1 = b0 + 1024 < n ? b0 + 1024 : n;                          \
            T bm = iext_##T(q + b0, b1 - b0, is_max);                            \
            if (b0 == 0 || (is_max ? bm > m : bm < m)) {                         \
                for (int64_t k = b0; k < b1; k++)                                \
                    if (q[k] == bm) {                                            \
                        bestk = k;                                               \
                        break;                                                   \
                    }                                                            \
                m = bm;                                                          \
            }                                                                    \
        }                                                                        \
        return bestk;                                                            \
    }
INT_EXT(int8_t)
INT_EXT(int16_t)
INT_EXT(int32_t)
INT_EXT(int64_t)
INT_EXT(uint8_t)
INT_EXT(uint16_t)
INT_EXT(uint32_t)
INT_EXT(uint64_t)

/* max or min; NaN propagates (the first NaN wins). Exact for integers. */
static void row_extreme(tg_dtype dt, const char *p, int64_t n, int64_t s, bool is_max,
                        char *out) {
    if ((dt == TG_FLOAT64 && s == 8) || (dt == TG_FLOAT32 && s == 4)) {
        bool nan;
        double m = ext_row(dt, p, n, is_max, &nan);
        tg_store_f64(dt, out, nan ? NAN : m);
        return;
    }
    if ((dt == TG_FLOAT64 || dt == TG_FLOAT32) && n > 1) {
        ext_strided(dt, p, n, s, is_max, out);
        return;
    }
    if (tg_dtype_is_float(dt)) {
        double m = load_d(dt, p);
        for (int64_t k = 1; k < n && m == m; k++) {
            double v = load_d(dt, p + k * s);
            if (v != v || (is_max ? v > m : v < m)) m = v;
        }
        tg_store_f64(dt, out, m);
        return;
    }
#define X(T)                                                                     \
    if (s == (int64_t)sizeof(T)) {                                               \
        *(T *)out = iext_##T((const T *)p, n, is_max);                           \
    } else {                                                                     \
        T m = AT(T, 0);                                                          \
        for (int64_t k = 1; k < n; k++) {                                        \
            T v = AT(T, k);                                                      \
            if (is_max ? v > m : v < m) m = v;                                   \
        }                                                                        \
        *(T *)out = m;                                                           \
    }
    switch (dt) { INT_CASES(X) }
#undef X
}

static int64_t row_argext(tg_dtype dt, const char *p, int64_t n, int64_t s, bool is_max) {
    int64_t best = 0;
    if ((dt == TG_FLOAT64 && s == 8) || (dt == TG_FLOAT32 && s == 4))
        return argext_row(dt, p, n, is_max);
    if ((dt == TG_FLOAT64 || dt == TG_FLOAT32) && n > 1) return argext_strided(dt, p, n, s, is_max);
    if (tg_dtype_is_float(dt)) {
        double m = load_d(dt, p);
        if (m != m) return 0;
        for (int64_t k = 1; k < n; k++) {
            double v = load_d(dt, p + k * s);
            if (v != v) return k;
            if (is_max ? v > m : v < m) {
                m = v;
                best = k;
            }
        }
        return best;
    }
#define X(T)                                                                     \
    if (s == (int64_t)sizeof(T)) {                                               \
        best = iargext_##T((const T *)p, n, is_max);                             \
    } else {                                                                     \
        T m = AT(T, 0);                                                          \
        for (int64_t k = 1; k < n; k++) {                                        \
            T v = AT(T, k);                                                      \
            if (is_max ? v > m : v < m) {                                        \
                m = v;                                                           \
                best = k;                                                        \
            }                                                                    \
        }                                                                        \
    }
    switch (dt) { INT_CASES(X) }
#undef X
    return best;
}

/* Reduce one row into out (of the op's output dtype). */
/* var's divisor, n - ddof, none below 0 (NumPy: a variance of inf or NaN
 * then); ddof may be negative (np.var(x, ddof=-1) divides by n + 1), and
 * in doubles n - INT64_MIN cannot overflow. */
static inline double var_count(int64_t n, int64_t ddof) {
    double c = (double)n - (double)ddof;
    return c > 0 ? c : 0;
}

static void row_reduce(red_kind k, tg_dtype dt, tg_dtype od, int64_t ddof, const char *p,
                       int64_t n, int64_t s, char *out) {
    switch (k) {
    case R_SUM:
    case R_MEAN:
        if (tg_dtype_is_float(od)) {
            double v = row_sum_d(dt, p, n, s);
            tg_store_f64(od, out, k == R_MEAN ? (n ? v / (double)n : NAN) : v);
        } else {
            /* Integers wrap modulo 2^64, as NumPy's int64/uint64 adds
             * (conversion to uint64_t sign-extends signed values). */
            uint64_t acc = 0;
#define X(T)                                                                     \
    if (s == (int64_t)sizeof(T)) {                                               \
        const T *q = (const T *)p;                                               \
        for (int64_t i = 0; i < n; i++) acc += (uint64_t)q[i];                   \
    } else {                                                                     \
        for (int64_t i = 0; i < n; i++) acc += (uint64_t)AT(T, i);               \
    }
            switch (dt) { INT_CASES(X) }
#undef X
            memcpy(out, &acc, 8);
        }
        return;
    case R_PROD:
        if (tg_dtype_is_float(od)) {
            /* In order, one product at a time (the bits are those of that
             * order); typed where the row is contiguous, since a load
             * through the dtype's switch per element cost 4 ns. */
            double v = 1;
            if (dt == TG_FLOAT64 && s == 8)
                for (int64_t i = 0; i < n; i++) v *= ((const double *)p)[i];
            else if (dt == TG_FLOAT32 && s == 4)
                for (int64_t i = 0; i < n; i++) v *= (double)((const float *)p)[i];
            else
                for (int64_t i = 0; i < n; i++) v *= load_d(dt, p + i * s);
            tg_store_f64(od, out, v);
        } else {
            uint64_t acc = 1;
#define X(T) for (int64_t i = 0; i < n; i++) acc *= (uint64_t)AT(T, i)
            switch (dt) { INT_CASES(X) }
#undef X
            memcpy(out, &acc, 8);
        }
        return;
    case R_MAX:
    case R_MIN:
        row_extreme(dt, p, n, s, k == R_MAX, out);
        return;
    case R_ALL:
    case R_ANY: {
        bool all = true, any = false;
        size_t isz = tg_dtype_size(dt);
        if ((dt == TG_FLOAT64 && s == 8) || (dt == TG_FLOAT32 && s == 4)) {
            /* Typed (a load through the dtype's switch cost 7 ns an
             * element), and the nonzeros of 256 at a time counted in
             * vectors; the answer is known once a stretch has a zero
             * (all) or a nonzero (any). NaN is nonzero. */
            bool r = k == R_ALL;
            for (int64_t b0 = 0; b0 < n; b0 += 256) {
                int64_t len = n - b0 < 256 ? n - b0 : 256, cnt = 0;
                if (dt == TG_FLOAT64)
                    for (int64_t i = 0; i < len; i++) cnt += ((const double *)p)[b0 + i] != 0;
                else
                    for (int64_t i = 0; i < len; i++) cnt += ((const float *)p)[b0 + i] != 0;
                if (k == R_ALL ? cnt < len : cnt > 0) {
                    r = !r;
                    break;
                }
            }
            *(uint8_t *)out = r;
            return;
        }
        for (int64_t i = 0; i < n; i++) {
            const char *q = p + i * s;
            bool nz;
            if (tg_dtype_is_float(dt))
                nz = load_d(dt, q) != 0;
            else {
                nz = false;
                for (size_t b = 0; b < isz; b++) nz |= q[b] != 0;
            }
            all &= nz;
            any |= nz;
            if (k == R_ALL ? !all : any) break;
        }
        *(uint8_t *)out = k == R_ALL ? all : any;
        return;
    }
    case R_LSE: {
        if (!n) {
            tg_store_f64(od, out, -INFINITY);
            return;
        }
        double m = -INFINITY;
        bool nan = false;
        if ((dt == TG_FLOAT64 && s == 8) || (dt == TG_FLOAT32 && s == 4)) {
            m = ext_row(dt, p, n, true, &nan);
        } else {
            for (int64_t i = 0; i < n; i++) {
                double v = load_d(dt, p + i * s);
                if (v != v) nan = true;
                if (v > m) m = v;
            }
        }
        if (nan) {
            tg_store_f64(od, out, NAN);
            return;
        }
        if (isinf(m)) {
            tg_store_f64(od, out, m);
            return;
        }
        /* exp(x - m) by blocks through the vectorised exp. */
        double acc = 0, t[256];
        for (int64_t b = 0; b < n; b += 256) {
            int64_t len = n - b < 256 ? n - b : 256;
            if (dt == TG_FLOAT64 && s == 8) {
                const double *q = (const double *)p + b;
                for (int64_t i = 0; i < len; i++) t[i] = q[i] - m;
            } else if (dt == TG_FLOAT32 && s == 4) {
                const float *q = (const float *)p + b;
                for (int64_t i = 0; i < len; i++) t[i] = (double)q[i] - m;
            } else {
                for (int64_t i = 0; i < len; i++) t[i] = load_d(dt, p + (b + i) * s) - m;
            }
            tg_vm_exp_f64(len, t, t);
            acc += sum_f64(t, len);
        }
        tg_store_f64(od, out, m + log(acc));
        return;
    }
    case R_VAR:
    case R_STD: {
        double mean = n ? row_sum_d(dt, p, n, s) / (double)n : NAN;
        double acc = row_sqdev(dt, p, n, s, mean);
        double cnt = var_count(n, ddof);
        double v = n ? acc / cnt : NAN;
        tg_store_f64(od, out, k == R_STD ? sqrt(v) : v);
        return;
    }
    case R_ARGMAX:
    case R_ARGMIN:
        *(int64_t *)out = row_argext(dt, p, n, s, k == R_ARGMAX);
        return;
    }
}

/* ---- reductions over axes that are not innermost: column accumulators ----
 *
 * out[a, c] = reduce over r of x[a, r, c], where c runs over the trailing
 * kept axes (one stride), r over the reduced axes and a over the kept axes
 * before them. Rows stream through per-column accumulators, reading memory
 * in order, instead of each column being walked with a large stride.
 * Threads take blocks a when there are enough of them, else bands of rows
 * whose partial results are merged in order (splitting the columns instead
 * makes every thread skip through memory, which measured 2-3x slower).
 * var/std and logsumexp take two passes: the mean or the max, then the
 * squared deviations from it or the sum of exp(x - max). */

typedef struct col_job {
    red_kind k;
    tg_dtype dt, od;
    int64_t ddof;
    const char *base;
    int nko, nr;
    int64_t ko_shape[TG_MAX_NDIM], ko_stride[TG_MAX_NDIM];
    int64_t r_shape[TG_MAX_NDIM], r_stride[TG_MAX_NDIM];
    int64_t R, C, cs, osz;
    char *out;
    bool ints; /* exact int64 accumulators (integer sum prod max ...) */
} col_job;

/* Steps p to the next row (odometer over the reduced axes). */
static inline const char *row_next(const col_job *j, int64_t *idx, const char *p) {
    for (int d = j->nr - 1; d >= 0; d--) {
        p += j->r_stride[d];
        if (++idx[d] < j->r_shape[d]) return p;
        p -= j->r_stride[d] * j->r_shape[d];
        idx[d] = 0;
    }
    return p;
}

/* acc[c] += row[c] for nrows contiguous rows of m, one after another, in
 * the widest vectors the CPU has (the baseline's SSE2 took a cycle an
 * element: float32 sums over the rows of a batch ran at a third of NumPy's
 * speed), the loop over the rows inside the vector code so that short
 * rows do not pay a call each; the same sums in the same order. */
CLONES static void rows_add_f64(double *restrict acc, const double *restrict q, int64_t m, int64_t nrows) {
    for (int64_t r = 0; r < nrows; r++, q += m)
        for (int64_t c = 0; c < m; c++) acc[c] += q[c];
}

CLONES static void rows_add_f32(double *restrict acc, const float *restrict q, int64_t m, int64_t nrows) {
    for (int64_t r = 0; r < nrows; r++, q += m)
        for (int64_t c = 0; c < m; c++) acc[c] += (double)q[c];
}

/* m elements at stride cs as doubles: p itself when it already is. */
static const double *col_load_d(tg_dtype dt, const char *p, int64_t m, int64_t cs, double *t) {
    if (dt == TG_FLOAT64 && cs == 8) return (const double *)p;
    if (dt == TG_FLOAT32 && cs == 4) {
        const float *q = (const float *)p;
        for (int64_t c = 0; c < m; c++) t[c] = q[c];
    } else if (dt == TG_FLOAT16) {
        for (int64_t c = 0; c < m; c++) t[c] = tg_half_to_float(*(const uint16_t *)(p + c * cs));
    } else {
        const int64_t s = cs;
#define X(T) for (int64_t c = 0; c < m; c++) t[c] = (double)AT(T, c)
        switch (dt) { CASES(X) }
#undef X
    }
    return t;
}

/* m integers at stride cs as int64 (uint64 keeps its bits; with flip its
 * top bit is flipped, so that signed compares order it). */
static const int64_t *col_load_i(tg_dtype dt, const char *p, int64_t m, int64_t cs, bool flip,
                                 int64_t *t) {
    if ((dt == TG_INT64 || dt == TG_UINT64) && cs == 8 && !flip) return (const int64_t *)p;
    const int64_t s = cs;
#define X(T) for (int64_t c = 0; c < m; c++) t[c] = (int64_t)AT(T, c)
    switch (dt) { INT_CASES(X) }
#undef X
    if (flip)
        for (int64_t c = 0; c < m; c++) t[c] ^= INT64_MIN;
    return t;
}

/* One row t of T into the extremes of its columns in A (NaN sticks), and
 * with the row's index for argmax/argmin (the first extreme or first NaN
 * stays; ri: the rows' indices, one per column, or NULL for r
 * everywhere); all/any into float64 flags, with & and | (not the
 * branches of && and ||). float32 rows go through in float32 (f): the
 * same values, since an extreme is one of the rows' values and every
 * float is a double, without turning each row into doubles first, which
 * made max over the rows of a (2000, 1000) float32 array three times
 * NumPy's time. */
#define COL_LOOPS(N, T)                                                                               \
    CLONES static void colext_##N(T *acc, const T *t, int64_t m, bool mx) {                           \
        if (mx)                                                                                       \
            for (int64_t c = 0; c < m; c++) acc[c] = ((t[c] > acc[c]) | (t[c] != t[c])) ? t[c] : acc[c]; \
        else                                                                                          \
            for (int64_t c = 0; c < m; c++) acc[c] = ((t[c] < acc[c]) | (t[c] != t[c])) ? t[c] : acc[c]; \
    }                                                                                                 \
    CLONES static void colargext_##N(T *acc, int64_t *best, const T *t, int64_t m, bool mx, int64_t r, \
                                     const int64_t *ri) {                                             \
        /* (two loops: a select of ri[c] or r in one halved its speed) */                           \
        if (ri)                                                                                       \
            for (int64_t c = 0; c < m; c++) {                                                         \
                bool up = (acc[c] == acc[c]) & ((mx ? t[c] > acc[c] : t[c] < acc[c]) | (t[c] != t[c])); \
                acc[c] = up ? t[c] : acc[c];                                                          \
                best[c] = up ? ri[c] : best[c];                                                       \
            }                                                                                         \
        else                                                                                          \
            for (int64_t c = 0; c < m; c++) {                                                         \
                bool up = (acc[c] == acc[c]) & ((mx ? t[c] > acc[c] : t[c] < acc[c]) | (t[c] != t[c])); \
                acc[c] = up ? t[c] : acc[c];                                                          \
                best[c] = up ? r : best[c];                                                           \
            }                                                                                         \
    }                                                                                                 \
    CLONES static void colall_##N(double *acc, const T *t, int64_t m, bool any) {                     \
        if (any)                                                                                      \
            for (int64_t c = 0; c < m; c++) acc[c] = (double)((acc[c] != 0) | (t[c] != 0));           \
        else                                                                                          \
            for (int64_t c = 0; c < m; c++) acc[c] = (double)((acc[c] != 0) & (t[c] != 0));           \
    }
COL_LOOPS(d, double)
COL_LOOPS(f, float)

/* prod of one float32 row into the columns' float64 products, converted
 * as it is read (one pass, not a conversion pass and a loop after it):
 * the same products in the same order. */
CLONES static void colprod_f(double *acc, const float *t, int64_t m) {
    for (int64_t c = 0; c < m; c++) acc[c] *= (double)t[c];
}

CLONES static void colext_i(int64_t *acc, const int64_t *t, int64_t m, bool mx) {
    if (mx)
        for (int64_t c = 0; c < m; c++) acc[c] = t[c] > acc[c] ? t[c] : acc[c];
    else
        for (int64_t c = 0; c < m; c++) acc[c] = t[c] < acc[c] ? t[c] : acc[c];
}

CLONES static void colargext_i(int64_t *acc, int64_t *best, const int64_t *t, int64_t m, bool mx,
                               int64_t r, const int64_t *ri) {
    for (int64_t c = 0; c < m; c++) {
        bool up = mx ? t[c] > acc[c] : t[c] < acc[c];
        acc[c] = up ? t[c] : acc[c];
        best[c] = up ? (ri ? ri[c] : r) : best[c];
    }
}

/* The accumulators of one band of rows over `band` columns: acc (double,
 * or int64 for integer work), aux (the center of the second pass: the
 * mean, or the max), best (argmax/argmin rows), t (a converted row). */
typedef struct col_buf {
    double *acc, *aux, *t;
    int64_t *best;
} col_buf;

static bool is_ext(red_kind k) { return k == R_MAX || k == R_MIN || k == R_ARGMAX || k == R_ARGMIN; }

static bool two_pass(red_kind k) { return k == R_VAR || k == R_STD || k == R_LSE; }

/* Whether the column loops keep the larger value: max and argmax, and the
 * first pass of logsumexp, whose center is the columns' max (taking the
 * min there made a float32 column of -1e30 and 0 give inf). */
static bool col_takes_max(red_kind k) { return k == R_MAX || k == R_ARGMAX || k == R_LSE; }

/* Accumulates rows [r0, r1) of the m columns at pa into b, for pass 1 or
 * 2. Starts from the identity; the extremes start from row r0. */
static void col_rows(const col_job *j, const char *pa, int64_t m, int64_t r0, int64_t r1, int pass,
                     col_buf *b) {
    red_kind k = j->k;
    bool mx = col_takes_max(k), flip = j->ints && is_ext(k) && j->dt == TG_UINT64;
    int64_t idx[TG_MAX_NDIM] = {0}, rem = r0;
    const char *p = pa;
    for (int d = j->nr - 1; d >= 0 && rem; d--) { /* rem 0: no rows, or row 0 */
        idx[d] = rem % j->r_shape[d];
        p += idx[d] * j->r_stride[d];
        rem /= j->r_shape[d];
    }
    if (j->ints) {
        int64_t *acc = (int64_t *)b->acc;
        for (int64_t c = 0; c < m; c++) acc[c] = k == R_PROD || k == R_ALL;
        for (int64_t r = r0; r < r1; r++, p = row_next(j, idx, p)) {
            const int64_t *t = col_load_i(j->dt, p, m, j->cs, flip, (int64_t *)b->t);
            switch (k) {
            case R_SUM:
                for (int64_t c = 0; c < m; c++) acc[c] = (int64_t)((uint64_t)acc[c] + (uint64_t)t[c]);
                break;
            case R_PROD:
                for (int64_t c = 0; c < m; c++) acc[c] = (int64_t)((uint64_t)acc[c] * (uint64_t)t[c]);
                break;
            case R_ALL:
                for (int64_t c = 0; c < m; c++) acc[c] = acc[c] != 0 && t[c] != 0;
                break;
            case R_ANY:
                for (int64_t c = 0; c < m; c++) acc[c] = acc[c] != 0 || t[c] != 0;
                break;
            default:
                if (r == r0) {
                    memcpy(acc, t, (size_t)m * 8);
                    for (int64_t c = 0; c < m; c++) b->best[c] = r0;
                } else if (k == R_MAX || k == R_MIN) {
                    colext_i(acc, t, m, mx);
                } else {
                    colargext_i(acc, b->best, t, m, mx, r, NULL);
                }
                break;
            }
        }
        return;
    }
    double *acc = b->acc, *aux = b->aux;
    bool second = pass == 2;
    /* float32 rows read as they are, converting each element as it is
     * used: the extremes (and logsumexp's max), the first pass's sums,
     * products, all/any, logsumexp's second */
    const bool rows_f32 = j->dt == TG_FLOAT32 && j->cs == 4, f32 = !second && rows_f32;
    if ((is_ext(k) || (k == R_LSE && !second)) && rows_f32 && r1 > r0) {
        /* in float32, in t's room (band doubles), then into acc (and
         * logsumexp's first pass, a max) */
        float *fa = (float *)b->t;
        const bool arg = k == R_ARGMAX || k == R_ARGMIN;
        for (int64_t r = r0; r < r1; r++, p = row_next(j, idx, p)) {
            const float *q = (const float *)p;
            if (r == r0) {
                memcpy(fa, q, (size_t)m * 4);
                for (int64_t c = 0; arg && c < m; c++) b->best[c] = r0;
            } else if (arg) {
                colargext_f(fa, b->best, q, m, mx, r, NULL);
            } else {
                colext_f(fa, q, m, mx);
            }
        }
        for (int64_t c = 0; c < m; c++) acc[c] = fa[c];
        return;
    }
    for (int64_t c = 0; c < m; c++) acc[c] = !second && (k == R_PROD || k == R_ALL);
    if (k == R_LSE && !second)
        for (int64_t c = 0; c < m; c++) acc[c] = -INFINITY;
    const bool add_f32 = f32 && (k == R_SUM || k == R_MEAN || k == R_VAR || k == R_STD),
               mul_f32 = f32 && (k == R_PROD || k == R_ALL || k == R_ANY);
    for (int64_t r = r0; r < r1; r++, p = row_next(j, idx, p)) {
        if (add_f32) {
            rows_add_f32(acc, (const float *)p, m, 1);
            continue;
        }
        if (mul_f32) {
            if (k == R_PROD) colprod_f(acc, (const float *)p, m);
            else colall_f(acc, (const float *)p, m, k == R_ANY);
            continue;
        }
        if (second && k == R_LSE) {
            /* A column whose max is not finite has that for result: its
             * terms are zeros (exp(0): not a slow lane of libmvec's).
             * float32 is converted as it is subtracted. */
            if (rows_f32) {
                const float *q = (const float *)p;
                for (int64_t c = 0; c < m; c++) b->t[c] = isfinite(aux[c]) ? (double)q[c] - aux[c] : 0;
            } else {
                const double *t = col_load_d(j->dt, p, m, j->cs, b->t);
                for (int64_t c = 0; c < m; c++) b->t[c] = isfinite(aux[c]) ? t[c] - aux[c] : 0;
            }
            tg_vm_exp_f64(m, b->t, b->t);
            for (int64_t c = 0; c < m; c++) acc[c] += b->t[c];
            continue;
        }
        const double *t = col_load_d(j->dt, p, m, j->cs, b->t);
        if (second) {
            for (int64_t c = 0; c < m; c++) acc[c] += (t[c] - aux[c]) * (t[c] - aux[c]);
            continue;
        }
        switch (k) {
        case R_SUM:
        case R_MEAN:
        case R_VAR:
        case R_STD:
            rows_add_f64(acc, t, m, 1);
            break;
        case R_PROD:
            for (int64_t c = 0; c < m; c++) acc[c] *= t[c];
            break;
        case R_ALL:
        case R_ANY:
            colall_d(acc, t, m, k == R_ANY);
            break;
        case R_LSE:
            colext_d(acc, t, m, mx);
            break;
        default:
            if (r == r0) {
                memcpy(acc, t, (size_t)m * 8);
                for (int64_t c = 0; c < m; c++) b->best[c] = r0;
            } else if (k == R_MAX || k == R_MIN) {
                colext_d(acc, t, m, mx);
            } else {
                colargext_d(acc, b->best, t, m, mx, r, NULL);
            }
            break;
        }
    }
}

/* Folds the next band's accumulators src into dst (bands in row order, so
 * ties keep the earlier row). */
static void col_merge(const col_job *j, int64_t m, int pass, col_buf *dst, const col_buf *src) {
    red_kind k = j->k;
    bool mx = col_takes_max(k);
    if (j->ints) {
        int64_t *a = (int64_t *)dst->acc;
        const int64_t *s = (const int64_t *)src->acc;
        if (k == R_MAX || k == R_MIN)
            colext_i(a, s, m, mx);
        else if (k == R_ARGMAX || k == R_ARGMIN)
            colargext_i(a, dst->best, s, m, mx, 0, src->best);
        else
            for (int64_t c = 0; c < m; c++)
                a[c] = k == R_SUM    ? (int64_t)((uint64_t)a[c] + (uint64_t)s[c])
                       : k == R_PROD ? (int64_t)((uint64_t)a[c] * (uint64_t)s[c])
                       : k == R_ALL  ? (a[c] && s[c])
                                     : (a[c] || s[c]);
        return;
    }
    double *a = dst->acc;
    const double *s = src->acc;
    if (k == R_MAX || k == R_MIN || (k == R_LSE && pass == 1))
        colext_d(a, s, m, mx);
    else if (k == R_ARGMAX || k == R_ARGMIN)
        colargext_d(a, dst->best, s, m, mx, 0, src->best);
    else if (k == R_PROD)
        for (int64_t c = 0; c < m; c++) a[c] *= s[c];
    else if (k == R_ALL)
        for (int64_t c = 0; c < m; c++) a[c] = a[c] != 0 && s[c] != 0;
    else if (k == R_ANY)
        for (int64_t c = 0; c < m; c++) a[c] = a[c] != 0 || s[c] != 0;
    else
        for (int64_t c = 0; c < m; c++) a[c] += s[c];
}

/* After pass 1 of var/std/logsumexp: the center (mean or max) into aux. */
static void col_center(const col_job *j, int64_t m, col_buf *b) {
    for (int64_t c = 0; c < m; c++)
        b->aux[c] = j->k == R_LSE ? b->acc[c] : j->R ? b->acc[c] / (double)j->R : NAN;
}

static void col_final(const col_job *j, int64_t m, const col_buf *b, char *o) {
    red_kind k = j->k;
    int64_t R = j->R;
    for (int64_t c = 0; c < m; c++) {
        char *q = o + c * j->osz;
        if (k == R_ARGMAX || k == R_ARGMIN) {
            *(int64_t *)q = b->best[c];
            continue;
        }
        if (j->ints) {
            int64_t v = ((const int64_t *)b->acc)[c];
            if (k == R_ALL || k == R_ANY)
                *(uint8_t *)q = v != 0;
            else
                tg_store_i64(j->od, q, is_ext(k) && j->dt == TG_UINT64 ? v ^ INT64_MIN : v);
            continue;
        }
        double v = b->acc[c], ctr = b->aux[c];
        switch (k) {
        case R_ALL:
        case R_ANY: *(uint8_t *)q = v != 0; continue;
        case R_MEAN: v /= (double)R; break;
        case R_VAR:
        case R_STD:
            v = R ? v / var_count(R, j->ddof) : NAN;
            if (k == R_STD) v = sqrt(v);
            break;
        case R_LSE: v = ctr != ctr || isinf(ctr) ? ctr : ctr + log(v); break;
        default: break;
        }
        tg_store_f64(j->od, q, v);
    }
}

/* Sets up the column path when the trailing kept axes have one stride that
 * is smaller than every reduced axis's (they are innermost in memory) and
 * are long enough to use. Returns false when it does not apply. */
static bool col_setup(col_job *j, const tg_array *x, uint32_t mask) {
    int nd = x->ndim, last = -1;
    for (int d = 0; d < nd; d++)
        if (mask & (1u << d)) last = d;
    if (last < 0 || last == nd - 1) return false;
    j->C = 1;
    j->cs = 0;
    int64_t expect = 0;
    for (int d = nd - 1; d > last; d--) {
        if (x->shape[d] == 1) continue;
        if (!j->cs) {
            j->cs = x->strides[d];
            expect = j->cs * x->shape[d];
        } else if (x->strides[d] != expect) {
            return false;
        } else {
            expect *= x->shape[d];
        }
        j->C *= x->shape[d];
    }
    if (j->C < 8) return false;
    j->nko = j->nr = 0;
    j->R = 1;
    int64_t acs = j->cs < 0 ? -j->cs : j->cs;
    for (int d = 0; d <= last; d++) {
        if (x->shape[d] == 1) continue;
        if (mask & (1u << d)) {
            int64_t st = x->strides[d] < 0 ? -x->strides[d] : x->strides[d];
            if (st <= acs) return false;
            j->r_shape[j->nr] = x->shape[d];
            j->r_stride[j->nr++] = x->strides[d];
            j->R *= x->shape[d];
        } else {
            j->ko_shape[j->nko] = x->shape[d];
            j->ko_stride[j->nko++] = x->strides[d];
        }
    }
    j->ints = !tg_dtype_is_float(j->dt) && !tg_dtype_is_float(j->od);
    return true;
}

#define COL_BAND 16384 /* columns per accumulator block */
#define COL_BANDS 16    /* at most this many bands of rows */
#define RED_CHUNKS 64   /* pieces of a long row's sum */

static void col_buf_at(char *scratch, int i, int64_t band, col_buf *b) {
    char *s = scratch + (size_t)i * 4 * (size_t)band * 8;
    *b = (col_buf){(double *)s, (double *)(s + band * 8), (double *)(s + band * 16),
                   (int64_t *)(s + band * 24)};
}

/* Column block c0 (m columns) of block a, its rows in nb bands. */
static const char *col_block(const col_job *j, int64_t a, int64_t c0) {
    const char *pa = j->base + c0 * j->cs;
    for (int d = j->nko - 1; d >= 0; d--) {
        pa += (a % j->ko_shape[d]) * j->ko_stride[d];
        a /= j->ko_shape[d];
    }
    return pa;
}

static int col_run(const col_job *j, tg_ctx *ctx) {
    int64_t A = 1;
    for (int d = 0; d < j->nko; d++) A *= j->ko_shape[d];
    bool big = A * j->C * j->R >= TG_PARALLEL_MIN;
    int nth = big ? omp_get_max_threads() : 1;
    if (nth > 64) nth = 64;
    int64_t band = j->C < COL_BAND ? j->C : COL_BAND, nblk = (j->C + band - 1) / band;
    /* Bands of rows only when blocks (a, column block) are too few to
     * share out, at least 64 rows each. How many depends on the shape
     * alone, and bands merge in order, so the result does not depend on
     * the number of threads (bands per thread gave other last bits for a
     * bias gradient's sum over a batch with 1, 2 or 3 threads). */
    int nb = 1;
    if (big && A * nblk < COL_BANDS) {
        int64_t r = j->R / 64, cap = ((int64_t)1 << 17) / band; /* scratch of at most 4 MiB */
        if (r > cap) r = cap;
        nb = r < 1 ? 1 : r > COL_BANDS ? COL_BANDS : (int)r;
    }
    int nbuf = nb > 1 ? nb : nth;
    char *scratch = tg_malloc((size_t)nbuf * 4 * (size_t)band * 8);
    if (!scratch) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    int passes = two_pass(j->k) ? 2 : 1;
    if (nb == 1) {
        TG_PAR_FOR(nth, it, A * nblk, {
            col_buf b;
            col_buf_at(scratch, omp_get_thread_num(), band, &b);
            int64_t a = it / nblk, c0 = (it % nblk) * band, m = j->C - c0 < band ? j->C - c0 : band;
            const char *pa = col_block(j, a, c0);
            for (int pass = 1; pass <= passes; pass++) {
                col_rows(j, pa, m, 0, j->R, pass, &b);
                if (pass == 1 && passes == 2) col_center(j, m, &b);
            }
            col_final(j, m, &b, j->out + (a * j->C + c0) * j->osz);
        });
    } else {
        for (int64_t it = 0; it < A * nblk; it++) {
            int64_t a = it / nblk, c0 = (it % nblk) * band, m = j->C - c0 < band ? j->C - c0 : band;
            const char *pa = col_block(j, a, c0);
            col_buf b0;
            col_buf_at(scratch, 0, band, &b0);
            for (int pass = 1; pass <= passes; pass++) {
                TG_PAR_FOR(nth < nb ? nth : nb, t, nb, {
                    col_buf b;
                    col_buf_at(scratch, (int)t, band, &b);
                    if (pass == 2) b.aux = b0.aux; /* the merged center */
                    col_rows(j, pa, m, j->R * t / nb, j->R * (t + 1) / nb, pass, &b);
                });
                for (int t = 1; t < nb; t++) {
                    col_buf b;
                    col_buf_at(scratch, t, band, &b);
                    col_merge(j, m, pass, &b0, &b);
                }
                if (pass == 1 && passes == 2) col_center(j, m, &b0);
            }
            col_final(j, m, &b0, j->out + (a * j->C + c0) * j->osz);
        }
    }
    tg_free(scratch);
    return TG_OK;
}

/* ---- layouts: reductions choose their loop order by strides ----
 *
 * NumPy walks a reduction's input in memory order. Here the order of a
 * float sum (its pairwise tree, its 64 pieces) is that of the logical
 * layout, the same for a transposed view as for its contiguous copy, and
 * stays so; what follows reads memory in order where the result does not
 * depend on the order, and otherwise reads it in cache-sized pieces. */

/* Whether every element of v lies in one dense block of memory (a
 * permutation of a contiguous array, any axis reversed); *lo is its lowest
 * address. */
static bool dense_span(const tg_array *v, int64_t isz, const char **lo) {
    int64_t st[TG_MAX_NDIM], sh[TG_MAX_NDIM];
    int n = 0;
    const char *p = v->data;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 1) continue;
        if (v->shape[d] == 0) return false;
        int64_t a = v->strides[d] < 0 ? -v->strides[d] : v->strides[d];
        if (v->strides[d] < 0) p += (v->shape[d] - 1) * v->strides[d];
        int i = n++;
        for (; i > 0 && st[i - 1] > a; i--) { /* insertion by stride */
            st[i] = st[i - 1];
            sh[i] = sh[i - 1];
        }
        st[i] = a;
        sh[i] = v->shape[d];
    }
    int64_t expect = isz;
    for (int i = 0; i < n; i++) {
        if (st[i] != expect) return false;
        expect *= sh[i];
    }
    *lo = p;
    return true;
}

/* argmax/argmin of every element of a dense float64/float32 view v (lo
 * from dense_span), with NumPy's rule in logical order: the first index
 * of the extreme, or of the first NaN. The extreme is found in memory
 * order; then memory is walked run by run (the axis of stride isz), each
 * position's logical index kept by an odometer, and the smallest logical
 * index of a match wins. */
static int64_t dense_argext(const tg_array *v, tg_dtype dt, int64_t isz, const char *lo, int64_t n,
                            bool is_max) {
    bool nan;
    double m = ext_row(dt, lo, n, is_max, &nan);
    /* axes by stride: run length, and per memory axis the logical step */
    int64_t msh[TG_MAX_NDIM], mst[TG_MAX_NDIM], lstep[TG_MAX_NDIM], ls = 1, l0 = 0;
    int na = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] > 1) {
            int64_t a = v->strides[d] < 0 ? -v->strides[d] : v->strides[d];
            int64_t step = v->strides[d] < 0 ? -ls : ls;
            if (v->strides[d] < 0) l0 += (v->shape[d] - 1) * ls;
            int i = na++;
            for (; i > 0 && mst[i - 1] > a; i--) {
                mst[i] = mst[i - 1];
                msh[i] = msh[i - 1];
                lstep[i] = lstep[i - 1];
            }
            mst[i] = a;
            msh[i] = v->shape[d];
            lstep[i] = step;
        }
        ls *= v->shape[d];
    }
    if (na == 0) return 0;
    const int64_t run = msh[0], step0 = lstep[0];
    int64_t idx[TG_MAX_NDIM] = {0}, base = l0, best = INT64_MAX;
    for (int64_t r0 = 0; r0 < n; r0 += run) {
        const char *q = lo + r0 * isz;
        int64_t hit = -1;
        /* the run's match of smallest logical index: its first in memory
         * when the run goes forward in logical order, else its last */
#define SCAN(T)                                                                  \
    {                                                                            \
        const T *t = (const T *)q, mv = (T)m;                                    \
        if (step0 > 0) {                                                         \
            for (int64_t k = 0; k < run; k++)                                    \
                if (nan ? t[k] != t[k] : t[k] == mv) {                           \
                    hit = k;                                                     \
                    break;                                                       \
                }                                                                \
        } else {                                                                 \
            for (int64_t k = run - 1; k >= 0; k--)                               \
                if (nan ? t[k] != t[k] : t[k] == mv) {                           \
                    hit = k;                                                     \
                    break;                                                       \
                }                                                                \
        }                                                                        \
    }
        if (dt == TG_FLOAT64) SCAN(double) else SCAN(float)
#undef SCAN
        if (hit >= 0 && base + hit * step0 < best) best = base + hit * step0;
        for (int i = 1; i < na; i++) { /* the next run */
            base += lstep[i];
            if (++idx[i] < msh[i]) break;
            base -= lstep[i] * msh[i];
            idx[i] = 0;
        }
    }
    return best == INT64_MAX ? 0 : best;
}

/* v's elements into d, contiguous in v's logical order: the bits a plain
 * copy gives, but when the axis innermost in memory is not the last one
 * (a transposed view), the two are walked in tiles of TILE x TILE that
 * stay in L1, where an element-by-element walk in logical order met a
 * new cache line at every element. Element sizes 1, 2, 4, 8; false for
 * others. */
#define TILE 32
typedef struct tiled {
    const char *src;
    char *dst;
    int nd, m; /* m: the axis innermost in memory, or -1 for rows */
    int64_t isz, ntm, sh[TG_MAX_NDIM], st[TG_MAX_NDIM], ds[TG_MAX_NDIM];
} tiled;

/* Piece it of the copy: a row (m < 0), or TILE positions of m by the
 * whole last axis in tiles, at one position of the other axes. */
static void copy_piece(const tiled *c, int64_t it) {
    const int L = c->nd - 1, m = c->m;
    int64_t o = it / c->ntm, i0 = (it % c->ntm) * TILE, sp = 0, dp = 0;
    for (int a = L - 1; a >= 0; a--) {
        if (a == m) continue;
        sp += (o % c->sh[a]) * c->st[a];
        dp += (o % c->sh[a]) * c->ds[a];
        o /= c->sh[a];
    }
    const char *s0 = c->src + sp;
    char *d0 = c->dst + dp;
    const int64_t sl = c->st[L], nl = c->sh[L];
    if (m < 0) {
#define ROW(T)                                                                   \
    for (int64_t j = 0; j < nl; j++) ((T *)d0)[j] = *(const T *)(s0 + j * sl);
        switch (c->isz) {
        case 1: ROW(uint8_t) break;
        case 2: ROW(uint16_t) break;
        case 4: ROW(uint32_t) break;
        default: ROW(uint64_t) break;
        }
#undef ROW
        return;
    }
    const int64_t i1 = i0 + TILE < c->sh[m] ? i0 + TILE : c->sh[m], sm = c->st[m], dm = c->ds[m];
#define TILES(T)                                                                 \
    for (int64_t j0 = 0; j0 < nl; j0 += TILE) {                                  \
        const int64_t j1 = j0 + TILE < nl ? j0 + TILE : nl;                      \
        for (int64_t j = j0; j < j1; j++)                                        \
            for (int64_t i = i0; i < i1; i++)                                    \
                *(T *)(d0 + i * dm + j * (int64_t)sizeof(T)) = *(const T *)(s0 + i * sm + j * sl); \
    }
    switch (c->isz) {
    case 1: TILES(uint8_t) break;
    case 2: TILES(uint16_t) break;
    case 4: TILES(uint32_t) break;
    default: TILES(uint64_t) break;
    }
#undef TILES
}

static bool copy_tiled(const tg_array *v, char *d, int64_t isz, int nth) {
    if (isz != 1 && isz != 2 && isz != 4 && isz != 8) return false;
    tiled c = {.src = v->data, .dst = d, .isz = isz, .m = -1};
    int64_t total = 1;
    for (int a = 0; a < v->ndim; a++)
        if (v->shape[a] != 1) {
            c.sh[c.nd] = v->shape[a];
            c.st[c.nd++] = v->strides[a];
            total *= v->shape[a];
        }
    if (total == 0) return true;
    if (c.nd == 0) {
        memcpy(d, v->data, (size_t)isz);
        return true;
    }
    const int L = c.nd - 1;
    for (int a = L; a >= 0; a--) c.ds[a] = a == L ? isz : c.ds[a + 1] * c.sh[a + 1];
    for (int a = 0; a < L; a++)
        if (c.m < 0 || llabs(c.st[a]) < llabs(c.st[c.m])) c.m = a;
    if (c.m >= 0 && llabs(c.st[L]) <= llabs(c.st[c.m])) c.m = -1;
    const int64_t nm = c.m >= 0 ? c.sh[c.m] : 1;
    c.ntm = (nm + TILE - 1) / TILE;
    const int64_t npiece = total / (c.sh[L] * nm) * c.ntm;
    TG_PAR_FOR(nth, it, npiece, { copy_piece(&c, it); });
    return true;
}

/* ---- the sum of a permuted view, in its copy's order, without the copy ----
 *
 * The sum of every element of a view that is not one strided row has the
 * bits of its contiguous copy's sum (above; "layouts"): the copy's 64
 * pieces (or the one row), each sum_f64/sum_f32's pairwise tree, whose
 * leaves are stretches of at most 128 elements in four interleaved sums,
 * elements past the last multiple of 4 added to the first. Copying the
 * view first wrote and read it again (sum(x.T) 5x NumPy's time). Here the
 * leaves are found first (their starts, in logical order); then the
 * view's lines (its last axis, logically contiguous) are read up to
 * LINE_G at a time beside each other in memory, LINE_B rows of memory at
 * a time, each element added to one of four sums of its line chosen by
 * its position mod 4 (the same four sums, rotated, as the leaf's), in
 * vectors across the lines, each line up to where its leaf reaches its
 * last elements or ends (masked); from there the line takes the rest of
 * those rows one element at a time, and closes the leaf. A closed leaf's
 * value is (a0 + a1) + (a2 + a3) as sum_f64 makes it, and the tree is
 * replayed over the values. Threads take groups of lines and stretches of
 * them (segments), each line's segments cut where a leaf starts; a leaf
 * begun in the line before (a line's head, at most 127 elements) is kept
 * aside and finished once every line is done, from that line's open
 * leaf. Each of the four sums gets its elements one after another in
 * logical order, so the bits are the copy's, for any number of threads.
 * (sum(x.T) of a 10^4 x 1000 float64 x: 9.4 ms before the masks, the
 * clones and the cuts at leaves, 4.3-5.5 ms after, NumPy 2.9-7.6 in
 * bench_layouts' runs.) Lines of at least LINE_MIN elements (a leaf then
 * touches two lines at most, and a segment holds more than a leaf);
 * shorter ones are still copied. */
#define LINE_G 1024
#define LINE_B 8
#define LINE_MIN 256
#define HEAD_ROOM 128

/* The leaves' starts of sum_f64's tree over [b, b + n) appended at ls
 * (counted only, when ls is NULL). */
static void leaves_of(int64_t b, int64_t n, int64_t *ls, int64_t *cnt) {
    if (n > 128) {
        int64_t h = (n / 2) & ~(int64_t)7;
        leaves_of(b, h, ls, cnt);
        leaves_of(b + h, n - h, ls, cnt);
        return;
    }
    if (ls) ls[*cnt] = b;
    ++*cnt;
}

/* sum_f64's tree over n elements, its leaves' values taken from *lv. */
static double leaves_tree(int64_t n, const double **lv) {
    if (n <= 128) return *(*lv)++;
    int64_t h = (n / 2) & ~(int64_t)7;
    double l = leaves_tree(h, lv);
    return l + leaves_tree(n - h, lv);
}

/* A leaf left open at a segment's end: leaf k of n, pos elements in its
 * four sums a (by lane). */
typedef struct leaf_cur {
    int64_t k, n, pos;
    double a[4];
} leaf_cur;

/* The view's axes of length > 1 (sh, st; lst: their steps in lines), the
 * last one the lines'; m: the other axis innermost in memory, whose lines
 * are read side by side, or -1 (lines one at a time). */
typedef struct leafsum {
    const char *src;
    tg_dtype dt;
    int nd, m;
    int64_t ntm, nseg, sh[TG_MAX_NDIM], st[TG_MAX_NDIM], lst[TG_MAX_NDIM];
    const int64_t *ls; /* nleaf + 1 starts, the last one the end */
    double *lv;        /* the leaves' values */
    int64_t nleaf, nl;
    double *heads;     /* HEAD_ROOM per line */
    int64_t *hlen;     /* per line */
    leaf_cur *tails;   /* per line */
    char *scratch;     /* per thread: LINE_SCRATCH bytes */
} leafsum;
#define LINE_SCRATCH ((4 + 7) * LINE_G * 8)

/* x[0..cnt), the next elements in logical order, into leaf c (and those
 * after it), as sum_f64's leaf loop adds them. */
static void leaf_feed(const leafsum *w, leaf_cur *c, const double *x, int64_t cnt) {
    for (int64_t i = 0; i < cnt; i++) {
        const int64_t q = c->n & ~(int64_t)3;
        c->a[c->pos < q ? c->pos & 3 : 0] += x[i];
        if (++c->pos == c->n) {
            w->lv[c->k] = (c->a[0] + c->a[1]) + (c->a[2] + c->a[3]);
            c->k++;
            c->n = c->k < w->nleaf ? w->ls[c->k + 1] - w->ls[c->k] : 0;
            c->pos = 0;
            c->a[0] = c->a[1] = c->a[2] = c->a[3] = 0;
        }
    }
}

/* A bracket lo < hi of the leaf that holds element s (ls[lo] <= s <
 * ls[hi]) for the binary search: leaves are of nearly one size (the
 * pieces' trees are alike), so s / mean size is a leaf or a few off; from
 * there, steps that double. A search from the whole range took a cache
 * miss a step, for each line of each task. */
static void leaf_bracket(const int64_t *ls, int64_t nleaf, int64_t s, int64_t *lo, int64_t *hi) {
    int64_t e = (int64_t)((double)s / (double)ls[nleaf] * (double)nleaf), step = 1;
    e = e < 0 ? 0 : e >= nleaf ? nleaf - 1 : e;
    if (ls[e] <= s) {
        int64_t b = e;
        while (b + step < nleaf && ls[b + step] <= s) {
            b += step;
            step *= 2;
        }
        *lo = b;
        *hi = b + step < nleaf ? b + step : nleaf;
    } else {
        int64_t b = e;
        while (b - step > 0 && ls[b - step] > s) {
            b -= step;
            step *= 2;
        }
        *hi = b;
        *lo = b - step > 0 ? b - step : 0;
    }
}

/* Where line g of a task stands: its leaf k starts at element s of the
 * line (negative for a head's leaf, begun in the line before) and has n;
 * its segment is [lo, hi) of the line, its head the first hl elements;
 * ev: the first element that the rows' vector loop must not take (at
 * most hi). */
typedef struct line_st {
    int64_t *k, *s, *n, *ev, *hl, *lo, *hi;
} line_st;

static void line_open(const leafsum *w, const line_st *L, int g, int64_t k, int64_t s) {
    L->k[g] = k;
    L->s[g] = s;
    int64_t n = L->n[g] = k < w->nleaf ? w->ls[k + 1] - w->ls[k] : 1;
    if (k + 2 <= w->nleaf) __builtin_prefetch(&w->ls[k + 2]); /* for the next leaf's length, a leaf from now */
    int64_t q = n & ~(int64_t)3, ev = s + (n - 1 > q + 1 ? q + 1 : n - 1); /* past q, or the last: closes the leaf */
    L->ev[g] = ev < L->hi[g] ? ev : L->hi[g];
}

/* The first leaf to start at or after element s of the whole (ls[k] >= s;
 * the end, nleaf, when none does). */
static int64_t leaf_from(const leafsum *w, int64_t s) {
    int64_t lo, hi; /* ls[lo] <= s < ls[hi] */
    leaf_bracket(w->ls, w->nleaf, s, &lo, &hi);
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (w->ls[mid] <= s) lo = mid;
        else hi = mid;
    }
    return w->ls[lo] == s ? lo : lo + 1;
}

/* The rows j0 .. j0 + jn of LINE_G-wide lines that lie side by side
 * (packed: row j at q + (j - j0) * ls), each element added to the sum of
 * its line for its row mod 4 (acc[(j & 3) * LINE_G + g]) where lo[g] <=
 * j < ev[g]; the rest is left to the element-by-element loop. A full
 * block of LINE_B = 8 rows takes each sum's two rows in one pass (its two
 * adds in row order), in the widest vectors the CPU has; the sums and
 * their order are those of one row at a time. */
#define ROWS_LINES(N, T)                                                                          \
    CLONES static void rows_lines_##N(double *restrict acc, const T *restrict q, int64_t ls,     \
                                      int64_t j0, int64_t jn, int gn, const int64_t *restrict lo, \
                                      const int64_t *restrict ev) {                               \
        if (jn == 8) {                                                                            \
            double *restrict a0 = acc + ((j0 + 0) & 3) * LINE_G, *restrict a1 = acc + ((j0 + 1) & 3) * LINE_G; \
            double *restrict a2 = acc + ((j0 + 2) & 3) * LINE_G, *restrict a3 = acc + ((j0 + 3) & 3) * LINE_G; \
            const T *q0 = q, *q1 = q + ls, *q2 = q + 2 * ls, *q3 = q + 3 * ls;                    \
            const T *q4 = q + 4 * ls, *q5 = q + 5 * ls, *q6 = q + 6 * ls, *q7 = q + 7 * ls;        \
            for (int g = 0; g < gn; g++) {                                                        \
                const int64_t b = lo[g] - j0, e = ev[g] - j0;                                     \
                double b0 = a0[g], b1 = a1[g], b2 = a2[g], b3 = a3[g];                            \
                const double x0 = (double)q0[g], x1 = (double)q1[g], x2 = (double)q2[g];           \
                const double x3 = (double)q3[g], x4 = (double)q4[g], x5 = (double)q5[g];           \
                const double x6 = (double)q6[g], x7 = (double)q7[g];                              \
                b0 = b <= 0 && e > 0 ? b0 + x0 : b0;                                              \
                b1 = b <= 1 && e > 1 ? b1 + x1 : b1;                                              \
                b2 = b <= 2 && e > 2 ? b2 + x2 : b2;                                              \
                b3 = b <= 3 && e > 3 ? b3 + x3 : b3;                                              \
                a0[g] = b <= 4 && e > 4 ? b0 + x4 : b0;                                           \
                a1[g] = b <= 5 && e > 5 ? b1 + x5 : b1;                                           \
                a2[g] = b <= 6 && e > 6 ? b2 + x6 : b2;                                           \
                a3[g] = b <= 7 && e > 7 ? b3 + x7 : b3;                                           \
            }                                                                                     \
            return;                                                                               \
        }                                                                                         \
        for (int64_t j = j0; j < j0 + jn; j++, q += ls) {                                         \
            double *restrict a = acc + (j & 3) * LINE_G;                                          \
            for (int g = 0; g < gn; g++) {                                                        \
                const double x = (double)q[g];                                                    \
                a[g] = lo[g] <= j && j < ev[g] ? a[g] + x : a[g];                                 \
            }                                                                                     \
        }                                                                                         \
    }
ROWS_LINES(f64, double)
ROWS_LINES(f32, float)
#undef ROWS_LINES

/* Task it: up to LINE_G lines along m (or one line), segment sg of them,
 * a row of LINE_B elements of each at a time. A line's segment starts
 * where its first leaf at or after element nl * sg / nseg does, and ends
 * where the next segment starts (the line's end for the last), so that
 * only a line's first segment has a head (the end of a leaf begun in the
 * line before) and its last an open leaf; the lines' segments differ by
 * less than a leaf, the rows outside one's are masked. */
static void leaf_lines(const leafsum *w, int64_t it) {
    const int L = w->nd - 1, m = w->m;
    const int64_t nl = w->nl, sl = w->st[L], G = m >= 0 ? LINE_G : 1;
    const int64_t sg = it % w->nseg, j0s = nl * sg / w->nseg, j1s = nl * (sg + 1) / w->nseg;
    int64_t o = it / w->nseg / w->ntm, i0 = (it / w->nseg % w->ntm) * G, sp = 0, l0 = 0;
    for (int a = L - 1; a >= 0; a--) {
        if (a == m) continue;
        sp += (o % w->sh[a]) * w->st[a];
        l0 += (o % w->sh[a]) * w->lst[a];
        o /= w->sh[a];
    }
    if (m >= 0) {
        sp += i0 * w->st[m];
        l0 += i0 * w->lst[m];
    }
    const int gn = (int)(m >= 0 && w->sh[m] - i0 < G ? w->sh[m] - i0 : G);
    const int64_t sm = m >= 0 ? w->st[m] : 0, lm = m >= 0 ? w->lst[m] : 0;
    const bool f64 = w->dt == TG_FLOAT64, packed = sm == (f64 ? 8 : 4);
    double *acc = (double *)(w->scratch + (size_t)omp_get_thread_num() * LINE_SCRATCH);
    line_st S; /* acc[slot * LINE_G + g]: slot = element mod 4 */
    S.k = (int64_t *)(acc + 4 * LINE_G);
    S.s = S.k + LINE_G;
    S.n = S.s + LINE_G;
    S.ev = S.n + LINE_G;
    S.hl = S.ev + LINE_G;
    S.lo = S.hl + LINE_G;
    S.hi = S.lo + LINE_G;
    int64_t jlo = nl, jhi = 0;
    for (int g = 0; g < gn; g++) { /* the segment's first leaf of its own, and its head */
        const int64_t line = l0 + g * lm, base = line * nl;
        int64_t k;
        if (sg == 0) {
            k = leaf_from(w, base);
            S.lo[g] = 0;
            S.hl[g] = k > 0 && w->ls[k] > base ? w->ls[k] - base : 0; /* a leaf begun in the line before */
        } else {
            k = leaf_from(w, base + j0s);
            S.lo[g] = w->ls[k] - base;
            S.hl[g] = 0;
        }
        S.hi[g] = sg == w->nseg - 1 ? nl : w->ls[leaf_from(w, base + j1s)] - base;
        if (sg == 0) w->hlen[line] = S.hl[g];
        line_open(w, &S, g, k, S.lo[g] + S.hl[g]);
        if (S.hl[g]) S.ev[g] = S.lo[g];
        for (int r = 0; r < 4; r++) acc[r * LINE_G + g] = 0;
        if (S.lo[g] < jlo) jlo = S.lo[g];
        if (S.hi[g] > jhi) jhi = S.hi[g];
    }
    const char *s0 = w->src + sp;
    for (int64_t j0 = jlo; j0 < jhi; j0 += LINE_B) {
        const int64_t jn = jhi - j0 < LINE_B ? jhi - j0 : LINE_B;
        /* every line, a row of memory at a time, each from its lo up to its ev */
        if (packed && f64)
            rows_lines_f64(acc, (const double *)(s0 + j0 * sl), sl / 8, j0, jn, gn, S.lo, S.ev);
        else if (packed)
            rows_lines_f32(acc, (const float *)(s0 + j0 * sl), sl / 4, j0, jn, gn, S.lo, S.ev);
        else
            for (int64_t j = j0; j < j0 + jn; j++) {
                double *restrict a = acc + (j & 3) * LINE_G;
                const char *p = s0 + j * sl;
                for (int g = 0; g < gn; g++)
                    if (S.lo[g] <= j && j < S.ev[g])
                        a[g] += f64 ? *(const double *)(p + g * sm) : (double)*(const float *)(p + g * sm);
            }
        for (int g = 0; g < gn; g++) { /* the lines set back: from their ev, element by element */
            if (S.ev[g] >= j0 + jn || S.ev[g] >= S.hi[g]) continue;
            const int64_t line = l0 + g * lm, jend = j0 + jn < S.hi[g] ? j0 + jn : S.hi[g];
            for (int64_t j = S.ev[g] > j0 ? S.ev[g] : j0; j < jend; j++) {
                const char *p = s0 + j * sl + g * sm;
                double x = f64 ? *(const double *)p : (double)*(const float *)p;
                if (j < S.lo[g] + S.hl[g]) {
                    w->heads[line * HEAD_ROOM + (j - S.lo[g])] = x;
                    if (j + 1 == S.lo[g] + S.hl[g]) line_open(w, &S, g, S.k[g], S.s[g]); /* its own leaves from here */
                    continue;
                }
                const int64_t pos = j - S.s[g], n = S.n[g], q = n & ~(int64_t)3;
                acc[(pos < q ? j & 3 : S.s[g] & 3) * LINE_G + g] += x;
                if (pos + 1 == n) {
                    double v[4];
                    for (int r = 0; r < 4; r++) v[r] = acc[((S.s[g] + r) & 3) * LINE_G + g];
                    for (int r = 0; r < 4; r++) acc[r * LINE_G + g] = 0;
                    w->lv[S.k[g]] = (v[0] + v[1]) + (v[2] + v[3]);
                    line_open(w, &S, g, S.k[g] + 1, j + 1);
                }
            }
        }
    }
    for (int g = 0; g < gn && sg == w->nseg - 1; g++) { /* the leaf left open at the line's end, by lane */
        leaf_cur *t = &w->tails[l0 + g * lm];
        t->k = S.k[g];
        t->n = S.n[g];
        t->pos = S.hi[g] - S.s[g];
        for (int r = 0; r < 4; r++) t->a[r] = acc[((S.s[g] + r) & 3) * LINE_G + g];
    }
}

/* The sum of every element of v (float64/float32, inner of them, its
 * axes not one stride) as its contiguous copy's sum gives it: 64 pieces
 * from TG_PARALLEL_MIN elements, else one row. 1: done, into *sum; 0: not
 * a layout for it (short lines); -1: out of memory. */
static int sum_view_leaves(const tg_array *v, int64_t inner, int nth, double *sum) {
    leafsum w = {.src = v->data, .dt = v->dtype, .m = -1};
    for (int a = 0; a < v->ndim; a++)
        if (v->shape[a] != 1) {
            w.sh[w.nd] = v->shape[a];
            w.st[w.nd++] = v->strides[a];
        }
    if (w.nd < 2 || inner <= 0) return 0;
    const int L = w.nd - 1;
    const int64_t nl = w.nl = w.sh[L];
    if (nl < LINE_MIN) return 0;
    for (int a = L - 1; a >= 0; a--) w.lst[a] = a == L - 1 ? 1 : w.lst[a + 1] * w.sh[a + 1];
    for (int a = 0; a < L; a++)
        if (w.m < 0 || llabs(w.st[a]) < llabs(w.st[w.m])) w.m = a;
    if (w.m >= 0 && llabs(w.st[L]) <= llabs(w.st[w.m])) w.m = -1;
    w.ntm = w.m >= 0 ? (w.sh[w.m] + LINE_G - 1) / LINE_G : 1;
    const int64_t nlines = inner / nl, groups = nlines / (w.m >= 0 ? w.sh[w.m] : 1) * w.ntm;
    /* segments: enough tasks for the threads (the bits do not depend on it) */
    w.nseg = groups >= 4 * nth ? 1 : (4 * nth + groups - 1) / groups;
    if (w.nseg > nl / LINE_MIN) w.nseg = nl / LINE_MIN;
    const bool pieces = inner >= TG_PARALLEL_MIN;
    const int np = pieces ? RED_CHUNKS : 1;
    /* The pieces are of two lengths at most (pl and pl + 1), and a piece's
     * leaves are those of its length moved to its start: each length's
     * leaves found once (tl[0], tl[1]: nt[0], nt[1] of them), then copied. */
    const int64_t pl = inner / np;
    int64_t nt[2] = {0, 0}, first[RED_CHUNKS + 1], nleaf = 0;
    double psum[RED_CHUNKS];
    for (int i = 0; i < 2; i++) leaves_of(0, pl + i, NULL, &nt[i]);
    for (int t = 0; t < np; t++) {
        first[t] = nleaf;
        nleaf += nt[inner * (t + 1) / np - inner * t / np - pl];
    }
    first[np] = w.nleaf = nleaf;
    int64_t *ls = tg_malloc((size_t)(nleaf + 1) * sizeof *ls), *tl = tg_malloc((size_t)(nt[0] + nt[1]) * sizeof *tl);
    w.lv = tg_malloc((size_t)nleaf * sizeof *w.lv);
    w.heads = tg_malloc((size_t)nlines * HEAD_ROOM * sizeof *w.heads);
    w.hlen = tg_malloc((size_t)nlines * sizeof *w.hlen);
    w.tails = tg_malloc((size_t)nlines * sizeof *w.tails);
    w.scratch = tg_malloc((size_t)nth * LINE_SCRATCH);
    int rc = -1;
    if (!ls || !tl || !w.lv || !w.heads || !w.hlen || !w.tails || !w.scratch) goto done;
    nt[0] = nt[1] = 0;
    leaves_of(0, pl, tl, &nt[0]);
    leaves_of(0, pl + 1, tl + nt[0], &nt[1]);
    TG_PAR_FOR(nth, t, np, {
        const int64_t b = inner * t / np, i = inner * (t + 1) / np - b - pl, *src = tl + (i ? nt[0] : 0);
        for (int64_t k = 0; k < nt[i]; k++) ls[first[t] + k] = b + src[k];
    });
    ls[nleaf] = inner;
    w.ls = ls;
    TG_PAR_FOR(nth, it, groups * w.nseg, { leaf_lines(&w, it); });
    /* the leaves across lines: each closed by the next line's head */
    TG_PAR_FOR(nth, l, nlines, {
        if (l && w.hlen[l]) {
            leaf_cur c = w.tails[l - 1];
            leaf_feed(&w, &c, w.heads + l * HEAD_ROOM, w.hlen[l]);
        }
    });
    /* the pieces' trees over their leaves, then the pieces in order */
    TG_PAR_FOR(nth, t, np, {
        const double *lv = w.lv + first[t];
        psum[t] = leaves_tree(inner * (t + 1) / np - inner * t / np, &lv);
    });
    if (pieces) {
        double s = 0;
        for (int t = 0; t < np; t++) s += psum[t];
        *sum = s;
    } else {
        *sum = psum[0];
    }
    rc = 1;
done:
    tg_free(ls);
    tg_free(tl);
    tg_free(w.lv);
    tg_free(w.heads);
    tg_free(w.hlen);
    tg_free(w.tails);
    tg_free(w.scratch);
    return rc;
}

/* (grp_sum and grp_ext take the AVX2/AVX-512 clones; grp_sqdev does not,
 * since there d * d + acc could become a fused multiply-add and give
 * other bits than row_sqdev's.)
 *
 * Rows of float64/float32 at a stride rs, where a kept axis steps through
 * memory by less (gs: sum or max over axis 1 of x.T, whose rows are
 * columns of x): GROUP neighbouring rows reduced together, each element
 * of a row beside its neighbours' in the inner loop, so that memory is
 * read in order and every cache line is used by every row; one row at a
 * time met a new line at every element. Each row's result is the one
 * its own row loop gives: the same pairwise tree and order for sums
 * (row_sum_d's strided branch), var's two passes, and the rules of the
 * plain loops for max/min (the first NaN sticks) and argmax/argmin. */
#define GROUP 256

#define GRP_LOOPS(N, T)                                                          \
    CLONES static void grp_sum_##N(const char *p, int64_t n, int64_t s, int64_t gs, int g, double *out) { \
        if (n > 128) {                                                           \
            double r[GROUP];                                                     \
            int64_t h = n / 2;                                                   \
            grp_sum_##N(p, h, s, gs, g, out);                                    \
            grp_sum_##N(p + h * s, n - h, s, gs, g, r);                          \
            for (int i = 0; i < g; i++) out[i] += r[i];                          \
            return;                                                              \
        }                                                                        \
        for (int i = 0; i < g; i++) out[i] = 0;                                  \
        for (int64_t k = 0; k < n; k++, p += s)                                  \
            for (int i = 0; i < g; i++) out[i] += (double)*(const T *)(p + i * gs); \
    }                                                                            \
    /* the same where the rows lie side by side (gs the element's size):    \
     * typed and restrict, so that the inner loop is vectors */              \
    CLONES static void grp_sumc_##N(const T *restrict p, int64_t n, int64_t s, int g, \
                                    double *restrict out) {                      \
        if (n > 128) {                                                           \
            double r[GROUP];                                                     \
            int64_t h = n / 2;                                                   \
            grp_sumc_##N(p, h, s, g, out);                                       \
            grp_sumc_##N(p + h * s, n - h, s, g, r);                             \
            for (int i = 0; i < g; i++) out[i] += r[i];                          \
            return;                                                              \
        }                                                                        \
        for (int i = 0; i < g; i++) out[i] = 0;                                  \
        for (int64_t k = 0; k < n; k++, p += s)                                  \
            for (int i = 0; i < g; i++) out[i] += (double)p[i];                  \
    }                                                                            \
    static void grp_sqdev_##N(const char *p, int64_t n, int64_t s, int64_t gs, int g, \
                              const double *mean, double *out) {                 \
        if (n > 128) {                                                           \
            double r[GROUP];                                                     \
            int64_t h = n / 2;                                                   \
            grp_sqdev_##N(p, h, s, gs, g, mean, out);                            \
            grp_sqdev_##N(p + h * s, n - h, s, gs, g, mean, r);                  \
            for (int i = 0; i < g; i++) out[i] += r[i];                          \
            return;                                                              \
        }                                                                        \
        for (int i = 0; i < g; i++) out[i] = 0;                                  \
        for (int64_t k = 0; k < n; k++, p += s)                                  \
            for (int i = 0; i < g; i++) {                                        \
                double d = (double)*(const T *)(p + i * gs) - mean[i];           \
                out[i] += d * d;                                                 \
            }                                                                    \
    }                                                                            \
    CLONES static void grp_ext_##N(const char *p, int64_t n, int64_t s, int64_t gs, int g, bool mx, \
                            bool arg, T *acc, int64_t *best) {                   \
        for (int i = 0; i < g; i++) {                                            \
            acc[i] = *(const T *)(p + i * gs);                                   \
            best[i] = 0;                                                         \
        }                                                                        \
        p += s;                                                                  \
        for (int64_t k = 1; k < n; k++, p += s)                                  \
            for (int i = 0; i < g; i++) {                                        \
                T v = *(const T *)(p + i * gs);                                  \
                bool up = (acc[i] == acc[i]) & ((v != v) | (mx ? v > acc[i] : v < acc[i])); \
                acc[i] = up ? v : acc[i];                                        \
                if (arg) best[i] = up ? k : best[i];                             \
            }                                                                    \
    }                                                                            \
    /* grp_ext where the rows lie side by side: typed and restrict, one     \
     * loop without the index and one with it, so that each is vectors */    \
    CLONES static void grp_extc_##N(const T *restrict p, int64_t n, int64_t s, int g, bool mx, \
                                    T *restrict acc) {                           \
        for (int i = 0; i < g; i++) acc[i] = p[i];                               \
        p += s;                                                                  \
        if (mx) {                                                                \
            for (int64_t k = 1; k < n; k++, p += s)                              \
                for (int i = 0; i < g; i++) {                                    \
                    T v = p[i], a = acc[i];                                      \
                    acc[i] = ((a == a) & ((v != v) | (v > a))) ? v : a;          \
                }                                                                \
        } else {                                                                 \
            for (int64_t k = 1; k < n; k++, p += s)                              \
                for (int i = 0; i < g; i++) {                                    \
                    T v = p[i], a = acc[i];                                      \
                    acc[i] = ((a == a) & ((v != v) | (v < a))) ? v : a;          \
                }                                                                \
        }                                                                        \
    }                                                                            \
    CLONES static void grp_argc_##N(const T *restrict p, int64_t n, int64_t s, int g, bool mx, \
                                    T *restrict acc, int64_t *restrict best) {   \
        for (int i = 0; i < g; i++) {                                            \
            acc[i] = p[i];                                                       \
            best[i] = 0;                                                         \
        }                                                                        \
        p += s;                                                                  \
        for (int64_t k = 1; k < n; k++, p += s)                                  \
            if (mx)                                                              \
                for (int i = 0; i < g; i++) {                                    \
                    T v = p[i], a = acc[i];                                      \
                    bool up = (a == a) & ((v != v) | (v > a));                   \
                    acc[i] = up ? v : a;                                         \
                    best[i] = up ? k : best[i];                                  \
                }                                                                \
            else                                                                 \
                for (int i = 0; i < g; i++) {                                    \
                    T v = p[i], a = acc[i];                                      \
                    bool up = (a == a) & ((v != v) | (v < a));                   \
                    acc[i] = up ? v : a;                                         \
                    best[i] = up ? k : best[i];                                  \
                }                                                                \
    }
GRP_LOOPS(d, double)
GRP_LOOPS(f, float)

static bool grp_kind(red_kind k) { return k != R_PROD && k != R_ALL && k != R_ANY && k != R_LSE; }

/* Reduces g rows (row i at p + i*gs, n elements at stride s) into out +
 * i*ostep (bytes). */
static void grp_reduce(red_kind k, tg_dtype dt, tg_dtype od, int64_t ddof, const char *p, int64_t n,
                       int64_t s, int64_t gs, int g, char *out, int64_t ostep) {
    const bool f64 = dt == TG_FLOAT64;
    double a[GROUP], mean[GROUP];
    if (k == R_MAX || k == R_MIN || k == R_ARGMAX || k == R_ARGMIN) {
        _Alignas(8) char accb[GROUP * 8];
        int64_t best[GROUP];
        bool mx = k == R_MAX || k == R_ARGMAX, arg = k == R_ARGMAX || k == R_ARGMIN;
        if (gs == (f64 ? 8 : 4) && s % gs == 0) {
            if (f64 && arg) grp_argc_d((const double *)p, n, s / 8, g, mx, (double *)accb, best);
            else if (f64) grp_extc_d((const double *)p, n, s / 8, g, mx, (double *)accb);
            else if (arg) grp_argc_f((const float *)p, n, s / 4, g, mx, (float *)accb, best);
            else grp_extc_f((const float *)p, n, s / 4, g, mx, (float *)accb);
        } else if (f64) {
            grp_ext_d(p, n, s, gs, g, mx, arg, (double *)accb, best);
        } else {
            grp_ext_f(p, n, s, gs, g, mx, arg, (float *)accb, best);
        }
        for (int i = 0; i < g; i++) {
            if (arg) *(int64_t *)(out + i * ostep) = best[i];
            else tg_store_f64(dt, out + i * ostep, f64 ? ((double *)accb)[i] : (double)((float *)accb)[i]);
        }
        return;
    }
    if (gs == (f64 ? 8 : 4) && s % gs == 0) {
        if (f64) grp_sumc_d((const double *)p, n, s / 8, g, a);
        else grp_sumc_f((const float *)p, n, s / 4, g, a);
    } else if (f64) {
        grp_sum_d(p, n, s, gs, g, a);
    } else {
        grp_sum_f(p, n, s, gs, g, a);
    }
    if (k == R_SUM || k == R_MEAN) {
        for (int i = 0; i < g; i++) tg_store_f64(od, out + i * ostep, k == R_MEAN ? a[i] / (double)n : a[i]);
        return;
    }
    for (int i = 0; i < g; i++) mean[i] = a[i] / (double)n;
    if (f64) grp_sqdev_d(p, n, s, gs, g, mean, a);
    else grp_sqdev_f(p, n, s, gs, g, mean, a);
    double cnt = var_count(n, ddof);
    for (int i = 0; i < g; i++) {
        double v = a[i] / cnt;
        tg_store_f64(od, out + i * ostep, k == R_STD ? sqrt(v) : v);
    }
}

/* acc[0..outer) += rows r0..r1 of x, rows of `outer` contiguous floats. */
static void rows_into(double *acc, const char *x, tg_dtype dt, int64_t outer, int64_t r0, int64_t r1) {
    const char *row = x + r0 * outer * (int64_t)tg_dtype_size(dt);
    if (dt == TG_FLOAT64)
        rows_add_f64(acc, (const double *)row, outer, r1 - r0);
    else
        rows_add_f32(acc, (const float *)row, outer, r1 - r0);
}

/* ---- the kernel ---- */

/* The reduction of x over the axes in mask into *out, of dtype od and
 * shape oshape (ond axes: the kept axes' lengths, with 1s anywhere). */
/* The byte offset of flat index i over v's axes a0..a1-1 (row-major). */
static int64_t index_offset(const tg_array *v, int a0, int a1, int64_t i) {
    int64_t off = 0;
    for (int d = a1 - 1; d >= a0; d--) {
        off += (i % v->shape[d]) * v->strides[d];
        i /= v->shape[d];
    }
    return off;
}

static int reduce_into(red_kind kind, const char *opname, const tg_array *x, uint32_t mask, tg_dtype od,
                       int64_t ddof, int ond, const int64_t *oshape, tg_array **out, tg_ctx *ctx) {
    int nd = x->ndim;
    int64_t outer = 1, inner = 1;
    int perm[TG_MAX_NDIM], np = 0;
    for (int d = 0; d < nd; d++) {
        if (mask & (1u << d)) {
            inner *= x->shape[d];
        } else {
            outer *= x->shape[d];
            perm[np++] = d;
        }
    }
    for (int d = 0; d < nd; d++)
        if (mask & (1u << d)) perm[np++] = d;
    if (inner == 0 &&
        (kind == R_MAX || kind == R_MIN || kind == R_ARGMAX || kind == R_ARGMIN))
        return tg_errorf(ctx, TG_ERUNTIME,
                         "zero-size array to reduction operation %s which has no identity",
                         opname);
    int rc = tg_array_prepare(&out[0], od, ond, oshape, ctx);
    if (rc) return rc;
    char *o = out[0]->data;
    int64_t osz = (int64_t)tg_dtype_size(od);
    tg_dtype dt = x->dtype;
    int64_t isz = (int64_t)tg_dtype_size(dt);

    /* Leading reduced axes over a contiguous rest: accumulate rows (sums
     * and means of float64/float32, the gradient-of-broadcast case). */
    bool leading = tg_array_is_contiguous(x) && outer > 1 && inner > 1 &&
                   (kind == R_SUM || kind == R_MEAN) && tg_dtype_is_float(dt) &&
                   dt != TG_FLOAT16;
    if (leading) {
        int nred = 0;
        for (int d = 0; d < nd; d++)
            if (mask & (1u << d)) nred++;
        for (int d = 0; d < nred && leading; d++) leading = (mask >> d) & 1u;
    }
    if (leading) {
        /* Bands of rows, each summed into its own accumulator (rows
         * stream through memory once), then the partials are added in
         * order. How many bands depends on the shape alone (at least 64
         * rows each, accumulators of at most 4 MiB), so the result does
         * not depend on the number of threads, which take whole bands. */
        int nb = 1;
        if (outer * inner >= TG_PARALLEL_MIN) {
            int64_t r = inner / 64, cap = ((int64_t)1 << 19) / outer;
            if (r > cap) r = cap;
            nb = r < 1 ? 1 : r > COL_BANDS ? COL_BANDS : (int)r;
        }
        int nth = nb > 1 ? omp_get_max_threads() : 1;
        if (nth > nb) nth = nb;
        double *acc = tg_calloc((size_t)outer * (size_t)nb, sizeof(double));
        if (!acc) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        TG_PAR_FOR(nth, t, nb, {
            rows_into(acc + (size_t)t * (size_t)outer, x->data, dt, outer, inner * t / nb,
                      inner * (t + 1) / nb);
        });
        for (int t = 1; t < nb; t++)
            for (int64_t j = 0; j < outer; j++) acc[j] += acc[(size_t)t * (size_t)outer + j];
        for (int64_t j = 0; j < outer; j++)
            tg_store_f64(od, o + j * osz, kind == R_MEAN ? acc[j] / (double)inner : acc[j]);
        tg_free(acc);
        return TG_OK;
    }

    col_job cj = {.k = kind, .dt = dt, .od = od, .ddof = ddof, .base = x->data,
                  .osz = osz, .out = o};
    if (outer > 0 && col_setup(&cj, x, mask)) return col_run(&cj, ctx);

    /* Rows: the permuted view must have a uniform stride over the reduced
     * axes; otherwise copy into that layout. */
    tg_array *v = tg_array_view_transpose(x, perm, ctx), *c = NULL;
    if (!v) return ctx ? ctx->status : TG_ENOMEM;
    int kept = nd - (int)__builtin_popcount(mask);
    int64_t rs = isz; /* stride within a row */
    bool uniform = true, first = true;
    int64_t expect = 0;
    for (int d = nd - 1; d >= kept; d--) {
        if (v->shape[d] == 1) continue;
        if (first) {
            rs = v->strides[d];
            expect = rs * v->shape[d];
            first = false;
        } else if (v->strides[d] != expect) {
            uniform = false;
            break;
        } else {
            expect *= v->shape[d];
        }
    }
    if (!uniform && outer > 1 && (kind == R_SUM || kind == R_MEAN) &&
        (dt == TG_FLOAT64 || dt == TG_FLOAT32) && tg_dtype_is_float(od)) {
        /* Sums over runs that are uniform inside but not between them (a
         * convolution's bias gradient: (N, C, H, W) summed over N, H and W,
         * runs of H*W): each run summed where it lies, pairwise, and the
         * runs' sums added in order, where copying the view into rows
         * first moved the whole input once more. */
        int inner_from = nd; /* v's axes inner_from.. form one run */
        int64_t run = 1, rstride = isz, expect2 = 0;
        bool first2 = true;
        for (int d = nd - 1; d >= kept; d--) {
            if (v->shape[d] == 1) {
                inner_from = d;
                continue;
            }
            if (first2) {
                rstride = v->strides[d];
                expect2 = rstride * v->shape[d];
                first2 = false;
            } else if (v->strides[d] != expect2) {
                break;
            } else {
                expect2 *= v->shape[d];
            }
            run *= v->shape[d];
            inner_from = d;
        }
        const int64_t nrun = run ? inner / run : 0; /* a reduced axis of length 0: nothing to add */
        const int nth = outer * inner >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
        TG_PAR_FOR(nth, j, outer, {
            const char *p = v->data + index_offset(v, 0, kept, j);
            double acc = 0;
            for (int64_t q = 0; q < nrun; q++)
                acc += row_sum_d(dt, p + index_offset(v, kept, inner_from, q), run, rstride);
            tg_store_f64(od, o + j * osz, kind == R_MEAN ? acc / (double)inner : acc);
        });
        tg_array_free(v);
        return TG_OK;
    }
    const red_kind k = kind;
    const char *base = v->data; /* of the one row, when outer == 1 */
    const char *lo;
    if (!uniform && outer == 1 && inner > 1 &&
        (k == R_MAX || k == R_MIN || k == R_ALL || k == R_ANY ||
         ((k == R_ARGMAX || k == R_ARGMIN) && (dt == TG_FLOAT64 || dt == TG_FLOAT32))) &&
        dense_span(v, isz, &lo)) {
        /* Every element of a permuted (transposed, reversed) dense
         * array: the order does not change these results, so memory is
         * read as one row, in order, without a copy; argmax/argmin map
         * the memory position back to the logical index. */
        if (k == R_ARGMAX || k == R_ARGMIN) {
            *(int64_t *)o = dense_argext(v, dt, isz, lo, inner, k == R_ARGMAX);
            tg_array_free(v);
            return TG_OK;
        }
        base = lo;
        rs = isz;
        uniform = true;
    }
    if (!uniform && outer == 1 && (k == R_SUM || k == R_MEAN) && tg_dtype_is_float(od) &&
        (dt == TG_FLOAT64 || dt == TG_FLOAT32)) {
        /* the copy's sum, without the copy (sum_view_leaves) */
        double s;
        int r = sum_view_leaves(v, inner, inner >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1, &s);
        if (r) {
            tg_array_free(v);
            if (r < 0) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
            tg_store_f64(od, o, k == R_MEAN ? s / (double)inner : s);
            return TG_OK;
        }
    }
    if (!uniform) {
        /* The sums' order is the logical one (see "layouts" above): the
         * view is copied into rows, in tiles where that reads memory in
         * order (but for the sums of sum_view_leaves). */
        const int nthc = outer * inner >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
        c = tg_array_new(dt, v->ndim, v->shape);
        if (c && !copy_tiled(v, c->data, isz, nthc)) {
            tg_array_free(c);
            c = tg_array_copy(v, dt);
        }
        tg_array_free(v);
        if (!c) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        v = c;
        base = v->data;
        rs = isz;
    }
    /* Row start pointers come from the kept axes of v. */
    if (outer == 1) {
        /* One output: split a long row across threads for sums (and the
         * two passes of var and std). */
        if ((k == R_SUM || k == R_MEAN || k == R_VAR || k == R_STD) && tg_dtype_is_float(od) &&
            inner >= TG_PARALLEL_MIN && (dt == TG_FLOAT64 || dt == TG_FLOAT32)) {
            /* RED_CHUNKS pieces whatever the number of threads, added in
             * order: the result does not depend on OMP_NUM_THREADS (one
             * piece per thread gave other last bits for 1, 2 and 3). */
            int nth = omp_get_max_threads();
            double part[RED_CHUNKS] = {0};
            if (nth > RED_CHUNKS) nth = RED_CHUNKS;
            TG_PAR_FOR(nth, t, RED_CHUNKS, {
                int64_t b = inner * t / RED_CHUNKS, e = inner * (t + 1) / RED_CHUNKS;
                part[t] = row_sum_d(dt, base + b * rs, e - b, rs);
            });
            double s = 0;
            for (int t = 0; t < RED_CHUNKS; t++) s += part[t];
            if (k == R_VAR || k == R_STD) {
                double mean = s / (double)inner;
                TG_PAR_FOR(nth, t, RED_CHUNKS, {
                    int64_t b = inner * t / RED_CHUNKS, e = inner * (t + 1) / RED_CHUNKS;
                    part[t] = row_sqdev(dt, base + b * rs, e - b, rs, mean);
                });
                double acc = 0;
                for (int t = 0; t < RED_CHUNKS; t++) acc += part[t];
                double cnt = var_count(inner, ddof);
                s = acc / cnt;
                if (k == R_STD) s = sqrt(s);
            } else if (k == R_MEAN) {
                s /= (double)inner;
            }
            tg_store_f64(od, o, s);
        } else if ((k == R_MAX || k == R_MIN) && inner >= TG_PARALLEL_MIN) {
            /* Each of RED_CHUNKS pieces' extreme (of the input dtype) goes
             * into part, which is then reduced the same way: pieces fixed
             * by the shape, as the sum's, so that which of -0.0 and +0.0
             * a zero extreme is does not depend on OMP_NUM_THREADS (one
             * piece per thread gave -0.0 with 1 to 5 threads and +0.0 with
             * 8 for the same row). */
            int nth = omp_get_max_threads();
            int64_t part[RED_CHUNKS];
            if (nth > RED_CHUNKS) nth = RED_CHUNKS;
            TG_PAR_FOR(nth, t, RED_CHUNKS, {
                int64_t b = inner * t / RED_CHUNKS, e = inner * (t + 1) / RED_CHUNKS;
                row_extreme(dt, base + b * rs, e - b, rs, k == R_MAX, (char *)part + t * isz);
            });
            row_extreme(dt, (const char *)part, RED_CHUNKS, isz, k == R_MAX, o);
        } else if ((k == R_ARGMAX || k == R_ARGMIN) && (dt == TG_FLOAT64 || dt == TG_FLOAT32) &&
                   inner >= TG_PARALLEL_MIN && omp_get_max_threads() > 1) {
            /* Each thread finds its chunk's first extreme; the earliest
             * chunk wins ties, and a NaN wins over any number. */
            int nth = omp_get_max_threads();
            int64_t idx[64];
            if (nth > 64) nth = 64;
#pragma omp parallel for schedule(static) num_threads(nth)
            for (int t = 0; t < nth; t++) {
                int64_t b = inner * t / nth, e = inner * (t + 1) / nth;
                idx[t] = b + row_argext(dt, base + b * rs, e - b, rs, k == R_ARGMAX);
            }
            int64_t best = idx[0];
            for (int t = 1; t < nth; t++) {
                double bv = load_d(dt, base + best * rs), cv = load_d(dt, base + idx[t] * rs);
                if (bv != bv) break;
                if (cv != cv || (k == R_ARGMAX ? cv > bv : cv < bv)) best = idx[t];
            }
            *(int64_t *)o = best;
        } else {
            row_reduce(k, dt, od, ddof, base, inner, rs, o);
        }
    } else {
        int nth = outer * inner >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
        /* Strided rows beside each other in memory: GROUP at a time, along
         * the kept axis of the smallest stride (if smaller than rs). */
        int g = -1;
        int64_t ars = rs < 0 ? -rs : rs;
        if ((dt == TG_FLOAT64 || dt == TG_FLOAT32) && grp_kind(k) && ars != isz && inner > 1 && !c)
            for (int d = 0; d < kept; d++) {
                int64_t a = v->strides[d] < 0 ? -v->strides[d] : v->strides[d];
                if (v->shape[d] > 1 && a < ars && (g < 0 || a < llabs(v->strides[g]))) g = d;
            }
        if (g >= 0) {
            int64_t ng = v->shape[g], after = 1, gs = v->strides[g];
            for (int d = g + 1; d < kept; d++) after *= v->shape[d];
            const int64_t nblk = (ng + GROUP - 1) / GROUP, ntask = outer / ng * nblk;
            TG_PAR_FOR(nth, t, ntask, {
                /* t: (the kept axes before g, the block of g, those after) */
                int64_t ja = t % after, blk = (t / after) % nblk, jb = t / (after * nblk);
                int64_t j0 = (jb * ng + blk * GROUP) * after + ja;
                int gn = (int)(ng - blk * GROUP < GROUP ? ng - blk * GROUP : GROUP);
                grp_reduce(k, dt, od, ddof, v->data + index_offset(v, 0, kept, j0), inner, rs, gs, gn,
                           o + j0 * osz, after * osz);
            });
            tg_array_free(v);
            return TG_OK;
        }
        TG_PAR_FOR(nth, j, outer, {
            /* j over the kept axes (the first `kept` of v) */
            const char *p = v->data + index_offset(v, 0, kept, j);
            row_reduce(k, dt, od, ddof, p, inner, rs, o + j * osz);
        });
    }
    tg_array_free(v);
    return TG_OK;
}

static int red_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const red_impl *im = n->op->impl;
    const tg_array *x = in[0];
    uint32_t mask = n->a.axis_mask;
    int64_t oshape[TG_MAX_NDIM];
    int ond = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!(mask & (1u << d))) oshape[ond++] = x->shape[d];
        else if (n->a.keepdims) oshape[ond++] = 1;
    return reduce_into(im->kind, n->op->name, x, mask, n->outputs[0]->type.dtype, n->a.ddof, ond, oshape, out, ctx);
}

int tg_reduce_sum_into(const tg_array *x, uint32_t mask, tg_dtype od, int ond, const int64_t *oshape, tg_array **out,
                       tg_ctx *ctx) {
    return reduce_into(R_SUM, "sum", x, mask, od, 0, ond, oshape, out, ctx);
}

static void red_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                     double *bytes) {
    (void)n;
    double sz = (double)tg_array_size_inline(in[0]);
    *flops = sz;
    *bytes = sz * (double)tg_dtype_size(in[0]->dtype) +
             (double)tg_array_size_inline(out[0]) * (double)tg_dtype_size(out[0]->dtype);
}

#define RED(NAME, KIND, KEYSET, FLAGS)                                           \
    static const red_impl impl_##NAME = {KIND};                                  \
    const tg_op tg_op_##NAME = {                                                 \
        .name = #NAME,                                                           \
        .nin_min = 1,                                                            \
        .nin_max = 1,                                                            \
        .nout = 1,                                                               \
        .flags = (FLAGS) | TG_OPF_AXIS_SET,                                      \
        .attr_keys = KEYSET,                                                     \
        .parse_attrs = red_attrs,                                                \
        .infer = red_infer,                                                      \
        .run = red_run,                                                          \
        .cost = red_cost,                                                        \
        .view_of = -1,                                                           \
        .impl = &impl_##NAME,                                                    \
        .grad = tg_grad_reduce,                                                  \
    };

RED(sum, R_SUM, KEYS, 0)
RED(prod, R_PROD, KEYS, 0)
RED(mean, R_MEAN, KEYS, TG_OPF_FLOAT_ONLY)
RED(max, R_MAX, KEYS, 0)
RED(min, R_MIN, KEYS, 0)
RED(all, R_ALL, KEYS, TG_OPF_NONDIFF)
RED(any, R_ANY, KEYS, TG_OPF_NONDIFF)
RED(logsumexp, R_LSE, KEYS, TG_OPF_FLOAT_ONLY)
RED(var, R_VAR, VAR_KEYS, TG_OPF_FLOAT_ONLY)
RED(std, R_STD, VAR_KEYS, TG_OPF_FLOAT_ONLY)
RED(argmax, R_ARGMAX, KEYS, TG_OPF_NONDIFF)
RED(argmin, R_ARGMIN, KEYS, TG_OPF_NONDIFF)
