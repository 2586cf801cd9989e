/* Private: vectorised transcendental loops (vmath.c) over contiguous
 * data: y[i] = f(x[i]) for i < n. */
#ifndef TG_VMATH_H
#define TG_VMATH_H

#include <stdint.h>

/* A function in one variant per vector width, the CPU's picked at load
 * time (GCC's target_clones); other compilers (clang builds the fuzz
 * targets) get the plain function. */
#if defined(__GNUC__) && !defined(__clang__)
#define TG_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TG_CLONES
#endif

#define TG_VMATH_OPS(X)                                                      \
    X(exp) X(exp2) X(expm1) X(log) X(log2) X(log10) X(log1p) X(sin) X(cos)   \
    X(tan) X(arcsin) X(arccos) X(arctan) X(sinh) X(cosh) X(tanh) X(arcsinh)  \
    X(arccosh) X(arctanh) X(erf) X(erfc) X(sigmoid) X(softplus) X(sqrt)     \
    X(reciprocal)

#define TG_VMATH_PROTO(NAME)                                                 \
    void tg_vm_##NAME##_f64(int64_t n, const double *x, double *y);          \
    void tg_vm_##NAME##_f32(int64_t n, const float *x, float *y);
TG_VMATH_OPS(TG_VMATH_PROTO)
#undef TG_VMATH_PROTO

#endif
