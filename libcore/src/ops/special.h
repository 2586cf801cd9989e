/* Private: digamma, trigamma and polygamma, and the floor division of
 * floats, one text for the library and the kernels.
 *
 * TG_SPECIAL_FNS(Q) defines tg_digamma, tg_trigamma, tg_hurwitz_zeta
 * and tg_polygamma, each qualified by Q: elemwise.c compiles it (Q
 * "static inline"), and the preludes of the generated kernels take it as
 * source text, TG_SPECIAL_TEXT(Q) (the CPU's with Q "static
 * __attribute__((noinline))", NVRTC's with its device qualifier), so
 * that a fused digamma computes what the unfused op computes, step for
 * step. The text has no preprocessor lines and no
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
 * +inf: both sides go there.
 *
 * The Hurwitz zeta function zeta(s, q), the sum over k >= 0 of
 * (q + k)^-s, for s >= 2 and q > 0: the terms up to q + k >= max(9, s)
 * (or until they no longer change the sum), then the Euler-Maclaurin
 * tail a^(1-s)/(s-1) + a^-s/2 + sum over j of
 * B_2j/(2j)! s(s+1)...(s+2j-2) a^(1-s-2j), which from there on falls by
 * a factor of 4 or more a term.
 *
 * polygamma(n, x), the n-th derivative of digamma (n = 0: digamma, 1:
 * trigamma): (-1)^(n+1) n! zeta(n + 1, x). Below 0, the terms from x up
 * to its fraction f = x + m (exact: f in (0, 1)) are summed directly
 * (m <= 64), or as (-1)^s (zeta(s, 1 - f) - zeta(s, m + 1 - f)), the
 * first two first (at a half-integer they cancel exactly and the far
 * tail is the value), so that x = -1e15 costs no more than x = 1 (past
 * 2^52 every x is a pole). NaN for an n that is not a whole number >= 0;
 * at the poles (0, -1, ...), (-1)^(n+1) inf, as SciPy and PyTorch give; 0
 * at +inf. n! overflows past n = 170. */
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
    }                                                                                                  \
    Q double tg_hurwitz_zeta(double s, double q) {                                                     \
        const double c[12] = {1.0 / 12,                                                                \
                              -1.0 / 720,                                                              \
                              1.0 / 30240,                                                             \
                              -1.0 / 1209600,                                                          \
                              1.0 / 47900160,                                                          \
                              -691.0 / 1307674368000.0,                                                \
                              1.0 / 74724249600.0,                                                     \
                              -3617.0 / 10670622842880000.0,                                           \
                              43867.0 / 5109094217170944000.0,                                         \
                              -174611.0 / 802857662698291200000.0,                                     \
                              854513.0 / 155112100433309859840000.0,                                   \
                              -236364091.0 / 1693824136731743669452800000.0};                          \
        double sum = 0, a = q, lim = s > 9 ? s : 9;                                                    \
        for (; a < lim; a += 1) {                                                                      \
            double t = pow(a, -s);                                                                     \
            sum += t;                                                                                  \
            if (t <= sum * 1e-17) return sum;                                                          \
        }                                                                                              \
        double t = pow(a, -s), p = s, f = t / a;                                                       \
        sum += a * t / (s - 1) + 0.5 * t;                                                              \
        for (int j = 0; j < 12; j++) {                                                                 \
            double term = c[j] * p * f;                                                                \
            sum += term;                                                                               \
            if (fabs(term) <= 1e-17 * fabs(sum)) break;                                                \
            p *= (s + 2 * j + 1) * (s + 2 * j + 2);                                                    \
            f /= a * a;                                                                                \
        }                                                                                              \
        return sum;                                                                                    \
    }                                                                                                  \
    Q double tg_polygamma(double n, double x) {                                                        \
        if (n != n || x != x || n < 0 || n != floor(n) || x == -__builtin_inf()) return __builtin_nan(""); \
        if (n == 0) return tg_digamma(x);                                                              \
        if (n == 1) return tg_trigamma(x);                                                             \
        double s = n + 1, sign = fmod(n, 2) == 0 ? -1 : 1;                                             \
        if (x == __builtin_inf()) return 0;                                                            \
        if (x <= 0 && x == floor(x)) return sign * __builtin_inf();                                    \
        double z;                                                                                      \
        if (x > 0) {                                                                                   \
            z = tg_hurwitz_zeta(s, x);                                                                 \
        } else {                                                                                       \
            double m = ceil(-x), f = x + m;                                                            \
            if (m <= 64) {                                                                             \
                z = tg_hurwitz_zeta(s, f);                                                             \
                for (double k = 0; k < m; k++) z += pow(x + k, -s);                                    \
            } else {                                                                                   \
                double neg = fmod(s, 2) != 0 ? -1 : 1;                                                 \
                double near = tg_hurwitz_zeta(s, f) + neg * tg_hurwitz_zeta(s, 1 - f);                 \
                z = near - neg * tg_hurwitz_zeta(s, m + 1 - f);                                        \
            }                                                                                          \
        }                                                                                              \
        return sign * tgamma(s) * z;                                                                   \
    }

/* NumPy's floor_divide (div) and remainder of floats (npy_divmod) in
 * one: tg_fdivmod, qualified by Q. HIDE is a statement that hides z, the
 * zero divisor, from the compiler: the CPU kernels' an empty asm over it
 * (knowing a divisor of -0.0, GCC divided by +0.0 and negated, and
 * 0 // -0.0 gave the other NaN sign than elemwise.c's loop); empty where
 * the divisor is never a known constant (elemwise.c, NVRTC). */
#define TG_SPECIAL_FDIVMOD(Q, HIDE)                                                                    \
    Q double tg_fdivmod(double a, double b, int div) {                                                 \
        double mod = fmod(a, b);                                                                       \
        if (b == 0) {                                                                                  \
            double z = b;                                                                              \
            HIDE                                                                                       \
            return div ? a / z : mod;                                                                  \
        }                                                                                              \
        double q = (a - mod) / b;                                                                      \
        if (mod != 0) {                                                                                \
            if ((b < 0) != (mod < 0)) {                                                                \
                mod += b;                                                                              \
                q -= 1.0;                                                                              \
            }                                                                                          \
        } else {                                                                                       \
            mod = copysign(0.0, b);                                                                    \
        }                                                                                              \
        if (!div) return mod;                                                                          \
        double fl;                                                                                     \
        if (q != 0) {                                                                                  \
            fl = floor(q);                                                                             \
            if (q - fl > 0.5) fl += 1.0;                                                               \
        } else {                                                                                       \
            fl = copysign(0.0, a / b);                                                                 \
        }                                                                                              \
        return fl;                                                                                     \
    }

/* (two steps: the argument of # is not expanded) */
#define TG_SPECIAL_STR_(...) #__VA_ARGS__
#define TG_SPECIAL_STR(...) TG_SPECIAL_STR_(__VA_ARGS__)
#define TG_SPECIAL_TEXT(Q) TG_SPECIAL_STR(TG_SPECIAL_FNS(Q)) "\n"
#define TG_SPECIAL_FDIVMOD_TEXT(Q, HIDE) TG_SPECIAL_STR(TG_SPECIAL_FDIVMOD(Q, HIDE)) "\n"

#endif
