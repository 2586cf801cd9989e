/* The rewrite engine: presets and tags, the worklist that applies local
 * rewrites, the record of what was applied, and the final clean-up.
 *
 * Theano's optimizer re-ran whole passes until nothing changed, which made
 * compilation super-linear in the graph size. Here a local pass visits
 * every node once, and afterwards only the nodes that a rewrite built or
 * whose inputs it replaced; global passes (merge, in-place) are one linear
 * walk each.
 */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "io/io.h"
#include "ops/control.h"
#include "ops/scan.h"
#include "rewrite/engine.h"

/* RW_NEW: built by the current rewrite and not yet in the record (a
 * candidate it drops dies unrecorded); RW_SEEN: scratch while an entry's
 * removed list is made. */
enum { RW_DEAD = TG_NODE_DEAD, RW_QUEUED = 2, RW_NEW = 4, RW_SEEN = 8 };

/* The passes, in the order fast_run runs them. A local pass applies its
 * rules from a worklist; a global one is one function. */
typedef struct pass_def {
    const char *name;
    int (*global)(tg_rw *rw);
    bool fast_compile; /* in fast_compile too */
    bool opt_in;       /* runs only when its rules are included by tag */
} pass_def;

static const pass_def passes[] = {
    /* Inlining op_from_graph bodies (Theano inlines when asked): first, so
     * that the other passes see the inlined nodes. */
    {"inline", NULL, false, true},
    {"merge", tg_rw_merge, true, false},
    {"scan", NULL, false, false},
    {"canonicalize", NULL, true, false},
    {"stabilize", NULL, false, false},
    {"specialize", NULL, false, false},
    {"merge", tg_rw_merge, true, false},
    {"fusion", tg_rw_fusion, false, false},
    {"inplace", tg_rw_inplace, false, false},
};
enum { NPASSES = (int)(sizeof passes / sizeof passes[0]) };

/* Group tags that name several rules, beyond pass and rule names. */
static const char *const group_tags[] = {"constant_folding", "gemm", "fusion", "fill",
                                         "inplace", "merge", "fuse_multi_output", "fuse_recompute", NULL};

struct tg_rw {
    tg_fgraph *fg;
    tg_ctx *ctx;
    tg_opt_record *rec;
    const struct tg_idmap *taken; /* the graph's ids */
    struct tg_idmap *ids;         /* ids made here (or all, without taken) */
    int serial;
    const char *pass;
    const tg_rw_rule *rule;
    tg_node *cur; /* the node the current rewrite fired on */
    bool multi_output; /* fusion may give a composite extra outputs */
    bool recompute;    /* and recompute a cheap producer in a group */
    /* The current application. */
    tg_node **matched;
    int nmatched, cmatched;
    tg_node **created;
    int ncreated, ccreated;
    tg_var **replaced; /* new variables swapped in */
    int nreplaced, creplaced;
    /* (built, replaced) pairs from tg_rw_stands_for: built nodes that
     * stand for those replaced nodes only. */
    tg_node **stands;
    int nstands, cstands;
    /* Nodes of the record's graph (the file's, or ones an entry created)
     * that tg_rw_prune marked dead since the last entry: the next entry
     * lists them as removed, so that replaying the record over the
     * unoptimized nodes ends at the optimized ones. prune_oom: one could
     * not be kept here. */
    tg_node **pruned;
    int npruned, cpruned;
    bool prune_oom;
    /* The worklist of a local pass: first the nodes of fg->nodes[icur ..
     * ninit), the graph as the pass found it, in order; then a FIFO ring
     * over growing storage. The first part is a cursor, not entries: a
     * node there counts as queued without being marked, so that the pass
     * touches each node once, when it looks at it, instead of marking all
     * of them first (on 100,000 nodes the marking sweep had left the
     * first ones cold again by the time the pass reached them). Entries
     * pushed to the front while the cursor lasts (nfront of them) come
     * before it. */
    int icur, ninit;
    size_t nfront;
    tg_node **work;
    size_t whead, wtail, wcap;
    /* Per-rule statistics, parallel to tg_rw_rules. */
    tg_rewrite_stats *rstats;
    int applied; /* in the current pass */
    /* Nodes marked dead still in fg->nodes (the sorts drop them): the
     * live count is fg->nnodes - ndead, without a walk over the graph
     * (two per pass were a sixth of fast_run on 100,000 nodes, cold
     * memory every time). */
    int ndead;
    /* Nodes given an origin set (a union, or a leaf copy) since the last
     * sort; some may have died since, or been listed twice. */
    tg_node **lazy;
    int nlazy, clazy;
    /* fg->nnodes when fg->nodes was last known to be in topological order
     * (after a sort; the graph the optimizer is given is): a count that
     * differs means rewrites made nodes since, which other nodes read. */
    int sorted_nnodes;
};

static const tg_rw_rule *test_rule;
void tg_rw_test_rule_set(const tg_rw_rule *r) { test_rule = r; }

/* ---- small helpers ---- */

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return TG_OK;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = tg_realloc(*p, elem * (size_t)c);
    if (!q) return TG_ENOMEM;
    *p = q;
    *cap = c;
    return TG_OK;
}

static int oom(tg_rw *rw) { return tg_errorf(rw->ctx, TG_ENOMEM, "out of memory while optimizing"); }

tg_fgraph *tg_rw_fgraph(tg_rw *rw) { return rw->fg; }
tg_ctx *tg_rw_ctx(tg_rw *rw) { return rw->ctx; }
bool tg_rw_multi_output(const tg_rw *rw) { return rw->multi_output; }
bool tg_rw_recompute(const tg_rw *rw) { return rw->recompute; }
const char *tg_rw_pass(const tg_rw *rw) { return rw->pass; }

static int settle_origins(tg_rw *rw);

int tg_rw_toposort(tg_rw *rw) {
    int rc = settle_origins(rw);
    if (!rc) rc = tg_fgraph_toposort(rw->fg, rw->ctx);
    if (!rc) rw->ndead = 0; /* dead nodes are unreachable: all dropped */
    if (!rc) rw->sorted_nnodes = rw->fg->nnodes;
    return rc;
}

static const char *node_key(const tg_node *n) { return n->nout ? n->outputs[0]->id : n->op->name; }

/* ---- the worklist ---- */

static int work_room(tg_rw *rw) {
    if (rw->wtail - rw->whead == rw->wcap) {
        size_t c = rw->wcap ? rw->wcap * 2 : 256;
        tg_node **w = tg_calloc(c, sizeof *w);
        if (!w) return oom(rw);
        for (size_t i = rw->whead; i < rw->wtail; i++) w[i - rw->whead] = rw->work[i & (rw->wcap - 1)];
        rw->wtail -= rw->whead;
        rw->whead = 0;
        tg_free(rw->work);
        rw->work = w;
        rw->wcap = c;
    }
    return TG_OK;
}

/* n is among the nodes the cursor has yet to reach. */
static inline bool work_pending(const tg_rw *rw, const tg_node *n) {
    return n->index >= rw->icur && n->index < rw->ninit && rw->fg->nodes[n->index] == n;
}

static int work_push(tg_rw *rw, tg_node *n) {
    if (n->rwflags & (RW_QUEUED | RW_DEAD) || work_pending(rw, n)) return TG_OK;
    if (work_room(rw)) return TG_ENOMEM;
    rw->work[rw->wtail++ & (rw->wcap - 1)] = n;
    n->rwflags |= RW_QUEUED;
    return TG_OK;
}

/* Next in line: what a rewrite just built is looked at while it is still
 * in the cache, not after the rest of the graph (on a graph of 100,000
 * nodes, a miss for every node it touches). */
static int work_push_front(tg_rw *rw, tg_node *n) {
    if (n->rwflags & (RW_QUEUED | RW_DEAD) || work_pending(rw, n)) return TG_OK;
    if (work_room(rw)) return TG_ENOMEM;
    if (rw->whead == 0) { /* positions are taken modulo wcap, a power of two */
        rw->whead += rw->wcap;
        rw->wtail += rw->wcap;
    }
    rw->work[--rw->whead & (rw->wcap - 1)] = n;
    n->rwflags |= RW_QUEUED;
    if (rw->icur < rw->ninit) rw->nfront++;
    return TG_OK;
}

int tg_rw_requeue(tg_rw *rw, tg_node *n) { return work_push_front(rw, n); }

/* On graphs of 100,000 nodes a pass waits on memory, not on its rules:
 * each node's header and its variables are cold. The queue says which
 * nodes come next, so fetch ahead in two steps: the header (and the input
 * array before it) of the node 16 places on, and the input and output
 * variables of the one 8 places on, whose header the first step brought
 * in. always_inline, as graph.h says (these never ran until that was
 * seen). */
static inline __attribute__((always_inline)) void work_prefetch(const tg_rw *rw) {
    enum { FAR = 16, NEAR = 8 };
    if (!rw->nfront && rw->icur < rw->ninit) {
        tg_node *const *a = rw->fg->nodes;
        if (rw->icur + FAR < rw->ninit) tg_prefetch_node(a[rw->icur + FAR]);
        if (rw->icur + NEAR < rw->ninit) tg_prefetch_node_vars(a[rw->icur + NEAR]);
        return;
    }
    if (rw->whead + FAR < rw->wtail) tg_prefetch_node(rw->work[(rw->whead + FAR) & (rw->wcap - 1)]);
    if (rw->whead + NEAR < rw->wtail) tg_prefetch_node_vars(rw->work[(rw->whead + NEAR) & (rw->wcap - 1)]);
}

static tg_node *work_pop(tg_rw *rw) {
    work_prefetch(rw);
    if (!rw->nfront && rw->icur < rw->ninit) return rw->fg->nodes[rw->icur++];
    if (rw->whead == rw->wtail) return NULL;
    if (rw->nfront) rw->nfront--;
    tg_node *n = rw->work[rw->whead++ & (rw->wcap - 1)];
    n->rwflags &= (uint8_t)~RW_QUEUED;
    return n;
}

/* ---- pruning ---- */

static bool unused(const tg_node *n) {
    for (int k = 0; k < n->nout; k++)
        if (n->outputs[k]->nclients) return false;
    return true;
}

/* A node just marked dead: for the next record entry, unless the current
 * rewrite built it and dropped it (never in the record). */
static void prune_note(tg_rw *rw, tg_node *n) {
    if (n->rwflags & RW_NEW) return;
    if (grow((void **)&rw->pruned, &rw->cpruned, rw->npruned + 1, sizeof *rw->pruned))
        rw->prune_oom = true;
    else
        rw->pruned[rw->npruned++] = n;
}

/* Side-effect nodes (print, assert) stay while their outputs are used;
 * an unused node of any kind goes, as the function never computes it. */
void tg_rw_prune(tg_rw *rw, tg_node *n) {
    /* An explicit stack: chains of dead producers can be long. */
    tg_node *small[64], **stack = small;
    int sp = 0, cap = 64;
    if (n->rwflags & RW_DEAD || !unused(n)) return;
    stack[sp++] = n;
    n->rwflags |= RW_DEAD;
    rw->ndead++;
    prune_note(rw, n);
    while (sp) {
        tg_node *d = stack[--sp];
        for (int k = 0; k < d->nin; k++) {
            tg_var *in = d->inputs[k];
            tg_fgraph_remove_client(in, d, k);
            tg_node *p = in->owner;
            if (p && !(p->rwflags & RW_DEAD) && unused(p)) {
                if (sp == cap) {
                    tg_node **s2 = tg_malloc(sizeof *s2 * (size_t)cap * 2);
                    if (!s2) { /* left for the final sort to drop */
                        rw->prune_oom = true; /* (and out of the record) */
                        continue;
                    }
                    memcpy(s2, stack, sizeof *s2 * (size_t)sp);
                    if (stack != small) tg_free(stack);
                    stack = s2;
                    cap *= 2;
                }
                p->rwflags |= RW_DEAD;
                rw->ndead++;
                prune_note(rw, p);
                stack[sp++] = p;
            }
        }
    }
    if (stack != small) tg_free(stack);
}

/* ---- building ---- */

static tg_var *new_var(tg_rw *rw, const char *base, const char *hint, tg_var_kind kind) {
    char id[160];
    /* "<original id>:<op>": a rewrite of a rewrite's node does not pile
     * up suffixes. Built by hand: snprintf was a third of the optimizer's
     * time on large graphs. */
    const char *colon = strchr(base, ':');
    size_t blen = colon ? (size_t)(colon - base) : strlen(base), hlen = strlen(hint);
    if (blen > 90) blen = 90;
    if (hlen > 30) hlen = 30;
    memcpy(id, base, blen);
    id[blen] = ':';
    memcpy(id + blen + 1, hint, hlen);
    size_t len = blen + 1 + hlen;
    id[len] = 0;
    while (tg_idmap_get2(rw->ids, rw->taken, id)) {
        /* ".<serial>" */
        char num[24];
        int k = 0;
        for (unsigned v = (unsigned)++rw->serial; v; v /= 10) num[k++] = (char)('0' + v % 10);
        id[len] = '.';
        for (int j = 0; j < k; j++) id[len + 1 + j] = num[k - 1 - j];
        id[len + 1 + k] = 0;
    }
    tg_var *v = tg_var_new_in(rw->fg->arena, id, kind);
    if (!v) return NULL;
    if (tg_fgraph_add_var(rw->fg, v) || tg_idmap_put(rw->ids, v->id, v)) {
        if (rw->fg->nvars && rw->fg->vars[rw->fg->nvars - 1] == v) {
            rw->fg->nvars--;
            if (kind == TG_VAR_CONSTANT) rw->fg->nconsts--;
        }
        tg_var_free(v);
        return NULL;
    }
    return v;
}

static const char *base_id(tg_rw *rw) { return rw->cur ? node_key(rw->cur) : "opt"; }

tg_var *tg_rw_op(tg_rw *rw, const char *opname, int nin, tg_var *const *in, const char *attrs) {
    tg_node *n = tg_rw_node_text(rw, opname, nin, in, attrs, 0);
    return n ? n->outputs[0] : NULL;
}

/* Attrs text a rewrite wrote that does not parse (a bug in the rule): one
 * line with the rule, the node it rewrote, what is wrong and where, and
 * the start of the text only (attrs that hold bodies run to megabytes). */
static void bad_attrs(tg_rw *rw, const char *opname, const char *attrs, const tg_json_fail *jf) {
    char where[256] = "", why[96], head[64];
    if (rw->cur) tg_node_describe(rw->cur, where, sizeof where);
    if (jf->why == tg_json_error_text(json_tokener_error_depth))
        snprintf(why, sizeof why, "nested more than %d levels deep", TG_JSON_ATTRS_DEPTH);
    else
        snprintf(why, sizeof why, "%s", jf->why ? jf->why : "invalid JSON");
    size_t len = strlen(attrs), show = len > 60 ? 60 : len;
    while (show < len && show && ((unsigned char)attrs[show] & 0xC0) == 0x80) show--; /* whole characters */
    for (size_t i = 0; i < show; i++) head[i] = (unsigned char)attrs[i] < 0x20 ? ' ' : attrs[i];
    head[show] = 0;
    tg_errorf(rw->ctx, TG_EINVAL, "optimizer (%s)%s%s: bad attrs for the %s it built: %s at byte %zu of %zu (%s%s)",
              rw->rule ? rw->rule->name : rw->pass ? rw->pass : "?", where[0] ? " rewriting " : "", where, opname,
              why, jf->at, len, head, show < len ? "..." : "");
}

/* A new node of op with attrs ja (taken over; NULL: none) and nout
 * outputs (op's own count when it has one, else at least 1). */
static tg_node *node_taking(tg_rw *rw, const tg_op *op, int nin, tg_var *const *in, json_object *ja, int nout) {
    if (op->nout > 0 || nout < 1) nout = op->nout > 0 ? op->nout : 1;
    tg_node *n = tg_rw_node(rw, op, nin, in, nout, ja);
    json_object_put(ja);
    return n;
}

tg_node *tg_rw_node_text(tg_rw *rw, const char *opname, int nin, tg_var *const *in,
                         const char *attrs, int nout) {
    const tg_op *op = tg_op_find(opname);
    if (!op) {
        tg_errorf(rw->ctx, TG_EUNSUPPORTED, "optimizer: op '%s' is not available", opname);
        return NULL;
    }
    for (int i = 0; i < nin; i++)
        if (!in[i]) return NULL;
    json_object *ja = NULL;
    tg_json_fail jf;
    if (attrs && !(ja = tg_json_parse_object(NULL, attrs, strlen(attrs), TG_JSON_ATTRS_DEPTH, &jf))) {
        if (jf.status == TG_ENOMEM)
            tg_errorf(rw->ctx, TG_ENOMEM, "out of memory while optimizing");
        else
            bad_attrs(rw, opname, attrs, &jf);
        return NULL;
    }
    return node_taking(rw, op, nin, in, ja, nout);
}

tg_node *tg_rw_node_json(tg_rw *rw, const tg_op *op, int nin, tg_var *const *in,
                         const json_object *attrs, int nout) {
    json_object *ja = NULL;
    /* (json-c's copy takes a non-const source; it only reads it) */
    if (attrs && json_object_deep_copy((json_object *)attrs, &ja, NULL) != 0) {
        oom(rw);
        return NULL;
    }
    return node_taking(rw, op, nin, in, ja, nout);
}

tg_var *tg_rw_op_json(tg_rw *rw, const tg_op *op, int nin, tg_var *const *in, const json_object *attrs) {
    tg_node *n = tg_rw_node_json(rw, op, nin, in, attrs, 0);
    return n ? n->outputs[0] : NULL;
}

tg_node *tg_rw_node(tg_rw *rw, const tg_op *op, int nin, tg_var *const *in, int nout, json_object *attrs) {
    const char *opname = op->name;
    for (int i = 0; i < nin; i++)
        if (!in[i]) return NULL;
    tg_node *n = tg_node_new_in(rw->fg->arena, op, nin, nout);
    if (!n) {
        oom(rw);
        return NULL;
    }
    memcpy(n->inputs, in, sizeof *in * (size_t)nin);
    if (attrs) n->attrs = json_object_get(attrs);
    if (rw->cur && tg_trace_copy(&n->trace, &rw->cur->trace)) goto nomem;
    for (int k = 0; k < nout; k++) {
        tg_var *v = new_var(rw, base_id(rw), opname, TG_VAR_RESULT);
        if (!v) goto nomem;
        v->owner = n;
        v->owner_index = k;
        n->outputs[k] = v;
    }
    if ((op->parse_attrs && op->parse_attrs(n, rw->ctx)) || op->infer(n, rw->ctx)) {
        tg_error_prefix(rw->ctx, "optimizer (%s) building %s", rw->rule ? rw->rule->name : rw->pass,
                        opname);
        for (int k = 0; k < nout; k++) n->outputs[k]->owner = NULL;
        tg_node_free(n);
        return NULL;
    }
    tg_node_seal(n);
    /* room in created first: a node that joined the graph is the
     * graph's to free (freeing it here too freed it twice) */
    if (grow((void **)&rw->created, &rw->ccreated, rw->ncreated + 1, sizeof *rw->created) ||
        tg_fgraph_add_node(rw->fg, n)) {
        for (int k = 0; k < nout; k++) n->outputs[k]->owner = NULL;
        tg_node_free(n);
        oom(rw);
        return NULL;
    }
    rw->created[rw->ncreated++] = n;
    n->rwflags |= RW_NEW;
    /* A constant the file wrote weak is written weak again (a bare
     * scalar) so that it takes the dtype its reader gives it; a reader a
     * rewrite made gave it none (it was strong by then), and alone or
     * beside other weak scalars it would load as float64 or int64: the
     * constant is written with its dtype from now on (neg(0.01) of an SGD
     * step's gemm, 0.01 float32, was written bare, and a copy of the
     * function, which loads that text, refused gemm's float64 alpha). */
    for (int i = 0; i < nin; i++) in[i]->weak_in_file = false;
    return n;
nomem:
    for (int k = 0; k < nout; k++)
        if (n->outputs[k]) n->outputs[k]->owner = NULL;
    tg_node_free(n);
    oom(rw);
    return NULL;
}

tg_var *tg_rw_op1(tg_rw *rw, const char *op, tg_var *x, const char *attrs) {
    return x ? tg_rw_op(rw, op, 1, &x, attrs) : NULL;
}

tg_var *tg_rw_op2(tg_rw *rw, const char *op, tg_var *x, tg_var *y) {
    tg_var *in[2] = {x, y};
    return x && y ? tg_rw_op(rw, op, 2, in, NULL) : NULL;
}

tg_var *tg_rw_const_array(tg_rw *rw, tg_array *a) {
    if (!a) {
        oom(rw);
        return NULL;
    }
    tg_var *c = new_var(rw, base_id(rw), "const", TG_VAR_CONSTANT);
    if (!c) {
        tg_array_free(a);
        oom(rw);
        return NULL;
    }
    tg_var_set_constant(c, a);
    return c;
}

tg_var *tg_rw_const(tg_rw *rw, tg_dtype dt, double v) {
    return tg_rw_const_array(rw, tg_array_new_scalar(dt, v));
}

int tg_rw_match(tg_rw *rw, tg_node *n) {
    for (int i = 0; i < rw->nmatched; i++)
        if (rw->matched[i] == n) return TG_OK;
    if (grow((void **)&rw->matched, &rw->cmatched, rw->nmatched + 1, sizeof *rw->matched))
        return oom(rw);
    rw->matched[rw->nmatched++] = n;
    return TG_OK;
}

int tg_rw_replace(tg_rw *rw, tg_var *old, tg_var *newv) {
    if (!newv) return rw->ctx && rw->ctx->status ? rw->ctx->status : oom(rw);
    if (old == newv) return TG_OK;
    if (!tg_type_compatible(&old->type, &newv->type)) {
        char a[128], b[128];
        tg_type_str(&old->type, a, sizeof a);
        tg_type_str(&newv->type, b, sizeof b);
        return tg_errorf(rw->ctx, TG_ELOAD,
                         "optimizer bug: rewrite '%s' replaced '%s' (%s) by '%s' (%s)",
                         rw->rule ? rw->rule->name : rw->pass, old->id, a, newv->id, b);
    }
    newv->weak_in_file = false; /* (new readers: see tg_rw_node) */
    /* Keep the more precise static shape on the new variable. */
    for (int d = 0; d < old->type.ndim; d++)
        if (newv->type.shape[d] < 0) newv->type.shape[d] = old->type.shape[d];
    for (int i = 0; i < old->nclients; i++)
        if (old->clients[i].node && work_push(rw, old->clients[i].node)) return TG_ENOMEM;
    if (tg_fgraph_replace(rw->fg, old, newv)) return oom(rw);
    if (tg_opt_record_vmap_add(rw->rec, old->id, newv->id)) return oom(rw);
    if (grow((void **)&rw->replaced, &rw->creplaced, rw->nreplaced + 1, sizeof *rw->replaced))
        return oom(rw);
    rw->replaced[rw->nreplaced++] = newv;
    return TG_OK;
}

/* ---- origins and the record ---- */

/* Past this many keys, a union of origins is kept as a set of the sets
 * it unites (graph/origins.c) and written out once, for the node that
 * survives, before the next sort (settle_origins); under it, a copy. */
enum { ORIGINS_COPY_MAX = 64 };

static int osize(const tg_node *n) {
    return n->oset ? tg_oset_total(n->oset) : n->origins ? n->norigins : 1;
}

static bool opending(const tg_node *n) { return n->oset && !tg_oset_is_leaf(n->oset); }

/* Remember a node that holds a set until the next sort. */
static int lazy_add(tg_rw *rw, tg_node *n) {
    if (grow((void **)&rw->lazy, &rw->clazy, rw->nlazy + 1, sizeof *rw->lazy)) return TG_ENOMEM;
    rw->lazy[rw->nlazy++] = n;
    return TG_OK;
}

/* n's origins as a set: its union, or a leaf made (and kept on n until
 * the next sort) the first time. NULL: no memory. */
static tg_oset *oset_of(tg_rw *rw, tg_node *n) {
    if (!n->oset) {
        const char *own = node_key(n);
        tg_oset *s = n->origins ? tg_oset_leaf((const char *const *)n->origins, n->norigins)
                                : tg_oset_leaf(&own, 1);
        if (!s || lazy_add(rw, n)) {
            tg_oset_unref(s);
            return NULL;
        }
        n->oset = s;
    }
    return n->oset;
}

/* Append src's keys (its origins, or its own key) to o[0..*n), leaving out
 * those already there (at most ORIGINS_COPY_MAX: a scan). The keys are
 * pointers into the nodes; packed into one block at the end
 * (tg_origins_pack). */
static void origins_add(const char **o, int *n, const tg_node *src) {
    const char *own = node_key(src);
    const char *const *keys = src->origins ? (const char *const *)src->origins : &own;
    int nk = src->origins ? src->norigins : 1;
    for (int i = 0; i < nk; i++) {
        bool have = false;
        /* (the first characters in place: most keys differ there, and a
         * call of strcmp per pair was a twentieth of a compile) */
        for (int j = 0; j < *n && !have; j++)
            have = o[j] == keys[i] || (o[j][0] == keys[i][0] && strcmp(o[j], keys[i]) == 0);
        if (!have) o[(*n)++] = keys[i];
    }
}

/* Give `dst` the union of its own origins (keep_own) and those of
 * `srcs`. Small unions are copied. A chain that folds into one node (a
 * sum of 10,000 terms written as a chain of adds, which constant
 * collection makes one add, a new one at each step) would copy lists of
 * every length up to the chain's, quadratic; past ORIGINS_COPY_MAX keys,
 * or when a list is itself such a set, the union refers to the sets it
 * unites instead, and costs their number. */
static int origins_merge(tg_rw *rw, tg_node *dst, tg_node *const *srcs, int nsrc, bool keep_own) {
    int total = keep_own ? osize(dst) : 0, nkids = keep_own;
    bool pending = keep_own && opending(dst);
    for (int i = 0; i < nsrc; i++)
        if (srcs[i] != dst) {
            int k = osize(srcs[i]);
            total = total > INT_MAX - k ? INT_MAX : total + k;
            pending |= opending(srcs[i]);
            nkids++;
        }
    if (!pending && total <= ORIGINS_COPY_MAX) {
        const char *o[ORIGINS_COPY_MAX];
        int n = 0;
        if (keep_own) origins_add(o, &n, dst);
        for (int i = 0; i < nsrc; i++)
            if (srcs[i] != dst) origins_add(o, &n, srcs[i]);
        /* made from nothing original: an empty, non-NULL list */
        char **packed = tg_origins_pack(o, n);
        if (!packed) return TG_ENOMEM;
        tg_free(dst->origins);
        dst->origins = packed;
        dst->norigins = n;
        tg_oset_unref(dst->oset); /* a copy of the old list */
        dst->oset = NULL;
        return TG_OK;
    }
    tg_oset *small[16], **kids = nkids > 16 ? tg_malloc(sizeof *kids * (size_t)nkids) : small;
    if (!kids) return TG_ENOMEM;
    int nk = 0;
    if (keep_own && !(kids[nk++] = oset_of(rw, dst))) nk = -1;
    for (int i = 0; nk >= 0 && i < nsrc; i++)
        if (srcs[i] != dst && !(kids[nk++] = oset_of(rw, srcs[i]))) nk = -1;
    tg_oset *u = nk >= 0 ? tg_oset_union(kids, nk) : NULL;
    if (kids != small) tg_free(kids);
    if (!u || lazy_add(rw, dst)) {
        tg_oset_unref(u);
        return TG_ENOMEM;
    }
    tg_oset_unref(dst->oset); /* the union holds what it needs */
    dst->oset = u;
    tg_free(dst->origins);
    dst->origins = NULL;
    dst->norigins = 0;
    return TG_OK;
}

/* Before a sort (which frees the dead nodes, their sets with them; the
 * last one ends the optimizer): write out the origins of the live nodes
 * that hold a union, and drop the leaf copies. So no node holds a set
 * once the optimizer is done, and nothing outside it reads one. */
static int settle_origins(tg_rw *rw) {
    for (int i = 0; i < rw->nlazy; i++) {
        tg_node *n = rw->lazy[i];
        if (n->rwflags & RW_DEAD) continue;
        if (tg_node_origins_settle(n)) return oom(rw);
        tg_oset_unref(n->oset);
        n->oset = NULL;
    }
    rw->nlazy = 0;
    return TG_OK;
}

/* Append an entry: the nodes `removed` (the file's, or made by an
 * earlier entry), then those pruned since the last entry that are not
 * among them (what died with the rewrite: the producers only the removed
 * nodes read), and the nodes `created`. */
static int record(tg_rw *rw, const char *name, tg_node *const *removed, int nremoved,
                  tg_node *const *created, int ncreated) {
    const char *rk[64], *ck[64];
    const char **rkeys = rk, **ckeys = ck;
    int rc = TG_OK, nr = 0;
    if (rw->prune_oom) {
        rc = TG_ENOMEM;
        goto done;
    }
    if (nremoved + rw->npruned > 64) rkeys = tg_calloc((size_t)nremoved + (size_t)rw->npruned, sizeof *rkeys);
    if (ncreated > 64) ckeys = tg_calloc((size_t)ncreated, sizeof *ckeys);
    if (!rkeys || !ckeys) {
        rc = TG_ENOMEM;
        goto done;
    }
    for (int i = 0; i < nremoved; i++)
        if (!(removed[i]->rwflags & RW_SEEN)) {
            removed[i]->rwflags |= RW_SEEN;
            rkeys[nr++] = node_key(removed[i]);
        }
    for (int i = 0; i < rw->npruned; i++)
        if (!(rw->pruned[i]->rwflags & RW_SEEN)) {
            rw->pruned[i]->rwflags |= RW_SEEN;
            rkeys[nr++] = node_key(rw->pruned[i]);
        }
    for (int i = 0; i < nremoved; i++) removed[i]->rwflags &= (uint8_t)~RW_SEEN;
    for (int i = 0; i < rw->npruned; i++) rw->pruned[i]->rwflags &= (uint8_t)~RW_SEEN;
    for (int i = 0; i < ncreated; i++) ckeys[i] = node_key(created[i]);
    rc = tg_opt_record_add(rw->rec, name, rw->pass, rkeys, nr, ckeys, ncreated);
    for (int i = 0; i < ncreated; i++) created[i]->rwflags &= (uint8_t)~RW_NEW;
    rw->npruned = 0;
done:
    if (rkeys && rkeys != rk) tg_free(rkeys);
    if (ckeys && ckeys != ck) tg_free(ckeys);
    return rc ? oom(rw) : TG_OK;
}

int tg_rw_record(tg_rw *rw, const char *name, tg_node *const *removed, int nremoved,
                 tg_node *created) {
    /* (a node kept as it was, in place: its origins are its own) */
    bool self = nremoved == 1 && removed[0] == created;
    if (created && !self && origins_merge(rw, created, removed, nremoved, true)) return oom(rw);
    rw->applied++;
    return record(rw, name, removed, nremoved, created ? &created : NULL, created ? 1 : 0);
}

int tg_rw_stands_for(tg_rw *rw, tg_node *built, tg_node *replaced) {
    if (grow((void **)&rw->stands, &rw->cstands, 2 * rw->nstands + 2, sizeof *rw->stands)) return oom(rw);
    rw->stands[2 * rw->nstands] = built;
    rw->stands[2 * rw->nstands + 1] = replaced;
    rw->nstands++;
    return TG_OK;
}

/* The origins of c, a node the current rewrite built: those of the nodes
 * tg_rw_stands_for named for it, else of the nodes it replaced (`src`,
 * nsrc of them). */
static int origins_give(tg_rw *rw, tg_node *c, tg_node *const *src, int nsrc) {
    tg_node *small[8], **from = small;
    int k = 0;
    if (rw->nstands > 8 && !(from = tg_malloc(sizeof *from * (size_t)rw->nstands))) return TG_ENOMEM;
    for (int j = 0; j < rw->nstands; j++)
        if (rw->stands[2 * j] == c) from[k++] = rw->stands[2 * j + 1];
    int rc = k ? origins_merge(rw, c, from, k, false) : origins_merge(rw, c, src, nsrc, false);
    /* What stands for one node moved out of a body (a hoisted x // d that
     * a later rule rewrote, a scan rebuilt after it left an inlined
     * op_from_graph) is named as that node, unless the rewrite moved c
     * itself out of a body (tg_node_moved_from). */
    if (k) src = from;
    if (!rc && !c->moved && (k ? k : nsrc) == 1 && src[0]->moved) rc = tg_node_moved_copy(c, src[0]);
    if (from != small) tg_free(from);
    return rc;
}

/* After a local rewrite applied: prune what died, record it, give the
 * new nodes their origins, requeue what changed. The record lists as
 * removed the matched nodes that died and what died with them; a matched
 * node that lives on (log(sigmoid x) where the sigmoid has other readers,
 * a node whose other outputs are used) is neither removed nor among the
 * origins of what replaced the others, unless none died. */
static int finish_application(tg_rw *rw) {
    if (tg_rw_match(rw, rw->cur)) return TG_ENOMEM;
    /* New nodes that the replacement does not use (a rewrite may build a
     * candidate and drop it) are not part of it. */
    int nc = 0;
    for (int i = 0; i < rw->ncreated; i++) {
        tg_node *c = rw->created[i];
        if (!unused(c))
            rw->created[nc++] = c;
        else
            tg_rw_prune(rw, c);
    }
    rw->ncreated = nc;
    for (int i = 0; i < rw->nmatched; i++) tg_rw_prune(rw, rw->matched[i]);
    /* the matched nodes that died first, in the order matched (the
     * order of the origins); those that live on after them */
    int ndied = 0;
    for (int i = 0; i < rw->nmatched; i++)
        if (rw->matched[i]->rwflags & RW_DEAD) {
            tg_node *t = rw->matched[ndied];
            rw->matched[ndied++] = rw->matched[i];
            rw->matched[i] = t;
        }
    for (int i = 0; i < nc; i++)
        if (origins_give(rw, rw->created[i], rw->matched, ndied ? ndied : rw->nmatched)) return oom(rw);
    if (record(rw, rw->rule->name, rw->matched, ndied, rw->created, nc)) return TG_ENOMEM;
    for (int i = nc - 1; i >= 0; i--) /* in the order they were built */
        if (work_push_front(rw, rw->created[i])) return TG_ENOMEM;
    for (int i = 0; i < rw->nreplaced; i++) {
        tg_var *v = rw->replaced[i];
        for (int j = 0; j < v->nclients; j++)
            if (v->clients[j].node && work_push(rw, v->clients[j].node)) return TG_ENOMEM;
    }
    /* A matched node that lives on (its other outputs are used) may match
     * again. */
    for (int i = ndied; i < rw->nmatched; i++)
        if (work_push(rw, rw->matched[i])) return TG_ENOMEM;
    rw->applied++;
    return TG_OK;
}

/* ---- rules by op ---- */

typedef struct rule_set {
    const tg_op **ops; /* parallel to lists */
    int *start, *count;
    int *rules; /* rule indices grouped by op */
    int nops;
    int *any; /* rules for every op */
    int nany;
} rule_set;

/* Nodes hold op pointers: a small open-addressing map from the pointer
 * to the op's table position (tg_op_at), built once per local pass. */
enum { OPMAP = 1024 };
typedef struct opmap {
    const tg_op *key[OPMAP];
    int pos[OPMAP];
} opmap;

static void opmap_build(opmap *m, int nops) {
    memset(m->key, 0, sizeof m->key);
    for (int o = 0; o < nops; o++) {
        uintptr_t h = ((uintptr_t)tg_op_at(o) >> 4) & (OPMAP - 1);
        while (m->key[h]) h = (h + 1) & (OPMAP - 1);
        m->key[h] = tg_op_at(o);
        m->pos[h] = o;
    }
}

/* op's table position, or -1 (not an op of the table). */
static inline int opmap_pos(const opmap *m, const tg_op *op) {
    uintptr_t h = ((uintptr_t)op >> 4) & (OPMAP - 1);
    while (m->key[h] && m->key[h] != op) h = (h + 1) & (OPMAP - 1);
    return m->key[h] ? m->pos[h] : -1;
}

/* The next word of a space-separated list at *p (its length in *len),
 * moving *p past it; NULL after the last. */
static const char *word_next(const char **p, size_t *len) {
    const char *s = *p;
    if (!s) return NULL;
    while (*s == ' ') s++;
    const char *e = s;
    while (*e && *e != ' ') e++;
    *p = e;
    *len = (size_t)(e - s);
    return *len ? s : NULL;
}

static bool word_in(const char *list, const char *w) {
    size_t lw = strlen(w), len;
    for (const char *p = list, *s; (s = word_next(&p, &len));)
        if (len == lw && strncmp(s, w, lw) == 0) return true;
    return false;
}

static bool rule_has_tag(const tg_rw_rule *r, const char *tag) {
    return strcmp(r->name, tag) == 0 || strcmp(r->pass, tag) == 0 || word_in(r->tags, tag);
}

static bool tag_known(const char *tag) {
    for (int i = 0; i < NPASSES; i++)
        if (strcmp(passes[i].name, tag) == 0) return true;
    for (int i = 0; group_tags[i]; i++)
        if (strcmp(group_tags[i], tag) == 0) return true;
    for (int i = 0; i < tg_rw_nrules; i++)
        if (rule_has_tag(&tg_rw_rules[i], tag)) return true;
    return test_rule && rule_has_tag(test_rule, tag);
}

static bool listed(const char *const *tags, const tg_rw_rule *r) {
    for (int i = 0; tags && tags[i]; i++)
        if (rule_has_tag(r, tags[i])) return true;
    return false;
}

static bool pass_listed(const char *const *tags, const char *pass) {
    for (int i = 0; tags && tags[i]; i++)
        if (strcmp(tags[i], pass) == 0) return true;
    return false;
}

/* ---- running a local pass ---- */

/* Each try of a rule is timed for the rewrite statistics (tgprof's
 * table), which is millions of reads on a large graph: two clock_gettime
 * per try were a tenth of compiling one (bench_opt). The CPU's cycle
 * counter costs a few cycles; the pass turns its ticks into seconds with
 * the ratio of the clock to the counter over the whole pass, so no
 * frequency is assumed. Elsewhere the clock itself is the counter. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t rw_ticks(void) { return __rdtsc(); }
#elif defined(__aarch64__)
static inline uint64_t rw_ticks(void) {
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
#else
static inline uint64_t rw_ticks(void) { return tg_now_ns(); }
#endif

static int run_local(tg_rw *rw, const char *pass, const bool *enabled, bool test_on) {
    /* The rules of this pass, by op. */
    int nr = 0;
    int *idx = tg_calloc((size_t)tg_rw_nrules + 1, sizeof *idx);
    if (!idx) return oom(rw);
    for (int i = 0; i < tg_rw_nrules; i++)
        if (enabled[i] && strcmp(tg_rw_rules[i].pass, pass) == 0) idx[nr++] = i;
    const tg_rw_rule *extra = test_on && test_rule && !strcmp(test_rule->pass, pass) ? test_rule : NULL;
    tg_rewrite_stats extra_st = {0};
    if (!nr && !extra) {
        tg_free(idx);
        return TG_OK;
    }
    uint64_t ns0 = tg_now_ns(), k0 = rw_ticks();
    int nops = tg_op_count();
    /* rules_for[op] as a list of rule indices, built once per pass, all
     * in one block, op o's list at o * stride (a list of its own per op
     * was 540 allocations and frees per compile, small blocks that the C
     * library then sorts out of a large heap). Written as filled: no
     * zeroing. */
    size_t stride = (size_t)nr + 1;
    int *cnt = tg_calloc((size_t)nops + 1, sizeof *cnt);
    int *lists = tg_malloc(sizeof *lists * ((size_t)nops * stride + 1));
    /* each rule's ticks in this pass; the last slot: the extra rule */
    uint64_t *ticks = tg_calloc((size_t)tg_rw_nrules + 1, sizeof *ticks);
    int rc = TG_OK;
    if (!cnt || !lists || !ticks) {
        rc = oom(rw);
        goto done;
    }
    opmap map;
    opmap_build(&map, nops);
    /* Each rule, in order, onto the lists of the ops it names (each word
     * of its ops looked up by name), or of every op. Matching every op's
     * name against every rule's list was some 26,000 word scans a
     * compile. A word naming no op matches nothing, as before. */
    for (int i = 0; i < nr; i++) {
        const tg_rw_rule *r = &tg_rw_rules[idx[i]];
        if (!r->ops) {
            for (int o = 0; o < nops; o++) lists[(size_t)o * stride + (size_t)cnt[o]++] = idx[i];
            continue;
        }
        size_t lw;
        for (const char *p = r->ops, *ws; (ws = word_next(&p, &lw));) {
            char w[64];
            if (lw >= sizeof w) continue; /* (no op has so long a name) */
            memcpy(w, ws, lw);
            w[lw] = 0;
            const tg_op *op = tg_op_find(w);
            int o = op ? opmap_pos(&map, op) : -1;
            if (o < 0) continue;
            int *lo = lists + (size_t)o * stride;
            /* (a word written twice) */
            if (!cnt[o] || lo[cnt[o] - 1] != idx[i]) lo[cnt[o]++] = idx[i];
        }
    }
    /* (and the set of ops the pass has rules for) */
    uint64_t pass_ops[TG_OPSET_WORDS] = {0};
    for (int o = 0; o < nops; o++)
        if (cnt[o]) tg_opset_add(pass_ops, tg_op_at(o));

    /* Every node, in order (the cursor; fg->nodes only grows during a
     * local pass, and each node's index is its place there); none when
     * no rule of the pass is for an op the graph may have. */
    rw->icur = 0;
    rw->ninit = extra || tg_opset_meet(rw->fg->opseen, pass_ops) ? rw->fg->nnodes : 0;
    /* The cursor goes through the nodes in array order, which must be
     * topological: the pass then sees each node after its inputs, as
     * rules that fold a chain a step at a time assume. The nodes the last
     * pass made are at the end, read by nodes before them; in the order
     * they were made (from the top of a chain down, for instance), a
     * rule moving something up the chain (switch_sink) met each step
     * before the one below had moved, and moved every one past every
     * step above it: n^2/2 rewrites. */
    if (rw->ninit && rw->fg->nnodes != rw->sorted_nnodes) {
        if ((rc = tg_rw_toposort(rw))) goto done;
        rw->ninit = rw->fg->nnodes;
    }
    rw->nfront = 0;
    tg_node *n;
    while ((n = work_pop(rw))) {
        if (n->rwflags & RW_DEAD) continue;
        int o = opmap_pos(&map, n->op);
        if (o < 0) continue;
        const int *lo = lists + (size_t)o * stride;
        bool try_extra = extra && (!extra->ops || word_in(extra->ops, n->op->name));
        for (int j = 0; j < cnt[o] + try_extra; j++) {
            const tg_rw_rule *r = j < cnt[o] ? &tg_rw_rules[lo[j]] : extra;
            int ri = j < cnt[o] ? lo[j] : tg_rw_nrules;
            tg_rewrite_stats *st = j < cnt[o] ? &rw->rstats[ri] : &extra_st;
            rw->rule = r;
            rw->cur = n;
            rw->nmatched = rw->ncreated = rw->nreplaced = rw->nstands = 0;
            uint64_t t0 = rw_ticks();
            int got = r->fn(rw, n);
            ticks[ri] += rw_ticks() - t0;
            st->tried++;
            if (got < 0) {
                /* Rules such as scan_hoist return TG_ENOMEM without a
                 * message: the compile then failed with none. */
                if (got == TG_ENOMEM && tg_ctx_status(rw->ctx) != TG_ENOMEM)
                    tg_errorf(rw->ctx, TG_ENOMEM, "out of memory while optimizing (%s)", r->name);
                rc = got;
                goto done;
            }
            if (got == 0) {
                /* A rule that declined must not leave nodes behind. */
                for (int k = 0; k < rw->ncreated; k++) tg_rw_prune(rw, rw->created[k]);
                rw->npruned = 0; /* (its candidates only: nothing else may change) */
                continue;
            }
            st->applied++;
            if ((rc = finish_application(rw))) goto done;
            break;
        }
    }
done:
    rw->rule = NULL;
    rw->cur = NULL;
    rw->icur = rw->ninit = 0;
    rw->nfront = 0;
    while ((n = work_pop(rw))) (void)n;
    if (ticks) {
        uint64_t dk = rw_ticks() - k0, dns = tg_now_ns() - ns0;
        double per_tick = dk ? (double)dns * 1e-9 / (double)dk : 0;
        /* (min: a counter that differed between cores cannot make a rule
         * take longer than its pass) */
        for (int i = 0; i < nr; i++)
            rw->rstats[idx[i]].seconds += (double)(ticks[idx[i]] < dk ? ticks[idx[i]] : dk) * per_tick;
    }
    tg_free(ticks);
    tg_free(lists);
    tg_free(cnt);
    tg_free(idx);
    return rc;
}

/* ---- clean-up ---- */

/* Drop dead nodes (the topological sort frees what no output reaches) and
 * the variables nothing uses any more; renumber. */
static int compact(tg_rw *rw) {
    tg_fgraph *fg = rw->fg;
    int rc = tg_rw_toposort(rw);
    if (rc) return rc;
    /* A variable's mark is NULL outside the code that uses it (each user
     * clears what it set), so only the function's inputs, outputs and
     * updated shared values, which stay whether read or not, are marked
     * here and unmarked after: no sweep over every variable, most of them
     * dead and cold (3 ms on 100,000 nodes). */
#ifndef NDEBUG
    for (int i = 0; i < fg->nvars; i++) assert(fg->vars[i]->mark == NULL);
#endif
    for (int i = 0; i < fg->nin; i++) fg->inputs[i]->mark = fg;
    for (int i = 0; i < fg->nout + fg->nupd; i++) fg->outputs[i]->mark = fg;
    for (int i = 0; i < fg->nupd; i++) fg->upd_shared[i]->mark = fg;
    int k = 0, kc = 0;
    for (int i = 0; i < fg->nvars; i++) {
        /* cold on large graphs: fetch ahead what the test and the frees
         * below read */
        TG_SWEEP_PREFETCH(fg->vars, i, fg->nvars);
        if (i + 8 < fg->nvars) {
            const tg_var *w = fg->vars[i + 8];
            if (!w->owner && !w->nclients) {
                __builtin_prefetch(w->id);
                __builtin_prefetch(w->clients);
                __builtin_prefetch(w->value);
            }
        }
        tg_var *v = fg->vars[i];
        if (v->owner || v->nclients || v->mark) {
            v->index = k;
            fg->vars[k++] = v;
            if (v->kind == TG_VAR_CONSTANT) {
                assert(kc < fg->nconsts); /* every constant joined through the list */
                if (kc < fg->cconsts) fg->consts[kc++] = v;
            }
        } else {
            tg_var_free(v);
        }
    }
    fg->nvars = k;
    fg->nconsts = kc;
    for (int i = 0; i < fg->nin; i++) fg->inputs[i]->mark = NULL;
    for (int i = 0; i < fg->nout + fg->nupd; i++) fg->outputs[i]->mark = NULL;
    for (int i = 0; i < fg->nupd; i++) fg->upd_shared[i]->mark = NULL;
    for (int i = 0; i < fg->nnodes; i++) {
        TG_SWEEP_PREFETCH(fg->nodes, i, fg->nnodes);
        fg->nodes[i]->rwflags = 0;
    }
    return TG_OK;
}

/* In-place hints a rewrite made stale: those that break
 * tg_inplace_hint_ok (the rule a .tgf restore checks). Hints come from
 * a file that the optimizer wrote (`tgc export`) and that was loaded
 * again; merging equal nodes then gives one result the readers, and the
 * hints, of all:
 * three copies of maximum(x, x), each overwritten by its reader, became
 * one result that three nodes claimed. The kernels never overwrite a
 * buffer they do not hold alone (tg_array_is_exclusive), so the function
 * computed right, but saved it did not load again (found by fuzz_run).
 * The pass's own hints (inplace.c) are made last and hold. */
static void drop_stale_inplace(tg_fgraph *fg) {
    tg_shared_check chk = {0};
    for (int i = 0; i < fg->nnodes; i++) {
        tg_node *n = fg->nodes[i];
        if (!n->inplace) continue;
        bool any = false;
        for (int k = 0; k < n->nout; k++) {
            if (n->inplace[k] >= 0 && !tg_inplace_hint_ok(fg, n, n->inplace[k], &chk)) n->inplace[k] = -1;
            any |= n->inplace[k] >= 0;
        }
        if (!any) {
            tg_free(n->inplace);
            n->inplace = NULL;
        }
    }
    tg_shared_check_free(&chk);
}

static int live_nodes(const tg_rw *rw) {
#ifndef NDEBUG /* the debug (sanitizer) build checks the count by a walk */
    int walk = 0;
    for (int i = 0; i < rw->fg->nnodes; i++) walk += !(rw->fg->nodes[i]->rwflags & RW_DEAD);
    assert(walk == rw->fg->nnodes - rw->ndead);
#endif
    return rw->fg->nnodes - rw->ndead;
}

/* ---- the entry point ---- */

int tg_optimize(tg_fgraph *fg, const tg_compile_options *opts, tg_opt_record *rec,
                const struct tg_idmap *taken, tg_ctx *ctx) {
    const char *preset = opts && opts->preset ? opts->preset : "fast_run";
    int level;
    if (!strcmp(preset, "none"))
        level = 0;
    else if (!strcmp(preset, "fast_compile"))
        level = 1;
    else if (!strcmp(preset, "fast_run"))
        level = 2;
    else
        return tg_errorf(ctx, TG_EINVAL,
                         "unknown preset '%s' (expected none, fast_compile or fast_run)", preset);
    const char *const *inc = opts ? opts->include : NULL;
    const char *const *exc = opts ? opts->exclude : NULL;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; (pass ? exc : inc) && (pass ? exc : inc)[i]; i++) {
            const char *t = (pass ? exc : inc)[i];
            if (!tag_known(t))
                return tg_errorf(ctx, TG_EINVAL,
                                 "unknown optimizer tag '%s' (a pass: inline, merge, scan, canonicalize, "
                                 "stabilize, specialize, fusion, inplace; a group: "
                                 "constant_folding, gemm; or a rewrite's name)",
                                 t);
        }
    uint64_t t0 = tg_now_ns();
    tg_rw rw = {.fg = fg, .ctx = ctx, .rec = rec, .taken = taken, .sorted_nnodes = fg->nnodes};
    bool *enabled = tg_calloc((size_t)tg_rw_nrules + 1, sizeof *enabled);
    rw.rstats = tg_calloc((size_t)tg_rw_nrules + 1, sizeof *rw.rstats);
    rw.ids = tg_idmap_new();
    int rc = TG_OK;
    if (!enabled || !rw.rstats || !rw.ids) {
        rc = oom(&rw);
        goto done;
    }
    for (int i = 0; !taken && i < fg->nvars; i++)
        if (tg_idmap_put(rw.ids, fg->vars[i]->id, fg->vars[i])) {
            rc = oom(&rw);
            goto done;
        }
    /* Which rules run: the preset's passes, plus included, less excluded. */
    for (int i = 0; i < tg_rw_nrules; i++) {
        const tg_rw_rule *r = &tg_rw_rules[i];
        bool on = false;
        for (int p = 0; p < NPASSES; p++)
            if (!strcmp(passes[p].name, r->pass) && !passes[p].opt_in)
                on = level == 2 || (level == 1 && passes[p].fast_compile);
        /* A rule run in one pass but tagged with another's name (the
         * gradient rules of stabilize, run early in canonicalize too) is
         * off where that other pass is off. */
        for (int p = 0; p < NPASSES; p++) {
            bool pass_on = !passes[p].opt_in && (level == 2 || (level == 1 && passes[p].fast_compile));
            if (!pass_on && word_in(r->tags, passes[p].name)) on = false;
        }
        if (listed(inc, r)) on = true;
        if (listed(exc, r)) on = false;
        enabled[i] = on;
        rw.rstats[i].name = r->name;
        rw.rstats[i].pass = r->pass;
    }
    bool test_on = test_rule && (level > 0 || listed(inc, test_rule)) && !listed(exc, test_rule);
    /* Multi-output fusion and recomputation are parts of the fusion
     * pass, on with it unless excluded by their own tags. */
    rw.multi_output = !pass_listed(exc, "fuse_multi_output");
    rw.recompute = !pass_listed(exc, "fuse_recompute");
    for (int p = 0; p < NPASSES; p++) {
        const pass_def *pd = &passes[p];
        bool on;
        if (pd->global) {
            on = level == 2 || (level == 1 && pd->fast_compile);
            if (pass_listed(inc, pd->name)) on = true;
            if (pass_listed(exc, pd->name)) on = false;
        } else {
            on = test_on && !strcmp(test_rule->pass, pd->name);
            for (int i = 0; i < tg_rw_nrules; i++)
                on |= enabled[i] && !strcmp(tg_rw_rules[i].pass, pd->name);
        }
        if (!on) continue;
        rw.pass = pd->name;
        rw.applied = 0;
        int before = live_nodes(&rw);
        uint64_t p0 = tg_now_ns();
        rc = pd->global ? pd->global(&rw) : run_local(&rw, pd->name, enabled, test_on);
        /* Global passes leave what they touched queued; the next pass
         * starts from the whole graph anyway (and fusion's sort may free
         * dead nodes). */
        while (work_pop(&rw)) {
        }
        if (rc) goto done;
        if (grow((void **)&rec->passes, &rec->cpasses, rec->npasses + 1, sizeof *rec->passes)) {
            rc = oom(&rw);
            goto done;
        }
        tg_pass_stats *st = &rec->passes[rec->npasses++];
        st->name = pd->name;
        st->seconds = (double)(tg_now_ns() - p0) * 1e-9;
        st->nodes_before = before;
        st->nodes_after = live_nodes(&rw);
        st->applied = rw.applied;
    }
    if ((rc = compact(&rw))) goto done;
    if (fg->inplace_hints) drop_stale_inplace(fg);
    /* The nodes that overwrite a shared variable go last (graph.h). */
    if (fg->nupd) tg_fgraph_commit_last(fg);
    /* Keep the statistics of the rules that ran. */
    int ns = 0;
    for (int i = 0; i < tg_rw_nrules; i++)
        if (enabled[i]) rw.rstats[ns++] = rw.rstats[i];
    rec->rstats = rw.rstats;
    rec->nrstats = ns;
    rw.rstats = NULL;
done:
    /* (the same for a global pass) */
    if (rc == TG_ENOMEM && tg_ctx_status(ctx) != TG_ENOMEM) oom(&rw);
    rec->seconds = (double)(tg_now_ns() - t0) * 1e-9;
    tg_free(enabled);
    tg_free(rw.rstats);
    tg_free(rw.matched);
    tg_free(rw.created);
    tg_free(rw.replaced);
    tg_free(rw.stands);
    tg_free(rw.pruned);
    tg_free(rw.work);
    tg_free(rw.lazy);
    tg_idmap_free(rw.ids);
    return rc;
}

/* ---- queries ---- */

bool tg_rw_is_const_value(const tg_var *v, double val) {
    if (v->kind != TG_VAR_CONSTANT || !v->value) return false;
    const tg_array *a = v->value;
    int64_t n = tg_array_size(a);
    if (n == 0 || n > 4096) return false;
    for (int64_t i = 0; i < n; i++)
        if (tg_array_get_flat(a, i) != val) return false;
    return true;
}

bool tg_rw_may_raise(const tg_node *bn) {
    const char *op = bn->op->name;
    if (!strcmp(op, "composite")) {
        const char *a = bn->attrs ? json_object_to_json_string_ext(bn->attrs, JSON_C_TO_STRING_PLAIN) : "";
        return strstr(a, "\"int_div\"") || strstr(a, "\"mod\"") || strstr(a, "\"pow\"");
    }
    return tg_elemwise_may_fail(bn);
}

/* Whether the operands of an elementwise node may fail to broadcast at
 * run time: along some axis (counted from the last), an operand whose
 * length is unknown meets another operand's length other than 1 (known,
 * or unknown in another variable). Known lengths that clash were refused
 * at load. */
static bool may_not_broadcast(const tg_node *n) {
    int nd = n->outputs[0]->type.ndim;
    for (int d = 1; d <= nd; d++) {
        const tg_var *unknown = NULL;
        bool known_big = false, two_unknown = false;
        for (int i = 0; i < n->nin; i++) {
            const tg_var *v = n->inputs[i];
            if (v->type.ndim < d) continue;
            int64_t len = v->type.shape[v->type.ndim - d];
            if (len < 0) {
                if (unknown && unknown != v) two_unknown = true;
                unknown = v;
            } else if (len != 1) {
                known_big = true;
            }
        }
        if (unknown && (known_big || two_unknown)) return true;
    }
    return false;
}

/* Whether dot or matmul node n may find its operands not aligned at run
 * time (blas.c's product_shape): the contracted lengths, or matmul's
 * batch lengths, not known on both sides (known ones that clash were
 * refused at load). A BPTT loop's gx_t = d_t @ W^T of static shapes
 * cannot fail. */
static bool product_may_fail(const tg_node *n) {
    if (n->nin != 2) return true;
    const tg_type *a = &n->inputs[0]->type, *b = &n->inputs[1]->type;
    bool mm = !strcmp(n->op->name, "matmul");
    if (!mm && (a->ndim == 0 || b->ndim == 0)) return false; /* (a scaling) */
    if (a->ndim == 0 || b->ndim == 0) return true;
    int64_t ka = a->shape[a->ndim - 1], kb = b->shape[mm && b->ndim > 1 ? b->ndim - 2 : 0];
    if (ka < 0 || kb < 0) return true;
    if (!mm) return false;
    int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
    for (int d = 1; d <= ba && d <= bb; d++) {
        int64_t la = a->shape[ba - d], lb = b->shape[bb - d];
        if ((la < 0 && lb != 1) || (lb < 0 && la != 1)) return true;
    }
    return false;
}

extern const tg_op tg_op_scan, tg_op_op_from_graph;

/* The body an op_from_graph or scan node runs, or NULL (composite bodies
 * hold only elementwise ops, none with an effect). The op pointer first:
 * merge asks this of every node, and a node's parsed attrs (a) lie on
 * lines it otherwise never reads (the 100,000-node compile is bound by
 * such misses: docs/optimizer.md). */
static const tg_graph *node_body(const tg_node *n) {
    if (n->op == &tg_op_op_from_graph && n->a.extra) return ((const tg_ofg *)n->a.extra)->g;
    if (n->op == &tg_op_scan && n->a.extra) return ((const scan_p *)n->a.extra)->body;
    return NULL;
}

bool tg_rw_has_effect(const tg_node *n) {
    if (n->op->flags & TG_OPF_SIDE_EFFECT) return true;
    const tg_graph *g = node_body(n);
    /* (a body's nodes are few and its own: walked at each call, as merge
     * hashes its JSON at each pass; a nested body's depth is the file's) */
    for (int i = 0; g && i < g->nnodes; i++)
        if (tg_rw_has_effect(g->nodes[i])) return true;
    return false;
}

bool tg_rw_node_may_fail(const tg_node *n) {
    const tg_op *op = n->op;
    if (op->flags & (TG_OPF_SIDE_EFFECT | TG_OPF_LAZY)) return true;
    if (op->flags & TG_OPF_ELEMWISE) return tg_rw_may_raise(n) || may_not_broadcast(n);
    if (!strcmp(op->name, "dot") || !strcmp(op->name, "matmul")) return product_may_fail(n);
    /* ops that take any input (their attrs were checked at load) */
    static const char *const safe[] = {"identity", "cast", "shape", "shape_i", "zeros_like", "ones_like",
                                       "sum", "prod", "mean", "all", "any", "transpose", NULL};
    for (int i = 0; safe[i]; i++)
        if (!strcmp(op->name, safe[i])) return false;
    return true;
}

enum { DROP_LOOK = 64 };

bool tg_rw_drops_check_proven(const tg_node *n, const tg_var *keep, const tg_node *const *proven, int nproven) {
    const tg_node *dead[DROP_LOOK];
    int nd = 0;
    dead[nd++] = n;
    for (int at = 0; at < nd; at++) {
        const tg_node *d = dead[at];
        /* (n's own check, where n is not elementwise, is the rewrite's
         * to prove: sum_to_useless proves the lengths it sums to) */
        bool own = at == 0 && !(d->op->flags & (TG_OPF_ELEMWISE | TG_OPF_LAZY)) && !tg_rw_has_effect(d);
        bool shown = false; /* an elementwise node whose broadcast the rewrite showed */
        for (int k = 0; k < nproven && !shown; k++) shown = proven[k] == d;
        if (shown && (!(d->op->flags & TG_OPF_ELEMWISE) || (d->op->flags & (TG_OPF_SIDE_EFFECT | TG_OPF_LAZY)) ||
                      tg_rw_may_raise(d)))
            return true;
        if (!own && !shown && tg_rw_node_may_fail(d)) return true;
        for (int i = 0; i < d->nin; i++) {
            const tg_node *p = d->inputs[i]->owner;
            if (!p || p == keep->owner) continue; /* (what replaces n lives on) */
            bool known = false;
            for (int k = 0; k < nd && !known; k++) known = dead[k] == p;
            if (known) continue;
            /* p dies with the dead set when every reader of every output
             * of p is in it (a function output keeps it) */
            bool dies = true;
            for (int o = 0; o < p->nout && dies; o++)
                for (int c = 0; c < p->outputs[o]->nclients && dies; c++) {
                    const tg_node *r = p->outputs[o]->clients[c].node;
                    bool in = false;
                    for (int k = 0; k < nd && !in; k++) in = dead[k] == r;
                    dies = r && in;
                }
            if (!dies) continue;
            if (nd == DROP_LOOK) return true; /* (too far to tell) */
            dead[nd++] = p;
        }
    }
    return false;
}

bool tg_rw_drops_check(const tg_node *n, const tg_var *keep) { return tg_rw_drops_check_proven(n, keep, NULL, 0); }

bool tg_rw_single_client(const tg_var *v) {
    return v->nclients == 1 && v->clients[0].node != NULL;
}

bool tg_rw_type_same_known(const tg_type *a, const tg_type *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] < 0 || a->shape[d] != b->shape[d]) return false;
    return true;
}

bool tg_rw_keeps_shape_by(const tg_var *x, const tg_var *const *others, int n, tg_rw_axis_same_fn same,
                          void *ud) {
    for (int i = 0; i < n; i++) {
        const tg_var *o = others[i];
        if (o == x) continue;
        if (o->type.ndim > x->type.ndim) return false;
        int off = x->type.ndim - o->type.ndim;
        for (int d = 0; d < o->type.ndim; d++) {
            int64_t lo = o->type.shape[d], lx = x->type.shape[d + off];
            if (lo == 1) continue;
            if (lx >= 0 && lo == lx) continue;
            if ((lo < 0 || lx < 0) && same && same(o, d, x, d + off, ud)) continue;
            return false;
        }
    }
    return true;
}

bool tg_rw_keeps_shape(const tg_var *x, const tg_var *const *others, int n) {
    return tg_rw_keeps_shape_by(x, others, n, NULL, NULL);
}
