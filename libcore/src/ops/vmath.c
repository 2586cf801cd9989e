/* Vectorised transcendental loops over contiguous float32/float64 data.
 *
 * glibc's libmvec has SIMD versions of exp, log, tanh... (SSE, AVX2 and
 * AVX-512 variants, accurate to a few ulp). Declaring the scalar functions
 * `omp declare simd` lets GCC call them from vectorised loops without
 * -ffast-math, so IEEE semantics (NaN, infinities, signed zeros) stay;
 * target_clones picks the widest variant the CPU has at load time.
 */
#include <math.h>
#if defined(__GNUC__) && !defined(__clang__)
/* One declaration a line: GCC attaches a _Pragma inside a macro expansion
 * to the wrong declaration when two expand on one line, which left every
 * float function (tanhf, expf...) without its simd variants: tanh on
 * float32 ran at 11 ns an element instead of 0.4. */
#pragma omp declare simd notinbranch
double exp(double);
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
double exp2(double);
#pragma omp declare simd notinbranch
float exp2f(float);
#pragma omp declare simd notinbranch
double expm1(double);
#pragma omp declare simd notinbranch
float expm1f(float);
#pragma omp declare simd notinbranch
double log(double);
#pragma omp declare simd notinbranch
float logf(float);
#pragma omp declare simd notinbranch
double log2(double);
#pragma omp declare simd notinbranch
float log2f(float);
#pragma omp declare simd notinbranch
double log10(double);
#pragma omp declare simd notinbranch
float log10f(float);
#pragma omp declare simd notinbranch
double log1p(double);
#pragma omp declare simd notinbranch
float log1pf(float);
#pragma omp declare simd notinbranch
double sin(double);
#pragma omp declare simd notinbranch
float sinf(float);
#pragma omp declare simd notinbranch
double cos(double);
#pragma omp declare simd notinbranch
float cosf(float);
#pragma omp declare simd notinbranch
double tan(double);
#pragma omp declare simd notinbranch
float tanf(float);
#pragma omp declare simd notinbranch
double asin(double);
#pragma omp declare simd notinbranch
float asinf(float);
#pragma omp declare simd notinbranch
double acos(double);
#pragma omp declare simd notinbranch
float acosf(float);
#pragma omp declare simd notinbranch
double atan(double);
#pragma omp declare simd notinbranch
float atanf(float);
#pragma omp declare simd notinbranch
double sinh(double);
#pragma omp declare simd notinbranch
float sinhf(float);
#pragma omp declare simd notinbranch
double cosh(double);
#pragma omp declare simd notinbranch
float coshf(float);
#pragma omp declare simd notinbranch
double tanh(double);
#pragma omp declare simd notinbranch
float tanhf(float);
#pragma omp declare simd notinbranch
double asinh(double);
#pragma omp declare simd notinbranch
float asinhf(float);
#pragma omp declare simd notinbranch
double acosh(double);
#pragma omp declare simd notinbranch
float acoshf(float);
#pragma omp declare simd notinbranch
double atanh(double);
#pragma omp declare simd notinbranch
float atanhf(float);
#pragma omp declare simd notinbranch
double erf(double);
#pragma omp declare simd notinbranch
float erff(float);
#pragma omp declare simd notinbranch
double erfc(double);
#pragma omp declare simd notinbranch
float erfcf(float);
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
/* Other compilers (clang builds the fuzz target): plain loops. */
#define CLONES
#endif

#include <float.h>
#include <stdint.h>
#include <string.h>

#include "ops/vmath.h"

/* ---- the ends of the range ----
 *
 * The functions whose libmvec vector variants are slow at the ends of
 * their range, written so that the vector call never sees such an
 * argument: tg_exp_f, tg_log_d, ..., and sigmoid and softplus, which go
 * through exp(-|x|). (expm1 and tanh are slow only at inf and NaN, and
 * are left as they are; the fused kernels of composite.c call the plain
 * functions, which give the same values (the same bits but in exp's and
 * exp2's subnormal bands and for a subnormal argument of the logarithms,
 * which these compute from its bits within 2 ulp, see below), slowly at
 * the ends.)
 *
 * libmvec hands each lane whose result is not an ordinary number to the
 * scalar function, one lane at a time: exp (and exp2) of float32 below
 * -87.3 or above 88.7, of float64 past +-708, and of +-inf or NaN; the
 * logarithms of 0, negatives, subnormals, inf or NaN. Those lanes cost
 * 3-65 ns each instead of 0.3-1.4 (the causal mask of an attention layer,
 * -1e9 or -inf before its softmax, made half of that softmax's exps that
 * slow). Here a lane whose result is known (0, inf, -inf, NaN: exactly
 * what the scalar function returns for it) goes through the vector call
 * as a harmless 0 or 1 and takes the known result by a select.
 *
 * The band where exp's result is subnormal (float32: -104 to -87.3,
 * float64: -745.1 to -708.4; exp2's: -150 to -126, -1075 to -1022)
 * is scaled into the vector function's ordinary range: exp(v) =
 * exp(v + C) * 2^-M (1 + c), with C the number nearest M ln 2 (float64:
 * M = 1000, float32: M = 64), so that v + C is exact (both are multiples
 * of v's ulp, and their sum is below 64 in magnitude), and c = M ln 2 - C
 * its rounding error (exp(c) = 1 + c to far below an ulp); exp2(v) =
 * exp2(v + M) 2^-M. The scaling by 2^-M is the one rounding into the
 * subnormal range, done on the bits (GUARD_EXP). Within 2 ulp of the true
 * value, as libmvec's own results (the scalar fallback rounds correctly:
 * the two differ by an ulp for 9% of the band's float64 arguments):
 * float64 exp over the band 1.6 ns an element instead of 14.8 (one
 * thread), sigmoid 2.2 instead of 21.8. libmvec's log hands subnormal
 * arguments to the fallback too (45-50 ns an element), and so do log2 and
 * log10 in its AVX2 variants; GUARD_LOG moves them up (2-3 ns). log1p of
 * a subnormal is still the fallback's (39 ns), but in softplus.
 *
 * NaN comes out as `v + v` (the input, quieted, its sign and payload
 * kept), and the NaN of a domain error as glibc's scalar functions make
 * it, so every result has the bits it had when libmvec's fallback made it
 * (checked over every float32 and 2^28 float64s against the plain vector
 * loops, NaN payloads included), but for the sign of softplus(NaN): GCC
 * folds -|x| + -|x| without keeping a NaN's sign.
 *
 * Thresholds: exp(x) rounds to 0 below log(2^-150) = -103.97 (float32)
 * and log(2^-1075) = -745.13 (float64), to inf above log(FLT_MAX) = 88.72
 * and log(DBL_MAX) = 709.78; exp2 below -150 and -1075, and at 128 and
 * 1024. */

/* tg_pick_N, and what the functions give past their ends; N: the suffix
 * of the helpers made (f or d). */
#define GUARD_BASE(T, U, N)                                               \
    /* keep ? v : other, by masks: a ?: here would be a branch on a       \
     * condition that the result's select tests again, and GCC's jump     \
     * threading then splits the call into one per side, calling the      \
     * vector function on v after all. */                                 \
    static inline T tg_pick_##N(U keep, T v, T other) {                   \
        union { T f; U u; } a = {v}, b = {other};                         \
        U m = (U)0 - keep;                                                \
        a.u = (a.u & m) | (b.u & ~m);                                     \
        return a.f;                                                       \
    }                                                                     \
    static inline U tg_bits_##N(T v) {                                    \
        union { T f; U u; } a = {v};                                      \
        return a.u;                                                       \
    }                                                                     \
    static inline T tg_from_bits_##N(U u) {                               \
        union { U u; T f; } a = {u};                                      \
        return a.f;                                                       \
    }                                                                     \
    /* (Every value and comparison a select uses is computed first: GCC   \
     * does not if-convert a floating-point operation or comparison that  \
     * runs under a condition (it may trap) for AVX2, which has no masked \
     * arithmetic, and the loop then stayed scalar, scalar libm and all.) \
     * What exp and exp2 give past their ends: 0, inf, NaN. */            \
    static inline T tg_exp_tail_##N(T v) {                                \
        T nan = v + v;                                                    \
        int gt = v > 0, lt = v < 0;                                       \
        return gt ? (T)INFINITY : lt ? (T)0 : nan;                        \
    }                                                                     \
    /* The logarithms at the end of their domain `at` (-inf), below it    \
     * (NaN, made as glibc makes it: (v - v) / (v - v) in log, log2 and   \
     * log1p, the positive quiet NaN in log10), at inf and NaN            \
     * (themselves). */                                                   \
    static inline T tg_log_tail_##N(T v, T at, int plus_nan) {            \
        T same = v + v, dom = plus_nan ? (T)NAN : (v - v) / (v - v);      \
        int eq = v == at, below = v < at;                                 \
        return eq ? -(T)INFINITY : !below ? same : dom;                   \
    }

/* tg_F_N(v): exp or exp2 (F), the vector call on v where v is in
 * [LO, HI] (NaN never is), else on 0, times a factor that is 1 where v
 * went through: one operation follows the call.
 * tg_F_sub_N(v), for stretches that hold an argument below SUB (where the
 * result may be subnormal): there the call is on v + C, and its result
 * q = p (1 + CLO) is scaled by 2^-M without a multiplication: a product
 * or quotient whose operand or result is subnormal costs a microcode
 * assist (5.7 ns a vector here), a sum does not. The subnormal's bits are
 * the integer nearest q 2^(M + MIN) (MIN: the exponent of the least
 * subnormal, 1074 or 149; UP = 2^(MIN - M)), rounded as IEEE rounds (to
 * even) by adding MAGIC = 2^MANT, whose bits are then subtracted; a normal
 * result is q with M taken from its exponent. Every operation's operands
 * are harmless where its result is not used (1 for q where v is not below
 * SUB), and the result is picked rather than multiplied. The same bits as
 * tg_F_N but below SUB, at a third more time. */
#define GUARD_EXP(T, U, S, N, F, LO, HI, SUB, C, CLO, M, UP, MAGIC, MANT)          \
    static inline T tg_##F##_##N(T v) {                                            \
        U keep = (U)(v >= LO) & (U)(v <= HI);                                      \
        T f = tg_pick_##N(keep, (T)1, tg_exp_tail_##N(v));                         \
        return F##S(tg_pick_##N(keep, v, (T)0)) * f;                               \
    }                                                                              \
    static inline T tg_##F##_sub_##N(T v) {                                        \
        U keep = (U)(v >= LO) & (U)(v <= HI), sub = (U)(v < SUB);                  \
        T tail = tg_exp_tail_##N(tg_pick_##N(keep, (T)1, v));                      \
        T p = F##S(tg_pick_##N(keep, tg_pick_##N(sub, v + (T)(C), v), (T)0));      \
        T qs = tg_pick_##N(sub, p, (T)1), q = qs + qs * (T)(CLO), u = q * (T)(UP); \
        U small = (U)(u < (T)(MAGIC));                                             \
        U sb = tg_bits_##N(u + (T)(MAGIC)) - tg_bits_##N((T)(MAGIC));              \
        U nb = tg_bits_##N(q) - ((U)(M) << MANT);                                  \
        T scaled = tg_from_bits_##N(small ? sb : nb);                              \
        return tg_pick_##N(keep, tg_pick_##N(sub, scaled, p), tail);               \
    }

/* tg_F_N(v): a logarithm whose domain ends at AT (0, or -1 for log1p),
 * the vector call on v inside it, else on AT + 1, plus a term that is -0
 * where v went through.
 * tg_F_sub_N(v), for stretches that hold a subnormal: where SUBN is set
 * (not log1p), a subnormal v (below NMIN, the least normal number; its
 * bits the integer k, v = k 2^-MIN) goes through as k, made exactly by the
 * bits of MAGIC = 2^MANT + k less 2^MANT, and
 * the result F(k) - F(2^MIN) is F(k) plus KLO, plus KHI (-F(2^MIN) split
 * in two: its nearest number and the rest); elsewhere both are -0, which
 * adds nothing. The tail is computed on inf where v keeps: GCC makes its
 * v + v a product by 2, which costs an assist on a subnormal v. */
#define GUARD_LOG(T, U, S, N, F, AT, PLUS_NAN, SUBN, NMIN, MAGIC, KHI, KLO)                   \
    static inline T tg_##F##_##N(T v) {                                                       \
        U keep = (U)(v > AT) & (U)(v < (T)INFINITY);                                          \
        T f = tg_pick_##N(keep, (T)-0.0, tg_log_tail_##N(v, AT, PLUS_NAN));                   \
        return F##S(tg_pick_##N(keep, v, (T)(AT + 1))) + f;                                   \
    }                                                                                         \
    static inline T tg_##F##_sub_##N(T v) {                                                   \
        U keep = (U)(v > AT) & (U)(v < (T)INFINITY);                                          \
        U sub = (U)(SUBN) & (U)(v > 0) & (U)(v < (NMIN));                                     \
        T tv = tg_pick_##N(keep, (T)INFINITY, v);                                             \
        T f = tg_pick_##N(keep, (T)-0.0, tg_log_tail_##N(tv, AT, PLUS_NAN));                  \
        T k = tg_from_bits_##N(tg_bits_##N(v) | tg_bits_##N(MAGIC)) - (MAGIC);                \
        T r = F##S(tg_pick_##N(keep, tg_pick_##N(sub, k, v), (T)(AT + 1)));                   \
        T lo = tg_pick_##N(sub, (T)(KLO), (T)-0.0), hi = tg_pick_##N(sub, (T)(KHI), (T)-0.0); \
        return ((r + lo) + hi) + f;                                                           \
    }

/* T: the C type; U: the unsigned integer of its size; S: the suffix of its
 * libm functions ("f" or nothing); ELO, EHI: bounds past which exp is
 * exactly 0 and inf, ESUB the bound below which it may be subnormal;
 * E2LO, E2HI, E2SUB: the same for exp2; M: the power of 2 that scales
 * the subnormal band, C and CLO: M ln 2 rounded and its rounding error,
 * UP, MAGIC and MANT: 2^(MIN - M), 2^MANT and the mantissa's width (see
 * GUARD_EXP); TINY: below it log1p(e) rounds to e, and 1 + e to 1; NMIN:
 * the least normal number; LNHI and LNLO, L2HI, LGHI and LGLO: -MIN ln 2, -MIN and -MIN log10 2 (MIN:
 * the exponent of the least subnormal, 1074 or 149), each as its nearest
 * number and the rest (GUARD_LOG). */
#define GUARDED(T, U, S, N, ELO, EHI, ESUB, E2LO, E2HI, E2SUB, M, C, CLO, UP, MAGIC, MANT, TINY, NMIN, LNHI, \
                LNLO, L2HI, LGHI, LGLO)                                                                      \
    GUARD_BASE(T, U, N)                                                                                      \
    GUARD_EXP(T, U, S, N, exp, ELO, EHI, ESUB, C, CLO, M, UP, MAGIC, MANT)                                   \
    GUARD_EXP(T, U, S, N, exp2, E2LO, E2HI, E2SUB, M, 0, M, UP, MAGIC, MANT)                                 \
    GUARD_LOG(T, U, S, N, log, 0, 0, 1, NMIN, MAGIC, LNHI, LNLO)                                             \
    GUARD_LOG(T, U, S, N, log2, 0, 0, 1, NMIN, MAGIC, L2HI, 0)                                               \
    GUARD_LOG(T, U, S, N, log10, 0, 1, 1, NMIN, MAGIC, LGHI, LGLO)                                           \
    GUARD_LOG(T, U, S, N, log1p, -1, 0, 0, NMIN, MAGIC, 0, 0)                                                \
    /* sigmoid and softplus, stable at both tails and branch-free so that                                    \
     * they vectorise, from e = exp(-|x|): sigmoid is 1/(1+e) for x >= 0                                     \
     * and e/(1+e) below, softplus max(x, 0) + log1p(e). The _sub forms,                                     \
     * for stretches where e may be subnormal, take e/(1+e) and log1p(e)                                     \
     * as e itself below TINY (1 + e rounds to 1, e - e^2/2 to e): neither                                   \
     * a product with a subnormal (an assist) nor libmvec's log1p of it                                      \
     * (its scalar fallback). The _raw forms call exp and log1p as they                                      \
     * are (for arguments whose e is normal). */                                                             \
    /* (tiny: e is below TINY; 0 where e cannot be, folded away) */                                          \
    static inline T tg_sigmoid_of_##N(T v, T e, U tiny) {                                                    \
        T r = (T)1 / ((T)1 + e), er = tg_pick_##N(tiny, e, tg_pick_##N(tiny, (T)0, e) * r);                  \
        int ge = v >= 0, lt = v < 0;                                                                         \
        return ge ? r : (lt ? er : v);                                                                       \
    }                                                                                                        \
    static inline T tg_sigmoid_raw_##N(T v) { return tg_sigmoid_of_##N(v, exp##S(-fabs##S(v)), 0); }         \
    static inline T tg_sigmoid_##N(T v) { return tg_sigmoid_of_##N(v, tg_exp_##N(-fabs##S(v)), 0); }         \
    static inline T tg_sigmoid_sub_##N(T v) {                                                                \
        T e = tg_exp_sub_##N(-fabs##S(v));                                                                   \
        return tg_sigmoid_of_##N(v, e, (U)(e < (T)(TINY)));                                                  \
    }                                                                                                        \
    /* (fabs: the sum is never negative, but a NaN takes the sign of                                         \
     * -|v| or not as GCC folds each form: the sign bit is cleared in all)                                   \
     */                                                                                                      \
    static inline T tg_softplus_of_##N(T v, T e, U tiny) {                                                   \
        return fabs##S((v > 0 ? v : 0) + tg_pick_##N(tiny, e, tg_log1p_##N(tg_pick_##N(tiny, (T)0, e))));    \
    }                                                                                                        \
    static inline T tg_softplus_raw_##N(T v) { return fabs##S((v > 0 ? v : 0) + log1p##S(exp##S(-fabs##S(v)))); } \
    static inline T tg_softplus_##N(T v) { return tg_softplus_of_##N(v, tg_exp_##N(-fabs##S(v)), 0); }       \
    static inline T tg_softplus_sub_##N(T v) {                                                               \
        T e = tg_exp_sub_##N(-fabs##S(v));                                                                   \
        return tg_softplus_of_##N(v, e, (U)(e < (T)(TINY)));                                                 \
    }

#define F32_EXP_LO (-104.0f)
#define F32_EXP_HI 89.0f
#define F32_EXP_SUB (-87.0f)
#define F32_EXP2_LO (-151.0f)
#define F32_EXP2_HI 128.0f
#define F32_EXP2_SUB (-126.0f)
#define F64_EXP_LO (-746.0)
#define F64_EXP_HI 710.0
#define F64_EXP_SUB (-708.0)
#define F64_EXP2_LO (-1076.0)
#define F64_EXP2_HI 1024.0
#define F64_EXP2_SUB (-1022.0)
/* 64 ln 2 = 0x1.62e42fefa39ef358p+5: 0x1.62e43p+5f and the rest;
 * 1000 ln 2 = 0x1.5a92d6d005c939a8p+9: 0x1.5a92d6d005c94p+9 and the rest;
 * 149 ln 2, 1074 ln 2, 149 log10 2 and 1074 log10 2 likewise. */
GUARDED(float, uint32_t, f, f, F32_EXP_LO, F32_EXP_HI, F32_EXP_SUB, F32_EXP2_LO, F32_EXP2_HI, F32_EXP2_SUB, 64,
        0x1.62e43p+5f, -0x1.05c61p-23f, 0x1p85f, 0x1p23f, 23, 0x1p-30f, FLT_MIN, -0x1.9d1dap+6f, 0x1.985c48p-21f, -149.0f,
        -0x1.66d3e8p+5f, 0x1.0997p-21f)
GUARDED(double, uint64_t, , d, F64_EXP_LO, F64_EXP_HI, F64_EXP_SUB, F64_EXP2_LO, F64_EXP2_HI, F64_EXP2_SUB, 1000,
        0x1.5a92d6d005c94p+9, -0x1.971e6bd14ec61p-45, 0x1p74, 0x1p52, 52, 0x1p-60, DBL_MIN, -0x1.74385446d71c3p+9,
        -0x1.8e569fa8ee781p-45, -1074.0, -0x1.434e6420f4374p+8, 0x1.a0fae8e2e61bep-48)

/* y[i] = EXPR(v), v = x[i], for i < n, every element through the vector
 * body: blocks of VB with a constant trip count, and a tail shorter than
 * VB through a zero-padded copy. A loop over n would leave its last n %
 * width elements to a scalar epilogue calling scalar libm, which rounds
 * differently from libmvec: an element's value depended on its distance
 * from the end of the array, so on the array's length, on how a parallel
 * loop split it, and (the callers' strided paths gather into blocks) on
 * its layout. Now it depends on the element alone. VB is a multiple of
 * every vector width (16 floats in a zmm register). */
enum { VB = 16 };
/* yb[k] = EXPR(v), v = xb[k], for the VB elements of one block. */
#define VBLOCK(T, xb, yb, EXPR)                                               \
    _Pragma("omp simd") for (int k_ = 0; k_ < VB; k_++) {                     \
        T v = (xb)[k_];                                                       \
        (yb)[k_] = (EXPR);                                                    \
    }
/* The last n - b_ < VB elements through a zero-padded block. */
#define VTAIL(T, EXPR)                                                        \
    if (b_ < n) {                                                             \
        T xt_[VB] = {0}, yt_[VB];                                             \
        for (int64_t k_ = b_; k_ < n; k_++) xt_[k_ - b_] = x[k_];             \
        VBLOCK(T, xt_, yt_, EXPR)                                             \
        for (int64_t k_ = b_; k_ < n; k_++) y[k_] = yt_[k_ - b_];             \
    }
#define VAPPLY(T, EXPR)                                                       \
    do {                                                                      \
        int64_t b_ = 0;                                                       \
        for (; b_ + VB <= n; b_ += VB) {                                      \
            const T *xb_ = x + b_;                                            \
            T *yb_ = y + b_;                                                  \
            VBLOCK(T, xb_, yb_, EXPR)                                         \
        }                                                                     \
        VTAIL(T, EXPR)                                                        \
    } while (0)

#define VLOOP(NAME, F)                                                        \
    CLONES void tg_vm_##NAME##_f64(int64_t n, const double *restrict x,       \
                                   double *restrict y) {                      \
        VAPPLY(double, F(v));                                                 \
    }                                                                         \
    CLONES void tg_vm_##NAME##_f32(int64_t n, const float *restrict x,        \
                                   float *restrict y) {                       \
        VAPPLY(float, F##f(v));                                               \
    }

/* The guarded functions: each stretch of up to GB elements through
 * the vector function as it is when every argument keeps, and through
 * the guarded form (the same bits for those that keep) when one may not.
 * The test is a maximum of the bits: KEY(u), u the element's bits as an
 * unsigned integer, is at most LIMIT for every element only if each
 * keeps (some that keep may fail it: they take the guarded form, which
 * is right for every argument). Two or three integer operations a
 * vector, no branch, over data then in the L1 cache: 5-15% of the plain
 * call on data in the cache, up to 25% for the cheapest functions (exp2
 * and log2 of float32); the guarded form costs a fifth to a half more
 * than the plain call. The keys order the arguments in three classes:
 * those that keep (KEY(u) <= LIMIT), those the guarded form takes (up to
 * BANDLIM), and those that need the _sub form (above: where exp is
 * subnormal, a subnormal for the logarithms), so that the one maximum
 * says which form a stretch needs: the _sub forms cost a third more, and
 * a second test of each stretch had cost 10% of a float32 exp on masked
 * scores. FAST, SAFE and SAFEB are expressions of v. */
enum { GB = 16 * VB };
#define GAPPLY(T, U, KEY, LIMIT, BANDLIM, FAST, SAFE, SAFEB)    \
    do {                                                        \
        int64_t b_ = 0;                                         \
        while (b_ + VB <= n) {                                  \
            int64_t c_ = n - b_ < GB ? (n - b_) / VB * VB : GB; \
            const T *xb_ = x + b_;                              \
            T *yb_ = y + b_;                                    \
            U key_ = 0;                                         \
            for (int64_t k_ = 0; k_ < c_; k_++) {               \
                U u;                                            \
                memcpy(&u, xb_ + k_, sizeof u);                 \
                U t_ = (KEY);                                   \
                key_ = t_ > key_ ? t_ : key_;                   \
            }                                                   \
            if (key_ <= (LIMIT)) {                              \
                for (int64_t o_ = 0; o_ < c_; o_ += VB) {       \
                    VBLOCK(T, xb_ + o_, yb_ + o_, FAST)         \
                }                                               \
            } else if (key_ <= (BANDLIM)) {                     \
                for (int64_t o_ = 0; o_ < c_; o_ += VB) {       \
                    VBLOCK(T, xb_ + o_, yb_ + o_, SAFE)         \
                }                                               \
            } else {                                            \
                for (int64_t o_ = 0; o_ < c_; o_ += VB) {       \
                    VBLOCK(T, xb_ + o_, yb_ + o_, SAFEB)        \
                }                                               \
            }                                                   \
            b_ += c_;                                           \
        }                                                       \
        VTAIL(T, SAFEB)                                         \
    } while (0)

/* Keys. ABSR(u, A): A less |v|'s bits, wrapping: |v| <= A (whose bits
 * are A) first, in order, then from the top down, NaN, inf and those
 * above B, then those in (A, B], the highest: exp, exp2, sigmoid and
 * softplus, with A their limit for the plain call and B the end of exp's
 * subnormal band (its mirror, positive, goes to the _sub form too, which
 * takes every argument). NRM: u less the bits of the least normal
 * number, wrapping: the normal positive numbers first, then inf, NaN,
 * the negatives and +0, then the subnormals, the highest: the
 * logarithms, since libmvec hands a subnormal to its scalar fallback,
 * 40-50 ns, but for log2 and log10 in its AVX-512 variants. GTM1: -1 < v
 * < inf, negatives moved up by the distance from 1's bits to inf's
 * (0x7f800000 - 0x3f800000 in float32); log1p has no band. */
#define ABS32(u) ((u) & 0x7fffffffu)
#define ABS64(u) ((u) & 0x7fffffffffffffffull)
#define ABSR32(u, A) (tg_bits_f(A) - ABS32(u))
#define ABSR64(u, A) (tg_bits_d(A) - ABS64(u))
#define NRM32(u) ((u) - 0x00800000u)
#define NRM64(u) ((u) - 0x0010000000000000ull)
#define GTM1_32(u) (ABS32(u) + ((u) >> 31) * 0x40000000u)
#define GTM1_64(u) (ABS64(u) + ((u) >> 63) * 0x4000000000000000ull)

/* K: the key, L its limit, BL the band's (see the keys), of each type. */
#define GLOOP(NAME, K32, L32, BL32, K64, L64, BL64, FAST32, FAST64)                                  \
    CLONES void tg_vm_##NAME##_f64(int64_t n, const double *restrict x, double *restrict y) {        \
        GAPPLY(double, uint64_t, K64, L64, BL64, FAST64(v), tg_##NAME##_d(v), tg_##NAME##_sub_d(v)); \
    }                                                                                                \
    CLONES void tg_vm_##NAME##_f32(int64_t n, const float *restrict x, float *restrict y) {          \
        GAPPLY(float, uint32_t, K32, L32, BL32, FAST32(v), tg_##NAME##_f(v), tg_##NAME##_sub_f(v));  \
    }
/* The keys, limits and band limits of exp (exp2) and what goes through
 * exp(-|x|): plain below -SUB, the band up to -LO. */
#define EXPK(NAME, FAST32, FAST64, SUB32, LO32, SUB64, LO64)                                                           \
    GLOOP(NAME, ABSR32(u, -(SUB32)), tg_bits_f(-(SUB32)), (uint32_t)(tg_bits_f(-(SUB32)) - tg_bits_f(-(LO32)) - 1u),   \
          ABSR64(u, -(SUB64)), tg_bits_d(-(SUB64)), (uint64_t)(tg_bits_d(-(SUB64)) - tg_bits_d(-(LO64)) - 1u), FAST32, \
          FAST64)
#define LOGK(NAME, FAST32, FAST64)                                                                    \
    GLOOP(NAME, NRM32(u), tg_bits_f(FLT_MAX) - tg_bits_f(FLT_MIN), 0u - tg_bits_f(FLT_MIN), NRM64(u), \
          tg_bits_d(DBL_MAX) - tg_bits_d(DBL_MIN), 0ull - tg_bits_d(DBL_MIN), FAST32, FAST64)
EXPK(exp, expf, exp, F32_EXP_SUB, F32_EXP_LO, F64_EXP_SUB, F64_EXP_LO)
EXPK(exp2, exp2f, exp2, F32_EXP2_SUB, F32_EXP2_LO, F64_EXP2_SUB, F64_EXP2_LO)
VLOOP(expm1, expm1)
LOGK(log, logf, log)
LOGK(log2, log2f, log2)
LOGK(log10, log10f, log10)
GLOOP(log1p, GTM1_32(u), tg_bits_f(FLT_MAX), UINT32_MAX, GTM1_64(u), tg_bits_d(DBL_MAX), UINT64_MAX, log1pf, log1p)
VLOOP(sin, sin)
VLOOP(cos, cos)
VLOOP(tan, tan)
VLOOP(arcsin, asin)
VLOOP(arccos, acos)
VLOOP(arctan, atan)
VLOOP(sinh, sinh)
VLOOP(cosh, cosh)
VLOOP(tanh, tanh)
VLOOP(arcsinh, asinh)
VLOOP(arccosh, acosh)
VLOOP(arctanh, atanh)
VLOOP(erf, erf)
VLOOP(erfc, erfc)

/* sigmoid and softplus (their forms above), stable at both tails and
 * branch-free so that they vectorise. */
EXPK(sigmoid, tg_sigmoid_raw_f, tg_sigmoid_raw_d, F32_EXP_SUB, F32_EXP_LO, F64_EXP_SUB, F64_EXP_LO)
EXPK(softplus, tg_softplus_raw_f, tg_softplus_raw_d, F32_EXP_SUB, F32_EXP_LO, F64_EXP_SUB, F64_EXP_LO)

/* sqrt and 1/x vectorise to single instructions (no libmvec). */
VLOOP(sqrt, sqrt)
CLONES void tg_vm_reciprocal_f64(int64_t n, const double *restrict x, double *restrict y) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = 1.0 / x[i];
}
CLONES void tg_vm_reciprocal_f32(int64_t n, const float *restrict x, float *restrict y) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / x[i];
}
