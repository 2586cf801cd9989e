/* tgdebug run: call a function with breakpoints, log every hit (node,
 * call, the monitored values' statistics) and go on. */
#include <stdlib.h>
#include <string.h>

#include "debugger.h"

static const char *TOOL = "tgdebug run";

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgdebug run FILE [-f NAME] [-i ID=VALUE]... [--calls N] [-O PRESET]\n"
            "                   [--include TAG]... [--exclude TAG]...\n"
            "                   [--break NODE [--when EXPR]]...\n"
            "\n"
            "Call a function of FILE (interchange JSON or a .tgf) and log every\n"
            "breakpoint hit on stderr: the node, the call, the monitored values'\n"
            "dtype, shape, min, max, mean and NaN/inf counts; then go on.\n"
            "Breakpoint ops of the graph are caught too (when their condition is true).\n"
            "  -f NAME         the function (default: the only one, or 'main')\n"
            "  -i ID=VALUE     an input: a .npy file, an array of a .npz archive\n"
            "                  (FILE.npz or FILE.npz:NAME), or a JSON literal\n"
            "  -i FILE.npz     every input named by an array of the archive\n"
            "  --calls N       call it N times (default 1); updates applied each time\n"
            "  -O PRESET       none, fast_compile or fast_run (default); not for a .tgf\n"
            "  --include TAG, --exclude TAG\n"
            "                  turn rewrites on or off beyond the preset (a pass, a group\n"
            "                  such as fusion or inplace, or a rewrite's name;\n"
            "                  repeatable); not for a .tgf\n"
            "  --break NODE    stop after NODE runs: a node key (its first output's id)\n"
            "                  or a node name of the file; a node the optimizer fused or\n"
            "                  rewrote maps to the node that stands for it\n"
            "  --when EXPR     only when EXPR holds, e.g. 'max(abs(x))>1e3',\n"
            "                  'any(isnan(x))', 'min(x0)<0 and call>=3', 'mean(in1)>0.5'\n"
            "                  (docs/tgdebug-serve.md)\n"
            "  --version       print the version\n"
            "\n"
            "Exit status: 0 the run ended (hits or not), 1 a run-time failure,\n"
            "2 bad usage or bad input.\n");
}

static int log_hit(dbg *d, dbg_hit *h, tg_ctx *ctx) {
    tg_str s = {0};
    tg_function *f = d->f;
    tg_str_addf(&s, "tgdebug: hit %ld: call %ld, %s node %s (%s): %s", d->hits, h->call,
                h->after ? "after" : "before", tg_function_node_key(f, h->node), tg_function_node_op(f, h->node),
                h->reason);
    for (int i = 0; i < h->nvals; i++) {
        if (!h->vals[i].is_out && h->after) continue; /* the outputs are what --break watches */
        tg_str_addf(&s, "\n  ");
        dbg_value_describe(&h->vals[i], &s);
    }
    if (s.oom) {
        tg_str_free(&s);
        return tg_errorf(ctx, TG_ENOMEM, "out of memory");
    }
    fprintf(stderr, "%s\n", s.s);
    fflush(stderr);
    tg_str_free(&s);
    return 0;
}

int tgdebug_run(int argc, char **argv) {
    dbg_opts o = {.tool = TOOL};
    dbg d = {0};
    dbg_session s = {0};
    int rc = dbg_opts_parse(argc, argv, false, &o, &d, usage);
    if (rc) {
        dbg_free(&d);
        return rc < 0 ? TG_EXIT_OK : rc;
    }
    tg_ctx *ctx = tg_ctx_new();
    if ((rc = dbg_session_open(&o, &s)) || (rc = dbg_attach(&d, s.f, s.g, true))) goto done;
    d.on_hit = log_hit;
    cli_progress prog;
    cli_progress_start(&prog, o.calls, "running");
    for (long c = 1; c <= o.calls; c++) {
        d.call = c;
        if (dbg_session_call(&s, ctx)) {
            cli_progress_end(&prog);
            cli_error(TOOL, "call %ld: %s", c, tg_ctx_message(ctx));
            int st = tg_ctx_status(ctx);
            rc = st == TG_ETYPE || st == TG_EMISSING ? TG_EXIT_USAGE : TG_EXIT_FOUND;
            goto done;
        }
        cli_progress_step(&prog, c);
    }
    cli_progress_end(&prog);
    fprintf(stderr, "tgdebug: %ld hit%s in %ld call%s\n", d.hits, d.hits == 1 ? "" : "s", o.calls,
            o.calls == 1 ? "" : "s");
done:
    dbg_free(&d);
    dbg_session_close(&s);
    tg_ctx_free(ctx);
    return rc;
}
