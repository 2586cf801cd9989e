"""Writes mlp.json: the MLP of the Theano 2012 paper's benchmark (784 inputs,
500 tanh hidden units, 10-way softmax, cross-entropy, SGD), float32, its
gradients from a `grad` node, and its initial weights in mlp/*.npy. Run
with /usr/bin/python3."""
import json
import os

import numpy as np

rng = np.random.default_rng(2012)
n_in, n_hid, n_out = 784, 500, 10
lim = np.sqrt(6.0 / (n_in + n_hid))
W1 = rng.uniform(-lim, lim, (n_in, n_hid)).astype(np.float32)
W2 = np.zeros((n_hid, n_out), np.float32)
os.makedirs("mlp", exist_ok=True)
np.save("mlp/W1.npy", W1)
np.save("mlp/W2.npy", W2)


def tr(line, code):
    return [{"file": "mlp.py", "line": line, "function": "build", "code": code}]


def node(op, inputs, outputs, line, code, attrs=None, name=None):
    n = {"op": op, "inputs": inputs, "outputs": outputs, "trace": tr(line, code)}
    if attrs:
        n["attrs"] = attrs
    if name:
        n["name"] = name
    return n


H = "h = T.tanh(T.dot(x, W1) + b1)"
P = "p = T.nnet.softmax(T.dot(h, W2) + b2)"
C = "cost = T.nnet.categorical_crossentropy(p, y).mean()"
G = "gW1, gb1, gW2, gb2 = T.grad(cost, [W1, b1, W2, b2])"
U = "updates = [(v, v - lr * g) for v, g in zip(params, grads)]"
f32 = lambda shape: {"dtype": "float32", "shape": shape}
g = {
    "format": "tg-graph", "version": 1,
    "name": "MLP 784-500-10 (Theano 2012 benchmark)",
    "variables": [
        {"id": "x", "type": f32([None, n_in])},
        {"id": "y", "type": f32([None, n_out]), "name": "y (one-hot)"},
        {"id": "W1", "type": f32([n_in, n_hid]), "shared": {"npy": "mlp/W1.npy"}},
        {"id": "b1", "type": f32([n_hid]), "shared": {"dtype": "float32", "shape": [n_hid], "base64":
                                                      __import__("base64").b64encode(np.zeros(n_hid, np.float32).tobytes()).decode()}},
        {"id": "W2", "type": f32([n_hid, n_out]), "shared": {"npy": "mlp/W2.npy"}},
        {"id": "b2", "type": f32([n_out]), "shared": {"dtype": "float32", "shape": [n_out], "data": [0] * n_out}},
    ],
    "nodes": [
        node("dot", ["x", "W1"], ["xW1"], 10, H),
        node("add", ["xW1", "b1"], ["pre_h"], 10, H),
        node("tanh", ["pre_h"], ["h"], 10, H, name="hidden"),
        node("dot", ["h", "W2"], ["hW2"], 11, P),
        node("add", ["hW2", "b2"], ["logits"], 11, P),
        node("softmax", ["logits"], ["p"], 11, P, name="p"),
        node("categorical_crossentropy", ["p", "y"], ["xent"], 12, C),
        node("mean", ["xent"], ["cost"], 12, C, name="cost"),
        node("argmax", ["p"], ["prediction"], 13, "prediction = T.argmax(p, axis=-1)", attrs={"axis": -1}),
        node("grad", ["cost", "W1", "b1", "W2", "b2"], ["gW1", "gb1", "gW2", "gb2"], 15, G),
    ] + [n for v in ["W1", "b1", "W2", "b2"] for n in [
        node("mul", [{"value": 0.01}, "g" + v], ["step_" + v], 17, U),
        node("sub", [v, "step_" + v], [v + "_next"], 17, U)]],
    "functions": {
        "train": {"inputs": ["x", "y"], "outputs": ["cost"],
                  "updates": {v: v + "_next" for v in ["W1", "b1", "W2", "b2"]}},
        "predict": {"inputs": ["x"], "outputs": ["prediction"]},
    },
    "meta": {"source": "Theano: new features and speed improvements (2012), MLP benchmark",
             "generator": "examples/make_mlp.py"},
}
with open("mlp.json", "w") as f:
    json.dump(g, f, indent=1)
    f.write("\n")
