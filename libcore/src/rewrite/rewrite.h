/* Private: the optimizer (rewrite engine, passes) and its record.
 *
 * The optimizer rewrites a function graph in place. What it did is kept in
 * a tg_opt_record that the compiled function owns: the rewrite record (for
 * every applied rewrite, its name, pass, and the keys of the nodes it
 * replaced and created), and its own profile (per pass, per rewrite).
 * Nodes made by rewrites carry their origins (tg_node.origins).
 */
#ifndef TG_REWRITE_INTERNAL_H
#define TG_REWRITE_INTERNAL_H

#include "graph/graph.h"
#include "tg/function.h"

typedef struct tg_rw_entry {
    const char *name; /* static strings: the rewrite's name and pass */
    const char *pass;
    char **removed; /* keys: one block holds both lists and their
                       strings (created points into it), in the record's
                       key chunks (tg_opt_record.keys) */
    int nremoved;
    char **created;
    int ncreated;
} tg_rw_entry;

/* See tg_function_key_gradient (tg/function.h). */
typedef struct tg_grad_origin {
    const char *key, *of, *of_op, *by, *by_op;
} tg_grad_origin;

typedef struct tg_opt_record {
    tg_rw_entry *entries;
    int n, cap;
    /* Where the entries' key blocks are (tg_chunks_alloc), freed with the
     * record: one allocation per chunk rather than per entry (a compile
     * of 100,000 nodes makes some 40,000 entries). Owned. */
    struct tg_chunk *keys;
    tg_pass_stats *passes;
    int npasses, cpasses;
    tg_rewrite_stats *rstats;
    int nrstats;
    double seconds; /* optimizer time */
    /* Variables a rewrite swapped in for others, as id pairs (old, new)
     * in the order applied: how `tgdebug compare` finds, for a value of
     * the optimized function, the value of the file it stands for. The
     * ids are packed in one buffer (vmap_text; vmap holds the offsets of
     * each pair's two strings), so that recording costs no allocation per
     * rewrite. Owned; not saved in compiled-function files. */
    size_t *vmap;
    int nvmap, cvmap; /* pairs */
    char *vmap_text;
    size_t vmap_len, vmap_cap;
    /* The nodes a gradient's expansion made (tg_node.grad_of), by key, as
     * the function held them before the rewrites: what a key in the
     * origins of an optimized node, or a scheduled node's own, that is in
     * no file stands for. Sorted by key; the strings in one block
     * (grads_text). Owned; saved in compiled-function files. */
    tg_grad_origin *grads;
    int ngrads;
    char *grads_text;
} tg_opt_record;

void tg_opt_record_free(tg_opt_record *r);
/* Replace r's gradient table by n entries given as 5n strings (key, of,
 * of_op, by, by_op each; copied; "" for none), sorted here. TG_ENOMEM. */
int tg_opt_record_grads_set(tg_opt_record *r, int n, const char *const *s);
/* The table from the nodes of fg that carry grad_of. TG_ENOMEM. */
int tg_opt_record_grads_from(tg_opt_record *r, const tg_fgraph *fg);
/* The entry for key, or NULL. */
const tg_grad_origin *tg_opt_record_grad(const tg_opt_record *r, const char *key);
/* What the nodes of keys[0..nk) that a gradient's expansion made belong
 * to, for messages: "from grad gx, differentiating r (sqrt), m (mul)",
 * each grad, rop or lop node once with up to three of the nodes it
 * differentiates, "; " between them. "" when there are none. */
void tg_opt_record_grad_note(const tg_opt_record *r, const char *const *keys, int nk, char *buf,
                             size_t size);
/* Note that variable `newv` replaced `old` (ids copied). TG_ENOMEM. */
int tg_opt_record_vmap_add(tg_opt_record *r, const char *old, const char *newv);
/* The id of the variable of the original graph that `id` stands for,
 * following the replacements of r back (id itself when no rewrite made
 * it). Borrowed from r or id. */
const char *tg_opt_record_standin(const tg_opt_record *r, const char *id);
/* Optimize fg in place with the preset and tags of opts (NULL: fast_run),
 * filling rec. `taken` holds the ids of the graph fg was cloned from (new
 * variables get ids outside it); NULL: fg's own ids are collected. Errors: TG_EINVAL (an unknown preset or tag), TG_ENOMEM;
 * a rewrite that would change a type is reported as an optimizer bug. */
int tg_optimize(tg_fgraph *fg, const tg_compile_options *opts,
                tg_opt_record *rec, const struct tg_idmap *taken,
                tg_ctx *ctx);
/* Append an entry (keys copied). */
int tg_opt_record_add(tg_opt_record *r, const char *name, const char *pass,
                      const char *const *removed, int nremoved,
                      const char *const *created, int ncreated);

#endif
