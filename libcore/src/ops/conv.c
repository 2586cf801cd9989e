/* Convolution ops (FORMAT.md s7, Theano's conv2d): conv2d,
 * conv2d_grad_inputs, conv2d_grad_weights.
 *
 * Semantics follow Theano's CorrMM: with filter_flip the kernel is flipped
 * in both spatial dimensions (a true convolution), otherwise the op is a
 * cross-correlation. "half" pads by k_dilated // 2, "full" by
 * k_dilated - 1, with k_dilated = (k - 1) * dilation + 1; the output length
 * is (in + 2 pad - k_dilated) // stride + 1, and a kernel larger than the
 * padded input is an error (Theano: "impossible output shape").
 *
 * The ops are float-only: integer and bool inputs compute in
 * tg_dtype_float_of() of their promoted dtype, float16 computes in float32
 * and is rounded back.
 *
 * CPU path: im2col + BLAS gemm. With at least as many images as OpenMP
 * threads (or a small problem), each thread takes whole images with its
 * own column buffer and a single-threaded gemm (per_image). With fewer
 * images, the columns of a group of images sit side by side (rows (c, a,
 * b), columns (image, i, j)) and one gemm, threaded by OpenBLAS, covers
 * the group; im2col and col2im then run over OpenMP threads. The group
 * size bounds the column buffer (COLS_BUDGET bytes, at least one image).
 *
 * The forward op in float32 or float64 with stride 1 and no dilation takes
 * the direct path of conv_direct.c instead (AVX-512, checked at run time)
 * when the output rows are at least 8 wide (narrower rows would leave most
 * of its 16-lane float32 vectors idle), or narrower where its vectors
 * hold output channels instead and they fill them (narrow_direct); so
 * does the input gradient, as the forward convolution of gy
 * (gi_use_direct says when); the weight gradient in float32 or float64
 * takes gw_direct below on AVX-512 (any stride, dilation and padding)
 * but for planes of 4 pixels or fewer. The environment variable TG_CONV=im2col
 * forces the im2col path for all three, TG_CONV=direct the direct kernel
 * wherever it applies (tests compare them).
 */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_direct.h"
#include "ops/convpool.h"
#include "ops/op.h"
#include "tensor/tensor.h"
#include "grad/grad.h"

#define COLS_BUDGET ((int64_t)32 << 20)

/* One convolution's geometry: input (N, C, H, W), kernel (O, C, K, L),
 * output (N, O, OH, OW). */
typedef struct geom {
    int64_t N, C, H, W, O, K, L, OH, OW;
    int64_t ph, pw, sh, sw, dh, dw;
} geom;

/* ---- attributes ---- */

static const char *const CONV_KEYS[] = {"border_mode", "subsample", "filter_dilation",
                                        "filter_flip", NULL};

static json_object *attr_get(tg_node *n, const char *key) {
    json_object *v = NULL;
    if (n->attrs && json_object_object_get_ex(n->attrs, key, &v)) return v;
    return NULL;
}

static int attr_put(tg_node *n, const char *key, json_object *v, tg_ctx *ctx) {
    if (!v) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    if (!n->attrs && !(n->attrs = json_object_new_object())) {
        json_object_put(v);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    if (json_object_object_add(n->attrs, key, v)) {
        json_object_put(v);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    return TG_OK;
}

static void free_extra(tg_attrs *a) {
    tg_free(a->extra);
    a->extra = NULL;
}

static int conv_attrs(tg_node *n, tg_ctx *ctx) {
    static const int64_t ONE[2] = {1, 1};
    conv_p *p = tg_calloc(1, sizeof *p);
    if (!p) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    free_extra(&n->a);
    n->a.extra = p;
    json_object *bm = attr_get(n, "border_mode");
    int rc;
    if (!bm) {
        p->bmode = BM_VALID;
        if ((rc = attr_put(n, "border_mode", json_object_new_string("valid"), ctx))) return rc;
    } else if (json_object_is_type(bm, json_type_string)) {
        const char *s = json_object_get_string(bm);
        if (!strcmp(s, "valid")) p->bmode = BM_VALID;
        else if (!strcmp(s, "full")) p->bmode = BM_FULL;
        else if (!strcmp(s, "half")) p->bmode = BM_HALF;
        else
            return tg_errorf(ctx, TG_ELOAD, "attrs.border_mode: expected \"valid\", \"full\", "
                             "\"half\" or [pr, pc], got \"%s\"", s);
    } else if (tg_json_int_pair(bm, 0, p->pad)) {
        p->bmode = BM_EXPLICIT;
    } else {
        return tg_errorf(ctx, TG_ELOAD, "attrs.border_mode: expected \"valid\", \"full\", "
                         "\"half\" or a list of two integers from 0 to %d", INT_MAX);
    }
    if ((rc = tg_attr_int_pair(n, "subsample", ONE, 1, p->sub, ctx)) ||
        (rc = tg_attr_int_pair(n, "filter_dilation", ONE, 1, p->dil, ctx)) ||
        (rc = tg_attr_bool(n, "filter_flip", true, &p->flip, ctx)))
        return rc;
    return TG_OK;
}

/* ---- geometry ---- */

int64_t tg_conv_pad(const conv_p *p, int d, int64_t k) {
    int64_t kd = (k - 1) * p->dil[d] + 1;
    switch (p->bmode) {
    case BM_FULL: return kd - 1;
    case BM_HALF: return kd / 2;
    case BM_EXPLICIT: return p->pad[d];
    default: return 0;
    }
}

int64_t tg_conv_out_len(const conv_p *p, int d, int64_t in, int64_t k) {
    if (in < 0 || k < 0) return -2;
    if (k == 0) return -1;
    /* Static lengths may be anything up to 2^63 - 1: the dilated kernel
     * and the padded input must fit int64 (then so does the pad). */
    if (k - 1 > (INT64_MAX - 1) / p->dil[d]) return -3;
    int64_t kd = (k - 1) * p->dil[d] + 1, pad = tg_conv_pad(p, d, k), span;
    if (__builtin_add_overflow(in, pad, &span) || __builtin_add_overflow(span, pad, &span)) return -3;
    if (span < kd) return -1;
    return (span - kd) / p->sub[d] + 1;
}

int tg_conv_out_lengths(const conv_p *p, int64_t H, int64_t W, int64_t K, int64_t L, int64_t *OH, int64_t *OW,
                        tg_ctx *ctx) {
    *OH = tg_conv_out_len(p, 0, H, K);
    *OW = tg_conv_out_len(p, 1, W, L);
    if (*OH == -3 || *OW == -3)
        return tg_errorf(ctx, TG_ESHAPE, "a %lldx%lld kernel dilated %lldx%lld over a %lldx%lld input: "
                         "lengths past 2^63 - 1", (long long)K, (long long)L, (long long)p->dil[0],
                         (long long)p->dil[1], (long long)H, (long long)W);
    if (*OH < 0 || *OW < 0)
        return tg_errorf(ctx, TG_ESHAPE, "impossible output shape: a %lldx%lld kernel (dilated "
                         "%lldx%lld) does not fit a %lldx%lld input padded by (%lld, %lld)",
                         (long long)K, (long long)L, (long long)((K - 1) * p->dil[0] + 1),
                         (long long)((L - 1) * p->dil[1] + 1), (long long)H, (long long)W,
                         (long long)tg_conv_pad(p, 0, K), (long long)tg_conv_pad(p, 1, L));
    return TG_OK;
}

/* Fill g's padding, strides, dilations and output lengths from its input
 * and kernel lengths. */
static int geom_finish(geom *g, const conv_p *p, tg_ctx *ctx) {
    g->ph = tg_conv_pad(p, 0, g->K);
    g->pw = tg_conv_pad(p, 1, g->L);
    g->sh = p->sub[0];
    g->sw = p->sub[1];
    g->dh = p->dil[0];
    g->dw = p->dil[1];
    return tg_conv_out_lengths(p, g->H, g->W, g->K, g->L, &g->OH, &g->OW, ctx);
}

/* ---- type inference ---- */

static int want_4d(tg_node *n, int i, tg_ctx *ctx) {
    const tg_var *v = n->inputs[i];
    if (v->type.ndim != 4)
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s': expected a 4-d array, got %d-d", i, v->id,
                         v->type.ndim);
    if (v->type.dtype == TG_DTYPE_INVALID)
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s': no dtype", i, v->id);
    return TG_OK;
}

/* shp: an integer vector of length 4; *c gets its constant value (or NULL). */
static int want_shape_vec(tg_node *n, int i, int64_t *vals, bool *known, tg_ctx *ctx) {
    tg_var *v = n->inputs[i];
    *known = false;
    if (v->type.ndim != 1 || !tg_dtype_is_int(v->type.dtype) ||
        (v->type.shape[0] >= 0 && v->type.shape[0] != 4))
        return tg_errorf(ctx, TG_ETYPE, "inputs[%d] '%s': expected an integer vector of length 4",
                         i, v->id);
    const tg_array *c = tg_const_input(n, i);
    if (c && c->ndim == 1 && c->shape[0] == 4) {
        for (int k = 0; k < 4; k++) {
            vals[k] = tg_load_len(c->dtype, c->data + k * c->strides[0]);
            if (vals[k] < 0)
                return tg_errorf(ctx, TG_ESHAPE, "inputs[%d] '%s': negative length %lld", i, v->id,
                                 (long long)vals[k]);
        }
        *known = true;
    }
    return TG_OK;
}

static tg_dtype out_dtype(tg_dtype a, tg_dtype b) {
    return tg_dtype_float_of(tg_dtype_promote(a, b));
}

static bool differ(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

static int conv_infer(tg_node *n, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    int rc;
    if ((rc = want_4d(n, 0, ctx)) || (rc = want_4d(n, 1, ctx))) return rc;
    const tg_type *x = &n->inputs[0]->type, *w = &n->inputs[1]->type;
    if (differ(x->shape[1], w->shape[1]))
        return tg_errorf(ctx, TG_ESHAPE, "inputs[0] '%s' has %lld channels but inputs[1] '%s' "
                         "expects %lld", n->inputs[0]->id, (long long)x->shape[1],
                         n->inputs[1]->id, (long long)w->shape[1]);
    int64_t shape[4] = {x->shape[0], w->shape[0], -1, -1};
    for (int d = 0; d < 2; d++) {
        int64_t o = tg_conv_out_len(p, d, x->shape[2 + d], w->shape[2 + d]);
        if (o == -1)
            return tg_errorf(ctx, TG_ESHAPE, "impossible output shape: the kernel (%lld) does not "
                             "fit the padded input (%lld) along dimension %d",
                             (long long)w->shape[2 + d], (long long)x->shape[2 + d], 2 + d);
        if (o == -3)
            return tg_errorf(ctx, TG_ESHAPE, "the kernel (%lld, dilated %lld) and the padded input "
                             "(%lld) along dimension %d pass 2^63 - 1",
                             (long long)w->shape[2 + d], (long long)p->dil[d], (long long)x->shape[2 + d],
                             2 + d);
        shape[2 + d] = o < 0 ? -1 : o; /* (-2: a length unknown until run time) */
    }
    tg_set_out_type(n, 0, out_dtype(x->dtype, w->dtype), 4, shape);
    return TG_OK;
}

/* grad_inputs(w, gy, shp) and grad_weights(x, gy, shp). */
static int grad_infer(tg_node *n, bool inputs, tg_ctx *ctx) {
    int rc;
    int64_t s[4];
    bool known;
    if ((rc = want_4d(n, 0, ctx)) || (rc = want_4d(n, 1, ctx)) ||
        (rc = want_shape_vec(n, 2, s, &known, ctx)))
        return rc;
    const tg_type *a = &n->inputs[0]->type, *gy = &n->inputs[1]->type;
    int64_t shape[4];
    if (known) {
        memcpy(shape, s, sizeof shape);
    } else if (inputs) {
        int64_t t[4] = {gy->shape[0], a->shape[1], -1, -1};
        memcpy(shape, t, sizeof t);
    } else {
        int64_t t[4] = {gy->shape[1], a->shape[1], -1, -1};
        memcpy(shape, t, sizeof t);
    }
    /* Channel counts that contradict each other statically. */
    bool bad = inputs ? differ(a->shape[0], gy->shape[1]) || differ(a->shape[1], shape[1]) ||
                            differ(gy->shape[0], shape[0])
                      : differ(a->shape[0], gy->shape[0]) || differ(gy->shape[1], shape[0]) ||
                            differ(a->shape[1], shape[1]);
    if (bad)
        return tg_errorf(ctx, TG_ESHAPE, "inputs '%s' %s, '%s' and the shape do not agree on "
                         "the batch or channel lengths", n->inputs[0]->id,
                         inputs ? "(weights)" : "(inputs)", n->inputs[1]->id);
    tg_set_out_type(n, 0, out_dtype(a->dtype, gy->dtype), 4, shape);
    return TG_OK;
}

static int gi_infer(tg_node *n, tg_ctx *ctx) { return grad_infer(n, true, ctx); }
static int gw_infer(tg_node *n, tg_ctx *ctx) { return grad_infer(n, false, ctx); }

/* ---- kernels ---- */

/* The j range [*j0, *j1) for which 0 <= j*s + off < len, j < n. */
static void valid_range(int64_t off, int64_t s, int64_t len, int64_t n, int64_t *j0,
                        int64_t *j1) {
    int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t hi = len - off <= 0 ? 0 : (len - off + s - 1) / s;
    if (hi > n) hi = n;
    if (lo > hi) lo = hi;
    *j0 = lo;
    *j1 = hi;
}

#define IM2COL(T, SFX)                                                                  \
    /* x: one image (C, H, W); cols: rows (c, a, b) of ld entries, this image's  \
     * OH*OW columns start at cols. Only channel c. */                                \
    static void im2col_##SFX(const geom *g, const T *x, int64_t c, T *cols, int64_t ld) { \
        const int64_t ohw = g->OH * g->OW;                                              \
        for (int64_t a = 0; a < g->K; a++) {                                            \
            int64_t i0, i1;                                                             \
            valid_range(a * g->dh - g->ph, g->sh, g->H, g->OH, &i0, &i1);               \
            for (int64_t b = 0; b < g->L; b++) {                                        \
                T *dst = cols + ((c * g->K + a) * g->L + b) * ld;                       \
                int64_t j0, j1, offw = b * g->dw - g->pw;                               \
                valid_range(offw, g->sw, g->W, g->OW, &j0, &j1);                        \
                memset(dst, 0, (size_t)(i0 * g->OW) * sizeof(T));                       \
                for (int64_t i = i0; i < i1; i++) {                                     \
                    const T *src = x + (c * g->H + i * g->sh + a * g->dh - g->ph) * g->W; \
                    T *d = dst + i * g->OW;                                             \
                    for (int64_t j = 0; j < j0; j++) d[j] = 0;                          \
                    if (g->sw == 1)                                                     \
                        memcpy(d + j0, src + j0 + offw, (size_t)(j1 - j0) * sizeof(T)); \
                    else                                                                \
                        for (int64_t j = j0; j < j1; j++) d[j] = src[j * g->sw + offw]; \
                    for (int64_t j = j1; j < g->OW; j++) d[j] = 0;                      \
                }                                                                       \
                memset(dst + i1 * g->OW, 0, (size_t)(ohw - i1 * g->OW) * sizeof(T));   \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    /* The adjoint: x (channel c of one image) += the columns. */                      \
    static void col2im_##SFX(const geom *g, T *x, int64_t c, const T *cols, int64_t ld) { \
        for (int64_t a = 0; a < g->K; a++) {                                            \
            int64_t i0, i1;                                                             \
            valid_range(a * g->dh - g->ph, g->sh, g->H, g->OH, &i0, &i1);               \
            for (int64_t b = 0; b < g->L; b++) {                                        \
                const T *src = cols + ((c * g->K + a) * g->L + b) * ld;                 \
                int64_t j0, j1, offw = b * g->dw - g->pw;                               \
                valid_range(offw, g->sw, g->W, g->OW, &j0, &j1);                        \
                for (int64_t i = i0; i < i1; i++) {                                     \
                    T *d = x + (c * g->H + i * g->sh + a * g->dh - g->ph) * g->W;       \
                    const T *s = src + i * g->OW;                                       \
                    if (g->sw == 1) {                                                   \
                        _Pragma("omp simd") for (int64_t j = j0; j < j1; j++) d[j + offw] += s[j]; \
                    } else {                                                            \
                        for (int64_t j = j0; j < j1; j++) d[j * g->sw + offw] += s[j];  \
                    }                                                                   \
                }                                                                       \
            }                                                                           \
        }                                                                               \
    }
IM2COL(float, f32)
IM2COL(double, f64)

/* C (M x N, ldc) = alpha op(A) op(B) + beta C. */
static void gemm(tg_dtype wd, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                 int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    CBLAS_TRANSPOSE a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
    tg_blas_guard bg = tg_blas_for((double)M, (double)N, (double)K); /* (op.h) */
    if (wd == TG_FLOAT64)
        cblas_dgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb,
                    beta, C, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb,
                    (float)beta, C, (int)ldc);
    tg_blas_restore(bg);
}

/* im2col of images n0..n0+G-1 of x (N, C, H, W) into cols (CKK x G*OHW). */
static void im2col_group(tg_dtype wd, const geom *g, const char *x, int64_t n0, int64_t G,
                         char *cols) {
    const int64_t ohw = g->OH * g->OW, ld = G * ohw, rows = G * g->C;
    const size_t e = tg_isize(wd);
    const int64_t work = rows * g->K * g->L * ohw;
    int nth = work >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
    TG_PAR_FOR(nth, r, rows, {
        int64_t gi = r / g->C, c = r % g->C;
        const char *img = x + (size_t)((n0 + gi) * g->C * g->H * g->W) * e;
        char *dst = cols + (size_t)(gi * ohw) * e;
        if (wd == TG_FLOAT64) im2col_f64(g, (const double *)img, c, (double *)dst, ld);
        else im2col_f32(g, (const float *)img, c, (float *)dst, ld);
    });
}

/* gx images n0.. += col2im of dcols (CKK x G*OHW). */
static void col2im_group(tg_dtype wd, const geom *g, char *x, int64_t n0, int64_t G,
                         const char *cols) {
    const int64_t ohw = g->OH * g->OW, ld = G * ohw, rows = G * g->C;
    const size_t e = tg_isize(wd);
    const int64_t work = rows * g->K * g->L * ohw;
    int nth = work >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
    TG_PAR_FOR(nth, r, rows, {
        int64_t gi = r / g->C, c = r % g->C;
        char *img = x + (size_t)((n0 + gi) * g->C * g->H * g->W) * e;
        const char *src = cols + (size_t)(gi * ohw) * e;
        if (wd == TG_FLOAT64) col2im_f64(g, (double *)img, c, (const double *)src, ld);
        else col2im_f32(g, (float *)img, c, (const float *)src, ld);
    });
}

/* Between (G, O, OHW) images and an (O, G*OHW) matrix; to_mat picks the
 * direction. */
static void regroup(const geom *g, size_t e, char *img, char *mat, int64_t G, bool to_mat) {
    const int64_t ohw = g->OH * g->OW;
    const size_t row = (size_t)ohw * e;
    int nth = G * g->O * ohw >= TG_PARALLEL_MIN ? omp_get_max_threads() : 1;
    TG_PAR_FOR(nth, r, G * g->O, {
        int64_t gi = r / g->O, o = r % g->O;
        char *a = img + (size_t)r * row, *m = mat + (size_t)(o * G + gi) * row;
        if (to_mat) memcpy(m, a, row);
        else memcpy(a, m, row);
    });
}

/* a in dtype wd, C-contiguous: itself or a converted copy in *tmp. */
static const char *as_work(const tg_array *a, tg_dtype wd, tg_array **tmp, tg_ctx *ctx) {
    *tmp = NULL;
    if (a->dtype == wd && tg_array_is_contiguous(a)) return a->data;
    if (!(*tmp = tg_array_copy(a, wd))) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    return (*tmp)->data;
}

/* The kernel (O, C, K, L) flipped in both spatial dimensions when flip
 * (Theano flips, then correlates), as a C-contiguous array in wd. */
static const char *kernel_work(const tg_array *w, tg_dtype wd, bool flip, tg_array **tmp,
                               tg_ctx *ctx) {
    const char *p = as_work(w, wd, tmp, ctx);
    if (!p || !flip) return p;
    if (!*tmp && !(*tmp = tg_array_copy(w, wd))) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    const int64_t planes = w->shape[0] * w->shape[1], K = w->shape[2], L = w->shape[3];
    const size_t e = tg_isize(wd);
    char *d = (*tmp)->data, t[8];
    for (int64_t pl = 0; pl < planes; pl++) {
        char *q = d + (size_t)(pl * K * L) * e;
        for (int64_t i = 0; i < K * L / 2; i++) {
            char *u = q + (size_t)i * e, *v = q + (size_t)(K * L - 1 - i) * e;
            memcpy(t, u, e);
            memcpy(u, v, e);
            memcpy(v, t, e);
        }
    }
    return d;
}

/* The result: out[0] in dtype odt, or a work array in wd when they
 * differ (float16), copied over by finish(). */
static int result_begin(tg_array **out, tg_dtype odt, tg_dtype wd, const int64_t *shape,
                        tg_array **work, tg_ctx *ctx) {
    int rc = tg_array_prepare(out, odt, 4, shape, ctx);
    if (rc) return rc;
    *work = NULL;
    if (odt != wd && !(*work = tg_array_empty(wd, 4, shape)))
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return TG_OK;
}

static int64_t group_size(int64_t N, int64_t per_image) {
    int64_t G = per_image > 0 ? COLS_BUDGET / per_image : N;
    if (G < 1) G = 1;
    if (G > N) G = N;
    return G;
}

static int too_big(const geom *g, int64_t G, tg_ctx *ctx) {
    int64_t ckk = g->C * g->K * g->L;
    if (ckk > INT_MAX || G * g->OH * g->OW > INT_MAX || g->O > INT_MAX ||
        ckk * g->OH * g->OW > INT64_MAX / 16 / (G > 0 ? G : 1))
        return tg_errorf(ctx, TG_EUNSUPPORTED, "convolution too large for BLAS");
    return TG_OK;
}

/* ---- one image per thread ----
 *
 * With at least as many images as threads, each thread takes whole images
 * with its own column buffer and a single-threaded gemm: no scatter of the
 * product, and OpenBLAS's threads do not compete with OpenMP's (spinning
 * OpenMP workers would slow OpenBLAS's pool down). OpenBLAS's thread count
 * is process-wide: it is set to 1 for the loop and restored after
 * (tg_blas_single). */

/* Threads for the per-image path, or 0 to use the grouped path (fewer
 * images than threads: a threaded gemm over a group does better). */
static int image_threads(const geom *g) {
    int nth = omp_get_max_threads();
    double work = (double)g->N * (double)(g->O * g->OH * g->OW) * (double)(g->C * g->K * g->L);
    if (nth <= 1 || work < (double)TG_PARALLEL_MIN) return 1;
    return g->N >= nth ? nth : 0;
}

/* One image's columns, rows ld apart (ld >= OH*OW; what lies past OH*OW in
 * a row is left as it is). */
static void im2col_image_ld(tg_dtype wd, const geom *g, const char *img, char *cols, int64_t ld) {
    for (int64_t c = 0; c < g->C; c++) {
        if (wd == TG_FLOAT64) im2col_f64(g, (const double *)img, c, (double *)cols, ld);
        else im2col_f32(g, (const float *)img, c, (float *)cols, ld);
    }
}

static void im2col_image(tg_dtype wd, const geom *g, const char *img, char *cols) {
    im2col_image_ld(wd, g, img, cols, g->OH * g->OW);
}

static void col2im_image(tg_dtype wd, const geom *g, char *img, const char *cols) {
    const int64_t ohw = g->OH * g->OW;
    for (int64_t c = 0; c < g->C; c++) {
        if (wd == TG_FLOAT64) col2im_f64(g, (double *)img, c, (const double *)cols, ohw);
        else col2im_f32(g, (float *)img, c, (const float *)cols, ohw);
    }
}

enum { PI_FWD, PI_GRAD_IN, PI_GRAD_W };

/* This thread's share of per_image's images (an `omp for`: all of them
 * outside a parallel region), with its own cols and part. */
static void per_image_share(int kind, tg_dtype wd, const geom *g, const char *x, const char *wm, char *y,
                            char *cols, char *part) {
    const size_t e = tg_isize(wd);
    const int64_t ohw = g->OH * g->OW, ckk = g->C * g->K * g->L, wsz = g->O * ckk;
    const int64_t xsz = g->C * g->H * g->W, ysz = g->O * ohw;
    int t = omp_get_thread_num();
    char *c = cols + (size_t)(t * ckk * ohw) * e;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g->N; n++) {
        char *xi = (char *)x + (size_t)(n * xsz) * e, *yi = y + (size_t)(n * ysz) * e;
        if (kind == PI_FWD) {
            im2col_image(wd, g, xi, c);
            gemm(wd, false, false, g->O, ohw, ckk, wm, ckk, c, ohw, 0.0, yi, ohw);
        } else if (kind == PI_GRAD_IN) {
            gemm(wd, true, false, ckk, ohw, g->O, wm, ckk, yi, ohw, 0.0, c, ohw);
            col2im_image(wd, g, xi, c);
        } else {
            im2col_image(wd, g, xi, c);
            gemm(wd, false, true, g->O, ckk, ohw, yi, ohw, c, ohw, 1.0, part + (size_t)(t * wsz) * e, ckk);
        }
    }
}

/* The per-image loop of one op. fwd: y[n] = W cols(x[n]); grad_in: x[n]
 * = col2im(W^T gy[n]) (x zeroed by the caller); grad_w: acc += gy[n]
 * cols(x[n])^T, with one accumulator per thread summed into acc at the
 * end (static schedule: the same sums on every run). */
static int per_image(int kind, tg_dtype wd, const geom *g, int nth, const char *x,
                     const char *wm, char *y, char *acc, tg_ctx *ctx) {
    const size_t e = tg_isize(wd);
    const int64_t ohw = g->OH * g->OW, ckk = g->C * g->K * g->L, wsz = g->O * ckk;
    char *cols = tg_malloc((size_t)(nth * ckk * ohw) * e);
    char *part = kind == PI_GRAD_W ? tg_calloc((size_t)(nth * wsz), e) : NULL;
    if (!cols || (kind == PI_GRAD_W && !part)) {
        tg_free(cols);
        tg_free(part);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    tg_blas_guard bg = nth > 1 ? tg_blas_single() : (tg_blas_guard){0};
    /* (no team for one thread: see TG_PAR_FOR; the loop's `omp for`
     * then runs it all in this thread) */
    if (nth > 1) {
#pragma omp parallel num_threads(nth)
        per_image_share(kind, wd, g, x, wm, y, cols, part);
    } else {
        per_image_share(kind, wd, g, x, wm, y, cols, part);
    }
    tg_blas_restore(bg);
    if (kind == PI_GRAD_W) {
        for (int64_t i = 0; i < wsz; i++) {
            if (wd == TG_FLOAT64) {
                double s = 0;
                for (int t = 0; t < nth; t++) s += ((const double *)part)[t * wsz + i];
                ((double *)acc)[i] = s;
            } else {
                float s = 0;
                for (int t = 0; t < nth; t++) s += ((const float *)part)[t * wsz + i];
                ((float *)acc)[i] = s;
            }
        }
    }
    tg_free(cols);
    tg_free(part);
    return TG_OK;
}

/* TG_CONV as this call finds it (read at each call: the tests and
 * bench_conv set it between calls), IM2COL on a CPU without AVX-512. */
typedef enum { MODE_AUTO, MODE_IM2COL, MODE_DIRECT } conv_mode;
static conv_mode mode_now(void) {
    if (!tg_conv_direct_available()) return MODE_IM2COL;
    const char *m = getenv("TG_CONV");
    if (m && !strcmp(m, "im2col")) return MODE_IM2COL;
    return m && !strcmp(m, "direct") ? MODE_DIRECT : MODE_AUTO;
}

/* Whether a stride-1 convolution of these sizes (N images of C x H x W
 * to O channels, kernel K x L, padding ph, pw) with outputs narrower than
 * 8 still takes the direct path: where the direct kernel's vectors hold
 * output channels (channel or batch tiles) and there are enough of them
 * to fill one (bench_conv, 2 threads, 64 images, 3x3 "half": 128x4x4 to
 * 128 channels 4.2 ms through im2col, 0.96 direct; 512x2x2 to 512, 34 ms
 * and 3.2). */
static bool narrow_direct(tg_dtype wd, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                          int64_t K, int64_t L, int64_t ph, int64_t pw) {
    if (O < (wd == TG_FLOAT64 ? 8 : 16)) return false;
    const char *t = wd == TG_FLOAT64 ? tg_conv_direct_tiling_f64(N, C, H, W, O, K, L, ph, pw)
                                     : tg_conv_direct_tiling_f32(N, C, H, W, O, K, L, ph, pw);
    return t && (!strcmp(t, "channels") || !strcmp(t, "batch"));
}

/* Whether the forward op takes the direct path (see the top). */
static bool use_direct(const geom *g, tg_dtype wd) {
    if ((wd != TG_FLOAT32 && wd != TG_FLOAT64) || g->sh != 1 || g->sw != 1 || g->dh != 1 ||
        g->dw != 1)
        return false;
    const conv_mode m = mode_now();
    return m == MODE_DIRECT ||
           (m == MODE_AUTO && (g->OW >= 8 || narrow_direct(wd, g->N, g->C, g->H, g->W, g->O, g->K,
                                                           g->L, g->ph, g->pw)));
}

static int conv_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    const tg_array *x = in[0], *w = in[1];
    tg_array *tx = NULL, *tw = NULL, *work = NULL;
    char *cols = NULL, *tmp = NULL;
    int rc = TG_OK;
    const tg_dtype odt = n->outputs[0]->type.dtype;
    const tg_dtype wd = odt == TG_FLOAT16 ? TG_FLOAT32 : odt;
    const size_t e = tg_isize(wd);
    if (x->ndim != 4 || w->ndim != 4)
        return tg_errorf(ctx, TG_ESHAPE, "expected 4-d inputs");
    geom g = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
              .O = w->shape[0], .K = w->shape[2], .L = w->shape[3]};
    if (w->shape[1] != g.C)
        return tg_errorf(ctx, TG_ESHAPE, "the input has %lld channels but the kernel expects %lld",
                         (long long)g.C, (long long)w->shape[1]);
    if ((rc = geom_finish(&g, p, ctx))) return rc;
    const int64_t shape[4] = {g.N, g.O, g.OH, g.OW}, ohw = g.OH * g.OW,
                  ckk = g.C * g.K * g.L;
    if ((rc = result_begin(out, odt, wd, shape, &work, ctx))) goto done;
    char *y = work ? work->data : (*out)->data;
    if (g.N * g.O * ohw == 0) goto finish;
    if (ckk == 0) {
        memset(y, 0, (size_t)(g.N * g.O * ohw) * e);
        goto finish;
    }
    if (use_direct(&g, wd)) {
        const char *xd = as_work(x, wd, &tx, ctx), *wdp = as_work(w, wd, &tw, ctx);
        if (!xd || !wdp) {
            rc = TG_ENOMEM;
            goto done;
        }
        double work = (double)g.N * (double)(g.O * ohw) * (double)ckk;
        int nth = work < (double)TG_PARALLEL_MIN ? 1 : omp_get_max_threads();
        bool ok = wd == TG_FLOAT64
                      ? tg_conv_direct_f64(g.N, g.C, g.H, g.W, g.O, g.K, g.L, g.ph, g.pw, p->flip,
                                           (const double *)xd, (const double *)wdp, (double *)y,
                                           nth)
                      : tg_conv_direct_f32(g.N, g.C, g.H, g.W, g.O, g.K, g.L, g.ph, g.pw, p->flip,
                                           (const float *)xd, (const float *)wdp, (float *)y, nth);
        if (!ok) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        goto finish;
    }
    const char *xp = as_work(x, wd, &tx, ctx), *wp = kernel_work(w, wd, p->flip, &tw, ctx);
    if (!xp || !wp) {
        rc = TG_ENOMEM;
        goto done;
    }
    const int nth = image_threads(&g);
    const int64_t G = nth ? 1 : group_size(g.N, ckk * ohw * (int64_t)e);
    if ((rc = too_big(&g, G, ctx))) goto done;
    if (nth) {
        rc = per_image(PI_FWD, wd, &g, nth, xp, wp, y, NULL, ctx);
        goto finish;
    }
    cols = tg_malloc((size_t)(ckk * G * ohw) * e);
    if (G > 1) tmp = tg_malloc((size_t)(g.O * G * ohw) * e);
    if (!cols || (G > 1 && !tmp)) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += G) {
        int64_t gn = g.N - n0 < G ? g.N - n0 : G;
        char *dst = y + (size_t)(n0 * g.O * ohw) * e;
        im2col_group(wd, &g, xp, n0, gn, cols);
        gemm(wd, false, false, g.O, gn * ohw, ckk, wp, ckk, cols, gn * ohw, 0.0,
             gn > 1 ? tmp : dst, gn * ohw);
        if (gn > 1) regroup(&g, e, dst, tmp, gn, false);
    }
finish:
    if (work && (rc = tg_array_assign(*out, work, ctx))) goto done;
done:
    tg_array_free(tx);
    tg_array_free(tw);
    tg_array_free(work);
    tg_free(cols);
    tg_free(tmp);
    return rc;
}

/* The run-time shp vector (4 non-negative lengths). */
static int read_shp(const tg_array *s, int64_t *v, tg_ctx *ctx) {
    if (s->ndim != 1 || s->shape[0] != 4)
        return tg_errorf(ctx, TG_ESHAPE, "the shape input must have 4 entries");
    for (int k = 0; k < 4; k++) {
        v[k] = tg_load_len(s->dtype, s->data + k * s->strides[0]);
        if (v[k] < 0)
            return tg_errorf(ctx, TG_ESHAPE, "the shape input has a negative length %lld",
                             (long long)v[k]);
    }
    return TG_OK;
}

static int check_gy(const geom *g, const tg_array *gy, tg_ctx *ctx) {
    if (gy->ndim != 4 || gy->shape[0] != g->N || gy->shape[1] != g->O || gy->shape[2] != g->OH ||
        gy->shape[3] != g->OW)
        return tg_errorf(ctx, TG_ESHAPE, "the output gradient has shape (%lld, %lld, %lld, %lld), "
                         "the convolution gives (%lld, %lld, %lld, %lld)",
                         (long long)gy->shape[0], (long long)gy->shape[1],
                         (long long)gy->shape[2], (long long)gy->shape[3], (long long)g->N,
                         (long long)g->O, (long long)g->OH, (long long)g->OW);
    return TG_OK;
}

/* Whether conv2d_grad_inputs takes the direct path: with stride 1 and no
 * dilation, the input gradient is the forward convolution of gy, padded
 * by (K-1-ph, L-1-pw), with the kernel's channels swapped and its taps
 * read the other way (flip negated):
 *   gx[c][y][x] = sum over o, a, b of gy[o][y - a + ph][x - b + pw] w[o][c][a][b].
 * Where gy is much smaller than gx ("valid" with a large kernel) the
 * direct kernel multiplies many padding zeros: it is taken while gx has at
 * most 3 times gy's pixels (the convnet example's second layer: 144
 * against 64), as the forward for rows at least 8 wide or narrower ones
 * of many channels (narrow_direct), and for at least
 * 8 input channels, the direct kernel's block of output channels (with 1
 * or 3, bench_conv's first layers, it ran at 1/8 or 3/8 of its speed and
 * took 1.4-2x the time of im2col + BLAS). */
static bool gi_use_direct(const geom *g, tg_dtype wd) {
    if ((wd != TG_FLOAT32 && wd != TG_FLOAT64) || g->sh != 1 || g->sw != 1 || g->dh != 1 ||
        g->dw != 1 || g->ph > g->K - 1 || g->pw > g->L - 1)
        return false;
    const conv_mode m = mode_now();
    return m == MODE_DIRECT ||
           (m == MODE_AUTO && g->C >= 8 && g->H * g->W <= 3 * g->OH * g->OW &&
            (g->W >= 8 || narrow_direct(wd, g->N, g->O, g->OH, g->OW, g->C, g->K, g->L,
                                        g->K - 1 - g->ph, g->L - 1 - g->pw)));
}

/* conv2d_grad_inputs(w, gy, shp): the transposed convolution. */
static int gi_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    const tg_array *w = in[0], *gy = in[1];
    tg_array *tw = NULL, *tg = NULL, *work = NULL;
    char *cols = NULL, *tmp = NULL;
    int64_t s[4];
    int rc;
    const tg_dtype odt = n->outputs[0]->type.dtype;
    const tg_dtype wd = odt == TG_FLOAT16 ? TG_FLOAT32 : odt;
    const size_t e = tg_isize(wd);
    if ((rc = read_shp(in[2], s, ctx))) return rc;
    if (w->ndim != 4) return tg_errorf(ctx, TG_ESHAPE, "expected a 4-d kernel");
    geom g = {.N = s[0], .C = s[1], .H = s[2], .W = s[3], .O = w->shape[0], .K = w->shape[2],
              .L = w->shape[3]};
    if (w->shape[1] != g.C)
        return tg_errorf(ctx, TG_ESHAPE, "the shape has %lld channels but the kernel expects %lld",
                         (long long)g.C, (long long)w->shape[1]);
    if ((rc = geom_finish(&g, p, ctx)) || (rc = check_gy(&g, gy, ctx))) return rc;
    /* (shp's lengths multiply only once the result has been allowed:
       with a large stride they may pass 2^63 - 1) */
    if ((rc = result_begin(out, odt, wd, s, &work, ctx))) goto done;
    const int64_t ohw = g.OH * g.OW, ckk = g.C * g.K * g.L, total = g.N * g.C * g.H * g.W;
    char *gx = work ? work->data : (*out)->data;
    if (total > 0 && g.O * ohw > 0 && ckk > 0 && gi_use_direct(&g, wd)) {
        const char *w0 = as_work(w, wd, &tw, ctx), *gp = as_work(gy, wd, &tg, ctx);
        if (!w0 || !gp) {
            rc = TG_ENOMEM;
            goto done;
        }
        /* the kernel (C, O, K, L) */
        const int64_t kl = g.K * g.L;
        if (!(tmp = tg_malloc((size_t)(g.O * ckk) * e))) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        for (int64_t o = 0; o < g.O; o++)
            for (int64_t c = 0; c < g.C; c++)
                memcpy(tmp + (size_t)((c * g.O + o) * kl) * e, w0 + (size_t)((o * g.C + c) * kl) * e,
                       (size_t)kl * e);
        double wk = (double)total * (double)(g.O * kl);
        int nth = wk < (double)TG_PARALLEL_MIN ? 1 : omp_get_max_threads();
        bool ok = wd == TG_FLOAT64
                      ? tg_conv_direct_f64(g.N, g.O, g.OH, g.OW, g.C, g.K, g.L, g.K - 1 - g.ph,
                                           g.L - 1 - g.pw, !p->flip, (const double *)gp,
                                           (const double *)tmp, (double *)gx, nth)
                      : tg_conv_direct_f32(g.N, g.O, g.OH, g.OW, g.C, g.K, g.L, g.K - 1 - g.ph,
                                           g.L - 1 - g.pw, !p->flip, (const float *)gp,
                                           (const float *)tmp, (float *)gx, nth);
        if (!ok) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        goto finish;
    }
    memset(gx, 0, (size_t)total * e);
    if (total == 0 || g.O * ohw == 0 || ckk == 0) goto finish;
    const char *wp = kernel_work(w, wd, p->flip, &tw, ctx), *gp = as_work(gy, wd, &tg, ctx);
    if (!wp || !gp) {
        rc = TG_ENOMEM;
        goto done;
    }
    const int nth = image_threads(&g);
    const int64_t G = nth ? 1 : group_size(g.N, ckk * ohw * (int64_t)e);
    if ((rc = too_big(&g, G, ctx))) goto done;
    if (nth) {
        rc = per_image(PI_GRAD_IN, wd, &g, nth, gx, wp, (char *)gp, NULL, ctx);
        goto finish;
    }
    cols = tg_malloc((size_t)(ckk * G * ohw) * e);
    if (G > 1) tmp = tg_malloc((size_t)(g.O * G * ohw) * e);
    if (!cols || (G > 1 && !tmp)) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += G) {
        int64_t gn = g.N - n0 < G ? g.N - n0 : G;
        char *src = (char *)gp + (size_t)(n0 * g.O * ohw) * e;
        if (gn > 1) regroup(&g, e, src, tmp, gn, true);
        gemm(wd, true, false, ckk, gn * ohw, g.O, wp, ckk, gn > 1 ? tmp : src, gn * ohw, 0.0,
             cols, gn * ohw);
        col2im_group(wd, &g, gx, n0, gn, cols);
    }
finish:
    if (work && (rc = tg_array_assign(*out, work, ctx))) goto done;
done:
    tg_array_free(tw);
    tg_array_free(tg);
    tg_array_free(work);
    tg_free(cols);
    tg_free(tmp);
    return rc;
}

/* ---- the weight gradient on AVX-512 ----
 *
 * dw[o][c][a][b] = sum over images n and outputs (i, j) of gy[n][o][i][j]
 * x[n][c][i*sh + a*dh - ph][j*sw + b*dw - pw]: a product whose factors are
 * all small (O of 8 or 16, OH*OW of 64 or 576 in the convnet example), on
 * which OpenBLAS, called per image on im2col's columns, reached 22-31
 * GFLOP/s. Here tg_conv_gw_chunk (conv_direct.c) keeps each entry's
 * partial sums in a register through a chunk of images whose data sits in
 * the cache.
 *
 * With stride 1 no columns are made. Each image is copied, padded, into a
 * buffer (C, Hp, Wp), and gy's rows are spread to rows Wp apart with zeros
 * between them; the sum over (i, j) is then one over p = i*Wp + j < (OH-1)
 * Wp + OW, and row (c, a, b) of the columns is the stretch of the padded
 * image that starts at c*Hp*Wp + a*dh*Wp + b*dw. The entries of x this
 * reads at the zeros of gy past each row's OW would turn into NaN if they
 * were not finite: an image holding an infinity or a NaN is done through
 * im2col instead (the copy checks). Other strides go through im2col, the
 * columns of a chunk side by side.
 *
 * Chunks hold a number of images fixed by the shapes; each writes its own
 * partial result, and the partials are added in chunk order, so the
 * gradient has the same bits whatever the number of threads. TG_CONV=im2col
 * keeps the BLAS path (the tests compare the two). */
#define GW_CHUNK_VECS 64
#define GW_CHUNK_BYTES ((int64_t)512 << 10)
#define GW_PARTS_BYTES ((int64_t)64 << 20)

static bool use_gw_direct(tg_dtype wd) {
    return (wd == TG_FLOAT32 || wd == TG_FLOAT64) && mode_now() != MODE_IM2COL;
}

/* Whether the weight gradient takes tg_conv_gw_batch (conv_direct.c):
 * stride 1, no dilation, planes of 16 pixels or fewer (a CIFAR network's
 * last layers, 4x4 and 2x2) and input channels that fill a vector, as
 * chosen (TG_CONV=direct keeps gw_direct, the tests compare them). Its
 * vectors hold input channels and it sums only the products whose input
 * lies inside the image; gw_direct's vectors would run over a row or two
 * of padded pixels, mostly idle (bench_conv, 2 threads, 64 images, 3x3
 * "half": 128x4x4 to 128 channels 3.9-4.1 ms, 512x2x2 to 512 151 ms). */
static bool use_gw_batch(const geom *g, tg_dtype wd) {
    return (wd == TG_FLOAT32 || wd == TG_FLOAT64) && mode_now() == MODE_AUTO &&
           tg_conv_direct_available() && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
           g->dw == 1 && g->OH * g->OW <= 16 && g->C >= (wd == TG_FLOAT64 ? 8 : 16);
}

typedef struct gwplan {
    const geom *g;
    tg_dtype wd;
    size_t e;
    bool slices;       /* stride 1: stretches of padded images */
    int64_t vl, ohw, ckk, wsz, xsz;
    int64_t G, nchunk; /* images per chunk, chunks */
    int64_t Hp, Wp, plane, xps; /* slices: a padded image, xps with slack */
    int64_t P, lda;    /* slices: the sum's length, gy's spread rows */
    int64_t ld;        /* im2col: a column row, whole vectors */
    const int64_t *boff, *coff; /* rows of the columns: the stretches', im2col's */
    size_t tsz;        /* a thread's buffers, entries */
} gwplan;

static void gw_chunk(const gwplan *q, int64_t M, int64_t R, int64_t P, int64_t G, const char *a,
                     int64_t lda, int64_t astride, const char *b, const int64_t *boff,
                     int64_t bstride, char *part) {
    if (q->wd == TG_FLOAT64)
        tg_conv_gw_chunk_f64(M, R, P, G, (const double *)a, lda, astride, (const double *)b,
                             boff, bstride, (double *)part);
    else
        tg_conv_gw_chunk_f32(M, R, P, G, (const float *)a, lda, astride, (const float *)b, boff,
                             bstride, (float *)part);
}

/* part (+)= im2col's product for images n0..n0+gn-1 one at a time, in cols
 * (one image's columns) and tmp (a partial). */
static void gw_by_image(const gwplan *q, const char *x, const char *gy, int64_t n0, int64_t gn,
                        char *cols, char *tmp, char *part) {
    const geom *g = q->g;
    for (int64_t i = 0; i < gn; i++) {
        im2col_image_ld(q->wd, g, x + (size_t)((n0 + i) * q->xsz) * q->e, cols, q->ld);
        gw_chunk(q, g->O, q->ckk, q->ohw, 1, gy + (size_t)((n0 + i) * g->O * q->ohw) * q->e,
                 q->ohw, 0, cols, q->coff, 0, i ? tmp : part);
        if (!i) continue;
        for (int64_t k = 0; k < q->wsz; k++) {
            if (q->wd == TG_FLOAT64) ((double *)part)[k] += ((const double *)tmp)[k];
            else ((float *)part)[k] += ((const float *)tmp)[k];
        }
    }
}

/* This thread's share of the chunks (an `omp for`: all of them outside a
 * parallel region), in its buffers buf (q->tsz entries, zeroed). */
static void gw_share(const gwplan *q, const char *x, const char *gy, char *buf, char *parts) {
    const geom *g = q->g;
    const size_t e = q->e;
#pragma omp for schedule(static)
    for (int64_t k = 0; k < q->nchunk; k++) {
        const int64_t n0 = k * q->G, gn = g->N - n0 < q->G ? g->N - n0 : q->G;
        char *part = parts + (size_t)(k * q->wsz) * e;
        if (!q->slices) {
            /* the columns of the chunk's images side by side */
            for (int64_t i = 0; i < gn; i++)
                im2col_image_ld(q->wd, g, x + (size_t)((n0 + i) * q->xsz) * e,
                                buf + (size_t)(i * q->ckk * q->ld) * e, q->ld);
            gw_chunk(q, g->O, q->ckk, q->ohw, gn, gy + (size_t)(n0 * g->O * q->ohw) * e,
                     q->ohw, g->O * q->ohw, buf, q->coff, q->ckk * q->ld, part);
            continue;
        }
        char *xb = buf, *ab = xb + (size_t)(q->G * q->xps) * e;
        char *cols = ab + (size_t)(q->G * g->O * q->lda + q->vl) * e;
        char *tmp = cols + (size_t)(q->ckk * q->ld + q->vl) * e;
        bool finite = true;
        for (int64_t i = 0; i < gn; i++) {
            const char *xi = x + (size_t)((n0 + i) * q->xsz) * e;
            char *bi = xb + (size_t)(i * q->xps) * e;
            finite &= q->wd == TG_FLOAT64
                          ? tg_conv_pad_finite_f64(g->C, g->H, g->W, g->ph, g->pw, q->Hp, q->Wp,
                                                   (const double *)xi, (double *)bi)
                          : tg_conv_pad_finite_f32(g->C, g->H, g->W, g->ph, g->pw, q->Hp, q->Wp,
                                                   (const float *)xi, (float *)bi);
        }
        if (!finite) {
            gw_by_image(q, x, gy, n0, gn, cols, tmp, part);
            continue;
        }
        const char *gyc = gy + (size_t)(n0 * g->O * q->ohw) * e;
        if (q->wd == TG_FLOAT64)
            tg_conv_spread_f64(gn * g->O * g->OH, g->OW, (const double *)gyc, g->OW, (double *)ab,
                               q->Wp);
        else
            tg_conv_spread_f32(gn * g->O * g->OH, g->OW, (const float *)gyc, g->OW, (float *)ab,
                               q->Wp);
        gw_chunk(q, g->O, q->ckk, q->P, gn, ab, q->lda, g->O * q->lda, xb, q->boff, q->xps, part);
    }
}

static int gw_direct(tg_dtype wd, const geom *g, const char *x, const char *gy, char *dw,
                     tg_ctx *ctx) {
    gwplan q = {.g = g, .wd = wd, .e = tg_isize(wd), .slices = g->sh == 1 && g->sw == 1};
    const int64_t e = (int64_t)q.e;
    q.vl = 64 / e;
    q.ohw = g->OH * g->OW;
    q.ckk = g->C * g->K * g->L;
    q.wsz = g->O * q.ckk;
    q.xsz = g->C * g->H * g->W;
    q.ld = (q.ohw + q.vl - 1) / q.vl * q.vl;
    int64_t per;
    if (q.slices) {
        q.Hp = g->H + 2 * g->ph;
        q.Wp = g->W + 2 * g->pw;
        q.plane = q.Hp * q.Wp;
        q.xps = g->C * q.plane + q.vl;
        q.P = (g->OH - 1) * q.Wp + g->OW;
        q.lda = g->OH * q.Wp;
        per = (q.xps + g->O * q.lda) * e;
    } else {
        per = q.ckk * q.ld * e;
    }
    /* Enough images for GW_CHUNK_VECS vectors of each entry's sum (its
     * lanes are added once a chunk: 24 sums of 16 lanes for each block),
     * as long as their data stays within GW_CHUNK_BYTES. */
    const int64_t nvec = ((q.slices ? q.P : q.ohw) + q.vl - 1) / q.vl;
    q.G = (GW_CHUNK_VECS + nvec - 1) / nvec;
    if (q.G * per > GW_CHUNK_BYTES) q.G = GW_CHUNK_BYTES / per;
    if (q.G < 1) q.G = 1;
    if (q.G > g->N) q.G = g->N;
    while ((g->N + q.G - 1) / q.G * q.wsz * e > GW_PARTS_BYTES && q.G < g->N) q.G *= 2;
    if (q.G > g->N) q.G = g->N;
    q.nchunk = (g->N + q.G - 1) / q.G;
    /* a thread's buffers: slices: the padded images, gy's spread rows,
     * one image's columns and a partial (for images that are not finite);
     * im2col: the chunk's columns; each with vl entries of slack */
    q.tsz = q.slices ? (size_t)(q.G * q.xps + q.G * g->O * q.lda + q.vl + q.ckk * q.ld + q.vl +
                                q.wsz)
                     : (size_t)(q.G * q.ckk * q.ld + q.vl);
    const double work = (double)g->N * (double)q.wsz * (double)q.ohw;
    int nth = work < (double)TG_PARALLEL_MIN ? 1 : omp_get_max_threads();
    if (nth > q.nchunk) nth = (int)q.nchunk;
    int64_t *offs = tg_malloc((size_t)(2 * q.ckk) * sizeof *offs);
    /* (zeroed: the padding of the images, the gaps between gy's rows and
     * the columns' rows past OH*OW are never written with anything else) */
    char *bufs = tg_calloc((size_t)nth * q.tsz, q.e);
    char *parts = q.nchunk > 1 ? tg_malloc((size_t)(q.nchunk * q.wsz) * q.e) : dw;
    if (!offs || !bufs || !parts) {
        tg_free(offs);
        tg_free(bufs);
        if (parts != dw) tg_free(parts);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    for (int64_t c = 0, r = 0; c < g->C; c++)
        for (int64_t a = 0; a < g->K; a++)
            for (int64_t b = 0; b < g->L; b++, r++) {
                offs[r] = c * q.plane + a * g->dh * q.Wp + b * g->dw;
                offs[q.ckk + r] = r * q.ld;
            }
    q.boff = offs;
    q.coff = offs + q.ckk;
    /* (no team for one thread: see TG_PAR_FOR) */
    if (nth > 1) {
#pragma omp parallel num_threads(nth)
        gw_share(&q, x, gy, bufs + (size_t)omp_get_thread_num() * q.tsz * q.e, parts);
    } else {
        gw_share(&q, x, gy, bufs, parts);
    }
    if (q.nchunk > 1) {
        if (wd == TG_FLOAT64) {
            const double *pp = (const double *)parts;
            double *out = (double *)dw;
            memcpy(out, pp, (size_t)q.wsz * q.e);
            for (int64_t k = 1; k < q.nchunk; k++)
                for (int64_t i = 0; i < q.wsz; i++) out[i] += pp[k * q.wsz + i];
        } else {
            const float *pp = (const float *)parts;
            float *out = (float *)dw;
            memcpy(out, pp, (size_t)q.wsz * q.e);
            for (int64_t k = 1; k < q.nchunk; k++)
                for (int64_t i = 0; i < q.wsz; i++) out[i] += pp[k * q.wsz + i];
        }
        tg_free(parts);
    }
    tg_free(offs);
    tg_free(bufs);
    return TG_OK;
}

/* conv2d_grad_weights(x, gy, shp): sum over images of gy[n] cols[n]^T. */
static int gw_run(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx) {
    const conv_p *p = n->a.extra;
    const tg_array *x = in[0], *gy = in[1];
    tg_array *tx = NULL, *tg = NULL, *work = NULL;
    char *cols = NULL, *tmp = NULL, *acc = NULL;
    int64_t s[4];
    int rc;
    const tg_dtype odt = n->outputs[0]->type.dtype;
    const tg_dtype wd = odt == TG_FLOAT16 ? TG_FLOAT32 : odt;
    const size_t e = tg_isize(wd);
    if ((rc = read_shp(in[2], s, ctx))) return rc;
    if (x->ndim != 4) return tg_errorf(ctx, TG_ESHAPE, "expected a 4-d input");
    geom g = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3], .O = s[0],
              .K = s[2], .L = s[3]};
    if (s[1] != g.C)
        return tg_errorf(ctx, TG_ESHAPE, "the input has %lld channels but the shape says %lld",
                         (long long)g.C, (long long)s[1]);
    if ((rc = geom_finish(&g, p, ctx)) || (rc = check_gy(&g, gy, ctx))) return rc;
    /* (as in gi_run: the lengths multiply once the result is allowed) */
    if ((rc = result_begin(out, odt, wd, s, &work, ctx))) goto done;
    const int64_t ohw = g.OH * g.OW, ckk = g.C * g.K * g.L, total = g.O * ckk;
    char *gw = work ? work->data : (*out)->data;
    if (total == 0) goto finish;
    if (g.N * ohw == 0) {
        memset(gw, 0, (size_t)total * e);
        goto finish;
    }
    const char *xp = as_work(x, wd, &tx, ctx), *gp = as_work(gy, wd, &tg, ctx);
    if (!xp || !gp) {
        rc = TG_ENOMEM;
        goto done;
    }
    /* With filter_flip the product is the gradient of the flipped kernel. */
    if (p->flip && !(acc = tg_malloc((size_t)total * e))) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    char *dst = p->flip ? acc : gw;
    if (use_gw_batch(&g, wd)) {
        const int nb = (double)total * (double)(g.N * ohw) < (double)TG_PARALLEL_MIN
                           ? 1
                           : omp_get_max_threads();
        const int r = wd == TG_FLOAT64
                          ? tg_conv_gw_batch_f64(g.N, g.C, g.H, g.W, g.O, g.K, g.L, g.ph, g.pw,
                                                 (const double *)xp, (const double *)gp,
                                                 (double *)dst, nb)
                          : tg_conv_gw_batch_f32(g.N, g.C, g.H, g.W, g.O, g.K, g.L, g.ph, g.pw,
                                                 (const float *)xp, (const float *)gp,
                                                 (float *)dst, nb);
        if (r < 0) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        if (r == 0) goto flip;
    }
    /* Planes of 4 pixels or fewer (2x2: a CIFAR VGG's last layers) with
     * few channels or a gy that is not finite: the direct kernel's
     * vectors run over a few pixels, mostly idle, and the per-image
     * products are as thin (K = 4); one product over a group of images'
     * columns side by side does far better (bench_conv, 64 images 512x2x2
     * to 512 channels, 3x3 "half", 2 threads: 151 ms direct, 17 ms per
     * image, 13.5 ms grouped). */
    const bool tiny = g.OH * g.OW <= 4;
    const bool direct = use_gw_direct(wd) && (!tiny || mode_now() == MODE_DIRECT);
    const int nth = direct ? -1 : tiny ? 0 : image_threads(&g);
    const int64_t G = nth ? 1 : group_size(g.N, ckk * ohw * (int64_t)e);
    if (direct) {
        if ((rc = gw_direct(wd, &g, xp, gp, dst, ctx))) goto done;
    } else {
        if ((rc = too_big(&g, G, ctx))) goto done;
        if (!nth) cols = tg_malloc((size_t)(ckk * G * ohw) * e);
        if (G > 1) tmp = tg_malloc((size_t)(g.O * G * ohw) * e);
        if ((!nth && !cols) || (G > 1 && !tmp)) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
    }
    if (nth > 0 && (rc = per_image(PI_GRAD_W, wd, &g, nth, xp, NULL, (char *)gp, dst, ctx)))
        goto done;
    for (int64_t n0 = 0; !nth && n0 < g.N; n0 += G) {
        int64_t gn = g.N - n0 < G ? g.N - n0 : G;
        char *src = (char *)gp + (size_t)(n0 * g.O * ohw) * e;
        im2col_group(wd, &g, xp, n0, gn, cols);
        if (gn > 1) regroup(&g, e, src, tmp, gn, true);
        gemm(wd, false, true, g.O, ckk, gn * ohw, gn > 1 ? tmp : src, gn * ohw, cols, gn * ohw,
             n0 == 0 ? 0.0 : 1.0, dst, ckk);
    }
flip:
    if (p->flip) {
        const int64_t kl = g.K * g.L;
        for (int64_t pl = 0; pl < g.O * g.C; pl++)
            for (int64_t i = 0; i < kl; i++)
                memcpy(gw + (size_t)(pl * kl + i) * e, acc + (size_t)(pl * kl + kl - 1 - i) * e, e);
    }
finish:
    if (work && (rc = tg_array_assign(*out, work, ctx))) goto done;
done:
    tg_array_free(tx);
    tg_array_free(tg);
    tg_array_free(work);
    tg_free(cols);
    tg_free(tmp);
    tg_free(acc);
    return rc;
}

/* ---- costs ---- */

static void conv_cost(const tg_node *n, tg_array *const *in, tg_array *const *out,
                      double *flops, double *bytes) {
    TG_UNUSED(n);
    *flops = 0;
    *bytes = 0;
    if (!out[0]) return;
    /* 2 * (products) = 2 * |y| * C*K*L for the forward op; the gradients do
     * the same number of products. */
    const tg_array *y = out[0];
    double prod = 0;
    if (n->op->run == conv_run)
        prod = (double)tg_array_size_inline(y) * (double)(in[1]->shape[1] * in[1]->shape[2] *
                                                           in[1]->shape[3]);
    else if (n->op->run == gw_run)
        prod = (double)tg_array_size_inline(y) * (double)(in[1]->shape[2] * in[1]->shape[3]) *
               (double)in[0]->shape[0];
    else
        prod = (double)tg_array_size_inline(in[1]) * (double)(in[0]->shape[1] * in[0]->shape[2] *
                                                              in[0]->shape[3]);
    *flops = 2 * prod;
    for (int i = 0; i < 2; i++)
        *bytes += (double)tg_array_size_inline(in[i]) * (double)tg_isize(in[i]->dtype);
    *bytes += (double)tg_array_size_inline(y) * (double)tg_isize(y->dtype);
}

const tg_op tg_op_conv2d = {
    .name = "conv2d", .nin_min = 2, .nin_max = 2, .nout = 1, .flags = TG_OPF_FLOAT_ONLY,
    .attr_keys = CONV_KEYS, .parse_attrs = conv_attrs, .infer = conv_infer, .run = conv_run,
    .cost = conv_cost, .view_of = -1, .free_extra = free_extra, .grad = tg_grad_conv};

const tg_op tg_op_conv2d_grad_inputs = {
    .name = "conv2d_grad_inputs", .nin_min = 3, .nin_max = 3, .nout = 1,
    .flags = TG_OPF_FLOAT_ONLY, .attr_keys = CONV_KEYS, .parse_attrs = conv_attrs,
    .infer = gi_infer, .run = gi_run, .cost = conv_cost, .view_of = -1,
    .free_extra = free_extra, .grad = tg_grad_conv};

const tg_op tg_op_conv2d_grad_weights = {
    .name = "conv2d_grad_weights", .nin_min = 3, .nin_max = 3, .nout = 1,
    .flags = TG_OPF_FLOAT_ONLY, .attr_keys = CONV_KEYS, .parse_attrs = conv_attrs,
    .infer = gw_infer, .run = gw_run, .cost = conv_cost, .view_of = -1,
    .free_extra = free_extra, .grad = tg_grad_conv};
