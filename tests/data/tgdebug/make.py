#!/usr/bin/env python3
"""Writes the graphs of tests/tools/tgdebug.sh (run it here after a change;
the JSON files are committed). Each node gets a trace naming a made-up
line of model.py, which the tests expect tgdebug to print."""
import json

line = [0]


def node(op, inputs, out, attrs=None, code=None):
    line[0] += 1
    n = {"op": op, "inputs": inputs, "outputs": [out],
         "trace": [{"file": "model.py", "line": 100 + line[0], "function": "build",
                    "code": code or f"{out} = {op}({', '.join(i if isinstance(i, str) else 'c' for i in inputs)})"}]}
    if attrs:
        n["attrs"] = attrs
    return n


def write(name, variables, nodes, functions=None):
    g = {"format": "tg-graph", "version": 1, "name": name, "variables": variables, "nodes": nodes}
    if functions:
        g["functions"] = functions
    with open(name + ".json", "w") as f:
        json.dump(g, f, indent=1)
        f.write("\n")


f64 = lambda shape: {"dtype": "float64", "shape": shape}

# deep_log: the log of a negative number after many ops (a dot and a sum
# break the elementwise chains, so fast_run fuses pieces around them).
line[0] = 0
write("deep_log",
      [{"id": "x", "type": f64([4])},
       {"id": "W", "type": f64([4, 4]), "constant": {"data": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]}}],
      [node("mul", ["x", {"value": 0.5}], "a1"),
       node("add", ["a1", {"value": 1.0}], "a2"),
       node("dot", ["W", "a2"], "h1"),
       node("tanh", ["h1"], "h2"),
       node("sqr", ["h2"], "h3"),
       node("sub", ["h3", {"value": 2.0}], "d", code="d = h3 - 2"),
       node("log", ["d"], "lg", code="lg = T.log(d)"),
       node("mul", ["lg", {"value": 3.0}], "o1"),
       node("exp", ["o1"], "o2"),
       node("sum", ["o2"], "cost")])

# overflow: exp of a large number. s = x + 5; ex = exp(s).
line[0] = 20
write("overflow",
      [{"id": "x", "type": f64([3])}],
      [node("add", ["x", {"value": 5.0}], "s", code="s = x + 5"),
       node("exp", ["s"], "ex", code="ex = T.exp(s)"),
       node("mul", ["ex", {"value": 2.0}], "y")])

# fused00: 0/0 inside what fast_run fuses into one composite.
line[0] = 40
write("fused00",
      [{"id": "x", "type": f64([3])}, {"id": "y", "type": f64([3])}],
      [node("sub", ["x", "y"], "num", code="num = x - y"),
       node("mul", ["num", "y"], "den", code="den = num * y"),
       node("true_div", ["num", "den"], "q", code="q = num / den"),
       node("add", ["q", {"value": 1.0}], "r"),
       node("tanh", ["r"], "out")])

# testvalues: a shape mismatch at the dot (x has 3 entries, W 4 rows).
line[0] = 60
tv_vars = [{"id": "x", "type": f64([None]), "test_value": {"data": [1, 2, 3], "shape": [3]}},
           {"id": "W", "type": f64([None, None]), "test_value": {"data": [[1, 2], [3, 4], [5, 6], [7, 8]], "shape": [4, 2]}}]
tv_nodes = [node("mul", ["x", {"value": 2.0}], "x2", code="x2 = x * 2"),
            node("dot", ["x2", "W"], "h", code="h = T.dot(x2, W)"),
            node("tanh", ["h"], "out", code="out = T.tanh(h)")]
write("tv_bad", tv_vars, tv_nodes)
ok_vars = json.loads(json.dumps(tv_vars))
ok_vars[1]["test_value"] = {"data": [[1, 2], [3, 4], [5, 6]], "shape": [3, 2]}
line[0] = 60
write("tv_ok", ok_vars, [node("mul", ["x", {"value": 2.0}], "x2", code="x2 = x * 2"),
                         node("dot", ["x2", "W"], "h", code="h = T.dot(x2, W)"),
                         node("tanh", ["h"], "out", code="out = T.tanh(h)")])
miss = json.loads(json.dumps(tv_vars))
del miss[0]["test_value"]
line[0] = 60
write("tv_missing", miss, [node("mul", ["x", {"value": 2.0}], "x2"),
                           node("dot", ["x2", "W"], "h"),
                           node("tanh", ["h"], "out")])

# cmp_exp: what the test-only broken rewrite (exp -> expm1) breaks.
line[0] = 80
write("cmp_exp",
      [{"id": "x", "type": f64([3])}],
      [node("mul", ["x", {"value": 2.0}], "a", code="a = x * 2"),
       node("exp", ["a"], "e", code="e = T.exp(a)"),
       node("sum", ["e"], "s", code="s = e.sum()")])

# cmp_stable: the gradient of switch(x > 0, log(x), 0) is NaN at 0 as
# written (0 * 1/0) and 0 once switch_sink has run: compare counts it as
# stabilized, not as a mismatch.
line[0] = 85
write("cmp_stable",
      [{"id": "x", "type": f64([3])}],
      [node("gt", ["x", {"value": 0.0}], "c", code="c = x > 0"),
       node("log", ["x"], "l", code="l = T.log(x)"),
       node("switch", ["c", "l", {"value": 0.0}], "y", code="y = T.switch(c, l, 0)"),
       node("sum", ["y"], "s", code="s = y.sum()"),
       node("grad", ["s", "x"], "g", code="g = T.grad(s, x)")],
      {"main": {"inputs": ["x"], "outputs": ["s", "g"]}})

# cmp_infsign: 1/(exp(x) - 1) - 1/exp(x) is +inf at 0; the test-only
# broken rewrite makes it -1 - inf = -inf. Another infinity is a mismatch,
# not a stabilization.
line[0] = 87
write("cmp_infsign",
      [{"id": "x", "type": f64([2])}],
      [node("exp", ["x"], "e", code="e = T.exp(x)"),
       node("sub", ["e", {"value": 1.0}], "d", code="d = e - 1"),
       node("true_div", [{"value": 1.0}, "d"], "p", code="p = 1 / d"),
       node("true_div", [{"value": 1.0}, "e"], "q", code="q = 1 / e"),
       node("sub", ["p", "q"], "y", code="y = p - q")])

# cmp_random: random numbers must be the same in both compiles (each has
# its own copy of the generator's state, equal at the start).
line[0] = 90
rn = node("random_uniform", ["rng", {"value": {"dtype": "int64", "shape": [1], "data": [5]}}, {"value": 0.0}, {"value": 1.0}], "rng2")
rn["outputs"] = ["rng2", "u"]
write("cmp_random",
      [{"id": "rng", "type": {"dtype": "uint64", "shape": [2]}, "shared": {"data": [42, 0]}}],
      [rn,
       node("mul", ["u", {"value": 2.0}], "u2"),
       node("add", ["u2", {"value": 1.0}], "v")],
      {"main": {"inputs": [], "outputs": ["u", "v"], "updates": {"rng": "rng2"}}})

# tv_outshape: a test_value on a node's output states the shape expected
# there: h is (2,), the file says (3,).
line[0] = 60
ov = json.loads(json.dumps(ok_vars))
ov.append({"id": "h", "test_value": {"data": [0, 0, 0], "shape": [3]}, "type": f64([None])})
write("tv_outshape", ov, [node("mul", ["x", {"value": 2.0}], "x2", code="x2 = x * 2"),
                          node("dot", ["x2", "W"], "h", code="h = T.dot(x2, W)"),
                          node("tanh", ["h"], "out", code="out = T.tanh(h)")])

# grad_sqrt: the gradient of sum(sqrt(x) * x) is 1.5 sqrt(x), but the
# chain rule writes it sqrt(x) + x * 1 / (2 sqrt(x)): 0 * inf = NaN at
# x = 0, made by a node of the grad's expansion (gx.8), which names no
# node of the file; tgdebug says whose derivative it is.
line[0] = 150
write("grad_sqrt",
      [{"id": "x", "type": f64([3])}],
      [node("sqrt", ["x"], "r", code="r = T.sqrt(x)"),
       node("mul", ["r", "x"], "m", code="m = r * x"),
       node("sum", ["m"], "c", code="c = m.sum()"),
       node("grad", ["c", "x"], "gx", code="gx = T.grad(c, x)")],
      {"f": {"inputs": ["x"], "outputs": ["c", "gx"]}})

# cmp_grad: the gradient of log_softmax makes an exp (of the log-softmax,
# the softmax) that tgdebug-testrw's broken rewrite turns into expm1; the
# node that differs stands for keys of the grad's expansion, and compare
# says whose derivative they are.
line[0] = 160
write("cmp_grad",
      [{"id": "x", "type": f64([4])}, {"id": "y", "type": f64([4])}],
      [node("log_softmax", ["x"], "ls", code="ls = log_softmax(x)"),
       node("mul", ["ls", "y"], "m", code="m = ls * y"),
       node("sum", ["m"], "c", code="c = m.sum()"),
       node("grad", ["c", "x"], "gx", code="gx = T.grad(c, x)")],
      {"f": {"inputs": ["x", "y"], "outputs": ["gx"]}})

# Constants the optimizer folds a NaN into, which no node makes at run
# time: z = log(c) with c = -1 is a constant once folded (z:const).
# fold_out returns it, fold_upd makes it the new value of a shared
# variable, fold_read has a node read it (a vector: it stays a constant
# input of the dot); const_out returns the file's own NaN constant.
line[0] = 200
write("fold_out",
      [{"id": "x", "type": f64([3])}, {"id": "c", "type": f64([]), "constant": {"data": -1.0}}],
      [node("log", ["c"], "z", code="z = T.log(c)"),
       node("mul", ["x", {"value": 2.0}], "y", code="y = x * 2")],
      {"main": {"inputs": ["x"], "outputs": ["y", "z"]}})
line[0] = 210
write("fold_upd",
      [{"id": "w", "type": f64([]), "shared": {"data": 1.0}}, {"id": "c", "type": f64([]), "constant": {"data": -1.0}}],
      [node("log", ["c"], "z", code="z = T.log(c)"),
       node("add", ["w", {"value": 1.0}], "o", code="o = w + 1")],
      {"main": {"inputs": [], "outputs": ["o"], "updates": {"w": "z"}}})
line[0] = 220
write("fold_read",
      [{"id": "x", "type": f64([3])}, {"id": "c", "type": f64([3]), "constant": {"data": [1.0, -1.0, 2.0]}}],
      [node("log", ["c"], "z", code="z = T.log(c)"),
       node("dot", ["x", "z"], "y", code="y = T.dot(x, z)")],
      {"main": {"inputs": ["x"], "outputs": ["y"]}})
line[0] = 230
write("const_out",
      [{"id": "x", "type": f64([3])}, {"id": "c", "type": f64([]), "constant": {"data": "nan"}}],
      [node("mul", ["x", {"value": 2.0}], "y", code="y = x * 2")],
      {"main": {"inputs": ["x"], "outputs": ["y", "c"]}})

# constbig: q = x / c with c = [1e11, 0]: x = [1, 0] gives [1e-11, NaN].
# The NaN is q's (0/0); c's 1e11 above the threshold explains no NaN.
line[0] = 240
write("constbig",
      [{"id": "x", "type": f64([2])}, {"id": "c", "type": f64([2]), "constant": {"data": [1e11, 0.0]}}],
      [node("true_div", ["x", "c"], "q", code="q = x / c"),
       node("add", ["q", {"value": 1.0}], "o", code="o = q + 1")])

# f32: float32. fuse_inf: exp(x) * 0 + 1, fused: exp(100) is an infinity
# in float32, which the mul by 0 turns into the output's NaN. dbl: y = 2x,
# for --big thresholds that float32 cannot hold (16777219).
f32 = lambda shape: {"dtype": "float32", "shape": shape}
line[0] = 250
write("fuse_inf",
      [{"id": "x", "type": f32([3])}],
      [node("exp", ["x"], "e", code="e = T.exp(x)"),
       node("mul", ["e", {"value": 0.0}], "z", code="z = e * 0"),
       node("add", ["z", {"value": 1.0}], "o", code="o = z + 1")])
line[0] = 260
write("dbl32",
      [{"id": "x", "type": f32([2])}],
      [node("mul", ["x", {"value": 2.0}], "y", code="y = x * 2")])

# tgf_log: h = W.x - 1, y = log(h) * 2 fused after the dot; compiled to a
# .tgf by the test, which keeps no graph file to take the log's trace
# from.
line[0] = 270
write("tgf_log",
      [{"id": "x", "type": f64([3])}, {"id": "W", "type": f64([3, 3])}],
      [node("dot", ["W", "x"], "h", code="h = T.dot(W, x)"),
       node("sub", ["h", {"value": 1.0}], "h1", code="h1 = h - 1"),
       node("log", ["h1"], "lg", code="lg = T.log(h1)"),
       node("mul", ["lg", {"value": 2.0}], "y", code="y = lg * 2")])

# scan_log: a loop h_t = h_{t-1} - 1 that also returns log(h_t): from
# h0 = 2.5 the third step takes the log of -0.5. nanguard names the scan
# and the step; --break on the body's log node says it is in the body.
line[0] = 280
scan_body = {"variables": [{"id": "h", "type": f64([])}],
             "nodes": [node("sub", ["h", {"value": 1.0}], "h1", code="h1 = h - 1"),
                       node("log", ["h1"], "lh", code="lh = T.log(h1)")],
             "inputs": ["h"], "outputs": ["h1", "lh"]}
sc = node("scan", ["n", "h0"], "H", code="H, LH = theano.scan(step, n_steps=n, outputs_info=[h0, None])",
          attrs={"body": scan_body, "n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]],
                 "n_nonrecurrent": 1, "n_non_sequences": 0, "has_n_steps": True, "has_until": False})
sc["outputs"] = ["H", "LH"]
write("scan_log",
      [{"id": "h0", "type": f64([])}, {"id": "n", "type": {"dtype": "int64", "shape": []}}],
      [sc, node("sum", ["LH"], "s", code="s = LH.sum()")],
      {"main": {"inputs": ["h0", "n"], "outputs": ["s"]}})

# scan_scan: a loop over epochs, w_k = w_{k-1} - 1 from w0, whose body
# runs an RNN over the sequence xs, h_t = h_{t-1} + xs[t] from h0 = w_k,
# and returns l_t = log(h_t). From w0 = 2.25 over xs = [1, -1.5, 5]:
# epoch 1 (w = 1.25) gives h = 2.25, 0.75, 5.25, clean; epoch 2 (w =
# 0.25) gives h = 1.25, -0.25, ...: the first NaN is made by the inner
# log at step 2 of the epoch loop, step 2 of the RNN. nanguard names the
# whole way down: E (step 2) -> R (step 2) -> l.
line[0] = 400
rnn_body = {"variables": [{"id": "xt", "type": f64([])}, {"id": "h", "type": f64([])}],
            "nodes": [node("add", ["h", "xt"], "h1", code="h1 = h + x_t"),
                      node("log", ["h1"], "l", code="l = T.log(h1)")],
            "inputs": ["xt", "h"], "outputs": ["h1", "l"]}


def rnn(seq, h0, code):
    r = node("scan", [seq, h0], "R", code=code,
             attrs={"body": rnn_body, "n_sequences": 1, "sequence_taps": [[0]], "n_recurrent": 1,
                    "output_taps": [[-1]], "n_nonrecurrent": 1, "n_non_sequences": 0, "has_n_steps": False,
                    "has_until": False})
    r["outputs"] = ["R", "LR"]
    return r


def epochs(name, inner, inner_out, code):
    body = {"variables": [{"id": "w", "type": f64([])}, {"id": "xo", "type": f64([3])}],
            "nodes": [node("sub", ["w", {"value": 1.0}], "w1", code="w1 = w - 1"), inner],
            "inputs": ["w", "xo"], "outputs": ["w1", inner_out]}
    e = node("scan", ["n", "w0", "xs"], "E", code=code,
             attrs={"body": body, "n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]],
                    "n_nonrecurrent": 1, "n_non_sequences": 1, "has_n_steps": True, "has_until": False})
    e["outputs"] = ["E", "LE"]
    write(name,
          [{"id": "xs", "type": f64([3])}, {"id": "w0", "type": f64([])},
           {"id": "n", "type": {"dtype": "int64", "shape": []}}],
          [e, node("sum", ["LE"], "s", code="s = LE.sum()")],
          {"main": {"inputs": ["xs", "w0", "n"], "outputs": ["s"]}})


epochs("scan_scan", rnn("xo", "w1", "R, LR = theano.scan(rnn_step, sequences=x, outputs_info=[w1, None])"), "LR",
       "E, LE = theano.scan(epoch, n_steps=n, outputs_info=[w0, None], non_sequences=xs)")

# ofg_scan: the same epoch loop, whose body calls an op_from_graph
# dist(a, b) = 3 * sqrt(a + b) on xs and w_k: from w0 = 1.25 over xs =
# [2, 0.5, 3], epoch 1 (w = 0.25) is clean and epoch 2 (w = -0.75) takes
# sqrt(-0.25): E (step 2) -> z -> s.
line[0] = 420
dist = {"variables": [{"id": "a", "type": f64([3])}, {"id": "b", "type": f64([])}],
        "nodes": [node("add", ["a", "b"], "d", code="d = a + b"),
                  node("sqrt", ["d"], "sq", code="sq = T.sqrt(d)"),
                  node("mul", ["sq", {"value": 3.0}], "r", code="r = 3 * sq")],
        "inputs": ["a", "b"], "outputs": ["r"]}
epochs("ofg_scan", node("op_from_graph", ["xo", "w1"], "z", attrs={"name": "dist", "body": dist},
                        code="z = dist(xo, w1)"), "z",
       "E, LE = theano.scan(epoch, n_steps=n, outputs_info=[w0, None], non_sequences=xs)")

# cmp_cancel: q = x * y / y, which mul_div_cancel makes x; r = q + 1 and
# o = exp(r) are the file's own nodes, whose input the rewrite replaced.
# At y = 0 the graph as written gives NaN (0/0, inf*0/0), the rewritten
# one exp(x + 1): x = [1, 2, inf], y = [1, 0, 0] gives [e^2, NaN, NaN]
# as written (NumPy) and [e^2, e^3, inf] optimized: compare must name
# mul_div_cancel, a rewrite upstream of the node that differs.
line[0] = 440
write("cmp_cancel",
      [{"id": "x", "type": f64([3])}, {"id": "y", "type": f64([3])}],
      [node("mul", ["x", "y"], "p", code="p = x * y"),
       node("true_div", ["p", "y"], "q", code="q = p / y"),
       node("add", ["q", {"value": 1.0}], "r", code="r = q + 1"),
       node("exp", ["r"], "o", code="o = T.exp(r)")])

# scan_last: h_t = exp(h_{t-1}) with only the last step returned
# (H[-1]): fast_run rebuilds the loop to keep the last row only
# (H:scan), which nanguard names by the file's H. From h0 = 1: e,
# 15.15, 3.8e6, then exp(3.8e6) = inf at step 4.
line[0] = 450
last_body = {"variables": [{"id": "h", "type": f64([])}],
             "nodes": [node("exp", ["h"], "h1", code="h1 = T.exp(h)")],
             "inputs": ["h"], "outputs": ["h1"]}
sl = node("scan", ["n", "h0"], "H", code="H = theano.scan(T.exp, n_steps=n, outputs_info=[h0])",
          attrs={"body": last_body, "n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]],
                 "n_nonrecurrent": 0, "n_non_sequences": 0, "has_n_steps": True, "has_until": False})
write("scan_last",
      [{"id": "n", "type": {"dtype": "int64", "shape": []}}, {"id": "h0", "type": f64([])}],
      [sl, node("subtensor", ["H"], "hl", attrs={"index": [-1]}, code="hl = H[-1]")],
      {"main": {"inputs": ["n", "h0"], "outputs": ["hl"]}})
