"""Convolution and pooling op tests with expectations from NumPy (run with
/usr/bin/python3): conv2d, conv2d_grad_inputs, conv2d_grad_weights,
pool2d, pool2d_grad.

The references are written from the definitions (Theano's conv2d and CPU
Pool), with direct loops over output positions, independent of tg's
im2col + gemm:
- conv2d: pad the input, flip the kernel in both spatial dims when
  filter_flip, and for every output (i, j) sum x_pad[..., i*s + a*d,
  j*s + b*d] * w[..., a, b] over channels and kernel positions.
- the gradients scatter the same products back (the adjoint of that sum);
  the generator checks <conv(x, w), gy> == <x, gi(gy)> == <w, gw(gy)>
  (the conv is bilinear, so the identity holds exactly up to rounding)
  and a central finite difference of one entry.
- pool2d: Theano's Pool.perform (region slices, out_shape); pool2d_grad:
  MaxPoolGrad (every element equal to the window's max gets the gradient)
  and AveragePoolGrad.

The ops are float-only: integer inputs compute in float32 (8/16-bit) or
float64 (wider), float16 in float32 rounded back to float16.

Files: conv_conv2d.json, conv_grad_inputs.json, conv_grad_weights.json,
conv_errors.json, pool_pool2d.json, pool_grad.json, pool_errors.json.
"""
import json
import os

import numpy as np

from common import OUT, typ, value

rng = np.random.default_rng(11)


def float_of(dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return dt
    return np.dtype("float32") if dt.kind == "b" or dt.itemsize <= 2 else np.dtype("float64")


TOL = {"float16": 2e-3, "float32": 1e-4, "float64": 1e-11}


def sample(dt, shape):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -3
        return rng.integers(lo, 4, size=shape).astype(dt)
    return np.round(rng.random(shape) * 2 - 1, 3).astype(dt)


# ---- conv reference ----

def geometry(xs, ws, attrs):
    bm = attrs.get("border_mode", "valid")
    sub = attrs.get("subsample", [1, 1])
    dil = attrs.get("filter_dilation", [1, 1])
    pads, outs, kds = [], [], []
    for d in range(2):
        k = ws[2 + d]
        kd = (k - 1) * dil[d] + 1
        if bm == "valid":
            p = 0
        elif bm == "full":
            p = kd - 1
        elif bm == "half":
            p = kd // 2
        else:
            p = bm[d]
        pads.append(p)
        kds.append(kd)
        outs.append((xs[2 + d] + 2 * p - kd) // sub[d] + 1)
    return pads, outs, sub, dil


def conv_ref(x, w, attrs):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    (ph, pw), (oh, ow), (sh, sw), (dh, dw) = geometry(x.shape, w.shape, attrs)
    if attrs.get("filter_flip", True):
        w = w[:, :, ::-1, ::-1]
    K, L = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * sh:i * sh + (K - 1) * dh + 1:dh, j * sw:j * sw + (L - 1) * dw + 1:dw]
            y[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w)
    return y


def grad_inputs_ref(w, gy, xshape, attrs):
    w = w.astype(np.float64)
    gy = gy.astype(np.float64)
    (ph, pw), (oh, ow), (sh, sw), (dh, dw) = geometry(xshape, w.shape, attrs)
    if attrs.get("filter_flip", True):
        w = w[:, :, ::-1, ::-1]
    K, L = w.shape[2:]
    N, C, H, W = xshape
    gxp = np.zeros((N, C, H + 2 * ph, W + 2 * pw))
    for i in range(oh):
        for j in range(ow):
            gxp[:, :, i * sh:i * sh + (K - 1) * dh + 1:dh, j * sw:j * sw + (L - 1) * dw + 1:dw] += \
                np.einsum("no,ockl->nckl", gy[:, :, i, j], w)
    return gxp[:, :, ph:ph + H, pw:pw + W]


def grad_weights_ref(x, gy, wshape, attrs):
    x = x.astype(np.float64)
    gy = gy.astype(np.float64)
    (ph, pw), (oh, ow), (sh, sw), (dh, dw) = geometry(x.shape, wshape, attrs)
    K, L = wshape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    gw = np.zeros(wshape)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * sh:i * sh + (K - 1) * dh + 1:dh, j * sw:j * sw + (L - 1) * dw + 1:dw]
            gw += np.einsum("nckl,no->ockl", patch, gy[:, :, i, j])
    if attrs.get("filter_flip", True):
        gw = gw[:, :, ::-1, ::-1]
    return gw


def check_grads(x, w, attrs):
    """The adjoint identities and one finite difference, in float64."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    y = conv_ref(x, w, attrs)
    gy = rng.random(y.shape) - 0.5
    gx = grad_inputs_ref(w, gy, x.shape, attrs)
    gw = grad_weights_ref(x, gy, w.shape, attrs)
    s = np.sum(y * gy)
    assert np.isclose(s, np.sum(gx * x), rtol=1e-10, atol=1e-10), attrs
    assert np.isclose(s, np.sum(gw * w), rtol=1e-10, atol=1e-10), attrs
    eps = 1e-6
    for arr, g in ((x, gx), (w, gw)):
        idx = tuple(rng.integers(0, n) for n in arr.shape)
        old = arr[idx]
        arr[idx] = old + eps
        fp = np.sum(conv_ref(x, w, attrs) * gy)
        arr[idx] = old - eps
        fm = np.sum(conv_ref(x, w, attrs) * gy)
        arr[idx] = old
        assert abs((fp - fm) / (2 * eps) - g[idx]) < 1e-6, attrs


# ---- pool reference (Theano's Pool.perform) ----

def pool_out_len(v, ws, stride, pad, ignore_border):
    if ignore_border:
        return max(0, (v + 2 * pad - ws) // stride + 1)
    if stride >= ws:
        return (v - 1) // stride + 1
    return max(0, (v - 1 - ws + stride) // stride) + 1


def pool_regions(shape, p):
    ws, st, pad = p["ws"], p.get("stride", p["ws"]), p.get("pad", [0, 0])
    ib = p.get("ignore_border", True)
    inc = p.get("mode", "max") == "average_inc_pad"
    regs = []
    for d in range(2):
        v = shape[-2 + d]
        img = v + 2 * pad[d]
        r = []
        for j in range(pool_out_len(v, ws[d], st[d], pad[d], ib)):
            start = j * st[d]
            end = min(start + ws[d], img)
            if not inc:
                start = max(start, pad[d])
                end = min(end, img - pad[d])
            r.append((start, end))
        regs.append(r)
    return regs, pad


def pool_ref(x, p):
    mode = p.get("mode", "max")
    x = x.astype(np.float64)
    regs, pad = pool_regions(x.shape, p)
    y = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(pad[0], pad[0]), (pad[1], pad[1])])
    z = np.zeros(x.shape[:-2] + (len(regs[0]), len(regs[1])))
    func = {"max": np.max, "sum": np.sum}.get(mode, np.average)
    for i, (r0, r1) in enumerate(regs[0]):
        for j, (c0, c1) in enumerate(regs[1]):
            win = y[..., r0:r1, c0:c1].reshape(x.shape[:-2] + (-1,))
            z[..., i, j] = func(win, axis=-1)
    return z


def pool_grad_ref(x, z, gz, p):
    mode = p.get("mode", "max")
    x = x.astype(np.float64)
    z = z.astype(np.float64)
    gz = gz.astype(np.float64)
    regs, pad = pool_regions(x.shape, p)
    H, W = x.shape[-2:]
    y = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(pad[0], pad[0]), (pad[1], pad[1])])
    gx = np.zeros(y.shape)
    ws, st = p["ws"], p.get("stride", p["ws"])
    for i, (r0, r1) in enumerate(regs[0]):
        for j, (c0, c1) in enumerate(regs[1]):
            if mode == "max":
                # MaxPoolGrad: the padded window, cut at the padded end
                a0, a1 = i * st[0], min(i * st[0] + ws[0], y.shape[-2])
                b0, b1 = j * st[1], min(j * st[1] + ws[1], y.shape[-1])
                hit = y[..., a0:a1, b0:b1] == z[..., i, j][..., None, None]
                gx[..., a0:a1, b0:b1] += hit * gz[..., i, j][..., None, None]
            else:
                v = gz[..., i, j]
                if mode != "sum":
                    v = v / ((r1 - r0) * (c1 - c0))
                gx[..., r0:r1, c0:c1] += v[..., None, None]
    return gx[..., pad[0]:pad[0] + H, pad[1]:pad[1] + W]


# ---- files ----

def write(name, variables, nodes, tests, functions):
    """One line per variable, node, function and test case."""
    def dump(v):
        return json.dumps(v, separators=(",", ":"))

    def block(v):
        if isinstance(v, list):
            return "[\n" + ",\n".join("  " + dump(e) for e in v) + "\n ]"
        return "{\n" + ",\n".join("  " + dump(k) + ": " + dump(e) for k, e in v.items()) + "\n }"

    text = ("{\n" + f' "format": "tg-graph", "version": 1, "name": {dump(name)},\n'
            + ' "variables": ' + block(variables) + ",\n"
            + ' "nodes": ' + block(nodes) + ",\n"
            + ' "functions": ' + block(functions) + ",\n"
            + ' "meta": {"tests": ' + block(tests) + "}\n}\n")
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        f.write(text)


def short_value(a):
    a = np.asarray(a)
    v = value(a)
    if a.dtype in (np.float32, np.float16):
        def conv(x):
            if isinstance(x, list):
                return [conv(e) for e in x]
            return x if isinstance(x, str) else float(str(a.dtype.type(x)))
        v["data"] = conv(v["data"])
    return v


class File:
    """One graph file; each case is its own function."""

    def __init__(self, name):
        self.name = name
        self.vars, self.nodes, self.funcs, self.tests = [], [], {}, []

    def case(self, op, inputs, attrs=None, want=None, error=None, pre=None, shapes=None,
             const=()):
        """inputs: arrays; const: indices of inputs written as inline
        constants; pre: a transpose of input 0 inside the graph (axes), so
        that the op sees a non-contiguous array; shapes: declared shapes."""
        k = len(self.funcs)
        ins, ids, feed = [], [], {}
        for i, a in enumerate(inputs):
            if i in const:
                ins.append({"value": value(a)})
                continue
            vid = f"c{k}_x{i}"
            t = typ(a)
            if shapes is not None and shapes[i] is not None:
                t["shape"] = shapes[i]
            if i == 0 and pre is not None:
                t["shape"] = [t["shape"][ax] for ax in np.argsort(pre)]
                a = np.transpose(a, np.argsort(pre))
            self.vars.append({"id": vid, "type": t})
            ids.append(vid)
            feed[vid] = short_value(a)
            ins.append(vid)
        if pre is not None:
            src = ins[0]
            ins[0] = f"c{k}_t"
            self.nodes.append({"op": "transpose", "inputs": [src], "outputs": [ins[0]],
                               "attrs": {"axes": list(pre)}})
        node = {"op": op, "inputs": ins, "outputs": [f"c{k}_y"]}
        if attrs:
            node["attrs"] = attrs
        self.nodes.append(node)
        fname = f"c{k}"
        self.funcs[fname] = {"inputs": ids, "outputs": [f"c{k}_y"]}
        t = {"function": fname, "inputs": feed}
        if error:
            t["error"] = error
        else:
            t["outputs"] = {f"c{k}_y": short_value(want)}
            if want.dtype.kind == "f":
                t["rtol"] = t["atol"] = TOL[want.dtype.name]
        self.tests.append(t)

    def write(self):
        write(self.name, self.vars, self.nodes, self.tests, self.funcs)


CONV_ATTRS = [
    {},
    {"filter_flip": False},
    {"border_mode": "full"},
    {"border_mode": "full", "filter_flip": False},
    {"border_mode": "half"},
    {"border_mode": [1, 2]},
    {"border_mode": [0, 1], "filter_flip": False},
    {"subsample": [2, 1]},
    {"subsample": [2, 3], "border_mode": "half"},
    {"subsample": [3, 2], "border_mode": "full", "filter_flip": False},
    {"filter_dilation": [2, 1]},
    {"filter_dilation": [2, 2], "border_mode": "half"},
    {"filter_dilation": [1, 2], "border_mode": "full", "subsample": [2, 2]},
    {"filter_dilation": [2, 2], "border_mode": [1, 0], "subsample": [1, 2],
     "filter_flip": False},
]

# float64 and float32 in turn, both for every third attribute set
DTS = [("float64", "float32"), ("float64",), ("float32",)]

KERNELS = [(3, 2), (2, 3), (3, 3), (1, 1)]


def conv_case_shapes(idx):
    K, L = KERNELS[idx % len(KERNELS)]
    return (1, 2, 6, 5), (3, 2, K, L)


# ---- conv2d ----
F = File("conv_conv2d")
for idx, at in enumerate(CONV_ATTRS):
    xs, ws = conv_case_shapes(idx)
    check_grads(sample("float64", xs), sample("float64", ws), at)
    for dt in DTS[idx % 3]:
        x, w = sample(dt, xs), sample(dt, ws)
        F.case("conv2d", [x, w], at, conv_ref(x, w, at).astype(dt))
# half with an even kernel (asymmetric output length), unknown static shapes
x, w = sample("float64", (1, 3, 5, 6)), sample("float64", (2, 3, 2, 4))
at = {"border_mode": "half"}
check_grads(x, w, at)
F.case("conv2d", [x, w], at, conv_ref(x, w, at), shapes=[[None] * 4, [None] * 4])
# float16 (computes in float32), int8 and int32 (float-only: float32 / float64)
x, w = sample("float16", (2, 2, 5, 5)), sample("float16", (2, 2, 3, 3))
F.case("conv2d", [x, w], {"border_mode": "half"},
       conv_ref(x, w, {"border_mode": "half"}).astype(np.float16))
x, w = sample("int8", (1, 2, 4, 5)), sample("int8", (2, 2, 2, 2))
F.case("conv2d", [x, w], {}, conv_ref(x, w, {}).astype(np.float32))
x, w = sample("int32", (1, 1, 4, 4)), sample("int32", (1, 1, 3, 3))
F.case("conv2d", [x, w], {"border_mode": "full"},
       conv_ref(x, w, {"border_mode": "full"}).astype(np.float64))
x, w = sample("uint8", (1, 2, 4, 4)), sample("uint8", (2, 2, 2, 2))
F.case("conv2d", [x, w], {"border_mode": "half"},
       conv_ref(x, w, {"border_mode": "half"}).astype(np.float32))
x, w = sample("bool", (1, 2, 4, 4)), sample("bool", (2, 2, 3, 3))
F.case("conv2d", [x, w], {"filter_flip": False},
       conv_ref(x, w, {"filter_flip": False}).astype(np.float32))
# mixed float32 x float64 promotes to float64
x, w = sample("float32", (1, 2, 4, 4)), sample("float64", (2, 2, 2, 2))
F.case("conv2d", [x, w], {}, conv_ref(x, w, {}))
# a non-contiguous input (a transpose inside the graph)
x, w = sample("float64", (2, 3, 5, 4)), sample("float64", (2, 3, 3, 2))
F.case("conv2d", [x, w], {"border_mode": [1, 1], "subsample": [2, 1]},
       conv_ref(x, w, {"border_mode": [1, 1], "subsample": [2, 1]}), pre=(1, 0, 3, 2))
# a batch larger than a few images, more channels (several gemm columns)
x, w = sample("float32", (9, 4, 6, 6)), sample("float32", (5, 4, 3, 3))
F.case("conv2d", [x, w], {"border_mode": "half"},
       conv_ref(x, w, {"border_mode": "half"}).astype(np.float32))
# large enough to run in parallel: one image per thread (batch 4), and a
# single image with a threaded gemm (batch 1); which path runs depends on
# the thread count (run with OMP_NUM_THREADS=1, 2, 3, 8 to see each)
BIG = [((4, 4, 8, 8), (8, 4, 3, 3), {"border_mode": "half"}),
       ((1, 8, 12, 12), (8, 8, 3, 3), {"border_mode": "half", "filter_flip": False})]
for xs, ws, at in BIG:
    x, w = sample("float32", xs), sample("float32", ws)
    F.case("conv2d", [x, w], at, conv_ref(x, w, at).astype(np.float32))
# empty batch, no channels, no filters
x, w = sample("float64", (0, 2, 5, 5)), sample("float64", (3, 2, 3, 3))
F.case("conv2d", [x, w], {}, np.zeros((0, 3, 3, 3)))
x, w = sample("float64", (2, 0, 5, 5)), sample("float64", (3, 0, 3, 3))
F.case("conv2d", [x, w], {}, np.zeros((2, 3, 3, 3)))
x, w = sample("float32", (2, 2, 5, 5)), sample("float32", (0, 2, 3, 3))
F.case("conv2d", [x, w], {"border_mode": "full"}, np.zeros((2, 0, 7, 7), np.float32))
# kernel as large as the input: one output
x, w = sample("float64", (1, 1, 3, 3)), sample("float64", (1, 1, 3, 3))
F.case("conv2d", [x, w], {}, conv_ref(x, w, {}))
F.write()

# ---- conv2d_grad_inputs / conv2d_grad_weights ----
GI = File("conv_grad_inputs")
GW = File("conv_grad_weights")
for idx, at in enumerate(CONV_ATTRS):
    xs, ws = conv_case_shapes(idx)
    (_, _), (oh, ow), _, _ = geometry(xs, ws, at)
    for dt in DTS[idx % 3]:
        x, w = sample(dt, xs), sample(dt, ws)
        gy = sample(dt, (xs[0], ws[0], oh, ow))
        # shp as a run-time input, then as an inline constant (static shape)
        const = (2,) if idx % 2 else ()
        GI.case("conv2d_grad_inputs", [w, gy, np.array(xs, np.int64)], at,
                grad_inputs_ref(w, gy, xs, at).astype(dt), const=const)
        GW.case("conv2d_grad_weights", [x, gy, np.array(ws, np.int64)], at,
                grad_weights_ref(x, gy, ws, at).astype(dt), const=const)
# subsample: the input length is not implied by the output length
at = {"subsample": [2, 2]}
w, gy = sample("float64", (2, 1, 3, 3)), sample("float64", (1, 2, 2, 2))
for H in (5, 6):
    GI.case("conv2d_grad_inputs", [w, gy, np.array([1, 1, H, 6], np.int64)], at,
            grad_inputs_ref(w, gy, (1, 1, H, 6), at))
    x = sample("float64", (1, 1, H, 6))
    GW.case("conv2d_grad_weights", [x, gy, np.array([2, 1, 3, 3], np.int64)], at,
            grad_weights_ref(x, gy, (2, 1, 3, 3), at))
for xs, ws, at in BIG:
    (_, _), (oh, ow), _, _ = geometry(xs, ws, at)
    x, w = sample("float32", xs), sample("float32", ws)
    gy = sample("float32", (xs[0], ws[0], oh, ow))
    GI.case("conv2d_grad_inputs", [w, gy, np.array(xs, np.int64)], at,
            grad_inputs_ref(w, gy, xs, at).astype(np.float32))
    GW.case("conv2d_grad_weights", [x, gy, np.array(ws, np.int64)], at,
            grad_weights_ref(x, gy, ws, at).astype(np.float32))
# float16, many images, non-contiguous gradient, empty batch
w, gy = sample("float16", (2, 2, 3, 3)), sample("float16", (2, 2, 4, 4))
GI.case("conv2d_grad_inputs", [w, gy, np.array([2, 2, 4, 4], np.int64)], {"border_mode": "half"},
        grad_inputs_ref(w, gy, (2, 2, 4, 4), {"border_mode": "half"}).astype(np.float16))
x = sample("float16", (2, 2, 4, 4))
GW.case("conv2d_grad_weights", [x, gy, np.array([2, 2, 3, 3], np.int64)], {"border_mode": "half"},
        grad_weights_ref(x, gy, (2, 2, 3, 3), {"border_mode": "half"}).astype(np.float16))
w, gy = sample("float32", (4, 3, 3, 3)), sample("float32", (7, 4, 4, 4))
x = sample("float32", (7, 3, 6, 6))
GI.case("conv2d_grad_inputs", [w, gy, np.array([7, 3, 6, 6], np.int64)], {},
        grad_inputs_ref(w, gy, (7, 3, 6, 6), {}).astype(np.float32))
GW.case("conv2d_grad_weights", [x, gy, np.array([4, 3, 3, 3], np.int64)], {},
        grad_weights_ref(x, gy, (4, 3, 3, 3), {}).astype(np.float32))
w, gy = sample("float64", (2, 3, 2, 2)), sample("float64", (2, 2, 4, 3))
GI.case("conv2d_grad_inputs", [w, gy, np.array([2, 3, 5, 4], np.int64)], {"filter_flip": False},
        grad_inputs_ref(w, gy, (2, 3, 5, 4), {"filter_flip": False}), pre=(1, 0, 3, 2))
x = sample("float64", (2, 3, 5, 4))
GW.case("conv2d_grad_weights", [x, gy, np.array([2, 3, 2, 2], np.int64)], {},
        grad_weights_ref(x, gy, (2, 3, 2, 2), {}), pre=(0, 1, 3, 2))
w, gy = sample("float64", (2, 3, 2, 2)), sample("float64", (0, 2, 4, 3))
GI.case("conv2d_grad_inputs", [w, gy, np.array([0, 3, 5, 4], np.int64)], {},
        np.zeros((0, 3, 5, 4)))
x = sample("float64", (0, 3, 5, 4))
GW.case("conv2d_grad_weights", [x, gy, np.array([2, 3, 2, 2], np.int64)], {},
        np.zeros((2, 3, 2, 2)))
GI.write()
GW.write()

# ---- run-time errors ----
E = File("conv_errors")
U4 = [None] * 4
x, w = sample("float64", (1, 2, 4, 4)), sample("float64", (1, 3, 2, 2))
E.case("conv2d", [x, w], {}, error="channels", shapes=[U4, U4])
x, w = sample("float64", (1, 1, 2, 4)), sample("float64", (1, 1, 3, 3))
E.case("conv2d", [x, w], {}, error="impossible output shape", shapes=[U4, U4])
x, w = sample("float64", (1, 1, 4, 4)), sample("float64", (1, 1, 3, 3))
E.case("conv2d", [x, w], {"filter_dilation": [2, 1]}, error="impossible output shape",
       shapes=[U4, U4])
w, gy = sample("float64", (2, 1, 3, 3)), sample("float64", (1, 2, 2, 2))
E.case("conv2d_grad_inputs", [w, gy, np.array([1, 1, 5, 5], np.int64)], {},
       error="output gradient has shape", shapes=[U4, U4, None])
E.case("conv2d_grad_inputs", [w, gy, np.array([1, 1, 4], np.int64)], {},
       error="4 entries", shapes=[U4, U4, [None]])
E.case("conv2d_grad_inputs", [w, gy, np.array([1, 2, 4, 4], np.int64)], {},
       error="channels", shapes=[U4, U4, None])
x = sample("float64", (1, 1, 4, 4))
E.case("conv2d_grad_weights", [x, gy, np.array([3, 1, 3, 3], np.int64)], {},
       error="output gradient has shape", shapes=[U4, U4, None])
E.case("conv2d_grad_weights", [x, gy, np.array([2, 1, -3, 3], np.int64)], {},
       error="negative length", shapes=[U4, U4, None])
# shp's lengths past 2^63 - 1 in all (each fits, and with the largest
# stride the output gradient is 1x1): too large, as in NumPy, not their
# product overflowing (UBSan: conv.c, gi_run's and gw_run's total)
big = {"subsample": [2**31 - 1, 2**31 - 1]}
E.case("conv2d_grad_inputs", [np.ones((1, 2, 1, 1)), np.ones((2, 1, 1, 1)),
                              np.array([2, 2, 2**31 - 1, 2**31 - 1], np.int64)], big,
       error="too large", shapes=[U4, U4, None])
E.case("conv2d_grad_weights", [np.ones((1, 2, 1, 1)), np.ones((1, 2, 1, 1)),
                               np.array([2, 2, 2**31 - 1, 2**31 - 1], np.int64)],
       dict(big, border_mode="full"), error="too large", shapes=[U4, U4, None])
E.write()

# ---- pool2d ----
POOL_ATTRS = [
    {"ws": [2, 2]},
    {"ws": [2, 3]},
    {"ws": [3, 2], "stride": [1, 1]},
    {"ws": [2, 2], "stride": [1, 2]},
    {"ws": [3, 3], "stride": [2, 2]},
    {"ws": [2, 2], "ignore_border": False},
    {"ws": [3, 2], "stride": [2, 1], "ignore_border": False},
    {"ws": [2, 3], "stride": [3, 1], "ignore_border": False},
    {"ws": [2, 2], "pad": [1, 1]},
    {"ws": [3, 3], "stride": [2, 2], "pad": [1, 2]},
    {"ws": [3, 2], "stride": [1, 1], "pad": [2, 1]},
]
MODES = ["max", "sum", "average_inc_pad", "average_exc_pad"]

P = File("pool_pool2d")
PG = File("pool_grad")
for ia, pa in enumerate(POOL_ATTRS):
    for im, mode in enumerate(MODES):
        at = dict(pa, mode=mode)
        for dt in DTS[(ia + im) % 3]:
            x = sample(dt, (1, 1, 6, 7))
            if mode == "max" and dt == "float64":
                x[0, 0, :2, :2] = 0.5  # ties: every maximum gets the gradient
            z = pool_ref(x, at)
            P.case("pool2d", [x], at, z.astype(dt))
            gz = sample(dt, z.shape)
            PG.case("pool2d_grad", [x, z.astype(dt), gz], at,
                    pool_grad_ref(x, z.astype(dt), gz, at).astype(dt))
# leading dims: none, one, three; unknown static shapes
for shp in ((5, 5), (3, 4, 5), (2, 1, 2, 5, 4)):
    x = sample("float64", shp)
    at = {"ws": [2, 2], "ignore_border": False, "mode": "average_exc_pad"}
    P.case("pool2d", [x], at, pool_ref(x, at), shapes=[[None] * len(shp)])
    at = {"ws": [2, 2], "pad": [1, 1], "mode": "max"}
    z = pool_ref(x, at)
    gz = sample("float64", z.shape)
    PG.case("pool2d_grad", [x, z, gz], at, pool_grad_ref(x, z, gz, at))
# default attrs besides ws, float16 and integers (float-only), NaN
x = sample("float16", (1, 2, 4, 4))
for mode in MODES:
    at = {"ws": [2, 2], "mode": mode}
    P.case("pool2d", [x], at, pool_ref(x, at).astype(np.float16))
x = sample("int16", (2, 4, 5))
P.case("pool2d", [x], {"ws": [2, 2]}, pool_ref(x, {"ws": [2, 2]}).astype(np.float32))
x = sample("bool", (2, 4, 5))
at = {"ws": [2, 2], "stride": [1, 1], "mode": "average_exc_pad"}
P.case("pool2d", [x], at, pool_ref(x, at).astype(np.float32))
x = sample("uint16", (2, 4, 5))
P.case("pool2d", [x], {"ws": [2, 3], "ignore_border": False},
       pool_ref(x, {"ws": [2, 3], "ignore_border": False}).astype(np.float32))
x = sample("int64", (2, 4, 5))
at = {"ws": [3, 2], "stride": [1, 2], "mode": "sum"}
P.case("pool2d", [x], at, pool_ref(x, at).astype(np.float64))
x = np.array([[1.0, np.nan, 2.0, 3.0], [0.0, 1.0, 5.0, -1.0]])
P.case("pool2d", [x], {"ws": [2, 2]}, np.array([[np.nan, 5.0]]))
# a non-contiguous input, windows larger than the input (no output), empty
x = sample("float64", (2, 6, 5))
at = {"ws": [2, 3], "stride": [2, 1], "mode": "average_inc_pad", "pad": [1, 1]}
P.case("pool2d", [x], at, pool_ref(x, at), pre=(0, 2, 1))
x = sample("float64", (2, 2, 3))
P.case("pool2d", [x], {"ws": [3, 3]}, np.zeros((2, 0, 1)))
P.case("pool2d", [x], {"ws": [3, 3], "ignore_border": False},
       pool_ref(x, {"ws": [3, 3], "ignore_border": False}))
x = sample("float32", (0, 3, 4, 4))
P.case("pool2d", [x], {"ws": [2, 2]}, np.zeros((0, 3, 2, 2), np.float32))
x = sample("float16", (2, 4, 4))
at = {"ws": [2, 2], "stride": [1, 1], "mode": "average_inc_pad"}
z = pool_ref(x, at).astype(np.float16)
gz = sample("float16", z.shape)
PG.case("pool2d_grad", [x, z, gz], at, pool_grad_ref(x, z, gz, at).astype(np.float16))
P.write()
PG.write()

E = File("pool_errors")
x = sample("float64", (1, 1, 4, 4))
z = np.zeros((1, 1, 3, 3))
E.case("pool2d_grad", [x, z, z], {"ws": [2, 2]}, error="pooled shape",
       shapes=[[None] * 4, [None] * 4, [None] * 4])
x = sample("float64", (1, 0, 4))
E.case("pool2d", [x], {"ws": [2, 2], "stride": [1, 1], "ignore_border": False},
       error="no element",
       shapes=[[None] * 3])
E.write()
