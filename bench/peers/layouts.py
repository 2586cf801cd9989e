"""Peer of bench_layouts: the same cases in NumPy, on arrays of the same
shapes and value ranges (float64 in [0.1, 1.1), int64 in +-10^6, indices
uniform over the indexed array), best of REPS runs. Prints "name ms"
lines, the names being bench_layouts's cases. take_add's peer is the fast
NumPy form of a scatter-add, x + np.bincount(i, y, len(x)), not
np.add.at (many times slower)."""
import sys
import time

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10

rng = np.random.default_rng(1)


def f64(*shape):
    return rng.random(shape) + 0.1


xm = f64(n // 1000, 1000)
xw = f64(n // 2500, 2500)
x = f64(n)
y = f64(n)
a, b, c = f64(n // 10), f64(n // 10), f64(n // 10)
i_all = rng.integers(0, n, n)
table = f64(n // 10000)
i_table = rng.integers(0, n // 10000, n)
acc = f64(n // 10)
i_acc = rng.integers(0, n // 10, n)
xi = rng.integers(-1000000, 1000001, n)

cases = {
    "sum_T": lambda: np.sum(xm.T),
    "sum_T_axis1": lambda: np.sum(xm.T, axis=1),
    "max_T": lambda: np.max(xm.T),
    "max_T_axis1": lambda: np.max(xm.T, axis=1),
    "argmax_T_axis1": lambda: np.argmax(xm.T, axis=1),
    "max_rev": lambda: np.max(x[::-1]),
    "argmax_rev": lambda: np.argmax(x[::-1]),
    "dot_rev": lambda: np.dot(x[::-1], y),
    "stack_axis1": lambda: np.stack((a, b, c), axis=1),
    "flatten_T": lambda: xw.T.flatten(),
    "take_random": lambda: x[i_all],
    "take_table": lambda: table[i_table],
    "take_add": lambda: acc + np.bincount(i_acc, y, len(acc)),
    "abs_int64": lambda: np.abs(xi),
    "int_div_int64_7": lambda: xi // 7,
    "int_div_fused": lambda: (xi // 7) * 3 + xi,
}


def best(fn):
    fn()  # warm up
    t = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


for name, fn in cases.items():
    print(name, best(fn) * 1e3)
