#!/usr/bin/env python3
"""An independent reader of the .tgf layout (schemas/tgf.md), for
tests/tools/tgf.sh: checks the preamble, both checksums and every array's
CRC-32C with its own table-driven CRC, then prints each shared variable as
"id dtype shape" and, for each given ID=NPY pair, whether the saved value is
byte-identical to the .npy file (numpy).

tgf_read.py FILE.tgf [ID=PATH.npy]..."""
import json
import struct
import sys

import numpy as np

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ TABLE[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


def main():
    raw = open(sys.argv[1], "rb").read()
    assert raw[:8] == b"TGF\x89\r\n\x1a\n", "magic"
    version, flags, hoff, hlen, doff, dlen = struct.unpack_from("<IIQQQQ", raw, 8)
    hcrc, res1, pcrc, res2 = struct.unpack_from("<IIII", raw, 48)
    assert version == 1 and flags == 0 and hoff == 64 and res1 == 0 and res2 == 0
    assert pcrc == crc32c(raw[:56]), "preamble checksum"
    assert hcrc == crc32c(raw[64:64 + hlen]), "header checksum"
    assert doff % 64 == 0 and doff >= 64 + hlen and doff + dlen == len(raw), "layout"
    header = json.loads(raw[64:64 + hlen])
    arrays = []
    for k, a in enumerate(header["arrays"]):
        assert a["offset"] % 64 == 0, "alignment"
        data = raw[doff + a["offset"]:doff + a["offset"] + a["nbytes"]]
        assert len(data) == a["nbytes"]
        assert crc32c(data) == a["crc32c"], "array %d checksum" % k
        arr = np.frombuffer(data, dtype=np.dtype(a["dtype"]).newbyteorder("<")).reshape(a["shape"])
        arrays.append(arr)
    for sid, k in sorted(header["shared"].items()):
        print(sid, arrays[k].dtype, list(arrays[k].shape))
    for pair in sys.argv[2:]:
        sid, path = pair.split("=", 1)
        want = np.load(path)
        got = arrays[header["shared"][sid]]
        same = got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
        print("%s %s" % (sid, "identical" if same else "DIFFERS"))
    print("ok: %d arrays, %d functions" % (len(arrays), len(header["functions"])))


main()
