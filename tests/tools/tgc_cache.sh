#!/usr/bin/env bash
# tgc cache list|clear, and composite kernels compiled once then loaded
# from the cache, with TG_CC pointing nowhere (the interpreter).
set -uo pipefail
: "${TGC:?}" "${TG_TEST_DATA:?}"
. "$(dirname "$0")/lib/checks.bash"
export TG_CACHE_DIR=$tmp/cache
G=$TG_TEST_DATA/ops/composite_paper.json
A='a=[[1, 2, 3, 4]]'
B='b=[1, -1, 0.5, 0]'

expect 0 "list an empty cache" -- "$TGC" cache list
contains out "0 entries" "an empty cache has no entries"
# A compiler wrapper that counts compiles (not --version probes).
cat >"$tmp/cc" <<'SH'
#!/bin/sh
[ "$1" = --version ] || echo compile >>"$(dirname "$0")/cc.log"
exec cc "$@"
SH
chmod +x "$tmp/cc"
export TG_CC=$tmp/cc
expect 0 "run a composite" -- "$TGC" run "$G" -i "$A" -i "$B"
contains out "4\. *, *1\. *, *12.25, *16\." "(a+b)**2 computed"
expect 0 "list after a run" -- "$TGC" cache list
contains out "^[0-9a-f]\{32\} " "one line per entry, starting with the hash"
contains out "tg composite: 2 in, 2 out, ops sqr sqr mul add mul mul add; float64" "the source's first line"
contains out "1 entry" "one entry"
contains out "^[0-9a-f]\{32\} cpu " "a CPU kernel lists as kind cpu"
touch "$TG_CACHE_DIR/keep.txt"
expect 0 "run again: the kernel comes from the cache" -- "$TGC" run "$G" -i "$A" -i "$B"
[ "$(wc -l <"$tmp/cc.log")" -eq 1 ] && pass "compiled once for two runs" || fail "compiled $(wc -l <"$tmp/cc.log") times"
# A damaged kernel (emptied, as a power cut can leave it) is compiled
# again, once, without a warning; it used to send every later run to the
# interpreter.
so=$(ls "$TG_CACHE_DIR"/*.so)
: >"$so"
expect 0 "run with an emptied kernel" -- "$TGC" run "$G" -i "$A" -i "$B"
contains out "4\. *, *1\. *, *12.25, *16\." "values from the kernel compiled again"
[ ! -s "$tmp/err" ] && pass "no warning" || fail "a warning: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/cc.log")" -eq 2 ] && pass "compiled again once" || fail "compiled $(wc -l <"$tmp/cc.log") times in all"
[ -s "$so" ] && pass "the kernel is whole again" || fail "the kernel is still empty"
expect 0 "and the next run loads it" -- "$TGC" run "$G" -i "$A" -i "$B"
[ "$(wc -l <"$tmp/cc.log")" -eq 2 ] && pass "no compile" || fail "compiled $(wc -l <"$tmp/cc.log") times in all"
# A TG_CC that exits 0 writing garbage (its --version is the real
# compiler's, so the kernel's hash too): the warning names the file and
# the loader's reason; the real compiler then builds it again.
cat >"$tmp/badcc" <<'SH'
#!/bin/sh
[ "$1" = --version ] && exec cc "$@"
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
echo garbage >"$out"
SH
chmod +x "$tmp/badcc"
: >"$so"
expect 0 "a compiler that writes garbage" -- env TG_CC="$tmp/badcc" "$TGC" run "$G" -i "$A" -i "$B"
contains out "4\. *, *1\. *, *12.25, *16\." "values from the interpreter"
contains err "warning: composite kernels run in the interpreter: the compiled kernel $so could not be loaded: .*\(too short\|ELF\)" \
  "the warning names the file and the loader's reason"
expect 0 "the real compiler again" -- "$TGC" run "$G" -i "$A" -i "$B"
[ ! -s "$tmp/err" ] && pass "no warning" || fail "a warning: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/cc.log")" -eq 3 ] && pass "the garbage was compiled again" || fail "compiled $(wc -l <"$tmp/cc.log") times in all"
# A GPU entry as nvrtc.c writes it (source, code with its header line),
# and one of its temporaries: listed with its kind, cleared with the rest.
H=0123456789abcdef0123456789abcdef
printf '/* tg composite (cuda): 1 in, 1 out, ops exp; float32 */\n' >"$TG_CACHE_DIR/$H.cu"
printf 'tg-nvrtc 1 sm_90 4 0\nELF\0' >"$TG_CACHE_DIR/$H.cubin"
# A temporary of a process that is gone, and one of a process still
# running (this shell), which may be writing it.
dead=$(sh -c 'echo $$')
printf 'x' >"$TG_CACHE_DIR/$H.cubin.tmp.$dead.0"
printf 'x' >"$TG_CACHE_DIR/$H.ccid.tmp.$$.0"
expect 0 "list both kinds" -- "$TGC" cache list
contains out "^$H cuda sm_90 .*tg composite (cuda): 1 in, 1 out" "a GPU kernel lists as cuda and its target"
contains out "2 entries" "two entries"
expect 0 "clear" -- "$TGC" cache clear
contains out "removed 2 entries" "clear says how many"
[ -z "$(ls "$TG_CACHE_DIR" | grep -v -e keep.txt -e '^lock$' -e "^$H.ccid.tmp.$$.0\$")" ] &&
  pass "clear removed both kinds and the dead process's temporary" || fail "left: $(ls "$TG_CACHE_DIR")"
[ -e "$TG_CACHE_DIR/$H.ccid.tmp.$$.0" ] && pass "clear leaves a running process's temporary" ||
  fail "clear removed the temporary of a running process"
rm -f "$TG_CACHE_DIR/$H.ccid.tmp.$$.0"
[ -e "$TG_CACHE_DIR/lock" ] && pass "clear leaves the lock file" || fail "clear removed the lock file"
[ -e "$TG_CACHE_DIR/keep.txt" ] && pass "clear leaves other files" || fail "clear removed a file not its own"
# clear during another process's compile (a compiler that takes 3 s):
# clear waits for it and says so; the compile finishes and its run uses
# the kernel (clear used to delete its temporaries and the lock file it
# held, and the run fell back to the interpreter blaming the compiler).
cat >"$tmp/slowcc" <<'SH'
#!/bin/sh
[ "$1" = --version ] && exec cc "$@"
sleep 3
exec cc "$@"
SH
chmod +x "$tmp/slowcc"
TG_CC="$tmp/slowcc" "$TGC" run "$G" -i "$A" -i "$B" >"$tmp/bg.out" 2>"$tmp/bg.err" &
bg=$!
# until the compile holds the lock (its compiler's stderr file exists)
for _ in $(seq 100); do ls "$TG_CACHE_DIR" | grep -q '\.tmp\..*\.err$' && break; sleep 0.1; done
expect 0 "clear during a compile" -- "$TGC" cache clear
contains err "tgc cache: waiting for a compile in progress in $TG_CACHE_DIR" "clear says it waits"
contains out "removed 1 entry" "the kernel just compiled is removed after the compile"
wait "$bg" && pass "the compiling run succeeded" || fail "the compiling run failed"
grep -q "4\. *, *1\. *, *12.25, *16\." "$tmp/bg.out" && pass "its values" || fail "its values: $(cat "$tmp/bg.out")"
[ ! -s "$tmp/bg.err" ] && pass "the compiling run did not warn" || fail "it warned: $(cat "$tmp/bg.err")"
[ -e "$TG_CACHE_DIR/lock" ] && pass "the lock file stays" || fail "clear removed the lock file"
expect 0 "list after clear" -- "$TGC" cache list
contains out "0 entries" "nothing left"
unset TG_CC
expect 0 "no compiler: the interpreter" -- env TG_CC=/nonexistent/cc "$TGC" run "$G" -i "$A" -i "$B"
contains out "4\. *, *1\. *, *12.25, *16\." "same values in the interpreter"
contains err "warning: composite kernels run in the interpreter" "one warning line"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && pass "exactly one line on stderr" || fail "more than one warning line"
# A cache folder that cannot be used: the warning says why and names it
# (it said "cannot lock the kernel cache folder", a file counting as a
# folder made).
: >"$tmp/afile"
expect 0 "TG_CACHE_DIR names a file" -- env TG_CACHE_DIR="$tmp/afile" "$TGC" run "$G" -i "$A" -i "$B"
contains out "4\. *, *1\. *, *12.25, *16\." "values from the interpreter"
contains err "interpreter: unusable kernel cache folder $tmp/afile: Not a directory" "not a directory, named"
expect 0 "TG_CACHE_DIR under a file" -- env TG_CACHE_DIR="$tmp/afile/sub" "$TGC" run "$G" -i "$A" -i "$B"
contains err "interpreter: unusable kernel cache folder $tmp/afile/sub: Not a directory" "not a directory, named"
if [ "$(id -u)" -ne 0 ]; then
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  expect 0 "a read-only cache folder" -- env TG_CACHE_DIR="$tmp/ro" "$TGC" run "$G" -i "$A" -i "$B"
  contains err "interpreter: cannot lock the kernel cache folder: $tmp/ro/lock: Permission denied" "permission denied, named"
  chmod 755 "$tmp/ro"
else
  pass "a read-only cache folder: skipped as root (root may write there)"
fi
# Every <hash>.so ends with a footer naming its entry, checked before it
# is loaded (kcache.c). A kernel cut short (glibc mapped it past its end:
# SIGBUS in every later run) and another kernel's file copied over this
# one's name (loaded: wrong values) are compiled again.
export TG_CACHE_DIR=$tmp/c2 TG_CC=$tmp/cc
: >"$tmp/cc.log"
expect 0 "c2: a first compile" -- "$TGC" run "$G" -i "$A" -i "$B"
so=$(ls "$TG_CACHE_DIR"/*.so)
truncate -s 4096 "$so"
expect 0 "a kernel cut short" -- "$TGC" run "$G" -i "$A" -i "$B"
contains out "4\. *, *1\. *, *12.25, *16\." "values from the kernel compiled again"
[ ! -s "$tmp/err" ] && pass "no warning" || fail "a warning: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/cc.log")" -eq 2 ] && pass "compiled again" || fail "compiled $(wc -l <"$tmp/cc.log") times in all"
# q = 2a + 3b, and 2a + 5b in the other graph (by hand: a = [1 2 3 4],
# b = [1 -1 0.5 0])
sed 's/"value": 3/"value": 5/' "$G" >"$tmp/g5.json"
expect 0 "another kernel" -- "$TGC" run "$tmp/g5.json" -i "$A" -i "$B"
contains out "7\. *, *-1\. *, *8.5, *8\." "2a + 5b"
for f in "$TG_CACHE_DIR"/*.so; do [ "$f" != "$so" ] && so5=$f; done
cp "$so5" "$so"
expect 0 "another kernel's file under this one's name" -- "$TGC" run "$G" -i "$A" -i "$B"
contains out "5\. *, *1\. *, *7.5, *8\." "2a + 3b, from the kernel compiled again"
[ "$(wc -l <"$tmp/cc.log")" -eq 4 ] && pass "compiled again" || fail "compiled $(wc -l <"$tmp/cc.log") times in all"
expect 0 "and the next run loads it" -- "$TGC" run "$G" -i "$A" -i "$B"
contains out "5\. *, *1\. *, *7.5, *8\." "2a + 3b"
[ "$(wc -l <"$tmp/cc.log")" -eq 4 ] && pass "no compile" || fail "compiled $(wc -l <"$tmp/cc.log") times in all"
# clear removes what it knows as tg's, never a stray file that merely
# has a hex name (it removed them, and said "removed 0 entries").
D=fedcba9876543210fedcba9876543210
for x in c so ccid cu cubin; do echo "not tg's" >"$TG_CACHE_DIR/$D.$x"; done
expect 0 "clear beside stray hex-named files" -- "$TGC" cache clear
contains out "removed 2 entries" "the two kernels"
[ "$(ls "$TG_CACHE_DIR" | grep -c "^$D\.")" -eq 5 ] && pass "the stray files stay" ||
  fail "left: $(ls "$TG_CACHE_DIR")"
[ -z "$(ls "$TG_CACHE_DIR" | grep -v -e "^$D\." -e '^lock$')" ] && pass "nothing else left" ||
  fail "left: $(ls "$TG_CACHE_DIR")"
rm -f "$TG_CACHE_DIR/$D".*
# A link planted where the source goes is not written through.
expect 0 "c2: compile again" -- "$TGC" run "$G" -i "$A" -i "$B"
c=$(ls "$TG_CACHE_DIR"/*.c)
rm -f "${c%.c}.so" "$c"
echo "precious" >"$tmp/victim"
ln -s "$tmp/victim" "$c"
expect 0 "a link at <hash>.c" -- "$TGC" run "$G" -i "$A" -i "$B"
contains out "5\. *, *1\. *, *7.5, *8\." "values from the interpreter"
contains err "interpreter: .*$c: a symbolic link, not a file: refused" "the warning names the link"
[ "$(cat "$tmp/victim")" = precious ] && pass "the link's target is untouched" || fail "the target was written"
rm -f "$c"
# Processes started together on one graph wait a moment for one another's
# compile, and say nothing of it: their stderr stays empty (the first
# cut of the waiting note above filled the stderr of every tool test
# that ran beside another on the shared cache).
sed 's/"value": 3/"value": 9/' "$G" >"$tmp/g9.json"
for k in 1 2 3; do "$TGC" run "$tmp/g9.json" -i "$A" -i "$B" >"$tmp/par$k.out" 2>"$tmp/par$k.err" & done
wait
if [ ! -s "$tmp/par1.err" ] && [ ! -s "$tmp/par2.err" ] && [ ! -s "$tmp/par3.err" ] &&
   grep -q "11\. *, *-5\. *, *10\.5, *8\." "$tmp/par1.out" && grep -q "11\. *, *-5\. *, *10\.5, *8\." "$tmp/par3.out"; then pass "three at once on a new kernel: right values, nothing on stderr"
else fail "three at once on a new kernel"; cat "$tmp"/par*.err | sed 's/^/  | /'; fi
# A compiler that hangs is stopped after TG_CC_TIMEOUT seconds; a process
# waiting for the lock it holds says so and gives up after its own.
cat >"$tmp/hangcc" <<'SH'
#!/bin/sh
[ "$1" = --version ] && exec cc "$@"
sleep 30
exec cc "$@"
SH
chmod +x "$tmp/hangcc"
t0=$(date +%s)
expect 0 "a compiler that hangs" -- env TG_CC="$tmp/hangcc" TG_CC_TIMEOUT=1 "$TGC" run "$G" -i "$A" -i "$B"
contains out "5\. *, *1\. *, *7.5, *8\." "values from the interpreter"
contains err "interpreter: the C compiler $tmp/hangcc ran past 1 s (TG_CC_TIMEOUT) and was stopped" "the warning says why"
[ $(($(date +%s) - t0)) -lt 15 ] && pass "stopped in time" || fail "took $(($(date +%s) - t0)) s"
env TG_CC="$tmp/hangcc" TG_CC_TIMEOUT=4 "$TGC" run "$G" -i "$A" -i "$B" >/dev/null 2>&1 &
bg=$!
for _ in $(seq 100); do ls "$TG_CACHE_DIR" | grep -q '\.tmp\..*\.err$' && break; sleep 0.1; done
expect 0 "waiting for a compile that hangs" -- env TG_CC_TIMEOUT=1 "$TGC" run "$G" -i "$A" -i "$B"
contains out "5\. *, *1\. *, *7.5, *8\." "values from the interpreter"
contains err "tg: waiting for another process's compile in the kernel cache folder $TG_CACHE_DIR" "it says it waits"
contains err "interpreter: gave up waiting 1 s (TG_CC_TIMEOUT) for another process's compile" "and gives up"
wait "$bg"
# A function's missing kernels are compiled at its first call, several
# at once (TG_CC_JOBS), each once; its nodes' first runs then load them
# from the disk (they were compiled one after another at their first runs: 1,250
# bodies took minutes). Four composites of distinct bodies:
# a = [1 2 3 4], b = [1 -1 0.5 0]: by hand, a+b = 2 1 3.5 4,
# a*b = 1 -2 1.5 0, a-b = 0 3 2.5 4, a*a+b = 2 3 9.5 16.
comp() { # ID OP1 [OP2]: a composite node of x OP1 y, or (x OP1 x) OP2 y
  local body
  if [ -n "${3:-}" ]; then
    body='"nodes":[{"op":"'$2'","inputs":["x","x"],"outputs":["t"]},{"op":"'$3'","inputs":["t","y"],"outputs":["r"]}]'
  else
    body='"nodes":[{"op":"'$2'","inputs":["x","y"],"outputs":["r"]}]'
  fi
  printf '{"op":"composite","inputs":["a","b"],"outputs":["%s"],"attrs":{"body":{"variables":[{"id":"x","type":{"dtype":"float64","shape":[]}},{"id":"y","type":{"dtype":"float64","shape":[]}}],%s,"inputs":["x","y"],"outputs":["r"]}}}' "$1" "$body"
}
cat >"$tmp/four.json" <<JSON
{"format":"tg-graph","version":1,"name":"four",
 "variables":[{"id":"a","type":{"dtype":"float64","shape":[null,4]}},{"id":"b","type":{"dtype":"float64","shape":[4]}}],
 "nodes":[$(comp p1 add),$(comp p2 mul),$(comp p3 sub),$(comp p4 mul add)],
 "functions":{"main":{"inputs":["a","b"],"outputs":["p1","p2","p3","p4"]}}}
JSON
# A compiler that notes when each compile starts and ends, and its
# output, and takes half a second more.
cat >"$tmp/timecc" <<'SH'
#!/bin/sh
[ "$1" = --version ] && exec cc "$@"
for a; do case $prev in -o) out=$a;; esac; prev=$a; done
log=$(dirname "$0")/time.log
echo "start $(date +%s.%N) ${out##*/}" >>"$log"
sleep 0.5
cc "$@"; rc=$?
echo "end $(date +%s.%N) ${out##*/}" >>"$log"
exit $rc
SH
chmod +x "$tmp/timecc"
four_values() {
  contains out "2\. *, *1\. *, *3\.5 *, *4\." "a+b by hand"
  contains out "1\. *, *-2\. *, *1\.5 *, *0\." "a*b by hand"
  contains out "0\. *, *3\. *, *2\.5 *, *4\." "a-b by hand"
  contains out "2\. *, *3\. *, *9\.5 *, *16\." "a*a+b by hand"
}
# overlapped LOG: whether a compile started before another had ended
overlapped() {
  awk '$1 == "start" { s[$3] = $2 } $1 == "end" { e[$3] = $2 }
       END { for (i in s) for (j in e) if (i != j && s[i] < e[j] && s[j] < s[i]) ok = 1; exit !ok }' "$1"
}
expect 0 "four bodies in the interpreter" -- env TG_COMPOSITE=interp "$TGC" run "$tmp/four.json" -i "$A" -i "$B"
cp "$tmp/out" "$tmp/four.interp"
for jobs in 4 1; do
  rm -f "$tmp/time.log"
  expect 0 "four bodies, TG_CC_JOBS=$jobs" -- \
    env TG_CC="$tmp/timecc" TG_CC_JOBS=$jobs TG_CACHE_DIR="$tmp/c$jobs" "$TGC" run "$tmp/four.json" -i "$A" -i "$B"
  four_values
  cmp -s "$tmp/out" "$tmp/four.interp" && pass "the interpreter's values" || fail "values differ from the interpreter's"
  [ ! -s "$tmp/err" ] && pass "nothing on stderr" || fail "stderr: $(cat "$tmp/err")"
  n=$(grep -c '^start' "$tmp/time.log"); d=$(awk '$1 == "start" { print $3 }' "$tmp/time.log" | sort -u | wc -l)
  [ "$n" -eq 4 ] && [ "$d" -eq 4 ] && pass "four kernels, each compiled once" || fail "$n compiles of $d kernels"
  if [ "$jobs" -eq 4 ]; then
    overlapped "$tmp/time.log" && pass "compiled at once" || { fail "compiled one after another"; cat "$tmp/time.log"; }
  else
    ! overlapped "$tmp/time.log" && pass "one at a time" || { fail "compiled at once with TG_CC_JOBS=1"; cat "$tmp/time.log"; }
  fi
  rm -f "$tmp/time.log"
  expect 0 "four bodies again" -- \
    env TG_CC="$tmp/timecc" TG_CC_JOBS=$jobs TG_CACHE_DIR="$tmp/c$jobs" "$TGC" run "$tmp/four.json" -i "$A" -i "$B"
  four_values
  [ ! -e "$tmp/time.log" ] && pass "the second run compiles nothing" || fail "it compiled: $(cat "$tmp/time.log")"
done
# A compiler that fails: one warning, the interpreter's values, and each
# kernel tried once (not once more at the run).
cat >"$tmp/failcc" <<'SH'
#!/bin/sh
[ "$1" = --version ] && exec cc "$@"
echo try >>"$(dirname "$0")/fail.log"
echo "failcc: no" >&2
exit 1
SH
chmod +x "$tmp/failcc"
expect 0 "four bodies, a compiler that fails" -- \
  env TG_CC="$tmp/failcc" TG_CC_JOBS=4 TG_CACHE_DIR="$tmp/cfail" "$TGC" run "$tmp/four.json" -i "$A" -i "$B"
four_values
[ "$(grep -c warning "$tmp/err")" -eq 1 ] && pass "one warning" || fail "warnings: $(cat "$tmp/err")"
contains err "interpreter: the C compiler $tmp/failcc failed (exit status 1): failcc: no" "the warning says why"
[ "$(wc -l <"$tmp/fail.log")" -eq 4 ] && pass "each kernel tried once" || fail "$(wc -l <"$tmp/fail.log") tries"
unset TG_CC
# ---- entries unused for a while go ----
# A kernel loaded from the folder marks its entry used (its file's time,
# at most once an hour); clear --older-than removes only the entries not
# used for AGE; TG_CACHE_MAX_AGE days unused, they go by themselves, once
# a day (the lock file's time), at the first use of the folder.
export TG_CACHE_DIR=$tmp/cage TG_CC=$tmp/cc
rm -f "$tmp/cc.log"
mtime() { stat -c %Y "$1"; }
err_line() { [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$1" "$tmp/err" && pass "one line: $1" || fail "stderr: $(cat "$tmp/err")"; }
days_ago() { echo $(( $(date +%s) - $1 * 86400 )); }
expect 0 "a kernel for the age checks" -- "$TGC" run "$G" -i "$A" -i "$B"
so=$(ls "$TG_CACHE_DIR"/*.so); src=${so%.so}.c
touch -d "@$(days_ago 40)" "$so" "$src"
expect 0 "a run that loads it" -- "$TGC" run "$G" -i "$A" -i "$B"
[ "$(wc -l <"$tmp/cc.log")" -eq 1 ] && pass "loaded, not compiled" || fail "compiled $(wc -l <"$tmp/cc.log") times"
[ $(( $(date +%s) - $(mtime "$so") )) -lt 600 ] && pass "loading marks the entry used" \
  || fail "the kernel's time stayed $(stat -c %y "$so")"
expect 0 "list after the load" -- "$TGC" cache list
contains out "^[0-9a-f]\{32\} cpu  *[0-9]*  *[0-9]*s  " "list's age is since the last use"
touch "$TG_CACHE_DIR/keep.txt"
expect 0 "clear --older-than 1d of an entry used now" -- "$TGC" cache clear --older-than 1d
contains out "removed 0 entries" "nothing removed"
[ -e "$so" ] && [ -e "$src" ] && pass "the entry stays" || fail "the entry went"
touch -d "@$(days_ago 2)" "$so" "$src" "$TG_CACHE_DIR/keep.txt"
expect 0 "clear --older-than=36h of an entry unused for 2 days" -- "$TGC" cache clear --older-than=36h
contains out "removed 1 entry" "one entry removed"
[ ! -e "$so" ] && [ ! -e "$src" ] && pass "its kernel and source went" || fail "$(ls "$TG_CACHE_DIR")"
[ -e "$TG_CACHE_DIR/keep.txt" ] && pass "a file not the cache's stays, however old" || fail "keep.txt went"
for bad in 5x -1 "" 2w nan 1e999; do
  expect 2 "clear --older-than '$bad'" -- "$TGC" cache clear --older-than "$bad"
  err_line "^tgc cache: --older-than '$bad': expected an age such as 30d, 12h, 90m or 3600s$"
done
expect 2 "clear --older-than without an age" -- "$TGC" cache clear --older-than
err_line "^tgc cache: --older-than needs an AGE"
expect 2 "clear with another word" -- "$TGC" cache clear all
err_line "^tgc cache: unexpected 'all' after clear"
# by themselves
rm -f "$tmp/cc.log"
expect 0 "compile it again" -- "$TGC" run "$G" -i "$A" -i "$B"
touch -d "@$(days_ago 20)" "$so" "$src"
expect 0 "TG_CACHE_MAX_AGE=10, the folder pruned less than a day ago" -- \
  env TG_CACHE_MAX_AGE=10 "$TGC" run "$G" -i "$A" -i "$B"
[ "$(wc -l <"$tmp/cc.log")" -eq 1 ] && pass "not pruned: loaded" || fail "compiled $(wc -l <"$tmp/cc.log") times"
touch -d "@$(days_ago 20)" "$so" "$src"
touch -d "@$(days_ago 2)" "$TG_CACHE_DIR/lock"
expect 0 "TG_CACHE_MAX_AGE=0 keeps it" -- env TG_CACHE_MAX_AGE=0 "$TGC" run "$G" -i "$A" -i "$B"
[ "$(wc -l <"$tmp/cc.log")" -eq 1 ] && pass "kept: loaded" || fail "compiled $(wc -l <"$tmp/cc.log") times"
touch -d "@$(days_ago 20)" "$so" "$src"
expect 0 "TG_CACHE_MAX_AGE=30 keeps an entry 20 days unused" -- env TG_CACHE_MAX_AGE=30 "$TGC" run "$G" -i "$A" -i "$B"
[ "$(wc -l <"$tmp/cc.log")" -eq 1 ] && pass "kept: loaded" || fail "compiled $(wc -l <"$tmp/cc.log") times"
[ $(( $(date +%s) - $(mtime "$TG_CACHE_DIR/lock") )) -lt 600 ] && pass "the prune is noted on the lock file" \
  || fail "the lock file's time stayed $(stat -c %y "$TG_CACHE_DIR/lock")"
touch -d "@$(days_ago 20)" "$so" "$src"
touch -d "@$(days_ago 2)" "$TG_CACHE_DIR/lock"
expect 0 "TG_CACHE_MAX_AGE=10 removes an entry 20 days unused" -- \
  env TG_CACHE_MAX_AGE=10 "$TGC" run "$G" -i "$A" -i "$B"
contains out "4\. *, *1\. *, *12.25, *16\." "the values"
[ "$(wc -l <"$tmp/cc.log")" -eq 2 ] && pass "removed, then compiled again" || fail "compiled $(wc -l <"$tmp/cc.log") times"
[ -e "$TG_CACHE_DIR/keep.txt" ] && pass "a file not the cache's stays" || fail "keep.txt went"
unset TG_CC
export TG_CACHE_DIR=$tmp/cache
expect 2 "bad subcommand" -- "$TGC" cache frob
contains err "expected 'list' or 'clear'" "bad subcommand message"
expect 2 "no subcommand" -- "$TGC" cache
expect 0 "cache --help" -- "$TGC" cache --help
expect 0 "tgc --help mentions cache" -- "$TGC" --help
contains out "tgc cache list|clear" "usage line"
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
