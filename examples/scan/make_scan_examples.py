"""Writes the examples of Theano's scan documentation as tg graph files
(examples/scan/*.json). Each file says in its `meta` which example of the
documentation it is. Run from anywhere: python3 make_scan_examples.py."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def T(dtype, *shape):
    return {"dtype": dtype, "shape": list(shape)}


def var(id, type, **kw):
    v = {"id": id, "type": type}
    v.update(kw)
    return v


def node(op, inputs, outputs, attrs=None, name=None):
    n = {"op": op, "inputs": inputs, "outputs": outputs}
    if attrs is not None:
        n["attrs"] = attrs
    if name:
        n["name"] = name
    return n


def body(variables, nodes, inputs, outputs):
    return {"variables": variables, "nodes": nodes, "inputs": inputs, "outputs": outputs}


def scan(inputs, outputs, b, *, seq_taps=(), out_taps=(), n_nonrec=0, n_ns=0,
         has_n_steps=False, has_until=False, go_backwards=False, name="scan"):
    attrs = {"body": b, "n_sequences": len(seq_taps), "sequence_taps": [list(t) for t in seq_taps],
             "n_recurrent": len(out_taps), "output_taps": [list(t) for t in out_taps],
             "n_nonrecurrent": n_nonrec, "n_non_sequences": n_ns, "has_n_steps": has_n_steps,
             "has_until": has_until, "go_backwards": go_backwards, "truncate_gradient": -1,
             "name": name}
    return node("scan", inputs, outputs, attrs, name=name)


def graph(name, doc, variables, nodes, functions):
    return {"format": "tg-graph", "version": 1, "name": name,
            "meta": {"source": "Theano documentation, scan - Looping in Theano: " + doc},
            "variables": variables, "nodes": nodes, "functions": functions}


LAST = {"index": [-1]}
ex = {}

# A**k: a recurrent output (taps [-1], per-step init) and a non-sequence.
ex["power"] = graph(
    "A**k by repeated multiplication", "Simple loop with accumulation: Computing A^k",
    [var("A", T("float64", None)), var("k", T("int32"))],
    [node("ones_like", ["A"], ["ones"]),
     scan(["k", "ones", "A"], ["result"],
          body([var("prior_result", T("float64", None)), var("A_", T("float64", None))],
               [node("mul", ["prior_result", "A_"], ["step"])],
               ["prior_result", "A_"], ["step"]),
          out_taps=[[-1]], n_ns=1, has_n_steps=True, name="power"),
     node("subtensor", ["result"], ["final_result"], LAST)],
    {"power": {"inputs": ["A", "k"], "outputs": ["final_result"]}})

# The polynomial: two sequences of uneven lengths (the coefficients and a
# long arange: scan takes the shortest), no recurrent output (a map), x a
# non-sequence.
ex["polynomial"] = graph(
    "a polynomial from its coefficients", "Iterating over the first dimension of a tensor: Calculating a polynomial",
    [var("coefficients", T("float32", None)), var("x", T("float32"))],
    [node("arange", [{"value": 0}, {"value": 10000}, {"value": 1}], ["powers"], name="max_coefficients_supported"),
     scan(["coefficients", "powers", "x"], ["components"],
          body([var("coefficient", T("float32")), var("power", T("int64")), var("free_variable", T("float32"))],
               [node("pow", ["free_variable", "power"], ["xp"]),
                node("mul", ["coefficient", "xp"], ["term"])],
               ["coefficient", "power", "free_variable"], ["term"]),
          seq_taps=[[0], [0]], n_nonrec=1, n_ns=1, name="components"),
     node("sum", ["components"], ["polynomial"], {"axis": None})],
    {"calculate_polynomial": {"inputs": ["coefficients", "x"], "outputs": ["polynomial"]}})

# Triangular numbers: accumulation into a scalar over arange(up_to).
ex["triangular"] = graph(
    "triangular numbers by accumulation", "Simple accumulation into a scalar, ditching lambda",
    [var("up_to", T("int32"))],
    [node("arange", [{"value": 0}, "up_to", {"value": 1}], ["seq"]),
     scan(["seq", {"value": {"dtype": "int64", "data": 0}}], ["scan_result"],
          body([var("arange_val", T("int64")), var("sum_to_date", T("int64"))],
               [node("add", ["sum_to_date", "arange_val"], ["acc"])],
               ["arange_val", "sum_to_date"], ["acc"]),
          seq_taps=[[0]], out_taps=[[-1]], name="accumulate_by_adding")],
    {"triangular_sequence": {"inputs": ["up_to"], "outputs": ["scan_result"]}})

# Set a value at a position: new variables inside the body, dynamic indices.
ex["set_value"] = graph(
    "a value set at each position", "Another simple example",
    [var("location", T("int32", None, 2)), var("values", T("float32", None)),
     var("output_model", T("float32", None, None))],
    [scan(["location", "values", "output_model"], ["result"],
          body([var("a_location", T("int32", 2)), var("a_value", T("float32")),
                var("model", T("float32", None, None))],
               [node("zeros_like", ["model"], ["zeros"]),
                node("subtensor", ["a_location"], ["row"], {"index": [0]}),
                node("subtensor", ["a_location"], ["col"], {"index": [1]}),
                node("set_subtensor", ["zeros", "a_value", "row", "col"], ["placed"], {"index": ["$0", "$1"]})],
               ["a_location", "a_value", "model"], ["placed"]),
          seq_taps=[[0], [0]], n_nonrec=1, n_ns=1, name="set_value_at_position")],
    {"assign_values_at_positions": {"inputs": ["location", "values", "output_model"], "outputs": ["result"]}})

# Gibbs sampling: random numbers inside the body. The random state is a
# recurrent output (threaded through the steps); its last row is the
# state's update, as Theano's scan returns it in `updates`.
W_values = [[0.5, -1.0, 0.25], [1.5, 0.75, -0.5], [-0.25, 1.0, 2.0], [0.1, -0.6, 0.9]]
ex["gibbs"] = graph(
    "a Gibbs chain of length 10", "Using shared variables - Gibbs sampling (shared variables as non-sequences)",
    [var("sample", T("float64", 4)),
     var("W", T("float64", 4, 3), shared={"data": W_values}),
     var("bvis", T("float64", 4), shared={"data": [0.1, -0.2, 0.3, -0.4]}),
     var("bhid", T("float64", 3), shared={"data": [-0.5, 0.25, 0.0]}),
     var("trng", T("uint64", 2), shared={"data": [1234, 0]}, name="RandomStreams(1234)")],
    [scan([{"value": 10}, "trng", "sample", "W", "bvis", "bhid"], ["rng_states", "values"],
          body([var("rng", T("uint64", 2)), var("vsample", T("float64", 4)),
                var("W_", T("float64", 4, 3)), var("bvis_", T("float64", 4)), var("bhid_", T("float64", 3))],
               [node("dot", ["vsample", "W_"], ["vW"]),
                node("add", ["vW", "bhid_"], ["hpre"]),
                node("sigmoid", ["hpre"], ["hmean"]),
                node("shape", ["hmean"], ["hshape"]),
                node("random_binomial", ["rng", "hshape", {"value": 1}, "hmean"], ["rng1", "hsample"]),
                node("transpose", ["W_"], ["WT"]),
                node("dot", ["hsample", "WT"], ["hW"]),
                node("add", ["hW", "bvis_"], ["vpre"]),
                node("sigmoid", ["vpre"], ["vmean"]),
                node("shape", ["vsample"], ["vshape"]),
                node("random_binomial", ["rng1", "vshape", {"value": 1}, "vmean"], ["rng2", "vnext"],
                     {"dtype": "float64"})],
               ["rng", "vsample", "W_", "bvis_", "bhid_"], ["rng2", "vnext"]),
          out_taps=[[-1], [-1]], n_ns=3, has_n_steps=True, name="OneStep"),
     node("subtensor", ["values"], ["last_sample"], LAST),
     node("subtensor", ["rng_states"], ["trng_next"], LAST)],
    {"gibbs10": {"inputs": ["sample"], "outputs": ["last_sample"], "updates": {"trng": "trng_next"}}})

# Updates from the body: a = shared(1); scan(lambda: {a: a + 1}, n_steps=10).
ex["shared_updates"] = graph(
    "a shared variable updated by every step", "Using shared variables - Gibbs sampling (the updates dictionary)",
    [var("a", T("int64"), shared={"data": 1})],
    [scan([{"value": 10}, "a"], ["a_steps"],
          body([var("a_prev", T("int64"))], [node("add", ["a_prev", {"value": 1}], ["a_next"])],
               ["a_prev"], ["a_next"]),
          out_taps=[[-1]], has_n_steps=True, name="increment"),
     node("subtensor", ["a_steps"], ["a_updated"], LAST),
     node("add", ["a", {"value": 1}], ["b"]),
     node("add", ["a_updated", {"value": 1}], ["c"])],
    {"f": {"inputs": [], "outputs": ["b", "c"], "updates": {"a": "a_updated"}}})


# The RNN with several taps: x(n) = tanh(W x(n-1) + W_in_1 u(n) + W_in_2
# u(n-4) + W_feedback y(n-1)), y(n) = W_out x(n-3). With `lookahead`, the
# variant that also reads the future: + W_in_3 u(n+2).
def rnn(lookahead):
    seq_taps = [-4, 0, 2] if lookahead else [-4, 0]
    u_ids = ["u_tm4", "u_t", "u_tp2"] if lookahead else ["u_tm4", "u_t"]
    ws = ["W", "W_in_1", "W_in_2", "W_feedback", "W_out"] + (["W_in_3"] if lookahead else [])
    shapes = {"W": (3, 3), "W_in_1": (2, 3), "W_in_2": (2, 3), "W_feedback": (2, 3), "W_out": (3, 2),
              "W_in_3": (2, 3)}
    bv = [var(u, T("float64", 2)) for u in u_ids] + [
        var("x_tm3", T("float64", 3)), var("x_tm1", T("float64", 3)), var("y_tm1", T("float64", 2))] + [
        var("b_" + w, T("float64", *shapes[w])) for w in ws]
    bn = [node("dot", ["x_tm1", "b_W"], ["a1"]),
          node("dot", ["u_t", "b_W_in_1"], ["a2"]),
          node("dot", ["u_tm4", "b_W_in_2"], ["a3"]),
          node("dot", ["y_tm1", "b_W_feedback"], ["a4"])]
    terms = ["a1", "a2", "a3", "a4"]
    if lookahead:
        bn.append(node("dot", ["u_tp2", "b_W_in_3"], ["a5"]))
        terms.append("a5")
    bn += [node("add", terms, ["pre"]), node("tanh", ["pre"], ["x_t"]),
           node("dot", ["x_tm3", "b_W_out"], ["y_t"])]
    name = "rnn_lookahead" if lookahead else "rnn"
    return graph(
        "an RNN with several taps" + (" and a future tap" if lookahead else ""),
        "Multiple outputs, several taps values - Recurrent Neural Network with Scan" +
        (" (with a future tap u(n+2) added)" if lookahead else ""),
        [var("u", T("float64", None, 2)), var("x0", T("float64", 3, 3)), var("y0", T("float64", 2))] +
        [var(w, T("float64", *shapes[w])) for w in ws],
        [scan(["u", "x0", "y0"] + ws, ["x_vals", "y_vals"],
              body(bv, bn, u_ids + ["x_tm3", "x_tm1", "y_tm1"] + ["b_" + w for w in ws], ["x_t", "y_t"]),
              seq_taps=[seq_taps], out_taps=[[-3, -1], [-1]], n_ns=len(ws), name="oneStep")],
        {name: {"inputs": ["u", "x0", "y0"] + ws, "outputs": ["x_vals", "y_vals"]}})


ex["rnn"] = rnn(False)
ex["rnn_lookahead"] = rnn(True)

# Conditional ending: powers of two up to max_value.
ex["power_of_2"] = graph(
    "powers of two until a limit", "Conditional ending of Scan",
    [var("max_value", T("float64"))],
    [scan([{"value": 1024}, {"value": {"dtype": "float64", "data": 1.0}}, "max_value"], ["values"],
          body([var("previous_power", T("float64")), var("mv", T("float64"))],
               [node("mul", ["previous_power", {"value": 2}], ["p2"]),
                node("gt", ["p2", "mv"], ["stop"])],
               ["previous_power", "mv"], ["p2", "stop"]),
          out_taps=[[-1]], n_ns=1, has_n_steps=True, has_until=True, name="power_of_2")],
    {"f": {"inputs": ["max_value"], "outputs": ["values"]}})

# reduce and foldr (the reference's special cases): sum() by scanning
# z + x_i from z = 0 and keeping the last value; Horner's rule for the
# polynomial above, folding the coefficients from the right
# (go_backwards): acc = acc * x + c.
ex["reduce_sum"] = graph(
    "sum as a reduce", "Reference: a reduce operation, sum() by scanning z + x_i from z = 0",
    [var("xs", T("float64", None))],
    [scan(["xs", {"value": {"dtype": "float64", "data": 0.0}}], ["partial_sums"],
          body([var("x_i", T("float64")), var("z", T("float64"))],
               [node("add", ["z", "x_i"], ["z_next"])], ["x_i", "z"], ["z_next"]),
          seq_taps=[[0]], out_taps=[[-1]], name="reduce"),
     node("subtensor", ["partial_sums"], ["total"], LAST)],
    {"sum": {"inputs": ["xs"], "outputs": ["total", "partial_sums"]}})
ex["horner_foldr"] = graph(
    "a polynomial by Horner's rule as a foldr", "Reference: foldr (scan with go_backwards)",
    [var("coefficients", T("float64", None)), var("x", T("float64"))],
    [scan(["coefficients", {"value": {"dtype": "float64", "data": 0.0}}, "x"], ["accs"],
          body([var("c", T("float64")), var("acc", T("float64")), var("x_", T("float64"))],
               [node("mul", ["acc", "x_"], ["ax"]), node("add", ["ax", "c"], ["acc_next"])],
               ["c", "acc", "x_"], ["acc_next"]),
          seq_taps=[[0]], out_taps=[[-1]], n_ns=1, go_backwards=True, name="foldr"),
     node("subtensor", ["accs"], ["value"], LAST)],
    {"horner": {"inputs": ["coefficients", "x"], "outputs": ["value"]}})

for name, g in ex.items():
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(g, f, indent=1)
        f.write("\n")
