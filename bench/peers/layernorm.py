"""Peer of bench_layernorm: y = gelu(layer_norm(x) * g + b) (GELU's tanh
form, eps 1e-5, over the last axis) and the gradients of sum(y * gy) in x,
g and b, float32, on inputs of ROWS x COLS:
- numpy: the forward and the backward written by hand (the usual
  layer-norm backward, dx = (dxh - mean(dxh) - xh * mean(dxh * xh)) / sd);
  its elementwise loops run on one thread whatever THREADS says;
- torch: autograd of torch.nn.functional.layer_norm and gelu(approximate=
  'tanh') with torch.set_num_threads(THREADS).
Prints "numpy_ms V" and "torch_ms V": ms per call, best of 3 rounds of at
least MIN_SECONDS. The two agree with each other (checked here; exit 1
otherwise). Usage: layernorm.py THREADS MIN_SECONDS ROWS COLS"""
import sys
import time

import numpy as np

K = np.float32(0.7978845608)
C = np.float32(0.044715)


def best_ms(fn, min_s):
    for _ in range(2):
        fn()
    best = 1e30
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            t = time.perf_counter() - t0
            if t >= min_s:
                break
        best = min(best, t / n)
    return best * 1e3


def numpy_step(x, g, b, gy):
    m = x.mean(-1, keepdims=True)
    d = x - m
    sd = np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-5))
    xh = d / sd
    z = xh * g + b
    t = np.tanh(K * (z + C * z * z * z))
    y = np.float32(0.5) * z * (1 + t)
    dz = gy * (np.float32(0.5) * (1 + t) + np.float32(0.5) * z * (1 - t * t) * K * (1 + 3 * C * z * z))
    gb = dz.sum(0)
    gg = (dz * xh).sum(0)
    dxh = dz * g
    gx = (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True)) / sd
    return y, gx, gg, gb


def main():
    threads, min_s, n, d = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (n, d)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, d).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, d).astype(np.float32)
    gy = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    print(f"numpy_ms {best_ms(lambda: numpy_step(x, g, b, gy), min_s):.6f}", flush=True)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return 0
    torch.set_num_threads(threads)
    tx = torch.from_numpy(x).requires_grad_()
    tg = torch.from_numpy(g).requires_grad_()
    tb = torch.from_numpy(b).requires_grad_()
    tgy = torch.from_numpy(gy)

    def torch_step():
        tx.grad = tg.grad = tb.grad = None
        y = F.gelu(F.layer_norm(tx, (d,), tg, tb, 1e-5), approximate="tanh")
        y.backward(tgy)
        return y

    y = torch_step()
    ref = numpy_step(x, g, b, gy)
    got = (y.detach().numpy(), tx.grad.numpy(), tg.grad.numpy(), tb.grad.numpy())
    for k, (a, r) in enumerate(zip(got, ref)):
        tol = 1e-6 * n if k >= 2 else 1e-4
        err = float(np.max(np.abs(a - r) / (1 + np.abs(r))))
        if not err <= tol:
            print(f"layernorm.py: output {k}: torch and numpy differ by {err:.3g}", file=sys.stderr)
            return 1
    print(f"torch_ms {best_ms(torch_step, min_s):.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
