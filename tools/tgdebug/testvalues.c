/* tgdebug testvalues: run the graph as written on the variables' test
 * values (FORMAT.md s3), node by node: Theano's compute_test_value, which
 * caught shape errors where the graph was built instead of deep inside
 * a compiled function. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "tensor/tensor.h"
#include "tgdebug.h"

static const char *SUB = "testvalues";

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgdebug testvalues FILE.json [--quiet]\n"
            "\n"
            "Run every node of FILE as written (no optimization), in the order of\n"
            "its dependencies, on the variables' test_value entries (free inputs\n"
            "must have one; shared variables use theirs, else their value), printing\n"
            "each node's output shapes and statistics. The first shape mismatch (with\n"
            "the static type, or with a test_value the file gives a node's output) or\n"
            "run-time error stops with the node, the shapes involved and the node's\n"
            "creation trace.\n"
            "  --quiet        print only the summary or the failure\n"
            "  --version      print the version\n"
            "\n"
            "Exit status: 0 every node ran, 1 a node failed, 2 bad usage or bad input\n"
            "(an input without a test_value).\n");
}

static bool reads(const tg_graph *g, const tg_var *v) {
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i]->nin; k++)
            if (g->nodes[i]->inputs[k] == v) return true;
    return false;
}

/* The failing node: what it is, its inputs' shapes, the error, its trace. */
static void report_failure(const tg_node *n, tg_array *const *in, const char *msg) {
    char desc[256];
    tg_node_describe(n, desc, sizeof desc);
    printf("testvalues: FAILED at %s\n", desc);
    printf("node: %s\n", n->nout ? n->outputs[0]->id : n->op->name);
    printf("op: %s\n", n->op->name);
    for (int i = 0; i < n->nin; i++) {
        printf("input %d '%s': ", i, n->inputs[i]->id);
        tgd_print_stats(stdout, in[i]);
    }
    printf("error: %s\n", msg);
    printf("trace:\n");
    tgd_print_trace(stdout, n, "  ");
}

int tgd_testvalues(int argc, char **argv) {
    bool quiet = false;
    static const struct option opts[] = {{"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":hq", opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return TG_EXIT_OK;
        case 'q': quiet = true; break;
        case 'V': cli_print_version("tgdebug"); return TG_EXIT_OK;
        default: return cli_getopt_error(TGDEBUG, SUB, c, argv);
        }
    }
    if (optind != argc - 1) {
        if (optind >= argc)
            tgd_error(SUB, "missing FILE (see tgdebug testvalues --help)");
        else
            tgd_error(SUB, "unexpected argument '%s'", argv[optind + 1]);
        return TG_EXIT_USAGE;
    }
    const char *path = argv[optind];
    if (cli_is_tgf(path)) {
        /* A .tgf holds the optimized graph and no test values: the JSON
         * parser's "boolean expected" at its first byte said none of that. */
        tgd_error(SUB, "%s is a compiled function: testvalues needs the graph file (.json) with its test values",
                  path);
        return TG_EXIT_USAGE;
    }
    int rc = TG_EXIT_OK;
    tg_ctx *ctx = tg_ctx_new();
    cli_heap_for(path, 80);
    tg_graph *g = cli_graph_load("tgdebug: testvalues", path, ctx);
    tg_array **val = NULL, **in = NULL;
    if (!g) {
        tgd_error(SUB, "%s", tg_ctx_message(ctx));
        rc = TG_EXIT_USAGE;
        goto done;
    }
    val = calloc((size_t)g->nvars + 1, sizeof *val);
    int maxio = 1;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i]->nin > maxio) maxio = g->nodes[i]->nin;
        if (g->nodes[i]->nout > maxio) maxio = g->nodes[i]->nout;
    }
    in = calloc((size_t)maxio + 1, sizeof *in);
    if (!val || !in) {
        tgd_error(SUB, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    /* Values of everything no node makes; every free input a node reads
     * needs a test value: all of the missing ones named at once. */
    tg_str missing = {0};
    int nmissing = 0;
    for (int i = 0; i < g->nvars; i++) {
        tg_var *v = g->vars[i];
        if (v->owner) continue;
        tg_array *a = v->test_value ? v->test_value
                      : v->kind == TG_VAR_CONSTANT ? v->value
                      : v->kind == TG_VAR_SHARED && v->shared ? tg_shared_value(v->shared, NULL)
                                                              : NULL;
        if (!a && v->kind == TG_VAR_INPUT && reads(g, v)) {
            tg_str_addf(&missing, "%s'%s' (variables[%d])", nmissing ? ", " : "", v->id, v->json_index);
            nmissing++;
        }
        val[v->index] = a ? tg_array_ref(a) : NULL;
    }
    if (nmissing) {
        tgd_error(SUB, "%s: input%s without a test_value: %s", path, nmissing == 1 ? "" : "s",
                  missing.s ? missing.s : "");
        tg_str_free(&missing);
        rc = TG_EXIT_USAGE;
        goto done;
    }
    tg_str_free(&missing);
    if (!quiet) printf("testvalues: %s, %d nodes\n", path, g->nnodes);
    cli_progress prog;
    cli_progress_start(&prog, g->nnodes, "testvalues");
    for (int i = 0; i < g->nnodes; i++) {
        tg_node *n = g->nodes[i];
        for (int k = 0; k < n->nin; k++) in[k] = val[n->inputs[k]->index];
        /* The kernels want a node's outputs side by side. */
        tg_array *outs[64] = {0};
        if (n->nout > 64) {
            tgd_error(SUB, "node with %d outputs: at most 64", n->nout);
            rc = TG_EXIT_FOUND;
            break;
        }
        tg_ctx_clear(ctx);
        int st = n->op->run(n, in, outs, ctx);
        const char *why = st ? tg_ctx_message(ctx) : NULL;
        char buf[1024];
        for (int j = 0; !st && j < n->nout; j++) {
            const tg_var *v = n->outputs[j];
            if (!outs[j]) {
                snprintf(buf, sizeof buf, "output '%s' was not computed", v->id);
                why = buf;
                st = TG_ERUNTIME;
            } else if (!tg_type_accepts(&v->type, outs[j])) {
                char want[160], got[160];
                tg_type_str(&v->type, want, sizeof want);
                tgd_shape_str(outs[j], got, sizeof got);
                snprintf(buf, sizeof buf, "output '%s' is %s, but its static type is %s", v->id, got, want);
                why = buf;
                st = TG_ESHAPE;
            } else if (v->test_value && (v->test_value->ndim != outs[j]->ndim ||
                                         !tg_shape_equal(outs[j]->ndim, v->test_value->shape, outs[j]->shape))) {
                /* A test value given for a node's output states the shape
                 * the author expects there. */
                char want[160], got[160];
                tgd_shape_str(v->test_value, want, sizeof want);
                tgd_shape_str(outs[j], got, sizeof got);
                snprintf(buf, sizeof buf, "output '%s' is %s, but its test_value is %s", v->id, got, want);
                why = buf;
                st = TG_ESHAPE;
            }
        }
        if (st) {
            cli_progress_end(&prog);
            char desc[256];
            tg_node_describe(n, desc, sizeof desc);
            report_failure(n, in, why && *why ? why : tg_status_str(st));
            cli_error(TGDEBUG, "%s: %s: %s: %s", SUB, path, desc, why && *why ? why : tg_status_str(st));
            for (int j = 0; j < n->nout; j++) tg_array_free(outs[j]);
            rc = TG_EXIT_FOUND;
            goto done;
        }
        for (int j = 0; j < n->nout; j++) {
            tg_array_free(val[n->outputs[j]->index]);
            val[n->outputs[j]->index] = outs[j];
            if (!quiet) {
                char desc[256];
                tg_node_describe(n, desc, sizeof desc);
                printf("%s", desc);
                if (n->nout > 1) printf(" output %d", j);
                printf(": ");
                tgd_print_stats(stdout, outs[j]);
            }
        }
        cli_progress_step(&prog, i + 1);
    }
    cli_progress_end(&prog);
    if (rc == TG_EXIT_OK) printf("testvalues: all %d nodes ran on the test values\n", g->nnodes);
done:
    if (val && g)
        for (int i = 0; i < g->nvars; i++) tg_array_free(val[i]);
    free(val);
    free(in);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return rc;
}
