#!/usr/bin/env bash
# The project's test command: formatting, vet, staticcheck, then every Go test with the
# race detector. Usage: scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2
if ! command -v staticcheck >/dev/null 2>&1 && [ ! -x "$(go env GOPATH)/bin/staticcheck" ]; then
	echo "== installing staticcheck $STATICCHECK_VERSION"
	go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
STATICCHECK=$(command -v staticcheck || echo "$(go env GOPATH)/bin/staticcheck")

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
"$STATICCHECK" ./...
echo "== go test -race"
go test -race -count=1 -timeout 15m "$@" ./...
