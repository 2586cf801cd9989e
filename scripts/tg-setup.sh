#!/usr/bin/env bash
# tg's set-up on a fresh Debian 12 machine, in one of two modes:
#   bash scripts/tg-setup.sh example   install what is missing, build, and
#                                      train the bundled logistic regression
#   bash scripts/tg-setup.sh test      install what is missing, build, and run
#                                      every test: the suite, the suite under
#                                      ASan+UBSan, the loaders' fuzzers (45 s + 60 s + 30 s)
#                                      and the run fuzzer (60 s)
# Works as root or through sudo. Builds go to build/ (and build-asan/,
# build-fuzz/ for the tests).
set -euo pipefail
mode=${1:-example}
case "$mode" in example|test) ;; *) echo "usage: $0 example|test" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

# ---- packages ----
pkgs=(cmake make gcc pkg-config libjson-c-dev libopenblas-dev libopenblas0-openmp zlib1g-dev libcmocka-dev libgraphviz-dev libmicrohttpd-dev)
if [ "$mode" = test ]; then
  # locales: test_locale builds a de_DE locale with localedef
  pkgs+=(clang libclang-rt-14-dev python3-numpy python3-jsonschema chromium wrk iproute2 locales)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm from Debian only when the machine has none: a Node.js
# installed another way (with its own npm) conflicts with Debian's npm.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# ---- npm: d3 for the pages (bundled into tgviz at build time) and, for
# the tests, playwright-core to drive chromium; each into a project-local
# node_modules from its committed package-lock.json ----
npm_ci() { # DIR
  [ -d "$1/node_modules" ] && [ "$1/node_modules/.package-lock.json" -nt "$1/package-lock.json" ] && return 0
  echo "== npm ci in $1"
  (cd "$1" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
npm_ci web
[ "$mode" = test ] && npm_ci tests/browser

# ---- build ----
werror=OFF
[ "$mode" = test ] && werror=ON
echo "== building (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_WERROR=$werror >/dev/null
cmake --build build -j"$jobs" >/dev/null

if [ "$mode" = example ]; then
  data=build/example-data
  mkdir -p "$data"
  build/tools/tg-example-logreg-data "$data" 400
  echo "== training the logistic regression of examples/logreg.json (400 examples, 784 features)"
  build/tools/tgc run examples/logreg.json -f train -i x="$data/x.npy" -i y="$data/y.npy" \
    --calls 20 --each
  exit 0
fi

# ---- tests ----
echo "== tests"
ctest --test-dir build --output-on-failure -j"$jobs"
echo "== tests under AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTG_SANITIZE=ON -DTG_WERROR=ON \
  -DTG_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
if [ -x tests/fuzz/run.sh ]; then
  echo "== fuzzing the JSON loader (45 s), the .tgf loader (60 s), the .npy and .npz readers (30 s) and running what loads (60 s) (build-fuzz/)"
  tests/fuzz/run.sh 45 fuzz_load
  tests/fuzz/run.sh 60 fuzz_tgf
  tests/fuzz/run.sh 30 fuzz_npy
  tests/fuzz/run.sh 60 fuzz_run
fi
echo "== all tests passed"
