/* The rewrite record: what the optimizer did, kept with the function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "rewrite/rewrite.h"

void tg_opt_record_free(tg_opt_record *r) {
    if (!r) return;
    tg_chunks_free(&r->keys); /* (the entries' key blocks) */
    tg_free(r->entries);
    tg_free(r->passes);
    tg_free(r->rstats);
    tg_free(r->vmap);
    tg_free(r->vmap_text);
    tg_free(r->grads);
    tg_free(r->grads_text);
    memset(r, 0, sizeof *r);
}

/* Both key lists of an entry in one block of r's chunks: the removed
 * pointers, a NULL, the created pointers, a NULL, then the strings (a
 * rewrite applied a hundred thousand times made three to six small
 * allocations each, then one). */
static char **copy_keys(tg_opt_record *r, const char *const *removed, int nremoved, const char *const *created,
                        int ncreated) {
    size_t nptr = (size_t)nremoved + (size_t)ncreated + 2, text = 0;
    for (int i = 0; i < nremoved; i++) text += strlen(removed[i]) + 1;
    for (int i = 0; i < ncreated; i++) text += strlen(created[i]) + 1;
    char **c = tg_chunks_alloc(&r->keys, nptr * sizeof *c + text, 16);
    if (!c) return NULL;
    char *t = (char *)(c + nptr);
    for (int side = 0, at = 0; side < 2; side++) {
        const char *const *k = side ? created : removed;
        int n = side ? ncreated : nremoved;
        for (int i = 0; i < n; i++) {
            size_t len = strlen(k[i]) + 1;
            memcpy(t, k[i], len);
            c[at++] = t;
            t += len;
        }
        c[at++] = NULL;
    }
    return c;
}

int tg_opt_record_add(tg_opt_record *r, const char *name, const char *pass,
                      const char *const *removed, int nremoved,
                      const char *const *created, int ncreated) {
    if (r->n == r->cap) {
        int c = r->cap ? r->cap * 2 : 64;
        tg_rw_entry *p = tg_realloc(r->entries, sizeof *p * (size_t)c);
        if (!p) return TG_ENOMEM;
        r->entries = p;
        r->cap = c;
    }
    tg_rw_entry *e = &r->entries[r->n];
    e->name = name;
    e->pass = pass;
    e->nremoved = nremoved;
    e->ncreated = ncreated;
    e->removed = copy_keys(r, removed, nremoved, created, ncreated);
    if (!e->removed) return TG_ENOMEM;
    e->created = e->removed + nremoved + 1;
    r->n++;
    return TG_OK;
}

static int vmap_text_add(tg_opt_record *r, const char *id, size_t *at) {
    size_t n = strlen(id) + 1;
    if (r->vmap_len + n > r->vmap_cap) {
        size_t c = r->vmap_cap ? r->vmap_cap * 2 : 4096;
        while (c < r->vmap_len + n) c *= 2;
        char *p = tg_realloc(r->vmap_text, c);
        if (!p) return TG_ENOMEM;
        r->vmap_text = p;
        r->vmap_cap = c;
    }
    memcpy(r->vmap_text + r->vmap_len, id, n);
    *at = r->vmap_len;
    r->vmap_len += n;
    return TG_OK;
}

int tg_opt_record_vmap_add(tg_opt_record *r, const char *old, const char *newv) {
    if (r->nvmap == r->cvmap) {
        int c = r->cvmap ? r->cvmap * 2 : 64;
        size_t *p = tg_realloc(r->vmap, sizeof *p * 2 * (size_t)c);
        if (!p) return TG_ENOMEM;
        r->vmap = p;
        r->cvmap = c;
    }
    size_t a, b;
    if (vmap_text_add(r, old, &a) || vmap_text_add(r, newv, &b)) return TG_ENOMEM;
    r->vmap[2 * r->nvmap] = a;
    r->vmap[2 * r->nvmap + 1] = b;
    r->nvmap++;
    return TG_OK;
}

/* Backwards through the pairs: what replaced a variable may be replaced
 * again later, so the latest pair naming `id` as the new one leads one
 * step back, and the search goes on from there. Linear: a debugging aid,
 * not on any hot path. */
const char *tg_opt_record_standin(const tg_opt_record *r, const char *id) {
    for (int i = r->nvmap - 1; i >= 0; i--)
        if (strcmp(r->vmap_text + r->vmap[2 * i + 1], id) == 0) id = r->vmap_text + r->vmap[2 * i];
    return id;
}

/* ---- the nodes of gradient expansions ---- */

static int grad_cmp(const void *a, const void *b) {
    return strcmp(((const tg_grad_origin *)a)->key, ((const tg_grad_origin *)b)->key);
}

int tg_opt_record_grads_set(tg_opt_record *r, int n, const char *const *s) {
    size_t text = 0;
    for (int i = 0; i < 5 * n; i++) text += strlen(s[i] ? s[i] : "") + 1;
    tg_grad_origin *g = n ? tg_calloc((size_t)n, sizeof *g) : NULL;
    char *t = n ? tg_malloc(text) : NULL;
    if (n && (!g || !t)) {
        tg_free(g);
        tg_free(t);
        return TG_ENOMEM;
    }
    char *p = t;
    for (int i = 0; i < n; i++) {
        const char **f[5] = {&g[i].key, &g[i].of, &g[i].of_op, &g[i].by, &g[i].by_op};
        for (int j = 0; j < 5; j++) {
            const char *v = s[5 * i + j] ? s[5 * i + j] : "";
            size_t len = strlen(v) + 1;
            memcpy(p, v, len);
            *f[j] = p;
            p += len;
        }
    }
    if (n > 1) qsort(g, (size_t)n, sizeof *g, grad_cmp);
    tg_free(r->grads);
    tg_free(r->grads_text);
    r->grads = g;
    r->grads_text = t;
    r->ngrads = n;
    return TG_OK;
}

int tg_opt_record_grads_from(tg_opt_record *r, const tg_fgraph *fg) {
    int n = 0;
    for (int i = 0; i < fg->nnodes; i++) n += fg->nodes[i]->grad_of && fg->nodes[i]->nout;
    if (!n) return tg_opt_record_grads_set(r, 0, NULL);
    const char **s = tg_malloc(sizeof *s * 5 * (size_t)n);
    if (!s) return TG_ENOMEM;
    for (int i = 0, k = 0; i < fg->nnodes; i++) {
        const tg_node *nd = fg->nodes[i];
        if (!nd->grad_of || !nd->nout) continue;
        s[5 * k] = nd->outputs[0]->id;
        tg_grad_of_split(nd->grad_of, s + 5 * k + 1);
        k++;
    }
    int rc = tg_opt_record_grads_set(r, n, s);
    tg_free(s);
    return rc;
}

const tg_grad_origin *tg_opt_record_grad(const tg_opt_record *r, const char *key) {
    if (!r->ngrads || !key) return NULL;
    tg_grad_origin k = {.key = key};
    return bsearch(&k, r->grads, (size_t)r->ngrads, sizeof k, grad_cmp);
}

void tg_opt_record_grad_note(const tg_opt_record *r, const char *const *keys, int nk, char *buf,
                             size_t size) {
    if (!size) return;
    buf[0] = 0;
    const tg_grad_origin *seen[16];
    int nseen = 0;
    for (int i = 0; i < nk && nseen < 16; i++) {
        const tg_grad_origin *g = tg_opt_record_grad(r, keys[i]);
        bool dup = !g;
        for (int j = 0; j < nseen && !dup; j++)
            dup = !strcmp(seen[j]->by, g->by) && !strcmp(seen[j]->of, g->of);
        if (!dup) seen[nseen++] = g;
    }
    size_t k = 0;
    for (int i = 0; i < nseen && k < size; i++) {
        bool first = true;
        for (int j = 0; j < i && first; j++) first = strcmp(seen[j]->by, seen[i]->by) != 0;
        if (!first) continue;
        int w = snprintf(buf + k, size - k, "%sfrom %s %s", k ? "; " : "", seen[i]->by_op, seen[i]->by);
        if (w < 0) return;
        k += (size_t)w;
        int shown = 0, more = 0;
        for (int j = i; j < nseen && k < size; j++) {
            if (strcmp(seen[j]->by, seen[i]->by) || !*seen[j]->of) continue;
            if (shown == 3) {
                more++;
                continue;
            }
            w = snprintf(buf + k, size - k, "%s%s (%s)", shown ? ", " : ", differentiating ", seen[j]->of,
                         seen[j]->of_op);
            if (w < 0) return;
            k += (size_t)w;
            shown++;
        }
        if (more && k < size) {
            w = snprintf(buf + k, size - k, " and %d more", more);
            if (w > 0) k += (size_t)w;
        }
    }
}
