#!/usr/bin/env bash
# The scan examples (examples/scan/) run with `tgc run` and print the
# values Theano's scan documentation prints; each output of every example
# written with -o matches the expected .npy of tests/data/scan byte for
# byte in its data (NumPy computed those: tests/data/gen/scan.py); the
# Gibbs chain and the shared counter go on across calls through updates;
# a compiled .tgf of a scan function runs the same, and tgc print/export
# and tgprof handle scan nodes.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}" "${TG_TEST_DATA:?}"
source "$(dirname "$0")/lib/checks.bash"
ex="$TG_SRC/examples/scan"
d="$TG_TEST_DATA/scan"

for f in "$ex"/*.json; do
  expect 0 "tgc check $(basename "$f")" -- "$TGC" check "$f"
done

# The values the documentation prints.
expect 0 "power k=2" -- "$TGC" run "$ex/power.json" -i A='[0,1,2,3,4,5,6,7,8,9]' -i k=2
contains out '\[ 0.,  1.,  4.,  9., 16., 25., 36., 49., 64., 81.\]' "A**2 as printed"
expect 0 "power k=4" -- "$TGC" run "$ex/power.json" -i A='[0,1,2,3,4,5,6,7,8,9]' -i k=4
contains out '6.561e+03' "A**4 as printed"
expect 0 "polynomial" -- "$TGC" run "$ex/polynomial.json" -i coefficients='[1,0,2]' -i x=3
contains out '^19.$' "the polynomial is 19"
expect 0 "triangular" -- "$TGC" run "$ex/triangular.json" -i up_to=15
contains out '\[  0,   1,   3,   6,  10,  15,  21,  28,  36,  45,  55,  66,  78,  91, 105\]' "triangular numbers as printed"
expect 0 "set_value" -- "$TGC" run "$ex/set_value.json" -i location='[[1,1],[2,3]]' -i values='[42,50]' \
  -i output_model='[[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0]]'
contains out ' \[ 0., 42.,  0.,  0.,  0.\]' "42 at (1, 1)"
contains out ' \[ 0.,  0.,  0., 50.,  0.\]' "50 at (2, 3)"
expect 0 "power_of_2" -- "$TGC" run "$ex/power_of_2.json" -i max_value=45
contains out '\[ 2.,  4.,  8., 16., 32., 64.\]' "powers of two up to 45 as printed"
expect 0 "shared_updates" -- "$TGC" run "$ex/shared_updates.json" --calls 2 --each
contains out 'call 1: b=2 c=12' "first call: b 2, c 12"
contains out 'call 2: b=12 c=22' "second call: b 12, c 22"

# Every example against NumPy's values, through -o.
same_data() { # a.npy b.npy: the same array data (headers may differ in padding)
  cmp -s <(tail -c "$(($(stat -c %s "$2") - $(head -c 10 "$2" | od -An -tu2 -j8 -N2 | tr -d ' ') - 10))" "$2") \
         <(tail -c "$(($(stat -c %s "$1") - $(head -c 10 "$1" | od -An -tu2 -j8 -N2 | tr -d ' ') - 10))" "$1")
}
run_np() { # name function calls
  local name=$1 fn=$2 calls=$3 args=()
  for f in "$d/$name".in.*.npy; do
    [ -e "$f" ] || continue
    local id=${f#"$d/$name".in.}; args+=(-i "${id%.npy}=$f")
  done
  expect 0 "$name runs" -- "$TGC" run "$ex/$name.json" -f "$fn" "${args[@]}" --calls "$calls" -o "$tmp/$name"
  local last=$((calls - 1))
  for w in "$d/$name.$last".*.npy; do
    local o=${w#"$d/$name.$last".}
    if same_data "$tmp/$name/$o" "$w"; then pass "$name: $o matches NumPy's"; else fail "$name: $o differs from NumPy's"; fi
  done
}
run_np power power 1
run_np polynomial calculate_polynomial 1
run_np triangular triangular_sequence 1
run_np set_value assign_values_at_positions 1
run_np gibbs gibbs10 2
run_np power_of_2 f 1
run_np reduce_sum sum 1
run_np horner_foldr horner 1

# Compiled: a .tgf of the RNN restores its scan (and its body) without
# optimizing again and gives the same values; print and export show it.
rnn_args=()
for f in "$d"/rnn.in.*.npy; do id=${f#"$d"/rnn.in.}; rnn_args+=(-i "${id%.npy}=$f"); done
expect 0 "compile rnn.json" -- "$TGC" compile "$ex/rnn.json" -o "$tmp/rnn.tgf"
expect 0 "run rnn.tgf" -- "$TGC" run "$tmp/rnn.tgf" "${rnn_args[@]}" -o "$tmp/rnn_tgf"
expect 0 "run rnn.json" -- "$TGC" run "$ex/rnn.json" "${rnn_args[@]}" -o "$tmp/rnn_json"
for o in x_vals y_vals; do
  if cmp -s "$tmp/rnn_tgf/$o.npy" "$tmp/rnn_json/$o.npy"; then pass "rnn.tgf: $o as the graph's"; else fail "rnn.tgf: $o differs"; fi
done
expect 0 "print rnn.tgf" -- "$TGC" print "$tmp/rnn.tgf"
contains out 'scan' "the printed function has its scan node"
expect 0 "export rnn.tgf" -- "$TGC" export "$tmp/rnn.tgf" -o "$tmp/rnn_export.json"
expect 0 "the export runs" -- "$TGC" run "$tmp/rnn_export.json" "${rnn_args[@]}" -o "$tmp/rnn_exp"
for o in x_vals y_vals; do
  if cmp -s "$tmp/rnn_exp/$o.npy" "$tmp/rnn_json/$o.npy"; then pass "export: $o as the graph's"; else fail "export: $o differs"; fi
done
# The Gibbs chain saved mid-stream resumes where it stopped.
expect 0 "gibbs checkpoint" -- "$TGC" run "$ex/gibbs.json" -i sample="$d/gibbs.in.sample.npy" --save-state "$tmp/g1.tgf"
expect 0 "gibbs resumed" -- "$TGC" run "$tmp/g1.tgf" -i sample="$d/gibbs.in.sample.npy" -o "$tmp/g2"
if same_data "$tmp/g2/last_sample.npy" "$d/gibbs.1.last_sample.npy"; then pass "the resumed chain gives the second call's sample"; else fail "the resumed chain differs"; fi
if [ -n "${TGPROF:-}" ]; then
  expect 0 "tgprof on the RNN" -- "$TGPROF" "$ex/rnn.json" "${rnn_args[@]}"
  contains out 'scan' "the profile lists the scan node"
fi

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
