/* A layered layout in linear time per sweep, for drawings too large for
 * dot (model.h, vz_layers). dot spends its time in network simplex
 * (ranking and x positions) and in the chains of virtual nodes it puts
 * on every edge longer than one rank: 5,000 nodes took 30 s here and
 * 10,000 nearly 5 minutes. This is the same family of layout (Sugiyama's:
 * ranks top to bottom, an order within each rank, then x positions) with
 * the expensive steps replaced:
 *
 * - ranks: the longest path from the sources, then every source moved
 *   down to just above its highest reader (a constant sits beside the
 *   node that reads it, not at the top of the drawing);
 * - no virtual nodes: a long edge is drawn as one straight line, and the
 *   barycentres below read the x of a neighbour at any rank;
 * - order and x together: sweeps down (each node wants the mean x of
 *   what it reads) and up (of its readers); each rank is sorted by what
 *   its nodes want, which is the barycentre heuristic for crossings, and
 *   then placed as close to it as the rank's order and the separation
 *   allow, in least squares (pool-adjacent-violators: exact, linear).
 *
 * Node sizes come from the label, as dot would size it in Helvetica 10
 * (an average glyph width, twice that outside ASCII; not font metrics:
 * the page draws its own text and only needs boxes that hold it). */
#define _GNU_SOURCE /* qsort_r */
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "model.h"

enum { SWEEPS = 6 };
static const double NODESEP = 18.0, RANKSEP = 32.4; /* dot's 0.25 and 0.45 in */
static const double CHAR_W = 5.6, LINE_H = 12.0, MARGIN_X = 5.76, MARGIN_Y = 2.16;

typedef struct lay {
    int n;
    double *x, *w, *h, *want;
    int *rank;
    int *pred_at, *pred; /* CSR: pred[pred_at[i] .. pred_at[i+1]) */
    int *succ_at, *succ;
    int nranks;
    int *rank_at, *order; /* nodes of rank r: order[rank_at[r] .. rank_at[r+1]) */
} lay;

static const char *str_of(json_object *o, const char *k) {
    json_object *v;
    return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

static void node_size(json_object *o, double *w, double *h) {
    const char *label = str_of(o, "label"), *shape = str_of(o, "shape");
    int lines = 1, longest = 0, cur = 0;
    for (const char *p = label ? label : ""; *p; p++) {
        if (*p == '\n') {
            lines++;
            cur = 0;
        } else if (((unsigned char)*p & 0xc0) != 0x80) { /* count UTF-8 characters */
            /* One outside ASCII (the update nodes' arrow, a name's letter)
             * counts twice: it comes from a fallback font, 8 to 10 pt wide
             * where 5.6 is Helvetica's average, and a box narrower than
             * its label draws the label over its edge (Graphviz warns,
             * "size too small for label"). */
            cur += (unsigned char)*p >= 0x80 ? 2 : 1;
            if (cur > longest) longest = cur;
        }
    }
    *w = fmax(54.0, longest * CHAR_W + 2 * MARGIN_X);
    *h = fmax(21.6, lines * LINE_H + 2 * MARGIN_Y);
    if (shape && (!strcmp(shape, "ellipse") || !strcmp(shape, "oval"))) {
        /* dot's ellipse around a label's box */
        *w *= M_SQRT2;
        *h *= M_SQRT2;
    } else if (shape && !strcmp(shape, "invhouse")) {
        *h *= 1.3;
    } else if (shape && !strcmp(shape, "cylinder")) {
        *h += 8;
    }
}

/* A position in points, written with two decimals (what json-c would
 * write is 17 digits: a fifth of a large page's data). */
static json_object *coord(double v) {
    char buf[32];
    tg_snprintf_c(buf, sizeof buf, "%.2f", v);
    return json_object_new_double_s(tg_strtod_c(buf, NULL), buf);
}

static int cmp_want(const void *a, const void *b, void *ud) {
    const lay *L = ud;
    int i = *(const int *)a, j = *(const int *)b;
    if (L->want[i] != L->want[j]) return L->want[i] < L->want[j] ? -1 : 1;
    if (L->x[i] != L->x[j]) return L->x[i] < L->x[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* Place the m nodes of one rank (in their order) as close to their wants
 * as the order and the separation allow, in least squares. With o_k the
 * least offset of node k from node 0 (half widths and separations), the
 * positions y_k = x_k - o_k must not decrease; their best values are the
 * isotonic regression of want_k - o_k: blocks of equal y, each at the
 * mean of its targets, merged while they are out of order. */
static void place_rank(lay *L, const int *nodes, int m, double *off, double *sum, int *cnt, int *first) {
    int nb = 0;
    for (int k = 0; k < m; k++) {
        int i = nodes[k];
        off[k] = k ? off[k - 1] + L->w[nodes[k - 1]] / 2 + NODESEP + L->w[i] / 2 : 0;
        sum[nb] = L->want[i] - off[k];
        cnt[nb] = 1;
        first[nb] = k;
        nb++;
        while (nb > 1 && sum[nb - 2] / cnt[nb - 2] > sum[nb - 1] / cnt[nb - 1]) {
            sum[nb - 2] += sum[nb - 1];
            cnt[nb - 2] += cnt[nb - 1];
            nb--;
        }
    }
    for (int b = 0; b < nb; b++) {
        double y = sum[b] / cnt[b];
        for (int k = first[b]; k < first[b] + cnt[b]; k++) L->x[nodes[k]] = y + off[k];
    }
}

/* One sweep: down (each node wants the mean x of its predecessors) or
 * up (of its successors); a node with none keeps its x. */
static void sweep(lay *L, bool down, double *off, double *sum, int *cnt, int *first) {
    for (int s = 0; s < L->nranks; s++) {
        int r = down ? s : L->nranks - 1 - s;
        int *nodes = L->order + L->rank_at[r], m = L->rank_at[r + 1] - L->rank_at[r];
        for (int k = 0; k < m; k++) {
            int i = nodes[k];
            const int *nb = down ? L->pred + L->pred_at[i] : L->succ + L->succ_at[i];
            int d = down ? L->pred_at[i + 1] - L->pred_at[i] : L->succ_at[i + 1] - L->succ_at[i];
            double t = 0;
            for (int e = 0; e < d; e++) t += L->x[nb[e]];
            L->want[i] = d ? t / d : L->x[i];
        }
        qsort_r(nodes, (size_t)m, sizeof *nodes, cmp_want, L);
        place_rank(L, nodes, m, off, sum, cnt, first);
    }
}

/* CSR lists from the edge pairs: the val[e] of the edges with key[e] == i
 * are out[at[i] .. at[i+1]). */
static void csr(int n, int ne, const int *key, const int *val, int *at, int *out) {
    for (int i = 0; i <= n; i++) at[i] = 0;
    for (int e = 0; e < ne; e++) at[key[e] + 1]++;
    for (int i = 0; i < n; i++) at[i + 1] += at[i];
    /* at[i] runs as node i's fill pointer, ending at at[i+1]'s old value;
     * shifting back by one restores the starts. */
    for (int e = 0; e < ne; e++) out[at[key[e]]++] = val[e];
    for (int i = n; i > 0; i--) at[i] = at[i - 1];
    at[0] = 0;
}

/* The layout, or with long_edges set only its ranks, and in
 * *long_edges the virtual nodes dot would add for them. */
static int layers(vz_graph *vg, double *width, double *height, long *long_edges) {
    int n = (int)json_object_array_length(vg->nodes);
    int ne_all = (int)json_object_array_length(vg->edges);
    lay L = {.n = n};
    struct tg_idmap *ix = tg_idmap_new();
    size_t sn = (size_t)(n ? n : 1), se = (size_t)(ne_all ? ne_all : 1);
    int *src = calloc(se, sizeof(int)), *dst = calloc(se, sizeof(int));
    int *indeg = calloc(sn, sizeof(int)), *topo = malloc(sizeof(int) * sn);
    double *off = malloc(sizeof(double) * sn), *sum = malloc(sizeof(double) * sn);
    int *cnt = malloc(sizeof(int) * sn), *first = malloc(sizeof(int) * sn);
    L.x = calloc(sn, sizeof(double));
    L.w = malloc(sizeof(double) * sn);
    L.h = malloc(sizeof(double) * sn);
    L.want = malloc(sizeof(double) * sn);
    L.rank = calloc(sn, sizeof(int));
    L.pred_at = malloc(sizeof(int) * (sn + 1));
    L.succ_at = malloc(sizeof(int) * (sn + 1));
    L.pred = malloc(sizeof(int) * se);
    L.succ = malloc(sizeof(int) * se);
    L.order = malloc(sizeof(int) * sn);
    int rc = -1;
    if (!ix || !src || !dst || !indeg || !topo || !off || !sum || !cnt || !first || !L.x || !L.w || !L.h ||
        !L.want || !L.rank || !L.pred_at || !L.succ_at || !L.pred || !L.succ || !L.order)
        goto done;
    for (int i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(vg->nodes, (size_t)i);
        const char *id = str_of(o, "id");
        if (id && tg_idmap_put(ix, id, (void *)(intptr_t)(i + 1))) goto done;
        node_size(o, &L.w[i], &L.h[i]);
    }
    int ne = 0;
    for (int e = 0; e < ne_all; e++) {
        json_object *o = json_object_array_get_idx(vg->edges, (size_t)e);
        const char *s, *t;
        if (!vz_edge_ends(o, &s, &t)) continue;
        int a = (int)(intptr_t)tg_idmap_get(ix, s) - 1;
        int b = (int)(intptr_t)tg_idmap_get(ix, t) - 1;
        if (a < 0 || b < 0 || a == b) continue;
        src[ne] = a;
        dst[ne] = b;
        ne++;
    }
    csr(n, ne, dst, src, L.pred_at, L.pred);
    csr(n, ne, src, dst, L.succ_at, L.succ);

    /* Ranks: longest path from the sources, in Kahn's order; a node on a
     * cycle (a drawing has none) goes after everything else. */
    int nt = 0;
    for (int e = 0; e < ne; e++) indeg[dst[e]]++;
    for (int i = 0; i < n; i++)
        if (!indeg[i]) topo[nt++] = i;
    for (int k = 0; k < nt; k++) {
        int i = topo[k];
        for (int e = L.succ_at[i]; e < L.succ_at[i + 1]; e++) {
            int j = L.succ[e];
            if (L.rank[j] < L.rank[i] + 1) L.rank[j] = L.rank[i] + 1;
            if (--indeg[j] == 0) topo[nt++] = j;
        }
    }
    for (int i = 0; i < n && nt < n; i++)
        if (indeg[i] > 0) topo[nt++] = i;
    for (int i = 0; i < n; i++) {
        if (L.pred_at[i + 1] > L.pred_at[i] || L.succ_at[i + 1] == L.succ_at[i]) continue;
        int r = -1;
        for (int e = L.succ_at[i]; e < L.succ_at[i + 1]; e++)
            if (r < 0 || L.rank[L.succ[e]] < r) r = L.rank[L.succ[e]];
        L.rank[i] = r > 0 ? r - 1 : 0;
    }
    for (int i = 0; i < n; i++)
        if (L.rank[i] + 1 > L.nranks) L.nranks = L.rank[i] + 1;
    if (long_edges) {
        *long_edges = 0;
        for (int e = 0; e < ne; e++) {
            int span = L.rank[dst[e]] - L.rank[src[e]];
            *long_edges += span > 1 ? span - 1 : 0;
        }
        rc = 0;
        goto done;
    }
    if (!(L.rank_at = calloc((size_t)L.nranks + 1, sizeof(int)))) goto done;
    /* Each rank in Kahn's order (close to the file's), packed from 0. */
    for (int i = 0; i < n; i++) L.rank_at[L.rank[i] + 1]++;
    for (int r = 0; r < L.nranks; r++) L.rank_at[r + 1] += L.rank_at[r];
    memcpy(indeg, L.rank_at, sizeof(int) * (size_t)L.nranks); /* reused as fill pointers */
    for (int k = 0; k < n; k++) L.order[indeg[L.rank[topo[k]]]++] = topo[k];
    for (int r = 0; r < L.nranks; r++) {
        double at = 0;
        for (int k = L.rank_at[r]; k < L.rank_at[r + 1]; k++) {
            int i = L.order[k];
            L.x[i] = at + L.w[i] / 2;
            at += L.w[i] + NODESEP;
        }
    }
    for (int s = 0; s < SWEEPS; s++) sweep(&L, s % 2 == 0, off, sum, cnt, first);

    /* y: ranks stacked, each as tall as its tallest node. */
    double x0 = INFINITY, x1 = -INFINITY, top = 0;
    double *rank_y = off; /* reused: ranks <= nodes */
    for (int r = 0; r < L.nranks; r++) {
        double hmax = 0;
        for (int k = L.rank_at[r]; k < L.rank_at[r + 1]; k++) hmax = fmax(hmax, L.h[L.order[k]]);
        rank_y[r] = top + hmax / 2;
        top += hmax + RANKSEP;
    }
    for (int i = 0; i < n; i++) {
        x0 = fmin(x0, L.x[i] - L.w[i] / 2);
        x1 = fmax(x1, L.x[i] + L.w[i] / 2);
    }
    if (n == 0) x0 = x1 = 0;
    for (int i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(vg->nodes, (size_t)i);
        json_object_object_add(o, "x", coord(L.x[i] - x0));
        json_object_object_add(o, "y", coord(rank_y[L.rank[i]]));
        json_object_object_add(o, "w", coord(L.w[i]));
        json_object_object_add(o, "h", coord(L.h[i]));
    }
    *width = x1 - x0;
    *height = n ? top - RANKSEP : 0;
    rc = 0;
done:
    tg_idmap_free(ix);
    free(src);
    free(dst);
    free(indeg);
    free(topo);
    free(off);
    free(sum);
    free(cnt);
    free(first);
    free(L.x);
    free(L.w);
    free(L.h);
    free(L.want);
    free(L.rank);
    free(L.pred_at);
    free(L.succ_at);
    free(L.pred);
    free(L.succ);
    free(L.order);
    free(L.rank_at);
    return rc;
}

int vz_layers(vz_graph *vg, double *width, double *height) { return layers(vg, width, height, NULL); }

long vz_long_edges(vz_graph *vg) {
    long k = 0;
    return layers(vg, NULL, NULL, &k) ? -1 : k;
}
