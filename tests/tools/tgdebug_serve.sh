#!/usr/bin/env bash
# tgdebug serve: the token (none, wrong, right: 403, 403, 200; the cookie
# and the header carry it too); the bind address (127.0.0.1 only unless
# --bind 0.0.0.0); path traversal and unknown routes 404; oversized and
# malformed requests (raw sockets) 4xx with the server still up; value
# slices checked against numbers worked out by hand; continue, step, stop;
# the profile validates against schemas/profile.schema.json; a failed
# assert is shown as the run's error; 30 seconds of wrk on the state and
# value endpoints with no error; SIGINT and SIGTERM end it cleanly (exit 0).
# Then the browser test (tests/browser/tgdebug.test.js) when chromium and
# node are installed. Screenshots: $TG_BUILD_DIR/tests/artifacts/.
set -uo pipefail
: "${TGDEBUG:?}" "${TG_SRC:?}" "${TG_BUILD_DIR:?}"
source "$TG_SRC/tests/tools/lib/checks.bash"
source "$TG_SRC/tests/tools/lib/serve.bash"
bp="$TG_SRC/tests/data/debug/bp.json"
X='[[1,-2,3],[-4,5,-6]]'
# code URL [curl args]: the HTTP status.
code() { curl -s --path-as-is -o "$tmp/body" -w '%{http_code}' "$@"; }
H() { echo "X-Tgdebug-Token: $tok"; }
get() { curl -s -H "$(H)" "$base$1"; }
post() { curl -s -X POST -H "$(H)" "$base$1" -o "$tmp/post" -w '%{http_code}'; }
# jq-less JSON reads: py EXPR on the JSON in $tmp/j (as `d`).
py() { python3 -c "import json,sys; d=json.load(open('$tmp/j')); print($1)"; }
state() { get /api/state >"$tmp/j"; }
# wait_state STATE [NODE]: poll until the run is in STATE (at NODE).
wait_state() {
  for _ in $(seq 1 300); do
    state
    if [ "$(py "d['state']")" = "$1" ] && { [ -z "${2:-}" ] || [ "$(py "(d['node'] or {}).get('key')")" = "$2" ]; }; then return 0; fi
    sleep 0.1
  done
  return 1
}
value() { get "/api/value?$1" >"$tmp/j"; py "json.dumps(d.get('data', d.get('error')), separators=(',', ':'))"; }
# raw HOST PORT: send stdin's bytes on a socket, print the status code of
# the reply (or "closed").
raw() {
  python3 -c '
import socket, sys
data = sys.stdin.buffer.read()
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
try:
    s.sendall(data)
except OSError:
    pass
buf = b""
try:
    while b"\r\n" not in buf:
        c = s.recv(4096)
        if not c: break
        buf += c
except OSError:
    pass
s.close()
print(buf.split(b" ")[1].decode() if buf.startswith(b"HTTP/") else "closed")
' "$1" "$2"
}

expect 0 "serve --help" -- "$TGDEBUG" serve --help
contains out "--bind ADDR" "serve --help describes --bind"
expect 2 "--bind with a name" -- "$TGDEBUG" serve "$bp" -i x="$X" --bind localhost
expect 2 "--port out of range" -- "$TGDEBUG" serve "$bp" -i x="$X" --port 70000
expect 2 "a missing input" -- "$TGDEBUG" serve "$bp"

# ==== one server, paused at 'scaled' (sc = x * k) ====
start main "$bp" -i x="$X" --calls 3 --break scaled
check '[ ${#tok} -eq 32 ] && [[ $tok =~ ^[0-9a-f]+$ ]]' "the token is 128 bits in hex ($tok)"

# ---- the token ----
check '[ "$(code "$base/api/state")" = 403 ]' "no token: 403"
check '[ "$(code "$base/api/state?token=0123456789abcdef0123456789abcdef")" = 403 ]' "a wrong token: 403"
check '[ "$(code "$base/api/state?token=${tok:0:31}")" = 403 ]' "a token one character short: 403"
check '[ "$(code "$base/api/state?token=${tok}0")" = 403 ]' "a token one character long: 403"
check '[ "$(code "$base/api/state" -H "X-Tgdebug-Token: ${tok^^}")" = 403 ]' "the token in upper case: 403"
check '[ "$(code "$base/nothere")" = 403 ]' "no token on an unknown path: 403 (nothing revealed)"
check '[ "$(code "$base/api/state?token=$tok")" = 200 ]' "the right token: 200"
check '[ "$(code "$base/api/state" -H "$(H)")" = 200 ]' "the token as X-Tgdebug-Token: 200"
check '[ "$(code "$base/api/state" -H "Cookie: tgdebug_token_$port=$tok")" = 200 ]' "the token as the cookie named after the port: 200"
# Cookies are per host, not per port: one name for every server would let
# a second tgdebug serve's page replace the first's cookie.
check '[ "$(code "$base/api/state" -H "Cookie: tgdebug_token=$tok")" = 403 ]' "the token in a cookie not named after this port: 403"
curl -s -D "$tmp/hdr" -o /dev/null "$base/?token=$tok"
check 'grep -qi "^Set-Cookie: tgdebug_token_$port=$tok; Path=/; HttpOnly; SameSite=Strict" "$tmp/hdr"' "?token= sets an HttpOnly SameSite=Strict cookie named after the port"
# DNS rebinding: bound to 127.0.0.1, only Host 127.0.0.1 or localhost (our
# port or none); a POST from another origin is refused before any route.
check '[ "$(code "$base/api/state" -H "$(H)" -H "Host: evil.example:$port")" = 403 ] && grep -q "Host .evil.example:$port. is not this server" "$tmp/body"' "Host evil.example: 403"
check '[ "$(code "$base/api/state" -H "$(H)" -H "Host: 127.0.0.1:1")" = 403 ]' "Host with another port: 403"
check '[ "$(code "$base/api/state" -H "$(H)" -H "Host: LOCALHOST:$port")" = 200 ] && [ "$(code "$base/api/state" -H "$(H)" -H "Host: 127.0.0.1")" = 200 ]' "Host localhost:PORT and 127.0.0.1: 200"
check '[ "$(printf "GET /api/state HTTP/1.0\r\nX-Tgdebug-Token: %s\r\n\r\n" "$tok" | raw 127.0.0.1 "$port")" = 200 ]' "HTTP/1.0 without Host: 200 (browsers always send one)"
check '[ "$(code -X POST "$base/api/stop" -H "$(H)" -H "Origin: http://evil.example")" = 403 ] && grep -q "another origin" "$tmp/body"' "a POST from another origin: 403"
check '[ "$(code -X POST "$base/api/stop" -H "$(H)" -H "Origin: null")" = 403 ]' "a POST from Origin null: 403"
check '[ "$(code -X POST "$base/api/state" -H "$(H)" -H "Origin: $base")" = 405 ]' "a POST from the page's own origin gets to the route (405 on a read route)"
check 'grep -qi "^Content-Security-Policy: default-src .none." "$tmp/hdr"' "the page has a Content-Security-Policy"
check 'grep -qi "^Referrer-Policy: no-referrer" "$tmp/hdr"' "no Referer carries the token away"

# ---- the bind address ----
if command -v ss >/dev/null; then
  ss -ltnH "sport = :$port" >"$tmp/ss"
  check 'grep -q "127.0.0.1:$port" "$tmp/ss" && [ "$(wc -l <"$tmp/ss")" -eq 1 ]' "listens on 127.0.0.1:$port only (ss: $(awk '{print $4}' "$tmp/ss" | tr '\n' ' '))"
fi
check '[ "$(code --connect-timeout 3 "http://127.0.0.2:$port/api/state" -H "$(H)")" = 000 ]' "127.0.0.2 cannot connect to a server bound to 127.0.0.1"

# ---- routes: a fixed set; traversal is 404 ----
for p in /../etc/passwd /%2e%2e/%2e%2e/etc/passwd /..%2fetc%2fpasswd /etc/passwd //etc/passwd /web/tgdebug.js \
  /tgdebug.html /api/../api/state /api/state/ /api /index.html/.. "/%00"; do
  c=$(code "$base$p" -H "$(H)")
  check '[ "$c" = 404 ] || [ "$c" = 400 ]' "GET $p: $c"
  check '! grep -q "root:" "$tmp/body"' "GET $p shows no file"
done
check '[ "$(printf "GET http://127.0.0.1:%s/etc/passwd HTTP/1.1\r\nHost: localhost\r\nX-Tgdebug-Token: %s\r\n\r\n" "$port" "$tok" | raw 127.0.0.1 "$port")" = 404 ]' "an absolute URI: 404"
check '[ "$(code "$base/api/continue" -H "$(H)" -D "$tmp/hdr")" = 405 ] && grep -qi "^Allow: POST" "$tmp/hdr"' "GET on a control route: 405, Allow: POST"
check '[ "$(code -X POST "$base/api/state" -H "$(H)" -D "$tmp/hdr")" = 405 ] && grep -qi "^Allow: GET, HEAD" "$tmp/hdr" && grep -q "POST is not allowed on /api/state (only GET, HEAD)" "$tmp/body"' "POST on a read route: 405, Allow: GET, HEAD"
check '[ "$(code -X DELETE "$base/" -H "$(H)")" = 405 ]' "DELETE: 405"
for p in / /tgdebug.js /tgdebug.css /d3.js /graph /api/graph /api/profile; do
  check '[ "$(code "$base$p" -H "$(H)")" = 200 ]' "GET $p: 200"
done
get /graph >"$tmp/graph.html"
check 'grep -q "tgviz-data" "$tmp/graph.html" && grep -q "\"a:sc\"" "$tmp/graph.html"' "/graph is tgviz's page with the function's nodes"
check '! grep -q "https\?://" <(get / ; get /tgdebug.js)' "the debugger page fetches nothing from the network"

# ---- oversized and malformed requests: 4xx, and the server stays up ----
long=$(head -c 100000 /dev/zero | tr '\0' a)
c=$(printf "GET /api/state?x=%s HTTP/1.1\r\nHost: localhost\r\nX-Tgdebug-Token: %s\r\n\r\n" "$long" "$tok" | raw 127.0.0.1 "$port")
check '[[ $c =~ ^(400|413|414|431)$ ]]' "a 100 kB URL: $c"
c=$(printf "GET /api/state HTTP/1.1\r\nHost: localhost\r\nX-Big: %s\r\nX-Tgdebug-Token: %s\r\n\r\n" "$long" "$tok" | raw 127.0.0.1 "$port")
check '[[ $c =~ ^(400|413|431)$ ]]' "a 100 kB header: $c"
c=$(code "$base/api/value?node=sc&slice=$(head -c 300 /dev/zero | tr '\0' 1)" -H "$(H)")
check '[ "$c" = 400 ]' "a 300-character query value: $c"
head -c 1000000 /dev/zero >"$tmp/mb"
# The server answers 413 from the headers alone and closes. A client that
# sends the body meanwhile may meet the closed connection instead of the
# answer (000, seen on a loaded machine). curl 7.88 asks "Expect:
# 100-continue" only above 1 MiB: asked for here, with a wait of up to 60 s
# (default 1 s), the body is never sent.
c=$(code -H "Expect: 100-continue" --expect100-timeout 60 -X POST --data-binary @"$tmp/mb" "$base/api/stop" -H "$(H)")
check '[ "$c" = 413 ]' "a 1 MB body: $c"
c=$(printf "POST /api/stop HTTP/1.1\r\nHost: localhost\r\nX-Tgdebug-Token: %s\r\nTransfer-Encoding: chunked\r\n\r\n1400\r\n%s\r\n0\r\n\r\n" "$tok" "${long:0:5120}" | raw 127.0.0.1 "$port")
check '[ "$c" = 413 ]' "a 5 kB chunked body: $c"
c=$(printf "GARBAGE\r\n\r\n" | raw 127.0.0.1 "$port")
check '[[ $c =~ ^(400|closed)$ ]]' "a request line that is not HTTP: $c"
c=$(printf "GET /api/state HTTP/1.1\r\nX-Tgdebug-Token: %s\r\n\r\n" "$tok" | raw 127.0.0.1 "$port")
check '[ "$c" = 400 ]' "HTTP/1.1 without Host: $c"
c=$(printf "GET /api/state HTTP/7.0\r\nHost: localhost\r\n\r\n" | raw 127.0.0.1 "$port")
check '[[ $c =~ ^(400|505)$ ]]' "an unknown HTTP version: $c"
c=$(printf "GET /api/state HTTP/1.1\r\nHost: localhost\r\nContent-Length: banana\r\nX-Tgdebug-Token: %s\r\n\r\n" "$tok" | raw 127.0.0.1 "$port")
check '[[ $c =~ ^(400|413)$ ]]' "a Content-Length that is not a number: $c"
for i in $(seq 1 20); do printf "GET /api/sta" | raw 127.0.0.1 "$port" >/dev/null & done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
check '[ "$(code "$base/api/state" -H "$(H)")" = 200 ] && kill -0 $pid' "after all of that the server still answers"

# ---- where it is paused, and slices of sc = x * 1 = [[1, -2, 3], [-4, 5, -6]] ----
check 'wait_state paused sc' "paused after sc at call 1"
check '[ "$(py "d[\"reason\"], d[\"when\"], d[\"call\"]")" = "--break scaled after 1" ]' "the reason, when and call of the pause"
check '[ "$(py "d[\"node\"][\"trace\"]")" = "at model.py:5 in build: sc = x * k" ]' "the paused node's creation trace"
check '[ "$(py "d[\"values\"][0][\"name\"], d[\"values\"][0][\"min\"], d[\"values\"][0][\"max\"], d[\"values\"][0][\"mean\"]")" = "x0 -6.0 5.0 -0.5" ]' "x0's statistics: min -6, max 5, mean -0.5"
check '[ "$(value "node=sc&out=0")" = "[[1,-2,3],[-4,5,-6]]" ]' "the whole value"
check '[ "$(value "node=sc&slice=1,::-1")" = "[-6,5,-4]" ]' "slice 1,::-1 = [-6, 5, -4]"
check '[ "$(value "node=sc&slice=0")" = "[1,-2,3]" ]' "slice 0 = [1, -2, 3]"
check '[ "$(value "node=sc&slice=:,1")" = "[-2,5]" ]' "slice :,1 = [-2, 5]"
check '[ "$(value "node=sc&slice=-1,-1")" = "-6" ]' "slice -1,-1 = -6 (a scalar)"
check '[ "$(value "node=sc&slice=::2,1:")" = "[[-2,3]]" ]' "slice ::2,1: = [[-2, 3]]"
check '[ "$(value "node=sc&slice=0:5,-2:0:-1")" = "[[-2],[5]]" ]' "slice 0:5,-2:0:-1 = [[-2], [5]]"
check '[ "$(value "node=sc&slice=1,5:")" = "[]" ]' "slice 1,5: = [] (empty)"
check '[ "$(value "node=sc&slice=::9223372036854775807,::-9223372036854775808")" = "[[3]]" ]' "the largest steps: sc[::2**63-1, ::-2**63] = [[3]] (row 0, the last column)"
check '[ "$(value "node=sc&in=1")" = "1" ]' "in=1 is k = 1"
check '[ "$(value "node=sc&in=0&slice=1,2")" = "-6" ]' "in=0 (x), slice 1,2 = -6"
for bad in "node=sc&slice=5" "node=sc&slice=0,3" "node=sc&slice=0,0,0" "node=sc&slice=0:1:0" "node=sc&slice=a" \
  "node=sc&slice=1:2:3:4" "node=sc&out=2" "node=sc&out=-1" "node=sc&out=0&in=0" "node=sc&slice=99999999999999999999" "out=0"; do
  c=$(code "$base/api/value?$bad" -H "$(H)")
  check '[ "$c" = 400 ] && grep -q "\"error\"" "$tmp/body"' "value?$bad: 400 ($(cat "$tmp/body"))"
done
check '[ "$(code "$base/api/value?node=nothere" -H "$(H)")" = 404 ]' "value of an unknown node: 404"
check '[ "$(code "$base/api/value?node=m" -H "$(H)")" = 409 ]' "value of a node other than the paused one: 409"
# The whole value as a .npy download: what /api/value shows, for np.load.
check '[ "$(code "$base/api/value.npy?node=sc" -H "$(H)" -D "$tmp/hdr")" = 200 ]' "value.npy of the paused node: 200"
check 'grep -qi "^Content-Type: application/octet-stream" "$tmp/hdr" && grep -qi "^Content-Disposition: attachment; filename=\"sc_out0.npy\"" "$tmp/hdr"' "value.npy: a download named sc_out0.npy"
cp "$tmp/body" "$tmp/sc.npy"
get "/api/value?node=sc&slice=:,:" >"$tmp/j"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
check '/usr/bin/python3 -c "
import json
import numpy as np
a = np.load(\"$tmp/sc.npy\")
d = json.load(open(\"$tmp/j\"))
assert a.dtype.name == d[\"dtype\"] and list(a.shape) == d[\"shape\"], (a.dtype, a.shape)
assert a.tolist() == d[\"data\"], (a.tolist(), d[\"data\"])
"' "NumPy reads value.npy: the values /api/value shows"
else
  echo "skip: NumPy's reading of value.npy (python3-numpy not installed)"
fi
check '[ "$(code "$base/api/value.npy?node=sc&in=1" -H "$(H)")" = 200 ] && [ "$(wc -c <"$tmp/body")" -eq 136 ]' "value.npy of in=1 (k, a float64 scalar): 128 bytes of header, 8 of data"
check '[ "$(code "$base/api/value.npy?node=m" -H "$(H)")" = 409 ] && grep -q "value.npy: node m is not the paused node" "$tmp/body"' "value.npy of a node other than the paused one: 409"
check '[ "$(code "$base/api/value.npy?node=sc&out=5" -H "$(H)")" = 400 ]' "value.npy of an output the node does not have: 400"
check '[ "$(code "$base/api/value.npy?node=sc")" = 403 ]' "value.npy without the token: 403"

# ---- the profile, filled as it runs ----
get /api/profile >"$tmp/prof.json"
if python3 -c "import jsonschema" 2>/dev/null; then
  check 'python3 -c "import json, jsonschema; jsonschema.validate(json.load(open(\"$tmp/prof.json\")), json.load(open(\"$TG_SRC/schemas/profile.schema.json\")))"' \
    "/api/profile validates against schemas/profile.schema.json"
fi
check 'python3 -c "import json; f=json.load(open(\"$tmp/prof.json\"))[\"functions\"][0]; n={x[\"key\"]: x[\"calls\"] for x in f[\"nodes\"]}; assert n[\"sc\"] == 1 and n[\"s\" if \"s\" in n else \"sc\"] >= 1, n"' \
  "the profile counted sc's run"

# ---- 30 seconds of load on the state and value endpoints ----
if command -v wrk >/dev/null; then
  wrk -t2 -c8 -d30s -H "$(H)" "$base/api/state" >"$tmp/wrk1" 2>&1 &
  w1=$!
  wrk -t2 -c8 -d30s -H "$(H)" "$base/api/value?node=sc&slice=::-1,::2" >"$tmp/wrk2" 2>&1 &
  w2=$!
  wait $w1 $w2
  for w in wrk1 wrk2; do
    n=$(awk '/requests in/ {print $1}' "$tmp/$w")
    sed 's/^/  | /' "$tmp/$w" | grep -E "requests in|Requests/sec|Non-2xx|errors"
    check '[ "${n:-0}" -gt 100 ] && ! grep -q "Non-2xx" "$tmp/$w" && ! grep -q "Socket errors" "$tmp/$w"' \
      "wrk $w: $n requests in 30 s, no errors, no non-2xx"
  done
  check 'kill -0 $pid && [ "$(value "node=sc&slice=1,::-1")" = "[-6,5,-4]" ]' "after the load the server answers the same value"
else
  echo "skip: load test (wrk is not installed; bash scripts/tg-setup.sh test installs it)"
fi

# ---- continue, step, stop ----
check '[ "$(post /api/continue)" = 200 ]' "continue: 200"
check 'wait_state paused bsq' "then paused before the breakpoint op (bsq)"
check '[ "$(py "d[\"when\"]")" = before ] && py "d[\"reason\"]" | grep -q "condition .cond. is true"' "the op's hit: before the node, its condition"
check '[ "$(value "node=bsq&out=0")" = "[[1,4,9],[16,25,36]]" ]' "m1 (out=0) is sq = x*x"
check '[ "$(value "node=bsq&out=1&slice=1")" = "[-4,5,-6]" ]' "m2 (out=1) is sc, row 1"
state
pauses=$(py "d['pauses']")
check '[ "$(post /api/step)" = 200 ]' "step: 200"
for _ in $(seq 1 100); do state; [ "$(py "d['pauses']")" -gt "$pauses" ] && break; sleep 0.1; done
check '[ "$(py "d[\"state\"], d[\"reason\"], d[\"when\"], d[\"node\"][\"key\"]")" = "paused step after bsq" ]' \
  "step pauses after the node it was paused before ($(py "d['node']['key']"))"
check '[ "$(value "node=bsq&out=0&slice=1,2")" = "36" ]' "the stepped node's output 0 [1, 2] = 36"
post /api/step >/dev/null
for _ in $(seq 1 100); do state; [ "$(py "d['pauses']")" -gt $((pauses + 1)) ] && break; sleep 0.1; done
check '[ "$(py "d[\"reason\"]")" = step ] && [ "$(py "d[\"node\"][\"key\"]")" != bsq ]' "a second step pauses after the next node ($(py "d['node']['key']"))"
post /api/continue >/dev/null
check 'wait_state paused sc && [ "$(py "d[\"call\"]")" = 2 ]' "continue: paused at sc again in call 2"
check '[ "$(value "node=sc&slice=1")" = "[-40,50,-60]" ]' "sc at call 2 (k = 10): row 1 = [-40, 50, -60]"
# Concurrent requests while it runs on: state, profile and control together.
for i in $(seq 1 10); do get /api/state >/dev/null & get /api/profile >/dev/null & done
check '[ "$(post /api/stop)" = 200 ]' "stop while paused: 200"
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
check 'wait_state finished && [ "$(py "d[\"stopped\"]")" = True ] && [ "$(py "d[\"calls_done\"]")" = 1 ]' "stopped: finished, stopped, 1 call done"
check '[ "$(post /api/continue)" = 409 ] && [ "$(post /api/step)" = 409 ] && [ "$(post /api/stop)" = 409 ]' "control after the run ended: 409"
check '[ "$(code "$base/api/value?node=sc" -H "$(H)")" = 409 ]' "a value after the run ended: 409"
check '[ "$(code "$base/api/value.npy?node=sc" -H "$(H)")" = 409 ]' "value.npy after the run ended: 409"
check '[ "$(code "$base/api/profile" -H "$(H)")" = 200 ] && [ "$(code "$base/api/graph" -H "$(H)")" = 200 ]' "profile and graph after the run ended: 200"
kill -TERM "$pid"
wait "$pid"
rc=$?
check '[ $rc = 0 ] && grep -q "SIGTERM: shutting down" "$tmp/main.err"' "SIGTERM: exit 0 ($rc), shut down cleanly"
check '! grep -q "ERROR: AddressSanitizer\|runtime error:" "$tmp/main.err"' "no sanitizer report"

# ==== a run that ends by itself, with requests during the run; SIGINT ====
start fast "$bp" -i x='[[1,1,1],[1,1,1]]' --calls 3
for i in $(seq 1 10); do get /api/state >/dev/null & get /api/profile >/dev/null & done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
check 'wait_state finished && [ "$(py "d[\"calls_done\"]")" = 3 ] && [ "$(py "d[\"stopped\"]")" = False ]' "sum(sq) = 6 < 90: the op never fires, the run finishes its 3 calls"
check '[ "$(py "d[\"outputs\"][0][\"id\"], d[\"outputs\"][0][\"max\"]")" = "m 6.0" ]' "the outputs of the last call: m = 6"
kill -INT "$pid"
wait "$pid"
check '[ $? = 0 ] && grep -q "SIGINT: shutting down" "$tmp/fast.err"' "SIGINT: exit 0"

# ==== a long run: stop while running, SIGTERM while running, a port in use ====
start long "$bp" -i x='[[1,1,1],[1,1,1]]' --calls 100000000
check 'wait_state running' "a long run is running"
"$TGDEBUG" serve "$bp" -i x="$X" --port "$port" >"$tmp/out" 2>"$tmp/err"
rc=$?
check '[ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "cannot listen on 127.0.0.1:$port" "$tmp/err"' \
  "a port in use: exit $rc, one line ($(cat "$tmp/err"))"
check '[ "$(post /api/stop)" = 200 ]' "stop while running: 200"
check 'wait_state finished && [ "$(py "d[\"stopped\"]")" = True ] && [ "$(py "d[\"calls_done\"] < 100000000")" = True ]' \
  "stopped while running: finished, stopped, after $(py "d['calls_done']") calls"
kill -TERM "$pid"
wait "$pid"
check '[ $? = 0 ]' "SIGTERM after a stop: exit 0"
start long2 "$bp" -i x='[[1,1,1],[1,1,1]]' --calls 100000000
check 'wait_state running' "another long run is running"
kill -TERM "$pid"
wait "$pid"
check '[ $? = 0 ] && grep -q "the run was stopped after" "$tmp/long2.err"' "SIGTERM while running: the run stops, exit 0"

# ==== the MLP: OpenBLAS's threads exist before the server's; SIGTERM still
# reaches the shutdown, not the default action ====
if [ -x "$TG_BUILD_DIR/tools/tg-example-mlp-data" ]; then
  "$TG_BUILD_DIR/tools/tg-example-mlp-data" "$tmp" >/dev/null
  start mlp "$TG_SRC/examples/mlp.json" -f train -i x="$tmp/x.npy" -i y="$tmp/y.npy" --calls 3 --break cost
  check 'wait_state paused cost' "the MLP's training step pauses at cost"
  check '[ "$(value "node=cost")" = "2.30258512" ]' "cost at call 1 is log(10) = 2.30258512 (uniform predictions over 10 classes)"
  kill -TERM "$pid"
  wait "$pid"
  check '[ $? = 0 ] && grep -q "SIGTERM: shutting down" "$tmp/mlp.err"' "SIGTERM with OpenBLAS's threads running: exit 0"
fi

# ==== a failed assert is the page's error, not a crash ====
start fails "$bp" -f fails -i x="$X"
check 'wait_state error' "the run's state is error"
check '[[ "$(py "d[\"error\"]")" == *"assertion failed: m must be negative"* ]]' "the error names the assert's message"
check '[ "$(code "$base/api/state" -H "$(H)")" = 200 ] && kill -0 $pid' "the server still answers after the run failed"
kill -TERM "$pid"
wait "$pid"
check '[ $? = 0 ]' "SIGTERM after a failed run: exit 0"

# ==== a breakpoint on a key of a grad's expansion (fused): the state says
# whose derivative each original node of the paused one is ====
start grad "$TG_SRC/tests/data/tgdebug/grad_sqrt.json" -i x='[0,1,4]' --break gx.8
check 'wait_state paused' "--break gx.8 pauses at the composite it was fused into"
check '[ "$(py "d[\"node\"][\"gradients\"][\"gx.8\"]")" = "from grad gx, differentiating r (sqrt)" ]' \
  "the state says gx.8 is from grad gx, differentiating r (sqrt)"
check '[ "$(py "sorted(d[\"node\"][\"gradients\"]) == sorted(d[\"node\"][\"origins\"])")" = True ]' \
  "every original node of the composite (all of the gradient) says whose derivative it is"
kill -TERM "$pid"
wait "$pid"
check '[ $? = 0 ]' "SIGTERM while paused in the gradient: exit 0"

# ==== a value larger than a slice may be; --bind 0.0.0.0 ====
python3 - "$tmp/x.npy" <<'EOF'
import struct, sys
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (500, 300), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<150000f", *range(150000)))
EOF
start big "$TG_SRC/tests/data/debug/big.json" -i x="$tmp/x.npy" --break double --bind 0.0.0.0
if command -v ss >/dev/null; then
  check 'ss -ltnH "sport = :$port" | grep -q "0.0.0.0:$port"' "--bind 0.0.0.0 listens on every address"
fi
check '[ "$(code --connect-timeout 3 "http://127.0.0.2:$port/api/state" -H "$(H)")" = 200 ]' "--bind 0.0.0.0: 127.0.0.2 connects"
check 'wait_state paused y' "paused at y = 2x (150,000 elements)"
c=$(code "$base/api/value?node=y" -H "$(H)")
check '[ "$c" = 400 ] && grep -q "150000 elements, more than 100000" "$tmp/body"' "the whole 150,000 elements: 400 ($(cat "$tmp/body"))"
check '[ "$(code "$base/api/value?node=y&slice=0:300" -H "$(H)")" = 200 ]' "300 rows (90,000 elements): 200"
check '[ "$(value "node=y&slice=499,-3:")" = "[299994,299996,299998]" ]' "y[499, -3:] = 2 * (149997, 149998, 149999)"
check '[ "$(value "node=y&slice=::250,::299")" = "[[0,598],[150000,150598]]" ]' "y[::250, ::299] = 2 * [[0, 299], [75000, 75299]]"

# ---- the page in a browser ----
kill -TERM "$pid"
wait "$pid"
if ! command -v node >/dev/null || [ ! -x /usr/bin/chromium ]; then
  echo "skip: browser test (needs node and /usr/bin/chromium)"
elif [ ! -d "$TG_SRC/tests/browser/node_modules/playwright-core" ]; then
  fail "browser test: playwright-core missing (bash scripts/tg-setup.sh test installs it)"
else
  art="$TG_BUILD_DIR/tests/artifacts"
  mkdir -p "$art"
  start page "$bp" -i x="$X" --calls 2 --break scaled
  node "$TG_SRC/tests/browser/tgdebug.test.js" "$base/?token=$tok" "$art" || fails=$((fails + 1))
  kill -TERM "$pid"
  wait "$pid"
  check '[ $? = 0 ]' "the browser's server shut down cleanly"
fi

check '! grep -l "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$tmp"/*.err' "no sanitizer report from any server"

echo "$fails failed"
[ "$fails" -eq 0 ]
