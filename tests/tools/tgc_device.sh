#!/usr/bin/env bash
# tgc run --device: an unknown device is bad usage (exit 2, one line naming
# it); --device cuda gives the CPU's results, on the GPU where there is
# one and on the CPU (with one line on stderr) where there is none.
set -euo pipefail
tgc=${TGC:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/g.json" <<'J'
{"format":"tg-graph","version":1,
 "variables":[{"id":"x","type":{"dtype":"float64","shape":[2,3]}},
              {"id":"w","type":{"dtype":"float64","shape":[3]}}],
 "nodes":[{"op":"mul","inputs":["x","w"],"outputs":["xw"]},
          {"op":"tanh","inputs":["xw"],"outputs":["t"]},
          {"op":"sum","inputs":["t"],"outputs":["y"],"attrs":{"axis":1}}],
 "functions":{"main":{"inputs":["x","w"],"outputs":["y"]}}}
J
set +e
"$tgc" run "$tmp/g.json" -i 'x=[[1,2,3],[4,5,6]]' -i 'w=[0.1,0.2,0.3]' --device tpu 2> "$tmp/err"
rc=$?
set -e
[ "$rc" = 2 ] || { echo "FAIL: --device tpu exit $rc, expected 2"; exit 1; }
grep -q "unknown device 'tpu'" "$tmp/err" || { echo "FAIL: message: $(cat "$tmp/err")"; exit 1; }
[ "$(wc -l < "$tmp/err")" = 1 ] || { echo "FAIL: more than one line on stderr"; exit 1; }
echo "ok: unknown device"
"$tgc" run "$tmp/g.json" -i 'x=[[1,2,3],[4,5,6]]' -i 'w=[0.1,0.2,0.3]' -o "$tmp/cpu" --device cpu
"$tgc" run "$tmp/g.json" -i 'x=[[1,2,3],[4,5,6]]' -i 'w=[0.1,0.2,0.3]' -o "$tmp/cuda" --device cuda 2> "$tmp/err2"
# y = [tanh(.1)+tanh(.4)+tanh(.9), tanh(.4)+tanh(1)+tanh(1.8)], worked out
# with NumPy: 1.19767..., 2.09743...
/usr/bin/python3 - "$tmp" <<'P'
import sys, numpy as np
d = sys.argv[1]
want = np.tanh(np.array([[.1, .4, .9], [.4, 1., 1.8]])).sum(1)
for dev in ("cpu", "cuda"):
    got = np.load(f"{d}/{dev}/y.npy")
    assert np.allclose(got, want, rtol=1e-12, atol=0), (dev, got, want)
print("ok: --device cpu and cuda agree with NumPy")
P
