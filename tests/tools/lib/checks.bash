#!/usr/bin/env bash
# Helpers the tool tests share (sourced; not a test itself): a temporary
# folder removed on exit, pass/fail counting, and checks on a command's
# exit status and output.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }
# expect STATUS DESCRIPTION -- command...: runs it, checks the exit status,
# keeps stdout in $tmp/out and stderr in $tmp/err.
expect() {
  local want=$1 what=$2; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -eq "$want" ]; then pass "$what (exit $got)"; else
    fail "$what: exit $got, want $want"; sed 's/^/  | /' "$tmp/err"; fi
}
# contains out|err PATTERN DESCRIPTION
contains() { if grep -q -- "$2" "$tmp/$1"; then pass "$3"; else fail "$3: '$2' not in $1"; sed 's/^/  | /' "$tmp/$1"; fi; }
