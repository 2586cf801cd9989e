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

# tgc compile --device: the same check of the name; a function compiled
# for cuda is saved with its placement and restored there where a GPU is
# (tgprof counts GPU nodes in the restored file), bit for bit what the
# function compiled for cuda gave; TG_DEVICE=cpu restores it on the CPU.
set +e
"$tgc" compile "$tmp/g.json" --device tpu -o "$tmp/t.tgf" 2> "$tmp/err3"
rc=$?
set -e
[ "$rc" = 2 ] && [ ! -e "$tmp/t.tgf" ] || { echo "FAIL: compile --device tpu exit $rc"; exit 1; }
grep -q "unknown device 'tpu'" "$tmp/err3" || { echo "FAIL: message: $(cat "$tmp/err3")"; exit 1; }
"$tgc" compile "$tmp/g.json" --device cuda -o "$tmp/t.tgf" 2> /dev/null
"$tgc" run "$tmp/t.tgf" -i 'x=[[1,2,3],[4,5,6]]' -i 'w=[0.1,0.2,0.3]' -o "$tmp/tgf" 2> "$tmp/err4"
TG_DEVICE=cpu "$tgc" run "$tmp/t.tgf" -i 'x=[[1,2,3],[4,5,6]]' -i 'w=[0.1,0.2,0.3]' -o "$tmp/tgfcpu" 2> /dev/null
cmp -s "$tmp/tgf/y.npy" "$tmp/cuda/y.npy" || { echo "FAIL: the .tgf compiled for cuda is not bit-identical to --device cuda"; exit 1; }
cmp -s "$tmp/tgfcpu/y.npy" "$tmp/cpu/y.npy" || { echo "FAIL: the .tgf with TG_DEVICE=cpu is not bit-identical to --device cpu"; exit 1; }
if grep -q "running on the CPU" "$tmp/err2"; then
  echo "ok: compile --device cuda without a GPU: the .tgf runs on the CPU, same bits"
else
  [ ! -s "$tmp/err4" ] || { echo "FAIL: restoring on the GPU said: $(cat "$tmp/err4")"; exit 1; }
  tgprof=${TGPROF:-$(dirname "$tgc")/tgprof}
  if [ -x "$tgprof" ]; then
    "$tgprof" "$tmp/t.tgf" -i 'x=[[1,2,3],[4,5,6]]' -i 'w=[0.1,0.2,0.3]' --calls 2 > "$tmp/prof"
    grep -q "GPU nodes: [1-9]" "$tmp/prof" || { echo "FAIL: the restored .tgf ran no node on the GPU"; exit 1; }
    TG_DEVICE=cpu "$tgprof" "$tmp/t.tgf" -i 'x=[[1,2,3],[4,5,6]]' -i 'w=[0.1,0.2,0.3]' --calls 2 > "$tmp/prof2"
    ! grep -q "GPU nodes" "$tmp/prof2" || { echo "FAIL: TG_DEVICE=cpu: the restored .tgf ran on the GPU"; exit 1; }
  fi
  echo "ok: compile --device cuda: the .tgf restores on the GPU, same bits; TG_DEVICE=cpu keeps it on the CPU"
fi
