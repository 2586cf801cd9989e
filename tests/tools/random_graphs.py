"""Random graphs run through tgc against references computed without tg.

    random_graphs.py FAMILY FIRST COUNT      (TGC in the environment)

Each seed builds one graph file, its inputs (.npy) and the values it must
give, computed here by NumPy or by central finite differences of a NumPy
replay of the graph; tgc runs it and the outputs are compared. Families:

  mixed   elementwise ops, switch, cast and reductions over every dtype,
          broadcasting: NumPy's values (FORMAT.md's dtypes: float-only ops
          of small integers in float32) with `-O none` and `-O fast_run`,
          and the .tgf of the graph run again bit-identical to fast_run
  grad    float64 graphs of elementwise ops, reductions, softmax, dot,
          views, subtensor updates, join and take with `grad` of a
          weighted sum: the gradient against finite differences
  scan    scans with random taps, direction, n_steps, until and readers
          (whole, last, last two, first, sum over steps): the outputs
          against a NumPy loop, the gradients against finite differences
  alias   views, in-place candidates and shared updates, outputs that are
          inputs or repeat: two calls; then a checkpoint resumed from its
          .tgf (--save-state) bit-identical to never stopping

The generators stay away from the cases where tg follows a convention
that finite differences or NumPy do not share (docs/format-choices.md,
docs/optimizer.md): ties of max/min reductions, x - x on inf/NaN (fast_run
gives 0), arctan2(0, 0), a std over equal values, comparisons and argmax
of values an ulp could reorder. Prints one line per failing seed and
exits 1 when any fails; TG_RANDOM_KEEP=DIR keeps each failing seed's
graph, inputs and outputs in DIR/FAMILY-SEED."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

warnings.filterwarnings("ignore")
TGC = os.environ["TGC"]
DT = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
      "float16", "float32", "float64"]
SMALL = {"bool", "int8", "uint8", "int16", "uint16"}


def tgc(*args):
    r = subprocess.run([TGC] + list(args), capture_output=True, text=True, timeout=300)
    return r.returncode, r.stderr.strip()


def save_inputs(d, vals):
    args = []
    for k, v in vals.items():
        f = os.path.join(d, k + ".npy")
        np.save(f, v)
        args += ["-i", "%s=%s" % (k, f)]
    return args


def run_presets(d, g, vals, *options):
    """Write graph g and its inputs to d and run it with -O none and -O
    fast_run (options: more `tgc run` options). Returns the graph's path,
    the input arguments, the runs' errors and {preset: output folder} of
    the runs that succeeded."""
    p = os.path.join(d, "g.json")
    with open(p, "w") as f:
        json.dump(g, f)
    args = save_inputs(d, vals)
    bad, done = [], {}
    for how in ("none", "fast_run"):
        od = os.path.join(d, how)
        rc, err = tgc("run", p, "-O", how, "-o", od, *options, *args)
        if rc:
            bad.append("-O %s: %s" % (how, err))
        else:
            done[how] = od
    return p, args, bad, done


def bshape(*ss):
    try:
        return list(np.broadcast_shapes(*[tuple(s) for s in ss]))
    except ValueError:
        return None


def close(got, want, rtol):
    """None when got matches want (dtype, shape, NaN and infinities
    exactly, finite floats to rtol, the rest exactly), else why not."""
    if got.dtype != want.dtype:
        return "dtype %s, want %s" % (got.dtype, want.dtype)
    if got.shape != want.shape:
        return "shape %s, want %s" % (got.shape, want.shape)
    if want.dtype.kind != "f":
        return None if np.array_equal(got, want) else "values differ"
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return "NaN in other places"
    fin = np.isfinite(w)
    if not np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)]):
        return "infinities differ"
    err = np.abs(g[fin] - w[fin])
    bad = (err > rtol * np.abs(w[fin])) & (err > 1e-6)
    return "values differ by up to %g" % err.max() if bad.any() else None


# ---- mixed dtypes, against NumPy ----

def float_of(dt):
    dt = np.dtype(dt)
    return dt if dt.kind == "f" else np.dtype("float32" if dt.name in SMALL else "float64")


FLOAT_FNS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin,
             "log1p": np.log1p, "expm1": np.expm1, "arctan": np.arctan, "log2": np.log2,
             "exp2": np.exp2}
OTHER_UNARY = ["neg", "abs", "sign", "sqr", "floor", "ceil", "round", "trunc", "isnan", "isinf",
               "logical_not", "relu", "identity"]
BINARY = ["add", "sub", "mul", "true_div", "int_div", "mod", "pow", "maximum", "minimum", "eq",
          "neq", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
CMP = {"eq": np.equal, "neq": np.not_equal, "lt": np.less, "le": np.less_equal,
       "gt": np.greater, "ge": np.greater_equal}


class Skip(Exception):
    pass


def mixed_unary(op, x):
    k = x.dtype.kind
    if op in FLOAT_FNS:
        f = float_of(x.dtype)
        return np.asarray(FLOAT_FNS[op](x.astype(f))).astype(f)
    if op in ("neg", "abs", "sign", "sqr", "relu") and k == "b":
        raise Skip  # type errors in NumPy and tg
    if op == "neg":
        return np.negative(x)
    if op == "abs":
        return np.abs(x)
    if op == "sign":
        return np.sign(x)
    if op == "sqr":
        return np.square(x)
    if op in ("floor", "ceil", "round", "trunc"):
        return x.copy() if k != "f" else getattr(np, op)(x)
    if op in ("isnan", "isinf"):
        return getattr(np, op)(x) if k == "f" else np.zeros(x.shape, bool)
    if op == "logical_not":
        return np.logical_not(x)
    if op == "relu":
        return np.maximum(x, np.zeros((), x.dtype))
    return x.copy()


def mixed_binary(op, x, y):
    r = np.result_type(x.dtype, y.dtype)
    if op in CMP:
        return CMP[op](x.astype(r), y.astype(r))
    if op.startswith("logical_"):
        return getattr(np, op)(x, y)
    if op == "true_div":
        f = float_of(r)
        return x.astype(f) / y.astype(f)
    if r.kind == "b":
        if op == "add":
            return np.logical_or(x, y)
        if op == "mul":
            return np.logical_and(x, y)
        if op in ("maximum", "minimum"):
            return getattr(np, op)(x, y)
        if op not in ("int_div", "mod", "pow"):
            raise Skip
        r = np.dtype("int8")
    a, b = x.astype(r), y.astype(r)
    if op in ("int_div", "mod") and r.kind in "iu" and (b == 0).any():
        raise Skip  # a run-time error in tg, tested elsewhere
    if op == "pow" and r.kind in "iu" and (b < 0).any():
        raise Skip  # NumPy refuses it
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
            "minimum": np.minimum, "int_div": np.floor_divide, "mod": np.remainder,
            "pow": np.power}[op](a, b)


def mixed_sample(dt, shape, r):
    rng = np.random.default_rng(r.randrange(1 << 30))
    dt = np.dtype(dt)
    big = r.random() < 0.2
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "u":
        return rng.integers(0, 250 if big else 6, size=shape).astype(dt)
    if dt.kind == "i":
        return rng.integers(-120 if big else -5, 120 if big else 6, size=shape).astype(dt)
    a = rng.random(shape) * 8 - 4
    if r.random() < 0.2:
        a.flat[rng.integers(0, a.size)] = r.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, 2.5, 1e30])
    return a.astype(dt)


def mixed_graph(seed):
    r = random.Random(seed)
    variables, vals, env, pool, nodes = [], {}, {}, [], []
    exact = set()  # values no rounding can reorder: inputs, integers, bools
    nin = r.randint(2, 4)
    for i in range(nin):
        dt, sh = r.choice(DT), ([3, 4] if i == 0 else r.choice([[3, 4], [4], [1, 4], [3, 1], []]))
        vid = "i%d" % i
        variables.append({"id": vid, "type": {"dtype": dt, "shape": sh}})
        vals[vid] = env[vid] = np.asarray(mixed_sample(dt, sh, r)).astype(dt).reshape(sh)
        pool.append(vid)
        exact.add(vid)
    k = 0
    for _ in range(r.randint(3, 12)):
        x = r.choice(pool)
        c = r.random()
        out = "v%d" % (k + 1)
        try:
            if c < 0.3:
                op = r.choice(OTHER_UNARY + list(FLOAT_FNS))
                res, node = mixed_unary(op, env[x]), {"op": op, "inputs": [x]}
            elif c < 0.7:
                op = r.choice(BINARY)
                pick = [p for p in pool if bshape(env[x].shape, env[p].shape) is not None]
                if op in CMP:
                    pick = [p for p in pick if p in exact or env[p].dtype.kind != "f"]
                    if x not in exact and env[x].dtype.kind == "f":
                        raise Skip
                y = r.choice(pick) if pick else None
                if y is None or (op == "sub" and y == x):
                    raise Skip
                if r.random() < 0.5:
                    x, y = y, x
                res, node = mixed_binary(op, env[x], env[y]), {"op": op, "inputs": [x, y]}
            elif c < 0.78:
                op = r.choice(["add", "mul"])
                pick = [p for p in pool if bshape(env[x].shape, env[p].shape) is not None]
                ins = [x] + [r.choice(pick) for _ in range(r.randint(1, 2))]
                if bshape(*[env[q].shape for q in ins]) is None:
                    raise Skip
                rt = np.result_type(*[env[q].dtype for q in ins])
                res = env[ins[0]].astype(rt)
                for q in ins[1:]:
                    b = env[q].astype(rt)
                    if rt.kind == "b":
                        res = np.logical_or(res, b) if op == "add" else np.logical_and(res, b)
                    else:
                        res = res + b if op == "add" else res * b
                node = {"op": op, "inputs": ins}
            elif c < 0.86:
                pick = [p for p in pool if bshape(env[x].shape, env[p].shape) is not None]
                a, b = r.choice(pick), r.choice(pick)
                if bshape(env[x].shape, env[a].shape, env[b].shape) is None:
                    raise Skip
                rt = np.result_type(env[a].dtype, env[b].dtype)
                res = np.where(env[x].astype(bool), env[a].astype(rt), env[b].astype(rt))
                node = {"op": "switch", "inputs": [x, a, b]}
            elif c < 0.9:
                to = r.choice(DT)
                if env[x].dtype.kind == "f" and np.dtype(to).kind in "iu":
                    raise Skip  # NaN and out-of-range casts are undefined
                res, node = env[x].astype(to), {"op": "cast", "inputs": [x], "attrs": {"dtype": to}}
            else:
                xv = env[x]
                if xv.ndim == 0:
                    raise Skip
                op = r.choice(["sum", "prod", "max", "min", "mean", "all", "any", "argmax", "argmin"])
                if op in ("argmax", "argmin") and x not in exact and xv.dtype.kind == "f":
                    raise Skip
                ax, kd = r.randrange(xv.ndim), r.random() < 0.5
                kind = xv.dtype.kind
                if op in ("sum", "prod"):
                    rt = np.dtype("int64") if kind in "bi" else np.dtype("uint64") if kind == "u" else xv.dtype
                    res = getattr(np, op)(xv.astype(rt), axis=ax, keepdims=kd)
                elif op == "mean":
                    f = float_of(xv.dtype)
                    res = np.mean(xv.astype(f), axis=ax, keepdims=kd).astype(f)
                elif op in ("argmax", "argmin"):
                    res = getattr(np, op)(xv, axis=ax)
                else:
                    res = getattr(np, {"max": "max", "min": "min", "all": "all", "any": "any"}[op])(
                        xv, axis=ax, keepdims=kd)
                node = {"op": op, "inputs": [x],
                        "attrs": {"axis": ax} if op in ("argmax", "argmin") else {"axis": ax, "keepdims": kd}}
        except Skip:
            continue
        k += 1
        node["outputs"] = [out]
        nodes.append(node)
        env[out] = np.asarray(res)
        pool.append(out)
        if env[out].dtype.kind != "f":
            exact.add(out)
    outs = pool[nin:][-4:]
    if not outs:
        return None
    g = {"format": "tg-graph", "version": 1, "variables": variables, "nodes": nodes,
         "functions": {"main": {"inputs": ["i%d" % i for i in range(nin)], "outputs": outs}}}
    return g, vals, {o: env[o] for o in outs}


def run_mixed(seed, d):
    made = mixed_graph(seed)
    if not made:
        return []
    g, vals, want = made
    p, args, bad, done = run_presets(d, g, vals)
    rc, err = tgc("compile", p, "-o", d + "/g.tgf")
    if rc:
        return bad + ["compile: " + err]
    rc, err = tgc("run", d + "/g.tgf", "-o", d + "/tgf", *args)
    if rc:
        bad.append("the .tgf: " + err)
    else:
        done["tgf"] = d + "/tgf"
    got = {how: {o: np.load(os.path.join(od, o + ".npy")) for o in want} for how, od in done.items()}
    for o, w in want.items():
        for how in ("none", "fast_run"):
            if how in got:
                e = close(got[how][o], w, 1e-2)
                if e:
                    bad.append("-O %s, %s: %s" % (how, o, e))
        if "tgf" in got and "fast_run" in got and got["tgf"][o].tobytes() != got["fast_run"][o].tobytes():
            bad.append("%s from the .tgf is not bit-identical to fast_run" % o)
    return bad


# ---- float64 graphs, gradients against finite differences ----

def sigmoid(x):
    return 1 / (1 + np.exp(-x))


SMOOTH = {"tanh": np.tanh, "sigmoid": sigmoid, "softplus": lambda x: np.logaddexp(0, x),
          "sin": np.sin, "cos": np.cos, "sqr": np.square, "neg": np.negative, "arctan": np.arctan,
          "exp": np.exp, "expm1": np.expm1, "sinh": np.sinh, "arcsinh": np.arcsinh}


def replay(g, vals):
    """The graph's values by NumPy, node after node (grad nodes skipped)."""
    env = {}
    for v in g["variables"]:
        for key in ("constant", "shared"):
            if key in v:
                c = v[key]
                env[v["id"]] = np.array(c["data"], dtype=c.get("dtype", v["type"]["dtype"])).reshape(
                    c.get("shape", v["type"]["shape"]))
    env.update(vals)

    def val(i):
        return np.asarray(i["value"], dtype=np.float64) if isinstance(i, dict) else env[i]
    for n in g["nodes"]:
        op, a, o = n["op"], n.get("attrs", {}), n["outputs"][0]
        if op in ("grad", "scan"):
            continue
        x = [val(i) for i in n["inputs"]]
        if op in SMOOTH:
            y = SMOOTH[op](x[0])
        elif op in ("log", "sqrt", "abs", "identity"):
            y = {"log": np.log, "sqrt": np.sqrt, "abs": np.abs, "identity": np.copy}[op](x[0])
        elif op in ("add", "mul"):
            y = x[0]
            for q in x[1:]:
                y = y + q if op == "add" else y * q
        elif op in ("sub", "true_div", "maximum", "minimum", "pow", "gt", "dot", "matmul"):
            y = {"sub": np.subtract, "true_div": np.divide, "maximum": np.maximum, "minimum": np.minimum,
                 "pow": np.power, "gt": np.greater, "dot": np.dot, "matmul": np.matmul}[op](x[0], x[1])
        elif op == "switch":
            y = np.where(x[0], x[1], x[2])
        elif op == "clip":
            y = np.clip(x[0], x[1], x[2])
        elif op in ("sum", "prod", "mean", "max", "min", "var", "std"):
            y = getattr(np, op)(x[0], axis=a.get("axis"), keepdims=a.get("keepdims", False))
        elif op == "logsumexp":
            ax = a.get("axis")
            m = np.max(x[0], axis=ax, keepdims=True)
            y = np.log(np.sum(np.exp(x[0] - m), axis=ax, keepdims=True)) + m
            if not a.get("keepdims", False):
                y = y.reshape(()) if ax is None else np.squeeze(y, axis=ax)
        elif op in ("softmax", "log_softmax"):
            ax = a["axis"]
            m = np.max(x[0], axis=ax, keepdims=True)
            e = np.exp(x[0] - m)
            y = e / np.sum(e, axis=ax, keepdims=True)
            y = y if op == "softmax" else np.log(y)
        elif op == "transpose":
            y = x[0].T
        elif op == "dimshuffle":
            order = [q for q in a["order"] if q != "x"]
            y = np.expand_dims(np.transpose(x[0], order), a["order"].index("x"))
        elif op == "reshape":
            y = x[0].reshape(x[1].tolist())
        elif op == "subtensor":
            y = x[0][tuple(slice(e.get("start"), e.get("stop"), e.get("step")) if isinstance(e, dict) else e
                           for e in a["index"])]
        elif op in ("set_subtensor", "inc_subtensor"):
            e = a["index"][0]
            y = x[0].copy()
            if op == "set_subtensor":
                y[e["start"]:e["stop"]] = x[1]
            else:
                y[e["start"]:e["stop"]] += x[1]
        elif op == "join":
            y = np.concatenate(x, a["axis"])
        elif op == "take":
            y = np.take(x[0], x[1], axis=0)
        else:
            raise ValueError(op)
        env[o] = np.asarray(y)
    return env


class Builder:
    def __init__(self, r):
        self.r, self.variables, self.nodes, self.env, self.pool, self.k = r, [], [], {}, [], 0
        self.raw = set()  # inputs: random values, no ties

    def add(self, op, ins, attrs=None):
        self.k += 1
        o = "v%d" % self.k
        n = {"op": op, "inputs": ins, "outputs": [o]}
        if attrs is not None:
            n["attrs"] = attrs
        self.nodes.append(n)
        self.env = replay_one(self, n)
        v = self.env[o]
        if v.dtype == np.float64 and v.size and np.all(np.isfinite(v)) and np.max(np.abs(v)) < 1e6:
            self.pool.append(o)
        return o

    def const(self, v):
        v = np.asarray(v)
        cid = "c%d" % len(self.variables)
        self.variables.append({"id": cid, "type": {"dtype": str(v.dtype), "shape": list(v.shape)},
                               "constant": {"data": v.ravel().tolist()}})
        self.env[cid] = v
        return cid


def replay_one(b, node):
    g = {"variables": [], "nodes": [node]}
    env = dict(b.env)
    env.update(replay(g, {k: v for k, v in b.env.items()}))
    return env


def grad_step(b):
    r = b.r
    x = r.choice(b.pool)
    xv = b.env[x]
    c = r.random()
    fits = [p for p in b.pool if bshape(xv.shape, b.env[p].shape) is not None]
    if c < 0.22:
        op = r.choice(list(SMOOTH))
        if op in ("exp", "sinh", "expm1") and np.max(np.abs(xv)) > 20:
            return
        b.add(op, [x])
    elif c < 0.28:
        if r.random() < 0.5:
            b.add("log", [b.add("add", [b.add("sqr", [x]), {"value": 1.0}])])
        else:
            b.add("sqrt", [b.add("add", [b.add("abs", [x]), {"value": 0.5}])])
    elif c < 0.45:
        y = r.choice(fits)
        op = r.choice(["add", "sub", "mul", "true_div", "maximum", "minimum", "pow"])
        if op == "true_div":
            b.add("true_div", [x, b.add("add", [b.add("sqr", [y]), {"value": 0.5}])])
        elif op == "pow":
            b.add("pow", [b.add("add", [b.add("abs", [x]), {"value": 1.0}]), b.add("tanh", [y])])
        elif op in ("maximum", "minimum") and y != x and not (x in b.raw and y in b.raw):
            return  # computed values may tie
        else:
            b.add(op, [x, y])  # sub(x, x): zeros, for prod's gradient
    elif c < 0.52:
        ins = [x] + [r.choice(fits) for _ in range(r.randint(1, 3))]
        if bshape(*[b.env[q].shape for q in ins]) is not None:
            b.add(r.choice(["add", "mul"]), ins)
    elif c < 0.58:
        a, e = r.choice(fits), r.choice(fits)
        if bshape(xv.shape, b.env[a].shape, b.env[e].shape) is not None and np.min(np.abs(xv)) > 1e-3:
            b.add("switch", [b.add("gt", [x, {"value": 0.0}]), a, e])
    elif c < 0.62:
        if np.min(np.abs(np.abs(xv - 0.1) - 0.8)) > 1e-3:
            b.add("clip", [x, {"value": -0.7}, {"value": 0.9}])
    elif c < 0.74 and xv.ndim:
        op = r.choice(["sum", "prod", "mean", "max", "min", "var", "std", "logsumexp"])
        ax, kd = r.choice([None] + list(range(xv.ndim)) + [-1]), r.random() < 0.5
        if op in ("max", "min") and x not in b.raw:
            return  # ties: Theano's rule, not the finite difference
        if op == "std" and np.min(np.std(xv, axis=ax)) < 1e-3:
            return
        if op == "prod" and r.random() < 0.5:  # zeros: one or more in a group
            mask = (np.random.default_rng(r.randrange(1 << 30)).random(xv.shape) > 0.3).astype(np.float64)
            x = b.add("mul", [x, b.const(mask)])
        b.add(op, [x], {"axis": ax, "keepdims": kd})
    elif c < 0.78 and xv.ndim:
        b.add(r.choice(["softmax", "log_softmax"]), [x], {"axis": r.randrange(xv.ndim)})
    elif c < 0.84 and xv.ndim in (1, 2):
        n = xv.shape[-1]
        mats = [p for p in b.pool if b.env[p].ndim == 2 and b.env[p].shape[0] == n]
        y = r.choice(mats) if mats and r.random() < 0.6 else \
            b.const(np.round(np.random.default_rng(r.randrange(1 << 30)).normal(size=(n, r.choice([2, 3]))), 3))
        b.add("matmul" if xv.ndim == 2 and r.random() < 0.5 else "dot", [x, y])
    elif c < 0.9 and xv.ndim:
        t = r.random()
        if t < 0.3 and xv.ndim == 2:
            b.add("transpose", [x], {"axes": None})
        elif t < 0.6:
            order = list(range(xv.ndim))
            r.shuffle(order)
            pos = r.randrange(len(order) + 1)
            b.add("dimshuffle", [x], {"order": order[:pos] + ["x"] + order[pos:]})
        else:
            b.add("reshape", [x, b.const(np.array([-1] if r.random() < 0.5 else [1, -1], np.int64))])
    elif c < 0.95 and xv.ndim:
        n = xv.shape[0]
        lo = r.randrange(n)
        hi = r.randrange(lo + 1, n + 1)
        t = r.random()
        if t < 0.4:
            b.add("subtensor", [x], {"index": [{"start": lo, "stop": hi}]})
        elif t < 0.5:
            b.add("subtensor", [x], {"index": [r.randrange(-n, n)]})
        else:
            part = xv[lo:hi].shape
            ys = [p for p in b.pool if bshape(b.env[p].shape, part) == list(part)]
            if ys:
                b.add("set_subtensor" if t < 0.75 else "inc_subtensor", [x, r.choice(ys)],
                      {"index": [{"start": lo, "stop": hi}]})
    elif xv.ndim:
        if r.random() < 0.5:
            ys = [p for p in b.pool if b.env[p].ndim == xv.ndim and b.env[p].shape[1:] == xv.shape[1:]]
            b.add("join", [x, r.choice(ys)], {"axis": 0})
        else:
            n = xv.shape[0]
            idx = np.array([r.randrange(-n, n) for _ in range(r.randint(1, 5))], np.int64)
            b.add("take", [x, b.const(idx)], {"axis": 0})


def finite_differences(cost_of, vals, wrt):
    out = {}
    for k in wrt:
        v, g = vals[k], np.zeros_like(vals[k])
        for idx in np.ndindex(v.shape):
            h = 1e-6 * max(1.0, abs(v[idx]))
            hi, lo = dict(vals), dict(vals)
            hi[k], lo[k] = v.copy(), v.copy()
            hi[k][idx] += h
            lo[k][idx] -= h
            g[idx] = (cost_of(hi) - cost_of(lo)) / (2 * h)
        out[k] = g
    return out


def run_grad(seed, d):
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    b = Builder(r)
    ins = [("a", [3, 4]), ("b", r.choice([[4], [1, 4], [3, 1], [], [3, 4], [4, 3]]))]
    if r.random() < 0.5:
        ins.append(("c", r.choice([[4, 2], [3], [2, 4]])))
    vals = {}
    for iid, sh in ins:
        vals[iid] = np.asarray(np.round(rng.normal(size=sh) * 1.2, 4))
        b.variables.append({"id": iid, "type": {"dtype": "float64", "shape": sh}})
        b.env[iid] = vals[iid]
        b.pool.append(iid)
        b.raw.add(iid)
    for _ in range(r.randint(3, 14)):
        try:
            grad_step(b)
        except (ValueError, IndexError):
            pass
    outs = [p for p in b.pool if p.startswith("v")][-3:]
    if not outs:
        return []
    terms = [b.add("sum", [b.add("mul", [o, b.const(np.round(rng.normal(size=b.env[o].shape), 3))])])
             for o in outs]
    cost = b.add("add", terms) if len(terms) > 1 else terms[0]
    wrt = [i for i, _ in ins]
    b.nodes.append({"op": "grad", "inputs": [cost] + wrt, "outputs": ["G" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": {"inputs": wrt, "outputs": [cost] + ["G" + w for w in wrt]}}}
    want_cost = float(b.env[cost])
    if not np.isfinite(want_cost):
        return []
    # A finite difference loses about eps * |term| / h to cancellation.
    atol = 1e-5 + 1e-8 * sum(abs(float(b.env[t])) for t in terms)
    fd = finite_differences(lambda v: float(replay(g, v)[cost]), vals, wrt)
    _, _, bad, done = run_presets(d, g, vals)
    for how, od in done.items():
        c = float(np.load(os.path.join(od, cost + ".npy")))
        if abs(c - want_cost) > 1e-9 * max(1, abs(want_cost)):
            bad.append("-O %s: cost %r, want %r" % (how, c, want_cost))
        for w in wrt:
            gv = np.load(os.path.join(od, "G" + w + ".npy"))
            if gv.shape != fd[w].shape or not np.allclose(gv, fd[w], rtol=1e-4, atol=atol):
                bad.append("-O %s: gradient of %s differs from finite differences by up to %g" %
                           (how, w, np.max(np.abs(gv - fd[w])) if gv.shape == fd[w].shape else np.inf))
    return bad


# ---- scan: a NumPy loop and finite differences ----

D = 3
BODY_OPS = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "maximum": np.maximum,
            "tanh": np.tanh, "sigmoid": sigmoid, "sin": np.sin, "dot": np.dot, "sum": np.sum}


def scan_case(seed):
    r, rng = random.Random(seed), np.random.default_rng(seed)
    nseq, nrec, nnr, nns = r.randint(0, 2), r.randint(1, 2) if r.random() < 0.9 else 0, r.randint(0, 2), r.randint(0, 2)
    nnr = nnr or (0 if nrec else 1)
    S = {"seq_taps": [r.sample([-2, -1, 0, 1, 2], r.randint(1, 2)) for _ in range(nseq)],
         "out_taps": [r.choice([[-1], [-1], [-2], [-2, -1], [-1, -3], [-3]]) for _ in range(nrec)],
         "nrec": nrec, "nnr": nnr, "until": r.random() < 0.15, "back": r.random() < 0.3}
    steps = r.randint(3, 7)
    vals = {}
    S["seqs"] = []
    for i, taps in enumerate(S["seq_taps"]):
        span = max(max(taps), 0) - min(min(taps), 0)
        vals["s%d" % i] = np.round(rng.normal(size=(steps + span + r.randint(0, 2), D)), 3)
        S["seqs"].append("s%d" % i)
    S["inits"] = []
    for i, taps in enumerate(S["out_taps"]):
        vals["h%d" % i] = np.round(rng.normal(size=(D,) if taps == [-1] else (max(-t for t in taps), D)), 3)
        S["inits"].append("h%d" % i)
    S["nss"] = []
    for i in range(nns):
        vals["w%d" % i] = np.round(rng.normal(size=r.choice([(D,), (D, D)])) * 0.6, 3)
        S["nss"].append("w%d" % i)
    S["has_n"] = r.random() < 0.3 or nseq == 0
    if S["has_n"]:
        usable = [len(vals[s]) - (max(max(t), 0) - min(min(t), 0)) for s, t in zip(S["seqs"], S["seq_taps"])]
        S["n"] = max(1, min(usable + [steps]) - r.randint(0, 1))
    # the body
    binp, bvars, shapes = [], [], {}

    def body_input(name, shape):
        bvars.append({"id": name, "type": {"dtype": "float64", "shape": list(shape)}})
        binp.append(name)
        shapes[name] = shape
    for i, taps in enumerate(S["seq_taps"]):
        for t in taps:
            body_input("b_s%d_%d" % (i, t + 10), (D,))
    for i, taps in enumerate(S["out_taps"]):
        for t in taps:
            body_input("b_h%d_%d" % (i, t + 10), (D,))
    for i, w in enumerate(S["nss"]):
        body_input("b_w%d" % i, vals[w].shape)
    bnodes = []

    def node(op, ins, shape):
        o = "t%d" % (len(bnodes) + 1)
        bnodes.append({"op": op, "inputs": ins, "outputs": [o]})
        shapes[o] = shape
        return o
    vecs = [v for v in binp if shapes[v] == (D,)]
    mats = [v for v in binp if shapes[v] == (D, D)]
    pool = vecs or [node("sum", [mats[0]], ())] if (vecs or mats) else None
    if pool is None:
        return None
    for _ in range(r.randint(1, 6)):
        x, c = r.choice(pool), r.random()
        if shapes[x] != (D,):
            continue
        if c < 0.25 and mats:
            pool.append(node("dot", [x, r.choice(mats)], (D,)))
        elif c < 0.5:
            y = r.choice(pool)
            if (shapes[y] == (D,) or shapes[y] == ()) and not (y == x):
                pool.append(node(r.choice(["add", "mul", "sub", "maximum"]), [x, y], (D,)))
        elif c < 0.7:
            pool.append(node(r.choice(["tanh", "sigmoid", "sin"]), [x], (D,)))
        else:
            pool.append(node("mul", [x, {"value": 0.5}], (D,)))
    bouts = []
    for _ in range(nrec):
        src = r.choice(pool)
        if shapes[src] != (D,):
            src = node("add", [src, {"value": {"dtype": "float64", "shape": [D], "data": [0.0] * D}}], (D,))
        bouts.append(node("tanh", [src], (D,)))
    for _ in range(nnr):
        src = r.choice(pool)
        bouts.append(node("sum", [src], ()) if r.random() < 0.3 else node("sin", [src], shapes[src]))
    if S["until"]:
        bouts.append(node("gt", [node("sum", [r.choice(pool)], ()), {"value": r.choice([0.5, 1.0, -0.5, 2.0])}], ()))
    S["binp"], S["bnodes"], S["bouts"] = binp, bnodes, bouts
    S["body"] = {"variables": bvars, "nodes": bnodes, "inputs": binp, "outputs": bouts}
    return S, vals, r


def scan_loop(S, vals):
    seqs = [vals[s][::-1] if S["back"] else vals[s] for s in S["seqs"]]
    usable = [len(s) - (max(max(t), 0) - min(min(t), 0)) for s, t in zip(seqs, S["seq_taps"])]
    n = S["n"] if S["has_n"] else min(usable)
    past = [[vals[h]] if t == [-1] else list(vals[h]) for h, t in zip(S["inits"], S["out_taps"])]
    outs = [[] for _ in range(S["nrec"] + S["nnr"])]

    def value(q, env):
        if isinstance(q, dict):
            v = q["value"]
            return np.asarray(v["data"] if isinstance(v, dict) else v, dtype=np.float64)
        return env[q]
    for t in range(n):
        env, i = {}, 0
        for s, taps in zip(seqs, S["seq_taps"]):
            for tap in taps:
                env[S["binp"][i]] = s[t + tap - min(min(taps), 0)]
                i += 1
        for k, taps in enumerate(S["out_taps"]):
            for tap in taps:
                env[S["binp"][i]] = past[k][len(past[k]) + tap]
                i += 1
        for w in S["nss"]:
            env[S["binp"][i]] = vals[w]
            i += 1
        for nd in S["bnodes"]:
            args = [value(q, env) for q in nd["inputs"]]
            env[nd["outputs"][0]] = np.greater(*args) if nd["op"] == "gt" else BODY_OPS[nd["op"]](*args)
        for k in range(S["nrec"] + S["nnr"]):
            v = np.asarray(env[S["bouts"][k]], dtype=np.float64)
            outs[k].append(v)
            if k < S["nrec"]:
                past[k].append(v)
        if S["until"] and bool(env[S["bouts"][-1]]):
            break
    return [np.array(o) for o in outs]


def run_scan(seed, d):
    made = scan_case(seed)
    if not made:
        return []
    S, vals, r = made
    variables = [{"id": k, "type": {"dtype": "float64", "shape": list(v.shape)}} for k, v in vals.items()]
    ins = []
    if S["has_n"]:
        variables.append({"id": "nst", "type": {"dtype": "int64", "shape": []}, "constant": {"data": S["n"]}})
        ins.append("nst")
    ins += S["seqs"] + S["inits"] + S["nss"]
    souts = ["o%d" % i for i in range(S["nrec"] + S["nnr"])]
    attrs = {"body": S["body"], "n_sequences": len(S["seqs"]), "sequence_taps": S["seq_taps"],
             "n_recurrent": S["nrec"], "output_taps": S["out_taps"], "n_nonrecurrent": S["nnr"],
             "n_non_sequences": len(S["nss"]), "has_n_steps": S["has_n"], "has_until": S["until"],
             "go_backwards": S["back"], "truncate_gradient": -1}
    nodes = [{"op": "scan", "inputs": ins, "outputs": souts, "attrs": attrs}]
    readers = []
    for i, o in enumerate(souts):
        kind = r.choice(["full", "last", "lastk", "sum", "first", "none", "none"])
        if kind == "none" and (readers or i < len(souts) - 1):
            continue
        kind = "sum" if kind == "none" else kind
        rid = "r%d" % i
        nodes.append({"full": {"op": "identity", "inputs": [o]},
                      "last": {"op": "subtensor", "inputs": [o], "attrs": {"index": [-1]}},
                      "first": {"op": "subtensor", "inputs": [o], "attrs": {"index": [0]}},
                      "lastk": {"op": "subtensor", "inputs": [o], "attrs": {"index": [{"start": -2, "stop": None}]}},
                      "sum": {"op": "sum", "inputs": [o], "attrs": {"axis": 0}}}[kind] | {"outputs": [rid]})
        readers.append((rid, i, kind))
    for j, (rid, _, _) in enumerate(readers):
        nodes.append({"op": "sum", "inputs": [rid], "outputs": ["cs%d" % j]})
    nodes.append({"op": "add", "inputs": ["cs%d" % j for j in range(len(readers))] + [{"value": 0.0}],
                  "outputs": ["cost"]})
    wrt = S["seqs"] + S["inits"] + S["nss"]
    grads = not S["until"] and r.random() < 0.8
    if grads:
        nodes.append({"op": "grad", "inputs": ["cost"] + wrt, "outputs": ["G" + w for w in wrt],
                      "attrs": {"disconnected": "ignore"}})
    g = {"format": "tg-graph", "version": 1, "variables": variables, "nodes": nodes,
         "functions": {"main": {"inputs": list(vals),
                                "outputs": [q for q, _, _ in readers] + ["cost"] + (["G" + w for w in wrt] if grads else [])}}}

    def forward(v):
        outs = scan_loop(S, v)
        res = {}
        for rid, i, kind in readers:
            o = outs[i]
            res[rid] = {"full": o, "sum": np.sum(o, axis=0)}.get(kind) if kind in ("full", "sum") else \
                (o[-1] if kind == "last" else o[0] if kind == "first" else o[-2:])
        res["cost"] = sum(float(np.sum(res[q])) for q, _, _ in readers)
        return res
    try:
        want = forward(vals)
    except IndexError:
        return []  # a reader of a step the loop did not make (until stopped it)
    fd = finite_differences(lambda v: forward(v)["cost"], vals, wrt) if grads else {}
    _, _, bad, done = run_presets(d, g, vals)
    for how, od in done.items():
        for q in [rid for rid, _, _ in readers] + ["cost"]:
            gv, w = np.load(os.path.join(od, q + ".npy")), np.asarray(want[q])
            if gv.shape != w.shape or not np.allclose(gv, w, rtol=1e-9, atol=1e-9):
                bad.append("-O %s: %s differs from the NumPy loop" % (how, q))
        for w in fd:
            gv = np.load(os.path.join(od, "G" + w + ".npy"))
            if gv.shape != fd[w].shape or not np.allclose(gv, fd[w], rtol=1e-5, atol=1e-6):
                bad.append("-O %s: gradient of %s differs from finite differences" % (how, w))
    return bad


# ---- views, in-place and updates; checkpoint and resume ----

def run_alias(seed, d):
    r, rng = random.Random(seed), np.random.default_rng(seed)
    b = Builder(r)
    ins = []
    for i in range(r.randint(1, 3)):
        sh = r.choice([[3, 4], [4, 3], [4]])
        iid = "x%d" % i
        b.variables.append({"id": iid, "type": {"dtype": "float64", "shape": sh}})
        b.env[iid] = np.round(rng.normal(size=sh), 3)
        b.pool.append(iid)
        ins.append(iid)
    shared = r.random() < 0.5
    if shared:
        v = np.round(rng.normal(size=[3, 4]), 3)
        b.variables.append({"id": "sh", "type": {"dtype": "float64", "shape": [3, 4]},
                            "shared": {"data": v.ravel().tolist()}})
        b.env["sh"] = v
        b.pool.append("sh")
    for _ in range(r.randint(3, 14)):
        x = r.choice(b.pool)
        xv, c = b.env[x], r.random()
        if c < 0.25 and xv.ndim == 2:
            t = r.random()
            if t < 0.3:
                b.add("transpose", [x], {"axes": None})
            elif t < 0.5:
                b.add("dimshuffle", [x], {"order": ["x", 1, 0]})
            elif t < 0.7:
                lo = r.randrange(xv.shape[0])
                b.add("subtensor", [x], {"index": [{"start": lo, "stop": r.randrange(lo + 1, xv.shape[0] + 1)}]})
            elif t < 0.85:
                b.add("subtensor", [x], {"index": [{"start": None, "stop": None},
                                                   {"start": None, "stop": None, "step": 2}]})
            else:
                b.add("reshape", [x, b.const(np.array([-1], np.int64))])
        elif c < 0.25:
            b.add("subtensor", [x], {"index": [{"start": None, "stop": None, "step": -1}]}) if xv.ndim == 1 \
                else b.add("neg", [x])
        elif c < 0.5:
            y = r.choice([p for p in b.pool if bshape(xv.shape, b.env[p].shape) is not None])
            b.add(r.choice(["add", "mul", "sub", "maximum"]), [x, y])
        elif c < 0.62:
            op = r.choice(["exp", "tanh", "neg", "sqr", "abs"])
            if op != "exp" or np.max(xv) < 30:
                b.add(op, [x])
        elif c < 0.8 and xv.ndim:
            lo = r.randrange(xv.shape[0])
            hi = r.randrange(lo + 1, xv.shape[0] + 1)
            ys = [p for p in b.pool if bshape(b.env[p].shape, xv[lo:hi].shape) == list(xv[lo:hi].shape)]
            if ys:
                b.add(r.choice(["set_subtensor", "inc_subtensor"]), [x, r.choice(ys)],
                      {"index": [{"start": lo, "stop": hi}]})
        elif c < 0.88 and xv.ndim == 2:
            ms = [p for p in b.pool if b.env[p].ndim == 2 and b.env[p].shape[0] == xv.shape[1]]
            if ms:
                b.add("dot", [x, r.choice(ms)])
        elif c < 0.95 and xv.ndim:
            n = xv.shape[0]
            b.add("take", [x, b.const(np.array([r.randrange(-n, n) for _ in range(r.randint(1, 4))], np.int64))],
                  {"axis": 0})
        else:
            b.add("identity", [x])
    outs = [r.choice(b.pool) for _ in range(r.randint(2, 5))]
    fn = {"inputs": ins, "outputs": outs}
    same = [p for p in b.pool if b.env[p].shape == (3, 4) and p != "sh"]
    if shared and same:
        fn["updates"] = {"sh": r.choice(same)}
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": fn}}
    vals = {i: b.env[i] for i in ins}
    # two calls: the second sees the shared value the first wrote
    calls = 2 if "updates" in fn else 1
    over = {}
    if calls == 2:
        over = {"sh": replay(g, vals)[fn["updates"]["sh"]]}
    want = replay(g, dict(vals, **over))
    p, args, bad, done = run_presets(d, g, vals, "--calls", str(calls))
    for how, od in done.items():
        for o in outs:
            gv = np.load(os.path.join(od, o + ".npy"))
            if gv.shape != want[o].shape or not np.allclose(gv, want[o], rtol=1e-12, atol=1e-12):
                bad.append("-O %s: %s differs from NumPy after %d calls" % (how, o, calls))
    if "updates" in fn and not bad:
        steps = [("compile", p, "-o", d + "/c0.tgf"),
                 ("run", p, "-o", d + "/straight", "--calls", "4"),
                 ("run", d + "/c0.tgf", "--calls", "1", "--save-state", d + "/c1.tgf"),
                 ("run", d + "/c1.tgf", "--calls", "2", "--save-state", d + "/c2.tgf"),
                 ("run", d + "/c2.tgf", "-o", d + "/resumed", "--calls", "1")]
        for s in steps:
            rc, err = tgc(*(list(s) + (args if s[0] == "run" else [])))
            if rc:
                return bad + ["%s: %s" % (" ".join(s[:2]), err)]
        for o in outs:
            a, c = np.load(d + "/straight/" + o + ".npy"), np.load(d + "/resumed/" + o + ".npy")
            if a.tobytes() != c.tobytes():
                bad.append("%s: 1 + 2 + 1 calls through checkpoints differ from 4 calls" % o)
    return bad


FAMILIES = {"mixed": run_mixed, "grad": run_grad, "scan": run_scan, "alias": run_alias}


def main():
    family, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    failed = 0
    for seed in range(first, first + count):
        d = tempfile.mkdtemp(prefix="tg-random-")
        try:
            bad = FAMILIES[family](seed, d)
            if bad and os.environ.get("TG_RANDOM_KEEP"):
                shutil.copytree(d, os.path.join(os.environ["TG_RANDOM_KEEP"], "%s-%d" % (family, seed)))
        finally:
            shutil.rmtree(d)
        if bad:
            failed += 1
            print("%s seed %d: %s" % (family, seed, "; ".join(bad[:3])), flush=True)
    print("%s: %d graphs, %d failed" % (family, count, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
