/* Writes a data set for examples/logreg.json: N examples of 784 features
 * drawn from a fixed-seed generator, labelled by a hidden linear rule with
 * some noise, as x.npy (float64, N x 784) and y.npy (int64, N).
 *
 *   tg-example-logreg-data OUTDIR [N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_data.h"
#include "tg/tg.h"

static uint64_t state = 0x9E3779B97F4A7C15ull;
static double uniform(void) { /* splitmix64 */
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }

int main(int argc, char **argv) {
    int64_t n, feats = 784;
    int st = example_data_args(argc, argv, 400, 1000000, &n);
    if (st >= 0) return st;
    int64_t xs[2] = {n, feats};
    tg_array *x = tg_array_new(TG_FLOAT64, 2, xs), *y = tg_array_new(TG_INT64, 1, &n);
    double *rule = malloc(sizeof(double) * (size_t)feats);
    if (!x || !y || !rule) {
        fprintf(stderr, "%s: out of memory for %lld examples\n", argv[0], (long long)n);
        tg_array_free(x);
        tg_array_free(y);
        free(rule);
        return 1;
    }
    double *xd = tg_array_data(x);
    int64_t *yd = tg_array_data(y);
    for (int64_t j = 0; j < feats; j++) rule[j] = normal();
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int64_t j = 0; j < feats; j++) {
            xd[i * feats + j] = normal();
            s += xd[i * feats + j] * rule[j];
        }
        yd[i] = s + 5 * normal() > 0;
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
    free(rule);
    return rc;
}
