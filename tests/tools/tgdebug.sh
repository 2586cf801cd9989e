#!/usr/bin/env bash
# tgdebug nanguard, testvalues and compare.
# nanguard: a NaN made deep inside a graph (log of a negative number after
# a dot, a tanh, ...), an overflow in exp, and 0/0 inside a fused
# composite are each caught at exactly the node that made them, with its
# op and the creation trace the file gave it (through the composite's
# origins to the file's node when fused); a NaN fed in is reported as the
# input; --big and --no-nan change what counts. testvalues: a shape
# mismatch stops at the right node with its trace; a missing test_value is
# exit 2 naming the input. compare: the examples agree; a deliberately
# wrong rewrite (tgdebug-testrw) is named, with the node it removed. Bad
# usage and bad files: exit 2 with one line.
set -uo pipefail
: "${TGDEBUG:?}" "${TGDEBUG_TESTRW:?}" "${TGC:?}" "${TG_SRC:?}" "${TG_BUILD_DIR:?}" "${TG_TEST_DATA:?}"
source "$TG_SRC/tests/tools/lib/checks.bash"
D="$TG_TEST_DATA/tgdebug"
T="$TGDEBUG"

# One line on stderr starting "tgdebug: ", and the exit status wanted.
bad() {
  local want=$1 what=$2
  shift 2
  "$T" "$@" >/dev/null 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -eq "$want" ] && [ "$lines" -eq 1 ] && grep -q '^tgdebug: ' "$tmp/err"; then
    pass "$what: exit $rc, $(cat "$tmp/err")"
  else
    fail "$what: exit $rc (want $want), $lines lines on stderr:"
    sed 's/^/  | /' "$tmp/err"
  fi
}
# out LINE DESCRIPTION: stdout has exactly this line.
line() { if grep -qxF -- "$1" "$tmp/out"; then pass "$2"; else fail "$2: no line '$1' in"; sed 's/^/  | /' "$tmp/out"; fi; }

expect 0 "--help" -- "$T" --help
contains out "nanguard" "--help lists nanguard"
contains out "compare" "--help lists compare"
expect 0 "--version" -- "$T" --version
contains out "^tgdebug " "--version prints the version"
expect 0 "nanguard --help" -- "$T" nanguard --help
expect 0 "testvalues --help" -- "$T" testvalues --help
expect 0 "compare --help" -- "$T" compare --help
# Every subcommand answers --help and -h (exit 0, its usage) and
# --version as tgdebug --version does.
for sub in nanguard testvalues compare run serve; do
  for h in --help -h; do
    expect 0 "$sub $h" -- "$T" $sub $h
    contains out "^usage: tgdebug $sub" "$sub $h prints its usage"
  done
  expect 0 "$sub --version" -- "$T" $sub --version
  contains out "^tgdebug [0-9]" "$sub --version prints the version"
  contains out "^BLAS: " "$sub --version names the BLAS, as tgdebug --version does"
done
# --include and --exclude wherever a function is compiled with a preset,
# described in each --help.
for sub in nanguard compare run serve; do
  "$T" $sub --help | grep -q -- "--include TAG, --exclude TAG" && pass "$sub --help describes --include and --exclude" ||
    fail "$sub --help lacks --include and --exclude"
done
bad 2 "nanguard --include of an unknown tag" nanguard "$D/overflow.json" -i x='[1,2,3]' --include nosuchrewrite
grep -q "nosuchrewrite" "$tmp/err" && pass "the unknown tag is named" || fail "the tag is not named: $(cat "$tmp/err")"
bad 2 "compare --exclude of an unknown tag" compare "$D/cmp_exp.json" -i x='[1,2,3]' --exclude nosuchrewrite
bad 2 "nanguard --dump ''" nanguard "$D/overflow.json" -i x='[1,2,3]' --dump ''
contains err "^tgdebug: nanguard: --dump: expected a file name, got ''$" "an empty --dump is named"
# (written only at an offence, but a --dump that cannot be written is said
# before the run, clean or not)
# (folders it needs are made then)
: >"$tmp/afile"
bad 2 "nanguard --dump under a file" nanguard "$D/overflow.json" -i x='[1,2,3]' --dump "$tmp/afile/sub/x.npz"
contains err "^tgdebug: nanguard: --dump $tmp/afile/sub/x.npz: cannot create the folder $tmp/afile/sub: Not a directory$" \
  "a --dump that cannot be written is named before the run"
bad 2 "no subcommand"
bad 2 "an unknown subcommand" frobnicate
bad 2 "nanguard without FILE" nanguard
bad 2 "nanguard on a missing file" nanguard "$tmp/nope.json"
for sub in nanguard compare; do
  bad 2 "$sub -f given twice" $sub "$TG_SRC/examples/logreg.json" -f train -f predict
  grep -q -- "^tgdebug: $sub: -f given twice ('train' and 'predict')$" "$tmp/err" && pass "$sub names both" || fail "$sub -f twice: $(cat "$tmp/err")"
done
"$T" run "$TG_SRC/examples/logreg.json" -f train -f predict 2>"$tmp/err" >/dev/null
[ $? = 2 ] && [ "$(cat "$tmp/err")" = "tgdebug run: -f given twice ('train' and 'predict')" ] && pass "run -f given twice" || fail "run -f twice: $(cat "$tmp/err")"
bad 2 "nanguard on a file that is not a graph" nanguard "$TG_SRC/README.md"
bad 2 "nanguard with an unknown option" nanguard "$D/overflow.json" --frobnicate
bad 2 "nanguard --big x" nanguard "$D/overflow.json" -i x='[1,2,3]' --big x
bad 2 "nanguard --big 0" nanguard "$D/overflow.json" -i x='[1,2,3]' --big 0
contains err "^tgdebug: nanguard: --big: expected a threshold > 0 (inf turns the check off), got '0'$" "--big 0: the message"
bad 2 "nanguard --big -1" nanguard "$D/overflow.json" -i x='[1,2,3]' --big -1
contains err "^tgdebug: nanguard: --big: expected a threshold > 0 (inf turns the check off), got '-1'$" "--big -1: the same message"
bad 2 "nanguard with every check off" nanguard "$D/overflow.json" -i x='[1,2,3]' --no-nan --no-inf --big inf
bad 2 "nanguard --calls 0" nanguard "$D/overflow.json" -i x='[1,2,3]' --calls 0
bad 2 "nanguard --calls without its value" nanguard "$D/overflow.json" --calls
bad 2 "nanguard with a missing input" nanguard "$D/overflow.json"
bad 2 "nanguard with an input of the wrong shape" nanguard "$D/overflow.json" -i x='[1,2]'
bad 2 "nanguard with an unknown function" nanguard "$D/overflow.json" -f nope -i x='[1,2,3]'
bad 2 "nanguard -O fastest" nanguard "$D/overflow.json" -O fastest -i x='[1,2,3]'
bad 2 "testvalues without FILE" testvalues
bad 2 "testvalues on a missing file" testvalues "$tmp/nope.json"
bad 2 "testvalues on two files" testvalues "$D/tv_ok.json" "$D/tv_ok.json"
# A compiled function, known by its content (any name): said so, as
# compare says it, not the JSON parser's "boolean expected".
"$TGC" compile "$D/tv_ok.json" -o "$tmp/tv_ok.ckpt" >/dev/null
bad 2 "testvalues on a .tgf" testvalues "$tmp/tv_ok.ckpt"
contains err "^tgdebug: testvalues: $tmp/tv_ok.ckpt is a compiled function: testvalues needs the graph file (.json) with its test values$" "testvalues says it needs the graph file"
bad 2 "compare on a .tgf of another name" compare "$tmp/tv_ok.ckpt"
contains err "is a compiled function: compare needs the graph file (.json)" "compare knows a .tgf by its content too"
bad 2 "nanguard --exclude on a .tgf" nanguard "$tmp/tv_ok.ckpt" --exclude fusion
contains err "already optimized: -O, --include, --exclude and --device apply when compiling it" "nanguard refuses tags it would ignore"
bad 2 "compare without FILE" compare
bad 2 "compare on a file that is not a graph" compare "$TG_SRC/README.md"
bad 2 "compare --rtol -1" compare "$D/cmp_exp.json" -i x='[1,2,3]' --rtol -1
bad 2 "compare with a missing input" compare "$D/cmp_exp.json"

# ---- nanguard ----
# deep_log: d = tanh(W . (x/2 + 1))^2 - 2 < 0, so lg = log(d) makes NaN;
# o1, o2 and the sum after it only pass it on.
for O in none fast_run; do
  expect 1 "deep_log -O $O: NaN caught" -- "$T" nanguard "$D/deep_log.json" -O $O -i x='[1,2,3,4]'
  line "nanguard: NaN in call 1 of 'main'" "deep_log -O $O: NaN in call 1"
  contains out "model.py:107 in build: lg = T.log(d)" "deep_log -O $O: the trace of lg"
  contains err "^tgdebug: nanguard: call 1: node '" "deep_log -O $O: one line on stderr"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && pass "deep_log -O $O: one stderr line" || fail "deep_log -O $O: stderr has $(wc -l <"$tmp/err") lines"
  if [ $O = none ]; then
    line "node: lg" "deep_log -O none: the node is lg"
    line "op: log" "deep_log -O none: the op is log"
    contains out "^input 0 'd': float64 (4,) min=-1.18071 max=-1.00987" "deep_log -O none: lg's input, all negative"
  else
    line "op: composite" "deep_log -O fast_run: lg is fused"
    line "fused op: log (body variable t3 of the composite)" "deep_log -O fast_run: the fused op is log"
    line "original node: lg (log)" "deep_log -O fast_run: the original node is lg"
  fi
done
# With -O none the node is the 7th of 10: the six before it are clean.
expect 1 "deep_log: schedule position" -- "$T" nanguard "$D/deep_log.json" -O none -i x='[1,2,3,4]'
line "schedule: 7 of 10" "deep_log: lg is node 7 of 10"
# --no-nan: the only bad values are NaN, and nothing is huge: clean.
expect 0 "deep_log --no-nan: clean" -- "$T" nanguard "$D/deep_log.json" --no-nan -i x='[1,2,3,4]'
contains out "clean" "deep_log --no-nan: the summary says clean"
# --dump: lg's input d, as the node saw it, in an archive that tg and
# NumPy read: the values the report's statistics describe.
expect 1 "deep_log --dump" -- "$T" nanguard "$D/deep_log.json" -O none -i x='[1,2,3,4]' --dump "$tmp/dump/lg.npz"
line "dump: the inputs of node lg written to $tmp/dump/lg.npz: in0" "--dump: one line names the node and the arrays"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && pass "--dump: still one line on stderr" || fail "--dump: stderr has $(wc -l <"$tmp/err") lines"
# the archive gives the node's input back: feed it to a graph that takes its min
cat >"$tmp/min.json" <<'EOF2'
{"format": "tg-graph", "version": 1,
 "variables": [{"id": "in0", "type": {"dtype": "float64", "shape": [4]}}],
 "nodes": [{"op": "min", "inputs": ["in0"], "outputs": ["m"]}, {"op": "max", "inputs": ["in0"], "outputs": ["M"]}],
 "functions": {"main": {"inputs": ["in0"], "outputs": ["m", "M"]}}}
EOF2
expect 0 "the dump read back with -i FILE.npz" -- "$TGC" run "$tmp/min.json" -i "$tmp/dump/lg.npz"
contains out "^m: float64 ()" "the dumped input loads"
contains out "^-1.1807066" "its min is the report's (-1.18071)"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 -c "import numpy as np; d = np.load('$tmp/dump/lg.npz')['in0']; assert d.shape == (4,) and (d < 0).all() and abs(d.max() + 1.00987) < 1e-5, d" &&
    pass "NumPy reads the dump: all negative, max -1.00987" || fail "NumPy disagrees with the dump"
fi
expect 1 "--dump of a bad input" -- "$T" nanguard "$D/deep_log.json" -i x='[1, "nan", 3, 4]' --dump "$tmp/dump/x.npz"
contains err "^tgdebug: nanguard: --dump $tmp/dump/x.npz: the bad value is not a node's output: no inputs to write$" "--dump of an input: says there is no node"
[ ! -e "$tmp/dump/x.npz" ] && pass "--dump of an input writes nothing" || fail "x.npz written"
bad 2 "--dump twice" nanguard "$D/deep_log.json" -i x='[1,2,3,4]' --dump a.npz --dump b.npz
# A NaN fed in is the input's, not a node's.
expect 1 "deep_log with a NaN input" -- "$T" nanguard "$D/deep_log.json" -i x='[1, "nan", 3, 4]'
line "input: x (fed in: no node made it)" "a NaN input is reported as the input"
contains out "nan=1 " "the input has one NaN"

# overflow: s = x + 5, ex = exp(s): exp(805) overflows at ex; exp(35) =
# 1.6e15 > 1e10 also counts as big (default threshold).
for O in none fast_run; do
  expect 1 "overflow -O $O: Inf caught" -- "$T" nanguard "$D/overflow.json" -O $O -i x='[1,30,800]'
  line "nanguard: Inf in call 1 of 'main'" "overflow -O $O: Inf"
  contains out "model.py:122 in build: ex = T.exp(s)" "overflow -O $O: the trace of ex"
done
expect 1 "overflow -O none" -- "$T" nanguard "$D/overflow.json" -O none -i x='[1,30,800]'
line "node: ex" "overflow: the node is ex"
# --no-inf: exp(35) is still above 1e10.
expect 1 "overflow --no-inf: big at ex" -- "$T" nanguard "$D/overflow.json" -O none --no-inf -i x='[1,30,800]'
line "nanguard: big in call 1 of 'main'" "overflow --no-inf: big"
line "node: ex" "overflow --no-inf: at ex"
# --big 100: s = 104 is already above it, so s is the node.
expect 1 "overflow --big 100: big at s" -- "$T" nanguard "$D/overflow.json" -O none --big 100 -i x='[1,2,99]'
line "node: s" "--big 100: the node is s"
contains out "model.py:121 in build: s = x + 5" "--big 100: the trace of s"
expect 1 "overflow --big 100 fused" -- "$T" nanguard "$D/overflow.json" --big 100 -i x='[1,2,99]'
line "fused op: add (body variable t0 of the composite)" "--big 100 fused: the add"
line "original node: s (add)" "--big 100 fused: the original node s"
# Nothing above 1e10, no Inf: clean (exp(13) = 4.4e5).
expect 0 "overflow on small values: clean" -- "$T" nanguard "$D/overflow.json" -i x='[1,3,8]' --calls 3
contains out "3 calls" "clean over 3 calls"
expect 0 "overflow --big inf --no-inf: clean" -- "$T" nanguard "$D/overflow.json" -i x='[1,30,800]' --big inf --no-inf

# fused00: num = x - y, den = num * y, q = num / den: 0/0 where x == y.
expect 1 "fused00: NaN in the composite" -- "$T" nanguard "$D/fused00.json" -i x='[1,2,3]' -i y='[1,5,3]'
line "op: composite" "fused00: the node is a composite"
line "fused op: true_div (body variable t2 of the composite)" "fused00: the fused op is true_div"
line "original node: q (true_div)" "fused00: the original node is q"
contains out "model.py:143 in build: q = num / den" "fused00: q's trace"
contains out "nan=2 " "fused00: two NaNs (x == y at 0 and 2)"

# grad_sqrt: the NaN is made by a node of the grad's expansion (0 * inf in
# the derivative of sqrt at 0), keyed gx.8, which names no node of the
# file: nanguard says whose derivative it is, and gives r's trace.
expect 1 "grad_sqrt -O none: NaN in the gradient" -- "$T" nanguard "$D/grad_sqrt.json" -O none -i x='[0,1,4]'
line "op: true_div" "grad_sqrt -O none: the division"
line "from: grad gx, differentiating r (sqrt)" "grad_sqrt -O none: from grad gx, differentiating r"
contains out "model.py:251 in build: r = T.sqrt(x)" "grad_sqrt -O none: r's trace"
contains err "(true_div; from grad gx, differentiating r (sqrt)) made NaN" "grad_sqrt -O none: the one line says it too"
expect 1 "grad_sqrt fused: NaN in the composite" -- "$T" nanguard "$D/grad_sqrt.json" -i x='[0,1,4]'
line "fused op: true_div (body variable t3 of the composite)" "grad_sqrt fused: the fused op is true_div"
line "  from: grad gx, differentiating r (sqrt)" "grad_sqrt fused: its origin is from grad gx, differentiating r"
if [ "$(grep -c '^original node: ' "$tmp/out")" = 1 ]; then pass "grad_sqrt fused: one original node"; else fail "grad_sqrt fused: not one original node"; sed 's/^/  | /' "$tmp/out"; fi
# The same from a .tgf: the gradients' table and the composite's origin
# groups were saved with it (a file of format version 2 had neither, and
# named every node the composite fused).
if "$TGC" compile "$D/grad_sqrt.json" -o "$tmp/gs.tgf" >/dev/null 2>&1; then
  expect 1 "grad_sqrt.tgf: NaN in the composite" -- "$T" nanguard "$tmp/gs.tgf" -i x='[0,1,4]'
  line "  from: grad gx, differentiating r (sqrt)" "grad_sqrt.tgf: from grad gx, differentiating r"
  if [ "$(grep -c '^original node: ' "$tmp/out")" = 1 ]; then pass "grad_sqrt.tgf: one original node"; else fail "grad_sqrt.tgf: not one original node"; sed 's/^/  | /' "$tmp/out"; fi
  contains err "(composite: its true_div; from grad gx, differentiating r (sqrt)) made NaN" "grad_sqrt.tgf: the one line"
else
  fail "compile grad_sqrt.json to a .tgf"
fi

# The same from a compiled function (.tgf): the composite's origins were
# saved with it.
if "$TGC" compile "$D/fused00.json" -o "$tmp/f00.tgf" >/dev/null 2>&1; then
  expect 1 "fused00.tgf: NaN in the composite" -- "$T" nanguard "$tmp/f00.tgf" -i x='[1,2,3]' -i y='[1,5,3]'
  line "fused op: true_div (body variable t2 of the composite)" "fused00.tgf: the fused op is true_div"
  line "original node: q" "fused00.tgf: the original node is q"
else
  fail "tgc compile fused00.json"
fi

# Constants: a NaN that constant folding put in a constant (z = log(c),
# c = -1) is made by no node at run time. Returned, used as an update or
# read by a node, it is named with the file's node it was folded from and
# that node's trace; -O none finds that node itself. The file's own NaN
# constant returned as is is named too.
expect 1 "fold_out: a folded NaN output" -- "$T" nanguard "$D/fold_out.json" -i x='[1,2,3]'
line "nanguard: NaN in call 1 of 'main'" "fold_out: NaN in call 1"
line "constant: z:const (output z of the function)" "fold_out: the constant, as output z"
line "folded from: node z (log)" "fold_out: folded from z (log)"
line "  model.py:301 in build: z = T.log(c)" "fold_out: z's trace"
contains err "^tgdebug: nanguard: call 1: constant 'z:const' (folded from 'z'), output 'z', holds NaN (1 of 1 elements)$" "fold_out: the one line"
expect 1 "fold_out -O none: the log node" -- "$T" nanguard "$D/fold_out.json" -O none -i x='[1,2,3]'
line "node: z" "fold_out -O none: node z"
expect 1 "const_out: the file's NaN constant returned" -- "$T" nanguard "$D/const_out.json" -O none -i x='[1,2,3]'
line "constant: c (output c of the function)" "const_out: constant c, output c"
line "(a constant of the file: no node made it)" "const_out: no node made it"
expect 1 "fold_upd: a folded NaN update, at call 1" -- "$T" nanguard "$D/fold_upd.json" --calls 3
line "nanguard: NaN in call 1 of 'main'" "fold_upd: call 1, not the shared value at call 2"
line "constant: z:const (the new value of shared w)" "fold_upd: the update of w"
line "folded from: node z (log)" "fold_upd: folded from z"
line "  model.py:311 in build: z = T.log(c)" "fold_upd: z's trace"
expect 1 "fold_read: a folded NaN constant read by the dot" -- "$T" nanguard "$D/fold_read.json" -i x='[1,2,3]'
line "constant: z:const (read by node y, dot)" "fold_read: read by y"
line "folded from: node z (log)" "fold_read: folded from z"
line "  model.py:321 in build: z = T.log(c)" "fold_read: z's trace, not the dot's"
if grep -q "T.dot" "$tmp/out"; then fail "fold_read: the dot's trace printed"; sed 's/^/  | /' "$tmp/out"; else pass "fold_read: not the dot's trace"; fi
# constbig: q = x / c, c = [1e11, 0]: 0/0 is q's NaN; c's 1e11 is big,
# which explains no NaN (1/0: no infinity either).
for O in none fast_run; do
  expect 1 "constbig -O $O: q's NaN, not c's big" -- "$T" nanguard "$D/constbig.json" -O $O -i x='[1,0]'
  line "nanguard: NaN in call 1 of 'main'" "constbig -O $O: the headline is NaN"
  if grep -q "^constant: " "$tmp/out"; then fail "constbig -O $O: blames the constant"; sed 's/^/  | /' "$tmp/out"; else pass "constbig -O $O: no constant blamed"; fi
  contains out "model.py:341 in build: q = x / c" "constbig -O $O: q's trace"
done
# fast_run fuses q and o = q + 1: the body re-run names the true_div,
# though its operand c is big (the same-kind rule of the nodes).
expect 1 "constbig: the fused true_div made the NaN" -- "$T" nanguard "$D/constbig.json" -i x='[1,0]'
line "node: o" "constbig fast_run: the composite"
line "fused op: true_div (body variable t0 of the composite)" "constbig fast_run: its true_div"
line "fused op made: NaN in 1 of 2 elements (nan=1 inf=0 big=0)" "constbig fast_run: which made NaN"
line "original node: q (true_div)" "constbig fast_run: q as written"
contains err "(composite: its true_div) made NaN in output 'o' (1 of 2 elements)$" "constbig fast_run: the one line names the true_div"
expect 1 "constbig: 1/0 is q's infinity" -- "$T" nanguard "$D/constbig.json" -O none -i x='[1,2]'
line "nanguard: Inf in call 1 of 'main'" "constbig: Inf"
line "node: q" "constbig: at q"
# fuse_inf (float32): exp(100) overflows; the mul by 0 makes the NaN.
expect 1 "fuse_inf: the fused exp made an infinity" -- "$T" nanguard "$D/fuse_inf.json" -i x='[1,100,2]'
line "nanguard: NaN in call 1 of 'main'" "fuse_inf: the output holds NaN"
line "fused op: exp (body variable t0 of the composite)" "fuse_inf: the exp"
line "fused op made: Inf in 1 of 3 elements (nan=0 inf=1 big=0)" "fuse_inf: which made Inf"
contains err "(composite: its exp) made an infinity (1 of 3 elements), and the output 'o' holds NaN (1 of 3 elements)$" "fuse_inf: the one line says infinity"
# --big on float32: 16777219 is no float32; 2 * 8388610 = 16777220 is
# above it (a threshold rounded to the nearest float was 16777220).
expect 1 "dbl32 --big 16777219: 16777220 is above it" -- "$T" nanguard "$D/dbl32.json" -i x='[1,8388610]' --big 16777219
line "nanguard: big in call 1 of 'main'" "dbl32: big"
contains out "^output 0 'y': nan=0 inf=0 big=1 (|x| > 16777219) of 2;" "dbl32: the threshold as given"
expect 0 "dbl32 --big 16777219: 16777218 is not" -- "$T" nanguard "$D/dbl32.json" -i x='[1,8388609]' --big 16777219
line "nanguard: 1 call of 'main', 1 nodes checked: clean (no NaN, no Inf, no |value| > 16777219)" "dbl32: clean, the threshold as given"
expect 1 "--big inf: no threshold printed" -- "$T" nanguard "$D/overflow.json" -O none --big inf -i x='[1,30,800]'
contains out "^output 0 'ex': nan=0 inf=1 big=0 (off) of 3;" "--big inf: big (off)"
# The mean of finite values whose sum overflows (input x is big).
expect 1 "an input of [1e308, 8e307, 1e308]" -- "$T" nanguard "$D/fold_out.json" -O none -i x='[1e308,8e307,1e308]'
line "value: nan=0 inf=0 big=3 of 3; finite min=8e+307 max=1e+308 mean=9.33333e+307" "the mean does not overflow"
# A fused culprit from a .tgf: the file's graph is not there, the
# composite's trace is.
if "$TGC" compile "$D/tgf_log.json" -o "$tmp/tl.tgf" >/dev/null 2>&1; then
  expect 1 "tgf_log.tgf: NaN in the composite" -- "$T" nanguard "$tmp/tl.tgf" -i x='[1,0,0]' -i W='[[1,0,0],[0.5,0,0],[3,0,0]]'
  line "fused op: log (body variable t1 of the composite)" "tgf_log.tgf: the log"
  line "original node: lg" "tgf_log.tgf: the original node lg"
  line "trace of the composite y (the .tgf keeps no trace of each node it fused):" "tgf_log.tgf: the composite's trace"
  line "  model.py:374 in build: y = lg * 2" "tgf_log.tgf: its source line"
else
  fail "tgc compile tgf_log.json"
fi

# scan_log: the loop's third step takes log(-0.5). The scan is named,
# with the step, and the body's node that made the NaN (the scan run
# again with its body guarded), with its trace.
for O in none fast_run; do
  expect 1 "scan_log -O $O: NaN in the loop" -- "$T" nanguard "$D/scan_log.json" -O $O -i h0=2.5 -i n=4
  line "op: scan" "scan_log -O $O: the scan"
  line "step: 3 (the step of the loop at which its body made it)" "scan_log -O $O: step 3"
  # h1 and lh are both the body's outputs: one composite makes both
  line "body node: lh (composite), schedule 1 of 1 of the body" "scan_log -O $O: the body's composite"
  line "body node as written: lh (log)" "scan_log -O $O: the body's log"
  line "  model.py:382 in build: lh = T.log(h1)" "scan_log -O $O: the body node's trace"
  contains err "(scan: its log 'lh') made NaN in output '[^']*' (2 of 4 elements), first at step 3 of the loop$" "scan_log -O $O: the one line names the body node and the step"
  # fast_run rebuilds the loop (H:scan, outputs H:scan and H:scan.1):
  # named as written, in the path and on the one line
  line "  H (scan) of 'main', output 'LH' (NaN in 2 of 4), at step 3 of its loop" "scan_log -O $O: the path names H and LH"
  line "trace of scan H:" "scan_log -O $O: the scan's trace, by its name as written"
  contains err "^tgdebug: nanguard: call 1: node 'H' (scan: its log 'lh') made NaN in output 'LH' (2 of 4 elements), first at step 3 of the loop$" "scan_log -O $O: the one line names H and LH"
done
# scan_last: h_t = exp(h_{t-1}), only H[-1] read: fast_run keeps the last
# row only (scan_keep_last, node H:scan), still H as written. From h0 = 1
# (NumPy): e, 15.15, 3.8e6, then inf at step 4.
expect 1 "scan_last: exp overflows in a loop fast_run rebuilt" -- "$T" nanguard "$D/scan_last.json" -i n=5 -i h0=1
line "node: H:scan" "scan_last: the node of the optimized function"
line "  H (scan) of 'main', output 'H:scan' (Inf in 1 of 1), at step 4 of its loop" "scan_last: the path names H"
line "trace of scan H:" "scan_last: the scan's trace, by its name as written"
line "  model.py:552 in build: H = theano.scan(T.exp, n_steps=n, outputs_info=[h0])" "scan_last: the scan's line"
contains err "^tgdebug: nanguard: call 1: node 'H' (scan: its exp 'h1') made an infinity in output 'H:scan' (1 of 1 elements), first at step 4 of the loop$" "scan_last: the one line names H"
# scan_scan: an epoch loop E whose body runs an RNN R over xs; the RNN's
# log takes log(-0.25) at step 2 of R in step 2 of E. The whole way down
# is named, each loop with its step, and each level's trace.
for O in none fast_run; do
  expect 1 "scan_scan -O $O: NaN in the inner loop" -- "$T" nanguard "$D/scan_scan.json" -O $O -i xs='[1,-1.5,5]' -i w0=2.25 -i n=3
  line "step: 2 (the step of the loop at which its body made it)" "scan_scan -O $O: step 2 of E"
  line "path (outermost first; each a node of the body of the one above):" "scan_scan -O $O: the path"
  line "  E (scan) of 'main', output 'LE' (NaN in 2 of 9), at step 2 of its loop" "scan_scan -O $O: E at step 2"
  line "    R (scan), schedule 2 of 2, output 'LR' (NaN in 1 of 3), at step 2 of its loop" "scan_scan -O $O: R at step 2"
  line "      l (composite), schedule 1 of 1, output 'l' (NaN in 1 of 1): its fused log, as written l" "scan_scan -O $O: R's log"
  line "body node: l (composite), schedule 1 of 1 of the body" "scan_scan -O $O: the body node is the inner composite"
  line "body node as written: l (log)" "scan_scan -O $O: the body node is the inner log"
  line "  model.py:502 in build: l = T.log(h1)" "scan_scan -O $O: the inner log's trace"
  line "trace of scan R (in the body of E):" "scan_scan -O $O: R's trace follows"
  line "  model.py:503 in build: R, LR = theano.scan(rnn_step, sequences=x, outputs_info=[w1, None])" "scan_scan -O $O: R's line"
  line "  model.py:505 in build: E, LE = theano.scan(epoch, n_steps=n, outputs_info=[w0, None], non_sequences=xs)" "scan_scan -O $O: E's line"
  contains err "(scan: its scan 'LR', at step 2 of its loop its log 'l') made NaN in output '[^']*' (2 of 9 elements), first at step 2 of the loop$" "scan_scan -O $O: the one line names the way down"
done
# ofg_scan: the epoch loop's body calls dist(a, b) = 3 * sqrt(a + b), an
# op_from_graph, whose sqrt takes sqrt(-0.25) in step 2 of E (fused with
# the add and mul in dist's optimized body: named as written).
expect 1 "ofg_scan: NaN in an op_from_graph in the loop" -- "$T" nanguard "$D/ofg_scan.json" -i xs='[2,0.5,3]' -i w0=1.25 -i n=3
line "  E (scan) of 'main', output 'LE' (NaN in 2 of 9), at step 2 of its loop" "ofg_scan: E at step 2"
line "    z (op_from_graph), schedule 2 of 2, output 'z' (NaN in 1 of 3)" "ofg_scan: dist's call z"
contains out "^      .* (composite), schedule 1 of 1, output '.*' (NaN in 1 of 3): its fused sqrt, as written sq$" "ofg_scan: the fused sqrt"
line "body node as written: sq (sqrt)" "ofg_scan: sq as written"
line "  model.py:522 in build: sq = T.sqrt(d)" "ofg_scan: sq's trace"
line "trace of op_from_graph z (in the body of E):" "ofg_scan: z's trace follows"
line "  model.py:524 in build: z = dist(xo, w1)" "ofg_scan: z's line"
contains err "(scan: its op_from_graph 'z', in its body its sqrt 'sq') made NaN in output '[^']*' (2 of 9 elements), first at step 2 of the loop$" "ofg_scan: the one line"
expect 1 "ofg_scan -O none" -- "$T" nanguard "$D/ofg_scan.json" -O none -i xs='[2,0.5,3]' -i w0=1.25 -i n=3
line "body node as written: sq (sqrt)" "ofg_scan -O none: sq as written"
bad 2 "run --break on a node of a scan's body" run "$D/scan_log.json" -i h0=2.5 -i n=4 --break lh
contains err "^tgdebug: --break lh: that node is inside the body of scan 'H'; breakpoints apply to the nodes of function 'main'" "--break lh: inside the body of scan H"

# The MLP trains clean.
"$TG_BUILD_DIR/tools/tg-example-mlp-data" "$tmp" 100 >/dev/null
expect 0 "nanguard on the MLP's train, 3 calls" -- "$T" nanguard "$TG_SRC/examples/mlp.json" -f train \
  -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 3

# ---- testvalues ----
expect 0 "testvalues on good test values" -- "$T" testvalues "$D/tv_ok.json"
line "nodes[1] (dot -> h): float64 (2,) min=44 max=56 mean=50 nan=0 inf=0" "testvalues: h = (2,4,6).W by hand"
expect 1 "testvalues: a shape mismatch" -- "$T" testvalues "$D/tv_bad.json"
line "testvalues: FAILED at nodes[1] (dot -> h)" "testvalues: stops at h"
contains out "^input 0 'x2': float64 (3,)" "testvalues: x2's shape"
contains out "^input 1 'W': float64 (4, 2)" "testvalues: W's shape"
contains out "model.py:162 in build: h = T.dot(x2, W)" "testvalues: h's trace"
contains err "nodes\[1\] (dot -> h)" "testvalues: the stderr line names the node"
expect 1 "testvalues: a node's output against its test_value" -- "$T" testvalues "$D/tv_outshape.json"
line "testvalues: FAILED at nodes[1] (dot -> h)" "testvalues: h's test_value shape"
line "error: output 'h' is float64 (2,), but its test_value is float64 (3,)" "testvalues: both shapes named"
bad 2 "testvalues: an input without a test_value" testvalues "$D/tv_missing.json"
contains err "'x' (variables\[0\])" "testvalues: names the input"

# ---- compare ----
mkdir -p "$tmp/lr"
"$TG_BUILD_DIR/tools/tg-example-logreg-data" "$tmp/lr" 50 >/dev/null
expect 0 "compare: logreg train" -- "$T" compare "$TG_SRC/examples/logreg.json" -f train -i x="$tmp/lr/x.npy" -i y="$tmp/lr/y.npy"
contains out "agrees" "compare: logreg agrees"
expect 0 "compare: mlp train" -- "$T" compare "$TG_SRC/examples/mlp.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy"
contains out "^output cost .* pass$" "compare: mlp cost passes"
contains out "^update W1 .* pass$" "compare: mlp update W1 passes"
expect 0 "compare: convnet train" -- "$T" compare "$TG_SRC/examples/convnet.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy"
expect 0 "compare: cmp_exp with the real optimizer" -- "$T" compare "$D/cmp_exp.json" -i x='[1,2,3]'
# Random numbers: each compile has its own copy of the generator's state,
# equal at the start, so the samples agree exactly.
expect 0 "compare: random_uniform agrees" -- "$T" compare "$D/cmp_random.json"
contains out "^output u  *max abs diff 0 .* pass$" "compare: the samples are identical"
contains out "^update rng .* pass$" "compare: the generator states agree"
# A stabilization is counted, not failed: the gradient of switch(x > 0,
# log x, 0) is NaN at 0 as written and 0 after switch_sink.
expect 0 "compare: a stabilized gradient agrees" -- "$T" compare "$D/cmp_stable.json" -i x='[0,1,2]'
contains out "^output g .* pass (1 stabilized: finite where the unoptimized value is inf or NaN)$" "compare: the stabilized value is counted on its output"
line "stabilized: 1 value in 1 node output finite where the unoptimized function gives inf or NaN; the first in node g.11:switch (composite), from rewrite switch_sink (pass stabilize)" "compare names the stabilizing rewrite"
expect 0 "compare: cmp_infsign with the real optimizer" -- "$T" compare "$D/cmp_infsign.json" -i x='[0,1]'
# cmp_cancel: mul_div_cancel makes x * y / y into x; as written (NumPy)
# exp(x * y / y + 1) at x = [1, 2, inf], y = [1, 0, 0] is [e^2, NaN,
# NaN], optimized [e^2, e^3, inf]. The node that differs is the file's own
# (r, or the composite of r and o): the rewrite replaced what it reads.
expect 1 "compare: a rewrite upstream of the node that differs" -- "$T" compare "$D/cmp_cancel.json" -i x='[1,2,"inf"]' -i y='[1,0,0]'
contains out "^output o .* FAIL (1 stabilized: finite where the unoptimized value is inf or NaN)$" "cmp_cancel: inf against NaN fails, e^3 against NaN is stabilized"
line "bad rewrite: mul_div_cancel" "cmp_cancel: names mul_div_cancel"
line "upstream: it rewrote what node o is computed from, not the node itself" "cmp_cancel: upstream of o"
line "  removed: q (true_div)" "cmp_cancel: the node it removed"
line "stabilized: 1 value in 1 node output finite where the unoptimized function gives inf or NaN; the first in node o (composite), from no stabilize rewrite (none made it or anything upstream of it)" "cmp_cancel: no stabilize rewrite named"
contains err "made by rewrite 'mul_div_cancel' (pass canonicalize), upstream of it$" "cmp_cancel: the stderr line"
expect 1 "compare --exclude fusion: the file's own node r differs" -- "$T" compare "$D/cmp_cancel.json" -i x='[1,2,"inf"]' -i y='[1,0,0]' --exclude fusion
line "first differing node: r" "cmp_cancel --exclude fusion: r"
line "bad rewrite: mul_div_cancel" "cmp_cancel --exclude fusion: names mul_div_cancel"
expect 0 "compare --exclude mul_div_cancel: it agrees" -- "$T" compare "$D/cmp_cancel.json" -i x='[1,2,"inf"]' -i y='[1,0,0]' --exclude mul_div_cancel
T="$TGDEBUG_TESTRW"
expect 1 "compare catches the broken rewrite" -- "$T" compare "$D/cmp_exp.json" -i x='[1,2,3]'
line "bad rewrite: test_broken_exp" "compare names the rewrite"
line "pass: canonicalize" "compare names its pass"
line "  removed: e (exp)" "compare names the node it removed"
contains out "model.py:182 in build: e = T.exp(a)" "compare prints e's trace"
contains out "^output 0 'e:expm1' against the unoptimized 'e': max abs diff 1," "expm1 - exp = -1 everywhere"
contains out "^output s .* FAIL$" "the output fails"
contains err "made by rewrite 'test_broken_exp'" "the stderr line names the rewrite"
# +inf as written, -inf optimized: another infinity is a mismatch.
expect 1 "compare: an infinity of the other sign fails" -- "$T" compare "$D/cmp_infsign.json" -i x='[0,1]'
contains out "^output y .* FAIL$" "compare: -inf against +inf fails the output"
line "bad rewrite: test_broken_exp" "compare: names the rewrite behind the sign"
# The exp the gradient of log_softmax makes (the softmax s) broken into
# s - 1: the gradient y - s sum(y) is off by sum(y) = 3 everywhere, in a
# node standing for keys of the grad's expansion, which compare explains.
expect 1 "compare: a broken node of a gradient" -- "$T" compare "$D/cmp_grad.json" -i x='[1,2,3,4]' -i y='[1,0,0,2]'
contains out "^output 0 'gx\.[0-9]*' against the unoptimized 'gx\.[0-9]*': max abs diff 3," "compare: off by sum(y) = 3"
contains out "^  gx\.[0-9]*: grad gx, differentiating ls (log_softmax)$" "compare says whose derivative the node it stands for is"
line "bad rewrite: test_broken_exp" "compare: names the rewrite inside the gradient"
# --exclude reaches the optimized side: without the broken rewrite the
# function agrees.
expect 0 "compare --exclude test_broken_exp" -- "$T" compare "$D/cmp_exp.json" -i x='[1,2,3]' --exclude test_broken_exp
contains out "agrees with the unoptimized one" "compare --exclude: it agrees"
expect 0 "the broken rewrite excluded from the examples' own check" -- "$T" compare "$TG_SRC/examples/mlp.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy"

# ---- The command-line contract (DESIGN.md, "Tools") ----
. "$(dirname "$0")/lib/cli.bash"
C="$TG_TEST_DATA/prof/costly.json"
V='v=[1,2,3,4,5,6,7,8]'
# The unknown option is the one given, not the word after it.
one_line 2 "^tgdebug run: unknown option '--port' \(see tgdebug run --help\)$" "run --port 5" -- "$TGDEBUG" run "$C" -i "$V" --port 5
one_line 2 "^tgdebug run: unknown option '-c' \(see tgdebug run --help\)$" "run -calls 5" -- "$TGDEBUG" run "$C" -i "$V" -calls 5
one_line 2 "^tgdebug serve: unknown option '-c' \(see tgdebug serve --help\)$" "serve -calls 5" -- timeout 30 "$TGDEBUG" serve "$C" -i "$V" -calls 5
one_line 2 "^tgdebug: nanguard: unknown option '-c' \(see tgdebug nanguard --help\)$" "nanguard -calls 5" -- "$TGDEBUG" nanguard "$C" -i "$V" -calls 5
one_line 2 "^tgdebug: compare: unknown option '-c' \(see tgdebug compare --help\)$" "compare -calls 5" -- "$TGDEBUG" compare "$C" -i "$V" -calls 5
one_line 2 "^tgdebug: testvalues: unknown option '-x' \(see tgdebug testvalues --help\)$" "testvalues -x" -- "$TGDEBUG" testvalues "$C" -x
# Single-value options given twice are refused.
one_line 2 "^tgdebug run: -O given twice \('none' and 'fast_run'\)$" "run -O twice" -- "$TGDEBUG" run "$C" -i "$V" -O none -O fast_run
one_line 2 "^tgdebug run: --calls given twice" "run --calls twice" -- "$TGDEBUG" run "$C" -i "$V" --calls 1 --calls 2
one_line 2 "^tgdebug serve: --port given twice" "serve --port twice" -- timeout 30 "$TGDEBUG" serve "$C" -i "$V" --port 1 --port 2
one_line 2 "^tgdebug serve: --bind given twice" "serve --bind twice" -- timeout 30 "$TGDEBUG" serve "$C" -i "$V" --bind 127.0.0.1 --bind ::1
one_line 2 "^tgdebug: nanguard: --calls given twice" "nanguard --calls twice" -- "$TGDEBUG" nanguard "$C" -i "$V" --calls 1 --calls 2
one_line 2 "^tgdebug: nanguard: --big given twice" "nanguard --big twice" -- "$TGDEBUG" nanguard "$C" -i "$V" --big 1 --big 2
one_line 2 "^tgdebug: nanguard: --device given twice" "nanguard --device twice" -- "$TGDEBUG" nanguard "$C" -i "$V" --device cpu --device cpu
one_line 2 "^tgdebug: compare: --rtol given twice" "compare --rtol twice" -- "$TGDEBUG" compare "$C" -i "$V" --rtol 1 --rtol 2
one_line 2 "^tgdebug: compare: --atol given twice" "compare --atol twice" -- "$TGDEBUG" compare "$C" -i "$V" --atol 1 --atol 2
# --dump must not replace the graph or an -i file, nor be a file named '-'.
cp "$D/overflow.json" "$tmp/ov.json"; keep "$tmp/ov.json"
one_line 2 "^tgdebug: nanguard: --dump .*/ov.json is the graph file guarded: the dump would replace it$" \
  "nanguard --dump FILE" -- "$TGDEBUG" nanguard "$tmp/ov.json" -i x='[1,2,1000]' --dump "$tmp/ov.json"
unchanged "$tmp/ov.json" "nanguard --dump FILE leaves the graph"
mkdir -p "$tmp/dash"
(cd "$tmp/dash" && one_line 2 "^tgdebug: nanguard: --dump -: .*cannot go to standard output" \
  "nanguard --dump -" -- "$TGDEBUG" nanguard "$tmp/ov.json" -i x='[1,2,1000]' --dump -)
absent "$tmp/dash/-" "nanguard --dump - wrote no file '-'"

echo "$fails failed"
[ "$fails" -eq 0 ]
