/* The saver: tg_graph -> interchange JSON, canonical: nodes in
 * topological order, attrs with their defaults, values inline. */
#include <string.h>

#include "io/io.h"
#include "ops/op.h"

static json_object *trace_json(const tg_trace *t) {
    json_object *arr = json_object_new_array();
    for (int i = 0; i < t->n; i++) {
        const tg_frame *f = &t->frames[i];
        json_object *o = json_object_new_object();
        if (f->file) json_object_object_add(o, "file", json_object_new_string(f->file));
        if (f->line >= 0) json_object_object_add(o, "line", json_object_new_int64(f->line));
        if (f->function) json_object_object_add(o, "function", json_object_new_string(f->function));
        if (f->code) json_object_object_add(o, "code", json_object_new_string(f->code));
        json_object_array_add(arr, o);
    }
    return arr;
}

static json_object *inline_value(const tg_var *v) {
    const tg_array *a = v->value;
    /* Weak scalars stay bare so that they stay weak. */
    if (v->weak && a->ndim == 0) {
        switch (tg_dtype_kind(a->dtype)) {
        case 'b': return json_object_new_boolean(*(const uint8_t *)tg_array_data(a) != 0);
        case 'i': return json_object_new_int64(*(const int64_t *)tg_array_data(a));
        default: break;
        }
        double d = tg_array_get_flat(a, 0);
        if (d == d && d - d == 0) return json_object_new_double(d);
    }
    return tg_value_to_json(a);
}

json_object *tg_graph_to_json(const tg_graph *g) {
    json_object *root = json_object_new_object();
    json_object_object_add(root, "format", json_object_new_string("tg-graph"));
    json_object_object_add(root, "version", json_object_new_int(1));
    if (g->name) json_object_object_add(root, "name", json_object_new_string(g->name));
    json_object *vars = json_object_new_array();
    for (int i = 0; i < g->nvars; i++) {
        const tg_var *v = g->vars[i];
        if (v->inline_const) continue;
        bool node_output = v->owner != NULL;
        if (node_output && !v->declared) continue;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_string(v->id));
        if (!node_output || v->type_given)
            json_object_object_add(o, "type", tg_type_to_json(&v->type));
        if (v->name) json_object_object_add(o, "name", json_object_new_string(v->name));
        if (v->kind == TG_VAR_CONSTANT)
            json_object_object_add(o, "constant", tg_value_to_json(v->value));
        if (v->kind == TG_VAR_SHARED && v->shared && v->shared->value)
            json_object_object_add(o, "shared", tg_value_to_json(v->shared->value));
        if (v->test_value) json_object_object_add(o, "test_value", tg_value_to_json(v->test_value));
        json_object_array_add(vars, o);
    }
    json_object_object_add(root, "variables", vars);
    json_object *nodes = json_object_new_array();
    for (int i = 0; i < g->nnodes; i++) {
        const tg_node *n = g->nodes[i];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "op", json_object_new_string(n->op->name));
        json_object *ins = json_object_new_array();
        for (int k = 0; k < n->nin; k++) {
            const tg_var *v = n->inputs[k];
            if (v->inline_const) {
                json_object *c = json_object_new_object();
                json_object_object_add(c, "value", inline_value(v));
                json_object_array_add(ins, c);
            } else {
                json_object_array_add(ins, json_object_new_string(v->id));
            }
        }
        json_object_object_add(o, "inputs", ins);
        json_object *outs = json_object_new_array();
        for (int k = 0; k < n->nout; k++)
            json_object_array_add(outs, json_object_new_string(n->outputs[k]->id));
        json_object_object_add(o, "outputs", outs);
        if (n->attrs && json_object_object_length(n->attrs)) {
            json_object *a = NULL;
            json_object_deep_copy(n->attrs, &a, NULL);
            json_object_object_add(o, "attrs", a);
        }
        if (n->name) json_object_object_add(o, "name", json_object_new_string(n->name));
        if (n->trace.n) json_object_object_add(o, "trace", trace_json(&n->trace));
        if (n->inplace) {
            json_object *ip = json_object_new_object();
            for (int k = 0; k < n->nout; k++)
                if (n->inplace[k] >= 0) {
                    char key[16];
                    snprintf(key, sizeof key, "%d", k);
                    json_object_object_add(ip, key, json_object_new_int(n->inplace[k]));
                }
            json_object_object_add(o, "inplace", ip);
        }
        json_object_array_add(nodes, o);
    }
    json_object_object_add(root, "nodes", nodes);
    bool explicit_funcs = g->nfuncs != 1 || g->funcs[0].json_inputs_given;
    if (explicit_funcs) {
        json_object *fs = json_object_new_object();
        for (int i = 0; i < g->nfuncs; i++) {
            const tg_fdecl *fd = &g->funcs[i];
            json_object *f = json_object_new_object(), *a = json_object_new_array(),
                        *b = json_object_new_array();
            for (int k = 0; k < fd->nin; k++)
                json_object_array_add(a, json_object_new_string(fd->inputs[k]->id));
            for (int k = 0; k < fd->nout; k++)
                json_object_array_add(b, json_object_new_string(fd->outputs[k]->id));
            json_object_object_add(f, "inputs", a);
            json_object_object_add(f, "outputs", b);
            if (fd->nupd) {
                json_object *u = json_object_new_object();
                for (int k = 0; k < fd->nupd; k++)
                    json_object_object_add(u, fd->updates[k].shared->id,
                                           json_object_new_string(fd->updates[k].value->id));
                json_object_object_add(f, "updates", u);
            }
            json_object_object_add(fs, fd->name, f);
        }
        json_object_object_add(root, "functions", fs);
    }
    if (g->meta) json_object_object_add(root, "meta", json_object_get(g->meta));
    return root;
}

char *tg_graph_to_string(const tg_graph *g, tg_ctx *ctx) {
    json_object *root = tg_graph_to_json(g);
    if (!root) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    const char *s = json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    char *out = s ? tg_strdup(s) : NULL;
    json_object_put(root);
    if (!out) tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return out;
}

void tg_string_free(char *s) { tg_free(s); }

int tg_graph_save(const tg_graph *g, const char *path, tg_ctx *ctx) {
    char *s = tg_graph_to_string(g, ctx);
    if (!s) return TG_ENOMEM;
    size_t n = strlen(s);
    s[n] = 0;
    char *withnl = tg_realloc(s, n + 2);
    if (!withnl) {
        tg_free(s);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    int rc = tg_file_write_atomic(path, withnl, n + 1, ctx);
    tg_free(withnl);
    return rc;
}
