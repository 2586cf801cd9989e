"""Writes convnet.json: two convolution + max-pooling layers and a softmax
classifier (LeNet-like, on 28x28 images given as rows of 784 float32),
cross-entropy and SGD, with the gradients from the `grad` derived variable
(which builds them from conv2d_grad_weights, conv2d_grad_inputs and
pool2d_grad). Run with /usr/bin/python3; uses the data of tg-example-mlp-data."""
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
    node("grad", ["cost", "w1", "b1", "w2", "b2", "W3", "b3"], ["gw1", "gb1", "gw2", "gb2", "gW3", "gb3"], 19, G),
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
