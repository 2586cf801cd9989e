"""Product tests (dot, matmul, outer, gemm, gemv, ger) with NumPy
expectations; run with /usr/bin/python3."""
import numpy as np

from common import sample, typ, value, write

rng = np.random.default_rng(7)


def cases(op, shapes, dtypes, fn):
    variables, nodes, tests, functions = [], [], [], {}
    k = 0
    for dt in dtypes:
        for sa, sb in shapes:
            a = sample(dt, sa, rng, -3, 4)
            b = sample(dt, sb, rng, -3, 4)
            want = np.asarray(fn(a, b))
            tol = {"float16": 5e-3, "float32": 1e-5}.get(dt)
            aid, bid, yid = f"a{k}", f"b{k}", f"y{k}"
            variables += [{"id": aid, "type": typ(a)}, {"id": bid, "type": typ(b)}]
            nodes.append({"op": op, "inputs": [aid, bid], "outputs": [yid]})
            functions[f"f{k}"] = {"inputs": [aid, bid], "outputs": [yid]}
            c = {"function": f"f{k}", "inputs": {aid: value(a), bid: value(b)}, "outputs": {yid: value(want)}}
            if tol:
                c["rtol"] = c["atol"] = tol
            tests.append(c)
            k += 1
    write(f"blas_{op}", variables, nodes, tests, functions)


DT = ["float64", "float32", "float16", "int32", "int64", "uint8", "bool"]
cases("dot", [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((), (3,)),
              ((2, 3), ()), ((1, 1), (1, 1)), ((2, 0), (0, 3))], DT, np.dot)
cases("matmul", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (2, 4, 3)),
                 ((2, 3, 4), (4,)), ((4,), (4,))], ["float64", "float32", "int32", "float16"], np.matmul)
cases("outer", [((3,), (4,)), ((2, 2), (3,))], ["float64", "float32", "int64", "bool"], np.outer)

# Mixed dtypes promote; weak alpha/beta take z's dtype; strided operands.
x = sample("float64", (4, 3), rng)
y = sample("float64", (4, 5), rng)
z = sample("float64", (3, 5), rng)
v = sample("float64", (3,), rng)
w = sample("float64", (5,), rng)
xi = sample("int32", (3, 4), rng)
x32 = sample("float32", (4, 3), rng)
y32 = sample("float32", (4, 5), rng)
z32 = sample("float32", (3, 5), rng)
write("blas_forms",
      [{"id": n, "type": typ(a)} for n, a in
       [("x", x), ("y", y), ("z", z), ("v", v), ("w", w), ("xi", xi), ("x32", x32), ("y32", y32), ("z32", z32)]],
      [{"op": "transpose", "inputs": ["x"], "outputs": ["xT"]},
       {"op": "transpose", "inputs": ["y"], "outputs": ["yT"]},
       {"op": "dot", "inputs": ["xT", "y"], "outputs": ["xTy"]},
       {"op": "dot", "inputs": ["yT", "x"], "outputs": ["yTx"]},
       {"op": "dot", "inputs": ["xi", "y"], "outputs": ["mixed"]},
       {"op": "subtensor", "inputs": ["y"], "outputs": ["ys"],
        "attrs": {"index": [{"start": None, "stop": None, "step": -1}, {"start": 0, "stop": None, "step": 2}]}},
       {"op": "dot", "inputs": ["xT", "ys"], "outputs": ["xTys"]},
       {"op": "gemm", "inputs": ["z", {"value": 0.5}, "xT", "y", {"value": 2}], "outputs": ["g"]},
       {"op": "transpose", "inputs": ["x32"], "outputs": ["x32T"]},
       {"op": "gemm", "inputs": ["z32", {"value": -1.0}, "x32T", "y32", {"value": 0}], "outputs": ["g32"]},
       {"op": "gemv", "inputs": ["v", {"value": 2.0}, "xT", {"value": {"dtype": "float64", "shape": [4], "data": [1, 2, 3, 4]}},
                                 {"value": -1.0}], "outputs": ["gv"]},
       {"op": "ger", "inputs": ["z", {"value": 3.0}, "v", "w"], "outputs": ["gr"]}],
      [{"inputs": {"x": value(x), "y": value(y), "z": value(z), "v": value(v), "w": value(w), "xi": value(xi),
                   "x32": value(x32), "y32": value(y32), "z32": value(z32)},
        "outputs": {"xTy": value(x.T @ y), "yTx": value(y.T @ x), "mixed": value(np.dot(xi, y)),
                    "xTys": value(x.T @ y[::-1, ::2]),
                    "g": value(2 * z + 0.5 * (x.T @ y)),
                    "g32": value((np.float32(-1.0) * (x32.T @ y32)).astype(np.float32)),
                    "gv": value(-1.0 * v + 2.0 * (x.T @ np.array([1.0, 2, 3, 4]))),
                    "gr": value(z + 3.0 * np.outer(v, w))},
        "rtol": 1e-5, "atol": 1e-5}],
      functions={"main": {"inputs": ["x", "y", "z", "v", "w", "xi", "x32", "y32", "z32"],
                          "outputs": ["xTy", "yTx", "mixed", "xTys", "g", "g32", "gv", "gr"]}})

write("blas_errors",
      [{"id": "a", "type": {"dtype": "float64", "shape": [None, None]}},
       {"id": "b", "type": {"dtype": "float64", "shape": [None, None]}}],
      [{"op": "dot", "inputs": ["a", "b"], "outputs": ["ab"]},
       {"op": "matmul", "inputs": ["a", "b"], "outputs": ["mab"]}],
      [{"function": "dot", "inputs": {"a": value(np.zeros((2, 3))), "b": value(np.zeros((2, 3)))},
        "error": "not aligned"},
       {"function": "matmul", "inputs": {"a": value(np.zeros((2, 3))), "b": value(np.zeros((4, 3)))},
        "error": "not aligned"}],
      functions={"dot": {"inputs": ["a", "b"], "outputs": ["ab"]},
                 "matmul": {"inputs": ["a", "b"], "outputs": ["mab"]}})
