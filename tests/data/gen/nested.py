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


if __name__ == "__main__":
    main()
