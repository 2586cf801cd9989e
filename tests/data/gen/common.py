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
