#!/usr/bin/env python3
"""An independent reader of the .tgf layout (schemas/tgf.md), for
tests/tools/tgf.sh: checks the preamble, both checksums, the array table's
and every array's CRC-32C with its own table-driven CRC, decodes each
function's graph section (string table, variables, nodes in their
schedule, the function, the rewrite record and passes) and checks it
against the header's node count, then prints each shared variable as
"id dtype shape" (after the header's options and each function's node
count and times) and, for each given ID=NPY pair, whether the saved value
is byte-identical to the .npy file (numpy).

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

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]
KINDS = ["input", "constant", "shared", "result"]
NONE = 0xFFFFFFFF


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ TABLE[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


class Cursor:
    def __init__(self, data):
        self.d, self.p = data, 0

    def u8(self):
        self.p += 1
        return self.d[self.p - 1]

    def u32(self):
        self.p += 4
        return struct.unpack_from("<I", self.d, self.p - 4)[0]

    def i64(self):
        self.p += 8
        return struct.unpack_from("<q", self.d, self.p - 8)[0]

    def bytes(self, n):
        self.p += n
        assert self.p <= len(self.d), "section truncated"
        return self.d[self.p - n:self.p]


def section(data):
    """Decode one graph section; returns (variables, nodes, function)."""
    c = Cursor(data)
    magic = c.bytes(4)
    assert magic in (b"TGG\x02", b"TGG\x03", b"TGG\x04"), "section magic"
    v3 = magic >= b"TGG\x03"
    v4 = magic == b"TGG\x04"
    strs = [c.bytes(c.u32()).decode() for _ in range(c.u32())]

    def s(opt=True):
        i = c.u32()
        if i == NONE and opt:
            return None
        return strs[i]

    variables = []
    for _ in range(c.u32()):
        v = {"id": s(False), "name": s(), "kind": KINDS[c.u8()], "flags": c.u8(),
             "dtype": DTYPES[c.u8()]}
        nd = c.u8()
        v["shape"] = [c.i64() for _ in range(nd)]
        v["array"], v["test_value"] = c.u32(), c.u32()
        variables.append(v)
    nodes = []
    for _ in range(c.u32()):
        n = {"op": s(False), "attrs": s(), "name": s()}
        if v4:
            n["index"] = c.u32()
        n["inputs"] = [variables[c.u32()]["id"] for _ in range(c.u32())]
        nout = c.u32()
        n["outputs"] = [variables[c.u32()]["id"] for _ in range(nout)]
        if c.u8():
            n["inplace"] = list(struct.unpack("<%db" % nout, c.bytes(nout)))
        n["trace"] = [(s(), c.i64(), s(), s()) for _ in range(c.u32())]
        no = c.u32()
        n["origins"] = None if no == NONE else [s(False) for _ in range(no)]
        if no != NONE and v3:
            ends = [c.u32() for _ in range(c.u32())]
            if ends:
                assert ends[-1] == no and all(a < b for a, b in zip([0] + ends, ends)), "origin groups"
                n["groups"] = ends
        if v4:
            moved = s()
            if moved is not None:
                n["moved"] = (moved, s(False))
            n["fused"] = [(s(False), s(False)) for _ in range(c.u32())]
            assert not n["fused"] or n["op"] == "composite", "fused names on a composite only"
        if n["attrs"] is not None:
            json.loads(n["attrs"])
        nodes.append(n)
    fn = {"inputs": [variables[c.u32()]["id"] for _ in range(c.u32())]}
    fn["outputs"] = [(variables[c.u32()]["id"], s(False)) for _ in range(c.u32())]
    fn["updates"] = [(variables[c.u32()]["id"], variables[c.u32()]["id"]) for _ in range(c.u32())]
    record = []
    for _ in range(c.u32()):
        name, pas = s(False), s(False)
        removed = [s(False) for _ in range(c.u32())]
        created = [s(False) for _ in range(c.u32())]
        record.append((name, pas, removed, created))
    passes = []
    for _ in range(c.u32()):
        passes.append((s(False), struct.unpack("<d", c.bytes(8))[0], c.u32(), c.u32(), c.u32()))
    grads = {}
    if v3:
        for _ in range(c.u32()):
            k = s(False)
            grads[k] = (s(), s(), s(False), s(False))
        assert list(grads) == sorted(grads), "gradient nodes sorted by key"
    assert c.p == len(data), "bytes after the section"
    # Each node runs after the nodes it reads.
    made = set(v["id"] for v in variables if v["kind"] != "result")
    for n in nodes:
        assert all(i in made for i in n["inputs"]), "schedule order"
        made.update(n["outputs"])
    return variables, nodes, fn, record, passes, grads


def main():
    raw = open(sys.argv[1], "rb").read()
    assert raw[:8] == b"TGF\x89\r\n\x1a\n", "magic"
    version, flags, hoff, hlen, doff, dlen = struct.unpack_from("<IIQQQQ", raw, 8)
    hcrc, res1, pcrc, res2 = struct.unpack_from("<IIII", raw, 48)
    assert version in (2, 3, 4) and flags == 0 and hoff == 64 and res1 == 0 and res2 == 0
    assert pcrc == crc32c(raw[:56]), "preamble checksum"
    assert hcrc == crc32c(raw[64:64 + hlen]), "header checksum"
    assert doff % 64 == 0 and doff >= 64 + hlen and doff + dlen == len(raw), "layout"
    header = json.loads(raw[64:64 + hlen])
    tab = header["array_table"]
    tbytes = raw[doff + tab["offset"]:doff + tab["offset"] + 96 * tab["count"]]
    assert tab["offset"] % 64 == 0 and crc32c(tbytes) == tab["crc32c"], "array table checksum"
    arrays = []
    for k in range(tab["count"]):
        e = tbytes[96 * k:96 * (k + 1)]
        dt, nd = e[0], e[1]
        shape = list(struct.unpack_from("<%dQ" % nd, e, 8))
        off, nb, crc = struct.unpack_from("<QQI", e, 72)
        assert off % 64 == 0, "alignment"
        data = raw[doff + off:doff + off + nb]
        assert len(data) == nb and crc32c(data) == crc, "array %d checksum" % k
        arrays.append(np.frombuffer(data, dtype=np.dtype(DTYPES[dt]).newbyteorder("<")).reshape(shape))
    shared = {}
    o = header["options"]
    print("options: preset %s, include %s, exclude %s" % (o["preset"], ",".join(o["include"]) or "-",
                                                        ",".join(o["exclude"]) or "-"))
    for f in header["functions"]:
        variables, nodes, fn, record, passes, grads = section(arrays[f["graph_section"]].tobytes())
        assert len(nodes) == f["nodes"], "node count"
        print("function %s: %d nodes, compile_seconds %r, optimize_seconds %r" %
              (f["name"], f["nodes"], f["compile_seconds"], f["optimize_seconds"]))
        for k, (of, of_op, by, by_op) in grads.items():
            print("gradient node %s: from %s %s, of %s (%s)" % (k, by_op, by, of or "-", of_op or "-"))
        for n in nodes:
            if "groups" in n:
                ends = n["groups"]
                parts = [n["origins"][a:b] for a, b in zip([0] + ends, ends)]
                print("origin groups of %s: %s" % (n["outputs"][0], " | ".join(" ".join(p) for p in parts)))
            if n.get("index", NONE) != NONE:
                print("node %s: nodes[%d] of the file" % (n["outputs"][0], n["index"]))
            if "moved" in n:
                print("node %s moved: %s" % (n["outputs"][0], n["moved"][0]))
            for j, (desc, trace) in enumerate(n.get("fused", [])):
                print("fused node %d of %s: %s%s" % (j, n["outputs"][0], desc, trace))
        for v in variables:
            if v["kind"] == "shared":
                shared[v["id"]] = v["array"]
    for sid, k in sorted(shared.items()):
        print(sid, arrays[k].dtype, list(arrays[k].shape))
    for pair in sys.argv[2:]:
        sid, path = pair.split("=", 1)
        want = np.load(path)
        got = arrays[shared[sid]]
        same = got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
        print("%s %s" % (sid, "identical" if same else "DIFFERS"))
    print("ok: %d arrays, %d functions" % (len(arrays), len(header["functions"])))


main()
