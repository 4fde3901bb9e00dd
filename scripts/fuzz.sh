#!/usr/bin/env bash
# Runs every fuzz target for a short fixed time, one after the other (native Go
# fuzzing, `go test -fuzz`). Crashers the fuzzer finds are written to the package's
# testdata/fuzz/<Target>/ directory; keep them there: plain `go test` replays them.
#
# Usage: scripts/fuzz.sh [duration]     (default 20s per target, e.g. scripts/fuzz.sh 2m)
# FUZZ_TARGETS="pkg:Target ..." restricts the run (e.g. FUZZ_TARGETS=./fsm:FuzzDecode).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-${FUZZ_DURATION:-20s}}
TARGETS=${FUZZ_TARGETS:-"
./fsm:FuzzDecode
./snapshot:FuzzRead
./httpapi:FuzzDecodeInstanceRequest
./httpapi:FuzzDecodeClusterRequest
./httpapi:FuzzHealthCheckSpec
./nacos:FuzzNacosParams
./dnsapi:FuzzQuery
"}

failed=()
start=$(date +%s)
for t in $TARGETS; do
	pkg=${t%%:*}
	name=${t#*:}
	if ! grep -qs "^func $name(" "$pkg"/*_test.go; then
		echo "== $name: no such fuzz target in $pkg" >&2
		failed+=("$t")
		continue
	fi
	echo "== fuzz $name in $pkg for $DURATION"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$DURATION" "$pkg"; then
		failed+=("$t")
	fi
done
echo "== fuzzing finished in $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
	echo "failed: ${failed[*]} (crashers, if any, are in the package's testdata/fuzz/)" >&2
	exit 1
fi
