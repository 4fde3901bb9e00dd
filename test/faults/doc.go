// Package faults is Roster's fault-injection harness: it runs a cluster of real
// `roster server` processes on loopback, drives concurrent clients against it while
// injecting faults (SIGKILL, SIGSTOP, network partitions through per-node proxies, a
// snapshot restore), records every operation with its invocation and completion time,
// and checks the history: linearizable operations with porcupine against a model of
// each service's instance set, stale reads against the prefix of the history their
// index names, and the minority side of a partition for acknowledgements it must not
// give. docs/reliability.md describes the faults and the checks.
//
// The tests of this package run a short schedule by default; scripts/faults.sh runs a
// long one (ROSTER_FAULT_DURATION).
package faults
