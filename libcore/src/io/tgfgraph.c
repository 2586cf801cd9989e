/* The binary graph section of a .tgf file (format versions 2 to 4,
 * described in schemas/tgf.md): one function's optimized graph in its
 * schedule, with each node's origins and how errors name it, the declared
 * output ids and the rewrite record.
 *
 * Version 1 kept these as interchange JSON in the header; restoring then
 * parsed, checked and cloned the graph as the loader does a file, which
 * cost most of what compiling cost. Here a restore reads fixed records,
 * builds the function graph directly in its schedule, parses each
 * distinct attrs text once, and runs only what a kernel needs (the op's
 * parse_attrs and infer, which also re-check every type).
 *
 * Every count and index is checked against what is left of the section
 * before it is used, so a damaged or hostile section is one error line,
 * never a read past its end or an allocation of an absurd size.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "io/io.h"
#include "io/tgf.h"
#include "ops/op.h"
#include "rewrite/rewrite.h"
#include "tensor/tensor.h"
#include "vm/vm.h"

/* "TGG" and the format version: version 2 sections end after the
 * passes; version 3 added the origin groups and the gradients' nodes,
 * version 4 how errors name each node (its place in the graph file, the
 * words of a node moved out of a body, a composite's fused nodes). */
#define GRAPH_MAGIC "TGG\x04"
#define NONE 0xffffffffu
/* The bytes a graph section may have copied out of its string table by
 * reference, per byte of the section (at least 4 KiB of it): tg's own
 * files copy at most a few (schemas/tgf.md) */
#define COPY_PER_BYTE 16

/* ---- writing ---- */

typedef struct enc {
    tg_str body;
    char **strs; /* the string table, owned */
    uint32_t nstrs, cstrs;
    struct tg_idmap *index; /* string -> position + 1 (keys borrowed from strs) */
    /* attrs objects written so far -> their string's position (open
     * addressing; cap 0 or a power of two) */
    tg_ptrmap attrs_pos; /* attrs object -> 1 + its text's position */
    bool oom;
} enc;

static void put_bytes(enc *E, const void *p, size_t n) { tg_str_add(&E->body, p, n); }
static void put32(enc *E, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put_bytes(E, b, 4);
}
static void put64(enc *E, uint64_t v) {
    put32(E, (uint32_t)v);
    put32(E, (uint32_t)(v >> 32));
}
static void put8(enc *E, uint8_t v) { put_bytes(E, &v, 1); }

/* The position of s in the string table (added when new); NONE for NULL. */
static uint32_t intern(enc *E, const char *s) {
    if (!s) return NONE;
    void *got = tg_idmap_get(E->index, s);
    if (got) return (uint32_t)(uintptr_t)got - 1;
    if (E->nstrs == E->cstrs) {
        uint32_t c = E->cstrs ? E->cstrs * 2 : 256;
        char **p = tg_realloc(E->strs, sizeof *p * c);
        if (!p) {
            E->oom = true;
            return 0;
        }
        E->strs = p;
        E->cstrs = c;
    }
    char *copy = tg_strdup(s);
    if (!copy || tg_idmap_put(E->index, copy, (void *)(uintptr_t)(E->nstrs + 1))) {
        tg_free(copy);
        E->oom = true;
        return 0;
    }
    E->strs[E->nstrs] = copy;
    return E->nstrs++;
}

/* The position of attrs object o's text in the string table. The text is
 * written from a copy of o: json-c writes an object's text into the
 * object, and the function may be saved in several threads at once (what
 * a save reads of a function must stay read-only). Nodes often share one
 * attrs object (a restored function's nodes with one attrs text, a fusion
 * pass's composites of one structure): it is copied and written once. */
static uint32_t intern_attrs(enc *E, const json_object *o) {
    void *got = tg_ptrmap_get(&E->attrs_pos, o);
    if (got) return (uint32_t)(uintptr_t)got - 1;
    json_object *c = NULL;
    if (json_object_deep_copy((json_object *)o, &c, NULL) != 0) {
        E->oom = true;
        return 0;
    }
    const char *t = json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    uint32_t k = t ? intern(E, t) : 0;
    json_object_put(c);
    if (!t) E->oom = true;
    if (E->oom) return 0;
    /* (out of memory: written again for the next node that has it) */
    (void)tg_ptrmap_put(&E->attrs_pos, o, (void *)(uintptr_t)(k + 1));
    return k;
}

int tgf_graph_encode(const tg_function *f, tgf_array_ref_fn ref, void *ud, tg_str *out) {
    const tg_fgraph *fg = f->fg;
    enc E = {0};
    int rc = TG_ENOMEM;
    int *vix = tg_calloc((size_t)fg->nvars + 1, sizeof *vix);
    E.index = tg_idmap_new();
    if (!vix || !E.index) goto done;
    /* The variables: every one but the outputs of pruned nodes. */
    uint32_t nv = 0;
    for (int i = 0; i < fg->nvars; i++) {
        const tg_var *v = fg->vars[i];
        vix[i] = v->kind == TG_VAR_RESULT && !v->owner ? -1 : (int)nv++;
    }
    put32(&E, nv);
    for (int i = 0; i < fg->nvars; i++) {
        const tg_var *v = fg->vars[i];
        if (vix[i] < 0) continue;
        int k = -1, tk = -1;
        if (v->kind == TG_VAR_CONSTANT && v->value) k = ref(ud, v, v->value);
        if (v->kind == TG_VAR_SHARED && v->shared) k = ref(ud, v, tg_shared_value(v->shared, NULL));
        if (v->test_value) tk = ref(ud, NULL, v->test_value);
        if (((v->kind == TG_VAR_CONSTANT || v->kind == TG_VAR_SHARED) && k < 0) ||
            (v->test_value && tk < 0))
            goto done;
        put32(&E, intern(&E, v->id));
        put32(&E, intern(&E, v->name));
        put8(&E, (uint8_t)v->kind);
        put8(&E, (uint8_t)(v->weak_in_file | v->inline_const << 1 | v->declared << 2 |
                           v->type_given << 3));
        put8(&E, (uint8_t)v->type.dtype);
        put8(&E, (uint8_t)v->type.ndim);
        for (int d = 0; d < v->type.ndim; d++) put64(&E, (uint64_t)v->type.shape[d]);
        put32(&E, k < 0 ? NONE : (uint32_t)k);
        put32(&E, tk < 0 ? NONE : (uint32_t)tk);
    }
    /* The nodes, in the order the VM runs them. */
    put32(&E, (uint32_t)f->nsched);
    for (int s = 0; s < f->nsched; s++) {
        const tg_node *n = f->sched[s].node;
        put32(&E, intern(&E, n->op->name));
        put32(&E, n->attrs ? intern_attrs(&E, n->attrs) : NONE);
        if (E.oom) goto done;
        put32(&E, intern(&E, n->name));
        put32(&E, n->json_index >= 0 ? (uint32_t)n->json_index : NONE);
        put32(&E, (uint32_t)n->nin);
        for (int k = 0; k < n->nin; k++) put32(&E, (uint32_t)vix[n->inputs[k]->index]);
        put32(&E, (uint32_t)n->nout);
        for (int k = 0; k < n->nout; k++) put32(&E, (uint32_t)vix[n->outputs[k]->index]);
        put8(&E, n->inplace != NULL);
        for (int k = 0; n->inplace && k < n->nout; k++) put8(&E, (uint8_t)n->inplace[k]);
        put32(&E, (uint32_t)n->trace.n);
        for (int k = 0; k < n->trace.n; k++) {
            const tg_frame *fr = &n->trace.frames[k];
            put32(&E, intern(&E, fr->file));
            put64(&E, (uint64_t)fr->line);
            put32(&E, intern(&E, fr->function));
            put32(&E, intern(&E, fr->code));
        }
        /* a composite's origins by fused node (tgdebug nanguard names
         * the ones of the body op that went bad): the keys its groups
         * index, which may repeat one (the reader keeps it once) */
        int nf, nk;
        const char *const *ok;
        const int *st = tg_node_origin_keys(n, &ok, &nk, &nf);
        put32(&E, n->origins ? (uint32_t)nk : NONE);
        for (int k = 0; n->origins && k < nk; k++) put32(&E, intern(&E, ok[k]));
        if (n->origins) {
            put32(&E, st ? (uint32_t)nf : 0);
            for (int k = 1; st && k <= nf; k++) put32(&E, (uint32_t)st[k]);
        }
        /* how run-time errors name the node where its description does
         * not: the words of a node moved out of a body, and a composite's
         * names of its fused nodes (tg_node_error_parts of each) */
        put32(&E, intern(&E, n->moved));
        if (n->moved) put32(&E, intern(&E, tg_node_moved_traces(n)));
        int nw = tg_composite_who_count(n);
        put32(&E, (uint32_t)nw);
        for (int j = 0; j < nw; j++) {
            const char *d, *t;
            tg_composite_who(n, j, &d, &t);
            put32(&E, intern(&E, d));
            put32(&E, intern(&E, t));
        }
    }
    /* The function: inputs, outputs with their declared ids, updates. */
    put32(&E, (uint32_t)fg->nin);
    for (int i = 0; i < fg->nin; i++) put32(&E, (uint32_t)vix[fg->inputs[i]->index]);
    put32(&E, (uint32_t)fg->nout);
    for (int i = 0; i < fg->nout; i++) {
        put32(&E, (uint32_t)vix[fg->outputs[i]->index]);
        put32(&E, intern(&E, tg_function_output_id(f, i)));
    }
    put32(&E, (uint32_t)fg->nupd);
    for (int i = 0; i < fg->nupd; i++) {
        put32(&E, (uint32_t)vix[fg->upd_shared[i]->index]);
        put32(&E, (uint32_t)vix[fg->outputs[fg->nout + i]->index]);
    }
    /* The rewrite record and the optimizer's profile. */
    put32(&E, (uint32_t)f->record.n);
    for (int i = 0; i < f->record.n; i++) {
        const tg_rw_entry *e = &f->record.entries[i];
        put32(&E, intern(&E, e->name));
        put32(&E, intern(&E, e->pass));
        put32(&E, (uint32_t)e->nremoved);
        for (int k = 0; k < e->nremoved; k++) put32(&E, intern(&E, e->removed[k]));
        put32(&E, (uint32_t)e->ncreated);
        for (int k = 0; k < e->ncreated; k++) put32(&E, intern(&E, e->created[k]));
    }
    put32(&E, (uint32_t)f->record.npasses);
    for (int i = 0; i < f->record.npasses; i++) {
        const tg_pass_stats *p = &f->record.passes[i];
        double sec = p->seconds;
        uint64_t bits;
        memcpy(&bits, &sec, 8);
        put32(&E, intern(&E, p->name));
        put64(&E, bits);
        put32(&E, (uint32_t)p->nodes_before);
        put32(&E, (uint32_t)p->nodes_after);
        put32(&E, (uint32_t)p->applied);
    }
    /* The nodes gradients' expansions made, by key: what the keys above
     * that name no node of the file stand for. */
    put32(&E, (uint32_t)f->record.ngrads);
    for (int i = 0; i < f->record.ngrads; i++) {
        const tg_grad_origin *g = &f->record.grads[i];
        put32(&E, intern(&E, g->key));
        put32(&E, *g->of ? intern(&E, g->of) : NONE);
        put32(&E, *g->of_op ? intern(&E, g->of_op) : NONE);
        put32(&E, intern(&E, g->by));
        put32(&E, intern(&E, g->by_op));
    }
    if (E.oom || E.body.oom) goto done;
    /* The section: magic, the string table, then the records above. */
    tg_str_add(out, GRAPH_MAGIC, 4);
    enc T = {0};
    put32(&T, E.nstrs);
    for (uint32_t i = 0; i < E.nstrs; i++) {
        size_t len = strlen(E.strs[i]);
        put32(&T, (uint32_t)len);
        put_bytes(&T, E.strs[i], len);
    }
    if (T.body.oom) { /* its text may be NULL: nothing to copy from */
        tg_str_free(&T.body);
        goto done;
    }
    tg_str_add(out, T.body.s, T.body.len);
    tg_str_free(&T.body);
    tg_str_add(out, E.body.s, E.body.len);
    rc = out->oom ? TG_ENOMEM : TG_OK;
done:
    tg_free(vix);
    tg_idmap_free(E.index);
    tg_ptrmap_free(&E.attrs_pos);
    for (uint32_t i = 0; i < E.nstrs; i++) tg_free(E.strs[i]);
    tg_free(E.strs);
    tg_str_free(&E.body);
    return rc;
}

/* ---- reading ---- */

typedef struct dec {
    const unsigned char *start, *p, *end;
    const char *what;
    tg_ctx *ctx;
    const char **strs; /* into pool */
    uint32_t nstrs;
    bool *nul; /* per string: it holds a NUL byte (refused where it is read) */
    char *pool;
    /* The frames' strings, each copied once for every trace of the
     * section, never once per frame: frame_str[i] is string i's copy */
    tg_trace_strings *frame_strs;
    char **frame_str;
    /* Bytes copied out of the table per reference (names, keys, texts),
     * and how many may be: a string named many times is copied each
     * time, so without a bound a small section could ask for far more
     * memory than its size */
    size_t copied, budget;
    int rc;
    int version; /* the section's: 2 has no origin groups and no gradients'
                    nodes, 3 no node names for errors (schemas/tgf.md) */
} dec;

static int fail(dec *D, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(dec *D, int status, const char *fmt, ...) {
    if (D->rc) return D->rc;
    char msg[TG_CTX_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    D->rc = tg_errorf(D->ctx, status, "%s: %s", D->what, msg);
    return D->rc;
}

static bool need(dec *D, size_t n) {
    if (D->rc) return false;
    if ((size_t)(D->end - D->p) < n) {
        fail(D, TG_EPARSE, "the graph section is truncated");
        return false;
    }
    return true;
}
static uint32_t get32(dec *D) {
    if (!need(D, 4)) return 0;
    const unsigned char *p = D->p;
    D->p += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(dec *D) {
    uint64_t lo = get32(D);
    return lo | (uint64_t)get32(D) << 32;
}
static uint8_t get8(dec *D) {
    if (!need(D, 1)) return 0;
    return *D->p++;
}
/* A count of items of at least `size` bytes each: never more than the
 * bytes left could hold. */
static uint32_t get_count(dec *D, size_t size, const char *what) {
    uint32_t n = get32(D);
    if (!D->rc && (size_t)n > (size_t)(D->end - D->p) / (size ? size : 1))
        fail(D, TG_EPARSE, "graph section: %u %s do not fit in what is left of it", n, what);
    return D->rc ? 0 : n;
}
/* String i of the table, for the field `what` (errors name it); NULL for
 * NONE when `optional`. */
static const char *str_at(dec *D, uint32_t i, bool optional, const char *what) {
    if (D->rc) return NULL;
    if (i == NONE && optional) return NULL;
    if (i >= D->nstrs) {
        fail(D, TG_EPARSE, "graph section: %s: string %u is not in the table (%u strings)", what,
             i, D->nstrs);
        return NULL;
    }
    if (D->nul[i]) {
        fail(D, TG_ELOAD, "graph section: %s: string %u holds a NUL byte, which tg does not accept "
             "(its strings would end there)", what, i);
        return NULL;
    }
    return D->strs[i];
}
static const char *get_str(dec *D, bool optional, const char *what) {
    uint32_t i = get32(D);
    return str_at(D, i, optional, what);
}
/* "schedule[3].name" (where "schedule[3]", f "name") in buf: copied,
 * not printed (restoring a graph names every node's fields this way, and
 * snprintf was a tenth of the restore). */
static const char *field(char *buf, size_t size, const char *where, const char *f) {
    size_t a = strlen(where), b = strlen(f);
    if (a + b + 2 > size) {
        snprintf(buf, size, "%s.%s", where, f);
        return buf;
    }
    memcpy(buf, where, a);
    buf[a] = '.';
    memcpy(buf + a + 1, f, b + 1);
    return buf;
}
/* "variables[12]" (list "variables", i 12) in buf, of at least 32 bytes
 * more than list's length. */
static const char *indexed(char *buf, const char *list, uint32_t i) {
    size_t a = strlen(list);
    char digits[12];
    int nd = 0;
    do digits[nd++] = (char)('0' + i % 10);
    while ((i /= 10));
    memcpy(buf, list, a);
    buf[a++] = '[';
    while (nd) buf[a++] = digits[--nd];
    buf[a++] = ']';
    buf[a] = 0;
    return buf;
}

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): the strings end up in JSON that other tools read. *nul:
 * whether it holds a NUL byte (in the same pass). */
static bool utf8_ok(const unsigned char *p, size_t n, bool *nul) {
    size_t i = 0;
    *nul = false;
    while (i < n) {
        /* ASCII eight bytes at a time: most strings are ids and the
         * names of nodes (version 4's names of fused nodes make a fused
         * graph's section a third longer); a zero byte among them is
         * one whose bits minus one borrow into its high bit */
        uint64_t w;
        if (n - i >= 8 && (memcpy(&w, p + i, 8), !(w & 0x8080808080808080u))) {
            *nul |= ((w - 0x0101010101010101u) & ~w & 0x8080808080808080u) != 0;
            i += 8;
            continue;
        }
        unsigned c = p[i];
        if (c < 0x80) {
            *nul |= c == 0;
            i++;
            continue;
        }
        int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + (size_t)len > n) return false;
        for (int k = 1; k < len; k++)
            if ((p[i + k] & 0xC0) != 0x80) return false;
        unsigned c1 = p[i + 1];
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
            (c == 0xF4 && c1 > 0x8F))
            return false;
        i += (size_t)len;
    }
    return true;
}

/* Whether the n bytes at p are all ASCII and hold exactly `zeros` NUL
 * bytes, eight at a time: for a byte b, ((b & 0x7f) + 0x7f) | b has its
 * high bit clear only when b is 0; those bits, shifted to the low bit of
 * each byte, are summed into the top byte by a multiplication (a
 * popcount without -mpopcnt is a call into libgcc). */
static bool plain_ascii(const unsigned char *p, size_t n, size_t zeros) {
    const uint64_t hi = 0x8080808080808080u, lo = 0x7f7f7f7f7f7f7f7fu;
    uint64_t any = 0;
    size_t z = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        any |= w;
        z += (size_t)((((~(((w & lo) + lo) | w) & hi) >> 7) * 0x0101010101010101u) >> 56);
    }
    for (; i < n; i++) {
        any |= p[i];
        z += p[i] == 0;
    }
    return !(any & hi) && z == zeros;
}

/* Strings [from, to) of the table, copied: UTF-8, and whether each holds a
 * NUL byte. */
static int check_strings(dec *D, uint32_t from, uint32_t to, const char *end) {
    for (uint32_t i = from; i < to; i++) {
        const char *s = D->strs[i], *e = i + 1 < to ? D->strs[i + 1] - 1 : end - 1;
        bool nul;
        /* A NUL byte is refused where the string is read, naming the
         * field, as the JSON loader names where a \u0000 is. */
        if (!utf8_ok((const unsigned char *)s, (size_t)(e - s), &nul))
            return fail(D, TG_EPARSE, "graph section: string %u is not UTF-8 text", i);
        D->nul[i] = nul;
    }
    return TG_OK;
}

static int read_strings(dec *D) {
    uint32_t n = get_count(D, 4, "strings");
    if (D->rc) return D->rc;
    size_t total = (size_t)(D->end - D->p);
    D->strs = tg_calloc((size_t)n + 1, sizeof *D->strs);
    D->pool = tg_malloc(total + (size_t)n + 1);
    D->nul = tg_calloc((size_t)n + 1, sizeof *D->nul);
    if (!D->strs || !D->pool || !D->nul) return fail(D, TG_ENOMEM, "out of memory");
    char *q = D->pool;
    for (uint32_t i = 0; i < n; i++) {
        size_t left = (size_t)(D->end - D->p);
        const unsigned char *b = D->p;
        uint32_t len = left < 4 ? 0 : (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        if (left < 4 || left - 4 < len) {
            /* cut short: a string before the cut that is not text is
             * named first, as when each was checked as it was read */
            if (check_strings(D, 0, i, q)) return D->rc;
            len = get32(D);
            need(D, len);
            return D->rc;
        }
        D->p += 4;
        memcpy(q, D->p, len);
        q[len] = 0;
        D->strs[i] = q;
        q += len + 1;
        D->p += len;
    }
    D->nstrs = n;
    /* Text in ASCII with no NUL but the ends (ids, names, JSON): the
     * whole table at once; else string by string. */
    if (plain_ascii((const unsigned char *)D->pool, (size_t)(q - D->pool), n)) return TG_OK;
    return check_strings(D, 0, n, q);
}

/* Counts s (NULL: nothing) against the bytes the section may have copied
 * out of its string table; false, with the section's error, past them. */
static bool copy_ok(dec *D, const char *s, const char *where) {
    if (D->rc) return false;
    if (!s) return true;
    D->copied += strlen(s) + 1;
    if (D->copied <= D->budget) return true;
    fail(D, TG_EPARSE, "graph section: %s: names strings so often that reading them would copy more "
         "than %zu bytes out of a section of %zu, which tg never writes", where, D->budget,
         (size_t)(D->end - D->start));
    return false;
}

/* One parsed attrs text per (text, op): nodes with the same canonical
 * attrs share one JSON object, which parse_attrs of the same op leaves as
 * it is. */
typedef struct attrs_cache {
    json_object **obj; /* by string index */
    const tg_op **op;
    /* The first node read with obj[i], whose op data a later one takes
     * (tg_op.share_extra: a composite's parsed body) */
    const tg_node **first;
    json_tokener *tok; /* one for the whole section */
} attrs_cache;

static json_object *attrs_for(dec *D, attrs_cache *C, uint32_t si, const tg_op *op) {
    if (C->obj[si] && C->op[si] == op) return json_object_get(C->obj[si]);
    json_tokener *tok = C->tok;
    if (!tok && !(tok = C->tok = json_tokener_new_ex(TG_JSON_DEPTH))) {
        fail(D, TG_ENOMEM, "out of memory");
        return NULL;
    }
    const char *s = D->strs[si];
    if (!copy_ok(D, s, "attrs")) return NULL;
    tg_json_fail jf;
    json_object *o = tg_json_parse_object(tok, s, strlen(s), TG_JSON_DEPTH, &jf);
    if (!o) {
        if (jf.status == TG_ENOMEM)
            fail(D, TG_ENOMEM, "out of memory");
        else if (jf.why == tg_json_not_object)
            fail(D, TG_EPARSE, "graph section: the attrs of a %s node are not a JSON object",
                 op->name);
        else
            fail(D, TG_EPARSE, "graph section: the attrs of a %s node are not valid JSON: %s",
                 op->name, jf.why);
        return NULL;
    }
    /* json-c took an integer past int64 and uint64 for the nearest bound:
     * quoted as written, as the JSON loader does, not as clamped. (No
     * error status in D: the caller names the node.) */
    int64_t huge = tg_json_find_huge_int(s, strlen(s));
    if (huge >= 0) {
        int n = 0;
        while (n < 40 && s[huge + n] && strchr("-0123456789", s[huge + n])) n++;
        tg_errorf(D->ctx, TG_ELOAD, "attrs: the integer %.*s%s is out of range (int64 and uint64 end at -2^63 "
                  "and 2^64 - 1)", n, s + huge, n == 40 ? "..." : "");
        json_object_put(o);
        return NULL;
    }
    /* A \u0000, which json-c reads into the string and tg's C strings
     * would cut at (a body's ids, its name), as the JSON loader refuses
     * it. */
    char path[256];
    if (tg_json_find_nul(s, strlen(s), path, sizeof path)) {
        tg_errorf(D->ctx, TG_ELOAD, "attrs: %s: contains a NUL character (\\u0000), which tg does not "
                  "accept in a compiled-function file (its strings would end there)", path);
        json_object_put(o);
        return NULL;
    }
    if (!C->obj[si]) {
        C->obj[si] = json_object_get(o);
        C->op[si] = op;
    }
    return o;
}

/* Bool data holds only the bytes 0 and 1: the JSON loader refuses any
 * other in base64 data (and data written as true/false would not keep
 * it). */
static bool bool_bytes_ok(const tg_array *a) {
    if (a->dtype != TG_BOOL) return true;
    tg_array *c = tg_array_is_contiguous(a) ? tg_array_ref((tg_array *)a)
                                            : tg_array_copy(a, a->dtype);
    if (!c) return false;
    const unsigned char *p = tg_array_data(c);
    int64_t n = tg_array_size_inline(c);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) ok = p[i] <= 1;
    tg_array_free(c);
    return ok;
}

static const char *kind_name(tg_var_kind k) {
    return k == TG_VAR_INPUT ? "an input" : k == TG_VAR_CONSTANT ? "a constant"
                                        : k == TG_VAR_SHARED     ? "shared"
                                                                 : "a node output";
}

static const char *str_of(dec *D, uint32_t i, bool optional, const char *where, const char *f);

/* The variables. Shared state comes from `shared` so that the functions
 * of one file share it. */
static int read_vars(dec *D, tg_fgraph *fg, tg_array *const *arrays, int narrays,
                     tgf_shared_fn shared, void *ud) {
    uint32_t n = get_count(D, 20, "variables");
    if (D->rc) return D->rc;
    struct tg_idmap *ids = tg_idmap_new();
    if (!ids) return fail(D, TG_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n && !D->rc; i++) {
        /* (the fields' names made only for an error) */
        char where[48], fname[64];
        indexed(where, "variables", i);
        const char *id = str_of(D, get32(D), false, where, "id");
        const char *name = str_of(D, get32(D), true, where, "name");
        if (name && !copy_ok(D, name, field(fname, sizeof fname, where, "name"))) break;
        if (D->rc) break;
        uint8_t kind = get8(D), flags = get8(D), dt = get8(D), nd = get8(D);
        if (D->rc) break;
        if (!tg_id_valid(id) || tg_idmap_get(ids, id)) {
            fail(D, TG_EPARSE, "graph section: variables[%u]: id '%.128s' is %s", i, id,
                 tg_id_valid(id) ? "used twice" : "not a valid id");
            break;
        }
        if (kind > TG_VAR_RESULT || dt >= TG_NDTYPES || nd > TG_MAX_NDIM || flags > 15) {
            fail(D, TG_EPARSE, "graph section: variables[%u] '%.128s': bad kind, dtype or rank",
                 i, id);
            break;
        }
        tg_var *v = tg_var_new_in(fg->arena, id, (tg_var_kind)kind);
        if (!v || (name && !(v->name = tg_strdup(name))) || tg_fgraph_add_var(fg, v) ||
            tg_idmap_put(ids, v->id, v)) {
            if (v && (fg->nvars == 0 || fg->vars[fg->nvars - 1] != v)) tg_var_free(v);
            fail(D, TG_ENOMEM, "out of memory");
            break;
        }
        /* only a constant is written inline ({"value": ...}) or weak; and
         * weak (a bare scalar, which loads as float64, int64 or bool and
         * takes its dtype from the op reading it) only while it has that
         * dtype: one an op made float32 is exported with its dtype, so the
         * export has the types the function was saved with whatever op
         * reads it */
        v->weak_in_file = kind == TG_VAR_CONSTANT && (flags & 1) && nd == 0 &&
                          (dt == TG_FLOAT64 || dt == TG_INT64 || dt == TG_BOOL);
        v->inline_const = kind == TG_VAR_CONSTANT && (flags >> 1 & 1);
        v->declared = flags >> 2 & 1;
        v->type_given = flags >> 3 & 1;
        v->type.dtype = (tg_dtype)dt;
        v->type.ndim = nd;
        for (int d = 0; d < nd; d++) {
            int64_t len = (int64_t)get64(D);
            if (len < -1) fail(D, TG_EPARSE, "graph section: '%.128s': a negative length", id);
            v->type.shape[d] = len;
        }
        if (!D->rc && !tg_type_fits(&v->type))
            fail(D, TG_EPARSE, "graph section: '%.128s': a type of more than 2^63 - 1 bytes", id);
        uint32_t k = get32(D), tk = get32(D);
        if (D->rc) break;
        bool valued = kind == TG_VAR_CONSTANT || kind == TG_VAR_SHARED;
        if ((valued ? k >= (uint32_t)narrays : k != NONE) ||
            (tk != NONE && tk >= (uint32_t)narrays)) {
            fail(D, TG_EPARSE, "graph section: '%.128s' (%s): bad array index", id,
                 kind_name((tg_var_kind)kind));
            break;
        }
        if (valued && !tg_type_accepts(&v->type, arrays[k])) {
            char want[128];
            tg_type_str(&v->type, want, sizeof want);
            fail(D, TG_ELOAD, "graph section: array %u (%s, %d dimensions) does not fit '%.128s' (%s)",
                 k, tg_dtype_name(arrays[k]->dtype), arrays[k]->ndim, id, want);
            break;
        }
        if (tk != NONE && !tg_type_accepts(&v->type, arrays[tk])) {
            /* dtype, rank and every static length, as the JSON loader asks */
            fail(D, TG_ELOAD, "graph section: the test value of '%.128s' is not of its type", id);
            break;
        }
        /* The JSON loader's rules for what the export writes of a variable:
         * a test value needs a type (a node output's type is written only
         * when the file gave it); an inline constant ({"value": ...}) takes
         * its value's type, every length static; bool data is 0 or 1. */
        if (tk != NONE && kind == TG_VAR_RESULT && !v->type_given) {
            fail(D, TG_EPARSE, "graph section: '%.128s' has a test value but no declared type", id);
            break;
        }
        bool open = false;
        for (int d = 0; d < nd; d++) open |= v->type.shape[d] < 0;
        if (v->inline_const && open) {
            fail(D, TG_EPARSE,
                 "graph section: inline constant '%.128s' leaves a length of its type open", id);
            break;
        }
        if ((valued && !bool_bytes_ok(arrays[k])) || (tk != NONE && !bool_bytes_ok(arrays[tk]))) {
            fail(D, TG_EPARSE, "graph section: '%.128s': bool data holds a byte other than 0 or 1",
                 id);
            break;
        }
        if (tk != NONE) v->test_value = tg_array_ref(arrays[tk]);
        if (kind == TG_VAR_CONSTANT) v->value = tg_array_ref(arrays[k]);
        if (kind == TG_VAR_SHARED && !(v->shared = shared(ud, v->id, &v->type, arrays[k], D->ctx)))
            D->rc = tg_ctx_status(D->ctx) ? tg_ctx_status(D->ctx) : TG_ELOAD;
    }
    tg_idmap_free(ids);
    return D->rc;
}

static tg_var *var_at(dec *D, tg_fgraph *fg, const char *what) {
    uint32_t i = get32(D);
    if (D->rc) return NULL;
    if (i >= (uint32_t)fg->nvars) {
        fail(D, TG_EPARSE, "graph section: %s: variable %u does not exist", what, i);
        return NULL;
    }
    return fg->vars[i];
}

/* Free a node that did not make it into the graph, giving its outputs
 * back. */
static void disown(tg_node *n) {
    for (int k = 0; k < n->nout; k++)
        if (n->outputs[k] && n->outputs[k]->owner == n) n->outputs[k]->owner = NULL;
    tg_node_free(n);
}

/* A constant written weak is exported as a bare scalar, which the JSON
 * loader reads as a weak float64, int64 or bool (one per place it is
 * read) that takes its dtype from the op reading it. It stays weak only
 * while the op, given it weak, leaves its dtype and gives the types it
 * gives it as it is (`gives`, before any refinement); otherwise (or when
 * the node reads it twice) the export writes its dtype. The node's types
 * and the constant are left as they were. */
static void weak_check(tg_node *n, const tg_type *gives) {
    bool any = false;
    for (int k = 0; k < n->nin; k++)
        any |= n->inputs[k]->weak_in_file && n->inputs[k]->inline_const;
    if (!any) return;
    tg_var *w[8];
    tg_array *val[8];
    tg_type wt[8], out_small[4];
    tg_type *out = n->nout <= 4 ? out_small : tg_malloc(sizeof *out * (size_t)n->nout);
    int nw = 0;
    bool keep = out != NULL;
    for (int k = 0; k < n->nin; k++) {
        tg_var *v = n->inputs[k];
        if (!v->weak_in_file || !v->inline_const || v->weak) continue;
        if (nw == 8) keep = false;
        else {
            w[nw] = v;
            val[nw] = tg_array_ref(v->value);
            wt[nw++] = v->type;
            v->weak = true;
        }
    }
    for (int k = 0; k < n->nin; k++)
        for (int j = 0; j < k; j++)
            if (n->inputs[j] == n->inputs[k] && n->inputs[k]->weak_in_file) keep = false;
    if (keep) {
        tg_attrs a = n->a; /* what infer notes there (ew: the compute dtype) */
        for (int k = 0; k < n->nout; k++) {
            out[k] = n->outputs[k]->type;
            n->outputs[k]->type.dtype = TG_DTYPE_INVALID;
            n->outputs[k]->type.ndim = -1;
        }
        tg_ctx scratch = {0}; /* the trial's error is not the file's */
        keep = n->op->infer(n, &scratch) == TG_OK;
        for (int k = 0; k < n->nout; k++) {
            keep = keep && tg_type_equal(&n->outputs[k]->type, &gives[k]);
            n->outputs[k]->type = out[k];
        }
        n->a = a;
    }
    for (int i = 0; i < nw; i++) {
        tg_var *v = w[i];
        keep = keep && v->value == val[i] && v->type.dtype == wt[i].dtype;
        if (v->value != val[i]) {
            tg_array_free(v->value);
            v->value = val[i];
        } else {
            tg_array_free(val[i]);
        }
        v->type = wt[i];
        v->weak = false;
    }
    if (!keep)
        for (int k = 0; k < n->nin; k++)
            if (n->inputs[k]->inline_const) n->inputs[k]->weak_in_file = false;
    if (out != out_small) tg_free(out);
}

/* String i for field f of `where` (read_node's fields of every node: the
 * field's name is made only for an error). */
static const char *str_of(dec *D, uint32_t i, bool optional, const char *where, const char *f) {
    if (D->rc || (i == NONE && optional)) return NULL;
    if (i < D->nstrs && !D->nul[i]) return D->strs[i];
    char fld[64];
    return str_at(D, i, optional, field(fld, sizeof fld, where, f));
}

/* A frame's string (optional): its one copy for the section's traces. */
static char *frame_str(dec *D, const char *what) {
    uint32_t i = get32(D);
    const char *s = str_at(D, i, true, what);
    if (!s) return NULL;
    if (!D->frame_str[i] && !(D->frame_str[i] = tg_trace_strings_add(D->frame_strs, s, strlen(s))))
        fail(D, TG_ENOMEM, "out of memory");
    return D->frame_str[i];
}

/* How errors name node n where its description does not (version 4 on):
 * the words of a node moved out of a body, a composite's fused nodes. */
static int read_error_names(dec *D, tg_node *n, const char *where) {
    const char *moved = str_of(D, get32(D), true, where, "moved");
    const char *traces = moved ? str_of(D, get32(D), false, where, "moved") : NULL;
    if (!copy_ok(D, moved, where) || !copy_ok(D, traces, where)) return D->rc;
    if (moved && tg_node_moved_set(n, moved, traces)) return fail(D, TG_ENOMEM, "out of memory");
    uint32_t nw = get_count(D, 8, "fused-node names");
    if (D->rc || !nw) return D->rc;
    const char **parts = tg_malloc(sizeof *parts * 2 * (size_t)nw);
    if (!parts) return fail(D, TG_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < 2 * nw && !D->rc; j++)
        copy_ok(D, parts[j] = str_of(D, get32(D), false, where, "fused"), where);
    int rc = D->rc ? D->rc : tg_composite_who_set(n, parts, (int)nw);
    tg_free(parts);
    if (rc == TG_EPARSE) /* (so a name repeated many times is no absurd allocation) */
        fail(D, TG_EPARSE, "graph section: %s: a fused node's description or trace is longer than tg writes",
             where);
    else if (rc == TG_EINVAL)
        fail(D, TG_EPARSE, "graph section: %s: names of fused nodes on a node that is not a composite (%s)",
             where, n->op->name);
    else if (rc && !D->rc)
        fail(D, TG_ENOMEM, "out of memory");
    return D->rc;
}

static int read_node(dec *D, tg_fgraph *fg, attrs_cache *C, int s) {
    char where[48], fld[64];
    indexed(where, "schedule", (uint32_t)s);
    const char *opname = str_of(D, get32(D), false, where, "op");
    uint32_t ai = get32(D);
    const char *name = str_of(D, get32(D), true, where, "name");
    copy_ok(D, name, where);
    /* The node's place in the graph file; earlier versions did not keep
     * it (their nodes are named without one, never by their place in the
     * schedule). */
    uint32_t ji = D->version >= 4 ? get32(D) : NONE;
    uint32_t nin = get_count(D, 4, "inputs");
    if (D->rc) return D->rc;
    if (ji != NONE && ji > INT32_MAX)
        return fail(D, TG_EPARSE, "graph section: %s: node index %u is past 2^31 - 1", where, ji);
    const tg_op *op = tg_op_find(opname);
    if (!op || (op->flags & TG_OPF_DERIVED))
        return fail(D, TG_ELOAD, "%s: '%.64s' is not an op this tg runs", where, opname);
    if (ai != NONE && ai >= D->nstrs)
        return fail(D, TG_EPARSE, "graph section: %s: bad attrs string", where);
    if (ai != NONE && !str_at(D, ai, false, field(fld, sizeof fld, where, "attrs"))) return D->rc;
    tg_var **in = tg_calloc((size_t)nin + 1, sizeof *in);
    if (!in) return fail(D, TG_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < nin && !D->rc; k++) in[k] = var_at(D, fg, where);
    uint32_t nout = get_count(D, 4, "outputs");
    tg_node *n = D->rc ? NULL : tg_node_new_in(fg->arena, op, (int)nin, (int)nout);
    if (!n) {
        tg_free(in);
        return D->rc ? D->rc : fail(D, TG_ENOMEM, "out of memory");
    }
    memcpy(n->inputs, in, sizeof *in * nin);
    tg_free(in);
    n->json_index = ji == NONE ? -1 : (int)ji;
    if (name && !(n->name = tg_strdup(name))) goto oom;
    /* Every input must exist before this node runs: made by an earlier
     * node, or not a node output at all. */
    for (uint32_t k = 0; k < nin; k++)
        if (n->inputs[k]->kind == TG_VAR_RESULT && !n->inputs[k]->owner) {
            fail(D, TG_ELOAD, "%s: input '%.128s' is not computed before it is read", where,
                 n->inputs[k]->id);
            goto bad;
        }
    for (uint32_t k = 0; k < nout && !D->rc; k++) {
        tg_var *o = var_at(D, fg, where);
        if (!o) break;
        if (o->kind != TG_VAR_RESULT || o->owner) {
            fail(D, TG_EPARSE, "graph section: %s: output '%.128s' is %s", where, o->id,
                 o->owner ? "made twice" : kind_name(o->kind));
            break;
        }
        n->outputs[k] = o;
        o->owner = n;
        o->owner_index = (int)k;
    }
    if (D->rc) goto bad;
    if (tg_node_check_arity(n, D->ctx) || !nout) {
        if (!nout) tg_errorf(D->ctx, TG_ELOAD, "outputs: a node needs outputs");
        goto wrap;
    }
    const tg_node *like = NULL; /* an earlier node with n's attrs object */
    if (ai != NONE) {
        if (!(n->attrs = attrs_for(D, C, ai, op))) {
            if (D->rc) goto bad;
            goto wrap;
        }
        if (C->first[ai] && C->first[ai]->attrs == n->attrs) like = C->first[ai];
        if (tg_node_check_attr_keys(n, n->attrs, D->ctx)) goto wrap;
    }
    if (op->parse_attrs && (like && op->share_extra ? op->share_extra(n, like, D->ctx)
                                                    : op->parse_attrs(n, D->ctx)))
        goto wrap;
    uint8_t has_ip = get8(D);
    if (has_ip > 1) fail(D, TG_EPARSE, "graph section: %s: bad in-place flag", where);
    if (has_ip && !D->rc) {
        if (!(n->inplace = tg_malloc(nout))) goto oom;
        memset(n->inplace, -1, nout);
        for (uint32_t k = 0; k < nout && !D->rc; k++) {
            int8_t ii = (int8_t)get8(D);
            /* the JSON loader reads output indices of at most 3 digits */
            if (!D->rc && ii >= 0 && k > 999)
                fail(D, TG_EPARSE, "graph section: %s: output %u is overwritten in place (at most "
                     "999 can be)", where, k);
            if (!D->rc && ii >= 0 && tg_node_set_inplace(n, (int)k, ii, D->ctx)) goto wrap;
        }
    }
    uint32_t nfr = get_count(D, 20, "trace frames");
    if (D->rc) goto bad;
    if (nfr) {
        if (!D->frame_strs && (!(D->frame_strs = tg_trace_strings_new()) ||
                               !(D->frame_str = tg_calloc((size_t)D->nstrs + 1, sizeof *D->frame_str))))
            goto oom;
        if (!(n->trace.frames = tg_trace_frames_new_in(nfr, D->frame_strs))) goto oom;
        n->trace.n = (int)nfr;
        field(fld, sizeof fld, where, "trace");
        for (uint32_t k = 0; k < nfr && !D->rc; k++) {
            tg_frame *fr = &n->trace.frames[k];
            fr->file = frame_str(D, fld);
            fr->line = (int64_t)get64(D);
            fr->function = frame_str(D, fld);
            fr->code = frame_str(D, fld);
        }
        if (D->rc) goto bad;
    }
    uint32_t nor = get32(D);
    if (nor != NONE) {
        if (D->rc || nor > (uint32_t)(D->end - D->p) / 4) {
            fail(D, TG_EPARSE, "graph section: %s: bad origins", where);
            goto bad;
        }
        const char *small[16], **keys = nor <= 16 ? small : tg_malloc(sizeof *keys * nor);
        if (!keys) goto oom;
        field(fld, sizeof fld, where, "origins");
        for (uint32_t k = 0; k < nor && !D->rc; k++) copy_ok(D, keys[k] = get_str(D, false, fld), fld);
        if (!D->rc) {
            n->origins = tg_origins_pack(keys, (int)nor);
            n->norigins = (int)nor;
        }
        if (keys != small) tg_free(keys);
        if (D->rc) goto bad;
        if (!n->origins) goto oom;
        uint32_t nf = D->version < 3 ? 0 : get_count(D, 4, "origin groups");
        if (nf) {
            int *st = tg_malloc(sizeof *st * ((size_t)nf + 1));
            if (!st) goto oom;
            st[0] = 0;
            for (uint32_t k = 1; k <= nf && !D->rc; k++) {
                uint32_t e = get32(D);
                st[k] = e > nor ? -1 : (int)e;
            }
            int grc = D->rc ? D->rc : tg_composite_set_origin_groups(n, st, (int)nf);
            tg_free(st);
            if (grc == TG_ENOMEM) goto oom;
            if (grc) {
                fail(D, TG_EPARSE, "graph section: %s: bad origin groups", where);
                goto bad;
            }
        }
    }
    if (D->rc) goto bad;
    if (D->version >= 4 && read_error_names(D, n, where)) goto bad;
    /* The op's inference gives the types again: the saved ones must agree
     * (a declared type may refine a length the op leaves open). saved[]
     * holds the saved types, then (from nout on) what the op gives. */
    tg_type saved_small[8], *saved = nout <= 4 ? saved_small : tg_malloc(sizeof *saved * nout * 2);
    if (!saved) goto oom;
    for (uint32_t k = 0; k < nout; k++) saved[k] = n->outputs[k]->type;
    bool typed = op->infer != NULL;
    for (uint32_t k = 0; k < nin; k++)
        if (n->inputs[k]->type.dtype == TG_DTYPE_INVALID) typed = false;
    if (!typed || op->infer(n, D->ctx)) {
        if (!typed) tg_errorf(D->ctx, TG_ELOAD, "an input has no type, or %s has no inference", op->name);
        if (saved != saved_small) tg_free(saved);
        goto wrap;
    }
    for (uint32_t k = 0; k < nout; k++) {
        tg_type *got = &n->outputs[k]->type, *want = &saved[k];
        if (got->dtype != want->dtype || got->ndim != want->ndim || !tg_type_compatible(got, want)) {
            char a[128], b[128];
            tg_type_str(want, a, sizeof a);
            tg_type_str(got, b, sizeof b);
            tg_errorf(D->ctx, TG_ELOAD, "outputs[%u]: saved as %s, but the op gives %s", k, a, b);
            if (saved != saved_small) tg_free(saved);
            goto wrap;
        }
        saved[nout + k] = *got;
        bool refined = false;
        for (int d = 0; d < got->ndim; d++)
            if (got->shape[d] < 0 && want->shape[d] >= 0) {
                got->shape[d] = want->shape[d];
                refined = true;
            }
        /* The JSON loader takes a refinement only from a declared type:
         * the export declares this one, so that what reads the output
         * sees the same lengths when the export is loaded again. */
        if (refined) n->outputs[k]->declared = n->outputs[k]->type_given = true;
        if (!tg_type_fits(got)) {
            char a[128];
            tg_type_str(got, a, sizeof a);
            tg_errorf(D->ctx, TG_ESHAPE, "outputs[%u]: %s holds more than 2^63 - 1 bytes", k, a);
            if (saved != saved_small) tg_free(saved);
            goto wrap;
        }
    }
    weak_check(n, saved + nout);
    /* An in-place hint the optimizer made under the saved types, which
     * inference has refined since (a length it could not know then) so
     * that the two no longer agree, is dropped: the kernels take a buffer
     * over only when the shapes agree at run time, so the hint was safe,
     * and files written before the optimizer stopped making such hints
     * still load. One the saved types refuse is refused below. */
    for (uint32_t k = 0; n->inplace && k < nout; k++) {
        if (n->inplace[k] < 0) continue;
        const tg_type *it = &n->inputs[n->inplace[k]]->type, *ot = &n->outputs[k]->type;
        if (it->dtype == ot->dtype && it->ndim == ot->ndim && !tg_type_compatible(it, ot) &&
            tg_type_compatible(it, &saved[k]))
            n->inplace[k] = -1;
    }
    if (saved != saved_small) tg_free(saved);
    if (tg_node_check_inplace_types(n, D->ctx)) goto wrap;
    if (tg_fgraph_add_node(fg, n)) goto oom;
    if (ai != NONE && !C->first[ai] && n->attrs == C->obj[ai]) C->first[ai] = n;
    return TG_OK;
wrap: {
    char desc[256];
    tg_node_describe(n, desc, sizeof desc);
    tg_error_prefix(D->ctx, "%s: %s: %s", D->what, where, desc);
    D->rc = tg_ctx_status(D->ctx) ? tg_ctx_status(D->ctx) : TG_ELOAD;
    disown(n);
    return D->rc;
}
oom:
    fail(D, TG_ENOMEM, "out of memory");
bad:
    disown(n);
    return D->rc;
}

static int read_function(dec *D, tg_fgraph *fg, char ***out_ids) {
    uint32_t nin = get_count(D, 4, "function inputs");
    if (D->rc) return D->rc;
    fg->inputs = tg_calloc((size_t)nin + 1, sizeof *fg->inputs);
    if (!fg->inputs) return fail(D, TG_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < nin && !D->rc; i++) {
        tg_var *v = var_at(D, fg, "inputs");
        if (v && v->kind != TG_VAR_INPUT)
            fail(D, TG_EPARSE, "graph section: inputs[%u] '%.128s' is %s", i, v->id,
                 kind_name(v->kind));
        for (uint32_t j = 0; j < i && !D->rc; j++) /* the JSON loader's rule too */
            if (fg->inputs[j] == v)
                fail(D, TG_EPARSE, "graph section: inputs[%u] '%.128s' is listed twice", i, v->id);
        fg->inputs[i] = v;
    }
    fg->nin = (int)nin;
    uint32_t nout = get_count(D, 8, "function outputs");
    if (D->rc) return D->rc;
    const unsigned char *mark = D->p;
    D->p += (size_t)nout * 8;
    uint32_t nupd = get_count(D, 8, "updates");
    D->p = mark;
    if (D->rc) return D->rc;
    fg->outputs = tg_calloc((size_t)nout + nupd + 1, sizeof *fg->outputs);
    fg->upd_shared = tg_calloc((size_t)nupd + 1, sizeof *fg->upd_shared);
    *out_ids = tg_calloc((size_t)nout + 1, sizeof **out_ids);
    if (!fg->outputs || !fg->upd_shared || !*out_ids) return fail(D, TG_ENOMEM, "out of memory");
    fg->nout = (int)nout;
    for (uint32_t i = 0; i < nout && !D->rc; i++) {
        tg_var *v = var_at(D, fg, "outputs");
        char fo[48];
        snprintf(fo, sizeof fo, "outputs[%u].id", i);
        const char *id = get_str(D, false, fo);
        if (!copy_ok(D, id, fo)) break;
        if (!tg_id_valid(id)) {
            fail(D, TG_EPARSE, "graph section: outputs[%u]: its declared id is not a valid id", i);
            break;
        }
        if (v->kind == TG_VAR_RESULT && !v->owner)
            fail(D, TG_EPARSE, "graph section: outputs[%u] '%.128s' is never computed", i, v->id);
        fg->outputs[i] = v;
        if (!((*out_ids)[i] = tg_strdup(id))) fail(D, TG_ENOMEM, "out of memory");
    }
    get32(D); /* nupd, read above */
    for (uint32_t i = 0; i < nupd && !D->rc; i++) {
        tg_var *s = var_at(D, fg, "updates"), *v = var_at(D, fg, "updates");
        if (D->rc) break;
        if (s->kind != TG_VAR_SHARED || (v->kind == TG_VAR_RESULT && !v->owner) ||
            v->type.dtype != s->type.dtype || v->type.ndim != s->type.ndim ||
            !tg_type_compatible(&v->type, &s->type)) /* the JSON loader's rule too */
            fail(D, TG_EPARSE, "graph section: updates[%u]: '%.128s' cannot update '%.128s'", i,
                 v->id, s->id);
        for (uint32_t j = 0; j < i && !D->rc; j++)
            if (fg->upd_shared[j] == s)
                fail(D, TG_EPARSE, "graph section: updates[%u]: '%.128s' is updated twice", i,
                     s->id);
        fg->upd_shared[i] = s;
        fg->outputs[nout + i] = v;
    }
    fg->nupd = (int)nupd;
    for (uint32_t r = 0; r < nout + nupd && !D->rc; r++)
        if (tg_fgraph_add_client(fg->outputs[r], NULL, (int)r)) fail(D, TG_ENOMEM, "out of memory");
    if (D->rc) return D->rc;
    /* Every free input a node reads is an argument of the function. */
    for (int i = 0; i < fg->nin; i++) fg->inputs[i]->mark = fg;
    for (int i = 0; i < fg->nvars && !D->rc; i++) {
        tg_var *v = fg->vars[i];
        if (v->kind == TG_VAR_INPUT && v->nclients && v->mark != fg)
            fail(D, TG_ELOAD, "graph section: '%.128s' is read but is not an input of the function",
                 v->id);
    }
    for (int i = 0; i < fg->nin; i++) fg->inputs[i]->mark = NULL;
    /* An overwritten input has no other reader (the loader's rule); a
     * shared one, tg_inplace_shared_ok's. */
    tg_shared_check chk = {0};
    for (int i = 0; i < fg->nnodes && !D->rc; i++) {
        const tg_node *n = fg->nodes[i];
        for (int k = 0; n->inplace && k < n->nout && !D->rc; k++) {
            if (n->inplace[k] < 0) continue;
            const tg_var *in = n->inputs[n->inplace[k]];
            if (tg_inplace_hint_ok(fg, n, n->inplace[k], &chk)) continue;
            if (chk.oom)
                fail(D, TG_ENOMEM, "out of memory");
            else if (in->kind == TG_VAR_SHARED)
                fail(D, TG_ELOAD, "graph section: schedule[%d]: shared variable '%.128s' is overwritten in "
                     "place, but not by the node that makes its update alone, or it is also returned or "
                     "read by another node that may overwrite one", i, in->id);
            else
                fail(D, TG_ELOAD, "graph section: schedule[%d]: input '%.128s' is overwritten in "
                     "place but read elsewhere too", i, in->id);
        }
    }
    tg_shared_check_free(&chk);
    return D->rc;
}

static int read_record(dec *D, tg_opt_record *rec) {
    uint32_t n = get_count(D, 16, "rewrites");
    for (uint32_t i = 0; i < n && !D->rc; i++) {
        const char *name = get_str(D, false, "rewrites"), *pass = get_str(D, false, "rewrites");
        const char **lists[2] = {NULL, NULL};
        uint32_t cnt[2] = {0, 0};
        for (int l = 0; l < 2 && !D->rc; l++) {
            cnt[l] = get_count(D, 4, "rewritten nodes");
            if (D->rc) break;
            if (!(lists[l] = tg_calloc((size_t)cnt[l] + 1, sizeof *lists[l]))) {
                fail(D, TG_ENOMEM, "out of memory");
                break;
            }
            for (uint32_t k = 0; k < cnt[l] && !D->rc; k++)
                copy_ok(D, lists[l][k] = get_str(D, false, "rewrites"), "rewrites");
        }
        if (!D->rc && tg_opt_record_add(rec, name, pass, lists[0], (int)cnt[0], lists[1], (int)cnt[1]))
            fail(D, TG_ENOMEM, "out of memory");
        tg_free(lists[0]);
        tg_free(lists[1]);
    }
    uint32_t np = get_count(D, 24, "passes");
    if (D->rc) return D->rc;
    if (np && !(rec->passes = tg_calloc(np, sizeof *rec->passes)))
        return fail(D, TG_ENOMEM, "out of memory");
    rec->cpasses = (int)np;
    for (uint32_t i = 0; i < np && !D->rc; i++) {
        tg_pass_stats *p = &rec->passes[i];
        p->name = get_str(D, false, "passes");
        uint64_t bits = get64(D);
        memcpy(&p->seconds, &bits, 8);
        p->nodes_before = (int)get32(D);
        p->nodes_after = (int)get32(D);
        p->applied = (int)get32(D);
        rec->npasses = (int)i + 1;
    }
    return D->rc;
}

/* The gradients' nodes (format version 3 on). */
static int read_grads(dec *D, tg_opt_record *rec) {
    uint32_t n = get_count(D, 20, "gradient nodes");
    if (D->rc || !n) return D->rc;
    const char **s = tg_calloc((size_t)n * 5, sizeof *s);
    if (!s) return fail(D, TG_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n && !D->rc; i++)
        for (int j = 0; j < 5 && !D->rc; j++)
            copy_ok(D, s[5 * i + j] = get_str(D, j == 1 || j == 2, "gradient nodes"), "gradient nodes");
    if (!D->rc && tg_opt_record_grads_set(rec, (int)n, s)) fail(D, TG_ENOMEM, "out of memory");
    tg_free(s);
    return D->rc;
}

int tgf_graph_decode(const void *data, size_t len, tg_array *const *arrays, int narrays,
                     tgf_shared_fn shared, void *ud, const char *what, tgf_decoded *out,
                     tg_ctx *ctx) {
    dec D = {.start = data, .p = data, .end = (const unsigned char *)data + len, .what = what, .ctx = ctx,
             .budget = (len > 4096 ? len : 4096) * COPY_PER_BYTE};
    attrs_cache C = {0};
    memset(out, 0, sizeof *out);
    tg_fgraph *fg = tg_calloc(1, sizeof *fg);
    if (!fg || !(fg->arena = tg_arena_new())) {
        tg_free(fg);
        return fail(&D, TG_ENOMEM, "out of memory");
    }
    D.version = len >= 4 && !memcmp(data, GRAPH_MAGIC, 3) ? ((const unsigned char *)data)[3] : 0;
    if (D.version < 2 || D.version > GRAPH_MAGIC[3]) {
        fail(&D, TG_EPARSE, "not a graph section (bad magic number)");
        goto done;
    }
    D.p += 4;
    if (read_strings(&D) || read_vars(&D, fg, arrays, narrays, shared, ud)) goto done;
    C.obj = tg_calloc((size_t)D.nstrs + 1, sizeof *C.obj);
    C.op = tg_calloc((size_t)D.nstrs + 1, sizeof *C.op);
    C.first = tg_calloc((size_t)D.nstrs + 1, sizeof *C.first);
    if (!C.obj || !C.op || !C.first) {
        fail(&D, TG_ENOMEM, "out of memory");
        goto done;
    }
    uint32_t nn = get_count(&D, D.version >= 4 ? 36 : 24, "nodes");
    for (uint32_t s = 0; s < nn && !D.rc; s++) read_node(&D, fg, &C, (int)s);
    if (D.rc || read_function(&D, fg, &out->out_ids) || read_record(&D, &out->record) ||
        (D.version >= 3 && read_grads(&D, &out->record)))
        goto done;
    if (D.p != D.end) fail(&D, TG_EPARSE, "graph section: %zu bytes after its end", (size_t)(D.end - D.p));
done:
    for (uint32_t i = 0; C.obj && i < D.nstrs; i++) json_object_put(C.obj[i]);
    tg_free(C.obj);
    tg_free(C.op);
    tg_free(C.first);
    if (C.tok) json_tokener_free(C.tok);
    tg_free(D.strs);
    tg_free(D.nul);
    tg_free(D.frame_str);
    tg_trace_strings_unref(D.frame_strs); /* the traces hold their own references */
    if (D.rc) {
        if (out->out_ids)
            for (int i = 0; i < fg->nout; i++) tg_free(out->out_ids[i]);
        tg_free(out->out_ids);
        out->out_ids = NULL;
        tg_opt_record_free(&out->record);
        tg_fgraph_free(fg);
        tg_free(D.pool);
        return D.rc;
    }
    out->fg = fg;
    out->strpool = D.pool; /* the record's names point into it */
    return TG_OK;
}
