"""Back-propagation through time for examples/rnn.json, written out in
NumPy (float64) independently of tg: the forward pass, the cost, and the
gradients of the cost with respect to every weight, step by step
backwards. Used by tests/tools/rnn_example.sh:

  rnn_bptt.py EXAMPLES_DIR TG_GRADS_DIR   compare tg's `grads` outputs
                                          (cost.npy, gEmb.npy, ...)
  rnn_bptt.py EXAMPLES_DIR --costs N      the costs of N SGD calls of
                                          `train`, one a line
Exit 1 when a gradient differs by more than 1e-4 of its largest entry."""
import json
import sys

import numpy as np

ex = sys.argv[1]
meta = json.load(open(ex + "/rnn.json"))["meta"]["sizes"]
LR = meta["learning_rate"]
x = np.load(ex + "/rnn/x.npy")
y = np.load(ex + "/rnn/y.npy")
names = ["Emb", "Wx", "Wh", "bh", "Wy", "by"]
W = {k: np.load(ex + "/rnn/%s.npy" % k).astype(np.float64) for k in names}


def forward_backward(W):
    T, B = x.shape
    H = W["Wh"].shape[0]
    e = W["Emb"][x]                                    # (T, B, E)
    h = np.zeros((T + 1, B, H))                        # h[0] = h0 = 0
    for t in range(T):
        h[t + 1] = np.tanh(e[t] @ W["Wx"] + h[t] @ W["Wh"] + W["bh"])
    logits = h[1:].reshape(-1, H) @ W["Wy"] + W["by"]
    z = logits - logits.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    yf = y.reshape(-1)
    N = len(yf)
    cost = -np.log(p[np.arange(N), yf]).mean()
    # Backwards.
    dlog = p.copy()
    dlog[np.arange(N), yf] -= 1
    dlog /= N
    g = {k: np.zeros_like(v) for k, v in W.items()}
    g["Wy"] = h[1:].reshape(-1, H).T @ dlog
    g["by"] = dlog.sum(0)
    dh_out = (dlog @ W["Wy"].T).reshape(T, B, H)
    carry = np.zeros((B, H))
    for t in reversed(range(T)):
        dh = dh_out[t] + carry
        dpre = dh * (1 - h[t + 1] ** 2)
        g["Wx"] += e[t].T @ dpre
        g["Wh"] += h[t].T @ dpre
        g["bh"] += dpre.sum(0)
        np.add.at(g["Emb"], x[t], dpre @ W["Wx"].T)
        carry = dpre @ W["Wh"].T
    return cost, g


if sys.argv[2] == "--costs":
    for _ in range(int(sys.argv[3])):
        cost, g = forward_backward(W)
        print("%.6g" % cost)
        for k in names:
            W[k] = W[k] - LR * g[k]
    sys.exit(0)

d = sys.argv[2]
cost, g = forward_backward(W)
bad = 0
got = float(np.load(d + "/cost.npy"))
if abs(got - cost) > 1e-5 * abs(cost):
    print("cost: tg %.8g, NumPy %.8g" % (got, cost))
    bad += 1
for k in names:
    t = np.load(d + "/g%s.npy" % k).astype(np.float64)
    err = np.abs(t - g[k]).max() / max(np.abs(g[k]).max(), 1e-30)
    print("g%s: largest difference %.2e of the largest entry" % (k, err))
    if t.shape != g[k].shape or err > 1e-4:
        bad += 1
sys.exit(1 if bad else 0)
