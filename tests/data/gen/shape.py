#!/usr/bin/python3
"""Writes tests/data/ops/shape_*.json: the shape family (shape, shape_i,
reshape, flatten, dimshuffle, transpose, squeeze, expand_dims, subtensor,
set_subtensor, inc_subtensor), with expectations computed by NumPy.

Run with Debian's python (it has numpy): /usr/bin/python3 tests/data/gen/shape.py
Deterministic: fixed seeds, so re-running rewrites the same files.
Load-time errors (bad attrs, static index out of range...) are tested in
tests/unit/test_shape.c, since a file that fails to load has no cases.
"""
import os

import numpy as np

from common import OUT, Graph, const, rand_from, unknown, vec
from common import flat_value as value



rng = np.random.default_rng(20240601)
rand = rand_from(rng)


# ---------------------------------------------------------------- shape
def gen_shape():
    g = Graph("shape_shape")
    x = g.inp("b", "bool", [2, 3])
    g.func("static", [x], [g.op("shape", [x], out="b_shape"),
                           g.op("shape_i", [x], {"i": 0}, out="b_i0"),
                           g.op("shape_i", [x], {"i": -1}, out="b_im1")])
    a = rand("bool", (2, 3))
    g.case("static", {"b": a}, {"b_shape": np.array(a.shape, np.int64),
                                "b_i0": np.int64(2), "b_im1": np.int64(3)})

    x = g.inp("u", "float32", unknown(3))
    g.func("unknown", [x], [g.op("shape", [x], out="u_shape"),
                            g.op("shape_i", [x], {"i": 1}, out="u_i1"),
                            g.op("shape_i", [x], {"i": -3}, out="u_im3")])
    for shp in [(4, 0, 2), (1, 5, 3)]:
        a = rand("float32", shp)
        g.case("unknown", {"u": a}, {"u_shape": np.array(shp, np.int64),
                                     "u_i1": np.int64(shp[1]),
                                     "u_im3": np.int64(shp[0])})

    x = g.inp("s", "float64", [])
    g.func("scalar", [x], [g.op("shape", [x], out="s_shape")])
    g.case("scalar", {"s": np.float64(2.5)}, {"s_shape": np.zeros(0, np.int64)})

    x = g.inp("v", "int16", [3, 4])
    t = g.op("transpose", [x], {"axes": None})
    st = g.op("subtensor", [t], {"index": [{"step": 3}]})
    g.func("views", [x], [g.op("shape", [t], out="v_tshape"),
                          g.op("shape_i", [st], {"i": 0}, out="v_st0"),
                          g.op("shape", [st], out="v_stshape")])
    a = rand("int16", (3, 4))
    g.case("views", {"v": a}, {"v_tshape": np.array([4, 3], np.int64),
                               "v_st0": np.int64(2),
                               "v_stshape": np.array([2, 3], np.int64)})
    g.write()


# ---------------------------------------------------------------- reshape
def gen_reshape():
    g = Graph("shape_reshape")
    x = g.inp("a", "float64", [2, 6])
    outs = [g.op("reshape", [x, vec(3, -1)], out="a_3m1"),
            g.op("reshape", [x, vec(-1)], out="a_flat"),
            g.op("reshape", [x, vec(2, 3, 2)], out="a_232"),
            g.op("reshape", [x, const(np.array([1, 12, 1], np.int32))], out="a_i32"),
            g.op("reshape", [x, vec(12, 1, -1)], out="a_121")]
    g.func("const", [x], outs)
    a = rand("float64", (2, 6))
    g.case("const", {"a": a}, {"a_3m1": a.reshape(3, -1), "a_flat": a.reshape(-1),
                               "a_232": a.reshape(2, 3, 2),
                               "a_i32": a.reshape(1, 12, 1),
                               "a_121": a.reshape(12, 1, -1)})

    x = g.inp("b", "int8", unknown(2))
    g.func("unknown_in", [x], [g.op("reshape", [x, vec(-1, 2)], out="b_m12")])
    a = rand("int8", (3, 4))
    g.case("unknown_in", {"b": a}, {"b_m12": a.reshape(-1, 2)})
    g.case("unknown_in", {"b": rand("int8", (3, 3))},
           error="cannot reshape array of size 9 into shape")
    g.case("unknown_in", {"b": rand("int8", (0, 5))},
           {"b_m12": np.zeros((0, 2), np.int8)})

    x = g.inp("c", "float16", [None])
    s = g.inp("c_shp", "int64", [2])
    g.func("dynamic", [x, s], [g.op("reshape", [x, s], out="c_r")])
    a = rand("float16", (12,))
    for shp in [(3, 4), (-1, 6), (12, -1), (1, 12)]:
        g.case("dynamic", {"c": a, "c_shp": np.array(shp, np.int64)},
               {"c_r": a.reshape(shp)})
    g.case("dynamic", {"c": a, "c_shp": np.array([5, 5], np.int64)},
           error="cannot reshape array of size 12 into shape")
    g.case("dynamic", {"c": a, "c_shp": np.array([-1, -1], np.int64)},
           error="can only specify one unknown dimension")
    # a uint64 length past 2^63 - 1 is too long, not the -1 of its bits
    # (which reshaped to the inferred (12,) or (3, 4))
    s = g.inp("u_shp", "uint64", [2])
    g.func("dynamic_u64", [x, s], [g.op("reshape", [x, s], out="u_r")])
    g.case("dynamic_u64", {"c": a, "u_shp": np.array([3, 4], np.uint64)}, {"u_r": a.reshape(3, 4)})
    # (NumPy: "Maximum allowed dimension exceeded"; tg named the length
    # 2^63 - 1 it counted)
    for shp in [(3, 2**64 - 1), (2**64 - 1, 1)]:
        g.case("dynamic_u64", {"c": a, "u_shp": np.array(shp, np.uint64)},
               error="is %d: too large (more than 2^63 - 1)" % (2**64 - 1))
    # ... even beside a zero, where the length counted as 2^63 - 1 made an
    # empty array of shape (0, 2^63 - 1); an int64 2^63 - 1 there is that
    # shape for 1-byte items (NumPy too), too large for wider ones (NumPy:
    # "array is too big"; tg's strides overflowed when the result's buffer
    # was reused)
    k = g.inp("k", "int8", [None])
    g.func("empty_u64_i8", [k, s], [g.op("reshape", [k, s], out="k_r")])
    for shp in [(0, 2**64 - 1), (2**63, 0)]:
        g.case("empty_u64_i8", {"k": np.zeros(0, np.int8), "u_shp": np.array(shp, np.uint64)},
               error="is %d: too large (more than 2^63 - 1)" % shp[shp[0] == 0])
    g.case("empty_u64_i8", {"k": np.zeros(0, np.int8), "u_shp": np.array([0, 2**63 - 1], np.uint64)},
           {"k_r": np.zeros(0, np.int8).reshape(0, 2**63 - 1)})
    g.case("dynamic", {"c": np.zeros(0, np.float16), "c_shp": np.array([0, 2**63 - 1], np.int64)},
           error="too large")
    g.case("dynamic", {"c": a, "c_shp": np.array([-3, -4], np.int64)},
           error="only -1 (once) may be negative")
    g.case("dynamic", {"c": rand("float16", (0,)), "c_shp": np.array([-1, 0], np.int64)},
           error="cannot reshape array of size 0 into shape")

    x = g.inp("d", "uint16", [None])
    s = g.inp("d_shp", "int32", [3])
    g.func("dynamic_i32", [x, s], [g.op("reshape", [x, s], out="d_r")])
    a = rand("uint16", (24,))
    g.case("dynamic_i32", {"d": a, "d_shp": np.array([2, -1, 3], np.int32)},
           {"d_r": a.reshape(2, -1, 3)})

    # Non-contiguous inputs: the transpose needs a copy; a strided slice
    # split along its first axis stays a view in NumPy (either way the
    # values must match).
    x = g.inp("e", "float32", [4, 6])
    t = g.op("transpose", [x], {"axes": None})
    st = g.op("subtensor", [x], {"index": [{}, {"step": 2}]})
    rv = g.op("subtensor", [x], {"index": [{"step": -1}, {"start": 5, "step": -2}]})
    g.func("noncontig", [x], [
        g.op("reshape", [t, vec(-1)], out="e_t_flat"),
        g.op("reshape", [t, vec(3, 8)], out="e_t_38"),
        g.op("reshape", [st, vec(2, 2, 3)], out="e_st_223"),
        g.op("reshape", [st, vec(12)], out="e_st_12"),
        g.op("reshape", [rv, vec(2, 6)], out="e_rv_26"),
        g.op("reshape", [rv, vec(4, 3, 1)], out="e_rv_431")])
    a = rand("float32", (4, 6))
    g.case("noncontig", {"e": a}, {
        "e_t_flat": a.T.reshape(-1), "e_t_38": a.T.reshape(3, 8),
        "e_st_223": a[:, ::2].reshape(2, 2, 3), "e_st_12": a[:, ::2].reshape(12),
        "e_rv_26": a[::-1, 5::-2].reshape(2, 6),
        "e_rv_431": a[::-1, 5::-2].reshape(4, 3, 1)})

    x = g.inp("f", "bool", [])
    y = g.inp("f1", "bool", [1, 1])
    g.func("scalars", [x, y], [
        g.op("reshape", [x, vec(1, 1)], out="f_11"),
        g.op("reshape", [y, const(np.zeros(0, np.int64))], out="f1_0d"),
        g.op("reshape", [x, vec(-1)], out="f_m1")])
    g.case("scalars", {"f": np.bool_(True), "f1": np.array([[False]])},
           {"f_11": np.ones((1, 1), bool), "f1_0d": np.bool_(False),
            "f_m1": np.ones(1, bool)})

    x = g.inp("h", "uint64", [0, 3])
    g.func("empty", [x], [g.op("reshape", [x, vec(3, 0)], out="h_30"),
                          g.op("reshape", [x, vec(-1, 3)], out="h_m13")])
    g.case("empty", {"h": np.zeros((0, 3), np.uint64)},
           {"h_30": np.zeros((3, 0), np.uint64), "h_m13": np.zeros((0, 3), np.uint64)})
    g.write()


# ---------------------------------------------------------------- flatten
def gen_flatten():
    g = Graph("shape_flatten")
    x = g.inp("a", "float64", [2, 3, 4])
    g.func("static", [x], [g.op("flatten", [x], out="a_1"),
                           g.op("flatten", [x], {"ndim": 2}, out="a_2"),
                           g.op("flatten", [x], {"ndim": 3}, out="a_3")])
    a = rand("float64", (2, 3, 4))
    g.case("static", {"a": a}, {"a_1": a.reshape(-1), "a_2": a.reshape(2, -1),
                                "a_3": a})

    x = g.inp("s", "int32", [])
    g.func("scalar", [x], [g.op("flatten", [x], {"ndim": 1}, out="s_1")])
    g.case("scalar", {"s": np.int32(-7)}, {"s_1": np.array([-7], np.int32)})

    x = g.inp("u", "uint8", unknown(3))
    t = g.op("transpose", [x], {"axes": [1, 2, 0]})
    g.func("noncontig", [x], [g.op("flatten", [t], {"ndim": 2}, out="u_t2"),
                              g.op("flatten", [t], out="u_t1")])
    a = rand("uint8", (2, 3, 4))
    g.case("noncontig", {"u": a}, {"u_t2": a.transpose(1, 2, 0).reshape(3, -1),
                                   "u_t1": a.transpose(1, 2, 0).reshape(-1)})
    g.case("noncontig", {"u": np.zeros((2, 0, 3), np.uint8)},
           {"u_t2": np.zeros((0, 6), np.uint8), "u_t1": np.zeros(0, np.uint8)})

    x = g.inp("e", "float16", [2, 0, 3])
    g.func("empty", [x], [g.op("flatten", [x], {"ndim": 2}, out="e_2")])
    g.case("empty", {"e": np.zeros((2, 0, 3), np.float16)},
           {"e_2": np.zeros((2, 0), np.float16)})
    g.write()


# ---------------------------------------------------------------- dimshuffle
def gen_dimshuffle():
    g = Graph("shape_dimshuffle")
    x = g.inp("a", "float32", [2, 3])
    g.func("basic", [x], [g.op("dimshuffle", [x], {"order": [1, 0]}, out="a_10"),
                          g.op("dimshuffle", [x], {"order": ["x", 0, "x", 1]}, out="a_x0x1"),
                          g.op("dimshuffle", [x], {"order": [1, "x", 0]}, out="a_1x0"),
                          g.op("dimshuffle", [x], {"order": [0, 1, "x"]}, out="a_01x")])
    a = rand("float32", (2, 3))
    g.case("basic", {"a": a}, {"a_10": a.T, "a_x0x1": a[None, :, None, :],
                               "a_1x0": a.T[:, None, :], "a_01x": a[:, :, None]})

    x = g.inp("b", "int64", [1, 3, 1])
    g.func("drop", [x], [g.op("dimshuffle", [x], {"order": [1]}, out="b_1"),
                         g.op("dimshuffle", [x], {"order": ["x", 1, "x"]}, out="b_x1x"),
                         g.op("dimshuffle", [x], {"order": [2, 1]}, out="b_21")])
    a = rand("int64", (1, 3, 1))
    g.case("drop", {"b": a}, {"b_1": a[0, :, 0], "b_x1x": a[0, :, 0][None, :, None],
                              "b_21": a[0, :, :].T})

    x = g.inp("c", "bool", [None, 3])
    g.func("drop_dynamic", [x], [g.op("dimshuffle", [x], {"order": [1, "x"]}, out="c_1x")])
    a = rand("bool", (1, 3))
    g.case("drop_dynamic", {"c": a}, {"c_1x": a[0][:, None]})
    g.case("drop_dynamic", {"c": rand("bool", (2, 3))}, error="drops axis 0")

    x = g.inp("s", "float16", [])
    g.func("scalar", [x], [g.op("dimshuffle", [x], {"order": ["x", "x"]}, out="s_xx"),
                           g.op("dimshuffle", [x], {"order": []}, out="s_id")])
    g.case("scalar", {"s": np.float16(1.5)}, {"s_xx": np.full((1, 1), 1.5, np.float16),
                                              "s_id": np.float16(1.5)})

    x = g.inp("d", "uint32", [2, 3, 4])
    st = g.op("subtensor", [x], {"index": [{"step": -1}, {"start": 1}]})
    g.func("noncontig", [x], [g.op("dimshuffle", [st], {"order": [2, "x", 0, 1]}, out="d_st")])
    a = rand("uint32", (2, 3, 4))
    g.case("noncontig", {"d": a}, {"d_st": a[::-1, 1:].transpose(2, 0, 1)[:, None]})
    g.write()


# ---------------------------------------------------------------- transpose
def gen_transpose():
    g = Graph("shape_transpose")
    x = g.inp("a", "float64", [2, 3, 4])
    g.func("f64", [x], [g.op("transpose", [x], out="a_default"),
                        g.op("transpose", [x], {"axes": None}, out="a_null"),
                        g.op("transpose", [x], {"axes": [1, 0, 2]}, out="a_102"),
                        g.op("transpose", [x], {"axes": [-1, 0, -2]}, out="a_neg"),
                        g.op("transpose", [x], {"axes": [0, 1, 2]}, out="a_id")])
    a = rand("float64", (2, 3, 4))
    a[0, 0, 0], a[1, 2, 3], a[0, 1, 2] = np.nan, np.inf, -np.inf
    g.case("f64", {"a": a}, {"a_default": a.T, "a_null": a.T,
                             "a_102": a.transpose(1, 0, 2),
                             "a_neg": a.transpose(-1, 0, -2), "a_id": a})

    for dt in ["bool", "uint32", "float16", "int8"]:
        x = g.inp("m_" + dt, dt, [None, None])
        g.func("m_" + dt, [x], [g.op("transpose", [x], out="mt_" + dt)])
        a = rand(dt, (3, 5))
        g.case("m_" + dt, {"m_" + dt: a}, {"mt_" + dt: a.T})

    x = g.inp("s", "int64", [])
    v = g.inp("v", "float32", [5])
    g.func("small", [x, v], [g.op("transpose", [x], out="s_t"),
                             g.op("transpose", [v], {"axes": [-1]}, out="v_t")])
    b = rand("float32", (5,))
    g.case("small", {"s": np.int64(9), "v": b}, {"s_t": np.int64(9), "v_t": b})

    # transpose of a transpose of a slice
    x = g.inp("n", "float32", [4, 5, 6])
    st = g.op("subtensor", [x], {"index": [{"start": 1, "step": 2}, 2]})
    t1 = g.op("transpose", [x], {"axes": [2, 0, 1]})
    g.func("chain", [x], [g.op("transpose", [st], out="n_st_t"),
                          g.op("transpose", [t1], {"axes": [1, 2, 0]}, out="n_tt")])
    a = rand("float32", (4, 5, 6))
    g.case("chain", {"n": a}, {"n_st_t": a[1::2, 2].T, "n_tt": a})
    g.write()


# ---------------------------------------------------------------- squeeze
def gen_squeeze():
    g = Graph("shape_squeeze")
    x = g.inp("a", "float32", [1, 3, 1])
    g.func("static", [x], [g.op("squeeze", [x], out="a_all"),
                           g.op("squeeze", [x], {"axis": 0}, out="a_0"),
                           g.op("squeeze", [x], {"axis": [0, -1]}, out="a_0m1"),
                           g.op("squeeze", [x], {"axis": -1}, out="a_m1")])
    a = rand("float32", (1, 3, 1))
    g.case("static", {"a": a}, {"a_all": a.squeeze(), "a_0": a.squeeze(0),
                                "a_0m1": a.squeeze((0, -1)), "a_m1": a.squeeze(-1)})

    # axis null squeezes only axes of static length 1: the unknown axis stays.
    x = g.inp("b", "int32", [None, 1])
    g.func("null_static", [x], [g.op("squeeze", [x], {"axis": None}, out="b_null")])
    a = rand("int32", (1, 1))
    g.case("null_static", {"b": a}, {"b_null": a.reshape(1)})

    x = g.inp("c", "bool", [None, 3])
    g.func("dynamic", [x], [g.op("squeeze", [x], {"axis": 0}, out="c_0")])
    a = rand("bool", (1, 3))
    g.case("dynamic", {"c": a}, {"c_0": a[0]})
    g.case("dynamic", {"c": rand("bool", (2, 3))},
           error="cannot select an axis to squeeze out which has size not equal to one")

    x = g.inp("d", "float64", [3, 4])
    st = g.op("subtensor", [x], {"index": [{"start": 1, "stop": 2}, {"step": -2}]})
    g.func("noncontig", [x], [g.op("squeeze", [st], out="d_sq"),
                              g.op("squeeze", [g.op("dimshuffle", [x], {"order": ["x", 1, "x", 0]})],
                                   {"axis": [0, 2]}, out="d_dsq")])
    a = rand("float64", (3, 4))
    g.case("noncontig", {"d": a}, {"d_sq": a[1:2, ::-2].squeeze(0), "d_dsq": a.T})

    x = g.inp("e", "uint8", [1])
    g.func("to_scalar", [x], [g.op("squeeze", [x], out="e_s")])
    g.case("to_scalar", {"e": np.array([42], np.uint8)}, {"e_s": np.uint8(42)})
    g.write()


# ---------------------------------------------------------------- expand_dims
def gen_expand_dims():
    g = Graph("shape_expand_dims")
    x = g.inp("a", "float16", [2, 3])
    g.func("basic", [x], [g.op("expand_dims", [x], {"axis": 0}, out="a_0"),
                          g.op("expand_dims", [x], {"axis": -1}, out="a_m1"),
                          g.op("expand_dims", [x], {"axis": [0, 2]}, out="a_02"),
                          g.op("expand_dims", [x], {"axis": [-1, -2]}, out="a_m1m2"),
                          g.op("expand_dims", [x], {"axis": 1}, out="a_1")])
    a = rand("float16", (2, 3))
    g.case("basic", {"a": a}, {"a_0": np.expand_dims(a, 0), "a_m1": np.expand_dims(a, -1),
                               "a_02": np.expand_dims(a, (0, 2)),
                               "a_m1m2": np.expand_dims(a, (-1, -2)),
                               "a_1": np.expand_dims(a, 1)})

    x = g.inp("s", "bool", [])
    g.func("scalar", [x], [g.op("expand_dims", [x], {"axis": 0}, out="s_0"),
                           g.op("expand_dims", [x], {"axis": [0, 1]}, out="s_01")])
    g.case("scalar", {"s": np.bool_(True)}, {"s_0": np.array([True]),
                                             "s_01": np.array([[True]])})

    x = g.inp("n", "int16", [None, None])
    t = g.op("transpose", [x])
    g.func("noncontig", [x], [g.op("expand_dims", [t], {"axis": 1}, out="n_t1")])
    a = rand("int16", (3, 4))
    g.case("noncontig", {"n": a}, {"n_t1": np.expand_dims(a.T, 1)})
    g.case("noncontig", {"n": np.zeros((0, 2), np.int16)},
           {"n_t1": np.zeros((2, 1, 0), np.int16)})
    g.write()


# ---------------------------------------------------------------- subtensor
def sl(start=None, stop=None, step=None):
    return slice(start, stop, step)


def jindex(idx):
    """A NumPy index tuple -> the attr; strings stay ("$k")."""
    out = []
    for e in idx:
        if isinstance(e, slice):
            d = {}
            for k in ("start", "stop", "step"):
                v = getattr(e, k)
                if v is not None:
                    d[k] = v
            out.append(d)
        else:
            out.append(e)
    return out


def gen_subtensor():
    g = Graph("shape_subtensor")
    x = g.inp("a", "float64", [5, 6])
    a = rand("float64", (5, 6))
    indices = [(2,), (-1,), (sl(1, 4),), (sl(None, None, -1),), (sl(-2),),
               (sl(), sl(4, 0, -2)), (sl(10),), (1, sl(None, None, 3)),
               (sl(None, -10),), (sl(-100, 100, 2),), (1, 2), (-5, -6),
               (sl(None, None, -2), -1), (sl(3, 1),), (sl(-1, -6, -1), sl(5, None, -4)),
               (sl(None, 2, 7),), (),
               # steps and bounds at the ends of int64: one element or
               # none, and no overflow (-2**63 is a value, not "absent")
               (sl(None, None, 2**63 - 1),), (sl(None, None, -2**63), sl(4, None, -2**62)),
               (sl(-2**63, None, -1),), (sl(None, -2**63),), (sl(-2**63, 2**63 - 1, 2**63 - 1), sl(None, None, -2**63))]
    outs, want = [], {}
    for k, idx in enumerate(indices):
        o = g.op("subtensor", [x], {"index": jindex(idx)}, out="a_%d" % k)
        outs.append(o)
        want[o] = a[idx]
    # Explicit nulls and all three keys.
    o = g.op("subtensor", [x], {"index": [{"start": None, "stop": 3, "step": None}]}, out="a_nulls")
    outs.append(o)
    want[o] = a[:3]
    g.func("static", [x], outs)
    g.case("static", {"a": a}, want)

    # Unknown lengths: the same indices work at run time.
    x = g.inp("u", "int32", unknown(2))
    outs = [g.op("subtensor", [x], {"index": jindex((-1, sl(None, None, -2)))}, out="u_0"),
            g.op("subtensor", [x], {"index": [{"start": 1, "stop": -1}]}, out="u_1"),
            g.op("subtensor", [x], {"index": [{}, 0]}, out="u_2")]
    g.func("unknown", [x], outs)
    for shp in [(3, 4), (1, 7)]:
        a = rand("int32", shp)
        g.case("unknown", {"u": a}, {"u_0": a[-1, ::-2], "u_1": a[1:-1], "u_2": a[:, 0]})
    g.case("unknown", {"u": rand("int32", (0, 2))}, error="index -1 is out of bounds for axis 0 with size 0")

    # Dynamic indices: "$k" extra inputs, of any integer dtype.
    x = g.inp("d", "float32", unknown(2))
    i = g.inp("i", "int64", [])
    j = g.inp("j", "int32", [])
    s = g.inp("st", "int8", [])
    outs = [g.op("subtensor", [x, i], {"index": ["$0"]}, out="d_i"),
            g.op("subtensor", [x, i, j], {"index": ["$0", {"start": "$1"}]}, out="d_ij"),
            g.op("subtensor", [x, j, s], {"index": [{"stop": "$0", "step": "$1"}, {"step": "$1"}]},
                 out="d_js"),
            g.op("subtensor", [x, j, i], {"index": [{"start": "$1", "stop": "$0"}]}, out="d_ji")]
    g.func("dynamic", [x, i, j, s], outs)
    a = rand("float32", (3, 4))
    for (iv, jv, sv) in [(1, 2, 1), (-1, -3, -1), (0, 0, 2), (2, 10, -2), (-3, -10, 3)]:
        g.case("dynamic", {"d": a, "i": np.int64(iv), "j": np.int32(jv), "st": np.int8(sv)},
               {"d_i": a[iv], "d_ij": a[iv, jv:], "d_js": a[:jv:sv, ::sv], "d_ji": a[iv:jv]})
    g.case("dynamic", {"d": a, "i": np.int64(5), "j": np.int32(0), "st": np.int8(1)},
           error="index 5 is out of bounds for axis 0 with size 3")
    g.case("dynamic", {"d": a, "i": np.int64(-4), "j": np.int32(0), "st": np.int8(1)},
           error="index -4 is out of bounds for axis 0 with size 3")
    g.case("dynamic", {"d": a, "i": np.int64(0), "j": np.int32(0), "st": np.int8(0)},
           error="slice step cannot be zero")

    # One extra input used twice; a weak inline scalar and a strong uint8
    # constant as extra inputs.
    x = g.inp("w", "uint16", [4, 4])
    k = g.inp("k", "uint8", [])
    outs = [g.op("subtensor", [x, k], {"index": ["$0", "$0"]}, out="w_diag"),
            g.op("subtensor", [x, {"value": 1}], {"index": [{"start": "$0"}, "$0"]}, out="w_weak"),
            g.op("subtensor", [x, const(np.uint8(3))], {"index": [{"stop": "$0"}]}, out="w_const")]
    g.func("reuse", [x, k], outs)
    a = rand("uint16", (4, 4))
    g.case("reuse", {"w": a, "k": np.uint8(2)},
           {"w_diag": a[2, 2], "w_weak": a[1:, 1], "w_const": a[:3]})

    # uint64 indices past 2**63 - 1: out of bounds as an index, past the
    # end as a slice bound (NumPy clamps a bound), one element as a step;
    # never the negative int64 of their bits (2**64 - 1 had read as -1).
    x = g.inp("v", "float64", [None])
    iu = g.inp("iu", "uint64", [])
    g.func("u64_index", [x, iu], [g.op("subtensor", [x, iu], {"index": ["$0"]}, out="v_i")])
    a = rand("float64", (3,))
    g.case("u64_index", {"v": a, "iu": np.uint64(2)}, {"v_i": a[2]})
    for big in [2**63, 2**64 - 1]:
        g.case("u64_index", {"v": a, "iu": np.uint64(big)},
               error="index %d is out of bounds for axis 0 with size 3" % big)
    outs = [g.op("subtensor", [x, iu], {"index": [{"start": "$0"}]}, out="v_start"),
            g.op("subtensor", [x, iu], {"index": [{"stop": "$0"}]}, out="v_stop"),
            g.op("subtensor", [x, iu], {"index": [{"step": "$0"}]}, out="v_step"),
            g.op("subtensor", [x, iu], {"index": [{"start": "$0", "step": -1}]}, out="v_rev")]
    g.func("u64_slice", [x, iu], outs)
    for v in [1, 2**63 - 1, 2**63, 2**64 - 1]:
        g.case("u64_slice", {"v": a, "iu": np.uint64(v)},
               {"v_start": a[v:], "v_stop": a[:v], "v_step": a[::v], "v_rev": a[v::-1]})
    # The same as constants, where the static shape comes from them.
    x = g.inp("vc", "float64", [3])
    outs = [g.op("subtensor", [x, const(np.uint64(2**63))], {"index": [{"start": "$0"}]}, out="vc_start"),
            g.op("subtensor", [x, const(np.uint64(2**64 - 1))], {"index": [{"stop": "$0"}]}, out="vc_stop"),
            g.op("subtensor", [x, const(np.uint64(2**64 - 1))], {"index": [{"start": "$0", "step": -1}]},
                 out="vc_rev")]
    g.func("u64_const", [x], outs)
    g.case("u64_const", {"vc": a}, {"vc_start": a[2**63:], "vc_stop": a[:2**64 - 1], "vc_rev": a[2**64 - 1::-1]})

    # Every dtype class.
    for dt in ["bool", "int64", "uint64", "float16"]:
        x = g.inp("t_" + dt, dt, [3, None, 2])
        o = g.op("subtensor", [x], {"index": [{"step": 2}, -1]}, out="to_" + dt)
        g.func("t_" + dt, [x], [o])
        a = rand(dt, (3, 4, 2))
        g.case("t_" + dt, {"t_" + dt: a}, {"to_" + dt: a[::2, -1]})

    # 0-d input with an empty index.
    x = g.inp("z", "float64", [])
    g.func("scalar", [x], [g.op("subtensor", [x], {"index": []}, out="z_s")])
    g.case("scalar", {"z": np.float64(3.25)}, {"z_s": np.float64(3.25)})

    # Chains of views: transpose of subtensor of reshape, and back.
    x = g.inp("c", "int16", [24])
    r = g.op("reshape", [x, vec(2, 3, 4)])
    s1 = g.op("subtensor", [r], {"index": [{"step": -1}, {"start": 1}]})
    t = g.op("transpose", [s1], {"axes": [2, 0, 1]})
    s2 = g.op("subtensor", [t], {"index": [{"start": 3, "stop": 0, "step": -2}, 1]})
    g.func("chain", [x], [g.op("dimshuffle", [t], {"order": [0, 2, 1]}, out="c_t"),
                          g.op("subtensor", [s2], {"index": []}, out="c_s2"),
                          g.op("flatten", [t], out="c_flat")])
    a = rand("int16", (24,))
    tt = a.reshape(2, 3, 4)[::-1, 1:].transpose(2, 0, 1)
    g.case("chain", {"c": a}, {"c_t": tt.transpose(0, 2, 1), "c_s2": tt[3:0:-2, 1],
                               "c_flat": tt.reshape(-1)})
    g.write()


# ---------------------------------------------------------------- set/inc
def gen_setinc(opname):
    inc = opname == "inc_subtensor"
    g = Graph("shape_" + opname)

    def apply(a, idx, y):
        r = a.copy()
        if inc:
            r[idx] += np.asarray(y).astype(a.dtype)
        else:
            r[idx] = y
        return r

    x = g.inp("a", "float64", [4, 5])
    ys = g.inp("ys", "float64", [])
    yr = g.inp("yr", "float64", [5])
    yc = g.inp("yc", "float64", [2, 1])
    yl = g.inp("yl", "float64", [1, 5])
    outs = [g.op(opname, [x, ys], {"index": [1]}, out="a_row_s"),
            g.op(opname, [x, yr], {"index": [{"step": 2}]}, out="a_rows_r"),
            g.op(opname, [x, yc], {"index": [{"start": 3, "stop": 0, "step": -2}]}, out="a_c"),
            g.op(opname, [x, yl], {"index": [-1]}, out="a_lead1"),
            g.op(opname, [x, ys], {"index": [{"start": 4}]}, out="a_empty"),
            g.op(opname, [x, yr], {"index": []}, out="a_all")]
    g.func("f64", [x, ys, yr, yc, yl], outs)
    a = rand("float64", (4, 5))
    vs, vr, vc, vl = np.float64(2.5), rand("float64", (5,)), rand("float64", (2, 1)), rand("float64", (1, 5))
    g.case("f64", {"a": a, "ys": vs, "yr": vr, "yc": vc, "yl": vl},
           {"a_row_s": apply(a, (1,), vs), "a_rows_r": apply(a, (slice(None, None, 2),), vr),
            "a_c": apply(a, (slice(3, 0, -2),), vc), "a_lead1": apply(a, (-1,), vl[0]),
            "a_empty": a, "a_all": apply(a, (), vr)})

    # Weak inline y takes x's dtype; strong y of another dtype is cast.
    x = g.inp("b", "int16", [3, 3])
    y32 = g.inp("b_y32", "int32", [3])
    yb = g.inp("b_yb", "bool", [])
    outs = [g.op(opname, [x, {"value": 7}], {"index": [{}, 1]}, out="b_weak"),
            g.op(opname, [x, y32], {"index": [0]}, out="b_i32"),
            g.op(opname, [x, yb], {"index": [{"start": 1}, {"start": 1}]}, out="b_bool")]
    g.func("casts", [x, y32, yb], outs)
    a = rand("int16", (3, 3))
    v32, vb = np.array([1000, -5, 3], np.int32), np.bool_(True)
    g.case("casts", {"b": a, "b_y32": v32, "b_yb": vb},
           {"b_weak": apply(a, (slice(None), 1), np.int16(7)),
            "b_i32": apply(a, (0,), v32.astype(np.int16)),
            "b_bool": apply(a, (slice(1, None), slice(1, None)), np.int16(vb))})

    x = g.inp("f", "float32", [None, 2])
    y = g.inp("f_y", "float64", [None])
    g.func("f32", [x, y], [g.op(opname, [x, y], {"index": [{"step": -1}, 0]}, out="f_r")])
    a = rand("float32", (3, 2))
    v = rand("float64", (3,))
    g.case("f32", {"f": a, "f_y": v},
           {"f_r": apply(a, (slice(None, None, -1), 0), v.astype(np.float32))})
    v1 = rand("float64", (1,))
    g.case("f32", {"f": a, "f_y": v1},
           {"f_r": apply(a, (slice(None, None, -1), 0), v1.astype(np.float32))})
    g.case("f32", {"f": a, "f_y": rand("float64", (2,))},
           error="could not broadcast input array from shape (2,) into shape (3,)")

    # Wrapping integers, bool (add is "or"), float16, unsigned.
    x = g.inp("i8", "int8", [4])
    y = g.inp("i8y", "int8", [])
    g.func("int8", [x, y], [g.op(opname, [x, y], {"index": [{"start": 1, "stop": 3}]}, out="i8_r")])
    a = np.array([1, 120, -128, 5], np.int8)
    g.case("int8", {"i8": a, "i8y": np.int8(10)},
           {"i8_r": apply(a, (slice(1, 3),), np.int8(10))})

    x = g.inp("bo", "bool", [2, 3])
    y = g.inp("boy", "bool", [3])
    g.func("bool", [x, y], [g.op(opname, [x, y], {"index": [{}]}, out="bo_r")])
    a = np.array([[True, False, False], [False, True, False]])
    vy = np.array([False, True, False])
    want = (a | vy) if inc else np.broadcast_to(vy, a.shape).copy()
    g.case("bool", {"bo": a, "boy": vy}, {"bo_r": want})

    x = g.inp("h", "float16", [3, 2])
    y = g.inp("hy", "float16", [2])
    g.func("f16", [x, y], [g.op(opname, [x, y], {"index": [2]}, out="h_r")])
    a, vy = rand("float16", (3, 2)), rand("float16", (2,))
    g.case("f16", {"h": a, "hy": vy}, {"h_r": apply(a, (2,), vy)})

    x = g.inp("u", "uint32", [5])
    y = g.inp("uy", "uint8", [2])
    g.func("u32", [x, y], [g.op(opname, [x, y], {"index": [{"start": -1, "stop": 0, "step": -3}]},
                                 out="u_r")])
    a, vy = np.array([1, 2, 3, 4, 4294967295], np.uint32), np.array([7, 9], np.uint8)
    g.case("u32", {"u": a, "uy": vy}, {"u_r": apply(a, (slice(-1, 0, -3),), vy)})

    # Dynamic index.
    x = g.inp("d", "float64", [None, None])
    y = g.inp("dy", "float64", [None])
    i = g.inp("di", "int64", [])
    j = g.inp("dj", "int16", [])
    g.func("dynamic", [x, y, i, j],
           [g.op(opname, [x, y, i, j], {"index": ["$0", {"start": "$1", "step": -1}]}, out="d_r")])
    a = rand("float64", (3, 4))
    for iv, jv in [(0, 3), (-1, 1), (2, -2)]:
        vy = rand("float64", (len(range(4)[jv::-1]),))
        g.case("dynamic", {"d": a, "dy": vy, "di": np.int64(iv), "dj": np.int16(jv)},
               {"d_r": apply(a, (iv, slice(jv, None, -1)), vy)})
    g.case("dynamic", {"d": a, "dy": rand("float64", (1,)), "di": np.int64(3), "dj": np.int16(0)},
           error="index 3 is out of bounds for axis 0 with size 3")

    # uint64 indices past 2**63 - 1 (not the negative int64 of their
    # bits): out of bounds as an index; as a slice start, past the end
    # (NumPy clamps it), so a forward slice selects nothing and a reversed
    # one everything.
    x = g.inp("e", "float64", [None])
    y = g.inp("ey", "float64", [None])
    iu = g.inp("eu", "uint64", [])
    g.func("u64_index", [x, y, iu], [g.op(opname, [x, y, iu], {"index": ["$0"]}, out="e_i")])
    a = rand("float64", (3,))
    g.case("u64_index", {"e": a, "ey": rand("float64", (1,)), "eu": np.uint64(2**64 - 1)},
           error="index 18446744073709551615 is out of bounds for axis 0 with size 3")
    g.func("u64_slice", [x, y, iu], [g.op(opname, [x, y, iu], {"index": [{"start": "$0"}]}, out="e_s"),
                                     g.op(opname, [x, y, iu], {"index": [{"start": "$0", "step": -1}]},
                                          out="e_r")])
    for v in [2**63, 2**64 - 1]:
        vy = rand("float64", (1,))
        g.case("u64_slice", {"e": a, "ey": vy, "eu": np.uint64(v)},
               {"e_s": apply(a, (slice(v, None),), vy), "e_r": apply(a, (slice(v, None, -1),), vy)})

    # Non-contiguous x and y (views made by other shape ops), 0-d x.
    x = g.inp("n", "float32", [3, 4])
    y = g.inp("ny", "float32", [3, 2])
    xt = g.op("transpose", [x])
    yt = g.op("transpose", [y])
    g.func("noncontig", [x, y], [g.op(opname, [xt, yt], {"index": [{"step": 2}]}, out="n_r")])
    a, vy = rand("float32", (3, 4)), rand("float32", (3, 2))
    g.case("noncontig", {"n": a, "ny": vy}, {"n_r": apply(a.T, (slice(None, None, 2),), vy.T)})

    x = g.inp("z", "int64", [])
    g.func("scalar", [x], [g.op(opname, [x, {"value": 5}], {"index": []}, out="z_r")])
    g.case("scalar", {"z": np.int64(-3)}, {"z_r": np.int64(2 if inc else 5)})
    g.write()


# ---------------------------------------------------------------- whole floats
def gen_whole_float_attrs():
    # An attr's whole-number float (Python's json.dumps(1.0)) is that
    # integer, as everywhere else in the file (docs/format-choices.md).
    g = Graph("attrs_whole_floats")
    x = g.inp("a", "float64", [2, 3])
    g.func("f", [x], [g.op("sum", [x], {"axis": 1.0}, out="w_sum"),
                      g.op("dimshuffle", [x], {"order": [1.0, "x", 0.0]}, out="w_ds"),
                      g.op("subtensor", [x], {"index": [{"start": 1.0, "stop": None, "step": -1.0}, -1.0]},
                           out="w_sub"),
                      g.op("var", [x], {"axis": [0.0], "ddof": 1.0}, out="w_var"),
                      g.op("transpose", [x], {"axes": [1.0, 0.0]}, out="w_tr")])
    a = rand("float64", (2, 3))
    g.case("f", {"a": a}, {"w_sum": a.sum(1), "w_ds": a.T[:, None, :], "w_sub": a[1::-1, -1],
                           "w_var": a.var(0, ddof=1), "w_tr": a.T})
    g.write()


# ------------------------------------------------- inc of a wider dtype
def gen_inc_mixed():
    """x[i] += y where y's dtype is wider than x's: NumPy adds in the
    promoted dtype and rounds once into x's (y cast to x's first rounded
    twice: float16 0.5 + int16 2049 gave 2048, not 2050)."""
    g = Graph("shape_inc_subtensor_mixed")
    cases = [("h", "float16", "int16", [0.5, 1.0, -3.0], [2049, 1, 2047]),
             ("f", "float32", "float64", [1.0, 1.0, 3.0], [2.0**-24 + 2.0**-48, 2.0**-25, -1e-9]),
             ("l", "float32", "int64", [1.0, 0.0, 2.0], [16777217, 16777217, -3]),
             ("w", "int8", "uint8", [100, -128, 5], [200, 255, 0])]
    for key, xt, yt, xv, yv in cases:
        x = g.inp(key, xt, [3])
        y = g.inp(key + "_y", yt, [3])
        ys = g.op("subtensor", [y], {"index": [{"step": 2}]}, out=key + "_ys")
        g.func(key, [x, y], [g.op("inc_subtensor", [x, y], {"index": []}, out=key + "_all"),
                             g.op("inc_subtensor", [x, ys], {"index": [{"step": 2}]}, out=key + "_step")])
        for case in range(2):
            a = np.array(xv, xt)
            b = np.array(yv, yt)
            if case:
                a, b = a[::-1].copy(), b[::-1].copy()
            r1 = a.copy()
            r1[:] += b
            r2 = a.copy()
            r2[::2] += b[::2]
            g.case(key, {key: a, key + "_y": b}, {key + "_all": r1, key + "_step": r2}, rtol=0, atol=0)
    g.write()


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    gen_shape()
    gen_reshape()
    gen_flatten()
    gen_dimshuffle()
    gen_transpose()
    gen_squeeze()
    gen_expand_dims()
    gen_subtensor()
    gen_setinc("set_subtensor")
    gen_setinc("inc_subtensor")
    gen_whole_float_attrs()
    gen_inc_mixed()
