/* Private: what the debugging tools need from the rest of the library.
 * (A header of its own: composite.h and the VM's backend.h name their
 * kernel types alike and cannot be included together.) */
#ifndef TG_DEBUG_INTERNAL_H
#define TG_DEBUG_INTERNAL_H

#include "graph/graph.h"

/* Where in a composite a bad value was made: the body op, and the
 * original nodes it stood for (origins[0 .. norigins), borrowed from the
 * node); body_node -1 when every body op's output is clean or the first
 * bad one had bad inputs already (then all the node's origins are given,
 * as they are when the node does not know which fused node stood for
 * which). */
typedef struct tg_composite_where {
    int body_node;     /* j of the body's t<j>: the j-th fused node */
    const char *op;    /* the body op's name (static) */
    const char *var;   /* the body variable (borrowed from the node) */
    const char *const *origins;
    int norigins;
} tg_composite_where;

/* Re-run composite node n's body op by op on its inputs `in` (the arrays
 * it ran on) and find the first body op whose result `bad` says is bad
 * while its operands are not: what `tgdebug nanguard` names when a fused
 * loop makes a NaN. TG_ENOMEM, or a kernel's error. */
int tg_composite_locate(const tg_node *n, tg_array *const *in,
                        bool (*bad)(const tg_array *a, void *ud), void *ud,
                        tg_composite_where *w, tg_ctx *ctx);

/* The elements of arrays the NaN guard's checks read during its last
 * call (tg_nanguard_call): function inputs, shared values that changed
 * since, node outputs, a committer's operands; not an update proved clean
 * in place (nanguard.c), nor the statistics' second pass over a bad
 * array. For bench_nanguard and the tests. */
struct tg_nanguard;
int64_t tg_nanguard_elements_read(const struct tg_nanguard *g);

#endif
