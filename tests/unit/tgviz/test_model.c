/* tgviz's drawing model: a nested body (as a composite, scan or
 * op_from_graph carries in attrs.body) is drawn from its JSON, laid out by
 * dot, and a body inside a body is drawn into the inner node; a loaded
 * graph gives one node per apply node, free variable and output. Counts
 * worked out by hand from the JSON below. */
#include <math.h>
#include <string.h>

#include "model.h"
#include "testutil.h"

/* a, b -> m = mul(a, b) -> e = exp(m) -> output e; and g =
 * op_from_graph(m) whose own body is q = neg(p). */
static const char *body_json =
    "{\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float32\",\"shape\":[]}},"
    "{\"id\":\"b\",\"type\":{\"dtype\":\"float32\",\"shape\":[]}},"
    "{\"id\":\"m\",\"type\":{\"dtype\":\"float32\",\"shape\":[]}}],"
    "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"m\"]},"
    "{\"op\":\"exp\",\"inputs\":[\"m\"],\"outputs\":[\"e\"]},"
    "{\"op\":\"op_from_graph\",\"inputs\":[\"m\"],\"outputs\":[\"g\"],\"attrs\":{\"name\":\"inner\",\"body\":"
    "{\"variables\":[],\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"p\"],\"outputs\":[\"q\"]}],"
    "\"inputs\":[\"p\"],\"outputs\":[\"q\"]}}}],"
    "\"inputs\":[\"a\",\"b\"],\"outputs\":[\"e\",\"g\"]}";

/* One Graphviz context for the process, as tgviz has: Graphviz 2.43's
 * pango plugin keeps a font cache across contexts that a second context
 * would read after the first freed it. */
static GVC_t *gvc;

static json_object *find(json_object *nodes, const char *id) {
    for (size_t i = 0; i < json_object_array_length(nodes); i++) {
        json_object *n = json_object_array_get_idx(nodes, i), *v;
        if (json_object_object_get_ex(n, "id", &v) && !strcmp(json_object_get_string(v), id)) return n;
    }
    return NULL;
}

static double num(json_object *o, const char *k) {
    json_object *v;
    assert_true(json_object_object_get_ex(o, k, &v));
    return json_object_get_double(v);
}

/* Node n as the page reads it: written out and parsed again, a body
 * written as a reference ({"ref": k, "key": K}) made into the drawing
 * k of the view's "bodies" with K for the placeholder, as tgviz.js does
 * (owned by the caller). */
static json_object *as_page_reads(json_object *out, json_object *n) {
    json_object *w = json_tokener_parse(json_object_to_json_string_ext(n, JSON_C_TO_STRING_PLAIN)), *b, *ref, *key,
                *table;
    assert_non_null(w);
    if (!json_object_object_get_ex(w, "body", &b) || !json_object_object_get_ex(b, "ref", &ref)) return w;
    assert_false(json_object_object_get_ex(b, "nodes", NULL));
    assert_true(json_object_object_get_ex(b, "key", &key));
    assert_true(json_object_object_get_ex(out, "bodies", &table));
    json_object *t = json_object_array_get_idx(table, (size_t)json_object_get_int(ref));
    assert_non_null(t);
    /* the drawing's text with the key (plain ids here) for \u0001 */
    const char *text = json_object_to_json_string_ext(t, JSON_C_TO_STRING_PLAIN), *k = json_object_get_string(key);
    char *sub = malloc(strlen(text) * (strlen(k) + 1) + 1), *q = sub;
    assert_non_null(sub);
    for (const char *p = text; *p;) {
        if (!strncmp(p, "\\u0001", 6)) {
            q += sprintf(q, "%s", k);
            p += 6;
        } else {
            *q++ = *p++;
        }
    }
    *q = 0;
    json_object *d = json_tokener_parse(sub);
    free(sub);
    assert_non_null(d);
    json_object_object_add(w, "body", d);
    return w;
}

static void test_body_drawn_and_laid_out(void **state) {
    tg_ctx *ctx = tg_ctx_new();
    json_object *body = json_tokener_parse(body_json), *out = json_object_new_object();
    assert_non_null(body);
    vz_graph vg;
    vz_init(&vg, "body", true);
    assert_int_equal(vz_from_body(&vg, body, "c"), 0);
    assert_int_equal(vz_layout(&vg, gvc, out, ctx), 0);
    /* 2 inputs + 3 apply nodes + 2 outputs; edges: mul 2, exp 1,
     * op_from_graph 1, outputs 2. */
    assert_int_equal(json_object_array_length(vg.nodes), 7);
    assert_int_equal(json_object_array_length(vg.edges), 6);
    json_object *m = find(vg.nodes, "a:c/m"), *e = find(vg.nodes, "a:c/e"), *a = find(vg.nodes, "v:c/a");
    assert_non_null(m);
    assert_non_null(e);
    assert_non_null(a);
    assert_non_null(find(vg.nodes, "o:c/g"));
    /* Top to bottom: a above m above e, all inside the drawing. */
    assert_true(num(a, "y") < num(m, "y"));
    assert_true(num(m, "y") < num(e, "y"));
    for (size_t i = 0; i < json_object_array_length(vg.nodes); i++) {
        json_object *n = json_object_array_get_idx(vg.nodes, i);
        assert_true(num(n, "x") >= 0 && num(n, "x") <= num(out, "width") + 0.5);
        assert_true(num(n, "y") >= 0 && num(n, "y") <= num(out, "height") + 0.5);
        assert_true(num(n, "w") > 0 && num(n, "h") > 0);
    }
    /* The inner body: input p, neg, output q; 2 edges (as the page reads
     * it: a body's drawing is written out for its node). */
    json_object *g = find(vg.nodes, "a:c/g"), *gw, *gb, *gn, *ge;
    assert_non_null(g);
    gw = as_page_reads(out, g);
    assert_true(json_object_object_get_ex(gw, "body", &gb));
    assert_true(json_object_object_get_ex(gb, "nodes", &gn));
    assert_true(json_object_object_get_ex(gb, "edges", &ge));
    assert_int_equal(json_object_array_length(gn), 3);
    assert_int_equal(json_object_array_length(ge), 2);
    /* its ids hold the whole path, c's and g's: with g's key alone, the
     * bodies of two nodes g in two bodies had one id */
    assert_non_null(find(gn, "a:c/g/q"));
    assert_null(find(gn, "a:g/q"));
    /* Types come from the body's variables. */
    json_object *ms, *md;
    json_object_object_get_ex(m, "outputs", &ms);
    assert_true(json_object_object_get_ex(json_object_array_get_idx(ms, 0), "dtype", &md));
    assert_string_equal(json_object_get_string(md), "float32");
    json_object_put(gw);
    vz_free(&vg);
    json_object_put(body);
    json_object_put(out);
    tg_ctx_free(ctx);
}

static void test_family(void **state) {
    assert_string_equal(vz_op_family("add"), "elemwise");
    assert_string_equal(vz_op_family("gemm"), "blas");
    assert_string_equal(vz_op_family("sum"), "reduce");
    assert_string_equal(vz_op_family("scan"), "control");
    assert_string_equal(vz_op_family("no_such_op"), "other");
}

/* A malformed body is drawn as far as it goes, without a crash. */
static void test_body_malformed(void **state) {
    tg_ctx *ctx = tg_ctx_new();
    const char *bad[] = {"{}", "{\"nodes\":3}", "{\"nodes\":[1,{\"op\":2},{\"op\":\"add\",\"outputs\":[]}]}",
                         "{\"nodes\":[{\"op\":\"add\",\"inputs\":[\"u\",{\"value\":1},7],\"outputs\":[\"v\"]}],"
                         "\"outputs\":[\"v\",\"zz\",4]}"};
    size_t want[] = {0, 0, 0, 4}; /* u, add, the output v, and zz as an input feeding its output */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_object *body = json_tokener_parse(bad[i]), *out = json_object_new_object();
        vz_graph vg;
        vz_init(&vg, "body", true);
        assert_int_equal(vz_from_body(&vg, body, "k"), 0);
        size_t n = json_object_array_length(vg.nodes);
        if (n) assert_int_equal(vz_layout(&vg, gvc, out, ctx), 0);
        assert_true(n >= want[i]);
        vz_free(&vg);
        json_object_put(body);
        json_object_put(out);
    }
    tg_ctx_free(ctx);
}

/* The layered layout on a hand-made drawing: a -> b, a -> c, b -> d,
 * c -> d, and a leaf e read by d only. Ranks by hand: a 0; b, c 1; d 2;
 * e, a source, moves down to just above its reader: 1. Sizes by hand from
 * the labels (5.6 pt a glyph, 12 pt a line, margins 5.76 and 2.16 pt on
 * each side; an ellipse is the box times sqrt 2). */
static void test_layers(void **state) {
    (void)state;
    vz_graph vg;
    vz_init(&vg, "t", true);
    const char *nodes[][3] = {{"a:a", "add\na", "box"},
                              {"a:b", "categorical_crossentropy\nb", "box"},
                              {"a:c", "exp\nc", "box"},
                              {"a:d", "mul\nd", "box"},
                              {"v:e", "e\nfloat32 (3,)", "ellipse"}};
    for (int i = 0; i < 5; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_string(nodes[i][0]));
        json_object_object_add(o, "label", json_object_new_string(nodes[i][1]));
        json_object_object_add(o, "shape", json_object_new_string(nodes[i][2]));
        json_object_array_add(vg.nodes, o);
    }
    const char *edges[][2] = {{"a:a", "a:b"}, {"a:a", "a:c"}, {"a:b", "a:d"}, {"a:c", "a:d"}, {"v:e", "a:d"},
                              {"a:d", "a:nowhere"}};
    for (int i = 0; i < 6; i++) json_object_array_add(vg.edges, vz_edge_new(edges[i][0], edges[i][1], "v", "float32", NULL, 0, NULL));
    /* (an edge that is not one of the model's is skipped) */
    json_object *stray = json_object_new_object();
    json_object_object_add(stray, "source", json_object_new_string("a:b"));
    json_object_object_add(stray, "target", json_object_new_string("a:a"));
    json_object_array_add(vg.edges, stray);
    double W, H;
    assert_int_equal(vz_layers(&vg, &W, &H), 0);
    /* Positions and sizes are written with two decimals. */
    const double TOL = 0.011;
    json_object *a = find(vg.nodes, "a:a"), *b = find(vg.nodes, "a:b"), *c = find(vg.nodes, "a:c"),
                *d = find(vg.nodes, "a:d"), *e = find(vg.nodes, "v:e");
    /* widths: 3 glyphs -> the 54 pt minimum; 24 glyphs: 24 * 5.6 + 11.52;
     * e's 12 glyphs ("float32 (3,)"): (12 * 5.6 + 11.52) * sqrt 2. Heights: two lines,
     * 24 + 4.32 (sqrt 2 times that for e). */
    assert_float_equal(num(a, "w"), 54.0, TOL);
    assert_float_equal(num(b, "w"), 145.92, TOL);
    assert_float_equal(num(e, "w"), (12 * 5.6 + 11.52) * 1.4142135623730951, TOL);
    assert_float_equal(num(a, "h"), 28.32, TOL);
    assert_float_equal(num(e, "h"), 28.32 * 1.4142135623730951, TOL);
    /* y: rank 0 holds a (28.32 tall), rank 1 is as tall as e, rank 2
     * holds d; 32.4 pt between ranks. */
    double r1 = 28.32 + 32.4, h1 = 28.32 * 1.4142135623730951;
    assert_float_equal(num(a, "y"), 14.16, TOL);
    assert_float_equal(num(b, "y"), r1 + h1 / 2, TOL);
    assert_float_equal(num(c, "y"), r1 + h1 / 2, TOL);
    assert_float_equal(num(e, "y"), r1 + h1 / 2, TOL);
    assert_float_equal(num(d, "y"), r1 + h1 + 32.4 + 14.16, TOL);
    assert_float_equal(H, r1 + h1 + 32.4 + 28.32, TOL);
    /* Rank 1's three nodes keep the separation; everything lies in the
     * drawing, the leftmost node at 0. */
    json_object *r[3] = {b, c, e};
    double left = 1e30;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (i != j && num(r[i], "x") < num(r[j], "x"))
                assert_true(num(r[j], "x") - num(r[j], "w") / 2 - (num(r[i], "x") + num(r[i], "w") / 2) >=
                            18.0 - TOL);
    json_object *all[5] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) {
        double x = num(all[i], "x"), w = num(all[i], "w");
        assert_true(x - w / 2 >= -TOL && x + w / 2 <= W + TOL);
        if (x - w / 2 < left) left = x - w / 2;
    }
    assert_float_equal(left, 0.0, TOL);
    /* d reads b, c and e: the sweeps put it between the outer two. */
    double lo = fmin(num(b, "x"), fmin(num(c, "x"), num(e, "x")));
    double hi = fmax(num(b, "x"), fmax(num(c, "x"), num(e, "x")));
    assert_true(num(d, "x") >= lo && num(d, "x") <= hi);
    vz_free(&vg);
}

/* A chain a0 -> a1 -> ... -> a(K-1), and a0 read by every node of it:
 * ranks 0 .. K-1, and the edge a0 -> ai crosses i - 1 ranks, (K - 2)(K -
 * 1)/2 in all (2,926 for K = 78, 3,081 for K = 80). `auto` lays the
 * first out with dot and the second with the layered layout: dot's
 * time grows with those crossings (a training graph of 420 nodes
 * crossing 23,000 ranks took it over 5 minutes). */
static void test_auto_counts_crossings(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    const int K[2] = {78, 80};
    for (int t = 0; t < 2; t++) {
        vz_graph vg;
        vz_init(&vg, "t", true);
        char id[16], prev[16];
        for (int i = 0; i < K[t]; i++) {
            json_object *o = json_object_new_object();
            snprintf(id, sizeof id, "a:%d", i);
            json_object_object_add(o, "id", json_object_new_string(id));
            json_object_object_add(o, "label", json_object_new_string(id));
            json_object_array_add(vg.nodes, o);
            if (i) json_object_array_add(vg.edges, vz_edge_new(prev, id, "v", "float32", NULL, 0, NULL));
            if (i > 1) json_object_array_add(vg.edges, vz_edge_new("a:0", id, "w", "float32", NULL, 1, NULL));
            snprintf(prev, sizeof prev, "%s", id);
        }
        long want = (long)(K[t] - 2) * (K[t] - 1) / 2;
        assert_int_equal(vz_long_edges(&vg), want);
        json_object *out = json_object_new_object();
        assert_int_equal(vz_layout(&vg, gvc, out, ctx), 0);
        assert_int_equal(vg.layered, want > VZ_DOT_CROSSINGS_MAX);
        /* either way, every node placed, a rank below the one it reads */
        for (int i = 1; i < K[t]; i++) {
            char a[16];
            snprintf(a, sizeof a, "a:%d", i - 1);
            snprintf(id, sizeof id, "a:%d", i);
            assert_true(num(find(vg.nodes, id), "y") > num(find(vg.nodes, a), "y"));
        }
        json_object_put(out);
        vz_free(&vg);
    }
    assert_true((78 - 2) * (78 - 1) / 2 <= VZ_DOT_CROSSINGS_MAX && (80 - 2) * (80 - 1) / 2 > VZ_DOT_CROSSINGS_MAX);
    tg_ctx_free(ctx);
}

/* The nodes of the body drawn in node `id` of vg, as the page reads them
 * (as_page_reads); *whole holds them, for json_object_put. */
static json_object *body_nodes(vz_graph *vg, json_object *out, const char *id, json_object **whole) {
    json_object *n = find(vg->nodes, id), *b, *bn;
    assert_non_null(n);
    *whole = as_page_reads(out, n);
    assert_true(json_object_object_get_ex(*whole, "body", &b));
    assert_true(json_object_object_get_ex(b, "nodes", &bn));
    return bn;
}

/* Bodies are drawn once per distinct text: two nodes with the same body
 * get the same drawing (positions, sizes, labels), each with its own ids;
 * a body that differs (an int8 where the others have float32, so wider
 * labels) gets its own, the one it gets when laid out alone. */
static void test_bodies_drawn_once(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    char other[2048];
    snprintf(other, sizeof other, "%s", body_json);
    for (char *p; (p = strstr(other, "float32"));) memcpy(p, "int8   ", 7); /* (json allows the spaces) */
    json_object *same = json_tokener_parse(body_json), *diff = json_tokener_parse(other);
    assert_non_null(same);
    assert_non_null(diff);
    vz_graph vg;
    vz_init(&vg, "top", true);
    const char *keys[3] = {"k1", "k2", "k3"};
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "a:%s", keys[i]);
        json_object *o = json_object_new_object(), *attrs = json_object_new_object();
        json_object_object_add(attrs, "body", json_object_get(i < 2 ? same : diff));
        json_object_object_add(o, "id", json_object_new_string(id));
        json_object_object_add(o, "key", json_object_new_string(keys[i]));
        json_object_object_add(o, "attrs", attrs);
        json_object_array_add(vg.nodes, o);
        agnode(vg.ag, id, 1);
    }
    json_object *out = json_object_new_object(), *w1, *w2, *w3;
    assert_int_equal(vz_layout(&vg, gvc, out, ctx), 0);
    json_object *b1 = body_nodes(&vg, out, "a:k1", &w1), *b2 = body_nodes(&vg, out, "a:k2", &w2),
                *b3 = body_nodes(&vg, out, "a:k3", &w3);
    /* three drawings written, each once (the two bodies and the body
     * nested in both, drawn first, as the first one is laid out); the
     * nodes hold references */
    json_object *table, *r1, *r2, *r3, *x;
    assert_true(json_object_object_get_ex(out, "bodies", &table));
    assert_int_equal(json_object_array_length(table), 3);
    json_object_object_get_ex(find(vg.nodes, "a:k1"), "body", &r1);
    json_object_object_get_ex(find(vg.nodes, "a:k2"), "body", &r2);
    json_object_object_get_ex(find(vg.nodes, "a:k3"), "body", &r3);
    const char *t1 = json_object_to_json_string_ext(r1, JSON_C_TO_STRING_PLAIN);
    assert_string_equal(t1, "{\"ref\":1,\"key\":\"k1\"}");
    assert_string_equal(json_object_to_json_string_ext(r2, JSON_C_TO_STRING_PLAIN), "{\"ref\":1,\"key\":\"k2\"}");
    assert_string_equal(json_object_to_json_string_ext(r3, JSON_C_TO_STRING_PLAIN), "{\"ref\":2,\"key\":\"k3\"}");
    assert_true(json_object_object_get_ex(json_object_array_get_idx(table, 1), "nodes", &x));
    assert_non_null(find(x, "a:\x01/m"));
    /* and the body nested in it, by reference too, with a path relative
     * to the drawing's owner: k1's copy refers to it as k1/g, k2's as k2/g */
    assert_non_null(strstr(json_object_to_json_string_ext(x, JSON_C_TO_STRING_PLAIN), "\"body\":{\"ref\":0,\"key\":\"\\u0001\\/g\"}"));
    size_t n = json_object_array_length(b1);
    assert_int_equal(n, 7);
    assert_int_equal(json_object_array_length(b2), n);
    assert_non_null(find(b1, "a:k1/m"));
    assert_non_null(find(b2, "a:k2/m"));
    assert_non_null(find(b2, "v:k2/a"));
    assert_non_null(find(b2, "o:k2/g"));
    assert_null(find(b2, "a:k1/m"));
    json_object *g1, *g2, *gk;
    assert_true(json_object_object_get_ex(find(b1, "a:k1/g"), "body", &g1));
    assert_true(json_object_object_get_ex(find(b2, "a:k2/g"), "body", &g2));
    assert_true(json_object_object_get_ex(g1, "key", &gk));
    assert_string_equal(json_object_get_string(gk), "k1/g");
    assert_true(json_object_object_get_ex(g2, "key", &gk));
    assert_string_equal(json_object_get_string(gk), "k2/g");
    static const char *const xywh[4] = {"x", "y", "w", "h"};
    bool differs = false;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(b1, i), *q = json_object_array_get_idx(b2, i), *u, *v;
        for (int k = 0; k < 4; k++) assert_true(num(p, xywh[k]) == num(q, xywh[k]));
        assert_true(json_object_object_get_ex(p, "label", &u) && json_object_object_get_ex(q, "label", &v));
        assert_string_equal(json_object_get_string(u), json_object_get_string(v));
        differs |= num(p, "w") != num(json_object_array_get_idx(b3, i), "w");
    }
    assert_true(differs);
    /* The edges name their own copy's nodes. */
    json_object *bb, *e2;
    assert_true(json_object_object_get_ex(w2, "body", &bb) && json_object_object_get_ex(bb, "edges", &e2));
    for (size_t i = 0; i < json_object_array_length(e2); i++) {
        json_object *e = json_object_array_get_idx(e2, i), *src, *dst;
        assert_true(json_object_object_get_ex(e, "source", &src) && json_object_object_get_ex(e, "target", &dst));
        const char *a = json_object_get_string(src), *b = json_object_get_string(dst);
        assert_true(strstr(a, ":k2/") || strstr(a, ":g/"));
        assert_true(strstr(b, ":k2/") || strstr(b, ":g/"));
    }
    /* k3's body as it is laid out alone */
    vz_graph alone;
    json_object *out2 = json_object_new_object();
    vz_init(&alone, "body", true);
    assert_int_equal(vz_from_body(&alone, diff, "k3"), 0);
    assert_int_equal(vz_layout(&alone, gvc, out2, ctx), 0);
    assert_int_equal(json_object_array_length(alone.nodes), n);
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(alone.nodes, i), *q = json_object_array_get_idx(b3, i), *v;
        assert_true(json_object_object_get_ex(q, "id", &v));
        assert_string_equal(json_object_get_string(v), json_object_get_string(json_object_object_get(p, "id")));
        for (int k = 0; k < 4; k++) assert_float_equal(num(p, xywh[k]), num(q, xywh[k]), 1e-9);
    }
    json_object_put(w1);
    json_object_put(w2);
    json_object_put(w3);
    vz_free(&alone);
    vz_free(&vg);
    json_object_put(same);
    json_object_put(diff);
    json_object_put(out);
    json_object_put(out2);
    tg_ctx_free(ctx);
}

/* An apply node's inputs, outputs and creation trace are written from the
 * node itself (model.c): the text is what json-c writes for the same
 * values (parsed and written again by json-c, it is unchanged), the
 * values are the graph's, and names and frames holding quotes, slashes,
 * control characters, "</script>" and UTF-8 come back as they were. */
static void test_node_text(void **state) {
    (void)state;
    static const char *g_json =
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
        "{\"id\":\"x\",\"name\":\"x \\\"q\\\" a/b </script>\\n\\u0001 \\u00e9\\u03b8\","
        "\"type\":{\"dtype\":\"float32\",\"shape\":[null,3]}},"
        "{\"id\":\"w.1\",\"type\":{\"dtype\":\"int64\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"cast\",\"inputs\":[\"w.1\"],\"outputs\":[\"c\"],\"attrs\":{\"dtype\":\"float32\"}},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"c\"],\"outputs\":[\"m\"],"
        "\"trace\":[{\"file\":\"m/model.py\",\"line\":0,\"function\":\"f\\\"\\\\g\",\"code\":\"s = '</script>'\\t\\u001f\"},"
        "{\"file\":\"\\u00e9.py\",\"code\":\"y\"}]}],"
        "\"functions\":{\"main\":{\"inputs\":[\"x\",\"w.1\"],\"outputs\":[\"m\"]}}}";
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(g_json, strlen(g_json), NULL, "g_json", ctx);
    if (!g) fail_msg("%s", tg_ctx_message(ctx));
    vz_graph vg;
    vz_init(&vg, "t", true);
    assert_int_equal(vz_from_graph(&vg, g, 0, ctx), 0);
    json_object *c = find(vg.nodes, "a:c"), *m = find(vg.nodes, "a:m");
    assert_non_null(c);
    assert_non_null(m);
    const char *text = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN);
    assert_null(strstr(text, "</"));
    json_object *back = json_tokener_parse(text), *ins, *outs, *tr, *v;
    assert_non_null(back);
    assert_string_equal(json_object_to_json_string_ext(back, JSON_C_TO_STRING_PLAIN), text);
    assert_true(json_object_object_get_ex(back, "inputs", &ins));
    assert_int_equal(json_object_array_length(ins), 2);
    json_object *x = json_object_array_get_idx(ins, 0), *cin = json_object_array_get_idx(ins, 1);
    assert_string_equal(json_object_get_string(json_object_object_get(x, "id")), "x");
    assert_string_equal(json_object_get_string(json_object_object_get(x, "name")),
                        "x \"q\" a/b </script>\n\x01 \xc3\xa9\xce\xb8");
    assert_string_equal(json_object_get_string(json_object_object_get(x, "dtype")), "float32");
    assert_true(json_object_object_get_ex(x, "shape", &v));
    assert_int_equal(json_object_array_length(v), 2);
    assert_null(json_object_array_get_idx(v, 0));
    assert_int_equal(json_object_get_int(json_object_array_get_idx(v, 1)), 3);
    assert_string_equal(json_object_get_string(json_object_object_get(cin, "id")), "c");
    assert_false(json_object_object_get_ex(cin, "name", &v));
    assert_string_equal(json_object_to_json_string_ext(json_object_object_get(cin, "shape"), JSON_C_TO_STRING_PLAIN),
                        "[]");
    assert_true(json_object_object_get_ex(back, "outputs", &outs));
    assert_int_equal(json_object_array_length(outs), 1);
    assert_string_equal(json_object_get_string(json_object_object_get(json_object_array_get_idx(outs, 0), "id")), "m");
    /* The frames as written, the second without line and function. */
    assert_true(json_object_object_get_ex(back, "trace", &tr));
    assert_int_equal(json_object_array_length(tr), 2);
    json_object *f0 = json_object_array_get_idx(tr, 0), *f1 = json_object_array_get_idx(tr, 1);
    assert_string_equal(json_object_get_string(json_object_object_get(f0, "file")), "m/model.py");
    assert_int_equal(json_object_get_int(json_object_object_get(f0, "line")), 0);
    assert_string_equal(json_object_get_string(json_object_object_get(f0, "function")), "f\"\\g");
    assert_string_equal(json_object_get_string(json_object_object_get(f0, "code")), "s = '</script>'\t\x1f");
    assert_string_equal(json_object_get_string(json_object_object_get(f1, "file")), "\xc3\xa9.py");
    assert_false(json_object_object_get_ex(f1, "line", &v));
    assert_false(json_object_object_get_ex(f1, "function", &v));
    assert_string_equal(json_object_get_string(json_object_object_get(f1, "code")), "y");
    json_object_put(back);
    /* A node without a trace: an empty list; with the slash escape off,
     * slashes are written as they are. */
    back = json_tokener_parse(json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN));
    assert_non_null(back);
    assert_string_equal(json_object_to_json_string_ext(json_object_object_get(back, "trace"), JSON_C_TO_STRING_PLAIN),
                        "[]");
    json_object_put(back);
    assert_non_null(strstr(json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                           "\"file\":\"m/model.py\""));
    vz_free(&vg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* The lines Graphviz draws for an escString label: \\ is a backslash,
 * \n, \l, \r and a raw newline end a line (here each gives '\n'). */
static void label_lines(const char *l, char *buf, size_t cap) {
    size_t n = 0;
    for (; *l && n + 1 < cap; l++) {
        if (*l == '\\' && (l[1] == 'n' || l[1] == 'l' || l[1] == 'r'))
            buf[n++] = '\n', l++;
        else if (*l == '\\' && l[1] == '\\')
            buf[n++] = '\\', l++;
        else
            buf[n++] = *l;
    }
    buf[n] = 0;
}

/* A .dot as tgviz writes it, read back by Graphviz, draws each label's
 * lines: a line of 128 characters or more that ended in a backslash kept
 * its line break in the picture but lost it in the .dot (Graphviz's
 * writer breaks a long string with a backslash-newline there). The lines
 * wanted are the names as written, then the type. */
static void test_dot_read_back(void **state) {
    (void)state;
    char name[200] = "C:\\\\data\\\\", want[300] = "C:\\data\\";
    for (int i = 0; i < 140; i++) strcat(name, "a"), strcat(want, "a");
    strcat(name, "\\\\");
    strcat(want, "\\\nfloat64 (3,)");
    char g_json[1024];
    snprintf(g_json, sizeof g_json,
             "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
             "{\"id\":\"x\",\"name\":\"%s\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}},"
             "{\"id\":\"w\",\"name\":\"p\\nq\\\\\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
             "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}],"
             "\"functions\":{\"main\":{\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}}}",
             name);
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(g_json, strlen(g_json), NULL, "g_json", ctx);
    if (!g) fail_msg("%s", tg_ctx_message(ctx));
    vz_graph vg;
    vz_init(&vg, "t", false);
    json_object *out = json_object_new_object();
    assert_int_equal(vz_from_graph(&vg, g, 0, ctx), 0);
    assert_int_equal(vz_layout(&vg, gvc, out, ctx), 0);
    char *dot = NULL;
    unsigned int len = 0;
    assert_int_equal(gvRenderData(gvc, vg.ag, "dot", &dot, &len), 0);
    Agraph_t *back = agmemread(dot);
    assert_non_null(back);
    Agnode_t *x = agnode(back, "v:x", 0), *w = agnode(back, "v:w", 0);
    assert_non_null(x);
    assert_non_null(w);
    char lines[400];
    label_lines(agget(x, "label"), lines, sizeof lines);
    if (strcmp(lines, want)) fail_msg("x's label read back draws\n%s\nwant\n%s", lines, want);
    label_lines(agget(w, "label"), lines, sizeof lines);
    if (strcmp(lines, "p\nq\\\nfloat64 (3,)")) fail_msg("w's label read back draws\n%s", lines);
    agclose(back);
    gvFreeRenderData(dot);
    json_object_put(out);
    vz_free(&vg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layers),
        cmocka_unit_test(test_auto_counts_crossings),
        cmocka_unit_test(test_body_drawn_and_laid_out),
        cmocka_unit_test(test_family),
        cmocka_unit_test(test_body_malformed),
        cmocka_unit_test(test_bodies_drawn_once),
        cmocka_unit_test(test_node_text),
        cmocka_unit_test(test_dot_read_back),
    };
    gvc = gvContext();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    gvFreeContext(gvc);
    return rc;
}
