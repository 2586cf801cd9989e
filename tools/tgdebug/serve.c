/* tgdebug serve: the debugger on a local web page (DESIGN.md, "The web
 * UI"; docs/tgdebug-serve.md).
 *
 * The function runs on a worker thread. At a breakpoint hit the worker
 * blocks on a condition variable, holding references to the monitored
 * values, while libmicrohttpd's threads serve the state, the values (by
 * slice), the profile and the graph, and take continue / step / stop.
 * Everything the HTTP threads read is guarded by one mutex, which the
 * worker takes only to publish a hit, to update the profile's counters and
 * at call boundaries.
 *
 * Security: bound to 127.0.0.1 unless --bind says otherwise; a 128-bit
 * random token (from /dev/urandom) in the start-up URL, required on every
 * request (?token=, then a SameSite=Strict HttpOnly cookie, or an
 * X-Tgdebug-Token header), compared in constant time; the cookie named
 * after the port, so that two servers on one host do not replace each
 * other's; bound to a loopback address, a Host header that is not that
 * address or localhost is refused (DNS rebinding); a POST whose Origin is
 * not the page's own is refused; a fixed set of
 * routes (no file is ever read from disk); bounded URLs, query values and
 * bodies; state changes only by POST.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "debugger.h"
#include "model.h"
#include "profreport.h"
#include "tensor/tensor.h"
#include "vm/vm.h"

static const char *TOOL = "tgdebug serve";

/* The debugger page and d3 (tgdebug_assets.c, made at build time). */
extern const unsigned char tgdebug_html[], tgdebug_css[], tgdebug_js[], tgviz_d3[];
extern const size_t tgdebug_html_len, tgdebug_css_len, tgdebug_js_len, tgviz_d3_len;

/* Limits on what a request may carry. */
#define MAX_URL 2048         /* the path and the query string */
#define MAX_ARG 256          /* one query value */
#define MAX_BODY 4096        /* a request body (the control POSTs need none) */
#define MAX_SLICE_ELEMS 100000
#define TOKEN_HEX 32         /* 128 bits */

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgdebug serve FILE [-f NAME] [-i ID=VALUE]... [--calls N] [-O PRESET]\n"
            "                     [--include TAG]... [--exclude TAG]...\n"
            "                     [--break NODE [--when EXPR]]... [--port P] [--bind ADDR]\n"
            "\n"
            "Run a function of FILE on a worker thread and debug it from a local web\n"
            "page: pause at breakpoints (the graph's breakpoint ops and --break), look at\n"
            "the paused node's values by slice, step node by node, continue, stop; the\n"
            "graph (tgviz's page) and the profile, filled as the run goes.\n"
            "The start-up line prints the URL with its token; every request needs it.\n"
            "  -f NAME        the function (default: the only one, or 'main')\n"
            "  -i ID=VALUE    an input: a .npy file, an array of a .npz archive\n"
            "                 (FILE.npz or FILE.npz:NAME), or a JSON literal\n"
            "  -i FILE.npz    every input named by an array of the archive\n"
            "  --calls N      call the function N times (default 1)\n"
            "  -O PRESET      none, fast_compile or fast_run (default); not for a .tgf\n"
            "  --include TAG, --exclude TAG\n"
            "                 turn rewrites on or off beyond the preset (a pass, a group\n"
            "                 such as fusion or inplace, or a rewrite's name;\n"
            "                 repeatable); not for a .tgf\n"
            "  --break NODE   pause after NODE runs (a key or a name; see tgdebug run --help)\n"
            "  --when EXPR    only when EXPR holds ('max(abs(x))>1e3', 'any(isnan(x))', ...)\n"
            "  --port P       the TCP port (default 0: a free one)\n"
            "  --bind ADDR    the IPv4 address to listen on (default 127.0.0.1; 0.0.0.0\n"
            "                 exposes the debugger, token-protected, to the network)\n"
            "  --version      print the version\n"
            "\n"
            "Ctrl-C or SIGTERM ends the run and the server cleanly.\n"
            "Exit status: 0 served and shut down, 2 bad usage or bad input (or the port\n"
            "could not be bound).\n");
}

/* ---- the shared state ---- */

enum { ST_RUNNING, ST_PAUSED, ST_FINISHED, ST_ERROR };
enum { CMD_NONE, CMD_CONTINUE, CMD_STEP, CMD_STOP };

typedef struct server {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dbg d;
    dbg_session s;
    dbg_opts o;
    tg_profile *prof;
    prof_info pinfo; /* opkeys, filled once */
    int state;
    int cmd;
    bool stopped;
    bool quit; /* shutting down: a paused worker ends its run */
    long call, calls_done;
    char error[1024];
    dbg_hit *hit; /* while paused: the worker's hit (its values held) */
    uint64_t pause_seq; /* pauses so far */
    uint64_t run_ns, paused_ns;
    char token[TOKEN_HEX + 1];
    unsigned port; /* the port listened on (atomic: set once the daemon runs) */
    char *graph_json; /* tgviz's drawing data */
    char *graph_page; /* tgviz's page with it */
    size_t graph_page_len;
    json_object *outputs; /* stats of the outputs of the last call */
} server;

static uint64_t now_ns(void) { return tg_now_ns(); }

/* ---- the worker ---- */

static int pause_hit(dbg *d, dbg_hit *h, tg_ctx *ctx) {
    server *S = d->ud;
    tg_function *f = d->f;
    fprintf(stderr, "tgdebug: paused: call %ld, %s node %s (%s): %s\n", h->call, h->after ? "after" : "before",
            tg_function_node_key(f, h->node), tg_function_node_op(f, h->node), h->reason);
    pthread_mutex_lock(&S->mu);
    uint64_t t0 = now_ns();
    S->hit = h;
    S->state = ST_PAUSED;
    S->pause_seq++;
    pthread_cond_broadcast(&S->cv);
    while (S->cmd == CMD_NONE && !S->quit) pthread_cond_wait(&S->cv, &S->mu);
    int cmd = S->quit ? CMD_STOP : S->cmd;
    S->cmd = CMD_NONE;
    S->hit = NULL;
    S->state = ST_RUNNING;
    S->paused_ns += now_ns() - t0;
    pthread_mutex_unlock(&S->mu);
    /* Any pause satisfies a pending step (a breakpoint op's hit before
     * the next node is where the step was going); continue clears it. */
    d->step = cmd == CMD_STEP;
    if (cmd == CMD_STOP) {
        __atomic_store_n(&d->stop, 1, __ATOMIC_SEQ_CST);
        return tg_errorf(ctx, TG_ESTOPPED, "stopped by the debugger");
    }
    return 0;
}

static json_object *stats_json(const dbg_stats *st);

static void *worker(void *arg) {
    server *S = arg;
    tg_ctx *ctx = tg_ctx_new();
    long c = 1;
    for (; c <= S->o.calls; c++) {
        pthread_mutex_lock(&S->mu);
        S->call = c;
        uint64_t p0 = S->paused_ns;
        pthread_mutex_unlock(&S->mu);
        S->d.call = c;
        uint64_t t0 = now_ns();
        int rc = ctx ? dbg_session_call(&S->s, ctx) : TG_ENOMEM;
        uint64_t t1 = now_ns();
        pthread_mutex_lock(&S->mu);
        uint64_t paused = S->paused_ns - p0;
        S->run_ns += t1 - t0 > paused ? t1 - t0 - paused : 0;
        if (rc == 0) {
            S->calls_done = c;
            json_object_put(S->outputs);
            S->outputs = json_object_new_array();
            for (int k = 0; k < S->s.nout; k++) {
                if (!S->s.outs[k]) continue;
                dbg_stats st;
                dbg_stats_of(S->s.outs[k], &st);
                json_object *o = stats_json(&st);
                json_object_object_add(o, "id", json_object_new_string(tg_function_output_id(S->s.f, k)));
                json_object_array_add(S->outputs, o);
            }
        } else if (rc == TG_ESTOPPED || __atomic_load_n(&S->d.stop, __ATOMIC_SEQ_CST)) {
            S->stopped = true;
            S->state = ST_FINISHED;
        } else {
            snprintf(S->error, sizeof S->error, "call %ld: %s", c, ctx ? tg_ctx_message(ctx) : "out of memory");
            S->state = ST_ERROR;
        }
        bool end = rc != 0;
        pthread_mutex_unlock(&S->mu);
        if (end) break;
    }
    pthread_mutex_lock(&S->mu);
    if (S->state == ST_RUNNING) S->state = ST_FINISHED;
    if (S->state == ST_ERROR)
        fprintf(stderr, "tgdebug: the run failed: %s\n", S->error);
    else
        fprintf(stderr, "tgdebug: the run %s after %ld call%s, %ld hit%s\n", S->stopped ? "was stopped" : "finished",
                S->calls_done, S->calls_done == 1 ? "" : "s", S->d.hits, S->d.hits == 1 ? "" : "s");
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
    tg_ctx_free(ctx);
    return NULL;
}

/* ---- JSON helpers ---- */

/* JSON has no NaN or infinity: they are written as strings. */
static json_object *jnum(double v) {
    if (isnan(v)) return json_object_new_string("nan");
    if (isinf(v)) return json_object_new_string(v > 0 ? "inf" : "-inf");
    return json_object_new_double(v);
}

static json_object *stats_json(const dbg_stats *st) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "size", json_object_new_int64(st->n));
    json_object_object_add(o, "min", jnum(st->min));
    json_object_object_add(o, "max", jnum(st->max));
    json_object_object_add(o, "mean", jnum(st->mean));
    json_object_object_add(o, "nan", json_object_new_int64(st->nan));
    json_object_object_add(o, "inf", json_object_new_int64(st->inf));
    return o;
}

static json_object *shape_json(const tg_array *a) {
    json_object *s = json_object_new_array();
    for (int d = 0; d < a->ndim; d++) json_object_array_add(s, json_object_new_int64(a->shape[d]));
    return s;
}

static json_object *node_json(const tg_function *f, int k) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "key", json_object_new_string(tg_function_node_key(f, k)));
    json_object_object_add(o, "index", json_object_new_int(k));
    json_object_object_add(o, "op", json_object_new_string(tg_function_node_op(f, k)));
    json_object_object_add(o, "label", json_object_new_string(tg_function_node_label(f, k)));
    const char *const *keys;
    int n = tg_function_node_origins(f, k, &keys);
    json_object *a = json_object_new_array();
    json_object *gs = NULL;
    for (int i = 0; i < n; i++) {
        json_object_array_add(a, json_object_new_string(keys[i]));
        /* a key of a gradient's expansion: whose derivative it is */
        char t[400];
        tg_opt_record_grad_note(&f->record, keys + i, 1, t, sizeof t);
        if (*t) {
            if (!gs) gs = json_object_new_object();
            json_object_object_add(gs, keys[i], json_object_new_string(t));
        }
    }
    json_object_object_add(o, "origins", a);
    if (gs) json_object_object_add(o, "gradients", gs);
    char tr[512];
    tg_node_trace_str(f->sched[k].node, tr, sizeof tr);
    /* " [at model.py:4 in build: sq = x * x]" without its frame */
    char *t = tr;
    size_t len = strlen(t);
    if (len >= 3 && t[0] == ' ' && t[1] == '[' && t[len - 1] == ']') {
        t[len - 1] = 0;
        t += 2;
    }
    json_object_object_add(o, "trace", json_object_new_string(t));
    return o;
}

static const char *state_name(int s) {
    return s == ST_RUNNING ? "running" : s == ST_PAUSED ? "paused" : s == ST_FINISHED ? "finished" : "error";
}

/* The state in a sentence: "the run %s". */
static const char *run_is(int s) {
    return s == ST_RUNNING ? "is running" : s == ST_PAUSED ? "is paused" : s == ST_FINISHED ? "is finished" : "failed";
}

/* Caller holds S->mu. */
static json_object *state_json(server *S) {
    tg_function *f = S->s.f;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "state", json_object_new_string(state_name(S->state)));
    json_object_object_add(o, "file", json_object_new_string(S->o.path));
    json_object_object_add(o, "function", json_object_new_string(tg_function_name(f)));
    json_object_object_add(o, "call", json_object_new_int64(S->call));
    json_object_object_add(o, "calls", json_object_new_int64(S->o.calls));
    json_object_object_add(o, "calls_done", json_object_new_int64(S->calls_done));
    json_object_object_add(o, "hits", json_object_new_int64(__atomic_load_n(&S->d.hits, __ATOMIC_RELAXED)));
    json_object_object_add(o, "pauses", json_object_new_int64((int64_t)S->pause_seq));
    json_object_object_add(o, "stopped", json_object_new_boolean(S->stopped));
    json_object_object_add(o, "error", S->state == ST_ERROR ? json_object_new_string(S->error) : NULL);
    if (S->state == ST_PAUSED && S->hit) {
        dbg_hit *h = S->hit;
        json_object_object_add(o, "node", node_json(f, h->node));
        json_object_object_add(o, "when", json_object_new_string(h->after ? "after" : "before"));
        json_object_object_add(o, "reason", json_object_new_string(h->reason));
        json_object *vals = json_object_new_array();
        for (int i = 0; i < h->nvals; i++) {
            const dbg_value *v = &h->vals[i];
            json_object *vo = stats_json(&v->st);
            json_object_object_add(vo, "name", json_object_new_string(v->name));
            json_object_object_add(vo, "id", json_object_new_string(v->id ? v->id : ""));
            json_object_object_add(vo, "kind", json_object_new_string(v->is_out ? "out" : "in"));
            json_object_object_add(vo, "index", json_object_new_int(v->index));
            json_object_object_add(vo, "dtype", json_object_new_string(tg_dtype_name(v->a->dtype)));
            json_object_object_add(vo, "shape", shape_json(v->a));
            json_object_array_add(vals, vo);
        }
        json_object_object_add(o, "values", vals);
    } else {
        json_object_object_add(o, "node", NULL);
        json_object_object_add(o, "values", json_object_new_array());
    }
    json_object *bps = json_object_new_array();
    for (int i = 0; i < S->d.nbps; i++) {
        dbg_bp *b = &S->d.bps[i];
        json_object *bo = json_object_new_object();
        json_object_object_add(bo, "node", json_object_new_string(b->spec));
        json_object_object_add(bo, "when", b->when ? json_object_new_string(b->when) : NULL);
        json_object *ks = json_object_new_array();
        for (int j = 0; j < b->nnodes; j++)
            json_object_array_add(ks, json_object_new_string(tg_function_node_key(f, b->nodes[j])));
        json_object_object_add(bo, "scheduled", ks);
        json_object_object_add(bo, "note", json_object_new_string(b->note));
        json_object_object_add(bo, "hits", json_object_new_int64(__atomic_load_n(&b->hits, __ATOMIC_RELAXED)));
        json_object_array_add(bps, bo);
    }
    json_object_object_add(o, "breakpoints", bps);
    json_object_object_add(o, "outputs", S->outputs ? json_object_get(S->outputs) : json_object_new_array());
    return o;
}

/* Caller holds S->mu: the profile's counters are written under it. */
static json_object *profile_json(server *S) {
    prof_info *P = &S->pinfo;
    for (int k = 0; k < P->n; k++) tg_profile_node_get(S->prof, k, &P->st[k]);
    P->calls = S->call > 0 ? S->call : 1; /* calls started: the report fills as the run goes */
    P->warmup = 0;
    P->nodes_s = (double)tg_profile_nodes_ns(S->prof) * 1e-9;
    P->total_s = (double)S->run_ns * 1e-9;
    if (P->total_s < P->nodes_s) P->total_s = P->nodes_s; /* the running call is not in run_ns yet */
    tg_profile_memory mem;
    if (tg_profile_memory_get(S->prof, &mem, NULL)) return NULL;
    return prof_report_json(P, &mem);
}

/* ---- slices ---- */

typedef struct dim_sel {
    int64_t start, step, count;
    bool keep; /* a slice keeps the axis; an integer drops it */
} dim_sel;

static bool parse_i64(const char *s, const char *e, int64_t *out) {
    while (s < e && *s == ' ') s++;
    while (e > s && e[-1] == ' ') e--;
    if (s == e) return false;
    char buf[32];
    if ((size_t)(e - s) >= sizeof buf) return false;
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end || errno) return false;
    *out = v;
    return true;
}

static bool blank(const char *s, const char *e) {
    for (; s < e; s++)
        if (*s != ' ') return false;
    return true;
}

/* NumPy's basic indexing: "i", "start:stop", "start:stop:step" per axis,
 * parts optional, negatives from the end; missing axes are whole; one
 * trailing comma allowed (a[1,] is a[1]). Blank is the whole value. */
static bool slice_parse(const char *text, const tg_array *a, dim_sel *sel, char *err, size_t errsize) {
    int ax = 0;
    const char *p = text;
    for (int d = 0; d < a->ndim; d++) sel[d] = (dim_sel){0, 1, a->shape[d], true};
    if (blank(text, text + strlen(text))) return true;
    for (;;) {
        const char *e = strchr(p, ',');
        if (!e) e = p + strlen(p);
        if (ax >= a->ndim) {
            snprintf(err, errsize, "slice '%s': too many indices for a %d-dimensional value", text, a->ndim);
            return false;
        }
        int64_t n = a->shape[ax];
        const char *c1 = memchr(p, ':', (size_t)(e - p));
        if (!c1) {
            int64_t i;
            if (!parse_i64(p, e, &i)) {
                snprintf(err, errsize, "slice '%s': axis %d: expected an integer or start:stop:step, got '%.*s'", text,
                         ax, (int)(e - p), p);
                return false;
            }
            if (i < -n || i >= n) {
                snprintf(err, errsize, "slice '%s': index %lld is out of bounds for axis %d with size %lld", text,
                         (long long)i, ax, (long long)n);
                return false;
            }
            sel[ax] = (dim_sel){i < 0 ? i + n : i, 1, 1, false};
        } else {
            const char *c2 = memchr(c1 + 1, ':', (size_t)(e - c1 - 1));
            const char *parts[3][2] = {{p, c1}, {c1 + 1, c2 ? c2 : e}, {c2 ? c2 + 1 : e, e}};
            int64_t v[3];
            bool given[3];
            for (int k = 0; k < 3; k++) {
                given[k] = !blank(parts[k][0], parts[k][1]);
                if (given[k] && !parse_i64(parts[k][0], parts[k][1], &v[k])) {
                    snprintf(err, errsize, "slice '%s': axis %d: '%.*s' is not an integer", text, ax,
                             (int)(parts[k][1] - parts[k][0]), parts[k][0]);
                    return false;
                }
            }
            if (c2 && memchr(c2 + 1, ':', (size_t)(e - c2 - 1))) {
                snprintf(err, errsize, "slice '%s': axis %d: at most start:stop:step", text, ax);
                return false;
            }
            int64_t step = given[2] ? v[2] : 1;
            if (step == 0) {
                snprintf(err, errsize, "slice '%s': axis %d: the step cannot be zero", text, ax);
                return false;
            }
            int64_t start, stop;
            if (step > 0) {
                start = given[0] ? v[0] : 0;
                stop = given[1] ? v[1] : n;
                if (start < 0) start = start + n < 0 ? 0 : start + n;
                if (start > n) start = n;
                if (stop < 0) stop = stop + n < 0 ? 0 : stop + n;
                if (stop > n) stop = n;
                /* 1 + (span - 1) / step: no overflow, whatever the step */
                sel[ax] = (dim_sel){start, step, stop > start ? 1 + (stop - start - 1) / step : 0, true};
            } else {
                start = given[0] ? v[0] : n - 1;
                stop = given[1] ? v[1] : -1 - n; /* before the first element */
                if (start < 0) start = start + n < 0 ? -1 : start + n;
                if (start >= n) start = n - 1;
                if (stop < 0) stop = stop + n < 0 ? -1 : stop + n;
                if (stop >= n) stop = n - 1;
                if (step == INT64_MIN) step = -INT64_MAX; /* -step must exist; one element either way */
                sel[ax] = (dim_sel){start, step, start > stop ? 1 + (start - stop - 1) / -step : 0, true};
            }
        }
        ax++;
        if (!*e) break;
        p = e + 1;
        if (blank(p, p + strlen(p))) break;
    }
    return true;
}

static void put_elem(tg_str *s, tg_dtype dt, const char *p) {
    char k = tg_dtype_kind(dt);
    if (k == 'b') {
        tg_str_addf(s, "%s", tg_load_i64(dt, p) ? "true" : "false");
    } else if (k == 'u') {
        tg_str_addf(s, "%llu", (unsigned long long)tg_load_i64(dt, p));
    } else if (k == 'i') {
        tg_str_addf(s, "%lld", (long long)tg_load_i64(dt, p));
    } else {
        double v = tg_load_f64(dt, p);
        if (isnan(v))
            tg_str_addf(s, "\"nan\"");
        else if (isinf(v))
            tg_str_addf(s, v > 0 ? "\"inf\"" : "\"-inf\"");
        else
            tg_str_addf(s, tg_dtype_size(dt) <= 4 ? "%.9g" : "%.17g", v);
    }
}

/* Nested lists of the selected elements, axis by axis. */
static void put_slice(tg_str *s, const tg_array *a, const dim_sel *sel, int ax, const char *p) {
    if (ax == a->ndim) {
        put_elem(s, a->dtype, p);
        return;
    }
    const dim_sel *d = &sel[ax];
    if (!d->keep) {
        put_slice(s, a, sel, ax + 1, p + d->start * a->strides[ax]);
        return;
    }
    tg_str_add(s, "[", 1);
    for (int64_t i = 0; i < d->count; i++) {
        if (i) tg_str_add(s, ",", 1);
        put_slice(s, a, sel, ax + 1, p + (d->start + i * d->step) * a->strides[ax]);
    }
    tg_str_add(s, "]", 1);
}

/* ---- HTTP ---- */

typedef struct request {
    size_t body;
    bool started; /* the headers were read */
    const char *uri_end; /* where the URI as sent stops as a C string */
} request;

typedef struct reply {
    int status;
    char *body; /* malloc'd */
    size_t len;
    const char *type;
    bool is_static; /* body points into the binary */
    const char *csp;
    const char *allow; /* a 405's Allow header */
    char disposition[192]; /* a download's Content-Disposition, or "" */
} reply;

static void reply_json(reply *r, int status, json_object *o) {
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    r->status = status;
    r->body = strdup(s ? s : "{}");
    r->len = r->body ? strlen(r->body) : 0;
    r->type = "application/json";
    json_object_put(o);
}

/* The length of the UTF-8 sequence at s (1 to 4), or 0 where none starts
 * (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
 * a sequence cut short). */
static int utf8_len(const char *p) {
    const unsigned char *s = (const unsigned char *)p;
    int n = s[0] < 0x80 ? 1 : s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0; /* (stops at the NUL) */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

/* How many bytes of s, at most max, end at a character's end: for "%.*s"
 * of what a client sent, which must not cut a character in two. */
static int utf8_prefix(const char *s, int max) {
    int n = 0;
    while (s[n]) {
        int k = utf8_len(s + n);
        if (!k) k = 1;
        if (n + k > max) break;
        n += k;
    }
    return n;
}

static void reply_error(reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_error(reply *r, int status, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The body is JSON, which is UTF-8: a byte of what the client sent
     * (node=%ff, a Host) that is not, or a character the message was cut
     * in, becomes '?'. json-c writes bytes as they are. */
    for (char *p = msg; *p;) {
        int k = utf8_len(p);
        if (!k) *p = '?';
        p += k ? k : 1;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "error", json_object_new_string(msg));
    reply_json(r, status, o);
}

static void reply_static(reply *r, const unsigned char *data, size_t len, const char *type) {
    r->status = MHD_HTTP_OK;
    r->body = (char *)data;
    r->len = len;
    r->type = type;
    r->is_static = true;
}

/* Whether the request's Host is this server's: bound to a loopback
 * address, "localhost" or that address, with our port or none; bound to any
 * other address (exposed on purpose), any Host. A page that DNS rebinding
 * pointed here was loaded under another name, which its requests carry. */
static bool host_ok(const server *S, const char *host, unsigned port) {
    /* (no Host: an HTTP/1.0 client; a browser always sends one) */
    if (strncmp(S->o.bind, "127.", 4) || !host) return true;
    const char *colon = strrchr(host, ':');
    size_t n = colon ? (size_t)(colon - host) : strlen(host);
    if (colon) {
        char want[16];
        snprintf(want, sizeof want, "%u", port);
        if (strcmp(colon + 1, want)) return false;
    }
    return (n == 9 && !strncasecmp(host, "localhost", 9)) || (n == strlen(S->o.bind) && !strncmp(host, S->o.bind, n));
}

/* A POST from a page: its Origin, when the browser sends one, must be
 * http:// and the Host it was sent to (another site's page posting here,
 * or a sandboxed one with Origin "null", is refused). */
static bool origin_ok(const char *origin, const char *host) {
    if (!origin) return true;
    return host && !strncmp(origin, "http://", 7) && !strcmp(origin + 7, host);
}

/* Constant-time comparison with the token: the time does not depend on
 * where a wrong token differs. */
static bool token_ok(const server *S, const char *got) {
    if (!got) return false;
    size_t n = strnlen(got, TOKEN_HEX + 1);
    unsigned char diff = n != TOKEN_HEX;
    for (size_t i = 0; i < TOKEN_HEX; i++) diff |= (unsigned char)((i < n ? got[i] : 0) ^ S->token[i]);
    return diff == 0;
}

static const char *arg(struct MHD_Connection *c, const char *k) {
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, k);
}

/* Every query value is bounded; false (with the reply set) otherwise. */
static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    bool *bad = cls;
    if ((key && strlen(key) > 32) || (value && strlen(value) > MAX_ARG)) {
        *bad = true;
        return MHD_NO;
    }
    return MHD_YES;
}

/* The held value that node=KEY and out=J (or in=J) name: with S->mu
 * locked, or NULL with the mutex unlocked and the error reply set.
 * `what` starts the errors. */
static const dbg_value *held_value(server *S, struct MHD_Connection *c, reply *r, const char *what,
                                   const char **node_out) {
    const char *node = arg(c, "node"), *out = arg(c, "out"), *in = arg(c, "in");
    int64_t j = 0;
    const char *js = out ? out : in ? in : "0";
    if (!node || !*node) {
        reply_error(r, 400, "%s: give node=KEY (and out=J or in=J, slice=...)", what);
        return NULL;
    }
    if (out && in) {
        reply_error(r, 400, "%s: give out=J or in=J, not both", what);
        return NULL;
    }
    if (!parse_i64(js, js + strlen(js), &j) || j < 0) {
        reply_error(r, 400, "%s: %s=%s: expected an index >= 0", what, in ? "in" : "out", js);
        return NULL;
    }
    bool want_out = !in;
    pthread_mutex_lock(&S->mu);
    tg_function *f = S->s.f;
    int k = -1;
    for (int i = 0; i < f->nsched && k < 0; i++)
        if (!strcmp(tg_function_node_key(f, i), node)) k = i;
    char msg[600];
    int status = 0;
    const dbg_value *v = NULL;
    if (k < 0) {
        status = 404;
        snprintf(msg, sizeof msg, "%s: function '%s' has no scheduled node '%s'", what, tg_function_name(f), node);
    } else if (S->state != ST_PAUSED || !S->hit) {
        status = 409;
        snprintf(msg, sizeof msg, "%s: the run %s: values are served while it is paused", what, run_is(S->state));
    } else if (S->hit->node != k) {
        status = 409;
        snprintf(msg, sizeof msg, "%s: node %s is not the paused node (%s): only its values are held", what, node,
                 tg_function_node_key(f, S->hit->node));
    } else {
        dbg_hit *h = S->hit;
        for (int i = 0; i < h->nvals && !v; i++)
            if (h->vals[i].is_out == want_out && h->vals[i].index == j) v = &h->vals[i];
        int nio = want_out ? tg_function_node_noutputs(f, k) : tg_function_node_ninputs(f, k);
        if (!v && j >= nio) {
            status = 400;
            snprintf(msg, sizeof msg, "%s: node %s has %d %s%s", what, node, nio, want_out ? "output" : "input",
                     nio == 1 ? "" : "s");
        } else if (!v) {
            status = 409;
            snprintf(msg, sizeof msg, "%s: %s%lld of node %s is not held %s", what, want_out ? "out" : "in",
                     (long long)j, node,
                     h->after ? "" : "(paused before the node ran: its outputs are its inputs 1..n)");
        }
    }
    if (!v) {
        pthread_mutex_unlock(&S->mu);
        reply_error(r, status, "%s", msg);
        return NULL;
    }
    *node_out = node;
    return v;
}

static void route_value(server *S, struct MHD_Connection *c, reply *r) {
    const char *slice = arg(c, "slice"), *node = NULL;
    const dbg_value *v = held_value(S, c, r, "value", &node);
    if (!v) return;
    dbg_hit *h = S->hit;
    bool want_out = v->is_out;
    int64_t j = v->index;
    const tg_array *a = v->a;
    dim_sel sel[TG_MAX_NDIM];
    char err[400];
    if (!slice_parse(slice ? slice : "", a, sel, err, sizeof err)) {
        pthread_mutex_unlock(&S->mu);
        return reply_error(r, 400, "value: %s", err);
    }
    int64_t total = 1;
    for (int d = 0; d < a->ndim; d++) total *= sel[d].count;
    if (total > MAX_SLICE_ELEMS) {
        pthread_mutex_unlock(&S->mu);
        return reply_error(r, 400, "value: the slice has %lld elements, more than %d: narrow it (slice=0:10,...)",
                           (long long)total, MAX_SLICE_ELEMS);
    }
    tg_str s = {0};
    tg_str_addf(&s, "{\"node\":");
    json_object *tmp = json_object_new_string(node);
    tg_str_addf(&s, "%s", json_object_to_json_string(tmp));
    json_object_put(tmp);
    tg_str_addf(&s, ",\"%s\":%lld,\"name\":\"%s\",\"dtype\":\"%s\",\"shape\":[", want_out ? "out" : "in",
                (long long)j, v->name, tg_dtype_name(a->dtype));
    for (int d = 0; d < a->ndim; d++) tg_str_addf(&s, "%s%lld", d ? "," : "", (long long)a->shape[d]);
    tg_str_addf(&s, "],\"slice_shape\":[");
    int nk = 0;
    for (int d = 0; d < a->ndim; d++)
        if (sel[d].keep) tg_str_addf(&s, "%s%lld", nk++ ? "," : "", (long long)sel[d].count);
    tmp = json_object_new_string(slice ? slice : "");
    tg_str_addf(&s, "],\"slice\":%s,\"call\":%ld,\"data\":", json_object_to_json_string(tmp), h->call);
    json_object_put(tmp);
    put_slice(&s, a, sel, 0, a->data);
    tg_str_addf(&s, "}");
    pthread_mutex_unlock(&S->mu);
    if (s.oom || !s.s) {
        tg_str_free(&s);
        return reply_error(r, 500, "out of memory");
    }
    r->status = 200;
    r->body = strdup(s.s);
    r->len = r->body ? s.len : 0;
    r->type = "application/json";
    tg_str_free(&s);
}

/* The whole held value as a .npy file (C order, little-endian), to load
 * in NumPy: copied while paused (under the lock), sent after. */
static void route_value_npy(server *S, struct MHD_Connection *c, reply *r) {
    const char *node = NULL;
    const dbg_value *v = held_value(S, c, r, "value.npy", &node);
    if (!v) return;
    /* Copied under the lock: once the run goes on, the VM may overwrite
     * the buffer in place. */
    const tg_array *a = v->a;
    /* The key cut at 128 bytes (an id's limit; a rewritten node's key can
     * be longer), never the _outJ that tells a node's values apart. */
    char fname[144];
    int n = snprintf(fname, sizeof fname, "%.128s_%s%d", node, v->is_out ? "out" : "in", v->index);
    tg_str hdr = {0};
    size_t nbytes = (size_t)tg_array_size(a) * tg_dtype_size(a->dtype);
    tg_array *cont = tg_array_is_contiguous(a) ? NULL : tg_array_copy(a, a->dtype);
    const tg_array *src = cont ? cont : a;
    char *body = NULL;
    if ((cont || tg_array_is_contiguous(a)) && tg_npy_header(a, &hdr) == TG_OK &&
        (body = malloc(hdr.len + nbytes + 1))) {
        memcpy(body, hdr.s, hdr.len);
        if (nbytes) memcpy(body + hdr.len, src->data, nbytes);
        tg_npy_to_le(body + hdr.len, tg_array_size(a), tg_dtype_size(a->dtype));
    }
    pthread_mutex_unlock(&S->mu);
    tg_array_free(cont);
    /* A file name of letters, digits, '.', '_' and '-': ids may hold anything. */
    for (int i = 0; i < n && fname[i]; i++)
        if (!isalnum((unsigned char)fname[i]) && !strchr("._-", fname[i])) fname[i] = '_';
    if (!body) {
        tg_str_free(&hdr);
        return reply_error(r, 500, "value.npy: out of memory for %zu bytes", nbytes);
    }
    r->status = 200;
    r->body = body;
    r->len = hdr.len + nbytes;
    r->type = "application/octet-stream";
    snprintf(r->disposition, sizeof r->disposition, "attachment; filename=\"%s.npy\"", fname);
    tg_str_free(&hdr);
}

static void route_control(server *S, const char *what, reply *r) {
    pthread_mutex_lock(&S->mu);
    int st = S->state;
    bool ok = true;
    if (!strcmp(what, "stop")) {
        if (st == ST_PAUSED)
            S->cmd = CMD_STOP;
        else if (st == ST_RUNNING)
            __atomic_store_n(&S->d.stop, 1, __ATOMIC_SEQ_CST);
        else
            ok = false;
    } else if (st == ST_PAUSED) {
        S->cmd = !strcmp(what, "step") ? CMD_STEP : CMD_CONTINUE;
    } else {
        ok = false;
    }
    uint64_t seq = S->pause_seq;
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
    if (!ok) return reply_error(r, 409, "%s: the run %s", what, run_is(st));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "ok", json_object_new_boolean(true));
    json_object_object_add(o, "pauses", json_object_new_int64((int64_t)seq));
    reply_json(r, 200, o);
}

static const char *CSP_PAGE = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                              "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
/* tgviz's page inlines its scripts and styles (it is also a file on its own). */
static const char *CSP_GRAPH = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                               "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

static void route(server *S, struct MHD_Connection *c, const char *url, const char *method, reply *r) {
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    static const char *const gets[] = {"/", "/index.html", "/tgdebug.js", "/tgdebug.css", "/d3.js", "/graph",
                                       "/api/graph", "/api/profile", "/api/state", "/api/value", "/api/value.npy",
                                       NULL};
    static const char *const posts[] = {"/api/continue", "/api/step", "/api/stop", NULL};
    int gi = -1, pi = -1;
    for (int i = 0; gets[i]; i++)
        if (!strcmp(url, gets[i])) gi = i;
    for (int i = 0; posts[i]; i++)
        if (!strcmp(url, posts[i])) pi = i;
    if (gi < 0 && pi < 0) return reply_error(r, 404, "no such page: the debugger serves a fixed set of routes");
    if ((gi >= 0 && !get) || (pi >= 0 && !post)) {
        r->allow = gi >= 0 ? "GET, HEAD" : "POST";
        return reply_error(r, 405, "%.*s is not allowed on %s (only %s)", utf8_prefix(method, 16), method, url,
                           r->allow);
    }
    if (pi >= 0) return route_control(S, posts[pi] + 5, r);
    switch (gi) {
    case 0:
    case 1:
        reply_static(r, tgdebug_html, tgdebug_html_len, "text/html; charset=utf-8");
        r->csp = CSP_PAGE;
        return;
    case 2: return reply_static(r, tgdebug_js, tgdebug_js_len, "text/javascript; charset=utf-8");
    case 3: return reply_static(r, tgdebug_css, tgdebug_css_len, "text/css; charset=utf-8");
    case 4: return reply_static(r, tgviz_d3, tgviz_d3_len, "text/javascript; charset=utf-8");
    case 5:
        reply_static(r, (const unsigned char *)S->graph_page, S->graph_page_len, "text/html; charset=utf-8");
        r->csp = CSP_GRAPH;
        return;
    case 6:
        r->status = 200;
        r->body = strdup(S->graph_json);
        r->len = r->body ? strlen(r->body) : 0;
        r->type = "application/json";
        return;
    case 7: {
        pthread_mutex_lock(&S->mu);
        json_object *o = profile_json(S);
        pthread_mutex_unlock(&S->mu);
        if (!o) return reply_error(r, 500, "out of memory");
        return reply_json(r, 200, o);
    }
    case 8: {
        pthread_mutex_lock(&S->mu);
        json_object *o = state_json(S);
        pthread_mutex_unlock(&S->mu);
        return reply_json(r, 200, o);
    }
    case 9: return route_value(S, c, r);
    default: return route_value_npy(S, c, r);
    }
}

static enum MHD_Result send_reply(struct MHD_Connection *c, reply *r, const char *cookie) {
    if (!r->body && !r->is_static) {
        r->body = strdup("{\"error\":\"out of memory\"}");
        r->len = r->body ? strlen(r->body) : 0;
        r->status = 500;
        r->type = "application/json";
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r->len, r->body ? r->body : (char *)"", r->is_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        if (!r->is_static) free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", r->type ? r->type : "application/json");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    if (r->csp) MHD_add_response_header(resp, "Content-Security-Policy", r->csp);
    if (cookie) MHD_add_response_header(resp, "Set-Cookie", cookie);
    if (r->allow) MHD_add_response_header(resp, "Allow", r->allow);
    if (r->disposition[0]) MHD_add_response_header(resp, "Content-Disposition", r->disposition);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

typedef struct header_count {
    const char *name;
    int n;
} header_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind, (void)value;
    header_count *h = cls;
    if (key && !strcasecmp(key, h->name)) h->n++;
    return MHD_YES;
}

/* How many times the request sent header `name` (libmicrohttpd's lookup
 * finds the first only). */
static int headers_named(struct MHD_Connection *c, const char *name) {
    header_count h = {name, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &h);
    return h.n;
}

/* libmicrohttpd 0.9.75 cuts the request line "METHOD URI VERSION" into C
 * strings in place (a NUL where each space was) and hands on the URI as a
 * C string: a raw NUL byte in it ("POST /api/stop\0x HTTP/1.1") would cut
 * it short to a route's name. Here, before the query is split off or
 * anything decoded, is where the URI stops as a C string; handle() checks
 * that the version follows right after. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)cls, (void)c;
    request *rq = calloc(1, sizeof *rq);
    if (rq && uri) rq->uri_end = uri + strlen(uri);
    return rq;
}

/* Whether the URI held a NUL: it stopped before the NUL that ends it, which
 * the version follows in the same line (of at most the connection's 32 KiB:
 * a version anywhere else, in a library that lays the line out otherwise,
 * is no sign of one). */
static bool uri_cut(const request *rq, const char *version) {
    uintptr_t e = (uintptr_t)rq->uri_end, v = (uintptr_t)version;
    return rq->uri_end && *version && v > e + 1 && v - e < 32 * 1024;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    server *S = cls;
    request *rq = *con_cls;
    reply r = {0};
    if (!rq || !rq->started) {
        /* Headers read: decide what can be decided before any body. */
        if (!rq && !(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *con_cls = rq;
        rq->started = true;
        if (uri_cut(rq, version)) {
            reply_error(&r, 400, "the request line holds a NUL byte");
            return send_reply(c, &r, NULL);
        }
        /* RFC 9112 (3.2, 6.3): 400 for more than one Host (only the first
         * would be checked against DNS rebinding) or Content-Length (which
         * one says where the body ends?). */
        static const char *const once[] = {"Host", "Content-Length"};
        for (int i = 0; i < 2; i++)
            if (headers_named(c, once[i]) > 1) {
                reply_error(&r, 400, "the request has more than one %s header", once[i]);
                return send_reply(c, &r, NULL);
            }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && (strlen(cl) > 9 || strtoul(cl, NULL, 10) > MAX_BODY)) {
            reply_error(&r, 413, "the request body is larger than %d bytes", MAX_BODY);
            return send_reply(c, &r, NULL);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        (void)upload_data;
        rq->body += *upload_data_size;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rq->body > MAX_BODY) {
        reply_error(&r, 413, "the request body is larger than %d bytes", MAX_BODY);
        return send_reply(c, &r, NULL);
    }
    /* The token first: without it nothing is revealed, not even 404. */
    unsigned port = __atomic_load_n(&S->port, __ATOMIC_ACQUIRE);
    char cname[32];
    snprintf(cname, sizeof cname, "tgdebug_token_%u", port);
    const char *qt = arg(c, "token");
    bool via_query = token_ok(S, qt);
    if (!via_query && !token_ok(S, MHD_lookup_connection_value(c, MHD_COOKIE_KIND, cname)) &&
        !token_ok(S, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Tgdebug-Token"))) {
        reply_error(&r, 403, "forbidden: open the URL with the token that tgdebug serve printed");
        return send_reply(c, &r, NULL);
    }
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (!host_ok(S, host, port)) {
        reply_error(&r, 403, "forbidden: Host '%.*s' is not this server (use http://%s:%u/)", utf8_prefix(host, 64),
                    host, S->o.bind, port);
        return send_reply(c, &r, NULL);
    }
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!strcmp(method, "POST") && !origin_ok(origin, host)) {
        reply_error(&r, 403, "forbidden: a POST from another origin ('%.*s')", utf8_prefix(origin, 64), origin);
        return send_reply(c, &r, NULL);
    }
    bool bad = false;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, check_arg, &bad);
    if (bad || strlen(url) > MAX_URL) {
        reply_error(&r, 400, "the URL or one of its query values is too long");
        return send_reply(c, &r, NULL);
    }
    route(S, c, url, method, &r);
    /* A page opened with ?token= gets a cookie that carries the token on
     * its own requests. */
    char cookie[128];
    snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict", cname, S->token);
    return send_reply(c, &r, via_query && r.status == 200 ? cookie : NULL);
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding of the path and query values, in place. "%00" stays
 * as written: a NUL would cut "/%00anything" short to a route's name. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls, (void)c;
    char *w = s;
    for (const char *r = s; *r; r++) {
        int hi, lo;
        if (*r == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 && (hi || lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
    return (size_t)(w - s);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    free(*con_cls);
    *con_cls = NULL;
}

/* ---- start-up ---- */

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) {
        /* the pipe is full: a signal is already waiting */
    }
    errno = saved;
}

static int make_token(char *out) {
    unsigned char b[TOKEN_HEX / 2];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = read(fd, b + got, sizeof b - got);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            close(fd);
            return -1;
        }
        got += (size_t)n;
    }
    close(fd);
    for (size_t i = 0; i < sizeof b; i++) sprintf(out + 2 * i, "%02x", b[i]);
    out[TOKEN_HEX] = 0;
    return 0;
}

/* tgviz's drawing of the function (optimized, and as written when the
 * file is a graph) and its page. */
static int make_graph(server *S, tg_ctx *ctx) {
    GVC_t *gvc = gvContext();
    vz_graph vo = {0}, vr = {0};
    int rc = -1;
    json_object *data = json_object_new_object();
    json_object_object_add(data, "tool", json_object_new_string("tgdebug"));
    json_object_object_add(data, "version", json_object_new_string(tg_version()));
    json_object_object_add(data, "file", json_object_new_string(S->o.path));
    json_object_object_add(data, "function", json_object_new_string(tg_function_name(S->s.f)));
    json_object *views = json_object_new_object();
    json_object_object_add(data, "views", views);
    if (S->s.g) {
        int fi = tg_graph_function_find(S->s.g, tg_function_name(S->s.f), ctx);
        vz_init(&vr, "original", true);
        vz_from_graph(&vr, S->s.g, fi, ctx);
        json_object *vj = json_object_new_object();
        if (vz_layout(&vr, gvc, vj, ctx)) {
            json_object_put(vj);
            goto done;
        }
        json_object_object_add(vj, "nodes", json_object_get(vr.nodes));
        json_object_object_add(vj, "edges", json_object_get(vr.edges));
        json_object_object_add(views, "original", vj);
    }
    vz_init(&vo, "optimized", true);
    vo.orig = S->s.g; /* (the traces of what fused nodes stand for; may be NULL) */
    vz_from_function(&vo, S->s.f, ctx);
    json_object *vj = json_object_new_object();
    if (vz_layout(&vo, gvc, vj, ctx)) {
        json_object_put(vj);
        goto done;
    }
    json_object_object_add(vj, "nodes", json_object_get(vo.nodes));
    json_object_object_add(vj, "edges", json_object_get(vo.edges));
    json_object_object_add(vj, "compile_seconds", json_object_new_double(tg_function_compile_seconds(S->s.f)));
    json_object_object_add(vj, "rewrites", json_object_new_int(tg_function_rewrite_count(S->s.f)));
    json_object_object_add(views, "optimized", vj);
    json_object_object_add(data, "start", json_object_new_string("optimized"));
    json_object_object_add(data, "side_by_side", json_object_new_boolean(false));
    const char *s = json_object_to_json_string_ext(data, JSON_C_TO_STRING_PLAIN);
    S->graph_json = strdup(s);
    char *page = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&page, &len);
    if (!m || !S->graph_json) goto done;
    int w = vz_page_write(m, s);
    if (fclose(m) || w) {
        free(page);
        goto done;
    }
    S->graph_page = page;
    S->graph_page_len = len;
    rc = 0;
done:
    json_object_put(data);
    if (vr.ag) vz_free(&vr);
    if (vo.ag) vz_free(&vo);
    gvFreeContext(gvc);
    return rc;
}

int tgdebug_serve(int argc, char **argv) {
    server *S = calloc(1, sizeof *S);
    if (!S) {
        cli_error(TOOL, "out of memory");
        return TG_EXIT_FOUND;
    }
    S->o.tool = TOOL;
    int rc = dbg_opts_parse(argc, argv, true, &S->o, &S->d, usage);
    struct MHD_Daemon *daemon = NULL;
    bool worker_started = false, locks = false;
    pthread_t th;
    tg_ctx *ctx = tg_ctx_new();
    if (rc) {
        rc = rc < 0 ? TG_EXIT_OK : rc;
        goto done;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)S->o.port)};
    if (inet_pton(AF_INET, S->o.bind, &addr.sin_addr) != 1) {
        cli_error(TOOL, "--bind %s: expected an IPv4 address such as 127.0.0.1 or 0.0.0.0", S->o.bind);
        rc = TG_EXIT_USAGE;
        goto done;
    }
    if ((rc = dbg_session_open(&S->o, &S->s))) goto done;
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    locks = true;
    /* The profile first: the debugger's hooks run it inside theirs, its
     * counters written under the mutex the HTTP threads read them with.
     * Not the bodies of scans and op_from_graph nodes (the page shows
     * none): their hooks would write outside that mutex, and cost time
     * on every step. */
    tg_profile_options po = {.no_bodies = true};
    if (!(S->prof = tg_profile_new_opts(S->s.f, &po, ctx))) {
        cli_error(TOOL, "%s", tg_ctx_message(ctx));
        rc = TG_EXIT_FOUND;
        goto done;
    }
    S->pinfo = (prof_info){.path = S->o.path, .f = S->s.f, .p = S->prof, .n = tg_function_node_count(S->s.f),
                           .preset = S->s.tgf ? "saved" : S->o.preset ? S->o.preset : "fast_run",
                           .tool = "tgdebug serve"};
    S->pinfo.st = calloc((size_t)S->pinfo.n + 1, sizeof *S->pinfo.st);
    if (!S->pinfo.st || prof_opkeys(&S->pinfo)) {
        cli_error(TOOL, "out of memory");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    if ((rc = dbg_attach(&S->d, S->s.f, S->s.g, true))) goto done;
    S->d.on_hit = pause_hit;
    S->d.ud = S;
    S->d.inner_lock = &S->mu;
    if (make_graph(S, ctx)) {
        cli_error(TOOL, "could not draw the graph: %s", tg_ctx_message(ctx));
        rc = TG_EXIT_FOUND;
        goto done;
    }
    if (make_token(S->token)) {
        cli_error(TOOL, "cannot read /dev/urandom for the token: %s", strerror(errno));
        rc = TG_EXIT_FOUND;
        goto done;
    }
    /* SIGINT and SIGTERM write their number to a pipe that the main
     * thread waits on. A handler, not sigwait: threads made before this
     * point (OpenBLAS's and OpenMP's pools) do not block the signals, and
     * whichever thread the kernel picks must not end the process. SIGPIPE
     * (a client gone) is ignored. */
    if (pipe2(sig_pipe, O_CLOEXEC) < 0) {
        cli_error(TOOL, "cannot make a pipe: %s", strerror(errno));
        rc = TG_EXIT_FOUND;
        goto done;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, handle, S, MHD_OPTION_SOCK_ADDR, &addr,
                              MHD_OPTION_THREAD_POOL_SIZE, (unsigned)4, MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)(32 * 1024), MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_URI_LOG_CALLBACK, uri_seen, NULL,
                              MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_END);
    if (!daemon) {
        cli_error(TOOL, "cannot listen on %s:%ld: %s", S->o.bind, S->o.port,
                  errno ? strerror(errno) : "libmicrohttpd could not start");
        rc = TG_EXIT_USAGE;
        goto done;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = info ? info->port : (unsigned)S->o.port;
    __atomic_store_n(&S->port, port, __ATOMIC_RELEASE);
    pthread_mutex_lock(&S->mu);
    S->call = 1;
    S->state = ST_RUNNING;
    pthread_mutex_unlock(&S->mu);
    if (pthread_create(&th, NULL, worker, S)) {
        cli_error(TOOL, "cannot start the worker thread");
        rc = TG_EXIT_FOUND;
        goto done;
    }
    worker_started = true;
    printf("tgdebug: serving %s, function '%s', at http://%s:%u/?token=%s\n", S->o.path, tg_function_name(S->s.f),
           strcmp(S->o.bind, "0.0.0.0") ? S->o.bind : "127.0.0.1", port, S->token);
    fflush(stdout);
    unsigned char sig = 0;
    while (read(sig_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    fprintf(stderr, "tgdebug: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = TG_EXIT_OK;
done:
    if (worker_started) {
        pthread_mutex_lock(&S->mu);
        S->quit = true;
        __atomic_store_n(&S->d.stop, 1, __ATOMIC_SEQ_CST);
        pthread_cond_broadcast(&S->cv);
        pthread_mutex_unlock(&S->mu);
        pthread_join(th, NULL);
    }
    if (daemon) MHD_stop_daemon(daemon);
    dbg_free(&S->d);
    tg_profile_free(S->prof);
    prof_opkeys_free(&S->pinfo);
    free(S->pinfo.st);
    json_object_put(S->outputs);
    free(S->graph_json);
    free(S->graph_page);
    dbg_session_close(&S->s);
    if (locks) {
        pthread_mutex_destroy(&S->mu);
        pthread_cond_destroy(&S->cv);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    for (int i = 0; i < 2; i++)
        if (sig_pipe[i] >= 0) {
            close(sig_pipe[i]);
            sig_pipe[i] = -1;
        }
    tg_ctx_free(ctx);
    free(S);
    return rc;
}
