"""composite op tests (FORMAT.md s7) with expectations from NumPy.

Run with Debian's /usr/bin/python3 (NumPy); rewrites
tests/data/ops/composite_*.json. The same files run three ways (see
tests/CMakeLists.txt): compiled kernels, the interpreter
(TG_COMPOSITE=interp) and no compiler at all (TG_CC=/nonexistent).
"""
import numpy as np

from common import typ, value, write

rng = np.random.default_rng(2010)


def s(dt):
    return {"dtype": dt, "shape": []}


def body(variables, nodes, inputs, outputs):
    return {"variables": variables, "nodes": nodes, "inputs": inputs, "outputs": outputs}


# 1. The 2010 paper's expressions, two outputs, broadcasting (3,4) with (4,).
a = rng.standard_normal((3, 4))
b = rng.standard_normal(4)
bd = body([{"id": "x", "type": s("float64")}, {"id": "y", "type": s("float64")}],
          [{"op": "sqr", "inputs": ["x"], "outputs": ["x2"]},
           {"op": "sqr", "inputs": ["y"], "outputs": ["y2"]},
           {"op": "mul", "inputs": [{"value": 2}, "x", "y"], "outputs": ["xy2"]},
           {"op": "add", "inputs": ["x2", "y2", "xy2"], "outputs": ["r1"]},
           {"op": "mul", "inputs": [{"value": 2}, "x"], "outputs": ["x_2"]},
           {"op": "mul", "inputs": [{"value": 3}, "y"], "outputs": ["y_3"]},
           {"op": "add", "inputs": ["x_2", "y_3"], "outputs": ["r2"]}],
          ["x", "y"], ["r1", "r2"])
r1 = a ** 2 + b ** 2 + 2 * a * b
# NumPy evaluates ((x*x + y*y) + (2*x)*y) the same way round as the body
r1 = ((a * a) + (b * b)) + ((2.0 * a) * b)
r2 = 2.0 * a + 3.0 * b
a0, b0 = np.zeros((0, 4)), np.zeros(4)
write("composite_paper",
      [{"id": "a", "type": {"dtype": "float64", "shape": [None, 4]}},
       {"id": "b", "type": typ(b)}],
      [{"op": "composite", "inputs": ["a", "b"], "outputs": ["p", "q"], "attrs": {"body": bd}}],
      [{"inputs": {"a": value(a), "b": value(b)}, "outputs": {"p": value(r1), "q": value(r2)},
        "rtol": 0, "atol": 0},
       {"inputs": {"a": value(a0), "b": value(b0)},
        "outputs": {"p": value(np.zeros((0, 4))), "q": value(np.zeros((0, 4)))}}])

# 2. Mixed dtypes: float32 x, int32 k, bool c. exp in float32, float32 *
# int32 -> float64 (NumPy's promotion), integer arithmetic wrapping, a bool
# result, switch, clip, maximum with NaN, sigmoid and tanh.
x = rng.standard_normal((2, 3, 5)).astype(np.float32)
x[0, 0, 0] = np.nan
k = rng.integers(-4, 5, size=(3, 1)).astype(np.int32)
c = rng.random(5) < 0.5
bd = body([{"id": "x", "type": s("float32")}, {"id": "k", "type": s("int32")},
           {"id": "c", "type": s("bool")}],
          [{"op": "exp", "inputs": ["x"], "outputs": ["ex"]},
           {"op": "mul", "inputs": ["ex", "k"], "outputs": ["m"]},
           {"op": "mul", "inputs": ["k", "k", {"value": 3}], "outputs": ["kk"]},
           {"op": "sub", "inputs": ["kk", {"value": 7}], "outputs": ["kk7"]},
           {"op": "gt", "inputs": ["k", {"value": 0}], "outputs": ["kp"]},
           {"op": "lt", "inputs": ["x", {"value": 0.0}], "outputs": ["xn"]},
           {"op": "logical_and", "inputs": ["kp", "xn"], "outputs": ["both"]},
           {"op": "logical_or", "inputs": ["both", "c"], "outputs": ["any"]},
           {"op": "switch", "inputs": ["c", "x", "m"], "outputs": ["sw"]},
           {"op": "clip", "inputs": ["x", {"value": -0.5}, {"value": 0.5}], "outputs": ["cl"]},
           {"op": "maximum", "inputs": ["x", {"value": 0.25}], "outputs": ["mx"]},
           {"op": "sigmoid", "inputs": ["x"], "outputs": ["sg"]},
           {"op": "tanh", "inputs": ["sg"], "outputs": ["th"]},
           {"op": "cast", "inputs": ["kk7"], "outputs": ["kf"], "attrs": {"dtype": "float32"}},
           {"op": "true_div", "inputs": ["kf", {"value": 4}], "outputs": ["kq"]}],
          ["x", "k", "c"], ["m", "kk7", "any", "sw", "cl", "mx", "th", "kq"])
with np.errstate(all="ignore"):
    ex = np.exp(x)
    m = ex.astype(np.float64) * k.astype(np.float64)
    kk7 = (k * k * np.int32(3)) - np.int32(7)
    anyv = ((k > 0) & (x < 0)) | c
    sw = np.where(c, x.astype(np.float64), m)
    cl = np.clip(x, np.float32(-0.5), np.float32(0.5))
    mx = np.maximum(x, np.float32(0.25))
    sg = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    th = np.tanh(sg)
    kq = kk7.astype(np.float32) / np.float32(4)
bshape = np.broadcast_shapes(x.shape, k.shape, c.shape)
outs = {"m": m, "kk7": kk7, "any": anyv, "sw": sw, "cl": cl, "mx": mx, "th": th, "kq": kq}
outs = {n: np.broadcast_to(v, bshape) for n, v in outs.items()}
write("composite_mixed",
      [{"id": "x", "type": typ(x)}, {"id": "k", "type": typ(k)}, {"id": "c", "type": typ(c)}],
      [{"op": "composite", "inputs": ["x", "k", "c"], "outputs": list(outs),
        "attrs": {"body": bd}}],
      [{"inputs": {"x": value(x), "k": value(k), "c": value(c)},
        # float32 exp and tanh: NumPy's and the GPU's (CUDA's expf and
        # tanhf, 2 ulp at most) may differ by 3 ulp of float32, 4e-7.
        "outputs": {n: value(v) for n, v in outs.items()}, "rtol": 4e-7}])

# 3. Ops only the interpreter runs (integer floor division and modulo,
# with their division-by-zero error), and a body output that is an input.
i = rng.integers(-20, 20, size=(4, 3)).astype(np.int64)
j = np.array([3, -4, 5], np.int64)
bd = body([{"id": "i", "type": s("int64")}, {"id": "j", "type": s("int64")}],
          [{"op": "int_div", "inputs": ["i", "j"], "outputs": ["q"]},
           {"op": "mod", "inputs": ["i", "j"], "outputs": ["r"]},
           {"op": "add", "inputs": ["q", "r"], "outputs": ["t"]}],
          ["i", "j"], ["t", "j"])
write("composite_intdiv",
      [{"id": "i", "type": typ(i)}, {"id": "j", "type": typ(j)}],
      [{"op": "composite", "inputs": ["i", "j"], "outputs": ["t", "jj"], "attrs": {"body": bd}}],
      [{"inputs": {"i": value(i), "j": value(j)},
        "outputs": {"t": value(i // j + i % j), "jj": value(np.broadcast_to(j, i.shape))}},
       {"inputs": {"i": value(i), "j": value(np.array([1, 0, 2], np.int64))},
        "error": "integer division by zero"}])

# 4. Longer and broadcast: rows of 1100 (two interpreter blocks each), an
# input of shape (1,) broadcast along them. (Sizes above the parallel threshold
# are checked against the unfused ops in tests/unit/test_composite.c.
# NumPy's log1p and glibc's may differ by an ulp: the default tolerance.)
u = rng.standard_normal((2, 1100))
v = rng.standard_normal(1)
bd = body([{"id": "u", "type": s("float64")}, {"id": "v", "type": s("float64")}],
          [{"op": "mul", "inputs": ["u", "v"], "outputs": ["uv"]},
           {"op": "log1p", "inputs": [{"value": 1.5}], "outputs": ["l"]},
           {"op": "add", "inputs": ["uv", "l"], "outputs": ["w"]},
           {"op": "abs", "inputs": ["w"], "outputs": ["aw"]},
           {"op": "sqrt", "inputs": ["aw"], "outputs": ["r"]}],
          ["u", "v"], ["r"])
write("composite_large",
      [{"id": "u", "type": typ(u)}, {"id": "v", "type": typ(v)}],
      [{"op": "composite", "inputs": ["u", "v"], "outputs": ["r"], "attrs": {"body": bd}}],
      [{"inputs": {"u": value(u), "v": value(v)},
        "outputs": {"r": value(np.sqrt(np.abs(u * v + np.log1p(1.5))))}}])

# 5. In place: the composite writes its result over an intermediate it
# reads (node key `inplace`), in every mode.
a = rng.standard_normal(6)
b = rng.standard_normal(6)
bd = body([{"id": "x", "type": s("float64")}, {"id": "w", "type": s("float64")}],
          [{"op": "mul", "inputs": ["x", "w"], "outputs": ["xw"]},
           {"op": "sub", "inputs": ["xw", "x"], "outputs": ["r"]}],
          ["x", "w"], ["r"])
write("composite_inplace",
      [{"id": "a", "type": typ(a)}, {"id": "b", "type": typ(b)}],
      [{"op": "neg", "inputs": ["a"], "outputs": ["na"]},
       {"op": "composite", "inputs": ["na", "b"], "outputs": ["y"], "inplace": {"0": 0},
        "attrs": {"body": bd}}],
      [{"inputs": {"a": value(a), "b": value(b)}, "outputs": {"y": value((-a) * b - (-a))},
        "rtol": 0, "atol": 0}])

# 6. float16 (the interpreter only: the generator has no half type),
# computing in float32 and rounding once per op, as NumPy.
h = rng.standard_normal((2, 3)).astype(np.float16)
g = rng.standard_normal(3).astype(np.float16)
bd = body([{"id": "x", "type": s("float16")}, {"id": "w", "type": s("float16")}],
          [{"op": "mul", "inputs": ["x", "w"], "outputs": ["xw"]},
           {"op": "add", "inputs": ["xw", "x"], "outputs": ["r"]}],
          ["x", "w"], ["r"])
write("composite_float16",
      [{"id": "h", "type": typ(h)}, {"id": "g", "type": typ(g)}],
      [{"op": "composite", "inputs": ["h", "g"], "outputs": ["y"], "attrs": {"body": bd}}],
      [{"inputs": {"h": value(h), "g": value(g)}, "outputs": {"y": value(h * g + h)},
        "rtol": 0, "atol": 0}])

# 7. A 0-d input (a learning rate): the kernel reads it once and still
# takes its contiguous loop; also a 0-d input meeting a broadcast one.
w = rng.standard_normal(1000)
gr = rng.standard_normal(1000)
lr = np.array(0.01)
bd = body([{"id": "w", "type": s("float64")}, {"id": "g", "type": s("float64")},
           {"id": "lr", "type": s("float64")}],
          [{"op": "mul", "inputs": ["lr", "g"], "outputs": ["step"]},
           {"op": "sub", "inputs": ["w", "step"], "outputs": ["w2"]}],
          ["w", "g", "lr"], ["w2"])
write("composite_scalar_input",
      [{"id": "w", "type": typ(w)}, {"id": "g", "type": typ(gr)}, {"id": "lr", "type": typ(lr)},
       {"id": "m", "type": {"dtype": "float64", "shape": [3, 1]}}],
      [{"op": "composite", "inputs": ["w", "g", "lr"], "outputs": ["w2"], "attrs": {"body": bd}},
       {"op": "composite", "inputs": ["m", "g", "lr"], "outputs": ["m2"], "attrs": {"body": bd}}],
      [{"inputs": {"w": value(w), "g": value(gr), "lr": value(lr),
                   "m": value(np.array([[1.0], [2.0], [-3.0]]))},
        "outputs": {"w2": value(w - lr * gr),
                    "m2": value(np.array([[1.0], [2.0], [-3.0]]) - lr * gr)},
        "rtol": 0, "atol": 0}])
