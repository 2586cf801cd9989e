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
