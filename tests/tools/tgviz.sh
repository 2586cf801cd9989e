#!/usr/bin/env bash
# tgviz: the Graphviz outputs have the node and edge counts worked out by
# hand for tests/data/viz/trace.json and agree with one another for every
# example; every example renders as a page, SVG, PNG and PDF; bad input
# gets one line and exit 2; the pages pass the browser tests
# (tests/browser/tgviz.test.js) in headless chromium when chromium and
# node are installed. Screenshots: $TG_BUILD_DIR/tests/artifacts/.
set -uo pipefail
: "${TGVIZ:?}" "${TG_SRC:?}" "${TG_BUILD_DIR:?}" "${TG_TEST_DATA:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
svg_nodes() { grep -c 'class="node"' "$1"; }
svg_edges() { grep -c 'class="edge"' "$1"; }
# DOT written by Graphviz: one statement per node/edge line.
dot_nodes() { grep -cE '^\s+("[^"]+"|[A-Za-z0-9_:.]+)\s+\[' "$1" | head -1; }
dot_edges() { grep -cE -- '->' "$1"; }
# DOT with Graphviz's breaks of long strings (backslash-newline) undone.
dot_joined() { sed -z 's/\\\n//g' "$1" | tr -d '\n'; }
fx="$TG_TEST_DATA/viz/trace.json"

# trace.json: 5 apply nodes, 3 variables (x, w, the inline 1), 2 outputs;
# 7 node inputs and 2 output edges.
"$TGVIZ" "$fx" --original -o "$tmp/t.svg"
check '[ "$(svg_nodes "$tmp/t.svg")" = 10 ] && [ "$(svg_edges "$tmp/t.svg")" = 9 ]' \
  "trace.json as SVG: 10 nodes, 9 edges (got $(svg_nodes "$tmp/t.svg"), $(svg_edges "$tmp/t.svg"))"
"$TGVIZ" "$fx" --original --format dot -o "$tmp/t.gv"
check '[ "$(dot_edges "$tmp/t.gv")" = 9 ] && grep -q "\"a:xw\"" "$tmp/t.gv"' "trace.json as DOT: 9 edges"
check '[ "$(grep -c "stroke=\"#dc2626\"" "$tmp/t.svg")" = 2 ] && [ "$(grep -c "stroke=\"#2563eb\"" "$tmp/t.svg")" = 2 ]' \
  "trace.json as SVG: one red (destroyed) and one blue (view) edge, each a line and an arrowhead"
# -O none: the fixture's optimized view is the graph as written (the
# optimizer would fuse exp and add, and turn the transpose into a dimshuffle).
"$TGVIZ" "$fx" --optimized -O none -o - --format svg >"$tmp/t2.svg"
check '[ "$(svg_nodes "$tmp/t2.svg")" = 10 ]' "-o - writes to standard output"

for ex in "$TG_SRC"/examples/*.json; do
  b=$(basename "$ex" .json)
  for fmt in html svg png pdf dot; do
    "$TGVIZ" "$ex" -o "$tmp/$b.$fmt" 2>/dev/null
    check '[ -s "$tmp/$b.$fmt" ]' "$b renders as $fmt"
  done
  check 'head -c 8 "$tmp/$b.png" | od -An -c | grep -q "P   N   G"' "$b.png is a PNG"
  check '[ "$(head -c 5 "$tmp/$b.pdf")" = "%PDF-" ]' "$b.pdf is a PDF"
  # The page's data and the pictures hold the same nodes and edges.
  pn=$(grep -o '"id":"[aouv]:[^"]*","fill"' "$tmp/$b.html" | sort -u | wc -l)
  check '[ "$(svg_nodes "$tmp/$b.svg")" -gt 0 ] && [ "$(dot_edges "$tmp/$b.dot")" = "$(svg_edges "$tmp/$b.svg")" ]' \
    "$b: DOT and SVG have the same $(svg_edges "$tmp/$b.svg") edges"
  check 'grep -q "</html>" "$tmp/$b.html" && ! grep -q "TGVIZ_" "$tmp/$b.html"' "$b.html is complete"
done

# Names are free text: shown as written. In the page's data a '<' is
# \u003c (a "<!--<script>" in a name kept the script block from ending);
# in DOT a backslash is doubled (Graphviz read \N, \G, \l as the node's
# name, the graph's, a line break); a control character, which XML cannot
# hold, is shown as \xHH.
python3 - "$tmp/hostile.json" <<'PY'
import json, sys
json.dump({"format": "tg-graph", "version": 1,
           "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [2]},
                          "name": "X\\n\\N\u0007 & </script><!--<script>"}],
           "nodes": [{"op": "exp", "inputs": ["x"], "outputs": ["y"], "name": "e\\r\u001b[31m\\G"}],
           "functions": {"f": {"inputs": ["x"], "outputs": ["y"]}}}, open(sys.argv[1], "w"))
PY
"$TGVIZ" "$tmp/hostile.json" --original -o "$tmp/hostile.svg" && "$TGVIZ" "$tmp/hostile.json" --original -o "$tmp/hostile.dot" &&
  "$TGVIZ" "$tmp/hostile.json" --original -o "$tmp/hostile.html"
check '[ $? = 0 ]' "a graph with hostile names renders as SVG, DOT and a page"
texts=$(python3 - "$tmp/hostile.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
t = [e.text for e in ET.parse(sys.argv[1]).iter("{http://www.w3.org/2000/svg}text")]
print("|".join(sorted(x for x in t if x and x[:2] in ("X\\", "e\\"))))
PY
)
check '[ "$texts" = "X\\n\\N\\x07 & </script><!--<script>|e\\r\\x1b[31m\\G" ]' \
  "hostile names: the SVG is well-formed XML and shows them as written ($texts)"
check 'grep -qF "label=\"X\\\\n\\\\N\\\\x07 & </script>" "$tmp/hostile.dot"' "hostile names: DOT labels escape backslashes"
check '! grep -q "<!--" "$tmp/hostile.html" && grep -qF "script>\\u003c!--\\u003cscript>" "$tmp/hostile.html"' \
  "hostile names: the page's data writes < as \\u003c"

# Constants show their values, as tgc print writes them: logreg's
# optimized gemv has beta 1 - 0.1 * 0.01 * 2 (a 0-d constant that the
# rewrites made, drawn as its value), the convnet's weight gradients the
# constant shapes (4,) of the kernels (under their names)
"$TGVIZ" "$TG_SRC/examples/logreg.json" -f train --optimized -o "$tmp/lr_opt.dot"
check 'dot_joined "$tmp/lr_opt.dot" | grep -qE "\"v:w_next:const[.0-9]*\"[^]]*label=\"0.998\\\\nfloat64 \(\)\""' \
  "a 0-d constant is drawn as its value (0.998)"
"$TGVIZ" "$TG_SRC/examples/convnet.json" -f train --optimized -o "$tmp/cn_opt.dot"
check 'dot_joined "$tmp/cn_opt.dot" | grep -qF "label=\"gw1.42:const\\n[16,  8,  5,  5]\\nint64 (4,)\""' \
  "a (4,) constant shows its values under its name"

# Bad input: one line, exit 2, no output file.
bad() { # args...; expected stderr substring is the last argument
  local want="${!#}"
  "$TGVIZ" "${@:1:$#-1}" >/dev/null 2>"$tmp/err"; local rc=$?
  check '[ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q -- "$want" "$tmp/err"' \
    "exit 2 and one line for: ${*:1:$#-1} ($(head -c 120 "$tmp/err"))"
}
echo '{"format": "tg-graph", "version": 1, "variables": [], "nodes": [{"op": "dott"}]}' >"$tmp/bad.json"
bad "$tmp/bad.json" -o "$tmp/x.html" "nodes\[0\]"
bad "$tmp/nope.json" -o "$tmp/x.html" "nope.json"
bad "$fx" -o "$tmp/x.html" -o "$tmp/y.svg" "-o given twice ('$tmp/x.html' and '$tmp/y.svg')"
bad "$fx" -f main -f other -o "$tmp/x.html" "-f given twice"
bad "$fx" -o "$tmp/x.foo" "'.foo' names no format"
check '[ ! -e "$tmp/x.foo" ] && [ ! -e "$tmp/y.svg" ]' "no file written for a bad -o"
"$TGVIZ" "$fx" -o "$tmp/upper.SVG"; "$TGVIZ" "$fx" -o "$tmp/noext"
check 'grep -q "<svg" "$tmp/upper.SVG" && grep -q "</html>" "$tmp/noext"' "an upper-case extension names its format; no extension is html"
bad "$fx" -o "needs a value"
bad "$fx" -o "$tmp/x.html" --format gif "unknown format"
bad "$fx" -o "$tmp/x.svg" --optimized --original "not both"
bad "$fx" -o "$tmp/x.html" -f nope "nope"
bad "$fx" "required"
bad "$fx" -o "$tmp/x.html" --bogus "unknown option"
bad "$fx" -o "$tmp/x.html" --layout neato "unknown layout"
bad "$fx" -o "$tmp/nodir/x.html" "nodir/x.html: cannot create a temporary file: No such file"
echo '{"functions": [{"name": "main", "nodes": [{"key": "xw", "time_s": 1, "share": 2}]}]}' >"$tmp/p1.json"
bad "$fx" --profile "$tmp/p1.json" -o "$tmp/x.html" "nodes\[0\].share"
echo '{"functions": [{"name": "main", "nodes": [{"key": "nothere", "time_s": 1, "share": 0.5}]}]}' >"$tmp/p2.json"
bad "$fx" --profile "$tmp/p2.json" -o "$tmp/x.html" "nodes\[0\]: node 'nothere' is not a node of function 'main'"
echo '{"functions": ' >"$tmp/p3.json"
bad "$fx" --profile "$tmp/p3.json" -o "$tmp/x.html" "^tgviz: --profile $tmp/p3.json: line 2, column 1: invalid JSON: unexpected end of input$"
bad "$fx" --profile "$tmp/none.json" -o "$tmp/x.html" "^tgviz: --profile $tmp/none.json: cannot open: No such file or directory$"
echo '[]' >"$tmp/p4.json"
bad "$fx" --profile "$tmp/p4.json" -o "$tmp/x.html" "^tgviz: --profile $tmp/p4.json: functions: expected an array of functions$"
# A profile must be of the graph drawn: every node it names is one of the
# function's, with the same op (trace.json: xw is a dot, e an exp, s an
# add), or, a node a preset made, stands for nodes of it (origins). One
# shared key was enough before: another graph's times shaded this one.
prof() { echo '{"functions": [{"name": "main", "nodes": ['"$1"']}]}' >"$tmp/$2"; }
prof '{"key": "xw", "op": "dot", "time_s": 1, "share": 0.5}, {"key": "h", "op": "tanh", "time_s": 1, "share": 0.5}' pg1.json
bad "$fx" --profile "$tmp/pg1.json" -o "$tmp/x.html" \
  "^tgviz: --profile $tmp/pg1.json: functions\[0\].nodes\[1\]: node 'h' (tanh) is not a node of function 'main' of $fx: the profile belongs to another graph or function$"
prof '{"key": "xw", "op": "dot", "time_s": 1, "share": 0.5}, {"key": "e", "op": "log", "time_s": 1, "share": 0.5}' pg2.json
bad "$fx" --profile "$tmp/pg2.json" -o "$tmp/x.html" "nodes\[1\]: node 'e' (log) is not a node of function 'main'"
prof '{"key": "xw", "time_s": 1, "share": 0.5}, {"key": "h", "time_s": 1, "share": 0.5}' pg3.json
bad "$fx" --profile "$tmp/pg3.json" -o "$tmp/x.html" "nodes\[1\]: node 'h' is not a node of function 'main'"
prof '{"key": "xw", "op": "dot", "time_s": 1, "share": 0.5}, {"key": "s", "op": "composite", "origins": ["e", "h"], "time_s": 1, "share": 0.5}' pg4.json
bad "$fx" -O none --profile "$tmp/pg4.json" -o "$tmp/x.html" "nodes\[1\]: node 's' (composite) is not a node"
prof '{"key": "xw", "op": "dot", "time_s": 1, "share": 0.5}, {"key": "s", "op": "composite", "origins": ["e", "s"], "time_s": 1, "share": 0.5}' pg5.json
check '"$TGVIZ" "$fx" -O none --profile "$tmp/pg5.json" -o "$tmp/pg5.html" 2>"$tmp/err" && [ ! -s "$tmp/err" ] &&
       "$TGVIZ" "$fx" --original --profile "$TG_TEST_DATA/viz/trace_prof.json" -o "$tmp/pg6.html" 2>"$tmp/err" &&
       [ ! -s "$tmp/err" ]' \
  "a fused node standing for the graph's nodes, and a profile without origins (trace_prof.json), are the graph's"
# NaN and Infinity, which json-c reads, would reach the page as words its
# JSON.parse refuses: not numbers >= 0 here.
mlp="$TG_SRC/examples/mlp.json"
echo '{"functions":[{"name":"train","nodes":[{"key":"xW1","time_s":NaN,"share":NaN}]}]}' >"$tmp/pn.json"
bad "$mlp" -f train --profile "$tmp/pn.json" -o "$tmp/x.html" "nodes\[0\].time_s: expected a number >= 0"
echo '{"functions":[{"name":"train","nodes":[{"key":"xW1","time_s":Infinity,"share":0.5}]}]}' >"$tmp/pi.json"
bad "$mlp" -f train --profile "$tmp/pi.json" -o "$tmp/x.html" "nodes\[0\].time_s: expected a number >= 0"
echo '{"functions":[{"name":"train","nodes":[{"key":"xW1","time_s":1,"share":NaN}]}]}' >"$tmp/ps.json"
bad "$mlp" -f train --profile "$tmp/ps.json" -o "$tmp/x.html" "nodes\[0\].share: expected a number in \[0, 1\]"
bad "$fx" -o '' "^tgviz: -o: expected a file name, got ''$"
# --include and --exclude choose the rewrites of the drawn function, as in
# tgc and tgprof.
"$TGVIZ" "$mlp" -f train --optimized -o "$tmp/fused.dot" && "$TGVIZ" "$mlp" -f train --optimized --exclude fusion -o "$tmp/unfused.dot"
check 'grep -q composite "$tmp/fused.dot" && ! grep -q composite "$tmp/unfused.dot"' "--exclude fusion: no composite drawn"
bad "$mlp" -f train --include nosuchrewrite -o "$tmp/x.svg" "nosuchrewrite"
# Nested bodies carry the types the library inferred, worked out by hand:
# the MLP's fused layer h = tanh(xW1 + b1), x (?, 784) . W1 (784, 500) and
# b1 (500,), has t0 = x0 + x1 and t1 = tanh(t0) of float32 (?, 500), the
# shape they have unfused; the RNN's scan body (examples/rnn.json) hh =
# dot(h_tm1 (?, 32), Wh_ (32, 32)) is (?, 32), as are ex, pre and h_t; in
# scan_scan.json the inner scan's h1 = h + xt is a float64 scalar. Before,
# what a body's JSON does not declare was "? ()", a scalar of no dtype.
# Fused kernels are of family composite (tgprof's class), loops control.
"$TGVIZ" "$mlp" -f train -o "$tmp/bt_mlp.html" && "$TGVIZ" "$TG_SRC/examples/rnn.json" -f train -o "$tmp/bt_rnn.html" &&
  "$TGVIZ" "$TG_TEST_DATA/tgdebug/scan_scan.json" -o "$tmp/bt_ss.html"
types=$(python3 - "$tmp/bt_mlp.html" "$tmp/bt_rnn.html" "$tmp/bt_ss.html" <<'PY'
import json, re, sys
def views(p):
    d = json.loads(re.search(r'<script id="tgviz-data" type="application/json">(.*?)</script>',
                             open(p).read(), re.S).group(1))
    for v in d["views"].values():
        def resolve(nodes):
            for n in nodes:
                b = n.get("body")
                if b and "ref" in b:
                    n["body"] = b = json.loads(json.dumps(v["bodies"][b["ref"]]).replace("\\u0001", b["key"]))
                if b: resolve(b["nodes"])
        resolve(v["nodes"])
    return d["views"]
def body(view, *ids):
    nodes = view["nodes"]
    for i in ids:
        n = next(n for n in nodes if n["id"] == i)
        nodes = n["body"]["nodes"]
    return n
def edges(n):
    return {e["var"]: e["label"] for e in n["body"]["edges"]}
out = []
m = views(sys.argv[1])
h = body(m["optimized"], "a:h")
out.append("mlp " + " ".join(f"{k}={edges(h)[k]}" for k in ("x0", "x1", "t0", "t1")))
out.append("fam " + ",".join(sorted({n["family"] for v in m.values() for n in v["nodes"] if n.get("op") == "composite"})))
r = views(sys.argv[2])
out.append("rnn " + " ".join(f"{k}={edges(body(r['original'], 'a:h'))[k]}" for k in ("hh", "ex", "pre", "h_t")))
out.append("fam " + ",".join(sorted({n["family"] for v in r.values() for n in v["nodes"] if n.get("op") == "scan"})))
ss = views(sys.argv[3])
out.append("ss " + edges(body(ss["original"], "a:E", "a:E/R"))["h1"])
print("|".join(out))
PY
)
check '[ "$types" = "mlp x0=float32 (?, 500) x1=float32 (500,) t0=float32 (?, 500) t1=float32 (?, 500)|fam composite|rnn hh=float32 (?, 32) ex=float32 (?, 32) pre=float32 (?, 32) h_t=float32 (?, 32)|fam control|ss float64 ()" ]' \
  "nested bodies: the library's types (hand-derived shapes); composites are family composite ($types)"
check '"$TGVIZ" --help | grep -q -- "--include TAG, --exclude TAG"' "--help describes --include and --exclude"
# Several functions, no -f: the first is drawn with a note, given once the
# drawing is there; a failure is its own one line.
"$TGVIZ" "$mlp" -o "$tmp/first.svg" 2>"$tmp/err"
check '[ $? = 0 ] && [ "$(cat "$tmp/err")" = "tgviz: drew function '"'"'train'"'"', the first of 2 (pick another with -f)" ]' \
  "the first of several functions: drawn, then the note ($(head -c 100 "$tmp/err"))"
bad "$mlp" -o "$tmp/nodir/x.svg" "nodir/x.svg: cannot create a temporary file"
# The layered layout sizes nodes so that Graphviz finds their labels fit
# (the update nodes' arrow is wider than an ASCII glyph): nothing on stderr.
for ex in mlp convnet rnn; do
  "$TGVIZ" "$TG_SRC/examples/$ex.json" -f train --layout layers -o "$tmp/lay_$ex.svg" 2>"$tmp/err"
  check '[ $? = 0 ] && [ ! -s "$tmp/err" ]' "$ex --layout layers: no warning ($(head -c 100 "$tmp/err"))"
done
check '[ ! -e "$tmp/x.html" ]' "no partial output after an error"
# A write that fails (here the file-size limit, as a full disk would)
# leaves the file that was at OUT as it was, and no temporary beside it;
# Graphviz's own writer would end the process there.
for fmt in html svg png; do
  echo previous >"$tmp/keep.$fmt"
  (ulimit -f 16; trap '' XFSZ; exec "$TGVIZ" "$TG_SRC/examples/mlp.json" -f train -o "$tmp/keep.$fmt") 2>"$tmp/err"
  rc=$?
  check '[ $rc = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "keep.$fmt: write failed: File too large" "$tmp/err" &&
         [ "$(cat "$tmp/keep.$fmt")" = previous ] && [ -z "$(ls "$tmp" | grep "keep.$fmt.tmp")" ]' \
    "a failed write of $fmt leaves the previous file and no temporary (rc $rc, $(head -c 100 "$tmp/err"))"
done
"$TGVIZ" "$TG_SRC/examples/mlp.json" -f train -o "$tmp/keep.svg" 2>/dev/null
check '[ $? = 0 ] && [ "$(svg_nodes "$tmp/keep.svg")" -gt 10 ] && [ -z "$(ls "$tmp" | grep "\.tmp\.")" ]' \
  "a write that succeeds replaces the file"
check '"$TGVIZ" --help | grep -q "usage: tgviz" && "$TGVIZ" --version | grep -q "^tgviz "' "--help and --version"

# A compiled-function file: the page of mlp.tgf holds the nodes, edges and
# origins that the page of mlp.json compiled with the same preset holds
# (the original view: the same apply nodes and as many edges); -O is refused; a file that keeps no original graph draws
# the optimized one (and refuses --original); a truncated file is one line.
"$TGC" compile "$TG_SRC/examples/mlp.json" -o "$tmp/mlp.tgf" >/dev/null
"$TGVIZ" "$TG_SRC/examples/mlp.json" -f train -o "$tmp/mlp_json.html"
"$TGVIZ" "$tmp/mlp.tgf" -f train -o "$tmp/mlp_tgf.html"
same=$(python3 - "$tmp/mlp_json.html" "$tmp/mlp_tgf.html" <<'PY'
import json, re, sys
def views(p):
    d = json.loads(re.search(r'<script id="tgviz-data" type="application/json">(.*?)</script>',
                             open(p).read(), re.S).group(1))
    # The original graph's inline constants get new ids when it is saved
    # and loaded again (written inline, named after their reader): compare
    # its apply nodes and its edge count; the optimized view whole.
    full = lambda k: k == "optimized"
    return {k: (sorted((n["id"], n.get("label"), tuple(n.get("origins", ())))
                       for n in v["nodes"] if full(k) or n["id"].startswith("a:")),
                sorted((e["source"], e["target"], e["var"]) for e in v["edges"]) if full(k) else len(v["edges"]))
            for k, v in d["views"].items()}
a, b = views(sys.argv[1]), views(sys.argv[2])
print("same" if a == b and set(a) == {"original", "optimized"} and len(a["optimized"][0]) > 10 else "differ")
PY
)
check '[ "$same" = same ]' "mlp.tgf draws the nodes, edges and origins of mlp.json compiled the same way ($same)"
bad "$tmp/mlp.tgf" -f train -O none -o "$tmp/x.html" "already optimized"
python3 "$TG_SRC/tests/tools/tgf_patch.py" "$tmp/mlp.tgf" "$tmp/noorig.tgf" header-drop original
"$TGVIZ" "$tmp/noorig.tgf" -f train -o "$tmp/noorig.html" 2>"$tmp/err"
check '[ $? = 0 ] && grep -q "keeps no original graph" "$tmp/err" && grep -q "\"optimized\":{" "$tmp/noorig.html" && ! grep -q "\"original\":{" "$tmp/noorig.html"' \
  "a .tgf without its original graph: the optimized view alone, with a note"
bad "$tmp/noorig.tgf" -f train --original -o "$tmp/x.html" "keeps no original graph"
head -c 3000 "$tmp/mlp.tgf" >"$tmp/trunc.tgf"
bad "$tmp/trunc.tgf" -o "$tmp/x.html" "truncated"

# Large graphs: leaves read by many nodes drawn beside each reader, the
# layered layout (tests/tools/viz_layout.py).
mkdir -p "$tmp/layout"
if python3 "$TG_SRC/tests/tools/viz_layout.py" "$TGVIZ" "$tmp/layout" >"$tmp/layout.out" 2>&1; then
  echo "ok: large-graph drawing and the layered layout"
  grep '^tgviz:' "$tmp/layout.out"
else
  echo "FAIL: large-graph drawing and the layered layout"
  sed 's/^/  | /' "$tmp/layout.out"
  fails=$((fails + 1))
fi

# ---- the pages in headless chromium ----
if ! command -v node >/dev/null || [ ! -x /usr/bin/chromium ]; then
  echo "skip: browser tests (need node and /usr/bin/chromium)"
elif [ ! -d "$TG_SRC/tests/browser/node_modules/playwright-core" ]; then
  echo "FAIL: browser tests: playwright-core missing (bash scripts/tg-setup.sh test installs it)"
  fails=$((fails + 1))
else
  pages="$tmp/pages" art="$TG_BUILD_DIR/tests/artifacts"
  mkdir -p "$pages" "$art"
  "$TGVIZ" "$TG_SRC/examples/mlp.json" -f train -o "$pages/mlp.html"
  "$TGVIZ" "$fx" -O none --profile "$TG_TEST_DATA/viz/trace_prof.json" -o "$pages/trace.html"
  "$TGVIZ" "$TG_SRC/examples/logreg.json" -f train --optimized --original -o "$pages/side.html"
  # six layers reading one weight (viz_layout.py wrote it): W drawn six times
  [ -f "$tmp/layout/six.json" ] && "$TGVIZ" "$tmp/layout/six.json" --original -o "$pages/copies.html"
  cp "$tmp/hostile.html" "$pages/hostile.html"
  # two chains that fuse into two composites with one body: written once
  "$TGVIZ" "$TG_TEST_DATA/viz/twin_bodies.json" --optimized -o "$pages/twin.html"
  # a scan's body typed by the library; a scan in a scan's body (search)
  "$TGVIZ" "$TG_SRC/examples/rnn.json" -f train -o "$pages/rnn.html"
  "$TGVIZ" "$TG_TEST_DATA/tgdebug/scan_scan.json" -o "$pages/scanscan.html"
  # scans in three scans' bodies and one at the top, their bodies' nodes
  # of the same keys: each body node's id holds its owner's whole path
  "$TGVIZ" "$TG_TEST_DATA/viz/nested_keys.json" --original --profile "$TG_TEST_DATA/viz/nested_keys_prof.json" -o "$pages/nested_keys.html"
  # an op_from_graph whose body's op_from_graph has a body of 3,000 nodes:
  # expanded, drawn as the top level is (only what is in view)
  python3 "$TG_SRC/tests/browser/gen_big.py" "$tmp/bigbody.json" 3000 2
  "$TGVIZ" "$tmp/bigbody.json" --optimized -O none -o "$pages/bigbody.html"
  if [ -z "${TG_SANITIZE:-}" ]; then
    # The large graph once, in the plain build (5,000 nodes as written:
    # fast_run fuses them): the layered layout, which auto picks above
    # 2,000 nodes, and dot's, for the time beside it.
    python3 "$TG_SRC/tests/browser/gen_big.py" "$tmp/big.json" 5000
    for lay in layers dot; do
      start=$(date +%s%N)
      "$TGVIZ" "$tmp/big.json" --optimized -O none --layout $lay -o "$pages/big_$lay.html"
      echo "tgviz: layout ($lay) and page of 5000 nodes: $((($(date +%s%N) - start) / 1000000)) ms"
    done
    mv "$pages/big_layers.html" "$pages/big.html"
    rm -f "$pages/big_dot.html"
  fi
  node "$TG_SRC/tests/browser/tgviz.test.js" "$pages" "$art" || fails=$((fails + 1))
fi

# ---- The command-line contract (DESIGN.md, "Tools") ----
. "$(dirname "$0")/lib/cli.bash"
cp "$fx" "$tmp/g.json"; keep "$tmp/g.json"
# The drawing must not replace the graph drawn (it did, exit 0).
one_line 2 "^tgviz: -o .*/g.json is the graph file being drawn: the drawing would replace it$" \
  "-o FILE" -- "$TGVIZ" "$tmp/g.json" --format dot -o "$tmp/./g.json"
unchanged "$tmp/g.json" "-o FILE leaves the graph"
# The unknown option is the one given.
one_line 2 "^tgviz: unknown option '-x' \(see tgviz --help\)$" "-xyz names -x" -- "$TGVIZ" "$tmp/g.json" -xyz -o "$tmp/u.html"
# Single-value options given twice are refused.
one_line 2 "^tgviz: -O given twice \('none' and 'fast_run'\)$" "-O twice" -- "$TGVIZ" "$tmp/g.json" -O none -O fast_run -o "$tmp/u.html"
one_line 2 "^tgviz: --format given twice" "--format twice" -- "$TGVIZ" "$tmp/g.json" --format dot --format svg -o "$tmp/u.svg"
one_line 2 "^tgviz: --layout given twice" "--layout twice" -- "$TGVIZ" "$tmp/g.json" --layout dot --layout layers -o "$tmp/u.html"
one_line 2 "^tgviz: --profile given twice" "--profile twice" -- "$TGVIZ" "$tmp/g.json" --profile a.json --profile b.json -o "$tmp/u.html"
# A failed write to stdout is one line, not two.
one_line 1 "^tgviz: -o -: write failed" "-o - >/dev/full" -- sh -c '"$0" "$1" --format dot -o - >/dev/full' "$TGVIZ" "$tmp/g.json"

[ $fails = 0 ] && echo "all tgviz tests passed" || echo "$fails tgviz test(s) failed"
exit $((fails > 0))
