"""Peer of bench_elemwise: the same elementwise ops and reductions in NumPy,
on the same size and value range ([0.1, 1.1)), best of REPS runs.
Prints "name ms" lines, the names being bench_elemwise's case names; for
the ufuncs also "name_out ms": the same with out= (no allocation)."""
import sys
import time

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10

rng = np.random.default_rng(1)
x = rng.random(n) + 0.1
y = rng.random(n) + 0.1
xm = x[: (n // 1000) * 1000].reshape(n // 1000, 1000)
out = np.empty(n)

binary = {"add": np.add, "mul": np.multiply, "sub": np.subtract,
          "true_div": np.true_divide, "maximum": np.maximum}
unary = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sqrt": np.sqrt,
         "abs": np.abs}
cases = {}
for name, u in binary.items():
    cases[name] = lambda u=u: u(x, y)
    cases[name + "_out"] = lambda u=u: u(x, y, out=out)
for name, u in unary.items():
    cases[name] = lambda u=u: u(x)
    cases[name + "_out"] = lambda u=u: u(x, out=out)
cases.update({
    "sum": lambda: np.sum(x),
    "mean": lambda: np.mean(x),
    "max": lambda: np.max(x),
    "argmax": lambda: np.argmax(x),
    "std": lambda: np.std(x),
    "sum_axis0": lambda: np.sum(xm, axis=0),
})


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
