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
    tg_function *f;
    tg_profile *p;
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

/* Merge rows with the same name (sorted by name first), summing; then
 * sort slowest first. Returns the number of rows left. */
int prof_group_rows(prof_row *r, int n);
/* qsort order: slowest first, then by index. */
int prof_cmp_row(const void *a, const void *b);
const char *prof_kind_name(tg_profile_out_kind k);
/* P->opkey[k]: "op", "op{attrs}" or composite{expr} per node (owned). -1: out of memory. */
int prof_opkeys(prof_info *P);
void prof_opkeys_free(prof_info *P);
/* "host", "events" or "sync". */
const char *prof_clock_name(tg_profile_clock c);
/* How the device nodes were timed: "none" (no node off the host clock),
 * "events" or "sync"; *ndevice (may be NULL) the nodes not on the host
 * clock. */
const char *prof_device_timing(const prof_info *P, int *ndevice);
/* The report: a new object owned by the caller. */
json_object *prof_report_json(const prof_info *P, const tg_profile_memory *mem);

#endif
