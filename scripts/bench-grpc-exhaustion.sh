#!/usr/bin/env bash
# An unauthenticated flood of a node's Nacos gRPC port (security review, issue 32,
# finding 2): a 3-node loopback cluster with ACLs and TLS, a follower flooded by
# --conns attacker connections from --sources loopback addresses for --duration; the
# follower's HTTPS p99, Raft last contact and RSS, idle and under the flood, and whether
# a real nacos-sdk-go v2 client still connects (scripts/grpc-exhaustion). The attacker
# is a process of its own on the same cores (--attacker-in-process: beside the prober).
#
# Usage: scripts/bench-grpc-exhaustion.sh [--conns 3000] [--sources 30] [--duration 60s]
#          [--idle 15s] [--out bench-grpc-exhaustion.json] [--attacker-in-process]
#          [--flood-elsewhere] [--roster-args "--grpc-accept-rate-per-ip 2"]
# --flood-elsewhere is a control: the same attack on the other follower, so that the
# target shares the cores with it without receiving it.
# ROSTER_BIN uses a prebuilt binary instead of building ./cmd/roster.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--conns | --sources | --duration | --idle | --out | --roster-args) args+=("-${1#--}" "$2"); shift 2 ;;
	--attacker-in-process | --flood-elsewhere) args+=("-${1#--}"); shift ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -n "${ROSTER_BIN:-}" ]; then args+=(-roster-bin "$ROSTER_BIN"); fi
# The attack holds thousands of sockets in this process.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec go run ./scripts/grpc-exhaustion "${args[@]}"
