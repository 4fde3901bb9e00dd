//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Release is a published release of Roster, built from the repository's own history.
type Release struct {
	Version string
	Commit  string
}

// The releases the upgrade tests start from. Each is tagged in the repository (git tag
// v0.1.0 ...); the tests address them by commit so that a clone without tags works.
var (
	// FirstRelease is v0.1.0: command types 1 to 12, no announced newest type, no
	// cluster id, settings, conditional writes, ACLs or state checks.
	FirstRelease = Release{Version: "v0.1.0", Commit: "f9ee702c7789578afa24ee58e0e1963a979ac369"}
	// PreviousRelease is v0.2.0, the release before this one: command types 1 to 23.
	PreviousRelease = Release{Version: "v0.2.0", Commit: "534c25cca3c4620f14fb8204f5fadb4f08a12118"}
)

// ErrNoHistory is returned by BuildRelease when the repository lacks the release's
// commit (a shallow clone, or a source tree without git): fetch the history
// (git fetch --unshallow --tags).
var ErrNoHistory = errors.New("the repository's history does not hold the release")

// BuildRelease builds rel's cmd/roster from the git repository at modDir, statically
// and with its version stamped as its release build stamped it, into dir, and returns
// the binary's path. The sources come from a temporary `git worktree` of the commit,
// removed afterwards. A binary built before for the same commit is reused from the
// user's cache directory.
func BuildRelease(ctx context.Context, modDir, dir string, rel Release) (string, error) {
	if err := exec.CommandContext(ctx, "git", "-C", modDir, "cat-file", "-e", rel.Commit+"^{commit}").Run(); err != nil {
		return "", fmt.Errorf("%s (%s): %w", rel.Version, rel.Commit, ErrNoHistory)
	}
	bin := filepath.Join(dir, "roster-"+rel.Version)
	cached := ""
	if cache, err := os.UserCacheDir(); err == nil {
		cached = filepath.Join(cache, "roster-test-releases", rel.Commit, "roster")
		if copyFile(cached, bin) == nil && os.Chmod(bin, 0o755) == nil {
			return bin, nil
		}
	}
	src, err := os.MkdirTemp("", "roster-"+rel.Version+"-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	tree := filepath.Join(src, "tree")
	if out, err := exec.CommandContext(ctx, "git", "-C", modDir, "worktree", "add", "--detach", tree, rel.Commit).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git worktree add %s: %v\n%s", rel.Commit, err, out)
	}
	defer func() {
		_ = exec.Command("git", "-C", modDir, "worktree", "remove", "--force", tree).Run()
		_ = exec.Command("git", "-C", modDir, "worktree", "prune").Run()
	}()
	// v0.1.0 and v0.2.0 take their version from main.version; later releases from
	// buildinfo (the linker ignores the one a release does not have).
	ldflags := strings.Join([]string{
		"-X main.version=" + rel.Version,
		"-X github.com/rosterhq/roster/buildinfo.version=" + rel.Version,
		"-X github.com/rosterhq/roster/buildinfo.commit=" + rel.Commit,
	}, " ")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/roster")
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (%s): %v\n%s", rel.Version, rel.Commit, err, out)
	}
	if cached != "" && os.MkdirAll(filepath.Dir(cached), 0o755) == nil {
		if err := copyFile(bin, cached+".tmp"); err == nil {
			_ = os.Rename(cached+".tmp", cached)
		}
	}
	return bin, nil
}
