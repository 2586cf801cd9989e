/* The scan rewrites (Theano's scan_opt; pass "scan", tag "scan"): work
 * moved out of the loop, loops merged or inlined, and stacked outputs
 * that keep only the steps someone reads.
 *
 *   scan_inline     a scan of one step (n_steps the constant 1) is its
 *                   body, inlined: no nested function, no per-step cost.
 *   scan_hoist      body nodes that read only non-sequences and constants
 *                   compute the same value every step: they become nodes
 *                   outside, whose results come in as new non-sequences.
 *   scan_push_seq   a body node that reads only the current row of one
 *                   sequence (read at one tap) and loop invariants is applied
 *                   once to the whole sequence outside, feeding a new
 *                   sequence: an RNN's input projection x_t @ W becomes
 *                   one tall gemm over every step.
 *   scan_keep_last  an output read only through out[-k] or out[-k:]
 *                   (or not at all) keeps only its last k steps, in a
 *                   ring of rows (attrs.keep_last, ops/scan.c).
 *   scan_merge      two scans over the same steps (the same n_steps
 *                   variable, or the same sequences), neither reading
 *                   the other, become one loop with both bodies.
 *   scan_merge_outputs  non-recurrent outputs stacking the same body
 *                   variable are one.
 *
 * A scan's body is JSON in its attrs (parsed into p->body when the node
 * is made): each rewrite edits a copy of that JSON and builds the new scan
 * node from it, so the new node is checked exactly as a loaded one is.
 * Body nodes that move outside are rebuilt from the parsed body (their op,
 * attrs and inputs), over the outer variables.
 */
#include <stdio.h>
#include <string.h>

#include "io/io.h"
#include "ops/scan.h"
#include "rewrite/engine.h"

extern const tg_op tg_op_scan;

/* ---- the scan node's layout ---- */

typedef struct scan_io {
    scan_p *p;
    tg_graph *bg;
    tg_fdecl *fd;
    int base_seq, base_init, base_ns;
} scan_io;

static bool scan_view(tg_node *n, scan_io *s) {
    scan_p *p = n->a.extra;
    if (!p || !p->body || !p->body->funcs) return false;
    s->p = p;
    s->bg = p->body;
    s->fd = &p->body->funcs[0];
    s->base_seq = p->has_n ? 1 : 0;
    s->base_init = s->base_seq + p->nseq;
    s->base_ns = s->base_init + p->nrec;
    return true;
}

/* The body input number of body variable v, or -1. */
static int body_input_index(const scan_io *s, const tg_var *v) {
    for (int b = 0; b < s->fd->nin; b++)
        if (s->fd->inputs[b] == v) return b;
    return -1;
}

static bool is_body_output(const scan_io *s, const tg_var *v) {
    for (int o = 0; o < s->fd->nout; o++)
        if (s->fd->outputs[o] == v) return true;
    return false;
}

/* Body variable v is non-sequence number k (returned), else -1. */
static int ns_index(const scan_io *s, const tg_var *v) {
    int b = body_input_index(s, v);
    return b >= s->p->nbin - s->p->nns ? b - (s->p->nbin - s->p->nns) : -1;
}

/* The scan's check that sequence i has the rows n_steps needs (ops/scan.c:
 * "sequence 0 ('x') has 3 rows, but 5 steps with taps [0, 1] need 6")
 * cannot fail: no n_steps (the sequences give the steps), or a constant
 * n_steps and a static length that is enough. A rewrite that would read
 * the rows itself, or drop the sequence, keeps the check otherwise. */
static bool seq_long_enough(const tg_node *n, const scan_io *s, int i) {
    scan_p *p = s->p;
    if (!p->has_n) return true;
    const tg_var *ns = n->inputs[0];
    const tg_type *t = &n->inputs[s->base_seq + i]->type;
    if (ns->kind != TG_VAR_CONSTANT || !ns->value || tg_array_size(ns->value) != 1 || t->ndim < 1 ||
        t->shape[0] < 0)
        return false;
    return (double)(t->shape[0] - p->seq_span[i]) >= tg_array_get_flat(ns->value, 0);
}

/* Sequence i's rows come, through elementwise ops and products whose
 * leading axis is theirs (what scan_push_seq builds), from an earlier
 * sequence g < i whose taps span at least as far: g's length check runs
 * first, and a new sequence scan_push_seq made from g has g's rows, so
 * g's check is the one that fails, naming the sequence as written. */
static bool seq_derived(const tg_node *n, const scan_io *s, int i) {
    tg_var *stack[16];
    int sp = 0, seen = 0;
    stack[sp++] = n->inputs[s->base_seq + i];
    int nd = stack[0]->type.ndim;
    while (sp && seen++ < 32) {
        tg_node *o = stack[--sp]->owner;
        if (!o) continue;
        bool ew = (o->op->flags & TG_OPF_ELEMWISE) != 0;
        bool mm = !strcmp(o->op->name, "matmul"), prod = mm || !strcmp(o->op->name, "dot");
        if (!ew && !prod) continue;
        for (int k = 0; k < o->nin; k++) {
            tg_var *u = o->inputs[k];
            /* A product's rows are its left operand's, or a stack of
             * matrices on the right of matmul (c @ m_t). */
            if (u->type.ndim != nd || (prod && k > 0 && !(mm && k == 1 && nd >= 3))) continue;
            for (int g = 0; g < i; g++)
                if (n->inputs[s->base_seq + g] == u && s->p->seq_span[g] >= s->p->seq_span[i]) return true;
            if (sp < 16) stack[sp++] = u;
        }
    }
    return false;
}

/* ---- JSON editing ---- */

static json_object *jget(json_object *o, const char *key) {
    json_object *v = NULL;
    json_object_object_get_ex(o, key, &v);
    return v;
}

/* A copy of n's attrs whose body is written again from the parsed body:
 * derived nodes (a `grad` in the body of a gradient's scan) are expanded
 * there, and the JSON's node i is the parsed body's node i. */
static json_object *attrs_copy(const tg_node *n) {
    scan_p *p = n->a.extra;
    json_object *c = NULL, *g = NULL, *body = NULL;
    if (json_object_deep_copy(n->attrs, &c, NULL) != 0) return NULL;
    if (!(g = tg_graph_to_json(p->body)) || !(body = json_object_new_object())) goto fail;
    const tg_fdecl *fd = &p->body->funcs[0];
    json_object *in = json_object_new_array(), *out = json_object_new_array();
    json_object_object_add(body, "inputs", in);
    json_object_object_add(body, "outputs", out);
    if (!in || !out) goto fail;
    for (int b = 0; b < fd->nin; b++) json_object_array_add(in, json_object_new_string(fd->inputs[b]->id));
    for (int o = 0; o < fd->nout; o++) json_object_array_add(out, json_object_new_string(fd->outputs[o]->id));
    json_object_object_add(body, "variables", json_object_get(jget(g, "variables")));
    json_object_object_add(body, "nodes", json_object_get(jget(g, "nodes")));
    json_object_put(g);
    json_object_object_add(c, "body", body);
    return c;
fail:
    json_object_put(c);
    json_object_put(g);
    json_object_put(body);
    return NULL;
}

/* o[key] as a copy of its array with `val` inserted at idx (idx may be
 * the length). */
static int arr_insert(json_object *o, const char *key, size_t idx, json_object *val) {
    json_object *a = jget(o, key), *b = json_object_new_array();
    if (!b) return TG_ENOMEM;
    size_t len = a ? json_object_array_length(a) : 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == idx) json_object_array_add(b, val);
        if (i < len) json_object_array_add(b, json_object_get(json_object_array_get_idx(a, i)));
    }
    json_object_object_add(o, key, b);
    return TG_OK;
}

static void set_int(json_object *o, const char *key, int64_t v) {
    json_object_object_add(o, key, json_object_new_int64(v));
}

/* Declare body variable `id` an input of type t: its `variables` entry
 * gets the type (one is added when the id had none). */
static int body_declare(json_object *body, const char *id, const tg_type *t) {
    json_object *vars = jget(body, "variables");
    json_object *ty = tg_type_to_json(t);
    if (!ty) return TG_ENOMEM;
    for (size_t i = 0; vars && i < json_object_array_length(vars); i++) {
        json_object *e = json_object_array_get_idx(vars, i);
        json_object *jid = jget(e, "id");
        if (jid && !strcmp(json_object_get_string(jid), id)) {
            json_object_object_add(e, "type", ty);
            return TG_OK;
        }
    }
    json_object *e = json_object_new_object();
    if (!e) {
        json_object_put(ty);
        return TG_ENOMEM;
    }
    json_object_object_add(e, "id", json_object_new_string(id));
    json_object_object_add(e, "type", ty);
    json_object_array_add(vars, e);
    return TG_OK;
}

static void body_undeclare(json_object *body, const char *id) {
    json_object *vars = jget(body, "variables");
    for (size_t i = 0; vars && i < json_object_array_length(vars); i++) {
        json_object *jid = jget(json_object_array_get_idx(vars, i), "id");
        if (jid && !strcmp(json_object_get_string(jid), id)) {
            json_object_array_del_idx(vars, i, 1);
            return;
        }
    }
}

/* Drop the body's JSON nodes flagged in drop[] (by the parsed node's
 * position, which attrs_copy made the JSON's). */
static int body_drop_nodes(json_object *body, const scan_io *s, const bool *drop) {
    json_object *nodes = jget(body, "nodes"), *kept = json_object_new_array();
    if (!kept) return TG_ENOMEM;
    size_t len = json_object_array_length(nodes);
    bool *gone = tg_calloc(len + 1, sizeof *gone);
    if (!gone) {
        json_object_put(kept);
        return TG_ENOMEM;
    }
    for (int i = 0; i < s->bg->nnodes && (size_t)i < len; i++) gone[i] = drop[i];
    for (size_t j = 0; j < len; j++)
        if (!gone[j]) json_object_array_add(kept, json_object_get(json_object_array_get_idx(nodes, j)));
    tg_free(gone);
    json_object_object_add(body, "nodes", kept);
    return TG_OK;
}

/* The scan node for `attrs` over `in` (nin inputs, nout outputs); NULL
 * with the error on the context. */
static tg_node *scan_build(tg_rw *rw, json_object *attrs, int nin, tg_var *const *in, int nout) {
    return tg_rw_node_json(rw, &tg_op_scan, nin, in, attrs, nout);
}

static int err_status(tg_rw *rw) {
    tg_ctx *ctx = tg_rw_ctx(rw);
    return ctx && ctx->status ? ctx->status : TG_ENOMEM;
}

/* Replace n's output k by m's output map[k] (map NULL: the same k). */
static int replace_outputs(tg_rw *rw, tg_node *n, tg_node *m, const int *map) {
    for (int k = 0; k < n->nout; k++) {
        if (!n->outputs[k]->nclients) continue;
        int rc = tg_rw_replace(rw, n->outputs[k], m->outputs[map ? map[k] : k]);
        if (rc) return rc;
    }
    return TG_OK;
}

/* Build and swap in: 1 (applied) or an error. */
static int scan_swap(tg_rw *rw, tg_node *n, json_object *attrs, int nin, tg_var *const *in) {
    tg_node *m = scan_build(rw, attrs, nin, in, n->nout);
    if (!m) return err_status(rw);
    int rc = replace_outputs(rw, n, m, NULL);
    return rc ? rc : 1;
}

/* The outer variable standing for body constant c (a new constant). */
static tg_var *outer_const(tg_rw *rw, const tg_var *c) {
    return tg_rw_const_array(rw, tg_array_ref(c->value));
}

/* Errors of node m, which a rewrite built outside scan n from body node
 * bn, name bn as the run of the loop as written does ("nodes[0] (scan
 * 'loop' -> ps): step 0, in the body: nodes[1] (int_div 'chk' -> q)"),
 * `where` saying how it left the loop; bn's place in the body only when
 * the body is the file's (a rewrite that edited it renumbered its
 * nodes). */
static int moved_out(tg_rw *rw, tg_node *m, const tg_node *n, const char *where, const tg_node *bn) {
    if (!tg_node_moved_from(m, n, where, bn, n->json_index >= 0)) return TG_OK;
    tg_errorf(tg_rw_ctx(rw), TG_ENOMEM, "out of memory while optimizing");
    return TG_ENOMEM;
}

/* Rebuild body node bn of scan n outside over outer[] (indexed by body
 * variable index; constants are made on demand); its outputs go into
 * outer[]. `where`: for its errors (moved_out). */
static int rebuild(tg_rw *rw, const tg_node *n, const tg_node *bn, tg_var **outer, const char *where) {
    tg_var *in[64], **ins = in;
    int rc = TG_OK;
    if (bn->nin > 64 && !(ins = tg_calloc((size_t)bn->nin, sizeof *ins))) return TG_ENOMEM;
    for (int i = 0; i < bn->nin; i++) {
        tg_var *u = bn->inputs[i];
        if (!outer[u->index] && u->kind == TG_VAR_CONSTANT && u->value)
            outer[u->index] = outer_const(rw, u);
        if (!(ins[i] = outer[u->index])) {
            rc = TG_ENOMEM;
            goto done;
        }
    }
    tg_node *m = tg_rw_node_json(rw, bn->op, bn->nin, ins, bn->attrs, bn->nout);
    if (!m) {
        tg_ctx *ctx = tg_rw_ctx(rw);
        rc = ctx && ctx->status ? ctx->status : TG_ENOMEM;
        goto done;
    }
    for (int k = 0; k < bn->nout && k < m->nout; k++) outer[bn->outputs[k]->index] = m->outputs[k];
    rc = moved_out(rw, m, n, where, bn);
done:
    if (ins != in) tg_free(ins);
    return rc;
}

/* Ops whose value is the same whenever their inputs are: everything but
 * side effects (print, assert, breakpoint, or an op_from_graph or scan
 * whose body holds one: tg_rw_has_effect) and the random generators. */
static bool pure(const tg_node *bn) {
    return !(bn->op->flags & TG_OPF_DERIVED) && !tg_rw_has_effect(bn) &&
           strncmp(bn->op->name, "random_", 7) != 0;
}

/* ---- scan_hoist ---- */

/* Whether the loop runs at least one step whatever the inputs: n_steps a
 * constant of 1 or more (a sequence too short for it fails the call
 * either way), or, without n_steps, every sequence known to have a row
 * more than its taps span. */
static bool runs_a_step(const tg_node *n, const scan_io *s) {
    scan_p *p = s->p;
    if (p->has_n) {
        const tg_var *ns = n->inputs[0];
        return ns->kind == TG_VAR_CONSTANT && ns->value && tg_array_size(ns->value) == 1 &&
               tg_array_get_flat(ns->value, 0) >= 1;
    }
    if (p->nseq < 1) return false;
    for (int i = 0; i < p->nseq; i++) {
        const tg_type *t = &n->inputs[s->base_seq + i]->type;
        if (t->ndim < 1 || t->shape[0] < 0 || t->shape[0] - p->seq_span[i] < 1) return false;
    }
    return true;
}

static int scan_hoist(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    tg_graph *bg = s.bg;
    int nv = bg->nvars, nn = bg->nnodes, rc = 0;
    bool *inv = tg_calloc((size_t)nv + 1, sizeof *inv), *hoist = tg_calloc((size_t)nn + 1, sizeof *hoist);
    bool *read_in = tg_calloc((size_t)nv + 1, sizeof *read_in);
    bool *made_here = tg_calloc((size_t)nv + 1, sizeof *made_here); /* a hoisted node's result */
    int *rem = NULL;
    tg_var **outer = tg_calloc((size_t)nv + 1, sizeof *outer);
    tg_var **ins = NULL;
    json_object *attrs = NULL;
    if (!inv || !hoist || !read_in || !made_here || !outer) {
        rc = TG_ENOMEM;
        goto done;
    }
    for (int k = 0; k < s.p->nns; k++) {
        tg_var *v = s.fd->inputs[tg_scan_bin_ns(s.p, k)];
        inv[v->index] = true;
        outer[v->index] = n->inputs[s.base_ns + k];
    }
    for (int i = 0; i < nv; i++)
        if (bg->vars[i]->kind == TG_VAR_CONSTANT) inv[i] = true;
    /* eager[v]: every step computes v, whatever an ifelse picks (some path
     * to the body's outputs avoids the branches of the lazy ifelse nodes).
     * A node needed only under a branch stays: outside, it would run on
     * every call, and raise what the untaken branch never would (an
     * integer division by zero, the cholesky of a matrix that is not
     * positive definite). The read_in scratch holds it. */
    bool *eager = read_in;
    bool more = true;
    for (int o = 0; o < s.fd->nout; o++) eager[s.fd->outputs[o]->index] = true;
    /* Consumers first (the body's nodes are in topological order), so
     * that one sweep carries the need down a chain: a forward sweep
     * carried it one node per sweep, quadratic in a long body (a body
     * chain of 20,000 nodes took 1.8 s). */
    while (more) {
        more = false;
        for (int i = nn - 1; i >= 0; i--) {
            tg_node *bn = bg->nodes[i];
            bool need = false, lazy = (bn->op->flags & TG_OPF_LAZY) != 0;
            for (int k = 0; k < bn->nout; k++) need |= eager[bn->outputs[k]->index];
            if (!need || hoist[i]) continue;
            hoist[i] = true; /* scratch: node i is needed every step */
            more = true;
            for (int k = 0; k < bn->nin; k++)
                if (!lazy || k == 0) eager[bn->inputs[k]->index] = true;
        }
    }
    /* rem[v]: the reads of v by nodes that stay (so far). A hoisted
     * result that something left in the body reads becomes a
     * non-sequence, and a scan holds at most SCAN_MAX_IO: a node whose
     * results would pass that stays (and so do the nodes that read it). */
    if (!(rem = tg_calloc((size_t)nv + 1, sizeof *rem))) {
        rc = TG_ENOMEM;
        goto done;
    }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < bg->nodes[i]->nin; k++) rem[bg->nodes[i]->inputs[k]->index]++;
    int nh = 0, live = 0, room = SCAN_MAX_IO - s.p->nns;
    bool steps = runs_a_step(n, &s);
    for (int i = 0; i < nn; i++) {
        tg_node *bn = bg->nodes[i];
        bool ok = hoist[i] && pure(bn) && bn->nin > 0;
        hoist[i] = false;
        for (int k = 0; ok && k < bn->nin; k++) ok = inv[bn->inputs[k]->index];
        for (int k = 0; ok && k < bn->nout; k++) ok = !is_body_output(&s, bn->outputs[k]);
        /* Constants alone: constant folding's work, in the body. */
        bool all_const = true;
        for (int k = 0; k < bn->nin; k++) all_const &= bn->inputs[k]->kind == TG_VAR_CONSTANT;
        if (!ok || all_const) continue;
        /* Inside, the node runs at each step, outside once per call: the
         * same check when the loop surely runs a step. After 0 steps the
         * loop gave its empty outputs where the node outside could fail
         * (x // d with d = 0, the cholesky of a matrix not positive
         * definite, lengths that may not broadcast). */
        if (!steps && tg_rw_node_may_fail(bn)) continue;
        int freed = 0, made = 0;
        for (int k = 0; k < bn->nin; k++) {
            tg_var *u = bn->inputs[k];
            if (u->owner && made_here[u->index] && --rem[u->index] == 0) freed++;
        }
        for (int k = 0; k < bn->nout; k++) made += rem[bn->outputs[k]->index] > 0;
        if (live + made - freed > room) {
            for (int k = 0; k < bn->nin; k++)
                if (bn->inputs[k]->owner && made_here[bn->inputs[k]->index]) rem[bn->inputs[k]->index]++;
            continue;
        }
        live += made - freed;
        hoist[i] = true;
        nh++;
        for (int k = 0; k < bn->nout; k++) inv[bn->outputs[k]->index] = made_here[bn->outputs[k]->index] = true;
    }
    if (!nh) goto done;
    /* What stays in the body reads which hoisted results? */
    memset(read_in, 0, sizeof *read_in * (size_t)nv);
    for (int i = 0; i < nn; i++)
        if (!hoist[i])
            for (int k = 0; k < bg->nodes[i]->nin; k++) read_in[bg->nodes[i]->inputs[k]->index] = true;
    for (int i = 0; i < nn; i++)
        if (hoist[i] && (rc = rebuild(rw, n, bg->nodes[i], outer, "in the body, hoisted out of the loop")))
            goto done;
    if (!(attrs = attrs_copy(n))) {
        rc = TG_ENOMEM;
        goto done;
    }
    json_object *body = jget(attrs, "body");
    if ((rc = body_drop_nodes(body, &s, hoist))) goto done;
    int nnew = 0;
    ins = tg_calloc((size_t)(n->nin + nv) + 1, sizeof *ins);
    if (!ins) {
        rc = TG_ENOMEM;
        goto done;
    }
    memcpy(ins, n->inputs, sizeof *ins * (size_t)n->nin);
    for (int i = 0; i < nn; i++) {
        if (!hoist[i]) continue;
        tg_node *bn = bg->nodes[i];
        for (int k = 0; k < bn->nout; k++) {
            tg_var *v = bn->outputs[k];
            if (!read_in[v->index]) continue;
            if ((rc = body_declare(body, v->id, &v->type)) ||
                (rc = arr_insert(body, "inputs", json_object_array_length(jget(body, "inputs")),
                                 json_object_new_string(v->id))))
                goto done;
            ins[n->nin + nnew++] = outer[v->index];
        }
    }
    set_int(attrs, "n_non_sequences", s.p->nns + nnew);
    rc = scan_swap(rw, n, attrs, n->nin + nnew, ins);
done:
    json_object_put(attrs);
    tg_free(inv);
    tg_free(hoist);
    tg_free(read_in);
    tg_free(made_here);
    tg_free(rem);
    tg_free(outer);
    tg_free(ins);
    return rc;
}

/* ---- scan_push_seq ---- */

/* A body node that could fail the call on a row the loop never gives it
 * stays in the loop (tg_rw_may_raise): integer int_div and mod (a zero
 * divisor), integer pow (a negative exponent), unless the operand that
 * would fail is a constant without such a value; a composite of the file
 * that holds one of them. Moved out, it would run on every row of the
 * sequence: those past an until stop, past n_steps or a shorter sequence,
 * and those of steps whose lazy ifelse never takes its branch
 * (ifelse(x_t != 0, k // x_t, -1) failed with fast_run, and gave its
 * values with -O none). It stays in the body, where only the steps and
 * branches that run reach it. So does one whose shapes may not fit
 * (tg_rw_node_may_fail) in a loop that may run no step (runs_a_step). */

/* The outer form of body node bn applied to every row of sequence S
 * (the operand at `at`; the others are outer invariants in `o`). */
static tg_var *push_build(tg_rw *rw, const tg_node *bn, int at, tg_var **o) {
    if (bn->op->flags & TG_OPF_ELEMWISE) return tg_rw_op_json(rw, bn->op, bn->nin, o, bn->attrs);
    /* dot / matmul of the row and an invariant c of at most 2 dims. */
    tg_var *S = o[at], *c = o[1 - at];
    int sd = bn->inputs[at]->type.ndim;
    if (at == 0) return tg_rw_op2(rw, "matmul", S, c);
    if (sd == 1) /* c . s_t for each row: S . c^T */
        return c->type.ndim == 2 ? tg_rw_op2(rw, "dot", S, tg_rw_op1(rw, "transpose", c, NULL))
                                 : tg_rw_op2(rw, "dot", S, c);
    return tg_rw_op2(rw, "matmul", c, S);
}

/* Every body node that can run over a whole sequence outside moves out
 * in one application, in topological order, so that a chain of them goes
 * at once (Theano's PushOutSeqScan does the same): one at a time, each
 * move rebuilt the scan, quadratic in the body (a chain of 1,000
 * elementwise nodes over a sequence took 6.5 s to compile, 4,000 took
 * 165 s). A moved node's result becomes a new sequence at the tap of the
 * sequence it read when something left in the body reads it. The scan's
 * limits (SCAN_MAX_IO taps and sequences) bound how many there can be:
 * a node that would pass them stays. */
static int scan_push_seq(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    tg_graph *bg = s.bg;
    scan_p *p = s.p;
    int nv = bg->nvars, nn = bg->nnodes, rc = 0;
    /* ent[v]: the sequence body variable v is the only tap of: 1 + an
     * original sequence's index, or 1 + p->nseq + a new one's; 0: none.
     * A sequence read at one tap q gives step t its row t + max(q, 0)
     * (read from the end with go_backwards): any array of the same
     * length read at the same tap gives the same rows. */
    int *ent = tg_calloc((size_t)nv + 1, sizeof *ent), *rem = tg_calloc((size_t)nv + 1, sizeof *rem);
    bool *pushed = tg_calloc((size_t)nn + 1, sizeof *pushed);
    tg_var **newR = tg_calloc((size_t)nn + 1, sizeof *newR), **newv = tg_calloc((size_t)nn + 1, sizeof *newv);
    int *neworig = tg_calloc((size_t)nn + 1, sizeof *neworig);
    tg_var **ins = NULL;
    json_object *attrs = NULL;
    if (!ent || !rem || !pushed || !newR || !newv || !neworig) {
        rc = TG_ENOMEM;
        goto done;
    }
    for (int i = 0; i < p->nseq; i++)
        if (p->seq_ntaps[i] == 1) ent[s.fd->inputs[tg_scan_bin_seq(p, i, 0)]->index] = 1 + i;
    /* rem[v]: the reads of v by nodes that stay (so far). */
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < bg->nodes[i]->nin; k++) rem[bg->nodes[i]->inputs[k]->index]++;
    int taps = 0;
    for (int i = 0; i < p->nseq; i++) taps += p->seq_ntaps[i];
    for (int j = 0; j < p->nrec; j++) taps += p->out_ntaps[j];
    int room = SCAN_MAX_IO - taps < SCAN_MAX_IO - p->nseq ? SCAN_MAX_IO - taps : SCAN_MAX_IO - p->nseq;
    int nnew = 0, live = 0, npushed = 0;
    bool steps = runs_a_step(n, &s);
    for (int i = 0; i < nn; i++) {
        tg_node *bn = bg->nodes[i];
        bool ew = (bn->op->flags & TG_OPF_ELEMWISE) != 0;
        bool prod = !strcmp(bn->op->name, "dot") || !strcmp(bn->op->name, "matmul");
        if ((!ew && !prod) || !pure(bn) || bn->nout != 1 || bn->nin > 16 ||
            is_body_output(&s, bn->outputs[0]) || !rem[bn->outputs[0]->index] || tg_rw_may_raise(bn))
            continue;
        int seq = 0, at = -1;
        bool ok = true;
        for (int k = 0; ok && k < bn->nin; k++) {
            tg_var *u = bn->inputs[k];
            int e = ent[u->index];
            if (e) {
                ok = !seq || seq == e;
                seq = e;
                at = k;
            } else {
                ok = u->kind == TG_VAR_CONSTANT || ns_index(&s, u) >= 0;
            }
        }
        if (!ok || !seq) continue;
        const tg_type *ot = &bn->outputs[0]->type;
        if (ew) {
            /* The row must span the result, so that the whole sequence
             * only puts the steps in front. */
            for (int k = 0; ok && k < bn->nin; k++)
                ok = ent[bn->inputs[k]->index] == seq ? bn->inputs[k]->type.ndim == ot->ndim
                                                       : bn->inputs[k]->type.ndim <= ot->ndim;
        } else {
            if (bn->nin != 2 || bn->inputs[0] == bn->inputs[1]) continue;
            int cd = bn->inputs[1 - at]->type.ndim, sd = bn->inputs[at]->type.ndim;
            ok = cd >= 1 && cd <= 2 && sd >= 1 && (sd <= 2 || !strcmp(bn->op->name, "matmul"));
        }
        /* Every step meets the same shapes (a sequence's rows all have
         * one): the loop fails at its first step where the node outside
         * would. But after 0 steps it combined nothing and gave its empty
         * outputs, where the node outside fails on lengths that may not
         * broadcast or a contracted axis not known on both sides ("shapes
         * (0, 3) and (4,) do not broadcast"). (tg_rw_may_raise was asked
         * above.) */
        if (!ok || (!steps && tg_rw_node_may_fail(bn))) continue;
        /* Room for its result as a new sequence, less the new ones whose
         * last reader it is. */
        int freed = 0;
        for (int k = 0; k < bn->nin; k++) {
            tg_var *u = bn->inputs[k];
            if (ent[u->index] > p->nseq && --rem[u->index] == 0) freed++;
        }
        if (live + 1 - freed > room) {
            for (int k = 0; k < bn->nin; k++)
                if (ent[bn->inputs[k]->index] > p->nseq) rem[bn->inputs[k]->index]++;
            continue;
        }
        /* Build the outer node. */
        tg_var *o[16];
        tg_var *S = seq <= p->nseq ? n->inputs[s.base_seq + seq - 1] : newR[seq - 1 - p->nseq];
        for (int k = 0; k < bn->nin; k++) {
            tg_var *u = bn->inputs[k];
            if (ent[u->index] == seq)
                o[k] = S;
            else if (u->kind == TG_VAR_CONSTANT)
                o[k] = outer_const(rw, u);
            else
                o[k] = n->inputs[s.base_ns + ns_index(&s, u)];
            if (!o[k]) {
                rc = TG_ENOMEM;
                goto done;
            }
        }
        tg_var *R = push_build(rw, bn, at, o);
        if (!R) {
            tg_ctx *ctx = tg_rw_ctx(rw);
            rc = ctx && ctx->status ? ctx->status : TG_ENOMEM;
            goto done;
        }
        if ((rc = moved_out(rw, R->owner, n, "in the body, applied to the rows of every step at once", bn)))
            goto done;
        /* R must be the stack of the body value's rows. */
        tg_type rowt = R->type;
        bool fits = rowt.ndim == ot->ndim + 1 && rowt.dtype == ot->dtype;
        if (fits) {
            rowt.ndim--;
            memmove(rowt.shape, rowt.shape + 1, sizeof(int64_t) * (size_t)rowt.ndim);
            fits = tg_type_compatible(&rowt, ot);
        }
        if (!fits) {
            for (int k = 0; k < bn->nin; k++)
                if (ent[bn->inputs[k]->index] > p->nseq) rem[bn->inputs[k]->index]++;
            continue;
        }
        pushed[i] = true;
        npushed++;
        for (int k = 0; k < bn->nin; k++)
            if (ent[bn->inputs[k]->index] <= p->nseq) rem[bn->inputs[k]->index]--;
        live += 1 - freed;
        newR[nnew] = R;
        newv[nnew] = bn->outputs[0];
        neworig[nnew] = seq <= p->nseq ? seq - 1 : neworig[seq - 1 - p->nseq];
        ent[bn->outputs[0]->index] = 1 + p->nseq + nnew++;
    }
    if (!npushed) goto done;

    /* The new scan: the original sequences that something still reads
     * (or whose n_steps length check could fail: it then stays, unread,
     * so that a too short one gets the scan's error naming it, unless it
     * derives from an earlier sequence whose check comes first), then the
     * new ones that something reads, in the order they were made. */
    if (!(attrs = attrs_copy(n)) || !(ins = tg_calloc((size_t)(n->nin + nnew) + 1, sizeof *ins))) {
        rc = TG_ENOMEM;
        goto done;
    }
    json_object *body = jget(attrs, "body"), *oldin = jget(body, "inputs"), *oldtaps = jget(attrs, "sequence_taps");
    json_object *bin = json_object_new_array(), *stap = json_object_new_array(), *gone = json_object_new_object();
    if (!bin || !stap || !gone) {
        json_object_put(bin);
        json_object_put(stap);
        json_object_put(gone);
        rc = TG_ENOMEM;
        goto done;
    }
    int nin = 0, nseq = 0;
    for (int k = 0; k < s.base_seq; k++) ins[nin++] = n->inputs[k];
    for (int i = 0; i < p->nseq; i++) {
        bool keep = p->seq_ntaps[i] != 1;
        if (!keep) {
            tg_var *row = s.fd->inputs[tg_scan_bin_seq(p, i, 0)];
            /* Without n_steps the shortest sequence gives the steps: one
             * goes only where a new sequence made from it (its rows) stays,
             * not because nothing reads it (a sequence the body never read
             * had gone, and the steps with it: random_graphs scan
             * 20300429). */
            bool replaced = p->has_n;
            for (int j = 0; j < nnew && !replaced; j++) replaced = neworig[j] == i && rem[newv[j]->index] > 0;
            keep = is_body_output(&s, row) || rem[row->index] > 0 || !replaced ||
                   (!seq_long_enough(n, &s, i) && !seq_derived(n, &s, i));
            if (!keep) json_object_object_add(gone, row->id, NULL);
        }
        if (!keep) continue;
        ins[nin++] = n->inputs[s.base_seq + i];
        nseq++;
        json_object_array_add(stap, json_object_get(json_object_array_get_idx(oldtaps, (size_t)i)));
        for (int q = 0; q < p->seq_ntaps[i]; q++)
            json_object_array_add(bin, json_object_get(json_object_array_get_idx(oldin, (size_t)tg_scan_bin_seq(p, i, q))));
    }
    for (int j = 0; j < nnew; j++) {
        if (!rem[newv[j]->index]) {
            json_object_object_add(gone, newv[j]->id, NULL);
            continue;
        }
        if ((rc = body_declare(body, newv[j]->id, &newv[j]->type))) break;
        json_object *tap = json_object_new_array();
        json_object_array_add(tap, json_object_new_int(p->taps[p->seq_off[neworig[j]]]));
        json_object_array_add(stap, tap);
        json_object_array_add(bin, json_object_new_string(newv[j]->id));
        ins[nin++] = newR[j];
        nseq++;
    }
    int nseq_taps = 0;
    for (int i = 0; i < p->nseq; i++) nseq_taps += p->seq_ntaps[i];
    for (size_t b = (size_t)nseq_taps; b < json_object_array_length(oldin); b++)
        json_object_array_add(bin, json_object_get(json_object_array_get_idx(oldin, b)));
    for (int k = s.base_init; k < n->nin; k++) ins[nin++] = n->inputs[k];
    json_object_object_add(body, "inputs", bin);
    json_object_object_add(attrs, "sequence_taps", stap);
    /* The moved nodes go; so do the variables no longer made or read. */
    json_object *vars = jget(body, "variables"), *kept = json_object_new_array();
    for (size_t i = 0; !rc && kept && vars && i < json_object_array_length(vars); i++) {
        json_object *e = json_object_array_get_idx(vars, i), *jid = jget(e, "id");
        if (!jid || !json_object_object_get_ex(gone, json_object_get_string(jid), NULL))
            json_object_array_add(kept, json_object_get(e));
    }
    json_object_put(gone);
    if (!kept) rc = TG_ENOMEM;
    if (rc) {
        json_object_put(kept);
        goto done;
    }
    json_object_object_add(body, "variables", kept);
    if ((rc = body_drop_nodes(body, &s, pushed))) goto done;
    set_int(attrs, "n_sequences", nseq);
    rc = scan_swap(rw, n, attrs, nin, ins);
done:
    json_object_put(attrs);
    tg_free(ent);
    tg_free(rem);
    tg_free(pushed);
    tg_free(newR);
    tg_free(newv);
    tg_free(neworig);
    tg_free(ins);
    return rc;
}

/* ---- scan_keep_last ---- */

/* How many last steps a subtensor of a stacked output reads: k for
 * out[-k, ...] and out[-k:, ...], else 0 (it needs them all; so for an
 * index as negative as INT64_MIN, which -k cannot hold). */
static int64_t last_steps(const tg_node *c) {
    if (strcmp(c->op->name, "subtensor") != 0 || c->a.nindex < 1) return 0;
    const tg_index_entry *e = &c->a.index[0];
    if (e->v[0] == INT64_MIN) return 0;
    if (!e->is_slice) return e->dyn[0] < 0 && e->v[0] < 0 ? -e->v[0] : 0;
    if (!e->given[0] || e->dyn[0] >= 0 || e->v[0] >= 0 || e->given[1]) return 0;
    if (e->given[2] && (e->dyn[2] >= 0 || e->v[2] != 1)) return 0;
    return -e->v[0];
}

static int scan_keep_last(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    int no = n->nout;
    int64_t keep[SCAN_MAX_IO];
    bool change = false;
    for (int o = 0; o < no; o++) {
        tg_var *v = n->outputs[o];
        int64_t k = v->nclients ? 0 : 1;
        for (int c = 0; c < v->nclients && v->nclients <= 64; c++) {
            int64_t kc = v->clients[c].node && v->clients[c].index == 0 ? last_steps(v->clients[c].node) : 0;
            if (!kc) {
                k = 0;
                break;
            }
            if (kc > k) k = kc;
        }
        /* Useless when every step fits anyway. */
        if (k && v->type.shape[0] >= 0 && k >= v->type.shape[0]) k = 0;
        int64_t cur = s.p->keep[o];
        keep[o] = cur && (!k || cur < k) ? cur : k;
        change |= keep[o] != cur;
    }
    if (!change) return 0;
    json_object *attrs = attrs_copy(n), *jk = json_object_new_array();
    int rc = TG_OK;
    if (!attrs || !jk) {
        json_object_put(jk);
        rc = TG_ENOMEM;
        goto done;
    }
    for (int o = 0; o < no; o++) json_object_array_add(jk, json_object_new_int64(keep[o]));
    json_object_object_add(attrs, "keep_last", jk);
    tg_node *m = scan_build(rw, attrs, n->nin, n->inputs, no);
    if (!m) {
        tg_ctx *ctx = tg_rw_ctx(rw);
        rc = ctx && ctx->status ? ctx->status : TG_ENOMEM;
        goto done;
    }
    for (int o = 0; o < no && !rc; o++) {
        tg_var *v = n->outputs[o];
        if (keep[o] == s.p->keep[o]) {
            if (v->nclients) rc = tg_rw_replace(rw, v, m->outputs[o]);
            continue;
        }
        /* Each reader reads the same rows of the kept ones. Copied first:
         * replacing changes v's reader list. */
        int nc = v->nclients; /* at most 64 (above) */
        tg_node *rd[64];
        for (int c = 0; c < nc; c++) rd[c] = v->clients[c].node;
        for (int c = 0; c < nc && !rc; c++) {
            tg_node *sub = rd[c];
            tg_var *in[TG_MAX_NDIM * 3 + 1]; /* x and at most 3 parts per index entry */
            in[0] = m->outputs[o];
            for (int k = 1; k < sub->nin; k++) in[k] = sub->inputs[k];
            tg_var *r = tg_rw_op_json(rw, sub->op, sub->nin, in, sub->attrs);
            if (!r || tg_rw_match(rw, sub)) {
                tg_ctx *ctx = tg_rw_ctx(rw);
                rc = ctx && ctx->status ? ctx->status : TG_ENOMEM;
                goto done;
            }
            rc = tg_rw_replace(rw, sub->outputs[0], r);
        }
    }
    if (!rc) rc = 1;
done:
    json_object_put(attrs);
    return rc;
}

/* ---- scan_merge ---- */

/* Is `target` among the nodes `from` depends on? A walk back over the
 * graph; visited nodes are listed to clear their marks. */
static int depends_on(tg_node *from, tg_node *target, bool *out) {
    int cap = 64, sp = 0, nvis = 0, vcap = 64;
    tg_node **stack = tg_malloc(sizeof *stack * (size_t)cap), **vis = tg_malloc(sizeof *vis * (size_t)vcap);
    static char token;
    *out = false;
    if (!stack || !vis) {
        tg_free(stack);
        tg_free(vis);
        return TG_ENOMEM;
    }
    int rc = TG_OK;
    stack[sp++] = from;
    while (sp && !*out) {
        tg_node *d = stack[--sp];
        for (int k = 0; k < d->nin; k++) {
            tg_node *p = d->inputs[k]->owner;
            if (!p || p->mark == &token) continue;
            if (p == target) {
                *out = true;
                break;
            }
            if (nvis == vcap || sp == cap) {
                int nc = cap * 2;
                tg_node **a = tg_realloc(stack, sizeof *a * (size_t)nc);
                if (!a) {
                    rc = TG_ENOMEM;
                    goto done;
                }
                stack = a;
                cap = nc;
                tg_node **b = tg_realloc(vis, sizeof *b * (size_t)nc);
                if (!b) {
                    rc = TG_ENOMEM;
                    goto done;
                }
                vis = b;
                vcap = nc;
            }
            p->mark = &token;
            vis[nvis++] = p;
            stack[sp++] = p;
        }
    }
done:
    for (int i = 0; i < nvis; i++) vis[i]->mark = NULL;
    tg_free(stack);
    tg_free(vis);
    return rc;
}

static bool same_json(json_object *a, json_object *b) {
    if (!a || !b) return a == b;
    return !strcmp(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN),
                   json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN));
}

static bool mergeable(tg_node *a, tg_node *b) {
    scan_p *p = a->a.extra, *q = b->a.extra;
    if (!p || !q || a == b || tg_rw_dead(b) || b->op != a->op) return false;
    if (p->has_until || q->has_until || p->has_n != q->has_n || p->backwards != q->backwards ||
        p->trunc != q->trunc)
        return false;
    /* The merged scan within the limits its parse checks (ops/scan.c):
     * outputs and the until slot, sequences, non-sequences, taps. */
    if (p->nrec + q->nrec + p->nnr + q->nnr + 1 > SCAN_MAX_IO || a->nin + b->nin > SCAN_MAX_IO ||
        p->nseq + q->nseq > SCAN_MAX_IO || p->nns + q->nns > SCAN_MAX_IO)
        return false;
    int taps = 0;
    for (int i = 0; i < p->nseq + p->nrec; i++) taps += p->seq_ntaps[i];
    for (int i = 0; i < q->nseq + q->nrec; i++) taps += q->seq_ntaps[i];
    if (taps > SCAN_MAX_IO) return false;
    if (p->has_n) return a->inputs[0] == b->inputs[0];
    /* The same sequences with the same taps: the same number of steps. */
    if (p->nseq != q->nseq || p->nseq == 0) return false;
    for (int i = 0; i < p->nseq; i++)
        if (a->inputs[i] != b->inputs[i]) return false;
    return same_json(jget(a->attrs, "sequence_taps"), jget(b->attrs, "sequence_taps"));
}

/* The ids a body JSON defines (declared variables and node outputs), as
 * the keys of a new object. */
static json_object *body_ids(json_object *body) {
    json_object *ids = json_object_new_object();
    json_object *vars = jget(body, "variables"), *nodes = jget(body, "nodes");
    for (size_t i = 0; ids && vars && i < json_object_array_length(vars); i++) {
        json_object *id = jget(json_object_array_get_idx(vars, i), "id");
        if (id) json_object_object_add(ids, json_object_get_string(id), NULL);
    }
    for (size_t i = 0; ids && nodes && i < json_object_array_length(nodes); i++) {
        json_object *outs = jget(json_object_array_get_idx(nodes, i), "outputs");
        for (size_t k = 0; outs && k < json_object_array_length(outs); k++)
            json_object_object_add(ids, json_object_get_string(json_object_array_get_idx(outs, k)), NULL);
    }
    return ids;
}

/* Replace the string at l[k] when `ren` maps it. */
static void rename_at(json_object *l, size_t k, json_object *ren) {
    json_object *cur = json_object_array_get_idx(l, k), *to;
    if (cur && json_object_is_type(cur, json_type_string) &&
        (to = jget(ren, json_object_get_string(cur))))
        json_object_array_put_idx(l, k, json_object_new_string(json_object_get_string(to)));
}

/* Rename in B's body JSON every id that A's body also defines (the two
 * bodies had their own namespaces; the merged one has one). */
static int rename_ids(json_object *ba, json_object *bb) {
    json_object *aids = body_ids(ba), *bids = body_ids(bb), *ren = json_object_new_object();
    int rc = TG_OK, serial = 0;
    if (!aids || !bids || !ren) {
        rc = TG_ENOMEM;
        goto done;
    }
    json_object_object_foreach(bids, id, unused) {
        (void)unused;
        if (!json_object_object_get_ex(aids, id, NULL)) continue;
        char nid[160];
        do
            snprintf(nid, sizeof nid, "%.120s.m%d", id, ++serial);
        while (json_object_object_get_ex(aids, nid, NULL) || json_object_object_get_ex(bids, nid, NULL));
        json_object_object_add(ren, id, json_object_new_string(nid));
        json_object_object_add(aids, nid, NULL);
    }
    json_object *vars = jget(bb, "variables"), *nodes = jget(bb, "nodes");
    for (size_t i = 0; vars && i < json_object_array_length(vars); i++) {
        json_object *e = json_object_array_get_idx(vars, i), *id = jget(e, "id"), *to;
        if (id && (to = jget(ren, json_object_get_string(id))))
            json_object_object_add(e, "id", json_object_new_string(json_object_get_string(to)));
    }
    for (size_t i = 0; nodes && i < json_object_array_length(nodes); i++) {
        json_object *e = json_object_array_get_idx(nodes, i);
        json_object *l[2] = {jget(e, "inputs"), jget(e, "outputs")};
        for (int w = 0; w < 2; w++)
            for (size_t k = 0; l[w] && k < json_object_array_length(l[w]); k++) rename_at(l[w], k, ren);
    }
    json_object *l[2] = {jget(bb, "inputs"), jget(bb, "outputs")};
    for (int w = 0; w < 2; w++)
        for (size_t k = 0; l[w] && k < json_object_array_length(l[w]); k++) rename_at(l[w], k, ren);
done:
    json_object_put(aids);
    json_object_put(bids);
    json_object_put(ren);
    return rc;
}

/* A JSON array of a's items [from, to) then b's [bfrom, bto). */
static json_object *cat(json_object *a, size_t from, size_t to, json_object *b, size_t bfrom, size_t bto) {
    json_object *r = json_object_new_array();
    for (size_t i = from; r && i < to; i++) json_object_array_add(r, json_object_get(json_object_array_get_idx(a, i)));
    for (size_t i = bfrom; r && i < bto; i++) json_object_array_add(r, json_object_get(json_object_array_get_idx(b, i)));
    return r;
}

static int scan_merge(tg_rw *rw, tg_node *n) {
    scan_p *p = n->a.extra;
    if (!p || p->has_until || (!p->has_n && p->nseq == 0)) return 0;
    tg_var *key = n->inputs[0];
    tg_node *m = NULL;
    for (int c = 0; c < key->nclients && !m; c++) {
        tg_node *o = key->clients[c].node;
        if (!o || key->clients[c].index != 0 || !mergeable(n, o)) continue;
        bool d1, d2;
        int rc;
        if ((rc = depends_on(n, o, &d1)) || (rc = depends_on(o, n, &d2))) return rc;
        if (!d1 && !d2) m = o;
    }
    if (!m) return 0;
    scan_p *q = m->a.extra;
    json_object *A = attrs_copy(n), *B = attrs_copy(m);
    tg_var **ins = tg_calloc((size_t)(n->nin + m->nin) + 1, sizeof *ins);
    int *map = tg_calloc((size_t)(n->nout + m->nout) + 1, sizeof *map);
    int rc = TG_OK;
    if (!A || !B || !ins || !map) {
        rc = TG_ENOMEM;
        goto done;
    }
    json_object *ba = jget(A, "body"), *bb = jget(B, "body");
    if ((rc = rename_ids(ba, bb))) goto done;
    int pst = 0, qst = 0, prt = 0, qrt = 0;
    for (int i = 0; i < p->nseq; i++) pst += p->seq_ntaps[i];
    for (int i = 0; i < q->nseq; i++) qst += q->seq_ntaps[i];
    for (int j = 0; j < p->nrec; j++) prt += p->out_ntaps[j];
    for (int j = 0; j < q->nrec; j++) qrt += q->out_ntaps[j];
    json_object *ia = jget(ba, "inputs"), *ib = jget(bb, "inputs"), *oa = jget(ba, "outputs"),
                *ob = jget(bb, "outputs");
    /* Inputs: sequence taps, recurrent taps, non-sequences, A's then B's
     * in each group. */
    json_object *in = json_object_new_array();
    json_object *parts[3][2] = {{cat(ia, 0, (size_t)pst, NULL, 0, 0), cat(ib, 0, (size_t)qst, NULL, 0, 0)},
                                {cat(ia, (size_t)pst, (size_t)(pst + prt), NULL, 0, 0),
                                 cat(ib, (size_t)qst, (size_t)(qst + qrt), NULL, 0, 0)},
                                {cat(ia, (size_t)(pst + prt), (size_t)p->nbin, NULL, 0, 0),
                                 cat(ib, (size_t)(qst + qrt), (size_t)q->nbin, NULL, 0, 0)}};
    for (int g = 0; g < 3; g++)
        for (int w = 0; w < 2; w++) {
            json_object *l = parts[g][w];
            for (size_t k = 0; in && l && k < json_object_array_length(l); k++)
                json_object_array_add(in, json_object_get(json_object_array_get_idx(l, k)));
            json_object_put(l);
        }
    json_object *out = json_object_new_array();
    json_object *rec = cat(oa, 0, (size_t)p->nrec, ob, 0, (size_t)q->nrec);
    json_object *nr = cat(oa, (size_t)p->nrec, (size_t)(p->nrec + p->nnr), ob, (size_t)q->nrec,
                          (size_t)(q->nrec + q->nnr));
    for (size_t k = 0; out && rec && k < json_object_array_length(rec); k++)
        json_object_array_add(out, json_object_get(json_object_array_get_idx(rec, k)));
    for (size_t k = 0; out && nr && k < json_object_array_length(nr); k++)
        json_object_array_add(out, json_object_get(json_object_array_get_idx(nr, k)));
    json_object_put(rec);
    json_object_put(nr);
    json_object *vars = cat(jget(ba, "variables"), 0, json_object_array_length(jget(ba, "variables")),
                            jget(bb, "variables"), 0, json_object_array_length(jget(bb, "variables")));
    json_object *nodes = cat(jget(ba, "nodes"), 0, json_object_array_length(jget(ba, "nodes")),
                             jget(bb, "nodes"), 0, json_object_array_length(jget(bb, "nodes")));
    if (!in || !out || !vars || !nodes) {
        json_object_put(in);
        json_object_put(out);
        json_object_put(vars);
        json_object_put(nodes);
        rc = TG_ENOMEM;
        goto done;
    }
    json_object_object_add(ba, "inputs", in);
    json_object_object_add(ba, "outputs", out);
    json_object_object_add(ba, "variables", vars);
    json_object_object_add(ba, "nodes", nodes);
    json_object *st = jget(A, "sequence_taps"), *st2 = jget(B, "sequence_taps");
    json_object *ot = jget(A, "output_taps"), *ot2 = jget(B, "output_taps");
    json_object_object_add(A, "sequence_taps", cat(st, 0, json_object_array_length(st), st2, 0,
                                                   json_object_array_length(st2)));
    json_object_object_add(A, "output_taps", cat(ot, 0, json_object_array_length(ot), ot2, 0,
                                                 json_object_array_length(ot2)));
    set_int(A, "n_sequences", p->nseq + q->nseq);
    set_int(A, "n_recurrent", p->nrec + q->nrec);
    set_int(A, "n_nonrecurrent", p->nnr + q->nnr);
    set_int(A, "n_non_sequences", p->nns + q->nns);
    if (p->has_keep || q->has_keep) {
        json_object *k = json_object_new_array();
        for (int j = 0; k && j < p->nrec; j++) json_object_array_add(k, json_object_new_int64(p->keep[j]));
        for (int j = 0; k && j < q->nrec; j++) json_object_array_add(k, json_object_new_int64(q->keep[j]));
        for (int j = 0; k && j < p->nnr; j++) json_object_array_add(k, json_object_new_int64(p->keep[p->nrec + j]));
        for (int j = 0; k && j < q->nnr; j++) json_object_array_add(k, json_object_new_int64(q->keep[q->nrec + j]));
        json_object_object_add(A, "keep_last", k);
    }
    /* Outer inputs in the same order. */
    int ni = 0, bp = p->has_n ? 1 : 0;
    if (p->has_n) ins[ni++] = n->inputs[0];
    for (int i = 0; i < p->nseq; i++) ins[ni++] = n->inputs[bp + i];
    for (int i = 0; i < q->nseq; i++) ins[ni++] = m->inputs[bp + i];
    for (int j = 0; j < p->nrec; j++) ins[ni++] = n->inputs[bp + p->nseq + j];
    for (int j = 0; j < q->nrec; j++) ins[ni++] = m->inputs[bp + q->nseq + j];
    for (int k = 0; k < p->nns; k++) ins[ni++] = n->inputs[bp + p->nseq + p->nrec + k];
    for (int k = 0; k < q->nns; k++) ins[ni++] = m->inputs[bp + q->nseq + q->nrec + k];
    int nout = n->nout + m->nout;
    for (int j = 0; j < p->nrec; j++) map[j] = j;
    for (int k = 0; k < p->nnr; k++) map[p->nrec + k] = p->nrec + q->nrec + k;
    int *mapb = map + n->nout;
    for (int j = 0; j < q->nrec; j++) mapb[j] = p->nrec + j;
    for (int k = 0; k < q->nnr; k++) mapb[q->nrec + k] = p->nrec + q->nrec + p->nnr + k;
    tg_node *merged = scan_build(rw, A, ni, ins, nout);
    if (!merged) {
        rc = err_status(rw);
        goto done;
    }
    if ((rc = tg_rw_match(rw, m)) || (rc = replace_outputs(rw, n, merged, map)) ||
        (rc = replace_outputs(rw, m, merged, mapb)))
        goto done;
    rc = 1;
done:
    json_object_put(A);
    json_object_put(B);
    tg_free(ins);
    tg_free(map);
    return rc;
}

/* ---- scan_inline ---- */

/* x[i] (an integer index on the leading axis). */
static tg_var *row_of(tg_rw *rw, tg_var *x, int64_t i) {
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"index\": [%lld]}", (long long)i);
    return tg_rw_op1(rw, "subtensor", x, attrs);
}

static int scan_inline(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    tg_var *ns = p->has_n ? n->inputs[0] : NULL;
    if (!ns || ns->kind != TG_VAR_CONSTANT || !ns->value || tg_array_size(ns->value) != 1 ||
        tg_array_get_flat(ns->value, 0) != 1)
        return 0;
    /* The scan checks its inputs' rows at run time; the rows read here
     * would not: an initial state of more rows than the taps reach back
     * (3 rows for taps [-2, -1]) gave its rows 1 and 2 instead of an
     * error. Each initial state read by rows must have exactly the rows
     * its taps reach, statically. Each sequence must be known, statically,
     * to have the span + 1 rows the step reads: one too short, or of
     * unknown length, keeps the scan, whose error names it and the
     * numbers (rows out of range would say only that, and a sequence of
     * 1 row for taps [-2] would give its row 0 as x[t-2]). */
    for (int j = 0; j < p->nrec; j++) {
        const tg_type *t = &n->inputs[s.base_init + j]->type;
        if (!p->out_flat[j] && (t->ndim < 1 || t->shape[0] != p->out_k[j])) return 0;
    }
    for (int i = 0; i < p->nseq; i++)
        if (!seq_long_enough(n, &s, i)) return 0;
    tg_graph *bg = s.bg;
    tg_var **outer = tg_calloc((size_t)bg->nvars + 1, sizeof *outer);
    int rc = TG_OK;
    if (!outer) return TG_ENOMEM;
    /* Step 0's inputs: the sequences' rows, the initial states' rows by
     * tap, the non-sequences. */
    for (int i = 0; i < p->nseq; i++) {
        tg_var *S = n->inputs[s.base_seq + i];
        for (int q = 0; q < p->seq_ntaps[i]; q++) {
            int64_t r = -p->seq_min[i] + p->taps[p->seq_off[i] + q];
            tg_var *v = row_of(rw, S, p->backwards ? -(r + 1) : r);
            if (!v) goto fail;
            outer[s.fd->inputs[tg_scan_bin_seq(p, i, q)]->index] = v;
        }
    }
    for (int j = 0; j < p->nrec; j++) {
        tg_var *init = n->inputs[s.base_init + j];
        for (int q = 0; q < p->out_ntaps[j]; q++) {
            tg_var *v = p->out_flat[j] ? init : row_of(rw, init, p->out_k[j] + p->taps[p->out_off[j] + q]);
            if (!v) goto fail;
            outer[s.fd->inputs[tg_scan_bin_rec(p, j, q)]->index] = v;
        }
    }
    for (int k = 0; k < p->nns; k++) outer[s.fd->inputs[tg_scan_bin_ns(p, k)]->index] = n->inputs[s.base_ns + k];
    for (int i = 0; i < bg->nnodes; i++)
        if ((rc = rebuild(rw, n, bg->nodes[i], outer, "step 0, in the body"))) goto done;
    /* Each output: its one step, stacked. */
    for (int o = 0; o < p->nrec + p->nnr; o++) {
        if (!n->outputs[o]->nclients) continue;
        tg_var *bo = s.fd->outputs[o];
        tg_var *v = outer[bo->index];
        if (!v && bo->kind == TG_VAR_CONSTANT) v = outer[bo->index] = outer_const(rw, bo);
        tg_var *st = v ? tg_rw_op1(rw, "expand_dims", v, "{\"axis\": 0}") : NULL;
        if (!st) goto fail;
        if ((rc = tg_rw_replace(rw, n->outputs[o], st))) goto done;
    }
    rc = 1;
    goto done;
fail:
    rc = err_status(rw);
done:
    tg_free(outer);
    return rc;
}

/* ---- scan_prune ---- */

/* Non-sequences the body does not read (the other rewrites leave them
 * when they move their readers out) stop being inputs. */
static int scan_prune(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    tg_graph *bg = s.bg;
    bool gone[SCAN_MAX_IO] = {0};
    int ngone = 0;
    for (int k = 0; k < p->nns; k++) {
        tg_var *v = s.fd->inputs[tg_scan_bin_ns(p, k)];
        bool used = is_body_output(&s, v);
        for (int i = 0; i < bg->nnodes && !used; i++)
            for (int j = 0; j < bg->nodes[i]->nin && !used; j++) used = bg->nodes[i]->inputs[j] == v;
        /* The same body variable listed twice as an input is left alone. */
        for (int b = 0; b < s.fd->nin && !used; b++) used = b != tg_scan_bin_ns(p, k) && s.fd->inputs[b] == v;
        gone[k] = !used;
        ngone += !used;
    }
    if (!ngone) return 0;
    json_object *attrs = attrs_copy(n);
    tg_var **ins = tg_calloc((size_t)n->nin + 1, sizeof *ins);
    int rc = TG_OK;
    if (!attrs || !ins) {
        rc = TG_ENOMEM;
        goto done;
    }
    json_object *body = jget(attrs, "body");
    for (int k = p->nns - 1; k >= 0; k--)
        if (gone[k]) {
            body_undeclare(body, s.fd->inputs[tg_scan_bin_ns(p, k)]->id);
            json_object_array_del_idx(jget(body, "inputs"), (size_t)tg_scan_bin_ns(p, k), 1);
        }
    set_int(attrs, "n_non_sequences", p->nns - ngone);
    int ni = 0;
    for (int i = 0; i < n->nin; i++)
        if (i < s.base_ns || !gone[i - s.base_ns]) ins[ni++] = n->inputs[i];
    rc = scan_swap(rw, n, attrs, ni, ins);
done:
    json_object_put(attrs);
    tg_free(ins);
    return rc;
}

/* Whether a body node that only the body outputs gone[] keep alive may
 * fail (tg_rw_node_may_fail: an assert, an integer division by a possible
 * zero, run-time lengths that may not broadcast, an op that checks): the
 * body compiled without those outputs would no longer run it, and a step
 * that fails with -O none would give values. Liveness is read from the
 * body's outputs back, over its nodes in topological order. */
static bool body_drop_fails(const scan_io *s, const bool *gone) {
    int nv = s->bg->nvars, nn = s->bg->nnodes;
    /* live[v]: bit 0, some output needs v; bit 1, some kept one does */
    unsigned char *live = tg_calloc((size_t)nv + 1, 1);
    if (!live) return true; /* (out of memory: the rewrite declines) */
    bool fails = false;
    for (int o = 0; o < s->fd->nout; o++) live[s->fd->outputs[o]->index] |= gone[o] ? 1 : 3;
    for (int i = nn - 1; i >= 0 && !fails; i--) {
        const tg_node *bn = s->bg->nodes[i];
        unsigned char need = 0;
        for (int k = 0; k < bn->nout; k++) need |= live[bn->outputs[k]->index];
        if (need == 1 && tg_rw_node_may_fail(bn)) fails = true;
        for (int k = 0; k < bn->nin; k++) live[bn->inputs[k]->index] |= need;
    }
    tg_free(live);
    return fails;
}

/* Marks output o as going, with those marked already, unless what only
 * they keep alive may fail (body_drop_fails); true when it goes. */
static bool try_drop(const scan_io *s, bool *gone, int o) {
    gone[o] = true;
    if (body_drop_fails(s, gone)) gone[o] = false;
    return gone[o];
}

/* Scan n rebuilt without the ndrop non-recurrent outputs that same[]
 * marks: same[o] is -2 for an output kept, -1 for one that goes with no
 * reader, or an earlier output q whose stack is the same, which o's
 * readers then read. 1 (applied) or an error. */
static int scan_without_outputs(tg_rw *rw, tg_node *n, const scan_p *p, const int *same, int ndrop) {
    json_object *attrs = attrs_copy(n);
    if (!attrs) return TG_ENOMEM;
    json_object *outs = jget(jget(attrs, "body"), "outputs"), *jk = jget(attrs, "keep_last");
    /* at[o]: output o's place in the new loop (-1: none) */
    int at[SCAN_MAX_IO], k = 0;
    for (int o = 0; o < n->nout; o++) {
        if (same[o] == -2) {
            at[o] = k++;
            continue;
        }
        at[o] = same[o] >= 0 ? at[same[o]] : -1;
        json_object_array_del_idx(outs, (size_t)k, 1);
        if (jk) json_object_array_del_idx(jk, (size_t)k, 1);
    }
    set_int(attrs, "n_nonrecurrent", p->nnr - ndrop);
    tg_node *m = scan_build(rw, attrs, n->nin, n->inputs, n->nout - ndrop);
    json_object_put(attrs);
    if (!m) return err_status(rw);
    for (int o = 0; o < n->nout; o++)
        if (at[o] >= 0 && n->outputs[o]->nclients) {
            int rc = tg_rw_replace(rw, n->outputs[o], m->outputs[at[o]]);
            if (rc) return rc;
        }
    return 1;
}

/* v, looking through `identity` nodes (grad writes them on outputs). */
static tg_var *through_identity(tg_var *v) {
    while (v->owner && !strcmp(v->owner->op->name, "identity") && v->owner->nin == 1) v = v->owner->inputs[0];
    return v;
}

/* Non-recurrent outputs nobody reads stop being outputs, so the body no
 * longer computes them (BPTT's scan gives the gradient of every float
 * sequence, wanted or not). One whose computation may fail stays, and the
 * loop keeps making its check (body_drop_fails): each is taken in turn,
 * with those already taken. */
static int scan_drop_outputs(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    int ndrop = 0, map[SCAN_MAX_IO];
    bool drop[SCAN_MAX_IO] = {0};
    for (int o = p->nrec; o < p->nrec + p->nnr; o++) ndrop += !n->outputs[o]->nclients;
    if (!ndrop || ndrop == p->nrec + p->nnr) return 0;
    ndrop = 0;
    for (int o = p->nrec; o < p->nrec + p->nnr; o++)
        if (!n->outputs[o]->nclients) ndrop += try_drop(&s, drop, o);
    if (!ndrop) return 0;
    for (int o = 0; o < n->nout; o++) map[o] = drop[o] ? -1 : -2;
    return scan_without_outputs(rw, n, p, map, ndrop);
}

/* Non-recurrent outputs that stack the same body variable (looking
 * through identity nodes) with the same keep_last are one output, read by
 * the readers of all of them (the outputs half of Theano's
 * scan_merge_inouts). scan_pull_out and scan_sum_dot each stack the
 * per-step value they need, and in BPTT's reverse loop both need the
 * gradient of the input projection: two stacks of every step, copied row
 * by row. */
static int scan_merge_outputs(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    int same[SCAN_MAX_IO], ndrop = 0;
    tg_var *src[SCAN_MAX_IO];
    for (int o = 0; o < n->nout; o++) same[o] = -2;
    for (int o = p->nrec; o < p->nrec + p->nnr; o++) {
        src[o] = through_identity(s.fd->outputs[o]);
        for (int q = p->nrec; q < o && same[o] < 0; q++)
            if (same[q] == -2 && src[q] == src[o] && p->keep[q] == p->keep[o]) same[o] = q;
        ndrop += same[o] >= 0;
    }
    return ndrop ? scan_without_outputs(rw, n, p, same, ndrop) : 0;
}

/* ---- outputs computed outside: scan_pull_out, scan_sum_dot ---- */

/* Is body variable v read by a body node other than `except` (and the
 * identity chain up to `out`), or a body output other than number o? */
static bool read_elsewhere(const scan_io *s, const tg_var *v, int o) {
    for (int i = 0; i < s->bg->nnodes; i++) {
        const tg_node *bn = s->bg->nodes[i];
        for (int k = 0; k < bn->nin; k++)
            if (bn->inputs[k] == v) {
                /* An identity chain leading to output o is fine. */
                const tg_var *w = bn->outputs[0];
                if (strcmp(bn->op->name, "identity") != 0) return true;
                while (w != s->fd->outputs[o]) {
                    bool next = false;
                    for (int j = 0; j < s->bg->nnodes && !next; j++) {
                        const tg_node *c = s->bg->nodes[j];
                        if (c->nin == 1 && c->inputs[0] == w && !strcmp(c->op->name, "identity")) {
                            w = c->outputs[0];
                            next = true;
                        }
                    }
                    if (!next) return true;
                }
            }
    }
    for (int q = 0; q < s->fd->nout; q++)
        if (q != o && through_identity(s->fd->outputs[q]) == v) return true;
    return false;
}

/* Invariant in the loop: a non-sequence or a constant. */
static bool invariant(const scan_io *s, const tg_var *v) {
    return v->kind == TG_VAR_CONSTANT || ns_index(s, v) >= 0;
}

static tg_var *outer_of_invariant(tg_rw *rw, const scan_io *s, tg_node *n, tg_var *v) {
    return v->kind == TG_VAR_CONSTANT ? outer_const(rw, v) : n->inputs[s->base_ns + ns_index(s, v)];
}

/* A copy of scan n whose output o (if >= 0) stacks body variable v instead, with
 * the variables add[] stacked as further non-recurrent outputs (one that
 * is already a non-recurrent output is shared: at[k] says which output
 * holds add[k]). n's other outputs are replaced by the copy's. */
static tg_node *reoutput(tg_rw *rw, tg_node *n, const scan_io *s, int o, tg_var *v, tg_var *const *add,
                         int nadd, int *at);

/* Room for nadd more outputs (the scan's limit, SCAN_MAX_IO less the
 * until condition's slot): a rewrite that would pass it declines. */
static bool outputs_room(const scan_p *p, int nadd) { return p->nrec + p->nnr + nadd + 1 <= SCAN_MAX_IO; }

static tg_node *reoutput(tg_rw *rw, tg_node *n, const scan_io *s, int o, tg_var *v, tg_var *const *add,
                         int nadd, int *at) {
    scan_p *p = s->p;
    json_object *attrs = attrs_copy(n);
    if (!attrs) return NULL;
    json_object *body = jget(attrs, "body"), *outs = jget(body, "outputs");
    if (o >= 0) json_object_array_put_idx(outs, (size_t)o, json_object_new_string(v->id));
    int extra = 0;
    for (int k = 0; k < nadd; k++) {
        at[k] = -1;
        for (int q = p->nrec; q < p->nrec + p->nnr && at[k] < 0; q++)
            if (q != o && through_identity(s->fd->outputs[q]) == add[k]) at[k] = q;
        for (int j = 0; j < k && at[k] < 0; j++)
            if (add[j] == add[k]) at[k] = at[j];
        if (at[k] >= 0) continue;
        at[k] = p->nrec + p->nnr + extra;
        arr_insert(body, "outputs", (size_t)at[k], json_object_new_string(add[k]->id));
        extra++;
    }
    set_int(attrs, "n_nonrecurrent", p->nnr + extra);
    json_object *jk = jget(attrs, "keep_last");
    for (int k = 0; jk && k < extra; k++) json_object_array_add(jk, json_object_new_int(0));
    tg_node *m = scan_build(rw, attrs, n->nin, n->inputs, n->nout + extra);
    json_object_put(attrs);
    if (!m) return NULL;
    for (int k = 0; k < n->nout; k++)
        if (k != o && n->outputs[k]->nclients && tg_rw_replace(rw, n->outputs[k], m->outputs[k])) return NULL;
    return m;
}

/* A non-recurrent output that is a product of a per-step value and a
 * loop invariant (an input's gradient in BPTT: delta_t @ W^T) stacks the
 * per-step value instead, and the product is one product outside over
 * every step. */
static int scan_pull_out(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    for (int o = p->nrec; o < p->nrec + p->nnr; o++) {
        if (!n->outputs[o]->nclients) continue;
        tg_var *x = through_identity(s.fd->outputs[o]);
        tg_node *bn = x->owner;
        if (!bn || bn->nin != 2 || (strcmp(bn->op->name, "dot") && strcmp(bn->op->name, "matmul")))
            continue;
        int at = invariant(&s, bn->inputs[1]) ? 0 : invariant(&s, bn->inputs[0]) ? 1 : -1;
        if (at < 0 || invariant(&s, bn->inputs[at]) || read_elsewhere(&s, x, o)) continue;
        int cd = bn->inputs[1 - at]->type.ndim, sd = bn->inputs[at]->type.ndim;
        if (cd < 1 || cd > 2 || sd < 1 || (sd > 2 && strcmp(bn->op->name, "matmul"))) continue;
        /* The axis of v_t the product contracts must be static: after 0
         * steps the stack of v_t has lengths 0 where the body gives none
         * (ops/scan.c), and a (0, 0) stack does not multiply a (3, 4) C,
         * where the loop as written gave 0 rows. */
        int kd = at == 0 ? sd - 1 : sd == 1 ? 0 : sd - 2;
        if (bn->inputs[at]->type.shape[kd] < 0) continue;
        tg_var *C = outer_of_invariant(rw, &s, n, bn->inputs[1 - at]);
        if (!C) return err_status(rw);
        int unused;
        tg_node *m = reoutput(rw, n, &s, o, bn->inputs[at], NULL, 0, &unused);
        if (!m) return err_status(rw);
        tg_var *ops[2];
        ops[at] = m->outputs[o];
        ops[1 - at] = C;
        tg_var *R = push_build(rw, bn, at, ops);
        if (!R) return err_status(rw);
        if (moved_out(rw, R->owner, n, "in the body, applied to the values of every step at once", bn))
            return err_status(rw);
        int rc = tg_rw_replace(rw, n->outputs[o], R);
        return rc ? rc : 1;
    }
    return 0;
}

/* a is transpose(b) of a matrix b (b returned), else NULL. */
static tg_var *transposed(tg_var *a) {
    tg_node *t = a->owner;
    if (!t || t->nin != 1 || t->inputs[0]->type.ndim != 2) return NULL;
    if (!strcmp(t->op->name, "transpose") && (t->a.axis_null || t->a.naxes == 0 ||
                                              (t->a.naxes == 2 && t->a.axes[0] == 1 && t->a.axes[1] == 0)))
        return t->inputs[0];
    if (!strcmp(t->op->name, "dimshuffle") && t->a.norder == 2 && t->a.order[0] == 1 && t->a.order[1] == 0)
        return t->inputs[0];
    return NULL;
}

/* A reduction over the leading axis only: sum(x, axis=0). */
static bool sum_axis0(const tg_node *c) {
    if (strcmp(c->op->name, "sum") || c->a.keepdims || c->a.axis_null || c->a.naxes != 1) return false;
    int a = c->a.axes[0], nd = c->inputs[0]->type.ndim;
    return a == 0 || a == -nd;
}

/* Body variable v is the row of a sequence at one of its taps: which
 * sequence (*seq) and tap (*tap). */
static bool seq_tap_of(const scan_io *s, const tg_var *v, int *seq, int *tap) {
    int b = body_input_index(s, v);
    for (int i = 0; b >= 0 && i < s->p->nseq; i++)
        for (int q = 0; q < s->p->seq_ntaps[i]; q++)
            if (tg_scan_bin_seq(s->p, i, q) == b) {
                *seq = i;
                *tap = s->p->taps[s->p->seq_off[i] + q];
                return true;
            }
    return false;
}

/* The rows of scan n's outer sequence i that steps 0..T-1 read at `tap`,
 * in the order of the steps (ops/scan.c, seq_row: step t reads row
 * t + o, o = tap - min(taps, 0), or len - 1 - (t + o) with go_backwards):
 * x[o : o + T], or x[-1 - o : -1 - o - T : -1], a view; T the int64
 * scalar `steps`. */
static tg_var *seq_rows(tg_rw *rw, tg_node *n, const scan_io *s, int i, int tap, tg_var *steps) {
    int64_t o = tap - s->p->seq_min[i];
    tg_var *x = n->inputs[s->base_seq + i];
    char attrs[160];
    tg_var *ins[2] = {x, NULL};
    if (!s->p->backwards) {
        ins[1] = tg_rw_op2(rw, "add", steps, tg_rw_const(rw, TG_INT64, (double)o));
        snprintf(attrs, sizeof attrs, "{\"index\": [{\"start\": %lld, \"stop\": \"$0\"}]}", (long long)o);
    } else {
        ins[1] = tg_rw_op2(rw, "sub", tg_rw_const(rw, TG_INT64, (double)(-1 - o)), steps);
        snprintf(attrs, sizeof attrs, "{\"index\": [{\"start\": %lld, \"stop\": \"$0\", \"step\": -1}]}",
                 (long long)(-1 - o));
    }
    return ins[1] ? tg_rw_op(rw, "subtensor", 2, ins, attrs) : NULL;
}

/* BPTT's weight gradients: a non-recurrent output a_t^T b_t (a weight's
 * gradient at step t) read only as its sum over the steps becomes one
 * product over every step outside the loop, A^T B with A, B the steps'
 * rows stacked: the loop keeps a_t and b_t (rows of the batch) instead of
 * a weight-sized matrix per step, and the sum is a single tall gemm.
 * When one of the two is the row of a sequence (the reverse loop's
 * h_{t-1} and x_t), its rows are the outer sequence's, in the order of
 * the steps, and the loop stacks only the other: a copy of the sequence
 * made row by row inside the loop and held beside its other outputs was
 * the same rows (with go_backwards a reversed view, which the product's
 * reshape copies, after the loop). */
static int scan_sum_dot(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    for (int o = p->nrec; o < p->nrec + p->nnr; o++) {
        tg_var *out = n->outputs[o];
        if (!out->nclients || out->nclients > 16) continue;
        bool ok = true;
        for (int c = 0; c < out->nclients && ok; c++)
            ok = out->clients[c].node && sum_axis0(out->clients[c].node);
        if (!ok) continue;
        tg_var *x = through_identity(s.fd->outputs[o]);
        tg_node *bn = x->owner;
        if (!bn || strcmp(bn->op->name, "dot") || bn->nin != 2) continue;
        tg_var *a = transposed(bn->inputs[0]), *b = bn->inputs[1];
        if (!a || b->type.ndim != 2 || invariant(&s, a) || invariant(&s, b) || read_elsewhere(&s, x, o))
            continue;
        int64_t ma = a->type.shape[1], nb = b->type.shape[1];
        if (ma < 0 || nb < 0 || a->type.dtype != b->type.dtype) continue;
        /* A sequence's row (not with until, where the steps taken are
         * fewer than the rows the loop could read; not both: the steps
         * are counted on the stack of the other) */
        int sq = -1, tap = 0;
        bool a_seq = !p->has_until && p->keep[o] == 0 && seq_tap_of(&s, a, &sq, &tap);
        bool b_seq = !a_seq && !p->has_until && p->keep[o] == 0 && seq_tap_of(&s, b, &sq, &tap);
        int at = o;
        tg_node *m;
        if (a_seq || b_seq) {
            m = reoutput(rw, n, &s, o, a_seq ? b : a, NULL, 0, &at);
        } else {
            if (!outputs_room(s.p, 1)) continue;
            m = reoutput(rw, n, &s, o, a, &b, 1, &at);
        }
        if (!m) return err_status(rw);
        tg_var *Ar = m->outputs[o], *Br = m->outputs[at];
        if (a_seq || b_seq) {
            tg_var *steps = tg_rw_op1(rw, "shape_i", m->outputs[o], "{\"i\": 0}");
            tg_var *rows = steps ? seq_rows(rw, n, &s, sq, tap, steps) : NULL;
            if (!rows) return err_status(rw);
            if (a_seq) {
                Br = Ar;
                Ar = rows;
            } else {
                Br = rows;
            }
        }
        int64_t sa[2] = {-1, ma}, sb[2] = {-1, nb};
        int64_t two = 2;
        tg_var *shp_a = tg_rw_const_array(rw, tg_array_new_from(TG_INT64, 1, &two, sa));
        tg_var *shp_b = tg_rw_const_array(rw, tg_array_new_from(TG_INT64, 1, &two, sb));
        tg_var *A = tg_rw_op2(rw, "reshape", Ar, shp_a);
        tg_var *B = tg_rw_op2(rw, "reshape", Br, shp_b);
        tg_var *R = tg_rw_op2(rw, "dot", tg_rw_op1(rw, "transpose", A, NULL), B);
        if (!R) return err_status(rw);
        tg_node *rd[16];
        int nc = out->nclients;
        for (int c = 0; c < nc; c++) rd[c] = out->clients[c].node;
        for (int c = 0; c < nc; c++) {
            int rc;
            if ((rc = tg_rw_match(rw, rd[c])) || (rc = tg_rw_replace(rw, rd[c]->outputs[0], R))) return rc;
        }
        return 1;
    }
    return 0;
}

/* ---- slice_product_reuse ---- */

/* matmul(x[a:b], W) when matmul(x, W) is computed anyway: its rows
 * [a:b]. BPTT's scan reads the forward sequences cut to the steps taken,
 * so the product that scan_push_seq moves out of the backward loop would
 * otherwise repeat the forward loop's input projection. */
static int slice_product_reuse(tg_rw *rw, tg_node *n) {
    if (n->nin != 2) return 0;
    tg_node *sub = tg_rw_producer(n->inputs[0], "subtensor");
    if (!sub || sub->a.nindex != 1 || !sub->a.index[0].is_slice) return 0;
    tg_var *x = sub->inputs[0], *W = n->inputs[1];
    /* Rows of x are rows of the product: x has a leading axis of rows. */
    if (x->type.ndim < 2 || W->type.ndim > 2 || (!strcmp(n->op->name, "dot") && x->type.ndim != 2)) return 0;
    for (int c = 0; c < x->nclients; c++) {
        tg_node *m = x->clients[c].node;
        if (!m || m == n || m->op != n->op || x->clients[c].index != 0 || m->inputs[1] != W || tg_rw_dead(m))
            continue;
        tg_var *in[TG_MAX_NDIM * 3 + 1];
        if (sub->nin > TG_MAX_NDIM * 3 + 1) return 0;
        in[0] = m->outputs[0];
        for (int k = 1; k < sub->nin; k++) in[k] = sub->inputs[k];
        tg_var *r = tg_rw_op_json(rw, sub->op, sub->nin, in, sub->attrs);
        if (!r) return err_status(rw);
        if (!tg_type_compatible(&n->outputs[0]->type, &r->type)) return 0;
        int rc = tg_rw_replace(rw, n->outputs[0], r);
        return rc ? rc : 1;
    }
    return 0;
}

/* ---- scan_reuse_step_product ---- */

/* A product over a recurrent output's whole stack, initial state first,
 *   M = join(expand_dims(init), h) @ C,
 * whose rows the loop already computed (its body multiplies the
 * previous step's value by the same non-sequence C: h_{t-1} @ C), is
 *   join(expand_dims(init) @ C, P[1:], h[-1:] @ C)
 * with P the stack of the body's products, a new output of the loop.
 * BPTT's reverse scan recomputes each step's forward values from that
 * product: this takes them from the forward loop instead of doing the
 * loop's largest product a second time. */
static int scan_reuse_step_product(tg_rw *rw, tg_node *n) {
    if (n->nin != 2) return 0;
    tg_node *J = tg_rw_producer(n->inputs[0], "join");
    tg_var *C = n->inputs[1];
    if (!J || J->nin != 2 || J->a.naxes != 1 || J->a.axes[0] != 0 || C->type.ndim != 2) return 0;
    tg_node *E = tg_rw_producer(J->inputs[0], "expand_dims");
    tg_var *O = J->inputs[1];
    tg_node *F = O->owner;
    if (!E || E->a.naxes != 1 || E->a.axes[0] != 0 || !F || strcmp(F->op->name, "scan")) return 0;
    scan_io s;
    if (!scan_view(F, &s)) return 0;
    scan_p *p = s.p;
    int j = O->owner_index;
    if (j >= p->nrec || !p->out_flat[j] || p->has_until || F->inputs[s.base_init + j] != E->inputs[0] ||
        O->type.ndim != 3)
        return 0;
    /* The body's product of h_{t-1} and C. */
    tg_var *hp = s.fd->inputs[tg_scan_bin_rec(p, j, 0)];
    tg_var *P = NULL;
    for (int i = 0; i < s.bg->nnodes && !P; i++) {
        tg_node *bn = s.bg->nodes[i];
        if (bn->nin != 2 || (strcmp(bn->op->name, "dot") && strcmp(bn->op->name, "matmul"))) continue;
        int k = ns_index(&s, bn->inputs[1]);
        if (bn->inputs[0] == hp && hp->type.ndim == 2 && k >= 0 && F->inputs[s.base_ns + k] == C &&
            bn->outputs[0]->type.dtype == n->outputs[0]->type.dtype)
            P = bn->outputs[0];
    }
    if (!P) return 0;
    int at;
    if (!outputs_room(p, 1)) return 0;
    tg_node *G = reoutput(rw, F, &s, -1, NULL, &P, 1, &at);
    if (!G) return err_status(rw); /* F's outputs now read G's */
    tg_var *Pst = G->outputs[at], *Oh = G->outputs[j];
    tg_var *first = tg_rw_op2(rw, n->op->name, J->inputs[0], C);
    tg_var *rest = tg_rw_op1(rw, "subtensor", Pst, "{\"index\": [{\"start\": 1}]}");
    /* After 0 steps a per-step shape the body does not give statically
     * is all 0s (ops/scan.c): P is then (0, 0, 0), which join cannot put
     * beside first's (1, batch, n). Its rows are then given first's row
     * shape (a view whatever the steps). */
    bool known = true;
    for (int d = 1; d < Pst->type.ndim; d++) known &= Pst->type.shape[d] >= 0;
    if (!known && rest && first) {
        tg_var *sr = tg_rw_op1(rw, "shape", rest, NULL), *sf = tg_rw_op1(rw, "shape", first, NULL);
        tg_var *lead = sr ? tg_rw_op1(rw, "subtensor", sr, "{\"index\": [{\"stop\": 1}]}") : NULL;
        tg_var *tail = sf ? tg_rw_op1(rw, "subtensor", sf, "{\"index\": [{\"start\": 1}]}") : NULL;
        tg_var *lt[2] = {lead, tail};
        tg_var *shp = lead && tail ? tg_rw_op(rw, "join", 2, lt, "{\"axis\": 0}") : NULL;
        rest = shp ? tg_rw_op2(rw, "reshape", rest, shp) : NULL;
    }
    tg_var *lastrow = tg_rw_op1(rw, "subtensor", Oh, "{\"index\": [{\"start\": -1}]}");
    tg_var *last = tg_rw_op2(rw, n->op->name, lastrow, C);
    tg_var *parts[3] = {first, rest, last};
    tg_var *R = first && rest && last ? tg_rw_op(rw, "join", 3, parts, "{\"axis\": 0}") : NULL;
    if (!R) return err_status(rw);
    int rc;
    if ((rc = tg_rw_match(rw, F)) || (rc = tg_rw_replace(rw, n->outputs[0], R))) return rc;
    return 1;
}

/* ---- accumulators: scan_acc_sum, scan_drop_recurrent ---- */

/* Provably zeros: zeros_like(..), alloc(0, ..), or an all-zero constant. */
static bool is_zeros(const tg_var *v) {
    if (tg_rw_is_const_value(v, 0)) return true;
    if (tg_rw_producer(v, "zeros_like")) return true;
    tg_node *a = tg_rw_producer(v, "alloc");
    return a && tg_rw_is_const_value(a->inputs[0], 0);
}

/* How many body nodes read v (and is it a body output?). */
static int readers(const scan_io *s, const tg_var *v, tg_node **one) {
    int c = 0;
    for (int i = 0; i < s->bg->nnodes; i++)
        for (int k = 0; k < s->bg->nodes[i]->nin; k++)
            if (s->bg->nodes[i]->inputs[k] == v) {
                c++;
                if (one) *one = s->bg->nodes[i];
                break;
            }
    return c;
}

/* Recurrent output j is an accumulator acc_t = acc_{t-1} + e_t: its one
 * tap's input feeds only that add, whose result is only output j. The
 * add (e_t returned through *e), or NULL. e_t's static shape must be the
 * sum's, every length known (the sum has the accumulator's shape, as each
 * step's output has its initial state's): an e_t that broadcasts (rows of
 * length 1 into an accumulator of 3) would make sum(E, axis=0) the
 * shape of one increment, and after 0 steps E's per-step shape is its
 * static one (ops/scan.c), which must be the accumulator's. */
static tg_node *accumulator(const scan_io *s, int j, tg_var **e) {
    scan_p *p = s->p;
    if (!p->out_flat[j]) return NULL;
    tg_var *hp = s->fd->inputs[tg_scan_bin_rec(p, j, 0)];
    tg_node *P = NULL;
    if (readers(s, hp, &P) != 1 || is_body_output(s, hp) || body_input_index(s, hp) != tg_scan_bin_rec(p, j, 0))
        return NULL;
    tg_var *x = through_identity(s->fd->outputs[j]);
    if (x->owner != P || strcmp(P->op->name, "add") || P->nin != 2 || read_elsewhere(s, x, j)) return NULL;
    int k = P->inputs[0] == hp ? 1 : P->inputs[1] == hp ? 0 : -1;
    if (k < 0 || P->inputs[k] == hp || P->inputs[k]->type.dtype != x->type.dtype ||
        !tg_rw_type_same_known(&P->inputs[k]->type, &x->type))
        return NULL;
    *e = P->inputs[k];
    return P;
}

/* An accumulator from zeros read only as sum(acc[-1:], axis=0) (BPTT's
 * non-sequence gradients) is the sum of its increments: they become a
 * non-recurrent output E and the reader sum(E, axis=0), which
 * scan_sum_dot turns into one product when the increment is a_t^T b_t;
 * the accumulator, then unread, goes (scan_drop_recurrent). */
static int scan_acc_sum(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    for (int j = 0; j < p->nrec; j++) {
        tg_var *O = n->outputs[j], *e;
        if (!O->nclients || O->nclients > 16 || !is_zeros(n->inputs[s.base_init + j]) || !accumulator(&s, j, &e))
            continue;
        tg_node *sums[64];
        int ns = 0;
        bool ok = true;
        for (int c = 0; c < O->nclients && ok; c++) {
            tg_node *sub = O->clients[c].node;
            ok = sub && !strcmp(sub->op->name, "subtensor") && sub->nin == 1 && sub->a.nindex == 1;
            if (!ok) break;
            const tg_index_entry *ie = &sub->a.index[0];
            ok = ie->is_slice && ie->given[0] && ie->dyn[0] < 0 && ie->v[0] == -1 && !ie->given[1] &&
                 (!ie->given[2] || (ie->dyn[2] < 0 && ie->v[2] == 1));
            tg_var *sv = sub->outputs[0];
            for (int k = 0; ok && k < sv->nclients; k++) {
                tg_node *sm = sv->clients[k].node;
                ok = sm && sum_axis0(sm) && ns < 64;
                if (ok) sums[ns++] = sm;
            }
            ok = ok && sv->nclients > 0;
        }
        if (!ok || !ns) continue;
        int at;
        if (!outputs_room(s.p, 1)) continue;
        tg_node *G = reoutput(rw, n, &s, -1, NULL, &e, 1, &at);
        if (!G) return err_status(rw);
        tg_var *R = tg_rw_op1(rw, "sum", G->outputs[at], "{\"axis\": 0}");
        if (!R) return err_status(rw);
        for (int k = 0; k < ns; k++) {
            int rc;
            if ((rc = tg_rw_match(rw, sums[k])) || (rc = tg_rw_replace(rw, sums[k]->outputs[0], R))) return rc;
        }
        return 1;
    }
    return 0;
}

/* A recurrent output nobody reads, whose past values feed only its own
 * next value (an accumulator left unread), stops being an output: its
 * initial state, taps and body output go, unless what goes with them may
 * fail (body_drop_fails: an increment that asserts, an add whose lengths
 * may not broadcast). Every such output goes in one
 * application (one of them, at least one output, stays): one at a time,
 * each rebuilt the scan, whose body is in proportion to their number
 * too (BPTT's loop keeps an accumulator for each non-sequence's
 * gradient, wanted or not): 200 non-sequences, 5.9 s. */
static int scan_drop_recurrent(tg_rw *rw, tg_node *n) {
    scan_io s;
    if (!scan_view(n, &s)) return 0;
    scan_p *p = s.p;
    if (p->nrec + p->nnr < 2) return 0;
    bool gone[SCAN_MAX_IO] = {0};
    int ngone = 0;
    for (int j = 0; j < p->nrec && ngone < p->nrec + p->nnr - 1; j++) {
        tg_var *e;
        if (!n->outputs[j]->nclients && accumulator(&s, j, &e)) {
            /* (what only the accumulator read, its add included, must
             * not be able to fail: the loop keeps it otherwise) */
            ngone += try_drop(&s, gone, j);
        }
    }
    if (!ngone) return 0;
    json_object *attrs = attrs_copy(n);
    tg_var **ins = tg_calloc((size_t)n->nin + 1, sizeof *ins);
    /* The adds and the identities up to the outputs go with them. */
    bool *drop = tg_calloc((size_t)s.bg->nnodes + 1, sizeof *drop);
    int map[SCAN_MAX_IO], rc = TG_OK;
    if (!attrs || !ins || !drop) {
        rc = TG_ENOMEM;
        goto done;
    }
    json_object *body = jget(attrs, "body");
    for (int j = 0; j < p->nrec; j++)
        for (tg_var *v = s.fd->outputs[j]; gone[j] && v->owner;) {
            /* (a node's index is its place, unless the loader's sort
             * moved it) */
            int i = v->owner->index;
            if (i < 0 || i >= s.bg->nnodes || s.bg->nodes[i] != v->owner)
                for (i = 0; i < s.bg->nnodes && s.bg->nodes[i] != v->owner; i++) {
                }
            if (i < s.bg->nnodes) drop[i] = true;
            if (strcmp(v->owner->op->name, "identity")) break;
            v = v->owner->inputs[0];
        }
    if ((rc = body_drop_nodes(body, &s, drop))) goto done;
    /* From the last, so that the places of those before stay. */
    json_object *jk = jget(attrs, "keep_last");
    for (int j = p->nrec - 1; j >= 0; j--) {
        if (!gone[j]) continue;
        int b = tg_scan_bin_rec(p, j, 0);
        body_undeclare(body, s.fd->inputs[b]->id);
        json_object_array_del_idx(jget(body, "inputs"), (size_t)b, 1);
        json_object_array_del_idx(jget(body, "outputs"), (size_t)j, 1);
        json_object_array_del_idx(jget(attrs, "output_taps"), (size_t)j, 1);
        if (jk && json_object_is_type(jk, json_type_array)) json_object_array_del_idx(jk, (size_t)j, 1);
    }
    set_int(attrs, "n_recurrent", p->nrec - ngone);
    int ni = 0;
    for (int i = 0; i < n->nin; i++)
        if (i < s.base_init || i >= s.base_init + p->nrec || !gone[i - s.base_init]) ins[ni++] = n->inputs[i];
    for (int o = 0, k = 0; o < n->nout; o++) map[o] = o < p->nrec && gone[o] ? -1 : k++;
    tg_node *m = scan_build(rw, attrs, ni, ins, n->nout - ngone);
    if (!m) {
        rc = err_status(rw);
        goto done;
    }
    for (int o = 0; o < n->nout && !rc; o++)
        if (map[o] >= 0 && n->outputs[o]->nclients) rc = tg_rw_replace(rw, n->outputs[o], m->outputs[map[o]]);
    rc = rc ? rc : 1;
done:
    json_object_put(attrs);
    tg_free(ins);
    tg_free(drop);
    return rc;
}

/* ---- the rules (listed in rules.c's table) ---- */

int tg_rw_scan_inline(tg_rw *rw, tg_node *n) { return scan_inline(rw, n); }
int tg_rw_scan_hoist(tg_rw *rw, tg_node *n) { return scan_hoist(rw, n); }
int tg_rw_scan_push_seq(tg_rw *rw, tg_node *n) { return scan_push_seq(rw, n); }
int tg_rw_scan_keep_last(tg_rw *rw, tg_node *n) { return scan_keep_last(rw, n); }
int tg_rw_scan_merge(tg_rw *rw, tg_node *n) { return scan_merge(rw, n); }
int tg_rw_scan_prune(tg_rw *rw, tg_node *n) { return scan_prune(rw, n); }
int tg_rw_scan_pull_out(tg_rw *rw, tg_node *n) { return scan_pull_out(rw, n); }
int tg_rw_scan_sum_dot(tg_rw *rw, tg_node *n) { return scan_sum_dot(rw, n); }
int tg_rw_scan_drop_outputs(tg_rw *rw, tg_node *n) { return scan_drop_outputs(rw, n); }
int tg_rw_scan_merge_outputs(tg_rw *rw, tg_node *n) { return scan_merge_outputs(rw, n); }
int tg_rw_slice_product_reuse(tg_rw *rw, tg_node *n) { return slice_product_reuse(rw, n); }
int tg_rw_scan_reuse_step_product(tg_rw *rw, tg_node *n) { return scan_reuse_step_product(rw, n); }
int tg_rw_scan_acc_sum(tg_rw *rw, tg_node *n) { return scan_acc_sum(rw, n); }
int tg_rw_scan_drop_recurrent(tg_rw *rw, tg_node *n) { return scan_drop_recurrent(rw, n); }
