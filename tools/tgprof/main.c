/* tgprof: profile a function node by node (Theano's ProfileStats).
 *
 *   tgprof FILE [-f NAME] [-i ID=VALUE]... [--calls N] [--warmup N]
 *          [--json OUT.json] [--trace OUT.trace.json] [--top N] [-O PRESET]
 *          [--include TAG]... [--exclude TAG]...
 *
 * Runs the function, then prints the function summary, the time per op
 * class, per op (op + attrs), per node, per original node (through the
 * optimizer's rewrites), the memory a call needs, and the optimizer's own
 * profile. --json writes the same as a report (schemas/profile.schema.json);
 * --trace a Chrome trace (one event per call enclosing one per node).
 *
 * Exit status: 0 success; 1 a run-time failure; 2 bad usage or bad input.
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tensor/tensor.h"
#include "vm/vm.h"

static const char *TOOL = "tgprof";

/* The trace keeps at most this many node events; later calls are counted
 * but not drawn, so that a long run does not write gigabytes. */
#define TRACE_MAX_EVENTS 500000L

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgprof FILE [-f NAME] [-i ID=VALUE]... [--calls N] [--warmup N]\n"
            "              [--json OUT.json] [--trace OUT.trace.json] [--top N] [-O PRESET]\n"
            "              [--include TAG]... [--exclude TAG]...\n"
            "\n"
            "Run a function of FILE (interchange JSON, or a compiled-function .tgf,\n"
            "restored without optimizing) and report where the time and\n"
            "the memory go: per op class, per op (op + attrs), per node, per original\n"
            "node of the file (through fusion), the memory of a call, and the\n"
            "optimizer's own time.\n"
            "  -f NAME        the function (default: the only one, or 'main')\n"
            "  -i ID=VALUE    an input: a .npy file, or a JSON literal (3.5, [1, 2],\n"
            "                 true, \"nan\") read with the input's declared dtype\n"
            "  --calls N      profiled calls (default 10); updates of shared\n"
            "                 variables are applied after each, as in tgc run\n"
            "  --warmup N     calls before profiling, not counted (default 1)\n"
            "  --json OUT     write the report as JSON (schemas/profile.schema.json)\n"
            "  --trace OUT    write a Chrome trace (Perfetto, chrome://tracing): one\n"
            "                 event per call enclosing one per node\n"
            "  --top N        rows per table (default 20; 0 for all)\n"
            "  -O PRESET      none, fast_compile or fast_run (default); not for a .tgf\n"
            "  --include TAG, --exclude TAG\n"
            "                 turn rewrites on or off beyond the preset (a pass, a group\n"
            "                 such as fusion or inplace, or a rewrite's name; repeatable)\n"
            "  --version      print the version\n"
            "\n"
            "Exit status: 0 success, 1 a run-time failure, 2 bad usage or bad input.\n");
}

/* ---- what was measured, per scheduled node ---- */

typedef struct row {
    int index; /* schedule position (nodes), or first member (groups) */
    const char *name;  /* key, op+attrs, or class */
    const char *extra; /* op of a node */
    double seconds;
    uint64_t calls;
    int nodes;
    double flops; /* one run of each node, summed */
    double total_flops; /* over every run: for GFLOP/s */
    int64_t bytes;
} row;

typedef struct prof {
    const char *path;
    tg_function *f;
    tg_profile *p;
    int n;
    long calls, warmup;
    const char *preset;
    tg_profile_node *st;
    char **opkey; /* "op" or "op{attrs}" per node, owned */
    double total_s, nodes_s;
    const char *trace; /* --trace OUT, or NULL */
} prof;

static int cmp_row(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->seconds != y->seconds) return x->seconds < y->seconds ? 1 : -1;
    return x->index - y->index;
}

static int cmp_str(const void *a, const void *b) {
    const row *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->index - y->index;
}

/* Merge rows with the same name (sorted by name first), summing. */
static int group_rows(row *r, int n) {
    qsort(r, (size_t)n, sizeof *r, cmp_str);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && strcmp(r[m - 1].name, r[i].name) == 0) {
            r[m - 1].seconds += r[i].seconds;
            r[m - 1].calls += r[i].calls;
            r[m - 1].nodes += r[i].nodes;
            r[m - 1].flops += r[i].flops;
            r[m - 1].total_flops += r[i].total_flops;
            r[m - 1].bytes += r[i].bytes;
            if (r[i].index < r[m - 1].index) r[m - 1].index = r[i].index;
        } else {
            r[m++] = r[i];
        }
    }
    qsort(r, (size_t)m, sizeof *r, cmp_row);
    return m;
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

static const char *kind_name(tg_profile_out_kind k) {
    return k == TG_PROFILE_OUT_VIEW ? "view" : k == TG_PROFILE_OUT_INPLACE ? "inplace" : "new";
}

/* ---- the text report ---- */

static void table(const prof *P, row *r, int n, int top, const char *what, bool nodes) {
    printf("  %8s %7s %10s %11s %7s %7s %9s %9s  %s\n", "<% time>", "<sum %>", "<time s>",
           "<per call>", "<calls>", "<nodes>", "<MFLOP>", "<GFLOP/s>", what);
    double cum = 0;
    int shown = top > 0 && top < n ? top : n;
    for (int i = 0; i < shown; i++) {
        double share = P->nodes_s > 0 ? r[i].seconds / P->nodes_s : 0;
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
        printf("  ... (remaining %d %s account for %.2f%% (%.6f s) of the time in nodes)\n", n - shown, what,
               P->nodes_s > 0 ? 100 * rest / P->nodes_s : 0, rest);
    }
    printf("\n");
}

static void print_report(const prof *P, int top, const tg_profile_memory *mem) {
    tg_function *f = P->f;
    int n = P->n;
    printf("Function profile\n================\n");
    printf("  File: %s, function '%s', preset %s\n", P->path, tg_function_name(f), P->preset);
    printf("  Calls: %ld (after %ld warm-up call%s)\n", P->calls, P->warmup, P->warmup == 1 ? "" : "s");
    printf("  Total time in calls: %.6f s (%.3e s per call)\n", P->total_s,
           P->calls ? P->total_s / (double)P->calls : 0);
    printf("  Time in nodes: %.6f s (%.2f%%)\n", P->nodes_s, P->total_s > 0 ? 100 * P->nodes_s / P->total_s : 0);
    printf("  VM overhead: %.6f s (%.2f%%; binding inputs, updates, the VM loop and the profiler's hooks)\n",
           P->total_s - P->nodes_s, P->total_s > 0 ? 100 * (P->total_s - P->nodes_s) / P->total_s : 0);
    printf("  Compile time: %.6f s, of which the optimizer %.6f s\n", tg_function_compile_seconds(f),
           tg_function_optimize_seconds(f));
    printf("  Nodes: %d\n", n);
    if (P->trace)
        printf("  Trace: the first %ld of %ld calls in %s\n", tg_profile_trace_count(P->p), P->calls, P->trace);
    printf("\n");

    row *r = calloc((size_t)n + 1, sizeof *r);
    if (!r) return;
    /* Per op class, per op, per node: the same rows grouped three ways. */
    const char *titles[3] = {"Op classes", "Ops (op + attrs)", "Nodes (apply)"};
    const char *whats[3] = {"op classes", "ops", "nodes"};
    for (int t = 0; t < 3; t++) {
        for (int k = 0; k < n; k++) {
            const char *op = tg_function_node_op(f, k);
            r[k] = (row){k, t == 0 ? tg_profile_op_class(op) : t == 1 ? P->opkey[k] : tg_function_node_key(f, k),
                         t == 2 ? P->opkey[k] : NULL, (double)P->st[k].ns * 1e-9, P->st[k].calls, 1,
                         P->st[k].flops, P->st[k].flops * (double)P->st[k].calls, P->st[k].bytes_new};
        }
        int m = t < 2 ? group_rows(r, n) : n;
        if (t == 2) qsort(r, (size_t)n, sizeof *r, cmp_row);
        printf("%s\n", titles[t]);
        for (size_t i = 0; i < strlen(titles[t]); i++) putchar('-');
        printf("\n");
        table(P, r, m, top, whats[t], t == 2);
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
        if (!rewritten) printf("  (no node was rewritten: every scheduled node stands for itself)\n");
        printf("  %8s %10s  %-24s %s\n", "<% time>", "<time s>", "<file node>", "<scheduled as>");
        int shown = top > 0 && top < nrows ? top : nrows;
        double rest = 0;
        for (int i = 0; i < nrows; i++) {
            double t = (double)o[i].ns * 1e-9;
            if (i >= shown) {
                rest += t;
                continue;
            }
            printf("  %7.2f%% %10.6f  %-24s", P->nodes_s > 0 ? 100 * t / P->nodes_s : 0, t, o[i].key);
            for (int j = 0; j < o[i].nvia; j++) {
                int k = o[i].via[j];
                printf("%s%s (%s)", j ? ", " : " ", tg_function_node_key(f, k), tg_function_node_op(f, k));
            }
            printf("\n");
        }
        if (shown < nrows)
            printf("  ... (remaining %d original nodes account for %.2f%% (%.6f s))\n", nrows - shown,
                   P->nodes_s > 0 ? 100 * rest / P->nodes_s : 0, rest);
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
            printf("    %-24s %-8s of %s (%s)\n", po.id, kind_name(po.kind), s->node->inputs[po.of]->id,
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
}

/* ---- the JSON report ---- */

static json_object *jstr(const char *s) { return json_object_new_string(s ? s : ""); }

/* A fraction of the time in nodes; sums of rounded seconds can pass 1 by
 * an ulp, which the schema would reject. */
static json_object *jshare(double t, double total) {
    double s = total > 0 ? t / total : 0;
    return json_object_new_double(s > 1 ? 1 : s < 0 ? 0 : s);
}

static json_object *group_json(const prof *P, row *r, int n) {
    json_object *a = json_object_new_array();
    for (int i = 0; i < n; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", jstr(r[i].name));
        json_object_object_add(o, "time_s", json_object_new_double(r[i].seconds));
        json_object_object_add(o, "share", jshare(r[i].seconds, P->nodes_s));
        json_object_object_add(o, "calls", json_object_new_int64((int64_t)r[i].calls));
        json_object_object_add(o, "nodes", json_object_new_int(r[i].nodes));
        json_object_object_add(o, "flops", json_object_new_double(r[i].flops));
        json_object_array_add(a, o);
    }
    return a;
}

static json_object *report_json(const prof *P, const tg_profile_memory *mem) {
    tg_function *f = P->f;
    int n = P->n;
    json_object *fo = json_object_new_object();
    json_object_object_add(fo, "name", jstr(tg_function_name(f)));
    json_object_object_add(fo, "preset", jstr(P->preset));
    json_object_object_add(fo, "calls", json_object_new_int64(P->calls));
    json_object_object_add(fo, "warmup", json_object_new_int64(P->warmup));
    json_object_object_add(fo, "total_s", json_object_new_double(P->total_s));
    json_object_object_add(fo, "time_in_nodes_s", json_object_new_double(P->nodes_s));
    json_object_object_add(fo, "vm_overhead_s", json_object_new_double(P->total_s - P->nodes_s));
    json_object_object_add(fo, "compile_s", json_object_new_double(tg_function_compile_seconds(f)));
    json_object_object_add(fo, "optimize_s", json_object_new_double(tg_function_optimize_seconds(f)));

    json_object *nodes = json_object_new_array();
    for (int k = 0; k < n; k++) {
        json_object *o = json_object_new_object();
        double t = (double)P->st[k].ns * 1e-9;
        json_object_object_add(o, "key", jstr(tg_function_node_key(f, k)));
        json_object_object_add(o, "index", json_object_new_int(k));
        json_object_object_add(o, "label", jstr(tg_function_node_label(f, k)));
        json_object_object_add(o, "op", jstr(tg_function_node_op(f, k)));
        json_object_object_add(o, "op_key", jstr(P->opkey[k]));
        json_object_object_add(o, "op_class", jstr(tg_profile_op_class(tg_function_node_op(f, k))));
        json_object_object_add(o, "time_s", json_object_new_double(t));
        json_object_object_add(o, "share", jshare(t, P->nodes_s));
        json_object_object_add(o, "calls", json_object_new_int64((int64_t)P->st[k].calls));
        json_object_object_add(o, "time_per_call_s",
                               json_object_new_double(P->st[k].calls ? t / (double)P->st[k].calls : 0));
        json_object_object_add(o, "flops", json_object_new_double(P->st[k].flops));
        json_object_object_add(o, "bytes_moved", json_object_new_double(P->st[k].bytes_moved));
        json_object_object_add(o, "bytes_allocated", json_object_new_int64(P->st[k].bytes_new));
        json_object *outs = json_object_new_array();
        for (int j = 0; j < tg_function_node_noutputs(f, k); j++) {
            tg_profile_output po;
            tg_profile_output_get(P->p, k, j, &po);
            json_object *oo = json_object_new_object();
            json_object_object_add(oo, "id", jstr(po.id));
            json_object_object_add(oo, "kind", jstr(kind_name(po.kind)));
            if (po.of >= 0) json_object_object_add(oo, "of", jstr(f->sched[k].node->inputs[po.of]->id));
            json_object_object_add(oo, "bytes", json_object_new_int64(po.bytes));
            if (po.ndim >= 0) {
                json_object_object_add(oo, "dtype", jstr(tg_dtype_name(po.dtype)));
                json_object *sh = json_object_new_array();
                for (int d = 0; d < po.ndim; d++) json_object_array_add(sh, json_object_new_int64(po.shape[d]));
                json_object_object_add(oo, "shape", sh);
            }
            json_object_array_add(outs, oo);
        }
        json_object_object_add(o, "outputs", outs);
        const char *const *keys;
        int no = tg_function_node_origins(f, k, &keys);
        json_object *orr = json_object_new_array();
        for (int i = 0; i < no; i++) json_object_array_add(orr, jstr(keys[i]));
        json_object_object_add(o, "origins", orr);
        json_object_array_add(nodes, o);
    }
    json_object_object_add(fo, "nodes", nodes);

    row *r = calloc((size_t)n + 1, sizeof *r);
    for (int t = 0; r && t < 2; t++) {
        for (int k = 0; k < n; k++)
            r[k] = (row){k, t == 0 ? tg_profile_op_class(tg_function_node_op(f, k)) : P->opkey[k], NULL,
                         (double)P->st[k].ns * 1e-9, P->st[k].calls, 1, P->st[k].flops,
                         P->st[k].flops * (double)P->st[k].calls, P->st[k].bytes_new};
        int m = group_rows(r, n);
        json_object_object_add(fo, t == 0 ? "op_classes" : "ops", group_json(P, r, m));
    }
    free(r);

    tg_profile_origin *og = NULL;
    int nrows = tg_profile_origins(P->p, &og, NULL);
    json_object *oa = json_object_new_array();
    for (int i = 0; i < nrows; i++) {
        json_object *o = json_object_new_object();
        double t = (double)og[i].ns * 1e-9;
        json_object_object_add(o, "key", jstr(og[i].key));
        json_object_object_add(o, "time_s", json_object_new_double(t));
        json_object_object_add(o, "share", jshare(t, P->nodes_s));
        json_object *via = json_object_new_array();
        for (int j = 0; j < og[i].nvia; j++) json_object_array_add(via, jstr(tg_function_node_key(f, og[i].via[j])));
        json_object_object_add(o, "via", via);
        json_object_array_add(oa, o);
    }
    tg_profile_origins_free(og);
    json_object_object_add(fo, "original_nodes", oa);

    json_object *mo = json_object_new_object();
    json_object_object_add(mo, "peak_bytes", json_object_new_int64(mem->peak));
    json_object_object_add(mo, "peak_bytes_no_gc", json_object_new_int64(mem->peak_no_gc));
    json_object_object_add(mo, "allocated_bytes", json_object_new_int64(mem->allocated));
    json_object_object_add(mo, "new_outputs", json_object_new_int(mem->nnew));
    json_object_object_add(mo, "views", json_object_new_int(mem->nview));
    json_object_object_add(mo, "inplace", json_object_new_int(mem->ninplace));
    json_object_object_add(fo, "memory", mo);

    json_object *opt = json_object_new_object(), *passes = json_object_new_array(),
                *rws = json_object_new_array();
    for (int i = 0; i < tg_function_pass_count(f); i++) {
        tg_pass_stats ps;
        if (tg_function_pass_get(f, i, &ps)) continue;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", jstr(ps.name));
        json_object_object_add(o, "time_s", json_object_new_double(ps.seconds));
        json_object_object_add(o, "nodes_before", json_object_new_int(ps.nodes_before));
        json_object_object_add(o, "nodes_after", json_object_new_int(ps.nodes_after));
        json_object_object_add(o, "applied", json_object_new_int(ps.applied));
        json_object_array_add(passes, o);
    }
    for (int i = 0; i < tg_function_rewrite_stats_count(f); i++) {
        tg_rewrite_stats rs;
        if (tg_function_rewrite_stats_get(f, i, &rs)) continue;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", jstr(rs.name));
        json_object_object_add(o, "pass", jstr(rs.pass));
        json_object_object_add(o, "tried", json_object_new_int64(rs.tried));
        json_object_object_add(o, "applied", json_object_new_int64(rs.applied));
        json_object_object_add(o, "time_s", json_object_new_double(rs.seconds));
        json_object_array_add(rws, o);
    }
    json_object_object_add(opt, "passes", passes);
    json_object_object_add(opt, "rewrites", rws);
    json_object_object_add(fo, "optimizer", opt);

    json_object *root = json_object_new_object();
    json_object_object_add(root, "format", jstr("tg-profile"));
    json_object_object_add(root, "version", json_object_new_int(1));
    char tool[64];
    snprintf(tool, sizeof tool, "tgprof %s", tg_version());
    json_object_object_add(root, "tool", jstr(tool));
    json_object_object_add(root, "file", jstr(P->path));
    json_object *fs = json_object_new_array();
    json_object_array_add(fs, fo);
    json_object_object_add(root, "functions", fs);
    return root;
}

/* ---- the Chrome trace ---- */

static void put_json_string(FILE *o, const char *s) {
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c < 0x20)
            fprintf(o, "\\u%04x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
}

/* Timestamps are integer nanoseconds printed as microseconds with three
 * decimals: exact, so a node's event never pokes out of its call's. */
static void put_us(FILE *o, uint64_t ns) {
    fprintf(o, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

static int write_trace(const prof *P, const char *path) {
    FILE *o = fopen(path, "w");
    if (!o) return -1;
    tg_function *f = P->f;
    fprintf(o, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    fprintf(o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":");
    char pname[4200];
    snprintf(pname, sizeof pname, "tgprof %s", P->path);
    put_json_string(o, pname);
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
        char cname[300];
        snprintf(cname, sizeof cname, "%s call %ld", tg_function_name(f), c + 1);
        put_json_string(o, cname);
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
            int64_t bytes = 0;
            for (int j = 0; j < tg_function_node_noutputs(f, k); j++) {
                tg_profile_output po;
                tg_profile_output_get(P->p, k, j, &po);
                fprintf(o, "%s[", j ? "," : "");
                for (int dd = 0; dd < po.ndim; dd++) fprintf(o, "%s%lld", dd ? "," : "", (long long)po.shape[dd]);
                fprintf(o, "]");
                bytes += po.bytes;
            }
            fprintf(o, "],\"bytes\":%lld}}", (long long)bytes);
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
    fprintf(o, "\n]}\n");
    bool bad = ferror(o);
    return fclose(o) == 0 && !bad ? 0 : -1;
}

/* ---- composite bodies as expressions ---- */

/* The expression of body variable `id`: an input is i<k>, a scalar
 * constant its value, a node's output its op applied to its inputs' (infix
 * for + - * /). Depth-limited: a body is a small DAG, but a shared
 * subexpression is printed each time it is used. */
static bool body_expr(json_object *body, const char *id, int depth, tg_str *out) {
    json_object *ins, *vars, *nodes;
    if (depth > 12 || !json_object_object_get_ex(body, "inputs", &ins) ||
        !json_object_object_get_ex(body, "nodes", &nodes))
        return false;
    for (size_t i = 0; i < json_object_array_length(ins); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(ins, i)), id) == 0) {
            tg_str_addf(out, "i%zu", i);
            return true;
        }
    if (json_object_object_get_ex(body, "variables", &vars))
        for (size_t i = 0; i < json_object_array_length(vars); i++) {
            json_object *v = json_object_array_get_idx(vars, i), *vid, *c, *data;
            if (json_object_object_get_ex(v, "id", &vid) && strcmp(json_object_get_string(vid), id) == 0 &&
                json_object_object_get_ex(v, "constant", &c)) {
                if (json_object_object_get_ex(c, "data", &data) && !json_object_is_type(data, json_type_array))
                    tg_str_addf(out, "%s", json_object_to_json_string_ext(data, JSON_C_TO_STRING_PLAIN));
                else
                    tg_str_addf(out, "%s", id);
                return true;
            }
        }
    for (size_t i = 0; i < json_object_array_length(nodes); i++) {
        json_object *nd = json_object_array_get_idx(nodes, i), *op, *nin, *nout;
        if (!json_object_object_get_ex(nd, "op", &op) || !json_object_object_get_ex(nd, "inputs", &nin) ||
            !json_object_object_get_ex(nd, "outputs", &nout) || json_object_array_length(nout) < 1 ||
            strcmp(json_object_get_string(json_object_array_get_idx(nout, 0)), id) != 0)
            continue;
        const char *name = json_object_get_string(op);
        size_t n = json_object_array_length(nin);
        const char *infix = NULL;
        if (n == 2) {
            infix = !strcmp(name, "add")        ? " + "
                    : !strcmp(name, "sub")      ? " - "
                    : !strcmp(name, "mul")      ? " * "
                    : !strcmp(name, "true_div") ? " / "
                                                : NULL;
        }
        tg_str_addf(out, "%s(", infix ? "" : name);
        for (size_t j = 0; j < n; j++) {
            json_object *in = json_object_array_get_idx(nin, j);
            if (j) tg_str_addf(out, "%s", infix ? infix : ", ");
            if (json_object_is_type(in, json_type_string)) {
                if (!body_expr(body, json_object_get_string(in), depth + 1, out)) return false;
            } else { /* an inline constant */
                json_object *val;
                tg_str_addf(out, "%s",
                            json_object_object_get_ex(in, "value", &val)
                                ? json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN)
                                : "?");
            }
        }
        tg_str_addf(out, ")");
        return true;
    }
    return false;
}

/* "composite{expr, expr}" from a composite node's attrs; false (out
 * untouched) when the body is not as expected. */
static bool composite_text(json_object *attrs, tg_str *out) {
    json_object *body, *outs;
    if (!attrs || !json_object_object_get_ex(attrs, "body", &body) ||
        !json_object_object_get_ex(body, "outputs", &outs))
        return false;
    tg_str t = {0};
    tg_str_addf(&t, "composite{");
    for (size_t i = 0; i < json_object_array_length(outs); i++) {
        if (i) tg_str_addf(&t, ", ");
        if (!body_expr(body, json_object_get_string(json_object_array_get_idx(outs, i)), 0, &t)) {
            tg_str_free(&t);
            return false;
        }
    }
    tg_str_addf(&t, "}");
    if (t.oom || !t.s) {
        tg_str_free(&t);
        return false;
    }
    *out = t;
    return true;
}

/* ---- main ---- */

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
    const char *fname = NULL, *preset = NULL, *json_out = NULL, *trace_out = NULL;
    long calls = 10, warmup = 1, top = 20;
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs = 0;
    const char *inc[65] = {0}, *exc[65] = {0};
    int ninc = 0, nexc = 0;
    static const struct option opts[] = {{"calls", required_argument, 0, 'c'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"json", required_argument, 0, 'j'},
                                         {"trace", required_argument, 0, 't'},
                                         {"top", required_argument, 0, 'n'},
                                         {"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int c;
    opterr = 0; /* our own one-line messages */
    while ((c = getopt_long(argc, argv, ":f:i:O:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': fname = optarg; break;
        case 'O': preset = optarg; break;
        case 'I':
        case 'X':
            if ((c == 'I' ? ninc : nexc) >= 64) {
                cli_error(TOOL, "--%s: at most 64 tags", c == 'I' ? "include" : "exclude");
                return TG_EXIT_USAGE;
            }
            if (c == 'I')
                inc[ninc++] = optarg;
            else
                exc[nexc++] = optarg;
            break;
        case 'j': json_out = optarg; break;
        case 't': trace_out = optarg; break;
        case 'h': usage(stdout); return TG_EXIT_OK;
        case 'V': printf("tgprof %s\n", tg_version()); return TG_EXIT_OK;
        case 'c':
            if (!parse_count("--calls", optarg, 1, &calls)) return TG_EXIT_USAGE;
            break;
        case 'w':
            if (!parse_count("--warmup", optarg, 0, &warmup)) return TG_EXIT_USAGE;
            break;
        case 'n':
            if (!parse_count("--top", optarg, 0, &top)) return TG_EXIT_USAGE;
            break;
        case 'i':
            if (!cli_input_add(TOOL, inputs, &ninputs, CLI_MAX_INPUTS, optarg)) return TG_EXIT_USAGE;
            break;
        case ':':
            cli_error(TOOL, "option '%s' needs a value (see tgprof --help)", argv[optind - 1]);
            return TG_EXIT_USAGE;
        default:
            cli_error(TOOL, "unknown option '%s' (see tgprof --help)", argv[optind - 1]);
            return TG_EXIT_USAGE;
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
    size_t plen = strlen(path);
    bool is_tgf = plen >= 4 && strcmp(path + plen - 4, ".tgf") == 0;
    if (is_tgf && (preset || ninc || nexc)) {
        /* A .tgf is restored without optimizing; saying so beats ignoring -O. */
        cli_error(TOOL, "%s is already optimized: -O, --include and --exclude apply when "
                        "compiling it (tgc compile)", path);
        return TG_EXIT_USAGE;
    }
    int rc = TG_EXIT_OK;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = NULL;
    tg_tgf *tgf = NULL;
    tg_function *f = NULL;
    tg_profile *p = NULL;
    tg_array **ins = NULL, **outs = NULL;
    json_object *rep = NULL;
    prof P = {.path = path, .calls = calls, .warmup = warmup,
              .preset = is_tgf ? "saved" : preset ? preset : "fast_run"};
    int nin = 0, nout = 0;
    if (is_tgf) {
        /* Restored as saved: the optimized graph, its rewrite record and
         * the shared values of the checkpoint. */
        int fi;
        if (!(tgf = tg_tgf_load(path, NULL, ctx)) || (fi = tg_tgf_function_find(tgf, fname, ctx)) < 0 ||
            !(f = tg_tgf_function(tgf, fi))) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        if (tg_tgf_warning(tgf)) fprintf(stderr, "%s: warning: %s\n", TOOL, tg_tgf_warning(tgf));
    } else {
        if (!(g = tg_graph_load(path, ctx))) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        int fi = tg_graph_function_find(g, fname, ctx);
        tg_compile_options co = {.preset = preset, .include = inc, .exclude = exc};
        if (fi < 0 || !(f = tg_function_compile(g, fi, &co, ctx))) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
    }
    nin = tg_function_input_count(f);
    nout = tg_function_output_count(f);
    ins = calloc((size_t)nin + 1, sizeof *ins);
    outs = calloc((size_t)nout + 1, sizeof *outs);
    if (!ins || !outs) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    if ((rc = cli_inputs_read(TOOL, NULL, f, inputs, ninputs, ins))) goto done;

    /* Warm-up calls run without hooks: caches, the VM's kept buffers and
     * OpenBLAS's threads settle before anything is counted. */
    int n = tg_function_node_count(f);
    cli_progress prog;
    cli_progress_start(&prog, warmup + calls, "profiling");
    long done_calls = 0;
    for (long i = 0; i < warmup + calls; i++) {
        if (i == warmup) {
            long keep = 0;
            if (trace_out) {
                keep = n ? TRACE_MAX_EVENTS / n : calls;
                if (keep < 1) keep = 1;
                if (keep > calls) keep = calls;
            }
            if (!(p = tg_profile_new(f, keep, ctx))) {
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

    P.f = f;
    P.p = p;
    P.n = n;
    P.st = calloc((size_t)n + 1, sizeof *P.st);
    P.opkey = calloc((size_t)n + 1, sizeof *P.opkey);
    if (!P.st || !P.opkey) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    for (int k = 0; k < n; k++) {
        tg_profile_node_get(p, k, &P.st[k]);
        const tg_node *nd = f->sched[k].node;
        const char *attrs = nd->attrs ? json_object_to_json_string_ext(nd->attrs, JSON_C_TO_STRING_PLAIN) : NULL;
        tg_str s = {0};
        json_object *jname;
        if (strcmp(nd->op->name, "composite") == 0 && composite_text(nd->attrs, &s))
            ; /* composite{tanh((i0 + i1))}, as Theano names a fused node */
        else if (strcmp(nd->op->name, "op_from_graph") == 0 && nd->attrs &&
                 json_object_object_get_ex(nd->attrs, "name", &jname))
            /* op_from_graph{normalize}: the body's name, not its text */
            tg_str_addf(&s, "op_from_graph{%s}", json_object_get_string(jname));
        else if (attrs && strcmp(attrs, "{}") != 0)
            tg_str_addf(&s, "%s%s", nd->op->name, attrs);
        else
            tg_str_addf(&s, "%s", nd->op->name);
        P.opkey[k] = s.s;
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
    print_report(&P, (int)(top > 1000000 ? 1000000 : top), &mem);
    if (json_out) {
        rep = report_json(&P, &mem);
        if (json_object_to_file_ext(json_out, rep, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE) < 0) {
            cli_error(TOOL, "--json %s: cannot write the report: %s", json_out, strerror(errno));
            rc = TG_EXIT_USAGE;
            goto done;
        }
    }
    if (trace_out && write_trace(&P, trace_out) < 0) {
        cli_error(TOOL, "--trace %s: cannot write the trace: %s", trace_out, strerror(errno));
        rc = TG_EXIT_USAGE;
        goto done;
    }
done:
    json_object_put(rep);
    for (int k = 0; P.opkey && k < P.n; k++) tg_free(P.opkey[k]);
    free(P.opkey);
    free(P.st);
    for (int i = 0; ins && i < nin; i++) tg_array_free(ins[i]);
    for (int k = 0; outs && k < nout; k++) tg_array_free(outs[k]);
    free(ins);
    free(outs);
    tg_profile_free(p);
    if (tgf)
        tg_tgf_free(tgf); /* f is borrowed from it */
    else
        tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return rc;
}
