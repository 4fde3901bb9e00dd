#!/usr/bin/env bash
# Failover benchmark: for Roster and for etcd, a 3-node loopback cluster under write load
# has its leader killed with SIGKILL, 10 times; prints the median and max time from the kill
# to the first successful write through a survivor, and writes failover-results.json.
# Usage: scripts/bench-failover.sh [--trials 10] [--systems "roster etcd"] [--out FILE]
#          [--port-base 21000] [--keep]
# (a mode of scripts/bench-vs-etcd.sh, which holds the cluster set-up both share)
set -euo pipefail
exec "$(dirname "$0")/bench-vs-etcd.sh" --failover "$@"
