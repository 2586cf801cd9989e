/* What the tools share: errors and exit codes, reading -i values, writing
 * outputs, a progress bar. */
#ifndef TG_CLI_H
#define TG_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "tg/tg.h"

/* Exit statuses of every tool (DESIGN.md): */
enum { TG_EXIT_OK = 0, TG_EXIT_FOUND = 1, TG_EXIT_USAGE = 2 };

/* Print "tool: message" on stderr. */
void cli_error(const char *tool, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as one line of text for a terminal: a name from the file (a function's
 * or node's name, which the format lets hold anything) with its control
 * characters (C0, DEL, and C1 in UTF-8, which some terminals read as
 * CSI) written as JSON writes them (\n, \t, \r, \u001b...) and a
 * backslash doubled, so that it can neither drive the terminal nor begin a
 * line of its own. s itself when it holds none, else a copy that stays
 * valid for the next three calls. */
const char *cli_text(const char *s);
/* (Before main, every tool that links this file gives /dev/null to a
 * standard descriptor, 0-2, that was closed at start, so that no file it
 * opens takes that number: cli.c, reserve_std_fds.)
 * Call first in main. Checks at exit that everything printed reached
 * stdout: if not, one line on stderr and exit status 1 (TG_EXIT_FOUND).
 * Turns off glibc's fast bins, whose LIFO lists of small freed chunks
 * (the JSON tree a graph file is parsed into: millions of them for
 * 100,000 nodes) the first large allocation after the load would
 * otherwise walk and merge out of order (docs/optimizer.md). */
void cli_start(const char *tool);
/* cli_start also takes SIGINT, SIGTERM and SIGHUP: the temporaries of the
 * saves in progress are removed (the old file stays, and no
 * NAME.tmp.PID.N is left) and the process dies of the signal, as without
 * the handler. Between cli_soft_interrupt(true) and (false) the first one
 * is only noted in cli_interrupted (the signal's number), for a loop of
 * calls to stop after the current one and still write what it was asked
 * to; a second one stops at once. */
extern volatile sig_atomic_t cli_interrupted;
void cli_soft_interrupt(bool on);
/* --version: "TOOL VERSION", then the BLAS the process loaded (OpenBLAS's
 * configuration: its OpenMP or pthreads build, its kernel) and the
 * OpenMP threads, so that figures from two machines or builds can be told
 * apart. */
void cli_print_version(const char *tool);
/* What timings depend on beyond the graph, for reports read later or
 * beside others: tg's version, the BLAS loaded (OpenBLAS's
 * configuration), the OpenMP threads and GOMP_SPINCOUNT (null: unset),
 * the cores online and the CPU's model name (null: unknown). A new
 * object; cli_environment_line writes the same on one line. */
struct json_object *cli_environment_json(void);
void cli_environment_line(char *buf, size_t size);
/* Before loading `path`: when it is a file of 64 KiB or more, grow the
 * heap by `factor` times its size (the tool's peak per byte of JSON) and
 * keep it when freed (M_TOP_PAD), so that the compile reuses the memory
 * the parse freed. TG_THP=1: that stretch is also offered for transparent
 * huge pages; TG_THP=0: nothing. */
void cli_heap_for(const char *path, unsigned factor);
/* --device DEV: true when DEV names a device (cpu, cuda); else false, with
 * the message "--device: unknown device ..." printed after `prefix` (the
 * tool's name, "tgdebug: nanguard" for a subcommand). */
bool cli_device_ok(const char *prefix, const char *dev);
/* An option that takes one value: *slot = val, or, when it was given
 * already, "OPT given twice ('a' and 'b')" and false (the last one
 * silently winning hid a typo in a long command line). */
bool cli_once(const char *prefix, const char *opt, const char **slot, const char *val);
/* tg_graph_load, then the load's warnings (tg_graph_warning) on stderr as
 * "prefix: warning: ...". */
struct tg_graph *cli_graph_load(const char *prefix, const char *path, tg_ctx *ctx);

/* -i ID=VALUE pairs, and -i FILE.npz (id empty, value the path). */
typedef struct cli_input {
    char id[160];
    const char *value; /* borrowed from the argument */
} cli_input;

/* Parse "ID=VALUE", or "FILE.npz" (every input the archive names: no '=',
 * or what comes before the first '=' cannot be an id, as in
 * ./k=1.npz); false when there is no '=' and no .npz, the id is empty or
 * too long. */
bool cli_input_parse(const char *arg, cli_input *out);

/* Read VALUE for input i of f: a path to a .npy file (when it ends in
 * ".npy"); an array of a .npz archive, "FILE.npz" (the array named after
 * the input, or the archive's only array) or "FILE.npz:NAME"; or a JSON
 * literal (3.5, [1, 2], true, "nan") read with the input's declared dtype. The value must fit the input's declared dtype
 * (a safe cast) and shape. NULL with a message on ctx otherwise. */
tg_array *cli_value_read(const tg_function *f, int i, const char *value, tg_ctx *ctx);

/* Append the -i argument `arg` to inputs (n entries so far, room for
 * max): false, with one line on stderr, when it is not ID=VALUE or there
 * is no room. */
#define CLI_MAX_INPUTS 256
bool cli_input_add(const char *tool, cli_input *inputs, int *n, int max, const char *arg);

/* Fill ins[0..nin-1] (zeroed by the caller) with the -i values for f's
 * inputs, in order (a later one replaces an earlier one): an -i naming no
 * input of f, an archive none of whose arrays is one, a value that cannot
 * be read, or an input left without a value is one line on stderr ("what" prefixes it,
 * may be NULL) and TG_EXIT_USAGE; TG_EXIT_OK otherwise. The arrays belong
 * to the caller either way. */
int cli_inputs_read(const char *tool, const char *what, const tg_function *f,
                    const cli_input *inputs, int ninputs, tg_array **ins);

/* The one line for what getopt_long returned as ':' (a missing value)
 * or '?' (an unknown option), with opterr 0 and an optstring that starts
 * with ':': "tgc run: unknown option '--foo' (see tgc run --help)".
 * Returns TG_EXIT_USAGE. */
int cli_getopt_error(const char *tool, const char *cmd, int c, char **argv);

/* True when `path` names a compiled-function file: a name ending in
 * ".tgf", or a file that starts with the format's magic number
 * (tg_tgf_is_file). */
bool cli_is_tgf(const char *path);

/* For a key that a grad, rop or lop expansion made (it names no node of
 * the file): whose derivative it is, in the words tgprof's tables and
 * tgc print use, "grad gW1 of h" ("grad gW1" for the seed), into buf;
 * false (buf untouched) for any other key. */
bool cli_gradient_text(const tg_function *f, const char *key, char *buf, size_t size);

/* A function opened for running: a graph file (.json) loaded and its
 * function `fname` compiled with `co`, or a .tgf restored as saved (a file
 * from another build says so in one "warning:" line); then its inputs read
 * from the -i values, and room for its outputs. */
typedef struct cli_session {
    tg_graph *g;
    struct tg_tgf *tgf;
    tg_function *f; /* borrowed from tgf for a .tgf */
    int nin, nout;
    tg_array **ins, **outs;
} cli_session;
/* TG_EXIT_OK, or the exit status with one line on stderr ("tool: what:
 * message"; what may be NULL). Close s either way. */
int cli_session_open(cli_session *s, const char *tool, const char *what, const char *path,
                     const char *fname, const tg_compile_options *co, const cli_input *inputs,
                     int ninputs);
void cli_session_close(cli_session *s);

/* Create a folder and its parents (mkdir -p). 0 or -1 with errno. */
int cli_mkdirs(const char *path);
/* Write n arrays to the archive `path`, its folder made when missing, as
 * -o DIR is: stored (tg_npz_save) for level CLI_NPZ_STORED, else deflated
 * at level (tg_npz_save_compressed: 0-9, -1 for 6). 0, or -1 with one line
 * on stderr ("prefix: opt path: why"). */
enum { CLI_NPZ_STORED = -2 };
int cli_npz_save(const char *prefix, const char *opt, const char *path, int level, int n,
                 const char *const *names, const tg_array *const *arrays);

/* An output file (-o, --json, --trace) that is written whole or not at
 * all. cli_out_open gives a stream to a temporary file beside `path`
 * ("-": standard output; a device or FIFO is written in place);
 * cli_out_close flushes it and, when `keep` is true and every write
 * succeeded, syncs it and renames it over `path`. A failure, `keep`
 * false, or a kill before the rename leave the previous file as it was.
 * Both print one line on stderr ("tool: opt path: why") on failure:
 * open returns NULL, close -1. */
typedef struct cli_out {
    FILE *f;
    struct tg_file_save *sv; /* NULL for standard output */
    const char *tool, *opt, *path; /* borrowed, for messages */
} cli_out;
FILE *cli_out_open(cli_out *o, const char *tool, const char *opt, const char *path);
int cli_out_close(cli_out *o, bool keep);

/* An output path given with `opt` (-o, --json, --save-state): false, with
 * "OPT: expected a file name, got ''" on stderr, for an empty one, which
 * would otherwise be found out only when the work is done. */
bool cli_path_ok(const char *prefix, const char *opt, const char *path);
/* The same, for an output that only a file can take (a compiled-function
 * file, an archive, a folder): "-", which tgviz -o and tgprof --json read
 * as standard output, is refused with "OPT -: WHAT cannot go to standard
 * output" rather than made a file named '-'. */
bool cli_path_file_ok(const char *prefix, const char *opt, const char *path, const char *what);

/* A file a tool writes or reads, for cli_outputs_ok: opt names it in
 * messages ("-o", "--json"); what is, for an output, what would be
 * written ("the report"), for an input, what the file is ("the graph file
 * being profiled"). A NULL path is left out. */
typedef struct cli_file {
    const char *opt, *path, *what;
} cli_file;
/* Before anything is written (each output is written whole at the end,
 * by a rename, so two names for one file lost the first without a word,
 * or replaced an input with the result): no output may be another output,
 * an input of ins, or the file of an -i value (FILE.npy, FILE.npz,
 * FILE.npz:NAME); the same file by device and inode when it exists, else
 * by its folder and name (r.json and ./r.json are one); a device or FIFO
 * (/dev/null) may take several. At most one output may be "-" (standard
 * output). And an output naming a standard descriptor that was closed
 * when the tool started (/dev/stdout with stdout closed) is refused as
 * tg_file_begin refuses a closed one. True, or one line ("prefix: OPT
 * OUT is WHAT_IN: WHAT_OUT would replace it") and false. */
bool cli_outputs_ok(const char *prefix, const cli_file *outs, int nout, const cli_file *ins, int nin,
                    const cli_input *inputs, int ninputs);

/* Before the work whose result goes to `path` (a compile, a run that
 * checkpoints): TG_EXIT_OK when a file can be made there (a temporary is
 * created beside it and removed; a device or FIFO is left for the write,
 * which must not open it twice), else TG_EXIT_USAGE with one line
 * ("prefix: opt path: why"): a path that cannot be written is bad input,
 * said at once; a write that fails later (a full disk) is a run-time
 * failure. */
int cli_out_check(const char *prefix, const char *opt, const char *path);
/* The same for a file whose folders are made when it is written
 * (cli_npz_save): a missing folder is fine where its nearest existing
 * ancestor is a folder that can take it. */
int cli_out_check_mkdirs(const char *prefix, const char *opt, const char *path);
/* The same for an output folder (tgc run -o DIR), made when the outputs
 * are written: one that exists must take a file (one is created and
 * removed), one that does not must have a nearest existing ancestor that
 * can take it. Nothing is made: a run that fails leaves no empty folder. */
int cli_dir_check(const char *prefix, const char *opt, const char *dir);

/* --include TAG and --exclude TAG, for tg_compile_options: NULL-terminated
 * lists of borrowed strings (NULL when empty: cli_tags). */
enum { CLI_MAX_TAGS = 64 };
typedef struct cli_taglist {
    const char *v[CLI_MAX_TAGS + 1];
    int n;
} cli_taglist;
/* Append tag (given with `opt`) to l: false, with one line, past
 * CLI_MAX_TAGS. */
bool cli_tag_add(const char *prefix, const char *opt, cli_taglist *l, const char *tag);
/* getopt's 'I' (--include) or 'X' (--exclude), c, with its argument into
 * inc or exc: cli_tag_add's. */
bool cli_tag_opt(const char *prefix, int c, cli_taglist *inc, cli_taglist *exc, const char *arg);
/* The list as tg_compile_options takes it: NULL when empty. */
const char *const *cli_tags(const cli_taglist *l);
/* The help's lines for the two options, indented as the tools' helps are
 * (the option's column at 2, its text at `col`). */
void cli_tags_help(FILE *f, int col);

/* A progress bar on stderr, drawn only when stderr is a terminal. */
typedef struct cli_progress {
    bool on;
    long total;
    int last;
    const char *label; /* borrowed */
} cli_progress;
void cli_progress_start(cli_progress *p, long total, const char *label);
void cli_progress_step(cli_progress *p, long done);
void cli_progress_end(cli_progress *p);

#endif
