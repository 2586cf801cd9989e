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
#include "tensor/tensor.h"
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
    /* (an I/O error's message starts with the path) */
    if (st) cli_error(tool, "--save-state%s%s", st == TG_EIO ? " " : ": ", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    /* The path was tried before the run (cli_out_check): what fails here
     * is the write (a full disk), a run-time failure. */
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
               "                   [--exclude TAG]... [--no-gc] [--device cpu|cuda] -o OUT.tgf\n"
               "  --device DEV   place the functions for DEV (default: $TG_DEVICE, else cpu);\n"
               "                 a function placed on cuda is restored there wherever a GPU is\n"
               "                 (TG_DEVICE=cpu keeps it on the CPU), else on the CPU kernels\n");
}

static bool preset_ok(const char *p) {
    if (!p || !strcmp(p, "none") || !strcmp(p, "fast_compile") || !strcmp(p, "fast_run"))
        return true;
    cli_error(TOOL, "-O: unknown preset '%s' (none, fast_compile or fast_run)", p);
    return false;
}

int tgc_cmd_compile(int argc, char **argv) {
    const char *out = NULL, *preset = NULL, *device = NULL, *names[256];
    int nnames = 0, rc = TG_EXIT_OK;
    bool no_gc = false;
    cli_taglist inc = {{0}, 0}, exc = {{0}, 0};
    static const struct option opts[] = {{"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {"no-gc", no_argument, 0, 'g'},
                                         {"device", required_argument, 0, 'd'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
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
            if (!cli_once(TOOL, "-o", &out, optarg) || !cli_path_file_ok(TOOL, "-o", optarg, "a compiled-function file"))
                return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once(TOOL, "-O", &preset, optarg)) return TG_EXIT_USAGE;
            break;
        case 'g': no_gc = true; break;
        case 'd':
            if (!cli_once(TOOL, "--device", &device, optarg) || !cli_device_ok(TOOL, optarg)) return TG_EXIT_USAGE;
            break;
        case 'I':
        case 'X':
            if (!cli_tag_opt(TOOL, c, &inc, &exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'h': compile_usage(stdout); return TG_EXIT_OK;
        case 'V': cli_print_version("tgc"); return TG_EXIT_OK;
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
    /* An OUT that replaces the graph, or cannot be written, is said
     * before the compile. */
    const char *path = argv[optind];
    const cli_file out_file = {"-o", out, "the compiled file"}, in_file = {"FILE", path, "the graph file compiled"};
    if (!cli_outputs_ok(TOOL, &out_file, 1, &in_file, 1, NULL, 0)) return TG_EXIT_USAGE;
    if ((rc = cli_out_check(TOOL, "-o", out))) return rc;
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
    tg_compile_options co = {.preset = preset, .no_gc = no_gc, .include = cli_tags(&inc),
                             .exclude = cli_tags(&exc), .device = device};
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
        /* (an I/O error's message starts with the path; OUT was tried
         * above, so it is the write that failed: a run-time failure) */
        int st = tg_ctx_status(ctx);
        cli_error(TOOL, "%s%s", st == TG_EIO ? "-o " : "", tg_ctx_message(ctx));
        rc = st == TG_EINVAL || st == TG_EUNSUPPORTED ? TG_EXIT_USAGE : TG_EXIT_FOUND;
        goto done;
    }
    for (int i = 0; i < nf; i++)
        printf("%s: %s: %d nodes, %d rewrites, compiled in %.3f s\n", out, cli_text(tg_function_name(fs[i])),
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
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    optind = 1;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!cli_once(TOOL, "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'o':
            if (!cli_once(TOOL, "-o", &out, optarg) || !cli_path_ok(TOOL, "-o", optarg)) return TG_EXIT_USAGE;
            break;
        case 'h':
            printf("usage: tgc export FILE.tgf [-f NAME] -o GRAPH.json\n"
                   "  -o -           write the JSON to standard output\n");
            return TG_EXIT_OK;
        case 'V': cli_print_version("tgc"); return TG_EXIT_OK;
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
    const cli_file out_file = {"-o", out, "the graph"}, in_file = {"FILE", argv[optind], "the .tgf exported"};
    if (!cli_outputs_ok(TOOL, &out_file, 1, &in_file, 1, NULL, 0)) return TG_EXIT_USAGE;
    tgc_source s;
    int rc = cli_out_check(TOOL, "-o", out);
    if (rc || (rc = tgc_source_open(&s, TOOL, argv[optind], fname, NULL, false))) return rc;
    tg_ctx *ctx = tg_ctx_new();
    int fi = 0;
    while (tg_tgf_function(s.t, fi) != s.f) fi++;
    char *text = tg_tgf_export(s.t, fi, ctx);
    cli_out o;
    if (!text) {
        cli_error(TOOL, "%s", tg_ctx_message(ctx));
        rc = TG_EXIT_FOUND;
    } else if (!strcmp(out, "-")) {
        /* (-o -: standard output; a failed write is one line, exit 1) */
        if (!cli_out_open(&o, TOOL, "-o", out) || (fputs(text, o.f), cli_out_close(&o, true))) rc = TG_EXIT_FOUND;
    } else if (tg_file_write_atomic(out, text, strlen(text), ctx)) {
        /* OUT was tried above: the write failed (a full disk) */
        cli_error(TOOL, "-o %s", tg_ctx_message(ctx));
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
    json_object *bodies;   /* nodes with a body, printed after the tree */
    json_object *body_ids; /* namespaced body key -> id */
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

/* The indent of a line at depth: " |" a level. Past WRAP levels the
 * bars start again after the depth they stand on, " [100] | |" at depth
 * 102, so that a deep line stays within about 2 * WRAP columns and still
 * says how deep it is (a cap, the bars stopping at 100 levels, printed
 * every line below it at one depth, children and parents alike). One
 * write of the bars, not a printf a level: those were most of printing a
 * deep chain. */
static void indent(int depth) {
    enum { WRAP = 100 };
    static char bars[2 * WRAP + 1];
    if (!bars[0])
        for (int i = 0; i < WRAP; i++) memcpy(bars + 2 * i, " |", 2);
    if (depth >= WRAP) printf(" [%d]", depth - depth % WRAP);
    if (depth > 0) fwrite(bars, 1, 2 * (size_t)(depth % WRAP), stdout);
}

static void queue_body(printer *P, const char *op, const char *name, const char *key, json_object *inputs,
                       json_object *attrs);

/* The line of v at depth; the node to expand when it is printed for the
 * first time, else NULL. */
static const tg_node *print_line(printer *P, const tg_var *v, int depth) {
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
        if (v->kind == TG_VAR_CONSTANT && v->value) {
            /* its values when there are few, or when they are all one */
            tg_str b = {0};
            if (tg_array_brief(v->value, 8, &b) && b.s && !b.oom) printf(" %s", b.s);
            tg_str_free(&b);
        }
        type_suffix(P, &v->type);
        printf("\n");
        return NULL;
    }
    const tg_node *n = v->owner;
    id_str(P, take_id(P, n->outputs[0]->id, &fresh), idb, sizeof idb);
    printf("%s", n->op->name);
    if (n->nout > 1) printf(".%d", v->owner_index);
    printf(" [id %s] '%s'", idb, cli_text(n->name ? n->name : v->id));
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
    if (!fresh) return NULL; /* printed once; later uses name its id */
    json_object *body = NULL;
    if (n->attrs && json_object_object_get_ex(n->attrs, "body", &body)) {
        json_object *ins = json_object_new_array();
        /* the tree's id of each input: its node's (keyed by the node's
         * first output), so output 1 of a multi-output node is [id] of
         * that node, as its line says */
        for (int k = 0; k < n->nin; k++) {
            const tg_var *in = n->inputs[k];
            json_object_array_add(ins, json_object_new_string(in->owner ? in->owner->outputs[0]->id : in->id));
        }
        queue_body(P, n->op->name, n->name ? n->name : n->outputs[0]->id, n->outputs[0]->id, ins, n->attrs);
    }
    return n;
}

/* The tree under v, depth first, inputs in order: with a stack of its
 * own, as a chain of a few hundred thousand nodes overflows the call
 * stack. */
typedef struct walk_item {
    const void *p;
    int depth;
} walk_item;

static bool walk_reserve(walk_item **st, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap * 2 > need ? *cap * 2 : need;
    walk_item *t = realloc(*st, c * sizeof *t);
    if (!t) return false;
    *st = t;
    *cap = c;
    return true;
}

static void print_var(printer *P, const tg_var *root, int depth) {
    size_t n = 0, cap = 0;
    walk_item *st = NULL;
    if (!walk_reserve(&st, &cap, 64)) return;
    st[n++] = (walk_item){root, depth};
    while (n) {
        walk_item it = st[--n];
        const tg_node *nd = print_line(P, it.p, it.depth);
        if (!nd) continue;
        if (!walk_reserve(&st, &cap, n + (size_t)nd->nin)) break;
        for (int k = nd->nin - 1; k >= 0; k--) st[n++] = (walk_item){nd->inputs[k], it.depth + 1};
    }
    free(st);
}

/* ---- inner graphs ----
 * A node with a body (scan, op_from_graph, a fused composite) is queued
 * when the tree prints it and its body printed after the tree, as
 * Theano's "Inner graphs": every line of a body starts with " >", its
 * nodes and variables take ids from the same count as the tree's (a node
 * used twice is printed once, then named by its id), each body input
 * names the outer variable it is bound to ("-> [id B]"), and a body's own
 * nodes with bodies are queued in turn. Body ids live in a namespace of
 * their owner's: "<owner key>\x1f<id>", so that a body's "x0" is not the
 * graph's. */

/* An entry of the queue: {"op", "name", "key" (the owner's, namespaced),
 * "inputs" (the owner's inputs' keys, namespaced; null for an inline
 * constant), "attrs"}. */
static void queue_body(printer *P, const char *op, const char *name, const char *key, json_object *inputs,
                       json_object *attrs) {
    json_object *e = json_object_new_object();
    json_object_object_add(e, "op", json_object_new_string(op));
    json_object_object_add(e, "name", json_object_new_string(name));
    json_object_object_add(e, "key", json_object_new_string(key));
    json_object_object_add(e, "inputs", inputs);
    json_object_object_add(e, "attrs", json_object_get(attrs));
    json_object_array_add(P->bodies, e);
}

/* The id of ns + id: the tree's for a variable of the graph the tree
 * printed (ns ""), else from a map of namespaced keys (copied: the tree's
 * map borrows its keys from the function). */
/* a + b, a new string (NULL when out of memory): namespaced keys. */
static char *join2(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *k = malloc(la + lb + 1);
    if (!k) return NULL;
    memcpy(k, a, la);
    memcpy(k + la, b, lb + 1);
    return k;
}

static int take_id_ns(printer *P, const char *ns, const char *id, bool *fresh) {
    void *main_id = *ns ? NULL : tg_idmap_get(P->ids, id);
    if (main_id) {
        *fresh = false;
        return (int)(intptr_t)main_id - 1;
    }
    char *k = join2(ns, id);
    if (!k) {
        *fresh = false;
        return 0;
    }
    json_object *got = NULL;
    int v;
    if (json_object_object_get_ex(P->body_ids, k, &got)) {
        *fresh = false;
        v = json_object_get_int(got);
    } else {
        *fresh = true;
        v = P->next_id++;
        json_object_object_add(P->body_ids, k, json_object_new_int(v));
    }
    free(k);
    return v;
}

static void json_type_suffix(const printer *P, json_object *var) {
    json_object *type = NULL, *dt = NULL, *shape = NULL;
    if ((!P->types && !P->shapes) || !var || !json_object_object_get_ex(var, "type", &type)) return;
    printf(" <");
    if (P->types && json_object_object_get_ex(type, "dtype", &dt)) printf("%s", json_object_get_string(dt));
    if (P->shapes && json_object_object_get_ex(type, "shape", &shape) && json_object_is_type(shape, json_type_array)) {
        size_t nd = json_object_array_length(shape);
        printf("(");
        for (size_t d = 0; d < nd; d++) {
            json_object *l = json_object_array_get_idx(shape, d);
            printf("%s", d ? ", " : "");
            if (json_object_is_type(l, json_type_int) && json_object_get_int64(l) >= 0)
                printf("%lld", (long long)json_object_get_int64(l));
            else
                printf("?");
        }
        printf(nd == 1 ? ",)" : ")");
    }
    printf(">");
}

/* A constant's value as the format writes it (section 5), for its line:
 * what tg_array_brief makes of it (a few values, or "(n,) of v"); else
 * nothing. With type_too (an inline constant, which declares no type),
 * its type after it, as --types and --shapes ask. */
static void json_value_suffix(const printer *P, json_object *v, bool type_too) {
    if (!v) return;
    tg_ctx *ctx = tg_ctx_new();
    bool weak = false;
    tg_array *a = ctx ? tg_value_from_json(v, TG_DTYPE_INVALID, -1, NULL, NULL, "value", &weak, ctx) : NULL;
    tg_str b = {0};
    if (a && tg_array_brief(a, 8, &b) && b.s && !b.oom) printf(" %s", b.s);
    tg_str_free(&b);
    if (a && type_too && tg_array_ndim(a) <= TG_MAX_NDIM) {
        tg_type t = {tg_array_dtype(a), tg_array_ndim(a), {0}};
        for (int d = 0; d < t.ndim; d++) t.shape[d] = tg_array_shape(a)[d];
        type_suffix(P, &t);
    }
    tg_array_free(a);
    tg_ctx_free(ctx);
}

typedef struct body_scope {
    const char *ns;       /* this body's namespace */
    json_object *byout;   /* output id -> its node */
    json_object *vars;    /* declared id -> its variable */
    json_object *bound;   /* body input id -> namespaced outer key */
    tg_graph *g;          /* with --types or --shapes: the body loaded, for
                           * the types of its nodes' outputs, which the
                           * body does not declare; NULL otherwise */
} body_scope;

/* The type of body variable id: from the loaded body (every variable,
 * node outputs too), else as declared (inputs and declared constants). */
static void body_type_suffix(const printer *P, const body_scope *S, const char *id, json_object *var) {
    const tg_var *v = S->g ? tg_graph_find(S->g, id) : NULL;
    if (v)
        type_suffix(P, &v->type);
    else
        json_type_suffix(P, var);
}

static void body_prefix(int depth) {
    printf(" >");
    indent(depth);
}

static json_object *print_body_line(printer *P, const body_scope *S, json_object *ref, int depth) {
    char idb[16];
    bool fresh;
    body_prefix(depth);
    if (!json_object_is_type(ref, json_type_string)) { /* an inline constant */
        json_object *v = NULL;
        if (json_object_is_type(ref, json_type_object)) json_object_object_get_ex(ref, "value", &v);
        printf("(constant)");
        json_value_suffix(P, v, true);
        printf("\n");
        return NULL;
    }
    const char *id = json_object_get_string(ref);
    json_object *node = NULL, *var = NULL;
    json_object_object_get_ex(S->vars, id, &var);
    if (!json_object_object_get_ex(S->byout, id, &node)) {
        id_str(P, take_id_ns(P, S->ns, id, &fresh), idb, sizeof idb);
        printf("%s [id %s]", id, idb);
        json_object *cv = NULL, *outer = NULL;
        if (var && json_object_object_get_ex(var, "constant", &cv)) {
            printf(" (constant)");
            json_value_suffix(P, cv, false);
        }
        body_type_suffix(P, S, id, var);
        if (json_object_object_get_ex(S->bound, id, &outer) && json_object_is_type(outer, json_type_string)) {
            id_str(P, take_id_ns(P, "", json_object_get_string(outer), &fresh), idb, sizeof idb);
            printf(" -> [id %s]", idb);
        }
        printf("\n");
        return NULL;
    }
    json_object *op = NULL, *outs = NULL, *name = NULL, *ins = NULL, *attrs = NULL, *body = NULL;
    json_object_object_get_ex(node, "op", &op);
    json_object_object_get_ex(node, "outputs", &outs);
    const char *first = id;
    size_t nout = outs && json_object_is_type(outs, json_type_array) ? json_object_array_length(outs) : 0;
    int which = 0;
    for (size_t j = 0; j < nout; j++) {
        const char *o = json_object_get_string(json_object_array_get_idx(outs, j));
        if (!j && o) first = o;
        if (o && !strcmp(o, id)) which = (int)j;
    }
    int nid = take_id_ns(P, S->ns, first, &fresh);
    id_str(P, nid, idb, sizeof idb);
    const char *opname = op ? json_object_get_string(op) : "?";
    printf("%s", opname);
    if (nout > 1) printf(".%d", which);
    bool named = json_object_object_get_ex(node, "name", &name) && json_object_is_type(name, json_type_string);
    printf(" [id %s] '%s'", idb, cli_text(named ? json_object_get_string(name) : id));
    body_type_suffix(P, S, id, var);
    printf("\n");
    if (!fresh) return NULL;
    if (json_object_object_get_ex(node, "attrs", &attrs) && json_object_object_get_ex(attrs, "body", &body)) {
        json_object *refs = json_object_new_array();
        if (json_object_object_get_ex(node, "inputs", &ins) && json_object_is_type(ins, json_type_array))
            for (size_t k = 0; k < json_object_array_length(ins); k++) {
                json_object *e = json_object_array_get_idx(ins, k);
                if (!json_object_is_type(e, json_type_string)) {
                    json_object_array_add(refs, NULL);
                    continue;
                }
                /* keyed as the input's node is (by its first output),
                 * so that output 1 of a split names the split's id, as
                 * print_line's inputs do */
                const char *iid = json_object_get_string(e);
                json_object *inode = NULL, *iouts = NULL, *o0;
                if (json_object_object_get_ex(S->byout, iid, &inode) &&
                    json_object_object_get_ex(inode, "outputs", &iouts) &&
                    json_object_is_type(iouts, json_type_array) &&
                    (o0 = json_object_array_get_idx(iouts, 0)) && json_object_is_type(o0, json_type_string))
                    iid = json_object_get_string(o0);
                char *k2 = join2(S->ns, iid);
                if (!k2) continue;
                json_object_array_add(refs, json_object_new_string(k2));
                free(k2);
            }
        char *key = join2(S->ns, first);
        if (key) {
            queue_body(P, opname, named ? json_object_get_string(name) : first, key, refs, attrs);
            free(key);
        } else {
            json_object_put(refs);
        }
    }
    return node;
}

static void print_body_var(printer *P, const body_scope *S, json_object *root) {
    size_t n = 0, cap = 0;
    walk_item *st = NULL;
    if (!walk_reserve(&st, &cap, 64)) return;
    st[n++] = (walk_item){root, 0};
    while (n) {
        walk_item it = st[--n];
        json_object *nd = print_body_line(P, S, (json_object *)it.p, it.depth), *ins = NULL;
        if (!nd || !json_object_object_get_ex(nd, "inputs", &ins) || !json_object_is_type(ins, json_type_array))
            continue;
        size_t nin = json_object_array_length(ins);
        if (!walk_reserve(&st, &cap, n + nin)) break;
        for (size_t k = nin; k-- > 0;) st[n++] = (walk_item){json_object_array_get_idx(ins, k), it.depth + 1};
    }
    free(st);
}

static int64_t attr_int(json_object *attrs, const char *k, int64_t dflt) {
    json_object *v = NULL;
    return json_object_object_get_ex(attrs, k, &v) && json_object_is_type(v, json_type_int) ? json_object_get_int64(v)
                                                                                             : dflt;
}

static size_t attr_list_len(json_object *attrs, const char *k, size_t i) {
    json_object *v = NULL, *e;
    if (!json_object_object_get_ex(attrs, k, &v) || !json_object_is_type(v, json_type_array) ||
        i >= json_object_array_length(v))
        return 0;
    e = json_object_array_get_idx(v, i);
    return json_object_is_type(e, json_type_array) ? json_object_array_length(e) : 0;
}

/* bound: each body input id -> the namespaced key of the outer input it
 * is bound to. A scan's body takes each sequence's slices by taps, each
 * recurrent output's past values by taps, then the non-sequences (FORMAT
 * s7); any other body (op_from_graph, composite) its node's inputs in
 * order. */
static void bind_inputs(json_object *entry, json_object *body, json_object *bound) {
    json_object *op = NULL, *ins = NULL, *attrs = NULL, *bins = NULL;
    json_object_object_get_ex(entry, "op", &op);
    json_object_object_get_ex(entry, "inputs", &ins);
    json_object_object_get_ex(entry, "attrs", &attrs);
    if (!json_object_object_get_ex(body, "inputs", &bins) || !json_object_is_type(bins, json_type_array) ||
        !json_object_is_type(ins, json_type_array))
        return;
    size_t nb = json_object_array_length(bins), nin = json_object_array_length(ins), b = 0;
    size_t *outer = calloc(nb + 1, sizeof *outer);
    if (!outer) return;
    for (size_t i = 0; i < nb; i++) outer[i] = SIZE_MAX;
    if (op && !strcmp(json_object_get_string(op), "scan")) {
        int64_t nseq = attr_int(attrs, "n_sequences", 0), nrec = attr_int(attrs, "n_recurrent", 0);
        int64_t nns = attr_int(attrs, "n_non_sequences", 0);
        json_object *hs = NULL;
        size_t base = json_object_object_get_ex(attrs, "has_n_steps", &hs) && json_object_get_boolean(hs) ? 1 : 0;
        for (int64_t s = 0; s < nseq; s++)
            for (size_t t = 0; t < attr_list_len(attrs, "sequence_taps", (size_t)s) && b < nb; t++)
                outer[b++] = base + (size_t)s;
        for (int64_t r = 0; r < nrec; r++)
            for (size_t t = 0; t < attr_list_len(attrs, "output_taps", (size_t)r) && b < nb; t++)
                outer[b++] = base + (size_t)nseq + (size_t)r;
        for (int64_t j = 0; j < nns && b < nb; j++) outer[b++] = base + (size_t)(nseq + nrec + j);
    } else {
        for (; b < nb; b++) outer[b] = b;
    }
    for (size_t i = 0; i < nb; i++) {
        json_object *bi = json_object_array_get_idx(bins, i), *oi;
        if (outer[i] >= nin || !json_object_is_type(bi, json_type_string)) continue;
        oi = json_object_array_get_idx(ins, outer[i]);
        if (json_object_is_type(oi, json_type_string))
            json_object_object_add(bound, json_object_get_string(bi), json_object_get(oi));
    }
    free(outer);
}

static void print_bodies(printer *P) {
    if (!json_object_array_length(P->bodies)) return;
    printf("\nInner graphs:\n");
    /* The queue grows while it is read: bodies inside bodies. */
    for (size_t b = 0; b < json_object_array_length(P->bodies); b++) {
        json_object *e = json_object_array_get_idx(P->bodies, b), *op, *name, *key, *attrs, *body = NULL,
                    *nodes = NULL, *vars = NULL, *outs = NULL;
        json_object_object_get_ex(e, "op", &op);
        json_object_object_get_ex(e, "name", &name);
        json_object_object_get_ex(e, "key", &key);
        json_object_object_get_ex(e, "attrs", &attrs);
        if (!json_object_object_get_ex(attrs, "body", &body) || !json_object_is_type(body, json_type_object)) continue;
        bool fresh;
        char idb[16];
        const char *k = json_object_get_string(key);
        id_str(P, take_id_ns(P, "", k, &fresh), idb, sizeof idb);
        printf("\n%s [id %s] '%s'\n", json_object_get_string(op), idb, cli_text(json_object_get_string(name)));
        char *ns = join2(k, "\x1f");
        if (!ns) continue;
        body_scope S = {ns, json_object_new_object(), json_object_new_object(), json_object_new_object(), NULL};
        if (P->types || P->shapes) {
            /* loaded with its node when the graph was: it loads again */
            tg_ctx *ctx = tg_ctx_new();
            if (ctx) S.g = tg_body_load(body, "attrs.body", ctx);
            tg_ctx_free(ctx);
        }
        if (json_object_object_get_ex(body, "nodes", &nodes) && json_object_is_type(nodes, json_type_array))
            for (size_t i = 0; i < json_object_array_length(nodes); i++) {
                json_object *nd = json_object_array_get_idx(nodes, i), *os = NULL;
                if (json_object_object_get_ex(nd, "outputs", &os) && json_object_is_type(os, json_type_array))
                    for (size_t j = 0; j < json_object_array_length(os); j++) {
                        json_object *o = json_object_array_get_idx(os, j);
                        if (json_object_is_type(o, json_type_string))
                            json_object_object_add(S.byout, json_object_get_string(o), json_object_get(nd));
                    }
            }
        if (json_object_object_get_ex(body, "variables", &vars) && json_object_is_type(vars, json_type_array))
            for (size_t i = 0; i < json_object_array_length(vars); i++) {
                json_object *v = json_object_array_get_idx(vars, i), *id = NULL;
                if (json_object_object_get_ex(v, "id", &id) && json_object_is_type(id, json_type_string))
                    json_object_object_add(S.vars, json_object_get_string(id), json_object_get(v));
            }
        bind_inputs(e, body, S.bound);
        if (json_object_object_get_ex(body, "outputs", &outs) && json_object_is_type(outs, json_type_array))
            for (size_t i = 0; i < json_object_array_length(outs); i++)
                print_body_var(P, &S, json_object_array_get_idx(outs, i));
        json_object_put(S.byout);
        json_object_put(S.vars);
        json_object_put(S.bound);
        tg_graph_free(S.g);
        free(ns);
    }
}

static void print_function(const tg_function *f, bool chars, bool types, bool shapes,
                           const double *secs, long calls) {
    printer P = {chars, types, shapes, secs, 0, calls, 0, tg_idmap_new(), f, json_object_new_array(),
                 json_object_new_object()};
    const tg_fgraph *fg = f->fg;
    for (int k = 0; secs && k < f->nsched; k++) P.total += secs[k];
    printf("%s:", cli_text(f->name));
    if (secs) printf(" %ld calls, %.3f ms per call in the nodes", calls, P.total * 1e3 / (double)calls);
    printf("\n");
    for (int r = 0; r < fg->nout + fg->nupd; r++) {
        if (r >= fg->nout) printf("update %s <-\n", fg->upd_shared[r - fg->nout]->id);
        print_var(&P, fg->outputs[r], 0);
    }
    print_bodies(&P);
    tg_idmap_free(P.ids);
    json_object_put(P.bodies);
    json_object_put(P.body_ids);
}

static void print_usage(FILE *f) {
    fprintf(f, "usage: tgc print FILE [-f NAME] [--optimized] [-O PRESET] [--include TAG]...\n"
               "                 [--exclude TAG]... [--ids int|char] [--types] [--shapes]\n"
               "                 [--profile N -i ID=VALUE...]\n"
               "  --optimized    print the function after the optimizer (a .tgf always is)\n"
               "  -O PRESET      with --optimized: none, fast_compile or fast_run (default);\n"
               "                 not for a .tgf, optimized when it was compiled\n");
    cli_tags_help(f, 17);
    fprintf(f, "  --profile N    call the function N times (after one call not counted) with\n"
               "                 the -i inputs and show each node's time per call and share\n");
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
    const char *ids_s = NULL, *profile_s = NULL; /* (each given once) */
    bool optimized = false, types = false, shapes = false;
    long calls = 0;
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs = 0;
    cli_taglist inc = {{0}, 0}, exc = {{0}, 0};
    static const struct option opts[] = {{"optimized", no_argument, 0, 'z'},
                                         {"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {"profile", required_argument, 0, 'p'},
                                         {"ids", required_argument, 0, 'd'},
                                         {"types", no_argument, 0, 't'},
                                         {"shapes", no_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
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
            if (!cli_once(TOOL, "--profile", &profile_s, optarg)) return TG_EXIT_USAGE;
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
            if (!cli_tag_opt(TOOL, c, &inc, &exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'd':
            if (!cli_once(TOOL, "--ids", &ids_s, optarg)) return TG_EXIT_USAGE;
            ids = optarg;
            break;
        case 't': types = true; break;
        case 's': shapes = true; break;
        case 'h': print_usage(stdout); return TG_EXIT_OK;
        case 'V': cli_print_version("tgc"); return TG_EXIT_OK;
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
     * holds only its optimized graph, which loading never optimizes
     * again: saying so beats ignoring -O (as tgc run does). */
    if (cli_is_tgf(argv[optind]) && (inc.n || exc.n || preset)) {
        cli_error(TOOL, "%s is already optimized: -O, --include and --exclude apply when compiling it "
                        "(tgc compile)",
                  argv[optind]);
        return TG_EXIT_USAGE;
    }
    if ((inc.n || exc.n || preset) && !optimized) {
        cli_error(TOOL, "print: -O, --include and --exclude choose the rewrites of --optimized");
        return TG_EXIT_USAGE;
    }
    tg_compile_options co = {.preset = optimized ? preset : "none", .include = cli_tags(&inc),
                             .exclude = cli_tags(&exc)};
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
