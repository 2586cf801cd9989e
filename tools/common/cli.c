#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <malloc.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <limits.h>
#include <unistd.h>

#include "core/core.h"
#include "io/io.h"
#include "tensor/tensor.h"

void cli_error(const char *tool, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tg_one_line(buf); /* names and arguments echoed in it are anyone's text */
    fprintf(stderr, "%s: %s\n", tool, buf);
}

bool cli_once(const char *prefix, const char *opt, const char **slot, const char *val) {
    if (*slot) {
        cli_error(prefix, "%s given twice ('%s' and '%s')", opt, *slot, val);
        return false;
    }
    *slot = val;
    return true;
}

tg_graph *cli_graph_load(const char *prefix, const char *path, tg_ctx *ctx) {
    tg_graph *g = tg_graph_load(path, ctx);
    for (int i = 0; g && i < tg_graph_warning_count(g); i++) cli_error(prefix, "warning: %s", tg_graph_warning(g, i));
    return g;
}

/* The standard descriptors (0-2) that were closed when the process
 * started. Each is given /dev/null before main runs, so that no file the
 * tool opens takes its number: with stderr closed, tgprof's --json
 * temporary became descriptor 2, and a library warning ("tg: device cuda:
 * no CUDA device ...") was written into the report. /dev/null is opened
 * the other way round (stdin for writing, stdout and stderr for reading),
 * so that a read or write through the descriptor still fails with EBADF
 * as on a closed one: output printed to a closed stdout is still reported
 * at exit (check_stdout), and stdout and stderr lose what is written there
 * as they did. Close-on-exec, so that a program started from the tool (the
 * C compiler, the respawn of ompspin.h) sees the descriptor closed, as it
 * was given to the tool. */
static bool std_closed[3];

__attribute__((constructor)) static void reserve_std_fds(void) {
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        std_closed[fd] = true;
        /* (the lowest free number: fd itself, the ones below being open) */
        int r = open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
        if (r >= 0 && r != fd) {
            dup3(r, fd, O_CLOEXEC);
            close(r);
        }
    }
}

/* The standard descriptor that a path names by its number (/dev/stdout,
 * /dev/fd/1, /proc/self/fd/1, as tg_file_begin reads them), or -1. */
static int std_stream_fd(const char *p) {
    static const char *const names[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
    for (int k = 0; k < 3; k++)
        if (!strcmp(p, names[k])) return k;
    const char *num = !strncmp(p, "/dev/fd/", 8) ? p + 8 : !strncmp(p, "/proc/self/fd/", 14) ? p + 14 : NULL;
    if (!num || *num < '0' || *num > '2' || num[1]) return -1;
    return *num - '0';
}

/* At exit: what the tool printed must have reached stdout. A full disk,
 * a closed pipe reader or /dev/full otherwise lost the output silently
 * with exit status 0 (coreutils' close_stdout does the same). A failure
 * that cli_out_close met writing an output to stdout ("-o -") was said
 * there, and is not said twice. */
static const char *watched_tool;
static bool stdout_failure_handled;
static void check_stdout(void) {
    if (stdout_failure_handled) return;
    int e = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) e = errno ? errno : EIO;
    if (!e && fclose(stdout) != 0 && errno != EBADF) e = errno;
    if (e) {
        cli_error(watched_tool, "writing to standard output failed: %s", strerror(e));
        _exit(TG_EXIT_FOUND);
    }
}

const char *openblas_get_config(void);

/* The CPU's model name from /proc/cpuinfo, or "" */
static void cpu_model(char *buf, size_t size) {
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v += strspn(v + 1, " \t") + 1;
        snprintf(buf, size, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    fclose(f);
}

/* What cli_environment_json, cli_environment_line and cli_print_version
 * report, read once per report. */
typedef struct cli_env {
    const char *blas, *spin; /* NULL: unknown, unset */
    int threads;
    long cores;
    char cpu[256]; /* "": unknown */
} cli_env;

static void env_read(cli_env *e) {
    e->blas = openblas_get_config();
    e->spin = getenv("GOMP_SPINCOUNT");
    e->threads = omp_get_max_threads();
    e->cores = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_model(e->cpu, sizeof e->cpu);
}

json_object *cli_environment_json(void) {
    cli_env e;
    env_read(&e);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "tg_version", json_object_new_string(tg_version()));
    json_object_object_add(o, "blas", json_object_new_string(e.blas ? e.blas : "unknown"));
    json_object_object_add(o, "openmp_threads", json_object_new_int(e.threads));
    json_object_object_add(o, "gomp_spincount", e.spin ? json_object_new_string(e.spin) : NULL);
    json_object_object_add(o, "cores_online", json_object_new_int64(e.cores > 0 ? e.cores : 0));
    json_object_object_add(o, "cpu", e.cpu[0] ? json_object_new_string(e.cpu) : NULL);
    return o;
}

void cli_environment_line(char *buf, size_t size) {
    cli_env e;
    env_read(&e);
    snprintf(buf, size, "%s; %d OpenMP thread%s (GOMP_SPINCOUNT %s); %ld core%s online%s%s",
             e.blas ? e.blas : "BLAS unknown", e.threads, e.threads == 1 ? "" : "s", e.spin ? e.spin : "unset",
             e.cores, e.cores == 1 ? "" : "s", e.cpu[0] ? ", " : "", e.cpu);
}

void cli_print_version(const char *tool) {
    cli_env e;
    env_read(&e);
    printf("%s %s\nBLAS: %s\nOpenMP threads: %d (GOMP_SPINCOUNT %s)\n", tool, tg_version(),
           e.blas ? e.blas : "unknown", e.threads, e.spin ? e.spin : "unset");
}

volatile sig_atomic_t cli_interrupted;
static volatile sig_atomic_t soft_interrupt;

void cli_soft_interrupt(bool on) { soft_interrupt = on; }

static void on_signal(int sig) {
    if (soft_interrupt && !cli_interrupted) {
        cli_interrupted = sig;
        static const char note[] = ": interrupted: stopping after this call (again to stop now)\n";
        if (watched_tool && write(2, watched_tool, strlen(watched_tool)) < 0) return;
        if (write(2, note, sizeof note - 1) < 0) return;
        return;
    }
    tg_file_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

static bool text_plain_byte(const unsigned char *p) {
    return *p >= 0x20 && *p != 0x7f && *p != '\\' && !(*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
}

const char *cli_text(const char *s) {
    static char *ring[4];
    static int next;
    if (!s) return "";
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    bool plain = true;
    for (; p[n]; n++) plain &= text_plain_byte(p + n);
    if (plain) return s;
    char *o = malloc(n * 6 + 1), *w = o;
    if (!o) return "(a name that cannot be shown: out of memory)";
    static const char ctl[] = "\n\t\r\b\f", letter[] = "ntrbf";
    for (size_t i = 0; i < n; i++) {
        const char *esc = p[i] ? strchr(ctl, p[i]) : NULL;
        if (text_plain_byte(p + i)) {
            *w++ = (char)p[i];
        } else if (p[i] == '\\') {
            *w++ = '\\';
            *w++ = '\\';
        } else if (esc) {
            *w++ = '\\';
            *w++ = letter[esc - ctl];
        } else if (p[i] == 0xc2) { /* a C1 control: its code point */
            w += sprintf(w, "\\u%04x", p[++i]);
        } else {
            w += sprintf(w, "\\u%04x", p[i]);
        }
    }
    *w = 0;
    free(ring[next]);
    ring[next] = o;
    next = (next + 1) % 4;
    return o;
}

void cli_start(const char *tool) {
    watched_tool = tool;
    atexit(check_stdout);
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        /* (a signal the shell set to be ignored, as for a job started
         * with nohup or in the background of a non-interactive shell,
         * stays ignored) */
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
#ifdef M_MXFAST
    /* Freed small chunks then merge with their neighbours as they are
     * freed, in the order the parser made them, while they are in the
     * cache: tgc compile of a 100,000-node graph, 0.25 -> 0.12 s. */
    mallopt(M_MXFAST, 0);
#endif
}

/* The memory of loading and compiling a large graph comes from the heap
 * in small blocks (json-c's tree: about 20 bytes a byte of JSON; then the
 * graph, its clone and the compiled function). So before loading a file
 * of 64 KiB or more, the heap grows at once by `factor` times its size
 * (what the tool's peak needs: 80 to compile, 200 to lay out; at most a
 * quarter of the memory, and 2 GiB; address space, not memory, until
 * touched), and M_TOP_PAD keeps it when blocks are freed, so the compile
 * reuses what the parse freed instead of the C library trimming it and
 * the compile faulting it in again. TG_THP=0 turns that off.
 *
 * TG_THP=1 also offers the stretch for transparent huge pages. That is no
 * longer the default: where the VM's host takes back the guest's free
 * memory (free page reporting: Firecracker, virtio-balloon), a huge page
 * is made of cold memory on first touch, and 512 MiB touched in huge
 * pages took 2.5-3.5 s against 0.2 s in 4 KiB pages (0.07 s when touched
 * again at once); `tgc compile` of a 100,000-node graph took 3.4-4.1 s
 * with the advice against 1.0 s without it (docs/optimizer.md). On a
 * machine whose memory is fresh to the host the advice had halved that
 * compile (90,000 faults of several microseconds each). */
void cli_heap_for(const char *path, unsigned factor) {
#if defined(M_TOP_PAD) && defined(MADV_HUGEPAGE)
    enum { HUGE = 2 << 20 };
    const char *thp = getenv("TG_THP");
    struct stat st;
    if ((thp && !strcmp(thp, "0")) || stat(path, &st) || !S_ISREG(st.st_mode) || st.st_size < (64 << 10)) return;
    const bool advise = thp && !strcmp(thp, "1");
    uint64_t want = (uint64_t)st.st_size * factor;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0 && want > (uint64_t)pages * (uint64_t)psize / 4)
        want = (uint64_t)pages * (uint64_t)psize / 4;
    if (want > ((uint64_t)2 << 30) - (2 << 20)) want = ((uint64_t)2 << 30) - (2 << 20); /* an int */
    if (!mallopt(M_TOP_PAD, (int)want)) return;
    /* Grow the heap now: blocks under the mmap threshold until the break
     * moves (by the block and M_TOP_PAD); freed, they go back to the top
     * chunk, which trimming leaves at M_TOP_PAD. */
    char *start = sbrk(0);
    if (start == (char *)-1) return;
    void *blocks[128];
    int nb = 0;
    while (nb < 128 && sbrk(0) == start)
        if (!(blocks[nb++] = malloc(32 << 10))) break;
    char *end = sbrk(0);
    while (nb > 0) free(blocks[--nb]);
    uintptr_t a = ((uintptr_t)start + HUGE - 1) & ~(uintptr_t)(HUGE - 1), b = (uintptr_t)end & ~(uintptr_t)(HUGE - 1);
    if (advise && end != (char *)-1 && b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)path;
    (void)factor;
#endif
}

bool cli_device_ok(const char *prefix, const char *dev) {
    if (!strcmp(dev, "cpu") || !strcmp(dev, "cuda")) return true;
    cli_error(prefix, "--device: unknown device '%s' (cpu or cuda)", dev);
    return false;
}

static bool ends_with(const char *s, const char *suf);

bool cli_input_parse(const char *arg, cli_input *out) {
    const char *eq = strchr(arg, '=');
    /* An archive: every input it names. Its path may hold '=' where what
     * comes before cannot be an id (a/k=1.npz, ./k=1.npz). */
    char before[sizeof out->id];
    size_t nb = eq ? (size_t)(eq - arg) : 0;
    bool id_first = false;
    if (eq && nb < sizeof before) {
        memcpy(before, arg, nb);
        before[nb] = 0;
        id_first = tg_id_valid(before);
    }
    if ((!eq || (eq != arg && !id_first)) && ends_with(arg, ".npz")) {
        out->id[0] = 0;
        out->value = arg;
        return true;
    }
    if (!eq || eq == arg) return false;
    size_t n = (size_t)(eq - arg);
    if (n >= sizeof out->id) return false;
    memcpy(out->id, arg, n);
    out->id[n] = 0;
    out->value = eq + 1;
    return true;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* a, read for input i from `source`, made sure to fit the input's dtype
 * (a safe cast) and shape; consumed (NULL) when it does not. */
static tg_array *value_fits(const tg_function *f, int i, tg_array *a, const char *source,
                            tg_ctx *ctx) {
    const char *id = tg_function_input_id(f, i);
    tg_dtype dt = tg_function_input_dtype(f, i);
    int nd = tg_function_input_ndim(f, i);
    const int64_t *shape = tg_function_input_shape(f, i);
    if (source && a->dtype != dt && !tg_dtype_can_cast_safe(a->dtype, dt)) {
        tg_errorf(ctx, TG_ETYPE, "-i %s: %s holds %s, which cannot be cast safely to the input's %s",
                  id, source, tg_dtype_name(a->dtype), tg_dtype_name(dt));
        tg_array_free(a);
        return NULL;
    }
    bool fits = a->ndim == nd;
    for (int d = 0; fits && d < nd; d++) fits = shape[d] < 0 || shape[d] == a->shape[d];
    if (!fits) {
        char want[256], got[256];
        tg_shape_text(nd, shape, want, sizeof want);
        tg_shape_text(a->ndim, a->shape, got, sizeof got);
        tg_errorf(ctx, TG_ESHAPE, "-i %s: the input has shape %s, the value has shape %s", id, want, got);
        tg_array_free(a);
        return NULL;
    }
    return a;
}

/* The names of z's arrays, "a, b, c" (at most 20 of them), into out. */
static void npz_names(const tg_npz *z, tg_str *out) {
    int n = tg_npz_count(z);
    for (int k = 0; k < n && k < 20; k++) tg_str_addf(out, "%s'%s'", k ? ", " : "", tg_npz_name(z, k));
    if (n > 20) tg_str_addf(out, " and %d more", n - 20);
    if (!n) tg_str_addf(out, "no arrays");
}

/* a, array k of the archive at path, made sure to fit input i
 * (value_fits); consumed when it does not. */
static tg_array *npz_fits(const tg_function *f, int i, tg_array *a, const tg_npz *z, int k, const char *path,
                          tg_ctx *ctx) {
    tg_str src = {0};
    tg_str_addf(&src, "%s: array '%s'", path, tg_npz_name(z, k));
    a = value_fits(f, i, a, src.s ? src.s : path, ctx);
    tg_str_free(&src);
    return a;
}

/* VALUE naming an array of an archive: FILE.npz (the array named after the
 * input, or the archive's only array) or FILE.npz:NAME. */
static tg_array *value_from_npz(const tg_function *f, int i, const char *value, size_t plen,
                                const char *name, tg_ctx *ctx) {
    const char *id = tg_function_input_id(f, i);
    char *path = strndup(value, plen);
    if (!path) {
        tg_errorf(ctx, TG_ENOMEM, "-i %s: out of memory", id);
        return NULL;
    }
    tg_array *a = NULL;
    tg_npz *z = tg_npz_open(path, ctx);
    if (!z) {
        tg_error_prefix(ctx, "-i %s", id);
    } else {
        int k = tg_npz_find(z, name ? name : id);
        if (k < 0 && !name && tg_npz_count(z) == 1) k = 0;
        if (k < 0) {
            tg_str have = {0};
            npz_names(z, &have);
            tg_errorf(ctx, TG_EMISSING, "-i %s: %s holds no array '%s' (it holds %s)", id, path,
                      name ? name : id, have.s ? have.s : "?");
            tg_str_free(&have);
        } else if ((a = tg_npz_read(z, k, ctx))) {
            a = npz_fits(f, i, a, z, k, path, ctx);
        } else {
            tg_error_prefix(ctx, "-i %s", id);
        }
    }
    tg_npz_close(z);
    free(path);
    return a;
}

tg_array *cli_value_read(const tg_function *f, int i, const char *value, tg_ctx *ctx) {
    const char *id = tg_function_input_id(f, i);
    tg_dtype dt = tg_function_input_dtype(f, i);
    tg_array *a;
    const char *colon = strstr(value, ".npz:");
    for (const char *c = colon; c; c = strstr(c + 1, ".npz:")) colon = c;
    if (ends_with(value, ".npz")) return value_from_npz(f, i, value, strlen(value), NULL, ctx);
    if (colon && colon[5]) return value_from_npz(f, i, value, (size_t)(colon + 4 - value), colon + 5, ctx);
    if (ends_with(value, ".npy")) {
        a = tg_npy_load(value, ctx);
        return a ? value_fits(f, i, a, value, ctx) : NULL;
    }
    json_tokener *tok = json_tokener_new();
    /* Include the terminating NUL so that a bare number ends. */
    json_object *j = tok ? json_tokener_parse_ex(tok, value, (int)strlen(value) + 1) : NULL;
    bool ok = j && json_tokener_get_error(tok) == json_tokener_success &&
              json_tokener_get_parse_end(tok) >= strlen(value);
    if (tok) json_tokener_free(tok);
    if (ok && tg_json_find_huge_int(value, strlen(value)) >= 0) {
        json_object_put(j);
        tg_errorf(ctx, TG_ETYPE, "-i %s: '%.60s' holds an integer past int64 and uint64 "
                  "(-2^63 to 2^64 - 1)", id, value);
        return NULL;
    }
    if (!ok) {
        if (j) json_object_put(j);
        tg_errorf(ctx, TG_EPARSE,
                  "-i %s: '%.60s' is neither a .npy or .npz path nor a JSON literal (3.5, [1, 2], true)",
                  id, value);
        return NULL;
    }
    json_object *data = j;
    /* A string stands for nan/inf: wrap it as a value. */
    json_object *wrapped = json_object_new_object();
    json_object_object_add(wrapped, "data", json_object_get(data));
    char where[200];
    snprintf(where, sizeof where, "-i %s", id);
    a = tg_value_from_json(wrapped, dt, -1, NULL, NULL, where, NULL, ctx);
    json_object_put(wrapped);
    json_object_put(j);
    return a ? value_fits(f, i, a, NULL, ctx) : NULL;
}

int cli_mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) < 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int cli_npz_save(const char *prefix, const char *opt, const char *path, int level, int n,
                 const char *const *names, const tg_array *const *arrays) {
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    tg_ctx *ctx = tg_ctx_new();
    int rc = -1;
    if (!dir || !ctx) {
        cli_error(prefix, "%s %s: out of memory", opt, path);
    } else if (slash && slash != dir && (*slash = 0, cli_mkdirs(dir) < 0)) {
        cli_error(prefix, "%s %s: cannot create the folder %s: %s", opt, path, dir, strerror(errno));
    } else if (level == CLI_NPZ_STORED ? tg_npz_save(path, n, names, arrays, ctx)
                                       : tg_npz_save_compressed(path, n, names, arrays, level, ctx)) {
        cli_error(prefix, "%s %s", opt, tg_ctx_message(ctx));
    } else {
        rc = 0;
    }
    tg_ctx_free(ctx);
    free(dir);
    return rc;
}

FILE *cli_out_open(cli_out *o, const char *tool, const char *opt, const char *path) {
    *o = (cli_out){.tool = tool, .opt = opt, .path = path};
    if (!strcmp(path, "-")) return o->f = stdout;
    tg_ctx *ctx = tg_ctx_new();
    int fd = -1;
    if (!(o->sv = malloc(sizeof *o->sv)) || !ctx) {
        cli_error(tool, "%s %s: out of memory", opt, path);
    } else if (tg_file_begin(path, o->sv, ctx)) {
        cli_error(tool, "%s %s", opt, tg_ctx_message(ctx));
    } else if ((fd = dup(o->sv->fd)) < 0 || !(o->f = fdopen(fd, "wb"))) {
        cli_error(tool, "%s %s: cannot open for writing: %s", opt, path, strerror(errno));
        if (fd >= 0) close(fd);
        tg_file_abort(o->sv);
    } else {
        tg_ctx_free(ctx);
        return o->f;
    }
    free(o->sv);
    o->sv = NULL;
    tg_ctx_free(ctx);
    return NULL;
}

int cli_out_close(cli_out *o, bool keep) {
    if (!o->f) return 0;
    /* fflush first: its errno says why a buffered write failed. */
    int bad = fflush(o->f) != 0 || ferror(o->f) ? errno ? errno : EIO : 0;
    if (o->f != stdout && fclose(o->f) != 0 && !bad) bad = errno ? errno : EIO;
    if (o->f == stdout && bad) stdout_failure_handled = true; /* (said here, or by the tool's failure) */
    o->f = NULL;
    if (bad && keep) cli_error(o->tool, "%s %s: write failed: %s", o->opt, o->path, strerror(bad));
    int rc = bad ? -1 : 0;
    if (o->sv) {
        if (keep && !bad) {
            tg_ctx *ctx = tg_ctx_new();
            if (!ctx || tg_file_finish(o->sv, ctx)) {
                cli_error(o->tool, "%s %s", o->opt, ctx ? tg_ctx_message(ctx) : "out of memory");
                if (!ctx) tg_file_abort(o->sv);
                rc = -1;
            }
            tg_ctx_free(ctx);
        } else {
            tg_file_abort(o->sv);
        }
        free(o->sv);
        o->sv = NULL;
    }
    return rc;
}

bool cli_path_ok(const char *prefix, const char *opt, const char *path) {
    if (*path) return true;
    cli_error(prefix, "%s: expected a file name, got ''", opt);
    return false;
}

bool cli_path_file_ok(const char *prefix, const char *opt, const char *path, const char *what) {
    if (!cli_path_ok(prefix, opt, path)) return false;
    if (strcmp(path, "-")) return true;
    cli_error(prefix, "%s -: %s cannot go to standard output (for a file named '-', write ./-)", opt, what);
    return false;
}

/* Where a path names a file: the file's device and inode when it exists,
 * else its folder's (resolved, so that ./r.json and r.json agree) and its
 * last name. kind: 0 no such folder either, 1 a file or where one would
 * be made, 2 something that may be written twice (a device such as
 * /dev/null, a FIFO). */
typedef struct file_id {
    int kind;
    dev_t dev;
    ino_t ino;
    const char *name; /* the last name, for a file not there yet */
} file_id;

static file_id file_id_of(const char *path) {
    file_id id = {0};
    struct stat st;
    if (stat(path, &st) == 0) {
        id.kind = S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) ? 1 : 2;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        return id;
    }
    const char *slash = strrchr(path, '/');
    id.name = slash ? slash + 1 : path;
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) == 0) {
        id.kind = 1;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
    }
    return id;
}

static bool same_file(const char *a, const char *b) {
    file_id x = file_id_of(a), y = file_id_of(b);
    if (x.kind != 1 || y.kind != 1 || x.dev != y.dev || x.ino != y.ino) return false;
    return (!x.name && !y.name) || (x.name && y.name && !strcmp(x.name, y.name));
}

bool cli_outputs_ok(const char *prefix, const cli_file *outs, int nout, const cli_file *ins, int nin,
                    const cli_input *inputs, int ninputs) {
    for (int i = 0; i < nout; i++) {
        const cli_file *o = &outs[i];
        if (!o->path) continue;
        int sfd = std_stream_fd(o->path);
        if (sfd >= 0 && std_closed[sfd]) {
            /* (as tg_file_begin says it: the descriptor given /dev/null
             * at start-up would otherwise look open) */
            cli_error(prefix, "%s %s: cannot write: descriptor %d is closed", o->opt, cli_text(o->path), sfd);
            return false;
        }
        for (int j = 0; j < i; j++) {
            const cli_file *p = &outs[j];
            if (!p->path) continue;
            if (!strcmp(o->path, "-") && !strcmp(p->path, "-")) {
                cli_error(prefix, "%s - and %s -: only one of them can go to standard output", p->opt, o->opt);
                return false;
            }
            if (strcmp(o->path, "-") && strcmp(p->path, "-") && same_file(o->path, p->path)) {
                cli_error(prefix, "%s %s and %s %s are the same file: one would replace the other", p->opt,
                          cli_text(p->path), o->opt, cli_text(o->path));
                return false;
            }
        }
        if (!strcmp(o->path, "-")) continue;
        for (int k = 0; k < nin; k++) {
            if (ins[k].path && same_file(o->path, ins[k].path)) {
                cli_error(prefix, "%s %s is %s: %s would replace it", o->opt, cli_text(o->path), ins[k].what,
                          o->what);
                return false;
            }
        }
        for (int k = 0; k < ninputs; k++) {
            /* FILE.npy, FILE.npz, FILE.npz:NAME (an id's JSON literal
             * names no file) */
            char file[PATH_MAX];
            const char *v = inputs[k].value, *colon = strrchr(v, ':');
            size_t n = colon && colon - v >= 4 && !strncmp(colon - 4, ".npz", 4) ? (size_t)(colon - v) : strlen(v);
            if (n >= sizeof file) continue;
            memcpy(file, v, n);
            file[n] = 0;
            if (same_file(o->path, file)) {
                cli_error(prefix, "%s %s is the input file of -i %s%s%s: %s would replace it", o->opt,
                          cli_text(o->path), cli_text(inputs[k].id), *inputs[k].id ? "=" : "", cli_text(v), o->what);
                return false;
            }
        }
    }
    return true;
}

int cli_out_check(const char *prefix, const char *opt, const char *path) {
    struct stat st;
    if (!strcmp(path, "-") || (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)))
        return TG_EXIT_OK; /* opening a FIFO to try it would be its reader's end of file */
    cli_out o;
    if (!cli_out_open(&o, prefix, opt, path)) return TG_EXIT_USAGE;
    cli_out_close(&o, false);
    return TG_EXIT_OK;
}

static int folder_can_be_made(const char *prefix, const char *opt, const char *path, const char *dir, size_t n);

int cli_out_check_mkdirs(const char *prefix, const char *opt, const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    struct stat st;
    if (!slash || n == 0 || n >= sizeof dir) return cli_out_check(prefix, opt, path);
    memcpy(dir, path, n);
    dir[n] = 0;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        cli_error(prefix, "%s %s: cannot create the folder %s: %s", opt, path, dir, strerror(ENOTDIR));
        return TG_EXIT_USAGE;
    }
    if (stat(dir, &st) == 0) return cli_out_check(prefix, opt, path);
    return folder_can_be_made(prefix, opt, path, dir, n);
}

/* The folder dir (n bytes) is made when the file is written: its nearest
 * existing ancestor must be a folder we may make one in. Nothing is made
 * here. */
static int folder_can_be_made(const char *prefix, const char *opt, const char *path, const char *dir, size_t n) {
    struct stat st;
    char anc[4096];
    memcpy(anc, dir, n + 1);
    for (;;) {
        char *cut = strrchr(anc, '/');
        if (!cut) {
            strcpy(anc, ".");
            break;
        }
        if (cut == anc) {
            anc[1] = 0;
            break;
        }
        *cut = 0;
        if (stat(anc, &st) == 0) break;
    }
    const char *why = NULL;
    if (stat(anc, &st) < 0) why = strerror(errno);
    else if (!S_ISDIR(st.st_mode)) why = strerror(ENOTDIR);
    else if (access(anc, W_OK | X_OK) < 0) why = strerror(errno);
    if (!why) return TG_EXIT_OK;
    if (!strcmp(dir, path))
        cli_error(prefix, "%s %s: cannot create the folder: %s", opt, path, why);
    else
        cli_error(prefix, "%s %s: cannot create the folder %s: %s", opt, path, dir, why);
    return TG_EXIT_USAGE;
}

int cli_dir_check(const char *prefix, const char *opt, const char *dir) {
    struct stat st;
    size_t n = strlen(dir);
    if (n >= 4096) {
        cli_error(prefix, "%s %s: cannot create the folder: %s", opt, dir, strerror(ENAMETOOLONG));
        return TG_EXIT_USAGE;
    }
    if (stat(dir, &st) < 0) return folder_can_be_made(prefix, opt, dir, dir, n);
    if (!S_ISDIR(st.st_mode)) {
        cli_error(prefix, "%s %s: cannot create the folder: %s", opt, dir, strerror(ENOTDIR));
        return TG_EXIT_USAGE;
    }
    /* a file tried there and removed */
    tg_str p = {0};
    tg_str_addf(&p, "%s/.tg-check.XXXXXX", dir);
    int fd = p.s ? mkstemp(p.s) : -1, rc = TG_EXIT_OK;
    if (fd < 0) {
        cli_error(prefix, "%s %s: cannot write in the folder: %s", opt, dir, p.s ? strerror(errno) : "out of memory");
        rc = TG_EXIT_USAGE;
    } else {
        close(fd);
        unlink(p.s);
    }
    tg_str_free(&p);
    return rc;
}

bool cli_tag_add(const char *prefix, const char *opt, cli_taglist *l, const char *tag) {
    if (l->n >= CLI_MAX_TAGS) {
        cli_error(prefix, "%s: at most %d tags", opt, CLI_MAX_TAGS);
        return false;
    }
    l->v[l->n++] = tag;
    l->v[l->n] = NULL;
    return true;
}

bool cli_tag_opt(const char *prefix, int c, cli_taglist *inc, cli_taglist *exc, const char *arg) {
    return c == 'I' ? cli_tag_add(prefix, "--include", inc, arg) : cli_tag_add(prefix, "--exclude", exc, arg);
}

const char *const *cli_tags(const cli_taglist *l) { return l->n ? l->v : NULL; }

void cli_tags_help(FILE *f, int col) {
    fprintf(f, "  %-*s\n", col - 2, "--include TAG, --exclude TAG");
    fprintf(f, "%*sturn rewrites on or off beyond the preset (a pass, a group\n", col, "");
    fprintf(f, "%*ssuch as fusion or inplace, or a rewrite's name; repeatable)\n", col, "");
}

void cli_progress_start(cli_progress *p, long total, const char *label) {
    p->on = total > 1 && isatty(2);
    p->total = total;
    p->last = -1;
    p->label = label;
}

void cli_progress_step(cli_progress *p, long done) {
    if (!p->on) return;
    int pct = (int)(done * 100 / p->total);
    if (pct == p->last) return;
    p->last = pct;
    int w = pct * 40 / 100;
    fprintf(stderr, "\r%s [%.*s%*s] %3d%% (%ld/%ld)", p->label, w, "########################################",
            40 - w, "", pct, done, p->total);
    fflush(stderr);
}

void cli_progress_end(cli_progress *p) {
    if (p->on) fputs("\r\033[K", stderr);
}

/* -i FILE.npz: each array of the archive named after an input of f gives
 * that input (later -i replace it, as they replace earlier ones); the
 * archive's other arrays are left alone, but one that gives no input is a
 * mistake. The archive's names go to `have` for the message about an
 * input left without a value. */
static int inputs_from_npz(const char *tool, const char *pre, const char *sep, const tg_function *f,
                           const char *path, tg_array **ins, tg_str *have, tg_ctx *ctx) {
    int nin = tg_function_input_count(f), used = 0, rc = TG_EXIT_OK;
    tg_npz *z = tg_npz_open(path, ctx);
    if (!z) {
        cli_error(tool, "%s%s-i %s", pre, sep, tg_ctx_message(ctx));
        return TG_EXIT_USAGE;
    }
    /* The arrays the inputs name, read at once (deflated ones inflate in
     * parallel). */
    int *which = calloc((size_t)nin + 1, sizeof *which), *member = calloc((size_t)nin + 1, sizeof *member);
    tg_array **got = calloc((size_t)nin + 1, sizeof *got);
    if (!which || !member || !got) {
        cli_error(tool, "%s%s-i %s: out of memory", pre, sep, path);
        rc = TG_EXIT_USAGE;
    }
    for (int i = 0; i < nin && rc == TG_EXIT_OK; i++) {
        int k = tg_npz_find(z, tg_function_input_id(f, i));
        if (k < 0) continue;
        which[used] = i;
        member[used++] = k;
    }
    if (rc == TG_EXIT_OK && tg_npz_read_many(z, used, member, got, ctx)) {
        cli_error(tool, "%s%s%s", pre, sep, tg_ctx_message(ctx));
        rc = TG_EXIT_USAGE;
    }
    for (int j = 0; j < used && rc == TG_EXIT_OK; j++) {
        int i = which[j];
        tg_array *a = npz_fits(f, i, got[j], z, member[j], path, ctx);
        got[j] = NULL;
        if (!a) {
            cli_error(tool, "%s%s%s", pre, sep, tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
        }
        tg_array_free(ins[i]);
        ins[i] = a;
    }
    for (int j = 0; got && j < used; j++) tg_array_free(got[j]);
    free(which);
    free(member);
    free(got);
    if (rc == TG_EXIT_OK) {
        tg_str names = {0};
        npz_names(z, &names);
        if (!used) {
            tg_str list = {0};
            for (int i = 0; i < nin; i++) tg_str_addf(&list, "%s%s", i ? ", " : "", tg_function_input_id(f, i));
            cli_error(tool, "%s%s-i %s: none of its arrays (%s) is an input of function '%s' (its inputs: %s)",
                      pre, sep, path, names.s ? names.s : "?", tg_function_name(f), list.s ? list.s : "none");
            tg_str_free(&list);
            rc = TG_EXIT_USAGE;
        }
        tg_str_addf(have, "%s%s holds %s", have->len ? "; " : "", path, names.s ? names.s : "?");
        tg_str_free(&names);
    }
    tg_npz_close(z);
    return rc;
}

int cli_inputs_read(const char *tool, const char *what, const tg_function *f,
                    const cli_input *inputs, int ninputs, tg_array **ins) {
    int nin = tg_function_input_count(f);
    const char *pre = what ? what : "", *sep = what ? ": " : "";
    tg_ctx *ctx = tg_ctx_new();
    tg_str have = {0}; /* what the archives held */
    int rc = TG_EXIT_OK;
    for (int k = 0; k < ninputs && rc == TG_EXIT_OK; k++) {
        if (!inputs[k].id[0]) {
            rc = inputs_from_npz(tool, pre, sep, f, inputs[k].value, ins, &have, ctx);
            continue;
        }
        int idx = -1;
        for (int i = 0; i < nin; i++)
            if (strcmp(tg_function_input_id(f, i), inputs[k].id) == 0) idx = i;
        if (idx < 0) {
            tg_str list = {0};
            for (int i = 0; i < nin; i++) tg_str_addf(&list, "%s%s", i ? ", " : "", tg_function_input_id(f, i));
            /* -i k=1.npz may have meant the archive named so */
            bool npz = ends_with(inputs[k].value, ".npz");
            cli_error(tool, "%s%s-i %s: function '%s' has no input '%s' (its inputs: %s)%s%s%s%s", pre, sep,
                      inputs[k].id, tg_function_name(f), inputs[k].id, list.s ? list.s : "none",
                      npz ? "; for an archive whose name holds '=', write -i ./" : "",
                      npz ? inputs[k].id : "", npz ? "=" : "", npz ? inputs[k].value : "");
            tg_str_free(&list);
            rc = TG_EXIT_USAGE;
            break;
        }
        tg_array_free(ins[idx]);
        if (!(ins[idx] = cli_value_read(f, idx, inputs[k].value, ctx))) {
            cli_error(tool, "%s%s%s", pre, sep, tg_ctx_message(ctx));
            rc = TG_EXIT_USAGE;
        }
    }
    for (int i = 0; i < nin && rc == TG_EXIT_OK; i++)
        if (!ins[i]) {
            cli_error(tool, "%s%sfunction '%s' needs input '%s': give it with -i %s=VALUE%s%s%s", pre, sep,
                      tg_function_name(f), tg_function_input_id(f, i), tg_function_input_id(f, i),
                      have.len ? " (" : "", have.len ? have.s : "", have.len ? ")" : "");
            rc = TG_EXIT_USAGE;
        }
    tg_str_free(&have);
    tg_ctx_free(ctx);
    return rc;
}

bool cli_input_add(const char *tool, cli_input *inputs, int *n, int max, const char *arg) {
    if (*n >= max) {
        cli_error(tool, "-i: at most %d inputs", max);
        return false;
    }
    if (!cli_input_parse(arg, &inputs[*n])) {
        cli_error(tool, "-i: expected ID=VALUE or FILE.npz, got '%s'", arg);
        return false;
    }
    (*n)++;
    return true;
}

bool cli_gradient_text(const tg_function *f, const char *key, char *buf, size_t size) {
    tg_key_gradient kg;
    if (!tg_function_key_gradient(f, key, &kg)) return false;
    if (*kg.of)
        snprintf(buf, size, "%s %s of %s", kg.by_op, kg.by, kg.of);
    else
        snprintf(buf, size, "%s %s", kg.by_op, kg.by);
    return true;
}

int cli_getopt_error(const char *tool, const char *cmd, int c, char **argv) {
    char shortopt[3] = {'-', (char)optopt, 0};
    /* a long option by the word given; a short one by optopt (its word
     * may be a cluster, -vx) */
    const char *word = optind > 0 ? argv[optind - 1] : "";
    const char *what = !strncmp(word, "--", 2) || optopt <= 0 || optopt >= 128 ? word : shortopt;
    const char *sp = cmd ? " " : "", *cm = cmd ? cmd : "";
    if (c == ':')
        cli_error(tool, "%s%s%s needs a value (see %s%s%s --help)", cm, *cm ? ": " : "", what, tool, sp, cm);
    else
        cli_error(tool, "%s%sunknown option '%s' (see %s%s%s --help)", cm, *cm ? ": " : "", what, tool, sp, cm);
    return TG_EXIT_USAGE;
}

bool cli_is_tgf(const char *path) { return tg_tgf_is_file(path); }

int cli_session_open(cli_session *s, const char *tool, const char *what, const char *path,
                     const char *fname, const tg_compile_options *co, const cli_input *inputs,
                     int ninputs) {
    const char *pre = what ? what : "", *sep = what ? ": " : "";
    tg_ctx *ctx = tg_ctx_new();
    int rc = TG_EXIT_USAGE, fi;
    memset(s, 0, sizeof *s);
    if (!ctx) {
        cli_error(tool, "%s%sout of memory", pre, sep);
        return TG_EXIT_FOUND;
    }
    cli_heap_for(path, 80);
    if (cli_is_tgf(path)) {
        /* Restored as saved: the optimized graph, its rewrite record and
         * the shared values of the checkpoint. */
        if (!(s->tgf = tg_tgf_load(path, NULL, ctx)) || (fi = tg_tgf_function_find(s->tgf, fname, ctx)) < 0 ||
            !(s->f = tg_tgf_function(s->tgf, fi))) {
            cli_error(tool, "%s%s%s", pre, sep, tg_ctx_message(ctx));
            goto done;
        }
        if (tg_tgf_warning(s->tgf)) cli_error(tool, "warning: %s", tg_tgf_warning(s->tgf));
    } else if (!(s->g = cli_graph_load(tool, path, ctx)) || (fi = tg_graph_function_find(s->g, fname, ctx)) < 0 ||
               !(s->f = tg_function_compile(s->g, fi, co, ctx))) {
        cli_error(tool, "%s%s%s", pre, sep, tg_ctx_message(ctx));
        goto done;
    }
    s->nin = tg_function_input_count(s->f);
    s->nout = tg_function_output_count(s->f);
    s->ins = calloc((size_t)s->nin + 1, sizeof *s->ins);
    s->outs = calloc((size_t)s->nout + 1, sizeof *s->outs);
    if (!s->ins || !s->outs) {
        cli_error(tool, "%s%sout of memory", pre, sep);
        rc = TG_EXIT_FOUND;
        goto done;
    }
    rc = cli_inputs_read(tool, what, s->f, inputs, ninputs, s->ins);
done:
    tg_ctx_free(ctx);
    return rc;
}

void cli_session_close(cli_session *s) {
    for (int i = 0; s->ins && i < s->nin; i++) tg_array_free(s->ins[i]);
    for (int k = 0; s->outs && k < s->nout; k++) tg_array_free(s->outs[k]);
    free(s->ins);
    free(s->outs);
    if (s->tgf)
        tg_tgf_free(s->tgf); /* f is borrowed from it */
    else
        tg_function_free(s->f);
    tg_graph_free(s->g);
    memset(s, 0, sizeof *s);
}
