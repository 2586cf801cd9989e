/* The saver: load -> save -> load gives the same graph (every graph in the
 * test data and the examples), saving twice gives the same text, values
 * are written as FORMAT.md s5 says (small arrays as data with non-finite
 * floats as strings, large ones as base64, weak inline scalars bare),
 * the implicit `main` stays implicit, saving is atomic, and an allocation
 * failure anywhere in a save fails it cleanly. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"
#include "io/io.h"
#include "ops/op.h"
#include "testutil.h"

/* Structural equality of two loaded graphs: ids, kinds, types, ops,
 * attrs, traces, values, functions, meta. */
static void assert_same_graph(const tg_graph *a, const tg_graph *b, const char *what) {
    if (a->nnodes != b->nnodes) fail_msg("%s: %d nodes, then %d", what, a->nnodes, b->nnodes);
    if ((a->name || b->name) && (!a->name || !b->name || strcmp(a->name, b->name)))
        fail_msg("%s: the graph's name differs", what);
    for (int i = 0; i < a->nnodes; i++) {
        const tg_node *x = a->nodes[i], *y = b->nodes[i];
        if (x->op != y->op || x->nin != y->nin || x->nout != y->nout)
            fail_msg("%s: node %d differs (%s, %s)", what, i, x->op->name, y->op->name);
        if ((x->attrs || y->attrs) && !json_object_equal(x->attrs, y->attrs))
            fail_msg("%s: node %d attrs differ: %s then %s", what, i,
                     json_object_to_json_string(x->attrs), json_object_to_json_string(y->attrs));
        if ((x->name || y->name) && (!x->name || !y->name || strcmp(x->name, y->name)))
            fail_msg("%s: node %d name differs", what, i);
        if (x->trace.n != y->trace.n) fail_msg("%s: node %d trace differs", what, i);
        for (int f = 0; f < x->trace.n; f++) {
            const tg_frame *p = &x->trace.frames[f], *q = &y->trace.frames[f];
            if (p->line != q->line || (p->file && (!q->file || strcmp(p->file, q->file))) ||
                (p->code && (!q->code || strcmp(p->code, q->code))))
                fail_msg("%s: node %d trace frame %d differs", what, i, f);
        }
        if ((x->inplace == NULL) != (y->inplace == NULL) ||
            (x->inplace && memcmp(x->inplace, y->inplace, (size_t)x->nout)))
            fail_msg("%s: node %d inplace differs", what, i);
        for (int k = 0; k < x->nout; k++) {
            if (strcmp(x->outputs[k]->id, y->outputs[k]->id) ||
                !tg_type_equal(&x->outputs[k]->type, &y->outputs[k]->type))
                fail_msg("%s: node %d output %d differs", what, i, k);
        }
        for (int k = 0; k < x->nin; k++) {
            const tg_var *u = x->inputs[k], *v = y->inputs[k];
            if (!tg_type_equal(&u->type, &v->type) || u->kind != v->kind ||
                u->inline_const != v->inline_const || u->weak_in_file != v->weak_in_file)
                fail_msg("%s: node %d input %d differs", what, i, k);
            if (u->value && !tg_array_equal(u->value, v->value))
                fail_msg("%s: node %d input %d value differs", what, i, k);
            if (!u->inline_const && strcmp(u->id, v->id))
                fail_msg("%s: node %d input %d: '%s' then '%s'", what, i, k, u->id, v->id);
        }
    }
    if (a->nfuncs != b->nfuncs) fail_msg("%s: functions differ", what);
    for (int i = 0; i < a->nfuncs; i++) {
        const tg_fdecl *f = &a->funcs[i], *h = &b->funcs[i];
        if (strcmp(f->name, h->name) || f->nin != h->nin || f->nout != h->nout ||
            f->nupd != h->nupd || f->json_inputs_given != h->json_inputs_given)
            fail_msg("%s: function %d differs", what, i);
        for (int k = 0; k < f->nin; k++)
            if (strcmp(f->inputs[k]->id, h->inputs[k]->id)) fail_msg("%s: function %d input %d", what, i, k);
        for (int k = 0; k < f->nout; k++)
            if (strcmp(f->outputs[k]->id, h->outputs[k]->id)) fail_msg("%s: function %d output %d", what, i, k);
        for (int k = 0; k < f->nupd; k++)
            if (strcmp(f->updates[k].shared->id, h->updates[k].shared->id) ||
                strcmp(f->updates[k].value->id, h->updates[k].value->id))
                fail_msg("%s: function %d update %d", what, i, k);
    }
    if ((a->meta || b->meta) && !json_object_equal(a->meta, b->meta)) fail_msg("%s: meta differs", what);
    for (int i = 0; i < a->nvars; i++) {
        const tg_var *u = a->vars[i];
        if (u->inline_const) continue;
        const tg_var *v = tg_graph_find(b, u->id);
        if (!v) fail_msg("%s: '%s' lost", what, u->id);
        if (u->kind != v->kind || u->declared != v->declared || !tg_type_equal(&u->type, &v->type))
            fail_msg("%s: '%s' differs", what, u->id);
        if ((u->name || v->name) && (!u->name || !v->name || strcmp(u->name, v->name)))
            fail_msg("%s: the name of '%s' differs", what, u->id);
        if (u->kind == TG_VAR_SHARED && !tg_array_equal(u->shared->value, v->shared->value))
            fail_msg("%s: shared '%s' differs", what, u->id);
        if (u->kind == TG_VAR_CONSTANT && !tg_array_equal(u->value, v->value))
            fail_msg("%s: constant '%s' differs", what, u->id);
        if ((u->test_value == NULL) != (v->test_value == NULL) ||
            (u->test_value && !tg_array_equal(u->test_value, v->test_value)))
            fail_msg("%s: test value of '%s' differs", what, u->id);
    }
}

/* A value writer as a .tgf's: {"tgf_array": k}, k counting up. */
static json_object *ref_writer(void *ud, const tg_var *v, const tg_array *a) {
    (void)v;
    (void)a;
    json_object *o = json_object_new_object();
    if (o && json_object_object_add(o, "tgf_array", json_object_new_int((*(int *)ud)++))) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* tg_graph_to_text_ext writes what json-c prints of tg_graph_to_json_ext,
 * byte for byte, values inline and as references. */
static void same_compact_text(const tg_graph *g, const char *what) {
    for (int refs = 0; refs < 2; refs++) {
        int k1 = 0, k2 = 0;
        json_object *o = tg_graph_to_json_ext(g, refs ? ref_writer : NULL, &k1);
        assert_non_null(o);
        const char *want = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        size_t len = 0;
        char *got = tg_graph_to_text_ext(g, refs ? ref_writer : NULL, &k2, &len);
        assert_non_null(got);
        if (strcmp(got, want) || len != strlen(want) || k1 != k2)
            fail_msg("%s: the compact text differs from json-c's:\n%s\n----\n%s", what, got, want);
        tg_free(got);
        json_object_put(o);
    }
}

/* save(load(x)) loads to the same graph, and save(load(save(x))) ==
 * save(load(x)) as text. Returns the first saved text. */
static char *round_trip_graph(tg_graph *a, const char *what) {
    same_compact_text(a, what);
    tg_ctx *ctx = tg_ctx_new();
    char *s1 = tg_graph_to_string(a, ctx);
    if (!s1) fail_msg("%s: save failed: %s", what, tg_ctx_message(ctx));
    tg_graph *b = tg_graph_load_string(s1, strlen(s1), a->dir, "saved", ctx);
    if (!b) fail_msg("%s: the saved form does not load: %s\n%s", what, tg_ctx_message(ctx), s1);
    assert_same_graph(a, b, what);
    char *s2 = tg_graph_to_string(b, ctx);
    assert_non_null(s2);
    if (strcmp(s1, s2)) fail_msg("%s: saving the reloaded graph gives other text:\n%s\n----\n%s", what, s1, s2);
    tg_string_free(s2);
    tg_graph_free(b);
    tg_ctx_free(ctx);
    return s1;
}

static void round_trip_file(const char *path) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *a = tg_graph_load(path, ctx);
    if (!a) fail_msg("%s: %s", path, tg_ctx_message(ctx));
    tg_string_free(round_trip_graph(a, path));
    tg_graph_free(a);
    tg_ctx_free(ctx);
}

static char *round_trip_text(const char *json) {
    tg_graph *a = tu_load(json);
    char *s = round_trip_graph(a, json);
    tg_graph_free(a);
    return s;
}

static int round_trip_dir(const char *dir) {
    char path[2048];
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        round_trip_file(path);
        n++;
    }
    closedir(d);
    return n;
}

static void test_round_trip_test_data(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/ops", TG_TEST_DATA);
    int n = round_trip_dir(dir);
    snprintf(dir, sizeof dir, "%s/tools", TG_TEST_DATA);
    n += round_trip_dir(dir);
    snprintf(dir, sizeof dir, "%s/examples", TG_SOURCE_DIR);
    n += round_trip_dir(dir);
    printf("  %d graphs round-tripped\n", n);
    assert_true(n > 50);
}

#define HEAD "{\"format\":\"tg-graph\",\"version\":1,"

/* Every kind of thing a file can hold, with the ids, names, traces,
 * test values, inplace, updates and meta a round trip must keep. */
static void test_round_trip_everything(void **state) {
    (void)state;
    char *s = round_trip_text(
        HEAD "\"name\":\"all\",\"variables\":["
        "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"broadcastable\":[false,true]},\"name\":\"X\","
        "\"test_value\":{\"shape\":[2,1],\"data\":[[1],[2]]}},"
        "{\"id\":\"c\",\"type\":{\"dtype\":\"float32\",\"shape\":[]},\"constant\":{\"data\":\"nan\"}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float32\",\"shape\":[2,1]},\"shared\":{\"data\":[[0.5],[-1e-8]]}},"
        "{\"id\":\"y\",\"type\":{\"dtype\":\"float32\",\"shape\":[null,1]},\"name\":\"Y\"},"
        "{\"id\":\"u\",\"type\":{\"dtype\":\"uint64\",\"shape\":[2]},\"constant\":{\"data\":[18446744073709551615,0]}},"
        "{\"id\":\"i\",\"type\":{\"dtype\":\"int64\",\"shape\":[2]},\"constant\":{\"data\":[-9223372036854775808,7]}},"
        "{\"id\":\"h\",\"type\":{\"dtype\":\"float16\",\"shape\":[3]},\"constant\":{\"data\":[0.1,\"-inf\",65504]}}],"
        "\"nodes\":["
        "{\"op\":\"add\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"],\"name\":\"sum\",\"inplace\":{\"0\":0},"
        "\"trace\":[{\"file\":\"m.py\",\"line\":3,\"function\":\"f\",\"code\":\"y = x + w\",\"extra\":1},{\"line\":4}]},"
        "{\"op\":\"mul\",\"inputs\":[\"y\",{\"value\":{\"dtype\":\"float32\",\"shape\":[],\"data\":2}},\"c\"],\"outputs\":[\"z\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"z\"],\"outputs\":[\"t\"],\"attrs\":{\"keepdims\":true,\"axis\":[0]}}],"
        "\"functions\":{\"train\":{\"inputs\":[\"x\"],\"outputs\":[\"t\"],\"updates\":{\"w\":\"y\"}},"
        "\"empty\":{\"inputs\":[],\"outputs\":[]}},"
        "\"meta\":{\"b\":[1,2.50,{\"deep\":null}],\"a\":\"\\u00e9\\n\"}}");
    /* what the text says, as FORMAT.md writes it */
    assert_null(strstr(s, "\"broadcastable\""));
    assert_non_null(strstr(s, "{\"dtype\": \"float32\", \"shape\": [null, 1]}"));
    assert_non_null(strstr(s, "\"constant\": {\"dtype\": \"float32\", \"shape\": [], \"data\": \"nan\"}"));
    assert_non_null(strstr(s, "[18446744073709551615, 0]"));
    assert_non_null(strstr(s, "[-9223372036854775808, 7]"));
    /* shortest forms that read back to the same float16 / float32 */
    assert_non_null(strstr(s, "[0.1, \"-inf\", 65504.0]"));
    assert_non_null(strstr(s, "[[0.5], [-1e-08]]"));
    assert_non_null(strstr(s, "\"attrs\": {\"axis\": [0], \"keepdims\": true}"));
    assert_non_null(strstr(s, "\"inplace\": {\"0\": 0}"));
    assert_null(strstr(s, "\"extra\"")); /* unknown frame keys are not kept */
    tg_string_free(s);
}

/* Saving is canonical: attrs in key order, whatever the file's order. */
static void test_canonical_attrs(void **state) {
    (void)state;
    const char *a = HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}}],"
                         "\"nodes\":[{\"op\":\"sum\",\"inputs\":[\"x\"],\"outputs\":[\"s\"],"
                         "\"attrs\":{\"keepdims\":false,\"axis\":1}}]}";
    const char *b = HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]}}],"
                         "\"nodes\":[{\"op\":\"sum\",\"inputs\":[\"x\"],\"outputs\":[\"s\"],"
                         "\"attrs\":{\"axis\":1}}]}";
    char *sa = round_trip_text(a), *sb = round_trip_text(b);
    assert_string_equal(sa, sb);
    tg_string_free(sa);
    tg_string_free(sb);
}

/* Inline constants go back inline: weak ones bare (so that they stay
 * weak, in the kind of the dtype they took), strong ones with their
 * dtype; the made-up ids never reach the file. */
static void test_inline_constants(void **state) {
    (void)state;
    char *s = round_trip_text(
        HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[2]}},"
        "{\"id\":\"i\",\"type\":{\"dtype\":\"int8\",\"shape\":[2]}},"
        "{\"id\":\"b\",\"type\":{\"dtype\":\"bool\",\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":2}],\"outputs\":[\"a\"]},"
        "{\"op\":\"add\",\"inputs\":[\"i\",{\"value\":-3}],\"outputs\":[\"c\"]},"
        "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":{\"data\":\"inf\"}}],\"outputs\":[\"d\"]},"
        "{\"op\":\"logical_and\",\"inputs\":[\"b\",{\"value\":true}],\"outputs\":[\"e\"]},"
        "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":{\"dtype\":\"float32\",\"data\":0.25}}],\"outputs\":[\"f\"]},"
        "{\"op\":\"add\",\"inputs\":[\"i\",{\"value\":{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2]}}],"
        "\"outputs\":[\"g\"]}]}");
    assert_non_null(strstr(s, "\"inputs\": [\"x\", {\"value\": 2.0}]"));
    assert_non_null(strstr(s, "\"inputs\": [\"i\", {\"value\": -3}]"));
    assert_non_null(strstr(s, "\"inputs\": [\"x\", {\"value\": {\"data\": \"inf\"}}]"));
    assert_non_null(strstr(s, "\"inputs\": [\"b\", {\"value\": true}]"));
    assert_non_null(strstr(s, "{\"value\": {\"dtype\": \"float32\", \"shape\": [], \"data\": 0.25}}"));
    assert_non_null(strstr(s, "{\"value\": {\"dtype\": \"int8\", \"shape\": [2], \"data\": [1, 2]}}"));
    assert_null(strstr(s, ":in"));
    /* no `functions` in, none out: main stays implicit */
    assert_null(strstr(s, "\"functions\""));
    tg_string_free(s);
}

/* Large values go as base64 of their little-endian bytes, small ones as
 * data; both come back bit for bit, non-contiguous ones included. */
static void test_large_values_base64(void **state) {
    (void)state;
    /* w: 257 elements, one past the data limit; v: 256 int16 zeros given
     * as base64 (512 bytes are 684 characters ending in "A=") */
    char b64[700];
    memset(b64, 'A', 683);
    memcpy(b64 + 683, "=", 2);
    char json[16384];
    int k = snprintf(json, sizeof json,
                     HEAD "\"variables\":[{\"id\":\"w\",\"type\":{\"dtype\":\"float32\",\"shape\":[257]},"
                          "\"shared\":{\"data\":[");
    for (int i = 0; i < 257; i++) k += snprintf(json + k, sizeof json - (size_t)k, "%s%.1f", i ? "," : "", (i - 128) * 0.5);
    snprintf(json + k, sizeof json - (size_t)k,
             "]}},{\"id\":\"v\",\"type\":{\"dtype\":\"int16\",\"shape\":[16,16]},"
             "\"constant\":{\"base64\":\"%s\"}}],\"nodes\":[]}", b64);
    char *s = round_trip_text(json);
    /* w: 257 elements -> base64; v: exactly 256 -> data rows */
    assert_non_null(strstr(s, "\"shared\": {\"dtype\": \"float32\", \"shape\": [257], \"base64\": \""));
    assert_non_null(strstr(s, "\"shape\": [16, 16],"));
    assert_non_null(strstr(s, "\n          [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],\n"));
    tg_graph *g = tu_load(s);
    tg_var *w = tg_graph_find(g, "w");
    assert_non_null(w);
    const float *p = tg_array_data(w->shared->value);
    for (int i = 0; i < 257; i++) assert_true(p[i] == (float)((i - 128) * 0.5));
    tg_graph_free(g);
    tg_string_free(s);

    /* a transposed (non-contiguous) array writes in C order */
    int64_t shp[2] = {2, 3};
    double d[6] = {1, 2, 3, 4, 5, 6};
    tg_array *a = tu_f64(2, shp, d);
    tg_array *t = tg_array_view_transpose(a, NULL, NULL);
    assert_non_null(t);
    json_object *j = tg_value_to_json(t);
    assert_non_null(j);
    assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                        "{\"dtype\":\"float64\",\"shape\":[3,2],\"data\":[[1.0,4.0],[2.0,5.0],[3.0,6.0]]}");
    json_object_put(j);
    tg_array_free(t);
    tg_array_free(a);
}

/* A NaN that "nan" would not read back as (its sign bit set, as NumPy's
 * x + (c - c) gives for c = inf on x86, or another payload) is written bit
 * for bit, as base64, wherever a value is written as JSON; the dtype's
 * positive quiet NaN is still written "nan". The base64 texts are
 * Python's base64.b64encode of the NumPy arrays' bytes. */
static void test_odd_nan_written_as_bits(void **state) {
    (void)state;
    static const struct {
        tg_dtype dt;
        uint64_t bits[2];
        const char *want;
    } cases[] = {
        {TG_FLOAT64, {0xFFF8000000000000u, 0}, "\"base64\":\"AAAAAAAA+P8AAAAAAAAAAA==\""},
        {TG_FLOAT64, {0x7FF8000000000001u, 0x3FF0000000000000u}, "\"base64\":\"AQAAAAAA+H8AAAAAAADwPw==\""},
        {TG_FLOAT64, {0x7FF8000000000000u, 0}, "\"data\":[\"nan\",0.0]"},
        {TG_FLOAT32, {0xFFC00000u, 0x3F800000u}, "\"base64\":\"AADA/wAAgD8=\""},
        {TG_FLOAT32, {0x7FC00001u, 0}, "\"base64\":\"AQDAfwAAAAA=\""},
        {TG_FLOAT32, {0x7FC00000u, 0x3F800000u}, "\"data\":[\"nan\",1.0]"},
        {TG_FLOAT16, {0xFE00u, 0x3C00u}, "\"base64\":\"AP4APA==\""},
        {TG_FLOAT16, {0x7E00u, 0x3C00u}, "\"data\":[\"nan\",1.0]"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t two = 2;
        tg_array *a = tg_array_new(cases[c].dt, 1, &two);
        size_t w = tg_dtype_size(cases[c].dt);
        unsigned char *p = tg_array_data(a);
        for (int i = 0; i < 2; i++) memcpy(p + i * w, &cases[c].bits[i], w); /* little-endian */
        json_object *j = tg_value_to_json(a);
        assert_non_null(j);
        const char *got = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!strstr(got, cases[c].want)) fail_msg("case %zu: %s, expected %s", c, got, cases[c].want);
        /* and it reads back with the same bits */
        tg_ctx *ctx = tg_ctx_new();
        bool weak = false;
        tg_array *b = tg_value_from_json(j, TG_DTYPE_INVALID, -1, NULL, NULL, "value", &weak, ctx);
        if (!b) fail_msg("case %zu: %s", c, tg_ctx_message(ctx));
        assert_memory_equal(tg_array_data(b), p, 2 * w);
        tg_array_free(b);
        tg_ctx_free(ctx);
        json_object_put(j);
        tg_array_free(a);
    }
    /* A graph's constant, saved and loaded: the same bits. */
    char *s = round_trip_text(HEAD "\"variables\":[{\"id\":\"c\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]},"
                                   "\"constant\":{\"base64\":\"AAAAAAAA+P8AAAAAAAAAAA==\"}}],\"nodes\":[]}");
    tg_graph *g = tu_load(s);
    tg_var *cv = tg_graph_find(g, "c");
    assert_non_null(cv);
    uint64_t bits[2];
    memcpy(bits, tg_array_data(cv->value), sizeof bits);
    if (bits[0] != 0xFFF8000000000000u || bits[1]) fail_msg("saved as\n%s\nreads back as 0x%llx 0x%llx", s,
                                                           (unsigned long long)bits[0], (unsigned long long)bits[1]);
    tg_graph_free(g);
    tg_string_free(s);
}

/* Saving is atomic: a failed save leaves the previous file as it was. */
static long alloc_budget = -1;
static void *failing_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (n == 0) {
        free(p);
        return NULL;
    }
    if (alloc_budget == 0) return NULL;
    if (alloc_budget > 0) alloc_budget--;
    return realloc(p, n);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_save_atomic(void **state) {
    (void)state;
    tg_graph *g = tu_load(HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                               "\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}");
    char path[] = "/tmp/tg_save_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "previous", 8), 8);
    close(fd);
    tg_ctx *ctx = tg_ctx_new();
    /* a folder that does not exist: an error naming the path */
    assert_int_not_equal(tg_graph_save(g, "/nonexistent-dir/g.json", ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "/nonexistent-dir/g.json"));
    /* every allocation failing in turn: the old file stays whole */
    bool saved = false;
    for (long k = 0; k < 1000 && !saved; k++) {
        tg_set_allocator(failing_realloc, NULL);
        alloc_budget = k;
        int rc = tg_graph_save(g, path, ctx);
        alloc_budget = -1;
        tg_set_allocator(NULL, NULL);
        if (rc == 0) {
            saved = true;
        } else {
            assert_int_equal(tg_ctx_status(ctx), TG_ENOMEM);
            assert_string_equal(slurp(path), "previous");
        }
    }
    assert_true(saved);
    char *want = tg_graph_to_string(g, ctx);
    assert_string_equal(slurp(path), want);
    tg_string_free(want);
    tg_graph *back = tg_graph_load(path, ctx);
    assert_non_null(back);
    tg_graph_free(back);
    /* no temporary file is left beside it */
    DIR *d = opendir("/tmp");
    struct dirent *e;
    const char *base = strrchr(path, '/') + 1;
    int near = 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, base, strlen(base)) || strstr(e->d_name, base)) near++;
    closedir(d);
    assert_int_equal(near, 1);
    unlink(path);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* An allocation failure at any point of a save gives NULL and ENOMEM,
 * never a truncated text; base64 values included. */
static void test_save_allocation_failures(void **state) {
    (void)state;
    char json[8192];
    int k = snprintf(json, sizeof json,
                     HEAD "\"name\":\"n\",\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[300]}},"
                          "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[300]},\"shared\":{\"data\":[");
    for (int i = 0; i < 300; i++) k += snprintf(json + k, sizeof json - (size_t)k, "%s%d", i ? "," : "", i);
    snprintf(json + k, sizeof json - (size_t)k,
             "]}}],\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",\"w\",{\"value\":0.5}],\"outputs\":[\"y\"],"
             "\"trace\":[{\"file\":\"a.py\",\"line\":1}]},"
             "{\"op\":\"sum\",\"inputs\":[\"y\"],\"outputs\":[\"s\"],\"attrs\":{\"axis\":0}}],"
             "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"s\"],\"updates\":{\"w\":\"y\"}}},"
             "\"meta\":{\"k\":1}}");
    tg_graph *g = tu_load(json);
    tg_ctx *ctx = tg_ctx_new();
    char *want = tg_graph_to_string(g, ctx);
    assert_non_null(want);
    bool done = false;
    long n;
    for (n = 0; n < 10000 && !done; n++) {
        tg_set_allocator(failing_realloc, NULL);
        alloc_budget = n;
        char *s = tg_graph_to_string(g, ctx);
        alloc_budget = -1;
        tg_set_allocator(NULL, NULL);
        if (s) {
            assert_string_equal(s, want);
            done = true;
        } else {
            assert_int_equal(tg_ctx_status(ctx), TG_ENOMEM);
        }
        tg_string_free(s);
    }
    printf("  %ld allocation points of a save failed one by one\n", n - 1);
    assert_true(done);
    tg_string_free(want);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* Strings as json-c escapes them (every control character, quotes,
 * backslashes, slashes, DEL, UTF-8) in names, traces and meta; frames
 * with any subset of their keys; an empty graph; and an allocation
 * failure anywhere gives NULL, never a shorter text. */
static void test_compact_text(void **state) {
    (void)state;
    char name[200], json[8192];
    int n = 0;
    for (int c = 1; c < 0x20; c++) n += snprintf(name + n, sizeof name - (size_t)n, "\\u%04x", c);
    snprintf(name + n, sizeof name - (size_t)n, "\\\"\\\\/\x7f\xc3\xa9 end");
    snprintf(json, sizeof json,
             HEAD "\"name\":\"%s\",\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]},\"name\":\"%s\"}],"
             "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"name\":\"%s\",\"trace\":["
             "{\"file\":\"%s\",\"line\":0},{\"function\":\"f\"},{},{\"line\":12,\"code\":\"%s\"},"
             "{\"file\":\"a\",\"function\":\"b\",\"code\":\"c\"}]},"
             "{\"op\":\"add\",\"inputs\":[\"y\",{\"value\":true},{\"value\":-3},{\"value\":1e300},{\"value\":{\"data\":\"nan\"}}],"
             "\"outputs\":[\"z\"],\"inplace\":{\"0\":0}},"
             "{\"op\":\"mul\",\"inputs\":[\"z\",{\"value\":{\"dtype\":\"uint64\",\"shape\":[],\"data\":18446744073709551615}}],\"outputs\":[\"w\"]}],"
             "\"meta\":{\"s\":\"%s\",\"n\":[1,2.5,null,false,{}]}}",
             name, name, name, name, name, name);
    tg_graph *g = tu_load(json);
    same_compact_text(g, "strings");
    size_t len;
    char *want = tg_graph_to_text_ext(g, NULL, NULL, &len);
    assert_non_null(strstr(want, "\\u0001\\u0002"));
    assert_non_null(strstr(want, "\\b\\t\\n\\u000b\\f\\r\\u000e"));
    assert_non_null(strstr(want, "\\\"\\\\/\x7f\xc3\xa9 end"));
    assert_non_null(strstr(want, "\"trace\":[{\"file\":"));
    assert_non_null(strstr(want, ",{\"function\":\"f\"},{},{\"line\":12,\"code\":"));
    bool done = false;
    long k;
    for (k = 0; k < 100000 && !done; k++) {
        tg_set_allocator(failing_realloc, NULL);
        alloc_budget = k;
        size_t l2 = 0;
        char *s = tg_graph_to_text_ext(g, NULL, NULL, &l2);
        alloc_budget = -1;
        tg_set_allocator(NULL, NULL);
        if (s) {
            assert_string_equal(s, want);
            assert_int_equal(l2, len);
            done = true;
        }
        tg_free(s);
    }
    assert_true(done);
    tg_free(want);
    tg_graph_free(g);
    g = tu_load(HEAD "\"variables\":[],\"nodes\":[],\"functions\":{}}");
    same_compact_text(g, "empty");
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_test_data),
        cmocka_unit_test(test_round_trip_everything),
        cmocka_unit_test(test_compact_text),
        cmocka_unit_test(test_canonical_attrs),
        cmocka_unit_test(test_inline_constants),
        cmocka_unit_test(test_large_values_base64),
        cmocka_unit_test(test_odd_nan_written_as_bits),
        cmocka_unit_test(test_save_atomic),
        cmocka_unit_test(test_save_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
