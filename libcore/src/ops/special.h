/* Private: digamma and trigamma, one text for the library and the
 * kernels.
 *
 * TG_SPECIAL_FNS(Q) defines tg_digamma and tg_trigamma, each qualified by
 * Q: elemwise.c compiles it (Q "static inline"), and the preludes of the
 * generated kernels take it as source text, TG_SPECIAL_TEXT(Q) (the
 * CPU's with Q "static __attribute__((noinline))", NVRTC's with its
 * device qualifier), so that a fused digamma computes what the unfused
 * op computes, step for step. The text has no preprocessor lines and no
 * names of math.h's macros: pi is written out (M_PI's digits), NaN and
 * infinity are GCC's builtins, which NVRTC's prelude defines.
 *
 * digamma, the derivative of gammaln (the gradient of gammaln needs it):
 * reflection below 0, the recurrence psi(x) = psi(x + 1) - 1/x up to 10,
 * then the asymptotic series; accurate to a few ulp.
 *
 * trigamma, the derivative of digamma (the gradient of digamma, so the
 * second derivative of gammaln, needs it): reflection below 0,
 * psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x); the recurrence
 * psi1(x) = psi1(x + 1) + 1/x^2 up to 10; then the asymptotic series
 * 1/x + 1/(2x^2) + sum B_2k / x^(2k+1). The poles (0, -1, -2, ...) are
 * +inf: both sides go there. */
#ifndef TG_OPS_SPECIAL_H
#define TG_OPS_SPECIAL_H

#define TG_SPECIAL_FNS(Q)                                                                              \
    Q double tg_digamma(double x) {                                                                    \
        if (x != x || x == -__builtin_inf()) return __builtin_nan("");                                 \
        if (x == __builtin_inf()) return __builtin_inf();                                              \
        double r = 0;                                                                                  \
        if (x <= 0) {                                                                                  \
            if (x == floor(x)) return __builtin_nan("");                                               \
            r = -3.14159265358979323846 / tan(3.14159265358979323846 * x);                             \
            x = 1 - x;                                                                                 \
        }                                                                                              \
        while (x < 10) {                                                                               \
            r -= 1 / x;                                                                                \
            x += 1;                                                                                    \
        }                                                                                              \
        double f = 1 / (x * x);                                                                        \
        return r + log(x) - 0.5 / x -                                                                  \
               f * (1.0 / 12 -                                                                         \
                    f * (1.0 / 120 -                                                                   \
                         f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132 - f * (691.0 / 32760 - f / 12)))))); \
    }                                                                                                  \
    Q double tg_trigamma(double x) {                                                                   \
        if (x != x || x == -__builtin_inf()) return __builtin_nan("");                                 \
        if (x == __builtin_inf()) return 0;                                                            \
        double r = 0, sign = 1;                                                                        \
        if (x <= 0) {                                                                                  \
            if (x == floor(x)) return __builtin_inf();                                                 \
            double s = sin(3.14159265358979323846 * x);                                                \
            r = 3.14159265358979323846 * 3.14159265358979323846 / (s * s);                             \
            sign = -1;                                                                                 \
            x = 1 - x;                                                                                 \
        }                                                                                              \
        double t = 0;                                                                                  \
        while (x < 10) {                                                                               \
            t += 1 / (x * x);                                                                          \
            x += 1;                                                                                    \
        }                                                                                              \
        double f = 1 / (x * x);                                                                        \
        t += 1 / x + 0.5 * f +                                                                         \
             f / x *                                                                                   \
                 (1.0 / 6 -                                                                            \
                  f * (1.0 / 30 - f * (1.0 / 42 - f * (1.0 / 30 - f * (5.0 / 66 - f * (691.0 / 2730 - f * 7.0 / 6)))))); \
        return r + sign * t;                                                                           \
    }

/* (two steps: the argument of # is not expanded) */
#define TG_SPECIAL_STR_(...) #__VA_ARGS__
#define TG_SPECIAL_STR(...) TG_SPECIAL_STR_(__VA_ARGS__)
#define TG_SPECIAL_TEXT(Q) TG_SPECIAL_STR(TG_SPECIAL_FNS(Q)) "\n"

#endif
