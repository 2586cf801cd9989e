#!/usr/bin/env bash
# Bodies nested as deep as the loader takes them (tests/data/ops/nested_*.json,
# written by tests/data/gen/nested.py with NumPy's values): scans nested 9
# and 30 deep, loops among them, op_from_graph by turns with scan. The
# optimizer wrote the attrs of body nodes it moved out of a scan as text and
# parsed them again 32 levels deep, so every tool refused scans nested 9
# deep with a 2 KB line ("optimizer: bad attrs {...}"). Here: tgc check,
# run with fast_compile, with op_from_graph inlined, and compile to a .tgf
# and run that (test_opdata runs them with none and fast_run). Their
# gradients (nested_scan_grad_*.json, checked by hand and by finite
# differences): each level of the reverse scans prefixed its body's ids
# again, past 128 characters 9 levels down; the .tgf keeps the reverse
# scans' bodies as written and reads their ids again. An error at the
# bottom of 30 bodies keeps its cause in a message of 2 KB.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}"
. "$(dirname "$0")/lib/checks.bash"
D=$TG_SRC/tests/data/ops
X='x=[0.1,0.2,0.3]'
for name in nested_scan_9 nested_scan_30 nested_scan_30_loops nested_scan_ofg_30; do
  f=$D/$name.json
  expect 0 "check $name" -- "$TGC" check "$f"
  expect 0 "run $name -O fast_compile" -- "$TGC" run "$f" -i "$X" -O fast_compile -o "$tmp/$name.fast_compile"
  expect 0 "run $name --include inline" -- "$TGC" run "$f" -i "$X" --include inline -o "$tmp/$name.inline"
  expect 0 "compile $name to a .tgf" -- "$TGC" compile "$f" -o "$tmp/$name.tgf"
  expect 0 "run $name's .tgf" -- "$TGC" run "$tmp/$name.tgf" -i "$X" -o "$tmp/$name.tgf.out"
done
for name in nested_scan_grad_9 nested_scan_grad_30 nested_scan_grad_ofg_30 nested_scan_grad_ids; do
  f=$D/$name.json
  expect 0 "check $name" -- "$TGC" check "$f"
  expect 0 "compile $name to a .tgf" -- "$TGC" compile "$f" -o "$tmp/$name.tgf"
  expect 0 "run $name's .tgf" -- "$TGC" run "$tmp/$name.tgf" -i "$X" -o "$tmp/$name.tgf.out"
done
# An error 30 bodies down, under owners with long ids: the chain of places
# (each level "nodes[0] (scan -> <id>): attrs.body") passes the message's
# 2 KB; its middle goes, and the cause stays (it was cut off).
/usr/bin/python3 - "$D/nested_scan_30.json" "$tmp/long_ids.json" <<'PY'
import json, re, sys
t = re.sub(r'"(l\d+_inner)"', lambda m: '"%s_%s"' % (m.group(1), "p" * 110), open(sys.argv[1]).read())
g = json.loads(t)
deepest = [-1, None]
def walk(o, depth):
    if isinstance(o, dict):
        if "nodes" in o and "variables" in o:
            if depth > deepest[0]: deepest[:] = [depth, o]
            depth += 1
        for v in o.values(): walk(v, depth)
    elif isinstance(o, list):
        for v in o: walk(v, depth)
walk(g, 0)
next(n for n in deepest[1]["nodes"] if n["op"] == "add")["op"] = "addd"
json.dump(g, open(sys.argv[2], "w"))
PY
expect 2 "check an error 30 bodies down" -- "$TGC" check "$tmp/long_ids.json"
if [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ "$(wc -c <"$tmp/err")" -lt 2200 ] &&
   grep -q "^tgc: $tmp/long_ids.json: nodes\[0\] (scan -> y): attrs.body: nodes\[0\] (scan -> l1_inner_p*): attrs.body: .* \.\.\. .*: attrs.body: nodes\[0\]\.op: unknown op .addd. (did you mean .add.?)$" "$tmp/err"; then
  pass "one line under 2 KB: the outermost places, ' ... ', the innermost and the cause"
else
  fail "an error 30 bodies down: not one line under 2 KB ending with the cause"; sed 's/^/  | /' "$tmp/err"
fi
# Each run's y is the file's meta.tests value (one Python for all: NumPy
# takes a second to start).
/usr/bin/python3 - "$D" "$tmp" >"$tmp/values" <<'PY'
import json, os, sys
import numpy as np
d, tmp = sys.argv[1:]
for name in ["nested_scan_9", "nested_scan_30", "nested_scan_30_loops", "nested_scan_ofg_30"]:
    want = json.load(open(os.path.join(d, name + ".json")))["meta"]["tests"][0]["outputs"]["y"]
    w = np.array(want["data"], dtype=want["dtype"]).reshape(want["shape"])
    for run in ["fast_compile", "inline", "tgf.out"]:
        path = os.path.join(tmp, "%s.%s" % (name, run), "y.npy")
        got = np.load(path) if os.path.exists(path) else None
        ok = got is not None and got.shape == w.shape and np.allclose(got, w, rtol=1e-12, atol=1e-15)
        print("%s%s (%s): NumPy's value%s" % ("ok: " if ok else "", name, run, "" if ok else ": got %r, want %r" % (got, w)))
for name in ["nested_scan_grad_9", "nested_scan_grad_30", "nested_scan_grad_ofg_30", "nested_scan_grad_ids"]:
    outs = json.load(open(os.path.join(d, name + ".json")))["meta"]["tests"][0]["outputs"]
    for out in ["c", "gx"]:
        w = np.array(outs[out]["data"], dtype=outs[out]["dtype"]).reshape(outs[out]["shape"])
        path = os.path.join(tmp, name + ".tgf.out", out + ".npy")
        got = np.load(path) if os.path.exists(path) else None
        ok = got is not None and got.shape == w.shape and np.allclose(got, w, rtol=1e-12, atol=1e-15)
        print("%s%s (tgf.out): %s by hand%s" % ("ok: " if ok else "", name, out, "" if ok else ": got %r, want %r" % (got, w)))
PY
while read -r line; do case $line in ok:*) pass "${line#ok: }" ;; *) fail "$line" ;; esac; done <"$tmp/values"
[ -s "$tmp/values" ] || fail "no values compared"
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
