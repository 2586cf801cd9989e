/* Gradient checking against central finite differences (Theano's
 * verify_grad): tg_check_grad compares the outputs of a gradient function
 * with differences of a cost function; tg_verify_grad builds both from a
 * function's first output f, cost = sum(f * r) with r a fixed random
 * projection, and a `grad` node. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "graph/graph.h"
#include "io/io.h"
#include "tensor/tensor.h"
#include "tg/function.h"
#include "tg/grad.h"

/* Step and tolerance by dtype: the step balances truncation (h^2) against
 * the rounding of the cost (eps / h). */
static double step_of(tg_dtype dt) { return dt == TG_FLOAT64 ? 1e-6 : dt == TG_FLOAT32 ? 3e-3 : 1e-1; }
static double tol_of(tg_dtype dt) { return dt == TG_FLOAT64 ? 1e-5 : dt == TG_FLOAT32 ? 1e-2 : 1e-1; }

/* The first output of f called on in, as a double. */
static int eval_cost(tg_function *f, tg_array *const *in, int nout, tg_array **out, double *c, tg_ctx *ctx) {
    for (int k = 0; k < nout; k++) out[k] = NULL;
    int rc = tg_function_call(f, in, out, ctx);
    if (!rc) {
        if (tg_array_size(out[0]) != 1)
            rc = tg_errorf(ctx, TG_ESHAPE, "check_grad: the cost has %lld elements; it must be a scalar",
                           (long long)tg_array_size(out[0]));
        else
            *c = tg_array_get_flat(out[0], 0);
    }
    for (int k = 0; k < nout; k++) tg_array_free(out[k]);
    return rc;
}

static void index_str(const tg_array *a, int64_t flat, char *buf, size_t size) {
    int64_t idx[TG_MAX_NDIM];
    for (int d = a->ndim - 1; d >= 0; d--) {
        idx[d] = a->shape[d] ? flat % a->shape[d] : 0;
        flat = a->shape[d] ? flat / a->shape[d] : 0;
    }
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < a->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

int tg_check_grad(tg_graph *g, const char *cost, const char *grads, tg_array *const *inputs, double rtol,
                  double atol, tg_ctx *ctx) {
    int rc = TG_OK, nin = 0, nout = 0, ngo = 0;
    tg_function *fc = NULL, *fg = NULL;
    tg_array **work = NULL, **outs = NULL, **gout = NULL;
    int ic = tg_graph_function_find(g, cost, ctx), ig = ic < 0 ? -1 : tg_graph_function_find(g, grads, ctx);
    if (ic < 0 || ig < 0) return ctx ? tg_ctx_status(ctx) : TG_ENOTFOUND;
    if (!(fc = tg_function_compile(g, ic, NULL, ctx)) || !(fg = tg_function_compile(g, ig, NULL, ctx))) {
        rc = ctx ? tg_ctx_status(ctx) : TG_ELOAD;
        goto done;
    }
    nin = tg_function_input_count(fc);
    nout = tg_function_output_count(fc);
    ngo = tg_function_output_count(fg);
    int nfloat = 0;
    for (int i = 0; i < nin; i++) nfloat += tg_dtype_is_float(tg_function_input_dtype(fc, i));
    if (nout < 1 || tg_function_input_count(fg) != nin || ngo != nfloat) {
        rc = tg_errorf(ctx, TG_EINVAL,
                       "check_grad: '%s' needs an output and '%s' the same %d inputs and one output per "
                       "float input (%d), got %d",
                       cost, grads, nin, nfloat, ngo);
        goto done;
    }
    work = tg_calloc((size_t)nin + 1, sizeof *work);
    outs = tg_calloc((size_t)(nout > ngo ? nout : ngo) + 1, sizeof *outs);
    gout = tg_calloc((size_t)ngo + 1, sizeof *gout);
    if (!work || !outs || !gout) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    /* Perturb contiguous copies in the dtype the function reads. */
    for (int i = 0; i < nin; i++) {
        tg_dtype dt = tg_function_input_dtype(fc, i);
        if (!(work[i] = tg_array_copy(inputs[i], tg_dtype_is_float(dt) ? dt : tg_array_dtype(inputs[i])))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
    }
    if ((rc = tg_function_call(fg, work, gout, ctx))) goto done;
    for (int i = 0, k = 0; i < nin && !rc; i++) {
        tg_dtype dt = tg_function_input_dtype(fc, i);
        if (!tg_dtype_is_float(dt)) continue;
        tg_array *x = work[i], *gx = gout[k++];
        const char *id = tg_function_input_id(fc, i);
        int64_t n = tg_array_size(x);
        if (tg_array_size(gx) != n) {
            rc = tg_errorf(ctx, TG_ESHAPE, "check_grad: the gradient of '%s' has %lld elements, the input %lld",
                           id, (long long)tg_array_size(gx), (long long)n);
            break;
        }
        double rt = rtol > 0 ? rtol : tol_of(dt), at = atol > 0 ? atol : tol_of(dt);
        size_t es = tg_dtype_size(dt);
        for (int64_t e = 0; e < n && !rc; e++) {
            char *p = (char *)x->data + e * (int64_t)es;
            double x0 = tg_load_f64(dt, p), h = step_of(dt) * fmax(1.0, fabs(x0)), cp, cm;
            /* The stored (rounded) points give the true width of the step. */
            tg_store_f64(dt, p, x0 + h);
            double xp = tg_load_f64(dt, p);
            rc = eval_cost(fc, work, nout, outs, &cp, ctx);
            tg_store_f64(dt, p, x0 - h);
            double xm = tg_load_f64(dt, p);
            if (!rc) rc = eval_cost(fc, work, nout, outs, &cm, ctx);
            tg_store_f64(dt, p, x0);
            if (rc) break;
            double num = (cp - cm) / (xp - xm), sym = tg_array_get_flat(gx, e);
            bool ok = fabs(sym - num) <= at + rt * fmax(fabs(sym), fabs(num));
            if (!ok || isnan(sym) != isnan(num)) {
                char where[128];
                index_str(x, e, where, sizeof where);
                rc = tg_errorf(ctx, TG_ERUNTIME,
                               "verify_grad: input '%s' element %s (flat %lld): symbolic gradient %.9g, finite "
                               "differences %.9g (rtol %g, atol %g)",
                               id, where, (long long)e, sym, num, rt, at);
            }
        }
    }
done:
    for (int i = 0; work && i < nin; i++) tg_array_free(work[i]);
    for (int k = 0; gout && k < ngo; k++) tg_array_free(gout[k]);
    tg_free(work);
    tg_free(outs);
    tg_free(gout);
    tg_function_free(fc);
    tg_function_free(fg);
    return rc;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static json_object *ids_array(int n, const char *const *ids) {
    json_object *a = json_object_new_array();
    for (int i = 0; a && i < n; i++) json_object_array_add(a, json_object_new_string(ids[i]));
    return a;
}

static json_object *node_json(const char *op, int nin, const char *const *in, int nout, const char *const *out) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "op", json_object_new_string(op));
    json_object_object_add(o, "inputs", ids_array(nin, in));
    json_object_object_add(o, "outputs", ids_array(nout, out));
    return o;
}

int tg_verify_grad(const char *graph_json, size_t len, const char *function, tg_array *const *inputs,
                   double rtol, double atol, uint64_t seed, tg_ctx *ctx) {
    int rc = TG_OK, nin = 0, nf = 0;
    tg_graph *g0 = NULL, *g1 = NULL;
    tg_function *fn = NULL;
    tg_array **outs = NULL, *f = NULL;
    json_object *root = NULL;
    char *text = NULL, **ids = NULL, **gids = NULL;
    const char **fids = NULL;
    /* Run the function once: r takes f's run-time shape and dtype. */
    if (!(g0 = tg_graph_load_string(graph_json, len, NULL, "verify_grad", ctx))) {
        rc = ctx ? tg_ctx_status(ctx) : TG_ELOAD;
        goto done;
    }
    int fi = tg_graph_function_find(g0, function, ctx);
    if (fi < 0 || !(fn = tg_function_compile(g0, fi, NULL, ctx))) {
        rc = ctx ? tg_ctx_status(ctx) : TG_ELOAD;
        goto done;
    }
    nin = tg_function_input_count(fn);
    int nout = tg_function_output_count(fn);
    if (nout < 1) {
        rc = tg_errorf(ctx, TG_EINVAL, "verify_grad: function '%s' has no output", tg_function_name(fn));
        goto done;
    }
    if (!(outs = tg_calloc((size_t)nout, sizeof *outs))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = tg_function_call(fn, inputs, outs, ctx))) goto done;
    f = outs[0];
    if (!tg_dtype_is_float(f->dtype)) {
        rc = tg_errorf(ctx, TG_ETYPE, "verify_grad: the first output '%s' is %s; it must be a float",
                       tg_function_output_id(fn, 0), tg_dtype_name(f->dtype));
        goto done;
    }
    ids = tg_calloc((size_t)nin + 1, sizeof *ids);
    gids = tg_calloc((size_t)nin + 1, sizeof *gids);
    fids = tg_calloc((size_t)nin + 2, sizeof *fids);
    text = tg_malloc(len + 1);
    if (!ids || !gids || !fids || !text) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    memcpy(text, graph_json, len);
    text[len] = 0;
    tg_json_fail jf;
    root = tg_json_parse_object(NULL, text, len, TG_JSON_DEPTH, &jf);
    if (!root) {
        rc = jf.status == TG_ENOMEM ? tg_errorf(ctx, TG_ENOMEM, "out of memory")
                                    : tg_errorf(ctx, TG_EPARSE, "verify_grad: the graph text is not a JSON object");
        goto done;
    }
    /* Fresh ids: prefixed until none clashes with the graph's. */
    char pre[64] = "vg";
    while (strstr(text, pre) && strlen(pre) < 48) strcat(pre, "_");
    char rid[96], frid[96], cid[96], fname_c[96], fname_g[96];
    snprintf(rid, sizeof rid, "%s.r", pre);
    snprintf(frid, sizeof frid, "%s.fr", pre);
    snprintf(cid, sizeof cid, "%s.cost", pre);
    snprintf(fname_c, sizeof fname_c, "%s_cost", pre);
    snprintf(fname_g, sizeof fname_g, "%s_grads", pre);
    fids[nf++] = cid;
    for (int i = 0; i < nin; i++) {
        ids[i] = (char *)tg_function_input_id(fn, i);
        if (!tg_dtype_is_float(tg_function_input_dtype(fn, i))) continue;
        char buf[96];
        snprintf(buf, sizeof buf, "%s.g%d", pre, i);
        if (!(gids[nf - 1] = tg_strdup(buf))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        fids[nf++] = ids[i];
    }
    /* r as a constant of f's shape. */
    json_object *var = json_object_new_object(), *type = json_object_new_object(),
                *shape = json_object_new_array(), *val = json_object_new_object();
    json_object *data = f->ndim ? json_object_new_array() : NULL;
    uint64_t s = seed;
    for (int d = 0; d < f->ndim; d++) json_object_array_add(shape, json_object_new_int64(f->shape[d]));
    for (int64_t e = 0, n = tg_array_size(f); e < n; e++) {
        double r = 0.5 + (double)(splitmix(&s) >> 11) / 9007199254740992.0;
        if (data) json_object_array_add(data, json_object_new_double(r));
        else data = json_object_new_double(r);
    }
    json_object_object_add(type, "dtype", json_object_new_string(tg_dtype_name(f->dtype)));
    json_object_object_add(type, "shape", shape);
    json_object_object_add(var, "id", json_object_new_string(rid));
    json_object_object_add(var, "type", type);
    json_object_object_add(val, "data", data);
    json_object_object_add(var, "constant", val);
    json_object *vars, *nodes, *funcs;
    if (!json_object_object_get_ex(root, "variables", &vars)) {
        vars = json_object_new_array();
        json_object_object_add(root, "variables", vars);
    }
    if (!json_object_object_get_ex(root, "nodes", &nodes)) {
        nodes = json_object_new_array();
        json_object_object_add(root, "nodes", nodes);
    }
    if (!json_object_object_get_ex(root, "functions", &funcs)) {
        funcs = json_object_new_object();
        json_object_object_add(root, "functions", funcs);
    }
    if (!json_object_is_type(vars, json_type_array) || !json_object_is_type(nodes, json_type_array) ||
        !json_object_is_type(funcs, json_type_object)) {
        json_object_put(var);
        rc = tg_errorf(ctx, TG_EPARSE, "verify_grad: variables, nodes or functions of the wrong JSON type");
        goto done;
    }
    json_object_array_add(vars, var);
    const char *fid = tg_function_output_id(fn, 0);
    const char *mul_in[2] = {fid, rid}, *sum_in[1] = {frid}, *cost_out[1] = {cid};
    json_object_array_add(nodes, node_json("mul", 2, mul_in, 1, (const char *const[]){frid}));
    json_object_array_add(nodes, node_json("sum", 1, sum_in, 1, cost_out));
    if (nf > 1) {
        json_object *gn = node_json("grad", nf, fids, nf - 1, (const char *const *)gids);
        json_object *attrs = json_object_new_object();
        /* An input f does not reach has a zero gradient, as its differences. */
        json_object_object_add(attrs, "disconnected", json_object_new_string("ignore"));
        json_object_object_add(gn, "attrs", attrs);
        json_object_array_add(nodes, gn);
    }
    json_object *fc = json_object_new_object(), *fg = json_object_new_object();
    json_object_object_add(fc, "inputs", ids_array(nin, (const char *const *)ids));
    json_object_object_add(fc, "outputs", ids_array(1, cost_out));
    json_object_object_add(fg, "inputs", ids_array(nin, (const char *const *)ids));
    json_object_object_add(fg, "outputs", ids_array(nf - 1, (const char *const *)gids));
    json_object_object_add(funcs, fname_c, fc);
    json_object_object_add(funcs, fname_g, fg);
    const char *out_text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    if (!(g1 = tg_graph_load_string(out_text, strlen(out_text), NULL, "verify_grad", ctx))) {
        rc = ctx ? tg_ctx_status(ctx) : TG_ELOAD;
        goto done;
    }
    rc = tg_check_grad(g1, fname_c, fname_g, inputs, rtol, atol, ctx);
done:
    for (int k = 0; outs && fn && k < tg_function_output_count(fn); k++) tg_array_free(outs[k]);
    for (int i = 0; gids && i < nin; i++) tg_free(gids[i]);
    tg_free(outs);
    tg_free(ids);
    tg_free(gids);
    tg_free(fids);
    tg_free(text);
    if (root) json_object_put(root);
    tg_function_free(fn);
    tg_graph_free(g0);
    tg_graph_free(g1);
    return rc;
}
