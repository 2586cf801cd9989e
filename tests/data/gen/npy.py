"""Writes tests/data/npy/: .npy files from NumPy in every dtype, in C and
Fortran order, both byte orders and format versions 1 and 2, and malformed
ones. The expected values are in the names: every good file holds
arange(size).reshape(shape) % 100 (so bools are (arange % 2) == 1), and
EXPECT lists them. Run with /usr/bin/python3."""
import os

import numpy as np
import numpy.lib.format as fmt

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "npy")
os.makedirs(OUT, exist_ok=True)
lines = []


def values(dt, shape):
    a = np.arange(int(np.prod(shape))).reshape(shape) % 100
    if np.dtype(dt).kind == "b":
        return (a % 2) == 1
    return a.astype(dt)


for dt in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64"]:
    for order in "CF":
        for endian in "<>":
            if np.dtype(dt).itemsize == 1 and endian == ">":
                continue
            shape = (2, 3, 4)
            a = values(dt, shape)
            a = np.asfortranarray(a) if order == "F" else np.ascontiguousarray(a)
            a = a.astype(np.dtype(dt).newbyteorder(endian)) if np.dtype(dt).itemsize > 1 else a
            name = f"{dt}_{order}_{'le' if endian == '<' else 'be'}.npy"
            np.save(os.path.join(OUT, name), a)
            lines.append(f"{name}\t{dt}\t2,3,4")
# version 2.0 header, 0-d and empty arrays
with open(os.path.join(OUT, "float64_v2.npy"), "wb") as f:
    fmt.write_array(f, values("float64", (3, 2)), version=(2, 0))
lines.append("float64_v2.npy\tfloat64\t3,2")
np.save(os.path.join(OUT, "scalar_int32.npy"), values("int32", ()))
lines.append("scalar_int32.npy\tint32\t")
np.save(os.path.join(OUT, "empty_float32.npy"), np.zeros((0, 5), np.float32))
lines.append("empty_float32.npy\tfloat32\t0,5")
with open(os.path.join(OUT, "EXPECT"), "w") as f:
    f.write("# good files: name<TAB>dtype<TAB>shape; values arange(size) % 100 (bool: odd)\n")
    f.write("\n".join(lines) + "\n")

# Malformed files.
bad = {}
np.save(os.path.join(OUT, "bad_object.npy"), np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
bad["bad_object.npy"] = "unsupported .npy dtype"
np.save(os.path.join(OUT, "bad_complex.npy"), np.array([1j, 2]))
bad["bad_complex.npy"] = "unsupported .npy dtype"
np.save(os.path.join(OUT, "bad_structured.npy"), np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
bad["bad_structured.npy"] = "unsupported .npy dtype"
np.save(os.path.join(OUT, "bad_unicode.npy"), np.array(["ab", "c"]))
bad["bad_unicode.npy"] = "unsupported .npy dtype"
good = open(os.path.join(OUT, "float64_C_le.npy"), "rb").read()
open(os.path.join(OUT, "bad_truncated.npy"), "wb").write(good[:-9])
bad["bad_truncated.npy"] = "truncated .npy data"
open(os.path.join(OUT, "bad_magic.npy"), "wb").write(b"\x93NUMPX" + good[6:])
bad["bad_magic.npy"] = "not a .npy file"
open(os.path.join(OUT, "bad_header_len.npy"), "wb").write(good[:8] + b"\xff\xff" + good[10:40])
bad["bad_header_len.npy"] = "header length"
lie = good.replace(b"(2, 3, 4)", b"(9, 9, 9)")
open(os.path.join(OUT, "bad_shape_lies.npy"), "wb").write(lie)
bad["bad_shape_lies.npy"] = "truncated .npy data"
huge = good.replace(b"(2, 3, 4)", b"(99999999999, 99999999999, 9)")
open(os.path.join(OUT, "bad_huge_shape.npy"), "wb").write(huge)
bad["bad_huge_shape.npy"] = ".npy"
open(os.path.join(OUT, "bad_header_syntax.npy"), "wb").write(good.replace(b"'descr'", b"'descr\""))
bad["bad_header_syntax.npy"] = "malformed .npy header"
open(os.path.join(OUT, "bad_empty.npy"), "wb").write(b"")
bad["bad_empty.npy"] = "not a .npy file"
with open(os.path.join(OUT, "BAD"), "w") as f:
    f.write("# malformed files: name<TAB>substring of the message\n")
    for k, v in bad.items():
        f.write(f"{k}\t{v}\n")
