"""Writes rnn.json: a character-level-style RNN language model (embedding
lookup with `take`, a vanilla tanh RNN through `scan`, a softmax over the
vocabulary, cross-entropy), float32, trained by SGD with the gradients of
the format's `grad` (back-propagation through time through the scan), its
initial weights in rnn/*.npy and a small data set in rnn/x.npy, rnn/y.npy
(token ids, (steps, batch), y the next token of x). Run with
/usr/bin/python3 from examples/."""
import json
import os

import numpy as np

V, E, H = 30, 16, 32        # vocabulary, embedding, hidden
T, B = 10, 8                # data: steps, batch
LR = 0.5
rng = np.random.default_rng(2016)

# The data: a Markov chain over V tokens where each token has 3 likely
# successors, so that a model that learns the transitions gets a cost well
# below log(V).
succ = rng.integers(0, V, (V, 3))
seq = np.empty(T * B + 1, np.int64)
seq[0] = 0
for i in range(1, len(seq)):
    seq[i] = succ[seq[i - 1], rng.integers(0, 3)] if rng.random() < 0.9 else rng.integers(0, V)
# B parallel streams, time-major.
streams = np.stack([seq[b * T: b * T + T + 1] for b in range(B)], 1)[: T + 1]
x, y = streams[:-1].copy(), streams[1:].copy()

os.makedirs("rnn", exist_ok=True)
np.save("rnn/x.npy", x)
np.save("rnn/y.npy", y)


def init(shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


weights = {
    "Emb": init((V, E), 0.1),
    "Wx": init((E, H), 1 / np.sqrt(E)),
    "Wh": init((H, H), 1 / np.sqrt(H)),
    "bh": np.zeros(H, np.float32),
    "Wy": init((H, V), 1 / np.sqrt(H)),
    "by": np.zeros(V, np.float32),
}
for k, v in weights.items():
    np.save("rnn/%s.npy" % k, v)


def tr(line, code):
    return [{"file": "rnn.py", "line": line, "function": "build", "code": code}]


def node(op, inputs, outputs, line, code, attrs=None, name=None):
    n = {"op": op, "inputs": inputs, "outputs": outputs, "trace": tr(line, code)}
    if attrs is not None:
        n["attrs"] = attrs
    if name:
        n["name"] = name
    return n


f32 = lambda shape: {"dtype": "float32", "shape": shape}
i64v = lambda data: {"value": {"dtype": "int64", "shape": [len(data)], "data": data}}
STEP = "h_t = T.tanh(T.dot(e_t, Wx) + T.dot(h_tm1, Wh) + bh)"
body = {
    "variables": [
        {"id": "e_t", "type": f32([None, E])},
        {"id": "h_tm1", "type": f32([None, H])},
        {"id": "Wx_", "type": f32([E, H])},
        {"id": "Wh_", "type": f32([H, H])},
        {"id": "bh_", "type": f32([H])},
    ],
    "nodes": [
        node("dot", ["e_t", "Wx_"], ["ex"], 14, STEP),
        node("dot", ["h_tm1", "Wh_"], ["hh"], 14, STEP),
        node("add", ["ex", "hh", "bh_"], ["pre"], 14, STEP),
        node("tanh", ["pre"], ["h_t"], 14, STEP),
    ],
    "inputs": ["e_t", "h_tm1", "Wx_", "Wh_", "bh_"],
    "outputs": ["h_t"],
}
EMB = "e = Emb[x]"
H0 = "h0 = T.zeros((x.shape[1], H))"
SCAN = "h, _ = theano.scan(step, sequences=e, outputs_info=h0, non_sequences=[Wx, Wh, bh])"
OUT = "p = T.nnet.softmax(T.dot(h.reshape((-1, H)), Wy) + by)"
COST = "cost = T.nnet.categorical_crossentropy(p, y.flatten()).mean()"
GRAD = "grads = T.grad(cost, params)"
UPD = "updates = [(w, w - lr * g) for w, g in zip(params, grads)]"
params = ["Emb", "Wx", "Wh", "bh", "Wy", "by"]
g = {
    "format": "tg-graph", "version": 1,
    "name": "RNN language model (embedding, tanh RNN through scan, softmax)",
    "variables": [
        {"id": "x", "type": {"dtype": "int64", "shape": [None, None]}, "name": "x (steps, batch)"},
        {"id": "y", "type": {"dtype": "int64", "shape": [None, None]}, "name": "y (next tokens)"},
    ] + [{"id": k, "type": f32(list(weights[k].shape)), "shared": {"npy": "rnn/%s.npy" % k}}
         for k in params],
    "nodes": [
        node("take", ["Emb", "x"], ["e"], 10, EMB, attrs={"axis": 0}),
        node("shape_i", ["x"], ["batch"], 11, H0, attrs={"i": 1}),
        node("alloc", [{"value": {"dtype": "float32", "data": 0}}, "batch", {"value": H}], ["h0"], 11, H0),
        node("scan", ["e", "h0", "Wx", "Wh", "bh"], ["h"], 15, SCAN, attrs={
            "n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1, "output_taps": [[-1]],
            "n_nonrecurrent": 0, "n_non_sequences": 3, "has_n_steps": False, "has_until": False,
            "name": "rnn", "body": body}, name="rnn"),
        node("reshape", ["h", i64v([-1, H])], ["h2"], 16, OUT),
        node("dot", ["h2", "Wy"], ["hy"], 16, OUT),
        node("add", ["hy", "by"], ["logits"], 16, OUT),
        node("softmax", ["logits"], ["p"], 16, OUT, name="p"),
        node("reshape", ["y", i64v([-1])], ["yf"], 17, COST),
        node("categorical_crossentropy", ["p", "yf"], ["xent"], 17, COST),
        node("mean", ["xent"], ["cost"], 17, COST, name="cost"),
        node("argmax", ["p"], ["pred_flat"], 18, "prediction = T.argmax(p, axis=-1)", attrs={"axis": -1}),
        node("shape", ["x"], ["xshape"], 18, "prediction = prediction.reshape(x.shape)"),
        node("reshape", ["pred_flat", "xshape"], ["prediction"], 18, "prediction = prediction.reshape(x.shape)"),
        node("grad", ["cost"] + params, ["g" + k for k in params], 20, GRAD),
    ] + [n for k in params for n in [
        node("mul", [{"value": LR}, "g" + k], ["step_" + k], 21, UPD),
        node("sub", [k, "step_" + k], [k + "_next"], 21, UPD)]],
    "functions": {
        "train": {"inputs": ["x", "y"], "outputs": ["cost"],
                  "updates": {k: k + "_next" for k in params}},
        "cost": {"inputs": ["x", "y"], "outputs": ["cost"]},
        "predict": {"inputs": ["x"], "outputs": ["prediction"]},
        "grads": {"inputs": ["x", "y"], "outputs": ["cost"] + ["g" + k for k in params]},
    },
    "meta": {"generator": "examples/make_rnn.py",
             "sizes": {"vocabulary": V, "embedding": E, "hidden": H, "learning_rate": LR}},
}
with open("rnn.json", "w") as f:
    json.dump(g, f, indent=1)
    f.write("\n")
