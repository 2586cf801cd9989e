#!/usr/bin/env bash
# tgc run --dnn-conv-algo: an unknown policy (from the flag or from
# TG_DNN_CONV_ALGO) is bad usage, exit 2 with one line listing the valid
# ones; each valid one gives the convolution worked out by hand, with or
# without a GPU.
set -euo pipefail
tgc=${TGC:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/g.json" <<'J'
{"format":"tg-graph","version":1,
 "variables":[{"id":"x","type":{"dtype":"float32","shape":[1,1,3,3]}},
              {"id":"w","type":{"dtype":"float32","shape":[1,1,2,2]}}],
 "nodes":[{"op":"conv2d","inputs":["x","w"],"outputs":["y"],"attrs":{"filter_flip":false}}],
 "functions":{"main":{"inputs":["x","w"],"outputs":["y"]}}}
J
args=(-i 'x=[[[[1,2,3],[4,5,6],[7,8,9]]]]' -i 'w=[[[[1,2],[3,4]]]]' --device cuda)
expect_usage() { # what, then the command
    local what=$1
    shift
    set +e
    "$@" 2> "$tmp/err" > /dev/null
    local rc=$?
    set -e
    [ "$rc" = 2 ] || { echo "FAIL: $what: exit $rc, expected 2"; exit 1; }
    grep -v "^tg: device cuda" "$tmp/err" > "$tmp/err1" || true
    [ "$(wc -l < "$tmp/err1")" = 1 ] || { echo "FAIL: $what: $(cat "$tmp/err")"; exit 1; }
    for p in guess_once guess_on_shape_change time_once time_on_shape_change; do
        grep -q "$p" "$tmp/err1" || { echo "FAIL: $what: does not list $p: $(cat "$tmp/err1")"; exit 1; }
    done
}
expect_usage "--dnn-conv-algo fastest" "$tgc" run "$tmp/g.json" "${args[@]}" --dnn-conv-algo fastest
grep -q "'fastest'" "$tmp/err1" || { echo "FAIL: the message does not name the policy"; exit 1; }
expect_usage "TG_DNN_CONV_ALGO=bogus" env TG_DNN_CONV_ALGO=bogus "$tgc" run "$tmp/g.json" "${args[@]}"
grep -q "TG_DNN_CONV_ALGO" "$tmp/err1" || { echo "FAIL: the message does not name the variable"; exit 1; }
echo "ok: unknown policies"
# A cross-correlation by hand: y[i, j] = x[i, j] + 2 x[i, j+1] + 3 x[i+1, j]
# + 4 x[i+1, j+1] = [[37, 47], [67, 77]].
for p in guess_once guess_on_shape_change time_once time_on_shape_change; do
    "$tgc" run "$tmp/g.json" "${args[@]}" --dnn-conv-algo "$p" -o "$tmp/$p" 2> /dev/null
    /usr/bin/python3 - "$tmp/$p/y.npy" <<'P'
import sys, numpy as np
got = np.load(sys.argv[1])
assert got.shape == (1, 1, 2, 2) and np.array_equal(got[0, 0], [[37, 47], [67, 77]]), got
P
done
echo "ok: every policy gives the convolution"
