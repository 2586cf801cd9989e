/* libFuzzer target: the compiled-function file loader. Nothing may crash,
 * leak, trip a sanitizer or allocate a size the file claims before it is
 * checked; what loads must export, and the export must load as a graph.
 *
 * Most mutations would stop at the checksums, so for inputs whose byte 63
 * is odd the target first writes correct preamble and header checksums
 * over the mutated bytes and has the reader skip the array table's and
 * the arrays' checksums: the fuzzer then reaches the JSON header, the
 * array table and the binary graph sections. The seeds in corpus_tgf/
 * whose byte 63 is odd (the _nocrc, _fixcrc and regress_ ones) are made
 * for this path: tgc refuses them as they are ("reserved bytes are not
 * zero"), on purpose. test_tgf's test_fuzz_seeds_reach_graph_sections
 * reads every seed this way and fails when one stops before the graph
 * sections. */
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/tgf.h"
#include "tg/tg.h"

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    tg_tgf_fuzz_no_checksums = size >= 64 && (buf[63] & 1);
    if (tg_tgf_fuzz_no_checksums) {
        uint64_t hlen = rd64(buf + 24);
        if (hlen <= size - 64) wr32(buf + 48, tg_crc32c(0, buf + 64, (size_t)hlen));
        memset(buf + 52, 0, 4);
        memset(buf + 60, 0, 4);
        wr32(buf + 56, tg_crc32c(0, buf, 56));
    }
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf *t = tg_tgf_load_buffer(buf, size, "fuzz", NULL, ctx);
    if (t) {
        for (int i = 0; i < tg_tgf_function_count(t); i++) {
            char *s = tg_tgf_export(t, i, ctx);
            if (s) {
                tg_graph *g = tg_graph_load_string(s, strlen(s), NULL, "export", ctx);
                if (!g) { /* an export must load again */
                    fprintf(stderr, "export does not load: %s\n%s\n", tg_ctx_message(ctx), s);
                    abort();
                }
                tg_graph_free(g);
            }
            tg_string_free(s);
        }
        tg_tgf_free(t);
    }
    tg_ctx_free(ctx);
    free(buf);
    return 0;
}
