/* tgdebug: the subcommands and what they share.
 *
 * main.c dispatches `tgdebug SUBCOMMAND ARGS...` through a table of
 * {name, function, one-line help}; each subcommand lives in its own file
 * and gets argv with the subcommand's name as argv[0]. Every subcommand
 * follows the tools' contract (DESIGN.md): --help, exit 0 on success, 1
 * when it found a problem (a NaN, a mismatch, a failing test value), 2 on
 * bad usage or bad input with one line on stderr.
 */
#ifndef TGDEBUG_H
#define TGDEBUG_H

#include <stdio.h>

#include "cli.h"
#include "graph/graph.h"
#include "tg/tg.h"

#define TGDEBUG "tgdebug"

typedef struct tgd_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help; /* one line */
} tgd_command;

int tgd_nanguard(int argc, char **argv);
int tgd_testvalues(int argc, char **argv);
int tgd_compare(int argc, char **argv);

/* The whole tool, for main() and for test builds that register things
 * first (tests/tools/tgdebug_testrw.c). */
int tgdebug_main(int argc, char **argv);

/* ---- shared helpers (util.c) ---- */

/* "tgdebug: <sub>: message" on stderr. */
void tgd_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An integer option >= min; false with one line on stderr otherwise. */
bool tgd_parse_long(const char *sub, const char *opt, const char *s, long min, long *out);
/* A float option; false with one line on stderr otherwise. */
bool tgd_parse_double(const char *sub, const char *opt, const char *s, double *out);
/* "float64 (3, 4)" */
void tgd_shape_str(const tg_array *a, char *buf, size_t size);
/* One line of statistics: "float64 (3, 4) min=.. max=.. mean=.. nan=0 inf=0". */
void tgd_print_stats(FILE *o, const tg_array *a);
/* The creation trace, one frame a line, innermost last, each line
 * starting with indent; "(no trace in the file)" when there is none. */
void tgd_print_trace(FILE *o, const tg_node *n, const char *indent);
/* For a key that a gradient's expansion made (tg_function_key_gradient):
 * "<indent><label>: grad gx, differentiating r (sqrt)" (label NULL:
 * "from"), then a line for each step back while the node differentiated
 * is itself such a node (a second derivative). Nothing for any other
 * key. */
void tgd_print_gradient(FILE *o, const tg_function *f, const char *key, const char *indent, const char *label);
/* The node of graph g whose key (first output id) is key, or NULL. */
tg_node *tgd_graph_node(const tg_graph *g, const char *key);
/* Exit status for a library failure: 2 for bad input, 1 otherwise. */
int tgd_exit_for(int status);

#endif
