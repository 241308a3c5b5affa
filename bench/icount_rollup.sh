#!/bin/sh
# icount_rollup.sh BENCH_ROLLUP [EVENTS] - instructions per event of the engine alone and of the
# engine with the rollup tap (the loop's share: the worker thread is not counted), callgrind,
# steady whatever the machine's load. Each figure from a run of that round alone (bench_rollup's
# fourth argument), on a fresh heap: a round after the other pays ~10 an event for the holes
# the first engine's free left (bench/RESULTS.md "Rollups", "A fresh heap for each figure").
set -e
B=$1
N=${2:-200000}
for f in bench_plain bench_tap; do
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect=$f "$B" "$N" 1 0 $f \
    >/dev/null 2>&1
  ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  rm -f "$out"
  echo "$f: $ir instructions, $(echo "scale=1; $ir / $N" | bc) per event"
done
