/* tgc compile, print, export, and opening / checkpointing .tgf files for
 * tgc run. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/core.h"
#include "io/io.h"
#include "tgf_cmds.h"
#include "vm/vm.h"

static const char *TOOL = "tgc";

static int exit_for(int status) {
    return status == TG_ENOMEM || status == TG_ERUNTIME ? TG_EXIT_FOUND : TG_EXIT_USAGE;
}

int tgc_source_open(tgc_source *s, const char *tool, const char *path, const char *fname,
                    const tg_compile_options *co, bool reoptimize) {
    tg_ctx *ctx = tg_ctx_new();
    int rc = TG_EXIT_OK;
    memset(s, 0, sizeof *s);
    cli_heap_for(path, 80);
    if (cli_is_tgf(path)) {
        tg_tgf_load_options lo = {.reoptimize = reoptimize, .options = co};
        if (!(s->t = tg_tgf_load(path, &lo, ctx))) {
            cli_error(tool, "%s", tg_ctx_message(ctx));
            rc = exit_for(tg_ctx_status(ctx));
            goto done;
        }
        if (tg_tgf_warning(s->t)) cli_error(tool, "warning: %s", tg_tgf_warning(s->t));
        int fi = tg_tgf_function_find(s->t, fname, ctx);
        if (fi < 0) {
            cli_error(tool, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        s->f = tg_tgf_function(s->t, fi);
    } else {
        if (reoptimize) {
            cli_error(tool, "--reoptimize: %s is a graph, which is always optimized; it applies "
                            "to .tgf files",
                      path);
            rc = TG_EXIT_USAGE;
            goto done;
        }
        if (!(s->g = cli_graph_load(tool, path, ctx))) {
            cli_error(tool, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        int fi = s->fi = tg_graph_function_find(s->g, fname, ctx);
        if (fi < 0 || !(s->f = tg_function_compile(s->g, fi, co, ctx))) {
            cli_error(tool, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
    }
done:
    tg_ctx_free(ctx);
    if (rc) tgc_source_close(s);
    return rc;
}

int tgc_source_save_state(tgc_source *s, const char *tool, const char *out,
                          const tg_compile_options *co) {
    tg_ctx *ctx = tg_ctx_new();
    int st;
    if (s->t) {
        st = tg_tgf_save_state(s->t, out, ctx);
    } else {
        /* The graph's other functions too, so that the checkpoint serves
         * as a .tgf from tgc compile does (train, then predict from it).
         * Compiled now, they start from the values the run left: the
         * functions of one graph share its shared variables. */
        int nf = tg_graph_function_count(s->g), n = 0;
        tg_function **fs = calloc((size_t)nf, sizeof *fs);
        if (!fs) {
            cli_error(tool, "--save-state: out of memory");
            tg_ctx_free(ctx);
            return TG_EXIT_FOUND;
        }
        for (int i = 0; i < nf; i++) {
            if (i == s->fi) {
                fs[n++] = s->f;
            } else if ((fs[n] = tg_function_compile(s->g, i, co, ctx))) {
                n++;
            } else {
                cli_error(tool, "warning: --save-state: function '%s' left out of %s: %s",
                          tg_graph_function_name(s->g, i), out, tg_ctx_message(ctx));
            }
        }
        tg_tgf_save_info info = {.source = s->g, .options = co};
        st = tg_tgf_save(out, fs, n, &info, ctx);
        for (int i = 0; i < n; i++)
            if (fs[i] != s->f) tg_function_free(fs[i]);
        free(fs);
    }
    if (st) cli_error(tool, "--save-state: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return !st ? TG_EXIT_OK : st == TG_EUNSUPPORTED ? TG_EXIT_USAGE : TG_EXIT_FOUND;
}

void tgc_source_close(tgc_source *s) {
    if (s->g) tg_function_free(s->f);
    tg_graph_free(s->g);
    tg_tgf_free(s->t);
    memset(s, 0, sizeof *s);
}

/* ---- tgc compile ---- */

static void compile_usage(FILE *f) {
    fprintf(f, "usage: tgc compile FILE.json [-f NAME]... [-O PRESET] [--include TAG]...\n"
               "                   [--exclude TAG]... [--no-gc] -o OUT.tgf\n");
}

/* Tag lists for tg_compile_options: NULL-terminated, borrowed strings. */
typedef struct taglist {
    const char *v[65];
    int n;
} taglist;

static bool tag_add(taglist *l, const char *opt, const char *tag) {
    if (l->n >= 64) {
        cli_error(TOOL, "%s: at most 64 tags", opt);
        return false;
    }
    l->v[l->n++] = tag;
    l->v[l->n] = NULL;
    return true;
}

/* getopt's 'I' (--include) and 'X' (--exclude) into their lists; false
 * on too many (said). */
static bool tag_opt(int c, taglist *inc, taglist *exc) {
    return c == 'I' ? tag_add(inc, "--include", optarg) : tag_add(exc, "--exclude", optarg);
}

static bool preset_ok(const char *p) {
    if (!p || !strcmp(p, "none") || !strcmp(p, "fast_compile") || !strcmp(p, "fast_run"))
        return true;
    cli_error(TOOL, "-O: unknown preset '%s' (none, fast_compile or fast_run)", p);
    return false;
}

int tgc_cmd_compile(int argc, char **argv) {
    const char *out = NULL, *preset = NULL, *names[256];
    int nnames = 0, rc = TG_EXIT_OK;
    bool no_gc = false;
    taglist inc = {{0}, 0}, exc = {{0}, 0};
    static const struct option opts[] = {{"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {"no-gc", no_argument, 0, 'g'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:o:O:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (nnames >= 256) {
                cli_error(TOOL, "-f: at most 256 functions");
                return TG_EXIT_USAGE;
            }
            names[nnames++] = optarg;
            break;
        case 'o':
            if (!cli_once(TOOL, "-o", &out, optarg)) return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once(TOOL, "-O", &preset, optarg)) return TG_EXIT_USAGE;
            break;
        case 'g': no_gc = true; break;
        case 'I':
        case 'X':
            if (!tag_opt(c, &inc, &exc)) return TG_EXIT_USAGE;
            break;
        case 'h': compile_usage(stdout); return TG_EXIT_OK;
        default: return cli_getopt_error(TOOL, "compile", c, argv);
        }
    }
    if (optind != argc - 1) {
        cli_error(TOOL, optind >= argc ? "compile: missing FILE" : "compile: unexpected argument '%s'",
                  optind < argc ? argv[optind + 1] : "");
        return TG_EXIT_USAGE;
    }
    if (!out) {
        cli_error(TOOL, "compile: missing -o OUT.tgf");
        return TG_EXIT_USAGE;
    }
    if (!preset_ok(preset)) return TG_EXIT_USAGE;
    for (int i = 0; i < nnames; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j])) {
                cli_error(TOOL, "compile: -f %s given twice", names[i]);
                return TG_EXIT_USAGE;
            }
    const char *path = argv[optind];
    tg_ctx *ctx = tg_ctx_new();
    tg_function **fs = NULL;
    int nf = 0;
    cli_heap_for(path, 80);
    tg_graph *g = cli_graph_load(TOOL, path, ctx);
    if (!g) {
        cli_error(TOOL, "%s", tg_ctx_message(ctx));
        rc = TG_EXIT_USAGE;
        goto done;
    }
    tg_compile_options co = {.preset = preset, .no_gc = no_gc, .include = inc.n ? inc.v : NULL,
                             .exclude = exc.n ? exc.v : NULL};
    int total = nnames ? nnames : tg_graph_function_count(g);
    fs = calloc((size_t)total + 1, sizeof *fs);
    if (!fs) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    for (int i = 0; i < total; i++) {
        int fi = nnames ? tg_graph_function_find(g, names[i], ctx) : i;
        if (fi < 0 || !(fs[nf] = tg_function_compile(g, fi, &co, ctx))) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        nf++;
    }
    tg_tgf_save_info info = {.source = g, .options = &co};
    if (tg_tgf_save(out, fs, nf, &info, ctx)) {
        cli_error(TOOL, "%s", tg_ctx_message(ctx));
        int st = tg_ctx_status(ctx);
        rc = st == TG_EINVAL || st == TG_EUNSUPPORTED ? TG_EXIT_USAGE : TG_EXIT_FOUND;
        goto done;
    }
    for (int i = 0; i < nf; i++)
        printf("%s: %s: %d nodes, %d rewrites, compiled in %.3f s\n", out, tg_function_name(fs[i]),
               tg_function_node_count(fs[i]), tg_function_rewrite_count(fs[i]),
               tg_function_compile_seconds(fs[i]));
done:
    for (int i = 0; fs && i < nf; i++) tg_function_free(fs[i]);
    free(fs);
    tg_graph_free(g);
    tg_ctx_free(ctx);
    return rc;
}

/* ---- tgc export ---- */

int tgc_cmd_export(int argc, char **argv) {
    const char *out = NULL, *fname = NULL;
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!cli_once(TOOL, "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'o':
            if (!cli_once(TOOL, "-o", &out, optarg)) return TG_EXIT_USAGE;
            break;
        case 'h': printf("usage: tgc export FILE.tgf [-f NAME] -o GRAPH.json\n"); return TG_EXIT_OK;
        default: return cli_getopt_error(TOOL, "export", c, argv);
        }
    }
    if (optind != argc - 1 || !out) {
        cli_error(TOOL, "export: expected FILE.tgf and -o GRAPH.json");
        return TG_EXIT_USAGE;
    }
    if (!cli_is_tgf(argv[optind])) {
        cli_error(TOOL, "export: %s is not a .tgf file (export writes a compiled function's "
                        "optimized graph)", argv[optind]);
        return TG_EXIT_USAGE;
    }
    tgc_source s;
    int rc = tgc_source_open(&s, TOOL, argv[optind], fname, NULL, false);
    if (rc) return rc;
    tg_ctx *ctx = tg_ctx_new();
    int fi = 0;
    while (tg_tgf_function(s.t, fi) != s.f) fi++;
    char *text = tg_tgf_export(s.t, fi, ctx);
    if (!text || tg_file_write_atomic(out, text, strlen(text), ctx)) {
        cli_error(TOOL, "%s", tg_ctx_message(ctx));
        rc = TG_EXIT_FOUND;
    }
    tg_string_free(text);
    tg_ctx_free(ctx);
    tgc_source_close(&s);
    return rc;
}

/* ---- tgc print: Theano's debugprint ---- */

typedef struct printer {
    bool chars, types, shapes;
    const double *secs; /* per scheduled node, with --profile; else NULL */
    double total;
    long calls;
    int next_id;
    struct tg_idmap *ids; /* key -> id + 1 */
    const tg_function *f;
    json_object *bodies;  /* nodes with a body, printed after the tree */
} printer;

static void id_str(const printer *P, int id, char *buf, size_t n) {
    if (!P->chars) {
        snprintf(buf, n, "%d", id);
        return;
    }
    /* A, B, ..., Z, BA, BB, ...: Theano's ids. */
    char tmp[16];
    int k = 0;
    do {
        tmp[k++] = (char)('A' + id % 26);
        id /= 26;
    } while (id && k < 15);
    for (int i = 0; i < k; i++) buf[i] = tmp[k - 1 - i];
    buf[k] = 0;
}

/* The id of key, and whether it was new. */
static int take_id(printer *P, const char *key, bool *fresh) {
    void *got = tg_idmap_get(P->ids, key);
    if (got) {
        *fresh = false;
        return (int)(intptr_t)got - 1;
    }
    *fresh = true;
    int id = P->next_id++;
    tg_idmap_put(P->ids, key, (void *)(intptr_t)(id + 1));
    return id;
}

static void type_suffix(const printer *P, const tg_type *t) {
    if (!P->types && !P->shapes) return;
    printf(" <");
    if (P->types) printf("%s", tg_dtype_name(t->dtype));
    if (P->shapes) {
        printf("(");
        for (int d = 0; d < t->ndim; d++) {
            if (d) printf(", ");
            if (t->shape[d] < 0)
                printf("?");
            else
                printf("%lld", (long long)t->shape[d]);
        }
        printf(t->ndim == 1 ? ",)" : ")");
    }
    printf(">");
}

static void indent(int depth) {
    /* Deep graphs: the indent stops growing at 100 levels. */
    for (int i = 0; i < depth && i < 100; i++) printf(" |");
}

static void print_var(printer *P, const tg_var *v, int depth) {
    char idb[16];
    bool fresh;
    indent(depth);
    if (!v->owner) {
        id_str(P, take_id(P, v->id, &fresh), idb, sizeof idb);
        /* resident: placement left it on the device, with no transfer */
        const char *kind = v->kind == TG_VAR_SHARED     ? (v->resident ? " (shared, resident on cuda)" : " (shared)")
                           : v->kind == TG_VAR_CONSTANT ? (v->resident ? " (constant, resident on cuda)" : " (constant)")
                                                        : "";
        printf("%s [id %s]%s", v->id, idb, kind);
        if (v->kind == TG_VAR_CONSTANT && v->value && tg_array_ndim(v->value) == 0)
            printf(" %.17g", tg_array_get_flat(v->value, 0));
        type_suffix(P, &v->type);
        printf("\n");
        return;
    }
    const tg_node *n = v->owner;
    id_str(P, take_id(P, n->outputs[0]->id, &fresh), idb, sizeof idb);
    printf("%s", n->op->name);
    if (n->nout > 1) printf(".%d", v->owner_index);
    printf(" [id %s] '%s'", idb, n->name ? n->name : v->id);
    /* A key a gradient's expansion made names no node of the file: say
     * whose derivative it is */
    char grad[256];
    if (cli_gradient_text(P->f, n->outputs[0]->id, grad, sizeof grad)) printf(" (%s)", grad);
    if (n->inplace) printf(" (inplace)");
    type_suffix(P, &v->type);
    if (P->secs && fresh && n->index >= 0 && n->index < P->f->nsched && P->f->sched[n->index].node == n) {
        double t = P->secs[n->index];
        printf("  %.3f ms/call (%.1f%%)", t * 1e3 / (double)P->calls, P->total > 0 ? 100.0 * t / P->total : 0.0);
    }
    printf("\n");
    if (!fresh) return; /* printed once; later uses name its id */
    json_object *body = NULL;
    if (n->attrs && json_object_object_get_ex(n->attrs, "body", &body))
        json_object_array_add(P->bodies, json_object_new_string(n->outputs[0]->id));
    for (int k = 0; k < n->nin; k++) print_var(P, n->inputs[k], depth + 1);
}

/* A nested body, from its JSON: each output's tree of body nodes. */
static void print_body_var(printer *P, json_object *byout, const char *id, int depth) {
    json_object *node = NULL;
    for (int i = 0; i < depth; i++) printf(" |");
    if (!json_object_object_get_ex(byout, id, &node) || depth > 60) {
        printf("%s\n", id);
        return;
    }
    json_object *op = NULL, *ins = NULL;
    json_object_object_get_ex(node, "op", &op);
    printf("%s '%s'\n", op ? json_object_get_string(op) : "?", id);
    if (json_object_object_get_ex(node, "inputs", &ins) && json_object_is_type(ins, json_type_array))
        for (size_t k = 0; k < json_object_array_length(ins); k++) {
            json_object *e = json_object_array_get_idx(ins, k);
            print_body_var(P, byout, json_object_is_type(e, json_type_string) ? json_object_get_string(e) : "(constant)",
                           depth + 1);
        }
}

static void print_bodies(printer *P, const tg_function *f) {
    size_t nb = json_object_array_length(P->bodies);
    if (!nb) return;
    printf("\nInner graphs:\n");
    for (size_t b = 0; b < nb; b++) {
        const char *key = json_object_get_string(json_object_array_get_idx(P->bodies, b));
        for (int k = 0; k < f->fg->nnodes; k++) {
            const tg_node *n = f->fg->nodes[k];
            if (!n->nout || strcmp(n->outputs[0]->id, key)) continue;
            json_object *body = NULL, *nodes = NULL, *outs = NULL;
            json_object_object_get_ex(n->attrs, "body", &body);
            bool fresh;
            char idb[16];
            id_str(P, take_id(P, key, &fresh), idb, sizeof idb);
            printf("\n%s [id %s] '%s'\n", n->op->name, idb, key);
            json_object *byout = json_object_new_object();
            if (json_object_object_get_ex(body, "nodes", &nodes) && json_object_is_type(nodes, json_type_array))
                for (size_t i = 0; i < json_object_array_length(nodes); i++) {
                    json_object *nd = json_object_array_get_idx(nodes, i), *os = NULL;
                    if (json_object_object_get_ex(nd, "outputs", &os) && json_object_is_type(os, json_type_array))
                        for (size_t j = 0; j < json_object_array_length(os); j++)
                            json_object_object_add(byout, json_object_get_string(json_object_array_get_idx(os, j)),
                                                   json_object_get(nd));
                }
            if (json_object_object_get_ex(body, "outputs", &outs) && json_object_is_type(outs, json_type_array))
                for (size_t i = 0; i < json_object_array_length(outs); i++) {
                    json_object *o = json_object_array_get_idx(outs, i);
                    printf(" >");
                    print_body_var(P, byout, json_object_is_type(o, json_type_string) ? json_object_get_string(o) : "?", 0);
                }
            json_object_put(byout);
        }
    }
}

static void print_function(const tg_function *f, bool chars, bool types, bool shapes,
                           const double *secs, long calls) {
    printer P = {chars, types, shapes, secs, 0, calls, 0, tg_idmap_new(), f, json_object_new_array()};
    const tg_fgraph *fg = f->fg;
    for (int k = 0; secs && k < f->nsched; k++) P.total += secs[k];
    printf("%s:", f->name);
    if (secs) printf(" %ld calls, %.3f ms per call in the nodes", calls, P.total * 1e3 / (double)calls);
    printf("\n");
    for (int r = 0; r < fg->nout + fg->nupd; r++) {
        if (r >= fg->nout) printf("update %s <-\n", fg->upd_shared[r - fg->nout]->id);
        print_var(&P, fg->outputs[r], 0);
    }
    print_bodies(&P, f);
    tg_idmap_free(P.ids);
    json_object_put(P.bodies);
}

static void print_usage(FILE *f) {
    fprintf(f, "usage: tgc print FILE [-f NAME] [--optimized] [-O PRESET] [--ids int|char]\n"
               "                 [--types] [--shapes] [--profile N -i ID=VALUE...]\n"
               "--profile N  call the function N times (after one call not counted) with the\n"
               "             -i inputs and show each node's time per call and share\n");
}

/* --profile: per-node wall time through the VM's hooks. */
typedef struct prof {
    double *secs;
    uint64_t t0;
} prof;

static int prof_before(void *ud, const tg_function *f, int node, tg_array *const *in, tg_ctx *ctx) {
    (void)f, (void)node, (void)in, (void)ctx;
    ((prof *)ud)->t0 = tg_now_ns();
    return 0;
}

static int prof_after(void *ud, const tg_function *f, int node, tg_array *const *in,
                      tg_array *const *out, tg_ctx *ctx) {
    (void)f, (void)in, (void)out, (void)ctx;
    prof *p = ud;
    p->secs[node] += (double)(tg_now_ns() - p->t0) * 1e-9;
    return 0;
}

static int profile_run(tg_function *f, cli_input *inputs, int ninputs, long calls, double *secs) {
    tg_ctx *ctx = tg_ctx_new();
    int nin = tg_function_input_count(f), nout = tg_function_output_count(f), rc = TG_EXIT_OK;
    tg_array **ins = calloc((size_t)nin + 1, sizeof *ins), **outs = calloc((size_t)nout + 1, sizeof *outs);
    prof p = {secs, 0};
    if (!ins || !outs || !ctx) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
    } else {
        rc = cli_inputs_read(TOOL, "--profile", f, inputs, ninputs, ins);
    }
    tg_hooks h = {prof_before, prof_after, &p};
    /* One call first, not timed (as tgprof's --warmup 1): the first call
     * pays for the buffers, the caches and OpenBLAS's threads. */
    for (long c = 0; c <= calls && !rc; c++) {
        if (c == 1) tg_function_set_hooks(f, &h);
        for (int k = 0; k < nout; k++) {
            tg_array_free(outs[k]);
            outs[k] = NULL;
        }
        if (tg_function_call(f, ins, outs, ctx)) {
            cli_error(TOOL, "call %ld: %s", c + 1, tg_ctx_message(ctx));
            rc = TG_EXIT_FOUND;
        }
    }
    tg_function_set_hooks(f, NULL);
    for (int i = 0; i < nin; i++) tg_array_free(ins[i]);
    for (int k = 0; k < nout; k++) tg_array_free(outs[k]);
    free(ins);
    free(outs);
    tg_ctx_free(ctx);
    return rc;
}

int tgc_cmd_print(int argc, char **argv) {
    const char *fname = NULL, *preset = NULL, *ids = "char";
    bool optimized = false, types = false, shapes = false;
    long calls = 0;
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs = 0;
    taglist inc = {{0}, 0}, exc = {{0}, 0};
    static const struct option opts[] = {{"optimized", no_argument, 0, 'z'},
                                         {"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {"profile", required_argument, 0, 'p'},
                                         {"ids", required_argument, 0, 'd'},
                                         {"types", no_argument, 0, 't'},
                                         {"shapes", no_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:O:i:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!cli_once(TOOL, "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once(TOOL, "-O", &preset, optarg)) return TG_EXIT_USAGE;
            break;
        case 'z': optimized = true; break;
        case 'p': {
            char *end;
            errno = 0;
            calls = strtol(optarg, &end, 10);
            if (*end || end == optarg || errno || calls < 1) {
                cli_error(TOOL, "--profile: expected a positive number of calls, got '%s'", optarg);
                return TG_EXIT_USAGE;
            }
            break;
        }
        case 'i':
            if (!cli_input_add(TOOL, inputs, &ninputs, CLI_MAX_INPUTS, optarg)) return TG_EXIT_USAGE;
            break;
        case 'I':
        case 'X':
            if (!tag_opt(c, &inc, &exc)) return TG_EXIT_USAGE;
            break;
        case 'd': ids = optarg; break;
        case 't': types = true; break;
        case 's': shapes = true; break;
        case 'h': print_usage(stdout); return TG_EXIT_OK;
        default: return cli_getopt_error(TOOL, "print", c, argv);
        }
    }
    if (optind != argc - 1) {
        cli_error(TOOL, "print: expected one FILE");
        return TG_EXIT_USAGE;
    }
    if (strcmp(ids, "int") && strcmp(ids, "char")) {
        cli_error(TOOL, "--ids: expected int or char, got '%s'", ids);
        return TG_EXIT_USAGE;
    }
    if (!preset_ok(preset)) return TG_EXIT_USAGE;
    /* A graph prints as written (preset none) unless --optimized; a .tgf
     * holds only its optimized graph. */
    if ((inc.n || exc.n || preset) && !optimized) {
        cli_error(TOOL, "print: -O, --include and --exclude choose the rewrites of --optimized");
        return TG_EXIT_USAGE;
    }
    tg_compile_options co = {.preset = optimized ? preset : "none", .include = inc.n ? inc.v : NULL,
                             .exclude = exc.n ? exc.v : NULL};
    tgc_source s;
    int rc = tgc_source_open(&s, TOOL, argv[optind], fname, &co, false);
    if (rc) return rc;
    double *secs = NULL;
    if (calls) {
        secs = calloc((size_t)tg_function_node_count(s.f) + 1, sizeof *secs);
        if (!secs || (rc = profile_run(s.f, inputs, ninputs, calls, secs))) {
            free(secs);
            tgc_source_close(&s);
            return rc ? rc : TG_EXIT_FOUND;
        }
    } else if (ninputs) {
        cli_error(TOOL, "print: -i gives inputs for --profile");
        tgc_source_close(&s);
        return TG_EXIT_USAGE;
    }
    print_function(s.f, !strcmp(ids, "char"), types, shapes, secs, calls);
    free(secs);
    tgc_source_close(&s);
    return TG_EXIT_OK;
}
