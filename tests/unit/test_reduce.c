/* Reductions on inputs too large for the JSON op tests
 * (tests/data/ops/reduce_*.json): the accuracy of long float sums, and the
 * threaded paths (one long row split across threads, leading axes
 * accumulated by bands of rows, many rows) with 1, 2 and 3 threads, where
 * ties and NaNs fall in different threads' chunks. Also the load errors of
 * the reduction attributes. Expected values are closed forms. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor.h"
#include "testutil.h"

static const int THREADS[] = {1, 2, 3};
#define NTHREADS (int)(sizeof THREADS / sizeof THREADS[0])

/* Compile op(attrs) over an input with x's dtype and rank (lengths
 * unknown), fed through `view` when given (a node JSON from x to v), call
 * it on x and return the result. */
static tg_array *reduce_view(const char *op, const char *attrs, const char *view,
                             const tg_array *x) {
    char shape[64] = "", json[2048];
    size_t k = 0;
    for (int d = 0; d < x->ndim; d++) k += (size_t)snprintf(shape + k, sizeof shape - k, "%snull", d ? "," : "");
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,"
             "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[%s]}}],"
             "\"nodes\":[%s%s{\"op\":\"%s\",\"inputs\":[\"%s\"],\"outputs\":[\"y\"]%s%s}],"
             "\"functions\":{\"main\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}",
             tg_dtype_name(x->dtype), shape, view ? view : "", view ? "," : "", op,
             view ? "v" : "x", attrs ? ",\"attrs\":" : "", attrs ? attrs : "");
    tg_graph *g = tu_load(json);
    tg_array *in[1] = {(tg_array *)x}, *out[1] = {0};
    tu_call(g, NULL, in, out);
    tg_graph_free(g);
    return out[0];
}

static tg_array *reduce(const char *op, const char *attrs, const tg_array *x) {
    return reduce_view(op, attrs, NULL, x);
}

static double scalar_of(tg_array *y) {
    assert_non_null(y);
    assert_int_equal(y->ndim, 0);
    double v = tg_array_get_flat(y, 0);
    tg_array_free(y);
    return v;
}

static int64_t int_of(tg_array *y) {
    assert_non_null(y);
    assert_int_equal(y->ndim, 0);
    assert_true(y->dtype == TG_INT64 || y->dtype == TG_UINT64);
    int64_t v;
    memcpy(&v, y->data, 8);
    tg_array_free(y);
    return v;
}

static void assert_near(double got, double want, double rtol) {
    if (!(fabs(got - want) <= rtol * fabs(want)))
        fail_msg("got %.17g, want %.17g (rtol %g)", got, want, rtol);
}

/* 10^6 copies of 0.1f: naive float32 accumulation drifts by about 1%;
 * NumPy's pairwise summation (and tg's) stays within a few ulps. */
static void test_float32_long_sum(void **state) {
    (void)state;
    const int64_t n = 1000000;
    tg_array *x = tg_array_new(TG_FLOAT32, 1, &n);
    float *p = (float *)x->data;
    for (int64_t i = 0; i < n; i++) p[i] = 0.1f;
    const double want = (double)n * (double)0.1f;
    int64_t shp2[2] = {1000, 1000};
    tg_array *m = tg_array_reshape(x, 2, shp2, NULL);
    assert_non_null(m);
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        tg_array *y = reduce("sum", NULL, x);
        assert_int_equal(y->dtype, TG_FLOAT32);
        assert_near(scalar_of(y), want, 1e-6);
        assert_near(scalar_of(reduce("mean", NULL, x)), (double)0.1f, 1e-6);
        assert_near(scalar_of(reduce("sum", "{\"axis\":[0,1]}", m)), want, 1e-6);
        /* Over the leading axis (accumulated by rows) and the last one. */
        for (int ax = 0; ax < 2; ax++) {
            tg_array *r = reduce("sum", ax ? "{\"axis\":1}" : "{\"axis\":0}", m);
            assert_int_equal(r->ndim, 1);
            assert_int_equal(r->shape[0], 1000);
            for (int64_t i = 0; i < 1000; i++) assert_near(tg_array_get_flat(r, i), want / 1000, 1e-6);
            tg_array_free(r);
        }
        /* Transposed: the reduction copies or walks strides. */
        assert_near(scalar_of(reduce_view("sum", NULL,
                                          "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"v\"]}",
                                          m)),
                    want, 1e-6);
    }
    tg_array_free(m);
    tg_array_free(x);
    omp_set_num_threads(2);
}

/* x[i] = i: every partial sum is an integer below 2^53, so the sum is
 * exact whatever the order. An odd length splits unevenly. */
static void test_float64_sum_exact(void **state) {
    (void)state;
    const int64_t n = 1000003;
    tg_array *x = tg_array_new(TG_FLOAT64, 1, &n);
    double *p = (double *)x->data;
    for (int64_t i = 0; i < n; i++) p[i] = (double)i;
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        assert_true(scalar_of(reduce("sum", NULL, x)) == (double)n * (double)(n - 1) / 2);
        assert_true(scalar_of(reduce("mean", NULL, x)) == (double)(n - 1) / 2);
        assert_near(scalar_of(reduce("var", NULL, x)), ((double)n * (double)n - 1) / 12, 1e-12);
        assert_near(scalar_of(reduce("std", "{\"ddof\":1}", x)),
                    sqrt((double)n * (double)(n + 1) / 12), 1e-12);
    }
    tg_array_free(x);
    omp_set_num_threads(2);
}

/* The max and min of a long row whose extreme is zero, held as -0.0 and
 * +0.0 in blocks (a ReLU's output, negated): the same zero, bit for bit,
 * whatever the number of threads (README: reductions give the same bits
 * whatever OMP_NUM_THREADS). One piece per thread gave -0.0 with 1 to 5
 * threads and +0.0 with 8. Also reversed (the strided path) and for a row
 * of -|sin i| with zeros of both signs. */
static void test_extreme_zero_sign(void **state) {
    (void)state;
    static const int threads[] = {1, 2, 3, 5, 8};
    static const char rev[] = "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],"
                              "\"attrs\":{\"index\":[{\"start\":null,\"stop\":null,\"step\":-1}]}}";
    const int64_t n = 65536;
    for (int d = 0; d < 2; d++)
        for (int pat = 0; pat < 2; pat++) {
            tg_array *x = tg_array_new(d ? TG_FLOAT64 : TG_FLOAT32, 1, &n);
            for (int64_t i = 0; i < n; i++) {
                double v;
                if (!pat) v = (i / 8192) % 2 == 0 ? -0.0 : 0.0;
                else if (i % 10 < 3) v = (i * 7919) % 3 == 0 ? -0.0 : 0.0;
                else v = -fabs(sin((double)i));
                if (d) ((double *)x->data)[i] = v;
                else ((float *)x->data)[i] = (float)v;
            }
            int first[2][2] = {{-1, -1}, {-1, -1}};
            for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                omp_set_num_threads(threads[t]);
                for (int op = 0; op < 2; op++)
                    for (int view = 0; view < 2; view++) {
                        double v = scalar_of(reduce_view(op ? "min" : "max", NULL, view ? rev : NULL, x));
                        if (op == 0 || !pat) assert_true(v == 0);
                        else assert_true(v < -0.99 && v >= -1);
                        int sb = signbit(v) != 0;
                        if (first[op][view] < 0) first[op][view] = sb;
                        else if (first[op][view] != sb)
                            fail_msg("%s %s of %s zeros (%s): %s0.0 with %d threads, %s0.0 with 1", op ? "min" : "max",
                                     view ? "reversed" : "row", pat ? "scattered" : "blocked", d ? "float64" : "float32",
                                     sb ? "-" : "+", threads[t], first[op][view] ? "-" : "+");
                    }
            }
            tg_array_free(x);
        }
    omp_set_num_threads(2);
}

/* Two-pass variance: values 1e9 + (0 or 1) have variance exactly 0.25; the
 * one-pass E[x^2] - E[x]^2 loses it entirely. */
static void test_var_two_pass(void **state) {
    (void)state;
    const int64_t n = 200000;
    tg_array *x = tg_array_new(TG_FLOAT64, 1, &n);
    double *p = (double *)x->data;
    for (int64_t i = 0; i < n; i++) p[i] = 1e9 + (double)(i % 2);
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        assert_near(scalar_of(reduce("var", NULL, x)), 0.25, 1e-9);
        assert_near(scalar_of(reduce("std", NULL, x)), 0.5, 1e-9);
    }
    tg_array_free(x);
    omp_set_num_threads(2);
}

/* Sums over leading axes of a contiguous array (the gradient of a
 * broadcast): x[r, j] = r * (j + 1). */
static void test_leading_axes(void **state) {
    (void)state;
    const int64_t rows = 70001, shp[2] = {rows, 3}, shp3[3] = {7, 10000, 3};
    tg_array *x = tg_array_new(TG_FLOAT64, 2, shp);
    tg_array *x3 = tg_array_new(TG_FLOAT32, 3, shp3);
    double *p = (double *)x->data;
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < 3; j++) p[r * 3 + j] = (double)r * (j + 1);
    float *q = (float *)x3->data;
    for (int64_t i = 0; i < 70000 * 3; i++) q[i] = (float)(i % 3);
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        tg_array *s = reduce("sum", "{\"axis\":0}", x);
        tg_array *m = reduce("mean", "{\"axis\":0,\"keepdims\":true}", x);
        tg_array *s3 = reduce("sum", "{\"axis\":[1,0]}", x3);
        assert_int_equal(m->ndim, 2);
        assert_int_equal(m->shape[0], 1);
        assert_int_equal(s3->dtype, TG_FLOAT32);
        for (int j = 0; j < 3; j++) {
            assert_true(tg_array_get_flat(s, j) == (j + 1) * (double)rows * (double)(rows - 1) / 2);
            assert_near(tg_array_get_flat(m, j), (j + 1) * (double)(rows - 1) / 2, 1e-12);
            assert_true(tg_array_get_flat(s3, j) == 70000.0 * j);
        }
        tg_array_free(s);
        tg_array_free(m);
        tg_array_free(s3);
    }
    tg_array_free(x);
    tg_array_free(x3);
    omp_set_num_threads(2);
}

/* Many rows reduced over the last axis, in parallel over rows. */
static void test_many_rows(void **state) {
    (void)state;
    const int64_t shp[2] = {1000, 999};
    tg_array *x = tg_array_new(TG_INT32, 2, shp);
    int32_t *p = (int32_t *)x->data;
    for (int64_t r = 0; r < 1000; r++)
        for (int64_t c = 0; c < 999; c++) p[r * 999 + c] = (int32_t)(r - c);
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        tg_array *s = reduce("sum", "{\"axis\":-1}", x);
        tg_array *mx = reduce("max", "{\"axis\":1}", x);
        tg_array *am = reduce("argmin", "{\"axis\":1}", x);
        tg_array *mean = reduce("mean", "{\"axis\":0}", x);
        assert_int_equal(s->dtype, TG_INT64);
        assert_int_equal(mx->dtype, TG_INT32);
        for (int64_t r = 0; r < 1000; r++) {
            assert_true(tg_array_get_flat(s, r) == 999.0 * (double)r - 999.0 * 998 / 2);
            assert_true(tg_array_get_flat(mx, r) == (double)r);
            assert_true(tg_array_get_flat(am, r) == 998);
        }
        for (int64_t c = 0; c < 999; c++) assert_near(tg_array_get_flat(mean, c), 499.5 - (double)c, 1e-12);
        tg_array_free(s);
        tg_array_free(mx);
        tg_array_free(am);
        tg_array_free(mean);
    }
    tg_array_free(x);
    omp_set_num_threads(2);
}

/* max/min/argmax/argmin of one long row: ties in different chunks go to
 * the first index; a NaN anywhere wins, the first NaN for argmax. */
static void check_extremes(tg_dtype dt) {
    const int64_t n = 600001;
    tg_array *x = tg_array_new(dt, 1, &n);
    for (int64_t i = 0; i < n; i++) tg_store_f64(dt, (char *)x->data + i * x->strides[0], (double)(i % 1000) - 500);
    /* Ties for the max (499 at i % 1000 == 999) and for the min. */
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        assert_true(scalar_of(reduce("max", NULL, x)) == 499);
        assert_true(scalar_of(reduce("min", NULL, x)) == -500);
        assert_int_equal(int_of(reduce("argmax", NULL, x)), 999);
        assert_int_equal(int_of(reduce("argmin", NULL, x)), 0);
    }
    /* A new unique extreme late in the array. */
    tg_store_f64(dt, (char *)x->data + (n - 7) * x->strides[0], 1000);
    tg_store_f64(dt, (char *)x->data + (n - 9) * x->strides[0], -1000);
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        assert_true(scalar_of(reduce("max", NULL, x)) == 1000);
        assert_int_equal(int_of(reduce("argmax", NULL, x)), n - 7);
        assert_int_equal(int_of(reduce("argmin", NULL, x)), n - 9);
    }
    if (tg_dtype_is_float(dt)) {
        tg_store_f64(dt, (char *)x->data + (n - 5) * x->strides[0], NAN);
        tg_store_f64(dt, (char *)x->data + (n - 3) * x->strides[0], NAN);
        for (int t = 0; t < NTHREADS; t++) {
            omp_set_num_threads(THREADS[t]);
            assert_true(isnan(scalar_of(reduce("max", NULL, x))));
            assert_true(isnan(scalar_of(reduce("min", NULL, x))));
            assert_int_equal(int_of(reduce("argmax", NULL, x)), n - 5);
            assert_int_equal(int_of(reduce("argmin", NULL, x)), n - 5);
        }
        tg_store_f64(dt, x->data, NAN);
        for (int t = 0; t < NTHREADS; t++) {
            omp_set_num_threads(THREADS[t]);
            assert_true(isnan(scalar_of(reduce("max", NULL, x))));
            assert_int_equal(int_of(reduce("argmax", NULL, x)), 0);
        }
        /* All -inf: the max is -inf, found at index 0. */
        for (int64_t i = 0; i < n; i++) tg_store_f64(dt, (char *)x->data + i * x->strides[0], -INFINITY);
        for (int t = 0; t < NTHREADS; t++) {
            omp_set_num_threads(THREADS[t]);
            assert_true(scalar_of(reduce("max", NULL, x)) == -INFINITY);
            assert_int_equal(int_of(reduce("argmax", NULL, x)), 0);
            assert_int_equal(int_of(reduce("argmin", NULL, x)), 0);
            assert_true(scalar_of(reduce("logsumexp", NULL, x)) == -INFINITY);
        }
    }
    tg_array_free(x);
    omp_set_num_threads(2);
}

/* max/min/argmax/argmin of rows of every length around the kernels'
 * lane counts (32 lanes of float64, 64 of float32, blocks of 1024 for the
 * arg forms) and tails, a special value at every position of its row
 * (row p holds it at p; the last row none): NaN, NaN with the sign bit
 * set, inf, -inf. Against a plain loop: NaN wins (the first NaN for the
 * arg forms), inf is a number. */
static void check_extremes_positions(tg_dtype dt) {
    static const int64_t LENS[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97,
                                   127, 128, 129, 200, 1023, 1024, 1025, 2049};
    const double specials[] = {NAN, -NAN, INFINITY, -INFINITY};
    static const char *const OPS[] = {"max", "min", "argmax", "argmin"};
    for (size_t li = 0; li < sizeof LENS / sizeof LENS[0]; li++) {
        const int64_t L = LENS[li], rows = L + 1, shp[2] = {rows, L};
        for (int sp = 0; sp < 4; sp++) {
            tg_array *x = tg_array_new(dt, 2, shp);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < L; c++) {
                    /* distinct values, the extremes somewhere inside */
                    double v = (double)((c * 37 + r * 11) % 101) - 50;
                    tg_store_f64(dt, (char *)x->data + (r * L + c) * (int64_t)tg_dtype_size(dt), c == r ? specials[sp] : v);
                }
            for (int o = 0; o < 4; o++) {
                tg_array *y = reduce(OPS[o], "{\"axis\":1}", x);
                bool is_max = o % 2 == 0, arg = o >= 2;
                for (int64_t r = 0; r < rows; r++) {
                    double m = 0;
                    int64_t at = -1;
                    for (int64_t c = 0; c < L; c++) {
                        double v = tg_array_get_flat(x, r * L + c);
                        if (v != v) {
                            m = v;
                            at = c;
                            break;
                        }
                        if (at < 0 || (is_max ? v > m : v < m)) {
                            m = v;
                            at = c;
                        }
                    }
                    double got = tg_array_get_flat(y, r);
                    if (arg ? got != (double)at : !(got == m || (got != got && m != m)))
                        fail_msg("%s %s, rows of %lld, special %g at %lld: row %lld gave %g, want %g",
                                 OPS[o], tg_dtype_name(dt), (long long)L, specials[sp], (long long)r, (long long)r,
                                 got, arg ? (double)at : m);
                }
                tg_array_free(y);
            }
            tg_array_free(x);
        }
    }
}

static void test_extremes_positions(void **state) {
    (void)state;
    check_extremes_positions(TG_FLOAT64);
    check_extremes_positions(TG_FLOAT32);
}

/* argmax/argmin and max/min of rows full of ties (values in -3..3),
 * every length around four vectors of lanes (32 float64, 64 float32) and
 * their tails, and rows whose running sum is not a number without a NaN
 * in them (an infinity of each sign; huge values that overflow both ways;
 * all infinities of the extreme's sign), with -0.0 beside 0.0: against a
 * plain loop (the first index of the extreme, and its value; -0.0 ==
 * 0.0). The ctest entry unit.test_reduce_portable runs this file again
 * with TG_REDUCE_PORTABLE set. */
static void check_arg_ties(tg_dtype dt) {
    static const int64_t LENS[] = {7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 47, 48, 63, 64, 65, 71, 95, 96, 97, 127, 128, 129, 130,
                                   191, 192, 193, 255, 256, 257, 1000, 1023, 1024, 1025, 4099};
    const double big = dt == TG_FLOAT64 ? 1e308 : 3e38;
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (size_t li = 0; li < sizeof LENS / sizeof LENS[0]; li++) {
        const int64_t L = LENS[li], rows = 24, shp[2] = {rows, L};
        tg_array *x = tg_array_new(dt, 2, shp);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < L; c++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                double v = (double)(int)(st % 7) - 3;
                if (v == 0 && (st >> 8) % 2) v = -0.0;
                int64_t at = (int64_t)((st >> 20) % (uint64_t)L);
                if (r % 6 == 1 && c == at) v = INFINITY; /* with a -inf: the sum is NaN */
                if (r % 6 == 1 && c == (at + 7) % L) v = -INFINITY;
                if (r % 6 == 2) v = (st >> 30) % 2 ? big : -big; /* overflows both ways */
                if (r % 6 == 3) v = (st >> 30) % 3 ? INFINITY : 1.0;
                if (r % 6 == 4) v = (st >> 30) % 3 ? -INFINITY : -1.0;
                tg_store_f64(dt, (char *)x->data + (r * L + c) * (int64_t)tg_dtype_size(dt), v);
            }
        static const char *const OPS[] = {"argmax", "argmin", "max", "min"};
        for (int o = 0; o < 4; o++) {
            tg_array *y = reduce(OPS[o], "{\"axis\":1}", x);
            bool is_min = o % 2;
            for (int64_t r = 0; r < rows; r++) {
                int64_t at = 0;
                for (int64_t c = 1; c < L; c++) {
                    double v = tg_array_get_flat(x, r * L + c), m = tg_array_get_flat(x, r * L + at);
                    if (is_min ? v < m : v > m) at = c;
                }
                double got = tg_array_get_flat(y, r), want = o < 2 ? (double)at : tg_array_get_flat(x, r * L + at);
                if (got != want)
                    fail_msg("%s %s, rows of %lld: row %lld gave %g, want %g", OPS[o], tg_dtype_name(dt),
                             (long long)L, (long long)r, got, want);
            }
            tg_array_free(y);
        }
        tg_array_free(x);
    }
}

static void test_arg_ties(void **state) {
    (void)state;
    check_arg_ties(TG_FLOAT64);
    check_arg_ties(TG_FLOAT32);
}

/* prod over contiguous rows (the typed loops) and strided ones (a
 * transposed view): the product in order, in double, then rounded to the
 * dtype, bit for bit against the same loop here. */
static void test_prod_in_order(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        tg_dtype dt = d ? TG_FLOAT32 : TG_FLOAT64;
        const int64_t shp[2] = {37, 101};
        tg_array *x = tg_array_new(dt, 2, shp);
        for (int64_t i = 0; i < 37 * 101; i++)
            tg_store_f64(dt, (char *)x->data + i * (int64_t)tg_dtype_size(dt), 1 + ((i * 7919) % 201 - 100) * 1e-3);
        /* t: 0 rows, 1 rows of a transposed view, 2 over axis 0 (the
         * columns' accumulators, row after row) */
        for (int t = 0; t < 3; t++) {
            tg_array *y = reduce_view("prod", t == 2 ? "{\"axis\":0}" : "{\"axis\":1}",
                                      t == 1 ? "{\"op\":\"dimshuffle\",\"inputs\":[\"x\"],"
                                               "\"outputs\":[\"v\"],\"attrs\":{\"order\":[1,0]}}"
                                             : NULL,
                                      x);
            int64_t rows = t ? 101 : 37, len = t ? 37 : 101;
            for (int64_t r = 0; r < rows; r++) {
                double v = 1;
                for (int64_t c = 0; c < len; c++) v *= tg_array_get_flat(x, t ? c * 101 + r : r * 101 + c);
                char want[8];
                tg_store_f64(dt, want, v);
                if (memcmp(want, (char *)y->data + r * (int64_t)tg_dtype_size(dt), tg_dtype_size(dt)))
                    fail_msg("prod %s%s, row %lld: %.17g, want %.17g", tg_dtype_name(dt),
                             t == 1 ? " (strided)" : t == 2 ? " (axis 0)" : "",
                             (long long)r, tg_array_get_flat(y, r), v);
            }
            tg_array_free(y);
        }
        tg_array_free(x);
    }
}

/* all/any over float rows of lengths around the stretches of 256 the
 * typed loop counts at once: row r of a matrix of ones holds a zero at
 * column r (the last row none), and of a matrix of zeros a nonzero (NaN
 * in every third row: NaN is true, as in NumPy) at column r; against the
 * definition, contiguous and through a transposed view. */
static void test_all_any_float_rows(void **state) {
    (void)state;
    static const int64_t LENS[] = {1, 7, 255, 256, 257, 511, 513};
    for (int d = 0; d < 2; d++)
        for (size_t li = 0; li < sizeof LENS / sizeof LENS[0]; li++) {
            tg_dtype dt = d ? TG_FLOAT32 : TG_FLOAT64;
            const int64_t L = LENS[li], shp[2] = {L + 1, L};
            tg_array *ones = tg_array_new(dt, 2, shp), *zeros = tg_array_new(dt, 2, shp);
            for (int64_t r = 0; r <= L; r++)
                for (int64_t c = 0; c < L; c++) {
                    int64_t at = (r * L + c) * (int64_t)tg_dtype_size(dt);
                    tg_store_f64(dt, (char *)ones->data + at, c == r ? 0 : 1);
                    tg_store_f64(dt, (char *)zeros->data + at, c == r ? (r % 3 ? 2.5 : NAN) : 0);
                }
            for (int t = 0; t < 2; t++) {
                const char *view = t ? "{\"op\":\"dimshuffle\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],"
                                       "\"attrs\":{\"order\":[1,0]}}" : NULL;
                /* transposed: reduce over the rows' axis of the view, axis 0 */
                const char *axis = t ? "{\"axis\":0}" : "{\"axis\":1}";
                tg_array *a = reduce_view("all", axis, view, ones), *y = reduce_view("any", axis, view, zeros);
                for (int64_t r = 0; r <= L; r++) {
                    bool want_all = r == L, want_any = r < L; /* row r of x, either way */
                    if ((tg_array_get_flat(a, r) != 0) != want_all || (tg_array_get_flat(y, r) != 0) != want_any)
                        fail_msg("%s rows of %lld%s, row %lld: all %g (want %d), any %g (want %d)", tg_dtype_name(dt),
                                 (long long)L, t ? " transposed" : "", (long long)r, tg_array_get_flat(a, r),
                                 want_all, tg_array_get_flat(y, r), want_any);
                }
                tg_array_free(a);
                tg_array_free(y);
            }
            tg_array_free(ones);
            tg_array_free(zeros);
        }
}

static void test_extremes_float64(void **state) {
    (void)state;
    check_extremes(TG_FLOAT64);
}

static void test_extremes_float32(void **state) {
    (void)state;
    check_extremes(TG_FLOAT32);
}

static void test_extremes_int16(void **state) {
    (void)state;
    check_extremes(TG_INT16);
}

/* Reductions over leading and middle axes with many columns (rows stream
 * through per-column accumulators): against plain loops over each column,
 * with NaNs and ties inside columns. */
static double colval(int64_t r, int64_t c) { return (double)((r * 7 + c * 13) % 101) - 50; }

/* float32 (dt) runs the extremes (which compare float32 rows as they
 * are), all and any, whose results are exact there too, and logsumexp
 * (within float32's rounding of the result). `specials`: NaN, infinities
 * and signed zeros in columns 3, 5 and 6; without them every column's
 * max is finite (logsumexp's second pass then subtracts it everywhere). */
static void check_columns(const int64_t *shape, int axis, const char *attrs, tg_dtype dt, bool specials) {
    int64_t A = axis ? shape[0] : 1, R = shape[axis], C = shape[axis + 1];
    tg_array *x64 = tg_array_new(TG_FLOAT64, axis + 2, shape), *x = x64;
    double *p = (double *)x64->data;
    for (int64_t a = 0; a < A; a++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) p[(a * R + r) * C + c] = colval(r + a, c);
    if (specials) {
        p[(R / 2) * C + 3] = NAN; /* block a = 0, column 3: the first NaN at R/2 */
        p[(R - 2) * C + 3] = NAN;
        p[(R / 3) * C + 5] = INFINITY; /* column 5: +inf once, -inf twice */
        p[(R / 4) * C + 5] = -INFINITY;
        p[(R - 1) * C + 5] = -INFINITY;
        for (int64_t r = 0; r < R; r++) p[r * C + 6] = r % 2 ? 0.0 : -0.0; /* column 6: no nonzero */
    }
    if (dt == TG_FLOAT32) {
        x = tg_array_new(TG_FLOAT32, axis + 2, shape);
        for (int64_t i = 0; i < tg_array_size(x); i++) ((float *)x->data)[i] = (float)p[i];
    }
    static const char *const all_ops[] = {"sum", "max", "argmax", "argmin", "var", "logsumexp", "all", "min", "any"};
    static const char *const f32_ops[] = {"max", "argmax", "argmin", "min", "all", "any", "logsumexp"};
    const char *const *ops = dt == TG_FLOAT32 ? f32_ops : all_ops;
    const size_t nops = dt == TG_FLOAT32 ? 7 : 9;
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        for (size_t o = 0; o < nops; o++) {
            tg_array *y = reduce(ops[o], attrs, x);
            assert_int_equal(tg_array_size(y), A * C);
            for (int64_t a = 0; a < A; a++)
                for (int64_t c = 0; c < C; c++) {
                    /* Reference: one plain pass (two for var and logsumexp). */
                    const double *q = p + a * R * C + c;
                    double s = 0, mx = -INFINITY, mean, ss = 0, le = 0;
                    int64_t amax = -1, amin = -1, nan_at = -1;
                    bool all = true, any = false;
                    for (int64_t r = 0; r < R; r++) {
                        double v = q[r * C];
                        s += v;
                        all = all && v != 0;
                        any = any || v != 0;
                        if (v != v) {
                            if (nan_at < 0) nan_at = r;
                            continue;
                        }
                        if (amax < 0 || v > q[amax * C]) amax = r;
                        if (amin < 0 || v < q[amin * C]) amin = r;
                    }
                    if (nan_at < 0) mx = q[amax * C];
                    mean = s / (double)R;
                    for (int64_t r = 0; r < R; r++) {
                        ss += (q[r * C] - mean) * (q[r * C] - mean);
                        le += exp(q[r * C] - mx);
                    }
                    double want;
                    const char *op = ops[o];
                    /* (the infinities of column 5 are for the extremes) */
                    if (specials && a == 0 && c == 5 && !strstr(op, "max") && !strstr(op, "min") && strcmp(op, "all") &&
                        strcmp(op, "any"))
                        continue;
                    if (!strcmp(op, "sum")) want = s;
                    else if (!strcmp(op, "max")) want = nan_at >= 0 ? NAN : mx;
                    else if (!strcmp(op, "min")) want = nan_at >= 0 ? NAN : q[amin * C];
                    else if (!strcmp(op, "argmax")) want = (double)(nan_at >= 0 ? nan_at : amax);
                    else if (!strcmp(op, "argmin")) want = (double)(nan_at >= 0 ? nan_at : amin);
                    else if (!strcmp(op, "var")) want = ss / (double)R;
                    else if (!strcmp(op, "logsumexp")) want = nan_at >= 0 ? NAN : mx + log(le);
                    else if (!strcmp(op, "any")) want = any;
                    else want = all;
                    double got = tg_array_get_flat(y, a * C + c);
                    /* (a float32 logsumexp: the float nearest, or one beside it) */
                    double tol = dt == TG_FLOAT32 && !strcmp(op, "logsumexp") ? 1.2e-7 : 1e-12;
                    if (want != want ? got == got : !(got == want || fabs(got - want) <= tol * fabs(want)))
                        fail_msg("%s %s, %d threads: [%lld, %lld]: got %.17g, want %.17g", ops[o],
                                 attrs, THREADS[t], (long long)a, (long long)c, got, want);
                }
            tg_array_free(y);
        }
    }
    if (x != x64) tg_array_free(x);
    tg_array_free(x64);
    omp_set_num_threads(2);
}

static void test_columns(void **state) {
    (void)state;
    const int64_t lead[2] = {3001, 40}, mid[3] = {3, 2001, 24}, wide[2] = {40, 20000}, few[2] = {5000, 7};
    for (int d = 0; d < 2; d++) {
        tg_dtype dt = d ? TG_FLOAT32 : TG_FLOAT64;
        check_columns(lead, 0, "{\"axis\":0}", dt, true);
        check_columns(mid, 1, "{\"axis\":1}", dt, true);
        check_columns(wide, 0, "{\"axis\":-2}", dt, true);
        check_columns(few, 0, "{\"axis\":0}", dt, true);
        check_columns(lead, 0, "{\"axis\":0}", dt, false);
        check_columns(mid, 1, "{\"axis\":1}", dt, false);
    }
}

/* logsumexp over leading or middle axes (the column path) of columns whose
 * spread passes 709: the shift is the column's max. float32 shifted by the
 * column's min and gave inf (a column of -1e30 and 0s; one with a 1000)
 * or -inf (-inf and a 3). A logical [A, R, C] reduced over R, stored as it
 * is or as [R, A, C] and transposed (tr), fed through `view` (a reversed
 * one: lse does not depend on the order), 1, 2 and 3 threads; the shapes
 * give one band, bands of rows, and blocks of columns. */
static void check_lse_spread(int nd, const int64_t *shape, int64_t A, int64_t R, int64_t C, bool tr,
                             const char *attrs, const char *view, tg_dtype dt) {
    tg_array *x = tg_array_new(dt, nd, shape);
    for (int64_t a = 0; a < A; a++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                double v = colval(r + a, c);
                if (c == 0 && r == 0) v = -1e30;
                if (c == 1) v = r == R / 2 ? 0 : -1e30;
                if (c == 2 && r == R / 3) v = 1000;
                if (c == 3) v = -INFINITY;
                if (c == 4) v = r == R - 1 ? 3 : -INFINITY;
                int64_t i = tr ? (r * A + a) * C + c : (a * R + r) * C + c;
                tg_store_f64(dt, (char *)x->data + i * (int64_t)tg_dtype_size(dt), v);
            }
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        tg_array *y = reduce_view("logsumexp", attrs, view, x);
        assert_non_null(y);
        assert_int_equal(tg_array_size(y), A * C);
        for (int64_t a = 0; a < A; a++)
            for (int64_t c = 0; c < C; c++) {
                /* Reference: NumPy's m + log(sum(exp(x - m))), m the max. */
                double mx = -INFINITY, le = 0;
                for (int64_t r = 0; r < R; r++)
                    mx = fmax(mx, tg_array_get_flat(x, tr ? (r * A + a) * C + c : (a * R + r) * C + c));
                for (int64_t r = 0; r < R && isfinite(mx); r++)
                    le += exp(tg_array_get_flat(x, tr ? (r * A + a) * C + c : (a * R + r) * C + c) - mx);
                double want = isfinite(mx) ? mx + log(le) : mx, got = tg_array_get_flat(y, a * C + c);
                double tol = dt == TG_FLOAT32 ? 1.2e-7 : 1e-12;
                if (!(got == want || fabs(got - want) <= tol * fabs(want)))
                    fail_msg("logsumexp %s %s %s, %d threads: [%lld, %lld]: got %.17g, want %.17g",
                             tg_dtype_name(dt), attrs, view ? view : "", THREADS[t], (long long)a,
                             (long long)c, got, want);
            }
        tg_array_free(y);
    }
    tg_array_free(x);
    omp_set_num_threads(2);
}

static void test_columns_lse_spread(void **state) {
    (void)state;
    static const char rev[] = "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],"
                              "\"attrs\":{\"index\":[{\"start\":null,\"stop\":null,\"step\":-1}]}}";
    static const char swap01[] = "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],"
                                 "\"attrs\":{\"axes\":[1,0,2]}}";
    const int64_t tiny[2] = {2, 8}, odd[2] = {257, 33}, lead[2] = {3001, 40}, mid[3] = {3, 2001, 24},
                  wide[2] = {40, 20000}, small3[3] = {3, 5, 16}, midT[3] = {2001, 3, 24};
    for (int d = 0; d < 2; d++) {
        tg_dtype dt = d ? TG_FLOAT64 : TG_FLOAT32;
        check_lse_spread(2, tiny, 1, 2, 8, false, "{\"axis\":0}", NULL, dt);
        check_lse_spread(2, odd, 1, 257, 33, false, "{\"axis\":0}", NULL, dt);
        check_lse_spread(2, lead, 1, 3001, 40, false, "{\"axis\":0}", NULL, dt);
        check_lse_spread(2, lead, 1, 3001, 40, false, "{\"axis\":0,\"keepdims\":true}", rev, dt);
        check_lse_spread(3, mid, 3, 2001, 24, false, "{\"axis\":1}", NULL, dt);
        check_lse_spread(3, mid, 1, 3 * 2001, 24, false, "{\"axis\":[0,1],\"keepdims\":true}", NULL, dt);
        check_lse_spread(3, midT, 3, 2001, 24, true, "{\"axis\":1}", swap01, dt);
        check_lse_spread(2, wide, 1, 40, 20000, false, "{\"axis\":-2}", NULL, dt);
        check_lse_spread(3, small3, 1, 15, 16, false, "{\"axis\":[0,1]}", NULL, dt);
    }
}

/* The same for integers: uint64 extremes above 2^63 (compared unsigned),
 * int64 sums that wrap. */
static void test_columns_int(void **state) {
    (void)state;
    const int64_t shp[2] = {9000, 16};
    tg_array *u = tg_array_new(TG_UINT64, 2, shp), *s = tg_array_new(TG_INT64, 2, shp);
    uint64_t *pu = (uint64_t *)u->data;
    int64_t *ps = (int64_t *)s->data;
    for (int64_t r = 0; r < 9000; r++)
        for (int64_t c = 0; c < 16; c++) {
            pu[r * 16 + c] = (uint64_t)((r * 31 + c * 17) % 997) << 54;
            ps[r * 16 + c] = INT64_MAX - r * c;
        }
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        tg_array *mx = reduce("max", "{\"axis\":0}", u), *am = reduce("argmin", "{\"axis\":0}", u);
        tg_array *sm = reduce("sum", "{\"axis\":0}", s);
        for (int64_t c = 0; c < 16; c++) {
            uint64_t want = 0, lo = UINT64_MAX, sum = 0;
            int64_t wi = 0;
            for (int64_t r = 0; r < 9000; r++) {
                if (pu[r * 16 + c] > want) want = pu[r * 16 + c];
                if (pu[r * 16 + c] < lo) {
                    lo = pu[r * 16 + c];
                    wi = r;
                }
                sum += (uint64_t)ps[r * 16 + c];
            }
            assert_true(((uint64_t *)mx->data)[c] == want);
            assert_true(((int64_t *)am->data)[c] == wi);
            assert_true((uint64_t)((int64_t *)sm->data)[c] == sum);
        }
        tg_array_free(mx);
        tg_array_free(am);
        tg_array_free(sm);
    }
    tg_array_free(u);
    tg_array_free(s);
    omp_set_num_threads(2);
}

/* Integer sums wrap modulo 2^64 as NumPy's int64/uint64 do. */
static void test_int_wrap(void **state) {
    (void)state;
    const int64_t n = 100003;
    tg_array *x = tg_array_new(TG_INT64, 1, &n), *u = tg_array_new(TG_UINT32, 1, &n);
    int64_t *p = (int64_t *)x->data;
    uint32_t *q = (uint32_t *)u->data;
    for (int64_t i = 0; i < n; i++) {
        p[i] = INT64_MAX - i;
        q[i] = UINT32_MAX;
    }
    uint64_t want = 0;
    for (int64_t i = 0; i < n; i++) want += (uint64_t)INT64_MAX - (uint64_t)i;
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        assert_true((uint64_t)int_of(reduce("sum", NULL, x)) == want);
        tg_array *s = reduce("sum", NULL, u);
        assert_int_equal(s->dtype, TG_UINT64);
        assert_true((uint64_t)int_of(s) == (uint64_t)n * UINT32_MAX);
    }
    tg_array_free(x);
    tg_array_free(u);
    omp_set_num_threads(2);
}

/* logsumexp of a long row: log(n) for zeros; a large value dominates
 * without overflow. */
static void test_logsumexp_long(void **state) {
    (void)state;
    const int64_t n = 1000000;
    tg_array *x = tg_array_new(TG_FLOAT64, 1, &n);
    memset(x->data, 0, (size_t)n * 8);
    for (int t = 0; t < NTHREADS; t++) {
        omp_set_num_threads(THREADS[t]);
        assert_near(scalar_of(reduce("logsumexp", NULL, x)), log((double)n), 1e-12);
    }
    ((double *)x->data)[n / 2] = 1e4;
    assert_near(scalar_of(reduce("logsumexp", NULL, x)), 1e4, 1e-15);
    tg_array_free(x);
    omp_set_num_threads(2);
}

/* A compiled function called with different shapes reuses or replaces its
 * output storage. */
static void test_reuse_output(void **state) {
    (void)state;
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,"
                          "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}}],"
                          "\"nodes\":[{\"op\":\"sum\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":1}}]}");
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    const int64_t shapes[3][2] = {{300, 400}, {2, 3}, {300, 400}};
    for (int s = 0; s < 3; s++) {
        tg_array *x = tg_array_new(TG_FLOAT64, 2, shapes[s]), *y = NULL;
        double *p = (double *)x->data;
        for (int64_t i = 0; i < shapes[s][0] * shapes[s][1]; i++) p[i] = (double)(i / shapes[s][1]);
        assert_int_equal(tg_function_call(f, &x, &y, ctx), 0);
        assert_int_equal(y->shape[0], shapes[s][0]);
        for (int64_t r = 0; r < shapes[s][0]; r++) assert_true(tg_array_get_flat(y, r) == (double)(r * shapes[s][1]));
        tg_array_free(y);
        tg_array_free(x);
    }
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* Attribute errors are load errors naming the attribute. */
/* sum_to is the reductions' sum laid out in its target's shape: a
 * convolution bias's gradient (axes 0, 2, 3 of a 4-d gradient to (C, 1,
 * 1)), leading and middle axes, with 1, 2 and 3 threads (the same bits
 * each time), float32 and float64, against sums in double here. */
static void test_sum_to_axes(void **state) {
    (void)state;
    static const struct {
        const char *target;
        int64_t t[3];
    } cases[2] = {{"[9,1,1]", {9, 1, 1}}, {"[1,1,13]", {1, 1, 13}}};
    for (int di = 0; di < 2; di++) {
        tg_dtype dt = di ? TG_FLOAT64 : TG_FLOAT32;
        int64_t gs[4] = {37, 9, 11, 13};
        tg_array *gd = tg_array_new(TG_FLOAT64, 4, gs);
        double *gp = tg_array_data(gd);
        for (int64_t i = 0; i < 37 * 9 * 11 * 13; i++) gp[i] = sin((double)i * 0.37) * 3 + 0.25;
        tg_array *g = tg_array_copy(gd, dt);
        for (int c = 0; c < 2; c++) {
            char json[1024];
            snprintf(json, sizeof json,
                     "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                     "{\"id\":\"g\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null,null,null]}},"
                     "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":%s}}],"
                     "\"nodes\":[{\"op\":\"sum_to\",\"inputs\":[\"g\",\"x\"],\"outputs\":[\"s\"]}],"
                     "\"functions\":{\"main\":{\"inputs\":[\"g\",\"x\"],\"outputs\":[\"s\"]}}}",
                     tg_dtype_name(dt), tg_dtype_name(dt), cases[c].target);
            tg_graph *gr = tu_load(json);
            tg_array *x = tg_array_new(dt, 3, cases[c].t), *first = NULL;
            for (int t = 0; t < NTHREADS; t++) {
                omp_set_num_threads(THREADS[t]);
                tg_array *in[2] = {g, x}, *out[1] = {0};
                tu_call(gr, NULL, in, out);
                assert_int_equal(out[0]->ndim, 3);
                for (int d = 0; d < 3; d++) assert_int_equal(out[0]->shape[d], cases[c].t[d]);
                int64_t n = tg_array_size(out[0]);
                for (int64_t j = 0; j < n; j++) {
                    double want = 0;
                    for (int64_t i = 0; i < 37 * 9 * 11 * 13; i++) {
                        int64_t ch = (i / (11 * 13)) % 9, col = i % 13;
                        if ((c == 0 && ch == j) || (c == 1 && col == j))
                            want += (double)tg_array_get_flat(g, i);
                    }
                    double got = tg_array_get_flat(out[0], j);
                    if (fabs(got - want) > (di ? 1e-11 : 1e-3))
                        fail_msg("%s case %d, %d threads, element %lld: %.17g, want %.17g", tg_dtype_name(dt), c,
                                 THREADS[t], (long long)j, got, want);
                }
                if (!first) first = out[0];
                else {
                    assert_true(tg_array_equal(first, out[0]));
                    tg_array_free(out[0]);
                }
            }
            omp_set_num_threads(2);
            tg_array_free(first);
            tg_array_free(x);
            tg_graph_free(gr);
        }
        tg_array_free(g);
        tg_array_free(gd);
    }
}

/* sum and mean over axes whose runs are uniform inside but not between
 * them ((5, 6, 7, 4) over axes 0, 2 and 3: runs of 28 elements, 5 to an
 * output; over 0 and 2: runs of 7 with 4 kept after them, taken as
 * columns): against sums in double here, float32 and float64. */
static void test_sum_runs(void **state) {
    (void)state;
    static const char *const AXES[2] = {"[0,2,3]", "[0,2]"};
    for (int di = 0; di < 2; di++)
        for (int op = 0; op < 2; op++)
            for (int ax = 0; ax < 2; ax++) {
                tg_dtype dt = di ? TG_FLOAT64 : TG_FLOAT32;
                char json[1024];
                snprintf(json, sizeof json,
                         "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                         "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[5,6,7,4]}}],"
                         "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"s\"],"
                         "\"attrs\":{\"axis\":%s}}]}",
                         tg_dtype_name(dt), op ? "mean" : "sum", AXES[ax]);
                tg_graph *gr = tu_load(json);
                int64_t xs[4] = {5, 6, 7, 4};
                tg_array *x = tg_array_new(dt, 4, xs);
                for (int64_t i = 0; i < 5 * 6 * 7 * 4; i++)
                    tg_store_f64(dt, (char *)tg_array_data(x) + i * (int64_t)tg_dtype_size(dt),
                                 cos((double)i * 0.61) * 2 - 0.125);
                tg_array *in[1] = {x}, *out[1] = {0};
                tu_call(gr, NULL, in, out);
                const int64_t n = tg_array_size(out[0]), cnt = ax ? 35 : 140;
                assert_int_equal(n, ax ? 24 : 6);
                for (int64_t j = 0; j < n; j++) {
                    double want = 0;
                    for (int64_t i = 0; i < 5 * 6 * 7 * 4; i++) {
                        int64_t ch = (i / 28) % 6, last = i % 4;
                        if (ax ? ch * 4 + last == j : ch == j) want += tg_array_get_flat(x, i);
                    }
                    if (op) want /= (double)cnt;
                    tu_assert_near(tg_array_get_flat(out[0], j), want, di ? 1e-12 : 1e-4);
                }
                tg_array_free(out[0]);
                tg_array_free(x);
                tg_graph_free(gr);
            }
}

static void test_attr_errors(void **state) {
    (void)state;
    static const struct {
        const char *op, *attrs, *want;
    } cases[] = {
        {"sum", "{\"axis\":2}", "attrs.axis"},
        {"mean", "{\"axis\":-3}", "attrs.axis"},
        {"max", "{\"axis\":[0,-2]}", "attrs.axis"},
        {"argmax", "{\"axis\":[0]}", "attrs.axis"},
        {"sum", "{\"axis\":1.5}", "attrs.axis"},
        {"sum", "{\"keepdims\":1}", "attrs.keepdims"},
        {"std", "{\"ddof\":true}", "attrs.ddof"},
        {"sum", "{\"ddof\":1}", "ddof"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[1024], msg[TG_CTX_MSG_MAX];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,"
                 "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}}],"
                 "\"nodes\":[{\"op\":\"%s\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":%s}]}",
                 cases[i].op, cases[i].attrs);
        assert_int_equal(tu_load_fail(json, msg, sizeof msg), TG_ELOAD);
        if (!strstr(msg, cases[i].want)) fail_msg("%s %s: message '%s' lacks '%s'", cases[i].op, cases[i].attrs, msg, cases[i].want);
    }
}

/* Sums, means, variances of long rows, over leading axes and over the
 * columns of a batch (a bias gradient) give the same bits whatever the
 * number of threads: the pieces they are cut into depend on the shape
 * alone. Before, one piece per thread gave other last bits for 1, 2 and
 * 3 threads. Values of many magnitudes, so that another order of adding
 * shows. */
static void test_same_bits_any_thread_count(void **state) {
    (void)state;
    const int64_t n = 1000003, sb[2] = {4096, 500}, s3[3] = {64, 2049, 3};
    tg_array *v = tg_array_new(TG_FLOAT64, 1, &n), *b = tg_array_new(TG_FLOAT64, 2, sb),
             *c = tg_array_new(TG_FLOAT32, 3, s3);
    uint64_t r = 88172645463325252ull;
    double *pv = (double *)v->data, *pb = (double *)b->data;
    float *pc = (float *)c->data;
    for (int64_t i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        pv[i] = ((double)(r >> 11) / 9007199254740992.0 - 0.3) * pow(10, (double)(r % 9) - 4);
        if (i < sb[0] * sb[1]) pb[i] = pv[i] * 3 + 1;
        if (i < s3[0] * s3[1] * s3[2]) pc[i] = (float)pv[i];
    }
    static const struct {
        const char *op, *attrs;
        int which; /* v, b, c */
    } cases[] = {
        {"sum", NULL, 0},
        {"mean", NULL, 0},
        {"var", NULL, 0},
        {"std", "{\"ddof\":1}", 0},
        {"sum", "{\"axis\":0}", 1},
        {"mean", "{\"axis\":0,\"keepdims\":true}", 1},
        {"var", "{\"axis\":0}", 1},
        {"sum", "{\"axis\":[0,1]}", 2},
        {"sum", "{\"axis\":0}", 2},
        {"mean", "{\"axis\":1}", 2},
    };
    const tg_array *xs[3] = {v, b, c};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tg_array *ref = NULL;
        for (int t = 1; t <= 4; t++) {
            omp_set_num_threads(t);
            tg_array *y = reduce(cases[k].op, cases[k].attrs, xs[cases[k].which]);
            if (!ref) {
                ref = y;
                continue;
            }
            assert_int_equal(tg_array_size(y), tg_array_size(ref));
            if (memcmp(y->data, ref->data, (size_t)tg_array_size(y) * tg_dtype_size(y->dtype)))
                fail_msg("%s %s of input %d: other bits with %d threads than with 1", cases[k].op,
                         cases[k].attrs ? cases[k].attrs : "", cases[k].which, t);
            tg_array_free(y);
        }
        tg_array_free(ref);
    }
    tg_array_free(v);
    tg_array_free(b);
    tg_array_free(c);
    omp_set_num_threads(2);
}

/* ---- layouts: transposed, reversed and strided views ----
 *
 * Expected values come from plain loops over the view's elements in
 * logical order, found by index arithmetic on the base array: max/min the
 * first NaN (any NaN here) or the first element equal to the extreme,
 * argmax/argmin its index, all/any, prod in order; float sums the order
 * tg documents (docs/format-choices.md, "The number of threads"): a row
 * of a view whose reduced axis is strided is summed pairwise over halves
 * (n / 2) down to stretches of at most 128 added one after another; every
 * element of a view that is not one strided row is summed as its
 * contiguous copy would be, in 64 pieces past 65,536 elements, each
 * pairwise over halves rounded down to a multiple of 8, stretches of at
 * most 128 in four interleaved sums. The bits must match. */

static double ref_pairwise_strided(const double *p, int64_t n) {
    if (n > 128) return ref_pairwise_strided(p, n / 2) + ref_pairwise_strided(p + n / 2, n - n / 2);
    double a = 0;
    for (int64_t i = 0; i < n; i++) a += p[i];
    return a;
}

static double ref_pairwise_contig(const double *p, int64_t n) {
    if (n > 128) {
        int64_t h = (n / 2) & ~(int64_t)7;
        return ref_pairwise_contig(p, h) + ref_pairwise_contig(p + h, n - h);
    }
    double a[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) a[j] += p[i + j];
    for (; i < n; i++) a[0] += p[i];
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* Every element: one row, in 64 pieces past 65,536 elements, each pairwise
 * as a strided row (strided) or as a contiguous one. */
static double ref_sum_all(const double *p, int64_t n, bool strided) {
    double (*f)(const double *, int64_t) = strided ? ref_pairwise_strided : ref_pairwise_contig;
    if (n < 65536) return f(p, n);
    double s = 0;
    for (int t = 0; t < 64; t++) s += f(p + n * t / 64, n * (t + 1) / 64 - n * t / 64);
    return s;
}

/* The plain loops: 0 max, 1 min, 2 argmax, 3 argmin, 4 all, 5 any, 6 prod. */
static double ref_plain(int op, const double *p, int64_t n) {
    if (op == 4 || op == 5) {
        bool all = true, any = false;
        for (int64_t i = 0; i < n; i++) {
            all &= p[i] != 0;
            any |= p[i] != 0;
        }
        return op == 4 ? all : any;
    }
    if (op == 6) {
        double v = 1;
        for (int64_t i = 0; i < n; i++) v *= p[i];
        return v;
    }
    int64_t at = 0;
    for (int64_t i = 0; i < n && p[at] == p[at]; i++)
        if (p[i] != p[i] || (op % 2 == 0 ? p[i] > p[at] : p[i] < p[at])) at = i;
    return op >= 2 ? (double)at : p[at];
}

static bool same_value(double got, double want) {
    return got == want ? signbit(got) == signbit(want) : got != got && want != want;
}

/* Views of a base array b (shape B) and where their elements lie: */
typedef struct layout {
    const char *name, *nodes; /* the view nodes from x to v */
    int nd;
    int64_t base[3];
    tg_dtype dt;
} layout;

/* The flat index in b of the view's logical element i. */
static int64_t layout_at(int which, const int64_t *B, int64_t i) {
    switch (which) {
    case 0: { /* transpose of (R, C): (C, R) */
        int64_t c = i / B[0], r = i % B[0];
        return r * B[1] + c;
    }
    case 1: { /* [::-1, ::-1] of (R, C) */
        int64_t r = i / B[1], c = i % B[1];
        return (B[0] - 1 - r) * B[1] + (B[1] - 1 - c);
    }
    case 2: { /* transpose(x[::-1]) of (R, C): (C, R) */
        int64_t c = i / B[0], r = i % B[0];
        return (B[0] - 1 - r) * B[1] + c;
    }
    case 4: { /* transpose(x[:, ::-1]) of (R, C): (C, R), reversed in memory */
        int64_t c = i / B[0], r = i % B[0];
        return r * B[1] + (B[1] - 1 - c);
    }
    default: { /* transpose axes [2, 0, 1] of (A, Bb, D): (D, A, Bb) */
        int64_t d = i / (B[0] * B[1]), a = (i / B[1]) % B[0], bb = i % B[1];
        return (a * B[1] + bb) * B[2] + d;
    }
    }
}

static const char *const VIEWS[5] = {
    "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"v\"]}",
    "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],\"attrs\":{\"index\":["
    "{\"start\":null,\"stop\":null,\"step\":-1},{\"start\":null,\"stop\":null,\"step\":-1}]}}",
    "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"w\"],\"attrs\":{\"index\":["
    "{\"start\":null,\"stop\":null,\"step\":-1}]}},{\"op\":\"transpose\",\"inputs\":[\"w\"],\"outputs\":[\"v\"]}",
    "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],\"attrs\":{\"axes\":[2,0,1]}}",
    "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"w\"],\"attrs\":{\"index\":[{\"start\":null,"
    "\"stop\":null,\"step\":null},{\"start\":null,\"stop\":null,\"step\":-1}]}},"
    "{\"op\":\"transpose\",\"inputs\":[\"w\"],\"outputs\":[\"v\"]}",
};

/* Values with many ties (argmax must find the first in logical order),
 * different per element; NaNs at two places when nans. */
static tg_array *layout_data(tg_dtype dt, int nd, const int64_t *B, int nans, double *vals) {
    tg_array *x = tg_array_new(dt, nd, B);
    int64_t n = tg_array_size(x);
    for (int64_t i = 0; i < n; i++) {
        double v = ((double)((i * 7919 + 13) % 23) - 11) * 0.1; /* sums rounded */
        if (nans && (i == n / 3 || i == n - 2)) v = NAN;
        vals[i] = v;
        tg_store_f64(dt, (char *)x->data + i * (int64_t)tg_dtype_size(dt), v);
    }
    return x;
}

/* Every element of a dense view: max/min/all/any/argmax/argmin read memory
 * in order, the sums take the copy's order (sum_view_leaves). Shapes
 * small and past 65,536. */
static void test_layout_full(void **state) {
    (void)state;
    /* view, base shape; x[::-1, ::-1] is one row at stride -1 element (its
     * sum pairwise as a strided row), the others are not one row */
    static const struct {
        int which, nd;
        int64_t B[3];
    } CASES[] = {{0, 2, {3, 5}},     {0, 2, {1000, 70}}, {0, 2, {257, 131}}, {0, 2, {2, 1}},
                 {0, 2, {1, 7}},     {1, 2, {3, 5}},     {1, 2, {1000, 70}}, {1, 2, {1, 7}},
                 {2, 2, {3, 5}},     {2, 2, {1000, 70}}, {2, 2, {129, 3}},   {3, 3, {5, 7, 9}},
                 {3, 3, {40, 41, 43}}, {4, 2, {3, 5}},     {4, 2, {1000, 70}}, {4, 2, {2, 130}},
                 /* more lines side by side than one task takes (1024), and
                  * lines cut into ten segments */
                 {0, 2, {300, 1100}},  {0, 2, {2600, 30}}};
    static const char *const OPS[] = {"max", "min", "argmax", "argmin", "all", "any", "prod", "sum", "mean"};
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++)
        for (int di = 0; di < 2; di++)
            for (int nans = 0; nans < 2; nans++) {
                const int which = CASES[ci].which, nd = CASES[ci].nd;
                const int64_t *B = CASES[ci].B;
                tg_dtype dt = di ? TG_FLOAT32 : TG_FLOAT64;
                int64_t n = B[0] * B[1] * (nd == 3 ? B[2] : 1);
                bool strided = which == 1 && n > 1;
                double *vals = test_malloc((size_t)n * sizeof(double)), *lg = test_malloc((size_t)n * sizeof(double));
                tg_array *x = layout_data(dt, nd, B, nans, vals);
                for (int64_t i = 0; i < n; i++) {
                    double v = vals[layout_at(which, B, i)];
                    lg[i] = dt == TG_FLOAT32 ? (double)(float)v : v;
                }
                for (int t = 0; t < 2; t++) {
                    omp_set_num_threads(t ? 3 : 1);
                    for (int o = 0; o < 9; o++) {
                        tg_array *y = reduce_view(OPS[o], NULL, VIEWS[which], x);
                        double got = tg_array_get_flat(y, 0), want;
                        if (o < 7) {
                            want = ref_plain(o, lg, n);
                        } else {
                            want = ref_sum_all(lg, n, strided);
                            if (o == 8) want /= (double)n;
                        }
                        if (dt == TG_FLOAT32 && o >= 6) want = (double)(float)want;
                        if (!same_value(got, want))
                            fail_msg("%s of view %d of (%lld, %lld) %s%s, %d threads: %.17g, want %.17g", OPS[o], which,
                                     (long long)B[0], (long long)B[1], tg_dtype_name(dt), nans ? " with NaNs" : "",
                                     t ? 3 : 1, got, want);
                        tg_array_free(y);
                    }
                }
                tg_array_free(x);
                test_free(vals);
                test_free(lg);
            }
    omp_set_num_threads(2);
}

/* Rows that are columns of the base array, reduced side by side (sum or
 * max over axis 1 of x.T): groups of 64 and a partial one, rows of 1, 2,
 * 128, 129 and 1000 elements; a 3-d view whose kept axis of smallest
 * stride is not the last kept axis; and every other column
 * (x[:, ::2].T), whose rows are not next to each other (the loops
 * through a stride known at run time, not the typed ones). */
static void test_layout_strided_rows(void **state) {
    (void)state;
    static const int64_t NR[] = {2, 128, 129, 1000};
    static const char *const OPS[] = {"max", "min", "argmax", "argmin", "sum", "mean", "var", "std"};
    for (int lay = 0; lay < 3; lay++)
        for (size_t ri = 0; ri < sizeof NR / sizeof NR[0]; ri++)
            for (int di = 0; di < 2; di++)
                for (int nans = 0; nans < 4; nans++) {
                    /* nans 2 and 3: zeros of both signs among values at most 0
                     * (the max of a row is a zero, the first one's sign) or at
                     * least 0 (the min) */
                    /* two-d: x (N, K), v = x.T (K, N) over axis 1; three-d: x (N, 3, K),
                     * v = transpose [2, 1, 0] (K, 3, N) over axis 2; every other
                     * column: x (N, 2K), v = x[:, ::2].T (K, N) over axis 1 */
                    const int64_t N = NR[ri], K = 131;
                    const int three = lay == 1;
                    const bool odd = lay == 2;
                    int64_t B[3] = {N, three ? 3 : odd ? 2 * K : K, K};
                    int nd = three ? 3 : 2;
                    tg_dtype dt = di ? TG_FLOAT32 : TG_FLOAT64;
                    int64_t total = three ? N * 3 * K : odd ? N * 2 * K : N * K, rows = three ? K * 3 : K;
                    double *vals = test_malloc((size_t)total * sizeof(double)), *row = test_malloc((size_t)N * sizeof(double));
                    tg_array *x = layout_data(dt, nd, B, nans == 1, vals);
                    if (nans >= 2)
                        for (int64_t i = 0; i < total; i++) {
                            int64_t r = (i * 7919 + 13) % 23;
                            vals[i] = r % 3 == 1 ? -0.0 : r % 3 == 2 ? 0.0 : (nans == 2 ? -1.0 : 1.0) * (double)(1 + r);
                            tg_store_f64(dt, (char *)x->data + i * (int64_t)tg_dtype_size(dt), vals[i]);
                        }
                    char view[512];
                    if (odd)
                        snprintf(view, sizeof view,
                                 "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"s\"],\"attrs\":{\"index\":["
                                 "{\"start\":null,\"stop\":null,\"step\":null},{\"start\":null,\"stop\":null,\"step\":2}]}},"
                                 "{\"op\":\"transpose\",\"inputs\":[\"s\"],\"outputs\":[\"v\"]}");
                    else
                        snprintf(view, sizeof view, "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"v\"]%s}",
                                 three ? ",\"attrs\":{\"axes\":[2,1,0]}" : "");
                    for (int t = 0; t < 2; t++) {
                        omp_set_num_threads(t ? 3 : 1);
                        for (int o = 0; o < 8; o++) {
                            tg_array *y = reduce_view(OPS[o], three ? "{\"axis\":2}" : "{\"axis\":1}", view, x);
                            assert_int_equal(tg_array_size(y), rows);
                            for (int64_t j = 0; j < rows; j++) {
                                /* output j: v[k, (m,) :] with k = j / 3, m = j % 3 (three) */
                                for (int64_t e = 0; e < N; e++) {
                                    int64_t at = three ? (e * 3 + j % 3) * K + j / 3 : odd ? e * 2 * K + 2 * j : e * K + j;
                                    row[e] = dt == TG_FLOAT32 ? (double)(float)vals[at] : vals[at];
                                }
                                double want;
                                if (o < 4) {
                                    want = ref_plain(o, row, N);
                                } else {
                                    want = ref_pairwise_strided(row, N);
                                    if (o >= 5) want /= (double)N;
                                    if (o >= 6) {
                                        for (int64_t e = 0; e < N; e++) row[e] = (row[e] - want) * (row[e] - want);
                                        want = ref_pairwise_strided(row, N) / (double)N;
                                        if (o == 7) want = sqrt(want);
                                    }
                                    if (dt == TG_FLOAT32) want = (double)(float)want;
                                }
                                double got = tg_array_get_flat(y, j);
                                if (!same_value(got, want))
                                    fail_msg("%s over the rows of a %s view (%lld, %lld%s) %s%s, %d threads: row %lld "
                                             "gave %.17g, want %.17g",
                                             OPS[o], three ? "3-d" : odd ? "every-other-column" : "2-d",
                                             (long long)K, (long long)N,
                                             three ? ", 3" : "", tg_dtype_name(dt),
                                             nans == 1 ? " with NaNs" : nans ? " with signed zeros" : "",
                                             t ? 3 : 1, (long long)j, got, want);
                            }
                            tg_array_free(y);
                        }
                    }
                    tg_array_free(x);
                    test_free(vals);
                    test_free(row);
                }
    omp_set_num_threads(2);
}

/* One strided row (x[::-1], x[::2], x[::-3]) of every length around the
 * gathered blocks (1024): max/min/argmax/argmin as the plain loop, the
 * first NaN's bits for max (-NaN before NaN), the first zero's sign when
 * the max is 0. */
static void test_layout_strided_row(void **state) {
    (void)state;
    static const int64_t LENS[] = {1, 2, 3, 1023, 1024, 1025, 3001};
    static const int STEPS[] = {-1, 2, -3};
    static const char *const OPS[] = {"max", "min", "argmax", "argmin"};
    for (size_t li = 0; li < sizeof LENS / sizeof LENS[0]; li++)
        for (int si = 0; si < 3; si++)
            for (int di = 0; di < 2; di++)
                for (int kind = 0; kind < 3; kind++) { /* plain, NaNs, zeros */
                    const int64_t L = LENS[li];
                    tg_dtype dt = di ? TG_FLOAT32 : TG_FLOAT64;
                    double *vals = test_malloc((size_t)L * sizeof(double)), *lg = test_malloc((size_t)L * sizeof(double));
                    tg_array *x = layout_data(dt, 1, &L, kind == 1, vals);
                    if (kind == 1 && L > 2) { /* a -NaN first in logical order for step -1 */
                        vals[L - 2] = -NAN;
                        tg_store_f64(dt, (char *)x->data + (L - 2) * (int64_t)tg_dtype_size(dt), -NAN);
                    }
                    if (kind == 2) /* negative values and zeros of both signs */
                        for (int64_t i = 0; i < L; i++) {
                            vals[i] = i % 5 == 1 ? -0.0 : i % 5 == 3 ? 0.0 : -1.0 - (double)(i % 7);
                            tg_store_f64(dt, (char *)x->data + i * (int64_t)tg_dtype_size(dt), vals[i]);
                        }
                    int step = STEPS[si];
                    int64_t n = 0;
                    for (int64_t i = step > 0 ? 0 : L - 1; i >= 0 && i < L; i += step)
                        lg[n++] = dt == TG_FLOAT32 ? (double)(float)vals[i] : vals[i];
                    char view[256];
                    snprintf(view, sizeof view,
                             "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"v\"],\"attrs\":{\"index\":["
                             "{\"start\":null,\"stop\":null,\"step\":%d}]}}",
                             step);
                    for (int o = 0; o < 4; o++) {
                        tg_array *y = reduce_view(OPS[o], NULL, view, x);
                        double got = tg_array_get_flat(y, 0), want = ref_plain(o, lg, n);
                        if (!same_value(got, want) || (o < 2 && want != want && signbit(got) != signbit(want)))
                            fail_msg("%s of x[::%d], %lld %s (%s): %.17g, want %.17g", OPS[o], step, (long long)L,
                                     tg_dtype_name(dt), kind == 1 ? "NaNs" : kind == 2 ? "zeros" : "plain", got, want);
                        tg_array_free(y);
                    }
                    tg_array_free(x);
                    test_free(vals);
                    test_free(lg);
                }
}

/* A transposed view with nothing in it: sums 0, all true, any false. */
static void test_layout_empty(void **state) {
    (void)state;
    const int64_t sh[2] = {0, 5};
    tg_array *x = tg_array_new(TG_FLOAT64, 2, sh);
    const char *tv = "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"v\"]}";
    assert_true(scalar_of(reduce_view("sum", NULL, tv, x)) == 0);
    assert_true(scalar_of(reduce_view("all", NULL, tv, x)) == 1);
    assert_true(scalar_of(reduce_view("any", NULL, tv, x)) == 0);
    tg_array *y = reduce_view("sum", "{\"axis\":1}", tv, x);
    assert_int_equal(tg_array_size(y), 5);
    for (int j = 0; j < 5; j++) assert_true(tg_array_get_flat(y, j) == 0);
    tg_array_free(y);
    tg_array_free(x);
}

/* ---- sums of views, in their contiguous copy's order ----
 *
 * sum and mean of every element of a permuted, reversed or strided view
 * (transposes of shapes around the leaves' and segments' lengths, 3-d
 * permutations, steps of -1 and 2) give the bits of the same reduction of
 * the view's contiguous copy (made here by index arithmetic), whatever
 * the number of threads, and the sum is within 1e-12 of the sum in long
 * double; a sum or mean over one axis gives the same bits with 1, 2 and 3
 * threads and is within the same bound. (A view that is one strided row,
 * x[:, ::2], is summed as such a row: test_layout_full.) */

/* View: x (of shape B, nd axes) sliced with steps step[d], then
 * transposed by perm. Fills sh with the view's shape; returns the nodes. */
static void view_nodes(int nd, const int64_t *B, const int *step, const int *perm, int64_t *sh, char *nodes,
                       size_t cap) {
    size_t k = (size_t)snprintf(nodes, cap,
                                "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"w\"],\"attrs\":{\"index\":[");
    for (int d = 0; d < nd; d++)
        k += (size_t)snprintf(nodes + k, cap - k, "%s{\"start\":null,\"stop\":null,\"step\":%d}", d ? "," : "",
                              step[d]);
    k += (size_t)snprintf(nodes + k, cap - k,
                          "]}},{\"op\":\"transpose\",\"inputs\":[\"w\"],\"outputs\":[\"v\"],\"attrs\":{\"axes\":[");
    for (int d = 0; d < nd; d++) k += (size_t)snprintf(nodes + k, cap - k, "%s%d", d ? "," : "", perm[d]);
    snprintf(nodes + k, cap - k, "]}}");
    for (int d = 0; d < nd; d++) {
        int64_t a = step[perm[d]] < 0 ? -step[perm[d]] : step[perm[d]];
        sh[d] = (B[perm[d]] + a - 1) / a;
    }
}

/* The flat index in x of the view's logical element i. */
static int64_t view_at(int nd, const int64_t *B, const int *step, const int *perm, const int64_t *sh, int64_t i) {
    int64_t idx[3] = {0}, off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t c = i % sh[d], a = perm[d];
        i /= sh[d];
        idx[a] = step[a] > 0 ? c * step[a] : B[a] - 1 + c * step[a];
    }
    for (int d = 0; d < nd; d++) off = off * B[d] + idx[d];
    return off;
}

static void test_view_sum_bits(void **state) {
    (void)state;
    static const struct {
        int nd;
        int64_t B[3];
        int step[3], perm[3];
    } CASES[] = {
        {2, {1000, 63}, {1, 1}, {1, 0}},   {2, {1000, 64}, {1, 1}, {1, 0}},   {2, {1000, 65}, {1, 1}, {1, 0}},
        {2, {63, 1000}, {1, 1}, {1, 0}},   {2, {4097, 63}, {1, 1}, {1, 0}},   {2, {63, 4097}, {1, 1}, {1, 0}},
        {2, {257, 65}, {1, 1}, {1, 0}},    {2, {4097, 65}, {1, 1}, {1, 0}},   {2, {1000, 1000}, {1, 1}, {1, 0}},
        {2, {2000, 1025}, {1, 1}, {1, 0}}, {2, {1000, 65}, {-1, 1}, {1, 0}},  {2, {1000, 65}, {1, -1}, {1, 0}},
        {2, {1000, 64}, {-1, -1}, {1, 0}}, {2, {2000, 65}, {2, 1}, {1, 0}},   {2, {1000, 130}, {1, 2}, {1, 0}},
        {2, {1000, 130}, {-1, 2}, {0, 1}},  {2, {4097, 64}, {-2, 1}, {1, 0}},  {3, {5, 300, 7}, {1, 1, 1}, {2, 0, 1}},
        {3, {65, 7, 300}, {1, 1, 1}, {1, 0, 2}}, {3, {7, 65, 300}, {1, 1, -1}, {2, 0, 1}},
        {3, {300, 7, 65}, {1, 1, 1}, {2, 1, 0}}, {3, {64, 63, 65}, {1, -1, 1}, {1, 2, 0}},
        {3, {300, 65, 7}, {1, 1, 1}, {0, 2, 1}},
    };
    static const char *const AX2[] = {NULL, "{\"axis\":[0,1]}", "{\"axis\":0}", "{\"axis\":1}"};
    static const char *const AX3[] = {NULL, "{\"axis\":[0,1,2]}", "{\"axis\":0}", "{\"axis\":1}", "{\"axis\":2}"};
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++)
        for (int di = 0; di < 2; di++) {
            const int nd = CASES[ci].nd;
            const int64_t *B = CASES[ci].B;
            const int *step = CASES[ci].step, *perm = CASES[ci].perm;
            tg_dtype dt = di ? TG_FLOAT32 : TG_FLOAT64;
            int64_t sh[3], n = 1, nb = 1;
            char nodes[1024];
            view_nodes(nd, B, step, perm, sh, nodes, sizeof nodes);
            for (int d = 0; d < nd; d++) {
                n *= sh[d];
                nb *= B[d];
            }
            double *vals = test_malloc((size_t)nb * sizeof(double));
            tg_array *x = tg_array_new(dt, nd, B), *c = tg_array_new(dt, nd, sh);
            for (int64_t i = 0; i < nb; i++) { /* not round, of both signs, a few large */
                double v = sin((double)i * 0.7 + 0.3) * (i % 97 == 0 ? 1e6 : 1.0) + 1.0 / 3.0;
                tg_store_f64(dt, (char *)x->data + i * (int64_t)tg_dtype_size(dt), v);
                vals[i] = tg_array_get_flat(x, i);
            }
            for (int64_t i = 0; i < n; i++)
                tg_store_f64(dt, (char *)c->data + i * (int64_t)tg_dtype_size(dt), vals[view_at(nd, B, step, perm, sh, i)]);
            const int nax = nd == 2 ? 4 : 5;
            for (int ai = 0; ai < nax; ai++)
                for (int o = 0; o < 2; o++) {
                    const char *op = o ? "mean" : "sum", *ax = nd == 2 ? AX2[ai] : AX3[ai];
                    tg_array *ref = NULL;
                    for (int t = 0; t < NTHREADS; t++) {
                        omp_set_num_threads(THREADS[t]);
                        tg_array *y = reduce_view(op, ax, nodes, x);
                        if (ai < 2) { /* every element: the copy's bits */
                            tg_array *yc = reduce(op, ax, c);
                            double got = scalar_of(y), want = scalar_of(yc);
                            long double s = 0;
                            for (int64_t i = 0; i < n; i++) s += tg_array_get_flat(c, i);
                            double exact = (double)(o ? s / n : s), tol = (dt == TG_FLOAT32 ? 1e-5 : 1e-12) * (1e6 + fabs(exact));
                            if (memcmp(&got, &want, sizeof got) || fabs(got - exact) > tol)
                                fail_msg("%s%s of view %zu (%lld, %lld, %lld) %s, %d threads: %.17g, copy %.17g, long double %.17g",
                                         op, ax ? ax : "", ci, (long long)B[0], (long long)B[1], (long long)(nd == 3 ? B[2] : 1),
                                         tg_dtype_name(dt), THREADS[t], got, want, exact);
                            continue; /* y, yc freed by scalar_of */
                        }
                        /* over one axis: the same bits for every thread count, values by hand */
                        int a = ai - 2;
                        int64_t len = sh[a], m = n / len;
                        assert_int_equal(tg_array_size(y), m);
                        for (int64_t j = 0; j < m && t == 0; j++) {
                            int64_t after = 1;
                            for (int d = a + 1; d < nd; d++) after *= sh[d];
                            long double s = 0;
                            for (int64_t e = 0; e < len; e++)
                                s += vals[view_at(nd, B, step, perm, sh, (j / after) * len * after + e * after + j % after)];
                            double exact = (double)(o ? s / len : s), got = tg_array_get_flat(y, j);
                            double tol = (dt == TG_FLOAT32 ? 1e-5 : 1e-12) * (1e6 + fabs(exact));
                            if (fabs(got - exact) > tol)
                                fail_msg("%s%s of view %zu %s: element %lld %.17g, long double %.17g", op, ax, ci,
                                         tg_dtype_name(dt), (long long)j, got, exact);
                        }
                        if (!ref) {
                            ref = y;
                            continue;
                        }
                        if (memcmp(y->data, ref->data, (size_t)m * tg_dtype_size(y->dtype)))
                            fail_msg("%s%s of view %zu %s: other bits with %d threads than with 1", op, ax, ci,
                                     tg_dtype_name(dt), THREADS[t]);
                        tg_array_free(y);
                    }
                    tg_array_free(ref);
                }
            tg_array_free(x);
            tg_array_free(c);
            test_free(vals);
        }
    omp_set_num_threads(2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float32_long_sum), cmocka_unit_test(test_view_sum_bits), cmocka_unit_test(test_float64_sum_exact),
        cmocka_unit_test(test_var_two_pass),
        cmocka_unit_test(test_extreme_zero_sign),
        cmocka_unit_test(test_leading_axes),
        cmocka_unit_test(test_many_rows),        cmocka_unit_test(test_extremes_float64),
        cmocka_unit_test(test_extremes_float32), cmocka_unit_test(test_extremes_positions), cmocka_unit_test(test_arg_ties), cmocka_unit_test(test_prod_in_order), cmocka_unit_test(test_all_any_float_rows), cmocka_unit_test(test_extremes_int16),
        cmocka_unit_test(test_int_wrap),         cmocka_unit_test(test_logsumexp_long),
        cmocka_unit_test(test_reuse_output),     cmocka_unit_test(test_attr_errors),
        cmocka_unit_test(test_columns),          cmocka_unit_test(test_columns_lse_spread),
        cmocka_unit_test(test_columns_int),
        cmocka_unit_test(test_same_bits_any_thread_count), cmocka_unit_test(test_sum_to_axes),
        cmocka_unit_test(test_sum_runs),
        cmocka_unit_test(test_layout_full),      cmocka_unit_test(test_layout_strided_rows),
        cmocka_unit_test(test_layout_strided_row), cmocka_unit_test(test_layout_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
