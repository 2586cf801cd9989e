#!/usr/bin/env bash
# The dynamic loader never looks in the current directory for tg's
# libraries: no RPATH/RUNPATH element of a built program or library is
# empty or relative (an empty element is the current directory), and tgc
# run from a folder that holds a bogus copy of each library it needs
# still starts.
set -euo pipefail
build=${TG_BUILD_DIR:?}
tgc=${TGC:?}
command -v readelf >/dev/null || { echo "FAIL: readelf (binutils) not found"; exit 1; }
dirs=()
for d in tools tests bench libcore; do [ -d "$build/$d" ] && dirs+=("$build/$d"); done
n=0
while IFS= read -r f; do
  head -c 4 "$f" 2>/dev/null | grep -q ELF || continue
  n=$((n + 1))
  paths=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p')
  [ -n "$paths" ] || continue
  rest=$paths:
  while [ -n "$rest" ]; do
    p=${rest%%:*}
    rest=${rest#*:}
    case "$p" in
      /* | '$ORIGIN'*) ;;
      *) echo "FAIL: $f: run-time search path '$paths' has an element '$p' that is empty or relative"; exit 1 ;;
    esac
  done
done < <(find "${dirs[@]}" -maxdepth 1 -type f \
  \( -perm -u+x -o -name 'lib*.so*' \))
[ "$n" -gt 0 ] || { echo "FAIL: no ELF files found under $build"; exit 1; }
echo "ok: $n programs and libraries, no empty or relative search path"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
needed=$(readelf -d "$tgc" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
[ -n "$needed" ] || { echo "FAIL: no NEEDED entries read from $tgc"; exit 1; }
for lib in $needed; do
  [[ $lib == */* ]] && continue
  echo "not a library" >"$dir/$lib"
done
(cd "$dir" && "$tgc" --version >/dev/null 2>"$dir/err") || {
  echo "FAIL: tgc did not start from a folder holding bogus libraries:"
  cat "$dir/err"
  exit 1
}
echo "ok: tgc ignores the bogus $(echo $needed | wc -w) libraries in the current folder"
