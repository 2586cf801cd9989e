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
  hess    the grad and nn families' graphs differentiated twice: the
          gradient of sum(G * v), a Hessian-vector product, against the
          central difference of tg's gradient G along v
  scan    scans with random taps, direction, n_steps, until and readers
          (whole, last, last two, first, sum over steps), the step at
          times wrapped in an op_from_graph, at times with the rop of a
          reader against the central difference along tangents: the outputs
          against a NumPy loop, the gradients against finite differences
  alias   views, in-place candidates and shared updates, outputs that are
          inputs or repeat: two calls; then a checkpoint resumed from its
          .tgf (--save-state) bit-identical to never stopping
  sgd     shared weights of more than 4 KiB updated by SGD-like steps
          (some with weight decay) the optimizer writes over them (gemm,
          ger, gemv; an embedding table's take_add of the rows read, with
          repeated and negative indices), read forward,
          through transposes, by another weight's update, returned as they
          were or as updated: three calls against NumPy, then a checkpoint
          resumed bit-identical to never stopping
  nn      conv2d (border modes, strides, dilation, flip) and pool2d (modes,
          strides, padding, partial windows) against loops written from
          Theano's definitions; cholesky, inverse, det and solve; the
          crossentropies; split, stack, flatten, repeat, take_set/take_add
          along any axis, outer, alloc, ifelse, eye; the special functions
          (erf, gammaln, digamma, polygamma, arccosh, ...): values against NumPy,
          gradients against finite differences, float64 and float32
  conv    conv2d on shapes that reach every CPU path (the direct kernel's
          channel blocks and row tails, im2col over groups of images), the
          path forced at random by TG_CONV: values and both gradients
          against the tap-by-tap reference and its adjoint
  weak    weak inline scalars (FORMAT.md s5) on every dtype and op,
          identities included (bool * 1 is int64): values and dtypes
          against NumPy 2's rules; an integer that does not fit is one
          load error
  index   basic indexing chained (negative indices and steps, bounds past
          the ends, "$k" bounds given at run time) through subtensor,
          set_subtensor and inc_subtensor: values against NumPy, gradients
          against finite differences; an index out of range is one error
  rewrite the patterns of the stabilize, specialize and canonicalize
          rewrites (log(1 + x), exp(x) - 1, log(1 + exp x), log(sigmoid),
          log(1 - sigmoid), log(softmax), log(sum(exp)), a written-out
          softmax over one axis (kept, or put back by dimshuffle or
          expand_dims), two or every axis (also, chained only with each
          other, over inputs whose lengths are unknown until run time: a
          null batch length, 1 at times), log(exp a + exp b), softmax
          with crossentropy, sigmoid with binary crossentropy, x*x and
          pow, gemm/gemv/ger, neg(neg x),
          x*y/y, exp(log x)) and near misses, chained, with inputs past
          exp's overflow, where 1 + x rounds, or moderate, float64 and
          float32: -O none against NumPy as written where that is finite,
          -O fast_run against the exact values wherever every rewrite of
          the chain had to fire (and the ops they make in the optimized
          graph), and the gradient of a weighted sum against central
          differences of the exact values
  more    op_from_graph bodies (static or null lengths, nested, used
          twice), arctan2, arange, zeros_like/ones_like among the grad
          family's ops, with the gradient of a weighted sum, the rop of
          one value along constant tangents and its lop against a
          constant cotangent: values against NumPy, the gradient and lop
          against finite differences, the rop against the central
          difference along the tangents, the .tgf bit-identical to
          fast_run; every fifth seed the random ops (uniform, normal,
          binomial, multinomial) chained through a shared state, at times
          about to wrap: two calls against Philox 4x32-10 written here
          from random.c's description, the .tgf and a checkpoint resumed
          after the first call bit-identical to fast_run
  shapes  the grad family's ops and the shape ops (dimshuffle and squeeze
          dropping an axis, reshape, join, stack, split, alloc, repeat,
          indices given at run time) over inputs whose lengths are null (a
          few static), built on one set of lengths and run on another: where
          NumPy raises, both presets stop with one run-time error (no
          rewrite may drop a check); where it does not, values and the
          gradient of a sum of squares against NumPy and finite
          differences (skipping points two step sizes disagree on)
  tools   a graph of another family (grad, nn, index, scan, alias, mixed,
          more by seed), then tgc print/compile/export (the exported graph
          bit-identical to fast_run), tgprof, tgdebug compare and tgviz on
          it (those named in TGPROF, TGDEBUG, TGVIZ): each must succeed

The generators stay away from the cases where tg follows a convention
that finite differences or NumPy do not share (docs/format-choices.md,
docs/optimizer.md): ties of max/min reductions, x - x on inf/NaN (fast_run
gives 0), y * (x / y) and x * y / y where y may be 0 or inf (fast_run
gives x), arctan2(0, 0), a std over equal values, comparisons and argmax
of values an ulp could reorder. Prints one line per failing seed and
exits 1 when any fails; TG_RANDOM_KEEP=DIR keeps each failing seed's
graph, inputs and outputs in DIR/FAMILY-SEED."""
import json
import math
import os
import random
import re
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
    the runs that succeeded. In the tools family, the other tools then
    run on the same graph (tool_checks)."""
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
    if TOOLS["on"] and done and not options:
        bad += tool_checks(d, p, args)
    return p, args, bad, done


TOOLS = {"on": False, "compare": True}


def tool_checks(d, p, args):
    """tgc print and export, tgprof (its JSON report and trace), tgdebug
    compare (optimized against unoptimized: they must agree on these
    graphs) and tgviz (the page, with the profile, and the pictures) on a
    graph that runs: each must succeed, silently for the sanitizers. A
    tool missing from the environment (TGPROF, TGDEBUG, TGVIZ) is left
    out."""
    env = os.environ
    runs = [[TGC, "print", p, "--types", "--shapes"], [TGC, "print", p, "--optimized", "--ids", "int"],
            [TGC, "compile", p, "-o", d + "/t.tgf"], [TGC, "export", d + "/t.tgf", "-o", d + "/t.json"],
            [TGC, "print", d + "/t.tgf"]]
    if env.get("TGPROF"):
        runs.append([env["TGPROF"], p, *args, "--calls", "2", "--json", d + "/prof.json",
                     "--trace", d + "/trace.json", "--top", "0"])
    if env.get("TGDEBUG") and TOOLS["compare"]:
        runs.append([env["TGDEBUG"], "compare", p, *args])
    if env.get("TGVIZ"):
        runs += [[env["TGVIZ"], p, "-o", d + "/v.html"] + (["--profile", d + "/prof.json"] if env.get("TGPROF") else []),
                 [env["TGVIZ"], p, "--original", "-o", d + "/v.svg"], [env["TGVIZ"], p, "-o", d + "/v.gv"]]
    bad = []
    for cmd in runs:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        what = " ".join([os.path.basename(cmd[0])] + cmd[1:2])
        if r.returncode or "Sanitizer" in r.stderr or "runtime error" in r.stderr:
            bad.append("%s: rc %d: %s" % (what, r.returncode, (r.stderr or r.stdout).strip()[-400:]))
    if not bad and env.get("TGPROF"):
        with open(d + "/prof.json") as f:
            prof = json.load(f)
        with open(d + "/trace.json") as f:
            trace = json.load(f)
        if not prof.get("functions") or not (trace.get("traceEvents") if isinstance(trace, dict) else trace):
            bad.append("tgprof: an empty report or trace")
    if not bad:
        rc, err = tgc("run", d + "/t.json", "-O", "none", "-o", d + "/exported", *args)
        if rc:
            bad.append("the exported graph: " + err)
        else:
            for f in os.listdir(d + "/fast_run"):
                a, b = np.load(os.path.join(d, "fast_run", f)), np.load(os.path.join(d, "exported", f))
                if a.dtype != b.dtype or a.tobytes() != b.tobytes():
                    bad.append("%s from the exported graph is not bit-identical to fast_run" % f)
    return bad


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
    if op in ("neg", "abs", "sign", "relu") and k == "b":
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


def cancels(ins, factors, divs):
    """Whether a product of ins holds a divisor of one of them as a
    factor of another (fast_run cancels the two)."""
    for i, a in enumerate(ins):
        for j, b in enumerate(ins):
            if i != j and factors.get(a, {a}) & divs.get(b, set()):
                return True
    return False


def mixed_graph(seed):
    r = random.Random(seed)
    variables, vals, env, pool, nodes = [], {}, {}, [], []
    exact = set()  # values no rounding can reorder: inputs, integers, bools
    # what each value is a product of (itself included), and the divisors
    # in that product: y * (x / y) and x * y / y are x under fast_run
    # (mul_quotient_cancel, mul_div_cancel), not the NaN of y = 0 or inf
    factors, divs = {}, {}
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
                if op == "sin" and x not in exact and np.any(np.abs(env[x][np.isfinite(env[x])]) > 1e3):
                    # a rounded 1e30 is off by 1e23: its sine is noise
                    # (mixed seed 95022: sin(exp(71)) in float32)
                    raise Skip
                if op in ("floor", "ceil", "round", "trunc") and x not in exact and env[x].dtype.kind == "f":
                    raise Skip  # a rounded value next to an integer: a step of 1
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
                if op in ("int_div", "mod") and (x not in exact or y not in exact) and \
                        np.result_type(env[x].dtype, env[y].dtype).kind == "f":
                    # floor(a / b) steps by 1 where one ulp of a rounded
                    # operand crosses an integer (mixed seed 98084: NumPy's
                    # pow(5.0, -1.0) is 0.19999999999999998, tg's 0.2, and
                    # -1 // b is -6 against -5)
                    raise Skip
                if r.random() < 0.5:
                    x, y = y, x
                if op == "mul" and cancels([x, y], factors, divs) or \
                        op == "true_div" and factors.get(x, {x}) & factors.get(y, {y}):
                    raise Skip
                res, node = mixed_binary(op, env[x], env[y]), {"op": op, "inputs": [x, y]}
            elif c < 0.78:
                op = r.choice(["add", "mul"])
                pick = [p for p in pool if bshape(env[x].shape, env[p].shape) is not None]
                ins = [x] + [r.choice(pick) for _ in range(r.randint(1, 2))]
                if bshape(*[env[q].shape for q in ins]) is None:
                    raise Skip
                if op == "mul" and cancels(ins, factors, divs):
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
        ins = node["inputs"]
        if node["op"] == "mul":
            factors[out] = {out}.union(*[factors.get(q, {q}) for q in ins])
            divs[out] = set().union(*[divs.get(q, set()) for q in ins])
        elif node["op"] == "true_div":
            factors[out] = {out} | factors.get(ins[0], {ins[0]})
            divs[out] = divs.get(ins[0], set()) | factors.get(ins[1], {ins[1]})
        elif node["op"] == "neg":
            factors[out] = {out} | factors.get(ins[0], {ins[0]})
            divs[out] = set(divs.get(ins[0], set()))
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
        if op in ("grad", "scan", "rop", "lop"):
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
            m = np.max(x[0], axis=ax, keepdims=True, initial=-np.inf)  # -inf over no element
            y = np.log(np.sum(np.exp(x[0] - m), axis=ax, keepdims=True)) + m
            if not a.get("keepdims", False):
                y = y.reshape(()) if ax is None else np.squeeze(y, axis=ax)
        elif op in ("softmax", "log_softmax"):
            ax = a["axis"]
            m = np.max(x[0], axis=ax, keepdims=True, initial=-np.inf)  # an empty axis: empty
            e = np.exp(x[0] - m)
            y = e / np.sum(e, axis=ax, keepdims=True)
            y = y if op == "softmax" else np.log(y)
        elif op == "transpose":
            y = x[0].T
        elif op == "dimshuffle":
            keep = [q for q in a["order"] if q != "x"]
            drop = tuple(i for i in range(x[0].ndim) if i not in keep)
            y = np.squeeze(x[0], axis=drop) if drop else x[0]  # ValueError: a length other than 1
            y = np.transpose(y, [sorted(keep).index(q) for q in keep])
            for pos, q in enumerate(a["order"]):
                if q == "x":
                    y = np.expand_dims(y, pos)
        elif op == "reshape":
            y = x[0].reshape(x[1].tolist())
        elif op == "subtensor":
            def at(e):  # "$k": the k-th extra input
                return int(x[1 + int(e[1:])]) if isinstance(e, str) else e
            y = x[0][tuple(slice(at(e.get("start")), at(e.get("stop")), at(e.get("step"))) if isinstance(e, dict)
                           else at(e) for e in a["index"])]
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
            ax, idx = a.get("axis", 0), np.asarray(x[1])
            n = x[0].shape[ax]
            if idx.size and (idx.min() < -n or idx.max() >= n):  # np.take skips this over no element
                raise IndexError("index out of bounds for axis %d with size %d" % (ax, n))
            y = np.take(x[0], idx, axis=ax)
        elif op == "op_from_graph":
            body = a["body"]
            inner = replay(body, dict(zip(body["inputs"], x)))
            y = [inner[q] for q in body["outputs"]]
        elif op == "arctan2":
            y = np.arctan2(x[0], x[1])
        elif op in ("zeros_like", "ones_like"):
            y = (np.zeros_like if op == "zeros_like" else np.ones_like)(x[0])
        elif op == "arange":
            y = np.arange(x[0], x[1], x[2], dtype=a.get("dtype"))
        elif op == "cast":
            y = x[0].astype(a["dtype"])
        else:
            y = replay_nn(op, a, x)
        if isinstance(y, list):
            for oi, yi in zip(n["outputs"], y):
                env[oi] = np.asarray(yi)
        else:
            env[o] = np.asarray(y)
    return env


def append_node(b, op, ins, attrs):
    """A node with one new output, v<k>, appended to b.nodes; its id."""
    b.k += 1
    o = "v%d" % b.k
    n = {"op": op, "inputs": ins, "outputs": [o]}
    if attrs is not None:
        n["attrs"] = attrs
    b.nodes.append(n)
    return o


class Builder:
    def __init__(self, r):
        self.r, self.variables, self.nodes, self.env, self.pool, self.k = r, [], [], {}, [], 0
        self.raw = set()  # inputs: random values, no ties

    def add(self, op, ins, attrs=None):
        o = append_node(self, op, ins, attrs)
        self.env = replay_one(self, self.nodes[-1])
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


def check_grads(bad, how, od, fd, rtol, atol):
    """Adds to bad each gradient G<w> that the run in od wrote and that
    differs from the finite differences fd[w]."""
    for w, want in fd.items():
        gv = np.load(os.path.join(od, "G" + w + ".npy"))
        if gv.shape != want.shape or not np.allclose(gv, want, rtol=rtol, atol=atol):
            bad.append("-O %s: gradient of %s differs from finite differences by up to %g" %
                       (how, w, np.max(np.abs(gv - want)) if gv.shape == want.shape else np.inf))


def finite_differences(cost_of, vals, wrt, step=1e-6):
    out = {}
    for k in wrt:
        v, g = vals[k], np.zeros_like(vals[k])
        for idx in np.ndindex(v.shape):
            h = step * max(1.0, abs(v[idx]))
            hi, lo = dict(vals), dict(vals)
            hi[k], lo[k] = v.copy(), v.copy()
            hi[k][idx] += h
            lo[k][idx] -= h
            g[idx] = (cost_of(hi) - cost_of(lo)) / (2 * h)
        out[k] = g
    return out


def grad_graph(seed):
    """The grad family's graph for a seed: a Builder holding the nodes up
    to a scalar cost (a weighted sum of the last values), and the inputs'
    values; None when the seed made nothing to differentiate."""
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    b = Builder(r)
    ins = [("a", [3, 4]), ("b", r.choice([[4], [1, 4], [3, 1], [], [3, 4], [4, 3]]))]
    if r.random() < 0.5:
        ins.append(("c", r.choice([[4, 2], [3], [2, 4]])))
    vals = add_inputs(b, rng, ins)
    grow(b, grad_step, r.randint(3, 14))
    outs = [p for p in b.pool if p.startswith("v")][-3:]
    if not outs:
        return None
    terms, cost = weighted_cost(b, rng, outs)
    if not np.isfinite(float(b.env[cost])):
        return None
    return b, vals, cost, terms, rng


def add_inputs(b, rng, ins):
    """float64 inputs (id, shape) of random values, in b's pool; their
    values."""
    vals = {}
    for iid, sh in ins:
        vals[iid] = np.asarray(np.round(rng.normal(size=sh) * 1.2, 4))
        b.variables.append({"id": iid, "type": {"dtype": "float64", "shape": sh}})
        b.env[iid] = vals[iid]
        b.pool.append(iid)
        b.raw.add(iid)
    return vals


def grow(b, step, n):
    """n tries of step on b (a try that meets shapes it cannot use adds
    nothing)."""
    for _ in range(n):
        try:
            step(b)
        except (ValueError, IndexError):
            pass


def weighted_cost(b, rng, outs):
    """The sums of outs weighted by random constants, and their sum."""
    terms = [b.add("sum", [b.add("mul", [o, b.const(np.round(rng.normal(size=b.env[o].shape), 3))])])
             for o in outs]
    return terms, b.add("add", terms) if len(terms) > 1 else terms[0]


def run_grad(seed, d):
    made = grad_graph(seed)
    if not made:
        return []
    b, vals, cost, terms, _ = made
    wrt = list(vals)
    b.nodes.append({"op": "grad", "inputs": [cost] + wrt, "outputs": ["G" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": {"inputs": wrt, "outputs": [cost] + ["G" + w for w in wrt]}}}
    want_cost = float(b.env[cost])
    # A finite difference loses about eps * |term| / h to cancellation.
    atol = 1e-5 + 1e-8 * sum(abs(float(b.env[t])) for t in terms)
    fd = finite_differences(lambda v: float(replay(g, v)[cost]), vals, wrt)
    fd2 = None
    _, _, bad, done = run_presets(d, g, vals)
    for how, od in done.items():
        c = float(np.load(os.path.join(od, cost + ".npy")))
        if abs(c - want_cost) > 1e-9 * max(1, abs(want_cost)):
            bad.append("-O %s: cost %r, want %r" % (how, c, want_cost))
        first = []
        check_grads(first, how, od, fd, 1e-4, atol)
        if first:
            # where the cost curves fast (grad seed 20100787: cos(expm1(sinh
            # a)), whose inner derivative is 2.7e4), the step of 1e-6 is too
            # coarse: agreeing with the differences of a step of 1e-7 is enough
            if fd2 is None:
                fd2 = finite_differences(lambda v: float(replay(g, v)[cost]), vals, wrt, 1e-7)
            second = []
            check_grads(second, how, od, fd2, 1e-4, atol)
            bad += first if second else []
    return bad


def run_hess(seed, d):
    """Second derivatives: the grad family's graph (even seeds) or the nn
    family's in float64 (odd seeds), its gradient G, and the gradient of
    sum(G * v), a Hessian-vector product, against the central difference
    of G along v (G from tg at x + hv and x - hv,
    -O none; the grad family checks G itself)."""
    if seed % 2:
        made = nn_graph(seed // 2)
        if not made or made[-1]:
            return []  # (float32: too coarse for a difference of gradients)
        b, vals, _, cost, terms, rng, _ = made
    else:
        made = grad_graph(seed // 2)
        if not made:
            return []
        b, vals, cost, terms, rng = made
    wrt = list(vals)
    vs = {w: b.const(np.round(rng.normal(size=vals[w].shape), 3)) for w in wrt}
    b.nodes.append({"op": "grad", "inputs": [cost] + wrt, "outputs": ["G" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    for w in wrt:
        b.nodes.append({"op": "mul", "inputs": ["G" + w, vs[w]], "outputs": ["Gv" + w]})
        b.nodes.append({"op": "sum", "inputs": ["Gv" + w], "outputs": ["S" + w]})
    b.nodes.append({"op": "add", "inputs": ["S" + w for w in wrt] + [{"value": 0.0}], "outputs": ["s"]})
    b.nodes.append({"op": "grad", "inputs": ["s"] + wrt, "outputs": ["H" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": {"inputs": wrt, "outputs": ["G" + w for w in wrt] + ["H" + w for w in wrt]}}}
    p, _, bad, done = run_presets(d, g, vals)
    h, side = 1e-6, {}
    for sgn in (1, -1):
        sd = os.path.join(d, "side%d" % sgn)
        os.makedirs(sd)
        rc, err = tgc("run", p, "-O", "none", "-o", sd + "/out",
                      *save_inputs(sd, {w: vals[w] + sgn * h * b.env[vs[w]] for w in wrt}))
        if rc:
            return bad + ["x %s hv: %s" % ("+-"[sgn < 0], err)]
        side[sgn] = {w: np.load(os.path.join(sd, "out", "G" + w + ".npy")) for w in wrt}
    atol = 1e-5 + 1e-8 * sum(abs(float(b.env[t])) for t in terms)
    for how, od in done.items():
        for w in wrt:
            hv = np.load(os.path.join(od, "H" + w + ".npy"))
            fd = (side[1][w] - side[-1][w]) / (2 * h)
            if hv.shape != fd.shape or not np.allclose(hv, fd, rtol=1e-4, atol=atol * 10):
                bad.append("-O %s: Hessian-vector product of %s differs from the difference of gradients by up to %g" %
                           (how, w, np.max(np.abs(hv - fd)) if hv.shape == fd.shape else np.inf))
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
    # how near the operands of a maximum or gt came to a tie: differences
    # across a kink (or a flipped until) are no derivative
    S["margin"] = np.inf

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
            if nd["op"] in ("maximum", "gt"):
                S["margin"] = min(S["margin"], float(np.min(np.abs(args[0] - args[1]))))
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
    if r.random() < 0.3:
        # the step as one op_from_graph node: the same values and gradients
        body = S["body"]
        decl = {v["id"]: v for v in body["variables"]}
        attrs["body"] = {"variables": [decl[i] for i in body["inputs"]],
                         "nodes": [{"op": "op_from_graph", "inputs": body["inputs"],
                                    "outputs": ["w%d" % k for k in range(len(body["outputs"]))],
                                    "attrs": {"body": body, "name": "step"}}],
                         "inputs": body["inputs"], "outputs": ["w%d" % k for k in range(len(body["outputs"]))]}
    rop = None
    if grads and r.random() < 0.5:
        # the R-op of one reader along constant tangents (two reverse
        # passes through the scan)
        trng = np.random.default_rng(seed + 7)
        rop = (r.choice(readers)[0], {w: np.round(trng.normal(size=vals[w].shape), 3) for w in wrt})
        for w in wrt:
            variables.append({"id": "t" + w, "type": {"dtype": "float64", "shape": list(vals[w].shape)},
                              "constant": {"data": rop[1][w].ravel().tolist()}})
        nodes.append({"op": "rop", "inputs": [rop[0]] + wrt + ["t" + w for w in wrt], "outputs": ["R"],
                      "attrs": {"disconnected": "ignore"}})
    g = {"format": "tg-graph", "version": 1, "variables": variables, "nodes": nodes,
         "functions": {"main": {"inputs": list(vals),
                                "outputs": [q for q, _, _ in readers] + ["cost"] + (["G" + w for w in wrt] if grads else [])
                                + (["R"] if rop else [])}}}

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
    if S["margin"] < 1e-3:
        # a tie within reach of the differences (scan 9140074: a sequence
        # element and a weight both -1.1 in a maximum): values only
        grads, rop = False, None
    fd = finite_differences(lambda v: forward(v)["cost"], vals, wrt) if grads else {}
    _, _, bad, done = run_presets(d, g, vals)
    for how, od in done.items():
        for q in [rid for rid, _, _ in readers] + ["cost"]:
            gv, w = np.load(os.path.join(od, q + ".npy")), np.asarray(want[q])
            if gv.shape != w.shape or not np.allclose(gv, w, rtol=1e-9, atol=1e-9):
                bad.append("-O %s: %s differs from the NumPy loop" % (how, q))
        check_grads(bad, how, od, fd, 1e-5, 1e-6)
        if rop:
            h = 1e-6
            side = [np.asarray(forward({w: vals[w] + sgn * h * rop[1].get(w, 0) for w in vals})[rop[0]])
                    for sgn in (1, -1)]
            want_r = (side[0] - side[1]) / (2 * h)
            rv = np.load(os.path.join(od, "R.npy"))
            if rv.shape != want_r.shape or not np.allclose(rv, want_r, rtol=1e-5, atol=1e-6):
                bad.append("-O %s: rop of %s differs from the central difference" % (how, rop[0]))
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
        bad += checkpoints(d, p, args, outs)
    return bad


def tgc_steps(args, steps):
    """tgc commands one after another, the inputs (args) given to each run:
    the first failure's "command file: message", or None."""
    for s in steps:
        rc, err = tgc(*(list(s) + (args if s[0] == "run" else [])))
        if rc:
            return "%s: %s" % (" ".join(s[:2]), err)
    return None


def checkpoints(d, p, args, outs):
    """Graph p compiled to a .tgf, run 1 + 2 + 1 calls through checkpoints
    (--save-state): its outputs bit-identical to 4 calls straight."""
    err = tgc_steps(args, [("compile", p, "-o", d + "/c0.tgf"),
                           ("run", p, "-o", d + "/straight", "--calls", "4"),
                           ("run", d + "/c0.tgf", "--calls", "1", "--save-state", d + "/c1.tgf"),
                           ("run", d + "/c1.tgf", "--calls", "2", "--save-state", d + "/c2.tgf"),
                           ("run", d + "/c2.tgf", "-o", d + "/resumed", "--calls", "1")])
    if err:
        return [err]
    bad = []
    for o in outs:
        a, c = np.load(d + "/straight/" + o + ".npy"), np.load(d + "/resumed/" + o + ".npy")
        if a.tobytes() != c.tobytes():
            bad.append("%s: 1 + 2 + 1 calls through checkpoints differ from 4 calls" % o)
    return bad


# ---- shared weights overwritten by their updates ----

def run_sgd(seed, d):
    r, rng = random.Random(seed), np.random.default_rng(seed)
    B = r.randint(1, 4)
    variables, nodes, vals, outs, upd = [], [], {}, [], {}
    k = [0]

    def var(vid, shape, shared=None):
        v = {"id": vid, "type": {"dtype": "float64", "shape": list(shape)}}
        if shared is not None:
            v["shared"] = {"data": shared.ravel().tolist()}
        else:
            vals[vid] = np.round(rng.normal(size=shape), 3)
        variables.append(v)
        return vid

    def add(op, ins, attrs=None):
        k[0] += 1
        o = "n%d" % k[0]
        nd = {"op": op, "inputs": ins, "outputs": [o]}
        if attrs:
            nd["attrs"] = attrs
        nodes.append(nd)
        return o

    def coef():
        return {"value": r.choice([0.1, 0.01, 0.5, -0.25])}

    nw = r.randint(1, 3)
    rows = r.choice([24, 40])
    ws, costs = [], []
    for i in range(nw):
        w = "W%d" % i
        if r.random() < 0.2:  # an embedding table read by rows: its step adds into them (sparse_update)
            n, m, nb = r.choice([200, 300]), r.randint(3, 6), r.randint(1, 6)
            var(w, [n, m], np.round(rng.normal(size=[n, m]), 3))
            iv = "i%d" % i
            variables.append({"id": iv, "type": {"dtype": "int64", "shape": [None]}})
            vals[iv] = np.array([r.randrange(-n, n) for _ in range(nb)] + [r.randrange(n)] * r.randint(0, 2), np.int64)
            h = var("h%d" % i, [len(vals[iv]), m])
            costs.append(add("sum", [add("mul", [add("take", [w, iv], {"axis": 0}), h])]))
            # the gradient grad writes for take: the rows put back into zeros of the table
            step = add("take_add", [add("zeros_like", [w]), h, iv], {"axis": 0})
            upd[w] = add(r.choice(["sub", "add"]), [w, add("mul", [coef(), step])])
            ws.append((w, None))
            continue
        if r.random() < 0.2:  # a vector, updated by a gemv
            n, m = r.choice([520, 600]), r.randint(2, 5)
            var(w, [n], np.round(rng.normal(size=[n]), 3))
            M, v = var("M%d" % i, [n, m]), var("v%d" % i, [m])
            upd[w] = add("sub", [w, add("mul", [coef(), add("dot", [M, v])])])
            costs.append(add("sum", [add("mul", [w, add("dot", [M, v])])]))
            ws.append((w, None))
            continue
        cols = r.choice([24, 32])
        var(w, [rows, cols], np.round(rng.normal(size=[rows, cols]), 3))
        x, g = var("x%d" % i, [B, rows]), var("g%d" % i, [B, cols])
        y = add("dot", [x, w])  # forward
        if r.random() < 0.5:  # the backward product through a transpose
            y2 = add("dot", [g, add("transpose", [w], {"axes": None})])
            costs.append(add("sum", [add("mul", [y2, x])]))
        costs.append(add("sum", [add("mul", [y, g])]))
        t = r.random()
        if t < 0.45:  # gemm
            step = add("dot", [add("transpose", [x], {"axes": None}), g])
        elif t < 0.7:  # ger
            u, v = var("u%d" % i, [rows]), var("q%d" % i, [cols])
            step = add("outer", [u, v])
        else:  # another weight of this many rows, or x^T g
            others = [o for o, c in ws if c is not None]
            if others:
                o = r.choice(others)
                oc = [c for q, c in ws if q == o][0]
                kk = var("k%d" % i, [oc, cols])
                step = add("dot", [o, kk])
            else:
                step = add("dot", [add("transpose", [x], {"axes": None}), g])
        if t < 0.45 and r.random() < 0.4:  # weight decay: one gemm over w (gemm_fold)
            step = add("add", [step, add("mul", [w, {"value": r.choice([0.0005, 0.01])}])])
        upd[w] = add(r.choice(["sub", "add"]), [w, add("mul", [coef(), step])])
        ws.append((w, cols))
    cost = costs[0] if len(costs) == 1 else add("add", costs)
    outs.append(cost)
    for w, c in ws:
        t = r.random()
        if t < 0.15:
            outs.append(w)  # the value as it was: not overwritten
        elif t < 0.25 and c is not None:
            outs.append(add("transpose", [w], {"axes": None}))
        elif t < 0.4:
            outs.append(upd[w])  # the new value, returned too
    g = {"format": "tg-graph", "version": 1, "variables": variables, "nodes": nodes,
         "functions": {"main": {"inputs": list(vals), "outputs": outs, "updates": upd}}}
    calls = 3
    state = {}
    for _ in range(calls):
        env = replay(g, dict(vals, **state))
        state = {w: env[u] for w, u in upd.items()}
    p, args, bad, done = run_presets(d, g, vals, "--calls", str(calls))
    for how, od in done.items():
        for o in outs:
            gv = np.load(os.path.join(od, o + ".npy"))
            if gv.shape != env[o].shape or not np.allclose(gv, env[o], rtol=1e-10, atol=1e-10):
                bad.append("-O %s: %s differs from NumPy after %d calls" % (how, o, calls))
    if not bad:
        bad += checkpoints(d, p, args, outs)
    return bad


# ---- networks and structured ops: conv2d, pool2d, linear algebra, ... ----
# References written from Theano's definitions (FORMAT.md s7), not from
# tg's kernels: loops over the filter taps and the windows.

def conv2d_ref(x, w, a):
    """Theano's conv2d: filter_flip true is a true convolution."""
    s, dl = a.get("subsample", [1, 1]), a.get("filter_dilation", [1, 1])
    if a.get("filter_flip", True):
        w = w[:, :, ::-1, ::-1]
    kd = [(w.shape[2] - 1) * dl[0] + 1, (w.shape[3] - 1) * dl[1] + 1]
    bm = a.get("border_mode", "valid")
    pad = bm if not isinstance(bm, str) else \
        {"valid": [0, 0], "full": [kd[0] - 1, kd[1] - 1], "half": [kd[0] // 2, kd[1] // 2]}[bm]
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    R, C = (xp.shape[2] - kd[0]) // s[0] + 1, (xp.shape[3] - kd[1]) // s[1] + 1
    y = np.zeros((x.shape[0], w.shape[0], R, C))
    for u in range(w.shape[2]):
        for v in range(w.shape[3]):
            patch = xp[:, :, u * dl[0]:u * dl[0] + (R - 1) * s[0] + 1:s[0],
                       v * dl[1]:v * dl[1] + (C - 1) * s[1] + 1:s[1]]
            y += np.einsum("bcij,oc->boij", patch, w[:, :, u, v])
    return y


def conv2d_ref_grads(x, w, a, R):
    """The gradients of sum(conv2d(x, w) * R) by x and w, tap by tap (the
    adjoint of conv2d_ref's loop)."""
    s, dl = a.get("subsample", [1, 1]), a.get("filter_dilation", [1, 1])
    flip = a.get("filter_flip", True)
    wf = w[:, :, ::-1, ::-1] if flip else w
    kd = [(w.shape[2] - 1) * dl[0] + 1, (w.shape[3] - 1) * dl[1] + 1]
    bm = a.get("border_mode", "valid")
    pad = bm if not isinstance(bm, str) else \
        {"valid": [0, 0], "full": [kd[0] - 1, kd[1] - 1], "half": [kd[0] // 2, kd[1] // 2]}[bm]
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    gxp, gwf = np.zeros_like(xp), np.zeros_like(wf)
    Rr, Rc = R.shape[2], R.shape[3]
    for u in range(w.shape[2]):
        for v in range(w.shape[3]):
            sl = (slice(None), slice(None), slice(u * dl[0], u * dl[0] + (Rr - 1) * s[0] + 1, s[0]),
                  slice(v * dl[1], v * dl[1] + (Rc - 1) * s[1] + 1, s[1]))
            gwf[:, :, u, v] = np.einsum("boij,bcij->oc", R, xp[sl])
            gxp[sl] += np.einsum("boij,oc->bcij", R, wf[:, :, u, v])
    gx = gxp[:, :, pad[0]:pad[0] + x.shape[2], pad[1]:pad[1] + x.shape[3]]
    return gx, gwf[:, :, ::-1, ::-1] if flip else gwf


def run_conv_big(seed, d):
    """conv2d on shapes large enough for every path of the CPU kernels (the
    direct AVX-512 kernel's blocks of output channels and its row tails,
    im2col with groups of images): forward and gradients against the
    tap-by-tap references, on a path forced at random (TG_CONV)."""
    r, rng = random.Random(seed), np.random.default_rng(seed)
    f32 = r.random() < 0.5
    B, C, O = r.randint(1, 3), r.randint(1, 6), r.randint(1, 20)
    K, L = r.randint(1, 5), r.randint(1, 5)
    H, W = r.randint(K, 12), r.randint(max(L, 8), 40)
    a = {"border_mode": r.choice(["valid", "full", "half", [r.randint(0, 2), r.randint(0, 2)]])}
    if r.random() < 0.3:
        a["subsample"] = [r.randint(1, 2), r.randint(1, 3)]
    if r.random() < 0.2:
        a["filter_dilation"] = [r.randint(1, 2), r.randint(1, 2)]
    a["filter_flip"] = r.random() < 0.5
    dt = np.float32 if f32 else np.float64
    x = rng.normal(size=(B, C, H, W)).astype(dt).astype(np.float64)
    w = (rng.normal(size=(O, C, K, L)) * 0.3).astype(dt).astype(np.float64)
    try:
        y = conv2d_ref(x, w, a)
    except ValueError:
        return []  # the dilated filter does not fit: a load error, tested elsewhere
    if min(y.shape) < 1:
        return []
    R = np.round(rng.normal(size=y.shape), 2)
    gx, gw = conv2d_ref_grads(x, w, a, R)
    sd = "float32" if f32 else "float64"
    g = {"format": "tg-graph", "version": 1,
         "variables": [{"id": "x", "type": {"dtype": sd, "shape": list(x.shape)}},
                       {"id": "w", "type": {"dtype": sd, "shape": list(w.shape)}},
                       {"id": "R", "type": {"dtype": sd, "shape": list(R.shape)}}],
         "nodes": [{"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"], "attrs": a},
                   {"op": "mul", "inputs": ["y", "R"], "outputs": ["yr"]},
                   {"op": "sum", "inputs": ["yr"], "outputs": ["cost"]},
                   {"op": "grad", "inputs": ["cost", "x", "w"], "outputs": ["Gx", "Gw"]}],
         "functions": {"main": {"inputs": ["x", "w", "R"], "outputs": ["y", "Gx", "Gw"]}}}
    vals = {"x": x.astype(dt), "w": w.astype(dt), "R": R.astype(dt)}
    path = r.choice([None, "im2col", "direct"])
    old = os.environ.pop("TG_CONV", None)
    if path:
        os.environ["TG_CONV"] = path
    try:
        _, _, bad, done = run_presets(d, g, vals)
    finally:
        os.environ.pop("TG_CONV", None)
        if old is not None:
            os.environ["TG_CONV"] = old
    rtol = 2e-4 if f32 else 1e-10
    for how, od in done.items():
        for o, want in (("y", y), ("Gx", gx), ("Gw", gw)):
            got = np.load(os.path.join(od, o + ".npy"))
            scale = rtol * max(1.0, float(np.max(np.abs(want))))
            if got.dtype != dt or got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=scale):
                bad.append("-O %s (TG_CONV=%s): %s differs from the reference%s" % (
                    how, path, o, " by up to %g" % np.max(np.abs(got - want)) if got.shape == want.shape else ""))
    return bad


def pool_len(v, ws, st, pad, ib):
    """Theano's Pool.out_shape along one dimension."""
    if ib:
        return max(0, (v + 2 * pad - ws) // st + 1)
    return (v - 1) // st + 1 if st >= ws else max(0, (v - 1 - ws + st) // st) + 1


def pool2d_ref(x, a):
    """Theano's CPU Pool: a window [j*stride, j*stride + ws) of the padded
    image, cut at its end; max, sum and average_exc_pad over its real part,
    average_inc_pad divided by the size of the cut window."""
    ws = a["ws"]
    st, pad = a.get("stride", ws), a.get("pad", [0, 0])
    ib, mode = a.get("ignore_border", True), a.get("mode", "max")
    H, W = x.shape[-2:]
    R, C = pool_len(H, ws[0], st[0], pad[0], ib), pool_len(W, ws[1], st[1], pad[1], ib)
    y = np.zeros(x.shape[:-2] + (R, C))
    for i in range(R):
        r0 = i * st[0]
        r1 = min(r0 + ws[0], H + 2 * pad[0])
        for j in range(C):
            c0 = j * st[1]
            c1 = min(c0 + ws[1], W + 2 * pad[1])
            win = x[..., max(r0, pad[0]) - pad[0]:min(r1, H + pad[0]) - pad[0],
                    max(c0, pad[1]) - pad[1]:min(c1, W + pad[1]) - pad[1]]
            if mode == "max":
                y[..., i, j] = win.max(axis=(-2, -1))
            elif mode == "sum":
                y[..., i, j] = win.sum(axis=(-2, -1))
            elif mode == "average_exc_pad":
                y[..., i, j] = win.mean(axis=(-2, -1))
            else:
                y[..., i, j] = win.sum(axis=(-2, -1)) / ((r1 - r0) * (c1 - c0))
    return y


def digamma(x):
    """psi(x) for x > 0: the recurrence up to 6, then the asymptotic series."""
    x, acc = np.array(x, dtype=np.float64), 0.0
    while (x < 6).any():
        small = x < 6
        acc = acc - np.where(small, 1 / x, 0)
        x = np.where(small, x + 1, x)
    x2 = 1 / (x * x)
    return acc + np.log(x) - 0.5 / x - x2 * (1 / 12 - x2 * (1 / 120 - x2 * (1 / 252 - x2 * (1 / 240 - x2 / 132))))


def polygamma(n, x):
    """psi_n(x) for x > 0 and whole n >= 0: (-1)^(n+1) n! times the sum of
    (x + k)^-(n+1), 30 terms, then the Euler-Maclaurin tail (three
    Bernoulli terms)."""
    n, x = int(n), np.array(x, dtype=np.float64)
    if n == 0:
        return digamma(x)
    s = n + 1
    acc = sum((x + k) ** -s for k in range(30))
    a = x + 30
    tail = a ** -n / n + 0.5 * a ** -s + s / 12 * a ** (-s - 1) - \
        s * (s + 1) * (s + 2) / 720 * a ** (-s - 3) + s * (s + 1) * (s + 2) * (s + 3) * (s + 4) / 30240 * a ** (-s - 5)
    return (-1) ** (n + 1) * math.factorial(n) * (acc + tail)


# op: (NumPy, the domain its input is mapped into: unit (-0.9, 0.9),
# pos [0.5, oo), ge1 [1.5, oo), any)
NN_ELEM = {"tan": (np.tan, "unit"), "arcsin": (np.arcsin, "unit"), "arccos": (np.arccos, "unit"),
           "arctanh": (np.arctanh, "unit"), "cosh": (np.cosh, "any"), "arccosh": (np.arccosh, "ge1"),
           "erf": (np.vectorize(math.erf), "any"), "erfc": (np.vectorize(math.erfc), "any"),
           "gammaln": (np.vectorize(math.lgamma), "pos"), "digamma": (digamma, "pos"),
           "trigamma": (lambda x: polygamma(1, x), "pos"),
           # polygamma(n, x) with a weak order n from 0 to 3 (nn_elem)
           "polygamma": (None, "pos"),
           "log10": (np.log10, "pos"), "reciprocal": (np.reciprocal, "pos"),
           "log2": (np.log2, "pos"), "exp2": (np.exp2, "any"), "cos": (np.cos, "any")}


def along(x, axis, f):
    """f applied to x with `axis` moved first, moved back."""
    return np.moveaxis(f(np.moveaxis(x, axis, 0)), 0, axis)


def replay_nn(op, a, x):
    if op == "polygamma":
        return polygamma(x[0], x[1])
    if op in NN_ELEM:
        return NN_ELEM[op][0](x[0])
    if op == "conv2d":
        return conv2d_ref(x[0], x[1], a)
    if op == "pool2d":
        return pool2d_ref(x[0], a)
    if op == "cholesky":
        L = np.linalg.cholesky(x[0])
        return L if a.get("lower", True) else L.T
    if op in ("matrix_inverse", "det"):
        return np.linalg.inv(x[0]) if op == "matrix_inverse" else np.linalg.det(x[0])
    if op == "solve":
        return np.linalg.solve(x[0], x[1])
    if op == "categorical_crossentropy":
        p, t = x
        if t.dtype.kind in "iu":
            return -np.log(np.take_along_axis(p, t[..., None], -1))[..., 0]
        return -np.sum(t * np.log(p), axis=-1)
    if op == "binary_crossentropy":
        p, t = x
        return -(t * np.log(p) + (1 - t) * np.log(1 - p))
    if op == "flatten":
        nd = a.get("ndim", 1)
        return x[0].reshape(x[0].shape[:nd - 1] + (int(np.prod(x[0].shape[nd - 1:])),))
    if op == "stack":
        return np.stack(x, a["axis"])
    if op == "split":
        if np.sum(x[1]) != x[0].shape[a["axis"]] or np.min(x[1]) < 0:
            raise ValueError("split sizes %s for a length %d" % (x[1], x[0].shape[a["axis"]]))
        return np.split(x[0], np.cumsum(x[1])[:-1], axis=a["axis"])
    if op == "repeat":
        return np.repeat(x[0], x[1], axis=a.get("axis"))
    if op in ("take_set", "take_add"):
        def put(t):
            t = t.copy()
            ys = np.broadcast_to(np.moveaxis(x[1], ax, 0), (len(x[2]),) + t.shape[1:])
            for k, i in enumerate(x[2]):  # in order: the last of repeated indices wins
                t[i] = ys[k] if op == "take_set" else t[i] + ys[k]
            return t
        ax = a.get("axis", 0)
        return along(x[0], ax, put)
    if op == "outer":
        return np.outer(x[0], x[1])
    if op == "squeeze":
        return np.squeeze(x[0], axis=a.get("axis"))
    if op == "expand_dims":
        return np.expand_dims(x[0], a["axis"])
    if op == "alloc":
        return np.broadcast_to(x[0], [int(q) for q in x[1:]]).copy()
    if op == "eye":
        return np.eye(int(x[0]), int(x[1]), int(x[2]))
    if op == "ifelse":
        k = (len(x) - 1) // 2
        return list(x[1:1 + k] if x[0] else x[1 + k:])
    raise ValueError(op)


def nn_conv(b, r, inp, cst):
    B, C, O = r.randint(1, 2), r.randint(1, 3), r.randint(1, 3)
    kh, kw, H, W = r.randint(1, 3), r.randint(1, 3), r.randint(3, 7), r.randint(3, 7)
    a = {}
    if r.random() < 0.8:
        a["border_mode"] = r.choice(["valid", "full", "half", [r.randint(0, 2), r.randint(0, 2)]])
    if r.random() < 0.5:
        a["subsample"] = [r.randint(1, 3), r.randint(1, 3)]
    if r.random() < 0.4:
        a["filter_dilation"] = [r.randint(1, 2), r.randint(1, 2)]
    if r.random() < 0.5:
        a["filter_flip"] = r.random() < 0.5
    x, w = inp("x", (B, C, H, W)), inp("w", (O, C, kh, kw), 0.5)
    try:
        y = b.add("conv2d", [x, w], a)
    except ValueError:
        return None  # the filter does not fit: a load error, tested elsewhere
    if b.env[y].shape[2] < 1 or b.env[y].shape[3] < 1:
        return None
    outs = [y]
    if r.random() < 0.5:
        y = b.add("tanh", [b.add("add", [y, cst(np.round(np.linspace(-0.5, 0.5, O).reshape(O, 1, 1), 3))])])
    if r.random() < 0.5:
        outs.append(nn_pool(b, r, inp, cst, y))
    return outs


def nn_pool(b, r, inp, cst, x=None):
    if x is None:
        x = inp("x", r.choice([(2, 2, 5, 6), (1, 3, 4, 4), (3, 7, 5), (6, 7), (2, 1, 3, 8)]))
    ws = [r.randint(1, 3), r.randint(1, 3)]
    a = {"ws": ws, "mode": r.choice(["max", "max", "sum", "average_inc_pad", "average_exc_pad"])}
    if r.random() < 0.6:
        a["stride"] = [r.randint(1, 3), r.randint(1, 3)]
    if r.random() < 0.5:
        a["ignore_border"] = False
    elif r.random() < 0.5:
        a["pad"] = [r.randrange(ws[0]), r.randrange(ws[1])]
    return b.add("pool2d", [x], a)


def nn_linalg(b, r, inp, cst):
    n = r.randint(2, 4)
    X = inp("X", (n, n), 0.4)
    spd = b.add("add", [b.add("dot", [X, b.add("transpose", [X], {"axes": None})]), cst(np.eye(n) * n)])
    gen = b.add("add", [X, cst(np.eye(n) * 3)])
    outs = []
    for _ in range(r.randint(1, 3)):
        c = r.random()
        if c < 0.3:
            outs.append(b.add("cholesky", [spd], {"lower": r.random() < 0.5}))
        elif c < 0.5:
            outs.append(b.add("matrix_inverse", [r.choice([spd, gen])]))
        elif c < 0.7:
            outs.append(b.add("det", [r.choice([spd, gen])]))
        else:
            rhs = inp("r%d" % len(outs), r.choice([(n,), (n, 2)]))
            kind = r.choice(["gen", "sym", "pos"])
            outs.append(b.add("solve", [gen if kind == "gen" else spd, rhs], {"assume_a": kind}))
    return outs


def nn_xent(b, r, inp, cst):
    N, K = r.randint(1, 4), r.randint(2, 5)
    z = inp("z", (N, K))
    if r.random() < 0.6:
        p = b.add("softmax", [z], {"axis": -1})
        rng = np.random.default_rng(r.randrange(1 << 30))
        t = rng.integers(0, K, size=N)
        tv = b.const(t.astype(np.int64)) if r.random() < 0.5 else cst(np.eye(K)[t])
        return [b.add("categorical_crossentropy", [p, tv])]
    p = b.add("sigmoid", [z])
    t = b.add("sigmoid", [inp("t", (N, K))]) if r.random() < 0.5 else \
        cst(np.round(np.random.default_rng(r.randrange(1 << 30)).random((N, K)), 3))
    return [b.add("binary_crossentropy", [p, t])]


def nn_elem(b, r, inp, cst):
    x, outs = inp("x", (3, 4)), []
    for _ in range(r.randint(1, 4)):
        op = r.choice(sorted(NN_ELEM))
        dom = NN_ELEM[op][1]
        y = x if dom == "any" else \
            b.add("mul", [b.add("tanh", [x]), {"value": 0.9}]) if dom == "unit" else \
            b.add("add", [b.add("sqr", [x]), {"value": 0.5 if dom == "pos" else 1.5}])
        x = b.add(op, [{"value": r.randint(0, 3)}, y] if op == "polygamma" else [y])
        outs.append(x)
    return outs


def nn_shape(b, r, inp, cst):
    rng = np.random.default_rng(r.randrange(1 << 30))
    x = inp("x", r.choice([(3, 4), (2, 3, 4), (4,), (5, 2)]))
    outs = []
    for _ in range(r.randint(1, 4)):
        xv = b.env[x]
        c = r.random()
        if c < 0.12 and xv.ndim:
            ax = r.randrange(xv.ndim)
            m = xv.shape[ax]
            cuts = sorted(r.sample(range(0, m + 1), 2)) if m > 1 else [0, m]
            sizes = [cuts[0], cuts[1] - cuts[0], m - cuts[1]]
            parts = ["p%d_%d" % (len(b.nodes), i) for i in range(3)]
            b.nodes.append({"op": "split", "inputs": [x, b.const(np.array(sizes, np.int64))],
                            "outputs": parts, "attrs": {"axis": ax, "n": 3}})
            b.env = replay_one(b, b.nodes[-1])
            x = r.choice([q for q in parts if b.env[q].size] or parts)
            outs.append(parts[r.randrange(3)])
        elif c < 0.24:
            y = b.add("sin", [x])
            x = b.add("stack", [x, y] if r.random() < 0.5 else [y, x, y], {"axis": r.randint(-xv.ndim - 1, xv.ndim)})
        elif c < 0.34 and xv.ndim > 1:
            x = b.add("flatten", [x], {"ndim": r.randint(1, xv.ndim)})
        elif c < 0.46:
            ax = r.choice([None] + list(range(xv.ndim)))
            m = xv.size if ax is None else xv.shape[ax]
            reps = np.int64(r.randint(0, 3)) if r.random() < 0.5 else rng.integers(0, 3, size=m).astype(np.int64)
            x = b.add("repeat", [x, b.const(reps)], {"axis": ax})
        elif c < 0.62 and xv.ndim and min(xv.shape):
            ax = r.randrange(xv.ndim)
            m = xv.shape[ax]
            idx = rng.integers(-m, m, size=r.randint(1, 5)).astype(np.int64)
            ysh = list(xv.shape)
            ysh[ax] = len(idx)
            if r.random() < 0.3:
                ysh[ax] = 1  # broadcast along the indexed axis
            y = inp("y%d" % len(b.nodes), tuple(ysh))
            x = b.add(r.choice(["take_set", "take_add"]), [x, y, b.const(idx)], {"axis": ax})
        elif c < 0.7 and xv.ndim == 1:
            u = inp("u%d" % len(b.nodes), (r.randint(1, 4),))
            x = b.add("outer", [x, u] if r.random() < 0.5 else [u, x])
        elif c < 0.78:
            ax = r.randint(-xv.ndim - 1, xv.ndim)
            y = b.add("expand_dims", [x], {"axis": ax})
            x = b.add("squeeze", [b.add("tanh", [y])], {"axis": ax} if r.random() < 0.5 else {})
        elif c < 0.86:
            v = b.add("sum", [x], {"axis": 0, "keepdims": True}) if xv.ndim else x
            dims = [b.const(np.int64(d)) for d in ([r.randint(1, 3)] + list(b.env[v].shape[1:]) if xv.ndim else [2, 3])]
            x = b.add("alloc", [v] + dims)
        elif c < 0.94:
            s = b.add("sum", [x])
            if abs(float(b.env[s])) < 1e-3:
                continue
            cond = b.add("gt", [s, {"value": 0.0}])
            t1, e1 = b.add("tanh", [x]), b.add("mul", [x, {"value": 3.0}])
            t2, e2 = b.add("sqr", [x]), b.add("sin", [x])
            o = ["q%d_%d" % (len(b.nodes), i) for i in range(2)]
            b.nodes.append({"op": "ifelse", "inputs": [cond, t1, t2, e1, e2], "outputs": o})
            b.env = replay_one(b, b.nodes[-1])
            x = o[0]
            outs.append(o[1])
        elif xv.ndim == 2:
            e = b.add("eye", [b.const(np.int64(xv.shape[0])), b.const(np.int64(xv.shape[1])),
                              b.const(np.int64(r.randint(-1, 1)))])
            x = b.add("mul", [x, b.add("add", [e, {"value": 0.5}])])
    return outs + [x]


def nn_graph(seed):
    """The nn family's graph for a seed: a Builder holding the nodes up to
    a scalar cost, the inputs' values, the outputs checked, and whether
    tg computes it in float32; None when the seed made nothing."""
    r, rng = random.Random(seed), np.random.default_rng(seed)
    kind = r.choice(["conv", "conv", "conv", "pool", "pool", "pool", "linalg", "xent", "elem", "shape", "shape"])
    f32 = kind in ("conv", "pool", "xent", "elem") and r.random() < 0.25
    b, vals = Builder(r), {}

    def inp(name, shape, scale=1.0):
        v = rng.normal(size=shape) * scale
        v = v.astype(np.float32).astype(np.float64) if f32 else v
        b.variables.append({"id": name, "type": {"dtype": "float64", "shape": list(shape)}})
        b.env[name] = vals[name] = v
        b.pool.append(name)
        b.raw.add(name)
        return name

    def cst(v):
        return b.const(np.asarray(v).astype(np.float32).astype(np.float64) if f32 else np.asarray(v))
    outs = {"conv": nn_conv, "pool": nn_pool, "linalg": nn_linalg, "xent": nn_xent, "elem": nn_elem,
            "shape": nn_shape}[kind](b, r, inp, cst)
    if not outs:
        return None
    outs = list(dict.fromkeys(outs if isinstance(outs, list) else [outs]))
    terms = [b.add("sum", [b.add("mul", [o, cst(np.round(rng.normal(size=b.env[o].shape), 3))])]) for o in outs]
    cost = b.add("add", terms) if len(terms) > 1 else terms[0]
    return b, vals, outs, cost, terms, rng, f32


def run_nn(seed, d):
    made = nn_graph(seed)
    if not made:
        return []
    b, vals, outs, cost, terms, _, f32 = made
    wrt = list(vals)
    b.nodes.append({"op": "grad", "inputs": [cost] + wrt, "outputs": ["G" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    if f32:  # the same values, computed by tg in float32; the references in float64
        for v in b.variables:
            if v["type"]["dtype"] == "float64":
                v["type"]["dtype"] = "float32"
        vals = {k: v.astype(np.float32) for k, v in vals.items()}
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": {"inputs": wrt, "outputs": outs + [cost] + ["G" + w for w in wrt]}}}
    want = {o: b.env[o] for o in outs + [cost]}
    if not all(np.all(np.isfinite(v)) for v in want.values()):
        return []
    # float64: rounding of the sums; a finite difference loses about
    # eps * |term| / h to cancellation. float32: tg's rounding.
    rtol, frtol = (1e-4, 2e-3) if f32 else (1e-9, 1e-4)
    atol = (1e-4 if f32 else 1e-5) + (1e-5 if f32 else 1e-8) * sum(abs(float(b.env[t])) for t in terms)
    v64 = {k: v.astype(np.float64) for k, v in vals.items()}
    fd = finite_differences(lambda v: float(replay(g, v)[cost]), v64, wrt)
    _, _, bad, done = run_presets(d, g, vals)
    for how, od in done.items():
        for o, w in want.items():
            gv = np.load(os.path.join(od, o + ".npy"))
            if gv.dtype != (np.float32 if f32 else np.float64) or gv.shape != w.shape or \
                    not np.allclose(gv, w, rtol=rtol, atol=atol if o == cost else rtol):
                bad.append("-O %s: %s (%s %s) differs from NumPy's %s %s" % (how, o, gv.dtype, gv.shape, w.dtype, w.shape))
        check_grads(bad, how, od, fd, frtol, atol)
    return bad


# ---- weak inline scalars (FORMAT.md s5, NEP 50) ----

def weak_dtype(adt, v):
    """The dtype weak scalar v takes meeting an array of dtype adt; None
    when an integer does not fit it (a load error)."""
    adt = np.dtype(adt)
    if isinstance(v, bool):
        return adt
    if isinstance(v, int):
        if adt.kind == "b":
            return np.dtype("int64")
        if adt.kind in "iu" and not np.iinfo(adt).min <= v <= np.iinfo(adt).max:
            return None
        return adt
    return adt if adt.kind == "f" else np.dtype("float64")


# identities and absorbing elements first: rewrites that drop them must
# keep the dtype the scalar gives (bool * 1 is int64, int8 + 0.0 float64)
WEAK_VALUES = [0, 1, -1, 0.0, 1.0, -1.0, True, False, 2, 3, -3, 100, 127, 200, 300, -129, 0.5, -2.5, 1e-3]
WEAK_OPS = ["add", "sub", "mul", "true_div", "int_div", "mod", "pow", "maximum", "minimum", "eq", "neq",
            "lt", "le", "gt", "ge", "logical_and", "logical_or", "switch", "clip"]


def run_weak(seed, d):
    r = random.Random(seed)
    dt = r.choice(DT)
    sh = r.choice([[3, 4], [4], []])
    x0 = np.asarray(mixed_sample(dt, sh, r)).astype(dt).reshape(sh)
    variables = [{"id": "x", "type": {"dtype": dt, "shape": sh}}]
    env, pool, nodes, outs = {"x": x0}, ["x"], [], []
    if r.random() < 0.1:  # an integer that does not fit: refused when loading
        ints = [t for t in DT if np.dtype(t).kind in "iu"]
        dt = r.choice(ints)
        v = r.choice([-1, -129, 128, 256, 70000, -40000, 1 << 40])
        if weak_dtype(dt, v) is not None:
            return []
        variables[0]["type"]["dtype"] = dt
        g = {"format": "tg-graph", "version": 1, "variables": variables,
             "nodes": [{"op": r.choice(["add", "mul", "maximum"]), "inputs": ["x", {"value": v}], "outputs": ["y"]}]}
        p = os.path.join(d, "g.json")
        with open(p, "w") as f:
            json.dump(g, f)
        rc, err = tgc("run", p, *save_inputs(d, {"x": x0.astype(dt)}))
        if rc == 0 or "nodes[0]" not in err or "%d" % v not in err or len(err.splitlines()) != 1:
            return ["%s %s + %d: want one load error naming nodes[0] and the value, got rc %d: %s" % (dt, sh, v, rc, err)]
        return []
    for k in range(r.randint(1, 6)):
        x = r.choice(pool)
        xv = env[x]
        op, v = r.choice(WEAK_OPS), r.choice(WEAK_VALUES)
        wd = weak_dtype(xv.dtype, v)
        if wd is None:
            continue
        sv = np.array(v).astype(wd)
        try:
            if op == "switch":
                c = r.choice(pool)
                if bshape(env[c].shape, xv.shape) is None:
                    continue
                left = r.random() < 0.5
                a, b = (sv, xv) if left else (xv, sv)
                res = np.where(env[c].astype(bool), a, b)
                ins = [c, {"value": v}, x] if left else [c, x, {"value": v}]
            elif op == "clip":
                lo, hi = sorted([v, r.choice(WEAK_VALUES)], key=float)
                if weak_dtype(xv.dtype, hi) is None or xv.dtype.kind == "b" or \
                        weak_dtype(xv.dtype, lo) != xv.dtype or weak_dtype(xv.dtype, hi) != xv.dtype:
                    continue  # (a bound that would widen the dtype: not clip's)
                res = np.minimum(np.maximum(xv, np.array(lo).astype(xv.dtype)), np.array(hi).astype(xv.dtype))
                ins = [x, {"value": lo}, {"value": hi}]
            else:
                left = r.random() < 0.5
                res = mixed_binary(op, sv, xv) if left else mixed_binary(op, xv, sv)
                ins = [{"value": v}, x] if left else [x, {"value": v}]
        except Skip:
            continue
        if op in tuple(CMP) + ("int_div", "mod") and xv.dtype.kind == "f" and x != "x":
            continue  # an ulp could flip a computed value's comparison or quotient
        o = "v%d" % (k + 1)
        nodes.append({"op": op, "inputs": ins, "outputs": [o]})
        env[o] = np.asarray(res)
        pool.append(o)
        outs.append(o)
    if not outs:
        return []
    g = {"format": "tg-graph", "version": 1, "variables": variables, "nodes": nodes,
         "functions": {"main": {"inputs": ["x"], "outputs": outs}}}
    _, _, bad, done = run_presets(d, g, {"x": x0})
    for how, od in done.items():
        for o in outs:
            e = close(np.load(os.path.join(od, o + ".npy")), env[o], 1e-2)
            if e:
                bad.append("-O %s, %s = %s: %s" % (how, o, json.dumps(next(n for n in nodes if n["outputs"] == [o])["inputs"]), e))
    return bad


# ---- basic indexing: subtensor, set_subtensor, inc_subtensor ----

def run_index(seed, d):
    """NumPy basic indexing (negative indices and steps, out-of-range
    slice bounds, fewer entries than dimensions, bounds given at run time
    as "$k" inputs), chained: values against NumPy, gradients against
    finite differences; an integer index out of range is one run-time
    error."""
    r, rng = random.Random(seed), np.random.default_rng(seed)
    b, vals = Builder(r), {}
    shape = [r.randint(1, 5) for _ in range(r.randint(1, 3))]
    vals["x"] = rng.normal(size=shape)
    b.variables.append({"id": "x", "type": {"dtype": "float64", "shape": shape}})
    b.env["x"] = vals["x"]
    ints, x, outs, err = {}, "x", [], None
    for k in range(r.randint(1, 3)):
        xv = b.env[x]
        if xv.ndim == 0:
            break
        extra, entries, npidx = [], [], []

        def num(v):
            if v is None or r.random() > 0.3:
                return v
            name = "k%d_%d" % (k, len(extra))
            ints[name] = np.int64(v)
            b.variables.append({"id": name, "type": {"dtype": "int64", "shape": []}})
            b.env[name] = ints[name]
            extra.append(name)
            return "$%d" % (len(extra) - 1)
        for i in range(r.randint(1, xv.ndim)):
            n = xv.shape[i]
            if r.random() < 0.3:
                v = r.randrange(-n, n) if n and r.random() < 0.97 else r.choice([n, -n - 1])
                if not -n <= v < n:
                    err = err or "index %d" % v
                entries.append(num(v))
                npidx.append(v)
            else:
                lo, hi = [r.choice([None, r.randint(-n - 2, n + 2)]) for _ in range(2)]
                st = r.choice([None, 1, 2, 3, -1, -2])
                entries.append({"start": num(lo), "stop": num(hi), "step": num(st)})
                npidx.append(slice(lo, hi, st))
        if err:  # the error is the test: no gradient, no values
            b.nodes.append({"op": "subtensor", "inputs": [x] + extra, "outputs": ["bad"],
                            "attrs": {"index": entries}})
            outs = ["bad"]
            break
        part = xv[tuple(npidx)]
        c = r.random()
        if c < 0.5 or not part.size:
            y = "s%d" % k
            b.nodes.append({"op": "subtensor", "inputs": [x] + extra, "outputs": [y], "attrs": {"index": entries}})
            b.env[y] = part.copy()
        else:
            yid = "y%d" % k
            ysh = list(part.shape) if r.random() < 0.7 else [1] * part.ndim
            if ysh and r.random() < 0.2:
                ysh = ysh[1:]  # fewer dimensions: broadcast
            vals[yid] = rng.normal(size=ysh)
            b.variables.append({"id": yid, "type": {"dtype": "float64", "shape": ysh}})
            b.env[yid] = vals[yid]
            op = "set_subtensor" if c < 0.75 else "inc_subtensor"
            want = xv.copy()
            if op == "set_subtensor":
                want[tuple(npidx)] = vals[yid]
            else:
                want[tuple(npidx)] += vals[yid]
            y = "s%d" % k
            b.nodes.append({"op": op, "inputs": [x, yid] + extra, "outputs": [y], "attrs": {"index": entries}})
            b.env[y] = want
        outs.append(y)
        x = y if r.random() < 0.8 else x
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": {"inputs": list(vals) + list(ints), "outputs": outs}}}
    if err:
        _, _, bad, done = run_presets(d, g, {**vals, **ints})
        if done or len(bad) != 2 or any(len(e.splitlines()) != 1 or "nodes[%d]" % (len(b.nodes) - 1) not in e
                                        for e in bad):
            return ["%s: want one error line naming the node under each preset, got %s" % (err, bad or "none")]
        return []
    terms = [b.add("sum", [b.add("mul", [o, b.const(np.round(rng.normal(size=b.env[o].shape), 3))])]) for o in outs]
    cost = b.add("add", terms) if len(terms) > 1 else terms[0]
    wrt = list(vals)
    b.nodes.append({"op": "grad", "inputs": [cost] + wrt, "outputs": ["G" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    g["functions"]["main"]["outputs"] = outs + ["G" + w for w in wrt]

    def forward(v):
        env = {**v, **ints}
        for n in b.nodes[:-1]:
            if n["op"] in ("set_subtensor", "inc_subtensor", "subtensor"):
                ex = {"$%d" % i: int(env[q]) for i, q in enumerate(n["inputs"][1 + (n["op"] != "subtensor"):])}
                ix = tuple(slice(*[ex.get(e[key], e[key]) for key in ("start", "stop", "step")])
                           if isinstance(e, dict) else ex.get(e, e) for e in n["attrs"]["index"])
                t = env[n["inputs"][0]]
                if n["op"] == "subtensor":
                    env[n["outputs"][0]] = t[ix]
                else:
                    t = t.copy()
                    if n["op"] == "set_subtensor":
                        t[ix] = env[n["inputs"][1]]
                    else:
                        t[ix] += env[n["inputs"][1]]
                    env[n["outputs"][0]] = t
            else:
                env.update(replay({"variables": b.variables, "nodes": [n]}, env))
        return env
    fd = finite_differences(lambda v: float(forward(v)[cost]), vals, wrt)
    _, _, bad, done = run_presets(d, g, {**vals, **ints})
    for how, od in done.items():
        for o in outs:
            e = close(np.load(os.path.join(od, o + ".npy")), b.env[o], 1e-12)
            if e:
                bad.append("-O %s, %s: %s" % (how, o, e))
        check_grads(bad, how, od, fd, 1e-5, 1e-6)
    return bad


def run_tools(seed, d):
    """A graph of another family (by seed: grad, nn, index, scan, alias,
    mixed, more), with that family's checks, then every tool on it."""
    fams = ["grad", "nn", "index", "scan", "alias", "mixed", "more"]
    fam = fams[seed % len(fams)]
    TOOLS["on"], TOOLS["compare"] = True, fam != "mixed"  # float16 fused: rounds once
    try:
        return ["(%s) %s" % (fam, e) for e in FAMILIES[fam](seed // len(fams), d)]
    finally:
        TOOLS["on"] = False


# ---- the optimizer's rewrites, in the ranges they are for ----

def np_lse(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    y = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return y if keepdims else (y.reshape(()) if axis is None else np.squeeze(y, axis=axis))


def np_softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


class RwBuilder:
    """A graph whose every variable has two values: `naive`, NumPy doing
    what the nodes say in the graph's dtype (an exp that overflows is inf),
    and `exact`, the mathematical value computed stably in float64.
    `fires` holds the variables whose every rewrite must have fired (the
    patterns as the rules know them, their intermediate values read by
    nothing else), with the ops the optimized graph must then hold."""

    def __init__(self, r, rng, dt, override=None):
        self.r, self.rng, self.dt, self.override = r, rng, np.dtype(dt), override
        # gsafe: the gradient is finite where the exact one is; big: an
        # input past exp's overflow
        self.gsafe, self.big, self.tiny, self.kink = True, False, False, False
        self.zero_grad = set()  # inputs whose gradient is an exact cancellation
        self.variables, self.nodes, self.inputs, self.vals = [], [], [], {}
        self.naive, self.exact, self.fires, self.expect, self.extra = {}, {}, {}, {}, []
        self.mag, self.imag, self.pouts, self.wild = {}, {}, [], {}
        self.k = 0
        # the axes of the inputs' types with a null length (known at run
        # time only)
        self.null = ()

    def input(self, shape, regime):
        iid = "x%d" % len(self.inputs)
        big = 1000.0 if self.dt == np.float64 else 120.0
        low = 750.0 if self.dt == np.float64 else 110.0
        rng = self.rng
        if regime == "big":  # past exp's overflow and underflow, with moderate values among them
            v = np.sign(rng.normal(size=shape)) * rng.uniform(low, big, size=shape)
            v = np.where(rng.random(shape) < 0.3, rng.normal(size=shape) * 3, v)
        elif regime == "tiny":  # where 1 + x rounds
            v = rng.normal(size=shape) * (1e-12 if self.dt == np.float64 else 1e-5)
        elif regime == "pos":
            v = rng.uniform(0.1, 5, size=shape)
        else:
            v = rng.normal(size=shape) * 2
        v = np.asarray(v).astype(self.dt)
        if self.override is not None:
            v = self.override[iid]
        self.big |= regime == "big"
        self.tiny |= regime == "tiny"
        typ = [None if d in self.null else k for d, k in enumerate(shape)]
        self.variables.append({"id": iid, "type": {"dtype": self.dt.name, "shape": typ}})
        self.inputs.append(iid)
        self.vals[iid] = v
        self.naive[iid], self.exact[iid], self.fires[iid] = v, v.astype(np.float64), True
        fin = v[np.isfinite(v)]
        self.mag[iid] = self.imag[iid] = float(np.max(np.abs(fin))) if fin.size else 0.0
        return iid

    def const(self, v):
        cid = "c%d" % len(self.variables)
        self.variables.append({"id": cid, "type": {"dtype": v.dtype.name, "shape": list(v.shape)},
                               "constant": {"data": v.ravel().tolist()}})
        self.naive[cid], self.exact[cid], self.fires[cid] = v, v.astype(np.float64), True
        self.mag[cid] = float(np.max(np.abs(v))) if v.size else 0.0
        self.imag[cid] = 0.0
        return cid

    def add(self, op, ins, naive, exact, attrs=None):
        o = append_node(self, op, ins, attrs)
        self.naive[o] = np.asarray(naive).astype(self.dt)
        self.exact[o] = np.asarray(exact, np.float64)
        self.fires[o] = False  # (done() says, for a pattern's result)
        # a subnormal value on the way as written: its digits are few, and
        # libraries round them differently; what follows is not compared
        # with NumPy's values as written
        v = self.naive[o]
        with np.errstate(all="ignore"):
            sub = v.dtype.kind == "f" and bool(np.any((v != 0) & (np.abs(v) < np.finfo(v.dtype).tiny)))
        self.wild[o] = sub or any(self.wild.get(i, False) for i in ins if isinstance(i, str))
        # the largest magnitude on the way (as written): what rounding
        # errors of the values as written scale with
        mags = [self.mag[i] if isinstance(i, str) else abs(float(np.max(np.abs(i["value"])))) for i in ins]
        fin = self.naive[o][np.isfinite(self.naive[o])]
        self.mag[o] = max(mags + [float(np.max(np.abs(fin))) if fin.size else 0.0])
        # and of the inputs alone: what the stable forms' errors scale with
        # (log1p(x) to |x|; -log_softmax(x)[t] to |x|)
        self.imag[o] = max([self.imag[i] for i in ins if isinstance(i, str)] + [0.0])
        return o

    def done(self, o, fired, ops, inter):
        """o ends a pattern over the variables `inter` (its intermediate
        values); fired: its rewrite fires when its inputs' did. One in
        four patterns also returns an intermediate value, which may keep
        the rewrite from firing (not its values from being right)."""
        if inter and self.r.random() < 0.25:
            self.extra.append(self.r.choice(inter))
            fired = False
        self.fires[o] = fired
        self.pouts.append(o)
        if fired and ops:
            self.expect[o] = ops
        return o


ONE = {"value": 1.0}


def log_under(b, x):
    """x is a log, perhaps under neg(neg(..)) (which canonicalize removes
    first): exp(x) becomes the log's operand before stabilize sees it."""
    made = {n["outputs"][0]: n for n in b.nodes}
    while x in made:
        n = made[x]
        if n["op"] == "log":
            return True
        inner = made.get(n["inputs"][0]) if isinstance(n["inputs"][0], str) else None
        if n["op"] != "neg" or not inner or inner["op"] != "neg":
            return False
        x = inner["inputs"][0]
    return False


def rw_pattern(b, x, only=None):
    """One pattern a rewrite looks for (or a near miss), applied to x (or
    to new inputs); its output. only: that pattern (its number)."""
    r, N, E, dt = b.r, b.naive, b.exact, b.dt
    f = b.fires[x]
    xn, xe = N[x], E[x]
    with np.errstate(all="ignore"):
        # an input that overflows the dtype: infinite logits and the like,
        # where NaN and inf are both fair answers (a softmax op gives NaN
        # for a row holding +inf; e / sum(e) as written 0 for its finite
        # entries): nothing to compare
        if not bool(np.isfinite(xe.astype(dt)).all()) or not bool(np.isfinite(xn).all()):
            f = False
            b.wild[x] = True
    nd = xn.ndim
    c = r.randrange(18)
    if only is not None:
        c = only
    if c in (1, 2, 6, 7, 8, 13) and log_under(b, x):
        # exp(log y) goes first (canonicalize), to y (or to a switch that
        # keeps the NaN of a negative y): no exp left for these rules, and
        # no log for the one that made x
        f = False
        b.expect.pop(x, None)
    if c == 0:  # log(1 + x) -> log1p; log(2 + x) stays
        two = r.random() < 0.2
        # (1 + (y + 2)) is y + 3 first (flatten_add_mul, collect_constants)
        f = f and not any(n["op"] == "add" and n["outputs"][0] == x for n in b.nodes)
        k = 2.0 if two else 1.0
        ins = [x, {"value": k}] if r.random() < 0.5 else [{"value": k}, x]
        a = b.add("add", ins, xn + dt.type(k), xe + k)
        return b.done(b.add("log", [a], np.log(N[a]), np.log(xe + 2) if two else np.log1p(xe)),
                      f and not two, [] if two else ["log1p|softplus"], [a])  # (of an exp: softplus)
    if c == 1:  # exp(x) - 1 -> expm1
        e = b.add("exp", [x], np.exp(xn), np.exp(xe))
        return b.done(b.add("sub", [e, ONE], N[e] - dt.type(1), np.expm1(xe)), f, ["expm1"], [e])
    if c == 2:  # log(1 + exp x), log1p(exp x) -> softplus
        e = b.add("exp", [x], np.exp(xn), np.exp(xe))
        if r.random() < 0.5:
            return b.done(b.add("log1p", [e], np.log1p(N[e]), np.logaddexp(0, xe)), f, ["softplus"], [e])
        a = b.add("add", [ONE, e], dt.type(1) + N[e], 1 + E[e])
        return b.done(b.add("log", [a], np.log(N[a]), np.logaddexp(0, xe)), f, ["softplus"], [e, a])
    if c == 3:  # log(sigmoid x) -> -softplus(-x)
        s = b.add("sigmoid", [x], np_sigmoid(xn), np_sigmoid(xe))
        return b.done(b.add("log", [s], np.log(N[s]), -np.logaddexp(0, -xe)), f, ["softplus"], [s])
    if c == 4:  # log(1 - sigmoid x) -> -softplus(x)
        s = b.add("sigmoid", [x], np_sigmoid(xn), np_sigmoid(xe))
        m = b.add("sub", [ONE, s], dt.type(1) - N[s], np_sigmoid(-xe))
        return b.done(b.add("log", [m], np.log(N[m]), -np.logaddexp(0, xe)), f, ["softplus"], [s, m])
    if c == 5 and nd:  # log(softmax x) -> log_softmax
        ax = r.randrange(-nd, nd)
        s = b.add("softmax", [x], np_softmax(xn, ax), np_softmax(xe, ax), {"axis": ax})
        return b.done(b.add("log", [s], np.log(N[s]), xe - np_lse(xe, ax, True)), f, ["log_softmax"], [s])
    if c == 6 and nd:  # log(sum(exp x)) -> logsumexp
        ax, kd = r.choice([None] + list(range(nd))), r.random() < 0.5
        e = b.add("exp", [x], np.exp(xn), np.exp(xe))
        s = b.add("sum", [e], np.sum(N[e], axis=ax, keepdims=kd), np.sum(E[e], axis=ax, keepdims=kd),
                  {"axis": ax, "keepdims": kd})
        return b.done(b.add("log", [s], np.log(N[s]), np_lse(xe, ax, kd)), f, ["logsumexp"], [e, s])
    if c == 7 and nd:  # exp(x) / sum(exp x, axis, keepdims) -> softmax; over two axes, exp(x - logsumexp)
        ax = r.randrange(nd)
        f = f and np.isfinite(xe).all()  # (an infinite logit: NaN, or 0 for the others)
        e = b.add("exp", [x], np.exp(xn), np.exp(xe))
        t = r.random()
        if t < 0.15 and nd >= 2:  # two axes kept, or every axis (kept, or summed to a scalar)
            k = r.randrange(3)
            axes, kd = [[0, nd - 1], None, None][k], k < 2
            sa = tuple(axes) if axes else None
            s = b.add("sum", [e], np.sum(N[e], axis=sa, keepdims=kd), np.sum(E[e], axis=sa, keepdims=kd),
                      {"axis": axes, "keepdims": kd})
            ex = np.exp(xe - np.max(xe, axis=sa, keepdims=True))
            return b.done(b.add("true_div", [e, s], N[e] / N[s], ex / np.sum(ex, axis=sa, keepdims=True)),
                          f, ["logsumexp"], [e, s])
        if t < 0.5 and nd >= 2:  # Theano's e.sum(axis).dimshuffle(.., 'x', ..), or expand_dims
            s = b.add("sum", [e], np.sum(N[e], axis=ax), np.sum(E[e], axis=ax), {"axis": ax, "keepdims": False})
            if r.random() < 0.5:
                order = list(range(nd - 1))
                order.insert(ax, "x")
                s = b.add("dimshuffle", [s], np.expand_dims(N[s], ax), np.expand_dims(E[s], ax), {"order": order})
            else:
                s = b.add("expand_dims", [s], np.expand_dims(N[s], ax), np.expand_dims(E[s], ax), {"axis": ax})
        else:
            s = b.add("sum", [e], np.sum(N[e], axis=ax, keepdims=True), np.sum(E[e], axis=ax, keepdims=True),
                      {"axis": ax, "keepdims": True})
        return b.done(b.add("true_div", [e, s], N[e] / N[s], np_softmax(xe, ax)), f, ["softmax"], [e, s])
    if c == 8:  # log(exp a + exp b) -> logaddexp form
        y = b.input(xn.shape, r.choice(["big", "moderate"]))
        ea = b.add("exp", [x], np.exp(xn), np.exp(xe))
        eb = b.add("exp", [y], np.exp(N[y]), np.exp(E[y]))
        s = b.add("add", [ea, eb], N[ea] + N[eb], E[ea] + E[eb])
        return b.done(b.add("log", [s], np.log(N[s]), np.logaddexp(xe, E[y])), f, ["softplus"], [ea, s])
    if c == 9:  # x * x -> sqr; pow(x, 2) -> sqr; pow(x, 0.5) -> sqrt; pow(x, 3) stays
        t = r.randrange(4)
        if t == 0:
            return b.done(b.add("mul", [x, x], xn * xn, xe * xe), f, ["sqr"], [])
        k = [2.0, 0.5, 3.0][t - 1]
        if k == 0.5:
            b.kink = True
            b.gsafe &= bool(np.all(xn != 0))  # (sqrt' is infinite at an underflowed 0)
            x = b.add("abs", [x], np.abs(xn), np.abs(xe))
            xn, xe = N[x], E[x]
        return b.done(b.add("pow", [x, {"value": k}], np.power(xn, dt.type(k)), np.power(xe, k)),
                      f and k != 3, {2.0: ["sqr"], 0.5: ["sqrt"], 3.0: []}[k], [])
    if c == 10 and nd:  # categorical_crossentropy(softmax x, t) -> -sum(t * log_softmax x) or -log_softmax(x)[t]
        if nd != 2:
            shp = b.const(np.array([-1, xn.shape[-1]], np.int64))
            x = b.add("reshape", [x, shp], xn.reshape(-1, xn.shape[-1]), xe.reshape(-1, xe.shape[-1]))
            xn, xe = N[x], E[x]
        s = b.add("softmax", [x], np_softmax(xn, -1), np_softmax(xe, -1), {"axis": -1})
        k = xn.shape[-1]
        idx = b.rng.integers(0, k, size=xn.shape[:-1])
        picked = np.take_along_axis(xe, idx[..., None], -1)[..., 0]
        if r.random() < 0.5:
            hot = np.eye(k)[idx]
            t = b.const(hot.astype(dt))
            naive, ops = -np.sum(hot.astype(dt) * np.log(N[s]), axis=-1), ["log_softmax"]
        else:
            t = b.const(idx.astype(np.int64))
            naive, ops = -np.log(np.take_along_axis(N[s], idx[..., None], -1)[..., 0]), ["log_softmax"]
        return b.done(b.add("categorical_crossentropy", [s, t], naive, np_lse(xe, -1, False) - picked), f, ops, [s])
    if c == 11:  # alpha * dot(A, B) + beta * Z -> gemm; dot(A, v) + z -> gemv; Z + alpha * outer -> ger
        m, kk, n = r.randint(1, 4), r.randint(1, 4), r.randint(1, 4)
        t = r.randrange(3)
        if t == 2:
            u, v = b.input([m], "moderate"), b.input([n], "moderate")
            p = b.add("outer", [u, v], np.outer(N[u], N[v]), np.outer(E[u], E[v]))
            Z, ops = b.input([m, n], "moderate"), ["ger"]
        else:
            A, B = b.input([m, kk], "moderate"), b.input([kk, n] if t == 0 else [kk], "moderate")
            p = b.add("dot", [A, B], np.dot(N[A], N[B]), np.dot(E[A], E[B]))
            Z, ops = b.input([m, n] if t == 0 else [m], "moderate"), ["gemm" if t == 0 else "gemv"]
        alpha = r.choice([None, 0.5, -2.0])
        if alpha is not None:
            p = b.add("mul", [p, {"value": alpha}] if r.random() < 0.5 else [{"value": alpha}, p],
                      N[p] * dt.type(alpha), E[p] * alpha)
        beta = r.choice([None, None, 3.0]) if t != 2 else None
        z = Z
        if beta is not None:
            z = b.add("mul", [{"value": beta}, Z], N[Z] * dt.type(beta), E[Z] * beta)
        if r.random() < 0.3:
            o = b.add("sub", [z, p], N[z] - N[p], E[z] - E[p])
        else:
            o = b.add("add", [z, p] if r.random() < 0.5 else [p, z], N[z] + N[p], E[z] + E[p])
        return b.done(o, True, ops, [p])
    if c == 12:  # neg(neg x), x * y / y, (x + 2) + 3: values only
        t = r.randrange(3)
        if t == 0:
            a = b.add("neg", [x], -xn, -xe)
            return b.done(b.add("neg", [a], -N[a], -E[a]), f, [], [a])
        if t == 1:
            y = b.input(xn.shape, "pos")
            # y's gradient, g x / y - g x y / y^2, is 0 only by cancelling
            # terms of size |g x / y| (exactly as written, not once
            # rewritten): its rounding says nothing of the rewrites
            b.zero_grad.add(y)
            a = b.add("mul", [x, y], xn * N[y], xe * E[y])
            return b.done(b.add("true_div", [a, y], N[a] / N[y], xe), f, [], [a])
        a = b.add("add", [x, {"value": 2.0}], xn + dt.type(2), xe + 2)
        return b.done(b.add("add", [a, {"value": 3.0}], N[a] + dt.type(3), xe + 5), f, [], [a])
    if c == 13:  # exp(log x) for a positive x; log(exp x)
        if r.random() < 0.5:
            b.kink = True
            b.gsafe &= bool(np.all(xn != 0))  # (log' is infinite at an underflowed 0)
            a = b.add("abs", [x], np.abs(xn), np.abs(xe))
            l = b.add("log", [a], np.log(N[a]), np.log(E[a]))
            return b.done(b.add("exp", [l], np.exp(N[l]), E[a]), f, [], [l])
        e = b.add("exp", [x], np.exp(xn), np.exp(xe))
        return b.done(b.add("log", [e], np.log(N[e]), xe), f, [], [e])
    if c == 14 and nd:  # logsumexp, softmax, log_softmax, sigmoid, softplus as ops
        op = r.choice(["logsumexp", "softmax", "log_softmax", "sigmoid", "softplus"])
        ax = r.randrange(nd)
        if op == "logsumexp":
            return b.done(b.add(op, [x], np_lse(xn, ax, False), np_lse(xe, ax, False), {"axis": ax}), f, [], [])
        if op in ("softmax", "log_softmax"):
            g = (lambda v: np_softmax(v, ax)) if op == "softmax" else (lambda v: v - np_lse(v, ax, True))
            return b.done(b.add(op, [x], g(xn), g(xe), {"axis": ax}), f, [], [])
        g = np_sigmoid if op == "sigmoid" else (lambda v: np.logaddexp(0, v))
        return b.done(b.add(op, [x], g(xn), g(xe)), f, [], [])
    if c == 15:  # 1 - sigmoid(x) -> sigmoid(-x)
        s = b.add("sigmoid", [x], np_sigmoid(xn), np_sigmoid(xe))
        return b.done(b.add("sub", [ONE, s], dt.type(1) - N[s], np_sigmoid(-xe)), f, [], [s])
    if c == 16:  # binary_crossentropy(sigmoid x, t) -> t softplus(-x) + (1 - t) softplus(x)
        t = np.where(b.rng.random(xn.shape) < 0.2, 0.25, b.rng.integers(0, 2, size=xn.shape)).astype(dt)
        tc, t64 = b.const(t), t.astype(np.float64)
        exact = t64 * np.logaddexp(0, -xe) + (1 - t64) * np.logaddexp(0, xe)
        if r.random() < 0.5:
            s = b.add("sigmoid", [x], np_sigmoid(xn), np_sigmoid(xe))
            naive = -(t * np.log(N[s]) + (1 - t) * np.log(1 - N[s]))
            return b.done(b.add("binary_crossentropy", [s, tc], naive, exact), f, ["softplus"], [s])
        # written out, as the 2010 paper's logistic regression:
        # p = 1 / (1 + exp(-x)), -t log p - (1 - t) log(1 - p)
        nx = b.add("neg", [x], -xn, -xe)
        e = b.add("exp", [nx], np.exp(N[nx]), np.exp(E[nx]))
        d = b.add("add", [ONE, e], dt.type(1) + N[e], 1 + E[e])
        s = b.add("true_div", [ONE, d], dt.type(1) / N[d], np_sigmoid(xe))
        ls = b.add("log", [s], np.log(N[s]), -np.logaddexp(0, -xe))
        m = b.add("sub", [ONE, s], dt.type(1) - N[s], np_sigmoid(-xe))
        lm = b.add("log", [m], np.log(N[m]), -np.logaddexp(0, xe))
        a1 = b.add("mul", [tc, ls], t * N[ls], t64 * E[ls])
        omt = b.const((1 - t).astype(dt))
        a2 = b.add("mul", [omt, lm], (1 - t) * N[lm], (1 - t64) * E[lm])
        sm = b.add("add", [a1, a2], N[a1] + N[a2], E[a1] + E[a2])
        return b.done(b.add("neg", [sm], -N[sm], exact), f, ["softplus"], [s, m])
    # a scale between patterns, which keeps a chain's values in range
    return b.done(b.add("mul", [x, {"value": 0.5}], xn * dt.type(0.5), xe * 0.5), f, [], [])


def rw_graph(seed, override=None):
    r = random.Random(seed)
    b = RwBuilder(r, np.random.default_rng(seed), r.choice(["float64", "float32"]), override)
    shape = r.choice([[5], [3, 4], [2, 3, 4], [1, 6]])
    # one graph in five: written-out softmaxes chained over inputs whose
    # batch length (or every length) is null, as in real models, at times
    # 1 at run time (its own stream: the other seeds build what they did)
    q = random.Random(seed * 7919 + 17)
    only = None
    if q.random() < 0.2:
        shape = q.choice([[5], [3, 4], [1, 4], [2, 3, 4], [1, 3, 4]])
        b.null, only = tuple(range(len(shape) if q.random() < 0.3 else 1)), 7
    x = b.input(shape, r.choice(["big", "big", "tiny", "moderate"]))
    outs = []
    for _ in range(r.randint(1, 3) if only is None else q.choice([1, 1, 2])):
        with np.errstate(all="ignore"):
            o = rw_pattern(b, x, only)
        outs.append(o)
        x = o if r.random() < 0.6 else b.input(shape, r.choice(["big", "tiny", "moderate"]))
    outs = list(dict.fromkeys(outs[-2:] + b.extra))
    # the ops that the rewrites of the patterns that the outputs read make
    live, want = set(outs), set()
    for n in reversed(b.nodes):
        if n["outputs"][0] in live:
            live.update(i for i in n["inputs"] if isinstance(i, str))
    for o, ops in b.expect.items():
        if o in live:
            want.update(ops)
    b.expect = want
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": {"inputs": b.inputs, "outputs": outs}}}
    return g, b, outs


def rw_close(got, want, rtol, scale):
    """Where got is not want to rtol * (|want| + scale): NaN and infinities
    where want has them."""
    g, w = got.astype(np.float64), np.asarray(want, np.float64)
    fin = np.isfinite(w)
    bad = ~fin & ~((g == w) | (np.isnan(g) & np.isnan(w)))
    with np.errstate(all="ignore"):
        bad |= fin & ~(np.abs(g - w) <= rtol * (np.abs(w) + scale))
    return bad


def run_rewrite(seed, d):
    """The rewrites' patterns and near misses, chained, in the ranges
    they are for (exp past overflow, 1 + x rounding to 1) and out of them,
    float64 and float32: -O none must give NumPy's values as written
    where those are finite; -O fast_run must give the exact values
    (computed stably) wherever each rewrite of the chain had to fire, and
    then hold the ops it makes (tgc print --optimized); elsewhere it must
    give the values as written or the exact ones. A second function, the
    gradient of a weighted sum of the outputs, must match the central
    differences of the exact values wherever the rewrites fired (or no
    input is past exp's overflow), as written too when nothing
    overflows."""
    g, b, outs = rw_graph(seed)
    rng = np.random.default_rng(seed + 7)
    terms, weights = [], {}
    for o in outs:
        wv = np.round(rng.normal(size=b.naive[o].shape), 3).astype(b.dt)
        weights[o] = wv.astype(np.float64)
        terms.append(b.add("sum", [b.add("mul", [o, b.const(wv)], 0, 0)], 0, 0, {"axis": None, "keepdims": False}))
    cost = b.add("add", terms, 0, 0) if len(terms) > 1 else terms[0]
    wrt = list(b.vals)
    b.nodes.append({"op": "grad", "inputs": [cost] + wrt, "outputs": ["G" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    g["functions"]["grad"] = {"inputs": wrt, "outputs": ["G" + w for w in wrt]}
    p, args, bad, done = run_presets(d, g, b.vals, "-f", "main")
    f64 = b.dt == np.float64
    tight, loose = (1e-9, 1e-6) if f64 else (2e-4, 1e-3)
    for how, od in done.items():
        for o in outs:
            got = np.load(os.path.join(od, o + ".npy"))
            n, e = b.naive[o], b.exact[o].astype(b.dt)
            if got.shape != n.shape or got.dtype != b.dt:
                bad.append("-O %s, %s: %s %s, want %s %s" % (how, o, got.dtype, got.shape, b.dt, n.shape))
                continue
            fin = np.isfinite(n)
            with np.errstate(all="ignore"):
                scale = max([np.max(np.abs(v[np.isfinite(v)])) for v in (n, e) if np.isfinite(v).any()] + [1e-30])
            if how == "none" or not b.fires[o]:
                if b.wild.get(o):
                    continue
                s2 = max(scale, b.mag[o])
                # as written, to the error the values as written have
                # themselves (an ill-conditioned chain, log of a difference
                # that cancelled, amplifies an ulp of exp or log into it)
                with np.errstate(all="ignore"):
                    slack = np.where(np.isfinite(e), 2 * np.abs(n.astype(np.float64) - e), 0)
                    far = ~(np.abs(got.astype(np.float64) - n) <= loose * (np.abs(n) + s2) + slack)
                off = fin & far & rw_close(got, e, loose, s2)
            else:
                fe = e[np.isfinite(e)]
                off = rw_close(got, e, tight, max([b.imag[o], 1e-30] + ([float(np.max(np.abs(fe)))] if fe.size else [])))
            if off.any():
                i = np.flatnonzero(off)[0]
                bad.append("-O %s, %s[%d]: %r, want %r (as written %r)" % (
                    how, o, i, got.flat[i].item(), e.flat[i].item(), n.flat[i].item()))
    if "fast_run" in done and b.expect:
        r = subprocess.run([TGC, "print", p, "-f", "main", "--optimized"], capture_output=True, text=True, timeout=300)
        ops = {m.group(1) for m in re.finditer(r"^[ |>]*([a-z_0-9]+) ", r.stdout, re.M)}
        miss = sorted(w for w in b.expect if not set(w.split("|")) & ops)
        if r.returncode or miss:
            bad.append("fast_run did not make %s: %s" % (", ".join(miss), (r.stderr or r.stdout)[-300:]))
    # the gradient, against central differences of the exact values
    strict = b.gsafe and all(b.fires[o] for o in outs)
    # as written, every value finite and the outputs right: its gradient too
    with np.errstate(all="ignore"):
        clean = not b.big and all(np.isfinite(v).all() for v in b.naive.values()) and not any(
            rw_close(b.naive[o], b.exact[o].astype(b.dt), 1e-6 if f64 else 1e-3, 1.0).any() for o in outs)
    hows = [h for h, on in (("fast_run", strict or clean), ("none", clean)) if on]
    if b.kink and b.tiny:
        hows = []  # abs at a tiny x: the difference would straddle its kink
    with np.errstate(all="ignore"):
        if not all(np.isfinite(b.exact[o].astype(b.dt)).all() for o in outs + b.pouts):
            # a value that overflows (an output, or one that a pattern
            # passes on): its derivative too (inf * 0 along the chain),
            # where differences see none
            hows = []

    def outs_at(v):
        with np.errstate(all="ignore"):
            return rw_graph(seed, v)[1].exact
    fd = {}
    for k in wrt:
        v, gk = b.vals[k], np.zeros(b.vals[k].shape)
        for idx in np.ndindex(v.shape):
            h = 1e-5 * max(abs(float(v[idx])), 1.0)
            hi, lo = dict(b.vals), dict(b.vals)
            hi[k], lo[k] = v.astype(np.float64), v.astype(np.float64)
            hi[k][idx] += h
            lo[k][idx] -= h
            eh, el = outs_at(hi), outs_at(lo)
            # output by output and element by element, before the weighted
            # sum: a large output elsewhere must not swallow the difference
            with np.errstate(all="ignore"):
                gk[idx] = sum(float(np.sum(weights[o] * np.where(eh[o] == el[o], 0.0, eh[o] - el[o])))
                              for o in outs) / (2 * h)
        fd[k] = gk
    rtol, atol = (1e-4, 1e-5) if f64 else (2e-2, 1e-3)
    for how in hows:
        od = os.path.join(d, "grad-" + how)
        rc, err = tgc("run", p, "-f", "grad", "-O", how, "-o", od, *args)
        if rc:
            bad.append("grad -O %s: %s" % (how, err))
            continue
        for k in wrt:
            if k in b.zero_grad:
                continue
            gv, want = np.load(os.path.join(od, "G" + k + ".npy")).astype(np.float64), fd[k]
            with np.errstate(all="ignore"):
                ok = np.isfinite(want.astype(b.dt))
            big = max(1.0, float(np.max(np.abs(want[ok])))) if ok.any() else 1.0
            with np.errstate(all="ignore"):
                off = ok & ~(np.abs(gv - want) <= rtol * np.abs(want) + atol * big)
            if off.any():
                i = np.flatnonzero(off)[0]
                bad.append("grad -O %s, G%s[%d]: %r, want %r" % (how, k, i, gv.flat[i], want.flat[i]))
    return bad


# ---- more: op_from_graph bodies, rop and lop, arctan2, arange, the
# *_like ops, and the random-number ops ----

def ofg_step(b, depth=0):
    """An op_from_graph node over one to three values of b's pool: its body
    is built by grad_step (and, once deep, by ofg_step) from inputs of the
    same values, declared with their static lengths or with null ones; one
    or two body outputs, used once or twice (the same arguments)."""
    r = b.r
    args = [r.choice(b.pool) for _ in range(r.randint(1, 3))]
    inner = Builder(r)
    names = []
    for i, a in enumerate(args):
        pid = "p%d" % i
        shp = list(b.env[a].shape)
        inner.variables.append({"id": pid, "type": {"dtype": "float64",
                                                    "shape": shp if r.random() < 0.6 else [None] * len(shp)}})
        inner.env[pid] = b.env[a]
        inner.pool.append(pid)
        if a in b.raw:
            inner.raw.add(pid)
        names.append(pid)
    grow(inner, lambda b: ofg_step(b, depth + 1) if depth < 1 and r.random() < 0.2 else grad_step(b),
         r.randint(1, 5))
    made = [p for p in inner.pool if p not in names]
    outs = made[-r.randint(1, 2):] if made else [r.choice(names)]
    body = {"variables": inner.variables, "nodes": inner.nodes, "inputs": names, "outputs": outs}
    for _ in range(1 if r.random() < 0.7 else 2):
        add_multi(b, "op_from_graph", args, len(outs), {"body": body, "name": "body%d" % (b.k + 1)})


def more_step(b):
    r = b.r
    c = r.random()
    if c < 0.45:
        grad_step(b)
        return
    if c < 0.7:
        ofg_step(b)
        return
    x = r.choice(b.pool)
    xv = b.env[x]
    fits = [p for p in b.pool if bshape(xv.shape, b.env[p].shape) is not None]
    if c < 0.8:
        # arctan2 away from its cut (first argument 0, second negative)
        # and from the origin, where it has no derivative
        y = r.choice(fits)
        yv = b.env[y]
        if np.min(np.abs(xv) + np.maximum(yv, 0)) > 1e-2:
            b.add("arctan2", [x, y])
    elif c < 0.88:
        y = r.choice(fits)
        if r.random() < 0.5:
            b.add("add", [x, b.add("zeros_like", [y])])
        else:
            b.add("mul", [b.add("ones_like", [y]), x])
    elif xv.ndim:
        n = xv.shape[-1]
        if r.random() < 0.5:
            start, step = r.randint(-3, 3), r.choice([1, 2, -1, 3])
            stop = start + n * step - (step > 0) + (step < 0)  # n elements, the stop not on the grid
            dt = r.choice([None, "int64", "int32", "float64"])
            ins = [b.const(np.int64(start)), b.const(np.int64(stop)), b.const(np.int64(step))]
        else:
            start, step = round(r.uniform(-2, 2), 2), r.choice([0.5, 0.25, -0.5, -0.25])
            stop = start + (n - 0.5) * step
            dt = r.choice([None, "float64"])
            ins = [b.const(np.float64(start)), b.const(np.float64(stop)), b.const(np.float64(step))]
        a = b.add("arange", ins, {"dtype": dt} if dt else None)
        if len(b.env[a]) == n:
            b.add("mul", [x, a])


def philox(ctr, key, sub=0):
    """Philox 4x32-10 (Salmon et al., SC 2011) of the 64-bit counter ctr
    (words 0-1), sub-index sub (word 2) and 64-bit key: four words."""
    M = 0xFFFFFFFF
    c0, c1, c2, c3 = ctr & M, ctr >> 32, sub, 0
    k0, k1 = key & M, key >> 32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M, p1 & M, ((p0 >> 32) ^ c3 ^ k1) & M, p0 & M
        k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
    return c0, c1, c2, c3


def u53(hi, lo):
    return float(((hi << 32) | lo) >> 11) * 2.0 ** -53


M64 = (1 << 64) - 1


def random_ref(op, state, ins, dtype):
    """FORMAT.md's random ops from random.c's description: (new state,
    sample). Uniform and normal: element i from block i // 2, two 53-bit
    uniforms a block (Box-Muller for normal); binomial: a counter value
    per element, its draws two a block along the sub-index; multinomial:
    a counter value per row, each draw the first category whose
    cumulative probability exceeds it (the last takes the rest)."""
    key, ctr = int(state[0]), int(state[1])
    if op == "random_multinomial":
        n, pv = ins
        rows = pv.shape[0] if pv.ndim == 2 else 1
        p2 = pv.reshape(rows, -1).astype(np.float64)
        k = p2.shape[1]
        out = np.zeros((rows, k), np.int64)
        for row in range(rows):
            t = int(n.ravel()[row if n.size > 1 else 0])
            cum = np.cumsum(p2[row])
            for j in range(0, t, 2):
                w = philox((ctr + row) & M64, key, j >> 1)
                for e, u in enumerate((u53(w[0], w[1]), u53(w[2], w[3]))):
                    if j + e < t:
                        hit = [i for i in range(k - 1) if cum[i] > u]
                        out[row, hit[0] if hit else k - 1] += 1
        return np.array([key, (ctr + rows) & M64], np.uint64), out.reshape(pv.shape).astype(dtype)
    size, a, bb = ins
    shape = tuple(int(q) for q in size)
    total = int(np.prod(shape))
    av, bv = np.broadcast_to(a, shape).ravel(), np.broadcast_to(bb, shape).ravel()
    out = np.zeros(total, np.float64)
    if op == "random_binomial":
        for i in range(total):
            cnt, t, p = 0, int(av[i]), float(bv[i])
            for j in range(0, t, 2):
                w = philox((ctr + i) & M64, key, j >> 1)
                cnt += u53(w[0], w[1]) < p
                if j + 1 < t:
                    cnt += u53(w[2], w[3]) < p
            out[i] = cnt
        used = total
    else:
        for i in range(total):
            w = philox((ctr + i // 2) & M64, key)
            u0, u1 = u53(w[0], w[1]), u53(w[2], w[3])
            if op == "random_normal":
                rad = math.sqrt(-2.0 * math.log(1.0 - u0))
                v = rad * (math.sin if i % 2 else math.cos)(2.0 * math.pi * u1)
                out[i] = av[i] + bv[i] * v
            else:
                out[i] = av[i] + (bv[i] - av[i]) * (u1 if i % 2 else u0)
        used = (total + 1) // 2
    return np.array([key, (ctr + used) & M64], np.uint64), out.reshape(shape).astype(dtype)


def run_random_ops(seed, d):
    """One to three random nodes chained through a shared state (key and
    counter at random, the counter at times about to wrap), with a fused
    use of a float sample: two calls against the reference above, the
    .tgf bit-identical to fast_run, and a checkpoint after the first call
    resumed to the second's values."""
    r, rng = random.Random(seed), np.random.default_rng(seed)
    key = r.getrandbits(64)
    ctr = r.choice([r.getrandbits(64), M64 - r.randrange(4), r.randrange(100)])
    b = Builder(r)
    b.variables.append({"id": "rng", "type": {"dtype": "uint64", "shape": [2]},
                        "shared": {"data": [key, ctr]}})
    b.variables.append({"id": "x", "type": {"dtype": "float64", "shape": []}})
    st, nodes, outs, specs = "rng", [], [], []
    for k in range(r.randint(1, 3)):
        op = r.choice(["random_uniform", "random_normal", "random_binomial", "random_multinomial"])
        shape = r.choice([[5], [2, 3], [1], [0], [7], [3, 1]])
        if op == "random_multinomial":
            kk = r.randint(1, 4)
            rows = r.choice([None, 1, 3])
            pv = rng.random((rows or 1, kk)) + 0.05
            pv = np.round(pv / pv.sum(axis=1, keepdims=True), 4)
            pv[:, -1] = np.maximum(0, 1 - pv[:, :-1].sum(axis=1))
            pv = pv if rows else pv[0]
            n = np.array([r.randint(0, 6) for _ in range(rows or 1)], np.int64) if rows and r.random() < 0.5 \
                else np.int64(r.randint(0, 9))
            ins = [n, pv]
            dt = r.choice(["int64", "int32", "float64"])
        else:
            size = np.array(shape, np.int64)
            bshape_ = r.choice([[], shape[-1:], shape])
            if op == "random_binomial":
                a = rng.integers(0, 6, size=bshape_).astype(np.int64)
                p = np.round(rng.random(size=r.choice([[], shape])), 3)
                ins = [size, a, p]
                dt = r.choice(["int64", "int32", "float64", "uint8"])
            else:
                a = np.round(rng.normal(size=bshape_), 3)
                c = np.round(np.abs(rng.normal(size=r.choice([[], shape]))) + (a.max() if a.size else 0) + 0.5, 3) \
                    if op == "random_uniform" else np.round(np.abs(rng.normal(size=r.choice([[], shape]))), 3)
                ins = [size, a, c]
                dt = r.choice(["float64", "float32"])
        ids = [b.const(v) for v in ins]
        attrs = {"dtype": dt} if (dt != "int64" or r.random() < 0.5) else {}
        st2, s = "st%d" % k, "s%d" % k
        nodes.append({"op": op, "inputs": [st] + ids, "outputs": [st2, s], "attrs": attrs})
        specs.append((op, ins, dt, s))
        outs.append(s)
        if dt in ("float64", "float32") and r.random() < 0.7:
            nodes.append({"op": "add", "inputs": [s, "x"], "outputs": ["f%d" % k]})
            nodes.append({"op": "mul", "inputs": ["f%d" % k, {"value": 2.0}], "outputs": ["g%d" % k]})
            outs.append("g%d" % k)
        st = st2
    outs.append(st)
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": nodes,
         "functions": {"main": {"inputs": ["x"], "outputs": outs, "updates": {"rng": st}}}}
    xv = np.float64(round(r.uniform(-2, 2), 3))
    vals = {"x": np.asarray(xv)}
    state, want = np.array([key, ctr], np.uint64), {}
    for call in range(2):
        for k, (op, ins, dt, s) in enumerate(specs):
            state, want[s] = random_ref(op, state, ins, dt)
            if "g%d" % k in outs:
                want["g%d" % k] = (want[s].astype(np.float64) + xv) * 2.0
        want[st] = state
    p, args, bad, done = run_presets(d, g, vals, "--calls", "2")
    for how, od in done.items():
        for o in outs:
            gv, wv = np.load(os.path.join(od, o + ".npy")), want[o]
            normal = [k for k, q in enumerate(specs) if q[0] == "random_normal"]
            exact = o not in ["s%d" % k for k in normal] + ["g%d" % k for k in normal]
            if gv.dtype != wv.dtype or gv.shape != wv.shape or \
                    (exact and gv.tobytes() != wv.tobytes()) or \
                    (not exact and not np.allclose(gv, wv, rtol=1e-13, atol=1e-13)):
                bad.append("-O %s: %s after two calls is %r, want %r" % (how, o, gv.ravel()[:6], wv.ravel()[:6]))
    if bad:
        return bad
    err = tgc_steps(args, [("compile", p, "-o", d + "/c0.tgf"),
                           ("run", d + "/c0.tgf", "-o", d + "/tgf", "--calls", "2"),
                           ("run", d + "/c0.tgf", "--calls", "1", "--save-state", d + "/c1.tgf"),
                           ("run", d + "/c1.tgf", "-o", d + "/resumed", "--calls", "1")])
    if err:
        return [err]
    for o in outs:
        a = np.load(os.path.join(d, "fast_run", o + ".npy")).tobytes()
        for how in ("tgf", "resumed"):
            if np.load(os.path.join(d, how, o + ".npy")).tobytes() != a:
                bad.append("%s: %s differs from fast_run's run of the JSON" % (how, o))
    return bad


def run_more(seed, d):
    """Every fifth seed: the random ops. Otherwise the grad family's
    inputs, grown by grad_step, op_from_graph bodies, arctan2, arange and
    the *_like ops; then the gradient of a weighted sum, the rop of one
    value along constant tangents and its lop against a constant
    cotangent: the values against NumPy, the gradient and the lop against
    finite differences, the rop against the central difference along the
    tangents; and the .tgf of the graph bit-identical to fast_run."""
    if seed % 5 == 4:
        return run_random_ops(seed, d)
    r, rng = random.Random(seed), np.random.default_rng(seed)
    b = Builder(r)
    ins = [("a", [3, 4]), ("b", r.choice([[4], [1, 4], [3, 1], [], [3, 4]]))]
    vals = add_inputs(b, rng, ins)
    grow(b, more_step, r.randint(3, 12))
    made = [p for p in b.pool if p.startswith("v")]
    if not made:
        return []
    outs = made[-3:]
    terms, cost = weighted_cost(b, rng, outs)
    if not np.isfinite(float(b.env[cost])):
        return []
    f = r.choice(made)
    fv = b.env[f]
    wrt = list(vals)
    tang = {w: np.round(rng.normal(size=vals[w].shape), 3) for w in wrt}
    u = np.round(rng.normal(size=fv.shape), 3)
    b.nodes.append({"op": "grad", "inputs": [cost] + wrt, "outputs": ["G" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    b.nodes.append({"op": "rop", "inputs": [f] + wrt + [b.const(tang[w]) for w in wrt], "outputs": ["R"],
                    "attrs": {"disconnected": "ignore"}})
    b.nodes.append({"op": "lop", "inputs": [f] + wrt + [b.const(u)], "outputs": ["L" + w for w in wrt],
                    "attrs": {"disconnected": "ignore"}})
    outputs = [cost, f] + ["G" + w for w in wrt] + ["R"] + ["L" + w for w in wrt]
    g = {"format": "tg-graph", "version": 1, "variables": b.variables, "nodes": b.nodes,
         "functions": {"main": {"inputs": wrt, "outputs": outputs}}}
    big = max(1.0, float(np.max(np.abs(fv))) if fv.size else 1.0)
    atol = 1e-5 + 1e-8 * (sum(abs(float(b.env[t])) for t in terms) + big)
    # The differences with steps of 1e-6 and 1e-7: where the functions
    # curve fast (cos of expm1 of ...), the larger step's truncation error
    # passes the tolerance, and agreeing with either is enough.
    steps = (1e-6, 1e-7)
    fd = [finite_differences(lambda v: float(replay(g, v)[cost]), vals, wrt, h) for h in steps]
    fdl = [finite_differences(lambda v: float(np.sum(u * replay(g, v)[f])), vals, wrt, h) for h in steps]
    fdr = []
    for h in steps:
        side = [replay(g, {w: vals[w] + sgn * h * tang[w] for w in wrt})[f] for sgn in (1, -1)]
        fdr.append((side[0] - side[1]) / (2 * h))

    def near(got, wants):
        return any(got.shape == w.shape and np.allclose(got, w, rtol=1e-4, atol=atol) for w in wants)
    p, args, bad, done = run_presets(d, g, vals)
    for how, od in done.items():
        for o, want in ((cost, b.env[cost]), (f, fv)):
            gv = np.load(os.path.join(od, o + ".npy"))
            if gv.shape != want.shape or not np.allclose(gv, want, rtol=1e-9, atol=1e-12):
                bad.append("-O %s: %s differs from NumPy" % (how, o))
        for w in wrt:
            gv = np.load(os.path.join(od, "G" + w + ".npy"))
            if not near(gv, [q[w] for q in fd]):
                bad.append("-O %s: gradient of %s differs from finite differences by up to %g" %
                           (how, w, np.max(np.abs(gv - fd[0][w])) if gv.shape == fd[0][w].shape else np.inf))
        rv = np.load(os.path.join(od, "R.npy"))
        if not near(rv, fdr):
            bad.append("-O %s: rop differs from the central difference by up to %g" %
                       (how, np.max(np.abs(rv - fdr[0])) if rv.shape == fdr[0].shape else np.inf))
        for w in wrt:
            lv = np.load(os.path.join(od, "L" + w + ".npy"))
            if not near(lv, [q[w] for q in fdl]):
                bad.append("-O %s: lop of %s differs from finite differences by up to %g" %
                           (how, w, np.max(np.abs(lv - fdl[0][w])) if lv.shape == fdl[0][w].shape else np.inf))
    if "fast_run" in done:
        err = tgc_steps(args, [("compile", p, "-o", d + "/g.tgf"), ("run", d + "/g.tgf", "-o", d + "/tgf")])
        if err:
            return bad + [err]
        for o in outputs:
            if np.load(os.path.join(d, "tgf", o + ".npy")).tobytes() != \
                    np.load(os.path.join(d, "fast_run", o + ".npy")).tobytes():
                bad.append("the .tgf's %s differs from fast_run's run of the JSON" % o)
    return bad


# ---- shapes: lengths known only at run time ----

def live_graph(variables, nodes, outs):
    """The variables and nodes that the ids outs need, in their order."""
    need, keep = set(outs), []
    for n in reversed(nodes):
        if set(n["outputs"]) & need:
            keep.append(n)
            need |= {i for i in n["inputs"] if isinstance(i, str)}
    return [v for v in variables if v["id"] in need], keep[::-1]


def add_multi(b, op, ins, nout, attrs):
    """A node with nout outputs appended to b; its outputs join the pool."""
    b.k += 1
    node = {"op": op, "inputs": ins, "outputs": ["v%d_%d" % (b.k, i) for i in range(nout)], "attrs": attrs}
    b.nodes.append(node)
    b.env = replay_one(b, node)
    for o in node["outputs"]:
        v = b.env[o]
        if v.dtype == np.float64 and v.size and np.all(np.isfinite(v)) and np.max(np.abs(v)) < 1e6:
            b.pool.append(o)


def shape_step(b):
    """The shape ops whose checks depend on run-time lengths: dimshuffle
    and squeeze dropping a length-1 axis, reshape to a constant shape with
    -1, join, stack, split by constant sizes, alloc, expand_dims,
    flatten and repeat."""
    r = b.r
    x = r.choice(b.pool)
    xv, c = b.env[x], r.random()
    ones = [i for i in range(xv.ndim) if xv.shape[i] == 1]
    if c < 0.1 and xv.ndim and "k0" in b.env:
        # indices given at run time: an index, a slice bound, take's
        # vector (the build's values are valid, the run's at random)
        t = r.random()
        if t < 0.6:
            e = r.choice(["$0", {"start": "$0", "stop": None}, {"start": None, "stop": "$0"},
                          {"start": None, "stop": None, "step": -1}])
            b.add("subtensor", [x, "k0"] if "$0" in json.dumps(e) else [x], {"index": [e]})
        else:
            b.add("take", [x, "i0"], {"axis": r.randrange(xv.ndim)})
        return
    if c < 0.15 and ones:
        drop = r.choice(ones)
        order = [i for i in range(xv.ndim) if i != drop]
        r.shuffle(order)
        if r.random() < 0.5:
            order.insert(r.randrange(len(order) + 1), "x")
        b.add("dimshuffle", [x], {"order": order})
    elif c < 0.25 and ones:
        b.add("squeeze", [x], {"axis": r.choice(ones)})
    elif c < 0.4 and xv.size:
        shp = r.choice([[-1], [xv.shape[0], -1] if xv.ndim else [1, -1], [-1, 2] if xv.size % 2 == 0 else [-1, 1],
                        [1, -1, 1]])
        b.add("reshape", [x, b.const(np.array(shp, np.int64))])
    elif c < 0.55 and xv.ndim:
        y = r.choice([p for p in b.pool if b.env[p].ndim == xv.ndim])
        if r.random() < 0.5:
            b.add("join", [x, y], {"axis": r.randrange(xv.ndim)})
        else:
            b.add("stack", [x, y], {"axis": r.randrange(xv.ndim + 1)})
    elif c < 0.65 and xv.ndim:
        ax = r.randrange(xv.ndim)
        n = xv.shape[ax]
        if n >= 2:
            k = r.randint(1, n - 1)
            add_multi(b, "split", [x, b.const(np.array([k, n - k], np.int64))], 2, {"axis": ax, "n": 2})
    elif c < 0.75:
        target = [r.randint(1, 3)] + [q if q != 1 or r.random() < 0.5 else r.randint(2, 3) for q in xv.shape]
        b.add("alloc", [x] + [b.const(np.int64(q)) for q in target])
    elif c < 0.85:
        if xv.ndim and r.random() < 0.5:
            b.add("flatten", [x], {"ndim": 1})
        else:
            b.add("expand_dims", [x], {"axis": r.randrange(xv.ndim + 1)})
    elif xv.ndim:
        b.add("repeat", [x, b.const(np.int64(r.randint(1, 3)))], {"axis": r.choice([None] + list(range(xv.ndim)))})


def run_shapes(seed, d):
    """The grad family's ops and the shape ops (shape_step) over inputs
    whose lengths are null (some static), built on one set of lengths and
    run on another (a length kept, 0, 1 or another): where NumPy raises for the run's lengths, both
    presets must stop with one run-time error (exit 1), the optimizer
    keeping every check; where it does not, the values and the gradient
    of a sum of squares must be NumPy's and the finite differences'
    (those of a point where the function is not smooth, which two step
    sizes disagree on, are skipped)."""
    r, rng = random.Random(seed), np.random.default_rng(seed)
    b = Builder(r)
    decl, lens = {}, {}
    for i in range(r.randint(2, 4)):
        iid = "x%d" % i
        nd = r.choice([0, 1, 1, 2, 2])
        sh = [r.choice([1, 2, 3]) for _ in range(nd)]
        dl = [q if r.random() < 0.25 else None for q in sh]
        decl[iid], lens[iid] = dl, sh
        b.variables.append({"id": iid, "type": {"dtype": "float64", "shape": dl}})
        b.env[iid] = np.asarray(np.round(rng.normal(size=sh) * 1.2, 4))
        b.pool.append(iid)
        b.raw.add(iid)
    ins = list(decl)
    b.variables.append({"id": "k0", "type": {"dtype": "int64", "shape": []}})
    b.variables.append({"id": "i0", "type": {"dtype": "int64", "shape": [2]}})
    b.env["k0"], b.env["i0"] = np.asarray(np.int64(0)), np.zeros(2, np.int64)
    grow(b, lambda b: (shape_step if r.random() < 0.4 else grad_step)(b), r.randint(3, 14))
    made = [p for p in b.pool if p.startswith("v")]
    if not made:
        return []
    outs = made[-3:]
    terms = [b.add("sum", [b.add("sqr", [o])]) for o in outs]
    cost = b.add("add", terms) if len(terms) > 1 else terms[0]
    variables, nodes = live_graph(b.variables, b.nodes, [cost])
    used = [i for i in ins if any(v["id"] == i for v in variables)]
    iused = [i for i in ("k0", "i0") if any(v["id"] == i for v in variables)]
    if not used:
        return []
    nodes.append({"op": "grad", "inputs": [cost] + used, "outputs": ["G" + w for w in used],
                  "attrs": {"disconnected": "ignore"}})
    g = {"format": "tg-graph", "version": 1, "variables": variables, "nodes": nodes,
         "functions": {"main": {"inputs": used + iused, "outputs": outs + [cost] + ["G" + w for w in used]}}}
    # the run's lengths: each null length kept, 1, or 1 to 4
    vals = {}
    for i in used:
        sh = [q if dl is not None or r.random() < 0.5 else r.choice([0, 1, 1, 1, 2, 3, 4])
              for q, dl in zip(lens[i], decl[i])]
        vals[i] = np.asarray(np.round(rng.normal(size=sh) * 1.2, 4))
    if "k0" in iused:
        vals["k0"] = np.asarray(np.int64(r.randint(-4, 4)))
    if "i0" in iused:
        vals["i0"] = np.array([r.randint(-4, 4) for _ in range(2)], np.int64)
    try:
        with np.errstate(all="ignore"):
            want = replay(g, vals)
        fails = None
    except (ValueError, IndexError) as e:
        fails = str(e)
    if fails is not None:
        p = os.path.join(d, "g.json")
        with open(p, "w") as f:
            json.dump(g, f)
        args, bad = save_inputs(d, vals), []
        for how in ("none", "fast_run"):
            rc, err = tgc("run", p, "-O", how, "-o", os.path.join(d, how), *args)
            # one line naming the node: its place in the file, or what it stands for
            if rc != 1 or err.count("\n") or not re.search(r"call 1: (nodes\[\d+\] )?\([a-z_0-9]+ .*-> ", err):
                bad.append("-O %s: NumPy raises (%s) but tgc exits %d: %r" % (how, fails, rc, err[:200]))
        return bad
    p, args, bad, done = run_presets(d, g, vals)
    if any(not np.all(np.isfinite(want[o])) for o in outs + [cost]):
        used = []  # values only (a mean over no element is NaN, as NumPy's)
    if any(n["op"] == "std" and np.min(want[n["outputs"][0]], initial=1) < 1e-3 for n in nodes):
        used = []  # a std over equal values: Theano's NaN gradient (the generator's other rule)
    fd = finite_differences(lambda v: float(replay(g, v)[cost]), vals, used)
    # the same differences with a step ten times smaller
    fd2 = finite_differences(lambda v: float(replay(g, v)[cost]), vals, used, 1e-7)
    smooth = {w: np.allclose(fd[w], fd2[w], rtol=1e-3, atol=1e-4) for w in used}
    atol = 1e-5 + 1e-8 * abs(float(want[cost]))
    for how, od in done.items():
        for o in outs + [cost]:
            gv = np.load(os.path.join(od, o + ".npy"))
            if gv.shape != want[o].shape or not np.allclose(gv, want[o], rtol=1e-9, atol=1e-12, equal_nan=True):
                bad.append("-O %s: %s %s differs from NumPy's %s" % (how, o, gv.shape, want[o].shape))
        check_grads(bad, how, od, {w: fd[w] for w in used if smooth[w]}, 1e-4, atol)
    return bad


FAMILIES = {"mixed": run_mixed, "grad": run_grad, "scan": run_scan, "alias": run_alias, "sgd": run_sgd, "nn": run_nn,
            "conv": run_conv_big, "weak": run_weak, "index": run_index,
            "tools": run_tools, "hess": run_hess, "rewrite": run_rewrite, "more": run_more,
            "shapes": run_shapes}


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
