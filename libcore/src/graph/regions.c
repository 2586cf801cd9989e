/* Lazy regions: which nodes of a function graph run only when an `ifelse`
 * takes one branch (FORMAT.md s7: only the branch taken is computed).
 *
 * A node belongs where its results are needed. Each reader contributes a
 * region: an ifelse reading it as a then-value contributes that ifelse's
 * then-region, as an else-value its else-region; any other reader (the
 * ifelse's condition included) contributes the region it runs in itself,
 * and a function output or update the eager region. The node runs in the
 * innermost region that contains all of these (their lowest common
 * ancestor in the tree of regions: an ifelse's two regions are children of
 * the region the ifelse runs in). One pass over the nodes, consumers
 * first, decides it. The VM lays the regions out as blocks it can skip
 * (vm/function.c); the merge pass asks before merging two nodes
 * (rewrite/merge.c).
 */
#include <stdint.h>

#include "graph/graph.h"
#include "ops/op.h"

static int lca(const tg_regions *r, int a, int b) {
    while (r->depth[a] > r->depth[b]) a = r->parent[a];
    while (r->depth[b] > r->depth[a]) b = r->parent[b];
    while (a != b) {
        a = r->parent[a];
        b = r->parent[b];
    }
    return a;
}

bool tg_regions_nested(const tg_regions *r, int a, int b) {
    if (!r->lazy) return true;
    int c = lca(r, a, b);
    return c == a || c == b;
}

void tg_regions_free(tg_regions *r) {
    tg_free(r->of);
    tg_free(r->parent);
    tg_free(r->depth);
    r->of = r->parent = r->depth = NULL;
}

int tg_regions_compute(const tg_fgraph *fg, tg_regions *r, tg_ctx *ctx) {
    int nn = fg->nnodes;
    r->nnodes = nn;
    r->lazy = false;
    r->nreg = 1 + 2 * nn;
    r->of = tg_calloc((size_t)nn + 1, sizeof *r->of);
    r->parent = tg_calloc((size_t)r->nreg, sizeof *r->parent);
    r->depth = tg_calloc((size_t)r->nreg, sizeof *r->depth);
    if (!r->of || !r->parent || !r->depth) {
        tg_regions_free(r);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    for (int k = 0; k < nn; k++) r->lazy |= (fg->nodes[k]->op->flags & TG_OPF_LAZY) != 0;
    if (!r->lazy) return TG_OK;
    /* Positions through the nodes' scratch pointer. */
    for (int k = 0; k < nn; k++) fg->nodes[k]->mark = (void *)(intptr_t)(k + 1);
    for (int k = nn - 1; k >= 0; k--) {
        tg_node *n = fg->nodes[k];
        int reg = -1;
        for (int j = 0; j < n->nout; j++) {
            const tg_var *v = n->outputs[j];
            for (int c = 0; c < v->nclients; c++) {
                const tg_node *u = v->clients[c].node;
                intptr_t p = u ? (intptr_t)u->mark - 1 : -1;
                int rr;
                if (p < 0 || p <= k)
                    rr = 0; /* a function output (or a reader outside the list) */
                else if ((u->op->flags & TG_OPF_LAZY) && v->clients[c].index >= 1)
                    rr = 1 + 2 * (int)p + (v->clients[c].index > u->nout);
                else
                    rr = r->of[p];
                reg = reg < 0 ? rr : lca(r, reg, rr);
            }
        }
        r->of[k] = reg < 0 ? 0 : reg;
        if (n->op->flags & TG_OPF_LAZY) {
            for (int side = 1; side <= 2; side++) {
                r->parent[2 * k + side] = r->of[k];
                r->depth[2 * k + side] = r->depth[r->of[k]] + 1;
            }
        }
    }
    for (int k = 0; k < nn; k++) fg->nodes[k]->mark = NULL;
    return TG_OK;
}
