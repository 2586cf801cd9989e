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
#include <unistd.h>

#include "cli.h"
#include "testutil.h"

/* A file of `bytes` bytes; its path in buf. */
static void make_file(char *buf, size_t n, size_t bytes) {
    snprintf(buf, n, "/tmp/tg-cli-heap-XXXXXX");
    int fd = mkstemp(buf);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
    close(fd);
}

typedef struct heap_case {
    const char *path;
    uintptr_t grow;
    bool huge;
} heap_case;

/* In the child: cli_heap_for(path, 80); bit 0 when the heap did not grow
 * by at least `grow` (or grew with grow 0), bit 1 when its middle is not
 * advised for huge pages exactly when `huge`. */
static int heap_grown(void *arg) {
    const heap_case *c = arg;
    uintptr_t before = (uintptr_t)sbrk(0);
    cli_heap_for(c->path, 80);
    uintptr_t after = (uintptr_t)sbrk(0);
    int bad = 0;
    if (c->grow ? after - before < c->grow : after - before > ((uintptr_t)1 << 20)) bad |= 1;
    if (c->grow && tu_advised_huge((const void *)(before + (after - before) / 2)) != c->huge) bad |= 2;
    return bad;
}

static void check(const char *path, const char *thp, uintptr_t grow, bool huge) {
    heap_case c = {path, grow, huge};
    int bad = tu_child_env("TG_THP", thp, heap_grown, &c);
    if (bad)
        fail_msg("TG_THP=%s, grow %lu: %s%s", thp ? thp : "(unset)", (unsigned long)grow,
                 bad & 1 ? "the heap's growth is wrong " : "", bad & 2 ? "the huge-page advice is wrong" : "");
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
