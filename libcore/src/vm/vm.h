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

#include "backend/backend.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "tg/function.h"
#include "rewrite/rewrite.h"

/* Intermediates whose buffer is at most this many bytes stay in their
 * slot between calls (reused by the next call without allocating); larger
 * ones are freed after their last reader, as Theano's VM with GC did. */
#define TG_VM_KEEP_BYTES 4096

typedef struct tg_vm_node {
    tg_node *node;
    const tg_op *op;
    tg_kernel_fn run; /* op->run, or the device kernel placement chose */
    int *in_slots; /* node->nin entries */
    int out_slot;  /* first of node->nout consecutive slots */
    int *free_slots;
    int nfree;
} tg_vm_node;

struct tg_function {
    char *name;
    tg_fgraph *fg;
    int nslots;
    tg_array **slots;
    tg_var **slot_var; /* the variable each slot holds */
    int nsched;
    tg_vm_node *sched;
    int *in_slots;  /* function inputs */
    int *out_slots; /* outputs, then update values */
    int nshared;
    int *shared_slots; /* slots bound to shared state at each call */
    tg_shared **shared; /* parallel to shared_slots */
    tg_shared **upd_shared; /* fg->nupd entries */
    int max_nin;
    tg_array **scratch_in;
    tg_hooks hooks;
    bool hooked;
    bool no_gc;
    uint64_t ncalls;
    tg_opt_record record; /* what the optimizer did */
    double compile_seconds;
    tg_kernel_fn *kernels; /* from placement, until linked (NULL: CPU) */
    bool on_device;        /* some nodes run on a device */
};

#endif
