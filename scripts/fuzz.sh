#!/usr/bin/env bash
# Runs every fuzz target for a short fixed time, one after the other (native Go
# fuzzing, `go test -fuzz`). Crashers the fuzzer finds are written to the package's
# testdata/fuzz/<Target>/ directory; keep them there: plain `go test` replays them.
#
# Usage: scripts/fuzz.sh [budget]   (per target: an execution count such as 50000x, the
#                                   default, or a duration such as 2m)
# FUZZ_TARGETS="pkg:Target ..." restricts the run (e.g. FUZZ_TARGETS=./fsm:FuzzDecode).
#
# CI uses an execution count: with a duration, Go's fuzzing coordinator can report
# "context deadline exceeded" as a failure when the deadline fires while a worker is
# still busy (golang/go#75804, present in Go 1.26), which fails a run that found nothing.
# A count has no deadline to race; a slow machine only takes longer.
set -euo pipefail
cd "$(dirname "$0")/.."

BUDGET=${1:-${FUZZ_BUDGET:-50000x}}
TARGETS=${FUZZ_TARGETS:-"
./fsm:FuzzDecode
./snapshot:FuzzRead
./httpapi:FuzzDecodeInstanceRequest
./httpapi:FuzzDecodeClusterRequest
./httpapi:FuzzHealthCheckSpec
./httpapi:FuzzEncodedNamespace
./nacos/openapi:FuzzNacosParams
./nacos/grpcapi:FuzzGRPCRequest
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
	echo "== fuzz $name in $pkg for $BUDGET"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$BUDGET" "$pkg"; then
		failed+=("$t")
	fi
done
echo "== fuzzing finished in $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
	echo "failed: ${failed[*]} (crashers, if any, are in the package's testdata/fuzz/)" >&2
	exit 1
fi
