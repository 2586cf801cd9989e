/* Whole-file reads and atomic writes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void tg_prefault(void *p, size_t n) {
    if (n < ((size_t)1 << 20)) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

int tg_file_open_regular(const char *path, size_t *len, tg_ctx *ctx) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tg_errorf(ctx, TG_EIO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        tg_errorf(ctx, TG_EIO, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    *len = (size_t)st.st_size;
    return fd;
}

static char *file_read(const char *path, size_t *len, bool aligned, tg_ctx *ctx) {
    size_t n, got = 0;
    int fd = tg_file_open_regular(path, &n, ctx);
    if (fd < 0) return NULL;
    char *buf = aligned ? tg_malloc_aligned(n + 1) : tg_malloc(n + 1);
    if (!buf) {
        tg_errorf(ctx, TG_ENOMEM, "%s: out of memory reading %zu bytes", path, n);
        close(fd);
        return NULL;
    }
    tg_prefault(buf, n);
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            tg_errorf(ctx, TG_EIO, "%s: read failed: %s", path,
                      r < 0 ? strerror(errno) : "unexpected end of file");
            if (aligned)
                tg_free_aligned(buf);
            else
                tg_free(buf);
            close(fd);
            return NULL;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *tg_file_read(const char *path, size_t *len, tg_ctx *ctx) {
    return file_read(path, len, false, ctx);
}

char *tg_file_read_aligned(const char *path, size_t *len, tg_ctx *ctx) {
    return file_read(path, len, true, ctx);
}

/* The descriptor a path names by number: /dev/stdin, /dev/stdout,
 * /dev/stderr, /dev/fd/N and /proc/self/fd/N; else -1. */
static int stream_fd(const char *p) {
    static const char *const names[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
    for (int k = 0; k < 3; k++)
        if (!strcmp(p, names[k])) return k;
    const char *num = !strncmp(p, "/dev/fd/", 8) ? p + 8 : !strncmp(p, "/proc/self/fd/", 14) ? p + 14 : NULL;
    if (!num || *num < '0' || *num > '9') return -1;
    long v = 0;
    for (; *num >= '0' && *num <= '9' && v < 1000000; num++) v = v * 10 + (*num - '0');
    return *num ? -1 : (int)v;
}

/* What the symbolic link at p names, as a path (a relative target is
 * relative to p's folder), or NULL with errno set. */
static char *link_target(const char *p) {
    char buf[4096];
    ssize_t n = readlink(p, buf, sizeof buf - 1);
    if (n < 0) return NULL;
    if (n == (ssize_t)sizeof buf - 1) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    buf[n] = 0;
    const char *slash = strrchr(p, '/');
    size_t dlen = buf[0] == '/' || !slash ? 0 : (size_t)(slash - p) + 1;
    char *t = tg_malloc(dlen + (size_t)n + 1);
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(t, p, dlen);
    memcpy(t + dlen, buf, (size_t)n + 1);
    return t;
}

static int begin_in_place(const char *path, int fd, tg_file_save *sv, tg_ctx *ctx) {
    if (!(sv->dest = tg_strdup(path))) {
        close(fd);
        return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
    }
    sv->fd = fd;
    return TG_OK;
}

/* The temporaries of the saves in progress, for a signal handler to
 * remove: a slot is claimed (1), filled, then published (2); the handler
 * reads only published ones. */
enum { TMP_SLOTS = 16, TMP_NAME_MAX = 4096 };
static char tmp_names[TMP_SLOTS][TMP_NAME_MAX];
static atomic_int tmp_state[TMP_SLOTS];

static int tmp_register(const char *name) {
    size_t n = strlen(name);
    if (n >= TMP_NAME_MAX) return 0;
    for (int i = 0; i < TMP_SLOTS; i++) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&tmp_state[i], &free_slot, 1)) {
            memcpy(tmp_names[i], name, n + 1);
            atomic_store(&tmp_state[i], 2);
            return i + 1;
        }
    }
    return 0;
}

void tg_file_remove_temporaries(void) {
    for (int i = 0; i < TMP_SLOTS; i++)
        if (atomic_load(&tmp_state[i]) == 2) unlink(tmp_names[i]);
}

/* The temporary name is unique per process and call (pid and a counter,
 * created with O_EXCL), so that concurrent saves of one path from several
 * threads or processes never write into each other's file; the last
 * rename wins, and every reader sees some complete file.
 *
 * Three kinds of path are not replaced by a rename. A standard stream
 * named by its number (/dev/stdout, /dev/fd/3, /proc/self/fd/1) is
 * written through that descriptor as `cat` would: where it is a file,
 * what the shell wrote there before stays and `>>` appends (a rename
 * would replace the whole file, or, with the descriptor closed, the
 * /dev/stdout link itself); a closed one is an error. One that names
 * something other than a regular file (a character device, a FIFO, a
 * socket, a pipe) is written as it is: renaming a temporary over it would
 * replace the device node or fail for want of a writable /dev. A symbolic
 * link is followed, link by link, to the file it names, which is
 * replaced, or created when it does not exist yet; the link stays, as
 * numpy.save, torch.save and the shell's `>` write through links. */
int tg_file_begin(const char *path, tg_file_save *sv, tg_ctx *ctx) {
    static atomic_uint counter;
    memset(sv, 0, sizeof *sv);
    sv->fd = -1;
    struct stat st, lst;
    char *cur = tg_strdup(path);
    if (!cur) return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
    for (int hops = 0;; hops++) {
        int sfd = stream_fd(cur);
        if (sfd >= 0) {
            tg_free(cur);
            int fd = fcntl(sfd, F_DUPFD_CLOEXEC, 3), fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
            if (fd < 0)
                return tg_errorf(ctx, TG_EIO, "%s: cannot write: descriptor %d is %s", path, sfd,
                                 errno == EBADF ? "closed" : strerror(errno));
            if (fl >= 0 && (fl & O_ACCMODE) == O_RDONLY) {
                close(fd);
                return tg_errorf(ctx, TG_EIO, "%s: cannot write: descriptor %d is open for reading only", path,
                                 sfd);
            }
            return begin_in_place(path, fd, sv, ctx);
        }
        if (lstat(cur, &lst) < 0 || !S_ISLNK(lst.st_mode)) break;
        char *next = hops < 40 ? link_target(cur) : NULL;
        int e = hops < 40 ? errno : ELOOP;
        tg_free(cur);
        if (!next) return tg_errorf(ctx, TG_EIO, "%s: cannot follow the link: %s", path, strerror(e));
        cur = next;
    }
    bool replacing = stat(cur, &st) == 0;
    if (replacing && !S_ISREG(st.st_mode)) {
        tg_free(cur);
        if (S_ISDIR(st.st_mode)) return tg_errorf(ctx, TG_EIO, "%s: is a folder", path);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) return tg_errorf(ctx, TG_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
        return begin_in_place(path, fd, sv, ctx);
    }
    sv->dest = cur;
    size_t tlen = strlen(cur) + 64;
    sv->tmp = tg_malloc(tlen);
    if (!sv->tmp) {
        tg_file_abort(sv);
        return tg_errorf(ctx, TG_ENOMEM, "%s: out of memory", path);
    }
    for (int tries = 0; sv->fd < 0; tries++) {
        snprintf(sv->tmp, tlen, "%s.tmp.%ld.%u", sv->dest, (long)getpid(), atomic_fetch_add(&counter, 1));
        sv->fd = open(sv->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (sv->fd < 0 && (errno != EEXIST || tries > 100)) {
            int e = errno;
            tg_file_abort(sv);
            return tg_errorf(ctx, TG_EIO, "%s: cannot create a temporary file: %s", path, strerror(e));
        }
    }
    sv->slot = tmp_register(sv->tmp);
    /* The file that is replaced keeps its permissions (a private
     * checkpoint stays private) and, where we may set them, its owner and
     * group, as `sed -i` does; a new file gets 0666 less the umask. */
    if (replacing) {
        if (fchown(sv->fd, st.st_uid, st.st_gid) < 0 && fchown(sv->fd, (uid_t)-1, st.st_gid) < 0)
            errno = 0; /* not ours to give: the file is the writer's, as a new one is */
        if (fchmod(sv->fd, st.st_mode & 07777) < 0) {
            int e = errno;
            tg_file_abort(sv);
            return tg_errorf(ctx, TG_EIO, "%s: cannot keep the file's permissions: %s", path, strerror(e));
        }
    }
    return TG_OK;
}

static int commit(int fd, const char *tmp, const char *path, tg_ctx *ctx);

/* A save cut short by SIGKILL or a crash (nothing runs to remove its
 * temporary) leaves DEST.tmp.PID.N beside DEST. The next save of DEST
 * removes those whose process is gone and which nothing has written for
 * an hour: a live writer's PID, or a writer in another PID namespace or
 * on another machine sharing the folder that is still writing, keeps its
 * file. Only names of that exact form, of this DEST, are looked at. */
enum { STALE_TMP_S = 3600 };

static bool stale_tmp_name(const char *name, const char *base, size_t blen, long *pid) {
    if (strncmp(name, base, blen) || strncmp(name + blen, ".tmp.", 5)) return false;
    const char *p = name + blen + 5, *q = p;
    long v = 0;
    for (; *q >= '0' && *q <= '9' && v < 100000000; q++) v = v * 10 + (*q - '0');
    if (q == p || *q != '.' || !q[1]) return false;
    for (q++; *q; q++)
        if (*q < '0' || *q > '9') return false;
    *pid = v;
    return true;
}

static void sweep_stale_temporaries(const char *dest) {
    char *copy = tg_strdup(dest);
    if (!copy) return;
    char *slash = strrchr(copy, '/');
    const char *dir = ".", *base = copy;
    if (slash) {
        *slash = 0;
        dir = slash == copy ? "/" : copy;
        base = slash + 1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0) close(dfd);
        tg_free(copy);
        return;
    }
    size_t blen = strlen(base);
    time_t now = time(NULL);
    long self = (long)getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid;
        struct stat st;
        if (!stale_tmp_name(e->d_name, base, blen, &pid) || pid == self || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) continue;
        if (now - st.st_mtime < STALE_TMP_S) continue;
        (void)unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
    tg_free(copy);
}

static void release(tg_file_save *sv) {
    if (sv->slot > 0 && sv->slot <= TMP_SLOTS) atomic_store(&tmp_state[sv->slot - 1], 0);
    sv->slot = 0;
    sv->fd = -1;
    tg_free(sv->tmp);
    tg_free(sv->dest);
    sv->tmp = sv->dest = NULL;
}

int tg_file_finish(tg_file_save *sv, tg_ctx *ctx) {
    int rc;
    if (sv->tmp) {
        rc = commit(sv->fd, sv->tmp, sv->dest, ctx);
        if (rc)
            unlink(sv->tmp);
        else
            sweep_stale_temporaries(sv->dest);
    } else {
        rc = close(sv->fd) < 0 ? tg_errorf(ctx, TG_EIO, "%s: write failed: %s", sv->dest, strerror(errno)) : TG_OK;
    }
    release(sv);
    return rc;
}

void tg_file_abort(tg_file_save *sv) {
    if (sv->fd >= 0) {
        close(sv->fd);
        if (sv->tmp) unlink(sv->tmp);
    }
    release(sv);
}

int tg_file_write_all(int fd, const void *data, size_t len, const char *path, tg_ctx *ctx) {
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return tg_errorf(ctx, TG_EIO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
        p += w;
        len -= (size_t)w;
    }
    return TG_OK;
}

int tg_file_write_atomic(const char *path, const void *data, size_t len,
                         tg_ctx *ctx) {
    tg_file_save sv;
    int rc = tg_file_begin(path, &sv, ctx);
    if (rc) return rc;
    if ((rc = tg_file_write_all(sv.fd, data, len, path, ctx))) {
        tg_file_abort(&sv);
        return rc;
    }
    return tg_file_finish(&sv, ctx);
}

/* Sync the temporary file fd, close it, rename tmp over path, sync the
 * folder. fd is closed in every case; on success tmp no longer exists
 * under its own name (the caller unlinks it on failure). */
static int commit(int fd, const char *tmp, const char *path, tg_ctx *ctx) {
    if (fsync(fd) < 0) {
        int e = errno;
        close(fd);
        return tg_errorf(ctx, TG_EIO, "%s: fsync failed: %s", path, strerror(e));
    }
    if (close(fd) < 0) return tg_errorf(ctx, TG_EIO, "%s: close failed: %s", path, strerror(errno));
    if (rename(tmp, path) < 0)
        return tg_errorf(ctx, TG_EIO, "%s: cannot replace: %s", path, strerror(errno));
    /* Make the rename itself durable. */
    char *dircopy = tg_strdup(path);
    if (dircopy) {
        int dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        tg_free(dircopy);
    }
    return TG_OK;
}
