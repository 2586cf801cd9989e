"""Peer of bench_nanguard: NumPy's np.isnan / np.isinf over arrays of the
sizes the NaN guard checks in one call of the MLP's train function
(float32), best of REPS. Prints "numpy_isnan_isinf ms" (both checks, as
NanGuardMode did them, one array at a time) and "numpy_isfinite ms"
(np.isfinite(a).all(), the cheaper one-call form)."""
import sys
import time

import numpy as np

sizes = [int(s) for s in sys.argv[1].split(",") if s]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
rng = np.random.default_rng(1)
arrays = [rng.standard_normal(n).astype(np.float32) for n in sizes]


def both():
    bad = False
    for a in arrays:
        bad |= bool(np.isnan(a).any()) or bool(np.isinf(a).any()) or bool((np.abs(a) > 1e10).any())
    return bad


def finite():
    bad = False
    for a in arrays:
        bad |= not bool(np.isfinite(a).all())
    return bad


def best(fn):
    fn()
    b = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t)
    return b * 1e3


print("numpy_isnan_isinf", best(both))
print("numpy_isfinite", best(finite))
