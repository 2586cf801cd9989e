/* See gradcheck.h. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

double gc_urand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* Build the graph text: vars, nodes, then grad(c, inputs...) and two
 * functions, "cost" and "grads". */
static char *build(const char *vars, const char *nodes, int nin, char ids[][16]) {
    char *j = malloc(65536);
    size_t k = (size_t)snprintf(j, 65536, "{\"format\":\"tg-graph\",\"version\":1,\"variables\":[%s],"
                                          "\"nodes\":[%s,{\"op\":\"grad\",\"inputs\":[\"c\"",
                                vars, nodes);
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(j + k, 65536 - k, ",\"%s\"", ids[i]);
    k += (size_t)snprintf(j + k, 65536 - k, "],\"outputs\":[");
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(j + k, 65536 - k, "%s\"g_%s\"", i ? "," : "", ids[i]);
    k += (size_t)snprintf(j + k, 65536 - k, "]}],\"functions\":{\"cost\":{\"inputs\":[");
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(j + k, 65536 - k, "%s\"%s\"", i ? "," : "", ids[i]);
    k += (size_t)snprintf(j + k, 65536 - k, "],\"outputs\":[\"c\"]},\"grads\":{\"inputs\":[");
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(j + k, 65536 - k, "%s\"%s\"", i ? "," : "", ids[i]);
    k += (size_t)snprintf(j + k, 65536 - k, "],\"outputs\":[");
    for (int i = 0; i < nin; i++) k += (size_t)snprintf(j + k, 65536 - k, "%s\"g_%s\"", i ? "," : "", ids[i]);
    snprintf(j + k, 65536 - k, "]}}}");
    return j;
}

/* Parse the ids and shapes of the variables list (our own simple JSON). */
static int parse_vars(const char *vars, char ids[][16], int64_t shapes[][4], int *nds) {
    int n = 0;
    const char *p = vars;
    while ((p = strstr(p, "\"id\":\""))) {
        p += 6;
        int k = 0;
        while (*p != '"') ids[n][k++] = *p++;
        ids[n][k] = 0;
        p = strstr(p, "\"shape\":[") + 9;
        nds[n] = 0;
        while (*p != ']') {
            shapes[n][nds[n]++] = strtoll(p, (char **)&p, 10);
            if (*p == ',') p++;
        }
        n++;
    }
    return n;
}

static double call_cost(tg_function *f, tg_array **in) {
    tg_array *out = NULL;
    tg_ctx *ctx = tg_ctx_new();
    if (tg_function_call(f, in, &out, ctx)) fail_msg("cost: %s", tg_ctx_message(ctx));
    double v = tg_array_get_flat(out, 0);
    tg_array_free(out);
    tg_ctx_free(ctx);
    return v;
}

int check_case(const char *name, const char *vars, const char *nodes, double lo, double hi) {
    char ids[8][16];
    int64_t shapes[8][4];
    int nds[8];
    int nin = parse_vars(vars, ids, shapes, nds);
    char *json = build(vars, nodes, nin, ids);
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, name, ctx);
    if (!g) {
        printf("  %s: %s\n", name, tg_ctx_message(ctx));
        free(json);
        tg_ctx_free(ctx);
        return 1;
    }
    tg_function *fc = tg_function_compile(g, tg_graph_function_find(g, "cost", ctx), NULL, ctx);
    tg_function *fg = tg_function_compile(g, tg_graph_function_find(g, "grads", ctx), NULL, ctx);
    assert_non_null(fc);
    assert_non_null(fg);
    tg_array *in[8], *gr[8] = {0};
    uint64_t seed = 42;
    for (int i = 0; i < nin; i++) {
        in[i] = tg_array_new(TG_FLOAT64, nds[i], shapes[i]);
        double *d = tg_array_data(in[i]);
        for (int64_t e = 0; e < tg_array_size(in[i]); e++) d[e] = lo + (hi - lo) * gc_urand(&seed);
    }
    if (tg_function_call(fg, in, gr, ctx)) fail_msg("%s: grads: %s", name, tg_ctx_message(ctx));
    int bad = 0;
    for (int i = 0; i < nin && !bad; i++) {
        double *d = tg_array_data(in[i]);
        for (int64_t e = 0; e < tg_array_size(in[i]) && !bad; e++) {
            double keep = d[e], h = 1e-6 * fmax(1.0, fabs(keep));
            d[e] = keep + h;
            double up = call_cost(fc, in);
            d[e] = keep - h;
            double down = call_cost(fc, in);
            d[e] = keep;
            double num = (up - down) / (2 * h), sym = tg_array_get_flat(gr[i], e);
            if (fabs(num - sym) > 1e-5 * fmax(1.0, fabs(num))) {
                printf("  %s: d c / d %s[%lld]: symbolic %.10g, finite differences %.10g\n", name, ids[i],
                       (long long)e, sym, num);
                bad = 1;
            }
        }
    }
    for (int i = 0; i < nin; i++) {
        tg_array_free(in[i]);
        tg_array_free(gr[i]);
    }
    tg_function_free(fc);
    tg_function_free(fg);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    free(json);
    return bad;
}

