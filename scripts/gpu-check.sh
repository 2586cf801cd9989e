#!/usr/bin/env bash
# Every GPU check of tg in one go, for a GPU machine that cannot build tg
# (no json-c, OpenBLAS, cmocka... there) and is lent for a few minutes:
#   bash scripts/gpu-check.sh pack [--build]
#       here, on the machine that builds tg with CUDA: packs the CUDA build
#       in build/ (configured and built as scripts/tg-setup.sh does when
#       build/ is missing or has no CUDA; --build brings it up to date
#       first) into .gpukit/: kit.tar.xz holds stripped copies of the unit
#       tests, the tools and the GPU benchmarks at their paths under the
#       repo root (build/tests/..., build/tools/..., build/bench/...) and,
#       under .gpukit/lib/, the libraries they need that a CUDA/PyTorch
#       image lacks; .gpukit/info says where and from what they were built.
#   bash scripts/gpu-check.sh run [tests|bench|all]     (default all)
#       there, from the repo root of a copy of the working tree that has
#       .gpukit/ (carried): unpacks the kit, finds the machine's cuBLAS,
#       cuDNN and NVRTC, then
#         tests: every unit test, the op test data, test_elemwise and
#                test_reduce with TG_DEVICE=cuda, and the GPU tool tests
#                (tests/tools/gputools.sh, tgc_device.sh, tgc_dnn_algo.sh),
#                in parallel; one PASS/FAIL line each, the tail of a failure
#         bench: bench_cuda and bench_cudnn_nets at full size, beside PyTorch
#         profile: tgprof (--sync, then CUDA events) on a training step of
#                each net of bench_cudnn_nets (GPUKIT_NETS, default
#                alexnet,vgg; batch GPUKIT_BATCH, default 64): profile.log
#       The logs go to $OUT (the device tool brings back at most 8 files):
#       summary.txt, env.txt, tests.log (every log, one after another),
#       bench.log and logs.tar.gz; without $OUT, to .gpukit/logs/. Exit 1
#       when anything failed, timed out or did not run.
# Environment: GPUKIT_JOBS (parallel tests; default min(8, cores)),
# GPUKIT_BUDGET_S (the whole run's deadline in seconds, default 520: every
# command's timeout is cut to end before it), GPUKIT_BENCHES (the
# benchmarks, ';'-separated "NAME STEPS TIMEOUT_S"; default "bench_cuda 200
# 150;bench_cudnn_nets 50 300"), GPUKIT_ONLY (a regular
# expression: only the tests whose names match, e.g. 'cudnn|^tools\.'),
# GPUKIT_CUDA_LIBDIRS (folders holding cuBLAS/cuDNN/NVRTC, ':'-separated,
# searched before anything else), TG_BENCH_PYTHON (the benchmarks'
# PyTorch; default python3 run without this script's LD_LIBRARY_PATH).
set -euo pipefail
mode=${1:-}
usage() { echo "usage: $0 pack [--build] | run [tests|bench|all|profile]" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$PWD
kit=.gpukit
die() { echo "gpu-check: $*" >&2; exit 1; }
note() { echo "gpu-check: $*"; }

# ---------------------------------------------------------------- pack ----
# Libraries never shipped: the C and C++ runtimes, OpenMP, zlib and CUDA's
# (the GPU machine's own must be used).
never_re='^(linux-vdso|ld-linux|libc\.|libm\.|libmvec|libstdc\+\+|libgcc_s|libgomp|libz\.|libdl\.|libpthread|librt\.|libresolv|libutil\.|libcuda\.|libcudart|libcublas|libcublasLt|libcudnn|libnvrtc|libnvJitLink)'
# Shipped and always first on the library path: what tg itself links to
# (json-c, OpenBLAS with its Fortran runtime, cmocka, libmicrohttpd,
# Graphviz with libltdl).
ship_re='^(libjson-c|libopenblas|libblas\.|liblapack\.|libgfortran|libquadmath|libcmocka|libmicrohttpd|libcgraph|libgvc|libcdt|libpathplan|libltdl|libxdot)'
# Anything else those pull in (gnutls under libmicrohttpd, expat under
# Graphviz...) goes to .gpukit/lib/fallback/ and is used there only for a
# library the machine lacks, never in place of its own.

# Whether build/ was configured with the CUDA backend: the cache has
# TG_CUDA other than OFF, nvcc, cuBLAS and the static runtime found (what
# CMakeLists.txt requires for TG_HAVE_CUDA, which is not cached).
cache_get() { sed -n "s/^$1:[A-Z]*=//p" build/CMakeCache.txt 2>/dev/null | head -1; }
build_has_cuda() {
  [ -f build/CMakeCache.txt ] || return 1
  [ "$(cache_get CMAKE_HOME_DIRECTORY)" = "$root" ] || return 1
  [ "$(cache_get TG_CUDA)" != OFF ] || return 1
  local v
  for v in CMAKE_CUDA_COMPILER CUDA_cublas_LIBRARY CUDA_cudart_static_LIBRARY; do
    case "$(cache_get "$v")" in "" | *NOTFOUND) return 1 ;; esac
  done
}

pack() {
  local build_first=0
  case "${1:-}" in --build) build_first=1 ;; "") ;; *) usage ;; esac
  local jobs
  jobs=${GPUKIT_JOBS:-$(nproc 2>/dev/null || echo 2)}
  command -v strip >/dev/null || die "strip not found (binutils)"
  command -v xz >/dev/null || die "xz not found"

  # ---- the build: configured as scripts/tg-setup.sh does ----
  if ! build_has_cuda; then
    local nvcc
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
    [ -n "$nvcc" ] || die "no CUDA toolkit (nvcc not on PATH nor in /usr/local/cuda/bin): cannot build the GPU kit"
    if [ -f build/CMakeCache.txt ] && [ "$(cache_get CMAKE_HOME_DIRECTORY)" != "$root" ]; then
      die "build/ was configured for $(cache_get CMAKE_HOME_DIRECTORY), not $root: remove it first"
    fi
    echo "== configuring build/ with CUDA (cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo)"
    local log
    log=$(mktemp /tmp/gpukit-configure.XXXXXX)
    # A cache made without CUDA keeps 'not found' answers: drop them so
    # that CMake looks again.
    if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_WERROR=OFF -DTG_CUDA=AUTO \
      -DCMAKE_CUDA_COMPILER="$nvcc" -U'CUDAToolkit_*' -U'CUDA_*' >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      die "cmake failed (log: $log)"
    fi
    if ! grep -q "tg: CUDA backend ON" "$log" || ! build_has_cuda; then
      die "CMake did not find CUDA (nvcc, cudart, cuBLAS); see $log"
    fi
    rm -f "$log"
    build_first=1
  fi
  if [ "$build_first" = 1 ]; then
    echo "== building build/ (-j$jobs)"
    cmake --build build -j"$jobs" >/dev/null
  fi

  # ---- what goes in: unit tests, tools, GPU benchmarks ----
  local files=() f
  for f in build/tests/test_*; do
    [ -f "$f" ] && [ -x "$f" ] && files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || die "no unit tests in build/tests (configured with -DTG_BUILD_TESTS=OFF?)"
  [ -x build/tools/tgc ] || die "build/tools/tgc is missing: build/ is not built"
  for f in build/tests/tgdebug-testrw build/tools/tgc build/tools/tgprof build/tools/tgdebug \
    build/tools/tgviz build/bench/bench_cuda build/bench/bench_cudnn_nets build/bench/bench_layernorm; do
    if [ -f "$f" ] && [ -x "$f" ]; then files+=("$f"); else note "not built, left out: $f"; fi
  done
  # cuBLAS is opened with dlopen (backend/cuda/cuda.c): its functions'
  # names are in the binary, not the library in its links.
  grep -q 'cublasCreate_v2' build/tools/tgc ||
    die "build/tools/tgc has no CUDA backend: build/ was built without CUDA (rebuild: cmake --build build)"
  # A build older than its sources tests old code: say so.
  local oldest newer
  oldest=$(ls -tr "${files[@]}" | sed -n 1p)
  newer=$(find libcore tools tests/unit bench -newer "$oldest" -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name 'CMakeLists.txt' \) 2>/dev/null || true)
  if [ -n "$newer" ]; then
    note "warning: sources newer than $oldest (pack --build to rebuild first):"
    echo "$newer" | sed -n 1,5p | sed 's/^/    /'
  fi

  # ---- stripped copies, the libraries, the archive ----
  rm -rf "$kit"
  local stage=$kit/stage
  mkdir -p "$stage/$kit/lib/fallback"
  for f in "${files[@]}"; do
    mkdir -p "$stage/$(dirname "$f")"
    strip -o "$stage/$f" "$f"
  done
  local name path libs=() fallback=()
  while read -r name path; do
    [ -n "$path" ] && [ -f "$path" ] || continue
    if [[ $name =~ $never_re ]]; then continue; fi
    if [[ $name =~ $ship_re ]]; then
      cp -L "$path" "$stage/$kit/lib/$name"
      libs+=("$name")
    else
      cp -L "$path" "$stage/$kit/lib/fallback/$name"
      fallback+=("$name")
    fi
  done < <(for f in "${files[@]}"; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u)
  # Graphviz finds its layout plugins through a file beside them
  # (GVBINDIR there): dot's layout and the core renderers.
  local gvdir
  gvdir=$(dirname "$(ldconfig -p | awk '/libgvc\.so\.[0-9]+ / && !p {print $NF; p = 1}')")/graphviz
  if [[ " ${libs[*]} " == *" libgvc"* ]] && [ -f "$gvdir/config6a" ]; then
    mkdir -p "$stage/$kit/lib/graphviz"
    cp -L "$gvdir/config6a" "$gvdir"/libgvplugin_core.so.? "$gvdir"/libgvplugin_dot_layout.so.? \
      "$stage/$kit/lib/graphviz/"
    libs+=("graphviz/ (config6a, core, dot_layout)")
  fi
  note "libraries shipped: ${libs[*]}"
  note "fallback libraries (used only where missing): ${fallback[*]:-none}"

  # The CUDA libraries the binaries want, by soname, for `run` to find.
  local cuda_libs nvrtc_major
  cuda_libs=$(for f in "${files[@]}"; do ldd "$f"; done | awk '{print $1}' |
    { grep -E '^lib(cublas|cublasLt|cudnn)\.so\.[0-9]+$' || true; } | sort -u | tr '\n' ' ')
  nvrtc_major=$(sed -n 's/^CMAKE_CUDA_COMPILER_VERSION:.*=\([0-9]*\)\..*/\1/p' build/CMakeCache.txt)
  [ -n "$nvrtc_major" ] || nvrtc_major=$(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\([0-9]*\)\..*/\1/p' \
    build/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -1)
  # NVRTC and cuBLAS are opened with dlopen: their majors are the toolkit's
  [ -n "$nvrtc_major" ] &&
    cuda_libs+="libnvrtc.so.$nvrtc_major libcublas.so.$nvrtc_major libcublasLt.so.$nvrtc_major"
  cuda_libs=$(tr ' ' '\n' <<<"$cuda_libs" | grep . | sort -u | tr '\n' ' ')

  {
    echo "src=$root"
    echo "commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "changed_files=$(git status --porcelain 2>/dev/null | grep -vc '^??' || true)"
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "build_type=$(cache_get CMAKE_BUILD_TYPE)"
    echo "cuda_code=$(grep -ho 'code=\[[^]]*\]' build/libcore/CMakeFiles/*/flags.make 2>/dev/null | sort -u | tr '\n' ' ')"
    echo "cudnn=$(awk '/^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{v=v (v==""?"":".") $3} END{print v==""?"no":v}' \
      "$(cache_get TG_CUDNN_INCLUDE_DIR)/cudnn_version.h" 2>/dev/null || echo no)"
    echo "cuda_libs=$cuda_libs"
    echo "sources_newer_than_build=$(echo "$newer" | grep -c . || true)"
    echo "built_on=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(uname -m)"
  } >"$kit/info"
  cp "$kit/info" "$stage/$kit/info.packed"

  echo "== compressing (xz -9)"
  # One stream, the binaries side by side: the static libtg they all hold
  # compresses once.
  (cd "$stage" && tar -c --owner=0 --group=0 build "$kit" | xz -9 -T1 >"../kit.tar.xz")
  rm -rf "$stage"
  cat "$kit/info"
  local bytes
  bytes=$(du -cb "$kit" | tail -1 | cut -f1)
  note "$kit/: ${#files[@]} binaries, $(awk -v b="$bytes" 'BEGIN{printf "%.1f MiB", b/1048576}') in all"
  [ "$bytes" -lt $((48 * 1048576)) ] || die "the kit is over 48 MiB: too big to carry with the working tree"
  echo "next, with the device tool:"
  echo "  run(command=\"bash scripts/gpu-check.sh run\", carry=[\".gpukit\"], timeout_s=560)"
}

# ----------------------------------------------------------------- run ----
t0=$SECONDS
deadline() { echo $((t0 + ${GPUKIT_BUDGET_S:-520} - SECONDS)); } # seconds left

# The folders holding libcublas, libcublasLt, libcudnn and libnvrtc (the
# sonames from the kit's info): GPUKIT_CUDA_LIBDIRS first, then python3's
# site-packages (PyTorch's own copies, so that tg and the PyTorch peer use
# the same ones), then the toolkits and the rest of /usr/local, /opt,
# /usr/lib.
find_cuda_libs() {
  local want=$1 near=() far=() d out n
  IFS=: read -r -a near <<<"${GPUKIT_CUDA_LIBDIRS:-}"
  if command -v python3 >/dev/null; then
    while read -r d; do [ -d "$d/nvidia" ] && near+=("$d/nvidia"); done < <(python3 -c \
      'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null || true)
  fi
  for d in /usr/local/cuda /usr/local/cuda-*; do [ -d "$d" ] && near+=("$d"); done
  for d in /usr/local /opt /usr/lib /usr/lib64; do [ -d "$d" ] && far+=("$d"); done
  local names=()
  for n in $want; do names+=(-o -name "$n"); done
  # -H: /usr/local/cuda is usually a link. The wide folders only when the
  # near ones lack something.
  out=$([ ${#near[@]} -eq 0 ] || timeout 60 find -H "${near[@]}" -xdev \( -false "${names[@]}" \) \
    \( -type f -o -type l \) 2>/dev/null | grep -v /stubs/ || true)
  for n in $want; do
    if ! grep -q "/$n\$" <<<"$out"; then
      out+=$'\n'$(timeout 90 find -H "${far[@]}" -xdev \( -false "${names[@]}" \) \( -type f -o -type l \) \
        2>/dev/null | grep -v /stubs/ || true)
      break
    fi
  done
  echo "$out"
}

run() {
  local what=${1:-all}
  case "$what" in tests | bench | all | profile) ;; *) usage ;; esac
  # wait -n -p (the parallel tests) is bash 5.1's.
  [ "${BASH_VERSINFO[0]}" -gt 5 ] || { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -ge 1 ]; } ||
    die "bash $BASH_VERSION is too old (5.1 or newer needed)"
  [ -f "$kit/kit.tar.xz" ] && [ -f "$kit/info" ] ||
    die "no kit in $root/$kit: run 'bash scripts/gpu-check.sh pack' where tg builds, and carry .gpukit"
  local src
  src=$(sed -n 's/^src=//p' "$kit/info")
  [ -n "$src" ] || die "$kit/info names no source folder"
  echo "== tg GPU checks ($what): kit built from $src, $(grep -E '^(commit|date)=' "$kit/info" | tr '\n' ' ')"
  case "$(sed -n 's/^sources_newer_than_build=//p' "$kit/info")" in
    "" | 0) ;;
    *) note "warning: the kit's build was older than some of its sources (see $kit/info)" ;;
  esac

  # ---- the source folder compiled into the binaries (TG_TEST_DATA,
  # TG_SOURCE_DIR, TG_BENCH_DIR) must be this one ----
  if [ "$src" -ef "$root" ]; then
    :
  elif [ -L "$src" ]; then
    ln -sfn "$root" "$src"
    note "$src now points here (it pointed elsewhere)"
  elif [ -e "$src" ]; then
    die "the kit's binaries read $src, which exists here as a different folder: refusing to replace it (run from $src, or move it away)"
  else
    mkdir -p "$(dirname "$src")"
    ln -sfn "$root" "$src"
    note "made $src a link to $root (the binaries have that path compiled in)"
  fi

  # ---- the binaries: into the repo root, unless a real build lives
  # there (then beside it, in .gpukit/root, to leave that build alone) ----
  local dest=.
  scratch=()
  trap 'rm -rf "${scratch[@]}"' EXIT
  if [ -f build/CMakeCache.txt ]; then
    dest=$kit/root
    note "build/ here is a real build: unpacking into $dest/ instead"
  fi
  rm -rf "${kit:?}/lib" "${kit:?}/root"
  mkdir -p "$dest"
  if command -v xz >/dev/null; then
    tar -xJf "$kit/kit.tar.xz" -C "$dest"
  else # no xz here: Python's lzma
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$kit/kit.tar.xz" "$dest" || die "cannot unpack $kit/kit.tar.xz (no xz, no python3)"
  fi
  if [ "$dest" != . ]; then
    rm -rf "${kit:?}/lib"
    mv "$dest/$kit/lib" "$kit/lib"
    rm -rf "${dest:?}/$kit"
    # Scratch here: gone at the end, so that .gpukit/ stays small enough
    # to carry.
    scratch+=("$root/$kit/root" "$root/$kit/lib")
  fi
  local B=$root/build
  [ "$dest" = . ] || B=$root/$dest/build

  # ---- logs ----
  local logs=$root/$kit/logs rep=${OUT:-$root/$kit/logs}
  rm -rf "$logs"
  mkdir -p "$logs/tests" "$rep"
  rm -f "$rep/summary.txt" "$rep/tests.log" "$rep/bench.log" "$rep/env.txt" "$rep/logs.tar.gz"
  local cache
  cache=$(mktemp -d /tmp/tg-gpukit-cache.XXXXXX)
  scratch+=("$cache")
  env_txt="$rep/env.txt"
  say() { echo "$*" | tee -a "$env_txt" "$rep/summary.txt"; } # stdout, env.txt, summary.txt

  # ---- libraries ----
  local kitlib=$root/$kit/lib orig_ldp=${LD_LIBRARY_PATH:-} ldp_set=${LD_LIBRARY_PATH+set}
  local want found dirs=() n p missing=()
  want=$(sed -n 's/^cuda_libs=//p' "$kit/info")
  [ -n "$want" ] || want="libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnvrtc.so.13"
  found=$(find_cuda_libs "$want")
  for n in $want; do
    p=$(echo "$found" | awk -F/ -v n="$n" '$NF == n {print; exit}')
    if [ -n "$p" ]; then
      say "found $n: $p -> $(readlink -f "$p" | xargs basename)"
      dirs+=("$(dirname "$p")")
    else
      say "WARNING: $n not found under the usual folders (set GPUKIT_CUDA_LIBDIRS)"
      missing+=("$n")
    fi
  done
  # libcuda.so.1 (the driver) is opened by the CUDA runtime: say where.
  if ldconfig -p 2>/dev/null | grep 'libcuda\.so\.1 ' >/dev/null; then
    say "driver: $(ldconfig -p | awk '/libcuda\.so\.1 / && !p {print $NF; p = 1}')"
  else
    p=$(for d in ${orig_ldp//:/ } /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
      [ -e "$d/libcuda.so.1" ] && echo "$d/libcuda.so.1" && break; done || true)
    if [ -n "$p" ]; then say "driver: $p"; dirs+=("$(dirname "$p")"); else say "driver: libcuda.so.1 not found"; fi
  fi
  local ldp=$kitlib
  for p in "${dirs[@]}"; do case ":$ldp:" in *":$p:"*) ;; *) ldp+=":$p" ;; esac; done
  [ -n "$orig_ldp" ] && ldp+=":$orig_ldp"
  export LD_LIBRARY_PATH=$ldp
  # Libraries the machine lacks: from the kit's fallback folder, linked
  # one by one into .gpukit/lib/missing (never shadowing the machine's).
  local bins=() nf
  mapfile -t bins < <(find "$B" -type f -perm -u+x | sort)
  mkdir -p "$kitlib/missing"
  for _ in 1 2 3 4; do
    nf=$(for p in "${bins[@]}"; do ldd "$p" 2>/dev/null; done | awk '/not found/{print $1}' | sort -u)
    [ -n "$nf" ] || break
    local added=0
    for n in $nf; do
      if [ -f "$kitlib/fallback/$n" ] && [ ! -e "$kitlib/missing/$n" ]; then
        ln -s "../fallback/$n" "$kitlib/missing/$n"
        added=1
      fi
    done
    [ $added = 1 ] || break
    case ":$LD_LIBRARY_PATH:" in *":$kitlib/missing:"*) ;; *) LD_LIBRARY_PATH=$kitlib:$kitlib/missing${LD_LIBRARY_PATH#"$kitlib"} ;; esac
  done
  [ -z "$(ls "$kitlib/missing")" ] || say "libraries this machine lacks, from the kit: $(ls "$kitlib/missing" | tr '\n' ' ')"
  if [ -n "$nf" ]; then
    say "WARNING: still not found: $(echo "$nf" | tr '\n' ' ')"
    for p in "${bins[@]}"; do ldd "$p" 2>/dev/null | grep "not found" >/dev/null && say "  $(basename "$p") cannot start"; done
  fi
  say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  # The versions found (cuDNN older than the headers tg was built with may
  # lack what it calls).
  if command -v python3 >/dev/null; then
    say "$(timeout 30 python3 - "$want" <<'P' 2>&1 || true
import ctypes, sys
out = []
for n in sys.argv[1].split():
    try:
        lib = ctypes.CDLL(n)
        if n.startswith("libcudnn"):
            v = lib.cudnnGetVersion()
            out.append("cuDNN %d.%d.%d" % (v // 10000, v // 100 % 100, v % 100))
        elif n.startswith("libnvrtc"):
            a, b = ctypes.c_int(), ctypes.c_int()
            lib.nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
            out.append("NVRTC %d.%d" % (a.value, b.value))
        elif n.startswith("libcublas."):
            v = [ctypes.c_int() for _ in range(3)]
            for i in range(3):
                lib.cublasGetProperty(i, ctypes.byref(v[i]))
            out.append("cuBLAS %d.%d.%d" % tuple(x.value for x in v))
    except OSError as e:
        out.append("%s: %s" % (n, e))
print("versions: " + ", ".join(out))
P
)"
    say "  (the kit was built against cuDNN $(sed -n 's/^cudnn=//p' "$kit/info"))"
  fi
  [ -d "$kitlib/graphviz" ] && export GVBINDIR=$kitlib/graphviz

  # ---- the machine ----
  if command -v nvidia-smi >/dev/null; then
    say "nvidia-smi -L: $(nvidia-smi -L 2>&1 | tr '\n' ' ')"
  else
    say "nvidia-smi: none (no NVIDIA driver here)"
  fi
  local v='v=[1,2,3,4,5,6,7,8]' gpu=1 line
  line=$(cd "$B/tests" && TG_CACHE_DIR=$cache/probe timeout 60 "$B/tools/tgc" run "$root/tests/data/prof/costly.json" \
    -i "$v" --device cuda 2>&1 >/dev/null | head -3 || true)
  if [[ $line == *"running on the CPU"* ]]; then
    gpu=0
    say "tg: NO GPU: $line"
    say "    (the GPU cases skip: every test should still pass)"
  elif [ -n "$line" ]; then
    say "tg: --device cuda said: $line"
  else
    say "tg: --device cuda runs on the GPU"
  fi
  if command -v cc >/dev/null; then
    say "cc: $(command -v cc) ($(cc --version 2>/dev/null | head -1)); c++: $(command -v c++ || echo none)"
  else
    say "WARNING: no C compiler 'cc' on the PATH: composite kernels run in the interpreter and test_composite fails"
  fi
  say "python3: $(command -v python3 || echo none) $(python3 -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || true)"
  local jobs=${GPUKIT_JOBS:-$(nproc 2>/dev/null || echo 2)}
  [ -n "${GPUKIT_JOBS:-}" ] || [ "$jobs" -le 8 ] || jobs=8
  say "jobs: $jobs; budget: $(deadline) s left"

  local fails=0 passes=0 notrun=0 failed=()
  summary() { echo "$*" | tee -a "$rep/summary.txt"; }

  # ---- profile ----
  if [ "$what" = profile ]; then
    local nets=${GPUKIT_NETS:-alexnet,vgg} bsz=${GPUKIT_BATCH:-64} keep=$cache/nets net plog=$rep/profile.log mode
    : >"$plog"
    echo "== profile: $nets, batch $bsz (log: $plog)"
    # The graphs and data, from the benchmark (3 steps, no peer).
    (cd "$B/bench" && TG_BENCH_KEEP=$keep TG_BENCH_NETS=$nets TG_BENCH_PYTHON=false TG_CACHE_DIR=$cache/bench \
      timeout -k 10 "$(($(deadline) - 10))" "$B/bench/bench_cudnn_nets" 3) >>"$plog" 2>&1 || true
    for net in ${nets//,/ }; do
      for mode in --sync ""; do
        [ "$(deadline)" -gt 20 ] || break
        echo "===== tgprof $net batch $bsz ${mode:-(CUDA events)}" | tee -a "$plog"
        # shellcheck disable=SC2086 # mode is empty or one word
        (cd "$keep/$net" && TG_CACHE_DIR=$cache/bench timeout -k 10 "$(($(deadline) - 10))" "$B/tools/tgprof" \
          "$net.json" -i "x=x_$bsz.npy" -i "y=y_$bsz.npy" --device cuda $mode --calls 3 --top 25) >>"$plog" 2>&1 ||
          echo "tgprof failed: rc $?" | tee -a "$plog"
      done
    done
    summary "== profile: $((SECONDS - t0)) s; $(grep -c '^=====' "$plog") profiles in $plog"
    [ -n "${OUT:-}" ] || cat "$plog"
    return 0
  fi

  # ---- tests ----
  if [ "$what" != bench ]; then
    local tp=$SECONDS
    # The tool tests run /usr/bin/python3 with NumPy; on an image whose NumPy
    # lives in a virtual environment of the same Python, they get its
    # site-packages on PYTHONPATH; where /usr/bin/python3 is missing, a
    # wrapper for python3 is put there (root only).
    local toolpy=()
    if [ -x /usr/bin/python3 ]; then
      if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        local sp v1 v2
        sp=$(python3 -c 'import os, numpy; print(os.path.dirname(os.path.dirname(numpy.__file__)))' 2>/dev/null || true)
        v1=$(/usr/bin/python3 -c 'import sys; print(sys.version_info[:2])' 2>/dev/null || true)
        v2=$(python3 -c 'import sys; print(sys.version_info[:2])' 2>/dev/null || true)
        if [ -n "$sp" ] && [ "$v1" = "$v2" ] && PYTHONPATH=$sp /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
          toolpy=(PYTHONPATH="$sp${PYTHONPATH:+:$PYTHONPATH}")
          say "/usr/bin/python3 has no NumPy: the tool tests get PYTHONPATH=$sp (python3's)"
        else
          say "WARNING: /usr/bin/python3 has no NumPy (the tool tests need it) and python3's cannot be lent to it"
        fi
      fi
    elif [ "$(id -u)" = 0 ] && command -v python3 >/dev/null &&
      [ "$(readlink -f "$(command -v python3)")" != /usr/bin/python3 ]; then
      local py3
      py3=$(command -v python3)
      printf '#!/bin/sh\nexec %q "$@"\n' "$py3" >/usr/bin/python3
      chmod 755 /usr/bin/python3
      say "no /usr/bin/python3 (the tool tests use it): made it a wrapper for $py3"
    else
      say "WARNING: no /usr/bin/python3: the tool tests will fail"
    fi
    echo "== tests ($jobs at a time; logs: $logs/tests)"
    local -A job_name=() job_start=()
    local queue=() running=0
    # A job: NAME|KIND|ENV...|--|COMMAND...; all run in build/tests with
    # the environment tests/CMakeLists.txt gives ctest.
    local unit_env="CMOCKA_MESSAGE_OUTPUT=stdout OMP_NUM_THREADS=2 TG_CACHE_DIR=$cache/unit"
    local tool_env="TGC=$B/tools/tgc TGPROF=$B/tools/tgprof TGDEBUG=$B/tools/tgdebug TG_SRC=$root TG_BUILD_DIR=$B TG_TEST_DATA=$root/tests/data TG_CACHE_DIR=$cache/tools"
    # The GPU tests and the longest first.
    local first=(test_opdata test_cudnn test_cuda test_nvrtc test_gpuprof test_resident
      test_grad test_rop test_scan_grad test_grad_more) t
    for t in "${first[@]}"; do [ -x "$B/tests/$t" ] && queue+=("$t|$unit_env|$B/tests/$t"); done
    [ -x "$B/tests/test_opdata" ] && queue+=("test_opdata.cuda|$unit_env TG_DEVICE=cuda|$B/tests/test_opdata")
    for t in test_elemwise test_reduce; do
      [ -x "$B/tests/$t" ] && queue+=("$t.cuda|$unit_env TG_DEVICE=cuda|$B/tests/$t")
    done
    for t in gputools tgc_device tgc_dnn_algo; do
      queue+=("tools.$t|$tool_env ${toolpy[*]}|bash $root/tests/tools/$t.sh")
    done
    for p in "$B"/tests/test_*; do
      t=$(basename "$p")
      [[ " ${first[*]} " == *" $t "* ]] || queue+=("$t|$unit_env|$p")
    done

    finish() { # PID RC: report a finished job
      local name=${job_name[$1]} rc=$2 secs=$((SECONDS - job_start[$1])) log="$logs/tests/${job_name[$1]}.log" st extra
      unset "job_name[$1]"
      running=$((running - 1))
      # cmocka's counts (summed over its groups), and gputools' GPU line.
      extra=$(awk '/^\[==========\] .* run\./{r+=$2} /^\[  PASSED  \]/{p+=$4} /^\[  SKIPPED \] [0-9]+ test/{s+=$4}
        /^\[  FAILED  \] [0-9]+ test/{f+=$4} /^GPU: /{g=$0}
        END{o=""; if (r!="") o=r" run, "(p==""?0:p)" passed"; if (s!="") o=o", "s" skipped"; if (f!="") o=o", "f" failed";
        if (g!="") o=o (o==""?"":", ") g; print o}' "$log")
      case $rc in
        0) st=PASS; passes=$((passes + 1)) ;;
        124 | 137) st=TIMEOUT; fails=$((fails + 1)); failed+=("$name") ;;
        *) st=FAIL; fails=$((fails + 1)); failed+=("$name") ;;
      esac
      summary "$(printf '%-7s %-26s %4ds  rc=%-3s %s' "$st" "$name" "$secs" "$rc" "${extra:+($extra)}")"
      { echo "===== $name: $st, rc $rc, ${secs}s"; cat "$log"; echo; } >>"$rep/tests.log"
      if [ "$st" != PASS ]; then
        { grep -E '^\[  (FAILED|ERROR) |^FAIL|: (error|Error)|failure' "$log" | sed -n 1,15p | cut -c1-300 |
          sed 's/^/    | /'; } || true
        echo "    ---- last lines:"
        { tail -n 15 "$log" | cut -c1-300 | sed 's/^/    | /'; } || true
      fi
    }
    local job name envs cmd left pid rc
    for job in "${queue[@]}"; do
      [[ ${job%%|*} =~ ${GPUKIT_ONLY:-.} ]] || continue
      while [ "$running" -ge "$jobs" ]; do
        rc=0
        wait -n -p pid || rc=$?
        finish "$pid" "$rc"
      done
      IFS='|' read -r name envs cmd <<<"$job"
      left=$(($(deadline) - 20))
      if [ "$left" -lt 30 ]; then
        summary "$(printf '%-7s %-26s        out of time' NOTRUN "$name")"
        notrun=$((notrun + 1))
        failed+=("$name")
        continue
      fi
      [ "$left" -lt 300 ] || left=300
      # shellcheck disable=SC2086 # envs and cmd are word lists
      (cd "$B/tests" && exec env $envs timeout -k 10 "$left" $cmd) >"$logs/tests/$name.log" 2>&1 &
      job_name[$!]=$name
      job_start[$!]=$SECONDS
      running=$((running + 1))
    done
    while [ "$running" -gt 0 ]; do
      rc=0
      wait -n -p pid || rc=$?
      finish "$pid" "$rc"
    done
    summary "== tests: $((SECONDS - tp)) s"
  fi

  # ---- benchmarks ----
  if [ "$what" != tests ]; then
    local tb=$SECONDS b args tmo peer
    echo "== benchmarks (log: $rep/bench.log)"
    # The PyTorch peer runs through popen (a shell): without this script's
    # LD_LIBRARY_PATH (the kit's Debian libraries could clash with
    # PyTorch's), with the machine's own.
    if [ -n "${TG_BENCH_PYTHON:-}" ]; then
      peer=$TG_BENCH_PYTHON
    elif [ -n "$ldp_set" ]; then
      peer="env LD_LIBRARY_PATH=$(printf %q "$orig_ldp") $(command -v python3 || echo python3)"
    else
      peer="env -u LD_LIBRARY_PATH $(command -v python3 || echo python3)"
    fi
    echo "TG_BENCH_PYTHON=$peer" | tee -a "$rep/bench.log"
    local benches=()
    IFS=';' read -r -a benches <<<"${GPUKIT_BENCHES:-bench_cuda 200 150;bench_cudnn_nets 50 300}"
    for b in "${benches[@]}"; do
      # the benchmark, its STEPS, its timeout
      read -r -a args <<<"$b"
      tmo=${args[2]}
      set -- "${args[0]}" "${args[1]}"
      if [ ! -x "$B/bench/$1" ]; then
        summary "$(printf '%-7s %-26s        not in the kit' NOTRUN "$1")"
        notrun=$((notrun + 1)); failed+=("$1")
        continue
      fi
      left=$(($(deadline) - 10))
      [ "$left" -lt "$tmo" ] && tmo=$left
      if [ "$tmo" -lt 30 ]; then
        summary "$(printf '%-7s %-26s        out of time' NOTRUN "$1")"
        notrun=$((notrun + 1)); failed+=("$1")
        continue
      fi
      local tt=$SECONDS
      echo "===== $1 $2 (timeout ${tmo}s)" | tee -a "$rep/bench.log"
      rc=0
      (cd "$B/bench" && TG_BENCH_PYTHON=$peer TG_CACHE_DIR=$cache/bench PYTHONUNBUFFERED=1 \
        timeout -k 10 "$tmo" "$B/bench/$1" "$2") 2>&1 | tee -a "$rep/bench.log" || rc=$?
      case $rc in
        0) st=PASS; passes=$((passes + 1)) ;;
        124 | 137) st=TIMEOUT; fails=$((fails + 1)); failed+=("$1") ;;
        *) st=FAIL; fails=$((fails + 1)); failed+=("$1") ;;
      esac
      summary "$(printf '%-7s %-26s %4ds  rc=%s' "$st" "$1" "$((SECONDS - tt))" "$rc")"
    done
    summary "== benchmarks: $((SECONDS - tb)) s"
  fi

  # ---- the end ----
  if [ -n "${OUT:-}" ]; then
    tar -czf "$OUT/logs.tar.gz" -C "$logs" . 2>/dev/null || true
  fi
  echo
  cat "$env_txt"
  [ $gpu = 1 ] || summary "== NO GPU here: the GPU cases skipped (see env.txt)"
  [ ${#missing[@]} -eq 0 ] || summary "== WARNING: not found here: ${missing[*]}"
  local np="${failed[*]:0:15}"
  [ ${#failed[@]} -le 15 ] || np+=" ... and $((${#failed[@]} - 15)) more"
  summary "== $what: $passes passed, $fails failed, $notrun not run, in $((SECONDS - t0)) s${failed[0]:+; not passed: $np}"
  summary "logs: $rep: $(cd "$rep" && ls summary.txt env.txt tests.log bench.log logs.tar.gz 2>/dev/null | tr '\n' ' ')"
  [ $((fails + notrun)) -eq 0 ]
}

case "$mode" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
