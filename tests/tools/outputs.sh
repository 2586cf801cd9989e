#!/usr/bin/env bash
# Where the tools' output goes, and what happens when it cannot go there:
# - printing to a full device (/dev/full) or any stdout that fails is one
#   line on stderr and exit 1, for every tool (it was exit 0, the output
#   silently lost);
# - -o naming a device or a FIFO writes into it (/dev/stdout, a pipe)
#   instead of renaming a temporary over it: the device node stays (as
#   root, the rename had replaced /dev/full with a regular file; not
#   root, no temporary could be made in /dev);
# - -o through a symbolic link replaces the file it names, the link stays;
#   a link to a file that does not exist yet creates it (it replaced the
#   link, and as root with stdout closed, -o /dev/stdout replaced the
#   system's /dev/stdout link with a regular file);
# - -o naming a standard stream by number (/dev/stdout, /dev/fd/N) writes
#   through that descriptor as `cat` would: what the shell wrote before
#   stays and `>>` appends (a rename had replaced the whole file); a
#   closed one is one line and exit 2;
# - Ctrl-C in tgc run stops after the call in progress and still writes
#   -o and --save-state; during a save it removes the temporary.
set -uo pipefail
: "${TGC:?}" "${TG_SRC:?}" "${TG_BUILD_DIR:?}" "${TG_TEST_DATA:?}"
. "$(dirname "$0")/lib/checks.bash"
G=$TG_TEST_DATA/tools/counter.json
L=$TG_SRC/examples/logreg.json

# ---- a stdout that fails ----
if [ -c /dev/full ]; then
  expect 1 "tgc print to /dev/full" -- sh -c '"$0" print "$1" -f step >/dev/full' "$TGC" "$G"
  contains err "^tgc: writing to standard output failed: No space left on device" "the failed write is one line"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && pass "exactly one line" || fail "not one line"
  expect 1 "tgc run to /dev/full" -- sh -c '"$0" run "$1" -f step >/dev/full' "$TGC" "$G"
  expect 1 "tgc check to /dev/full" -- sh -c '"$0" check "$1" >/dev/full' "$TGC" "$L"
  expect 1 "tgc --version to /dev/full" -- sh -c '"$0" --version >/dev/full' "$TGC"
  for tool in tgprof tgdebug tgviz; do
    t=$TG_BUILD_DIR/tools/$tool
    [ -x "$t" ] || continue
    expect 1 "$tool --version to /dev/full" -- sh -c '"$0" --version >/dev/full' "$t"
    contains err "^$tool: writing to standard output failed" "$tool says so"
  done
  expect 1 "tgprof's report to /dev/full" -- sh -c '"$0" "$1" -f step --calls 2 >/dev/full' \
    "$TG_BUILD_DIR/tools/tgprof" "$G"

else
  echo "note: no /dev/full here; the full-device checks did not run"
fi

# ---- -o naming a device ----
expect 0 "compile" -- "$TGC" compile "$G" -o "$tmp/c.tgf"
# (As root a regression would replace the device node, so /dev/full is
# named only when not root; the FIFO below tests the same path.)
if [ -c /dev/full ] && [ "$(id -u)" -ne 0 ]; then
  expect 1 "export -o /dev/full" -- "$TGC" export "$tmp/c.tgf" -f step -o /dev/full
  contains err "/dev/full: write failed: No space left on device" "the device's error is named"
fi
# stdout as a pipe, named through /proc (its folder takes no temporary)
expect 0 "export -o /proc/self/fd/1, a pipe" -- sh -c '"$0" export "$1" -f step -o /proc/self/fd/1 | cat' "$TGC" "$tmp/c.tgf"
contains out '"format": "tg-graph"' "the graph came out on stdout"

# ---- -o naming a FIFO: the bytes go through it ----
mkfifo "$tmp/pipe"
timeout 30 cat "$tmp/pipe" >"$tmp/through.tgf" &
reader=$!
expect 0 "compile -o a FIFO" -- "$TGC" compile "$G" -o "$tmp/pipe"
wait "$reader"
[ -p "$tmp/pipe" ] && pass "the FIFO is still a FIFO" || fail "the FIFO was replaced"
expect 0 "the file read through the FIFO runs" -- "$TGC" run "$tmp/through.tgf" -f step --calls 2
contains out "^2$" "and counts"

# ---- -o through a symbolic link ----
"$TGC" compile "$G" -f step -o "$tmp/real.tgf" >/dev/null 2>&1
ln -s real.tgf "$tmp/link.tgf"
expect 0 "compile all functions -o a link" -- "$TGC" compile "$G" -o "$tmp/link.tgf"
[ -L "$tmp/link.tgf" ] && pass "the link stays a link" || fail "the link was replaced by a file"
expect 0 "the file it names was replaced" -- "$TGC" run "$tmp/real.tgf" -f double -i 'x=[1]'
contains out "2" "with the new functions"
# a checkpoint through the link as well
expect 0 "--save-state through the link" -- "$TGC" run "$tmp/link.tgf" -f step --calls 3 --save-state "$tmp/link.tgf"
[ -L "$tmp/link.tgf" ] && pass "the link still stays" || fail "the link was replaced"
expect 0 "resume from the file" -- "$TGC" run "$tmp/real.tgf" -f step
contains out "^4$" "the state went into the file the link names"
# a link to a file that does not exist yet: the file is made, the link stays
mkdir "$tmp/ck"
ln -s ck/model.tgf "$tmp/latest.tgf"
expect 0 "compile -o a dangling link" -- "$TGC" compile "$G" -f step -o "$tmp/latest.tgf"
[ -L "$tmp/latest.tgf" ] && pass "the dangling link stays a link" || fail "the dangling link was replaced by a file"
[ -f "$tmp/ck/model.tgf" ] && pass "the file it names was made" || fail "the file the link names was not made"
ln -s ck/model.tgf "$tmp/rel.tgf" && ln -s "$tmp/rel.tgf" "$tmp/chain.tgf" && rm "$tmp/ck/model.tgf"
expect 0 "--save-state through two links, the last dangling" -- "$TGC" run "$tmp/c.tgf" -f step --calls 2 --save-state "$tmp/chain.tgf"
[ -L "$tmp/chain.tgf" ] && [ -L "$tmp/rel.tgf" ] && [ -f "$tmp/ck/model.tgf" ] && pass "both links stay, the file is made" \
  || fail "a link was replaced: $(ls -l "$tmp" "$tmp/ck")"
ln -s nodir/x.tgf "$tmp/nowhere.tgf"
expect 2 "a link into a folder that does not exist" -- "$TGC" compile "$G" -f step -o "$tmp/nowhere.tgf"
contains err "nowhere.tgf: cannot create a temporary file: No such file or directory" "says why"
[ -L "$tmp/nowhere.tgf" ] && pass "that link stays" || fail "that link was replaced"
ln -s loop2 "$tmp/loop1" && ln -s loop1 "$tmp/loop2"
expect 2 "a loop of links" -- "$TGC" compile "$G" -f step -o "$tmp/loop1"
contains err "loop1: cannot follow the link: Too many levels of symbolic links" "says why"
ls "$tmp" "$tmp/ck" | grep -q '\.tmp\.' && fail "a temporary file was left: $(ls "$tmp")" || pass "no temporary left behind"

# ---- -o naming a standard stream ----
echo PRIOR >"$tmp/log.txt"
expect 0 "export -o /dev/stdout appending to a file" -- sh -c '"$0" export "$1" -f step -o /dev/stdout >>"$2"' \
  "$TGC" "$tmp/c.tgf" "$tmp/log.txt"
[ "$(head -1 "$tmp/log.txt")" = PRIOR ] && grep -q '"format": "tg-graph"' "$tmp/log.txt" \
  && pass "the file keeps what was there and gets the graph after it" || fail "log.txt: $(head -c 200 "$tmp/log.txt")"
expect 0 "tgc print beside export -o /dev/fd/1 into one file" -- \
  sh -c '{ echo HEADER; "$0" export "$1" -f step -o /dev/fd/1; echo FOOTER; } >"$2"' "$TGC" "$tmp/c.tgf" "$tmp/both.txt"
[ "$(head -1 "$tmp/both.txt")" = HEADER ] && [ "$(tail -1 "$tmp/both.txt")" = FOOTER ] \
  && pass "the lines before and after stay in order" || fail "both.txt: $(head -c 200 "$tmp/both.txt")"
expect 2 "-o /dev/stdout with stdout closed" -- sh -c '"$0" export "$1" -f step -o /dev/stdout >&-' "$TGC" "$tmp/c.tgf"
contains err "^tgc: -o /dev/stdout: cannot write: descriptor 1 is closed$" "one line says so"
[ -L /dev/stdout ] || [ -c /dev/stdout ] && pass "/dev/stdout is still what it was" || fail "/dev/stdout was replaced"
# (stdin from a file other than the one exported, which -o may not name)
expect 2 "-o /dev/stdin" -- sh -c '"$0" export "$1" -f step -o /dev/stdin <"$0"' "$TGC" "$tmp/c.tgf"
contains err "/dev/stdin: cannot write: descriptor 0 is open for reading only" "one line says so"

# ---- interrupted ----
# Ctrl-C in a run of many calls stops after the call in progress and
# still writes --save-state (the checkpoint of the calls done; resuming
# from it counts on) and whole --each lines; exit 130. A signal during a
# save removes its temporary and leaves the old file (it left a 46 MB
# out.npz.tmp.PID.N).
/usr/bin/python3 - "$TGC" "$tmp" "$G" <<'PY' >"$tmp/sig.out" 2>&1
import os, signal, subprocess, sys, time
tgc, tmp, g = sys.argv[1:4]
def saving():
    return any(".tmp." in f for f in os.listdir(tmp))
def run(args, delay, until=None):
    with open(os.path.join(tmp, "o.txt"), "w") as o, open(os.path.join(tmp, "e.txt"), "w") as e:
        p = subprocess.Popen([tgc] + args, stdout=o, stderr=e)
        time.sleep(delay)
        # (the save's temporary appears: a fixed delay on a loaded machine
        # fell within the call, after which the save is due and runs)
        end = time.time() + 120
        while until and not until() and p.poll() is None and time.time() < end:
            time.sleep(0.005)
        p.send_signal(signal.SIGINT)
        return p.wait(), open(os.path.join(tmp, "o.txt")).read(), open(os.path.join(tmp, "e.txt")).read()
ck = os.path.join(tmp, "int.tgf")
rc, out, err = run(["run", g, "-f", "step", "--calls", "1000000000000", "--save-state", ck], 1.5)
print("save", rc, err.strip().splitlines()[-1] if err.strip() else "")
done = int(err.split("after call ")[1].split(" ")[0]) if "after call " in err else -1
res = subprocess.run([tgc, "run", ck, "-f", "step"], capture_output=True, text=True).stdout.split()
print("resumed", int(res[-1]) == done + 1)
rc, out, err = run(["run", g, "-f", "step", "--calls", "1000000000000", "--each"], 1.5)
print("each", rc, out.endswith("\n"), out.splitlines()[-1].split(":")[0] == "call " + err.split("after call ")[1].split(" ")[0])
import numpy as np
np.save(os.path.join(tmp, "big.npy"), np.random.default_rng(0).random(20_000_000))
open(os.path.join(tmp, "old.npz"), "w").write("old")
rc, out, err = run(["run", g, "-f", "double", "-i", "x=" + os.path.join(tmp, "big.npy"), "-o", os.path.join(tmp, "old.npz"),
                    "--compress=9"], 0.1, saving)
print("write", rc, [f for f in os.listdir(tmp) if ".tmp." in f], open(os.path.join(tmp, "old.npz")).read())
PY
cat "$tmp/sig.out"
grep -q "^save 130 tgc: interrupted by SIGINT after call [0-9]* of 1000000000000: -o and --save-state write the state after it$" "$tmp/sig.out" \
  && pass "Ctrl-C stops after a call, says so, exit 130" || fail "Ctrl-C with --save-state"
grep -q "^resumed True$" "$tmp/sig.out" && pass "the checkpoint holds the calls done" || fail "the checkpoint after Ctrl-C"
grep -q "^each 130 True True$" "$tmp/sig.out" && pass "--each ends with the whole line of the last call" || fail "--each after Ctrl-C"
grep -q "^write -2 \[\] old$" "$tmp/sig.out" && pass "Ctrl-C during a save: no temporary, the old file stays" \
  || fail "Ctrl-C during a save"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
