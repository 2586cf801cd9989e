#!/usr/bin/env bash
# tgdebug serve at the edges of HTTP, over raw sockets: a NUL byte in the
# request line, more than one Host or Content-Length, the .npy download's
# name for a long key, the error messages, slices NumPy reads, and an
# in-place node's inputs as it read them. The server's main test is
# tgdebug_serve.sh; this one is quick (no load test, no browser).
set -uo pipefail
: "${TGDEBUG:?}" "${TG_SRC:?}"
source "$TG_SRC/tests/tools/lib/checks.bash"
source "$TG_SRC/tests/tools/lib/serve.bash"
stop() { kill -TERM "$pid"; wait "$pid"; check '[ $? = 0 ]' "$1: SIGTERM, exit 0"; }
H() { echo "X-Tgdebug-Token: $tok"; }
# code PATH [curl args]: the HTTP status; the body in $tmp/body.
code() { curl -s --path-as-is -o "$tmp/body" -w '%{http_code}' "$base$1" -H "$(H)" "${@:2}"; }
state() { curl -s -H "$(H)" "$base/api/state" >"$tmp/j"; }
py() { python3 -c "import json,sys; d=json.load(open('$tmp/j')); print($1)"; }
wait_state() {
  for _ in $(seq 1 300); do
    state
    [ "$(py "d['state']")" = "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
# raw LINE [HEADER...]: send the request line (printf escapes: \x00) and the
# headers, with the token, a good Host and Connection: close; print the
# reply's status and keep its body in $tmp/body ("closed" if none came).
raw() {
  local line=$1
  shift
  local req="$line\r\nHost: 127.0.0.1:$port\r\nX-Tgdebug-Token: $tok\r\nConnection: close\r\n"
  for h in "$@"; do req+="$h\r\n"; done
  printf "$req\r\n" | python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.stdin.buffer.read())
buf = b""
try:
    while True:
        c = s.recv(65536)
        if not c: break
        buf += c
except OSError:
    pass
head, _, body = buf.partition(b"\r\n\r\n")
open(sys.argv[2], "wb").write(body)
print(head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "closed")
' "$port" "$tmp/body"
}

# ==== bp.json paused after 'scaled' (sc = x * 1 = [[1,-2,3],[-4,5,-6]]) ====
start main "$TG_SRC/tests/data/debug/bp.json" -i x='[[1,-2,3],[-4,5,-6]]' --calls 2 --break scaled
check 'wait_state paused' "paused at sc"

# ---- a raw NUL in the request line: 400, never the route it would cut to ----
check '[ "$(raw "GET /api/state HTTP/1.1")" = 200 ]' "GET /api/state over the raw socket: 200"
c=$(raw "GET /api/state\x00junk HTTP/1.1")
check '[ "$c" = 400 ] && grep -q "^{\"error\":\"the request line holds a NUL byte\"}$" "$tmp/body"' "GET /api/state<NUL>junk: $c ($(head -c 200 "$tmp/body"))"
check '[ "$(raw "GET /api/state?x=1\x00 HTTP/1.1")" = 400 ]' "a NUL in the query: 400"
check '[ "$(raw "POST /api/stop\x00x HTTP/1.1")" = 400 ]' "POST /api/stop<NUL>x: 400"
check 'state; [ "$(py "d[\"state\"], d[\"stopped\"]")" = "paused False" ]' "and the run was not stopped"
check '[ "$(raw "GET /api/state?token=$tok HTTP/1.1")" = 200 ]' "a request with a query and no NUL: 200"

# ---- RFC 9112: more than one Host or Content-Length is 400 ----
# (the raw request's own Host is 127.0.0.1:PORT: a second one follows)
c=$(raw "GET /api/state HTTP/1.1" "Host: evil.example")
check '[ "$c" = 400 ] && grep -q "more than one Host header" "$tmp/body"' "a second Host (evil.example): $c ($(cat "$tmp/body"))"
c=$(raw "GET /api/state HTTP/1.1" "Host: 127.0.0.1:$port")
check '[ "$c" = 400 ]' "the same Host twice: $c"
state
pauses=$(py "d['pauses']")
c=$(raw "POST /api/step HTTP/1.1" "Content-Length: 1" "Content-Length: 2")
check '[ "$c" = 400 ] && grep -q "more than one Content-Length header" "$tmp/body"' "Content-Length 1 and 2 on a POST: $c ($(cat "$tmp/body"))"
sleep 0.3
check 'state; [ "$(py "d[\"pauses\"], d[\"node\"][\"key\"]")" = "$pauses sc" ]' "and the run did not step"
check '[ "$(raw "GET /api/state HTTP/1.1" "Content-Length: 0")" = 200 ]' "one Host and one Content-Length: 200"

# ---- error messages: the real reason, in valid UTF-8 JSON ----
# utf8 FILE: the body parses as JSON from its bytes (UTF-8 checked); print its error.
utf8() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'))['error'])" "$1" 2>&1; }
# says PATH STATUS MESSAGE [curl args]: the reply is STATUS with exactly
# that error, in valid UTF-8 JSON.
says() {
  local c m
  c=$(code "$1" "${@:4}")
  m=$(utf8 "$tmp/body")
  if [ "$c" = "$2" ] && [ "$m" = "$3" ]; then pass "$1: $c $m"; else fail "$1: $c '$m', want $2 '$3'"; fi
}
says "/api/value?node=sc&out=1001" 400 "value: node sc has 1 output"
says "/api/value?node=sc&out=1" 400 "value: node sc has 1 output"
says "/api/value?node=sc&in=2" 400 "value: node sc has 2 inputs"
says "/api/value?node=sc&out=-1" 400 "value: out=-1: expected an index >= 0"
# A Host of 63 a's and an e-acute (2 bytes): cut at 64 bytes, the e-acute
# would be cut in two; it is left out whole.
a=$(printf 'a%.0s' $(seq 1 63))
says /api/state 403 "forbidden: Host '$a' is not this server (use http://127.0.0.1:$port/)" -H "Host: ${a}é"
says /api/state 403 "forbidden: Host '${a:0:61}é' is not this server (use http://127.0.0.1:$port/)" -H "Host: ${a:0:61}éé"
says /api/state 403 "forbidden: Host '${a:0:60}éé' is not this server (use http://127.0.0.1:$port/)" -H "Host: ${a:0:60}éé"
# Bytes that are not UTF-8 (a stray byte, a sequence cut short) are '?'.
says "/api/value?node=%ff%c3" 404 "value: function 'main' has no scheduled node '??'"
says "/api/value?node=%c3%a9" 404 "value: function 'main' has no scheduled node 'é'"

# ---- slices as NumPy reads them: sc = [[1,-2,3],[-4,5,-6]] ----
# value SLICE: the data of sc[SLICE] (or the error) as compact JSON.
value() {
  curl -s -H "$(H)" "$base/api/value?node=sc&slice=$1" >"$tmp/j"
  py "json.dumps(d.get('data', d.get('error')), separators=(',', ':'))"
}
check '[ "$(value "1,")" = "[-4,5,-6]" ]' "slice '1,' is sc[1,] = sc[1] = [-4,5,-6]"
check '[ "$(value "1,%20")" = "[-4,5,-6]" ]' "slice '1, ' is sc[1, ] = [-4,5,-6]"
check '[ "$(value "::-1,")" = "[[-4,5,-6],[1,-2,3]]" ]' "slice '::-1,' is sc[::-1,] (rows reversed)"
check '[ "$(value "0,1,")" = "-2" ]' "slice '0,1,' is sc[0,1,] = -2"
check '[ "$(value "%20%20")" = "[[1,-2,3],[-4,5,-6]]" ]' "a slice of spaces is the whole value, as an empty one"
for bad in "," ",1" "1,," "1,%20," "0,1,,"; do
  c=$(code "/api/value?node=sc&slice=$bad")
  check '[ "$c" = 400 ]' "slice '$bad' (a syntax error in NumPy): $c $(cat "$tmp/body")"
done
check '[ "$(code "/api/value?node=sc&slice=0,1,2,")" = 400 ] && grep -q "too many indices" "$tmp/body"' "slice '0,1,2,': too many indices, the trailing comma or not"

# ---- libmicrohttpd's own answers (docs: as the library writes them) echo
# nothing of the request; the server's own carry its headers ----
mark=tgdebugMARK
long=$(printf "$mark%.0s" $(seq 1 3000))
c=$(raw "GET /$long HTTP/1.1")
check '[ "$c" = 414 ] && ! grep -q "$mark" "$tmp/body"' "a 36 kB URL: $c from libmicrohttpd, nothing of it echoed"
c=$(raw "GET /api/state HTTP/1.1" "X-$mark: $long")
check '[ "$c" = 431 ] && ! grep -q "$mark" "$tmp/body"' "a 36 kB header: $c, nothing of it echoed"
c=$(raw "GET /$mark HTTP/2.0")
check '[ "$c" = 505 ] && ! grep -q "$mark" "$tmp/body"' "HTTP/2.0: $c, nothing of it echoed"
curl -s -D "$tmp/hdr" -o /dev/null -H "$(H)" "$base/$mark"
check 'grep -qi "^X-Content-Type-Options: nosniff" "$tmp/hdr" && grep -qi "^Cache-Control: no-store" "$tmp/hdr" && grep -qi "^Content-Type: application/json" "$tmp/hdr"' \
  "the server's own 404 carries nosniff, no-store and its JSON type"

stop main

# ==== a failed run: the messages say so ====
start fails "$TG_SRC/tests/data/debug/bp.json" -f fails -i x='[[1,-2,3],[-4,5,-6]]'
check 'wait_state error' "the run failed (an assert)"
says /api/continue 409 "continue: the run failed" -X POST
says "/api/value?node=m_checked" 409 "value: the run failed: values are served while it is paused"
stop fails

# ==== a .npy download keeps _outJ / _inJ whatever the key's length ====
# exp(x) whose output is a valid id of 128 characters: 125 k's and ':ab'.
key=$(printf 'k%.0s' $(seq 1 125)):ab
printf '{"format":"tg-graph","version":1,"variables":[{"id":"x","type":{"dtype":"float64","shape":[2]}}],
 "nodes":[{"op":"exp","inputs":["x"],"outputs":["%s"]}],"functions":{"main":{"inputs":["x"],"outputs":["%s"]}}}' \
  "$key" "$key" >"$tmp/longkey.json"
start long "$tmp/longkey.json" -i x='[1,2]' --break "$key" -O none
check 'wait_state paused' "paused at the 128-character key"
fkey=$(printf 'k%.0s' $(seq 1 125))_ab
for io in out in; do
  curl -s -D "$tmp/hdr" -o /dev/null -H "$(H)" "$base/api/value.npy?node=$key&${io}=0"
  check 'grep -qi "^Content-Disposition: attachment; filename=\"${fkey}_${io}0.npy\"" "$tmp/hdr"' \
    "${io}=0 downloads as KEY_${io}0.npy ($(grep -io "filename=.*" "$tmp/hdr" | cut -c1-20)...$(grep -io "filename=.*" "$tmp/hdr" | tail -c 16))"
done
stop long

# ==== an in-place node's inputs as it read them, not the buffer it wrote ====
# s = sum(x, axis=1) of ones (3, 4) is [4, 4, 4]; fast_run fuses n = -s and
# e = exp(n) into one composite that writes exp(-4) = 0.018315638888734179
# over s's buffer. A pause after e shows s = [4, 4, 4] (the state, the value,
# the .npy), as a --when on in0 sees it; reached by a breakpoint or a step.
printf '{"format":"tg-graph","version":1,"variables":[{"id":"x","type":{"dtype":"float64","shape":[null,null]}}],
 "nodes":[{"op":"sum","inputs":["x"],"outputs":["s"],"attrs":{"axis":1}},{"op":"neg","inputs":["s"],"outputs":["n"],
   "trace":[{"file":"model.py","line":7,"code":"n = -s"}]},
  {"op":"exp","inputs":["n"],"outputs":["e"]},{"op":"mean","inputs":["e"],"outputs":["m"]}],
 "functions":{"main":{"inputs":["x"],"outputs":["m"]}}}' >"$tmp/inplace.json"
ones='[[1,1,1,1],[1,1,1,1],[1,1,1,1]]'
# in0_shown: in0's id, min and max in the state, its value, and its .npy's
# data (parsed by hand: NumPy may be missing), as one line.
in0_shown() {
  state
  local st
  st=$(py "[(v['id'], v['min'], v['max']) for v in d['values'] if v['name'] == 'in0']")
  curl -s -H "$(H)" "$base/api/value?node=e&in=0" >"$tmp/j"
  curl -s -H "$(H)" "$base/api/value.npy?node=e&in=0" -o "$tmp/in0.npy"
  echo "$st $(py "d.get('data', d.get('error'))") $(python3 -c "
import struct, sys
b = open(sys.argv[1], 'rb').read()
h = 10 + struct.unpack('<H', b[8:10])[0]
print(list(struct.unpack('<%dd' % ((len(b) - h) // 8), b[h:])))" "$tmp/in0.npy")"
}
want="[('s', 4.0, 4.0)] [4, 4, 4] [4.0, 4.0, 4.0]"
start inpl "$tmp/inplace.json" -i x="$ones" --break e
check 'wait_state paused' "paused after e, the composite of n and e"
curl -s -H "$(H)" "$base/api/profile" >"$tmp/j"
kinds=$(py "' '.join(o['kind'] + ':' + str(o.get('of')) for f in d['functions'] for n in f['nodes'] if n['key'] == 'e' for o in n['outputs'])")
check '[ "$kinds" = inplace:s ]' "e runs in place over s (the profile's outputs of e: $kinds)"
curl -s -H "$(H)" "$base/api/value?node=e&out=0" >"$tmp/j"
check '[ "$(py "d[\"data\"]")" = "[0.01831563888873418, 0.01831563888873418, 0.01831563888873418]" ]' "x0 is exp(-4) = 0.0183156388887342"
got=$(in0_shown)
check '[ "$got" = "$want" ]' "in0 after the breakpoint is s as e read it: $got"
# the graph page: the composite's body node for n stands for n, with n's trace
curl -s -H "$(H)" "$base/api/graph" >"$tmp/j"
fz=$(py "[(k, v['origins'], [(t['file'], t['line']) for t in v.get('trace', [])] == [('model.py', 7)]) for n in d['views']['optimized']['nodes'] if n.get('fused') for k, v in sorted(n['fused'].items())]")
check 'grep -q "\[.n.\], True" <<<"$fz"' "the page's fused body node for n carries n's trace: $fz"
stop inpl
start inplstep "$tmp/inplace.json" -i x="$ones" --break s
check 'wait_state paused' "paused after s"
check '[ "$(code /api/step -X POST)" = 200 ]' "step from s"
for _ in $(seq 1 100); do state; [ "$(py "d['pauses']")" -gt 1 ] && break; sleep 0.1; done
check '[ "$(py "d[\"reason\"], d[\"node\"][\"key\"]")" = "step e" ]' "the step pauses after e"
got=$(in0_shown)
check '[ "$got" = "$want" ]' "in0 after the step is s as e read it: $got"
stop inplstep

check '! grep -l "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$tmp"/*.err' "no sanitizer report from any server"
echo "$fails failed"
[ "$fails" -eq 0 ]
