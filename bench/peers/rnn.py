"""Peer of bench_rnn: one SGD training step of a vanilla tanh RNN
(h_t = tanh(x_t Wx + h_{t-1} Wh + b), cost = mean(h * y), gradients by
autograd through time, W -= lr * g) in PyTorch on the CPU, float32, with
the thread count given. Two forms: a plain Python loop of matmuls and
torch.tanh, and torch.nn.RNN (one layer, tanh; its input projection and
loop are ATen's). Prints "name value" lines, words (batch * steps) per
second, best of 3 rounds of at least MIN_SECONDS:
  loop_H_T  rnn_H_T
Usage: rnn.py THREADS MIN_SECONDS H:T:B[,H:T:B...]"""
import sys
import time

import torch


def rate(step, words, min_s):
    for _ in range(3):
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
        best = max(best, n * words / t)
    return best


def main():
    threads, min_s = int(sys.argv[1]), float(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    lr = 0.1
    for spec in sys.argv[3].split(","):
        H, T, B = (int(v) for v in spec.split(":"))
        D = H
        x = torch.rand(T, B, D) - 0.5
        y = torch.rand(T, B, H) - 0.5
        h0 = torch.zeros(B, H)
        Wx = ((torch.rand(D, H) - 0.5) * 0.1).requires_grad_()
        Wh = ((torch.rand(H, H) - 0.5) * 0.1).requires_grad_()
        b = torch.zeros(H, requires_grad=True)

        def loop_step():
            h, hs = h0, []
            for t in range(T):
                h = torch.tanh(x[t] @ Wx + h @ Wh + b)
                hs.append(h)
            cost = (torch.stack(hs) * y).mean()
            gs = torch.autograd.grad(cost, [Wx, Wh, b])
            with torch.no_grad():
                for w, g in zip([Wx, Wh, b], gs):
                    w.sub_(lr * g)

        rnn = torch.nn.RNN(D, H, nonlinearity="tanh")

        def rnn_step():
            out, _ = rnn(x, h0[None])
            cost = (out * y).mean()
            ps = list(rnn.parameters())
            gs = torch.autograd.grad(cost, ps)
            with torch.no_grad():
                for w, g in zip(ps, gs):
                    w.sub_(lr * g)

        print("loop_%d_%d %.1f" % (H, T, rate(loop_step, T * B, min_s)), flush=True)
        print("rnn_%d_%d %.1f" % (H, T, rate(rnn_step, T * B, min_s)), flush=True)


if __name__ == "__main__":
    main()
