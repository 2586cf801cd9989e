/* tg/dtype.h: element types and NumPy's promotion rules. */
#ifndef TG_DTYPE_H
#define TG_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum, name, C type, size, kind). The codes are saved in files: they
 * never change meaning, and new ones are appended. kind: 'b' bool, 'i'
 * signed, 'u' unsigned, 'f' float. */
#define TG_DTYPE_LIST(X)                              \
    X(TG_BOOL, "bool", uint8_t, 1, 'b')               \
    X(TG_INT8, "int8", int8_t, 1, 'i')                \
    X(TG_INT16, "int16", int16_t, 2, 'i')             \
    X(TG_INT32, "int32", int32_t, 4, 'i')             \
    X(TG_INT64, "int64", int64_t, 8, 'i')             \
    X(TG_UINT8, "uint8", uint8_t, 1, 'u')             \
    X(TG_UINT16, "uint16", uint16_t, 2, 'u')          \
    X(TG_UINT32, "uint32", uint32_t, 4, 'u')          \
    X(TG_UINT64, "uint64", uint64_t, 8, 'u')          \
    X(TG_FLOAT16, "float16", uint16_t, 2, 'f')        \
    X(TG_FLOAT32, "float32", float, 4, 'f')           \
    X(TG_FLOAT64, "float64", double, 8, 'f')

typedef enum tg_dtype {
#define TG_DTYPE_ENUM_(e, name, ctype, size, kind) e,
    TG_DTYPE_LIST(TG_DTYPE_ENUM_)
#undef TG_DTYPE_ENUM_
    TG_NDTYPES
} tg_dtype;

#define TG_DTYPE_INVALID ((tg_dtype)-1)

TG_API const char *tg_dtype_name(tg_dtype dt);
/* The dtype named `name`, or TG_DTYPE_INVALID. */
TG_API tg_dtype tg_dtype_from_name(const char *name);
TG_API size_t tg_dtype_size(tg_dtype dt);
/* 'b', 'i', 'u' or 'f'. */
TG_API char tg_dtype_kind(tg_dtype dt);
TG_API bool tg_dtype_is_float(tg_dtype dt);
TG_API bool tg_dtype_is_int(tg_dtype dt); /* signed or unsigned, not bool */
/* NumPy's promote_types(a, b). */
TG_API tg_dtype tg_dtype_promote(tg_dtype a, tg_dtype b);
/* NumPy's can_cast(from, to, casting="safe"). */
TG_API bool tg_dtype_can_cast_safe(tg_dtype from, tg_dtype to);
/* The dtype in which a float-only function (exp, true_div, mean...) of an
 * input of dtype dt computes: dt itself for floats, float32 for bool and
 * integers of 8 or 16 bits, float64 for wider integers (FORMAT.md s7). */
TG_API tg_dtype tg_dtype_float_of(tg_dtype dt);

/* IEEE half precision conversions (round to nearest even). */
TG_API float tg_half_to_float(uint16_t h);
TG_API uint16_t tg_float_to_half(float f);

#ifdef __cplusplus
}
#endif
#endif
