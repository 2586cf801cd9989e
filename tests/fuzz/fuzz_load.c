/* libFuzzer target: the JSON loader, and compiling every function of what
 * loads. Nothing may crash, leak or trip a sanitizer. */
#include <stddef.h>
#include <stdint.h>

#include "tg/tg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string((const char *)data, size, NULL, "fuzz", ctx);
    if (g) {
        for (int i = 0; i < tg_graph_function_count(g); i++) {
            tg_function *f = tg_function_compile(g, i, NULL, ctx);
            tg_function_free(f);
        }
        char *s = tg_graph_to_string(g, ctx);
        tg_string_free(s);
        tg_graph_free(g);
    }
    tg_ctx_free(ctx);
    return 0;
}
