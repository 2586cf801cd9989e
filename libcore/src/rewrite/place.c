/* The placement pass: which device runs each node, and `transfer` nodes
 * where a value crosses from one to the other.
 *
 * Runs after the optimizer, on the function graph that will be linked.
 * With device "cuda", every node for which the backend has a kernel (for
 * its op, dtypes and attributes) runs on the GPU; the rest stay on the
 * CPU. A value goes over once per call however many nodes read it on the
 * other side (one transfer node per value and direction). Function inputs
 * start on the host and function outputs come back to it, so that the
 * caller only ever sees host arrays; intermediates that only GPU nodes
 * read never leave the device.
 *
 * Shared values and constants that a device node reads are resident
 * (tg_var.resident): the device node reads the device copy where it lives
 * (the VM binds a shared variable's device copy, uploaded once, and
 * uploads a constant once when linking), with no transfer node. A host
 * node reading a resident value gets a transfer to the CPU that reads
 * the host copy the value keeps (a download only when a device update
 * made the host copy stale). An update value made on the device stays
 * there: the VM stores it as the shared variable's device copy
 * (vm/function.c).
 *
 * Ops whose CPU kernel reads only the array header (shape, shape_i) take
 * a device array as it is: asking for a shape costs no copy.
 */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/op.h"
#include "rewrite/rewrite.h"

extern const tg_op tg_op_transfer;

static int k_to_device(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    return tg_backend_cuda()->to_device(in[0], out, ctx);
}

static int k_to_host(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    return tg_backend_cuda()->to_host(in[0], out, ctx);
}

/* The host side of a resident value: the host copy it keeps (a constant's
 * value; a shared variable's, brought back only when stale). The slot's
 * device array is the same value: this call's updates come after. */
static int k_resident_to_host(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    (void)in;
    const tg_var *v = n->inputs[0];
    tg_array *h = v->kind == TG_VAR_SHARED ? tg_shared_value(v->shared, ctx) : v->value;
    if (!h) return ctx && ctx->status ? ctx->status : tg_errorf(ctx, TG_ERUNTIME, "'%s' has no value", v->id);
    tg_array_free(*out);
    *out = tg_array_ref(h);
    return TG_OK;
}

/* A transfer node's copy: up (attribute to "cuda"), or down, taking a
 * resident value's host copy where it has one. */
static tg_kernel_fn transfer_kernel(const tg_node *n) {
    return n->a.mode == 1 ? k_to_device : n->inputs[0]->resident ? k_resident_to_host : k_to_host;
}

static bool reads_header_only(const tg_node *n) {
    return !strcmp(n->op->name, "shape") || !strcmp(n->op->name, "shape_i");
}

static int add_client(tg_var *v, tg_node *node, int index) {
    if (tg_var_clients_reserve(v, v->nclients + 1)) return TG_ENOMEM;
    v->clients[v->nclients++] = (tg_client){node, index};
    return TG_OK;
}

static void remove_client(tg_var *v, tg_node *node, int index) {
    for (int i = 0; i < v->nclients; i++)
        if (v->clients[i].node == node && v->clients[i].index == index) {
            v->clients[i] = v->clients[--v->nclients];
            return;
        }
}

typedef struct place_state {
    tg_fgraph *fg;
    tg_opt_record *rec;
    /* Per variable (by index at the start): its copy on the other side,
     * once made. */
    tg_var **to_dev, **to_host;
    bool *on_dev;
    bool *renamed; /* an output whose host copy took its id */
    int nvars0;
    /* Every id fg holds or held (copies, owned): a new one must be valid
     * in a graph file and unique, so that a placed function saves. */
    struct tg_idmap *ids;
    char **keys;
    int nkeys, ckeys;
} place_state;

static int claim_id(place_state *st, const char *id) {
    if (st->nkeys == st->ckeys) {
        int c = st->ckeys ? st->ckeys * 2 : 64;
        char **p = tg_realloc(st->keys, (size_t)c * sizeof *p);
        if (!p) return TG_ENOMEM;
        st->keys = p;
        st->ckeys = c;
    }
    char *k = tg_strdup(id);
    if (!k) return TG_ENOMEM;
    st->keys[st->nkeys++] = k;
    return tg_idmap_put(st->ids, k, k) ? TG_ENOMEM : TG_OK;
}

/* "<base>:<side>", or "<base>:<side>.<n>" when that is taken; claimed. */
static int fresh_id(place_state *st, const char *base, const char *side, char *buf, size_t size) {
    snprintf(buf, size, "%.100s:%s", base, side);
    for (int n = 1; tg_idmap_get(st->ids, buf); n++) snprintf(buf, size, "%.100s:%s.%d", base, side, n);
    return claim_id(st, buf);
}

/* A transfer node from v to the other side; its output joins fg. */
static tg_var *make_transfer(place_state *st, tg_var *v, bool to_dev, tg_ctx *ctx) {
    tg_fgraph *fg = st->fg;
    char id[160];
    if (fresh_id(st, v->id, to_dev ? "cuda" : "cpu", id, sizeof id)) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    tg_node *n = tg_node_new_in(fg->arena, &tg_op_transfer, 1, 1);
    tg_var *o = tg_var_new_in(fg->arena, id, TG_VAR_RESULT);
    if (!n || !o) goto oom;
    n->attrs = json_object_new_object();
    if (!n->attrs || json_object_object_add(n->attrs, "to", json_object_new_string(to_dev ? "cuda" : "cpu")))
        goto oom;
    n->a.mode = to_dev ? 1 : 0;
    /* Made from nothing original: no origins (an empty, non-NULL list). */
    n->origins = tg_origins_pack(NULL, 0);
    if (!n->origins) goto oom;
    if (v->owner && tg_trace_copy(&n->trace, &v->owner->trace)) goto oom;
    o->type = v->type;
    o->owner = n;
    o->owner_index = 0;
    n->inputs[0] = v;
    n->outputs[0] = o;
    if (fg->nvars == fg->cvars) {
        int c = fg->cvars ? fg->cvars * 2 : 16;
        tg_var **p = tg_realloc(fg->vars, (size_t)c * sizeof *p);
        if (!p) goto oom;
        fg->vars = p;
        fg->cvars = c;
    }
    o->index = fg->nvars;
    fg->vars[fg->nvars++] = o;
    if (tg_fgraph_add_node(fg, n)) {
        fg->nvars--;
        goto oom;
    }
    n->mark = (void *)(uintptr_t)transfer_kernel(n);
    return o;
oom:
    tg_node_free(n);
    tg_var_free(o);
    tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return NULL;
}

/* Give host copy w the id of device value v, and v "<id>:cuda". */
static int swap_ids(place_state *st, tg_var *v, tg_var *w, tg_ctx *ctx) {
    tg_node *n = v->owner;
    if (n && !n->origins && n->outputs[0] == v) {
        const char *key = v->id;
        if (!(n->origins = tg_origins_pack(&key, 1)))
            return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        n->norigins = 1;
    }
    char buf[160];
    if (fresh_id(st, v->id, "cuda", buf, sizeof buf)) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    char *dev_id = tg_strdup(buf), *host_id = tg_strdup(v->id);
    if (!dev_id || !host_id) {
        tg_free(dev_id);
        tg_free(host_id);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    /* ids may live inside their variable (tg_var_new): copied, not moved */
    if (w->id != w->inl_id) tg_free(w->id);
    w->id = host_id;
    if (v->id != v->inl_id) tg_free(v->id);
    v->id = dev_id;
    return TG_OK;
}

static bool var_on_dev(const place_state *st, const tg_var *v) {
    return v->index < st->nvars0 && st->on_dev[v->index];
}

/* The copy of v on the requested side (v itself when it is there). */
static tg_var *on_side(place_state *st, tg_var *v, bool dev, tg_ctx *ctx) {
    if (var_on_dev(st, v) == dev || v->index >= st->nvars0) return v;
    tg_var **cache = dev ? st->to_dev : st->to_host;
    if (!cache[v->index]) cache[v->index] = make_transfer(st, v, dev, ctx);
    return cache[v->index];
}

int tg_place(tg_fgraph *fg, const char *device, tg_opt_record *rec, tg_kernel_fn **kernels, tg_ctx *ctx) {
    *kernels = NULL;
    if (!device || !strcmp(device, "cpu")) return TG_OK;
    if (strcmp(device, "cuda"))
        return tg_errorf(ctx, TG_EINVAL, "unknown device '%s' (expected cpu or cuda)", device);
    const tg_backend *be = tg_backend_cuda();
    const char *why = "this build has no CUDA backend";
    if (!be || !be->available(&why)) {
        /* Once per process: a file of several functions, or a program
         * compiling many, says it once, as NVRTC's warning does. */
        static bool said;
        if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
            fprintf(stderr, "tg: device cuda: %s; running on the CPU\n", why);
        return TG_OK;
    }
    int rc = TG_OK;
    const int nnodes0 = fg->nnodes;
    place_state st = {.fg = fg, .rec = rec, .nvars0 = fg->nvars};
    st.to_dev = tg_calloc((size_t)fg->nvars + 1, sizeof *st.to_dev);
    st.to_host = tg_calloc((size_t)fg->nvars + 1, sizeof *st.to_host);
    st.on_dev = tg_calloc((size_t)fg->nvars + 1, sizeof *st.on_dev);
    st.renamed = tg_calloc((size_t)fg->nvars + 1, sizeof *st.renamed);
    st.ids = tg_idmap_new();
    tg_node **orig = tg_calloc((size_t)nnodes0 + 1, sizeof *orig);
    if (!st.to_dev || !st.to_host || !st.on_dev || !st.renamed || !st.ids || !orig) goto oom;
    for (int i = 0; i < fg->nvars; i++)
        if (claim_id(&st, fg->vars[i]->id)) goto oom;
    for (int i = 0; i < fg->nvars; i++) fg->vars[i]->index = i;
    /* Decide, in topological order: a node's kernel depends only on its
     * types, so one pass suffices. */
    for (int k = 0; k < nnodes0; k++) {
        tg_node *n = orig[k] = fg->nodes[k];
        tg_kernel_fn fn = be->kernel(n);
        n->mark = (void *)(uintptr_t)(fn ? fn : n->op->run);
        if (fn)
            for (int j = 0; j < n->nout; j++) st.on_dev[n->outputs[j]->index] = true;
    }
    /* Shared values and constants a device node reads live on the device. */
    for (int k = 0; k < nnodes0; k++) {
        tg_node *n = orig[k];
        if (!n->nout || !st.on_dev[n->outputs[0]->index]) continue;
        unsigned keep = be->host_inputs(n);
        for (int j = 0; j < n->nin; j++) {
            tg_var *v = n->inputs[j];
            if (keep >> j & 1 || v->owner || v->resident) continue;
            if ((v->kind == TG_VAR_SHARED && v->shared) || (v->kind == TG_VAR_CONSTANT && v->value)) {
                v->resident = true;
                st.on_dev[v->index] = true;
                const char *id = v->id;
                if (rec && tg_opt_record_add(rec, "resident_on_cuda", "place", NULL, 0, &id, 1)) goto oom;
            }
        }
    }
    /* Wire each node to the values on its side. */
    for (int k = 0; k < nnodes0; k++) {
        tg_node *n = orig[k];
        bool dev = st.on_dev[n->outputs[0]->index];
        unsigned keep = dev ? be->host_inputs(n) : (reads_header_only(n) ? ~0u : 0u);
        for (int j = 0; j < n->nin; j++) {
            tg_var *v = n->inputs[j];
            /* What a device kernel reads on the host (gemm's alpha) comes
             * from a resident constant's host copy (no copy at all). A
             * resident shared variable is read where it lives: sum_to
             * reads only its shape, which costs nothing there, and a
             * stale host copy would cost a download per call. */
            bool side = dev && !(keep >> j & 1 && v->resident && v->kind == TG_VAR_CONSTANT);
            if (keep >> j & 1 && side == dev) continue;
            tg_var *w = on_side(&st, v, side, ctx);
            if (!w) goto fail;
            if (w == v) continue;
            remove_client(v, n, j);
            if (add_client(w, n, j)) goto oom;
            n->inputs[j] = w;
        }
    }
    /* Outputs come back to the host; update values stay where they are
     * made (one made on the device becomes the shared variable's device
     * copy). */
    for (int i = 0; i < fg->nout; i++) {
        tg_var *v = fg->outputs[i], *w = on_side(&st, v, false, ctx);
        if (!w) goto fail;
        if (w == v) continue;
        remove_client(v, NULL, i);
        if (add_client(w, NULL, i)) goto oom;
        fg->outputs[i] = w;
        /* A function output keeps its id (callers look outputs up by
         * it): the host copy takes it and the device value is renamed
         * "<id>:cuda". Its node keeps standing for the original node.
         * (A resident value returned as it is keeps its id: the host
         * copy is "<id>:cpu".) */
        if (v->owner && !st.renamed[v->index]) {
            st.renamed[v->index] = true;
            if ((rc = swap_ids(&st, v, w, ctx))) goto done;
        }
    }
    /* The record: one entry per transfer, by its final key. */
    for (int k = nnodes0; k < fg->nnodes && rec; k++) {
        const char *created = fg->nodes[k]->outputs[0]->id;
        if (tg_opt_record_add(rec, fg->nodes[k]->a.mode ? "transfer_to_cuda" : "transfer_to_cpu", "place", NULL, 0,
                              &created, 1))
            goto oom;
    }
    if ((rc = tg_fgraph_toposort(fg, ctx))) goto done;
    *kernels = tg_calloc((size_t)fg->nnodes + 1, sizeof **kernels);
    if (!*kernels) goto oom;
    for (int k = 0; k < fg->nnodes; k++) {
        (*kernels)[k] = (tg_kernel_fn)(uintptr_t)fg->nodes[k]->mark;
        fg->nodes[k]->mark = NULL;
    }
    goto done;
oom:
    tg_errorf(ctx, TG_ENOMEM, "out of memory");
fail:
    rc = ctx && ctx->status ? ctx->status : TG_ENOMEM;
done:
    if (rc)
        for (int k = 0; k < fg->nnodes; k++) fg->nodes[k]->mark = NULL;
    tg_free(st.to_dev);
    tg_free(st.to_host);
    tg_free(st.on_dev);
    tg_free(st.renamed);
    tg_idmap_free(st.ids);
    for (int i = 0; i < st.nkeys; i++) tg_free(st.keys[i]);
    tg_free(st.keys);
    tg_free(orig);
    return rc;
}

int tg_place_relink(tg_fgraph *fg, const bool *on_dev, tg_kernel_fn **kernels, char *why, size_t why_size,
                    tg_ctx *ctx) {
    *kernels = NULL;
    const char *na = "this build has no CUDA backend";
    const tg_backend *be = tg_backend_cuda();
    tg_kernel_fn *k = NULL;
    int rc = TG_OK;
    if (be && be->available(&na)) {
        if (!(k = tg_calloc((size_t)fg->nnodes + 1, sizeof *k))) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        for (int i = 0; i < fg->nnodes && k; i++) {
            tg_node *n = fg->nodes[i];
            if (n->op == &tg_op_transfer) {
                k[i] = transfer_kernel(n);
            } else if (!on_dev[i]) {
                k[i] = n->op->run;
            } else if (!(k[i] = be->kernel(n))) {
                snprintf(why, why_size, "no GPU kernel here for %.60s -> %.80s", n->op->name,
                         n->nout ? n->outputs[0]->id : "?");
                tg_free(k);
                k = NULL;
            }
        }
    } else {
        snprintf(why, why_size, "%s", na ? na : "no usable CUDA device");
    }
    if (!k) /* on the CPU: no value lives on the device */
        for (int i = 0; i < fg->nvars; i++) fg->vars[i]->resident = false;
    *kernels = k;
    return rc;
}
