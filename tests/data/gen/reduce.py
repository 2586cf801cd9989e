"""Reduction tests with expectations from NumPy (run with /usr/bin/python3).

mean/var/std/logsumexp of integers compute in float32 for bool and 8/16-bit
integers, float64 for wider ones (FORMAT.md s7); of float16 they give
float16. Files: reduce_<op>.json (every dtype, axis forms, keepdims; one
function per dtype computing every axis form of one input);
reduce_{0d_axes,ddof,nan_inf_ties,lse_ints,empty,strided,columns,lse_columns,weak}.json
(special values and layouts); reduce_errors.json (run-time errors).
Large inputs (accuracy of long sums, the threaded paths) are tested in
tests/unit/test_reduce.c.
"""
import json
import os
import warnings

import numpy as np

from common import OUT, typ
from common import value as value_exact


def value(a):
    """common.value, with float32/float16 numbers written in their shortest
    round-tripping form (0.4, not 0.4000000059604645)."""
    a = np.asarray(a)
    v = value_exact(a)
    if a.dtype in (np.float32, np.float16):
        def short(e):
            if isinstance(e, list):
                return [short(i) for i in e]
            return e if isinstance(e, str) else float(str(a.dtype.type(e)))
        v["data"] = short(v["data"])
    return v
from common import sample as sample_exact


def sample(dtype, shape, rng, lo=-5, hi=5):
    """common.sample with floats rounded to 2 decimals (short files)."""
    x = sample_exact(dtype, shape, rng, lo, hi)
    return np.round(x, 2).astype(x.dtype) if x.dtype.kind == "f" else x


def write(name, variables, nodes, tests, functions=None):
    """As common.write, but one line per variable, node, function and test
    case, which keeps these many-case files small."""
    g = {"format": "tg-graph", "version": 1, "name": name, "variables": variables,
         "nodes": nodes}
    if functions:
        g["functions"] = functions
    g["meta"] = {"tests": tests}

    def dump(v):
        return json.dumps(v, separators=(",", ":"))

    def block(v, ind):
        if isinstance(v, list):
            return "[\n" + ",\n".join(ind + "  " + dump(e) for e in v) + "\n" + ind + "]"
        return "{\n" + ",\n".join(ind + "  " + dump(k) + ": " + dump(e) for k, e in v.items()) \
            + "\n" + ind + "}"

    lines = [f'  "format": "tg-graph", "version": 1, "name": {dump(name)}',
             '  "variables": ' + block(variables, "  "), '  "nodes": ' + block(nodes, "  ")]
    if functions:
        lines.append('  "functions": ' + block(functions, "  "))
    lines.append('  "meta": {"tests": ' + block(tests, "  ") + "}")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    with open(os.path.join(OUT, name + ".json")) as f:
        assert json.load(f) == g

rng = np.random.default_rng(99)
warnings.simplefilter("ignore", RuntimeWarning)  # NaN means, ddof >= n


def float_of(dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return dt
    return np.dtype("float32") if dt.kind == "b" or dt.itemsize <= 2 else np.dtype("float64")


def lse(x, axis, keepdims):
    """logsumexp in float64, row by row: NaN if any NaN, an infinite max is
    the answer, else the max-shifted sum; -inf for an empty row."""
    x = np.asarray(x, np.float64)
    ax = tuple(range(x.ndim)) if axis is None else tuple(np.atleast_1d(axis))
    ax = tuple(a % x.ndim for a in ax) if x.ndim else ()
    kept = [d for d in range(x.ndim) if d not in ax]
    rows = np.transpose(x, kept + list(ax)).reshape(
        int(np.prod([x.shape[d] for d in kept])), int(np.prod([x.shape[a] for a in ax])))
    out = []
    for r in rows:
        m = r.max() if r.size else -np.inf
        if np.isnan(r).any():
            out.append(np.nan)
        elif np.isinf(m):
            out.append(m)
        else:
            out.append(m + np.log(np.sum(np.exp(r - m))))
    shape = [1 if d in ax else x.shape[d] for d in range(x.ndim)] if keepdims else \
        [x.shape[d] for d in kept]
    return np.array(out).reshape(shape)


def expect(op, x, axis, keepdims, ddof=0):
    ax = tuple(axis) if isinstance(axis, list) else axis
    with np.errstate(all="ignore"):
        if op == "sum":
            return np.sum(x, axis=ax, keepdims=keepdims)
        if op == "prod":
            if x.dtype.kind == "f":
                # tg multiplies in double and rounds once.
                return np.prod(x.astype(np.float64), axis=ax, keepdims=keepdims).astype(x.dtype)
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
        if op in ("max", "min", "all", "any"):
            return getattr(np, op)(x, axis=ax, keepdims=keepdims)
        if op in ("argmax", "argmin"):
            return np.asarray(getattr(np, op)(x, axis=ax, keepdims=keepdims)).astype(np.int64)
    raise ValueError(op)


def tol_for(op, dt):
    if np.dtype(dt).kind == "f" and op in ("sum", "prod", "mean", "var", "std", "logsumexp"):
        return {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[str(np.dtype(dt))]
    return None


OPS = ["sum", "prod", "mean", "max", "min", "all", "any", "logsumexp", "var", "std",
       "argmax", "argmin"]
DTYPES = ["float64", "float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool"]
AXES = [None, 0, 1, -1, -3, [0, 2], [2, 0, 1], [-1, 1], []]
ARG_AXES = [None, 0, 1, -1, -3]

for op in OPS:
    variables, nodes, tests, functions = [], [], [], {}
    for dt in DTYPES:
        x = sample(dt, (2, 3, 4), rng, -3, 4)
        if op == "prod" and np.dtype(dt).kind == "f":
            x = (x / 3).astype(dt)
        axes = ARG_AXES if op in ("argmax", "argmin") else AXES
        full = dt in ("float64", "int32")
        # keepdims only changes the shape: every axis form without it, a
        # few with it.
        combos = [(a, False) for a in axes] + [(a, True) for a in axes if a in (None, -1, [0, 2])] \
            if full else \
            [(None, False), (1, False), (-1, True)] + \
            ([([0, 2], False)] if op not in ("argmax", "argmin") else [(None, True)])
        xid = f"x_{dt}"
        variables.append({"id": xid, "type": typ(x)})
        outs, want = [], {}
        for j, (axis, keepdims) in enumerate(combos):
            yid = f"y_{dt}_{j}"
            nodes.append({"op": op, "inputs": [xid], "outputs": [yid],
                          "attrs": {"axis": axis, "keepdims": keepdims}})
            outs.append(yid)
            want[yid] = value(np.asarray(expect(op, x, axis, keepdims)))
        functions[f"f_{dt}"] = {"inputs": [xid], "outputs": outs}
        case = {"function": f"f_{dt}", "inputs": {xid: value(x)}, "outputs": want}
        tol = tol_for(op, dt)
        if tol:
            case["rtol"] = tol
            case["atol"] = tol
        tests.append(case)
    write(f"reduce_{op}", variables, nodes, tests, functions)


class Cases:
    """Single-reduction cases, each its own function: input variable,
    optional view nodes (transpose, subtensor) in front, the reduction."""

    def __init__(self):
        self.variables, self.nodes, self.tests, self.functions = [], [], [], {}
        self.k = 0

    def add(self, op, x, attrs=None, want=None, view=None, error=None, tol=None, shape=None):
        k = self.k
        self.k += 1
        x = np.asarray(x)
        xid, yid = f"x{k}", f"y{k}"
        self.variables.append({"id": xid, "type": typ(x, shape)})
        src = xid
        if view is not None:
            vop, vattrs = view
            self.nodes.append({"op": vop, "inputs": [xid], "outputs": [f"v{k}"], "attrs": vattrs})
            src = f"v{k}"
        node = {"op": op, "inputs": [src], "outputs": [yid]}
        if attrs:
            node["attrs"] = attrs
        self.nodes.append(node)
        self.functions[f"f{k}"] = {"inputs": [xid], "outputs": [yid]}
        case = {"function": f"f{k}", "inputs": {xid: value(x)}}
        if error:
            case["error"] = error
        else:
            case["outputs"] = {yid: value(np.asarray(want))}
        if tol:
            case["rtol"] = tol
            case["atol"] = tol
        self.tests.append(case)

    def many(self, x, items, view=None, xv=None):
        """One function, one input, several reductions [(op, attrs)] of it
        (through the same view), with expectations from NumPy."""
        k = self.k
        self.k += 1
        x = np.asarray(x)
        xv = x if xv is None else xv
        xid = f"x{k}"
        self.variables.append({"id": xid, "type": typ(x)})
        src = xid
        if view is not None:
            self.nodes.append({"op": view[0], "inputs": [xid], "outputs": [f"v{k}"], "attrs": view[1]})
            src = f"v{k}"
        outs, want, tol = [], {}, None
        for i, (op, attrs) in enumerate(items):
            yid = f"y{k}_{i}"
            self.nodes.append({"op": op, "inputs": [src], "outputs": [yid], "attrs": attrs})
            outs.append(yid)
            want[yid] = value(np.asarray(self.expect(op, xv, attrs)))
            t = tol_for(op, x.dtype)
            tol = max(tol or 0, t or 0) or None
        self.functions[f"f{k}"] = {"inputs": [xid], "outputs": outs}
        case = {"function": f"f{k}", "inputs": {xid: value(x)}, "outputs": want}
        if tol:
            case["rtol"] = tol
            case["atol"] = tol
        self.tests.append(case)

    @staticmethod
    def expect(op, xv, attrs):
        with np.errstate(all="ignore"):
            if op in ("var", "std"):
                ax = attrs.get("axis")
                ax = tuple(ax) if isinstance(ax, list) else ax
                return getattr(np, op)(xv.astype(np.float64), axis=ax,
                                       keepdims=attrs.get("keepdims", False),
                                       ddof=attrs.get("ddof", 0)).astype(float_of(xv.dtype))
            return expect(op, xv, attrs.get("axis"), attrs.get("keepdims", False))

    def np(self, op, x, attrs=None, view=None, xv=None, tol=None):
        """Expectation from NumPy on xv (the viewed input; x when None)."""
        attrs = attrs or {}
        xv = x if xv is None else xv
        with np.errstate(all="ignore"):
            if op in ("var", "std"):
                ax = attrs.get("axis")
                ax = tuple(ax) if isinstance(ax, list) else ax
                fd = float_of(xv.dtype)
                want = getattr(np, op)(xv.astype(np.float64), axis=ax,
                                       keepdims=attrs.get("keepdims", False),
                                       ddof=attrs.get("ddof", 0)).astype(fd)
            else:
                want = expect(op, xv, attrs.get("axis"), attrs.get("keepdims", False))
        self.add(op, x, attrs, want, view=view, tol=tol or tol_for(op, np.asarray(x).dtype))


S = Cases()

# 0-d inputs: every op; keepdims keeps the shape [].
for dt, v in (("float64", -2.5), ("int16", 7), ("bool", True), ("uint8", 200)):
    x0 = np.array(v, dt)
    for op in OPS:
        S.np(op, x0)
    S.np("sum", x0, {"keepdims": True})
    S.np("argmax", x0, {"keepdims": True})

# Axis forms beyond the per-op files: keepdims with axis null for argmax (a
# shape of ones), the empty axis list (nothing reduced: sum keeps the
# values but takes its result dtype).
x = sample("int8", (2, 3), rng)
S.np("argmax", x, {"axis": None, "keepdims": True})
S.np("sum", x, {"axis": []})
S.np("mean", x, {"axis": [], "keepdims": True})
S.np("max", x, {"axis": [-1, -2]})

write("reduce_0d_axes", S.variables, S.nodes, S.tests, S.functions)
S = Cases()

# var and std with ddof: ddof 1, ddof equal to n (inf, or NaN for constant
# rows), ddof above n.
x = sample("float64", (3, 5), rng)
S.np("var", x, {"axis": 1, "ddof": 1})
S.np("std", x, {"axis": 0, "ddof": 1})
S.np("var", np.array([[1.0, 2.0], [3.0, 3.0]]), {"axis": 1, "ddof": 2})
S.np("std", np.array([[1.0, 2.0], [3.0, 3.0]]), {"axis": 1, "ddof": 3})
S.np("var", np.array([1, 2, 3, 4], np.int8), {"ddof": 1})
S.np("var", np.array([1e9 + 1, 1e9 + 2, 1e9 + 3]), {"ddof": 1})
S.np("std", np.array([1, 2, 4], np.float16))
S.np("var", np.array([[1.5, 2.5, 4.0]], np.float32), {"axis": 1, "keepdims": True})
# a negative ddof divides by more than n (np.var([1, 2, 3], ddof=-1) is 0.5)
S.np("var", np.array([1.0, 2.0, 3.0]), {"ddof": -1})
S.np("std", x, {"axis": 1, "ddof": -2})

write("reduce_ddof", S.variables, S.nodes, S.tests, S.functions)
S = Cases()

# NaN: max/min propagate it, argmax/argmin give the first NaN's index, sum
# and mean carry it, all/any count it as true.
xn = sample("float64", (3, 5), rng)
xn[1, 2] = np.nan
xn[1, 4] = np.nan
xn[2, 0] = np.nan
for op in ("max", "min", "argmax", "argmin", "sum", "mean", "var", "logsumexp"):
    S.np(op, xn, {"axis": 1})
    S.np(op, xn, {"axis": 0})
S.np("argmin", xn)
S.np("max", xn)
for dt in ("float32", "float16"):
    S.np("max", xn.astype(dt), {"axis": 1})
    S.np("argmin", xn.astype(dt), {"axis": 1})
    S.np("min", xn.astype(dt))
S.np("all", np.array([[np.nan, 1.0], [-0.0, 2.0], [np.inf, -np.inf]]), {"axis": 1})
S.np("any", np.array([[np.nan, 0.0], [-0.0, 0.0]], np.float16), {"axis": 1})
S.np("any", np.array([[0, 0, 256], [0, 0, 0]], np.int32), {"axis": 1})
S.np("all", np.array([[1, 2], [0, 3]], np.uint64), {"axis": 1})
# Infinities in max/min and argmax.
xi = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, np.inf], [-np.inf, 0.0, -1.0]])
for op in ("max", "min", "argmax", "argmin", "sum"):
    S.np(op, xi, {"axis": 1})

# Ties: the first index wins, also with axis null (a flat index), and for
# every extreme value representation (integers, -0.0 vs 0.0 equal).
ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.int32)
S.np("argmax", ties, {"axis": 1})
S.np("argmin", ties)
S.np("argmax", ties)
S.np("argmax", ties.astype(np.uint8), {"axis": 0})
S.np("argmax", np.array([0.0, -0.0, 0.0, -1.0]))
S.np("argmin", np.array([[True, False, False], [True, True, True]]), {"axis": 1})
S.np("argmax", np.array([[-5, 7, 7], [7, 7, -5]], np.int64), {"axis": -1})

write("reduce_nan_inf_ties", S.variables, S.nodes, S.tests, S.functions)
S = Cases()

# logsumexp: no overflow for large values, -inf rows, +inf, NaN, float32.
big = np.array([[1e4, 1e4 - 1, -1e4], [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, -np.inf],
                [np.nan, np.inf, 1.0], [-1e4, -1e4, -np.inf]])
S.add("logsumexp", big, {"axis": 1},
      np.array([1e4 + np.log1p(np.exp(-1.0)), -np.inf, np.inf, np.nan, -1e4 + np.log(2.0)]))
S.add("logsumexp", big[:1].astype(np.float32), {"axis": 1},
      np.array([1e4 + np.log1p(np.exp(-1.0))], np.float32))
S.add("logsumexp", np.array([3, 3, 3, 3], np.int64), None, np.array(3 + np.log(4.0)))
S.add("logsumexp", np.array([[1000, 1000]], np.int16), {"axis": 1, "keepdims": True},
      np.array([[1000 + np.log(2.0)]], np.float32))

# Integer results: bool and small ints sum in int64, unsigned in uint64,
# wrapping as NumPy's (no error on overflow).
S.np("sum", np.array([127, 127, 127], np.int8))
S.np("sum", np.array([[True, True, False], [False, False, False]]), {"axis": 1})
S.np("sum", np.array([250, 250], np.uint8))
S.np("sum", np.array([2**63 - 1, 1], np.int64))
S.np("sum", np.array([2**64 - 1, 2], np.uint64))
S.np("sum", np.array([2**31 - 1, 2**31 - 1, 2], np.int32))
S.np("prod", np.array([2**62, 4, 3], np.int64))
S.np("prod", np.array([-128, -128, -128], np.int8))
S.np("prod", np.array([2**32, 2**32 + 1], np.uint64))
S.np("prod", np.array([[True, True], [True, False]]), {"axis": 1})
S.np("max", np.array([2**64 - 1, 0, 2**63], np.uint64))
S.np("min", np.array([-2**63, 2**63 - 1], np.int64))
S.np("mean", np.array([2**62, 2**62, 2**62], np.int64))
S.np("mean", np.array([60000, 60000, 1], np.uint16))
# float16: mean accumulates wider (60000 + 60000 overflows float16).
S.add("mean", np.array([60000, 60000], np.float16), None, np.array(60000, np.float16))
S.add("sum", np.array([60000, 60000, -60000], np.float16), None, np.array(60000, np.float16))

write("reduce_lse_ints", S.variables, S.nodes, S.tests, S.functions)
S = Cases()

# Empty axes: identities for sum/prod/all/any, NaN means, -inf logsumexp;
# an empty kept axis just gives an empty result.
empty = np.zeros((2, 0), np.float64)
for op in ("sum", "prod", "all", "any", "mean", "var", "std", "logsumexp"):
    S.np(op, empty, {"axis": 1})
    S.np(op, np.zeros((0, 3), np.int32), None)
    S.np(op, np.zeros((0, 3), np.float32), {"axis": 0, "keepdims": True})
for op in ("max", "min", "argmax", "argmin", "sum", "mean"):
    S.np(op, np.zeros((3, 0), np.float64), {"axis": 0})
    S.np(op, np.zeros((0, 3), np.int16), {"axis": 1})
S.np("sum", np.zeros((2, 0, 3), np.uint8), {"axis": [0, 2]})

write("reduce_empty", S.variables, S.nodes, S.tests, S.functions)
S = Cases()

# Non-contiguous inputs: a transpose, a 3-d transpose reduced over axes that
# are not adjacent in memory, strided subtensors (negative steps).
x = sample("float64", (3, 5), rng)
xT = x.T
for op, attrs in (("sum", {"axis": 1}), ("sum", {"axis": 0}), ("max", {"axis": 0, "keepdims": True}),
                  ("argmax", None), ("argmin", {"axis": 0}), ("mean", None), ("var", {"axis": 1}),
                  ("prod", {"axis": 1}), ("logsumexp", {"axis": 0}), ("all", {"axis": 1})):
    S.np(op, x, attrs, view=("transpose", {"axes": None}), xv=xT)
x3 = sample("float32", (2, 3, 4), rng)
x3T = np.transpose(x3, (2, 0, 1))
for op, attrs in (("sum", {"axis": [0, 2]}), ("mean", {"axis": [1]}), ("max", {"axis": [0, 1]}),
                  ("argmax", {"axis": 0}), ("std", {"axis": [2, 0]}), ("min", None)):
    S.np(op, x3, attrs, view=("transpose", {"axes": [2, 0, 1]}), xv=x3T)
sl = [{"start": None, "stop": None, "step": 2}, {"start": 4, "stop": None, "step": -2}]
xs = x[::2, 4::-2]
for op, attrs in (("mean", {"axis": [0, 1]}), ("sum", {"axis": 0}), ("sum", {"axis": 1}),
                  ("argmin", None), ("max", {"axis": 1}), ("var", {"axis": 0, "ddof": 1})):
    S.np(op, x, attrs, view=("subtensor", {"index": sl}), xv=xs)
xi8 = sample("int8", (4, 6), rng)
S.np("sum", xi8, {"axis": 0}, view=("subtensor", {"index": [{"start": None, "stop": None, "step": -1},
                                                          {"start": 1, "stop": None, "step": 2}]}),
     xv=xi8[::-1, 1::2])
S.np("argmax", xi8, {"axis": 1}, view=("transpose", {"axes": None}), xv=xi8.T)

write("reduce_strided", S.variables, S.nodes, S.tests, S.functions)

# Reductions over axes that are not innermost, with at least 8 trailing
# kept elements: streamed rows into per-column accumulators. Every op and
# dtype class; the middle axis (several outer blocks); more columns than one
# block of 256; a strided input; NaN and ties inside columns; no rows.
S = Cases()
for dt in ("float64", "float32", "float16", "int16", "uint64", "bool"):
    x = sample(dt, (2, 3, 10), rng, -3, 4)
    items = [(op, {"axis": axis}) for op in OPS if op != "prod"
             for axis in ((0, 1) if op.startswith("arg") else ([0], [0, 1]))]
    items += [(op, {"axis": 1, "keepdims": True}) for op in ("sum", "max", "argmin", "var", "all")]
    if dt != "bool":
        items += [("logsumexp", {"axis": 1, "keepdims": True})]
    S.many(x, items)
    S.many((x / 3).astype(dt) if np.dtype(dt).kind == "f" else x, [("prod", {"axis": [0, 1]})])
xl = np.round(sample("float64", (3, 260), rng), 1)
xl[1, 7] = np.nan
xl[:, 9] = 1.5
S.many(xl, [(op, {"axis": 0}) for op in ("sum", "max", "argmin", "std", "any")])
S.many(sample("int32", (3, 260), rng), [("sum", {"axis": 0}), ("min", {"axis": 0})])
S.many(sample("uint8", (3, 260), rng, 0, 3), [("argmax", {"axis": 0}), ("any", {"axis": 0})])
xs = sample("float32", (6, 12), rng)
S.many(xs, [(op, {"axis": 0}) for op in ("sum", "max", "argmax", "std", "any")],
       view=("subtensor", {"index": [{"start": None, "stop": None, "step": -2}]}), xv=xs[::-2])
xt = np.array([[1, 5, np.nan, 2, 0, 0, 0, 7], [3, 5, 1, np.nan, 0, -0.0, 9, 7],
               [3, 1, np.nan, 4, 0, 0, 9, 8]])
S.many(xt, [(op, {"axis": 0}) for op in ("max", "min", "argmax", "argmin", "sum", "logsumexp", "all")])
S.many(np.zeros((0, 9), np.float32),
       [(op, {"axis": 0}) for op in ("sum", "prod", "mean", "all", "any", "var", "logsumexp")])
S.np("sum", np.zeros((2, 0, 9), np.int8), {"axis": 1})
S.np("sum", np.array([[2**63 - 1] * 8, [1] * 8], np.int64), {"axis": 0})
S.np("max", np.array([[2**64 - 1] * 8, [2**63] * 8], np.uint64), {"axis": 0})
write("reduce_columns", S.variables, S.nodes, S.tests, S.functions)

# Weak inline scalars take the default dtypes when reduced on their own.
write("reduce_weak", [],
      [{"op": "sum", "inputs": [{"value": 3}], "outputs": ["a"]},
       {"op": "mean", "inputs": [{"value": 2.5}], "outputs": ["b"]},
       {"op": "any", "inputs": [{"value": True}], "outputs": ["c"]},
       {"op": "max", "inputs": [{"value": {"dtype": "float32", "shape": [3], "data": [1, 5, 2]}}],
        "outputs": ["d"]}],
      [{"inputs": {}, "outputs": {"a": value(np.int64(3)), "b": value(np.float64(2.5)),
                                  "c": value(np.bool_(True)), "d": value(np.float32(5))}}],
      functions={"main": {"inputs": [], "outputs": ["a", "b", "c", "d"]}})

# Run-time errors: max/min/argmax/argmin of an empty axis (NumPy raises even
# when the result itself is empty); an empty kept axis is fine.
E = Cases()
for op in ("max", "min", "argmax", "argmin"):
    E.add(op, np.zeros((2, 0)), {"axis": 1}, error="zero-size array", shape=[None, None])
    E.add(op, np.zeros((0, 0)), {"axis": 0}, error="zero-size array", shape=[None, None])
    E.add(op, np.zeros((0, 3), np.int32), None, error="zero-size array", shape=[None, None])
E.add("max", np.zeros((2, 0, 0), np.float32), {"axis": [1]}, error="zero-size array",
      shape=[None, None, None])
E.add("max", np.zeros((0, 3)), {"axis": 1}, np.zeros(0), shape=[None, None])
E.add("argmin", np.zeros((3, 0), np.uint8), {"axis": 0}, np.zeros(0, np.int64), shape=[None, None])
write("reduce_errors", E.variables, E.nodes, E.tests, E.functions)

# sum_to (tg's own form, written by differentiation: the gradient summed
# down to its target's shape): float16 adds in float64 and rounds once, as
# the reductions do (2048 + 1 + 1 is 2050, where float16 steps would stay
# at 2048); integers add exactly (2**53 + 1 is not a double); leading axes
# and length-1 axes are summed, float32 in float32.
g16 = np.array([[2048, 3], [1, 0.5], [1, 0.25]], np.float16)
g64 = np.array([[2**53, 7], [1, -2], [0, 5]], np.int64)
g32 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8
to = np.zeros((3, 1), np.float32)
write("reduce_sum_to",
      [{"id": "a", "type": typ(g16)}, {"id": "ta", "type": typ(np.zeros((1, 2), np.float16))},
       {"id": "b", "type": typ(g64)}, {"id": "tb", "type": typ(np.zeros((2,), np.int64))},
       {"id": "c", "type": typ(g32)}, {"id": "tc", "type": typ(to)}],
      [{"op": "sum_to", "inputs": ["a", "ta"], "outputs": ["sa"]},
       {"op": "sum_to", "inputs": ["b", "tb"], "outputs": ["sb"]},
       {"op": "sum_to", "inputs": ["c", "tc"], "outputs": ["sc"]}],
      [{"inputs": {"a": value(g16), "ta": value(np.zeros((1, 2), np.float16)), "b": value(g64),
                   "tb": value(np.zeros((2,), np.int64)), "c": value(g32), "tc": value(to)},
        "outputs": {"sa": value(g16.astype(np.float64).sum(axis=0, keepdims=True).astype(np.float16)),
                    "sb": value(g64.sum(axis=0)),
                    "sc": value(g32.sum(axis=(0, 2)).reshape(3, 1))},
        "rtol": 0, "atol": 0}],
      functions={"main": {"inputs": ["a", "ta", "b", "tb", "c", "tc"], "outputs": ["sa", "sb", "sc"]}})

# logsumexp of float32 over axes that are not innermost (the column path),
# columns whose spread passes 709: -1e30 beside 0, -inf beside numbers, a
# 1000 among small values. The shift is the column's max (tg took the min
# there and gave inf or -inf). Also reached through the rewrites that write
# logsumexp (log(sum(exp x)), a softmax over two axes) under fast_run, and
# through logsumexp's gradient. Its own generator, so the cases above keep
# their random draws.
S = Cases()
lr = np.random.default_rng(25)
inf = np.inf
x28 = np.array([[-1e30, -inf, 1000, 0, 5, -3, 2, -1e30], [0, 3, 0, 0, 5, 2, -1e30, 1]], np.float32)
S.many(x28, [("logsumexp", {"axis": 0}), ("logsumexp", {"axis": 0, "keepdims": True})])
S.np("logsumexp", np.array([[-1e30] * 8, [0] * 8], np.float32), {"axis": 0})
S.np("logsumexp", np.array([[-inf] * 8, list(range(8))], np.float32), {"axis": 0})
x3 = np.round(lr.uniform(-3, 4, (3, 5, 16)), 1).astype(np.float32)
x3[:, :, 0] = -1e30
x3[1, 2, 0] = 0
x3[:, :, 1] = -inf
x3[2, 4, 1] = 3
x3[0, 0, 2] = 800
x3[1, 1, 2] = -800
x3[:, :, 3] = -inf
x3[:, 0, 4] = -1e30
S.many(x3, [("logsumexp", {"axis": 0}), ("logsumexp", {"axis": [0, 1]}),
            ("logsumexp", {"axis": 1, "keepdims": True})])
xs = np.round(lr.uniform(-3, 4, (6, 12)), 1).astype(np.float32)
xs[1::2, 5] = -1e30  # the view's rows 5, 3, 1
xs[3, 5] = 1
xs[1, 7] = 900
S.many(xs, [("logsumexp", {"axis": 0})],
       view=("subtensor", {"index": [{"start": None, "stop": None, "step": -2}]}), xv=xs[::-2])


def lse_form(S, x, nodes, outs):
    """One function of x through `nodes` (written with x, the outputs
    named in outs: {id: expected})."""
    k = S.k
    S.k += 1
    xid = f"x{k}"
    S.variables.append({"id": xid, "type": typ(x)})

    def ren(v):
        return xid if v == "x" else f"{v}{k}"
    for n in nodes:
        S.nodes.append(dict(n, inputs=[ren(i) for i in n["inputs"]], outputs=[ren(o) for o in n["outputs"]]))
    S.functions[f"f{k}"] = {"inputs": [xid], "outputs": [ren(o) for o in outs]}
    S.tests.append({"function": f"f{k}", "inputs": {xid: value(x)},
                    "outputs": {ren(o): value(w) for o, w in outs.items()}, "rtol": 1e-5, "atol": 1e-5})


def softmax64(x, axis):
    """softmax in float64, exp(x - logsumexp(x))."""
    x = x.astype(np.float64)
    return np.exp(x - lse(x, axis, True))


# The gradient of sum(logsumexp(x, 0)): the softmax down the columns.
lse_form(S, x28, [{"op": "logsumexp", "inputs": ["x"], "outputs": ["y"], "attrs": {"axis": 0}},
                  {"op": "sum", "inputs": ["y"], "outputs": ["c"]},
                  {"op": "grad", "inputs": ["c", "x"], "outputs": ["g"]}],
         {"g": softmax64(x28, 0).astype(np.float32)})
# log(sum(exp(x), axis)) as written: no exp overflows (so -O none agrees)
# and no column is all -1e30 (its log is -inf as written, -1e30 rewritten).
xw = x28.copy()
xw[0, 2] = 80
xw3 = x3.copy()
xw3[0, :, 0] = 0
xw3[1, 0, 4] = 2
xw3[0, 0, 2] = 80
xw3[1, 1, 2] = -80
for xx, ax in ((xw, 0), (xw3, 0), (xw3, [0, 1])):
    lse_form(S, xx, [{"op": "exp", "inputs": ["x"], "outputs": ["e"]},
                     {"op": "sum", "inputs": ["e"], "outputs": ["s"], "attrs": {"axis": ax}},
                     {"op": "log", "inputs": ["s"], "outputs": ["y"]}],
             {"y": lse(xx, ax, False).astype(np.float32)})
# exp(x) / sum(exp(x), axis=[0, 1], keepdims): rewritten to
# exp(x - logsumexp(x, [0, 1], keepdims)).
lse_form(S, xw3, [{"op": "exp", "inputs": ["x"], "outputs": ["e"]},
                  {"op": "sum", "inputs": ["e"], "outputs": ["s"], "attrs": {"axis": [0, 1], "keepdims": True}},
                  {"op": "true_div", "inputs": ["e", "s"], "outputs": ["y"]}],
         {"y": softmax64(xw3, (0, 1)).astype(np.float32)})
write("reduce_lse_columns", S.variables, S.nodes, S.tests, S.functions)
