/* Private: compiled-function files (tgf.c) and their checksum. */
#ifndef TG_TGF_INTERNAL_H
#define TG_TGF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes, continuing from crc (0 to start); from
 * tg_crc32c_par_min bytes on (16 MiB; tests lower it), on the OpenMP
 * threads. tg_crc32c_sw: the table version, one thread. */
extern size_t tg_crc32c_par_min;
uint32_t tg_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t tg_crc32c_sw(uint32_t crc, const void *data, size_t n);
/* The CRC-32C of A then B, from crc_a = CRC(A), crc_b = CRC(B) and B's
 * length. */
uint32_t tg_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* The fixed preamble at offset 0 (all integers little-endian). */
#define TG_TGF_MAGIC "TGF\x89\r\n\x1a\n"
#define TG_TGF_PREAMBLE 64
#define TG_TGF_ALIGN 64
/* Format version 2's array table: one record per array, little-endian:
 * byte 0 dtype (tg_dtype), 1 ndim, 2-7 zero, 8-71 the shape (8 x u64,
 * unused ones zero), 72-79 offset from the data section, 80-87 nbytes,
 * 88-91 CRC-32C of the data, 92-95 zero. */
#define TGF_ENTRY 96

/* For the crash test: when set, called after each chunk the saver writes
 * to its temporary file. */
extern void (*tg_tgf_write_hook)(size_t written);
/* For the fuzz target: when set, the reader skips the checksums of the
 * array table and of the arrays, so that mutated graph sections reach the
 * decoder. Never set in the library itself. */
extern bool tg_tgf_fuzz_no_checksums;
/* For tests: tg_tgf_save_state loads the kept original graph and writes
 * it again, as it does when its text cannot be copied. */
extern bool tg_tgf_reparse_original;
/* How many times tg_tgf_save_state copied the original graph's text
 * (counted atomically: sets may be saved in several threads). */
extern unsigned long tg_tgf_original_copies;

/* ---- the binary graph section (tgfgraph.c; schemas/tgf.md) ---- */
struct tg_function;
struct tg_fgraph;
struct tg_var;
struct tg_array;
struct tg_shared;
struct tg_type;
struct tg_ctx;

/* The index in the file's array table of a value the section refers to
 * (v: its variable, NULL for a test value); -1 when out of memory. */
typedef int (*tgf_array_ref_fn)(void *ud, const struct tg_var *v, const struct tg_array *a);
/* The shared state for variable `id` of this type whose saved value is
 * `value` (a reference), one per id across the file's functions; NULL
 * with ctx set on error. */
typedef struct tg_shared *(*tgf_shared_fn)(void *ud, const char *id, const struct tg_type *type,
                                           struct tg_array *value, struct tg_ctx *ctx);

/* Append f's graph section to out. TG_OK or TG_ENOMEM. */
struct tg_str;
int tgf_graph_encode(const struct tg_function *f, tgf_array_ref_fn ref, void *ud,
                     struct tg_str *out);

#include "rewrite/rewrite.h"

/* Little-endian fields, as the .tgf format and the kernel cache's footer
 * store them. */
static inline void tg_le_put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void tg_le_put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t tg_le_get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static inline uint64_t tg_le_get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
typedef struct tgf_decoded {
    struct tg_fgraph *fg; /* in the saved schedule, ready to link */
    char **out_ids;       /* the declared output ids (fg->nout), owned */
    tg_opt_record record; /* the rewrite record and the passes */
    char *strpool;        /* the record's names point into it; owned */
} tgf_decoded;
/* Read a graph section; `what` prefixes errors. */
int tgf_graph_decode(const void *data, size_t len, struct tg_array *const *arrays, int narrays,
                     tgf_shared_fn shared, void *ud, const char *what, tgf_decoded *out,
                     struct tg_ctx *ctx);

#endif
