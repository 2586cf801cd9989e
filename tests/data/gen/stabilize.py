"""The optimizer's stabilizations on integer and bool operands:
ops/stabilize_int.json.

A float-only op (exp, true_div) of an integer or bool x computes on x
converted to the float of its dtype (float32 for bool and 8 or 16 bits,
float64 for wider; FORMAT.md s7). The stabilize rewrites took x out from
under exp or a quotient and negated or subtracted it in its own dtype:
reciprocal(1 + exp(z)) -> sigmoid(-z) with z uint8 gave sigmoid(255) at
z = 1, a bool z did not compile ("neg of bool is not supported"), and
exp(log(sqr(x) / 2)) -> sqr(x) / 2 took int8 sqr(12) (-112, wrapped) for
never negative. Each function is the audit's graph; the expected values
are NumPy's, with integer ops wrapping as written and the float-only ops
in the float of their operands' dtype. test_opdata runs every case as
written (-O none) and with fast_run.
Run: /usr/bin/python3 stabilize.py (from tests/data/gen)."""
import numpy as np

from common import Graph

F32 = np.float32


def f32(x):
    return np.asarray(x).astype(F32)


def one_over_1p_exp(z):
    """1 / (1 + exp(z)) with z already float32."""
    with np.errstate(over="ignore"):
        return F32(1) / (F32(1) + np.exp(z))


def main():
    g = Graph("stabilize_int")
    ONE = {"value": 1}

    # sigmoid_simplify: reciprocal(1 + exp(z)), 1 / (1 + exp(z)) and
    # 1 / (1 + exp(-z)) -> sigmoid(-z), sigmoid(z): -z in the integer dtype
    # wrapped (uint8 -1 is 255; int8 -(-128) is -128, which the rewrite of
    # 1 / (1 + exp(-z)) dropped).
    zu8 = np.array([0, 1, 5, 200, 255], np.uint8)
    zi8 = np.array([0, 1, -128, 127, -1, 5], np.int8)
    zb = np.array([True, False])
    for dt, z in (("uint8", zu8), ("int8", zi8), ("bool", zb)):
        n = len(z)
        for form in ("recip", "div1", "divneg"):
            if form == "divneg" and dt == "bool":
                continue  # neg of bool is no graph
            zid = g.inp(f"z_{form}_{dt}", dt, [n])
            src = g.op("neg", [zid]) if form == "divneg" else zid
            d = g.op("add", [ONE, g.op("exp", [src])])
            y = g.op("reciprocal", [d]) if form == "recip" else g.op("true_div", [ONE, d])
            g.func(f"{form}_{dt}", [zid], [y])
            with np.errstate(over="ignore"):
                zz = -z if form == "divneg" else z  # wraps, as written
            g.case(f"{form}_{dt}", {zid: z}, {y: one_over_1p_exp(f32(zz))})

    # sigmoid_times_exp: exp(a) * (B / (exp(a) + exp(b))) -> sigmoid(a - b)
    # * B: a - b in uint8 gave sigmoid(255) at a = 0, b = 1; in int8,
    # 60 - (-70) wrapped to -126. With bools it did not compile ("sub of
    # bool is not supported").
    for dt, a, b in (("uint8", [0, 1, 20, 3], [1, 0, 10, 3]), ("int8", [60, -60, 0, -5], [-70, 70, 1, 3]),
                     ("bool", [True, False, True, False], [True, True, False, False])):
        a, b = np.array(a, dt), np.array(b, dt)
        ia, ib, iB = g.inp(f"a_ste_{dt}", dt, [4]), g.inp(f"b_ste_{dt}", dt, [4]), g.inp(f"B_ste_{dt}", "float32", [4])
        ea, eb = g.op("exp", [ia]), g.op("exp", [ib])
        y = g.op("mul", [ea, g.op("true_div", [iB, g.op("add", [ea, eb])])])
        g.func(f"ste_{dt}", [ia, ib, iB], [y])
        B = np.array([1, 2, 0.5, 1], F32)
        xa, xb = np.exp(f32(a)), np.exp(f32(b))
        g.case(f"ste_{dt}", {ia: a, ib: b, iB: B}, {y: xa * (B / (xa + xb))})

    # exp(z) * -(B / (1 + exp(z))) -> sigmoid(z) * neg(B): neg of a uint8 B
    # wrapped (-200 is 56), of an int8 B -(-128) is -128.
    for dt, B in (("uint8", [1, 2, 200]), ("int8", [1, -128, 100])):
        B = np.array(B, dt)
        iz, iB = g.inp(f"z_sten_{dt}", "float32", [3]), g.inp(f"B_sten_{dt}", dt, [3])
        e = g.op("exp", [iz])
        y = g.op("mul", [e, g.op("neg", [g.op("true_div", [iB, g.op("add", [ONE, e])])])])
        g.func(f"sten_{dt}", [iz, iB], [y])
        z = np.array([0, 1, -2], F32)
        g.case(f"sten_{dt}", {iz: z, iB: B}, {y: np.exp(z) * -(f32(B) / (F32(1) + np.exp(z)))})

    # mul_sum_quotient: (a + -(u / y)) * y -> a * y + neg(u): neg of a
    # uint8 u wrapped (-200 is 56; expected -199.5 at a = 1, y = 0.5).
    ia, iu, iy = g.inp("a_msq", "float32", [3]), g.inp("u_msq", "uint8", [3]), g.inp("y_msq", "float32", [3])
    y = g.op("mul", [g.op("add", [ia, g.op("neg", [g.op("true_div", [iu, iy])])]), iy])
    g.func("msq_uint8", [ia, iu, iy], [y])
    a, u, yy = np.ones(3, F32), np.array([1, 2, 200], np.uint8), np.array([2, 4, 0.5], F32)
    g.case("msq_uint8", {ia: a, iu: u, iy: yy}, {y: (a + -(f32(u) / yy)) * yy})
    # (t + u / y) * y with t and y int8: t * y wrapped in int8 (100 * 2 is
    # -56), where the sum as written is float32.
    it, iu, iy = g.inp("t_msqt", "int8", [3]), g.inp("u_msqt", "float32", [3]), g.inp("y_msqt", "int8", [3])
    y = g.op("mul", [g.op("add", [it, g.op("true_div", [iu, iy])]), iy])
    g.func("msq_int_term", [it, iu, iy], [y])
    t, u, yy = np.array([100, -3, 1], np.int8), np.array([1, 2, 3], F32), np.array([2, 4, 100], np.int8)
    g.case("msq_int_term", {it: t, iu: u, iy: yy}, {y: (f32(t) + u / f32(yy)) * f32(yy)})

    # exp_log: exp(log(x)) -> x only where x is never negative; int8 sqr,
    # abs and x*x wrap (sqr(12) is -112, abs(-128) is -128), so log is NaN
    # there as written.
    x = np.array([12, -128, 11, 100, -100, 0, 3], np.int8)
    with np.errstate(invalid="ignore", divide="ignore"):
        for name, op, make in (("sqr_div", "sqr", lambda v: f32(v * v) / F32(2)),
                               ("abs_div", "abs", lambda v: f32(np.abs(v)) / F32(2))):
            ix = g.inp(f"x_el_{name}", "int8", [7])
            y = g.op("exp", [g.op("log", [g.op("true_div", [g.op(op, [ix]), {"value": 2}])])])
            g.func(f"el_{name}", [ix], [y])
            g.case(f"el_{name}", {ix: x}, {y: np.exp(np.log(make(x)))})
        ix = g.inp("x_el_mulself", "int8", [7])
        y = g.op("exp", [g.op("log", [g.op("add", [g.op("mul", [ix, ix]), {"value": 0.5}])])])
        g.func("el_mulself_add", [ix], [y])
        g.case("el_mulself_add", {ix: x}, {y: np.exp(np.log((x * x).astype(np.float64) + 0.5))})
    g.write()


if __name__ == "__main__":
    main()
