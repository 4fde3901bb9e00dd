#!/usr/bin/env bash
# What access control and TLS cost: register and linearizable read throughput and latency
# percentiles of a 3-node loopback cluster at 1 and 64 clients, with everything off, with ACLs on (a
# token scoped to the bench's namespace), and with ACLs and TLS on (HTTPS to the API,
# mutual TLS between the nodes), in the same run, alternating the modes over rounds.
#
# Usage: scripts/bench-security.sh [--rounds 3] [--duration 5s] [--warmup 1s]
#          [--concurrency 1,64] [--modes "off acl acl+tls"] [--workload register,read]
#          [--out bench-security.json]
# ROSTER_BIN uses a prebuilt binary instead of building ./cmd/roster.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=3 DURATION=5s WARMUP=1s CONCURRENCY=1,64 MODES="off acl acl+tls" WORKLOAD=register,read OUT=bench-security.json
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift 2 ;;
	--duration) DURATION=$2; shift 2 ;;
	--warmup) WARMUP=$2; shift 2 ;;
	--concurrency) CONCURRENCY=$2; shift 2 ;;
	--modes) MODES=$2; shift 2 ;;
	--workload) WORKLOAD=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done

D=$(mktemp -d)
pids=()
stop() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap 'stop; rm -rf "$D"' EXIT

BIN=${ROSTER_BIN:-}
if [ -z "$BIN" ]; then
	BIN=$D/roster
	CGO_ENABLED=0 go build -o "$BIN" ./cmd/roster
fi

# Certificates for the TLS mode: one CA, one certificate per node (also its client
# certificate towards the others), on loopback names.
"$BIN" tls ca create --dir "$D/tls" >/dev/null
for i in 1 2 3; do "$BIN" tls cert create --dir "$D/tls" --node n$i --ip 127.0.0.1 >/dev/null; done

# start MODE: a fresh 3-node cluster in MODE; sets EP (the endpoints) and CLIENT_FLAGS.
start() {
	local mode=$1 dir=$D/run-$RANDOM scheme=http
	local -a extra=()
	case $mode in
	acl) extra=(--acl-enabled) ;;
	acl+tls) extra=(--acl-enabled); scheme=https ;;
	esac
	local peers=n1=127.0.0.1:27011,n2=127.0.0.1:27012,n3=127.0.0.1:27013
	for i in 1 2 3; do
		local -a tls=()
		if [ "$scheme" = https ]; then
			tls=(--tls-cert-file "$D/tls/n$i.pem" --tls-key-file "$D/tls/n$i-key.pem" --tls-ca-file "$D/tls/ca.pem")
		fi
		"$BIN" server --node-id n$i --data-dir "$dir/n$i" --http-addr 127.0.0.1:2700$i --raft-addr 127.0.0.1:2701$i \
			--peers $peers --grpc-addr off --dns-addr '' --probe-allow 127.0.0.0/8,::1/128 --log-level error \
			"${extra[@]}" "${tls[@]}" 2>>"$dir.log" &
		pids+=($!)
	done
	EP=$scheme://127.0.0.1:27001,$scheme://127.0.0.1:27002,$scheme://127.0.0.1:27003
	CLIENT_FLAGS=()
	if [ "$scheme" = https ]; then CLIENT_FLAGS=(--ca-file "$D/tls/ca.pem"); fi
	until "$BIN" ready --addr "$scheme://127.0.0.1:27001" "${CLIENT_FLAGS[@]}" >/dev/null 2>&1; do sleep 0.2; done
	TOKEN_FLAGS=()
	if [ "$mode" != off ]; then
		local mgmt tok
		mgmt=$("$BIN" acl bootstrap --addr "$scheme://127.0.0.1:27001" "${CLIENT_FLAGS[@]}" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["secretId"])')
		tok=$("$BIN" acl token create --addr "$scheme://127.0.0.1:27001" "${CLIENT_FLAGS[@]}" --token "$mgmt" \
			--description bench --namespace public=write -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["secretId"])')
		TOKEN_FLAGS=(--token "$tok")
	fi
}

results=()
for round in $(seq 1 "$ROUNDS"); do
	for mode in $MODES; do
		start "$mode"
		f=$D/$mode-$round.json
		"$BIN" bench --system roster --endpoints "$EP" "${CLIENT_FLAGS[@]}" "${TOKEN_FLAGS[@]}" --workload "$WORKLOAD" \
			--concurrency "$CONCURRENCY" --duration "$DURATION" --warmup "$WARMUP" --quiet \
			--cpu-pids "$(IFS=,; echo "${pids[*]}")" --label "$mode" --json "$f" >/dev/null
		results+=("$f")
		echo "round $round, $mode: done" >&2
		stop
	done
done

python3 - "$OUT" "${results[@]}" <<'EOF'
import json, statistics, sys
out, files = sys.argv[1], sys.argv[2:]
rows = {}
for f in files:
    for r in json.load(open(f))["results"]:
        rows.setdefault((r["workload"], r["label"], r["concurrency"]), []).append(r)
table = []
order = {"off": 0, "acl": 1, "acl+tls": 2}
for (wl, mode, conc), rs in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][2], order.get(kv[0][1], 9), kv[0][1])):
    med = lambda get: round(statistics.median(get(r) for r in rs), 3)
    table.append({"workload": wl, "mode": mode, "concurrency": conc, "rounds": len(rs),
                  "rps": med(lambda r: r["rps"]), "rps_min": round(min(r["rps"] for r in rs)),
                  "rps_max": round(max(r["rps"] for r in rs)), "p50_ms": med(lambda r: r["latency"]["p50_ms"]),
                  "p99_ms": med(lambda r: r["latency"]["p99_ms"]), "errors": sum(r["errors"] for r in rs),
                  "server_cpu_cores": med(lambda r: r.get("server_cpu_cores", 0))})
base = {(t["workload"], t["concurrency"]): t for t in table if t["mode"] == "off"}
print(f"{'workload':9} {'mode':9} {'clients':>7} {'req/s':>9} {'min-max':>13} {'vs off':>7} {'p50 ms':>8} {'p99 ms':>8} {'cpu':>6} {'errors':>6}")
for t in table:
    b = base.get((t["workload"], t["concurrency"]))
    t["rps_vs_off_percent"] = round(t["rps"] / b["rps"] * 100 - 100, 1) if b else None
    rel = f"{t['rps_vs_off_percent']:+.1f}%" if b else "-"
    rng = f"{t['rps_min']}-{t['rps_max']}"
    print(f"{t['workload']:9} {t['mode']:9} {t['concurrency']:>7} {t['rps']:>9.0f} {rng:>13} {rel:>7} {t['p50_ms']:>8.2f} {t['p99_ms']:>8.2f} {t['server_cpu_cores']:>6.2f} {t['errors']:>6}")
json.dump({"points": table}, open(out, "w"), indent=2)
EOF
