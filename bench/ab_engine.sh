#!/bin/bash
# ab_engine.sh A_BIN B_BIN ROUNDS [bench_engine args...] - an A/B of two bench_engine builds
# (copies of build/bench/bench/bench_engine from before and after a change): runs A and B in
# turn, ROUNDS times each, so that the host's slow and fast moments fall on both, and prints per
# binary and workload the engine-alone / decode+engine figures (M events/s) of every round,
# sorted. Default arguments: the defaults configuration of workloads (a) and (c).
set -eu
a=$1 b=$2 rounds=$3
shift 3
[ $# -gt 0 ] || set -- 20000000 0 5 3 20000000
for _ in $(seq "$rounds"); do
  for v in A B; do
    if [ $v = A ]; then bin=$a; else bin=$b; fi
    "$bin" "$@" 2>&1 | grep -E "engine-only" |
      sed -E "s/^([a-z0-9-]+) .*engine-only +([0-9.]+).*decode\+engine +([0-9.]+).*/$v \1 \2 \3/"
  done
done | sort -k1,2 -k3n | awk '{k=$1" "$2; a[k]=a[k]" "$3"/"$4} END{for(k in a) print k":"a[k]}' | sort
