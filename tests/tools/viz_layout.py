#!/usr/bin/env python3
"""tgviz's drawing of large graphs (tests/tools/tgviz.sh runs it):

- a leaf read by more than 4 nodes is drawn beside each reader (v:ID for
  the first, cK:ID for the K-th), each copy with one edge, right above its
  reader; a leaf read by 4 stays one node;
- the layered layout (--layout layers, and auto above 2,000 drawn nodes):
  every edge points down, no two nodes of a rank overlap, every node lies
  inside the drawing; a 3,000-node graph with a weight every layer reads
  (which dot did not finish in 10 minutes) is drawn in seconds;
- the pictures render from the layered positions.

  viz_layout.py TGVIZ WORKDIR
"""
import json, os, re, subprocess, sys, time

tgviz, work = sys.argv[1], sys.argv[2]
fails = 0


def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails += 1


def page_data(path):
    html = open(path, encoding="utf-8").read()
    m = re.search(r'<script id="tgviz-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def draw(graph, name, *args):
    src = os.path.join(work, name + ".json")
    with open(src, "w") as f:
        json.dump(graph, f)
    out = os.path.join(work, name + ".html")
    t0 = time.time()
    r = subprocess.run([tgviz, src, "-o", out, *args], capture_output=True, text=True)
    dt = time.time() - t0
    if r.returncode != 0:
        check(False, "%s: tgviz %s exited %d: %s" % (name, " ".join(args), r.returncode, r.stderr.strip()))
        return None, dt
    return page_data(out), dt


def layers(n_layers, width=8):
    """A deep net: every layer reads the shared weight W and bias b, then
    an elementwise chain; the input x is read once."""
    vs = [{"id": "x", "type": {"dtype": "float32", "shape": [4, width]}},
          {"id": "W", "type": {"dtype": "float32", "shape": [width, width]},
           "shared": {"data": [[0.0] * width] * width}},
          {"id": "b", "type": {"dtype": "float32", "shape": [width]}, "shared": {"data": [0.0] * width}}]
    nodes, h = [], "x"
    for i in range(n_layers):
        nodes += [{"op": "dot", "inputs": [h, "W"], "outputs": ["d%d" % i]},
                  {"op": "add", "inputs": ["d%d" % i, "b"], "outputs": ["p%d" % i]},
                  {"op": "tanh", "inputs": ["p%d" % i], "outputs": ["t%d" % i]},
                  {"op": "mul", "inputs": ["t%d" % i, "t%d" % i], "outputs": ["q%d" % i]},
                  {"op": "add", "inputs": ["q%d" % i, "t%d" % i], "outputs": ["h%d" % i]}]
        h = "h%d" % i
    return {"format": "tg-graph", "version": 1, "variables": vs, "nodes": nodes,
            "functions": {"main": {"inputs": ["x"], "outputs": [h]}}}


def geometry_ok(view, name):
    nodes, edges = view["nodes"], view["edges"]
    by = {n["id"]: n for n in nodes}
    down = all(by[e["source"]]["y"] < by[e["target"]]["y"] for e in edges)
    check(down, "%s: every edge points down" % name)
    rows = {}
    for n in nodes:
        rows.setdefault(round(n["y"], 3), []).append(n)
    overlap = 0
    for row in rows.values():
        row.sort(key=lambda n: n["x"])
        for a, b in zip(row, row[1:]):
            if a["x"] + a["w"] / 2 + 17.9 > b["x"] - b["w"] / 2:
                overlap += 1
    check(overlap == 0, "%s: no two nodes of a rank closer than the separation (%d pairs)" % (name, overlap))
    inside = all(-0.01 <= n["x"] - n["w"] / 2 and n["x"] + n["w"] / 2 <= view["width"] + 0.01 and
                 0 <= n["y"] <= view["height"] + 0.01 for n in nodes)
    check(inside, "%s: every node inside the %.0f x %.0f drawing" % (name, view["width"], view["height"]))


# ---- leaf copies: W read by 6 dots, b by 6 adds; 4 layers: 4 readers ----
d, _ = draw(layers(6), "six", "--original", "--layout", "dot")
if d:
    v = d["views"]["original"]
    ws = [n for n in v["nodes"] if n.get("var") == "W" and n["kind"] == "shared"]
    ids = sorted(n["id"] for n in ws)
    check(ids == sorted(["v:W"] + ["c%d:W" % k for k in range(2, 7)]),
          "six layers: W drawn once beside each of its 6 readers (%s)" % ids)
    check(all(n.get("copies") == 6 for n in ws) and sorted(n["copy"] for n in ws) == list(range(1, 7)),
          "six layers: each copy says which of how many it is")
    out = {}
    for e in v["edges"]:
        out.setdefault(e["source"], []).append(e["target"])
    targets = [t for n in ws for t in out.get(n["id"], [])]
    check(all(len(out.get(n["id"], [])) == 1 for n in ws) and len(set(targets)) == 6 and
          all(t.startswith("a:d") for t in targets), "six layers: each copy has one edge, to its own dot")
    check(v["layout"] == "dot", "six layers: --layout dot is dot")
d, _ = draw(layers(4), "four", "--original")
if d:
    v = d["views"]["original"]
    ws = [n for n in v["nodes"] if n.get("var") == "W"]
    check(len(ws) == 1 and ws[0]["id"] == "v:W" and "copies" not in ws[0] and
          sum(e["source"] == "v:W" for e in v["edges"]) == 4, "four layers: W read by 4 stays one node with 4 edges")
    check(v["layout"] == "dot", "four layers: auto lays a small graph out with dot")
d, _ = draw(layers(6), "six_layers", "--original", "--layout", "layers")
if d:
    v = d["views"]["original"]
    check(v["layout"] == "layers", "six layers: --layout layers is the layered layout")
    geometry_ok(v, "six layers, layered")
    by = {n["id"]: n for n in v["nodes"]}
    level = {y: r for r, y in enumerate(sorted({round(n["y"], 3) for n in v["nodes"]}))}
    rank = lambda i: level[round(by[i]["y"], 3)]
    near = [rank(e["target"]) - rank(e["source"]) for e in v["edges"]
            if e["source"].endswith(":W") or e["source"].endswith(":b")]
    check(len(near) == 12 and set(near) == {1},
          "six layers, layered: every copy of W and b sits one rank above its reader (%s)" % near)

# ---- 600 layers, 3,000 apply nodes: auto picks the layered layout ----
d, dt = draw(layers(600), "deep", "-O", "none")
if d:
    for name in ("original", "optimized"):
        v = d["views"][name]
        check(v["layout"] == "layers", "600 layers (%s, %d nodes): auto picks the layered layout"
              % (name, len(v["nodes"])))
        geometry_ok(v, "600 layers (%s)" % name)
    print("tgviz: 600 layers, %d + %d drawn nodes, both views laid out and written in %.2f s"
          % (len(d["views"]["original"]["nodes"]), len(d["views"]["optimized"]["nodes"]), dt))

# ---- pictures from the layered positions ----
src = os.path.join(work, "six.json")
svgs = {}
for lay in ("dot", "layers"):
    out = os.path.join(work, "six_%s.svg" % lay)
    r = subprocess.run([tgviz, src, "--original", "--layout", lay, "-o", out], capture_output=True, text=True)
    svgs[lay] = open(out).read() if r.returncode == 0 else ""
counts = {k: (s.count('class="node"'), s.count('class="edge"')) for k, s in svgs.items()}
check(counts["layers"] == counts["dot"] and counts["dot"][0] > 0,
      "the SVG of the layered layout has the nodes and edges of dot's (%s)" % counts)

print("%d failure(s)" % fails if fails else "all layout checks passed")
sys.exit(1 if fails else 0)
