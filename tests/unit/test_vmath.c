/* The vectorised transcendental loops (ops/vmath.c) at the ends of their
 * range, unfused and beside the fused kernels (composite.c): exp of
 * -1e9, -inf or NaN, log of 0 or of negatives, sigmoid and softplus of
 * large arguments. Each such lane used to go through libmvec's scalar
 * fallback; now its known result is selected (expm1 and tanh, left to the
 * fallback, are checked the same way). Expected values come
 * from the scalar C library in a wider type (double for float32, long
 * double for float64): exact for the results that are 0, +-inf, +-1 or
 * NaN, within 4 ulp (libmvec's documented bound) elsewhere; the values
 * between the special ones keep the bits they have in an array with no
 * special value at all; and a fused kernel gives the values of the
 * unfused ops. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/composite.h"
#include "ops/vmath.h"
#include "testutil.h"

enum { NFN = 10, LEN = 300 };
static const char *const FN[NFN] = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "softplus"};
typedef void (*vf32)(int64_t, const float *, float *);
typedef void (*vf64)(int64_t, const double *, double *);
static const vf32 F32[NFN] = {tg_vm_exp_f32, tg_vm_exp2_f32, tg_vm_expm1_f32, tg_vm_log_f32, tg_vm_log2_f32,
                              tg_vm_log10_f32, tg_vm_log1p_f32, tg_vm_tanh_f32, tg_vm_sigmoid_f32, tg_vm_softplus_f32};
static const vf64 F64[NFN] = {tg_vm_exp_f64, tg_vm_exp2_f64, tg_vm_expm1_f64, tg_vm_log_f64, tg_vm_log2_f64,
                              tg_vm_log10_f64, tg_vm_log1p_f64, tg_vm_tanh_f64, tg_vm_sigmoid_f64, tg_vm_softplus_f64};

/* The reference, in long double. */
static long double ref(int f, long double x) {
    switch (f) {
    case 0: return expl(x);
    case 1: return exp2l(x);
    case 2: return expm1l(x);
    case 3: return logl(x);
    case 4: return log2l(x);
    case 5: return log10l(x);
    case 6: return log1pl(x);
    case 7: return tanhl(x);
    case 8: return x != x ? x : x >= 0 ? 1 / (1 + expl(-x)) : expl(x) / (1 + expl(x));
    default: return x != x ? x : x > 0 ? x + log1pl(expl(-x)) : log1pl(expl(x));
    }
}
static double ref64(int f, double x) { return (double)ref(f, x); }
/* float32's reference through double, as the scalar float functions are
 * rounded (a long double result rounded twice could differ by one ulp). */
static float ref32(int f, float x) {
    double d = x;
    switch (f) {
    case 0: return (float)exp(d);
    case 1: return (float)exp2(d);
    case 2: return (float)expm1(d);
    case 3: return (float)log(d);
    case 4: return (float)log2(d);
    case 5: return (float)log10(d);
    case 6: return (float)log1p(d);
    case 7: return (float)tanh(d);
    case 8: return d != d ? x : d >= 0 ? (float)(1 / (1 + exp(-d))) : (float)(exp(d) / (1 + exp(d)));
    default: return d != d ? x : d > 0 ? (float)(d + log1p(exp(-d))) : (float)log1p(exp(d));
    }
}

/* Places in the ordering of representable numbers (signs and subnormals
 * included); distances between them are taken in __int128. */
static int64_t ord64(double x) {
    int64_t i;
    memcpy(&i, &x, 8);
    return i < 0 ? INT64_MIN - i : i;
}
static int64_t ord32(float x) {
    int32_t i;
    memcpy(&i, &x, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

/* Arguments at and around every end: where exp is subnormal, 0 or inf in
 * either dtype, exp2's, the logarithms' domain, infinities, NaN. */
static const double SPECIAL[] = {
    0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, -1e9, 1e9, -200, 200, -104.5, -103.9, -95, -87.5, 88.6, 88.8,
    89.5, 127.9, 128.5, -149.5, -150.5, -151.5, -1, -1.5, -0.5, 1e-40, -1e-40, 1e30, -1e30, -745.5, -740, 709.5,
    710.5, 1023.9, 1024.5, -1074.5, -1075.5, -1076.5, 3.4e38, -3.4e38, 1e300, -1e300, 5e-324, -1 + 1e-9};
enum { NSPECIAL = sizeof SPECIAL / sizeof SPECIAL[0] };

/* Ordinary arguments, in every function's domain. */
static double ordinary(int i) { return 0.3 + 2.6 * ((i * 37) % 101) / 101.0; }

/* Where the special values go: in the first stretch of 256, in the next,
 * and in the tail (the loops test stretches of 256 and finish with a
 * padded block). */
static int slot(int k) { return (k * 53 + 7) % LEN; }

/* y = F(x) against the reference (float32 values held in doubles when
 * f32); clean: the results on ordinary values alone, which the elements
 * not marked special must still have, bit for bit. */
static void check(int f, bool f32, const double *x, const double *y, const double *clean, const bool *special) {
    for (int i = 0; i < LEN; i++) {
        double want = f32 ? ref32(f, (float)x[i]) : ref64(f, x[i]), got = y[i];
        const char *dt = f32 ? "float32" : "float64";
        if (want != want) {
            if (got == got) fail_msg("%s(%.17g) %s at %d: %.17g, expected NaN", FN[f], x[i], dt, i, got);
            continue;
        }
        bool exact = isinf(want) || want == 0 || fabs(want) == 1;
        __int128 d = f32 ? (__int128)ord32((float)got) - ord32((float)want) : (__int128)ord64(got) - ord64(want);
        if (exact ? got != want : d > 4 || d < -4)
            fail_msg("%s(%.17g) %s at %d: %.17g, expected %.17g", FN[f], x[i], dt, i, got, want);
        if (!special[i] && memcmp(&got, &clean[i], sizeof got))
            fail_msg("%s(%.17g) %s at %d: %.17g beside special values, %.17g without", FN[f], x[i], dt, i, got,
                     clean[i]);
    }
}

/* F on x (LEN values) in both dtypes: y32 and y64 as doubles. */
static void run(int f, const double *x, double *y32, double *y64) {
    float xf[LEN], yf[LEN];
    for (int i = 0; i < LEN; i++) xf[i] = (float)x[i];
    F32[f](LEN, xf, yf);
    F64[f](LEN, x, y64);
    for (int i = 0; i < LEN; i++) y32[i] = yf[i];
}

static void test_special_values(void **state) {
    (void)state;
    double x[LEN], x32[LEN], y32[LEN], y64[LEN], c32[LEN], c64[LEN];
    bool special[LEN];
    for (int f = 0; f < NFN; f++) {
        /* ordinary values only: the plain vector call */
        for (int i = 0; i < LEN; i++) {
            x[i] = ordinary(i);
            special[i] = false;
        }
        run(f, x, c32, c64);
        /* the special values among them, all together and one at a time */
        for (int k = -1; k < NSPECIAL; k++) {
            for (int i = 0; i < LEN; i++) {
                x[i] = ordinary(i);
                special[i] = false;
            }
            for (int j = k < 0 ? 0 : k; j < (k < 0 ? NSPECIAL : k + 1); j++) {
                x[slot(j)] = SPECIAL[j];
                special[slot(j)] = true;
            }
            run(f, x, y32, y64);
            for (int i = 0; i < LEN; i++) x32[i] = (float)x[i];
            check(f, true, x32, y32, c32, special);
            check(f, false, x, y64, c64, special);
        }
    }
}

/* float32 arguments whose exponent field is one of a few around the ends,
 * with a sample of mantissas, both signs: 630,000 arguments a function
 * through the loops, in arrays of 4,096, against the reference. */
static void test_float32_sweep(void **state) {
    (void)state;
    static float x[4096], y[4096];
    static const int exps[] = {0, 1, 100, 126, 127, 128, 133, 134, 135, 140, 150, 200, 254, 255};
    for (int f = 0; f < NFN; f++)
        for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++)
            for (uint32_t base = 0; base < (1u << 23); base += 4096u * 199u) {
                for (int i = 0; i < 4096; i++) {
                    uint32_t m = (base + (uint32_t)i * 199u) & 0x7fffffu;
                    uint32_t u = ((uint32_t)(i & 1) << 31) | ((uint32_t)exps[e] << 23) | m;
                    memcpy(&x[i], &u, 4);
                }
                F32[f](4096, x, y);
                for (int i = 0; i < 4096; i++) {
                    float want = ref32(f, x[i]);
                    if (want != want ? y[i] == y[i]
                                     : (isinf(want) || want == 0 || fabsf(want) == 1)
                                           ? y[i] != want
                                           : llabs((long long)ord32(y[i]) - ord32(want)) > 4)
                        fail_msg("%s(%.9g): %.9g, expected %.9g", FN[f], x[i], y[i], want);
                }
            }
}

/* y_k = F_k(x) * s for each function: fused (one kernel for all, compiled
 * or interpreted) the values of the unfused ops, special values included:
 * exactly where the result is 0, +-inf, +-1 or NaN, within 4 ulp
 * elsewhere (the same bits where both take the same libmvec variant, as
 * an optimised build does on one machine). */
static void test_fused_same_bits(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        const char *dt = d ? "float32" : "float64";
        char json[4096];
        int at = snprintf(json, sizeof json,
                          "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null]}},"
                          "{\"id\":\"s\",\"type\":{\"dtype\":\"%s\",\"shape\":[]}}],\"nodes\":[",
                          dt, dt);
        for (int f = 0; f < NFN; f++)
            at += snprintf(json + at, sizeof json - (size_t)at,
                           "%s{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"f%d\"]},"
                           "{\"op\":\"mul\",\"inputs\":[\"f%d\",\"s\"],\"outputs\":[\"y%d\"]}",
                           f ? "," : "", FN[f], f, f, f);
        at += snprintf(json + at, sizeof json - (size_t)at, "],\"functions\":{\"main\":{\"inputs\":[\"x\",\"s\"],"
                                                            "\"outputs\":[");
        for (int f = 0; f < NFN; f++) at += snprintf(json + at, sizeof json - (size_t)at, "%s\"y%d\"", f ? "," : "", f);
        snprintf(json + at, sizeof json - (size_t)at, "]}}}");
        tg_graph *g = tu_load(json);
        /* (every function fused: no node of its own) */
        tg_ctx *ctx = tg_ctx_new();
        tg_function *fn = tg_function_compile(g, 0, NULL, ctx);
        assert_non_null(fn);
        int ncomp = 0;
        for (int i = 0; i < tg_function_node_count(fn); i++) {
            const char *op = tg_function_node_op(fn, i);
            ncomp += !strcmp(op, "composite");
            for (int f = 0; f < NFN; f++)
                if (!strcmp(op, FN[f])) fail_msg("%s was not fused (%s)", FN[f], dt);
        }
        assert_true(ncomp >= 1);
        tg_function_free(fn);
        tg_ctx_free(ctx);
        double xs[LEN];
        for (int i = 0; i < LEN; i++) xs[i] = ordinary(i);
        for (int k = 0; k < NSPECIAL; k++) xs[slot(k)] = SPECIAL[k];
        tg_array *in[2];
        if (d) {
            float xf[LEN];
            for (int i = 0; i < LEN; i++) xf[i] = (float)xs[i];
            in[0] = tg_array_new_from(TG_FLOAT32, 1, (int64_t[]){LEN}, xf);
            in[1] = tg_array_new_from(TG_FLOAT32, 0, NULL, &(float){1});
        } else {
            in[0] = tg_array_new_from(TG_FLOAT64, 1, (int64_t[]){LEN}, xs);
            in[1] = tg_array_new_from(TG_FLOAT64, 0, NULL, &(double){1});
        }
        for (int interp = 0; interp < 2; interp++) {
            tg_array *fused[NFN] = {0}, *plain[NFN] = {0};
            tg_composite_force_interp(interp);
            tu_call(g, NULL, in, fused);
            tg_composite_force_interp(false);
            tu_call_preset(g, NULL, "none", in, plain);
            for (int f = 0; f < NFN; f++) {
                for (int i = 0; i < LEN; i++) {
                    double a = tg_array_get_flat(fused[f], i), b = tg_array_get_flat(plain[f], i);
                    /* ordinary results within libmvec's 4 ulp: a build
                     * without optimisation (the sanitizer's) runs the
                     * unfused loops through scalar libm */
                    bool exact = b != b || isinf(b) || b == 0 || fabs(b) == 1;
                    __int128 u = d ? (__int128)ord32((float)a) - ord32((float)b) : (__int128)ord64(a) - ord64(b);
                    if (exact ? !(a == b || (a != a && b != b)) : u > 4 || u < -4)
                        fail_msg("%s(%.17g) %s, %s: fused %.17g, unfused %.17g", FN[f], xs[i], dt,
                                 interp ? "interpreted" : "compiled", a, b);
                }
                tg_array_free(fused[f]);
                tg_array_free(plain[f]);
            }
        }
        tg_array_free(in[0]);
        tg_array_free(in[1]);
        tg_graph_free(g);
    }
}

/* Where exp's (exp2's) result is subnormal, and around: exp, exp2,
 * sigmoid and softplus (through exp(-|x|)) of 8,192 arguments evenly over
 * each band and past both of its ends, every third an ordinary value,
 * within 2 ulp of the reference (the loops scale the band into libmvec's
 * ordinary range and round once into it; libmvec's own results at its
 * normal end are within 3 ulp, so the band's arguments are held to 2 and
 * the rest to the usual 4); 0 exactly where the result underflows; the
 * same bits beside -1e9, -inf or NaN and alone. Then the logarithms of
 * subnormals, within 2 ulp. */
static void test_subnormal_band(void **state) {
    (void)state;
    enum { M = 8192 };
    static double x[M], y[M];
    static float xf[M], yf[M];
    /* function (index in FN), and the band's ends in float64 and float32 */
    static const struct {
        int f;
        double lo64, hi64, lo32, hi32;
    } band[] = {
        {0, -746.5, -707.5, -104.5, -86.5},
        {1, -1076.5, -1021.5, -150.5, -125.5},
        {8, -746.5, -707.5, -104.5, -86.5},
        {9, -746.5, -707.5, -104.5, -86.5},
    };
    for (size_t b = 0; b < sizeof band / sizeof band[0]; b++) {
        int f = band[b].f;
        for (int i = 0; i < M; i++) {
            double t = (i + 0.37) / M;
            x[i] = i % 3 == 2 ? ordinary(i) : band[b].lo64 + (band[b].hi64 - band[b].lo64) * t;
            xf[i] = i % 3 == 2 ? (float)ordinary(i) : (float)(band[b].lo32 + (band[b].hi32 - band[b].lo32) * t);
        }
        F64[f](M, x, y);
        F32[f](M, xf, yf);
        int subnormal64 = 0, subnormal32 = 0;
        for (int i = 0; i < M; i++) {
            int tol = i % 3 == 2 ? 4 : 2;
            double w = ref64(f, x[i]);
            subnormal64 += w != 0 && fabs(w) < DBL_MIN;
            __int128 d = (__int128)ord64(y[i]) - ord64(w);
            if (w == 0 ? y[i] != 0 : d > tol || d < -tol)
                fail_msg("%s(%.17g) float64: %.17g, expected %.17g", FN[f], x[i], y[i], w);
            float wf = ref32(f, xf[i]);
            subnormal32 += wf != 0 && fabsf(wf) < FLT_MIN;
            d = (__int128)ord32(yf[i]) - ord32(wf);
            if (wf == 0 ? yf[i] != 0 : d > tol || d < -tol)
                fail_msg("%s(%.9g) float32: %.9g, expected %.9g", FN[f], xf[i], yf[i], wf);
        }
        /* (the bands were crossed: most of their results are subnormal) */
        assert_true(subnormal64 > M / 3 && subnormal32 > M / 3);
        /* the same bits whatever the neighbours: every seventh argument
         * made -1e9, -inf or NaN (stretches the loops take by another
         * form), and each argument alone (the padded tail) */
        static double x2[M], y2[M];
        static float xf2[M], yf2[M];
        for (int i = 0; i < M; i++) {
            bool other = i % 7 == 3;
            x2[i] = other ? (i % 3 ? -1e9 : i % 2 ? -INFINITY : NAN) : x[i];
            xf2[i] = other ? (float)x2[i] : xf[i];
        }
        F64[f](M, x2, y2);
        F32[f](M, xf2, yf2);
        for (int i = 0; i < M; i++) {
            double one;
            float onef;
            F64[f](1, &x[i], &one);
            F32[f](1, &xf[i], &onef);
            if (memcmp(&one, &y[i], 8) || (i % 7 != 3 && memcmp(&y2[i], &y[i], 8)))
                fail_msg("%s(%.17g) float64: %.17g, alone %.17g, beside others %.17g", FN[f], x[i], y[i], one,
                         y2[i]);
            if (memcmp(&onef, &yf[i], 4) || (i % 7 != 3 && memcmp(&yf2[i], &yf[i], 4)))
                fail_msg("%s(%.9g) float32: %.9g, alone %.9g, beside others %.9g", FN[f], xf[i], yf[i], onef,
                         yf2[i]);
        }
    }
    /* the logarithms of subnormal arguments (moved into the normal range
     * as an integer, then the logarithm of 2^-1074 or 2^-149 added): every exponent
     * of a subnormal (bits 1 to 2^52 - 1 and 2^23 - 1), a few mantissas
     * each, beside ordinary values */
    for (int f = 3; f <= 5; f++) {
        for (int i = 0; i < M; i++) {
            uint64_t b = (1ull << (i % 52)) + (uint64_t)i * 2654435761u % (1ull << (i % 52));
            uint32_t bf = (1u << (i % 23)) + (uint32_t)i * 40503u % (1u << (i % 23));
            memcpy(&x[i], &b, 8);
            memcpy(&xf[i], &bf, 4);
            if (i % 3 == 2) x[i] = xf[i] = (float)ordinary(i);
        }
        F64[f](M, x, y);
        F32[f](M, xf, yf);
        for (int i = 0; i < M; i++) {
            int tol = i % 3 == 2 ? 4 : 2;
            double w = ref64(f, x[i]);
            __int128 d = (__int128)ord64(y[i]) - ord64(w);
            if (d > tol || d < -tol) fail_msg("%s(%.17g) float64: %.17g, expected %.17g", FN[f], x[i], y[i], w);
            float wf = ref32(f, xf[i]);
            d = (__int128)ord32(yf[i]) - ord32(wf);
            if (d > tol || d < -tol) fail_msg("%s(%.9g) float32: %.9g, expected %.9g", FN[f], xf[i], yf[i], wf);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_float32_sweep),
        cmocka_unit_test(test_fused_same_bits),
        cmocka_unit_test(test_subnormal_band),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
