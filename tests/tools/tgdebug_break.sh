#!/usr/bin/env bash
# tgdebug run --break: the hits of each --when form on tests/data/debug/bp.json,
# counted against values worked out by hand; the breakpoint op's hits with
# its monitored values' statistics; keys the optimizer removed map to the
# node standing for them; an unknown node names the nearest keys; --when
# parse errors point at the column; a failed assert is exit 1.
#
# The fixture, with x = [[1, -2, 3], [-4, 5, -6]] and the shared k = 1,
# multiplied by 10 after each call:
#   sq = x*x = [[1, 4, 9], [16, 25, 36]]  (min 1, max 36, mean 91/6 = 15.1667)
#   sc = x*k: max |sc| = 6k, min -6k, mean -0.5k (call c: k = 10^(c-1))
#   lg = log(sq - 10): three NaNs (1-10, 4-10, 9-10 < 0)
#   inv = 1/(x - 3): one inf (x = 3)
#   the breakpoint op 'watch' (bsq) fires when sum(sq) = 91 > 90, with m1 = sq, m2 = sc.
set -uo pipefail
: "${TGDEBUG:?}" "${TG_SRC:?}"
source "$TG_SRC/tests/tools/lib/checks.bash"
bp="$TG_SRC/tests/data/debug/bp.json"
X='[[1,-2,3],[-4,5,-6]]'

# hits N DESCRIPTION -- tgdebug run args: exit 0 and N hit lines.
hits() {
  local want=$1 what=$2
  shift 3
  "$TGDEBUG" run "$bp" -i x="$X" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? got
  got=$(grep -c '^tgdebug: hit ' "$tmp/err")
  if [ "$rc" -eq 0 ] && [ "$got" -eq "$want" ]; then pass "$what: $got hits"; else
    fail "$what: exit $rc, $got hits, want $want"; sed 's/^/  | /' "$tmp/err"; fi
}
# calls_hit "1 3 4": the calls of the hits logged, in order.
calls_hit() {
  local got
  got=$(grep '^tgdebug: hit ' "$tmp/err" | sed 's/.*: call \([0-9]*\),.*/\1/' | tr '\n' ' ' | sed 's/ $//')
  if [ "$got" = "$1" ]; then pass "$2: calls $got"; else fail "$2: calls '$got', want '$1'"; fi
}
# One line on stderr starting "tgdebug", exit 2, matching PATTERN.
bad() {
  local pat=$1 what=$2
  shift 3
  "$TGDEBUG" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$pat" "$tmp/err"; then pass "$what: $(cat "$tmp/err")"; else
    fail "$what: exit $rc, $lines lines, want 2, 1 line matching '$pat'"; sed 's/^/  | /' "$tmp/err"; fi
}

expect 0 "--help" -- "$TGDEBUG" --help
contains out "serve" "tgdebug --help lists serve"
expect 0 "run --help" -- "$TGDEBUG" run --help
contains out "--when EXPR" "run --help describes --when"
expect 0 "--version" -- "$TGDEBUG" --version
contains out "^tgdebug [0-9]" "--version prints the version"
bad "unknown subcommand" "an unknown subcommand" -- bogus
bad "unknown option" "an unknown option" -- run "$bp" --bogus

# ---- the breakpoint op: one hit a call, before the node, m1 and m2 ----
hits 2 "the breakpoint op fires when sum(sq) > 90" -- --calls 2
contains err "before node bsq (breakpoint): breakpoint op: condition 'cond' is true" "the op's hit names the node and its condition"
contains err "m1 'sq:sqr' float64 (2, 3) min=1 max=36 mean=15.1667 nan=0 inf=0" "m1 = sq: min 1, max 36, mean 91/6"
contains err "m2 'sc' float64 (2, 3) min=-60 max=50 mean=-5 nan=0 inf=0" "m2 = sc at call 2 (k = 10): min -60, max 50, mean -5"
if grep -q "^breakpoint bsq hit" "$tmp/err"; then fail "under tgdebug the op does not log its own line too"; else
  pass "under tgdebug the op does not log its own line too"; fi
"$TGDEBUG" run "$bp" -i x='[[1,1,1],[1,1,1]]' >"$tmp/out" 2>"$tmp/err"
check_none=$(grep -c '^tgdebug: hit ' "$tmp/err")
if [ "$check_none" -eq 0 ] && grep -q "0 hits in 1 call" "$tmp/err"; then pass "sum(sq) = 6: the op's condition is false, no hit"; else
  fail "sum(sq) = 6: $check_none hits"; fi

# ---- --break by name, by key, through the optimizer ----
"$TGC" compile "$bp" -o "$tmp/bp.tgf" >/dev/null 2>&1
hits 4 "--break square (a name): every call" -- --calls 2 --break square
contains err "sq was rewritten into sq:sqr (sqr)" "the name's node 'sq' was rewritten into sqr: said so"
contains err "x0 'sq:sqr' float64 (2, 3) min=1 max=36 mean=15.1667" "x of square: min 1, max 36, mean 15.1667"
hits 2 "--break sq (the key of the file)" -- --break sq
hits 2 "--break d10 (fused away)" -- --break d10
contains err "d10 was fused into composite lg: x is the composite's output" "a fused key maps to its composite"
contains err "x0 'lg' float64 (2, 3) .* nan=3 inf=0" "x of the composite: three NaNs"
# --exclude fusion: d10 is no longer fused, so it is its own node
expect 0 "--exclude fusion --break d10" -- "$TGDEBUG" run "$bp" -i x="$X" --exclude fusion --break d10
if grep -q "fused into composite" "$tmp/err"; then fail "--exclude fusion: d10 still fused"; else pass "--exclude fusion: d10 is not fused"; fi
bad "already optimized: -O, --include and --exclude apply" "--include on a .tgf" -- run "$tmp/bp.tgf" --include fusion
bad "nearest: 'sq', 'bsq', 'sc'" "an unknown node names the nearest keys" -- run "$bp" -i x="$X" --break sqq
bad "--when 'x1>0'" "--when before any --break" -- run "$bp" -i x="$X" --when 'x1>0'

# ---- each --when form, by hand ----
# max(abs(x)) > 1e3 on sc: 6, 60, 600, 6000: call 4 only.
hits 5 "max(abs(x))>1e3 on scaled over 4 calls" -- --calls 4 --break scaled --when 'max(abs(x))>1e3'
grep -v "before node bsq" "$tmp/err" >"$tmp/err2"; mv "$tmp/err2" "$tmp/err"
calls_hit "4" "max(abs(x))>1e3 fires only once |sc| reaches 6000"
contains err "x0 'sc' float64 (2, 3) min=-6000 max=5000 mean=-500" "sc at call 4: min -6000, max 5000, mean -500"
hits 2 "any(isnan(x)) on lg (three NaNs)" -- --break lg --when 'any(isnan(x))' --calls 1 --break sq --when 'any(isnan(x))'
contains err "after node lg (composite): --break lg --when 'any(isnan(x))'" "the NaN hit is at lg, none at sq"
hits 2 "any(isinf(x)) on inv (1/0), not on lg" -- --break inv --when 'any(isinf(x))' --break lg --when 'any(isinf(x))'
contains err "after node inv (composite)" "the inf hit is at inv"
hits 2 "min(x)<0 on scaled (-6), not on sq (min 1)" -- --break sc --when 'min(x)<0' --break sq --when 'min(x)<0'
hits 2 "mean(x)>15 on sq (15.1667)" -- --break sq --when 'mean(x)>15'
hits 1 "mean(x)>15.2 on sq: no hit" -- --break sq --when 'mean(x)>15.2'
hits 6 "call>=3 over 4 calls" -- --calls 4 --break sq --when 'call>=3'
grep -v "before node bsq" "$tmp/err" >"$tmp/err2"; mv "$tmp/err2" "$tmp/err"
calls_hit "3 4" "call>=3: calls 3 and 4"
hits 7 "and: call>=2 and max(abs(x))>50" -- --calls 4 --break sc --when 'call>=2 and max(abs(x))>50'
grep -v "before node bsq" "$tmp/err" >"$tmp/err2"; mv "$tmp/err2" "$tmp/err"
calls_hit "2 3 4" "and: |sc| = 60, 600, 6000 from call 2"
hits 7 "or: call==1 or min(x)<-500" -- --calls 4 --break sc --when 'call==1 or min(x)<-500'
grep -v "before node bsq" "$tmp/err" >"$tmp/err2"; mv "$tmp/err2" "$tmp/err"
calls_hit "1 3 4" "or: call 1, then min sc = -600, -6000"
hits 6 "an input: max(in1)>=100 (k = 100, 1000)" -- --calls 4 --break sc --when 'max(in1)>=100'
grep -v "before node bsq" "$tmp/err" >"$tmp/err2"; mv "$tmp/err2" "$tmp/err"
calls_hit "3 4" "in1 is k: 100 at call 3"
hits 5 "not and parentheses: not (call<4)" -- --calls 4 --break sc --when 'not (call<4)'
hits 4 "sum(x)==-30 on sc at call 2 (-3k)" -- --calls 3 --break sc --when 'sum(x)==-30'
grep -v "before node bsq" "$tmp/err" >"$tmp/err2"; mv "$tmp/err2" "$tmp/err"
calls_hit "2" "sum(sc) = -3k = -30 at call 2"

# ---- --when parse errors: one line, the column ----
bad "column 13: expected a number" "a missing number" -- run "$bp" -i x="$X" --break sq --when 'max(abs(x))>'
bad "column 1: unknown name 'foo'" "an unknown function" -- run "$bp" -i x="$X" --break sq --when 'foo(x)>1'
bad "column 5: 'y' is not a value" "an unknown variable" -- run "$bp" -i x="$X" --break sq --when 'max(y)>1'
bad "column 7: expected a comparison" "a missing comparison" -- run "$bp" -i x="$X" --break sq --when 'max(x)'
bad "column 10: unexpected 'andd'" "a misspelt and" -- run "$bp" -i x="$X" --break sq --when 'max(x)>1 andd call>1'
bad "column 8: expected ')' before the end" "an unclosed parenthesis" -- run "$bp" -i x="$X" --break sq --when '(call>1'
bad "column 5: expected isnan" "any of something else" -- run "$bp" -i x="$X" --break sq --when 'any(x)'
# Nesting past 256 levels (parentheses or 'not') is refused with its
# column, not a crash of the recursive parser; the line shows the
# expression's start only.
deep="$(printf '(%.0s' $(seq 20000))call>1$(printf ')%.0s' $(seq 20000))"
bad "^tgdebug: --when '((((*\.\.\.': column 257: nested deeper than 256 levels of parentheses and 'not'$" \
  "20,000 parentheses" -- run "$bp" -i x="$X" --break sq --when "$deep"
nots="$(printf 'not %.0s' $(seq 30000))call>1"
bad "column 1025: nested deeper than 256 levels" "30,000 nots" -- run "$bp" -i x="$X" --break sq --when "$nots"
bad "column 257: nested deeper than 256 levels" "serve too" -- serve "$bp" -i x="$X" --break sq --when "$deep"
# 256 levels still parse and run; a chain of 5,000 'and's is no nesting.
ok256="$(printf '(%.0s' $(seq 256))call>=1$(printf ')%.0s' $(seq 256))"
hits 2 "256 parentheses" -- --break sq --when "$ok256"
chain="call>=1$(printf ' and call>=1%.0s' $(seq 5000))"
hits 2 "5,000 terms joined with and" -- --break sq --when "$chain"
bad "node sq:sqr (sqr) has 1 output and 1 input, no x2" "x2 of a one-output node" -- run "$bp" -i x="$X" --break sq --when 'max(x2)>0'

# ---- a run-time failure is exit 1 ----
expect 1 "a failed assert (-f fails)" -- "$TGDEBUG" run "$bp" -f fails -i x="$X"
contains err "assertion failed: m must be negative" "the failed assert's message"

echo "$fails failed"
[ "$fails" -eq 0 ]
