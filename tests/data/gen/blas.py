"""Product tests (dot, matmul, outer, gemm, gemv, ger) with NumPy
expectations; run with /usr/bin/python3 from this folder.

Operands are either plain inputs or views made inside the graph
(transpose, subtensor with steps, dimshuffle) so that the kernels see
transposed, strided and negatively strided data. Static shape errors are
load errors and live in tests/unit/test_blas.c."""
import numpy as np

import json
import os

from common import OUT, sample, typ, value

rng = np.random.default_rng(7)

TOL = {"float16": (5e-3, 5e-3), "float32": (1e-5, 1e-4), "float64": (1e-12, 1e-12)}


def slice_json(s):
    if isinstance(s, int):
        return s
    d = {}
    if s.start is not None:
        d["start"] = s.start
    if s.stop is not None:
        d["stop"] = s.stop
    if s.step is not None:
        d["step"] = s.step
    return d


class File:
    """One graph file: each case is its own function over fresh variables."""

    def __init__(self, name):
        self.name = name
        self.variables, self.nodes, self.tests, self.functions = [], [], [], {}
        self.k = 0

    def operand(self, x, view, k, i, ins, feeds, shape=None):
        """x: the base array; view: None, "T" (transpose), ("dimshuffle",
        order) or a tuple of slices/ints (subtensor). Returns the variable
        id fed to the product and the NumPy value it holds."""
        vid = f"v{k}_{i}"
        self.variables.append({"id": vid, "type": typ(x, shape)})
        ins.append(vid)
        feeds[vid] = value(x)
        if view is None:
            return vid, x
        wid = f"w{k}_{i}"
        if view == "T":
            self.nodes.append({"op": "transpose", "inputs": [vid], "outputs": [wid]})
            return wid, x.T
        if view[0] == "dimshuffle":
            order = view[1]
            self.nodes.append({"op": "dimshuffle", "inputs": [vid], "outputs": [wid],
                               "attrs": {"order": order}})
            y = x.transpose([o for o in order if o != "x"])
            return wid, y.reshape([1 if o == "x" else x.shape[o] for o in order])
        self.nodes.append({"op": "subtensor", "inputs": [vid], "outputs": [wid],
                           "attrs": {"index": [slice_json(s) for s in view]}})
        return wid, x[tuple(view)]

    def case(self, op, operands, fn=None, error=None, dynamic=False, tol=None):
        """operands: list of (array, view) or {"value": ...} inline JSON.
        fn: computes the expectation from the viewed NumPy operands (inline
        operands are passed as their Python value)."""
        k = self.k
        self.k += 1
        ins, feeds, args, vals = [], {}, [], []
        for i, o in enumerate(operands):
            if isinstance(o, dict):
                args.append(o)
                v = o["value"]
                vals.append(v["data"] if isinstance(v, dict) else v)
                continue
            x, view = o
            shape = [None] * np.ndim(x) if dynamic else None
            vid, v = self.operand(np.asarray(x), view, k, i, ins, feeds, shape)
            args.append(vid)
            vals.append(v)
        yid = f"y{k}"
        self.nodes.append({"op": op, "inputs": args, "outputs": [yid]})
        self.functions[f"f{k}"] = {"inputs": ins, "outputs": [yid]}
        c = {"function": f"f{k}", "inputs": feeds}
        if error:
            c["error"] = error
        else:
            want = np.asarray(fn(*vals))
            c["outputs"] = {yid: value(want)}
            t = tol or TOL.get(str(want.dtype))
            if t:
                c["rtol"], c["atol"] = t
        self.tests.append(c)

    def write(self):
        # compact: one file holds many small cases
        g = {"format": "tg-graph", "version": 1, "name": self.name, "variables": self.variables,
             "nodes": self.nodes, "functions": self.functions, "meta": {"tests": self.tests}}
        with open(os.path.join(OUT, self.name + ".json"), "w") as fp:
            json.dump(g, fp, separators=(",", ":"))
            fp.write("\n")


def S(dt, shape, lo=-3, hi=4):
    """Floats are quarters (short in JSON, exact products)."""
    if np.dtype(dt).kind == "f":
        return (rng.integers(lo * 4, hi * 4, size=shape) / 4).astype(dt)
    return sample(dt, shape, rng, lo, hi)


DT = ["float64", "float32", "float16", "int32", "int64", "uint8", "int8", "uint16", "bool"]

# ---- dot: every shape combination, every dtype class ----
f = File("blas_dot")
DOT_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((), (3,)),
              ((2, 3), ()), ((), ()), ((1, 1), (1, 1)), ((2, 0), (0, 3)), ((0,), (0,)),
              ((0, 3), (3,)), ((3, 2), (2, 0)), ((1, 3), (3, 1)), ((3, 1), (1, 2))]
for dt in DT:
    for sa, sb in DOT_SHAPES if dt in ("float64", "float32") else DOT_SHAPES[:6]:
        f.case("dot", [(S(dt, sa), None), (S(dt, sb), None)], np.dot)
# mixed dtypes promote as NumPy
f.case("dot", [(S("int32", (3, 4)), None), (S("float32", (4, 2)), None)], np.dot)
f.case("dot", [(S("bool", (3, 4)), None), (S("int8", (4,)), None)], np.dot)
f.case("dot", [(S("uint8", (4,)), None), (S("int8", (4,)), None)], np.dot)
f.case("dot", [(S("float16", (2, 3)), None), (S("float64", (3, 2)), None)], np.dot)
# integers wrap as NumPy's
f.case("dot", [(S("int8", (3, 6), -100, 100), None), (S("int8", (6, 2), -100, 100), None)], np.dot)
f.case("dot", [(S("uint16", (7,), 0, 60000), None), (S("uint16", (7,), 0, 60000), None)], np.dot)
f.case("dot", [(S("int64", (2, 3), -2**40, 2**40), None), (S("int64", (3, 2), -2**40, 2**40), None)], np.dot)
# weak scalar operand
f.case("dot", [(S("float32", (3,)), None), {"value": 2.5}], lambda a, s: np.dot(a, np.float32(s)))
f.case("dot", [{"value": 3}, (S("int16", (2, 2)), None)], lambda s, a: np.dot(np.int16(s), a))
# dynamic shapes
f.case("dot", [(S("float64", (3, 4)), None), (S("float64", (4, 5)), None)], np.dot, dynamic=True)
f.case("dot", [(S("float32", (4,)), None), (S("float32", (4,)), None)], np.dot, dynamic=True)
f.write()

# ---- matmul: batching with broadcasting, 1-D promotion ----
f = File("blas_matmul")
for dt in ["float64", "float32", "float16", "int32", "int64", "uint8", "bool"]:
    shapes = [((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
              ((4,), (4,)), ((3, 4), (2, 4, 5)), ((1, 2, 3), (4, 3, 2)), ((2, 3, 4), (2, 4, 1)),
              ((0, 3, 4), (4, 2)), ((2, 3, 0), (0, 4)), ((2, 0, 4), (2, 4, 3)), ((3, 4), (4, 5))]
    for sa, sb in shapes if dt in ("float64", "float32") else shapes[:4]:
        f.case("matmul", [(S(dt, sa), None), (S(dt, sb), None)], np.matmul)
f.case("matmul", [(S("int32", (2, 3, 4)), None), (S("float64", (4, 2)), None)], np.matmul)
f.case("matmul", [(S("float32", (2, 2, 3, 4)), None), (S("float32", (2, 1, 4, 2)), None)], np.matmul,
       dynamic=True)
f.write()

# ---- outer: flattens its operands ----
f = File("blas_outer")
for dt in ["float64", "float32", "float16", "int64", "int8", "uint32", "bool"]:
    for sa, sb in [((3,), (4,)), ((2, 2), (3,)), ((), (2,)), ((0,), (3,)), ((2, 1, 2), (1, 3))][:5 if dt == "float64" else 2]:
        f.case("outer", [(S(dt, sa), None), (S(dt, sb), None)], np.outer)
f.case("outer", [(S("float64", (3, 4)), "T"), (S("float64", (6,)), (slice(None, None, -2),))], np.outer)
f.case("outer", [(S("int32", (3, 4)), (slice(None), slice(None, None, 2))), (S("int32", (3,)), None)], np.outer)
f.case("outer", [(S("float32", (3,)), None), {"value": 2}], lambda a, s: np.outer(a, np.float32(s)))
f.write()


# ---- gemm / gemv / ger ----
def gemm_ref(z, a, x, y, b):
    dt = z.dtype
    if dt.kind == "f":
        if dt == np.float16:  # tg: float32 products rounded once
            p = np.dot(x.astype(np.float64), y.astype(np.float64))
            return (a * p + (0 if b == 0 else b * z.astype(np.float64))).astype(dt)
        r = dt.type(a) * np.dot(x, y)
        if b != 0:
            r = r + dt.type(b) * z
        return np.asarray(r).astype(dt)
    # integers: wrap in the dtype
    with np.errstate(over="ignore"):
        r = np.asarray(a).astype(dt) * np.dot(x, y).astype(dt)
        if b != 0:
            r = r + np.asarray(b).astype(dt) * z
    return r.astype(dt)


def ger_ref(A, a, x, y):
    dt = A.dtype
    with np.errstate(over="ignore"):
        if dt == np.float16:
            return (A.astype(np.float32) + np.float32(a) * np.outer(x, y).astype(np.float32)).astype(dt)
        return (A + np.asarray(a).astype(dt) * np.outer(x, y)).astype(dt)


def sc(v, dt):
    """alpha/beta given as a strong scalar of dt."""
    return {"value": {"dtype": dt, "data": v}}


def weak_or_strong(v, dt, weak):
    return {"value": v} if weak else sc(v, dt)


f = File("blas_gemm")
for dt in ["float64", "float32", "float16", "int32", "int64", "uint8", "int16"]:
    mkn = [(3, 4, 5), (1, 4, 1), (3, 1, 2), (2, 0, 3), (0, 2, 3), (1, 4, 3), (3, 4, 1)]
    for M, K, N in mkn if dt in ("float64", "float32") else mkn[:2]:
        for alpha, beta, weak in [(2, 3, True), (-1 if dt[0] != "u" else 5, 0, False)]:
            z, x, y = S(dt, (M, N)), S(dt, (M, K)), S(dt, (K, N))
            f.case("gemm", [(z, None), weak_or_strong(alpha, dt, weak), (x, None), (y, None),
                            weak_or_strong(beta, dt, weak)],
                   lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
# float weak alpha/beta with fractions; beta 0 ignores NaN/inf in z (BLAS)
for dt in ["float64", "float32"]:
    z = S(dt, (3, 2))
    z[0, 0], z[1, 1] = np.nan, np.inf
    f.case("gemm", [(z, None), {"value": 0.5}, (S(dt, (3, 4)), None), (S(dt, (4, 2)), None), {"value": 0}],
           lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
    f.case("gemm", [(S(dt, (3, 2)), None), {"value": 0.5}, (S(dt, (4, 3)), "T"), (S(dt, (2, 4)), "T"),
                    {"value": -1.5}], lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
    f.case("gemm", [(S(dt, (3, 3)), None), {"value": 1.0},
                    (S(dt, (6, 8)), (slice(None, None, 2), slice(1, None, 2))),
                    (S(dt, (4, 6)), (slice(None, None, -1), slice(None, None, 2))), {"value": 1.0}],
                   lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
f.case("gemm", [(S("int32", (3, 2)), None), {"value": 2}, (S("int32", (4, 3)), "T"), (S("int32", (4, 4)),
                (slice(None), slice(None, None, -2))), {"value": 1}],
       lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
# alpha 0 (a learning rate read at run time may be 0): the product is still
# formed, so an inf or NaN in it gives NaN (NumPy's 0 * inf), unlike BLAS,
# which skips it; -0 too, with beta 1 and 0
for dt in ["float64", "float32", "float16"]:
    x = S(dt, (3, 4))
    x[0, 1], x[2, 0] = np.inf, np.nan
    for a, b in [(0.0, 1.0), (-0.0, 0.0), (0.0, 2.0)]:
        f.case("gemm", [(S(dt, (3, 2)), None), sc(a, dt), (x, None), (S(dt, (4, 2)), None), sc(b, dt)],
               lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
# weak alpha/beta take z's dtype even when written as floats meeting float32
f.case("gemm", [(S("float32", (2, 2)), None), {"value": 0.1}, (S("float32", (2, 3)), None),
                (S("float32", (3, 2)), None), {"value": 0.3}],
       lambda z, a, x, y, b: (np.float32(a) * np.dot(x, y) + np.float32(b) * z).astype(np.float32))
f.case("gemm", [(S("float64", (2, 2)), None), {"value": 1.0}, (S("float64", (2, 3)), None),
                (S("float64", (3, 2)), None), {"value": 1.0}], lambda z, a, x, y, b: z + x @ y, dynamic=True)
f.write()

f = File("blas_gemv")
for dt in ["float64", "float32", "float16", "int32", "int64", "uint8"]:
    mk = [(3, 4), (1, 1), (4, 1), (1, 5), (0, 3), (3, 0)]
    for M, K in mk if dt in ("float64", "float32") else mk[:2]:
        for alpha, beta, weak in [(2, 3, True), (1, 0, False)]:
            f.case("gemv", [(S(dt, (M,)), None), weak_or_strong(alpha, dt, weak), (S(dt, (M, K)), None),
                            (S(dt, (K,)), None), weak_or_strong(beta, dt, weak)],
                   lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
for dt in ["float64", "float32", "int64"]:
    z = S(dt, (3,))
    if dt[0] == "f":
        z[1] = np.nan
    f.case("gemv", [(z, None), {"value": 1}, (S(dt, (4, 3)), "T"), (S(dt, (8,)), (slice(None, None, -2),)),
                    {"value": 0}], lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
    f.case("gemv", [(S(dt, (6,)), (slice(None, None, 2),)), {"value": 2}, (S(dt, (3, 8)), (slice(None), slice(None, None, 3))),
                    (S(dt, (3, 3)), (slice(None), 1)), {"value": 2}], lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
for dt in ["float64", "float32", "float16"]:
    x = S(dt, (3, 4))
    x[1, 2] = -np.inf
    f.case("gemv", [(S(dt, (3,)), None), sc(0.0, dt), (x, None), (S(dt, (4,)), None), sc(1.0, dt)],
           lambda z, a, x, y, b: gemm_ref(z, a, x, y, b))
f.write()

f = File("blas_ger")
for dt in ["float64", "float32", "float16", "int32", "int64", "uint8"]:
    for M, N in [(3, 4), (1, 1), (0, 3), (2, 0)] if dt in ("float64", "float32") else [(3, 4)]:
        for alpha, weak in [(2, True), (1, False)]:
            f.case("ger", [(S(dt, (M, N)), None), weak_or_strong(alpha, dt, weak), (S(dt, (M,)), None),
                           (S(dt, (N,)), None)], ger_ref)
for dt in ["float64", "float32", "int32"]:
    f.case("ger", [(S(dt, (4, 3)), "T"), {"value": 3}, (S(dt, (3,)), (slice(None, None, -1),)),
                   (S(dt, (8,)), (slice(1, None, 2),))], ger_ref)
    f.case("ger", [(S(dt, (3, 4)), None), {"value": -1}, (S(dt, (3, 2)), (slice(None), 0)),
                   (S(dt, (2, 4)), (1,))], ger_ref)
# alpha 0: A + 0 * outer(x, y) is NaN where x[i] * y[j] is inf or NaN
for dt in ["float64", "float32", "float16"]:
    x = S(dt, (3,))
    x[1] = np.inf
    y = S(dt, (4,))
    y[3] = np.nan
    for a in [0.0, -0.0]:
        f.case("ger", [(S(dt, (3, 4)), None), sc(a, dt), (x, None), (y, None)], ger_ref)
f.write()

# ---- strided, transposed and broadcast-view operands of dot/matmul ----
f = File("blas_strided")
for dt in ["float64", "float32", "int32"]:
    f.case("dot", [(S(dt, (4, 3)), "T"), (S(dt, (4, 5)), None)], np.dot)
    f.case("dot", [(S(dt, (3, 4)), None), (S(dt, (5, 4)), "T")], np.dot)
    f.case("dot", [(S(dt, (4, 3)), "T"), (S(dt, (5, 4)), "T")], np.dot)
    f.case("dot", [(S(dt, (3, 8)), (slice(None), slice(None, None, 2))), (S(dt, (4, 5)), None)], np.dot)
    f.case("dot", [(S(dt, (3, 4)), None), (S(dt, (4, 5)), (slice(None, None, -1), slice(None, None, -1)))], np.dot)
    f.case("dot", [(S(dt, (6, 4)), (slice(None, None, 2), slice(None))), (S(dt, (8,)), (slice(None, None, 2),))], np.dot)
    f.case("dot", [(S(dt, (9,)), (slice(None, None, -3),)), (S(dt, (3,)), None)], np.dot)
    f.case("dot", [(S(dt, (7,)), (slice(1, 5),)), (S(dt, (4, 6)), (slice(None), slice(None, None, 3)))], np.dot)
    f.case("dot", [(S(dt, (4, 3)), (slice(None, None, -1), 1)), (S(dt, (2, 4)), (1,))], np.dot)
    f.case("matmul", [(S(dt, (2, 4, 3)), ("dimshuffle", [0, 2, 1])), (S(dt, (4, 5)), None)], np.matmul)
    f.case("matmul", [(S(dt, (3, 2, 4)), ("dimshuffle", [1, 0, 2])), (S(dt, (4, 2)), None)], np.matmul)
    f.case("matmul", [(S(dt, (3, 4)), ("dimshuffle", ["x", 0, 1])), (S(dt, (2, 5, 4)), ("dimshuffle", [0, 2, 1]))],
           np.matmul)
    f.case("matmul", [(S(dt, (2, 3, 8)), (slice(None, None, -1), slice(None), slice(None, None, 2))),
                      (S(dt, (4,)), None)], np.matmul)
    f.case("matmul", [(S(dt, (3, 4)), ("dimshuffle", [0, "x", 1])), (S(dt, (4, 2)), None)], np.matmul)
for dt in ["float16", "bool", "uint8"]:
    f.case("dot", [(S(dt, (4, 3)), "T"), (S(dt, (4, 5)), (slice(None, None, -1), slice(None, None, -1)))], np.dot)
    f.case("dot", [(S(dt, (9,)), (slice(None, None, -3),)), (S(dt, (3, 6)), (slice(None), slice(None, None, 2)))],
           np.dot)
    f.case("matmul", [(S(dt, (3, 4)), ("dimshuffle", ["x", 0, 1])), (S(dt, (2, 5, 4)), ("dimshuffle", [0, 2, 1]))],
           np.matmul)
f.write()

# ---- run-time errors (lengths unknown when loading) ----
f = File("blas_errors")
f.case("dot", [(np.zeros((2, 3)), None), (np.zeros((2, 3)), None)],
       error="shapes (2, 3) and (2, 3) not aligned: 3 (dim 1) != 2 (dim 0)", dynamic=True)
f.case("dot", [(np.zeros(3), None), (np.zeros(4), None)],
       error="shapes (3,) and (4,) not aligned: 3 (dim 0) != 4 (dim 0)", dynamic=True)
f.case("dot", [(np.zeros(3, np.int32), None), (np.zeros((2, 2), np.int32), None)],
       error="not aligned: 3 (dim 0) != 2 (dim 0)", dynamic=True)
f.case("matmul", [(np.zeros((2, 3)), None), (np.zeros((4, 3)), None)],
       error="shapes (2, 3) and (4, 3) not aligned: 3 (dim 1) != 4 (dim 0)", dynamic=True)
f.case("matmul", [(np.zeros((2, 3, 4), np.float32), None), (np.zeros((3, 4, 2), np.float32), None)],
       error="do not broadcast: 2 (dim 0) != 3 (dim 0)", dynamic=True)
f.case("gemm", [(np.zeros((2, 2)), None), {"value": 1}, (np.zeros((2, 3)), None), (np.zeros((4, 2)), None),
                {"value": 1}], error="not aligned: 3 (dim 1) != 4 (dim 0)", dynamic=True)
f.case("gemm", [(np.zeros((2, 3)), None), {"value": 1}, (np.zeros((2, 3)), None), (np.zeros((3, 2)), None),
                {"value": 1}], error="inputs[0] 'z' has shape (2, 3) but dot(x, y) has (2, 2)", dynamic=True)
f.case("gemv", [(np.zeros(3, np.float32), None), {"value": 1}, (np.zeros((2, 3), np.float32), None),
                (np.zeros(3, np.float32), None), {"value": 1}],
       error="inputs[0] 'z' has shape (3,) but dot(A, x) has (2,)", dynamic=True)
f.case("ger", [(np.zeros((2, 3), np.int32), None), {"value": 1}, (np.zeros(2, np.int32), None),
               (np.zeros(4, np.int32), None)], error="A is (2, 3) but x and y have lengths 2 and 4", dynamic=True)
f.write()
