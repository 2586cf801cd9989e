/* The scan op (FORMAT.md s7): Theano's Scan, a loop whose step is a body
 * graph. The node parses its body when the file is loaded (every
 * inconsistency between the attrs, the node's inputs and the body is one
 * load error naming the attr or the input) and compiles it, with the
 * optimizer, into a nested function the first time it runs; each step
 * then runs that function's schedule on views of the sequences' rows and
 * of the rows that earlier steps wrote, without building anything per
 * step. See docs/scan.md.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"
#include "io/io.h"
#include "ops/scan.h"
#include "vm/vm.h"

/* ---- attributes ---- */

static void scan_free_extra(tg_attrs *a) {
    scan_p *p = a->extra;
    if (!p) return;
    tg_function_free(p->fn);
    tg_graph_free(p->body);
    tg_free(p->taps);
    tg_free(p->seq_ntaps);
    tg_free(p);
    a->extra = NULL;
}

/* attrs.<key>: a list of `count` non-empty lists of distinct integers
 * (negative only when `negative`), flattened into taps[]. */
static int read_taps(tg_node *n, const char *key, int count, bool negative,
                     int *ntaps, int **first, int *taps, int *used, int cap, tg_ctx *ctx) {
    json_object *j = NULL;
    if (!n->attrs || !json_object_object_get_ex(n->attrs, key, &j))
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by scan", key);
    if (!json_object_is_type(j, json_type_array) || (int)json_object_array_length(j) != count)
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: expected a list of %d tap list%s (one per %s)",
                         key, count, count == 1 ? "" : "s",
                         negative ? "recurrent output" : "sequence");
    for (int i = 0; i < count; i++) {
        json_object *l = json_object_array_get_idx(j, (size_t)i);
        int m = json_object_is_type(l, json_type_array) ? (int)json_object_array_length(l) : 0;
        if (m == 0)
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s[%d]: expected a non-empty list of integers",
                             key, i);
        first[i] = taps + *used;
        ntaps[i] = m;
        for (int k = 0; k < m; k++) {
            json_object *e = json_object_array_get_idx(l, (size_t)k);
            if (!json_object_is_type(e, json_type_int))
                return tg_errorf(ctx, TG_ELOAD, "attrs.%s[%d][%d]: expected an integer", key, i, k);
            int64_t v = json_object_get_int64(e);
            if (v < -SCAN_MAX_TAP || v > SCAN_MAX_TAP)
                return tg_errorf(ctx, TG_ELOAD, "attrs.%s[%d][%d]: tap %s is out of range "
                                 "(|tap| <= %d)", key, i, k, tg_json_text(e), SCAN_MAX_TAP);
            if (negative && v >= 0)
                return tg_errorf(ctx, TG_ELOAD, "attrs.%s[%d][%d]: tap %" PRId64 ": the taps of a "
                                 "recurrent output read past steps and must be negative",
                                 key, i, k, v);
            for (int q = 0; q < k; q++)
                if (first[i][q] == v)
                    return tg_errorf(ctx, TG_ELOAD, "attrs.%s[%d][%d]: tap %" PRId64 " is listed twice",
                                     key, i, k, v);
            if (*used >= cap) return tg_errorf(ctx, TG_ELOAD, "attrs.%s: too many taps", key);
            taps[(*used)++] = (int)v;
        }
    }
    return TG_OK;
}

static int req_bool(tg_node *n, const char *key, bool *out, tg_ctx *ctx) {
    if (!n->attrs || !json_object_object_get_ex(n->attrs, key, NULL))
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: required by scan (true or false)", key);
    return tg_attr_bool(n, key, false, out, ctx);
}

static int count_attr(tg_node *n, const char *key, int *out, tg_ctx *ctx) {
    int64_t v;
    int rc = tg_attr_int(n, key, false, 0, &v, ctx);
    if (rc) return rc;
    if (v < 0 || v > SCAN_MAX_IO)
        return tg_errorf(ctx, TG_ELOAD, "attrs.%s: %" PRId64 " is out of range (0..%d)", key, v,
                         SCAN_MAX_IO);
    *out = (int)v;
    return TG_OK;
}

static int scan_parse_attrs(tg_node *n, tg_ctx *ctx) {
    scan_p *p = tg_calloc(1, sizeof *p);
    int rc;
    char *name = NULL;
    if (!p) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    if ((rc = count_attr(n, "n_sequences", &p->nseq, ctx)) ||
        (rc = count_attr(n, "n_recurrent", &p->nrec, ctx)) ||
        (rc = count_attr(n, "n_nonrecurrent", &p->nnr, ctx)) ||
        (rc = count_attr(n, "n_non_sequences", &p->nns, ctx)) ||
        (rc = req_bool(n, "has_n_steps", &p->has_n, ctx)) ||
        (rc = req_bool(n, "has_until", &p->has_until, ctx)) ||
        (rc = tg_attr_bool(n, "go_backwards", false, &p->backwards, ctx)) ||
        (rc = tg_attr_int(n, "truncate_gradient", true, -1, &p->trunc, ctx)) ||
        (rc = tg_attr_string(n, "name", "scan", &name, ctx)))
        goto fail;
    tg_free(name);
    if (p->trunc == 0 || p->trunc < -1) {
        rc = tg_errorf(ctx, TG_ELOAD, "attrs.truncate_gradient: %" PRId64 ": expected -1 (no "
                       "truncation) or a positive number of steps", p->trunc);
        goto fail;
    }
    if (p->nrec + p->nnr + 1 > SCAN_MAX_IO) {
        rc = tg_errorf(ctx, TG_ELOAD, "attrs.n_recurrent, attrs.n_nonrecurrent: more than %d outputs",
                       SCAN_MAX_IO - 1);
        goto fail;
    }
    if (p->nrec + p->nnr == 0) {
        rc = tg_errorf(ctx, TG_ELOAD, "attrs.n_recurrent, attrs.n_nonrecurrent: a scan needs at "
                       "least one output");
        goto fail;
    }
    if (!p->has_n && p->nseq == 0 && !p->has_until) {
        rc = tg_errorf(ctx, TG_ELOAD, "attrs.has_n_steps: the number of steps is unknown: a scan "
                       "without sequences and without `until` needs n_steps");
        goto fail;
    }
    int cap = 0;
    {
        json_object *j;
        for (int w = 0; w < 2; w++)
            if (n->attrs && json_object_object_get_ex(n->attrs, w ? "output_taps" : "sequence_taps", &j) &&
                json_object_is_type(j, json_type_array))
                for (size_t i = 0; i < json_object_array_length(j); i++) {
                    json_object *l = json_object_array_get_idx(j, i);
                    if (json_object_is_type(l, json_type_array)) cap += (int)json_object_array_length(l);
                }
    }
    if (cap > SCAN_MAX_IO) {
        rc = tg_errorf(ctx, TG_ELOAD, "attrs.sequence_taps, attrs.output_taps: more than %d taps",
                       SCAN_MAX_IO);
        goto fail;
    }
    p->seq_ntaps = tg_calloc((size_t)(2 * (p->nseq + p->nrec)) + 1, sizeof(int));
    p->taps = tg_calloc((size_t)cap + 1, sizeof(int));
    int **firsts = tg_calloc((size_t)(p->nseq + p->nrec) + 1, sizeof(int *));
    if (!p->seq_ntaps || !p->taps || !firsts) {
        tg_free(firsts);
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    p->out_ntaps = p->seq_ntaps + p->nseq;
    p->seq_off = p->out_ntaps + p->nrec;
    p->out_off = p->seq_off + p->nseq;
    int used = 0;
    rc = read_taps(n, "sequence_taps", p->nseq, false, p->seq_ntaps, firsts, p->taps, &used, cap, ctx);
    if (!rc)
        rc = read_taps(n, "output_taps", p->nrec, true, p->out_ntaps, firsts + p->nseq, p->taps,
                       &used, cap, ctx);
    if (!rc) {
        for (int i = 0; i < p->nseq + p->nrec; i++) {
            int off = (int)(firsts[i] - p->taps);
            if (i < p->nseq) p->seq_off[i] = off;
            else p->out_off[i - p->nseq] = off;
        }
    }
    tg_free(firsts);
    if (rc) goto fail;
    for (int i = 0; i < p->nseq; i++) {
        const int *t = p->taps + p->seq_off[i];
        int mn = 0, mx = 0;
        for (int k = 0; k < p->seq_ntaps[i]; k++) {
            if (t[k] < mn) mn = t[k];
            if (t[k] > mx) mx = t[k];
        }
        p->seq_min[i] = mn;
        p->seq_span[i] = mx - mn;
    }
    for (int j = 0; j < p->nrec; j++) {
        const int *t = p->taps + p->out_off[j];
        int k = 0;
        for (int q = 0; q < p->out_ntaps[j]; q++)
            if (-t[q] > k) k = -t[q];
        p->out_k[j] = k;
        p->out_flat[j] = p->out_ntaps[j] == 1 && t[0] == -1;
    }
    p->nbin = 0;
    for (int i = 0; i < p->nseq; i++) p->nbin += p->seq_ntaps[i];
    for (int j = 0; j < p->nrec; j++) p->nbin += p->out_ntaps[j];
    p->nbin += p->nns;
    p->nbout = p->nrec + p->nnr + (p->has_until ? 1 : 0);

    /* The body. */
    json_object *jb;
    if (!json_object_object_get_ex(n->attrs, "body", &jb)) {
        rc = tg_errorf(ctx, TG_ELOAD, "attrs.body: required by scan (a graph: variables, nodes, "
                       "inputs, outputs)");
        goto fail;
    }
    if (!(p->body = tg_body_load(jb, "attrs.body", ctx))) {
        rc = ctx ? ctx->status : TG_ELOAD;
        goto fail;
    }
    tg_fdecl *fd = &p->body->funcs[0];
    if (fd->nin != p->nbin) {
        int st = 0, rt = 0;
        for (int i = 0; i < p->nseq; i++) st += p->seq_ntaps[i];
        for (int j = 0; j < p->nrec; j++) rt += p->out_ntaps[j];
        rc = tg_errorf(ctx, TG_ELOAD,
                       "attrs.body.inputs: the body takes %d input%s, but the taps and "
                       "non-sequences give it %d (%d sequence taps, %d recurrent taps, "
                       "%d non-sequences)", fd->nin, fd->nin == 1 ? "" : "s", p->nbin, st, rt,
                       p->nns);
        goto fail;
    }
    if (fd->nout != p->nbout) {
        rc = tg_errorf(ctx, TG_ELOAD,
                       "attrs.body.outputs: the body gives %d output%s, but n_recurrent %d + "
                       "n_nonrecurrent %d%s make %d", fd->nout, fd->nout == 1 ? "" : "s", p->nrec,
                       p->nnr, p->has_until ? " + until 1" : "", p->nbout);
        goto fail;
    }
    for (int i = 0; i < p->body->nvars; i++)
        if (p->body->vars[i]->kind == TG_VAR_SHARED) {
            rc = tg_errorf(ctx, TG_ELOAD,
                           "attrs.body.variables[%d]: '%s' is shared: a scan body holds no shared "
                           "state (pass the value as a non-sequence, and thread state such as a "
                           "random generator through a recurrent output)",
                           p->body->vars[i]->json_index, p->body->vars[i]->id);
            goto fail;
        }
    if (p->has_until) {
        const tg_type *t = &fd->outputs[p->nbout - 1]->type;
        if (t->dtype != TG_BOOL || t->ndim != 0) {
            char ts[160];
            tg_type_str(t, ts, sizeof ts);
            rc = tg_errorf(ctx, TG_ELOAD, "attrs.body.outputs[%d]: the until condition '%s' must be "
                           "a bool scalar, got %s", p->nbout - 1, fd->outputs[p->nbout - 1]->id, ts);
            goto fail;
        }
    }
    /* keep_last: written by the optimizer (scan_keep_last) when only the
     * last steps of an output are read. */
    json_object *jk;
    if (json_object_object_get_ex(n->attrs, "keep_last", &jk) && !json_object_is_type(jk, json_type_null)) {
        int no = p->nrec + p->nnr;
        if (!json_object_is_type(jk, json_type_array) || (int)json_object_array_length(jk) != no) {
            rc = tg_errorf(ctx, TG_ELOAD, "attrs.keep_last: expected a list of %d integer%s (one "
                           "per output: how many last steps it keeps, 0 for all)", no,
                           no == 1 ? "" : "s");
            goto fail;
        }
        for (int o = 0; o < no; o++) {
            json_object *e = json_object_array_get_idx(jk, (size_t)o);
            int64_t v = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : -1;
            if (v < 0) {
                rc = tg_errorf(ctx, TG_ELOAD, "attrs.keep_last[%d]: expected an integer >= 0", o);
                goto fail;
            }
            p->keep[o] = v;
            p->has_keep |= v > 0;
        }
    }
    n->a.extra = p;
    return TG_OK;
fail:
    scan_free_extra(&(tg_attrs){.extra = p});
    return rc;
}

/* ---- types ---- */

/* The body input for tap q of sequence i / recurrent output j, or the
 * non-sequence number k. */
int tg_scan_bin_seq(const scan_p *p, int i, int q) {
    int b = 0;
    for (int a = 0; a < i; a++) b += p->seq_ntaps[a];
    return b + q;
}
int tg_scan_bin_rec(const scan_p *p, int j, int q) {
    int b = 0;
    for (int a = 0; a < p->nseq; a++) b += p->seq_ntaps[a];
    for (int a = 0; a < j; a++) b += p->out_ntaps[a];
    return b + q;
}
int tg_scan_bin_ns(const scan_p *p, int k) { return p->nbin - p->nns + k; }

/* The body variable `bv` must take values of dtype dt, ndim nd and the
 * static lengths `shape` (-1 unknown). */
static int check_body_var(const tg_node *n, const tg_var *bv, const char *bwhere, int bi,
                          tg_dtype dt, int nd, const int64_t *shape, const char *what,
                          tg_ctx *ctx) {
    tg_type t = {dt, nd, {0}};
    for (int d = 0; d < nd; d++) t.shape[d] = shape[d];
    if (bv->type.dtype == dt && bv->type.ndim == nd && tg_type_compatible(&bv->type, &t))
        return TG_OK;
    char want[160], got[160];
    tg_type_str(&t, want, sizeof want);
    tg_type_str(&bv->type, got, sizeof got);
    TG_UNUSED(n);
    return tg_errorf(ctx, TG_ETYPE, "attrs.body.%s[%d] '%s' is %s, but %s gives %s", bwhere, bi,
                     bv->id, got, what, want);
}

/* The static number of rows of output o over `steps` steps (-1 unknown). */
static int64_t kept_rows(const scan_p *p, int o, int64_t steps) {
    if (!p->keep[o]) return steps;
    return steps >= 0 && steps < p->keep[o] ? steps : steps >= 0 ? p->keep[o] : -1;
}

static int scan_infer(tg_node *n, tg_ctx *ctx) {
    scan_p *p = n->a.extra;
    tg_fdecl *fd = &p->body->funcs[0];
    int rc, want = (p->has_n ? 1 : 0) + p->nseq + p->nrec + p->nns;
    if (n->nin != want)
        return tg_errorf(ctx, TG_ELOAD,
                         "inputs: scan takes %d input%s here (%s%d sequences, %d initial states, "
                         "%d non-sequences), the node gives %d", want, want == 1 ? "" : "s",
                         p->has_n ? "n_steps, " : "", p->nseq, p->nrec, p->nns, n->nin);
    if (n->nout != p->nrec + p->nnr)
        return tg_errorf(ctx, TG_ELOAD, "outputs: scan gives %d output%s here (n_recurrent %d + "
                         "n_nonrecurrent %d), the node lists %d", p->nrec + p->nnr,
                         p->nrec + p->nnr == 1 ? "" : "s", p->nrec, p->nnr, n->nout);
    int at = 0;
    char what[200];
    if (p->has_n) {
        tg_var *v = n->inputs[0];
        if (v->weak && tg_dtype_is_int(v->type.dtype) && (rc = tg_weak_take(n, 0, TG_INT64, ctx))) return rc;
        if (v->type.ndim != 0 || !tg_dtype_is_int(v->type.dtype))
            return tg_errorf(ctx, TG_ETYPE, "inputs[0] '%s' (n_steps): expected an integer scalar, "
                             "got %s with %d dimension%s", tg_var_label(v),
                             tg_dtype_name(v->type.dtype), v->type.ndim, v->type.ndim == 1 ? "" : "s");
        at = 1;
    }
    int64_t steps = -1; /* static number of steps, when known */
    if (p->has_n && !p->has_until && n->inputs[0]->kind == TG_VAR_CONSTANT)
        steps = tg_load_len(n->inputs[0]->value->dtype, n->inputs[0]->value->data);
    bool seq_known = !p->has_n && !p->has_until;
    for (int i = 0; i < p->nseq; i++, at++) {
        tg_var *v = n->inputs[at];
        if (v->type.ndim < 1)
            return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s' (sequence %d): a sequence needs at "
                             "least one dimension (the steps), got a scalar", at, tg_var_label(v), i);
        if (seq_known) {
            int64_t len = v->type.shape[0];
            if (len < 0) {
                seq_known = false;
                steps = -1;
            } else {
                int64_t u = len - p->seq_span[i];
                if (u < 0) u = 0;
                if (steps < 0 || u < steps) steps = u;
            }
        }
        snprintf(what, sizeof what, "inputs[%d] '%s' (sequence %d) sliced by a step", at,
                 tg_var_label(v), i);
        for (int q = 0; q < p->seq_ntaps[i]; q++) {
            int b = tg_scan_bin_seq(p, i, q);
            if ((rc = check_body_var(n, fd->inputs[b], "inputs", b, v->type.dtype, v->type.ndim - 1,
                                     v->type.shape + 1, what, ctx)))
                return rc;
        }
    }
    if (p->has_n && steps < 0 && !p->has_until && n->inputs[0]->kind != TG_VAR_CONSTANT) steps = -1;
    for (int j = 0; j < p->nrec; j++, at++) {
        tg_var *v = n->inputs[at];
        const tg_var *bo = fd->outputs[j];
        if (v->weak && (rc = tg_weak_take(n, at, bo->type.dtype, ctx))) return rc;
        int nd = bo->type.ndim;
        int want_nd = p->out_flat[j] ? nd : nd + 1;
        if (v->type.dtype != bo->type.dtype || v->type.ndim != want_nd) {
            char got[160], bt[160];
            tg_type_str(&v->type, got, sizeof got);
            tg_type_str(&bo->type, bt, sizeof bt);
            if (p->out_flat[j])
                return tg_errorf(ctx, TG_ETYPE,
                                 "inputs[%d] '%s' (initial state of recurrent output %d, taps [-1]): "
                                 "expected %s with %d dimension%s like the body's output '%s' (%s), "
                                 "got %s", at, tg_var_label(v), j, tg_dtype_name(bo->type.dtype), nd,
                                 nd == 1 ? "" : "s", bo->id, bt, got);
            return tg_errorf(ctx, TG_ETYPE,
                             "inputs[%d] '%s' (initial state of recurrent output %d): expected %s "
                             "with %d dimensions (%d past steps, oldest first, of the body's output "
                             "'%s', %s), got %s", at, tg_var_label(v), j,
                             tg_dtype_name(bo->type.dtype), want_nd, p->out_k[j], bo->id, bt, got);
        }
        const int64_t *row = v->type.shape + (p->out_flat[j] ? 0 : 1);
        if (!p->out_flat[j] && v->type.shape[0] >= 0 && v->type.shape[0] != p->out_k[j])
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[%d] '%s' (initial state of recurrent output %d): its leading "
                             "dimension is %" PRId64 ", but the taps reach %d steps back",
                             at, tg_var_label(v), j, v->type.shape[0], p->out_k[j]);
        tg_type rt = {bo->type.dtype, nd, {0}};
        for (int d = 0; d < nd; d++) rt.shape[d] = row[d];
        if (!tg_type_compatible(&bo->type, &rt)) {
            char got[160], bt[160];
            tg_type_str(&rt, got, sizeof got);
            tg_type_str(&bo->type, bt, sizeof bt);
            return tg_errorf(ctx, TG_ESHAPE,
                             "inputs[%d] '%s' (initial state of recurrent output %d): a step of it "
                             "is %s, but the body's output '%s' is %s", at, tg_var_label(v), j, got,
                             bo->id, bt);
        }
        snprintf(what, sizeof what, "inputs[%d] '%s' (initial state of recurrent output %d)", at,
                 tg_var_label(v), j);
        for (int q = 0; q < p->out_ntaps[j]; q++) {
            int b = tg_scan_bin_rec(p, j, q);
            if ((rc = check_body_var(n, fd->inputs[b], "inputs", b, bo->type.dtype, nd, row, what,
                                     ctx)))
                return rc;
        }
        int64_t shp[TG_MAX_NDIM];
        if (nd + 1 > TG_MAX_NDIM)
            return tg_errorf(ctx, TG_ESHAPE, "attrs.body.outputs[%d]: too many dimensions to stack", j);
        shp[0] = kept_rows(p, j, steps);
        for (int d = 0; d < nd; d++) shp[d + 1] = bo->type.shape[d] >= 0 ? bo->type.shape[d] : row[d];
        tg_set_out_type(n, j, bo->type.dtype, nd + 1, shp);
    }
    for (int k = 0; k < p->nns; k++, at++) {
        tg_var *v = n->inputs[at];
        int b = tg_scan_bin_ns(p, k);
        const tg_var *bv = fd->inputs[b];
        if (v->weak && (rc = tg_weak_take(n, at, bv->type.dtype, ctx))) return rc;
        snprintf(what, sizeof what, "inputs[%d] '%s' (non-sequence %d)", at, tg_var_label(v), k);
        if ((rc = check_body_var(n, bv, "inputs", b, v->type.dtype, v->type.ndim, v->type.shape,
                                 what, ctx)))
            return rc;
    }
    for (int k = 0; k < p->nnr; k++) {
        const tg_var *bo = fd->outputs[p->nrec + k];
        int nd = bo->type.ndim;
        if (nd + 1 > TG_MAX_NDIM)
            return tg_errorf(ctx, TG_ESHAPE, "attrs.body.outputs[%d]: too many dimensions to stack",
                             p->nrec + k);
        int64_t shp[TG_MAX_NDIM];
        shp[0] = kept_rows(p, p->nrec + k, steps);
        for (int d = 0; d < nd; d++) shp[d + 1] = bo->type.shape[d];
        tg_set_out_type(n, p->nrec + k, bo->type.dtype, nd + 1, shp);
    }
    return TG_OK;
}

/* ---- running ---- */

static void shape_text(int nd, const int64_t *s, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < nd && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%" PRId64, d ? ", " : "", s[d]);
    if (k < size) snprintf(buf + k, size - k, nd == 1 ? ",)" : ")");
}

/* One stacked output being filled: `full` holds `lead` rows before the
 * steps (a recurrent output's initial state) and room for `cap` steps. */
typedef struct stack_buf {
    tg_array *full;
    int64_t lead, cap;
    int64_t ring; /* > 0: only `ring` rows, row r at r % ring (keep_last) */
    int nd; /* per-step ndim */
    int64_t row[TG_MAX_NDIM];
    size_t rowbytes;
    bool have_row; /* row shape known (a non-recurrent output's after step 0) */
} stack_buf;

/* A body input view and how it moves: at step t its data is base + t *
 * stride (or, in a keep_last ring, ring row off + t). */
typedef struct mover {
    tg_array *v;
    char *base;
    int64_t stride;
    const stack_buf *ring; /* a keep_last ring: the row is ring row `off + t` */
    int64_t off;
} mover;

static int stack_alloc(stack_buf *s, tg_dtype dt, int64_t rows, tg_ctx *ctx) {
    int64_t shp[TG_MAX_NDIM];
    shp[0] = rows;
    for (int d = 0; d < s->nd; d++) shp[d + 1] = s->row[d];
    if (tg_shape_size(s->nd + 1, shp) < 0)
        return tg_errorf(ctx, TG_ESHAPE, "the stacked output of %" PRId64 " rows is too large", rows);
    tg_array *a = tg_array_empty(dt, s->nd + 1, shp);
    if (!a)
        return tg_errorf(ctx, TG_ENOMEM, "cannot allocate the stacked output (%" PRId64 " rows)", rows);
    if (s->full) {
        int64_t keep = s->full->shape[0] < rows ? s->full->shape[0] : rows;
        if (keep > 0) memcpy(a->data, s->full->data, (size_t)keep * s->rowbytes);
        tg_array_free(s->full);
    }
    s->full = a;
    return TG_OK;
}

static inline char *stack_row(const stack_buf *s, int64_t r) {
    if (s->ring) r %= s->ring;
    return s->full->data + (size_t)r * s->rowbytes;
}

/* Output o keeps its last p->keep[o] steps in a ring of this many rows
 * (room for the taps' reach back and the step being written), or 0: the
 * whole stack (no keep_last, or the steps fit anyway). */
static int64_t ring_rows(const scan_p *p, int o, int64_t lead, int64_t T) {
    int64_t k = p->keep[o];
    if (!k || (!p->has_until && k >= T)) return 0;
    return k > lead + 1 ? k : lead + 1;
}

/* The view of rows [lead, lead + steps) of s: the op's output. A ring
 * gives a copy of its last `keep` steps, oldest first. */
static tg_array *stack_result(stack_buf *s, tg_dtype dt, int64_t steps, const tg_type *t,
                              int64_t keep) {
    int64_t shp[TG_MAX_NDIM], st[TG_MAX_NDIM];
    int nd = s->nd + 1;
    if (!s->have_row) {
        /* No step ran and the per-step shape is unknown: the static
         * lengths, 0 where none is known (the array holds no element). */
        for (int d = 0; d < s->nd; d++) s->row[d] = t->shape[d + 1] >= 0 ? t->shape[d + 1] : 0;
    }
    int64_t first = 0;
    if (keep && steps > keep) {
        first = steps - keep;
        steps = keep;
    }
    shp[0] = steps;
    for (int d = 0; d < s->nd; d++) shp[d + 1] = s->row[d];
    if (!s->full) return tg_array_empty(dt, nd, shp);
    if (s->ring) {
        tg_array *a = tg_array_empty(dt, nd, shp);
        for (int64_t r = 0; a && r < steps; r++)
            memcpy(a->data + (size_t)r * s->rowbytes, stack_row(s, s->lead + first + r), s->rowbytes);
        return a;
    }
    tg_strides_contiguous(dt, nd, shp, st);
    return tg_array_view_raw(s->full, dt, nd, shp, st, stack_row(s, s->lead + first));
}

int tg_scan_compile_body(tg_node *n, tg_ctx *ctx) {
    scan_p *p = n->a.extra;
    if (p->fn) return TG_OK;
    /* The body runs on the CPU whatever TG_DEVICE says: its values live
     * in the rows of the stacked outputs, on the host. */
    /* no_gc: every intermediate keeps its buffer from step to step (the
     * VM would free the large ones after their last reader, and allocate
     * them again the next step). */
    tg_compile_options o = {.preset = "fast_run", .device = "cpu", .no_gc = true};
    p->fn = tg_function_compile(p->body, 0, &o, ctx);
    if (!p->fn) {
        tg_error_prefix(ctx, "compiling the body");
        return ctx ? ctx->status : TG_ELOAD;
    }
    /* Each step's outputs land in their rows through windows (below): an
     * output node that would overwrite its input in place instead would
     * only force a copy into the row. And an output slot that holds a
     * body input or a constant, or that two outputs share, gets no
     * window. */
    tg_function *f = p->fn;
    for (int o = 0; o < f->fg->nout; o++) {
        int s = f->out_slots[o];
        tg_var *v = f->slot_var[s];
        bool ok = v->owner != NULL;
        for (int q = 0; q < o; q++) ok &= f->out_slots[q] != s;
        p->win_ok[o] = ok;
        if (v->owner && v->owner->inplace) {
            tg_free(v->owner->inplace);
            v->owner->inplace = NULL;
        }
    }
    return TG_OK;
}

/* The row of sequence s at step t for tap `tap` (go_backwards reads the
 * sequence reversed). */
static inline int64_t seq_row(const scan_p *p, int i, int64_t len, int64_t t, int tap) {
    int64_t r = t - p->seq_min[i] + tap;
    return p->backwards ? len - 1 - r : r;
}

static int scan_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    scan_p *p = n->a.extra;
    int rc;
    if ((rc = tg_scan_compile_body(n, ctx))) return rc;
    tg_function *f = p->fn;
    tg_fgraph *bfg = f->fg;
    const int base_seq = p->has_n ? 1 : 0, base_init = base_seq + p->nseq,
              base_ns = base_init + p->nrec;
    int nst = p->nrec + p->nnr;
    stack_buf sb[SCAN_MAX_IO];
    mover mv[2 * SCAN_MAX_IO];
    memset(sb, 0, sizeof(stack_buf) * (size_t)nst);
    char a1[160], a2[160];

    /* The number of steps. */
    int64_t T = INT64_MAX;
    p->copies = 0;
    if (p->has_n) {
        T = tg_load_len(in[0]->dtype, in[0]->data);
        if (T < 0)
            return tg_errorf(ctx, TG_ERUNTIME, "n_steps is %" PRId64 ": expected 0 or more", T);
    }
    for (int i = 0; i < p->nseq; i++) {
        const tg_array *s = in[base_seq + i];
        int64_t usable = s->shape[0] - p->seq_span[i];
        if (usable < 0) usable = 0;
        if (p->has_n) {
            /* Too short for n_steps: this scan's error, whatever the
             * optimizer did (scanopt.c keeps this check: a rewrite that
             * would read the rows itself declines unless the length is
             * known to be enough, and scan_push_seq keeps the sequence
             * it replaces). docs/scan.md. */
            if (usable < T) {
                /* The taps as listed (long lists end in "..."). */
                char taps[120];
                size_t k = (size_t)snprintf(taps, sizeof taps, "[");
                for (int q = 0; q < p->seq_ntaps[i]; q++) {
                    if (k + 24 > sizeof taps) {
                        k += (size_t)snprintf(taps + k, sizeof taps - k, ", ...");
                        break;
                    }
                    k += (size_t)snprintf(taps + k, sizeof taps - k, "%s%d", q ? ", " : "",
                                          p->taps[p->seq_off[i] + q]);
                }
                snprintf(taps + k, sizeof taps - k, "]");
                return tg_errorf(ctx, TG_ESHAPE,
                                 "sequence %d ('%s') has %" PRId64 " row%s, but %" PRId64 " step%s with "
                                 "taps %s need%s %" PRIu64, i, tg_var_label(n->inputs[base_seq + i]),
                                 s->shape[0], s->shape[0] == 1 ? "" : "s", T, T == 1 ? "" : "s", taps,
                                 T == 1 ? "s" : "",
                                 /* (may pass 2^63 - 1: n_steps of 2^63 - 1) */
                                 (uint64_t)T + (uint64_t)p->seq_span[i]);
            }
        } else if (usable < T) {
            T = usable;
        }
    }
    int64_t cap = T;
    if (p->has_until && cap > 16) cap = 16;

    /* Stacked outputs: recurrent ones start with their initial state. */
    for (int j = 0; j < p->nrec; j++) {
        const tg_array *init = in[base_init + j];
        stack_buf *s = &sb[j];
        s->nd = init->ndim - (p->out_flat[j] ? 0 : 1);
        s->lead = p->out_k[j];
        if (!p->out_flat[j] && init->shape[0] != p->out_k[j]) {
            rc = tg_errorf(ctx, TG_ESHAPE,
                           "initial state %d ('%s') has %" PRId64 " rows, but the taps reach %d "
                           "steps back", j, tg_var_label(n->inputs[base_init + j]), init->shape[0],
                           p->out_k[j]);
            goto done;
        }
        memcpy(s->row, init->shape + (p->out_flat[j] ? 0 : 1), sizeof(int64_t) * (size_t)s->nd);
        s->rowbytes = tg_isize(init->dtype) * (size_t)tg_shape_size(s->nd, s->row);
        s->have_row = true;
        s->ring = ring_rows(p, j, s->lead, T);
        if (!s->ring && cap > INT64_MAX - s->lead) {
            /* n_steps near 2^63 - 1 (a uint64 past it counts as it) */
            rc = tg_errorf(ctx, TG_ESHAPE,
                           "recurrent output %d: %" PRId64 " steps after its %" PRId64 " initial "
                           "row%s make more than 2^63 - 1 rows", j, cap, s->lead,
                           s->lead == 1 ? "" : "s");
            goto done;
        }
        if ((rc = stack_alloc(s, init->dtype, s->ring ? s->ring : s->lead + cap, ctx))) goto done;
        int64_t shp[TG_MAX_NDIM], st[TG_MAX_NDIM];
        shp[0] = s->lead;
        memcpy(shp + 1, s->row, sizeof(int64_t) * (size_t)s->nd);
        tg_strides_contiguous(init->dtype, s->nd + 1, shp, st);
        tg_array *lead = tg_array_view_raw(s->full, init->dtype, s->nd + 1, shp, st, s->full->data);
        tg_array *src = p->out_flat[j] ? tg_array_view_raw(init, init->dtype, s->nd + 1, shp,
                                                           (int64_t[TG_MAX_NDIM]){0}, init->data)
                                       : NULL;
        if (!lead || (p->out_flat[j] && !src)) {
            tg_array_free(lead);
            tg_array_free(src);
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        if (src) memcpy(src->strides + 1, init->strides, sizeof(int64_t) * (size_t)init->ndim);
        rc = tg_array_assign(lead, src ? src : init, ctx);
        tg_array_free(lead);
        tg_array_free(src);
        if (rc) goto done;
    }
    for (int k = 0; k < p->nnr; k++) {
        /* A non-recurrent output whose per-step shape is static gets its
         * stack now (its first step lands in place too); otherwise after
         * step 0 gives the shape. */
        stack_buf *s = &sb[p->nrec + k];
        const tg_type *ot = &n->outputs[p->nrec + k]->type;
        s->nd = ot->ndim - 1;
        bool known = T > 0;
        for (int d = 0; d < s->nd; d++) known &= ot->shape[d + 1] >= 0;
        if (!known) continue;
        memcpy(s->row, ot->shape + 1, sizeof(int64_t) * (size_t)s->nd);
        int64_t sz = tg_shape_size(s->nd, s->row);
        if (sz < 0) {
            rc = tg_errorf(ctx, TG_ESHAPE, "output %d: a step is too large", p->nrec + k);
            goto done;
        }
        s->rowbytes = tg_isize(ot->dtype) * (size_t)sz;
        s->have_row = true;
        if ((rc = stack_alloc(s, ot->dtype, cap, ctx))) goto done;
    }

    /* The body's inputs: views made once, moved along the rows each
     * step. The nested function's input slots own them during the run. */
    for (int i = 0; i < p->nseq; i++) {
        const tg_array *s = in[base_seq + i];
        for (int q = 0; q < p->seq_ntaps[i]; q++) {
            int b = tg_scan_bin_seq(p, i, q);
            tg_array *v = tg_array_view_raw(s, s->dtype, s->ndim - 1, s->shape + 1, s->strides + 1,
                                            s->data);
            if (!v) {
                rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                goto done;
            }
            tg_array_free(f->slots[f->in_slots[b]]);
            f->slots[f->in_slots[b]] = v;
            if (!tg_type_accepts(&bfg->inputs[b]->type, v)) {
                tg_type_str(&bfg->inputs[b]->type, a1, sizeof a1);
                shape_text(v->ndim, v->shape, a2, sizeof a2);
                rc = tg_errorf(ctx, TG_ESHAPE, "sequence %d ('%s'): a step has shape %s, but the "
                               "body's input '%s' is %s", i, tg_var_label(n->inputs[base_seq + i]),
                               a2, bfg->inputs[b]->id, a1);
                goto done;
            }
        }
    }
    for (int j = 0; j < p->nrec; j++) {
        stack_buf *s = &sb[j];
        for (int q = 0; q < p->out_ntaps[j]; q++) {
            int b = tg_scan_bin_rec(p, j, q);
            int64_t st[TG_MAX_NDIM];
            tg_strides_contiguous(s->full->dtype, s->nd, s->row, st);
            tg_array *v = tg_array_view_raw(s->full, s->full->dtype, s->nd, s->row, st, s->full->data);
            if (!v) {
                rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                goto done;
            }
            tg_array_free(f->slots[f->in_slots[b]]);
            f->slots[f->in_slots[b]] = v;
            if (!tg_type_accepts(&bfg->inputs[b]->type, v)) {
                tg_type_str(&bfg->inputs[b]->type, a1, sizeof a1);
                shape_text(v->ndim, v->shape, a2, sizeof a2);
                rc = tg_errorf(ctx, TG_ESHAPE, "initial state %d ('%s'): a step has shape %s, but "
                               "the body's input '%s' is %s", j,
                               tg_var_label(n->inputs[base_init + j]), a2, bfg->inputs[b]->id, a1);
                goto done;
            }
        }
    }
    for (int k = 0; k < p->nns; k++) {
        int b = tg_scan_bin_ns(p, k);
        tg_array *v = in[base_ns + k];
        if (!tg_type_accepts(&bfg->inputs[b]->type, v)) {
            tg_type_str(&bfg->inputs[b]->type, a1, sizeof a1);
            shape_text(v->ndim, v->shape, a2, sizeof a2);
            rc = tg_errorf(ctx, TG_ESHAPE, "non-sequence %d ('%s') has shape %s, but the body's "
                           "input '%s' is %s", k, tg_var_label(n->inputs[base_ns + k]), a2,
                           bfg->inputs[b]->id, a1);
            goto done;
        }
        tg_array_free(f->slots[f->in_slots[b]]);
        f->slots[f->in_slots[b]] = tg_array_ref(v);
    }

    /* Each body input view moves by a fixed stride per step: row(t) =
     * base + t * stride (negative for go_backwards). */
    int nmv = 0;
    for (int i = 0; i < p->nseq; i++) {
        const tg_array *s = in[base_seq + i];
        for (int q = 0; q < p->seq_ntaps[i]; q++, nmv++) {
            mv[nmv].v = f->slots[f->in_slots[tg_scan_bin_seq(p, i, q)]];
            mv[nmv].base = s->data + seq_row(p, i, s->shape[0], 0, p->taps[p->seq_off[i] + q]) * s->strides[0];
            mv[nmv].stride = p->backwards ? -s->strides[0] : s->strides[0];
            mv[nmv].ring = NULL;
        }
    }
    int nmv_seq = nmv;
    for (int j = 0; j < p->nrec; j++)
        for (int q = 0; q < p->out_ntaps[j]; q++, nmv++) {
            mv[nmv].v = f->slots[f->in_slots[tg_scan_bin_rec(p, j, q)]];
            mv[nmv].base = stack_row(&sb[j], sb[j].lead + p->taps[p->out_off[j] + q]);
            mv[nmv].stride = (int64_t)sb[j].rowbytes;
            mv[nmv].ring = sb[j].ring ? &sb[j] : NULL;
            mv[nmv].off = sb[j].lead + p->taps[p->out_off[j] + q];
        }
    tg_array **oslot[SCAN_MAX_IO];
    for (int o = 0; o < nst; o++) oslot[o] = &f->slots[f->out_slots[o]];

    int64_t t = 0;
    for (; t < T; t++) {
        /* Point the views at this step's rows. */
        for (int m = 0; m < nmv; m++)
            mv[m].v->data = mv[m].ring ? stack_row(mv[m].ring, mv[m].off + t) : mv[m].base + t * mv[m].stride;
        /* Windows over this step's rows in the output slots: the body's
         * output kernels write there directly. */
        for (int o = 0; o < nst; o++) {
            stack_buf *sbo = &sb[o];
            if (!p->win_ok[o] || !sbo->have_row || !sbo->rowbytes) continue;
            tg_array **slot = oslot[o];
            char *row = stack_row(sbo, sbo->lead + t);
            tg_array *a = *slot;
            tg_window *w = a ? tg_buffer_window(a->buf) : NULL;
            if (w && w->base == sbo->full->buf && tg_array_is_exclusive(a)) {
                a->buf->data = row;
                a->data = row;
            } else {
                tg_array *na = tg_window_array(sbo->full, row, sbo->full->dtype, sbo->nd, sbo->row);
                if (!na) {
                    rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                    goto done;
                }
                tg_array_free(a);
                *slot = a = na;
                w = tg_buffer_window(a->buf);
            }
            w->armed = true;
        }
        if ((rc = tg_function_run_bound(f, ctx))) {
            tg_error_prefix(ctx, "step %" PRId64 ", in the body", t);
            goto done;
        }
        /* Land each output in its row. */
        for (int o = 0; o < nst; o++) {
            stack_buf *s = &sb[o];
            const tg_array *a = *oslot[o];
            if (!s->have_row) {
                s->nd = a->ndim;
                memcpy(s->row, a->shape, sizeof(int64_t) * (size_t)a->ndim);
                int64_t sz = tg_shape_size(a->ndim, a->shape);
                if (sz < 0) {
                    rc = tg_errorf(ctx, TG_ESHAPE, "step 0: output %d is too large", o);
                    goto done;
                }
                s->rowbytes = tg_isize(a->dtype) * (size_t)sz;
                s->have_row = true;
                s->ring = ring_rows(p, o, 0, T);
                if ((rc = stack_alloc(s, a->dtype, s->ring ? s->ring : cap, ctx))) goto done;
            } else if (!tg_shape_equal(s->nd, a->shape, s->row)) {
                shape_text(a->ndim, a->shape, a1, sizeof a1);
                shape_text(s->nd, s->row, a2, sizeof a2);
                rc = tg_errorf(ctx, TG_ESHAPE,
                               "step %" PRId64 ": the body's output %d ('%s') has shape %s, but %s %s",
                               t, o, bfg->outputs[o]->id, a1,
                               o < p->nrec ? "its initial state makes every step" : "step 0 gave",
                               a2);
                goto done;
            }
            tg_window *w = tg_buffer_window(a->buf);
            if (w) w->armed = false;
            if (s->rowbytes && a->data != stack_row(s, s->lead + t)) {
                p->copies++;
                if (tg_array_is_contiguous(a)) {
                    memcpy(stack_row(s, s->lead + t), a->data, s->rowbytes);
                } else {
                    int64_t st[TG_MAX_NDIM];
                    tg_strides_contiguous(a->dtype, s->nd, s->row, st);
                    tg_array dst = *a;
                    memcpy(dst.strides, st, sizeof st);
                    dst.data = stack_row(s, s->lead + t);
                    if ((rc = tg_array_assign(&dst, a, ctx))) goto done;
                }
            }
        }
        if (p->has_until) {
            const tg_array *c = f->slots[f->out_slots[p->nbout - 1]];
            if (*(const uint8_t *)c->data) {
                t++;
                break;
            }
            if (t + 1 == cap && cap < T) {
                int64_t nc = cap > T / 2 ? T : cap * 2;
                for (int o = 0; o < nst; o++)
                    if (sb[o].full && !sb[o].ring &&
                        (rc = stack_alloc(&sb[o], sb[o].full->dtype,
                                          /* (saturates: refused as too large) */
                                          nc > INT64_MAX - sb[o].lead ? INT64_MAX : sb[o].lead + nc, ctx)))
                        goto done;
                cap = nc;
                /* The recurrent views held the old buffers. */
                for (int j = 0; j < p->nrec; j++)
                    for (int q = 0; q < p->out_ntaps[j]; q++) {
                        tg_array **slot = &f->slots[f->in_slots[tg_scan_bin_rec(p, j, q)]];
                        tg_array *v = tg_array_view_raw(sb[j].full, (*slot)->dtype, (*slot)->ndim,
                                                        (*slot)->shape, (*slot)->strides,
                                                        sb[j].full->data);
                        if (!v) {
                            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                            goto done;
                        }
                        tg_array_free(*slot);
                        *slot = v;
                    }
                for (int j = 0, m = nmv_seq; j < p->nrec; j++)
                    for (int q = 0; q < p->out_ntaps[j]; q++, m++) {
                        mv[m].v = f->slots[f->in_slots[tg_scan_bin_rec(p, j, q)]];
                        mv[m].base = stack_row(&sb[j], sb[j].lead + p->taps[p->out_off[j] + q]);
                    }
            }
        }
    }
    p->last_steps = t;
    if (t > 0) {
        /* The cost of the last step, while its values are still in the
         * body's slots: what the profiler reports, times the steps. */
        double fl = 0, by = 0;
        for (int k = 0; k < f->nsched; k++) {
            const tg_vm_node *sn = &f->sched[k];
            if (!sn->op->cost) continue;
            bool ok = true;
            for (int j = 0; j < sn->node->nin; j++)
                ok &= (f->scratch_in[j] = f->slots[sn->in_slots[j]]) != NULL;
            for (int j = 0; j < sn->node->nout; j++) ok &= f->slots[sn->out_slot + j] != NULL;
            if (!ok) continue;
            double a = 0, b = 0;
            sn->op->cost(sn->node, f->scratch_in, f->slots + sn->out_slot, &a, &b);
            fl += a;
            by += b;
        }
        p->step_flops = fl;
        p->step_bytes = by;
    }
    for (int o = 0; o < nst; o++) {
        tg_array *r = stack_result(&sb[o], n->outputs[o]->type.dtype, t, &n->outputs[o]->type,
                                   p->keep[o]);
        if (!r) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        tg_array_free(out[o]);
        out[o] = r;
    }
    rc = TG_OK;
done:
    /* Windows left in the output slots would keep the stacks alive. */
    for (int o = 0; o < bfg->nout; o++) {
        tg_array **slot = &f->slots[f->out_slots[o]];
        if (*slot && tg_buffer_window((*slot)->buf)) {
            tg_array_free(*slot);
            *slot = NULL;
        }
    }
    for (int b = 0; b < bfg->nin; b++) {
        tg_array_free(f->slots[f->in_slots[b]]);
        f->slots[f->in_slots[b]] = NULL;
    }
    for (int o = 0; o < nst; o++) tg_array_free(sb[o].full);
    return rc;
}

/* A scan that keeps only its last steps (keep_last) has lost the steps
 * back-propagation needs. */
static int scan_grad_checked(struct tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin) {
    scan_p *p = n->a.extra;
    if (p->has_keep)
        return tg_errorf(b->ctx, TG_EUNSUPPORTED, "attrs.keep_last: no gradient through a scan that "
                         "keeps only its last steps (differentiate the graph before optimizing it)");
    return tg_scan_grad(b, n, gout, gin);
}

/* The profiler's estimate: the body's last step's cost times the steps. */
static void scan_cost(const tg_node *n, tg_array *const *in, tg_array *const *out, double *flops,
                      double *bytes) {
    const scan_p *p = n->a.extra;
    TG_UNUSED(in);
    /* With keep_last the outputs hold fewer rows than steps ran. */
    double steps = p->has_keep ? (double)p->last_steps : out[0] ? (double)out[0]->shape[0] : 0;
    *flops = steps * p->step_flops;
    *bytes = steps * p->step_bytes;
}

static const char *const SCAN_KEYS[] = {"body", "n_sequences", "sequence_taps", "n_recurrent",
                                        "output_taps", "n_nonrecurrent", "n_non_sequences",
                                        "has_n_steps", "has_until", "go_backwards",
                                        "truncate_gradient", "name", "keep_last", NULL};

const tg_op tg_op_scan = {
    .name = "scan",
    .nin_min = 0,
    .nin_max = -1,
    .nout = -1,
    .flags = 0,
    .attr_keys = SCAN_KEYS,
    .parse_attrs = scan_parse_attrs,
    .infer = scan_infer,
    .run = scan_run,
    .cost = scan_cost,
    .view_of = -1,
    .free_extra = scan_free_extra,
    .grad = scan_grad_checked,
};
