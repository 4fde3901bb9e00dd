#!/usr/bin/env bash
# SSE fan-out: many subscribers on one node of a fresh 3-node loopback Roster cluster.
#
# Builds roster and roster-bench, raises the open-file limit, starts a 3-node cluster on 127.0.0.1 (HTTP
# PORT_BASE+1..3, Raft PORT_BASE+11..13, data in a temporary directory), then runs
# `roster-bench fanout` against a follower (the leader with --on-leader): it opens
# WATCHERS SSE subscribers on that node, waits until all have their first event, takes the
# node's RSS before and after (idle), makes WRITES writes one at a time (each waited for by
# every subscriber) and reports per-subscriber delivery latency, the node's responsiveness
# (GET /v1/status/ready and a stale read every 10 ms) and every member's Raft last contact
# against the 50 ms heartbeat interval. It prints the table and writes the JSON (--out).
# The service followed has loopback instances and health check NONE: nothing leaves
# 127.0.0.0/8.
#
# Usage: scripts/bench-watch-fanout.sh [--watchers 10000] [--writes 20] [--instances 10]
#          [--on-leader] [--out fanout-results.json] [--port-base 22000] [--keep]
#          [-- MORE roster-bench fanout FLAGS]
# Every flag also reads an environment variable: WATCHERS, WRITES, INSTANCES, OUT,
# PORT_BASE; ROSTER_BIN uses a prebuilt binary instead of building ./cmd/roster, and
# ROSTER_BENCH_BIN one instead of building ./cmd/roster-bench.
# Open files: the node holds one socket per subscriber and so does the bench, two
# processes that each need WATCHERS + about 1000 descriptors. The script raises the limit
# to 2×WATCHERS+1024 (or the hard limit, if lower) and stops when it stays below
# WATCHERS+1024.
# 10,000 subscribers take about half a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

WATCHERS=${WATCHERS:-10000}
WRITES=${WRITES:-20}
INSTANCES=${INSTANCES:-10}
OUT=${OUT:-fanout-results.json}
PORT_BASE=${PORT_BASE:-22000}
ON_LEADER=0
KEEP=0
EXTRA=()

while [ $# -gt 0 ]; do
	case "$1" in
	--watchers) WATCHERS=$2; shift 2 ;;
	--writes) WRITES=$2; shift 2 ;;
	--instances) INSTANCES=$2; shift 2 ;;
	--on-leader) ON_LEADER=1; shift ;;
	--out) OUT=$2; shift 2 ;;
	--port-base) PORT_BASE=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--) shift; EXTRA=("$@"); break ;;
	-h | --help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done
case "$WATCHERS" in '' | *[!0-9]*) echo "--watchers $WATCHERS: want a number" >&2; exit 2 ;; esac

log() { printf '== %s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- open files and ports ----------------------------------------------------------------
need=$((WATCHERS + 1024))
want=$((2 * WATCHERS + 1024))
soft=$(ulimit -Sn)
hard=$(ulimit -Hn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$want" ]; then
	if [ "$hard" = unlimited ] || [ "$hard" -ge "$want" ]; then
		ulimit -Sn "$want"
	else
		# Root may raise the hard limit too; elsewhere settle for the hard limit.
		ulimit -n "$want" 2>/dev/null || ulimit -Sn "$hard"
	fi
fi
soft=$(ulimit -Sn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$need" ]; then
	echo "open files: $WATCHERS subscribers need $need descriptors in the node and in the bench each," >&2
	echo "but the limit is $soft (hard limit $(ulimit -Hn)), and it cannot be raised here." >&2
	echo "Raise the hard limit (as root: ulimit -Hn $want; docker run --ulimit nofile=$want;" >&2
	echo "systemd LimitNOFILE=$want) or use fewer --watchers." >&2
	exit 1
fi
read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
if [ $((hi - lo)) -lt $((WATCHERS + 1000)) ]; then
	echo "ephemeral ports: $lo-$hi is too narrow for $WATCHERS connections from one address;" >&2
	echo "widen net.ipv4.ip_local_port_range or use fewer --watchers" >&2
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/roster-fanout.XXXXXX")
PIDS=()
CHILD=

# wait_gone PID: wait up to 10 s for a process to exit.
wait_gone() {
	local n
	for ((n = 0; n < 100; n++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}

stop_cluster() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait_gone "$p" || kill -KILL "$p" 2>/dev/null || true; done
	PIDS=()
}

cleanup() {
	[ "$BASHPID" = "$$" ] || return 0
	if [ -n "$CHILD" ]; then kill -TERM "$CHILD" 2>/dev/null || true; fi
	stop_cluster
	if [ "$KEEP" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- tools -----------------------------------------------------------------------------
if ! command -v jq >/dev/null; then
	log "installing jq from Debian's packages"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null
fi
if [ -n "${ROSTER_BIN:-}" ]; then
	ROSTER=$ROSTER_BIN
else
	log "building roster"
	go build -o "$WORK/roster" ./cmd/roster
	ROSTER=$WORK/roster
fi
if [ -n "${ROSTER_BENCH_BIN:-}" ]; then
	ROSTER_BENCH=$ROSTER_BENCH_BIN
else
	log "building roster-bench"
	go build -o "$WORK/roster-bench" ./cmd/roster-bench
	ROSTER_BENCH=$WORK/roster-bench
fi

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for i in 1 2 3; do
	for p in $((PORT_BASE + i)) $((PORT_BASE + 10 + i)); do
		port_free "$p" || { echo "port $p is in use; choose another --port-base" >&2; exit 1; }
	done
done

# --- cluster ---------------------------------------------------------------------------
EPS=("127.0.0.1:$((PORT_BASE + 1))" "127.0.0.1:$((PORT_BASE + 2))" "127.0.0.1:$((PORT_BASE + 3))")
PEERS="n1=127.0.0.1:$((PORT_BASE + 11)),n2=127.0.0.1:$((PORT_BASE + 12)),n3=127.0.0.1:$((PORT_BASE + 13))"
log "starting a 3-node roster cluster (open-file limit $(ulimit -Sn))"
for i in 1 2 3; do
	"$ROSTER" server --node-id "n$i" --data-dir "$WORK/n$i" \
		--http-addr "${EPS[i - 1]}" --raft-addr "127.0.0.1:$((PORT_BASE + 10 + i))" \
		--peers "$PEERS" --probe-allow 127.0.0.0/8,::1/128 --log-level warn >>"$WORK/n$i.log" 2>&1 &
	PIDS[i - 1]=$!
done

ready() {
	local ep
	for ep in "${EPS[@]}"; do curl -sf -m 2 "http://$ep/v1/status/ready" >/dev/null || return 1; done
	curl -sf -m 2 "http://${EPS[0]}/v1/status/leader" | jq -e '.httpAddr != ""' >/dev/null
}
deadline=$((SECONDS + 60))
until ready; do
	if [ $SECONDS -ge $deadline ]; then
		echo "the cluster did not become ready; logs:" >&2
		tail -n 30 "$WORK"/*.log >&2
		exit 1
	fi
	sleep 0.2
done

# leader_index: the number (1..3) of the leader now.
leader_index() {
	local addr i
	addr=$(curl -sf -m 2 "http://${EPS[0]}/v1/status/leader" | jq -r '.httpAddr')
	for i in 1 2 3; do [ "${EPS[i - 1]}" = "$addr" ] && { echo "$i"; return; }; done
	echo "cannot find the leader (got '$addr')" >&2
	return 1
}
leader=$(leader_index)
target=$leader
if [ "$ON_LEADER" = 0 ]; then
	for i in 1 2 3; do [ "$i" != "$leader" ] && { target=$i; break; }; done
fi
others=()
for i in 1 2 3; do [ "$i" != "$target" ] && others+=("${EPS[i - 1]}"); done
role=follower
[ "$target" = "$leader" ] && role=leader
log "subscribers on n$target (${EPS[target - 1]}, the $role, pid ${PIDS[target - 1]}); leader n$leader"

# --- measurement -----------------------------------------------------------------------
"$ROSTER_BENCH" fanout --endpoint "${EPS[target - 1]}" --others "$(IFS=,; echo "${others[*]}")" \
	--pid "${PIDS[target - 1]}" --watchers "$WATCHERS" --writes "$WRITES" --instances "$INSTANCES" \
	--json "$OUT" "${EXTRA[@]}" > >(tee "$WORK/fanout.txt") &
CHILD=$!
rc=0
wait "$CHILD" || rc=$?
CHILD=
if now=$(leader_index) && [ "$now" != "$leader" ]; then
	echo "note: leadership moved from n$leader to n$now during the run" | tee -a "$WORK/fanout.txt"
fi
echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM; $(go version | awk '{print $3}'); results: $OUT"
exit "$rc"
