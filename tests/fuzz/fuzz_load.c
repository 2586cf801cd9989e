/* libFuzzer target: the JSON loader, compiling every function of what
 * loads, and the saver. Nothing may crash, leak or trip a sanitizer, and
 * what loads must survive a round trip: its saved text loads again and
 * saves to the same text (a violation aborts, so the fuzzer reports it). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
        if (s) {
            tg_graph *h = tg_graph_load_string(s, strlen(s), NULL, "saved", ctx);
            if (!h) abort(); /* the saved form must load */
            char *t = tg_graph_to_string(h, ctx);
            if (!t || strcmp(s, t) != 0) abort(); /* and save the same */
            tg_string_free(t);
            tg_graph_free(h);
        }
        tg_string_free(s);
        tg_graph_free(g);
    }
    tg_ctx_free(ctx);
    return 0;
}
