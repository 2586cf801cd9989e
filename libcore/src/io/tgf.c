/* Compiled-function files (.tgf): save and restore optimized functions.
 *
 * Layout (schemas/tgf.md): a 64-byte preamble (magic, format version,
 * header and data offsets and lengths, the header's CRC-32C, the
 * preamble's own CRC-32C), a JSON header (schemas/tgf-header.schema.json),
 * then the arrays, each at a 64-byte aligned offset so that a mapped file
 * hands them to the kernels without a copy. Each function's optimized
 * graph is interchange JSON whose declared constants and shared variables
 * say {"tgf_array": k} instead of holding their values.
 *
 * Restoring loads that graph with the ordinary loader, puts its nodes in
 * the saved schedule and links it: the optimizer does not run, and the
 * same nodes run in the same order on the same values, so results are bit
 * for bit those of the saved function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cblas.h>

#include "backend/backend.h"
#include "io/io.h"
#include "io/tgf.h"
#include "ops/op.h"
#include "tg/tgf.h"
#include "vm/vm.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

void (*tg_tgf_write_hook)(size_t written);
bool tg_tgf_fuzz_no_checksums;


static uint64_t align_up(uint64_t x) { return (x + TG_TGF_ALIGN - 1) & ~(uint64_t)(TG_TGF_ALIGN - 1); }

static json_object *str(const char *s) { return json_object_new_string(s ? s : ""); }

/* ---- the build's fingerprint ---- */

static const char *blas_name(void) {
    const char *c = openblas_get_config();
    return c ? c : "unknown";
}

/* cuda: some function of the file runs nodes on the GPU. */
static json_object *fingerprint_json(bool cuda) {
    bool ok = true;
    json_object *o = json_object_new_object(), *b = json_object_new_array();
    tg_json_put(o, "tg_version", str(tg_version()), &ok);
    tg_json_put(o, "format_version", json_object_new_int(TG_TGF_VERSION), &ok);
    tg_json_push(b, str("cpu"), &ok);
    if (cuda) tg_json_push(b, str("cuda"), &ok);
    tg_json_put(o, "backends", b, &ok);
    tg_json_put(o, "blas", str(blas_name()), &ok);
    tg_json_put(o, "byte_order", str("little"), &ok);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* ---- a function graph seen as a graph, for the saver ---- */

typedef struct fview {
    tg_graph g;
    tg_fdecl fd;
    tg_update *upd;
    tg_var **vars;
} fview;

/* Borrow f's function graph as a one-function tg_graph (nothing copied),
 * leaving out the variables of nodes that were pruned. */
static int fview_init(fview *v, const tg_function *f) {
    const tg_fgraph *fg = f->fg;
    memset(v, 0, sizeof *v);
    v->vars = tg_calloc((size_t)fg->nvars + 1, sizeof *v->vars);
    v->upd = tg_calloc((size_t)fg->nupd + 1, sizeof *v->upd);
    if (!v->vars || !v->upd) {
        tg_free(v->vars);
        tg_free(v->upd);
        return TG_ENOMEM;
    }
    for (int i = 0; i < fg->nvars; i++) {
        tg_var *x = fg->vars[i];
        if (x->kind == TG_VAR_RESULT && !x->owner) continue;
        v->vars[v->g.nvars++] = x;
    }
    for (int i = 0; i < fg->nupd; i++) {
        v->upd[i].shared = fg->upd_shared[i];
        v->upd[i].value = fg->outputs[fg->nout + i];
    }
    v->fd.name = f->name;
    v->fd.json_inputs_given = 1;
    v->fd.nin = fg->nin;
    v->fd.nout = fg->nout;
    v->fd.nupd = fg->nupd;
    v->fd.inputs = fg->inputs;
    v->fd.outputs = fg->outputs;
    v->fd.updates = v->upd;
    v->g.name = f->name;
    v->g.path = f->name;
    v->g.vars = v->vars;
    v->g.nodes = fg->nodes;
    v->g.nnodes = fg->nnodes;
    v->g.funcs = &v->fd;
    v->g.nfuncs = 1;
    return TG_OK;
}

/* A function that takes one output of a multi-output node as an input
 * while computing another keeps two variables of one id, which a graph
 * file cannot hold: refuse it with a clear message rather than write a
 * file that does not load. */
static int fview_check(const tg_function *f, tg_ctx *ctx) {
    const tg_fgraph *fg = f->fg;
    struct tg_idmap *m = tg_idmap_new();
    int rc = m ? TG_OK : tg_errorf(ctx, TG_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < fg->nvars; i++) {
        const tg_var *x = fg->vars[i];
        if (x->kind == TG_VAR_RESULT && !x->owner) continue;
        if (tg_idmap_get(m, x->id))
            rc = tg_errorf(ctx, TG_EUNSUPPORTED,
                           "function '%s' takes '%s' as an input while also computing it; it "
                           "cannot be saved (list the node's other outputs as inputs too)",
                           f->name, x->id);
        else if (tg_idmap_put(m, x->id, (void *)x))
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    tg_idmap_free(m);
    return rc;
}

static void fview_free(fview *v) {
    tg_free(v->vars);
    tg_free(v->upd);
}

/* ---- the array table, while saving ---- */

typedef struct table {
    const tg_array **arr; /* borrowed */
    char **keys;          /* the index's keys (it borrows them), owned */
    int n, cap;
    struct tg_idmap *index; /* "s:<shared id>" or "p:<pointer>" -> k + 1 */
    tg_array **owned;       /* arrays made for the file (graph sections) */
    int nowned;
    bool oom;
} table;

/* Index of a in the table under key (added when new). */
static int table_add_key(table *T, const char *key, const tg_array *a) {
    void *got = tg_idmap_get(T->index, key);
    if (got) return (int)(intptr_t)got - 1;
    if (T->n == T->cap) {
        int c = T->cap ? T->cap * 2 : 16;
        const tg_array **p = tg_realloc(T->arr, (size_t)c * sizeof *p);
        if (!p) return -1;
        T->arr = p;
        char **q = tg_realloc(T->keys, (size_t)c * sizeof *q);
        if (!q) return -1;
        T->keys = q;
        T->cap = c;
    }
    int k = T->n;
    if (!(T->keys[k] = tg_strdup(key))) return -1;
    if (tg_idmap_put(T->index, T->keys[k], (void *)(intptr_t)(k + 1))) {
        tg_free(T->keys[k]);
        return -1;
    }
    T->arr[T->n++] = a;
    return k;
}

/* Index of a in the table: a shared variable's value by the variable's
 * id, anything else (v NULL: raw bytes) by identity. */
static int table_add_shared(table *T, const char *id, const tg_array *a) {
    char key[160]; /* (an id has at most 128 characters) */
    snprintf(key, sizeof key, "s:%s", id);
    return table_add_key(T, key, a);
}

static int table_add(table *T, const tg_var *v, const tg_array *a) {
    if (v && v->kind == TG_VAR_SHARED) return table_add_shared(T, v->id, a);
    char key[40];
    snprintf(key, sizeof key, "p:%p", (const void *)a);
    return table_add_key(T, key, a);
}

static json_object *table_writer(void *ud, const tg_var *v, const tg_array *a) {
    table *T = ud;
    int k = table_add(T, v, a);
    if (k < 0) {
        T->oom = true;
        return NULL;
    }
    json_object *o = json_object_new_object();
    bool ok = true;
    tg_json_put(o, "tgf_array", json_object_new_int(k), &ok);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* ---- one function's entry in the header ---- */

static int section_ref(void *ud, const tg_var *v, const tg_array *a) {
    return table_add(ud, v, a);
}

/* A function's entry: its graph, schedule, origins and record go into a
 * binary graph section (tgfgraph.c) stored as a uint8 array. */
static json_object *function_entry(const tg_function *f, table *T) {
    bool ok = true;
    tg_str sec = {0};
    tg_array *a = NULL, **owned = tg_realloc(T->owned, sizeof *owned * (size_t)(T->nowned + 1));
    if (!owned) return NULL;
    T->owned = owned;
    if (tgf_graph_encode(f, section_ref, T, &sec)) {
        tg_str_free(&sec);
        return NULL;
    }
    int64_t len = (int64_t)sec.len;
    if (!(a = tg_array_new(TG_UINT8, 1, &len))) {
        tg_str_free(&sec);
        return NULL;
    }
    if (len) memcpy(tg_array_data(a), sec.s, sec.len);
    tg_str_free(&sec);
    T->owned[T->nowned++] = a;
    int k = table_add(T, NULL, a);
    if (k < 0) return NULL;
    json_object *o = json_object_new_object();
    tg_json_put(o, "name", str(f->name), &ok);
    tg_json_put(o, "graph_section", json_object_new_int(k), &ok);
    tg_json_put(o, "nodes", json_object_new_int(f->nsched), &ok);
    tg_json_put(o, "compile_seconds", json_object_new_double(f->compile_seconds), &ok);
    tg_json_put(o, "optimize_seconds", json_object_new_double(f->record.seconds), &ok);
    tg_json_put(o, "no_gc", json_object_new_boolean(f->no_gc), &ok);
    if (f->on_device) {
        /* Placement (rewrite/place.c): the schedule positions that ran a
         * device kernel (transfers go by their attribute) and the values
         * that lived on the device, so that a restore puts them back. */
        json_object *jn = json_object_new_array(), *jr = json_object_new_array();
        tg_json_put(o, "device", str("cuda"), &ok);
        tg_json_put(o, "device_nodes", jn, &ok);
        tg_json_put(o, "resident", jr, &ok);
        for (int k = 0; ok && k < f->nsched; k++)
            if (strcmp(f->sched[k].op->name, "transfer") && tg_function_node_on_device(f, k))
                tg_json_push(jn, json_object_new_int(k), &ok);
        for (int i = 0; ok && i < f->fg->nvars; i++)
            if (f->fg->vars[i]->resident) tg_json_push(jr, str(f->fg->vars[i]->id), &ok);
    }
    if (!ok || T->oom) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static json_object *tags_json(const char *const *tags) {
    bool ok = true;
    json_object *a = json_object_new_array();
    for (int i = 0; tags && tags[i]; i++) tg_json_push(a, str(tags[i]), &ok);
    if (!ok) {
        json_object_put(a);
        return NULL;
    }
    return a;
}

static json_object *options_json(const tg_compile_options *o) {
    bool ok = true;
    json_object *j = json_object_new_object();
    tg_json_put(j, "preset", str(o && o->preset ? o->preset : "fast_run"), &ok);
    tg_json_put(j, "include", tags_json(o ? o->include : NULL), &ok);
    tg_json_put(j, "exclude", tags_json(o ? o->exclude : NULL), &ok);
    tg_json_put(j, "no_gc", json_object_new_boolean(o && o->no_gc), &ok);
    if (!ok) {
        json_object_put(j);
        return NULL;
    }
    return j;
}

/* ---- writing ---- */

typedef struct wfile {
    int fd;
    const char *path;
    size_t written;
} wfile;

static int wr(wfile *w, const void *data, size_t len, tg_ctx *ctx) {
    const char *p = data;
    while (len) {
        size_t chunk = len > ((size_t)1 << 24) ? (size_t)1 << 24 : len;
        ssize_t r = write(w->fd, p, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return tg_errorf(ctx, TG_EIO, "%s: write failed: %s", w->path,
                             r < 0 ? strerror(errno) : "no progress");
        p += r;
        len -= (size_t)r;
        w->written += (size_t)r;
        if (tg_tgf_write_hook) tg_tgf_write_hook(w->written);
    }
    return TG_OK;
}

static int wr_pad(wfile *w, uint64_t to, tg_ctx *ctx) {
    static const char zeros[TG_TGF_ALIGN];
    while (w->written < to) {
        size_t n = to - w->written;
        if (n > sizeof zeros) n = sizeof zeros;
        int rc = wr(w, zeros, n, ctx);
        if (rc) return rc;
    }
    return TG_OK;
}

/* Lay out the arrays, put the table in the header, and write the whole
 * file to a temporary name beside path, sync it, rename it over path and
 * sync the folder: readers see the old file or the new one, never a part
 * (a device or FIFO is written in place, a link followed: tg_file_begin). */
static int write_file(const char *path, json_object *root, const table *T, tg_ctx *ctx) {
    int rc = TG_OK, n = T->n;
    tg_array **contig = tg_calloc((size_t)n + 1, sizeof *contig);
    wfile w = {-1, path, 0};
    tg_file_save sv = {.fd = -1};
    unsigned char *table_bytes = NULL;
    bool ok = true;
    if (!contig) goto oom;
    /* The array table: one fixed record per array, after the arrays
     * (schemas/tgf.md), so that restoring many small arrays parses no
     * JSON for them. */
    size_t tsize = (size_t)n * TGF_ENTRY;
    if (!(table_bytes = tg_calloc(tsize + 1, 1))) goto oom;
    uint64_t off = 0;
    for (int k = 0; k < n; k++) {
        const tg_array *a = T->arr[k];
        contig[k] = tg_array_is_contiguous(a) ? tg_array_ref((tg_array *)a)
                                              : tg_array_copy(a, a->dtype);
        if (!contig[k]) goto oom;
        size_t nb = (size_t)tg_array_size(a) * tg_isize(a->dtype);
        unsigned char *e = table_bytes + (size_t)k * TGF_ENTRY;
        e[0] = (unsigned char)a->dtype;
        e[1] = (unsigned char)a->ndim;
        for (int d = 0; d < a->ndim; d++) tg_le_put64(e + 8 + 8 * d, (uint64_t)a->shape[d]);
        tg_le_put64(e + 72, off);
        tg_le_put64(e + 80, nb);
        tg_le_put32(e + 88, tg_crc32c(0, contig[k]->data, nb));
        off = align_up(off + nb);
    }
    uint64_t table_off = off;
    off = align_up(off + tsize);
    json_object *jt = json_object_new_object();
    tg_json_put(root, "array_table", jt, &ok);
    tg_json_put(jt, "offset", json_object_new_int64((int64_t)table_off), &ok);
    tg_json_put(jt, "count", json_object_new_int(n), &ok);
    tg_json_put(jt, "crc32c", json_object_new_int64(tg_crc32c(0, table_bytes, tsize)), &ok);
    if (!ok) goto oom;
    const char *hdr = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!hdr) goto oom;
    size_t hlen = strlen(hdr);
    uint64_t data_off = align_up(TG_TGF_PREAMBLE + hlen);
    unsigned char pre[TG_TGF_PREAMBLE] = {0};
    memcpy(pre, TG_TGF_MAGIC, 8);
    tg_le_put32(pre + 8, TG_TGF_VERSION);
    tg_le_put32(pre + 12, 0);
    tg_le_put64(pre + 16, TG_TGF_PREAMBLE);
    tg_le_put64(pre + 24, hlen);
    tg_le_put64(pre + 32, data_off);
    tg_le_put64(pre + 40, off);
    tg_le_put32(pre + 48, tg_crc32c(0, hdr, hlen));
    tg_le_put32(pre + 56, tg_crc32c(0, pre, 56));

    if ((rc = tg_file_begin(path, &sv, ctx))) goto done;
    w.fd = sv.fd;
    if ((rc = wr(&w, pre, sizeof pre, ctx)) || (rc = wr(&w, hdr, hlen, ctx)) ||
        (rc = wr_pad(&w, data_off, ctx)))
        goto done;
    for (int k = 0; k < n; k++) {
        const tg_array *a = contig[k];
        size_t nb = (size_t)tg_array_size(a) * tg_isize(a->dtype);
        if ((rc = wr(&w, a->data, nb, ctx)) ||
            (rc = wr_pad(&w, align_up(w.written), ctx)))
            goto done;
    }
    if ((rc = wr(&w, table_bytes, tsize, ctx)) || (rc = wr_pad(&w, data_off + off, ctx)))
        goto done;
    rc = tg_file_finish(&sv, ctx);
    goto done;
oom:
    rc = tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
done:
    tg_file_abort(&sv); /* (nothing left to do after finish) */
    for (int k = 0; contig && k < n; k++) tg_array_free(contig[k]);
    tg_free(contig);
    tg_free(table_bytes);
    return rc;
}

/* The host values of f's shared variables, brought back from the device
 * where a placed function left them, before anything writes them. */
static int fetch_shared(const tg_function *f, tg_ctx *ctx) {
    int rc = tg_shared_fetch_vars(f->fg->vars, f->fg->nvars, ctx);
    return rc ? rc : tg_shared_fetch_vars(f->fg->upd_shared, f->fg->nupd, ctx);
}

static tg_array *original_copy(const struct tg_tgf *t, table *T, tg_ctx *ctx);

/* The common part of tg_tgf_save and tg_tgf_save_state: the original
 * graph written from source, or copied from the file `copy` (or none). */
static json_object *get(json_object *o, const char *key, json_type type);

/* Copy compile_seconds and optimize_seconds of function `name` in the
 * header root onto its new entry e. */
static void keep_times(json_object *e, json_object *root, const char *name, bool *ok) {
    json_object *jfns = get(root, "functions", json_type_array);
    for (size_t i = 0; jfns && i < json_object_array_length(jfns); i++) {
        json_object *o = json_object_array_get_idx(jfns, i);
        const char *nm = json_object_get_string(get(o, "name", json_type_string));
        if (!nm || strcmp(nm, name)) continue;
        static const char *const KEYS[] = {"compile_seconds", "optimize_seconds"};
        for (int k = 0; k < 2; k++) {
            json_object *v = NULL;
            json_object_object_get_ex(o, KEYS[k], &v);
            if (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))
                tg_json_put(e, KEYS[k], json_object_new_double(json_object_get_double(v)), ok);
        }
        return;
    }
}

/* restored: the header of the file fs were restored from (save_state),
 * whose compile and optimizer times they keep: restoring compiled
 * nothing. */
static int save_functions(const char *path, tg_function *const *fs, int n,
                          const tg_graph *source, const struct tg_tgf *copy,
                          json_object *restored, json_object *options, tg_ctx *ctx) {
    bool ok = true;
    int rc = TG_OK;
    for (int i = 0; i < n; i++)
        if ((rc = fetch_shared(fs[i], ctx))) {
            json_object_put(options);
            return rc;
        }
    if (source && (rc = tg_shared_fetch_vars(source->vars, source->nvars, ctx))) {
        json_object_put(options);
        return rc;
    }
    tg_array *orig = NULL;
    table T = {0};
    T.index = tg_idmap_new();
    json_object *root = json_object_new_object();
    if (!T.index || !root) {
        json_object_put(options);
        goto oom;
    }
    tg_json_put(root, "format", str("tg-compiled"), &ok);
    tg_json_put(root, "version", json_object_new_int(TG_TGF_VERSION), &ok);
    bool placed = false;
    for (int i = 0; i < n; i++) placed |= fs[i]->on_device;
    tg_json_put(root, "fingerprint", fingerprint_json(placed), &ok);
    tg_json_put(root, "options", options, &ok);
    json_object *fns = json_object_new_array();
    tg_json_put(root, "functions", fns, &ok);
    for (int i = 0; ok && i < n; i++) {
        json_object *e = function_entry(fs[i], &T);
        tg_json_push(fns, e, &ok);
        if (ok && restored) keep_times(e, restored, fs[i]->name, &ok);
    }
    if (ok && source) {
        /* The original graph is kept as text in the data section: only
         * --reoptimize and checkpoints read it, so restoring does not pay
         * for parsing it. */
        size_t tlen = 0;
        char *txt = tg_graph_to_text_ext(source, table_writer, &T, &tlen);
        int64_t len = (int64_t)tlen;
        if (txt && (orig = tg_array_new(TG_UINT8, 1, &len))) {
            memcpy(tg_array_data(orig), txt, (size_t)len);
            int k = table_add(&T, NULL, orig);
            if (k < 0) ok = false;
            tg_json_put(root, "original", json_object_new_int(k), &ok);
        } else {
            ok = false;
        }
        tg_free(txt);
    } else if (ok && copy) {
        if (!(orig = original_copy(copy, &T, ctx))) {
            rc = tg_ctx_status(ctx);
            goto done;
        }
        int k = table_add(&T, NULL, orig);
        if (k < 0) ok = false;
        tg_json_put(root, "original", json_object_new_int(k), &ok);
    }
    if (!ok || T.oom) goto oom;
    rc = write_file(path, root, &T, ctx);
    goto done;
oom:
    rc = tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
done:
    json_object_put(root);
    tg_array_free(orig);
    for (int k = 0; k < T.nowned; k++) tg_array_free(T.owned[k]);
    tg_free(T.owned);
    tg_idmap_free(T.index);
    for (int k = 0; k < T.n; k++) tg_free(T.keys[k]);
    tg_free(T.keys);
    tg_free(T.arr);
    return rc;
}

/* The shared state f reads or updates called id, or NULL. */
static const tg_shared *shared_of(const tg_function *f, const char *id) {
    for (int i = 0; i < f->nshared; i++)
        if (!strcmp(f->shared[i]->id, id)) return f->shared[i];
    for (int i = 0; i < f->fg->nupd; i++)
        if (!strcmp(f->upd_shared[i]->id, id)) return f->upd_shared[i];
    return NULL;
}

/* A file keeps one value per shared variable, which every function of it
 * shares once loaded: functions that hold two states of one (compiled
 * from two loads of a graph, or a copy with it swapped) would have been
 * saved as one, the other state lost without a word. TG_EINVAL. */
static int shared_one_set(tg_function *const *fs, int n, tg_ctx *ctx) {
    for (int i = 1; i < n; i++)
        for (int j = 0; j < i; j++)
            for (int k = 0; k < fs[i]->nshared + fs[i]->fg->nupd; k++) {
                const tg_shared *s = k < fs[i]->nshared ? fs[i]->shared[k] : fs[i]->upd_shared[k - fs[i]->nshared];
                const tg_shared *o = shared_of(fs[j], s->id);
                if (o && o != s)
                    return tg_errorf(ctx, TG_EINVAL,
                                     "tg_tgf_save: functions '%s' and '%s' hold two states of shared "
                                     "variable '%s' (compiled from two loads of the graph, or a copy "
                                     "with it swapped); a file keeps one: save them to separate files",
                                     fs[j]->name, fs[i]->name, s->id);
            }
    return TG_OK;
}

int tg_tgf_save(const char *path, tg_function *const *fs, int n, const tg_tgf_save_info *info,
                tg_ctx *ctx) {
    if (!path || !fs || n < 1) return tg_errorf(ctx, TG_EINVAL, "tg_tgf_save: no path or no function");
    for (int i = 0; i < n; i++)
        if (!fs[i]) return tg_errorf(ctx, TG_EINVAL, "tg_tgf_save: function %d is NULL", i);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(fs[i]->name, fs[j]->name))
                return tg_errorf(ctx, TG_EINVAL, "tg_tgf_save: function '%s' given twice",
                                 fs[i]->name);
    for (int i = 0; i < n; i++)
        if (fview_check(fs[i], ctx)) return tg_ctx_status(ctx);
    if (shared_one_set(fs, n, ctx)) return tg_ctx_status(ctx);
    json_object *opts = options_json(info ? info->options : NULL);
    if (!opts) return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
    return save_functions(path, fs, n, info ? info->source : NULL, NULL, NULL, opts, ctx);
}

/* ---- reading ---- */

/* A mapped file, or a file read into memory, shared by the arrays that
 * live in it. */
typedef struct mapping {
    atomic_long refs;
    void *base;
    size_t len;
    bool heap; /* read into a tg_malloc_aligned block, not mapped */
} mapping;

static void mapping_unref(mapping *m) {
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    if (m->heap)
        tg_free_aligned(m->base);
    else
        munmap(m->base, m->len);
    tg_free(m);
}

static void mapped_release(tg_buffer *b) { mapping_unref(b->release_ud); }

struct tg_tgf {
    char *what;
    char *warning;
    bool cuda_said; /* the warning says the GPU is not usable here */
    tg_function **fns;
    int nfns;
    tg_shared **shared;
    int nshared, cshared; /* cshared: the room in shared and shared_from */
    struct tg_idmap *shared_ids; /* id -> shared[k] */
    /* The array of the file each shared value was restored from (one of
     * arrays), or NULL (a value from a version-1 file, or from the
     * original graph): save_state copies the original graph's text with
     * its references to them moved to the current values. */
    const tg_array **shared_from;
    tg_array **arrays;
    int narrays;
    json_object *root; /* the header, kept for the original graph */
    int version;       /* the format version, the preamble's and the header's */
    mapping *map;
    bool reoptimized; /* the functions were compiled at load, not restored */
};

typedef struct reader {
    tg_tgf *t;
    const unsigned char *data; /* the whole file */
    size_t len;
    uint64_t data_off, data_len;
    tg_ctx *ctx;
    uint32_t version; /* the preamble's */
} reader;

/* What follows the JSON path of a string holding \u0000 (io.h,
 * tg_json_find_nul). */
#define NUL_WHY "contains a NUL character (\\u0000), which tg does not accept in a compiled-function file " \
                "(its strings would end there)"

static int bad(reader *R, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(reader *R, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tg_errorf(R->ctx, status, "%s: %s", R->t->what, msg);
}

bool tg_tgf_is_file(const char *path) {
    if (!path) return false;
    size_t n = strlen(path);
    if (n >= 4 && !strcasecmp(path + n - 4, ".tgf")) return true;
    /* O_NONBLOCK: a FIFO is not waited on (nor read: it is not regular). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st;
    char magic[8];
    bool yes = !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size >= TG_TGF_PREAMBLE &&
               pread(fd, magic, 8, 0) == 8 && !memcmp(magic, TG_TGF_MAGIC, 8);
    close(fd);
    return yes;
}

static int read_preamble(reader *R) {
    const unsigned char *p = R->data;
    if (R->len < TG_TGF_PREAMBLE)
        return bad(R, TG_EPARSE,
                   "truncated: %zu bytes, shorter than the %d-byte preamble of a .tgf file",
                   R->len, TG_TGF_PREAMBLE);
    if (memcmp(p, TG_TGF_MAGIC, 8))
        return bad(R, TG_EPARSE, "not a compiled-function file (bad magic number)");
    if (tg_le_get32(p + 56) != tg_crc32c(0, p, 56))
        return bad(R, TG_EPARSE, "preamble checksum mismatch: the file is damaged");
    if (tg_le_get32(p + 52) || tg_le_get32(p + 60))
        return bad(R, TG_EPARSE, "preamble: reserved bytes are not zero: the file is damaged");
    uint32_t ver = tg_le_get32(p + 8);
    if (ver > TG_TGF_VERSION)
        return bad(R, TG_EVERSION,
                   "format version %u is newer than this tg (%s) reads (%d): use a newer tg, "
                   "or compile the graph again",
                   ver, tg_version(), TG_TGF_VERSION);
    if (ver == 0) return bad(R, TG_EPARSE, "format version 0 is not a valid version");
    /* No flag is defined: one a later tg sets may change how the rest
     * reads, so a reader that ignored it could misread the file. */
    if (tg_le_get32(p + 12))
        return bad(R, TG_EPARSE, "preamble: flags 0x%x, but no flags are defined (expected 0)",
                   tg_le_get32(p + 12));
    R->version = ver;
    uint64_t hoff = tg_le_get64(p + 16), hlen = tg_le_get64(p + 24);
    R->data_off = tg_le_get64(p + 32);
    R->data_len = tg_le_get64(p + 40);
    if (hoff != TG_TGF_PREAMBLE)
        return bad(R, TG_EPARSE, "header offset %llu, expected %d", (unsigned long long)hoff,
                   TG_TGF_PREAMBLE);
    if (hlen > R->len - TG_TGF_PREAMBLE)
        return bad(R, TG_EPARSE,
                   "truncated: the header of %llu bytes runs past the end of the file "
                   "(%zu bytes)",
                   (unsigned long long)hlen, R->len);
    if (R->data_off < TG_TGF_PREAMBLE + hlen || R->data_off % TG_TGF_ALIGN)
        return bad(R, TG_EPARSE, "data offset %llu is not a %d-byte boundary after the header",
                   (unsigned long long)R->data_off, TG_TGF_ALIGN);
    if (R->data_off > R->len || R->data_len > R->len - R->data_off)
        return bad(R, TG_EPARSE,
                   "truncated: the data ends at byte %llu but the file has %zu bytes",
                   (unsigned long long)(R->data_off + (R->data_off > UINT64_MAX - R->data_len
                                                           ? 0
                                                           : R->data_len)),
                   R->len);
    if (R->data_off + R->data_len != R->len)
        return bad(R, TG_EPARSE, "%zu bytes after the end of the data (byte %llu)",
                   R->len - (size_t)(R->data_off + R->data_len),
                   (unsigned long long)(R->data_off + R->data_len));
    if (tg_le_get32(p + 48) != tg_crc32c(0, p + TG_TGF_PREAMBLE, hlen))
        return bad(R, TG_EPARSE, "header checksum mismatch: the file is damaged");
    if (hlen > (uint64_t)INT32_MAX) return bad(R, TG_EPARSE, "header too large");
    tg_json_fail jf;
    json_object *root = tg_json_parse_object(NULL, (const char *)p + TG_TGF_PREAMBLE, (size_t)hlen, 64, &jf);
    if (!root) {
        if (jf.status == TG_ENOMEM) return bad(R, TG_ENOMEM, "out of memory");
        if (jf.why == tg_json_not_object) return bad(R, TG_EPARSE, "header: expected a JSON object");
        return bad(R, TG_EPARSE, "header: invalid JSON at byte %zu: %s", jf.at, jf.why);
    }
    /* Function names, tags, a version 1 file's graphs: kept as C strings,
     * which a \u0000 would cut, as the JSON loader refuses it. */
    char where[256];
    if (tg_json_find_nul((const char *)p + TG_TGF_PREAMBLE, (size_t)hlen, where, sizeof where)) {
        json_object_put(root);
        return bad(R, TG_ELOAD, "header: %s: " NUL_WHY, where);
    }
    R->t->root = root;
    return TG_OK;
}

static json_object *get(json_object *o, const char *key, json_type type) {
    json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type)) return NULL;
    return v;
}

/* One entry of the array table, checked against the file before anything
 * of its size is allocated. */
static int make_array(reader *R, int k, tg_dtype dt, size_t nd, const int64_t *shape, int64_t off,
                      int64_t nb, int64_t crc, bool copy) {
    int64_t count = tg_shape_size((int)nd, shape), want;
    if (count < 0 || __builtin_mul_overflow(count, (int64_t)tg_isize(dt), &want))
        return bad(R, TG_EPARSE, "header: arrays[%d].shape: absurd size (overflows)", k);
    if (nb != want)
        return bad(R, TG_EPARSE,
                   "header: arrays[%d]: nbytes %lld does not match its %s shape (%lld bytes)", k,
                   (long long)nb, tg_dtype_name(dt), (long long)want);
    if (off < 0 || off % TG_TGF_ALIGN || (uint64_t)off > R->data_len ||
        (uint64_t)nb > R->data_len - (uint64_t)off)
        return bad(R, TG_EPARSE,
                   "arrays[%d]: %lld bytes at offset %lld run past the end of the data "
                   "(%llu bytes) or are not %d-byte aligned",
                   k, (long long)nb, (long long)off, (unsigned long long)R->data_len,
                   TG_TGF_ALIGN);
    const unsigned char *src = R->data + R->data_off + off;
    if (!tg_tgf_fuzz_no_checksums &&
        (crc < 0 || crc > UINT32_MAX || tg_crc32c(0, src, (size_t)nb) != (uint32_t)crc))
        return bad(R, TG_EPARSE, "arrays[%d]: checksum mismatch: the data is damaged", k);
    tg_array *a = tg_calloc(1, sizeof *a);
    tg_buffer *b = NULL;
    if (!a) return bad(R, TG_ENOMEM, "out of memory");
    if (copy) {
        b = tg_buffer_new((size_t)nb);
        if (b && nb) {
            tg_prefault(b->data, (size_t)nb);
            memcpy(b->data, src, (size_t)nb);
        }
    } else if ((b = tg_malloc(sizeof *b))) {
        atomic_init(&b->refcount, 1);
        b->data = (void *)src;
        b->nbytes = (size_t)nb;
        b->release = mapped_release;
        b->release_ud = R->t->map;
        atomic_fetch_add(&R->t->map->refs, 1);
    }
    if (!b) {
        tg_free(a);
        return bad(R, TG_ENOMEM, "out of memory");
    }
    atomic_init(&a->refcount, 1);
    a->dtype = dt;
    a->ndim = (int)nd;
    memcpy(a->shape, shape, sizeof(int64_t) * nd);
    tg_strides_contiguous(dt, (int)nd, shape, a->strides);
    a->buf = b;
    a->data = b->data;
    R->t->arrays[k] = a;
    return TG_OK;
}

/* Format version 1: the array table in the JSON header. */
static int read_array_json(reader *R, json_object *e, int k, bool copy) {
    json_object *jd = get(e, "dtype", json_type_string), *js = get(e, "shape", json_type_array),
                *jo = NULL, *jn = NULL, *jc = NULL;
    int64_t off, nb, crc;
    if (!jd || !js || !json_object_object_get_ex(e, "offset", &jo) ||
        !json_object_object_get_ex(e, "nbytes", &jn) ||
        !json_object_object_get_ex(e, "crc32c", &jc) || !tg_json_get_int(jo, &off) ||
        !tg_json_get_int(jn, &nb) || !tg_json_get_int(jc, &crc))
        return bad(R, TG_EPARSE,
                   "header: arrays[%d]: expected dtype, shape, offset, nbytes and crc32c", k);
    tg_dtype dt = tg_dtype_from_name(json_object_get_string(jd));
    if (dt == TG_DTYPE_INVALID)
        return bad(R, TG_EPARSE, "header: arrays[%d].dtype: unknown dtype '%.40s'", k,
                   json_object_get_string(jd));
    size_t nd = json_object_array_length(js);
    if (nd > TG_MAX_NDIM)
        return bad(R, TG_EPARSE, "header: arrays[%d].shape: %zu dimensions (at most %d)", k, nd,
                   TG_MAX_NDIM);
    int64_t shape[TG_MAX_NDIM];
    for (size_t d = 0; d < nd; d++)
        if (!tg_json_get_int(json_object_array_get_idx(js, d), &shape[d]) || shape[d] < 0)
            return bad(R, TG_EPARSE,
                       "header: arrays[%d].shape[%zu]: expected a non-negative integer", k, d);
    return make_array(R, k, dt, nd, shape, off, nb, crc, copy);
}

/* Format version 2: the binary array table in the data section; returns
 * the number of arrays through *n. */
static int read_array_table(reader *R, json_object *jt, bool copy) {
    json_object *jo = NULL, *jn = NULL, *jc = NULL;
    int64_t off, n, crc;
    if (!json_object_object_get_ex(jt, "offset", &jo) || !json_object_object_get_ex(jt, "count", &jn) ||
        !json_object_object_get_ex(jt, "crc32c", &jc) || !tg_json_get_int(jo, &off) ||
        !tg_json_get_int(jn, &n) || !tg_json_get_int(jc, &crc))
        return bad(R, TG_EPARSE, "header.array_table: expected offset, count and crc32c");
    if (n < 0 || n > INT32_MAX / 2 || off < 0 || off % TG_TGF_ALIGN || (uint64_t)off > R->data_len ||
        (uint64_t)n > (R->data_len - (uint64_t)off) / TGF_ENTRY)
        return bad(R, TG_EPARSE,
                   "header.array_table: %lld entries at offset %lld run past the end of the data "
                   "(%llu bytes) or are not aligned",
                   (long long)n, (long long)off, (unsigned long long)R->data_len);
    const unsigned char *tb = R->data + R->data_off + off;
    if (!tg_tgf_fuzz_no_checksums &&
        (crc < 0 || crc > UINT32_MAX || tg_crc32c(0, tb, (size_t)n * TGF_ENTRY) != (uint32_t)crc))
        return bad(R, TG_EPARSE, "the array table's checksum does not match: the file is damaged");
    tg_tgf *t = R->t;
    if (!(t->arrays = tg_calloc((size_t)n + 1, sizeof *t->arrays)))
        return bad(R, TG_ENOMEM, "out of memory");
    t->narrays = (int)n;
    for (int k = 0; k < (int)n; k++) {
        const unsigned char *e = tb + (size_t)k * TGF_ENTRY;
        int64_t shape[TG_MAX_NDIM];
        if (e[0] >= TG_NDTYPES || e[1] > TG_MAX_NDIM)
            return bad(R, TG_EPARSE, "array table[%d]: unknown dtype %u or %u dimensions", k, e[0],
                       e[1]);
        /* Every byte of a record is accounted for: the padding and the
         * unused lengths are zero (schemas/tgf.md), so that a later
         * version can give them a meaning. */
        static const unsigned char zero[8];
        if (memcmp(e + 2, zero, 6))
            return bad(R, TG_EPARSE, "array table[%d]: bytes 2-7 are not zero", k);
        if (memcmp(e + 92, zero, 4))
            return bad(R, TG_EPARSE, "array table[%d]: bytes 92-95 are not zero", k);
        for (int d = e[1]; d < TG_MAX_NDIM; d++)
            if (tg_le_get64(e + 8 + 8 * d))
                return bad(R, TG_EPARSE, "array table[%d]: shape[%d] is not zero, past the array's %u dimensions",
                           k, d, e[1]);
        for (int d = 0; d < e[1]; d++) {
            uint64_t len = tg_le_get64(e + 8 + 8 * d);
            if (len > INT64_MAX)
                return bad(R, TG_EPARSE, "array table[%d]: shape[%d] is absurd", k, d);
            shape[d] = (int64_t)len;
        }
        uint64_t aoff = tg_le_get64(e + 72), nb = tg_le_get64(e + 80);
        if (aoff > INT64_MAX || nb > INT64_MAX)
            return bad(R, TG_EPARSE, "array table[%d]: absurd offset or length", k);
        int rc = make_array(R, k, (tg_dtype)e[0], e[1], shape, (int64_t)aoff, (int64_t)nb,
                            tg_le_get32(e + 88), copy);
        if (rc) return rc;
    }
    return TG_OK;
}

typedef struct resolve_ctx {
    tg_tgf *t;
    bool current_shared; /* shared variables take the set's current values */
} resolve_ctx;

static tg_array *resolve_array(void *ud, json_object *ref, const tg_var *v, const char *where,
                               tg_ctx *ctx) {
    resolve_ctx *rc = ud;
    tg_tgf *t = rc->t;
    int64_t k;
    if (!tg_json_get_int(ref, &k) || k < 0 || k >= t->narrays) {
        tg_errorf(ctx, TG_ELOAD, "%s.tgf_array: expected an index into the %d arrays", where,
                  t->narrays);
        return NULL;
    }
    tg_array *a = t->arrays[k];
    if (rc->current_shared && v->kind == TG_VAR_SHARED && t->shared_ids) {
        tg_shared *s = tg_idmap_get(t->shared_ids, v->id);
        tg_array *cur = s ? tg_shared_value(s, ctx) : NULL;
        if (s && !cur && s->dev) return NULL; /* could not bring it back (ctx says why) */
        if (cur) a = cur;
    }
    if (!tg_type_accepts(&v->type, a)) {
        char want[128];
        tg_type_str(&v->type, want, sizeof want);
        tg_errorf(ctx, TG_ELOAD, "%s: array %lld (%s, %d dimensions) does not fit '%s' (%s)",
                  where, (long long)k, tg_dtype_name(a->dtype), a->ndim, v->id, want);
        return NULL;
    }
    return tg_array_ref(a);
}

/* Room for one more entry in t->shared and t->shared_from (doubling: a
 * file of 1,000 shared scalars grew them 2,000 times). TG_OK or TG_ENOMEM. */
static int shared_room(tg_tgf *t) {
    if (t->nshared < t->cshared) return TG_OK;
    int c = t->cshared ? 2 * t->cshared : 16;
    tg_shared **p = tg_realloc(t->shared, sizeof *p * (size_t)c);
    if (!p) return TG_ENOMEM;
    t->shared = p;
    const tg_array **q = tg_realloc(t->shared_from, sizeof *q * (size_t)c);
    if (!q) return TG_ENOMEM;
    t->shared_from = q;
    t->cshared = c;
    return TG_OK;
}

/* Make the graph's shared variables the set's: functions of one file share
 * state, as the functions of one graph do. */
static int unify_shared(tg_tgf *t, tg_graph *g, tg_ctx *ctx) {
    if (!t->shared_ids && !(t->shared_ids = tg_idmap_new()))
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    for (int i = 0; i < g->nvars; i++) {
        tg_var *v = g->vars[i];
        if (v->kind != TG_VAR_SHARED || !v->shared) continue;
        tg_shared *found = tg_idmap_get(t->shared_ids, v->id);
        if (found) {
            if (!tg_type_equal(&found->type, &v->shared->type))
                return tg_errorf(ctx, TG_ELOAD,
                                 "%s: shared variable '%s' has different types in two "
                                 "functions",
                                 t->what, v->id);
            tg_shared_unref(v->shared);
            v->shared = tg_shared_ref(found);
            continue;
        }
        if (shared_room(t)) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        t->shared_from[t->nshared] = NULL;
        t->shared[t->nshared] = tg_shared_ref(v->shared);
        /* The key is the shared state's own id, which lives as long as t
         * holds it. */
        if (tg_idmap_put(t->shared_ids, t->shared[t->nshared]->id, t->shared[t->nshared])) {
            tg_shared_unref(t->shared[t->nshared]);
            return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        }
        t->nshared++;
    }
    return TG_OK;
}

/* Put fg's nodes in the order of `keys` (the saved schedule), checking
 * that it names each node once and is a topological order. */
static int reorder(tg_fgraph *fg, const char *const *keys, int nkeys, const char *what,
                   tg_ctx *ctx) {
    if (nkeys != fg->nnodes)
        return tg_errorf(ctx, TG_ELOAD, "%s: the schedule has %d nodes, the graph %d", what,
                         nkeys, fg->nnodes);
    struct tg_idmap *m = tg_idmap_new();
    tg_node **order = tg_calloc((size_t)fg->nnodes + 1, sizeof *order);
    int rc = TG_OK;
    if (!m || !order) {
        rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < fg->nnodes; i++) {
        tg_node *n = fg->nodes[i];
        n->mark = NULL;
        if (!n->nout || tg_idmap_get(m, n->outputs[0]->id)) {
            rc = tg_errorf(ctx, TG_ELOAD, "%s: a node has no key of its own", what);
            goto done;
        }
        if (tg_idmap_put(m, n->outputs[0]->id, n)) {
            rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
    }
    for (int k = 0; k < nkeys; k++) {
        tg_node *n = tg_idmap_get(m, keys[k]);
        if (!n || n->mark) {
            rc = tg_errorf(ctx, TG_ELOAD, "%s: schedule[%d]: '%.128s' is %s", what, k, keys[k],
                           n ? "listed twice" : "not a node of the graph");
            goto done;
        }
        for (int j = 0; j < n->nin; j++) {
            tg_node *p = n->inputs[j]->owner;
            if (p && !p->mark) {
                rc = tg_errorf(ctx, TG_ELOAD,
                               "%s: schedule[%d]: '%.128s' comes before '%.128s', which it "
                               "reads",
                               what, k, keys[k], p->outputs[0]->id);
                goto done;
            }
        }
        n->mark = n;
        order[k] = n;
    }
    for (int k = 0; k < nkeys; k++) {
        order[k]->mark = NULL;
        order[k]->index = k;
        fg->nodes[k] = order[k];
    }
done:
    if (rc && fg)
        for (int i = 0; i < fg->nnodes; i++) fg->nodes[i]->mark = NULL;
    tg_idmap_free(m);
    tg_free(order);
    return rc;
}

/* TG_ENOMEM (out of memory) apart from TG_EPARSE (no list of strings),
 * for the callers that take a missing list as an empty one. */
static int string_list(json_object *a, const char ***out, int *n) {
    if (!a || !json_object_is_type(a, json_type_array)) return TG_EPARSE;
    size_t len = json_object_array_length(a);
    const char **s = tg_calloc(len + 1, sizeof *s);
    if (!s) return TG_ENOMEM;
    for (size_t i = 0; i < len; i++) {
        json_object *e = json_object_array_get_idx(a, i);
        if (!json_object_is_type(e, json_type_string)) {
            tg_free(s);
            return TG_EPARSE;
        }
        s[i] = json_object_get_string(e);
    }
    *out = s;
    *n = (int)len;
    return 0;
}

/* The rewrite record of a restored function; its names live in f->strpool. */
static int restore_record(tg_function *f, json_object *jrw, const char *what, tg_ctx *ctx) {
    if (!jrw) return TG_OK;
    if (!json_object_is_type(jrw, json_type_array))
        return tg_errorf(ctx, TG_ELOAD, "%s.rewrites: expected an array", what);
    size_t n = json_object_array_length(jrw), total = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(jrw, i);
        json_object *jn = get(e, "name", json_type_string), *jp = get(e, "pass", json_type_string);
        if (!jn || !jp)
            return tg_errorf(ctx, TG_ELOAD, "%s.rewrites[%zu]: expected name and pass", what, i);
        total += strlen(json_object_get_string(jn)) + strlen(json_object_get_string(jp)) + 2;
    }
    f->strpool = tg_malloc(total + 1);
    if (!f->strpool) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    char *p = f->strpool;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(jrw, i);
        const char *name = json_object_get_string(get(e, "name", json_type_string));
        const char *pass = json_object_get_string(get(e, "pass", json_type_string));
        const char **rm = NULL, **cr = NULL;
        int nrm = 0, ncr = 0;
        int r = string_list(get(e, "removed", json_type_array), &rm, &nrm);
        if (!r) r = string_list(get(e, "created", json_type_array), &cr, &ncr);
        if (r) {
            tg_free(rm);
            if (r == TG_ENOMEM) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
            return tg_errorf(ctx, TG_ELOAD,
                             "%s.rewrites[%zu]: removed and created must be lists of keys", what,
                             i);
        }
        char *pn = p;
        p = stpcpy(p, name) + 1;
        char *pp = p;
        p = stpcpy(p, pass) + 1;
        int rc = tg_opt_record_add(&f->record, pn, pp, rm, nrm, cr, ncr);
        tg_free(rm);
        tg_free(cr);
        if (rc) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    return TG_OK;
}

static int restore_origins(tg_fgraph *fg, json_object *jo, const char *what, tg_ctx *ctx) {
    if (!jo) return TG_OK;
    if (!json_object_is_type(jo, json_type_object))
        return tg_errorf(ctx, TG_ELOAD, "%s.origins: expected an object", what);
    for (int i = 0; i < fg->nnodes; i++) {
        tg_node *n = fg->nodes[i];
        json_object *ja = NULL;
        if (!n->nout || !json_object_object_get_ex(jo, n->outputs[0]->id, &ja)) continue;
        const char **keys = NULL;
        int nk = 0;
        int r = string_list(ja, &keys, &nk);
        if (r == TG_ENOMEM) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        if (r)
            return tg_errorf(ctx, TG_ELOAD, "%s.origins.%.128s: expected a list of keys", what,
                             n->outputs[0]->id);
        n->origins = tg_origins_pack(keys, nk);
        n->norigins = nk;
        int rc = n->origins ? TG_OK : TG_ENOMEM;
        tg_free(keys);
        if (rc) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    return TG_OK;
}

/* One saved function: its graph loaded as it was saved, in its schedule,
 * linked. No optimizer. */
/* The shared state for a saved shared variable: one per id across the
 * file's functions. */
static tg_shared *shared_for(void *ud, const char *id, const tg_type *type, tg_array *value,
                             tg_ctx *ctx) {
    tg_tgf *t = ud;
    if (!t->shared_ids && !(t->shared_ids = tg_idmap_new())) goto oom;
    tg_shared *found = tg_idmap_get(t->shared_ids, id);
    if (found) {
        if (!tg_type_equal(&found->type, type)) {
            tg_errorf(ctx, TG_ELOAD, "%s: shared variable '%.128s' has different types in two "
                      "functions", t->what, id);
            return NULL;
        }
        return tg_shared_ref(found);
    }
    if (shared_room(t)) goto oom;
    tg_shared *s = tg_shared_new(id, type, value);
    if (!s) goto oom;
    if (tg_idmap_put(t->shared_ids, s->id, s)) {
        tg_shared_unref(s);
        goto oom;
    }
    t->shared_from[t->nshared] = value;
    t->shared[t->nshared++] = s;
    return tg_shared_ref(s);
oom:
    tg_errorf(ctx, TG_ENOMEM, "out of memory");
    return NULL;
}

/* TG_DEVICE=cpu: functions placed on a device are restored (or
 * optimized again) for the CPU. */
static bool device_forced_cpu(void) {
    const char *env = getenv("TG_DEVICE");
    return env && !strcmp(env, "cpu");
}

/* Add to the file's warning line: function `name` was placed on a device
 * and runs on the CPU kernels here, and why. */
static void placement_warn(tg_tgf *t, const char *name, const char *why) {
    tg_str w = {0};
    if (t->warning)
        tg_str_addf(&w, "%s; function '%.80s' ran on the GPU: %s", t->warning, name ? name : "?", why);
    else
        tg_str_addf(&w, "%s: loaded anyway, running on the CPU kernels; function '%.80s' ran on the GPU: %s",
                    t->what, name ? name : "?", why);
    if (!w.s) return;
    tg_free(t->warning);
    t->warning = w.s;
}

/* A placed function's entry (function_entry): "device", "device_nodes"
 * (schedule positions, which are fg's node order here) and "resident"
 * (ids of fg's shared variables and constants). Sets the resident flags
 * and *on_dev (NULL for a function on the CPU, and when TG_DEVICE=cpu
 * keeps it there). A bad list is TG_ELOAD naming it; a device this tg does
 * not know, the CPU with a warning. */
static int placement_read(tg_tgf *t, json_object *jf, tg_fgraph *fg, const char *what, bool **on_dev,
                          tg_ctx *ctx) {
    *on_dev = NULL;
    json_object *jd = NULL;
    if (!json_object_object_get_ex(jf, "device", &jd)) return TG_OK;
    const char *dev = json_object_is_type(jd, json_type_string) ? json_object_get_string(jd) : NULL;
    json_object *jn = get(jf, "device_nodes", json_type_array), *jr = get(jf, "resident", json_type_array);
    if (!dev || !jn || !jr)
        return tg_errorf(ctx, TG_ELOAD, "%s: expected device (a string), device_nodes and resident (arrays)",
                         what);
    bool *flags = tg_calloc((size_t)fg->nnodes + 1, sizeof *flags);
    if (!flags) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    for (size_t i = 0; i < json_object_array_length(jn); i++) {
        int64_t k;
        if (!tg_json_get_int(json_object_array_get_idx(jn, i), &k) || k < 0 || k >= fg->nnodes) {
            tg_free(flags);
            return tg_errorf(ctx, TG_ELOAD, "%s.device_nodes[%zu]: expected a position in the schedule (0 to %d)",
                             what, i, fg->nnodes - 1);
        }
        flags[k] = true;
    }
    /* The resident ids in a map (entry i + 1), then one sweep over the
     * variables: linear in both, for a function of any size. */
    const size_t nr = json_object_array_length(jr);
    struct tg_idmap *want = tg_idmap_new();
    bool *seen = tg_calloc(nr + 1, sizeof *seen);
    size_t bad = nr;
    if (!want || !seen) {
        tg_idmap_free(want);
        tg_free(seen);
        tg_free(flags);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < nr && bad == nr; i++) {
        json_object *e = json_object_array_get_idx(jr, i);
        const char *id = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : NULL;
        if (!id || tg_idmap_get(want, id)) {
            bad = i; /* not a string, or given twice */
        } else if (tg_idmap_put(want, id, (void *)(uintptr_t)(i + 1))) {
            tg_idmap_free(want);
            tg_free(seen);
            tg_free(flags);
            return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        }
    }
    for (int j = 0; j < fg->nvars && bad == nr; j++) {
        tg_var *v = fg->vars[j];
        size_t i = (size_t)(uintptr_t)tg_idmap_get(want, v->id);
        if (!i) continue;
        if (v->kind != TG_VAR_SHARED && v->kind != TG_VAR_CONSTANT) bad = i - 1;
        seen[i - 1] = true;
        v->resident = true;
    }
    for (size_t i = 0; i < nr && bad == nr; i++)
        if (!seen[i]) bad = i;
    tg_idmap_free(want);
    tg_free(seen);
    const bool cuda = !strcmp(dev, "cuda");
    if (bad < nr || !cuda || device_forced_cpu()) { /* on the CPU, if at all */
        for (int j = 0; j < fg->nvars; j++) fg->vars[j]->resident = false;
        tg_free(flags);
        flags = NULL;
    }
    if (bad < nr)
        return tg_errorf(ctx, TG_ELOAD, "%s.resident[%zu]: expected the id of a shared variable or constant "
                         "of the function, once", what, bad);
    if (!cuda) {
        char why[96];
        snprintf(why, sizeof why, "device '%.40s' is unknown to this tg", dev);
        placement_warn(t, json_object_get_string(get(jf, "name", json_type_string)), why);
    }
    *on_dev = flags;
    return TG_OK;
}

/* Format version 2: the function's graph section. */
static tg_function *restore_section(tg_tgf *t, json_object *jf, int64_t k, const char *what,
                                    tg_ctx *ctx) {
    json_object *jname = get(jf, "name", json_type_string), *jno = get(jf, "no_gc", json_type_boolean);
    if (!jname) {
        tg_errorf(ctx, TG_ELOAD, "%s: expected a name", what);
        return NULL;
    }
    if (k < 0 || k >= t->narrays || t->arrays[k]->dtype != TG_UINT8 || t->arrays[k]->ndim != 1) {
        tg_errorf(ctx, TG_ELOAD, "%s.graph_section: expected the index of a uint8 array", what);
        return NULL;
    }
    /* A section's version is the file's (each version's sections read
     * more than the last one's: the two must agree). */
    const unsigned char *sec = tg_array_data(t->arrays[k]);
    if (t->arrays[k]->shape[0] >= 4 && !memcmp(sec, "TGG", 3) && sec[3] != (unsigned char)t->version) {
        tg_errorf(ctx, TG_ELOAD, "%s.graph_section: a format version %u section in a version %d file", what,
                  sec[3], t->version);
        return NULL;
    }
    tgf_decoded d;
    if (tgf_graph_decode(tg_array_data(t->arrays[k]), (size_t)t->arrays[k]->shape[0], t->arrays,
                         t->narrays, shared_for, t, what, &d, ctx))
        return NULL;
    int nout = d.fg->nout;
    bool *on_dev = NULL;
    tg_function *f = NULL;
    if (placement_read(t, jf, d.fg, what, &on_dev, ctx)) {
        tg_fgraph_free(d.fg);
        d.fg = NULL;
        goto done;
    }
    char why[256];
    f = tg_function_link_fgraph(json_object_get_string(jname), d.fg, jno && json_object_get_boolean(jno), on_dev,
                                why, sizeof why, ctx);
    tg_free(on_dev);
    /* (A build without the backend, or without a usable device, said so
     * in the fingerprint's line.) */
    if (f && *why && !t->cuda_said) placement_warn(t, json_object_get_string(jname), why);
    if (f) {
        /* The declared output ids, which a folded output does not keep. */
        for (int i = 0; i < nout; i++) {
            tg_free(f->out_ids[i]);
            f->out_ids[i] = d.out_ids[i];
            d.out_ids[i] = NULL;
        }
        f->record = d.record;
        f->strpool = d.strpool;
        memset(&d.record, 0, sizeof d.record);
        d.strpool = NULL;
    }
done:
    for (int i = 0; i < nout; i++) tg_free(d.out_ids[i]);
    tg_free(d.out_ids);
    tg_opt_record_free(&d.record);
    tg_free(d.strpool);
    return f;
}

static tg_function *restore_function(tg_tgf *t, json_object *jf, int i, tg_ctx *ctx) {
    char what[600];
    snprintf(what, sizeof what, "%s: functions[%d]", t->what, i);
    json_object *jsec = NULL;
    int64_t ks;
    if (json_object_object_get_ex(jf, "graph_section", &jsec)) {
        if (!tg_json_get_int(jsec, &ks)) {
            tg_errorf(ctx, TG_ELOAD, "%s.graph_section: expected an array index", what);
            return NULL;
        }
        return restore_section(t, jf, ks, what, ctx);
    }
    json_object *jname = get(jf, "name", json_type_string), *jg = get(jf, "graph", json_type_object),
                *jsched = get(jf, "schedule", json_type_array), *jno = get(jf, "no_gc", json_type_boolean);
    if (!jname || !jg || !jsched) {
        tg_errorf(ctx, TG_ELOAD, "%s: expected name, graph and schedule", what);
        return NULL;
    }
    char gwhat[640];
    snprintf(gwhat, sizeof gwhat, "%s.graph", what);
    resolve_ctx rc = {t, false};
    tg_graph *g = tg_graph_load_json(jg, gwhat, resolve_array, &rc, ctx);
    tg_function *f = NULL;
    tg_fgraph *fg = NULL;
    const char **keys = NULL;
    int nkeys = 0;
    if (!g) return NULL;
    if (g->nfuncs != 1 || strcmp(g->funcs[0].name, json_object_get_string(jname))) {
        tg_errorf(ctx, TG_ELOAD, "%s.graph: expected the one function '%.128s'", what,
                  json_object_get_string(jname));
        goto fail;
    }
    if (unify_shared(t, g, ctx)) goto fail;
    if (!(fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx))) goto fail;
    int rl = string_list(jsched, &keys, &nkeys);
    if (rl) {
        if (rl == TG_ENOMEM)
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
        else
            tg_errorf(ctx, TG_ELOAD, "%s.schedule: expected a list of node keys", what);
        goto fail;
    }
    if (reorder(fg, keys, nkeys, what, ctx) ||
        restore_origins(fg, get(jf, "origins", json_type_object), what, ctx))
        goto fail;
    /* Errors name no node by its place in the saved graph, which is not
     * the file the user wrote: version 1 did not keep that place. */
    for (int k = 0; k < fg->nnodes; k++) fg->nodes[k]->json_index = -1;
    f = tg_function_link_fgraph(g->funcs[0].name, fg, jno && json_object_get_boolean(jno), NULL, NULL, 0, ctx);
    fg = NULL;
    if (!f) goto fail;
    json_object *jrw = NULL;
    json_object_object_get_ex(jf, "rewrites", &jrw);
    if (restore_record(f, jrw, what, ctx)) goto fail;
    tg_free(keys);
    tg_graph_free(g);
    return f;
fail:
    tg_free(keys);
    tg_fgraph_free(fg);
    tg_function_free(f);
    tg_graph_free(g);
    return NULL;
}

/* The saved original graph, parsed (the caller puts it); NULL with
 * *absent set when the file keeps none, NULL with an error when it is bad. */
/* The index of the array holding t's original graph (text), or -1 when
 * header.original is not the index of a uint8 array. */
static int64_t original_index(const tg_tgf *t) {
    json_object *jk = NULL;
    int64_t k;
    if (!json_object_object_get_ex(t->root, "original", &jk) || !tg_json_get_int(jk, &k) || k < 0 ||
        k >= t->narrays || t->arrays[k]->dtype != TG_UINT8 || t->arrays[k]->ndim != 1 ||
        t->arrays[k]->shape[0] > INT32_MAX)
        return -1;
    return k;
}

static json_object *original_json(tg_tgf *t, bool *absent, tg_ctx *ctx) {
    *absent = !json_object_object_get_ex(t->root, "original", NULL);
    if (*absent) return NULL;
    int64_t k = original_index(t);
    if (k < 0) {
        tg_errorf(ctx, TG_ELOAD, "%s: header.original: expected the index of a uint8 array",
                  t->what);
        return NULL;
    }
    tg_json_fail jf;
    json_object *o = tg_json_parse_object(NULL, tg_array_data(t->arrays[k]), (size_t)t->arrays[k]->shape[0],
                                          TG_JSON_DEPTH, &jf);
    if (!o) {
        if (jf.status == TG_ENOMEM)
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
        else if (jf.why == tg_json_not_object)
            tg_errorf(ctx, TG_ELOAD, "%s: the original graph (array %lld) is not a JSON object",
                      t->what, (long long)k);
        else
            tg_errorf(ctx, TG_ELOAD, "%s: the original graph (array %lld) is not valid JSON: %s",
                      t->what, (long long)k, jf.why);
        return NULL;
    }
    /* An integer json-c clamped is quoted as written, as the graph
     * loader does for a file. */
    const char *txt = tg_array_data(t->arrays[k]);
    size_t len = (size_t)t->arrays[k]->shape[0];
    int64_t huge = tg_json_find_huge_int(txt, len);
    if (huge >= 0) {
        int line, col, n = 0;
        tg_json_line_col(txt, (size_t)huge, &line, &col);
        while (n < 40 && (size_t)huge + n < len && strchr("-0123456789", txt[huge + n])) n++;
        tg_errorf(ctx, TG_ELOAD,
                  "%s: the original graph (array %lld): line %d, column %d: the integer %.*s%s is out of "
                  "range (int64 and uint64 end at -2^63 and 2^64 - 1)",
                  t->what, (long long)k, line, col, n, txt + huge, n == 40 ? "..." : "");
        json_object_put(o);
        return NULL;
    }
    char where[256];
    if (tg_json_find_nul(txt, len, where, sizeof where)) {
        tg_errorf(ctx, TG_ELOAD, "%s: the original graph (array %lld): %s: " NUL_WHY, t->what, (long long)k,
                  where);
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* The saved original graph, loaded, its shared variables the set's
 * (current: with their values now, not as saved). NULL with *absent set
 * when the file keeps none (no error), NULL with an error when it is bad. */
static tg_graph *original_graph(tg_tgf *t, bool current, bool *absent, tg_ctx *ctx) {
    json_object *jo = original_json(t, absent, ctx);
    if (!jo) return NULL;
    char what[600];
    snprintf(what, sizeof what, "%s: original", t->what);
    resolve_ctx r = {t, current};
    tg_graph *g = tg_graph_load_json(jo, what, resolve_array, &r, ctx);
    json_object_put(jo);
    if (g && unify_shared(t, g, ctx)) {
        tg_graph_free(g);
        g = NULL;
    }
    return g;
}

/* A tag of the file's options that the optimizer does not know reads
 * "unknown optimizer tag 'T' (...)" in ctx: said again naming the file
 * and the entry, which the caller's --include would not be. */
static void saved_tag_error(const tg_tgf *t, const char *const *inc, const char *const *exc, tg_ctx *ctx) {
    static const char UNKNOWN[] = "unknown optimizer tag '";
    const char *m = tg_ctx_message(ctx);
    if (tg_ctx_status(ctx) != TG_EINVAL || !m || strncmp(m, UNKNOWN, sizeof UNKNOWN - 1)) return;
    const char *tag = m + sizeof UNKNOWN - 1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; (pass ? exc : inc) && (pass ? exc : inc)[i]; i++) {
            const char *s = (pass ? exc : inc)[i];
            size_t n = strlen(s);
            if (strncmp(tag, s, n) || tag[n] != '\'') continue;
            char *msg = tg_strdup(m);
            if (msg)
                tg_errorf(ctx, TG_ELOAD, "%s: header.options.%s[%d]: %s", t->what, pass ? "exclude" : "include", i,
                          msg);
            tg_free(msg);
            return;
        }
}

/* --reoptimize: compile the saved original graph again. */
static int reoptimize(tg_tgf *t, json_object *jfns, const tg_compile_options *opts,
                      tg_ctx *ctx) {
    bool absent;
    tg_graph *g = original_graph(t, false, &absent, ctx);
    if (!g)
        return absent ? tg_errorf(ctx, TG_ENOTFOUND,
                                  "%s: keeps no original graph, so it cannot be optimized again",
                                  t->what)
                      : tg_ctx_status(ctx) ? tg_ctx_status(ctx) : TG_ELOAD;
    int r = TG_OK;
    /* Without options of the caller's, the file's own: reoptimizing then
     * redoes what the writer did, with this build's optimizer. */
    tg_compile_options saved = {0};
    const char **inc = NULL, **exc = NULL;
    if (!opts) {
        json_object *jo2 = get(t->root, "options", json_type_object), *jg = NULL, *jp = NULL;
        saved.preset = json_object_get_string(get(jo2, "preset", json_type_string));
        /* The file's, not the caller's -O: its error names the file. */
        if (json_object_object_get_ex(jo2, "preset", &jp) &&
            (!saved.preset || (strcmp(saved.preset, "none") && strcmp(saved.preset, "fast_compile") &&
                               strcmp(saved.preset, "fast_run")))) {
            tg_graph_free(g);
            return tg_errorf(ctx, TG_ELOAD,
                             "%s: header.options.preset: %s%.40s%s (expected none, fast_compile or fast_run)",
                             t->what, saved.preset ? "unknown preset '" : "not a string",
                             saved.preset ? saved.preset : "", saved.preset ? "'" : "");
        }
        /* (out of memory for the lists compiled without the file's
         * include and exclude, as though it had none) */
        int ri = string_list(get(jo2, "include", json_type_array), &inc, &(int){0});
        int re = string_list(get(jo2, "exclude", json_type_array), &exc, &(int){0});
        if (ri == TG_ENOMEM || re == TG_ENOMEM) {
            tg_free(inc);
            tg_free(exc);
            tg_graph_free(g);
            return tg_errorf(ctx, TG_ENOMEM, "out of memory");
        }
        saved.include = inc;
        saved.exclude = exc;
        saved.no_gc = (jg = get(jo2, "no_gc", json_type_boolean)) && json_object_get_boolean(jg);
        opts = &saved;
    }
    for (int i = 0; !r && i < t->nfns; i++) {
        json_object *jf = json_object_array_get_idx(jfns, (size_t)i);
        const char *name = json_object_get_string(get(jf, "name", json_type_string));
        const char *dev = json_object_get_string(get(jf, "device", json_type_string));
        /* With the file's options, a function placed on cuda is placed
         * there again (unless TG_DEVICE=cpu says otherwise). */
        tg_compile_options o = *opts;
        if (opts == &saved && dev && !strcmp(dev, "cuda") && !device_forced_cpu()) o.device = "cuda";
        int fi = tg_graph_function_find(g, name ? name : "", ctx);
        if (fi < 0 || !(t->fns[i] = tg_function_compile(g, fi, &o, ctx))) r = TG_ELOAD;
        if (r && fi >= 0 && opts == &saved) saved_tag_error(t, inc, exc, ctx);
    }
    tg_free(inc);
    tg_free(exc);
    tg_graph_free(g);
    return r;
}

/* The next word of an OpenBLAS configuration string ("OpenBLAS 0.3.21
 * NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Haswell MAX_THREADS=64")
 * at *p, past spaces and USE_OPENMP, and its length; 0 at the end. */
static size_t blas_word(const char **p) {
    for (;;) {
        while (**p == ' ') (*p)++;
        size_t n = strcspn(*p, " ");
        if (n != 10 || strncmp(*p, "USE_OPENMP", 10)) return n;
        *p += n;
    }
}

/* Whether a file built with BLAS a runs with this build's b as it was
 * built: the same words, whether or not either says USE_OPENMP (the
 * pthreads and OpenMP builds of one OpenBLAS have the same kernels and
 * differ only in whose threads run them; the build links the OpenMP one
 * where it is installed, CMakeLists.txt). */
static bool blas_same(const char *a, const char *b) {
    for (;;) {
        size_t m = blas_word(&a), n = blas_word(&b);
        if (m != n || strncmp(a, b, m)) return false;
        if (!m) return true;
        a += m;
        b += n;
    }
}

static void fingerprint_check(tg_tgf *t) {
    json_object *fp = get(t->root, "fingerprint", json_type_object);
    const char *ver = json_object_get_string(get(fp, "tg_version", json_type_string));
    const char *blas = json_object_get_string(get(fp, "blas", json_type_string));
    json_object *be = get(fp, "backends", json_type_array);
    tg_str w = {0};
    if (ver && strcmp(ver, tg_version())) tg_str_addf(&w, "; built by tg %.40s (this is %s)", ver, tg_version());
    if (blas && !blas_same(blas, blas_name()))
        tg_str_addf(&w, "; built with BLAS '%.80s' (this build has '%s')", blas, blas_name());
    for (size_t i = 0; be && i < json_object_array_length(be); i++) {
        const char *b = json_object_get_string(json_object_array_get_idx(be, i));
        /* A function placed on cuda goes back there when the device is
         * here (restore_section says so per function when it cannot). */
        const char *why = NULL;
        if (b && !strcmp(b, "cuda") && tg_backend_cuda()) {
            if (!t->cuda_said && !tg_backend_cuda()->available(&why)) {
                tg_str_addf(&w, "; used backend 'cuda', which is not usable here (%.120s)",
                            why ? why : "no CUDA device");
                t->cuda_said = true;
            }
        } else if (b && strcmp(b, "cpu")) {
            tg_str_addf(&w, "; used backend '%.40s', which this build lacks", b);
            if (!strcmp(b, "cuda")) t->cuda_said = true;
        }
    }
    if (w.len) {
        tg_str msg = {0};
        tg_str_addf(&msg, "%s: loaded anyway, running on the CPU kernels%s", t->what, w.s);
        t->warning = msg.s;
    }
    tg_str_free(&w);
}

/* The header of a version 2 to 4 file against tgf-header.schema.json:
 * each object has only the keys the schema lists (a later version that
 * adds one raises the format version, which this reader refuses), the
 * required ones among them, each of its type. What the values mean (an
 * index in the array table, a known preset) is checked where they are
 * used, and a placed function's entries (device, device_nodes, resident)
 * with its schedule, whose messages name the entry at fault. Version 1
 * headers, which the schema does not describe, are read as before. */
enum hk_kind { HK_STR, HK_INT, HK_NUM, HK_BOOL, HK_OBJ, HK_ARR, HK_STRS, HK_ANY };
typedef struct hkey {
    const char *name;
    enum hk_kind kind;
    bool required;
} hkey;

static bool hk_ok(json_object *v, enum hk_kind kind) {
    int64_t i;
    switch (kind) {
    case HK_STR: return json_object_is_type(v, json_type_string);
    case HK_INT: return tg_json_get_int(v, &i) && i >= 0;
    case HK_NUM: return json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int);
    case HK_BOOL: return json_object_is_type(v, json_type_boolean);
    case HK_OBJ: return json_object_is_type(v, json_type_object);
    case HK_ARR: return json_object_is_type(v, json_type_array);
    case HK_ANY: return true;
    case HK_STRS:
        if (!json_object_is_type(v, json_type_array)) return false;
        for (size_t k = 0; k < json_object_array_length(v); k++)
            if (!hk_ok(json_object_array_get_idx(v, k), HK_STR)) return false;
        return true;
    }
    return false;
}

static int header_keys(reader *R, json_object *o, const char *where, const hkey *keys, size_t nkeys) {
    static const char *const what[] = {"a string", "a non-negative integer", "a number", "true or false",
                                       "an object", "an array", "an array of strings", "a value"};
    if (!json_object_is_type(o, json_type_object)) return bad(R, TG_EPARSE, "%s: expected an object", where);
    json_object_object_foreach(o, key, val) {
        size_t k = 0;
        while (k < nkeys && strcmp(keys[k].name, key)) k++;
        if (k == nkeys)
            return bad(R, TG_EPARSE, "%s: unknown key '%.60s' (tgf-header.schema.json lists those of format "
                       "version %d)", where, key, TG_TGF_VERSION);
        if (!hk_ok(val, keys[k].kind))
            return bad(R, TG_EPARSE, "%s.%s: expected %s", where, key, what[keys[k].kind]);
    }
    for (size_t k = 0; k < nkeys; k++)
        if (keys[k].required && !json_object_object_get_ex(o, keys[k].name, NULL))
            return bad(R, TG_EPARSE, "%s.%s: missing (%s)", where, keys[k].name, what[keys[k].kind]);
    return TG_OK;
}

static int check_header(reader *R, json_object *root) {
    static const hkey top[] = {{"format", HK_STR, true},       {"version", HK_INT, true},
                               {"fingerprint", HK_OBJ, true},  {"options", HK_OBJ, true},
                               {"functions", HK_ARR, true},    {"array_table", HK_OBJ, true},
                               {"original", HK_INT, false}};
    static const hkey fp[] = {{"tg_version", HK_STR, true}, {"format_version", HK_INT, true},
                              {"backends", HK_STRS, true},  {"blas", HK_STR, true},
                              {"byte_order", HK_STR, true}};
    static const hkey opt[] = {{"preset", HK_STR, true},
                               {"include", HK_STRS, true},
                               {"exclude", HK_STRS, true},
                               {"no_gc", HK_BOOL, true}};
    static const hkey tab[] = {{"offset", HK_INT, true}, {"count", HK_INT, true}, {"crc32c", HK_INT, true}};
    static const hkey fn[] = {{"name", HK_STR, true},
                              {"graph_section", HK_INT, true},
                              {"nodes", HK_INT, true},
                              {"compile_seconds", HK_NUM, false},
                              {"optimize_seconds", HK_NUM, false},
                              {"no_gc", HK_BOOL, false},
                              /* (checked with the schedule, placement_read) */
                              {"device", HK_ANY, false},
                              {"device_nodes", HK_ANY, false},
                              {"resident", HK_ANY, false}};
    int rc = header_keys(R, root, "header", top, TG_ARRAY_LEN(top));
    if (rc) return rc;
    if ((rc = header_keys(R, get(root, "fingerprint", json_type_object), "header.fingerprint", fp,
                          TG_ARRAY_LEN(fp))) ||
        (rc = header_keys(R, get(root, "options", json_type_object), "header.options", opt,
                          TG_ARRAY_LEN(opt))) ||
        (rc = header_keys(R, get(root, "array_table", json_type_object), "header.array_table", tab,
                          TG_ARRAY_LEN(tab))))
        return rc;
    if (!json_object_array_length(get(get(root, "fingerprint", json_type_object), "backends", json_type_array)))
        return bad(R, TG_EPARSE, "header.fingerprint.backends: expected at least one backend");
    json_object *jfns = get(root, "functions", json_type_array);
    for (size_t i = 0; i < json_object_array_length(jfns); i++) {
        char where[64];
        snprintf(where, sizeof where, "header.functions[%zu]", i);
        if ((rc = header_keys(R, json_object_array_get_idx(jfns, i), where, fn, TG_ARRAY_LEN(fn)))) return rc;
    }
    return TG_OK;
}

static tg_tgf *load_mem(reader *R, const tg_tgf_load_options *opts, bool copy) {
    tg_tgf *t = R->t;
    tg_ctx *ctx = R->ctx;
    if (read_preamble(R)) goto fail;
    json_object *root = t->root, *jv = NULL;
    const char *fmt = json_object_get_string(get(root, "format", json_type_string));
    int64_t ver;
    if (!fmt || strcmp(fmt, "tg-compiled")) {
        bad(R, TG_EPARSE, "header.format: expected \"tg-compiled\"");
        goto fail;
    }
    if (!json_object_object_get_ex(root, "version", &jv) || !tg_json_get_int(jv, &ver) || ver < 1) {
        bad(R, TG_EPARSE, "header.version: expected a positive integer");
        goto fail;
    }
    if (ver > TG_TGF_VERSION) {
        bad(R, TG_EVERSION, "format version %lld is newer than this tg (%s) reads (%d)",
            (long long)ver, tg_version(), TG_TGF_VERSION);
        goto fail;
    }
    /* The version says how the rest is laid out: the two must agree. */
    if (ver != R->version) {
        bad(R, TG_EPARSE, "header.version: %lld, but the preamble says format version %u", (long long)ver,
            R->version);
        goto fail;
    }
    t->version = (int)ver;
    json_object *jarr = get(root, "arrays", json_type_array),
                *jtab = get(root, "array_table", json_type_object),
                *jfns = get(root, "functions", json_type_array);
    if ((!jarr && !jtab) || !jfns || !json_object_array_length(jfns)) {
        bad(R, TG_EPARSE, "header: expected an array table and a non-empty list of functions");
        goto fail;
    }
    /* Version 1 keeps the array table in the header, later versions in
     * the data section (schemas/tgf.md). */
    if (ver == 1 ? jtab != NULL : jarr != NULL) {
        bad(R, TG_EPARSE, "header.%s: not in a format version %lld file (its array table is %s)",
            ver == 1 ? "array_table" : "arrays", (long long)ver,
            ver == 1 ? "header.arrays" : "header.array_table, in the data section");
        goto fail;
    }
    /* The arrays are read as little-endian (all this build reads); a
     * file that says otherwise cannot be read, and one with no
     * fingerprint is not one tg wrote (the schema requires it). */
    json_object *jfp = get(root, "fingerprint", json_type_object);
    const char *order = json_object_get_string(get(jfp, "byte_order", json_type_string));
    if (!jfp) {
        bad(R, TG_EPARSE, "header.fingerprint: expected an object (the build that wrote the file)");
        goto fail;
    }
    if (!order) {
        bad(R, TG_EPARSE, "header.fingerprint.byte_order: expected \"little\"");
        goto fail;
    }
    if (strcmp(order, "little")) {
        bad(R, TG_EPARSE, "header.fingerprint.byte_order: '%.40s': this tg reads little-endian files only",
            order);
        goto fail;
    }
    if (ver >= 2 && check_header(R, root)) goto fail;
    size_t na = jarr ? json_object_array_length(jarr) : 0, nf = json_object_array_length(jfns);
    if (na > (size_t)INT32_MAX / 2 || nf > (size_t)INT32_MAX / 2) {
        bad(R, TG_EPARSE, "header: too many arrays or functions");
        goto fail;
    }
    t->fns = tg_calloc(nf + 1, sizeof *t->fns);
    if (!t->fns) {
        bad(R, TG_ENOMEM, "out of memory");
        goto fail;
    }
    t->nfns = (int)nf;
    if (jtab) {
        if (read_array_table(R, jtab, copy)) goto fail;
    } else {
        if (!(t->arrays = tg_calloc(na + 1, sizeof *t->arrays))) {
            bad(R, TG_ENOMEM, "out of memory");
            goto fail;
        }
        t->narrays = (int)na;
        for (size_t k = 0; k < na; k++)
            if (read_array_json(R, json_object_array_get_idx(jarr, k), (int)k, copy)) goto fail;
    }
    fingerprint_check(t);
    if (opts && opts->reoptimize) {
        if (reoptimize(t, jfns, opts->options, ctx)) goto fail;
        t->reoptimized = true;
        /* A checkpoint of these functions records the options that made
         * them (the file's own when the caller gave none). */
        json_object *jo = opts->options ? options_json(opts->options) : NULL;
        if (opts->options && (!jo || json_object_object_add(t->root, "options", jo))) {
            json_object_put(jo);
            tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", t->what);
            goto fail;
        }
    } else {
        for (size_t i = 0; i < nf; i++) {
            t->fns[i] = restore_function(t, json_object_array_get_idx(jfns, i), (int)i, ctx);
            if (!t->fns[i]) goto fail;
        }
    }
    for (int i = 0; i < t->nfns; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(t->fns[i]->name, t->fns[j]->name)) {
                bad(R, TG_ELOAD, "function '%.128s' is saved twice", t->fns[i]->name);
                goto fail;
            }
    return t;
fail:
    tg_tgf_free(t);
    return NULL;
}

static tg_tgf *tgf_new(const char *what, tg_ctx *ctx) {
    tg_tgf *t = tg_calloc(1, sizeof *t);
    if (!t || !(t->what = tg_strdup(what ? what : "(tgf)"))) {
        tg_free(t);
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    return t;
}

tg_tgf *tg_tgf_load_buffer(const void *data, size_t len, const char *what,
                           const tg_tgf_load_options *opts, tg_ctx *ctx) {
    tg_tgf *t = tgf_new(what, ctx);
    if (!t) return NULL;
    reader R = {t, data, data ? len : 0, 0, 0, ctx, 0};
    return load_mem(&R, opts, true);
}

tg_tgf *tg_tgf_load(const char *path, const tg_tgf_load_options *opts, tg_ctx *ctx) {
    if (!path) {
        tg_errorf(ctx, TG_EINVAL, "tg_tgf_load: no path");
        return NULL;
    }
    tg_tgf *t = tgf_new(path, ctx);
    int fd = -1;
    if (!t) return NULL;
    if (opts && opts->no_mmap) {
        /* Read into one aligned block that the arrays then live in, as
         * they would in the mapping: no second copy of the weights. */
        size_t len;
        char *text = tg_file_read_aligned(path, &len, ctx);
        if (!text) goto fail;
        if (!(t->map = tg_malloc(sizeof *t->map))) {
            tg_free_aligned(text);
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
        atomic_init(&t->map->refs, 1);
        t->map->base = text;
        t->map->len = len;
        t->map->heap = true;
        reader R = {t, (const unsigned char *)text, len, 0, 0, ctx, 0};
        return load_mem(&R, opts, false);
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        tg_errorf(ctx, TG_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        tg_errorf(ctx, TG_EIO, "%s: not a regular file", path);
        goto fail;
    }
    reader R = {t, NULL, (size_t)st.st_size, 0, 0, ctx, 0};
    if (R.len < TG_TGF_PREAMBLE) {
        static const unsigned char none[1];
        R.data = none;
        close(fd);
        return load_mem(&R, opts, true);
    }
    /* Private and writable: pages are copied only if something writes. */
    void *base = mmap(NULL, R.len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
        tg_errorf(ctx, TG_EIO, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    close(fd);
    fd = -1;
    if (!(t->map = tg_malloc(sizeof *t->map))) {
        munmap(base, R.len);
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    atomic_init(&t->map->refs, 1);
    t->map->base = base;
    t->map->len = R.len;
    t->map->heap = false;
    /* Every byte is read now (each array's checksum): map the pages in
     * one call rather than fault them in 64 KiB at a time. A read
     * population shares the page cache's pages (a write would copy them,
     * as it does later). Kernels before 5.14 refuse the advice: then the
     * pages come in on first touch, as they would anyway. */
    if (madvise(base, R.len, MADV_POPULATE_READ) != 0) madvise(base, R.len, MADV_WILLNEED);
    R.data = base;
    return load_mem(&R, opts, false);
fail:
    if (fd >= 0) close(fd);
    tg_tgf_free(t);
    return NULL;
}

void tg_tgf_free(tg_tgf *t) {
    if (!t) return;
    for (int i = 0; i < t->nfns; i++) tg_function_free(t->fns[i]);
    tg_idmap_free(t->shared_ids);
    for (int i = 0; i < t->nshared; i++) tg_shared_unref(t->shared[i]);
    for (int i = 0; i < t->narrays; i++) tg_array_free(t->arrays[i]);
    tg_free(t->fns);
    tg_free(t->shared);
    tg_free(t->shared_from);
    tg_free(t->arrays);
    if (t->root) json_object_put(t->root);
    mapping_unref(t->map);
    tg_free(t->warning);
    tg_free(t->what);
    tg_free(t);
}

const char *tg_tgf_warning(const tg_tgf *t) { return t ? t->warning : NULL; }
int tg_tgf_function_count(const tg_tgf *t) { return t ? t->nfns : 0; }
tg_function *tg_tgf_function(tg_tgf *t, int i) {
    return t && i >= 0 && i < t->nfns ? t->fns[i] : NULL;
}
tg_function *tg_tgf_function_take(tg_tgf *t, int i) {
    tg_function *f = tg_tgf_function(t, i);
    if (f) t->fns[i] = NULL;
    return f;
}

int tg_tgf_function_find(const tg_tgf *t, const char *name, tg_ctx *ctx) {
    int only = -1, count = 0;
    for (int i = 0; i < t->nfns; i++) {
        if (!t->fns[i]) continue;
        count++;
        only = i;
        if (name ? !strcmp(t->fns[i]->name, name) : !strcmp(t->fns[i]->name, "main")) return i;
    }
    if (!name && count == 1) return only;
    tg_str list = {0};
    for (int i = 0, k = 0; i < t->nfns; i++)
        if (t->fns[i]) tg_str_addf(&list, "%s'%s'", k++ ? ", " : "", t->fns[i]->name);
    if (name)
        tg_errorf(ctx, TG_ENOTFOUND, "no function '%s' in %s (it has %s)", name, t->what,
                  list.s ? list.s : "none");
    else
        tg_errorf(ctx, TG_ENOTFOUND, "%s has %d functions and none is 'main': pick one of %s",
                  t->what, count, list.s ? list.s : "none");
    tg_str_free(&list);
    return TG_ENOTFOUND;
}

tg_graph *tg_tgf_original(tg_tgf *t, tg_ctx *ctx) {
    if (!t) {
        tg_errorf(ctx, TG_EINVAL, "tg_tgf_original: no file");
        return NULL;
    }
    bool absent;
    tg_graph *g = original_graph(t, true, &absent, ctx);
    if (!g && absent) tg_errorf(ctx, TG_ENOTFOUND, "%s: keeps no original graph", t->what);
    return g;
}

/* ---- save_state: the original graph copied as text ---- */

bool tg_tgf_reparse_original;
unsigned long tg_tgf_original_copies;

/* How save_functions writes a reference to an array of the table. */
static const char REF[] = "{\"tgf_array\":";
enum { REF_LEN = sizeof REF - 1 };

/* The array index of the reference at r (a REF whose digits end in '}'
 * within end), with *next after it; -1 when it is not one. */
static int64_t ref_at(const char *r, const char *end, const char **next) {
    const char *q = r + REF_LEN;
    int64_t k = 0;
    int nd = 0;
    while (q < end && *q >= '0' && *q <= '9' && nd < 10) {
        k = k * 10 + (*q++ - '0');
        nd++;
    }
    if (!nd || q >= end || *q != '}') return -1;
    *next = q + 1;
    return k;
}

/* Where the references of an original text written by save_functions
 * lie: its "variables" array, the only place the loader reads them (as a
 * constant's or shared variable's value), which the text begins with
 * after the format, the version and the graph's name. The same literal
 * elsewhere (in meta, kept as is) is not one. *vend is the end of the
 * array; false when the text does not begin as tg writes it. */
static bool original_vars(const char *txt, const char *end, const char **vbegin, const char **vend) {
    static const char HEAD[] = "{\"format\":\"tg-graph\",\"version\":1,", NAME[] = "\"name\":\"",
                      VARS[] = "\"variables\":[", VEND[] = "],\"nodes\":[";
    const char *p = txt;
    if ((size_t)(end - p) < sizeof HEAD - 1 || memcmp(p, HEAD, sizeof HEAD - 1)) return false;
    p += sizeof HEAD - 1;
    if ((size_t)(end - p) >= sizeof NAME - 1 && !memcmp(p, NAME, sizeof NAME - 1)) {
        /* the name: a string, its quotes escaped, then a comma */
        for (p += sizeof NAME - 1; p < end && *p != '"'; p++)
            if (*p == '\\') p++;
        if (end - p < 2 || p[1] != ',') return false;
        p += 2;
    }
    if ((size_t)(end - p) < sizeof VARS - 1 || memcmp(p, VARS, sizeof VARS - 1)) return false;
    /* (no string of the array holds an unescaped quote, so its end is
     * the first such text) */
    const char *e = memmem(p, (size_t)(end - p), VEND, sizeof VEND - 1);
    if (!e) return false;
    *vbegin = p + sizeof VARS - 1;
    *vend = e;
    return true;
}

/* Whether t's original graph can be copied as text (original_copy): it
 * is braced and begins as tg writes it, every shared value was restored
 * from an array of the file, and each mention of tgf_array in the text is
 * a reference as save_functions writes them, in its variables, to an
 * array of the file. Otherwise (a version-1 file, a text written some
 * other way, a meta holding {"tgf_array": k}) it is loaded and written
 * again. */
static bool original_copyable(const tg_tgf *t) {
    int64_t k = original_index(t);
    if (k < 0) return false;
    for (int i = 0; i < t->nshared; i++)
        if (!t->shared_from || !t->shared_from[i]) return false;
    const char *txt = tg_array_data(t->arrays[k]), *end = txt + t->arrays[k]->shape[0], *p, *vb, *ve;
    /* (what is not an object gets the loader's error) */
    if (end - txt < 2 || txt[0] != '{' || end[-1] != '}' || !original_vars(txt, end, &vb, &ve)) return false;
    size_t mentions = 0, refs = 0;
    for (p = txt; (p = memmem(p, (size_t)(end - p), "tgf_array", 9)); p += 9) mentions++;
    for (p = vb; (p = memmem(p, (size_t)(ve - p), REF, REF_LEN));) {
        int64_t a = ref_at(p, ve, &p);
        if (a < 0 || a >= t->narrays) return false;
        refs++;
    }
    return refs == mentions;
}

/* t's original graph as text for a new file of table T: each reference
 * moved to T, a shared value's to the value now. This is what loading it
 * with the current shared values and writing it again gives (the same
 * text, the arrays added to T in the same order), without doing either:
 * for a 10,000-node graph that was most of a checkpoint's time. NULL
 * with an error in ctx. */
static tg_array *original_copy(const tg_tgf *t, table *T, tg_ctx *ctx) {
    int64_t k = original_index(t);
    const char *txt = tg_array_data(t->arrays[k]), *end = txt + t->arrays[k]->shape[0], *p = txt, *r, *vb,
               *ve;
    original_vars(txt, end, &vb, &ve); /* (checked by original_copyable) */
    struct tg_idmap *from = tg_idmap_new(); /* "%p" of the array -> shared index + 1 */
    char(*keys)[24] = tg_calloc((size_t)t->nshared + 1, sizeof *keys);
    tg_str out = {0};
    tg_array *res = NULL;
    bool ok = from && keys;
    for (int i = 0; ok && i < t->nshared; i++) {
        snprintf(keys[i], sizeof keys[i], "%p", (const void *)t->shared_from[i]);
        ok = tg_idmap_put(from, keys[i], (void *)(intptr_t)(i + 1)) == TG_OK;
    }
    while (ok && (r = memmem(p, (size_t)(ve - p), REF, REF_LEN))) {
        const char *next = NULL;
        const tg_array *a = t->arrays[ref_at(r, ve, &next)]; /* (checked by original_copyable) */
        char key[24];
        snprintf(key, sizeof key, "%p", (const void *)a);
        intptr_t i = (intptr_t)tg_idmap_get(from, key);
        int nk;
        if (i) {
            tg_shared *s = t->shared[i - 1];
            const tg_array *cur = tg_shared_value(s, ctx);
            if (!cur && s->dev) goto done; /* could not bring it back (ctx says why) */
            nk = table_add_shared(T, s->id, cur ? cur : a);
        } else {
            nk = table_add(T, NULL, a);
        }
        tg_str_add(&out, p, (size_t)(r - p));
        tg_str_addf(&out, "%s%d}", REF, nk);
        ok = nk >= 0 && !out.oom;
        p = next;
    }
    tg_str_add(&out, p, (size_t)(end - p));
    int64_t len = (int64_t)out.len;
    if (ok && !out.oom && out.len && (res = tg_array_new(TG_UINT8, 1, &len))) {
        memcpy(tg_array_data(res), out.s, out.len);
        __atomic_fetch_add(&tg_tgf_original_copies, 1, __ATOMIC_RELAXED); /* (any thread) */
    } else {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
done:
    tg_str_free(&out);
    tg_free(keys);
    if (from) tg_idmap_free(from);
    return res;
}

int tg_tgf_save_state(tg_tgf *t, const char *path, tg_ctx *ctx) {
    if (!t || !path) return tg_errorf(ctx, TG_EINVAL, "tg_tgf_save_state: no file or path");
    tg_function **fs = tg_calloc((size_t)t->nfns + 1, sizeof *fs);
    if (!fs) return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    int n = 0, rc;
    for (int i = 0; i < t->nfns; i++)
        if (t->fns[i]) fs[n++] = t->fns[i];
    /* The original graph goes along, with the current shared values:
     * its text copied, or, where that cannot be done, loaded and written
     * again. */
    bool absent = false, copy = !tg_tgf_reparse_original && original_copyable(t);
    tg_graph *src = copy ? NULL : original_graph(t, true, &absent, ctx);
    if (!copy && !src && !absent) {
        tg_free(fs);
        return tg_ctx_status(ctx);
    }
    json_object *opts = NULL, *jopt = get(t->root, "options", json_type_object);
    if (jopt && json_object_deep_copy(jopt, &opts, NULL) != 0) opts = NULL;
    if (!opts) opts = options_json(NULL);
    rc = n ? save_functions(path, fs, n, src, copy ? t : NULL, t->reoptimized ? NULL : t->root, opts,
                            ctx)
           : (json_object_put(opts), tg_errorf(ctx, TG_EINVAL, "%s: no function left to save", t->what));
    tg_graph_free(src);
    tg_free(fs);
    return rc;
}

char *tg_tgf_export(const tg_tgf *t, int i, tg_ctx *ctx) {
    if (!t || i < 0 || i >= t->nfns || !t->fns[i]) {
        tg_errorf(ctx, TG_EINVAL, "tg_tgf_export: no function %d", i);
        return NULL;
    }
    fview fv;
    const tg_function *f = t->fns[i];
    if (fview_check(f, ctx) || fetch_shared(f, ctx)) return NULL;
    if (fview_init(&fv, f)) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    /* An output a rewrite replaced by a variable of another id is written
     * as identity(new) -> declared id, so that the exported function's
     * outputs keep the names the file gave them (when no variable of the
     * graph holds that id already). An output listed twice gets one
     * identity, named by both listings. */
    const tg_fgraph *fg = f->fg;
    int nx = 0;
    tg_node **xn = tg_calloc((size_t)fg->nout + 1, sizeof *xn);
    tg_var **outs = tg_calloc((size_t)fg->nout + 1, sizeof *outs);
    tg_var **vars = tg_calloc((size_t)(fv.g.nvars + fg->nout) + 1, sizeof *vars);
    tg_node **nodes = tg_calloc((size_t)(fg->nnodes + fg->nout) + 1, sizeof *nodes);
    const tg_op *idop = tg_op_find("identity");
    char *s = NULL;
    if (!xn || !outs || !vars || !nodes || !idop) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto done;
    }
    /* (a function of no node, or no output, has NULL arrays) */
    if (fv.g.nvars) memcpy(vars, fv.g.vars, sizeof *vars * (size_t)fv.g.nvars);
    if (fg->nnodes) memcpy(nodes, fg->nodes, sizeof *nodes * (size_t)fg->nnodes);
    if (fg->nout) memcpy(outs, fg->outputs, sizeof *outs * (size_t)fg->nout);
    int nv = fv.g.nvars, nn = fg->nnodes;
    for (int k = 0; k < fg->nout; k++) {
        const char *want = f->out_ids[k];
        if (!strcmp(want, fg->outputs[k]->id)) continue;
        tg_var *same = NULL; /* the identity an earlier listing added */
        for (int j = 0; j < nx && !same; j++)
            if (!strcmp(xn[j]->outputs[0]->id, want) && xn[j]->inputs[0] == fg->outputs[k])
                same = xn[j]->outputs[0];
        if (same) {
            outs[k] = same;
            continue;
        }
        bool taken = false;
        for (int j = 0; j < nv && !taken; j++) taken = !strcmp(vars[j]->id, want);
        if (taken) continue;
        tg_node *n = tg_node_new(idop, 1, 1);
        tg_var *v = n ? tg_var_new(want, TG_VAR_RESULT) : NULL;
        if (!v) {
            tg_node_free(n);
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto done;
        }
        v->type = fg->outputs[k]->type;
        v->owner = n;
        n->inputs[0] = fg->outputs[k];
        n->outputs[0] = v;
        xn[nx++] = n;
        nodes[nn++] = n;
        vars[nv++] = v;
        outs[k] = v;
    }
    fv.g.vars = vars;
    fv.g.nvars = nv;
    fv.g.nodes = nodes;
    fv.g.nnodes = nn;
    fv.fd.outputs = outs;
    s = tg_graph_to_string(&fv.g, ctx);
done:
    for (int k = 0; k < nx; k++) {
        tg_var *v = xn[k]->outputs[0];
        xn[k]->inputs[0] = NULL;
        xn[k]->outputs[0] = NULL;
        v->owner = NULL;
        tg_var_free(v);
        tg_node_free(xn[k]);
    }
    tg_free(xn);
    tg_free(outs);
    tg_free(vars);
    tg_free(nodes);
    fview_free(&fv);
    return s;
}

/* ---- copy with swapped shared variables, call N times ---- */

typedef struct copy_table {
    const tg_array **arr;
    int n, cap;
    bool oom;
} copy_table;

static json_object *copy_writer(void *ud, const tg_var *v, const tg_array *a) {
    (void)v;
    copy_table *c = ud;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        const tg_array **p = tg_realloc(c->arr, sizeof *p * (size_t)cap);
        if (!p) {
            c->oom = true;
            return NULL;
        }
        c->arr = p;
        c->cap = cap;
    }
    c->arr[c->n] = a;
    return json_object_new_int(c->n++);
}

static tg_array *copy_resolver(void *ud, json_object *ref, const tg_var *v, const char *where,
                               tg_ctx *ctx) {
    (void)v;
    copy_table *c = ud;
    int64_t k;
    if (!tg_json_get_int(ref, &k) || k < 0 || k >= c->n) {
        tg_errorf(ctx, TG_EINVAL, "%s: bad array reference", where);
        return NULL;
    }
    return tg_array_ref((tg_array *)c->arr[k]);
}

/* The copy's graph goes through the same JSON as a saved file (with the
 * values passed by reference, not copied), so that copy and restore share
 * one path; then its shared variables are f's except the swapped ones. */
tg_function *tg_function_copy(const tg_function *f, const char *const *swap_ids,
                              const tg_array *const *swap_values, int nswap, tg_ctx *ctx) {
    copy_table C = {0};
    fview fv;
    tg_graph *g = NULL;
    tg_fgraph *fg = NULL;
    tg_function *c = NULL;
    const char **keys = NULL;
    bool *on_dev = NULL;
    if (!f || (nswap && (!swap_ids || !swap_values))) {
        tg_errorf(ctx, TG_EINVAL, "tg_function_copy: no function or no swap list");
        return NULL;
    }
    if (fview_check(f, ctx) || fetch_shared(f, ctx)) return NULL;
    if (fview_init(&fv, f)) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        return NULL;
    }
    json_object *root = tg_graph_to_json_ext(&fv.g, copy_writer, &C);
    fview_free(&fv);
    if (!root || C.oom) {
        json_object_put(root);
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    /* copy_writer returned bare indices: wrap them as the loader expects. */
    json_object *vars = get(root, "variables", json_type_array);
    for (size_t i = 0; vars && i < json_object_array_length(vars); i++) {
        json_object *e = json_object_array_get_idx(vars, i);
        const char *key = json_object_object_get_ex(e, "shared", NULL) ? "shared" : "constant";
        json_object *idx = NULL;
        if (!json_object_object_get_ex(e, key, &idx) || !json_object_is_type(idx, json_type_int))
            continue;
        json_object *w = json_object_new_object();
        if (!w || json_object_object_add(w, "tgf_array", json_object_get(idx)) ||
            json_object_object_add(e, key, w)) {
            json_object_put(w);
            json_object_put(root);
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
    }
    g = tg_graph_load_json(root, f->name, copy_resolver, &C, ctx);
    json_object_put(root);
    if (!g) goto fail;
    for (int k = 0; k < nswap; k++) {
        if (!swap_ids[k]) {
            tg_errorf(ctx, TG_EINVAL, "tg_function_copy: swap %d has no id", k);
            goto fail;
        }
        for (int j = 0; j < k; j++)
            if (!strcmp(swap_ids[j], swap_ids[k])) {
                tg_errorf(ctx, TG_EINVAL, "tg_function_copy: swap '%s' given twice", swap_ids[k]);
                goto fail;
            }
        tg_var *v = tg_graph_find(g, swap_ids[k]);
        if (!v || v->kind != TG_VAR_SHARED) {
            tg_errorf(ctx, TG_ENOTFOUND, "function '%s' uses no shared variable '%s'", f->name,
                      swap_ids[k]);
            goto fail;
        }
        char what[300];
        snprintf(what, sizeof what, "swap: shared variable '%s'", swap_ids[k]);
        tg_array *fit;
        if (tg_shared_value_take(&v->type, what, swap_values[k], &fit, ctx)) goto fail;
        tg_shared_value_set(v->shared, fit);
    }
    /* Not swapped: f's own state. Swapped: the loader made fresh state;
     * it starts from the given value. */
    for (int i = 0; i < g->nvars; i++) {
        tg_var *v = g->vars[i];
        if (v->kind != TG_VAR_SHARED) continue;
        int k = 0;
        while (k < nswap && strcmp(swap_ids[k], v->id)) k++;
        if (k < nswap) continue; /* (its value set above) */
        for (int j = 0; j < f->fg->nvars; j++) {
            tg_var *o = f->fg->vars[j];
            if (o->kind == TG_VAR_SHARED && o->shared && !strcmp(o->id, v->id)) {
                tg_shared_unref(v->shared);
                v->shared = tg_shared_ref(o->shared);
                break;
            }
        }
    }
    if (!(fg = tg_fgraph_from_decl(g, &g->funcs[0], ctx))) goto fail;
    keys = tg_calloc((size_t)f->nsched + 1, sizeof *keys);
    if (!keys) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    for (int k = 0; k < f->nsched; k++) keys[k] = tg_function_node_key(f, k);
    if (reorder(fg, keys, f->nsched, f->name, ctx)) goto fail;
    for (int k = 0; k < f->nsched; k++) {
        const tg_node *src = f->sched[k].node;
        tg_node *dst = fg->nodes[k];
        /* How errors name it: as f's node is named (the graph above
         * numbered its nodes in f's schedule, not as the file did). */
        dst->json_index = src->json_index;
        int nw = tg_composite_who_count(src);
        const char **parts = nw ? tg_malloc(sizeof *parts * 2 * (size_t)nw) : NULL;
        for (int j = 0; parts && j < nw; j++) tg_composite_who(src, j, &parts[2 * j], &parts[2 * j + 1]);
        int wrc = nw ? (parts ? tg_composite_who_set(dst, parts, nw) : TG_ENOMEM) : TG_OK;
        tg_free(parts);
        if (wrc || tg_node_moved_copy(dst, src)) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
        if (!src->origins && !src->norigins) continue;
        /* (a composite's: the keys of its groups, then the groups) */
        int nf, nk;
        const char *const *ok;
        const int *st = tg_node_origin_keys(src, &ok, &nk, &nf);
        dst->origins = tg_origins_pack(ok, nk);
        if (!dst->origins) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
        dst->norigins = nk;
        if (st && tg_composite_set_origin_groups(dst, st, nf) == TG_ENOMEM) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
    }
    /* A placed function's copy runs where f runs: the same nodes on the
     * device, the same values resident there (node by node, input by
     * input: the schedules match). */
    if (f->on_device && !(on_dev = tg_calloc((size_t)f->nsched + 1, sizeof *on_dev))) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    for (int k = 0; on_dev && k < f->nsched; k++) {
        const tg_node *src = f->sched[k].node;
        on_dev[k] = tg_function_node_on_device(f, k);
        for (int j = 0; j < src->nin; j++)
            if (src->inputs[j]->resident) fg->nodes[k]->inputs[j]->resident = true;
    }
    c = tg_function_link_fgraph(f->name, fg, f->no_gc, on_dev, NULL, 0, ctx);
    fg = NULL;
    if (!c) goto fail;
    /* The record and the optimizer's profile (per pass, per rewrite;
     * tgprof prints it): names point into f's strings, which may not
     * outlive c; copy them into c's pool. Its compile and optimize times
     * are its own, as a restored function's are: it ran no optimizer. */
    const tg_opt_record *fr = &f->record;
    size_t total = 0;
    for (int i = 0; i < fr->n; i++)
        total += strlen(fr->entries[i].name) + strlen(fr->entries[i].pass) + 2;
    for (int i = 0; i < fr->npasses; i++) total += strlen(fr->passes[i].name) + 1;
    for (int i = 0; i < fr->nrstats; i++) total += strlen(fr->rstats[i].name) + strlen(fr->rstats[i].pass) + 2;
    c->strpool = tg_malloc(total + 1);
    if (fr->npasses) c->record.passes = tg_malloc(sizeof *fr->passes * (size_t)fr->npasses);
    if (fr->nrstats) c->record.rstats = tg_malloc(sizeof *fr->rstats * (size_t)fr->nrstats);
    if (!c->strpool || (fr->npasses && !c->record.passes) || (fr->nrstats && !c->record.rstats)) {
        tg_errorf(ctx, TG_ENOMEM, "out of memory");
        goto fail;
    }
    char *p = c->strpool;
    for (int i = 0; i < fr->npasses; i++) {
        c->record.passes[i] = fr->passes[i];
        c->record.passes[i].name = p;
        p = stpcpy(p, fr->passes[i].name) + 1;
    }
    c->record.npasses = c->record.cpasses = fr->npasses;
    for (int i = 0; i < fr->nrstats; i++) {
        c->record.rstats[i] = fr->rstats[i];
        c->record.rstats[i].name = p;
        p = stpcpy(p, fr->rstats[i].name) + 1;
        c->record.rstats[i].pass = p;
        p = stpcpy(p, fr->rstats[i].pass) + 1;
    }
    c->record.nrstats = fr->nrstats;
    for (int i = 0; i < f->record.n; i++) {
        const tg_rw_entry *e = &f->record.entries[i];
        char *pn = p;
        p = stpcpy(p, e->name) + 1;
        char *pp = p;
        p = stpcpy(p, e->pass) + 1;
        if (tg_opt_record_add(&c->record, pn, pp, (const char *const *)e->removed, e->nremoved,
                              (const char *const *)e->created, e->ncreated)) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
    }
    /* and what the gradients' nodes stand for */
    if (f->record.ngrads) {
        const char **gs = tg_malloc(sizeof *gs * 5 * (size_t)f->record.ngrads);
        for (int i = 0; gs && i < f->record.ngrads; i++) {
            const tg_grad_origin *o = &f->record.grads[i];
            const char *five[5] = {o->key, o->of, o->of_op, o->by, o->by_op};
            memcpy(gs + 5 * i, five, sizeof five);
        }
        int grc = gs ? tg_opt_record_grads_set(&c->record, f->record.ngrads, gs) : TG_ENOMEM;
        tg_free(gs);
        if (grc) {
            tg_errorf(ctx, TG_ENOMEM, "out of memory");
            goto fail;
        }
    }
    tg_free(keys);
    tg_free(on_dev);
    tg_free(C.arr);
    tg_graph_free(g);
    return c;
fail:
    tg_free(keys);
    tg_free(on_dev);
    tg_free(C.arr);
    tg_fgraph_free(fg);
    tg_function_free(c);
    tg_graph_free(g);
    return NULL;
}

int tg_function_call_n(tg_function *f, tg_array *const *inputs, tg_array **outputs, long n,
                       tg_ctx *ctx) {
    if (!f || n < 1) return tg_errorf(ctx, TG_EINVAL, "tg_function_call_n: n must be at least 1");
    int nout = tg_function_output_count(f);
    for (long i = 0; i < n; i++) {
        if (i)
            for (int k = 0; k < nout; k++) {
                tg_array_free(outputs[k]);
                outputs[k] = NULL;
            }
        int rc = tg_function_call(f, inputs, outputs, ctx);
        if (rc) return rc;
    }
    return TG_OK;
}
