/* The profile report as JSON (schemas/profile.schema.json), shared by tgprof
 * --json and tgdebug serve's /api/profile: per-node rows, the same grouped per
 * op and op class, per original node, memory, the optimizer's profile. */
#include "profreport.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "vm/vm.h"

int prof_cmp_row(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    if (x->seconds != y->seconds) return x->seconds < y->seconds ? 1 : -1;
    return x->index - y->index;
}

static int cmp_str(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->index - y->index;
}

/* Merge rows with the same name (sorted by name first), summing. */
int prof_group_rows(prof_row *r, int n) {
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
    qsort(r, (size_t)m, sizeof *r, prof_cmp_row);
    return m;
}

const char *prof_kind_name(tg_profile_out_kind k) {
    return k == TG_PROFILE_OUT_VIEW ? "view" : k == TG_PROFILE_OUT_INPLACE ? "inplace" : "new";
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

const char *prof_clock_name(tg_profile_clock c) {
    return c == TG_PROFILE_CLOCK_EVENTS ? "events" : c == TG_PROFILE_CLOCK_SYNC ? "sync" : "host";
}

const char *prof_device_timing(const prof_info *P, int *ndevice) {
    int nd = 0;
    for (int k = 0; k < P->n; k++) nd += tg_profile_node_clock(P->p, k) != TG_PROFILE_CLOCK_HOST;
    if (ndevice) *ndevice = nd;
    return !nd ? "none" : tg_profile_sync(P->p) ? "sync" : "events";
}

/* ---- UTF-8 ---- */

int prof_utf8_seq(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    for (int k = 1; k < len; k++) /* (stops at the NUL: 0 is no continuation byte) */
        if ((p[k] & 0xC0) != 0x80) return 0;
    unsigned c1 = p[1];
    if (len && ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
                (c == 0xF4 && c1 > 0x8F)))
        return 0; /* overlong, a surrogate, past U+10FFFF */
    return len;
}

/* s with each byte that is not part of a well-formed UTF-8 sequence
 * written as U+FFFD: a new string, or NULL when s is well-formed (or out
 * of memory, *oom set). */
static char *utf8_fixed(const char *s, bool *oom) {
    size_t n = 0, bad = 0;
    for (int k; s[n]; n += (size_t)(k ? k : 1)) bad += !(k = prof_utf8_seq(s + n));
    if (!bad) return NULL;
    char *o = malloc(n + 2 * bad + 1), *w = o;
    if (!o) {
        *oom = true;
        return NULL;
    }
    for (int k; *s; s += k ? k : 1) {
        if ((k = prof_utf8_seq(s))) {
            memcpy(w, s, (size_t)k);
            w += k;
        } else {
            memcpy(w, "\xEF\xBF\xBD", 3);
            w += 3;
        }
    }
    *w = 0;
    return o;
}

/* ---- the JSON report ---- */

/* A string of the report, whatever its bytes: the file's path comes from
 * the command line, which may hold any (the graph's own strings are
 * UTF-8, which the loader checks), and json-c writes a string's bytes as
 * they are; a byte that is not UTF-8 made the report no JSON that a
 * reader takes, so it is written U+FFFD. */
static json_object *jstr(const char *s) {
    bool oom = false;
    char *fixed = s ? utf8_fixed(s, &oom) : NULL;
    json_object *o = oom ? NULL : json_object_new_string(fixed ? fixed : s ? s : "");
    free(fixed);
    return o;
}

/* A fraction of the time in nodes; sums of rounded seconds can pass 1 by
 * an ulp, which the schema would reject. */
static json_object *jshare(double t, double total) {
    double s = total > 0 ? t / total : 0;
    return json_object_new_double(s > 1 ? 1 : s < 0 ? 0 : s);
}

static json_object *group_json(prof_row *r, int n, double denom) {
    json_object *a = json_object_new_array();
    for (int i = 0; i < n; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", jstr(r[i].name));
        json_object_object_add(o, "time_s", json_object_new_double(r[i].seconds));
        json_object_object_add(o, "share", jshare(r[i].seconds, denom));
        json_object_object_add(o, "calls", json_object_new_int64((int64_t)r[i].calls));
        json_object_object_add(o, "nodes", json_object_new_int(r[i].nodes));
        json_object_object_add(o, "flops", json_object_new_double(r[i].flops));
        json_object_array_add(a, o);
    }
    return a;
}

/* fo's "nodes", "op_classes" and "ops": P's rows, shares of denom. */
static void add_rows(json_object *fo, const prof_info *P, double denom) {
    const tg_function *f = P->f;
    int n = P->n;
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
        json_object_object_add(o, "share", jshare(t, denom));
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
            json_object_object_add(oo, "kind", jstr(prof_kind_name(po.kind)));
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
        json_object_object_add(o, "clock", jstr(prof_clock_name(tg_profile_node_clock(P->p, k))));
        json_object_array_add(nodes, o);
    }
    json_object_object_add(fo, "nodes", nodes);

    prof_row *r = calloc((size_t)n + 1, sizeof *r);
    for (int t = 0; r && t < 2; t++) {
        for (int k = 0; k < n; k++)
            r[k] = (prof_row){k, t == 0 ? tg_profile_op_class(tg_function_node_op(f, k)) : P->opkey[k], NULL,
                         (double)P->st[k].ns * 1e-9, P->st[k].calls, 1, P->st[k].flops,
                         P->st[k].flops * (double)P->st[k].calls, P->st[k].bytes_new};
        int m = prof_group_rows(r, n);
        json_object_object_add(fo, t == 0 ? "op_classes" : "ops", group_json(r, m, denom));
    }
    free(r);
}

/* Body i of b and, nested, the bodies in it. */
static json_object *body_json(const prof_body *b, int nb, int i) {
    const prof_body *B = &b[i];
    json_object *o = json_object_new_object();
    json_object_object_add(o, "node", jstr(B->node_key));
    json_object_object_add(o, "index", json_object_new_int(B->node));
    json_object_object_add(o, "op", jstr(B->node_op));
    json_object_object_add(o, "op_key", jstr(B->node_opkey));
    json_object_object_add(o, "path", jstr(B->path));
    json_object_object_add(o, "function", jstr(tg_function_name(B->P.f)));
    json_object_object_add(o, "calls", json_object_new_int64((int64_t)B->P.calls));
    json_object_object_add(o, "steps", json_object_new_int64((int64_t)B->steps));
    json_object_object_add(o, "time_s", json_object_new_double(B->P.total_s));
    json_object_object_add(o, "time_in_nodes_s", json_object_new_double(B->P.nodes_s));
    json_object_object_add(o, "overhead_s", json_object_new_double(B->P.total_s - B->P.nodes_s));
    add_rows(o, &B->P, B->P.total_s);
    json_object *sub = json_object_new_array();
    for (int j = i + 1; j < nb; j++)
        if (b[j].parent == i) json_object_array_add(sub, body_json(b, nb, j));
    json_object_object_add(o, "bodies", sub);
    return o;
}

json_object *prof_report_json(const prof_info *P, const tg_profile_memory *mem) {
    return prof_report_json_bodies(P, mem, NULL, 0);
}

json_object *prof_report_json_bodies(const prof_info *P, const tg_profile_memory *mem, const prof_body *b,
                                     int nb) {
    const tg_function *f = P->f;
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
    json_object_object_add(fo, "device_timing", jstr(prof_device_timing(P, NULL)));
    add_rows(fo, P, P->nodes_s);

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
        tg_key_gradient kg;
        if (tg_function_key_gradient(f, og[i].key, &kg)) {
            json_object *gr = json_object_new_object();
            if (*kg.of) {
                json_object_object_add(gr, "of", jstr(kg.of));
                json_object_object_add(gr, "of_op", jstr(kg.of_op));
            }
            json_object_object_add(gr, "by", jstr(kg.by));
            json_object_object_add(gr, "by_op", jstr(kg.by_op));
            json_object_object_add(o, "gradient", gr);
        }
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
    if (P->pool) {
        json_object *po = json_object_new_object();
        json_object_object_add(po, "reused", json_object_new_int64((int64_t)P->pool->reused));
        json_object_object_add(po, "allocated", json_object_new_int64((int64_t)P->pool->allocated));
        json_object_object_add(po, "held_buffers", json_object_new_int(P->pool->buffers));
        json_object_object_add(po, "held_bytes", json_object_new_int64(P->pool->bytes));
        json_object_object_add(po, "budget_bytes", json_object_new_int64(P->pool->budget));
        json_object_object_add(mo, "pool", po);
    }
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
    json_object *bodies = json_object_new_array();
    for (int i = 0; i < nb; i++)
        if (b[i].parent < 0) json_object_array_add(bodies, body_json(b, nb, i));
    json_object_object_add(fo, "bodies", bodies);

    json_object *root = json_object_new_object();
    json_object_object_add(root, "format", jstr("tg-profile"));
    json_object_object_add(root, "version", json_object_new_int(1));
    char tool[64];
    snprintf(tool, sizeof tool, "%s %s", P->tool ? P->tool : "tgprof", tg_version());
    json_object_object_add(root, "tool", jstr(tool));
    json_object_object_add(root, "file", jstr(P->path));
    json_object_object_add(root, "environment", cli_environment_json());
    json_object *fs = json_object_new_array();
    json_object_array_add(fs, fo);
    json_object_object_add(root, "functions", fs);
    return root;
}

/* The key of a node whose attrs hold a body graph (scan, op_from_graph):
 * op{name} (the loader names every body; "scan" by default), as Theano's
 * Scan{rnn}, not the body's text. The name is escaped as in a JSON string
 * (without its quotes), as the attrs of print{...} and assert{...} are:
 * the text report prints keys as they are, and a name's control
 * characters (a terminal's escapes, a newline) would reach the terminal
 * or split a table's row. */
static void body_key(const tg_node *nd, tg_str *s) {
    json_object *jname = NULL;
    if (json_object_object_get_ex(nd->attrs, "name", &jname) && json_object_is_type(jname, json_type_string)) {
        const char *q = json_object_to_json_string_ext(jname, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        size_t n = q ? strlen(q) : 0; /* "..." (NULL: out of memory) */
        if (n < 2) s->oom = true;
        else tg_str_addf(s, "%s{%.*s}", nd->op->name, (int)(n - 2), q + 1);
    } else
        tg_str_addf(s, "%s", nd->op->name);
}

/* op{attrs} with the attrs canonical, so that one op with the same
 * attrs is one row however the file wrote them: the node's attrs with
 * their defaults (parse_attrs), keys sorted as the saver writes them
 * (tg_json_attrs_sorted: {"border_mode":"valid","subsample":[2,2]} and
 * the same two keys the other way round were two rows), and the axes of
 * an op that normalised them (tg_axes_normalize: a.axis_mask holds one
 * bit per axis, where a.naxes were written) as that mask says: 0, [0]
 * and [-2] of a 2-d input are all "axis":0 (one axis as an integer,
 * which every such op takes; several as an ascending list). A
 * reduction's null is every axis, as the list of them (sum over null and
 * over [1, 0] of a matrix are one row, as merge takes them for one
 * node); argmax's and argmin's null, a flat index, stays null. */
static void attrs_key(const tg_node *nd, tg_str *s) {
    json_object *c = tg_json_attrs_sorted(nd->attrs), *ax = NULL;
    const tg_attrs *a = &nd->a;
    int nbits = 0;
    for (int d = 0; d < 32; d++) nbits += (int)(a->axis_mask >> d & 1);
    bool every = a->axis_null && nbits > 0 && (nd->op->flags & TG_OPF_AXIS_SET) &&
                 strcmp(nd->op->name, "argmax") && strcmp(nd->op->name, "argmin");
    bool axes = c && json_object_object_get_ex(c, "axis", &ax) &&
                (every || (ax && !a->axis_null && a->naxes > 0 && nbits == a->naxes));
    for (int k = 0; axes && k < a->naxes; k++) /* (every axis as written is in the mask) */
        axes = a->axes[k] < 0 || (a->axes[k] < 32 && (a->axis_mask >> a->axes[k] & 1));
    if (axes) {
        json_object *v = NULL;
        if (nbits == 1) {
            for (int d = 0; d < 32; d++)
                if (a->axis_mask >> d & 1) v = json_object_new_int(d);
        } else {
            v = json_object_new_array();
            for (int d = 0; v && d < 32; d++)
                if (a->axis_mask >> d & 1) json_object_array_add(v, json_object_new_int(d));
        }
        if (!v || json_object_object_add(c, "axis", v)) {
            json_object_put(v);
            json_object_put(c);
            c = NULL;
        }
    }
    const char *t = c ? json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN) : NULL;
    if (t)
        tg_str_addf(s, "%s%s", nd->op->name, t);
    else
        s->oom = true;
    json_object_put(c);
}

/* The key *s (JSON-escaped text, json-c's: C0 controls escaped, DEL and
 * the C1 controls U+0080-U+009F not) with those escaped too, \u007f,
 * \u009b, as cli_text writes them: the text report prints keys as they
 * are, and U+009B is a CSI to some terminals. 0, or -1 out of memory. */
static int escape_c1(char **s) {
    const unsigned char *p = (const unsigned char *)*s;
    size_t n = 0, m = 0;
    for (; p[n]; n++) m += p[n] == 0x7f || (p[n] == 0xc2 && p[n + 1] >= 0x80 && p[n + 1] <= 0x9f);
    if (!m) return 0;
    char *o = tg_malloc(n + 5 * m + 1), *w = o;
    if (!o) return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == 0x7f)
            w += sprintf(w, "\\u007f");
        else if (p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)
            w += sprintf(w, "\\u%04x", p[++i]);
        else
            *w++ = (char)p[i];
    }
    *w = 0;
    tg_free(*s);
    *s = o;
    return 0;
}

int prof_opkeys(prof_info *P) {
    int n = P->n;
    const tg_function *f = P->f;
    P->opkey = calloc((size_t)n + 1, sizeof *P->opkey);
    if (!P->opkey) return -1;
    for (int k = 0; k < n; k++) {
        const tg_node *nd = f->sched[k].node;
        tg_str s = {0};
        if (strcmp(nd->op->name, "composite") == 0 && composite_text(nd->attrs, &s))
            ; /* composite{tanh((i0 + i1))}, as Theano names a fused node */
        else if (nd->attrs && json_object_object_get_ex(nd->attrs, "body", NULL))
            /* scan{rnn}, op_from_graph{normalize}: a node with a body is
             * named by the body's name, not its text (Theano: Scan{rnn}) */
            body_key(nd, &s);
        else if (nd->attrs && json_object_object_length(nd->attrs))
            /* (the attrs written only here: a body's text is long) */
            attrs_key(nd, &s);
        else
            tg_str_addf(&s, "%s", nd->op->name);
        P->opkey[k] = s.s;
    }
    for (int k = 0; k < n; k++)
        if (!P->opkey[k] || escape_c1(&P->opkey[k])) return -1;
    return 0;
}

void prof_opkeys_free(prof_info *P) {
    for (int k = 0; P->opkey && k < P->n; k++) tg_free(P->opkey[k]);
    free(P->opkey);
    P->opkey = NULL;
}


/* ---- bodies ---- */

static int add_bodies(const prof_info *P, int parent, int depth, const char *ppath, prof_body **b, int *nb,
                      int *cap) {
    for (int i = 0; i < tg_profile_body_count(P->p); i++) {
        int node;
        const tg_profile *bp = tg_profile_body(P->p, i, &node);
        if (*nb == *cap) {
            int nc = *cap ? 2 * *cap : 8;
            prof_body *nbuf = realloc(*b, (size_t)nc * sizeof *nbuf);
            if (!nbuf) return -1;
            *b = nbuf;
            *cap = nc;
        }
        int me = (*nb)++;
        prof_body *B = &(*b)[me];
        memset(B, 0, sizeof *B);
        B->parent = parent;
        B->depth = depth;
        B->node = node;
        B->node_key = tg_function_node_key(P->f, node);
        B->node_opkey = P->opkey[node];
        B->node_op = tg_function_node_op(P->f, node);
        B->steps = tg_profile_steps(bp);
        prof_info *Q = &B->P;
        Q->path = P->path;
        Q->f = tg_profile_function(bp);
        Q->p = bp;
        Q->n = tg_function_node_count(Q->f);
        Q->calls = (long)tg_profile_calls(bp);
        Q->preset = "fast_run";
        Q->tool = P->tool;
        Q->total_s = (double)tg_profile_total_ns(bp) * 1e-9;
        Q->nodes_s = (double)tg_profile_nodes_ns(bp) * 1e-9;
        tg_str path = {0};
        tg_str_addf(&path, "%s%s%s %s", ppath ? ppath : "", ppath ? " > " : "", B->node_opkey, B->node_key);
        B->path = path.s;
        Q->st = calloc((size_t)Q->n + 1, sizeof *Q->st);
        if (path.oom || !path.s || !Q->st || prof_opkeys(Q)) return -1;
        for (int k = 0; k < Q->n; k++) tg_profile_node_get(bp, k, &Q->st[k]);
        /* The array may move as it grows: its own copy of the rows. */
        prof_info here = *Q;
        if (add_bodies(&here, me, depth + 1, (*b)[me].path, b, nb, cap)) return -1;
    }
    return 0;
}

int prof_bodies(const prof_info *P, prof_body **out) {
    prof_body *b = NULL;
    int nb = 0, cap = 0;
    *out = NULL;
    if (add_bodies(P, -1, 0, NULL, &b, &nb, &cap)) {
        prof_bodies_free(b, nb);
        return -1;
    }
    *out = b;
    return nb;
}

void prof_bodies_free(prof_body *b, int n) {
    for (int i = 0; b && i < n; i++) {
        prof_opkeys_free(&b[i].P);
        free(b[i].P.st);
        tg_free(b[i].path);
    }
    free(b);
}
