#!/usr/bin/env bash
# DNS queries per second, latency and CPU of one node: `roster dev` pinned to CPU 0
# (taskset), the load generator (scripts/dns-bench) pinned to CPU 1, over loopback UDP,
# asking A (then SRV) of a 10-instance service. Bounded: each run is 2 s of warm-up and
# DURATION of load (default 10s). Needs taskset (util-linux) and 2 CPUs.
# Usage: scripts/bench-dns.sh [DURATION] [CONCURRENCY...]    e.g. scripts/bench-dns.sh 10s 1 16 64
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10s}; shift || true
CONCS=${*:-"1 16 64"}
D=$(mktemp -d)
go build -o "$D/roster" ./cmd/roster
go build -o "$D/dns-bench" ./scripts/dns-bench
HTTP=127.0.0.1:28848 DNS=127.0.0.1:28600
taskset -c 0 "$D/roster" dev --data-dir "$D/data" --http-addr $HTTP --raft-addr 127.0.0.1:27848 \
	--dns-addr $DNS --dns-rate-limit 0 --log-level error >"$D/dev.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$D"' EXIT
until "$D/roster" ready --addr $HTTP >/dev/null 2>&1; do sleep 0.2; done
echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo); load average $(cut -d' ' -f1-3 /proc/loadavg)"
setup=(-http $HTTP -setup 10)
for c in $CONCS; do
	for t in A SRV; do
		echo "--- $t, concurrency $c"
		taskset -c 1 "$D/dns-bench" -addr $DNS "${setup[@]}" -type $t -concurrency "$c" -duration "$DURATION" -warmup 2s -pid $pid
	done
done
