#!/usr/bin/env bash
# Memory of a 3-node loopback cluster holding 100k instances: VmRSS per process.
# Usage: scripts/bench-rss.sh [--instances N] [--duration D] [--profile DIR] PATH-TO-ROSTER-BINARY
#   --instances N  register exactly N instances (default 100000; 0: register for --duration)
#   --duration D   bound on the registration phase (default 10m; 22s with --instances 0,
#                  the figure of the earlier measurements)
#   --profile DIR  run the servers with --pprof and write each node's heap profile
#                  (after a GC: inuse_space) to DIR/heap-nI.pprof when RSS is read
# The load comes from roster-bench: ROSTER_BENCH_BIN, or built from ./cmd/roster-bench.
# Extra environment for the servers (for example GOMEMLIMIT) is passed through.
set -euo pipefail
N=100000; DUR=""; PROF=""
while [ $# -gt 1 ]; do
  case $1 in
    --instances) N=$2; shift 2;;
    --duration) DUR=$2; shift 2;;
    --profile) PROF=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
BIN=$1; D=$(mktemp -d)
if [ -n "${ROSTER_BENCH_BIN:-}" ]; then BENCH=$ROSTER_BENCH_BIN; else BENCH=$D/roster-bench; (cd "$(dirname "$0")/.." && go build -o "$BENCH" ./cmd/roster-bench); fi
if [ -z "$DUR" ]; then if [ "$N" -gt 0 ]; then DUR=10m; else DUR=22s; fi; fi
P=n1=127.0.0.1:28011,n2=127.0.0.1:28012,n3=127.0.0.1:28013
extra=(); if [ -n "$PROF" ]; then mkdir -p "$PROF"; extra=(--pprof); fi
pids=()
for i in 1 2 3; do $BIN server --node-id n$i --data-dir $D/n$i --http-addr 127.0.0.1:2800$i --raft-addr 127.0.0.1:2801$i --peers $P --probe-allow 127.0.0.0/8,::1/128 --log-level error "${extra[@]}" & pids+=($!); done
trap 'kill ${pids[@]} 2>/dev/null; wait 2>/dev/null; rm -rf $D' EXIT
until $BIN ready --addr 127.0.0.1:28001 >/dev/null 2>&1; do sleep 0.2; done
# VmRSS, and its parts: RssAnon (heap, stacks) and RssFile (pages of the mapped
# state.db and raft.db, and of the binary)
rss() { for p in "${pids[@]}"; do awk -v p=$p '/^VmRSS/{r=$2} /^RssAnon/{a=$2} /^RssFile/{f=$2} END{printf "pid %s VmRSS %.1f MiB (anon %.1f, file %.1f)  ", p, r/1024, a/1024, f/1024}' /proc/$p/status; done; echo; }
echo "idle: $(rss)"
# 64 writers register distinct instances: exactly N of them (or for DUR with N=0).
$BENCH --system roster --endpoints 127.0.0.1:28001,127.0.0.1:28002,127.0.0.1:28003 --workload register --concurrency 64 --duration $DUR --warmup 0s --register-limit $N --cpu-pids $(IFS=,; echo "${pids[*]}") 2>&1 | grep -E "register +64"
total=0
for s in $(seq 0 99); do n=$(curl -s "127.0.0.1:28001/v1/namespaces/public/groups/DEFAULT_GROUP/services/bench-svc-$(printf %03d $s)/instances?consistency=stale" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("instances",[])))' 2>/dev/null || echo 0); total=$((total+n)); done
echo "instances registered: $total"
$BIN services --addr 127.0.0.1:28001 -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("services:", d["total"], [s["name"] for s in d["services"][:3]])'
sleep 2
echo "after: $(rss)"
# resident pages of each mapped database file (part of RssFile)
for i in "${!pids[@]}"; do awk -v n=n$((i+1)) '/^[0-9a-f]+-[0-9a-f]+ /{f=($6 ~ /\.db$/) ? $6 : ""} /^Rss:/{if (f != "") r[f]+=$2} END{printf "%s mapped:", n; for (k in r) {m=k; sub(/.*\/n[0-9]\//, "", m); printf " %s %.1f MiB", m, r[k]/1024}; print ""}' /proc/${pids[$i]}/smaps; done
leader=$(curl -s 127.0.0.1:28001/v1/status/leader | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
echo "leader: $leader"
if [ -n "$PROF" ]; then
  for i in 1 2 3; do
    curl -s -o "$PROF/heap-n$i.pprof" "127.0.0.1:2800$i/debug/pprof/heap?gc=1"
    # the runtime's view: live heap, heap kept but unused, returned to the OS, next GC
    curl -s "127.0.0.1:2800$i/debug/pprof/heap?debug=1" | awk -v n=n$i '/^# (HeapAlloc|HeapInuse|HeapIdle|HeapReleased|StackInuse|Sys|NextGC) =/{printf "%s%s %.1f MiB", (c++ ? ", " : n " runtime: "), $2, $4/1048576} END{print ""}'
  done
  echo "heap profiles: $PROF/heap-n{1,2,3}.pprof (go tool pprof -sample_index=inuse_space)"
fi
du -sh $D/n1/state.db $D/n1/raft
