#!/usr/bin/env bash
# End-to-end test of the secure compose cluster (docker-compose.secure.yml): ACL tokens,
# HTTPS-only API and Nacos gRPC, mutual TLS between nodes.
#
#   scripts/e2e-compose-secure.sh [--no-build --bin PATH]
#
# Prepares certificates and the bootstrap secret with scripts/secure-setup.sh in a temporary
# directory (ROSTER_SECURE_DIR), starts the cluster and checks, printing "ok: ..." or
# "FAIL: ..." for each:
#   1. the three nodes become healthy (their healthcheck speaks HTTPS) and the one-shot
#      acl-bootstrap makes the prepared secret the management token; running it again
#      changes nothing;
#   2. plain HTTP is refused, HTTPS without the cluster CA does not verify, anonymous
#      requests get 401 except readiness and the leader;
#   3. a token scoped to namespace public (write) is created through roster2, registers
#      instances through roster3 and reads them through roster1; it gets 403 outside its
#      namespace and on operator routes; every member advertises an https:// address;
#   4. a join presented with a certificate of another CA is refused and the membership
#      is unchanged;
#   5. Nacos: login with the accessor id and secret, the v1 instance list with the
#      accessToken, and a Nacos 2.x gRPC subscription over TLS (`roster nacos-watch
#      --ca-file --token`) see every instance; without a token they are refused;
#   6. a restarted node still knows the tokens; deleting the scoped token through roster3
#      makes every node refuse it (time to the last node printed).
# Tears down with `compose down -v`, also on failure (after printing the logs).
#
# Needs docker with compose, curl and python3 (and go, unless --no-build). Host ports
# 127.0.0.1:18848-18850 and 19848-19850 must be free (ROSTERn_HTTPS_PORT,
# ROSTERn_GRPC_TLS_PORT override them). Without a docker engine it prints "skipped" and
# exits 0, except under CI=true.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=1
BIN=""
while [ $# -gt 0 ]; do
	case "$1" in
	--no-build) BUILD=0; shift ;;
	--bin) BIN=$2; shift 2 ;;
	--bin=*) BIN=${1#*=}; shift ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) echo "e2e-compose-secure: unknown argument: $1" >&2; exit 2 ;;
	esac
done

# shellcheck source=lib/compose-env.sh
. "$ROOT/scripts/lib/compose-env.sh"
compose_env e2e-compose-secure

PROJECT=${COMPOSE_PROJECT_NAME:-roster-e2e-secure}
C=("${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.secure.yml")
PORTS=("" "${ROSTER1_HTTPS_PORT:-18848}" "${ROSTER2_HTTPS_PORT:-18849}" "${ROSTER3_HTTPS_PORT:-18850}")
GRPC_PORTS=("" "${ROSTER1_GRPC_TLS_PORT:-19848}" "${ROSTER2_GRPC_TLS_PORT:-19849}" "${ROSTER3_GRPC_TLS_PORT:-19850}")
export ROSTER1_HTTPS_PORT=${PORTS[1]} ROSTER2_HTTPS_PORT=${PORTS[2]} ROSTER3_HTTPS_PORT=${PORTS[3]}
export ROSTER1_GRPC_TLS_PORT=${GRPC_PORTS[1]} ROSTER2_GRPC_TLS_PORT=${GRPC_PORTS[2]} ROSTER3_GRPC_TLS_PORT=${GRPC_PORTS[3]}
export NO_PROXY='*' no_proxy='*'
unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy
# The CLI must not pick up a token or TLS files from the caller's environment.
unset ROSTER_TOKEN ROSTER_CA_FILE ROSTER_CERT_FILE ROSTER_KEY_FILE

WORK=$(mktemp -d "${TMPDIR:-/tmp}/roster-e2e-secure.XXXXXX")
chmod 0755 "$WORK"
export ROSTER_SECURE_DIR="$WORK/secure"
PASSED=0
T_START=$(date +%s%3N)
STEP=setup

now_ms() { date +%s%3N; }
stamp() { local t; t=$(( $(now_ms) - T_START )); printf '[%4d.%01ds]' $((t / 1000)) $((t % 1000 / 100)); }
ok() { PASSED=$((PASSED + 1)); echo "$(stamp) ok: $*"; }
fail() { echo "$(stamp) FAIL: [$STEP] $*"; exit 1; }
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
step() { STEP=$1; echo; echo "$(stamp) === $*"; }

on_exit() {
	local rc=$?
	set +e
	if [ "$rc" -ne 0 ]; then
		echo
		echo "$(stamp) FAIL: stopped in step [$STEP] (exit $rc); docker compose logs follow"
		"${C[@]}" ps
		"${C[@]}" logs --no-color --timestamps --tail "${E2E_LOG_LINES:-150}" 2>&1
	fi
	"${C[@]}" down -v --remove-orphans >/dev/null 2>&1
	rm -rf "$WORK"
	[ "$rc" -ne 0 ] && echo "e2e-compose-secure: $PASSED passed, 1 failed"
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

CA="$ROSTER_SECURE_DIR/ca.pem"
# req METHOD NODE PATH [TOKEN] [BODY] -> the HTTP status over HTTPS verified with the
# cluster CA (000 when the request failed); the body is in $WORK/body.
req() {
	local method=$1 node=$2 path=$3 token=${4:-} body=${5:-}
	local args=(-sS -o "$WORK/body" -w '%{http_code}' -m 15 -X "$method" --cacert "$CA")
	[ -n "$token" ] && args+=(-H "X-Roster-Token: $token")
	[ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
	curl "${args[@]}" "https://127.0.0.1:${PORTS[$node]}$path" 2>"$WORK/curl.err" || true
}
field() { python3 -c 'import json,sys
d = json.load(sys.stdin)
for p in sys.argv[1].split("."):
    d = d[int(p)] if isinstance(d, list) else d[p]
print(d if not isinstance(d, (dict, list)) else json.dumps(d))' "$1"; }
body() { head -c 400 "$WORK/body"; }
cli() { "$BIN" "$@" --ca-file "$CA"; }

for n in 1 2 3; do
	port_in_use "${PORTS[$n]}" && fail "host port 127.0.0.1:${PORTS[$n]} is already in use (set ROSTER${n}_HTTPS_PORT)"
	port_in_use "${GRPC_PORTS[$n]}" && fail "host port 127.0.0.1:${GRPC_PORTS[$n]} is already in use (set ROSTER${n}_GRPC_TLS_PORT)"
done
if [ "$BUILD" = 1 ]; then
	[ -n "$BIN" ] || BIN="$WORK/roster"
	"$ROOT/scripts/build-image.sh" --bin-out "$BIN"
else
	[ -x "$BIN" ] || fail "--no-build needs --bin PATH to a roster binary for the host"
	docker image inspect roster:dev >/dev/null 2>&1 || fail "--no-build: image roster:dev does not exist"
fi
"$ROOT/scripts/secure-setup.sh" --dir "$ROSTER_SECURE_DIR" --bin "$BIN" >"$WORK/setup.log" ||
	fail "secure-setup.sh: $(cat "$WORK/setup.log")"
MGMT=$(cat "$ROSTER_SECURE_DIR/bootstrap-token")
ok "secure-setup.sh wrote the CA, roster1..3 certificates and the bootstrap secret"

# ---------------------------------------------------------------------------------------
step "1. cold start and ACL bootstrap"
cid_of() { "${C[@]}" ps -q "$1"; }
wait_healthy() {
	local deadline=$(($(now_ms) + $1 * 1000)) s st pending
	shift
	while :; do
		pending=""
		for s in "$@"; do
			st=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$(cid_of "$s")" 2>/dev/null || echo missing)
			[ "$st" = healthy ] || pending="$pending $s=$st"
		done
		[ -z "$pending" ] && return 0
		[ "$(now_ms)" -ge "$deadline" ] && fail "healthcheck (over HTTPS) not healthy within ${1}s:$pending"
		sleep 0.5
	done
}
# wait_exited SERVICE DEADLINE_S -> "exited CODE" of a one-shot service.
wait_exited() {
	local deadline=$(($(now_ms) + $2 * 1000)) st
	while :; do
		st=$(docker inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$(cid_of "$1")" 2>/dev/null || echo "missing -")
		case "$st" in exited*) echo "$st"; return 0 ;; esac
		[ "$(now_ms)" -ge "$deadline" ] && { echo "$st"; return 1; }
		sleep 0.5
	done
}
t0=$(now_ms)
"${C[@]}" up -d
wait_healthy 90 roster1 roster2 roster3
UP_MS=$(($(now_ms) - t0))
ok "compose up -d to 3 healthy nodes (healthcheck over HTTPS): $(secs "$UP_MS") s"
st=$(wait_exited acl-bootstrap 60) || fail "acl-bootstrap did not finish within 60 s ($st)"
[ "$st" = "exited 0" ] || fail "acl-bootstrap: $st: $("${C[@]}" logs --no-color acl-bootstrap | tail -n 20)"
"${C[@]}" logs --no-color acl-bootstrap | grep -q "$MGMT" && fail "acl-bootstrap printed the management secret to its log"
code=$(req GET 2 /v1/acl/token/self "$MGMT")
[ "$code" = 200 ] && [ "$(field management <"$WORK/body")" = True ] ||
	fail "token self with the bootstrap secret on roster2: HTTP $code $(body)"
ok "acl-bootstrap exited 0; the prepared secret is the management token (checked on roster2), not in the log"
"${C[@]}" up -d acl-bootstrap >/dev/null 2>&1
st=$(wait_exited acl-bootstrap 60) || fail "second acl-bootstrap did not finish ($st)"
[ "$st" = "exited 0" ] || fail "acl-bootstrap run again: $st: $("${C[@]}" logs --no-color acl-bootstrap | tail -n 5)"
code=$(req GET 1 /v1/acl/tokens "$MGMT")
[ "$code" = 200 ] || fail "token list: HTTP $code $(body)"
count=$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tokens"]))' <"$WORK/body")
[ "$count" = 1 ] || fail "after a second acl-bootstrap there are $count tokens, want 1"
ok "acl-bootstrap run again exits 0 and creates nothing (1 token)"

# ---------------------------------------------------------------------------------------
step "2. transport and anonymous access"
code=$(curl -sS -o "$WORK/body" -w '%{http_code}' -m 10 "http://127.0.0.1:${PORTS[1]}/v1/status/ready" 2>/dev/null || true)
[ "$code" = 400 ] && ! grep -q '"leader"' "$WORK/body" || fail "plain HTTP to roster1: HTTP $code $(body)"
ok "plain HTTP is refused (HTTP $code: $(tr -d '\n' <"$WORK/body" | head -c 60))"
rc=0
curl -sS -o /dev/null -m 10 "https://127.0.0.1:${PORTS[1]}/v1/status/ready" 2>/dev/null || rc=$?
[ "$rc" = 60 ] || fail "HTTPS without the cluster CA: curl exit $rc, want 60 (certificate not verified)"
ok "HTTPS without the cluster CA does not verify (curl exit 60)"
for n in 1 2 3; do
	for p in /v1/status/ready /v1/status/leader; do
		code=$(req GET "$n" "$p")
		[ "$code" = 200 ] || fail "anonymous GET $p on roster$n: HTTP $code $(body) $(cat "$WORK/curl.err")"
	done
	for p in /v1/namespaces /v1/cluster/members /v1/acl/tokens; do
		code=$(req GET "$n" "$p")
		[ "$code" = 401 ] && grep -q '"unauthenticated"' "$WORK/body" || fail "anonymous GET $p on roster$n: HTTP $code $(body)"
	done
done
ok "anonymous: readiness and leader answer on every node, everything else is 401 unauthenticated"

# ---------------------------------------------------------------------------------------
step "3. a token scoped to namespace public"
out=$(cli acl token create --addr "127.0.0.1:${PORTS[2]}" --token "$MGMT" --description "e2e deployer" \
	--namespace public=write -o json 2>&1) || fail "acl token create through roster2: $out"
ACCESSOR=$(printf '%s' "$out" | field accessorId)
SCOPED=$(printf '%s' "$out" | field secretId)
ok "token $ACCESSOR created through roster2 (namespaces public=write)"
SVC_PATH=/v1/namespaces/public/groups/DEFAULT_GROUP/services/secure
code=$(req PUT 3 "$SVC_PATH/clusters/DEFAULT" "$SCOPED" '{"healthCheck":{"type":"NONE"}}')
case "$code" in 200|201) ;; *) fail "PUT cluster DEFAULT (check NONE) through roster3: HTTP $code $(body)" ;; esac
N=20
for k in $(seq 1 $N); do
	deadline=$(($(now_ms) + 20000))
	while :; do
		code=$(req PUT 3 "$SVC_PATH/instances/127.0.9.$k:8080" "$SCOPED" '{"cluster":"DEFAULT"}')
		case "$code" in 200|201) break ;; 000|502|503|504) ;; *) fail "register 127.0.9.$k through roster3: HTTP $code $(body)" ;; esac
		[ "$(now_ms)" -ge "$deadline" ] && fail "register 127.0.9.$k: HTTP $code for 20 s"
		sleep 0.2
	done
done
code=$(req GET 1 "$SVC_PATH/instances?consistency=linearizable" "$SCOPED")
[ "$code" = 200 ] || fail "linearizable read through roster1: HTTP $code $(body)"
got=$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["instances"]))' <"$WORK/body")
[ "$got" = "$N" ] || fail "roster1 reads $got instances, want $N"
ok "$N instances registered through roster3 with the scoped token, all read through roster1"
code=$(req PUT 1 /v1/namespaces/other/groups/DEFAULT_GROUP/services/secure/instances/127.0.9.1:8080 "$SCOPED" '{}')
[ "$code" = 403 ] && grep -q '"permission_denied"' "$WORK/body" || fail "scoped token writing namespace other: HTTP $code $(body)"
for p in /v1/cluster/members /v1/acl/tokens /v1/snapshot; do
	code=$(req GET 2 "$p" "$SCOPED")
	[ "$code" = 403 ] && grep -q '"permission_denied"' "$WORK/body" || fail "scoped token GET $p: HTTP $code $(body)"
done
code=$(req DELETE 2 "/v1/cluster/members/roster1" "$SCOPED")
[ "$code" = 403 ] || fail "scoped token removing roster1: HTTP $code $(body)"
ok "the scoped token gets 403 permission_denied outside public and on members, tokens, snapshot, member removal"
code=$(req GET 1 /v1/cluster/members "$MGMT")
[ "$code" = 200 ] || fail "members: HTTP $code $(body)"
python3 -c '
import json, sys
m = json.load(sys.stdin)["members"]
bad = [x for x in m if not x.get("httpAddr", "").startswith("https://")]
sys.exit(0 if len(m) == 3 and not bad and all(x["voter"] for x in m) else 1)' <"$WORK/body" ||
	fail "members are not 3 voters advertising https:// addresses: $(body)"
MEMBERS_BEFORE=$(python3 -c 'import json,sys; print(sorted(x["id"] for x in json.load(sys.stdin)["members"]))' <"$WORK/body")
ok "3 voters, each advertising an https:// API address"

# ---------------------------------------------------------------------------------------
step "4. a node of another CA cannot join"
ROGUE="$WORK/rogue"
"$BIN" tls ca create --dir "$ROGUE" >/dev/null
"$BIN" tls cert create --dir "$ROGUE" --node rogue >/dev/null
code=$(curl -sS -o "$WORK/body" -w '%{http_code}' -m 10 --cacert "$CA" --cert "$ROGUE/rogue.pem" --key "$ROGUE/rogue-key.pem" \
	-X POST -H 'Content-Type: application/json' --data-binary '{"id":"rogue","raftAddr":"127.0.0.1:7999","httpAddr":"127.0.0.1:8999"}' \
	"https://127.0.0.1:${PORTS[1]}/v1/cluster/join" 2>"$WORK/curl.err" || true)
case "$code" in
000) why="TLS handshake refused: $(head -c 120 "$WORK/curl.err")" ;;
401|403) why="HTTP $code $(field error.code <"$WORK/body")" ;;
*) fail "join with a certificate of another CA: HTTP $code $(body)" ;;
esac
code=$(req GET 2 /v1/cluster/members "$MGMT")
now=$(python3 -c 'import json,sys; print(sorted(x["id"] for x in json.load(sys.stdin)["members"]))' <"$WORK/body")
[ "$now" = "$MEMBERS_BEFORE" ] || fail "membership changed after a refused join: $now"
ok "join with a certificate of another CA refused ($why); membership unchanged"

# ---------------------------------------------------------------------------------------
step "5. Nacos clients with ACLs, over TLS"
code=$(curl -sS -o "$WORK/body" -w '%{http_code}' -m 10 --cacert "$CA" -X POST \
	--data-urlencode "username=$ACCESSOR" --data-urlencode "password=$SCOPED" \
	"https://127.0.0.1:${PORTS[2]}/nacos/v1/auth/login" 2>/dev/null || true)
[ "$code" = 200 ] || fail "Nacos login on roster2: HTTP $code $(body)"
NTOKEN=$(field accessToken <"$WORK/body")
ok "Nacos login with the accessor id and secret: accessToken, tokenTtl $(field tokenTtl <"$WORK/body")"
code=$(req GET 1 "/nacos/v1/ns/instance/list?serviceName=secure")
[ "$code" = 403 ] || fail "Nacos instance list without accessToken: HTTP $code $(body)"
code=$(req GET 1 "/nacos/v1/ns/instance/list?serviceName=secure&accessToken=$NTOKEN")
[ "$code" = 200 ] || fail "Nacos instance list with accessToken: HTTP $code $(body)"
hosts=$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["hosts"]))' <"$WORK/body")
[ "$hosts" = "$N" ] || fail "Nacos instance list shows $hosts hosts, want $N"
ok "Nacos v1 instance list: 403 without accessToken, $N hosts with it"
for n in 1 2 3; do
	out=$(cli nacos-watch secure --grpc-addr "127.0.0.1:${GRPC_PORTS[$n]}" --once -o json --token "$NTOKEN" 2>&1) ||
		fail "nacos-watch over TLS on roster$n: $out"
	hosts=$(printf '%s' "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["serviceInfo"]["hosts"]))') ||
		fail "nacos-watch on roster$n: unreadable answer: $(printf '%s' "$out" | head -c 300)"
	[ "$hosts" = "$N" ] || fail "a Nacos 2.x subscription on roster$n sees $hosts instances, want $N"
done
out=$(cli nacos-watch secure --grpc-addr "127.0.0.1:${GRPC_PORTS[1]}" --once 2>&1) && fail "nacos-watch without a token succeeded: $out"
printf '%s' "$out" | grep -q 403 || fail "nacos-watch without a token: $out"
out=$("$BIN" nacos-watch secure --grpc-addr "127.0.0.1:${GRPC_PORTS[1]}" --once --token "$NTOKEN" --timeout 3s 2>&1) &&
	fail "nacos-watch in plain text against the TLS gRPC port succeeded: $out"
ok "Nacos 2.x gRPC over TLS: every node's subscription sees $N instances with the token; refused without it or without TLS"

# ---------------------------------------------------------------------------------------
step "6. tokens survive a restart; a deletion reaches every node"
"${C[@]}" restart roster2 >/dev/null 2>&1
wait_healthy 60 roster2
code=$(req GET 2 /v1/acl/token/self "$SCOPED")
[ "$code" = 200 ] || fail "scoped token on the restarted roster2: HTTP $code $(body)"
ok "roster2 restarted: healthy again and knows the scoped token"
out=$(cli acl token delete "$ACCESSOR" --addr "127.0.0.1:${PORTS[3]}" --token "$MGMT" 2>&1) || fail "token delete through roster3: $out"
t0=$(now_ms)
for n in 1 2 3; do
	while :; do
		code=$(req GET "$n" "$SVC_PATH/instances?consistency=stale" "$SCOPED")
		[ "$code" = 401 ] && break
		[ "$(now_ms)" -ge $((t0 + 5000)) ] && fail "roster$n still answers the deleted token after 5 s: HTTP $code"
		sleep 0.05
	done
done
DEL_MS=$(($(now_ms) - t0))
ok "deleted token refused (401) by all 3 nodes $(secs "$DEL_MS") s after the delete returned"

# ---------------------------------------------------------------------------------------
step "teardown"
"${C[@]}" down -v --remove-orphans >/dev/null 2>&1
ok "compose down -v"
trap - EXIT
rm -rf "$WORK"
echo
echo "== summary (secure)"
printf '%-44s %s\n' \
	"compose up -d to 3 healthy nodes:" "$(secs "$UP_MS") s" \
	"token deletion to refusal on all 3 nodes:" "$(secs "$DEL_MS") s" \
	"total:" "$(secs $(($(now_ms) - T_START))) s"
echo "e2e-compose-secure: $PASSED passed, 0 failed"
