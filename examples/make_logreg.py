"""Writes logreg.json: the logistic regression of the Theano 2010 paper
(section "Case study: logistic regression"), its gradients from a `grad`
node; also tests/data/tools/logreg_manual.json, the same graph with the
gradients written out by hand. Run with /usr/bin/python3."""
import base64
import json

import numpy as np

feats = 784
rng = np.random.default_rng(0)
# The paper starts from randn(feats); without the stabilizing rewrites (log of
# a saturated sigmoid gives -inf, then NaN) that overflows on this data, so the
# example starts from a smaller random w.
w0 = 0.01 * rng.standard_normal(feats)


def tr(line, code):
    return [{"file": "logreg.py", "line": line, "function": "<module>", "code": code}]


def node(op, inputs, outputs, line, code, attrs=None, name=None):
    n = {"op": op, "inputs": inputs, "outputs": outputs, "trace": tr(line, code)}
    if attrs:
        n["attrs"] = attrs
    if name:
        n["name"] = name
    return n


P1 = "p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))"
XENT = "xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)"
COST = "cost = xent.mean() + 0.01 * (w ** 2).sum()"
GRAD = "gw, gb = T.grad(cost, [w, b])"
UPD = "updates={w: w - 0.1 * gw, b: b - 0.1 * gb}"
# The gradients written out by hand (d cost / d (x.w + b) = (p_1 - y) / N),
# kept as a test that grad's expansion gives the same values.
MANUAL = [
    node("shape_i", ["x"], ["n"], 13, GRAD, attrs={"i": 0}),
    node("sub", ["p_1", "y"], ["p_minus_y"], 13, GRAD),
    node("true_div", ["p_minus_y", "n"], ["g_logit"], 13, GRAD),
    node("transpose", ["x"], ["x_T"], 13, GRAD),
    node("dot", ["x_T", "g_logit"], ["gw_data"], 13, GRAD),
    node("mul", [{"value": 0.02}, "w"], ["gw_penalty"], 13, GRAD),
    node("add", ["gw_data", "gw_penalty"], ["gw"], 13, GRAD, name="gw"),
    node("sum", ["g_logit"], ["gb"], 13, GRAD, name="gb"),
]


def graph(manual):
  return {
    "format": "tg-graph", "version": 1, "name": "logistic regression (Theano 2010, figure 1)",
    "variables": [
        {"id": "x", "type": {"dtype": "float64", "shape": [None, feats]}, "name": "x"},
        {"id": "y", "type": {"dtype": "int64", "shape": [None]}, "name": "y"},
        {"id": "w", "type": {"dtype": "float64", "shape": [feats]}, "name": "w",
         "shared": {"base64": base64.b64encode(w0.astype("<f8").tobytes()).decode()}},
        {"id": "b", "type": {"dtype": "float64", "shape": []}, "name": "b", "shared": {"data": 0.0}},
    ],
    "nodes": [
        node("dot", ["x", "w"], ["xw"], 10, P1),
        node("neg", ["xw"], ["neg_xw"], 10, P1),
        node("sub", ["neg_xw", "b"], ["logit_neg"], 10, P1),
        node("exp", ["logit_neg"], ["e"], 10, P1),
        node("add", [{"value": 1}, "e"], ["den"], 10, P1),
        node("true_div", [{"value": 1}, "den"], ["p_1"], 10, P1, name="p_1"),
        node("log", ["p_1"], ["log_p"], 11, XENT),
        node("mul", ["y", "log_p"], ["y_log_p"], 11, XENT),
        node("neg", ["y_log_p"], ["t1"], 11, XENT),
        node("sub", [{"value": 1}, "y"], ["one_minus_y"], 11, XENT),
        node("sub", [{"value": 1}, "p_1"], ["one_minus_p"], 11, XENT),
        node("log", ["one_minus_p"], ["log_1mp"], 11, XENT),
        node("mul", ["one_minus_y", "log_1mp"], ["t2"], 11, XENT),
        node("sub", ["t1", "t2"], ["xent"], 11, XENT, name="xent"),
        node("mean", ["xent"], ["xent_mean"], 12, COST),
        node("pow", ["w", {"value": 2}], ["w_sq"], 12, COST),
        node("sum", ["w_sq"], ["w_sq_sum"], 12, COST),
        node("mul", [{"value": 0.01}, "w_sq_sum"], ["penalty"], 12, COST),
        node("add", ["xent_mean", "penalty"], ["cost"], 12, COST, name="cost"),
    ] + (MANUAL if manual else [node("grad", ["cost", "w", "b"], ["gw", "gb"], 13, GRAD)]) + [
        node("gt", ["p_1", {"value": 0.5}], ["prediction"], 14, "prediction = p_1 > 0.5", name="prediction"),
        node("mul", [{"value": 0.1}, "gw"], ["step_w"], 17, UPD),
        node("sub", ["w", "step_w"], ["w_next"], 17, UPD),
        node("mul", [{"value": 0.1}, "gb"], ["step_b"], 17, UPD),
        node("sub", ["b", "step_b"], ["b_next"], 17, UPD),
    ],
    "functions": {
        "train": {"inputs": ["x", "y"], "outputs": ["cost", "prediction", "xent"],
                  "updates": {"w": "w_next", "b": "b_next"}},
        "predict": {"inputs": ["x"], "outputs": ["prediction"]},
        "cost": {"inputs": ["x", "y"], "outputs": ["cost"]},
    },
    "meta": {"source": "Theano: a CPU and GPU math compiler in Python (SciPy 2010), figure 1",
             "generator": "examples/make_logreg.py"},
  }


with open("logreg.json", "w") as f:
    json.dump(graph(False), f, indent=1)
    f.write("\n")
with open("../tests/data/tools/logreg_manual.json", "w") as f:
    json.dump(graph(True), f, indent=1)
    f.write("\n")
