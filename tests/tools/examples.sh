#!/usr/bin/env bash
# The bundled examples load, run with tgc, and train: the cost falls, and
# for the MLP the first costs match the same step written in NumPy.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}" "${TG_BUILD_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
costs() { sed -n 's/.*cost=\([^ ]*\).*/\1/p' "$1"; }
falls() { awk 'NR==1{a=$1} {b=$1} END{exit !(b < a)}' "$1"; }

for ex in "$TG_SRC"/examples/*.json; do
  check '"$TGC" check "$ex" >/dev/null' "tgc check $(basename "$ex")"
done

"$TG_BUILD_DIR/tools/tg-example-mlp-data" "$tmp" 300
"$TGC" run "$TG_SRC/examples/mlp.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 4 --each >"$tmp/mlp.out"
costs "$tmp/mlp.out" >"$tmp/mlp.costs"
check 'falls "$tmp/mlp.costs"' "the MLP's cost falls ($(tr '\n' ' ' <"$tmp/mlp.costs"))"
"$TGC" run "$TG_SRC/examples/mlp.json" -f predict -i x="$tmp/x.npy" -o "$tmp/pred" >/dev/null
check '[ -f "$tmp/pred/prediction.npy" ]' "the MLP predicts"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 - "$TG_SRC" "$tmp" <<'PY' >"$tmp/np.costs"
import sys, numpy as np
src, d = sys.argv[1], sys.argv[2]
x = np.load(d + "/x.npy"); y = np.load(d + "/y.npy")
W1 = np.load(src + "/examples/mlp/W1.npy"); W2 = np.load(src + "/examples/mlp/W2.npy")
b1 = np.zeros(500, np.float32); b2 = np.zeros(10, np.float32)
for i in range(4):
    h = np.tanh(x @ W1 + b1); z = h @ W2 + b2; z = z - z.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    print((-(y * np.log(p)).sum(1)).mean())
    g = (p - y) / np.float32(len(x)); gh = (g @ W2.T) * (1 - h * h)
    W2 -= 0.01 * (h.T @ g); b2 -= 0.01 * g.sum(0); W1 -= 0.01 * (x.T @ gh); b1 -= 0.01 * gh.sum(0)
PY
  check 'paste "$tmp/mlp.costs" "$tmp/np.costs" | awk "{d=\$1-\$2; if (d<0) d=-d; if (d > 1e-4*\$2) exit 1}"' \
    "the MLP's costs match NumPy's ($(tr '\n' ' ' <"$tmp/np.costs"))"
fi
# The convnet trains on the same data (images as rows of 784).
"$TGC" run "$TG_SRC/examples/convnet.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 3 --each >"$tmp/cnn.out"
costs "$tmp/cnn.out" >"$tmp/cnn.costs"
check 'falls "$tmp/cnn.costs"' "the convnet's cost falls ($(tr '\n' ' ' <"$tmp/cnn.costs"))"
# The data writers: --help prints the usage and writes nothing; an option,
# a bad N or a stray argument is one line and exit 2, and no folder.
for w in mlp logreg; do
  bin="$TG_BUILD_DIR/tools/tg-example-$w-data"
  (cd "$tmp" && "$bin" --help >"$tmp/h.out" 2>"$tmp/h.err")
  rc=$?
  check '[ $rc -eq 0 ] && grep -q "^usage: .*OUTDIR \[N\]" "$tmp/h.out" && [ ! -s "$tmp/h.err" ] && [ ! -e "$tmp/--help" ]' \
    "tg-example-$w-data --help: the usage, no folder"
  for args in "-o $tmp/d" "$tmp/d 10x" "$tmp/d 0" "$tmp/d 99999999999" "$tmp/d 5 6" ""; do
    # shellcheck disable=SC2086
    "$bin" $args >/dev/null 2>"$tmp/e.err"
    rc=$?
    check '[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/e.err")" -eq 1 ] && [ ! -e "$tmp/d" ]' \
      "tg-example-$w-data $args: one line ($(head -c 90 "$tmp/e.err")), exit 2, nothing written"
  done
  "$bin" "$tmp/d" 7 >/dev/null 2>&1
  check '[ -s "$tmp/d/x.npy" ] && [ -s "$tmp/d/y.npy" ]' "tg-example-$w-data DIR 7 writes x.npy and y.npy"
  rm -rf "$tmp/d"
done

echo "$fails failed"
[ "$fails" -eq 0 ]
