/* The loader: interchange JSON (FORMAT.md) -> tg_graph.
 *
 * Passes: parse; declared variables; nodes (outputs first, so that nodes
 * may come in any order, then inputs, attrs, traces); sort; types, node by
 * node; functions; a missing-input check of every function. Every error is
 * one line "FILE: LOCATION: message", where LOCATION is the JSON path and,
 * for a node, its description (tg_node_describe).
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "grad/grad.h"
#include "ops/op.h"

enum { LOADER_SCALARS = 64 };

typedef struct loader {
    const char *what; /* file name for messages */
    const char *dir;
    tg_graph *g;
    tg_ctx *ctx;
    tg_node **file_order; /* nodes as written */
    int nfile;
    tg_value_resolver resolve; /* values kept outside the JSON (.tgf) */
    void *resolve_ud;
    /* Inline scalars seen so far, by dtype and bytes (one reference each):
     * equal ones share one array (intern_scalar). */
    tg_array *scalars[LOADER_SCALARS];
} loader;

/* Everything the loader holds, released once it is done. */
static void loader_done(loader *L) {
    tg_free(L->file_order);
    L->file_order = NULL;
    for (int i = 0; i < LOADER_SCALARS; i++) {
        tg_array_free(L->scalars[i]);
        L->scalars[i] = NULL;
    }
}

static int lerr(loader *L, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int lerr(loader *L, int status, const char *fmt, ...) {
    char msg[TG_CTX_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tg_errorf(L->ctx, status, "%s: %s", L->what, msg);
}

/* An error already on ctx (from a helper), prefixed with the file. */
static int lwrap(loader *L, int status) {
    tg_error_prefix(L->ctx, "%s", L->what);
    if (L->ctx && L->ctx->status == TG_OK) L->ctx->status = status;
    return L->ctx ? L->ctx->status : status;
}

static int node_err(loader *L, const tg_node *n, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int node_err(loader *L, const tg_node *n, int status, const char *fmt, ...) {
    char msg[TG_CTX_MSG_MAX], desc[256], tr[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tg_node_describe(n, desc, sizeof desc);
    tg_node_trace_str(n, tr, sizeof tr);
    return tg_errorf(L->ctx, status, "%s: %s: %s%s", L->what, desc, msg, tr);
}

/* An error a helper or the op put on ctx, prefixed with the file and the
 * node, and followed by where the frontend made the node (its trace's
 * innermost frame), as FORMAT.md asks of every error about it. */
static int node_wrap(loader *L, const tg_node *n) {
    char desc[256], tr[512];
    tg_node_describe(n, desc, sizeof desc);
    tg_node_trace_str(n, tr, sizeof tr);
    tg_error_prefix(L->ctx, "%s: %s", L->what, desc);
    if (!L->ctx) return TG_ELOAD;
    size_t k = strlen(L->ctx->msg);
    if (tr[0] && k < sizeof L->ctx->msg) snprintf(L->ctx->msg + k, sizeof L->ctx->msg - k, "%s", tr);
    return L->ctx->status;
}

static bool key_in(const char *key, const char *const *keys) {
    for (; *keys; keys++)
        if (strcmp(key, *keys) == 0) return true;
    return false;
}

static int check_keys(loader *L, json_object *o, const char *const *keys,
                      const char *where) {
    json_object_object_foreach(o, key, val) {
        (void)val;
        if (!key_in(key, keys))
            return lerr(L, TG_ELOAD, "%s.%s: unknown key", where, key);
    }
    return TG_OK;
}

/* The id a JSON string holds, or NULL for a non-string or one with a NUL
 * inside (which C would silently cut short). */
static const char *json_id(json_object *o) {
    if (!json_object_is_type(o, json_type_string)) return NULL;
    const char *s = json_object_get_string(o);
    return strlen(s) == (size_t)json_object_get_string_len(o) ? s : NULL;
}

/* buf = a, the decimal i, then b (cut to cap). The JSON paths of the
 * error messages are made for every node whether or not it has an
 * error, and snprintf made them at about 1,300 instructions each, a
 * sixth of the load of a graph of small nodes. */
static void cat_index(char *buf, size_t cap, const char *a, long long i, const char *b) {
    char digits[24];
    int nd = 0;
    unsigned long long u = i < 0 ? 0ull - (unsigned long long)i : (unsigned long long)i;
    do digits[nd++] = (char)('0' + u % 10);
    while (u /= 10);
    if (i < 0) digits[nd++] = '-';
    size_t n = 0;
    for (; *a && n + 1 < cap; a++) buf[n++] = *a;
    while (nd && n + 1 < cap) buf[n++] = digits[--nd];
    for (; *b && n + 1 < cap; b++) buf[n++] = *b;
    buf[n] = 0;
}

/* ---- variables ---- */

static const char *const VAR_KEYS[] = {"id", "type", "name", "constant",
                                       "shared", "test_value", NULL};

static int load_variables(loader *L, json_object *arr) {
    if (!json_object_is_type(arr, json_type_array))
        return lerr(L, TG_ELOAD, "variables: expected an array");
    size_t n = json_object_array_length(arr);
    for (size_t i = 0; i < n; i++) {
        char where[64];
        cat_index(where, sizeof where, "variables[", (long long)i, "]");
        json_object *o = json_object_array_get_idx(arr, i), *jid, *jt = NULL,
                    *jn = NULL, *jc = NULL, *js = NULL, *jtv = NULL;
        if (!json_object_is_type(o, json_type_object))
            return lerr(L, TG_ELOAD, "%s: expected an object", where);
        int rc = check_keys(L, o, VAR_KEYS, where);
        if (rc) return rc;
        if (!json_object_object_get_ex(o, "id", &jid) ||
            !json_object_is_type(jid, json_type_string))
            return lerr(L, TG_ELOAD, "%s.id: expected a string", where);
        const char *id = json_id(jid);
        if (!tg_id_valid(id))
            return lerr(L, TG_ELOAD,
                        "%s.id: '%.140s' is not a valid id (1 to 128 of letters, digits, "
                        "_ . : -, not starting with . or -)",
                        where, json_object_get_string(jid));
        tg_var *prev = tg_graph_find(L->g, id);
        if (prev)
            return lerr(L, TG_ELOAD, "%s.id: '%s' is already declared at variables[%d]",
                        where, id, prev->json_index);
        /* presence, not value: "constant": null is an error, not absent */
        bool has_t = json_object_object_get_ex(o, "type", &jt),
             has_n = json_object_object_get_ex(o, "name", &jn),
             has_c = json_object_object_get_ex(o, "constant", &jc),
             has_s = json_object_object_get_ex(o, "shared", &js),
             has_tv = json_object_object_get_ex(o, "test_value", &jtv);
        if (has_c && has_s)
            return lerr(L, TG_ELOAD, "%s: '%s' cannot be both constant and shared", where, id);
        tg_var *v = tg_var_new_in(L->g->arena, id, has_c ? TG_VAR_CONSTANT : has_s ? TG_VAR_SHARED : TG_VAR_INPUT);
        if (!v || tg_graph_add_var(L->g, v)) {
            tg_var_free(v);
            return lerr(L, TG_ENOMEM, "out of memory");
        }
        v->declared = true;
        v->json_index = (int)i;
        if (has_n) {
            if (!json_object_is_type(jn, json_type_string))
                return lerr(L, TG_ELOAD, "%s.name: expected a string", where);
            if (!(v->name = tg_strdup(json_object_get_string(jn))))
                return lerr(L, TG_ENOMEM, "out of memory");
        }
        if (has_t) {
            char w[80];
            snprintf(w, sizeof w, "%s.type", where);
            if (tg_type_from_json(jt, &v->type, w, L->ctx)) return lwrap(L, TG_ELOAD);
            v->type_given = true;
        }
        if ((has_c || has_s || has_tv) && !has_t)
            return lerr(L, TG_ELOAD, "%s.type: required for a constant, a shared variable or a test_value",
                        where);
        if (has_c || has_s) {
            json_object *jv = has_c ? jc : js;
            char w[80];
            snprintf(w, sizeof w, "%s.%s", where, has_c ? "constant" : "shared");
            json_object *jref = NULL;
            tg_array *a = L->resolve && json_object_is_type(jv, json_type_object) &&
                                  json_object_object_get_ex(jv, "tgf_array", &jref)
                              ? L->resolve(L->resolve_ud, jref, v, w, L->ctx)
                              : tg_value_from_json(jv, v->type.dtype, v->type.ndim,
                                                   v->type.shape, L->dir, w, NULL, L->ctx);
            if (!a) return lwrap(L, TG_ELOAD);
            if (has_c) {
                v->value = a;
            } else {
                v->shared = tg_shared_new(id, &v->type, a);
                tg_array_free(a);
                if (!v->shared) return lerr(L, TG_ENOMEM, "out of memory");
            }
        }
        if (has_tv) {
            char w[80];
            snprintf(w, sizeof w, "%s.test_value", where);
            v->test_value = tg_value_from_json(jtv, v->type.dtype, v->type.ndim,
                                               v->type.shape, L->dir, w, NULL, L->ctx);
            if (!v->test_value) return lwrap(L, TG_ELOAD);
        }
    }
    return TG_OK;
}

/* ---- nodes ---- */

/* A whole-number float where an attr wants an integer (`"axis": 1.0`,
 * Python's json.dumps of a float) reads as that integer, as everywhere
 * else in the file (JSON Schema's "integer"): attrs hold no float whose
 * kind matters outside a body (composite, scan, op_from_graph), where
 * `{"value": 2.0}` is a weak float. The canonical attrs then hold the
 * integer, so that every reader of them sees one. Non-zero when out of
 * memory. */
static int whole_floats_to_ints(json_object *o) {
    if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0, m = json_object_array_length(o); i < m; i++) {
            json_object *e = json_object_array_get_idx(o, i);
            int64_t v;
            if (json_object_is_type(e, json_type_double) && tg_json_get_int(e, &v)) {
                json_object *iv = json_object_new_int64(v);
                if (!iv || json_object_array_put_idx(o, i, iv)) {
                    json_object_put(iv);
                    return -1;
                }
            } else if (whole_floats_to_ints(e)) {
                return -1;
            }
        }
    } else if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, key, e) {
            int64_t v;
            if (!strcmp(key, "body")) continue;
            if (json_object_is_type(e, json_type_double) && tg_json_get_int(e, &v)) {
                /* (replacing the value of a key keeps its entry: the walk
                 * goes on) */
                json_object *iv = json_object_new_int64(v);
                if (!iv || json_object_object_add(o, key, iv)) return -1;
            } else if (whole_floats_to_ints(e)) {
                return -1;
            }
        }
    }
    return 0;
}

static const char *const NODE_KEYS[] = {"op", "inputs", "outputs", "attrs", "name",
                                        "trace", "inplace", NULL};

static int trace_str(loader *L, json_object *f, const char *key, char **out,
                     const char *where, size_t i) {
    json_object *x;
    if (!json_object_object_get_ex(f, key, &x)) return TG_OK;
    if (!json_object_is_type(x, json_type_string))
        return lerr(L, TG_ELOAD, "%s.trace[%zu].%s: expected a string", where, i, key);
    if (!(*out = tg_strdup(json_object_get_string(x)))) return lerr(L, TG_ENOMEM, "out of memory");
    return TG_OK;
}

/* Frames may carry keys of their own (FORMAT.md s1); the four known ones
 * must have their types. */
static int load_trace(loader *L, tg_node *nd, json_object *jt, const char *where) {
    if (!json_object_is_type(jt, json_type_array))
        return lerr(L, TG_ELOAD, "%s.trace: expected an array of frames", where);
    size_t n = json_object_array_length(jt);
    if (!n) return TG_OK;
    nd->trace.frames = tg_trace_frames_new(n);
    if (!nd->trace.frames) return lerr(L, TG_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *f = json_object_array_get_idx(jt, i), *x;
        tg_frame *fr = &nd->trace.frames[i];
        fr->line = -1;
        nd->trace.n++;
        if (!json_object_is_type(f, json_type_object))
            return lerr(L, TG_ELOAD, "%s.trace[%zu]: expected an object", where, i);
        int rc;
        if ((rc = trace_str(L, f, "file", &fr->file, where, i)) ||
            (rc = trace_str(L, f, "function", &fr->function, where, i)) ||
            (rc = trace_str(L, f, "code", &fr->code, where, i)))
            return rc;
        if (json_object_object_get_ex(f, "line", &x) && !tg_json_get_int(x, &fr->line))
            return lerr(L, TG_ELOAD, "%s.trace[%zu].line: expected an integer", where, i);
    }
    return TG_OK;
}

/* First pass over one node: op, outputs. */
static int load_node_outputs(loader *L, json_object *o, size_t j) {
    char where[64];
    cat_index(where, sizeof where, "nodes[", (long long)j, "]");
    if (!json_object_is_type(o, json_type_object))
        return lerr(L, TG_ELOAD, "%s: expected an object", where);
    int rc = check_keys(L, o, NODE_KEYS, where);
    if (rc) return rc;
    json_object *jop, *jout, *jin;
    if (!json_object_object_get_ex(o, "op", &jop) || !json_object_is_type(jop, json_type_string))
        return lerr(L, TG_ELOAD, "%s.op: expected an op name", where);
    const char *opname = json_object_get_string(jop);
    const tg_op *op = tg_op_find(opname);
    if (!op) {
        if (tg_op_is_planned(opname))
            return lerr(L, TG_EUNSUPPORTED, "%s.op: op '%s' is not implemented yet in this build",
                        where, opname);
        return lerr(L, TG_ELOAD, "%s.op: unknown op '%.64s' (did you mean '%s'?)", where, opname,
                    tg_op_nearest(opname));
    }
    if (!json_object_object_get_ex(o, "outputs", &jout) ||
        !json_object_is_type(jout, json_type_array))
        return lerr(L, TG_ELOAD, "%s.outputs: expected an array of ids", where);
    if (!json_object_object_get_ex(o, "inputs", &jin) ||
        !json_object_is_type(jin, json_type_array))
        return lerr(L, TG_ELOAD, "%s.inputs: expected an array", where);
    int nout = (int)json_object_array_length(jout), nin = (int)json_object_array_length(jin);
    tg_node *nd = tg_node_new_in(L->g->arena, op, nin, nout);
    if (!nd || tg_graph_add_node(L->g, nd)) {
        tg_node_free(nd);
        return lerr(L, TG_ENOMEM, "out of memory");
    }
    nd->json_index = (int)j;
    L->file_order[L->nfile++] = nd;
    json_object *jn;
    if (json_object_object_get_ex(o, "name", &jn)) {
        if (!json_object_is_type(jn, json_type_string))
            return lerr(L, TG_ELOAD, "%s.name: expected a string", where);
        if (!(nd->name = tg_strdup(json_object_get_string(jn))))
            return lerr(L, TG_ENOMEM, "out of memory");
    }
    for (int k = 0; k < nout; k++) {
        json_object *e = json_object_array_get_idx(jout, (size_t)k);
        if (!json_object_is_type(e, json_type_string))
            return lerr(L, TG_ELOAD, "%s.outputs[%d]: expected an id", where, k);
        const char *id = json_id(e);
        if (!tg_id_valid(id))
            return lerr(L, TG_ELOAD, "%s.outputs[%d]: '%.140s' is not a valid id", where, k,
                        json_object_get_string(e));
        tg_var *v = tg_graph_find(L->g, id);
        if (v) {
            if (v->owner)
                return lerr(L, TG_ELOAD,
                            "%s.outputs[%d]: '%s' is already produced by nodes[%d] (each "
                            "variable has one producer)",
                            where, k, id, v->owner->json_index);
            if (v->kind != TG_VAR_INPUT)
                return lerr(L, TG_ELOAD,
                            "%s.outputs[%d]: '%s' is declared %s at variables[%d] and cannot "
                            "be produced by a node",
                            where, k, id, v->kind == TG_VAR_CONSTANT ? "constant" : "shared",
                            v->json_index);
            v->kind = TG_VAR_RESULT;
        } else {
            v = tg_var_new_in(L->g->arena, id, TG_VAR_RESULT);
            if (!v || tg_graph_add_var(L->g, v)) {
                tg_var_free(v);
                return lerr(L, TG_ENOMEM, "out of memory");
            }
        }
        v->owner = nd;
        v->owner_index = k;
        nd->outputs[k] = v;
    }
    return TG_OK;
}

/* An inline scalar equal (dtype and bytes) to one met before, as that
 * array (a, which it takes, is freed): exporters write the same few
 * literals ({"value": 1}, 0.5) in thousands of nodes, and the optimizer's
 * merge hashes and compares every constant's value. With one array each,
 * that read the array's header, its data pointer and its buffer, three
 * lines in other places per constant, from memory long out of the cache
 * on a large graph; shared, they stay in it. Constants are never written
 * (the in-place pass skips them), so sharing is safe. A direct-mapped
 * table: a literal that misses takes its slot. */
static tg_array *intern_scalar(loader *L, tg_array *a) {
    if (a->ndim != 0) return a;
    size_t isz = tg_dtype_size(a->dtype);
    uint64_t h = (uint64_t)a->dtype * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < isz; i++) h = (h ^ (uint8_t)a->data[i]) * 1099511628211ull;
    tg_array **slot = &L->scalars[(h >> 32) % LOADER_SCALARS];
    tg_array *s = *slot;
    if (s && s->dtype == a->dtype && memcmp(s->data, a->data, isz) == 0) {
        tg_array_free(a);
        return tg_array_ref(s);
    }
    tg_array_free(s);
    *slot = tg_array_ref(a);
    return a;
}

static int new_inline_const(loader *L, tg_node *nd, int k, json_object *jv,
                            const char *where, tg_var **out) {
    bool weak = false;
    tg_array *a = tg_value_from_json(jv, TG_DTYPE_INVALID, -1, NULL, L->dir, where, &weak,
                                     L->ctx);
    if (!a) return lwrap(L, TG_ELOAD);
    /* "<first output's id, at most 100 characters>:in<k>", then .1, .2...
     * until it is free (ids are ASCII: a byte is a character) */
    char id[160], base[112];
    const char *b0 = nd->nout ? nd->outputs[0]->id : "node";
    size_t bl = strnlen(b0, 100);
    memcpy(base, b0, bl);
    memcpy(base + bl, ":in", sizeof ":in");
    cat_index(id, sizeof id, base, k, "");
    for (int s = 1; tg_graph_find(L->g, id); s++)
        snprintf(id, sizeof id, "%s%d.%d", base, k, s);
    tg_var *v = tg_var_new_in(L->g->arena, id, TG_VAR_CONSTANT);
    if (!v || tg_graph_add_var(L->g, v)) {
        tg_var_free(v);
        tg_array_free(a);
        return lerr(L, TG_ENOMEM, "out of memory");
    }
    v->value = a;
    v->weak = weak;
    v->weak_in_file = weak;
    v->inline_const = true;
    v->type.dtype = a->dtype;
    v->type.ndim = a->ndim;
    memcpy(v->type.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    *out = v;
    return TG_OK;
}

/* Second pass: inputs, arity, attrs, trace, inplace. */
static int load_node_rest(loader *L, json_object *o, tg_node *nd) {
    char where[64];
    cat_index(where, sizeof where, "nodes[", nd->json_index, "]");
    const tg_op *op = nd->op;
    /* The trace first, so that every error about the node shows it. */
    json_object *jt;
    if (json_object_object_get_ex(o, "trace", &jt)) {
        int rc = load_trace(L, nd, jt, where);
        if (rc) return rc;
    }
    json_object *jin;
    json_object_object_get_ex(o, "inputs", &jin);
    for (int k = 0; k < nd->nin; k++) {
        json_object *e = json_object_array_get_idx(jin, (size_t)k);
        if (json_object_is_type(e, json_type_string)) {
            const char *id = json_object_get_string(e);
            tg_var *v = json_id(e) ? tg_graph_find(L->g, id) : NULL;
            /* The ids made up for inline constants are not the file's. */
            if (!v || v->inline_const)
                return node_err(L, nd, TG_ELOAD,
                                "inputs[%d]: '%.140s' is not declared and no node produces it",
                                k, id);
            nd->inputs[k] = v;
        } else if (json_object_is_type(e, json_type_object)) {
            json_object *jv;
            if (!json_object_object_get_ex(e, "value", &jv) || json_object_object_length(e) != 1)
                return node_err(L, nd, TG_ELOAD,
                                "inputs[%d]: expected an id or {\"value\": V}", k);
            char w[96], pre[80];
            size_t wl = strlen(where); /* "nodes[N]", under 64 */
            memcpy(pre, where, wl);
            memcpy(pre + wl, ".inputs[", sizeof ".inputs[");
            cat_index(w, sizeof w, pre, k, "].value");
            int rc = new_inline_const(L, nd, k, jv, w, &nd->inputs[k]);
            if (rc) return rc;
        } else {
            return node_err(L, nd, TG_ELOAD, "inputs[%d]: expected an id or {\"value\": V}", k);
        }
    }
    if (tg_node_check_arity(nd, L->ctx)) return node_wrap(L, nd);
    if (nd->nout == 0) return lerr(L, TG_ELOAD, "%s.outputs: a node needs outputs", where);
    json_object *ja;
    if (json_object_object_get_ex(o, "attrs", &ja)) {
        if (!json_object_is_type(ja, json_type_object))
            return node_err(L, nd, TG_ELOAD, "attrs: expected an object");
        if (tg_node_check_attr_keys(nd, ja, L->ctx)) return node_wrap(L, nd);
        /* Our own copy: parse_attrs adds the defaults to it. */
        if (json_object_deep_copy(ja, &nd->attrs, NULL) != 0 || whole_floats_to_ints(nd->attrs))
            return lerr(L, TG_ENOMEM, "out of memory");
    }
    if (op->parse_attrs) {
        int rc = op->parse_attrs(nd, L->ctx);
        if (rc) return node_wrap(L, nd);
    }
    json_object *jip;
    if (json_object_object_get_ex(o, "inplace", &jip)) {
        if (!json_object_is_type(jip, json_type_object))
            return node_err(L, nd, TG_ELOAD, "inplace: expected an object {\"out\": in}");
        nd->inplace = tg_malloc((size_t)nd->nout);
        if (!nd->inplace) return lerr(L, TG_ENOMEM, "out of memory");
        memset(nd->inplace, -1, (size_t)nd->nout);
        json_object_object_foreach(jip, key, val) {
            /* Keys are plain decimal output indices, as the schema says. */
            size_t kl = strlen(key);
            bool digits = kl > 0 && kl < 4 && strspn(key, "0123456789") == kl;
            int oi = digits ? atoi(key) : -1;
            if (oi < 0 || oi >= nd->nout)
                return node_err(L, nd, TG_ELOAD, "inplace.%.40s: not an output index", key);
            int64_t ii;
            if (!tg_json_get_int(val, &ii)) ii = -1;
            if (tg_node_set_inplace(nd, oi, ii, L->ctx)) return node_wrap(L, nd);
        }
    }
    return TG_OK;
}

/* ---- types ---- */

/* An in-place output needs an input buffer that holds exactly its values:
 * same dtype and shape, and never a constant's. Known once types are. */
static int check_inplace(loader *L, tg_node *nd) {
    return tg_node_check_inplace_types(nd, L->ctx) ? node_wrap(L, nd) : TG_OK;
}

/* An overwritten input must have no other reader: no other node reads it,
 * no function returns it or makes it a shared variable's next value, and
 * it is not shared state itself. Otherwise a later reader would see the
 * overwritten values (Theano's destroy handler refuses the same). */
static int check_inplace_readers(loader *L) {
    tg_graph *g = L->g;
    bool any = false;
    for (int i = 0; i < g->nnodes && !any; i++) any = g->nodes[i]->inplace != NULL;
    if (!any) return TG_OK;
    int *uses = tg_calloc((size_t)g->nvars + 1, sizeof *uses);
    if (!uses) return lerr(L, TG_ENOMEM, "out of memory");
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i]->nin; k++) uses[g->nodes[i]->inputs[k]->index]++;
    for (int f = 0; f < g->nfuncs; f++) {
        for (int k = 0; k < g->funcs[f].nout; k++) uses[g->funcs[f].outputs[k]->index]++;
        for (int k = 0; k < g->funcs[f].nupd; k++) uses[g->funcs[f].updates[k].value->index]++;
    }
    int rc = TG_OK;
    for (int i = 0; i < g->nnodes && !rc; i++) {
        tg_node *nd = g->nodes[i];
        for (int k = 0; nd->inplace && k < nd->nout && !rc; k++) {
            if (nd->inplace[k] < 0) continue;
            const tg_var *in = nd->inputs[nd->inplace[k]];
            if (in->kind == TG_VAR_SHARED)
                rc = node_err(L, nd, TG_ELOAD,
                              "inplace.%d: input %d '%s' is shared state and cannot be overwritten",
                              k, nd->inplace[k], in->id);
            else if (uses[in->index] > 1)
                rc = node_err(L, nd, TG_ELOAD,
                              "inplace.%d: input %d '%s' is read elsewhere too (another node or a "
                              "function's outputs), so it cannot be overwritten",
                              k, nd->inplace[k], in->id);
        }
    }
    tg_free(uses);
    return rc;
}

static int infer_types(loader *L) {
    int rc = TG_OK, maxout = 1;
    for (int i = 0; i < L->g->nnodes; i++)
        if (L->g->nodes[i]->nout > maxout) maxout = L->g->nodes[i]->nout;
    tg_type *declared = tg_calloc((size_t)maxout, sizeof *declared);
    bool *given = tg_calloc((size_t)maxout, sizeof *given);
    if (!declared || !given) {
        rc = lerr(L, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < L->g->nnodes; i++) {
        tg_node *nd = L->g->nodes[i];
        for (int k = 0; k < nd->nin; k++) {
            tg_var *v = nd->inputs[k];
            if (v->type.dtype == TG_DTYPE_INVALID || v->type.ndim < 0) {
                rc = node_err(L, nd, TG_ELOAD,
                              "inputs[%d]: '%s' has no type (declare it in variables with a "
                              "type)",
                              k, v->id);
                goto done;
            }
        }
        if (nd->nout > maxout) {
            /* A node that a gradient expansion added (a scan's reverse
             * scan) may have more outputs than any node of the file. */
            tg_type *d2 = tg_realloc(declared, sizeof *d2 * (size_t)nd->nout);
            if (d2) declared = d2;
            bool *g2 = d2 ? tg_realloc(given, sizeof *g2 * (size_t)nd->nout) : NULL;
            if (g2) given = g2;
            if (!d2 || !g2) {
                rc = lerr(L, TG_ENOMEM, "out of memory");
                goto done;
            }
            maxout = nd->nout;
        }
        for (int k = 0; k < nd->nout; k++) {
            tg_var *v = nd->outputs[k];
            given[k] = v->type_given;
            if (v->type_given) declared[k] = v->type;
            v->type.dtype = TG_DTYPE_INVALID;
            v->type.ndim = -1;
        }
        if (nd->op->flags & TG_OPF_DERIVED) {
            /* grad/lop/rop: replace the node by its derivative graph;
             * the new nodes are typed already and are checked again as
             * the loop walks over them. */
            tg_node **gnodes = NULL;
            int ng = 0;
            if ((rc = tg_grad_expand(L->g, nd, &gnodes, &ng, L->ctx))) {
                node_wrap(L, nd);
                goto done;
            }
            tg_graph *g = L->g;
            if (g->nnodes + ng > g->cnodes) {
                tg_node **p = tg_realloc(g->nodes, sizeof *p * (size_t)(g->nnodes + ng));
                if (!p) {
                    for (int k = 0; k < ng; k++) tg_node_free(gnodes[k]);
                    tg_free(gnodes);
                    rc = lerr(L, TG_ENOMEM, "out of memory");
                    goto done;
                }
                g->nodes = p;
                g->cnodes = g->nnodes + ng;
            }
            memmove(g->nodes + i + ng, g->nodes + i + 1, sizeof(tg_node *) * (size_t)(g->nnodes - i - 1));
            memcpy(g->nodes + i, gnodes, sizeof(tg_node *) * (size_t)ng);
            g->nnodes += ng - 1;
            for (int k = 0; k < g->nnodes; k++) g->nodes[k]->index = k;
            for (int k = 0; k < L->nfile; k++)
                if (L->file_order[k] == nd) L->file_order[k] = gnodes[ng - 1];
            tg_free(gnodes);
            tg_node_free(nd);
            i--;
            continue;
        }
        if (!nd->op->infer) {
            rc = node_err(L, nd, TG_EUNSUPPORTED, "%s has no type inference in this build",
                          nd->op->name);
            goto done;
        }
        if ((rc = nd->op->infer(nd, L->ctx))) {
            node_wrap(L, nd);
            goto done;
        }
        tg_node_seal(nd);
        /* (its inline constants as the op took them: a weak scalar is
         * converted to the op's dtype, one copy each) */
        for (int k = 0; k < nd->nin; k++)
            if (nd->inputs[k]->inline_const && nd->inputs[k]->value)
                nd->inputs[k]->value = intern_scalar(L, nd->inputs[k]->value);
        for (int k = 0; k < nd->nout; k++) {
            tg_var *v = nd->outputs[k];
            if (v->type.dtype == TG_DTYPE_INVALID || v->type.ndim < 0) {
                rc = node_err(L, nd, TG_ELOAD, "outputs[%d]: the op gave no type", k);
                goto done;
            }
            if (!given[k]) continue;
            /* The declared type may only refine what the op gives. */
            tg_type *d = &declared[k];
            if (d->dtype != v->type.dtype || d->ndim != v->type.ndim ||
                !tg_type_compatible(d, &v->type)) {
                char want[160], got[160];
                tg_type_str(d, want, sizeof want);
                tg_type_str(&v->type, got, sizeof got);
                rc = node_err(L, nd, TG_ETYPE,
                              "outputs[%d]: '%s' is declared %s at variables[%d], but the op "
                              "gives %s",
                              k, v->id, want, v->json_index, got);
                goto done;
            }
            for (int a = 0; a < d->ndim; a++)
                if (v->type.shape[a] < 0) v->type.shape[a] = d->shape[a];
        }
        for (int k = 0; k < nd->nout; k++)
            if (!tg_type_fits(&nd->outputs[k]->type)) {
                char t[200];
                tg_type_str(&nd->outputs[k]->type, t, sizeof t);
                rc = node_err(L, nd, TG_ESHAPE, "outputs[%d]: %s holds more than 2^63 - 1 bytes", k, t);
                goto done;
            }
        if ((rc = check_inplace(L, nd))) goto done;
    }
done:
    tg_free(declared);
    tg_free(given);
    return rc;
}

/* ---- functions ---- */

static const char *const FUNC_KEYS[] = {"inputs", "outputs", "updates", NULL};

static int id_list(loader *L, json_object *arr, const char *where, tg_var ***out, int *n) {
    if (!json_object_is_type(arr, json_type_array))
        return lerr(L, TG_ELOAD, "%s: expected an array of ids", where);
    *n = (int)json_object_array_length(arr);
    *out = tg_calloc((size_t)*n + 1, sizeof **out);
    if (!*out) return lerr(L, TG_ENOMEM, "out of memory");
    for (int i = 0; i < *n; i++) {
        json_object *e = json_object_array_get_idx(arr, (size_t)i);
        if (!json_object_is_type(e, json_type_string))
            return lerr(L, TG_ELOAD, "%s[%d]: expected an id", where, i);
        tg_var *v = json_id(e) ? tg_graph_find(L->g, json_id(e)) : NULL;
        if (!v || v->inline_const)
            return lerr(L, TG_ELOAD, "%s[%d]: unknown id '%.140s'", where, i,
                        json_object_get_string(e));
        (*out)[i] = v;
    }
    return TG_OK;
}

/* A function's inputs are no constants or shared variables, and none is
 * listed twice. seen[] (one flag per variable of the graph, all false)
 * marks each input while the list is read, and is cleared again after:
 * a scan of the inputs before each was quadratic (a function of 64,000
 * inputs spent 4.9 of its 7.7 s of tgc check here). */
static int check_inputs(loader *L, const tg_fdecl *fd, const char *where, bool *seen) {
    int rc = TG_OK, i;
    for (i = 0; i < fd->nin && !rc; i++) {
        tg_var *v = fd->inputs[i];
        if (v->kind == TG_VAR_CONSTANT || v->kind == TG_VAR_SHARED)
            rc = lerr(L, TG_ELOAD, "%s.inputs[%d]: '%s' is %s, not an input", where, i, v->id,
                      v->kind == TG_VAR_CONSTANT ? "a constant" : "shared");
        else if (seen[v->index])
            rc = lerr(L, TG_ELOAD, "%s.inputs[%d]: '%s' is listed twice", where, i, v->id);
        else
            seen[v->index] = true;
    }
    while (i-- > 0) seen[fd->inputs[i]->index] = false;
    return rc;
}

static int load_functions_in(loader *L, json_object *jf, bool *seen) {
    tg_graph *g = L->g;
    if (!json_object_is_type(jf, json_type_object))
        return lerr(L, TG_ELOAD, "functions: expected an object (name -> function)");
    int n = json_object_object_length(jf);
    g->funcs = tg_calloc((size_t)n + 1, sizeof *g->funcs);
    if (!g->funcs) return lerr(L, TG_ENOMEM, "out of memory");
    json_object_object_foreach(jf, name, fo) {
        tg_fdecl *fd = &g->funcs[g->nfuncs++];
        fd->json_inputs_given = 1;
        if (!(fd->name = tg_strdup(name))) return lerr(L, TG_ENOMEM, "out of memory");
        char where[200];
        snprintf(where, sizeof where, "functions.%.100s", name);
        if (!json_object_is_type(fo, json_type_object))
            return lerr(L, TG_ELOAD, "%s: expected an object", where);
        int rc = check_keys(L, fo, FUNC_KEYS, where);
        if (rc) return rc;
        json_object *ji, *jo, *ju;
        char w[240];
        if (!json_object_object_get_ex(fo, "inputs", &ji))
            return lerr(L, TG_ELOAD, "%s.inputs: missing", where);
        if (!json_object_object_get_ex(fo, "outputs", &jo))
            return lerr(L, TG_ELOAD, "%s.outputs: missing", where);
        snprintf(w, sizeof w, "%s.inputs", where);
        if ((rc = id_list(L, ji, w, &fd->inputs, &fd->nin))) return rc;
        snprintf(w, sizeof w, "%s.outputs", where);
        if ((rc = id_list(L, jo, w, &fd->outputs, &fd->nout))) return rc;
        if ((rc = check_inputs(L, fd, where, seen))) return rc;
        if (json_object_object_get_ex(fo, "updates", &ju)) {
            if (!json_object_is_type(ju, json_type_object))
                return lerr(L, TG_ELOAD, "%s.updates: expected an object (shared id -> id)",
                            where);
            int nu = json_object_object_length(ju);
            fd->updates = tg_calloc((size_t)nu + 1, sizeof *fd->updates);
            if (!fd->updates) return lerr(L, TG_ENOMEM, "out of memory");
            json_object_object_foreach(ju, sid, jval) {
                tg_var *s = tg_graph_find(g, sid);
                if (!s || s->inline_const || s->kind != TG_VAR_SHARED)
                    return lerr(L, TG_ELOAD, "%s.updates.%.100s: not a shared variable", where,
                                sid);
                if (!json_object_is_type(jval, json_type_string))
                    return lerr(L, TG_ELOAD, "%s.updates.%s: expected an id", where, sid);
                tg_var *v = json_id(jval) ? tg_graph_find(g, json_id(jval)) : NULL;
                if (!v || v->inline_const)
                    return lerr(L, TG_ELOAD, "%s.updates.%s: unknown id '%.140s'", where, sid,
                                json_object_get_string(jval));
                if (v->type.dtype != s->type.dtype || v->type.ndim != s->type.ndim ||
                    !tg_type_compatible(&v->type, &s->type)) {
                    char a[160], b[160];
                    tg_type_str(&s->type, a, sizeof a);
                    tg_type_str(&v->type, b, sizeof b);
                    return lerr(L, TG_ETYPE,
                                "%s.updates.%s: the new value '%s' is %s, but the shared "
                                "variable is %s",
                                where, sid, v->id, b, a);
                }
                fd->updates[fd->nupd].shared = s;
                fd->updates[fd->nupd].value = v;
                fd->nupd++;
            }
        }
    }
    return TG_OK;
}

static int load_functions(loader *L, json_object *jf) {
    bool *seen = tg_calloc((size_t)L->g->nvars + 1, sizeof *seen);
    if (!seen) return lerr(L, TG_ENOMEM, "out of memory");
    int rc = load_functions_in(L, jf, seen);
    tg_free(seen);
    return rc;
}

/* No `functions`: one implicit `main`, read off the file's nodes as
 * written (before the grad, lop and rop nodes expand into nodes of their
 * own; their outputs remain, the variables the function names). */
static int implicit_main(loader *L) {
    tg_graph *g = L->g;
    g->funcs = tg_calloc(1, sizeof *g->funcs);
    if (!g->funcs) return lerr(L, TG_ENOMEM, "out of memory");
    tg_fdecl *fd = &g->funcs[0];
    g->nfuncs = 1;
    fd->name = tg_strdup("main");
    fd->inputs = tg_calloc((size_t)g->nvars + 1, sizeof *fd->inputs);
    fd->outputs = tg_calloc((size_t)g->nvars + 1, sizeof *fd->outputs);
    bool *consumed = tg_calloc((size_t)g->nvars + 1, sizeof *consumed);
    if (!fd->name || !fd->inputs || !fd->outputs || !consumed) {
        tg_free(consumed);
        return lerr(L, TG_ENOMEM, "out of memory");
    }
    for (int i = 0; i < g->nvars; i++) {
        tg_var *v = g->vars[i];
        if (v->declared && v->kind == TG_VAR_INPUT && !v->owner) fd->inputs[fd->nin++] = v;
    }
    for (int i = 0; i < L->nfile; i++) {
        const tg_node *nd = L->file_order[i];
        for (int k = 0; k < nd->nin; k++) consumed[nd->inputs[k]->index] = true;
    }
    for (int i = 0; i < L->nfile; i++) {
        tg_node *nd = L->file_order[i];
        for (int k = 0; k < nd->nout; k++)
            if (!consumed[nd->outputs[k]->index]) fd->outputs[fd->nout++] = nd->outputs[k];
    }
    tg_free(consumed);
    return TG_OK;
}

/* ---- the whole file ---- */

static const char *const TOP_KEYS[] = {"format", "version", "name", "variables",
                                       "nodes", "functions", "meta", NULL};

static int load_root(loader *L, json_object *root) {
    tg_graph *g = L->g;
    if (!json_object_is_type(root, json_type_object))
        return lerr(L, TG_ELOAD, "(root): expected a JSON object");
    int rc = check_keys(L, root, TOP_KEYS, "(root)");
    if (rc) return rc;
    json_object *jf, *jv, *jvars, *jnodes, *jfun, *jmeta, *jname;
    if (!json_object_object_get_ex(root, "format", &jf) ||
        !json_object_is_type(jf, json_type_string) ||
        strcmp(json_object_get_string(jf), "tg-graph"))
        return lerr(L, TG_ELOAD, "format: expected \"tg-graph\"");
    int64_t ver;
    if (!json_object_object_get_ex(root, "version", &jv) || !tg_json_get_int(jv, &ver))
        return lerr(L, TG_ELOAD, "version: expected the integer 1");
    if (ver > 1)
        return lerr(L, TG_EVERSION,
                    "version: format version %lld is newer than this tg supports (1)",
                    (long long)ver);
    if (ver != 1) return lerr(L, TG_ELOAD, "version: expected the integer 1");
    if (json_object_object_get_ex(root, "name", &jname)) {
        if (!json_object_is_type(jname, json_type_string))
            return lerr(L, TG_ELOAD, "name: expected a string");
        if (!(g->name = tg_strdup(json_object_get_string(jname))))
            return lerr(L, TG_ENOMEM, "out of memory");
    }
    if (json_object_object_get_ex(root, "meta", &jmeta)) {
        if (!json_object_is_type(jmeta, json_type_object))
            return lerr(L, TG_ELOAD, "meta: expected an object");
        g->meta = json_object_get(jmeta);
    }
    if (!json_object_object_get_ex(root, "variables", &jvars))
        return lerr(L, TG_ELOAD, "variables: missing (an array, possibly empty)");
    if (!json_object_object_get_ex(root, "nodes", &jnodes))
        return lerr(L, TG_ELOAD, "nodes: missing (an array, possibly empty)");
    if ((rc = load_variables(L, jvars))) return rc;
    if (!json_object_is_type(jnodes, json_type_array))
        return lerr(L, TG_ELOAD, "nodes: expected an array");
    size_t nn = json_object_array_length(jnodes);
    L->file_order = tg_calloc(nn + 1, sizeof *L->file_order);
    if (!L->file_order) return lerr(L, TG_ENOMEM, "out of memory");
    for (size_t j = 0; j < nn; j++)
        if ((rc = load_node_outputs(L, json_object_array_get_idx(jnodes, j), j))) return rc;
    for (int i = 0; i < g->nvars; i++) {
        tg_var *v = g->vars[i];
        if (v->declared && !v->owner && !v->type_given)
            return lerr(L, TG_ELOAD,
                        "variables[%d].type: '%s' is an input and needs a type", v->json_index,
                        v->id);
    }
    for (int i = 0; i < L->nfile; i++)
        if ((rc = load_node_rest(L, json_object_array_get_idx(jnodes, (size_t)i), L->file_order[i])))
            return rc;
    if (g->nnodes && (rc = tg_graph_toposort(g, L->ctx))) return lwrap(L, TG_ELOAD);
    const bool has_funcs = json_object_object_get_ex(root, "functions", &jfun);
    /* (after the expansions, a grad node of several outputs was one of its
     * expansion's nodes in file_order, with only the last gradient) */
    if (!has_funcs && (rc = implicit_main(L))) return rc;
    if ((rc = infer_types(L))) return rc;
    if (has_funcs && (rc = load_functions(L, jfun))) return rc;
    if ((rc = check_inplace_readers(L))) return rc;
    /* A compiled-function file's graphs are cloned for their function right
     * after loading, which makes the same check. */
    for (int i = 0; !L->resolve && i < g->nfuncs; i++) {
        if (tg_fdecl_check(g, &g->funcs[i], L->ctx)) {
            if (g->funcs[i].json_inputs_given)
                tg_error_prefix(L->ctx, "functions.%.100s", g->funcs[i].name);
            else
                tg_error_prefix(L->ctx, "(implicit main function)");
            return lwrap(L, TG_EMISSING);
        }
    }
    return TG_OK;
}

/* The whole text is parsed into one json-c tree, which is slow on large
 * files (json-c makes a hash table for every object: 100,000 nodes are a
 * 120 MB tree, built at 8 to 20 MB/s) and then freed. Parsing each
 * variable and node alone from its span of the text, freeing it after
 * use, loads twice as fast (bench_opt: 10,000 nodes 0.12 -> 0.06 s,
 * 100,000 1.4 -> 0.63 s), and was tried twice (commit 14633c9, reverted
 * by 28fba01; then again with arena chunks kept across compiles): both
 * times the compiles after it got slower. The freed tree leaves a hole of
 * faulted-in memory that the compile's allocations reuse; without it they
 * come from the top of the heap, which the C library trims when a compile
 * frees its graph, and each compile page-faults them in again (the first
 * compile of 100,000 nodes 0.25 -> 0.5 s, 23,000 faults at several us
 * each on this kind of VM). Load and first compile together came out
 * only 15-20% faster, and later compiles slower, so the whole-text parse
 * stays. A third try (2026-12-04: batches of 64 nodes, any surprise sent
 * to this parse) loaded 100,000 nodes in 0.31 s instead of 0.47, and the
 * compiles after it were slower again (docs/optimizer.md). */
static tg_graph *load_text(const char *json, size_t len, const char *dir, const char *what,
                           tg_ctx *ctx) {
    loader L = {what ? what : "(graph)", dir, NULL, ctx, NULL, 0, NULL, NULL, {0}};
    tg_graph *g = NULL;
    if (len > (size_t)INT32_MAX) {
        lerr(&L, TG_EPARSE, "file too large for the JSON parser");
        return NULL;
    }
    tg_json_fail jf;
    json_object *root = tg_json_parse_object(NULL, json, len, TG_JSON_DEPTH, &jf);
    if (!root) {
        int line, col;
        tg_json_line_col(json, jf.at, &line, &col);
        if (jf.status == TG_ENOMEM)
            lerr(&L, TG_ENOMEM, "out of memory");
        else if (jf.why == tg_json_not_object)
            lerr(&L, TG_ELOAD, "(root): expected a JSON object");
        else
            lerr(&L, TG_EPARSE, "line %d, column %d: invalid JSON: %s", line, col, jf.why);
        goto done;
    }
    int64_t huge = tg_json_find_huge_int(json, len);
    if (huge >= 0) {
        int line, col, n = 0;
        tg_json_line_col(json, (size_t)huge, &line, &col);
        while (n < 40 && (size_t)huge + n < len && strchr("-0123456789", json[huge + n])) n++;
        lerr(&L, TG_EPARSE, "line %d, column %d: the integer %.*s%s is out of range (int64 "
             "and uint64 end at -2^63 and 2^64 - 1)", line, col, n, json + huge, n == 40 ? "..." : "");
        goto done;
    }
    char where[400];
    if (tg_json_find_nul(json, len, where, sizeof where)) {
        lerr(&L, TG_ELOAD, "%s: contains a NUL character (\\u0000), which tg does not accept in a "
             "graph file (its strings would end there)", where);
        goto done;
    }
    g = tg_graph_alloc();
    if (!g || !(g->path = tg_strdup(L.what)) || (dir && !(g->dir = tg_strdup(dir)))) {
        lerr(&L, TG_ENOMEM, "out of memory");
        tg_graph_free(g);
        g = NULL;
        goto done;
    }
    L.g = g;
    if (load_root(&L, root)) {
        tg_graph_free(g);
        g = NULL;
    }
done:
    loader_done(&L);
    if (root) json_object_put(root);
    return g;
}

tg_graph *tg_graph_load_string(const char *json, size_t len, const char *dir,
                               const char *what, tg_ctx *ctx) {
    if (!json) {
        tg_errorf(ctx, TG_EINVAL, "%s: no text", what ? what : "(graph)");
        return NULL;
    }
    return load_text(json, len, dir, what, ctx);
}

tg_graph *tg_graph_load(const char *path, tg_ctx *ctx) {
    if (!path) {
        tg_errorf(ctx, TG_EINVAL, "tg_graph_load: no path");
        return NULL;
    }
    size_t len;
    char *text = tg_file_read(path, &len, ctx);
    if (!text) return NULL;
    char *pc = tg_strdup(path);
    if (!pc) {
        tg_free(text);
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    tg_graph *g = load_text(text, len, dirname(pc), path, ctx);
    tg_free(pc);
    tg_free(text);
    return g;
}

/* ---- nested bodies ---- */

static const char *const BODY_KEYS[] = {"variables", "nodes", "inputs", "outputs", NULL};

/* A body (FORMAT.md s7): the same passes as a file, then its `inputs` and
 * `outputs` as function "body". Errors are "<where>: LOCATION: message"
 * (the caller adds the file and the node that holds the body). */
tg_graph *tg_body_load(json_object *body, const char *where, tg_ctx *ctx) {
    loader L = {where ? where : "body", NULL, NULL, ctx, NULL, 0, NULL, NULL, {0}};
    tg_graph *g = tg_graph_alloc();
    json_object *jvars, *jnodes, *ji, *jo;
    int rc = TG_OK;
    if (!g || !(g->path = tg_strdup(L.what))) {
        lerr(&L, TG_ENOMEM, "out of memory");
        goto fail;
    }
    L.g = g;
    if (!json_object_is_type(body, json_type_object)) {
        lerr(&L, TG_ELOAD, "expected an object with variables, nodes, inputs and outputs");
        goto fail;
    }
    if ((rc = check_keys(&L, body, BODY_KEYS, "(body)"))) goto fail;
    if (!json_object_object_get_ex(body, "variables", &jvars)) {
        lerr(&L, TG_ELOAD, "variables: missing (an array, possibly empty)");
        goto fail;
    }
    if (!json_object_object_get_ex(body, "nodes", &jnodes) ||
        !json_object_is_type(jnodes, json_type_array)) {
        lerr(&L, TG_ELOAD, "nodes: expected an array");
        goto fail;
    }
    if (!json_object_object_get_ex(body, "inputs", &ji)) {
        lerr(&L, TG_ELOAD, "inputs: missing (an array of ids)");
        goto fail;
    }
    if (!json_object_object_get_ex(body, "outputs", &jo)) {
        lerr(&L, TG_ELOAD, "outputs: missing (an array of ids)");
        goto fail;
    }
    if ((rc = load_variables(&L, jvars))) goto fail;
    size_t nn = json_object_array_length(jnodes);
    if (!(L.file_order = tg_calloc(nn + 1, sizeof *L.file_order))) {
        lerr(&L, TG_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t j = 0; j < nn; j++)
        if ((rc = load_node_outputs(&L, json_object_array_get_idx(jnodes, j), j))) goto fail;
    for (int i = 0; i < g->nvars; i++) {
        tg_var *v = g->vars[i];
        if (v->declared && !v->owner && !v->type_given) {
            lerr(&L, TG_ELOAD, "variables[%d].type: '%s' is an input and needs a type",
                 v->json_index, v->id);
            goto fail;
        }
    }
    for (int i = 0; i < L.nfile; i++)
        if ((rc = load_node_rest(&L, json_object_array_get_idx(jnodes, (size_t)i),
                                 L.file_order[i])))
            goto fail;
    if (g->nnodes && tg_graph_toposort(g, ctx)) {
        lwrap(&L, TG_ELOAD);
        goto fail;
    }
    if ((rc = infer_types(&L))) goto fail;
    if (!(g->funcs = tg_calloc(1, sizeof *g->funcs)) || !(g->funcs[0].name = tg_strdup("body"))) {
        lerr(&L, TG_ENOMEM, "out of memory");
        goto fail;
    }
    g->nfuncs = 1;
    tg_fdecl *fd = &g->funcs[0];
    fd->json_inputs_given = 1;
    if ((rc = id_list(&L, ji, "inputs", &fd->inputs, &fd->nin))) goto fail;
    if ((rc = id_list(&L, jo, "outputs", &fd->outputs, &fd->nout))) goto fail;
    if (fd->nout == 0) {
        lerr(&L, TG_ELOAD, "outputs: a body needs at least one output");
        goto fail;
    }
    for (int i = 0; i < fd->nin; i++) {
        tg_var *v = fd->inputs[i];
        if (v->kind != TG_VAR_INPUT || v->owner) {
            lerr(&L, TG_ELOAD, "inputs[%d]: '%s' is not a free input of the body", i, v->id);
            goto fail;
        }
        for (int j = 0; j < i; j++)
            if (fd->inputs[j] == v) {
                lerr(&L, TG_ELOAD, "inputs[%d]: '%s' is listed twice", i, v->id);
                goto fail;
            }
    }
    /* Every free input the outputs need must be listed. */
    if (tg_fdecl_check(g, fd, ctx)) {
        lwrap(&L, TG_EMISSING);
        goto fail;
    }
    loader_done(&L);
    return g;
fail:
    loader_done(&L);
    tg_graph_free(g);
    return NULL;
}

tg_graph *tg_graph_load_json(json_object *root, const char *what,
                             tg_value_resolver resolve, void *ud, tg_ctx *ctx) {
    loader L = {what ? what : "(graph)", NULL, NULL, ctx, NULL, 0, resolve, ud, {0}};
    tg_graph *g = tg_graph_alloc();
    if (!g || !(g->path = tg_strdup(L.what))) {
        lerr(&L, TG_ENOMEM, "out of memory");
        tg_graph_free(g);
        return NULL;
    }
    L.g = g;
    if (load_root(&L, root)) {
        tg_graph_free(g);
        g = NULL;
    }
    loader_done(&L);
    return g;
}

/* ---- node checks shared with the .tgf reader ---- */

int tg_node_check_arity(const tg_node *nd, tg_ctx *ctx) {
    const tg_op *op = nd->op;
    if (nd->nin < op->nin_min || (op->nin_max >= 0 && nd->nin > op->nin_max)) {
        if (op->nin_min == op->nin_max)
            return tg_errorf(ctx, TG_ELOAD, "inputs: %s expects %d inputs, got %d", op->name,
                             op->nin_min, nd->nin);
        if (op->nin_max < 0)
            return tg_errorf(ctx, TG_ELOAD, "inputs: %s expects at least %d inputs, got %d",
                             op->name, op->nin_min, nd->nin);
        return tg_errorf(ctx, TG_ELOAD, "inputs: %s expects %d to %d inputs, got %d", op->name,
                         op->nin_min, op->nin_max, nd->nin);
    }
    if (op->nout >= 0 && nd->nout != op->nout)
        return tg_errorf(ctx, TG_ELOAD, "outputs: %s has %d output%s, got %d", op->name,
                         op->nout, op->nout == 1 ? "" : "s", nd->nout);
    return TG_OK;
}

int tg_node_check_attr_keys(const tg_node *nd, json_object *ja, tg_ctx *ctx) {
    const tg_op *op = nd->op;
    if (op->flags & TG_OPF_OPEN_ATTRS) return TG_OK;
    json_object_object_foreach(ja, key, val) {
        (void)val;
        if (!op->attr_keys || !key_in(key, op->attr_keys))
            return tg_errorf(ctx, TG_ELOAD, "attrs.%s: %s has no attribute '%s'", key, op->name,
                             key);
    }
    return TG_OK;
}

int tg_node_set_inplace(tg_node *nd, int oi, int64_t ii, tg_ctx *ctx) {
    const tg_op *op = nd->op;
    if (ii < 0 || ii >= nd->nin || ii > INT8_MAX)
        return tg_errorf(ctx, TG_ELOAD, "inplace.%d: not an input index", oi);
    bool can = (op->flags & TG_OPF_ELEMWISE) ||
               (ii < 32 && (oi == 0 || (op->flags & TG_OPF_INPLACE_ANY_OUTPUT)) && (op->inplace_inputs >> ii) & 1u);
    if (!can)
        return tg_errorf(ctx, TG_ELOAD, "inplace.%d: %s cannot write output %d over input %d",
                         oi, op->name, oi, (int)ii);
    for (int k = 0; k < nd->nout; k++)
        if (nd->inplace[k] == ii)
            return tg_errorf(ctx, TG_ELOAD,
                             "inplace.%d: input %d is already overwritten by output %d", oi,
                             (int)ii, k);
    nd->inplace[oi] = (int8_t)ii;
    return TG_OK;
}

int tg_node_check_inplace_types(const tg_node *nd, tg_ctx *ctx) {
    for (int k = 0; nd->inplace && k < nd->nout; k++) {
        if (nd->inplace[k] < 0) continue;
        const tg_var *in = nd->inputs[nd->inplace[k]], *out = nd->outputs[k];
        if (in->kind == TG_VAR_CONSTANT)
            return tg_errorf(ctx, TG_ELOAD,
                             "inplace.%d: input %d '%s' is a constant and cannot be overwritten",
                             k, nd->inplace[k], in->inline_const ? "(inline)" : in->id);
        if (in->type.dtype != out->type.dtype || in->type.ndim != out->type.ndim ||
            !tg_type_compatible(&in->type, &out->type)) {
            char a[160], b[160];
            tg_type_str(&in->type, a, sizeof a);
            tg_type_str(&out->type, b, sizeof b);
            return tg_errorf(ctx, TG_ETYPE,
                             "inplace.%d: output %d (%s) cannot be written over input %d (%s)", k,
                             k, b, nd->inplace[k], a);
        }
    }
    return TG_OK;
}
