#!/usr/bin/env bash
# Memory of a 3-node loopback cluster holding ~100k instances: VmRSS per process.
# Usage: scripts/bench-rss.sh PATH-TO-ROSTER-BINARY
set -euo pipefail
BIN=$1; D=$(mktemp -d)
P=n1=127.0.0.1:28011,n2=127.0.0.1:28012,n3=127.0.0.1:28013
pids=()
for i in 1 2 3; do $BIN server --node-id n$i --data-dir $D/n$i --http-addr 127.0.0.1:2800$i --raft-addr 127.0.0.1:2801$i --peers $P --probe-allow 127.0.0.0/8,::1/128 --log-level error & pids+=($!); done
trap 'kill ${pids[@]} 2>/dev/null; wait 2>/dev/null; rm -rf $D' EXIT
until $BIN ready --addr 127.0.0.1:28001 >/dev/null 2>&1; do sleep 0.2; done
rss() { for p in "${pids[@]}"; do awk -v p=$p '/VmRSS/{printf "pid %s VmRSS %.1f MiB  ", p, $2/1024}' /proc/$p/status; done; echo; }
echo "idle: $(rss)"
# 64 writers until 100k instances exist (the register workload registers distinct instances)
$BIN bench --system roster --endpoints 127.0.0.1:28001,127.0.0.1:28002,127.0.0.1:28003 --workload register --concurrency 64 --duration 22s --warmup 0s --cpu-pids $(IFS=,; echo "${pids[*]}") 2>&1 | grep -E "register +64"
total=0
for s in $(seq 0 99); do n=$(curl -s "127.0.0.1:28001/v1/namespaces/public/groups/DEFAULT_GROUP/services/bench-svc-$(printf %03d $s)/instances?consistency=stale" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("instances",[])))' 2>/dev/null || echo 0); total=$((total+n)); done
echo "instances registered: $total"
$BIN services --addr 127.0.0.1:28001 -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("services:", d["total"], [s["name"] for s in d["services"][:3]])'
sleep 2
echo "after: $(rss)"
du -sh $D/n1/state.db $D/n1/raft
