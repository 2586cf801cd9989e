"""Elementwise op tests with expectations from NumPy.

Run with Debian's /usr/bin/python3 (NumPy); rewrites tests/data/ops/elemwise_*.json.
Float-only ops of integers compute in float32 for 8/16-bit integers and bool
and in float64 for wider ones (FORMAT.md s7), which is where tg departs from
NumPy (which picks float16 for int8): expectations follow FORMAT.md.
"""
import math

import numpy as np

from common import sample, typ, value, write

rng = np.random.default_rng(1234)


def float_of(dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return dt
    if dt.kind == "b" or dt.itemsize <= 2:
        return np.dtype("float32")
    return np.dtype("float64")


def vec(f):
    return np.vectorize(f, otypes=[np.float64])


DOMAIN = {
    "log": (0.1, 5), "log2": (0.1, 5), "log10": (0.1, 5), "sqrt": (0, 5),
    "log1p": (-0.9, 5), "arcsin": (-0.99, 0.99), "arccos": (-0.99, 0.99),
    "arctanh": (-0.9, 0.9), "arccosh": (1.0, 5), "gammaln": (0.1, 6),
    "reciprocal": (0.5, 4),
}
FLOAT_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log,
    "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "reciprocal": lambda x: 1 / x, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "arcsinh": np.arcsinh,
    "arccosh": np.arccosh, "arctanh": np.arctanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x.astype(np.float64))),
    "softplus": lambda x: np.logaddexp(0, x.astype(np.float64)),
    "erf": lambda x: vec(math.erf)(x), "erfc": lambda x: vec(math.erfc)(x),
    "gammaln": lambda x: vec(math.lgamma)(x),
}
SAME_UNARY = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "sqr": np.square,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "identity": lambda x: x,
}
PRED = {"isnan": np.isnan, "isinf": np.isinf, "logical_not": np.logical_not}


def unary_file(op, fn, dtypes, kind):
    variables, nodes, tests = [], [], []
    for i, dt in enumerate(dtypes):
        lo, hi = DOMAIN.get(op, (-3, 3))
        if np.dtype(dt).kind in "iu":
            lo, hi = max(int(math.ceil(lo)), 0 if np.dtype(dt).kind == "u" else -3), max(int(hi), 2)
            if op in ("log", "log2", "log10", "gammaln", "reciprocal", "arccosh"):
                lo = max(lo, 1)
            if op in ("arcsin", "arccos", "arctanh"):
                lo, hi = 0, 1
        x = sample(dt, (2, 3), rng, lo, hi)
        xid, yid = f"x{i}", f"y{i}"
        variables.append({"id": xid, "type": typ(x)})
        nodes.append({"op": op, "inputs": [xid], "outputs": [yid]})
        if kind == "float":
            fd = float_of(dt)
            want = np.asarray(fn(x.astype(fd))).astype(fd)
        elif kind == "same":
            if np.dtype(dt).kind in "iub" and op in ("floor", "ceil", "round", "trunc"):
                want = x.copy()
            elif op == "sqr" and dt == "bool":
                want = np.square(x)  # int8: NumPy has no bool loop for it
            else:
                want = np.asarray(fn(x)).astype(x.dtype)
        else:
            want = np.asarray(fn(x)).astype(bool) if np.dtype(dt).kind == "f" or op == "logical_not" \
                else np.zeros(x.shape, bool)
        tests.append({"function": f"f{i}", "inputs": {xid: value(x)}, "outputs": {yid: value(want)}})
    functions = {f"f{i}": {"inputs": [f"x{i}"], "outputs": [f"y{i}"]} for i in range(len(dtypes))}
    return variables, nodes, tests, functions


ALL = ["float64", "float32", "float16", "int8", "int16", "int32", "int64",
       "uint8", "uint16", "uint32", "uint64", "bool"]
NOBOOL = [d for d in ALL if d != "bool"]
FLOATS = ["float64", "float32", "float16"]

for op, fn in FLOAT_UNARY.items():
    v, n, t, f = unary_file(op, fn, FLOATS + ["int8", "int32", "uint16", "int64"], "float")
    write(f"elemwise_{op}", v, n, t, f)
for op, fn in SAME_UNARY.items():
    dts = NOBOOL if op in ("neg", "sign") else ALL
    v, n, t, f = unary_file(op, fn, dts, "same")
    write(f"elemwise_{op}", v, n, t, f)
for op, fn in PRED.items():
    v, n, t, f = unary_file(op, fn, ["float64", "float32", "float16", "int32", "uint8"] +
                            (["bool"] if op == "logical_not" else []), "pred")
    write(f"elemwise_{op}", v, n, t, f)

# Special values through the float ops.
sp = np.array([0.0, -0.0, 1e308, -1e308, np.inf, -np.inf, np.nan, 1e-310], np.float64)
variables = [{"id": "x", "type": typ(sp)}]
nodes, outs = [], {}
with np.errstate(all="ignore"):
    for op in ["exp", "log", "sqrt", "tanh", "sigmoid", "softplus", "isnan", "isinf",
               "abs", "sign", "relu", "floor", "round"]:
        fn = FLOAT_UNARY.get(op) or SAME_UNARY.get(op) or PRED.get(op)
        nodes.append({"op": op, "inputs": ["x"], "outputs": [op]})
        want = np.asarray(fn(sp))
        if op in ("isnan", "isinf"):
            want = want.astype(bool)
        else:
            want = want.astype(np.float64)
        outs[op] = value(want)
write("elemwise_special", variables, nodes, [{"inputs": {"x": value(sp)}, "outputs": outs}])

# Stability at the tails (no overflow): sigmoid and softplus at +-1e4.
tail = np.array([-1e4, -50.0, 0.0, 50.0, 1e4], np.float64)
write("elemwise_stable_tails", [{"id": "x", "type": typ(tail)}],
      [{"op": "sigmoid", "inputs": ["x"], "outputs": ["s"]},
       {"op": "softplus", "inputs": ["x"], "outputs": ["p"]}],
      [{"inputs": {"x": value(tail)},
        "outputs": {"s": value(np.array([0.0, 1.9287498479639178e-22, 0.5, 1.0, 1.0])),
                    "p": value(np.logaddexp(0, tail))}}])

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "true_div": None,
    "int_div": np.floor_divide, "mod": np.mod, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "arctan2": None,
    "eq": np.equal, "neq": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}
PAIRS = [("float64", "float64"), ("float32", "float32"), ("float16", "float16"),
         ("int32", "int32"), ("int64", "int64"), ("uint8", "uint8"), ("int8", "uint8"),
         ("int32", "float32"), ("uint64", "int64"), ("float32", "float64"), ("bool", "bool"),
         ("int16", "float16")]
for op, fn in BINARY.items():
    variables, nodes, tests, functions = [], [], [], {}
    k = 0
    for (da, db) in PAIRS:
        for (sa, sb) in [((2, 3), (2, 3)), ((2, 1), (3,))]:
            if op == "sub" and da == "bool" and db == "bool":
                continue
            a = sample(da, sa, rng, -4, 5)
            b = sample(db, sb, rng, -4, 5)
            if op in ("int_div", "mod"):
                b = np.where(b == 0, np.ones((), b.dtype), b)
                if b.dtype == bool:
                    b = np.ones(b.shape, bool)
            if op == "pow":
                if np.dtype(db).kind in "iu":
                    b = np.abs(b.astype(np.int64)).clip(0, 3).astype(db)
                if np.dtype(da).kind == "f":
                    a = np.abs(a) + 0.5
            common = np.promote_types(a.dtype, b.dtype)
            if op in ("true_div", "arctan2"):
                fd = float_of(common)
                with np.errstate(all="ignore"):
                    f2 = np.true_divide if op == "true_div" else np.arctan2
                    want = f2(a.astype(fd), b.astype(fd)).astype(fd)
            elif op in ("int_div", "mod", "pow") and common == np.bool_:
                want = fn(a.astype(np.int8), b.astype(np.int8))
            else:
                with np.errstate(all="ignore"):
                    want = fn(a, b)
            aid, bid, yid = f"a{k}", f"b{k}", f"y{k}"
            variables += [{"id": aid, "type": typ(a)}, {"id": bid, "type": typ(b)}]
            nodes.append({"op": op, "inputs": [aid, bid], "outputs": [yid]})
            functions[f"f{k}"] = {"inputs": [aid, bid], "outputs": [yid]}
            tests.append({"function": f"f{k}", "inputs": {aid: value(a), bid: value(b)},
                          "outputs": {yid: value(want)}})
            k += 1
    write(f"elemwise_{op}", variables, nodes, tests, functions)

# Weak scalars (NEP 50): x_float32 * 2 is float32; int8 + 100 stays int8.
x32 = np.array([1.5, -2.0, 3.25], np.float32)
i8 = np.array([1, -2, 3], np.int8)
u8 = np.array([1, 2, 250], np.uint8)
write("elemwise_weak", [{"id": "x", "type": typ(x32)}, {"id": "i", "type": typ(i8)},
                        {"id": "u", "type": typ(u8)}],
      [{"op": "mul", "inputs": ["x", {"value": 2}], "outputs": ["x2"]},
       {"op": "add", "inputs": ["i", {"value": 100}], "outputs": ["i100"]},
       {"op": "mul", "inputs": ["i", {"value": 0.5}], "outputs": ["ihalf"]},
       {"op": "add", "inputs": ["u", {"value": 10}], "outputs": ["u10"]},
       {"op": "true_div", "inputs": ["i", {"value": 2}], "outputs": ["idiv"]},
       {"op": "maximum", "inputs": [{"value": 0.0}, "x"], "outputs": ["relu"]}],
      [{"inputs": {"x": value(x32), "i": value(i8), "u": value(u8)},
        "outputs": {"x2": value(x32 * np.float32(2)), "i100": value(i8 + np.int8(100)),
                    "ihalf": value(i8.astype(np.float64) * 0.5),
                    "u10": value((u8 + np.uint8(10)).astype(np.uint8)),
                    "idiv": value(i8.astype(np.float32) / np.float32(2)),
                    "relu": value(np.maximum(np.float32(0), x32))}}])

# Weak integers past int64 (to 2**64 - 1): uint64 + 2**64 - 1 is uint64
# (NumPy 2), a float array takes them as its float, alone they are uint64
# (np.asarray(2**64 - 1)). NumPy 1's value-based rules give other dtypes:
# the expectations are computed in the dtypes NEP 50 gives.
U = 2**64 - 1
xu = np.array([1, 2**64 - 2, 2**63], np.uint64)
fu = np.array([0.5, -1.0, 2.0], np.float64)
write("elemwise_weak_u64", [{"id": "x", "type": typ(xu)}, {"id": "f", "type": typ(fu)}],
      [{"op": "add", "inputs": ["x", {"value": U}], "outputs": ["xa"]},
       {"op": "sub", "inputs": ["x", {"value": 2**63}], "outputs": ["xs"]},
       {"op": "maximum", "inputs": [{"value": {"data": U}}, "x"], "outputs": ["xm"]},
       {"op": "eq", "inputs": ["x", {"value": 2**63}], "outputs": ["xe"]},
       {"op": "mul", "inputs": ["f", {"value": U}], "outputs": ["fm"]},
       {"op": "add", "inputs": [{"value": U}, {"value": 0}], "outputs": ["alone"]}],
      [{"inputs": {"x": value(xu), "f": value(fu)},
        "outputs": {"xa": value(xu + np.uint64(U)), "xs": value(xu - np.uint64(2**63)),
                    "xm": value(np.maximum(np.uint64(U), xu)), "xe": value(xu == np.uint64(2**63)),
                    "fm": value(fu * np.float64(U)), "alone": value(np.uint64(U) + np.uint64(0))}}],
      functions={"main": {"inputs": ["x", "f"], "outputs": ["xa", "xs", "xm", "xe", "fm", "alone"]}})

# Signed zeros as NumPy gives them: sign of either zero is +0; clip is
# min(max(x, lo), hi) with max(a, b) = a > b ? a : b, so on a tie the
# bound (clip(-0.0, 0.0, 1.0) is +0.0, clip(0.0, -1.0, -0.0) is -0.0);
# each seen through its reciprocal (-inf or inf), which a comparison of
# the values alone would not tell apart. sqr of bool is int8 (np.square).
zs = np.array([-0.0, 0.0, 2.0, -3.0, np.nan])
zb = np.array([True, False])
zc = np.array([-0.0, 0.0, 0.5, -0.0])
nodes = []
outs = {}
for dt in ("float64", "float32"):
    xz = zs.astype(dt)
    xc = zc.astype(dt)
    sfx = dt[-2:]
    nodes += [{"op": "sign", "inputs": ["z" + sfx], "outputs": ["s" + sfx]},
              {"op": "true_div", "inputs": [{"value": 1.0}, "s" + sfx], "outputs": ["rs" + sfx]},
              {"op": "clip", "inputs": ["c" + sfx, {"value": 0.0}, {"value": 1.0}], "outputs": ["cl" + sfx]},
              {"op": "true_div", "inputs": [{"value": 1.0}, "cl" + sfx], "outputs": ["rcl" + sfx]},
              {"op": "clip", "inputs": ["c" + sfx, {"value": -1.0}, {"value": -0.0}], "outputs": ["ch" + sfx]},
              {"op": "true_div", "inputs": [{"value": 1.0}, "ch" + sfx], "outputs": ["rch" + sfx]}]
    one = np.array(1, dt)
    with np.errstate(divide="ignore", invalid="ignore"):
        outs.update({"s" + sfx: np.sign(xz), "rs" + sfx: one / np.sign(xz),
                     "cl" + sfx: np.clip(xc, np.array(0, dt), one),
                     "rcl" + sfx: one / np.clip(xc, np.array(0, dt), one),
                     "ch" + sfx: np.clip(xc, -one, np.array(-0.0, dt)),
                     "rch" + sfx: one / np.clip(xc, -one, np.array(-0.0, dt))})
nodes.append({"op": "sqr", "inputs": ["b"], "outputs": ["sb"]})
outs["sb"] = np.square(zb)
assert outs["sb"].dtype == np.int8 and np.signbit(outs["rs64"]).sum() == 1 and np.isinf(outs["rcl64"][:2]).all()
write("elemwise_signed_zero",
      [{"id": "z64", "type": typ(zs)}, {"id": "c64", "type": typ(zc)},
       {"id": "z32", "type": typ(zs.astype("float32"))}, {"id": "c32", "type": typ(zc.astype("float32"))},
       {"id": "b", "type": typ(zb)}], nodes,
      [{"inputs": {"z64": value(zs), "c64": value(zc), "z32": value(zs.astype("float32")),
                   "c32": value(zc.astype("float32")), "b": value(zb)},
        "outputs": {k: value(v) for k, v in outs.items()}}],
      functions={"main": {"inputs": ["z64", "c64", "z32", "c32", "b"], "outputs": list(outs)}})

# n-ary add/mul with broadcasting; switch; clip; cast; a transposed input.
a = sample("float64", (2, 3), rng)
b = sample("float64", (3,), rng)
c = sample("float64", (2, 1), rng)
cond = np.array([[True, False, True], [False, False, True]])
ia = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
write("elemwise_nary_switch_clip_cast",
      [{"id": "a", "type": typ(a)}, {"id": "b", "type": typ(b)}, {"id": "c", "type": typ(c)},
       {"id": "cond", "type": typ(cond)}, {"id": "ia", "type": typ(ia)}],
      [{"op": "add", "inputs": ["a", "b", "c"], "outputs": ["s3"]},
       {"op": "mul", "inputs": ["a", "b", "c", {"value": 2}], "outputs": ["p4"]},
       {"op": "switch", "inputs": ["cond", "a", "ia"], "outputs": ["w"]},
       {"op": "switch", "inputs": ["ia", "ia", {"value": -1}], "outputs": ["w2"]},
       {"op": "clip", "inputs": ["a", {"value": -1.0}, {"value": 1.0}], "outputs": ["cl"]},
       {"op": "clip", "inputs": ["ia", {"value": 2}, {"value": 5}], "outputs": ["cli"]},
       {"op": "cast", "inputs": ["a"], "outputs": ["ai"], "attrs": {"dtype": "int16"}},
       {"op": "cast", "inputs": ["ia"], "outputs": ["ab"], "attrs": {"dtype": "bool"}},
       {"op": "transpose", "inputs": ["a"], "outputs": ["aT"]},
       {"op": "exp", "inputs": ["aT"], "outputs": ["eT"]},
       {"op": "sub", "inputs": ["aT", {"value": 1.5}], "outputs": ["dT"]}],
      [{"inputs": {"a": value(a), "b": value(b), "c": value(c), "cond": value(cond), "ia": value(ia)},
        "outputs": {"s3": value(a + b + c), "p4": value(a * b * c * 2),
                    "w": value(np.where(cond, a, ia)), "w2": value(np.where(ia != 0, ia, np.int32(-1))),
                    "cl": value(np.clip(a, -1.0, 1.0)), "cli": value(np.clip(ia, 2, 5).astype(np.int32)),
                    "ai": value(a.astype(np.int16)), "ab": value(ia.astype(bool)),
                    "eT": value(np.exp(a.T)), "dT": value(a.T - 1.5)}}],
      functions={"main": {"inputs": ["a", "b", "c", "cond", "ia"],
                          "outputs": ["s3", "p4", "w", "w2", "cl", "cli", "ai", "ab", "eT", "dT"]}})

# Run-time errors: integer division by zero, negative integer power, shapes
# that do not broadcast; 0-d and empty arrays.
z = np.array([3, 0], np.int64)
write("elemwise_errors",
      [{"id": "p", "type": {"dtype": "int64", "shape": [None]}},
       {"id": "q", "type": {"dtype": "int64", "shape": [None]}},
       {"id": "f", "type": {"dtype": "float64", "shape": [None]}},
       {"id": "g", "type": {"dtype": "float64", "shape": [None]}}],
      [{"op": "int_div", "inputs": ["p", "q"], "outputs": ["d"]},
       {"op": "mod", "inputs": ["p", "q"], "outputs": ["m"]},
       {"op": "pow", "inputs": ["p", "q"], "outputs": ["pw"]},
       {"op": "add", "inputs": ["f", "g"], "outputs": ["fg"]}],
      [{"function": "div", "inputs": {"p": value(z), "q": value(np.array([1, 0]))},
        "error": "integer division by zero"},
       {"function": "mod", "inputs": {"p": value(z), "q": value(np.array([0, 1]))},
        "error": "integer division by zero"},
       {"function": "pow", "inputs": {"p": value(z), "q": value(np.array([1, -1]))},
        "error": "negative integer powers"},
       {"function": "addf", "inputs": {"f": value(np.zeros(3)), "g": value(np.zeros(2))},
        "error": "do not broadcast"},
       {"function": "addf", "inputs": {"f": value(np.zeros(0)), "g": value(np.zeros(1))},
        "outputs": {"fg": value(np.zeros(0))}},
       {"function": "div", "inputs": {"p": value(np.array([-7, 7, -7, 7])), "q": value(np.array([2, -2, -2, 2]))},
        "outputs": {"d": value(np.array([-7, 7, -7, 7]) // np.array([2, -2, -2, 2]))}},
       {"function": "mod", "inputs": {"p": value(np.array([-7, 7, -7, 7])), "q": value(np.array([2, -2, -2, 2]))},
        "outputs": {"m": value(np.array([-7, 7, -7, 7]) % np.array([2, -2, -2, 2]))}}],
      functions={"div": {"inputs": ["p", "q"], "outputs": ["d"]},
                 "mod": {"inputs": ["p", "q"], "outputs": ["m"]},
                 "pow": {"inputs": ["p", "q"], "outputs": ["pw"]},
                 "addf": {"inputs": ["f", "g"], "outputs": ["fg"]}})

s0 = np.array(2.5)
write("elemwise_scalar", [{"id": "s", "type": typ(s0)}],
      [{"op": "mul", "inputs": ["s", "s"], "outputs": ["ss"]},
       {"op": "tanh", "inputs": ["ss"], "outputs": ["t"]}],
      [{"inputs": {"s": value(s0)}, "outputs": {"ss": value(s0 * s0), "t": value(np.tanh(s0 * s0))}}],
      functions={"main": {"inputs": ["s"], "outputs": ["ss", "t"]}})

# Promotion of three or more dtypes is NumPy's result_type, which does not
# depend on the order: int8 and uint8 each meet float16 as float16.
pi8 = np.array([[-3, 1, 2]], np.int8)
pu8 = np.array([[4], [0]], np.uint8)
pf16 = np.array([1.5, -0.25, 7.0], np.float16)
pi16 = np.array([-300, 2, 9], np.int16)
pu16 = np.array([60000, 1, 2], np.uint16)
pf32 = np.array([0.5, 1e6, -2.0], np.float32)
assert np.result_type(pi8, pu8, pf16) == np.float16 and np.result_type(pi16, pu16, pf32) == np.float32
write("elemwise_promote",
      [{"id": "i8", "type": typ(pi8)}, {"id": "u8", "type": typ(pu8)}, {"id": "f16", "type": typ(pf16)},
       {"id": "i16", "type": typ(pi16)}, {"id": "u16", "type": typ(pu16)}, {"id": "f32", "type": typ(pf32)}],
      [{"op": "add", "inputs": ["i8", "u8", "f16"], "outputs": ["s"]},
       {"op": "mul", "inputs": ["f16", "u8", "i8"], "outputs": ["p"]},
       {"op": "clip", "inputs": ["f16", "i8", "u8"], "outputs": ["c"]},
       {"op": "add", "inputs": ["i16", "u16", "f32"], "outputs": ["s32"]},
       {"op": "switch", "inputs": ["u8", "f16", "i8"], "outputs": ["w"]}],
      [{"inputs": {"i8": value(pi8), "u8": value(pu8), "f16": value(pf16), "i16": value(pi16),
                   "u16": value(pu16), "f32": value(pf32)},
        "outputs": {"s": value(pi8.astype(np.float16) + pu8.astype(np.float16) + pf16),
                    "p": value(pf16 * pu8.astype(np.float16) * pi8.astype(np.float16)),
                    "c": value(np.clip(pf16, pi8.astype(np.float16), pu8.astype(np.float16))),
                    "s32": value(pi16.astype(np.float32) + pu16.astype(np.float32) + pf32),
                    "w": value(np.where(pu8 != 0, pf16, pi8))}}],
      functions={"main": {"inputs": ["i8", "u8", "f16", "i16", "u16", "f32"],
                          "outputs": ["s", "p", "c", "s32", "w"]}})

# Nodes that overwrite an input (`inplace`): the input is an intermediate
# result nobody else holds, so the kernel writes over it; float16 goes
# through float32; an n-ary fold cannot write over input 2 and computes
# into a fresh array instead.
ix = np.array([[1.5, -2.0, 3.0], [0.25, 8.0, -1.0]], np.float32)
ih = np.array([0.5, -3.0, 2.0], np.float16)
ii = np.array([7, -7, 5], np.int32)
write("elemwise_inplace",
      [{"id": "x", "type": typ(ix)}, {"id": "h", "type": typ(ih)}, {"id": "k", "type": typ(ii)}],
      [{"op": "maximum", "inputs": ["x", "x"], "outputs": ["t"]},
       {"op": "add", "inputs": ["t", {"value": 1.5}], "outputs": ["y"], "inplace": {"0": 0}},
       {"op": "maximum", "inputs": ["x", "x"], "outputs": ["t2"]},
       {"op": "exp", "inputs": ["t2"], "outputs": ["e"], "inplace": {"0": 0}},
       {"op": "maximum", "inputs": ["h", "h"], "outputs": ["th"]},
       {"op": "mul", "inputs": ["h", "th"], "outputs": ["yh"], "inplace": {"0": 1}},
       {"op": "maximum", "inputs": ["x", "x"], "outputs": ["t3"]},
       {"op": "add", "inputs": ["x", "x", "t3"], "outputs": ["y3"], "inplace": {"0": 2}},
       {"op": "maximum", "inputs": ["k", "k"], "outputs": ["tk"]},
       {"op": "int_div", "inputs": ["tk", {"value": 2}], "outputs": ["dk"], "inplace": {"0": 0}},
       {"op": "maximum", "inputs": ["k", "k"], "outputs": ["tk2"]},
       {"op": "floor", "inputs": ["tk2"], "outputs": ["fk"], "inplace": {"0": 0}}],
      [{"inputs": {"x": value(ix), "h": value(ih), "k": value(ii)},
        "outputs": {"y": value(ix + np.float32(1.5)), "e": value(np.exp(ix)), "yh": value(ih * ih),
                    "y3": value(ix + ix + ix), "dk": value(ii // np.int32(2)), "fk": value(ii)}}],
      functions={"main": {"inputs": ["x", "h", "k"], "outputs": ["y", "e", "yh", "y3", "dk", "fk"]}})

# Strided and broadcast views from the shape ops: every other row, a
# reversed axis, a new broadcast axis.
sx = sample("float64", (4, 3), rng)
sv = sample("float64", (4,), rng)
sk = np.array([[9, -9, 4], [1, 2, 3], [-8, 8, 5], [4, 5, 6]], np.int64)
write("elemwise_strided",
      [{"id": "x", "type": typ(sx)}, {"id": "v", "type": typ(sv)}, {"id": "k", "type": typ(sk)}],
      [{"op": "subtensor", "inputs": ["x"], "outputs": ["even"],
        "attrs": {"index": [{"start": None, "stop": None, "step": 2}]}},
       {"op": "subtensor", "inputs": ["x"], "outputs": ["rev"],
        "attrs": {"index": [{"start": None, "stop": None, "step": -1}]}},
       {"op": "dimshuffle", "inputs": ["v"], "outputs": ["col"], "attrs": {"order": [0, "x"]}},
       {"op": "mul", "inputs": ["rev", "col"], "outputs": ["rc"]},
       {"op": "tanh", "inputs": ["even"], "outputs": ["te"]},
       {"op": "subtensor", "inputs": ["k"], "outputs": ["kodd"],
        "attrs": {"index": [{"start": 1, "stop": None, "step": 2}]}},
       {"op": "subtensor", "inputs": ["k"], "outputs": ["keven"],
        "attrs": {"index": [{"start": None, "stop": None, "step": 2}]}},
       {"op": "int_div", "inputs": ["keven", "kodd"], "outputs": ["kd"]},
       {"op": "mod", "inputs": ["keven", "kodd"], "outputs": ["km"]},
       {"op": "transpose", "inputs": ["x"], "outputs": ["xT"]},
       {"op": "maximum", "inputs": ["xT", "xT"], "outputs": ["mT"]},
       {"op": "lt", "inputs": ["xT", {"value": 0.0}], "outputs": ["negT"]}],
      [{"inputs": {"x": value(sx), "v": value(sv), "k": value(sk)},
        "outputs": {"rc": value(sx[::-1] * sv[:, None]), "te": value(np.tanh(sx[::2])),
                    "kd": value(sk[::2] // sk[1::2]), "km": value(sk[::2] % sk[1::2]),
                    "mT": value(sx.T.copy()), "negT": value(sx.T < 0)}}],
      functions={"main": {"inputs": ["x", "v", "k"], "outputs": ["rc", "te", "kd", "km", "mT", "negT"]}})

# Weak scalars against bool and integer arrays (NEP 50): a bool array
# meeting a weak int is int64, meeting a weak float float64; a weak float
# meeting an int array is float64; a weak bool takes the array's dtype.
wb = np.array([True, False, True])
wi = np.array([3, -4, 5], np.int16)
write("elemwise_weak_kinds",
      [{"id": "b", "type": typ(wb)}, {"id": "i", "type": typ(wi)}],
      [{"op": "add", "inputs": ["b", {"value": 3}], "outputs": ["b3"]},
       {"op": "mul", "inputs": [{"value": 0.5}, "b"], "outputs": ["bh"]},
       {"op": "add", "inputs": ["i", {"value": 2.5}], "outputs": ["i25"]},
       {"op": "mul", "inputs": ["i", {"value": True}], "outputs": ["it"]},
       {"op": "logical_or", "inputs": ["b", {"value": False}], "outputs": ["bf"]},
       {"op": "pow", "inputs": ["i", {"value": 2}], "outputs": ["i2"]},
       {"op": "sub", "inputs": [{"value": 1}, "i"], "outputs": ["i1"]},
       {"op": "maximum", "inputs": ["i", {"value": -32768}], "outputs": ["imin"]}],
      [{"inputs": {"b": value(wb), "i": value(wi)},
        "outputs": {"b3": value(wb.astype(np.int64) + 3), "bh": value(0.5 * wb.astype(np.float64)),
                    "i25": value(wi.astype(np.float64) + 2.5), "it": value(wi * np.int16(1)),
                    "bf": value(wb.copy()), "i2": value(wi ** np.int16(2)),
                    "i1": value(np.int16(1) - wi), "imin": value(wi.copy())}}],
      functions={"main": {"inputs": ["b", "i"], "outputs": ["b3", "bh", "i25", "it", "bf", "i2", "i1", "imin"]}})

# Comparisons of a signed integer with a uint64, whose dtype is float64:
# exact, as NumPy 2 compares them (NumPy 1.24, which this script runs
# under, compares through float64: 2^53 + 1 == 2^53 there). Expectations
# from Python's own integers, not NumPy. Contiguous, a 0-d operand on
# either side, broadcast (2, 1) with (6,), uint64 first, int8 and int32
# against uint64, two constants (folded), and chains that fusion compiles.
CMP = {"eq": lambda x, y: x == y, "neq": lambda x, y: x != y, "lt": lambda x, y: x < y,
       "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}
mi = np.array([9007199254740993, -1, 9223372036854775807, -9223372036854775808, 0, 5], np.int64)
mu = np.array([9007199254740992, 18446744073709551615, 9223372036854775808, 0, 0, 5], np.uint64)
m8 = np.array([-128, -1, 0, 127, 5, 100], np.int8)
m32 = np.array([-2147483648, -1, 2147483647, 0, 7, 3], np.int32)
ms = np.array(9007199254740993, np.int64)
mc = np.array([[-1], [9223372036854775807]], np.int64)


def exact(op, x, y):
    x, y = np.broadcast_arrays(x, y)
    return np.array([CMP[op](int(p), int(q)) for p, q in zip(x.ravel(), y.ravel())],
                    bool).reshape(x.shape)


mnodes, mouts = [], {}
for op in CMP:
    for xn, yn, x, y in [("i", "u", mi, mu), ("u", "i", mu, mi), ("s", "u", ms, mu), ("u", "s", mu, ms),
                         ("c", "u", mc, mu), ("i8", "u", m8, mu), ("i32", "u", m32, mu)]:
        o = "%s_%s_%s" % (op, xn, yn)
        mnodes.append({"op": op, "inputs": [xn, yn], "outputs": [o]})
        mouts[o] = exact(op, x, y)
# a strong int64 against a strong uint64, both constants: folded
kx = {"value": {"dtype": "int64", "data": 9223372036854775807}}
ky = {"value": {"dtype": "uint64", "data": 9223372036854775808}}
mnodes.append({"op": "lt", "inputs": [kx, ky], "outputs": ["lt_const"]})
mouts["lt_const"] = np.array(True)
mnodes.append({"op": "eq", "inputs": [kx, ky], "outputs": ["eq_const"]})
mouts["eq_const"] = np.array(False)
# fused: not(ge(i, u)) and (le(u, i) or eq(i8, u))
mnodes += [{"op": "ge", "inputs": ["i", "u"], "outputs": ["f_ge"]},
           {"op": "logical_not", "inputs": ["f_ge"], "outputs": ["f_nge"]},
           {"op": "le", "inputs": ["u", "i"], "outputs": ["f_le"]},
           {"op": "eq", "inputs": ["i8", "u"], "outputs": ["f_eq"]},
           {"op": "logical_or", "inputs": ["f_le", "f_eq"], "outputs": ["f_or"]}]
mouts["f_nge"] = ~exact("ge", mi, mu)
mouts["f_or"] = exact("le", mu, mi) | exact("eq", m8, mu)
mvals = {"i": mi, "u": mu, "s": ms, "c": mc, "i8": m8, "i32": m32}
write("elemwise_compare_mixed_int",
      [{"id": k, "type": typ(v)} for k, v in mvals.items()],
      mnodes,
      [{"inputs": {k: value(v) for k, v in mvals.items()},
        "outputs": {k: value(v) for k, v in mouts.items()}}],
      functions={"main": {"inputs": list(mvals), "outputs": list(mouts)}})
