"""Writes tests/data/npz/: archives from NumPy's savez and savez_compressed
(zip64 local headers, as NumPy writes them), one with positional names, an
empty one, and one written by zipfile with a member that is not a .npy and
a folder. tests/unit/test_npz.c checks the values against the formulas
below. Run with /usr/bin/python3; the zip dates are the time of the run,
so the bytes differ from one run to the next, the contents do not."""
import os
import zipfile

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "npz")
os.makedirs(OUT, exist_ok=True)


def arrays():
    return {
        "f8": np.arange(12.0).reshape(3, 4) / 4,  # i / 4
        "i2_be": np.arange(6, dtype=">i2").reshape(2, 3) - 3,  # i - 3
        "u1_F": np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 3) * 7),  # 7 i
        "b": np.array([True, False, True]),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 2), np.int64),
    }


np.savez(os.path.join(OUT, "stored.npz"), **arrays())
# and an array of 800 KB that deflates to a few
np.savez_compressed(os.path.join(OUT, "compressed.npz"), **arrays(),
                    big=(np.arange(100000) % 7).astype(np.float64))  # i % 7
np.savez(os.path.join(OUT, "positional.npz"), np.arange(3), np.arange(4.0))
np.savez(os.path.join(OUT, "empty.npz"))
with zipfile.ZipFile(os.path.join(OUT, "other_members.npz"), "w") as z:
    with z.open("x.npy", "w") as f:
        np.lib.format.write_array(f, np.array([1.0, 2.0]))
    z.writestr("readme.txt", "not an array\n")
    z.writestr("d/", "")
