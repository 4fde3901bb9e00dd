# Sourced by the build scripts: the release version and commit of the checkout, and the
# -ldflags that stamp them into the binary (see buildinfo's package comment).
#
#   ROSTER_VERSION  VERSION if set, else `git describe --tags --match 'v*' --always --dirty`
#                   (v0.3.0 on a release tag, v0.3.0-4-g0123abc after it), else "dev"
#   ROSTER_COMMIT   COMMIT if set, else the full HEAD commit, "-dirty" with local changes
#   ROSTER_LDFLAGS  -X flags for both
roster_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROSTER_VERSION=${VERSION:-$(git -C "$roster_root" describe --tags --match 'v*' --always --dirty 2>/dev/null || true)}
ROSTER_VERSION=${ROSTER_VERSION:-dev}
if [ -z "${COMMIT:-}" ]; then
	ROSTER_COMMIT=$(git -C "$roster_root" rev-parse HEAD 2>/dev/null || true)
	if [ -n "$ROSTER_COMMIT" ] && [ -n "$(git -C "$roster_root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		ROSTER_COMMIT="$ROSTER_COMMIT-dirty"
	fi
else
	ROSTER_COMMIT=$COMMIT
fi
ROSTER_LDFLAGS="-X github.com/rosterhq/roster/buildinfo.version=$ROSTER_VERSION -X github.com/rosterhq/roster/buildinfo.commit=$ROSTER_COMMIT"
