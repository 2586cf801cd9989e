#!/usr/bin/env bash
# Compiled-function files through tgc: compile -> run from the .tgf gives
# the same bits as running the graph (logreg, mlp, convnet); a checkpoint
# resumes exactly; damaged, truncated and hostile files get one line and
# exit 2; a newer format version is refused; a file from another build
# loads with one warning; print and export.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}" "${TG_BUILD_DIR:?}"
. "$(dirname "$0")/lib/checks.bash"
one_line() { # the error is one line that names the file
  local n; n=$(wc -l <"$tmp/err")
  if [ "$n" -eq 1 ] && grep -q -- "$1" "$tmp/err"; then pass "$2: one line naming the file"; else
    fail "$2: $n lines on stderr"; sed 's/^/  | /' "$tmp/err"; fi
}
same_dir() { # same_dir A B WHAT: every .npy in A is byte-identical in B
  local ok=1 f
  for f in "$1"/*.npy; do cmp -s "$f" "$2/$(basename "$f")" || { ok=0; echo "  | differs: $(basename "$f")"; }; done
  if [ "$ok" -eq 1 ] && [ -n "$(ls "$1")" ]; then pass "$3"; else fail "$3"; fi
}
E=$TG_SRC/examples
P="/usr/bin/python3 $TG_SRC/tests/tools/tgf_patch.py"
mkdir -p "$tmp/mlp" "$tmp/lr"
"$TG_BUILD_DIR/tools/tg-example-mlp-data" "$tmp/mlp" 200 >/dev/null
"$TG_BUILD_DIR/tools/tg-example-logreg-data" "$tmp/lr" >/dev/null

# compile -> save -> restore -> run: bit-identical to running from JSON.
for ex in logreg mlp convnet; do
  d=$tmp/mlp; [ "$ex" = logreg ] && d=$tmp/lr
  for preset in fast_run none; do
    expect 0 "compile $ex -O $preset" -- "$TGC" compile "$E/$ex.json" -O "$preset" -o "$tmp/$ex.$preset.tgf"
    contains out "train:" "compile reports each function"
    "$TGC" run "$E/$ex.json" -O "$preset" -f train -i x="$d/x.npy" -i y="$d/y.npy" --calls 3 -o "$tmp/j.$ex.$preset" >/dev/null
    expect 0 "run $ex.tgf train" -- "$TGC" run "$tmp/$ex.$preset.tgf" -f train -i x="$d/x.npy" -i y="$d/y.npy" --calls 3 -o "$tmp/t.$ex.$preset"
    same_dir "$tmp/j.$ex.$preset" "$tmp/t.$ex.$preset" "$ex ($preset): 3 training calls from the .tgf are bit-identical to the graph's"
    "$TGC" run "$E/$ex.json" -O "$preset" -f predict -i x="$d/x.npy" -o "$tmp/jp.$ex.$preset" >/dev/null
    "$TGC" run "$tmp/$ex.$preset.tgf" -f predict -i x="$d/x.npy" -o "$tmp/tp.$ex.$preset" >/dev/null
    same_dir "$tmp/jp.$ex.$preset" "$tmp/tp.$ex.$preset" "$ex ($preset): predict from the .tgf is bit-identical"
  done
done
# One function with -f; --reoptimize compiles the saved original again.
expect 0 "compile -f predict" -- "$TGC" compile "$E/mlp.json" -f predict -o "$tmp/p.tgf"
contains out "predict:" "compile -f names the function"
expect 2 "run -f train of a file holding only predict" -- "$TGC" run "$tmp/p.tgf" -f train
contains err "no function 'train'" "the missing function is named"
expect 0 "run --reoptimize" -- "$TGC" run "$tmp/mlp.fast_run.tgf" --reoptimize -f train -i x="$tmp/mlp/x.npy" -i y="$tmp/mlp/y.npy" --calls 3 -o "$tmp/r.mlp"
same_dir "$tmp/j.mlp.fast_run" "$tmp/r.mlp" "--reoptimize from the saved original gives the same bits"
expect 0 "run --reoptimize -O none" -- "$TGC" run "$tmp/mlp.fast_run.tgf" --reoptimize -O none -f train -i x="$tmp/mlp/x.npy" -i y="$tmp/mlp/y.npy" --calls 3 -o "$tmp/r0.mlp"
same_dir "$tmp/j.mlp.none" "$tmp/r0.mlp" "--reoptimize -O none matches the graph run with -O none"
# --reoptimize with the file's own options: a bad one there is the file's
# error, naming it and the entry (not a bad -O or --include of the user's).
$P "$tmp/mlp.fast_run.tgf" "$tmp/turbo.tgf" header-text '"preset":"fast_run"' '"preset":"turbo"'
expect 2 "--reoptimize with an unknown preset in the file" -- "$TGC" run "$tmp/turbo.tgf" --reoptimize -f predict -i x="$tmp/mlp/x.npy"
one_line "turbo.tgf: header.options.preset: unknown preset 'turbo'" "a bad preset in the file"
$P "$tmp/mlp.fast_run.tgf" "$tmp/tag.tgf" header-text '"exclude":[]' '"exclude":["gemm","no_such_tag"]'
expect 2 "--reoptimize with an unknown tag in the file" -- "$TGC" run "$tmp/tag.tgf" --reoptimize -f predict -i x="$tmp/mlp/x.npy"
one_line "tag.tgf: header.options.exclude\[1\]: unknown optimizer tag 'no_such_tag'" "a bad tag in the file"
expect 2 "the same tag given with --exclude" -- "$TGC" run "$tmp/mlp.fast_run.tgf" --reoptimize --exclude no_such_tag -f predict -i x="$tmp/mlp/x.npy"
one_line "^tgc: unknown optimizer tag 'no_such_tag'" "is the user's"

# Checkpoint and resume: 5 calls straight against 2, --save-state, 3 more.
X=(-i x="$tmp/mlp/x.npy" -i y="$tmp/mlp/y.npy")
"$TGC" run "$E/mlp.json" -f train "${X[@]}" --calls 5 -o "$tmp/s5" --save-state "$tmp/s5.tgf" >/dev/null
expect 0 "run 2 calls with --save-state" -- "$TGC" run "$E/mlp.json" -f train "${X[@]}" --calls 2 --save-state "$tmp/s2.tgf"
expect 0 "resume from the checkpoint for 3 calls" -- "$TGC" run "$tmp/s2.tgf" -f train "${X[@]}" --calls 3 -o "$tmp/s23" --save-state "$tmp/s23.tgf"
same_dir "$tmp/s5" "$tmp/s23" "resumed training gives the same cost as never stopping"
"$TGC" export "$tmp/s5.tgf" -f train -o "$tmp/s5.json" && "$TGC" export "$tmp/s23.tgf" -f train -o "$tmp/s23.json"
if cmp -s "$tmp/s5.json" "$tmp/s23.json"; then pass "resumed shared values are identical to never stopping"; else fail "shared values differ after resume"; fi
expect 0 "the export loads again" -- "$TGC" check "$tmp/s5.json"
expect 0 "the export runs" -- "$TGC" run "$tmp/s5.json" -f train "${X[@]}" -o "$tmp/e5"
# A checkpoint from a graph holds its other functions too, compiled with
# the trained values: predict from it is bit-identical to predict from a
# compiled .tgf trained as long, and differs from the untrained predict.
expect 0 "predict from a graph's checkpoint" -- "$TGC" run "$tmp/s2.tgf" -f predict -i x="$tmp/mlp/x.npy" -o "$tmp/s2p"
"$TGC" run "$tmp/mlp.fast_run.tgf" -f train "${X[@]}" --calls 2 --save-state "$tmp/c2.tgf" >/dev/null
"$TGC" run "$tmp/c2.tgf" -f predict -i x="$tmp/mlp/x.npy" -o "$tmp/c2p" >/dev/null
same_dir "$tmp/c2p" "$tmp/s2p" "predict from the graph's checkpoint matches the compiled file's"
if cmp -s "$tmp/s2p/prediction.npy" "$tmp/jp.mlp.fast_run/prediction.npy"; then
  fail "predict from the checkpoint is the untrained one"; else pass "predict from the checkpoint uses the trained weights"; fi

# print: debugprint.
# A .tgf is known by its magic number, whatever its name: a checkpoint
# saved as model.ckpt runs, resumes, profiles and prints.
expect 0 "compile -o model.ckpt" -- "$TGC" compile "$E/mlp.json" -o "$tmp/model.ckpt"
expect 0 "run model.ckpt" -- "$TGC" run "$tmp/model.ckpt" -f predict -i x="$tmp/mlp/x.npy" -o "$tmp/ck.p"
same_dir "$tmp/jp.mlp.fast_run" "$tmp/ck.p" "predict from model.ckpt is bit-identical to the graph's"
expect 0 "resume model.ckpt into state.CKPT" -- "$TGC" run "$tmp/model.ckpt" -f train "${X[@]}" --calls 2 --save-state "$tmp/state.CKPT"
expect 0 "print state.CKPT" -- "$TGC" print "$tmp/state.CKPT" -f train
expect 2 "check refuses a checkpoint by its content" -- "$TGC" check "$tmp/model.ckpt"
one_line "check takes a graph" "check of model.ckpt"
if [ -n "${TGPROF:-}" ]; then
  expect 0 "tgprof model.ckpt" -- "$TGPROF" "$tmp/model.ckpt" -f predict -i x="$tmp/mlp/x.npy" --calls 2
fi
# Saving over a file keeps its permissions: a private checkpoint stays
# private (a temporary, then a rename, would otherwise give 0644).
cp "$tmp/s2.tgf" "$tmp/priv.tgf" && chmod 600 "$tmp/priv.tgf"
expect 0 "--save-state over a private file" -- "$TGC" run "$tmp/priv.tgf" -f train "${X[@]}" --save-state "$tmp/priv.tgf"
m=$(stat -c %a "$tmp/priv.tgf"); [ "$m" = 600 ] && pass "it is still 0600" || fail "its mode became $m"
chmod 640 "$tmp/model.ckpt"
expect 0 "compile -o over a 0640 file" -- "$TGC" compile "$E/mlp.json" -f predict -o "$tmp/model.ckpt"
m=$(stat -c %a "$tmp/model.ckpt"); [ "$m" = 640 ] && pass "it is still 0640" || fail "its mode became $m"
(umask 077 && "$TGC" compile "$E/mlp.json" -f predict -o "$tmp/new.tgf" >/dev/null)
m=$(stat -c %a "$tmp/new.tgf"); [ "$m" = 600 ] && pass "a new file follows the umask (077: 0600)" || fail "a new file under umask 077 has mode $m"

expect 0 "print a .tgf" -- "$TGC" print "$tmp/logreg.fast_run.tgf" -f train
# The graph as written: the ids below are those of the file's nodes.
expect 0 "print a graph" -- "$TGC" print "$E/logreg.json" -f train
contains out "^add \[id A\] 'cost'" "the root has id A"
n=$(grep -c "true_div \[id H\] 'p_1'" "$tmp/out")
if [ "$n" -ge 2 ]; then pass "a node used $n times is listed at each use by its id"; else fail "p_1 printed $n times"; fi
n=$(grep -c "dot \[id O\] 'xw'" "$tmp/out")
if [ "$n" -eq 1 ]; then pass "the subtree under it is printed once"; else fail "xw printed $n times"; fi
contains out "(constant) 1\b" "scalar constants show their value"
# optimized: the gradient's (1,)-shaped 0.01 (the penalty's factor through
# sum's gradient) and pow's 2 are one 0-d constant, 0.02, which the gemv
# takes as its beta: w's gradient is gemv(w, 1, x^T, g, 0.02), and the
# SGD step w - 0.1 * that folds into it (gemm_fold): w's update is one
# gemv(w, -0.1, x^T, g, 1 - 0.1 * 0.02) written over w; constants show
# their values as NumPy writes them, those of the fused bodies too (0.1,
# not 0.10000000000000001)
expect 0 "print the optimized graph" -- "$TGC" print "$E/logreg.json" -f train --optimized
contains out "^gemv \[id [A-Z]*\] 'w_next:gemv' (inplace)$" "w's update is one gemv, written over w"
contains out "^ |w \[id [A-Z]*\] (shared)$" "... of w itself"
contains out "^ |w_next:const[.0-9]* \[id [A-Z]*\] (constant) 0.998$" "... by beta 1 - 0.1 * 0.01 * 2, its value shown"
contains out "^ > [ |]*c0 \[id [A-Z]*\] (constant) 0.1$" "a body's constant shows its shortest repr"
# the nodes a grad node expanded into say whose derivative they are:
# tanh's (h) is a product by 1 - h^2, dot's (hW2) a product by W2^T, the
# cost's seed is the grad's own
expect 0 "print a graph with a grad" -- "$TGC" print "$E/mlp.json" -f train
contains out "^[ |]*mul \[id [A-Z]*\] 'gW1.32' (grad gW1 of h)$" "a gradient's node names the node it differentiates"
contains out "^[ |]*dot \[id [A-Z]*\] 'gW1.26' (grad gW1 of hW2)$" "... for each node on the chain"
contains out "^[ |]*ones_like \[id [A-Z]*\] 'gW1.0' (grad gW1)$" "the seed names only its grad"
if grep -q "'W1_next' (grad" "$tmp/out"; then fail "a node of the file marked as a gradient's"; else pass "the file's own nodes are not marked"; fi
expect 0 "print --optimized with a grad" -- "$TGC" print "$E/mlp.json" -f train --optimized
contains out "composite \[id [A-Z]*\] 'gW1.32' (grad gW1 of h)$" "and after fusion, by the key it keeps"
expect 0 "print the .tgf" -- "$TGC" print "$tmp/mlp.fast_run.tgf" -f train
contains out "composite \[id [A-Z]*\] 'gW1.32' (grad gW1 of h)$" "a .tgf's table says the same"
expect 0 "print --ids int --types --shapes" -- "$TGC" print "$E/logreg.json" -f predict --ids int --types --shapes
contains out "\[id 0\]" "--ids int numbers the nodes"
contains out "x \[id [0-9]*\] <float64(?, 784)>" "--types --shapes show dtype and static shape"
expect 2 "print --ids bad" -- "$TGC" print "$E/logreg.json" --ids hex
# Inner graphs: every line of a body starts with " >", body nodes and
# inputs have ids, each body input names the outer variable it is bound
# to, a body node used twice is printed once. The scan of Theano's RNN
# example: u (id B) feeds taps 0 and -4, x0 (C) and y0 (D) the recurrent
# taps, W..W_out (E..I) the non-sequences, in that order (FORMAT s7).
expect 0 "print a scan's body" -- "$TGC" print "$E/scan/rnn.json"
contains out "^u \[id B\]\|^ |u \[id B\]" "the scan's first input is u, id B"
contains out "^ > | | |u_t \[id [A-Z]*\] -> \[id B\]$" "a sequence tap names its sequence"
contains out "^ > | | |u_tm4 \[id [A-Z]*\] -> \[id B\]$" "... each tap"
contains out "^ > | | |x_tm1 \[id [A-Z]*\] -> \[id C\]$" "a recurrent tap names its initial state"
contains out "^ > | | |y_tm1 \[id [A-Z]*\] -> \[id D\]$" "... of its own output"
contains out "^ > |b_W_out \[id [A-Z]*\] -> \[id I\]$" "a non-sequence names its input"
n=$(sed -n '/^Inner graphs:/,$p' "$tmp/out" | grep -v '^$' | grep -v '^Inner graphs:$' | grep -v '^scan \[id A\]' | grep -vc '^ >')
[ "$n" -eq 0 ] && pass "every body line starts with ' >'" || fail "$n body lines without ' >'"
# An op_from_graph in an op_from_graph whose body squares its input 20
# times, each product reading the one before twice: printed once each
# (before, 2^20 lines), the inner body after the outer one, its input
# bound to the outer body's 'na'.
expect 0 "print nested bodies" -- "$TGC" print "$TG_SRC/tests/data/tools/print_bodies.json"
n=$(wc -l <"$tmp/out")
[ "$n" -lt 80 ] && pass "a body node read twice is printed once ($n lines)" || fail "$n lines"
n=$(grep -c "^ > *[| ]*mul \[id [A-Z]*\] 'm1'$" "$tmp/out")
[ "$n" -eq 2 ] && pass "m1 is listed at each of its two uses" || fail "m1 listed $n times"
contains out "^op_from_graph \[id C\] 'o'$" "the inner body has its own section, under its node's id"
contains out "^ >[ |]*|b \[id [A-Z]*\] -> \[id D\]$" "its input names the outer body's variable (neg, id D)"
contains out "^ > | |a \[id [A-Z]*\] -> \[id B\]$" "the outer body's input names x (id B)"
# A body input bound to output 1 of a split in the outer body names the
# split's id, as in the main tree (it named an id printed nowhere).
cat >"$tmp/nest_split.json" <<'JSON'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [3]}}],
 "nodes": [{"op": "op_from_graph", "inputs": ["x"], "outputs": ["y"], "attrs": {"name": "outer", "body": {
    "variables": [{"id": "a", "type": {"dtype": "float64", "shape": [3]}}],
    "inputs": ["a"], "outputs": ["o"],
    "nodes": [
      {"op": "split", "inputs": ["a", {"value": {"dtype": "int64", "shape": [2], "data": [1, 2]}}],
       "outputs": ["s0", "s1"], "attrs": {"axis": 0, "n": 2}},
      {"op": "op_from_graph", "inputs": ["s1"], "outputs": ["o"], "attrs": {"name": "inner", "body": {
          "variables": [{"id": "b", "type": {"dtype": "float64", "shape": [2]}}],
          "inputs": ["b"], "outputs": ["m"],
          "nodes": [{"op": "neg", "inputs": ["b"], "outputs": ["m"]}]}}}]}}}],
 "functions": {"main": {"inputs": ["x"], "outputs": ["y"]}}}
JSON
expect 0 "print a body reading output 1 of a split" -- "$TGC" print "$tmp/nest_split.json"
sid=$(sed -n "s/^ >[ |]*split\.1 \[id \([A-Z]*\)\] 's1'$/\1/p" "$tmp/out")
bid=$(sed -n 's/^ >[ |]*b \[id [A-Z]*\] -> \[id \([A-Z]*\)\]$/\1/p' "$tmp/out")
[ -n "$sid" ] && [ "$sid" = "$bid" ] && pass "the inner body's input names the split (id $sid)" ||
  { fail "the inner body's input names [id $bid], the split is [id $sid]"; sed 's/^/  | /' "$tmp/out"; }
# --types and --shapes give every line its type, body nodes' too (only
# the declared body inputs had one): split cuts x (3,) into (1,) and (2,),
# so s1, the inner body's input b and its neg m are (2,).
expect 0 "print --types --shapes of nested bodies" -- "$TGC" print "$tmp/nest_split.json" --types --shapes
cat >"$tmp/want" <<'TXT'
main:
op_from_graph [id A] 'y' <float64(2,)>
 |x [id B] <float64(3,)>

Inner graphs:

op_from_graph [id A] 'y'
 >op_from_graph [id C] 'o' <float64(2,)>
 > |split.1 [id D] 's1' <float64(2,)>
 > | |a [id E] <float64(3,)> -> [id B]
 > | |(constant) [1, 2] <int64(2,)>

op_from_graph [id C] 'o'
 >neg [id F] 'm' <float64(2,)>
 > |b [id G] <float64(2,)> -> [id D]
TXT
diff "$tmp/want" "$tmp/out" >"$tmp/diff" && pass "each body line has its type and shape" ||
  { fail "body lines' types"; sed 's/^/  | /' "$tmp/diff"; }
# A chain of 50,000 nodes, in the graph and in a body: the recursive
# printer overflowed the stack past about 23,000 levels.
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
n, t = 50000, {"dtype": "float64", "shape": [3]}
chain = lambda a: [{"op": "neg", "inputs": ["v%d" % i if i else a], "outputs": ["v%d" % (i + 1)]} for i in range(n)]
fn = {"main": {"inputs": ["x"], "outputs": ["y"]}}
g = {"format": "tg-graph", "version": 1, "variables": [{"id": "x", "type": t}],
     "nodes": chain("x") + [{"op": "identity", "inputs": ["v%d" % n], "outputs": ["y"]}], "functions": fn}
json.dump(g, open(sys.argv[1] + "/chain.json", "w"))
body = {"variables": [{"id": "b", "type": t}], "inputs": ["b"], "outputs": ["v%d" % n], "nodes": chain("b")}
g["nodes"] = [{"op": "op_from_graph", "inputs": ["x"], "outputs": ["y"], "attrs": {"name": "deep", "body": body}}]
json.dump(g, open(sys.argv[1] + "/bchain.json", "w"))
PY
# Each line's depth shows, however deep: " |" a level, and past 100 levels
# " [100]", " [200]", ... then the levels past that (the bars stopped at
# 100 levels, so every line below printed at one depth). In the chain,
# v_j is at depth 50001 - j (y at 0, x at 50001); in the body chain, at
# 50000 - j (b at 50000).
depths() { # depths FILE PREFIX TOP: each v_j line at depth TOP - j, x or b at TOP
  /usr/bin/python3 - "$@" <<'PY'
import re, sys
path, prefix, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
line = re.compile(re.escape(prefix) + r"( \[(\d+)\])?((?: \|)*)(\S.*)$")
seen, bad = 0, []
for text in open(path):
    m = line.match(text.rstrip("\n"))
    if not m or not re.match(r"(neg \[id [A-Z]+\] 'v\d+'|[xb] \[id [A-Z]+\])", m.group(4)):
        continue
    wrap = int(m.group(2)) if m.group(1) else 0
    bars = len(m.group(3)) // 2
    got = wrap + bars
    v = re.search(r"'v(\d+)'", m.group(4))
    want = top - int(v.group(1)) if v else top
    if got != want or bars >= 100 or wrap % 100 or (wrap and got < 100):
        bad.append("%s: depth %d, want %d" % (m.group(4)[:30], got, want))
    seen += 1
if bad or seen != 50001:
    print("%d lines checked, %d wrong: %s" % (seen, len(bad), "; ".join(bad[:3])))
    sys.exit(1)
PY
}
expect 0 "print a chain of 50,000 nodes" -- "$TGC" print "$tmp/chain.json"
[ "$(tail -n 1 "$tmp/out")" = " [50000] |x [id CVZD]" ] && pass "down to its input, id 50001 (2*26^3 + 21*26^2 + 25*26 + 3: CVZD), at depth 50001" || fail "ends with: $(tail -n 1 "$tmp/out" | cut -c1-80)"
depths "$tmp/out" "" 50001 && pass "every line of the chain at its depth" || fail "the chain's depths"
expect 0 "print a body chain of 50,000 nodes" -- "$TGC" print "$tmp/bchain.json"
[ "$(tail -n 1 "$tmp/out")" = " > [50000]b [id CVZE] -> [id B]" ] && pass "down to the body's input, at depth 50000" || fail "ends with: $(tail -n 1 "$tmp/out" | cut -c1-80)"
depths "$tmp/out" " >" 50000 && pass "every line of the body chain at its depth" || fail "the body chain's depths"
# --include / --exclude choose the rewrites of --optimized: the MLP's
# training step without fusion has no composite, with it one or more
expect 0 "print --optimized" -- "$TGC" print "$E/mlp.json" -f train --optimized
contains out "^ *[|>]* *composite \[id" "fast_run fuses"
expect 0 "print --optimized --exclude fusion" -- "$TGC" print "$E/mlp.json" -f train --optimized --exclude fusion
if grep -q "composite \[id" "$tmp/out"; then fail "--exclude fusion left a composite"; else pass "--exclude fusion: no composite"; fi
contains out "gemm \[id" "the other passes still ran (gemm)"
expect 2 "print --exclude without --optimized" -- "$TGC" print "$E/mlp.json" -f train --exclude fusion
contains err "choose the rewrites of --optimized" "says why"
expect 2 "print --exclude an unknown tag" -- "$TGC" print "$E/mlp.json" -f train --optimized --exclude nonesuch
contains err "unknown optimizer tag 'nonesuch'" "names the tag"
# A .tgf is not optimized again when printed: -O, --include and --exclude
# are refused, as tgc run refuses them, not ignored.
for opt in "-O none" "--optimized -O none" "--optimized --exclude fusion" "--include fusion"; do
  # shellcheck disable=SC2086
  expect 2 "print a .tgf with $opt" -- "$TGC" print "$tmp/mlp.fast_run.tgf" -f train $opt
  contains err "mlp.fast_run.tgf is already optimized" "says the file is already optimized"
done
expect 0 "print --profile" -- "$TGC" print "$tmp/mlp.fast_run.tgf" -f predict --profile 2 -i x="$tmp/mlp/x.npy"
contains out "predict: 2 calls" "the profile's call count"
contains out "dot \[id [A-Z]*\] 'xW1'  [0-9.]* ms/call ([0-9.]*%)" "each node with its time and share"
expect 2 "print --profile without the inputs" -- "$TGC" print "$tmp/mlp.fast_run.tgf" -f predict --profile 2
contains err "needs input 'x'" "names the missing input"

# Damaged, truncated and hostile files: one line, exit 2, no crash.
F=$tmp/mlp.fast_run.tgf
size=$(stat -c %s "$F")
head -c 40 "$F" >"$tmp/short.tgf"
expect 2 "a file shorter than the preamble" -- "$TGC" run "$tmp/short.tgf"
one_line "short.tgf" "truncated preamble"
head -c $((size - 1000)) "$F" >"$tmp/trunc.tgf"
expect 2 "a truncated file" -- "$TGC" run "$tmp/trunc.tgf"
one_line "trunc.tgf" "truncated data"; contains err "truncated" "says truncated"
printf 'hello, this is not a tgf file at all, not even close; padding padding padding' >"$tmp/magic.tgf"
expect 2 "bad magic" -- "$TGC" run "$tmp/magic.tgf"
one_line "magic.tgf" "bad magic"
$P "$F" "$tmp/fh.tgf" flip-header
expect 2 "a changed header byte" -- "$TGC" run "$tmp/fh.tgf"
one_line "fh.tgf" "header checksum"; contains err "checksum" "says checksum"
$P "$F" "$tmp/fd.tgf" flip-data
expect 2 "a changed data byte" -- "$TGC" run "$tmp/fd.tgf"
one_line "fd.tgf" "array checksum"; contains err "arrays\[0\]: checksum" "names the array"
$P "$F" "$tmp/v5.tgf" version 5
expect 2 "a newer format version" -- "$TGC" run "$tmp/v5.tgf"
one_line "v5.tgf" "newer version"; contains err "newer than this tg" "says newer"
$P "$F" "$tmp/nj.tgf" header-raw '{"format": "tg-compiled", "version": 2,'
expect 2 "a header that is not JSON" -- "$TGC" run "$tmp/nj.tgf"
one_line "nj.tgf" "not JSON"; contains err "invalid JSON" "says invalid JSON"
$P "$F" "$tmp/abs.tgf" array-field 0 shape0 4611686018427387904
expect 2 "an absurd shape" -- "$TGC" run "$tmp/abs.tgf"
one_line "abs.tgf" "absurd shape"; contains err "arrays\[0\]" "names the array"
$P "$F" "$tmp/off.tgf" array-field 0 offset 999999999936
expect 2 "an offset past the end" -- "$TGC" run "$tmp/off.tgf"
one_line "off.tgf" "offset past the end"; contains err "past the end" "says past the end"
$P "$F" "$tmp/big.tgf" section-lengths 0 784 500 4611686018427387904 500
expect 2 "a variable's type past 2^63 - 1 bytes" -- "$TGC" run "$tmp/big.tgf"
one_line "big.tgf" "huge type"; contains err "graph section: 'W1': a type of more than 2\^63 - 1 bytes" "names the variable"
$P "$F" "$tmp/gr.tgf" section-string 0 dot dut
expect 2 "a saved graph that does not load" -- "$TGC" run "$tmp/gr.tgf"
one_line "gr.tgf" "bad graph"; contains err "functions\[0\]: schedule\[[0-9]*\]: 'dut' is not an op" "names the function, the node and the op"

# Another build: loads with one warning line and runs.
ver=$("$TGC" --version | awk 'NR == 1 {print $2}')
$P "$F" "$tmp/other.tgf" header-text "\"tg_version\":\"$ver\"" '"tg_version":"0.0.0-other"'
$P "$tmp/other.tgf" "$tmp/other.tgf" header-text '"backends":["cpu"]' '"backends":["cpu","cuda"]'
expect 0 "a file from another build runs" -- "$TGC" run "$tmp/other.tgf" -f predict -i x="$tmp/mlp/x.npy" -o "$tmp/o"
one_line "other.tgf" "another build"
# The backend is named where it cannot run: a build without CUDA, or no GPU.
if "$TGC" run "$TG_SRC/examples/mlp.json" -f predict -i x="$tmp/mlp/x.npy" --device cuda 2>&1 >/dev/null |
  grep -q "running on the CPU\|lacks\|not usable"; then
  contains err "warning: .*0.0.0-other.*'cuda', which \(this build lacks\|is not usable here\)" "the warning names the version and backend"
else
  contains err "warning: .*0.0.0-other" "the warning names the version (the GPU is usable here)"
fi
same_dir "$tmp/tp.mlp.fast_run" "$tmp/o" "and computes the same bits"

# A format version 1 file (the JSON graph and array table in the header)
# still loads and runs: a shared counter, 0 + 1 + 1 + 1.
V1=$TG_SRC/tests/fuzz/corpus_tgf/counter.tgf
expect 0 "a version 1 file runs" -- "$TGC" run "$V1" -f step --calls 3
contains out "^3$" "and counts to 3"
expect 0 "a version 1 file's second function" -- "$TGC" run "$V1" -f double -i x='[1, 2.5]'
contains out "2\., 5\." "doubles its input"

# A run-time error of a function restored from a .tgf, and from a
# checkpoint of it, names the node as running the graph file does: by its
# place in the file (nodes[1]: the int_div after an unused exp, first in
# the schedule), and a fused node of a composite by its own name.
cat >"$tmp/idz2.json" <<'EOF'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "int64", "shape": [3]}}, {"id": "y", "type": {"dtype": "int64", "shape": [3]}}],
 "nodes": [{"op": "exp", "inputs": ["x"], "outputs": ["unused"]},
           {"op": "int_div", "inputs": ["x", "y"], "outputs": ["q"], "name": "the_div"}],
 "functions": {"f": {"inputs": ["x", "y"], "outputs": ["q"]}}}
EOF
cat >"$tmp/idz.json" <<'EOF'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "int64", "shape": [3]}}, {"id": "y", "type": {"dtype": "int64", "shape": [3]}}],
 "nodes": [{"op": "add", "inputs": ["x", {"value": 1}], "outputs": ["a"], "name": "a_plus"},
           {"op": "int_div", "inputs": ["a", "y"], "outputs": ["q"], "name": "the_div"},
           {"op": "mul", "inputs": ["q", {"value": 3}], "outputs": ["m"]}],
 "functions": {"f": {"inputs": ["x", "y"], "outputs": ["m"]}}}
EOF
same_line() { if [ "$(cat "$tmp/err")" = "$want" ]; then pass "$1"; else fail "$1: $(cat "$tmp/err")"; fi; }
for g in idz2 idz; do
  want="tgc: call 1: nodes[1] (int_div 'the_div' -> q): integer division by zero"
  [ $g = idz ] && want="$want, fused into (composite -> m, standing for a, q, m)"
  expect 1 "$g.json divides by zero" -- "$TGC" run "$tmp/$g.json" -i x='[1,2,3]' -i y='[1,0,2]'
  same_line "$g.json names the int_div nodes[1]"
  expect 0 "compile $g.json" -- "$TGC" compile "$tmp/$g.json" -o "$tmp/$g.tgf"
  expect 1 "$g.tgf divides by zero" -- "$TGC" run "$tmp/$g.tgf" -i x='[1,2,3]' -i y='[1,0,2]'
  same_line "$g.tgf names it as $g.json does"
  expect 0 "$g.tgf --save-state" -- "$TGC" run "$tmp/$g.tgf" -i x='[1,2,3]' -i y='[1,1,2]' --save-state "$tmp/$g.ck.tgf"
  expect 1 "its checkpoint divides by zero" -- "$TGC" run "$tmp/$g.ck.tgf" -i x='[1,2,3]' -i y='[1,0,2]'
  same_line "the checkpoint of $g.tgf names it as $g.json does"
done

# An independent reader of the documented layout (Python, its own CRC-32C)
# finds the weights byte for byte as in the example's .npy files.
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  expect 0 "read mlp.tgf with an independent reader" -- /usr/bin/python3 "$TG_SRC/tests/tools/tgf_read.py" "$tmp/mlp.fast_run.tgf" W1="$E/mlp/W1.npy" W2="$E/mlp/W2.npy"
  contains out "^W1 identical" "W1 is saved byte for byte"
  contains out "^W2 identical" "W2 is saved byte for byte"
  # and the gradients' table and a composite's origin groups (version 3)
  if "$TGC" compile "$TG_SRC/tests/data/tgdebug/grad_sqrt.json" -o "$tmp/gs.tgf" >/dev/null 2>"$tmp/err"; then
    expect 0 "read a gradient's .tgf with the independent reader" -- /usr/bin/python3 "$TG_SRC/tests/tools/tgf_read.py" "$tmp/gs.tgf"
    contains out "^gradient node gx\.8: from grad gx, of r (sqrt)$" "the table says gx.8 is from grad gx, of r"
    contains out "^origin groups of gx\.9: .*| gx\.8 |" "the composite's groups give gx.8 a group of its own"
    # a checkpoint written from a restored function keeps the table
    expect 0 "read a resumed checkpoint with the independent reader" -- /usr/bin/python3 "$TG_SRC/tests/tools/tgf_read.py" "$tmp/s23.tgf"
    contains out "^gradient node gW1\.[0-9]*: from grad gW1, of xW1 (dot)$" "the checkpoint of a checkpoint still says which node each gradient key differentiates"
    # a checkpoint keeps the compile and optimizer times of the compile
    # that made its functions (restoring compiled nothing) ...
    R="/usr/bin/python3 $TG_SRC/tests/tools/tgf_read.py"
    t2=$($R "$tmp/s2.tgf" | grep '^function train:') t23=$($R "$tmp/s23.tgf" | grep '^function train:')
    if [ -n "$t2" ] && [ "$t2" = "$t23" ] && ! grep -q "optimize_seconds 0\.0$" <<<"$t2"; then
      pass "the resumed checkpoint keeps train's compile and optimizer times ($t2)"
    else fail "the resumed checkpoint's times: '$t23', the first's: '$t2'"; fi
    # ... and one whose functions were optimized again records the options
    # that did it, and those functions
    expect 0 "--reoptimize -O none --save-state" -- "$TGC" run "$tmp/s2.tgf" --reoptimize -O none --exclude fusion -f train "${X[@]}" --save-state "$tmp/ro.tgf"
    expect 0 "read it" -- $R "$tmp/ro.tgf"
    contains out "^options: preset none, include -, exclude fusion$" "the checkpoint records -O none --exclude fusion, not the file's fast_run"
    want=$($R "$tmp/mlp.none.tgf" | grep -o '^function train: [0-9]* nodes')
    contains out "^$want," "its train is the unoptimized one ($want)"
  else
    fail "compile grad_sqrt.json"
  fi
  # a node's place in the graph file and a composite's fused nodes (version 4)
  expect 0 "read idz.tgf with the independent reader" -- /usr/bin/python3 "$TG_SRC/tests/tools/tgf_read.py" "$tmp/idz.tgf"
  contains out "^fused node 1 of m: nodes\\[1\\] (int_div 'the_div' -> q)$" "the composite names its fused int_div as the file does"
  expect 0 "read idz2.tgf with the independent reader" -- /usr/bin/python3 "$TG_SRC/tests/tools/tgf_read.py" "$tmp/idz2.tgf"
  contains out "^node q: nodes\\[1\\] of the file$" "the int_div keeps its place in the file, nodes[1]"
else
  echo "skip: the independent reader needs python3-numpy"
fi

# The headers follow schemas/tgf-header.schema.json.
if /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
  if /usr/bin/python3 - "$TG_SRC/schemas/tgf-header.schema.json" "$tmp"/*.fast_run.tgf "$tmp/s23.tgf" "$tmp/p.tgf" <<'PY'
import json, struct, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
for p in sys.argv[2:]:
    raw = open(p, "rb").read()
    hlen, = struct.unpack_from("<Q", raw, 24)
    v.validate(json.loads(raw[64:64 + hlen]))
PY
  then pass "headers validate against tgf-header.schema.json"; else fail "a header does not validate"; fi
else
  echo "skip: python3-jsonschema is not installed"
fi

# Usage errors.
expect 2 "compile without -o" -- "$TGC" compile "$E/mlp.json"
expect 2 "compile an unknown function" -- "$TGC" compile "$E/mlp.json" -f nope -o "$tmp/x.tgf"
expect 2 "export of a graph" -- "$TGC" export "$E/mlp.json" -o "$tmp/x.json"
expect 2 "--reoptimize on a graph" -- "$TGC" run "$E/mlp.json" --reoptimize -f predict
expect 0 "compile --help" -- "$TGC" compile --help
cat >"$tmp/split.json" <<'JSON'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [4]}}],
 "nodes": [{"op": "split", "inputs": ["x", {"value": {"data": [2, 2], "dtype": "int64", "shape": [2]}}],
            "outputs": ["a", "b"], "attrs": {"axis": 0, "n": 2}},
           {"op": "add", "inputs": ["a", "b"], "outputs": ["s"]}],
 "functions": {"f": {"inputs": ["x", "a"], "outputs": ["s"]}}}
JSON
expect 2 "a function that takes one output of a node it computes" -- "$TGC" compile "$tmp/split.json" -o "$tmp/split.tgf"
contains err "takes 'a' as an input while also computing it" "says why it cannot be saved"
[ ! -e "$tmp/split.tgf" ] && pass "and writes no file" || fail "a file was written"
expect 2 "-O on a .tgf without --reoptimize" -- "$TGC" run "$F" -O none -f predict -i x="$tmp/mlp/x.npy"
contains err "already optimized" "says the file is already optimized"

# An update (and an output) that constant folding turns into a scalar
# constant: the export declares the constant the function names.
cat >"$tmp/fold.json" <<'JSON'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "w", "type": {"dtype": "float64", "shape": []}, "shared": {"data": 5.0}},
               {"id": "x", "type": {"dtype": "float64", "shape": []}}],
 "nodes": [{"op": "add", "inputs": [{"value": 1.0}, {"value": 2.0}], "outputs": ["three"]},
           {"op": "mul", "inputs": ["x", "w"], "outputs": ["y"]}],
 "functions": {"f": {"inputs": ["x"], "outputs": ["y", "three"], "updates": {"w": "three"}}}}
JSON
"$TGC" compile "$tmp/fold.json" -o "$tmp/fold.tgf" 2>/dev/null && "$TGC" export "$tmp/fold.tgf" -o "$tmp/fold_x.json"
expect 0 "the export of a folded update runs" -- "$TGC" run "$tmp/fold_x.json" -f f -i x=2
contains out "10." "one call: y = 2 * 5"
expect 0 "and runs twice" -- "$TGC" run "$tmp/fold_x.json" -f f -i x=2 --calls 2
contains out "6." "the second call's y = 2 * 3 (w took the folded 3)"

# A folded constant holding a NaN with its sign bit set is exported bit for
# bit (base64; "nan" reads back positive): x + (c - c) with c = (inf, 1)
# is (-nan, 2), 0xfff8000000000000 as NumPy computes it, from the JSON,
# the .tgf and its export. And the tgdebug files whose log(-1) folds:
# the export's outputs are the graph's, bit for bit.
cat >"$tmp/nan.json" <<'JSON'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [2]}},
               {"id": "c", "type": {"dtype": "float64", "shape": [2]}, "constant": {"data": ["inf", 1]}}],
 "nodes": [{"op": "sub", "inputs": ["c", "c"], "outputs": ["d"]},
           {"op": "add", "inputs": ["x", "d"], "outputs": ["y"]}],
 "functions": {"main": {"inputs": ["x"], "outputs": ["y"]}}}
JSON
"$TGC" compile "$tmp/nan.json" -o "$tmp/nan.tgf" >/dev/null && "$TGC" export "$tmp/nan.tgf" -o "$tmp/nan_x.json"
/usr/bin/python3 -c "
import numpy as np
with np.errstate(invalid='ignore'):
    c = np.array([np.inf, 1.0]); np.save('$tmp/nan_want.npy', np.array([1.0, 2.0]) + (c - c))"
for src in nan.json nan.tgf nan_x.json; do
  "$TGC" run "$tmp/$src" -i x='[1,2]' -o "$tmp/nan_o.$src" >/dev/null
  cmp -s <(tail -c 16 "$tmp/nan_want.npy") <(tail -c 16 "$tmp/nan_o.$src/y.npy") &&
    pass "$src: y is NumPy's (-nan, 2), bit for bit" || fail "$src: y is $(tail -c 16 "$tmp/nan_o.$src/y.npy" | od -An -tx8)"
done
for g in fold_out fold_upd fold_read; do
  a=(-i x='[1,2,3]'); [ "$g" = fold_upd ] && a=()
  "$TGC" compile "$TG_SRC/tests/data/tgdebug/$g.json" -o "$tmp/$g.tgf" >/dev/null &&
    "$TGC" export "$tmp/$g.tgf" -o "$tmp/$g.x.json"
  "$TGC" run "$TG_SRC/tests/data/tgdebug/$g.json" "${a[@]}" --calls 2 -o "$tmp/$g.j" >/dev/null
  "$TGC" run "$tmp/$g.x.json" "${a[@]}" --calls 2 -o "$tmp/$g.e" >/dev/null
  same_dir "$tmp/$g.j" "$tmp/$g.e" "$g: the export's outputs (two calls) are the graph's, NaN signs included"
done
# An output listed twice that a rewrite replaced (mul(x, 1) is x) keeps
# its id at both places in the export (the second became x).
cat >"$tmp/twice.json" <<'JSON'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [2]}}],
 "nodes": [{"op": "mul", "inputs": ["x", {"value": 1}], "outputs": ["y"]}],
 "functions": {"main": {"inputs": ["x"], "outputs": ["y", "y"]}}}
JSON
"$TGC" compile "$tmp/twice.json" -o "$tmp/twice.tgf" >/dev/null && "$TGC" export "$tmp/twice.tgf" -o "$tmp/twice_x.json"
expect 0 "tgc check of the export" -- "$TGC" check "$tmp/twice_x.json"
contains out "main(x) -> (y, y)" "its outputs are y and y"

# A graph of 3,000 nodes (over 64 KiB, so the tools grow the heap at once
# before loading): compiled and run from the .tgf, and run from the JSON,
# with that off (TG_THP=0), as by default (the heap grown), and with the
# heap offered for huge pages (TG_THP=1), every output bit-identical. The
# page faults of each load are printed, not asserted (they depend on the
# kernel's THP setting).
/usr/bin/python3 - "$tmp/big.json" <<'PY'
import json, sys
ops = ["add", "mul", "tanh", "sub"]
vs = [{"id": "x", "type": {"dtype": "float64", "shape": [16]}}]
vs += [{"id": "w%d" % k, "type": {"dtype": "float64", "shape": []}, "shared": {"data": 0.1 * (k % 10)}} for k in range(301)]
ns = []
for i in range(3000):
    prev = "x" if i == 0 else "v%d" % (i - 1)
    ins = [prev] if i % 4 == 2 else [prev, "w%d" % (i // 10)]
    ns.append({"op": ops[i % 4], "inputs": ins, "outputs": ["v%d" % i]})
json.dump({"format": "tg-graph", "version": 1, "variables": vs, "nodes": ns}, open(sys.argv[1], "w"))
PY
[ "$(stat -c %s "$tmp/big.json")" -gt 65536 ] && pass "the chain's JSON is over 64 KiB" || fail "the chain's JSON is under 64 KiB"
X='[0.5,-1,2,0.25,3,-2,1.5,0,-0.5,1,-3,2.5,0.75,-1.25,4,-4]'
for thp in 0 d 1; do
  # d: TG_THP unset (the default)
  if [ "$thp" = d ]; then set_thp=(-u TG_THP); else set_thp=("TG_THP=$thp"); fi
  what=$([ "$thp" = d ] && echo "TG_THP unset" || echo "TG_THP=$thp")
  expect 0 "compile the chain ($what)" -- env "${set_thp[@]}" "$TGC" compile "$tmp/big.json" -o "$tmp/big.$thp.tgf"
  expect 0 "run the chain's .tgf ($what)" -- env "${set_thp[@]}" "$TGC" run "$tmp/big.$thp.tgf" -i x="$X" -o "$tmp/bt.$thp"
  expect 0 "run the chain's JSON ($what)" -- env "${set_thp[@]}" "$TGC" run "$tmp/big.json" -i x="$X" -o "$tmp/bj.$thp"
  same_dir "$tmp/bj.$thp" "$tmp/bt.$thp" "the chain from the .tgf is bit-identical to the JSON's ($what)"
  echo "tgc check of the chain, $what: $(env "${set_thp[@]}" /usr/bin/time -f '%R page faults, %e s' "$TGC" check "$tmp/big.json" 2>&1 >/dev/null | tail -1)"
done
same_dir "$tmp/bj.0" "$tmp/bj.d" "and the same with the heap grown as without"
same_dir "$tmp/bj.0" "$tmp/bj.1" "and the same with the heap grown for huge pages as without"
/usr/bin/python3 -c "
import numpy as np, sys
x = np.array($X)
ops = ['add', 'mul', 'tanh', 'sub']
v = x
for i in range(3000):
    w = 0.1 * ((i // 10) % 10)
    v = {'add': lambda: v + w, 'mul': lambda: v * w, 'tanh': lambda: np.tanh(v), 'sub': lambda: v - w}[ops[i % 4]]()
got = np.load(sys.argv[1])
sys.exit(0 if np.allclose(got, v, rtol=1e-12, atol=1e-14) else 1)
" "$tmp/bj.1/v2999.npy" && pass "the chain's output is NumPy's" || fail "the chain's output is not NumPy's"

# Names from the file (a function's, a node's, a body's) hold anything:
# check, compile and print write their control characters (C0, DEL, C1:
# U+009B is a CSI to some terminals) escaped, a backslash doubled, so that
# a name can neither drive the terminal nor begin a line of its own.
cat >"$tmp/ctl.json" <<'EOF'
{"format":"tg-graph","version":1,"variables":[{"id":"x","type":{"dtype":"float64","shape":[3]}}],
 "nodes":[{"op":"exp","inputs":["x"],"outputs":["y"],"name":"n\u001b[31m\\red\nCalls: 9\u007f\u009b"},
  {"op":"op_from_graph","inputs":["y"],"outputs":["z"],"attrs":{"name":"b\tody\r","body":{"variables":[{"id":"p","type":{"dtype":"float64","shape":[3]}}],"nodes":[{"op":"neg","inputs":["p"],"outputs":["q"],"name":"in\nner"}],"inputs":["p"],"outputs":["q"]}}}],
 "functions":{"f\u001b[2J\nfake":{"inputs":["x"],"outputs":["z"]}}}
EOF
expect 0 "check a graph with control characters in its names" -- "$TGC" check "$tmp/ctl.json"
cp "$tmp/out" "$tmp/ctl.txt"
expect 0 "compile it" -- "$TGC" compile "$tmp/ctl.json" -O none -o "$tmp/ctl.tgf"
cat "$tmp/out" >>"$tmp/ctl.txt"
expect 0 "print it" -- "$TGC" print "$tmp/ctl.json"
cat "$tmp/out" >>"$tmp/ctl.txt"
expect 0 "print its .tgf" -- "$TGC" print "$tmp/ctl.tgf"
cat "$tmp/out" >>"$tmp/ctl.txt"
/usr/bin/python3 - "$tmp/ctl.txt" <<'PY' && pass "every name is escaped, with no control character written" || fail "a name went out raw"
import sys
t = open(sys.argv[1], "rb").read().decode("utf-8")
bad = [c for c in t if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
want = [r"  f\u001b[2J\nfake(x) -> (z): 2 nodes", r"f\u001b[2J\nfake: 2 nodes", r"f\u001b[2J\nfake:",
        r"'n\u001b[31m\\red\nCalls: 9\u007f\u009b'", r"'in\nner'"]
miss = [w for w in want if w not in t]
forged = [l for l in t.splitlines() if l.startswith(("Calls", "fake", "ner"))]
if bad or miss or forged:
    print(" | raw:", bad, "missing:", miss, "forged lines:", forged)
sys.exit(1 if bad or miss or forged else 0)
PY

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
