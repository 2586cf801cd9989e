#!/usr/bin/env bash
# Helpers the tgdebug serve tests share (sourced after checks.bash; not a
# test itself): check, the servers started (killed on exit with $tmp), and
# start.
check() { if eval "$1"; then pass "$2"; else fail "$2"; fi; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

# start NAME ARGS...: start a server, wait for its URL; sets $pid, $base
# (http://127.0.0.1:PORT), $port, $tok.
start() {
  local name=$1
  shift
  "$TGDEBUG" serve "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 600); do
    grep -q 'http://' "$tmp/$name.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  local url
  url=$(grep -o 'http://[^ ]*' "$tmp/$name.out")
  tok=${url##*token=}
  base=${url%/\?token=*}
  port=${base##*:}
  [ -n "$url" ] || { fail "$name: the server printed no URL"; sed 's/^/  | /' "$tmp/$name.err"; }
}
