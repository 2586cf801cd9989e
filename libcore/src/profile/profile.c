/* Per-node counters through the VM's hooks (tg/profile.h).
 *
 * The hooks do as little as they can while the kernel's time is measured:
 * `before` reads the clock; `after` reads it again first, then does the
 * bookkeeping (cost estimate, what each output is), which therefore counts
 * as VM overhead and not as the node's time. Every array is allocated by
 * tg_profile_new, so the hook path never calls malloc.
 *
 * A function placed on a device gets hooks that see device arrays as they
 * are (tg_function_set_hooks_device: shapes and buffers are all the
 * bookkeeping reads). Each device node owns two events from a pool made
 * with the profile; `before` records the first on the compute stream,
 * `after` the second, and the elapsed times are read once per call, after
 * the call's final synchronisation (flush_events). A copy back to the
 * host (transfer to cpu) synchronises on its own: it is timed on the host
 * clock after waiting for the device, so that the wait for the kernels
 * queued before it is not counted as the copy's time.
 *
 * Bodies: a scan's or op_from_graph's function gets a profile of its own
 * (same hooks), linked to its parent's node. The parent's `before` of that
 * node starts the body's step count; its `after` adds the run and its
 * steps (scan_p.last_steps, which the scan sets when the run completes).
 * A body's time in total is its outer node's, read from the parent. Body
 * profiles always read the host clock (sync mode on a device: there is no
 * call of their own at whose end events could be read).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/core.h"
#include "ops/control.h"
#include "ops/op.h"
#include "ops/scan.h"
#include "tg/profile.h"
#include "vm/vm.h"

typedef struct prof_out {
    tg_profile_out_kind kind;
    int of;
    int64_t bytes;
    tg_dtype dtype;
    int ndim;
    int64_t shape[TG_MAX_NDIM];
} prof_out;

struct tg_profile {
    tg_function *f;
    int nsched;
    tg_profile_node *nodes;
    prof_out **outs; /* per node, node->nout entries (one block) */
    prof_out *out_block;
    uint64_t t_node;   /* start of the running node */
    uint64_t t_origin; /* creation: the timeline's zero */
    uint64_t calls, total_ns;
    /* timeline: per kept call, start and end, then per node start and dur */
    long trace_cap, trace_n;
    bool tracing; /* the running call is kept */
    uint64_t *trace_calls; /* 2 per call */
    uint64_t *trace_nodes; /* 2 * nsched per call */
    /* A function placed on a device (dev NULL: every node on the host
     * clock). kind is per node; the rest per device node (ndev of them). */
    const tg_backend_tools *dev;
    bool sync;   /* synchronous mode */
    bool events; /* the backend has timing events */
    uint8_t *kind; /* NODE_* */
    int ndev;
    int *dev_of;   /* per node: its device-node index, or -1 */
    int *dev_node; /* per device node: its schedule position */
    void **ev;     /* per device node: start and end events */
    uint8_t *state; /* per device node: EV_* */
    void *ev_call;  /* recorded when a traced call starts */
    /* Bodies. Every profile: the profile made by tg_profile_new (root),
     * its direct bodies, and per node its body's profile (body_at: NULL
     * when it has none). A body profile: its parent and outer node,
     * what the outer node is, its steps, and the running step. */
    tg_profile *root, *parent;
    int outer;
    bool outer_scan;
    uint64_t steps;
    int64_t cur_step;
    int last_node;
    int nbodies;
    tg_profile **bodies;
    tg_profile **body_at;
    /* root: the body nodes' timeline, bev_cap entries */
    long bev_cap, bev_n;
    tg_profile_body_event *bev;
};

enum { NODE_HOST = 0, NODE_DEVICE, NODE_DOWNLOAD };
enum { EV_IDLE = 0, EV_STARTED, EV_ENDED };

static int flush_events(tg_profile *p, bool trace, uint64_t t0, uint64_t t1, tg_ctx *ctx);

/* The device side of `before`: wait for the device (synchronous mode, or
 * a copy to the host), or queue the node's start event. */
static int device_before(tg_profile *p, int node, tg_ctx *ctx) {
    if (p->sync || !p->events || p->kind[node] == NODE_DOWNLOAD) return p->dev->sync ? p->dev->sync(ctx) : TG_OK;
    int i = p->dev_of[node];
    /* Times of a call made with tg_function_call, which nobody read. */
    if (p->state[i] == EV_ENDED) {
        int rc = flush_events(p, false, 0, 0, ctx);
        if (rc) return rc;
    }
    p->state[i] = EV_STARTED;
    return p->dev->event_record(p->ev[2 * i], ctx);
}

static int hook_before(void *ud, const tg_function *f, int node,
                       tg_array *const *inputs, tg_ctx *ctx) {
    (void)f, (void)inputs;
    tg_profile *p = ud;
    if (p->body_at && p->body_at[node]) { /* a run of a body starts */
        p->body_at[node]->cur_step = -1;
        p->body_at[node]->last_node = INT_MAX;
    }
    if (p->parent) { /* in a body: each step runs its nodes in order */
        if (node <= p->last_node) p->cur_step++;
        p->last_node = node;
    }
    if (p->kind && p->kind[node] != NODE_HOST) {
        int rc = device_before(p, node, ctx);
        if (rc) return rc;
    }
    p->t_node = tg_now_ns();
    return 0;
}

static tg_profile_out_kind out_kind(const tg_node *n, int j,
                                    tg_array *const *in, const tg_array *o,
                                    int *of) {
    /* The op's declaration first (it names the input even when the buffer
     * happens to be shared some other way), then what the buffers say:
     * reshape of contiguous data, or an output that is its input. */
    if (n->inplace && n->inplace[j] >= 0 && n->inplace[j] < n->nin &&
        in[n->inplace[j]] && in[n->inplace[j]]->buf == o->buf) {
        *of = n->inplace[j];
        return TG_PROFILE_OUT_INPLACE;
    }
    if (j == 0 && n->op->view_of >= 0 && n->op->view_of < n->nin &&
        in[n->op->view_of] && in[n->op->view_of]->buf == o->buf) {
        *of = n->op->view_of;
        return TG_PROFILE_OUT_VIEW;
    }
    for (int i = 0; i < n->nin; i++)
        if (in[i] && in[i]->buf == o->buf) {
            *of = i;
            return TG_PROFILE_OUT_VIEW;
        }
    *of = -1;
    return TG_PROFILE_OUT_NEW;
}

static int hook_after(void *ud, const tg_function *f, int node,
                      tg_array *const *inputs, tg_array *const *outputs,
                      tg_ctx *ctx) {
    uint64_t t1 = tg_now_ns();
    tg_profile *p = ud;
    tg_profile_node *st = &p->nodes[node];
    st->calls++;
    bool host_clock = true;
    if (p->kind && p->kind[node] != NODE_HOST) {
        int rc;
        if (!p->sync && p->events && p->kind[node] == NODE_DEVICE) {
            /* Timed by its events: read after the call. */
            int i = p->dev_of[node];
            if ((rc = p->dev->event_record(p->ev[2 * i + 1], ctx))) return rc;
            p->state[i] = EV_ENDED;
            host_clock = false;
        } else if (p->sync && p->dev->sync) {
            if ((rc = p->dev->sync(ctx))) return rc;
            t1 = tg_now_ns();
        }
    }
    if (host_clock) {
        uint64_t dt = t1 - p->t_node;
        st->ns += dt;
        if (p->tracing) {
            uint64_t *e = p->trace_nodes + ((size_t)p->trace_n * (size_t)p->nsched + (size_t)node) * 2;
            e[0] = p->t_node - p->t_origin;
            e[1] = dt;
        } else if (p->parent && p->root->tracing && p->root->bev_n < p->root->bev_cap) {
            tg_profile *r = p->root;
            r->bev[r->bev_n++] = (tg_profile_body_event){p, node, p->cur_step, r->trace_n,
                                                         p->t_node - r->t_origin, dt};
        }
    }
    tg_profile *b = p->body_at ? p->body_at[node] : NULL;
    if (b) { /* a run of a body completed */
        b->calls++;
        b->steps += b->outer_scan ? (uint64_t)((const scan_p *)f->sched[node].node->a.extra)->last_steps : 1;
    }
    /* In a scan's body the cost and the outputs are read at the first
     * step of each run only: every step has the same shapes (what
     * changes is where the rows are), and the steps after it pay for the
     * two clock readings alone. */
    if (p->cur_step > 0) return 0;
    const tg_vm_node *s = &f->sched[node];
    const tg_node *n = s->node;
    if (s->op->cost) {
        double fl = 0, by = 0;
        s->op->cost(n, inputs, outputs, &fl, &by);
        st->flops = fl;
        st->bytes_moved = by;
    }
    int64_t fresh = 0;
    prof_out *po = p->outs[node];
    for (int j = 0; j < n->nout; j++) {
        const tg_array *o = outputs[j];
        if (!o) continue;
        po[j].kind = out_kind(n, j, inputs, o, &po[j].of);
        po[j].bytes = po[j].kind == TG_PROFILE_OUT_NEW
                          ? (int64_t)o->buf->nbytes
                          : (int64_t)tg_array_size_inline(o) * (int64_t)tg_dtype_size(o->dtype);
        if (po[j].kind == TG_PROFILE_OUT_NEW) fresh += po[j].bytes;
        po[j].dtype = o->dtype;
        po[j].ndim = o->ndim;
        memcpy(po[j].shape, o->shape, sizeof o->shape);
    }
    st->bytes_new = fresh;
    return 0;
}

/* A function placed on a device: which nodes run there (placement gave
 * them the backend's kernel instead of the op's), and their events. */
static int device_setup(tg_profile *p, tg_ctx *ctx) {
    const tg_function *f = p->f;
    const tg_backend *be = tg_backend_cuda();
    if (!be || !be->tools) return TG_OK; /* host clock throughout */
    p->dev = be->tools;
    /* A body profile has no call of its own at whose end it could read
     * events: synchronous, host clock. */
    p->events = !p->parent && p->dev->event_create && p->dev->event_destroy && p->dev->event_record &&
                p->dev->event_elapsed;
    if (p->parent) p->sync = true;
    p->kind = tg_calloc((size_t)f->nsched + 1, 1);
    p->dev_of = tg_calloc((size_t)f->nsched + 1, sizeof *p->dev_of);
    p->dev_node = tg_calloc((size_t)f->nsched + 1, sizeof *p->dev_node);
    p->state = tg_calloc((size_t)f->nsched + 1, 1);
    if (!p->kind || !p->dev_of || !p->dev_node || !p->state) return TG_ENOMEM;
    for (int k = 0; k < f->nsched; k++) {
        const tg_vm_node *s = &f->sched[k];
        p->dev_of[k] = -1;
        if (s->run == s->op->run) continue;
        bool down = !strcmp(s->op->name, "transfer") && s->node->a.mode == 0; /* to: cpu */
        p->kind[k] = down ? NODE_DOWNLOAD : NODE_DEVICE;
        if (!down) {
            p->dev_of[k] = p->ndev;
            p->dev_node[p->ndev++] = k;
        }
    }
    if (!p->events || !p->ndev) return TG_OK;
    if (!(p->ev = tg_calloc((size_t)p->ndev * 2 + 1, sizeof *p->ev))) return TG_ENOMEM;
    int rc = p->dev->event_create(&p->ev_call, ctx);
    for (int i = 0; i < 2 * p->ndev && !rc; i++) rc = p->dev->event_create(&p->ev[i], ctx);
    return rc;
}

static void profile_free(tg_profile *p);

/* The function of body node n (scan or op_from_graph), compiled now if it
 * was not yet; NULL when n has none or it does not compile (its run will
 * say why), or, with *oom set, when out of memory: a profile made then
 * would leave the body out without a word. */
static tg_function *body_function(tg_node *n, bool *oom) {
    *oom = false;
    bool scan = !strcmp(n->op->name, "scan");
    if (!scan && strcmp(n->op->name, "op_from_graph")) return NULL;
    if (!n->a.extra) return NULL;
    tg_ctx *c2 = tg_ctx_new();
    if (!c2) {
        *oom = true;
        return NULL;
    }
    tg_function *bf = NULL;
    int rc = scan ? tg_scan_compile_body(n, c2) : tg_ofg_compile_body(n, c2);
    if (rc == TG_OK) bf = scan ? ((scan_p *)n->a.extra)->fn : ((tg_ofg *)n->a.extra)->f;
    *oom = rc == TG_ENOMEM;
    tg_ctx_free(c2);
    return bf;
}

/* A profile of f: the one tg_profile_new makes (parent NULL), or the body
 * profile of node `outer` of parent. Hooks f, then makes the profiles of
 * f's own bodies. On failure, ctx says why and nothing is left hooked. */
static tg_profile *profile_make(tg_function *f, const tg_profile_options *o, tg_profile *parent, int outer,
                                tg_ctx *ctx) {
    int rc;
    long trace_calls = parent ? 0 : o->trace_calls;
    tg_profile *p = tg_calloc(1, sizeof *p);
    if (!p) goto oom;
    p->f = f;
    p->nsched = f->nsched;
    p->parent = parent;
    p->root = parent ? parent->root : p;
    p->outer = parent ? outer : -1;
    p->outer_scan = parent && !strcmp(parent->f->sched[outer].node->op->name, "scan");
    int nouts = 0;
    for (int k = 0; k < f->nsched; k++) nouts += f->sched[k].node->nout;
    p->nodes = tg_calloc((size_t)f->nsched + 1, sizeof *p->nodes);
    p->outs = tg_calloc((size_t)f->nsched + 1, sizeof *p->outs);
    p->out_block = tg_calloc((size_t)nouts + 1, sizeof *p->out_block);
    if (!p->nodes || !p->outs || !p->out_block) goto oom;
    for (int k = 0, at = 0; k < f->nsched; k++) {
        p->outs[k] = p->out_block + at;
        for (int j = 0; j < f->sched[k].node->nout; j++) {
            p->out_block[at + j].ndim = -1;
            p->out_block[at + j].of = -1;
        }
        at += f->sched[k].node->nout;
    }
    if (trace_calls > 0) {
        size_t per = (size_t)f->nsched * 2;
        if ((size_t)trace_calls > SIZE_MAX / sizeof(uint64_t) / (per + 2)) {
            tg_errorf(ctx, TG_EINVAL, "tg_profile_new: a timeline of %ld calls is too large", trace_calls);
            profile_free(p);
            return NULL;
        }
        p->trace_calls = tg_calloc((size_t)trace_calls * 2, sizeof(uint64_t));
        p->trace_nodes = tg_calloc((size_t)trace_calls * per + 1, sizeof(uint64_t));
        if (!p->trace_calls || !p->trace_nodes) goto oom;
        p->trace_cap = trace_calls;
    }
    if (f->on_device && (rc = device_setup(p, ctx))) {
        profile_free(p);
        if (rc == TG_ENOMEM) goto oom_set;
        return NULL;
    }
    /* Hooked before its bodies are looked at: a function met again
     * further down (it cannot be, but a cycle would not end) is hooked. */
    tg_hooks h = {.before = hook_before, .after = hook_after, .ud = p};
    /* On the host its hooks never fail: the call runs as without them
     * (shared values updated in place too). */
    if (f->on_device)
        tg_function_set_hooks_device(f, &h);
    else
        tg_function_set_hooks_observer(f, &h);
    if (!o->no_bodies) {
        for (int k = 0; k < f->nsched; k++) {
            bool oom;
            tg_function *bf = body_function(f->sched[k].node, &oom);
            if (oom) goto oom;
            if (!bf || bf == f || bf->hooked) continue; /* someone else's hooks stay */
            if (!p->body_at) {
                p->body_at = tg_calloc((size_t)f->nsched + 1, sizeof *p->body_at);
                p->bodies = tg_calloc((size_t)f->nsched + 1, sizeof *p->bodies);
                if (!p->body_at || !p->bodies) goto oom;
            }
            tg_profile *b = profile_make(bf, o, p, k, ctx);
            if (!b) {
                profile_free(p);
                return NULL;
            }
            p->body_at[k] = p->bodies[p->nbodies++] = b;
        }
    }
    return p;
oom:
    profile_free(p);
oom_set:
    tg_errorf(ctx, TG_ENOMEM, "out of memory for the profile of '%s'", f->name);
    return NULL;
}

static bool has_bodies(const tg_profile *p) { return p->nbodies > 0; }

tg_profile *tg_profile_new_opts(tg_function *f, const tg_profile_options *o, tg_ctx *ctx) {
    tg_profile_options none = {0};
    if (!o) o = &none;
    if (!f || o->trace_calls < 0 || o->trace_body_events < 0) {
        tg_errorf(ctx, TG_EINVAL, "tg_profile_new: %s",
                  !f                 ? "no function"
                  : o->trace_calls < 0 ? "trace_calls must not be negative"
                                       : "trace_body_events must not be negative");
        return NULL;
    }
    tg_profile *p = profile_make(f, o, NULL, -1, ctx);
    if (!p) return NULL;
    if (o->trace_calls > 0 && o->trace_body_events > 0 && has_bodies(p)) {
        if ((size_t)o->trace_body_events > SIZE_MAX / sizeof *p->bev - 1) {
            tg_errorf(ctx, TG_EINVAL, "tg_profile_new: a timeline of %ld body events is too large",
                      o->trace_body_events);
            tg_profile_free(p);
            return NULL;
        }
        if (!(p->bev = tg_calloc((size_t)o->trace_body_events + 1, sizeof *p->bev))) {
            tg_profile_free(p);
            tg_errorf(ctx, TG_ENOMEM, "out of memory for the profile of '%s'", f->name);
            return NULL;
        }
        p->bev_cap = o->trace_body_events;
    }
    p->t_origin = tg_now_ns();
    return p;
}

tg_profile *tg_profile_new(tg_function *f, long trace_calls, tg_ctx *ctx) {
    tg_profile_options o = {.trace_calls = trace_calls,
                            .trace_body_events = trace_calls > 0 ? TG_PROFILE_BODY_EVENTS : 0};
    return tg_profile_new_opts(f, &o, ctx);
}

/* p and its bodies (a body profile is freed with its root). */
static void profile_free(tg_profile *p) {
    if (!p) return;
    for (int i = 0; i < p->nbodies; i++) profile_free(p->bodies[i]);
    tg_free(p->bodies);
    tg_free(p->body_at);
    tg_free(p->bev);
    if (p->f && p->f->hooks.ud == p) tg_function_set_hooks(p->f, NULL);
    tg_free(p->nodes);
    tg_free(p->outs);
    tg_free(p->out_block);
    tg_free(p->trace_calls);
    tg_free(p->trace_nodes);
    if (p->ev) {
        for (int i = 0; i < 2 * p->ndev; i++) p->dev->event_destroy(p->ev[i]);
        tg_free(p->ev);
    }
    if (p->ev_call) p->dev->event_destroy(p->ev_call);
    tg_free(p->kind);
    tg_free(p->dev_of);
    tg_free(p->dev_node);
    tg_free(p->state);
    tg_free(p);
}

void tg_profile_free(tg_profile *p) { profile_free(p); }

/* Read the device times of the nodes whose two events were recorded, and
 * make every device node idle again. trace: the call in [t0, t1] (host
 * clock, from the profile's origin) is kept, and ev_call was recorded when
 * it began: a node's start is placed at its event's distance from that
 * one, clipped to the call, so that it never pokes out of its call. */
static int flush_events(tg_profile *p, bool trace, uint64_t t0, uint64_t t1, tg_ctx *ctx) {
    int rc = TG_OK;
    for (int i = 0; i < p->ndev; i++) {
        bool ended = p->state[i] == EV_ENDED;
        p->state[i] = EV_IDLE;
        if (!ended || rc) continue;
        double ms = 0, off = 0;
        if ((rc = p->dev->event_elapsed(p->ev[2 * i], p->ev[2 * i + 1], &ms, ctx))) continue;
        uint64_t ns = ms > 0 ? (uint64_t)(ms * 1e6 + 0.5) : 0;
        int k = p->dev_node[i];
        p->nodes[k].ns += ns;
        if (!trace || (rc = p->dev->event_elapsed(p->ev_call, p->ev[2 * i], &off, ctx))) continue;
        uint64_t start = t0 + (off > 0 ? (uint64_t)(off * 1e6 + 0.5) : 0);
        if (start > t1) start = t1;
        uint64_t *e = p->trace_nodes + ((size_t)p->trace_n * (size_t)p->nsched + (size_t)k) * 2;
        e[0] = start;
        e[1] = ns < t1 - start ? ns : t1 - start;
    }
    return rc;
}

int tg_profile_call(tg_profile *p, tg_array *const *inputs, tg_array **outputs,
                    tg_ctx *ctx) {
    if (p->parent)
        return tg_errorf(ctx, TG_EINVAL, "tg_profile_call: a body's profile counts the runs of its outer node; "
                                         "call the profile it hangs from");
    p->tracing = p->trace_n < p->trace_cap;
    if (p->tracing)
        memset(p->trace_nodes + (size_t)p->trace_n * (size_t)p->nsched * 2, 0,
               (size_t)p->nsched * 2 * sizeof(uint64_t));
    uint64_t t0 = tg_now_ns();
    bool timed_on_device = p->events && p->ndev && !p->sync;
    int rc = timed_on_device && p->tracing ? p->dev->event_record(p->ev_call, ctx) : TG_OK;
    if (!rc) rc = tg_function_call(p->f, inputs, outputs, ctx);
    /* The call's final synchronisation: its time ends when the device's
     * work does, and every event is then complete. */
    if (!rc && timed_on_device && p->dev->sync) rc = p->dev->sync(ctx);
    uint64_t t1 = tg_now_ns();
    if (timed_on_device) {
        /* After a failed call the events are dropped (the device may be
         * what failed); the call's own error stands. */
        tg_ctx *fctx = rc ? NULL : ctx;
        int fr = flush_events(p, p->tracing && !rc, t0 - p->t_origin, t1 - p->t_origin, fctx);
        if (!rc) rc = fr;
    }
    if (p->tracing) {
        p->trace_calls[p->trace_n * 2] = t0 - p->t_origin;
        p->trace_calls[p->trace_n * 2 + 1] = t1 - p->t_origin;
        p->trace_n++;
        p->tracing = false;
    }
    if (rc == 0) {
        p->calls++;
        p->total_ns += t1 - t0;
    }
    return rc;
}

int tg_profile_set_sync(tg_profile *p, bool sync, tg_ctx *ctx) {
    if (!p) return tg_errorf(ctx, TG_EINVAL, "tg_profile_set_sync: no profile");
    int rc = TG_OK;
    if (p->ndev && p->events) rc = flush_events(p, false, 0, 0, ctx);
    p->sync = sync;
    return rc;
}

bool tg_profile_sync(const tg_profile *p) { return p && p->sync; }

tg_profile_clock tg_profile_node_clock(const tg_profile *p, int node) {
    if (!p || node < 0 || node >= p->nsched || !p->kind || p->kind[node] == NODE_HOST) return TG_PROFILE_CLOCK_HOST;
    if (p->kind[node] == NODE_DEVICE && p->events && !p->sync) return TG_PROFILE_CLOCK_EVENTS;
    return p->dev->sync ? TG_PROFILE_CLOCK_SYNC : TG_PROFILE_CLOCK_HOST;
}

uint64_t tg_profile_calls(const tg_profile *p) { return p->calls; }
uint64_t tg_profile_total_ns(const tg_profile *p) {
    return p->parent ? p->parent->nodes[p->outer].ns : p->total_ns;
}
uint64_t tg_profile_steps(const tg_profile *p) { return p->parent ? p->steps : p->calls; }
const tg_function *tg_profile_function(const tg_profile *p) { return p->f; }
int tg_profile_body_count(const tg_profile *p) { return p ? p->nbodies : 0; }
const tg_profile *tg_profile_body(const tg_profile *p, int i, int *node) {
    if (!p || i < 0 || i >= p->nbodies) return NULL;
    if (node) *node = p->bodies[i]->outer;
    return p->bodies[i];
}
const tg_profile *tg_profile_parent(const tg_profile *p, int *node) {
    if (node) *node = p ? p->outer : -1;
    return p ? p->parent : NULL;
}
uint64_t tg_profile_nodes_ns(const tg_profile *p) {
    uint64_t s = 0;
    for (int k = 0; k < p->nsched; k++) s += p->nodes[k].ns;
    return s;
}

int tg_profile_node_get(const tg_profile *p, int node, tg_profile_node *st) {
    if (node < 0 || node >= p->nsched) return TG_EINVAL;
    *st = p->nodes[node];
    return TG_OK;
}

int tg_profile_output_get(const tg_profile *p, int node, int j,
                          tg_profile_output *out) {
    if (node < 0 || node >= p->nsched || j < 0 || j >= p->f->sched[node].node->nout)
        return TG_EINVAL;
    const prof_out *po = &p->outs[node][j];
    out->id = p->f->sched[node].node->outputs[j]->id;
    out->kind = po->kind;
    out->of = po->of;
    out->bytes = po->bytes;
    out->dtype = po->dtype;
    out->ndim = po->ndim;
    memcpy(out->shape, po->shape, sizeof out->shape);
    return TG_OK;
}

/* The simulation of tg_profile_memory: every slot belongs to one buffer
 * (its root: the slot of the new output it views or overwrites, through
 * chains of views); a buffer dies after the last node that reads any slot
 * of it, unless one of its slots is pinned (a function output, an update,
 * an input, a shared value). */
static int memory_sim(const tg_profile *p, tg_profile_memory *m,
                      int64_t *live_run, int64_t *live_after, tg_ctx *ctx) {
    const tg_function *f = p->f;
    int ns = f->nslots, rc = TG_OK;
    memset(m, 0, sizeof *m);
    int *root = tg_calloc((size_t)ns + 1, sizeof *root);
    int *death = tg_calloc((size_t)ns + 1, sizeof *death);
    int64_t *bytes = tg_calloc((size_t)ns + 1, sizeof *bytes);
    int64_t *freed_at = tg_calloc((size_t)f->nsched + 1, sizeof *freed_at);
    if (!root || !death || !bytes || !freed_at) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < ns; i++) {
        root[i] = i;
        death[i] = -1; /* never read: dies when made */
    }
    /* Roots in schedule order: an input's root is known before its
     * readers run. */
    for (int k = 0; k < f->nsched; k++) {
        const tg_vm_node *s = &f->sched[k];
        for (int j = 0; j < s->node->nout; j++) {
            const prof_out *po = &p->outs[k][j];
            int slot = s->out_slot + j;
            if (po->ndim < 0) continue;
            if (po->kind == TG_PROFILE_OUT_NEW) {
                bytes[slot] = po->bytes;
                m->allocated += po->bytes;
                m->nnew++;
            } else {
                root[slot] = root[s->in_slots[po->of]];
                if (po->kind == TG_PROFILE_OUT_VIEW)
                    m->nview++;
                else
                    m->ninplace++;
            }
            if (death[root[slot]] < k) death[root[slot]] = k;
        }
        for (int j = 0; j < s->node->nin; j++) {
            int r = root[s->in_slots[j]];
            if (death[r] < k) death[r] = k;
        }
    }
    const int INF = f->nsched;
    for (int i = 0; i < f->fg->nout + f->fg->nupd; i++) death[root[f->out_slots[i]]] = INF;
    for (int k = 0; k < f->nsched; k++)
        for (int j = 0; j < f->sched[k].node->nout; j++) {
            int slot = f->sched[k].out_slot + j;
            if (bytes[slot] && death[slot] < INF) freed_at[death[slot]] += bytes[slot];
        }
    int64_t live = 0;
    for (int k = 0; k < f->nsched; k++) {
        const tg_vm_node *s = &f->sched[k];
        for (int j = 0; j < s->node->nout; j++) live += bytes[s->out_slot + j];
        if (live > m->peak) m->peak = live;
        if (live_run) live_run[k] = live;
        live -= freed_at[k];
        if (live_after) live_after[k] = live;
    }
    m->peak_no_gc = m->allocated;
done:
    tg_free(root);
    tg_free(death);
    tg_free(bytes);
    tg_free(freed_at);
    return rc;
}

int tg_profile_memory_get(const tg_profile *p, tg_profile_memory *m,
                          tg_ctx *ctx) {
    return memory_sim(p, m, NULL, NULL, ctx);
}

int tg_profile_memory_live(const tg_profile *p, int64_t *live_run,
                           int64_t *live_after, tg_ctx *ctx) {
    tg_profile_memory m;
    return memory_sim(p, &m, live_run, live_after, ctx);
}

long tg_profile_trace_count(const tg_profile *p) { return p->trace_n; }

long tg_profile_trace_body_count(const tg_profile *p) { return p->bev_n; }

int tg_profile_trace_body_event(const tg_profile *p, long i, tg_profile_body_event *ev) {
    if (i < 0 || i >= p->bev_n) return TG_EINVAL;
    *ev = p->bev[i];
    return TG_OK;
}

int tg_profile_trace_call(const tg_profile *p, long c, uint64_t *start,
                          uint64_t *end) {
    if (c < 0 || c >= p->trace_n) return TG_EINVAL;
    *start = p->trace_calls[c * 2];
    *end = p->trace_calls[c * 2 + 1];
    return TG_OK;
}

int tg_profile_trace_node(const tg_profile *p, long c, int node,
                          uint64_t *start, uint64_t *dur) {
    if (c < 0 || c >= p->trace_n || node < 0 || node >= p->nsched) return TG_EINVAL;
    const uint64_t *e = p->trace_nodes + ((size_t)c * (size_t)p->nsched + (size_t)node) * 2;
    *start = e[0];
    *dur = e[1];
    return TG_OK;
}

/* Origins: (key, schedule position) pairs sorted by key, then grouped.
 * The result is one block: the entries, then every via list. */
typedef struct origin_pair {
    const char *key;
    int node;
} origin_pair;

static int cmp_pair(const void *a, const void *b) {
    const origin_pair *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : x->node - y->node;
}

static int cmp_origin(const void *a, const void *b) {
    const tg_profile_origin *x = a, *y = b;
    if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
    return strcmp(x->key, y->key);
}

int tg_profile_origins(const tg_profile *p, tg_profile_origin **out,
                       tg_ctx *ctx) {
    const tg_function *f = p->f;
    size_t npairs = 0;
    *out = NULL;
    for (int k = 0; k < p->nsched; k++) {
        const char *const *keys;
        npairs += (size_t)tg_function_node_origins(f, k, &keys);
    }
    origin_pair *pairs = tg_calloc(npairs + 1, sizeof *pairs);
    if (!pairs) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    size_t m = 0;
    for (int k = 0; k < p->nsched; k++) {
        const char *const *keys;
        int c = tg_function_node_origins(f, k, &keys);
        for (int i = 0; i < c; i++) pairs[m++] = (origin_pair){keys[i], k};
    }
    qsort(pairs, npairs, sizeof *pairs, cmp_pair);
    size_t ngroups = 0;
    for (size_t i = 0; i < npairs; i++)
        if (i == 0 || strcmp(pairs[i].key, pairs[i - 1].key)) ngroups++;
    /* One block: ngroups entries, then npairs ints. */
    size_t head = (ngroups + 1) * sizeof(tg_profile_origin);
    char *block = tg_calloc(1, head + (npairs + 1) * sizeof(int));
    if (!block) {
        tg_free(pairs);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    tg_profile_origin *o = (tg_profile_origin *)block;
    int *via = (int *)(block + head);
    size_t g = 0, v = 0;
    for (size_t i = 0; i < npairs; i++) {
        bool new_key = i == 0 || strcmp(pairs[i].key, pairs[i - 1].key);
        if (new_key) {
            o[g].key = pairs[i].key;
            o[g].via = via + v;
            g++;
        } else if (pairs[i].node == pairs[i - 1].node) {
            continue; /* a key listed twice by one node counts once */
        }
        tg_profile_origin *cur = &o[g - 1];
        via[v++] = pairs[i].node;
        cur->nvia++;
        cur->ns += p->nodes[pairs[i].node].ns;
    }
    tg_free(pairs);
    qsort(o, ngroups, sizeof *o, cmp_origin);
    *out = o;
    return (int)ngroups;
}

void tg_profile_origins_free(tg_profile_origin *o) { tg_free(o); }

/* The family each op's .def file puts it in: the .def files are the one
 * place that says it. */
static const struct {
    const char *op, *family;
} families[] = {
#define TG_OP(name) {#name, FAMILY},
#define FAMILY "elemwise"
#include "ops/elemwise.def"
#undef FAMILY
#define FAMILY "reduce"
#include "ops/reduce.def"
#undef FAMILY
#define FAMILY "blas"
#include "ops/blas.def"
#undef FAMILY
#define FAMILY "shape"
#include "ops/shape.def"
#undef FAMILY
#define FAMILY "build"
#include "ops/build.def"
#undef FAMILY
#define FAMILY "nn"
#include "ops/nn.def"
#undef FAMILY
#define FAMILY "conv"
#include "ops/conv.def"
#undef FAMILY
#define FAMILY "linalg"
#include "ops/linalg.def"
#undef FAMILY
#define FAMILY "random"
#include "ops/random.def"
#undef FAMILY
#define FAMILY "debug"
#include "ops/debugops.def"
#undef FAMILY
#define FAMILY "grad"
#include "ops/gradops.def"
#undef FAMILY
#define FAMILY "composite"
#include "ops/composite.def"
#undef FAMILY
#define FAMILY "transfer"
#include "ops/transfer.def"
#undef FAMILY
#define FAMILY "control"
#include "ops/control.def"
#include "ops/scan.def"
#undef FAMILY
#undef TG_OP
};

const char *tg_profile_op_class(const char *op) {
    if (!op) return "";
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].op, op) == 0) return families[i].family;
    return op;
}
