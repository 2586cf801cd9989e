/* Element conversions between every pair of dtypes: NumPy's unsafe
 * casting (astype).
 *
 * - anything to bool is x != 0 (NaN gives true); a bool source byte other
 *   than 0 reads as 1;
 * - integer to integer wraps modulo 2^bits (C's conversion on GCC/Clang);
 * - integer or float to float rounds to nearest even; float64 to float16
 *   rounds once, from the double (as NumPy), not through float32;
 * - float to integer truncates toward zero. A NaN or a value whose
 *   truncation does not fit is undefined behaviour in C and gives
 *   platform-specific results in NumPy; tg defines it as x86's scalar
 *   conversion instructions do, which is what NumPy gives on x86-64 for
 *   non-vectorised loops: targets of up to 32 bits other than uint32 go
 *   through int32 (out of range: INT32_MIN) and wrap, so
 *   float64(300).astype(int8) == 44 and NaN gives 0 for int8..int16 and
 *   INT32_MIN for int32; uint32 and int64 go through int64 (out of range:
 *   INT64_MIN); uint64 takes [2^63, 2^64) exactly and otherwise goes
 *   through int64, so -1.0 gives 2^64 - 1 and NaN gives 2^63.
 *   (NumPy's AVX-512 loops differ from its scalar ones for uint32; tg
 *   follows the scalar ones everywhere.)
 *
 * One loop per (to, from) pair, from a macro table; each has a contiguous
 * path the compiler vectorises and a strided one. */
#include <math.h>
#include <string.h>

#include "tensor/tensor.h"

/* ---- float to integer, defined for every input ---- */

static inline int32_t f2i32(double v) {
    return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
}

static inline int64_t f2i64(double v) {
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v
                                                                     : INT64_MIN;
}

static inline uint64_t f2u64(double v) {
    if (v >= 9223372036854775808.0)
        return (uint64_t)f2i64(v - 9223372036854775808.0) ^ (UINT64_C(1) << 63);
    return (uint64_t)f2i64(v);
}

#define F2I_INT8(v) ((int8_t)f2i32(v))
#define F2I_INT16(v) ((int16_t)f2i32(v))
#define F2I_INT32(v) (f2i32(v))
#define F2I_INT64(v) (f2i64(v))
#define F2I_UINT8(v) ((uint8_t)f2i32(v))
#define F2I_UINT16(v) ((uint16_t)f2i32(v))
#define F2I_UINT32(v) ((uint32_t)f2i64(v))
#define F2I_UINT64(v) (f2u64(v))

/* float64 to float16 in one rounding (round to nearest even), NaN payloads
 * kept as NumPy's npy_doublebits_to_halfbits keeps them. */
static inline uint16_t double_to_half(double d) {
    uint64_t x;
    memcpy(&x, &d, 8);
    uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
    uint64_t ax = x & UINT64_C(0x7fffffffffffffff);
    if (ax >= UINT64_C(0x7ff0000000000000)) {
        if (ax == UINT64_C(0x7ff0000000000000)) return sign | 0x7c00u;
        uint16_t h = (uint16_t)(0x7c00u | ((ax & UINT64_C(0xfffffffffffff)) >> 42));
        if (h == 0x7c00u) h++; /* keep it a NaN */
        return sign | h;
    }
    if (ax >= UINT64_C(0x40effe0000000000)) /* >= 65520 rounds to inf */
        return sign | 0x7c00u;
    if (ax < UINT64_C(0x3f10000000000000)) { /* below 2^-14: subnormal half */
        if (ax <= UINT64_C(0x3e60000000000000)) return sign; /* <= 2^-25 */
        int e = (int)(ax >> 52);
        uint64_t m = (ax & UINT64_C(0xfffffffffffff)) | (UINT64_C(1) << 52);
        int shift = 1051 - e; /* value / 2^-24 = m >> shift; 43..53 */
        uint64_t hm = m >> shift, rem = m & ((UINT64_C(1) << shift) - 1);
        uint64_t half = UINT64_C(1) << (shift - 1);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        return sign | (uint16_t)hm;
    }
    uint64_t h = (ax >> 42) - (UINT64_C(1008) << 10);
    uint64_t rem = ax & ((UINT64_C(1) << 42) - 1), half = UINT64_C(1) << 41;
    if (rem > half || (rem == half && (h & 1u))) h++;
    return sign | (uint16_t)h;
}

/* ---- the conversion table ---- */

/* (enum suffix, storage type, class): B bool, I signed, U unsigned,
 * H float16, F float32, D float64. Two copies, because a macro cannot
 * expand itself. */
#define CAST_LIST_A(X)                                                    \
    X(BOOL, uint8_t, B)                                           \
    X(INT8, int8_t, I)                                            \
    X(INT16, int16_t, I)                                          \
    X(INT32, int32_t, I)                                          \
    X(INT64, int64_t, I)                                          \
    X(UINT8, uint8_t, U)                                          \
    X(UINT16, uint16_t, U)                                        \
    X(UINT32, uint32_t, U)                                        \
    X(UINT64, uint64_t, U)                                        \
    X(FLOAT16, uint16_t, H)                                       \
    X(FLOAT32, float, F)                                          \
    X(FLOAT64, double, D)
#define CAST_LIST_B(X, ...)                                                    \
    X(__VA_ARGS__, BOOL, uint8_t, B)                                           \
    X(__VA_ARGS__, INT8, int8_t, I)                                            \
    X(__VA_ARGS__, INT16, int16_t, I)                                          \
    X(__VA_ARGS__, INT32, int32_t, I)                                          \
    X(__VA_ARGS__, INT64, int64_t, I)                                          \
    X(__VA_ARGS__, UINT8, uint8_t, U)                                          \
    X(__VA_ARGS__, UINT16, uint16_t, U)                                        \
    X(__VA_ARGS__, UINT32, uint32_t, U)                                        \
    X(__VA_ARGS__, UINT64, uint64_t, U)                                        \
    X(__VA_ARGS__, FLOAT16, uint16_t, H)                                       \
    X(__VA_ARGS__, FLOAT32, float, F)                                          \
    X(__VA_ARGS__, FLOAT64, double, D)

/* CONV_<to class>_<from class>(to enum, to type, x) */
#define CONV_B_B(TE, TT, x) ((uint8_t)((x) != 0))
#define CONV_B_I CONV_B_B
#define CONV_B_U CONV_B_B
#define CONV_B_F CONV_B_B
#define CONV_B_D CONV_B_B
#define CONV_B_H(TE, TT, x) ((uint8_t)(((x)&0x7fffu) != 0))

#define CONV_INT_B(TE, TT, x) ((TT)((x) != 0))
#define CONV_INT_I(TE, TT, x) ((TT)(x))
#define CONV_INT_F(TE, TT, x) (F2I_##TE((double)(x)))
#define CONV_INT_H(TE, TT, x) (F2I_##TE((double)tg_half_to_float(x)))
#define CONV_I_B CONV_INT_B
#define CONV_I_I CONV_INT_I
#define CONV_I_U CONV_INT_I
#define CONV_I_F CONV_INT_F
#define CONV_I_D CONV_INT_F
#define CONV_I_H CONV_INT_H
#define CONV_U_B CONV_INT_B
#define CONV_U_I CONV_INT_I
#define CONV_U_U CONV_INT_I
#define CONV_U_F CONV_INT_F
#define CONV_U_D CONV_INT_F
#define CONV_U_H CONV_INT_H

#define CONV_FLT_B(TE, TT, x) ((TT)((x) != 0))
#define CONV_FLT_X(TE, TT, x) ((TT)(x))
#define CONV_FLT_H(TE, TT, x) ((TT)tg_half_to_float(x))
#define CONV_F_B CONV_FLT_B
#define CONV_F_I CONV_FLT_X
#define CONV_F_U CONV_FLT_X
#define CONV_F_F CONV_FLT_X
#define CONV_F_D CONV_FLT_X
#define CONV_F_H CONV_FLT_H
#define CONV_D_B CONV_FLT_B
#define CONV_D_I CONV_FLT_X
#define CONV_D_U CONV_FLT_X
#define CONV_D_F CONV_FLT_X
#define CONV_D_D CONV_FLT_X
#define CONV_D_H CONV_FLT_H

/* Integers reach float16 through float32: exact below 2^24, and anything
 * larger overflows float16 either way. */
#define CONV_H_B(TE, TT, x) (tg_float_to_half((float)((x) != 0)))
#define CONV_H_I(TE, TT, x) (tg_float_to_half((float)(x)))
#define CONV_H_U CONV_H_I
#define CONV_H_F(TE, TT, x) (tg_float_to_half(x))
#define CONV_H_D(TE, TT, x) (double_to_half(x))
#define CONV_H_H(TE, TT, x) ((TT)(x))

typedef void (*cast_fn)(char *d, int64_t ds, const char *s, int64_t ss,
                        int64_t n);

/* memcpy loads and stores: views may be unaligned in principle, and
 * compilers turn these into plain moves. */
#define CAST_DEFINE(TE, TT, TC, FE, FT, FC)                                    \
    static void cast_##TE##_##FE(char *restrict d, int64_t ds,                 \
                                 const char *restrict s, int64_t ss,           \
                                 int64_t n) {                                  \
        if (ds == (int64_t)sizeof(TT) && ss == (int64_t)sizeof(FT)) {          \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                FT x;                                                          \
                memcpy(&x, s + i * (int64_t)sizeof(FT), sizeof x);             \
                TT y = CONV_##TC##_##FC(TE, TT, x);                            \
                memcpy(d + i * (int64_t)sizeof(TT), &y, sizeof y);             \
            }                                                                  \
            return;                                                            \
        }                                                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            FT x;                                                              \
            memcpy(&x, s + i * ss, sizeof x);                                  \
            TT y = CONV_##TC##_##FC(TE, TT, x);                                \
            memcpy(d + i * ds, &y, sizeof y);                                  \
        }                                                                      \
    }
#define CAST_ROW_DEFINE(TE, TT, TC) CAST_LIST_B(CAST_DEFINE, TE, TT, TC)
CAST_LIST_A(CAST_ROW_DEFINE)

#define CAST_ENTRY(TE, TT, TC, FE, FT, FC) [TG_##FE] = cast_##TE##_##FE,
#define CAST_ROW_ENTRY(TE, TT, TC) [TG_##TE] = {CAST_LIST_B(CAST_ENTRY, TE, TT, TC)},
static const cast_fn cast_table[TG_NDTYPES][TG_NDTYPES] = {
    CAST_LIST_A(CAST_ROW_ENTRY)};

/* ---- copies within a dtype ----
 *
 * One loop per item size with typed moves: a memcpy of tg_isize(dt)
 * bytes, a size the compiler does not know, was a library call per
 * element, and this is the copy under stack along the last axis (20x
 * NumPy's time), a reshape of a transposed view (3-4x), assignments into
 * strided views and the copies before BLAS. A source stride of 0 (a
 * broadcast value) is a fill, which vectorises into a contiguous
 * destination. Elements go one after another in order, as before, so
 * overlapping runs (no restrict) give what they gave. */
#define COPY_DEFINE(T)                                                         \
    static void copy_##T(char *d, int64_t ds, const char *s, int64_t ss,       \
                         int64_t n) {                                          \
        if (ss == 0) {                                                         \
            T v;                                                               \
            memcpy(&v, s, sizeof v);                                           \
            if (ds == (int64_t)sizeof(T)) {                                    \
                _Pragma("omp simd") for (int64_t i = 0; i < n; i++)            \
                    memcpy(d + i * (int64_t)sizeof(T), &v, sizeof v);          \
                return;                                                        \
            }                                                                  \
            for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, &v, sizeof v);  \
            return;                                                            \
        }                                                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            T v;                                                               \
            memcpy(&v, s + i * ss, sizeof v);                                  \
            memcpy(d + i * ds, &v, sizeof v);                                  \
        }                                                                      \
    }
COPY_DEFINE(uint8_t)
COPY_DEFINE(uint16_t)
COPY_DEFINE(uint32_t)
COPY_DEFINE(uint64_t)

void tg_cast_strided(tg_dtype to, void *dst, int64_t ds, tg_dtype from,
                     const void *src, int64_t ss, int64_t n) {
    if (n <= 0) return;
    if (to == from) {
        size_t sz = tg_isize(to);
        if (n == 1 || (ds == (int64_t)sz && ss == (int64_t)sz)) {
            memmove(dst, src, (size_t)n * sz);
            return;
        }
        switch (sz) {
        case 1: copy_uint8_t(dst, ds, src, ss, n); return;
        case 2: copy_uint16_t(dst, ds, src, ss, n); return;
        case 4: copy_uint32_t(dst, ds, src, ss, n); return;
        case 8: copy_uint64_t(dst, ds, src, ss, n); return;
        }
        char *d = dst;
        const char *s = src;
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, sz);
        return;
    }
    cast_table[to][from](dst, ds, src, ss, n);
}

/* ---- single elements ---- */

double tg_load_f64(tg_dtype dt, const void *p) {
    double v;
    if (dt == TG_FLOAT64) {
        memcpy(&v, p, 8);
        return v;
    }
    if ((unsigned)dt >= TG_NDTYPES) return 0;
    cast_table[TG_FLOAT64][dt]((char *)&v, 8, p, 0, 1);
    return v;
}

int64_t tg_load_i64(tg_dtype dt, const void *p) {
    int64_t v;
    if (dt == TG_INT64) {
        memcpy(&v, p, 8);
        return v;
    }
    if ((unsigned)dt >= TG_NDTYPES) return 0;
    cast_table[TG_INT64][dt]((char *)&v, 8, p, 0, 1);
    return v;
}

int64_t tg_load_len(tg_dtype dt, const void *p) {
    if (dt == TG_UINT64) {
        uint64_t u;
        memcpy(&u, p, 8);
        return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    return tg_load_i64(dt, p);
}

void tg_store_f64(tg_dtype dt, void *p, double v) {
    if (dt == TG_FLOAT64) {
        memcpy(p, &v, 8);
        return;
    }
    if ((unsigned)dt >= TG_NDTYPES) return;
    cast_table[dt][TG_FLOAT64](p, 0, (const char *)&v, 0, 1);
}

void tg_store_i64(tg_dtype dt, void *p, int64_t v) {
    if (dt == TG_INT64) {
        memcpy(p, &v, 8);
        return;
    }
    if ((unsigned)dt >= TG_NDTYPES) return;
    cast_table[dt][TG_INT64](p, 0, (const char *)&v, 0, 1);
}
