#!/usr/bin/env bash
# Regenerates nacos/nacospb/roster_nacos_payload.pb.go from roster_nacos_payload.proto:
# protoc from Debian's protobuf-compiler (installed when missing) and protoc-gen-go at the
# version pinned below, built from the Go module proxy into a temporary directory. The
# generated file is committed; nothing else needs protoc. The gRPC services are declared
# by hand in nacos/nacospb/service.go (the proto file says why).
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12

if ! command -v protoc >/dev/null 2>&1; then
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN=$bin go install "$PROTOC_GEN_GO"
PATH=$bin:$PATH protoc --proto_path=nacos/nacospb \
	--go_out=nacos/nacospb --go_opt=paths=source_relative \
	roster_nacos_payload.proto
echo "generated: $(ls nacos/nacospb/*.go | tr '\n' ' ')"
