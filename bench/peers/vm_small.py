"""Peer of bench_vm's small kernels: the same one-node expressions in
NumPy on the same inputs, best ns per call. Prints "name value" lines."""
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def vals(shape, dtype, off=0, step=1):
    n = int(np.prod(shape))
    i = np.arange(n) * step + off
    return (0.1 + 0.8 * ((i * 37) % 101) / 101.0).reshape(shape).astype(dtype)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


w = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 0, 1, -2, 0, 2, -1, 0, 1], np.float32).reshape(2, 1, 3, 3)
wf = w[:, :, ::-1, ::-1]  # conv2d flips the filter (a true convolution)


def conv(x):
    win = sliding_window_view(x, (3, 3), axis=(2, 3))  # (1, 1, 6, 6, 3, 3)
    return np.einsum("nchwkl,ockl->nohw", win, wf)


x32 = vals((1, 10), np.float32)
c64 = vals((4, 10), np.float64, 3, 7)
cases = {
    "softmax": (lambda x: softmax(x), x32),
    "log_softmax": (lambda x: log_softmax(x), x32),
    "crossentropy": (lambda x: -(c64 * np.log(x)).sum(axis=-1), vals((4, 10), np.float64)),
    "sum_axis1": (lambda x: x.sum(axis=1), vals((4, 10), np.float64)),
    "max_pool_2x2": (lambda x: x.reshape(1, 1, 4, 2, 4, 2).max(axis=(3, 5)), vals((1, 1, 8, 8), np.float32)),
    "conv2d_3x3": (conv, vals((1, 1, 8, 8), np.float32)),
    "matmul_8x4x4": (lambda x, c=vals((8, 4, 4), np.float32, 3, 7): np.matmul(x, c), vals((8, 4, 4), np.float32)),
}
for name, (f, x) in cases.items():
    best = 1e30
    for _ in range(7):
        calls = 20000
        t0 = time.perf_counter()
        for _ in range(calls):
            f(x)
        best = min(best, (time.perf_counter() - t0) / calls)
    print(name, best * 1e9)
