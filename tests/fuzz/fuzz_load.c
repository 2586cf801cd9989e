/* libFuzzer target: the JSON loader, compiling every function of what
 * loads, and the saver. Nothing may crash, leak or trip a sanitizer, and
 * what loads must survive a round trip: its saved text loads again and
 * saves to the same text; and the compact text a .tgf keeps of it is what
 * json-c prints of its tree (a violation aborts, so the fuzzer reports
 * it). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "io/io.h"
#include "tg/tg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load_string((const char *)data, size, NULL, "fuzz", ctx);
    if (g) {
        for (int i = 0; i < tg_graph_function_count(g); i++) {
            tg_function *f = tg_function_compile(g, i, NULL, ctx);
            tg_function_free(f);
        }
        json_object *o = tg_graph_to_json_ext(g, NULL, NULL);
        size_t len = 0;
        char *c = tg_graph_to_text_ext(g, NULL, NULL, &len);
        const char *w = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
        if (c && w && (strcmp(c, w) != 0 || len != strlen(w))) abort();
        tg_free(c);
        json_object_put(o);
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
