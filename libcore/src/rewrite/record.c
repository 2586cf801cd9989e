/* The rewrite record: what the optimizer did, kept with the function. */
#include <string.h>

#include "core/core.h"
#include "rewrite/rewrite.h"

static void free_keys(char **k, int n) {
    for (int i = 0; i < n; i++) tg_free(k[i]);
    tg_free(k);
}

void tg_opt_record_free(tg_opt_record *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free_keys(r->entries[i].removed, r->entries[i].nremoved);
        free_keys(r->entries[i].created, r->entries[i].ncreated);
    }
    tg_free(r->entries);
    tg_free(r->passes);
    tg_free(r->rstats);
    tg_free(r->vmap);
    tg_free(r->vmap_text);
    memset(r, 0, sizeof *r);
}

static char **copy_keys(const char *const *k, int n) {
    char **c = tg_calloc((size_t)n + 1, sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < n; i++)
        if (!(c[i] = tg_strdup(k[i]))) {
            free_keys(c, i);
            return NULL;
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
    e->removed = copy_keys(removed, nremoved);
    e->created = copy_keys(created, ncreated);
    if (!e->removed || !e->created) {
        if (e->removed) free_keys(e->removed, nremoved);
        if (e->created) free_keys(e->created, ncreated);
        return TG_ENOMEM;
    }
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
