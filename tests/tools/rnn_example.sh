#!/usr/bin/env bash
# examples/rnn.json, the RNN language model through scan: it loads, the
# gradients of one step (BPTT through the scan, with and without the
# optimizer) match the same step written in NumPy
# (tests/data/gen/rnn_bptt.py), the first training costs match NumPy's,
# and thirty SGD calls lower the cost.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}"
source "$(dirname "$0")/lib/checks.bash"
ex="$TG_SRC/examples"
data=(-i x="$ex/rnn/x.npy" -i y="$ex/rnn/y.npy")

expect 0 "tgc check rnn.json" -- "$TGC" check "$ex/rnn.json"
"$TGC" run "$ex/rnn.json" -f train "${data[@]}" --calls 30 --each >"$tmp/train.out" 2>"$tmp/err"
sed -n 's/.*cost=\([^ ]*\).*/\1/p' "$tmp/train.out" >"$tmp/costs"
if [ "$(wc -l <"$tmp/costs")" -eq 30 ] && awk 'NR==1{a=$1} {b=$1} END{exit !(b < 0.6 * a)}' "$tmp/costs"; then
  pass "30 training calls lower the cost ($(head -1 "$tmp/costs") -> $(tail -1 "$tmp/costs"))"
else
  fail "the cost did not fall: $(tr '\n' ' ' <"$tmp/costs")"; sed 's/^/  | /' "$tmp/err"
fi
expect 0 "predict" -- "$TGC" run "$ex/rnn.json" -f predict -i x="$ex/rnn/x.npy" -o "$tmp/pred"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  py=/usr/bin/python3
  $py - "$ex" "$tmp/pred/prediction.npy" <<'PY' && pass "the prediction has x's shape, ids in the vocabulary" || fail "prediction"
import sys, numpy as np
x = np.load(sys.argv[1] + "/rnn/x.npy"); p = np.load(sys.argv[2])
sys.exit(0 if p.shape == x.shape and p.dtype == np.int64 and p.min() >= 0 and p.max() < 30 else 1)
PY
  for preset in fast_run none; do
    rm -rf "$tmp/g"
    expect 0 "grads ($preset)" -- "$TGC" run "$ex/rnn.json" -f grads "${data[@]}" -O "$preset" -o "$tmp/g"
    expect 0 "BPTT gradients ($preset) match NumPy's" -- $py "$TG_SRC/tests/data/gen/rnn_bptt.py" "$ex" "$tmp/g"
    sed 's/^/  | /' "$tmp/out"
  done
  $py "$TG_SRC/tests/data/gen/rnn_bptt.py" "$ex" --costs 5 >"$tmp/np.costs"
  head -5 "$tmp/costs" >"$tmp/tg.costs"
  if paste "$tmp/tg.costs" "$tmp/np.costs" | awk '{d=$1-$2; if (d<0) d=-d; if (d > 1e-4*$2) exit 1}'; then
    pass "the first 5 training costs match NumPy's SGD ($(tr '\n' ' ' <"$tmp/np.costs"))"
  else
    fail "costs: tg $(tr '\n' ' ' <"$tmp/tg.costs"), NumPy $(tr '\n' ' ' <"$tmp/np.costs")"
  fi
fi
echo "$fails failed"
[ "$fails" -eq 0 ]
