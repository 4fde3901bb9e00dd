#!/usr/bin/env bash
# Long fault-injection run: rounds of random faults (SIGKILL and restart of the leader
# and of followers, SIGSTOP/SIGCONT, an isolated leader, a flapping partition, a
# snapshot restore) against real 3- and 5-node clusters, each round's history checked
# with porcupine (test/faults, docs/reliability.md), then the kill -9 crash test.
#
# Usage: scripts/faults.sh [--duration 30m] [--round 60s] [--nodes 3,5]
#          [--crash-iterations 100] [--seed N] [--artifacts DIR] [--summary FILE] [--race]
# Every flag also reads an environment variable: ROSTER_FAULT_DURATION,
# ROSTER_FAULT_ROUND, ROSTER_FAULT_NODES, ROSTER_CRASH_ITERATIONS, ROSTER_FAULT_SEED
# (one round with that seed; reproduces a failed round), ROSTER_FAULT_ARTIFACTS
# (where failing rounds leave history-*.html, violations.txt, history.json and the node
# logs; default $TMPDIR/roster-faults-artifacts), ROSTER_FAULT_SUMMARY (JSON summary of
# the linearizability rounds). --race runs the harness itself under the race detector
# (the roster processes never are). The short schedule runs in `go test ./...`.
set -euo pipefail
cd "$(dirname "$0")/.."

export ROSTER_FAULT_DURATION=${ROSTER_FAULT_DURATION:-30m}
export ROSTER_FAULT_ROUND=${ROSTER_FAULT_ROUND:-60s}
export ROSTER_FAULT_NODES=${ROSTER_FAULT_NODES:-3,5}
export ROSTER_CRASH_ITERATIONS=${ROSTER_CRASH_ITERATIONS:-100}
RACE=()

while [ $# -gt 0 ]; do
	case "$1" in
	--duration) ROSTER_FAULT_DURATION=$2; shift 2 ;;
	--round) ROSTER_FAULT_ROUND=$2; shift 2 ;;
	--nodes) ROSTER_FAULT_NODES=$2; shift 2 ;;
	--crash-iterations) ROSTER_CRASH_ITERATIONS=$2; shift 2 ;;
	--seed) export ROSTER_FAULT_SEED=$2; shift 2 ;;
	--artifacts) export ROSTER_FAULT_ARTIFACTS=$2; shift 2 ;;
	--summary) export ROSTER_FAULT_SUMMARY=$2; shift 2 ;;
	--race) RACE=(-race); shift ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done

# seconds DURATION: a Go duration made of whole hours, minutes and seconds (1h30m, 90s).
seconds() {
	local d=$1 total=0
	while [[ $d =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
		case ${BASH_REMATCH[2]} in
		h) total=$((total + BASH_REMATCH[1] * 3600)) ;;
		m) total=$((total + BASH_REMATCH[1] * 60)) ;;
		s) total=$((total + BASH_REMATCH[1])) ;;
		esac
		d=${BASH_REMATCH[3]}
	done
	if [ -n "$d" ] || [ "$total" -eq 0 ]; then
		echo "invalid duration: $1 (use e.g. 30m, 90s, 1h30m)" >&2
		exit 2
	fi
	echo "$total"
}
secs=$(seconds "$ROSTER_FAULT_DURATION")
# go test's -timeout: the duration plus room for the last round, its check and the
# crash iterations (a few seconds each).
timeout=$((secs + 900 + 5 * ROSTER_CRASH_ITERATIONS))s

echo "== faults: ${ROSTER_FAULT_DURATION} of ${ROSTER_FAULT_ROUND} rounds on ${ROSTER_FAULT_NODES} nodes, ${ROSTER_CRASH_ITERATIONS} crash iterations (timeout ${timeout})"
start=$(date +%s)
set +e
go test "${RACE[@]}" -count=1 -v -timeout "$timeout" \
	-run '^(TestFaults_Linearizable|TestFaults_CrashSafety)$' ./test/faults/ 2>&1 |
	grep -Ev '^=== (RUN|PAUSE|CONT)'
status=${PIPESTATUS[0]}
set -e
echo "== faults finished in $(( $(date +%s) - start ))s (exit $status)"
exit "$status"
