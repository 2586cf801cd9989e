"""Peer of bench_fusion: the 2010 paper's expressions a**2 + b**2 + 2*a*b
and 2*a + 3*b on float64 vectors, in NumPy (as one writes it: temporaries
allocated) and numexpr (Debian's python3-numexpr; one fused, threaded
pass), best of REPS timed batches. Usage: fusion.py THREADS N... Prints
"numpy_<expr>_<n> ms" and "numexpr_<expr>_<n> ms" lines (expr: paper1,
paper2); numexpr's lines are absent when it is not installed."""
import sys
import time

import numpy as np

try:
    import numexpr as ne
except ImportError:
    ne = None

threads = int(sys.argv[1])
sizes = [int(s) for s in sys.argv[2:]] or [1000, 100000, 10000000]
if ne is not None:
    ne.set_num_threads(threads)


def best(fn, n):
    # Batches of about 20 ms so that small sizes are measurable.
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    k = max(1, int(0.02 / one))
    b = 1e30
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        b = min(b, (time.perf_counter() - t0) / k)
    return b * 1e3


for n in sizes:
    rng = np.random.default_rng(7)
    a = rng.random(n)
    b = rng.random(n)
    print(f"numpy_paper1_{n} {best(lambda: a**2 + b**2 + 2*a*b, n):.6f}")
    print(f"numpy_paper2_{n} {best(lambda: 2*a + 3*b, n):.6f}")
    if ne is not None:
        out = np.empty(n)
        print(f"numexpr_paper1_{n} {best(lambda: ne.evaluate('a**2 + b**2 + 2*a*b', out=out), n):.6f}")
        print(f"numexpr_paper2_{n} {best(lambda: ne.evaluate('2*a + 3*b', out=out), n):.6f}")
