#!/bin/bash
# icount_engine.sh [BENCH_ENGINE] [EVENTS] - instructions per event of the statistics engine on
# workload (a) with the defaults (histograms, 3 windows), counted by valgrind's callgrind: the
# inclusive count of tlc_engine_push (act_close and hlog_flush are inside it when they are not
# inlined) over bench_engine's engine-alone and decode + engine runs, divided by the events
# pushed (2 x EVENTS). Unlike a timing, the count is the same on every run of the same binary,
# whatever else the host is doing, so it shows the effect of a change to the push path that the
# noise of a shared VM hides; a timed A/B (ab_engine.sh) still decides what is kept, since cache
# misses do not show in the count.
# Defaults: build/bench/bench/bench_engine (bench/run builds it), 2,000,000 events.
set -eu
cd "$(dirname "$0")/.."
bin=${1:-build/bench/bench/bench_engine}
n=${2:-2000000}
command -v valgrind >/dev/null || {
  echo "icount_engine.sh: valgrind is not installed (apt-get install valgrind)" >&2
  exit 2
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$n" 0 1 3 0 >/dev/null 2>&1
callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
  awk -v n="$n" '/:(tlc_engine_push|act_close|hlog_flush) / {
    x = $1; gsub(",", "", x); f = $0; sub(/.*:/, "", f); sub(/ .*/, "", f)
    printf "%-16s %6.1f instructions per event\n", f, x / (2 * n) }'
