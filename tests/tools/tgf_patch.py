#!/usr/bin/env python3
"""Damage a .tgf file on purpose, for tests/tools/tgf.sh.

tgf_patch.py IN OUT MODE [ARG]: writes a copy of IN to OUT changed by MODE,
re-computing the checksums (CRC-32C, computed here bit by bit, independently
of tg's) where the damage must get past them:
  version N        the preamble's format version
  header-text A B  replace text A by text B in the JSON header
  header-drop KEY  remove the header's top-level key KEY
  header-raw TEXT  the header is TEXT (need not be JSON)
  flip-header      change one header byte, keeping the old checksum
  flip-data        change the first data byte, keeping the array's checksum
  array-field K F V  set field F (shape0 or offset) of array K in the array
                   table to V, fixing the table's checksum
  section-string F OLD NEW  in function F's graph section, replace the
                   string OLD by NEW (same length), fixing the checksums
  section-lengths F A B C D  in function F's graph section, replace the
                   first pair of 8-byte lengths A, B (a 2-d variable's
                   shape) by C, D, fixing the checksums
"""
import json
import struct
import sys


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def main():
    src, dst, mode = sys.argv[1:4]
    args = sys.argv[4:]
    raw = bytearray(open(src, "rb").read())
    pre = raw[:64]
    hlen, doff, dlen = struct.unpack_from("<QQQ", pre, 24)
    header = bytes(raw[64:64 + hlen])
    data = bytes(raw[doff:doff + dlen])
    if mode == "version":
        struct.pack_into("<I", pre, 8, int(args[0]))
    elif mode == "header-text":
        assert args[0].encode() in header, "text not in the header"
        header = header.replace(args[0].encode(), args[1].encode())
    elif mode == "header-drop":
        h = json.loads(header)
        del h[args[0]]
        header = json.dumps(h, separators=(",", ":")).encode()
    elif mode == "header-raw":
        header = args[0].encode()
    elif mode in ("array-field", "section-string", "section-lengths"):
        h = json.loads(header)
        tab = h["array_table"]
        data = bytearray(data)
        t0 = tab["offset"]
        if mode == "array-field":
            k, field, value = int(args[0]), args[1], int(args[2])
            at = t0 + 96 * k + (8 if field == "shape0" else 72)
            struct.pack_into("<Q", data, at, value)
        else:
            f = int(args[0])
            if mode == "section-string":
                old, new = args[1].encode(), args[2].encode()
                assert len(old) == len(new)
                needle, repl = struct.pack("<I", len(old)) + old, struct.pack("<I", len(new)) + new
            else:
                a, b, c, d = (int(x) for x in args[1:5])
                needle, repl = struct.pack("<qq", a, b), struct.pack("<qq", c, d)
            k = h["functions"][f]["graph_section"]
            e = t0 + 96 * k
            off, nb = struct.unpack_from("<QQ", data, e + 72)
            sec = bytes(data[off:off + nb])
            assert needle in sec, "not in the section"
            sec = sec.replace(needle, repl, 1)
            data[off:off + nb] = sec
            struct.pack_into("<I", data, e + 88, crc32c(sec))
        tab["crc32c"] = crc32c(bytes(data[t0:t0 + 96 * tab["count"]]))
        header = json.dumps(h, separators=(",", ":")).encode()
        data = bytes(data)
    elif mode == "flip-header":
        raw[64 + hlen // 2] ^= 0x01
        open(dst, "wb").write(raw)
        return
    elif mode == "flip-data":
        raw[doff] ^= 0x01
        open(dst, "wb").write(raw)
        return
    else:
        sys.exit("unknown mode " + mode)
    hlen = len(header)
    doff = (64 + hlen + 63) // 64 * 64
    struct.pack_into("<QQQ", pre, 24, hlen, doff, dlen)
    struct.pack_into("<I", pre, 48, crc32c(header))
    struct.pack_into("<I", pre, 56, crc32c(bytes(pre[:56])))
    out = bytes(pre) + header + b"\0" * (doff - 64 - hlen) + data
    open(dst, "wb").write(out)


main()
