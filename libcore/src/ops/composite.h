/* Private: the `composite` op (FORMAT.md s7): several elementwise ops fused
 * into one loop, and the compiled-kernel cache behind it.
 *
 * A composite node holds its body (a graph of elementwise ops over 0-d
 * variables) in attrs.body. Its outputs all have the broadcast shape of
 * its inputs and the dtypes of the body's outputs. It runs either
 *   - compiled: the body becomes C source (one loop over the broadcast
 *     index space, a contiguous fast path, `omp parallel for simd` above
 *     TG_COMPOSITE_PAR_MIN elements), built by the system C compiler into a
 *     shared object, dlopen'ed, and kept on disk in the kernel cache; the
 *     kernel is looked up lazily, at the node's first run, once per
 *     distinct body per process; or
 *   - interpreted: the broadcast iteration in blocks of
 *     TG_COMPOSITE_BLOCK elements, each body op applied to the block with
 *     the elementwise ops' own vectorised loops.
 * Both give the values of the unfused ops: arithmetic bit for bit (no FMA
 * contraction); transcendental functions through the same libm/libmvec
 * functions (identical where the kernel and vmath.c pick the same libmvec
 * variant for the CPU; libmvec's documented 4 ulp otherwise).
 * Environment: TG_CC (compiler, default cc), TG_CACHE_DIR (see
 * tg_kcache_dir), TG_COMPOSITE=interp (no kernels).
 */
#ifndef TG_COMPOSITE_H
#define TG_COMPOSITE_H

#include <stdio.h>

#include "ops/op.h"

#define TG_COMPOSITE_BLOCK 1024
#define TG_COMPOSITE_PAR_MIN 65536 /* TG_PARALLEL_MIN: as the elementwise ops (smaller
                                       loops lose more to waking threads, and on a
                                       busy machine to OpenBLAS's spinning ones) */

/* Build a composite node that stands for `nodes`, a connected set of
 * elementwise nodes of one fgraph, given in topological order.
 *
 *   inputs[0..nin-1]   the variables from outside the set that the set
 *                      reads, in the order the composite takes them
 *                      (its inputs; each read only through elementwise
 *                      broadcasting, as the nodes did). A 0-d constant
 *                      the set reads need not be listed: it is copied
 *                      into the body. Any other variable read from
 *                      outside and not listed is TG_EINVAL.
 *   outputs[0..nout-1] the variables produced in the set that are needed
 *                      outside it (by other nodes, or as fgraph outputs),
 *                      in the order the composite gives them.
 *
 * Returns a new node (owned by the caller, not added to any graph), typed,
 * whose inputs are `inputs` (borrowed pointers: the node is wired to them
 * but they are not told: tg_fgraph_add_node records the clients) and whose
 * outputs are new variables, one per outputs[k], with the same id, name
 * and type (so node keys stay stable; replace outputs[k] by the new
 * node's outputs[k] with tg_fgraph_replace). The node's origins are the
 * union of the fused nodes' origins (their keys when they had none), its
 * trace that of the node producing outputs[0]. attrs.body is a body in
 * the interchange format: saved and loaded like any attribute.
 *
 * Errors (ctx set, NULL returned): TG_EINVAL for a node that is not
 * elementwise (or is itself a composite), nodes not in topological order,
 * an output not produced by the set, an unlisted outside variable, more
 * than TG_COMPOSITE_MAX_IO inputs plus outputs; TG_ETYPE when the body
 * would not give an output its type; TG_ENOMEM. */
#define TG_COMPOSITE_MAX_IO 64

/* The generated kernels' float-to-integer conversions (C source, each
 * function qualified by Q: "static inline" for the CPU's, the device
 * qualifier for NVRTC's): NaN and out-of-range values give what
 * tensor/cast.c gives (x86's scalar conversions), on any device. */
#define TG_COMPOSITE_F2I(Q)                                                                              \
    Q " int32_t tg_f2i32(double v) {\n"                                                                  \
      "    return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : (int32_t)(-2147483647 - 1); }\n"  \
    Q " int64_t tg_f2i64(double v) {\n"                                                                  \
      "    return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v\n"               \
      "                                                                  : (int64_t)(-9223372036854775807ll - 1); }\n" \
    Q " uint64_t tg_f2u64(double v) {\n"                                                                 \
      "    return v >= 9223372036854775808.0 ? (uint64_t)tg_f2i64(v - 9223372036854775808.0) ^ (1ull << 63)\n" \
      "                                      : (uint64_t)tg_f2i64(v); }\n"
tg_node *tg_composite_node_new(tg_node *const *nodes, int nnodes,
                               tg_var *const *inputs, int nin,
                               tg_var *const *outputs, int nout,
                               tg_ctx *ctx);
/* The same, with the node and its outputs made in arena (the fgraph's
 * that it will join; NULL: the allocator). memo (may be NULL): the
 * attrs that nodes of this fgraph already have, by signature, which a new
 * node with the same structure shares (a node otherwise gets a copy of
 * what an earlier group of the same structure made, in any function: no
 * json object is shared between functions, which may be used and freed
 * in different threads). */
typedef struct tg_composite_memo tg_composite_memo;
tg_composite_memo *tg_composite_memo_new(void);
/* Releases the memo's references (in the thread that built with it). */
void tg_composite_memo_free(tg_composite_memo *m);
/* How many fused groups the process-wide table of group signatures holds
 * now (for tests: entries whose bodies no node reads go as it grows). */
int tg_composite_sig_entries(void);
tg_node *tg_composite_node_new_in(struct tg_arena *arena, tg_composite_memo *memo,
                                  tg_node *const *nodes, int nnodes,
                                  tg_var *const *inputs, int nin,
                                  tg_var *const *outputs, int nout, tg_ctx *ctx);

/* The inputs and outputs of a set of fgraph nodes for
 * tg_composite_node_new, from the fgraph's client lists: *inputs, the
 * variables the nodes read that none of them makes (0-d constants left
 * out: they go into the body), in the order first read; *outputs, the
 * variables the nodes make that a node outside the set, or the fgraph's
 * outputs, read, in node order. Both arrays are tg_malloc'ed, owned by
 * the caller (tg_free), possibly empty (*outputs empty: nothing outside
 * needs the set). TG_ENOMEM only. */
int tg_composite_io(tg_node *const *nodes, int nnodes, tg_var ***inputs,
                    int *nin, tg_var ***outputs, int *nout, tg_ctx *ctx);

/* Decide the kernel source of each composite among nodes[0..n-1] (other
 * nodes are skipped) that has not run yet and that next(ud, k) gives
 * (the first position at or after k to look at, n or more for none;
 * NULL: every one; asked in increasing k from 0, in two passes at most), as its
 * first run would, and compile the missing kernels together
 * (tg_kcache_prefetch) rather than one after another at their first
 * runs. The caller leaves out nodes that run on a device and those its
 * call may not run (a lazy ifelse's branches). Nothing when the
 * interpreter is forced. Allocates nothing but the nodes' sources (made
 * as their runs would) unless two kernels or more are missing. TG_OK,
 * also when a compile failed (the node's first run reports it); TG_ENOMEM
 * with "out of memory ..." in ctx when an allocation failed (a source,
 * the list, the kernel cache's records): what was done stays done, the
 * rest is tried again by the next call. */
int tg_composite_prefetch(tg_node *const *nodes, int n, int (*next)(void *ud, int k), void *ud, tg_ctx *ctx);

/* How this node runs: 1 compiled kernel, 0 interpreter, -1 not decided
 * yet (it has not run). For tests and tools. */
int tg_composite_node_mode(const tg_node *n);

/* The generated C source of a composite node's body (borrowed), or NULL
 * when the body has an op the code generator does not handle (integer
 * division, modulo and power, gammaln, digamma, trigamma, float16): such bodies
 * always run in the interpreter. */
const char *tg_composite_node_source(const tg_node *n);

/* ---- for a device backend (backend/cuda/nvrtc.c) ---- */

/* The node's body (borrowed; NULL when n is not a parsed composite): 0-d
 * variables, elementwise nodes, fg->inputs in the node's input order. */
const tg_fgraph *tg_composite_node_body(const tg_node *n);
/* Whether composite n places every output it is told to over an input
 * (n->inplace): with one output, or when every body output is a value the
 * body's nodes compute. The interpreter writes a block's outputs one by
 * one from their body values; were one an input's own memory (a body
 * output that is an input, or an identity of one: a body a frontend
 * wrote), an output written over that input first would change it. Else
 * none of its outputs is placed. */
bool tg_composite_places_any_output(const tg_node *n);

/* The C type the generated code uses for dt ("float", "int32_t", bool is
 * "uint8_t"), or NULL when the code generator has none (float16). */
const char *tg_composite_ctype(tg_dtype dt);

/* Append to s the statements that compute every variable of body fg, as
 * the CPU kernel does: the input with body index i must be in scope as a
 * local `v<i>`; each node output becomes `const <ctype> v<index> = ...;`
 * (0-d constants too). The code is C that is also valid CUDA C++ given the
 * helpers of the CPU kernel's prelude (tg_sigmoid_f/d, tg_softplus_f/d,
 * tg_clip_<ctype>), the libm names and __builtin_nan/__builtin_inf. False
 * when the body has an op or dtype the generator does not handle (s may
 * hold part of the code then). */
bool tg_composite_body_emit(tg_str *s, const tg_fgraph *fg);
/* The same, and float16 variables too: they are `float` locals holding
 * float16 values; each node computes as the CPU interpreter's elemwise
 * kernels do (float16 in float32) and rounds a float16 result once, with
 * `float tg_h(float)` and `float tg_hd(double)` (round to nearest even),
 * which the includer defines. */
bool tg_composite_body_emit_half(tg_str *s, const tg_fgraph *fg);

/* A slot in the node for a device backend's compiled kernel (NULL until
 * set). The backend owns what it stores and keeps it for the life of the
 * process; the node only forgets the pointer when it dies. */
void *tg_composite_node_dev_get(const tg_node *n);
void tg_composite_node_dev_set(const tg_node *n, void *k);

/* Force the interpreter for every composite of this process (true), or let
 * compiled kernels be used (false, the default). The environment variable
 * TG_COMPOSITE=interp does the same at start. For tests and benchmarks. */
void tg_composite_force_interp(bool on);

/* ---- the kernel cache (kcache.c) ---- */

/* The kernel signature: n elements; p[k] and s[k] (bytes) for the
 * outputs, then the inputs. */
typedef void (*tg_kernel_fn)(int64_t n, char **p, const int64_t *s);

/* The kernel for `src`: from this process's map, else from the disk cache,
 * else compiled (with the cache's lock held, so that processes compiling
 * the same source at once compile it once). NULL when no compiler works
 * (TG_CC names none, or the compile fails): then *why says why (static
 * or thread-local text, may be NULL). */
tg_kernel_fn tg_kcache_get(const char *src, const char **why);

/* Whether tg_kcache_prefetch would compile src's kernel: 1 when there
 * is a compiler and the kernel is neither in this process's map, nor a
 * compile the prefetch saw fail, nor in the folder with its footer (a
 * link there counts as there: tg_kcache_get refuses it); else 0; -1 when
 * out of memory (probing the compiler, once per process). Reads the
 * footer only (tg_kcache_get checks the whole file before it loads it)
 * and allocates nothing once the compiler is probed. */
int tg_kcache_wanted(const char *src);

/* Compile now the kernels of srcs[0..n-1] (borrowed) that are neither in
 * this process's map nor on disk, several at once (TG_CC_JOBS compilers,
 * by default one per CPU this process may use), under the cache's lock,
 * each as tg_kcache_get would; none is loaded: tg_kcache_get finds them
 * on disk. Silent: nothing when there is no compiler or usable folder,
 * or fewer than two to compile; a compile that fails is reported by the
 * tg_kcache_get of its source (once, without compiling again). 0, or -1
 * when an allocation failed (what compiled stays in the folder; a job
 * that failed for want of memory is not recorded as failed). The caller
 * checks TG_COMPOSITE=interp (the composites' tg_composite_prefetch
 * does). */
int tg_kcache_prefetch(const char *const *srcs, int n);

/* The cache folder: TG_CACHE_DIR, else $XDG_CACHE_HOME/tg, else
 * $HOME/.cache/tg (malloc'ed through tg_malloc; NULL when none can be
 * named). */
char *tg_kcache_dir(void);

/* Counters of this process: compiler runs, kernels loaded from disk
 * without compiling, look-ups answered from the in-memory map. */
typedef struct tg_kcache_stats {
    long compiles, disk_hits, memory_hits, failures;
    long compiler_runs; /* `$CC --version` run for the compiler's identity */
} tg_kcache_stats;
tg_kcache_stats tg_kcache_stats_get(void);

/* Forget the in-memory map (the shared objects stay loaded) and the
 * compiler's identity, so that the next look-up goes to the disk, as in a
 * new process. Only for tests, when no composite node
 * of the process holds a kernel any more. */
void tg_kcache_forget(void);
/* How many times tg_kcache_forget ran: what a kernel remembered outside
 * the cache was looked up in. */
unsigned long tg_kcache_generation(void);

/* One entry of the disk cache: a CPU kernel (<hash>.so and <hash>.c) or
 * a GPU kernel compiled by NVRTC (<hash>.cubin or <hash>.ptx, and
 * <hash>.cu; backend/cuda/nvrtc.c). */
typedef struct tg_kcache_entry {
    char hash[33];
    int64_t bytes;       /* compiled code + source */
    double age_seconds;  /* since the compiled code was written or last
                            loaded (at most an hour off) */
    char first_line[160]; /* of the source */
    char kind[24];       /* "cpu", or "cuda " and the NVRTC target
                            ("cuda sm_90", "cuda compute_90") */
} tg_kcache_entry;

/* The entries of dir, both kinds (*out owned by the caller, tg_free). A
 * folder that does not exist has no entries. TG_EIO when it cannot be
 * read. */
int tg_kcache_list(const char *dir, tg_kcache_entry **out, int *n,
                   tg_ctx *ctx);
/* Remove the cache's own files from dir (entries of both kinds, the
 * temporaries of processes no longer running), nothing else; *removed
 * counts the entries removed. Takes the folder's lock as compiles do, so
 * it waits for a compile in progress; the lock file stays. */
int tg_kcache_clear(const char *dir, int *removed, tg_ctx *ctx);
/* The same for the entries last used (or written) min_age seconds ago or
 * more (every entry: min_age < 0). A kernel loaded from the folder marks
 * its entry used (its file's time, at most once an hour); the entries
 * unused for TG_CACHE_MAX_AGE days (default 30, 0: never) go by
 * themselves, swept once a day by the first process to use the folder. */
int tg_kcache_clear_older(const char *dir, double min_age, int *removed, tg_ctx *ctx);
/* Whether a process holds dir's lock now (compiling a kernel): then
 * tg_kcache_clear would wait. */
bool tg_kcache_busy(const char *dir);

/* For the GPU kernels' cache (nvrtc.c), which shares the folder, its
 * lock file and its hash: mkdir -p (0, or -1 with errno set), and the
 * 128-bit FNV-1a, as 32 hex digits, of parts[0..n-1] each with its
 * terminating NUL. */
int tg_kcache_mkdir(const char *dir);
/* A kernel file loaded from the folder: mark its entry used now (its
 * time; at most once an hour), so that the pruning of unused entries
 * (tg_kcache_clear_older) keeps it. */
void tg_kcache_mark_used(const char *path);
void tg_kcache_hash(const char *const *parts, int n, char out[33]);

#endif
