/* The host-side decisions of the cuDNN kernels (see dnn.h): no cuDNN
 * here, so that every build has them and the tests check them without a
 * GPU. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dnn.h"

/* ---- the policy ---- */

static const char *const POLICY_NAMES[TG_DNN_NPOLICIES] = {
    [TG_DNN_TIME_ONCE] = "time_once",
    [TG_DNN_GUESS_ONCE] = "guess_once",
    [TG_DNN_GUESS_ON_SHAPE_CHANGE] = "guess_on_shape_change",
    [TG_DNN_TIME_ON_SHAPE_CHANGE] = "time_on_shape_change",
};

const char *tg_dnn_policy_name(tg_dnn_policy p) {
    return p >= 0 && p < TG_DNN_NPOLICIES ? POLICY_NAMES[p] : "?";
}

int tg_dnn_policy_parse(const char *name, tg_dnn_policy *out, tg_ctx *ctx) {
    const char *from = "";
    if (!name) {
        name = getenv("TG_DNN_CONV_ALGO");
        from = "TG_DNN_CONV_ALGO: ";
        if (!name || !*name) {
            *out = TG_DNN_TIME_ONCE;
            return TG_OK;
        }
    }
    for (int p = 0; p < TG_DNN_NPOLICIES; p++)
        if (!strcmp(name, POLICY_NAMES[p])) {
            *out = (tg_dnn_policy)p;
            return TG_OK;
        }
    return tg_errorf(ctx, TG_EINVAL,
                     "%sunknown cuDNN algorithm policy '%s' (expected guess_once, "
                     "guess_on_shape_change, time_once or time_on_shape_change)",
                     from, name);
}

tg_dnn_action tg_dnn_decide(tg_dnn_policy p, bool chosen, const int64_t *old, const int64_t *cur, int n,
                            bool old_supports) {
    const tg_dnn_action choose =
        p == TG_DNN_GUESS_ONCE || p == TG_DNN_GUESS_ON_SHAPE_CHANGE ? TG_DNN_GUESS : TG_DNN_TIME;
    if (!chosen) return choose;
    if (!memcmp(old, cur, sizeof *old * (size_t)n)) return TG_DNN_REUSE;
    if (p == TG_DNN_GUESS_ON_SHAPE_CHANGE || p == TG_DNN_TIME_ON_SHAPE_CHANGE) return choose;
    /* _once: the first choice stands while it can run the new shapes. */
    return old_supports ? TG_DNN_REUSE : choose;
}

/* ---- convolution: ops/conv.c's geometry ---- */

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

bool tg_dnn_conv_map(const conv_p *p, int64_t K, int64_t L, tg_dnn_conv *d) {
    const int64_t k[2] = {K, L};
    for (int i = 0; i < 2; i++) {
        int64_t pad = tg_conv_pad(p, i, k[i]);
        if (k[i] < 1 || !fits_int(pad) || !fits_int(p->sub[i]) || !fits_int(p->dil[i])) return false;
        d->pad[i] = (int)pad;
        d->stride[i] = (int)p->sub[i];
        d->dil[i] = (int)p->dil[i];
    }
    d->mode = p->flip ? TG_DNN_CONVOLUTION : TG_DNN_CROSS_CORRELATION;
    return true;
}

/* ---- pooling: ops/pool.c's geometry ---- */

bool tg_dnn_pool_map(const pool_p *p, int64_t H, int64_t W, tg_dnn_pool *d) {
    switch (p->mode) {
    case PM_MAX: d->mode = TG_DNN_POOL_MAX; break;
    case PM_AVG_INC: d->mode = TG_DNN_POOL_AVG_INC; break;
    case PM_AVG_EXC: d->mode = TG_DNN_POOL_AVG_EXC; break;
    default: return false; /* sum */
    }
    const int64_t v[2] = {H, W};
    for (int i = 0; i < 2; i++) {
        if (!fits_int(p->ws[i]) || !fits_int(p->pad[i]) || !fits_int(p->stride[i])) return false;
        if (!p->ignore_border) {
            /* Without ignore_border the CPU keeps partial windows at the
             * end; cuDNN can only match where there are none, which is
             * where both rules give the same length. */
            if (v[i] < 0) return false;
            pool_p q = *p;
            q.ignore_border = true;
            if (tg_pool_out_len(p, i, v[i]) != tg_pool_out_len(&q, i, v[i])) return false;
        }
        d->window[i] = (int)p->ws[i];
        d->pad[i] = (int)p->pad[i];
        d->stride[i] = (int)p->stride[i];
    }
    return true;
}

/* ---- softmax ---- */

bool tg_dnn_softmax_map(int ndim, const int64_t *shape, int axis, int dims[4]) {
    if (axis < 0 || axis >= ndim) return false;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= shape[d];
    for (int d = axis + 1; d < ndim; d++) inner *= shape[d];
    if (!fits_int(outer) || !fits_int(shape[axis]) || !fits_int(inner) || !fits_int(outer * shape[axis] * inner))
        return false; /* cuDNN's strides are ints too */
    dims[0] = (int)outer;
    dims[1] = (int)shape[axis];
    dims[2] = (int)inner;
    dims[3] = 1;
    return true;
}
