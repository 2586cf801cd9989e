/* The profile report (tools/common/profreport.c). */
#ifndef TG_PROFREPORT_H
#define TG_PROFREPORT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "tg/tg.h"

/* ---- what was measured, per scheduled node ---- */

typedef struct prof_row {
    int index; /* schedule position (nodes), or first member (groups) */
    const char *name;  /* key, op+attrs, or class */
    const char *extra; /* op of a node */
    double seconds;
    uint64_t calls;
    int nodes;
    double flops; /* one run of each node, summed */
    double total_flops; /* over every run: for GFLOP/s */
    int64_t bytes;
} prof_row;

typedef struct prof_info {
    const char *path;
    const tg_function *f;
    const tg_profile *p;
    int n;
    long calls, warmup;
    const char *preset;
    tg_profile_node *st;
    char **opkey; /* "op" or "op{attrs}" per node, owned */
    double total_s, nodes_s;
    const char *trace; /* --trace OUT, or NULL */
    const char *tool;  /* the report's "tool" (NULL: tgprof) */
    /* The function's buffer pool over the profiled calls (reused and
     * allocated counted from their start; held now), or NULL. */
    const tg_pool_stats *pool;
} prof_info;

/* ---- the bodies of scan and op_from_graph nodes ---- */

/* One body profile (tg_profile_body), as a prof_info of its own: P.f its
 * function, P.p its profile, P.st and P.opkey its nodes', P.calls the runs
 * of its outer node, P.total_s the outer node's time, P.nodes_s the time
 * in the body's nodes. */
typedef struct prof_body {
    prof_info P;
    int parent;  /* index of the body it is in, -1: in the function */
    int depth;   /* 0 for a body of the function */
    int node;    /* its outer node's schedule position in the parent's function */
    const char *node_key, *node_opkey; /* the outer node's key and op key (borrowed) */
    const char *node_op; /* its op: scan, op_from_graph */
    uint64_t steps;
    char *path;  /* "scan{rnn} h" or "scan{outer} hs > scan{inner} gs" */
} prof_body;
/* Every body under P (depth first: a body, then those in it), in *out (a
 * new array, freed with prof_bodies_free; NULL with 0). Returns the count,
 * or -1 out of memory. */
int prof_bodies(const prof_info *P, prof_body **out);
void prof_bodies_free(prof_body *b, int n);

/* Merge rows with the same name (sorted by name first), summing; then
 * sort slowest first. Returns the number of rows left. */
int prof_group_rows(prof_row *r, int n);
/* qsort order: slowest first, then by index. */
int prof_cmp_row(const void *a, const void *b);
const char *prof_kind_name(tg_profile_out_kind k);
/* P->opkey[k]: "op", "op{attrs}" or composite{expr} per node (owned). -1: out of memory. */
int prof_opkeys(prof_info *P);
void prof_opkeys_free(prof_info *P);
/* The length of the well-formed UTF-8 sequence at s (1 for ASCII and
 * for the NUL; 2 to 4), or 0 when the byte at s begins none (a stray
 * continuation byte, an overlong form, a surrogate, past U+10FFFF, cut
 * short). */
int prof_utf8_seq(const char *s);
/* "host", "events" or "sync". */
const char *prof_clock_name(tg_profile_clock c);
/* How the device nodes were timed: "none" (no node off the host clock),
 * "events" or "sync"; *ndevice (may be NULL) the nodes not on the host
 * clock. */
const char *prof_device_timing(const prof_info *P, int *ndevice);
/* The report: a new object owned by the caller. The bodies (prof_bodies)
 * go under functions[0].bodies, nested; NULL and 0 for none. */
json_object *prof_report_json(const prof_info *P, const tg_profile_memory *mem);
json_object *prof_report_json_bodies(const prof_info *P, const tg_profile_memory *mem, const prof_body *b,
                                     int nb);

#endif
