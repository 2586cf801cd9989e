/* Private: the scan op's parsed attributes, shared by the op (scan.c) and
 * its gradient (scan_grad.c). */
#ifndef TG_SCAN_H
#define TG_SCAN_H

#include "ops/op.h"
#include "tg/function.h"

enum { SCAN_MAX_IO = 256, SCAN_MAX_TAP = 1 << 20 };

typedef struct scan_p {
    int nseq, nrec, nnr, nns;
    bool has_n, has_until, backwards;
    int64_t trunc;
    /* Taps, flattened: sequence i's are taps[seq_off[i] ..], seq_ntaps[i]
     * of them; recurrent output j's taps[out_off[j] ..]. One block:
     * seq_ntaps, out_ntaps, seq_off, out_off. */
    int *seq_ntaps, *out_ntaps, *seq_off, *out_off;
    int *taps;
    int seq_min[SCAN_MAX_IO];  /* min(taps, 0) */
    int seq_span[SCAN_MAX_IO]; /* max(taps, 0) - min(taps, 0) */
    int out_k[SCAN_MAX_IO];    /* the largest -tap */
    bool out_flat[SCAN_MAX_IO]; /* taps exactly [-1]: a per-step-shaped init */
    int nbin, nbout;           /* the body's inputs and outputs */
    tg_graph *body;            /* parsed when loaded */
    tg_function *fn;           /* compiled when first run */
    bool win_ok[SCAN_MAX_IO];  /* body output o may be written through a window */
    double step_flops, step_bytes; /* the last run's last step (profiler) */
    /* attrs.keep_last (an optimizer form, docs/optimizer.md): output o
     * keeps only its last keep[o] steps (0: all), in a ring of rows. */
    int64_t keep[SCAN_MAX_IO];
    bool has_keep;
    int64_t last_steps; /* steps of the last run (the profiler's, with keep_last) */
    int64_t copies;                /* rows the last run copied (not landed in place) */
} scan_p;

/* The body input of tap q of sequence i / of recurrent output j, and of
 * non-sequence k. */
int tg_scan_bin_seq(const scan_p *p, int i, int q);
int tg_scan_bin_rec(const scan_p *p, int j, int q);
int tg_scan_bin_ns(const scan_p *p, int k);
/* Compile the body into p->fn unless done. */
int tg_scan_compile_body(tg_node *n, tg_ctx *ctx);

struct tg_gb;
int tg_scan_grad(struct tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);

#endif
