/* The tools on the GPU: tgprof's event timing of device nodes (and its
 * synchronous mode), and the NaN guard's reduction on the device.
 *
 * Runs everywhere: the profiler's sync option and node clocks on a CPU
 * function (everything on the host clock, the profile otherwise as it
 * was), and the VM's switch between hooks that get host copies and hooks
 * that take device arrays. On a GPU (skipped without one): the device
 * statistics of hand-made float16/32/64 arrays with NaN, +Inf, -Inf and
 * big values, contiguous and strided, against counts worked out by hand
 * and against the host's tg_array_stats on the same values; a profile of
 * the MLP's training step (every device node timed by events, no host
 * copies: a view of a device array is seen as a view); the synchronous
 * mode; and the NaN guard on the device naming the same node with the
 * same statistics as on the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "testutil.h"
#include "vm/vm.h"

static bool have_gpu(void) {
    const tg_backend *be = tg_backend_cuda();
    return be && be->available(NULL) && be->tools && be->tools->stats && be->tools->event_create;
}

static tg_function *compile_on(tg_graph *g, const char *name, const char *device, const char *preset) {
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.device = device, .preset = preset};
    tg_function *f = tg_function_compile(g, tg_graph_function_find(g, name, ctx), &o, ctx);
    if (!f) fail_msg("compile on %s: %s", device, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

/* ---- everywhere ---- */

/* x (3, 4) -> transpose -> exp -> sum: a view, an elementwise op, a
 * reduction. */
static const char *small_json =
    "{\"format\":\"tg-graph\",\"version\":1,"
    "\"variables\":[{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3,4]}}],"
    "\"nodes\":[{\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]},"
    "{\"op\":\"exp\",\"inputs\":[\"t\"],\"outputs\":[\"e\"]},"
    "{\"op\":\"sum\",\"inputs\":[\"e\"],\"outputs\":[\"y\"]}],"
    "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"y\"]}}}";

static tg_array *ramp34(void) {
    double d[12];
    for (int i = 0; i < 12; i++) d[i] = 0.1 * i - 0.5;
    return tu_f64(2, (int64_t[]){3, 4}, d);
}

/* On a CPU function the option is accepted and changes nothing: every
 * node on the host clock, the same counts, output kinds and memory. */
static void test_sync_option_cpu(void **state) {
    (void)state;
    tg_graph *g = tu_load(small_json);
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = compile_on(g, "f", "cpu", "none");
    tg_profile *p = tg_profile_new(f, 1, ctx);
    assert_non_null(p);
    assert_false(tg_profile_sync(p));
    assert_false(f->hooks_device); /* a CPU function's hooks are the plain ones */
    tg_array *x = ramp34(), *y = NULL;
    tg_profile_memory m[2];
    tg_profile_output o[2];
    int kt = -1;
    for (int k = 0; k < tg_function_node_count(f); k++)
        if (!strcmp(tg_function_node_op(f, k), "transpose")) kt = k;
    assert_true(kt >= 0);
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(tg_profile_set_sync(p, mode == 1, ctx), TG_OK);
        assert_int_equal(tg_profile_sync(p), mode == 1);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(tg_profile_call(p, &x, &y, ctx), TG_OK);
            tg_array_free(y);
            y = NULL;
        }
        for (int k = 0; k < tg_function_node_count(f); k++) {
            assert_int_equal(tg_profile_node_clock(p, k), TG_PROFILE_CLOCK_HOST);
            tg_profile_node st;
            assert_int_equal(tg_profile_node_get(p, k, &st), TG_OK);
            assert_int_equal(st.calls, 2 * (mode + 1));
        }
        assert_int_equal(tg_profile_memory_get(p, &m[mode], ctx), TG_OK);
        assert_int_equal(tg_profile_output_get(p, kt, 0, &o[mode]), TG_OK);
    }
    /* The transpose is a view of x either way; the memory is the same. */
    assert_int_equal(o[0].kind, TG_PROFILE_OUT_VIEW);
    assert_int_equal(o[1].kind, TG_PROFILE_OUT_VIEW);
    assert_int_equal(m[0].peak, m[1].peak);
    assert_int_equal(m[0].allocated, m[1].allocated);
    assert_int_equal(m[0].nview, 1);
    /* Out of range and NULL. */
    assert_int_equal(tg_profile_node_clock(p, -1), TG_PROFILE_CLOCK_HOST);
    assert_int_equal(tg_profile_node_clock(p, 99), TG_PROFILE_CLOCK_HOST);
    assert_int_equal(tg_profile_set_sync(NULL, true, ctx), TG_EINVAL);
    assert_false(tg_profile_sync(NULL));
    assert_int_equal(tg_profile_calls(p), 4);
    tg_profile_free(p);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* tg_function_set_hooks_device marks the hooks as taking device arrays;
 * tg_function_set_hooks (a user's hooks) always clears the mark, so a
 * user's hooks keep getting host copies. */
static int count_after(void *ud, const tg_function *f, int node, tg_array *const *in, tg_array *const *out,
                       tg_ctx *ctx) {
    (void)f, (void)node, (void)in, (void)out, (void)ctx;
    ++*(int *)ud;
    return 0;
}

static void test_hooks_device_flag(void **state) {
    (void)state;
    tg_graph *g = tu_load(small_json);
    tg_function *f = compile_on(g, "f", "cpu", "none");
    int n = 0;
    tg_hooks h = {.after = count_after, .ud = &n};
    tg_function_set_hooks_device(f, &h);
    assert_true(f->hooks_device);
    assert_true(f->hooked);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *x = ramp34(), *y = NULL;
    assert_int_equal(tg_function_call(f, &x, &y, ctx), TG_OK);
    assert_int_equal(n, tg_function_node_count(f));
    tg_function_set_hooks(f, &h);
    assert_false(f->hooks_device);
    tg_function_set_hooks_device(f, NULL);
    assert_false(f->hooks_device);
    assert_false(f->hooked);
    tg_array_free(x);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* ---- the device statistics (GPU) ---- */

static tg_array *upload(const tg_array *h) {
    const tg_backend *be = tg_backend_cuda();
    tg_ctx *ctx = tg_ctx_new();
    tg_array *d = NULL;
    if (be->to_device(h, &d, ctx)) fail_msg("upload: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return d;
}

static tg_backend_stats dev_stats(const tg_array *d, double big) {
    const tg_backend *be = tg_backend_cuda();
    tg_ctx *ctx = tg_ctx_new();
    tg_backend_stats st;
    assert_true(be->is_device(d));
    if (be->tools->stats(d, big, &st, ctx)) fail_msg("stats: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return st;
}

/* Same value, NaN equal to NaN. */
static bool same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* The device's statistics against the host's tg_array_stats of the same
 * host array (counts, min and max exactly; the mean to rounding, relative
 * to the values' magnitude: the sums run in different orders). */
static void check_against_host(const tg_array *h, const tg_array *d, double big, const char *what) {
    tg_stats hs;
    tg_array_stats(h, big, &hs);
    tg_backend_stats ds = dev_stats(d, big);
    double mean = ds.finite ? ds.sum / (double)ds.finite : NAN;
    if (ds.size != hs.size || ds.nan != hs.nan || ds.pinf + ds.ninf != hs.inf || ds.big != hs.big ||
        !same(ds.min, hs.min) || !same(ds.max, hs.max) ||
        !(same(mean, hs.mean) || fabs(mean - hs.mean) <= 1e-12 * (fabs(hs.mean) + fabs(hs.min) + fabs(hs.max))))
        fail_msg("%s: device size=%lld nan=%lld inf=%lld+%lld big=%lld min=%.17g max=%.17g mean=%.17g\n"
                 "    host   size=%lld nan=%lld inf=%lld big=%lld min=%.17g max=%.17g mean=%.17g",
                 what, (long long)ds.size, (long long)ds.nan, (long long)ds.pinf, (long long)ds.ninf,
                 (long long)ds.big, ds.min, ds.max, mean, (long long)hs.size, (long long)hs.nan,
                 (long long)hs.inf, (long long)hs.big, hs.min, hs.max, hs.mean);
}

/* Eight values worked out by hand, with big = 1e4:
 *   1, -2, NaN, +Inf, -Inf, 30000, -40000, 0.5
 * nan 1, +inf 1, -inf 1, finite 5 (of which big 2), min -40000, max
 * 30000, sum 1 - 2 + 30000 - 40000 + 0.5 = -10000.5. All exact in
 * float16 too (multiples of 16 and 32 there). */
static const double HAND[8] = {1, -2, NAN, INFINITY, -INFINITY, 30000, -40000, 0.5};

static tg_array *hand_array(tg_dtype dt) {
    int64_t n = 8;
    tg_array *a = tg_array_new(dt, 1, &n);
    for (int i = 0; i < 8; i++) {
        if (dt == TG_FLOAT64)
            ((double *)tg_array_data(a))[i] = HAND[i];
        else if (dt == TG_FLOAT32)
            ((float *)tg_array_data(a))[i] = (float)HAND[i];
        else
            ((uint16_t *)tg_array_data(a))[i] = tg_float_to_half((float)HAND[i]);
    }
    return a;
}

static void test_device_stats_by_hand(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    const tg_dtype dts[3] = {TG_FLOAT16, TG_FLOAT32, TG_FLOAT64};
    for (int t = 0; t < 3; t++) {
        tg_array *h = hand_array(dts[t]), *d = upload(h);
        tg_backend_stats s = dev_stats(d, 1e4);
        if (s.size != 8 || s.nan != 1 || s.pinf != 1 || s.ninf != 1 || s.finite != 5 || s.big != 2 ||
            s.min != -40000 || s.max != 30000 || s.sum != -10000.5)
            fail_msg("%s: size=%lld nan=%lld +inf=%lld -inf=%lld finite=%lld big=%lld min=%g max=%g sum=%g",
                     tg_dtype_name(dts[t]), (long long)s.size, (long long)s.nan, (long long)s.pinf,
                     (long long)s.ninf, (long long)s.finite, (long long)s.big, s.min, s.max, s.sum);
        /* big off (0, or not finite): nothing counts as big. */
        assert_int_equal(dev_stats(d, 0).big, 0);
        assert_int_equal(dev_stats(d, INFINITY).big, 0);
        check_against_host(h, d, 1e4, tg_dtype_name(dts[t]));
        /* Every other element (a strided view): 1, NaN, -Inf, -40000. */
        tg_ctx *ctx = tg_ctx_new();
        tg_array *dv = tg_array_view_slice(d, 0, 0, 8, 2, ctx), *hv = tg_array_view_slice(h, 0, 0, 8, 2, ctx);
        assert_non_null(dv);
        assert_false(tg_array_is_contiguous(dv));
        s = dev_stats(dv, 1e4);
        assert_true(s.size == 4 && s.nan == 1 && s.pinf == 0 && s.ninf == 1 && s.finite == 2 && s.big == 1);
        assert_true(s.min == -40000 && s.max == 1 && s.sum == -39999);
        check_against_host(hv, dv, 1e4, "strided");
        tg_array_free(dv);
        tg_array_free(hv);
        tg_ctx_free(ctx);
        tg_array_free(d);
        tg_array_free(h);
    }
}

static uint64_t rng = 12345;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* Larger arrays (many blocks, the grid-stride loop), a transposed 2-D
 * view and a 3-D dimshuffle, an all-NaN array, an empty one: against the
 * host. */
static void test_device_stats_against_host(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    tg_ctx *ctx = tg_ctx_new();
    const tg_dtype dts[3] = {TG_FLOAT16, TG_FLOAT32, TG_FLOAT64};
    for (int t = 0; t < 3; t++) {
        int64_t shape[2] = {1537, 2049}; /* > 1024 blocks of 256 */
        tg_array *h = tg_array_new(dts[t], 2, shape);
        int64_t n = tg_array_size(h);
        for (int64_t i = 0; i < n; i++) {
            double u = urand(), v = 200 * urand() - 100;
            if (u < 1e-4) v = NAN;
            else if (u < 2e-4) v = INFINITY;
            else if (u < 3e-4) v = -INFINITY;
            else if (u < 4e-4) v = 5e4 * (u < 3.5e-4 ? -1 : 1);
            if (dts[t] == TG_FLOAT64)
                ((double *)tg_array_data(h))[i] = v;
            else if (dts[t] == TG_FLOAT32)
                ((float *)tg_array_data(h))[i] = (float)v;
            else
                ((uint16_t *)tg_array_data(h))[i] = tg_float_to_half((float)v);
        }
        tg_array *d = upload(h);
        check_against_host(h, d, 1e4, "large");
        int axes[2] = {1, 0};
        tg_array *dt = tg_array_view_transpose(d, axes, ctx), *ht = tg_array_view_transpose(h, axes, ctx);
        check_against_host(ht, dt, 1e4, "transposed");
        /* A column block: offset data pointer, row stride. */
        tg_array *dc = tg_array_view_slice(d, 1, 3, 700, 1, ctx), *hc = tg_array_view_slice(h, 1, 3, 700, 1, ctx);
        check_against_host(hc, dc, 50, "column block");
        tg_array_free(dc);
        tg_array_free(hc);
        tg_array_free(dt);
        tg_array_free(ht);
        tg_array_free(d);
        tg_array_free(h);
    }
    /* All NaN: no finite element, min and max NaN. */
    int64_t n = 1000;
    tg_array *h = tg_array_new(TG_FLOAT32, 1, &n);
    for (int64_t i = 0; i < n; i++) ((float *)tg_array_data(h))[i] = NAN;
    tg_array *d = upload(h);
    tg_backend_stats s = dev_stats(d, 1e10);
    assert_true(s.nan == 1000 && s.finite == 0 && isnan(s.min) && isnan(s.max));
    check_against_host(h, d, 1e10, "all NaN");
    tg_array_free(d);
    tg_array_free(h);
    /* Empty. */
    n = 0;
    h = tg_array_new(TG_FLOAT64, 1, &n);
    d = upload(h);
    s = dev_stats(d, 1e10);
    assert_true(s.size == 0 && s.nan == 0 && s.finite == 0 && isnan(s.min));
    tg_array_free(d);
    tg_array_free(h);
    /* Not a float array: an error, not a crash. */
    int64_t m = 4;
    tg_array *hi = tg_array_new(TG_INT32, 1, &m), *di = upload(hi);
    tg_backend_stats bs;
    assert_int_equal(tg_backend_cuda()->tools->stats(di, 1, &bs, ctx), TG_ETYPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "int32"));
    tg_array_free(di);
    tg_array_free(hi);
    tg_ctx_free(ctx);
}

/* ---- the profiler on the GPU ---- */

static bool is_download(const tg_function *f, int k) {
    const tg_vm_node *s = &f->sched[k];
    return !strcmp(s->op->name, "transfer") && s->node->a.mode == 0 && s->run != s->op->run;
}

/* The MLP's training step on the GPU, profiled with events: every node
 * that placement gave a device kernel is on the event clock, copies back
 * on the synchronised host clock, the rest on the host clock; each has
 * its calls and a time; the node times fit in the calls' time; the
 * timeline nests; a transpose of a device array is seen as a view (the
 * hooks got the device arrays, not host copies). Then the synchronous
 * mode, and a call made with tg_function_call between profiled ones. */
static void test_profile_mlp_events(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(TG_SOURCE_DIR "/examples/mlp.json", ctx);
    if (!g) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *f = compile_on(g, "train", "cuda", NULL);
    assert_true(f->on_device);
    int64_t xs[2] = {600, 784}, ys[2] = {600, 10};
    tg_array *x = tg_array_new(TG_FLOAT32, 2, xs), *y = tg_array_new(TG_FLOAT32, 2, ys);
    for (int64_t i = 0; i < 600 * 784; i++) ((float *)tg_array_data(x))[i] = (float)urand();
    for (int r = 0; r < 600; r++) ((float *)tg_array_data(y))[r * 10 + r % 10] = 1;
    tg_array *in[2] = {x, y}, *cost = NULL;
    assert_int_equal(tg_function_call(f, in, &cost, ctx), TG_OK); /* warm-up */
    tg_array_free(cost);
    cost = NULL;
    tg_profile *p = tg_profile_new(f, 2, ctx);
    if (!p) fail_msg("%s", tg_ctx_message(ctx));
    assert_true(f->hooks_device);
    for (int c = 0; c < 3; c++) {
        if (tg_profile_call(p, in, &cost, ctx)) fail_msg("%s", tg_ctx_message(ctx));
        tg_array_free(cost);
        cost = NULL;
    }
    int n = tg_function_node_count(f), nev = 0, nsync = 0, nview = 0;
    for (int k = 0; k < n; k++) {
        const tg_vm_node *s = &f->sched[k];
        tg_profile_clock want = is_download(f, k)        ? TG_PROFILE_CLOCK_SYNC
                                : s->run != s->op->run ? TG_PROFILE_CLOCK_EVENTS
                                                       : TG_PROFILE_CLOCK_HOST;
        if (tg_profile_node_clock(p, k) != want)
            fail_msg("node %s (%s): clock %d, expected %d", tg_function_node_key(f, k), s->op->name,
                     tg_profile_node_clock(p, k), want);
        nev += want == TG_PROFILE_CLOCK_EVENTS;
        nsync += want == TG_PROFILE_CLOCK_SYNC;
        tg_profile_node st;
        tg_profile_node_get(p, k, &st);
        assert_int_equal(st.calls, 3);
        if (want == TG_PROFILE_CLOCK_EVENTS && st.ns == 0)
            fail_msg("device node %s (%s) has no time", tg_function_node_key(f, k), s->op->name);
        /* A view of a value a device kernel made: with host copies the
         * hook would see two different buffers. */
        const tg_node *src = s->node->nin ? s->node->inputs[0]->owner : NULL;
        if ((!strcmp(s->op->name, "transpose") || !strcmp(s->op->name, "dimshuffle")) && src &&
            f->sched[src->index].run != f->sched[src->index].op->run) {
            tg_profile_output o;
            tg_profile_output_get(p, k, 0, &o);
            if (o.kind != TG_PROFILE_OUT_VIEW)
                fail_msg("%s of a device array: output kind %d, not a view", tg_function_node_key(f, k), o.kind);
            nview++;
        }
    }
    assert_true(nev > 10);  /* the products, the elementwise work, the uploads */
    assert_true(nsync >= 1); /* the cost, at least, comes back */
    assert_true(nview > 0); /* the backward pass's transposes of device values */
    /* Device times overlap the host's work (that is the point of not
     * synchronising), so the nodes' sum may pass the calls' wall time, but
     * not twice over, and no node alone passes it. */
    assert_true(tg_profile_nodes_ns(p) <= 2 * tg_profile_total_ns(p));
    for (int k = 0; k < n; k++) {
        tg_profile_node st;
        tg_profile_node_get(p, k, &st);
        assert_true(st.ns <= tg_profile_total_ns(p));
    }
    /* The timeline: every node that ran lies inside its call. */
    assert_int_equal(tg_profile_trace_count(p), 2);
    for (long c = 0; c < 2; c++) {
        uint64_t t0, t1;
        tg_profile_trace_call(p, c, &t0, &t1);
        for (int k = 0; k < n; k++) {
            uint64_t s0, d0;
            tg_profile_trace_node(p, c, k, &s0, &d0);
            if (s0 == 0 && d0 == 0) continue;
            if (s0 < t0 || s0 + d0 > t1)
                fail_msg("call %ld node %s: [%llu, +%llu] outside [%llu, %llu]", c, tg_function_node_key(f, k),
                         (unsigned long long)s0, (unsigned long long)d0, (unsigned long long)t0,
                         (unsigned long long)t1);
        }
    }
    /* A call made directly: its device times are read at the next one. */
    assert_int_equal(tg_function_call(f, in, &cost, ctx), TG_OK);
    tg_array_free(cost);
    cost = NULL;
    assert_int_equal(tg_profile_call(p, in, &cost, ctx), TG_OK);
    tg_array_free(cost);
    cost = NULL;
    for (int k = 0; k < n; k++) {
        tg_profile_node st;
        tg_profile_node_get(p, k, &st);
        assert_int_equal(st.calls, 5);
    }
    /* Synchronous: device nodes on the synchronised host clock. */
    uint64_t before = tg_profile_nodes_ns(p);
    assert_int_equal(tg_profile_set_sync(p, true, ctx), TG_OK);
    assert_int_equal(tg_profile_call(p, in, &cost, ctx), TG_OK);
    tg_array_free(cost);
    for (int k = 0; k < n; k++) {
        const tg_vm_node *s = &f->sched[k];
        tg_profile_clock want = s->run != s->op->run ? TG_PROFILE_CLOCK_SYNC : TG_PROFILE_CLOCK_HOST;
        assert_int_equal(tg_profile_node_clock(p, k), want);
    }
    assert_true(tg_profile_nodes_ns(p) > before);
    tg_profile_free(p);
    assert_false(f->hooked);
    tg_array_free(x);
    tg_array_free(y);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Events measure the device's work: a 2048^2 float32 product takes far
 * longer on the GPU than adding two 16-element vectors, though both are
 * one launch for the host. */
static void test_profile_events_rank(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"a\",\"type\":{\"dtype\":\"float32\",\"shape\":[2048,2048]}},"
                          "{\"id\":\"u\",\"type\":{\"dtype\":\"float32\",\"shape\":[16]}}],"
                          "\"nodes\":[{\"op\":\"dot\",\"inputs\":[\"a\",\"a\"],\"outputs\":[\"big\"]},"
                          "{\"op\":\"add\",\"inputs\":[\"u\",\"u\"],\"outputs\":[\"small\"]},"
                          "{\"op\":\"sum\",\"inputs\":[\"big\"],\"outputs\":[\"s\"]}],"
                          "\"functions\":{\"f\":{\"inputs\":[\"a\",\"u\"],\"outputs\":[\"s\",\"small\"]}}}");
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.device = "cuda", .preset = "none"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    int64_t as[2] = {2048, 2048}, us[1] = {16};
    tg_array *a = tg_array_new(TG_FLOAT32, 2, as), *u = tg_array_new(TG_FLOAT32, 1, us);
    tg_array *in[2] = {a, u}, *out[2] = {0};
    tg_profile *p = tg_profile_new(f, 0, ctx);
    for (int c = 0; c < 4; c++) {
        assert_int_equal(tg_profile_call(p, in, out, ctx), TG_OK);
        tg_array_free(out[0]);
        tg_array_free(out[1]);
        out[0] = out[1] = NULL;
    }
    int kdot = -1, kadd = -1;
    for (int k = 0; k < tg_function_node_count(f); k++) {
        if (!strcmp(tg_function_node_op(f, k), "dot")) kdot = k;
        if (!strcmp(tg_function_node_op(f, k), "add")) kadd = k;
    }
    assert_true(kdot >= 0 && kadd >= 0);
    assert_int_equal(tg_profile_node_clock(p, kdot), TG_PROFILE_CLOCK_EVENTS);
    tg_profile_node sd, sa;
    tg_profile_node_get(p, kdot, &sd);
    tg_profile_node_get(p, kadd, &sa);
    /* 2 * 2048^3 flops: over 0.1 ms per call on any GPU of today. */
    if (!(sd.ns > 10 * sa.ns && sd.ns > 4 * 100000ull))
        fail_msg("dot %llu ns, add %llu ns over 4 calls", (unsigned long long)sd.ns, (unsigned long long)sa.ns);
    tg_profile_free(p);
    tg_array_free(a);
    tg_array_free(u);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* ---- the NaN guard on the GPU ---- */

/* z = log(x) * w: log of a negative element makes NaN; a big w makes big
 * values. Run on both devices: the same offence and message, the same
 * counts, min, max and mean to float32 rounding, the same captured
 * inputs. */
static const char *guard_json =
    "{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
    "{\"id\":\"x\",\"type\":{\"dtype\":\"float32\",\"shape\":[64,33]}},"
    "{\"id\":\"w\",\"type\":{\"dtype\":\"float32\",\"shape\":[33]}}],"
    "\"nodes\":[{\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"e\"]},"
    "{\"op\":\"log\",\"inputs\":[\"x\"],\"outputs\":[\"l\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"l\",\"w\"],\"outputs\":[\"z\"]},"
    "{\"op\":\"add\",\"inputs\":[\"z\",\"e\"],\"outputs\":[\"y\"]}],"
    "\"functions\":{\"f\":{\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}}}";

static void guard_run(const char *device, tg_array **in, const tg_nanguard_options *go, tg_offence *off,
                      char *key, char *msg, tg_array **cap0, int *status) {
    tg_graph *g = tu_load(guard_json);
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.device = device, .preset = "none"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    assert_non_null(f);
    tg_nanguard *ng = tg_nanguard_new(f, go, ctx);
    assert_non_null(ng);
    assert_int_equal(f->hooks_device, !strcmp(device, "cuda"));
    tg_array *y = NULL;
    *status = tg_nanguard_call(ng, in, &y, ctx);
    tg_array_free(y);
    const tg_offence *o2 = tg_nanguard_offence(ng);
    memset(off, 0, sizeof *off);
    key[0] = 0;
    *cap0 = NULL;
    snprintf(msg, 512, "%s", *status ? tg_ctx_message(ctx) : "");
    if (o2) {
        *off = *o2;
        snprintf(key, 64, "%s", o2->node >= 0 ? tg_function_node_key(f, o2->node) : "-");
        off->var = NULL; /* borrowed from f */
        const tg_array *c = tg_nanguard_node_input(ng, 0);
        if (c) *cap0 = tg_array_copy(c, tg_array_dtype(c));
    }
    tg_nanguard_free(ng);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* float32 results of the GPU's and the CPU's libm may differ in the last
 * place (log here); counts may not. */
static bool near(double a, double b) { return same(a, b) || fabs(a - b) <= 1e-6 * fabs(b); }

static void test_nanguard_device(void **state) {
    (void)state;
    if (!have_gpu()) skip();
    int64_t xs[2] = {64, 33}, ws[1] = {33};
    tg_array *x = tg_array_new(TG_FLOAT32, 2, xs), *w = tg_array_new(TG_FLOAT32, 1, ws);
    float *xd = tg_array_data(x), *wd = tg_array_data(w);
    for (int i = 0; i < 64 * 33; i++) xd[i] = 0.5f + (float)urand();
    for (int i = 0; i < 33; i++) wd[i] = 1;
    tg_array *in[2] = {x, w};
    tg_nanguard_options go = {0};
    struct {
        const char *what;
        int bad_at; /* x[bad_at] = bad */
        float bad;
        float wbig; /* w[0], under the threshold (1e10) itself */
        bool offence;
        const char *culprit; /* the node's key */
    } cases[] = {
        {"clean", -1, 0, 1, false, NULL},
        {"NaN from log", 100, -1, 1, true, "l"},
        /* log(20) * 9e9 = 2.7e10 at [0, 0] only: elsewhere |log x| is
         * under 0.92 (x in [0.5, 2.5)), and exp(20) = 4.9e8. */
        {"big from mul", 0, 20, 9e9f, true, "z"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < 64 * 33; i++) xd[i] = 0.5f + (float)((i * 37) % 100) / 50.f;
        if (cases[c].bad_at >= 0) xd[cases[c].bad_at] = cases[c].bad;
        wd[0] = cases[c].wbig;
        tg_offence off[2];
        char key[2][64], msg[2][512];
        tg_array *cap[2];
        int st[2];
        guard_run("cpu", in, &go, &off[0], key[0], msg[0], &cap[0], &st[0]);
        guard_run("cuda", in, &go, &off[1], key[1], msg[1], &cap[1], &st[1]);
        if (st[0] != st[1] || strcmp(msg[0], msg[1]))
            fail_msg("%s: cpu %d '%s', cuda %d '%s'", cases[c].what, st[0], msg[0], st[1], msg[1]);
        assert_int_equal(st[0], cases[c].offence ? TG_ESTOPPED : TG_OK);
        if (cases[c].offence) {
            assert_string_equal(key[0], cases[c].culprit);
            tg_stats *a = &off[0].stats, *b = &off[1].stats;
            if (strcmp(key[0], key[1]) || off[0].what != off[1].what || off[0].output != off[1].output ||
                a->size != b->size || a->nan != b->nan || a->inf != b->inf || a->big != b->big ||
                !near(a->min, b->min) || !near(a->max, b->max) || !near(a->mean, b->mean))
                fail_msg("%s: cpu %s what=%u nan=%lld inf=%lld big=%lld min=%g max=%g mean=%.17g\n"
                         "    cuda %s what=%u nan=%lld inf=%lld big=%lld min=%g max=%g mean=%.17g",
                         cases[c].what, key[0], off[0].what, (long long)a->nan, (long long)a->inf,
                         (long long)a->big, a->min, a->max, a->mean, key[1], off[1].what, (long long)b->nan,
                         (long long)b->inf, (long long)b->big, b->min, b->max, b->mean);
            /* The culprit's first input, downloaded for the report. */
            assert_non_null(cap[0]);
            assert_non_null(cap[1]);
            assert_false(tg_array_on_device(cap[1]));
            tu_assert_close(cap[1], cap[0], 1e-6, 0);
        }
        tg_array_free(cap[0]);
        tg_array_free(cap[1]);
    }
    tg_array_free(x);
    tg_array_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_option_cpu),
        cmocka_unit_test(test_hooks_device_flag),
        cmocka_unit_test(test_device_stats_by_hand),
        cmocka_unit_test(test_device_stats_against_host),
        cmocka_unit_test(test_profile_mlp_events),
        cmocka_unit_test(test_profile_events_rank),
        cmocka_unit_test(test_nanguard_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
