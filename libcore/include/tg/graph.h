/* tg/graph.h: graphs loaded from and saved to the interchange format
 * (FORMAT.md).
 *
 * Ownership: tg_graph_load* return a graph owned by the caller, freed with
 * tg_graph_free(). Strings returned by accessors are borrowed from the
 * graph.
 */
#ifndef TG_GRAPH_H
#define TG_GRAPH_H

#include <stddef.h>

#include "tg/array.h"
#include "tg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_graph tg_graph;

/* Load a graph file. Every error (TG_EIO, TG_EPARSE, TG_ELOAD, TG_ETYPE,
 * TG_EUNSUPPORTED) leaves one line on ctx naming the file, the JSON
 * location, the node and the ids involved. */
TG_API tg_graph *tg_graph_load(const char *path, tg_ctx *ctx);
/* Load from memory; `dir` is the folder npy paths are relative to (NULL:
 * npy values are refused), `what` names the source in errors. */
TG_API tg_graph *tg_graph_load_string(const char *json, size_t len,
                                      const char *dir, const char *what,
                                      tg_ctx *ctx);
TG_API void tg_graph_free(tg_graph *g);
/* What the load found worth saying that is not an error, one line each
 * (a grad, lop or rop with attrs.disconnected "warn" and a w the result
 * does not depend on: its gradient is zeros; Theano prints such a
 * warning). Tools print them as "TOOL: warning: ...". At most 64, then
 * one line saying more were left out. Borrowed from g. */
TG_API int tg_graph_warning_count(const tg_graph *g);
TG_API const char *tg_graph_warning(const tg_graph *g, int i);

/* Write g as interchange JSON (values inline as data or base64). Saving
 * to a file is atomic: a failure leaves the previous file intact. */
TG_API int tg_graph_save(const tg_graph *g, const char *path, tg_ctx *ctx);
/* The JSON text, owned by the caller (free with tg_string_free). */
TG_API char *tg_graph_to_string(const tg_graph *g, tg_ctx *ctx);
TG_API void tg_string_free(char *s);

TG_API int tg_graph_node_count(const tg_graph *g);
TG_API int tg_graph_var_count(const tg_graph *g);
TG_API int tg_graph_function_count(const tg_graph *g);
TG_API const char *tg_graph_function_name(const tg_graph *g, int i);
/* The index of the function a tool should pick for name (NULL: the only
 * one, or "main"); -1 when there is none, with ctx set. */
TG_API int tg_graph_function_find(const tg_graph *g, const char *name,
                                  tg_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
