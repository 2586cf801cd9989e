/* .npz archives (tensor/npz.c) against NumPy (peers/npz.py), on one
 * float64 array of MIB MiB (default 256; w[i] = i % 1000 / 8, which
 * deflate shrinks about 100 times: this times inflating long matches, the
 * fast case, not a typical array of weights): tg_npz_save against np.savez, and
 * reading (open, every CRC-32 checked, the array in memory) tg's archive,
 * NumPy's stored one and NumPy's savez_compressed one, tg against
 * np.load; best of 3, seconds and GB/s of array data. The files are in
 * $TMPDIR (default /tmp) and in the page cache: this times the formats,
 * not the disk. tg's save syncs the file to the disk before its rename
 * (a save that fails leaves the previous file); np.savez does not.
 *
 *   build-bench/bench/bench_npz [MIB]
 */
#include "bench_common.h"

static void save_tg(const char *path, const tg_array *a, tg_ctx *ctx) {
    const char *names[] = {"w"};
    if (tg_npz_save(path, 1, names, &a, ctx)) bench_die("tg_npz_save", ctx);
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
    char tgp[512], stp[512], cmp[512];
    snprintf(tgp, sizeof tgp, "%s/bench_npz_%ld_tg.npz", tmp, (long)getpid());
    snprintf(stp, sizeof stp, "%s/bench_npz_%ld_np.npz", tmp, (long)getpid());
    snprintf(cmp, sizeof cmp, "%s/bench_npz_%ld_npc.npz", tmp, (long)getpid());
    tg_ctx *ctx = tg_ctx_new();
    tg_array *a = tg_array_new(TG_FLOAT64, 1, &n);
    double *w = tg_array_data(a);
    for (int64_t i = 0; i < n; i++) w[i] = (double)(i % 1000) / 8;

    double save = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now();
        save_tg(tgp, a, ctx);
        double t = bench_now() - t0;
        if (t < save) save = t;
    }
    char args[1600];
    snprintf(args, sizeof args, "%s %s %s", tgp, stp, cmp);
    char *peer = bench_peer("npz.py", args);
    double np_load_tg = bench_peer_value(peer, "load_tg"), np_save = bench_peer_value(peer, "save_stored"),
           np_load = bench_peer_value(peer, "load_stored"), np_loadc = bench_peer_value(peer, "load_compressed");
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
    free(peer);
    unlink(tgp);
    unlink(stp);
    unlink(cmp);
    tg_array_free(a);
    tg_ctx_free(ctx);
    return 0;
}
