/* The compiled-kernel cache (Theano's compile cache, in C).
 *
 * An entry is <hash>.c (the source, kept for `tgc cache list` and for
 * reading) and <hash>.so, in the cache folder. The GPU kernels of
 * backend/cuda/nvrtc.c share the folder, the lock and the hash; their
 * entries are <hash>.cu and <hash>.cubin or <hash>.ptx, and list and
 * clear here too. The hash is a 128-bit
 * FNV-1a of the source, the compiler's identity (`$CC --version`), the
 * flags and the CPU's feature flags (the code is built with
 * -march=native, so a cache folder shared between machines must not hand
 * one machine's code to another). Compiles take the folder's lock file
 * (flock) and write to a temporary name that is renamed into place, so
 * processes compiling at once build each kernel once and never load half
 * a file. Threads take the flock as processes do, each on a descriptor of
 * its own; the process's mutex guards the in-memory map and the counters
 * only, never a compile, so that a thread whose kernel is in memory or on
 * disk does not wait for another thread's compile.
 *
 * Every <hash>.so ends with a footer that ties it to its entry (see
 * so_footer): the ELF file the compiler wrote, then a magic, the entry's
 * hash, the ELF part's length and its CRC32C (ELF loaders read what the
 * program headers name and ignore bytes after it). The footer is checked
 * before every dlopen, so a file cut short (which glibc would map past
 * its end: SIGBUS), emptied, written over by another kernel's file or
 * older than the footer is removed and compiled again instead of loaded.
 *
 * Files in the folder are opened without following symbolic links (and
 * temporaries are created afresh, O_EXCL): a link where a cache file
 * should be is refused, with the interpreter as the fallback. The
 * compiler runs in its own process group under a time limit
 * (TG_CC_TIMEOUT seconds, 300 by default), killed when it runs past it;
 * a process that waits for another's compile says so once on stderr and
 * gives up after the same time.
 *
 * As Theano's compile folder does, the cache forgets what is no longer
 * used: a kernel loaded from the folder has its file's time set to now
 * (at most once an hour), so that a file's time says when it was last
 * used, and the entries unused for TG_CACHE_MAX_AGE days (30 by default;
 * 0: never) are removed, once a day, by the first process that uses the
 * folder after that day (the lock file's time says when it last did).
 * `tgc cache clear --older-than AGE` does the same by hand.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "io/tgf.h"
#include "ops/composite.h"

extern char **environ;

/* (-fno-builtin-sin/cos: GCC turns a body's sin(x) and cos(x) into one
 * call of sincos, which has no vector variant; the loop then ran scalar
 * libm for every call of the body, whose last bits differ from the
 * libmvec variants the unfused ops call.
 * -fno-trapping-math, as vmath.c is built: without masked arithmetic
 * (AVX2, SSE) GCC will not turn the selects of sigmoid and softplus
 * into vector blends while a comparison may trap, and the whole body ran
 * scalar libm; tg reads no floating-point exception flags, and no value
 * changes) */
static const char *const CFLAGS[] = {"-O3", "-march=native", "-fopenmp", "-ffp-contract=off",
                                     "-fno-math-errno", "-fno-trapping-math", "-fno-builtin-sin",
                                     "-fno-builtin-cos", "-fno-builtin-sinf", "-fno-builtin-cosf",
                                     "-std=gnu11", "-shared", "-fPIC", "-w", NULL};

/* ---- hashing ---- */

typedef unsigned __int128 u128;

static u128 fnv_init(void) {
    return ((u128)0x6c62272e07bb0142ull << 64) | 0x62b821756295c58dull;
}
static u128 fnv_add(u128 h, const char *s, size_t n) {
    const u128 prime = ((u128)1 << 88) | 0x13bu;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= prime;
    }
    return h;
}
static void fnv_hex(u128 h, char out[33]) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)(h >> 64),
             (unsigned long long)h);
}

/* ---- the process's state ---- */

typedef struct kentry {
    char hash[33];
    void *handle;
    tg_kernel_fn fn;
} kentry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kentry *map;
static int nmap, cmap;
static tg_kcache_stats stats;
/* The compiler's identity, for the TG_CC it was read with. */
static char *cc_for, *cc_ident;
static bool cc_ok;
static char *cpu_flags;
/* run_prog's result for the last `--version` probe (-2: timed out). */
static int cc_probe_rc;
/* The first line of a <hash>.ccid file, which tells clear it is tg's. */
#define CCID_HEAD "tg-ccid 1\n"
/* The compiles tg_kcache_prefetch tried that failed, by hash, with the
 * reason: the look-up of that kernel reports it, once, instead of
 * running the compiler again (a compiler that fails or hangs costs what
 * it did before the prefetch). Under lock. */
typedef struct kfail {
    char hash[33];
    char *why;
} kfail;
static kfail *fails;
static int nfails, cfails;

tg_kcache_stats tg_kcache_stats_get(void) {
    pthread_mutex_lock(&lock);
    tg_kcache_stats s = stats;
    pthread_mutex_unlock(&lock);
    return s;
}

/* Bumped by tg_kcache_forget: a composite body that remembers its
 * kernel asks again after a forget (composite.c). */
static unsigned long generation;

unsigned long tg_kcache_generation(void) { return __atomic_load_n(&generation, __ATOMIC_ACQUIRE); }

void tg_kcache_forget(void) {
    pthread_mutex_lock(&lock);
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    nmap = 0;
    for (int i = 0; i < nfails; i++) tg_free(fails[i].why);
    nfails = 0;
    tg_free(cc_for);
    cc_for = NULL;
    pthread_mutex_unlock(&lock);
}

static const char *cc_name(void) {
    const char *cc = getenv("TG_CC");
    return cc && *cc ? cc : "cc";
}

/* The cache folder (tg_kcache_dir) into buf, without allocating: false
 * when none can be named or the name does not fit. */
static bool dir_into(char *buf, size_t cap) {
    const char *d = getenv("TG_CACHE_DIR");
    int w;
    if (d && *d)
        w = snprintf(buf, cap, "%s", d);
    else if ((d = getenv("XDG_CACHE_HOME")) && *d)
        w = snprintf(buf, cap, "%s/tg", d);
    else if ((d = getenv("HOME")) && *d)
        w = snprintf(buf, cap, "%s/.cache/tg", d);
    else
        return false;
    return w > 0 && (size_t)w < cap;
}

char *tg_kcache_dir(void) {
    const char *d = getenv("TG_CACHE_DIR");
    tg_str s = {0};
    if (d && *d) {
        tg_str_addf(&s, "%s", d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && *d) {
        tg_str_addf(&s, "%s/tg", d);
    } else if ((d = getenv("HOME")) && *d) {
        tg_str_addf(&s, "%s/.cache/tg", d);
    } else {
        return NULL;
    }
    if (s.oom) {
        tg_str_free(&s);
        return NULL;
    }
    return s.s;
}

/* mkdir -p: 0 when path is a folder at the end, else -1 with errno set. */
static int mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    }
    /* EEXIST is a file too: that is no folder to use */
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

void tg_kcache_hash(const char *const *parts, int n, char out[33]) {
    u128 h = fnv_init();
    for (int i = 0; i < n; i++) h = fnv_add(h, parts[i], strlen(parts[i]) + 1);
    fnv_hex(h, out);
}

int tg_kcache_mkdir(const char *dir) { return mkdirs(dir); }

/* The time limit of a compile, and of a wait for another process's
 * compile: TG_CC_TIMEOUT seconds, 300 when unset or not a positive
 * number. */
static double cc_timeout(void) {
    const char *t = getenv("TG_CC_TIMEOUT");
    if (t && *t) {
        char *end;
        double v = strtod(t, &end);
        if (*end == 0 && v > 0 && v < 1e9) return v;
    }
    return 300;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(long *us) {
    struct timespec ts = {0, *us * 1000};
    nanosleep(&ts, NULL);
    if (*us < 20000) *us *= 2;
}

/* Start argv with stdout to out_fd (-1: /dev/null) and stderr to err_fd
 * (-1: /dev/null), in a process group of its own (so that prog_done can
 * kill what it started too): 0 with *pid, or -1 when it could not
 * start. */
static int prog_spawn(char *const *argv, int out_fd, int err_fd, pid_t *pid) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    else
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (err_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    else
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    int rc = posix_spawnp(pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc == 0 ? 0 : -1;
}

/* Whether the program pid (prog_spawn) has ended, without waiting: then
 * *st is its exit status, -1 when it did not exit, -2 when it ran past
 * deadline (now_s()) and was killed with its process group (a compiler
 * that hangs). */
static bool prog_done(pid_t pid, double deadline, int *st) {
    int ws;
    pid_t r = waitpid(pid, &ws, WNOHANG);
    if (r == pid) {
        *st = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
        return true;
    }
    if (r < 0 && errno != EINTR) {
        *st = -1;
        return true;
    }
    if (now_s() > deadline) {
        kill(-pid, SIGKILL); /* the compiler and what it started */
        kill(pid, SIGKILL);
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
        }
        *st = -2;
        return true;
    }
    return false;
}

/* Run argv (prog_spawn) under a limit of cc_timeout() seconds: the exit
 * status, -1 when it could not start or did not exit, -2 when it was
 * killed for time. */
static int run_prog(char *const *argv, int out_fd, int err_fd) {
    pid_t pid;
    if (prog_spawn(argv, out_fd, err_fd, &pid)) return -1;
    double deadline = now_s() + cc_timeout();
    long us = 200;
    int st;
    while (!prog_done(pid, deadline, &st)) nap(&us);
    return st;
}

/* Write data to path in the cache folder through a fresh temporary
 * (O_EXCL, no links followed) renamed into place: 0, or -1 with a
 * reason in err. A symbolic link (or anything but a regular file) at
 * path is refused, not written through. */
static int write_nofollow(const char *path, const void *data, size_t len, char *err, size_t cap) {
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, cap, "%s: %s, not a file: refused", path,
                 S_ISLNK(st.st_mode) ? "a symbolic link" : "something else");
        return -1;
    }
    static unsigned counter;
    char tmp[4300];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        snprintf(err, cap, "%s: cannot create a temporary file: %s", path, strerror(errno));
        return -1;
    }
    const char *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int e = done < len ? (errno ? errno : EIO) : 0;
    if (!e && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (e) {
        unlink(tmp);
        snprintf(err, cap, "%s: cannot write: %s", path, strerror(e));
        return -1;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        snprintf(err, cap, "%s: cannot rename into place: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

/* The compiler's file, symbolic links followed, found on PATH as
 * posix_spawnp finds it; NULL when there is none. (realpath's memory:
 * free, not tg_free.) */
static char *cc_resolve(const char *cc) {
    if (strchr(cc, '/')) return realpath(cc, NULL);
    const char *path = getenv("PATH");
    char def[256];
    if (!path) {
        size_t n = confstr(_CS_PATH, def, sizeof def);
        path = n > 0 && n <= sizeof def ? def : "/bin:/usr/bin";
    }
    char buf[4200];
    for (const char *p = path;; p++) {
        const char *e = strchrnul(p, ':');
        int len = (int)(e - p);
        snprintf(buf, sizeof buf, "%.*s/%s", len ? len : 1, len ? p : ".", cc);
        struct stat st;
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
            return realpath(buf, NULL);
        if (!*e) return NULL;
        p = e;
    }
}

/* Where the identity of the compiler named cc is kept in the cache
 * folder: <hash>.ccid, the hash of the name, the file it resolves to and
 * that file's device, inode, size and modification and change times.
 * Running `cc --version` costs a process (about 6 ms); a tg process that
 * runs fused kernels from the cache reads this file instead, and a
 * compiler that is replaced, upgraded or edited (a wrapper script) is a
 * new file or a new time: its identity is read again. 0: no such
 * compiler file. */
static int ccid_path(const char *dir, const char *cc, char *out, size_t cap) {
    char *real = cc_resolve(cc);
    struct stat st;
    if (!real || stat(real, &st) != 0) {
        free(real);
        return 0;
    }
    char key[512];
    snprintf(key, sizeof key, "tg-ccid 1|%lu|%lu|%lld|%lld.%09ld|%lld.%09ld", (unsigned long)st.st_dev,
             (unsigned long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    u128 h = fnv_init();
    h = fnv_add(h, cc, strlen(cc) + 1);
    h = fnv_add(h, real, strlen(real) + 1);
    h = fnv_add(h, key, strlen(key) + 1);
    free(real);
    char hex[33];
    fnv_hex(h, hex);
    return snprintf(out, cap, "%s/%s.ccid", dir, hex) < (int)cap;
}

/* The compiler's identity, `$CC --version`, once per TG_CC value (lock
 * held): from the cache folder's <hash>.ccid when an earlier process
 * wrote it for this very compiler file, else by running the compiler
 * (and then kept there, when the folder is usable). */
/* Find out whether TG_CC works, and its identity (once per compiler
 * named): cc_ok, cc_ident, cpu_flags. 0, or -1 when an allocation failed
 * (cc_ok false; probed again next time). */
static int probe_cc(void) {
    const char *cc = cc_name();
    if (cc_for && strcmp(cc_for, cc) == 0) return 0;
    char dbuf[4096];
    const char *dir = dir_into(dbuf, sizeof dbuf) && mkdirs(dbuf) == 0 ? dbuf : NULL;
    tg_free(cc_for);
    tg_free(cc_ident);
    cc_ident = NULL;
    cc_ok = false;
    bool oom = false;
    if (!(cc_for = tg_strdup(cc))) oom = true;
    char idpath[4200];
    bool have_id = dir && ccid_path(dir, cc, idpath, sizeof idpath);
    char buf[4096];
    if (have_id) {
        int fd = open(idpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        if (!f && fd >= 0) close(fd);
        if (f) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            bool whole = n > 0 && !ferror(f) && fgetc(f) == EOF;
            fclose(f);
            buf[n] = 0;
            size_t hl = strlen(CCID_HEAD);
            if (whole && strlen(buf) == n && n > hl && !strncmp(buf, CCID_HEAD, hl)) {
                cc_ident = tg_strdup(buf + hl);
                cc_ok = cc_ident != NULL;
                oom |= !cc_ok;
                if (cc_ok) tg_kcache_mark_used(idpath);
            }
        }
    }
    if (!cc_ok && !oom) {
        FILE *tmp = tmpfile();
        char *argv[] = {(char *)cc, "--version", NULL};
        stats.compiler_runs++;
        size_t hl = strlen(CCID_HEAD);
        memcpy(buf, CCID_HEAD, hl);
        cc_probe_rc = tmp ? run_prog(argv, fileno(tmp), -1) : -1;
        if (cc_probe_rc == 0) {
            rewind(tmp);
            size_t n = fread(buf + hl, 1, sizeof buf - 1 - hl, tmp);
            buf[hl + n] = 0;
            n = strlen(buf + hl);
            cc_ident = tg_strdup(buf + hl);
            cc_ok = cc_ident != NULL;
            oom |= !cc_ok;
            if (cc_ok && n > 0 && have_id) {
                /* best effort: a folder that cannot be written to costs
                 * the next process the same run */
                char err[64];
                write_nofollow(idpath, buf, hl + n, err, sizeof err);
            }
        }
        if (tmp) fclose(tmp);
    }
    if (!cpu_flags && !oom) {
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[8192];
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8) ||
                !strncmp(line, "model name", 10)) {
                tg_str s = {0};
                if (cpu_flags) tg_str_addf(&s, "%s", cpu_flags);
                tg_str_addf(&s, "%s", line);
                tg_free(cpu_flags);
                cpu_flags = s.oom ? NULL : s.s;
                if (s.oom) {
                    tg_str_free(&s);
                    oom = true; /* not a key without the CPU's features */
                    break;
                }
                if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) break;
            }
        if (f) fclose(f);
    }
    if (!oom) return 0;
    tg_free(cc_for);
    cc_for = NULL;
    cc_ok = false;
    return -1;
}

static kentry *map_find(const char *hash) {
    for (int i = 0; i < nmap; i++)
        if (!strcmp(map[i].hash, hash)) return &map[i];
    return NULL;
}

/* Room for one more entry in the map (lock held): false when out of
 * memory. */
static bool grow_map(void) {
    int c = cmap ? cmap * 2 : 16;
    kentry *p = tg_realloc(map, sizeof *p * (size_t)c);
    if (!p) return false;
    map = p;
    cmap = c;
    return true;
}

/* Why the last tg_kcache_get of this thread failed, when the reason names
 * a file (*why points here). */
static _Thread_local char why_buf[4600];

static const char *whyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *whyf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why_buf, sizeof why_buf, fmt, ap);
    va_end(ap);
    return why_buf;
}

/* ---- the footer of a <hash>.so ---- */

/* After the ELF file the compiler wrote: the magic, the entry's hash
 * (the full cache key), the ELF part's length and its CRC32C, and the
 * CRC32C of the footer's first 52 bytes (a garbled footer). 64 bytes,
 * little-endian as the machines that run the kernels. */
#define FOOT_MAGIC "tgkso\001\000\000"
#define FOOT_LEN 64
#define SO_MAX ((size_t)1 << 30)

static void make_footer(unsigned char f[FOOT_LEN], const char *hash, uint64_t len, uint32_t crc) {
    memset(f, 0, FOOT_LEN);
    memcpy(f, FOOT_MAGIC, 8);
    memcpy(f + 8, hash, 32);
    tg_le_put64(f + 40, len);
    tg_le_put32(f + 48, crc);
    tg_le_put32(f + 52, tg_crc32c(0, f, 52));
}

/* Read the whole of the regular file path (no link followed) into *buf:
 * its size, or -1 with errno set (ELOOP: a link; EINVAL: not
 * a regular file; EFBIG: too big to be a kernel). */
static long long read_whole(const char *path, unsigned char **buf) {
    *buf = NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    int bad = fstat(fd, &st) != 0          ? errno
              : !S_ISREG(st.st_mode)         ? EINVAL
              : (size_t)st.st_size > SO_MAX ? EFBIG
                                             : 0;
    if (bad) {
        int e = bad;
        close(fd);
        errno = e;
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    unsigned char *b = tg_malloc(n ? n : 1);
    if (!b) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    return (long long)got;
}

/* Check dir/<hash>.so's footer before it is loaded: SO_OK; SO_MISSING;
 * SO_BAD (cut short, emptied, another kernel's file, no footer: remove it
 * and compile again), with the reason in err; SO_REFUSED (a link or not
 * a regular file: left alone), with the reason in err. */
enum { SO_OK, SO_MISSING, SO_BAD, SO_REFUSED };

static int check_so(const char *path, const char *hash, char *err, size_t cap) {
    unsigned char *b;
    long long n = read_whole(path, &b);
    if (n < 0) {
        int e = errno;
        if (e == ENOENT) return SO_MISSING;
        if (e == ELOOP) {
            snprintf(err, cap, "%s: a symbolic link, not a file: refused", path);
            return SO_REFUSED;
        }
        if (e == EINVAL) {
            snprintf(err, cap, "%s: not a regular file: refused", path);
            return SO_REFUSED;
        }
        snprintf(err, cap, "%s: %s", path, strerror(e));
        return e == EFBIG ? SO_BAD : SO_REFUSED;
    }
    int rc = SO_BAD;
    const unsigned char *f = b + (n >= FOOT_LEN ? n - FOOT_LEN : 0);
    if (n < FOOT_LEN || memcmp(f, FOOT_MAGIC, 8) || tg_le_get32(f + 52) != tg_crc32c(0, f, 52))
        snprintf(err, cap, "no tg footer (cut short, or not written by this version)");
    else if (memcmp(f + 8, hash, 32))
        snprintf(err, cap, "the file of another kernel (%.32s)", (const char *)f + 8);
    else if (tg_le_get64(f + 40) != (uint64_t)(n - FOOT_LEN))
        snprintf(err, cap, "%lld bytes where the footer says %llu", n - FOOT_LEN,
                 (unsigned long long)tg_le_get64(f + 40));
    else if (tg_le_get32(f + 48) != tg_crc32c(0, b, (size_t)(n - FOOT_LEN)))
        snprintf(err, cap, "its checksum does not match (damaged)");
    else
        rc = SO_OK;
    tg_free(b);
    return rc;
}

/* check_so's answer from the footer alone, without reading the rest or
 * allocating (tg_kcache_prefetch: whether a kernel is there; the
 * tg_kcache_get that loads it checks the whole file first, and compiles
 * again one whose ELF part is damaged). */
static int check_footer(const char *path, const char *hash) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? SO_MISSING : SO_REFUSED;
    struct stat st;
    unsigned char f[FOOT_LEN];
    int rc = SO_BAD;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = SO_REFUSED;
    else if ((size_t)st.st_size > SO_MAX || st.st_size < FOOT_LEN ||
             pread(fd, f, FOOT_LEN, st.st_size - FOOT_LEN) != FOOT_LEN)
        rc = SO_BAD;
    else if (!memcmp(f, FOOT_MAGIC, 8) && tg_le_get32(f + 52) == tg_crc32c(0, f, 52) && !memcmp(f + 8, hash, 32) &&
             tg_le_get64(f + 40) == (uint64_t)(st.st_size - FOOT_LEN))
        rc = SO_OK;
    close(fd);
    return rc;
}

/* Append the footer to the compiler's output tmp, for entry hash, its
 * checksum read in pieces (nothing allocated); 0, or -1 with the reason
 * in err. */
static int add_footer(const char *tmp, const char *hash, char *err, size_t cap) {
    int fd = open(tmp, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    int e = fd < 0 ? errno : fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (!e && (size_t)st.st_size > SO_MAX) e = EFBIG;
    uint64_t n = 0;
    uint32_t crc = 0;
    unsigned char piece[16384];
    while (!e) {
        ssize_t r = pread(fd, piece, sizeof piece, (off_t)n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) e = errno;
        if (r <= 0) break;
        crc = tg_crc32c(crc, piece, (size_t)r);
        n += (uint64_t)r;
        if (n > SO_MAX) e = EFBIG;
    }
    if (e) {
        if (fd >= 0) close(fd);
        snprintf(err, cap, "the compiler's output %s: %s", tmp, strerror(e));
        return -1;
    }
    unsigned char f[FOOT_LEN];
    make_footer(f, hash, n, crc);
    bool ok = write(fd, f, FOOT_LEN) == FOOT_LEN && fsync(fd) == 0;
    e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) snprintf(err, cap, "the compiler's output %s: cannot write: %s", tmp, strerror(e));
    return ok ? 0 : -1;
}

/* The kernel of the shared object at path, or NULL with dlerror's text
 * in err. */
static tg_kernel_fn load_so(const char *path, void **handle, char *err, size_t cap) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        size_t n = strlen(path);
        /* glibc's text starts with the path, which the caller names */
        if (e && !strncmp(e, path, n) && !strncmp(e + n, ": ", 2)) e += n + 2;
        snprintf(err, cap, "%s", e ? e : "dlopen failed");
        return NULL;
    }
    tg_kernel_fn fn;
    *(void **)&fn = dlsym(h, "tg_composite_kernel");
    if (!fn) {
        const char *e = dlerror();
        snprintf(err, cap, "%s", e ? e : "no symbol tg_composite_kernel");
        dlclose(h);
        return NULL;
    }
    *handle = h;
    return fn;
}

/* Up to 3 lines of the compiler's messages in file path, on one line,
 * into out. */
static void first_lines(const char *path, char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen(path, "re");
    if (!f) return;
    char line[512];
    size_t k = 0;
    for (int i = 0; i < 3 && k + 1 < cap && fgets(line, sizeof line, f);) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0]) continue;
        int w = snprintf(out + k, cap - k, "%s%s", k ? " | " : "", line);
        if (w < 0) break;
        k += (size_t)w;
        i++;
    }
    fclose(f);
    if (k >= cap) k = cap - 1;
    out[k] = 0;
}

/* Create path afresh (a link or stale file of that name unlinked first,
 * then O_EXCL, no link followed): the descriptor, or -1. */
static int create_fresh(const char *path, int flags) {
    unlink(path);
    return open(path, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

/* One compile of a kernel into the cache folder: compile_start writes
 * the source and starts the compiler, prog_done tells when it has ended,
 * compile_finish puts the result in place. tg_kcache_get runs one at a
 * time, tg_kcache_prefetch several at once (compile_jobs, both). */
typedef struct cjob {
    const char *src;
    char hash[33];
    pid_t pid;       /* the compiler while it runs, else 0 */
    int efd;         /* its stderr, <hash>.tmp.<pid>.err (-1: none) */
    int st;          /* its end (prog_done) */
    double deadline; /* TG_CC_TIMEOUT from its own start */
    bool started;    /* the compiler was asked for (stats.compiles) */
    bool failed;
    char *why;       /* why it failed (tg_malloc'ed; NULL: out of memory) */
} cjob;

/* The job's files in dir: <hash>.c, .so, the compiler's output and its
 * stderr (temporaries of this process). */
static void job_paths(const char *dir, const cjob *j, char cpath[4200], char spath[4200], char tpath[4200],
                      char epath[4200]) {
    snprintf(cpath, 4200, "%s/%s.c", dir, j->hash);
    snprintf(spath, 4200, "%s/%s.so", dir, j->hash);
    snprintf(tpath, 4200, "%s/%s.tmp.%ld.so", dir, j->hash, (long)getpid());
    snprintf(epath, 4200, "%s/%s.tmp.%ld.err", dir, j->hash, (long)getpid());
}

/* Write j's source to dir and start the compiler on it (the folder's
 * lock held by the caller): 0 (j->pid the compiler, or 0 with j->st = -1
 * when it could not start), or -1 with the reason in *why. */
static int compile_start(const char *dir, cjob *j, const char **why) {
    char cpath[4200], spath[4200], tpath[4200], epath[4200], err[600];
    job_paths(dir, j, cpath, spath, tpath, epath);
    j->pid = 0;
    j->efd = -1;
    if (write_nofollow(cpath, j->src, strlen(j->src), err, sizeof err)) {
        *why = whyf("cannot write to the kernel cache folder: %s", err);
        return -1;
    }
    /* The compiler writes over a file we made, not through a link
     * planted under its name. */
    int tfd = create_fresh(tpath, O_WRONLY);
    if (tfd < 0) {
        *why = whyf("cannot write to the kernel cache folder: %s: %s", tpath, strerror(errno));
        return -1;
    }
    close(tfd);
    j->efd = create_fresh(epath, O_RDWR);
    const char *argv[32];
    int k = 0;
    argv[k++] = cc_name();
    for (int i = 0; CFLAGS[i]; i++) argv[k++] = CFLAGS[i];
    argv[k++] = "-o";
    argv[k++] = tpath;
    argv[k++] = cpath;
    argv[k++] = "-lm";
    argv[k] = NULL;
    j->started = true;
    j->deadline = now_s() + cc_timeout();
    if (prog_spawn((char *const *)argv, -1, j->efd, &j->pid)) {
        j->pid = 0;
        j->st = -1;
    }
    return 0;
}

/* After j's compiler ended with status j->st: its output, with the
 * footer, renamed to dir/<hash>.so: 0, or -1 with the reason in *why. The
 * temporaries go either way. */
static int compile_finish(const char *dir, cjob *j, const char **why) {
    char cpath[4200], spath[4200], tpath[4200], epath[4200], err[600];
    job_paths(dir, j, cpath, spath, tpath, epath);
    int st = j->st;
    char msg[400] = "";
    if (st != 0 && j->efd >= 0) first_lines(epath, msg, sizeof msg);
    if (j->efd >= 0) close(j->efd);
    j->efd = -1;
    unlink(epath);
    if (st != 0) {
        unlink(tpath);
        if (st == -2)
            *why = whyf("the C compiler %s ran past %g s (TG_CC_TIMEOUT) and was stopped", cc_name(),
                        cc_timeout());
        else if (st == -1)
            *why = whyf("the C compiler %s could not be started", cc_name());
        else
            *why = whyf("the C compiler %s failed (exit status %d)%s%s", cc_name(), st, msg[0] ? ": " : "",
                        msg);
        return -1;
    }
    /* On disk before the rename, so that a power cut cannot leave an
     * empty <hash>.so under its final name (one whose footer does not
     * check is built again all the same: tg_kcache_get). */
    if (add_footer(tpath, j->hash, err, sizeof err)) {
        unlink(tpath);
        *why = whyf("%s", err);
        return -1;
    }
    if (rename(tpath, spath) != 0) {
        int e = errno;
        unlink(tpath);
        *why = whyf("cannot put the compiled kernel in place: %s: %s", spath, strerror(e));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static void job_failed(cjob *j, const char *why) {
    j->failed = true;
    j->why = tg_strdup(why ? why : "the compile failed");
}

static void job_end(const char *dir, cjob *j) {
    const char *why = NULL;
    if (compile_finish(dir, j, &why)) job_failed(j, why);
}

/* Compile the n jobs into dir, at most par compilers at once, each under
 * its own time limit (the folder's lock held by the caller, not the
 * process's: a compile takes seconds, and the other threads' look-ups of
 * kernels in memory or on disk go on meanwhile): a failed one has
 * ->failed, and its reason in ->why. */
static void compile_jobs(const char *dir, cjob *jobs, int n, int par) {
    cjob *run[64];
    if (par < 1) par = 1;
    if (par > (int)(sizeof run / sizeof *run)) par = (int)(sizeof run / sizeof *run);
    int next = 0, nrun = 0;
    long us = 200;
    while (next < n || nrun > 0) {
        while (nrun < par && next < n) {
            cjob *j = &jobs[next++];
            const char *why = NULL;
            if (compile_start(dir, j, &why))
                job_failed(j, why);
            else if (!j->pid)
                job_end(dir, j);
            else
                run[nrun++] = j;
        }
        bool ended = false;
        for (int i = 0; i < nrun; i++) {
            cjob *j = run[i];
            if (!prog_done(j->pid, j->deadline, &j->st)) continue;
            j->pid = 0;
            job_end(dir, j);
            run[i--] = run[--nrun];
            ended = true;
        }
        if (ended)
            us = 200;
        else if (nrun > 0)
            nap(&us);
    }
}

/* Compile src into dir/hash.so, with its footer (the folder's lock held
 * by the caller); *started: whether the compiler was asked for. */
static int compile_into(const char *dir, const char *hash, const char *src, bool *started, const char **why) {
    cjob j = {.src = src};
    memcpy(j.hash, hash, sizeof j.hash);
    compile_jobs(dir, &j, 1, 1);
    *started = j.started;
    if (!j.failed) return 0;
    *why = j.why ? whyf("%s", j.why) : "out of memory";
    tg_free(j.why);
    return -1;
}

/* The folder's lock file, opened to be flock'ed: -1 when it cannot be
 * (errno set: that of the first try). create: make it when missing.
 * Read-only will do for flock (a lock file another user made in a shared
 * folder). A link is not followed. */
static int open_lock(const char *dir, bool create) {
    char p[4200];
    snprintf(p, sizeof p, "%s/lock", dir);
    int fd = open(p, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0 && errno != ENOENT && errno != ELOOP) {
        int e = errno;
        fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) errno = e;
    }
    return fd;
}

/* Take the folder's lock for a compile: the descriptor, or -1 with the
 * reason in *why. A process that has waited 5 s (or half the time limit,
 * if less) says so once on stderr, and gives up after cc_timeout()
 * seconds (a compile that hangs). (Waiting a second for another
 * process's compile is the common case, processes started together on one
 * graph: it goes unsaid, so that their stderr stays clean.) */
static int lock_folder(const char *dir, const char **why) {
    int fd = open_lock(dir, true);
    if (fd < 0) {
        *why = errno == ELOOP ? whyf("cannot lock the kernel cache folder: %s/lock: a symbolic link, refused", dir)
                              : whyf("cannot lock the kernel cache folder: %s/lock: %s", dir, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    static int said; /* (threads wait here at once) */
    double t0 = now_s(), deadline = t0 + cc_timeout(), say = t0 + (cc_timeout() < 10 ? cc_timeout() / 2 : 5);
    long us = 1000;
    while (errno == EWOULDBLOCK || errno == EINTR) {
        if (now_s() > say && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
            fprintf(stderr, "tg: waiting for another process's compile in the kernel cache folder %s\n", dir);
        }
        if (now_s() > deadline) {
            close(fd);
            *why = whyf("gave up waiting %g s (TG_CC_TIMEOUT) for another process's compile in %s", cc_timeout(),
                        dir);
            return -1;
        }
        nap(&us);
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    }
    *why = whyf("cannot lock the kernel cache folder: %s/lock: %s", dir, strerror(errno));
    close(fd);
    return -1;
}

/* The cache key of src's kernel (lock held, compiler probed: cc_ok):
 * the source, the compiler's identity, the flags, the CPU's features. */
static void kernel_hash(const char *src, char hash[33]) {
    u128 h = fnv_init();
    h = fnv_add(h, src, strlen(src) + 1);
    h = fnv_add(h, cc_ident, strlen(cc_ident) + 1);
    for (int i = 0; CFLAGS[i]; i++) h = fnv_add(h, CFLAGS[i], strlen(CFLAGS[i]) + 1);
    if (cpu_flags) h = fnv_add(h, cpu_flags, strlen(cpu_flags));
    fnv_hex(h, hash);
}

/* Record that the prefetch failed to compile hash, and why: 0, or -1
 * when out of memory (nothing recorded: the look-up compiles it again). */
static int fail_put(const char *hash, const char *why) {
    if (nfails == cfails) {
        int c = cfails ? cfails * 2 : 16;
        kfail *p = tg_realloc(fails, sizeof *p * (size_t)c);
        if (!p) return -1;
        fails = p;
        cfails = c;
    }
    if (!(fails[nfails].why = tg_strdup(why))) return -1;
    memcpy(fails[nfails].hash, hash, 33);
    nfails++;
    return 0;
}

/* Whether the prefetch failed to compile hash: then *why says why, and
 * the failure is forgotten. */
static bool fail_take(const char *hash, const char **why) {
    for (int i = 0; i < nfails; i++)
        if (!strcmp(fails[i].hash, hash)) {
            *why = whyf("%s", fails[i].why ? fails[i].why : "the compile failed");
            tg_free(fails[i].why);
            fails[i] = fails[--nfails];
            return true;
        }
    return false;
}

static int sweep_folder(const char *dir, double min_age, int *removed, tg_ctx *ctx);
static int open_lock(const char *dir, bool create);

/* A kernel loaded from the folder is used now: its file's time says so,
 * for the pruning of unused entries (written at most once an hour; a
 * folder this process may not write is left as it is). */
enum { USE_STAMP_S = 3600, PRUNE_EVERY_S = 86400 };

void tg_kcache_mark_used(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && difftime(time(NULL), st.st_mtime) >= USE_STAMP_S)
        (void)utimensat(AT_FDCWD, path, NULL, 0);
}

/* TG_CACHE_MAX_AGE: days an entry may stay unused (a positive number,
 * fractions allowed), 0 for never; else 30. In seconds, or -1: never. */
static double max_age_s(void) {
    const char *e = getenv("TG_CACHE_MAX_AGE");
    if (!e || !*e) return 30.0 * 86400;
    char *end;
    double d = strtod(e, &end);
    if (*end || !(d >= 0) || d > 1e6) return 30.0 * 86400;
    return d == 0 ? -1 : d * 86400;
}

/* Once a process: when the folder was last pruned a day ago or more (the
 * lock file's time), remove the entries unused for TG_CACHE_MAX_AGE days.
 * Only when the lock is free at once: a compile in progress elsewhere
 * means another process is using the folder, and a later one will prune. */
static void prune_once(const char *dir) {
    static bool done;
    if (done) return;
    done = true;
    double max_age = max_age_s();
    if (max_age < 0) return;
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/lock", dir);
    if (lstat(p, &st) == 0 && difftime(time(NULL), st.st_mtime) < PRUNE_EVERY_S) return;
    int lfd = open_lock(dir, true);
    if (lfd < 0) return;
    if (flock(lfd, LOCK_EX | LOCK_NB) == 0) {
        int removed = 0;
        (void)futimens(lfd, NULL);
        (void)sweep_folder(dir, max_age, &removed, NULL);
    }
    close(lfd); /* releases the flock */
}

/* The look-up itself: the process's lock is held for the maps and the
 * counters only. Reading, checking and loading a kernel from the folder
 * and compiling one run without it (a compile takes seconds, and every
 * other thread's first call of a kernel asks here: with the lock held
 * throughout, one found in memory or on disk waited for another's
 * compile); compiles are serialised by the folder's lock, which each
 * thread takes on a descriptor of its own (flock: one holder per open
 * file description, in a process as between processes). Two threads
 * that miss the same kernel at once: one compiles, the other then finds
 * it on disk, and the first to come back puts it in the map. */
tg_kernel_fn tg_kcache_get(const char *src, const char **why) {
    tg_kernel_fn fn = NULL;
    char *dir = NULL;
    char hash[33];
    *why = NULL;
    pthread_mutex_lock(&lock);
    if (probe_cc() < 0) {
        *why = "out of memory";
        goto failed;
    }
    if (!cc_ok) {
        *why = cc_probe_rc == -2 ? whyf("the C compiler %s: `--version` ran past %g s (TG_CC_TIMEOUT)", cc_name(),
                                        cc_timeout())
                                 : "no working C compiler (set TG_CC)";
        goto failed;
    }
    kernel_hash(src, hash);
    kentry *e = map_find(hash);
    if (e) {
        stats.memory_hits++;
        fn = e->fn;
        pthread_mutex_unlock(&lock);
        return fn;
    }
    if (fail_take(hash, why)) goto failed;
    if (!(dir = tg_kcache_dir())) {
        *why = "no kernel cache folder (set TG_CACHE_DIR or HOME)";
        goto failed;
    }
    if (mkdirs(dir) != 0) {
        /* "Not a directory" (a file of that name, TG_CACHE_DIR naming a
         * file), "Permission denied" (cannot be made) */
        *why = whyf("unusable kernel cache folder %s: %s", dir, strerror(errno));
        goto failed;
    }
    prune_once(dir);
    pthread_mutex_unlock(&lock);

    char spath[4200];
    snprintf(spath, sizeof spath, "%s/%s.so", dir, hash);
    void *handle = NULL;
    bool compiled = false;
    int lfd = -1;
    char err[600];
    /* A kernel on disk whose footer checks loads without the folder's lock. */
    int c = check_so(spath, hash, err, sizeof err);
    if (c == SO_OK) fn = load_so(spath, &handle, err, sizeof err);
    if (!fn && c != SO_REFUSED && (lfd = lock_folder(dir, why)) >= 0) {
        /* Another process (or thread) may have built it (or built again a
         * damaged one) while we waited. One that is there and does not
         * check or does not load is damaged: emptied by a power cut, cut
         * short, written over by another kernel's file, written by a TG_CC
         * that failed and said it succeeded, older than the footer. As
         * Theano does, it is removed and compiled again, once. */
        c = check_so(spath, hash, err, sizeof err);
        if (c == SO_OK) fn = load_so(spath, &handle, err, sizeof err);
        if (!fn && c != SO_REFUSED) {
            if (c != SO_MISSING) unlink(spath);
            if (!compile_into(dir, hash, src, &compiled, why)) {
                if ((c = check_so(spath, hash, err, sizeof err)) != SO_OK)
                    *why = whyf("the compiled kernel %s is damaged: %s", spath, err);
                else if (!(fn = load_so(spath, &handle, err, sizeof err)))
                    *why = whyf("the compiled kernel %s could not be loaded: %s", spath, err);
            }
        }
        close(lfd); /* releases the flock */
    }
    if (!fn && c == SO_REFUSED && !*why) *why = whyf("%s", err);
    if (fn && !compiled) tg_kcache_mark_used(spath);
    tg_free(dir);
    dir = NULL;

    pthread_mutex_lock(&lock);
    if (compiled) stats.compiles++;
    if (!fn) goto failed;
    if (!compiled) stats.disk_hits++;
    if ((e = map_find(hash))) {
        /* another thread's, loaded meanwhile: the same file, one handle */
        dlclose(handle);
        fn = e->fn;
    } else if (nmap < cmap || grow_map()) {
        memcpy(map[nmap].hash, hash, sizeof hash);
        map[nmap].handle = handle;
        map[nmap].fn = fn;
        nmap++;
    } /* (else still usable, just not remembered) */
    pthread_mutex_unlock(&lock);
    return fn;
failed:
    stats.failures++;
    pthread_mutex_unlock(&lock);
    tg_free(dir);
    return NULL;
}

/* How many compilers tg_kcache_prefetch runs at once: TG_CC_JOBS when a
 * positive number (256 at most), else the CPUs this process may run on
 * (32 at most). */
static int cc_jobs(void) {
    const char *t = getenv("TG_CC_JOBS");
    if (t && *t) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end == 0 && v > 0) return v < 256 ? (int)v : 256;
    }
    cpu_set_t cs;
    int n = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : 1;
    return n < 1 ? 1 : n > 32 ? 32 : n;
}

/* Whether the prefetch should compile the kernel hash (lock held, the
 * compiler probed): not in memory, not failed before, not in dir with
 * its footer (one refused, a link, is tg_kcache_get's to tell). */
static bool wanted(const char *dir, const char *hash) {
    if (map_find(hash)) return false;
    for (int q = 0; q < nfails; q++)
        if (!strcmp(fails[q].hash, hash)) return false;
    char spath[4200];
    snprintf(spath, sizeof spath, "%s/%s.so", dir, hash);
    int c = check_footer(spath, hash);
    return c != SO_OK && c != SO_REFUSED;
}

int tg_kcache_wanted(const char *src) {
    int w = 0;
    char dir[4096], hash[33];
    pthread_mutex_lock(&lock);
    if (probe_cc() < 0)
        w = -1;
    else if (cc_ok && dir_into(dir, sizeof dir)) {
        kernel_hash(src, hash);
        w = wanted(dir, hash);
    }
    pthread_mutex_unlock(&lock);
    return w;
}

int tg_kcache_prefetch(const char *const *srcs, int n) {
    if (n < 2) return 0;
    cjob *jobs = NULL;
    char dir[4096];
    int lfd = -1, m = 0, rc = 0;
    pthread_mutex_lock(&lock);
    if (probe_cc() < 0) {
        rc = -1;
        goto done;
    }
    if (!cc_ok || !dir_into(dir, sizeof dir) || mkdirs(dir) != 0) goto done;
    prune_once(dir);
    if (!(jobs = tg_calloc((size_t)n, sizeof *jobs))) {
        rc = -1;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        cjob *j = &jobs[m];
        j->src = srcs[i];
        kernel_hash(srcs[i], j->hash);
        bool seen = !wanted(dir, j->hash);
        for (int q = 0; q < m && !seen; q++) seen = !strcmp(jobs[q].hash, j->hash);
        if (!seen) m++;
    }
    /* one the look-up compiles as well, without the folder's lock taken
     * twice */
    if (m < 2) goto done;
    /* the compiles without the process's lock (compile_jobs) */
    pthread_mutex_unlock(&lock);
    const char *why;
    if ((lfd = lock_folder(dir, &why)) >= 0) {
        /* Another process may have built some while we waited; one whose
         * footer does not check is built again. */
        int keep = 0;
        char spath[4200];
        for (int i = 0; i < m; i++) {
            snprintf(spath, sizeof spath, "%s/%s.so", dir, jobs[i].hash);
            int c = check_footer(spath, jobs[i].hash);
            if (c == SO_OK || c == SO_REFUSED) continue;
            if (c != SO_MISSING) unlink(spath);
            jobs[keep++] = jobs[i];
        }
        m = keep;
        compile_jobs(dir, jobs, m, cc_jobs());
        close(lfd); /* releases the flock */
    } else {
        m = 0;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < m; i++) {
        stats.compiles += jobs[i].started;
        /* a reason that could not be kept: for want of memory */
        if (jobs[i].failed && (!jobs[i].why || fail_put(jobs[i].hash, jobs[i].why))) rc = -1;
        tg_free(jobs[i].why);
    }
done:
    tg_free(jobs);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ---- listing and clearing ---- */

static bool is_hash(const char *s, size_t n) {
    if (n != 32) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

static int cmp_entry(const void *a, const void *b) {
    const tg_kcache_entry *x = a, *y = b;
    return x->age_seconds < y->age_seconds ? -1 : x->age_seconds > y->age_seconds;
}

/* The compiled code of an entry: <hash>.so (CPU), <hash>.cubin or
 * <hash>.ptx (GPU, nvrtc.c), with the source beside it as <hash>.c or
 * <hash>.cu. NULL for any other name. */
static const char *entry_source_suffix(const char *nm) {
    if (strlen(nm) <= 32 || !is_hash(nm, 32)) return NULL;
    const char *x = nm + 32;
    return !strcmp(x, ".so") ? ".c" : !strcmp(x, ".cubin") || !strcmp(x, ".ptx") ? ".cu" : NULL;
}

int tg_kcache_list(const char *dir, tg_kcache_entry **out, int *n, tg_ctx *ctx) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return TG_OK;
        return tg_errorf(ctx, TG_EIO, "%s: %s", dir, strerror(errno));
    }
    int cap = 0, rc = TG_OK;
    struct dirent *de;
    time_t now = time(NULL);
    while ((de = readdir(d))) {
        const char *srcx = entry_source_suffix(de->d_name);
        if (!srcx) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            tg_kcache_entry *p = tg_realloc(*out, sizeof *p * (size_t)cap);
            if (!p) {
                rc = tg_errorf(ctx, TG_ENOMEM, "out of memory");
                break;
            }
            *out = p;
        }
        tg_kcache_entry *e = &(*out)[*n];
        memset(e, 0, sizeof *e);
        memcpy(e->hash, de->d_name, 32);
        char p[4200];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (stat(p, &st) != 0) continue;
        e->bytes = st.st_size;
        e->age_seconds = difftime(now, st.st_mtime);
        snprintf(e->kind, sizeof e->kind, "cpu");
        if (srcx[2]) {
            /* A GPU entry names its target on its first line
             * ("tg-nvrtc 1 sm_90 ..."; nvrtc.c). */
            char target[16] = "?";
            FILE *f = fopen(p, "r");
            if (f) {
                if (fscanf(f, "tg-nvrtc %*d %15s", target) != 1) snprintf(target, sizeof target, "?");
                fclose(f);
            }
            snprintf(e->kind, sizeof e->kind, "cuda %s", target);
        }
        snprintf(p, sizeof p, "%s/%s%s", dir, e->hash, srcx);
        FILE *f = fopen(p, "r");
        if (f) {
            if (fstat(fileno(f), &st) == 0) e->bytes += st.st_size;
            if (fgets(e->first_line, sizeof e->first_line, f))
                e->first_line[strcspn(e->first_line, "\n")] = 0;
            fclose(f);
        }
        (*n)++;
    }
    closedir(d);
    if (rc) {
        tg_free(*out);
        *out = NULL;
        *n = 0;
        return rc;
    }
    if (*n > 1) qsort(*out, (size_t)*n, sizeof **out, cmp_entry);
    return TG_OK;
}

bool tg_kcache_busy(const char *dir) {
    int fd = open_lock(dir, false);
    if (fd < 0) return false;
    bool busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases the flock */
    return busy;
}

/* Whether temporary name nm (<hash>[.<suffix>].tmp.<pid>...) belongs to a
 * process that is still running: it may be writing it (a compiler's
 * identity is written outside the folder's lock: probe_cc). */
static bool tmp_writer_alive(const char *nm) {
    const char *t = strstr(nm + 32, ".tmp.");
    if (!t) return false;
    char *end;
    long pid = strtol(t + 5, &end, 10);
    if (end == t + 5 || pid <= 0) return false;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static bool all_digits(const char *s, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

/* Whether nm is the name of one of tg's temporaries: <hash>.tmp.<pid>.so
 * or .err (a compile), <hash>.<sfx>.tmp.<pid>.<n> (write_nofollow,
 * nvrtc.c's writes). */
static bool is_tmp_name(const char *nm) {
    static const char *const sfx[] = {"", ".c", ".cu", ".cubin", ".ptx", ".ccid", ".so", NULL};
    if (strlen(nm) <= 32 || !is_hash(nm, 32)) return false;
    for (int i = 0; sfx[i]; i++) {
        size_t k = strlen(sfx[i]);
        const char *t = nm + 32 + k;
        if (strncmp(nm + 32, sfx[i], k) || strncmp(t, ".tmp.", 5)) continue;
        t += 5;
        const char *dot = strchr(t, '.');
        if (!dot || !all_digits(t, (size_t)(dot - t))) continue;
        if (!*sfx[i]) return !strcmp(dot, ".so") || !strcmp(dot, ".err");
        return all_digits(dot + 1, strlen(dot + 1));
    }
    return false;
}

/* Whether dir/nm is a regular file (not a link) whose content starts with
 * head. */
static bool starts_with(const char *dir, const char *nm, const char *head) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, nm);
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    char buf[64];
    size_t n = strlen(head);
    bool ok = n < sizeof buf && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, buf, n) == (ssize_t)n &&
              !memcmp(buf, head, n);
    close(fd);
    return ok;
}

/* Whether dir/nm (a regular file, not a link) is tg's: a .so whose footer
 * names it (or an older or damaged one beside a source tg wrote), a
 * GPU kernel with nvrtc.c's header, a source tg wrote, a compiler
 * identity with its header (or an empty one). A stray file that merely has a hex name is
 * not. */
static bool is_ours(const char *dir, const char *nm) {
    if (strlen(nm) <= 32 || !is_hash(nm, 32)) return false;
    const char *x = nm + 32;
    char hash[33], p[4200], err[600];
    memcpy(hash, nm, 32);
    hash[32] = 0;
    if (!strcmp(x, ".so")) {
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        if (check_so(p, hash, err, sizeof err) == SO_OK) return true;
        snprintf(p, sizeof p, "%s.c", hash);
        return starts_with(dir, nm, "\177ELF") && starts_with(dir, p, "/* tg composite");
    }
    if (!strcmp(x, ".cubin") || !strcmp(x, ".ptx")) return starts_with(dir, nm, "tg-nvrtc ");
    if (!strcmp(x, ".c") || !strcmp(x, ".cu")) return starts_with(dir, nm, "/* tg composite");
    if (!strcmp(x, ".ccid")) {
        /* or emptied (damaged): no content is lost */
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        return starts_with(dir, nm, CCID_HEAD) || (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0);
    }
    return false;
}

/* Whether dir/nm was last written (or used: mark_used) min_age seconds
 * ago or more; every file is, with min_age < 0. */
static bool old_enough(const char *dir, const char *nm, double min_age, time_t now) {
    if (min_age < 0) return true;
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, nm);
    return lstat(p, &st) == 0 && difftime(now, st.st_mtime) >= min_age;
}

int tg_kcache_clear(const char *dir, int *removed, tg_ctx *ctx) {
    return tg_kcache_clear_older(dir, -1, removed, ctx);
}

int tg_kcache_clear_older(const char *dir, double min_age, int *removed, tg_ctx *ctx) {
    *removed = 0;
    /* The folder's lock, as compiles take it: a compile in progress
     * finishes (and loads its kernel) before its files go; its lock file
     * stays, or a process waiting on it and one that came after would
     * each hold a lock of their own and compile at once. */
    int lfd = open_lock(dir, true);
    if (lfd < 0 && errno == ENOENT) {
        struct stat st;
        if (stat(dir, &st) != 0 && errno == ENOENT) return TG_OK;
    }
    if (lfd < 0 || flock(lfd, LOCK_EX) != 0) {
        int e = errno;
        if (lfd >= 0) close(lfd);
        return tg_errorf(ctx, TG_EIO, "%s/lock: cannot lock the kernel cache folder: %s", dir, strerror(e));
    }
    int rc = sweep_folder(dir, min_age, removed, ctx);
    close(lfd); /* releases the flock */
    return rc;
}

/* Remove the cache's files from dir (its lock held) whose entry was last
 * used min_age seconds ago or more (all, with min_age < 0): an entry goes
 * by its code's time, with its source; a source alone or a compiler's
 * identity by its own; the temporaries of processes that are gone, at any
 * age. */
static int sweep_folder(const char *dir, double min_age, int *removed, tg_ctx *ctx) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return TG_OK;
        return tg_errorf(ctx, TG_EIO, "%s: %s", dir, strerror(errno));
    }
    time_t now = time(NULL);
    int rc = TG_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        /* An entry: its code (<hash>.so, .cubin, .ptx) when it is tg's,
         * with its source (<hash>.c, .cu) when that is tg's too; a source
         * alone; a compiler's identity (<hash>.ccid); the temporaries of
         * processes that are gone. Nothing else, whatever its name. */
        const char *srcx = entry_source_suffix(nm);
        bool tmp = is_tmp_name(nm);
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        if (tmp) {
            struct stat st;
            if (tmp_writer_alive(nm) || lstat(p, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        } else if (!old_enough(dir, nm, min_age, now) || !is_ours(dir, nm)) {
            continue;
        }
        bool entry = srcx != NULL;
        if (!srcx && !tmp && (!strcmp(nm + 32, ".c") || !strcmp(nm + 32, ".cu"))) {
            /* a source whose code is there goes with its code */
            char code[64];
            bool has_code = false;
            static const char *const cx[] = {".so", ".cubin", ".ptx", NULL};
            for (int i = 0; cx[i] && !has_code; i++) {
                snprintf(code, sizeof code, "%.32s%s", nm, cx[i]);
                struct stat st;
                snprintf(p, sizeof p, "%s/%s", dir, code);
                has_code = lstat(p, &st) == 0;
            }
            if (has_code) continue;
            snprintf(p, sizeof p, "%s/%s", dir, nm);
            entry = true;
        }
        if (unlink(p) != 0 && errno != ENOENT) {
            rc = tg_errorf(ctx, TG_EIO, "%s: %s", p, strerror(errno));
            break;
        }
        if (srcx) {
            char snm[64];
            snprintf(snm, sizeof snm, "%.32s%s", nm, srcx);
            if (is_ours(dir, snm)) {
                snprintf(p, sizeof p, "%s/%s", dir, snm);
                if (unlink(p) != 0 && errno != ENOENT) {
                    rc = tg_errorf(ctx, TG_EIO, "%s: %s", p, strerror(errno));
                    break;
                }
            }
        }
        if (entry) (*removed)++;
    }
    closedir(d);
    return rc;
}
