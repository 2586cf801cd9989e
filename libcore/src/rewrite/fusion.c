/* Elementwise fusion (Theano's FusionOptimizer): chains and trees of
 * elementwise ops become one `composite` node, one loop over the data
 * instead of one loop (and one intermediate array) per op.
 *
 * Groups grow from a consumer backwards: a producer joins when it is
 * elementwise, works over the whole output shape (not a smaller operand
 * that the loop would recompute for every element of a broadcast), and
 * every reader of its result is already in the group. Since nothing
 * outside reads what a joined node produces, the group cannot close a
 * cycle through an outside node. Each group of two or more nodes becomes
 * one composite (ops/composite.h) whose origins are the nodes it fused.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/composite.h"
#include "rewrite/engine.h"

/* At most this many nodes in one composite: a longer chain becomes
 * several. Each distinct body is C source compiled once; a body of
 * thousands of nodes would take the compiler seconds, and the loop gains
 * nothing more once the data stays in registers. */
enum { FUSION_MAX_NODES = 64 };

static bool fusable(const tg_node *n) {
    return (n->op->flags & TG_OPF_ELEMWISE) && n->nout == 1 && !n->inplace &&
           !(n->op->flags & TG_OPF_SIDE_EFFECT);
}

/* p's result covers the whole iteration space of the group rooted at r:
 * same ndim, and no axis where p is statically 1 but r is not. */
static bool full_shape(const tg_node *p, const tg_node *r) {
    const tg_type *a = &p->outputs[0]->type, *b = &r->outputs[0]->type;
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] == 1 && b->shape[d] != 1) return false;
    return true;
}

static int by_index(const void *a, const void *b) {
    int x = (*(tg_node *const *)a)->index, y = (*(tg_node *const *)b)->index;
    return (x > y) - (x < y);
}

/* Nodes of the group are marked with a pointer to the root. */
int tg_rw_fusion(tg_rw *rw) {
    tg_fgraph *fg = tg_rw_fgraph(rw);
    tg_ctx *ctx = tg_rw_ctx(rw);
    int rc = tg_rw_toposort(rw);
    if (rc) return rc;
    int n = fg->nnodes;
    tg_node **group = tg_calloc((size_t)n + 1, sizeof *group);
    tg_var **ins = tg_calloc(TG_COMPOSITE_MAX_IO + 1, sizeof *ins);
    if (!group || !ins) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, n);
        fg->nodes[i]->mark = NULL;
    }
    /* Consumers first, so each group starts from its last node. */
    for (int i = n - 1; i >= 0; i--) {
        if (i >= 16) tg_prefetch_node(fg->nodes[i - 16]); /* cold on large graphs */
        if (i >= 8) tg_prefetch_node_vars(fg->nodes[i - 8]);
        tg_node *root = fg->nodes[i];
        if (root->mark || tg_rw_dead(root) || !fusable(root)) continue;
        int ng = 0;
        group[ng++] = root;
        root->mark = root;
        /* Grow: scan the group's inputs for producers that may join. */
        for (int g = 0; g < ng && ng < FUSION_MAX_NODES; g++) {
            tg_node *m = group[g];
            for (int k = 0; k < m->nin && ng < FUSION_MAX_NODES; k++) {
                tg_var *v = m->inputs[k];
                tg_node *p = v->owner;
                if (!p || p->mark || tg_rw_dead(p) || !fusable(p) || !full_shape(p, root)) continue;
                bool inside = v->nclients > 0;
                for (int c = 0; c < v->nclients && inside; c++)
                    inside = v->clients[c].node && v->clients[c].node->mark == root;
                if (!inside) continue;
                p->mark = root;
                group[ng++] = p;
            }
        }
        if (ng < 2) continue;
        /* Topological order: fg->nodes' order (the sort above set each
         * node's index to its position), without a walk over the graph. */
        int nm = ng;
        qsort(group, (size_t)nm, sizeof *group, by_index);
        /* The outside variables the group reads; 0-d constants go into
         * the body. */
        int nin = 0;
        bool too_many = false;
        for (int j = 0; j < nm && !too_many; j++)
            for (int k = 0; k < group[j]->nin; k++) {
                tg_var *v = group[j]->inputs[k];
                if ((v->owner && v->owner->mark == root) ||
                    (v->kind == TG_VAR_CONSTANT && v->type.ndim == 0))
                    continue;
                bool have = false;
                for (int q = 0; q < nin && !have; q++) have = ins[q] == v;
                if (have) continue;
                if (nin + 1 >= TG_COMPOSITE_MAX_IO) {
                    too_many = true;
                    break;
                }
                ins[nin++] = v;
            }
        if (too_many || nin == 0) {
            for (int j = 0; j < nm; j++) group[j]->mark = NULL;
            root->mark = root; /* the root stays visited */
            continue;
        }
        tg_var *out = root->outputs[0];
        tg_node *c = tg_composite_node_new_in(fg->arena, group, nm, ins, nin, &out, 1, ctx);
        if (!c) {
            /* A group the composite cannot express (a type it would not
             * reproduce) stays as it is. */
            if (ctx && (ctx->status == TG_ENOMEM)) {
                rc = TG_ENOMEM;
                goto done;
            }
            if (ctx) {
                ctx->status = 0;
                ctx->msg[0] = 0;
            }
            continue;
        }
        if (tg_fgraph_add_node(fg, c)) {
            /* (its outputs too: fg holds neither) */
            for (int k = 0; k < c->nout; k++) tg_var_free(c->outputs[k]);
            tg_node_free(c);
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        /* The output joins fg->vars before anything else can fail: fg
         * frees only the variables it holds, and one it never freed kept
         * its block of the arena, and so the whole function graph, alive
         * (the replace running out of memory leaked it; so did adding
         * the node, above, before its outputs were freed there). */
        for (int k = 0; k < c->nout; k++)
            if ((rc = tg_fgraph_add_var(fg, c->outputs[k]))) {
                for (int j = k; j < c->nout; j++) {
                    tg_var_free(c->outputs[j]);
                    c->outputs[j] = NULL;
                }
                goto done;
            }
        if ((rc = tg_fgraph_replace(fg, out, c->outputs[0]))) goto done;
        c->mark = c;
        if ((rc = tg_rw_record(rw, "fuse_elemwise", group, nm, c))) goto done;
        tg_rw_prune(rw, root);
    }
done:
    for (int i = 0; i < fg->nnodes; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, fg->nnodes);
        fg->nodes[i]->mark = NULL;
    }
    tg_free(group);
    tg_free(ins);
    return rc;
}
