#!/bin/bash
# icount_evlog.sh [BUILD_DIR] - instructions per evlog block of the whole tlcapd (every thread)
# ingesting an evlog stream over loopback, with storage and with --no-store, counted by
# valgrind's callgrind: icount_ingest.sh's method (an 8 MiB and a 24 MiB run per configuration,
# the difference of the two totals over the difference of the blocks, which cancels start-up and
# shutdown) for the evlog path. The stream: blocks of 1..12 items (+name/-name pairs, state and
# data items of 3 threads, about 280 bytes a block), made by tests/integ/tlctest.py's evlog
# writer with a fixed seed. BUILD_DIR holds daemon/tlcapd (default build/bench).
set -eu
cd "$(dirname "$0")/.."
b=${1:-build/bench}
command -v valgrind >/dev/null || {
  echo "icount_evlog.sh: valgrind is not installed (apt-get install valgrind)" >&2
  exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gen() { # MIB FILE -> the number of blocks written
  python3 - "$1" "$2" <<'EOF'
import random, sys
sys.path.insert(0, "tests/integ")
import tlctest as T
mib, path = int(sys.argv[1]), sys.argv[2]
rnd = random.Random(17)
t = [1.0, 1.001, 1.002]
stacks = [[], [], []]
out, n, size = [], 0, 0
while size < mib << 20:
    items = []
    for _ in range(rnd.randint(1, 12)):
        k = rnd.randrange(3)
        t[k] += rnd.randint(1, 50000) * 1e-9
        st, r = stacks[k], rnd.random()
        if r < 0.1:
            items.append(T.evlog_item(t[k], 0x100 + k, "!data%d" % rnd.randrange(2)))
        elif r < 0.2:
            items.append(T.evlog_item(t[k], 0x100 + k, ">busy" if r < 0.15 else "<busy"))
        elif r < 0.6 or not st:
            if len(st) < 5:
                st.append("f%d" % rnd.randrange(4))
                items.append(T.evlog_item(t[k], 0x100 + k, "+" + st[-1]))
        else:
            items.append(T.evlog_item(t[k], 0x100 + k, "-" + st.pop()))
    if items:
        blk = T.evlog_block(items)
        out.append(blk)
        size += len(blk)
        n += 1
open(path, "wb").write(b"".join(out))
print(n)
EOF
}
total() { # FILE STORE(0|1) -> instructions of the daemon's whole run
  local d port pid ns=--no-store
  d=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  [ "$2" = 1 ] && ns=
  valgrind --tool=callgrind --callgrind-out-file="$d/cg.out" "$b/daemon/tlcapd" \
    --listen "bench=evlog@127.0.0.1:$port" $ns --serve "" --state-dir "$d/state" >"$d/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do grep -q ready "$d/log" 2>/dev/null && break; sleep 0.1; done
  python3 -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(open(sys.argv[2], "rb").read())
s.shutdown(socket.SHUT_WR)
s.recv(1)' "$port" "$1"
  kill -TERM "$pid"
  wait "$pid" || true
  callgrind_annotate "$d/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { x = $1; gsub(",", "", x); print x }'
  rm -rf "$d"
}
na=$(gen 8 "$work/a.log")
nz=$(gen 24 "$work/z.log")
for store in 0 1; do
  a=$(total "$work/a.log" $store)
  z=$(total "$work/z.log" $store)
  awk -v a="$a" -v z="$z" -v n=$((nz - na)) -v s=$store 'BEGIN {
    printf "%-12s %7.1f instructions per block\n", s ? "storage" : "--no-store", (z - a) / n }'
done
