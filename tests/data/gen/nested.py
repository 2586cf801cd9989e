"""Bodies nested as deep as a graph file may nest them: ops/nested_*.json.

docs/format-choices.md allows 128 levels of JSON, and each level of a
scan or op_from_graph body takes four (the node list, the node, its
attrs, the body), so bodies nest 30 deep. The optimizer moves body nodes
out of single-step scans and edits the attrs of scans; it wrote those
attrs, bodies and all, as text and parsed them again with a limit of 32
levels, and refused every graph with scans nested 9 deep ("optimizer: bad
attrs {...the whole body...}"). Each level's body is the level below it
(for a scan, the last row of its stacked result: subtensor [-1]) and then
neg(sin(h + 0.001)); the expected values are NumPy loops written from
the definitions of scan and op_from_graph, independently of tg.
Run: /usr/bin/python3 nested.py (from tests/data/gen)."""
import json
import os

import numpy as np

from common import OUT, value

X = np.array([0.1, 0.2, 0.3])
T3 = {"dtype": "float64", "shape": [3]}


def chain(h):
    return -np.sin(h + 0.001)


def body_value(levels, i, h):
    """The body of levels[i] on h."""
    if i + 1 < len(levels):
        kind, _ = levels[i + 1]
        inner = construct_value(levels, i + 1, h)
        h = inner[-1] if kind == "scan" else inner
    return chain(h)


def construct_value(levels, i, h):
    """What the node of levels[i] gives: a scan its stacked steps."""
    kind, steps = levels[i]
    if kind == "ofg":
        return body_value(levels, i, h)
    rows = []
    for _ in range(steps):
        h = body_value(levels, i, h)
        rows.append(h)
    return np.stack(rows)


def construct_node(levels, i, inp, out):
    kind, steps = levels[i]
    body = body_json(levels, i, "l%d_" % (i + 1))
    if kind == "ofg":
        return {"op": "op_from_graph", "inputs": [inp], "outputs": [out],
                "attrs": {"name": "ofg%d" % (i + 1), "body": body}}
    return {"op": "scan", "inputs": [{"value": {"dtype": "int64", "data": steps}}, inp], "outputs": [out],
            "attrs": {"body": body, "n_sequences": 0, "sequence_taps": [], "n_recurrent": 1,
                      "output_taps": [[-1]], "n_nonrecurrent": 0, "n_non_sequences": 0,
                      "has_n_steps": True, "has_until": False, "name": "scan%d" % (i + 1)}}


def body_json(levels, i, p):
    nodes, h = [], p + "h"
    if i + 1 < len(levels):
        nodes.append(construct_node(levels, i + 1, h, p + "inner"))
        h = p + "inner"
        if levels[i + 1][0] == "scan":
            nodes.append({"op": "subtensor", "inputs": [h], "outputs": [p + "last"], "attrs": {"index": [-1]}})
            h = p + "last"
    nodes += [{"op": "add", "inputs": [h, {"value": 0.001}], "outputs": [p + "a"]},
              {"op": "sin", "inputs": [p + "a"], "outputs": [p + "s"]},
              {"op": "neg", "inputs": [p + "s"], "outputs": [p + "y"]}]
    return {"variables": [{"id": p + "h", "type": T3}], "nodes": nodes,
            "inputs": [p + "h"], "outputs": [p + "y"]}


def depth(o):
    if isinstance(o, dict):
        return 1 + max([depth(v) for v in o.values()] + [0])
    if isinstance(o, list):
        return 1 + max([depth(v) for v in o] + [0])
    return 0


def nested(name, levels):
    """Write ops/<name>.json (compact: indented, the deepest lines would
    start 120 levels in); its JSON depth."""
    node = construct_node(levels, 0, "x", "y")
    g = {"format": "tg-graph", "version": 1, "name": name, "variables": [{"id": "x", "type": T3}],
         "nodes": [node], "functions": {"main": {"inputs": ["x"], "outputs": ["y"]}},
         "meta": {"tests": [{"function": "main", "inputs": {"x": value(X)},
                             "outputs": {"y": value(construct_value(levels, 0, X))},
                             "rtol": 1e-12, "atol": 1e-15}]}}
    d = depth(g)
    assert d <= 128, (name, d)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(g, f, separators=(",", ":"))
        f.write("\n")
    return d


def body_dual(levels, i, h, dh):
    """body_value with the derivative of each element with respect to the
    same element of X (every op here is elementwise, so the Jacobian is
    diagonal): forward-mode differentiation by hand, d/dh -sin(h + 0.001)
    = -cos(h + 0.001)."""
    if i + 1 < len(levels):
        kind, _ = levels[i + 1]
        h, dh = construct_dual(levels, i + 1, h, dh)
        if kind == "scan":
            h, dh = h[-1], dh[-1]
    return chain(h), -np.cos(h + 0.001) * dh


def construct_dual(levels, i, h, dh):
    kind, steps = levels[i]
    if kind == "ofg":
        return body_dual(levels, i, h, dh)
    rows, drows = [], []
    for _ in range(steps):
        h, dh = body_dual(levels, i, h, dh)
        rows.append(h)
        drows.append(dh)
    return np.stack(rows), np.stack(drows)


def renamed_ids(o, ids):
    """o with every string that is a key of ids replaced by its value."""
    if isinstance(o, dict):
        return {k: renamed_ids(v, ids) for k, v in o.items()}
    if isinstance(o, list):
        return [renamed_ids(v, ids) for v in o]
    return ids.get(o, o) if isinstance(o, str) else o


def nested_grad(name, levels, ids=None):
    """Write ops/<name>.json: y as nested(), the cost c = sum(W * y) and its
    gradient gx = grad(c, x), by hand (construct_dual) and checked against
    central finite differences here. ids renames ids of the bodies."""
    y, dy = construct_dual(levels, 0, X, np.ones_like(X))
    assert np.array_equal(y, construct_value(levels, 0, X))
    w = np.arange(1.0, y.size + 1.0).reshape(y.shape) / 4
    cost = np.sum(w * y)
    gx = (w * dy).reshape(-1, 3).sum(axis=0)
    eps = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        fd = (np.sum(w * construct_value(levels, 0, X + e)) - np.sum(w * construct_value(levels, 0, X - e))) / (2 * eps)
        assert abs(fd - gx[k]) <= 1e-8 * max(1.0, abs(gx[k])), (name, k, fd, gx[k])
    node = renamed_ids(construct_node(levels, 0, "x", "y"), ids or {})
    g = {"format": "tg-graph", "version": 1, "name": name, "variables": [{"id": "x", "type": T3}],
         "nodes": [node,
                   {"op": "mul", "inputs": ["y", {"value": value(w)}], "outputs": ["wy"]},
                   {"op": "sum", "inputs": ["wy"], "outputs": ["c"], "attrs": {"axis": None}},
                   {"op": "grad", "inputs": ["c", "x"], "outputs": ["gx"]}],
         "functions": {"main": {"inputs": ["x"], "outputs": ["c", "gx"]}},
         "meta": {"tests": [{"function": "main", "inputs": {"x": value(X)},
                             "outputs": {"c": value(cost), "gx": value(gx)},
                             "rtol": 1e-12, "atol": 1e-15}]}}
    d = depth(g)
    assert d <= 128, (name, d)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(g, f, separators=(",", ":"))
        f.write("\n")
    return d


def main():
    # The audit's graph: 9 single-step scans (fast_run inlines each; depth
    # 8 already passed the old limit of 32).
    nested("nested_scan_9", [("scan", 1)] * 9)
    # 30 of them: the deepest the loader takes (125 levels).
    assert nested("nested_scan_30", [("scan", 1)] * 30) > 124
    # The outer three loops run twice: they stay loops, and the body's
    # optimizer (when the scan first runs) keeps only the last row of the
    # loop below (scan_keep_last, which rebuilds that scan from its attrs).
    nested("nested_scan_30_loops", [("scan", 2)] * 3 + [("scan", 1)] * 27)
    # scan and op_from_graph by turns: op_from_graph nodes move out of the
    # inlined scans with their bodies.
    nested("nested_scan_ofg_30", [("scan", 1), ("ofg", 1)] * 15)
    # The gradient of the cost sum(W * y) through the same bodies: the
    # gradient of each scan is a scan whose body is the forward body with
    # its ids prefixed, and the prefixes grew past the 128 characters of an
    # id 9 levels down ("... is not a valid id"). The outer two loops run
    # twice, so that gradients flow through the recurrence too.
    nested_grad("nested_scan_grad_9", [("scan", 2)] * 2 + [("scan", 1)] * 7)
    nested_grad("nested_scan_grad_30", [("scan", 2)] * 2 + [("scan", 1)] * 28)
    # op_from_graph by turns with scan: its gradient differentiates its body
    # in place, scans and all.
    nested_grad("nested_scan_grad_ofg_30", [("ofg", 1), ("scan", 2)] + [("scan", 1), ("ofg", 1)] * 14)
    # Bodies whose ids are the names the reverse scan's body gives its own
    # variables after the prefix (the gradient reaching an output, the
    # cost, a carry, ...): they were declared twice ("'bp..._0:g0' is
    # already declared").
    nested_grad("nested_scan_grad_ids", [("scan", 2)] * 2,
                {"l1_h": "g0", "l1_a": "cost", "l1_s": "d0", "l1_y": "tot0", "l1_inner": "c0",
                 "l1_last": "prod0", "l2_h": "term0", "l2_a": "acc0", "l2_s": "d1", "l2_y": "last0"})


if __name__ == "__main__":
    main()
