/* tg/grad.h: checking symbolic gradients against finite differences
 * (Theano's verify_grad).
 *
 * Both checks differentiate a scalar cost with respect to every float
 * input of a function, perturb each element of those inputs in turn
 * (central differences, a step scaled to the element and to the input's
 * dtype), and compare. Arrays passed in are borrowed. A mismatch returns
 * TG_ERUNTIME with one line naming the input, the element and both values.
 */
#ifndef TG_GRAD_PUBLIC_H
#define TG_GRAD_PUBLIC_H

#include <stdint.h>

#include "tg/array.h"
#include "tg/graph.h"
#include "tg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Verify the symbolic gradient of function `function` (NULL: the graph's
 * default) of the graph text: with f its first output, the cost
 * sum(f * r), r a fixed random projection drawn from seed (uniform in
 * [0.5, 1.5), f's run-time shape), is differentiated by a `grad` node
 * added to the graph and checked with tg_check_grad. rtol or atol <= 0
 * pick the defaults of each input's dtype (float64 1e-5, float32 1e-2,
 * float16 1e-1). */
TG_API int tg_verify_grad(const char *graph_json, size_t len, const char *function,
                          tg_array *const *inputs, double rtol, double atol, uint64_t seed,
                          tg_ctx *ctx);

/* Check given gradients: function `cost` of g returns a scalar first
 * output; function `grads` takes the same inputs and returns, in order,
 * one gradient for each float input of `cost`. Each gradient element s
 * must match the central difference d: |s - d| <= atol + rtol * max(|s|,
 * |d|). */
TG_API int tg_check_grad(tg_graph *g, const char *cost, const char *grads,
                         tg_array *const *inputs, double rtol, double atol, tg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
