#!/usr/bin/env python3
"""Damage a .tgf file on purpose, for tests/tools/tgf.sh.

tgf_patch.py IN OUT MODE [ARG]: writes a copy of IN to OUT changed by MODE,
re-computing the checksums (CRC-32C, computed here bit by bit, independently
of tg's) where the damage must get past them:
  version N        the preamble's format version
  header-text A B  replace text A by text B in the JSON header
  header-raw TEXT  the header is TEXT (need not be JSON)
  flip-header      change one header byte, keeping the old checksum
  flip-data        change the first data byte, keeping the array's checksum
"""
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
    elif mode == "header-raw":
        header = args[0].encode()
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
