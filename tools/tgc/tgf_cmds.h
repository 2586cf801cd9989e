/* tgc's compiled-function commands (compile, print, export) and what run
 * needs to open a .tgf file and checkpoint into one. */
#ifndef TGC_TGF_CMDS_H
#define TGC_TGF_CMDS_H

#include <stdbool.h>

#include "tg/tg.h"

/* Where the function being run came from: a graph file (g; the function is
 * compiled from it and owned by the caller) or a .tgf (t; the function
 * belongs to t). */
typedef struct tgc_source {
    tg_graph *g;
    tg_tgf *t;
    tg_function *f;
    int fi; /* f's index among g's functions */
} tgc_source;

/* Open function fname of path. Returns the exit status (0 on success),
 * having printed the one error line. */
int tgc_source_open(tgc_source *s, const char *tool, const char *path, const char *fname,
                    const tg_compile_options *co, bool reoptimize);
/* --save-state: every function of the file with the current shared
 * values (for a graph, the others compiled now with the same options; one
 * that does not compile is left out with a warning line). Returns the
 * exit status. */
int tgc_source_save_state(tgc_source *s, const char *tool, const char *out,
                          const tg_compile_options *co);
void tgc_source_close(tgc_source *s);

int tgc_cmd_compile(int argc, char **argv);
int tgc_cmd_print(int argc, char **argv);
int tgc_cmd_export(int argc, char **argv);

#endif
