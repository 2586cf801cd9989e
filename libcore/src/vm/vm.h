/* Private: the linked function and its VM.
 *
 * Linking gives every variable of the function graph one storage slot;
 * the outputs of a node get consecutive slots so that a kernel writes
 * straight into them. For each scheduled node the VM keeps the slots of
 * its inputs and the list of slots whose last reader it is, to free them
 * after it runs.
 */
#ifndef TG_VM_INTERNAL_H
#define TG_VM_INTERNAL_H

#include <stdatomic.h>

#include "backend/backend.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "tg/function.h"
#include "rewrite/rewrite.h"


typedef struct tg_vm_node {
    tg_node *node;
    const tg_op *op;
    tg_kernel_fn run; /* op->run, or the device kernel placement chose */
    int *in_slots; /* node->nin entries */
    int out_slot;  /* first of node->nout consecutive slots */
    int *free_slots;
    int nfree;
} tg_vm_node;

/* A control point of the schedule: lazy ifelse (graph/regions.c). The
 * nodes that only one branch of an ifelse needs are laid out as two
 * blocks just before it, [then-block][else-block][ifelse], so that
 * schedule positions stay one per node. Before the node at position `at`
 * runs, the VM acts on the control points there, in order:
 *   TG_CTL_BRANCH at the start of the then-block: when the condition (the
 *     value in cond_slot) is false, jump to `target` (the else-block, or
 *     the ifelse when that block is empty);
 *   TG_CTL_SKIP at the end of the then-block: jump over the else-block to
 *     `target`, the ifelse.
 * After a jump the next control point is ctl[next] (those in the skipped
 * range never fire), and the slots whose last reader was skipped
 * (free_slots) are released as that reader would have. A sentinel with
 * at = nsched ends the list. */
enum { TG_CTL_BRANCH = 1, TG_CTL_SKIP = 2 };
typedef struct tg_vm_ctl {
    int at, kind, cond_slot, target, next;
    int *free_slots;
    int nfree;
    bool fetched; /* the kernels of the block it starts (a branch: the
                     then-block; a skip: the else-block after it) were
                     compiled together when it first ran */
} tg_vm_ctl;

struct tg_function {
    char *name;
    tg_fgraph *fg;
    int nslots;
    tg_array **slots;
    tg_var **slot_var; /* the variable each slot holds */
    int nsched;
    tg_vm_node *sched;
    int *sched_in;   /* the nodes' in_slots, one after another */
    int *sched_free; /* the nodes' free_slots, one after another */
    tg_vm_ctl *ctl; /* nctl control points and the sentinel */
    int nctl;
    int *in_slots;  /* function inputs */
    int *out_slots; /* outputs, then update values */
    int nshared;
    int *shared_slots; /* slots bound to shared state at each call */
    tg_shared **shared; /* parallel to shared_slots */
    bool *shared_dev;   /* parallel to shared_slots: bound to the device
                           copy (resident); NULL when nothing is */
    tg_shared **upd_shared; /* fg->nupd entries */
    /* The shared variables a call claims (tg_shared.users) before it
     * runs: the nlock_write it updates, then the others it reads. */
    tg_shared **lockset;
    int nlock, nlock_write;
    /* Shared values overwritten in place (graph.h, tg_node_commits): the
     * nodes from schedule position commit_at on each make a shared
     * variable's update over its value (nsched: none). A call lends such
     * a value to its slot (the shared state's reference moves there, so
     * that the kernel finds it its own) when nothing else holds it, runs
     * the schedule up to commit_at, takes the other updates (what can
     * fail), runs the committers that could not work in place, copying,
     * and only then those that can, which cannot fail: a failed call has
     * written no shared value. */
    int commit_at;
    int *lend;          /* per entry of shared[]: the position of the node
                           that overwrites it, or -1; NULL when none */
    bool *lent;         /* per entry of shared[]: lent for this call */
    int *commit_shared; /* per committer (position - commit_at): the entry
                           of shared[] it overwrites */
    int *commit_upd;    /* per committer: the update it makes */
    bool *commit_ready; /* per committer: runs in place this call */
    bool *upd_commits;  /* per update: a committer makes it */
    int max_nin;
    tg_array **scratch_in;
    tg_hooks hooks;
    bool hooked;
    bool hooks_device; /* the hooks take device arrays as they are */
    /* Hooks that vouch for committers (commit_at above): a committer that
     * could run in place does so when this says yes, and the hooks then
     * let that node's run pass. The profiler's say yes to all (they only
     * watch), the NaN guard's when it has proved the result clean. NULL
     * with hooks set: nothing is lent. */
    bool (*commit_ok)(void *ud, const tg_function *f, int node, tg_array *const *inputs);
    bool no_gc;
    uint64_t ncalls;
    tg_opt_record record; /* what the optimizer did */
    char **out_ids; /* the declared output ids: rewrites may replace an
                       output variable by another (a folded constant) */
    double compile_seconds;
    /* A restored function's rewrite and pass names (record entries point
     * into it; the optimizer's own are static strings): one block, owned. */
    char *strpool;
    tg_kernel_fn *kernels; /* from placement, until linked (NULL: CPU) */
    bool on_device;        /* some nodes run on a device */
    atomic_bool busy;      /* a call is running (tg_function_call) */
    bool kernels_fetched;  /* the first call (a scan body's first run) compiled
                              the missing kernels of the nodes it is sure to
                              run (vm/function.c, prefetch_kernels) */
    tg_bufpool pool;       /* buffers freed by its calls, for the next (tensor.h) */
};

/* Link an already optimized function graph (taken over, freed on
 * failure) into a function named `name`: what tg_function_compile does
 * after the optimizer, and what restoring a .tgf file does instead of
 * compiling. on_dev (NULL, or one flag per node of fg in schedule order)
 * marks the nodes of a placed function that ran device kernels
 * (tg_place_relink): they run on the device again where it can; why
 * (when not NULL, why_size bytes) then receives the reason it could not,
 * else "". */
tg_function *tg_function_link_fgraph(const char *name, tg_fgraph *fg, bool no_gc, const bool *on_dev,
                                     char *why, size_t why_size, tg_ctx *ctx);
/* Whether node k of f's schedule runs a device kernel (one of placement's,
 * not the op's own: a view's header-only kernel counts as the host's). */
bool tg_function_node_on_device(const tg_function *f, int k);

/* Hooks that read device arrays as they are, for the library's own tools
 * (the profiler times device nodes with events, the NaN guard reduces on
 * the device): the VM then hands them no host copies. tg_function_set_hooks
 * turns this off again, so a user's hooks always see host values. */
void tg_function_set_hooks_device(tg_function *f, const tg_hooks *hooks);

/* Hooks that only watch (the profiler on the host: they never fail or
 * stop the call), so that the call runs as it would without them: it
 * still overwrites shared values in place (commit_at above), which
 * hooks that may stop it (a debugger's, a user's) turn off; they vouch
 * for every committer (tg_function_set_hooks_commit, below).
 * tg_function_set_hooks turns this off again. */
void tg_function_set_hooks_observer(tg_function *f, const tg_hooks *hooks);

/* Hooks with commit_ok (above): shared values are lent as without hooks,
 * and each committer that could overwrite its value in place asks
 * commit_ok, before it runs, whether it may; when it may, the hooks
 * promise not to fail that node (its before and after hooks still run).
 * A no copies the value first, as hooked calls do. On the host only (a
 * placed function lends nothing). tg_function_set_hooks turns this off
 * again. */
void tg_function_set_hooks_commit(tg_function *f, const tg_hooks *hooks,
                                  bool (*commit_ok)(void *ud, const tg_function *f, int node,
                                                    tg_array *const *inputs));

/* Run f's schedule on the values its input slots already hold: no input
 * checks, no shared values, no updates, no output references. A scan
 * runs its body this way once per step, on views it moves along the rows
 * (ops/scan.c); the caller owns what it put in the slots. */
int tg_function_run_bound(tg_function *f, tg_ctx *ctx);

/* A new value a caller gives for shared state of type t (what: "shared
 * variable 'w'", "swap 'w'"), checked as a call checks its inputs: a copy,
 * converted when the cast is safe (TG_ETYPE otherwise), into *out;
 * TG_ESHAPE naming the shape for one that contradicts t's, TG_EINVAL for
 * no array. */
int tg_shared_value_take(const tg_type *t, const char *what, const tg_array *a, tg_array **out, tg_ctx *ctx);

#endif
