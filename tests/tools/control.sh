#!/usr/bin/env bash
# Control flow through the tools (examples/ifelse.json: an ifelse whose
# then-branch is an op_from_graph): tgc run takes either branch; compile ->
# .tgf -> run gives the same values; print shows the ifelse and the body;
# export keeps the body and runs again; tgprof profiles it, the skipped
# branch's node with fewer calls.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}"
. "$(dirname "$0")/lib/checks.bash"
G=$TG_SRC/examples/ifelse.json
run_y() { "$TGC" run "$1" -i x="$2" 2>&1 | tr -s ' \n' ' '; }

expect 0 "run, then-branch" -- "$TGC" run "$G" -i x='[3,4]'
contains out "\[0.6, 0.8\]" "x = (3, 4) gives x / |x| = (0.6, 0.8)"
expect 0 "run, else-branch" -- "$TGC" run "$G" -i x='[0,0,0]'
contains out "\[0., 0., 0.\]" "x = 0 gives zeros"
expect 0 "gradient" -- "$TGC" run "$G" -f grad -i x='[3,4]'
# d/dx sum(sin(x/|x|)) = (I - y y^T) cos(y) / |x| at y = (0.6, 0.8): NumPy says
# (0.03875911, -0.02906934)
contains out "0.03875911, -0.02906934" "the gradient through ifelse and op_from_graph"

expect 0 "compile to .tgf" -- "$TGC" compile "$G" -o "$tmp/c.tgf"
for x in '[3,4]' '[0,0]' '[1,-2,2]'; do
  a=$(run_y "$G" "$x"); b=$(run_y "$tmp/c.tgf" "$x")
  if [ "$a" = "$b" ]; then pass "the .tgf gives the graph's values for x = $x"; else fail "x = $x: '$a' vs '$b'"; fi
done
expect 0 "inlined" -- "$TGC" run "$G" --include inline -i x='[1,-2,2]'
contains out "\[ 0.33333333, -0.66666667,  0.66666667\]" "inlining op_from_graph keeps the values"

expect 0 "print" -- "$TGC" print "$G"
contains out "ifelse" "print shows the ifelse"
contains out "Inner graphs" "print shows the body"
contains out "true_div" "print shows the body's nodes"

expect 0 "export" -- "$TGC" export "$tmp/c.tgf" -o "$tmp/exp.json"
if grep -q '"normalize"' "$tmp/exp.json" && grep -q '"body"' "$tmp/exp.json"; then pass "export keeps the body and its name"
else fail "export lost the body"; fi
a=$(run_y "$G" '[2,0]'); b=$(run_y "$tmp/exp.json" '[2,0]')
if [ "$a" = "$b" ]; then pass "the exported graph runs with the same values"; else fail "exported: '$a' vs '$b'"; fi

if [ -n "${TGPROF:-}" ]; then
  expect 0 "tgprof" -- "$TGPROF" "$G" -i x='[0,0]' --calls 4 --warmup 0 --json "$tmp/p.json"
  if /usr/bin/python3 - "$tmp/p.json" <<'PY'; then pass "tgprof: the skipped op_from_graph node ran 0 times, the ifelse 4"; else fail "tgprof calls"; fi
import json, sys
p = json.load(open(sys.argv[1]))
nodes = p["functions"][0]["nodes"]
calls = {n["op"]: n["calls"] for n in nodes}
sys.exit(0 if calls.get("op_from_graph") == 0 and calls.get("ifelse") == 4 else 1)
PY
fi
echo "$fails failed"
[ "$fails" -eq 0 ]
