#!/usr/bin/env bash
# Build the loader's fuzz target with clang and run it for N seconds
# (default 60) from the seed corpus; exits non-zero on any crash, leak or
# sanitizer report.
set -euo pipefail
secs=${1:-60}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${TG_FUZZ_BUILD:-$src/build-fuzz}
CC=clang cmake -S "$src" -B "$build" -DTG_FUZZ=ON -DTG_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_load -j"$(nproc)" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src"/tests/fuzz/corpus_load/* "$work/"
cd "$work"
ASAN_OPTIONS=detect_leaks=1 "$build/tests/fuzz/fuzz_load" -max_total_time="$secs" -max_len=8192 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$work" 2>&1 | tail -15
echo "fuzz_load: ${secs}s without a crash"
