"""Peer of bench_embed: one SGD step of an embedding table, cost =
sum((E[idx] - t)^2), E -= lr * grad(E), float32, for each case "V D B"
given on the command line (table rows, columns, batch of indices).

Prints "name value" lines, milliseconds per step, best of 3 rounds of at
least MIN_S seconds (argv[1]); the names are CASE_FORM, CASE being
"V_D_B":
  numpy_addat     by hand: e = E[idx], g = 2 (e - t), np.add.at(E, idx,
                  -lr g) (exact with repeated indices)
  torch_sparse_T  nn.Embedding(sparse=True) and optim.SGD, autograd, T
                  threads (1 and 2)
  torch_dense_T   nn.Embedding() and optim.SGD: a dense gradient of the
                  whole table, as the step is written
  torch_index_T   by hand: E.index_add_(0, idx, g, alpha=-lr), no autograd
Prints "torch: not installed" when PyTorch is missing.
"""
import sys
import time

import numpy as np

MIN_S = float(sys.argv[1])
CASES = [tuple(int(v) for v in c.split("x")) for c in sys.argv[2:]]
LR = 0.01


def best_ms(step):
    step()
    best = 1e30
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            t = time.perf_counter() - t0
            if t >= MIN_S:
                break
        best = min(best, t / n)
    return best * 1e3


def data(V, D, B):
    rng = np.random.default_rng(0)
    E = (rng.standard_normal((V, D)) * 0.1).astype(np.float32)
    idx = rng.integers(0, V, B)
    t = rng.standard_normal((B, D)).astype(np.float32)
    return E, idx, t


for V, D, B in CASES:
    name = f"{V}_{D}_{B}"
    E, idx, t = data(V, D, B)

    def np_step():
        e = E[idx]
        d = e - t
        cost = np.sum(d * d)
        np.add.at(E, idx, (-LR * 2) * d)
        return cost

    print(f"{name}_numpy_addat {best_ms(np_step):.4f}", flush=True)

try:
    import torch
except ImportError:
    print("torch: not installed")
    sys.exit(0)

for threads in (1, 2):
    torch.set_num_threads(threads)
    for V, D, B in CASES:
        name = f"{V}_{D}_{B}"
        E0, idx0, t0 = data(V, D, B)
        idx, tt = torch.from_numpy(idx0), torch.from_numpy(t0)
        for form, sparse in (("sparse", True), ("dense", False)):
            emb = torch.nn.Embedding(V, D, sparse=sparse)
            with torch.no_grad():
                emb.weight.copy_(torch.from_numpy(E0))
            opt = torch.optim.SGD(emb.parameters(), lr=LR)

            def t_step():
                opt.zero_grad()
                d = emb(idx) - tt
                cost = (d * d).sum()
                cost.backward()
                opt.step()
                return cost

            print(f"{name}_torch_{form}_{threads} {best_ms(t_step):.4f}", flush=True)
        W = torch.from_numpy(E0.copy())

        def i_step():
            d = W[idx] - tt
            cost = (d * d).sum()
            W.index_add_(0, idx, d, alpha=-LR * 2)
            return cost

        print(f"{name}_torch_index_{threads} {best_ms(i_step):.4f}", flush=True)
