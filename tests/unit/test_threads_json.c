/* Functions compiled from separate loads of a graph, or restored in
 * separate sets from one .tgf file, share no json-c object: json-c's
 * reference count is a plain add and writing an object out as text writes
 * into the object, so two threads each with their own function (which the
 * API allows) raced on any object the two held (the fusion pass's table
 * of bodies handed one composite's attrs to every function with the same
 * fused group; tg_tgf_save of one and of the other wrote it out at the
 * same time, and freeing them put it at the same time). Then the same
 * work in two threads at once gives what it gives in one. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "testutil.h"
#include "graph/graph.h"
#include "vm/vm.h"

#define MLP TG_SOURCE_DIR "/examples/mlp.json"

/* A set of pointers (sorted once filled). */
typedef struct ptrset {
    const void **p;
    size_t n, cap;
} ptrset;

static void ptrset_add(ptrset *s, const void *p) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->p = realloc(s->p, s->cap * sizeof *s->p);
        assert_non_null(s->p);
    }
    s->p[s->n++] = p;
}

static int ptr_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(const void *const *)a, y = (uintptr_t)*(const void *const *)b;
    return x < y ? -1 : x > y;
}

/* Every json object that o reaches, o included. */
static void walk(ptrset *s, json_object *o) {
    if (!o) return;
    ptrset_add(s, o);
    if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, k, v) {
            (void)k;
            walk(s, v);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) walk(s, json_object_array_get_idx(o, i));
    }
}

/* The json objects of every node of f (its attrs and all they hold);
 * returns how many of the nodes are composites. */
static int function_objects(const tg_function *f, ptrset *s) {
    int ncomp = 0;
    for (int k = 0; k < f->nsched; k++) {
        const tg_node *n = f->sched[k].node;
        ncomp += !strcmp(n->op->name, "composite");
        walk(s, n->attrs);
    }
    qsort(s->p, s->n, sizeof *s->p, ptr_cmp);
    return ncomp;
}

/* The first object of b that a also holds, or NULL. */
static const void *common(const ptrset *a, const ptrset *b) {
    for (size_t i = 0; i < b->n; i++)
        if (bsearch(&b->p[i], a->p, a->n, sizeof *a->p, ptr_cmp)) return b->p[i];
    return NULL;
}

static tg_function *compile(tg_graph *g, const char *name, tg_ctx *ctx) {
    int i = tg_graph_function_find(g, name, ctx);
    assert_true(i >= 0);
    tg_function *f = tg_function_compile(g, i, NULL, ctx);
    if (!f) fail_msg("compile %s: %s", name, tg_ctx_message(ctx));
    return f;
}

/* Two loads of the MLP compiled: the second's fused groups are the
 * first's (the fusion pass's table of bodies finds them), yet none of its
 * attrs objects is the first's. */
static void test_compiled_functions_share_no_attrs(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g1 = tg_graph_load(MLP, ctx), *g2 = tg_graph_load(MLP, ctx);
    assert_non_null(g1);
    assert_non_null(g2);
    tg_function *f1 = compile(g1, "train", ctx), *f2 = compile(g2, "train", ctx);
    tg_function *p1 = compile(g1, "predict", ctx);
    ptrset s1 = {0}, s2 = {0}, s3 = {0};
    int c1 = function_objects(f1, &s1), c2 = function_objects(f2, &s2);
    function_objects(p1, &s3);
    assert_true(c1 > 0);
    assert_int_equal(c1, c2);
    const void *both = common(&s1, &s2);
    if (both) fail_msg("the two loads' train functions share json object %p", both);
    /* (nor do two functions of one load) */
    if ((both = common(&s1, &s3))) fail_msg("train and predict share json object %p", both);
    free(s1.p);
    free(s2.p);
    free(s3.p);
    tg_function_free(f1);
    tg_function_free(f2);
    tg_function_free(p1);
    tg_graph_free(g1);
    tg_graph_free(g2);
    tg_ctx_free(ctx);
}

/* Two sets restored from one file share no attrs object either. */
static void test_restored_sets_share_no_attrs(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    char path[256];
    snprintf(path, sizeof path, "%s/tg-threads-json-%ld.tgf", P_tmpdir, (long)getpid());
    tg_graph *g = tg_graph_load(MLP, ctx);
    assert_non_null(g);
    tg_function *f = compile(g, "train", ctx);
    tg_tgf_save_info si = {.source = g};
    if (tg_tgf_save(path, &f, 1, &si, ctx)) fail_msg("save: %s", tg_ctx_message(ctx));
    tg_function_free(f);
    tg_graph_free(g);
    for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
        tg_tgf_load_options o = {.no_mmap = no_mmap};
        tg_tgf *a = tg_tgf_load(path, &o, ctx), *b = tg_tgf_load(path, &o, ctx);
        assert_non_null(a);
        assert_non_null(b);
        ptrset sa = {0}, sb = {0};
        int ca = function_objects(tg_tgf_function(a, 0), &sa);
        assert_true(ca > 0);
        assert_int_equal(function_objects(tg_tgf_function(b, 0), &sb), ca);
        const void *both = common(&sa, &sb);
        if (both) fail_msg("two restores share json object %p", both);
        free(sa.p);
        free(sb.p);
        tg_tgf_free(a);
        tg_tgf_free(b);
    }
    unlink(path);
    tg_ctx_free(ctx);
}

/* ---- load, compile, save, free in two threads at once ---- */

enum { ROUNDS = 6, NFN = 2 };
static const char *const FNS[NFN] = {"train", "predict"};

/* Load, compile every function, save to path, free; then the saved
 * graphs as interchange JSON (tg_tgf_export: the file itself holds the
 * compile's times, which differ from run to run). NULL on failure, the
 * message in msg. */
static char **round_trip(const char *path, char *msg, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    char **out = NULL;
    tg_function *fs[NFN] = {0};
    tg_graph *g = tg_graph_load(MLP, ctx);
    tg_tgf *t = NULL;
    if (!g) goto fail;
    for (int i = 0; i < NFN; i++) {
        int k = tg_graph_function_find(g, FNS[i], ctx);
        if (k < 0 || !(fs[i] = tg_function_compile(g, k, NULL, ctx))) goto fail;
    }
    tg_tgf_save_info si = {.source = g};
    if (tg_tgf_save(path, fs, NFN, &si, ctx)) goto fail;
    for (int i = 0; i < NFN; i++) {
        tg_function_free(fs[i]);
        fs[i] = NULL;
    }
    tg_graph_free(g);
    g = NULL;
    if (!(t = tg_tgf_load(path, NULL, ctx))) goto fail;
    out = calloc(NFN, sizeof *out);
    for (int i = 0; out && i < NFN; i++)
        if (!(out[i] = tg_tgf_export(t, i, ctx))) goto fail;
    tg_tgf_free(t);
    tg_ctx_free(ctx);
    return out;
fail:
    snprintf(msg, size, "%s", tg_ctx_message(ctx));
    for (int i = 0; out && i < NFN; i++) tg_string_free(out[i]);
    free(out);
    for (int i = 0; i < NFN; i++) tg_function_free(fs[i]);
    tg_graph_free(g);
    tg_tgf_free(t);
    tg_ctx_free(ctx);
    return NULL;
}

typedef struct worker {
    char path[256];
    char **const *ref;
    int bad;     /* rounds that failed or differed */
    char msg[512];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int r = 0; r < ROUNDS; r++) {
        char **got = round_trip(w->path, w->msg, sizeof w->msg);
        if (!got) {
            w->bad++;
            continue;
        }
        for (int i = 0; i < NFN; i++) {
            if (strcmp(got[i], (*w->ref)[i])) {
                if (!w->bad) snprintf(w->msg, sizeof w->msg, "round %d: %s differs", r, FNS[i]);
                w->bad++;
            }
            tg_string_free(got[i]);
        }
        free(got);
    }
    return NULL;
}

static void test_two_threads_save_what_one_saves(void **state) {
    (void)state;
    char ref_path[256], msg[512] = "";
    snprintf(ref_path, sizeof ref_path, "%s/tg-threads-json-%ld-ref.tgf", P_tmpdir, (long)getpid());
    char **ref = round_trip(ref_path, msg, sizeof msg);
    if (!ref) fail_msg("single-threaded: %s", msg);
    /* (the export of a second single-threaded run is the same text) */
    char **again = round_trip(ref_path, msg, sizeof msg);
    if (!again) fail_msg("single-threaded: %s", msg);
    for (int i = 0; i < NFN; i++) {
        assert_string_equal(again[i], ref[i]);
        tg_string_free(again[i]);
    }
    free(again);
    worker w[2];
    pthread_t id[2];
    for (int t = 0; t < 2; t++) {
        memset(&w[t], 0, sizeof w[t]);
        snprintf(w[t].path, sizeof w[t].path, "%s/tg-threads-json-%ld-%d.tgf", P_tmpdir, (long)getpid(), t);
        w[t].ref = &ref;
        assert_int_equal(pthread_create(&id[t], NULL, work, &w[t]), 0);
    }
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_join(id[t], NULL), 0);
    for (int t = 0; t < 2; t++) {
        if (w[t].bad) fail_msg("thread %d: %d of %d rounds wrong: %s", t, w[t].bad, ROUNDS, w[t].msg);
        unlink(w[t].path);
    }
    for (int i = 0; i < NFN; i++) tg_string_free(ref[i]);
    free(ref);
    unlink(ref_path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiled_functions_share_no_attrs),
        cmocka_unit_test(test_restored_sets_share_no_attrs),
        cmocka_unit_test(test_two_threads_save_what_one_saves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
