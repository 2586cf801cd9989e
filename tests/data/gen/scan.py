"""Expected values of the scan examples (examples/scan/*.json), computed
by NumPy loops written from the documentation's definitions, independently
of tg: tests/data/scan/<example>.<call>.<output>.npy, and the inputs as
tests/data/scan/<example>.in.<input>.npy. test_scan_examples.c runs each
example's function on the inputs for the listed number of calls and
compares every call's outputs. Run: python3 tests/data/gen/scan.py.

The Gibbs chain needs tg's random numbers: Philox 4x32-10 (Salmon et al.,
SC 2011) written here from the paper's constants, with the layout
FORMAT.md and docs/format-choices.md give (state [key, counter]; the
binomial with n = 1 draws element i from block (key, counter + i,
sub-index 0): 1 when the 53-bit uniform of words 0-1 is below p)."""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scan")
M32 = 0xFFFFFFFF


def save(name, **arrays):
    for k, a in arrays.items():
        np.save(os.path.join(OUT, "%s.%s.npy" % (name, k)), a)


def philox4x32_10(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


def binomial1(state, p):
    """random_binomial(state, p.shape, 1, p): (new state, sample)."""
    key, ctr = int(state[0]), int(state[1])
    out = np.empty(p.shape)
    for i, pi in enumerate(p.ravel()):
        c = (ctr + i) & 0xFFFFFFFFFFFFFFFF
        w = philox4x32_10((c & M32, c >> 32, 0, 0), (key & M32, key >> 32))
        u = (((w[0] << 32) | w[1]) >> 11) * 2.0 ** -53
        out.ravel()[i] = 1.0 if u < pi else 0.0
    return np.array([key, (ctr + p.size) & 0xFFFFFFFFFFFFFFFF], np.uint64), out


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def main():
    os.makedirs(OUT, exist_ok=True)
    # A**k (the documentation prints these).
    A = np.arange(10, dtype=np.float64)
    save("power", **{"in.A": A, "in.k": np.int32(4), "0.final_result": A ** 4})
    # The polynomial: 1 + 0*3 + 2*3^2 = 19 (printed), and another.
    c = np.array([0.5, -1.25, 2.0, 0.75], np.float32)
    x = np.float32(1.5)
    save("polynomial", **{"in.coefficients": c, "in.x": x,
                          "0.polynomial": np.float64(sum(float(c[i]) * float(x) ** i for i in range(4)))})
    # Triangular numbers (printed for 15).
    save("triangular", **{"in.up_to": np.int32(15),
                          "0.scan_result": np.array([n * (n + 1) // 2 for n in range(15)], np.int64)})
    # Values at positions (printed).
    loc = np.array([[1, 1], [2, 3]], np.int32)
    vals = np.array([42, 50], np.float32)
    model = np.zeros((5, 5), np.float32)
    res = np.zeros((2, 5, 5), np.float32)
    for t in range(2):
        res[t][loc[t][0], loc[t][1]] = vals[t]
    save("set_value", **{"in.location": loc, "in.values": vals, "in.output_model": model, "0.result": res})
    # The Gibbs chain, two calls: the random state carries over.
    W = np.array([[0.5, -1.0, 0.25], [1.5, 0.75, -0.5], [-0.25, 1.0, 2.0], [0.1, -0.6, 0.9]])
    bvis = np.array([0.1, -0.2, 0.3, -0.4])
    bhid = np.array([-0.5, 0.25, 0.0])
    state = np.array([1234, 0], np.uint64)
    sample = np.array([1.0, 0.0, 1.0, 0.0])
    outs = {"in.sample": sample}
    for call in range(2):
        v = sample
        for _ in range(10):
            state, h = binomial1(state, sigmoid(v @ W + bhid))
            state, v = binomial1(state, sigmoid(h @ W.T + bvis))
        outs["%d.last_sample" % call] = v
    save("gibbs", **outs)
    # Updates from the body (printed: b 2 then 12, c 12 then 22).
    save("shared_updates", **{"0.b": np.int64(2), "0.c": np.int64(12), "1.b": np.int64(12), "1.c": np.int64(22)})
    # The RNNs.
    rng = np.random.default_rng(7)
    for look in (False, True):
        name = "rnn_lookahead" if look else "rnn"
        u = rng.uniform(-1, 1, (11, 2))
        x0 = rng.uniform(-1, 1, (3, 3))
        y0 = rng.uniform(-1, 1, 2)
        Ws = {"W": (3, 3), "W_in_1": (2, 3), "W_in_2": (2, 3), "W_feedback": (2, 3), "W_out": (3, 2)}
        if look:
            Ws["W_in_3"] = (2, 3)
        Wv = {k: rng.uniform(-0.8, 0.8, s) for k, s in Ws.items()}
        span = 6 if look else 4
        steps = len(u) - span
        xs = list(x0)  # positions -3, -2, -1
        ys = [y0]
        for t in range(steps):
            n = t + 4  # the row of u(n): u[0] is u(-4)
            pre = (xs[-1] @ Wv["W"] + u[n] @ Wv["W_in_1"] + u[n - 4] @ Wv["W_in_2"] +
                   ys[-1] @ Wv["W_feedback"])
            if look:
                pre = pre + u[n + 2] @ Wv["W_in_3"]
            x_t = np.tanh(pre)
            y_t = xs[-3] @ Wv["W_out"]
            xs.append(x_t)
            ys.append(y_t)
        arr = {"in.u": u, "in.x0": x0, "in.y0": y0, "0.x_vals": np.array(xs[3:]), "0.y_vals": np.array(ys[1:])}
        for k, v in Wv.items():
            arr["in." + k] = v
        save(name, **arr)
    # Until (printed for 45).
    save("power_of_2", **{"in.max_value": np.float64(45), "0.values": np.array([2.0, 4, 8, 16, 32, 64])})
    # reduce and foldr.
    xs = np.array([0.5, 1.5, -2.0, 4.0, 0.25])
    save("reduce_sum", **{"in.xs": xs, "0.total": np.float64(xs.sum()), "0.partial_sums": np.cumsum(xs)})
    coef = np.array([1.0, 0.0, 2.0, -0.5])
    save("horner_foldr", **{"in.coefficients": coef, "in.x": np.float64(3.0),
                            "0.value": np.float64(np.polyval(coef[::-1], 3.0))})


if __name__ == "__main__":
    main()
