/* Optimization time by graph shape: each shape of shapes.h (the motifs
 * that once made tg's optimizer, or Theano's, grow faster than the graph)
 * at S, 2 S, 4 S and 8 S steps, loaded and compiled with fast_run: the
 * best of 3 compiles of each size and the growth of the compile from one
 * size to the next (2.0 is linear). bench_opt does the same for one
 * generated graph up to 100,000 nodes; tests/unit/test_scaling.c counts,
 * instead of timing, the work of each shape at S and 4 S.
 *
 *   bench_shapes [S [NAME...]]    S default 2000; NAME...: those shapes alone
 *   bench_shapes --dump NAME S    print the graph of NAME at S steps
 *
 * Composites run in the block interpreter unless TG_COMPOSITE is set:
 * otherwise a new body's first compile would time the C compiler. */
#include "bench_common.h"
#include "shapes.h"

static double compile_best(tg_graph *g, int *nodes, tg_ctx *ctx) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        tg_compile_options o = {.preset = "fast_run"};
        double t0 = bench_now();
        tg_function *f = tg_function_compile(g, 0, &o, ctx);
        double t = bench_now() - t0;
        if (!f) bench_die("compile", ctx);
        *nodes = tg_function_node_count(f);
        tg_function_free(f);
        if (t < best) best = t;
    }
    return best;
}

/* A step count from 4 to 1,000,000 (8 times it still an int), or -1. */
static int steps_arg(const char *a) {
    char *end;
    long v = strtol(a, &end, 10);
    return *a && !*end && v >= 4 && v <= 1000000 ? (int)v : -1;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--dump")) {
        int steps = steps_arg(argv[3]);
        if (steps < 0) {
            fprintf(stderr, "bench_shapes: steps '%s': expected a whole number from 4 to 1000000\n", argv[3]);
            return 2;
        }
        for (int i = 0; i < NSHAPES; i++)
            if (!strcmp(SHAPES[i].name, argv[2])) {
                tg_str s = {0};
                SHAPES[i].gen(&s, steps);
                if (s.oom) {
                    fprintf(stderr, "bench_shapes: out of memory\n");
                    return 1;
                }
                fputs(s.s, stdout);
                putchar('\n');
                tg_str_free(&s);
                return 0;
            }
        fprintf(stderr, "bench_shapes: no shape '%s'\n", argv[2]);
        return 2;
    }
    int s0 = argc > 1 ? steps_arg(argv[1]) : 2000;
    if (s0 < 0) {
        fprintf(stderr, "usage: bench_shapes [STEPS [NAME...]] | --dump NAME STEPS (STEPS from 4 to 1000000)\n");
        return 2;
    }
    for (int a = 2; a < argc; a++) {
        bool known = false;
        for (int i = 0; i < NSHAPES; i++) known |= !strcmp(argv[a], SHAPES[i].name);
        if (!known) {
            fprintf(stderr, "bench_shapes: no shape '%s'\n", argv[a]);
            return 2;
        }
    }
    setenv("TG_COMPOSITE", "interp", 0);
    tg_ctx *ctx = tg_ctx_new();
    printf("fast_run compile, best of 3, by shape (steps x1, x2, x4, x8 of %d; nodes as loaded)\n", s0);
    printf("%-13s %9s %9s %9s %9s   %s\n", "shape", "x1 s", "x2 s", "x4 s", "x8 s",
           "growth per doubling (2.0: linear)");
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < NSHAPES; i++) {
        bool want = argc <= 2;
        for (int a = 2; a < argc; a++) want |= !strcmp(argv[a], SHAPES[i].name);
        if (!want) continue;
        double t[4];
        int loaded[4];
        for (int k = 0; k < 4; k++) {
            tg_str s = {0};
            SHAPES[i].gen(&s, s0 << k);
            if (s.oom) bench_die("generate", ctx);
            tg_graph *g = tg_graph_load_string(s.s, s.len, NULL, SHAPES[i].name, ctx);
            tg_str_free(&s);
            if (!g) bench_die("load", ctx);
            loaded[k] = tg_graph_node_count(g);
            int after;
            t[k] = compile_best(g, &after, ctx);
            tg_graph_free(g);
        }
        printf("%-13s %9.4f %9.4f %9.4f %9.4f   %.2f %.2f %.2f   (%d -> %d nodes)\n", SHAPES[i].name, t[0],
               t[1], t[2], t[3], t[1] / t[0], t[2] / t[1], t[3] / t[2], loaded[0], loaded[3]);
        double g8 = t[3] / t[0];
        if (g8 > worst) {
            worst = g8;
            worst_name = SHAPES[i].name;
        }
    }
    printf("largest growth over 8x the steps: %.1fx (%s; 8.0 is linear)\n", worst, worst_name);
    tg_ctx_free(ctx);
    return 0;
}
