/* The loader: one test per error class (tests/data/load_errors/EXPECT),
 * weak scalars, values, base64, ids and types, the implicit main,
 * functions, inline constant ids, file-level checks, npy values, and
 * allocation failures injected at every allocation of a load, compile and
 * call (nothing may crash or leak: the sanitizer build checks). Saving is
 * tested in test_save.c. */
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

#define HEAD "{\"format\":\"tg-graph\",\"version\":1,"

static tg_var *var(const tg_graph *g, const char *id) {
    tg_var *v = tg_graph_find(g, id);
    if (!v) fail_msg("no variable '%s'", id);
    return v;
}

/* Weak scalars (FORMAT.md s5): a bare number or boolean, or a scalar
 * value without dtype, takes the dtype of the array it meets; with a
 * dtype it is strong. The loader marks them; the ops resolve them. */
static void test_weak_scalars(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[2]}},"
        "{\"id\":\"i\",\"type\":{\"dtype\":\"int16\",\"shape\":[2]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":2}],\"outputs\":[\"a\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",{\"value\":{\"dtype\":\"int64\",\"data\":2}}],\"outputs\":[\"b\"]},"
        "{\"op\":\"add\",\"inputs\":[\"i\",{\"value\":{\"shape\":[],\"data\":-7}}],\"outputs\":[\"c\"]},"
        "{\"op\":\"add\",\"inputs\":[\"i\",{\"value\":0.5}],\"outputs\":[\"d\"]},"
        "{\"op\":\"add\",\"inputs\":[{\"value\":1},{\"value\":2.5}],\"outputs\":[\"e\"]},"
        "{\"op\":\"logical_or\",\"inputs\":[{\"value\":true},{\"value\":false}],\"outputs\":[\"f\"]},"
        "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":{\"data\":\"-inf\"}}],\"outputs\":[\"h\"]}]}");
    struct { const char *out; tg_dtype dt; bool weak1; tg_dtype in1; } want[] = {
        {"a", TG_FLOAT32, true, TG_FLOAT32},  /* int meets float32: float32 */
        {"b", TG_FLOAT64, false, TG_INT64},   /* strong int64: NumPy promotion */
        {"c", TG_INT16, true, TG_INT16},      /* int meets int16 */
        {"d", TG_FLOAT64, true, TG_FLOAT64},  /* float meets an integer array */
        {"e", TG_FLOAT64, true, TG_FLOAT64},  /* alone: int64 and float64 */
        {"f", TG_BOOL, true, TG_BOOL},
        {"h", TG_FLOAT32, true, TG_FLOAT32},
    };
    for (size_t k = 0; k < TG_ARRAY_LEN(want); k++) {
        tg_var *o = var(g, want[k].out);
        tg_var *c = o->owner->inputs[1];
        if (o->type.dtype != want[k].dt || c->weak_in_file != want[k].weak1 ||
            c->type.dtype != want[k].in1 || c->value->dtype != want[k].in1 || !c->inline_const)
            fail_msg("%s: got %s from a %s constant (weak %d)", want[k].out, tg_dtype_name(o->type.dtype),
                     tg_dtype_name(c->type.dtype), c->weak_in_file);
    }
    /* the values are converted, not reinterpreted */
    assert_true(*(const float *)tg_array_data(var(g, "a")->owner->inputs[1]->value) == 2.0f);
    assert_int_equal(*(const int16_t *)tg_array_data(var(g, "c")->owner->inputs[1]->value), -7);
    assert_true(isinf(*(const float *)tg_array_data(var(g, "h")->owner->inputs[1]->value)));
    assert_int_equal(var(g, "e")->owner->inputs[0]->type.dtype, TG_FLOAT64);
    tg_graph_free(g);
}

/* Values (FORMAT.md s5) read straight through tg_value_from_json. */
static tg_array *value(const char *json, tg_dtype dt, int ndim, const int64_t *shape, bool *weak,
                       tg_ctx *ctx) {
    json_object *j = json_tokener_parse(json);
    if (!j) fail_msg("bad test JSON: %s", json);
    tg_array *a = tg_value_from_json(j, dt, ndim, shape, NULL, "v", weak, ctx);
    json_object_put(j);
    return a;
}

static void check_value(const char *json, tg_dtype dt, int ndim, const int64_t *shape, const char *want_dt,
                         int want_nd, const int64_t *want_shape, const double *want) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = value(json, dt, ndim, shape, NULL, ctx);
    if (!a) fail_msg("%s: %s", json, tg_ctx_message(ctx));
    if (strcmp(tg_dtype_name(a->dtype), want_dt) || a->ndim != want_nd)
        fail_msg("%s: got %s with %d dimensions", json, tg_dtype_name(a->dtype), a->ndim);
    int64_t n = 1;
    for (int i = 0; i < want_nd; i++) {
        assert_int_equal(a->shape[i], want_shape[i]);
        n *= want_shape[i];
    }
    for (int64_t i = 0; i < n; i++) {
        double got = tg_array_get_flat(a, i);
        if (!(got == want[i] || (isnan(got) && isnan(want[i]))))
            fail_msg("%s: element %lld is %g, want %g", json, (long long)i, got, want[i]);
    }
    tg_array_free(a);
    tg_ctx_free(ctx);
}

static void check_value_error(const char *json, tg_dtype dt, int ndim, const int64_t *shape, int status,
                               const char *sub) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = value(json, dt, ndim, shape, NULL, ctx);
    if (a) fail_msg("%s: accepted", json);
    if (tg_ctx_status(ctx) != status || !strstr(tg_ctx_message(ctx), sub))
        fail_msg("%s: got %s '%s', want %s '%s'", json, tg_status_str(tg_ctx_status(ctx)), tg_ctx_message(ctx),
                 tg_status_str(status), sub);
    tg_ctx_free(ctx);
}

static void test_values(void **state) {
    (void)state;
    const int64_t s23[2] = {2, 3}, s_3[2] = {-1, 3}, s3[1] = {3}, s0[1] = {0};
    const double seq[6] = {1, 2, 3, 4, 5, 6}, nf[3] = {NAN, INFINITY, -INFINITY};
    /* nested and flat C-order data, shape from the type or the value */
    check_value("{\"data\":[[1,2,3],[4,5,6]]}", TG_FLOAT64, 2, s23, "float64", 2, s23, seq);
    check_value("{\"data\":[1,2,3,4,5,6]}", TG_INT8, 2, s23, "int8", 2, s23, seq);
    check_value("{\"shape\":[2,3],\"data\":[1,2,3,4,5,6]}", TG_UINT16, 2, s_3, "uint16", 2, s23, seq);
    check_value("{\"data\":[[1,2,3],[4,5,6]]}", TG_FLOAT32, 2, s_3, "float32", 2, s23, seq);
    check_value("{\"dtype\":\"int32\",\"shape\":[2,3],\"data\":[[1,2,3],[4,5,6]]}", TG_DTYPE_INVALID, -1, NULL,
                 "int32", 2, s23, seq);
    check_value("{\"data\":[\"nan\",\"inf\",\"-inf\"]}", TG_FLOAT16, 1, s3, "float16", 1, s3, nf);
    check_value("{\"data\":[]}", TG_FLOAT64, 1, s0, "float64", 1, s0, seq);
    check_value("{\"shape\":[0,3],\"data\":[]}", TG_FLOAT64, 2, s_3, "float64", 2, (int64_t[]){0, 3}, seq);
    /* bools from true/false and 0/1; whole floats as integers (JSON Schema's integer) */
    check_value("{\"data\":[true,0,1]}", TG_BOOL, 1, s3, "bool", 1, s3, (double[]){1, 0, 1});
    check_value("{\"shape\":[3.0],\"data\":[1.0,2e0,3]}", TG_INT64, -1, NULL, "int64", 1, s3, seq);
    /* a bare scalar, and the edges of the integer dtypes */
    check_value("2.5", TG_FLOAT32, 0, NULL, "float32", 0, NULL, (double[]){2.5});
    check_value("{\"data\":[-128,127,255]}", TG_INT16, 1, s3, "int16", 1, s3, (double[]){-128, 127, 255});
    check_value("{\"dtype\":\"uint64\",\"shape\":[],\"data\":18446744073709551615}", TG_DTYPE_INVALID, -1, NULL,
                 "uint64", 0, NULL, (double[]){18446744073709551615.0});

    /* weak: a scalar without dtype and without a type */
    tg_ctx *ctx = tg_ctx_new();
    bool weak = false;
    tg_array *a = value("7", TG_DTYPE_INVALID, -1, NULL, &weak, ctx);
    assert_non_null(a);
    assert_true(weak && a->dtype == TG_INT64 && a->ndim == 0);
    tg_array_free(a);
    a = value("{\"dtype\":\"int8\",\"data\":7}", TG_DTYPE_INVALID, -1, NULL, &weak, ctx);
    assert_true(a && !weak && a->dtype == TG_INT8);
    tg_array_free(a);
    a = value("false", TG_DTYPE_INVALID, -1, NULL, &weak, ctx);
    assert_true(a && weak && a->dtype == TG_BOOL);
    tg_array_free(a);
    tg_ctx_free(ctx);

    /* what is refused, and how */
    check_value_error("{\"data\":[[1,2],[3,4,5]]}", TG_FLOAT64, 2, (int64_t[]){2, 2}, TG_ELOAD, "v.data: does not match");
    check_value_error("{\"data\":[1,2]}", TG_FLOAT64, 1, s3, TG_ELOAD, "v.data: does not match");
    check_value_error("{\"data\":[1,2,3,4]}", TG_FLOAT64, 1, s3, TG_ELOAD, "v.data");
    check_value_error("{\"data\":[1,2,3,4,5]}", TG_FLOAT64, 2, s23, TG_ELOAD, "v.data: 5 elements for a shape of 6");
    check_value_error("{\"data\":[1,2,3,4,5,6,7]}", TG_FLOAT64, 2, s23, TG_ELOAD, "7 elements for a shape of 6 (2, 3)");
    check_value_error("{\"data\":[[[1]]]}", TG_FLOAT64, 2, (int64_t[]){1, 1}, TG_ELOAD, "nested deeper");
    check_value_error("{\"data\":5}", TG_FLOAT64, 1, s3, TG_ESHAPE, "one number for a shape of 3");
    check_value_error("{\"data\":[256]}", TG_UINT8, 1, (int64_t[]){1}, TG_ELOAD, "256 does not fit uint8");
    check_value_error("{\"data\":[-1]}", TG_UINT64, 1, (int64_t[]){1}, TG_ELOAD, "-1 does not fit uint64");
    check_value_error("{\"data\":18446744073709551615}", TG_INT64, 0, NULL, TG_ELOAD, "does not fit int64");
    check_value_error("{\"data\":[2]}", TG_BOOL, 1, (int64_t[]){1}, TG_ELOAD, "not a bool");
    check_value_error("{\"data\":1.5}", TG_INT32, 0, NULL, TG_ELOAD, "1.5 is not a valid int32");
    check_value_error("{\"data\":\"nan\"}", TG_INT32, 0, NULL, TG_ELOAD, "nan in a int32 value");
    check_value_error("{\"data\":\"NaN\"}", TG_FLOAT32, 0, NULL, TG_ELOAD, "unexpected string 'NaN'");
    check_value_error("{\"data\":null}", TG_FLOAT32, 0, NULL, TG_ELOAD, "expected a number");
    check_value_error("{\"data\":1,\"npy\":\"a.npy\"}", TG_FLOAT32, 0, NULL, TG_ELOAD, "exactly one of");
    check_value_error("{}", TG_FLOAT32, 0, NULL, TG_ELOAD, "exactly one of");
    check_value_error("{\"data\":1,\"npy\":null}", TG_FLOAT32, 0, NULL, TG_ELOAD, "exactly one of");
    check_value_error("{\"dtype\":null,\"data\":1}", TG_FLOAT32, 0, NULL, TG_ELOAD, "v.dtype: unknown dtype");
    check_value_error("{\"shape\":null,\"data\":1}", TG_FLOAT32, 0, NULL, TG_ELOAD, "v.shape: expected an array");
    check_value_error("{\"data\":1,\"units\":\"m\"}", TG_FLOAT32, 0, NULL, TG_ELOAD, "v.units: unknown key");
    check_value_error("\"1\"", TG_FLOAT32, 0, NULL, TG_ELOAD, "expected a value");
    check_value_error("{\"dtype\":\"float32\",\"data\":1}", TG_FLOAT64, 0, NULL, TG_ETYPE, "float32, but the variable is float64");
    check_value_error("{\"shape\":[2],\"data\":[1,2]}", TG_FLOAT64, 1, s3, TG_ESHAPE, "(2,), but the variable's type says (3,)");
    check_value_error("{\"data\":[1,2]}", TG_FLOAT64, 2, s_3, TG_ESHAPE, "(2,), but the variable's type says (?, 3)");
    check_value_error("{\"dtype\":\"float32\",\"data\":[1]}", TG_DTYPE_INVALID, -1, NULL, TG_ELOAD,
                       "needs dtype and shape unless its data is a scalar");
    check_value_error("{\"data\":[1]}", TG_DTYPE_INVALID, -1, NULL, TG_ELOAD, "needs dtype and shape");
    check_value_error("{\"shape\":[-1],\"data\":[]}", TG_FLOAT64, -1, NULL, TG_ELOAD, "v.shape[0]: expected a non-negative");
    check_value_error("{\"npy\":\"w.npy\"}", TG_FLOAT64, 0, NULL, TG_ELOAD, "npy values need a graph loaded from a file");
    /* sizes come from the file: nothing is allocated before the data backs them */
    check_value_error("{\"shape\":[4611686018427387904,4],\"data\":[]}", TG_FLOAT64, -1, NULL, TG_ELOAD,
                       "larger than memory");
    check_value_error("{\"shape\":[1048576,1048576],\"data\":[[1]]}", TG_UINT8, -1, NULL, TG_ELOAD,
                       "does not match the shape");
    check_value_error("{\"shape\":[1099511627776],\"data\":[]}", TG_UINT8, -1, NULL, TG_ELOAD, "does not match");
    check_value_error("{\"shape\":[1099511627776],\"base64\":\"AAAA\"}", TG_UINT8, -1, NULL, TG_ELOAD,
                       "4 characters do not encode the 1099511627776 bytes");
    /* base64: the exact length, real characters, padding only at the end */
    check_value("{\"shape\":[2],\"base64\":\"AAAAAAAA8D8AAAAAAAAAQA==\"}", TG_FLOAT64, -1, NULL, "float64", 1,
                 (int64_t[]){2}, (double[]){1, 2});
    check_value("{\"shape\":[3],\"base64\":\"AQAB\"}", TG_BOOL, -1, NULL, "bool", 1, s3, (double[]){1, 0, 1});
    check_value_error("{\"shape\":[3],\"base64\":\"AQAC\"}", TG_BOOL, -1, NULL, TG_ELOAD, "other than 0 or 1");
    check_value_error("{\"shape\":[2],\"base64\":\"AAAAAAAA8D8AAAAAAAAAQA=\"}", TG_FLOAT64, -1, NULL, TG_ELOAD,
                       "do not encode the 16 bytes");
    check_value_error("{\"shape\":[1],\"base64\":\"A=A=\"}", TG_UINT8, -1, NULL, TG_ELOAD, "do not encode");
    check_value_error("{\"shape\":[3],\"base64\":\"A A=\"}", TG_UINT8, -1, NULL, TG_ELOAD, "do not encode");
    check_value_error("{\"shape\":[3],\"base64\":\"AA-A\"}", TG_UINT8, -1, NULL, TG_ELOAD, "not valid base64");
    check_value_error("{\"shape\":[3],\"base64\":5}", TG_UINT8, -1, NULL, TG_ELOAD, "expected a string");
}

/* RFC 4648's test vectors, and decoding what encoding wrote. */
static void test_base64(void **state) {
    (void)state;
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *e = tg_base64_encode(plain[i], strlen(plain[i]));
        assert_string_equal(e, enc[i]);
        size_t n = 99;
        char *d = tg_base64_decode(e, strlen(e), &n);
        assert_non_null(d);
        assert_int_equal(n, strlen(plain[i]));
        assert_memory_equal(d, plain[i], n);
        tg_free(d);
        tg_free(e);
    }
    unsigned char all[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)(255 - i);
    char *e = tg_base64_encode(all, 256);
    size_t n;
    unsigned char *d = tg_base64_decode(e, strlen(e), &n);
    assert_int_equal(n, 256);
    assert_memory_equal(d, all, 256);
    tg_free(d);
    tg_free(e);
    const char *bad[] = {"Zg=", "Z===", "Zg=a", "=Zg=", "Zm9v!A==", "Zm 9"};
    for (size_t i = 0; i < TG_ARRAY_LEN(bad); i++)
        if (tg_base64_decode(bad[i], strlen(bad[i]), &n)) fail_msg("'%s' decoded", bad[i]);
}

static void test_ids_and_types(void **state) {
    (void)state;
    const char *good[] = {"x", "a:b.c-d_e", "0", ":", "_", "Z9", NULL};
    const char *bad[] = {"", ".x", "-x", "a/b", "a b", "é", "a\n", NULL};
    for (int i = 0; good[i]; i++) assert_true(tg_id_valid(good[i]));
    for (int i = 0; bad[i]; i++)
        if (tg_id_valid(bad[i])) fail_msg("'%s' accepted as an id", bad[i]);
    char id[130];
    memset(id, 'a', 129);
    id[128] = 0;
    assert_true(tg_id_valid(id));
    id[128] = 'a';
    id[129] = 0;
    assert_false(tg_id_valid(id));

    tg_ctx *ctx = tg_ctx_new();
    tg_type t;
    json_object *j = json_tokener_parse("{\"dtype\":\"uint32\",\"broadcastable\":[true,false,true]}");
    assert_int_equal(tg_type_from_json(j, &t, "t", ctx), 0);
    assert_int_equal(t.dtype, TG_UINT32);
    assert_int_equal(t.ndim, 3);
    assert_true(t.shape[0] == 1 && t.shape[1] == -1 && t.shape[2] == 1);
    json_object *back = tg_type_to_json(&t);
    assert_string_equal(json_object_to_json_string_ext(back, JSON_C_TO_STRING_PLAIN),
                        "{\"dtype\":\"uint32\",\"shape\":[1,null,1]}");
    json_object_put(back);
    json_object_put(j);
    const char *bad_types[][2] = {
        {"{\"dtype\":\"float32\"}", "t: missing shape"},
        {"{\"dtype\":\"float32\",\"shape\":[],\"broadcastable\":[]}", "not both"},
        {"{\"dtype\":\"float32\",\"shape\":[1.5]}", "t.shape[0]: expected a non-negative integer or null"},
        {"{\"dtype\":\"float32\",\"shape\":[\"3\"]}", "t.shape[0]"},
        {"{\"dtype\":\"float32\",\"broadcastable\":[1]}", "t.broadcastable[0]: expected true or false"},
        {"{\"dtype\":\"float32\",\"shape\":3}", "t.shape: expected an array"},
        {"{\"dtype\":\"float32\",\"shape\":[],\"ndim\":0}", "t.ndim: unknown key"},
        {"{\"shape\":[]}", "t.dtype: expected a dtype name"},
        {"[]", "t: expected an object"},
    };
    for (size_t i = 0; i < TG_ARRAY_LEN(bad_types); i++) {
        j = json_tokener_parse(bad_types[i][0]);
        t.ndim = 77;
        if (tg_type_from_json(j, &t, "t", ctx) == 0 || !strstr(tg_ctx_message(ctx), bad_types[i][1]))
            fail_msg("%s: '%s'", bad_types[i][0], tg_ctx_message(ctx));
        assert_int_equal(t.ndim, 77); /* untouched on error */
        json_object_put(j);
    }
    tg_ctx_free(ctx);
}

/* The implicit `main`: free inputs in declaration order; the node outputs
 * nothing consumes, in the order of the nodes in the file (not the sorted
 * order). */
static void test_implicit_main(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        HEAD "\"variables\":[{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"k\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},\"constant\":{\"data\":1}},"
        "{\"id\":\"s\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},\"shared\":{\"data\":1}},"
        "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"mid\",\"name\":\"declared output\"}],"
        "\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"mid\"],\"outputs\":[\"z\"]},"
        "{\"op\":\"add\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"mid\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"k\",\"s\"],\"outputs\":[\"y\"]}]}");
    assert_int_equal(g->nfuncs, 1);
    const tg_fdecl *f = &g->funcs[0];
    assert_string_equal(f->name, "main");
    assert_false(f->json_inputs_given);
    assert_int_equal(f->nin, 2);
    assert_string_equal(f->inputs[0]->id, "b");
    assert_string_equal(f->inputs[1]->id, "a");
    assert_int_equal(f->nout, 2);
    assert_string_equal(f->outputs[0]->id, "z");
    assert_string_equal(f->outputs[1]->id, "y");
    /* sorted: the producer of mid comes first */
    assert_string_equal(g->nodes[0]->outputs[0]->id, "mid");
    assert_string_equal(var(g, "mid")->name, "declared output");
    assert_int_equal(var(g, "mid")->kind, TG_VAR_RESULT);
    const int i = tg_graph_function_find(g, NULL, NULL);
    assert_int_equal(i, 0);
    tg_graph_free(g);

    /* A grad node's outputs, all of them (the node expands into nodes of
     * its own: only the last gradient was an output once), between the
     * outputs of the nodes around it. d/da (a*b + a) = b + 1, d/db = a. */
    g = tu_load(HEAD "\"variables\":[{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"a\"],\"outputs\":[\"first\"]},"
                "{\"op\":\"mul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"m\"]},"
                "{\"op\":\"add\",\"inputs\":[\"m\",\"a\"],\"outputs\":[\"c\"]},"
                "{\"op\":\"grad\",\"inputs\":[\"c\",\"a\",\"b\"],\"outputs\":[\"ga\",\"gb\"]},"
                "{\"op\":\"exp\",\"inputs\":[\"b\"],\"outputs\":[\"last\"]}]}");
    f = &g->funcs[0];
    assert_int_equal(f->nout, 4);
    assert_string_equal(f->outputs[0]->id, "first");
    assert_string_equal(f->outputs[1]->id, "ga");
    assert_string_equal(f->outputs[2]->id, "gb");
    assert_string_equal(f->outputs[3]->id, "last");
    tg_array *in[2] = {tg_array_new_scalar(TG_FLOAT64, 3), tg_array_new_scalar(TG_FLOAT64, -2)};
    tg_array *out[4] = {0};
    tu_call_preset(g, NULL, "fast_run", in, out);
    assert_true(tg_array_get_flat(out[0], 0) == -3);
    assert_true(tg_array_get_flat(out[1], 0) == -1);
    assert_true(tg_array_get_flat(out[2], 0) == 3);
    assert_true(tg_array_get_flat(out[3], 0) == exp(-2.0));
    for (int k = 0; k < 4; k++) tg_array_free(out[k]);
    tg_array_free(in[0]);
    tg_array_free(in[1]);
    tg_graph_free(g);
}

/* Functions compile from intermediates (they become arguments); an
 * update's value may be any variable of the shared dtype and a
 * compatible shape, its static shape refining nothing. */
static void test_functions(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[null]}},"
        "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]},\"shared\":{\"data\":[1,2,3]}}],"
        "\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"e\"]},"
        "{\"op\":\"neg\",\"inputs\":[\"e\"],\"outputs\":[\"n\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"w\",{\"value\":2}],\"outputs\":[\"w2\"]}],"
        "\"functions\":{\"from_e\":{\"inputs\":[\"e\"],\"outputs\":[\"n\"]},"
        "\"step\":{\"inputs\":[],\"outputs\":[],\"updates\":{\"w\":\"w2\"}},"
        "\"swap\":{\"inputs\":[\"x\"],\"outputs\":[],\"updates\":{\"w\":\"x\"}}}}");
    assert_int_equal(g->nfuncs, 3);
    int k = tg_graph_function_find(g, "from_e", NULL);
    double e[2] = {1.5, -2};
    int64_t two = 2;
    tg_array *in = tg_array_new_from(TG_FLOAT64, 1, &two, e), *out = NULL;
    tu_call(g, "from_e", &in, &out);
    assert_true(tg_array_get_flat(out, 0) == -1.5 && tg_array_get_flat(out, 1) == 2);
    assert_int_equal(k, 0);
    tg_array_free(in);
    tg_array_free(out);
    tg_graph_free(g);

    char msg[TG_CTX_MSG_MAX];
    /* a function input listed twice, a shared variable as an input */
    assert_int_equal(tu_load_fail(HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                                       "\"nodes\":[],\"functions\":{\"f\":{\"inputs\":[\"x\",\"x\"],\"outputs\":[]}}}",
                                  msg, sizeof msg),
                     TG_ELOAD);
    assert_non_null(strstr(msg, "test: functions.f.inputs[1]: 'x' is listed twice"));
    assert_int_equal(tu_load_fail(HEAD "\"variables\":[{\"id\":\"s\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]},"
                                       "\"shared\":{\"data\":[1,2]}},{\"id\":\"v\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
                                       "\"nodes\":[],\"functions\":{\"f\":{\"inputs\":[\"v\"],\"outputs\":[],"
                                       "\"updates\":{\"s\":\"v\"}}}}",
                                  msg, sizeof msg),
                     TG_ETYPE);
    assert_non_null(strstr(msg, "functions.f.updates.s: the new value 'v' is float64[3], but the shared variable is float64[2]"));
    /* an implicit main with a missing input names it */
    assert_int_equal(tu_load_fail(HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
                                       "{\"id\":\"y\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                                       "\"nodes\":[],\"functions\":{\"f\":{\"inputs\":[],\"outputs\":[\"x\"]}}}",
                                  msg, sizeof msg),
                     TG_EMISSING);
    assert_non_null(strstr(msg, "test: functions.f: "));
    assert_non_null(strstr(msg, "'x'"));
}

/* Functions of 100,000 inputs: the check that none is listed twice
 * scanned the inputs before each, quadratic (a function of 64,000
 * inputs took 7.7 s to check). Two functions list the same inputs (the
 * marks of the first are cleared for the second); a copy of the first
 * input at the end is named. */
static void test_many_inputs(void **state) {
    (void)state;
    const int n = 100000;
    for (int twice = 0; twice < 2; twice++) {
        size_t cap = (size_t)n * 96 + 1024, len = 0;
        char *buf = malloc(cap);
        assert_non_null(buf);
        len += (size_t)snprintf(buf + len, cap - len, HEAD "\"variables\":[");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(buf + len, cap - len, "%s{\"id\":\"x%d\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}",
                                    i ? "," : "", i);
        len += (size_t)snprintf(buf + len, cap - len, "],\"nodes\":[],\"functions\":{");
        for (int f = 0; f < 2; f++) {
            len += (size_t)snprintf(buf + len, cap - len, "%s\"f%d\":{\"inputs\":[", f ? "," : "", f);
            for (int i = 0; i < n; i++) len += (size_t)snprintf(buf + len, cap - len, "%s\"x%d\"", i ? "," : "", i);
            len += (size_t)snprintf(buf + len, cap - len, "%s],\"outputs\":[\"x%d\"]}", twice && f ? ",\"x0\"" : "",
                                    n - 1 - f);
        }
        snprintf(buf + len, cap - len, "}}");
        assert_true(len + 2 < cap);
        if (!twice) {
            tg_graph *g = tu_load(buf);
            assert_int_equal(g->nfuncs, 2);
            assert_int_equal(g->funcs[1].nin, n);
            tg_graph_free(g);
        } else {
            char msg[TG_CTX_MSG_MAX];
            assert_int_equal(tu_load_fail(buf, msg, sizeof msg), TG_ELOAD);
            if (!strstr(msg, "test: functions.f1.inputs[100000]: 'x0' is listed twice")) fail_msg("%s", msg);
        }
        free(buf);
    }
}

/* Ids made up for inline constants never clash with the file's, and the
 * file cannot name them. */
static void test_inline_ids(void **state) {
    (void)state;
    tg_graph *g = tu_load(
        HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"y:in1\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}},"
        "{\"id\":\"y:in1.1\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
        "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":1},{\"value\":2},\"y:in1\",\"y:in1.1\"],\"outputs\":[\"y\"]}]}");
    tg_node *n = var(g, "y")->owner;
    assert_true(n->inputs[1]->inline_const && n->inputs[2]->inline_const);
    assert_false(n->inputs[3]->inline_const);
    assert_string_not_equal(n->inputs[1]->id, "y:in1");
    assert_string_not_equal(n->inputs[1]->id, "y:in1.1");
    assert_string_not_equal(n->inputs[1]->id, n->inputs[2]->id);
    assert_ptr_equal(tg_graph_find(g, "y:in1"), n->inputs[3]);
    tg_graph_free(g);
}

/* The made-up ids and the JSON paths of messages, letter for letter:
 * "<first output's id, cut at 100>:in<k>", a numbered twin when taken;
 * node and input numbers of several digits. */
/* Inline scalars equal in dtype and bytes, once their node has taken
 * them (a weak scalar converted to its dtype), share one array (the
 * loader interns them, so that merge reads one value instead of
 * thousands); any difference keeps them apart: against an int64 x, 1 and
 * true (int64 1 both) against 1.0 (float64), 0.0 against -0.0, arrays;
 * and a hundred distinct scalars, more than the table's slots, keep
 * their own values. */
static void test_inline_scalars_shared(void **state) {
    (void)state;
    tg_str j = {0};
    tg_str_addf(&j, HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"int64\",\"shape\":[2]}}],"
                "\"nodes\":[");
    const char *lit[] = {"1", "1", "1.0", "0.0", "-0.0", "{\"data\":\"nan\"}", "{\"data\":\"nan\"}", "{\"data\":[1,2],\"dtype\":\"float64\",\"shape\":[2]}", "{\"data\":[1,2],\"dtype\":\"float64\",\"shape\":[2]}", "true", "true"};
    enum { NLIT = sizeof lit / sizeof lit[0], NDISTINCT = 100 };
    for (int i = 0; i < NLIT; i++)
        tg_str_addf(&j, "%s{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":%s}],\"outputs\":[\"l%d\"]}", i ? "," : "",
                    lit[i], i);
    for (int i = 0; i < 2 * NDISTINCT; i++)
        tg_str_addf(&j, ",{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":%d.5}],\"outputs\":[\"d%d\"]}",
                    i % NDISTINCT, i);
    tg_str_addf(&j, "]}");
    assert_false(j.oom);
    tg_graph *g = tu_load(j.s);
    tg_str_free(&j);
    const tg_array *v[NLIT];
    for (int i = 0; i < NLIT; i++) {
        char id[16];
        snprintf(id, sizeof id, "l%d", i);
        const tg_var *c = var(g, id)->owner->inputs[1];
        assert_true(c->kind == TG_VAR_CONSTANT && c->inline_const);
        v[i] = c->value;
    }
    assert_ptr_equal(v[0], v[1]);     /* 1, 1 */
    assert_ptr_not_equal(v[0], v[2]); /* 1 (int64), 1.0 */
    assert_int_equal(v[0]->dtype, TG_INT64);
    assert_int_equal(v[2]->dtype, TG_FLOAT64);
    assert_ptr_not_equal(v[3], v[4]); /* 0.0, -0.0 */
    assert_false(signbit(tg_array_get_flat(v[3], 0)));
    assert_true(signbit(tg_array_get_flat(v[4], 0)));
    assert_ptr_equal(v[5], v[6]);     /* nan, nan */
    assert_true(isnan(tg_array_get_flat(v[5], 0)));
    assert_ptr_not_equal(v[7], v[8]); /* arrays stay apart */
    assert_ptr_equal(v[9], v[10]);    /* true, true */
    assert_ptr_equal(v[9], v[0]);     /* true, taken as int64 1 */
    /* the distinct ones: each its value, and its twin the same array */
    for (int i = 0; i < 2 * NDISTINCT; i++) {
        char id[16];
        snprintf(id, sizeof id, "d%d", i);
        const tg_var *c = var(g, id)->owner->inputs[1];
        if (tg_array_get_flat(c->value, 0) != i % NDISTINCT + 0.5)
            fail_msg("%s: %g, expected %g", id, tg_array_get_flat(c->value, 0), i % NDISTINCT + 0.5);
    }
    tg_graph_free(g);
}

static void test_inline_ids_exact(void **state) {
    (void)state;
    char json[8192], id[128], msg[1024];
    memset(id, 'a', 120);
    id[120] = 0;
    int n = snprintf(json, sizeof json, HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],\"nodes\":[");
    for (int i = 0; i < 12; i++)
        n += snprintf(json + n, sizeof json - (size_t)n, "{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"n%d\"]},", i);
    snprintf(json + n, sizeof json - (size_t)n,
             "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":1},\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\","
             "{\"value\":2}],\"outputs\":[\"%s\"]},{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":3}],\"outputs\":[\"y:in1\"]},"
             "{\"op\":\"add\",\"inputs\":[\"x\",{\"value\":4}],\"outputs\":[\"y\"]}]}", id);
    tg_graph *g = tu_load(json);
    tg_node *big = var(g, id)->owner, *y = var(g, "y")->owner;
    char want[160];
    snprintf(want, sizeof want, "%.100s:in1", id);
    assert_string_equal(big->inputs[1]->id, want);
    snprintf(want, sizeof want, "%.100s:in11", id);
    assert_string_equal(big->inputs[11]->id, want);
    assert_string_equal(y->inputs[1]->id, "y:in1.1"); /* y:in1 is a node's output */
    assert_string_equal(var(g, "y:in1")->owner->inputs[1]->id, "y:in1:in1");
    tg_graph_free(g);
    /* errors name node 12, its input 11, and variables[11] */
    n = snprintf(json, sizeof json, HEAD "\"variables\":[");
    for (int i = 0; i < 11; i++)
        n += snprintf(json + n, sizeof json - (size_t)n, "%s{\"id\":\"v%d\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}",
                      i ? "," : "", i);
    int m = n;
    n += snprintf(json + n, sizeof json - (size_t)n, "],\"nodes\":[");
    for (int i = 0; i < 12; i++)
        n += snprintf(json + n, sizeof json - (size_t)n, "{\"op\":\"neg\",\"inputs\":[\"v0\"],\"outputs\":[\"n%d\"]},", i);
    snprintf(json + n, sizeof json - (size_t)n,
             "{\"op\":\"add\",\"inputs\":[\"v0\",\"v0\",\"v0\",\"v0\",\"v0\",\"v0\",\"v0\",\"v0\",\"v0\",\"v0\",\"v0\","
             "{\"value\":[1,2]}],\"outputs\":[\"z\"]}]}");
    assert_int_equal(tu_load_fail(json, msg, sizeof msg), TG_ELOAD);
    if (!strstr(msg, "test: nodes[12].inputs[11].value: expected a value"))
        fail_msg("%s", msg);
    snprintf(json + m, sizeof json - (size_t)m, ",{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},\"constant\":[1,2]}],\"nodes\":[]}");
    assert_int_equal(tu_load_fail(json, msg, sizeof msg), TG_ELOAD);
    if (!strstr(msg, "test: variables[11].constant")) fail_msg("%s", msg);
}

/* What JSON Schema calls an integer (3.0), the loader takes too; a
 * version above 1 is TG_EVERSION; the text must be UTF-8 JSON, nothing
 * after it; syntax errors give line and column. */
static void test_file_level(void **state) {
    (void)state;
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1.0,\"variables\":[{\"id\":\"x\","
                          "\"type\":{\"dtype\":\"float64\",\"shape\":[2.0,null]}}],\"nodes\":[{\"op\":\"neg\","
                          "\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"trace\":[{\"line\":3.0}],\"inplace\":{\"0\":0.0}}]}");
    assert_int_equal(var(g, "x")->type.shape[0], 2);
    assert_int_equal(var(g, "y")->owner->trace.frames[0].line, 3);
    assert_int_equal(var(g, "y")->owner->inplace[0], 0);
    tg_graph_free(g);
    struct { const char *json; int status; const char *sub; } cases[] = {
        {"{\"format\":\"tg-graph\",\"version\":3,\"variables\":[],\"nodes\":[]}", TG_EVERSION,
         "test: version: format version 3 is newer than this tg supports (1)"},
        {"{\"format\":\"tg-graph\",\"version\":0,\"variables\":[],\"nodes\":[]}", TG_ELOAD, "version: expected the integer 1"},
        {"{\"format\":\"tg-graph\",\"version\":1.5,\"variables\":[],\"nodes\":[]}", TG_ELOAD, "version: expected"},
        {"{\"format\":\"tg-graph\",\n\"version\":1,\n  \"variables\":[],\"nodes\":[]", TG_EPARSE, "test: line 3, column"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[],\"nodes\":[]} x", TG_EPARSE, "line 1, column 61"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[],\"nodes\":[],}", TG_EPARSE, "line 1"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[],\"nodes\":[]/*c*/}", TG_EPARSE, "line 1"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"name\":\"\xc3\x28\",\"variables\":[],\"nodes\":[]}", TG_EPARSE,
         "invalid utf-8"},
        {"", TG_EPARSE, "unexpected end of input"},
        /* a value that is not an object, ending the text (json-c waits
         * for the character after a number or literal; the end is one) */
        {"null", TG_ELOAD, "test: (root): expected a JSON object"},
        {"5", TG_ELOAD, "test: (root): expected a JSON object"},
        {"true", TG_ELOAD, "test: (root): expected a JSON object"},
        {"-", TG_EPARSE, "line 1, column 2: invalid JSON: unexpected end of input"},
        {"nul", TG_EPARSE, "unexpected end of input"},
        {"{\"format\":", TG_EPARSE, "line 1, column 11: invalid JSON: unexpected end of input"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"c\",\"type\":{\"dtype\":\"int8\",\"shape\":[]},"
         "\"constant\":null}],\"nodes\":[]}", TG_ELOAD, "variables[0].constant: expected a value"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"c\",\"type\":null}],\"nodes\":[]}",
         TG_ELOAD, "variables[0].type: expected an object"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"c\",\"name\":null,"
         "\"type\":{\"dtype\":\"int8\",\"shape\":[]}}],\"nodes\":[]}", TG_ELOAD, "variables[0].name: expected a string"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"a\\u0000b\","
         "\"type\":{\"dtype\":\"int8\",\"shape\":[]}}],\"nodes\":[]}", TG_ELOAD,
         "variables[0].id: contains a NUL character (\\u0000)"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":{},\"nodes\":[]}", TG_ELOAD, "variables: expected an array"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[],\"nodes\":[],\"meta\":[]}", TG_ELOAD, "meta: expected an object"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[],\"nodes\":[{\"op\":\"neg\",\"inputs\":[],\"outputs\":[\"y\"]}]}",
         TG_ELOAD, "nodes[0] (neg -> y): inputs: neg expects 1 inputs, got 0"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
         "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"bogus\":1}]}",
         TG_ELOAD, "nodes[0].bogus: unknown key"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
         "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"x\"]}]}",
         TG_ELOAD, "the graph has a cycle: x -> x"},
        /* each function's inputs checked at load (tg_fdecl_check) */
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
         "\"nodes\":[],\"functions\":{\"f\":{\"inputs\":[],\"outputs\":[\"x\"]}}}",
         TG_EMISSING, "test: functions.f: function 'f': output 'x' is a free input that is not among the function's inputs"},
        {"{\"format\":\"tg-graph\",\"version\":1,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
         "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]},{\"op\":\"exp\",\"inputs\":[\"y\"],\"outputs\":[\"z\"]}],"
         "\"functions\":{\"g\":{\"inputs\":[\"x\"],\"outputs\":[\"z\"]},\"f\":{\"inputs\":[],\"outputs\":[\"z\"]}}}",
         TG_EMISSING, "functions.f: function 'f': input 'x' is needed by nodes[0] (neg -> y)"},
    };
    for (size_t i = 0; i < TG_ARRAY_LEN(cases); i++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *h = tg_graph_load_string(cases[i].json, strlen(cases[i].json), NULL, "test", ctx);
        if (h) fail_msg("case %zu loaded", i);
        if (tg_ctx_status(ctx) != cases[i].status || !strstr(tg_ctx_message(ctx), cases[i].sub))
            fail_msg("case %zu: %s '%s', want %s '%s'", i, tg_status_str(tg_ctx_status(ctx)), tg_ctx_message(ctx),
                     tg_status_str(cases[i].status), cases[i].sub);
        tg_ctx_free(ctx);
    }
}

/* The JSON text (docs/format-choices.md): keys in any order, a key
 * written twice keeps its last value, strict syntax checked before
 * anything else, json-c's depth limit. */
static void expect_error(const char *json, const char *sub) {
    char msg[1024];
    tu_load_fail(json, msg, sizeof msg);
    if (!strstr(msg, sub)) fail_msg("'%s' lacks '%s'", msg, sub);
}

static void test_json_text(void **state) {
    (void)state;
    char msg[1024];
    /* Keys in any order, white space of every kind, an escaped quote and
     * backslash in a string, scalars (one at the end of an array) beside
     * objects. */
    tg_graph *g = tu_load(" \r\n\t{ \"nodes\" :\n [ {\"op\": \"neg\", \"inputs\": [\"x\"], \"outputs\": [\"y\"],"
                          " \"name\": \"a \\\"q\\\" \\\\ }]\"} ,\t{\"op\":\"mul\",\"inputs\":[\"y\",{\"value\":2.5}],"
                          "\"outputs\":[\"z\"]} ] ,\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\","
                          "\"shape\":[2]}}], \"meta\": {\"k\": [1, -2e3, true, null]}, \"version\"\t:\t1\r\n,"
                          "\"format\":\"tg-graph\" }\n");
    assert_int_equal(tg_graph_node_count(g), 2);
    assert_string_equal(var(g, "y")->owner->name, "a \"q\" \\ }]");
    assert_int_equal(var(g, "z")->type.ndim, 1);
    assert_true(var(g, "z")->owner->inputs[1]->inline_const);
    tg_graph_free(g);
    /* A later "nodes" replaces an earlier one, as json-c does. */
    g = tu_load(HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}],"
                "\"nodes\":[{\"op\":\"tanh\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]}],"
                "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}");
    assert_int_equal(tg_graph_node_count(g), 1);
    assert_null(tg_graph_find(g, "t"));
    assert_string_equal(var(g, "y")->owner->op->name, "neg");
    tg_graph_free(g);
    g = tu_load(HEAD "\"variables\":[],\"nodes\":5,\"nodes\":[]}");
    assert_int_equal(tg_graph_node_count(g), 0);
    tg_graph_free(g);
    expect_error(HEAD "\"variables\":[],\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
                      "\"nodes\":{}}",
                 "nodes: expected an array");
    /* Elements that are not objects, a long number, and the root's own
     * checks before any node's. */
    expect_error(HEAD "\"variables\":[],\"nodes\":[7]}", "nodes[0]: expected an object");
    expect_error(HEAD "\"variables\":[],\"nodes\":[null]}", "nodes[0]: expected an object");
    expect_error(HEAD "\"variables\":[],\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]},"
                      "\"neg\"]}",
                 "nodes[1]: expected an object");
    /* a number json-c would clamp is refused before the structure is
     * read, the text as written (cut at 40 characters) */
    expect_error(HEAD "\"variables\":[],\"nodes\":[1234567890123456789012345678901234567890123456789012345678901234567890]}",
                 "line 1, column 58: the integer 1234567890123456789012345678901234567890... is out of range");
    expect_error(HEAD "\"variables\":[],\"nodes\":[1234567890123456789012345678901234567890.5]}",
                 "nodes[0]: expected an object");
    expect_error("{\"nodes\":[{\"op\":\"nope\"}],\"variables\":[],\"version\":1,\"format\":\"tg-graph\",\"bogus\":1}",
                 "(root).bogus: unknown key");
    expect_error("{\"nodes\":[{\"op\":\"nope\"}],\"variables\":[],\"version\":1,\"format\":\"tg-graph\",\"name\":1}",
                 "name: expected a string");
    /* A syntax error anywhere comes before any other error, with its
     * place: here after a node that names an unknown op. */
    expect_error(HEAD "\"variables\":[],\"nodes\":[{\"op\":\"nope\",\"inputs\":[],\"outputs\":[\"y\"]},\n"
                      "{\"op\": }]}",
                 "test: line 2, column 8: invalid JSON");
    expect_error(HEAD "\"variables\":[],\"nodes\":[{\"op\":\"nope\",\"inputs\":[],\"outputs\":[\"y\"]}", "invalid JSON");
    expect_error(HEAD "\"variables\":[],\"nodes\":[{\"op\":\"nope\",\"inputs\":[],\"outputs\":[\"y\"]}]} ]",
                 "invalid JSON: unexpected character");
    expect_error(HEAD "\"variables\":[],\"nodes\":[{\"op\":\"nope\",\"inputs\":[],\"outputs\":[\"y\"]},]}", "invalid JSON");
    /* json-c reads a key in single quotes; JSON has none: refused where
     * it stands, after strings that end in escaped backslashes and hold
     * escaped quotes; a ' inside a string is a character like any. */
    g = tu_load(HEAD "\"variables\":[],\"nodes\":[],\"meta\":{\"a\":\"x\\\"'y\",\"b\":\"c:\\\\\",\"c\":\"'\"}}");
    tg_graph_free(g);
    expect_error(HEAD "\"variables\":[],\"nodes\":[],\"meta\":{\"a\":\"x\\\"'y\",\"b\":\"c:\\\\\",'k':1}}",
                 "test: line 1, column 91: invalid JSON: a string in single quotes");
    /* Nesting as deep as json-c allows, and deeper: the verdict and the
     * place of the error are json-c's. */
    for (int depth = 118; depth <= 130; depth++) {
        char json[1024] = HEAD "\"variables\":[],\"nodes\":[{\"op\":\"neg\",\"inputs\":[],\"outputs\":[\"y\"],\"attrs\":{\"a\":";
        size_t n = strlen(json);
        for (int i = 0; i < depth; i++) json[n++] = '[';
        json[n++] = '1';
        for (int i = 0; i < depth; i++) json[n++] = ']';
        snprintf(json + n, sizeof json - n, "}}]}");
        json_tokener *tok = json_tokener_new_ex(128);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        json_object *whole = json_tokener_parse_ex(tok, json, (int)strlen(json));
        bool ok = json_tokener_get_error(tok) == json_tokener_success;
        char want[64];
        snprintf(want, sizeof want, "line 1, column %zu: invalid JSON", json_tokener_get_parse_end(tok) + 1);
        json_object_put(whole);
        json_tokener_free(tok);
        tu_load_fail(json, msg, sizeof msg); /* neg has no attr "a" (or the text is too deep) */
        if (ok && strstr(msg, "invalid JSON")) fail_msg("depth %d: json-c parses it, tg says %s", depth, msg);
        if (!ok && !strstr(msg, want)) fail_msg("depth %d: want '%s', got %s", depth, want, msg);
    }
}

/* A NUL (\u0000) in any string or key is refused with its JSON path
 * (docs/format-choices.md): tg would read the string only up to it. An
 * escaped backslash before u0000 is six characters of a name, kept. */
static void test_nul(void **state) {
    (void)state;
    char msg[1024];
    tg_graph *g = tu_load(HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},"
                          "\"name\":\"a\\\\u0000b\"}],\"nodes\":[],\"meta\":{\"k\\\\u0000\":\"\\\\\\\\u0000\"}}");
    assert_string_equal(var(g, "x")->name, "a\\u0000b");
    tg_graph_free(g);
    /* an escaped backslash, then the escape */
    expect_error(HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},"
                      "\"name\":\"a\\\\\\u0000\"}],\"nodes\":[]}",
                 "test: variables[0].name: contains a NUL character (\\u0000)");
    /* in an array, after objects, arrays and strings holding , [ { " */
    expect_error(HEAD "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[]},"
                      "\"name\":\",[{\\\"\"}],\"meta\":{\"a\":[[],{},\"]\",{\"b\":[1,{}]}]},"
                      "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"x\",\"x\\u0000\"],\"outputs\":[\"y\"]}]}",
                 "test: nodes[0].inputs[1]: contains a NUL character");
    /* a long key is cut to 64 bytes between two characters */
    char json[1024] = HEAD "\"variables\":[],\"nodes\":[],\"functions\":{\"a";
    for (int i = 0; i < 100; i++) strcat(json, "\xc3\xa9");
    strcat(json, "\\u0000\":{\"inputs\":[],\"outputs\":[]}}}");
    tu_load_fail(json, msg, sizeof msg);
    char want[256] = "test: functions.a";
    for (int i = 0; i < 31; i++) strcat(want, "\xc3\xa9");
    strcat(want, "...: contains a NUL character");
    if (!strstr(msg, want)) fail_msg("'%s' lacks '%s'", msg, want);
}

/* A graph file with an npy value next to it loads, relative to its own
 * folder. */
/* Integer literals past int64 and uint64, which json-c clamps silently,
 * found in the text: strings skipped (with escaped quotes), floats and
 * the bounds themselves allowed. */
static void test_huge_ints(void **state) {
    (void)state;
#define HUGE(t) tg_json_find_huge_int(t, strlen(t))
    assert_int_equal(HUGE("[-9223372036854775808, 18446744073709551615, 0, -0]"), -1);
    assert_int_equal(HUGE("[1, -9223372036854775809]"), 4);
    assert_int_equal(HUGE("{\"a\": 18446744073709551616}"), 6);
    assert_int_equal(HUGE("[99999999999999999999999]"), 1);
    assert_int_equal(HUGE("[000018446744073709551615]"), -1); /* leading zeros: same value */
    /* floats of any size are json-c's doubles, not clamped integers */
    assert_int_equal(HUGE("[1e400, -99999999999999999999.0, 18446744073709551616e0, 1E+30]"), -1);
    /* digits in strings, past an escaped quote, are not numbers */
    assert_int_equal(HUGE("[\"99999999999999999999\", \"a\\\"99999999999999999999\", 5]"), -1);
    assert_int_equal(HUGE("[\"x\\\\\", -99999999999999999999]"), 8);
    assert_int_equal(HUGE(""), -1);
#undef HUGE
    /* the loader says where, and the value as written */
    expect_error(HEAD "\"variables\":[{\"id\":\"c\",\"type\":{\"dtype\":\"int64\",\"shape\":[]},"
                 "\"constant\":{\"data\":\n  -9223372036854775809}}]}",
                 "line 2, column 3: the integer -9223372036854775809 is out of range");
}

static void test_npy_value(void **state) {
    (void)state;
    char dir[] = "/tmp/tg_npy_XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/w.npy", dir);
    int64_t shp[2] = {2, 3};
    double d[6] = {1, 2, 3, 4, 5, 6};
    tg_array *w = tu_f64(2, shp, d);
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_npy_save(path, w, ctx), 0);
    snprintf(path, sizeof path, "%s/g.json", dir);
    FILE *f = fopen(path, "w");
    fputs(HEAD "\"variables\":[{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,3]},\"shared\":{\"npy\":\"w.npy\"}}],"
               "\"nodes\":[]}",
          f);
    fclose(f);
    tg_graph *g = tg_graph_load(path, ctx);
    if (!g) fail_msg("%s", tg_ctx_message(ctx));
    assert_true(tg_array_equal(var(g, "w")->shared->value, w));
    assert_int_equal(var(g, "w")->type.shape[0], -1);
    tg_graph_free(g);
    /* the file must agree with the variable and with the value's own dtype and shape */
    const char *bad[][2] = {
        {"{\"id\":\"w\",\"type\":{\"dtype\":\"float32\",\"shape\":[2,3]},\"shared\":{\"npy\":\"w.npy\"}}",
         "variables[0].shared.npy: the file holds float64, but the variable is float32"},
        {"{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,2]},\"shared\":{\"npy\":\"w.npy\"}}",
         "variables[0].shared: the value has shape (2, 3), but the variable's type says (3, 2)"},
        {"{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[null,3]},\"shared\":{\"npy\":\"w.npy\",\"shape\":[4,3]}}",
         "variables[0].shared: the value has shape (2, 3), but the variable's type says (4, 3)"},
        {"{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]},\"shared\":{\"npy\":\"w.npy\",\"shape\":[4,3]}}",
         "variables[0].shared: the value has shape (4, 3), but the variable's type says (2, 3)"},
        {"{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[2,3]},\"shared\":{\"npy\":\"sub/../w.npy\"}}",
         "leaves the graph's folder"},
    };
    for (size_t i = 0; i < TG_ARRAY_LEN(bad); i++) {
        f = fopen(path, "w");
        fprintf(f, HEAD "\"variables\":[%s],\"nodes\":[]}", bad[i][0]);
        fclose(f);
        g = tg_graph_load(path, ctx);
        if (g || !strstr(tg_ctx_message(ctx), bad[i][1]) || strncmp(tg_ctx_message(ctx), path, strlen(path)))
            fail_msg("case %zu: %s", i, g ? "loaded" : tg_ctx_message(ctx));
    }
    unlink(path);
    snprintf(path, sizeof path, "%s/w.npy", dir);
    unlink(path);
    rmdir(dir);
    tg_array_free(w);
    tg_ctx_free(ctx);
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

/* A chain of error prefixes past the message's 2 KB (a load error 30
 * bodies down, a gradient's through scans nested as deep) keeps its end,
 * the cause, and its start, the outermost place, and loses levels from
 * the middle, cut between levels. Before, the end was cut off. */
static void test_error_chain_keeps_cause(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new();
    tg_errorf(ctx, TG_ELOAD, "nodes[0].op: unknown op 'addd' (did you mean 'add'?)");
    for (int k = 99; k >= 0; k--) tg_error_prefix(ctx, "nodes[%d] (scan -> level%d_inner): attrs.body", k, k);
    const char *m = tg_ctx_message(ctx);
    size_t len = strlen(m);
    assert_true(len < TG_CTX_MSG_MAX && len > TG_CTX_MSG_MAX - 300);
    const char *cause = "attrs.body: nodes[0].op: unknown op 'addd' (did you mean 'add'?)";
    assert_string_equal(m + len - strlen(cause), cause);
    assert_true(!strncmp(m, "nodes[0] (scan -> level0_inner): attrs.body: nodes[1] (scan -> level1_inner)", 75));
    const char *cut = strstr(m, " ... ");
    assert_non_null(cut);
    assert_null(strstr(cut + 1, " ... ")); /* one cut, however many prefixes came after it */
    /* between levels: "...: attrs.body ... nodes[k] (scan -> ..." */
    assert_true(cut - m > 10 && !strncmp(cut - 10, "attrs.body", 10));
    assert_true(!strncmp(cut + 5, "nodes[", 6) || !strncmp(cut + 5, "attrs.body: nodes[", 18));
    /* every level kept is whole and in order: before the cut 0, 1, 2,
     * ...; after it consecutive up to 99; then the cause's nodes[0] */
    int want = 0, seen = 0, last = -1;
    for (const char *p = m; (p = strstr(p, "nodes[")) != NULL; p++) {
        int k;
        assert_int_equal(sscanf(p, "nodes[%d]", &k), 1);
        if (p > cut && last < 0) want = k; /* the first level after the cut */
        if (p > cut) last = k;
        if (p > cut && want == 100) {
            assert_int_equal(k, 0); /* the cause */
            break;
        }
        assert_int_equal(k, want);
        want++;
        seen++;
    }
    assert_int_equal(want, 100);
    assert_true(seen > 20 && seen < 60);
    tg_ctx_free(ctx);

    /* a short chain is left whole */
    ctx = tg_ctx_new();
    tg_errorf(ctx, TG_ELOAD, "bad");
    tg_error_prefix(ctx, "nodes[%d]", 3);
    assert_string_equal(tg_ctx_message(ctx), "nodes[3]: bad");
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_error_chain_keeps_cause),
        cmocka_unit_test(test_weak_scalars),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_ids_and_types),
        cmocka_unit_test(test_implicit_main),
        cmocka_unit_test(test_functions),
        cmocka_unit_test(test_many_inputs),
        cmocka_unit_test(test_inline_ids),
        cmocka_unit_test(test_inline_ids_exact),
        cmocka_unit_test(test_inline_scalars_shared),
        cmocka_unit_test(test_file_level),
        cmocka_unit_test(test_json_text),
        cmocka_unit_test(test_nul),
        cmocka_unit_test(test_huge_ints),
        cmocka_unit_test(test_npy_value),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
