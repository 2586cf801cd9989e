/* libFuzzer target: the .npy reader (what `tgc run -i ID=FILE.npy` and
 * shared values given as "npy" read) and the .npz reader (`-i FILE.npz`),
 * both on every input. Nothing may crash, leak, trip a sanitizer or
 * allocate a size the header claims before the file is checked to hold
 * it; an array that loads must save and load again as the same dtype,
 * shape and bytes, and print; an archive whose arrays all read must save
 * and open again with the same names and arrays (stored, or deflated at a
 * level of 1 to 9 for inputs of odd sizes). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tg/tg.h"

static void fuzz_npz(const uint8_t *data, size_t size, tg_ctx *ctx) {
    tg_npz *z = tg_npz_open_mem(data, size, "fuzz", ctx);
    if (!z) return;
    int n = tg_npz_count(z);
    tg_array **arrs = calloc((size_t)n + 1, sizeof *arrs);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    bool all = arrs && names;
    for (int i = 0; all && i < n; i++) {
        names[i] = tg_npz_name(z, i);
        all = (arrs[i] = tg_npz_read(z, i, ctx)) != NULL;
    }
    char p[64];
    snprintf(p, sizeof p, "/tmp/tg-fuzz-npz-%ld.npz", (long)getpid());
    /* an empty name cannot be saved (np.savez cannot write one either) */
    for (int i = 0; all && i < n; i++) all = names[i][0] != 0;
    int saved = !all ? TG_EINVAL
                : size & 1 ? tg_npz_save_compressed(p, n, names, (const tg_array *const *)arrs,
                                                    1 + (int)(size / 2 % 9), ctx)
                           : tg_npz_save(p, n, names, (const tg_array *const *)arrs, ctx);
    if (saved == TG_OK) {
        tg_npz *y = tg_npz_open(p, ctx);
        if (!y || tg_npz_count(y) != n) abort();
        for (int i = 0; i < n; i++) {
            if (strcmp(tg_npz_name(y, i), names[i])) abort();
            tg_array *b = tg_npz_read(y, i, ctx);
            if (!b || !tg_array_equal(b, arrs[i])) {
                /* NaNs differ from themselves: compare the bytes */
                if (!b || tg_array_dtype(b) != tg_array_dtype(arrs[i]) ||
                    memcmp(tg_array_data(b), tg_array_data(arrs[i]),
                           (size_t)tg_array_size(b) * tg_dtype_size(tg_array_dtype(b))))
                    abort();
            }
            tg_array_free(b);
        }
        tg_npz_close(y);
        unlink(p);
    }
    for (int i = 0; arrs && i < n; i++) tg_array_free(arrs[i]);
    free(arrs);
    free(names);
    tg_npz_close(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_ctx *ctx = tg_ctx_new();
    fuzz_npz(data, size, ctx);
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
