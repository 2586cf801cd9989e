/* Private: helpers shared by the shape family's files (shape.c,
 * subtensor.c). */
#ifndef TG_OPS_SHAPE_H
#define TG_OPS_SHAPE_H

#include <string.h>

#include "ops/op.h"

/* Make *out a view of a with the given layout (data points inside a's
 * buffer). The header *out held after the previous call is rewritten when
 * nobody else holds it, so that a view op called again allocates nothing;
 * otherwise it is released and a new header is made. */
int tg_shape_store_view(tg_array **out, const tg_array *a, int ndim,
                        const int64_t *shape, const int64_t *strides,
                        char *data, tg_ctx *ctx);

/* The attr `key` of n: true when present (*v is NULL for a JSON null). */
bool tg_shape_attr_get(const tg_node *n, const char *key, json_object **v);

/* Write `key: value` into n->attrs (created when NULL); takes value. */
int tg_shape_attr_put(tg_node *n, const char *key, json_object *value,
                      tg_ctx *ctx);

/* A shape the way NumPy prints it in messages: "(2,3)", "(3,)", "()". */
void tg_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

/* Whether the integer at p is a uint64 past 2^63 - 1 (*u its value): as
 * the length of a dimension that is too large, NumPy's "Maximum allowed
 * dimension exceeded", even beside a zero, where tg_load_len's 2^63 - 1
 * would make an empty array of that shape. */
static inline bool tg_shape_len_too_large(tg_dtype dt, const void *p, unsigned long long *u) {
    uint64_t v;
    if (dt != TG_UINT64) return false;
    memcpy(&v, p, sizeof v);
    *u = v;
    return v > (uint64_t)INT64_MAX;
}

/* Views cost nothing. */
void tg_shape_cost_view(const tg_node *n, tg_array *const *in,
                        tg_array *const *out, double *flops, double *bytes);

#endif
