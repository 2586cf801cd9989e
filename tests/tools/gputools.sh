#!/usr/bin/env bash
# The tools' device options: tgprof --device and --sync, tgdebug nanguard
# --device. An unknown device is bad usage (exit 2, one line naming it); a
# .tgf takes no --device; --sync on a CPU function changes nothing but is
# accepted (every node on the host clock, the JSON report says so and
# validates). --device cuda works with or without a GPU: on one, the GPU
# nodes are timed by events (by the synchronised host clock with --sync)
# and the report says how; without one, one line on stderr and the CPU's
# report. nanguard --device cuda names the same node, with the same
# message, as on the CPU. Last, when the benchmark is built, its tiny CPU
# run: the nets' graphs load, compile and train, and the peer agrees.
set -uo pipefail
: "${TG_SRC:?}" "${TG_BUILD_DIR:?}" "${TG_TEST_DATA:?}" "${TGC:?}"
TGPROF=${TGPROF:-$TG_BUILD_DIR/tools/tgprof}
TGDEBUG=${TGDEBUG:-$TG_BUILD_DIR/tools/tgdebug}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
PY=/usr/bin/python3

# One line on stderr starting with $prefix, and the exit status wanted.
bad() {
  local want=$1 prefix=$2 what=$3
  shift 3
  "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^$prefix" "$tmp/err"; then
    echo "ok: $what: exit $rc, $(cat "$tmp/err")"
  else
    echo "FAIL: $what: exit $rc (want $want):"
    cat "$tmp/err"
    fails=$((fails + 1))
  fi
}

costly="$TG_TEST_DATA/prof/costly.json"
v='v=[1,2,3,4,5,6,7,8]'
# Whether a GPU answers: tgc says so on stderr when there is none. (Into
# a file first: with pipefail, grep -q leaving at the first match made
# any later line of tgc's stderr a SIGPIPE, and the pipeline false.)
"$TGC" run "$costly" -i "$v" --device cuda 2>"$tmp/probe.err" >/dev/null
if grep -q "running on the CPU" "$tmp/probe.err"; then gpu=0; else gpu=1; fi
echo "GPU: $([ $gpu = 1 ] && echo yes || echo no)"

bad 2 "tgprof: " "tgprof --device tpu" "$TGPROF" "$costly" -i "$v" --device tpu
grep -q "unknown device 'tpu'" "$tmp/err" || { echo "FAIL: message names the device"; fails=$((fails + 1)); }
bad 2 "tgprof: " "tgprof --device without a value" "$TGPROF" "$costly" -i "$v" --device
bad 2 "tgprof: " "tgprof --sync=1 (takes no value)" "$TGPROF" "$costly" -i "$v" --sync=1
"$TGC" compile "$costly" -o "$tmp/costly.tgf" >/dev/null 2>&1
if [ -f "$tmp/costly.tgf" ]; then
  bad 2 "tgprof: " "tgprof a .tgf with --device" "$TGPROF" "$tmp/costly.tgf" -i "$v" --device cuda
  bad 2 "tgdebug: nanguard: " "nanguard a .tgf with --device" "$TGDEBUG" nanguard "$tmp/costly.tgf" -i "$v" --device cpu
fi
bad 2 "tgdebug: nanguard: " "nanguard --device tpu" "$TGDEBUG" nanguard "$costly" -i "$v" --device tpu

# --sync on the CPU: accepted, nothing on stderr, every node on the host
# clock, no GPU line in the report.
"$TGPROF" "$costly" -i "$v" --calls 3 --sync --device cpu --json "$tmp/sync.json" >"$tmp/sync.txt" 2>"$tmp/sync.err"
check '[ $? -eq 0 ] && [ ! -s "$tmp/sync.err" ]' "tgprof --sync --device cpu runs"
check '! grep -q "GPU nodes" "$tmp/sync.txt"' "no GPU line for a CPU function"
$PY - "$tmp/sync.json" <<'P' || fails=$((fails + 1))
import json, sys
f = json.load(open(sys.argv[1]))["functions"][0]
assert f["device_timing"] == "none", f["device_timing"]
assert all(n["clock"] == "host" for n in f["nodes"]), [n["clock"] for n in f["nodes"]]
assert all(n["calls"] == 3 for n in f["nodes"])
print("ok: --sync on the CPU: device_timing none, every node on the host clock")
P

# --device cuda, events and synchronous.
for mode in events sync; do
  extra=()
  [ $mode = sync ] && extra=(--sync)
  "$TGPROF" "$costly" -i "$v" --calls 3 --device cuda "${extra[@]}" --json "$tmp/$mode.json" \
    --trace "$tmp/$mode.trace.json" >"$tmp/$mode.txt" 2>"$tmp/$mode.err"
  check '[ $? -eq 0 ]' "tgprof --device cuda ($mode) runs"
  if [ $gpu = 1 ]; then
    check '[ ! -s "$tmp/$mode.err" ] && grep -q "GPU nodes: " "$tmp/$mode.txt"' "GPU line in the report ($mode)"
  else
    check '[ "$(wc -l <"$tmp/$mode.err")" -eq 1 ] && grep -q "running on the CPU" "$tmp/$mode.err"' \
      "no GPU: one line on stderr ($mode)"
  fi
  $PY - "$tmp/$mode.json" "$tmp/$mode.trace.json" $mode $gpu <<'P' || fails=$((fails + 1))
import json, sys
f = json.load(open(sys.argv[1]))["functions"][0]
mode, gpu = sys.argv[3], sys.argv[4] == "1"
clocks = {n["clock"] for n in f["nodes"]}
if gpu:
    assert f["device_timing"] == mode, f["device_timing"]
    assert (mode == "events") == ("events" in clocks), clocks
    assert "sync" in clocks, clocks  # the copy back, at least
    assert all(n["time_s"] > 0 for n in f["nodes"] if n["clock"] != "host")
else:
    assert f["device_timing"] == "none" and clocks == {"host"}, (f["device_timing"], clocks)
# The trace still nests every node in its call.
ev = json.load(open(sys.argv[2]))["traceEvents"]
calls = [e for e in ev if e.get("cat") == "call"]
for e in ev:
    if e.get("ph") == "X" and e.get("cat") != "call":
        assert any(c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 1e-3 for c in calls), e
print("ok: --device cuda (%s): device_timing %s, clocks %s" % (mode, f["device_timing"], sorted(clocks)))
P
done
if $PY -c 'import jsonschema' 2>/dev/null; then
  $PY - "$TG_SRC/schemas/profile.schema.json" "$tmp/sync.json" "$tmp/events.json" "$tmp/sync.json" <<'P' || fails=$((fails + 1))
import json, sys
import jsonschema
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
for p in sys.argv[2:]:
    errs = list(v.iter_errors(json.load(open(p))))
    assert not errs, (p, errs[0].message)
print("ok: the reports validate against the schema")
P
fi

# nanguard on both devices: the same culprit and message (-O none: the same
# nodes on both, fusion being off on the GPU).
deep="$TG_TEST_DATA/tgdebug/deep_log.json"
for dev in cpu cuda; do
  "$TGDEBUG" nanguard "$deep" -O none -i x='[1,2,3,4]' --device $dev >"$tmp/ng_$dev.out" 2>"$tmp/ng_$dev.err"
  echo $? >"$tmp/ng_$dev.rc"
done
check '[ "$(cat "$tmp/ng_cpu.rc")" = 1 ] && [ "$(cat "$tmp/ng_cuda.rc")" = 1 ]' "nanguard finds the NaN on both devices"
check '[ "$(grep "^node: " "$tmp/ng_cpu.out")" = "$(grep "^node: " "$tmp/ng_cuda.out")" ]' "the same node"
check '[ "$(grep "^tgdebug: nanguard: call" "$tmp/ng_cpu.err")" = "$(grep "^tgdebug: nanguard: call" "$tmp/ng_cuda.err")" ]' \
  "the same message"
check 'grep -q "^input 0 " "$tmp/ng_cuda.out"' "the culprit's inputs are reported"

# The benchmark's tiny CPU run (when it is built and PyTorch is here).
bench="$TG_BUILD_DIR/bench/bench_cudnn_nets"
if [ -x "$bench" ]; then
  TG_BENCH_PYTHON=$PY TG_BENCH_TINY=1 "$bench" >"$tmp/bench.txt" 2>&1
  check '[ $? -eq 0 ]' "bench_cudnn_nets tiny run: exit 0"
  check '[ "$(grep -c "cost falls" "$tmp/bench.txt")" -ge 3 ]' "bench: every net trains (cost falls)"
  if $PY -c 'import torch' 2>/dev/null; then
    check '[ "$(grep -c "peer agrees" "$tmp/bench.txt")" -ge 3 ] && ! grep -q "peer DISAGREES" "$tmp/bench.txt"' \
      "bench: the PyTorch peer computes the same costs"
  fi
  [ $fails = 0 ] || cat "$tmp/bench.txt"
fi

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all ok"
