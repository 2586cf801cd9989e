/* The saver: tg_graph -> interchange JSON, canonical: declared variables
 * in file order, nodes in topological order, attrs with their defaults,
 * values inline (small arrays as data, large ones as base64), weak inline
 * scalars bare so that they stay weak, the implicit `main` left implicit.
 * Loading what this writes gives the same graph, and saving that again
 * gives the same text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "ops/op.h"

static json_object *str(const char *s) { return json_object_new_string(s); }

static json_object *trace_json(const tg_trace *t) {
    bool ok = true;
    json_object *arr = json_object_new_array();
    for (int i = 0; i < t->n; i++) {
        const tg_frame *f = &t->frames[i];
        json_object *o = json_object_new_object();
        if (f->file) tg_json_put(o, "file", str(f->file), &ok);
        if (f->line >= 0) tg_json_put(o, "line", json_object_new_int64(f->line), &ok);
        if (f->function) tg_json_put(o, "function", str(f->function), &ok);
        if (f->code) tg_json_put(o, "code", str(f->code), &ok);
        tg_json_push(arr, o, &ok);
    }
    if (!ok) {
        json_object_put(arr);
        return NULL;
    }
    return arr;
}

/* An inline constant. One that the file wrote weak is written bare (a
 * number or a boolean; {"data": "nan"} for a non-finite float) in the kind
 * of the dtype it took, which resolves to that same dtype again. */
static json_object *inline_value(const tg_var *v) {
    const tg_array *a = v->value;
    if (!v->weak_in_file || a->ndim != 0) return tg_value_to_json(a);
    const char *p = tg_array_data(a);
    switch (tg_dtype_kind(a->dtype)) {
    case 'b': return json_object_new_boolean(*(const uint8_t *)p != 0);
    case 'i': return json_object_new_int64(tg_load_i64(a->dtype, p));
    case 'u':
        if (a->dtype == TG_UINT64) {
            uint64_t u;
            memcpy(&u, p, 8);
            return json_object_new_uint64(u);
        }
        return json_object_new_int64(tg_load_i64(a->dtype, p));
    default: break;
    }
    double d = tg_load_f64(a->dtype, p);
    if (isfinite(d)) return tg_json_new_float(d, a->dtype);
    json_object *o = json_object_new_object();
    bool ok = true;
    tg_json_put(o, "data", str(isnan(d) ? "nan" : d > 0 ? "inf" : "-inf"), &ok);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static json_object *variable_json(const tg_var *v, tg_value_writer write, void *ud) {
    bool ok = true, node_output = v->owner != NULL;
    json_object *o = json_object_new_object();
    tg_json_put(o, "id", str(v->id), &ok);
    /* A node output's type is the op's to give: written only when the
     * file declared it (then refined by inference). */
    if (!node_output || v->type_given) tg_json_put(o, "type", tg_type_to_json(&v->type), &ok);
    if (v->name) tg_json_put(o, "name", str(v->name), &ok);
    if (v->kind == TG_VAR_CONSTANT && v->value)
        tg_json_put(o, "constant", write ? write(ud, v, v->value) : tg_value_to_json(v->value), &ok);
    /* The host value: brought back before writing (tg_shared_fetch_vars) */
    const tg_array *sv = v->kind == TG_VAR_SHARED && v->shared ? tg_shared_value(v->shared, NULL) : NULL;
    if (sv) tg_json_put(o, "shared", write ? write(ud, v, sv) : tg_value_to_json(sv), &ok);
    if (v->test_value) tg_json_put(o, "test_value", tg_value_to_json(v->test_value), &ok);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_object *tg_json_attrs_sorted(json_object *attrs) {
    int n = json_object_object_length(attrs), i = 0;
    const char **keys = tg_calloc((size_t)n + 1, sizeof *keys);
    json_object *o = keys ? json_object_new_object() : NULL;
    bool ok = o != NULL;
    if (ok) {
        json_object_object_foreach(attrs, k, v) {
            (void)v;
            keys[i++] = k;
        }
        qsort(keys, (size_t)n, sizeof *keys, key_cmp);
        for (i = 0; ok && i < n; i++) {
            json_object *v = NULL, *c = NULL;
            json_object_object_get_ex(attrs, keys[i], &v);
            if (v && json_object_deep_copy(v, &c, NULL) != 0) {
                ok = false;
                break;
            }
            if (json_object_object_add(o, keys[i], c) != 0) {
                json_object_put(c);
                ok = false;
            }
        }
    }
    tg_free(keys);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* Whether output k's in-place hint goes into the file: not one on a
 * shared variable (the optimizer's update in place of the weights,
 * tg_inplace_shared_ok): that is one function's, checked against its
 * updates, where the file is a graph any function may read; the loader
 * refuses them, and the optimizer finds them again. */
static bool written_hint(const tg_node *n, int k) {
    return n->inplace[k] >= 0 && n->inputs[n->inplace[k]]->kind != TG_VAR_SHARED;
}

static json_object *node_json(const tg_node *n) {
    bool ok = true;
    json_object *o = json_object_new_object();
    tg_json_put(o, "op", str(n->op->name), &ok);
    json_object *ins = json_object_new_array();
    for (int k = 0; k < n->nin; k++) {
        const tg_var *v = n->inputs[k];
        if (v->inline_const && v->value) {
            json_object *c = json_object_new_object();
            tg_json_put(c, "value", inline_value(v), &ok);
            tg_json_push(ins, c, &ok);
        } else {
            tg_json_push(ins, str(v->id), &ok);
        }
    }
    tg_json_put(o, "inputs", ins, &ok);
    json_object *outs = json_object_new_array();
    for (int k = 0; k < n->nout; k++) tg_json_push(outs, str(n->outputs[k]->id), &ok);
    tg_json_put(o, "outputs", outs, &ok);
    if (n->attrs && json_object_object_length(n->attrs))
        tg_json_put(o, "attrs", tg_json_attrs_sorted(n->attrs), &ok);
    if (n->name) tg_json_put(o, "name", str(n->name), &ok);
    if (n->trace.n) tg_json_put(o, "trace", trace_json(&n->trace), &ok);
    bool hints = false;
    for (int k = 0; n->inplace && k < n->nout; k++) hints |= written_hint(n, k);
    if (hints) {
        json_object *ip = json_object_new_object();
        for (int k = 0; k < n->nout; k++)
            if (written_hint(n, k)) {
                char key[16];
                snprintf(key, sizeof key, "%d", k);
                tg_json_put(ip, key, json_object_new_int(n->inplace[k]), &ok);
            }
        tg_json_put(o, "inplace", ip, &ok);
    }
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static json_object *function_json(const tg_fdecl *fd) {
    bool ok = true;
    json_object *f = json_object_new_object(), *a = json_object_new_array(),
                *b = json_object_new_array();
    for (int k = 0; k < fd->nin; k++) tg_json_push(a, str(fd->inputs[k]->id), &ok);
    for (int k = 0; k < fd->nout; k++) tg_json_push(b, str(fd->outputs[k]->id), &ok);
    tg_json_put(f, "inputs", a, &ok);
    tg_json_put(f, "outputs", b, &ok);
    if (fd->nupd) {
        json_object *u = json_object_new_object();
        for (int k = 0; k < fd->nupd; k++)
            tg_json_put(u, fd->updates[k].shared->id, str(fd->updates[k].value->id), &ok);
        tg_json_put(f, "updates", u, &ok);
    }
    if (!ok) {
        json_object_put(f);
        return NULL;
    }
    return f;
}

/* Whether a function names v by its id (an input, an output, an update's
 * value): such a variable must be declared even when its readers write it
 * inline. */
static bool named_by_function(const tg_graph *g, const tg_var *v) {
    for (int i = 0; i < g->nfuncs; i++) {
        const tg_fdecl *fd = &g->funcs[i];
        for (int k = 0; k < fd->nin; k++)
            if (fd->inputs[k] == v) return true;
        for (int k = 0; k < fd->nout; k++)
            if (fd->outputs[k] == v) return true;
        for (int k = 0; k < fd->nupd; k++)
            if (fd->updates[k].value == v) return true;
    }
    return false;
}

/* Whether a graph's file lists v in `variables`: inline constants go back
 * inline (and are declared too when a function names them: a folded
 * output or update); undeclared node outputs are implied by their nodes. */
static bool var_written(const tg_graph *g, const tg_var *v) {
    return !((v->inline_const && !named_by_function(g, v)) || (v->owner && !v->declared));
}

/* A file without `functions` stays without: its `main` is implied. */
static bool funcs_written(const tg_graph *g) { return g->nfuncs != 1 || g->funcs[0].json_inputs_given; }

json_object *tg_graph_to_json(const tg_graph *g) { return tg_graph_to_json_ext(g, NULL, NULL); }

json_object *tg_graph_to_json_ext(const tg_graph *g, tg_value_writer write, void *ud) {
    bool ok = true;
    json_object *root = json_object_new_object();
    tg_json_put(root, "format", str("tg-graph"), &ok);
    tg_json_put(root, "version", json_object_new_int(1), &ok);
    if (g->name) tg_json_put(root, "name", str(g->name), &ok);
    json_object *vars = json_object_new_array();
    for (int i = 0; ok && i < g->nvars; i++) {
        if (var_written(g, g->vars[i])) tg_json_push(vars, variable_json(g->vars[i], write, ud), &ok);
    }
    tg_json_put(root, "variables", vars, &ok);
    json_object *nodes = json_object_new_array();
    for (int i = 0; ok && i < g->nnodes; i++) tg_json_push(nodes, node_json(g->nodes[i]), &ok);
    tg_json_put(root, "nodes", nodes, &ok);
    if (funcs_written(g)) {
        json_object *fs = json_object_new_object();
        for (int i = 0; ok && i < g->nfuncs; i++)
            tg_json_put(fs, g->funcs[i].name, function_json(&g->funcs[i]), &ok);
        tg_json_put(root, "functions", fs, &ok);
    }
    if (g->meta) tg_json_put(root, "meta", json_object_get(g->meta), &ok);
    if (!ok) {
        json_object_put(root);
        return NULL;
    }
    return root;
}

/* ---- the same JSON as text, without the tree ---- */

/* s[0, n) as json_object_to_json_string_ext(JSON_C_TO_STRING_NOSLASHESCAPE)
 * writes a string: the two-character escapes JSON has, \u00xx for the
 * other control characters (NUL included), every other byte as it is. */
static void put_string_n(tg_str *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    tg_str_add(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        tg_str_add(b, s + run, i - run);
        run = i + 1;
        char e[6] = {'\\', 0};
        size_t k = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            k = 6;
        }
        tg_str_add(b, e, k);
    }
    tg_str_add(b, s + run, n - run);
    tg_str_add(b, "\"", 1);
}

static void put_string(tg_str *b, const char *s) { put_string_n(b, s, strlen(s)); }

/* o as json-c writes it, then released; NULL (out of memory) marks b. */
static void put_json(tg_str *b, json_object *o) {
    const char *t = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
    if (t) tg_str_add(b, t, strlen(t));
    else b->oom = true;
    json_object_put(o);
}

static void put_int(tg_str *b, long long v) {
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", v);
    tg_str_add(b, t, (size_t)n);
}

/* "key": after a comma unless it is the object's first. */
static void put_key(tg_str *b, bool *first, const char *key) {
    if (!*first) tg_str_add(b, ",", 1);
    *first = false;
    put_string(b, key);
    tg_str_add(b, ":", 1);
}

static void put_node(tg_str *b, const tg_node *n) {
    tg_str_add(b, "{\"op\":", 6);
    put_string(b, n->op->name);
    tg_str_add(b, ",\"inputs\":[", 11);
    for (int k = 0; k < n->nin; k++) {
        const tg_var *v = n->inputs[k];
        if (k) tg_str_add(b, ",", 1);
        if (v->inline_const && v->value) {
            tg_str_add(b, "{\"value\":", 9);
            put_json(b, inline_value(v));
            tg_str_add(b, "}", 1);
        } else {
            put_string(b, v->id);
        }
    }
    tg_str_add(b, "],\"outputs\":[", 13);
    for (int k = 0; k < n->nout; k++) {
        if (k) tg_str_add(b, ",", 1);
        put_string(b, n->outputs[k]->id);
    }
    tg_str_add(b, "]", 1);
    if (n->attrs && json_object_object_length(n->attrs)) {
        tg_str_add(b, ",\"attrs\":", 9);
        put_json(b, tg_json_attrs_sorted(n->attrs));
    }
    if (n->name) {
        tg_str_add(b, ",\"name\":", 8);
        put_string(b, n->name);
    }
    if (n->trace.n) {
        tg_str_add(b, ",\"trace\":[", 10);
        for (int i = 0; i < n->trace.n; i++) {
            /* the keys trace_json writes, in its order */
            const tg_frame *f = &n->trace.frames[i];
            bool first = true;
            tg_str_add(b, i ? ",{" : "{", i ? 2 : 1);
            if (f->file) put_key(b, &first, "file"), put_string(b, f->file);
            if (f->line >= 0) put_key(b, &first, "line"), put_int(b, (long long)f->line);
            if (f->function) put_key(b, &first, "function"), put_string(b, f->function);
            if (f->code) put_key(b, &first, "code"), put_string(b, f->code);
            tg_str_add(b, "}", 1);
        }
        tg_str_add(b, "]", 1);
    }
    if (n->inplace) {
        tg_str_add(b, ",\"inplace\":{", 12);
        bool first = true;
        for (int k = 0; k < n->nout; k++) {
            if (n->inplace[k] < 0) continue;
            tg_str_add(b, first ? "\"" : ",\"", first ? 1 : 2);
            first = false;
            put_int(b, k);
            tg_str_add(b, "\":", 2);
            put_int(b, n->inplace[k]);
        }
        tg_str_add(b, "}", 1);
    }
    tg_str_add(b, "}", 1);
}

char *tg_graph_to_text_ext(const tg_graph *g, tg_value_writer write, void *ud, size_t *len) {
    tg_str b = {0};
    tg_str_add(&b, "{\"format\":\"tg-graph\",\"version\":1", 32);
    if (g->name) {
        tg_str_add(&b, ",\"name\":", 8);
        put_string(&b, g->name);
    }
    tg_str_add(&b, ",\"variables\":[", 14);
    bool first = true;
    for (int i = 0; !b.oom && i < g->nvars; i++) {
        if (!var_written(g, g->vars[i])) continue;
        if (!first) tg_str_add(&b, ",", 1);
        first = false;
        put_json(&b, variable_json(g->vars[i], write, ud));
    }
    tg_str_add(&b, "],\"nodes\":[", 11);
    for (int i = 0; !b.oom && i < g->nnodes; i++) {
        if (i) tg_str_add(&b, ",", 1);
        put_node(&b, g->nodes[i]);
    }
    tg_str_add(&b, "]", 1);
    if (funcs_written(g)) {
        tg_str_add(&b, ",\"functions\":{", 14);
        for (int i = 0; !b.oom && i < g->nfuncs; i++) {
            if (i) tg_str_add(&b, ",", 1);
            put_string(&b, g->funcs[i].name);
            tg_str_add(&b, ":", 1);
            put_json(&b, function_json(&g->funcs[i]));
        }
        tg_str_add(&b, "}", 1);
    }
    if (g->meta) {
        tg_str_add(&b, ",\"meta\":", 8);
        put_json(&b, json_object_get(g->meta));
    }
    tg_str_add(&b, "}", 1);
    if (b.oom || !b.s) {
        tg_str_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.s;
}

/* ---- text ---- */

/* The layout: a value goes on one line when that line stays within WIDTH
 * columns, or when it is an array of scalars (a row of data) or an object
 * of scalars and rows (a flat or base64 value, a trace frame); otherwise
 * its members go one per line, indented by two. Diffs of saved graphs stay
 * readable: one variable, node or data row per line. */
enum { WIDTH = 100 };

static bool is_scalar(json_object *o) {
    return !json_object_is_type(o, json_type_object) && !json_object_is_type(o, json_type_array);
}

static bool scalar_array(json_object *o) {
    if (!json_object_is_type(o, json_type_array)) return false;
    size_t n = json_object_array_length(o);
    for (size_t i = 0; i < n; i++)
        if (!is_scalar(json_object_array_get_idx(o, i))) return false;
    return true;
}

/* One-line form; gives up (returns false) once it passes `limit` bytes
 * past where it started, so that deciding the layout stays linear. */
static bool emit_flat(tg_str *b, json_object *o, size_t start, size_t limit) {
    if (b->oom || b->len - start > limit) return false;
    switch (json_object_get_type(o)) {
    case json_type_null: tg_str_add(b, "null", 4); return true;
    case json_type_string:
        put_string_n(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
        return true;
    case json_type_array: {
        size_t n = json_object_array_length(o);
        tg_str_add(b, "[", 1);
        for (size_t i = 0; i < n; i++) {
            if (i) tg_str_add(b, ", ", 2);
            if (!emit_flat(b, json_object_array_get_idx(o, i), start, limit)) return false;
        }
        tg_str_add(b, "]", 1);
        return b->len - start <= limit;
    }
    case json_type_object: {
        bool first = true;
        tg_str_add(b, "{", 1);
        json_object_object_foreach(o, k, v) {
            if (!first) tg_str_add(b, ", ", 2);
            first = false;
            put_string_n(b, k, strlen(k));
            tg_str_add(b, ": ", 2);
            if (!emit_flat(b, v, start, limit)) return false;
        }
        tg_str_add(b, "}", 1);
        return b->len - start <= limit;
    }
    default: {
        /* numbers and booleans as json-c writes them (doubles keep the text
         * they were read or made with) */
        const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        if (!t) {
            b->oom = true;
            return false;
        }
        tg_str_add(b, t, strlen(t));
        return true;
    }
    }
}

/* An object whose members are all scalars or rows: a value written as
 * flat data or base64, a trace frame. */
static bool flat_object(json_object *o) {
    if (!json_object_is_type(o, json_type_object)) return false;
    json_object_object_foreach(o, k, v) {
        (void)k;
        if (!is_scalar(v) && !scalar_array(v)) return false;
    }
    return true;
}

static void emit(tg_str *b, json_object *o, int indent) {
    size_t start = b->len;
    size_t room = WIDTH > indent ? (size_t)(WIDTH - indent) : 0;
    if (is_scalar(o) || scalar_array(o) || flat_object(o)) {
        emit_flat(b, o, start, SIZE_MAX);
        return;
    }
    bool empty = json_object_is_type(o, json_type_array) ? json_object_array_length(o) == 0
                                                          : json_object_object_length(o) == 0;
    if (emit_flat(b, o, start, empty ? SIZE_MAX : room)) return;
    /* too long for one line: undo and lay the members out */
    if (b->oom) return;
    b->len = start;
    b->s[start] = 0;
    char pad[WIDTH + 8];
    int in = indent + 2 < WIDTH ? indent + 2 : WIDTH;
    memset(pad, ' ', (size_t)in);
    if (json_object_is_type(o, json_type_array)) {
        size_t n = json_object_array_length(o);
        tg_str_add(b, "[\n", 2);
        for (size_t i = 0; i < n; i++) {
            tg_str_add(b, pad, (size_t)in);
            emit(b, json_object_array_get_idx(o, i), in);
            tg_str_add(b, i + 1 < n ? ",\n" : "\n", i + 1 < n ? 2 : 1);
        }
        tg_str_add(b, pad, (size_t)(in - 2));
        tg_str_add(b, "]", 1);
    } else {
        size_t n = (size_t)json_object_object_length(o), i = 0;
        tg_str_add(b, "{\n", 2);
        json_object_object_foreach(o, k, v) {
            tg_str_add(b, pad, (size_t)in);
            put_string_n(b, k, strlen(k));
            tg_str_add(b, ": ", 2);
            emit(b, v, in);
            i++;
            tg_str_add(b, i < n ? ",\n" : "\n", i < n ? 2 : 1);
        }
        tg_str_add(b, pad, (size_t)(in - 2));
        tg_str_add(b, "}", 1);
    }
}

char *tg_graph_to_string(const tg_graph *g, tg_ctx *ctx) {
    if (tg_shared_fetch_vars(g->vars, g->nvars, ctx)) return NULL;
    json_object *root = tg_graph_to_json(g);
    if (!root) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory while writing the graph");
        return NULL;
    }
    tg_str b = {0};
    emit(&b, root, 0);
    tg_str_add(&b, "\n", 1);
    json_object_put(root);
    if (b.oom || !b.s) {
        tg_str_free(&b);
        tg_errorf(ctx, TG_ENOMEM, "out of memory while writing the graph");
        return NULL;
    }
    return b.s;
}

void tg_string_free(char *s) { tg_free(s); }

int tg_graph_save(const tg_graph *g, const char *path, tg_ctx *ctx) {
    char *s = tg_graph_to_string(g, ctx);
    if (!s) return TG_ENOMEM;
    int rc = tg_file_write_atomic(path, s, strlen(s), ctx);
    tg_free(s);
    return rc;
}
