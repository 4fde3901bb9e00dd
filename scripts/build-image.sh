#!/usr/bin/env bash
# Builds the roster server image (FROM scratch: no base image, no registry, no network).
#
#   scripts/build-image.sh [--bin-out PATH] [--tag TAG]
#
# 1. Builds a static binary: CGO_ENABLED=0 go build -trimpath -ldflags "-s -w <version stamps>"
#    with the release version and commit of scripts/lib/version.sh (`git describe --tags`,
#    "dev" outside a repository with commits; override with VERSION=... and COMMIT=...).
# 2. Lays out a small build context in a temporary directory: build/roster and the
#    build/rootfs/ skeleton (/data 0700 and /tmp 1777, chowned to 65532 by the Dockerfile).
# 3. docker build -f Dockerfile <context> -t roster:dev -t roster:$VERSION (plus --tag TAG).
#
# With --bin-out PATH the same binary is also copied to PATH, for use as a client on the
# host. The classic builder is used unless the buildx plugin is installed (the Docker CLI
# needs buildx for BuildKit); either works offline since FROM scratch resolves nothing.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_OUT=""
EXTRA_TAGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--bin-out) BIN_OUT=$2; shift 2 ;;
	--bin-out=*) BIN_OUT=${1#*=}; shift ;;
	--tag) EXTRA_TAGS+=("$2"); shift 2 ;;
	--tag=*) EXTRA_TAGS+=("${1#*=}"); shift ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) echo "build-image: unknown argument: $1" >&2; exit 2 ;;
	esac
done

. "$ROOT/scripts/lib/version.sh"
VERSION=$ROSTER_VERSION
# A docker tag allows [A-Za-z0-9_.-], at most 128 characters.
TAG_VERSION=$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9_.-' '-' | cut -c1-128)

CTX=$(mktemp -d "${TMPDIR:-/tmp}/roster-image.XXXXXX")
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CTX/build/rootfs/data" "$CTX/build/rootfs/tmp"
chmod 0700 "$CTX/build/rootfs/data"
chmod 1777 "$CTX/build/rootfs/tmp"

echo "== go build (version $VERSION)"
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ROSTER_LDFLAGS" \
	-o "$CTX/build/roster" ./cmd/roster)
if command -v file >/dev/null 2>&1 && ! file "$CTX/build/roster" | grep -q 'statically linked'; then
	echo "build-image: $CTX/build/roster is not statically linked" >&2
	exit 1
fi
if [ -n "$BIN_OUT" ]; then
	mkdir -p "$(dirname "$BIN_OUT")"
	cp "$CTX/build/roster" "$BIN_OUT"
fi

if [ -z "${DOCKER_BUILDKIT:-}" ]; then
	if docker buildx version >/dev/null 2>&1; then
		export DOCKER_BUILDKIT=1
	else
		export DOCKER_BUILDKIT=0
	fi
fi

tags=(-t roster:dev)
[ "$TAG_VERSION" != dev ] && tags+=(-t "roster:$TAG_VERSION")
for t in ${EXTRA_TAGS[@]+"${EXTRA_TAGS[@]}"}; do tags+=(-t "$t"); done

echo "== docker build (DOCKER_BUILDKIT=$DOCKER_BUILDKIT) ${tags[*]}"
# The classic builder prints a deprecation notice on stderr; keep it out of the way.
docker build --label "org.opencontainers.image.version=$VERSION" \
	--label "org.opencontainers.image.revision=$ROSTER_COMMIT" \
	--label "org.opencontainers.image.title=roster" \
	-f "$ROOT/Dockerfile" "${tags[@]}" "$CTX" 2> >(grep -v -e DEPRECATED -e 'legacy builder' \
	-e 'BuildKit is currently disabled' -e 'environment-variable' >&2)

size=$(docker image inspect roster:dev --format '{{.Size}}')
echo "image roster:dev ($TAG_VERSION): $size bytes ($(( (size + 524288) / 1048576 )) MiB)"
