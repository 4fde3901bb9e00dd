#!/usr/bin/env bash
# Prepares ./secure/ for docker-compose.secure.yml: the cluster CA, one certificate per
# node and the bootstrap secret.
#
#   scripts/secure-setup.sh [--dir DIR] [--bin PATH] [--nodes N]
#
# Writes, with `roster tls` (files that exist are kept, so a second run only adds what is
# missing):
#   DIR/ca.pem, DIR/ca-key.pem            the cluster CA (the key is never mounted)
#   DIR/rosterN.pem, DIR/rosterN-key.pem  node N's certificate, valid for rosterN (the
#                                         compose network), localhost and 127.0.0.1
#   DIR/bootstrap-token                   a random UUID: the management token's secret
# DIR defaults to secure/ at the repository root (git-ignored). The nodes run as uid 65532
# in the image: run as root, the keys and the secret are chowned to it and stay 0600;
# otherwise they are made readable by all (0644) so the container can read them, which is
# acceptable for a local cluster only (docs/security.md).
#
#   --bin PATH   the roster binary to run (default: go build ./cmd/roster into a temp dir)
#   --nodes N    how many node certificates, roster1..rosterN (default 3)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR="$ROOT/secure"
BIN=""
NODES=3
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) DIR=$2; shift 2 ;;
	--dir=*) DIR=${1#*=}; shift ;;
	--bin) BIN=$2; shift 2 ;;
	--bin=*) BIN=${1#*=}; shift ;;
	--nodes) NODES=$2; shift 2 ;;
	--nodes=*) NODES=${1#*=}; shift ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) echo "secure-setup: unknown argument: $1" >&2; exit 2 ;;
	esac
done
case "$NODES" in
''|*[!0-9]*|0) echo "secure-setup: --nodes needs a positive integer" >&2; exit 2 ;;
esac

if [ -z "$BIN" ]; then
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/roster-secure.XXXXXX")
	trap 'rm -rf "$TMP"' EXIT
	(cd "$ROOT" && go build -o "$TMP/roster" ./cmd/roster)
	BIN="$TMP/roster"
fi

mkdir -p "$DIR"
# The nodes' files are read by uid 65532 inside the containers: the directory must be
# searchable by it.
chmod 0755 "$DIR"

if [ ! -e "$DIR/ca.pem" ]; then
	"$BIN" tls ca create --dir "$DIR"
else
	echo "kept $DIR/ca.pem"
fi
for n in $(seq 1 "$NODES"); do
	if [ ! -e "$DIR/roster$n.pem" ]; then
		"$BIN" tls cert create --dir "$DIR" --node "roster$n" --dns "roster$n"
	else
		echo "kept $DIR/roster$n.pem"
	fi
done
if [ ! -e "$DIR/bootstrap-token" ]; then
	uuid=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || python3 -c 'import uuid; print(uuid.uuid4())')
	(umask 077 && printf '%s\n' "$uuid" >"$DIR/bootstrap-token")
	echo "wrote $DIR/bootstrap-token (the management token's secret: keep it secret)"
else
	echo "kept $DIR/bootstrap-token"
fi

# What the containers read: the CA certificate, the node keys and certificates, the secret.
chmod 0644 "$DIR/ca.pem" "$DIR"/roster*.pem
chmod 0600 "$DIR/ca-key.pem"
readable=("$DIR"/roster*-key.pem "$DIR/bootstrap-token")
if [ "$(id -u)" = 0 ]; then
	chown 65532:65532 "${readable[@]}"
	chmod 0600 "${readable[@]}"
	echo "keys and secret: owned by uid 65532 (the image's user), mode 0600"
else
	chmod 0644 "${readable[@]}"
	echo "keys and secret: mode 0644 so the image's user (uid 65532) can read them; for a local cluster only"
fi
echo "ready: docker compose -f docker-compose.secure.yml up -d"
