"""Peer of bench_vm: the same chain of scalar additions in NumPy float64
scalars and in Python floats. Prints "name value" lines."""
import sys
import time

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000


def chain(x, one, n):
    for _ in range(n):
        x = x + one
    return x


def best(x, one, reps=7):
    t = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        chain(x, one, n)
        t = min(t, time.perf_counter() - t0)
    return t


print("numpy_ns_per_node", best(np.float64(0), np.float64(1)) / n * 1e9)
print("python_ns_per_node", best(0.0, 1.0) / n * 1e9)
