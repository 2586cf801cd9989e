/* Vectorised transcendental loops over contiguous float32/float64 data.
 *
 * glibc's libmvec has SIMD versions of exp, log, tanh... (SSE, AVX2 and
 * AVX-512 variants, accurate to a few ulp). Declaring the scalar functions
 * `omp declare simd` lets GCC call them from vectorised loops without
 * -ffast-math, so IEEE semantics (NaN, infinities, signed zeros) stay;
 * target_clones picks the widest variant the CPU has at load time.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define TG_VMATH_DECLARE(f)                                                   \
    _Pragma("omp declare simd notinbranch") double f(double);                 \
    _Pragma("omp declare simd notinbranch") float f##f(float);
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
/* Other compilers (clang builds the fuzz target): plain loops. */
#define TG_VMATH_DECLARE(f)
#define CLONES
#endif
TG_VMATH_DECLARE(exp)
TG_VMATH_DECLARE(exp2)
TG_VMATH_DECLARE(expm1)
TG_VMATH_DECLARE(log)
TG_VMATH_DECLARE(log2)
TG_VMATH_DECLARE(log10)
TG_VMATH_DECLARE(log1p)
TG_VMATH_DECLARE(sin)
TG_VMATH_DECLARE(cos)
TG_VMATH_DECLARE(tan)
TG_VMATH_DECLARE(asin)
TG_VMATH_DECLARE(acos)
TG_VMATH_DECLARE(atan)
TG_VMATH_DECLARE(sinh)
TG_VMATH_DECLARE(cosh)
TG_VMATH_DECLARE(tanh)
TG_VMATH_DECLARE(asinh)
TG_VMATH_DECLARE(acosh)
TG_VMATH_DECLARE(atanh)
TG_VMATH_DECLARE(erf)
TG_VMATH_DECLARE(erfc)

#include <math.h>
#include <stdint.h>

#include "ops/vmath.h"

#define VLOOP(NAME, F)                                                        \
    CLONES void tg_vm_##NAME##_f64(int64_t n, const double *restrict x,       \
                                   double *restrict y) {                      \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = F(x[i]);   \
    }                                                                         \
    CLONES void tg_vm_##NAME##_f32(int64_t n, const float *restrict x,        \
                                   float *restrict y) {                       \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = F##f(x[i]); \
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
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        double e = exp(-fabs(x[i])), r = 1.0 / (1.0 + e);
        y[i] = x[i] >= 0 ? r : (x[i] < 0 ? e * r : x[i]);
    }
}
CLONES void tg_vm_sigmoid_f32(int64_t n, const float *restrict x, float *restrict y) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float e = expf(-fabsf(x[i])), r = 1.0f / (1.0f + e);
        y[i] = x[i] >= 0 ? r : (x[i] < 0 ? e * r : x[i]);
    }
}
CLONES void tg_vm_softplus_f64(int64_t n, const double *restrict x, double *restrict y) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] > 0 ? x[i] : 0) + log1p(exp(-fabs(x[i])));
}
CLONES void tg_vm_softplus_f32(int64_t n, const float *restrict x, float *restrict y) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] > 0 ? x[i] : 0) + log1pf(expf(-fabsf(x[i])));
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
