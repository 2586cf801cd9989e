/* Products on operands too large or too oddly laid out for the JSON op
 * tests (tests/data/ops/blas_*.json): every layout the BLAS path has to
 * recognise or copy (C order, transposed, rows apart, strided columns,
 * negative strides, broadcast zero strides), the integer blocked loop
 * across its column blocks and threads, float16, batched matmul (folded
 * into one product or looped), gemm in place with beta 0 over NaN, gemm
 * with an inner length of 1 (a rank-1 update) and OpenBLAS's thread count
 * around it, the OpenBLAS build loaded, products in a forked child and
 * from two threads at once, and the load-time errors. Expected values
 * come from a naive loop in this file. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "tensor/tensor.h"
#include "testutil.h"

int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);
int openblas_get_parallel(void);

/* The number of threads OpenBLAS would use for a call from this thread:
 * its own count (its pthreads build) or the thread's OpenMP count (its
 * OpenMP build, ops/op.h). */
static int blas_threads(void) {
    return tg_blas_shares_omp() ? omp_get_max_threads() : openblas_get_num_threads();
}

/* ---- helpers ---- */

static uint64_t lcg = 12345;
static int64_t rnd(int64_t lo, int64_t hi) { /* in [lo, hi) */
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (int64_t)((lcg >> 33) % (uint64_t)(hi - lo));
}

/* A C-contiguous array of random values: quarters in [-4, 4) for floats
 * (exact in float16 too), integers in [lo, hi) otherwise. */
static tg_array *rand_array(tg_dtype dt, int nd, const int64_t *shape, int64_t lo, int64_t hi) {
    tg_array *a = tg_array_new(dt, nd, shape);
    assert_non_null(a);
    int64_t n = tg_array_size(a);
    size_t e = tg_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        char *p = a->data + (size_t)i * e;
        if (tg_dtype_is_float(dt))
            tg_store_f64(dt, p, (double)rnd(-16, 16) / 4);
        else
            tg_store_i64(dt, p, rnd(lo, hi));
    }
    return a;
}

/* Element at a multi-index of a (any strides), as double and as int64. */
static const char *at(const tg_array *a, const int64_t *idx) {
    const char *p = a->data;
    for (int d = 0; d < a->ndim; d++) p += idx[d] * a->strides[d];
    return p;
}

/* NumPy matmul of a and b (each 1-D or more) by the definition: float
 * sums in long double, integer sums wrapped in uint64, bool or-of-ands;
 * the result in dt. */
static tg_array *ref_matmul(const tg_array *a, const tg_array *b, tg_dtype dt) {
    int na = a->ndim, nb = b->ndim;
    int64_t M = na >= 2 ? a->shape[na - 2] : 1, K = a->shape[na - 1];
    int64_t N = nb >= 2 ? b->shape[nb - 1] : 1;
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, bn = ba > bb ? ba : bb;
    int64_t shape[TG_MAX_NDIM];
    int nd = 0;
    for (int d = 0; d < bn; d++) {
        int ia = d - (bn - ba), ib = d - (bn - bb);
        int64_t la = ia >= 0 ? a->shape[ia] : 1, lb = ib >= 0 ? b->shape[ib] : 1;
        shape[nd++] = la == 1 ? lb : la;
    }
    if (na >= 2) shape[nd++] = M;
    if (nb >= 2) shape[nd++] = N;
    tg_array *y = tg_array_new(dt, nd, shape);
    assert_non_null(y);
    int64_t nbatch = 1;
    for (int d = 0; d < bn; d++) nbatch *= shape[d];
    size_t e = tg_dtype_size(dt);
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t ia[TG_MAX_NDIM] = {0}, ib[TG_MAX_NDIM] = {0}, r = bi;
        for (int d = bn - 1; d >= 0; d--) {
            int64_t idx = r % shape[d];
            r /= shape[d];
            int ja = d - (bn - ba), jb = d - (bn - bb);
            if (ja >= 0) ia[ja] = a->shape[ja] == 1 ? 0 : idx;
            if (jb >= 0) ib[jb] = b->shape[jb] == 1 ? 0 : idx;
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                long double fs = 0;
                uint64_t is = 0;
                for (int64_t k = 0; k < K; k++) {
                    if (na >= 2) ia[na - 2] = i;
                    ia[na - 1] = k;
                    if (nb >= 2) {
                        ib[nb - 2] = k;
                        ib[nb - 1] = j;
                    } else {
                        ib[0] = k;
                    }
                    const char *pa = at(a, ia), *pb = at(b, ib);
                    if (tg_dtype_is_float(dt))
                        fs += (long double)tg_load_f64(a->dtype, pa) * tg_load_f64(b->dtype, pb);
                    else if (dt == TG_BOOL)
                        is |= tg_load_i64(a->dtype, pa) && tg_load_i64(b->dtype, pb);
                    else
                        is += (uint64_t)tg_load_i64(a->dtype, pa) * (uint64_t)tg_load_i64(b->dtype, pb);
                }
                char *po = y->data + (size_t)((bi * M + i) * N + j) * e;
                if (tg_dtype_is_float(dt))
                    tg_store_f64(dt, po, (double)fs);
                else
                    tg_store_i64(dt, po, (int64_t)is);
            }
    }
    return y;
}

/* Graph text: inputs x, y with x's and y's dtype and rank (lengths
 * unknown), optional nodes `pre` (may define xv/yv), then
 * op(<ax>, <ay>) -> out. */
static tg_graph *product_graph(const char *op, const tg_array *x, const tg_array *y, const char *pre,
                               const char *ax, const char *ay, const char *extra_in) {
    char sx[64] = "", sy[64] = "", json[4096];
    size_t k = 0;
    for (int d = 0; d < x->ndim; d++) k += (size_t)snprintf(sx + k, sizeof sx - k, "%snull", d ? "," : "");
    k = 0;
    for (int d = 0; d < y->ndim; d++) k += (size_t)snprintf(sy + k, sizeof sy - k, "%snull", d ? "," : "");
    snprintf(json, sizeof json,
             "{\"format\":\"tg-graph\",\"version\":1,"
             "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[%s]}},"
             "{\"id\":\"y\",\"type\":{\"dtype\":\"%s\",\"shape\":[%s]}}],"
             "\"nodes\":[%s%s{\"op\":\"%s\",\"inputs\":[%s\"%s\",\"%s\"],\"outputs\":[\"out\"]}],"
             "\"functions\":{\"main\":{\"inputs\":[\"x\",\"y\"],\"outputs\":[\"out\"]}}}",
             tg_dtype_name(x->dtype), sx, tg_dtype_name(y->dtype), sy, pre ? pre : "", pre ? "," : "", op,
             extra_in ? extra_in : "", ax, ay);
    return tu_load(json);
}

static tg_array *call_product(const char *op, tg_array *x, tg_array *y, const char *pre, const char *ax,
                              const char *ay) {
    tg_graph *g = product_graph(op, x, y, pre, ax, ay, NULL);
    tg_array *in[2] = {x, y}, *out[1] = {0};
    tu_call(g, NULL, in, out);
    tg_graph_free(g);
    return out[0];
}

static double rtol_of(tg_dtype dt) { return dt == TG_FLOAT64 ? 1e-12 : dt == TG_FLOAT32 ? 1e-5 : 0; }
static double atol_of(tg_dtype dt, int64_t K) {
    return dt == TG_FLOAT64 ? 1e-12 * (double)K : dt == TG_FLOAT32 ? 1e-5 * (double)K : 0;
}

/* op(x, y) against the reference on the same (viewed) operands. */
static void check_product(const char *op, tg_array *x, tg_array *y, tg_dtype dt) {
    tg_array *got = call_product(op, x, y, NULL, "x", "y");
    tg_array *want = ref_matmul(x, y, dt);
    tu_assert_close(got, want, rtol_of(dt), atol_of(dt, x->shape[x->ndim - 1]));
    tg_array_free(got);
    tg_array_free(want);
}

static tg_array *transpose2(tg_array *a) {
    tg_array *t = tg_array_view_transpose(a, NULL, NULL);
    assert_non_null(t);
    return t;
}

static tg_array *slice(tg_array *a, int axis, int64_t start, int64_t stop, int64_t step) {
    tg_array *s = tg_array_view_slice(a, axis, start, stop, step, NULL);
    assert_non_null(s);
    return s;
}

/* The layouts of one matrix operand with logical shape (r, c), built
 * from fresh random data: 0 C order, 1 transposed, 2 rows further apart
 * (a column slice of a wider matrix), 3 strided columns, 4 both axes
 * reversed, 5 transposed with a row stride (a slice of a transpose). */
#define NLAYOUTS 6
static tg_array *layout(tg_dtype dt, int64_t r, int64_t c, int which) {
    tg_array *base, *v, *w;
    int64_t sh[2];
    switch (which) {
    case 0: return rand_array(dt, 2, (int64_t[]){r, c}, -50, 50);
    case 1:
        base = rand_array(dt, 2, (int64_t[]){c, r}, -50, 50);
        v = transpose2(base);
        break;
    case 2:
        base = rand_array(dt, 2, (int64_t[]){r, c + 7}, -50, 50);
        v = slice(base, 1, 3, 3 + c, 1);
        break;
    case 3:
        base = rand_array(dt, 2, (int64_t[]){r, 2 * c}, -50, 50);
        v = slice(base, 1, 0, 2 * c, 2);
        break;
    case 4:
        base = rand_array(dt, 2, (int64_t[]){r, c}, -50, 50);
        w = slice(base, 0, r - 1, -r - 1, -1);
        v = slice(w, 1, c - 1, -c - 1, -1);
        tg_array_free(w);
        break;
    default:
        sh[0] = c + 5;
        sh[1] = r;
        base = rand_array(dt, 2, sh, -50, 50);
        w = transpose2(base);
        v = slice(w, 1, 2, 2 + c, 1);
        tg_array_free(w);
        break;
    }
    tg_array_free(base);
    assert_int_equal(v->shape[0], r);
    assert_int_equal(v->shape[1], c);
    return v;
}

/* ---- tests ---- */

/* Every pair of layouts, float32 and float64, through dot and matmul. */
static void test_float_layouts(void **state) {
    (void)state;
    const tg_dtype dts[] = {TG_FLOAT64, TG_FLOAT32};
    /* BLAS sizes, then small ones (the loop kernel) */
    const int64_t sizes[2][3] = {{37, 65, 23}, {5, 7, 6}};
    for (int t = 0; t < 4; t++)
        for (int la = 0; la < NLAYOUTS; la++)
            for (int lb = 0; lb < NLAYOUTS; lb++) {
                const int64_t M = sizes[t / 2][0], K = sizes[t / 2][1], N = sizes[t / 2][2];
                tg_array *a = layout(dts[t % 2], M, K, la), *b = layout(dts[t % 2], K, N, lb);
                check_product(la & 1 ? "dot" : "matmul", a, b, dts[t % 2]);
                tg_array_free(a);
                tg_array_free(b);
            }
}

/* One-row and one-column products (gemv and dot paths) with every
 * layout of the matrix and strided/negative vectors. */
static void test_float_vectors(void **state) {
    (void)state;
    const tg_dtype dts[] = {TG_FLOAT64, TG_FLOAT32};
    const int64_t M = 41, K = 300; /* past the loop kernel's size */
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = dts[t];
        tg_array *vb = rand_array(dt, 1, (int64_t[]){3 * K}, 0, 0);
        tg_array *vecs[3] = {slice(vb, 0, 0, K, 1), slice(vb, 0, 1, 3 * K, 3),
                             slice(vb, 0, 3 * K - 1, -3 * K - 1, -3)};
        for (int l = 0; l < NLAYOUTS; l++) {
            tg_array *m = layout(dt, M, K, l), *mt = layout(dt, K, M, l);
            for (int v = 0; v < 3; v++) {
                check_product("dot", m, vecs[v], dt);  /* matrix . vector */
                check_product("dot", vecs[v], mt, dt); /* vector . matrix */
                check_product("dot", vecs[v], vecs[(v + 1) % 3], dt);
                /* (M, K) @ (K, 1) and (1, K) @ (K, M) as 2-D products */
                tg_array *col = layout(dt, K, 1, l), *row = layout(dt, 1, K, l);
                check_product("matmul", m, col, dt);
                check_product("matmul", row, mt, dt);
                tg_array_free(col);
                tg_array_free(row);
            }
            tg_array_free(m);
            tg_array_free(mt);
        }
        for (int v = 0; v < 3; v++) tg_array_free(vecs[v]);
        tg_array_free(vb);
    }
}

/* A broadcast view (zero strides, from dimshuffle) cannot go to BLAS. */
static void test_zero_strides(void **state) {
    (void)state;
    tg_array *a = rand_array(TG_FLOAT64, 1, (int64_t[]){5}, 0, 0);
    tg_array *b = rand_array(TG_FLOAT64, 2, (int64_t[]){5, 4}, 0, 0);
    /* x (5,) -> xv (3, 5) by alloc-free broadcasting: dimshuffle + add */
    const char *pre =
        "{\"op\":\"dimshuffle\",\"inputs\":[\"x\"],\"outputs\":[\"xd\"],\"attrs\":{\"order\":[\"x\",0]}}";
    tg_array *got = call_product("dot", a, b, pre, "xd", "y");
    tg_array *a2 = tg_array_view_dimshuffle(a, 2, (int[]){-1, 0}, NULL);
    tg_array *want = ref_matmul(a2, b, TG_FLOAT64);
    tu_assert_close(got, want, 1e-12, 1e-12);
    tg_array_free(got);
    tg_array_free(want);
    tg_array_free(a2);
    /* a real zero-stride operand: a stride-0 view fed as the input */
    tg_array *z = tg_array_view_raw(b, TG_FLOAT64, 2, (int64_t[]){4, 5}, (int64_t[]){0, 8}, b->data);
    tg_array *c = rand_array(TG_FLOAT64, 2, (int64_t[]){5, 6}, 0, 0);
    check_product("dot", z, c, TG_FLOAT64);
    tg_array *zc = tg_array_view_raw(b, TG_FLOAT64, 1, (int64_t[]){5}, (int64_t[]){0}, b->data);
    tg_array *c2 = rand_array(TG_FLOAT64, 2, (int64_t[]){6, 5}, 0, 0);
    check_product("dot", c2, zc, TG_FLOAT64);
    tg_array_free(c2);
    tg_array_free(zc);
    tg_array_free(z);
    tg_array_free(c);
    tg_array_free(a);
    tg_array_free(b);
}

/* Integers wrap; sizes cross the 256-column blocks and the threading
 * threshold; every layout feeds the loop. */
static void test_integers(void **state) {
    (void)state;
    const tg_dtype dts[] = {TG_INT32, TG_INT8, TG_UINT16, TG_INT64, TG_UINT8, TG_BOOL};
    const int threads[] = {1, 3};
    for (int th = 0; th < 2; th++) {
        omp_set_num_threads(threads[th]);
        for (int t = 0; t < 6; t++)
            for (int l = 0; l < NLAYOUTS; l += th + 1) {
                tg_array *a = layout(dts[t], 19, 40, l), *b = layout(dts[t], 40, 300, (l + 1) % NLAYOUTS);
                check_product("dot", a, b, dts[t]);
                tg_array_free(a);
                tg_array_free(b);
            }
    }
    /* int32 sums past 2^31 wrap */
    tg_array *a = rand_array(TG_INT32, 2, (int64_t[]){4, 300}, 30000, 32000);
    tg_array *b = rand_array(TG_INT32, 2, (int64_t[]){300, 3}, 30000, 32000);
    check_product("matmul", a, b, TG_INT32);
    tg_array_free(a);
    tg_array_free(b);
    omp_set_num_threads(omp_get_num_procs());
}

static void test_float16(void **state) {
    (void)state;
    tg_array *a = layout(TG_FLOAT16, 30, 20, 1), *b = layout(TG_FLOAT16, 20, 270, 3);
    tg_array *got = call_product("dot", a, b, NULL, "x", "y");
    tg_array *want = ref_matmul(a, b, TG_FLOAT16);
    tu_assert_close(got, want, 1e-3, 1e-3);
    tg_array_free(got);
    tg_array_free(want);
    tg_array_free(a);
    tg_array_free(b);
}

/* Batches: one b against a tall batch (folded into one product), a
 * batch whose rows do not collapse, broadcasting on either side, small
 * matrices over threads and large ones through BLAS. */
static void test_batched(void **state) {
    (void)state;
    const tg_dtype dts[] = {TG_FLOAT64, TG_FLOAT32, TG_INT32};
    for (int t = 0; t < 3; t++) {
        tg_dtype dt = dts[t];
        tg_array *a = rand_array(dt, 3, (int64_t[]){6, 17, 9}, -9, 9);
        tg_array *b = rand_array(dt, 2, (int64_t[]){9, 11}, -9, 9);
        check_product("matmul", a, b, dt);
        tg_array *ap = tg_array_view_transpose(a, (int[]){1, 0, 2}, NULL); /* (17, 6, 9): no fold */
        tg_array *bb = rand_array(dt, 3, (int64_t[]){17, 11, 9}, -9, 9);
        tg_array *bt = tg_array_view_transpose(bb, (int[]){0, 2, 1}, NULL);
        check_product("matmul", ap, b, dt);
        check_product("matmul", ap, bt, dt);
        tg_array *a4 = rand_array(dt, 4, (int64_t[]){3, 1, 20, 30}, -9, 9);
        tg_array *b3 = rand_array(dt, 3, (int64_t[]){4, 30, 10}, -9, 9);
        check_product("matmul", a4, b3, dt);
        check_product("matmul", b, bb, dt); /* (9, 11) @ (17, 11, 9) */
        tg_array *big_a = rand_array(dt, 3, (int64_t[]){2, 130, 70}, -9, 9);
        tg_array *big_b = rand_array(dt, 3, (int64_t[]){2, 70, 90}, -9, 9);
        check_product("matmul", big_a, big_b, dt);
        tg_array *v = rand_array(dt, 1, (int64_t[]){9}, -9, 9);
        check_product("matmul", a, v, dt);
        check_product("matmul", ap, v, dt);
        tg_array *v11 = rand_array(dt, 1, (int64_t[]){11}, -9, 9);
        check_product("matmul", v11, bb, dt);
        check_product("matmul", v, bt, dt);
        tg_array *objs[] = {a, b, ap, bb, bt, a4, b3, big_a, big_b, v, v11};
        for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tg_array_free(objs[i]);
    }
}

/* gemm(z, alpha, x, y, beta) written in place over z = x0 + 0 (an
 * intermediate nobody else holds): beta 0 ignores the NaN in z; with
 * beta 1 the result is z + alpha*x@y. Also a transposed x. */
static void test_gemm_inplace(void **state) {
    (void)state;
    const char *tmpl =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"z0\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}}],"
        "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"z0\",{\"value\":0}],\"outputs\":[\"z\"]},"
        "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xt\"]},"
        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":%s},\"xt\",\"y\",{\"value\":%s}],\"outputs\":[\"out\"]"
        ","
        "\"inplace\":{\"0\":0}}],"
        "\"functions\":{\"main\":{\"inputs\":[\"z0\",\"x\",\"y\"],\"outputs\":[\"out\"]}}}";
    const char *ab[2][2] = {{"2.0", "0"}, {"-0.5", "1"}};
    const double av[2] = {2.0, -0.5}, bv[2] = {0, 1};
    for (int c = 0; c < 2; c++) {
        char json[2048];
        snprintf(json, sizeof json, tmpl, ab[c][0], ab[c][1]);
        tg_graph *g = tu_load(json);
        tg_array *z = rand_array(TG_FLOAT64, 2, (int64_t[]){40, 30}, 0, 0);
        tg_array *x = rand_array(TG_FLOAT64, 2, (int64_t[]){50, 40}, 0, 0);
        tg_array *y = rand_array(TG_FLOAT64, 2, (int64_t[]){50, 30}, 0, 0);
        tg_array *xt = transpose2(x);
        tg_array *p = ref_matmul(xt, y, TG_FLOAT64);
        tg_array *want = tg_array_new(TG_FLOAT64, 2, (int64_t[]){40, 30});
        for (int64_t i = 0; i < 1200; i++)
            ((double *)want->data)[i] =
                av[c] * ((double *)p->data)[i] + (bv[c] == 0 ? 0 : ((double *)z->data)[i]);
        if (bv[c] == 0) ((double *)z->data)[7] = NAN;
        tg_array *in[3] = {z, x, y}, *out[1] = {0};
        for (int rep = 0; rep < 2; rep++) { /* the second call reuses buffers */
            tu_call(g, NULL, in, out);
            tu_assert_close(out[0], want, 1e-12, 1e-11);
            tg_array_free(out[0]);
            out[0] = NULL;
        }
        tg_graph_free(g);
        tg_array *objs[] = {z, x, y, xt, p, want};
        for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tg_array_free(objs[i]);
    }
}

/* gemm with K = 1 (a training step's update at batch 1) runs as a rank-1
 * update (ger) after scaling z by beta: every beta case (0 over a NaN in
 * z, 1, 0.5), column and row vectors in every layout (those BLAS cannot
 * take go through gemm), float32 and float64, small (one BLAS thread) and
 * past a million elements (OpenBLAS's threads); the thread count is left
 * as it was. Against a loop here. */
static void test_gemm_rank1(void **state) {
    (void)state;
    const char *tmpl =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"z0\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null]}},"
        "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null]}}],"
        "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"z0\",{\"value\":0}],\"outputs\":[\"z\"]},"
        "{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xt\"]},"
        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":-0.25},\"xt\",\"y\",{\"value\":%s}],"
        "\"outputs\":[\"out\"],\"inplace\":{\"0\":0}}],"
        "\"functions\":{\"main\":{\"inputs\":[\"z0\",\"x\",\"y\"],\"outputs\":[\"out\"]}}}";
    const char *bs[3] = {"0", "1", "0.5"};
    const double bv[3] = {0, 1, 0.5};
    const int64_t sizes[2][2] = {{37, 23}, {1100, 1000}};
    const tg_dtype dts[2] = {TG_FLOAT32, TG_FLOAT64};
    const int threads = blas_threads();
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < 3; c++) {
            const char *dn = tg_dtype_name(dts[t]);
            char json[2048];
            snprintf(json, sizeof json, tmpl, dn, dn, dn, bs[c]);
            tg_graph *g = tu_load(json);
            for (int sz = 0; sz < 2; sz++)
                for (int lx = 0; lx < NLAYOUTS; lx += sz ? 5 : 1) {
                    const int ly = (lx + c) % NLAYOUTS, M = (int)sizes[sz][0], N = (int)sizes[sz][1];
                    tg_array *z = rand_array(dts[t], 2, (int64_t[]){M, N}, 0, 0);
                    tg_array *x = layout(dts[t], 1, M, lx), *y = layout(dts[t], 1, N, ly);
                    tg_array *want = tg_array_new(TG_FLOAT64, 2, (int64_t[]){M, N});
                    double *w = tg_array_data(want);
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++)
                            w[i * N + j] = -0.25 * tg_array_get_flat(x, i) * tg_array_get_flat(y, j) +
                                           (bv[c] == 0 ? 0 : bv[c] * tg_array_get_flat(z, i * N + j));
                    if (bv[c] == 0) tg_store_f64(dts[t], z->data + 5 * (int64_t)tg_dtype_size(dts[t]), NAN);
                    tg_array *in[3] = {z, x, y}, *out[1] = {0};
                    tu_call(g, NULL, in, out);
                    /* quarters times quarters: exact in either dtype */
                    tg_array *got = tg_array_copy(out[0], TG_FLOAT64);
                    tu_assert_close(got, want, 0, 0);
                    assert_int_equal(blas_threads(), threads);
                    tg_array *objs[] = {z, x, y, want, out[0], got};
                    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tg_array_free(objs[i]);
                }
            tg_graph_free(g);
        }
}

/* gemv and ger over strided operands, float32 and int64. */
static void test_gemv_ger(void **state) {
    (void)state;
    const tg_dtype dts[] = {TG_FLOAT32, TG_INT64};
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = dts[t];
        const char *dn = tg_dtype_name(dt);
        char json[2048];
        /* gemv(z, 3, A^T, x[::-2], 2) with z = y[:, 1] */
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,"
                 "\"variables\":[{\"id\":\"A\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null]}},"
                 "{\"id\":\"x\",\"type\":{\"dtype\":\"%s\",\"shape\":[null]}},"
                 "{\"id\":\"y\",\"type\":{\"dtype\":\"%s\",\"shape\":[null,null]}}],"
                 "\"nodes\":[{\"op\":\"transpose\",\"inputs\":[\"A\"],\"outputs\":[\"At\"]},"
                 "{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"xs\"],\"attrs\":{\"index\":[{"
                 "\"step\":-2}]}},"
                 "{\"op\":\"subtensor\",\"inputs\":[\"y\"],\"outputs\":[\"z\"],\"attrs\":{\"index\":[{},1]}},"
                 "{\"op\":\"gemv\",\"inputs\":[\"z\",{\"value\":3},\"At\",\"xs\",{\"value\":2}],\"outputs\":["
                 "\"g\"]},"
                 "{\"op\":\"ger\",\"inputs\":[\"At\",{\"value\":-2},\"z\",\"xs\"],\"outputs\":[\"r\"]}],"
                 "\"functions\":{\"main\":{\"inputs\":[\"A\",\"x\",\"y\"],\"outputs\":[\"g\",\"r\"]}}}",
                 dn, dn, dn);
        tg_graph *g = tu_load(json);
        const int64_t M = 33, K = 45;
        tg_array *A = rand_array(dt, 2, (int64_t[]){K, M}, -20, 20);
        tg_array *x = rand_array(dt, 1, (int64_t[]){2 * K}, -20, 20);
        tg_array *y = rand_array(dt, 2, (int64_t[]){M, 3}, -20, 20);
        tg_array *in[3] = {A, x, y}, *out[2] = {0};
        tu_call(g, NULL, in, out);
        tg_array *wg = tg_array_new(dt, 1, (int64_t[]){M}), *wr = tg_array_new(dt, 2, (int64_t[]){M, K});
        for (int64_t i = 0; i < M; i++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += tg_array_get_flat(A, k * M + i) * tg_array_get_flat(x, 2 * K - 1 - 2 * k);
            tg_store_f64(dt, wg->data + i * (int64_t)tg_dtype_size(dt),
                         3 * s + 2 * tg_array_get_flat(y, i * 3 + 1));
            for (int64_t k = 0; k < K; k++)
                tg_store_f64(dt, wr->data + (i * K + k) * (int64_t)tg_dtype_size(dt),
                             tg_array_get_flat(A, k * M + i) - 2 * tg_array_get_flat(y, i * 3 + 1) *
                                                                   tg_array_get_flat(x, 2 * K - 1 - 2 * k));
        }
        tu_assert_close(out[0], wg, 1e-5, 1e-3);
        tu_assert_close(out[1], wr, 1e-6, 1e-6);
        tg_graph_free(g);
        tg_array *objs[] = {A, x, y, out[0], out[1], wg, wr};
        for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tg_array_free(objs[i]);
    }
}

/* Reversed vectors go to BLAS as they are, with a negative increment
 * and the pointer at their lowest address (logical element n - 1), in a
 * dot, a gemv, a ger (both vectors) and a rank-1 matmul (K == 1); values
 * against a plain loop, exact (quarters: every sum is exact in float64,
 * so a wrong element or order of pairing shows). A second call allocates
 * nothing the vector's size: it copied both vectors (tg_malloc) at every
 * call. A broadcast (stride 0) vector is still copied, into a buffer of
 * the function's pool, so a second call allocates none either. */
static void test_reversed_vectors_no_copy(void **state) {
    (void)state;
    enum { M = 5, K = 600 }; /* K * 8 bytes: past TG_VM_KEEP_BYTES, so pooled */
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"A\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
        "{\"id\":\"m\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],"
        "\"nodes\":[{\"op\":\"subtensor\",\"inputs\":[\"x\"],\"outputs\":[\"xr\"],\"attrs\":{\"index\":[{"
        "\"step\":-1}]}},"
        "{\"op\":\"subtensor\",\"inputs\":[\"m\"],\"outputs\":[\"mr\"],\"attrs\":{\"index\":[{\"step\":-2}]}},"
        "{\"op\":\"dot\",\"inputs\":[\"xr\",\"y\"],\"outputs\":[\"d\"]},"
        "{\"op\":\"dot\",\"inputs\":[\"A\",\"xr\"],\"outputs\":[\"g\"]},"
        "{\"op\":\"ger\",\"inputs\":[\"A\",{\"value\":2},\"mr\",\"y\"],\"outputs\":[\"r\"]},"
        "{\"op\":\"dimshuffle\",\"inputs\":[\"mr\"],\"outputs\":[\"mc\"],\"attrs\":{\"order\":[0,\"x\"]}},"
        "{\"op\":\"dimshuffle\",\"inputs\":[\"xr\"],\"outputs\":[\"xw\"],\"attrs\":{\"order\":[\"x\",0]}},"
        "{\"op\":\"matmul\",\"inputs\":[\"mc\",\"xw\"],\"outputs\":[\"o\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"A\",\"x\",\"m\",\"y\"],\"outputs\":[\"d\",\"g\",\"r\",\"o\"]},"
        "\"dot\":{\"inputs\":[\"x\",\"y\"],\"outputs\":[\"d\"]}}}");
    tg_array *A = rand_array(TG_FLOAT64, 2, (int64_t[]){M, K}, 0, 0);
    tg_array *x = rand_array(TG_FLOAT64, 1, (int64_t[]){K}, 0, 0);
    tg_array *m = rand_array(TG_FLOAT64, 1, (int64_t[]){2 * M}, 0, 0);
    tg_array *yb = rand_array(TG_FLOAT64, 1, (int64_t[]){2 * K}, 0, 0);
    tg_array *y = slice(yb, 0, 2 * K - 2, TG_SLICE_NONE, -2); /* yb[2K-2], yb[2K-4], ..., yb[0] */
    const double *a = tg_array_data(A), *xv = tg_array_data(x), *mv = tg_array_data(m), *yv = tg_array_data(yb);
    tg_array *in[4] = {A, x, m, y}, *out[4] = {0};
    tu_call(g, "main", in, out);
    /* xr[k] = x[K-1-k], mr[i] = m[2M-1-2i], y[k] = yb[2K-2-2k] */
    double d = 0;
    for (int64_t k = 0; k < K; k++) d += xv[K - 1 - k] * yv[2 * K - 2 - 2 * k];
    tu_assert_near(tg_array_get_flat(out[0], 0), d, 0);
    for (int64_t i = 0; i < M; i++) {
        double gi = 0;
        for (int64_t k = 0; k < K; k++) gi += a[i * K + k] * xv[K - 1 - k];
        tu_assert_near(tg_array_get_flat(out[1], i), gi, 0);
        for (int64_t k = 0; k < K; k++) {
            double mi = mv[2 * M - 1 - 2 * i];
            tu_assert_near(tg_array_get_flat(out[2], i * K + k), a[i * K + k] + 2 * mi * yv[2 * K - 2 - 2 * k], 0);
            tu_assert_near(tg_array_get_flat(out[3], i * K + k), mi * xv[K - 1 - k], 0);
        }
    }
    for (int i = 0; i < 4; i++) tg_array_free(out[i]);

    /* allocations of a second call: dot(x[::-1], y[::-2]), then dot(z, y)
     * with z a stride-0 vector */
    tg_ctx *ctx = tg_ctx_new();
    int fi = tg_graph_function_find(g, "dot", ctx);
    assert_true(fi >= 0);
    tg_function *f = tg_function_compile(g, fi, NULL, ctx);
    assert_non_null(f);
    tg_array *z = tg_array_view_raw(yb, TG_FLOAT64, 1, (int64_t[]){K}, (int64_t[]){0}, yb->data + 8);
    assert_non_null(z);
    for (int c = 0; c < 2; c++) {
        tg_array *fin[2] = {c ? z : x, y}, *r = NULL;
        assert_int_equal(tg_function_call(f, fin, &r, ctx), 0);
        tg_array_free(r);
        r = NULL;
        tu_count_begin();
        int rc = tg_function_call(f, fin, &r, ctx);
        tu_alloc_count n = tu_count_end();
        assert_int_equal(rc, 0);
        double want = 0;
        for (int64_t k = 0; k < K; k++) want += (c ? yv[1] : xv[K - 1 - k]) * yv[2 * K - 2 - 2 * k];
        tu_assert_near(tg_array_get_flat(r, 0), want, 0);
        if (n.bytes >= K * 8)
            fail_msg("dot(%s, y[::-2]), second call: %.0f bytes in %.0f allocations", c ? "z (stride 0)" : "x[::-1]",
                     n.bytes, n.allocs);
        tg_array_free(r);
    }
    tg_function_free(f);
    tg_ctx_free(ctx);
    tg_array *objs[] = {A, x, m, yb, y, z};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tg_array_free(objs[i]);
    tg_graph_free(g);
}

/* ---- load-time errors ---- */

static void expect_load_error(const char *vars, const char *node, const char *want) {
    char json[2048], msg[1024];
    snprintf(json, sizeof json, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[%s],\"nodes\":[%s]}",
             vars, node);
    int rc = tu_load_fail(json, msg, sizeof msg);
    assert_int_not_equal(rc, 0);
    if (!strstr(msg, want)) fail_msg("message '%s' lacks '%s'", msg, want);
}

#define V(id, dt, shape) "{\"id\":\"" id "\",\"type\":{\"dtype\":\"" dt "\",\"shape\":" shape "}}"

/* Small LAPACK calls run on one OpenBLAS thread (linalg.c): the guard
 * sets the count to 1 and puts back what was there, and a batch of 3x3
 * inverses leaves the count as it found it, with A inv(A) = I checked by
 * a loop here. */
static void test_lapack_threads(void **state) {
    (void)state;
    int before = openblas_get_num_threads();
    openblas_set_num_threads(2);
    int two = blas_threads(); /* 1 on a one-core machine */
    tg_blas_guard g = tg_blas_single();
    assert_int_equal(blas_threads(), 1);
    tg_blas_restore(g);
    assert_int_equal(blas_threads(), two);
    enum { B = 200 };
    tg_graph *gr = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"a\",\"type\":"
                           "{\"dtype\":\"float64\",\"shape\":[200,3,3]}}],\"nodes\":[{\"op\":\"matrix_inverse\","
                           "\"inputs\":[\"a\"],\"outputs\":[\"y\"]}]}");
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(gr, 0, NULL, ctx);
    assert_non_null(f);
    int64_t shape[3] = {B, 3, 3};
    tg_array *a = rand_array(TG_FLOAT64, 3, shape, 0, 0), *y = NULL;
    double *ad = tg_array_data(a);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 3; i++) ad[b * 9 + i * 4] += 16; /* far from singular */
    assert_int_equal(tg_function_call(f, &a, &y, ctx), 0);
    assert_int_equal(blas_threads(), two);
    const double *yd = tg_array_data(y);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++) s += ad[b * 9 + i * 3 + k] * yd[b * 9 + k * 3 + j];
                assert_true(fabs(s - (i == j)) < 1e-12);
            }
    tg_array_free(a);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(gr);
    tg_ctx_free(ctx);
    openblas_set_num_threads(before);
}

/* The OpenBLAS loaded is the build the library was linked with: its
 * OpenMP build where CMake found it (the RUNPATH beats Debian's
 * alternatives, whose libopenblas.so.0 has the same soname), and tg
 * knows which one it is. */
static void test_blas_build(void **state) {
    (void)state;
    Dl_info info;
    assert_true(dladdr((void *)openblas_get_parallel, &info) && info.dli_fname);
    const bool omp_file = strstr(info.dli_fname, "openblas-openmp") != NULL;
    assert_int_equal(tg_blas_shares_omp(), openblas_get_parallel() == 2);
#ifdef TG_TEST_BLAS_OPENMP
    if (!omp_file) fail_msg("linked OpenBLAS's OpenMP build, loaded %s", info.dli_fname);
    assert_true(tg_blas_shares_omp());
#else
    (void)omp_file;
#endif
}

/* A forked child of a process whose products and loops ran on threads
 * runs them again, on one thread, instead of waiting forever for the
 * parent's threads (GNU OpenMP's pool does not survive fork: core.c).
 * With OpenBLAS's OpenMP build, a small product's guard (tg_blas_for)
 * once put back the parent's thread count in the child, and the child's
 * next product or loop hung. The child: a small product (guarded), then a
 * product large enough for threads and a loop over 2^21 elements that
 * read it, against the parent's results and a loop here. */
typedef struct fork_case {
    tg_function *f;
    tg_array **in, **out; /* the parent's inputs and results */
    tg_ctx *ctx;
    double m, st;
    int64_t L;
} fork_case;

/* test_fork_products' child: two calls against the parent's results. */
static int fork_child(void *arg) {
    const fork_case *c = arg;
    for (int rep = 0; rep < 2; rep++) {
        tg_array *o2[3] = {0};
        if (tg_function_call(c->f, c->in, o2, c->ctx) != TG_OK) return 2;
        if (*(const double *)tg_array_data(o2[0]) != c->m) return 3;
        /* quarters times quarters: every order of the sums is exact */
        if (memcmp(tg_array_data(o2[1]), tg_array_data(c->out[1]), (size_t)(c->L * c->L) * sizeof(double))) return 4;
        if (!(fabs(*(const double *)tg_array_data(o2[2]) - c->st) <= 1e-9 * fabs(c->st) + 1e-9)) return 5;
        /* (the pthreads build's pool is its own, which it starts again in
         * a child) */
        if (tg_blas_shares_omp() && blas_threads() != 1) return 6;
        for (int i = 0; i < 3; i++) tg_array_free(o2[i]);
    }
    return 0;
}

static void test_fork_products(void **state) {
    (void)state;
    enum { S = 8, L = 300, E = 1 << 21 };
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"s\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
        "{\"id\":\"B\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
        "{\"id\":\"e\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}}],\"nodes\":["
        "{\"op\":\"dot\",\"inputs\":[\"s\",\"s\"],\"outputs\":[\"ps\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"ps\"],\"outputs\":[\"m\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"B\",\"m\"],\"outputs\":[\"Bm\"]},"
        "{\"op\":\"dot\",\"inputs\":[\"Bm\",\"B\"],\"outputs\":[\"pB\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"e\",\"m\"],\"outputs\":[\"em\"]},"
        "{\"op\":\"tanh\",\"inputs\":[\"em\"],\"outputs\":[\"te\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"te\"],\"outputs\":[\"st\"]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"s\",\"B\",\"e\"],\"outputs\":[\"m\",\"pB\",\"st\"]}}}");
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    assert_non_null(f);
    tg_array *in[3] = {tg_array_new(TG_FLOAT64, 2, (int64_t[]){S, S}), tg_array_new(TG_FLOAT64, 2, (int64_t[]){L, L}),
                       tg_array_new(TG_FLOAT64, 1, (int64_t[]){E})};
    double *sd = tg_array_data(in[0]), *bd = tg_array_data(in[1]), *ed = tg_array_data(in[2]);
    for (int i = 0; i < S * S; i++) sd[i] = (i % 5) * 0.125; /* s @ s sums to a small exact m */
    for (int i = 0; i < L * L; i++) bd[i] = ((i * 7) % 11 - 5) * 0.25;
    for (int i = 0; i < E; i++) ed[i] = (double)(i % 1000 - 500) / 8e5;
    double m = 0;
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++)
            for (int k = 0; k < S; k++) m += sd[i * S + k] * sd[k * S + j];
    double st = 0;
    for (int i = 0; i < E; i++) st += tanh(ed[i] * m);
    tg_array *out[3] = {0};
    assert_int_equal(tg_function_call(f, in, out, ctx), TG_OK);
    assert_true(*(const double *)tg_array_data(out[0]) == m);
    assert_true(fabs(*(const double *)tg_array_data(out[2]) - st) <= 1e-9 * fabs(st) + 1e-9);
    /* an element of B m @ B by a loop: quarters, exact */
    double p17 = 0;
    for (int k = 0; k < L; k++) p17 += bd[1 * L + k] * m * bd[k * L + 7];
    assert_true(((const double *)tg_array_data(out[1]))[1 * L + 7] == p17);
    fork_case c = {f, in, out, ctx, m, st, L};
    assert_int_equal(tu_forked(fork_child, &c), 0);
    for (int i = 0; i < 3; i++) {
        tg_array_free(in[i]);
        tg_array_free(out[i]);
    }
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Products from two threads of the program at once, each large enough
 * for OpenBLAS's threads: with its OpenMP build each calling thread starts
 * a team of its own, and both must get their own results (quarters, so
 * every order of the sums is exact and the check is bit for bit). */
typedef struct conc_job {
    tg_function *f;
    tg_array *in[2];
    const double *want;
    int bad;
} conc_job;

static void *conc_run(void *arg) {
    conc_job *j = arg;
    tg_ctx *ctx = tg_ctx_new();
    for (int rep = 0; rep < 12; rep++) {
        tg_array *out = NULL;
        if (tg_function_call(j->f, j->in, &out, ctx) != TG_OK) {
            j->bad = 1;
            break;
        }
        if (memcmp(tg_array_data(out), j->want, (size_t)tg_array_size(out) * sizeof(double))) j->bad = 2;
        tg_array_free(out);
    }
    tg_ctx_free(ctx);
    return NULL;
}

static void test_concurrent_products(void **state) {
    (void)state;
    enum { L = 256, NT = 2 };
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}},"
                          "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,null]}}],"
                          "\"nodes\":[{\"op\":\"dot\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"p\"]}]}");
    tg_ctx *ctx = tg_ctx_new();
    conc_job jobs[NT];
    double *want[NT];
    for (int t = 0; t < NT; t++) {
        jobs[t] = (conc_job){tg_function_compile(g, 0, NULL, ctx), {0}, NULL, 0};
        assert_non_null(jobs[t].f);
        for (int k = 0; k < 2; k++) {
            jobs[t].in[k] = tg_array_new(TG_FLOAT64, 2, (int64_t[]){L, L});
            double *d = tg_array_data(jobs[t].in[k]);
            for (int i = 0; i < L * L; i++) d[i] = ((i * (7 + 2 * t + k)) % 13 - 6) * 0.25;
        }
        const double *a = tg_array_data(jobs[t].in[0]), *b = tg_array_data(jobs[t].in[1]);
        want[t] = calloc((size_t)L * L, sizeof(double));
        assert_non_null(want[t]);
        for (int i = 0; i < L; i++)
            for (int k = 0; k < L; k++)
                for (int j = 0; j < L; j++) want[t][i * L + j] += a[i * L + k] * b[k * L + j];
        jobs[t].want = want[t];
    }
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) assert_int_equal(pthread_create(&th[t], NULL, conc_run, &jobs[t]), 0);
    for (int t = 0; t < NT; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < NT; t++) {
        if (jobs[t].bad) fail_msg("thread %d: %s", t, jobs[t].bad == 1 ? "the call failed" : "a wrong product");
        tg_function_free(jobs[t].f);
        tg_array_free(jobs[t].in[0]);
        tg_array_free(jobs[t].in[1]);
        free(want[t]);
    }
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* solve broadcasts the batch dimensions of A and b as NumPy's gufunc
 * (m,m),(m,n)->(m,n) does; at load, the static shapes give the result's
 * (an unknown length takes the other's), and lengths that do not
 * broadcast are an error naming both inputs. */
static void test_solve_broadcast_load(void **state) {
    (void)state;
    static const struct {
        const char *a, *b, *want;
    } ok[] = {
        {"[2,3,3]", "[3,2]", "[2, 3, 2]"},          {"[1,3,3]", "[2,3,2]", "[2, 3, 2]"},
        {"[2,1,3,3]", "[4,3,1]", "[2, 4, 3, 1]"},   {"[3,3]", "[2,5,3,2]", "[2, 5, 3, 2]"},
        {"[2,2,3,3]", "[3]", "[2, 2, 3]"},          {"[null,3,3]", "[4,3,2]", "[4, 3, 2]"},
        {"[1,3,3]", "[null,3,2]", "[?, 3, 2]"},  {"[0,3,3]", "[1,3,2]", "[0, 3, 2]"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char json[1024], got[160];
        snprintf(json, sizeof json,
                 "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[" V("a", "float64", "%s") ","
                 V("b", "float32", "%s") "],\"nodes\":[{\"op\":\"solve\",\"inputs\":[\"a\",\"b\"],"
                 "\"outputs\":[\"y\"]}]}",
                 ok[i].a, ok[i].b);
        tg_graph *g = tu_load(json);
        const tg_var *y = tg_graph_find(g, "y");
        assert_non_null(y);
        tg_type_str(&y->type, got, sizeof got);
        char want[160];
        snprintf(want, sizeof want, "float64%s", ok[i].want);
        if (strcmp(got, want)) fail_msg("solve(a %s, b %s): got %s, want %s", ok[i].a, ok[i].b, got, want);
        tg_graph_free(g);
    }
    const char *node = "{\"op\":\"solve\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"],\"name\":\"sv\"}";
    expect_load_error(V("a", "float64", "[2,3,3]") "," V("b", "float64", "[3,3,2]"), node,
                      "nodes[0] (solve 'sv' -> y): inputs[0] 'a' float64[2, 3, 3] and inputs[1] 'b' "
                      "float64[3, 3, 2]: the batch dimensions (all but the last 2) do not broadcast: "
                      "length 2 (dimension 0 of a) against 3 (dimension 0 of b)");
    expect_load_error(V("a", "float64", "[2,4,3,3]") "," V("b", "float64", "[5,3,1]"), node,
                      "length 4 (dimension 1 of a) against 5 (dimension 0 of b)");
    expect_load_error(V("a", "float64", "[2,3,3]") "," V("b", "float64", "[2,4,2]"), node,
                      "expected a vector of their order, or a stack of matrices with as many rows");
    /* A vector is b of 1 dimension only (NumPy 2): b of A's batch shape
     * plus a row is a matrix whose rows do not match. */
    expect_load_error(V("a", "float64", "[2,3,3]") "," V("b", "float64", "[2,3]"), node,
                      "does not match the matrices");
}

static void test_load_errors(void **state) {
    (void)state;
    const char *ab = V("a", "float64", "[3,4]") "," V("b", "float64", "[5,2]");
    expect_load_error(
        ab, "{\"op\":\"dot\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}",
        "inputs[0] and inputs[1]: shapes (3, 4) and (5, 2) not aligned: 4 (dim 1) != 5 (dim 0)");
    expect_load_error(V("a", "float32", "[null,4]") "," V("b", "float32", "[3]"),
                      "{\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}",
                      "shapes (None, 4) and (3,) not aligned: 4 (dim 1) != 3 (dim 0)");
    expect_load_error(V("a", "float32", "[2,3,4]") "," V("b", "float32", "[3,4,5]"),
                      "{\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}",
                      "do not broadcast: 2 (dim 0) != 3 (dim 0)");
    expect_load_error(V("a", "float32", "[]") "," V("b", "float32", "[3]"),
                      "{\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}",
                      "matmul: inputs[0] is 0-d");
    expect_load_error(V("a", "float32", "[2,3,4]") "," V("b", "float32", "[4]"),
                      "{\"op\":\"dot\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}",
                      "dot takes operands of at most 2 dimensions");
    const char *zxy =
        V("z", "float64", "[3,5]") "," V("x", "float64", "[3,4]") "," V("y", "float32", "[4,5]");
    expect_load_error(
        zxy,
        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":1},\"x\",\"y\",{\"value\":1}],\"outputs\":[\"o\"]}",
        "gemm needs z, x and y of one integer or float dtype; got z float64, x float64, y float32");
    expect_load_error(V("z", "bool", "[3,5]") "," V("x", "bool", "[3,4]") "," V("y", "bool", "[4,5]"),
                      "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":true},\"x\",\"y\",{\"value\":true}],"
                      "\"outputs\":[\"o\"]}",
                      "one integer or float dtype");
    expect_load_error(
        V("z", "float64", "[3,5]") "," V("x", "float64", "[3,4]") "," V("y", "float64", "[4,5]"),
        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":{\"dtype\":\"float32\",\"data\":1}},\"x\",\"y\",{"
        "\"value\":1}],"
        "\"outputs\":[\"o\"]}",
        "gemm's alpha must have z's dtype float64");
    expect_load_error(
        V("z", "float64", "[3,5]") "," V("x", "float64", "[3,4]") "," V("y", "float64", "[5,5]"),
        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":1},\"x\",\"y\",{\"value\":1}],\"outputs\":[\"o\"]}",
        "inputs[2] and inputs[3]: shapes (3, 4) and (5, 5) not aligned");
    expect_load_error(
        V("z", "float64", "[3,6]") "," V("x", "float64", "[3,4]") "," V("y", "float64", "[4,5]"),
        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":1},\"x\",\"y\",{\"value\":1}],\"outputs\":[\"o\"]}",
        "inputs[0] 'z' has length 6 in dimension 1 but the product dot(x, y) has 5");
    expect_load_error(
        V("z", "float64", "[3]") "," V("x", "float64", "[3,4]") "," V("y", "float64", "[4,5]"),
        "{\"op\":\"gemm\",\"inputs\":[\"z\",{\"value\":1},\"x\",\"y\",{\"value\":1}],\"outputs\":[\"o\"]}",
        "must have 2 dimensions, not 1");
    expect_load_error(
        V("z", "int8", "[3]") "," V("A", "int8", "[3,4]") "," V("x", "int8", "[4]"),
        "{\"op\":\"gemv\",\"inputs\":[\"z\",{\"value\":300},\"A\",\"x\",{\"value\":1}],\"outputs\":[\"o\"]}",
        "300");
    expect_load_error(
        V("z", "int32", "[3]") "," V("A", "int32", "[3,4]") "," V("x", "int32", "[4]"),
        "{\"op\":\"gemv\",\"inputs\":[\"z\",{\"value\":1},\"A\",\"x\",{\"value\":0.5}],\"outputs\":[\"o\"]}",
        "inputs[4] (beta) is a float but gemv computes in z's dtype int32");
    expect_load_error(
        V("z", "float64", "[2]") "," V("A", "float64", "[3,4]") "," V("x", "float64", "[4]"),
        "{\"op\":\"gemv\",\"inputs\":[\"z\",{\"value\":1},\"A\",\"x\",{\"value\":1}],\"outputs\":[\"o\"]}",
        "inputs[0] 'z' has length 2 in dimension 0 but the product dot(A, x) has 3");
    expect_load_error(V("A", "float64", "[3,4]") "," V("x", "float64", "[3]") "," V("y", "float64", "[5]"),
                      "{\"op\":\"ger\",\"inputs\":[\"A\",{\"value\":1},\"x\",\"y\"],\"outputs\":[\"o\"]}",
                      "ger: A is (3, 4) but x and y have lengths 3 and 5");
    expect_load_error(V("A", "float64", "[3,4]") "," V("x", "float64", "[3]") "," V("y", "float64", "[4]"),
                      "{\"op\":\"dot\",\"inputs\":[\"A\",\"x\"],\"outputs\":[\"o\"],\"inplace\":{\"0\":0}}",
                      "inplace");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_layouts), cmocka_unit_test(test_float_vectors),
        cmocka_unit_test(test_zero_strides),  cmocka_unit_test(test_integers),
        cmocka_unit_test(test_float16),       cmocka_unit_test(test_batched),
        cmocka_unit_test(test_gemm_inplace),  cmocka_unit_test(test_gemm_rank1),
        cmocka_unit_test(test_gemv_ger),
        cmocka_unit_test(test_reversed_vectors_no_copy),
        cmocka_unit_test(test_load_errors),   cmocka_unit_test(test_lapack_threads),
        cmocka_unit_test(test_solve_broadcast_load),
        cmocka_unit_test(test_blas_build),    cmocka_unit_test(test_fork_products),
        cmocka_unit_test(test_concurrent_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
