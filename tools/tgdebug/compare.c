/* tgdebug compare: the optimized function against the unoptimized one,
 * node by node (Theano's DebugMode and its BadOptimization).
 *
 * Both are compiled from their own copy of the file (so each has its own
 * shared state, equal at the start, random states included) and called
 * once on the same inputs. The unoptimized run keeps every node's result
 * by variable id. The optimized run compares each node's results, as they
 * are made (before an in-place node can overwrite them), with the values
 * of the file's variables they stand for: the same id, or, for a variable
 * a rewrite made, the one it replaced (the optimizer's record of
 * replacements). The first node that differs beyond tolerance is traced
 * through the rewrite record to the rewrites that made it or anything
 * upstream of it; each is turned off in turn (a fresh compile with
 * --exclude), latest first, and the first whose absence makes the
 * function agree is named.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"
#include "tgdebug.h"
#include "vm/vm.h"

static const char *SUB = "compare";

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgdebug compare FILE [-f NAME] [-i ID=VALUE]... [--rtol R] [--atol A]\n"
            "                       [--include TAG]... [--exclude TAG]...\n"
            "\n"
            "Compile a function of FILE twice (preset fast_run and none), call both once\n"
            "on the same inputs and the same shared state, and report every output and\n"
            "update (max abs/rel difference, pass/fail). When they differ, name the\n"
            "first optimized node whose value differs from the file's node(s) it stands\n"
            "for, and the rewrite that made it: its name, pass, the nodes it removed and\n"
            "created, their ops and creation traces. A value that is finite where the\n"
            "unoptimized one is inf or NaN is counted as stabilized, not as a mismatch.\n"
            "  -f NAME        the function (default: the only one, or 'main')\n"
            "  -i ID=VALUE    an input: a .npy file, an array of a .npz archive\n"
            "                 (FILE.npz or FILE.npz:NAME), or a JSON literal\n"
            "  -i FILE.npz    every input named by an array of the archive\n"
            "  --rtol R       relative tolerance (default 1e-5 for float64, 1e-3 below)\n"
            "  --atol A       absolute tolerance (default 1e-8 for float64, 1e-5 below)\n"
            "  --include TAG, --exclude TAG\n"
            "                 turn rewrites on or off beyond fast_run for the optimized\n"
            "                 function (a pass, a group such as fusion or inplace, or a\n"
            "                 rewrite's name; repeatable)\n"
            "  --version      print the version\n"
            "\n"
            "Exit status: 0 they agree, 1 a mismatch (or a run-time failure), 2 bad usage\n"
            "or bad input.\n");
}

typedef struct tol {
    double rtol, atol; /* < 0: by dtype */
} tol;

typedef struct diff {
    double maxabs, maxrel;
    bool ok;
    bool shape_differs;
    int64_t stabilized; /* finite where the reference is inf or NaN */
} diff;

static void compare_arrays(const tg_array *a, const tg_array *b, const tol *t, diff *d) {
    memset(d, 0, sizeof *d);
    d->ok = true;
    if (a->ndim != b->ndim || !tg_shape_equal(a->ndim, a->shape, b->shape)) {
        d->ok = false;
        d->shape_differs = true;
        d->maxabs = d->maxrel = INFINITY;
        return;
    }
    bool lowp = a->dtype == TG_FLOAT32 || a->dtype == TG_FLOAT16 || b->dtype == TG_FLOAT32 || b->dtype == TG_FLOAT16;
    double rtol = t->rtol >= 0 ? t->rtol : lowp ? 1e-3 : 1e-5;
    double atol = t->atol >= 0 ? t->atol : lowp ? 1e-5 : 1e-8;
    int64_t n = tg_array_size(a);
    for (int64_t i = 0; i < n; i++) {
        double x = tg_array_get_flat(a, i), y = tg_array_get_flat(b, i);
        if (isnan(x) && isnan(y)) continue;
        if (x == y) continue;
        /* Finite where the graph as written overflowed or made a NaN: what
         * the stabilizing rewrites are for (Theano's DebugMode compared
         * their results with values_eq_approx_remove_inf_nan). Counted
         * and reported, not a mismatch. Another non-finite value (NaN for
         * inf, -inf for inf) is one. */
        if (!isfinite(y) && isfinite(x)) {
            d->stabilized++;
            continue;
        }
        double e = fabs(x - y);
        if (isnan(e)) e = INFINITY; /* NaN against a number, or inf - inf */
        double r = y != 0 && isfinite(y) ? e / fabs(y) : INFINITY;
        if (e > d->maxabs) d->maxabs = e;
        if (r > d->maxrel) d->maxrel = r;
        if (!isfinite(y) || !(e <= atol + rtol * fabs(y))) d->ok = false;
    }
}

static void print_verdict(const char *what, const char *id, const diff *d) {
    printf("%s %-20s max abs diff %-11.4g max rel diff %-11.4g %s", what, id, d->maxabs, d->maxrel,
           d->ok ? "pass" : d->shape_differs ? "FAIL (shapes differ)" : "FAIL");
    if (d->stabilized)
        printf(" (%lld stabilized: finite where the unoptimized value is inf or NaN)", (long long)d->stabilized);
    printf("\n");
}

/* ---- the unoptimized run: every node's results by variable id ---- */

typedef struct refs {
    struct tg_idmap *map;
    tg_array **held;
    int n, cap;
} refs;

static int keep(refs *r, const char *id, tg_array *a) {
    if (!a) return TG_OK;
    if (r->n == r->cap) {
        int c = r->cap ? r->cap * 2 : 256;
        tg_array **p = realloc(r->held, sizeof *p * (size_t)c);
        if (!p) return TG_ENOMEM;
        r->held = p;
        r->cap = c;
    }
    r->held[r->n++] = tg_array_ref(a);
    return tg_idmap_put(r->map, id, a) ? TG_ENOMEM : TG_OK;
}

static int keep_hook(void *ud, const tg_function *f, int k, tg_array *const *in, tg_array *const *out,
                     tg_ctx *ctx) {
    (void)in;
    const tg_node *n = f->sched[k].node;
    for (int j = 0; j < n->nout; j++)
        if (keep(ud, n->outputs[j]->id, out[j])) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return TG_OK;
}

static void refs_free(refs *r) {
    for (int i = 0; i < r->n; i++) tg_array_free(r->held[i]);
    free(r->held);
    if (r->map) tg_idmap_free(r->map);
    memset(r, 0, sizeof *r);
}

/* ---- the optimized run: compare as we go ---- */

typedef struct checker {
    const refs *ref;
    const tol *t;
    int compared; /* node outputs with a counterpart */
    bool found;
    int node, output;
    const char *id, *ref_id;
    diff d;
    int64_t stabilized; /* values, over every node output */
    int stab_outputs, stab_node;
} checker;

/* The value of the file's variable that optimized variable v stands for. */
static const tg_array *counterpart(const tg_function *f, const refs *ref, const tg_var *v, const char **ref_id) {
    const tg_array *a = tg_idmap_get(ref->map, v->id);
    if (a) {
        *ref_id = v->id;
        return a;
    }
    const char *id = tg_opt_record_standin(&f->record, v->id);
    *ref_id = id;
    return tg_idmap_get(ref->map, id);
}

static int check_hook(void *ud, const tg_function *f, int k, tg_array *const *in, tg_array *const *out,
                      tg_ctx *ctx) {
    (void)in;
    (void)ctx;
    checker *c = ud;
    const tg_node *n = f->sched[k].node;
    for (int j = 0; j < n->nout; j++) {
        const char *rid;
        const tg_array *b = counterpart(f, c->ref, n->outputs[j], &rid);
        if (!b || !out[j]) continue;
        c->compared++;
        if (c->found) continue;
        diff d;
        compare_arrays(out[j], b, c->t, &d);
        if (d.stabilized) {
            if (!c->stabilized) c->stab_node = k;
            c->stabilized += d.stabilized;
            c->stab_outputs++;
        }
        if (!d.ok) {
            c->found = true;
            c->node = k;
            c->output = j;
            c->id = n->outputs[j]->id;
            c->ref_id = rid;
            c->d = d;
        }
    }
    return TG_OK;
}

/* ---- loading, compiling, calling ---- */

typedef struct side {
    tg_graph *g;
    tg_function *f;
    tg_array **ins, **outs;
    int nin, nout;
} side;

static void side_free(side *s) {
    for (int i = 0; s->ins && i < s->nin; i++) tg_array_free(s->ins[i]);
    for (int i = 0; s->outs && i < s->nout; i++) tg_array_free(s->outs[i]);
    free(s->ins);
    free(s->outs);
    tg_function_free(s->f);
    tg_graph_free(s->g);
    memset(s, 0, sizeof *s);
}

/* The rewrites --include and --exclude turn on and off: the optimized
 * side's (the reference is the graph as written). */
typedef struct tags {
    const cli_taglist *inc, *exc;
} tags;

/* Load, compile, read the inputs. Exit status (2 with one line on stderr
 * when quiet is false; quiet is for the recompiles, whose inputs were
 * read once already and cannot fail again). tg (may be NULL) and
 * `exclude` (a rewrite turned off to find the culprit, or NULL) add to
 * the preset. */
static int side_open(side *s, const char *path, const char *fname, const char *preset, const tags *tg,
                     const char *exclude, const cli_input *inputs, int ninputs, bool quiet, int *status,
                     tg_ctx *ctx) {
    cli_taglist exc = {{0}, 0};
    if (tg) exc = *tg->exc;
    if (exclude && !cli_tag_add(TGDEBUG ": compare", "--exclude", &exc, exclude)) return TG_EXIT_USAGE;
    tg_compile_options co = {.preset = preset, .include = tg ? cli_tags(tg->inc) : NULL, .exclude = cli_tags(&exc)};
    int fi;
    *status = TG_OK;
    cli_heap_for(path, 80);
    /* the load's warnings once, with the reference side */
    if (!(s->g = !quiet && !strcmp(preset, "none") ? cli_graph_load("tgdebug: compare", path, ctx)
                                                    : tg_graph_load(path, ctx)) || (fi = tg_graph_function_find(s->g, fname, ctx)) < 0 ||
        !(s->f = tg_function_compile(s->g, fi, &co, ctx))) {
        *status = tg_ctx_status(ctx);
        if (!quiet) tgd_error(SUB, "%s", tg_ctx_message(ctx));
        return TG_EXIT_USAGE;
    }
    s->nin = tg_function_input_count(s->f);
    s->nout = tg_function_output_count(s->f);
    s->ins = calloc((size_t)s->nin + 1, sizeof *s->ins);
    s->outs = calloc((size_t)s->nout + 1, sizeof *s->outs);
    if (!s->ins || !s->outs) {
        tgd_error(SUB, "out of memory");
        return TG_EXIT_FOUND;
    }
    return cli_inputs_read(TGDEBUG, SUB, s->f, inputs, ninputs, s->ins);
}

/* ---- naming the rewrite ---- */

static int last_creator(const tg_function *f, const char *key, int before) {
    for (int i = before - 1; i >= 0; i--) {
        tg_rewrite_info r;
        tg_function_rewrite_get(f, i, &r);
        for (int j = 0; j < r.ncreated; j++)
            if (!strcmp(r.created[j], key)) return i;
    }
    return -1;
}

/* The record entries that led to node `key`: the one that created it, and,
 * recursively, those that created what that one removed. */
static void lineage(const tg_function *f, const char *key, int before, bool *in, int depth) {
    int e = last_creator(f, key, before);
    if (e < 0 || in[e] || depth > 64) return;
    in[e] = true;
    tg_rewrite_info r;
    tg_function_rewrite_get(f, e, &r);
    for (int j = 0; j < r.nremoved; j++) lineage(f, r.removed[j], e, in, depth + 1);
}

static const char *node_key(const tg_node *n) { return n->nout ? n->outputs[0]->id : n->op->name; }

/* The record entries that may have made node k of A what it is: its
 * lineage, and every entry that removed a node upstream of it in the
 * graph as written (B: one of the file's nodes k stands for, or an
 * ancestor of one), or a node that such an entry created, in record
 * order. A rewrite can break a node it never touched by replacing what
 * the node reads: mul_div_cancel replaces q = x * y / y by x, and r = q
 * + 1, the file's own node, then differs wherever y is 0. Marks in[];
 * TG_ENOMEM only. */
static int suspects(const side *A, const side *B, int k, bool *in) {
    int nrw = tg_function_rewrite_count(A->f);
    lineage(A->f, tg_function_node_key(A->f, k), nrw, in, 0);
    struct tg_idmap *nodes = tg_idmap_new(), *up = tg_idmap_new();
    const char **stack = NULL;
    int sp = 0, cap = 0, rc = TG_ENOMEM;
    if (!nodes || !up) goto done;
    for (int i = 0; i < B->f->nsched; i++) {
        tg_node *n = B->f->sched[i].node;
        if (tg_idmap_put(nodes, node_key(n), n)) goto done;
    }
    const char *const *okeys;
    int no = tg_function_node_origins(A->f, k, &okeys);
    for (int i = -1; i < no; i++) {
        if (sp == cap) {
            cap = cap ? 2 * cap : 64;
            const char **p = realloc(stack, sizeof *p * (size_t)cap);
            if (!p) goto done;
            stack = p;
        }
        stack[sp++] = i < 0 ? tg_function_node_key(A->f, k) : okeys[i];
    }
    /* the ancestors, as written */
    while (sp > 0) {
        const char *key = stack[--sp];
        if (tg_idmap_get(up, key)) continue;
        if (tg_idmap_put(up, key, (void *)1)) goto done;
        const tg_node *n = tg_idmap_get(nodes, key);
        for (int j = 0; n && j < n->nin; j++) {
            const tg_node *o = n->inputs[j]->owner;
            if (!o || tg_idmap_get(up, node_key(o))) continue;
            if (sp == cap) {
                cap = cap ? 2 * cap : 64;
                const char **p = realloc(stack, sizeof *p * (size_t)cap);
                if (!p) goto done;
                stack = p;
            }
            stack[sp++] = node_key(o);
        }
    }
    /* the entries that rewrote them, and what those made */
    for (int e = 0; e < nrw; e++) {
        tg_rewrite_info r;
        tg_function_rewrite_get(A->f, e, &r);
        bool hit = false;
        for (int j = 0; j < r.nremoved && !hit; j++) hit = tg_idmap_get(up, r.removed[j]) != NULL;
        if (!hit) continue;
        in[e] = true;
        for (int j = 0; j < r.ncreated; j++)
            if (tg_idmap_put(up, r.created[j], (void *)1)) goto done;
    }
    rc = TG_OK;
done:
    free(stack);
    if (nodes) tg_idmap_free(nodes);
    if (up) tg_idmap_free(up);
    return rc;
}

static int sched_find(const tg_function *f, const char *key) {
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_key(f, k), key)) return k;
    return -1;
}

/* A key of entry `e`'s removed or created nodes, with its op and trace:
 * from the file when it is one of its nodes, else from the optimized
 * function when the node is still there (and no later rewrite reused the
 * key, as fusion does for the outputs it takes over). */
static void print_key(const side *A, const char *title, const char *key, int e) {
    const tg_node *n = tgd_graph_node(A->g, key);
    int k = n ? -1 : sched_find(A->f, key);
    int later = n ? -1 : last_creator(A->f, key, tg_function_rewrite_count(A->f));
    if (!n && k >= 0 && later == e) n = A->f->sched[k].node;
    if (!n) {
        if (later > e) {
            tg_rewrite_info r;
            tg_function_rewrite_get(A->f, later, &r);
            printf("  %s: %s (replaced later by rewrite %s, pass %s%s%s)\n", title, key, r.name, r.pass,
                   k >= 0 ? ", into " : "", k >= 0 ? tg_function_node_op(A->f, k) : "");
        } else {
            printf("  %s: %s (an intermediate node a later rewrite replaced)\n", title, key);
        }
        return;
    }
    printf("  %s: %s (%s)%s\n", title, key, n->op->name, k >= 0 ? " [in the optimized function]" : "");
    tgd_print_trace(stdout, n, "      ");
}

/* Run a fresh fast_run compile with `exclude` turned off against the
 * reference: 1 it agrees everywhere, 0 it differs, -1 it could not run
 * (an unknown tag). */
static int agrees_without(const char *path, const char *fname, const tags *tg, const char *exclude,
                          const cli_input *inputs,
                          int ninputs, const refs *ref, const side *B, const tol *t) {
    tg_ctx *ctx = tg_ctx_new();
    side S = {0};
    int st, res = -1;
    if (side_open(&S, path, fname, "fast_run", tg, exclude, inputs, ninputs, true, &st, ctx)) goto done;
    checker c = {.ref = ref, .t = t};
    tg_hooks h = {.after = check_hook, .ud = &c};
    tg_function_set_hooks(S.f, &h);
    if (tg_function_call(S.f, S.ins, S.outs, ctx)) goto done;
    res = !c.found;
    for (int i = 0; res && i < S.nout; i++) {
        diff d;
        compare_arrays(S.outs[i], B->outs[i], t, &d);
        if (!d.ok) res = 0;
    }
done:
    side_free(&S);
    tg_ctx_free(ctx);
    return res;
}

int tgd_compare(int argc, char **argv) {
    const char *fname = NULL, *rtol_s = NULL, *atol_s = NULL; /* (each given once) */
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs = 0;
    tol t = {-1, -1};
    cli_taglist inc = {{0}, 0}, exc = {{0}, 0};
    tags tg = {&inc, &exc};
    static const struct option opts[] = {{"rtol", required_argument, 0, 'r'},
                                         {"atol", required_argument, 0, 'a'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {0, 0, 0, 0}};
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:i:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!cli_once("tgdebug: compare", "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return TG_EXIT_OK;
        case 'V': cli_print_version("tgdebug"); return TG_EXIT_OK;
        case 'I':
        case 'X':
            if (!cli_tag_opt(TGDEBUG ": compare", c, &inc, &exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'r':
            if (!cli_once("tgdebug: compare", "--rtol", &rtol_s, optarg)) return TG_EXIT_USAGE;
            if (!tgd_parse_double(SUB, "--rtol", optarg, &t.rtol)) return TG_EXIT_USAGE;
            break;
        case 'a':
            if (!cli_once("tgdebug: compare", "--atol", &atol_s, optarg)) return TG_EXIT_USAGE;
            if (!tgd_parse_double(SUB, "--atol", optarg, &t.atol)) return TG_EXIT_USAGE;
            break;
        case 'i':
            if (!cli_input_add(TGDEBUG, inputs, &ninputs, CLI_MAX_INPUTS, optarg)) return TG_EXIT_USAGE;
            break;
        default: return cli_getopt_error(TGDEBUG, SUB, c, argv);
        }
    }
    if (optind != argc - 1) {
        if (optind >= argc)
            tgd_error(SUB, "missing FILE (see tgdebug compare --help)");
        else
            tgd_error(SUB, "unexpected argument '%s'", argv[optind + 1]);
        return TG_EXIT_USAGE;
    }
    const char *path = argv[optind];
    if (cli_is_tgf(path)) { /* by its content, as every tool knows one */
        tgd_error(SUB, "%s is a compiled function: compare needs the graph file (.json) to compile it both ways", path);
        return TG_EXIT_USAGE;
    }
    int rc, st;
    tg_ctx *ctx = tg_ctx_new();
    side A = {0}, B = {0};
    refs ref = {0};
    checker chk = {0};
    bool *in = NULL;
    if ((rc = side_open(&B, path, fname, "none", NULL, NULL, inputs, ninputs, false, &st, ctx))) goto done;
    if ((rc = side_open(&A, path, fname, "fast_run", &tg, NULL, inputs, ninputs, false, &st, ctx))) goto done;
    if (!(ref.map = tg_idmap_new())) {
        tgd_error(SUB, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    tg_hooks hb = {.after = keep_hook, .ud = &ref};
    tg_function_set_hooks(B.f, &hb);
    if (tg_function_call(B.f, B.ins, B.outs, ctx)) {
        tgd_error(SUB, "the unoptimized function failed: %s", tg_ctx_message(ctx));
        rc = tgd_exit_for(tg_ctx_status(ctx));
        goto done;
    }
    tg_function_set_hooks(B.f, NULL);
    chk = (checker){.ref = &ref, .t = &t};
    tg_hooks ha = {.after = check_hook, .ud = &chk};
    tg_function_set_hooks(A.f, &ha);
    if (tg_function_call(A.f, A.ins, A.outs, ctx)) {
        tgd_error(SUB, "the optimized function failed: %s", tg_ctx_message(ctx));
        rc = tgd_exit_for(tg_ctx_status(ctx));
        goto done;
    }
    tg_function_set_hooks(A.f, NULL);

    printf("compare: '%s' of %s: %d nodes optimized (fast_run), %d unoptimized (none)\n",
           tg_function_name(A.f), path, tg_function_node_count(A.f), tg_function_node_count(B.f));
    int bad = 0;
    for (int i = 0; i < A.nout; i++) {
        diff d;
        compare_arrays(A.outs[i], B.outs[i], &t, &d);
        bad += !d.ok;
        print_verdict("output", tg_function_output_id(A.f, i), &d);
    }
    for (int i = 0; i < A.f->fg->nupd; i++) {
        const char *id = A.f->upd_shared[i]->id;
        const tg_array *a = tg_function_shared_get(A.f, id), *b = tg_function_shared_get(B.f, id);
        if (!a || !b) continue;
        diff d;
        compare_arrays(a, b, &t, &d);
        bad += !d.ok;
        print_verdict("update", id, &d);
    }
    printf("nodes: %d optimized node outputs compared with the values they stand for\n", chk.compared);
    if (chk.stabilized) {
        /* Where the optimizer made finite what the graph as written did
         * not, and which rewrite made the first such node. */
        const char *skey = tg_function_node_key(A.f, chk.stab_node);
        int nrw = tg_function_rewrite_count(A.f), e = -1;
        tg_rewrite_info r = {0};
        /* the latest stabilize rewrite behind it: one that made it or
         * anything upstream of it (fusion made the node itself, and a
         * rewrite of another pass is not named as one) */
        bool *lin = calloc((size_t)nrw + 1, sizeof *lin);
        if (lin && suspects(&A, &B, chk.stab_node, lin) == TG_OK)
            for (int q = nrw - 1; q >= 0 && e < 0; q--) {
                if (!lin[q]) continue;
                tg_function_rewrite_get(A.f, q, &r);
                if (!strcmp(r.pass, "stabilize")) e = q;
            }
        free(lin);
        printf("stabilized: %lld value%s in %d node output%s finite where the unoptimized function gives inf "
               "or NaN; the first in node %s (%s)",
               (long long)chk.stabilized, chk.stabilized == 1 ? "" : "s", chk.stab_outputs,
               chk.stab_outputs == 1 ? "" : "s", skey, tg_function_node_op(A.f, chk.stab_node));
        if (e >= 0)
            printf(", from rewrite %s (pass %s)\n", r.name, r.pass);
        else
            printf(", from no stabilize rewrite (none made it or anything upstream of it)\n");
    }
    if (!chk.found && !bad) {
        printf("compare: the optimized function agrees with the unoptimized one\n");
        rc = TG_EXIT_OK;
        goto done;
    }
    rc = TG_EXIT_FOUND;
    if (!chk.found) {
        tgd_error(SUB, "%d output%s differ%s, but no single node could be compared", bad, bad == 1 ? "" : "s",
                  bad == 1 ? "s" : "");
        goto done;
    }
    int k = chk.node;
    const tg_node *n = A.f->sched[k].node;
    const char *key = tg_function_node_key(A.f, k);
    printf("\nfirst differing node: %s\n", key);
    printf("op: %s\n", n->op->name);
    printf("output %d '%s' against the unoptimized '%s': max abs diff %.4g, max rel diff %.4g%s\n", chk.output,
           chk.id, chk.ref_id, chk.d.maxabs, chk.d.maxrel, chk.d.shape_differs ? " (shapes differ)" : "");
    printf("trace:\n");
    tgd_print_trace(stdout, n, "  ");
    const char *const *okeys;
    int no = tg_function_node_origins(A.f, k, &okeys);
    printf("stands for:");
    for (int i = 0; i < no; i++) printf(" %s", okeys[i]);
    printf("\n");
    /* (keys of a gradient's expansion: whose derivative each is) */
    for (int i = 0; i < no; i++) tgd_print_gradient(stdout, A.f, okeys[i], "  ", okeys[i]);

    int nrw = tg_function_rewrite_count(A.f);
    in = calloc((size_t)nrw + 1, sizeof *in);
    if (!in) {
        tgd_error(SUB, "out of memory");
        goto done;
    }
    if (suspects(&A, &B, k, in)) {
        tgd_error(SUB, "out of memory");
        goto done;
    }
    int culprit = -1, nlin = 0, latest = -1;
    /* Latest first: a rewrite that only made the pattern a broken one
     * then matched would also fix things when turned off. One compile
     * and call per rewrite name (or pass) among the suspects: those of
     * the node and of everything upstream of it, so a node deep in a
     * large graph may cost as many as the distinct rewrites applied
     * there. */
    for (int e = nrw - 1; e >= 0 && culprit < 0; e--) {
        if (!in[e]) continue;
        nlin++;
        if (latest < 0) latest = e;
        tg_rewrite_info r;
        tg_function_rewrite_get(A.f, e, &r);
        bool tried = false;
        for (int q = e + 1; q < nrw && !tried; q++) {
            tg_rewrite_info r2;
            tg_function_rewrite_get(A.f, q, &r2);
            if (in[q] && !strcmp(r2.name, r.name)) tried = true;
        }
        if (tried) continue;
        int ok = agrees_without(path, fname, &tg, r.name, inputs, ninputs, &ref, &B, &t);
        if (ok < 0) ok = agrees_without(path, fname, &tg, r.pass, inputs, ninputs, &ref, &B, &t);
        if (ok == 1) culprit = e;
    }
    if (nlin == 0) {
        printf("\nno rewrite made this node or anything upstream of it: it is the file's own node (an in-place or "
               "kernel problem)\n");
        tgd_error(SUB, "node '%s' (%s) differs from the unoptimized function; no rewrite made it or what it reads",
                  key, n->op->name);
        goto done;
    }
    bool sure = culprit >= 0;
    /* none helped alone: the node's creator, else the latest rewrite
     * upstream of it */
    if (!sure) culprit = last_creator(A.f, key, nrw);
    if (culprit < 0) culprit = latest;
    tg_rewrite_info r;
    tg_function_rewrite_get(A.f, culprit, &r);
    printf("\n%s: %s\n", sure ? "bad rewrite" : "suspect rewrite (turning off any one rewrite did not fix it)", r.name);
    printf("pass: %s\n", r.pass);
    printf("record entry: %d of %d\n", culprit + 1, nrw);
    /* (in the node's own lineage, or upstream of it only) */
    memset(in, 0, sizeof *in * (size_t)nrw);
    lineage(A.f, key, nrw, in, 0);
    bool upstream = !in[culprit];
    if (upstream) printf("upstream: it rewrote what node %s is computed from, not the node itself\n", key);
    for (int j = 0; j < r.nremoved; j++) print_key(&A, "removed", r.removed[j], culprit);
    for (int j = 0; j < r.ncreated; j++) print_key(&A, "created", r.created[j], culprit);
    tgd_error(SUB, "node '%s' (%s) differs from the unoptimized function (max abs diff %.4g): %s rewrite '%s' (pass %s)%s",
              key, n->op->name, chk.d.maxabs, sure ? "made by" : "suspect", r.name, r.pass,
              upstream ? ", upstream of it" : "");
done:
    free(in);
    refs_free(&ref);
    side_free(&A);
    side_free(&B);
    tg_ctx_free(ctx);
    return rc;
}
