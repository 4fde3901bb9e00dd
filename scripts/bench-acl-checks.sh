#!/usr/bin/env bash
# What the access checks of this tree cost a register, against another revision: register
# throughput and latency of a 3-node loopback cluster with ACLs on and a token scoped to the
# bench's namespace (scripts/bench-security.sh --modes acl), for a binary built from BASE
# (default main) and one built from the working tree, alternating the two over rounds so
# that both see the same machine. Prints the median of each and the difference.
#
# With --micro it runs httpapi's BenchmarkACLChecks instead (the router, the checks and
# the registry in process, no Raft, no network: CPU per request), on both trees, the
# benchmark's files copied into BASE's tree, alternating over rounds.
#
# Usage: scripts/bench-acl-checks.sh [--base main] [--rounds 5] [--duration 5s]
#          [--concurrency 1,64] [--workload register] [--out bench-acl-checks.json]
#        scripts/bench-acl-checks.sh --micro [--base main] [--rounds 10]
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=main ROUNDS=5 DURATION=5s CONCURRENCY=1,64 WORKLOAD=register OUT=bench-acl-checks.json MICRO=
while [ $# -gt 0 ]; do
	case $1 in
	--micro) MICRO=1; shift ;;
	--base) BASE=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--duration) DURATION=$2; shift 2 ;;
	--concurrency) CONCURRENCY=$2; shift 2 ;;
	--workload) WORKLOAD=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done

D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
mkdir "$D/base"
git archive "$BASE" | tar -x -C "$D/base"

if [ -n "$MICRO" ]; then
	cp httpapi/acl_bench_test.go httpapi/acl_paths_test.go "$D/base/httpapi/"
	for round in $(seq 1 "$ROUNDS"); do
		for which in base tree; do
			dir=.
			[ "$which" = base ] && dir=$D/base
			(cd "$dir" && go test -run '^$' -bench '^BenchmarkACLChecks$' -benchtime 20000x -count 1 ./httpapi/) |
				awk -v w="$which" '/^BenchmarkACLChecks/ {print w, $1, $3, $5, $7}' >>"$D/micro.txt"
		done
		echo "round $round: done" >&2
	done
	python3 - "$D/micro.txt" <<'PY'
import statistics, sys
rows, allocs = {}, {}
for line in open(sys.argv[1]):
    which, name, ns, bytes_op, allocs_op = line.split()
    key = (name.rsplit("-", 1)[0], which)
    rows.setdefault(key, []).append(float(ns))
    allocs[key] = f"{bytes_op} B, {allocs_op} allocs"
print(f"{'benchmark':28} {'base ns/op':>11} {'tree ns/op':>11} {'diff':>7}  base / tree per op (ns/op: medians; ranges)")
for name in sorted({k[0] for k in rows}):
    b, t = rows[(name, "base")], rows[(name, "tree")]
    mb, mt = statistics.median(b), statistics.median(t)
    print(f"{name:28} {mb:>11.0f} {mt:>11.0f} {mt / mb * 100 - 100:>+6.1f}%  {allocs[(name, 'base')]} / {allocs[(name, 'tree')]}"
          f" ({min(b):.0f}-{max(b):.0f}; {min(t):.0f}-{max(t):.0f}; minimum {min(t) / min(b) * 100 - 100:+.1f}%)")
PY
	exit 0
fi
(cd "$D/base" && CGO_ENABLED=0 go build -o "$D/roster-base" ./cmd/roster)
CGO_ENABLED=0 go build -o "$D/roster-tree" ./cmd/roster

files=()
for round in $(seq 1 "$ROUNDS"); do
	for which in base tree; do
		f=$D/$which-$round.json
		# A run that fails (a cluster that did not come up on a loaded machine) is run again, once.
		if ! ROSTER_BIN=$D/roster-$which scripts/bench-security.sh --rounds 1 --modes acl --workload "$WORKLOAD" \
			--concurrency "$CONCURRENCY" --duration "$DURATION" --out "$f" >/dev/null; then
			echo "round $round, $which: failed, once more" >&2
			ROSTER_BIN=$D/roster-$which scripts/bench-security.sh --rounds 1 --modes acl --workload "$WORKLOAD" \
				--concurrency "$CONCURRENCY" --duration "$DURATION" --out "$f" >/dev/null
		fi
		files+=("$which=$f")
		echo "round $round, $which: done" >&2
	done
done

python3 - "$OUT" "$BASE" "${files[@]}" <<'PY'
import json, statistics, sys
out, base, args = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = {}
for a in args:
    which, f = a.split("=", 1)
    for p in json.load(open(f))["points"]:
        rows.setdefault((p["workload"], p["concurrency"], which), []).append(p)
table = []
print(f"{'workload':9} {'clients':>7} {'binary':>6} {'req/s':>9} {'min-max':>13} {'p50 ms':>8} {'p99 ms':>8} {'vs base':>8}")
for (wl, conc) in sorted({(k[0], k[1]) for k in rows}):
    med = {}
    for which in ("base", "tree"):
        rs = rows.get((wl, conc, which), [])
        if not rs:
            continue
        m = {"workload": wl, "concurrency": conc, "binary": which, "rounds": len(rs),
             "rps": statistics.median(r["rps"] for r in rs),
             "rps_min": min(r["rps"] for r in rs), "rps_max": max(r["rps"] for r in rs),
             "p50_ms": statistics.median(r["p50_ms"] for r in rs),
             "p99_ms": statistics.median(r["p99_ms"] for r in rs)}
        med[which] = m
        table.append(m)
    for which, m in med.items():
        rel = "-"
        if which == "tree" and "base" in med:
            m["rps_vs_base_percent"] = round(m["rps"] / med["base"]["rps"] * 100 - 100, 1)
            rel = f"{m['rps_vs_base_percent']:+.1f}%"
        rng = f"{m['rps_min']:.0f}-{m['rps_max']:.0f}"
        print(f"{wl:9} {conc:>7} {which:>6} {m['rps']:>9.0f} {rng:>13} {m['p50_ms']:>8.2f} {m['p99_ms']:>8.2f} {rel:>8}")
json.dump({"base": base, "points": table}, open(out, "w"), indent=2)
PY
