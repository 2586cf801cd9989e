/* Private: the rewrite engine, as the passes see it.
 *
 * A local rewrite looks at one node and, when its pattern matches, builds
 * the replacement with tg_rw_op and tg_rw_const and swaps it in with
 * tg_rw_replace. The engine prunes what became dead, records the
 * application (as removed: those of the node it fired on and the nodes
 * declared with tg_rw_match that died, and every node that died with
 * them; as created: every node built during it that the replacement
 * uses), gives the new nodes the trace of the node it fired on and the
 * union of the origins of the replaced nodes that died, and puts the new
 * nodes and the clients of replaced variables back on the worklist. So
 * the record, replayed over the unoptimized nodes (drop each removed
 * key, add each created one, entry by entry), ends at the optimized
 * nodes. So each node is revisited only when
 * something around it changed, and a pass costs time in proportion to
 * the graph plus the rewrites it applies.
 *
 * A rewrite returns 1 when it applied, 0 when it did not (it must then
 * have built nothing), or a negative status.
 */
#ifndef TG_REWRITE_ENGINE_H
#define TG_REWRITE_ENGINE_H

#include <string.h>

#include "ops/op.h"
#include "rewrite/rewrite.h"

typedef struct tg_rw tg_rw;

typedef int (*tg_rw_fn)(tg_rw *rw, tg_node *n);

/* A rewrite: its name (also a tag), its pass, further tags (space
 * separated, may be NULL), and the ops it fires on (space separated; NULL:
 * every op). Passes whose `fn` is NULL at the rule level are global. */
typedef struct tg_rw_rule {
    const char *name;
    const char *pass;
    const char *tags;
    const char *ops;
    tg_rw_fn fn;
} tg_rw_rule;

/* The rules of each pass (passes.c, stabilize.c, specialize.c). */
extern const tg_rw_rule tg_rw_rules[];
extern const int tg_rw_nrules;

/* One more rule, registered at run time, for tests of the tools that
 * check the optimizer (`tgdebug compare` must name a wrong rewrite): it
 * runs in its pass after the table's rules, in every preset but `none`,
 * and its name is a tag like any rule's (so --exclude turns it off).
 * NULL removes it. Not thread-safe; never set by the library itself. */
void tg_rw_test_rule_set(const tg_rw_rule *r);

/* ---- building replacements ---- */
/* A node of op `op` over `in` with attrs (JSON text or NULL), parsed and
 * typed; returns its output 0 (tg_rw_out for the others), or NULL with the
 * error on the engine's context. */
tg_var *tg_rw_op(tg_rw *rw, const char *op, int nin, tg_var *const *in,
                 const char *attrs);
/* The same with nout outputs and attrs a JSON object (borrowed; the node
 * takes a reference) or NULL; returns the node. */
tg_node *tg_rw_node(tg_rw *rw, const tg_op *op, int nin, tg_var *const *in, int nout,
                   json_object *attrs);
/* The same with the op by name and attrs as JSON text (or NULL), for an
 * op whose node lists its outputs (scan): `nout` outputs (ignored when
 * the op fixes the count); returns the node. */
tg_node *tg_rw_node_text(tg_rw *rw, const char *op, int nin, tg_var *const *in,
                         const char *attrs, int nout);
/* The same with attrs a JSON object (borrowed; the node gets a deep copy)
 * or NULL: a node rebuilt elsewhere from another's attrs (a body node
 * moved out of its scan, a scan with edited attrs). Copied, never written
 * out and parsed again: attrs holding bodies nest as deep as the graph
 * file let them, and a text parse has a depth limit of its own. */
tg_node *tg_rw_node_json(tg_rw *rw, const tg_op *op, int nin, tg_var *const *in,
                         const json_object *attrs, int nout);
tg_var *tg_rw_op_json(tg_rw *rw, const tg_op *op, int nin, tg_var *const *in,
                      const json_object *attrs);
tg_var *tg_rw_op1(tg_rw *rw, const char *op, tg_var *x, const char *attrs);
tg_var *tg_rw_op2(tg_rw *rw, const char *op, tg_var *x, tg_var *y);
/* A strong scalar constant. */
tg_var *tg_rw_const(tg_rw *rw, tg_dtype dt, double v);
/* A constant holding `a` (the reference is taken over). */
tg_var *tg_rw_const_array(tg_rw *rw, tg_array *a);
/* Declare another node the current rewrite replaces (for the record and
 * the origins of what it builds), when it dies with the rewrite: one
 * that other readers keep is neither. */
int tg_rw_match(tg_rw *rw, tg_node *n);
/* The node `built`, made by the current rewrite, stands for `replaced`
 * (the node it fired on, or one declared with tg_rw_match) and not for
 * the others (repeatable, for several): where a rewrite moves a node
 * past others a step at a time (switch_sink), the node it moves stands
 * for what it passed, and what it passed only for itself, so that what
 * each node stands for does not grow along the chain. Without it every
 * node built stands for every node replaced. */
int tg_rw_stands_for(tg_rw *rw, tg_node *built, tg_node *replaced);
/* Replace every use of `old` by `newv`. The types must agree (dtype and
 * ndim equal, no contradicting static length): a rewrite that breaks this
 * is a bug, reported as TG_ELOAD naming the rewrite. */
int tg_rw_replace(tg_rw *rw, tg_var *old, tg_var *newv);
tg_fgraph *tg_rw_fgraph(tg_rw *rw);
/* tg_fgraph_toposort for a pass (dead nodes go; the engine's count of
 * them is reset). */
int tg_rw_toposort(tg_rw *rw);
tg_ctx *tg_rw_ctx(tg_rw *rw);
/* Whether the fusion pass may give a composite extra outputs (results
 * also read outside the group): off with the tag fuse_multi_output
 * excluded. */
bool tg_rw_multi_output(const tg_rw *rw);
/* Whether the fusion pass may recompute a cheap producer inside a group
 * rather than read its result: off with fuse_recompute excluded. */
bool tg_rw_recompute(const tg_rw *rw);

/* ---- queries rewrites share ---- */
/* The producer of v when it is op `name`, else NULL. Inline: where `name`
 * is a literal, GCC compares short ones in place ("add", "exp") instead of
 * calling strcmp, a sixth of a million calls in a compile of 100,000
 * nodes. */
static inline tg_node *tg_rw_producer(const tg_var *v, const char *name) {
    return v->owner && !strcmp(v->owner->op->name, name) ? v->owner : NULL;
}
/* v is a constant (possibly a broadcast one) all of whose elements equal
 * val. */
bool tg_rw_is_const_value(const tg_var *v, double val);
/* Only one reader, and not a function output. */
bool tg_rw_single_client(const tg_var *v);
/* Static types equal, every length known. */
bool tg_rw_type_same_known(const tg_type *a, const tg_type *b);
/* An elementwise result over operands that include x has x's run-time
 * shape for sure (no other operand can stretch it). */
bool tg_rw_keeps_shape(const tg_var *x, const tg_var *const *others, int n);
/* The same, where an axis whose length is unknown on either side may
 * still be shown equal: same(o, d, x, dx, ud) says o's axis d has x's
 * axis dx's length for sure (rules.c: axis_of, the same source). */
typedef bool (*tg_rw_axis_same_fn)(const tg_var *o, int d, const tg_var *x, int dx, void *ud);
bool tg_rw_keeps_shape_by(const tg_var *x, const tg_var *const *others, int n, tg_rw_axis_same_fn same,
                          void *ud);

/* Whether running node n does more than compute its outputs, so that it
 * may be neither folded, merged with a twin, nor moved out of a loop: a
 * side effect of its own (print, assert, breakpoint: TG_OPF_SIDE_EFFECT),
 * or, for an op_from_graph or scan, one in its body, at any depth (a
 * print in the body prints once per run of the node). */
bool tg_rw_has_effect(const tg_node *n);

/* Whether node n can raise an error at run time that its static types do
 * not rule out: an integer int_div, mod or pow whose divisor or exponent
 * is not a constant known to be safe (float ones give inf and NaN). */
bool tg_rw_may_raise(const tg_node *n);
/* Whether node n, run, may fail the call where its static types do not
 * rule it out: a side effect (assert) or lazy op; an elementwise op that
 * tg_rw_may_raise, or whose operands' run-time lengths may not
 * broadcast; a dot or matmul whose contracted (or batch) lengths are not
 * known on both sides; every other op but a few that take any input
 * (identity, cast, shape, reductions, transpose). */
bool tg_rw_node_may_fail(const tg_node *n);
/* Whether replacing n's output by keep would leave a check unrun that the
 * unoptimized function makes: n (when elementwise: its broadcasting; a
 * rewrite of another op proves n's own check), and every node that only
 * n's reading keeps alive, are looked at (at most 64), and one that may
 * fail (an
 * assert or other side effect, a tg_rw_may_raise node, operands whose
 * run-time lengths may not broadcast, an op that checks what static types
 * do not settle) makes it true. Rewrites that drop a subexpression (x*y/y,
 * ones_like(cost), x - x, a constant switch's other branch) ask it. */
bool tg_rw_drops_check(const tg_node *n, const tg_var *keep);
/* The same, where the rewrite has shown that the elementwise nodes
 * proven[0..nproven) broadcast at run time (their operands' lengths
 * agree for sure): they may still fail otherwise (tg_rw_may_raise), and
 * the nodes that die with them are looked at as before. */
bool tg_rw_drops_check_proven(const tg_node *n, const tg_var *keep, const tg_node *const *proven, int nproven);

/* ---- the scan rewrites (scanopt.c) ---- */
int tg_rw_scan_inline(tg_rw *rw, tg_node *n);
int tg_rw_scan_hoist(tg_rw *rw, tg_node *n);
int tg_rw_scan_push_seq(tg_rw *rw, tg_node *n);
int tg_rw_scan_keep_last(tg_rw *rw, tg_node *n);
int tg_rw_scan_merge(tg_rw *rw, tg_node *n);
int tg_rw_scan_prune(tg_rw *rw, tg_node *n);
int tg_rw_scan_pull_out(tg_rw *rw, tg_node *n);
int tg_rw_scan_sum_dot(tg_rw *rw, tg_node *n);
int tg_rw_scan_drop_outputs(tg_rw *rw, tg_node *n);
int tg_rw_scan_merge_outputs(tg_rw *rw, tg_node *n);
int tg_rw_slice_product_reuse(tg_rw *rw, tg_node *n);
int tg_rw_scan_reuse_step_product(tg_rw *rw, tg_node *n);
int tg_rw_scan_acc_sum(tg_rw *rw, tg_node *n);
int tg_rw_scan_drop_recurrent(tg_rw *rw, tg_node *n);

/* ---- global passes ---- */
int tg_rw_merge(tg_rw *rw);
/* The hash merge files node n under (its op, attrs and inputs; equal
 * nodes hash equal). For tests. */
uint64_t tg_rw_merge_hash(const tg_node *n);
int tg_rw_inplace(tg_rw *rw);
int tg_rw_fusion(tg_rw *rw);
/* Record a global rewrite's application by hand: the caller replaced
 * `removed` by the node `created` (may be NULL; may be one of `removed`,
 * a node that lives on, as merge's survivor and an in-place node do).
 * Prune first: the entry also lists as removed every node tg_rw_prune
 * marked dead since the last entry. */
int tg_rw_record(tg_rw *rw, const char *name, tg_node *const *removed,
                 int nremoved, tg_node *created);
/* Look at n again in this local pass, next (before the rest of the
 * graph): for a rule that declined because of a node near n, when that
 * node goes. Nothing when n is queued already or the pass has yet to
 * reach it. */
int tg_rw_requeue(tg_rw *rw, tg_node *n);
/* Mark a node dead and detach it when none of its outputs is used, with
 * the producers that only it read; the next record entry lists them all
 * as removed (but the candidates the current rewrite built and
 * dropped). */
void tg_rw_prune(tg_rw *rw, tg_node *n);
static inline bool tg_rw_dead(const tg_node *n) { return n->rwflags & TG_NODE_DEAD; }
/* The pass currently running, for record entries of global passes. */
const char *tg_rw_pass(const tg_rw *rw);

#endif
