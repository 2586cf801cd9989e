"""Peer of bench_npz: NumPy on the same arrays. Reads tg's archive (and
checks it holds what bench_npz wrote: w[i] = i % 1000 / 8), times np.load
of it, np.savez of the array to STORED and np.load of that, then
np.savez_compressed to COMPRESSED and np.load of that; checks that tg's
deflated archive TG_DEFLATED holds the same array; then times
np.savez_compressed of the float32 weights of NOISE (tg's stored archive)
to NOISE less .npz plus _np.npz, writes those weights as 8 arrays to
NOISE less .npz plus _parts.npz, and times np.load of all 8. Best of 3
each. Prints "name seconds" lines.
usage: npz.py TG_ARCHIVE STORED COMPRESSED TG_DEFLATED NOISE"""
import sys
import time
import zipfile

import numpy as np

tg_file, stored, compressed, tg_deflated, noise = sys.argv[1:6]


def best(f):
    t = []
    for _ in range(3):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return min(t)


w = np.load(tg_file)["w"]
want = (np.arange(w.size) % 1000 / 8).astype(w.dtype)
if not np.array_equal(w, want):
    sys.exit("npz.py: tg's archive does not hold what bench_npz wrote")
if not np.array_equal(np.load(tg_deflated)["w"], want) or zipfile.ZipFile(tg_deflated).testzip():
    sys.exit("npz.py: tg's deflated archive does not hold what bench_npz wrote")
print("load_tg %.6f" % best(lambda: np.load(tg_file)["w"]))
print("save_stored %.6f" % best(lambda: np.savez(stored, w=w)))
print("load_stored %.6f" % best(lambda: np.load(stored)["w"]))
print("save_compressed %.6f" % best(lambda: np.savez_compressed(compressed, w=w)))
print("load_compressed %.6f" % best(lambda: np.load(compressed)["w"]))
r = np.load(noise)["r"]
print("save_noise_compressed %.6f" % best(lambda: np.savez_compressed(noise[:-4] + "_np.npz", r=r)))
# the same weights as 8 arrays, as a checkpoint holds its layers
parts = noise[:-4] + "_parts.npz"
np.savez_compressed(parts, **{"r%d" % i: p for i, p in enumerate(np.array_split(r, 8))})


def load_all(f):
    z = np.load(f)
    return [z[k] for k in z.files]


print("load_parts %.6f" % best(lambda: load_all(parts)))
