/* Shared variables that live on the device (issue 11): a placed function
 * reads a shared variable's device copy without an upload and stores its
 * update there without a download; the host value comes back only when
 * something on the host reads it.
 *
 * Without a GPU, a mock device stands in for CUDA (registered with
 * tg_backend_test_set, which only tests call): its "device arrays" are
 * host arrays whose buffers carry the mock's own release function and
 * whose bytes are scrambled (XOR), so that a host kernel that reads one by
 * mistake computes garbage and the comparison with the CPU fails; its
 * kernels are the CPU kernels run on unscrambled copies, refusing host
 * arrays; and it counts uploads, downloads and device copies by the
 * number of elements moved (every value of the MLP has its own count: W1
 * 392000, x 47040, W2 5000, y 600, b1 500, b2 10, cost 1).
 *
 * Expected values come from the CPU: the same graph compiled for the CPU
 * with the same rewrites (fusion is off on the device) runs the same
 * kernels on the same numbers, so costs and weights must be bit for bit
 * the same. The last test does the same on the real CUDA backend (to
 * rounding) and is skipped without a GPU. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "io/tgf.h"
#include "ops/op.h"
#include "tensor/tensor.h"
#include "testutil.h"
#include "vm/vm.h"

/* ---- the mock device ---- */

#define KEY 0xA5 /* device bytes are host bytes XOR KEY */

typedef struct count {
    int64_t size;
    long n;
} count;

static struct {
    count up[32], down[32];
    int nup, ndown;
    long uploads, downloads, copies, kernels;
    bool fail_upload, fail_download;
    const char *host_only[4]; /* ops the mock has no kernel for */
} mock;

static void mock_reset(void) { memset(&mock, 0, sizeof mock); }

static void tally(count *c, int *n, int64_t size) {
    for (int i = 0; i < *n; i++)
        if (c[i].size == size) {
            c[i].n++;
            return;
        }
    if (*n < 32) c[(*n)++] = (count){size, 1};
}

static long counted(const count *c, int n, int64_t size) {
    for (int i = 0; i < n; i++)
        if (c[i].size == size) return c[i].n;
    return 0;
}
static long ups(int64_t size) { return counted(mock.up, mock.nup, size); }
static long downs(int64_t size) { return counted(mock.down, mock.ndown, size); }

static void mock_release(tg_buffer *b) { tg_free_aligned(b->data); }

static bool mock_is_device(const tg_array *a) { return a && a->buf && a->buf->release == mock_release; }

/* A C-contiguous copy of src's elements, each byte XORed with x, in a
 * device buffer or a host one. */
static tg_array *copy_bytes(const tg_array *src, bool dev, unsigned char x) {
    tg_array *a = tg_array_empty(src->dtype, src->ndim, src->shape);
    if (!a) return NULL;
    if (dev) a->buf->release = mock_release;
    size_t isz = tg_isize(src->dtype);
    int64_t n = tg_array_size_inline(src), idx[TG_MAX_NDIM] = {0};
    unsigned char *dst = (unsigned char *)a->data;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)src->data;
        for (int d = 0; d < src->ndim; d++) p += idx[d] * src->strides[d];
        for (size_t b = 0; b < isz; b++) dst[(size_t)i * isz + b] = p[b] ^ x;
        for (int d = src->ndim - 1; d >= 0; d--) {
            if (++idx[d] < src->shape[d]) break;
            idx[d] = 0;
        }
    }
    return a;
}

static bool mock_available(const char **why) {
    if (why) *why = NULL;
    return true;
}

static int mock_to_device(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (mock_is_device(src)) {
        tg_array_free(*out);
        *out = tg_array_ref((tg_array *)src);
        return TG_OK;
    }
    if (mock.fail_upload) return tg_errorf(ctx, TG_ENOMEM, "mock device: out of device memory");
    tg_array *d = copy_bytes(src, true, KEY);
    if (!d) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    mock.uploads++;
    tally(mock.up, &mock.nup, tg_array_size(src));
    tg_array_free(*out);
    *out = d;
    return TG_OK;
}

static int mock_to_host(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (!mock_is_device(src)) {
        tg_array_free(*out);
        *out = tg_array_ref((tg_array *)src);
        return TG_OK;
    }
    if (mock.fail_download) return tg_errorf(ctx, TG_ERUNTIME, "mock device: the copy to the host failed");
    tg_array *h = copy_bytes(src, false, KEY);
    if (!h) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    mock.downloads++;
    tally(mock.down, &mock.ndown, tg_array_size(src));
    tg_array_free(*out);
    *out = h;
    return TG_OK;
}

static int mock_copy(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (!mock_is_device(src)) return tg_errorf(ctx, TG_EINVAL, "mock device: copy of a host array");
    tg_array *d = copy_bytes(src, true, 0);
    if (!d) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    mock.copies++;
    tg_array_free(*out);
    *out = d;
    return TG_OK;
}

/* What CUDA reads on the host: sum_to's target (its shape), the BLAS
 * updates' alpha and beta. */
static unsigned mock_host_inputs(const tg_node *n) {
    const char *name = n->op->name;
    if (!strcmp(name, "sum_to")) return 2u;
    if (!strcmp(name, "gemm") || !strcmp(name, "gemv")) return 1u << 1 | 1u << 4;
    if (!strcmp(name, "ger")) return 1u << 1;
    return 0u;
}

/* The CPU kernel on unscrambled host copies; the results go back to the
 * device. A host array where a device one belongs is refused. */
static int mock_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    unsigned keep = mock_host_inputs(n);
    tg_array *hin[16] = {0}, *hout[8] = {0};
    int rc = TG_OK;
    if (n->nin > 16 || n->nout > 8) return tg_errorf(ctx, TG_EINVAL, "mock device: too many operands");
    for (int j = 0; j < n->nin && !rc; j++) {
        if (!in[j]) continue;
        if (!(keep >> j & 1) && !mock_is_device(in[j]))
            rc = tg_errorf(ctx, TG_ERUNTIME, "mock device: input %d of %s is a host array", j, n->op->name);
        else if (mock_is_device(in[j]) && !(hin[j] = copy_bytes(in[j], false, KEY)))
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        else if (!hin[j])
            hin[j] = tg_array_ref(in[j]);
    }
    if (!rc) rc = n->op->run(n, hin, hout, ctx);
    for (int j = 0; j < n->nout && !rc; j++) {
        tg_array *d = copy_bytes(hout[j], true, KEY);
        if (!d) rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        tg_array_free(out[j]);
        out[j] = d;
    }
    for (int j = 0; j < n->nin; j++) tg_array_free(hin[j]);
    for (int j = 0; j < n->nout; j++) tg_array_free(hout[j]);
    mock.kernels++;
    return rc;
}

static tg_kernel_fn mock_kernel(const tg_node *n) {
    const char *name = n->op->name;
    if (n->op->flags & (TG_OPF_LAZY | TG_OPF_SIDE_EFFECT | TG_OPF_DERIVED) || !n->op->run || !n->nout) return NULL;
    if (!strcmp(name, "scan") || !strcmp(name, "composite") || !strcmp(name, "op_from_graph") ||
        !strcmp(name, "transfer") || !strncmp(name, "random_", 7))
        return NULL;
    for (int i = 0; i < 4 && mock.host_only[i]; i++)
        if (!strcmp(name, mock.host_only[i])) return NULL;
    return mock_run;
}

static const tg_backend mock_backend = {
    .name = "mock",
    .available = mock_available,
    .kernel = mock_kernel,
    .host_inputs = mock_host_inputs,
    .to_device = mock_to_device,
    .to_host = mock_to_host,
    .is_device = mock_is_device,
    .copy = mock_copy,
};

static int mock_setup(void **state) {
    (void)state;
    mock_reset();
    tg_backend_test_set(&mock_backend);
    return 0;
}

static int mock_teardown(void **state) {
    (void)state;
    tg_backend_test_set(NULL);
    return 0;
}

/* ---- the MLP ---- */

enum { BATCH = 60, STEPS = 4 };
static const char *const weights[] = {"W1", "b1", "W2", "b2"};
static const int64_t wsize[] = {784 * 500, 500, 500 * 10, 10};
#define NW 4
#define XSIZE (BATCH * 784)
#define YSIZE (BATCH * 10)

static uint64_t rng_state;
static double urand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct mlp {
    tg_array *x, *y;
} mlp;

static mlp mlp_data(uint64_t seed) {
    int64_t xs[2] = {BATCH, 784}, ys[2] = {BATCH, 10};
    mlp d = {tg_array_new(TG_FLOAT32, 2, xs), tg_array_new(TG_FLOAT32, 2, ys)};
    rng_state = seed;
    for (int64_t i = 0; i < XSIZE; i++) ((float *)tg_array_data(d.x))[i] = (float)urand();
    for (int r = 0; r < BATCH; r++) ((float *)tg_array_data(d.y))[r * 10 + (r * 7 + (int)seed) % 10] = 1;
    return d;
}

static void mlp_free(mlp *d) {
    tg_array_free(d->x);
    tg_array_free(d->y);
}

static tg_graph *mlp_graph(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_load(TG_SOURCE_DIR "/examples/mlp.json", ctx);
    if (!g) fail_msg("%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return g;
}

/* "cuda" (the mock, or the GPU) or the CPU with the same rewrites: the
 * device leaves fusion out, so the reference does too. */
static tg_function *compile_on(tg_graph *g, const char *fn, const char *device) {
    static const char *const no_fusion[] = {"fusion", NULL};
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.device = device, .exclude = no_fusion};
    int i = tg_graph_function_find(g, fn, ctx);
    tg_function *f = i < 0 ? NULL : tg_function_compile(g, i, &o, ctx);
    if (!f) fail_msg("compile %s on %s: %s", fn, device, tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return f;
}

static tg_array *train_step(tg_function *f, const mlp *d) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *in[2] = {d->x, d->y}, *cost = NULL;
    if (tg_function_call(f, in, &cost, ctx)) fail_msg("%s: %s", tg_function_name(f), tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return cost;
}

static tg_array *predict(tg_function *f, const mlp *d) {
    tg_ctx *ctx = tg_ctx_new();
    tg_array *out = NULL;
    if (tg_function_call(f, &d->x, &out, ctx)) fail_msg("%s: %s", tg_function_name(f), tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return out;
}

/* Bit for bit: same dtype, shape and bytes. */
static void assert_same_bits(const tg_array *a, const tg_array *b, const char *what) {
    if (!a || !b) fail_msg("%s: missing value (%p, %p)", what, (const void *)a, (const void *)b);
    assert_false(mock_is_device(a) || mock_is_device(b));
    char msg[4096];
    if (!tu_arrays_close(a, b, 0, 0, msg, sizeof msg)) fail_msg("%s: %s", what, msg);
    size_t nb = (size_t)tg_array_size(a) * tg_isize(a->dtype);
    assert_true(tg_array_is_contiguous(a) && tg_array_is_contiguous(b));
    if (memcmp(a->data, b->data, nb)) fail_msg("%s: the values agree but their bits do not", what);
}

/* One training step of each function on the same data: the costs agree
 * bit for bit (step_same: the mock device), or to rounding (step_close:
 * a GPU). */
static void step_same(tg_function *fa, tg_function *fb, const mlp *d, const char *what) {
    tg_array *ca = train_step(fa, d), *cb = train_step(fb, d);
    assert_same_bits(ca, cb, what);
    tg_array_free(ca);
    tg_array_free(cb);
}

static void step_close(tg_function *fa, tg_function *fb, const mlp *d) {
    tg_array *ca = train_step(fa, d), *cb = train_step(fb, d);
    tu_assert_close(ca, cb, 1e-4, 1e-5);
    tg_array_free(ca);
    tg_array_free(cb);
}

static void assert_weights_same(tg_function *dev, tg_function *cpu) {
    for (int i = 0; i < NW; i++)
        assert_same_bits(tg_function_shared_get(dev, weights[i]), tg_function_shared_get(cpu, weights[i]), weights[i]);
}

static int count_op(const tg_function *f, const char *op) {
    int c = 0;
    for (int i = 0; i < tg_function_node_count(f); i++) c += strcmp(tg_function_node_op(f, i), op) == 0;
    return c;
}

/* Transfers that read a shared variable (none when every reader is on
 * the device). */
static int shared_transfers(const tg_function *f) {
    int c = 0;
    for (int k = 0; k < f->nsched; k++) {
        const tg_node *n = f->sched[k].node;
        c += !strcmp(n->op->name, "transfer") && n->inputs[0]->kind == TG_VAR_SHARED;
    }
    return c;
}

/* Transfers to the host of a resident constant (they read its host copy). */
static int constant_transfers(const tg_function *f) {
    int c = 0;
    for (int k = 0; k < f->nsched; k++) {
        const tg_node *n = f->sched[k].node;
        c += !strcmp(n->op->name, "transfer") && n->inputs[0]->kind == TG_VAR_CONSTANT && n->inputs[0]->resident;
    }
    return c;
}

/* TG_TEST_DUMP=1: the placed schedule on stderr (op, side, output <- inputs). */
static void dump(const tg_function *f) {
    if (!getenv("TG_TEST_DUMP")) return;
    for (int k = 0; k < f->nsched; k++) {
        const tg_node *n = f->sched[k].node;
        fprintf(stderr, "%2d %-24s %-5s %s <-", k, n->op->name, f->sched[k].run == mock_run ? "dev" : "host",
                n->nout ? n->outputs[0]->id : "");
        for (int j = 0; j < n->nin; j++)
            fprintf(stderr, " %s%s", n->inputs[j]->id, n->inputs[j]->resident ? "[res]" : "");
        fprintf(stderr, "\n");
    }
}

static bool recorded_resident(const tg_function *f, const char *id) {
    for (int i = 0; i < tg_function_rewrite_count(f); i++) {
        tg_rewrite_info r;
        tg_function_rewrite_get(f, i, &r);
        if (!strcmp(r.name, "resident_on_cuda") && !strcmp(r.pass, "place") && r.ncreated == 1 &&
            !strcmp(r.created[0], id))
            return true;
    }
    return false;
}

static tg_shared *shared_of(const tg_function *f, const char *id) {
    for (int i = 0; i < f->nshared; i++)
        if (!strcmp(f->shared[i]->id, id)) return f->shared[i];
    fail_msg("no shared variable '%s'", id);
    return NULL;
}

/* The device copy is the value; the host's is out of date. */
static bool on_device_only(const tg_function *f, const char *id) {
    const tg_shared *s = shared_of(f, id);
    return s->dev && !s->value;
}

/* ---- tests ---- */

/* Trained STEPS steps on the mock device: the same costs and weights as
 * on the CPU, bit for bit; each weight went up once (not per call), only
 * x and y go up per call, only the cost comes down per call, and a
 * weight comes down when read, once. */
static void test_mlp_resident(void **state) {
    (void)state;
    tg_graph *gd = mlp_graph(), *gc = mlp_graph();
    tg_function *fd = compile_on(gd, "train", "cuda"), *fc = compile_on(gc, "train", "cpu");
    assert_true(fd->on_device);
    assert_false(fc->on_device);
    long link_uploads = mock.uploads;
    dump(fd);
    /* No transfer reads a weight; x and y go up, the cost comes down;
     * the other transfers take a resident constant's host copy (gemm's
     * beta), which moves nothing. */
    assert_int_equal(shared_transfers(fd), 0);
    assert_int_equal(count_op(fd, "transfer"), 3 + constant_transfers(fd));
    assert_int_equal(count_op(fc, "transfer"), 0);
    for (int i = 0; i < NW; i++) assert_true(recorded_resident(fd, weights[i]));
    mlp d = mlp_data(1);
    for (int s = 0; s < STEPS; s++) {
        step_same(fd, fc, &d, "cost");
    }
    for (int i = 0; i < NW; i++) {
        assert_int_equal(ups(wsize[i]), 1);
        assert_int_equal(downs(wsize[i]), 0);
        assert_true(on_device_only(fd, weights[i]));
    }
    assert_int_equal(ups(XSIZE), STEPS);
    assert_int_equal(ups(YSIZE), STEPS);
    assert_int_equal(downs(1), STEPS);
    /* The constants went up once, when linking: nothing else went up. */
    long consts = mock.uploads - NW - 2 * STEPS;
    assert_true(consts >= 0);
    assert_int_equal(consts, link_uploads);
    assert_int_equal(mock.downloads, STEPS);
    assert_int_equal(mock.copies, 0);
    /* Read on the host: each weight comes down once. */
    assert_weights_same(fd, fc);
    assert_weights_same(fd, fc);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 1);
    /* Reading did not cost the device copy: the next step uploads none. */
    step_same(fd, fc, &d, "cost");
    assert_int_equal(mock.uploads, NW + 2 * (STEPS + 1) + consts);
    assert_weights_same(fd, fc);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 2);
    mlp_free(&d);
    tg_function_free(fd);
    tg_function_free(fc);
    tg_graph_free(gd);
    tg_graph_free(gc);
}

/* tg_function_shared_set between calls replaces the device copy: the
 * next call uploads the new value and computes with it. */
static void test_shared_set_seen(void **state) {
    (void)state;
    tg_graph *gd = mlp_graph(), *gc = mlp_graph();
    tg_function *fd = compile_on(gd, "train", "cuda"), *fc = compile_on(gc, "train", "cpu");
    mlp d = mlp_data(2);
    for (int s = 0; s < 2; s++) {
        tg_array_free(train_step(fd, &d));
        tg_array_free(train_step(fc, &d));
    }
    int64_t shape[1] = {500};
    tg_array *b1 = tg_array_new(TG_FLOAT32, 1, shape);
    for (int i = 0; i < 500; i++) ((float *)tg_array_data(b1))[i] = 0.001f * (float)(i % 17) - 0.008f;
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_function_shared_set(fd, "b1", b1, ctx), TG_OK);
    assert_int_equal(tg_function_shared_set(fc, "b1", b1, ctx), TG_OK);
    /* The host value is the one set (no download) */
    long before = mock.downloads;
    assert_same_bits(tg_function_shared_get(fd, "b1"), b1, "b1 as set");
    assert_int_equal(mock.downloads, before);
    assert_int_equal(ups(500), 1);
    for (int s = 0; s < 2; s++) {
        step_same(fd, fc, &d, "cost after shared_set");
    }
    assert_int_equal(ups(500), 2);
    assert_int_equal(ups(784 * 500), 1);
    assert_weights_same(fd, fc);
    /* A value of the wrong shape is refused (TG_ESHAPE, as a call's input)
     * and changes nothing. */
    tg_array *bad = tg_array_new(TG_FLOAT32, 1, (int64_t[]){499});
    assert_int_equal(tg_function_shared_set(fd, "b1", bad, ctx), TG_ESHAPE);
    assert_non_null(strstr(tg_ctx_message(ctx), "'b1'"));
    assert_weights_same(fd, fc);
    tg_array_free(bad);
    tg_array_free(b1);
    tg_ctx_free(ctx);
    mlp_free(&d);
    tg_function_free(fd);
    tg_function_free(fc);
    tg_graph_free(gd);
    tg_graph_free(gc);
}

/* A checkpoint written mid-training holds the device's values (one
 * download each), and training resumed from it (restored as saved, on
 * the CPU, or compiled again for the device) ends where uninterrupted
 * training does. */
static void test_checkpoint_resume(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/tg_resident_%d.tgf", (int)getpid());
    tg_graph *gd = mlp_graph(), *gc = mlp_graph();
    tg_function *fd = compile_on(gd, "train", "cuda"), *fc = compile_on(gc, "train", "cpu");
    mlp d = mlp_data(3);
    for (int s = 0; s < 2; s++) {
        tg_array_free(train_step(fd, &d));
        tg_array_free(train_step(fc, &d));
    }
    tg_ctx *ctx = tg_ctx_new();
    tg_tgf_save_info info = {.source = gd};
    assert_int_equal(tg_tgf_save(path, &fd, 1, &info, ctx), TG_OK);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 1);
    long up0 = mock.uploads;
    for (int s = 0; s < 2; s++) {
        tg_array_free(train_step(fd, &d));
        tg_array_free(train_step(fc, &d));
    }
    /* Saving left the device copies in place. */
    assert_int_equal(mock.uploads - up0, 2 * 2);
    assert_weights_same(fd, fc);

    /* Restored as saved: the placed graph, back on the device (the same
     * kernels, the weights resident again: each goes up once, at the
     * first call, and only x and y per call after that). */
    tg_tgf *t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    assert_null(tg_tgf_warning(t));
    tg_function *r = tg_tgf_function(t, 0);
    assert_true(r->on_device);
    assert_int_equal(tg_function_node_count(r), tg_function_node_count(fd));
    for (int k = 0; k < r->nsched; k++) {
        assert_string_equal(r->sched[k].op->name, fd->sched[k].op->name);
        assert_true(r->sched[k].run == fd->sched[k].run);
    }
    assert_int_equal(shared_transfers(r), 0);
    long wup[NW];
    for (int i = 0; i < NW; i++) wup[i] = ups(wsize[i]);
    up0 = mock.uploads;
    tg_graph *gr = mlp_graph();
    tg_function *fr = compile_on(gr, "train", "cpu"); /* the reference from the checkpoint's values */
    for (int i = 0; i < NW; i++) {
        tg_ctx_clear(ctx);
        assert_int_equal(tg_function_shared_set(fr, weights[i], tg_function_shared_get(r, weights[i]), ctx), TG_OK);
    }
    for (int s = 0; s < 2; s++) step_same(r, fr, &d, "cost (restored on the device)");
    assert_int_equal(mock.uploads - up0, NW + 2 * 2);
    for (int i = 0; i < NW; i++) assert_int_equal(ups(wsize[i]), wup[i] + 1);
    assert_weights_same(r, fr);
    tg_function_free(fr);
    tg_graph_free(gr);
    tg_tgf_free(t);

    /* Optimized again with the file's own options: placed on the device
     * again, as the function was. */
    tg_tgf_load_options ro = {.reoptimize = true};
    t = tg_tgf_load(path, &ro, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    assert_true(tg_tgf_function(t, 0)->on_device);
    tg_tgf_free(t);

    /* TG_DEVICE=cpu keeps it on the CPU (the transfers are identities
     * there), with the same values as the run that never stopped. */
    setenv("TG_DEVICE", "cpu", 1);
    t = tg_tgf_load(path, NULL, ctx);
    unsetenv("TG_DEVICE");
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    r = tg_tgf_function(t, 0);
    assert_false(r->on_device);
    for (int s = 0; s < 2; s++) tg_array_free(train_step(r, &d));
    assert_weights_same(r, fc);
    tg_tgf_free(t);

    /* A device the backend has no kernel for one of the nodes it ran
     * (here, the mock losing its dot): the whole function on the CPU,
     * and the file's warning line says why. */
    const char *lost = NULL;
    for (int k = 0; k < fd->nsched && !lost; k++)
        if (fd->sched[k].run == mock_run) lost = fd->sched[k].op->name;
    assert_non_null(lost);
    mock.host_only[0] = lost;
    t = tg_tgf_load(path, NULL, ctx);
    mock.host_only[0] = NULL;
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    r = tg_tgf_function(t, 0);
    assert_false(r->on_device);
    const char *w = tg_tgf_warning(t);
    char want[128];
    snprintf(want, sizeof want, "'train' ran on the GPU: no GPU kernel here for %s -> ", lost);
    if (!w || !strstr(w, "loaded anyway, running on the CPU kernels") || !strstr(w, want))
        fail_msg("warning: %s", w ? w : "(none)");
    tg_tgf_free(t);

    /* Compiled again for the device from the file's original graph. */
    static const char *const no_fusion[] = {"fusion", NULL};
    tg_compile_options co = {.device = "cuda", .exclude = no_fusion};
    tg_tgf_load_options lo = {.reoptimize = true, .options = &co};
    t = tg_tgf_load(path, &lo, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    r = tg_tgf_function(t, 0);
    assert_true(r->on_device);
    for (int s = 0; s < 2; s++) tg_array_free(train_step(r, &d));
    assert_weights_same(r, fc);
    /* and its own checkpoint holds its device values */
    assert_int_equal(tg_tgf_save_state(t, path, ctx), TG_OK);
    tg_tgf_free(t);
    t = tg_tgf_load(path, NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    assert_weights_same(tg_tgf_function(t, 0), fc);
    tg_tgf_free(t);

    unlink(path);
    tg_ctx_free(ctx);
    mlp_free(&d);
    tg_function_free(fd);
    tg_function_free(fc);
    tg_graph_free(gd);
    tg_graph_free(gc);
}

/* A placement entry that does not fit the function is refused in one line
 * naming it; a device this tg does not know runs on the CPU with a
 * warning. */
static void test_placement_entry_checked(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/tg_resident_p%d.tgf", (int)getpid());
    tg_graph *g = mlp_graph();
    tg_function *fd = compile_on(g, "train", "cuda");
    tg_ctx *ctx = tg_ctx_new();
    assert_int_equal(tg_tgf_save(path, &fd, 1, NULL, ctx), TG_OK);
    size_t n;
    unsigned char *orig = tu_read_file(path, &n), *b = malloc(n);
    assert_non_null(b);
    static const struct {
        const char *key, *with, *want;
        char end;
    } cases[] = {
        {"\"device_nodes\":[", "99999", "functions[0].device_nodes[0]: expected a position in the schedule", ']'},
        {"\"device_nodes\":[", "\"a\"", "functions[0].device_nodes[0]: expected a position in the schedule", ']'},
        {"\"resident\":[", "\"x\"", "functions[0].resident[0]: expected the id of a shared variable or constant",
         ']'},
        {"\"resident\":[", "1", "functions[0].resident[0]: expected the id of a shared variable or constant", ']'},
        {"\"resident\":[", "\"W1\",\"W1\"", "functions[0].resident[1]: expected the id of a shared variable", ']'},
        {"\"resident\":[", "\"W1\",\"cost\"", "functions[0].resident[1]: expected the id of a shared variable", ']'},
        {"\"device\":", "7", "functions[0]: expected device (a string), device_nodes and resident", ','},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        memcpy(b, orig, n);
        tu_tgf_patch_header(b, n, cases[c].key, cases[c].end, cases[c].with);
        tg_ctx_clear(ctx);
        tg_tgf *t = tg_tgf_load_buffer(b, n, "p.tgf", NULL, ctx);
        if (t) fail_msg("case %zu loaded", c);
        const char *m = tg_ctx_message(ctx);
        if (strncmp(m, "p.tgf: ", 7) || !strstr(m, cases[c].want) || strchr(m, '\n'))
            fail_msg("case %zu: %s", c, m);
    }
    memcpy(b, orig, n);
    tu_tgf_patch_header(b, n, "\"device\":\"", '"', "gpu0");
    tg_ctx_clear(ctx);
    tg_tgf *t = tg_tgf_load_buffer(b, n, "p.tgf", NULL, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    assert_false(tg_tgf_function(t, 0)->on_device);
    const char *w = tg_tgf_warning(t);
    if (!w || !strstr(w, "function 'train' ran on the GPU: device 'gpu0' is unknown to this tg"))
        fail_msg("warning: %s", w ? w : "(none)");
    mlp d = mlp_data(5);
    tg_array_free(train_step(tg_tgf_function(t, 0), &d));
    mlp_free(&d);
    tg_tgf_free(t);
    free(b);
    free(orig);
    unlink(path);
    tg_ctx_free(ctx);
    tg_function_free(fd);
    tg_graph_free(g);
}

/* One graph, functions on both sides: `train` on the device, `predict`
 * and a second `train` on the CPU, and a copy of the device's `train`
 * (tg_function_copy, placed as the original is). Each sees the others' updates;
 * a value crosses only when the other side needs it. */
static void test_functions_share(void **state) {
    (void)state;
    tg_graph *gd = mlp_graph(), *gc = mlp_graph();
    tg_function *td = compile_on(gd, "train", "cuda"), *tc = compile_on(gd, "train", "cpu"),
                *pc = compile_on(gd, "predict", "cpu");
    tg_function *ref = compile_on(gc, "train", "cpu"), *refp = compile_on(gc, "predict", "cpu");
    mlp d = mlp_data(4);
    /* device, device, then predict on the CPU: the weights come down once */
    for (int s = 0; s < 2; s++) {
        tg_array_free(train_step(td, &d));
        tg_array_free(train_step(ref, &d));
    }
    tg_array *p = predict(pc, &d), *q = predict(refp, &d);
    assert_same_bits(p, q, "prediction");
    tg_array_free(p);
    tg_array_free(q);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 1);
    p = predict(pc, &d);
    tg_array_free(p);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 1);
    /* the CPU's train next: it reads the host values (valid) and its
     * update drops the device copies */
    step_same(tc, ref, &d, "cost (CPU after device)");
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 1);
    /* back on the device: each weight goes up again, once */
    step_same(td, ref, &d, "cost (device after CPU)");
    for (int i = 0; i < NW; i++) assert_int_equal(ups(wsize[i]), 2);
    /* A copy of the device function shares its state. */
    tg_ctx *ctx = tg_ctx_new();
    tg_function *cp = tg_function_copy(td, NULL, NULL, 0, ctx);
    if (!cp) fail_msg("%s", tg_ctx_message(ctx));
    /* placed as td is: copying brought each weight down once (the copy
     * is made through the graph with its values), and then neither its
     * steps nor td's move a weight between the sides */
    assert_true(cp->on_device);
    assert_int_equal(shared_transfers(cp), 0);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 2);
    step_same(cp, ref, &d, "cost (the copy after the device)");
    step_same(td, ref, &d, "cost (device after the copy)");
    for (int i = 0; i < NW; i++) {
        assert_int_equal(ups(wsize[i]), 2);
        assert_int_equal(downs(wsize[i]), 2);
    }
    assert_weights_same(td, ref);
    assert_weights_same(pc, ref);
    /* A copy with its own W2 (a value of the wrong shape is refused):
     * its step moves the W1, b1 and b2 it shares with the device
     * function and its own W2, not the device function's. */
    const char *sid[1] = {"W2"};
    const tg_array *sv[1] = {tg_function_shared_get(ref, "b1")};
    assert_null(tg_function_copy(td, sid, sv, 1, ctx));
    assert_int_equal(tg_ctx_status(ctx), TG_ESHAPE);
    tg_ctx_clear(ctx);
    sv[0] = tg_function_shared_get(ref, "W2");
    tg_function *sw = tg_function_copy(td, sid, sv, 1, ctx);
    if (!sw) fail_msg("%s", tg_ctx_message(ctx));
    tg_array *w2 = tg_array_copy(tg_function_shared_get(td, "W2"), TG_FLOAT32);
    tg_array_free(train_step(sw, &d));
    tg_array_free(train_step(ref, &d));
    for (int i = 0; i < NW; i++)
        if (strcmp(weights[i], "W2"))
            assert_same_bits(tg_function_shared_get(td, weights[i]), tg_function_shared_get(ref, weights[i]),
                             weights[i]);
    assert_same_bits(tg_function_shared_get(td, "W2"), w2, "W2 (not swapped)");
    assert_same_bits(tg_function_shared_get(sw, "W2"), tg_function_shared_get(ref, "W2"), "W2 (the copy's)");
    tg_array_free(w2);
    tg_function_free(sw);
    tg_function_free(cp);
    tg_ctx_free(ctx);
    mlp_free(&d);
    tg_function_free(td);
    tg_function_free(tc);
    tg_function_free(pc);
    tg_function_free(ref);
    tg_function_free(refp);
    tg_graph_free(gd);
    tg_graph_free(gc);
}

/* A shared variable read on both sides of one placed function: `add` has
 * no kernel on the mock, so b1 and b2 are read on the host by the adds
 * and on the device by their updates. They stay resident; the host reads
 * go through a transfer that takes the host copy, brought back once per
 * call since each call updates them on the device. */
static void test_read_on_both_sides(void **state) {
    (void)state;
    mock.host_only[0] = "add";
    tg_graph *gd = mlp_graph(), *gc = mlp_graph();
    tg_function *fd = compile_on(gd, "train", "cuda"), *fc = compile_on(gc, "train", "cpu");
    assert_true(count_op(fd, "add") > 0);
    assert_int_equal(shared_transfers(fd), 2);
    for (int i = 0; i < NW; i++) assert_true(recorded_resident(fd, weights[i]));
    mlp d = mlp_data(5);
    for (int s = 0; s < 3; s++) {
        step_same(fd, fc, &d, "cost");
    }
    /* Up once; down at each call but the first (the first reads the
     * host value it started from). */
    assert_int_equal(ups(500), 1);
    assert_int_equal(ups(10), 1);
    assert_int_equal(downs(500), 2);
    assert_int_equal(downs(10), 2);
    assert_int_equal(downs(784 * 500), 0);
    assert_weights_same(fd, fc);
    mlp_free(&d);
    tg_function_free(fd);
    tg_function_free(fc);
    tg_graph_free(gd);
    tg_graph_free(gc);
}

/* A small graph whose update is the value of another shared variable:
 * the device value is still held by that variable, so the update is a
 * copy on the device (no round trip), and each variable keeps its own
 * state. Also an update that is a function output. */
static void test_update_aliasing(void **state) {
    (void)state;
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"a\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]},\"shared\":{\"data\":[1,2,3]}},"
                          "{\"id\":\"b\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]},\"shared\":{\"data\":[10,20,30]}},"
                          "{\"id\":\"x\",\"type\":{\"dtype\":\"float64\",\"shape\":[3]}}],"
                          "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"a\",\"x\"],\"outputs\":[\"ax\"]},"
                          "{\"op\":\"add\",\"inputs\":[\"ax\",\"b\"],\"outputs\":[\"y\"]}],"
                          "\"functions\":{\"f\":{\"inputs\":[\"x\"],\"outputs\":[\"y\",\"ax\"],"
                          "\"updates\":{\"a\":\"b\",\"b\":\"ax\"}}}}");
    tg_ctx *ctx = tg_ctx_new();
    /* Without fusion: y and ax would be one composite, which the mock
     * leaves on the host. */
    static const char *const no_fusion[] = {"fusion", NULL};
    tg_compile_options o = {.device = "cuda", .exclude = no_fusion};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    tg_array *x = tu_f64(1, (int64_t[]){3}, (double[]){2, 3, 4}), *out[2] = {0};
    /* call 1: y = a x + b = (12, 26, 42), ax = (2, 6, 12); a <- b, b <- ax */
    assert_int_equal(tg_function_call(f, &x, out, ctx), TG_OK);
    tg_array *want_y = tu_f64(1, (int64_t[]){3}, (double[]){12, 26, 42});
    assert_same_bits(out[0], want_y, "y, call 1");
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    assert_true(mock.copies >= 1);
    /* call 2: a = (10, 20, 30), b = (2, 6, 12): y = (22, 66, 132) */
    assert_int_equal(tg_function_call(f, &x, out, ctx), TG_OK);
    tg_array *want_y2 = tu_f64(1, (int64_t[]){3}, (double[]){22, 66, 132});
    assert_same_bits(out[0], want_y2, "y, call 2");
    tg_array *want_a = tu_f64(1, (int64_t[]){3}, (double[]){2, 6, 12});
    tg_array *want_b = tu_f64(1, (int64_t[]){3}, (double[]){20, 60, 120});
    assert_same_bits(tg_function_shared_get(f, "a"), want_a, "a");
    assert_same_bits(tg_function_shared_get(f, "b"), want_b, "b");
    assert_int_equal(mock.uploads, 2 + 2); /* a and b once, x twice */
    tg_array_free(out[0]);
    tg_array_free(out[1]);
    tg_array_free(want_y);
    tg_array_free(want_y2);
    tg_array_free(want_a);
    tg_array_free(want_b);
    tg_array_free(x);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* Failures on the device side are one clear error, and leave the shared
 * state as it was: an upload that fails stops the call before it runs;
 * a download that fails leaves the device copy the value. */
static void test_transfer_failures(void **state) {
    (void)state;
    tg_graph *gd = mlp_graph(), *gc = mlp_graph();
    tg_function *fd = compile_on(gd, "train", "cuda"), *fc = compile_on(gc, "train", "cpu");
    mlp d = mlp_data(6);
    tg_ctx *ctx = tg_ctx_new();
    tg_array *in[2] = {d.x, d.y}, *cost = NULL;
    mock.fail_upload = true;
    assert_int_not_equal(tg_function_call(fd, in, &cost, ctx), TG_OK);
    assert_non_null(strstr(tg_ctx_message(ctx), "out of device memory"));
    assert_null(cost);
    tg_ctx_clear(ctx);
    mock.fail_upload = false;
    tg_array_free(train_step(fd, &d));
    tg_array_free(train_step(fc, &d));
    mock.fail_download = true;
    assert_null(tg_function_shared_get(fd, "W1"));
    char path[64];
    snprintf(path, sizeof path, "/tmp/tg_resident_f%d.tgf", (int)getpid());
    assert_int_not_equal(tg_tgf_save(path, &fd, 1, NULL, ctx), TG_OK);
    assert_non_null(strstr(tg_ctx_message(ctx), "copy to the host failed"));
    assert_int_equal(access(path, F_OK), -1);
    tg_ctx_clear(ctx);
    /* a CPU function reading the weights cannot start */
    tg_function *pc = compile_on(gd, "predict", "cpu");
    tg_array *p = NULL;
    assert_int_not_equal(tg_function_call(pc, &d.x, &p, ctx), TG_OK);
    assert_non_null(strstr(tg_ctx_message(ctx), "copy to the host failed"));
    tg_ctx_clear(ctx);
    mock.fail_download = false;
    /* nothing was lost: training goes on where it was */
    step_same(fd, fc, &d, "cost after the failures");
    assert_weights_same(fd, fc);
    tg_function_free(pc);
    tg_ctx_free(ctx);
    mlp_free(&d);
    tg_function_free(fd);
    tg_function_free(fc);
    tg_graph_free(gd);
    tg_graph_free(gc);
}

/* The NaN guard checks shared values when a call begins: one that a
 * device update made NaN comes back to be checked, and is named. */
static void test_nanguard_sees_device_update(void **state) {
    (void)state;
    tg_graph *g = tu_load("{\"format\":\"tg-graph\",\"version\":1,\"variables\":["
                          "{\"id\":\"w\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]},\"shared\":{\"data\":[1,2]}},"
                          "{\"id\":\"s\",\"type\":{\"dtype\":\"float64\",\"shape\":[2]}}],"
                          "\"nodes\":[{\"op\":\"mul\",\"inputs\":[\"w\",\"s\"],\"outputs\":[\"w2\"]},"
                          "{\"op\":\"sum\",\"inputs\":[\"w2\"],\"outputs\":[\"t\"]}],"
                          "\"functions\":{\"f\":{\"inputs\":[\"s\"],\"outputs\":[\"t\"],\"updates\":{\"w\":\"w2\"}}}}");
    tg_ctx *ctx = tg_ctx_new();
    tg_compile_options o = {.device = "cuda"};
    tg_function *f = tg_function_compile(g, 0, &o, ctx);
    if (!f) fail_msg("%s", tg_ctx_message(ctx));
    tg_array *s = tu_f64(1, (int64_t[]){2}, (double[]){NAN, 1}), *t = NULL;
    /* Unguarded: w is (NaN, 2) on the device now, stale on the host. */
    assert_int_equal(tg_function_call(f, &s, &t, ctx), TG_OK);
    tg_array_free(t);
    t = NULL;
    assert_true(on_device_only(f, "w"));
    tg_nanguard *ng = tg_nanguard_new(f, NULL, ctx);
    assert_non_null(ng);
    long down0 = mock.downloads;
    tg_array *one = tu_f64(1, (int64_t[]){2}, (double[]){1, 1});
    assert_int_equal(tg_nanguard_call(ng, &one, &t, ctx), TG_ESTOPPED);
    assert_non_null(strstr(tg_ctx_message(ctx), "shared variable 'w'"));
    assert_int_equal(mock.downloads - down0, 1);
    tg_ctx_clear(ctx);
    tg_array_free(one);
    tg_array_free(s);
    tg_nanguard_free(ng);
    tg_function_free(f);
    tg_graph_free(g);
    tg_ctx_free(ctx);
}

/* ---- the real GPU ---- */

/* The CUDA backend as it is, with its copies counted like the mock's. */
static tg_backend counting;
static const tg_backend *real;

static int count_to_device(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (!real->is_device(src)) {
        mock.uploads++;
        tally(mock.up, &mock.nup, tg_array_size(src));
    }
    return real->to_device(src, out, ctx);
}

static int count_to_host(const tg_array *src, tg_array **out, tg_ctx *ctx) {
    if (real->is_device(src)) {
        mock.downloads++;
        tally(mock.down, &mock.ndown, tg_array_size(src));
    }
    return real->to_host(src, out, ctx);
}

static int gpu_setup(void **state) {
    (void)state;
    mock_reset();
    tg_backend_test_set(NULL);
    real = tg_backend_cuda();
    if (real) {
        counting = *real;
        counting.to_device = count_to_device;
        counting.to_host = count_to_host;
        tg_backend_test_set(&counting);
    }
    return 0;
}

/* The MLP on the CUDA backend: the weights stay on the GPU between calls
 * (no transfer reads one; each goes up once and comes down only when
 * read), costs and weights agree with the CPU to rounding (cuBLAS sums in
 * another order), a CPU function sees the GPU's updates, shared_set
 * reaches the GPU, and a checkpoint resumes on the GPU. Skipped without
 * a GPU. */
static void test_gpu_mlp_resident(void **state) {
    (void)state;
    if (!real || !real->available(NULL)) skip();
    tg_graph *gd = mlp_graph(), *gc = mlp_graph();
    tg_function *fd = compile_on(gd, "train", "cuda"), *fc = compile_on(gc, "train", "cpu");
    tg_function *pd = compile_on(gd, "predict", "cpu"), *pc = compile_on(gc, "predict", "cpu");
    assert_true(fd->on_device);
    assert_int_equal(shared_transfers(fd), 0);
    for (int i = 0; i < NW; i++) assert_true(recorded_resident(fd, weights[i]));
    mlp d = mlp_data(7);
    for (int s = 0; s < 5; s++) {
        step_close(fd, fc, &d);
        for (int i = 0; i < NW; i++) assert_true(on_device_only(fd, weights[i]));
    }
    for (int i = 0; i < NW; i++) {
        assert_int_equal(ups(wsize[i]), 1);
        assert_int_equal(downs(wsize[i]), 0);
    }
    assert_int_equal(ups(XSIZE), 5);
    assert_int_equal(downs(1), 5);
    for (int i = 0; i < NW; i++)
        tu_assert_close(tg_function_shared_get(fd, weights[i]), tg_function_shared_get(fc, weights[i]), 1e-4, 1e-5);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 1);
    /* The CPU's predict reads the GPU's weights (now on the host too:
     * nothing more comes down); the two sets of weights differ by
     * rounding, so nearly every class agrees. */
    tg_array *p = predict(pd, &d), *q = predict(pc, &d);
    assert_int_equal(tg_array_size(p), BATCH);
    int same = 0;
    for (int r = 0; r < BATCH; r++) same += tg_array_get_flat(p, r) == tg_array_get_flat(q, r);
    assert_true(same >= BATCH - 2);
    tg_array_free(p);
    tg_array_free(q);
    for (int i = 0; i < NW; i++) assert_int_equal(downs(wsize[i]), 1);
    /* shared_set drops the device copy; the next call uploads the value */
    tg_ctx *ctx = tg_ctx_new();
    const tg_array *w = tg_function_shared_get(fc, "W2");
    assert_int_equal(tg_function_shared_set(fd, "W2", w, ctx), TG_OK);
    assert_null(shared_of(fd, "W2")->dev);
    for (int i = 0; i < 2; i++) {
        step_close(fd, fc, &d);
    }
    assert_int_equal(ups(500 * 10), 2);
    assert_int_equal(ups(784 * 500), 1);
    /* A checkpoint, compiled again for the GPU and resumed. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/tg_resident_gpu_%d.tgf", (int)getpid());
    tg_tgf_save_info info = {.source = gd};
    assert_int_equal(tg_tgf_save(path, &fd, 1, &info, ctx), TG_OK);
    static const char *const no_fusion[] = {"fusion", NULL};
    tg_compile_options co = {.device = "cuda", .exclude = no_fusion};
    tg_tgf_load_options lo = {.reoptimize = true, .options = &co};
    tg_tgf *t = tg_tgf_load(path, &lo, ctx);
    if (!t) fail_msg("%s", tg_ctx_message(ctx));
    tg_function *r = tg_tgf_function(t, 0);
    assert_true(r->on_device);
    for (int s = 0; s < 2; s++) {
        step_close(r, fc, &d);
    }
    for (int i = 0; i < NW; i++)
        tu_assert_close(tg_function_shared_get(r, weights[i]), tg_function_shared_get(fc, weights[i]), 1e-4, 1e-5);
    tg_tgf_free(t);
    unlink(path);
    tg_ctx_free(ctx);
    mlp_free(&d);
    tg_function_free(fd);
    tg_function_free(fc);
    tg_function_free(pd);
    tg_function_free(pc);
    tg_graph_free(gd);
    tg_graph_free(gc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mlp_resident, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_shared_set_seen, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_resume, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_placement_entry_checked, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_functions_share, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_read_on_both_sides, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_update_aliasing, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_transfer_failures, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_nanguard_sees_device_update, mock_setup, mock_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_mlp_resident, gpu_setup, mock_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
