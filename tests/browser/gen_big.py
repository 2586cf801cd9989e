#!/usr/bin/env python3
"""Write a tg-graph of N apply nodes (default 5000) for tgviz's
large-graph test: 50 parallel lanes of elementwise ops over one input,
each node reading the one above it and, in every other lane, the one
above its neighbour too (as a wide network's layers do).
  gen_big.py OUT [N [DEPTH]]
DEPTH > 0 (the large-body test): those nodes are the body of an
op_from_graph node, itself the body of one, DEPTH of them in all; the
graph of level k reads x<k> (x in the innermost body) and has the
lanes' 50 outputs."""
import json, sys

n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
depth = int(sys.argv[3]) if len(sys.argv) > 3 else 0
W = 50
D = (n + W - 1) // W
ops = ["add", "mul", "sub", "maximum"]
un = ["tanh", "exp", "neg", "sigmoid"]
nodes, last = [], {}
for i in range(n):
    d, w = divmod(i, W)
    out = "h%d" % i
    up = "h%d" % (i - W) if d else "x"
    if w % 2 == 0 and d:
        other = "h%d" % ((d - 1) * W + (w + 1) % W)
        nodes.append({"op": ops[i % 4], "inputs": [up, other], "outputs": [out],
                      "trace": [{"file": "big.py", "line": i + 1, "code": "%s = f(%s, %s)" % (out, up, other)}]})
    else:
        nodes.append({"op": un[i % 4], "inputs": [up], "outputs": [out]})
    last[w] = out
g = {"format": "tg-graph", "version": 1, "name": "big",
     "variables": [{"id": "x", "type": {"dtype": "float32", "shape": [16]}}],
     "nodes": nodes,
     "functions": {"main": {"inputs": ["x"], "outputs": [last[w] for w in sorted(last)]}}}
outs = [last[w] for w in sorted(last)]
for k in range(depth):
    body = {"variables": g["variables"], "nodes": g["nodes"], "inputs": g["functions"]["main"]["inputs"], "outputs": outs}
    x = "x%d" % (k + 1)
    outs = ["%s_%d" % (x, i) for i in range(len(outs))]
    g = {"format": "tg-graph", "version": 1, "name": "big",
         "variables": [{"id": x, "type": {"dtype": "float32", "shape": [16]}}],
         "nodes": [{"op": "op_from_graph", "inputs": [x], "outputs": outs, "attrs": {"name": "body%d" % (depth - k), "body": body}}],
         "functions": {"main": {"inputs": [x], "outputs": outs}}}
with open(sys.argv[1], "w") as f:
    json.dump(g, f)
