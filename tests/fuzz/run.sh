#!/usr/bin/env bash
# Build a fuzz target with clang and run it for N seconds (default 60) from
# its seed corpus; exits non-zero on any crash, leak or sanitizer report.
#   tests/fuzz/run.sh [SECONDS] [TARGET]
# TARGET: fuzz_load (the JSON loader, seeds in corpus_load/, the default)
# fuzz_tgf (compiled-function files, seeds in corpus_tgf/) or fuzz_npy
# (.npy arrays and .npz archives, seeds in corpus_npy/) or fuzz_run (compiling and calling
# every function of what loads; seeds: corpus_load/, the op test files
# tests/data/ops/ and the examples). TG_FUZZ_DIFF=DIR turns fuzz_run into
# a hunt for optimizer bugs (not run in CI): each function runs with
# presets none and fast_run on the same inputs, and an input whose
# optimized run fails, or differs where the unoptimized one is finite
# (beyond TG_FUZZ_DIFF_TOL, by default 1e-9 in float64, 1e-5 in float32),
# is written to DIR with a line on standard error.
set -euo pipefail
secs=${1:-60}
target=${2:-fuzz_load}
case "$target" in
  fuzz_load) corpus=corpus_load; maxlen=8192 ;;
  fuzz_tgf) corpus=corpus_tgf; maxlen=32768 ;;
  fuzz_npy) corpus=corpus_npy; maxlen=4096 ;;
  fuzz_run) corpus=corpus_load; maxlen=16384 ;;
  *) echo "run.sh: unknown target '$target' (fuzz_load, fuzz_tgf, fuzz_npy, fuzz_run)" >&2; exit 2 ;;
esac
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${TG_FUZZ_BUILD:-$src/build-fuzz}
CC=clang cmake -S "$src" -B "$build" -DTG_FUZZ=ON -DTG_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target "$target" -j"$(nproc)" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src/tests/fuzz/$corpus"/* "$work/"
if [ "$target" = fuzz_run ]; then
  # every op's test file under 16 KiB, and the examples: graphs that
  # load, to start the mutations from
  find "$src/tests/data/ops" "$src/examples" -maxdepth 1 -name '*.json' -size -16k -exec cp {} "$work/" \;
fi
# A finding is kept (in $build/fuzz-artifacts/) with the report around it,
# so that a failure in CI can be replayed: $build/tests/fuzz/$target FILE.
art="$build/fuzz-artifacts"
mkdir -p "$art"
log="$build/$target.log"
cd "$work"
rc=0
ASAN_OPTIONS=detect_leaks=1 "$build/tests/fuzz/$target" -max_total_time="$secs" -max_len="$maxlen" \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" "$work" >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  # the report: from a little before the sanitizer's first line (the
  # target's own message) to the end, without libFuzzer's progress lines
  grep -m1 -E '^[a-z].*: ' "$log" | grep -v -E '^(INFO|MS|artifact_prefix|stat)' || true
  first=$(grep -n -m1 -E '^==[0-9]+==|runtime error:|deadly signal' "$log" | cut -d: -f1 || true)
  first=$(( ${first:-1} > 40 ? ${first:-1} - 40 : 1 ))
  tail -n +"$first" "$log" | grep -v -E '^#[0-9]+[[:space:]]' | head -n 160
  for f in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
    [ -e "$f" ] || continue
    echo "$target: input kept in $f ($(stat -c %s "$f") bytes), base64:"
    base64 -w 0 "$f" | head -c 65536
    echo
  done
  echo "$target: failed after at most ${secs}s (exit $rc)"
  exit "$rc"
fi
tail -n 8 "$log"
echo "$target: ${secs}s without a crash"
