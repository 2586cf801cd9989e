/* dtypes: names, sizes, NumPy's promotion and safe casting, half floats. */
#include <math.h>
#include <string.h>

#include "tensor/tensor.h"

static const char *const names[TG_NDTYPES] = {
#define X_(e, name, ctype, size, kind) name,
    TG_DTYPE_LIST(X_)
#undef X_
};
static const unsigned char sizes[TG_NDTYPES] = {
#define X_(e, name, ctype, size, kind) size,
    TG_DTYPE_LIST(X_)
#undef X_
};
static const char kinds[TG_NDTYPES] = {
#define X_(e, name, ctype, size, kind) kind,
    TG_DTYPE_LIST(X_)
#undef X_
};

static bool valid(tg_dtype dt) { return (int)dt >= 0 && dt < TG_NDTYPES; }

const char *tg_dtype_name(tg_dtype dt) { return valid(dt) ? names[dt] : "invalid"; }
size_t tg_dtype_size(tg_dtype dt) { return valid(dt) ? sizes[dt] : 0; }
char tg_dtype_kind(tg_dtype dt) { return valid(dt) ? kinds[dt] : '?'; }
bool tg_dtype_is_float(tg_dtype dt) { return tg_dtype_kind(dt) == 'f'; }
bool tg_dtype_is_int(tg_dtype dt) {
    char k = tg_dtype_kind(dt);
    return k == 'i' || k == 'u';
}

tg_dtype tg_dtype_from_name(const char *name) {
    if (!name) return TG_DTYPE_INVALID;
    for (int i = 0; i < TG_NDTYPES; i++)
        if (strcmp(names[i], name) == 0) return (tg_dtype)i;
    return TG_DTYPE_INVALID;
}

static tg_dtype signed_of_size(size_t s) {
    switch (s) {
    case 1: return TG_INT8;
    case 2: return TG_INT16;
    case 4: return TG_INT32;
    default: return TG_INT64;
    }
}

/* The smallest float that holds every value of integer dtype dt, as NumPy
 * promotes (int8/uint8 -> float16, int16/uint16 -> float32, wider ->
 * float64). */
static tg_dtype float_for_int(tg_dtype dt) {
    size_t s = sizes[dt];
    return s == 1 ? TG_FLOAT16 : s == 2 ? TG_FLOAT32 : TG_FLOAT64;
}

tg_dtype tg_dtype_promote(tg_dtype a, tg_dtype b) {
    if (!valid(a) || !valid(b)) return TG_DTYPE_INVALID;
    if (a == b) return a;
    char ka = kinds[a], kb = kinds[b];
    if (ka == 'b') return b;
    if (kb == 'b') return a;
    if (ka == 'f' && kb == 'f') return sizes[a] >= sizes[b] ? a : b;
    if (ka == 'f' || kb == 'f') {
        tg_dtype f = ka == 'f' ? a : b, i = ka == 'f' ? b : a;
        tg_dtype need = float_for_int(i);
        return sizes[need] > sizes[f] ? need : f;
    }
    if (ka == kb) return sizes[a] >= sizes[b] ? a : b;
    /* One signed, one unsigned. */
    tg_dtype s = ka == 'i' ? a : b, u = ka == 'i' ? b : a;
    if (sizes[s] > sizes[u]) return s;
    if (sizes[u] >= 8) return TG_FLOAT64;
    return signed_of_size(sizes[u] * 2);
}

bool tg_dtype_can_cast_safe(tg_dtype from, tg_dtype to) {
    if (!valid(from) || !valid(to)) return false;
    if (from == to) return true;
    return tg_dtype_promote(from, to) == to;
}

tg_dtype tg_dtype_float_of(tg_dtype dt) {
    if (!valid(dt)) return TG_DTYPE_INVALID;
    if (kinds[dt] == 'f') return dt;
    if (kinds[dt] == 'b' || sizes[dt] <= 2) return TG_FLOAT32;
    return TG_FLOAT64;
}

/* ---- half precision ---- */

float tg_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t tg_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) return sign | 0x7c00u;
        /* NaN: keep the top of the payload as NumPy does, and keep it a
         * NaN when those bits are all zero. */
        uint16_t h = (uint16_t)(0x7c00u | ((ax & 0x7fffffu) >> 13));
        if (h == 0x7c00u) h++;
        return sign | h;
    }
    if (ax >= 0x477ff000u) /* >= 65520 rounds to inf */
        return sign | 0x7c00u;
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half or zero */
        if (ax <= 0x33000000u) return sign; /* <= 2^-25 rounds to 0 */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* value / 2^-24 = m >> shift; 14..24 */
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        return sign | (uint16_t)hm;
    }
    /* Normal: rebias the exponent; a carry out of the mantissa correctly
     * bumps the exponent. */
    uint32_t h = (ax - 0x38000000u) >> 13;
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return sign | (uint16_t)h;
}
