/* Random numbers: Philox 4x32-10 against the published known-answer
 * vectors (Random123's kat_vectors), the first samples worked out by hand
 * from those vectors, the moments of large samples, the new state, and
 * identical samples for one and two threads. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tensor/tensor.h"

void tg_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

static void test_philox_kat(void **state) {
    (void)state;
    static const struct {
        uint32_t ctr[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        tg_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int k = 0; k < 4; k++) assert_int_equal(out[k], kat[i].want[k]);
    }
}

/* A graph with one function `draw`: (new_rng, sample) = op(rng, ...),
 * the state updated. `args` are the inputs after rng (JSON). */
static tg_function *make(const char *op, const char *args, const char *dtype, uint64_t key,
                         uint64_t ctr, tg_graph **gp) {
    size_t cap = strlen(args) + 1024;
    char *buf = malloc(cap);
    char attrs[64] = "";
    if (dtype) snprintf(attrs, sizeof attrs, ",\"attrs\":{\"dtype\":\"%s\"}", dtype);
    snprintf(buf, cap,
             "{\"format\":\"tg-graph\",\"version\":1,"
             "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
             "\"shared\":{\"data\":[%llu,%llu]}}],"
             "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"rng\",%s],"
             "\"outputs\":[\"rng2\",\"y\"]%s}],"
             "\"functions\":{\"draw\":{\"inputs\":[],\"outputs\":[\"y\"],"
             "\"updates\":{\"rng\":\"rng2\"}}}}",
             (unsigned long long)key, (unsigned long long)ctr, op, args, attrs);
    tg_graph *g = tu_load(buf);
    free(buf);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    if (!f) fail_msg("compile: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    *gp = g;
    return f;
}

static tg_array *draw(tg_function *f) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *y = NULL;
    if (tg_function_call(f, NULL, &y, ctx)) fail_msg("call: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return y;
}

static void set_state(tg_function *f, uint64_t key, uint64_t ctr) {
    uint64_t s[2] = {key, ctr};
    int64_t two = 2;
    tg_array *a = tg_array_new_from(TG_UINT64, 1, &two, s);
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_shared_set(f, "rng", a, ctx), 0);
    tg_ctx_free(ctx);
    tg_array_free(a);
}

static void check_state(tg_function *f, uint64_t key, uint64_t ctr) {
    const tg_array *s = tg_function_shared_get(f, "rng");
    assert_non_null(s);
    const uint64_t *d = tg_array_data(s);
    assert_int_equal(d[0], key);
    assert_int_equal(d[1], ctr);
}

/* Sample mean and variance of a (any dtype). */
static void moments(const tg_array *a, double *mean, double *var) {
    int64_t n = tg_array_size(a);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += tg_array_get_flat(a, i);
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = tg_array_get_flat(a, i) - *mean;
        s2 += d * d;
    }
    *var = s2 / (double)(n - 1);
}

/* |got - want| within k standard errors. */
#define assert_within(got, want, se, k)                                      \
    do {                                                                     \
        double g_ = (got), w_ = (want), s_ = (se);                           \
        if (fabs(g_ - w_) > (k) * s_)                                        \
            fail_msg("%s = %.6g, want %.6g +- %d * %.3g", #got, g_, w_, k, s_); \
    } while (0)

#define SIZE1(n) "{\"value\":{\"dtype\":\"int64\",\"shape\":[1],\"data\":[" #n "]}}"
#define SIZE2(a, b) "{\"value\":{\"dtype\":\"int64\",\"shape\":[2],\"data\":[" #a "," #b "]}}"

static double u53(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi << 32) | lo) >> 11) / 9007199254740992.0;
}

static void test_first_values(void **state) {
    (void)state;
    /* key 0, counter 0: block 0 is the first known-answer vector, so the
     * first two uniforms come from its words (0, 1) and (2, 3). */
    tg_graph *g;
    tg_function *f = make("random_uniform", SIZE1(3) ",{\"value\":0},{\"value\":1}", NULL, 0, 0, &g);
    tg_array *y = draw(f);
    double u0 = u53(0x6627e8d5, 0xe169c58d), u1 = u53(0xbc57ac4c, 0x9b00dbd8);
    assert_int_equal(tg_array_dtype(y), TG_FLOAT64);
    assert_true(tg_array_get_flat(y, 0) == u0);
    assert_true(tg_array_get_flat(y, 1) == u1);
    check_state(f, 0, 2); /* 3 elements: 2 blocks */
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);

    /* The same block through Box-Muller (1 - u0 keeps the log finite). */
    f = make("random_normal", SIZE1(2) ",{\"value\":1.5},{\"value\":2}", NULL, 0, 0, &g);
    y = draw(f);
    double r = sqrt(-2 * log(1 - u0)), t = 2 * 3.14159265358979323846 * u1;
    assert_true(fabs(tg_array_get_flat(y, 0) - (1.5 + 2 * r * cos(t))) < 1e-13);
    assert_true(fabs(tg_array_get_flat(y, 1) - (1.5 + 2 * r * sin(t))) < 1e-13);
    check_state(f, 0, 1);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);

    /* The counter wraps around 2^64. */
    f = make("random_uniform", SIZE1(4) ",{\"value\":0},{\"value\":1}", NULL,
             0xffffffffffffffffull, 0xffffffffffffffffull, &g);
    y = draw(f);
    check_state(f, 0xffffffffffffffffull, 1);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
}

/* tests/data/gen/random_normal_bits.py: key 42, counter 7, 4096 draws */
static const struct { int i; uint64_t bits; } normal_bits[] = {
    {0, 0x3fe96b1ac06d8907ull}, /* 0.79432427962845586 */
    {1, 0x3fe034f50aa4c334ull}, /* 0.50646450117901631 */
    {2, 0x3ff0be5170fbed61ull}, /* 1.0464643872681665 */
    {3, 0xbfe67880bc90747dull}, /* -0.70220982388458675 */
    {4, 0xbfc3c538b71ed323ull}, /* -0.15445622388292532 */
    {5, 0xbfe8b20d8e1ce269ull}, /* -0.77173497921382961 */
    {1001, 0x3ffdc33e6202ba96ull}, /* 1.8601669148007764 */
    {2048, 0xc00a3fdf3cc0cfb5ull}, /* -3.281187510141502 */
    {3333, 0xbfc55d3b8f147d98ull}, /* -0.16690773474054477 */
    {4095, 0xbfe6bd8d9707cf29ull}, /* -0.71063880441804372 */
};

/* The normals are the same bits on every machine (FORMAT.md s7): they
 * equal a computation in Python floats that uses neither tg nor libm (the
 * script above), whichever vector width this CPU gives the kernel. */
static void test_normal_bits(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *f = make("random_normal", SIZE1(4096) ",{\"value\":0},{\"value\":1}", NULL, 42, 7, &g);
    tg_array *y = draw(f);
    assert_int_equal(tg_array_size(y), 4096);
    const double *v = tg_array_data(y);
    for (size_t k = 0; k < sizeof normal_bits / sizeof normal_bits[0]; k++) {
        uint64_t b;
        memcpy(&b, &v[normal_bits[k].i], sizeof b);
        if (b != normal_bits[k].bits)
            fail_msg("normal %d: %.17g (0x%016llx), want 0x%016llx", normal_bits[k].i, v[normal_bits[k].i],
                     (unsigned long long)b, (unsigned long long)normal_bits[k].bits);
    }
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
}

static void test_uniform(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *f = make("random_uniform", SIZE1(200001) ",{\"value\":2},{\"value\":5}", NULL, 7, 100, &g);
    tg_array *y = draw(f);
    int64_t n = tg_array_size(y);
    assert_int_equal(n, 200001);
    for (int64_t i = 0; i < n; i++) {
        double v = tg_array_get_flat(y, i);
        assert_true(v >= 2 && v < 5);
    }
    double m, v;
    moments(y, &m, &v);
    /* uniform(2, 5): mean 3.5, variance 9/12, fourth central moment 81/80 */
    assert_within(m, 3.5, sqrt(0.75 / n), 5);
    assert_within(v, 0.75, sqrt((81.0 / 80 - 0.75 * 0.75) / n), 5);
    check_state(f, 7, 100 + 100001);
    /* a second call continues the stream: different numbers */
    tg_array *y2 = draw(f);
    assert_true(tg_array_get_flat(y2, 0) != tg_array_get_flat(y, 0));
    check_state(f, 7, 100 + 2 * 100001);
    /* the same state again: the same numbers */
    set_state(f, 7, 100);
    tg_array *y3 = draw(f);
    assert_true(tg_array_equal(y, y3));
    tg_array_free(y);
    tg_array_free(y2);
    tg_array_free(y3);
    tg_function_free(f);
    tg_graph_free(g);

    /* float32, broadcast array parameters: low [0, 10], high 1 + low */
    f = make("random_uniform",
             SIZE2(50000, 2) ",{\"value\":{\"dtype\":\"float32\",\"shape\":[2],\"data\":[0,10]}},"
                             "{\"value\":{\"dtype\":\"float32\",\"shape\":[2],\"data\":[1,11]}}",
             "float32", 1, 0, &g);
    y = draw(f);
    assert_int_equal(tg_array_dtype(y), TG_FLOAT32);
    double s0 = 0, s1 = 0;
    for (int64_t i = 0; i < 50000; i++) {
        double a = tg_array_get_flat(y, 2 * i), b = tg_array_get_flat(y, 2 * i + 1);
        assert_true(a >= 0 && a <= 1 && b >= 10 && b <= 11);
        s0 += a;
        s1 += b;
    }
    assert_within(s0 / 50000, 0.5, sqrt(1.0 / 12 / 50000), 5);
    assert_within(s1 / 50000, 10.5, sqrt(1.0 / 12 / 50000), 5);
    check_state(f, 1, 50000);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
}

/* A size computed at run time: the sample's shape is known only then. */
static void test_dynamic_size(void **state) {
    (void)state;
    const char *js =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
        "\"shared\":{\"data\":[1,0]}},{\"id\":\"s\",\"type\":{\"dtype\":\"int32\","
        "\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"random_uniform\",\"inputs\":[\"rng\",\"s\",{\"value\":0},"
        "{\"value\":1}],\"outputs\":[\"rng2\",\"y\"],\"attrs\":{\"dtype\":\"float32\"}}],"
        "\"functions\":{\"draw\":{\"inputs\":[\"s\"],\"outputs\":[\"y\"],"
        "\"updates\":{\"rng\":\"rng2\"}}}}";
    tg_graph *g = tu_load(js);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    int32_t sv[2] = {3, 5};
    int64_t two = 2;
    tg_array *s = tg_array_new_from(TG_INT32, 1, &two, sv), *y = NULL;
    assert_int_equal(tg_function_call(f, &s, &y, ctx), 0);
    assert_int_equal(tg_array_ndim(y), 2);
    assert_int_equal(tg_array_shape(y)[0], 3);
    assert_int_equal(tg_array_shape(y)[1], 5);
    check_state(f, 1, 8);
    tg_array_free(y);
    y = NULL;
    tg_array_free(s);
    sv[0] = -1;
    s = tg_array_new_from(TG_INT32, 1, &two, sv);
    assert_int_not_equal(tg_function_call(f, &s, &y, ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "negative size"));
    check_state(f, 1, 8);
    tg_array_free(s);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Sizes read from uint64: one past 2^63 - 1 is too large even beside a
 * zero, where it counted as 2^63 - 1 and made an empty sample of shape
 * (0, 2^63 - 1) (NumPy: "Maximum allowed dimension exceeded"); an exact
 * 2^63 - 1 there is that shape for 1-byte items, too large for wider ones
 * (NumPy: "array is too big"). */
static void test_dynamic_size_u64(void **state) {
    (void)state;
    const char *js =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
        "\"shared\":{\"data\":[1,0]}},{\"id\":\"s\",\"type\":{\"dtype\":\"uint64\","
        "\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"random_binomial\",\"inputs\":[\"rng\",\"s\",{\"value\":3},"
        "{\"value\":0.5}],\"outputs\":[\"rng2\",\"y\"],\"attrs\":{\"dtype\":\"int8\"}},"
        "{\"op\":\"random_uniform\",\"inputs\":[\"rng\",\"s\",{\"value\":0},"
        "{\"value\":1}],\"outputs\":[\"rng3\",\"u\"],\"attrs\":{\"dtype\":\"float32\"}}],"
        "\"functions\":{\"bin\":{\"inputs\":[\"s\"],\"outputs\":[\"y\"]},"
        "\"uni\":{\"inputs\":[\"s\"],\"outputs\":[\"u\"]}}}";
    tg_graph *g = tu_load(js);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *fb = tg_function_compile(g, 0, NULL, ctx);
    tg_function *fu = tg_function_compile(g, 1, NULL, ctx);
    assert_non_null(fb);
    assert_non_null(fu);
    int64_t two = 2;
    uint64_t sv[2] = {0, UINT64_MAX};
    tg_array *s = tg_array_new_from(TG_UINT64, 1, &two, sv), *y = NULL;
    assert_int_not_equal(tg_function_call(fb, &s, &y, ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "size 18446744073709551615 is too large"));
    ((uint64_t *)tg_array_data(s))[1] = (uint64_t)INT64_MAX;
    assert_int_equal(tg_function_call(fb, &s, &y, ctx), 0);
    assert_int_equal(tg_array_shape(y)[0], 0);
    assert_int_equal(tg_array_shape(y)[1], INT64_MAX);
    tg_array_free(y);
    y = NULL;
    assert_int_not_equal(tg_function_call(fu, &s, &y, ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "too large"));
    tg_array_free(s);
    tg_function_free(fb);
    tg_function_free(fu);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Trial counts past 2^33 (the 32-bit sub-indices of one element's draws
 * run out there; near 2^63 the draws looped for ever, and the work
 * estimate n * size overflowed int64: UBSan in rnd_run) are an error
 * naming n as given: a uint64 2^64 - 1 said 'got -1'. 2^33 itself is
 * allowed (too slow to draw here). */
static void test_trials_too_large(void **state) {
    (void)state;
    const char *js =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
        "\"shared\":{\"data\":[1,0]}},{\"id\":\"n\",\"type\":{\"dtype\":\"int64\","
        "\"shape\":[]}},{\"id\":\"u\",\"type\":{\"dtype\":\"uint64\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"random_binomial\",\"inputs\":[\"rng\",{\"value\":{\"dtype\":"
        "\"int64\",\"shape\":[3],\"data\":[3,3,3]}},\"n\",{\"value\":0.5}],"
        "\"outputs\":[\"rng2\",\"y\"]},"
        "{\"op\":\"random_binomial\",\"inputs\":[\"rng\",{\"value\":{\"dtype\":"
        "\"int64\",\"shape\":[3],\"data\":[3,3,3]}},\"u\",{\"value\":0.5}],"
        "\"outputs\":[\"rng3\",\"yu\"]},"
        "{\"op\":\"random_multinomial\",\"inputs\":[\"rng\",\"u\",{\"value\":{\"dtype\":"
        "\"float64\",\"shape\":[2],\"data\":[0.5,0.5]}}],\"outputs\":[\"rng4\",\"m\"]}],"
        "\"functions\":{\"bin\":{\"inputs\":[\"n\"],\"outputs\":[\"y\"]},"
        "\"binu\":{\"inputs\":[\"u\"],\"outputs\":[\"yu\"]},"
        "\"mn\":{\"inputs\":[\"u\"],\"outputs\":[\"m\"]}}}";
    tg_graph *g = tu_load(js);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f[3];
    for (int i = 0; i < 3; i++) assert_non_null(f[i] = tg_function_compile(g, i, NULL, ctx));
    tg_array *n = tg_array_new(TG_INT64, 0, NULL), *u = tg_array_new(TG_UINT64, 0, NULL), *y = NULL;
    const int64_t big[2] = {INT64_C(1) << 62, (INT64_C(1) << 33) + 1};
    const char *want[2] = {"n 4611686018427387904 is too large", "n 8589934593 is too large"};
    for (int i = 0; i < 2; i++) {
        *(int64_t *)tg_array_data(n) = big[i];
        assert_int_not_equal(tg_function_call(f[0], &n, &y, ctx), 0);
        if (!strstr(tg_ctx_message(ctx), want[i])) fail_msg("%s", tg_ctx_message(ctx));
        assert_non_null(strstr(tg_ctx_message(ctx), "random_binomial"));
    }
    *(uint64_t *)tg_array_data(u) = UINT64_MAX;
    for (int i = 1; i < 3; i++) {
        assert_int_not_equal(tg_function_call(f[i], &u, &y, ctx), 0);
        if (!strstr(tg_ctx_message(ctx), "n 18446744073709551615 is too large: tg draws the trials one by one, at most 2^33"))
            fail_msg("%s", tg_ctx_message(ctx));
    }
    assert_null(y);
    /* a small n still draws */
    *(uint64_t *)tg_array_data(u) = 4;
    assert_int_equal(tg_function_call(f[2], &u, &y, ctx), 0);
    const int64_t *m = tg_array_data(y);
    assert_int_equal(m[0] + m[1], 4);
    tg_array_free(y);
    tg_array_free(n);
    tg_array_free(u);
    for (int i = 0; i < 3; i++) tg_function_free(f[i]);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

static void test_normal(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *f = make("random_normal", SIZE2(1000, 201) ",{\"value\":1},{\"value\":2}", "float32", 3, 0, &g);
    tg_array *y = draw(f);
    assert_int_equal(tg_array_dtype(y), TG_FLOAT32);
    assert_int_equal(tg_array_ndim(y), 2);
    int64_t n = tg_array_size(y);
    double m, v;
    moments(y, &m, &v);
    assert_within(m, 1, 2 / sqrt((double)n), 5);
    assert_within(v, 4, sqrt(2 * 16.0 / n), 5);
    /* fraction within one standard deviation: 0.6827 */
    int64_t in1 = 0;
    for (int64_t i = 0; i < n; i++) in1 += fabs(tg_array_get_flat(y, i) - 1) < 2;
    assert_within((double)in1 / n, 0.682689492, sqrt(0.2166 / n), 5);
    check_state(f, 3, (uint64_t)(n + 1) / 2);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
}

static void test_binomial(void **state) {
    (void)state;
    tg_graph *g;
    tg_function *f = make("random_binomial", SIZE1(100000) ",{\"value\":10},{\"value\":0.3}", NULL, 11, 5, &g);
    tg_array *y = draw(f);
    assert_int_equal(tg_array_dtype(y), TG_INT64);
    int64_t n = tg_array_size(y);
    for (int64_t i = 0; i < n; i++) {
        double c = tg_array_get_flat(y, i);
        assert_true(c >= 0 && c <= 10);
    }
    double m, v;
    moments(y, &m, &v);
    /* mean np = 3, variance np(1-p) = 2.1; var of the sample variance
     * ~ (mu4 - sigma^4) / n with mu4 = 3 s^4 + s^2 (1 - 6pq) */
    assert_within(m, 3, sqrt(2.1 / n), 5);
    double mu4 = 3 * 2.1 * 2.1 + 2.1 * (1 - 6 * 0.3 * 0.7);
    assert_within(v, 2.1, sqrt((mu4 - 2.1 * 2.1) / n), 5);
    check_state(f, 11, 5 + 100000);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);

    /* float32 output, per-column n and p; n = 0 gives 0, p = 1 gives n */
    f = make("random_binomial",
             SIZE2(20000, 3) ",{\"value\":{\"dtype\":\"int32\",\"shape\":[3],\"data\":[0,5,4]}},"
                             "{\"value\":{\"dtype\":\"float64\",\"shape\":[3],\"data\":[0.5,0.5,1]}}",
             "float32", 2, 0, &g);
    y = draw(f);
    assert_int_equal(tg_array_dtype(y), TG_FLOAT32);
    double s = 0;
    for (int64_t i = 0; i < 20000; i++) {
        assert_true(tg_array_get_flat(y, 3 * i) == 0);
        s += tg_array_get_flat(y, 3 * i + 1);
        assert_true(tg_array_get_flat(y, 3 * i + 2) == 4);
    }
    assert_within(s / 20000, 2.5, sqrt(1.25 / 20000), 5);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
}

static void test_multinomial(void **state) {
    (void)state;
    enum { ROWS = 5000, K = 4, N = 20 };
    static double pv[ROWS * K];
    for (int r = 0; r < ROWS; r++) {
        pv[r * K + 0] = 0.1;
        pv[r * K + 1] = 0.2;
        pv[r * K + 2] = 0.3;
        pv[r * K + 3] = 0.4;
    }
    /* pvals as a free input: a (batch, k) matrix */
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"format\":\"tg-graph\",\"version\":1,"
             "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
             "\"shared\":{\"data\":[9,0]}},"
             "{\"id\":\"pv\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,%d]}}],"
             "\"nodes\":[{\"op\":\"random_multinomial\",\"inputs\":[\"rng\",{\"value\":%d},\"pv\"],"
             "\"outputs\":[\"rng2\",\"y\"]}],"
             "\"functions\":{\"draw\":{\"inputs\":[\"pv\"],\"outputs\":[\"y\"],"
             "\"updates\":{\"rng\":\"rng2\"}}}}",
             K, N);
    tg_graph *g = tu_load(buf);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    int64_t shp[2] = {ROWS, K};
    tg_array *p = tg_array_new_from(TG_FLOAT64, 2, shp, pv), *y = NULL;
    assert_int_equal(tg_function_call(f, &p, &y, ctx), 0);
    assert_int_equal(tg_array_dtype(y), TG_INT64);
    const int64_t *c = tg_array_data(y);
    double sum[K] = {0}, sq[K] = {0};
    for (int r = 0; r < ROWS; r++) {
        int64_t t = 0;
        for (int k = 0; k < K; k++) {
            t += c[r * K + k];
            sum[k] += (double)c[r * K + k];
            sq[k] += (double)c[r * K + k] * (double)c[r * K + k];
        }
        assert_int_equal(t, N);
    }
    for (int k = 0; k < K; k++) {
        double q = pv[k], m = sum[k] / ROWS, var = sq[k] / ROWS - m * m;
        assert_within(m, N * q, sqrt(N * q * (1 - q) / ROWS), 5);
        assert_within(var, N * q * (1 - q), 0.08 * N * q * (1 - q), 1);
    }
    check_state(f, 9, ROWS);
    tg_array_free(y);
    y = NULL;

    /* sum(pvals[:-1]) > 1: a run-time error, the state unchanged */
    double bad[4] = {0.6, 0.6, 0, 0};
    int64_t shp1[2] = {1, 4};
    tg_array *pb = tg_array_new_from(TG_FLOAT64, 2, shp1, bad);
    assert_int_not_equal(tg_function_call(f, &pb, &y, ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "sum(pvals[:-1])"));
    check_state(f, 9, ROWS);
    tg_array_free(pb);
    tg_array_free(p);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);

    /* a vector of pvals: one row, the last category takes the rest */
    f = make("random_multinomial",
             "{\"value\":100},{\"value\":{\"dtype\":\"float32\",\"shape\":[3],\"data\":[0,0.5,0.1]}}", "int32",
             4, 10, &g);
    y = draw(f);
    assert_int_equal(tg_array_dtype(y), TG_INT32);
    assert_int_equal(tg_array_ndim(y), 1);
    assert_true(tg_array_get_flat(y, 0) == 0);
    assert_true(tg_array_get_flat(y, 0) + tg_array_get_flat(y, 1) + tg_array_get_flat(y, 2) ==
                100);
    assert_true(tg_array_get_flat(y, 2) > 20); /* expected 50 */
    check_state(f, 4, 11);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
}

/* The same state gives the same sample with one and with two threads. */
static void test_threads(void **state) {
    (void)state;
    static const char *const ops[][3] = {
        {"random_uniform", SIZE1(300001) ",{\"value\":-1},{\"value\":1}", NULL},
        {"random_normal", SIZE2(700, 501) ",{\"value\":0},{\"value\":1}", "float32"},
        {"random_binomial", SIZE1(100001) ",{\"value\":7},{\"value\":0.4}", NULL},
        {"random_multinomial", NULL, NULL}, /* arguments built below */
    };
    int saved = omp_get_max_threads();
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        tg_graph *g;
        if (i == 3) {
            /* a (4000, 3) constant: build it with repeated rows */
            char *args = malloc(4000 * 12 + 200);
            size_t k = (size_t)sprintf(args, "{\"value\":30},{\"value\":{\"dtype\":\"float64\","
                                             "\"shape\":[4000,3],\"data\":[");
            for (int r = 0; r < 4000; r++)
                k += (size_t)sprintf(args + k, "%s0.2,0.3,0.5", r ? "," : "");
            sprintf(args + k, "]}}");
            omp_set_num_threads(1);
            tg_function *f = make(ops[i][0], args, ops[i][2], 5, 77, &g);
            free(args);
            tg_array *a = draw(f);
            omp_set_num_threads(2);
            set_state(f, 5, 77);
            tg_array *b = draw(f);
            assert_true(tg_array_equal(a, b));
            tg_array_free(a);
            tg_array_free(b);
            tg_function_free(f);
            tg_graph_free(g);
            continue;
        }
        tg_function *f = make(ops[i][0], ops[i][1], ops[i][2], 5, 77, &g);
        omp_set_num_threads(1);
        tg_array *a = draw(f);
        omp_set_num_threads(2);
        set_state(f, 5, 77);
        tg_array *b = draw(f);
        assert_true(tg_array_equal(a, b));
        tg_array_free(a);
        tg_array_free(b);
        tg_function_free(f);
        tg_graph_free(g);
    }
    omp_set_num_threads(saved);
}

static void test_errors(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"random_binomial|" SIZE1(4) ",{\"value\":3},{\"value\":1.5}", "p must be in [0, 1]"},
        {"random_binomial|" SIZE1(4) ",{\"value\":-3},{\"value\":0.5}", "n must be non-negative"},
        {"random_normal|" SIZE1(4) ",{\"value\":0},{\"value\":-1}", "std must be non-negative"},
        /* NumPy refuses a scale with its sign bit set, -0 too */
        {"random_normal|" SIZE1(4) ",{\"value\":0},{\"value\":-0.0}", "std must be non-negative, got -0"},
        /* NumPy: "high - low range exceeds valid bounds" */
        {"random_uniform|" SIZE1(4) ",{\"value\":-1e308},{\"value\":1e308}", "high - low must be finite"},
        {"random_uniform|" SIZE1(4) ",{\"value\":0},{\"value\":{\"dtype\":\"float64\",\"shape\":[],\"data\":\"inf\"}}",
         "high - low must be finite"},
        {"random_uniform|" SIZE1(4)
         ",{\"value\":{\"dtype\":\"float64\",\"shape\":[4],\"data\":[0,1,\"nan\",3]}},{\"value\":1}",
         "high - low must be finite"},
        {"random_uniform|" SIZE1(4)
         ",{\"value\":{\"dtype\":\"float64\",\"shape\":[3],\"data\":[0,1,2]}},{\"value\":1}",
         "does not broadcast"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char op[64];
        const char *bar = strchr(cases[i][0], '|');
        snprintf(op, sizeof op, "%.*s", (int)(bar - cases[i][0]), cases[i][0]);
        char buf[4096];
        snprintf(buf, sizeof buf,
                 "{\"format\":\"tg-graph\",\"version\":1,"
                 "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
                 "\"shared\":{\"data\":[1,2]}}],"
                 "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"rng\",%s],"
                 "\"outputs\":[\"rng2\",\"y\"]}],"
                 "\"functions\":{\"draw\":{\"inputs\":[],\"outputs\":[\"y\"],"
                 "\"updates\":{\"rng\":\"rng2\"}}}}",
                 op, bar + 1);
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tg_graph_load_string(buf, strlen(buf), NULL, "test", ctx);
        const char *msg = NULL;
        tg_function *f = NULL;
        tg_array *y = NULL;
        if (g && (f = tg_function_compile(g, 0, NULL, ctx))) {
            assert_int_not_equal(tg_function_call(f, NULL, &y, ctx), 0);
            check_state(f, 1, 2);
        }
        msg = tg_ctx_message(ctx);
        if (!strstr(msg, cases[i][1])) fail_msg("case %zu: %s", i, msg);
        tg_function_free(f);
        tg_graph_free(g);
        tg_ctx_free(ctx);
    }
    /* load errors: a state of the wrong type, a float dtype for sizes */
    char msg[2048];
    const char *bad =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"int64\",\"shape\":[2]},"
        "\"shared\":{\"data\":[1,2]}}],"
        "\"nodes\":[{\"op\":\"random_uniform\",\"inputs\":[\"rng\"," SIZE1(3) ",{\"value\":0},{\"value\":1}],"
        "\"outputs\":[\"rng2\",\"y\"]}]}";
    tu_load_fail(bad, msg, sizeof msg);
    assert_non_null(strstr(msg, "uint64 vector of length 2"));
    const char *bad2 =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
        "\"shared\":{\"data\":[1,2]}}],"
        "\"nodes\":[{\"op\":\"random_normal\",\"inputs\":[\"rng\"," SIZE1(3) ",{\"value\":0},{\"value\":1}],"
        "\"outputs\":[\"rng2\",\"y\"],\"attrs\":{\"dtype\":\"int32\"}}]}";
    tu_load_fail(bad2, msg, sizeof msg);
    assert_non_null(strstr(msg, "attrs.dtype"));
}

/* A count that a narrow integer dtype cannot hold would wrap (NumPy's
 * astype wraps it: np.int8(200) is -56); tg refuses an n past the dtype's
 * largest value, naming it, leaves the state as it was, and draws with
 * an n that fits: with p = 1 every count is n itself, so none wrapped. */
static void test_narrow_counts(void **state) {
    (void)state;
    static const struct {
        const char *op, *args, *dtype, *err;
        int64_t all; /* with no error: every count */
    } cases[] = {
        {"random_binomial", SIZE1(5) ",{\"value\":128},{\"value\":1}", "int8",
         "n 128 does not fit the sample's dtype int8 (at most 127)", 0},
        {"random_binomial", SIZE1(5) ",{\"value\":127},{\"value\":1}", "int8", NULL, 127},
        {"random_binomial", SIZE1(5) ",{\"value\":255},{\"value\":1}", "uint8", NULL, 255},
        {"random_binomial", SIZE1(5) ",{\"value\":{\"dtype\":\"int64\",\"shape\":[5],\"data\":[1,2,3,4,70000]}},"
         "{\"value\":1}", "uint16", "n 70000 does not fit the sample's dtype uint16 (at most 65535)", 0},
        {"random_binomial", SIZE1(5) ",{\"value\":70000},{\"value\":1}", "int32", NULL, 70000},
        {"random_binomial", SIZE1(5) ",{\"value\":70000},{\"value\":1}", "float16", NULL, 70000 /* inf */},
        {"random_multinomial", "{\"value\":40000},{\"value\":{\"dtype\":\"float64\",\"shape\":[1],\"data\":[1]}}",
         "int16", "n 40000 does not fit the sample's dtype int16 (at most 32767)", 0},
        {"random_multinomial", "{\"value\":32767},{\"value\":{\"dtype\":\"float64\",\"shape\":[1],\"data\":[1]}}",
         "int16", NULL, 32767},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_graph *g;
        tg_function *f = make(cases[i].op, cases[i].args, cases[i].dtype, 3, 9, &g);
        tg_ctx *ctx = tg_ctx_new();
        tg_array *y = NULL;
        int rc = tg_function_call(f, NULL, &y, ctx);
        if (cases[i].err) {
            if (!rc || !strstr(tg_ctx_message(ctx), cases[i].err) || strchr(tg_ctx_message(ctx), '\n'))
                fail_msg("case %zu: %s", i, rc ? tg_ctx_message(ctx) : "drew");
            assert_null(y);
            check_state(f, 3, 9);
        } else {
            if (rc) fail_msg("case %zu: %s", i, tg_ctx_message(ctx));
            for (int64_t k = 0; k < tg_array_size(y); k++) {
                double want = !strcmp(cases[i].dtype, "float16") ? INFINITY : (double)cases[i].all;
                if (tg_array_get_flat(y, k) != want)
                    fail_msg("case %zu: count %lld is %g", i, (long long)k, tg_array_get_flat(y, k));
            }
            tg_array_free(y);
        }
        tg_ctx_free(ctx);
        tg_function_free(f);
        tg_graph_free(g);
    }
}

/* A NaN std is taken, as NumPy takes it (np.random.default_rng(0).normal(5,
 * np.nan, 4) is four NaN): the samples are NaN and the state moves on. */
static void test_normal_nan_std(void **state) {
    (void)state;
    const char *js =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},"
        "\"shared\":{\"data\":[1,2]}}],"
        "\"nodes\":[{\"op\":\"random_normal\",\"inputs\":[\"rng\"," SIZE1(4)
        ",{\"value\":5},{\"value\":{\"dtype\":\"float64\",\"shape\":[],\"data\":\"nan\"}}],"
        "\"outputs\":[\"rng2\",\"y\"]}],"
        "\"functions\":{\"draw\":{\"inputs\":[],\"outputs\":[\"y\"],\"updates\":{\"rng\":\"rng2\"}}}}";
    tg_graph *g = tu_load(js);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    tg_array *y = draw(f);
    assert_int_equal(tg_array_size(y), 4);
    for (int i = 0; i < 4; i++) assert_true(isnan(tg_array_get_flat(y, i)));
    check_state(f, 1, 2 + 2); /* as any 4 normals: (n + 1) / 2 counters (test_normal) */
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* The gradient of a draw by its parameters is undefined, as in Theano's
 * random ops (grad_undefined): grad or rop through a float sample back to
 * low/high or mean/std is a load error naming the draw, not a zero. The
 * gradient by what multiplies a sample drawn with fixed parameters is the
 * sample (d sum(x * z)/dx = z; dropout's d sum(x * mask)/dx = mask). */
static void test_grad_through_draw(void **state) {
    (void)state;
#define RNG_VAR "{\"id\":\"rng\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},\"shared\":{\"data\":[7,0]}}"
#define X_VAR(id) "{\"id\":\"" id "\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}"
    static const char *const bad[] = {
        /* grad by the mean */
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" RNG_VAR "," X_VAR("mu") "],\"nodes\":["
        "{\"op\":\"random_normal\",\"inputs\":[\"rng\"," SIZE1(4) ",\"mu\",{\"value\":2}],\"outputs\":[\"r2\",\"y\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"y\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"mu\"],\"outputs\":[\"g\"],\"attrs\":{\"disconnected\":\"ignore\"}}]}",
        /* grad by high, through an exp of the draw */
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" RNG_VAR "," X_VAR("hi") "],\"nodes\":["
        "{\"op\":\"random_uniform\",\"inputs\":[\"rng\"," SIZE1(4) ",{\"value\":0},\"hi\"],\"outputs\":[\"r2\",\"y\"]},"
        "{\"op\":\"exp\",\"inputs\":[\"y\"],\"outputs\":[\"e\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"e\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"hi\"],\"outputs\":[\"g\"]}]}",
        /* rop by the std */
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" RNG_VAR "," X_VAR("sd") "," X_VAR("v") "],\"nodes\":["
        "{\"op\":\"random_normal\",\"inputs\":[\"rng\"," SIZE1(4) ",{\"value\":0},\"sd\"],\"outputs\":[\"r2\",\"y\"]},"
        "{\"op\":\"rop\",\"inputs\":[\"y\",\"sd\",\"v\"],\"outputs\":[\"jv\"]}]}",
        /* a binomial drawn as floats, by p */
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" RNG_VAR "," X_VAR("p") "],\"nodes\":["
        "{\"op\":\"random_binomial\",\"inputs\":[\"rng\"," SIZE1(4) ",{\"value\":3},\"p\"],\"outputs\":[\"r2\",\"y\"],"
        "\"attrs\":{\"dtype\":\"float64\"}},"
        "{\"op\":\"sum\",\"inputs\":[\"y\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"p\"],\"outputs\":[\"g\"]}]}",
    };
    char msg[2048];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_load_fail(bad[i], msg, sizeof msg);
        if (!strstr(msg, "a random draw has no gradient by its parameters") || !strstr(msg, "differentiating nodes[0] (random_"))
            fail_msg("case %zu: %s", i, msg);
    }
    /* d sum(x * z + x * mask)/dx = z + mask, z ~ N(0, 1), mask ~ B(1, 0.5) (int64) */
    const char *ok =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" RNG_VAR ","
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[4]}}],\"nodes\":["
        "{\"op\":\"random_normal\",\"inputs\":[\"rng\"," SIZE1(4) ",{\"value\":0},{\"value\":1}],\"outputs\":[\"r2\",\"z\"]},"
        "{\"op\":\"random_binomial\",\"inputs\":[\"r2\"," SIZE1(4) ",{\"value\":1},{\"value\":0.5}],\"outputs\":[\"r3\",\"m\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"z\"],\"outputs\":[\"xz\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"m\"],\"outputs\":[\"xm\"]},"
        "{\"op\":\"add\",\"inputs\":[\"xz\",\"xm\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"s\"],\"outputs\":[\"c\"]},"
        "{\"op\":\"grad\",\"inputs\":[\"c\",\"x\"],\"outputs\":[\"gx\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"gx\",\"z\",\"m\"],\"updates\":{\"rng\":\"r3\"}}}}";
#undef RNG_VAR
#undef X_VAR
    tg_graph *g = tu_load(ok);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    int64_t shp[1] = {4};
    double xv[4] = {1, -2, 3, 0.5};
    tg_array *x = tu_f64(1, shp, xv), *out[3] = {0};
    if (tg_function_call(f, &x, out, ctx)) fail_msg("%s", tg_ctx_message(ctx));
    for (int i = 0; i < 4; i++) {
        double z = tg_array_get_flat(out[1], i), m = tg_array_get_flat(out[2], i);
        assert_true(m == 0 || m == 1);
        assert_true(tg_array_get_flat(out[0], i) == z + m);
    }
    for (int k = 0; k < 3; k++) tg_array_free(out[k]);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),  cmocka_unit_test(test_first_values),
        cmocka_unit_test(test_uniform),     cmocka_unit_test(test_dynamic_size),
        cmocka_unit_test(test_dynamic_size_u64),
        cmocka_unit_test(test_trials_too_large),
        cmocka_unit_test(test_normal),
        cmocka_unit_test(test_normal_bits),
        cmocka_unit_test(test_binomial),    cmocka_unit_test(test_multinomial),
        cmocka_unit_test(test_threads),     cmocka_unit_test(test_errors),
        cmocka_unit_test(test_narrow_counts),
        cmocka_unit_test(test_normal_nan_std), cmocka_unit_test(test_grad_through_draw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
