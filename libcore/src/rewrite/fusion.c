/* Elementwise fusion (Theano's FusionOptimizer): chains and trees of
 * elementwise ops become one `composite` node, one loop over the data
 * instead of one loop (and one intermediate array) per op.
 *
 * Groups grow from a consumer backwards: a producer joins when it is
 * elementwise, works over the whole output shape (not a smaller operand
 * that the loop would recompute for every element of a broadcast), and
 * every reader of its result is either already in the group or comes
 * after the group's last node (its root) in topological order, or is a
 * function output. A result with such outside readers becomes an extra
 * output of the composite (multi-output fusion, as PyTensor's
 * FusionOptimizer does; Theano's took a producer only when the group read
 * all of it): `d = x - mean` of a layer norm, read by `sqr(d)` and by the
 * division, is computed once with the square instead of in a loop of its
 * own whose result the composite reads back. No cycle can close through
 * an outside node: each node the group reads from comes before its root,
 * each outside reader of what it makes after it (or is a composite made
 * earlier in this pass from nodes after it). A consumer after the root
 * that reads only what the group makes or reads joins as an extra output
 * too (grow). A cheap producer that cannot join is computed again in the
 * group instead of read (recomputable, below). Each group of two or more nodes becomes one composite
 * (ops/composite.h) whose origins are the nodes it fused.
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

/* At most this many extra outputs (results also read outside) in one
 * composite: each is an array the loop writes, and inputs and outputs
 * together stay within TG_COMPOSITE_MAX_IO. */
enum { FUSION_MAX_EXTRA = 16 };

/* At most this many recomputed producers in one composite (below). */
enum { FUSION_MAX_DUP = 16 };

/* The mark of a producer the group recomputes: it stays in the graph for
 * its other readers. Reset once its group is made or given up, so one
 * sentinel serves every group. */
static char dup_sentinel;
#define DUP ((tg_node *)(void *)&dup_sentinel)

/* o is a node of the group rooted at root, fused or recomputed. */
static bool in_group(const tg_node *o, const tg_node *root) { return o && (o->mark == root || o->mark == DUP); }

static bool fusable(const tg_node *n) {
    return (n->op->flags & TG_OPF_ELEMWISE) && n->nout == 1 && !n->inplace &&
           !(n->op->flags & TG_OPF_SIDE_EFFECT);
}

/* v covers the whole iteration space of the group rooted at r: same
 * ndim, and no axis where v is statically 1 but r is not. Else it is a
 * broadcast operand (a bias, a row's statistic), which the loop reads
 * again and again from the cache. */
static bool full_var(const tg_var *v, const tg_node *r) {
    const tg_type *a = &v->type, *b = &r->outputs[0]->type;
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] == 1 && b->shape[d] != 1) return false;
    return true;
}

/* p's result covers the whole iteration space of the group rooted at r
 * (not a smaller operand that the loop would recompute for every element
 * of a broadcast). */
static bool full_shape(const tg_node *p, const tg_node *r) { return full_var(p->outputs[0], r); }

/* Does every reader of v either belong to the group rooted at root or come
 * after it? *outside: some reader is outside the group (a node after it,
 * or the function's output list). */
static bool readers_allow(const tg_var *v, const tg_node *root, bool *outside) {
    *outside = false;
    if (v->nclients == 0) return false;
    for (int c = 0; c < v->nclients; c++) {
        const tg_node *r = v->clients[c].node;
        if (r && r->mark == root) continue;
        /* Nodes made in this pass (earlier composites) have indices past
         * every original node's. */
        if (r && r->index <= root->index) return false;
        *outside = true;
    }
    return true;
}

static int by_index(const void *a, const void *b) {
    int x = (*(tg_node *const *)a)->index, y = (*(tg_node *const *)b)->index;
    return (x > y) - (x < y);
}

/* Can the group recompute p instead of reading its result? p cannot join
 * (a reader of its result comes before the root, so its result must be
 * made anyway), but it is one exact arithmetic op (the same bits wherever
 * it runs: kernels are built without contraction) over values the group
 * reads already, or makes, or scalars and broadcast operands. Then the
 * loop computes it for nothing and reads one array less; and when every
 * reader that is left of p's result then belongs to one group, that group
 * no longer writes it out. A GELU's backward reads z, z^2, tanh(u) and 1 + tanh(u) from
 * the forward: z^2 and 1 + tanh(u) come from z and tanh(u). (XLA's fusion
 * duplicates producers so; Theano's and PyTensor's do not.) */
/* Does a node of the group (its first ng) read w? */
static bool group_reads(tg_node *const *group, int ng, const tg_var *w) {
    for (int g = 0; g < ng; g++)
        for (int j = 0; j < group[g]->nin; j++)
            if (group[g]->inputs[j] == w) return true;
    return false;
}

static bool recomputable(const tg_node *p, tg_node *const *group, int ng, const tg_node *root) {
    static const char *const CHEAP[] = {"add", "sub", "mul", "neg", "sqr", NULL};
    bool cheap = false;
    for (int i = 0; CHEAP[i] && !cheap; i++) cheap = !strcmp(p->op->name, CHEAP[i]);
    if (!cheap || p->nin > 3) return false;
    for (int k = 0; k < p->nin; k++) {
        const tg_var *w = p->inputs[k];
        if (w->type.ndim != 0 && !in_group(w->owner, root) && full_var(w, root) && !group_reads(group, ng, w))
            return false;
    }
    return true;
}

/* Is each value q reads made by the group, read by it already, or a 0-d
 * input or constant? Nothing else: a value made after the group could
 * depend on it (a cycle), and a new input of the composite could widen
 * its broadcast shape past the root's, which is every output's (x of
 * (1, 8) read by the root, y of (3, 8) only by q). */
static bool reads_only_group(const tg_node *q, tg_node *const *group, int ng, const tg_node *root) {
    for (int k = 0; k < q->nin; k++) {
        const tg_var *w = q->inputs[k];
        if (!in_group(w->owner, root) && !(!w->owner && w->type.ndim == 0) && !group_reads(group, ng, w))
            return false;
    }
    return true;
}

/* The group rooted at root (group[0], already marked): producers join
 * while the group has room. extra: a result also read after the root (or
 * by the function's output list) may join, as an extra output of the
 * composite. Returns the group's size. */
static int grow(tg_node **group, tg_node *root, bool extra, bool dup) {
    int ng = 1, nextra = 0, ndup = 0;
    group[0] = root;
    /* One pass: a producer turned away because a reader of its result has
     * not joined yet comes up again when that reader joins and scans its
     * inputs. */
    for (int g = 0; g < ng && ng < FUSION_MAX_NODES; g++) {
        tg_node *m = group[g];
        for (int k = 0; k < m->nin && ng < FUSION_MAX_NODES; k++) {
            tg_var *v = m->inputs[k];
            tg_node *p = v->owner;
            if (!p || p->mark || tg_rw_dead(p) || !fusable(p) || !full_shape(p, root)) continue;
            bool outside;
            if (!readers_allow(v, root, &outside) || (outside && (!extra || nextra == FUSION_MAX_EXTRA))) continue;
            nextra += outside;
            p->mark = root;
            group[ng++] = p;
        }
    }
    /* Then consumers that come after the root, took no group of their
     * own (a reader of what they read came earlier), and read nothing but
     * what the group makes or reads, or 0-d inputs and constants: the
     * loop makes their result too, as an extra output, instead of a loop
     * of their own reading its arrays again (a layer norm's gradient in
     * its scale, g_out * xhat before the sum over rows, beside the loop
     * that makes g_out). Nothing they read depends on the group but its
     * own values, and what reads them comes after them, so no cycle. */
    for (int g = 0; extra && g < ng && ng < FUSION_MAX_NODES && nextra < FUSION_MAX_EXTRA; g++) {
        tg_var *v = group[g]->outputs[0];
        for (int c = 0; c < v->nclients && ng < FUSION_MAX_NODES && nextra < FUSION_MAX_EXTRA; c++) {
            tg_node *q = v->clients[c].node;
            bool outside;
            if (!q || q->mark != q || q->index <= root->index || tg_rw_dead(q) || !fusable(q) ||
                !full_shape(q, root) || !reads_only_group(q, group, ng, root) ||
                !readers_allow(q->outputs[0], root, &outside))
                continue;
            nextra++;
            q->mark = root;
            group[ng++] = q;
        }
    }
    /* Then the producers it recomputes, once nothing more can join (a
     * copy taken earlier would have kept out a producer that joins whole:
     * x * x read twice by the group, copied at its first reader, kept
     * tanh(x) out for good). Again from the start after each copy, whose
     * operands let others qualify. */
    for (bool again = dup; again;) {
        again = false;
        for (int g = 0; g < ng && ng < FUSION_MAX_NODES && ndup < FUSION_MAX_DUP; g++) {
            tg_node *m = group[g];
            for (int k = 0; k < m->nin && ng < FUSION_MAX_NODES && ndup < FUSION_MAX_DUP; k++) {
                tg_node *p = m->inputs[k]->owner;
                if (!p || p->mark || tg_rw_dead(p) || !fusable(p) || !full_shape(p, root) ||
                    !recomputable(p, group, ng, root))
                    continue;
                ndup++;
                p->mark = DUP;
                group[ng++] = p;
                again = true;
            }
        }
    }
    return ng;
}

/* The outputs of the group (in topological order, marked by root): the
 * root's result, then each result also read outside the group. */
static int group_outputs(tg_node *const *group, int nm, const tg_node *root, tg_var **outs) {
    int nout = 0;
    outs[nout++] = root->outputs[0];
    for (int j = 0; j < nm; j++) {
        tg_var *v = group[j]->outputs[0];
        bool outside = false;
        if (group[j] == root || group[j]->mark == DUP) continue;
        for (int c = 0; c < v->nclients && !outside; c++)
            outside = !v->clients[c].node || v->clients[c].node->mark != root;
        if (outside) outs[nout++] = v;
    }
    return nout;
}

/* The outside variables the group reads (0-d constants go into the
 * body), or -1 when they and the nout outputs would be more than a
 * composite takes. */
static int group_inputs(tg_node *const *group, int nm, const tg_node *root, int nout, tg_var **ins) {
    int nin = 0;
    for (int j = 0; j < nm; j++)
        for (int k = 0; k < group[j]->nin; k++) {
            tg_var *v = group[j]->inputs[k];
            if (in_group(v->owner, root) || (v->kind == TG_VAR_CONSTANT && v->type.ndim == 0)) continue;
            bool have = false;
            for (int q = 0; q < nin && !have; q++) have = ins[q] == v;
            if (have) continue;
            if (nin + nout >= TG_COMPOSITE_MAX_IO) return -1;
            ins[nin++] = v;
        }
    return nin;
}

/* Every output of a composite has the broadcast shape of all its inputs
 * (ops/composite.h), so an extra output must have the root's shape at run
 * time for sure, not only where both are known. Along an axis of unknown
 * length (a batch written as null) a result could be 1 where the root is
 * not, broadcast against an input the result does not read; it may be
 * an output only when every such input is 1 along that axis (a bias over
 * a batch), or lacks it. */
static bool extras_fit(tg_node *const *group, int nm, const tg_node *root, tg_var *const *ins, int nin,
                       tg_var *const *outs, int nout) {
    uint64_t dep[FUSION_MAX_NODES]; /* per member: bit q when it reads ins[q], directly or not */
    const tg_type *rt = &root->outputs[0]->type;
    for (int j = 0; j < nm; j++) {
        dep[j] = 0;
        for (int k = 0; k < group[j]->nin; k++) {
            const tg_var *v = group[j]->inputs[k];
            if (in_group(v->owner, root)) {
                for (int q = 0; q < j; q++)
                    if (group[q] == v->owner) dep[j] |= dep[q];
                continue;
            }
            for (int q = 0; q < nin; q++)
                if (ins[q] == v) dep[j] |= (uint64_t)1 << q;
        }
    }
    for (int o = 1; o < nout; o++) {
        int j = 0;
        while (j < nm && group[j] != outs[o]->owner) j++;
        if (j == nm) return false;
        const tg_type *t = &outs[o]->type;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] >= 0 && t->shape[d] == rt->shape[d]) continue;
            for (int q = 0; q < nin; q++) {
                if (dep[j] >> q & 1) continue;
                const tg_type *u = &ins[q]->type;
                int du = d - (t->ndim - u->ndim);
                if (du >= 0 && u->shape[du] != 1) return false;
            }
        }
    }
    return true;
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
    tg_var **outs = tg_calloc(FUSION_MAX_EXTRA + 2, sizeof *outs);
    /* (groups of one structure share one attrs object in this function) */
    tg_composite_memo *memo = tg_composite_memo_new();
    if (!group || !ins || !outs || !memo) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    /* In a graph with a lazy op (ifelse) a result read outside the group
     * stays outside: as an extra output it would make the whole group run
     * wherever that result is needed, and a branch's work (and its
     * errors: an integer division by zero the condition guards against)
     * would run whatever the condition says. */
    bool lazy = false;
    for (int i = 0; i < n; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, n);
        fg->nodes[i]->mark = NULL;
        lazy |= (fg->nodes[i]->op->flags & TG_OPF_LAZY) != 0;
    }
    /* Consumers first, so each group starts from its last node. */
    for (int i = n - 1; i >= 0; i--) {
        if (i >= 16) tg_prefetch_node(fg->nodes[i - 16]); /* cold on large graphs */
        if (i >= 8) tg_prefetch_node_vars(fg->nodes[i - 8]);
        tg_node *root = fg->nodes[i];
        if (root->mark || tg_rw_dead(root) || !fusable(root)) continue;
        root->mark = root;
        /* With extra outputs first; when they do not fit (a shape that
         * might differ, too many inputs and outputs), without. */
        int nm = 0, nout = 0, nin = 0;
        for (bool extra = !lazy && tg_rw_multi_output(rw);; extra = false) {
            nm = grow(group, root, extra, tg_rw_recompute(rw));
            if (nm < 2) break;
            /* Topological order: fg->nodes' order (the sort above set
             * each node's index to its position), without a walk over
             * the graph. */
            qsort(group, (size_t)nm, sizeof *group, by_index);
            nout = group_outputs(group, nm, root, outs);
            nin = group_inputs(group, nm, root, nout, ins);
            if (nin > 0 && (nout == 1 || extras_fit(group, nm, root, ins, nin, outs, nout))) break;
            /* (a consumer taken from after the root was a group of its
             * own: it stays visited too) */
            for (int j = 0; j < nm; j++) group[j]->mark = group[j]->index > root->index ? group[j] : NULL;
            root->mark = root; /* the root stays visited */
            nm = 0;
            if (!extra || nout == 1) break;
        }
        if (nm < 2) continue;
        tg_node *c = tg_composite_node_new_in(fg->arena, memo, group, nm, ins, nin, outs, nout, ctx);
        /* Recomputed producers stay, for their other readers: unmarked
         * (free to join a later group), and neither recorded as replaced
         * nor pruned (the composite's origins, made from the body, hold
         * theirs). */
        int nf = 0;
        for (int j = 0; j < nm; j++)
            if (group[j]->mark == DUP)
                group[j]->mark = NULL;
            else
                group[nf++] = group[j];
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
        for (int k = 0; k < nout; k++)
            if ((rc = tg_fgraph_replace(fg, outs[k], c->outputs[k]))) goto done;
        c->mark = c;
        /* Every member goes, consumers first: the replace moved the
         * members that read an extra output over to the composite's, so
         * the root's prune would stop there and leave that output's
         * producer (and what it reads) with no reader but still alive,
         * holding its inputs' clients (which keeps them from being
         * overwritten in place). Before the record, which lists what
         * died with them. */
        for (int j = nf - 1; j >= 0; j--) tg_rw_prune(rw, group[j]);
        if ((rc = tg_rw_record(rw, "fuse_elemwise", group, nf, c))) goto done;
    }
done:
    for (int i = 0; i < fg->nnodes; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, fg->nnodes);
        fg->nodes[i]->mark = NULL;
    }
    tg_composite_memo_free(memo);
    tg_free(group);
    tg_free(ins);
    tg_free(outs);
    return rc;
}
