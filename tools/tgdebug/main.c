/* tgdebug: debugging tools for tg functions, one subcommand each.
 *
 *   tgdebug COMMAND [ARGS...]    (tgdebug COMMAND --help for each)
 *
 * Exit status: 0 success; 1 the run found a problem (a run-time failure);
 * 2 bad usage or bad input.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "debugger.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
    const char *help;
} command;

#ifndef TGDEBUG_SERVE
/* A build without libmicrohttpd (or Graphviz, or d3) has no server. */
int tgdebug_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    cli_error("tgdebug serve", "this tgdebug was built without libmicrohttpd, Graphviz or d3 "
                               "(bash scripts/tg-setup.sh installs them; then rebuild)");
    return TG_EXIT_USAGE;
}
#endif

static const command COMMANDS[] = {
    {"run", tgdebug_run, "call a function with breakpoints, logging every hit"},
    {"serve", tgdebug_serve, "debug a function in the browser: breakpoints, values, profile, graph"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: tgdebug COMMAND [ARGS...]\n\nCommands:\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n`tgdebug COMMAND --help` describes each. --version prints the version.\n"
               "Exit status: 0 success, 1 a run-time failure, 2 bad usage or bad input.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        cli_error("tgdebug", "missing COMMAND (see tgdebug --help)");
        return TG_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return TG_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tgdebug %s\n", tg_version());
        return TG_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].run(argc - 1, argv + 1);
    cli_error("tgdebug", "unknown command '%s' (see tgdebug --help)", argv[1]);
    return TG_EXIT_USAGE;
}
