/* tg/array.h: n-dimensional arrays.
 *
 * An array is a dtype, up to TG_MAX_NDIM dimensions, a shape, byte strides
 * and a reference-counted buffer; views (transpose, dimshuffle, basic
 * slices, reshape of contiguous data) share the buffer and copy nothing.
 *
 * Ownership: every function that returns a tg_array* (_new, _view_*,
 * _copy, _load) gives the caller one reference, released with
 * tg_array_free(). Arguments are borrowed.
 */
#ifndef TG_ARRAY_H
#define TG_ARRAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tg/dtype.h"
#include "tg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_NDIM 8

typedef struct tg_array tg_array;

/* A new C-contiguous array, zero-filled. NULL on failure (bad ndim, a
 * negative length, a size that overflows, out of memory). */
TG_API tg_array *tg_array_new(tg_dtype dt, int ndim, const int64_t *shape);
/* Same, filled with a copy of `data` (C order, nbytes = size * itemsize). */
TG_API tg_array *tg_array_new_from(tg_dtype dt, int ndim, const int64_t *shape,
                                   const void *data);
/* A 0-d array holding v converted to dt (as a C cast would). */
TG_API tg_array *tg_array_new_scalar(tg_dtype dt, double v);
/* One more reference to a. */
TG_API tg_array *tg_array_ref(tg_array *a);
TG_API void tg_array_free(tg_array *a);

TG_API tg_dtype tg_array_dtype(const tg_array *a);
TG_API int tg_array_ndim(const tg_array *a);
TG_API const int64_t *tg_array_shape(const tg_array *a);
TG_API const int64_t *tg_array_strides(const tg_array *a); /* bytes */
TG_API int64_t tg_array_size(const tg_array *a);            /* elements */
/* The address of element 0 (borrowed; valid while a lives). */
TG_API void *tg_array_data(const tg_array *a);
TG_API bool tg_array_is_contiguous(const tg_array *a); /* C order */
/* Element at flat C-order index i, as a double (any dtype, any strides). */
TG_API double tg_array_get_flat(const tg_array *a, int64_t i);

/* Views: share a's buffer. NULL (with ctx set) when the arguments are
 * invalid for a. */
TG_API tg_array *tg_array_view_transpose(const tg_array *a, const int *axes,
                                         tg_ctx *ctx);
/* Theano's DimShuffle: order[i] is an input axis, or -1 for a new axis of
 * length 1; dropped input axes must have length 1. */
TG_API tg_array *tg_array_view_dimshuffle(const tg_array *a, int n,
                                          const int *order, tg_ctx *ctx);
/* Basic slicing of one axis, NumPy semantics for start/stop/step after
 * normalisation by tg_slice_normalize. */
TG_API tg_array *tg_array_view_slice(const tg_array *a, int axis,
                                     int64_t start, int64_t stop,
                                     int64_t step, tg_ctx *ctx);
/* A reshape that is a view when a's layout allows it (C-contiguous), a copy
 * otherwise. One entry of shape may be -1. */
TG_API tg_array *tg_array_reshape(const tg_array *a, int ndim,
                                  const int64_t *shape, tg_ctx *ctx);

/* A C-contiguous copy of a, converted to dt (as NumPy's astype with
 * casting="unsafe"). */
TG_API tg_array *tg_array_copy(const tg_array *a, tg_dtype dt);
/* Copy src into dst (same shape, or src broadcast to dst's shape),
 * converting dtypes. When they are views of one buffer whose elements
 * overlap, dst gets src as it was before the copy (NumPy's x[...] = x.T). */
TG_API int tg_array_assign(tg_array *dst, const tg_array *src, tg_ctx *ctx);

/* True when a and b have the same dtype, shape and elements (NaN equals
 * NaN). */
TG_API bool tg_array_equal(const tg_array *a, const tg_array *b);

/* Normalise a NumPy slice (start/stop/step may be TG_SLICE_NONE, INT64_MIN,
 * for "absent"; a step of 0 is also read as absent, that is 1) against a
 * length; returns the number of elements (never negative) and sets *start
 * and *step. A step of 0 given explicitly is an error in NumPy: callers
 * that take one from a user refuse it before (tg_array_view_slice does). */
TG_API int64_t tg_slice_normalize(int64_t len, int64_t *start, int64_t *stop,
                                  int64_t *step);
#define TG_SLICE_NONE INT64_MIN

/* .npy files: every dtype of tg, C and Fortran order, both byte orders.
 * Anything else (object arrays, pickles, truncated data, a header that
 * lies) is an error with one line on ctx. */
TG_API tg_array *tg_npy_load(const char *path, tg_ctx *ctx);
TG_API tg_array *tg_npy_load_mem(const void *buf, size_t len, const char *what,
                                 tg_ctx *ctx);
/* Writes atomically: a temporary file in the same folder, fsync, rename. */
TG_API int tg_npy_save(const char *path, const tg_array *a, tg_ctx *ctx);

/* .npz archives (NumPy's savez and savez_compressed): a zip file of .npy
 * members, stored or deflated, zip64 included. Opening reads the
 * archive's directory (the file is memory-mapped); each array is read on
 * demand, its CRC-32 checked. A member's name is its array's name: the
 * stored name less ".npy". Anything else (encryption, other compression
 * methods, archives spanning disks, sizes or offsets past the end, a
 * deflated size that deflate could not reach, two members of one name)
 * is an error with one line on ctx naming the archive and the member. */
typedef struct tg_npz tg_npz;
TG_API tg_npz *tg_npz_open(const char *path, tg_ctx *ctx);
/* The same over len bytes at buf, borrowed until tg_npz_close; `what`
 * names them in errors. */
TG_API tg_npz *tg_npz_open_mem(const void *buf, size_t len, const char *what, tg_ctx *ctx);
TG_API int tg_npz_count(const tg_npz *z);
TG_API const char *tg_npz_name(const tg_npz *z, int i);
/* The index of the array named `name`, or -1. */
TG_API int tg_npz_find(const tg_npz *z, const char *name);
TG_API tg_array *tg_npz_read(const tg_npz *z, int i, tg_ctx *ctx);
/* Read the n arrays numbered idx[0..n) into out[0..n), several at once on
 * the OpenMP threads, largest first (each member is a stream of its own,
 * so deflated ones inflate in parallel). TG_OK, or the status of the first
 * failure in idx's order, its line on ctx, and every out[] NULL. */
TG_API int tg_npz_read_many(const tg_npz *z, int n, const int *idx, tg_array **out, tg_ctx *ctx);
TG_API void tg_npz_close(tg_npz *z);
/* Write n arrays as one archive that np.load reads (members stored, as
 * np.savez writes them; zip64 where a size or offset needs it), atomically
 * as tg_npy_save. Names must be distinct and non-empty. */
TG_API int tg_npz_save(const char *path, int n, const char *const *names,
                       const tg_array *const *arrays, tg_ctx *ctx);
/* The same with every member deflated, as np.savez_compressed writes
 * them: level 1 (fastest) to 9 (smallest), 0 (deflate's stored blocks),
 * or -1 for zlib's default, 6, which NumPy uses. The data is deflated in
 * pieces of 1 MiB on the OpenMP threads, each primed with the 32 KiB
 * before it (pigz's way): the archive is the same bytes whatever the
 * number of threads, a few hundred bytes a piece larger than one stream
 * would be. The sizes follow each member's data (a data descriptor), so
 * the path may be a pipe. */
TG_API int tg_npz_save_compressed(const char *path, int n, const char *const *names,
                                  const tg_array *const *arrays, int level, tg_ctx *ctx);

/* Prints dtype, shape and the values (abbreviated when large, as NumPy). */
TG_API void tg_array_print(FILE *f, const tg_array *a);

#ifdef __cplusplus
}
#endif
#endif
