/* Element conversions between every pair of dtypes (NumPy's unsafe
 * casting). Float to integer truncates toward zero; a NaN or a value out
 * of the target's range, undefined in C, gives the target's minimum for
 * signed targets and 0 for unsigned ones (x86 NumPy gives INT_MIN for
 * int64 and garbage elsewhere; we pick a defined value). */
#include <math.h>
#include <string.h>

#include "tensor/tensor.h"

static inline int64_t f2i_signed(double v, int bits) {
    double lim = ldexp(1.0, bits - 1);
    if (!(v > -lim - 1.0 && v < lim)) return (int64_t)(-lim);
    return (int64_t)v;
}

static inline uint64_t f2i_unsigned(double v, int bits) {
    double lim = ldexp(1.0, bits);
    if (!(v > -1.0 && v < lim)) {
        /* Negative values wrap as NumPy does on x86 for small targets
         * (np.float64(-1).astype(np.uint8) == 255). */
        if (v < 0 && v > -ldexp(1.0, 63)) return (uint64_t)(int64_t)v;
        return 0;
    }
    return (uint64_t)v;
}

double tg_load_f64(tg_dtype dt, const void *p) {
    switch (dt) {
    case TG_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case TG_INT8: return *(const int8_t *)p;
    case TG_INT16: return *(const int16_t *)p;
    case TG_INT32: return *(const int32_t *)p;
    case TG_INT64: return (double)*(const int64_t *)p;
    case TG_UINT8: return *(const uint8_t *)p;
    case TG_UINT16: return *(const uint16_t *)p;
    case TG_UINT32: return *(const uint32_t *)p;
    case TG_UINT64: return (double)*(const uint64_t *)p;
    case TG_FLOAT16: return tg_half_to_float(*(const uint16_t *)p);
    case TG_FLOAT32: return *(const float *)p;
    case TG_FLOAT64: return *(const double *)p;
    default: return 0;
    }
}

int64_t tg_load_i64(tg_dtype dt, const void *p) {
    switch (dt) {
    case TG_BOOL: return *(const uint8_t *)p != 0;
    case TG_INT8: return *(const int8_t *)p;
    case TG_INT16: return *(const int16_t *)p;
    case TG_INT32: return *(const int32_t *)p;
    case TG_INT64: return *(const int64_t *)p;
    case TG_UINT8: return *(const uint8_t *)p;
    case TG_UINT16: return *(const uint16_t *)p;
    case TG_UINT32: return *(const uint32_t *)p;
    case TG_UINT64: return (int64_t)*(const uint64_t *)p;
    default: return f2i_signed(tg_load_f64(dt, p), 64);
    }
}

void tg_store_f64(tg_dtype dt, void *p, double v) {
    switch (dt) {
    case TG_BOOL: *(uint8_t *)p = v != 0; break;
    case TG_INT8: *(int8_t *)p = (int8_t)f2i_signed(v, 64); break;
    case TG_INT16: *(int16_t *)p = (int16_t)f2i_signed(v, 64); break;
    case TG_INT32: *(int32_t *)p = (int32_t)f2i_signed(v, 64); break;
    case TG_INT64: *(int64_t *)p = f2i_signed(v, 64); break;
    case TG_UINT8: *(uint8_t *)p = (uint8_t)f2i_unsigned(v, 64); break;
    case TG_UINT16: *(uint16_t *)p = (uint16_t)f2i_unsigned(v, 64); break;
    case TG_UINT32: *(uint32_t *)p = (uint32_t)f2i_unsigned(v, 64); break;
    case TG_UINT64: *(uint64_t *)p = f2i_unsigned(v, 64); break;
    case TG_FLOAT16: *(uint16_t *)p = tg_float_to_half((float)v); break;
    case TG_FLOAT32: *(float *)p = (float)v; break;
    case TG_FLOAT64: *(double *)p = v; break;
    default: break;
    }
}

void tg_store_i64(tg_dtype dt, void *p, int64_t v) {
    switch (dt) {
    case TG_BOOL: *(uint8_t *)p = v != 0; break;
    case TG_INT8: *(int8_t *)p = (int8_t)v; break;
    case TG_INT16: *(int16_t *)p = (int16_t)v; break;
    case TG_INT32: *(int32_t *)p = (int32_t)v; break;
    case TG_INT64: *(int64_t *)p = v; break;
    case TG_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case TG_UINT16: *(uint16_t *)p = (uint16_t)v; break;
    case TG_UINT32: *(uint32_t *)p = (uint32_t)v; break;
    case TG_UINT64: *(uint64_t *)p = (uint64_t)v; break;
    default: tg_store_f64(dt, p, (double)v); break;
    }
}

/* Integer to integer: through int64/uint64 with C's modular conversion,
 * which is NumPy's wrap-around. Float targets from integers: exact C
 * conversions. Float sources to integers: truncation (above). */
#define LOOP(TO_T, FROM_T, EXPR)                                               \
    do {                                                                       \
        for (int64_t i = 0; i < n; i++) {                                      \
            FROM_T x;                                                          \
            memcpy(&x, s + i * ss, sizeof x);                                  \
            TO_T y = (TO_T)(EXPR);                                             \
            memcpy(d + i * ds, &y, sizeof y);                                  \
        }                                                                      \
    } while (0)

void tg_cast_strided(tg_dtype to, void *dst, int64_t ds, tg_dtype from,
                     const void *src, int64_t ss, int64_t n) {
    char *d = dst;
    const char *s = src;
    size_t tsz = tg_dtype_size(to);
    if (to == from) {
        if (ds == (int64_t)tsz && ss == (int64_t)tsz) {
            memmove(d, s, (size_t)n * tsz);
            return;
        }
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, tsz);
        return;
    }
    /* Common fast conversions. */
    if (from == TG_FLOAT32 && to == TG_FLOAT64) {
        LOOP(double, float, x);
        return;
    }
    if (from == TG_FLOAT64 && to == TG_FLOAT32) {
        LOOP(float, double, x);
        return;
    }
    if (from == TG_INT64 && to == TG_FLOAT64) {
        LOOP(double, int64_t, x);
        return;
    }
    if (from == TG_INT32 && to == TG_FLOAT64) {
        LOOP(double, int32_t, x);
        return;
    }
    char fk = tg_dtype_kind(from), tk = tg_dtype_kind(to);
    if (tk == 'b') {
        size_t fsz = tg_dtype_size(from);
        for (int64_t i = 0; i < n; i++) {
            const char *p = s + i * ss;
            bool nz;
            if (fk == 'f')
                nz = tg_load_f64(from, p) != 0; /* NaN != 0 is true */
            else {
                nz = false;
                for (size_t k = 0; k < fsz; k++) nz |= p[k] != 0;
            }
            ((uint8_t *)d)[i * ds] = nz;
        }
        return;
    }
    if (fk != 'f' && tk != 'f') {
        for (int64_t i = 0; i < n; i++)
            tg_store_i64(to, d + i * ds, tg_load_i64(from, s + i * ss));
        return;
    }
    if (fk != 'f') { /* integer -> float: exact through (u)int64 */
        for (int64_t i = 0; i < n; i++) {
            const char *p = s + i * ss;
            double v = from == TG_UINT64 ? (double)*(const uint64_t *)p
                                         : (double)tg_load_i64(from, p);
            if (to == TG_FLOAT32 && from != TG_UINT64) {
                float fv = (float)tg_load_i64(from, p);
                memcpy(d + i * ds, &fv, 4);
            } else if (to == TG_FLOAT16) {
                uint16_t h = tg_float_to_half((float)v);
                memcpy(d + i * ds, &h, 2);
            } else {
                tg_store_f64(to, d + i * ds, v);
            }
        }
        return;
    }
    if (tk == 'f') { /* float -> float */
        for (int64_t i = 0; i < n; i++) {
            double v = tg_load_f64(from, s + i * ss);
            if (to == TG_FLOAT16 && from == TG_FLOAT64) {
                /* Round once, from double, as NumPy does. */
                float fv = (float)v;
                uint16_t h = tg_float_to_half(fv);
                /* Double rounding can only matter near ties; correct it. */
                double back = tg_half_to_float(h);
                double err = fabs(back - v);
                uint16_t alt = (uint16_t)(back < v ? h + (v > 0 ? 1 : -1) : h - (v > 0 ? 1 : -1));
                if ((h & 0x7c00u) != 0x7c00u && (alt & 0x7c00u) != 0x7c00u) {
                    double ab = tg_half_to_float(alt);
                    if (fabs(ab - v) < err) h = alt;
                }
                memcpy(d + i * ds, &h, 2);
            } else {
                tg_store_f64(to, d + i * ds, v);
            }
        }
        return;
    }
    /* float -> integer: truncate toward zero; out of range defined. */
    int bits = (int)tg_dtype_size(to) * 8;
    for (int64_t i = 0; i < n; i++) {
        double v = tg_load_f64(from, s + i * ss);
        if (tk == 'i')
            tg_store_i64(to, d + i * ds, f2i_signed(v, bits));
        else
            tg_store_i64(to, d + i * ds, (int64_t)f2i_unsigned(v, bits));
    }
}
