/* tgc cache list|clear: the compiled-kernel cache of composite ops, CPU
 * kernels and GPU kernels (NVRTC) alike (TG_CACHE_DIR, else
 * $XDG_CACHE_HOME/tg, else ~/.cache/tg).
 *
 *   tgc cache list    one line per entry: hash, kind ("cpu", or "cuda" and
 *                     the NVRTC target), size, age, the first line of its
 *                     source; then a total
 *   tgc cache clear   remove the entries (and the temporary files of
 *                     processes no longer running; nothing else in the
 *                     folder), under the folder's lock: a compile in
 *                     progress finishes first (it says it waits)
 *   tgc cache clear --older-than AGE
 *                     only the entries not used for AGE (30d, 12h, 90m,
 *                     3600s; a bare number is days)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ops/composite.h"

int tgc_cmd_cache(int argc, char **argv);

static const char *TOOL = "tgc cache";

static void age_str(double s, char *buf, size_t n) {
    if (s < 120)
        snprintf(buf, n, "%.0fs", s < 0 ? 0 : s);
    else if (s < 7200)
        snprintf(buf, n, "%.0fm", s / 60);
    else if (s < 172800)
        snprintf(buf, n, "%.0fh", s / 3600);
    else
        snprintf(buf, n, "%.0fd", s / 86400);
}

/* AGE of --older-than: a number of days, or of seconds, minutes, hours
 * or days with s, m, h or d after it. Seconds, or -1 when it is not one. */
static double parse_age(const char *s) {
    char *end;
    if (!*s || *s == '-' || *s == '+' || (*s != '.' && (*s < '0' || *s > '9'))) return -1;
    double v = strtod(s, &end);
    double unit = !*end ? 86400 : !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600
                : !strcmp(end, "d") ? 86400 : -1;
    if (unit < 0 || !isfinite(v) || v < 0 || v * unit > 1e12) return -1;
    return v * unit;
}

int tgc_cmd_cache(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: tgc cache list|clear [--older-than AGE]\n"
               "list   the compiled composite kernels in the cache folder (kind cpu: C\n"
               "       compiled by the system compiler; kind cuda: compiled by NVRTC),\n"
               "       AGE: since each was compiled or last loaded (to the hour)\n"
               "clear  remove them (waits for a compile in progress)\n"
               "       --older-than AGE: only those not used for AGE (30d, 12h, 90m,\n"
               "       3600s; a bare number is days)\n"
               "The folder: TG_CACHE_DIR, else $XDG_CACHE_HOME/tg, else ~/.cache/tg.\n"
               "Entries unused for TG_CACHE_MAX_AGE days (default 30; 0: keep them) are\n"
               "removed by themselves, once a day.\n");
        return TG_EXIT_OK;
    }
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        cli_print_version("tgc");
        return TG_EXIT_OK;
    }
    double min_age = -1;
    if (argc >= 3 && !strcmp(argv[1], "clear")) {
        const char *age = NULL;
        if (argc == 4 && !strcmp(argv[2], "--older-than"))
            age = argv[3];
        else if (argc == 3 && !strncmp(argv[2], "--older-than=", 13))
            age = argv[2] + 13;
        else if (argc == 3 && !strcmp(argv[2], "--older-than")) {
            cli_error(TOOL, "--older-than needs an AGE (30d, 12h, 90m, 3600s)");
            return TG_EXIT_USAGE;
        } else {
            cli_error(TOOL, "unexpected '%s' after clear (see tgc cache --help)", argv[2]);
            return TG_EXIT_USAGE;
        }
        if ((min_age = parse_age(age)) < 0) {
            cli_error(TOOL, "--older-than '%s': expected an age such as 30d, 12h, 90m or 3600s", age);
            return TG_EXIT_USAGE;
        }
    } else if (argc != 2 || (strcmp(argv[1], "list") && strcmp(argv[1], "clear"))) {
        cli_error(TOOL, "expected 'list' or 'clear' (see tgc cache --help)");
        return TG_EXIT_USAGE;
    }
    char *dir = tg_kcache_dir();
    if (!dir) {
        cli_error(TOOL, "no cache folder: set TG_CACHE_DIR (or HOME)");
        return TG_EXIT_USAGE;
    }
    tg_ctx *ctx = tg_ctx_new();
    int rc = TG_EXIT_OK;
    if (!strcmp(argv[1], "clear")) {
        int removed = 0;
        if (tg_kcache_busy(dir)) {
            fprintf(stderr, "%s: waiting for a compile in progress in %s\n", TOOL, dir);
            fflush(stderr);
        }
        if (tg_kcache_clear_older(dir, min_age, &removed, ctx)) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_FOUND;
        } else {
            printf("removed %d entr%s from %s\n", removed, removed == 1 ? "y" : "ies", dir);
        }
    } else {
        tg_kcache_entry *e = NULL;
        int n = 0;
        if (tg_kcache_list(dir, &e, &n, ctx)) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_FOUND;
        } else {
            long long total = 0;
            if (n) printf("%-32s %-16s %10s %6s  %s\n", "HASH", "KIND", "BYTES", "AGE", "SOURCE");
            for (int i = 0; i < n; i++) {
                char age[32];
                age_str(e[i].age_seconds, age, sizeof age);
                printf("%-32s %-16s %10lld %6s  %s\n", e[i].hash, e[i].kind, (long long)e[i].bytes,
                       age, e[i].first_line);
                total += e[i].bytes;
            }
            printf("%d entr%s, %lld bytes in %s\n", n, n == 1 ? "y" : "ies", total, dir);
        }
        tg_free(e);
    }
    tg_ctx_free(ctx);
    tg_free(dir);
    return rc;
}
