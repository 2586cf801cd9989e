#!/usr/bin/env bash
# Build tg in Release (build-bench/) and run every benchmark, each printing
# tg's figures beside its peers (NumPy, Python) measured in the same run.
#   bash bench/run.sh [BENCH...]      e.g. bash bench/run.sh bench_vm
# The peers run with Debian's /usr/bin/python3; without NumPy the benches
# say "numpy: not installed" and still time tg.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DTG_BUILD_TESTS=OFF -DTG_BUILD_BENCH=ON >/dev/null
cmake --build build-bench -j"$jobs" >/dev/null
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  echo "numpy: not installed (peers skipped; apt-get install python3-numpy)"
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
  for b in bench/bench_*.c; do benches+=("$(basename "$b" .c)"); done
fi
for b in "${benches[@]}"; do
  echo
  echo "== $b"
  "build-bench/bench/$b"
done
