#!/usr/bin/python3
"""Writes tests/data/ops/linalg_*.json: cholesky, matrix_inverse, det and
solve, with expectations computed by np.linalg on well-conditioned
matrices (rtol 1e-10 for float64, 1e-4 for float32).

Run with Debian's python (it has numpy): /usr/bin/python3 tests/data/gen/linalg.py
Deterministic: fixed seeds, so re-running rewrites the same files.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build import Graph, OUT  # noqa: E402  (the same graph writer)

rng = np.random.default_rng(20261123)
TOL = {"float64": {"rtol": 1e-10, "atol": 1e-12},
       "float32": {"rtol": 1e-4, "atol": 1e-5}}


def tol(dt):
    return TOL[np.dtype(dt).name]


def gen_matrix(n, batch=()):
    """Well conditioned: random plus n on the diagonal."""
    a = np.round(rng.standard_normal(batch + (n, n)), 3)
    return a + n * np.eye(n)


def spd(n, batch=()):
    m = np.round(rng.standard_normal(batch + (n, n)), 2)
    return np.round(m @ np.swapaxes(m, -1, -2), 4) + n * np.eye(n)


def int_spd(n, dtype):
    m = rng.integers(0 if np.dtype(dtype).kind == "u" else -2, 3, size=(n, n))
    return (m @ m.T + 2 * n * np.eye(n, dtype=np.int64)).astype(dtype)


def int_gen(n, dtype):
    m = rng.integers(-2, 3, size=(n, n)) + 3 * n * np.eye(n, dtype=np.int64)
    return m.astype(dtype)


def fdt(dt):
    """FORMAT.md's float-only rule."""
    d = np.dtype(dt)
    if d.kind == "f":
        return d
    return np.dtype(np.float32) if d.itemsize <= 2 else np.dtype(np.float64)


# ---------------------------------------------------------------- cholesky
def gen_cholesky():
    g = Graph("linalg_cholesky")
    for dt in ["float64", "float32"]:
        x = g.inp("a_" + dt, dt, [None, None])
        f = "mat_" + dt
        g.func(f, [x], [g.op("cholesky", [x], None, out="l_" + dt),
                        g.op("cholesky", [x], {"lower": False}, out="u_" + dt)])
        for n in [1, 4, 6]:
            a = spd(n).astype(dt)
            l_ = np.linalg.cholesky(a)
            g.case(f, {"a_" + dt: a}, {"l_" + dt: l_, "u_" + dt: l_.T}, **tol(dt))
        a = np.zeros((0, 0), dt)
        g.case(f, {"a_" + dt: a}, {"l_" + dt: a, "u_" + dt: a})
        g.case(f, {"a_" + dt: np.array([[1, 2], [2, 1]], dt)},
               error="matrix is not positive definite")
        g.case(f, {"a_" + dt: np.zeros((2, 3), dt)}, error="square")

    # Integers compute in float32 (8/16 bits) or float64 (wider).
    for dt in ["int16", "uint8", "int32", "int64", "bool"]:
        x = g.inp("i_" + dt, dt, [3, 3])
        f = "int_" + dt
        g.func(f, [x], [g.op("cholesky", [x], None, out="il_" + dt)])
        a = np.eye(3, dtype=bool) if dt == "bool" else int_spd(3, dt)
        c = fdt(dt)
        g.case(f, {"i_" + dt: a}, {"il_" + dt: np.linalg.cholesky(a.astype(c))},
               **tol(c))

    # Batched, and non-contiguous (a strided slice, a transpose).
    x = g.inp("b", "float64", [2, 3, 3])
    g.func("batched", [x], [g.op("cholesky", [x], None, out="bl")])
    a = spd(3, (2,))
    g.case("batched", {"b": a}, {"bl": np.linalg.cholesky(a)}, **tol("float64"))
    bad = a.copy()
    bad[1] = [[1, 2, 0], [2, 1, 0], [0, 0, 1]]
    g.case("batched", {"b": bad}, error="matrix is not positive definite")

    x = g.inp("n", "float64", [4, 8])
    st = g.op("subtensor", [x], {"index": [{}, {"step": 2}]})
    t = g.op("transpose", [st], {"axes": None})
    g.func("noncontig", [x], [g.op("cholesky", [st], None, out="n_st"),
                              g.op("cholesky", [t], {"lower": False}, out="n_t")])
    a = spd(4)
    big = rng.standard_normal((4, 8))
    big[:, ::2] = a
    g.case("noncontig", {"n": big},
           {"n_st": np.linalg.cholesky(a), "n_t": np.linalg.cholesky(a.T).T},
           **tol("float64"))
    g.write()


# ---------------------------------------------------------------- inverse, det
def gen_inverse():
    g = Graph("linalg_matrix_inverse")
    for dt in ["float64", "float32"]:
        x = g.inp("a_" + dt, dt, [None, None])
        f = "mat_" + dt
        g.func(f, [x], [g.op("matrix_inverse", [x], out="inv_" + dt)])
        for n in [1, 3, 5]:
            a = gen_matrix(n).astype(dt)
            g.case(f, {"a_" + dt: a}, {"inv_" + dt: np.linalg.inv(a)}, **tol(dt))
        a = np.zeros((0, 0), dt)
        g.case(f, {"a_" + dt: a}, {"inv_" + dt: a})
        g.case(f, {"a_" + dt: np.array([[1, 2], [2, 4]], dt)}, error="singular matrix")
    for dt in ["int8", "uint16", "int64", "uint32"]:
        x = g.inp("i_" + dt, dt, [3, 3])
        f = "int_" + dt
        g.func(f, [x], [g.op("matrix_inverse", [x], out="iinv_" + dt)])
        a = int_gen(3, dt) if dt[0] == "i" else np.abs(int_gen(3, "int64")).astype(dt)
        c = fdt(dt)
        g.case(f, {"i_" + dt: a}, {"iinv_" + dt: np.linalg.inv(a.astype(c))}, **tol(c))

    x = g.inp("b", "float64", [3, 2, 2])
    t = g.op("transpose", [x], {"axes": [0, 2, 1]})
    g.func("batched", [x], [g.op("matrix_inverse", [x], out="binv"),
                            g.op("matrix_inverse", [t], out="btinv")])
    a = gen_matrix(2, (3,))
    g.case("batched", {"b": a}, {"binv": np.linalg.inv(a),
                                 "btinv": np.linalg.inv(np.swapaxes(a, 1, 2))},
           **tol("float64"))
    sing = a.copy()
    sing[2] = [[0, 0], [1, 1]]
    g.case("batched", {"b": sing}, error="singular matrix")
    g.write()


def gen_det():
    g = Graph("linalg_det")
    for dt in ["float64", "float32"]:
        x = g.inp("a_" + dt, dt, [None, None])
        f = "mat_" + dt
        g.func(f, [x], [g.op("det", [x], out="det_" + dt)])
        for n in [1, 2, 4, 6]:
            a = gen_matrix(n).astype(dt)
            g.case(f, {"a_" + dt: a}, {"det_" + dt: np.linalg.det(a)}, **tol(dt))
        # A permutation gives a negative sign.
        a = np.array([[0, 1, 0], [0, 0, 2], [3, 0, 0]], dt)
        g.case(f, {"a_" + dt: a}, {"det_" + dt: np.asarray(np.linalg.det(a)).astype(dt)},
               **tol(dt))
        g.case(f, {"a_" + dt: np.zeros((0, 0), dt)}, {"det_" + dt: np.array(1, dt)})
        g.case(f, {"a_" + dt: np.array([[1, 2], [2, 4]], dt)}, {"det_" + dt: np.array(0, dt)})
        g.case(f, {"a_" + dt: np.zeros((3, 3), dt)}, {"det_" + dt: np.array(0, dt)})
        # Partial products past the dtype's range both ways: NumPy's det
        # sums logarithms (1e200 * 1e200 * 1e-200 is 1e200, not inf).
        big = 1e200 if dt == "float64" else 1e30
        for d in ([big, -big, 1 / big], [1 / big, 1 / big, big], [big, 0, big]):
            a = np.diag(np.array(d, dt))[[1, 0, 2]]
            g.case(f, {"a_" + dt: a}, {"det_" + dt: np.asarray(np.linalg.det(a)).astype(dt)},
                   **tol(dt))
    for dt in ["bool", "int16", "uint8", "int64"]:
        x = g.inp("i_" + dt, dt, [3, 3])
        f = "int_" + dt
        g.func(f, [x], [g.op("det", [x], out="idet_" + dt)])
        a = np.eye(3, dtype=bool) if dt == "bool" else (
            int_gen(3, dt) if dt[0] == "i" else np.abs(int_gen(3, "int64")).astype(dt))
        c = fdt(dt)
        g.case(f, {"i_" + dt: a}, {"idet_" + dt: np.asarray(np.linalg.det(a.astype(c)))},
               **tol(c))

    x = g.inp("b", "float64", [2, 3, 3])
    t = g.op("transpose", [x], {"axes": [0, 2, 1]})
    g.func("batched", [x], [g.op("det", [x], out="bdet"), g.op("det", [t], out="btdet")])
    a = gen_matrix(3, (2,))
    g.case("batched", {"b": a}, {"bdet": np.linalg.det(a),
                                 "btdet": np.linalg.det(np.swapaxes(a, 1, 2))},
           **tol("float64"))
    g.write()


# ---------------------------------------------------------------- solve
def gen_solve():
    g = Graph("linalg_solve")
    for dt in ["float64", "float32"]:
        A = g.inp("a_" + dt, dt, [None, None])
        bv = g.inp("bv_" + dt, dt, [None])
        bm = g.inp("bm_" + dt, dt, [None, None])
        for mode in ["gen", "sym", "pos"]:
            f = "%s_%s" % (mode, dt)
            g.func(f, [A, bv, bm],
                   [g.op("solve", [A, bv], {"assume_a": mode}, out="xv_%s_%s" % (mode, dt)),
                    g.op("solve", [A, bm], {"assume_a": mode}, out="xm_%s_%s" % (mode, dt))])
            for n, k in [(1, 1), (4, 2)]:
                a = (spd(n) if mode != "gen" else gen_matrix(n)).astype(dt)
                v = np.round(rng.standard_normal(n), 2).astype(dt)
                m = np.round(rng.standard_normal((n, k)), 2).astype(dt)
                g.case(f, {"a_" + dt: a, "bv_" + dt: v, "bm_" + dt: m},
                       {"xv_%s_%s" % (mode, dt): np.linalg.solve(a, v),
                        "xm_%s_%s" % (mode, dt): np.linalg.solve(a, m)}, **tol(dt))
            a = np.array([[1, 2], [2, 4]], dt) if mode == "gen" else np.ones((2, 2), dt)
            g.case(f, {"a_" + dt: a, "bv_" + dt: np.ones(2, dt), "bm_" + dt: np.ones((2, 1), dt)},
                   error="singular matrix" if mode != "pos" else "matrix is not positive definite")
            if mode == "pos":
                g.case(f, {"a_" + dt: np.array([[1, 2], [2, 1]], dt), "bv_" + dt: np.ones(2, dt),
                           "bm_" + dt: np.ones((2, 1), dt)},
                       error="matrix is not positive definite")
        # A symmetric indefinite system: sym solves it, pos refuses it.
        a = np.array([[1, 2, 0], [2, 1, 1], [0, 1, -3]], dt)
        v = np.array([1, -2, 0.5], dt)
        m = np.array([[1, 0], [0, 1], [2, 3]], dt)
        g.case("sym_" + dt, {"a_" + dt: a, "bv_" + dt: v, "bm_" + dt: m},
               {"xv_sym_" + dt: np.linalg.solve(a, v), "xm_sym_" + dt: np.linalg.solve(a, m)},
               **tol(dt))
        # sym and pos read A's upper triangle (SciPy's default,
        # lower=False): the lower one below is not the upper's mirror.
        up = np.array([[4, 1, -1], [9, 5, 2], [-7, 8, 6]], dt)
        full = np.triu(up) + np.triu(up, 1).T
        for mode in ["sym", "pos"]:
            g.case("%s_%s" % (mode, dt), {"a_" + dt: up, "bv_" + dt: v, "bm_" + dt: m},
                   {"xv_%s_%s" % (mode, dt): np.linalg.solve(full, v),
                    "xm_%s_%s" % (mode, dt): np.linalg.solve(full, m)}, **tol(dt))

    # Integers and mixed dtypes.
    A = g.inp("ia", "int64", [3, 3])
    b = g.inp("ib", "int32", [3])
    A8 = g.inp("ia8", "int8", [3, 3])
    bf = g.inp("bf", "float64", [3, 2])
    A32 = g.inp("fa32", "float32", [3, 3])
    g.func("dtypes", [A, b, A8, bf, A32],
           [g.op("solve", [A, b], None, out="x_int"),
            g.op("solve", [A8, b], None, out="x_i8"),
            g.op("solve", [A32, bf], None, out="x_mixed")])
    a, a8 = int_gen(3, "int64"), int_gen(3, "int8")
    v = np.array([1, -2, 3], np.int32)
    a32 = gen_matrix(3).astype(np.float32)
    m = rng.standard_normal((3, 2))
    g.case("dtypes", {"ia": a, "ib": v, "ia8": a8, "bf": m, "fa32": a32},
           {"x_int": np.linalg.solve(a.astype(float), v.astype(float)),
            "x_i8": np.linalg.solve(a8.astype(float), v.astype(float)),
            "x_mixed": np.linalg.solve(a32.astype(float), m)},
           rtol=1e-6, atol=1e-9)

    # Batched A with a stack of right-hand sides, or one vector for all.
    A = g.inp("ba", "float64", [2, 3, 3])
    bm = g.inp("bbm", "float64", [2, 3, 2])
    bv = g.inp("bbv", "float64", [3])
    t = g.op("transpose", [A], {"axes": [0, 2, 1]})
    g.func("batched", [A, bm, bv], [g.op("solve", [A, bm], None, out="bx_m"),
                                    g.op("solve", [A, bv], None, out="bx_v"),
                                    g.op("solve", [t, bm], None, out="bx_t")])
    a = gen_matrix(3, (2,))
    m = rng.standard_normal((2, 3, 2))
    v = rng.standard_normal(3)
    g.case("batched", {"ba": a, "bbm": m, "bbv": v},
           {"bx_m": np.linalg.solve(a, m),
            "bx_v": np.stack([np.linalg.solve(a[i], v) for i in range(2)]),
            "bx_t": np.linalg.solve(np.swapaxes(a, 1, 2), m)}, **tol("float64"))

    # Non-contiguous b: a transpose.
    A = g.inp("na", "float64", [3, 3])
    b = g.inp("nb", "float64", [2, 3])
    tb = g.op("transpose", [b], {"axes": None})
    g.func("noncontig", [A, b], [g.op("solve", [A, tb], {"assume_a": "gen"}, out="n_x"),
                                 g.op("solve", [A, tb], {"assume_a": "pos"}, out="n_xp")])
    a = spd(3)
    m = rng.standard_normal((2, 3))
    g.case("noncontig", {"na": a, "nb": m},
           {"n_x": np.linalg.solve(a, m.T), "n_xp": np.linalg.solve(a, m.T)},
           **tol("float64"))

    # b that does not match at run time.
    A = g.inp("ua", "float64", [None, None])
    b = g.inp("ub", "float64", [None])
    g.func("mismatch", [A, b], [g.op("solve", [A, b], None, out="u_x")])
    g.case("mismatch", {"ua": gen_matrix(3), "ub": np.ones(2)}, error="does not match")
    g.write()


# ---------------------------------------------------------------- solve, broadcast
def gen_solve_broadcast():
    """The batch dimensions of A and b broadcast, as np.linalg.solve's
    gufunc signature (m,m),(m,n)->(m,n) has them; b is a vector only when
    it has 1 dimension (NumPy 2's rule: NumPy 1.x read b of A.ndim - 1
    dimensions as a stack of vectors)."""
    g = Graph("linalg_solve_broadcast")

    def solve2(a, b):
        """NumPy 2's solve in any NumPy: the batches broadcast first, so
        that b never has A.ndim - 1 dimensions."""
        if b.ndim == 1:
            return np.linalg.solve(a, np.broadcast_to(b[:, None], a.shape[:-1] + (1,)))[..., 0]
        sh = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        return np.linalg.solve(np.broadcast_to(a, sh + a.shape[-2:]),
                               np.broadcast_to(b, sh + b.shape[-2:]))
    cases = [((2,), ()), ((1,), (2,)), ((2, 1), (4,)), ((), (2, 5)),
             ((3, 1, 2), (4, 1)), ((1, 1), (2, 3))]
    for dt in ["float64", "float32"]:
        for i, (ba, bb) in enumerate(cases):
            A = g.inp("a%d_%s" % (i, dt), dt, list(ba) + [3, 3])
            b = g.inp("b%d_%s" % (i, dt), dt, list(bb) + [3, 2])
            f = "static%d_%s" % (i, dt)
            outs = [g.op("solve", [A, b], {"assume_a": mode}, out="x%d_%s_%s" % (i, mode, dt))
                    for mode in ["gen", "sym", "pos"]]
            g.func(f, [A, b], outs)
            a = spd(3, ba).astype(dt)
            m = np.round(rng.standard_normal(bb + (3, 2)), 2).astype(dt)
            x = solve2(a, m)
            g.case(f, {"a%d_%s" % (i, dt): a, "b%d_%s" % (i, dt): m},
                   {"x%d_%s_%s" % (i, mode, dt): x for mode in ["gen", "sym", "pos"]},
                   **tol(dt))

    # A vector b with batched A: the same vector for every matrix.
    A = g.inp("va", "float64", [2, 2, 3, 3])
    v = g.inp("vb", "float64", [3])
    g.func("vector", [A, v], [g.op("solve", [A, v], None, out="vx")])
    a = gen_matrix(3, (2, 2))
    vv = rng.standard_normal(3)
    g.case("vector", {"va": a, "vb": vv},
           {"vx": solve2(a, vv)}, **tol("float64"))

    # Mixed dtypes (int64 A, float32 b: float64), a transposed b, empty
    # batches and an empty right-hand side.
    A = g.inp("ma", "int64", [2, 3, 3])
    b = g.inp("mb", "float32", [2, 3])
    tb = g.op("transpose", [b], {"axes": None})
    g.func("mixed", [A, b], [g.op("solve", [A, tb], None, out="mx")])
    a = int_gen(3, "int64")[None] + np.array([0, 1])[:, None, None] * np.eye(3, dtype=np.int64)
    m = np.round(rng.standard_normal((2, 3)), 2).astype(np.float32)
    g.case("mixed", {"ma": a, "mb": m},
           {"mx": solve2(a.astype(float), m.T.astype(float))}, rtol=1e-6, atol=1e-9)
    A = g.inp("ea", "float64", [None, 3, 3])
    b = g.inp("eb", "float64", [None, 3, None])
    g.func("empty", [A, b], [g.op("solve", [A, b], None, out="ex")])
    for na, nbb, k in [(0, 1, 2), (1, 0, 2), (2, 1, 0)]:
        a = gen_matrix(3, (na,))
        m = rng.standard_normal((nbb, 3, k))
        g.case("empty", {"ea": a, "eb": m}, {"ex": solve2(a, m)}, **tol("float64"))

    # Shapes unknown at load: they broadcast at run time, or fail there.
    A = g.inp("ua", "float64", [None, None, None, None])
    b = g.inp("ub", "float64", [None, None, None])
    g.func("unknown", [A, b], [g.op("solve", [A, b], None, out="ux")])
    for ba, bb in [((2, 1), (4,)), ((1, 3), (1,)), ((2, 2), (2,))]:
        a = gen_matrix(3, ba)
        m = rng.standard_normal(bb + (3, 2))
        g.case("unknown", {"ua": a, "ub": m}, {"ux": solve2(a, m)}, **tol("float64"))
    g.case("unknown", {"ua": gen_matrix(3, (2, 3)), "ub": rng.standard_normal((2, 3, 2))},
           error="(solve -> ux): solve: a (2, 3, 3, 3) and b (2, 3, 2): the batch dimensions (all but "
                 "the last 2) do not broadcast: length 3 (dimension 1 of a) against 2 "
                 "(dimension 0 of b)")
    g.case("unknown", {"ua": gen_matrix(3, (1, 1)), "ub": rng.standard_normal((2, 4, 2))},
           error="solve: a (1, 1, 3, 3) and b (2, 4, 2): b does not match a (expected a "
                 "vector of the matrices' order, or matrices with as many rows)")
    # A singular matrix that one broadcast batch reaches.
    a = gen_matrix(3, (2, 1))
    a[1, 0] = [[1, 2, 3], [2, 4, 6], [0, 0, 1]]
    g.case("unknown", {"ua": a, "ub": rng.standard_normal((3, 3, 2))}, error="singular matrix")
    g.write()


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    gen_cholesky()
    gen_inverse()
    gen_det()
    gen_solve()
    gen_solve_broadcast()
