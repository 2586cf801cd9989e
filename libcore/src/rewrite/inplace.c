/* The in-place pass (Theano's destroy handler and inplace optimizers):
 * an elementwise op, gemm/gemv/ger, or an increment op overwrites one of
 * its inputs instead of allocating its result, when nothing else needs
 * that input's buffer afterwards.
 *
 * An input qualifies when it has the output's dtype and shape for sure,
 * this node is its only reader (and it is not a function output), and the
 * buffer it lives in belongs to no function input, constant or shared
 * variable: the walk follows views (dimshuffle, reshape, subtensor...)
 * back to the array that owns the buffer and asks the same of every
 * variable on the way. Since the node is the only reader of each, the
 * order the schedule picks cannot make another reader see the
 * overwritten value.
 *
 * A shared variable is overwritten only by the node that makes its
 * update, a gemm, gemv or ger that no node reads, which runs after every
 * other reader of its buffer (tg_inplace_shared_ok): an SGD step then
 * writes the weights where they are, as Theano's gemm_inplace did,
 * instead of copying them first. The VM runs such nodes last, in place
 * only when they cannot fail (vm/function.c).
 */
#include <string.h>

#include "ops/composite.h"
#include "rewrite/engine.h"

extern const tg_op tg_op_breakpoint, tg_op_op_from_graph;

/* The input of p whose buffer p's output j may live in: -1 for a buffer
 * of its own, -2 for one that may be anyone's. */
static int output_buffer_of(const tg_node *p, int j) {
    /* An ifelse output is the taken branch's value itself, whichever it
     * is. An op_from_graph returns what its compiled body returns, which
     * may be one of its inputs, or a view of one, once the body's own
     * rewrites have removed an identity or a `* 1`. */
    if ((p->op->flags & TG_OPF_LAZY) || p->op == &tg_op_op_from_graph) return -2;
    if (p->op->view_of < 0) return -1;
    /* A view op's every output is a view: split's pieces, all of input
     * 0; breakpoint's output j, input j + 1. */
    return p->op == &tg_op_breakpoint ? j + 1 : p->op->view_of;
}

/* Can the buffer behind v be overwritten by its only reader? (A shared
 * variable: tg_inplace_shared_ok.) */
static bool buffer_free(const tg_var *v) {
    for (int depth = 0; depth < 64; depth++) {
        if (v->kind != TG_VAR_RESULT || !v->owner) return false; /* input, constant, shared */
        if (!tg_rw_single_client(v)) return false;
        const tg_node *p = v->owner;
        int k = output_buffer_of(p, v->owner_index);
        if (k == -1) return true;
        if (k < 0 || k >= p->nin) return false;
        v = p->inputs[k];
    }
    return false;
}

int tg_rw_inplace(tg_rw *rw) {
    tg_fgraph *fg = tg_rw_fgraph(rw);
    int nnodes = fg->nnodes;
    tg_shared_check chk = {0};
    int rc = TG_OK;
    for (int i = 0; i < nnodes; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, nnodes);
        tg_node *n = fg->nodes[i];
        if (tg_rw_dead(n) || n->inplace) continue;
        const tg_op *op = n->op;
        bool composite = !strcmp(op->name, "composite");
        /* An op with several outputs (fusion's multi-output composites)
         * writes each over an input of its own, when its kernels allow
         * it (TG_OPF_INPLACE_ANY_OUTPUT). A composite whose body returns
         * an input's value itself places only output 0, which the
         * interpreter writes last. */
        if (n->nout != 1 && !(op->flags & TG_OPF_INPLACE_ANY_OUTPUT)) continue;
        bool elemwise = (op->flags & TG_OPF_ELEMWISE) || composite;
        unsigned cand = 0;
        if (op->flags & TG_OPF_ELEMWISE)
            cand = 3u; /* the kernels reuse inputs 0 and 1 (n-ary folds write
                          their first partial result before reading the rest) */
        else if (op->inplace_inputs)
            cand = op->inplace_inputs; /* gemm's z, ger's A, ... */
        else
            continue;
        int nplace = composite && !tg_composite_places_any_output(n) ? 1 : n->nout;
        int8_t picks[TG_COMPOSITE_MAX_IO];
        uint64_t taken = 0;
        bool any = false;
        for (int o = 0; o < nplace; o++) {
            picks[o] = -1;
            const tg_type *ot = &n->outputs[o]->type;
            /* Small results are kept by the VM from call to call anyway. */
            int64_t size = (int64_t)tg_dtype_size(ot->dtype);
            for (int d = 0; d < ot->ndim && size >= 0; d++) size = ot->shape[d] < 0 ? -1 : size * ot->shape[d];
            if (size >= 0 && size <= TG_VM_KEEP_BYTES) continue;
            int pick = -1;
            for (int k = 0; k < n->nin && k < 32 && pick < 0; k++) {
                if (!((cand >> k) & 1u) || (taken >> k & 1u)) continue;
                const tg_var *in = n->inputs[k];
                if (in->type.dtype != ot->dtype || in->type.ndim != ot->ndim) continue;
                if (elemwise && !tg_rw_keeps_shape(in, (const tg_var *const *)n->inputs, n->nin)) continue;
                /* sum_to takes its input over only when nothing is summed.
                 * An output length still open where the input's is known
                 * may be one a later inference finds to differ (a slice
                 * whose bounds folded to constants after its type was
                 * made: restoring the .tgf, which infers every type again,
                 * then refused the hint): the output takes a buffer of its
                 * own. Elementwise ops: tg_rw_keeps_shape above. */
                bool differ = false;
                for (int d = 0; d < ot->ndim; d++)
                    differ |= in->type.shape[d] >= 0 &&
                              (ot->shape[d] >= 0 ? in->type.shape[d] != ot->shape[d] : !elemwise);
                if (differ) continue;
                /* A shared variable: the update's own producer, run last
                 * (graph.h). */
                if (in->kind == TG_VAR_SHARED) {
                    if (tg_inplace_shared_ok(fg, n, k, &chk)) pick = k;
                    if (chk.oom) {
                        rc = tg_errorf(tg_rw_ctx(rw), TG_ENOMEM, "out of memory");
                        goto done;
                    }
                    continue;
                }
                bool twice = false; /* the same variable read twice by n */
                for (int j = 0; j < n->nin; j++) twice |= j != k && n->inputs[j] == in;
                if (twice || !buffer_free(in)) continue;
                pick = k;
            }
            if (pick < 0) continue;
            picks[o] = (int8_t)pick;
            taken |= (uint64_t)1 << pick;
            any = true;
        }
        if (!any) continue;
        n->inplace = tg_malloc((size_t)n->nout);
        if (!n->inplace) {
            rc = tg_errorf(tg_rw_ctx(rw), TG_ENOMEM, "out of memory");
            goto done;
        }
        memset(n->inplace, -1, (size_t)n->nout);
        memcpy(n->inplace, picks, (size_t)nplace);
        /* (removed and created: the node lives on under its key, as a
         * merge's survivor does, so the record replays to the graph) */
        if (tg_rw_record(rw, "inplace", &n, 1, n)) {
            rc = TG_ENOMEM;
            goto done;
        }
    }
done:
    tg_shared_check_free(&chk);
    return rc;
}
