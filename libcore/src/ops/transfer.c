/* transfer (FORMAT.md s7): moves a value between the host and a device,
 * attrs {to: "cpu" | "cuda"}. The placement pass (rewrite/place.c)
 * inserts it where a value crosses devices and gives each one the
 * backend's copy as its kernel. The op's own kernel is the identity on
 * the host: a graph file that holds transfer nodes (an exported, placed
 * function) still runs, on the CPU, wherever it is loaded. */
#include "backend/backend.h"
#include "ops/op.h"

static const char *const KEYS[] = {"to", NULL};
static const char *const TARGETS[] = {"cpu", "cuda", NULL};

static int transfer_parse(tg_node *n, tg_ctx *ctx) {
    return tg_attr_enum(n, "to", TARGETS, -1, &n->a.mode, ctx);
}

static int transfer_infer(tg_node *n, tg_ctx *ctx) {
    const tg_type *t = &n->inputs[0]->type;
    tg_set_out_type(n, 0, t->dtype, t->ndim, t->shape);
    return TG_OK;
}

static int transfer_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    tg_array *r = tg_array_ref(in[0]);
    tg_array_free(out[0]);
    out[0] = r;
    return TG_OK;
}

static void transfer_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                          double *bytes) {
    *flops = 0;
    *bytes = (double)tg_array_size_inline(in[0]) * (double)tg_isize(in[0]->dtype);
}

const tg_op tg_op_transfer = {
    .name = "transfer", .nin_min = 1, .nin_max = 1, .nout = 1,
    .attr_keys = KEYS, .parse_attrs = transfer_parse, .infer = transfer_infer,
    .run = transfer_run, .cost = transfer_cost, .view_of = 0};
