/* Private: JSON interchange helpers shared by the loader, the saver, the
 * tools and the tests. */
#ifndef TG_IO_INTERNAL_H
#define TG_IO_INTERNAL_H

#include <json-c/json.h>

#include "graph/graph.h"

/* Read a value (FORMAT.md s5) from JSON. `dt`/`shape` are the defaults
 * taken from the variable's type (dt may be TG_DTYPE_INVALID and ndim -1
 * when there is none); `dir` is the folder npy paths are relative to (NULL
 * refuses npy). `where` is the JSON location used in errors
 * ("variables[3].constant"). A bare number or boolean is a scalar; *weak is
 * set when the value is a scalar written without a dtype and weak is
 * allowed (weak != NULL). */
/* A shape as NumPy writes it, "(3,)", "(2, 3)", "()", with "?" for an
 * unknown length (s NULL: every one). */
void tg_shape_text(int nd, const int64_t *s, char *buf, size_t size);

tg_array *tg_value_from_json(json_object *v, tg_dtype dt, int ndim,
                             const int64_t *shape, const char *dir,
                             const char *where, bool *weak, tg_ctx *ctx);
/* json-c parses an integer literal past int64 (below -2^63) or uint64
 * (above 2^64 - 1) as the nearest bound, silently. This finds the first
 * such literal in JSON text (strings skipped): its offset, or -1 when
 * there is none. Run on the text that was parsed, it turns a clamped
 * value into an error. */
int64_t tg_json_find_huge_int(const char *text, size_t len);
/* json-c reads the escape \u0000 into a string but tg keeps ids, names,
 * function names, trace frames and attrs (a body's name, a mode) as C
 * strings, which end at the first NUL: "before\u0000after" was read as
 * "before", silently, everywhere. json-c cuts a key at one itself (a
 * function named "ma\u0000in" became "ma"), so the parsed tree cannot
 * tell, and the text is searched instead: graph files, and a .tgf's
 * header, original graph and node attrs, holding one anywhere are
 * refused (meta too: its keys are cut as well). Returns true with the
 * JSON path of the first string or key holding one in buf (cap > 8:
 * "variables[0].name", a key as written); false when there is none.
 * Run on text that json-c parsed. */
bool tg_json_find_nul(const char *text, size_t len, char *buf, size_t cap);

/* How deep JSON may nest: graph files, and the node attrs and the
 * original graph that .tgf files keep. A node's attrs hold its bodies,
 * nested as in the graph file, so the attrs of a graph that loaded fit
 * (a .tgf of bodies 20 deep was written, then refused at 64). */
#define TG_JSON_DEPTH 128
/* How deep the attrs texts that rewrites and gradient rules write
 * themselves may nest ({"axis": 0}): json-c's default, what
 * json_tokener_parse allows (a tokener's stack is allocated, and zeroed,
 * for its depth). Never for attrs that may hold bodies, as deep as
 * TG_JSON_DEPTH let through (a scan's, a body node's that the optimizer
 * moves): those are copied as objects (tg_rw_node_json), not written out
 * and parsed again. */
#define TG_JSON_ATTRS_DEPTH 32
/* A json-c parse error as a phrase, the depth limit named. */
const char *tg_json_error_text(enum json_tokener_error e);
/* Why tg_json_parse_object gave nothing: TG_ENOMEM (json-c ran out of
 * memory), or TG_EPARSE with the byte where parsing stopped and a phrase
 * ("unexpected end of input", "text after the end", "expected a JSON
 * object", or json-c's own). */
typedef struct tg_json_fail {
    int status;
    size_t at;
    const char *why; /* tg_json_not_object when the text is another value */
} tg_json_fail;
extern const char tg_json_not_object[]; /* "expected a JSON object" */
/* Parse the len bytes at s as one JSON object (strict, UTF-8 checked;
 * whitespace may follow it), with tok (reset here; it fixes the depth) or,
 * when tok is NULL, a tokener of depth levels made for the call. The
 * object, or NULL with *fail filled. json-c 0.16 has no error for running
 * out of memory: a parse whose allocation fails stops where it was,
 * returns nothing and reports success, which this tells from the text
 * `null` (a whole text, read to its end). */
json_object *tg_json_parse_object(json_tokener *tok, const char *s, size_t len, int depth, tg_json_fail *fail);
/* The line and column (both from 1) of byte off of the text s. */
void tg_json_line_col(const char *s, size_t off, int *line, int *col);

/* Add val to the object o under key, or to the array arr: a NULL val
 * (json-c out of memory) or a failed add releases val and clears *ok, so
 * that a build checks once, at its end, and never writes JSON with holes. */
void tg_json_put(json_object *o, const char *key, json_object *val, bool *ok);
void tg_json_push(json_object *arr, json_object *val, bool *ok);
/* A node's canonical attrs (tg_node.attrs: defaults filled in) with their
 * keys in order, whatever order the file gave them in: a new object (a
 * deep copy), or NULL out of memory. The saver writes attrs so, and
 * tgprof keys its op rows by it. */
json_object *tg_json_attrs_sorted(json_object *attrs);

/* Write a value as {"dtype", "shape", "data"} (small arrays) or
 * {"dtype", "shape", "base64"} (large ones; NaN and infinities are written
 * as the strings of FORMAT.md s5 in data). */
json_object *tg_value_to_json(const tg_array *a); /* NULL: out of memory */

/* Parse a type object {"dtype", "shape" | "broadcastable"}. */
int tg_type_from_json(json_object *o, tg_type *t, const char *where,
                      tg_ctx *ctx);
json_object *tg_type_to_json(const tg_type *t);

/* A JSON integer from 2^63 to 2^64 - 1: json-c keeps it as a uint64 and
 * json_object_get_int64 clamps it to 2^63 - 1. */
bool tg_json_int_past_int64(json_object *o);
/* An integer where the file has one: a JSON integer that fits int64, or a
 * number with no fractional part (JSON Schema's "integer": 3.0). */
bool tg_json_get_int(json_object *o, int64_t *out);
/* A float of dtype dt as the shortest JSON number that reads back as the
 * same value, always with a '.' or an exponent (finite v only). */
json_object *tg_json_new_float(double v, tg_dtype dt);

/* A variable id is 1..128 of [A-Za-z0-9_.:-], not starting with . or -. */
bool tg_id_valid(const char *id);

/* Whole-graph JSON (the saver's work), owned by the caller; NULL when
 * out of memory. */
json_object *tg_graph_to_json(const tg_graph *g);

/* Compiled-function files keep the values of declared constants and shared
 * variables outside the JSON, in an array table. The saver asks `write`
 * for the JSON that stands for such a value ({"tgf_array": k}); the loader
 * hands a value object holding "tgf_array" to `resolve`, which returns a
 * new reference to an array of v's type (or NULL with an error on ctx naming
 * `where`). */
typedef json_object *(*tg_value_writer)(void *ud, const tg_var *v,
                                        const tg_array *a);
json_object *tg_graph_to_json_ext(const tg_graph *g, tg_value_writer write,
                                  void *ud);
/* What json_object_to_json_string_ext(tg_graph_to_json_ext(g, write, ud),
 * JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) gives, byte
 * for byte, written straight from the graph (the tree of a 100,000-node
 * graph took longer to build, print and free than to optimize it).
 * Owned by the caller (tg_free); NULL when out of memory. */
char *tg_graph_to_text_ext(const tg_graph *g, tg_value_writer write, void *ud, size_t *len);
typedef tg_array *(*tg_value_resolver)(void *ud, json_object *ref,
                                       const tg_var *v, const char *where,
                                       tg_ctx *ctx);
/* Load a graph from parsed JSON (borrowed); `what` names it in errors. npy
 * paths are refused. The functions' missing-input check is left to the
 * caller, which clones them (tg_fgraph_from_decl makes it). */
tg_graph *tg_graph_load_json(json_object *root, const char *what,
                             tg_value_resolver resolve, void *ud,
                             tg_ctx *ctx);

/* base64 (RFC 4648, with padding). decode returns NULL on bad input. */
char *tg_base64_encode(const void *data, size_t n);
void *tg_base64_decode(const char *s, size_t len, size_t *out_n);

/* Write `len` bytes to path atomically: a temporary file beside it, fsync,
 * rename, fsync of the folder. A failure leaves the old file intact. (A
 * standard stream, device or FIFO is written in place, a link followed:
 * tg_file_begin.) */
int tg_file_write_atomic(const char *path, const void *data, size_t len,
                         tg_ctx *ctx);
/* Write all len bytes to fd (retrying short writes and EINTR): TG_OK, or
 * TG_EIO with "PATH: write failed: why" on ctx. */
int tg_file_write_all(int fd, const void *data, size_t len, const char *path, tg_ctx *ctx);
/* A save in steps: tg_file_begin opens where the bytes go (sv->fd): a
 * temporary beside the file (beside the file a symbolic link names, even
 * one that does not exist yet, the link kept), for a standard stream
 * named by number (/dev/stdout, /dev/fd/N) that descriptor itself, or,
 * for a path that names a device, FIFO or socket, that path itself;
 * tg_file_finish syncs and renames the temporary into place (or just
 * closes the stream or device); tg_file_abort closes
 * and removes the temporary. Both finish and abort release sv. The
 * temporary takes the permissions (and, where allowed, the owner and
 * group) of the file it will replace; a new file gets 0666 less the
 * umask. A finish that replaced the file also removes the temporaries of
 * the same file that earlier saves, killed mid-write (SIGKILL, a crash),
 * left: DEST.tmp.PID.N whose process is gone and that is an hour old. */
typedef struct tg_file_save {
    int fd;
    char *tmp;  /* NULL: writing in place */
    char *dest; /* the file the temporary replaces */
    int slot;   /* 1 + its place among the live temporaries, or 0 */
} tg_file_save;
/* Remove the temporaries of the saves in progress (at most 16 at once are
 * known): async-signal-safe, for a tool's SIGINT or SIGTERM handler, so
 * that an interrupted save leaves the old file and no NAME.tmp.PID.N. */
void tg_file_remove_temporaries(void);
int tg_file_begin(const char *path, tg_file_save *sv, tg_ctx *ctx);
int tg_file_finish(tg_file_save *sv, tg_ctx *ctx);
void tg_file_abort(tg_file_save *sv);
/* zip's CRC-32 (zlib's crc32 with a start value: 0 for a new sum), of a
 * large buffer in pieces on the OpenMP threads as tg_crc32c. */
uint32_t tg_crc32_zip(uint32_t crc, const void *data, size_t n);
/* Open a regular file for reading: its descriptor and length, or -1 with
 * "PATH: cannot open: why" or "PATH: not a regular file" on ctx. */
int tg_file_open_regular(const char *path, size_t *len, tg_ctx *ctx);
/* Read a whole file (NUL-terminated; *len without the NUL). */
char *tg_file_read(const char *path, size_t *len, tg_ctx *ctx);
/* The same into a 64-byte aligned block (tg_free_aligned). */
char *tg_file_read_aligned(const char *path, size_t *len, tg_ctx *ctx);
/* Fault in the whole pages of [p, p + n) for writing in one call, where
 * the kernel can (Linux 5.14): a buffer about to be filled then takes no
 * page fault per 4 KiB, each of which costs a few microseconds (more in a
 * virtual machine). A no-op for small buffers and older kernels. */
void tg_prefault(void *p, size_t n);

/* A nested body (FORMAT.md s7: an object with variables, nodes, inputs,
 * outputs), loaded like a file: the result has one function, "body", with
 * the body's inputs and outputs. `where` prefixes errors ("attrs.body").
 * npy paths are refused. NULL on error, with ctx set. */
tg_graph *tg_body_load(json_object *body, const char *where, tg_ctx *ctx);

/* Checks of one node that the JSON loader and the .tgf reader share. Each
 * sets ctx to a message without the node ("inputs: dot expects 2 inputs,
 * got 3"); the caller prefixes the file and the node. */
/* The number of inputs and outputs against the op's. */
int tg_node_check_arity(const tg_node *nd, tg_ctx *ctx);
/* Every key of the attrs object `ja` is one the op knows. */
int tg_node_check_attr_keys(const tg_node *nd, json_object *ja, tg_ctx *ctx);
/* nd->inplace[oi] = ii (nd->inplace allocated, -1 filled), when the op can
 * write output oi over input ii and no other output already does. */
int tg_node_set_inplace(tg_node *nd, int oi, int64_t ii, tg_ctx *ctx);
/* Once types are known: each in-place output fits its input's buffer,
 * which is not a constant's. */
int tg_node_check_inplace_types(const tg_node *nd, tg_ctx *ctx);

#endif
