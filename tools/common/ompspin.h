/* libgomp's threads spin after each parallel region before they sleep
 * (GOMP_SPINCOUNT, 300,000 rounds by default: up to a millisecond here).
 * With OpenBLAS's pthreads build, its threads are its own, so a product
 * or a LAPACK call right after one of tg's parallel kernels shares the
 * cores with spinning threads, and every barrier inside it waits for a
 * thread the scheduler has parked (measured before the build linked the
 * OpenMP build where it is installed: below). On the 2-core VM, with
 * GOMP_SPINCOUNT=1000 against the default (tgprof; bench_rnn): the MLP's
 * training step at batch 600 9-15% faster, the determinant of a 256x256
 * matrix 6.3 -> 0.50 ms (NumPy: 0.57), bench_rnn's 200-wide RNN 1.4-1.8x;
 * bench_fusion, whose kernels follow each other with no BLAS between,
 * within noise.
 *
 * libgomp reads its settings once, when the program is loaded, so only
 * the environment the program starts with can choose them:
 * tg_omp_respawn() runs the program again (/proc/self/exe, the same
 * arguments) with GOMP_SPINCOUNT=1000 when neither GOMP_SPINCOUNT nor
 * OMP_WAIT_POLICY is set, before it has done anything (about 16 ms, the
 * loading of the libraries). TG_OMP_SPIN=N asks for N rounds instead;
 * TG_OMP_SPIN=keep keeps libgomp's default. The tools that run functions
 * call it first in main; TG_OMP_RESPAWNED=1 tells the second run (and
 * the benchmarks, whose peers then get the environment back) that the
 * spin count is tg's. Where execv fails (no /proc), the program runs on
 * as it is; nor does it start again under valgrind (whose child would run
 * unchecked) or when started through the dynamic loader (ld.so tgc ...,
 * where /proc/self/exe is the loader).
 *
 * With OpenBLAS's OpenMP build too (which the build links where it is
 * installed: CMakeLists.txt), whose products run on libgomp's threads: on
 * an idle machine the default spin was then as fast as 1000 rounds, but
 * on a busy one (a load of 3 on the 2-core VM) spinning threads took the
 * cores from the working ones: 100 MLP steps at batch 600 through `tgc
 * run` 2.4-2.8 s with the default spin against 1.08-1.13 s with 1000
 * rounds (the pthreads build: 3.2-3.4 and 1.12-1.20 s), and tgprof's
 * `predict` 10-14 ms a call against 5.7-5.8. So the tools start again
 * with either build. */
#ifndef TG_OMPSPIN_H
#define TG_OMPSPIN_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void tg_omp_respawn(char **argv) {
    const char *want = getenv("TG_OMP_SPIN");
    if ((want && !strcmp(want, "keep")) || getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY")) return;
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "valgrind")) return;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    if (!strncmp(base, "ld-linux", 8) || !strncmp(base, "ld.so", 5)) return;
    if (!want || !*want || strspn(want, "0123456789") != strlen(want) || strlen(want) > 12) want = "1000";
    if (setenv("GOMP_SPINCOUNT", want, 1) || setenv("TG_OMP_RESPAWNED", "1", 1)) return;
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("TG_OMP_RESPAWNED");
}

#endif
