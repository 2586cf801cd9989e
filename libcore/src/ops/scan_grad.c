/* The gradient of scan: back-propagation through time, as a scan.
 *
 * The reverse scan walks the forward steps backwards (go_backwards) over
 * what the forward pass kept: the sequences with their taps negated, each
 * recurrent output's full stack (initial state then steps) read at the
 * forward taps negated, and the gradients of the stacked outputs. Its body
 * is the forward body, renamed, followed by a `grad` node of
 *   cost = sum over outputs o of sum(out_o * total_o)
 * with respect to the body's inputs (expanded when the body is loaded),
 * where total_o is the gradient reaching step t's output o: the output's
 * own gradient plus, for a recurrent output, what later steps sent back
 * to it. That is carried as a recurrent state C_j of k_j rows (the taps
 * reach k_j steps back): C_j[m] is the pending gradient of the value at
 * position t - k_j + 1 + m, so total_j = g_j + C_j[k_j - 1], and the next
 * carry is C_j shifted down one row plus the gradients of this step's
 * taps (tap -d lands at row k_j - d). For taps exactly [-1] the carry is
 * one value. After the last reverse step the carry holds the gradient of
 * the initial state, oldest first. The sequences get their per-step
 * gradients as non-recurrent outputs, added back where the taps read
 * them; the non-sequences' are summed over the steps in recurrent
 * accumulators (as Theano's, so that a rewrite keeping only the last
 * step of an output whose stack nobody reads saves their memory).
 *
 * truncate_gradient = n: the reverse scan runs only over the last n
 * steps; gradients that would flow further back are dropped, and the
 * initial state gets only what those steps send to it directly.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "grad/grad.h"
#include "io/io.h"
#include "ops/scan.h"

/* ---- JSON helpers ---- */

static json_object *jtype(tg_dtype dt, int nd, const int64_t *shape) {
    json_object *t = json_object_new_object(), *s = json_object_new_array();
    if (!t || !s) {
        json_object_put(t);
        json_object_put(s);
        return NULL;
    }
    for (int d = 0; d < nd; d++)
        json_object_array_add(s, shape[d] >= 0 ? json_object_new_int64(shape[d]) : NULL);
    json_object_object_add(t, "dtype", json_object_new_string(tg_dtype_name(dt)));
    json_object_object_add(t, "shape", s);
    return t;
}

static json_object *jvar(const char *id, json_object *type) {
    json_object *v = json_object_new_object();
    if (!v) {
        json_object_put(type);
        return NULL;
    }
    json_object_object_add(v, "id", json_object_new_string(id));
    json_object_object_add(v, "type", type);
    return v;
}

/* {"op": op, "inputs": [...], "outputs": [out], "attrs": attrs} with the
 * inputs given as ids (strings) or inline values (objects, taken over);
 * NULL when out of memory (never a node with a part missing). */
static json_object *jnode(const char *op, int nin, json_object *const *in, int nout,
                          const char *const *out, const char *attrs) {
    json_object *n = json_object_new_object(), *ji = json_object_new_array(),
                *jo = json_object_new_array();
    bool ok = true;
    for (int i = 0; i < nin; i++) tg_json_push(ji, in[i], &ok); /* each taken or released */
    for (int i = 0; i < nout; i++) tg_json_push(jo, json_object_new_string(out[i]), &ok);
    tg_json_put(n, "op", json_object_new_string(op), &ok);
    tg_json_put(n, "inputs", ji, &ok);
    tg_json_put(n, "outputs", jo, &ok);
    if (attrs) {
        tg_json_fail jf;
        tg_json_put(n, "attrs", tg_json_parse_object(NULL, attrs, strlen(attrs), TG_JSON_ATTRS_DEPTH, &jf), &ok);
    }
    if (!ok) {
        json_object_put(n);
        return NULL;
    }
    return n;
}

static json_object *js(const char *s) { return json_object_new_string(s); }

/* A body node of one output. */
static bool add1(json_object *nodes, const char *op, const char *out, const char *attrs, int nin, ...) {
    json_object *in[16];
    va_list ap;
    va_start(ap, nin);
    for (int i = 0; i < nin && i < 16; i++) in[i] = js(va_arg(ap, const char *));
    va_end(ap);
    json_object *n = jnode(op, nin, in, 1, &out, attrs);
    return n && !json_object_array_add(nodes, n);
}

/* Rename every id of a body (its variables, its nodes' string inputs and
 * outputs, its inputs and outputs, and the bodies nested in its nodes'
 * attrs) to prefix + id, so that the copy's ids stay unique in the file.
 *
 * Each level of a nested scan's gradient prefixes its body again, so an
 * id 9 levels down would outgrow the 128 characters of an id. One that
 * would becomes prefix + "n<k>." + its last characters, 128 in all, where
 * k counts the body's shortened ids (in the order they first appear) and
 * skips a k whose id the body already has as prefix + an id of its own:
 * ids stay unique in their body, and the same id everywhere in it. A body
 * is a namespace of its own (its ids resolve inside it only), so each
 * nested body gets its own table. The ids the reverse body adds are
 * prefix + "." + a name, which no renamed id is (no id starts with "."),
 * whatever the forward body calls its variables. */
#define ID_MAX 128

typedef struct renamer {
    const char *prefix;
    json_object *to;    /* old id -> new id (a string; null until pass 2) */
    json_object *order; /* the old ids, in the order they first appear */
    int next;           /* the k of the next shortened id */
} renamer;

/* Pass 1 notes each old id once, in order. */
static bool rename_note(renamer *r, const char *id) {
    if (json_object_object_get_ex(r->to, id, NULL)) return true;
    json_object *key = json_object_new_string(id);
    if (!key || json_object_array_add(r->order, key)) {
        json_object_put(key);
        return false;
    }
    return !json_object_object_add(r->to, id, NULL);
}

/* Pass 1 notes the string at l[k]; pass 3 (apply) replaces it. */
static bool rename_at(renamer *r, json_object *l, size_t k, bool apply) {
    json_object *e = json_object_array_get_idx(l, k), *to;
    if (!json_object_is_type(e, json_type_string)) return true;
    const char *id = json_object_get_string(e);
    if (!apply) return rename_note(r, id);
    if (!json_object_object_get_ex(r->to, id, &to) || !to) return true;
    json_object *v = json_object_new_string(json_object_get_string(to));
    return v && !json_object_array_put_idx(l, k, v);
}

static bool rename_list(renamer *r, json_object *arr, bool apply) {
    if (!json_object_is_type(arr, json_type_array)) return true;
    for (size_t i = 0; i < json_object_array_length(arr); i++)
        if (!rename_at(r, arr, i, apply)) return false;
    return true;
}

/* One pass over body's own ids (not those of the bodies nested in it). */
static bool rename_pass(renamer *r, json_object *body, bool apply) {
    json_object *vars, *nodes, *io;
    if (json_object_object_get_ex(body, "variables", &vars) && json_object_is_type(vars, json_type_array))
        for (size_t i = 0; i < json_object_array_length(vars); i++) {
            json_object *v = json_object_array_get_idx(vars, i), *id, *to;
            if (!json_object_object_get_ex(v, "id", &id) || !json_object_is_type(id, json_type_string)) continue;
            if (!apply) {
                if (!rename_note(r, json_object_get_string(id))) return false;
            } else if (json_object_object_get_ex(r->to, json_object_get_string(id), &to) && to) {
                json_object *nv = json_object_new_string(json_object_get_string(to));
                if (!nv || json_object_object_add(v, "id", nv)) return false;
            }
        }
    if (json_object_object_get_ex(body, "nodes", &nodes) && json_object_is_type(nodes, json_type_array))
        for (size_t i = 0; i < json_object_array_length(nodes); i++) {
            json_object *nd = json_object_array_get_idx(nodes, i), *x;
            if (json_object_object_get_ex(nd, "inputs", &x) && !rename_list(r, x, apply)) return false;
            if (json_object_object_get_ex(nd, "outputs", &x) && !rename_list(r, x, apply)) return false;
        }
    if (json_object_object_get_ex(body, "inputs", &io) && !rename_list(r, io, apply)) return false;
    if (json_object_object_get_ex(body, "outputs", &io) && !rename_list(r, io, apply)) return false;
    return true;
}

/* The new id of each old one collected (see above). */
static bool rename_assign(renamer *r) {
    const size_t np = strlen(r->prefix);
    char buf[ID_MAX + 1];
    for (size_t i = 0; i < json_object_array_length(r->order); i++) {
        const char *id = json_object_get_string(json_object_array_get_idx(r->order, i));
        size_t n = strlen(id);
        if (np + n <= ID_MAX) {
            snprintf(buf, sizeof buf, "%s%s", r->prefix, id);
        } else {
            /* prefix + "n<k>." + tail is prefix + an old id of this body
             * only when "n<k>." + tail is one: skip that k. */
            for (;;) {
                char head[24];
                int nh = snprintf(head, sizeof head, "n%d.", r->next++);
                size_t keep = ID_MAX - np - (size_t)nh;
                snprintf(buf, sizeof buf, "%s%s%s", r->prefix, head, id + n - keep);
                if (!json_object_object_get_ex(r->to, buf + np, NULL)) break;
            }
        }
        json_object *v = json_object_new_string(buf);
        if (!v || json_object_object_add(r->to, id, v)) {
            json_object_put(v);
            return false;
        }
    }
    return true;
}

static bool rename_ids(json_object *body, const char *prefix) {
    renamer r = {.prefix = prefix, .to = json_object_new_object(), .order = json_object_new_array()};
    bool ok = r.to && r.order && rename_pass(&r, body, false) && rename_assign(&r) && rename_pass(&r, body, true);
    json_object_put(r.to);
    json_object_put(r.order);
    json_object *nodes;
    if (ok && json_object_object_get_ex(body, "nodes", &nodes) && json_object_is_type(nodes, json_type_array))
        for (size_t i = 0; ok && i < json_object_array_length(nodes); i++) {
            json_object *nd = json_object_array_get_idx(nodes, i), *attrs, *nb;
            if (json_object_object_get_ex(nd, "attrs", &attrs) && json_object_object_get_ex(attrs, "body", &nb))
                ok = rename_ids(nb, prefix);
        }
    return ok;
}

static const char *jid(json_object *body, const char *key, int i) {
    json_object *a;
    json_object_object_get_ex(body, key, &a);
    return json_object_get_string(json_object_array_get_idx(a, (size_t)i));
}

/* ---- the outer graph ---- */

static tg_var *i64c(tg_gb *b, int64_t v) { return tg_gb_const(b, TG_INT64, (double)v); }

static tg_var *op_attrs(tg_gb *b, const char *op, int nin, tg_var *const *in, const char *fmt, ...) {
    char attrs[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(attrs, sizeof attrs, fmt, ap);
    va_end(ap);
    for (int i = 0; i < nin; i++)
        if (!in[i]) return NULL;
    return tg_gb_op(b, op, nin, in, attrs);
}

static tg_var *reversed(tg_gb *b, tg_var *x) {
    return op_attrs(b, "subtensor", 1, &x, "{\"index\": [{\"start\": null, \"stop\": null, \"step\": -1}]}");
}

static int rc_of(tg_gb *b) { return b->ctx && b->ctx->status ? b->ctx->status : TG_ENOMEM; }

/* Theano's Scan.connection_pattern: output o depends on the node input
 * behind a body input that body output o depends on (a sequence, through
 * any of its taps; a recurrent output's initial state, through its taps;
 * a non-sequence), and, through the recurrence, on whatever a recurrent
 * output whose taps it reads depends on, to a fixed point (o reads the
 * taps of j, j's step reads a non-sequence w: o depends on w). n_steps
 * and the until condition connect nothing (as in Theano). */
int tg_scan_connection(const tg_node *n, bool *conn, tg_ctx *ctx) {
    const scan_p *p = n->a.extra;
    const int base_seq = p->has_n ? 1 : 0, base_init = base_seq + p->nseq, base_ns = base_init + p->nrec;
    const int nin = n->nin, nout = n->nout, nbin = p->nbin;
    memset(conn, 0, (size_t)nin * (size_t)nout * sizeof *conn);
    bool *bc = tg_calloc((size_t)p->nbout * (size_t)nbin + 1, sizeof *bc);
    int *outer = tg_calloc((size_t)nbin + 1, sizeof *outer), *rec = tg_calloc((size_t)nbin + 1, sizeof *rec);
    int rc = !bc || !outer || !rec ? tg_errorf(ctx, TG_ENOMEM, "out of memory") : TG_OK;
    if (!rc) rc = tg_grad_body_connection(p->body, bc, ctx);
    if (rc) goto done;
    /* The node input behind each body input, and the recurrent output
     * whose tap it is (-1: none). */
    for (int i = 0; i < p->nseq; i++)
        for (int q = 0; q < p->seq_ntaps[i]; q++) {
            int bi = tg_scan_bin_seq(p, i, q);
            outer[bi] = base_seq + i;
            rec[bi] = -1;
        }
    for (int j = 0; j < p->nrec; j++)
        for (int q = 0; q < p->out_ntaps[j]; q++) {
            int bi = tg_scan_bin_rec(p, j, q);
            outer[bi] = base_init + j;
            rec[bi] = j;
        }
    for (int k = 0; k < p->nns; k++) {
        outer[tg_scan_bin_ns(p, k)] = base_ns + k;
        rec[tg_scan_bin_ns(p, k)] = -1;
    }
    const int no = nout < p->nrec + p->nnr ? nout : p->nrec + p->nnr;
    for (int o = 0; o < no; o++)
        for (int bi = 0; bi < nbin; bi++)
            if (bc[(size_t)o * (size_t)nbin + (size_t)bi] && outer[bi] < nin)
                conn[(size_t)outer[bi] * (size_t)nout + (size_t)o] = true;
    for (bool changed = true; changed;) {
        changed = false;
        for (int o = 0; o < no; o++)
            for (int bi = 0; bi < nbin; bi++) {
                int j = rec[bi];
                if (j < 0 || j == o || j >= no || !bc[(size_t)o * (size_t)nbin + (size_t)bi]) continue;
                for (size_t at = 0; at < (size_t)nin * (size_t)nout; at += (size_t)nout)
                    if (conn[at + (size_t)j] && !conn[at + (size_t)o]) {
                        conn[at + (size_t)o] = true;
                        changed = true;
                    }
            }
    }
done:
    tg_free(bc);
    tg_free(outer);
    tg_free(rec);
    return rc;
}

int tg_scan_grad(tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    scan_p *p = n->a.extra;
    tg_fdecl *fd = &p->body->funcs[0];
    const int base_seq = p->has_n ? 1 : 0, base_init = base_seq + p->nseq, base_ns = base_init + p->nrec;
    const int nout = p->nrec + p->nnr;
    bool has_g[SCAN_MAX_IO], carry[SCAN_MAX_IO], dseq[SCAN_MAX_IO], dns[SCAN_MAX_IO];
    int ng = 0, nc = 0, nd = 0, na = 0;
    for (int o = 0; o < nout; o++) {
        has_g[o] = gout[o] && tg_dtype_is_float(n->outputs[o]->type.dtype);
        ng += has_g[o];
    }
    for (int j = 0; j < p->nrec; j++) nc += carry[j] = tg_dtype_is_float(n->outputs[j]->type.dtype);
    for (int i = 0; i < p->nseq; i++) {
        dseq[i] = tg_dtype_is_float(n->inputs[base_seq + i]->type.dtype);
        if (dseq[i]) nd += p->seq_ntaps[i];
    }
    for (int k = 0; k < p->nns; k++) na += dns[k] = tg_dtype_is_float(n->inputs[base_ns + k]->type.dtype);
    if (!ng || nc + nd + na == 0) return TG_OK;

    json_object *jb0 = NULL;
    json_object_object_get_ex(n->attrs, "body", &jb0);
    json_object *body = NULL, *attrs = NULL;
    if (json_object_deep_copy(jb0, &body, NULL)) return tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
    int rc = TG_OK;
    char prefix[64];
    json_object *keep[2] = {NULL, NULL};
    {
        uint64_t h = 1469598103934665603ull;
        for (const char *s = b->prefix ? b->prefix : "g"; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
        snprintf(prefix, sizeof prefix, "bp%08" PRIx64 "_%d:", h & 0xffffffffu, b->serial++);
    }
    if (!rename_ids(body, prefix)) goto oom;
    json_object *vars, *nodes;
    json_object_object_get_ex(body, "variables", &vars);
    json_object_object_get_ex(body, "nodes", &nodes);
    json_object *bin = json_object_new_array(), *bout = json_object_new_array();
    if (!bin || !bout) {
        json_object_put(bin);
        json_object_put(bout);
        goto oom;
    }
    /* The forward body's inputs and outputs, renamed. */
    const char *fin[SCAN_MAX_IO * 2], *fout[SCAN_MAX_IO];
    for (int i = 0; i < fd->nin; i++) fin[i] = jid(body, "inputs", i);
    for (int o = 0; o < fd->nout; o++) fout[o] = jid(body, "outputs", o);
    /* Its inputs and outputs are replaced below: keep the old lists (and
     * so the id strings above) alive until the end. */
    json_object *old_in = NULL, *old_out = NULL;
    json_object_object_get_ex(body, "inputs", &old_in);
    json_object_object_get_ex(body, "outputs", &old_out);
    old_in = json_object_get(old_in);
    old_out = json_object_get(old_out);
    keep[0] = old_in;
    keep[1] = old_out;
    json_object *taps_seq = json_object_new_array(), *taps_out = json_object_new_array();
    json_object_object_add(body, "inputs", bin);
    json_object_object_add(body, "outputs", bout);
    if (!taps_seq || !taps_out) {
        json_object_put(taps_seq);
        json_object_put(taps_out);
        goto oom;
    }
    /* Reverse-scan sequences: the forward sequences, the recurrent
     * outputs' full stacks, the output gradients. */
    for (int i = 0; i < p->nseq; i++) {
        json_object *t = json_object_new_array();
        for (int q = 0; q < p->seq_ntaps[i]; q++) {
            json_object_array_add(t, json_object_new_int(-p->taps[p->seq_off[i] + q]));
            json_object_array_add(bin, js(fin[tg_scan_bin_seq(p, i, q)]));
        }
        json_object_array_add(taps_seq, t);
    }
    for (int j = 0; j < p->nrec; j++) {
        json_object *t = json_object_new_array();
        for (int q = 0; q < p->out_ntaps[j]; q++) {
            json_object_array_add(t, json_object_new_int(-p->taps[p->out_off[j] + q]));
            json_object_array_add(bin, js(fin[tg_scan_bin_rec(p, j, q)]));
        }
        json_object_array_add(taps_seq, t);
    }
    char gname[SCAN_MAX_IO][96], cname[SCAN_MAX_IO][96], tname[SCAN_MAX_IO][96];
    for (int o = 0; o < nout; o++) {
        snprintf(gname[o], sizeof gname[o], "%s.g%d", prefix, o);
        snprintf(tname[o], sizeof tname[o], "%s.tot%d", prefix, o);
        if (!has_g[o]) continue;
        json_object *t = json_object_new_array();
        json_object_array_add(t, json_object_new_int(0));
        json_object_array_add(taps_seq, t);
        json_object_array_add(bin, js(gname[o]));
        const tg_type *ot = &n->outputs[o]->type;
        json_object_array_add(vars, jvar(gname[o], jtype(ot->dtype, ot->ndim - 1, ot->shape + 1)));
    }
    /* The carries. */
    for (int j = 0; j < p->nrec; j++) {
        snprintf(cname[j], sizeof cname[j], "%s.c%d", prefix, j);
        if (!carry[j]) continue;
        const tg_type *it = &n->inputs[base_init + j]->type;
        json_object_array_add(vars, jvar(cname[j], jtype(it->dtype, it->ndim, it->shape)));
        json_object_array_add(bin, js(cname[j]));
        json_object *t = json_object_new_array();
        json_object_array_add(t, json_object_new_int(-1));
        json_object_array_add(taps_out, t);
    }
    /* The non-sequences' gradients, accumulated over the steps. */
    char aname[SCAN_MAX_IO][96];
    for (int k = 0; k < p->nns; k++) {
        snprintf(aname[k], sizeof aname[k], "%s.acc%d", prefix, k);
        if (!dns[k]) continue;
        const tg_type *wt = &n->inputs[base_ns + k]->type;
        json_object_array_add(vars, jvar(aname[k], jtype(wt->dtype, wt->ndim, wt->shape)));
        json_object_array_add(bin, js(aname[k]));
        json_object *t = json_object_new_array();
        json_object_array_add(t, json_object_new_int(-1));
        json_object_array_add(taps_out, t);
    }
    for (int k = 0; k < p->nns; k++) json_object_array_add(bin, js(fin[tg_scan_bin_ns(p, k)]));

    /* The gradient reaching each output of the step, and the cost. */
    char cost[96], buf[96], buf2[96];
    const char *terms[SCAN_MAX_IO];
    char termname[SCAN_MAX_IO][96];
    int nterm = 0;
    snprintf(cost, sizeof cost, "%s.cost", prefix);
    for (int o = 0; o < nout; o++) {
        bool c = o < p->nrec && carry[o];
        if (!has_g[o] && !c) continue;
        const char *pend = NULL;
        if (c) {
            if (p->out_flat[o]) {
                pend = cname[o];
            } else {
                snprintf(buf, sizeof buf, "%s.last%d", prefix, o);
                char at[64];
                snprintf(at, sizeof at, "{\"index\": [%d]}", p->out_k[o] - 1);
                if (!add1(nodes, "subtensor", buf, at, 1, cname[o])) goto oom;
                pend = buf;
            }
        }
        if (has_g[o] && pend) {
            if (!add1(nodes, "add", tname[o], NULL, 2, gname[o], pend)) goto oom;
        } else if (!add1(nodes, "identity", tname[o], NULL, 1, has_g[o] ? gname[o] : pend)) {
            goto oom;
        }
        snprintf(buf2, sizeof buf2, "%s.prod%d", prefix, o);
        if (!add1(nodes, "mul", buf2, NULL, 2, fout[o], tname[o])) goto oom;
        snprintf(termname[nterm], sizeof termname[nterm], "%s.term%d", prefix, o);
        if (!add1(nodes, "sum", termname[nterm], "{\"axis\": null}", 1, buf2)) goto oom;
        terms[nterm] = termname[nterm];
        nterm++;
    }
    {
        json_object *in[SCAN_MAX_IO];
        for (int i = 0; i < nterm; i++) in[i] = js(terms[i]);
        const char *c1 = cost;
        json_object *nn = jnode(nterm == 1 ? "identity" : "add", nterm, in, 1, &c1, NULL);
        if (!nn || json_object_array_add(nodes, nn)) goto oom;
    }
    /* grad(cost, the float inputs the outputs may depend on). */
    int wbin[SCAN_MAX_IO * 2], nw = 0;
    for (int i = 0; i < p->nseq; i++)
        if (dseq[i])
            for (int q = 0; q < p->seq_ntaps[i]; q++) wbin[nw++] = tg_scan_bin_seq(p, i, q);
    for (int j = 0; j < p->nrec; j++)
        if (carry[j])
            for (int q = 0; q < p->out_ntaps[j]; q++) wbin[nw++] = tg_scan_bin_rec(p, j, q);
    for (int k = 0; k < p->nns; k++)
        if (dns[k]) wbin[nw++] = tg_scan_bin_ns(p, k);
    char (*gr)[96] = tg_calloc((size_t)nw + 1, sizeof *gr);
    const char **grp = tg_calloc((size_t)nw + 1, sizeof *grp);
    json_object **gin_j = tg_calloc((size_t)nw + 2, sizeof *gin_j);
    if (!gr || !grp || !gin_j) {
        tg_free(gr);
        tg_free(grp);
        tg_free(gin_j);
        json_object_put(taps_seq);
        json_object_put(taps_out);
        goto oom;
    }
    gin_j[0] = js(cost);
    for (int m = 0; m < nw; m++) {
        snprintf(gr[m], sizeof gr[m], "%s.d%d", prefix, wbin[m]);
        grp[m] = gr[m];
        gin_j[m + 1] = js(fin[wbin[m]]);
    }
    json_object *gnode = jnode("grad", nw + 1, gin_j, nw, grp, "{\"disconnected\": \"ignore\"}");
    tg_free(gin_j);
    bool ok = gnode && !json_object_array_add(nodes, gnode);
    /* The new carries, then the per-step gradients of the sequences and
     * non-sequences. */
    int m = 0;
    for (int i = 0; i < p->nseq; i++)
        if (dseq[i]) m += p->seq_ntaps[i];
    for (int j = 0; j < p->nrec && ok; j++) {
        if (!carry[j]) continue;
        if (p->out_flat[j]) {
            json_object_array_add(bout, js(gr[m++]));
            continue;
        }
        int k = p->out_k[j];
        char lo[96], z0[96], z[96], cur[96], nxt[96], at[128];
        snprintf(lo, sizeof lo, "%s.lo%d", prefix, j);
        snprintf(z0, sizeof z0, "%s.z0_%d", prefix, j);
        snprintf(z, sizeof z, "%s.z%d", prefix, j);
        snprintf(at, sizeof at, "{\"index\": [{\"start\": 0, \"stop\": %d}]}", k - 1);
        ok = ok && add1(nodes, "subtensor", lo, at, 1, cname[j]);
        ok = ok && add1(nodes, "subtensor", z0, "{\"index\": [{\"start\": 0, \"stop\": 1}]}", 1, cname[j]);
        ok = ok && add1(nodes, "zeros_like", z, NULL, 1, z0);
        snprintf(cur, sizeof cur, "%s.shift%d", prefix, j);
        ok = ok && add1(nodes, "join", cur, "{\"axis\": 0}", 2, z, lo);
        for (int q = 0; q < p->out_ntaps[j] && ok; q++, m++) {
            snprintf(nxt, sizeof nxt, "%s.carry%d_%d", prefix, j, q);
            snprintf(at, sizeof at, "{\"index\": [%d]}", k + p->taps[p->out_off[j] + q]);
            ok = add1(nodes, "inc_subtensor", nxt, at, 2, cur, gr[m]);
            memcpy(cur, nxt, sizeof cur);
        }
        if (ok) json_object_array_add(bout, js(cur));
    }
    /* m is at the non-sequences' gradients now. */
    for (int k = 0; k < p->nns && ok; k++) {
        if (!dns[k]) continue;
        char nx[112];
        snprintf(nx, sizeof nx, "%s.acc%d_next", prefix, k);
        ok = add1(nodes, "add", nx, NULL, 2, aname[k], gr[m++]);
        if (ok) json_object_array_add(bout, js(nx));
    }
    m = 0;
    for (int i = 0; i < p->nseq && ok; i++)
        if (dseq[i])
            for (int q = 0; q < p->seq_ntaps[i]; q++) json_object_array_add(bout, js(gr[m++]));
    tg_free(gr);
    tg_free(grp);
    if (!ok) {
        json_object_put(taps_seq);
        json_object_put(taps_out);
        goto oom;
    }

    /* The reverse scan's attrs and inputs. */
    attrs = json_object_new_object();
    if (!attrs) {
        json_object_put(taps_seq);
        json_object_put(taps_out);
        goto oom;
    }
    json_object_object_add(attrs, "body", body);
    body = NULL;
    json_object_object_add(attrs, "n_sequences", json_object_new_int(p->nseq + p->nrec + ng));
    json_object_object_add(attrs, "sequence_taps", taps_seq);
    json_object_object_add(attrs, "n_recurrent", json_object_new_int(nc + na));
    json_object_object_add(attrs, "output_taps", taps_out);
    json_object_object_add(attrs, "n_nonrecurrent", json_object_new_int(nd));
    json_object_object_add(attrs, "n_non_sequences", json_object_new_int(p->nns));
    json_object_object_add(attrs, "has_n_steps", json_object_new_boolean(1));
    json_object_object_add(attrs, "has_until", json_object_new_boolean(0));
    json_object_object_add(attrs, "go_backwards", json_object_new_boolean(1));
    json_object_object_add(attrs, "truncate_gradient", json_object_new_int(-1));
    {
        json_object *jn;
        char nm[200];
        json_object_object_get_ex(n->attrs, "name", &jn);
        snprintf(nm, sizeof nm, "grad_of_%s", jn ? json_object_get_string(jn) : "scan");
        json_object_object_add(attrs, "name", js(nm));
    }

    int nsin = 1 + p->nseq + p->nrec + ng + nc + na + p->nns;
    tg_var **sin = tg_calloc((size_t)nsin + 1, sizeof *sin);
    tg_var **seq_eff = tg_calloc((size_t)p->nseq + 1, sizeof *seq_eff);
    if (!sin || !seq_eff) {
        tg_free(sin);
        tg_free(seq_eff);
        goto oom;
    }
    tg_var *T = op_attrs(b, "shape_i", 1, &n->outputs[0], "{\"i\": 0}");
    tg_var *G = T;
    if (T && p->trunc > 0) G = tg_gb_op2(b, "minimum", T, i64c(b, p->trunc));
    int at = 0;
    sin[at++] = G;
    for (int i = 0; i < p->nseq; i++) {
        tg_var *s = n->inputs[base_seq + i];
        tg_var *se = p->backwards ? reversed(b, s) : s;
        seq_eff[i] = se;
        tg_var *stop = tg_gb_op2(b, "add", T, i64c(b, p->seq_span[i]));
        tg_var *in2[2] = {se, stop};
        sin[at++] = op_attrs(b, "subtensor", 2, in2, "{\"index\": [{\"start\": 0, \"stop\": \"$0\"}]}");
    }
    for (int j = 0; j < p->nrec; j++) {
        tg_var *init = n->inputs[base_init + j];
        tg_var *lead = p->out_flat[j] ? op_attrs(b, "expand_dims", 1, &init, "{\"axis\": 0}") : init;
        tg_var *in2[2] = {lead, n->outputs[j]};
        sin[at++] = op_attrs(b, "join", 2, in2, "{\"axis\": 0}");
    }
    for (int o = 0; o < nout; o++)
        if (has_g[o]) sin[at++] = gout[o];
    for (int j = 0; j < p->nrec; j++)
        if (carry[j]) sin[at++] = tg_gb_op1(b, "zeros_like", n->inputs[base_init + j], NULL);
    for (int k = 0; k < p->nns; k++)
        if (dns[k]) sin[at++] = tg_gb_op1(b, "zeros_like", n->inputs[base_ns + k], NULL);
    for (int k = 0; k < p->nns; k++) sin[at++] = n->inputs[base_ns + k];
    for (int i = 0; i < nsin; i++)
        if (!sin[i]) {
            rc = rc_of(b);
            json_object_put(attrs);
            attrs = NULL;
            goto outer_done;
        }
    tg_node *bw = tg_gb_node(b, tg_op_find("scan"), nsin, sin, nc + na + nd, attrs);
    json_object_put(attrs);
    attrs = NULL;
    if (!bw) {
        rc = rc_of(b);
        goto outer_done;
    }
    /* Initial states: the last carry (zeros after no step). */
    int ko = 0;
    tg_var *D = NULL;
    if (p->trunc > 0) D = tg_gb_op2(b, "sub", T, G);
    for (int j = 0; j < p->nrec; j++) {
        if (!carry[j]) continue;
        tg_var *cs = bw->outputs[ko++];
        tg_var *last = op_attrs(b, "subtensor", 1, &cs, "{\"index\": [{\"start\": -1}]}");
        tg_var *cf = op_attrs(b, "sum", 1, &last, "{\"axis\": 0}");
        if (cf && p->trunc > 0) {
            /* Truncated: the carry holds positions D - k .. D - 1 (D = T -
             * G steps were not reversed); the initial state is positions
             * -k .. -1. Rows [k - min(D, k), 2k - min(D, k)) of [zeros;
             * carry] are those. */
            int k = p->out_k[j];
            tg_var *z = tg_gb_op1(b, "zeros_like", cf, NULL);
            tg_var *zc[2] = {z, cf};
            if (p->out_flat[j]) {
                zc[0] = op_attrs(b, "expand_dims", 1, &z, "{\"axis\": 0}");
                zc[1] = op_attrs(b, "expand_dims", 1, &cf, "{\"axis\": 0}");
            }
            tg_var *both = op_attrs(b, "join", 2, zc, "{\"axis\": 0}");
            tg_var *dc = tg_gb_op2(b, "minimum", D, i64c(b, k));
            tg_var *start = tg_gb_op2(b, "sub", i64c(b, k), dc);
            if (p->out_flat[j]) {
                tg_var *in2[2] = {both, start};
                cf = op_attrs(b, "subtensor", 2, in2, "{\"index\": [\"$0\"]}");
            } else {
                tg_var *stop = tg_gb_op2(b, "add", start, i64c(b, k));
                tg_var *in3[3] = {both, start, stop};
                cf = op_attrs(b, "subtensor", 3, in3, "{\"index\": [{\"start\": \"$0\", \"stop\": \"$1\"}]}");
            }
        }
        if (!cf) {
            rc = rc_of(b);
            goto outer_done;
        }
        gin[base_init + j] = cf;
    }
    /* Non-sequences: the accumulated gradient after the last step (zeros
     * after none). */
    for (int k = 0; k < p->nns; k++) {
        if (!dns[k]) continue;
        tg_var *as = bw->outputs[ko++];
        tg_var *last = op_attrs(b, "subtensor", 1, &as, "{\"index\": [{\"start\": -1}]}");
        tg_var *s = op_attrs(b, "sum", 1, &last, "{\"axis\": 0}");
        if (!s) {
            rc = rc_of(b);
            goto outer_done;
        }
        gin[base_ns + k] = s;
    }
    /* Sequences: each tap's rows added back where the steps read them. */
    for (int i = 0; i < p->nseq; i++) {
        if (!dseq[i]) continue;
        tg_var *acc = tg_gb_op1(b, "zeros_like", seq_eff[i], NULL);
        for (int q = 0; q < p->seq_ntaps[i]; q++) {
            tg_var *dq = bw->outputs[ko++];
            tg_var *fwd = reversed(b, dq);
            int off = p->taps[p->seq_off[i] + q] - p->seq_min[i];
            tg_var *start = tg_gb_op2(b, "add", tg_gb_op2(b, "sub", T, G), i64c(b, off));
            tg_var *stop = tg_gb_op2(b, "add", T, i64c(b, off));
            /* After 0 reverse steps a per-step shape the body does not
             * give statically is all 0s (ops/scan.c): (0, 0) for rows of
             * 3. The rows are then reshaped to those they add to (the
             * same count of elements whatever the steps). */
            bool known = true;
            for (int d = 1; d < dq->type.ndim; d++) known &= dq->type.shape[d] >= 0;
            if (!known && fwd) {
                tg_var *in3[3] = {seq_eff[i], start, stop};
                tg_var *rows = op_attrs(b, "subtensor", 3, in3, "{\"index\": [{\"start\": \"$0\", \"stop\": \"$1\"}]}");
                tg_var *shp = rows ? tg_gb_op1(b, "shape", rows, NULL) : NULL;
                tg_var *in2[2] = {fwd, shp};
                fwd = shp ? tg_gb_op(b, "reshape", 2, in2, NULL) : NULL;
            }
            tg_var *in4[4] = {acc, fwd, start, stop};
            acc = op_attrs(b, "inc_subtensor", 4, in4, "{\"index\": [{\"start\": \"$0\", \"stop\": \"$1\"}]}");
        }
        if (acc && p->backwards) acc = reversed(b, acc);
        if (!acc) {
            rc = rc_of(b);
            goto outer_done;
        }
        gin[base_seq + i] = acc;
    }
outer_done:
    tg_free(sin);
    tg_free(seq_eff);
    json_object_put(keep[0]);
    json_object_put(keep[1]);
    return rc;
oom:
    json_object_put(body);
    json_object_put(attrs);
    json_object_put(keep[0]);
    json_object_put(keep[1]);
    return tg_errorf(b->ctx, TG_ENOMEM, "out of memory");
}
