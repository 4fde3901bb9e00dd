// Package buildinfo says which build of Roster is running: its release version, the
// commit it was built from and the Go version that built it. Release builds stamp the
// version and commit at link time:
//
//	go build -ldflags "-X github.com/rosterhq/roster/buildinfo.version=v0.3.0 \
//	  -X github.com/rosterhq/roster/buildinfo.commit=$(git rev-parse HEAD)" ./cmd/roster
//
// Without them the version and commit come from what the Go toolchain recorded in the
// binary (debug.ReadBuildInfo): `go install github.com/rosterhq/roster/cmd/roster@v0.3.0`
// records the module version, and `go build` in a git checkout records the commit and a
// version derived from the nearest release tag. A build with neither is "dev".
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set at link time with -ldflags -X (see the package comment); empty otherwise.
var (
	version string
	commit  string
)

// Dev is the version of a build that carries none.
const Dev = "dev"

// Info describes one build.
type Info struct {
	// Version is the release version ("v0.3.0"), a Go pseudo-version for a build between
	// releases ("v0.3.1-0.20261203120000-0123456789ab"), or Dev.
	Version string `json:"version"`
	// Commit is the full git commit the binary was built from ("" when unknown), with a
	// "-dirty" suffix when the checkout had uncommitted changes.
	Commit string `json:"commit"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
}

var (
	once    sync.Once
	current Info
)

// Get returns this binary's build information.
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		current = resolve(version, commit, bi)
	})
	return current
}

// resolve combines the link-time values with the toolchain's record; link-time values win.
func resolve(ldVersion, ldCommit string, bi *debug.BuildInfo) Info {
	info := Info{Version: strings.TrimSpace(ldVersion), Commit: strings.TrimSpace(ldCommit), GoVersion: runtime.Version()}
	if bi != nil {
		if info.Version == "" {
			if v := bi.Main.Version; v != "" && v != "(devel)" {
				info.Version = v
			}
		}
		if info.Commit == "" {
			var rev string
			dirty := false
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "-dirty"
			}
			info.Commit = rev
		}
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
	}
	if info.Version == "" {
		info.Version = Dev
	}
	return info
}

// ShortCommit is the first 12 characters of the commit (with its "-dirty" suffix), or
// "unknown".
func (i Info) ShortCommit() string {
	c, dirty := strings.CutSuffix(i.Commit, "-dirty")
	if c == "" {
		return "unknown"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	if dirty {
		c += "-dirty"
	}
	return c
}
