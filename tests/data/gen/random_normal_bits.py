#!/usr/bin/env python3
"""The exact bits of random_normal's first draws, worked out without tg
and without libm: Philox 4x32-10 and Box-Muller with the series that
libcore/src/ops/random.c writes out (rnd_log, rnd_sincos_2pi), each step one
Python float operation (an IEEE double, rounded once, never fused), so
that the values are the same on every machine. Prints the C table that
tests/unit/test_random.c's test_normal_bits compares against.

    /usr/bin/python3 tests/data/gen/random_normal_bits.py
"""
import math
import struct

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox(c, k):
    c, k = list(c), list(k)
    for _ in range(10):
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1], p0 & 0xFFFFFFFF]
        k = [(k[0] + W0) & 0xFFFFFFFF, (k[1] + W1) & 0xFFFFFFFF]
    return c


def u53(hi, lo):
    return (((hi << 32) | lo) >> 11) * 2.0**-53


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def log_series(x):
    b = bits(x)
    ed = from_bits((b >> 52) | 0x4330000000000000) - (2.0**52 + 1023)
    m = from_bits((b & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    if m > 1.4142135623730951:
        m, ed = 0.5 * m, ed + 1.0
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = 1.0 / 21
    for d in (19, 17, 15, 13, 11, 9, 7, 5, 3):
        p = p * z + 1.0 / d
    s2 = 2.0 * s
    hi, lo = float.fromhex("0x1.62e42p-1"), 4.7493250390316726e-07
    return ed * hi + (s2 + (s2 * z * p + ed * lo))


def sincos_2pi(u):
    kd = float(round(4.0 * u))  # half to even, as rint
    t = (u - 0.25 * kd) * 6.283185307179586
    z = t * t
    f = math.factorial
    ps = -1.0 / f(19)
    for d in (17, 15, 13, 11, 9, 7, 5, 3):
        ps = ps * z + (1.0 if d % 4 == 1 else -1.0) / f(d)
    pc = 1.0 / f(20)
    for d in (18, 16, 14, 12, 10, 8, 6, 4):
        pc = pc * z + (1.0 if d % 4 == 0 else -1.0) / f(d)
    st, ct = t + t * z * ps, 1.0 - (0.5 * z - z * z * pc)
    odd = kd in (1.0, 3.0)
    a, c = (ct, st) if odd else (st, ct)
    return (-a if kd in (2.0, 3.0) else a), (-c if kd in (1.0, 2.0) else c)


def normals(key, ctr, n):
    out = []
    for blk in range((n + 1) // 2):
        c = (ctr + blk) % 2**64
        w = philox([c & 0xFFFFFFFF, c >> 32, 0, 0], [key & 0xFFFFFFFF, key >> 32])
        u0, u1 = u53(w[0], w[1]), u53(w[2], w[3])
        r = math.sqrt(-2.0 * log_series(1.0 - u0))
        sn, cs = sincos_2pi(u1)
        out += [r * cs, r * sn]
    return out[:n]


if __name__ == "__main__":
    N = 4096
    v = normals(42, 7, N)
    picks = list(range(6)) + [1001, 2048, 3333, 4095]
    print("/* tests/data/gen/random_normal_bits.py: key 42, counter 7, %d draws */" % N)
    print("static const struct { int i; uint64_t bits; } normal_bits[] = {")
    for i in picks:
        print("    {%d, 0x%016xull}, /* %.17g */" % (i, bits(v[i]), v[i]))
    print("};")
