/* cli_heap_for (tools/common/cli.c): before a file of 64 KiB or more is
 * loaded, the heap grows by `factor` times its size, offered for
 * transparent huge pages only with TG_THP=1, and not at all with
 * TG_THP=0; a smaller file leaves the heap alone. Each case runs in a
 * child, since the heap and M_TOP_PAD are the process's. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "testutil.h"

/* Whether the mapping holding p has the kernel's huge-page advice. */
static bool advised_huge(uintptr_t p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    bool in = false, hg = false;
    if (!f) return false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = p >= lo && p < hi;
        else if (in && !strncmp(line, "VmFlags:", 8)) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return hg;
}

/* A file of `bytes` bytes; its path in buf. */
static void make_file(char *buf, size_t n, size_t bytes) {
    snprintf(buf, n, "/tmp/tg-cli-heap-XXXXXX");
    int fd = mkstemp(buf);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
    close(fd);
}

/* In a child with TG_THP = thp (NULL: unset): cli_heap_for(path, 80);
 * exit 0 when the heap grew by at least `grow` bytes and its middle is
 * advised for huge pages exactly when `huge`. */
static void check(const char *path, const char *thp, uintptr_t grow, bool huge) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (thp) setenv("TG_THP", thp, 1);
        else unsetenv("TG_THP");
        uintptr_t before = (uintptr_t)sbrk(0);
        cli_heap_for(path, 80);
        uintptr_t after = (uintptr_t)sbrk(0);
        int bad = 0;
        if (grow ? after - before < grow : after - before > ((uintptr_t)1 << 20)) bad |= 1;
        if (grow && advised_huge(before + (after - before) / 2) != huge) bad |= 2;
        _exit(bad);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status))
        fail_msg("TG_THP=%s, grow %lu: %s%s", thp ? thp : "(unset)", (unsigned long)grow,
                 WEXITSTATUS(status) & 1 ? "the heap's growth is wrong " : "",
                 WEXITSTATUS(status) & 2 ? "the huge-page advice is wrong" : "");
}

static void test_heap_growth_and_advice(void **state) {
    (void)state;
#ifdef __SANITIZE_ADDRESS__
    skip(); /* AddressSanitizer's allocator does not take blocks from the break */
#endif
    struct stat st;
    char big[64], small[64];
    make_file(big, sizeof big, 1 << 20); /* 80 MiB of heap */
    make_file(small, sizeof small, 16 << 10);
    bool thp = stat("/sys/kernel/mm/transparent_hugepage", &st) == 0;
    check(big, NULL, 64 << 20, false); /* grown, not advised: the default */
    check(big, "1", 64 << 20, thp);    /* grown and advised */
    check(big, "0", 0, false);         /* left alone */
    check(small, NULL, 0, false);
    check(small, "1", 0, false);
    unlink(big);
    unlink(small);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_growth_and_advice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
