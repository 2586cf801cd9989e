/* tgviz: draw a graph as a self-contained interactive HTML page (d3,
 * inlined; laid out by Graphviz's dot here, in C), or as DOT, SVG, PNG or
 * PDF through Graphviz.
 *
 *   tgviz FILE [-f NAME] [--optimized] [--original] [--profile PROF.json]
 *         [-O PRESET] [--include TAG]... [--exclude TAG]...
 *         [--format html|dot|svg|png|pdf] [--layout auto|dot|layers] -o OUT
 *
 * Exit status: 0 success; 1 a run-time failure (Graphviz could not lay out
 * or render); 2 bad usage or bad input.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "model.h"
#include "io/io.h"
#include "tg/tgf.h"
#include "vm/vm.h"

static const char *TOOL = "tgviz";


static void usage(FILE *f) {
    fprintf(f,
            "usage: tgviz FILE [-f NAME] [--optimized] [--original] [--profile PROF.json]\n"
            "             [-O PRESET] [--include TAG]... [--exclude TAG]...\n"
            "             [--format html|dot|svg|png|pdf] [--layout auto|dot|layers] -o OUT\n"
            "\n"
            "Draw a graph (interchange JSON) as one self-contained HTML page that works\n"
            "offline (zoom, pan, drag, search, a panel per node, nested bodies that expand\n"
            "in place), or as a Graphviz picture. FILE may be a compiled-function .tgf:\n"
            "its saved optimized graph, as restored, and the original graph it keeps.\n"
            "  -f NAME          the function (default: the only one, 'main', or the first)\n"
            "  --optimized      draw the compiled function's graph\n"
            "  --original       draw the graph as loaded\n"
            "                   (neither: the page holds both, with a toggle, starting on\n"
            "                   the optimized one; both: side by side; a picture is the\n"
            "                   optimized graph unless --original alone is given)\n"
            "  --profile F      shade nodes by their share of the time, from tgprof's JSON\n"
            "                   report ({\"functions\":[{\"name\",\"nodes\":[{\"key\",\"time_s\",\n"
            "                   \"share\"}]}]})\n"
            "  -O PRESET        optimizer preset: none, fast_compile or fast_run (default);\n"
            "                   not for a .tgf\n"
            "  --include TAG, --exclude TAG\n"
            "                   turn rewrites on or off beyond the preset (a pass, a group\n"
            "                   such as fusion or inplace, or a rewrite's name;\n"
            "                   repeatable); not for a .tgf\n"
            "  --format F       html (default), dot, svg, png or pdf; without it, taken\n"
            "                   from OUT's extension (.htm is html, .gv is dot; an\n"
            "                   OUT without one is html, any other is an error)\n"
            "  --layout L       dot (Graphviz), layers (tgviz's own layered layout, linear\n"
            "                   time, straight edges) or auto (default: dot up to 2,000\n"
            "                   drawn nodes whose long edges cross at most 3,000 ranks\n"
            "                   in all, layers beyond)\n"
            "  -o OUT           the file to write ('-': standard output)\n"
            "  -h, --help       this help\n"
            "  --version        the version\n"
            "\n"
            "Exit status: 0 success, 1 a run-time failure, 2 bad usage or bad input.\n");
}

/* OUT's format from its extension; NULL for none (html then) and, with
 * *unknown set, for one that names no format. */
static const char *ext_format(const char *path, bool *unknown) {
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    *unknown = false;
    if (!dot || (slash && dot < slash) || dot == path || dot[-1] == '/') return NULL;
    *unknown = true;
    static const char *const map[][2] = {{".html", "html"}, {".htm", "html"}, {".dot", "dot"},
                                         {".gv", "dot"},     {".svg", "svg"},  {".png", "png"},
                                         {".pdf", "pdf"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcasecmp(dot, map[i][0])) {
            *unknown = false;
            return map[i][1];
        }
    return NULL;
}

/* ---- the profile (tgprof's JSON report; only the fields named in the
 * usage are read, others are tolerated) ---- */
static int profile_read(const char *path, const char *fname, json_object **nodes_out, size_t *fi_out,
                        json_object **root_out, tg_ctx *ctx) {
    size_t len = 0;
    char *text = tg_file_read(path, &len, ctx);
    if (!text) {
        cli_error(TOOL, "--profile %s", tg_ctx_message(ctx));
        return -1;
    }
    tg_json_fail jf;
    json_object *root = tg_json_parse_object(NULL, text, len, TG_JSON_DEPTH, &jf), *fns, *nodes = NULL;
    if (!root) {
        int line, col;
        tg_json_line_col(text, jf.at, &line, &col);
        if (jf.status == TG_ENOMEM)
            cli_error(TOOL, "--profile %s: out of memory", path);
        else if (jf.why == tg_json_not_object)
            cli_error(TOOL, "--profile %s: functions: expected an array of functions", path);
        else
            cli_error(TOOL, "--profile %s: line %d, column %d: invalid JSON: %s", path, line, col, jf.why);
        tg_free(text);
        return -1;
    }
    tg_free(text);
    if (!json_object_is_type(root, json_type_object) || !json_object_object_get_ex(root, "functions", &fns) ||
        !json_object_is_type(fns, json_type_array)) {
        cli_error(TOOL, "--profile %s: functions: expected an array of functions", path);
        goto fail;
    }
    size_t nf = json_object_array_length(fns);
    json_object *pick = NULL;
    for (size_t i = 0; i < nf; i++) {
        json_object *fo = json_object_array_get_idx(fns, i), *nm;
        if (!json_object_is_type(fo, json_type_object)) {
            cli_error(TOOL, "--profile %s: functions[%zu]: expected an object", path, i);
            goto fail;
        }
        if (json_object_object_get_ex(fo, "name", &nm) && json_object_is_type(nm, json_type_string) &&
            !strcmp(json_object_get_string(nm), fname))
            pick = fo;
    }
    if (!pick && nf == 1) pick = json_object_array_get_idx(fns, 0);
    if (!pick) {
        cli_error(TOOL, "--profile %s: functions: no function named '%s'", path, fname);
        goto fail;
    }
    size_t fi = 0;
    for (; fi < nf && json_object_array_get_idx(fns, fi) != pick; fi++) {
    }
    if (!json_object_object_get_ex(pick, "nodes", &nodes) || !json_object_is_type(nodes, json_type_array)) {
        cli_error(TOOL, "--profile %s: functions[%zu].nodes: expected an array", path, fi);
        goto fail;
    }
    for (size_t i = 0; i < json_object_array_length(nodes); i++) {
        json_object *n = json_object_array_get_idx(nodes, i), *v;
        if (!json_object_is_type(n, json_type_object) || !json_object_object_get_ex(n, "key", &v) ||
            !json_object_is_type(v, json_type_string)) {
            cli_error(TOOL, "--profile %s: functions[%zu].nodes[%zu].key: expected a string", path, fi, i);
            goto fail;
        }
        /* json-c reads NaN and Infinity, which would go into the page as
         * words its JSON.parse refuses: not numbers here. */
        double t;
        if (!json_object_object_get_ex(n, "time_s", &v) ||
            !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) ||
            !isfinite(t = json_object_get_double(v)) || t < 0) {
            cli_error(TOOL, "--profile %s: functions[%zu].nodes[%zu].time_s: expected a number >= 0", path, fi, i);
            goto fail;
        }
        double s;
        if (!json_object_object_get_ex(n, "share", &v) ||
            !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) ||
            !((s = json_object_get_double(v)) >= 0 && s <= 1)) { /* NaN too */
            cli_error(TOOL, "--profile %s: functions[%zu].nodes[%zu].share: expected a number in [0, 1]", path,
                      fi, i);
            goto fail;
        }
    }
    *nodes_out = nodes;
    *fi_out = fi;
    *root_out = root;
    return 0;
fail:
    json_object_put(root);
    return -1;
}

/* Each node of f (may be NULL): its key -> its op's name, into m. */
static int function_ops(struct tg_idmap *m, const tg_function *f) {
    for (int k = 0; f && k < tg_function_node_count(f); k++)
        if (tg_idmap_put(m, tg_function_node_key(f, k), (void *)tg_function_node_op(f, k))) return -1;
    return 0;
}

/* Every node the profile names must be a node of the function drawn:
 * with its key and op, of the function as the optimizer made it (f) or
 * as written (the graph's, compiled here with preset none: a gradient's
 * expansion is there), or, a node another preset made (a fused
 * composite), one that stands for nodes of the function as written (its
 * origins). A key that names no node of the picture was ignored, so a
 * profile of another graph that shared one key with this one (an input
 * named x, a first dot xw) shaded the picture with another graph's times;
 * now it is refused, on the first node it does not hold. f and g may be
 * NULL (a .tgf that keeps no original graph). 0, or -1 with the one line
 * said. The op and origins of a node are optional (tgprof writes both):
 * without them the key alone is checked. */
static int profile_check(const char *prof_path, const char *path, const char *fn, json_object *prof, size_t fi,
                         const tg_function *f, tg_graph *g, int gfi, tg_ctx *ctx) {
    struct tg_idmap *opt = tg_idmap_new(), *orig = tg_idmap_new();
    tg_function *f0 = NULL;
    int rc = -1;
    if (!opt || !orig || function_ops(opt, f)) goto oom;
    if (g && gfi >= 0) {
        tg_compile_options co = {.preset = "none"};
        /* (a function that does not compile is drawn all the same: then
         * f alone checks) */
        if (!(f0 = tg_function_compile(g, gfi, &co, ctx)))
            tg_ctx_clear(ctx);
        else if (function_ops(orig, f0))
            goto oom;
    }
    for (size_t i = 0; i < json_object_array_length(prof); i++) {
        json_object *n = json_object_array_get_idx(prof, i), *v = NULL, *origins = NULL;
        const char *key = json_object_get_string(json_object_object_get_ex(n, "key", &v) ? v : NULL), *op = NULL;
        if (json_object_object_get_ex(n, "op", &v)) {
            if (!json_object_is_type(v, json_type_string)) {
                cli_error(TOOL, "--profile %s: functions[%zu].nodes[%zu].op: expected a string", prof_path, fi, i);
                goto done;
            }
            op = json_object_get_string(v);
        }
        const char *o1 = tg_idmap_get(opt, key), *o0 = tg_idmap_get(orig, key);
        if ((o1 && (!op || !strcmp(o1, op))) || (o0 && (!op || !strcmp(o0, op)))) continue;
        /* a node the optimizer made: all it stands for is this graph's */
        size_t no = 0, j = 0;
        if (json_object_object_get_ex(n, "origins", &origins) && json_object_is_type(origins, json_type_array))
            no = json_object_array_length(origins);
        for (; j < no; j++) {
            json_object *e = json_object_array_get_idx(origins, j);
            const char *ok = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : NULL;
            if (!ok || (!tg_idmap_get(orig, ok) && !tg_idmap_get(opt, ok))) break;
        }
        if (no && j == no) continue;
        cli_error(TOOL,
                  "--profile %s: functions[%zu].nodes[%zu]: node '%s'%s%s%s is not a node of function '%s' of %s: "
                  "the profile belongs to another graph or function",
                  prof_path, fi, i, key, op ? " (" : "", op ? op : "", op ? ")" : "", fn, path);
        goto done;
    }
    rc = 0;
    goto done;
oom:
    cli_error(TOOL, "out of memory");
done:
    tg_function_free(f0);
    tg_idmap_free(opt);
    tg_idmap_free(orig);
    return rc;
}

/* Copy time_s and share onto the drawn apply nodes with the same key;
 * the number of nodes matched. */
static int profile_apply(json_object *drawn, json_object *prof) {
    int matched = 0;
    size_t np = json_object_array_length(prof), nd = json_object_array_length(drawn);
    /* The profile's nodes by key (the first of a key wins), so that the
     * match is linear: 100,000 drawn nodes against 12,500 profiled ones
     * were 10^9 string comparisons. */
    struct tg_idmap *by_key = tg_idmap_new();
    if (!by_key) return -1;
    for (size_t j = np; j-- > 0;) {
        json_object *p = json_object_array_get_idx(prof, j), *pk;
        if (json_object_object_get_ex(p, "key", &pk) && tg_idmap_put(by_key, json_object_get_string(pk), p)) {
            tg_idmap_free(by_key);
            return -1;
        }
    }
    for (size_t i = 0; i < nd; i++) {
        json_object *d = json_object_array_get_idx(drawn, i), *k, *kind, *v;
        if (!json_object_object_get_ex(d, "kind", &kind) || strcmp(json_object_get_string(kind), "apply") ||
            !json_object_object_get_ex(d, "key", &k))
            continue;
        json_object *p = tg_idmap_get(by_key, json_object_get_string(k));
        if (!p) continue;
        json_object_object_get_ex(p, "time_s", &v);
        json_object_object_add(d, "time_s", json_object_new_double(json_object_get_double(v)));
        json_object_object_get_ex(p, "share", &v);
        json_object_object_add(d, "share", json_object_new_double(json_object_get_double(v)));
        matched++;
    }
    tg_idmap_free(by_key);
    return matched;
}

/* The function to draw: `found`, the index of -f NAME (or, without -f,
 * of the only function or 'main'), except that without -f a file of
 * several functions none of which is 'main' draws the first, with a note
 * (*first_of set to the count; 0 otherwise): a picture of the file beats
 * an error, and -f picks another. < 0: the error is on ctx. */
static int choose(const char *fname, int count, int found, int *first_of, tg_ctx *ctx) {
    *first_of = 0;
    if (fname || count < 2 || found >= 0) return found;
    tg_ctx_clear(ctx);
    *first_of = count;
    return 0;
}

int main(int argc, char **argv) {
    cli_start(TOOL);
    const char *fname = NULL, *prof_path = NULL, *format = NULL, *outp = NULL, *preset = NULL, *layout_s = NULL;
    cli_taglist inc = {{0}, 0}, exc = {{0}, 0};
    bool want_opt = false, want_orig = false;
    vz_layout_kind layout = VZ_LAYOUT_AUTO;
    static const struct option longs[] = {{"help", no_argument, 0, 'h'},     {"version", no_argument, 0, 'V'},
                                          {"layout", required_argument, 0, 'L'},
                                          {"optimized", no_argument, 0, 'P'}, {"original", no_argument, 0, 'R'},
                                          {"profile", required_argument, 0, 'p'},
                                          {"format", required_argument, 0, 'F'},
                                          {"include", required_argument, 0, 'I'},
                                          {"exclude", required_argument, 0, 'X'},
                                          {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hf:o:O:", longs, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return TG_EXIT_OK;
        case 'V': cli_print_version("tgviz"); return TG_EXIT_OK;
        case 'f':
            if (!cli_once(TOOL, "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'o':
            if (!cli_once(TOOL, "-o", &outp, optarg) || !cli_path_ok(TOOL, "-o", optarg)) return TG_EXIT_USAGE;
            break;
        case 'I':
        case 'X':
            if (!cli_tag_opt(TOOL, c, &inc, &exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once(TOOL, "-O", &preset, optarg)) return TG_EXIT_USAGE;
            break;
        case 'P': want_opt = true; break;
        case 'R': want_orig = true; break;
        case 'p':
            if (!cli_once(TOOL, "--profile", &prof_path, optarg)) return TG_EXIT_USAGE;
            break;
        case 'F':
            if (!cli_once(TOOL, "--format", &format, optarg)) return TG_EXIT_USAGE;
            break;
        case 'L':
            if (!cli_once(TOOL, "--layout", &layout_s, optarg)) return TG_EXIT_USAGE;
            if (!strcmp(optarg, "auto")) layout = VZ_LAYOUT_AUTO;
            else if (!strcmp(optarg, "dot")) layout = VZ_LAYOUT_DOT;
            else if (!strcmp(optarg, "layers")) layout = VZ_LAYOUT_LAYERS;
            else {
                cli_error(TOOL, "--layout: unknown layout '%s' (auto, dot or layers)", optarg);
                return TG_EXIT_USAGE;
            }
            break;
        default: return cli_getopt_error(TOOL, NULL, c, argv);
        }
    }
    if (optind != argc - 1) {
        cli_error(TOOL, optind >= argc ? "no graph file given (see tgviz --help)"
                                       : "one graph file expected, got more (see tgviz --help)");
        return TG_EXIT_USAGE;
    }
    if (!outp) {
        cli_error(TOOL, "-o OUT is required (see tgviz --help)");
        return TG_EXIT_USAGE;
    }
    /* The drawing must not replace the graph drawn or the profile read
     * (written whole at the end, by a rename, it did without a word). */
    const cli_file out_file = {"-o", outp, "the drawing"};
    const cli_file in_files[] = {{"FILE", argv[optind], "the graph file being drawn"},
                                 {"--profile", prof_path, "the profile read by --profile"}};
    if (!cli_outputs_ok(TOOL, &out_file, 1, in_files, 2, NULL, 0)) return TG_EXIT_USAGE;
    if (!format && strcmp(outp, "-")) {
        bool unknown;
        format = ext_format(outp, &unknown);
        if (unknown) {
            cli_error(TOOL, "-o %s: '%s' names no format (.html, .svg, .png, .pdf, .dot or .gv; or give --format)",
                      outp, strrchr(outp, '.'));
            return TG_EXIT_USAGE;
        }
    }
    if (!format) format = "html";
    if (strcmp(format, "html") && strcmp(format, "dot") && strcmp(format, "svg") && strcmp(format, "png") &&
        strcmp(format, "pdf")) {
        cli_error(TOOL, "--format: unknown format '%s' (html, dot, svg, png or pdf)", format);
        return TG_EXIT_USAGE;
    }
    bool page = !strcmp(format, "html");
    if (!page && want_opt && want_orig) {
        cli_error(TOOL, "--format %s draws one graph: give --optimized or --original, not both", format);
        return TG_EXIT_USAGE;
    }
    if (!page && prof_path) {
        cli_error(TOOL, "--profile shades the HTML page; --format %s has no shading", format);
        return TG_EXIT_USAGE;
    }
    if (preset && strcmp(preset, "none") && strcmp(preset, "fast_compile") && strcmp(preset, "fast_run")) {
        cli_error(TOOL, "-O: unknown preset '%s' (none, fast_compile or fast_run)", preset);
        return TG_EXIT_USAGE;
    }
    /* Both flags: side by side; neither: the page holds both with a
     * toggle, a picture the optimized graph. */
    bool side = page && want_opt && want_orig, orig_asked = want_orig;
    if (!want_opt && !want_orig) {
        want_opt = true;
        want_orig = page;
    }

    int rc = TG_EXIT_OK;
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = NULL;
    tg_function *f = NULL;
    bool f_owned = false; /* compiled here, not borrowed from the .tgf */
    struct tg_tgf *tgf = NULL;
    int gfi = -1; /* the function's index in g */
    GVC_t *gvc = NULL;
    vz_graph vo = {0}, vr = {0};
    json_object *data = NULL, *prof_root = NULL, *prof_nodes = NULL;
    FILE *out = NULL;
    cli_out co_out = {0};
    const char *path = argv[optind];
    bool is_tgf = cli_is_tgf(path);
    const char *fn = NULL;
    int fi, first_of = 0; /* drawing the first of first_of functions: said once drawn */
    cli_heap_for(path, 200); /* a page of both views takes about 160 bytes a byte of JSON */
    if (is_tgf) {
        /* A compiled function: its saved optimized graph as it was
         * restored, and the original graph the file keeps. */
        if (preset || inc.n || exc.n) {
            cli_error(TOOL, "%s is already optimized: -O, --include and --exclude apply when compiling it "
                            "(tgc compile)", path);
            rc = TG_EXIT_USAGE;
            goto done;
        }
        if (!(tgf = tg_tgf_load(path, NULL, ctx))) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        if (tg_tgf_warning(tgf)) cli_error(TOOL, "warning: %s", tg_tgf_warning(tgf));
        fi = choose(fname, tg_tgf_function_count(tgf), tg_tgf_function_find(tgf, fname, ctx), &first_of, ctx);
        if (fi < 0) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        f = tg_tgf_function(tgf, fi);
        fn = tg_function_name(f);
        if (want_orig && !(g = tg_tgf_original(tgf, ctx))) {
            if (tg_ctx_status(ctx) != TG_ENOTFOUND || orig_asked) {
                cli_error(TOOL, "%s", tg_ctx_message(ctx));
                rc = TG_EXIT_USAGE;
                goto done;
            }
            /* Neither flag: the page holds what the file has. */
            cli_error(TOOL, "%s keeps no original graph: drawing the optimized one only", path);
            tg_ctx_clear(ctx);
            want_orig = false;
        }
        if (g && (gfi = tg_graph_function_find(g, fn, ctx)) < 0) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
    } else {
        if (!(g = cli_graph_load(TOOL, path, ctx))) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        fi = choose(fname, tg_graph_function_count(g), tg_graph_function_find(g, fname, ctx), &first_of, ctx);
        if (fi < 0) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            goto done;
        }
        gfi = fi;
        fn = tg_graph_function_name(g, fi);
        if (want_opt) {
            tg_compile_options co = {.preset = preset, .include = cli_tags(&inc), .exclude = cli_tags(&exc)};
            if (!(f = tg_function_compile(g, fi, &co, ctx))) {
                cli_error(TOOL, "%s", tg_ctx_message(ctx));
                rc = TG_EXIT_USAGE;
                goto done;
            }
            f_owned = true;
        }
    }
    size_t prof_fi = 0;
    if (prof_path && profile_read(prof_path, fn, &prof_nodes, &prof_fi, &prof_root, ctx)) {
        rc = TG_EXIT_USAGE;
        goto done;
    }
    if (prof_nodes) {
        /* A .tgf drawn without its original graph: that graph checks the
         * profile all the same, when the file keeps it (else the saved
         * function alone does). */
        tg_graph *check_g = g;
        int check_gfi = gfi;
        if (!check_g && tgf && (check_g = tg_tgf_original(tgf, ctx)) &&
            (check_gfi = tg_graph_function_find(check_g, fn, ctx)) < 0) {
            tg_graph_free(check_g);
            check_g = NULL;
        }
        tg_ctx_clear(ctx);
        int bad = profile_check(prof_path, path, fn, prof_nodes, prof_fi, f, check_g, check_gfi, ctx);
        if (check_g != g) tg_graph_free(check_g);
        if (bad) {
            rc = TG_EXIT_USAGE;
            goto done;
        }
    }
    gvc = gvContext();
    data = json_object_new_object();
    json_object_object_add(data, "tool", json_object_new_string("tgviz"));
    json_object_object_add(data, "version", json_object_new_string(tg_version()));
    json_object_object_add(data, "file", json_object_new_string(path));
    json_object_object_add(data, "function", json_object_new_string(fn));
    json_object *views = json_object_new_object();
    json_object_object_add(data, "views", views);
    int matched = 0, m = 0;
    if (want_orig) {
        vz_init(&vr, "original", page);
        vr.layout = layout;
        vz_from_graph(&vr, g, gfi, ctx);
        json_object *vj = json_object_new_object();
        if (vz_layout(&vr, gvc, vj, ctx)) {
            json_object_put(vj);
            rc = TG_EXIT_FOUND;
            goto done;
        }
        json_object_object_add(vj, "nodes", json_object_get(vr.nodes));
        json_object_object_add(vj, "edges", json_object_get(vr.edges));
        json_object_object_add(views, "original", vj);
        if (prof_nodes && (m = profile_apply(vr.nodes, prof_nodes)) < 0) {
            cli_error(TOOL, "out of memory");
            rc = TG_EXIT_FOUND;
            goto done;
        }
        matched += m;
    }
    if (want_opt) {
        vz_init(&vo, "optimized", page);
        vo.layout = layout;
        vo.orig = g; /* (the traces of what fused nodes stand for) */
        vz_from_function(&vo, f, ctx);
        json_object *vj = json_object_new_object();
        if (vz_layout(&vo, gvc, vj, ctx)) {
            json_object_put(vj);
            rc = TG_EXIT_FOUND;
            goto done;
        }
        json_object_object_add(vj, "nodes", json_object_get(vo.nodes));
        json_object_object_add(vj, "edges", json_object_get(vo.edges));
        json_object_object_add(vj, "compile_seconds", json_object_new_double(tg_function_compile_seconds(f)));
        json_object_object_add(vj, "rewrites", json_object_new_int(tg_function_rewrite_count(f)));
        json_object_object_add(views, "optimized", vj);
        if (prof_nodes && (m = profile_apply(vo.nodes, prof_nodes)) < 0) {
            cli_error(TOOL, "out of memory");
            rc = TG_EXIT_FOUND;
            goto done;
        }
        matched += m;
    }
    if (prof_nodes) {
        if (matched == 0 && json_object_array_length(prof_nodes) > 0) {
            cli_error(TOOL, "--profile %s: no node key of the profile names a node of function '%s'", prof_path,
                      fn);
            rc = TG_EXIT_USAGE;
            goto done;
        }
        json_object *pj = json_object_new_object();
        json_object_object_add(pj, "file", json_object_new_string(prof_path));
        json_object_object_add(pj, "matched", json_object_new_int(matched));
        json_object_object_add(data, "profile", pj);
    }
    json_object_object_add(data, "start", json_object_new_string(want_opt ? "optimized" : "original"));
    json_object_object_add(data, "side_by_side", json_object_new_boolean(side));

    bool to_stdout = !strcmp(outp, "-");
    if (to_stdout && (!strcmp(format, "png") || !strcmp(format, "pdf")) && isatty(1)) {
        cli_error(TOOL, "-o -: will not write %s to a terminal", format);
        rc = TG_EXIT_USAGE;
        goto done;
    }
    if (!(out = cli_out_open(&co_out, TOOL, "-o", outp))) {
        rc = TG_EXIT_USAGE;
        goto done;
    }
    if (page) {
        const char *s = json_object_to_json_string_ext(data, JSON_C_TO_STRING_PLAIN);
        /* vz_page_write escapes '<' inside the page's script block. */
        if (!s) {
            cli_error(TOOL, "out of memory");
            rc = TG_EXIT_FOUND;
        } else if (vz_page_write(out, s)) {
            cli_error(TOOL, "-o %s: write failed: %s", outp, strerror(errno));
            rc = TG_EXIT_FOUND;
        }
    } else {
        vz_graph *vg = want_opt ? &vo : &vr;
        /* Rendered in memory, then written: Graphviz's own writer ends
         * the process when a write fails (a full disk), before the
         * temporary file could be removed. */
        char *pic = NULL;
        unsigned int len = 0;
        if (gvRenderData(gvc, vg->ag, format, &pic, &len) != 0 || !pic) {
            cli_error(TOOL, "Graphviz could not render %s (is its %s plugin installed?)", format, format);
            rc = TG_EXIT_FOUND;
        } else if (fwrite(pic, 1, len, out) != len) {
            cli_error(TOOL, "-o %s: write failed: %s", outp, strerror(errno));
            rc = TG_EXIT_FOUND;
        }
        if (pic) gvFreeRenderData(pic);
        gvFreeLayout(gvc, vg->ag);
    }
done:
    /* The whole page or picture, or nothing: a failure leaves what was
     * at OUT before. */
    if (cli_out_close(&co_out, rc == TG_EXIT_OK) && rc == TG_EXIT_OK) rc = TG_EXIT_FOUND;
    /* The note once the drawing is there: a failure is its one line. */
    if (rc == TG_EXIT_OK && first_of)
        cli_error(TOOL, "drew function '%s', the first of %d (pick another with -f)", fn, first_of);
    json_object_put(data);
    json_object_put(prof_root);
    if (vr.ag) vz_free(&vr);
    if (vo.ag) vz_free(&vo);
    if (gvc) gvFreeContext(gvc);
    if (f_owned) tg_function_free(f);
    tg_graph_free(g);
    tg_tgf_free(tgf);
    tg_ctx_free(ctx);
    return rc;
}
