#!/bin/bash
# icount_ingest.sh [BUILD_DIR] - instructions per event of the whole tlcapd (every thread: loop,
# storage writer, sealer with its main export) ingesting bin11 over loopback, with storage and
# with --no-store, counted by valgrind's callgrind. Each configuration runs twice, with an 8 MiB
# and a 24 MiB stream (one connection, half-closed, then SIGTERM, which seals the open segment
# and writes its main export); the difference of the two totals divided by the difference of
# the records cancels start-up and shutdown. Like icount_engine.sh, the count is the same on
# every run whatever else the shared host does; the kernel's share (write(2), page cache) is
# not in it. BUILD_DIR holds daemon/tlcapd and bench/benchd_io (default build/bench).
set -eu
cd "$(dirname "$0")/.."
b=${1:-build/bench}
command -v valgrind >/dev/null || {
  echo "icount_ingest.sh: valgrind is not installed (apt-get install valgrind)" >&2
  exit 2
}
total() { # MIB STORE(0|1) -> instructions of the daemon's whole run
  local d port pid ns=--no-store
  d=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  [ "$2" = 1 ] && ns=
  valgrind --tool=callgrind --callgrind-out-file="$d/cg.out" "$b/daemon/tlcapd" \
    --listen "bench=bin11@127.0.0.1:$port" $ns --serve "" --state-dir "$d/state" >"$d/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do grep -q ready "$d/log" 2>/dev/null && break; sleep 0.1; done
  "$b/bench/benchd_io" send "127.0.0.1:$port" --mib "$1" --passes 1 >/dev/null
  kill -TERM "$pid"
  wait "$pid" || true
  callgrind_annotate "$d/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { x = $1; gsub(",", "", x); print x }'
  rm -rf "$d"
}
recs() { echo $(($1 * 1048576 / 24)); }
for store in 0 1; do
  a=$(total 8 $store)
  z=$(total 24 $store)
  awk -v a="$a" -v z="$z" -v n=$(($(recs 24) - $(recs 8))) -v s=$store 'BEGIN {
    printf "%-12s %6.1f instructions per event\n", s ? "storage" : "--no-store", (z - a) / n }'
done
