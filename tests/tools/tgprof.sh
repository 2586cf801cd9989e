#!/usr/bin/env bash
# tgprof: the report ranks a large gemm above small elementwise ops, its
# tables in decreasing order of time; the per-node times add up to the
# time in nodes; the memory figures match
# sizes worked out by hand; the Chrome trace is valid JSON with every node
# event inside its call's; the JSON report validates against
# schemas/profile.schema.json; the examples profile; bad input gets exit 2
# (a run-time failure exit 1) with one line on stderr; the bodies of scans
# (the RNN's, a scan in a scan's body) have their section, JSON and trace
# events, with steps = calls x steps per call; long and hostile names
# (a function's, a body's) stay whole, valid UTF-8, and escaped.
set -uo pipefail
: "${TGPROF:?}" "${TG_SRC:?}" "${TG_BUILD_DIR:?}" "${TG_TEST_DATA:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
PY=/usr/bin/python3

# One line on stderr, starting "tgprof: ", and the exit status wanted.
bad() {
  local want=$1 what=$2
  shift 2
  "$TGPROF" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -eq "$want" ] && [ "$lines" -eq 1 ] && grep -q '^tgprof: ' "$tmp/err"; then
    echo "ok: $what: exit $rc, $(cat "$tmp/err")"
  else
    echo "FAIL: $what: exit $rc (want $want), $lines lines on stderr:"
    cat "$tmp/err"
    fails=$((fails + 1))
  fi
}

costly="$TG_TEST_DATA/prof/costly.json"
counter="$TG_TEST_DATA/tools/counter.json"

check '"$TGPROF" --help | grep -q "usage: tgprof FILE"' "--help"
check '"$TGPROF" --version | grep -q "^tgprof "' "--version"
bad 2 "no FILE"
bad 2 "a missing file" "$tmp/nope.json"
bad 2 "a file that is not a graph" "$TG_SRC/README.md"
bad 2 "--calls 0" "$costly" --calls 0 -i v='[1,2,3,4,5,6,7,8]'
bad 2 "--calls x" "$costly" --calls x -i v='[1,2,3,4,5,6,7,8]'
bad 2 "--top -1" "$costly" --top -1 -i v='[1,2,3,4,5,6,7,8]'
bad 2 "an unknown option" "$costly" --frobnicate
bad 2 "--json given twice" "$costly" -i v='[1,2,3,4,5,6,7,8]' --json "$tmp/a.json" --json "$tmp/b.json"
grep -q "^tgprof: --json given twice" "$tmp/err" && [ ! -e "$tmp/a.json" ] && [ ! -e "$tmp/b.json" ] && echo "ok: --json twice: named, nothing written" || { echo "FAIL: --json twice: $(cat "$tmp/err")"; fails=$((fails + 1)); }
bad 2 "an option without its value" "$costly" --calls
bad 2 "an unknown preset" "$costly" -O fastest -i v='[1,2,3,4,5,6,7,8]'
bad 2 "an unknown function" "$costly" -f nope -i v='[1,2,3,4,5,6,7,8]'
bad 2 "a missing input" "$costly"
bad 2 "an input the function lacks" "$costly" -i v='[1,2,3,4,5,6,7,8]' -i w=1
bad 2 "a value of the wrong shape" "$costly" -i v='[1,2,3]'
bad 2 "-i without =" "$costly" -i v
bad 2 "an unwritable --json" "$costly" -i v='[1,2,3,4,5,6,7,8]' --calls 1 --json "$tmp/no/such/dir/r.json"
bad 2 "an unwritable --trace" "$costly" -i v='[1,2,3,4,5,6,7,8]' --calls 1 --trace "$tmp/no/such/dir/t.json"
# An empty path is bad usage, named, before the function is even loaded.
for opt in --json --trace; do
  bad 2 "$opt ''" "$tmp/nope.json" $opt ''
  grep -qx "tgprof: $opt: expected a file name, got ''" "$tmp/err" && echo "ok: $opt '': named" ||
    { echo "FAIL: $opt '': $(cat "$tmp/err")"; fails=$((fails + 1)); }
done
bad 2 "--calls plus --warmup past 2^63 - 1" "$costly" -i v='[1,2,3,4,5,6,7,8]' --calls 9223372036854775807
# An unwritable file is said before anything runs (no report on stdout),
# and the other file is not written either.
"$TGPROF" "$costly" -i v='[1,2,3,4,5,6,7,8]' --calls 1 --json "$tmp/no/such/dir/r.json" --trace "$tmp/ok.trace.json" >"$tmp/out" 2>/dev/null
check '[ $? -eq 2 ] && [ ! -s "$tmp/out" ] && [ ! -e "$tmp/ok.trace.json" ] && [ -z "$(ls "$tmp" | grep "ok.trace.json.tmp")" ]' \
  "an unwritable --json stops tgprof before the run, and the --trace is not written"
bad 1 "a run-time failure (division by zero)" "$counter" -f div -i k=0

# libgomp's spin count (tools/common/ompspin.h): tgprof starts itself again
# with GOMP_SPINCOUNT=1000, as tgc run does; TG_OMP_SPIN=N asks for N rounds
env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u TG_OMP_SPIN -u TG_OMP_RESPAWNED OMP_DISPLAY_ENV=verbose \
  "$TGPROF" "$counter" -f div -i k=2 --calls 2 >/dev/null 2>"$tmp/spin.err"
check 'grep -q "GOMP_SPINCOUNT = '"'1000'"'" "$tmp/spin.err"' "tgprof runs with libgomp's threads spinning 1000 rounds"
env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u TG_OMP_RESPAWNED TG_OMP_SPIN=30 OMP_DISPLAY_ENV=verbose \
  "$TGPROF" "$counter" -f div -i k=2 --calls 2 >/dev/null 2>"$tmp/spin.err"
check 'grep -q "GOMP_SPINCOUNT = '"'30'"'" "$tmp/spin.err"' "tgprof with TG_OMP_SPIN=30 runs with libgomp's threads spinning 30 rounds"

# Unoptimized: the optimizer would fold the constant gemm away; the nodes
# and their memory are the file's.
"$TGPROF" "$costly" -O none -i v='[1,2,3,4,5,6,7,8]' --calls 5 --warmup 2 --top 3 \
  --json "$tmp/costly.json" --trace "$tmp/costly.trace.json" >"$tmp/costly.txt" 2>"$tmp/costly.err"
check '[ $? -eq 0 ] && [ ! -s "$tmp/costly.err" ]' "tgprof runs the costly graph"
# The tables run in decreasing order of time, and the gemm ranks above the
# small elementwise nodes (their class too). Not "first": the nodes that
# make the gemm's operands, arange and zeros_like over 6.5 MB, can come
# close to it where a fresh page is dear, and take longer in the sanitizer
# build (Debug: tg's own kernels unoptimized and instrumented, OpenBLAS
# not).
table() { sed -n "/^$1/,/^\$/p" "$tmp/costly.txt" | sed -n '4,$p' | awk '$1 ~ /%$/'; }
sorted_desc() { table "$1" | awk 'NR > 1 && $3 > prev {bad = 1} {prev = $3; n++} END {exit bad || n < 3}'; }
# The position of a row (by its name column) in a table, 0 when not shown.
row_of() { table "$1" | awk -v k="$2" -v c="$3" '$(NF - c) == k {print NR; found = 1; exit} END {if (!found) print 0}'; }
check 'sorted_desc "Nodes (apply)"' "the node table is in decreasing order of time"
check 'sorted_desc "Op classes"' "the op class table is in decreasing order of time"
check '[ "$(row_of "Nodes (apply)" g 1)" -gt 0 ]' "the gemm node is among the 3 rows shown"
check 'b=$(row_of "Op classes" blas 0); e=$(row_of "Op classes" elemwise 0); [ "$b" -gt 0 ] && { [ "$e" = 0 ] || [ "$b" -lt "$e" ]; }' \
  "blas ranks above elemwise"
check 'grep -q "^  ... (remaining 6 nodes account for" "$tmp/costly.txt"' "--top 3 leaves 6 nodes to the remaining line"
check 'grep -q "no optimizer passes ran (preset none)" "$tmp/costly.txt"' "the optimizer section says no pass ran"
check 'grep -q "Calls: 5 (after 2 warm-up calls)" "$tmp/costly.txt"' "the summary counts calls and warm-up calls"
check 'grep -q "Trace: the first 5 of 5 calls in" "$tmp/costly.txt"' "the summary says what the trace holds"

$PY - "$tmp/costly.json" "$tmp/costly.trace.json" "$(table "Nodes (apply)" | head -1 | awk '{print $(NF-1)}')" <<'PY'
import json, sys
text_first = sys.argv[3]
rep = json.load(open(sys.argv[1]))
f = rep["functions"][0]
fails = 0
def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += 0 if ok else 1
nodes = f["nodes"]
byname = {n["key"]: n for n in nodes}
top = max(nodes, key=lambda n: n["time_s"])
check(top["key"] == text_first, "the JSON's slowest node (%s) heads the text's node table (%s)" % (top["key"], text_first))
gemm = byname["g"]
check(gemm["op"] == "gemm", "g is the gemm")
for small in ("e1", "e2", "e3"):
    check(byname[small]["time_s"] < gemm["time_s"] / 5, "%s takes well under a fifth of the gemm" % small)
tsum = sum(n["time_s"] for n in nodes)
tin = f["time_in_nodes_s"]
check(abs(tsum - tin) <= 0.05 * tin, "per-node times (%.6f s) sum to the time in nodes (%.6f s) within 5%%" % (tsum, tin))
check(0 < tin <= f["total_s"], "time in nodes %.6f s <= total %.6f s" % (tin, f["total_s"]))
check(abs(f["vm_overhead_s"] - (f["total_s"] - tin)) < 1e-9, "VM overhead is total minus time in nodes")
check(abs(sum(n["share"] for n in nodes) - 1) < 1e-6, "node shares sum to 1")
for group in ("ops", "op_classes"):
    s = sum(g["time_s"] for g in f[group])
    check(abs(s - tin) <= 1e-6 * max(tin, 1e-9) + 1e-9, "%s times sum to the time in nodes" % group)
    check(sum(g["nodes"] for g in f[group]) == len(nodes), "%s count every node once" % group)
check(all(n["calls"] == 5 for n in nodes), "every node ran once per profiled call")
check(byname["g"]["flops"] == 2 * 320 ** 3, "gemm's flops are 2*320^3 (%s)" % byname["g"]["flops"])
m = f["memory"]
# flat and z: 320*320 float64 each = 819200; e1, e2, e3: 8 float64 = 64
check(m["peak_bytes_no_gc"] == 2 * 819200 + 3 * 64 and m["allocated_bytes"] == 2 * 819200 + 3 * 64,
      "allocated and no-GC peak are 2*819200 + 3*64 bytes (%d)" % m["peak_bytes_no_gc"])
check(2 * 819200 <= m["peak_bytes"] <= 2 * 819200 + 3 * 64, "the peak with freeing is flat + z (%d)" % m["peak_bytes"])
check((m["new_outputs"], m["views"], m["inplace"]) == (5, 3, 1), "5 new outputs, 3 views, 1 in place")
kinds = {o["id"]: (o["kind"], o.get("of")) for n in nodes for o in n["outputs"]}
check(kinds["g"] == ("inplace", "z") and kinds["x"] == ("view", "flat") and kinds["s"] == ("view", "g")
      and kinds["e4"] == ("view", "e3") and kinds["z"][0] == "new", "output kinds: %s" % kinds)
check(byname["g"]["bytes_allocated"] == 0 and byname["z"]["bytes_allocated"] == 819200, "bytes allocated per node")
check([o["key"] for o in f["original_nodes"]].count("g") == 1 and all(o["via"] for o in f["original_nodes"]),
      "original nodes list each file node once")
check(f["optimizer"]["passes"] == [] or all("nodes_before" in p for p in f["optimizer"]["passes"]), "optimizer passes")

t = json.load(open(sys.argv[2]))
ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
calls = [e for e in ev if e.get("cat") == "call"]
check(len(calls) == 5, "the trace has one event per profiled call (%d)" % len(calls))
ok = True
for e in ev:
    for k in ("name", "ph", "ts", "dur", "pid", "tid"):
        ok = ok and k in e
for c in calls:
    inner = [e for e in ev if e.get("cat") != "call" and c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"]]
    ok = ok and len(inner) == len(nodes)
    ok = ok and all({"op", "shapes", "output_bytes", "bytes_allocated"} <= set(e["args"]) for e in inner)
check(ok, "every call event encloses exactly its %d node events, each with op, shapes and bytes" % len(nodes))
tb = {e["name"]: e["args"] for e in ev if e.get("cat") != "call"}
check(tb["g"]["bytes_allocated"] == 0 and tb["g"]["output_bytes"] == 819200 and
      tb["z"]["bytes_allocated"] == 819200 and tb["x"]["bytes_allocated"] == 0,
      "the trace's bytes_allocated counts new buffers only, output_bytes every output (g: %s)" % tb.get("g"))
nodes_ev = sorted((e for e in ev if e.get("cat") != "call"), key=lambda e: e["ts"])
check(all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(nodes_ev, nodes_ev[1:])), "node events do not overlap")
check(len(nodes_ev) == 5 * len(nodes), "no node event outside a call")
live = [e["args"]["bytes"] for e in t["traceEvents"] if e.get("ph") == "C" and e["name"] == "live memory"]
check(len(live) == 2 * 5 * len(nodes) and max(live) == m["peak_bytes"],
      "the live-memory counter track peaks at the report's peak (%s)" % (max(live) if live else None))
sys.exit(1 if fails else 0)
PY
[ $? -eq 0 ] || fails=$((fails + 1))

# The examples: the MLP's training function and the logistic regression.
"$TG_BUILD_DIR/tools/tg-example-mlp-data" "$tmp" 200
"$TGPROF" "$TG_SRC/examples/mlp.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 3 \
  --json "$tmp/mlp.json" --trace "$tmp/mlp.trace.json" >"$tmp/mlp.txt"
check '[ $? -eq 0 ] && grep -q "^Nodes (apply)" "$tmp/mlp.txt"' "tgprof profiles the MLP's training function"
check 'grep -q "^  Environment: tg [0-9][0-9.]*; OpenBLAS .*; [0-9]* OpenMP threads\? (GOMP_SPINCOUNT 1000); [0-9]* cores\? online" "$tmp/mlp.txt"' \
  "the report's header names the BLAS, the threads, the spin count and the cores"
$PY - "$tmp/mlp.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["functions"][0]
fails = 0
def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += 0 if ok else 1
nodes = {n["key"]: n for n in f["nodes"]}
check(len(nodes) > 20 and all(n["calls"] == 3 for n in nodes.values()), "the MLP's report has every node, each run 3 times")
passes = f["optimizer"]["passes"]
check(len(passes) > 0 and all(p["nodes_before"] > 0 and p["time_s"] >= 0 for p in passes),
      "the optimizer's passes are listed (%s)" % ", ".join(p["name"] for p in passes))
check(f["optimize_s"] <= f["compile_s"], "optimizer time is part of compile time")
# A fused node stands for several file nodes, and each of them shows its
# whole time; every original node's time is the sum over its stand-ins.
fused = [n for n in nodes.values() if len(n["origins"]) > 1]
check(len(fused) > 0, "some scheduled nodes stand for several file nodes (%d)" % len(fused))
orig = {o["key"]: o for o in f["original_nodes"]}
ok = True
for o in orig.values():
    want = sum(nodes[k]["time_s"] for k in o["via"])
    ok = ok and abs(o["time_s"] - want) <= 1e-9 + 1e-9 * want
for n in fused:
    for k in n["origins"]:
        ok = ok and k in orig and n["key"] in orig[k]["via"]
check(ok, "original nodes carry the time of the scheduled nodes standing for them")
# The keys the grad's expansion made (gW1.<n>) name no node of the file:
# each says whose derivative it is; the file's own keys say nothing.
grads = {k: o["gradient"] for k, o in orig.items() if "gradient" in o}
check(len(grads) > 0 and all(k.startswith("gW1.") and g["by"] == "gW1" and g["by_op"] == "grad"
                             for k, g in grads.items()) and
      all("gradient" not in o for k, o in orig.items() if not k.startswith("gW1.")),
      "the gradient's keys say they come from grad gW1 (%d of them), the file's keys do not" % len(grads))
check(any(g.get("of") == "xW1" and g.get("of_op") == "dot" for g in grads.values()),
      "one of them differentiates xW1 (dot)")
sys.exit(1 if fails else 0)
PY
[ $? -eq 0 ] || fails=$((fails + 1))
check 'grep -q "composite{" "$tmp/mlp.txt"' "fused nodes are named by their body (composite{...})"
check 'grep -q "  gW1\.[0-9]* (grad gW1 of [a-zA-Z0-9_]*) " "$tmp/mlp.txt"' "the original nodes table says which node a gradient's key differentiates"
# A compiled-function file: restored without optimizing, origins kept.
if [ -n "${TGC:-}" ] && "$TGC" compile "$TG_SRC/examples/mlp.json" -f train -o "$tmp/mlp.tgf" >/dev/null; then
  "$TGPROF" "$tmp/mlp.tgf" -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 2 --json "$tmp/tgf.json" >"$tmp/tgf.txt"
  check '[ $? -eq 0 ] && grep -q "restored from a .tgf: the passes recorded when it was compiled" "$tmp/tgf.txt" && grep -q "total when it was compiled" "$tmp/tgf.txt"' \
    "tgprof profiles a .tgf, restored without optimizing, with the passes of its compile"
  check '$PY -c "import json,sys; f=json.load(open(sys.argv[1]))[\"functions\"][0]; sys.exit(not (f[\"preset\"] == \"saved\" and any(len(n[\"origins\"]) > 1 for n in f[\"nodes\"])))" "$tmp/tgf.json"' \
    "the .tgf's report says preset saved and keeps the fused nodes' origins"
  bad 2 "-O with a .tgf" "$tmp/mlp.tgf" -O none -i x="$tmp/x.npy" -i y="$tmp/y.npy"
fi
"$TG_BUILD_DIR/tools/tg-example-logreg-data" "$tmp" 100 >/dev/null
"$TGPROF" "$TG_SRC/examples/logreg.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 2 \
  --json "$tmp/logreg.json" >/dev/null
check '[ $? -eq 0 ]' "tgprof profiles the logistic regression"
# A scan is named by its body's name, scan{rnn}, as Theano's Scan{rnn},
# not by the text of its body.
R=(-f train -i x="$TG_SRC/examples/rnn/x.npy" -i y="$TG_SRC/examples/rnn/y.npy" --calls 1 --warmup 0 --top 100)
"$TGPROF" "$TG_SRC/examples/rnn.json" "${R[@]}" >"$tmp/rnn.txt"
check '[ $? -eq 0 ] && grep -q "  scan{rnn}$" "$tmp/rnn.txt" && grep -q "  scan{grad_of_rnn}$" "$tmp/rnn.txt" &&
       [ "$(awk "length > 1000" "$tmp/rnn.txt" | wc -l)" -eq 0 ]' "the RNN's scans are scan{rnn} and scan{grad_of_rnn}, no line over 1000 characters"
# The bodies (Theano's Scan Op profiling): the RNN's forward scan runs one
# step per row of x (read from the .npy header here, not from tgprof).
T=$($PY -c 'import ast,sys; h=open(sys.argv[1],"rb").read(256); print(ast.literal_eval(h[10:10+h[8]+256*h[9]].decode())["shape"][0])' "$TG_SRC/examples/rnn/x.npy")
"$TGPROF" "$TG_SRC/examples/rnn.json" -f train -i x="$TG_SRC/examples/rnn/x.npy" -i y="$TG_SRC/examples/rnn/y.npy" \
  --calls 3 --top 1 --json "$tmp/rnnb.json" --trace "$tmp/rnnb.trace.json" >"$tmp/rnnb.txt"
check '[ $? -eq 0 ] && grep -q "^Scan and op_from_graph bodies$" "$tmp/rnnb.txt"' "the report has a section for the bodies"
body() { sed -n "/^Body of $1 /,/^\$/p" "$tmp/rnnb.txt"; }
check 'body "scan{rnn}" | grep -q "^  Calls of the node: 3, steps in all: $((3 * T)) ($T.0 per call)$"' \
  "scan{rnn}'s body: 3 calls, $((3 * T)) steps"
check 'body "scan{grad_of_rnn}" | grep -q "steps in all: $((3 * T)) "' "scan{grad_of_rnn}'s body: $((3 * T)) steps"
check 'body "scan{rnn}" | grep -q "^  Time in the body.s nodes: .* of the node.s time" && body "scan{rnn}" | grep -q "^  Loop overhead: "' \
  "a body's section gives the time in its nodes and the loop's overhead"
# --top 1: one row per body table, and the rest counted.
grad_nodes() { sed -n '/^Body of scan{grad_of_rnn} /,$p' "$tmp/rnnb.txt" | sed -n '/^  Nodes (apply)/,/^$/p'; }
check '[ "$(grad_nodes | awk '"'"'$1 ~ /^[0-9.]+%$/'"'"' | wc -l)" -eq 1 ] &&
       grad_nodes | grep -q "^  ... (remaining [0-9]* nodes account for .* of the node.s time)"' \
  "--top 1 holds for a body's tables"
"$TGPROF" "$TG_SRC/examples/rnn.json" -f train -i x="$TG_SRC/examples/rnn/x.npy" -i y="$TG_SRC/examples/rnn/y.npy" \
  --calls 1 --no-bodies --json "$tmp/rnnnb.json" >"$tmp/rnnnb.txt"
check '[ $? -eq 0 ] && ! grep -q "^Body of" "$tmp/rnnnb.txt" && grep -q "Bodies: not profiled (--no-bodies)" "$tmp/rnnnb.txt" &&
       $PY -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"functions\"][0][\"bodies\"] != [])" "$tmp/rnnnb.json"' \
  "--no-bodies leaves the bodies out"
# A scan of k steps whose body is a scan of m steps.
cat >"$tmp/nested.json" <<'J'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [4]}},
               {"id": "k", "type": {"dtype": "int32", "shape": []}}, {"id": "m", "type": {"dtype": "int32", "shape": []}}],
 "nodes": [{"op": "scan", "inputs": ["k", "x", "m"], "outputs": ["hs"], "attrs": {
   "n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]], "n_nonrecurrent": 0,
   "n_non_sequences": 1, "has_n_steps": true, "has_until": false, "name": "outer", "body": {
     "variables": [{"id": "h_p", "type": {"dtype": "float64", "shape": [4]}}, {"id": "m_", "type": {"dtype": "int32", "shape": []}}],
     "nodes": [{"op": "scan", "inputs": ["m_", "h_p"], "outputs": ["gs"], "attrs": {
         "n_sequences": 0, "sequence_taps": [], "n_recurrent": 1, "output_taps": [[-1]], "n_nonrecurrent": 0,
         "n_non_sequences": 0, "has_n_steps": true, "has_until": false, "name": "inner", "body": {
           "variables": [{"id": "g_p", "type": {"dtype": "float64", "shape": [4]}}],
           "nodes": [{"op": "sin", "inputs": ["g_p"], "outputs": ["g_t"]}], "inputs": ["g_p"], "outputs": ["g_t"]}}},
       {"op": "subtensor", "inputs": ["gs"], "outputs": ["h_t"], "attrs": {"index": [-1]}}],
     "inputs": ["h_p", "m_"], "outputs": ["h_t"]}}}],
 "functions": {"main": {"inputs": ["x", "k", "m"], "outputs": ["hs"]}}}
J
"$TGPROF" "$tmp/nested.json" -i x='[1,2,3,4]' -i k=6 -i m=7 --calls 2 --json "$tmp/nested.prof.json" \
  --trace "$tmp/nested.trace.json" >"$tmp/nested.txt"
# (the optimizer keys the inner scan gs:scan)
check '[ $? -eq 0 ] && grep -q "^Body of scan{outer} hs > scan{inner} gs[:a-z]*$" "$tmp/nested.txt" &&
       sed -n "/^Body of scan{outer} hs > scan{inner} /,/^\$/p" "$tmp/nested.txt" | grep -q "Calls of the node: 12, steps in all: 84 (7.0 per call)"' \
  "a scan in a scan's body is titled by its path; it runs 2 x 6 times, 2 x 6 x 7 steps"
$PY - "$tmp/rnnb.json" "$tmp/rnnb.trace.json" "$T" "$tmp/nested.prof.json" "$tmp/nested.trace.json" <<'PY'
import json, sys
fails = 0
def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += 0 if ok else 1
T = int(sys.argv[3])
f = json.load(open(sys.argv[1]))["functions"][0]
nodes = {n["key"]: n for n in f["nodes"]}
bodies = {b["op_key"]: b for b in f["bodies"]}
check(sorted(bodies) == ["scan{grad_of_rnn}", "scan{rnn}"], "the RNN's report has the bodies of its two scans (%s)" % sorted(bodies))
for name, b in bodies.items():
    outer = nodes[b["node"]]
    check(outer["op_key"] == name and outer["index"] == b["index"], "%s: its node %s is in the function" % (name, b["node"]))
    check(b["calls"] == 3 and b["steps"] == 3 * T, "%s: 3 calls, %d steps (%d, %d)" % (name, 3 * T, b["calls"], b["steps"]))
    check(all(n["calls"] == 3 * T for n in b["nodes"]), "%s: every body node ran once per step" % name)
    tin = sum(n["time_s"] for n in b["nodes"])
    check(abs(b["time_s"] - outer["time_s"]) < 1e-9, "%s: the body's time is its node's" % name)
    check(all(n["time_s"] > 0 for n in b["nodes"]) and tin <= b["time_s"] * (1 + 1e-9),
          "%s: body node times are > 0 and sum (%.6f s) to at most the node's (%.6f s)" % (name, tin, b["time_s"]))
    check(abs(b["time_in_nodes_s"] - tin) < 1e-6 and abs(b["overhead_s"] - (b["time_s"] - tin)) < 1e-6,
          "%s: time in nodes and overhead add up" % name)
    check(abs(sum(n["share"] for n in b["nodes"]) - tin / b["time_s"]) < 1e-6, "%s: shares are of the node's time" % name)
    check(b["bodies"] == [], "%s: no body within" % name)
# The trace: runs of body nodes nested within their scan node's event.
t = json.load(open(sys.argv[2]))
ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
scan_ev = {}
for e in ev:
    if e.get("cat") != "call" and "body" not in e["args"] and e["name"] in (bodies["scan{rnn}"]["node"], bodies["scan{grad_of_rnn}"]["node"]):
        scan_ev.setdefault(e["name"], []).append(e)
bev = [e for e in ev if "body" in e.get("args", {})]
ok = len(bev) > 0
for e in bev:
    outer = [s for s in scan_ev.get(e["args"]["body"].split(" ")[-1], []) if s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]]
    ok = ok and len(outer) == 1 and 0 <= e["args"]["step"] < T
check(ok, "each of the trace's %d body events lies within its scan node's event, with its step" % len(bev))
nb = sum(len(b["nodes"]) for b in bodies.values())
check(len(bev) == 3 * T * nb, "the trace holds every body node's run in the 3 calls (%d)" % len(bev))
# Nested: outer body 2 x 6 steps, inner 2 x 6 x 7.
f = json.load(open(sys.argv[4]))["functions"][0]
bo = f["bodies"][0]
check(bo["op_key"] == "scan{outer}" and bo["calls"] == 2 and bo["steps"] == 12, "the outer body: 2 calls, 12 steps")
bi = bo["bodies"][0] if len(bo["bodies"]) == 1 else {}
check(bi.get("op_key") == "scan{inner}" and bi.get("calls") == 12 and bi.get("steps") == 84
      and all(n["calls"] == 84 for n in bi["nodes"]), "the inner body: 12 calls, 84 steps, each node 84 runs")
inner_node = [n for n in bo["nodes"] if n["key"] == bi.get("node")]
check(len(inner_node) == 1 and abs(inner_node[0]["time_s"] - bi["time_s"]) < 1e-9 and bi["time_in_nodes_s"] <= bi["time_s"]
      and bo["time_in_nodes_s"] <= bo["time_s"], "the inner scan's time is a node of the outer body's")
t = json.load(open(sys.argv[5]))
steps = sorted({e["args"]["step"] for e in t["traceEvents"] if e.get("ph") == "X" and "scan{inner}" in e.get("args", {}).get("body", "")})
check(steps == list(range(7)), "the inner body's trace events have steps 0..6 (%s)" % steps)
sys.exit(1 if fails else 0)
PY
[ $? -eq 0 ] || fails=$((fails + 1))
$PY -c 'import json,sys; [json.load(open(p)) for p in sys.argv[1:]]' "$tmp/mlp.trace.json" \
  && echo "ok: the MLP's trace is valid JSON" || { echo "FAIL: the MLP's trace is not valid JSON"; fails=$((fails + 1)); }
$PY -c 'import json, sys; e = json.load(open(sys.argv[1]))["otherData"]; sys.exit(not e["blas"].startswith("OpenBLAS ") or e["openmp_threads"] < 1)' \
  "$tmp/mlp.trace.json" && echo "ok: the trace's otherData names the BLAS and the threads" ||
  { echo "FAIL: the trace's otherData"; fails=$((fails + 1)); }
# A report or trace whose write fails (the file-size limit, as a full disk
# would) leaves the file that was there as it was, and no temporary.
for opt in json trace; do
  echo previous >"$tmp/keep.$opt"
  (ulimit -f 8; trap '' XFSZ; exec "$TGPROF" "$TG_SRC/examples/logreg.json" -f train -i x="$tmp/x.npy" \
     -i y="$tmp/y.npy" --calls 2 --$opt "$tmp/keep.$opt") >/dev/null 2>"$tmp/err"
  rc=$?
  check '[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^tgprof: --$opt .*keep.$opt: write failed" "$tmp/err" &&
         [ "$(cat "$tmp/keep.$opt")" = previous ] && [ -z "$(ls "$tmp" | grep "keep.$opt.tmp")" ]' \
    "a failed --$opt write leaves the previous file and no temporary (rc $rc, $(head -c 100 "$tmp/err"))"
done

# Hostile names. A function named by 200 two-byte characters, and one by
# 300 ASCII letters: each call's trace event is the whole name then " call
# N" (a 300-byte buffer cut the first inside a character, which no JSON
# reader takes, and the second before " call N", so every call had one
# name). An op_from_graph whose body's name is 400 two-byte characters:
# its body's title is the whole name and the node's key (a 600-byte buffer
# cut them). One whose name holds a terminal's escapes and a newline: the
# text report shows them escaped as in JSON (as print{...} shows its
# message), no raw control character, no split row.
$PY - "$tmp/names.json" <<'PY'
import json, sys
body = {"variables": [{"id": "a", "type": {"dtype": "float64", "shape": [3]}}], "inputs": ["a"], "outputs": ["o"],
        "nodes": [{"op": "neg", "inputs": ["a"], "outputs": ["o"]}]}
ofg = lambda x, y, name: {"op": "op_from_graph", "inputs": [x], "outputs": [y], "attrs": {"name": name, "body": body}}
fn = {"inputs": ["x"], "outputs": ["z"]}
json.dump({"format": "tg-graph", "version": 1, "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}}],
           "nodes": [ofg("x", "y", "\u00e9" * 400), ofg("y", "z", "e\u001b[31mR\u001b]0;T\u0007\nnext\tcol")],
           "functions": {"\u00e9" * 200: fn, "f" * 300: fn}}, open(sys.argv[1], "w"), ensure_ascii=False)
PY
for f in long ascii; do
  fname=$($PY -c "import sys; print('\u00e9' * 200 if sys.argv[1] == 'long' else 'f' * 300)" $f)
  "$TGPROF" "$tmp/names.json" -f "$fname" -i x='[1,2,3]' --calls 2 --trace "$tmp/names.$f.trace.json" \
    --json "$tmp/names.$f.prof.json" >"$tmp/names.$f.txt"
  check '[ $? -eq 0 ] && $PY - "$tmp/names.$f.trace.json" "$fname" <<'"'PY'"'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
names = [e["name"] for e in t["traceEvents"] if e.get("cat") == "call"]
sys.exit(names != [sys.argv[2] + " call 1", sys.argv[2] + " call 2"])
PY' "--trace of a function named by $(printf %s "$fname" | wc -m) characters: valid UTF-8, calls named NAME call 1, NAME call 2"
done
t="$tmp/names.long.txt"
check '$PY -c "import sys; open(sys.argv[1], encoding=\"utf-8\").read()" "$t" &&
       grep -qx "Body of op_from_graph{$($PY -c "print(\"\\u00e9\" * 400)")} y" "$t"' \
  "a body's name of 800 bytes: valid UTF-8, whole in its title with the node's key"
check '! grep -q "$(printf "[\001-\010\013-\037]")" "$t" &&
       grep -qF "Body of op_from_graph{e\\u001b[31mR\\u001b]0;T\\u0007\\nnext\\tcol} z" "$t" &&
       [ "$(grep -cF "op_from_graph{e\\u001b[31mR\\u001b]0;T\\u0007\\nnext\\tcol}" "$t")" -ge 4 ] &&
       ! grep -q "^next" "$t"' \
  "a body's name: control characters escaped as in JSON, one row each"
# A function's name holding a terminal's escape and a newline: the report's
# "File: ..., function '...'" line shows them escaped as body names are
# (it printed the name raw: the escape reached the terminal, and the
# newline began a forged "  Calls: 999" line).
$PY - "$tmp/fname.json" <<'PY'
import json, sys
t = {"dtype": "float64", "shape": [3]}
json.dump({"format": "tg-graph", "version": 1, "variables": [{"id": "x", "type": t}],
           "nodes": [{"op": "neg", "inputs": ["x"], "outputs": ["y"]}],
           "functions": {"f\u001b[31mX\n  Calls: 999": {"inputs": ["x"], "outputs": ["y"]}}}, open(sys.argv[1], "w"))
PY
"$TGPROF" "$tmp/fname.json" -i x='[1,2,3]' --calls 2 >"$tmp/fname.txt"
check '[ $? -eq 0 ] && ! grep -q "$(printf "[\001-\010\013-\037]")" "$tmp/fname.txt" &&
       grep -qF "  File: $tmp/fname.json, function '"'"'f\u001b[31mX\n  Calls: 999'"'"', preset fast_run" "$tmp/fname.txt" &&
       ! grep -q "^  Calls: 999" "$tmp/fname.txt"' \
  "a function's name: control characters escaped as in JSON, no forged line"
# The ops table groups one op with the same canonical attrs into one row,
# however the file wrote them: keys in another order, a default left out
# (conv2d's filter_dilation, filter_flip; sum's keepdims), an axis as an
# integer, a one-element list or a negative number (of a 2-d input: 0,
# [0], [-2] are one axis; -1 and 1 of softmax too; a sum's null is every
# axis, [0, 1], while argmax's null, a flat index, stays null). Before,
# each spelling was a row of its own (7 rows for 3 ops; and null apart).
cat >"$tmp/canon.json" <<'J'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "cx", "type": {"dtype": "float64", "shape": [1, 1, 5, 5]}},
               {"id": "cw", "type": {"dtype": "float64", "shape": [1, 1, 3, 3]}},
               {"id": "gz", "type": {"dtype": "float64", "shape": [2, 3]}}],
 "nodes": [
  {"op": "conv2d", "inputs": ["cx", "cw"], "attrs": {"border_mode": "valid", "subsample": [2, 2]}, "outputs": ["c1"]},
  {"op": "conv2d", "inputs": ["cx", "cw"], "attrs": {"subsample": [2, 2], "border_mode": "valid"}, "outputs": ["c2"]},
  {"op": "conv2d", "inputs": ["cx", "cw"], "attrs": {"subsample": [2, 2]}, "outputs": ["c3"]},
  {"op": "sum", "inputs": ["gz"], "attrs": {"axis": [0], "keepdims": false}, "outputs": ["s1"]},
  {"op": "sum", "inputs": ["gz"], "attrs": {"keepdims": false, "axis": [0]}, "outputs": ["s2"]},
  {"op": "sum", "inputs": ["gz"], "attrs": {"axis": 0}, "outputs": ["s3"]},
  {"op": "sum", "inputs": ["gz"], "attrs": {"axis": [-2]}, "outputs": ["s4"]},
  {"op": "sum", "inputs": ["gz"], "attrs": {"axis": [1, 0]}, "outputs": ["s5"]},
  {"op": "sum", "inputs": ["gz"], "attrs": {"axis": [-1, -2]}, "outputs": ["s6"]},
  {"op": "sum", "inputs": ["gz"], "outputs": ["s7"]},
  {"op": "argmax", "inputs": ["gz"], "outputs": ["g1"]},
  {"op": "softmax", "inputs": ["gz"], "attrs": {"axis": -1}, "outputs": ["m1"]},
  {"op": "softmax", "inputs": ["gz"], "attrs": {"axis": 1}, "outputs": ["m2"]}],
 "functions": {"main": {"inputs": ["cx", "cw", "gz"], "outputs": ["c1", "c2", "c3", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "g1", "m1", "m2"]}}}
J
"$TGPROF" "$tmp/canon.json" -O none -i cx="$($PY -c 'print([[[list(range(5))] * 5]])')" \
  -i cw="$($PY -c 'print([[[[1] * 3] * 3]])')" -i gz='[[1,2,3],[4,5,6]]' --calls 2 --top 0 \
  --json "$tmp/canon.prof.json" >"$tmp/canon.txt"
canon_ops=$(sed -n '/^Ops (op + attrs)/,/^$/p' "$tmp/canon.txt" | awk '$1 ~ /^[0-9.]+%$/ {print $6, $NF}' | LC_ALL=C sort)
want_ops='1 argmax{"axis":null,"keepdims":false}
2 softmax{"axis":1}
3 conv2d{"border_mode":"valid","filter_dilation":[1,1],"filter_flip":true,"subsample":[2,2]}
3 sum{"axis":[0,1],"keepdims":false}
4 sum{"axis":0,"keepdims":false}'
check '[ "$canon_ops" = "$want_ops" ]' "the ops table has one row per op and canonical attrs (got: $(echo $canon_ops))"
check '[ "$($PY -c "import json,sys; print(\"\n\".join(sorted(\"%d %s\" % (o[\"nodes\"], o[\"name\"]) for o in json.load(open(sys.argv[1]))[\"functions\"][0][\"ops\"])))" "$tmp/canon.prof.json")" = "$want_ops" ]' \
  "the JSON report's ops have the same five rows"
# A function without scheduled nodes (its outputs are an input and a
# folded constant) has its trace bounded as any other: a call's event
# counts, 500,000 / (0 nodes + 1) = 500,000 calls kept of 600,000. It kept
# every call: --calls 10^12 ran out of memory before the first.
cat >"$tmp/empty.json" <<'J'
{"format": "tg-graph", "version": 1, "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}}],
 "nodes": [{"op": "exp", "inputs": [{"value": 1.0}], "outputs": ["c"]}],
 "functions": {"main": {"inputs": ["x"], "outputs": ["x", "c"]}}}
J
"$TGPROF" "$tmp/empty.json" -i x='[1,2,3]' --calls 600000 --trace "$tmp/empty.trace.json" >"$tmp/empty.txt" 2>"$tmp/empty.err"
check '[ $? -eq 0 ] && grep -q "^  Nodes: 0$" "$tmp/empty.txt" &&
       grep -q "^  Trace: the first 500000 of 600000 calls in" "$tmp/empty.txt" &&
       [ "$(grep -c "\"cat\":\"call\"" "$tmp/empty.trace.json")" -eq 500000 ]' \
  "a function of no node keeps 500,000 calls of 600,000 in its trace ($(head -c 100 "$tmp/empty.err"))"
rm -f "$tmp/empty.trace.json"
# The original nodes of c = tanh(log(exp(x))): log_exp leaves tanh(x), so
# a and b stand in no scheduled node, and the section says so instead of
# "no node was rewritten"; the same for a constant folded away (c of
# empty.json); -O none rewrites nothing and says that.
cat >"$tmp/rw.json" <<'J'
{"format": "tg-graph", "version": 1, "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}}],
 "nodes": [{"op": "exp", "inputs": ["x"], "outputs": ["a"]}, {"op": "log", "inputs": ["a"], "outputs": ["b"]},
           {"op": "tanh", "inputs": ["b"], "outputs": ["c"]}],
 "functions": {"main": {"inputs": ["x"], "outputs": ["c"]}}}
J
orig() { sed -n '/^Original nodes/,/^Memory/p' "$1" | sed -n '3,$p'; }
"$TGPROF" "$tmp/rw.json" -i x='[1,2,3]' --calls 1 >"$tmp/rw.txt"
check '[ $? -eq 0 ] && ! grep -q "no node was rewritten" "$tmp/rw.txt" &&
       orig "$tmp/rw.txt" | grep -q "^  Removed by the optimizer: 2 file nodes that no scheduled node stands for$" &&
       [ "$(orig "$tmp/rw.txt" | grep -E "^  [ab] +log_exp$" | wc -l)" -eq 2 ] &&
       orig "$tmp/rw.txt" | grep -qE "^ +[0-9.]+% +[0-9.]+  c +c \(tanh\)$"' \
  "tanh(log(exp(x))): a and b removed by log_exp, c scheduled as tanh"
"$TGPROF" "$tmp/empty.json" -i x='[1,2,3]' --calls 1 >"$tmp/empty.txt"
check '[ $? -eq 0 ] && ! grep -q "no node was rewritten" "$tmp/empty.txt" &&
       orig "$tmp/empty.txt" | grep -q "^  Removed by the optimizer: 1 file node that" &&
       orig "$tmp/empty.txt" | grep -qE "^  c +constant_folding$"' "a folded constant's node: removed by constant_folding"
"$TGPROF" "$tmp/rw.json" -O none -i x='[1,2,3]' --calls 1 >"$tmp/rw.none.txt"
check '[ $? -eq 0 ] && grep -q "(no node was rewritten: every scheduled node stands for itself)" "$tmp/rw.none.txt" &&
       ! grep -q "Removed by the optimizer" "$tmp/rw.none.txt"' "-O none: no node was rewritten, none removed"
# A node that dies with a rewrite that did not match it is listed with
# that rewrite: d = log(b + b2) of two exp(x), merged into b, runs as
# logaddexp(x, x), and b went with c and d (it was listed nowhere); b2,
# merged into b, was removed by the merge. b was said to be removed by
# merge_nodes, which kept it.
cat >"$tmp/lae.json" <<'J'
{"format": "tg-graph", "version": 1, "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}}],
 "nodes": [{"op": "exp", "inputs": ["x"], "outputs": ["b"]}, {"op": "exp", "inputs": ["x"], "outputs": ["b2"]},
           {"op": "add", "inputs": ["b", "b2"], "outputs": ["c"]}, {"op": "log", "inputs": ["c"], "outputs": ["d"]}],
 "functions": {"main": {"inputs": ["x"], "outputs": ["d"]}}}
J
"$TGPROF" "$tmp/lae.json" -i x='[1,2,3]' --calls 1 >"$tmp/lae.txt"
check '[ $? -eq 0 ] && orig "$tmp/lae.txt" | grep -q "^  Removed by the optimizer: 2 file nodes that no scheduled node stands for$" &&
       orig "$tmp/lae.txt" | grep -qE "^  b +logaddexp$" && orig "$tmp/lae.txt" | grep -qE "^  b2 +merge_nodes$" &&
       orig "$tmp/lae.txt" | grep -qE "^ +[0-9.]+% +[0-9.]+  d +d:[a-z0-9.]+ \(composite\)$"' \
  "log(exp x + exp x): b removed by logaddexp, b2 by merge_nodes, d scheduled as the fused logaddexp"
# A path holding a byte that is not UTF-8 (from the command line): the
# report and the trace write it U+FFFD and stay JSON that a strict UTF-8
# reader takes (they wrote the byte raw); the text report too. DEL and C1
# controls in a name (a function's, a body's: U+009B is a CSI to some
# terminals) show escaped in the text report, \u007f, \u009b, as C0 ones.
cp "$tmp/rw.json" "$tmp/q$(printf '\377').json"
"$TGPROF" "$tmp/q$(printf '\377').json" -i x='[1,2,3]' --calls 2 --json "$tmp/bad8.prof.json" --trace "$tmp/bad8.trace.json" >"$tmp/bad8.txt"
check '[ $? -eq 0 ] && $PY - "$tmp/bad8.prof.json" "$tmp/bad8.trace.json" "$tmp/bad8.txt" "$tmp/q\ufffd.json" <<'"'PY'"'
import json, sys
rep = json.load(open(sys.argv[1], encoding="utf-8"))
tr = json.load(open(sys.argv[2], encoding="utf-8"))
txt = open(sys.argv[3], encoding="utf-8").read()
want = sys.argv[4].encode().decode("unicode_escape")
proc = [e["args"]["name"] for e in tr["traceEvents"] if e.get("name") == "process_name"]
sys.exit(not (rep["file"] == want and proc == ["tgprof " + want] and ("  File: %s, function" % want) in txt))
PY' "a path with a byte that is not UTF-8: U+FFFD in the report, the trace and the text, all valid UTF-8"
$PY - "$tmp/c1.json" <<'PY'
import json, sys
t = {"dtype": "float64", "shape": [3]}
body = {"variables": [{"id": "a", "type": t}], "inputs": ["a"], "outputs": ["o"],
        "nodes": [{"op": "neg", "inputs": ["a"], "outputs": ["o"]}]}
json.dump({"format": "tg-graph", "version": 1, "variables": [{"id": "x", "type": t}],
           "nodes": [{"op": "op_from_graph", "inputs": ["x"], "outputs": ["y"],
                      "attrs": {"name": "b\u009b2J\u007f", "body": body}}],
           "functions": {"f\u009b31m\u007f": {"inputs": ["x"], "outputs": ["y"]}}}, open(sys.argv[1], "w"))
PY
"$TGPROF" "$tmp/c1.json" -i x='[1,2,3]' --calls 2 --json "$tmp/c1.prof.json" --trace "$tmp/c1.trace.json" >"$tmp/c1.txt"
check '[ $? -eq 0 ] && ! LC_ALL=C grep -q "$(printf "\177")" "$tmp/c1.txt" && ! LC_ALL=C grep -q "$(printf "\302")" "$tmp/c1.txt" &&
       grep -qF "function '"'"'f\u009b31m\u007f'"'"', preset" "$tmp/c1.txt" && grep -qxF "Body of op_from_graph{b\u009b2J\u007f} y" "$tmp/c1.txt" &&
       $PY -c "import json, sys; r = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2])); f = r[\"functions\"][0]
sys.exit(not (f[\"name\"] == \"f\u009b31m\u007f\" and f[\"bodies\"][0][\"op_key\"] == \"op_from_graph{b\\\\u009b2J\\\\u007f}\"))" "$tmp/c1.prof.json" "$tmp/c1.trace.json"' \
  "DEL and C1 controls in names: escaped in the text report, the report's name as is, its op key as the text's"
# Output paths that collide are refused before anything runs, one line,
# exit 2, nothing written: --json and --trace naming one file (by another
# spelling, existing or not; the trace replaced the report, exit 0), an
# output naming the graph file (it was replaced by the report) or an -i
# file. A device may take both (/dev/null). --json - or --trace - puts
# that document alone on standard output (the text report is left out;
# it was mixed in); both on it is refused.
cp "$tmp/rw.json" "$tmp/col.json"
echo "(refused before it is read)" >"$tmp/colx.npy"
cksum_before=$(cksum <"$tmp/col.json")
bad 2 "--json and --trace naming one new file" "$tmp/col.json" -i x='[1,2,3]' --json "$tmp/same.json" --trace "$tmp/./same.json"
check 'grep -qF "are the same file: one would replace the other" "$tmp/err" && [ ! -e "$tmp/same.json" ]' "  ... said, nothing written"
echo old >"$tmp/same2.json"
bad 2 "--json and --trace naming one existing file" "$tmp/col.json" -i x='[1,2,3]' --json "$tmp/same2.json" --trace "$tmp/../$(basename "$tmp")/same2.json"
check '[ "$(cat "$tmp/same2.json")" = old ]' "  ... the file is left as it was"
bad 2 "--json naming the graph file" "$tmp/col.json" -i x='[1,2,3]' --json "$tmp/./col.json"
check 'grep -qF "is the graph file being profiled: the report would replace it" "$tmp/err" && [ "$(cksum <"$tmp/col.json")" = "$cksum_before" ]' \
  "  ... said, the graph unchanged"
bad 2 "--trace naming the graph file" "$tmp/col.json" -i x='[1,2,3]' --trace "$tmp/col.json"
bad 2 "--trace naming an -i file" "$tmp/col.json" -i x="$tmp/colx.npy" --trace "$tmp/colx.npy"
check 'grep -qF "is the input file of -i x=$tmp/colx.npy: the trace would replace it" "$tmp/err"' "  ... said"
bad 2 "--json - and --trace -" "$tmp/col.json" -i x='[1,2,3]' --json - --trace -
"$TGPROF" "$tmp/col.json" -i x='[1,2,3]' --calls 2 --json /dev/null --trace /dev/null >/dev/null 2>"$tmp/err"
check '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]' "--json /dev/null --trace /dev/null is fine"
"$TGPROF" "$tmp/col.json" -i x='[1,2,3]' --calls 2 --json - --trace "$tmp/col.trace.json" >"$tmp/col.out" 2>"$tmp/err"
check '[ $? -eq 0 ] && [ ! -s "$tmp/err" ] && $PY -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(d[\"format\"] != \"tg-profile\")" "$tmp/col.out" &&
       [ -s "$tmp/col.trace.json" ]' "--json -: standard output is the report alone"
"$TGPROF" "$tmp/col.json" -i x='[1,2,3]' --calls 2 --trace - >"$tmp/col.out" 2>"$tmp/err"
check '[ $? -eq 0 ] && $PY -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(len([e for e in d[\"traceEvents\"] if e.get(\"cat\") == \"call\"]) != 2)" "$tmp/col.out"' \
  "--trace -: standard output is the trace alone"
if $PY -c 'import jsonschema' 2>/dev/null; then
  $PY - "$TG_SRC/schemas/profile.schema.json" "$tmp/costly.json" "$tmp/mlp.json" "$tmp/logreg.json" \
    "$tmp/rnnb.json" "$tmp/rnnnb.json" "$tmp/nested.prof.json" "$tmp/canon.prof.json" "$tmp/bad8.prof.json" "$tmp/c1.prof.json" \
    $( [ -f "$tmp/tgf.json" ] && echo "$tmp/tgf.json" ) <<'PY'
import json, sys, copy
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
fails = 0
for p in sys.argv[2:]:
    doc = json.load(open(p))
    errs = list(v.iter_errors(doc))
    print(("FAIL: %s: %s" % (p, errs[0].message)) if errs else "ok: %s validates" % p.split("/")[-1])
    fails += bool(errs)
doc = json.load(open(sys.argv[2]))
env = doc.get("environment", {})
ok = (env.get("blas", "").startswith("OpenBLAS ") and env.get("openmp_threads", 0) >= 1
      and env.get("gomp_spincount") == "1000" and env.get("tg_version"))
print(("ok: " if ok else "FAIL: ") + "the report names the BLAS, the threads and the spin count: %s" % env)
fails += not ok
broken = copy.deepcopy(doc); broken["functions"][0]["nodes"][0]["share"] = 2
missing = copy.deepcopy(doc); del missing["functions"][0]["nodes"][0]["time_s"]
for name, d in (("a share of 2", broken), ("a node without time_s", missing)):
    ok = not v.is_valid(d)
    print(("ok: " if ok else "FAIL: ") + "the schema rejects " + name)
    fails += not ok
sys.exit(1 if fails else 0)
PY
  [ $? -eq 0 ] || fails=$((fails + 1))
else
  echo "skip: python3-jsonschema is not installed"
fi

# ---- The command-line contract (DESIGN.md, "Tools") ----
. "$(dirname "$0")/lib/cli.bash"
V='v=[1,2,3,4,5,6,7,8]'
# The unknown option is the one given (-calls: '-c' of a cluster), not the
# word getopt had moved on to ('costly.json').
one_line 2 "^tgprof: unknown option '-c' \(see tgprof --help\)$" "-calls names -c" -- "$TGPROF" "$costly" -i "$V" -calls 5
# Every single-value option given twice is refused.
for o in --calls --warmup --top; do
  one_line 2 "^tgprof: $o given twice \('1' and '2'\)$" "$o twice" -- "$TGPROF" "$costly" -i "$V" $o 1 $o 2
done
one_line 2 "^tgprof: --device given twice" "--device twice" -- "$TGPROF" "$costly" -i "$V" --device cpu --device cpu
# A failed write to stdout is one line, not two.
one_line 1 "^tgprof: --json -: write failed" "--json - >/dev/full" -- sh -c '"$0" "$1" -i "$2" --calls 1 --json - >/dev/full' "$TGPROF" "$costly" "$V"
one_line 1 "^tgprof: --trace -: write failed" "--trace - >/dev/full" -- sh -c '"$0" "$1" -i "$2" --calls 1 --trace - >/dev/full' "$TGPROF" "$costly" "$V"
# With stderr closed, the --json temporary took descriptor 2 and a warning
# written to stderr went into the report (a gradient that warns at its
# compile here; a --device cuda without a GPU did the same).
cat >"$tmp/warn.json" <<'JSON'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [2]}}, {"id": "y", "type": {"dtype": "float64", "shape": [2]}}],
 "nodes": [{"op": "sum", "inputs": ["x"], "outputs": ["c"]},
           {"op": "grad", "inputs": ["c", "y"], "outputs": ["gy"], "attrs": {"disconnected": "warn"}}],
 "functions": {"main": {"inputs": ["x", "y"], "outputs": ["gy"]}}}
JSON
"$TGPROF" "$tmp/warn.json" -i x='[1,2]' -i y='[3,4]' --calls 1 --json "$tmp/w0.json" >/dev/null 2>"$tmp/err"
grep -q "warning" "$tmp/err" && echo "ok: the graph warns on stderr" || { echo "FAIL: no warning: $(cat "$tmp/err")"; fails=$((fails + 1)); }
"$TGPROF" "$tmp/warn.json" -i x='[1,2]' -i y='[3,4]' --calls 1 --json "$tmp/w1.json" >/dev/null 2>&-
check '[ $? -eq 0 ] && $PY -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/w1.json"' "stderr closed: the --json report is JSON"
# With stdout closed: the report is written (and JSON), the text report
# that had nowhere to go is said (exit 1, one line).
one_line 1 "^tgprof: writing to standard output failed" "stdout closed" -- sh -c '"$0" "$1" -i "$2" --calls 1 --json "$3" >&-' "$TGPROF" "$costly" "$V" "$tmp/w2.json"
check '$PY -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/w2.json"' "stdout closed: the --json report is JSON"
one_line 2 "^tgprof: --json /dev/stdout: cannot write: descriptor 1 is closed$" "--json /dev/stdout, stdout closed" -- sh -c '"$0" "$1" -i "$2" --json /dev/stdout >&-' "$TGPROF" "$costly" "$V"

echo "$fails failed"
[ "$fails" -eq 0 ]
