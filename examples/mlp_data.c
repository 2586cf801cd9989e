/* Writes a data set for examples/mlp.json: N examples of 784 float32
 * features from a fixed-seed generator, with a 10-class label (one-hot,
 * float32) from a hidden random linear map, as x.npy and y.npy.
 *
 *   tg-example-mlp-data OUTDIR [N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_data.h"
#include "tg/tg.h"

static uint64_t state = 0x2012201220122012ull;
static double uniform(void) { /* splitmix64 */
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

int main(int argc, char **argv) {
    int64_t n, feats = 784, classes = 10;
    int st = example_data_args(argc, argv, 600, 1000000, &n);
    if (st >= 0) return st;
    int64_t xs[2] = {n, feats}, ys[2] = {n, classes};
    tg_array *x = tg_array_new(TG_FLOAT32, 2, xs), *y = tg_array_new(TG_FLOAT32, 2, ys);
    double *map = malloc(sizeof(double) * (size_t)(feats * classes));
    if (!x || !y || !map) {
        fprintf(stderr, "%s: out of memory for %lld examples\n", argv[0], (long long)n);
        tg_array_free(x);
        tg_array_free(y);
        free(map);
        return 1;
    }
    float *xd = tg_array_data(x), *yd = tg_array_data(y);
    for (int64_t i = 0; i < feats * classes; i++) map[i] = uniform() - 0.5;
    for (int64_t i = 0; i < n; i++) {
        double score[10] = {0};
        for (int64_t j = 0; j < feats; j++) {
            xd[i * feats + j] = (float)uniform(); /* pixel-like values in (0, 1) */
            for (int64_t c = 0; c < classes; c++) score[c] += xd[i * feats + j] * map[j * classes + c];
        }
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (score[c] > score[best]) best = c;
        yd[i * classes + best] = 1.0f;
    }
    char path[4096];
    tg_ctx *ctx = tg_ctx_new();
    int rc = 0;
    snprintf(path, sizeof path, "%s/x.npy", argv[1]);
    if (tg_npy_save(path, x, ctx)) rc = 1;
    snprintf(path, sizeof path, "%s/y.npy", argv[1]);
    if (!rc && tg_npy_save(path, y, ctx)) rc = 1;
    if (rc) fprintf(stderr, "%s: %s\n", argv[0], tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    tg_array_free(x);
    tg_array_free(y);
    free(map);
    return rc;
}
