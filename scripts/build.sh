#!/usr/bin/env bash
# Builds the roster binary with its release version and commit stamped in (what
# `roster version` and every node's member entry report):
#
#   scripts/build.sh [-o PATH]     (default ./roster; VERSION=... and COMMIT=... override)
#
# A plain `go build ./cmd/roster` works too; its version is then "dev" unless the Go
# toolchain records one itself (go install ...@v0.3.0, or VCS stamping).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=roster
while [ $# -gt 0 ]; do
	case "$1" in
	-o) OUT=$2; shift 2 ;;
	-o=*) OUT=${1#*=}; shift ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) echo "build: unknown argument: $1" >&2; exit 2 ;;
	esac
done
. scripts/lib/version.sh
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ROSTER_LDFLAGS" -o "$OUT" ./cmd/roster
echo "built $OUT: roster $ROSTER_VERSION ($ROSTER_COMMIT)"
