#!/usr/bin/python3
"""Writes tests/data/ops/build_*.json: the building ops (take, take_set,
take_add, join, stack, split, alloc, zeros_like, ones_like, arange, eye,
repeat), with expectations computed by NumPy.

Run with Debian's python (it has numpy): /usr/bin/python3 tests/data/gen/build.py
Deterministic: fixed seeds, so re-running rewrites the same files.
"""
import os

import numpy as np

from common import OUT, Graph, const, i64, rand_from, unknown, vec
from common import flat_value as value


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64"]


rng = np.random.default_rng(20261122)
rand = rand_from(rng)


# ---------------------------------------------------------------- take
def gen_take():
    g = Graph("build_take")
    x = g.inp("a", "float64", [4, 3])
    i = g.inp("ai", "int64", [None])
    g.func("axes", [x, i], [g.op("take", [x, i], None, out="a_0"),
                            g.op("take", [x, i], {"axis": 1}, out="a_1"),
                            g.op("take", [x, i], {"axis": -2}, out="a_m2")])
    a = rand("float64", (4, 3))
    idx = np.array([2, -1, 0, 2, -3], np.int64)
    g.case("axes", {"a": a, "ai": idx},
           {"a_0": np.take(a, idx, 0), "a_1": np.take(a, idx, 1),
            "a_m2": np.take(a, idx, -2)})
    idx = np.zeros(0, np.int64)
    g.case("axes", {"a": a, "ai": idx},
           {"a_0": np.take(a, idx, 0), "a_1": np.take(a, idx, 1),
            "a_m2": np.take(a, idx, 0)})
    g.case("axes", {"a": a, "ai": np.array([0, 3], np.int64)},
           error="index 3 is out of bounds for axis 1 with size 3")
    g.case("axes", {"a": a, "ai": np.array([1, -5], np.int64)},
           error="index -5 is out of bounds for axis 0 with size 4")

    # Every dtype of x, index dtypes, 2-D indices, 0-d index (weak).
    for k, dt in enumerate(DTYPES):
        idt = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64"][k % 8]
        x = g.inp("d%d" % k, dt, [None, 2])
        i = g.inp("di%d" % k, idt, [2, 2])
        f = "dtype_%s" % dt
        g.func(f, [x, i], [g.op("take", [x, i], {"axis": 0}, out="d%d_t" % k),
                           g.op("take", [x, {"value": 1}], {"axis": 1}, out="d%d_s" % k)])
        a = rand(dt, (3, 2))
        idx = np.array([[2, 0], [1, 1]], idt)
        g.case(f, {"d%d" % k: a, "di%d" % k: idx},
               {"d%d_t" % k: np.take(a, idx.astype(np.int64), 0), "d%d_s" % k: np.take(a, 1, 1)})

    # Non-contiguous input: a transpose.
    x = g.inp("n", "int32", [3, 5])
    i = g.inp("ni", "int64", [None])
    t = g.op("transpose", [x], {"axes": None})
    g.func("noncontig", [x, i], [g.op("take", [t, i], {"axis": 1}, out="n_1"),
                                 g.op("take", [t, i], {"axis": 0}, out="n_0")])
    a = rand("int32", (3, 5))
    idx = np.array([2, 0, -1], np.int64)
    g.case("noncontig", {"n": a, "ni": idx},
           {"n_1": np.take(a.T, idx, 1), "n_0": np.take(a.T, idx, 0)})

    # a uint64 index past 2^63 - 1 is out of bounds, named as given (the
    # error named the 2^63 - 1 it counts as)
    x = g.inp("u", "float64", [None])
    i = g.inp("ui", "uint64", [None])
    g.func("u64", [x, i], [g.op("take", [x, i], None, out="u_0")])
    g.case("u64", {"u": np.arange(4.0), "ui": np.array([3, 2**64 - 1], np.uint64)},
           error="index 18446744073709551615 is out of bounds for axis 0 with size 4")
    g.write()


def front(a, axis, k):
    """a with its axes axis..axis+k-1 (the index's) moved to the front."""
    return np.moveaxis(a, list(range(axis, axis + k)), list(range(k)))


def ref_set(x, y, idx, axis):
    r = x.copy()
    rm = np.moveaxis(r, axis, 0)
    shp = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    yb = front(np.broadcast_to(np.asarray(y).astype(x.dtype), shp), axis, idx.ndim)
    yb = yb.reshape((idx.size,) + rm.shape[1:])
    for j, k in enumerate(idx.reshape(-1)):
        rm[k] = yb[j]          # sequential: the last repeated index wins
    return r


def ref_add(x, y, idx, axis):
    r = x.copy()
    shp = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    yb = np.broadcast_to(np.asarray(y).astype(x.dtype), shp)
    sl = (slice(None),) * axis + (idx,)
    if x.dtype == np.bool_:
        # NumPy's add on bool is logical or.
        rm = np.moveaxis(r, axis, 0)
        ym = front(yb, axis, idx.ndim).reshape((idx.size,) + rm.shape[1:])
        for j, k in enumerate(idx.reshape(-1)):
            rm[k] = rm[k] | ym[j]
        return r
    np.add.at(r, sl, yb)
    return r


def gen_take_setadd(opname):
    ref = ref_set if opname == "take_set" else ref_add
    g = Graph("build_" + opname)
    x = g.inp("a", "float64", [5, 3])
    y = g.inp("ay", "float64", [None, 3])
    i = g.inp("ai", "int64", [None])
    g.func("rows", [x, y, i], [g.op(opname, [x, y, i], None, out="a_r")])
    a = rand("float64", (5, 3))
    idx = np.array([1, 3, -4, 0, 3], np.int64)
    yv = rand("float64", (5, 3))
    g.case("rows", {"a": a, "ay": yv, "ai": idx}, {"a_r": ref(a, yv, idx, 0)})
    yv = rand("float64", (1, 3))
    g.case("rows", {"a": a, "ay": yv, "ai": idx}, {"a_r": ref(a, yv, idx, 0)})
    g.case("rows", {"a": a, "ay": rand("float64", (0, 3)), "ai": np.zeros(0, np.int64)},
           {"a_r": a})
    g.case("rows", {"a": a, "ay": yv, "ai": np.array([5], np.int64)},
           error="index 5 is out of bounds for axis 0 with size 5")

    # axis 1, y broadcast along rows, 2-D indices.
    x = g.inp("b", "float32", [2, 4])
    y = g.inp("by", "float32", [None])
    i = g.inp("bi", "int32", [2, 2])
    g.func("axis1", [x, y, i], [g.op(opname, [x, y, i], {"axis": 1}, out="b_r")])
    a = rand("float32", (2, 4))
    idx = np.array([[0, -1], [3, 0]], np.int32)
    yv = rand("float32", (2,))
    g.case("axis1", {"b": a, "by": yv, "bi": idx}, {"b_r": ref(a, yv, idx, 1)})

    # Every dtype, a weak scalar y taking x's dtype.
    for k, dt in enumerate(DTYPES):
        x = g.inp("d%d" % k, dt, [4, 2])
        y = g.inp("dy%d" % k, dt, [2])
        i = g.inp("di%d" % k, "int64", [None])
        f = "dtype_%s" % dt
        w = True if dt == "bool" else 3
        g.func(f, [x, y, i], [g.op(opname, [x, y, i], {"axis": 0}, out="d%d_r" % k),
                              g.op(opname, [x, {"value": w}, i], {"axis": 0}, out="d%d_w" % k)])
        a = rand(dt, (4, 2))
        yv = rand(dt, (2,))
        idx = np.array([0, 2, 0, -1], np.int64)
        g.case(f, {"d%d" % k: a, "dy%d" % k: yv, "di%d" % k: idx},
               {"d%d_r" % k: ref(a, yv, idx, 0),
                "d%d_w" % k: ref(a, np.array(w).astype(dt), idx, 0)})

    # Non-contiguous x and y.
    x = g.inp("n", "int64", [3, 4])
    y = g.inp("ny", "int64", [2, 4])
    i = g.inp("ni", "int64", [2])
    t = g.op("transpose", [x], {"axes": None})
    ty = g.op("transpose", [y], {"axes": None})
    g.func("noncontig", [x, y, i], [g.op(opname, [t, ty, i], {"axis": 1}, out="n_r")])
    a = rand("int64", (3, 4))
    yv = rand("int64", (2, 4))
    idx = np.array([2, 2], np.int64)
    g.case("noncontig", {"n": a, "ny": yv, "ni": idx},
           {"n_r": ref(a.T.copy(), yv.T, idx, 1)})
    g.write()


# ---------------------------------------------------------------- join, stack
def gen_join():
    g = Graph("build_join")
    x = g.inp("a", "float64", [2, 3])
    y = g.inp("b", "float32", [None, 3])
    z = g.inp("c", "int8", [2, None])
    g.func("mixed", [x, y, z], [g.op("join", [x, y], {"axis": 0}, out="ab0"),
                                g.op("join", [x, z, x], {"axis": 1}, out="aca1"),
                                g.op("join", [y, y], {"axis": -1}, out="bb"),
                                g.op("join", [x], {"axis": 0}, out="a_only")])
    a, b, c = rand("float64", (2, 3)), rand("float32", (4, 3)), rand("int8", (2, 5))
    g.case("mixed", {"a": a, "b": b, "c": c},
           {"ab0": np.concatenate([a, b], 0), "aca1": np.concatenate([a, c, a], 1),
            "bb": np.concatenate([b, b], -1), "a_only": a})
    b0, c0 = rand("float32", (0, 3)), rand("int8", (2, 0))
    g.case("mixed", {"a": a, "b": b0, "c": c0},
           {"ab0": np.concatenate([a, b0], 0), "aca1": np.concatenate([a, c0, a], 1),
            "bb": np.concatenate([b0, b0], -1), "a_only": a})

    x = g.inp("u", "float16", [None, None])
    y = g.inp("v", "float16", [None, None])
    g.func("dynamic", [x, y], [g.op("join", [x, y], {"axis": 1}, out="uv")])
    u, v = rand("float16", (2, 1)), rand("float16", (2, 3))
    g.case("dynamic", {"u": u, "v": v}, {"uv": np.concatenate([u, v], 1)})
    g.case("dynamic", {"u": u, "v": rand("float16", (3, 3))},
           error="along dimension 0, the array at index 0 has size 2 and the "
                 "array at index 1 has size 3")

    for k, (d1, d2) in enumerate([("bool", "bool"), ("int8", "uint8"), ("uint16", "uint32"),
                                  ("int64", "float32"), ("uint64", "int8"),
                                  ("float16", "int16")]):
        x = g.inp("p%d" % k, d1, [None])
        y = g.inp("q%d" % k, d2, [2])
        f = "dtype_%s_%s" % (d1, d2)
        g.func(f, [x, y], [g.op("join", [x, y, x], {"axis": 0}, out="pq%d" % k)])
        p, q = rand(d1, (3,)), rand(d2, (2,))
        g.case(f, {"p%d" % k: p, "q%d" % k: q}, {"pq%d" % k: np.concatenate([p, q, p])})

    x = g.inp("n", "int32", [3, 2])
    y = g.inp("m", "int32", [2, 2])
    t = g.op("transpose", [x], {"axes": None})
    g.func("noncontig", [x, y], [g.op("join", [t, y], {"axis": 1}, out="nm1"),
                                 g.op("join", [y, t], {"axis": 1}, out="mn1")])
    n_, m = rand("int32", (3, 2)), rand("int32", (2, 2))
    g.case("noncontig", {"n": n_, "m": m},
           {"nm1": np.concatenate([n_.T, m], 1), "mn1": np.concatenate([m, n_.T], 1)})
    g.write()


def gen_stack():
    g = Graph("build_stack")
    x = g.inp("a", "float64", [2, 3])
    y = g.inp("b", "float32", [2, 3])
    g.func("axes", [x, y], [g.op("stack", [x, y], {"axis": 0}, out="s0"),
                            g.op("stack", [x, y, x], {"axis": 1}, out="s1"),
                            g.op("stack", [x, y], {"axis": 2}, out="s2"),
                            g.op("stack", [y], {"axis": -1}, out="sm1"),
                            g.op("stack", [x, y], {"axis": -3}, out="sm3")])
    a, b = rand("float64", (2, 3)), rand("float32", (2, 3))
    g.case("axes", {"a": a, "b": b},
           {"s0": np.stack([a, b], 0), "s1": np.stack([a, b, a], 1),
            "s2": np.stack([a, b], 2), "sm1": np.stack([b], -1),
            "sm3": np.stack([a, b], -3)})

    for k, dt in enumerate(DTYPES):
        x = g.inp("d%d" % k, dt, [])
        y = g.inp("e%d" % k, dt, [])
        f = "dtype_%s" % dt
        g.func(f, [x, y], [g.op("stack", [x, y, x], {"axis": 0}, out="de%d" % k)])
        p, q = rand(dt, ()), rand(dt, ())
        g.case(f, {"d%d" % k: p, "e%d" % k: q}, {"de%d" % k: np.stack([p, q, p])})

    x = g.inp("u", "int16", [None])
    y = g.inp("v", "uint8", [None])
    g.func("dynamic", [x, y], [g.op("stack", [x, y], {"axis": 1}, out="uv")])
    u, v = rand("int16", (3,)), rand("uint8", (3,))
    g.case("dynamic", {"u": u, "v": v}, {"uv": np.stack([u, v], 1)})
    g.case("dynamic", {"u": np.zeros(0, np.int16), "v": np.zeros(0, np.uint8)},
           {"uv": np.zeros((0, 2), np.int16)})
    g.case("dynamic", {"u": u, "v": rand("uint8", (2,))},
           error="all input arrays must have the same shape")

    # Weak scalars take the others' dtype; alone, their default.
    x = g.inp("w", "float32", [])
    y = g.inp("wu", "uint8", [])
    g.func("weak", [x, y], [g.op("stack", [x, {"value": 2}, {"value": 0.5}], {"axis": 0}, out="w_f"),
                            g.op("stack", [{"value": 7}, y], {"axis": 0}, out="w_u"),
                            g.op("stack", [{"value": 1}, {"value": -2}], {"axis": 0}, out="w_i"),
                            g.op("stack", [y, {"value": 2.5}], {"axis": 0}, out="w_uf")])
    # (a float among integers is float64, as NumPy 2's np.stack([uint8 x, 2.5]);
    # it was truncated to uint8 [200, 2])
    g.case("weak", {"w": np.float32(1.25), "wu": np.uint8(200)},
           {"w_f": np.array([1.25, 2, 0.5], np.float32), "w_u": np.array([7, 200], np.uint8),
            "w_i": np.array([1, -2], np.int64), "w_uf": np.array([200, 2.5], np.float64)})

    x = g.inp("n", "float64", [3, 2])
    t = g.op("transpose", [x], {"axes": None})
    g.func("noncontig", [x], [g.op("stack", [t, t], {"axis": 1}, out="tt")])
    n_ = rand("float64", (3, 2))
    g.case("noncontig", {"n": n_}, {"tt": np.stack([n_.T, n_.T], 1)})
    g.write()


# ---------------------------------------------------------------- split
def gen_split():
    g = Graph("build_split")
    x = g.inp("a", "float64", [7, 2])
    outs = g.op("split", [x, vec(2, 0, 5)], {"axis": 0, "n": 3}, nout=3)
    g.func("const", [x], outs)
    a = rand("float64", (7, 2))
    g.case("const", {"a": a}, dict(zip(outs, np.split(a, [2, 2]))))

    x = g.inp("b", "int16", [None, None])
    s = g.inp("bs", "int64", [2])
    outs = g.op("split", [x, s], {"axis": -1, "n": 2}, nout=2)
    g.func("dynamic", [x, s], outs)
    b = rand("int16", (3, 5))
    g.case("dynamic", {"b": b, "bs": np.array([1, 4], np.int64)},
           dict(zip(outs, np.split(b, [1], axis=1))))
    g.case("dynamic", {"b": b, "bs": np.array([5, 0], np.int64)},
           dict(zip(outs, np.split(b, [5], axis=1))))
    g.case("dynamic", {"b": b, "bs": np.array([2, 2], np.int64)},
           error="the split sizes sum to 4, but axis 1 has length 5")
    g.case("dynamic", {"b": b, "bs": np.array([6, -1], np.int64)},
           error="split size 1 is negative")
    # sizes whose sum passes 2^63 - 1 are named exactly, a uint64 as given
    # (the sum saturated: 'sum to 9223372036854775807')
    g.case("dynamic", {"b": b, "bs": np.array([2**63 - 1, 2**63 - 1], np.int64)},
           error="the split sizes sum to 18446744073709551614, but axis 1 has length 5")
    x = g.inp("bu", "int8", [None])
    s = g.inp("bus", "uint64", [2])
    outs = g.op("split", [x, s], {"axis": 0, "n": 2}, nout=2)
    g.func("dynamic_u64", [x, s], outs)
    bu = np.arange(3, dtype=np.int8)
    g.case("dynamic_u64", {"bu": bu, "bus": np.array([2**64 - 1, 0], np.uint64)},
           error="the split sizes sum to 18446744073709551615, but axis 0 has length 3")
    g.case("dynamic_u64", {"bu": bu, "bus": np.array([1, 2], np.uint64)},
           dict(zip(outs, np.split(bu, [1]))))

    for k, dt in enumerate(DTYPES):
        x = g.inp("d%d" % k, dt, [4])
        s = g.inp("ds%d" % k, "int32", [None])
        outs = g.op("split", [x, s], {"axis": 0, "n": 2}, nout=2)
        f = "dtype_%s" % dt
        g.func(f, [x, s], outs)
        d = rand(dt, (4,))
        g.case(f, {"d%d" % k: d, "ds%d" % k: np.array([3, 1], np.int32)},
               dict(zip(outs, np.split(d, [3]))))

    # A transpose split along both axes; a split output fed onward.
    x = g.inp("n", "float32", [3, 4])
    t = g.op("transpose", [x], {"axes": None})
    o0 = g.op("split", [t, vec(1, 3)], {"axis": 0, "n": 2}, nout=2)
    o1 = g.op("split", [t, vec(2, 1)], {"axis": 1, "n": 2}, nout=2)
    j = g.op("join", [o1[1], o1[0]], {"axis": 1}, out="n_swap")
    g.func("noncontig", [x], o0 + o1 + [j])
    n_ = rand("float32", (3, 4))
    exp = dict(zip(o0, np.split(n_.T, [1], 0)))
    exp.update(zip(o1, np.split(n_.T, [2], 1)))
    exp["n_swap"] = np.concatenate([n_.T[:, 2:], n_.T[:, :2]], 1)
    g.case("noncontig", {"n": n_}, exp)
    g.write()


# ---------------------------------------------------------------- alloc, *_like
def gen_alloc():
    g = Graph("build_alloc")
    v = g.inp("v", "float32", [])
    g.func("scalar", [v], [g.op("alloc", [v, i64(2), i64(3)], out="v23"),
                           g.op("alloc", [v], out="v0d"),
                           g.op("alloc", [v, i64(0), i64(4)], out="v04")])
    g.case("scalar", {"v": np.float32(1.5)},
           {"v23": np.full((2, 3), 1.5, np.float32), "v0d": np.float32(1.5),
            "v04": np.zeros((0, 4), np.float32)})

    v = g.inp("w", "int16", [None])
    d0 = g.inp("w0", "int64", [])
    d1 = g.inp("w1", "int32", [])
    g.func("dynamic", [v, d0, d1], [g.op("alloc", [v, d0, d1], out="wdd"),
                                    g.op("alloc", [v, i64(2), d0, d1], out="w2dd")])
    w = rand("int16", (3,))
    g.case("dynamic", {"w": w, "w0": np.int64(2), "w1": np.int32(3)},
           {"wdd": np.broadcast_to(w, (2, 3)), "w2dd": np.broadcast_to(w, (2, 2, 3))})
    w1 = rand("int16", (1,))
    g.case("dynamic", {"w": w1, "w0": np.int64(1), "w1": np.int32(4)},
           {"wdd": np.broadcast_to(w1, (1, 4)), "w2dd": np.broadcast_to(w1, (2, 1, 4))})
    g.case("dynamic", {"w": w, "w0": np.int64(2), "w1": np.int32(4)},
           error="could not broadcast input array from shape (3,) into shape (2,4)")
    g.case("dynamic", {"w": w, "w0": np.int64(-1), "w1": np.int32(3)},
           error="negative dimensions are not allowed")

    g.func("weak", [], [g.op("alloc", [{"value": 0.5}, i64(3)], out="k_f"),
                        g.op("alloc", [{"value": 7}, i64(2)], out="k_i"),
                        g.op("alloc", [{"value": True}, i64(1), i64(2)], out="k_b")])
    g.case("weak", {}, {"k_f": np.full(3, 0.5), "k_i": np.full(2, 7, np.int64),
                        "k_b": np.ones((1, 2), bool)})

    for k, dt in enumerate(DTYPES):
        v = g.inp("d%d" % k, dt, [2, 1])
        f = "dtype_%s" % dt
        g.func(f, [v], [g.op("alloc", [v, i64(2), i64(2), i64(3)], out="dd%d" % k)])
        d = rand(dt, (2, 1))
        g.case(f, {"d%d" % k: d}, {"dd%d" % k: np.broadcast_to(d, (2, 2, 3))})

    v = g.inp("n", "float64", [2, 3])
    t = g.op("transpose", [v], {"axes": None})
    g.func("noncontig", [v], [g.op("alloc", [t, i64(2), i64(3), i64(2)], out="nt")])
    n_ = rand("float64", (2, 3))
    g.case("noncontig", {"n": n_}, {"nt": np.broadcast_to(n_.T, (2, 3, 2))})

    # Beside a zero, a length of 2^63 - 1 makes an empty array of 1-byte
    # items (NumPy too); of wider ones it is too large (NumPy: "array is
    # too big"; tg made it, and its strides overflowed when the buffer was
    # reused); a uint64 past 2^63 - 1 is too large for any (NumPy: "Maximum
    # allowed dimension exceeded"; tg counted it as 2^63 - 1)
    z, hl = g.inp("hz", "int64", []), g.inp("hl", "uint64", [])
    g.func("huge_f64", [z, hl], [g.op("alloc", [{"value": {"data": 1.5, "dtype": "float64"}}, z, hl],
                                      out="hf")])
    g.func("huge_i8", [z, hl], [g.op("alloc", [{"value": {"data": 7, "dtype": "int8"}}, z, hl],
                                     out="hi")])
    g.case("huge_f64", {"hz": np.int64(0), "hl": np.uint64(2**63 - 1)}, error="too large")
    g.case("huge_i8", {"hz": np.int64(0), "hl": np.uint64(2**63 - 1)},
           {"hi": np.full((0, 2**63 - 1), 7, np.int8)})
    for big in [2**63, 2**64 - 1]:
        g.case("huge_i8", {"hz": np.int64(0), "hl": np.uint64(big)},
               error="length %d for dimension 1 is too large" % big)
    g.write()


def gen_like():
    g = Graph("build_like")
    for k, dt in enumerate(DTYPES):
        x = g.inp("d%d" % k, dt, [None, 3])
        f = "dtype_%s" % dt
        g.func(f, [x], [g.op("zeros_like", [x], out="z%d" % k),
                        g.op("ones_like", [x], out="o%d" % k)])
        d = rand(dt, (2, 3))
        g.case(f, {"d%d" % k: d}, {"z%d" % k: np.zeros_like(d), "o%d" % k: np.ones_like(d)})
        d = rand(dt, (0, 3))
        g.case(f, {"d%d" % k: d}, {"z%d" % k: np.zeros_like(d), "o%d" % k: np.ones_like(d)})
    x = g.inp("s", "float32", [])
    t = g.inp("n", "int8", [2, 3])
    tt = g.op("transpose", [t], {"axes": None})
    g.func("misc", [x, t], [g.op("zeros_like", [x], out="zs"),
                            g.op("ones_like", [tt], out="ot"),
                            g.op("ones_like", [{"value": 2.5}], out="ow")])
    g.case("misc", {"s": np.float32(3), "n": rand("int8", (2, 3))},
           {"zs": np.float32(0), "ot": np.ones((3, 2), np.int8), "ow": np.float64(1)})
    g.write()


# ---------------------------------------------------------------- arange, eye
def gen_arange():
    g = Graph("build_arange")
    outs = [g.op("arange", [{"value": 0}, {"value": 5}, {"value": 1}], out="r_int"),
            g.op("arange", [{"value": 1}, {"value": 10}, {"value": 3}], out="r_step3"),
            g.op("arange", [{"value": 5}, {"value": -4}, {"value": -2}], out="r_neg"),
            g.op("arange", [{"value": 5}, {"value": 5}, {"value": 1}], out="r_empty"),
            g.op("arange", [{"value": 3}, {"value": 1}, {"value": 1}], out="r_empty2"),
            g.op("arange", [{"value": 0.5}, {"value": 2}, {"value": 0.25}], out="r_f"),
            g.op("arange", [{"value": 0}, {"value": 1}, {"value": 0.1}], out="r_tenth"),
            g.op("arange", [{"value": 0}, {"value": 5}, {"value": 1}], {"dtype": "float32"},
                 out="r_f32"),
            g.op("arange", [{"value": 0}, {"value": 2}, {"value": 0.5}], {"dtype": "float16"},
                 out="r_f16"),
            g.op("arange", [{"value": -3}, {"value": 3}, {"value": 2}], {"dtype": "int8"},
                 out="r_i8"),
            g.op("arange", [{"value": 0}, {"value": 6}, {"value": 2}], {"dtype": "uint16"},
                 out="r_u16"),
            g.op("arange", [{"value": 0.5}, {"value": 4}, {"value": 1.5}], {"dtype": "int32"},
                 out="r_fi")]
    g.func("const", [], outs)
    g.case("const", {}, {
        "r_int": np.arange(0, 5, 1), "r_step3": np.arange(1, 10, 3),
        "r_neg": np.arange(5, -4, -2), "r_empty": np.arange(5, 5, 1),
        "r_empty2": np.arange(3, 1, 1), "r_f": np.arange(0.5, 2, 0.25),
        "r_tenth": np.arange(0, 1, 0.1),
        "r_f32": np.arange(0, 5, 1, dtype=np.float32),
        "r_f16": np.arange(0, 2, 0.5, dtype=np.float16),
        "r_i8": np.arange(-3, 3, 2, dtype=np.int8),
        "r_u16": np.arange(0, 6, 2, dtype=np.uint16),
        "r_fi": np.arange(0.5, 4, 1.5, dtype=np.int32)})

    a = g.inp("a", "int32", [])
    b = g.inp("b", "int64", [])
    c = g.inp("c", "int16", [])
    g.func("dynamic_int", [a, b, c], [g.op("arange", [a, b, c], out="abc")])
    for s, e, st in [(0, 7, 2), (7, 0, -3), (2, 2, 5), (-5, 5, 1)]:
        g.case("dynamic_int", {"a": np.int32(s), "b": np.int64(e), "c": np.int16(st)},
               {"abc": np.arange(s, e, st)})
    g.case("dynamic_int", {"a": np.int32(0), "b": np.int64(3), "c": np.int16(0)},
           error="step is zero")
    # a length past 2^63 - 1: an error (NumPy's subtraction wraps, with an
    # overflow warning, and it returns []; tg's overflowed in int64)
    g.case("dynamic_int", {"a": np.int32(-5), "b": np.int64(2**63 - 1), "c": np.int16(1)},
           error="cannot compute the length")
    # stop - start past int64 with a length that fits: the exact elements,
    # Python's range (NumPy's subtraction wraps and it returns []), from
    # inputs and from constants (the static length too)
    a, b, c = g.inp("la", "int64", []), g.inp("lb", "int64", []), g.inp("lc", "int64", [])
    g.func("int64_ends", [a, b, c], [g.op("arange", [a, b, c], out="lab")])
    ends = [(-2**63, 2**63 - 1, 2**62), (2**63 - 1, -2**63, -2**62), (-2**63, 2**63 - 1, 3 * 2**61),
            (-2**63, 2**63 - 1, 2**63 - 1), (2**63 - 1, -2**63, -2**63)]
    for s, e, st in ends:
        g.case("int64_ends", {"la": np.int64(s), "lb": np.int64(e), "lc": np.int64(st)},
               {"lab": np.array(range(s, e, st), np.int64)})
    g.func("int64_ends_const", [], [g.op("arange", [i64(s), i64(e), i64(st)], out="lc_%d" % k)
                                    for k, (s, e, st) in enumerate(ends)])
    g.case("int64_ends_const", {}, {"lc_%d" % k: np.array(range(s, e, st), np.int64)
                                    for k, (s, e, st) in enumerate(ends)})
    # uint64 inputs past 2^63 - 1 are counted as what they are, not as the
    # negative int64 of their bits (arange(0, 2^64 - 1) gave [])
    a, b, c = g.inp("ua", "uint64", []), g.inp("ub", "uint64", []), g.inp("uc", "int64", [])
    g.func("uint64_ends", [a, b, c], [g.op("arange", [a, b, c], {"dtype": "uint64"}, out="uab")])
    for s, e, st in [(2**63, 2**63 + 2, 1), (2**64 - 1, 2**63 - 2, -2**62), (0, 2**64 - 1, 2**62)]:
        g.case("uint64_ends", {"ua": np.uint64(s), "ub": np.uint64(e), "uc": np.int64(st)},
               {"uab": np.array(range(s, e, st), np.uint64)})
    g.case("uint64_ends", {"ua": np.uint64(0), "ub": np.uint64(2**64 - 1), "uc": np.int64(1)},
           error="cannot compute the length of start 0 to stop 18446744073709551615 by step 1")

    a = g.inp("fa", "float32", [])
    b = g.inp("fb", "float64", [])
    g.func("dynamic_float", [a, b], [g.op("arange", [a, b, {"value": 0.5}], out="fab"),
                                     g.op("arange", [a, b, {"value": 1}],
                                          {"dtype": "float32"}, out="fab32")])
    for s, e in [(0.0, 3.0), (-1.25, 1.0), (2.0, 1.0)]:
        g.case("dynamic_float", {"fa": np.float32(s), "fb": np.float64(e)},
               {"fab": np.arange(s, e, 0.5),
                "fab32": np.arange(s, e, 1, dtype=np.float32)})
    # an infinite or NaN length (NumPy: "Maximum allowed size exceeded",
    # "arange: cannot compute length"; tg cast inf to int64)
    for s, e in [(0.0, np.inf), (np.nan, 1.0), (0.0, -np.inf)]:
        g.case("dynamic_float", {"fa": np.float32(s), "fb": np.float64(e)},
               error="cannot compute the length")
    # an infinite step, or a quotient that underflows to 0: one element
    # (NumPy's "underflow and divide-by-inf check"), none when the step
    # points away from stop (tg gave [] for both); the second value of a
    # one-element integer result is not formed (int64 refused inf)
    a, b, c = g.inp("ia", "float64", []), g.inp("ib", "float64", []), g.inp("ic", "float64", [])
    g.func("inf_step", [a, b, c], [g.op("arange", [a, b, c], out="iabc"),
                                   g.op("arange", [a, b, c], {"dtype": "float32"}, out="iabc32"),
                                   g.op("arange", [a, b, c], {"dtype": "int64"}, out="iabci")])
    steps = [(0.0, 1.0, np.inf), (0.0, -1.0, np.inf), (0.0, 1.0, -np.inf), (0.0, -1.0, -np.inf),
             (0.0, 1e-300, 1e300), (0.0, -1e-300, 1e300), (5.0, 5.0, np.inf), (1.5, 1e-300, -np.inf),
             (0.0, 5e-324, 1.0)]
    for s, e, st in steps:
        g.case("inf_step", {"ia": np.float64(s), "ib": np.float64(e), "ic": np.float64(st)},
               {"iabc": np.arange(s, e, st), "iabc32": np.arange(s, e, st, dtype=np.float32),
                "iabci": np.arange(s, e, st, dtype=np.int64)})
    # the same from constants (the static length too)
    g.func("inf_step_const", [], [g.op("arange", [const(np.float64(s)), const(np.float64(e)), const(np.float64(st))], out="ic_%d" % k)
                                  for k, (s, e, st) in enumerate(steps)])
    g.case("inf_step_const", {}, {"ic_%d" % k: np.arange(s, e, st)
                                  for k, (s, e, st) in enumerate(steps)})
    g.write()


def gen_eye():
    g = Graph("build_eye")
    outs = [g.op("eye", [i64(3), i64(3), i64(0)], out="e33"),
            g.op("eye", [i64(3), i64(4), i64(1)], out="e34"),
            g.op("eye", [i64(4), i64(2), i64(-1)], out="e42"),
            g.op("eye", [{"value": 2}, {"value": 3}, {"value": 5}], out="e_far"),
            g.op("eye", [i64(0), i64(2), i64(0)], out="e02")]
    for dt in DTYPES:
        outs.append(g.op("eye", [i64(2), i64(3), i64(0)], {"dtype": dt}, out="e_" + dt))
    g.func("const", [], outs)
    exp = {"e33": np.eye(3), "e34": np.eye(3, 4, 1), "e42": np.eye(4, 2, -1),
           "e_far": np.eye(2, 3, 5), "e02": np.eye(0, 2)}
    for dt in DTYPES:
        exp["e_" + dt] = np.eye(2, 3, dtype=dt)
    g.case("const", {}, exp)

    n = g.inp("n", "int64", [])
    m = g.inp("m", "int32", [])
    k = g.inp("k", "int8", [])
    g.func("dynamic", [n, m, k], [g.op("eye", [n, m, k], {"dtype": "float32"}, out="nmk")])
    for a, b, c in [(3, 5, 2), (4, 4, -3), (1, 1, 0), (0, 0, 0)]:
        g.case("dynamic", {"n": np.int64(a), "m": np.int32(b), "k": np.int8(c)},
               {"nmk": np.eye(a, b, c, dtype=np.float32)})
    g.case("dynamic", {"n": np.int64(-1), "m": np.int32(2), "k": np.int8(0)},
           error="negative dimensions are not allowed")
    # uint64 past 2^63 - 1: a diagonal past the matrix (all zeros, NumPy),
    # not the -1 of its bits; a length too large to allocate, not negative
    n, m, k = g.inp("un", "uint64", []), g.inp("um", "uint64", []), g.inp("uk", "uint64", [])
    g.func("dynamic_u64", [n, m, k], [g.op("eye", [n, m, k], out="unmk")])
    g.case("dynamic_u64", {"un": np.uint64(3), "um": np.uint64(3), "uk": np.uint64(2**64 - 1)},
           {"unmk": np.eye(3, k=np.uint64(2**64 - 1))})
    g.case("dynamic_u64", {"un": np.uint64(3), "um": np.uint64(3), "uk": np.uint64(1)},
           {"unmk": np.eye(3, k=1)})
    g.case("dynamic_u64", {"un": np.uint64(2**64 - 1), "um": np.uint64(2), "uk": np.uint64(0)},
           error="too large")
    # beside a zero too (it made an empty array of shape (0, 2^63 - 1));
    # an int64 2^63 - 1 there is too large for float64 (NumPy: "array is too
    # big") and that shape for 1-byte items (NumPy too)
    g.case("dynamic_u64", {"un": np.uint64(0), "um": np.uint64(2**64 - 1), "uk": np.uint64(0)},
           error="length %d for dimension 1 is too large" % (2**64 - 1))
    g.func("dynamic_u64_i8", [n, m, k], [g.op("eye", [n, m, k], {"dtype": "int8"}, out="unmk8")])
    g.case("dynamic_u64_i8", {"un": np.uint64(2**63), "um": np.uint64(0), "uk": np.uint64(0)},
           error="length %d for dimension 0 is too large" % 2**63)
    g.case("dynamic_u64_i8", {"un": np.uint64(0), "um": np.uint64(2**63 - 1), "uk": np.uint64(0)},
           {"unmk8": np.eye(0, 2**63 - 1, dtype=np.int8)})
    # int64 diagonals at the ends of the range: no row's i + k is in range
    n, m, k = g.inp("ln", "int64", []), g.inp("lm", "int64", []), g.inp("lk", "int64", [])
    g.func("dynamic_i64", [n, m, k], [g.op("eye", [n, m, k], out="lnmk")])
    for c in [2**63 - 1, -2**63, 2**63 - 2, -2**63 + 1, -2, 3, -4]:
        g.case("dynamic_i64", {"ln": np.int64(4), "lm": np.int64(3), "lk": np.int64(c)},
               {"lnmk": np.eye(4, 3, k=c) if abs(c) < 10 else np.zeros((4, 3))})
    g.case("dynamic_i64", {"ln": np.int64(0), "lm": np.int64(2**63 - 1), "lk": np.int64(0)},
           error="too large")
    g.write()


# ---------------------------------------------------------------- repeat
def gen_repeat():
    g = Graph("build_repeat")
    x = g.inp("a", "float64", [2, 3])
    r = g.inp("ar", "int64", [None])
    g.func("vector", [x, r], [g.op("repeat", [x, r], {"axis": 1}, out="a_1"),
                              g.op("repeat", [x, r], {"axis": None}, out="a_flat")])
    a = rand("float64", (2, 3))
    rr = np.array([2, 0, 1], np.int64)
    g.case("vector", {"a": a, "ar": rr},
           error="operands could not be broadcast together with shape (6,) (3,)")
    rr = np.array([2], np.int64)
    g.case("vector", {"a": a, "ar": rr},
           {"a_1": np.repeat(a, rr, 1), "a_flat": np.repeat(a, rr)})

    g.func("axis1", [x, r], [g.op("repeat", [x, r], {"axis": -1}, out="b_1")])
    for rr in [np.array([2, 0, 1], np.int64), np.array([0, 0, 0], np.int64)]:
        g.case("axis1", {"a": a, "ar": rr}, {"b_1": np.repeat(a, rr, 1)})
    g.case("axis1", {"a": a, "ar": np.array([1, -1, 1], np.int64)},
           error="repeats may not contain negative values")
    # (NumPy raises too: an output of 3 * 2^62 elements)
    g.case("axis1", {"a": a, "ar": np.array([2 ** 62] * 3, np.int64)},
           error="the repeats make more than 2^63 - 1 elements")

    g.func("const", [x], [g.op("repeat", [x, {"value": 2}], None, out="c_null"),
                          g.op("repeat", [x, {"value": 3}], {"axis": 0}, out="c_0"),
                          g.op("repeat", [x, vec(1, 2)], {"axis": 0}, out="c_v")])
    g.case("const", {"a": a}, {"c_null": np.repeat(a, 2), "c_0": np.repeat(a, 3, 0),
                               "c_v": np.repeat(a, [1, 2], 0)})

    for k, dt in enumerate(DTYPES):
        x = g.inp("d%d" % k, dt, [None])
        f = "dtype_%s" % dt
        g.func(f, [x], [g.op("repeat", [x, const(np.array([1, 0, 3], np.int32))],
                             {"axis": 0}, out="dr%d" % k),
                        g.op("repeat", [x, {"value": 2}], None, out="ds%d" % k)])
        d = rand(dt, (3,))
        g.case(f, {"d%d" % k: d}, {"dr%d" % k: np.repeat(d, [1, 0, 3]),
                                   "ds%d" % k: np.repeat(d, 2)})

    x = g.inp("n", "int32", [2, 3])
    t = g.op("transpose", [x], {"axes": None})
    g.func("noncontig", [x], [g.op("repeat", [t, {"value": 2}], {"axis": 1}, out="n_1"),
                              g.op("repeat", [t, {"value": 2}], None, out="n_null")])
    n_ = rand("int32", (2, 3))
    g.case("noncontig", {"n": n_}, {"n_1": np.repeat(n_.T, 2, 1),
                                    "n_null": np.repeat(n_.T, 2)})
    x = g.inp("s", "uint8", [])
    g.func("scalar", [x], [g.op("repeat", [x, {"value": 3}], None, out="s_r")])
    g.case("scalar", {"s": np.uint8(9)}, {"s_r": np.repeat(np.uint8(9), 3)})
    g.write()


def gen_take_add_mixed():
    """take_add where y's dtype is wider than x's: np.add.at adds in the
    promoted dtype and rounds once into x's, repeated indices one after
    another (y cast to x's first rounded twice)."""
    g = Graph("build_take_add_mixed")
    cases = [("h", "float16", "int16", [0.5, 1.0, -3.0], [2049, 1, 2047, 5]),
             ("f", "float32", "float64", [1.0, 1.0, 3.0], [2.0**-24 + 2.0**-48, 2.0**-25, -1e-9, 2.0**-24]),
             ("w", "int8", "uint8", [100, -128, 5], [200, 255, 0, 7])]
    idx = np.array([0, 0, 2, 1], np.int64)
    for key, xt, yt, xv, yv in cases:
        x = g.inp(key, xt, [3])
        y = g.inp(key + "_y", yt, [4])
        i = g.inp(key + "_i", "int64", [4])
        g.func(key, [x, y, i], [g.op("take_add", [x, y, i], {"axis": 0}, out=key + "_r")])
        a, b = np.array(xv, xt), np.array(yv, yt)
        r = a.copy()
        np.add.at(r, idx, b)
        g.case(key, {key: a, key + "_y": b, key + "_i": idx}, {key + "_r": r}, rtol=0, atol=0)
    x = g.inp("m", "float16", [2, 3])
    y = g.inp("m_y", "float32", [2, 3])
    i = g.inp("m_i", "int64", [3])
    g.func("m", [x, y, i], [g.op("take_add", [x, y, i], {"axis": 1}, out="m_r")])
    a = np.array([[0.5, 2.0, 4.0], [1.0, 8.0, -2.0]], np.float16)
    b = np.array([[2049, 1, 2047], [0.25, 3.5, 1e-4]], np.float32)
    mi = np.array([2, 0, 2], np.int64)
    r = a.copy()
    for row in range(2):
        np.add.at(r[row], mi, b[row])
    g.case("m", {"m": a, "m_y": b, "m_i": mi}, {"m_r": r}, rtol=0, atol=0)
    g.write()


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    gen_take()
    gen_take_setadd("take_set")
    gen_take_setadd("take_add")
    gen_join()
    gen_stack()
    gen_split()
    gen_alloc()
    gen_like()
    gen_arange()
    gen_eye()
    gen_repeat()
    gen_take_add_mixed()
