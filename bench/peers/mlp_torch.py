"""Peer of bench_cuda: one SGD step of the 2012 paper's MLP (784-500-10,
tanh, softmax, mean cross-entropy) in PyTorch on the GPU, float32.

Prints "name value" lines, milliseconds per step, best of 5 rounds:
  torch_resident_B   x, y already on the GPU, no synchronisation per step
  torch_h2d_B        x, y copied from host memory each step and the cost
                     read back (what one call of a tg function does)
Usage: mlp_torch.py BATCH STEPS
"""
import sys
import time

import torch


def main():
    batch, steps = int(sys.argv[1]), int(sys.argv[2])
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    W1 = (torch.rand(784, 500, generator=g) * 0.1 - 0.05).to(dev).requires_grad_()
    b1 = torch.zeros(500, device=dev, requires_grad=True)
    W2 = (torch.rand(500, 10, generator=g) * 0.1 - 0.05).to(dev).requires_grad_()
    b2 = torch.zeros(10, device=dev, requires_grad=True)
    xh = torch.rand(batch, 784, generator=g)
    yh = torch.zeros(batch, 10)
    yh[torch.arange(batch), torch.arange(batch) % 10] = 1
    lr = 0.01

    def step(x, y):
        h = torch.tanh(x @ W1 + b1)
        p = torch.softmax(h @ W2 + b2, dim=-1)
        cost = (-(y * torch.log(p)).sum(-1)).mean()
        gW1, gb1, gW2, gb2 = torch.autograd.grad(cost, [W1, b1, W2, b2])
        with torch.no_grad():
            W1.sub_(lr * gW1)
            b1.sub_(lr * gb1)
            W2.sub_(lr * gW2)
            b2.sub_(lr * gb2)
        return cost

    xd, yd = xh.to(dev), yh.to(dev)
    for _ in range(20):
        step(xd, yd)
    torch.cuda.synchronize()
    best_res = best_h2d = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(steps):
            step(xd, yd)
        torch.cuda.synchronize()
        best_res = min(best_res, (time.perf_counter() - t0) / steps * 1e3)
        t0 = time.perf_counter()
        for _ in range(steps):
            step(xh.to(dev), yh.to(dev)).item()
        best_h2d = min(best_h2d, (time.perf_counter() - t0) / steps * 1e3)
    print(f"torch_resident_{batch} {best_res:.4f}")
    print(f"torch_h2d_{batch} {best_h2d:.4f}")


if __name__ == "__main__":
    main()
