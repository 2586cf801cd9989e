/* What `tgdebug run` and `tgdebug serve` share: options, loading the
 * function (a graph or a .tgf) and its -i values, calling it. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "debugger.h"

static bool parse_long(const char *tool, const char *opt, const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || end == s || errno || v < min || v > max) {
        cli_error(tool, "%s: expected an integer from %ld to %ld, got '%s'", opt, min, max, s);
        return false;
    }
    *out = v;
    return true;
}

int dbg_opts_parse(int argc, char **argv, bool serve, dbg_opts *o, dbg *d, void (*usage)(FILE *)) {
    /* (--port and --bind are serve's: run takes them as unknown options,
     * named as given) */
    /* run takes serve's options but the first two */
    static const struct option longs[] = {{"port", required_argument, 0, 'p'},   {"bind", required_argument, 0, 'B'},
                                          {"calls", required_argument, 0, 'c'},  {"break", required_argument, 0, 'b'},
                                          {"when", required_argument, 0, 'w'},   {"help", no_argument, 0, 'h'},
                                          {"version", no_argument, 0, 'V'},      {"include", required_argument, 0, 'I'},
                                          {"exclude", required_argument, 0, 'X'}, {0, 0, 0, 0}};
    const char *tool = o->tool;
    const char *calls_s = NULL, *port_s = NULL, *bind_s = NULL; /* (each given once) */
    const char *node = NULL; /* the last --break, waiting for its --when */
    int c;
    o->calls = 1;
    o->port = 0;
    o->bind = "127.0.0.1";
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:i:O:h", serve ? longs : longs + 2, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return -1;
        case 'V': cli_print_version("tgdebug"); return -1;
        case 'I':
        case 'X':
            if (!cli_tag_opt(tool, c, &o->inc, &o->exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'f':
            if (!cli_once(tool, "-f", &o->fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once(tool, "-O", &o->preset, optarg)) return TG_EXIT_USAGE;
            if (strcmp(optarg, "none") && strcmp(optarg, "fast_compile") && strcmp(optarg, "fast_run")) {
                cli_error(tool, "-O: unknown preset '%s' (none, fast_compile or fast_run)", optarg);
                return TG_EXIT_USAGE;
            }
            break;
        case 'i':
            if (!cli_input_add(tool, o->inputs, &o->ninputs, CLI_MAX_INPUTS, optarg)) return TG_EXIT_USAGE;
            break;
        case 'c':
            if (!cli_once(tool, "--calls", &calls_s, optarg)) return TG_EXIT_USAGE;
            if (!parse_long(tool, "--calls", optarg, 1, 1000000000L, &o->calls)) return TG_EXIT_USAGE;
            break;
        case 'b':
            if (node && !dbg_add_break(d, node, NULL)) return TG_EXIT_USAGE;
            if (!*optarg) {
                cli_error(tool, "--break: expected a node key or name");
                return TG_EXIT_USAGE;
            }
            node = optarg;
            break;
        case 'w':
            if (!node) {
                cli_error(tool, "--when '%s': give it after the --break it qualifies", optarg);
                return TG_EXIT_USAGE;
            }
            if (!dbg_add_break(d, node, optarg)) return TG_EXIT_USAGE;
            node = NULL;
            break;
        case 'B':
            if (!cli_once(tool, "--bind", &bind_s, optarg)) return TG_EXIT_USAGE;
            o->bind = optarg;
            break;
        case 'p':
            if (!cli_once(tool, "--port", &port_s, optarg) || !parse_long(tool, "--port", optarg, 0, 65535, &o->port))
                return TG_EXIT_USAGE;
            break;
        default: return cli_getopt_error(tool, NULL, c, argv);
        }
    }
    if (node && !dbg_add_break(d, node, NULL)) return TG_EXIT_USAGE;
    if (optind != argc - 1) {
        if (optind >= argc)
            cli_error(tool, "missing FILE (see %s --help)", tool);
        else
            cli_error(tool, "unexpected argument '%s'", argv[optind + 1]);
        return TG_EXIT_USAGE;
    }
    o->path = argv[optind];
    if ((o->preset || o->inc.n || o->exc.n) && cli_is_tgf(o->path)) {
        cli_error(tool, "%s is already optimized: -O, --include and --exclude apply when compiling it (tgc compile)",
                  o->path);
        return TG_EXIT_USAGE;
    }
    return TG_EXIT_OK;
}

int dbg_session_open(const dbg_opts *o, dbg_session *s) {
    tg_compile_options co = {.preset = o->preset, .include = cli_tags(&o->inc), .exclude = cli_tags(&o->exc)};
    return cli_session_open(s, o->tool, NULL, o->path, o->fname, &co, o->inputs, o->ninputs);
}

int dbg_session_call(dbg_session *s, tg_ctx *ctx) {
    for (int k = 0; k < s->nout; k++) {
        tg_array_free(s->outs[k]);
        s->outs[k] = NULL;
    }
    return tg_function_call(s->f, s->ins, s->outs, ctx);
}

void dbg_session_close(dbg_session *s) { cli_session_close(s); }
