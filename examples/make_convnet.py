"""Writes convnet.json: two convolution + max-pooling layers and a softmax
classifier (LeNet-like, on 28x28 images given as rows of 784 float32),
cross-entropy and SGD, with the gradients written out through
conv2d_grad_weights, conv2d_grad_inputs and pool2d_grad (until `grad`
lands). Run with /usr/bin/python3; uses the data of tg-example-mlp-data."""
import base64
import json

import numpy as np

rng = np.random.default_rng(1998)


def init(shape, fan_in):
    return (rng.standard_normal(shape) * np.sqrt(1.0 / fan_in)).astype(np.float32)


def val(a):
    return {"dtype": "float32", "shape": list(a.shape), "base64": base64.b64encode(a.tobytes()).decode()}


w1, w2, W3 = init((8, 1, 5, 5), 25), init((16, 8, 5, 5), 200), np.zeros((256, 10), np.float32)
b1, b2, b3 = np.zeros(8, np.float32), np.zeros(16, np.float32), np.zeros(10, np.float32)


def tr(line, code):
    return [{"file": "convnet.py", "line": line, "function": "build", "code": code}]


def node(op, inputs, outputs, line, code, attrs=None, name=None):
    n = {"op": op, "inputs": inputs, "outputs": outputs, "trace": tr(line, code)}
    if attrs:
        n["attrs"] = attrs
    if name:
        n["name"] = name
    return n


POOL = {"ws": [2, 2], "mode": "max"}
L1 = "a1 = T.tanh(conv2d(img, w1) + b1.dimshuffle('x', 0, 'x', 'x'))"
L2 = "a2 = T.tanh(conv2d(p1, w2) + b2.dimshuffle('x', 0, 'x', 'x'))"
G = "grads = T.grad(cost, params)"
nodes = [
    node("reshape", ["x", {"value": {"dtype": "int64", "shape": [4], "data": [-1, 1, 28, 28]}}], ["img"], 9,
         "img = x.reshape((-1, 1, 28, 28))"),
    node("conv2d", ["img", "w1"], ["c1"], 10, L1),
    node("dimshuffle", ["b1"], ["b1b"], 10, L1, attrs={"order": ["x", 0, "x", "x"]}),
    node("add", ["c1", "b1b"], ["z1"], 10, L1),
    node("tanh", ["z1"], ["a1"], 10, L1, name="layer1"),
    node("pool2d", ["a1"], ["p1"], 11, "p1 = pool_2d(a1, (2, 2))", attrs=POOL),
    node("conv2d", ["p1", "w2"], ["c2"], 12, L2),
    node("dimshuffle", ["b2"], ["b2b"], 12, L2, attrs={"order": ["x", 0, "x", "x"]}),
    node("add", ["c2", "b2b"], ["z2"], 12, L2),
    node("tanh", ["z2"], ["a2"], 12, L2, name="layer2"),
    node("pool2d", ["a2"], ["p2"], 13, "p2 = pool_2d(a2, (2, 2))", attrs=POOL),
    node("flatten", ["p2"], ["f"], 14, "f = p2.flatten(2)", attrs={"ndim": 2}),
    node("dot", ["f", "W3"], ["fW3"], 15, "p = T.nnet.softmax(T.dot(f, W3) + b3)"),
    node("add", ["fW3", "b3"], ["logits"], 15, "p = T.nnet.softmax(T.dot(f, W3) + b3)"),
    node("softmax", ["logits"], ["p"], 15, "p = T.nnet.softmax(T.dot(f, W3) + b3)"),
    node("categorical_crossentropy", ["p", "y"], ["xent"], 16, "cost = T.nnet.categorical_crossentropy(p, y).mean()"),
    node("mean", ["xent"], ["cost"], 16, "cost = T.nnet.categorical_crossentropy(p, y).mean()", name="cost"),
    node("argmax", ["p"], ["prediction"], 17, "prediction = T.argmax(p, axis=-1)", attrs={"axis": -1}),
    # backward
    node("shape_i", ["x"], ["n"], 19, G, attrs={"i": 0}),
    node("cast", ["n"], ["n_f"], 19, G, attrs={"dtype": "float32"}),
    node("sub", ["p", "y"], ["p_minus_y"], 19, G),
    node("true_div", ["p_minus_y", "n_f"], ["g_logits"], 19, G),
    node("transpose", ["f"], ["f_T"], 19, G),
    node("dot", ["f_T", "g_logits"], ["gW3"], 19, G),
    node("sum", ["g_logits"], ["gb3"], 19, G, attrs={"axis": 0}),
    node("transpose", ["W3"], ["W3_T"], 19, G),
    node("dot", ["g_logits", "W3_T"], ["g_f"], 19, G),
    node("shape", ["p2"], ["p2_shape"], 19, G),
    node("reshape", ["g_f", "p2_shape"], ["g_p2"], 19, G),
    node("pool2d_grad", ["a2", "p2", "g_p2"], ["g_a2"], 19, G, attrs=POOL),
    node("sqr", ["a2"], ["a2_sq"], 19, G),
    node("sub", [{"value": 1}, "a2_sq"], ["da2"], 19, G),
    node("mul", ["g_a2", "da2"], ["g_z2"], 19, G),
    node("shape", ["w2"], ["w2_shape"], 19, G),
    node("conv2d_grad_weights", ["p1", "g_z2", "w2_shape"], ["gw2"], 19, G),
    node("sum", ["g_z2"], ["gb2"], 19, G, attrs={"axis": [0, 2, 3]}),
    node("shape", ["p1"], ["p1_shape"], 19, G),
    node("conv2d_grad_inputs", ["w2", "g_z2", "p1_shape"], ["g_p1"], 19, G),
    node("pool2d_grad", ["a1", "p1", "g_p1"], ["g_a1"], 19, G, attrs=POOL),
    node("sqr", ["a1"], ["a1_sq"], 19, G),
    node("sub", [{"value": 1}, "a1_sq"], ["da1"], 19, G),
    node("mul", ["g_a1", "da1"], ["g_z1"], 19, G),
    node("shape", ["w1"], ["w1_shape"], 19, G),
    node("conv2d_grad_weights", ["img", "g_z1", "w1_shape"], ["gw1"], 19, G),
    node("sum", ["g_z1"], ["gb1"], 19, G, attrs={"axis": [0, 2, 3]}),
]
params = ["w1", "b1", "w2", "b2", "W3", "b3"]
for v in params:
    nodes += [node("mul", [{"value": 0.05}, "g" + v], ["step_" + v], 21, "updates"),
              node("sub", [v, "step_" + v], [v + "_next"], 21, "updates")]
g = {
    "format": "tg-graph", "version": 1, "name": "convnet: two conv+pool layers and a softmax classifier",
    "variables": [{"id": "x", "type": {"dtype": "float32", "shape": [None, 784]}},
                  {"id": "y", "type": {"dtype": "float32", "shape": [None, 10]}}] +
                 [{"id": k, "type": {"dtype": "float32", "shape": list(a.shape)}, "shared": val(a)}
                  for k, a in [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("W3", W3), ("b3", b3)]],
    "nodes": nodes,
    "functions": {"train": {"inputs": ["x", "y"], "outputs": ["cost"], "updates": {v: v + "_next" for v in params}},
                  "predict": {"inputs": ["x"], "outputs": ["prediction"]}},
    "meta": {"generator": "examples/make_convnet.py"},
}
with open("convnet.json", "w") as f:
    json.dump(g, f, indent=1)
    f.write("\n")
