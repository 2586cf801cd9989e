/* libFuzzer target: the .npy reader (what `tgc run -i ID=FILE.npy` and
 * shared values given as "npy" read). Nothing may crash, leak, trip a
 * sanitizer or allocate a size the header claims before the file is
 * checked to hold it; what loads must save and load again as the same
 * dtype, shape and bytes, and print. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg/tg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = tg_npy_load_mem(data, size, "fuzz", ctx);
    if (a) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            tg_array_print(null, a);
            fclose(null);
        }
        char p1[64], p2[64];
        snprintf(p1, sizeof p1, "/tmp/tg-fuzz-npy-%ld.1.npy", (long)getpid());
        snprintf(p2, sizeof p2, "/tmp/tg-fuzz-npy-%ld.2.npy", (long)getpid());
        if (tg_npy_save(p1, a, ctx) == TG_OK) {
            tg_array *b = tg_npy_load(p1, ctx);
            if (!b || tg_array_dtype(b) != tg_array_dtype(a) || tg_array_ndim(b) != tg_array_ndim(a)) {
                fprintf(stderr, "a saved array does not load back: %s\n", b ? "another dtype or rank" : tg_ctx_message(ctx));
                abort();
            }
            for (int d = 0; d < tg_array_ndim(a); d++)
                if (tg_array_shape(a)[d] != tg_array_shape(b)[d]) abort();
            /* the same values: saved again, the same bytes */
            if (tg_npy_save(p2, b, ctx) != TG_OK) abort();
            FILE *f1 = fopen(p1, "rb"), *f2 = fopen(p2, "rb");
            if (!f1 || !f2) abort();
            int c1, c2;
            do {
                c1 = getc(f1);
                c2 = getc(f2);
                if (c1 != c2) abort();
            } while (c1 != EOF);
            fclose(f1);
            fclose(f2);
            tg_array_free(b);
        }
        unlink(p1);
        unlink(p2);
        tg_array_free(a);
    }
    tg_ctx_free(ctx);
    return 0;
}
