/* tgviz: from a loaded graph, a compiled function or a nested body (JSON)
 * to a drawing, and its dot layout. See model.h. */
#include "model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "io/io.h"
#include "ops/control.h"
#include "ops/op.h"
#include "ops/scan.h"
#include "vm/vm.h"

/* ---- op families, from the op table's own .def lists ---- */
#define TG_OP(n) #n,
static const char *const fam_elemwise[] = {
#include "ops/elemwise.def"
    NULL};
static const char *const fam_reduce[] = {
#include "ops/reduce.def"
    NULL};
static const char *const fam_blas[] = {
#include "ops/blas.def"
    NULL};
static const char *const fam_shape[] = {
#include "ops/shape.def"
    NULL};
static const char *const fam_build[] = {
#include "ops/build.def"
    NULL};
static const char *const fam_nn[] = {
#include "ops/nn.def"
    NULL};
static const char *const fam_conv[] = {
#include "ops/conv.def"
    NULL};
static const char *const fam_linalg[] = {
#include "ops/linalg.def"
    NULL};
static const char *const fam_random[] = {
#include "ops/random.def"
    NULL};
static const char *const fam_debug[] = {
#include "ops/debugops.def"
    NULL};
static const char *const fam_grad[] = {
#include "ops/gradops.def"
    NULL};
/* As tgprof's op classes (profile.c): a fused kernel and a copy between
 * devices are classes of their own, not control flow, which is the ops
 * that carry a body or choose lazily. */
static const char *const fam_composite[] = {
#include "ops/composite.def"
    NULL};
static const char *const fam_transfer[] = {
#include "ops/transfer.def"
    NULL};
static const char *const fam_control[] = {
#include "ops/control.def"
#include "ops/scan.def"
    NULL};
#undef TG_OP

static const struct {
    const char *name;
    const char *const *ops;
    const char *fill;
} families[] = {
    {"control", fam_control, "#fef08a"}, {"composite", fam_composite, "#fca5a5"},
    {"transfer", fam_transfer, "#d6d3d1"}, {"elemwise", fam_elemwise, "#fde68a"},
    {"reduce", fam_reduce, "#fbcfe8"},   {"blas", fam_blas, "#c7d2fe"},
    {"shape", fam_shape, "#e9d5ff"},     {"build", fam_build, "#e2e8f0"},
    {"nn", fam_nn, "#bae6fd"},           {"conv", fam_conv, "#99f6e4"},
    {"linalg", fam_linalg, "#a5b4fc"},   {"random", fam_random, "#fed7aa"},
    {"debug", fam_debug, "#f5d0fe"},     {"grad", fam_grad, "#d9f99d"},
};

const char *vz_op_family(const char *op) {
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const char *const *p = families[f].ops; *p; p++)
            if (!strcmp(*p, op)) return families[f].name;
    return "other";
}

static const char *family_fill(const char *fam) {
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        if (!strcmp(families[f].name, fam)) return families[f].fill;
    return "#f1f5f9";
}

/* Node kinds other than apply: shape and colours, shared with the page
 * through each node's "fill"/"shape". */
static const struct {
    const char *kind, *shape, *fill;
} kinds[] = {
    {"input", "ellipse", "#86efac"},
    {"constant", "box", "#ffffff"},
    {"shared", "cylinder", "#93c5fd"},
    {"output", "invhouse", "#fdba74"},
};

static void kind_style(const char *kind, const char **shape, const char **fill) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kinds[i].kind, kind)) {
            *shape = kinds[i].shape;
            *fill = kinds[i].fill;
            return;
        }
    *shape = "box";
    *fill = "#f1f5f9";
}

void vz_init(vz_graph *vg, const char *name, bool for_page) {
    memset(vg, 0, sizeof *vg);
    vg->ag = agopen((char *)name, Agdirected, NULL);
    vg->nodes = json_object_new_array();
    vg->edges = json_object_new_array();
    vg->for_page = for_page;
    agattr(vg->ag, AGRAPH, "rankdir", "TB");
    agattr(vg->ag, AGRAPH, "nodesep", "0.25");
    agattr(vg->ag, AGRAPH, "ranksep", "0.45");
    agattr(vg->ag, AGRAPH, "fontname", "Helvetica");
    /* The page draws its own edges, so straight lines are enough and keep
     * dot fast on large graphs; the pictures get dot's splines. */
    agattr(vg->ag, AGRAPH, "splines", for_page ? "false" : "true");
    agattr(vg->ag, AGNODE, "fontname", "Helvetica");
    agattr(vg->ag, AGNODE, "fontsize", "10");
    agattr(vg->ag, AGNODE, "style", "filled");
    agattr(vg->ag, AGNODE, "shape", "box");
    agattr(vg->ag, AGNODE, "fillcolor", "#ffffff");
    agattr(vg->ag, AGNODE, "color", "#475569");
    agattr(vg->ag, AGNODE, "label", "\\N");
    agattr(vg->ag, AGNODE, "height", "0.3");
    agattr(vg->ag, AGNODE, "margin", "0.08,0.03");
    agattr(vg->ag, AGEDGE, "fontname", "Helvetica");
    agattr(vg->ag, AGEDGE, "fontsize", "8");
    agattr(vg->ag, AGEDGE, "color", "#64748b");
    agattr(vg->ag, AGEDGE, "fontcolor", "#475569");
    agattr(vg->ag, AGEDGE, "label", "");
    agattr(vg->ag, AGEDGE, "penwidth", "1");
}

/* Bodies drawn once. Each distinct body (by its JSON text) is drawn and
 * laid out once, with PH in place of its owner's key in the ids, and
 * written once, in the view's "bodies"; every node with that body gets a
 * reference, {"ref": k, "key": KEY}, which the page makes into the
 * drawing with KEY for PH (copy_write): the composites of a large
 * optimized graph are mostly copies of a few bodies, and writing each in
 * full made them half of the page of bench_opt's 100,000-node graph. */
static const char PH[] = "\x01";       /* (ids cannot hold it) */
static const char PH_JSON[] = "\\u0001"; /* how json-c writes it */

typedef struct body_drawing {
    long refs; /* the memo's and each copy's */
    char *text;
    json_object *drawing;
    int index; /* in the view's "bodies" */
} body_drawing;

struct vz_bodies {
    struct tg_idmap *map; /* text -> body_drawing */
    body_drawing **e;
    int n, cap;
};

static void drawing_unref(body_drawing *d) {
    if (!d || --d->refs > 0) return;
    json_object_put(d->drawing);
    free(d->text);
    free(d);
}

static void bodies_free(struct vz_bodies *b) {
    if (!b) return;
    for (int i = 0; i < b->n; i++) drawing_unref(b->e[i]);
    free(b->e);
    if (b->map) tg_idmap_free(b->map);
    free(b);
}

/* Keep the drawing of body `text` (taking the reference to drawing);
 * NULL when out of memory (drawing released). */
static body_drawing *bodies_keep(struct vz_bodies *b, const char *text, json_object *drawing) {
    body_drawing *d = calloc(1, sizeof *d);
    if (d && b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        body_drawing **e = realloc(b->e, sizeof *e * (size_t)cap);
        if (e) {
            b->e = e;
            b->cap = cap;
        }
    }
    if (!d || b->n == b->cap || !(d->text = strdup(text)) || tg_idmap_put(b->map, d->text, d) != TG_OK) {
        if (d) free(d->text);
        free(d);
        json_object_put(drawing);
        return NULL;
    }
    d->refs = 1;
    d->drawing = drawing;
    d->index = b->n;
    b->e[b->n++] = d;
    return d;
}

typedef struct body_copy {
    body_drawing *d;
    char key[];
} body_copy;

static void copy_free(json_object *jso, void *ud) {
    (void)jso;
    body_copy *c = ud;
    drawing_unref(c->d);
    free(c);
}

static int copy_write(json_object *jso, struct printbuf *pb, int level, int flags) {
    (void)level;
    body_copy *c = json_object_get_userdata(jso);
    json_object *k = json_object_new_string(c->key);
    const char *kq = k ? json_object_to_json_string_ext(k, flags) : NULL; /* "key", escaped */
    if (!kq) {
        json_object_put(k);
        return -1;
    }
    char ref[48];
    int n = snprintf(ref, sizeof ref, "{\"ref\":%d,\"key\":", c->d->index);
    printbuf_memappend(pb, ref, n);
    printbuf_memappend(pb, kq, (int)strlen(kq));
    printbuf_memappend(pb, "}", 1);
    json_object_put(k);
    return 0;
}

/* A reference to d's drawing with key for the placeholder, or NULL. */
static json_object *body_copy_new(body_drawing *d, const char *key) {
    size_t n = strlen(key);
    json_object *o = json_object_new_object();
    body_copy *c = malloc(sizeof *c + n + 1);
    if (!o || !c) {
        json_object_put(o);
        free(c);
        return NULL;
    }
    memcpy(c->key, key, n + 1);
    c->d = d;
    d->refs++;
    json_object_set_serializer(o, copy_write, c, copy_free);
    return o;
}

void vz_free(vz_graph *vg) {
    bodies_free(vg->bodies);
    if (vg->ag) agclose(vg->ag);
    for (int i = vg->nsubs; i-- > 0;) agclose(vg->subs[i]);
    if (vg->readers) tg_idmap_free(vg->readers);
    if (vg->copies) tg_idmap_free(vg->copies);
    if (vg->drawn) tg_idmap_free(vg->drawn);
    if (vg->holders) tg_idmap_free(vg->holders);
    free(vg->subs);
    json_object_put(vg->nodes);
    json_object_put(vg->edges);
    memset(vg, 0, sizeof *vg);
}

/* ---- JSON helpers ---- */
static json_object *jstr(const char *s) { return s ? json_object_new_string(s) : NULL; }

static json_object *shape_json(const tg_type *t) {
    json_object *a = json_object_new_array();
    for (int d = 0; d < t->ndim; d++)
        json_object_array_add(a, t->shape[d] < 0 ? NULL : json_object_new_int64(t->shape[d]));
    return a;
}

/* "float32 (784, ?)" as the pictures and the page print it; a type not
 * known (a body's variable the JSON does not declare and the library did
 * not type) is "?", a dtype without a shape "float32 ?": "()" would say
 * a scalar. */
static void type_str(char *buf, size_t n, const char *dtype, json_object *shape) {
    if (!shape || !json_object_is_type(shape, json_type_array)) {
        snprintf(buf, n, "%s%s", dtype ? dtype : "?", dtype ? " ?" : "");
        return;
    }
    size_t k = (size_t)snprintf(buf, n, "%s (", dtype ? dtype : "?");
    size_t nd = shape ? json_object_array_length(shape) : 0;
    for (size_t d = 0; d < nd && k < n; d++) {
        json_object *e = json_object_array_get_idx(shape, d);
        k += (size_t)snprintf(buf + k, n - k, "%s%s", d ? ", " : "", e ? json_object_get_string(e) : "?");
    }
    if (k < n) snprintf(buf + k, n - k, "%s)", nd == 1 ? "," : "");
}

static json_object *var_json(const tg_var *v) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", jstr(v->id));
    if (v->name) json_object_object_add(o, "name", jstr(v->name));
    json_object_object_add(o, "dtype", jstr(tg_dtype_name(v->type.dtype)));
    json_object_object_add(o, "shape", shape_json(&v->type));
    return o;
}

/* ---- a node's variables and trace, written straight from the node ----
 * An apply node's "inputs", "outputs" and "trace" are what the page reads
 * and no C code does, and as json-c objects (an object and its hash table
 * per variable) they were most of tgviz's memory on a large graph. Each
 * is one small json_object whose serializer writes, from the node, the
 * text json-c would write for those objects: var_json's for each
 * variable, {file, line, function, code} for each frame. The graph keeps
 * the node alive until the drawing's JSON is written. The text is
 * json-c's plain form whatever the flags, with json-c's escapes. */
static void put_text(struct printbuf *pb, const char *s, int flags) {
    static const char hex[] = "0123456789abcdef";
    printbuf_memappend_fast(pb, "\"", 1);
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '\b': esc = "\\b"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\f': esc = "\\f"; break;
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '/': esc = flags & JSON_C_TO_STRING_NOSLASHESCAPE ? NULL : "\\/"; break;
        default:
            if (c < ' ') {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = 0;
                esc = u;
            }
        }
        if (!esc) continue;
        printbuf_memappend_fast(pb, run, (int)((const char *)p - run));
        printbuf_memappend_fast(pb, esc, (int)strlen(esc));
        run = (const char *)p + 1;
    }
    printbuf_memappend_fast(pb, run, (int)strlen(run));
    printbuf_memappend_fast(pb, "\"", 1);
}

static void put_lit(struct printbuf *pb, const char *s) { printbuf_memappend_fast(pb, s, (int)strlen(s)); }

static void put_int(struct printbuf *pb, int64_t v) {
    char b[24];
    int k = snprintf(b, sizeof b, "%" PRId64, v);
    printbuf_memappend_fast(pb, b, k);
}

/* shape_json's text: [16, null, 3]. */
static void put_shape(struct printbuf *pb, const tg_type *t) {
    put_lit(pb, "[");
    for (int d = 0; d < t->ndim; d++) {
        if (d) put_lit(pb, ",");
        if (t->shape[d] < 0)
            put_lit(pb, "null");
        else
            put_int(pb, t->shape[d]);
    }
    put_lit(pb, "]");
}

/* var_json's text. */
static void put_var(struct printbuf *pb, const tg_var *v, int flags) {
    put_lit(pb, "{\"id\":");
    put_text(pb, v->id, flags);
    if (v->name) {
        put_lit(pb, ",\"name\":");
        put_text(pb, v->name, flags);
    }
    put_lit(pb, ",\"dtype\":");
    put_text(pb, tg_dtype_name(v->type.dtype), flags);
    put_lit(pb, ",\"shape\":");
    put_shape(pb, &v->type);
    put_lit(pb, "}");
}

static int put_vars(struct printbuf *pb, tg_var *const *vars, int n, int flags) {
    put_lit(pb, "[");
    for (int i = 0; i < n; i++) {
        if (i) put_lit(pb, ",");
        put_var(pb, vars[i], flags);
    }
    put_lit(pb, "]");
    return 0;
}

static int write_inputs(json_object *jso, struct printbuf *pb, int level, int flags) {
    (void)level;
    const tg_node *n = json_object_get_userdata(jso);
    return put_vars(pb, n->inputs, n->nin, flags);
}

static int write_outputs(json_object *jso, struct printbuf *pb, int level, int flags) {
    (void)level;
    const tg_node *n = json_object_get_userdata(jso);
    return put_vars(pb, n->outputs, n->nout, flags);
}

/* The frames of n's creation trace. */
static int write_trace(json_object *jso, struct printbuf *pb, int level, int flags) {
    (void)level;
    const tg_trace *t = &((const tg_node *)json_object_get_userdata(jso))->trace;
    put_lit(pb, "[");
    for (int i = 0; i < t->n; i++) {
        const tg_frame *fr = &t->frames[i];
        const char *sep = "";
        put_lit(pb, i ? ",{" : "{");
        if (fr->file) {
            put_lit(pb, "\"file\":");
            put_text(pb, fr->file, flags);
            sep = ",";
        }
        if (fr->line >= 0) {
            put_lit(pb, sep);
            put_lit(pb, "\"line\":");
            put_int(pb, fr->line);
            sep = ",";
        }
        if (fr->function) {
            put_lit(pb, sep);
            put_lit(pb, "\"function\":");
            put_text(pb, fr->function, flags);
            sep = ",";
        }
        if (fr->code) {
            put_lit(pb, sep);
            put_lit(pb, "\"code\":");
            put_text(pb, fr->code, flags);
        }
        put_lit(pb, "}");
    }
    put_lit(pb, "]");
    return 0;
}

/* One of the above for node n (NULL when out of memory). */
static json_object *node_text(const tg_node *n, json_object_to_json_string_fn *fn) {
    json_object *o = json_object_new_int(0);
    if (o) json_object_set_serializer(o, fn, (void *)n, NULL);
    return o;
}

/* ---- drawing ---- */
/* Whether a node with this id is in the drawing. */
static bool drawn(const vz_graph *vg, const char *id) { return vg->drawn && tg_idmap_get(vg->drawn, id); }

/* Node o (taken, its label set) as `id`, drawn as shape with fill. */
static void draw_node(vz_graph *vg, json_object *o, const char *id, const char *shape, const char *fill) {
    /* "shape" is the drawing's: a variable's own shape (from var_json)
     * moves to "type_shape". */
    json_object *ts, *ido = json_object_new_string(id);
    if (json_object_object_get_ex(o, "shape", &ts) && json_object_is_type(ts, json_type_array))
        json_object_object_add(o, "type_shape", json_object_get(ts));
    json_object_object_add(o, "id", ido);
    json_object_object_add(o, "fill", json_object_new_string(fill));
    json_object_object_add(o, "shape", json_object_new_string(shape));
    json_object_array_add(vg->nodes, o);
    /* (the key is the id's text in o, which lives as long as vg->nodes) */
    if (ido && (vg->drawn || (vg->drawn = tg_idmap_new())))
        tg_idmap_put(vg->drawn, json_object_get_string(ido), (void *)(intptr_t)json_object_array_length(vg->nodes));
}

/* ---- edges ----
 * An edge is one small json_object (in vg->edges, so that the drawing
 * stays a list of JSON values) holding a vz_edge: its ends, variable and
 * type, written out by edge_write as {source, target, var, dtype, shape,
 * label, index[, mode]}. As json-c objects, an object, a hash table and
 * eight values each, the edges were a third of the memory of a large
 * drawing. */
typedef struct vz_edge {
    const tg_type *type; /* a graph's variable's (borrowed: the graph outlives the text), or */
    json_object *shape;  /* a body variable's shape (a reference; NULL: unknown) */
    const char *mode;    /* "view", "destroy" (literals) or NULL */
    int index;
    char *src, *dst, *var, *dtype; /* in the same block (var and dtype may be NULL) */
} vz_edge;

/* type_str for an edge. */
static void edge_label(char *buf, size_t n, const vz_edge *e) {
    if (!e->type) {
        type_str(buf, n, e->dtype, e->shape);
        return;
    }
    size_t k = (size_t)snprintf(buf, n, "%s (", e->dtype ? e->dtype : "?");
    int nd = e->type->ndim;
    for (int d = 0; d < nd && k < n; d++) {
        int64_t v = e->type->shape[d];
        if (v < 0)
            k += (size_t)snprintf(buf + k, n - k, "%s?", d ? ", " : "");
        else
            k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? ", " : "", v);
    }
    if (k < n) snprintf(buf + k, n - k, "%s)", nd == 1 ? "," : "");
}

static void put_text_or_null(struct printbuf *pb, const char *s, int flags) {
    if (s)
        put_text(pb, s, flags);
    else
        put_lit(pb, "null");
}

static int edge_write(json_object *jso, struct printbuf *pb, int level, int flags) {
    (void)level;
    const vz_edge *e = json_object_get_userdata(jso);
    char label[256];
    edge_label(label, sizeof label, e);
    put_lit(pb, "{\"source\":");
    put_text(pb, e->src, flags);
    put_lit(pb, ",\"target\":");
    put_text(pb, e->dst, flags);
    put_lit(pb, ",\"var\":");
    put_text_or_null(pb, e->var, flags);
    put_lit(pb, ",\"dtype\":");
    put_text_or_null(pb, e->dtype, flags);
    put_lit(pb, ",\"shape\":");
    if (e->type) {
        put_shape(pb, e->type);
    } else {
        const char *t = e->shape ? json_object_to_json_string_ext(e->shape, flags) : "null"; /* unknown */
        if (!t) return -1;
        put_lit(pb, t);
    }
    put_lit(pb, ",\"label\":");
    put_text(pb, label, flags);
    put_lit(pb, ",\"index\":");
    put_int(pb, e->index);
    if (e->mode) {
        put_lit(pb, ",\"mode\":");
        put_text(pb, e->mode, flags);
    }
    put_lit(pb, "}");
    return 0;
}

static void edge_free(json_object *jso, void *ud) {
    (void)jso;
    vz_edge *e = ud;
    json_object_put(e->shape);
    free(e);
}

/* A block holding the edge and copies of its strings, or NULL. */
static json_object *edge_new(const char *src, const char *dst, const char *var, const char *dtype,
                             const tg_type *type, json_object *shape, int index, const char *mode) {
    size_t ls = strlen(src) + 1, ld = strlen(dst) + 1, lv = var ? strlen(var) + 1 : 0,
           lt = dtype ? strlen(dtype) + 1 : 0;
    json_object *o = json_object_new_int(0);
    vz_edge *e = malloc(sizeof *e + ls + ld + lv + lt);
    if (!o || !e) {
        json_object_put(o);
        free(e);
        return NULL;
    }
    char *p = (char *)(e + 1);
    *e = (vz_edge){.type = type, .shape = type || !shape ? NULL : json_object_get(shape), .index = index};
    e->mode = mode && !strcmp(mode, "view") ? "view" : mode && !strcmp(mode, "destroy") ? "destroy" : NULL;
    e->src = memcpy(p, src, ls);
    p += ls;
    e->dst = memcpy(p, dst, ld);
    p += ld;
    e->var = var ? memcpy(p, var, lv) : NULL;
    p += lv;
    e->dtype = dtype ? memcpy(p, dtype, lt) : NULL;
    json_object_set_serializer(o, edge_write, e, edge_free);
    return o;
}

json_object *vz_edge_new(const char *src, const char *dst, const char *var, const char *dtype, json_object *shape,
                         int index, const char *mode) {
    return edge_new(src, dst, var, dtype, NULL, shape, index, mode);
}

bool vz_edge_ends(json_object *edge, const char **src, const char **dst) {
    const vz_edge *e = json_object_get_userdata(edge);
    if (!e || json_object_get_type(edge) != json_type_int) return false;
    *src = e->src;
    *dst = e->dst;
    return true;
}

/* The edge carries variable `var` of dtype and type (a graph's) or shape
 * (a body's, borrowed) into input `index` of the target; mode is "view",
 * "destroy" or NULL. */
static void draw_edge(vz_graph *vg, const char *src, const char *dst, const char *var, const char *dtype,
                      const tg_type *type, json_object *shape, int index, const char *mode) {
    if (!drawn(vg, src) || !drawn(vg, dst)) return;
    json_object *o = edge_new(src, dst, var, dtype, type, shape, index, mode);
    if (o) json_object_array_add(vg->edges, o);
}

static const char *jget_str(json_object *o, const char *k);

/* A label as Graphviz's escString reads it: a backslash doubled (a name
 * holding \N, \G or \l is shown as written, not replaced by the node's
 * name, the graph's or a line break), a newline (between the name and the
 * type, or in a name) written as the escape \n, a centred line break as
 * a raw one is, a control character shown as \xHH (SVG, being XML,
 * cannot hold one). A raw newline draws the same, but did not survive
 * the .dot: Graphviz's writer breaks a quoted string over 128 characters
 * with a backslash-newline, and its reader (2.42) drops a raw newline
 * that comes between a backslash and such a break, so a label line of
 * 128 characters or more ending in a backslash lost its line break when
 * the .dot was read back. Returns s, or a string the caller frees. */
static char *dot_label(const char *s) {
    size_t extra = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '\\' || *p == '\n') extra += 1;
        else if (*p < 0x20 || *p == 0x7f) extra += 4;
    if (!extra) return (char *)s;
    char *o = malloc(strlen(s) + extra + 1), *q = o;
    if (!o) return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\') {
            *q++ = '\\', *q++ = '\\';
        } else if (*p == '\n') {
            *q++ = '\\', *q++ = 'n';
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(q, 6, "\\\\x%02x", *p);
            q += 5;
        } else {
            *q++ = (char)*p;
        }
    }
    *q = 0;
    return o;
}

/* Graphviz's graph of the drawing, made when a layout or a picture needs
 * it (a page of a large graph, laid out by layers.c, does not): a node
 * per node of the drawing with its label, shape and fill (apply nodes
 * rounded), an edge per edge, named e0, e1, ... in order, blue for a
 * view, red and thick for an input destroyed, labelled with the type in
 * the pictures. Once. */
static void build_ag(vz_graph *vg) {
    if (vg->ag_built) return;
    vg->ag_built = true;
    size_t n = json_object_array_length(vg->nodes), ne = json_object_array_length(vg->edges);
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(vg->nodes, i);
        const char *id = jget_str(o, "id"), *v;
        if (!id) continue;
        Agnode_t *an = agnode(vg->ag, (char *)id, 1);
        if (!an) continue;
        if ((v = jget_str(o, "label"))) {
            char *l = dot_label(v);
            if (l) agsafeset(an, "label", l, "");
            if (l != v) free(l);
        }
        if ((v = jget_str(o, "shape"))) agsafeset(an, "shape", (char *)v, "");
        if ((v = jget_str(o, "fill"))) agsafeset(an, "fillcolor", (char *)v, "");
        if ((v = jget_str(o, "kind")) && !strcmp(v, "apply")) agsafeset(an, "style", "filled,rounded", "");
    }
    for (size_t k = 0; k < ne; k++) {
        json_object *o = json_object_array_get_idx(vg->edges, k);
        const char *src, *dst;
        if (!vz_edge_ends(o, &src, &dst)) continue;
        const vz_edge *r = json_object_get_userdata(o);
        Agnode_t *a = agnode(vg->ag, (char *)src, 0), *b = agnode(vg->ag, (char *)dst, 0);
        if (!a || !b) continue;
        char name[32];
        snprintf(name, sizeof name, "e%ld", vg->nedges++);
        Agedge_t *e = agedge(vg->ag, a, b, name, 1);
        if (!e) continue;
        if (!vg->for_page) {
            char label[256];
            edge_label(label, sizeof label, r);
            agsafeset(e, "label", label, "");
        }
        if (r->mode && !strcmp(r->mode, "view")) agsafeset(e, "color", "#2563eb", "");
        if (r->mode && !strcmp(r->mode, "destroy")) {
            agsafeset(e, "color", "#dc2626", "");
            agsafeset(e, "penwidth", "2", "");
        }
    }
}

static const char *var_kind(const tg_var *v) {
    switch (v->kind) {
    case TG_VAR_CONSTANT: return "constant";
    case TG_VAR_SHARED: return "shared";
    default: return "input";
    }
}

/* The drawing's id of the place variable v comes from. */
static void var_source(const tg_var *v, char *buf, size_t n) {
    if (v->owner)
        snprintf(buf, n, "a:%s", v->owner->nout ? v->owner->outputs[0]->id : v->owner->op->name);
    else
        snprintf(buf, n, "v:%s", v->id);
}

/* Leaf v as node `id`: copy k of `copies` when it is drawn beside each
 * of its readers (copies 0: drawn once). */
static void draw_leaf(vz_graph *vg, const tg_var *v, const char *id, int k, int copies) {
    if (drawn(vg, id)) return;
    const char *kind = var_kind(v), *shape, *fill;
    kind_style(kind, &shape, &fill);
    json_object *o = var_json(v);
    char tbuf[160], label[400];
    type_str(tbuf, sizeof tbuf, tg_dtype_name(v->type.dtype), json_object_object_get(o, "shape"));
    /* A constant of a few values (NumPy's repr of them), or of one value
     * repeated ("(3, 4) of 0."), shows it: in the panel, and under its
     * name in the drawing. */
    tg_str brief = {0};
    if (v->kind == TG_VAR_CONSTANT && v->value && (v->type.ndim > 0 || !v->inline_const) &&
        tg_array_brief(v->value, 4, &brief) && brief.s && !brief.oom && brief.len <= 48)
        json_object_object_add(o, "value", json_object_new_string(brief.s));
    else
        brief.len = 0;
    if (v->inline_const && v->value && v->type.ndim == 0) {
        /* A bare scalar reads best as its value. */
        char val[64];
        double d = tg_array_get_flat(v->value, 0);
        snprintf(val, sizeof val, "%.6g", d);
        json_object_object_add(o, "value", json_object_new_double(d));
        snprintf(label, sizeof label, "%s\n%s", val, tbuf);
    } else if (brief.len && v->inline_const) {
        snprintf(label, sizeof label, "%s\n%s", brief.s, tbuf);
    } else if (brief.len) {
        snprintf(label, sizeof label, "%s\n%s\n%s", tg_var_label(v), brief.s, tbuf);
    } else {
        snprintf(label, sizeof label, "%s\n%s", tg_var_label(v), tbuf);
    }
    tg_str_free(&brief);
    json_object_object_add(o, "var", json_object_new_string(v->id));
    json_object_object_add(o, "kind", json_object_new_string(kind));
    json_object_object_add(o, "label", json_object_new_string(label));
    json_object_object_add(o, "key", json_object_new_string(v->id));
    if (v->json_index >= 0) {
        char loc[48];
        snprintf(loc, sizeof loc, "variables[%d]", v->json_index);
        json_object_object_add(o, "location", json_object_new_string(loc));
    }
    if (copies) {
        json_object_object_add(o, "copy", json_object_new_int(k));
        json_object_object_add(o, "copies", json_object_new_int(copies));
    }
    draw_node(vg, o, id, shape, fill);
}

static void draw_var(vz_graph *vg, const tg_var *v) {
    char id[200];
    snprintf(id, sizeof id, "v:%s", v->id);
    draw_leaf(vg, v, id, 1, 0);
}

/* Count n among the readers of the leaves it reads (once per leaf). */
static void count_readers(vz_graph *vg, const tg_node *n) {
    if (!vg->readers && !(vg->readers = tg_idmap_new())) return;
    for (int i = 0; i < n->nin; i++) {
        const tg_var *v = n->inputs[i];
        bool seen = v->owner != NULL;
        for (int j = 0; j < i && !seen; j++) seen = n->inputs[j] == v;
        if (!seen)
            tg_idmap_put(vg->readers, v->id, (void *)((intptr_t)tg_idmap_get(vg->readers, v->id) + 1));
    }
}

/* Which derivative a node of a gradient's expansion takes part in, for
 * the page: {of, of_op (absent for the expansion's own nodes), by,
 * by_op}. */
static json_object *gradient_json(const char *of, const char *of_op, const char *by, const char *by_op) {
    json_object *g = json_object_new_object();
    if (of && *of) {
        json_object_object_add(g, "of", jstr(of));
        json_object_object_add(g, "of_op", jstr(of_op));
    }
    json_object_object_add(g, "by", jstr(by));
    json_object_object_add(g, "by_op", jstr(by_op));
    return g;
}

/* For a composite that knows which original nodes each of its fused
 * nodes stood for (tg_composite_origin_groups: fused node j is the body's
 * nodes[j]): "fused", by the body node's key, {origins, trace}, the trace
 * being that of the first of them the graph as loaded (vg->orig) has
 * one for. The body's drawing is shared by the composites with that body,
 * so the page gives each copy's nodes their own from here. */
static void fused_json(vz_graph *vg, json_object *o, const tg_node *n, json_object *body) {
    int nf, nk;
    const char *const *keys;
    const int *st = tg_composite_origin_groups(n, &nf, &keys, &nk);
    json_object *nodes, *fu;
    if (!st || !json_object_object_get_ex(body, "nodes", &nodes) || !json_object_is_type(nodes, json_type_array) ||
        !(fu = json_object_new_object()))
        return;
    for (int j = 0; j < nf && (size_t)j < json_object_array_length(nodes); j++) {
        json_object *m = json_object_array_get_idx(nodes, (size_t)j), *mo, *o0;
        if (!json_object_object_get_ex(m, "outputs", &mo) || !json_object_is_type(mo, json_type_array) ||
            !json_object_is_type(o0 = json_object_array_get_idx(mo, 0), json_type_string))
            continue;
        json_object *e = json_object_new_object(), *a = json_object_new_array();
        const tg_node *traced = NULL;
        for (int q = st[j]; q < st[j + 1]; q++) {
            json_object_array_add(a, jstr(keys[q]));
            const tg_var *v = !traced && vg->orig && vg->orig->ids ? tg_idmap_get(vg->orig->ids, keys[q]) : NULL;
            if (v && v->owner && v->owner->trace.n > 0) traced = v->owner;
        }
        json_object_object_add(e, "origins", a);
        if (traced) json_object_object_add(e, "trace", node_text(traced, write_trace));
        json_object_object_add(fu, json_object_get_string(o0), e);
    }
    json_object_object_add(o, "fused", fu);
}

/* An apply node. origins: the keys of the original nodes it stands for
 * (NULL: itself). f: the function drawn (NULL: the file's graph), whose
 * table says which of those keys a gradient's expansion made. */
static void draw_apply(vz_graph *vg, const tg_node *n, const char *const *origins, int norigins,
                       const tg_function *f) {
    char id[200], label[400];
    const char *key = n->nout ? n->outputs[0]->id : n->op->name;
    snprintf(id, sizeof id, "a:%s", key);
    const char *fam = vz_op_family(n->op->name);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "kind", json_object_new_string("apply"));
    json_object_object_add(o, "op", json_object_new_string(n->op->name));
    json_object_object_add(o, "family", json_object_new_string(fam));
    json_object_object_add(o, "key", json_object_new_string(key));
    if (n->name) json_object_object_add(o, "name", jstr(n->name));
    if (n->json_index >= 0) {
        char loc[48];
        snprintf(loc, sizeof loc, "nodes[%d]", n->json_index);
        json_object_object_add(o, "location", json_object_new_string(loc));
    }
    json_object_object_add(o, "attrs", n->attrs ? json_object_get(n->attrs) : json_object_new_object());
    /* A node with a body: vz_layout draws it with the types the library
     * gave it, from the node (the key outlives the drawing). */
    json_object *body;
    if (n->attrs && json_object_object_get_ex(n->attrs, "body", &body)) {
        if (vg->holders || (vg->holders = tg_idmap_new())) tg_idmap_put(vg->holders, key, (void *)n);
        if (!strcmp(n->op->name, "composite")) fused_json(vg, o, n, body);
    }
    json_object_object_add(o, "inputs", node_text(n, write_inputs));
    json_object_object_add(o, "outputs", node_text(n, write_outputs));
    json_object_object_add(o, "trace", node_text(n, write_trace));
    /* (a node that stands for itself says whose derivative it is below,
     * from its own grad_of or, restored from a .tgf, f's table) */
    bool self = norigins == 1 && !strcmp(origins[0], key);
    tg_key_gradient kg;
    if (norigins > 0) {
        json_object *a = json_object_new_array(), *gs = NULL;
        for (int i = 0; i < norigins; i++) {
            json_object_array_add(a, jstr(origins[i]));
            if (!self && f && tg_function_key_gradient(f, origins[i], &kg)) {
                if (!gs) gs = json_object_new_object();
                json_object_object_add(gs, origins[i], gradient_json(kg.of, kg.of_op, kg.by, kg.by_op));
            }
        }
        json_object_object_add(o, "origins", a);
        if (gs) json_object_object_add(o, "origin_gradients", gs);
    }
    if (n->grad_of && (self || !norigins)) {
        const char *gs[4];
        tg_grad_of_split(n->grad_of, gs);
        json_object_object_add(o, "gradient", gradient_json(gs[0], gs[1], gs[2], gs[3]));
    } else if (self && f && tg_function_key_gradient(f, key, &kg)) {
        json_object_object_add(o, "gradient", gradient_json(kg.of, kg.of_op, kg.by, kg.by_op));
    }
    if (n->op->view_of >= 0) json_object_object_add(o, "view_of", json_object_new_int(n->op->view_of));
    if (n->inplace) {
        json_object *ip = json_object_new_object();
        for (int i = 0; i < n->nout; i++)
            if (n->inplace[i] >= 0) {
                char k[16];
                snprintf(k, sizeof k, "%d", i);
                json_object_object_add(ip, k, json_object_new_int(n->inplace[i]));
            }
        json_object_object_add(o, "inplace", ip);
    }
    if (n->name && strcmp(n->name, key))
        snprintf(label, sizeof label, "%s\n%s", n->op->name, n->name);
    else
        snprintf(label, sizeof label, "%s\n%s", n->op->name, key);
    json_object_object_add(o, "label", json_object_new_string(label));
    draw_node(vg, o, id, "box", family_fill(fam));
}

static void draw_inputs(vz_graph *vg, const tg_node *n) {
    char src[200], dst[200];
    snprintf(dst, sizeof dst, "a:%s", n->nout ? n->outputs[0]->id : n->op->name);
    for (int i = 0; i < n->nin; i++) {
        const tg_var *v = n->inputs[i];
        int readers = !v->owner && vg->readers ? (int)(intptr_t)tg_idmap_get(vg->readers, v->id) : 0;
        if (readers > VZ_SHARE_MAX) {
            /* This reader's copy: made at its first read of v. */
            int j = 0;
            while (j < i && n->inputs[j] != v) j++;
            int k = (int)(intptr_t)(vg->copies ? tg_idmap_get(vg->copies, v->id) : NULL);
            if (j == i && (vg->copies || (vg->copies = tg_idmap_new())))
                tg_idmap_put(vg->copies, v->id, (void *)(intptr_t)++k);
            if (k <= 1)
                snprintf(src, sizeof src, "v:%s", v->id);
            else
                snprintf(src, sizeof src, "c%d:%s", k, v->id);
            draw_leaf(vg, v, src, k, readers);
        } else {
            if (!v->owner) draw_var(vg, v);
            var_source(v, src, sizeof src);
        }
        const char *mode = NULL;
        if (n->op->view_of == i) mode = "view";
        for (int k = 0; n->inplace && k < n->nout; k++)
            if (n->inplace[k] == i) mode = "destroy";
        draw_edge(vg, src, dst, v->id, tg_dtype_name(v->type.dtype), &v->type, NULL, i, mode);
    }
}

/* Output node for v ("o:<id>"), or for an update of shared ("u:<id>"). */
static void draw_output(vz_graph *vg, const tg_var *v, const tg_var *shared, int index) {
    char id[200], src[200], label[400];
    if (shared)
        snprintf(id, sizeof id, "u:%s", shared->id);
    else
        snprintf(id, sizeof id, "o:%s", v->id);
    if (drawn(vg, id)) return;
    if (!v->owner) draw_var(vg, v);
    json_object *o = var_json(v);
    char tbuf[160];
    type_str(tbuf, sizeof tbuf, tg_dtype_name(v->type.dtype), json_object_object_get(o, "shape"));
    if (shared)
        snprintf(label, sizeof label, "%s \u2190 %s\n%s", tg_var_label(shared), tg_var_label(v), tbuf);
    else
        snprintf(label, sizeof label, "%s\n%s", tg_var_label(v), tbuf);
    json_object_object_add(o, "var", json_object_new_string(v->id));
    json_object_object_add(o, "kind", json_object_new_string("output"));
    json_object_object_add(o, "label", json_object_new_string(label));
    json_object_object_add(o, "key", json_object_new_string(id + 2));
    json_object_object_add(o, "index", json_object_new_int(index));
    if (shared) json_object_object_add(o, "update_of", json_object_new_string(shared->id));
    const char *shape, *fill;
    kind_style("output", &shape, &fill);
    draw_node(vg, o, id, shape, fill);
    var_source(v, src, sizeof src);
    draw_edge(vg, src, id, v->id, tg_dtype_name(v->type.dtype), &v->type, NULL, 0, NULL);
}

int vz_from_graph(vz_graph *vg, const tg_graph *g, int fi, tg_ctx *ctx) {
    for (int i = 0; i < g->nnodes; i++) draw_apply(vg, g->nodes[i], NULL, 0, NULL);
    for (int i = 0; i < g->nnodes; i++) count_readers(vg, g->nodes[i]);
    for (int i = 0; i < g->nnodes; i++) draw_inputs(vg, g->nodes[i]);
    if (fi >= 0 && fi < g->nfuncs) {
        const tg_fdecl *fd = &g->funcs[fi];
        for (int i = 0; i < fd->nin; i++)
            if (!fd->inputs[i]->owner) draw_var(vg, fd->inputs[i]);
        for (int i = 0; i < fd->nout; i++) draw_output(vg, fd->outputs[i], NULL, i);
        for (int i = 0; i < fd->nupd; i++) draw_output(vg, fd->updates[i].value, fd->updates[i].shared, i);
    }
    return 0;
}

int vz_from_function(vz_graph *vg, const tg_function *f, tg_ctx *ctx) {
    const tg_fgraph *fg = f->fg;
    for (int i = 0; i < f->nsched; i++) {
        const char *const *keys = NULL;
        int nk = tg_function_node_origins(f, i, &keys);
        draw_apply(vg, f->sched[i].node, keys, nk, f);
    }
    for (int i = 0; i < f->nsched; i++) count_readers(vg, f->sched[i].node);
    for (int i = 0; i < f->nsched; i++) draw_inputs(vg, f->sched[i].node);
    for (int i = 0; i < fg->nin; i++) draw_var(vg, fg->inputs[i]);
    for (int i = 0; i < fg->nout; i++) draw_output(vg, fg->outputs[i], NULL, i);
    for (int i = 0; i < fg->nupd; i++) draw_output(vg, fg->outputs[fg->nout + i], fg->upd_shared[i], i);
    return 0;
}

/* ---- nested bodies, drawn from their JSON (FORMAT.md s7) ---- */
static const char *jget_str(json_object *o, const char *k) {
    json_object *v;
    return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* A body's declared variable, from decl (id -> variable). */
static json_object *body_var(json_object *decl, const char *id) {
    json_object *v = NULL;
    return json_object_object_get_ex(decl, id, &v) ? v : NULL;
}

/* Where the types of a body's variables come from: the body as the
 * library loaded it for its node (a scan's or op_from_graph's, whose ids
 * are the JSON's), or types worked out here (a composite's), else what
 * the JSON declares. */
typedef struct body_types {
    json_object *decl;            /* declared id -> variable */
    const struct tg_idmap *ids;   /* the loaded body's: id -> tg_var (NULL: none) */
    struct tg_idmap *own;         /* id -> tg_type in types (NULL: none) */
    tg_type *types;
    int ntypes;
} body_types;

/* Types for the body of composite n: each body variable's dtype as the
 * loader infers it for the body (scalars), and the shape it has when the
 * fused ops run unfused: an input's is the node's input's, a node's
 * output's the broadcast of its inputs' (NumPy's rules; an unknown length
 * stays unknown unless another input fixes it, as tg_infer_broadcast
 * does), a scalar constant's (). Nothing when the body does not load. */
static void composite_types(body_types *bt, json_object *body, const tg_node *n) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = ctx ? tg_body_load(body, "attrs.body", ctx) : NULL;
    json_object *ins = NULL, *nodes = NULL;
    json_object_object_get_ex(body, "inputs", &ins);
    json_object_object_get_ex(body, "nodes", &nodes);
    size_t ni = json_object_is_type(ins, json_type_array) ? json_object_array_length(ins) : 0;
    size_t nn = json_object_is_type(nodes, json_type_array) ? json_object_array_length(nodes) : 0;
    if (!g || !g->ids || !(bt->own = tg_idmap_new()) || !(bt->types = calloc(ni + nn + 1, sizeof *bt->types)))
        goto done;
    for (size_t i = 0; i < ni && i < (size_t)n->nin; i++) {
        json_object *e = json_object_array_get_idx(ins, i);
        const tg_var *v = json_object_is_type(e, json_type_string) ? tg_idmap_get(g->ids, json_object_get_string(e)) : NULL;
        if (!v || tg_idmap_get(bt->own, v->id)) continue;
        tg_type *t = &bt->types[bt->ntypes++];
        *t = n->inputs[i]->type;
        t->dtype = v->type.dtype;
        tg_idmap_put(bt->own, json_object_get_string(e), t); /* (the key is the body's text, not g's) */
    }
    for (size_t j = 0; j < nn; j++) {
        json_object *m = json_object_array_get_idx(nodes, j), *mi = NULL, *mo = NULL;
        json_object_object_get_ex(m, "inputs", &mi);
        json_object_object_get_ex(m, "outputs", &mo);
        json_object *o0 = json_object_is_type(mo, json_type_array) ? json_object_array_get_idx(mo, 0) : NULL;
        const tg_var *v = json_object_is_type(o0, json_type_string) ? tg_idmap_get(g->ids, json_object_get_string(o0)) : NULL;
        if (!v || tg_idmap_get(bt->own, v->id) || !json_object_is_type(mi, json_type_array)) continue;
        tg_type *t = &bt->types[bt->ntypes++];
        int64_t len[TG_MAX_NDIM];
        bool unknown[TG_MAX_NDIM] = {false};
        int nd = 0;
        for (size_t k = 0; k < json_object_array_length(mi); k++) {
            json_object *e = json_object_array_get_idx(mi, k);
            const tg_type *it = json_object_is_type(e, json_type_string) ? tg_idmap_get(bt->own, json_object_get_string(e)) : NULL;
            if (!it) continue; /* an inline or declared scalar constant */
            if (it->ndim > nd) {
                /* dimensions aligned from the right: the new leading
                 * ones are of length 1 so far */
                memmove(len + (it->ndim - nd), len, sizeof *len * (size_t)nd);
                memmove(unknown + (it->ndim - nd), unknown, sizeof *unknown * (size_t)nd);
                for (int d = 0; d < it->ndim - nd; d++) len[d] = 1, unknown[d] = false;
                nd = it->ndim;
            }
            for (int d = 0; d < it->ndim; d++) {
                int od = nd - it->ndim + d;
                if (it->shape[d] < 0)
                    unknown[od] = true;
                else if (it->shape[d] != 1)
                    len[od] = it->shape[d];
            }
        }
        t->dtype = v->type.dtype;
        t->ndim = nd;
        for (int d = 0; d < nd; d++) t->shape[d] = len[d] != 1 ? len[d] : unknown[d] ? -1 : 1;
        tg_idmap_put(bt->own, json_object_get_string(o0), t);
    }
done:
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* The body types for vg's body (vg->owner's, when known). */
static void body_types_init(body_types *bt, const vz_graph *vg, json_object *body) {
    const tg_node *n = vg->owner;
    if (!n || !n->a.extra) return;
    const char *op = n->op->name;
    if (!strcmp(op, "scan") && ((const scan_p *)n->a.extra)->body)
        bt->ids = ((const scan_p *)n->a.extra)->body->ids;
    else if (!strcmp(op, "op_from_graph") && ((const tg_ofg *)n->a.extra)->g)
        bt->ids = ((const tg_ofg *)n->a.extra)->g->ids;
    else if (!strcmp(op, "composite"))
        composite_types(bt, body, n);
}

static void body_types_free(body_types *bt) {
    if (bt->own) tg_idmap_free(bt->own);
    free(bt->types);
    json_object_put(bt->decl);
}

/* The type of body variable id: *dtype (NULL: unknown) and *shape (a new
 * reference the caller releases; NULL: unknown), the library's first. */
static void body_type(const body_types *bt, const char *id, const char **dtype, json_object **shape) {
    const tg_type *t = bt->own ? tg_idmap_get(bt->own, id) : NULL;
    const tg_var *v = !t && bt->ids ? tg_idmap_get(bt->ids, id) : NULL;
    if (v) t = &v->type;
    if (t) {
        *dtype = tg_dtype_name(t->dtype);
        *shape = shape_json(t);
        return;
    }
    json_object *dv = body_var(bt->decl, id), *ty, *s;
    *dtype = NULL;
    *shape = NULL;
    if (dv && json_object_object_get_ex(dv, "type", &ty)) {
        *dtype = jget_str(ty, "dtype");
        if (json_object_object_get_ex(ty, "shape", &s) && json_object_is_type(s, json_type_array))
            *shape = json_object_get(s);
    }
}

/* id's dtype and shape into o (a panel's row, a variable's node). */
static void body_type_add(const body_types *bt, const char *id, json_object *o) {
    const char *dt;
    json_object *sh;
    body_type(bt, id, &dt, &sh);
    if (dt) json_object_object_add(o, "dtype", json_object_new_string(dt));
    if (sh) json_object_object_add(o, "shape", sh);
}

/* A body of a composite, scan or op_from_graph node: its inputs become
 * input nodes, its nodes apply nodes, its outputs output nodes. Ids are
 * prefixed with the owner's path (vz_layout) so that they stay unique on
 * the page. A malformed body is drawn as far as it goes: the loader, not
 * the drawing, is where a body is checked. */
int vz_from_body(vz_graph *vg, json_object *body, const char *prefix) {
    json_object *vars = NULL, *nodes = NULL, *ins = NULL, *outs = NULL;
    json_object_object_get_ex(body, "variables", &vars);
    json_object_object_get_ex(body, "nodes", &nodes);
    json_object_object_get_ex(body, "inputs", &ins);
    json_object_object_get_ex(body, "outputs", &outs);
    if (vars && !json_object_is_type(vars, json_type_array)) vars = NULL;
    if (nodes && !json_object_is_type(nodes, json_type_array)) nodes = NULL;
    if (ins && !json_object_is_type(ins, json_type_array)) ins = NULL;
    if (outs && !json_object_is_type(outs, json_type_array)) outs = NULL;
    char id[512], src[512], label[600], tbuf[200];
    size_t nn = nodes ? json_object_array_length(nodes) : 0;
    /* decl: declared id -> its variable; prod: output id -> the first
     * output of the node that makes it (the first of each, as the
     * loader finds them). Looked up per edge, so maps: a body of 20,000
     * nodes took 41 s with a scan of the nodes per lookup. */
    json_object *decl = json_object_new_object(), *prod = json_object_new_object();
    if (!decl || !prod) {
        json_object_put(decl);
        json_object_put(prod);
        return -1;
    }
    body_types bt = {.decl = decl};
    for (size_t i = 0; vars && i < json_object_array_length(vars); i++) {
        json_object *v = json_object_array_get_idx(vars, i);
        const char *vid = jget_str(v, "id");
        if (vid && !json_object_object_get_ex(decl, vid, NULL)) json_object_object_add(decl, vid, json_object_get(v));
    }
    for (size_t j = 0; j < nn; j++) {
        json_object *m = json_object_array_get_idx(nodes, j), *mo;
        if (!json_object_object_get_ex(m, "outputs", &mo) || !json_object_is_type(mo, json_type_array)) continue;
        json_object *x0 = json_object_array_get_idx(mo, 0);
        for (size_t q = 0; q < json_object_array_length(mo); q++) {
            json_object *x = json_object_array_get_idx(mo, q);
            if (json_object_is_type(x, json_type_string) && !json_object_object_get_ex(prod, json_object_get_string(x), NULL))
                json_object_object_add(prod, json_object_get_string(x), json_object_get(x0));
        }
    }
    body_types_init(&bt, vg, body);
    /* Nodes: */
    for (size_t i = 0; i < nn; i++) {
        json_object *n = json_object_array_get_idx(nodes, i), *o0, *nouts;
        const char *op = jget_str(n, "op");
        if (!op || !json_object_object_get_ex(n, "outputs", &nouts) ||
            !json_object_is_type(nouts, json_type_array) || !json_object_array_length(nouts))
            continue;
        o0 = json_object_array_get_idx(nouts, 0);
        if (!json_object_is_type(o0, json_type_string)) continue;
        snprintf(id, sizeof id, "a:%s/%s", prefix, json_object_get_string(o0));
        json_object *o = json_object_new_object();
        const char *fam = vz_op_family(op);
        json_object_object_add(o, "kind", json_object_new_string("apply"));
        json_object_object_add(o, "op", json_object_new_string(op));
        json_object_object_add(o, "family", json_object_new_string(fam));
        json_object_object_add(o, "key", json_object_new_string(json_object_get_string(o0)));
        const char *name = jget_str(n, "name");
        if (name) json_object_object_add(o, "name", json_object_new_string(name));
        json_object *a;
        json_object_object_add(o, "attrs",
                               json_object_object_get_ex(n, "attrs", &a) ? json_object_get(a)
                                                                          : json_object_new_object());
        if (json_object_object_get_ex(n, "trace", &a)) json_object_object_add(o, "trace", json_object_get(a));
        /* A node whose own body the library loaded: its types, when the
         * body is drawn (vz_layout). */
        if (bt.ids && json_object_object_get_ex(n, "attrs", &a) && json_object_object_get_ex(a, "body", NULL)) {
            const tg_var *ov = tg_idmap_get(bt.ids, json_object_get_string(o0));
            if (ov && ov->owner && (vg->holders || (vg->holders = tg_idmap_new())))
                tg_idmap_put(vg->holders, json_object_get_string(o0), ov->owner);
        }
        json_object *io = json_object_new_array();
        json_object_object_get_ex(n, "inputs", &a);
        for (size_t k = 0; a && json_object_is_type(a, json_type_array) && k < json_object_array_length(a); k++) {
            json_object *e = json_object_array_get_idx(a, k), *vo = json_object_new_object();
            if (json_object_is_type(e, json_type_string)) {
                json_object_object_add(vo, "id", json_object_get(e));
                body_type_add(&bt, json_object_get_string(e), vo);
            } else {
                json_object_object_add(vo, "value", json_object_get(e));
            }
            json_object_array_add(io, vo);
        }
        json_object_object_add(o, "inputs", io);
        io = json_object_new_array();
        for (size_t k = 0; k < json_object_array_length(nouts); k++) {
            json_object *e = json_object_array_get_idx(nouts, k), *vo = json_object_new_object();
            json_object_object_add(vo, "id", json_object_get(e));
            if (json_object_is_type(e, json_type_string)) body_type_add(&bt, json_object_get_string(e), vo);
            json_object_array_add(io, vo);
        }
        json_object_object_add(o, "outputs", io);
        snprintf(label, sizeof label, "%s\n%s", op, name ? name : json_object_get_string(o0));
        json_object_object_add(o, "label", json_object_new_string(label));
        draw_node(vg, o, id, "box", family_fill(fam));
    }
    /* Where a body variable comes from: a node's output, or an input. */
#define BODY_SOURCE(vid)                                                                              \
    do {                                                                                              \
        src[0] = 0;                                                                                   \
        json_object *x0_ = NULL;                                                                      \
        if (json_object_object_get_ex(prod, vid, &x0_))                                               \
            snprintf(src, sizeof src, "a:%s/%s", prefix, json_object_get_string(x0_));                \
        if (!src[0]) {                                                                                \
            snprintf(src, sizeof src, "v:%s/%s", prefix, vid);                                        \
            if (!drawn(vg, src)) {                                                                    \
                const char *dt;                                                                       \
                json_object *sh, *vo = json_object_new_object(), *dv = body_var(decl, vid);          \
                body_type(&bt, vid, &dt, &sh);                                                        \
                type_str(tbuf, sizeof tbuf, dt, sh);                                                  \
                bool isc = dv && json_object_object_get_ex(dv, "constant", NULL);                    \
                const char *kd = isc ? "constant" : "input", *shp, *fill;                             \
                kind_style(kd, &shp, &fill);                                                          \
                snprintf(label, sizeof label, "%s\n%s", vid, tbuf);                                   \
                json_object_object_add(vo, "kind", json_object_new_string(kd));                       \
                json_object_object_add(vo, "var", json_object_new_string(vid));                       \
                json_object_object_add(vo, "key", json_object_new_string(vid));                       \
                if (dt) json_object_object_add(vo, "dtype", json_object_new_string(dt));              \
                if (sh) json_object_object_add(vo, "shape", sh);                                      \
                json_object_object_add(vo, "label", json_object_new_string(label));                   \
                draw_node(vg, vo, src, shp, fill);                                                    \
            }                                                                                         \
        }                                                                                             \
    } while (0)
    for (size_t i = 0; ins && i < json_object_array_length(ins); i++) {
        json_object *e = json_object_array_get_idx(ins, i);
        if (json_object_is_type(e, json_type_string)) BODY_SOURCE(json_object_get_string(e));
    }
    for (size_t i = 0; i < nn; i++) {
        json_object *n = json_object_array_get_idx(nodes, i), *a, *nouts;
        if (!jget_str(n, "op") || !json_object_object_get_ex(n, "outputs", &nouts) ||
            !json_object_is_type(nouts, json_type_array) || !json_object_array_length(nouts) ||
            !json_object_is_type(json_object_array_get_idx(nouts, 0), json_type_string))
            continue;
        char dst[512];
        snprintf(dst, sizeof dst, "a:%s/%s", prefix, json_object_get_string(json_object_array_get_idx(nouts, 0)));
        if (!json_object_object_get_ex(n, "inputs", &a) || !json_object_is_type(a, json_type_array)) continue;
        for (size_t k = 0; k < json_object_array_length(a); k++) {
            json_object *e = json_object_array_get_idx(a, k);
            if (!json_object_is_type(e, json_type_string)) continue; /* inline constant: in the panel */
            const char *vid = json_object_get_string(e), *dt;
            json_object *sh;
            BODY_SOURCE(vid);
            body_type(&bt, vid, &dt, &sh);
            draw_edge(vg, src, dst, vid, dt, NULL, sh, (int)k, NULL);
            json_object_put(sh);
        }
    }
    for (size_t i = 0; outs && i < json_object_array_length(outs); i++) {
        json_object *e = json_object_array_get_idx(outs, i);
        if (!json_object_is_type(e, json_type_string)) continue;
        const char *vid = json_object_get_string(e), *dt, *shp, *fill;
        json_object *sh;
        BODY_SOURCE(vid);
        snprintf(id, sizeof id, "o:%s/%s", prefix, vid);
        if (drawn(vg, id)) continue;
        body_type(&bt, vid, &dt, &sh);
        type_str(tbuf, sizeof tbuf, dt, sh);
        snprintf(label, sizeof label, "%s\n%s", vid, tbuf);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "kind", json_object_new_string("output"));
        json_object_object_add(o, "var", json_object_new_string(vid));
        json_object_object_add(o, "key", json_object_new_string(vid));
        if (dt) json_object_object_add(o, "dtype", json_object_new_string(dt));
        if (sh) json_object_object_add(o, "shape", json_object_get(sh));
        json_object_object_add(o, "label", json_object_new_string(label));
        kind_style("output", &shp, &fill);
        draw_node(vg, o, id, shp, fill);
        draw_edge(vg, src, id, vid, dt, NULL, sh, 0, NULL);
        json_object_put(sh);
    }
#undef BODY_SOURCE
    body_types_free(&bt); /* (and decl) */
    json_object_put(prod);
    return 0;
}

/* ---- layout ---- */
/* Give Graphviz the positions layers.c chose, so that the pictures render
 * from them ("nop": neato -n, which keeps every pos; straight edges, since
 * routing splines around 100,000 nodes would take as long as dot). */
static int place_for_render(vz_graph *vg, GVC_t *gvc, double height) {
    build_ag(vg);
    agattr(vg->ag, AGRAPH, "splines", "line");
    size_t n = json_object_array_length(vg->nodes);
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(vg->nodes, i), *v;
        const char *id = jget_str(o, "id");
        Agnode_t *an = id ? agnode(vg->ag, (char *)id, 0) : NULL;
        if (!an) continue;
        double x = 0, y = 0, w = 0, h = 0;
        if (json_object_object_get_ex(o, "x", &v)) x = json_object_get_double(v);
        if (json_object_object_get_ex(o, "y", &v)) y = json_object_get_double(v);
        if (json_object_object_get_ex(o, "w", &v)) w = json_object_get_double(v);
        if (json_object_object_get_ex(o, "h", &v)) h = json_object_get_double(v);
        char buf[96];
        snprintf(buf, sizeof buf, "%.2f,%.2f!", x, height - y);
        agsafeset(an, "pos", buf, "");
        snprintf(buf, sizeof buf, "%.4f", w / 72.0);
        agsafeset(an, "width", buf, "");
        snprintf(buf, sizeof buf, "%.4f", h / 72.0);
        agsafeset(an, "height", buf, "");
        agsafeset(an, "fixedsize", "true", "");
    }
    return gvLayout(gvc, vg->ag, "nop");
}

/* What makes two nodes' body drawings the same: the body's text and,
 * for a composite, whose body takes its shapes from the node's inputs,
 * their types. malloc'ed; NULL when out of memory. */
static char *body_memo_key(const char *text, const tg_node *owner) {
    int nin = owner && !strcmp(owner->op->name, "composite") ? owner->nin : 0;
    size_t n = strlen(text), cap = n + 1 + (size_t)nin * 160;
    char *k = malloc(cap);
    if (!k) return NULL;
    memcpy(k, text, n + 1);
    for (int i = 0; i < nin; i++) {
        k[n++] = '\n';
        tg_type_str(&owner->inputs[i]->type, k + n, cap - n);
        n += strlen(k + n);
    }
    return k;
}

int vz_layout(vz_graph *vg, GVC_t *gvc, json_object *out, tg_ctx *ctx) {
    size_t n = json_object_array_length(vg->nodes);
    double W, H;
    bool dot = false;
    /* dot's time grows with its virtual nodes far faster than with the
     * nodes: a gradient reads the forward pass's values and weights from
     * far below, and 200 nodes with 5,000 such crossings took it 5 s,
     * 420 with 23,000 over 5 minutes (crossing minimization). */
    long crossings = vg->layout == VZ_LAYOUT_LAYERS || n > VZ_DOT_MAX ? 0 : vz_long_edges(vg);
    if (crossings < 0) {
        fprintf(stderr, "tgviz: out of memory laying the graph out\n");
        return -1;
    }
    bool big = n > VZ_DOT_MAX || crossings > VZ_DOT_CROSSINGS_MAX;
    static bool noted; /* once, not again for each body */
    if (vg->layout == VZ_LAYOUT_DOT && big && !noted && (noted = true))
        fprintf(stderr,
                "tgviz: note: dot may take minutes on this drawing (%zu nodes, long edges crossing %ld ranks in all); "
                "--layout layers draws it in linear time\n",
                n, crossings);
    if ((vg->layered = vg->layout == VZ_LAYOUT_LAYERS || (vg->layout == VZ_LAYOUT_AUTO && big))) {
        if (vz_layers(vg, &W, &H)) {
            fprintf(stderr, "tgviz: out of memory laying the graph out\n");
            return -1;
        }
        if (!vg->for_page && place_for_render(vg, gvc, H) != 0) {
            tg_ctx_clear(ctx);
            fprintf(stderr, "tgviz: Graphviz could not place the graph for rendering\n");
            return -1;
        }
    } else {
        build_ag(vg);
        if (gvLayout(gvc, vg->ag, "dot") != 0) {
            tg_ctx_clear(ctx);
            fprintf(stderr, "tgviz: Graphviz could not lay the graph out\n");
            return -1;
        }
        dot = true;
        boxf bb = GD_bb(vg->ag);
        W = bb.UR.x - bb.LL.x;
        H = bb.UR.y - bb.LL.y;
        for (size_t i = 0; i < n; i++) {
            json_object *o = json_object_array_get_idx(vg->nodes, i);
            const char *id = jget_str(o, "id");
            Agnode_t *an = agnode(vg->ag, (char *)id, 0);
            if (!an) continue;
            json_object_object_add(o, "x", json_object_new_double(ND_coord(an).x - bb.LL.x));
            json_object_object_add(o, "y", json_object_new_double(bb.UR.y - ND_coord(an).y));
            json_object_object_add(o, "w", json_object_new_double(ND_width(an) * 72.0));
            json_object_object_add(o, "h", json_object_new_double(ND_height(an) * 72.0));
        }
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_object *o = json_object_array_get_idx(vg->nodes, i);
        const char *id = jget_str(o, "id");
        /* A node with a body gets the body's drawing, laid out the same
         * way, for the page to expand in place. */
        json_object *attrs, *body;
        if (!json_object_object_get_ex(o, "attrs", &attrs) || !json_object_object_get_ex(attrs, "body", &body) ||
            !json_object_is_type(body, json_type_object))
            continue;
        const char *key = jget_str(o, "key");
        if (!key) key = id;
        /* The body's ids hold its owner's path: the owner's id less its
         * "a:", its key at the top level, and in a body the body's own
         * path, a '/' and its key (a:Eb/R/h1 in scan R in scan Eb's
         * body). With the key alone, the scans R in two scans' bodies
         * gave their bodies' nodes one id (a:R/h1, as the top scan R's).
         * In a drawing shared by several owners the path starts with the
         * placeholder, which the page replaces, in the references too. */
        const char *path = id && !strncmp(id, "a:", 2) ? id + 2 : key;
        if (!vg->bodies && (vg->bodies = calloc(1, sizeof *vg->bodies)) && !(vg->bodies->map = tg_idmap_new())) {
            free(vg->bodies);
            vg->bodies = NULL;
        }
        /* The loaded node, whose body has the types the library inferred
         * (a composite's depend on the node's input types: they are part
         * of what makes two drawings the same). */
        const tg_node *owner = vg->holders ? tg_idmap_get(vg->holders, key) : NULL;
        /* A body whose text holds the placeholder is drawn for this node
         * alone. */
        const char *text = vg->bodies ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : NULL;
        bool shared = text && !strstr(text, PH_JSON);
        char *kept = shared ? body_memo_key(text, owner) : NULL; /* (the next body's text takes json-c's buffer) */
        body_drawing *d = kept ? tg_idmap_get(vg->bodies->map, kept) : NULL;
        if (!d) {
            vz_graph sub;
            json_object *so = json_object_new_object();
            vz_init(&sub, "body", true);
            sub.owner = owner;
            sub.layout = vg->layout;
            sub.bodies = vg->bodies; /* for the bodies in it */
            sub.nested = true;
            vz_from_body(&sub, body, kept ? PH : path);
            if (json_object_array_length(sub.nodes) > 0) rc = vz_layout(&sub, gvc, so, ctx);
            if (sub.bodies == vg->bodies) sub.bodies = NULL; /* vg's; one of its own, vz_free frees */
            json_object_object_add(so, "nodes", json_object_get(sub.nodes));
            json_object_object_add(so, "edges", json_object_get(sub.edges));
            /* Keep the body's graph (and its own bodies') until this one
             * is closed. */
            Agraph_t **ns = realloc(vg->subs, sizeof *ns * (size_t)(vg->nsubs + sub.nsubs + 1));
            if (ns) {
                vg->subs = ns;
                for (int k = 0; k < sub.nsubs; k++) vg->subs[vg->nsubs++] = sub.subs[k];
                vg->subs[vg->nsubs++] = sub.ag;
                sub.ag = NULL;
                sub.nsubs = 0;
            }
            vz_free(&sub);
            if (!kept) {
                json_object_object_add(o, "body", so);
                continue;
            }
            d = bodies_keep(vg->bodies, kept, so);
            free(kept);
            kept = NULL;
            if (!d) {
                fprintf(stderr, "tgviz: out of memory drawing a nested body\n");
                return -1;
            }
        }
        free(kept);
        json_object *copy = body_copy_new(d, path);
        if (!copy) {
            fprintf(stderr, "tgviz: out of memory drawing a nested body\n");
            return -1;
        }
        json_object_object_add(o, "body", copy);
    }
    /* the drawings the references name, once (the top graph's table
     * holds its bodies' bodies too) */
    if (!vg->nested && vg->bodies && vg->bodies->n) {
        json_object *t = json_object_new_array_ext(vg->bodies->n);
        for (int i = 0; t && i < vg->bodies->n; i++)
            if (json_object_array_add(t, json_object_get(vg->bodies->e[i]->drawing))) {
                json_object_put(t);
                t = NULL;
            }
        if (!t || json_object_object_add(out, "bodies", t)) {
            json_object_put(t);
            fprintf(stderr, "tgviz: out of memory drawing a nested body\n");
            return -1;
        }
    }
    json_object_object_add(out, "width", json_object_new_double(W));
    json_object_object_add(out, "height", json_object_new_double(H));
    json_object_object_add(out, "layout", json_object_new_string(vg->layered ? "layers" : "dot"));
    /* The pictures render from the laid-out graph; the page needs only the
     * positions. */
    if (vg->for_page && dot) gvFreeLayout(gvc, vg->ag);
    return rc;
}
