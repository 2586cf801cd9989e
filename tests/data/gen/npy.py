"""Writes tests/data/npy/: .npy files from NumPy in every dtype, in C and
Fortran order, both byte orders and format versions 1 and 2, and malformed
ones. The expected values are in the names: every good file holds
arange(size).reshape(shape) % 100 (so bools are (arange % 2) == 1), and
EXPECT lists them. Run with /usr/bin/python3."""
import os
import pickle

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
with open(os.path.join(OUT, "int16_v3.npy"), "wb") as f:
    fmt.write_array(f, values("int16", (4, 5)), version=(3, 0))
lines.append("int16_v3.npy\tint16\t4,5")
np.save(os.path.join(OUT, "float32_F_2d.npy"), np.asfortranarray(values("float32", (3, 5))))
lines.append("float32_F_2d.npy\tfloat32\t3,5")
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


def with_header(text, data=b"", version=1):
    """A file with the given header text (padded as NumPy pads it)."""
    h = text.encode("latin1")
    pre = 10 if version == 1 else 12
    h += b" " * ((64 - (pre + len(h) + 1) % 64) % 64) + b"\n"
    ln = len(h).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + ln + h + data


def put(name, content, message):
    open(os.path.join(OUT, name), "wb").write(content)
    bad[name] = message


six = np.arange(6, dtype="<f8").tobytes()
put("bad_version.npy", b"\x93NUMPY\x04\x00" + good[8:], "unsupported .npy version 4.0")
put("bad_header_too_long.npy", good[:6] + b"\x02\x00" + (200000).to_bytes(4, "little") + good[12:64],
    ".npy header too long")
put("bad_missing_key.npy", with_header("{'descr': '<f8', 'shape': (6,), }", six), "lacks 'fortran_order'")
put("bad_extra_key.npy", with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (6,), 'x': 1}", six),
    "unexpected key 'x'")
put("bad_dup_key.npy", with_header("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (6,)}", six),
    "malformed .npy header")
put("bad_fortran_value.npy", with_header("{'descr': '<f8', 'fortran_order': 1, 'shape': (6,)}", six),
    "malformed .npy header")
put("bad_negative_shape.npy", with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-1, 6)}", six),
    "malformed .npy header")
put("bad_not_dict.npy", with_header("[1, 2, 3]", six), "malformed .npy header")
put("bad_unclosed.npy", with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (6,)", six),
    "malformed .npy header")
put("bad_trailing.npy", with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (6,)} x", six),
    "malformed .npy header")
put("bad_datetime.npy", with_header("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (6,)}", six),
    "unsupported .npy dtype '<M8[ns]'")
put("bad_many_dims.npy", with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6)}", six),
    "more than 8 dimensions")
put("bad_half_pipe.npy", with_header("{'descr': '|f2', 'fortran_order': False, 'shape': (6,)}", six),
    "unsupported .npy dtype '|f2'")
put("bad_pickle_raw.npy", pickle.dumps([1, 2, 3]), "not a .npy file")
put("bad_short.npy", good[:9], "truncated .npy header")
put("bad_v2_short.npy", b"\x93NUMPY\x02\x00\x10\x00", "truncated .npy header")
put("bad_overflow.npy", with_header("{'descr': '<f8', 'fortran_order': False, "
                                    "'shape': (4611686018427387904, 4)}", six), "size overflows")
put("bad_huge_entry.npy", with_header("{'descr': '<f8', 'fortran_order': False, "
                                      "'shape': (99999999999999999999,)}", six), "shape entry too large")
put("bad_empty_header.npy", with_header("", six), "malformed .npy header")
with open(os.path.join(OUT, "BAD"), "w") as f:
    f.write("# malformed files: name<TAB>substring of the message\n")
    for k, v in bad.items():
        f.write(f"{k}\t{v}\n")
