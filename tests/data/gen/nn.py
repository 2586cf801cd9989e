"""Neural-network op tests with expectations from NumPy (run with
/usr/bin/python3): softmax, log_softmax, categorical_crossentropy,
binary_crossentropy.

Expected values use NumPy's float64 formulas (max-shifted exponentials;
-sum(t*log(p)); -(t*log(p) + (1-t)*log(1-p))), rounded to the op's dtype.
Integer and bool inputs compute in float32 (8/16-bit, bool) or float64
(wider), FORMAT.md s7. Files: nn_softmax.json, nn_log_softmax.json (every
dtype class, every axis, large values, 0-size, non-contiguous input),
nn_cce.json, nn_bce.json (dtypes, index and dense targets, broadcasting,
weak scalars, run-time errors).
"""
import json
import os
import warnings

import numpy as np

from common import OUT, typ, value

rng = np.random.default_rng(7)
warnings.simplefilter("ignore", RuntimeWarning)


def float_of(dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return dt
    return np.dtype("float32") if dt.kind == "b" or dt.itemsize <= 2 else np.dtype("float64")


def tol(dt):
    return {"float16": 2e-3, "float32": 2e-6, "float64": 1e-12}[np.dtype(dt).name]


def softmax(x, axis):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis):
    x = np.asarray(x, np.float64)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def sample(dt, shape, lo=-4, hi=4):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "u":
        return rng.integers(0, hi, size=shape).astype(dt)
    if dt.kind == "i":
        return rng.integers(lo, hi, size=shape).astype(dt)
    return np.round(rng.random(shape) * (hi - lo) + lo, 3).astype(dt)


def write(name, variables, nodes, tests, functions):
    """One line per variable, node, function and test case (small files)."""
    def dump(v):
        return json.dumps(v, separators=(",", ":"))

    def block(v):
        if isinstance(v, list):
            return "[\n" + ",\n".join("  " + dump(e) for e in v) + "\n ]"
        return "{\n" + ",\n".join("  " + dump(k) + ": " + dump(e) for k, e in v.items()) + "\n }"

    text = ("{\n" + f' "format": "tg-graph", "version": 1, "name": {dump(name)},\n'
            + ' "variables": ' + block(variables) + ",\n"
            + ' "nodes": ' + block(nodes) + ",\n"
            + ' "functions": ' + block(functions) + ",\n"
            + ' "meta": {"tests": ' + block(tests) + "}\n}\n")
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        f.write(text)


def short_value(a):
    """value(), with float32/float16 data written in the shortest form that
    reads back to the same number (the loader rounds to the dtype)."""
    a = np.asarray(a)
    v = value(a)
    if a.dtype in (np.float32, np.float16):
        def conv(x):
            if isinstance(x, list):
                return [conv(e) for e in x]
            return x if isinstance(x, str) else float(str(a.dtype.type(x)))
        v["data"] = conv(v["data"])
    return v


class File:
    """One graph file; each case is its own function."""

    def __init__(self, name):
        self.name = name
        self.vars, self.nodes, self.funcs, self.tests = [], [], {}, []

    def case(self, op, inputs, attrs=None, want=None, error=None, pre=None, rtol=None,
             shapes=None):
        """inputs: arrays (or ("weak", v) for a weak inline scalar); pre: a
        dimshuffle order applied to input 0 inside the graph."""
        k = len(self.funcs)
        ins, ids, feed = [], [], {}
        for i, a in enumerate(inputs):
            if isinstance(a, tuple) and a[0] == "weak":
                ins.append({"value": a[1]})
                continue
            vid = f"c{k}_x{i}"
            t = typ(a)
            if shapes is not None and shapes[i] is not None:
                t["shape"] = shapes[i]
            self.vars.append({"id": vid, "type": t})
            ids.append(vid)
            feed[vid] = short_value(a)
            ins.append(vid)
        if pre is not None:
            src = ins[0]
            ins[0] = f"c{k}_t"
            self.nodes.append({"op": "dimshuffle", "inputs": [src], "outputs": [ins[0]],
                               "attrs": {"order": pre}})
        node = {"op": op, "inputs": ins, "outputs": [f"c{k}_y"]}
        if attrs:
            node["attrs"] = attrs
        self.nodes.append(node)
        fname = f"c{k}"
        self.funcs[fname] = {"inputs": ids, "outputs": [f"c{k}_y"]}
        t = {"function": fname, "inputs": feed}
        if error:
            t["error"] = error
        else:
            t["outputs"] = {f"c{k}_y": short_value(want)}
            if rtol is not None:
                t["rtol"] = rtol
                t["atol"] = rtol
            elif want.dtype.kind == "f":
                t["rtol"] = t["atol"] = tol(want.dtype)
        self.tests.append(t)

    def write(self):
        write(self.name, self.vars, self.nodes, self.tests, self.funcs)


DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "float16", "float32",
          "float64"]

# ---- softmax / log_softmax ----
for op, fn in (("softmax", softmax), ("log_softmax", log_softmax)):
    F = File("nn_" + op)
    for dt in DTYPES:
        x = sample(dt, (3, 5))
        od = float_of(dt)
        xin = x.astype(od) if dt == "float16" else x
        F.case(op, [x], None, fn(xin, -1).astype(od))
    x = sample("float64", (2, 3, 4))
    for ax in (0, 1, 2, -1, -2, -3):
        F.case(op, [x], {"axis": ax}, fn(x, ax))
    x32 = sample("float32", (2, 2, 66))  # wider than one block of columns
    F.case(op, [x32], {"axis": 1}, fn(x32, 1).astype(np.float32))
    F.case(op, [x32], {"axis": 0}, fn(x32, 0).astype(np.float32))
    short = sample("float32", (6, 50))  # several short rows per exp call
    F.case(op, [short], None, fn(short, -1).astype(np.float32))
    long = sample("float32", (1, 260))  # more than one exp chunk per row
    F.case(op, [long], None, fn(long, -1).astype(np.float32))
    # large values: max-shifted, no overflow
    big = np.array([[1e4, 1e4 - 1, 1e4 - 2], [-1e4, 0.0, 1e4]])
    F.case(op, [big], None, fn(big, -1))
    F.case(op, [big.astype(np.float32)], None, fn(big, -1).astype(np.float32))
    # special values: -inf entries, an all -inf row, NaN
    sp = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [1.0, np.nan, 2.0],
                   [np.inf, 0.0, 1.0]])
    F.case(op, [sp], None, fn(sp, -1))
    # vectors, a single class, empty arrays
    v = sample("float64", (6,))
    F.case(op, [v], None, fn(v, -1))
    F.case(op, [v], {"axis": 0}, fn(v, 0))
    one = sample("float64", (4, 1))
    F.case(op, [one], None, fn(one, -1))
    e = np.zeros((0, 3))
    F.case(op, [e], None, fn(e, -1) if e.size else e.copy())
    e2 = np.zeros((3, 0), np.float32)
    F.case(op, [e2], None, e2.copy())
    # non-contiguous: a transposed input (dimshuffle inside the graph)
    x = sample("float64", (4, 3))
    F.case(op, [x], {"axis": -1}, fn(x.T, -1), pre=[1, 0])
    F.case(op, [x], {"axis": 0}, fn(x.T, 0), pre=[1, 0])
    xi = sample("int16", (4, 3))
    F.case(op, [xi], None, fn(xi.T, -1).astype(np.float32), pre=[1, 0])
    # unknown static shape
    x = sample("float64", (3, 4))
    F.case(op, [x], {"axis": 0}, fn(x, 0), shapes=[[None, None]])
    F.write()

# ---- categorical_crossentropy ----
F = File("nn_cce")


def probs(dt, shape):
    p = rng.random(shape) + 0.1
    return (p / p.sum(axis=-1, keepdims=True)).astype(dt)


for dt in ("float16", "float32", "float64"):
    p = probs(dt, (4, 3))
    for idt in ("int8", "uint8", "int32", "int64", "uint64"):
        t = rng.integers(0, 3, size=4).astype(idt)
        want = (-np.log(p.astype(np.float64)[np.arange(4), t.astype(np.int64)])).astype(dt)
        F.case("categorical_crossentropy", [p, t], None, want)
    # dense one-hot and soft targets of p's dtype
    onehot = np.eye(3, dtype=dt)[rng.integers(0, 3, size=4)]
    want = (-(onehot.astype(np.float64) * np.log(p.astype(np.float64))).sum(-1)).astype(dt)
    F.case("categorical_crossentropy", [p, onehot], None, want)
    soft = probs(dt, (4, 3))
    want = (-(soft.astype(np.float64) * np.log(p.astype(np.float64))).sum(-1)).astype(dt)
    F.case("categorical_crossentropy", [p, soft], None, want)
# mixed dtypes: float32 probabilities, float64 / int / bool targets
p = probs("float32", (2, 4))
for tdt in ("float64", "int32", "bool"):
    t = (np.eye(4)[[1, 3]]).astype(tdt)
    od = np.result_type(np.dtype(tdt), np.float32)
    want = (-(t.astype(np.float64) * np.log(p.astype(np.float64))).sum(-1)).astype(od)
    F.case("categorical_crossentropy", [p, t], None, want)
# integer probabilities compute in float (float64 for int64): log(1)=0
pi = np.array([[1, 0, 0], [0, 0, 1]], np.int64)
F.case("categorical_crossentropy", [pi, np.array([0, 2])], None, np.array([0.0, 0.0]))
# a vector of probabilities with a weak class index; a long dense row
p = probs("float64", (5,))
F.case("categorical_crossentropy", [p, ("weak", 3)], None, np.array(-np.log(p[3])))
p = probs("float64", (1, 300))
t = probs("float64", (1, 300))
F.case("categorical_crossentropy", [p, t], None, -(t * np.log(p)).sum(-1))
# 3-d: classes last
p = probs("float64", (2, 3, 4))
t = rng.integers(0, 4, size=(2, 3))
F.case("categorical_crossentropy", [p, t], None,
       -np.log(np.take_along_axis(p, t[..., None], -1)[..., 0]))
# non-contiguous probabilities (transposed in the graph)
p = probs("float64", (3, 4)).T.copy()  # (4, 3): p.T has rows summing to 1
t = np.array([0, 2, 1])
F.case("categorical_crossentropy", [p, t], None, -np.log(p.T[np.arange(3), t]), pre=[1, 0])
tt = np.eye(4)[[0, 3, 1]]
F.case("categorical_crossentropy", [p, tt], None, -(tt * np.log(p.T)).sum(-1), pre=[1, 0])
# zero probability: inf; empty batch
p = np.array([[0.0, 1.0], [0.5, 0.5]])
F.case("categorical_crossentropy", [p, np.array([0, 1])], None, np.array([np.inf, np.log(2)]))
F.case("categorical_crossentropy", [np.zeros((0, 3)), np.zeros(0, np.int64)], None,
       np.zeros(0))
# run-time errors: index out of range (too big, negative), shapes
p = probs("float64", (2, 3))
F.case("categorical_crossentropy", [p, np.array([0, 3])], error="out of range",
       shapes=[[None, 3], [None]])
F.case("categorical_crossentropy", [p, np.array([-1, 0])], error="out of range")
# a uint64 index past 2^63 - 1, named as given (not the 2^63 - 1 it counts as)
F.case("categorical_crossentropy", [p, np.array([0, 2**64 - 1], np.uint64)],
       error="class index 18446744073709551615 (target 1) is out of range for 3 classes")
F.case("categorical_crossentropy", [p, np.array([0, 1, 2])], error="do not match",
       shapes=[[None, None], [None]])
F.case("categorical_crossentropy", [p, np.ones((2, 4))], error="do not match",
       shapes=[[None, None], [None, None]])
F.write()

# ---- binary_crossentropy ----
F = File("nn_bce")


def bce(p, t):
    p = np.asarray(p, np.float64)
    t = np.asarray(t, np.float64)
    return -(t * np.log(p) + (1 - t) * np.log(1 - p))


for dt in ("float16", "float32", "float64"):
    p = (rng.random((3, 4)) * 0.9 + 0.05).astype(dt)
    t = (rng.random((3, 4)) < 0.5).astype(dt)
    F.case("binary_crossentropy", [p, t], None, bce(p, t).astype(dt))
    ts = rng.random((3, 4)).astype(dt)  # soft targets
    F.case("binary_crossentropy", [p, ts], None, bce(p, ts).astype(dt))
# mixed dtypes: bool / int targets with float32 p; float64 target
p = (rng.random((2, 3)) * 0.9 + 0.05).astype(np.float32)
for tdt in ("bool", "int8", "uint8", "int64", "float64"):
    t = (rng.random((2, 3)) < 0.5).astype(tdt)
    od = float_of(np.result_type(p.dtype, t.dtype))
    F.case("binary_crossentropy", [p, t], None, bce(p, t).astype(od))
# broadcasting: a row of targets, a column of probabilities
p = rng.random((3, 1)) * 0.9 + 0.05
t = rng.random((4,))
F.case("binary_crossentropy", [p, t], None, bce(p, t))
# weak scalars take the other side's dtype
p = (rng.random((5,)) * 0.9 + 0.05).astype(np.float32)
F.case("binary_crossentropy", [p, ("weak", 1)], None, bce(p, 1).astype(np.float32))
F.case("binary_crossentropy", [p, ("weak", 0.25)], None, bce(p, 0.25).astype(np.float32))
# 0-d, empty, long (vectorised chunks), non-contiguous
F.case("binary_crossentropy", [np.array(0.3), np.array(1.0)], None, bce(0.3, 1.0))
F.case("binary_crossentropy", [np.zeros((0, 2)), np.zeros((0, 2))], None, np.zeros((0, 2)))
p = rng.random(300) * 0.98 + 0.01
t = np.round(rng.random(300), 2)
F.case("binary_crossentropy", [p, t], None, bce(p, t))
p = rng.random((3, 4)) * 0.9 + 0.05
t = rng.random((4, 3))
F.case("binary_crossentropy", [p, t], None, bce(p.T, t), pre=[1, 0])
# p = 0 or 1 with a matching target: NaN as NumPy (0 * -inf)
p = np.array([0.0, 1.0, 0.5])
t = np.array([0.0, 1.0, 1.0])
F.case("binary_crossentropy", [p, t], None, bce(p, t))
# shapes that do not broadcast
F.case("binary_crossentropy", [np.ones((2, 3)) / 2, np.ones((2, 4)) / 2],
       error="do not broadcast", shapes=[[None, None], [None, None]])
F.write()
