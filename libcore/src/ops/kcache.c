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
 * a file. A <hash>.so that does not load (damaged) is compiled again.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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
#include "ops/composite.h"

extern char **environ;

static const char *const CFLAGS[] = {"-O3", "-march=native", "-fopenmp", "-ffp-contract=off",
                                     "-fno-math-errno", "-std=gnu11", "-shared", "-fPIC",
                                     "-w", NULL};

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
    tg_free(cc_for);
    cc_for = NULL;
    pthread_mutex_unlock(&lock);
}

static const char *cc_name(void) {
    const char *cc = getenv("TG_CC");
    return cc && *cc ? cc : "cc";
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

/* Run argv with stdout to out_fd (-1: /dev/null) and stderr to err_fd
 * (-1: /dev/null); the exit status, or -1 when it could not start. */
static int run_prog(char *const *argv, int out_fd, int err_fd) {
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
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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
static void probe_cc(void) {
    const char *cc = cc_name();
    if (cc_for && strcmp(cc_for, cc) == 0) return;
    char *dir = tg_kcache_dir();
    if (dir && mkdirs(dir) != 0) {
        tg_free(dir);
        dir = NULL;
    }
    tg_free(cc_for);
    tg_free(cc_ident);
    cc_ident = NULL;
    cc_ok = false;
    cc_for = tg_strdup(cc);
    char idpath[4200];
    bool have_id = dir && ccid_path(dir, cc, idpath, sizeof idpath);
    char buf[4096];
    if (have_id) {
        FILE *f = fopen(idpath, "r");
        if (f) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            bool whole = n > 0 && !ferror(f) && fgetc(f) == EOF;
            fclose(f);
            buf[n] = 0;
            if (whole && strlen(buf) == n) {
                cc_ident = tg_strdup(buf);
                cc_ok = cc_ident != NULL;
            }
        }
    }
    if (!cc_ok) {
        FILE *tmp = tmpfile();
        char *argv[] = {(char *)cc, "--version", NULL};
        stats.compiler_runs++;
        if (tmp && run_prog(argv, fileno(tmp), -1) == 0) {
            rewind(tmp);
            size_t n = fread(buf, 1, sizeof buf - 1, tmp);
            buf[n] = 0;
            n = strlen(buf);
            cc_ident = tg_strdup(buf);
            cc_ok = cc_ident != NULL;
            if (cc_ok && n > 0 && have_id) {
                /* best effort: a folder that cannot be written to costs
                 * the next process the same run */
                tg_ctx *ctx = tg_ctx_new();
                tg_file_write_atomic(idpath, buf, n, ctx);
                tg_ctx_free(ctx);
            }
        }
        if (tmp) fclose(tmp);
    }
    tg_free(dir);
    if (!cpu_flags) {
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[8192];
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8) ||
                !strncmp(line, "model name", 10)) {
                tg_str s = {0};
                if (cpu_flags) tg_str_addf(&s, "%s", cpu_flags);
                tg_str_addf(&s, "%s", line);
                tg_free(cpu_flags);
                cpu_flags = s.s;
                if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) break;
            }
        if (f) fclose(f);
    }
}

static kentry *map_find(const char *hash) {
    for (int i = 0; i < nmap; i++)
        if (!strcmp(map[i].hash, hash)) return &map[i];
    return NULL;
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

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Compile src into dir/hash.so (lock held by the caller). */
static int compile_into(const char *dir, const char *hash, const char *src, const char **why) {
    char cpath[4200], spath[4200], tpath[4200], epath[4200];
    snprintf(cpath, sizeof cpath, "%s/%s.c", dir, hash);
    snprintf(spath, sizeof spath, "%s/%s.so", dir, hash);
    snprintf(tpath, sizeof tpath, "%s/%s.tmp.%ld.so", dir, hash, (long)getpid());
    snprintf(epath, sizeof epath, "%s/%s.tmp.%ld.err", dir, hash, (long)getpid());
    tg_ctx *ctx = tg_ctx_new();
    int rc = tg_file_write_atomic(cpath, src, strlen(src), ctx);
    if (rc) *why = whyf("cannot write to the kernel cache folder: %s", tg_ctx_message(ctx));
    tg_ctx_free(ctx);
    if (rc) return -1;
    int efd = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const char *argv[32];
    int k = 0;
    argv[k++] = cc_name();
    for (int i = 0; CFLAGS[i]; i++) argv[k++] = CFLAGS[i];
    argv[k++] = "-o";
    argv[k++] = tpath;
    argv[k++] = cpath;
    argv[k++] = "-lm";
    argv[k] = NULL;
    stats.compiles++;
    int st = run_prog((char *const *)argv, -1, efd);
    if (efd >= 0) close(efd);
    unlink(epath);
    /* On disk before the rename, so that a power cut cannot leave an
     * empty <hash>.so under its final name (one that fails to load is
     * built again all the same: tg_kcache_get). */
    int tfd = st == 0 ? open(tpath, O_RDONLY | O_CLOEXEC) : -1;
    if (tfd >= 0) {
        fsync(tfd);
        close(tfd);
    }
    if (st != 0 || rename(tpath, spath) != 0) {
        unlink(tpath);
        *why = st < 0 ? "the C compiler could not be started" : "the C compiler failed";
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

tg_kernel_fn tg_kcache_get(const char *src, const char **why) {
    tg_kernel_fn fn = NULL;
    char *dir = NULL;
    int lfd = -1;
    *why = NULL;
    pthread_mutex_lock(&lock);
    probe_cc();
    if (!cc_ok) {
        *why = "no working C compiler (set TG_CC)";
        stats.failures++;
        goto done;
    }
    u128 h = fnv_init();
    h = fnv_add(h, src, strlen(src) + 1);
    h = fnv_add(h, cc_ident, strlen(cc_ident) + 1);
    for (int i = 0; CFLAGS[i]; i++) h = fnv_add(h, CFLAGS[i], strlen(CFLAGS[i]) + 1);
    if (cpu_flags) h = fnv_add(h, cpu_flags, strlen(cpu_flags));
    char hash[33];
    fnv_hex(h, hash);
    kentry *e = map_find(hash);
    if (e) {
        stats.memory_hits++;
        fn = e->fn;
        goto done;
    }
    if (!(dir = tg_kcache_dir())) {
        *why = "no kernel cache folder (set TG_CACHE_DIR or HOME)";
        stats.failures++;
        goto done;
    }
    if (mkdirs(dir) != 0) {
        /* "Not a directory" (a file of that name, TG_CACHE_DIR naming a
         * file), "Permission denied" (cannot be made) */
        *why = whyf("unusable kernel cache folder %s: %s", dir, strerror(errno));
        stats.failures++;
        goto done;
    }
    char spath[4200], lpath[4200];
    snprintf(spath, sizeof spath, "%s/%s.so", dir, hash);
    snprintf(lpath, sizeof lpath, "%s/lock", dir);
    void *handle = NULL;
    bool compiled = false;
    char err[512];
    /* A kernel on disk loads without the lock. */
    if (!file_exists(spath) || !(fn = load_so(spath, &handle, err, sizeof err))) {
        lfd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lfd < 0 || flock(lfd, LOCK_EX) != 0) {
            *why = whyf("cannot lock the kernel cache folder: %s: %s", lpath, strerror(errno));
            stats.failures++;
            goto done;
        }
        /* Another process may have built it (or built again a damaged
         * one) while we waited. One that is there and still does not load
         * is damaged: emptied by a power cut, written by a TG_CC that
         * failed and said it succeeded, cut short. As Theano does, it is
         * removed and compiled again, once. */
        if (!file_exists(spath) || !(fn = load_so(spath, &handle, err, sizeof err))) {
            if (file_exists(spath)) unlink(spath);
            if (compile_into(dir, hash, src, why)) {
                stats.failures++;
                goto done;
            }
            compiled = true;
            if (!(fn = load_so(spath, &handle, err, sizeof err))) {
                *why = whyf("the compiled kernel %s could not be loaded: %s", spath, err);
                stats.failures++;
                goto done;
            }
        }
    }
    if (!compiled) stats.disk_hits++;
    if (nmap == cmap) {
        int c = cmap ? cmap * 2 : 16;
        kentry *p = tg_realloc(map, sizeof *p * (size_t)c);
        if (!p) goto done; /* still usable, just not remembered */
        map = p;
        cmap = c;
    }
    memcpy(map[nmap].hash, hash, sizeof hash);
    map[nmap].handle = handle;
    map[nmap].fn = fn;
    nmap++;
done:
    if (lfd >= 0) close(lfd); /* releases the flock */
    tg_free(dir);
    pthread_mutex_unlock(&lock);
    return fn;
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

/* The folder's lock file, opened to be flock'ed: -1 when it cannot be
 * (errno set). create: make it when missing. Read-only will do for flock
 * (a lock file another user made in a shared folder). */
static int open_lock(const char *dir, bool create) {
    char p[4200];
    snprintf(p, sizeof p, "%s/lock", dir);
    int fd = open(p, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0 && errno != ENOENT) fd = open(p, O_RDONLY | O_CLOEXEC);
    return fd;
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

int tg_kcache_clear(const char *dir, int *removed, tg_ctx *ctx) {
    *removed = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return TG_OK;
        return tg_errorf(ctx, TG_EIO, "%s: %s", dir, strerror(errno));
    }
    /* The folder's lock, as compiles take it: a compile in progress
     * finishes (and loads its kernel) before its files go; its lock file
     * stays, or a process waiting on it and one that came after would
     * each hold a lock of their own and compile at once. */
    int lfd = open_lock(dir, true);
    if (lfd < 0 || flock(lfd, LOCK_EX) != 0) {
        int e = errno;
        if (lfd >= 0) close(lfd);
        closedir(d);
        return tg_errorf(ctx, TG_EIO, "%s/lock: cannot lock the kernel cache folder: %s", dir, strerror(e));
    }
    int rc = TG_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        /* <hash>.so/.c (CPU), <hash>.cubin/.ptx/.cu (GPU), <hash>.ccid
         * (a compiler's identity), and the temporaries of processes that
         * are gone: <hash>.tmp.<pid>.* and <hash>.<suffix>.tmp.<pid>.* */
        static const char *const sfx[] = {".so", ".c", ".cu", ".cubin", ".ptx", ".ccid", NULL};
        bool tmp = len > 32 && is_hash(nm, 32) && !strncmp(nm + 32, ".tmp.", 5);
        bool ours = tmp;
        for (int i = 0; sfx[i] && !ours && len > 32 && is_hash(nm, 32); i++) {
            size_t k = strlen(sfx[i]);
            ours = !strncmp(nm + 32, sfx[i], k) && (!nm[32 + k] || (tmp = !strncmp(nm + 32 + k, ".tmp.", 5)));
        }
        if (!ours || (tmp && tmp_writer_alive(nm))) continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        if (unlink(p) != 0 && errno != ENOENT) {
            rc = tg_errorf(ctx, TG_EIO, "%s: %s", p, strerror(errno));
            break;
        }
        if (entry_source_suffix(nm)) (*removed)++;
    }
    closedir(d);
    close(lfd); /* releases the flock */
    return rc;
}
