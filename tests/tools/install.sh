#!/usr/bin/env bash
# cmake --install puts headers, libraries, tg.pc, the CMake package and the
# tools under a prefix; a program outside the tree builds against it both
# ways (pkg-config and find_package) and runs.
set -euo pipefail
build=${TG_BUILD_DIR:?}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/tg/tg.h include/tg/array.h include/tg/debug.h bin/tgc bin/tgdebug; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
libdir=$(find "$prefix" -name tg.pc -printf '%h\n' | head -1)
[ -n "$libdir" ] || { echo "FAIL: tg.pc not installed"; exit 1; }
echo "ok: installed headers, tg.pc, tgc"
# pkg-config
export PKG_CONFIG_PATH="$libdir"
cc -o "$prefix/consumer_pc" "$TG_SRC/tests/install/consumer.c" $(pkg-config --cflags --libs tg)
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64:$(dirname "$libdir")" "$prefix/consumer_pc"
echo "ok: pkg-config consumer"
# The static library through pkg-config --static (with CUDA, tg.pc's
# Libs.private must bring the CUDA runtime, cuDNN and the C++ runtime)
libs=$(pkg-config --static --libs tg)
libs=${libs/-ltg /}
a=$(find "$prefix" -name libtg.a | head -1)
cc -o "$prefix/consumer_static" "$TG_SRC/tests/install/consumer.c" $(pkg-config --cflags tg) "$a" $libs
"$prefix/consumer_static"
echo "ok: pkg-config --static consumer"
# CMake package
cmake -S "$TG_SRC/tests/install" -B "$prefix/cb" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cb" >/dev/null
"$prefix/cb/consumer"
echo "ok: find_package consumer"
# Where the build linked OpenBLAS's OpenMP build (CMakeLists.txt), the
# installed tools and both consumers load it too (a RUNPATH of its folder,
# before Debian's alternatives, which would give the pthreads build).
# (ldd's output in a variable first: grep -q closing the pipe early is a
# failure under pipefail)
deps=$(ldd "$build/tools/tgc")
if grep -q "openblas-openmp/libopenblas" <<<"$deps"; then
  for b in "$prefix/bin/tgc" "$prefix/consumer_pc" "$prefix/cb/consumer"; do
    deps=$(LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64:$(dirname "$libdir")" ldd "$b")
    grep -q "openblas-openmp/libopenblas" <<<"$deps" || { echo "FAIL: $b does not load OpenBLAS's OpenMP build"; exit 1; }
  done
  echo "ok: the installed tgc and both consumers load OpenBLAS's OpenMP build"
fi
