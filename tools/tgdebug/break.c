/* Breakpoints through the VM's hooks (debugger.h): the --when language,
 * the statistics of monitored values, finding a NODE of the file among the
 * scheduled nodes of the optimized function, and the hooks themselves. */
#define _GNU_SOURCE
#include "debugger.h"

#include <ctype.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "tensor/tensor.h"
#include "vm/vm.h"

/* ---- the --when language ---- */

enum { E_OR, E_AND, E_NOT, E_CMP, E_PRED, E_CALL };
enum { R_MAX, R_MIN, R_MEAN, R_SUM };      /* value reductions */
enum { P_ISNAN, P_ISINF, P_ISFINITE };     /* element predicates */
enum { C_LT, C_LE, C_GT, C_GE, C_EQ, C_NE };

typedef struct enode {
    int kind;
    int a, b;        /* children (OR, AND: both; NOT: a) */
    int red, abs;    /* CMP on a reduction: which, and over abs(var) */
    int pred, all;   /* PRED: which predicate, any (0) or all (1) */
    int cmp;
    double num;
    bool is_out;     /* the variable: output or input */
    int var;         /* its index */
    double val;      /* the reduction (or predicate), once computed */
} enode;

struct dbg_expr {
    int n, cap;
    enode *v;
    int root;
};

typedef struct parser {
    const char *s, *p;
    char *err;
    size_t errsize;
    dbg_expr *e;
    bool failed;
    int depth; /* parentheses and 'not's open at the cursor */
} parser;

/* Parentheses and 'not's nest by recursion, in the parser and in eval: a
 * limit far beyond any real condition keeps a pasted or generated one of
 * 20,000 levels from overflowing the stack. */
enum { MAX_DEPTH = 256 };

static void perr(parser *P, const char *at, const char *fmt, const char *what) {
    if (P->failed) return;
    P->failed = true;
    char m[200];
    snprintf(m, sizeof m, fmt, what);
    snprintf(P->err, P->errsize, "column %d: %s", (int)(at - P->s) + 1, m);
}

static void skip(parser *P) {
    while (*P->p == ' ' || *P->p == '\t') P->p++;
}

/* The identifier at the cursor (not consumed) into buf. */
static size_t peek_ident(parser *P, char *buf, size_t size) {
    skip(P);
    size_t n = 0;
    while (isalnum((unsigned char)P->p[n]) || P->p[n] == '_') n++;
    if (n >= size) n = size - 1;
    memcpy(buf, P->p, n);
    buf[n] = 0;
    return n;
}

static bool accept_word(parser *P, const char *w) {
    char id[32];
    size_t n = peek_ident(P, id, sizeof id);
    if (n && strcmp(id, w) == 0) {
        P->p += n;
        return true;
    }
    return false;
}

static bool expect_char(parser *P, char c) {
    skip(P);
    if (*P->p == c) {
        P->p++;
        return true;
    }
    char what[2] = {c, 0};
    perr(P, P->p, *P->p ? "expected '%s'" : "expected '%s' before the end", what);
    return false;
}

static int add(parser *P, enode n) {
    dbg_expr *e = P->e;
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 16;
        enode *v = realloc(e->v, (size_t)cap * sizeof *v);
        if (!v) {
            perr(P, P->p, "%s", "out of memory");
            return -1;
        }
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n] = n;
    return e->n++;
}

/* var := x | xN | inN */
static bool parse_var(parser *P, enode *n) {
    char id[32];
    const char *at = (skip(P), P->p);
    size_t len = peek_ident(P, id, sizeof id);
    const char *digits = NULL;
    if (len && id[0] == 'x') {
        n->is_out = true;
        digits = id + 1;
    } else if (len > 2 && id[0] == 'i' && id[1] == 'n') {
        n->is_out = false;
        digits = id + 2;
    }
    bool ok = digits != NULL;
    if (ok && !*digits) ok = n->is_out; /* bare x is x0; bare "in" is nothing */
    for (const char *d = digits; ok && *d; d++) ok = isdigit((unsigned char)*d);
    if (ok && strlen(digits) > 3) ok = false;
    if (!ok) {
        perr(P, at, len ? "'%s' is not a value: x, x0, x1... (outputs) or in0, in1... (inputs)"
                        : "expected a value (x, x0.., in0..)%s", len ? id : "");
        return false;
    }
    n->var = *digits ? atoi(digits) : 0;
    P->p += len;
    return true;
}

static int parse_or(parser *P);

/* One level deeper at `at` (a '(' or a 'not'); false, with the error,
 * past MAX_DEPTH. */
static bool deeper(parser *P, const char *at) {
    if (++P->depth <= MAX_DEPTH) return true;
    char lim[16];
    snprintf(lim, sizeof lim, "%d", MAX_DEPTH);
    perr(P, at, "nested deeper than %s levels of parentheses and 'not'", lim);
    return false;
}

static int parse_atom(parser *P) {
    skip(P);
    const char *at = P->p;
    if (*P->p == '(') {
        if (!deeper(P, at)) return -1;
        P->p++;
        int r = parse_or(P);
        if (r < 0 || !expect_char(P, ')')) return -1;
        P->depth--;
        return r;
    }
    char id[32];
    size_t len = peek_ident(P, id, sizeof id);
    if (!len) {
        perr(P, at, *at ? "expected a condition (max(..), any(isnan(x)), call, ...), got '%.1s'"
                        : "expected a condition (max(..), any(isnan(x)), call, ...)%s", at);
        return -1;
    }
    enode n = {0};
    if (!strcmp(id, "not")) {
        if (!deeper(P, at)) return -1;
        P->p += len;
        int a = parse_atom(P);
        if (a < 0) return -1;
        P->depth--;
        n.kind = E_NOT;
        n.a = a;
        return add(P, n);
    }
    if (!strcmp(id, "any") || !strcmp(id, "all")) {
        P->p += len;
        n.kind = E_PRED;
        n.all = id[1] == 'l';
        if (!expect_char(P, '(')) return -1;
        const char *pat = (skip(P), P->p);
        if (accept_word(P, "isnan"))
            n.pred = P_ISNAN;
        else if (accept_word(P, "isinf"))
            n.pred = P_ISINF;
        else if (accept_word(P, "isfinite"))
            n.pred = P_ISFINITE;
        else {
            perr(P, pat, "expected isnan(..), isinf(..) or isfinite(..) inside %s(..)", id);
            return -1;
        }
        if (!expect_char(P, '(') || !parse_var(P, &n) || !expect_char(P, ')') || !expect_char(P, ')')) return -1;
        return add(P, n);
    }
    n.kind = E_CMP;
    if (!strcmp(id, "call")) {
        P->p += len;
        n.kind = E_CALL;
    } else {
        static const char *const reds[] = {"max", "min", "mean", "sum", NULL};
        int r = -1;
        for (int i = 0; reds[i]; i++)
            if (!strcmp(id, reds[i])) r = i;
        if (r < 0) {
            perr(P, at, "unknown name '%s' (max, min, mean, sum, any, all, call, not)", id);
            return -1;
        }
        P->p += len;
        n.red = r;
        if (!expect_char(P, '(')) return -1;
        if (accept_word(P, "abs")) {
            n.abs = 1;
            if (!expect_char(P, '(') || !parse_var(P, &n) || !expect_char(P, ')')) return -1;
        } else if (!parse_var(P, &n)) {
            return -1;
        }
        if (!expect_char(P, ')')) return -1;
    }
    skip(P);
    const char *cat = P->p;
    static const char *const ops[] = {"<=", ">=", "==", "!=", "<", ">"};
    static const int codes[] = {C_LE, C_GE, C_EQ, C_NE, C_LT, C_GT};
    int c = -1;
    for (int i = 0; i < 6 && c < 0; i++)
        if (!strncmp(P->p, ops[i], strlen(ops[i]))) {
            c = codes[i];
            P->p += strlen(ops[i]);
        }
    if (c < 0) {
        perr(P, cat, "expected a comparison (< <= > >= == !=) after %s(..)", id);
        return -1;
    }
    n.cmp = c;
    skip(P);
    char *end;
    const char *nat = P->p;
    /* A number as C writes it, but not the words strtod also takes
     * (inf, nan, hex), which would read as a variable elsewhere. */
    if (!(isdigit((unsigned char)*nat) || ((*nat == '-' || *nat == '+' || *nat == '.') &&
                                           (isdigit((unsigned char)nat[1]) || nat[1] == '.'))) ||
        (nat[0] == '0' && (nat[1] == 'x' || nat[1] == 'X'))) {
        perr(P, nat, *nat ? "expected a number after the comparison%s" : "expected a number after the comparison%s",
             "");
        return -1;
    }
    n.num = strtod(nat, &end);
    if (end == nat) {
        perr(P, nat, "expected a number after the comparison%s", "");
        return -1;
    }
    P->p = end;
    if (isalnum((unsigned char)*P->p) || *P->p == '_') {
        perr(P, P->p, "unexpected '%.1s' after the number", P->p);
        return -1;
    }
    return add(P, n);
}

/* term (WORD term)*: the terms joined from the right, a and (b and c),
 * so that eval walks a chain in a loop instead of recursing once a term
 * (a chain of 10,000 terms fits in a command line). */
static int parse_chain(parser *P, int kind, const char *word, int (*term)(parser *)) {
    int first = term(P);
    if (first < 0 || !accept_word(P, word)) return first;
    int *t = NULL, r = -1;
    size_t n = 0, cap = 0;
    for (int x = first;; x = term(P)) {
        if (x < 0) goto done;
        if (n == cap) {
            int *g = realloc(t, (cap = cap ? cap * 2 : 16) * sizeof *t);
            if (!g) {
                perr(P, P->p, "%s", "out of memory");
                goto done;
            }
            t = g;
        }
        t[n++] = x;
        if (n > 1 && !accept_word(P, word)) break;
    }
    r = t[n - 1];
    for (size_t i = n - 1; i-- > 0 && r >= 0;) r = add(P, (enode){.kind = kind, .a = t[i], .b = r});
done:
    free(t);
    return r;
}

static int parse_and(parser *P) { return parse_chain(P, E_AND, "and", parse_atom); }

static int parse_or(parser *P) { return parse_chain(P, E_OR, "or", parse_and); }

dbg_expr *dbg_expr_parse(const char *text, char *err, size_t errsize) {
    dbg_expr *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errsize, "out of memory");
        return NULL;
    }
    parser P = {.s = text, .p = text, .err = err, .errsize = errsize, .e = e};
    int r = parse_or(&P);
    skip(&P);
    if (r >= 0 && *P.p) {
        char w[32];
        if (!peek_ident(&P, w, sizeof w)) snprintf(w, sizeof w, "%.1s", P.p);
        perr(&P, P.p, "unexpected '%s' (join conditions with 'and' or 'or')", w);
    }
    if (r < 0 || P.failed) {
        dbg_expr_free(e);
        return NULL;
    }
    e->root = r;
    return e;
}

void dbg_expr_free(dbg_expr *e) {
    if (!e) return;
    free(e->v);
    free(e);
}

void dbg_expr_max_vars(const dbg_expr *e, int *max_out, int *max_in) {
    *max_out = *max_in = -1;
    for (int i = 0; e && i < e->n; i++) {
        const enode *n = &e->v[i];
        if (n->kind != E_CMP && n->kind != E_PRED) continue;
        int *m = n->is_out ? max_out : max_in;
        if (n->var > *m) *m = n->var;
    }
}

/* ---- statistics ---- */

/* Walk the elements of a in C order with its strides, calling fn. */
#define FOR_EACH_ELEMENT(a, p, body)                                     \
    do {                                                                 \
        int64_t n_ = tg_array_size_inline(a), idx_[TG_MAX_NDIM] = {0};   \
        const char *p = (a)->data;                                       \
        for (int64_t i_ = 0; i_ < n_; i_++) {                            \
            body;                                                        \
            for (int d_ = (a)->ndim - 1; d_ >= 0; d_--) {                \
                p += (a)->strides[d_];                                   \
                if (++idx_[d_] < (a)->shape[d_]) break;                  \
                p -= (a)->strides[d_] * (a)->shape[d_];                  \
                idx_[d_] = 0;                                            \
            }                                                            \
        }                                                                \
    } while (0)

void dbg_stats_of(const tg_array *a, dbg_stats *st) {
    memset(st, 0, sizeof *st);
    st->n = tg_array_size_inline(a);
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    int64_t fin = 0;
    FOR_EACH_ELEMENT(a, p, {
        double v = tg_load_f64(a->dtype, p);
        if (isnan(v))
            st->nan++;
        else if (isinf(v))
            st->inf++;
        else {
            fin++;
            sum += v;
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
    });
    st->min = fin ? mn : NAN;
    st->max = fin ? mx : NAN;
    st->mean = fin ? sum / (double)fin : NAN;
}

/* A reduction as NumPy computes it: NaN propagates through max, min and
 * mean (so a comparison with it is false), infinities count. */
static double reduce(const tg_array *a, int red, int absv) {
    int64_t n = tg_array_size_inline(a);
    if (n == 0) return red == R_SUM ? 0 : NAN; /* NumPy: max of empty raises; NaN never compares true */
    double acc = red == R_MAX ? -INFINITY : red == R_MIN ? INFINITY : 0;
    bool nan = false;
    FOR_EACH_ELEMENT(a, p, {
        double v = tg_load_f64(a->dtype, p);
        if (absv) v = fabs(v);
        if (isnan(v)) nan = true;
        switch (red) {
        case R_MAX: if (v > acc) acc = v; break;
        case R_MIN: if (v < acc) acc = v; break;
        default: acc += v; break;
        }
    });
    if (nan) return NAN;
    return red == R_MEAN ? acc / (double)n : acc;
}

static double predicate(const tg_array *a, int pred, int all) {
    bool any = false, every = true;
    FOR_EACH_ELEMENT(a, p, {
        double v = tg_load_f64(a->dtype, p);
        bool t = pred == P_ISNAN ? isnan(v) : pred == P_ISINF ? isinf(v) : isfinite(v);
        any |= t;
        every &= t;
    });
    return (all ? every : any) ? 1 : 0;
}

/* Compute the leaves over outputs (is_out) or inputs. */
static void leaves_compute(dbg_expr *e, bool outs, tg_array *const *vals, long call) {
    for (int i = 0; i < e->n; i++) {
        enode *n = &e->v[i];
        if (n->kind == E_CALL) n->val = (double)call;
        if ((n->kind != E_CMP && n->kind != E_PRED) || n->is_out != outs) continue;
        const tg_array *a = vals[n->var];
        if (!a) {
            n->val = NAN;
            continue;
        }
        n->val = n->kind == E_CMP ? reduce(a, n->red, n->abs) : predicate(a, n->pred, n->all);
    }
}

/* Recursion only for parentheses and 'not' (at most MAX_DEPTH deep):
 * a chain of 'and' or 'or', joined from the right, is a loop. */
static bool eval(const dbg_expr *e, int i) {
    for (;;) {
        const enode *n = &e->v[i];
        switch (n->kind) {
        case E_OR:
            if (eval(e, n->a)) return true;
            i = n->b;
            continue;
        case E_AND:
            if (!eval(e, n->a)) return false;
            i = n->b;
            continue;
        case E_NOT: return !eval(e, n->a);
        case E_PRED: return n->val != 0;
        default:
            switch (n->cmp) {
            case C_LT: return n->val < n->num;
            case C_LE: return n->val <= n->num;
            case C_GT: return n->val > n->num;
            case C_GE: return n->val >= n->num;
            case C_EQ: return n->val == n->num;
            default: return n->val != n->num;
            }
        }
    }
}

bool dbg_expr_eval(dbg_expr *e, tg_array *const *outs, tg_array *const *ins, long call) {
    leaves_compute(e, false, ins, call);
    leaves_compute(e, true, outs, call);
    return eval(e, e->root);
}

/* ---- describing values ---- */

static void add_num(tg_str *s, const char *k, double v) {
    if (isnan(v))
        tg_str_addf(s, " %s=nan", k);
    else
        tg_str_addf(s, " %s=%.6g", k, v);
}

void dbg_value_describe(const dbg_value *v, tg_str *s) {
    const tg_array *a = v->a;
    tg_str_addf(s, "%s '%s' %s (", v->name, v->id ? v->id : "", tg_dtype_name(a->dtype));
    for (int d = 0; d < a->ndim; d++) tg_str_addf(s, "%s%lld", d ? ", " : "", (long long)a->shape[d]);
    tg_str_addf(s, a->ndim == 1 ? ",)" : ")");
    add_num(s, "min", v->st.min);
    add_num(s, "max", v->st.max);
    add_num(s, "mean", v->st.mean);
    tg_str_addf(s, " nan=%lld inf=%lld", (long long)v->st.nan, (long long)v->st.inf);
}

void dbg_hit_clear(dbg_hit *h) {
    for (int i = 0; i < h->nvals; i++) tg_array_free(h->vals[i].a);
    free(h->vals);
    h->vals = NULL;
    h->nvals = 0;
}

/* ---- finding NODE ---- */

bool dbg_add_break(dbg *d, const char *node, const char *when) {
    dbg_expr *e = NULL;
    if (when) {
        char err[256];
        if (!(e = dbg_expr_parse(when, err, sizeof err))) {
            /* a generated expression of 100,000 characters would be
             * the whole line: its start is enough, the column says where */
            int n = strlen(when) > 80 ? 60 : 80;
            cli_error("tgdebug", "--when '%.*s%s': %s", n, when, n == 60 ? "..." : "", err);
            return false;
        }
    }
    dbg_bp *b = realloc(d->bps, (size_t)(d->nbps + 1) * sizeof *b);
    if (!b) {
        dbg_expr_free(e);
        cli_error("tgdebug", "out of memory");
        return false;
    }
    d->bps = b;
    d->bps[d->nbps++] = (dbg_bp){.spec = node, .when = when, .expr = e};
    return true;
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return (la > lb ? la - lb : lb - la) + 64;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

typedef struct cand {
    const char *s;
    size_t dist;
} cand;

static int cmp_cand(const void *x, const void *y) {
    const cand *a = x, *b = y;
    if (a->dist != b->dist) return a->dist < b->dist ? -1 : 1;
    return strcmp(a->s, b->s);
}

/* "a, b or c": the keys and names nearest to spec. */
/* Whether a loop or subgraph body (the attrs.body of a scan or an
 * op_from_graph node: its own variables and nodes) has a node whose key
 * or name is spec, in it or in a body nested in it. */
static bool body_has(json_object *body, const char *spec, int depth) {
    json_object *nodes;
    if (depth > 16 || !json_object_object_get_ex(body, "nodes", &nodes) ||
        !json_object_is_type(nodes, json_type_array))
        return false;
    for (size_t i = 0; i < json_object_array_length(nodes); i++) {
        json_object *nd = json_object_array_get_idx(nodes, i), *outs, *name, *attrs, *inner;
        if (json_object_object_get_ex(nd, "outputs", &outs) && json_object_is_type(outs, json_type_array))
            for (size_t k = 0; k < json_object_array_length(outs); k++) {
                const char *id = json_object_get_string(json_object_array_get_idx(outs, k));
                if (id && !strcmp(id, spec)) return true;
            }
        if (json_object_object_get_ex(nd, "name", &name) && json_object_is_type(name, json_type_string) &&
            !strcmp(json_object_get_string(name), spec))
            return true;
        if (json_object_object_get_ex(nd, "attrs", &attrs) && json_object_object_get_ex(attrs, "body", &inner) &&
            body_has(inner, spec, depth + 1))
            return true;
    }
    return false;
}

/* The node (of the file, or scheduled for a .tgf) whose body holds the
 * node spec names, or NULL. */
static const tg_node *body_owner(const tg_function *f, const tg_graph *g, const char *spec) {
    int n = g ? g->nnodes : f->nsched;
    for (int i = 0; i < n; i++) {
        const tg_node *nd = g ? g->nodes[i] : f->sched[i].node;
        json_object *body;
        if (nd->nout > 0 && nd->attrs && json_object_object_get_ex(nd->attrs, "body", &body) &&
            body_has(body, spec, 0))
            return nd;
    }
    return NULL;
}

static void nearest(const tg_function *f, const tg_graph *g, const char *spec, tg_str *out) {
    int n = f->nsched + (g ? g->nnodes * 2 : 0), m = 0;
    cand *c = calloc((size_t)n + 1, sizeof *c);
    if (!c) return;
    for (int k = 0; k < f->nsched; k++) c[m++] = (cand){tg_function_node_key(f, k), 0};
    for (int i = 0; g && i < g->nnodes; i++) {
        const tg_node *nd = g->nodes[i];
        if (nd->nout > 0) c[m++] = (cand){nd->outputs[0]->id, 0};
        if (nd->name) c[m++] = (cand){nd->name, 0};
    }
    for (int i = 0; i < m; i++) c[i].dist = edit_distance(spec, c[i].s);
    qsort(c, (size_t)m, sizeof *c, cmp_cand);
    int shown = 0;
    for (int i = 0; i < m && shown < 3; i++) {
        if (i && !strcmp(c[i].s, c[i - 1].s)) continue;
        tg_str_addf(out, "%s'%s'", shown ? ", " : "", c[i].s);
        shown++;
    }
    free(c);
}

static bool has(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* The scheduled nodes standing for original key `key`: the node with that
 * key, else every node whose origins list it. */
static int nodes_for_key(const tg_function *f, const char *key, int *out, int max) {
    int n = 0;
    for (int k = 0; k < f->nsched && n < max; k++)
        if (!strcmp(tg_function_node_key(f, k), key)) out[n++] = k;
    if (n) return n;
    for (int k = 0; k < f->nsched && n < max; k++) {
        const char *const *keys;
        int no = tg_function_node_origins(f, k, &keys);
        for (int i = 0; i < no; i++)
            if (!strcmp(keys[i], key) && !has(out, n, k)) {
                out[n++] = k;
                break;
            }
    }
    return n;
}

static int resolve(dbg *d, dbg_bp *b, const tg_graph *g) {
    tg_function *f = d->f;
    int max = f->nsched + 1;
    b->nodes = calloc((size_t)max, sizeof *b->nodes);
    if (!b->nodes) {
        cli_error("tgdebug", "out of memory");
        return TG_EXIT_USAGE;
    }
    /* Which original keys NODE names: itself as a key, else the nodes of
     * the file (or of the schedule, for a .tgf) with that name. */
    const char *keys[64];
    int nkeys = 0;
    bool is_key = false;
    for (int k = 0; k < f->nsched && !is_key; k++) is_key = !strcmp(tg_function_node_key(f, k), b->spec);
    for (int i = 0; g && i < g->nnodes && !is_key; i++)
        is_key = g->nodes[i]->nout > 0 && !strcmp(g->nodes[i]->outputs[0]->id, b->spec);
    if (!is_key) {
        /* A key that only some origin list names (a .tgf's fused nodes). */
        int tmp[1];
        is_key = nodes_for_key(f, b->spec, tmp, 1) > 0;
    }
    if (is_key) {
        keys[nkeys++] = b->spec;
    } else {
        for (int i = 0; g && i < g->nnodes && nkeys < 64; i++)
            if (g->nodes[i]->name && !strcmp(g->nodes[i]->name, b->spec) && g->nodes[i]->nout > 0)
                keys[nkeys++] = g->nodes[i]->outputs[0]->id;
        for (int k = 0; !g && k < f->nsched && nkeys < 64; k++)
            if (f->sched[k].node->name && !strcmp(f->sched[k].node->name, b->spec))
                keys[nkeys++] = tg_function_node_key(f, k);
    }
    const tg_node *owner = nkeys ? NULL : body_owner(f, g, b->spec);
    if (owner) {
        /* The body runs as a function of its own, once per step, without
         * the outer function's hooks. */
        cli_error("tgdebug",
                  "--break %s: that node is inside the body of %s '%s'; breakpoints apply to the nodes of "
                  "function '%s' (break on '%s' to see the loop's inputs and outputs)",
                  b->spec, owner->op->name, owner->outputs[0]->id, tg_function_name(f), owner->outputs[0]->id);
        return TG_EXIT_USAGE;
    }
    if (!nkeys) {
        tg_str s = {0};
        nearest(f, g, b->spec, &s);
        cli_error("tgdebug", "--break %s: no node has that key or name in function '%s' (nearest: %s)%s", b->spec,
                  tg_function_name(f), s.s ? s.s : "none",
                  g ? "" : "; a .tgf keeps the names of the nodes it schedules only: give a replaced node's key");
        tg_str_free(&s);
        return TG_EXIT_USAGE;
    }
    tg_str note = {0};
    for (int i = 0; i < nkeys; i++) {
        int found[64];
        int nf = nodes_for_key(f, keys[i], found, 64);
        if (!nf) {
            tg_str_addf(&note, "%s%s: no scheduled node stands for it (not needed by '%s', or folded to a constant)",
                        note.len ? "; " : "", keys[i], tg_function_name(f));
            continue;
        }
        for (int j = 0; j < nf; j++) {
            int k = found[j];
            const char *sk = tg_function_node_key(f, k), *op = tg_function_node_op(f, k);
            if (!has(b->nodes, b->nnodes, k)) b->nodes[b->nnodes++] = k;
            if (!strcmp(sk, keys[i]) && strcmp(keys[i], b->spec))
                tg_str_addf(&note, "%snode %s (%s, named %s)", note.len ? "; " : "", sk, op, b->spec);
            else if (!strcmp(sk, keys[i]) && !strcmp(op, "composite")) {
                const char *const *og;
                int no = tg_function_node_origins(f, k, &og);
                tg_str_addf(&note, "%snode %s (a composite fused from", note.len ? "; " : "", sk);
                for (int q = 0; q < no; q++) tg_str_addf(&note, "%s %s", q ? "," : "", og[q]);
                tg_str_addf(&note, ")");
            } else if (!strcmp(sk, keys[i]))
                tg_str_addf(&note, "%snode %s (%s)", note.len ? "; " : "", sk, op);
            else if (!strcmp(op, "composite"))
                tg_str_addf(&note, "%s%s was fused into composite %s: x is the composite's output", note.len ? "; " : "",
                            keys[i], sk);
            else
                tg_str_addf(&note, "%s%s was rewritten into %s (%s)", note.len ? "; " : "", keys[i], sk, op);
        }
    }
    snprintf(b->note, sizeof b->note, "%s", note.s ? note.s : "");
    tg_str_free(&note);
    if (!b->nnodes) {
        cli_error("tgdebug", "--break %s: %s", b->spec, b->note);
        return TG_EXIT_USAGE;
    }
    int mo, mi;
    dbg_expr_max_vars(b->expr, &mo, &mi);
    for (int j = 0; j < b->nnodes; j++) {
        int k = b->nodes[j];
        int no = tg_function_node_noutputs(f, k), ni = tg_function_node_ninputs(f, k);
        if (mo >= no || mi >= ni) {
            cli_error("tgdebug", "--when '%s': node %s (%s) has %d output%s and %d input%s, no %s%d", b->when,
                      tg_function_node_key(f, k), tg_function_node_op(f, k), no, no == 1 ? "" : "s", ni,
                      ni == 1 ? "" : "s", mo >= no ? "x" : "in", mo >= no ? mo : mi);
            return TG_EXIT_USAGE;
        }
    }
    return TG_EXIT_OK;
}

/* ---- the hooks ---- */

static bool is_bp_op(const tg_node *n) { return strcmp(n->op->name, "breakpoint") == 0; }

/* The breakpoint op without its log line: the debugger's hook reports
 * the hit instead (with the call and the statistics). */
static int bp_quiet(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    (void)ctx;
    for (int i = 1; i < n->nin; i++) {
        tg_array *r = tg_array_ref(in[i]);
        tg_array_free(out[i - 1]);
        out[i - 1] = r;
    }
    return 0;
}

static void reason_add(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reason_add(char *buf, size_t size, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n && n + 2 < size) {
        memcpy(buf + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (n < size) vsnprintf(buf + n, size - n, fmt, ap);
    va_end(ap);
}

static int add_value(dbg_hit *h, const char *name, const tg_var *v, bool is_out, int index, tg_array *a) {
    if (!a) return 0;
    dbg_value *nv = realloc(h->vals, (size_t)(h->nvals + 1) * sizeof *nv);
    if (!nv) return -1;
    h->vals = nv;
    dbg_value *x = &h->vals[h->nvals++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->id = v ? v->id : NULL;
    x->is_out = is_out;
    x->index = index;
    x->a = tg_array_ref(a);
    dbg_stats_of(a, &x->st);
    return 0;
}

static int stopped(tg_ctx *ctx) { return tg_errorf(ctx, TG_ESTOPPED, "stopped by the debugger"); }

static int do_hit(dbg *d, int node, bool after, const char *reason, tg_array *const *in, tg_array *const *out,
                  tg_ctx *ctx) {
    tg_function *f = d->f;
    const tg_node *n = f->sched[node].node;
    dbg_hit h = {.node = node, .after = after, .call = d->call};
    snprintf(h.reason, sizeof h.reason, "%s", reason);
    char name[32];
    int rc = 0;
    bool bp_op = is_bp_op(n) && !after;
    /* Monitored values: a breakpoint op's m1..mn (its inputs 1..n, which
     * are its outputs 0..n-1); otherwise the outputs, then the inputs. */
    for (int j = 0; !rc && j < n->nout && (after || bp_op); j++) {
        snprintf(name, sizeof name, bp_op ? "m%d" : "x%d", j + 1 - !bp_op);
        rc = add_value(&h, name, bp_op ? n->inputs[j + 1] : n->outputs[j], true, j, bp_op ? in[j + 1] : out[j]);
    }
    for (int i = 0; !rc && !bp_op && i < n->nin; i++) {
        snprintf(name, sizeof name, "in%d", i);
        rc = add_value(&h, name, n->inputs[i], false, i, in[i]);
    }
    if (rc) {
        dbg_hit_clear(&h);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    __atomic_add_fetch(&d->hits, 1, __ATOMIC_RELAXED); /* read by the HTTP threads */
    rc = d->on_hit(d, &h, ctx);
    dbg_hit_clear(&h);
    return rc;
}

static void saved_drop(dbg *d) {
    for (int i = 0; i < d->nsaved; i++) tg_array_free(d->saved[i]);
    free(d->saved);
    d->saved = NULL;
    d->nsaved = 0;
}

/* Copy into d->saved the inputs node n may overwrite in place (its
 * inplace map): after it ran, in[] holds what it wrote there. The --when
 * leaves need no copy (they are reduced before the node runs). */
static int save_overwritten(dbg *d, const tg_node *n, tg_array *const *in, tg_ctx *ctx) {
    for (int j = 0; n->inplace && j < n->nout; j++) {
        int k = n->inplace[j];
        if (k < 0 || k >= n->nin || !in[k]) continue;
        if (!d->saved) {
            if (!(d->saved = calloc((size_t)n->nin, sizeof *d->saved))) goto oom;
            d->nsaved = n->nin;
        }
        if (!d->saved[k] && !(d->saved[k] = tg_array_copy(in[k], in[k]->dtype))) goto oom;
    }
    return 0;
oom:
    saved_drop(d);
    return tg_errorf(ctx, TG_ENOMEM, "out of memory copying the inputs of node '%s' that it overwrites",
                     n->outputs[0]->id);
}

static int hook_before(void *ud, const tg_function *f, int node, tg_array *const *in, tg_ctx *ctx) {
    dbg *d = ud;
    if (d->saved) saved_drop(d); /* left by a node that failed */
    if (__atomic_load_n(&d->stop, __ATOMIC_SEQ_CST)) return stopped(ctx);
    int *bps = d->node_bps ? d->node_bps[node] : NULL;
    for (int i = 0; bps && bps[i] >= 0; i++) {
        dbg_bp *b = &d->bps[bps[i]];
        if (b->expr) leaves_compute(b->expr, false, in, d->call);
    }
    const tg_node *n = f->sched[node].node;
    if (is_bp_op(n) && in[0] && tg_load_f64(in[0]->dtype, in[0]->data) != 0) {
        char r[300];
        snprintf(r, sizeof r, "breakpoint op: condition '%s' is true", tg_var_label(n->inputs[0]));
        int rc = do_hit(d, node, false, r, in, NULL, ctx);
        if (rc) return rc;
    }
    /* After the op's hit: a step asked for there pauses after this node.
     * Only where a pause can follow, so that other nodes cost nothing. */
    if ((bps || d->step) && n->inplace) {
        int rc = save_overwritten(d, n, in, ctx);
        if (rc) return rc;
    }
    return d->inner.before ? d->inner.before(d->inner.ud, f, node, in, ctx) : 0;
}

static int hook_after(void *ud, const tg_function *f, int node, tg_array *const *in, tg_array *const *out,
                      tg_ctx *ctx) {
    dbg *d = ud;
    int rc = 0;
    if (d->inner.after) {
        if (d->inner_lock) pthread_mutex_lock(d->inner_lock);
        rc = d->inner.after(d->inner.ud, f, node, in, out, ctx);
        if (d->inner_lock) pthread_mutex_unlock(d->inner_lock);
        if (rc) return rc;
    }
    if (__atomic_load_n(&d->stop, __ATOMIC_SEQ_CST)) return stopped(ctx);
    char reason[512] = "";
    int *bps = d->node_bps ? d->node_bps[node] : NULL;
    for (int i = 0; bps && bps[i] >= 0; i++) {
        dbg_bp *b = &d->bps[bps[i]];
        if (b->expr) {
            leaves_compute(b->expr, true, out, d->call);
            if (!eval(b->expr, b->expr->root)) continue;
        }
        __atomic_add_fetch(&b->hits, 1, __ATOMIC_RELAXED);
        if (b->when)
            reason_add(reason, sizeof reason, "--break %s --when '%s'", b->spec, b->when);
        else
            reason_add(reason, sizeof reason, "--break %s", b->spec);
    }
    if (d->step) {
        d->step = false;
        reason_add(reason, sizeof reason, "step");
    }
    if (reason[0]) {
        /* The inputs as the node read them: the copies of those it wrote
         * over (hook_before), the rest as they are. */
        tg_array **shown = NULL;
        if (d->saved) {
            if (!(shown = malloc((size_t)d->nsaved * sizeof *shown))) {
                saved_drop(d);
                return tg_errorf(ctx, TG_ENOMEM, "out of memory");
            }
            for (int i = 0; i < d->nsaved; i++) shown[i] = d->saved[i] ? d->saved[i] : in[i];
        }
        rc = do_hit(d, node, true, reason, shown ? shown : in, out, ctx);
        free(shown);
    }
    if (d->saved) saved_drop(d);
    return rc;
}

int dbg_attach(dbg *d, tg_function *f, const tg_graph *g, bool verbose) {
    d->f = f;
    for (int i = 0; i < d->nbps; i++) {
        int rc = resolve(d, &d->bps[i], g);
        if (rc) return rc;
        if (verbose)
            fprintf(stderr, "tgdebug: --break %s%s%s: %s\n", d->bps[i].spec, d->bps[i].when ? " --when " : "",
                    d->bps[i].when ? d->bps[i].when : "", d->bps[i].note);
    }
    d->node_bps = calloc((size_t)f->nsched + 1, sizeof *d->node_bps);
    if (!d->node_bps) goto oom;
    for (int k = 0; k < f->nsched; k++) {
        int cnt = 0;
        for (int i = 0; i < d->nbps; i++) cnt += has(d->bps[i].nodes, d->bps[i].nnodes, k);
        if (!cnt) continue;
        if (!(d->node_bps[k] = calloc((size_t)cnt + 1, sizeof(int)))) goto oom;
        int m = 0;
        for (int i = 0; i < d->nbps; i++)
            if (has(d->bps[i].nodes, d->bps[i].nnodes, k)) d->node_bps[k][m++] = i;
        d->node_bps[k][m] = -1;
    }
    /* The breakpoint op logs its hits when no debugger watches; here the
     * hook reports them (with the call and the statistics), so the op
     * runs as the plain pass-through it is under a debugger. */
    for (int k = 0; k < f->nsched; k++)
        if (is_bp_op(f->sched[k].node)) f->sched[k].run = bp_quiet;
    d->inner = f->hooks;
    tg_hooks h = {.before = hook_before, .after = hook_after, .ud = d};
    tg_function_set_hooks(f, &h);
    return TG_EXIT_OK;
oom:
    cli_error("tgdebug", "out of memory");
    return TG_EXIT_USAGE;
}

void dbg_free(dbg *d) {
    if (d->f && d->f->hooks.ud == d) {
        tg_function_set_hooks(d->f, d->inner.before || d->inner.after ? &d->inner : NULL);
        for (int k = 0; k < d->f->nsched; k++)
            if (d->f->sched[k].run == bp_quiet) d->f->sched[k].run = d->f->sched[k].op->run;
    }
    for (int i = 0; i < d->nbps; i++) {
        dbg_expr_free(d->bps[i].expr);
        free(d->bps[i].nodes);
    }
    free(d->bps);
    for (int k = 0; d->node_bps && d->f && k < d->f->nsched; k++) free(d->node_bps[k]);
    free(d->node_bps);
    saved_drop(d);
    d->bps = NULL;
    d->node_bps = NULL;
    d->nbps = 0;
}
