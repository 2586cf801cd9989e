/* dtypes: names and sizes, promotion and safe casts against NumPy's
 * tables, half floats against NumPy and against the definition of
 * round-to-nearest-even, and every one of the 144 conversions against
 * NumPy's astype (tensor_tables.h, from tests/data/gen/tensor.py). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor.h"
#include "tensor_tables.h"
#include "testutil.h"

static void test_names_sizes_kinds(void **state) {
    (void)state;
    static const char *names[] = {"bool",   "int8",   "int16",   "int32",
                                  "int64",  "uint8",  "uint16",  "uint32",
                                  "uint64", "float16", "float32", "float64"};
    static const size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8};
    static const char kinds[] = "biiiiuuuufff";
    for (int i = 0; i < TG_NDTYPES; i++) {
        assert_string_equal(tg_dtype_name((tg_dtype)i), names[i]);
        assert_int_equal(tg_dtype_from_name(names[i]), i);
        assert_int_equal(tg_dtype_size((tg_dtype)i), sizes[i]);
        assert_int_equal(tg_isize((tg_dtype)i), sizes[i]);
        assert_int_equal(tg_dtype_kind((tg_dtype)i), kinds[i]);
        assert_int_equal(tg_dtype_is_float((tg_dtype)i), kinds[i] == 'f');
        assert_int_equal(tg_dtype_is_int((tg_dtype)i), kinds[i] == 'i' || kinds[i] == 'u');
    }
    assert_int_equal(tg_dtype_from_name("complex64"), TG_DTYPE_INVALID);
    assert_int_equal(tg_dtype_from_name("Float32"), TG_DTYPE_INVALID);
    assert_int_equal(tg_dtype_from_name(""), TG_DTYPE_INVALID);
    assert_int_equal(tg_dtype_from_name(NULL), TG_DTYPE_INVALID);
    assert_int_equal(tg_dtype_size(TG_DTYPE_INVALID), 0);
    assert_int_equal(tg_dtype_size((tg_dtype)TG_NDTYPES), 0);
    assert_int_equal(tg_dtype_promote(TG_DTYPE_INVALID, TG_INT8), TG_DTYPE_INVALID);
    assert_false(tg_dtype_can_cast_safe(TG_INT8, TG_DTYPE_INVALID));
}

static void test_promote_matches_numpy(void **state) {
    (void)state;
    for (int a = 0; a < TG_NDTYPES; a++)
        for (int b = 0; b < TG_NDTYPES; b++) {
            int got = (int)tg_dtype_promote((tg_dtype)a, (tg_dtype)b);
            if (got != np_promote[a][b])
                fail_msg("promote(%s, %s) = %s, NumPy says %s", tg_dtype_name(a),
                         tg_dtype_name(b), tg_dtype_name(got),
                         tg_dtype_name(np_promote[a][b]));
        }
    /* The famous ones, by hand. */
    assert_int_equal(tg_dtype_promote(TG_INT64, TG_UINT64), TG_FLOAT64);
    assert_int_equal(tg_dtype_promote(TG_FLOAT16, TG_INT16), TG_FLOAT32);
    assert_int_equal(tg_dtype_promote(TG_BOOL, TG_UINT16), TG_UINT16);
    assert_int_equal(tg_dtype_promote(TG_INT8, TG_UINT8), TG_INT16);
}

static void test_can_cast_safe_matches_numpy(void **state) {
    (void)state;
    for (int a = 0; a < TG_NDTYPES; a++)
        for (int b = 0; b < TG_NDTYPES; b++)
            if (tg_dtype_can_cast_safe((tg_dtype)a, (tg_dtype)b) != (bool)np_can_cast[a][b])
                fail_msg("can_cast(%s, %s, 'safe') = %d, NumPy says %d", tg_dtype_name(a),
                         tg_dtype_name(b), !np_can_cast[a][b], np_can_cast[a][b]);
}

static void test_float_of(void **state) {
    (void)state;
    /* FORMAT.md s7: float32 for bool and 8/16-bit integers, float64 wider. */
    static const tg_dtype want[TG_NDTYPES] = {
        TG_FLOAT32, TG_FLOAT32, TG_FLOAT32, TG_FLOAT64, TG_FLOAT64, TG_FLOAT32,
        TG_FLOAT32, TG_FLOAT64, TG_FLOAT64, TG_FLOAT16, TG_FLOAT32, TG_FLOAT64};
    for (int i = 0; i < TG_NDTYPES; i++)
        if (tg_dtype_float_of((tg_dtype)i) != want[i])
            fail_msg("float_of(%s) = %s, want %s", tg_dtype_name(i),
                     tg_dtype_name(tg_dtype_float_of((tg_dtype)i)), tg_dtype_name(want[i]));
    assert_int_equal(tg_dtype_float_of(TG_DTYPE_INVALID), TG_DTYPE_INVALID);
}

/* ---- half floats ---- */

/* The value of half bits h, from the definition (independent of the
 * library). */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double s = h & 0x8000 ? -1 : 1;
    if (e == 31) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

/* Round x to the nearest half (ties to even mantissa), by search over the
 * finite halves of x's sign; overflow past 65520 gives inf. */
static uint16_t half_oracle(double x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isnan(x)) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00;
    /* Binary search for the largest half <= a among 0..0x7bff. */
    int lo = 0, hi = 0x7bff;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (half_value((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    double below = half_value((uint16_t)lo);
    if (below == a || lo == 0x7bff) return sign | (uint16_t)lo;
    double above = half_value((uint16_t)(lo + 1));
    double db = a - below, da = above - a;
    if (db < da || (db == da && !(lo & 1))) return sign | (uint16_t)lo;
    return sign | (uint16_t)(lo + 1);
}

static void test_half_to_float_exhaustive(void **state) {
    (void)state;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = tg_half_to_float((uint16_t)b);
        double want = half_value((uint16_t)b);
        if (isnan(want)) {
            if (!isnan(f)) fail_msg("half 0x%04x is a NaN, got %g", b, f);
            continue;
        }
        if ((double)f != want || !signbit(f) != !signbit(want))
            fail_msg("half 0x%04x: got %.10g, want %.10g", b, f, want);
        if (tg_float_to_half(f) != b) fail_msg("half 0x%04x does not round-trip", b);
    }
    for (size_t i = 0; i < TG_ARRAY_LEN(half_nan_in); i++) {
        float f = tg_half_to_float(half_nan_in[i]);
        uint32_t got;
        memcpy(&got, &f, 4);
        if (got != half_nan_out[i])
            fail_msg("NaN half 0x%04x -> 0x%08x, NumPy gives 0x%08x", half_nan_in[i], got,
                     half_nan_out[i]);
    }
}

static void test_float_to_half_matches_numpy(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_ARRAY_LEN(half_from_f32_in); i++) {
        float f;
        memcpy(&f, &half_from_f32_in[i], 4);
        uint16_t h = tg_float_to_half(f);
        if (h != half_from_f32_out[i])
            fail_msg("float_to_half(%.9g, bits 0x%08x) = 0x%04x, NumPy gives 0x%04x", f,
                     half_from_f32_in[i], h, half_from_f32_out[i]);
    }
}

/* A sweep over float32 bit patterns (every 4999th, and every pattern around
 * the places where rounding changes behaviour) against the oracle. */
static void test_float_to_half_rounding(void **state) {
    (void)state;
    static const uint32_t centers[] = {0x33000000u, 0x33800000u, 0x38800000u, 0x387fc000u,
                                       0x477fe000u, 0x477ff000u, 0x3f801000u, 0x3f803000u};
    uint64_t checked = 0;
    for (uint64_t b = 0; b < 0x100000000u; b += 4999) {
        uint32_t x = (uint32_t)b;
        float f;
        memcpy(&f, &x, 4);
        if (isnan(f)) continue;
        uint16_t got = tg_float_to_half(f), want = half_oracle(f);
        if (got != want) fail_msg("float_to_half(0x%08x = %.9g) = 0x%04x, want 0x%04x", x, f, got, want);
        checked++;
    }
    for (size_t c = 0; c < TG_ARRAY_LEN(centers); c++)
        for (int64_t d = -5000; d <= 5000; d++) {
            uint32_t x = (uint32_t)((int64_t)centers[c] + d);
            float f;
            memcpy(&f, &x, 4);
            uint16_t got = tg_float_to_half(f), want = half_oracle(f);
            if (got != want) fail_msg("float_to_half(0x%08x = %.9g) = 0x%04x, want 0x%04x", x, f, got, want);
            f = -f;
            if (tg_float_to_half(f) != half_oracle(f)) fail_msg("float_to_half(-0x%08x)", x);
        }
    assert_true(checked > 800000);
}

/* float64 -> float16 rounds once, from the double: a value just above a
 * tie between halves rounds up even when float32 would have rounded it
 * onto the tie. */
static void test_double_to_half_single_rounding(void **state) {
    (void)state;
    uint64_t seed = 12345;
    for (int i = 0; i < 200000; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        /* Random doubles near halves: a half value plus a small offset. */
        uint16_t h = (uint16_t)((seed >> 33) % 0x7c00);
        double base = half_value(h);
        double off = ldexp((double)(int64_t)(seed >> 40) - (double)(1 << 23), -24 - 11) *
                     (base ? fabs(base) : ldexp(1, -24));
        double x = (seed & 1) ? -(base + off) : base + off;
        uint16_t got;
        tg_cast_strided(TG_FLOAT16, &got, 2, TG_FLOAT64, &x, 8, 1);
        if (got != half_oracle(x))
            fail_msg("float64 %.17g -> half 0x%04x, want 0x%04x", x, got, half_oracle(x));
    }
    double tricky[] = {65519.99999999, 65520.0, 1 + ldexp(1, -11) + ldexp(1, -40), ldexp(1, -25),
                       ldexp(1, -25) + ldexp(1, -60), ldexp(3, -26)};
    for (size_t i = 0; i < TG_ARRAY_LEN(tricky); i++) {
        uint16_t got;
        tg_cast_strided(TG_FLOAT16, &got, 2, TG_FLOAT64, &tricky[i], 8, 1);
        assert_int_equal(got, half_oracle(tricky[i]));
    }
}

/* ---- casts ---- */

/* Little-endian bit patterns of sz bytes (memcpy: the buffers are not
 * aligned). */
static uint64_t get_bits(const void *p, size_t sz) {
    uint64_t v = 0;
    memcpy(&v, p, sz);
    return v;
}

static void put_bits(void *p, size_t sz, uint64_t v) { memcpy(p, &v, sz); }

static bool same(tg_dtype dt, uint64_t got, uint64_t want) {
    if (got == want) return true;
    /* NaN payloads of float32/64 results are not part of the contract. */
    double g, w;
    char a[8], b[8];
    put_bits(a, tg_isize(dt), got);
    put_bits(b, tg_isize(dt), want);
    if (!tg_dtype_is_float(dt)) return false;
    g = tg_load_f64(dt, a);
    w = tg_load_f64(dt, b);
    return isnan(g) && isnan(w) && dt != TG_FLOAT16;
}

/* Every conversion, contiguous and strided (each element spaced out),
 * against NumPy's astype on one-element arrays. */
static void test_cast_table_matches_numpy(void **state) {
    (void)state;
    int64_t total = 0;
    for (size_t c = 0; c < TG_ARRAY_LEN(cast_cases); c++) {
        const cast_case *k = &cast_cases[c];
        tg_dtype from = (tg_dtype)k->from;
        size_t fs = tg_isize(from);
        char src[128 * 8], srcs[128 * 3 * 8];
        assert_true(k->n <= 128);
        for (int i = 0; i < k->n; i++) {
            put_bits(src + i * fs, fs, k->in[i]);
            put_bits(srcs + 3 * i * fs, fs, k->in[i]);
        }
        for (int to = 0; to < TG_NDTYPES; to++) {
            size_t ts = tg_isize((tg_dtype)to);
            char dst[128 * 8], dsts[128 * 2 * 8];
            memset(dsts, 0xab, sizeof dsts);
            tg_cast_strided((tg_dtype)to, dst, (int64_t)ts, from, src, (int64_t)fs, k->n);
            tg_cast_strided((tg_dtype)to, dsts, 2 * (int64_t)ts, from, srcs, 3 * (int64_t)fs, k->n);
            for (int i = 0; i < k->n; i++) {
                uint64_t got = get_bits(dst + i * ts, ts), gots = get_bits(dsts + 2 * i * ts, ts);
                uint64_t want = k->out[to][i];
                if (!same((tg_dtype)to, got, want) || !same((tg_dtype)to, gots, want))
                    fail_msg("%s 0x%llx -> %s: got 0x%llx (strided 0x%llx), NumPy gives 0x%llx",
                             tg_dtype_name(from), (unsigned long long)k->in[i], tg_dtype_name(to),
                             (unsigned long long)got, (unsigned long long)gots,
                             (unsigned long long)want);
                /* The gaps of the strided output are untouched. */
                if ((unsigned char)dsts[(2 * i + 1) * ts] != 0xab) fail_msg("strided cast wrote a gap");
                total++;
            }
        }
    }
    assert_true(total > 3000);
}

/* Single-element helpers agree with the casts. */
static void test_load_store_helpers(void **state) {
    (void)state;
    char b[8];
    tg_store_f64(TG_INT8, b, 300.0); /* through int32, wrapped: NumPy gives 44 */
    assert_int_equal(*(int8_t *)b, 44);
    tg_store_f64(TG_UINT8, b, -1.0);
    assert_int_equal(*(uint8_t *)b, 255);
    tg_store_f64(TG_INT32, b, NAN);
    assert_int_equal(*(int32_t *)b, INT32_MIN);
    tg_store_f64(TG_UINT64, b, -1.0);
    assert_true(*(uint64_t *)b == UINT64_MAX);
    tg_store_f64(TG_BOOL, b, NAN);
    assert_int_equal(*(uint8_t *)b, 1);
    tg_store_f64(TG_FLOAT16, b, 65519.99999999); /* one rounding: 65504 */
    assert_int_equal(*(uint16_t *)b, 0x7bff);
    assert_true(tg_load_f64(TG_FLOAT16, b) == 65504.0);
    tg_store_i64(TG_INT16, b, 65536 + 7);
    assert_int_equal(tg_load_i64(TG_INT16, b), 7);
    tg_store_i64(TG_FLOAT32, b, 16777217); /* rounds to even */
    assert_true(tg_load_f64(TG_FLOAT32, b) == 16777216.0);
    tg_store_i64(TG_UINT64, b, -1);
    assert_true(tg_load_f64(TG_UINT64, b) == 18446744073709551616.0);
    tg_store_f64(TG_FLOAT64, b, -2.75);
    assert_int_equal(tg_load_i64(TG_FLOAT64, b), -2);
    b[0] = 7; /* a bool byte other than 0/1 reads as true */
    assert_true(tg_load_f64(TG_BOOL, b) == 1.0);
    assert_int_equal(tg_load_i64(TG_BOOL, b), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_sizes_kinds),
        cmocka_unit_test(test_promote_matches_numpy),
        cmocka_unit_test(test_can_cast_safe_matches_numpy),
        cmocka_unit_test(test_float_of),
        cmocka_unit_test(test_half_to_float_exhaustive),
        cmocka_unit_test(test_float_to_half_matches_numpy),
        cmocka_unit_test(test_float_to_half_rounding),
        cmocka_unit_test(test_double_to_half_single_rounding),
        cmocka_unit_test(test_cast_table_matches_numpy),
        cmocka_unit_test(test_load_store_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
