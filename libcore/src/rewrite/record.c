/* The rewrite record: what the optimizer did, kept with the function. */
#include <string.h>

#include "core/core.h"
#include "rewrite/rewrite.h"

void tg_opt_record_free(tg_opt_record *r) {
    if (!r) return;
    /* an entry's two key lists and their strings are one block, at removed */
    for (int i = 0; i < r->n; i++) tg_free(r->entries[i].removed);
    tg_free(r->entries);
    tg_free(r->passes);
    tg_free(r->rstats);
    tg_free(r->vmap);
    tg_free(r->vmap_text);
    memset(r, 0, sizeof *r);
}

/* Both key lists of an entry in one allocation: the removed pointers, a
 * NULL, the created pointers, a NULL, then the strings (a rewrite applied
 * a hundred thousand times made three to six small allocations each). */
static char **copy_keys(const char *const *removed, int nremoved, const char *const *created, int ncreated) {
    size_t nptr = (size_t)nremoved + (size_t)ncreated + 2, text = 0;
    for (int i = 0; i < nremoved; i++) text += strlen(removed[i]) + 1;
    for (int i = 0; i < ncreated; i++) text += strlen(created[i]) + 1;
    char **c = tg_malloc(nptr * sizeof *c + text);
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
    e->removed = copy_keys(removed, nremoved, created, ncreated);
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
