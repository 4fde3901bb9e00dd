#!/usr/bin/env bash
# Rolling restart and rolling upgrade under write load: restarts each node of a 3-node
# cluster of real processes in turn with SIGTERM (followers first, the leader last)
# while 8 writers register instances, retrying connection errors on another node;
# reports the writes acknowledged and failed, the longest gap between acknowledged
# writes and the longest time without a leader. Runs test/faults'
# TestRollingRestart_NoFailedWrite (same binary) and TestRollingUpgrade_NoFailedWrite
# (from v0.1.0 and from v0.2.0, built from their commits, to this checkout, with a
# settings writer counting writes refused while an older server remains).
#
# Usage: scripts/bench-rolling-restart.sh [--rounds 5] [--out DIR]
# Each round's figures are written to DIR/rolling-N.json and
# DIR/rolling-N-from-roster-vX.json (default: a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=5
OUT=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	-h | --help) sed -n '2,13p' "$0"; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done
if [ -z "$OUT" ]; then OUT=$(mktemp -d); fi
mkdir -p "$OUT"

go test -c -o "$OUT/faults.test" ./test/faults/
for i in $(seq 1 "$ROUNDS"); do
	(cd test/faults && ROSTER_ROLLING_SUMMARY="$OUT/rolling-$i.json" \
		"$OUT/faults.test" -test.run '^TestRolling(Restart|Upgrade)_NoFailedWrite$' -test.count=1 -test.v) |
		grep -E 'rolling (restart|upgrade) (of|from)|^(--- |ok|FAIL|PASS)' | sed "s/^/round $i: /"
done
echo "figures: $OUT/rolling-*.json"
