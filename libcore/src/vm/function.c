/* Compiling (clone, link) and calling functions: the VM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dnn.h"
#include "ops/control.h"
#include "vm/vm.h"

/* ---- lazy ifelse: the layout of the schedule ---- */

/* Reorder fg->nodes (and the placement's kernels with them) so that every
 * ifelse with nodes of its own is preceded by its then-block and its
 * else-block, and record the control points that pick the block
 * (vm.h). Each region's nodes keep their topological order and a block is
 * emitted where its ifelse stands, so the result is still topological;
 * nested ifelse nodes are laid out the same way inside their block. An
 * explicit stack, so that deep nesting cannot overflow C's. The control
 * points' cond_slot holds the ifelse's position until slots exist. */
static int lay_out_lazy(tg_function *f, tg_ctx *ctx) {
    tg_fgraph *fg = f->fg;
    int nn = fg->nnodes, rc = TG_OK;
    tg_regions r = {0};
    if ((rc = tg_regions_compute(fg, &r, ctx))) return rc;
    int *head = NULL, *tail = NULL, *next = NULL, *order = NULL, *branch_of = NULL, *skip_of = NULL;
    struct frame {
        int cur, ifnode, side;
    } *stack = NULL;
    tg_node **nodes = NULL;
    tg_kernel_fn *kern = NULL;
    bool any = false;
    for (int k = 0; k < nn && r.lazy; k++) any |= r.of[k] != 0;
    if (!any) {
        /* No ifelse has a node of its own: no control point, the order
         * stays. */
        if (!(f->ctl = tg_calloc(1, sizeof *f->ctl))) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        else
            f->ctl[0].at = nn;
        goto done;
    }
    head = tg_malloc(sizeof *head * (size_t)r.nreg);
    tail = tg_malloc(sizeof *tail * (size_t)r.nreg);
    next = tg_malloc(sizeof *next * (size_t)(nn + 1));
    order = tg_malloc(sizeof *order * (size_t)(nn + 1));
    branch_of = tg_malloc(sizeof *branch_of * (size_t)(nn + 1));
    skip_of = tg_malloc(sizeof *skip_of * (size_t)(nn + 1));
    stack = tg_malloc(sizeof *stack * (size_t)(nn + 2));
    nodes = tg_malloc(sizeof *nodes * (size_t)(nn + 1));
    /* Two control points per ifelse at most, and the sentinel. */
    f->ctl = tg_calloc((size_t)(2 * nn + 1), sizeof *f->ctl);
    if (!head || !tail || !next || !order || !branch_of || !skip_of || !stack || !nodes || !f->ctl ||
        (f->kernels && !(kern = tg_malloc(sizeof *kern * (size_t)(nn + 1))))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < r.nreg; i++) head[i] = tail[i] = -1;
    for (int k = 0; k < nn; k++) {
        int g = r.of[k];
        next[k] = -1;
        if (tail[g] < 0)
            head[g] = k;
        else
            next[tail[g]] = k;
        tail[g] = k;
    }
    int pos = 0, sp = 0, nc = 0;
    stack[sp++] = (struct frame){head[0], -1, 0};
    while (sp) {
        struct frame *fr = &stack[sp - 1];
        if (fr->cur < 0) {
            struct frame done_fr = *fr;
            sp--;
            int I = done_fr.ifnode;
            if (I < 0) continue;
            if (done_fr.side == 0) {
                tg_vm_ctl *sk = &f->ctl[nc];
                skip_of[I] = nc++;
                sk->at = pos;
                sk->kind = TG_CTL_SKIP;
                f->ctl[branch_of[I]].target = pos;
                f->ctl[branch_of[I]].next = nc;
                stack[sp++] = (struct frame){head[2 + 2 * I], I, 1};
            } else {
                f->ctl[skip_of[I]].target = pos;
                f->ctl[skip_of[I]].next = nc;
                order[pos++] = I;
            }
            continue;
        }
        int m = fr->cur;
        fr->cur = next[m];
        if ((fg->nodes[m]->op->flags & TG_OPF_LAZY) && (head[1 + 2 * m] >= 0 || head[2 + 2 * m] >= 0)) {
            tg_vm_ctl *br = &f->ctl[nc];
            branch_of[m] = nc++;
            br->at = pos;
            br->kind = TG_CTL_BRANCH;
            br->cond_slot = m;
            stack[sp++] = (struct frame){head[1 + 2 * m], m, 0};
        } else {
            order[pos++] = m;
        }
    }
    /* Every node is in exactly one region, and every region with nodes
     * belongs to a laid-out ifelse. */
    if (pos != nn) {
        rc = tg_errorf(ctx, TG_EINVAL, "internal error: lazy layout placed %d of %d nodes", pos, nn);
        goto done;
    }
    /* cond_slot: the condition variable's index for now. */
    for (int i = 0; i < nc; i++)
        if (f->ctl[i].kind == TG_CTL_BRANCH) f->ctl[i].cond_slot = fg->nodes[f->ctl[i].cond_slot]->inputs[0]->index;
    f->nctl = nc;
    f->ctl[nc].at = nn;
    for (int k = 0; k < nn; k++) nodes[k] = fg->nodes[order[k]];
    for (int k = 0; k < nn; k++) {
        fg->nodes[k] = nodes[k];
        fg->nodes[k]->index = k;
    }
    if (kern) {
        for (int k = 0; k < nn; k++) kern[k] = f->kernels[order[k]];
        memcpy(f->kernels, kern, sizeof *kern * (size_t)nn);
    }
done:
    tg_regions_free(&r);
    tg_free(head);
    tg_free(tail);
    tg_free(next);
    tg_free(order);
    tg_free(branch_of);
    tg_free(skip_of);
    tg_free(stack);
    tg_free(nodes);
    tg_free(kern);
    return rc;
}

/* Control points by where their skipped range starts, the outer of two
 * that start together first. */
typedef struct ctl_key {
    int at, target, i;
} ctl_key;

static int ctl_key_cmp(const void *pa, const void *pb) {
    const ctl_key *a = pa, *b = pb;
    if (a->at != b->at) return a->at < b->at ? -1 : 1;
    if (a->target != b->target) return a->target > b->target ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* The slots to release when control point c jumps: those whose last
 * reader lies in the skipped range [c->at, c->target) but which were
 * made before it (values made inside the range were not made this call).
 *
 * Scanning every slot for every control point made a chain of n ifelse
 * nodes quadratic to link (the gradient of 8,000 of them: 4.6 of the
 * 5.2 s of tgc check). The ranges are nested or disjoint (lay_out_lazy
 * emits each block inside its ifelse's), so the ranges holding a
 * position are a chain from the innermost out, with their starts
 * falling as it goes out: each slot walks that chain from its last use
 * while the range starts after its producer. Slots are visited in
 * increasing order, so each list comes out as the scan made it. Ranges
 * that cross (none should) fall back to the scan. */
static int ctl_free_lists(tg_function *f, const int *last_use, const bool *pinned, const int *made_at,
                          tg_ctx *ctx) {
    int nc = f->nctl, nn = f->nsched, m = 0, rc = TG_OK;
    bool laminar = true;
    ctl_key *key = tg_malloc(sizeof *key * ((size_t)nc + 1));
    int *parent = tg_malloc(sizeof *parent * ((size_t)nc + 1));
    int *stack = tg_malloc(sizeof *stack * ((size_t)nc + 1));
    int *inner = tg_malloc(sizeof *inner * ((size_t)nn + 1));
    int *count = tg_calloc((size_t)nc + 1, sizeof *count);
    if (!key || !parent || !stack || !inner || !count) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory while linking");
        goto done;
    }
    for (int i = 0; i < nc; i++) {
        parent[i] = -1;
        if (f->ctl[i].at < f->ctl[i].target) /* an empty range frees nothing */
            key[m++] = (ctl_key){f->ctl[i].at, f->ctl[i].target, i};
        laminar &= f->ctl[i].at >= 0 && f->ctl[i].target <= nn;
    }
    qsort(key, (size_t)m, sizeof *key, ctl_key_cmp);
    /* inner[p]: the innermost range holding position p (-1: none). */
    for (int p = 0, j = 0, sp = 0; p < nn && laminar; p++) {
        while (sp && f->ctl[stack[sp - 1]].target <= p) sp--;
        for (; j < m && key[j].at == p; j++) {
            if (sp && f->ctl[stack[sp - 1]].target < key[j].target) laminar = false;
            parent[key[j].i] = sp ? stack[sp - 1] : -1;
            stack[sp++] = key[j].i;
        }
        inner[p] = sp ? stack[sp - 1] : -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int sl = 0; sl < f->nslots; sl++) {
            if (pinned[sl] || last_use[sl] < 0) continue;
            if (laminar) {
                for (int c = inner[last_use[sl]]; c >= 0 && f->ctl[c].at > made_at[sl]; c = parent[c]) {
                    if (pass) f->ctl[c].free_slots[f->ctl[c].nfree++] = sl;
                    else
                        count[c]++;
                }
                continue;
            }
            for (int c = 0; c < nc; c++)
                if (last_use[sl] >= f->ctl[c].at && last_use[sl] < f->ctl[c].target && made_at[sl] < f->ctl[c].at) {
                    if (pass) f->ctl[c].free_slots[f->ctl[c].nfree++] = sl;
                    else
                        count[c]++;
                }
        }
        for (int c = 0; c < nc && !pass; c++)
            if (count[c] && !(f->ctl[c].free_slots = tg_calloc((size_t)count[c], sizeof(int)))) {
                rc = tg_errorf(ctx, TG_ENOMEM, "out of memory while linking");
                goto done;
            }
    }
done:
    tg_free(key);
    tg_free(parent);
    tg_free(stack);
    tg_free(inner);
    tg_free(count);
    return rc;
}

/* ---- linking ---- */

/* The committers (vm.h): the schedule's last nodes that overwrite a
 * shared variable with its update, past every control point. A file may
 * place them elsewhere (the optimizer puts them last): those then never
 * get a lent value, and copy. */
static int link_commits(tg_function *f, tg_ctx *ctx) {
    tg_fgraph *fg = f->fg;
    int c = f->nsched;
    f->commit_at = c;
    if (!fg->nupd || f->on_device) return TG_OK;
    while (c > 0 && tg_node_commits(f->sched[c - 1].node)) c--;
    for (int i = 0; i < f->nctl && c < f->nsched; i++)
        if (f->ctl[i].at >= c) c = f->nsched;
    int m = f->nsched - c;
    if (!m) return TG_OK;
    f->lend = tg_malloc(sizeof *f->lend * ((size_t)f->nshared + 1));
    f->lent = tg_calloc((size_t)f->nshared + 1, sizeof *f->lent);
    f->commit_shared = tg_malloc(sizeof *f->commit_shared * (size_t)m);
    f->commit_upd = tg_malloc(sizeof *f->commit_upd * (size_t)m);
    f->commit_ready = tg_calloc((size_t)m, sizeof *f->commit_ready);
    f->upd_commits = tg_calloc((size_t)fg->nupd, sizeof *f->upd_commits);
    if (!f->lend || !f->lent || !f->commit_shared || !f->commit_upd || !f->commit_ready || !f->upd_commits)
        return tg_errorf(ctx, TG_ENOMEM, "out of memory while linking");
    for (int j = 0; j < f->nshared; j++) f->lend[j] = -1;
    for (int p = c; p < f->nsched; p++) {
        const tg_vm_node *s = &f->sched[p];
        int slot = s->in_slots[s->node->inplace[0]], j = -1, u = -1;
        for (int i = 0; i < f->nshared && j < 0; i++)
            if (f->shared_slots[i] == slot) j = i;
        for (int i = 0; j >= 0 && i < fg->nupd && u < 0; i++)
            if (f->out_slots[fg->nout + i] == s->out_slot && f->upd_shared[i] == f->shared[j]) u = i;
        /* (the restore's check and the optimizer's make both exist) */
        if (j < 0 || u < 0 || f->lend[j] >= 0) {
            for (int i = 0; i < f->nshared; i++) f->lend[i] = -1;
            memset(f->upd_commits, 0, (size_t)fg->nupd * sizeof *f->upd_commits);
            return TG_OK;
        }
        f->lend[j] = p;
        f->commit_shared[p - c] = j;
        f->commit_upd[p - c] = u;
        f->upd_commits[u] = true;
    }
    f->commit_at = c;
    return TG_OK;
}

static int ptr_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return (x > y) - (x < y);
}

/* f->lockset: the variables f updates (each once), then those it only
 * reads, from f->upd_shared and f->shared. */
static int make_lockset(tg_function *f, tg_ctx *ctx) {
    int nupd = f->fg->nupd, n = 0;
    if (!nupd && !f->nshared) return TG_OK;
    f->lockset = tg_calloc((size_t)(nupd + f->nshared) + 1, sizeof *f->lockset);
    if (!f->lockset) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    for (int i = 0; i < nupd; i++) f->lockset[n++] = f->upd_shared[i];
    qsort(f->lockset, (size_t)n, sizeof *f->lockset, ptr_cmp);
    int w = 0;
    for (int i = 0; i < n; i++)
        if (!w || f->lockset[i] != f->lockset[w - 1]) f->lockset[w++] = f->lockset[i];
    f->nlock_write = n = w;
    for (int i = 0; i < f->nshared; i++)
        if (!bsearch(&f->shared[i], f->lockset, (size_t)w, sizeof *f->lockset, ptr_cmp))
            f->lockset[n++] = f->shared[i];
    f->nlock = n;
    return TG_OK;
}

static int link_function(tg_function *f, tg_ctx *ctx) {
    tg_fgraph *fg = f->fg;
    int nvars = fg->nvars;
    f->nslots = nvars;
    f->slots = tg_calloc((size_t)nvars + 1, sizeof *f->slots);
    f->slot_var = tg_calloc((size_t)nvars + 1, sizeof *f->slot_var);
    int *slot_of = tg_calloc((size_t)nvars + 1, sizeof *slot_of);
    int *last_use = tg_calloc((size_t)nvars + 1, sizeof *last_use);
    bool *pinned = tg_calloc((size_t)nvars + 1, sizeof *pinned);
    f->sched = tg_calloc((size_t)fg->nnodes + 1, sizeof *f->sched);
    f->in_slots = tg_calloc((size_t)fg->nin + 1, sizeof *f->in_slots);
    f->out_slots = tg_calloc((size_t)(fg->nout + fg->nupd) + 1, sizeof *f->out_slots);
    f->shared_slots = tg_calloc((size_t)nvars + 1, sizeof *f->shared_slots);
    f->shared = tg_calloc((size_t)nvars + 1, sizeof *f->shared);
    f->upd_shared = tg_calloc((size_t)fg->nupd + 1, sizeof *f->upd_shared);
    int rc = TG_OK;
    if (!f->slots || !f->slot_var || !slot_of || !last_use || !pinned ||
        !f->sched || !f->in_slots || !f->out_slots || !f->shared_slots ||
        !f->shared || !f->upd_shared)
        goto oom;
    if ((rc = lay_out_lazy(f, ctx))) goto done;

    /* Slots: everything that is not a node output first, then the outputs
     * of each node, consecutive, in schedule order. */
    for (int i = 0; i < nvars; i++) slot_of[i] = -1;
    int next = 0;
    for (int i = 0; i < nvars; i++) {
        TG_SWEEP_PREFETCH(fg->vars, i, nvars);
        tg_var *v = fg->vars[i];
        if (v->owner) continue;
        slot_of[i] = next;
        f->slot_var[next] = v;
        pinned[next] = true;
        if (v->kind == TG_VAR_CONSTANT && v->resident) {
            /* Uploaded once: every call reads this copy. */
            const tg_backend *be = tg_backend_cuda();
            if ((rc = be->to_device(v->value, &f->slots[next], ctx))) goto done;
        } else if (v->kind == TG_VAR_CONSTANT) {
            f->slots[next] = tg_array_ref(v->value);
        } else if (v->kind == TG_VAR_SHARED) {
            if (v->resident && !f->shared_dev &&
                !(f->shared_dev = tg_calloc((size_t)nvars + 1, sizeof *f->shared_dev)))
                goto oom;
            if (v->resident) f->shared_dev[f->nshared] = true;
            f->shared_slots[f->nshared] = next;
            f->shared[f->nshared++] = v->shared;
        }
        next++;
    }
    for (int k = 0; k < fg->nnodes; k++) {
        if (k + 16 < fg->nnodes) tg_prefetch_node(fg->nodes[k + 16]);
        if (k + 8 < fg->nnodes) tg_prefetch_node_vars(fg->nodes[k + 8]);
        tg_node *n = fg->nodes[k];
        for (int j = 0; j < n->nout; j++) {
            slot_of[n->outputs[j]->index] = next;
            f->slot_var[next] = n->outputs[j];
            next++;
        }
    }
    f->nslots = next;
    for (int i = 0; i < fg->nin; i++) f->in_slots[i] = slot_of[fg->inputs[i]->index];
    for (int i = 0; i < fg->nout + fg->nupd; i++) {
        f->out_slots[i] = slot_of[fg->outputs[i]->index];
        pinned[f->out_slots[i]] = true;
    }
    for (int i = 0; i < fg->nupd; i++) f->upd_shared[i] = fg->upd_shared[i]->shared;
    if ((rc = make_lockset(f, ctx))) goto done;

    /* Schedule and last uses. */
    for (int i = 0; i < f->nslots; i++) last_use[i] = -1;
    f->nsched = fg->nnodes;
    /* Every node's input slots in one array (and below, its slots to free
     * in another): two allocations for the function, not two per node. */
    size_t total_in = 1;
    for (int k = 0; k < fg->nnodes; k++) total_in += (size_t)fg->nodes[k]->nin;
    if (!(f->sched_in = tg_malloc(total_in * sizeof *f->sched_in))) goto oom;
    int *in_next = f->sched_in;
    for (int k = 0; k < fg->nnodes; k++) {
        if (k + 8 < fg->nnodes) tg_prefetch_node_vars(fg->nodes[k + 8]);
        tg_node *n = fg->nodes[k];
        tg_vm_node *s = &f->sched[k];
        s->node = n;
        s->op = n->op;
        s->run = f->kernels ? f->kernels[k] : n->op->run;
        s->in_slots = in_next;
        in_next += n->nin;
        for (int j = 0; j < n->nin; j++) {
            s->in_slots[j] = slot_of[n->inputs[j]->index];
            last_use[s->in_slots[j]] = k;
        }
        s->out_slot = n->nout ? slot_of[n->outputs[0]->index] : 0;
        if (n->nin > f->max_nin) f->max_nin = n->nin;
        /* Outputs nobody reads are freed right after the node. */
        for (int j = 0; j < n->nout; j++)
            if (last_use[s->out_slot + j] < 0) last_use[s->out_slot + j] = k;
    }
    /* Outputs that no later node reads have last_use = their producer. */
    int *count = tg_calloc((size_t)fg->nnodes + 1, sizeof *count);
    if (!count) goto oom;
    size_t total_free = 1;
    for (int i = 0; i < f->nslots; i++)
        if (!pinned[i] && last_use[i] >= 0) {
            count[last_use[i]]++;
            total_free++;
        }
    if (!(f->sched_free = tg_malloc(total_free * sizeof *f->sched_free))) {
        tg_free(count);
        goto oom;
    }
    int *free_next = f->sched_free;
    for (int k = 0; k < fg->nnodes; k++) {
        if (!count[k]) continue;
        f->sched[k].free_slots = free_next;
        free_next += count[k];
    }
    tg_free(count);
    if (!f->no_gc)
        for (int i = 0; i < f->nslots; i++)
            if (!pinned[i] && last_use[i] >= 0) {
                tg_vm_node *s = &f->sched[last_use[i]];
                s->free_slots[s->nfree++] = i;
            }
    for (int i = 0; i < f->nctl; i++)
        if (f->ctl[i].kind == TG_CTL_BRANCH) f->ctl[i].cond_slot = slot_of[f->ctl[i].cond_slot];
    if (f->nctl && !f->no_gc) {
        /* made_at: the position of each slot's producer (-1: not a node's). */
        int *made_at = tg_malloc(sizeof *made_at * ((size_t)f->nslots + 1));
        if (!made_at) goto oom;
        for (int i = 0; i < f->nslots; i++) made_at[i] = -1;
        for (int k = 0; k < fg->nnodes; k++)
            for (int j = 0; j < fg->nodes[k]->nout; j++) made_at[f->sched[k].out_slot + j] = k;
        rc = ctl_free_lists(f, last_use, pinned, made_at, ctx);
        tg_free(made_at);
        if (rc) goto done;
    }
    f->scratch_in = tg_calloc((size_t)f->max_nin + 1, sizeof *f->scratch_in);
    if (!f->scratch_in) goto oom;
    rc = link_commits(f, ctx);
    goto done;
oom:
    rc = tg_errorf(ctx, TG_ENOMEM, "out of memory while linking");
done:
    tg_free(slot_of);
    tg_free(last_use);
    tg_free(pinned);
    return rc;
}

/* ops/composite.h (not included: its tg_kernel_fn is not backend.h's) */
int tg_composite_prefetch(tg_node *const *nodes, int n, int (*next)(void *ud, int k), void *ud, tg_ctx *ctx);

/* The positions of a stretch [lo, hi) of the schedule that run whenever
 * the stretch does, one after another: sure_next(w, i) is the first at
 * or after lo + i, relative to lo (hi - lo: none left), asked in
 * increasing i (i = 0 starts again). Not those of a lazy ifelse's then-
 * or else-block inside the stretch (vm.h): a nested ifelse is laid out
 * [then-block][else-block][ifelse], its branch point is the next control
 * point (from ctl[c0] on), and the skip before its else-block,
 * ctl[next - 1], has the ifelse's position as its target and the first
 * point after the else-block as its next; so each nested ifelse is
 * stepped over at once, however deep its blocks. Nor those that run on a
 * device (kernels of their own). */
typedef struct sure_walk {
    const tg_function *f;
    int lo, hi, c0, c;
} sure_walk;

static int sure_next(void *ud, int i) {
    sure_walk *w = ud;
    const tg_function *f = w->f;
    int k = w->lo + i;
    if (i == 0) w->c = w->c0;
    while (k < w->hi) {
        const tg_vm_ctl *b = f->ctl && w->c < f->nctl ? &f->ctl[w->c] : NULL;
        if (b && b->at <= k && b->at < w->hi) {
            const tg_vm_ctl *skip = &f->ctl[b->next - 1];
            if (k < skip->target) k = skip->target;
            w->c = skip->next;
        } else if (f->on_device && tg_function_node_on_device(f, k)) {
            k++;
        } else {
            return k - w->lo;
        }
    }
    return w->hi - w->lo;
}

/* The kernels of the composites that positions [lo, hi) are sure to run
 * when they run (nested control points from ctl[c0] on), compiled
 * together when two or more are missing. */
static int prefetch_range(tg_function *f, int lo, int hi, int c0, tg_ctx *ctx) {
    sure_walk w = {f, lo, hi, c0, c0};
    return hi > lo ? tg_composite_prefetch(f->fg->nodes + lo, hi - lo, sure_next, &w, ctx) : TG_OK;
}

/* At f's first call (or first run of a scan's body): the kernels of the
 * composites it is sure to run that are not in the cache yet, compiled
 * together rather than one after another at their nodes' first runs.
 * Not those of a lazy branch, which may never run: a block's are
 * compiled together in the same way when it first runs (run_controls),
 * if it ever does; a scan's or op_from_graph's body is a
 * function of its own, whose first run does the same for its nodes. Not
 * at link: compiling alone (tgc check, print, compile; tgviz; the
 * optimizer's benchmarks) runs no compiler. An allocation that fails
 * fails the call ("out of memory"), and the next call tries again. */
static int prefetch_kernels(tg_function *f, tg_ctx *ctx) {
    int rc = prefetch_range(f, 0, f->nsched, 0, ctx);
    if (rc == TG_OK) f->kernels_fetched = true;
    return rc;
}

/* Link f->fg with the kernels placement chose (f->kernels, NULL for the
 * CPU's own; freed here), each cuDNN node reading its algorithm policy
 * from the node. */
static int link_placed(tg_function *f, tg_dnn_policy algo, tg_ctx *ctx) {
    for (int k = 0; f->on_device && k < f->fg->nnodes; k++) f->fg->nodes[k]->dnn_algo = (int8_t)algo;
    int rc = link_function(f, ctx);
    tg_free(f->kernels);
    f->kernels = NULL;
    return rc;
}

tg_function *tg_function_compile(tg_graph *g, int index,
                                  const tg_compile_options *opts,
                                  tg_ctx *ctx) {
    if (!g || index < 0 || index >= g->nfuncs) {
        tg_errorf(ctx, TG_EINVAL, "no function number %d", index);
        return NULL;
    }
    const char *preset = opts && opts->preset ? opts->preset : "fast_run";
    if (strcmp(preset, "none") && strcmp(preset, "fast_compile") &&
        strcmp(preset, "fast_run")) {
        tg_errorf(ctx, TG_EINVAL,
                  "unknown preset '%s' (expected none, fast_compile or "
                  "fast_run)",
                  preset);
        return NULL;
    }
    tg_dnn_policy algo;
    if (tg_dnn_policy_parse(opts ? opts->dnn_conv_algo : NULL, &algo, ctx)) return NULL;
    uint64_t t0 = tg_now_ns();
    tg_function *f = tg_calloc(1, sizeof *f);
    if (!f) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    f->no_gc = opts && opts->no_gc;
    tg_bufpool_init(&f->pool);
    f->name = tg_strdup(g->funcs[index].name);
    if (!f->name) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    f->fg = tg_fgraph_from_decl(g, &g->funcs[index], ctx);
    if (!f->fg) goto fail;
    /* What the gradients' nodes stand for, before rewrites replace them
     * (a sweep over the nodes only when the file had a grad to expand). */
    if (g->has_grads && tg_opt_record_grads_from(&f->record, f->fg)) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    f->out_ids = tg_calloc((size_t)f->fg->nout + 1, sizeof *f->out_ids);
    if (!f->out_ids) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < f->fg->nout; i++)
        if (!(f->out_ids[i] = tg_strdup(f->fg->outputs[i]->id))) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
    const char *device = opts && opts->device ? opts->device : getenv("TG_DEVICE");
    /* The same optimizer for every device: on the GPU a composite runs as
     * its body compiled by NVRTC (backend/cuda/nvrtc.c), and stays on the
     * CPU, with transfers, only when its body cannot be compiled there.
     * `exclude: ["fusion"]` (tgc --exclude fusion) leaves the elementwise
     * nodes unfused, each on the GPU's own kernel. */
    if (tg_optimize(f->fg, opts, &f->record, g->ids, ctx)) goto fail;
    /* The blocks of the nodes the rewrites replaced are not kept for
     * the function's life. */
    if (tg_fgraph_compact(f->fg, false, ctx)) goto fail;
    /* Placement (rewrite/place.c) runs last, on the optimized graph. */
    if (tg_place(f->fg, device, &f->record, &f->kernels, ctx)) goto fail;
    f->on_device = f->kernels != NULL;
    if (link_placed(f, algo, ctx)) goto fail;
    f->compile_seconds = (double)(tg_now_ns() - t0) * 1e-9;
    return f;
fail:
    tg_function_free(f);
    return NULL;
}

/* Restoring a compiled-function file links the saved optimized graph
 * directly: the same linking as compile, without the optimizer. */
tg_function *tg_function_link_fgraph(const char *name, tg_fgraph *fg, bool no_gc, const bool *on_dev,
                                     char *why, size_t why_size, tg_ctx *ctx) {
    uint64_t t0 = tg_now_ns();
    if (why && why_size) *why = 0;
    tg_function *f = tg_calloc(1, sizeof *f);
    if (!f || !(f->name = tg_strdup(name))) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        if (f) tg_free(f);
        tg_fgraph_free(fg);
        return NULL;
    }
    f->no_gc = no_gc;
    f->fg = fg;
    tg_bufpool_init(&f->pool);
    f->out_ids = tg_calloc((size_t)fg->nout + 1, sizeof *f->out_ids);
    if (!f->out_ids) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        tg_function_free(f);
        return NULL;
    }
    for (int i = 0; i < fg->nout; i++)
        if (!(f->out_ids[i] = tg_strdup(fg->outputs[i]->id))) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            tg_function_free(f);
            return NULL;
        }
    tg_dnn_policy algo = 0;
    if (on_dev) {
        char w[256];
        bool told = why && why_size;
        if (tg_place_relink(fg, on_dev, &f->kernels, told ? why : w, told ? why_size : sizeof w, ctx)) {
            tg_function_free(f);
            return NULL;
        }
        f->on_device = f->kernels != NULL;
        /* The cuDNN nodes' algorithm policy: the environment's
         * (TG_DNN_CONV_ALGO), else the default. */
        if (f->on_device && tg_dnn_policy_parse(NULL, &algo, ctx)) {
            tg_function_free(f);
            return NULL;
        }
    }
    if (link_placed(f, algo, ctx)) {
        tg_function_free(f);
        return NULL;
    }
    f->compile_seconds = (double)(tg_now_ns() - t0) * 1e-9;
    return f;
}

bool tg_function_node_on_device(const tg_function *f, int k) {
    return f->on_device && f->sched[k].run != f->sched[k].op->run;
}

void tg_function_free(tg_function *f) {
    if (!f) return;
    if (f->slots)
        for (int i = 0; i < f->nslots; i++) tg_array_free(f->slots[i]);
    tg_free(f->sched_in); /* every node's in_slots */
    tg_free(f->sched_free); /* and free_slots */
    tg_free(f->sched);
    if (f->ctl)
        for (int i = 0; i < f->nctl; i++) tg_free(f->ctl[i].free_slots);
    tg_free(f->ctl);
    tg_free(f->slots);
    tg_free(f->slot_var);
    tg_free(f->in_slots);
    tg_free(f->out_slots);
    tg_free(f->shared_slots);
    tg_free(f->shared);
    tg_free(f->shared_dev);
    tg_free(f->upd_shared);
    tg_free(f->lockset);
    tg_free(f->lend);
    tg_free(f->lent);
    tg_free(f->commit_shared);
    tg_free(f->commit_upd);
    tg_free(f->commit_ready);
    tg_free(f->upd_commits);
    tg_free(f->scratch_in);
    tg_free(f->kernels);
    tg_free(f->name);
    tg_opt_record_free(&f->record);
    if (f->out_ids)
        for (int i = 0; i < f->fg->nout; i++) tg_free(f->out_ids[i]);
    tg_free(f->out_ids);
    tg_free(f->strpool);
    tg_bufpool_free(&f->pool);
    tg_fgraph_free(f->fg);
    tg_free(f);
}

/* ---- accessors ---- */

const char *tg_function_name(const tg_function *f) { return f->name; }
int tg_function_input_count(const tg_function *f) { return f->fg->nin; }
int tg_function_output_count(const tg_function *f) { return f->fg->nout; }
const char *tg_function_input_id(const tg_function *f, int i) {
    return i >= 0 && i < f->fg->nin ? f->fg->inputs[i]->id : NULL;
}
const char *tg_function_output_id(const tg_function *f, int i) {
    return i >= 0 && i < f->fg->nout ? f->out_ids[i] : NULL;
}
static bool input_in_range(const tg_function *f, int i) { return i >= 0 && i < f->fg->nin; }
tg_dtype tg_function_input_dtype(const tg_function *f, int i) {
    return input_in_range(f, i) ? f->fg->inputs[i]->type.dtype : TG_DTYPE_INVALID;
}
int tg_function_input_ndim(const tg_function *f, int i) {
    return input_in_range(f, i) ? f->fg->inputs[i]->type.ndim : -1;
}
const int64_t *tg_function_input_shape(const tg_function *f, int i) {
    return input_in_range(f, i) ? f->fg->inputs[i]->type.shape : NULL;
}
int tg_function_node_count(const tg_function *f) { return f->nsched; }
static void release_slots(tg_function *f, const int *list, int n);

/* The pool, and what the slots keep of the last call: its outputs'
 * buffers (the caller's alone where it still holds them) and the values
 * the updates replaced (kept to be written over by the next). */
void tg_function_trim(tg_function *f) {
    if (!f) return;
    for (int i = 0; i < f->fg->nout + f->fg->nupd; i++) {
        int slot = f->out_slots[i];
        if (f->slot_var[slot]->owner) release_slots(f, &slot, 1);
    }
    tg_bufpool_clear(&f->pool);
}
void tg_function_pool_stats(const tg_function *f, tg_pool_stats *out) {
    const tg_bufpool *p = &f->pool;
    *out = (tg_pool_stats){.buffers = p->n,
                           .bytes = (int64_t)p->bytes,
                           .budget = (int64_t)p->budget,
                           .reused = p->hits,
                           .allocated = p->misses};
}
static bool node_in_range(const tg_function *f, int node) { return node >= 0 && node < f->nsched; }
const char *tg_function_node_op(const tg_function *f, int node) {
    return node_in_range(f, node) ? f->sched[node].op->name : NULL;
}
const char *tg_function_node_label(const tg_function *f, int node) {
    if (!node_in_range(f, node)) return NULL;
    tg_node *n = f->sched[node].node;
    return n->name ? n->name : (n->nout ? n->outputs[0]->id : n->op->name);
}
const char *tg_function_node_key(const tg_function *f, int node) {
    if (!node_in_range(f, node)) return NULL;
    const tg_node *n = f->sched[node].node;
    return n->nout ? n->outputs[0]->id : n->op->name;
}

int tg_function_node_origins(const tg_function *f, int node,
                             const char *const **keys) {
    *keys = NULL;
    if (!node_in_range(f, node)) return 0;
    const tg_node *n = f->sched[node].node;
    if (n->origins || n->norigins) {
        *keys = (const char *const *)n->origins;
        return n->norigins;
    }
    /* An original node stands for itself: its key is its first output's
     * id, which lives as long as f. */
    *keys = n->nout ? (const char *const *)&n->outputs[0]->id : NULL;
    return n->nout ? 1 : 0;
}

bool tg_function_key_gradient(const tg_function *f, const char *key, tg_key_gradient *out) {
    const tg_grad_origin *g = f ? tg_opt_record_grad(&f->record, key) : NULL;
    if (!g) return false;
    *out = (tg_key_gradient){g->of, g->of_op, g->by, g->by_op};
    return true;
}

int tg_function_rewrite_count(const tg_function *f) { return f->record.n; }

int tg_function_rewrite_get(const tg_function *f, int i, tg_rewrite_info *info) {
    if (i < 0 || i >= f->record.n) return TG_EINVAL;
    const tg_rw_entry *e = &f->record.entries[i];
    info->name = e->name;
    info->pass = e->pass;
    info->nremoved = e->nremoved;
    info->removed = (const char *const *)e->removed;
    info->ncreated = e->ncreated;
    info->created = (const char *const *)e->created;
    return TG_OK;
}

int tg_function_pass_count(const tg_function *f) { return f->record.npasses; }
int tg_function_pass_get(const tg_function *f, int i, tg_pass_stats *st) {
    if (i < 0 || i >= f->record.npasses) return TG_EINVAL;
    *st = f->record.passes[i];
    return TG_OK;
}
int tg_function_rewrite_stats_count(const tg_function *f) { return f->record.nrstats; }
int tg_function_rewrite_stats_get(const tg_function *f, int i, tg_rewrite_stats *st) {
    if (i < 0 || i >= f->record.nrstats) return TG_EINVAL;
    *st = f->record.rstats[i];
    return TG_OK;
}
double tg_function_compile_seconds(const tg_function *f) { return f->compile_seconds; }
double tg_function_optimize_seconds(const tg_function *f) { return f->record.seconds; }

int tg_function_node_ninputs(const tg_function *f, int node) {
    return node_in_range(f, node) ? f->sched[node].node->nin : -1;
}
int tg_function_node_noutputs(const tg_function *f, int node) {
    return node_in_range(f, node) ? f->sched[node].node->nout : -1;
}

void tg_function_set_hooks(tg_function *f, const tg_hooks *hooks) {
    if (hooks)
        f->hooks = *hooks;
    else
        memset(&f->hooks, 0, sizeof f->hooks);
    f->hooked = f->hooks.before || f->hooks.after;
    f->hooks_device = false;
    f->commit_ok = NULL;
}

void tg_function_set_hooks_device(tg_function *f, const tg_hooks *hooks) {
    tg_function_set_hooks(f, hooks);
    f->hooks_device = hooks != NULL;
}

void tg_function_set_hooks_commit(tg_function *f, const tg_hooks *hooks,
                                  bool (*commit_ok)(void *ud, const tg_function *f, int node,
                                                    tg_array *const *inputs)) {
    tg_function_set_hooks(f, hooks);
    f->commit_ok = hooks ? commit_ok : NULL;
}

static bool vouch_all(void *ud, const tg_function *f, int node, tg_array *const *inputs) {
    (void)ud, (void)f, (void)node, (void)inputs;
    return true;
}

void tg_function_set_hooks_observer(tg_function *f, const tg_hooks *hooks) {
    tg_function_set_hooks_commit(f, hooks, vouch_all);
}

/* ---- shared variables ---- */

static tg_shared *find_shared(const tg_function *f, const char *id) {
    if (!id) return NULL;
    for (int i = 0; i < f->nshared; i++)
        if (strcmp(f->shared[i]->id, id) == 0) return f->shared[i];
    for (int i = 0; i < f->fg->nupd; i++)
        if (strcmp(f->upd_shared[i]->id, id) == 0) return f->upd_shared[i];
    return NULL;
}

const tg_array *tg_function_shared_get(const tg_function *f, const char *id) {
    tg_shared *s = f ? find_shared(f, id) : NULL;
    return s ? tg_shared_value(s, NULL) : NULL;
}

static void shape_str(const tg_array *a, char *buf, size_t size);

int tg_shared_value_take(const tg_type *t, const char *what, const tg_array *a, tg_array **out, tg_ctx *ctx) {
    *out = NULL;
    if (!a) return tg_errorf(ctx, TG_EINVAL, "%s: no array", what);
    char want[160], got[160];
    tg_type_str(t, want, sizeof want);
    shape_str(a, got, sizeof got);
    if (a->ndim != t->ndim) return tg_errorf(ctx, TG_ESHAPE, "%s is %s, got an array of shape %s", what, want, got);
    for (int d = 0; d < a->ndim; d++)
        if (t->shape[d] >= 0 && t->shape[d] != a->shape[d])
            return tg_errorf(ctx, TG_ESHAPE, "%s is %s, got an array of shape %s (dimension %d)", what, want, got,
                             d);
    if (a->dtype != t->dtype && !tg_dtype_can_cast_safe(a->dtype, t->dtype))
        return tg_errorf(ctx, TG_ETYPE, "%s is %s: a %s value cannot be cast to it safely", what, want,
                         tg_dtype_name(a->dtype));
    if (!(*out = tg_array_copy(a, t->dtype))) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return TG_OK;
}

int tg_function_shared_set(tg_function *f, const char *id,
                           const tg_array *value, tg_ctx *ctx) {
    if (!f || !id) return tg_errorf(ctx, TG_EINVAL, "tg_function_shared_set: no function or no id");
    tg_shared *s = find_shared(f, id);
    if (!s)
        return tg_errorf(ctx, TG_ENOTFOUND,
                         "function '%s' uses no shared variable '%s'", f->name,
                         id);
    char what[300];
    snprintf(what, sizeof what, "shared variable '%s'", id);
    tg_array *c;
    int rc = tg_shared_value_take(&s->type, what, value, &c, ctx);
    if (rc) return rc;
    tg_shared_value_set(s, c);
    return TG_OK;
}

/* ---- calling ---- */

static void shape_str(const tg_array *a, char *buf, size_t size) {
    size_t k = 0;
    int w = snprintf(buf, size, "(");
    k = (size_t)w;
    for (int i = 0; i < a->ndim && k < size; i++) {
        w = snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
                     (long long)a->shape[i]);
        k += (size_t)w;
    }
    if (k < size) snprintf(buf + k, size - k, a->ndim == 1 ? ",)" : ")");
}

/* A result that contradicts its static type is the kernel's or the file's
 * fault; either way the user needs the node. */
/* A run-time error in a node a gradient's expansion made, or in one that
 * stands for such nodes, says which derivative they belong to, since their
 * keys name no node of the file. */
/* An error in the op of a fused node of a composite names that node and
 * its trace, as the graph run unfused does, then the composite. */
static void error_wrap(const tg_function *f, tg_ctx *ctx, int k) {
    char note[512] = "";
    const tg_node *n = f->sched[k].node;
    const char *const *keys;
    int nk = tg_function_node_origins(f, k, &keys);
    const char *fdesc, *ftrace;
    bool fused = tg_composite_failed_node(n, &fdesc, &ftrace, &keys, &nk);
    if (f->record.ngrads) tg_opt_record_grad_note(&f->record, keys, nk, note, sizeof note);
    if (!fused) {
        tg_node_error_wrap_note(ctx, n, note);
        return;
    }
    char desc[1024], trace[TG_CTX_MSG_MAX], tail[TG_CTX_MSG_MAX];
    tg_node_error_parts(n, desc, sizeof desc, trace, sizeof trace);
    snprintf(tail, sizeof tail, "%s, fused into %s", ftrace, desc);
    tg_error_wrap_parts(ctx, fdesc, note, tail);
}

static int check_result(const tg_var *v, const tg_array *a, tg_ctx *ctx) {
    if (!a)
        return tg_errorf(ctx, TG_ERUNTIME, "output '%s' was not computed",
                         v->id);
    if (tg_type_accepts(&v->type, a)) return TG_OK;
    char want[160], got[160];
    tg_type_str(&v->type, want, sizeof want);
    shape_str(a, got, sizeof got);
    return tg_errorf(ctx, TG_ESHAPE,
                     "output '%s' is %s with shape %s, but its static type "
                     "is %s",
                     v->id, tg_dtype_name(a->dtype), got, want);
}

static int bind_inputs(tg_function *f, tg_array *const *inputs, tg_ctx *ctx) {
    for (int i = 0; i < f->fg->nin; i++) {
        const tg_var *v = f->fg->inputs[i];
        tg_array *a = inputs ? inputs[i] : NULL;
        int slot = f->in_slots[i];
        if (!a)
            return tg_errorf(ctx, TG_EMISSING,
                             "function '%s': no value given for input '%s'",
                             f->name, v->id);
        if (a->ndim != v->type.ndim) {
            char want[160], got[160];
            tg_type_str(&v->type, want, sizeof want);
            shape_str(a, got, sizeof got);
            return tg_errorf(ctx, TG_ESHAPE,
                             "input '%s' is %s, got an array of shape %s",
                             v->id, want, got);
        }
        for (int d = 0; d < a->ndim; d++)
            if (v->type.shape[d] >= 0 && v->type.shape[d] != a->shape[d]) {
                char want[160], got[160];
                tg_type_str(&v->type, want, sizeof want);
                shape_str(a, got, sizeof got);
                return tg_errorf(ctx, TG_ESHAPE,
                                 "input '%s' is %s, got an array of shape %s "
                                 "(dimension %d)",
                                 v->id, want, got, d);
            }
        tg_array *use;
        if (a->dtype == v->type.dtype) {
            use = tg_array_ref(a);
        } else if (tg_dtype_can_cast_safe(a->dtype, v->type.dtype)) {
            use = tg_array_copy(a, v->type.dtype);
            if (!use) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        } else {
            return tg_errorf(ctx, TG_ETYPE,
                             "input '%s' is %s: a %s value cannot be cast to "
                             "it safely",
                             v->id, tg_dtype_name(v->type.dtype),
                             tg_dtype_name(a->dtype));
        }
        tg_array_free(f->slots[slot]);
        f->slots[slot] = use;
    }
    return TG_OK;
}

/* Drop our references to the caller's inputs. */
static void unbind_inputs(tg_function *f) {
    for (int i = 0; i < f->fg->nin; i++) {
        tg_array_free(f->slots[f->in_slots[i]]);
        f->slots[f->in_slots[i]] = NULL;
    }
}

/* Small results stay for the next call; views go, so that they do not pin
 * their base's buffer (which would then be reallocated). */
static void release_slots(tg_function *f, const int *list, int n);
static void release_buffers(tg_function *f, const tg_vm_node *s) { release_slots(f, s->free_slots, s->nfree); }

/* Hooks read values. In a function placed on a device they get host
 * copies of the device arrays (slow, but a user's hooks need the values),
 * unless they were set with tg_function_set_hooks_device (the profiler,
 * the NaN guard): out NULL calls `before`, else `after`. */
static int call_hook_host(tg_function *f, int k, tg_array *const *in, int nin, tg_array *const *out, int nout,
                          tg_ctx *ctx) {
    const tg_backend *be = tg_backend_cuda();
    int n = nin + nout, rc = TG_OK;
    tg_array **h = tg_calloc((size_t)n + 1, sizeof *h);
    if (!h) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    for (int j = 0; j < n && !rc; j++) {
        tg_array *a = j < nin ? in[j] : out[j - nin];
        if (a && be && be->is_device(a))
            rc = be->to_host(a, &h[j], ctx);
        else
            h[j] = a ? tg_array_ref(a) : NULL;
    }
    if (!rc)
        rc = out ? f->hooks.after(f->hooks.ud, f, k, h, h + nin, ctx) : f->hooks.before(f->hooks.ud, f, k, h, ctx);
    for (int j = 0; j < n; j++) tg_array_free(h[j]);
    tg_free(h);
    return rc;
}

static void release_slots(tg_function *f, const int *list, int n) {
    for (int j = 0; j < n; j++) {
        tg_array *a = f->slots[list[j]];
        if (a && (a->buf->nbytes > TG_VM_KEEP_BYTES ||
                  atomic_load_explicit(&a->buf->refcount, memory_order_relaxed) > 1)) {
            tg_array_free(a);
            f->slots[list[j]] = NULL;
        }
    }
}

/* The control points at s (vm.h): returns where to go on (s itself when
 * no jump is taken) and moves *cp past what it acted on; NULL when a
 * condition was not computed. */
static const tg_vm_node *run_controls(tg_function *f, const tg_vm_ctl **cp, const tg_vm_node *s, tg_ctx *ctx) {
    const tg_vm_ctl *c = *cp;
    int k = (int)(s - f->sched);
    while (c->at == k) {
        bool jump = c->kind == TG_CTL_SKIP;
        if (!jump) {
            const tg_array *cond = f->slots[c->cond_slot];
            if (!cond) {
                tg_errorf(ctx, TG_ERUNTIME, "the condition '%s' of an ifelse was not computed",
                          f->slot_var[c->cond_slot]->id);
                return NULL;
            }
            jump = !tg_ifelse_truth(cond);
            /* A block entered for the first time: its kernels, together
             * (the then-block [at, target) is the branch's to mark, the
             * else-block [target, the skip's target) the skip's). */
            tg_vm_ctl *mark = jump ? f->ctl + c->next - 1 : f->ctl + (c - f->ctl); /* (c: const) */
            if (!mark->fetched) {
                int lo = jump ? c->target : c->at, hi = jump ? mark->target : c->target;
                if (prefetch_range(f, lo, hi, jump ? c->next : (int)(c - f->ctl) + 1, ctx)) return NULL;
                mark->fetched = true;
            }
        }
        if (jump) {
            if (c->nfree) release_slots(f, c->free_slots, c->nfree);
            k = c->target;
            c = f->ctl + c->next;
        } else {
            c++;
        }
    }
    *cp = c;
    return f->sched + k;
}

/* Node k of the schedule with the hooks around it, when there are some
 * (host copies for a user's hooks on a placed function), and its results
 * checked: the hooked dispatch loop's step, and the committers' (their
 * frees left to the caller). */
static int run_node(tg_function *f, int k, tg_ctx *ctx) {
    const tg_vm_node *s = &f->sched[k];
    tg_node *n = s->node;
    tg_array **in = f->scratch_in, **out = f->slots + s->out_slot;
    for (int j = 0; j < n->nin; j++) in[j] = f->slots[s->in_slots[j]];
    bool copies = f->on_device && !f->hooks_device;
    int rc;
    if (f->hooks.before && (rc = copies ? call_hook_host(f, k, in, n->nin, NULL, 0, ctx)
                                        : f->hooks.before(f->hooks.ud, f, k, in, ctx)) != 0)
        return rc;
    rc = s->run(n, in, out, ctx);
    for (int j = 0; j < n->nout && !rc; j++) rc = check_result(n->outputs[j], out[j], ctx);
    if (rc) {
        error_wrap(f, ctx, k);
        return rc;
    }
    if (f->hooks.after)
        rc = copies ? call_hook_host(f, k, in, n->nin, out, n->nout, ctx)
                    : f->hooks.after(f->hooks.ud, f, k, in, out, ctx);
    return rc;
}

/* The dispatch loop. Two copies: without hooks (the common case: nothing
 * but the kernel call and the frees; the lazy ifelse's control points are
 * handled between runs of nodes), and with them. */
static int run_schedule(tg_function *f, int stop, tg_ctx *ctx) {
    tg_array **slots = f->slots;
    tg_array **in = f->scratch_in;
    const tg_vm_node *s = f->sched, *end = f->sched + stop;
    const tg_vm_ctl *c = f->ctl;
    const tg_vm_node *ctl_at = f->sched + c->at;
    if (!f->hooked) {
        /* Runs of nodes between control points (the sentinel's is the
         * schedule's end; a call that overwrites shared values stops
         * before the committers, past every control point), so the inner
         * loop has no per-node test for them. */
        for (;;) {
            const tg_vm_node *lim = ctl_at < end ? ctl_at : end;
            for (; s < lim; s++) {
                tg_node *n = s->node;
                for (int j = 0; j < n->nin; j++) in[j] = slots[s->in_slots[j]];
                int rc = s->run(n, in, slots + s->out_slot, ctx);
                if (__builtin_expect(rc != 0, 0)) goto node_fail;
                for (int j = 0; j < n->nout; j++) {
                    const tg_array *o = slots[s->out_slot + j];
                    const tg_type *t = &n->outputs[j]->type;
                    if (__builtin_expect(!o || o->dtype != t->dtype || o->ndim != t->ndim, 0) ||
                        !tg_type_accepts(t, o)) {
                        rc = check_result(n->outputs[j], o, ctx);
                        if (rc) goto node_fail;
                    }
                }
                if (s->nfree) release_buffers(f, s);
                continue;
            node_fail:
                error_wrap(f, ctx, (int)(s - f->sched));
                return ctx ? ctx->status : TG_ERUNTIME;
            }
            if (s == end) return TG_OK;
            if (!(s = run_controls(f, &c, s, ctx))) return ctx ? ctx->status : TG_ERUNTIME;
            ctl_at = f->sched + c->at;
        }
    }
    for (; s < end; s++) {
        if (s == ctl_at) {
            if (!(s = run_controls(f, &c, s, ctx))) return ctx ? ctx->status : TG_ERUNTIME;
            ctl_at = f->sched + c->at;
        }
        int rc = run_node(f, (int)(s - f->sched), ctx);
        if (rc) return rc;
        if (s->nfree) release_buffers(f, s);
    }
    return TG_OK;
}

int tg_function_run_bound(tg_function *f, tg_ctx *ctx) {
    int rc;
    if (__builtin_expect(!f->kernels_fetched, 0) && (rc = prefetch_kernels(f, ctx))) return rc;
    return run_schedule(f, f->nsched, ctx);
}

/* Shared values into their slots: the host value, brought back first when
 * a device update made it stale, or, for a resident variable of a placed
 * function, the device copy (uploaded when there is none yet). */
static int bind_shared_placed(tg_function *f, tg_ctx *ctx) {
    for (int i = 0; i < f->nshared; i++) {
        int slot = f->shared_slots[i];
        tg_shared *sh = f->shared[i];
        tg_array *v = f->shared_dev && f->shared_dev[i] ? tg_shared_device(sh, ctx) : tg_shared_value(sh, ctx);
        if (!v && (sh->dev || (f->shared_dev && f->shared_dev[i])))
            return ctx && ctx->status ? ctx->status : TG_ERUNTIME;
        if (f->slots[slot] != v) {
            tg_array_free(f->slots[slot]);
            f->slots[slot] = v ? tg_array_ref(v) : NULL;
        }
    }
    return TG_OK;
}

/* *nlent counts the values lent (vm.h): those a committer overwrites,
 * when no hook watches the call and nothing but the shared state holds
 * them. Shared slots hold nothing between calls (unbind_shared). */
static int bind_shared(tg_function *f, int *nlent, tg_ctx *ctx) {
    if (__builtin_expect(f->on_device, 0)) return bind_shared_placed(f, ctx);
    for (int i = 0; i < f->nshared; i++) {
        int slot = f->shared_slots[i];
        tg_shared *sh = f->shared[i];
        tg_array *v = sh->value;
        /* NULL: stale, when a device copy is the value */
        if (__builtin_expect(!v, 0) && sh->dev && !(v = tg_shared_fetch(sh, ctx)))
            return ctx && ctx->status ? ctx->status : TG_ERUNTIME;
        if (f->lend && f->lend[i] >= 0) {
            if (v && (!f->hooked || f->commit_ok) && tg_array_is_exclusive(v)) {
                f->slots[slot] = v; /* the shared state's reference, lent */
                f->lent[i] = true;
                ++*nlent;
            } else {
                f->slots[slot] = v ? tg_array_ref(v) : NULL;
            }
            continue;
        }
        if (f->slots[slot] != v) {
            tg_array_free(f->slots[slot]);
            f->slots[slot] = v ? tg_array_ref(v) : NULL;
        }
    }
    return TG_OK;
}

/* A new value for a shared variable that no slot or other output still
 * holds: a copy on the value's own side. */
static tg_array *copy_value(tg_array *a, tg_ctx *ctx) {
    if (__builtin_expect(tg_array_on_device(a), 0)) {
        tg_array *c = NULL;
        if (tg_backend_cuda()->copy(a, &c, ctx)) {
            tg_array_free(c);
            return NULL;
        }
        return c;
    }
    tg_array *c = tg_array_copy(a, a->dtype);
    if (!c) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return c;
}

/* The lent values' references go back to the shared state; the slots
 * that could have been lent let go of what they hold. */
static void end_lend(tg_function *f) {
    for (int i = 0; f->lend && i < f->nshared; i++) {
        if (f->lend[i] < 0) continue;
        int slot = f->shared_slots[i];
        if (!f->lent[i]) tg_array_free(f->slots[slot]);
        f->slots[slot] = NULL;
        f->lent[i] = false;
    }
}

/* After a call, failed or not: the lent values go back (end_lend), and
 * the other shared slots let go of their values, so that a function that
 * only reads a variable does not keep the value an update of another
 * function replaces alive (a copy of the weights for each reader). */
static void unbind_shared(tg_function *f) {
    end_lend(f);
    for (int i = 0; i < f->nshared; i++) {
        if (f->lend && f->lend[i] >= 0) continue;
        int slot = f->shared_slots[i];
        tg_array_free(f->slots[slot]);
        f->slots[slot] = NULL;
    }
}

/* Whether update i's value is also a function output or another update. */
static bool update_used_again(const tg_function *f, int i) {
    const tg_fgraph *fg = f->fg;
    int slot = f->out_slots[fg->nout + i];
    for (int j = 0; j < fg->nout + fg->nupd; j++)
        if (j != fg->nout + i && f->out_slots[j] == slot) return true;
    return false;
}

/* The new value of update i into news[i]: its slot's array when nothing
 * else holds it (*move: the slot lets go of it once the call is done
 * with the slots), else a copy, so that shared state never aliases an
 * input or a buffer the next call overwrites. Checks its type first. */
static int take_update(tg_function *f, int i, tg_array **news, bool *move, tg_ctx *ctx) {
    tg_fgraph *fg = f->fg;
    int slot = f->out_slots[fg->nout + i];
    tg_array *a = f->slots[slot];
    tg_shared *sh = f->upd_shared[i];
    *move = false;
    if (!a || !tg_type_accepts(&sh->type, a)) {
        char want[160], got[160] = "nothing";
        tg_type_str(&sh->type, want, sizeof want);
        if (a) shape_str(a, got, sizeof got);
        return tg_errorf(ctx, TG_ESHAPE, "update of shared variable '%s' (%s) from '%s' has shape %s", sh->id,
                         want, fg->outputs[fg->nout + i]->id, got);
    }
    bool used_again = update_used_again(f, i);
    if (!used_again && tg_array_is_exclusive(a)) {
        news[i] = a;
        *move = true;
        return TG_OK;
    }
    news[i] = f->on_device ? copy_value(a, ctx) : tg_array_copy(a, a->dtype);
    if (!news[i])
        return f->on_device ? (ctx && ctx->status ? ctx->status : TG_ENOMEM)
                            : tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return TG_OK;
}

/* The committers (vm.h), after the rest of the schedule and the other
 * updates: first those that cannot work in place on a lent value (their
 * value is given back to the shared state, so that the kernel copies it)
 * and their updates, which may fail; then the others, in place, which
 * cannot (op->commit_ready). The slots whose last reader they were are
 * freed once all have run. */
static int run_commits(tg_function *f, tg_array **news, bool *move, tg_ctx *ctx) {
    tg_fgraph *fg = f->fg;
    tg_array **in = f->scratch_in;
    const int c = f->commit_at;
    for (int p = c; p < f->nsched; p++) {
        const tg_vm_node *s = &f->sched[p];
        int j = f->commit_shared[p - c];
        bool ready = f->lent[j];
        if (ready) {
            for (int q = 0; q < s->node->nin; q++) in[q] = f->slots[s->in_slots[q]];
            /* (lent under hooks only when they have a commit_ok) */
            ready = s->op->commit_ready(s->node, in) && (!f->commit_ok || f->commit_ok(f->hooks.ud, f, p, in));
        }
        if (!ready && f->lent[j]) {
            tg_array_ref(f->slots[f->shared_slots[j]]); /* the slot's own, now */
            f->lent[j] = false;
        }
        f->commit_ready[p - c] = ready;
    }
    int rc = TG_OK;
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (int p = c; p < f->nsched && !rc; p++) {
            if (f->commit_ready[p - c] != (pass == 1)) continue;
            int u = f->commit_upd[p - c];
            if ((rc = run_node(f, p, ctx))) break;
            tg_array *a = f->slots[f->out_slots[fg->nout + u]];
            if (pass == 1 && a == f->shared[f->commit_shared[p - c]]->value) {
                /* written in place: the shared state's array itself */
                bool used_again = update_used_again(f, u);
                news[u] = used_again ? tg_array_ref(a) : a;
                move[u] = !used_again;
            } else {
                rc = take_update(f, u, news, &move[u], ctx);
            }
        }
    for (int p = c; p < f->nsched; p++)
        if (f->sched[p].nfree) release_buffers(f, &f->sched[p]);
    return rc;
}

static int call(tg_function *f, tg_array *const *inputs, tg_array **outputs, tg_ctx *ctx);

/* Where a's memory is: its buffer, or the buffer its window lies in. */
static const tg_buffer *memory_of(const tg_array *a) {
    const tg_window *w = tg_buffer_window(a->buf);
    return w ? w->base : a->buf;
}

/* Whether a's memory is an input's or a shared value's (the caller's or
 * the shared state's), not the call's own. */
static bool memory_borrowed(const tg_function *f, const tg_array *a) {
    const tg_buffer *b = memory_of(a);
    for (int i = 0; i < f->fg->nin; i++) {
        const tg_array *x = f->slots[f->in_slots[i]];
        if (x && memory_of(x) == b) return true;
    }
    for (int i = 0; i < f->nshared; i++) {
        const tg_array *x = f->slots[f->shared_slots[i]];
        if (x && memory_of(x) == b) return true;
    }
    return false;
}

/* An output that views a small part of a buffer the call made (a row of
 * a product, the last step of a scan's stacked results) is handed over
 * as a copy of its own, as is one that fills less than half of it: the
 * view would keep the whole buffer alive for as long as the caller
 * holds the result. */
static int compact_outputs(tg_function *f, tg_ctx *ctx) {
    for (int i = 0; i < f->fg->nout; i++) {
        int slot = f->out_slots[i];
        tg_array *a = f->slots[slot];
        if (!a || !f->slot_var[slot]->owner || tg_array_on_device(a)) continue;
        size_t have = memory_of(a)->nbytes, need = (size_t)tg_array_size(a) * tg_isize(a->dtype);
        if (have <= TG_VM_KEEP_BYTES || have / 2 <= need || memory_borrowed(f, a)) continue;
        tg_array *c = tg_array_copy(a, a->dtype);
        if (!c) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        tg_array_free(a);
        f->slots[slot] = c;
    }
    return TG_OK;
}

/* At a call's start, the references to the last call's outputs go: those
 * the caller still holds are the caller's alone, and those it let go of
 * go to the pool, from which this call's outputs take them again. Small
 * ones stay in their slots, as small intermediates do. Pooled as the
 * last call's: freed at this call's end unless it takes them (a call
 * with another batch size does not keep the old size). */
static void release_outputs(tg_function *f) {
    tg_bufpool *p = &f->pool;
    int n0 = p->n;
    for (int i = 0; i < f->fg->nout; i++) {
        int slot = f->out_slots[i];
        if (f->slot_var[slot]->owner) release_slots(f, &slot, 1);
    }
    for (int i = n0; i < p->n; i++) p->when[i] = p->call - 1;
}

/* After a call has handed its outputs over: an output slot keeps its
 * array for the next call only when the memory is the call's own, not a
 * view of an input or a shared value, which would keep alive what the
 * caller or an update let go of (a buffer of 4 KiB or less stays, as
 * small results do). */
static void release_borrowed_outputs(tg_function *f) {
    for (int i = 0; i < f->fg->nout; i++) {
        int slot = f->out_slots[i];
        tg_array *a = f->slots[slot];
        if (a && a->buf->nbytes > TG_VM_KEEP_BYTES && f->slot_var[slot]->owner &&
            (a->buf->release || memory_borrowed(f, a))) {
            tg_array_free(a);
            f->slots[slot] = NULL;
        }
    }
}

/* After a failed call: what the schedule made goes, as a call that
 * succeeds frees it (into the pool, which tg_function_trim empties). */
static void release_made(tg_function *f) {
    for (int i = 0; i < f->nslots; i++)
        if (f->slots[i] && f->slot_var[i]->owner) release_slots(f, &i, 1);
}

/* Let go of the first n variables of f's lockset. */
static void unclaim_shared(tg_function *f, int n) {
    for (int i = 0; i < n; i++) {
        if (i < f->nlock_write) atomic_store_explicit(&f->lockset[i]->users, 0, memory_order_release);
        else atomic_fetch_sub_explicit(&f->lockset[i]->users, 1, memory_order_release);
    }
}

/* Claim f's shared variables for a call: those it updates for it alone,
 * those it reads beside other readers. A call that updates a variable
 * swaps its value, or writes over it in place, while a reader would be
 * taking it: the other call's reader got values torn between two steps
 * or an array already freed (a `predict` copy in one thread beside a
 * `train` copy in another). The claim is refused, not waited for, as a
 * second call of one function is: a hook of the updating call that calls
 * a reader would otherwise wait for itself. */
static int claim_shared(tg_function *f, tg_ctx *ctx) {
    for (int i = 0; i < f->nlock; i++) {
        tg_shared *sh = f->lockset[i];
        long u;
        if (i < f->nlock_write) {
            u = 0;
            if (atomic_compare_exchange_strong_explicit(&sh->users, &u, -1, memory_order_acquire,
                                                        memory_order_relaxed))
                continue;
        } else {
            u = atomic_load_explicit(&sh->users, memory_order_relaxed);
            while (u >= 0 && !atomic_compare_exchange_weak_explicit(&sh->users, &u, u + 1, memory_order_acquire,
                                                                     memory_order_relaxed)) {
            }
            if (u >= 0) continue;
        }
        unclaim_shared(f, i);
        return tg_errorf(ctx, TG_EBUSY,
                         "function '%s' %s shared variable '%s', which a running call of another function "
                         "%s (in another thread, or a call this one's hook is inside): a call that updates a "
                         "shared variable runs while no other call reads or updates it; wait for that call, or "
                         "give each thread copies with values of their own (tg_function_copy's swap)",
                         f->name, i < f->nlock_write ? "updates" : "reads", sh->id,
                         u < 0 ? "is updating" : "is reading");
    }
    return TG_OK;
}

/* One call at a time: the slots, the scratch arrays and the binding of
 * shared values belong to the function, so a second call while one runs
 * (another thread, or a hook of this call calling it again) would run on
 * the first one's buffers. It is refused instead; so is a call whose
 * shared variables another call is updating, or that would update one
 * another call is using (claim_shared). */
int tg_function_call(tg_function *f, tg_array *const *inputs,
                     tg_array **outputs, tg_ctx *ctx) {
    if (atomic_exchange_explicit(&f->busy, true, memory_order_acquire))
        return tg_errorf(ctx, TG_EBUSY,
                         "function '%s' is already running a call (in another thread, or a hook of that call "
                         "called it again): a function runs one call at a time; give each thread its own "
                         "(tg_function_copy)",
                         f->name);
    int rc = claim_shared(f, ctx);
    if (rc) {
        atomic_store_explicit(&f->busy, false, memory_order_release);
        return rc;
    }
    tg_bufpool *prev = tg_bufpool_enter(&f->pool);
    rc = call(f, inputs, outputs, ctx);
    tg_bufpool_leave(&f->pool, prev);
    unclaim_shared(f, f->nlock);
    atomic_store_explicit(&f->busy, false, memory_order_release);
    return rc;
}

static int call(tg_function *f, tg_array *const *inputs, tg_array **outputs, tg_ctx *ctx) {
    int rc, nlent = 0;
    tg_fgraph *fg = f->fg;
    release_outputs(f);
    if ((rc = bind_shared(f, &nlent, ctx)) || (rc = bind_inputs(f, inputs, ctx)) ||
        (__builtin_expect(!f->kernels_fetched, 0) && (rc = prefetch_kernels(f, ctx))) ||
        (rc = run_schedule(f, nlent ? f->commit_at : f->nsched, ctx)) || (rc = compact_outputs(f, ctx))) {
        unbind_shared(f);
        unbind_inputs(f);
        release_made(f);
        return rc;
    }

    /* Updates, all together: take the new values first (take_update),
     * then assign. With values lent, the committers run in between
     * (run_commits), the updates they make taken there. */
    tg_array *small[16], **news = small;
    bool small_move[16], *move = small_move;
    if (fg->nupd > 16) {
        news = tg_calloc((size_t)fg->nupd, sizeof *news);
        move = tg_calloc((size_t)fg->nupd, sizeof *move);
        if (!news || !move) {
            tg_free(news);
            tg_free(move);
            unbind_shared(f);
            unbind_inputs(f);
            release_made(f);
            return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        }
    }
    for (int i = 0; i < fg->nupd; i++) news[i] = NULL;
    for (int i = 0; i < fg->nupd && !rc; i++)
        if (!nlent || !f->upd_commits[i]) rc = take_update(f, i, news, &move[i], ctx);
    if (!rc && nlent) rc = run_commits(f, news, move, ctx);
    if (rc) {
        for (int i = 0; i < fg->nupd; i++)
            if (news[i] && !move[i]) tg_array_free(news[i]);
        if (news != small) {
            tg_free(news);
            tg_free(move);
        }
        unbind_shared(f);
        unbind_inputs(f);
        release_made(f);
        return rc;
    }
    for (int i = 0; i < fg->nupd; i++)
        if (move[i]) f->slots[f->out_slots[fg->nout + i]] = NULL;
    for (int i = 0; i < fg->nout; i++) {
        tg_array *a = f->slots[f->out_slots[i]];
        outputs[i] = a ? tg_array_ref(a) : NULL;
    }
    release_borrowed_outputs(f);
    unbind_shared(f);
    const bool placed = f->on_device;
    for (int i = 0; i < fg->nupd; i++) {
        tg_shared *sh = f->upd_shared[i];
        tg_array *old;
        sh->version++;
        if (__builtin_expect(placed, 0) && tg_array_on_device(news[i])) {
            /* Made on the device: the new device copy; the host copy is
             * stale until someone on the host asks for it. */
            old = sh->dev;
            sh->dev = news[i];
            if (sh->value) {
                tg_array_free(sh->spare);
                sh->spare = sh->value;
                sh->value = NULL;
            }
        } else {
            old = sh->value;
            sh->value = news[i];
            if (__builtin_expect(sh->dev != NULL, 0)) {
                /* the device copy is out of date: dropped */
                tg_array_free(sh->dev);
                sh->dev = NULL;
                if (!old) old = sh->spare;
                else
                    tg_array_free(sh->spare);
                sh->spare = NULL;
            }
        }
        /* Double buffering: the value the update replaced becomes the
         * array the producer of the update writes into on the next call
         * (tg_array_prepare reuses it once nothing else holds it), so a
         * training step does not allocate its weights anew every call.
         * Only when nothing else holds it now: one that the caller (an
         * output, a view) holds would not be reused, only kept alive. */
        int slot = f->out_slots[fg->nout + i];
        if (old && old != news[i] && !f->slots[slot] && f->slot_var[slot]->owner &&
            old->dtype == news[i]->dtype && old->buf->nbytes > TG_VM_KEEP_BYTES && tg_array_is_exclusive(old))
            f->slots[slot] = old;
        else
            tg_array_free(old); /* (written in place: the second reference) */
    }
    if (news != small) {
        tg_free(news);
        tg_free(move);
    }
    unbind_inputs(f);
    f->ncalls++;
    return TG_OK;
}
