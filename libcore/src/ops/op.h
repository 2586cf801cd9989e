/* Private: the op interface. One op is one tg_op value, defined in its
 * family's file (elemwise.c, reduce.c, blas.c, shape.c, ...) and listed
 * once in its family's .def file (elemwise.def, ...), which ops.def
 * includes to build the table. Adding an op touches its family's file and
 * .def, nothing else.
 */
#ifndef TG_OP_INTERNAL_H
#define TG_OP_INTERNAL_H

#include "graph/graph.h"

enum {
    TG_OPF_ELEMWISE = 1u << 0,   /* broadcasting elementwise op */
    TG_OPF_FLOAT_ONLY = 1u << 1, /* computes in tg_dtype_float_of() */
    TG_OPF_NONDIFF = 1u << 2,    /* gradient is zero */
    TG_OPF_DERIVED = 1u << 3,    /* grad/rop/lop: expanded at load */
    TG_OPF_LAZY = 1u << 4,       /* ifelse-like: VM evaluates lazily */
    TG_OPF_OPEN_ATTRS = 1u << 5, /* unknown attr keys allowed */
    TG_OPF_SIDE_EFFECT = 1u << 6, /* print/assert/breakpoint: never pruned
                                     by merge, never constant-folded */
    /* every output may be written over an input of its own (of
     * inplace_inputs): the kernels read every input at a position before
     * they write any output there (composite) */
    TG_OPF_INPLACE_ANY_OUTPUT = 1u << 7,
    /* its attrs are `axis` (a set of axes: after infer, what
     * a.axis_mask says), `keepdims` and `ddof` and nothing else, so two
     * nodes over the same inputs whose masks, keepdims and ddof agree
     * compute the same, however the axes were written (0, [0], -2;
     * null and every axis): merge compares and hashes those, not the
     * attrs' text (reductions, softmax, log_softmax) */
    TG_OPF_AXIS_SET = 1u << 8
};

struct tg_gb; /* the gradient builder, grad/grad.h */

/* TG_VM_KEEP_BYTES: tensor/tensor.h */

struct tg_op {
    const char *name;
    int nin_min, nin_max; /* nin_max -1: unbounded */
    int nout;             /* -1: as many as the node lists (checked by
                             parse_attrs, e.g. split's n) */
    unsigned flags;
    /* The attribute keys the op knows, NULL-terminated (NULL: none). The
     * loader rejects any other key before parse_attrs runs. */
    const char *const *attr_keys;
    /* Read node->attrs (a JSON object, or NULL when absent) into node->a,
     * add the defaults to node->attrs so that it is canonical, and check
     * them. NULL: the op has no attributes. Errors name the attr
     * ("attrs.axis: expected an integer, null or a list of integers"). */
    int (*parse_attrs)(tg_node *n, tg_ctx *ctx);
    /* parse_attrs for node c whose attrs are node n's own object (a
     * clone; a restored node with the attrs text of an earlier one), n
     * parsed: c's op-specific data taken from n's instead of read again
     * from the attrs. NULL: parse_attrs runs. */
    int (*share_extra)(tg_node *c, const tg_node *n, tg_ctx *ctx);
    /* Set the type of every output from the inputs' types; resolve weak
     * inline scalars (tg_weak_resolve); normalise axes. Errors name the
     * input ("inputs[1] 'w': expected float32 or float64, got int8"). */
    int (*infer)(tg_node *n, tg_ctx *ctx);
    /* The CPU kernel. in[i]: the input arrays (borrowed). out[i]: on
     * entry the array this output held after the previous call, or NULL;
     * on return a reference to the result (use tg_array_prepare to reuse
     * the old one, or release it and store a view). The VM checks the
     * results against the static types afterwards. Errors are one line
     * without the node (the VM adds it). */
    int (*run)(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx);
    /* Estimated cost of one run, for the profiler. May be NULL. */
    void (*cost)(const tg_node *n, tg_array *const *in, tg_array *const *out,
                 double *flops, double *bytes);
    /* Output 0 is a view of input view_of (-1: not a view). */
    int view_of;
    /* For ops that are not elementwise: the inputs whose buffer output 0
     * may overwrite when a node says `inplace` (bit i: input i; gemm's z).
     * Elementwise ops may overwrite any input of the output's type. */
    unsigned inplace_inputs;
    /* Ops that may overwrite a shared variable's value in place (gemm,
     * gemv, ger: an SGD step's update of its weights; see
     * tg_inplace_shared_ok): with in[] the node's inputs, whether the
     * kernel will run in place on input 0 and cannot fail (the operands'
     * dtypes, shapes and layouts are ones it takes as they are, input 0 is
     * the kernel's to overwrite). The VM writes shared values in place
     * only through such runs, last, so that a call that fails leaves them
     * as they were. NULL: never on a shared value. */
    bool (*commit_ready)(const tg_node *n, tg_array *const *in);
    /* Frees a->extra. */
    void (*free_extra)(tg_attrs *a);
    const void *impl; /* family data */
    /* The vector-Jacobian product: given the gradients of the outputs
     * (gout[i], NULL for a zero gradient), build nodes with the gradient
     * of each input into gin[j] (NULL: no gradient: integer inputs, or
     * inputs the op is not differentiable in). NULL for ops without a
     * gradient rule yet (differentiating through them is an error);
     * TG_OPF_NONDIFF ops give zero gradients without one. */
    int (*grad)(struct tg_gb *b, tg_node *n, tg_var *const *gout, tg_var **gin);
};

/* The table. */
const tg_op *tg_op_find(const char *name);
/* The op name from FORMAT.md nearest to `name` (for "did you mean"). */
const char *tg_op_nearest(const char *name);
/* True for a name FORMAT.md defines but this build does not implement
 * yet. */
bool tg_op_is_planned(const char *name);
int tg_op_count(void);
const tg_op *tg_op_at(int i);

/* ---- helpers for ops ---- */

/* v as the file wrote it (JSON text, owned by v), for messages: an
 * integer of 2^63 or more reads back from json-c clamped to 2^63 - 1. */
const char *tg_json_text(json_object *v);
/* Attribute readers: each returns 0 or a TG_ELOAD error naming
 * "attrs.<key>". When the key is absent the default is written into
 * n->attrs (creating it when NULL). */
int tg_attr_int(tg_node *n, const char *key, bool has_default, int64_t def,
                int64_t *out, tg_ctx *ctx);
int tg_attr_bool(tg_node *n, const char *key, bool def, bool *out,
                 tg_ctx *ctx);
/* [a, b], two integers from lo to INT_MAX; def (NULL: required) when
 * absent. tg_json_int_pair reads such a pair from v (false when v is not
 * one). */
int tg_attr_int_pair(tg_node *n, const char *key, const int64_t *def, int64_t lo,
                     int64_t *out, tg_ctx *ctx);
bool tg_json_int_pair(json_object *v, int64_t lo, int64_t *out);
int tg_attr_dtype(tg_node *n, const char *key, tg_dtype def, tg_dtype *out,
                  tg_ctx *ctx);
/* An enumerated string; returns its index in `choices` (NULL-terminated). */
int tg_attr_enum(tg_node *n, const char *key, const char *const *choices,
                 int def, int *out, tg_ctx *ctx);
int tg_attr_string(tg_node *n, const char *key, const char *def, char **out,
                   tg_ctx *ctx);
/* `axis`: null | int | [int] into n->a (axis_null, naxes, axes,
 * axis_is_list). allow_list false: an int (or null when allow_null). */
int tg_attr_axis(tg_node *n, const char *key, bool allow_null,
                 bool allow_list, bool has_default, tg_ctx *ctx);
/* Normalise n->a.axes against ndim into n->a.axis_mask; out of range or
 * repeated is a TG_ELOAD error naming attrs.axis. */
int tg_axes_normalize(tg_node *n, int ndim, tg_ctx *ctx);

/* Weak scalars (FORMAT.md s5): the dtype that the strong operands of an
 * elementwise node promote to (NumPy), with the weak inline scalars then
 * taking it (a weak int meeting an int array must fit: a TG_ETYPE error
 * otherwise). Converts the weak constants' values in place and clears
 * their weak flag. Returns the common dtype through *out. */
int tg_weak_resolve(tg_node *n, int first, int count, tg_dtype *out,
                    tg_ctx *ctx);
/* Make a weak inline scalar at input i take dtype dt (for non-elementwise
 * ops: gemm's alpha takes z's dtype...). No-op for strong inputs. */
int tg_weak_take(tg_node *n, int i, tg_dtype dt, tg_ctx *ctx);

/* Static broadcasting of input types first..first+count-1 into t->ndim and
 * t->shape (unknown lengths stay -1 unless another input fixes them). A
 * static mismatch is a TG_ESHAPE error naming the inputs. */
int tg_infer_broadcast(tg_node *n, int first, int count, tg_type *t,
                       tg_ctx *ctx);
/* The run-time error of operands that do not broadcast, in the words of
 * every elementwise kernel (CPU, composite, GPU): "shapes (2, 3) and (4,)
 * do not broadcast". Returns TG_ESHAPE. */
int tg_broadcast_error(const tg_array *const *in, int nin, tg_ctx *ctx);
/* The batch (leading) dimensions of two stacks of matrices broadcast as
 * NumPy's gufuncs broadcast them (matmul, solve): a's ka lengths against
 * b's kb, aligned from the right, a length 1 stretching; at load an
 * unknown length (-1) takes the other's unless that is 1 (the run checks
 * it). Returns the number of batch dimensions written to out, or -1 with
 * *ja and *jb the dimensions (of a and of b) whose lengths differ. */
int tg_batch_broadcast(int ka, const int64_t *a, int kb, const int64_t *b, int64_t *out, int *ja, int *jb);
/* The cost estimate's flops per output element of elementwise node n: its
 * op's weight in elemwise.c's table (exp 10, sigmoid 12, add 1...), times
 * nin - 1 for an add or mul of more than two inputs. 1 for a node of any
 * other op. The op's cost function and a composite's (each body node's
 * weight, summed) both read it. */
double tg_elemwise_flops(const tg_node *n);
/* Whether node n can report an error at run time once typed: integer
 * int_div and mod by a divisor that may be 0, integer pow by an exponent
 * that may be negative (elemwise.c's loop errors; a constant operand is
 * looked at). No other elementwise op reports one, but for running out
 * of memory. false for a node of any other op. */
bool tg_elemwise_may_fail(const tg_node *n);

/* Set output i's type. */
static inline void tg_set_out_type(tg_node *n, int i, tg_dtype dt, int ndim,
                                   const int64_t *shape) {
    tg_type *t = &n->outputs[i]->type;
    t->dtype = dt;
    t->ndim = ndim;
    for (int k = 0; k < ndim; k++) t->shape[k] = shape ? shape[k] : -1;
}

/* For kernels that may overwrite input k (the node's `inplace` says so):
 * when that input is nobody else's, C-contiguous and larger than what the
 * VM keeps from call to call, make *slot a reference to it and return
 * true: the kernel then updates it where it lies instead of copying. */
bool tg_op_take_input(const tg_node *n, tg_array *const *in, int k, tg_array **slot);

/* OpenBLAS's thread count is the process's (its pthreads build) or the
 * calling thread's OpenMP count (its OpenMP build): tg_blas_single sets
 * it to 1 (when it is more) for calls that its threads only slow down,
 * and tg_blas_restore puts back what was there (ops/blas.c). Two threads
 * doing so at once can only leave the count where it was.
 * tg_blas_shares_omp: the OpenBLAS loaded is its OpenMP build, whose
 * threads are GNU OpenMP's, the ones tg's parallel loops use. */
typedef struct tg_blas_guard {
    int saved;
} tg_blas_guard;
tg_blas_guard tg_blas_single(void);
void tg_blas_restore(tg_blas_guard g);
bool tg_blas_shares_omp(void);
/* tg_blas_single for a product of M x K by K x N too small for OpenBLAS's
 * threads to pay off (a matrix-vector product or rank-1 update, one of M,
 * N, K being 1, from a million elements; a product from 8 million
 * multiply-adds: ops/blas.c), else nothing. */
tg_blas_guard tg_blas_for(double M, double N, double K);

/* The sum of x over the axes in mask (bits), as the `sum` op computes it
 * (pairwise in float64, threads that do not change the bits), into *out
 * of dtype od and shape oshape: the kept axes' lengths in order, with 1s
 * anywhere (ops/reduce.c). */
int tg_reduce_sum_into(const tg_array *x, uint32_t mask, tg_dtype od, int ond, const int64_t *oshape, tg_array **out,
                       tg_ctx *ctx);
/* sum_to(g, x)'s axes of g to sum (bits): those x lacks, and those where
 * x has length 1 and g another; TG_ESHAPE when g cannot be summed to x's
 * shape (grad/grad.c; the GPU's sum_to too). */
int tg_sum_to_mask(const tg_array *g, const tg_array *x, uint32_t *mask, tg_ctx *ctx);

/* The value of a constant input (NULL when input i is not a constant). */
static inline const tg_array *tg_const_input(const tg_node *n, int i) {
    tg_var *v = n->inputs[i];
    return v->kind == TG_VAR_CONSTANT ? v->value : NULL;
}

#endif
