"""Helpers for the op test generators: values in FORMAT.md s5 form and
graph files with meta.tests (see tests/data/README.md)."""
import json
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ops")


def value(a):
    a = np.asarray(a)
    def conv(x):
        if isinstance(x, list):
            return [conv(e) for e in x]
        if isinstance(x, float):
            if math.isnan(x):
                return "nan"
            if math.isinf(x):
                return "inf" if x > 0 else "-inf"
            return float(repr(x)) if a.dtype != np.float16 else float(x)
        return x
    data = a.tolist()
    if a.dtype.kind == "f":
        data = conv(data)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}


def typ(a, shape=None):
    a = np.asarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape) if shape is None else shape}


def write(name, variables, nodes, tests, functions=None):
    g = {"format": "tg-graph", "version": 1, "name": name,
         "variables": variables, "nodes": nodes}
    if functions:
        g["functions"] = functions
    g["meta"] = {"tests": tests}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(g, f, indent=1, sort_keys=False)
        f.write("\n")


def sample(dtype, shape, rng, lo=-5, hi=5):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "u":
        return rng.integers(max(lo, 0), hi if hi > max(lo, 0) else max(lo, 0) + 5, size=shape).astype(dt)
    if dt.kind == "i":
        return rng.integers(lo, hi, size=shape).astype(dt)
    return (rng.random(shape) * (hi - lo) + lo).astype(dt)


# ---- flat-data graph builder shared by build.py, shape.py and linalg.py ----

def jdata(a):
    out = []
    for v in np.asarray(a).reshape(-1).tolist():
        if isinstance(v, float) and not np.isfinite(v):
            v = "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        out.append(v)
    return out


def flat_value(a):
    a = np.asarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": jdata(a)}


def const(a):
    return {"value": flat_value(a)}


def vec(*xs):
    return const(np.array(xs, dtype=np.int64))


def i64(x):
    return const(np.int64(x))


class Graph:
    def __init__(self, name):
        self.name = name
        self.vars = []
        self.nodes = []
        self.funcs = {}
        self.tests = []
        self.count = 0

    def inp(self, id, dtype, shape):
        self.vars.append({"id": id, "type": {"dtype": dtype, "shape": list(shape)}})
        return id

    def op(self, op, inputs, attrs=None, out=None, nout=None):
        self.count += 1
        if nout is not None:
            outs = ["%s%d_%d" % (op, self.count, i) for i in range(nout)]
        else:
            outs = [out or "%s%d" % (op, self.count)]
        n = {"op": op, "inputs": list(inputs), "outputs": outs}
        if attrs is not None:
            n["attrs"] = attrs
        self.nodes.append(n)
        return outs if nout is not None else outs[0]

    def func(self, name, inputs, outputs):
        self.funcs[name] = {"inputs": list(inputs), "outputs": list(outputs)}

    def case(self, fn, inputs, outputs=None, error=None, **tol):
        c = {"function": fn,
             "inputs": {k: flat_value(v) for k, v in inputs.items()}}
        if error is not None:
            c["error"] = error
        else:
            c["outputs"] = {k: flat_value(v) for k, v in outputs.items()}
        c.update(tol)
        self.tests.append(c)

    def write(self):
        doc = {"format": "tg-graph", "version": 1, "name": self.name,
               "variables": self.vars, "nodes": self.nodes,
               "functions": self.funcs, "meta": {"tests": self.tests}}
        with open(os.path.join(OUT, self.name + ".json"), "w") as f:
            json.dump(doc, f, indent=None, separators=(",", ":"))
            f.write("\n")



def rand_from(rng):
    """rand(dtype, shape): small exact values (quarters for floats) from rng."""
    def rand(dtype, shape):
        dtype = np.dtype(dtype)
        if dtype.kind == "b":
            return rng.integers(0, 2, size=shape).astype(dtype)
        if dtype.kind == "u":
            return rng.integers(0, 200, size=shape).astype(dtype)
        if dtype.kind == "i":
            return rng.integers(-100, 100, size=shape).astype(dtype)
        return (rng.integers(-40, 40, size=shape) / 4).astype(dtype)
    return rand


def unknown(nd):
    return [None] * nd


