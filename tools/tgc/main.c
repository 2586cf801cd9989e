/* tgc: check, compile, run, print and export graphs and compiled
 * functions.
 *
 *   tgc check FILE
 *   tgc compile FILE.json [-f NAME]... [-O PRESET] [--include TAG]...
 *           [--exclude TAG]... [--no-gc] [--device cpu|cuda] -o OUT.tgf
 *   tgc run FILE [-f NAME] [-i ID=VALUE | -i FILE.npz]... [-o DIR | -o OUT.npz]
 *           [--compress[=LEVEL]] [--calls N] [-O PRESET]
 *           [--include TAG]... [--exclude TAG]... [--reoptimize] [--each]
 *           [--save-state OUT.tgf]
 *   tgc print FILE [-f NAME] [--optimized] [-O PRESET] [--include TAG]...
 *           [--exclude TAG]... [--ids int|char] [--types] [--shapes]
 *           [--profile N -i ID=VALUE...]
 *   tgc export FILE.tgf [-f NAME] -o GRAPH.json
 *
 * Exit status: 0 success; 1 a run-time failure; 2 bad usage or bad input.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ompspin.h"
#include "tensor/tensor.h"
#include "tgf_cmds.h"

static const char *TOOL = "tgc";

int tgc_cmd_cache(int argc, char **argv); /* cache.c */

static void usage(FILE *f) {
    fprintf(f,
            "usage: tgc check FILE\n"
            "       tgc compile FILE.json [-f NAME]... [-O PRESET] [--include TAG]...\n"
            "               [--exclude TAG]... [--no-gc] [--device cpu|cuda] -o OUT.tgf\n"
            "       tgc run FILE [-f NAME] [-i ID=VALUE | -i FILE.npz]... [-o DIR | -o OUT.npz]\n"
            "               [--compress[=LEVEL]] [--calls N]\n"
            "               [-O PRESET] [--include TAG]... [--exclude TAG]... [--device cpu|cuda]\n"
            "               [--dnn-conv-algo POLICY] [--reoptimize] [--each] [--save-state OUT.tgf]\n"
            "       tgc print FILE [-f NAME] [--optimized] [-O PRESET] [--include TAG]...\n"
            "               [--exclude TAG]... [--ids int|char] [--types] [--shapes]\n"
            "               [--profile N -i ID=VALUE...]\n"
            "       tgc export FILE.tgf [-f NAME] -o GRAPH.json\n"
            "       tgc cache list|clear [--older-than AGE]\n"
            "\n"
            "check    load FILE (interchange JSON), compile every function and print\n"
            "         one line per function.\n"
            "compile  optimize the functions of FILE (all, or those named by -f) and\n"
            "         save them, with their shared values, to a compiled-function file.\n"
            "run      run a function of FILE: a graph (.json), compiled on the spot, or a\n"
            "         compiled-function file (.tgf), restored without optimizing again.\n"
            "  -f NAME        the function (default: the only one, or 'main')\n"
            "  -i ID=VALUE    an input: a .npy file; an array of a .npz archive,\n"
            "                 FILE.npz (the array named ID, or its only array) or\n"
            "                 FILE.npz:NAME; or a JSON literal (3.5, [1, 2], true,\n"
            "                 \"nan\") read with the input's declared dtype\n"
            "  -i FILE.npz    every input named by an array of the archive (np.savez,\n"
            "                 np.savez_compressed); a later -i replaces one\n"
            "  -o DIR         write each output of the last call to DIR/<id>.npy\n"
            "                 (without -o the outputs are printed)\n"
            "  -o OUT.npz     write them to one archive instead, as np.savez does\n"
            "  --compress[=L] deflate the archive's arrays, as np.savez_compressed\n"
            "                 does, on the OpenMP threads: level L from 1 (fastest)\n"
            "                 to 9 (smallest), 6 by default (0: deflate's stored blocks)\n"
            "  --calls N      call N times with the same inputs, applying the updates\n"
            "                 of shared variables after each call (default 1); Ctrl-C\n"
            "                 stops after the call in progress, and -o and --save-state\n"
            "                 still write the state after it (exit 130)\n"
            "  --each         print one line per call with the scalar outputs\n"
            "                 (\"call 3: cost=0.6931\"), shapes for the others, instead\n"
            "                 of printing the outputs of the last call\n"
            "  -O PRESET      none, fast_compile or fast_run (default)\n"
            "  --include TAG, --exclude TAG\n"
            "                 turn rewrites on or off beyond the preset (repeatable)\n"
            "  --device DEV   cpu (default: $TG_DEVICE, else cpu) or cuda: nodes with a\n"
            "                 GPU kernel run on the GPU; without one, a line on stderr\n"
            "                 says so and the run stays on the CPU\n"
            "  --dnn-conv-algo POLICY\n"
            "                 how each cuDNN convolution chooses its algorithm:\n"
            "                 guess_once, guess_on_shape_change, time_once or\n"
            "                 time_on_shape_change (default: $TG_DNN_CONV_ALGO, else\n"
            "                 time_once)\n"
            "  --reoptimize   for a .tgf: optimize its saved original graph again\n"
            "  --save-state F after the run, write a .tgf with the updated shared values\n"
            "                 and every function of FILE (a checkpoint: running it\n"
            "                 resumes exactly where this run stopped)\n"
            "print    Theano's debugprint of a function: each node once with an id, later\n"
            "         uses by id; --optimized prints it after the optimizer (with -O,\n"
            "         --include and --exclude as for run; a .tgf is always optimized).\n"
            "export   write the optimized graph of a .tgf as interchange JSON.\n"
            "\n"
            "cache  list or clear the compiled composite kernels (TG_CACHE_DIR, else\n"
            "       $XDG_CACHE_HOME/tg, else ~/.cache/tg).\n"
            "\n"
            "Exit status: 0 success, 1 a run-time failure, 2 bad usage or bad input.\n");
}

static tg_graph *load(const char *path) {
    if (cli_is_tgf(path)) {
        cli_error(TOOL, "%s: check takes a graph (.json); run, print and export read .tgf files",
                  path);
        return NULL;
    }
    tg_ctx *ctx = tg_ctx_new();
    cli_heap_for(path, 80);
    tg_graph *g = cli_graph_load(TOOL, path, ctx);
    if (!g) cli_error(TOOL, "%s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    return g;
}

static int cmd_check(int argc, char **argv) {
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'V') {
            cli_print_version("tgc");
            return TG_EXIT_OK;
        }
        if (c != 'h') return cli_getopt_error(TOOL, "check", c, argv);
        printf("usage: tgc check FILE\n"
               "Load FILE (interchange JSON), compile every function and print one line\n"
               "per function: its inputs, outputs and node count.\n");
        return TG_EXIT_OK;
    }
    if (optind != argc - 1) {
        cli_error(TOOL, optind >= argc ? "check: missing FILE" : "check: unexpected argument '%s'",
                  optind < argc ? argv[optind + 1] : "");
        return TG_EXIT_USAGE;
    }
    const char *path = argv[optind];
    tg_graph *g = load(path);
    if (!g) return TG_EXIT_USAGE;
    tg_ctx *ctx = tg_ctx_new();
    int rc = TG_EXIT_OK;
    printf("%s: %d nodes, %d variables, %d function%s\n", path, tg_graph_node_count(g),
           tg_graph_var_count(g), tg_graph_function_count(g),
           tg_graph_function_count(g) == 1 ? "" : "s");
    for (int i = 0; i < tg_graph_function_count(g); i++) {
        tg_function *f = tg_function_compile(g, i, NULL, ctx);
        if (!f) {
            cli_error(TOOL, "%s", tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
            continue;
        }
        printf("  %s(", cli_text(tg_function_name(f)));
        for (int k = 0; k < tg_function_input_count(f); k++)
            printf("%s%s", k ? ", " : "", tg_function_input_id(f, k));
        printf(") -> (");
        for (int k = 0; k < tg_function_output_count(f); k++)
            printf("%s%s", k ? ", " : "", tg_function_output_id(f, k));
        printf("): %d nodes\n", tg_function_node_count(f));
        tg_function_free(f);
    }
    tg_ctx_free(ctx);
    tg_graph_free(g);
    return rc;
}

static void print_each(long call, const tg_function *f, tg_array **outs) {
    printf("call %ld:", call);
    for (int k = 0; k < tg_function_output_count(f); k++) {
        const tg_array *a = outs[k];
        printf(" %s=", tg_function_output_id(f, k));
        if (tg_array_size(a) == 1 && tg_array_ndim(a) <= 1) {
            /* integers read at their width: a double holds int64 and
             * uint64 only to 2^53 */
            const void *p = tg_array_data(a);
            switch (tg_array_dtype(a)) {
            case TG_INT8: printf("%d", *(const int8_t *)p); break;
            case TG_INT16: printf("%d", *(const int16_t *)p); break;
            case TG_INT32: printf("%d", *(const int32_t *)p); break;
            case TG_INT64: printf("%lld", (long long)*(const int64_t *)p); break;
            case TG_UINT8: printf("%u", *(const uint8_t *)p); break;
            case TG_UINT16: printf("%u", *(const uint16_t *)p); break;
            case TG_UINT32: printf("%u", *(const uint32_t *)p); break;
            case TG_UINT64: printf("%llu", (unsigned long long)*(const uint64_t *)p); break;
            case TG_BOOL: printf("%d", *(const uint8_t *)p != 0); break;
            default: {
                /* NaN as NumPy and the normal output print it, whatever
                 * its sign bit (glibc's %g writes -nan for log(-1)) */
                double v = tg_array_get_flat(a, 0);
                if (isnan(v))
                    printf("nan");
                else
                    printf("%.6g", v);
                break;
            }
            }
        } else {
            printf("%s(", tg_dtype_name(tg_array_dtype(a)));
            for (int d = 0; d < tg_array_ndim(a); d++)
                printf("%s%lld", d ? ", " : "", (long long)tg_array_shape(a)[d]);
            printf(")");
        }
    }
    printf("\n");
}

static bool ends_with_npz(const char *s) {
    size_t n = strlen(s);
    return n > 4 && !strcmp(s + n - 4, ".npz");
}

/* -o before the run: a file tried where the archive goes, or in the
 * folder, or the nearest existing folder above one to be made, so that a
 * destination that cannot be written is bad input said at once (exit 2,
 * one line); a write that fails after the run (a full disk) is then a
 * run-time failure (exit 1), as for compile, export and --save-state.
 * Nothing is made here: the folders are made when the outputs are written
 * (write_outputs), and a run that fails leaves none. */
static int out_dest_check(const char *dest) {
    if (ends_with_npz(dest)) return cli_out_check_mkdirs(TOOL, "-o", dest);
    return cli_dir_check(TOOL, "-o", dest);
}

/* The outputs must not replace the file run or an -i file
 * (cli_outputs_ok): -o OUT.npz, or each DIR/<id>.npy, and --save-state,
 * which may replace a .tgf run (read whole before the run: a checkpoint
 * updated in place), but not a graph. */
static bool run_outputs_ok(const char *path, const char *dest, const char *save, const tg_function *f,
                           const cli_input *inputs, int ninputs) {
    int nout = dest && !ends_with_npz(dest) ? tg_function_output_count(f) : 1;
    cli_file *outs = calloc((size_t)nout + 2, sizeof *outs);
    tg_str *names = calloc((size_t)nout + 1, sizeof *names);
    bool ok = false;
    if (!outs || !names) {
        cli_error(TOOL, "run: out of memory");
        goto done;
    }
    int n = 0;
    outs[n++] = (cli_file){"--save-state", save, "the checkpoint"};
    if (dest && ends_with_npz(dest)) {
        outs[n++] = (cli_file){"-o", dest, "the outputs"};
    } else if (dest) {
        for (int k = 0; k < nout; k++) {
            tg_str_addf(&names[k], "%s/%s.npy", dest, tg_function_output_id(f, k));
            if (!names[k].s) {
                cli_error(TOOL, "run: out of memory");
                goto done;
            }
            outs[n++] = (cli_file){"-o", names[k].s, "the output"};
        }
    }
    const cli_file in = {"FILE", path, "the file run"};
    int skip = save && cli_is_tgf(path) ? 1 : 0;
    ok = cli_outputs_ok(TOOL, outs, n, NULL, 0, inputs, ninputs) &&
         cli_outputs_ok(TOOL, outs + skip, n - skip, &in, 1, NULL, 0);
done:
    for (int k = 0; names && k < nout; k++) tg_str_free(&names[k]);
    free(names);
    free(outs);
    return ok;
}

/* -o: each output of the last call once, by its id (an output listed
 * twice is written once): to DIR/<id>.npy, or with OUT.npz to one archive
 * (its folder made when missing, as DIR is; both tried before the run,
 * out_dest_check, so that what fails here is a run-time failure). */
static int write_outputs(const char *dest, int level, const tg_function *f, tg_array **outs, tg_ctx *ctx) {
    int nout = tg_function_output_count(f), n = 0, rc = TG_EXIT_OK;
    const char **names = calloc((size_t)nout + 1, sizeof *names);
    const tg_array **arrays = calloc((size_t)nout + 1, sizeof *arrays);
    if (!names || !arrays) {
        cli_error(TOOL, "-o %s: out of memory", dest);
        rc = TG_EXIT_FOUND;
        goto done;
    }
    for (int k = 0; k < nout; k++) {
        const char *id = tg_function_output_id(f, k);
        bool seen = false;
        for (int j = 0; j < n; j++) seen |= strcmp(names[j], id) == 0;
        if (seen) continue;
        names[n] = id;
        arrays[n++] = outs[k];
    }
    if (ends_with_npz(dest)) {
        if (cli_npz_save(TOOL, "-o", dest, level, n, names, arrays)) rc = TG_EXIT_FOUND;
        goto done;
    }
    if (cli_mkdirs(dest) < 0) {
        cli_error(TOOL, "-o %s: cannot create the folder: %s", dest, strerror(errno));
        rc = TG_EXIT_FOUND;
        goto done;
    }
    /* The first failure ends it (a full disk would fail every later file
     * too): one line; the files written before it stay. */
    for (int k = 0; k < n && rc == TG_EXIT_OK; k++) {
        tg_str p = {0};
        tg_str_addf(&p, "%s/%s.npy", dest, names[k]);
        if (tg_npy_save(p.s, arrays[k], ctx)) {
            cli_error(TOOL, "-o %s", tg_ctx_message(ctx));
            rc = TG_EXIT_FOUND;
        }
        tg_str_free(&p);
    }
done:
    free(names);
    free(arrays);
    return rc;
}

static int cmd_run(int argc, char **argv) {
    const char *fname = NULL, *outdir = NULL, *preset = NULL, *save = NULL, *device = NULL, *algo = NULL;
    const char *calls_s = NULL, *compress_s = NULL; /* (each given once) */
    long calls = 1;
    int level = CLI_NPZ_STORED;
    bool each = false, reopt = false;
    cli_taglist inc = {{0}, 0}, exc = {{0}, 0};
    cli_input inputs[CLI_MAX_INPUTS];
    int ninputs = 0;
    static const struct option opts[] = {{"calls", required_argument, 0, 'c'},
                                         {"each", no_argument, 0, 'e'},
                                         {"save-state", required_argument, 0, 's'},
                                         {"include", required_argument, 0, 'I'},
                                         {"exclude", required_argument, 0, 'X'},
                                         {"reoptimize", no_argument, 0, 'r'},
                                         {"device", required_argument, 0, 'd'},
                                         {"dnn-conv-algo", required_argument, 0, 'a'},
                                         {"compress", optional_argument, 0, 'z'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    opterr = 0; /* one line of our own (cli_getopt_error) */
    while ((c = getopt_long(argc, argv, ":f:i:o:O:h", opts, NULL)) != -1) {
        switch (c) {
        case 'I':
        case 'X':
            if (!cli_tag_opt(TOOL, c, &inc, &exc, optarg)) return TG_EXIT_USAGE;
            break;
        case 'r': reopt = true; break;
        case 'f':
            if (!cli_once(TOOL, "-f", &fname, optarg)) return TG_EXIT_USAGE;
            break;
        case 'o':
            if (!cli_once(TOOL, "-o", &outdir, optarg) ||
                !cli_path_file_ok(TOOL, "-o", optarg, "a folder or archive of outputs (without -o they are printed)"))
                return TG_EXIT_USAGE;
            break;
        case 'O':
            if (!cli_once(TOOL, "-O", &preset, optarg)) return TG_EXIT_USAGE;
            break;
        case 'e': each = true; break;
        case 's':
            if (!cli_once(TOOL, "--save-state", &save, optarg) ||
                !cli_path_file_ok(TOOL, "--save-state", optarg, "a compiled-function file"))
                return TG_EXIT_USAGE;
            break;
        case 'd':
            if (!cli_once(TOOL, "--device", &device, optarg) || !cli_device_ok(TOOL, optarg)) return TG_EXIT_USAGE;
            break;
        case 'a': /* checked by the compile: exit 2 */
            if (!cli_once(TOOL, "--dnn-conv-algo", &algo, optarg)) return TG_EXIT_USAGE;
            break;
        case 'z':
            if (!cli_once(TOOL, "--compress", &compress_s, optarg ? optarg : "(no level)")) return TG_EXIT_USAGE;
            level = -1;
            if (optarg && !(optarg[0] >= '0' && optarg[0] <= '9' && !optarg[1])) {
                cli_error(TOOL, "--compress: expected a level from 0 to 9, got '%s'", optarg);
                return TG_EXIT_USAGE;
            }
            if (optarg) level = optarg[0] - '0';
            break;
        case 'h': usage(stdout); return TG_EXIT_OK;
        case 'V': cli_print_version("tgc"); return TG_EXIT_OK;
        case 'c': {
            if (!cli_once(TOOL, "--calls", &calls_s, optarg)) return TG_EXIT_USAGE;
            char *end;
            errno = 0;
            calls = strtol(optarg, &end, 10);
            if (*end || end == optarg || errno || calls < 1) {
                cli_error(TOOL, "--calls: expected a positive integer, got '%s'", optarg);
                return TG_EXIT_USAGE;
            }
            break;
        }
        case 'i':
            if (!cli_input_add(TOOL, inputs, &ninputs, CLI_MAX_INPUTS, optarg)) return TG_EXIT_USAGE;
            break;
        default: return cli_getopt_error(TOOL, "run", c, argv);
        }
    }
    if (optind != argc - 1) {
        cli_error(TOOL, optind >= argc ? "run: missing FILE" : "run: unexpected argument '%s'",
                  optind < argc ? argv[optind + 1] : "");
        return TG_EXIT_USAGE;
    }
    if (preset && strcmp(preset, "none") && strcmp(preset, "fast_compile") && strcmp(preset, "fast_run")) {
        cli_error(TOOL, "-O: unknown preset '%s' (none, fast_compile or fast_run)", preset);
        return TG_EXIT_USAGE;
    }
    if (level != CLI_NPZ_STORED && !(outdir && ends_with_npz(outdir))) {
        cli_error(TOOL, "--compress: applies to -o OUT.npz (an archive), %s",
                  outdir ? "not to -o DIR" : "and there is no -o");
        return TG_EXIT_USAGE;
    }
    const char *path = argv[optind];
    int rc = TG_EXIT_OK;
    tg_ctx *ctx = tg_ctx_new();
    tg_function *f = NULL;
    tg_array **ins = NULL, **outs = NULL;
    int nin = 0, nout = 0;
    tgc_source src = {0};
    int ninc = inc.n, nexc = exc.n;
    if (cli_is_tgf(path) && !reopt && (preset || ninc || nexc || device || algo)) {
        /* Loading a .tgf never optimizes; saying so beats ignoring -O. */
        cli_error(TOOL, "%s is already optimized: -O, --include, --exclude, --device and --dnn-conv-algo "
                        "apply with --reoptimize (or when compiling it)",
                  path);
        rc = TG_EXIT_USAGE;
        goto done;
    }
    tg_compile_options co = {.preset = preset, .include = cli_tags(&inc),
                             .exclude = cli_tags(&exc), .device = device, .dnn_conv_algo = algo};
    /* A checkpoint that cannot be written is said before the run, not
     * after it. */
    if (save && (rc = cli_out_check(TOOL, "--save-state", save))) goto done;
    if (outdir && (rc = out_dest_check(outdir))) goto done;
    /* --reoptimize with no -O, --include, --exclude, --device or --dnn-conv-algo: the
     * file's own options. */
    bool given = preset || ninc || nexc || device || algo;
    if ((rc = tgc_source_open(&src, TOOL, path, fname, given ? &co : NULL, reopt))) goto done;
    f = src.f;
    if (!run_outputs_ok(path, outdir, save, f, inputs, ninputs)) {
        rc = TG_EXIT_USAGE;
        goto done;
    }
    nin = tg_function_input_count(f);
    nout = tg_function_output_count(f);
    ins = calloc((size_t)nin + 1, sizeof *ins);
    outs = calloc((size_t)nout + 1, sizeof *outs);
    if ((rc = cli_inputs_read(TOOL, NULL, f, inputs, ninputs, ins))) goto done;
    cli_progress prog;
    cli_progress_start(&prog, each ? 0 : calls, "running");
    /* Ctrl-C stops after the call in progress: -o and --save-state then
     * write the state after it (a checkpoint of the calls done). */
    cli_soft_interrupt(true);
    long done_calls = 0;
    for (long call = 1; call <= calls; call++) {
        for (int k = 0; k < nout; k++) {
            tg_array_free(outs[k]);
            outs[k] = NULL;
        }
        if (tg_function_call(f, ins, outs, ctx)) {
            cli_progress_end(&prog);
            cli_error(TOOL, "call %ld: %s", call, tg_ctx_message(ctx));
            int st = tg_ctx_status(ctx);
            rc = st == TG_ETYPE || st == TG_EMISSING ? TG_EXIT_USAGE : TG_EXIT_FOUND;
            goto done;
        }
        if (each) print_each(call, f, outs);
        cli_progress_step(&prog, call);
        done_calls = call;
        if (cli_interrupted && call < calls) break;
    }
    cli_soft_interrupt(false);
    cli_progress_end(&prog);
    if (cli_interrupted && done_calls == calls) cli_interrupted = 0; /* (the last call was in progress) */
    if (cli_interrupted) {
        int sg = cli_interrupted;
        cli_error(TOOL, "interrupted by %s after call %ld of %ld%s",
                  sg == SIGINT ? "SIGINT" : sg == SIGTERM ? "SIGTERM" : "SIGHUP", done_calls, calls,
                  outdir || save ? ": -o and --save-state write the state after it" : "");
    }
    if (outdir) {
        rc = write_outputs(outdir, level, f, outs, ctx);
    } else if (!each) {
        for (int k = 0; k < nout; k++) {
            printf("%s: ", tg_function_output_id(f, k));
            tg_array_print(stdout, outs[k]);
        }
    }
    if (save && rc == TG_EXIT_OK) rc = tgc_source_save_state(&src, TOOL, save, &co);
    if (cli_interrupted && rc == TG_EXIT_OK) rc = 128 + cli_interrupted; /* as the shell reports a signal */
done:
    for (int i = 0; ins && i < nin; i++) tg_array_free(ins[i]);
    for (int k = 0; outs && k < nout; k++) tg_array_free(outs[k]);
    free(ins);
    free(outs);
    tgc_source_close(&src);
    tg_ctx_free(ctx);
    return rc;
}

int main(int argc, char **argv) {
    /* (run calls functions: libgomp's spin count, ompspin.h) */
    /* the commands that run functions (print with --profile) */
    if (argc >= 2 && (!strcmp(argv[1], "run") || !strcmp(argv[1], "print"))) tg_omp_respawn(argv);
    cli_start(TOOL);
    if (argc < 2) {
        /* one line, as the other tools say it; the usage is --help's */
        cli_error(TOOL, "missing COMMAND (check, compile, run, print, export, cache; see tgc --help)");
        return TG_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return TG_EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        cli_print_version("tgc");
        return TG_EXIT_OK;
    }
    if (!strcmp(cmd, "check")) return cmd_check(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "compile")) return tgc_cmd_compile(argc - 1, argv + 1);
    if (!strcmp(cmd, "print")) return tgc_cmd_print(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return tgc_cmd_export(argc - 1, argv + 1);
    if (!strcmp(cmd, "cache")) return tgc_cmd_cache(argc - 1, argv + 1); /* cache.c */
    cli_error(TOOL,
              "unknown command '%s' (check, compile, run, print, export, cache; see tgc --help)",
              cmd);
    return TG_EXIT_USAGE;
}
