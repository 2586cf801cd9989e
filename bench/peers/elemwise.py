"""Peer of bench_elemwise: the same elementwise ops and reductions in NumPy,
on the same sizes and value ranges, best of REPS runs. Prints "name ms"
lines; the names are bench_elemwise's case names."""
import sys
import time

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
rows = 2500 if n % 2500 == 0 else 1
cols = n // rows

rng = np.random.default_rng(1)
# The value range of bench_elemwise: [0.5, 1.5), so log and sqrt are defined.
x = rng.random(n) + 0.5
y = rng.random(n) + 0.5
xm = x.reshape(rows, cols)
ym = y.reshape(rows, cols)

cases = {
    "add": lambda: np.add(x, y),
    "mul": lambda: np.multiply(x, y),
    "true_div": lambda: np.true_divide(x, y),
    "maximum": lambda: np.maximum(x, y),
    "neg": lambda: np.negative(x),
    "exp": lambda: np.exp(x),
    "log": lambda: np.log(x),
    "tanh": lambda: np.tanh(x),
    "sqrt": lambda: np.sqrt(x),
    # NumPy has no sigmoid: the expression a NumPy user writes.
    "sigmoid": lambda: 1.0 / (1.0 + np.exp(-x)),
    "add_T": lambda: np.add(xm.T, ym.T),
    "sum": lambda: np.sum(x),
    "mean": lambda: np.mean(x),
    "max": lambda: np.max(x),
    "argmax": lambda: np.argmax(x),
    "sum_axis0": lambda: np.sum(xm, axis=0),
    "sum_axis1": lambda: np.sum(xm, axis=1),
}

only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
for name, fn in cases.items():
    if only and name not in only:
        continue
    fn()  # warm up (page faults of the first allocation)
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    print(name, best * 1e3)
print("numpy_version", np.__version__.replace(".", "", 0))
