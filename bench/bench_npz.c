/* .npz archives (tensor/npz.c) against NumPy (peers/npz.py), on one
 * float64 array of MIB MiB (default 256; w[i] = i % 1000 / 8, which
 * deflate shrinks about 100 times: this times inflating long matches, the
 * fast case, not a typical array of weights): tg_npz_save against np.savez, and
 * reading (open, every CRC-32 checked, the array in memory) tg's archive,
 * NumPy's stored one and NumPy's savez_compressed one, tg against
 * np.load; best of 3, seconds and GB/s of array data. Then deflating
 * (tg_npz_save_compressed, zlib's level 6 as np.savez_compressed) that
 * array and one of float32 weights, normal noise of MIB / 8 MiB, which
 * deflate shrinks by less than a tenth (the typical case: the mantissas do not
 * repeat). The files are in $TMPDIR (default /tmp) and in the page cache:
 * this times the formats, not the disk. tg's saves sync the file to the
 * disk before its rename (a save that fails leaves the previous file);
 * NumPy's do not.
 *
 *   build-bench/bench/bench_npz [MIB]
 */
#include <math.h>
#include <omp.h>
#include <sys/stat.h>

#include "bench_common.h"

/* Save a as the archive's array `name`: stored (level < -1) or deflated. */
static void save_tg(const char *path, const char *name, const tg_array *a, int level, tg_ctx *ctx) {
    const char *names[] = {name};
    if (level < -1 ? tg_npz_save(path, 1, names, &a, ctx)
                   : tg_npz_save_compressed(path, 1, names, &a, level, ctx))
        bench_die("tg_npz_save", ctx);
}

static double save_best(const char *path, const char *name, const tg_array *a, int level, tg_ctx *ctx) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now();
        save_tg(path, name, a, level, ctx);
        double t = bench_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

static double load_tg(const char *path, size_t nbytes, tg_ctx *ctx) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now();
        tg_npz *z = tg_npz_open(path, ctx);
        if (!z) bench_die("tg_npz_open", ctx);
        tg_array *a = tg_npz_read(z, tg_npz_find(z, "w"), ctx);
        if (!a) bench_die("tg_npz_read", ctx);
        double t = bench_now() - t0;
        if (tg_array_size(a) * 8 != (int64_t)nbytes || tg_array_get_flat(a, 1001) != 1 / 8.0) {
            fprintf(stderr, "bench_npz: %s read back other values\n", path);
            exit(1);
        }
        tg_array_free(a);
        tg_npz_close(z);
        if (t < best) best = t;
    }
    return best;
}

/* Read every array of the archive at path: with tg_npz_read_many (all at
 * once), or one tg_npz_read after another; best of 3, checking the total
 * size. */
static double load_parts(const char *path, bool many, size_t nbytes, tg_ctx *ctx) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now();
        tg_npz *z = tg_npz_open(path, ctx);
        if (!z) bench_die("tg_npz_open", ctx);
        int n = tg_npz_count(z), idx[64];
        tg_array *a[64];
        if (n > 64) n = 64;
        for (int i = 0; i < n; i++) idx[i] = i;
        if (many) {
            if (tg_npz_read_many(z, n, idx, a, ctx)) bench_die("tg_npz_read_many", ctx);
        } else {
            for (int i = 0; i < n; i++)
                if (!(a[i] = tg_npz_read(z, i, ctx))) bench_die("tg_npz_read", ctx);
        }
        double t = bench_now() - t0;
        size_t got = 0;
        for (int i = 0; i < n; i++) {
            got += (size_t)tg_array_size(a[i]) * 4;
            tg_array_free(a[i]);
        }
        tg_npz_close(z);
        if (got != nbytes) {
            fprintf(stderr, "bench_npz: %s holds %zu bytes, not %zu\n", path, got, nbytes);
            exit(1);
        }
        if (t < best) best = t;
    }
    return best;
}

/* A file's size in MB, 0 when it is not there. */
static double file_mb(const char *path) {
    struct stat st;
    return stat(path, &st) ? 0 : st.st_size / 1e6;
}

/* Where the peer writes np.savez_compressed of the noise: NOISE.npz ->
 * NOISE_np.npz. */
static const char *nzc2(const char *noise) {
    static char p[600];
    snprintf(p, sizeof p, "%.*s_np.npz", (int)(strlen(noise) - 4), noise);
    return p;
}

static void row(const char *what, double tg, double np, size_t nbytes) {
    printf("%-34s %9.4f %7.2f", what, tg, nbytes / tg / 1e9);
    if (np > 0)
        printf(" %9.4f %7.2f %7.2f\n", np, nbytes / np / 1e9, tg / np);
    else
        printf(" %9s\n", "-");
}

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 256;
    if (mib < 1) mib = 1;
    int64_t n = (int64_t)mib << 17; /* float64: 2^17 per MiB */
    size_t nbytes = (size_t)n * 8;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char tgp[512], stp[512], cmp[512], tgc[512], nzp[512], nzc[512];
    long pid = (long)getpid();
    snprintf(tgp, sizeof tgp, "%s/bench_npz_%ld_tg.npz", tmp, pid);
    snprintf(stp, sizeof stp, "%s/bench_npz_%ld_np.npz", tmp, pid);
    snprintf(cmp, sizeof cmp, "%s/bench_npz_%ld_npc.npz", tmp, pid);
    snprintf(tgc, sizeof tgc, "%s/bench_npz_%ld_tgc.npz", tmp, pid);
    snprintf(nzp, sizeof nzp, "%s/bench_npz_%ld_noise.npz", tmp, pid);
    snprintf(nzc, sizeof nzc, "%s/bench_npz_%ld_noisec.npz", tmp, pid);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    double *w = tg_array_data(a);
    for (int64_t i = 0; i < n; i++) w[i] = (double)(i % 1000) / 8;
    /* weights: normal noise (Box-Muller over a 64-bit LCG), float32 */
    int64_t nn = (int64_t)(mib > 8 ? mib / 8 : 1) << 18;
    size_t nzbytes = (size_t)nn * 4;
    tg_array *noise = tg_array_new(TG_FLOAT32, 1, &nn);
    float *r = tg_array_data(noise);
    uint64_t x = 88172645463325252ull;
    for (int64_t i = 0; i < nn; i += 2) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            u[k] = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
        }
        double m = sqrt(-2 * log(u[0])) * 0.05;
        r[i] = (float)(m * cos(6.283185307179586 * u[1]));
        if (i + 1 < nn) r[i + 1] = (float)(m * sin(6.283185307179586 * u[1]));
    }

    double save = save_best(tgp, "w", a, -2, ctx);
    double savec = save_best(tgc, "w", a, -1, ctx);
    save_tg(nzp, "r", noise, -2, ctx); /* for the peer */
    double savenz = save_best(nzc, "r", noise, -1, ctx);
    char args[3200];
    snprintf(args, sizeof args, "%s %s %s %s %s", tgp, stp, cmp, tgc, nzp);
    char *peer = bench_peer("npz.py", args);
    double np_load_tg = bench_peer_value(peer, "load_tg"), np_save = bench_peer_value(peer, "save_stored"),
           np_load = bench_peer_value(peer, "load_stored"), np_loadc = bench_peer_value(peer, "load_compressed"),
           np_savec = bench_peer_value(peer, "save_compressed"),
           np_savenz = bench_peer_value(peer, "save_noise_compressed");
    printf(".npz, one float64 array of %ld MiB, best of 3 (s, GB/s of array data)\n", mib);
    printf("%-34s %9s %7s %9s %7s %7s\n", "", "tg", "GB/s", "NumPy", "GB/s", "tg/np");
    row("save, stored (tg syncs, NumPy not)", save, np_save, nbytes);
    row("load tg's archive", load_tg(tgp, nbytes, ctx), np_load_tg, nbytes);
    if (peer) {
        row("load np.savez's archive", load_tg(stp, nbytes, ctx), np_load, nbytes);
        row("load np.savez_compressed's", load_tg(cmp, nbytes, ctx), np_loadc, nbytes);
    } else {
        printf("(peer: NumPy is not available)\n");
    }
    row("save, deflated (level 6)", savec, np_savec, nbytes);
    printf("deflated sizes: tg %.2f MB, NumPy %.2f MB; %d OpenMP threads\n", file_mb(tgc), file_mb(cmp),
           omp_get_max_threads());
    printf("\nfloat32 weights, normal noise, %.0f MiB\n", nzbytes / 1048576.0);
    row("save, deflated (level 6)", savenz, np_savenz, nzbytes);
    printf("deflated sizes: tg %.2f MB, NumPy %.2f MB (stored %.2f MB)\n", file_mb(nzc), file_mb(nzc2(nzp)),
           file_mb(nzp));
    char parts[600];
    snprintf(parts, sizeof parts, "%.*s_parts.npz", (int)(strlen(nzp) - 4), nzp);
    if (peer) {
        double many = load_parts(parts, true, nzbytes, ctx), one = load_parts(parts, false, nzbytes, ctx);
        row("load np.savez_compressed, 8 arrays", many, bench_peer_value(peer, "load_parts"), nzbytes);
        printf("(tg_npz_read_many; one array at a time: %.4f s)\n", one);
    }
    free(peer);
    const char *files[] = {tgp, stp, cmp, tgc, nzp, nzc, nzc2(nzp), parts};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
    tg_array_free(a);
    tg_array_free(noise);
    tg_ctx_free(ctx);
    return 0;
}
