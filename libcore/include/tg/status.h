/* tg/status.h: status codes, the error context and the allocator hook.
 *
 * Every fallible call returns a tg_status: 0 is success, errors are negative.
 * The details of a failure (one line naming the file, the JSON location, the
 * node and its creation trace) are kept on a tg_ctx that the caller passes
 * in and reads back with tg_ctx_message().
 */
#ifndef TG_STATUS_H
#define TG_STATUS_H

#include <stddef.h>

#if defined(_WIN32)
#define TG_API __declspec(dllexport)
#else
#define TG_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description). Values never change meaning; new ones are
 * appended. */
#define TG_STATUS_LIST(X)                                                   \
    X(TG_OK, 0, "success")                                                  \
    X(TG_ENOMEM, -1, "out of memory")                                       \
    X(TG_EINVAL, -2, "invalid argument")                                    \
    X(TG_EIO, -3, "input/output error")                                     \
    X(TG_EPARSE, -4, "malformed input")                                     \
    X(TG_ELOAD, -5, "invalid graph")                                        \
    X(TG_ETYPE, -6, "type error")                                           \
    X(TG_ESHAPE, -7, "shape mismatch")                                      \
    X(TG_ERUNTIME, -8, "run-time failure")                                  \
    X(TG_EUNSUPPORTED, -9, "not supported")                                 \
    X(TG_EMISSING, -10, "missing input")                                    \
    X(TG_ENOTFOUND, -11, "not found")                                       \
    X(TG_EVERSION, -12, "unsupported version")                              \
    X(TG_ESTOPPED, -13, "stopped")                                          \
    X(TG_EBUSY, -14, "busy")

typedef enum tg_status {
#define TG_STATUS_ENUM_(name, value, desc) name = value,
    TG_STATUS_LIST(TG_STATUS_ENUM_)
#undef TG_STATUS_ENUM_
} tg_status;

/* A short description of a status code ("shape mismatch"). Never NULL. */
TG_API const char *tg_status_str(int status);

/* Where the details of the last failure are kept. Owned by the caller:
 * tg_ctx_new() returns a context freed with tg_ctx_free(). */
typedef struct tg_ctx tg_ctx;

TG_API tg_ctx *tg_ctx_new(void);
TG_API void tg_ctx_free(tg_ctx *ctx);
/* The one-line message of the last failure, or "" when there was none.
 * Borrowed: valid until the next failure recorded on ctx. */
TG_API const char *tg_ctx_message(const tg_ctx *ctx);
/* The status of the last failure recorded on ctx (TG_OK when none). */
TG_API int tg_ctx_status(const tg_ctx *ctx);
TG_API void tg_ctx_clear(tg_ctx *ctx);

/* The allocator hook: every allocation of the library goes through it, so
 * tests can make an allocation fail on purpose. realloc(NULL, n) allocates,
 * realloc(p, 0) frees. Pass NULL to restore the default (libc). Not
 * thread-safe: set it before using the library. */
typedef void *(*tg_realloc_fn)(void *ud, void *ptr, size_t size);
TG_API void tg_set_allocator(tg_realloc_fn fn, void *ud);

/* The library's version, "MAJOR.MINOR.PATCH". */
TG_API const char *tg_version(void);

#ifdef __cplusplus
}
#endif
#endif
