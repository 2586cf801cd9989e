#!/usr/bin/env bash
# Compare two builds of bench_opt on this machine, alternating runs so that
# both see the same conditions (the machine's speed drifts by 20% from one
# minute to the next, more than most changes to the optimizer).
#   bash bench/ab_opt.sh OLD/bench_opt NEW/bench_opt [ROUNDS] [--traces]
#       (ROUNDS default 4; --traces: the graphs with a trace on every node,
#       which both builds must know)
# Prints each run's fast_run times for 10,000 and 100,000 nodes and their
# ratio, then the mean of each build.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bash bench/ab_opt.sh OLD_BENCH_OPT NEW_BENCH_OPT [ROUNDS] [--traces]" >&2
  exit 2
fi
old=$1 new=$2 rounds=${3:-4} flags=()
[ "${4:-}" = --traces ] && flags=(--traces)
for i in $(seq "$rounds"); do
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    "$bin" "${flags[@]}" 10000 100000 | awk -v w="$which" '
      $1 == 10000 { a = $6 } $1 == 100000 { b = $6 }
      END { printf "%s 10k %s s 100k %s s ratio %.1f\n", w, a, b, b / a }'
  done
done | awk '{ print } { s10[$1] += $3; s100[$1] += $6; n[$1]++ }
  END { for (w in n) printf "mean %s: 10k %.4f s, 100k %.4f s, ratio %.1f\n", w, s10[w] / n[w], s100[w] / n[w], s100[w] / s10[w] }'
