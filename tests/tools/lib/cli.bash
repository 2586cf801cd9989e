#!/usr/bin/env bash
# Checks of the tools' command-line contract (DESIGN.md, "Tools"), for the
# tool tests that source it after making $tmp and $fails (not a test
# itself): exit 0 success, 1 a problem found, 2 bad usage or bad input,
# with ONE line on stderr.

# one_line STATUS PATTERN DESCRIPTION -- command...: the exit status, and
# exactly one line on stderr, matching PATTERN (grep -E). stdout is kept in
# $tmp/ol.out.
one_line() {
  local want=$1 pat=$2 what=$3
  shift 4
  "$@" >"$tmp/ol.out" 2>"$tmp/ol.err"
  local got=$? n
  n=$(wc -l <"$tmp/ol.err")
  if [ "$got" -eq "$want" ] && [ "$n" -eq 1 ] && grep -qE -- "$pat" "$tmp/ol.err"; then
    echo "ok: $what (exit $got: $(cat "$tmp/ol.err"))"
  else
    echo "FAIL: $what: exit $got (want $want), $n line(s) on stderr (want one matching $pat)"
    sed 's/^/  | /' "$tmp/ol.err" | head -5
    fails=$((fails + 1))
  fi
}

# keep FILE: a copy to compare with later (unchanged FILE DESCRIPTION).
keep() { cp -p -- "$1" "$1.kept"; }
unchanged() {
  if cmp -s -- "$1" "$1.kept"; then echo "ok: $2"; else
    echo "FAIL: $2: $1 was written"; fails=$((fails + 1)); cp -p -- "$1.kept" "$1"; fi
}
# absent PATH DESCRIPTION
absent() {
  if [ ! -e "$1" ]; then echo "ok: $2"; else echo "FAIL: $2: $1 exists"; fails=$((fails + 1)); rm -rf -- "$1"; fi
}
