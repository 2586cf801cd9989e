"""Peer of bench_mlp: one SGD step of the 2012 paper's MLP (784 -> 500 tanh
-> 10 softmax, cross-entropy on one-hot targets, learning rate 0.01),
written by hand in NumPy and in PyTorch (autograd, torch.set_num_threads
1 and 2), timed as bench_mlp times tg: examples per second, best of 3
rounds of at least MIN_S seconds each.
Prints "<peer>_<dtype>_<batch> examples_per_s" lines; "torch: not
installed" when PyTorch is missing.
usage: mlp.py BATCH[,BATCH...] [MIN_S]"""
import sys
import time

import numpy as np

batches = [int(b) for b in (sys.argv[1] if len(sys.argv) > 1 else "1,10,60").split(",")]
min_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3


def rate(step, batch):
    for _ in range(10):
        step()
    best = 0.0
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            t = time.perf_counter() - t0
            if t >= min_s:
                break
        best = max(best, n * batch / t)
    return best


def data(dt, batch, rng):
    x = rng.random((batch, 784)).astype(dt)
    y = np.zeros((batch, 10), dt)
    y[np.arange(batch), rng.integers(0, 10, batch)] = 1
    return x, y


rng = np.random.default_rng(1)
for dt in ("float32", "float64"):
    W1 = ((rng.random((784, 500)) - 0.5) * 0.1).astype(dt)
    b1 = np.zeros(500, dt)
    W2 = ((rng.random((500, 10)) - 0.5) * 0.1).astype(dt)
    b2 = np.zeros(10, dt)
    lr = np.asarray(0.01, dt)
    for batch in batches:
        x, y = data(dt, batch, rng)

        def step(W1=W1, b1=b1, W2=W2, b2=b2):
            h = np.tanh(x @ W1 + b1)
            a = h @ W2 + b2
            a -= a.max(axis=1, keepdims=True)
            e = np.exp(a)
            p = e / e.sum(axis=1, keepdims=True)
            d2 = (p - y) / batch
            gW2 = h.T @ d2
            d1 = (d2 @ W2.T) * (1 - h * h)
            gW1 = x.T @ d1
            W1 -= lr * gW1
            b1 -= lr * d1.sum(0)
            W2 -= lr * gW2
            b2 -= lr * d2.sum(0)
        print(f"numpy_{dt}_{batch} {rate(step, batch):.1f}")

try:
    import torch
except ImportError:
    print("torch: not installed")
    sys.exit(0)

for threads in (1, 2):
    torch.set_num_threads(threads)
    for dt in ("float32", "float64"):
        tdt = getattr(torch, dt)
        g = torch.Generator().manual_seed(1)
        W1 = ((torch.rand((784, 500), generator=g, dtype=tdt) - 0.5) * 0.1).requires_grad_()
        b1 = torch.zeros(500, dtype=tdt, requires_grad=True)
        W2 = ((torch.rand((500, 10), generator=g, dtype=tdt) - 0.5) * 0.1).requires_grad_()
        b2 = torch.zeros(10, dtype=tdt, requires_grad=True)
        opt = torch.optim.SGD([W1, b1, W2, b2], lr=0.01)
        for batch in batches:
            x = torch.rand((batch, 784), generator=g, dtype=tdt)
            t = torch.randint(0, 10, (batch,), generator=g)

            def step():
                opt.zero_grad(set_to_none=True)
                logits = torch.tanh(x @ W1 + b1) @ W2 + b2
                loss = torch.nn.functional.cross_entropy(logits, t)
                loss.backward()
                opt.step()
            print(f"torch{threads}_{dt}_{batch} {rate(step, batch):.1f}")
