#!/usr/bin/env bash
# Roster vs etcd on this machine, on loopback, one system at a time.
#
# Builds roster, installs etcd from Debian's packages if it is missing, then for each round
# starts a fresh 3-node Roster cluster, measures it, stops it, starts a fresh 3-node etcd
# cluster, measures it, stops it (A B A B ...; the two never run at once). Every point uses
# the same concurrency levels, warm-up and duration on both systems, and reports the CPU
# the cluster's three processes used over the measured window (cores). At the end it prints
# one table of medians over rounds with Roster/etcd ratios and writes the JSON comparison.
# Roster's bench services get health-check type NONE (`roster-bench --health-checks` keeps
# the default TCP probes): the bench's instances have unreachable addresses and etcd, a KV
# store, checks nothing.
# The watch points (--watch-concurrency watchers, stale, spread over every node) run in the
# same run Roster's watchers over SSE event streams, Roster's watchers over blocking
# queries (--watch-transports) and etcd's watch; each Roster transport is a row of its own
# ("watch stale all sse", "watch stale all blocking") compared with etcd's watch.
#
# Usage: scripts/bench-vs-etcd.sh [--duration 3s] [--warmup 1s] [--rounds 2]
#          [--concurrency 1,16,64,256] [--watch-concurrency 1,16,256]
#          [--watch-transports "sse blocking"] [--out bench-results.json] [--port-base 21000]
#          [--systems "roster etcd"] [--quick] [--keep]
#        scripts/bench-vs-etcd.sh --failover [--trials 10] [--out failover-results.json] ...
# --failover (what scripts/bench-failover.sh runs) measures failover instead: per system, one
# cluster; each trial puts write load on it, SIGKILLs the leader, reports the time until a
# write through a survivor succeeds, restarts the killed node and waits until all are ready;
# it prints the median and max per system.
# --quick measures only register, read-10 linearizable and the watch points spread over
# every node (for a smoke run).
# --keep leaves the temporary directory (logs, data, per-run JSON) in place.
# --systems restricts the run to one system (for debugging the script).
# --watch-transports "blocking" leaves out the SSE watch (for a server without it).
# Every flag also reads an environment variable: DURATION, WARMUP, ROUNDS, CONCURRENCY,
# WATCH_CONCURRENCY, WATCH_TRANSPORTS, OUT, PORT_BASE, SYSTEMS; ROSTER_BIN uses a prebuilt
# binary instead of building ./cmd/roster; ROSTER_SERVER_ARGS adds flags to every
# `roster server` (for example "--coalesce-writes=false" to compare).
# The defaults finish in about 13 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-3s}
WARMUP=${WARMUP:-1s}
ROUNDS=${ROUNDS:-2}
CONCURRENCY=${CONCURRENCY:-1,16,64,256}
WATCH_CONCURRENCY=${WATCH_CONCURRENCY:-1,16,256}
WATCH_TRANSPORTS=${WATCH_TRANSPORTS:-sse blocking}
OUT=${OUT:-bench-results.json}
PORT_BASE=${PORT_BASE:-21000}
SYSTEMS=${SYSTEMS:-roster etcd}
ROSTER_SERVER_ARGS=${ROSTER_SERVER_ARGS:-}
QUICK=0
KEEP=0
FAILOVER=0
TRIALS=${TRIALS:-10}

while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DURATION=$2; shift 2 ;;
	--warmup) WARMUP=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--concurrency) CONCURRENCY=$2; shift 2 ;;
	--watch-concurrency) WATCH_CONCURRENCY=$2; shift 2 ;;
	--watch-transports) WATCH_TRANSPORTS=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--port-base) PORT_BASE=$2; shift 2 ;;
	--systems) SYSTEMS=$2; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--failover) FAILOVER=1; shift ;;
	--trials) TRIALS=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h | --help) sed -n '2,35p' "$0"; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done
for t in $WATCH_TRANSPORTS; do
	case "$t" in sse | blocking) ;; *) echo "--watch-transports: unknown transport '$t' (want sse, blocking)" >&2; exit 2 ;; esac
done

log() { printf '== %s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/roster-bench.XXXXXX")
PIDS=()
CHILD=

# wait_gone PID: wait up to 10 s for a process to exit (the shell reaps its children).
wait_gone() {
	local n
	for ((n = 0; n < 100; n++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}

# stop_cluster: SIGTERM every node, SIGKILL those still there after 10 s.
stop_cluster() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		wait_gone "$p" || kill -KILL "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do wait_gone "$p" || true; done
	PIDS=()
}

# run_child CMD...: run a command in the background and wait for it, so that a signal
# reaches the traps at once (bash defers traps while a foreground command runs).
run_child() {
	"$@" &
	CHILD=$!
	local rc=0
	wait "$CHILD" || rc=$?
	CHILD=
	return "$rc"
}

cleanup() {
	# Only the script itself cleans up, never a subshell that inherited the trap.
	[ "$BASHPID" = "$$" ] || return 0
	if [ -n "$CHILD" ]; then kill -TERM "$CHILD" 2>/dev/null || true; fi
	stop_cluster
	if [ "$KEEP" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- tools -----------------------------------------------------------------------------
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null || ! command -v jq >/dev/null; then
	log "installing etcd-server, etcd-client and jq from Debian's packages"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client jq >/dev/null
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
	for p in $((PORT_BASE + i)) $((PORT_BASE + 10 + i)) $((PORT_BASE + 20 + i)) $((PORT_BASE + 30 + i)); do
		port_free "$p" || { echo "port $p is in use; choose another --port-base" >&2; exit 1; }
	done
done

# --- clusters --------------------------------------------------------------------------
# Roster: HTTP PORT_BASE+1..3, Raft PORT_BASE+11..13. etcd: client PORT_BASE+21..23, peer PORT_BASE+31..33.
R_ENDPOINTS="127.0.0.1:$((PORT_BASE + 1)),127.0.0.1:$((PORT_BASE + 2)),127.0.0.1:$((PORT_BASE + 3))"
R_PEERS="n1=127.0.0.1:$((PORT_BASE + 11)),n2=127.0.0.1:$((PORT_BASE + 12)),n3=127.0.0.1:$((PORT_BASE + 13))"
E_ENDPOINTS="127.0.0.1:$((PORT_BASE + 21)),127.0.0.1:$((PORT_BASE + 22)),127.0.0.1:$((PORT_BASE + 23))"
E_CLUSTER="e1=http://127.0.0.1:$((PORT_BASE + 31)),e2=http://127.0.0.1:$((PORT_BASE + 32)),e3=http://127.0.0.1:$((PORT_BASE + 33))"

# start_roster_node DIR I: start node nI of the Roster cluster whose data lives under DIR
# (its pid goes to PIDS[I-1]); a restart reuses the node's data.
start_roster_node() {
	local dir=$1 i=$2
	"$ROSTER" server --node-id "n$i" --data-dir "$dir/n$i" \
		--http-addr "127.0.0.1:$((PORT_BASE + i))" --raft-addr "127.0.0.1:$((PORT_BASE + 10 + i))" \
		--peers "$R_PEERS" --probe-allow 127.0.0.0/8,::1/128 --log-level warn $ROSTER_SERVER_ARGS >>"$dir/n$i.log" 2>&1 &
	PIDS[i - 1]=$!
	disown "$!" # no job report when the failover mode kills it
}

# start_etcd_node DIR I: start member eI of the etcd cluster whose data lives under DIR
# (its pid goes to PIDS[I-1]); a restart reuses the member's data.
start_etcd_node() {
	local dir=$1 i=$2
	etcd --name "e$i" --data-dir "$dir/e$i" \
		--listen-client-urls "http://127.0.0.1:$((PORT_BASE + 20 + i))" \
		--advertise-client-urls "http://127.0.0.1:$((PORT_BASE + 20 + i))" \
		--listen-peer-urls "http://127.0.0.1:$((PORT_BASE + 30 + i))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((PORT_BASE + 30 + i))" \
		--initial-cluster "$E_CLUSTER" --initial-cluster-token roster-bench --initial-cluster-state new \
		--logger zap --log-level warn >>"$dir/e$i.log" 2>&1 &
	PIDS[i - 1]=$!
	disown "$!"
}

# roster_ready: every node answers /v1/status/ready with 200 and a leader is known.
roster_ready() {
	local ep
	for ep in ${R_ENDPOINTS//,/ }; do
		curl -sf -m 2 "http://$ep/v1/status/ready" >/dev/null || return 1
	done
	curl -sf -m 2 "http://${R_ENDPOINTS%%,*}/v1/status/leader" | jq -e '.httpAddr != ""' >/dev/null
}

# etcd_ready: every member is healthy and one of them is the leader.
etcd_ready() {
	etcdctl --endpoints "$E_ENDPOINTS" --command-timeout 2s endpoint health >/dev/null 2>&1 || return 1
	etcdctl --endpoints "$E_ENDPOINTS" --command-timeout 2s endpoint status -w json 2>/dev/null |
		jq -e 'map(select(.Status.header.member_id == .Status.leader)) | length == 1' >/dev/null
}

# wait_until SECONDS CMD: poll CMD every 0.2 s.
wait_until() {
	local limit=$1
	shift
	local deadline=$((SECONDS + limit))
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
}

# start_cluster SYSTEM DIR: start three nodes and wait until the cluster serves.
start_cluster() {
	local sys=$1 dir=$2 i
	mkdir -p "$dir"
	for i in 1 2 3; do
		if [ "$sys" = roster ]; then start_roster_node "$dir" "$i"; else start_etcd_node "$dir" "$i"; fi
	done
	if ! wait_until 60 "${sys}_ready"; then
		echo "$sys cluster did not become ready; logs:" >&2
		tail -n 30 "$dir"/*.log >&2
		exit 1
	fi
}

# --- one measured run ------------------------------------------------------------------
# run_system SYSTEM ROUND: fresh cluster, every suite, cluster stopped again.
run_system() {
	local sys=$1 round=$2 eps dir pids
	dir=$WORK/$sys-r$round
	log "round $round: starting a 3-node $sys cluster"
	start_cluster "$sys" "$dir"
	if [ "$sys" = roster ]; then eps=$R_ENDPOINTS; else eps=$E_ENDPOINTS; fi
	pids=$(IFS=,; echo "${PIDS[*]}")
	local common=(--system "$sys" --endpoints "$eps" --cpu-pids "$pids" --label "round$round"
		--duration "$DURATION" --warmup "$WARMUP" --quiet)
	local n=0
	suite() {
		n=$((n + 1))
		log "round $round: $sys $*"
		# A failed suite keeps the points it measured (in its JSON) and the run goes on.
		run_child "$ROSTER_BENCH" "${common[@]}" --json "$WORK/results/$sys-r$round-$n.json" "$@" >>"$WORK/$sys-r$round.txt" ||
			{ log "round $round: $sys $* failed; see $sys-r$round.txt"; FAILED=$((FAILED + 1)); }
	}
	# watch ARGS...: the watch points, for Roster once per watch transport.
	watch() {
		local t
		if [ "$sys" = roster ]; then
			for t in $WATCH_TRANSPORTS; do
				suite --workload watch --consistency stale --concurrency "$WATCH_CONCURRENCY" --watch-transport "$t" "$@"
			done
		else
			suite --workload watch --consistency stale --concurrency "$WATCH_CONCURRENCY" "$@"
		fi
	}
	if [ "$QUICK" = 1 ]; then
		suite --workload register --concurrency "$CONCURRENCY"
		suite --workload read --instances 10 --consistency linearizable --concurrency "$CONCURRENCY"
		watch --read-target all
	else
		suite --workload register,deregister --concurrency "$CONCURRENCY"
		suite --workload read --instances 10,100 --consistency linearizable,leader,stale --concurrency "$CONCURRENCY"
		suite --workload mixed --consistency linearizable --concurrency "$CONCURRENCY"
		watch
		watch --read-target all
	fi
	log "round $round: stopping $sys"
	stop_cluster
}

# --- failover mode ---------------------------------------------------------------------
# leader_index SYSTEM: the number (1..3) of the node that is the leader now.
leader_index() {
	local port
	if [ "$1" = roster ]; then
		port=$(curl -sf -m 2 "http://${R_ENDPOINTS%%,*}/v1/status/leader" | jq -r '.httpAddr' | sed 's/.*://')
		echo $((port - PORT_BASE))
	else
		port=$(etcdctl --endpoints "$E_ENDPOINTS" --command-timeout 2s endpoint status -w json |
			jq -r '.[] | select(.Status.header.member_id == .Status.leader) | .Endpoint' | sed 's/.*://')
		echo $((port - PORT_BASE - 20))
	fi
}

# failover_system SYSTEM: TRIALS kill-the-leader trials on one cluster.
failover_system() {
	local sys=$1 dir eps i leader_ep pid trial
	dir=$WORK/$sys-failover
	if [ "$sys" = roster ]; then eps=$R_ENDPOINTS; else eps=$E_ENDPOINTS; fi
	log "failover: starting a 3-node $sys cluster"
	start_cluster "$sys" "$dir"
	for trial in $(seq "$TRIALS"); do
		if ! wait_until 60 "${sys}_ready"; then
			echo "$sys cluster not ready before trial $trial" >&2
			tail -n 30 "$dir"/*.log >&2
			exit 1
		fi
		i=$(leader_index "$sys")
		case "$i" in 1 | 2 | 3) ;; *) echo "cannot find the $sys leader (got '$i')" >&2; exit 1 ;; esac
		leader_ep=$(echo "$eps" | cut -d, -f"$i")
		pid=${PIDS[i - 1]}
		log "failover: $sys trial $trial: killing node $i ($leader_ep, pid $pid) under write load"
		run_child "$ROSTER_BENCH" failover --system "$sys" --endpoints "$eps" --leader "$leader_ep" --kill-pid "$pid" \
			--json "$WORK/failover.jsonl" || log "failover: $sys trial $trial failed"
		wait_gone "$pid" || { echo "killed $sys node $i (pid $pid) did not exit" >&2; exit 1; }
		if [ "$sys" = roster ]; then start_roster_node "$dir" "$i"; else start_etcd_node "$dir" "$i"; fi
	done
	stop_cluster
}

if [ "$FAILOVER" = 1 ]; then
	[ "$OUT" != bench-results.json ] || OUT=failover-results.json
	START=$SECONDS
	for sys in $SYSTEMS; do
		failover_system "$sys"
	done
	{
		echo
		echo "Failover — $TRIALS trials per system: SIGKILL the leader under write load (8 writers on all"
		echo "nodes); then a new write through a survivor every 10 ms; time from the kill to the first"
		echo "of those writes that succeeds"
		echo "machine: $(nproc) cores; $(go version | awk '{print $3}'); etcd $(etcd --version | awk '/etcd Version/ {print $3}')"
		echo
		"$ROSTER_BENCH" failover-report --json "$OUT" "$WORK/failover.jsonl"
		echo
		echo "results: $OUT; total $((SECONDS - START)) s"
	} | tee "$WORK/summary.txt"
	exit 0
fi

mkdir -p "$WORK/results"
START=$SECONDS
FAILED=0
for round in $(seq "$ROUNDS"); do
	for sys in $SYSTEMS; do
		run_system "$sys" "$round"
	done
done

# --- report ----------------------------------------------------------------------------
{
	echo
	echo "Roster vs etcd — $ROUNDS rounds, $WARMUP warm-up + $DURATION per point, concurrency $CONCURRENCY," \
		"watchers $WATCH_CONCURRENCY (Roster over: $WATCH_TRANSPORTS)"
	echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM; $(go version | awk '{print $3}');" \
		"etcd $(etcd --version | awk '/etcd Version/ {print $3}'); roster $("$ROSTER" version 2>/dev/null | head -n1 || echo dev)"
	echo "medians over rounds; latencies in ms; cpu = cores used by the 3 cluster processes over the window;"
	echo "R/E = Roster/etcd (req/s and req/core: higher is better for Roster; p99: lower is better for Roster)"
	echo
	"$ROSTER_BENCH" compare --json "$OUT" "$WORK"/results/*.json
	echo
	echo "results: $OUT; total $((SECONDS - START)) s; failed suites: $FAILED"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other cpu = cores used by other work during a point)"
} | tee "$WORK/summary.txt"
[ "$FAILED" = 0 ]
