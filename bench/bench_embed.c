/* The SGD step of an embedding table: cost = sum((E[idx] - t)^2),
 * E <- E - lr * grad(E), float32, for tables of V x D and batches of B
 * indices. grad writes E's gradient as take_add(zeros_like(E), g, idx);
 * `fast_run` (sparse_update, then take_add's commit) adds into the rows
 * read, where the step as written (`--exclude sparse_update`) makes an
 * array of zeros the size of the table and sweeps the table again. tg
 * both ways beside NumPy by hand (np.add.at) and PyTorch with 1 and 2
 * threads (nn.Embedding with sparse and with dense gradients, and
 * index_add_ by hand) from peers/embed.py, ms per step, best of 3 rounds.
 * The two tg functions must agree on the table after a step.
 *
 *   build-bench/bench/bench_embed [MIN_SECONDS [VxDxB...]]
 *   (default 0.3, 50000x256x64 50000x256x1024 1000000x64x1024)
 */
#include <math.h>
#include <omp.h>
#include <unistd.h>

#include "bench_common.h"
#include "core/core.h"

typedef struct ecase {
    int64_t V, D, B;
} ecase;

/* A float32 .npy of V x D normal-ish values in [-0.1, 0.1). */
static void write_table(const char *path, int64_t V, int64_t D) {
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        perror(path);
        exit(1);
    }
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                     (long long)V, (long long)D);
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    unsigned short hlen = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, fp);
    fwrite(&hlen, 2, 1, fp);
    fwrite(hdr, 1, (size_t)n, fp);
    for (int i = 0; i < pad; i++) fputc(' ', fp);
    fputc('\n', fp);
    float *row = malloc(sizeof *row * (size_t)D);
    uint64_t s = 7;
    for (int64_t i = 0; i < V; i++) {
        for (int64_t j = 0; j < D; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            row[j] = (float)(((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.2);
        }
        fwrite(row, sizeof *row, (size_t)D, fp);
    }
    free(row);
    if (fclose(fp)) {
        perror(path);
        exit(1);
    }
}

static tg_graph *load_step(const char *dir, const ecase *c, tg_ctx *ctx) {
    char path[512];
    snprintf(path, sizeof path, "%s/embed.json", dir);
    FILE *fp = fopen(path, "w");
    if (!fp) {
        perror(path);
        exit(1);
    }
    fprintf(fp,
            "{\"format\":\"tg-graph\",\"version\":1,\"name\":\"embedding SGD\",\"variables\":["
            "{\"id\":\"idx\",\"type\":{\"dtype\":\"int64\",\"shape\":[null]}},"
            "{\"id\":\"t\",\"type\":{\"dtype\":\"float32\",\"shape\":[null,%lld]}},"
            "{\"id\":\"E\",\"type\":{\"dtype\":\"float32\",\"shape\":[%lld,%lld]},\"shared\":{\"npy\":\"E.npy\"}}],"
            "\"nodes\":[{\"op\":\"take\",\"inputs\":[\"E\",\"idx\"],\"outputs\":[\"e\"]},"
            "{\"op\":\"sub\",\"inputs\":[\"e\",\"t\"],\"outputs\":[\"d\"]},"
            "{\"op\":\"sqr\",\"inputs\":[\"d\"],\"outputs\":[\"d2\"]},"
            "{\"op\":\"sum\",\"inputs\":[\"d2\"],\"outputs\":[\"cost\"],\"attrs\":{\"axis\":null}},"
            "{\"op\":\"grad\",\"inputs\":[\"cost\",\"E\"],\"outputs\":[\"gE\"]},"
            "{\"op\":\"mul\",\"inputs\":[{\"value\":0.01},\"gE\"],\"outputs\":[\"s\"]},"
            "{\"op\":\"sub\",\"inputs\":[\"E\",\"s\"],\"outputs\":[\"E_next\"]}],"
            "\"functions\":{\"step\":{\"inputs\":[\"idx\",\"t\"],\"outputs\":[\"cost\"],\"updates\":{\"E\":\"E_next\"}}}}",
            (long long)c->D, (long long)c->V, (long long)c->D);
    if (fclose(fp)) {
        perror(path);
        exit(1);
    }
    tg_graph *g = tg_graph_load(path, ctx);
    if (!g) bench_die(path, ctx);
    return g;
}

static void step_call(void *ud) { bench_run_call(ud); }

int main(int argc, char **argv) {
    double min_s = argc > 1 ? atof(argv[1]) : 0.3;
    ecase cases[16];
    int nc = 0;
    for (int i = 2; i < argc && nc < 16; i++) {
        long long V, D, B;
        if (sscanf(argv[i], "%lldx%lldx%lld", &V, &D, &B) != 3 || V < 1 || D < 1 || B < 1) {
            fprintf(stderr, "bench_embed: '%s' is not VxDxB\n", argv[i]);
            return 2;
        }
        cases[nc++] = (ecase){V, D, B};
    }
    if (!nc) {
        cases[nc++] = (ecase){50000, 256, 64};
        cases[nc++] = (ecase){50000, 256, 1024};
        cases[nc++] = (ecase){1000000, 64, 1024};
    }
    char args[1024];
    int k = snprintf(args, sizeof args, "%g", min_s);
    for (int i = 0; i < nc && k < (int)sizeof args - 64; i++)
        k += snprintf(args + k, sizeof args - (size_t)k, " %lldx%lldx%lld", (long long)cases[i].V,
                      (long long)cases[i].D, (long long)cases[i].B);
    char *peer = bench_peer("embed.py", args);
    printf("embedding SGD step, float32: cost = sum((E[idx] - t)^2), E -= 0.01 grad(E); ms per step, best of 3 "
           "rounds of %g s; tg with %d OpenMP threads%s\n",
           min_s, omp_get_max_threads(), peer ? "" : "\nnumpy: not installed (tg only)");
    if (peer && strstr(peer, "torch: not installed")) printf("torch: not installed (tg and NumPy only)\n");
    printf("  %-20s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "V x D, batch", "tg", "tg as", "numpy", "torch", "torch",
           "torch", "torch", "torch", "torch");
    printf("  %-20s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "", "", "written", "add.at", "sparse 1t", "dense 1t",
           "index 1t", "sparse 2t", "dense 2t", "index 2t");
    char dir[] = "/tmp/tg-bench-embed-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    tg_ctx *ctx = tg_ctx_new();
    int rc = 0;
    for (int ci = 0; ci < nc; ci++) {
        const ecase *c = &cases[ci];
        char npy[600];
        snprintf(npy, sizeof npy, "%s/E.npy", dir);
        write_table(npy, c->V, c->D);
        /* each function from a load of its own: each trains its own table */
        tg_graph *g[2] = {load_step(dir, c, ctx), load_step(dir, c, ctx)};
        const char *ex[] = {"sparse_update", NULL};
        tg_compile_options opt[2] = {{.preset = "fast_run"}, {.preset = "fast_run", .exclude = ex}};
        tg_function *f[2];
        for (int w = 0; w < 2; w++) {
            int fi = tg_graph_function_find(g[w], "step", ctx);
            if (fi < 0 || !(f[w] = tg_function_compile(g[w], fi, &opt[w], ctx))) bench_die("compile", ctx);
        }
        int64_t ish[1] = {c->B}, tsh[2] = {c->B, c->D};
        tg_array *idx = tg_array_new(TG_INT64, 1, ish), *t = tg_array_new(TG_FLOAT32, 2, tsh);
        int64_t *ip = tg_array_data(idx);
        float *tp = tg_array_data(t);
        uint64_t s = 99;
        for (int64_t i = 0; i < c->B; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ip[i] = (int64_t)((s >> 11) % (uint64_t)c->V);
        }
        for (int64_t i = 0; i < c->B * c->D; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            tp[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        }
        /* one step each from the same table: the same table after it */
        for (int w = 0; w < 2; w++) {
            bench_call bc = {f[w], {idx, t}, ctx};
            bench_run_call(&bc);
        }
        const tg_array *e0 = tg_function_shared_get(f[0], "E"), *e1 = tg_function_shared_get(f[1], "E");
        const float *a = tg_array_data(e0), *b = tg_array_data(e1);
        double worst = 0;
        for (int64_t i = 0; i < c->V * c->D; i++) worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
        if (worst > 1e-6) {
            fprintf(stderr, "bench_embed: the two tg steps differ by %g\n", worst);
            rc = 1;
        }
        double ms[2];
        for (int w = 0; w < 2; w++) {
            bench_call bc = {f[w], {idx, t}, ctx};
            ms[w] = 1e3 / bench_rate(step_call, &bc, 2, min_s);
        }
        char label[64], key[96];
        snprintf(label, sizeof label, "%lld x %lld, %lld", (long long)c->V, (long long)c->D, (long long)c->B);
        printf("  %-20s %9.4f %9.4f", label, ms[0], ms[1]);
        static const char *const forms[] = {"numpy_addat", "torch_sparse_1", "torch_dense_1", "torch_index_1",
                                            "torch_sparse_2", "torch_dense_2", "torch_index_2"};
        for (int p = 0; p < 7; p++) {
            snprintf(key, sizeof key, "%lld_%lld_%lld_%s", (long long)c->V, (long long)c->D, (long long)c->B,
                     forms[p]);
            double v = bench_peer_value(peer, key);
            if (v > 0) printf(" %9.4f", v);
            else printf(" %9s", "-");
        }
        printf("\n");
        tg_array_free(idx);
        tg_array_free(t);
        for (int w = 0; w < 2; w++) {
            tg_function_free(f[w]);
            tg_graph_free(g[w]);
        }
        unlink(npy);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/embed.json", dir);
    unlink(path);
    rmdir(dir);
    printf("  tg: fast_run (sparse_update: the rows read, the table written in place); tg as written: "
           "--exclude sparse_update\n");
    free(peer);
    tg_ctx_free(ctx);
    return rc;
}
