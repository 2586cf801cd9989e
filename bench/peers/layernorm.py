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
otherwise). Usage: layernorm.py THREADS MIN_SECONDS ROWS COLS

layernorm.py cuda MIN_SECONDS ROWS COLS: PyTorch alone, on the GPU, its
results checked against the NumPy step; prints "torch_ms V" (x, g, b and
gy resident, y and the three gradients copied to the host each call, as
bench_layernorm's tg does) and "torch_res_ms V" (nothing copied; one
synchronisation per round)."""
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


def check(got, ref, n):
    for k, (a, r) in enumerate(zip(got, ref)):
        tol = 1e-6 * n if k >= 2 else 1e-4
        err = float(np.max(np.abs(a - r) / (1 + np.abs(r))))
        if not err <= tol:
            print(f"layernorm.py: output {k}: torch and numpy differ by {err:.3g}", file=sys.stderr)
            return False
    return True


def main_cuda(min_s, x, g, b, gy):
    import torch
    import torch.nn.functional as F

    n, d = x.shape
    dev = torch.device("cuda")
    tx = torch.from_numpy(x).to(dev).requires_grad_()
    tg = torch.from_numpy(g).to(dev).requires_grad_()
    tb = torch.from_numpy(b).to(dev).requires_grad_()
    tgy = torch.from_numpy(gy).to(dev)

    def step():
        tx.grad = tg.grad = tb.grad = None
        y = F.gelu(F.layer_norm(tx, (d,), tg, tb, 1e-5), approximate="tanh")
        y.backward(tgy)
        return y

    def step_host():
        y = step()
        return y.detach().cpu(), tx.grad.cpu(), tg.grad.cpu(), tb.grad.cpu()

    got = [a.numpy() for a in step_host()]
    if not check(got, numpy_step(x, g, b, gy), n):
        return 1
    print(f"torch_ms {best_ms(step_host, min_s):.6f}", flush=True)

    def rounds():  # 20 steps, one synchronisation
        for _ in range(20):
            step()
        torch.cuda.synchronize()

    print(f"torch_res_ms {best_ms(rounds, min_s) / 20:.6f}", flush=True)
    return 0


def main():
    cuda = sys.argv[1] == "cuda"
    threads = 1 if cuda else int(sys.argv[1])
    min_s, n, d = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (n, d)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, d).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, d).astype(np.float32)
    gy = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    if cuda:
        return main_cuda(min_s, x, g, b, gy)
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
    if not check(got, ref, n):
        return 1
    print(f"torch_ms {best_ms(torch_step, min_s):.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
