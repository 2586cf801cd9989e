"""Peer of bench_cudnn_nets: the same training steps in PyTorch, float32.

Each case is DIR:BATCH, DIR holding the net's spec.json (the layer stack
bench_cudnn_nets generated its graph from), its initial weights (<id>.npy,
the same files tg's graph loads) and x_BATCH.npy, y_BATCH.npy. A step is
the forward pass (conv2d as cross-correlation, which is what tg's graph asks
for with filter_flip false; relu or tanh; max pooling, floor mode; dense
layers x @ W + b), softmax cross-entropy against the one-hot targets, mean,
backward, and plain SGD (torch.optim.SGD, no momentum).

cudnn.benchmark is on; TF32 is off for convolutions and products, so that
PyTorch does float32 arithmetic as tg does.

Prints "name value" lines, per case NET_BATCH:
  .costK     the cost of step K (0 <= K < CHECK) from the initial weights
  .ms        ms per step with x, y resident on the device (best of 3
             rounds; the steps of a round fit in BUDGET/3 seconds, at most
             STEPS, at least 3)
  .ms_h2d    the same with x, y copied from host memory each step and the
             cost read back (what one call of a tg function does)
or "torch: not installed".

Usage: cudnn_nets.py DEVICE STEPS CHECK BUDGET DIR:BATCH...
"""
import json
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch: not installed")
    sys.exit(0)


def load(d, name):
    return torch.from_numpy(np.load(os.path.join(d, name + ".npy")))


def build(spec, d, dev):
    params = [load(d, p).to(dev).requires_grad_() for p in spec["params"]]
    act = torch.relu if spec["act"] == "relu" else torch.tanh
    layers = spec["layers"]

    def forward(x):
        h, k = x, 0
        for i, L in enumerate(layers):
            if L["kind"] == "conv":
                h = F.conv2d(h, params[k], params[k + 1], stride=L["stride"], padding=L["pad"])
                h = act(h)
                k += 2
            elif L["kind"] == "pool":
                h = F.max_pool2d(h, L["k"], L["stride"])
            elif L["kind"] == "flatten":
                h = h.reshape(h.shape[0], -1)
            else:
                h = torch.addmm(params[k + 1], h, params[k])
                if i != len(layers) - 1:
                    h = act(h)
                k += 2
        return h

    return params, forward


def run_case(arg, dev, steps, check, budget):
    d, batch = arg.rsplit(":", 1)
    spec = json.load(open(os.path.join(d, "spec.json")))
    name = "%s_%s" % (spec["name"], batch)
    params, forward = build(spec, d, dev)
    opt = torch.optim.SGD(params, lr=spec["lr"])
    xh, yh = load(d, "x_" + batch), load(d, "y_" + batch)
    xd, yd = xh.to(dev), yh.to(dev)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        # softmax cross-entropy against one-hot targets, mean over the batch
        cost = F.cross_entropy(forward(x), y)
        cost.backward()
        opt.step()
        return cost

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    for k in range(check):
        print("%s.cost%d %.9g" % (name, k, step(xd, yd).item()))
    sync()
    t0 = time.perf_counter()
    step(xd, yd)
    sync()
    first = time.perf_counter() - t0
    n = max(3, min(steps, int(math.ceil(budget / 3 / max(first, 1e-6)))))
    best_res = best_h2d = float("inf")
    for _ in range(3):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            step(xd, yd)
        sync()
        best_res = min(best_res, (time.perf_counter() - t0) / n * 1e3)
        t0 = time.perf_counter()
        for _ in range(n):
            step(xh.to(dev), yh.to(dev)).item()
        best_h2d = min(best_h2d, (time.perf_counter() - t0) / n * 1e3)
    print("%s.ms %.4f" % (name, best_res))
    print("%s.ms_h2d %.4f" % (name, best_h2d))
    sys.stdout.flush()


def main():
    dev, steps, check, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    if dev == "cuda" and not torch.cuda.is_available():
        print("torch: not installed (no CUDA in this PyTorch)")
        sys.exit(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for arg in sys.argv[5:]:
        run_case(arg, dev, steps, check, budget)


if __name__ == "__main__":
    main()
