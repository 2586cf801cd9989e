"""Reduction tests with expectations from NumPy (run with /usr/bin/python3).

mean/var/std/logsumexp of integers compute in float32 for 8/16-bit integers
and bool, float64 for wider ones (FORMAT.md s7); of float16 they give float16.
"""
import numpy as np

from common import sample, typ, value, write

rng = np.random.default_rng(99)


def float_of(dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return dt
    return np.dtype("float32") if dt.kind == "b" or dt.itemsize <= 2 else np.dtype("float64")


def lse(x, axis, keepdims):
    x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis if axis is not None else tuple(range(x.ndim)))


def expect(op, x, axis, keepdims, ddof=0):
    ax = tuple(axis) if isinstance(axis, list) else axis
    with np.errstate(all="ignore"):
        if op == "sum":
            return np.sum(x, axis=ax, keepdims=keepdims)
        if op == "prod":
            return np.prod(x, axis=ax, keepdims=keepdims)
        if op in ("mean", "var", "std", "logsumexp"):
            fd = float_of(x.dtype)
            xd = x.astype(np.float64)
            if op == "mean":
                r = np.mean(xd, axis=ax, keepdims=keepdims)
            elif op == "var":
                r = np.var(xd, axis=ax, keepdims=keepdims, ddof=ddof)
            elif op == "std":
                r = np.std(xd, axis=ax, keepdims=keepdims, ddof=ddof)
            else:
                r = lse(xd, ax, keepdims)
            return np.asarray(r).astype(fd)
        if op == "max":
            return np.max(x, axis=ax, keepdims=keepdims)
        if op == "min":
            return np.min(x, axis=ax, keepdims=keepdims)
        if op == "all":
            return np.all(x, axis=ax, keepdims=keepdims)
        if op == "any":
            return np.any(x, axis=ax, keepdims=keepdims)
        if op == "argmax":
            return np.asarray(np.argmax(x, axis=ax, keepdims=keepdims)).astype(np.int64)
        if op == "argmin":
            return np.asarray(np.argmin(x, axis=ax, keepdims=keepdims)).astype(np.int64)


OPS = ["sum", "prod", "mean", "max", "min", "all", "any", "logsumexp", "var", "std",
       "argmax", "argmin"]
DTYPES = ["float64", "float32", "float16", "int8", "int32", "int64", "uint8", "uint64", "bool"]
AXES = [None, 0, 1, -1, [0, 2], [2, 0, 1]]

for op in OPS:
    variables, nodes, tests, functions = [], [], [], {}
    k = 0
    for dt in DTYPES:
        if op in ("logsumexp",) and dt == "bool":
            continue
        x = sample(dt, (2, 3, 4), rng, -3, 4)
        if op == "prod" and np.dtype(dt).kind == "f":
            x = (x / 3).astype(dt)
        axes = AXES if op not in ("argmax", "argmin") else [None, 0, 1, -1]
        for axis in axes:
            for keepdims in (False, True):
                if dt not in ("float64", "int32") and (keepdims or axis not in (None, 1)):
                    continue
                attrs = {"axis": axis, "keepdims": keepdims}
                want = expect(op, x, axis, keepdims)
                if np.dtype(x.dtype).kind == "f" and op in ("sum", "prod", "mean", "var", "std", "logsumexp"):
                    tol = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[str(x.dtype)]
                else:
                    tol = None
                xid, yid = f"x{k}", f"y{k}"
                variables.append({"id": xid, "type": typ(x)})
                nodes.append({"op": op, "inputs": [xid], "outputs": [yid], "attrs": attrs})
                functions[f"f{k}"] = {"inputs": [xid], "outputs": [yid]}
                case = {"function": f"f{k}", "inputs": {xid: value(x)},
                        "outputs": {yid: value(np.asarray(want))}}
                if tol:
                    case["rtol"] = tol
                    case["atol"] = tol
                tests.append(case)
                k += 1
    write(f"reduce_{op}", variables, nodes, tests, functions)

# var/std with ddof, NaN propagation, ties for argmax, logsumexp of large values,
# empty axes, a transposed (non-contiguous) input.
x = sample("float64", (3, 5), rng)
xn = x.copy()
xn[1, 2] = np.nan
ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.int32)
big = np.array([[1e4, 1e4 - 1, -1e4], [-np.inf, -np.inf, -np.inf]], np.float64)
empty = np.zeros((2, 0), np.float64)
write("reduce_special",
      [{"id": "x", "type": typ(x)}, {"id": "xn", "type": typ(xn)}, {"id": "t", "type": typ(ties)},
       {"id": "big", "type": typ(big)}, {"id": "e", "type": typ(empty)}],
      [{"op": "var", "inputs": ["x"], "outputs": ["v1"], "attrs": {"axis": 1, "ddof": 1}},
       {"op": "std", "inputs": ["x"], "outputs": ["s1"], "attrs": {"axis": 0, "ddof": 1}},
       {"op": "max", "inputs": ["xn"], "outputs": ["mxn"], "attrs": {"axis": 1}},
       {"op": "sum", "inputs": ["xn"], "outputs": ["sxn"], "attrs": {"axis": 0}},
       {"op": "argmax", "inputs": ["xn"], "outputs": ["axn"], "attrs": {"axis": 1}},
       {"op": "argmax", "inputs": ["t"], "outputs": ["at"], "attrs": {"axis": 1}},
       {"op": "argmin", "inputs": ["t"], "outputs": ["atn"]},
       {"op": "logsumexp", "inputs": ["big"], "outputs": ["lb"], "attrs": {"axis": 1}},
       {"op": "sum", "inputs": ["e"], "outputs": ["se"], "attrs": {"axis": 1}},
       {"op": "prod", "inputs": ["e"], "outputs": ["pe"], "attrs": {"axis": 1}},
       {"op": "all", "inputs": ["e"], "outputs": ["ae"], "attrs": {"axis": 1}},
       {"op": "any", "inputs": ["e"], "outputs": ["ye"], "attrs": {"axis": 1}},
       {"op": "mean", "inputs": ["e"], "outputs": ["me"], "attrs": {"axis": 1}},
       {"op": "logsumexp", "inputs": ["e"], "outputs": ["le"], "attrs": {"axis": 1}},
       {"op": "transpose", "inputs": ["x"], "outputs": ["xT"]},
       {"op": "sum", "inputs": ["xT"], "outputs": ["sT"], "attrs": {"axis": 1}},
       {"op": "max", "inputs": ["xT"], "outputs": ["mT"], "attrs": {"axis": 0, "keepdims": True}},
       {"op": "subtensor", "inputs": ["x"], "outputs": ["xs"],
        "attrs": {"index": [{"start": None, "stop": None, "step": 2}, {"start": 4, "stop": None, "step": -2}]}},
       {"op": "mean", "inputs": ["xs"], "outputs": ["ms"], "attrs": {"axis": [0, 1]}}],
      [{"inputs": {"x": value(x), "xn": value(xn), "t": value(ties), "big": value(big), "e": value(empty)},
        "outputs": {"v1": value(np.var(x, axis=1, ddof=1)), "s1": value(np.std(x, axis=0, ddof=1)),
                    "mxn": value(np.max(xn, axis=1)), "sxn": value(np.sum(xn, axis=0)),
                    "axn": value(np.argmax(xn, axis=1)), "at": value(np.argmax(ties, axis=1)),
                    "atn": value(np.asarray(np.argmin(ties))),
                    "lb": value(np.array([1e4 + np.log1p(np.exp(-1.0)), -np.inf])),
                    "se": value(np.zeros(2)), "pe": value(np.ones(2)),
                    "ae": value(np.ones(2, bool)), "ye": value(np.zeros(2, bool)),
                    "me": value(np.full(2, np.nan)), "le": value(np.full(2, -np.inf)),
                    "sT": value(np.sum(x.T, axis=1)), "mT": value(np.max(x.T, axis=0, keepdims=True)),
                    "ms": value(np.asarray(np.mean(x[::2, 4::-2])))}}],
      functions={"main": {"inputs": ["x", "xn", "t", "big", "e"],
                          "outputs": ["v1", "s1", "mxn", "sxn", "axn", "at", "atn", "lb", "se", "pe",
                                      "ae", "ye", "me", "le", "sT", "mT", "ms"]}})

write("reduce_errors",
      [{"id": "e", "type": {"dtype": "float64", "shape": [None, None]}}],
      [{"op": "max", "inputs": ["e"], "outputs": ["m"], "attrs": {"axis": 1}},
       {"op": "argmin", "inputs": ["e"], "outputs": ["a"], "attrs": {"axis": 1}}],
      [{"function": "max", "inputs": {"e": value(np.zeros((2, 0)))}, "error": "zero-size array"},
       {"function": "argmin", "inputs": {"e": value(np.zeros((2, 0)))}, "error": "zero-size array"},
       {"function": "max", "inputs": {"e": value(np.zeros((0, 3)))}, "outputs": {"m": value(np.zeros(0))}}],
      functions={"max": {"inputs": ["e"], "outputs": ["m"]}, "argmin": {"inputs": ["e"], "outputs": ["a"]}})
