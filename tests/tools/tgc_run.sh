#!/usr/bin/env bash
# tgc check and tgc run: the run contract of DESIGN.md, exit statuses,
# inputs from literals and .npy files, outputs to .npy, --calls with updates.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}" "${TG_TEST_DATA:?}"
. "$(dirname "$0")/lib/checks.bash"
G=$TG_TEST_DATA/tools/counter.json
L=$TG_SRC/examples/logreg.json

expect 0 "--version" -- "$TGC" --version
contains out "tgc " "--version prints the version"
contains out "^BLAS: OpenBLAS [0-9]" "--version names the BLAS loaded"
contains out "^OpenMP threads: [0-9]" "--version gives the OpenMP threads"
expect 0 "--help" -- "$TGC" --help
contains out "tgc run FILE" "--help shows the run usage"
expect 2 "no arguments is bad usage" -- "$TGC"
# one line, as the other tools say it (not the 60 lines of --help)
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^tgc: missing COMMAND (check, compile, run, print, export, cache; see tgc --help)$" "$tmp/err" &&
  pass "no arguments: one line" || { fail "no arguments: $(wc -l <"$tmp/err") lines"; head -3 "$tmp/err"; }
[ -s "$tmp/out" ] && fail "no arguments printed on stdout"
expect 0 "--help" -- "$TGC" --help
contains out "\[--no-gc\] \[--device cpu|cuda\] -o OUT.tgf" "--help's compile usage shows --device, as compile --help does"
expect 2 "unknown command" -- "$TGC" frobnicate
# Every command answers --help and -h with its usage on stdout, exit 0.
for cmd in check compile run print export cache; do
  for h in --help -h; do
    expect 0 "$cmd $h" -- "$TGC" $cmd $h
    contains out "tgc $cmd " "$cmd $h prints $cmd's usage"
  done
done
expect 0 "print --help" -- "$TGC" print --help
contains out "\-\-include TAG, --exclude TAG" "print --help describes --include and --exclude"
# A bad option is one line naming it and where the help is, for every
# command (not the whole help on stderr).
expect 2 "check FILE -f main" -- "$TGC" check "$L" -f main
contains err "^tgc: check: unknown option '-f' (see tgc check --help)$" "check names its unknown option"
expect 2 "check with two files" -- "$TGC" check "$L" "$L"
contains err "^tgc: check: unexpected argument '$L'$" "check names the extra argument"
for cmd in check run compile print export; do
  expect 2 "$cmd --bogus" -- "$TGC" $cmd --bogus "$G"
  lines=$(wc -l <"$tmp/err")
  if [ "$lines" -eq 1 ] && grep -q "^tgc: $cmd: unknown option '--bogus' (see tgc $cmd --help)$" "$tmp/err"; then
    pass "$cmd --bogus: one line"; else fail "$cmd --bogus: $lines lines"; sed 's/^/  | /' "$tmp/err"; fi
done
expect 2 "run -f without its value" -- "$TGC" run "$G" -f
contains err "^tgc: run: -f needs a value (see tgc run --help)$" "a missing value is named"
expect 2 "run --calls without its value" -- "$TGC" run "$G" --calls
contains err "^tgc: run: --calls needs a value" "a long option is named as given"
expect 2 "compile -f twice" -- "$TGC" compile "$L" -f train -f train -o "$tmp/twice.tgf"
contains err "^tgc: compile: -f train given twice$" "compile names the function given twice"
# A gradient with attrs.disconnected "warn" and a w the cost does not
# depend on: zeros, and one warning line (Theano warns), exit 0.
cat >"$tmp/warn.json" <<'EOF'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [2]}}, {"id": "y", "type": {"dtype": "float64", "shape": [2]}}],
 "nodes": [{"op": "sum", "inputs": ["x"], "outputs": ["c"]},
           {"op": "grad", "inputs": ["c", "y"], "outputs": ["gy"], "attrs": {"disconnected": "warn"}}],
 "functions": {"main": {"inputs": ["x", "y"], "outputs": ["gy"]}}}
EOF
expect 0 "a disconnected gradient with warn" -- "$TGC" run "$tmp/warn.json" -i x='[1,2]' -i y='[3,4]'
contains err "^tgc: warning: nodes\[1\] (grad -> gy): inputs\[1\]: the cost 'c' does not depend on 'y' (attrs.disconnected is \"warn\"): its gradient is zeros$" "the warning names the node and the ids"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && pass "one warning line" || fail "$(wc -l <"$tmp/err") lines on stderr"
contains out "^\[0\.*, 0\.*\]$" "the gradient is zeros"
# An option of one value given twice is an error naming both (the last
# one silently winning hid a typo).
expect 2 "run -f twice" -- "$TGC" run "$L" -f train -f predict
contains err "^tgc: -f given twice ('train' and 'predict')$" "run names both values"
expect 2 "compile -o twice" -- "$TGC" compile "$L" -o "$tmp/a.tgf" -o "$tmp/b.tgf"
contains err "^tgc: -o given twice" "compile -o twice is named"
[ ! -e "$tmp/a.tgf" ] && [ ! -e "$tmp/b.tgf" ] && pass "nothing written" || fail "a .tgf was written"
expect 2 "run --save-state twice" -- "$TGC" run "$L" -f predict --save-state "$tmp/a.tgf" --save-state "$tmp/b.tgf"
expect 2 "print -f twice" -- "$TGC" print "$L" -f train -f train
expect 2 "print -O without --optimized" -- "$TGC" print "$L" -O none
contains err "choose the rewrites of --optimized" "print refuses -O it would ignore"
expect 0 "check the logistic regression" -- "$TGC" check "$L"
contains out "train(x, y) -> (cost, prediction, xent)" "check lists the functions"

# --calls with updates: the counter counts calls.
expect 0 "run step --calls 3" -- "$TGC" run "$G" -f step --calls 3
contains out "int64 ()" "scalar output printed with dtype and shape"
contains out "^3$" "after 3 calls the last output is 3"
expect 0 "run step --calls 4 --each" -- "$TGC" run "$G" -f step --calls 4 --each
contains out "call 4: n1=4" "--each prints one line per call"

# 64-bit integers whole: --each prints them exactly (not through a
# double, which holds them only to 2^53), and a literal past int64 and
# uint64, which json-c would clamp to the bound, is refused.
I64=$tmp/i64.json
echo '{"format": "tg-graph", "version": 1,
 "variables": [{"id": "x", "type": {"dtype": "int64", "shape": []}}, {"id": "u", "type": {"dtype": "uint64", "shape": []}}],
 "nodes": [{"op": "identity", "inputs": ["x"], "outputs": ["y"]}, {"op": "identity", "inputs": ["u"], "outputs": ["v"]}],
 "functions": {"main": {"inputs": ["x", "u"], "outputs": ["y", "v"]}}}' >"$I64"
expect 0 "--each with int64 and uint64 near their ends" -- "$TGC" run "$I64" -i x=9007199254740993 -i u=18446744073709551615 --each
contains out "^call 1: y=9007199254740993 v=18446744073709551615$" "--each prints 2^53 + 1 and 2^64 - 1 exactly"
expect 0 "the ends themselves" -- "$TGC" run "$I64" -i x=-9223372036854775808 -i u=18446744073709551615 --each
contains out "^call 1: y=-9223372036854775808 v=18446744073709551615$" "-2^63 and 2^64 - 1 are read and printed as written"
# NaN as NumPy prints it, whatever its sign: log(-1) is a NaN with the
# sign bit set, which glibc's %g writes as -nan; log(0) is -inf.
NANP=$tmp/nanp.json
echo '{"format": "tg-graph", "version": 1,
 "variables": [{"id": "a", "type": {"dtype": "float64", "shape": [2]}}, {"id": "z", "type": {"dtype": "float32", "shape": []}}],
 "nodes": [{"op": "log", "inputs": ["a"], "outputs": ["r"]}, {"op": "sum", "inputs": ["r"], "outputs": ["s"]},
   {"op": "log", "inputs": ["z"], "outputs": ["t"]}],
 "functions": {"main": {"inputs": ["a", "z"], "outputs": ["s", "t"]}}}' >"$NANP"
expect 0 "--each with a NaN and -inf" -- "$TGC" run "$NANP" -i a='[-1, 2]' -i z=0 --each
contains out "^call 1: s=nan t=-inf$" "--each prints NaN as nan (NumPy's nan), -inf as -inf"
expect 2 "-i x=-2^63 - 1" -- "$TGC" run "$I64" -i x=-9223372036854775809 -i u=1
contains err "^tgc: -i x: '-9223372036854775809' holds an integer past int64 and uint64" "a literal below -2^63 is refused, not clamped"
expect 2 "-i u=2^64" -- "$TGC" run "$I64" -i x=1 -i u='[18446744073709551616]'
contains err "^tgc: -i u: .* holds an integer past int64 and uint64" "a literal above 2^64 - 1 is refused, not clamped"

# Literals read with the input's dtype; safe casts accepted.
expect 0 "literal vector input" -- "$TGC" run "$G" -f double -i 'x=[1, 2.5, -3]'
contains out "\[ *2\.\?, *5\.\?, *-6\.\?\]" "the doubled vector is printed"
expect 2 "a literal of the wrong shape" -- "$TGC" run "$G" -f double -i 'x=[[1, 2]]'
contains err "the input has shape (?,), the value has shape (1, 2)" "the shape error names both shapes as NumPy tuples"
expect 2 "a float literal for an int32 input" -- "$TGC" run "$G" -f div -i 'k=2.5'
expect 2 "an input the function does not have" -- "$TGC" run "$G" -f double -i 'x=[1]' -i 'nope=3'
contains err "no input 'nope'" "the unknown input is named"
expect 2 "a missing input" -- "$TGC" run "$G" -f double
contains err "needs input 'x'" "the missing input is named"
expect 2 "an unknown function" -- "$TGC" run "$G" -f nothere
contains err "no function 'nothere'" "the unknown function is named"
expect 2 "no -f with several functions and no main" -- "$TGC" run "$G"
expect 2 "an unknown preset" -- "$TGC" run "$G" -f step -O turbo
expect 2 "a missing file" -- "$TGC" run "$tmp/none.json"
expect 2 "--calls 0" -- "$TGC" run "$G" -f step --calls 0

# More literals: non-finite floats as strings, booleans, overflow.
expect 0 "non-finite literals as strings" -- "$TGC" run "$G" -f double -i 'x=["nan", "-inf", 1]'
contains out "\[ *nan, *-inf, *2\.\?\]" "nan and -inf are read"
expect 0 "a bool literal for an int32 input (safe cast)" -- "$TGC" run "$G" -f div -i 'k=true'
contains out "^10$" "true reads as 1"
expect 2 "a literal that overflows int32" -- "$TGC" run "$G" -f div -i 'k=3000000000'
contains err "does not fit int32" "the overflow is named"
expect 2 "a literal that is not JSON" -- "$TGC" run "$G" -f div -i 'k=abc'
contains err "neither a .npy or .npz path nor a JSON literal" "the bad literal is described"
expect 2 "-i without =" -- "$TGC" run "$G" -f div -i k
expect 2 "a missing compiled-function file" -- "$TGC" run "$tmp/f.tgf"
contains err "f.tgf: cannot open" "the missing .tgf is named"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^tgc: ' "$tmp/err" && pass "errors are one line prefixed 'tgc: '" || fail "error format"
# Text from the file or the command line is echoed as printable text: a
# newline, tab or ESC (a terminal's control sequence) in a name does not
# reach the terminal.
printf '{"format": "tg-graph", "version": 1, "variables": [{"id": "a\\nb\\u001b[2Jc\\td", "type": {"dtype": "float64", "shape": []}}], "nodes": []}' >"$tmp/ctl.json"
expect 2 "an id with a newline, ESC and a tab" -- "$TGC" run "$tmp/ctl.json"
contains err "'a b?\[2Jc d' is not a valid id" "the id is shown with a space for the newline and tab, ? for ESC"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && ! grep -q "$(printf '\033')" "$tmp/err" && pass "one line, no ESC" || fail "control characters reached stderr"
expect 2 "a function name with ESC" -- "$TGC" run "$G" -f "$(printf 'x\033[2J')"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && ! grep -q "$(printf '\033')" "$tmp/err" && grep -q "'x?\[2J'" "$tmp/err" && pass "-f with ESC: shown as ?" || fail "-f with ESC: $(cat -v "$tmp/err")"
# --save-state checkpoints the counter: resuming counts on from 3.
expect 0 "--save-state" -- "$TGC" run "$G" -f step --calls 3 --save-state "$tmp/s.tgf"
expect 0 "run the checkpoint" -- "$TGC" run "$tmp/s.tgf" -f step --calls 2
contains out "^5$" "the checkpoint resumes where the run stopped"
: >"$tmp/file"
expect 2 "-o onto a file" -- "$TGC" run "$G" -f step -o "$tmp/file"
expect 0 "-O none" -- "$TGC" run "$G" -f step -O none
expect 0 "run --help" -- "$TGC" run --help
contains out "--calls N" "run --help shows the options"

# Run-time failure: exit 1, one line naming the node and its trace.
expect 1 "integer division by zero" -- "$TGC" run "$G" -f div -i k=0
contains err "integer division by zero" "the failure is described"
contains err "nodes\[2\]" "the node is named"
contains err "model.py:7" "the creation trace is shown"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && pass "one line on stderr" || fail "more than one line on stderr"

# -o DIR: created with its parents; an output listed twice written once.
expect 0 "run -o" -- "$TGC" run "$G" -f double -i 'x=[1, 2]' -o "$tmp/a/b"
[ -f "$tmp/a/b/x2.npy" ] && pass "x2.npy written" || fail "x2.npy missing"
[ "$(ls "$tmp/a/b" | wc -l)" -eq 1 ] && pass "one file for an output listed twice" || fail "files: $(ls "$tmp/a/b")"
# Feed the written .npy back in: 2*[2, 4].
expect 0 "a .npy input" -- "$TGC" run "$G" -f double -i "x=$tmp/a/b/x2.npy"
contains out "\[ *4\.\?, *8\.\?\]" "the .npy input was read"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 - "$tmp/a/b/x2.npy" <<'PY' && pass "NumPy reads the output" || fail "NumPy disagrees"
import sys, numpy as np
a = np.load(sys.argv[1])
assert a.dtype == np.float64 and a.tolist() == [2.0, 4.0], a
PY
  /usr/bin/python3 -c "import numpy as np; np.save('$tmp/i32.npy', np.array([3, 4], np.int32)); np.save('$tmp/f32.npy', np.array([1.5], np.float32)); np.save('$tmp/c.npy', np.array([1j]))"
  expect 0 "an int32 .npy for a float64 input (safe cast)" -- "$TGC" run "$G" -f double -i "x=$tmp/i32.npy"
  contains out "\[ *6\.\?, *8\.\?\]" "the int32 values were cast"
  expect 2 "a complex .npy is refused" -- "$TGC" run "$G" -f double -i "x=$tmp/c.npy"
  expect 2 "a float .npy for an int32 input" -- "$TGC" run "$G" -f div -i "k=$tmp/f32.npy"
else
  echo "skip: NumPy checks (python3-numpy not installed)"
fi
# .npz archives: -o OUT.npz writes every output once (its folder made);
# -i ID=FILE.npz[:NAME] reads one array, -i FILE.npz every input it names.
expect 0 "run -o OUT.npz" -- "$TGC" run "$G" -f double -i 'x=[1, 2]' -o "$tmp/z/out.npz"
[ -f "$tmp/z/out.npz" ] && pass "out.npz written in a new folder" || fail "out.npz missing"
[ "$(ls "$tmp/z")" = out.npz ] && pass "nothing else left in the folder" || fail "files: $(ls "$tmp/z")"
expect 0 "-i ID=FILE.npz:NAME" -- "$TGC" run "$G" -f double -i "x=$tmp/z/out.npz:x2"
contains out "\[ *4\.\?, *8\.\?\]" "the named array was read"
expect 0 "-i ID=FILE.npz with one array" -- "$TGC" run "$G" -f double -i "x=$tmp/z/out.npz"
contains out "\[ *4\.\?, *8\.\?\]" "the archive's only array was read"
expect 2 "-i FILE.npz naming no input" -- "$TGC" run "$G" -f double -i "$tmp/z/out.npz"
contains err "^tgc: -i $tmp/z/out.npz: none of its arrays ('x2') is an input of function 'double' (its inputs: x)$" "the archive's arrays and the inputs are named"
expect 2 "-i ID=FILE.npz:NAME with no such array" -- "$TGC" run "$G" -f double -i "x=$tmp/z/out.npz:y"
contains err "^tgc: -i x: $tmp/z/out.npz holds no array 'y' (it holds 'x2')$" "the missing array is named"
expect 2 "-i without = that is not an archive" -- "$TGC" run "$G" -f double -i "$tmp/z/out.npy"
contains err "^tgc: -i: expected ID=VALUE or FILE.npz, got" "both forms are named"
head -c 100 "$tmp/z/out.npz" >"$tmp/z/cut.npz"
expect 2 "a truncated archive" -- "$TGC" run "$G" -f double -i "$tmp/z/cut.npz"
contains err "^tgc: -i $tmp/z/cut.npz: not a .npz file (no zip directory at its end)$" "one line naming the archive"
expect 2 "--compress without -o" -- "$TGC" run "$G" -f double -i 'x=[1, 2]' --compress
contains err "^tgc: --compress: applies to -o OUT.npz (an archive), and there is no -o$" "the rule is said"
expect 2 "--compress with -o DIR" -- "$TGC" run "$G" -f double -i 'x=[1, 2]' -o "$tmp/z/d" --compress=1
contains err "^tgc: --compress: applies to -o OUT.npz (an archive), not to -o DIR$" "the rule is said"
expect 2 "--compress=10" -- "$TGC" run "$G" -f double -i 'x=[1, 2]' -o "$tmp/z/d.npz" --compress=10
contains err "^tgc: --compress: expected a level from 0 to 9, got '10'$" "the level is named"
[ ! -e "$tmp/z/d" ] && [ ! -e "$tmp/z/d.npz" ] && pass "nothing written on bad usage" || fail "something was written"
# An archive whose path holds '=': after a '/', or as ./k=1.npz.
mkdir -p "$tmp/z/a=b"
cp "$tmp/z/out.npz" "$tmp/z/a=b/k=1.npz"
expect 2 "-i DIR/A=B.npz is an archive" -- "$TGC" run "$G" -f double -i "$tmp/z/a=b/k=1.npz"
contains err "^tgc: -i $tmp/z/a=b/k=1.npz: none of its arrays ('x2') is an input of function 'double' (its inputs: x)$" "the archive under a=b was opened"
expect 0 "-i ID=DIR/A=B.npz:NAME" -- "$TGC" run "$G" -f double -i "x=$tmp/z/a=b/k=1.npz:x2"
contains out "\[ *4\.\?, *8\.\?\]" "the archive under a=b was read"
expect 2 "-i k=1.npz: an id form" -- "$TGC" run "$G" -f double -i "k=1.npz"
contains err "^tgc: -i k: function 'double' has no input 'k' (its inputs: x); for an archive whose name holds '=', write -i ./k=1.npz$" "the ./ form is suggested"
expect 2 "-o OUT.npz that cannot be written" -- "$TGC" run "$G" -f double -i 'x=[1, 2]' -o "$tmp/z/out.npz/x.npz"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && pass "one line on stderr" || fail "more than one line on stderr"
# An output the user names that cannot be written is bad input (exit 2),
# one line naming the option and the path, for every command that writes
# one; compile, export and --save-state try it before the work.
"$TGC" compile "$L" -o "$tmp/lr.tgf" >/dev/null
nodir=$tmp/no/such/dir
expect 2 "compile -o into a missing folder" -- "$TGC" compile "$L" -o "$nodir/x.tgf"
contains err "^tgc: -o $nodir/x.tgf: cannot create a temporary file: No such file or directory$" "compile names -o and the path"
expect 2 "export -o into a missing folder" -- "$TGC" export "$tmp/lr.tgf" -f train -o "$nodir/x.json"
contains err "^tgc: -o $nodir/x.json: cannot create a temporary file: No such file or directory$" "export names -o and the path"
expect 2 "--save-state into a missing folder" -- "$TGC" run "$tmp/lr.tgf" -f predict -i x='[[1, 2]]' --save-state "$nodir/s.tgf"
contains err "^tgc: --save-state $nodir/s.tgf: cannot create a temporary file: No such file or directory$" "--save-state names the path"
[ ! -s "$tmp/out" ] && pass "--save-state's path is tried before the run" || fail "the run printed before the error"
expect 2 "-o OUT.npz into a file" -- "$TGC" run "$G" -f double -i 'x=[1, 2]' -o "$tmp/lr.tgf/o.npz"
# An empty path is bad usage, said before anything is loaded or run.
for args in "compile $L -o" "export $tmp/lr.tgf -o" "run $G -f step -o" "run $G -f step --save-state"; do
  opt=${args##* }
  expect 2 "$args ''" -- "$TGC" $args ''
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^tgc: $opt: expected a file name, got ''$" "$tmp/err" &&
    pass "$args '': one line naming $opt" || { fail "$args '': $(cat "$tmp/err")"; }
done
# -o DIR on a disk that fills (here the file-size limit): the first file
# that fails ends it, one line, a run-time failure (exit 1: the folder was
# tried before the run); the files before it are left whole.
python3 - "$tmp/three.json" <<'PY'
import json, sys
json.dump({"format": "tg-graph", "version": 1,
           "variables": [{"id": "x", "type": {"dtype": "float64", "shape": [200]}}],
           "nodes": [{"op": "sum", "inputs": ["x"], "outputs": ["a"]},
                     {"op": "add", "inputs": ["x", "x"], "outputs": ["b"]},
                     {"op": "exp", "inputs": ["x"], "outputs": ["c"]}],
           "functions": {"main": {"inputs": ["x"], "outputs": ["a", "b", "c"]}}}, open(sys.argv[1], "w"))
PY
x200="[$(seq -s, 1 200 | sed 's/,$//')]"
(ulimit -f 1; trap '' XFSZ; exec "$TGC" run "$tmp/three.json" -i x="$x200" -o "$tmp/full") >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^tgc: -o $tmp/full/b.npy: write failed: File too large$" "$tmp/err" &&
  pass "a full disk: one line, at the first file that fails (b)" || { fail "a full disk: exit $rc"; sed 's/^/  | /' "$tmp/err"; }
[ -s "$tmp/full/a.npy" ] && [ ! -e "$tmp/full/b.npy" ] && [ ! -e "$tmp/full/c.npy" ] && [ -z "$(ls "$tmp/full" | grep '\.tmp\.')" ] &&
  pass "a.npy written before it stays; b and c not written, no temporary" || fail "left in the folder: $(ls "$tmp/full")"
# A destination that cannot be written is said before the run (exit 2,
# one line), not after it: the inputs given would make the run fail
# (exit 1, a length of 3 where three.json says 200).
: >"$tmp/plainfile"
expect 2 "-o DIR under a file, before the run" -- "$TGC" run "$tmp/three.json" -i x="[1,2,3]" -o "$tmp/plainfile/sub"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^tgc: -o $tmp/plainfile/sub: cannot create the folder: Not a directory$" "$tmp/err" &&
  pass "-o DIR: one line naming it" || fail "-o DIR under a file: $(cat "$tmp/err")"
expect 2 "-o OUT.npz under a file, before the run" -- "$TGC" run "$tmp/three.json" -i x="[1,2,3]" -o "$tmp/plainfile/o.npz"
contains err "^tgc: -o $tmp/plainfile/o.npz: cannot create the folder $tmp/plainfile: " "-o OUT.npz: one line naming it"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 - "$tmp/z/out.npz" <<'PY' && pass "NumPy reads tg's archive" || fail "NumPy disagrees"
import sys, zipfile, numpy as np
z = np.load(sys.argv[1])
assert z.files == ["x2"], z.files
assert z["x2"].dtype == np.float64 and z["x2"].tolist() == [2.0, 4.0], z["x2"]
assert zipfile.ZipFile(sys.argv[1]).testzip() is None
PY
  # --compress: deflated members (np.savez_compressed's), here 24 MB in
  # pieces on the threads; NumPy reads the values, zipfile checks the CRCs.
  /usr/bin/python3 -c "import numpy as np; np.save('$tmp/z/big.npy', np.arange(3000000) % 977 / 4.0)"
  expect 0 "run -o OUT.npz --compress" -- "$TGC" run "$G" -f double -i "x=$tmp/z/big.npy" -o "$tmp/z/c/out.npz" --compress
  expect 0 "run -o OUT.npz --compress=1" -- "$TGC" run "$G" -f double -i "x=$tmp/z/big.npy" -o "$tmp/z/c/out1.npz" --compress=1
  /usr/bin/python3 - "$tmp/z/c/out.npz" "$tmp/z/c/out1.npz" <<'PY' && pass "NumPy reads tg's deflated archives" || fail "NumPy disagrees"
import os, sys, zipfile, numpy as np
want = np.arange(3000000) % 977 / 4.0 * 2
for f in sys.argv[1:]:
    info = zipfile.ZipFile(f).infolist()
    assert [i.compress_type for i in info] == [zipfile.ZIP_DEFLATED], info
    assert info[0].compress_size < info[0].file_size / 4, info
    assert zipfile.ZipFile(f).testzip() is None
    assert np.array_equal(np.load(f)["x2"], want)
assert os.path.getsize(sys.argv[1]) < os.path.getsize(sys.argv[2])  # 6 deflates harder than 1
PY
  expect 0 "-i ID=FILE.npz of tg's deflated archive" -- "$TGC" run "$G" -f double -i "x=$tmp/z/c/out.npz" -o "$tmp/z/c/back.npz"
  /usr/bin/python3 -c "import numpy as np, sys; sys.exit(not np.array_equal(np.load('$tmp/z/c/back.npz')['x2'], np.arange(3000000) % 977 / 4.0 * 4))" \
    && pass "tg reads its deflated archive back" || fail "read back other values"
  rm -f "$tmp/z/big.npy" "$tmp/z/c/back.npz"
  /usr/bin/python3 -c "import numpy as np; np.savez_compressed('$tmp/z/in.npz', x=np.array([1.5, 2.5]), k=np.int32(7), other=np.arange(3))"
  expect 0 "-i FILE.npz from np.savez_compressed" -- "$TGC" run "$G" -f double -i "$tmp/z/in.npz"
  contains out "\[ *3\.\?, *5\.\?\]" "x came from the archive"
  cp "$tmp/z/in.npz" "$tmp/z/a=b/in=1.npz"
  (cd "$tmp/z/a=b" && "$TGC" run "$G" -f double -i ./in=1.npz) >"$tmp/out" 2>"$tmp/err" \
    && grep -q "\[ *3\.\?, *5\.\?\]" "$tmp/out" && pass "-i ./K=V.npz is the archive" || fail "-i ./in=1.npz: $(cat "$tmp/err")"
  expect 0 "a later -i replaces the archive's" -- "$TGC" run "$G" -f double -i "$tmp/z/in.npz" -i 'x=[10]'
  contains out "\[ *20\.\?\]" "the later -i won"
  expect 0 "-i k=7 as a literal" -- "$TGC" run "$G" -f div -i k=7
  cp "$tmp/out" "$tmp/z/lit.out"
  expect 0 "-i FILE.npz for an int32 input" -- "$TGC" run "$G" -f div -i "$tmp/z/in.npz"
  cmp -s "$tmp/out" "$tmp/z/lit.out" && pass "the archive's int32 k gives what -i k=7 gives" || fail "outputs differ"
  expect 2 "an archive's array of the wrong dtype" -- "$TGC" run "$G" -f div -i "k=$tmp/z/in.npz:x"
  contains err "^tgc: -i k: $tmp/z/in.npz: array 'x' holds float64, which cannot be cast safely to the input's int32$" "the array is named"
  /usr/bin/python3 -c "import numpy as np; np.savez('$tmp/z/nok.npz', X=np.array([1.0]))"
  expect 2 "an archive without the input" -- "$TGC" run "$G" -f double -i "$tmp/z/nok.npz" -i "x=$tmp/z/nok.npz:X" -i "$tmp/z/in.npz"
  expect 2 "an input left without a value" -- "$TGC" run "$L" -f train -i "$tmp/z/in.npz"
else
  echo "skip: NumPy checks of .npz archives (python3-numpy not installed)"
fi
# A malformed graph: exit 2 with the file and location.
printf '{"format": "tg-graph", "version": 1, "variables": [], "nodes": [{"op": "dott", "inputs": [], "outputs": ["y"]}]}' >"$tmp/bad.json"
expect 2 "an unknown op" -- "$TGC" check "$tmp/bad.json"
contains err "nodes\[0\].op: unknown op 'dott' (did you mean 'dot'?)" "the loader names the place and suggests"

# The logistic regression trains: the cost falls.
if "$TG_BUILD_DIR/tools/tg-example-logreg-data" "$tmp" 200; then
  expect 0 "train the logistic regression" -- "$TGC" run "$L" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 5 --each
  first=$(sed -n '1s/.*cost=\([^ ]*\).*/\1/p' "$tmp/out"); last=$(sed -n '5s/.*cost=\([^ ]*\).*/\1/p' "$tmp/out")
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' && pass "the cost falls ($first -> $last)" || fail "cost $first -> $last"
fi
# libgomp's spin count (tools/common/ompspin.h): run starts itself again
# with GOMP_SPINCOUNT=1000 unless the environment chose one, with either
# OpenBLAS build; libgomp prints what it read (OMP_DISPLAY_ENV, once per
# start)
spin() { env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u TG_OMP_SPIN -u TG_OMP_RESPAWNED OMP_DISPLAY_ENV=verbose "$@"; }
expect 0 "run with libgomp's settings shown" -- spin "$TGC" run "$G" -f step
contains err "GOMP_SPINCOUNT = '1000'" "run: libgomp's threads spin 1000 rounds"
contains out "^1$" "the run's output is the same"
expect 0 "run with GOMP_SPINCOUNT=77" -- spin env GOMP_SPINCOUNT=77 "$TGC" run "$G" -f step
n=$(grep -c "GOMP_SPINCOUNT = " "$tmp/err")
if [ "$n" -eq 1 ] && grep -q "GOMP_SPINCOUNT = '77'" "$tmp/err"; then pass "a spin count the user set is kept, with no second start"; else fail "GOMP_SPINCOUNT=77: $n starts"; sed 's/^/  | /' "$tmp/err"; fi
expect 0 "run with OMP_WAIT_POLICY=active" -- spin env OMP_WAIT_POLICY=active "$TGC" run "$G" -f step
n=$(grep -c "GOMP_SPINCOUNT = " "$tmp/err")
if [ "$n" -eq 1 ]; then pass "a wait policy the user set is kept"; else fail "OMP_WAIT_POLICY=active: $n starts"; fi
expect 0 "run with TG_OMP_SPIN=keep" -- spin env TG_OMP_SPIN=keep "$TGC" run "$G" -f step
n=$(grep -c "GOMP_SPINCOUNT = " "$tmp/err")
if [ "$n" -eq 1 ] && ! grep -q "GOMP_SPINCOUNT = '1000'" "$tmp/err"; then pass "TG_OMP_SPIN=keep keeps libgomp's default"; else fail "TG_OMP_SPIN=keep: $n starts"; fi
expect 0 "run with TG_OMP_SPIN=20" -- spin env TG_OMP_SPIN=20 "$TGC" run "$G" -f step
contains err "GOMP_SPINCOUNT = '20'" "TG_OMP_SPIN=20 asks for 20 rounds"
expect 0 "run with TG_OMP_SPIN=banana" -- spin env TG_OMP_SPIN=banana "$TGC" run "$G" -f step
contains err "GOMP_SPINCOUNT = '1000'" "a TG_OMP_SPIN that is not a number: 1000"
expect 0 "check" -- spin "$TGC" check "$G"
n=$(grep -c "GOMP_SPINCOUNT = " "$tmp/err")
if [ "$n" -eq 1 ]; then pass "check, which calls nothing, starts once"; else fail "check started $n times"; fi

# ---- The command-line contract (DESIGN.md, "Tools"): one line, exit 2 ----
. "$(dirname "$0")/lib/cli.bash"
cp "$L" "$tmp/lr.json"
cp "$G" "$tmp/counter.json"
"$TGC" compile "$tmp/counter.json" -o "$tmp/c.tgf" >/dev/null || fail "compile counter.json"
cp "$tmp/c.tgf" "$tmp/s0.tgf"; cp "$tmp/c.tgf" "$tmp/c.tgf.npz"
keep "$tmp/lr.json"; keep "$tmp/counter.json"; keep "$tmp/c.tgf"
# An output naming an input file is refused before anything is written
# (each was written over without a word, exit 0).
one_line 2 "^tgc: -o .*/lr.json is the graph file compiled: the compiled file would replace it$" \
  "compile -o FILE" -- "$TGC" compile "$tmp/lr.json" -o "$tmp/./lr.json"
unchanged "$tmp/lr.json" "compile -o FILE leaves the graph"
one_line 2 "^tgc: -o .*/c.tgf is the .tgf exported: the graph would replace it$" \
  "export -o FILE" -- "$TGC" export "$tmp/c.tgf" -f step -o "$tmp/c.tgf"
unchanged "$tmp/c.tgf" "export -o FILE leaves the .tgf"
one_line 2 "^tgc: --save-state .*/counter.json is the file run: the checkpoint would replace it$" \
  "run --save-state FILE" -- "$TGC" run "$tmp/counter.json" -f step --save-state "$tmp/counter.json"
unchanged "$tmp/counter.json" "run --save-state FILE leaves the graph"
# (a .tgf, read whole before the run, may take its own checkpoint)
expect 0 "run FILE.tgf --save-state FILE.tgf" -- "$TGC" run "$tmp/s0.tgf" -f step --save-state "$tmp/s0.tgf"
one_line 2 "^tgc: -o .*/c.tgf.npz is the file run: the outputs would replace it$" \
  "run FILE.tgf -o FILE.tgf.npz" -- "$TGC" run "$tmp/c.tgf.npz" -f step -o "$tmp/c.tgf.npz"
"$TGC" run "$tmp/counter.json" -f double -i x='[1,2]' -o "$tmp/in.npz" >/dev/null || fail "run -o in.npz"
"$TGC" run "$tmp/counter.json" -f double -i x='[1,2]' -o "$tmp/od" >/dev/null || fail "run -o od"
keep "$tmp/in.npz"; keep "$tmp/od/x2.npy"
one_line 2 "^tgc: -o .*/in.npz is the input file of -i x=.*in.npz:x2: the outputs would replace it$" \
  "run -i FILE.npz:NAME -o FILE.npz" -- "$TGC" run "$tmp/counter.json" -f double -i x="$tmp/in.npz:x2" -o "$tmp/in.npz"
unchanged "$tmp/in.npz" "run -o IN.npz leaves the archive"
one_line 2 "^tgc: -o .*/od/x2.npy is the input file of -i x=.*x2.npy: the output would replace it$" \
  "run -i x=DIR/x2.npy -o DIR" -- "$TGC" run "$tmp/counter.json" -f double -i x="$tmp/od/x2.npy" -o "$tmp/od"
unchanged "$tmp/od/x2.npy" "run -o DIR leaves DIR/<id>.npy read by -i"
one_line 2 "^tgc: --save-state .*/s.npz and -o .*/s.npz are the same file" \
  "run --save-state X -o X" -- "$TGC" run "$tmp/counter.json" -f step --save-state "$tmp/s.npz" -o "$tmp/s.npz"
# Checking -o makes no folder: a run that fails leaves none.
one_line 2 "needs input 'x'" "run -o NEW/DIR without its input" -- "$TGC" run "$tmp/counter.json" -f double -o "$tmp/new1/sub"
absent "$tmp/new1" "a failed run -o DIR makes no folder"
one_line 2 "needs input 'x'" "run -o NEW/x.npz without its input" -- "$TGC" run "$tmp/counter.json" -f double -o "$tmp/new2/x.npz"
absent "$tmp/new2" "a failed run -o NEW/x.npz makes no folder"
one_line 2 "^tgc: -o .*/lr.json/sub: cannot create the folder.*Not a directory" \
  "run -o under a file" -- "$TGC" run "$tmp/counter.json" -f double -i x='[1]' -o "$tmp/lr.json/sub"
expect 0 "run -o NEW/DIR makes it when writing" -- "$TGC" run "$tmp/counter.json" -f double -i x='[1,2]' -o "$tmp/new3/a/b"
[ -f "$tmp/new3/a/b/x2.npy" ] && pass "the folder made at write time" || fail "no $tmp/new3/a/b/x2.npy"
# -o -: export writes the JSON to standard output; compile, run and
# --save-state refuse it (they wrote a file named '-').
mkdir -p "$tmp/dash"
(cd "$tmp/dash" && "$TGC" export "$tmp/c.tgf" -f step -o - >"$tmp/exp.json" 2>"$tmp/err")
rc=$?
[ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] && grep -q '"format": *"tg-graph"' "$tmp/exp.json" && [ ! -e "$tmp/dash/-" ] &&
  pass "export -o - writes the graph to stdout" || { fail "export -o -: exit $rc"; head -3 "$tmp/err"; }
"$TGC" check "$tmp/exp.json" >/dev/null 2>&1 && pass "export -o -'s JSON loads" || fail "export -o -'s JSON does not load"
(cd "$tmp/dash" && one_line 2 "^tgc: -o -: a compiled-function file cannot go to standard output" \
  "compile -o -" -- "$TGC" compile "$tmp/lr.json" -o -)
(cd "$tmp/dash" && one_line 2 "^tgc: -o -: a folder or archive of outputs .*cannot go to standard output" \
  "run -o -" -- "$TGC" run "$tmp/counter.json" -f double -i x='[1]' -o -)
(cd "$tmp/dash" && one_line 2 "^tgc: --save-state -: a compiled-function file cannot go to standard output" \
  "run --save-state -" -- "$TGC" run "$tmp/counter.json" -f step --save-state -)
absent "$tmp/dash/-" "no file named '-'"
# A failed write to stdout is one line, not two.
one_line 1 "^tgc: -o -: write failed" "export -o - >/dev/full" -- sh -c '"$0" export "$1" -f step -o - >/dev/full' "$TGC" "$tmp/c.tgf"
# Every single-value option given twice is refused, as -o and -f are.
one_line 2 "^tgc: --calls given twice \('1' and '2'\)$" "run --calls twice" -- "$TGC" run "$tmp/counter.json" -f step --calls 1 --calls 2
one_line 2 "^tgc: --device given twice" "run --device twice" -- "$TGC" run "$tmp/counter.json" -f step --device cpu --device cpu
one_line 2 "^tgc: --dnn-conv-algo given twice" "run --dnn-conv-algo twice" -- "$TGC" run "$tmp/counter.json" -f step --dnn-conv-algo time_once --dnn-conv-algo guess_once
one_line 2 "^tgc: --compress given twice" "run --compress twice" -- "$TGC" run "$tmp/counter.json" -f step --compress=1 --compress -o "$tmp/z.npz"
one_line 2 "^tgc: --ids given twice" "print --ids twice" -- "$TGC" print "$tmp/counter.json" -f step --ids int --ids char
one_line 2 "^tgc: --profile given twice" "print --profile twice" -- "$TGC" print "$tmp/counter.json" -f step --profile 1 --profile 2
one_line 2 "^tgc: --device given twice" "compile --device twice" -- "$TGC" compile "$tmp/counter.json" --device cpu --device cuda -o "$tmp/d.tgf"
# --version, in every command as in tgdebug's
for cmd in check compile run print export cache; do
  expect 0 "$cmd --version" -- "$TGC" $cmd --version
  contains out "^tgc [0-9]" "$cmd --version prints the version"
done

echo "$fails failed"
[ "$fails" -eq 0 ]
