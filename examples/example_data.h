/* The command line of the examples' data writers (logreg_data.c,
 * mlp_data.c): OUTDIR [N]. */
#ifndef TG_EXAMPLE_DATA_H
#define TG_EXAMPLE_DATA_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Reads OUTDIR and N (default n_default, at most n_max) and makes OUTDIR
 * (as -o of tgc run makes its folder). Returns -1 to go on, else the exit
 * status (0 for --help), having said why on one line. */
static int example_data_args(int argc, char **argv, int64_t n_default, int64_t n_max, int64_t *n) {
    const char *me = argv[0];
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s OUTDIR [N]\nwrites N examples (default %lld) as OUTDIR/x.npy and OUTDIR/y.npy\n", me,
               (long long)n_default);
        return 0;
    }
    if (argc < 2 || argc > 3 || argv[1][0] == '-' || !argv[1][0]) {
        fprintf(stderr, "usage: %s OUTDIR [N]\n", me);
        return 2;
    }
    *n = n_default;
    if (argc == 3) {
        char *end;
        errno = 0;
        long long v = strtoll(argv[2], &end, 10);
        if (errno || end == argv[2] || *end || v <= 0 || v > n_max) {
            fprintf(stderr, "%s: N: expected a whole number from 1 to %lld, got '%s'\n", me, (long long)n_max,
                    argv[2]);
            return 2;
        }
        *n = v;
    }
    if (mkdir(argv[1], 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s: %s\n", me, argv[1], strerror(errno));
        return 2;
    }
    return -1;
}

#endif
