"""Peer of bench_scan_steps: the same running sum over a float64 sequence
as a Python loop, storing every step's value (what scan's stacked output
holds): with NumPy (reading and writing float64 arrays element by
element) and with Python floats and a list. Prints "name value" lines."""
import sys
import time

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000


def numpy_loop(x):
    out = np.empty_like(x)
    s = np.float64(0.0)
    for t in range(len(x)):
        s = s + x[t]
        out[t] = s
    return out


def python_loop(x):
    out = []
    s = 0.0
    for v in x:
        s = s + v
        out.append(s)
    return out


def best(fn, x, reps=3):
    b = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(x)
        b = min(b, time.perf_counter() - t0)
    return b


x = np.ones(n)
print("numpy_ns_per_step", best(numpy_loop, x) / n * 1e9)
print("python_ns_per_step", best(python_loop, x.tolist()) / n * 1e9)
