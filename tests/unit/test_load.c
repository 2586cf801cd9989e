/* The loader: one test per error class (tests/data/load_errors/EXPECT),
 * load -> save -> load round trips of every graph in the test data, and
 * allocation failures injected at every allocation of a load, compile and
 * call (nothing may crash or leak: the sanitizer build checks). */
#include <dirent.h>
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "io/io.h"
#include "testutil.h"

static int status_by_name(const char *name) {
#define X_(n, v, d) \
    if (!strcmp(name, #n)) return v;
    TG_STATUS_LIST(X_)
#undef X_
    return 1;
}

static void test_load_errors(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/load_errors/EXPECT", TG_TEST_DATA);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[2048];
    int cases = 0, failures = 0;
    tg_ctx *ctx = tg_ctx_new();
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = 0;
        char *file = strtok(line, "\t"), *status = strtok(NULL, "\t"), *sub = strtok(NULL, "");
        assert_non_null(sub);
        snprintf(path, sizeof path, "%s/load_errors/%s", TG_TEST_DATA, file);
        tg_ctx_clear(ctx);
        tg_graph *g = tg_graph_load(path, ctx);
        cases++;
        const char *msg = tg_ctx_message(ctx);
        if (g) {
            printf("  %s: loaded, but should fail with %s\n", file, status);
            tg_graph_free(g);
            failures++;
        } else if (tg_ctx_status(ctx) != status_by_name(status)) {
            printf("  %s: status %s, want %s: %s\n", file, tg_status_str(tg_ctx_status(ctx)), status, msg);
            failures++;
        } else if (!strstr(msg, sub) || strncmp(msg, path, strlen(path)) != 0) {
            printf("  %s: message does not start with the file or lacks '%s':\n    %s\n", file, sub, msg);
            failures++;
        } else if (strchr(msg, '\n')) {
            printf("  %s: message is more than one line\n", file);
            failures++;
        }
    }
    fclose(f);
    tg_ctx_free(ctx);
    printf("  %d error classes checked\n", cases);
    assert_true(cases >= 40);
    if (failures) fail_msg("%d of %d error cases failed", failures, cases);
}

/* Structural equality of two loaded graphs. */
static void assert_same_graph(const tg_graph *a, const tg_graph *b, const char *what) {
    if (a->nnodes != b->nnodes) fail_msg("%s: %d nodes, then %d", what, a->nnodes, b->nnodes);
    for (int i = 0; i < a->nnodes; i++) {
        const tg_node *x = a->nodes[i], *y = b->nodes[i];
        if (x->op != y->op || x->nin != y->nin || x->nout != y->nout)
            fail_msg("%s: node %d differs (%s, %s)", what, i, x->op->name, y->op->name);
        if ((x->attrs || y->attrs) && !json_object_equal(x->attrs, y->attrs))
            fail_msg("%s: node %d attrs differ", what, i);
        if (x->trace.n != y->trace.n) fail_msg("%s: node %d trace differs", what, i);
        for (int k = 0; k < x->nout; k++) {
            if (strcmp(x->outputs[k]->id, y->outputs[k]->id) ||
                !tg_type_equal(&x->outputs[k]->type, &y->outputs[k]->type))
                fail_msg("%s: node %d output %d differs", what, i, k);
        }
        for (int k = 0; k < x->nin; k++) {
            const tg_var *u = x->inputs[k], *v = y->inputs[k];
            if (!tg_type_equal(&u->type, &v->type) || u->kind != v->kind)
                fail_msg("%s: node %d input %d differs", what, i, k);
            if (u->value && !tg_array_equal(u->value, v->value))
                fail_msg("%s: node %d input %d value differs", what, i, k);
            if (!u->inline_const && strcmp(u->id, v->id))
                fail_msg("%s: node %d input %d: '%s' then '%s'", what, i, k, u->id, v->id);
        }
    }
    if (a->nfuncs != b->nfuncs) fail_msg("%s: functions differ", what);
    for (int i = 0; i < a->nfuncs; i++)
        if (strcmp(a->funcs[i].name, b->funcs[i].name) || a->funcs[i].nin != b->funcs[i].nin ||
            a->funcs[i].nout != b->funcs[i].nout || a->funcs[i].nupd != b->funcs[i].nupd)
            fail_msg("%s: function %d differs", what, i);
    if ((a->meta || b->meta) && !json_object_equal(a->meta, b->meta)) fail_msg("%s: meta differs", what);
    for (int i = 0; i < a->nvars; i++) {
        const tg_var *u = a->vars[i];
        if (u->inline_const) continue;
        const tg_var *v = tg_graph_find(b, u->id);
        if (!v) fail_msg("%s: '%s' lost", what, u->id);
        if (u->kind == TG_VAR_SHARED && !tg_array_equal(u->shared->value, v->shared->value))
            fail_msg("%s: shared '%s' differs", what, u->id);
        if (u->kind == TG_VAR_CONSTANT && !tg_array_equal(u->value, v->value))
            fail_msg("%s: constant '%s' differs", what, u->id);
    }
}

static void round_trip(const char *path) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *a = tg_graph_load(path, ctx);
    if (!a) fail_msg("%s: %s", path, tg_ctx_message(ctx));
    char *s1 = tg_graph_to_string(a, ctx);
    assert_non_null(s1);
    tg_graph *b = tg_graph_load_string(s1, strlen(s1), a->dir, "saved", ctx);
    if (!b) fail_msg("%s: the saved form does not load: %s", path, tg_ctx_message(ctx));
    assert_same_graph(a, b, path);
    char *s2 = tg_graph_to_string(b, ctx);
    if (strcmp(s1, s2)) fail_msg("%s: saving the reloaded graph gives other text", path);
    tg_string_free(s1);
    tg_string_free(s2);
    tg_graph_free(a);
    tg_graph_free(b);
    tg_ctx_free(ctx);
}

static void test_round_trips(void **state) {
    (void)state;
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/ops", TG_TEST_DATA);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        round_trip(path);
        n++;
    }
    closedir(d);
    snprintf(path, sizeof path, "%s/examples/logreg.json", TG_SOURCE_DIR);
    round_trip(path);
    printf("  %d graphs round-tripped\n", n + 1);
    assert_true(n > 50);
}

/* Saving is atomic: a failed save leaves the previous file as it was. */
static void test_save_atomic(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\","
        "\"shape\":[]}}],\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}");
    char path[] = "/tmp/tg_save_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "previous", 8), 8);
    close(fd);
    tg_ctx *ctx = tg_ctx_new();
    /* A save into a folder that does not exist fails... */
    assert_int_not_equal(tg_graph_save(g, "/nonexistent-dir/g.json", ctx), 0);
    assert_non_null(strstr(tg_ctx_message(ctx), "/nonexistent-dir/g.json"));
    /* ...and a save under an allocator that fails leaves the old file. */
    assert_int_equal(tg_graph_save(g, path, ctx), 0);
    tg_graph *back = tg_graph_load(path, ctx);
    assert_non_null(back);
    tg_graph_free(back);
    unlink(path);
    tg_ctx_free(ctx);
    tg_graph_free(g);
}

/* Allocation failures: fail the k-th allocation for every k until the
 * whole load-compile-call succeeds. */
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

static void test_allocation_failures(void **state) {
    (void)state;
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null, 3]}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]},\"shared\":{\"data\":[1,2,3]}}],"
        "\"nodes\":[{\"op\":\"dot\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"xw\"],\"trace\":[{\"file\":\"m.py\",\"line\":1}]},"
        "{\"op\":\"tanh\",\"inputs\":[\"xw\"],\"outputs\":[\"h\"]},"
        "{\"op\":\"sum\",\"inputs\":[\"h\"],\"outputs\":[\"c\"],\"attrs\":{\"axis\":0}},"
        "{\"op\":\"mul\",\"inputs\":[\"w\",{\"value\":0.5}],\"outputs\":[\"w2\"]}],"
        "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"c\"],\"updates\":{\"w\":\"w2\"}}},"
        "\"meta\":{\"k\":[1,2]}}";
    int64_t shape[2] = {2, 3};
    double xs[6] = {1, 0, 0, 0, 1, 0};
    bool done = false;
    long k;
    for (k = 0; k < 100000 && !done; k++) {
        tg_set_allocator(failing_realloc, NULL);
        alloc_budget = k;
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = ctx ? tg_graph_load_string(json, strlen(json), NULL, "t", ctx) : NULL;
        tg_function *f = g ? tg_function_compile(g, 0, NULL, ctx) : NULL;
        tg_array *x = f ? tg_array_new_from(TG_FLOAT64, 2, shape, xs) : NULL, *out = NULL;
        int rc = x ? tg_function_call(f, &x, &out, ctx) : -1;
        if (rc == 0) {
            done = true;
            alloc_budget = -1;
            double want = tanh(1.0) + tanh(2.0);
            assert_true(fabs(tg_array_get_flat(out, 0) - want) < 1e-12);
        }
        tg_array_free(out);
        tg_array_free(x);
        tg_function_free(f);
        tg_graph_free(g);
        tg_ctx_free(ctx);
        tg_set_allocator(NULL, NULL);
    }
    printf("  %ld allocation points failed one by one\n", k - 1);
    assert_true(done);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_save_atomic),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
