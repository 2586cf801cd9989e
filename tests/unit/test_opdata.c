/* The data-driven op tests: every JSON file in tests/data/ops is a graph whose
 * meta.tests lists calls with inputs and the outputs NumPy computed (see
 * tests/data/gen/). One cmocka test per file. TG_OPDATA_FILTER=substring
 * runs only the matching files. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "io/io.h"
#include "testutil.h"

typedef struct file_case {
    char path[1024];
    char name[256];
} file_case;

static double num_or(json_object *o, const char *key, double def) {
    json_object *v;
    if (o && json_object_object_get_ex(o, key, &v)) return json_object_get_double(v);
    return def;
}

/* Runs every case of one file; returns the number of failures, printing
 * each. */
static int run_file(const char *path) {
    int failures = 0;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(path, ctx);
    if (!g) {
        printf("  %s: load failed: %s\n", path, tg_ctx_message(ctx));
        tg_ctx_free(ctx);
        return 1;
    }
    json_object *tests = NULL;
    if (!g->meta || !json_object_object_get_ex(g->meta, "tests", &tests) ||
        !json_object_is_type(tests, json_type_array)) {
        printf("  %s: no meta.tests array\n", path);
        tg_graph_free(g);
        tg_ctx_free(ctx);
        return 1;
    }
    size_t ncases = json_object_array_length(tests);
    /* Each case runs as written (preset none: the op's own kernel) and
     * optimized (fast_run: rewrites, fusion into composites, in place). */
    static const char *const presets[] = {"none", "fast_run"};
    for (size_t pc = 0; pc < 2 * ncases; pc++) {
        size_t c = pc / 2;
        tg_compile_options copts = {.preset = presets[pc % 2]};
        json_object *tc = json_object_array_get_idx(tests, c);
        json_object *jf = NULL, *jin = NULL, *jout = NULL, *jerr = NULL;
        json_object_object_get_ex(tc, "function", &jf);
        json_object_object_get_ex(tc, "inputs", &jin);
        json_object_object_get_ex(tc, "outputs", &jout);
        json_object_object_get_ex(tc, "error", &jerr);
        double rtol = num_or(tc, "rtol", -1), atol = num_or(tc, "atol", -1);
        tg_ctx_clear(ctx);
        int fi = tg_graph_function_find(g, jf ? json_object_get_string(jf) : NULL, ctx);
        tg_function *f = fi >= 0 ? tg_function_compile(g, fi, &copts, ctx) : NULL;
        if (!f) {
            printf("  %s: case %zu (%s): compile failed: %s\n", path, c, copts.preset,
                   tg_ctx_message(ctx));
            failures++;
            continue;
        }
        int nin = tg_function_input_count(f), nout = tg_function_output_count(f);
        tg_array **ins = calloc((size_t)nin + 1, sizeof *ins);
        tg_array **outs = calloc((size_t)nout + 1, sizeof *outs);
        bool ok = true;
        for (int i = 0; i < nin && ok; i++) {
            const char *id = tg_function_input_id(f, i);
            json_object *v = NULL;
            if (!jin || !json_object_object_get_ex(jin, id, &v)) {
                printf("  %s: case %zu: no value for input '%s'\n", path, c, id);
                ok = false;
                break;
            }
            char where[300];
            snprintf(where, sizeof where, "meta.tests[%zu].inputs.%s", c, id);
            ins[i] = tg_value_from_json(v, tg_function_input_dtype(f, i), -1,
                                        NULL, NULL, where, NULL, ctx);
            if (!ins[i]) {
                printf("  %s: case %zu: %s\n", path, c, tg_ctx_message(ctx));
                ok = false;
            }
        }
        if (ok) {
            int rc = tg_function_call(f, ins, outs, ctx);
            if (jerr) {
                const char *want = json_object_get_string(jerr);
                if (rc == 0) {
                    printf("  %s: case %zu: expected an error containing '%s', "
                           "but the call succeeded\n",
                           path, c, want);
                    ok = false;
                } else if (!strstr(tg_ctx_message(ctx), want)) {
                    printf("  %s: case %zu: expected an error containing '%s', "
                           "got: %s\n",
                           path, c, want, tg_ctx_message(ctx));
                    ok = false;
                }
            } else if (rc) {
                printf("  %s: case %zu: call failed: %s\n", path, c, tg_ctx_message(ctx));
                ok = false;
            } else if (jout) {
                json_object_object_foreach(jout, oid, oval) {
                    int k = -1;
                    for (int j = 0; j < nout; j++)
                        if (strcmp(tg_function_output_id(f, j), oid) == 0) k = j;
                    if (k < 0) {
                        printf("  %s: case %zu: '%s' is not an output\n", path, c, oid);
                        ok = false;
                        continue;
                    }
                    char where[300];
                    snprintf(where, sizeof where, "meta.tests[%zu].outputs.%s", c, oid);
                    tg_array *want = tg_value_from_json(oval, TG_DTYPE_INVALID, -1,
                                                        NULL, NULL, where, NULL, ctx);
                    if (!want) {
                        printf("  %s: case %zu: %s\n", path, c, tg_ctx_message(ctx));
                        ok = false;
                        continue;
                    }
                    char msg[4096];
                    if (!tu_arrays_close(outs[k], want, rtol, atol, msg, sizeof msg)) {
                        printf("  %s: case %zu: output '%s': %s\n", path, c, oid, msg);
                        ok = false;
                    }
                    tg_array_free(want);
                }
            }
        }
        if (!ok) failures++;
        for (int i = 0; i < nin; i++) tg_array_free(ins[i]);
        for (int i = 0; i < nout; i++) tg_array_free(outs[i]);
        free(ins);
        free(outs);
        tg_function_free(f);
    }
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return failures;
}

static void test_file(void **state) {
    const file_case *fc = *state;
    int failures = run_file(fc->path);
    if (failures) fail_msg("%s: %d case(s) failed", fc->name, failures);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const file_case *)a)->name, ((const file_case *)b)->name);
}

int main(int argc, char **argv) {
    const char *dir = TG_TEST_DATA "/ops";
    const char *filter = getenv("TG_OPDATA_FILTER");
    if (argc > 1) filter = argv[1];
    DIR *d = opendir(dir);
    if (!d) {
        printf("no test data folder %s\n", dir);
        return 1;
    }
    size_t n = 0, cap = 64;
    file_case *files = calloc(cap, sizeof *files);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        if (filter && !strstr(e->d_name, filter)) continue;
        if (n == cap) files = realloc(files, (cap *= 2) * sizeof *files);
        snprintf(files[n].path, sizeof files[n].path, "%s/%s", dir, e->d_name);
        snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(files, n, sizeof *files, cmp_name);
    struct CMUnitTest *tests = calloc(n + 1, sizeof *tests);
    for (size_t i = 0; i < n; i++) {
        tests[i].name = files[i].name;
        tests[i].test_func = test_file;
        tests[i].initial_state = &files[i];
    }
    int rc = n ? _cmocka_run_group_tests("opdata", tests, n, NULL, NULL) : 0;
    if (!n) printf("no op data files matched\n");
    free(tests);
    free(files);
    return rc;
}
