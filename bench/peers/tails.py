"""Peer of bench_tails: NumPy on the same data (made here as bench_tails
makes it). Prints "K_f32 ns" and "K_f64 ns" lines, K the case's index
in bench_tails.c's CASES, ns per element, best of REPS calls.
usage: tails.py N REPS"""
import sys
import time

import numpy as np

n, reps = int(sys.argv[1]), int(sys.argv[2])
i = np.arange(n, dtype=np.int64)
ordinary = -3 + 6.0 * ((i * 7919) % 10007) / 10007.0
masked = i % 64 > (i // 64) % 64


def value(kind):
    o = ordinary
    if kind == 1:
        return np.where(masked, -1e9, o)
    if kind == 2:
        return np.where(masked, -np.inf, o)
    if kind == 3:
        return np.abs(o) + 0.1
    if kind == 4:
        return np.where(masked, 0, np.abs(o) + 0.1)
    if kind == 5:
        return np.where(masked, np.where(o < 0, -200, 200) * (1 + np.abs(o)), o)
    return o


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# what a NumPy user writes for each (sigmoid: scipy's expit is not in
# Debian's python3-numpy; softplus: np.logaddexp(0, x), the stable form)
ops = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
       "softplus": lambda x: np.logaddexp(0, x), "softmax": softmax}
cases = [("exp", 0), ("exp", 1), ("exp", 2), ("log", 3), ("log", 4), ("tanh", 0), ("sigmoid", 0),
         ("sigmoid", 5), ("softplus", 0), ("softplus", 5), ("softmax", 0), ("softmax", 1), ("softmax", 2)]
with np.errstate(all="ignore"):
    for k, (op, kind) in enumerate(cases):
        for dt, name in ((np.float32, "f32"), (np.float64, "f64")):
            x = value(kind).astype(dt)
            if op == "softmax":
                x = x.reshape(-1, 64)
            f = ops[op]
            best = 1e30
            for r in range(reps + 2):
                t0 = time.perf_counter()
                f(x)
                t = time.perf_counter() - t0
                if r >= 2:
                    best = min(best, t)
            print("%d_%s %.4f" % (k, name, best / n * 1e9))
