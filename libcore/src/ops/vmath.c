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

#include <stdint.h>

#include "ops/vmath.h"

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
#define VAPPLY(T, EXPR)                                                       \
    do {                                                                      \
        int64_t b_ = 0;                                                       \
        for (; b_ + VB <= n; b_ += VB) {                                      \
            const T *xb_ = x + b_;                                            \
            T *yb_ = y + b_;                                                  \
            _Pragma("omp simd") for (int k_ = 0; k_ < VB; k_++) {             \
                T v = xb_[k_];                                                \
                yb_[k_] = (EXPR);                                             \
            }                                                                 \
        }                                                                     \
        if (b_ < n) {                                                         \
            T xt_[VB] = {0}, yt_[VB];                                         \
            for (int64_t k_ = b_; k_ < n; k_++) xt_[k_ - b_] = x[k_];         \
            _Pragma("omp simd") for (int k_ = 0; k_ < VB; k_++) {             \
                T v = xt_[k_];                                                \
                yt_[k_] = (EXPR);                                             \
            }                                                                 \
            for (int64_t k_ = b_; k_ < n; k_++) y[k_] = yt_[k_ - b_];         \
        }                                                                     \
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
VLOOP(exp, exp)
VLOOP(exp2, exp2)
VLOOP(expm1, expm1)
VLOOP(log, log)
VLOOP(log2, log2)
VLOOP(log10, log10)
VLOOP(log1p, log1p)
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

/* sigmoid and softplus, stable at both tails, branch-free so that they
 * vectorise: with e = exp(-|x|), sigmoid = 1/(1+e) for x >= 0 and
 * e/(1+e) below; softplus = max(x, 0) + log1p(e). */
CLONES void tg_vm_sigmoid_f64(int64_t n, const double *restrict x, double *restrict y) {
    VAPPLY(double, ({
               double e = exp(-fabs(v)), r = 1.0 / (1.0 + e);
               v >= 0 ? r : (v < 0 ? e * r : v);
           }));
}
CLONES void tg_vm_sigmoid_f32(int64_t n, const float *restrict x, float *restrict y) {
    VAPPLY(float, ({
               float e = expf(-fabsf(v)), r = 1.0f / (1.0f + e);
               v >= 0 ? r : (v < 0 ? e * r : v);
           }));
}
CLONES void tg_vm_softplus_f64(int64_t n, const double *restrict x, double *restrict y) {
    VAPPLY(double, (v > 0 ? v : 0) + log1p(exp(-fabs(v))));
}
CLONES void tg_vm_softplus_f32(int64_t n, const float *restrict x, float *restrict y) {
    VAPPLY(float, (v > 0 ? v : 0) + log1pf(expf(-fabsf(v))));
}

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
