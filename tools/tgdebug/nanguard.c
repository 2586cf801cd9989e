/* tgdebug nanguard: run a function with the NaN guard (tg/debug.h) and
 * report the node that made the first NaN, infinity or huge value. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/control.h"
#include "ops/scan.h"
#include "tgdebug.h"
#include "vm/vm.h"

static const char *SUB = "nanguard";

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgdebug nanguard FILE [-f NAME] [-i ID=VALUE]... [--calls N]\n"
            "                        [--dump OUT.npz] [--no-nan] [--no-inf] [--big THRESHOLD]\n"
            "                        [-O PRESET] [--include TAG]... [--exclude TAG]...\n"
            "                        [--device cpu|cuda]\n"
            "\n"
            "Call a function of FILE (interchange JSON, or a compiled-function .tgf)\n"
            "checking the inputs and shared values at each call, and every node's\n"
            "float outputs as they are made, for NaN, infinities and values whose\n"
            "magnitude exceeds THRESHOLD. At the first offence, print the node that\n"
            "made it (not one that passed it on), its op, its inputs with shapes and\n"
            "statistics, the call, and its creation trace; inside a fused composite,\n"
            "the original op and node of the file; inside the body of a scan or an\n"
            "op_from_graph, nested ones too, the way down to the body node that made\n"
            "it, with the step of each loop. Integer values are not checked.\n"
            "  -f NAME          the function (default: the only one, or 'main')\n"
            "  -i ID=VALUE      an input: a .npy file, an array of a .npz archive\n"
            "                   (FILE.npz or FILE.npz:NAME), or a JSON literal (3.5,\n"
            "                   [1, 2], \"nan\") read with the input's declared dtype\n"
            "  -i FILE.npz      every input named by an array of the archive\n"
            "  --calls N        call it N times (default 1), updates applied each time\n"
            "  --dump OUT.npz   at an offence in a node, write the node's inputs as they\n"
            "                   were when it ran (in0, in1, ...) to OUT.npz, to load with\n"
            "                   np.load and run the op again in NumPy\n"
            "  --no-nan         do not look for NaN\n"
            "  --no-inf         do not look for infinities\n"
            "  --big T          flag finite values with |x| > T (default 1e10; inf: off)\n"
            "  -O PRESET        none, fast_compile or fast_run (default); not for a .tgf\n"
            "  --include TAG, --exclude TAG\n"
            "                   turn rewrites on or off beyond the preset (a pass, a group\n"
            "                   such as fusion or inplace, or a rewrite's name;\n"
            "                   repeatable); not for a .tgf\n"
            "  --device DEV     cpu (default: $TG_DEVICE, else cpu) or cuda: the nodes\n"
            "                   with a GPU kernel run on the GPU and their outputs are\n"
            "                   checked there (only the statistics come back); not for\n"
            "                   a .tgf\n"
            "  --version        print the version\n"
            "\n"
            "Exit status: 0 clean, 1 an offence found (or a run-time failure), 2 bad\n"
            "usage or bad input.\n");
}

static const char *what_word(unsigned w) {
    return w & TG_BAD_NAN ? "NaN" : w & TG_BAD_INF ? "Inf" : "big";
}

static int64_t what_count(unsigned w, const tg_stats *st) {
    return w & TG_BAD_NAN ? st->nan : w & TG_BAD_INF ? st->inf : st->big;
}

/* The threshold as the user can give it back: the shortest %g that reads
 * back as the same double (16777219, not 1.67772e+07). */
static const char *num_str(double v, char *buf, size_t size) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, size, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

/* "(|x| > T)", or "(off)" when --big inf turned the check off. */
static const char *big_str(double big, char *buf, size_t size) {
    char t[32];
    if (!isfinite(big))
        snprintf(buf, size, "(off)");
    else
        snprintf(buf, size, "(|x| > %s)", num_str(big, t, sizeof t));
    return buf;
}

/* What a constant the optimizer made stands for: the file's node whose
 * output constant folding replaced by it (the node that made the bad
 * value, with its trace), or the file's variable. */
static void print_folded(const tg_graph *g, const tg_function *f, const char *id) {
    const tg_var *v = g ? tg_graph_find(g, id) : NULL;
    const tg_node *o = v ? v->owner : NULL;
    if (o && o->nout) {
        const char *key = o->outputs[0]->id;
        if (strcmp(key, id))
            printf("folded from: node %s (%s), output %s\n", key, o->op->name, id);
        else
            printf("folded from: node %s (%s)\n", key, o->op->name);
        tgd_print_gradient(stdout, f, key, "  ", NULL);
        printf("trace of %s:\n", key);
        tgd_print_trace(stdout, o, "  ");
    } else if (v && v->kind == TG_VAR_CONSTANT) {
        printf("folded from: constant %s of the file\n", id);
    } else {
        printf("folded from: %s\n", id);
        tgd_print_gradient(stdout, f, id, "  ", NULL);
    }
}

/* The original nodes of the file a scheduled node stands for, each with
 * its op and trace. */
static void print_origins(const tg_graph *g, const tg_function *f, const char *const *keys, int n,
                          const char *title) {
    for (int i = 0; i < n; i++) {
        const tg_node *o = g ? tgd_graph_node(g, keys[i]) : NULL;
        if (o)
            printf("%s: %s (%s)\n", title, keys[i], o->op->name);
        else /* a .tgf keeps the optimized graph only */
            printf("%s: %s\n", title, keys[i]);
        tgd_print_gradient(stdout, f, keys[i], "  ", NULL);
        if (o) {
            printf("trace of %s:\n", keys[i]);
            tgd_print_trace(stdout, o, "  ");
        }
    }
}

/* The graph as written of the body of a scan or op_from_graph node. */
static const tg_graph *body_graph(const tg_node *n) {
    if (!strcmp(n->op->name, "scan")) return ((const scan_p *)n->a.extra)->body;
    if (!strcmp(n->op->name, "op_from_graph")) return ((const tg_ofg *)n->a.extra)->g;
    return NULL;
}

static const tg_node *level_node(const tg_offence_level *l) { return l->fn->sched[l->node].node; }

/* A level's node by the name it has as written: a body runs optimized,
 * and a loop the optimizer rebuilt is 'R:scan' there, standing for 'R'
 * (the rewrite's node keeps the id it replaced before the ':', and R is
 * among its origins, with any node it took in, such as the subtensor
 * that kept only the loop's last step). As the library's one line. */
static const char *level_name(const tg_offence_level *l) { return tg_offence_level_name(l); }

/* "NaN in 2 of 4" */
static void print_made(unsigned w, const tg_stats *st) {
    printf("%s in %lld of %lld", what_word(w), (long long)what_count(w, st), (long long)st->size);
}

/* Inside the body of a scan or op_from_graph, any depth: the way down
 * (outermost first, as debugprint nests a scan's inner graph), the node
 * that made the value (its body as written, its trace), then the trace of
 * each node it is in, innermost first. */
static void print_path(const tg_function *f, const tg_offence *off) {
    int d = off->depth;
    printf("path (outermost first; each a node of the body of the one above):\n");
    for (int i = 0; i < d; i++) {
        const tg_offence_level *l = &off->path[i];
        printf("%*s%s (%s)", 2 + 2 * i, "", level_name(l), l->op);
        if (i == 0)
            printf(" of '%s'", tg_function_name(f));
        else
            printf(", schedule %d of %d", l->node + 1, tg_function_node_count(l->fn));
        printf(", output '%s' (", l->var_as_written);
        print_made(l->what, &l->stats);
        printf(")");
        if (l->step >= 0 && i + 1 < d)
            printf(", at step %lld of its loop", (long long)l->step + 1);
        else if (l->step >= 0)
            printf(", first at step %lld of its loop", (long long)l->step + 1);
        if (l->fused_op) {
            printf(": its fused %s", l->fused_op);
            if (l->norigins) printf(", as written %s", l->origins[0]);
        }
        printf("\n");
    }
    /* the node that made it */
    const tg_offence_level *last = &off->path[d - 1];
    const tg_node *bn = level_node(last);
    const tg_graph *bg = body_graph(level_node(&off->path[d - 2]));
    const tg_stats *b = &off->body_stats;
    printf("body node: %s (%s), schedule %d of %d of the body\n", last->key, last->op, last->node + 1,
           tg_function_node_count(last->fn));
    if (last->fused_op) printf("fused op: %s (body variable %s of the composite)\n", last->fused_op, last->fused_var);
    printf("body node made: %s in %lld of %lld elements of %s (nan=%lld inf=%lld big=%lld)\n",
           what_word(off->body_what), (long long)what_count(off->body_what, b), (long long)b->size, off->body_var,
           (long long)b->nan, (long long)b->inf, (long long)b->big);
    int shown = 0;
    for (int i = 0; i < last->norigins; i++) {
        const tg_node *o = bg ? tgd_graph_node(bg, last->origins[i]) : NULL;
        printf("body node as written: %s (%s)\n", last->origins[i], o ? o->op->name : bn->op->name);
        if (o && o->trace.n) {
            printf("trace of %s:\n", last->origins[i]);
            tgd_print_trace(stdout, o, "  ");
            shown++;
        }
    }
    if (!shown) {
        printf("trace of the body node:\n");
        tgd_print_trace(stdout, bn, "  ");
    }
    /* the nodes it is in, innermost first */
    for (int i = d - 2; i >= 0; i--) {
        const tg_offence_level *l = &off->path[i];
        if (i > 0)
            printf("trace of %s %s (in the body of %s):\n", l->op, level_name(l), level_name(&off->path[i - 1]));
        else
            printf("trace of %s %s:\n", l->op, level_name(l));
        tgd_print_trace(stdout, level_node(l), "  ");
    }
}

static void report(const tg_graph *g, tg_function *f, const tg_nanguard *ng, const tg_offence *off,
                   double big) {
    printf("nanguard: %s in call %llu of '%s'\n", what_word(off->what), (unsigned long long)off->call,
           tg_function_name(f));
    if (off->where == TG_OFFENCE_INPUT || off->where == TG_OFFENCE_SHARED) {
        printf("%s: %s (fed in: no node made it)\n", off->where == TG_OFFENCE_INPUT ? "input" : "shared", off->var);
        printf("value: nan=%lld inf=%lld big=%lld of %lld; finite min=%.6g max=%.6g mean=%.6g\n",
               (long long)off->stats.nan, (long long)off->stats.inf, (long long)off->stats.big,
               (long long)off->stats.size, off->stats.min, off->stats.max, off->stats.mean);
        return;
    }
    int k = off->node;
    const tg_node *n = k >= 0 ? f->sched[k].node : NULL;
    if (off->where == TG_OFFENCE_CONSTANT) {
        if (n)
            printf("constant: %s (read by node %s, %s)\n", off->var, tg_function_node_key(f, k), n->op->name);
        else if (off->update_of)
            printf("constant: %s (the new value of shared %s)\n", off->var, off->update_of);
        else
            printf("constant: %s (output %s of the function)\n", off->var, tg_function_output_id(f, off->output));
        printf("value: nan=%lld inf=%lld big=%lld of %lld; finite min=%.6g max=%.6g mean=%.6g\n",
               (long long)off->stats.nan, (long long)off->stats.inf, (long long)off->stats.big,
               (long long)off->stats.size, off->stats.min, off->stats.max, off->stats.mean);
        if (off->folded_from) {
            print_folded(g, f, off->folded_from);
        } else if (n) {
            /* a constant of the file: no node made it; where it is read */
            printf("trace of the reader %s:\n", tg_function_node_key(f, k));
            tgd_print_trace(stdout, n, "  ");
        } else {
            printf("(a constant of the file: no node made it)\n");
        }
        return;
    }
    printf("node: %s\n", tg_function_node_key(f, k));
    printf("op: %s\n", n->op->name);
    const char *const *keys;
    int no = tg_function_node_origins(f, k, &keys);
    bool self = no == 1 && !strcmp(keys[0], tg_function_node_key(f, k));
    /* (a node a rewrite made is described through its origins below) */
    if (self) tgd_print_gradient(stdout, f, keys[0], "", NULL);
    printf("schedule: %d of %d\n", k + 1, tg_function_node_count(f));
    char bs[64];
    printf("output %d '%s': nan=%lld inf=%lld big=%lld %s of %lld; finite min=%.6g max=%.6g mean=%.6g\n",
           off->output, off->var, (long long)off->stats.nan, (long long)off->stats.inf,
           (long long)off->stats.big, big_str(big, bs, sizeof bs), (long long)off->stats.size, off->stats.min,
           off->stats.max, off->stats.mean);
    if (off->step >= 0 && off->body_fn)
        printf("step: %lld (the step of the loop at which its body made it)\n", (long long)off->step + 1);
    else if (off->step >= 0)
        printf("step: %lld (the first step of the loop whose results are bad)\n", (long long)off->step + 1);
    for (int i = 0; i < n->nin; i++) {
        printf("input %d '%s': ", i, n->inputs[i]->id);
        tgd_print_stats(stdout, tg_nanguard_node_input(ng, i));
    }
    if (off->body_fn && off->depth > 1) {
        print_path(f, off);
        return;
    }
    if (off->body_op) {
        printf("fused op: %s (body variable %s of the composite)\n", off->body_op, off->body_var);
        if (off->body_what) {
            /* what the fused op itself made (an infinity, that a later
             * body op turned into the output's NaN) */
            const tg_stats *b = &off->body_stats;
            printf("fused op made: %s in %lld of %lld elements (nan=%lld inf=%lld big=%lld)\n",
                   what_word(off->body_what), (long long)what_count(off->body_what, b), (long long)b->size,
                   (long long)b->nan, (long long)b->inf, (long long)b->big);
        }
        print_origins(g, f, off->origins, off->norigins, "original node");
        if (!g) {
            /* A .tgf keeps the optimized graph only: the fused nodes'
             * traces are gone, the composite's own (its last fused node's)
             * is the nearest source line there is. */
            printf("trace of the composite %s (the .tgf keeps no trace of each node it fused):\n",
                   tg_function_node_key(f, k));
            tgd_print_trace(stdout, n, "  ");
        }
        return;
    }
    printf("trace:\n");
    tgd_print_trace(stdout, n, "  ");
    if (!self && no > 0) {
        printf("stands for %d node%s of the file:\n", no, no == 1 ? "" : "s");
        print_origins(g, f, keys, no, "original node");
    }
}

/* --big: a number > 0 (inf: off); one message for 0, -1 and 'x'. */
static bool parse_big(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s || errno == ERANGE || isnan(v) || v <= 0) {
        tgd_error(SUB, "--big: expected a threshold > 0 (inf turns the check off), got '%s'", s);
        return false;
    }
    *out = v;
    return true;
}

/* --dump: the offending node's inputs (the guard's copies) to one archive,
 * in0, in1, ...; a line on stdout saying so. 0, or -1 with one line on
 * stderr. */
static int dump_inputs(const tg_function *f, const tg_nanguard *ng, const tg_offence *off, const char *path) {
    if (off->where != TG_OFFENCE_NODE || off->node < 0) {
        tgd_error(SUB, "--dump %s: the bad value is not a node's output: no inputs to write", path);
        return -1;
    }
    int nin = tg_function_node_ninputs(f, off->node), n = 0, rc = -1;
    char(*names)[16] = calloc((size_t)nin + 1, sizeof *names);
    const char **np = calloc((size_t)nin + 1, sizeof *np);
    const tg_array **arrs = calloc((size_t)nin + 1, sizeof *arrs);
    if (!names || !np || !arrs) {
        tgd_error(SUB, "--dump %s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < nin; i++) {
        const tg_array *a = tg_nanguard_node_input(ng, i);
        if (!a) continue;
        snprintf(names[n], sizeof names[n], "in%d", i);
        np[n] = names[n];
        arrs[n++] = a;
    }
    if (!n) {
        tgd_error(SUB, "--dump %s: the guard kept no input of node %s", path, tg_function_node_key(f, off->node));
        goto done;
    }
    rc = cli_npz_save(TGDEBUG ": nanguard", "--dump", path, CLI_NPZ_STORED, n, np, arrs);
    if (!rc) {
        printf("dump: the inputs of node %s written to %s:", tg_function_node_key(f, off->node), path);
        for (int i = 0; i < n; i++) printf(" %s", np[i]);
        printf("\n");
    }
done:
    free(names);
    free(np);
    free(arrs);
    return rc ? -1 : 0;
}

int tgd_nanguard(int argc, char **argv) {
    const char *fname = NULL, *preset = NULL, *device = NULL, *dump = NULL;
    const char *calls_s = NULL, *big_s = NULL; /* (each given once) */
    long calls = 1;
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs = 0;
    tg_nanguard_options go = {0};
    cli_taglist inc = {{0}, 0}, exc = {{0}, 0};
    enum { OPT_INCLUDE = 256 }; /* ('I' is --no-inf) */
    static const struct option opts[] = {{"calls", required_argument, 0, 'c'}, {"no-nan", no_argument, 0, 'N'},
                                         {"no-inf", no_argument, 0, 'I'},      {"big", required_argument, 0, 'b'},
                                         {"device", required_argument, 0, 'd'}, {"dump", required_argument, 0, 'D'},
                                         {"help", no_argument, 0, 'h'},        {"version", no_argument, 0, 'V'},
                                         {"include", required_argument, 0, OPT_INCLUDE},
                                         {"exclude", required_argument, 0, 'X'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:i:O:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!cli_once("tgdebug: nanguard", "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once("tgdebug: nanguard", "-O", &preset, optarg)) return TG_EXIT_USAGE;
            break;
        case 'D':
            if (!cli_once("tgdebug: nanguard", "--dump", &dump, optarg) ||
                !cli_path_file_ok("tgdebug: nanguard", "--dump", optarg, "an archive of the node's inputs"))
                return TG_EXIT_USAGE;
            break;
        case OPT_INCLUDE:
            if (!cli_tag_add("tgdebug: nanguard", "--include", &inc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'X':
            if (!cli_tag_add("tgdebug: nanguard", "--exclude", &exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'V': cli_print_version("tgdebug"); return TG_EXIT_OK;
        case 'N': go.no_nan = true; break;
        case 'I': go.no_inf = true; break;
        case 'd':
            if (!cli_once("tgdebug: nanguard", "--device", &device, optarg) ||
                !cli_device_ok(TGDEBUG ": nanguard", optarg))
                return TG_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return TG_EXIT_OK;
        case 'c':
            if (!cli_once("tgdebug: nanguard", "--calls", &calls_s, optarg)) return TG_EXIT_USAGE;
            if (!tgd_parse_long(SUB, "--calls", optarg, 1, &calls)) return TG_EXIT_USAGE;
            break;
        case 'b':
            if (!cli_once("tgdebug: nanguard", "--big", &big_s, optarg)) return TG_EXIT_USAGE;
            if (!parse_big(optarg, &go.big)) return TG_EXIT_USAGE;
            break;
        case 'i':
            if (!cli_input_add(TGDEBUG, inputs, &ninputs, CLI_MAX_INPUTS, optarg)) return TG_EXIT_USAGE;
            break;
        default: return cli_getopt_error(TGDEBUG, SUB, c, argv);
        }
    }
    if (optind != argc - 1) {
        if (optind >= argc)
            tgd_error(SUB, "missing FILE (see tgdebug nanguard --help)");
        else
            tgd_error(SUB, "unexpected argument '%s'", argv[optind + 1]);
        return TG_EXIT_USAGE;
    }
    if (preset && strcmp(preset, "none") && strcmp(preset, "fast_compile") && strcmp(preset, "fast_run")) {
        tgd_error(SUB, "-O: unknown preset '%s' (none, fast_compile or fast_run)", preset);
        return TG_EXIT_USAGE;
    }
    if (go.no_nan && go.no_inf && isinf(go.big)) {
        tgd_error(SUB, "--no-nan, --no-inf and --big inf leave nothing to check");
        return TG_EXIT_USAGE;
    }
    const char *path = argv[optind];
    if (cli_is_tgf(path) && (preset || device || inc.n || exc.n)) {
        tgd_error(SUB, "%s is already optimized: -O, --include, --exclude and --device apply when compiling it", path);
        return TG_EXIT_USAGE;
    }
    int rc = TG_EXIT_OK;
    tg_ctx *ctx = tg_ctx_new();
    tg_nanguard *ng = NULL;
    tg_compile_options co = {.preset = preset, .device = device, .include = cli_tags(&inc), .exclude = cli_tags(&exc)};
    cli_session S = {0};
    /* (--dump is written only at an offence, but a path that cannot take
     * it is said before the run, as every tool's outputs are) */
    const cli_file dump_file = {"--dump", dump, "the dump"}, in_file = {"FILE", path, "the graph file guarded"};
    if (dump && !cli_outputs_ok("tgdebug: nanguard", &dump_file, 1, &in_file, 1, inputs, ninputs)) {
        rc = TG_EXIT_USAGE;
        goto done;
    }
    if (dump && (rc = cli_out_check_mkdirs("tgdebug: nanguard", "--dump", dump))) goto done;
    if ((rc = cli_session_open(&S, TGDEBUG, SUB, path, fname, &co, inputs, ninputs))) goto done;
    tg_graph *g = S.g;
    tg_function *f = S.f;
    tg_array **ins = S.ins, **outs = S.outs;
    int nout = S.nout;
    if (!(ng = tg_nanguard_new(f, &go, ctx))) {
        tgd_error(SUB, "%s", tg_ctx_message(ctx));
        rc = TG_EXIT_USAGE;
        goto done;
    }
    cli_progress prog;
    cli_progress_start(&prog, calls, "nanguard");
    for (long i = 0; i < calls; i++) {
        for (int k = 0; k < nout; k++) {
            tg_array_free(outs[k]);
            outs[k] = NULL;
        }
        int st = tg_nanguard_call(ng, ins, outs, ctx);
        cli_progress_step(&prog, i + 1);
        if (st == TG_ESTOPPED && tg_nanguard_offence(ng)) {
            cli_progress_end(&prog);
            report(g, f, ng, tg_nanguard_offence(ng), go.big ? go.big : 1e10);
            if (dump) {
                fflush(stdout);
                dump_inputs(f, ng, tg_nanguard_offence(ng), dump);
            }
            tgd_error(SUB, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_FOUND;
            goto done;
        }
        if (st) {
            cli_progress_end(&prog);
            tgd_error(SUB, "call %ld: %s", i + 1, tg_ctx_message(ctx));
            rc = st == TG_ETYPE || st == TG_EMISSING ? TG_EXIT_USAGE : TG_EXIT_FOUND;
            goto done;
        }
    }
    cli_progress_end(&prog);
    {
        double big = go.big ? go.big : 1e10;
        char what[128] = "";
        size_t k = 0;
        if (!go.no_nan) k += (size_t)snprintf(what + k, sizeof what - k, "no NaN");
        if (!go.no_inf) k += (size_t)snprintf(what + k, sizeof what - k, "%sno Inf", k ? ", " : "");
        char t[32];
        if (isfinite(big))
            snprintf(what + k, sizeof what - k, "%sno |value| > %s", k ? ", " : "", num_str(big, t, sizeof t));
        printf("nanguard: %ld call%s of '%s', %d nodes checked: clean (%s)\n", calls, calls == 1 ? "" : "s",
               tg_function_name(f), tg_function_node_count(f), what);
    }
done:
    tg_nanguard_free(ng);
    cli_session_close(&S);
    tg_ctx_free(ctx);
    return rc;
}
