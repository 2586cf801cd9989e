/* Pooling ops (FORMAT.md s7): pool2d and pool2d_grad over the last two
 * dimensions, as Theano's CPU Pool, MaxPoolGrad and AveragePoolGrad.
 *
 * Output length along a dimension of length v padded to v + 2 pad
 * (Theano's Pool.out_shape): with ignore_border, max(0, (v + 2 pad - ws)
 * // stride + 1); without it, (v - 1) // stride + 1 when stride >= ws,
 * else max(0, (v - 1 - ws + stride) // stride) + 1, so that the partial
 * windows at the end are kept. Padding needs ignore_border and pad < ws
 * (Theano refuses the rest). A window covers [j*stride, j*stride + ws) of
 * the padded image, cut at its end; max, sum and average_exc_pad use only
 * the real (unpadded) part of it, average_inc_pad divides by the size of
 * the cut window, padding included. The max propagates NaN (NumPy's max,
 * which Theano's Python Pool uses). A window with no real element is an
 * error for max and average_exc_pad (Theano: NumPy's max/average of an
 * empty array), 0 for sum and average_inc_pad.
 *
 * The gradient of max goes to every element of the window equal to the
 * window's max (Theano's MaxPoolGrad); sums and averages spread it over
 * the window (divided by the divisor above).
 *
 * Float-only: integer and bool inputs compute in tg_dtype_float_of(),
 * float16 in float32.
 */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/convpool.h"
#include "ops/op.h"
#include "tensor/tensor.h"
#include "grad/grad.h"

static const char *const POOL_KEYS[] = {"ws", "stride", "pad", "ignore_border", "mode", NULL};
static const char *const MODES[] = {"max", "sum", "average_inc_pad", "average_exc_pad", NULL};

static void free_extra(tg_attrs *a) {
    tg_free(a->extra);
    a->extra = NULL;
}

static int pool_attrs(tg_node *n, tg_ctx *ctx) {
    static const int64_t ZERO[2] = {0, 0};
    pool_p *p = tg_calloc(1, sizeof *p);
    if (!p) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    free_extra(&n->a);
    n->a.extra = p;
    int rc;
    if ((rc = tg_attr_int_pair(n, "ws", NULL, 1, p->ws, ctx)) ||
        (rc = tg_attr_int_pair(n, "stride", p->ws, 1, p->stride, ctx)) ||
        (rc = tg_attr_int_pair(n, "pad", ZERO, 0, p->pad, ctx)) ||
        (rc = tg_attr_bool(n, "ignore_border", true, &p->ignore_border, ctx)) ||
        (rc = tg_attr_enum(n, "mode", MODES, PM_MAX, &p->mode, ctx)))
        return rc;
    n->a.mode = p->mode;
    if ((p->pad[0] || p->pad[1]) && !p->ignore_border)
        return tg_errorf(ctx, TG_ELOAD, "attrs.pad: padding works only with ignore_border true");
    if (p->pad[0] >= p->ws[0] || p->pad[1] >= p->ws[1])
        return tg_errorf(ctx, TG_ELOAD, "attrs.pad: padding must be smaller than the window");
    return TG_OK;
}

int64_t tg_pool_out_len(const pool_p *p, int d, int64_t v) {
    /* (a static length within 2 pad of 2^63 - 1, which no array can
     * have, is left unknown rather than overflowed) */
    if (v < 0 || v > INT64_MAX - 2 * p->pad[d]) return -1;
    int64_t ws = p->ws[d], s = p->stride[d];
    if (p->ignore_border) {
        int64_t o = v + 2 * p->pad[d] - ws;
        o = o < 0 ? -((-o + s - 1) / s) + 1 : o / s + 1; /* floor division */
        return o < 0 ? 0 : o;
    }
    if (s >= ws) return v == 0 ? 0 : (v - 1) / s + 1;
    int64_t t = v - 1 - ws + s;
    t = t < 0 ? 0 : t / s;
    return t + 1;
}

/* The dtype of a pooling op over inputs[0..ni) and the pooled shape of
 * inputs[0]; every other input must have the pooled shape, except
 * inputs[xshaped] (-1: none), which has inputs[0]'s. */
static int pool_types(tg_node *n, int ni, int xshaped, tg_dtype *dt, int64_t *oshape,
                      tg_ctx *ctx) {
    const pool_p *p = n->a.extra;
    const tg_type *x = &n->inputs[0]->type;
    if (x->ndim < 2)
        return tg_errorf(ctx, TG_ETYPE, "inputs[0] '%s': expected at least 2 dimensions, got %d",
                         n->inputs[0]->id, x->ndim);
    tg_dtype d = x->dtype;
    for (int i = 1; i < ni; i++) {
        const tg_type *t = &n->inputs[i]->type;
        if (t->ndim != x->ndim)
            return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s': expected %d dimensions, got %d", i,
                             n->inputs[i]->id, x->ndim, t->ndim);
        d = tg_dtype_promote(d, t->dtype);
    }
    *dt = tg_dtype_float_of(d);
    for (int k = 0; k < x->ndim - 2; k++) oshape[k] = x->shape[k];
    for (int k = 0; k < 2; k++) oshape[x->ndim - 2 + k] = tg_pool_out_len(p, k, x->shape[x->ndim - 2 + k]);
    for (int i = 1; i < ni; i++) {
        const tg_type *t = &n->inputs[i]->type;
        const int64_t *want = i == xshaped ? x->shape : oshape;
        for (int k = 0; k < x->ndim; k++)
            if (t->shape[k] >= 0 && want[k] >= 0 && t->shape[k] != want[k])
                return tg_errorf(ctx, TG_ESHAPE, "inputs[%d] '%s': length %lld along axis %d, %s %lld",
                                 i, n->inputs[i]->id, (long long)t->shape[k], k,
                                 i == xshaped ? "inputs[0] has" : "the pooling gives",
                                 (long long)want[k]);
    }
    return TG_OK;
}

static int pool_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt = TG_FLOAT64;
    int64_t shape[TG_MAX_NDIM];
    int rc = pool_types(n, 1, -1, &dt, shape, ctx);
    if (rc) return rc;
    tg_set_out_type(n, 0, dt, n->inputs[0]->type.ndim, shape);
    return TG_OK;
}

static int pool_grad_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt;
    int64_t shape[TG_MAX_NDIM];
    int rc = pool_types(n, 3, -1, &dt, shape, ctx);
    if (rc) return rc;
    tg_set_out_type(n, 0, dt, n->inputs[0]->type.ndim, n->inputs[0]->type.shape);
    return TG_OK;
}

/* pool2d_grad_grad(x, y, gg): y's type; gg has x's shape. */
static int pool_gg_infer(tg_node *n, tg_ctx *ctx) {
    tg_dtype dt;
    int64_t shape[TG_MAX_NDIM];
    int rc = pool_types(n, 3, 2, &dt, shape, ctx);
    if (rc) return rc;
    tg_set_out_type(n, 0, dt, n->inputs[0]->type.ndim, shape);
    return TG_OK;
}

/* ---- kernels ---- */

/* Per output index along one dimension: the real window [lo, hi) in
 * input coordinates and the divisor's factor. */
typedef struct win {
    int64_t lo, hi, div;
} win;

static void windows(const pool_p *p, int d, int64_t v, int64_t nout, win *w) {
    const int64_t pad = p->pad[d], img = v + 2 * pad;
    for (int64_t j = 0; j < nout; j++) {
        int64_t start = j * p->stride[d], end = start + p->ws[d];
        if (end > img) end = img;
        int64_t lo = start > pad ? start : pad, hi = end < img - pad ? end : img - pad;
        if (hi < lo) hi = lo;
        w[j].lo = lo - pad;
        w[j].hi = hi - pad;
        w[j].div = p->mode == PM_AVG_INC ? end - start : hi - lo;
    }
}

typedef struct pgeom {
    int64_t P, H, W, OH, OW;
    const win *wr, *wc;
    int mode;
    /* max over 2x2 windows 2 apart, each whole (no padding, none cut by
     * the border): the convnets' pooling, with loops of its own
     * (TG_POOL_GENERAL in the environment: the general loops, which the
     * tests compare them with) */
    bool max2x2;
} pgeom;

/* The larger of u and v, or the NaN among them: branch-free, so that the
 * 2x2 loops vectorize. */
#define MAX2(u, v) ((u) > (v) || (u) != (u) ? (u) : (v))

#define POOL_KERNELS(T, SFX)                                                           \
    /* 2x2, stride 2: each output reads two pairs of neighbours (about 4x the \
     * general loop on the convnet example's first pooling). */               \
    static void fwd2_##SFX(const pgeom *g, const T *x, T *y) {                         \
        const int64_t rows = g->P * g->OH, OW = g->OW, W = g->W;                      \
        int nth = rows * OW >= TG_PARALLEL_MIN / 8 ? omp_get_max_threads() : 1;        \
        TG_PAR_FOR(nth, r, rows, {                                                     \
            const int64_t pl = r / g->OH, i = r % g->OH;                               \
            const T *restrict x0 = x + pl * g->H * W + 2 * i * W, *restrict x1 = x0 + W; \
            T *restrict yp = y + r * OW;                                               \
            for (int64_t j = 0; j < OW; j++) {                                         \
                T a = MAX2(x0[2 * j], x0[2 * j + 1]), b = MAX2(x1[2 * j], x1[2 * j + 1]); \
                yp[j] = MAX2(a, b);                                                    \
            }                                                                          \
        });                                                                            \
    }                                                                                  \
    /* Its gradient when the windows tile x exactly: every element of gx is  \
     * written once (gy where it equals its window's max, else 0), no zeroing \
     * first, no adding. */                                                        \
    static void bwd2_##SFX(const pgeom *g, const T *x, const T *y, const T *gy, T *gx) { \
        const int64_t rows = g->P * g->OH, OW = g->OW, W = g->W;                      \
        int nth = rows * OW >= TG_PARALLEL_MIN / 8 ? omp_get_max_threads() : 1;        \
        TG_PAR_FOR(nth, r, rows, {                                                     \
            const int64_t off = (r / g->OH) * g->H * W + 2 * (r % g->OH) * W;         \
            const T *restrict x0 = x + off, *restrict x1 = x0 + W;                     \
            T *restrict g0 = gx + off, *restrict g1 = g0 + W;                          \
            const T *restrict yp = y + r * OW, *restrict dp = gy + r * OW;             \
            for (int64_t j = 0; j < OW; j++) {                                         \
                const T m = yp[j], d = dp[j];                                          \
                g0[2 * j] = x0[2 * j] == m ? d : 0;                                    \
                g0[2 * j + 1] = x0[2 * j + 1] == m ? d : 0;                            \
                g1[2 * j] = x1[2 * j] == m ? d : 0;                                    \
                g1[2 * j + 1] = x1[2 * j + 1] == m ? d : 0;                            \
            }                                                                          \
        });                                                                            \
    }                                                                                  \
    static void fwd_##SFX(const pgeom *g, const T *x, T *y) {                          \
        if (g->max2x2) {                                                               \
            fwd2_##SFX(g, x, y);                                                       \
            return;                                                                    \
        }                                                                              \
        const int64_t rows = g->P * g->OH;                                             \
        int nth = rows * g->OW >= TG_PARALLEL_MIN / 8 ? omp_get_max_threads() : 1;     \
        TG_PAR_FOR(nth, r, rows, {                                                     \
            const int64_t pl = r / g->OH, i = r % g->OH;                               \
            const T *xp = x + pl * g->H * g->W;                                        \
            T *yp = y + r * g->OW;                                                     \
            const win wi = g->wr[i];                                                   \
            for (int64_t j = 0; j < g->OW; j++) {                                      \
                const win wj = g->wc[j];                                               \
                if (g->mode == PM_MAX) {                                               \
                    T m = -INFINITY;                                                   \
                    for (int64_t a = wi.lo; a < wi.hi; a++)                            \
                        for (int64_t b = wj.lo; b < wj.hi; b++) {                      \
                            T v = xp[a * g->W + b];                                    \
                            m = (v > m || isnan(v)) && !isnan(m) ? v : m;              \
                        }                                                              \
                    yp[j] = m;                                                         \
                } else {                                                               \
                    T s = 0;                                                           \
                    for (int64_t a = wi.lo; a < wi.hi; a++)                            \
                        for (int64_t b = wj.lo; b < wj.hi; b++) s += xp[a * g->W + b]; \
                    if (g->mode != PM_SUM) s /= (T)(wi.div * wj.div);                  \
                    yp[j] = s;                                                         \
                }                                                                      \
            }                                                                          \
        });                                                                            \
    }                                                                                  \
    /* gx (zeroed) += the gradient; windows may overlap, so threads take     \
     * whole planes. */                                                                 \
    static void bwd_##SFX(const pgeom *g, const T *x, const T *y, const T *gy, T *gx) { \
        int nth = g->P * g->OH * g->OW >= TG_PARALLEL_MIN / 8 ? omp_get_max_threads() : 1; \
        TG_PAR_FOR(nth, pl, g->P, {                                                    \
            const T *xp = x + pl * g->H * g->W;                                        \
            T *gp = gx + pl * g->H * g->W;                                             \
            for (int64_t i = 0; i < g->OH; i++) {                                      \
                const win wi = g->wr[i];                                               \
                for (int64_t j = 0; j < g->OW; j++) {                                  \
                    const win wj = g->wc[j];                                           \
                    const int64_t o = (pl * g->OH + i) * g->OW + j;                    \
                    if (g->mode == PM_MAX) {                                           \
                        const T m = y[o], d = gy[o];                                   \
                        for (int64_t a = wi.lo; a < wi.hi; a++)                        \
                            for (int64_t b = wj.lo; b < wj.hi; b++)                    \
                                if (xp[a * g->W + b] == m) gp[a * g->W + b] += d;       \
                    } else {                                                           \
                        T d = gy[o];                                                   \
                        if (g->mode != PM_SUM) d /= (T)(wi.div * wj.div);              \
                        for (int64_t a = wi.lo; a < wi.hi; a++)                        \
                            for (int64_t b = wj.lo; b < wj.hi; b++) gp[a * g->W + b] += d; \
                    }                                                                  \
                }                                                                      \
            }                                                                          \
        });                                                                            \
    }
/* The transpose of bwd in gy: out[o] = what bwd would route from gy[o],
 * read back from gg (max: the sum of gg over the window's elements equal
 * to its max; otherwise the window's sum of gg over the divisor). Each
 * output reads its own window: threads take rows. */
#define POOL_GG_KERNEL(T, SFX)                                                          \
    static void gg_##SFX(const pgeom *g, const T *x, const T *y, const T *gg, T *out) { \
        const int64_t rows = g->P * g->OH;                                              \
        int nth = rows * g->OW >= TG_PARALLEL_MIN / 8 ? omp_get_max_threads() : 1;      \
        TG_PAR_FOR(nth, r, rows, {                                                      \
            const int64_t pl = r / g->OH, i = r % g->OH;                                \
            const T *xp = x + pl * g->H * g->W, *gp = gg + pl * g->H * g->W;            \
            const win wi = g->wr[i];                                                    \
            for (int64_t j = 0; j < g->OW; j++) {                                       \
                const win wj = g->wc[j];                                                \
                const int64_t o = r * g->OW + j;                                        \
                T s = 0;                                                                \
                for (int64_t a = wi.lo; a < wi.hi; a++)                                 \
                    for (int64_t b = wj.lo; b < wj.hi; b++)                             \
                        if (g->mode != PM_MAX || xp[a * g->W + b] == y[o]) s += gp[a * g->W + b]; \
                if (g->mode != PM_MAX && g->mode != PM_SUM) s /= (T)(wi.div * wj.div);  \
                out[o] = s;                                                             \
            }                                                                           \
        });                                                                             \
    }
POOL_KERNELS(float, f32)
POOL_KERNELS(double, f64)
POOL_GG_KERNEL(float, f32)
POOL_GG_KERNEL(double, f64)

static const char *as_work(const tg_array *a, tg_dtype wd, tg_array **tmp, tg_ctx *ctx) {
    *tmp = NULL;
    if (a->dtype == wd && tg_array_is_contiguous(a)) return a->data;
    if (!(*tmp = tg_array_copy(a, wd))) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    return (*tmp)->data;
}

/* TG_POOL_GENERAL in the environment, read once. */
static bool general_only(void) {
    static int v = -1;
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0) __atomic_store_n(&v, r = getenv("TG_POOL_GENERAL") != NULL, __ATOMIC_RELAXED);
    return r;
}

/* Geometry and window tables for x; *wr and *wc are allocated. */
static int pool_setup(const pool_p *p, const tg_array *x, pgeom *g, win **wr, tg_ctx *ctx) {
    const int nd = x->ndim;
    if (nd < 2) return tg_errorf(ctx, TG_ESHAPE, "expected at least 2 dimensions");
    g->P = 1;
    for (int k = 0; k < nd - 2; k++) g->P *= x->shape[k];
    g->H = x->shape[nd - 2];
    g->W = x->shape[nd - 1];
    g->OH = tg_pool_out_len(p, 0, g->H);
    g->OW = tg_pool_out_len(p, 1, g->W);
    g->mode = p->mode;
    *wr = tg_malloc((size_t)(g->OH + g->OW + 1) * sizeof(win));
    if (!*wr) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    windows(p, 0, g->H, g->OH, *wr);
    windows(p, 1, g->W, g->OW, *wr + g->OH);
    g->wr = *wr;
    g->wc = *wr + g->OH;
    g->max2x2 = p->mode == PM_MAX && p->ws[0] == 2 && p->ws[1] == 2 && p->stride[0] == 2 && p->stride[1] == 2 &&
                p->pad[0] == 0 && p->pad[1] == 0 && 2 * g->OH <= g->H && 2 * g->OW <= g->W && !general_only();
    if (g->P > 0 && (p->mode == PM_MAX || p->mode == PM_AVG_EXC)) {
        for (int64_t i = 0; i < g->OH + g->OW; i++)
            if ((*wr)[i].hi <= (*wr)[i].lo && g->OH * g->OW > 0)
                return tg_errorf(ctx, TG_ESHAPE, "a pooling window holds no element of the "
                                 "input (shape %lldx%lld)", (long long)g->H, (long long)g->W);
    }
    return TG_OK;
}

static int pool_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const pool_p *p = n->a.extra;
    const tg_array *x = in[0];
    tg_array *tx = NULL, *work = NULL;
    win *wt = NULL;
    pgeom g;
    const tg_dtype odt = n->outputs[0]->type.dtype;
    const tg_dtype wd = odt == TG_FLOAT16 ? TG_FLOAT32 : odt;
    int rc = pool_setup(p, x, &g, &wt, ctx);
    if (rc) goto done;
    int64_t shape[TG_MAX_NDIM];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 2] = g.OH;
    shape[x->ndim - 1] = g.OW;
    if ((rc = tg_array_prepare(out, odt, x->ndim, shape, ctx))) goto done;
    if (g.P * g.OH * g.OW == 0) goto done;
    if (odt != wd && !(work = tg_array_empty(wd, x->ndim, shape))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    const char *xp = as_work(x, wd, &tx, ctx);
    if (!xp) {
        rc = TG_ENOMEM;
        goto done;
    }
    char *y = work ? work->data : (*out)->data;
    if (wd == TG_FLOAT64) fwd_f64(&g, (const double *)xp, (double *)y);
    else fwd_f32(&g, (const float *)xp, (float *)y);
    if (work) rc = tg_array_assign(*out, work, ctx);
done:
    tg_array_free(tx);
    tg_array_free(work);
    tg_free(wt);
    return rc;
}

/* pool2d_grad(x, y, gy) (gg false: gy has the pooled shape, the result
 * x's) and pool2d_grad_grad(x, y, gg) (gg true: gg has x's shape, the
 * result the pooled one). */
static int pool_back_run(tg_node *n, tg_array *const *in, tg_array **out, bool gg,
                         tg_ctx *ctx) {
    const pool_p *p = n->a.extra;
    const tg_array *x = in[0];
    tg_array *t[3] = {NULL, NULL, NULL}, *work = NULL;
    win *wt = NULL;
    pgeom g;
    const tg_dtype odt = n->outputs[0]->type.dtype;
    const tg_dtype wd = odt == TG_FLOAT16 ? TG_FLOAT32 : odt;
    int rc = pool_setup(p, x, &g, &wt, ctx);
    if (rc) goto done;
    int64_t pooled[TG_MAX_NDIM];
    memcpy(pooled, x->shape, sizeof pooled);
    pooled[x->ndim - 2] = g.OH;
    pooled[x->ndim - 1] = g.OW;
    for (int i = 1; i < 3; i++) {
        const int64_t *want = i == 2 && gg ? x->shape : pooled;
        bool ok = in[i]->ndim == x->ndim;
        for (int k = 0; ok && k < x->ndim; k++) ok = in[i]->shape[k] == want[k];
        if (!ok) {
            rc = tg_errorf(ctx, TG_ESHAPE, "inputs[%d]: its shape is not %s", i,
                           want == pooled ? "the pooled shape of inputs[0]" : "that of inputs[0]");
            goto done;
        }
    }
    const int64_t *oshape = gg ? pooled : x->shape;
    if ((rc = tg_array_prepare(out, odt, x->ndim, oshape, ctx))) goto done;
    const int64_t total = tg_array_size_inline(*out);
    if (odt != wd && !(work = tg_array_empty(wd, x->ndim, oshape))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    char *o = work ? work->data : (*out)->data;
    /* bwd adds into it; the 2x2 loop writes every element when its windows
     * tile x */
    const bool tiled = !gg && g.max2x2 && 2 * g.OH == g.H && 2 * g.OW == g.W;
    if (!tiled) memset(o, 0, (size_t)total * tg_isize(wd));
    if (total > 0 && g.P * g.OH * g.OW > 0) {
        const char *pp[3];
        for (int i = 0; i < 3; i++)
            if (!(pp[i] = as_work(in[i], wd, &t[i], ctx))) {
                rc = TG_ENOMEM;
                goto done;
            }
        if (wd == TG_FLOAT64)
            (gg ? gg_f64 : tiled ? bwd2_f64 : bwd_f64)(&g, (const double *)pp[0], (const double *)pp[1],
                                                       (const double *)pp[2], (double *)o);
        else
            (gg ? gg_f32 : tiled ? bwd2_f32 : bwd_f32)(&g, (const float *)pp[0], (const float *)pp[1],
                                                       (const float *)pp[2], (float *)o);
    }
    if (work) rc = tg_array_assign(*out, work, ctx);
done:
    for (int i = 0; i < 3; i++) tg_array_free(t[i]);
    tg_array_free(work);
    tg_free(wt);
    return rc;
}

static int pool_grad_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    return pool_back_run(n, in, out, false, ctx);
}

static int pool_gg_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    return pool_back_run(n, in, out, true, ctx);
}

static void pool_cost(const tg_node *n, tg_array *const *in, tg_array *const *out,
                      double *flops, double *bytes) {
    const pool_p *p = n->a.extra;
    *flops = 0;
    *bytes = 0;
    if (!out[0]) return;
    double no = (double)tg_array_size_inline(n->nin == 1 ? out[0] : in[1]);
    *flops = no * (double)(p->ws[0] * p->ws[1]);
    for (int i = 0; i < n->nin; i++)
        *bytes += (double)tg_array_size_inline(in[i]) * (double)tg_isize(in[i]->dtype);
    *bytes += (double)tg_array_size_inline(out[0]) * (double)tg_isize(out[0]->dtype);
}

const tg_op tg_op_pool2d = {
    .name = "pool2d", .nin_min = 1, .nin_max = 1, .nout = 1, .flags = TG_OPF_FLOAT_ONLY,
    .attr_keys = POOL_KEYS, .parse_attrs = pool_attrs, .infer = pool_infer, .run = pool_run,
    .cost = pool_cost, .view_of = -1, .free_extra = free_extra, .grad = tg_grad_pool};

const tg_op tg_op_pool2d_grad = {
    .name = "pool2d_grad", .nin_min = 3, .nin_max = 3, .nout = 1, .flags = TG_OPF_FLOAT_ONLY,
    .attr_keys = POOL_KEYS, .parse_attrs = pool_attrs, .infer = pool_grad_infer,
    .run = pool_grad_run, .cost = pool_cost, .view_of = -1, .free_extra = free_extra, .grad = tg_grad_pool};

/* The transpose of pool2d_grad in gy (a tg form, written by the gradient
 * of pool2d_grad, so a second derivative through max pooling). */
const tg_op tg_op_pool2d_grad_grad = {
    .name = "pool2d_grad_grad", .nin_min = 3, .nin_max = 3, .nout = 1, .flags = TG_OPF_FLOAT_ONLY,
    .attr_keys = POOL_KEYS, .parse_attrs = pool_attrs, .infer = pool_gg_infer,
    .run = pool_gg_run, .cost = pool_cost, .view_of = -1, .free_extra = free_extra, .grad = tg_grad_pool};
