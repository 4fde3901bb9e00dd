#!/usr/bin/env bash
# End-to-end test of the 3-node docker compose cluster (docker-compose.yml).
#
#   scripts/e2e-compose.sh [--failover-trials N] [--no-build --bin PATH] [--no-demo] [--no-secure]
#
# Builds the roster:dev image and a host copy of the binary (scripts/build-image.sh),
# starts the cluster and checks, printing "ok: ..." or "FAIL: ..." for each check with times:
#   1. 100 instances registered through node 2 are read back through nodes 1 and 3
#      (linearizable and stale), and by a Nacos 2.x subscription on each node's published
#      gRPC port (`roster nacos-watch --once`);
#   2. failover, N trials (default 5): the leader is killed, a new leader is elected within
#      5 s, a write through a survivor succeeds, all data is present;
#   3. the killed node is restarted and catches up (a stale read on it shows everything);
#   3b. rolling restart: `compose stop` (SIGTERM) and start each node, followers first and
#      the leader last; each stops cleanly, a write through another node succeeds at once
#      right after (the leader handed leadership over), and each is ready again;
#   4. a follower is cut off the network while the majority takes writes; it cannot commit
#      a write itself; after reconnecting it converges with no lost or duplicated write;
#   5. `roster snapshot save`, `compose down -v`, a fresh cluster, `roster snapshot
#      restore`: the full instance lists are equal, on every node;
#   6. the demo profile (skip with --no-demo): demo-register registers demo-backend with an
#      HTTP check; the leader's prober marks it unhealthy when stopped, healthy when started;
#   7. the secure cluster, docker-compose.secure.yml, with the same image and binary
#      (scripts/e2e-compose-secure.sh; skip with --no-secure);
# then tears everything down (`compose down -v`), also on failure (after printing the
# logs). It prints the image size, the cold `compose up` to ready time and the leader kill
# to first successful write times (median, max).
#
#   --no-build --bin PATH   reuse the existing roster:dev image and a host binary at PATH
#
# Needs docker with compose (the `docker compose` plugin or docker-compose), curl, python3
# and go. Without a docker engine it prints "skipped: no docker" and exits 0, except under
# CI=true where that is a failure. Host ports 127.0.0.1:8848-8850 and 9848-9850 must be
# free (override with ROSTER1_HTTP_PORT.. ROSTER3_HTTP_PORT, ROSTER1_GRPC_PORT..
# ROSTER3_GRPC_PORT); step 7 needs 18848-18850 and 19848-19850 (see e2e-compose-secure.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FAILOVER_TRIALS=5
BUILD=1
BIN=""
DEMO=1
SECURE=1
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
	case "$1" in
	--failover-trials) FAILOVER_TRIALS=$2; shift 2 ;;
	--failover-trials=*) FAILOVER_TRIALS=${1#*=}; shift ;;
	--no-build) BUILD=0; shift ;;
	--bin) BIN=$2; shift 2 ;;
	--bin=*) BIN=${1#*=}; shift ;;
	--no-demo) DEMO=0; shift ;;
	--no-secure) SECURE=0; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "e2e-compose: unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
done
case "$FAILOVER_TRIALS" in
''|*[!0-9]*|0) echo "e2e-compose: --failover-trials needs a positive integer" >&2; exit 2 ;;
esac

# ---------------------------------------------------------------------------------------
# Environment: docker engine and compose. No engine: skipped, but a failure under CI.

# shellcheck source=lib/compose-env.sh
. "$ROOT/scripts/lib/compose-env.sh"
compose_env e2e-compose

PROJECT=${COMPOSE_PROJECT_NAME:-roster-e2e}
C=("${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml")
PORTS=("" "${ROSTER1_HTTP_PORT:-8848}" "${ROSTER2_HTTP_PORT:-8849}" "${ROSTER3_HTTP_PORT:-8850}")
export ROSTER1_HTTP_PORT=${PORTS[1]} ROSTER2_HTTP_PORT=${PORTS[2]} ROSTER3_HTTP_PORT=${PORTS[3]}
GRPC_PORTS=("" "${ROSTER1_GRPC_PORT:-9848}" "${ROSTER2_GRPC_PORT:-9849}" "${ROSTER3_GRPC_PORT:-9850}")
export ROSTER1_GRPC_PORT=${GRPC_PORTS[1]} ROSTER2_GRPC_PORT=${GRPC_PORTS[2]} ROSTER3_GRPC_PORT=${GRPC_PORTS[3]}
# Loopback only: never send test traffic through a proxy.
export NO_PROXY='*' no_proxy='*'
unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy

WORK=$(mktemp -d "${TMPDIR:-/tmp}/roster-e2e.XXXXXX")
PASSED=0
T_START=$(date +%s%3N)
STEP="setup"

now_ms() { date +%s%3N; }
stamp() { local t; t=$(( $(now_ms) - T_START )); printf '[%4d.%01ds]' $((t / 1000)) $((t % 1000 / 100)); }
log() { echo "$(stamp) $*"; }
ok() { PASSED=$((PASSED + 1)); echo "$(stamp) ok: $*"; }
fail() { echo "$(stamp) FAIL: [$STEP] $*"; exit 1; }
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); } # ms -> "s.mmm"
step() { STEP=$1; echo; echo "$(stamp) === $*"; }

on_exit() {
	local rc=$?
	set +e
	if [ "$rc" -ne 0 ]; then
		echo
		echo "$(stamp) FAIL: e2e stopped in step [$STEP] (exit $rc); docker compose logs follow"
		"${C[@]}" ps
		"${C[@]}" --profile demo logs --no-color --timestamps --tail "${E2E_LOG_LINES:-200}" 2>&1
	fi
	echo "$(stamp) tearing down: compose down -v"
	"${C[@]}" --profile demo down -v --remove-orphans >/dev/null 2>&1
	rm -rf "$WORK"
	if [ "$rc" -ne 0 ]; then
		echo "e2e-compose: $PASSED passed, 1 failed"
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------
# Helpers: HTTP through the published ports (curl), JSON with python3.

cat >"$WORK/j.py" <<'PY'
import json, sys

def load():
    return json.load(sys.stdin)

cmd = sys.argv[1]
if cmd == "addrs":
    # InstancesResponse -> sorted "ip:port" lines; duplicates are an error.
    doc = load()
    addrs = [f"{i['ip']}:{i['port']}" for i in doc.get("instances") or []]
    dups = sorted({a for a in addrs if addrs.count(a) > 1})
    if dups:
        print("duplicate instances: " + " ".join(dups), file=sys.stderr)
        sys.exit(3)
    print("\n".join(sorted(addrs)))
elif cmd == "field":
    doc = load()
    for part in sys.argv[2].split("."):
        doc = doc[part]
    print(doc if not isinstance(doc, (dict, list)) else json.dumps(doc, sort_keys=True))
elif cmd == "canon":
    # InstancesResponse -> the instance list as canonical JSON, sorted by ip:port.
    doc = load()
    inst = sorted(doc.get("instances") or [], key=lambda i: (i["ip"], i["port"]))
    print(json.dumps(inst, sort_keys=True, indent=1))
else:
    sys.exit(f"j.py: unknown command {cmd}")
PY
jq_py() { python3 "$WORK/j.py" "$@"; }

# req METHOD NODE PATH [BODY] -> prints the HTTP status (000 when unreachable); the body
# is in $WORK/body.
req() {
	local method=$1 node=$2 path=$3 body=${4:-}
	local args=(-sS -o "$WORK/body" -w '%{http_code}' -m "${REQ_TIMEOUT:-15}" -X "$method")
	if [ -n "$body" ]; then
		args+=(-H 'Content-Type: application/json' --data-binary "$body")
	fi
	curl "${args[@]}" "http://127.0.0.1:${PORTS[$node]}$path" 2>/dev/null || true
}
body() { cat "$WORK/body"; }

SVC=e2e
SVC_PATH=/v1/namespaces/public/groups/DEFAULT_GROUP/services/$SVC
EXPECTED="$WORK/expected" # sorted ip:port of every acknowledged write
: >"$EXPECTED"
NEXT_INSTANCE=1

# The k-th test instance: loopback addresses only, in a cluster whose check type is NONE,
# so the leader never probes anything.
addr_of() { local k=$1; echo "127.0.$((k / 200 + 1)).$((k % 200 + 1)):$((9000 + k % 7))"; }

# register NODE -> registers the next test instance through NODE; on success it is added
# to the expected set. Returns 1 (and leaves the status in LAST_CODE) on failure.
LAST_CODE=""
register() {
	local node=$1 a
	a=$(addr_of "$NEXT_INSTANCE")
	LAST_CODE=$(req PUT "$node" "$SVC_PATH/instances/$a" \
		"{\"cluster\":\"DEFAULT\",\"weight\":1,\"metadata\":{\"seq\":\"$NEXT_INSTANCE\"}}")
	if [ "$LAST_CODE" = 200 ] || [ "$LAST_CODE" = 201 ]; then
		echo "$a" >>"$EXPECTED"
		sort -o "$EXPECTED" "$EXPECTED"
		NEXT_INSTANCE=$((NEXT_INSTANCE + 1))
		return 0
	fi
	return 1
}

# register_retry NODE: register, retrying (same instance, so idempotent) while the answer
# is "no leader"/unavailable/unreachable (a leader change in progress), up to 20 s. Any
# other failure is fatal.
RETRIES=0
register_retry() {
	local node=$1 deadline=$(($(now_ms) + 20000))
	until register "$node"; do
		case "$LAST_CODE" in
		000|502|503|504) ;;
		*) fail "register $(addr_of "$NEXT_INSTANCE") through roster$node: HTTP $LAST_CODE $(body)" ;;
		esac
		[ "$(now_ms)" -ge "$deadline" ] && fail "register $(addr_of "$NEXT_INSTANCE") through roster$node: still HTTP $LAST_CODE after 20 s: $(head -c 300 "$WORK/body")"
		RETRIES=$((RETRIES + 1))
		log "retry: register through roster$node got HTTP $LAST_CODE: $(head -c 160 "$WORK/body")"
		sleep 0.2
	done
}

expected_count() { wc -l <"$EXPECTED" | tr -d ' '; }

# read_addrs NODE CONSISTENCY OUT -> 0 when the read succeeded (sorted ip:port in OUT),
# 1 when it got no answer or an error status, 2 when the answer is malformed or has
# duplicates. The reason is in OUT.err.
read_addrs() {
	local node=$1 consistency=$2 out=$3 code
	: >"$out"
	code=$(req GET "$node" "$SVC_PATH/instances?consistency=$consistency")
	[ "$code" = 200 ] || { echo "HTTP $code: $(head -c 300 "$WORK/body")" >"$out.err"; return 1; }
	jq_py addrs <"$WORK/body" >"$out" 2>"$out.err" || return 2
}

# check_read NODE CONSISTENCY WHAT: the read must return exactly the expected set. An
# error status (no leader during an election) is retried for up to 20 s; a successful
# read with other contents fails at once.
check_read() {
	local node=$1 consistency=$2 what=$3 got="$WORK/got" rc deadline=$(($(now_ms) + 20000))
	while :; do
		rc=0
		read_addrs "$node" "$consistency" "$got" || rc=$?
		[ "$rc" = 0 ] && break
		[ "$rc" = 2 ] && fail "$what: read on roster$node ($consistency): $(cat "$got.err")"
		[ "$(now_ms)" -ge "$deadline" ] && fail "$what: read on roster$node ($consistency) failed for 20 s: $(cat "$got.err")"
		RETRIES=$((RETRIES + 1))
		log "retry: $consistency read on roster$node: $(head -c 160 "$got.err")"
		sleep 0.2
	done
	if ! cmp -s "$got" "$EXPECTED"; then
		fail "$what: roster$node ($consistency) has $(wc -l <"$got") instances, want $(expected_count): $(diff "$EXPECTED" "$got" | head -n 10 | tr '\n' ' ')"
	fi
	ok "$what: roster$node ($consistency read) has all $(expected_count) instances, no duplicates"
}

# wait_converged NODE CONSISTENCY DEADLINE_S WHAT: poll until the node returns the expected
# set; prints the time taken.
wait_converged() {
	local node=$1 consistency=$2 limit=$3 what=$4 got="$WORK/got" t0 deadline rc
	t0=$(now_ms)
	deadline=$((t0 + limit * 1000))
	while :; do
		rc=0
		read_addrs "$node" "$consistency" "$got" || rc=$?
		[ "$rc" = 2 ] && fail "$what: read on roster$node ($consistency): $(cat "$got.err")"
		if [ "$rc" = 0 ] && cmp -s "$got" "$EXPECTED"; then
			ok "$what: roster$node ($consistency read) has all $(expected_count) instances, no duplicates, after $(secs $(($(now_ms) - t0))) s"
			return 0
		fi
		if [ "$(now_ms)" -ge "$deadline" ]; then
			local detail
			detail=$(cat "$got.err" 2>/dev/null || true)
			[ -s "$got" ] && detail="$detail has $(wc -l <"$got"), want $(expected_count): $(diff "$EXPECTED" "$got" | head -n 10 | tr '\n' ' ')"
			fail "$what: roster$node ($consistency) did not converge within ${limit}s: $detail"
		fi
		sleep 0.2
	done
}

# leader_on NODE -> the leader's id as NODE sees it ("" if none or unreachable).
leader_on() {
	local code
	code=$(REQ_TIMEOUT=3 req GET "$1" /v1/status/leader)
	if [ "$code" = 200 ]; then jq_py field id <"$WORK/body" 2>/dev/null || true; fi
}

# find_leader DEADLINE_S -> the leader id agreed by the first reachable node.
find_leader() {
	local deadline=$(($(now_ms) + $1 * 1000)) n id
	while [ "$(now_ms)" -lt "$deadline" ]; do
		for n in 1 2 3; do
			id=$(leader_on "$n")
			if [ -n "$id" ]; then echo "$id"; return 0; fi
		done
		sleep 0.1
	done
	return 1
}
node_num() { echo "${1#roster}"; } # roster2 -> 2

is_ready() { [ "$(REQ_TIMEOUT=3 req GET "$1" /v1/status/ready)" = 200 ]; }

# wait_ready DEADLINE_S NODE... : every node answers /v1/status/ready with 200.
wait_ready() {
	local limit=$1 deadline n pending
	shift
	deadline=$(($(now_ms) + limit * 1000))
	while :; do
		pending=""
		for n in "$@"; do is_ready "$n" || pending="$pending roster$n"; done
		[ -z "$pending" ] && return 0
		if [ "$(now_ms)" -ge "$deadline" ]; then
			fail "not ready within ${limit}s:$pending (last: $(head -c 300 "$WORK/body"))"
		fi
		sleep 0.1
	done
}

cid_of() { "${C[@]}" --profile demo ps -q "$1"; }

# wait_healthy DEADLINE_S SERVICE... : docker reports the healthcheck as healthy.
wait_healthy() {
	local limit=$1 deadline s st pending cids=()
	shift
	deadline=$(($(now_ms) + limit * 1000))
	for s in "$@"; do cids+=("$s=$(cid_of "$s")"); done
	while :; do
		pending=""
		for s in "${cids[@]}"; do
			st=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "${s#*=}" 2>/dev/null || echo missing)
			[ "$st" = healthy ] || pending="$pending ${s%%=*}=$st"
		done
		[ -z "$pending" ] && return 0
		[ "$(now_ms)" -ge "$deadline" ] && fail "healthcheck not healthy within ${limit}s:$pending"
		sleep 0.5
	done
}


# median and max of integers (ms), one per line on stdin.
stats_ms() { sort -n | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : int((v[NR/2] + v[NR/2+1]) / 2); printf "%d %d\n", m, v[NR]}'; }

# ---------------------------------------------------------------------------------------
step "build"
"${C[@]}" --profile demo down -v --remove-orphans >/dev/null 2>&1 || true
for n in 1 2 3; do
	port_in_use "${PORTS[$n]}" && fail "host port 127.0.0.1:${PORTS[$n]} is already in use (set ROSTER${n}_HTTP_PORT)"
	port_in_use "${GRPC_PORTS[$n]}" && fail "host port 127.0.0.1:${GRPC_PORTS[$n]} is already in use (set ROSTER${n}_GRPC_PORT)"
done
if [ "$BUILD" = 1 ]; then
	t0=$(now_ms)
	[ -n "$BIN" ] || BIN="$WORK/roster"
	"$ROOT/scripts/build-image.sh" --bin-out "$BIN"
	ok "image built in $(secs $(($(now_ms) - t0))) s"
else
	[ -n "$BIN" ] || BIN=$(command -v roster || true)
	[ -x "$BIN" ] || fail "--no-build needs --bin PATH to a roster binary for the host"
	docker image inspect roster:dev >/dev/null 2>&1 || fail "--no-build: image roster:dev does not exist"
fi
IMAGE_BYTES=$(docker image inspect roster:dev --format '{{.Size}}')
IMAGE_MIB=$(awk -v b="$IMAGE_BYTES" 'BEGIN {printf "%.1f", b / 1048576}')
ok "image roster:dev is $IMAGE_BYTES bytes ($IMAGE_MIB MiB), $("$BIN" version 2>/dev/null | head -n 1)"

# ---------------------------------------------------------------------------------------
step "cold start"
t0=$(now_ms)
"${C[@]}" up -d
wait_ready 60 1 2 3
UP_READY_MS=$(($(now_ms) - t0))
LEADER=$(find_leader 10) || fail "no leader reported"
ok "compose up -d to all 3 nodes ready: $(secs "$UP_READY_MS") s (leader $LEADER)"
wait_healthy 60 roster1 roster2 roster3
UP_HEALTHY_MS=$(($(now_ms) - t0))
ok "docker healthchecks healthy on all 3 nodes: $(secs "$UP_HEALTHY_MS") s after compose up"

# ---------------------------------------------------------------------------------------
step "1. register 100 through roster2, read through roster1 and roster3"
code=$(req PUT 2 "$SVC_PATH/clusters/DEFAULT" '{"healthCheck":{"type":"NONE"}}')
{ [ "$code" = 200 ] || [ "$code" = 201 ]; } || fail "PUT cluster DEFAULT (check NONE) through roster2: HTTP $code $(body)"
t0=$(now_ms)
for _ in $(seq 1 100); do register_retry 2; done
ms=$(($(now_ms) - t0))
ok "100 instances registered through roster2 (a follower or the leader) in $(secs "$ms") s ($((ms / 100)) ms each, sequential)"
check_read 1 linearizable "step 1"
check_read 3 linearizable "step 1"
wait_converged 1 stale 10 "step 1"
wait_converged 3 stale 10 "step 1"
for n in 1 3; do
	req GET "$n" "$SVC_PATH/instances?consistency=stale" >/dev/null
	jq_py field service.name <"$WORK/body" | grep -qx "$SVC" || fail "stale read on roster$n: service.name is not $SVC: $(head -c 300 "$WORK/body")"
done
ok "step 1: responses carry the service ($SVC)"
for n in 1 2 3; do
	out=$("$BIN" nacos-watch "$SVC" --grpc-addr "127.0.0.1:${GRPC_PORTS[$n]}" --once -o json 2>&1) ||
		fail "nacos-watch on roster$n's gRPC port ${GRPC_PORTS[$n]}: $out"
	hosts=$(printf '%s' "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["serviceInfo"]["hosts"]))') ||
		fail "nacos-watch on roster$n: unreadable answer: $(printf '%s' "$out" | head -c 300)"
	[ "$hosts" = "$(expected_count)" ] || fail "a Nacos 2.x subscription on roster$n sees $hosts instances, want $(expected_count)"
done
ok "step 1: a Nacos 2.x gRPC subscription on each node sees all $(expected_count) instances"

# ---------------------------------------------------------------------------------------
step "2+3. failover: kill the leader, elect, write, restart, catch up ($FAILOVER_TRIALS trials)"
: >"$WORK/elect_ms"
: >"$WORK/write_ms"
for trial in $(seq 1 "$FAILOVER_TRIALS"); do
	STEP="failover trial $trial"
	LEADER=$(find_leader 10) || fail "no leader before the trial"
	L=$(node_num "$LEADER")
	case "$L" in 1|2|3) ;; *) fail "leader id $LEADER is not one of roster1..3" ;; esac
	SURVIVORS=()
	for n in 1 2 3; do [ "$n" = "$L" ] || SURVIVORS+=("$n"); done
	W=${SURVIVORS[0]}

	"${C[@]}" kill "roster$L" >/dev/null 2>&1
	t0=$(now_ms)
	# A new leader, as the survivors see it.
	deadline=$((t0 + 15000))
	NEW=""
	while [ -z "$NEW" ]; do
		for n in "${SURVIVORS[@]}"; do
			id=$(leader_on "$n")
			if [ -n "$id" ] && [ "$id" != "$LEADER" ]; then NEW=$id; break; fi
		done
		[ -n "$NEW" ] && break
		[ "$(now_ms)" -ge "$deadline" ] && fail "no new leader 15 s after killing $LEADER"
		sleep 0.05
	done
	elect=$(($(now_ms) - t0))
	echo "$elect" >>"$WORK/elect_ms"
	# The first acknowledged write through a survivor.
	until REQ_TIMEOUT=5 register "$W"; do
		[ "$(now_ms)" -ge "$deadline" ] && fail "no write through roster$W succeeded 15 s after killing $LEADER (last HTTP $LAST_CODE $(head -c 200 "$WORK/body"))"
		sleep 0.05
	done
	write=$(($(now_ms) - t0))
	echo "$write" >>"$WORK/write_ms"
	[ "$elect" -le 5000 ] || fail "new leader $NEW took $(secs "$elect") s (> 5 s) after killing $LEADER"
	ok "trial $trial: killed leader $LEADER; new leader $NEW after $(secs "$elect") s; first write through roster$W after $(secs "$write") s"
	for _ in 1 2 3 4 5; do register_retry "$W"; done
	ok "trial $trial: 5 more writes through survivor roster$W"
	for n in "${SURVIVORS[@]}"; do check_read "$n" linearizable "trial $trial"; done

	t1=$(now_ms)
	"${C[@]}" start "roster$L" >/dev/null 2>&1
	wait_ready 60 "$L"
	ok "trial $trial: restarted roster$L, ready after $(secs $(($(now_ms) - t1))) s"
	wait_converged "$L" stale 30 "trial $trial: restarted node catches up"
done
STEP="failover summary"
read -r ELECT_MED ELECT_MAX < <(stats_ms <"$WORK/elect_ms")
read -r WRITE_MED WRITE_MAX < <(stats_ms <"$WORK/write_ms")
ok "failover over $FAILOVER_TRIALS trials: new leader median $(secs "$ELECT_MED") s, max $(secs "$ELECT_MAX") s; leader kill to first write median $(secs "$WRITE_MED") s, max $(secs "$WRITE_MAX") s"
wait_healthy 60 roster1 roster2 roster3
ok "all 3 nodes healthy again"

# ---------------------------------------------------------------------------------------
step "3b. rolling restart with docker compose stop (SIGTERM): followers, then the leader"
LEADER=$(find_leader 10) || fail "no leader before the rolling restart"
L=$(node_num "$LEADER")
ORDER=()
for n in 1 2 3; do [ "$n" = "$L" ] || ORDER+=("$n"); done
ORDER+=("$L")
for n in "${ORDER[@]}"; do
	OTHER=1
	while [ "$OTHER" = "$n" ]; do OTHER=$((OTHER + 1)); done
	t0=$(now_ms)
	"${C[@]}" stop "roster$n" >/dev/null 2>&1 || fail "compose stop roster$n"
	stop_ms=$(($(now_ms) - t0))
	# A clean stop: well within docker's 10 s before SIGKILL (the node bounds it at 8 s).
	[ "$stop_ms" -lt 9000 ] || fail "roster$n took $(secs "$stop_ms") s to stop after SIGTERM (killed by docker?)"
	# The leader handed leadership over before it exited: the first write through a
	# survivor succeeds at once, with no election to wait for.
	register "$OTHER" || fail "the first write through roster$OTHER after roster$n stopped failed: HTTP $LAST_CODE $(head -c 200 "$WORK/body")"
	id=$(leader_on "$OTHER")
	[ -n "$id" ] && [ "$id" != "roster$n" ] || fail "roster$OTHER names leader '$id' after roster$n stopped"
	t1=$(now_ms)
	"${C[@]}" start "roster$n" >/dev/null 2>&1 || fail "compose start roster$n"
	wait_ready 60 "$n"
	ok "roster$n$([ "$n" = "$L" ] && echo ' (the leader)') stopped in $(secs "$stop_ms") s; a write through roster$OTHER succeeded at once (leader $id); ready $(secs $(($(now_ms) - t1))) s after its start"
done
wait_converged 1 linearizable 30 "after the rolling restart"
wait_healthy 60 roster1 roster2 roster3
ok "rolling restart done: $(expected_count) instances, all 3 nodes healthy"

# ---------------------------------------------------------------------------------------
step "4. partition a follower, write through the majority, heal"
LEADER=$(find_leader 10) || fail "no leader"
L=$(node_num "$LEADER")
F=""
M=""
for n in 1 2 3; do
	[ "$n" = "$L" ] && continue
	if [ -z "$F" ]; then F=$n; else M=$n; fi
done
FCID=$(cid_of "roster$F")
NET=$(docker inspect --format '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{"\n"}}{{end}}' "$FCID" | grep -m1 .)
[ -n "$NET" ] || fail "cannot find the network of roster$F"
before=$(expected_count)
docker network disconnect "$NET" "$FCID"
ok "roster$F (follower) disconnected from $NET; leader is roster$L"
t0=$(now_ms)
for i in $(seq 1 50); do
	if [ $((i % 2)) = 0 ]; then n=$M; else n=$L; fi
	register_retry "$n"
done
ok "50 writes through the majority (roster$L, roster$M) during the partition in $(secs $(($(now_ms) - t0))) s"
check_read "$M" linearizable "majority during partition"
# The minority side cannot commit: a write on the cut-off node must fail.
MINORITY_ADDR=127.0.99.99:9999
if docker exec "$FCID" /roster register "$SVC" "$MINORITY_ADDR" --addr 127.0.0.1:8848 >"$WORK/minority.out" 2>&1; then
	fail "a write on the partitioned roster$F was acknowledged: $(cat "$WORK/minority.out")"
fi
ok "a write on the partitioned roster$F is refused: $(tr '\n' ' ' <"$WORK/minority.out" | head -c 160)"
t1=$(now_ms)
docker network connect --alias "roster$F" "$NET" "$FCID"
ok "roster$F reconnected after $(secs $((t1 - t0))) s apart"
wait_converged "$F" stale 30 "after the partition"
check_read "$F" linearizable "after the partition"
[ "$(expected_count)" = $((before + 50)) ] || fail "expected $((before + 50)) instances, have $(expected_count)"
grep -qx "$MINORITY_ADDR" "$WORK/got" && fail "the write refused on the minority side appeared after healing"
ok "after the partition: $(expected_count) instances = $before + 50, the refused minority write is absent"
for n in 1 2 3; do check_read "$n" stale "final state"; done

# ---------------------------------------------------------------------------------------
step "5. snapshot save, fresh cluster, snapshot restore"
"$BIN" snapshot --help >/dev/null 2>&1 ||
	fail "'roster snapshot' is not available in this build: step 5 needs 'roster snapshot save|restore|inspect'"
req GET 1 "$SVC_PATH/instances" >/dev/null
jq_py canon <"$WORK/body" >"$WORK/before.json"
SNAP="$WORK/backup.tar.gz"
t0=$(now_ms)
"$BIN" snapshot save "$SNAP" --addr "127.0.0.1:${PORTS[1]}" -o json >"$WORK/save.out" 2>&1 ||
	fail "roster snapshot save: $(cat "$WORK/save.out")"
ok "roster snapshot save: $(wc -c <"$SNAP" | tr -d ' ') bytes at index $(jq_py field index <"$WORK/save.out") in $(secs $(($(now_ms) - t0))) s"
"$BIN" snapshot inspect "$SNAP" -o json >"$WORK/inspect.out" 2>&1 || fail "roster snapshot inspect: $(cat "$WORK/inspect.out")"
[ "$(jq_py field verified <"$WORK/inspect.out")" = True ] || fail "roster snapshot inspect: not verified: $(cat "$WORK/inspect.out")"
n=$(jq_py field counts.instances <"$WORK/inspect.out")
[ "$n" = "$(expected_count)" ] || fail "roster snapshot inspect: the archive holds $n instances, want $(expected_count)"
ok "roster snapshot inspect: verified, $n instances"
"${C[@]}" down -v
ok "compose down -v"
t0=$(now_ms)
"${C[@]}" up -d
wait_ready 60 1 2 3
ok "fresh cluster ready in $(secs $(($(now_ms) - t0))) s"
code=$(req GET 1 "$SVC_PATH/instances")
[ "$code" = 404 ] || fail "the fresh cluster already has service $SVC (HTTP $code)"
ok "fresh cluster is empty (service $SVC: HTTP 404)"
t0=$(now_ms)
"$BIN" snapshot restore "$SNAP" --addr "127.0.0.1:${PORTS[1]}" >"$WORK/restore.out" 2>&1 ||
	fail "roster snapshot restore: $(cat "$WORK/restore.out")"
ok "roster snapshot restore in $(secs $(($(now_ms) - t0))) s"
req GET 1 "$SVC_PATH/instances" >/dev/null
jq_py canon <"$WORK/body" >"$WORK/after.json"
if ! cmp -s "$WORK/before.json" "$WORK/after.json"; then
	fail "instances after restore differ from before: $(diff "$WORK/before.json" "$WORK/after.json" | head -n 20 | tr '\n' ' ')"
fi
ok "restored instance list equals the saved one ($(expected_count) instances, every field)"
for n in 1 2 3; do wait_converged "$n" stale 30 "after restore"; done

# ---------------------------------------------------------------------------------------
if [ "$DEMO" = 1 ]; then
	step "6. demo profile"
	"$BIN" demo-backend --help >/dev/null 2>&1 ||
		fail "'roster demo-backend' is not a command of this build (cmd/roster/demo_backend.go defines it; root.go must add a.demoBackendCmd())"
	t0=$(now_ms)
	"${C[@]}" --profile demo up -d demo-backend demo-register
	deadline=$(($(now_ms) + 60000))
	while :; do
		st=$(docker inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$(cid_of demo-register)" 2>/dev/null || echo "missing -")
		[ "${st%% *}" = exited ] && break
		[ "$(now_ms)" -ge "$deadline" ] && fail "demo-register did not finish within 60 s ($st)"
		sleep 0.5
	done
	[ "$st" = "exited 0" ] || fail "demo-register exited with ${st#* }: $("${C[@]}" --profile demo logs --no-color demo-register | tail -n 20)"
	ok "demo-register ran and exited 0"
	DEMO_PATH=/v1/namespaces/public/groups/DEFAULT_GROUP/services/demo/instances
	# wait_demo_health true|false DEADLINE_S: demo-backend:8080 is registered with that health.
	wait_demo_health() {
		local want=$1 deadline=$(($(now_ms) + $2 * 1000)) code
		while :; do
			code=$(req GET 1 "$DEMO_PATH")
			if [ "$code" = 200 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
want = sys.argv[2] == "true"
sys.exit(0 if any(i["ip"] == "demo-backend" and i["port"] == 8080 and i["healthy"] == want for i in d["instances"]) else 1)
' "$WORK/body" "$want"; then return 0; fi
			[ "$(now_ms)" -ge "$deadline" ] && return 1
			sleep 0.5
		done
	}
	wait_demo_health true 30 || fail "demo-backend:8080 not registered healthy in service demo: $(head -c 400 "$WORK/body")"
	ok "demo-backend:8080 registered in service demo and healthy after $(secs $(($(now_ms) - t0))) s"
	code=$(req GET 1 /v1/namespaces/public/groups/DEFAULT_GROUP/services/demo/clusters/DEFAULT)
	[ "$code" = 200 ] || fail "GET cluster DEFAULT of demo: HTTP $code $(head -c 300 "$WORK/body")"
	check=$(jq_py field cluster.healthCheck <"$WORK/body")
	python3 -c '
import json, sys
h = json.loads(sys.argv[1])
sys.exit(0 if h.get("type") == "HTTP" and h.get("path") == "/healthz" else 1)
' "$check" || fail "cluster DEFAULT of demo has health check $check, want HTTP /healthz"
	ok "service demo: cluster DEFAULT probes HTTP /healthz ($check)"
	# The leader's prober: stopping the backend makes it unhealthy, starting it healthy again.
	"${C[@]}" --profile demo stop demo-backend
	t0=$(now_ms)
	wait_demo_health false 30 || fail "demo-backend stopped but still healthy after 30 s (is the leader's health prober running?): $(head -c 400 "$WORK/body")"
	ok "demo-backend stopped: the leader marked it unhealthy after $(secs $(($(now_ms) - t0))) s"
	"${C[@]}" --profile demo start demo-backend
	t0=$(now_ms)
	wait_demo_health true 30 || fail "demo-backend started but still unhealthy after 30 s: $(head -c 400 "$WORK/body")"
	ok "demo-backend started: healthy again after $(secs $(($(now_ms) - t0))) s"
fi

# ---------------------------------------------------------------------------------------
step "teardown"
"${C[@]}" --profile demo down -v --remove-orphans
ok "compose down -v"

# ---------------------------------------------------------------------------------------
if [ "$SECURE" = 1 ]; then
	step "7. the secure cluster: scripts/e2e-compose-secure.sh"
	"$ROOT/scripts/e2e-compose-secure.sh" --no-build --bin "$BIN" || fail "the secure compose cluster's end-to-end test failed (output above)"
	ok "docker-compose.secure.yml: ACLs, HTTPS, mutual TLS (scripts/e2e-compose-secure.sh)"
fi
trap - EXIT
rm -rf "$WORK"

echo
echo "== summary"
printf '%-46s %s\n' \
	"image roster:dev:" "$IMAGE_MIB MiB ($IMAGE_BYTES bytes)" \
	"cold compose up -d to 3 nodes ready:" "$(secs "$UP_READY_MS") s (docker healthy: $(secs "$UP_HEALTHY_MS") s)" \
	"new leader after a leader kill ($FAILOVER_TRIALS trials):" "median $(secs "$ELECT_MED") s, max $(secs "$ELECT_MAX") s" \
	"leader kill to first write ($FAILOVER_TRIALS trials):" "median $(secs "$WRITE_MED") s, max $(secs "$WRITE_MAX") s" \
	"requests retried (no leader, unavailable):" "$RETRIES" \
	"total:" "$(secs $(($(now_ms) - T_START))) s"
echo "e2e-compose: $PASSED passed, 0 failed"
