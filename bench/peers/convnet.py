"""Peer of bench_convnet: one SGD step of examples/convnet.json's `train`
(28x28 images: conv 5x5 -> 8 channels, tanh, 2x2 max pooling, conv 5x5 ->
16, tanh, pooling, 256 -> 10 softmax, mean cross-entropy on one-hot
targets, learning rate 0.05) in PyTorch (autograd, float32, NCHW,
torch.set_num_threads 1 and 2), timed as bench_convnet times tg: examples
per second, best of 3 rounds of at least MIN_S seconds each.
Prints "torch<threads>_<batch> examples_per_s" lines, or "torch: not
installed". Each thread count and batch runs in 3 processes of their own,
and the best is printed: PyTorch 1.13's runs with 2 threads on the 2-core
VM were either fast or about 4 times slower (5,000 against 17,000-20,000
examples per second at batch 600), from one process to the next and more
often after another batch in the same process.
usage: convnet.py BATCH[,BATCH...] [MIN_S [THREADS]]"""
import subprocess
import sys
import time

batches = [int(b) for b in (sys.argv[1] if len(sys.argv) > 1 else "60,600").split(",")]
min_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
if len(sys.argv) <= 3:
    for n in (1, 2):
        for b in batches:
            best = 0.0
            for _ in range(3):
                out = subprocess.run([sys.executable, __file__, str(b), str(min_s), str(n)],
                                     stdout=subprocess.PIPE, text=True).stdout
                if "not installed" in out:
                    print("torch: not installed")
                    sys.exit(0)
                best = max(best, float(out.split()[1]))
            print(f"torch{n}_{b} {best:.1f}")
    sys.exit(0)
thread_counts = (int(sys.argv[3]),)

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch: not installed")
    sys.exit(0)


def rate(step, batch):
    for _ in range(5):
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


for threads in thread_counts:
    torch.set_num_threads(threads)
    for batch in batches:
        g = torch.Generator().manual_seed(1)
        w1 = (torch.randn(8, 1, 5, 5, generator=g) * 0.2).requires_grad_()
        b1 = torch.zeros(8, requires_grad=True)
        w2 = (torch.randn(16, 8, 5, 5, generator=g) * 0.07).requires_grad_()
        b2 = torch.zeros(16, requires_grad=True)
        W3 = torch.zeros(256, 10, requires_grad=True)
        b3 = torch.zeros(10, requires_grad=True)
        params = [w1, b1, w2, b2, W3, b3]
        x = torch.rand(batch, 784, generator=g)
        y = torch.zeros(batch, 10)
        y[torch.arange(batch), torch.arange(batch) * 7 % 10] = 1

        def step():
            a1 = torch.tanh(F.conv2d(x.reshape(-1, 1, 28, 28), w1) + b1.view(1, -1, 1, 1))
            a2 = torch.tanh(F.conv2d(F.max_pool2d(a1, 2), w2) + b2.view(1, -1, 1, 1))
            logp = F.log_softmax(F.max_pool2d(a2, 2).flatten(1) @ W3 + b3, dim=-1)
            cost = -(y * logp).sum(-1).mean()
            grads = torch.autograd.grad(cost, params)
            with torch.no_grad():
                for p, gp in zip(params, grads):
                    p -= 0.05 * gp
        print(f"torch{threads}_{batch} {rate(step, batch):.1f}")
