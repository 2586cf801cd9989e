/* A program outside the tree, built against the installed library, to
 * check that the headers, tg.pc and the CMake package work. */
#include <stdio.h>
#include <string.h>
#include <tg/tg.h>

int main(void) {
    const char *json =
        "{\"format\":\"tg-graph\",\"version\":1,"
        "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
        "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"y\"]}]}";
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string(json, strlen(json), NULL, "consumer", ctx);
    if (!g) {
        fprintf(stderr, "%s\n", tg_ctx_message(ctx));
        return 1;
    }
    tg_function *f = tg_function_compile(g, 0, NULL, ctx);
    int64_t n = 3;
    double xs[3] = {1, 2, 3};
    tg_array *x = tg_array_new_from(TG_FLOAT64, 1, &n, xs), *y = NULL;
    if (!f || tg_function_call(f, &x, &y, ctx)) {
        fprintf(stderr, "%s\n", tg_ctx_message(ctx));
        return 1;
    }
    double got = tg_array_get_flat(y, 2);
    printf("tg %s: 3*3 = %g\n", tg_version(), got);
    tg_array_free(x);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return got == 9 ? 0 : 1;
}
