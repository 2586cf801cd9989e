/* tgprof: profile a function node by node (Theano's ProfileStats).
 *
 *   tgprof FILE [-f NAME] [-i ID=VALUE]... [--calls N] [--warmup N]
 *          [--json OUT.json] [--trace OUT.trace.json] [--top N] [-O PRESET]
 *          [--include TAG]... [--exclude TAG]... [--device cpu|cuda] [--sync]
 *          [--no-bodies]
 *
 * Runs the function, then prints the function summary, the time per op
 * class, per op (op + attrs), per node, per original node (through the
 * optimizer's rewrites), the memory a call needs, and the optimizer's own
 * profile, then the bodies of scan and op_from_graph nodes (Theano's "Scan
 * Op profiling": steps, the time in the body's nodes and the loop's own,
 * the body's ops and nodes). --json writes the same as a report
 * (schemas/profile.schema.json); --trace a Chrome trace (one event per call
 * enclosing one per node, and the first runs of body nodes within theirs).
 * With --device cuda the nodes placed on the GPU are timed with CUDA
 * events (no synchronisation), or with --sync on the host clock around a
 * synchronised device (tg/profile.h).
 *
 * Exit status: 0 success; 1 a run-time failure; 2 bad usage or bad input.
 */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ompspin.h"
#include "profreport.h"
#include "tensor/tensor.h"
#include "vm/vm.h"

static const char *TOOL = "tgprof";

/* The trace keeps at most this many events (a call's and its nodes');
 * later calls are counted but not drawn, so that a long run does not
 * write gigabytes. */
#define TRACE_MAX_EVENTS 500000L
/* And at most this many runs of body nodes (scan, op_from_graph): the
 * first ones, in the first calls. */
#define TRACE_MAX_BODY_EVENTS 200000L

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgprof FILE [-f NAME] [-i ID=VALUE]... [--calls N] [--warmup N]\n"
            "              [--json OUT.json] [--trace OUT.trace.json] [--top N] [-O PRESET]\n"
            "              [--include TAG]... [--exclude TAG]... [--device cpu|cuda] [--sync]\n"
            "              [--no-bodies]\n"
            "\n"
            "Run a function of FILE (interchange JSON, or a compiled-function .tgf,\n"
            "restored without optimizing) and report where the time and\n"
            "the memory go: per op class, per op (op + attrs), per node, per original\n"
            "node of the file (through fusion), the memory of a call, and the\n"
            "optimizer's own time.\n"
            "  -f NAME        the function (default: the only one, or 'main')\n"
            "  -i ID=VALUE    an input: a .npy file, an array of a .npz archive\n"
            "                 (FILE.npz or FILE.npz:NAME), or a JSON literal (3.5,\n"
            "                 [1, 2], true, \"nan\") read with the input's declared dtype\n"
            "  -i FILE.npz    every input named by an array of the archive\n"
            "  --calls N      profiled calls (default 10); updates of shared\n"
            "                 variables are applied after each, as in tgc run\n"
            "  --warmup N     calls before profiling, not counted (default 1)\n"
            "  --json OUT     write the report as JSON (schemas/profile.schema.json)\n"
            "  --trace OUT    write a Chrome trace (Perfetto, chrome://tracing): one\n"
            "                 event per call enclosing one per node\n"
            "                 (OUT '-': standard output, which then holds that alone,\n"
            "                 without the text report; not both. Neither may name\n"
            "                 the other's file, FILE or an -i file)\n"
            "  --top N        rows per table (default 20; 0 for all)\n"
            "  -O PRESET      none, fast_compile or fast_run (default); not for a .tgf\n"
            "  --include TAG, --exclude TAG\n"
            "                 turn rewrites on or off beyond the preset (a pass, a group\n"
            "                 such as fusion or inplace, or a rewrite's name; repeatable)\n"
            "  --device DEV   cpu (default: $TG_DEVICE, else cpu) or cuda: the nodes\n"
            "                 with a GPU kernel run on the GPU (without one, a line\n"
            "                 on stderr and the CPU); not for a .tgf\n"
            "  --sync         time GPU nodes exactly: wait for the GPU before and after\n"
            "                 each (default: CUDA events around each node, no waiting,\n"
            "                 so the GPU overlaps with the host as when not profiled)\n"
            "  --no-bodies    do not profile the bodies of scan and op_from_graph nodes\n"
            "                 (default: each body's nodes over every step, after the\n"
            "                 function's tables; their hooks cost time at every step)\n"
            "  --version      print the version\n"
            "\n"
            "Exit status: 0 success, 1 a run-time failure, 2 bad usage or bad input.\n");
}

static void human_bytes(int64_t b, char *buf, size_t size) {
    if (b < 1024)
        snprintf(buf, size, "%lld B", (long long)b);
    else if (b < 1024 * 1024)
        snprintf(buf, size, "%.1f KiB", (double)b / 1024);
    else if (b < (int64_t)1024 * 1024 * 1024)
        snprintf(buf, size, "%.1f MiB", (double)b / (1024.0 * 1024));
    else
        snprintf(buf, size, "%.2f GiB", (double)b / (1024.0 * 1024 * 1024));
}

static void shape_text(const tg_profile_output *o, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "%s(", o->ndim < 0 ? "?" : tg_dtype_name(o->dtype));
    for (int d = 0; d < o->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)o->shape[d]);
    if (k < size) snprintf(buf + k, size - k, ")");
}

/* ---- the text report ---- */

/* s escaped for a JSON string, without the quotes: a string made of
 * pieces (a name and " call 3") is written piece by piece, whole, not cut
 * to a buffer (a cut could split a UTF-8 character and drop the rest).
 * The text report writes the function's name and the file's this way
 * too, as it does op keys (scan{NAME}, print{...}): a control character
 * in one (a terminal's escape, a newline, from "\u001b" in the file)
 * would reach the terminal or forge a line of the report; DEL and the C1
 * controls (U+0080-U+009F; U+009B is a CSI to some terminals) are written
 * \u007f, \u009b too. A byte that is not part of well-formed UTF-8 (a
 * path from the command line may hold any) is written U+FFFD, so that the
 * trace is JSON that a reader takes. (Node keys are ids, which the loader
 * refuses with control characters.) */
static void put_json_chars(FILE *o, const char *s) {
    static const char ctl[] = "\n\t\r\b\f", letter[] = "ntrbf"; /* as json-c writes them, so scan{NAME} */
    for (int k; *s; s += k ? k : 1) {
        unsigned char c = (unsigned char)*s;
        const char *esc = strchr(ctl, c); /* (c is not 0 here) */
        k = prof_utf8_seq(s);
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (esc)
            fprintf(o, "\\%c", letter[esc - ctl]);
        else if (c < 0x20 || c == 0x7f)
            fprintf(o, "\\u%04x", c);
        else if (k == 2 && c == 0xc2 && (unsigned char)s[1] <= 0x9f)
            fprintf(o, "\\u%04x", (unsigned char)s[1]); /* a C1 control (U+009B: a CSI) */
        else if (!k)
            fputs("\xEF\xBF\xBD", o); /* not UTF-8 (a path's byte): U+FFFD, as jstr writes it */
        else
            fwrite(s, 1, (size_t)k, o);
    }
}

/* Shares of denom: the time in nodes (of a function), or the outer node's
 * time (body: its rows count steps). */
static void table(double denom, prof_row *r, int n, int top, const char *what, bool nodes, bool body) {
    printf("  %8s %7s %10s %11s %7s %7s %9s %9s  %s\n", body ? "<% node>" : "<% time>", "<sum %>", "<time s>",
           body ? "<per step>" : "<per call>", body ? "<steps>" : "<calls>", "<nodes>", "<MFLOP>", "<GFLOP/s>",
           what);
    double cum = 0;
    int shown = top > 0 && top < n ? top : n;
    for (int i = 0; i < shown; i++) {
        double share = denom > 0 ? r[i].seconds / denom : 0;
        cum += share;
        char mf[32] = "-", gf[32] = "-";
        if (r[i].flops > 0) {
            snprintf(mf, sizeof mf, "%.3f", r[i].flops / 1e6);
            if (r[i].seconds > 0)
                snprintf(gf, sizeof gf, "%.2f", r[i].total_flops / r[i].seconds / 1e9);
        }
        printf("  %7.2f%% %6.2f%% %10.6f %10.3es %7llu %7d %9s %9s  %s%s%s\n", 100 * share, 100 * cum,
               r[i].seconds, r[i].calls ? r[i].seconds / (double)r[i].calls : 0, (unsigned long long)r[i].calls,
               r[i].nodes, mf, gf, r[i].name, nodes && r[i].extra ? "  " : "",
               nodes && r[i].extra ? r[i].extra : "");
    }
    if (shown < n) {
        double rest = 0;
        for (int i = shown; i < n; i++) rest += r[i].seconds;
        printf("  ... (remaining %d %s account for %.2f%% (%.6f s) of %s)\n", n - shown, what,
               denom > 0 ? 100 * rest / denom : 0, rest, body ? "the node's time" : "the time in nodes");
    }
    printf("\n");
}

/* One body: the outer node, its calls and steps, the time in it, in the
 * body's nodes and the loop's own; then the body's ops and nodes. */
static void print_body(const prof_info *top_P, const prof_body *B, int top) {
    const prof_info *P = &B->P;
    /* (the path whole: a buffer cut a long one inside a UTF-8 character
     * and dropped its node's key) */
    printf("Body of %s\n", B->path);
    for (size_t i = 0, w = strlen("Body of ") + strlen(B->path); i < w && i < 200; i++) putchar('-');
    printf("\n");
    bool scan = !strcmp(B->node_op, "scan");
    double node_s = P->total_s, body_s = P->nodes_s, over = node_s - body_s;
    double steps = (double)B->steps, calls = (double)P->calls;
    printf("  Function: '");
    put_json_chars(stdout, tg_function_name(P->f));
    printf("', %d node%s\n", P->n, P->n == 1 ? "" : "s");
    if (scan)
        printf("  Calls of the node: %ld, steps in all: %llu (%.1f per call)\n", P->calls,
               (unsigned long long)B->steps, calls > 0 ? steps / calls : 0);
    else
        printf("  Calls of the node: %ld (one run of the body each)\n", P->calls);
    printf("  Time in the node: %.6f s (%.2f%% of the time in nodes, %.3e s per call)\n", node_s,
           top_P->nodes_s > 0 ? 100 * node_s / top_P->nodes_s : 0, calls > 0 ? node_s / calls : 0);
    printf("  Time in the body's nodes: %.6f s (%.2f%% of the node's time, %.3e s per %s)\n", body_s,
           node_s > 0 ? 100 * body_s / node_s : 0, steps > 0 ? body_s / steps : 0, scan ? "step" : "call");
    printf("  %s: %.6f s (%.2f%% of the node's time, %.3e s per %s: the %s's own work and the\n"
           "    profiler's hooks on the body's nodes)\n",
           scan ? "Loop overhead" : "Overhead", over, node_s > 0 ? 100 * over / node_s : 0,
           steps > 0 ? over / steps : 0, scan ? "step" : "call", B->node_op);
    printf("\n");
    prof_row *r = calloc((size_t)P->n + 1, sizeof *r);
    if (!r) return;
    for (int t = 1; t < 3; t++) {
        for (int k = 0; k < P->n; k++)
            r[k] = (prof_row){k, t == 1 ? P->opkey[k] : tg_function_node_key(P->f, k), t == 2 ? P->opkey[k] : NULL,
                              (double)P->st[k].ns * 1e-9, P->st[k].calls, 1, P->st[k].flops,
                              P->st[k].flops * (double)P->st[k].calls, P->st[k].bytes_new};
        int m = t == 1 ? prof_group_rows(r, P->n) : P->n;
        if (t == 2) qsort(r, (size_t)P->n, sizeof *r, prof_cmp_row);
        printf("  %s\n", t == 1 ? "Ops (op + attrs)" : "Nodes (apply)");
        table(node_s, r, m, top, t == 1 ? "ops" : "nodes", t == 2, true);
    }
    free(r);
}

/* ---- file nodes the optimizer removed ---- */

/* A set of strings (borrowed), open addressing, at least half empty. */
typedef struct key_set {
    const char **slot;
    size_t cap, n;
} key_set;

static size_t key_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

/* Whether s is in the set; with add, put it there (false out of memory
 * sets *oom). */
static bool key_set_has(key_set *ks, const char *s, bool add, bool *oom) {
    if (add && (ks->n + 1) * 2 > ks->cap) {
        size_t cap = ks->cap ? 2 * ks->cap : 64;
        const char **slot = calloc(cap, sizeof *slot);
        if (!slot) {
            *oom = true;
            return false;
        }
        for (size_t i = 0; i < ks->cap; i++)
            if (ks->slot[i]) {
                size_t j = key_hash(ks->slot[i]) & (cap - 1);
                while (slot[j]) j = (j + 1) & (cap - 1);
                slot[j] = ks->slot[i];
            }
        free(ks->slot);
        ks->slot = slot;
        ks->cap = cap;
    }
    if (!ks->cap) return false;
    size_t i = key_hash(s) & (ks->cap - 1);
    for (; ks->slot[i]; i = (i + 1) & (ks->cap - 1))
        if (strcmp(ks->slot[i], s) == 0) return true;
    if (add) {
        ks->slot[i] = s;
        ks->n++;
    }
    return false;
}

/* The nodes of the file that no scheduled node stands for, because a
 * rewrite removed them (log_exp, constant folding, what died with a
 * rewrite...): from the function's rewrite record, each key whose first
 * appearance there is in a removed list (so a node of the file, or of a
 * gradient's expansion, not one a rewrite made), whose last is too (a
 * merge's survivor, or an in-place node, is removed and created again by
 * the same entry), and that is among no scheduled node's origins (rows:
 * tg_profile_origins'). Into *keys and *by (the rewrite that removed it
 * for good; both new arrays of borrowed strings, in the record's order of
 * those rewrites). Returns the count, or -1 out of memory. */
static int removed_nodes(const tg_function *f, const tg_profile_origin *o, int nrows, const char ***keys,
                         const char ***by) {
    key_set origins = {0}, seen = {0}, made = {0}, done = {0};
    bool oom = false;
    int n = 0, cap = 0, nrw = tg_function_rewrite_count(f);
    *keys = NULL;
    *by = NULL;
    for (int i = 0; i < nrows && !oom; i++) key_set_has(&origins, o[i].key, true, &oom);
    /* the keys a rewrite made: first seen in a created list */
    for (int i = 0; i < nrw && !oom; i++) {
        tg_rewrite_info r;
        if (tg_function_rewrite_get(f, i, &r)) continue;
        for (int j = 0; j < r.nremoved && !oom; j++) key_set_has(&seen, r.removed[j], true, &oom);
        for (int j = 0; j < r.ncreated && !oom; j++)
            if (!key_set_has(&seen, r.created[j], true, &oom) && !oom) key_set_has(&made, r.created[j], true, &oom);
    }
    /* backwards: the last event of each key (an entry removes, then
     * creates) */
    for (int i = nrw - 1; i >= 0 && !oom; i--) {
        tg_rewrite_info r;
        if (tg_function_rewrite_get(f, i, &r)) continue;
        for (int j = 0; j < r.ncreated && !oom; j++) key_set_has(&done, r.created[j], true, &oom);
        for (int j = r.nremoved - 1; j >= 0 && !oom; j--) {
            const char *k = r.removed[j];
            if (key_set_has(&done, k, true, &oom) || oom || key_set_has(&made, k, false, &oom) ||
                key_set_has(&origins, k, false, &oom))
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                const char **k2 = realloc(*keys, (size_t)cap * sizeof *k2);
                if (k2) *keys = k2;
                const char **b2 = realloc(*by, (size_t)cap * sizeof *b2);
                if (b2) *by = b2;
                if (!k2 || !b2) {
                    oom = true;
                    break;
                }
            }
            (*keys)[n] = k;
            (*by)[n++] = r.name;
        }
    }
    free(origins.slot);
    free(seen.slot);
    free(made.slot);
    free(done.slot);
    if (oom) {
        free(*keys);
        free(*by);
        *keys = *by = NULL;
        return -1;
    }
    /* (found backwards) */
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        const char *t = (*keys)[i];
        (*keys)[i] = (*keys)[j];
        (*keys)[j] = t;
        t = (*by)[i];
        (*by)[i] = (*by)[j];
        (*by)[j] = t;
    }
    return n;
}

static void print_report(const prof_info *P, int top, const tg_profile_memory *mem, const prof_body *bodies,
                         int nbodies, bool no_bodies) {
    const tg_function *f = P->f;
    int n = P->n;
    printf("Function profile\n================\n");
    printf("  File: ");
    put_json_chars(stdout, P->path);
    printf(", function '");
    put_json_chars(stdout, tg_function_name(f));
    printf("', preset %s\n", P->preset);
    printf("  Calls: %ld (after %ld warm-up call%s)\n", P->calls, P->warmup, P->warmup == 1 ? "" : "s");
    printf("  Total time in calls: %.6f s (%.3e s per call)\n", P->total_s,
           P->calls ? P->total_s / (double)P->calls : 0);
    printf("  Time in nodes: %.6f s (%.2f%%)\n", P->nodes_s, P->total_s > 0 ? 100 * P->nodes_s / P->total_s : 0);
    printf("  VM overhead: %.6f s (%.2f%%; binding inputs, updates, the VM loop and the profiler's hooks)\n",
           P->total_s - P->nodes_s, P->total_s > 0 ? 100 * (P->total_s - P->nodes_s) / P->total_s : 0);
    printf("  Compile time: %.6f s, of which the optimizer %.6f s\n", tg_function_compile_seconds(f),
           tg_function_optimize_seconds(f));
    printf("  Nodes: %d\n", n);
    char env[1024];
    cli_environment_line(env, sizeof env);
    printf("  Environment: tg %s; %s\n", tg_version(), env);
    int ndev;
    const char *dt = prof_device_timing(P, &ndev);
    if (ndev && !strcmp(dt, "events"))
        printf("  GPU nodes: %d (kernels and copies), timed with CUDA events and no synchronisation (a\n"
               "    kernel's time is its time on the GPU; a copy back to the host waits for the GPU first,\n"
               "    and that wait is not counted as its time)\n",
               ndev);
    else if (ndev)
        printf("  GPU nodes: %d (kernels and copies), timed synchronously (--sync: the GPU is waited for\n"
               "    before and after each;"
               " exact wall time per node, without the overlap of an unprofiled call)\n",
               ndev);
    if (P->trace)
        printf("  Trace: the first %ld of %ld calls in %s%s\n", tg_profile_trace_count(P->p), P->calls, P->trace,
               tg_profile_trace_body_count(P->p) ? ", with the first runs of body nodes in them" : "");
    if (nbodies)
        printf("  Bodies profiled: %d (scan and op_from_graph nodes: see \"Body of\" below)\n", nbodies);
    else if (no_bodies)
        printf("  Bodies: not profiled (--no-bodies)\n");
    printf("\n");

    prof_row *r = calloc((size_t)n + 1, sizeof *r);
    if (!r) return;
    /* Per op class, per op, per node: the same rows grouped three ways. */
    const char *titles[3] = {"Op classes", "Ops (op + attrs)", "Nodes (apply)"};
    const char *whats[3] = {"op classes", "ops", "nodes"};
    for (int t = 0; t < 3; t++) {
        for (int k = 0; k < n; k++) {
            const char *op = tg_function_node_op(f, k);
            r[k] = (prof_row){k, t == 0 ? tg_profile_op_class(op) : t == 1 ? P->opkey[k] : tg_function_node_key(f, k),
                         t == 2 ? P->opkey[k] : NULL, (double)P->st[k].ns * 1e-9, P->st[k].calls, 1,
                         P->st[k].flops, P->st[k].flops * (double)P->st[k].calls, P->st[k].bytes_new};
        }
        int m = t < 2 ? prof_group_rows(r, n) : n;
        if (t == 2) qsort(r, (size_t)n, sizeof *r, prof_cmp_row);
        printf("%s\n", titles[t]);
        for (size_t i = 0; i < strlen(titles[t]); i++) putchar('-');
        printf("\n");
        table(P->nodes_s, r, m, top, whats[t], t == 2, false);
    }
    free(r);

    printf("Original nodes (time of each scheduled node shown under every file node it stands for)\n"
           "------------------------------------------------------------------------------------\n");
    tg_profile_origin *o = NULL;
    int nrows = tg_profile_origins(P->p, &o, NULL);
    if (nrows >= 0) {
        int rewritten = 0;
        for (int i = 0; i < nrows; i++)
            if (o[i].nvia > 1 || strcmp(o[i].key, tg_function_node_key(f, o[i].via[0]))) rewritten++;
        const char **rkeys = NULL, **rby = NULL;
        int nrem = removed_nodes(f, o, nrows, &rkeys, &rby);
        if (!rewritten && !nrem) printf("  (no node was rewritten: every scheduled node stands for itself)\n");
        printf("  %8s %10s  %-24s %s\n", "<% time>", "<time s>", "<file node>", "<scheduled as>");
        int shown = top > 0 && top < nrows ? top : nrows;
        double rest = 0;
        for (int i = 0; i < nrows; i++) {
            double t = (double)o[i].ns * 1e-9;
            if (i >= shown) {
                rest += t;
                continue;
            }
            /* A key a gradient's expansion made names no node of the
             * file: say whose derivative it is. */
            char cell[256], grad[200];
            if (cli_gradient_text(f, o[i].key, grad, sizeof grad))
                snprintf(cell, sizeof cell, "%s (%s)", o[i].key, grad);
            else
                snprintf(cell, sizeof cell, "%s", o[i].key);
            printf("  %7.2f%% %10.6f  %-24s", P->nodes_s > 0 ? 100 * t / P->nodes_s : 0, t, cell);
            for (int j = 0; j < o[i].nvia; j++) {
                int k = o[i].via[j];
                printf("%s%s (%s)", j ? ", " : " ", tg_function_node_key(f, k), tg_function_node_op(f, k));
            }
            printf("\n");
        }
        if (shown < nrows)
            printf("  ... (remaining %d original nodes account for %.2f%% (%.6f s))\n", nrows - shown,
                   P->nodes_s > 0 ? 100 * rest / P->nodes_s : 0, rest);
        /* The file's nodes that no row shows: the optimizer removed them
         * (rewritten into others, folded into a constant, merged). */
        if (nrem > 0) {
            printf("\n  Removed by the optimizer: %d file node%s that no scheduled node stands for\n"
                   "  %-34s %s\n",
                   nrem, nrem == 1 ? "" : "s", "<file node>", "<removed by rewrite>");
            int rshown = top > 0 && top < nrem ? top : nrem;
            for (int i = 0; i < rshown; i++) {
                char cell[256], grad[200];
                if (cli_gradient_text(f, rkeys[i], grad, sizeof grad))
                    snprintf(cell, sizeof cell, "%s (%s)", rkeys[i], grad);
                else
                    snprintf(cell, sizeof cell, "%s", rkeys[i]);
                printf("  %-34s %s\n", cell, rby[i]);
            }
            if (rshown < nrem) printf("  ... (remaining %d removed nodes)\n", nrem - rshown);
        } else if (nrem < 0) {
            printf("  (the nodes the optimizer removed are not shown: out of memory)\n");
        }
        free(rkeys);
        free(rby);
    }
    tg_profile_origins_free(o);
    printf("\n");

    char b1[32], b2[32], b3[32];
    printf("Memory (one call)\n-----------------\n");
    human_bytes(mem->peak, b1, sizeof b1);
    human_bytes(mem->peak_no_gc, b2, sizeof b2);
    human_bytes(mem->allocated, b3, sizeof b3);
    printf("  Peak, freeing intermediates after their last use: %s (%lld bytes)\n", b1, (long long)mem->peak);
    printf("  Peak, keeping every intermediate (no GC): %s (%lld bytes)\n", b2, (long long)mem->peak_no_gc);
    printf("  Allocated: %s in %d new outputs; %d views, %d in place (no allocation)\n", b3, mem->nnew,
           mem->nview, mem->ninplace);
    if (P->pool) {
        char b4[32], b5[32];
        human_bytes(P->pool->bytes, b4, sizeof b4);
        human_bytes(P->pool->budget, b5, sizeof b5);
        if (P->pool->budget)
            printf("  Buffers over 4 KiB in the profiled calls: %llu reused from the function's pool, %llu allocated;\n"
                   "    between calls the pool holds %d (%s; at most %s, TG_POOL_MIB)\n",
                   (unsigned long long)P->pool->reused, (unsigned long long)P->pool->allocated, P->pool->buffers, b4,
                   b5);
        else
            printf("  Buffer pool: off (TG_POOL_MIB=0): every call allocates its intermediates\n");
    }
    /* Largest allocations: every output of every node, new ones by size. */
    int nout = 0;
    for (int k = 0; k < n; k++) nout += tg_function_node_noutputs(f, k);
    typedef struct alloc_row {
        int node, j;
        int64_t bytes;
    } alloc_row;
    alloc_row *ar = calloc((size_t)nout + 1, sizeof *ar);
    int na = 0;
    for (int k = 0; ar && k < n; k++)
        for (int j = 0; j < tg_function_node_noutputs(f, k); j++) {
            tg_profile_output po;
            tg_profile_output_get(P->p, k, j, &po);
            if (po.ndim >= 0 && po.kind == TG_PROFILE_OUT_NEW) ar[na++] = (alloc_row){k, j, po.bytes};
        }
    for (int i = 1; i < na; i++) /* insertion sort: by bytes, then schedule */
        for (int j = i; j > 0 && (ar[j].bytes > ar[j - 1].bytes ||
                                  (ar[j].bytes == ar[j - 1].bytes && ar[j].node < ar[j - 1].node));
             j--) {
            alloc_row t = ar[j];
            ar[j] = ar[j - 1];
            ar[j - 1] = t;
        }
    printf("  Largest allocations:\n  %12s  %-24s %-28s %s\n", "<bytes>", "<output>", "<type>", "<node>");
    int shown = top > 0 && top < na ? top : na;
    int64_t rest = 0;
    for (int i = 0; i < na; i++) {
        if (i >= shown) {
            rest += ar[i].bytes;
            continue;
        }
        tg_profile_output po;
        tg_profile_output_get(P->p, ar[i].node, ar[i].j, &po);
        char sh[160];
        shape_text(&po, sh, sizeof sh);
        printf("  %12lld  %-24s %-28s %s\n", (long long)po.bytes, po.id, sh, P->opkey[ar[i].node]);
    }
    if (shown < na)
        printf("  ... (remaining %d allocations account for %lld bytes)\n", na - shown, (long long)rest);
    free(ar);
    /* Views and in-place outputs, which allocate nothing. */
    int nv = 0;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < tg_function_node_noutputs(f, k); j++) {
            tg_profile_output po;
            tg_profile_output_get(P->p, k, j, &po);
            if (po.ndim < 0 || po.kind == TG_PROFILE_OUT_NEW) continue;
            if (!nv++) printf("  Views and in-place outputs:\n");
            if (top > 0 && nv > top) continue;
            const tg_vm_node *s = &f->sched[k];
            printf("    %-24s %-8s of %s (%s)\n", po.id, prof_kind_name(po.kind), s->node->inputs[po.of]->id,
                   P->opkey[k]);
        }
    if (top > 0 && nv > top) printf("    ... (remaining %d)\n", nv - top);
    printf("\n");

    printf("Optimizer\n---------\n");
    int np = tg_function_pass_count(f);
    bool saved = strcmp(P->preset, "saved") == 0;
    if (np == 0) {
        printf("  no optimizer passes ran (%s%s)\n", saved ? "restored from a .tgf without optimizing" : "preset ",
               saved ? "" : P->preset);
    } else {
        if (saved) printf("  (restored from a .tgf: the passes recorded when it was compiled)\n");
        printf("  %10s %8s %8s %9s  %s\n", "<time s>", "<before>", "<after>", "<applied>", "<pass>");
        for (int i = 0; i < np; i++) {
            tg_pass_stats ps;
            if (tg_function_pass_get(f, i, &ps)) continue;
            printf("  %10.6f %8d %8d %9d  %s\n", ps.seconds, ps.nodes_before, ps.nodes_after, ps.applied,
                   ps.name);
        }
        if (saved) {
            double sum = 0;
            for (int i = 0; i < np; i++) {
                tg_pass_stats ps;
                if (!tg_function_pass_get(f, i, &ps)) sum += ps.seconds;
            }
            printf("  %10.6f %8s %8s %9s  total when it was compiled\n", sum, "", "", "");
        } else {
            printf("  %10.6f %8s %8s %9s  total (%.1f%% of the compile time)\n",
                   tg_function_optimize_seconds(f), "", "", "",
                   tg_function_compile_seconds(f) > 0
                       ? 100 * tg_function_optimize_seconds(f) / tg_function_compile_seconds(f)
                       : 0);
        }
        /* Rewrites that were tried, slowest first (Theano's optimizer
         * profile); the ones never tried are only counted. */
        int nr = tg_function_rewrite_stats_count(f), ntried = 0;
        tg_rewrite_stats *rs = calloc((size_t)nr + 1, sizeof *rs);
        for (int i = 0; rs && i < nr; i++)
            if (tg_function_rewrite_stats_get(f, i, &rs[ntried]) == 0 && (rs[ntried].tried || rs[ntried].applied))
                ntried++;
        for (int i = 1; i < ntried; i++) /* insertion sort, stable */
            for (int j = i; j > 0 && rs[j].seconds > rs[j - 1].seconds; j--) {
                tg_rewrite_stats t = rs[j];
                rs[j] = rs[j - 1];
                rs[j - 1] = t;
            }
        if (ntried) printf("\n  %10s %9s %9s  %s\n", "<time s>", "<tried>", "<applied>", "<rewrite (pass)>");
        int shown = top > 0 && top < ntried ? top : ntried;
        for (int i = 0; i < shown; i++)
            printf("  %10.6f %9ld %9ld  %s (%s)\n", rs[i].seconds, rs[i].tried, rs[i].applied, rs[i].name,
                   rs[i].pass ? rs[i].pass : "");
        if (shown < ntried) {
            double rest = 0;
            long applied = 0;
            for (int i = shown; i < ntried; i++) {
                rest += rs[i].seconds;
                applied += rs[i].applied;
            }
            printf("  ... (remaining %d rewrites account for %.6f s and %ld applications)\n", ntried - shown, rest,
                   applied);
        }
        if (rs && nr > ntried) printf("  (%d more rewrites were never tried: nothing matched their op)\n", nr - ntried);
        free(rs);
    }
    /* Theano's "Scan Op profiling", after the rest. */
    if (nbodies) {
        printf("\nScan and op_from_graph bodies\n=============================\n"
               "  (each body's nodes over every step of every profiled call; a body within a body\n"
               "  is titled by its path)\n\n");
        for (int i = 0; i < nbodies; i++) print_body(P, &bodies[i], top);
    }
}

/* ---- the Chrome trace ---- */

static void put_json_string(FILE *o, const char *s) {
    fputc('"', o);
    put_json_chars(o, s);
    fputc('"', o);
}

/* Timestamps are integer nanoseconds printed as microseconds with three
 * decimals: exact, so a node's event never pokes out of its call's. */
static void put_us(FILE *o, uint64_t ns) {
    fprintf(o, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

static void write_trace(const prof_info *P, FILE *o, const prof_body *bodies, int nbodies) {
    const tg_function *f = P->f;
    fprintf(o, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    fprintf(o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":");
    fputs("\"tgprof ", o);
    put_json_chars(o, P->path);
    fputc('"', o);
    fprintf(o, "}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":");
    put_json_string(o, tg_function_name(f));
    fprintf(o, "}}");
    /* Live memory as a counter track: the simulation's figures (the same
     * for every call) placed at each node's start and end. */
    int64_t *run = calloc((size_t)P->n + 1, sizeof *run), *after = calloc((size_t)P->n + 1, sizeof *after);
    bool mem = run && after && tg_profile_memory_live(P->p, run, after, NULL) == 0;
    long nc = tg_profile_trace_count(P->p);
    for (long c = 0; c < nc; c++) {
        uint64_t t0, t1;
        tg_profile_trace_call(P->p, c, &t0, &t1);
        fprintf(o, ",\n{\"name\":");
        fputc('"', o);
        put_json_chars(o, tg_function_name(f));
        fprintf(o, " call %ld\"", c + 1);
        fprintf(o, ",\"cat\":\"call\",\"ph\":\"X\",\"ts\":");
        put_us(o, t0);
        fprintf(o, ",\"dur\":");
        put_us(o, t1 - t0);
        fprintf(o, ",\"pid\":1,\"tid\":1,\"args\":{\"call\":%ld}}", c + 1);
        for (int k = 0; k < P->n; k++) {
            uint64_t s, d;
            tg_profile_trace_node(P->p, c, k, &s, &d);
            if (s == 0 && d == 0) continue; /* did not run */
            fprintf(o, ",\n{\"name\":");
            put_json_string(o, tg_function_node_key(f, k));
            fprintf(o, ",\"cat\":");
            put_json_string(o, tg_profile_op_class(tg_function_node_op(f, k)));
            fprintf(o, ",\"ph\":\"X\",\"ts\":");
            put_us(o, s);
            fprintf(o, ",\"dur\":");
            put_us(o, d);
            fprintf(o, ",\"pid\":1,\"tid\":1,\"args\":{\"op\":");
            put_json_string(o, P->opkey[k]);
            fprintf(o, ",\"node\":%d,\"shapes\":[", k);
            /* output_bytes: the size of its outputs; bytes_allocated: of
             * those it made a buffer for (not views, not in-place), as the
             * report's bytes_allocated */
            int64_t bytes = 0, fresh = 0;
            for (int j = 0; j < tg_function_node_noutputs(f, k); j++) {
                tg_profile_output po;
                tg_profile_output_get(P->p, k, j, &po);
                fprintf(o, "%s[", j ? "," : "");
                for (int dd = 0; dd < po.ndim; dd++) fprintf(o, "%s%lld", dd ? "," : "", (long long)po.shape[dd]);
                fprintf(o, "]");
                bytes += po.bytes;
                if (po.kind == TG_PROFILE_OUT_NEW) fresh += po.bytes;
            }
            fprintf(o, "],\"output_bytes\":%lld,\"bytes_allocated\":%lld}}", (long long)bytes,
                    (long long)fresh);
            if (mem) {
                fprintf(o, ",\n{\"name\":\"live memory\",\"ph\":\"C\",\"ts\":");
                put_us(o, s);
                fprintf(o, ",\"pid\":1,\"args\":{\"bytes\":%lld}}", (long long)run[k]);
                fprintf(o, ",\n{\"name\":\"live memory\",\"ph\":\"C\",\"ts\":");
                put_us(o, s + d);
                fprintf(o, ",\"pid\":1,\"args\":{\"bytes\":%lld}}", (long long)after[k]);
            }
        }
    }
    free(run);
    free(after);
    /* The runs of body nodes the profile kept (the first ones, in the
     * first calls): each lies within its outer node's event, so a viewer
     * draws it under that one, step after step. */
    long nb = tg_profile_trace_body_count(P->p);
    for (long i = 0; i < nb; i++) {
        tg_profile_body_event ev;
        if (tg_profile_trace_body_event(P->p, i, &ev)) continue;
        const prof_body *B = NULL;
        for (int j = 0; j < nbodies && !B; j++)
            if (bodies[j].P.p == ev.body) B = &bodies[j];
        if (!B) continue;
        const tg_function *bf = B->P.f;
        fprintf(o, ",\n{\"name\":");
        put_json_string(o, tg_function_node_key(bf, ev.node));
        fprintf(o, ",\"cat\":");
        put_json_string(o, tg_profile_op_class(tg_function_node_op(bf, ev.node)));
        fprintf(o, ",\"ph\":\"X\",\"ts\":");
        put_us(o, ev.start);
        fprintf(o, ",\"dur\":");
        put_us(o, ev.dur);
        fprintf(o, ",\"pid\":1,\"tid\":1,\"args\":{\"op\":");
        put_json_string(o, B->P.opkey[ev.node]);
        fprintf(o, ",\"node\":%d,\"body\":", ev.node);
        put_json_string(o, B->path);
        fprintf(o, ",\"step\":%lld,\"call\":%ld}}", (long long)ev.step, ev.call + 1);
    }
    /* the trace format's metadata: the environment the times were taken in */
    json_object *env = cli_environment_json();
    fprintf(o, "\n],\"otherData\":%s}\n", json_object_to_json_string_ext(env, JSON_C_TO_STRING_PLAIN));
    json_object_put(env);
}

/* ---- main ---- */

/* --json and --trace must not write over each other, over the graph file
 * or over an -i file (each is written whole at the end, by a rename, and
 * the first written was lost without a word, or the graph replaced by its
 * report); at most one of them on standard output ("-"), which then holds
 * that document alone (the text report is left out). True when they may
 * be written; else one line and false (cli_outputs_ok). */
static bool outputs_ok(const char *json_out, const char *trace_out, const char *path, const cli_input *inputs,
                       int ninputs) {
    const cli_file outs[] = {{"--json", json_out, "the report"}, {"--trace", trace_out, "the trace"}};
    const cli_file in = {"FILE", path, "the graph file being profiled"};
    return cli_outputs_ok(TOOL, outs, 2, &in, 1, inputs, ninputs);
}

static bool parse_count(const char *opt, const char *s, long min, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || end == s || errno || v < min) {
        cli_error(TOOL, "%s: expected an integer >= %ld, got '%s'", opt, min, s);
        return false;
    }
    *out = v;
    return true;
}

int main(int argc, char **argv) {
    tg_omp_respawn(argv); /* libgomp's spin count (ompspin.h) */
    cli_start(TOOL);
    const char *fname = NULL, *preset = NULL, *json_out = NULL, *trace_out = NULL, *device = NULL;
    const char *calls_s = NULL, *warmup_s = NULL, *top_s = NULL; /* (each given once) */
    bool sync = false, no_bodies = false;
    long calls = 10, warmup = 1, top = 20;
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs = 0;
    cli_taglist inc = {{0}, 0}, exc = {{0}, 0};
    static const struct option opts[] = {{"calls", required_argument, 0, 'c'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"json", required_argument, 0, 'j'},
                                         {"trace", required_argument, 0, 't'},
                                         {"top", required_argument, 0, 'n'},
                                         {"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {"device", required_argument, 0, 'd'},
                                         {"sync", no_argument, 0, 'S'},
                                         {"no-bodies", no_argument, 0, 'B'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int c;
    opterr = 0; /* our own one-line messages */
    while ((c = getopt_long(argc, argv, ":f:i:O:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!cli_once(TOOL, "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once(TOOL, "-O", &preset, optarg)) return TG_EXIT_USAGE;
            break;
        case 'I':
        case 'X':
            if (!cli_tag_opt(TOOL, c, &inc, &exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'j':
            if (!cli_once(TOOL, "--json", &json_out, optarg) || !cli_path_ok(TOOL, "--json", optarg))
                return TG_EXIT_USAGE;
            break;
        case 'S': sync = true; break;
        case 'B': no_bodies = true; break;
        case 'd':
            if (!cli_once(TOOL, "--device", &device, optarg) || !cli_device_ok(TOOL, optarg)) return TG_EXIT_USAGE;
            break;
        case 't':
            if (!cli_once(TOOL, "--trace", &trace_out, optarg) || !cli_path_ok(TOOL, "--trace", optarg))
                return TG_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return TG_EXIT_OK;
        case 'V': cli_print_version("tgprof"); return TG_EXIT_OK;
        case 'c':
            if (!cli_once(TOOL, "--calls", &calls_s, optarg) || !parse_count("--calls", optarg, 1, &calls)) return TG_EXIT_USAGE;
            break;
        case 'w':
            if (!cli_once(TOOL, "--warmup", &warmup_s, optarg) || !parse_count("--warmup", optarg, 0, &warmup)) return TG_EXIT_USAGE;
            break;
        case 'n':
            if (!cli_once(TOOL, "--top", &top_s, optarg) || !parse_count("--top", optarg, 0, &top)) return TG_EXIT_USAGE;
            break;
        case 'i':
            if (!cli_input_add(TOOL, inputs, &ninputs, CLI_MAX_INPUTS, optarg)) return TG_EXIT_USAGE;
            break;
        default: return cli_getopt_error(TOOL, NULL, c, argv);
        }
    }
    if (optind != argc - 1) {
        if (optind >= argc)
            cli_error(TOOL, "missing FILE (see tgprof --help)");
        else
            cli_error(TOOL, "unexpected argument '%s'", argv[optind + 1]);
        return TG_EXIT_USAGE;
    }
    if (preset && strcmp(preset, "none") && strcmp(preset, "fast_compile") && strcmp(preset, "fast_run")) {
        cli_error(TOOL, "-O: unknown preset '%s' (none, fast_compile or fast_run)", preset);
        return TG_EXIT_USAGE;
    }
    const char *path = argv[optind];
    bool is_tgf = cli_is_tgf(path);
    if (is_tgf && (preset || inc.n || exc.n || device)) {
        /* A .tgf is restored without optimizing; saying so beats ignoring -O. */
        cli_error(TOOL, "%s is already optimized: -O, --include, --exclude and --device apply when "
                        "compiling it (tgc compile)", path);
        return TG_EXIT_USAGE;
    }
    if (calls > LONG_MAX - warmup) {
        cli_error(TOOL, "--calls %ld with --warmup %ld: more calls than can be counted", calls, warmup);
        return TG_EXIT_USAGE;
    }
    if (!outputs_ok(json_out, trace_out, path, inputs, ninputs)) return TG_EXIT_USAGE;
    /* The files are opened (as temporaries) before anything runs, so that
     * a path that cannot be written is said at once, not after the
     * profile; each is renamed into place whole at the end, or not at
     * all. */
    cli_out jo = {0}, to = {0};
    if (json_out && !cli_out_open(&jo, TOOL, "--json", json_out)) return TG_EXIT_USAGE;
    if (trace_out && !cli_out_open(&to, TOOL, "--trace", trace_out)) {
        cli_out_close(&jo, false);
        return TG_EXIT_USAGE;
    }
    int rc = TG_EXIT_OK;
    tg_ctx *ctx = tg_ctx_new();
    tg_profile *p = NULL;
    json_object *rep = NULL;
    prof_body *bodies = NULL;
    int nbodies = 0;
    prof_info P = {.path = path, .calls = calls, .warmup = warmup,
              .preset = is_tgf ? "saved" : preset ? preset : "fast_run"};
    tg_compile_options co = {.preset = preset, .include = cli_tags(&inc), .exclude = cli_tags(&exc),
                             .device = device};
    cli_session S;
    if ((rc = cli_session_open(&S, TOOL, NULL, path, fname, &co, inputs, ninputs))) goto done;
    tg_function *f = S.f;
    tg_array **ins = S.ins, **outs = S.outs;
    int nout = S.nout;

    /* Warm-up calls run without hooks: caches, the VM's kept buffers and
     * OpenBLAS's threads settle before anything is counted. */
    int n = tg_function_node_count(f);
    cli_progress prog;
    cli_progress_start(&prog, warmup + calls, "profiling");
    long done_calls = 0;
    tg_pool_stats pool0 = {0}, pool;
    for (long i = 0; i < warmup + calls; i++) {
        if (i == warmup) {
            long keep = 0;
            if (trace_out) {
                /* (a call's own event counts: a function whose
                 * outputs are its inputs or constants, no node, kept
                 * every call, and --calls 10^12 ran out of memory) */
                keep = TRACE_MAX_EVENTS / ((long)n + 1);
                if (keep < 1) keep = 1;
                if (keep > calls) keep = calls;
            }
            tg_function_pool_stats(f, &pool0);
            tg_profile_options po = {.trace_calls = keep, .no_bodies = no_bodies,
                                     .trace_body_events = trace_out ? TRACE_MAX_BODY_EVENTS : 0};
            if (!(p = tg_profile_new_opts(f, &po, ctx)) || tg_profile_set_sync(p, sync, ctx)) {
                cli_progress_end(&prog);
                cli_error(TOOL, "%s", tg_ctx_message(ctx));
                rc = TG_EXIT_FOUND;
                goto done;
            }
        }
        for (int k = 0; k < nout; k++) {
            tg_array_free(outs[k]);
            outs[k] = NULL;
        }
        int st = p ? tg_profile_call(p, ins, outs, ctx) : tg_function_call(f, ins, outs, ctx);
        if (st) {
            cli_progress_end(&prog);
            cli_error(TOOL, "call %ld: %s", i + 1, tg_ctx_message(ctx));
            int s = tg_ctx_status(ctx);
            rc = s == TG_ETYPE || s == TG_EMISSING ? TG_EXIT_USAGE : TG_EXIT_FOUND;
            goto done;
        }
        done_calls++;
        cli_progress_step(&prog, done_calls);
    }
    cli_progress_end(&prog);
    tg_function_pool_stats(f, &pool);
    pool.reused -= pool0.reused;
    pool.allocated -= pool0.allocated;
    P.pool = &pool;

    P.f = f;
    P.p = p;
    P.n = n;
    P.st = calloc((size_t)n + 1, sizeof *P.st);
    if (!P.st) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    for (int k = 0; k < n; k++) tg_profile_node_get(p, k, &P.st[k]);
    if (prof_opkeys(&P)) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    P.trace = trace_out;
    P.total_s = (double)tg_profile_total_ns(p) * 1e-9;
    P.nodes_s = (double)tg_profile_nodes_ns(p) * 1e-9;
    tg_profile_memory mem;
    if (tg_profile_memory_get(p, &mem, ctx)) {
        cli_error(TOOL, "%s", tg_ctx_message(ctx));
        rc = TG_EXIT_FOUND;
        goto done;
    }
    if ((nbodies = prof_bodies(&P, &bodies)) < 0) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    /* (--json - or --trace -: standard output holds that document alone) */
    if (!(json_out && !strcmp(json_out, "-")) && !(trace_out && !strcmp(trace_out, "-")))
        print_report(&P, (int)(top > 1000000 ? 1000000 : top), &mem, bodies, nbodies, no_bodies);
    /* Each file whole or not at all: a failure leaves what was there. */
    if (json_out) {
        rep = prof_report_json_bodies(&P, &mem, bodies, nbodies);
        const char *text = rep ? json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PRETTY |
                                                                         JSON_C_TO_STRING_NOSLASHESCAPE)
                               : NULL;
        if (!text) {
            cli_error(TOOL, "--json %s: out of memory", json_out);
            rc = TG_EXIT_FOUND;
            goto done;
        }
        fputs(text, jo.f);
        fputc('\n', jo.f);
    }
    if (trace_out) write_trace(&P, to.f, bodies, nbodies);
    /* The report, then the trace: a report that cannot be written leaves
     * the trace unwritten too (and the files that were there). */
    if ((json_out && cli_out_close(&jo, true)) || (trace_out && cli_out_close(&to, true))) {
        rc = TG_EXIT_FOUND;
        goto done;
    }
done:
    cli_out_close(&jo, false);
    cli_out_close(&to, false);
    json_object_put(rep);
    prof_bodies_free(bodies, nbodies > 0 ? nbodies : 0);
    prof_opkeys_free(&P);
    free(P.st);
    tg_profile_free(p); /* before the function it hooks */
    cli_session_close(&S);
    tg_ctx_free(ctx);
    return rc;
}
