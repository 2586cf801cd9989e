"""Peer of bench_conv: the same float32 conv2d forwards in PyTorch
(torch.nn.functional.conv2d, a cross-correlation: the cost is the same as
tg's flipped convolution), then the weight and input gradients
(torch.nn.grad.conv2d_weight, conv2d_input), best of REPS runs after a
warm-up, with torch.set_num_threads(THREADS). Prints "case ms" lines with
bench_conv's case names (the gradients' prefixed "gw_", "gi_"), or "torch:
not installed"."""
import sys
import time

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch: not installed")
    sys.exit(0)

torch.set_num_threads(threads)
CASES = [("convnet_l1", (600, 1, 28, 28), (8, 1, 5, 5), 0),
         ("convnet_l2", (600, 8, 12, 12), (16, 8, 5, 5), 0),
         ("c3x32x32_k5x5x32", (64, 3, 32, 32), (32, 3, 5, 5), 0),
         ("c32x16x16_k3x3x64", (64, 32, 16, 16), (64, 32, 3, 3), 1),
         ("c128x4x4_k3x3x128", (64, 128, 4, 4), (128, 128, 3, 3), 1),
         ("c512x2x2_k3x3x512", (64, 512, 2, 2), (512, 512, 3, 3), 1)]
g = torch.Generator().manual_seed(1)
with torch.no_grad():
    for name, xs, ws, pad in CASES:
        x = torch.rand(xs, generator=g, dtype=torch.float32) - 0.5
        w = torch.rand(ws, generator=g, dtype=torch.float32) - 0.5
        F.conv2d(x, w, padding=pad)
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            F.conv2d(x, w, padding=pad)
            best = min(best, time.perf_counter() - t0)
        print(f"{name} {best * 1e3:.4f}")
for name, xs, ws, pad in CASES:
    x = torch.rand(xs, generator=g, dtype=torch.float32) - 0.5
    oh, ow = xs[2] + 2 * pad - ws[2] + 1, xs[3] + 2 * pad - ws[3] + 1
    gy = torch.rand((xs[0], ws[0], oh, ow), generator=g, dtype=torch.float32) - 0.5
    w = torch.rand(ws, generator=g, dtype=torch.float32) - 0.5
    for tag, fn in (("gw", lambda: torch.nn.grad.conv2d_weight(x, ws, gy, padding=pad)),
                    ("gi", lambda: torch.nn.grad.conv2d_input(xs, w, gy, padding=pad))):
        fn()
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        print(f"{tag}_{name} {best * 1e3:.4f}")
