/* Private: `composite` bodies as CUDA kernels, generated as CUDA C++,
 * compiled at run time with NVRTC and kept in the kernel cache folder
 * beside the CPU kernels (nvrtc.c).
 *
 * Plain C types only (no CUDA headers), so that cuda.c and the tests
 * include it; the kernel type is spelled out rather than taken from
 * backend/backend.h, whose tg_kernel_fn is not ops/composite.h's.
 */
#ifndef TG_CUDA_NVRTC_H
#define TG_CUDA_NVRTC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

/* At most this many inputs plus outputs: the argument block (below) must
 * fit the 4 KiB of kernel parameters every device takes. */
#define TG_NV_MAXOPS 48

/* The CUDA C++ source of composite node n's kernel, for n's body and its
 * inputs' static types (an input typed 0-d is read once per thread).
 * Owned by the caller (tg_free). NULL when the body cannot run on the
 * GPU: an op or a dtype the generator does not handle (the CPU code
 * generator's set: integer int_div and mod by a divisor that is not a
 * constant, integer pow, gammaln, digamma, trigamma, polygamma stay on
 * the CPU; float16 is computed in float and rounded
 * after each op, as the CPU interpreter does), more than TG_NV_MAXOPS operands, or out of
 * memory; *why (may be NULL) then says which, in a few static words.
 *
 * The kernel is `extern "C" __global__ void tg_composite_kernel(const
 * tg_args a)`, one thread per element in a grid-stride loop, over the
 * argument block that tg_nvrtc_args_pack writes. The source compiles
 * with NVRTC; with TG_HOST_SHIM defined (and __global__, __device__,
 * threadIdx... supplied by the includer) it is also plain C++ for the
 * host, which is how the tests check its values without a GPU. */
char *tg_nvrtc_source(const tg_node *n, const char **why);

/* The argument block of a launch, written into buf (at least
 * TG_NV_ARGS_MAX bytes; its size is returned). Layout, which the
 * generated `struct tg_args` repeats: int64 n; int32 ndim; int32 flat;
 * int64 shape[8]; then a pointer per operand (the nout outputs, then the
 * nin inputs); then int64 st[nin][8], the inputs' byte strides over the
 * broadcast shape (0 on broadcast axes). Outputs are C-contiguous with
 * the broadcast shape. flat is 1 when every input that is not 0-d-typed
 * (bit i of `scalars`) is C-contiguous with that shape, so that the
 * kernel indexes everything by the flat position. */
#define TG_NV_ARGS_MAX (80 + 8 * TG_NV_MAXOPS + 64 * TG_NV_MAXOPS)
size_t tg_nvrtc_args_pack(int nout, int nin, void *const *out_ptr, const tg_array *const *in,
                          uint64_t scalars, int ndim, const int64_t *shape, unsigned char *buf);

/* ---- NVRTC and the cache ---- */

/* True when NVRTC can be loaded (dlopen, on first use: TG_NVRTC names
 * the library, else libnvrtc.so.<major of this build's toolkit> is
 * searched, then the toolkit's own folder). *why says why not. */
bool tg_nvrtc_available(const char **why);
/* NVRTC's version (0 and 0 when it is missing). */
void tg_nvrtc_version(int *major, int *minor);

/* The compiled code of src for target ("sm_90": a cubin; "compute_90":
 * PTX, NUL-terminated, for the driver to finish): from this process's
 * map; else from the cache folder (tg_kcache_dir) when the file there
 * checks out; else compiled by NVRTC with the cache's lock held (so that
 * processes compiling the same source at once compile it once) and
 * written there (a temporary file renamed into place). The key is a hash
 * of the source, NVRTC's version, the target and the options. Returns a
 * pointer owned by the map (valid until tg_nvrtc_forget) and *size; NULL
 * when NVRTC is missing or the compile fails, with *why (static or
 * thread-local text: the first line of NVRTC's log). A folder that
 * cannot be written only costs the disk copy. */
const void *tg_nvrtc_image(const char *src, const char *target, size_t *size, const char **why);

/* Counters of this process: NVRTC compiles, images read from the disk,
 * look-ups answered from the map, failures, cache files found corrupt
 * (and compiled again), and kernel launches (on a GPU). */
typedef struct tg_nvrtc_stats {
    long compiles, disk_hits, memory_hits, failures, corrupt, launches;
} tg_nvrtc_stats;
tg_nvrtc_stats tg_nvrtc_stats_get(void);

/* Forget the map of images (not the kernels loaded on the device), so
 * that the next tg_nvrtc_image goes to the disk. For tests. */
void tg_nvrtc_forget(void);

/* The device kernel of composite node n (cuda.c's kernel selection), or
 * NULL: n is not a composite, its body cannot be generated, NVRTC is
 * missing or fails, or the code does not load (one warning line per
 * process says why, for the last two). Compiles and loads at the call:
 * placement asks once per node, before the function first runs. */
typedef int (*tg_nvrtc_run_fn)(tg_node *n, tg_array *const *in, tg_array **out, tg_ctx *ctx);
tg_nvrtc_run_fn tg_nvrtc_kernel(const tg_node *n);

#endif
