/* tgdebug: find where a graph's values go wrong.
 *
 *   tgdebug SUBCOMMAND [ARGS...]     (tgdebug SUBCOMMAND --help for each)
 *
 * Subcommands are rows of the table below: a name, the function that runs
 * it (argv[0] is the subcommand's name), and one line for --help.
 *
 * Exit status: 0 success; 1 a problem found (a NaN, a mismatch, a
 * failing test value) or a run-time failure; 2 bad usage or bad input.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "debugger.h"
#include "ompspin.h"
#include "tgdebug.h"

#ifndef TGDEBUG_SERVE
/* A build without libmicrohttpd (or Graphviz, or d3) has no server. */
int tgdebug_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    cli_error("tgdebug serve", "this tgdebug was built without libmicrohttpd, Graphviz or d3 "
                               "(bash scripts/tg-setup.sh installs them; then rebuild)");
    return TG_EXIT_USAGE;
}
#endif

static const tgd_command commands[] = {
    {"nanguard", tgd_nanguard, "run a function and stop at the node that makes the first NaN, Inf or huge value"},
    {"testvalues", tgd_testvalues, "run the graph as written on its variables' test values, node by node"},
    {"compare", tgd_compare, "compare the optimized function with the unoptimized one, node by node"},
    {"run", tgdebug_run, "call a function with breakpoints, logging every hit"},
    {"serve", tgdebug_serve, "debug a function in the browser: breakpoints, values, profile, graph"},
};
enum { NCOMMANDS = (int)(sizeof commands / sizeof commands[0]) };

static void usage(FILE *f) {
    fprintf(f, "usage: tgdebug SUBCOMMAND [ARGS...]\n\nSubcommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f,
            "\n'tgdebug SUBCOMMAND --help' describes each.\n"
            "  --help         this text\n"
            "  --version      print the version\n"
            "\nExit status: 0 success, 1 a problem found (NaN, mismatch, failure),\n"
            "2 bad usage or bad input.\n");
}

int tgdebug_main(int argc, char **argv) {
    cli_start(TGDEBUG);
    if (argc < 2) {
        fprintf(stderr, "%s: missing SUBCOMMAND (see tgdebug --help)\n", TGDEBUG);
        return TG_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        usage(stdout);
        return TG_EXIT_OK;
    }
    if (!strcmp(sub, "--version")) {
        cli_print_version("tgdebug");
        return TG_EXIT_OK;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(sub, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    cli_error(TGDEBUG, "unknown subcommand '%s' (see tgdebug --help)", sub);
    return TG_EXIT_USAGE;
}

#ifndef TGDEBUG_NO_MAIN
int main(int argc, char **argv) {
    tg_omp_respawn(argv); /* libgomp's spin count (ompspin.h) */
    return tgdebug_main(argc, argv);
}
#endif
