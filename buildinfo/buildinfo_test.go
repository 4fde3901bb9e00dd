package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve_Sources(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1-0.20261203120000-0123456789ab+dirty"}}
		bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
		return bi
	}
	tests := []struct {
		name              string
		ldVersion, commit string
		bi                *debug.BuildInfo
		want              Info
	}{
		{"link-time values win", "v0.3.0", "abc", vcs("0123456789abcdef", "false"),
			Info{Version: "v0.3.0", Commit: "abc", GoVersion: "go1.26.8"}},
		{"toolchain record", "", "", vcs("0123456789abcdef", "false"),
			Info{Version: "v0.3.1-0.20261203120000-0123456789ab+dirty", Commit: "0123456789abcdef", GoVersion: "go1.26.8"}},
		{"modified checkout", "", "", vcs("0123456789abcdef", "true"),
			Info{Version: "v0.3.1-0.20261203120000-0123456789ab+dirty", Commit: "0123456789abcdef-dirty", GoVersion: "go1.26.8"}},
		{"go install of a release", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}},
			Info{Version: "v0.3.0", GoVersion: "go1.26.8"}},
		{"devel build without VCS", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			Info{Version: Dev, GoVersion: "go1.26.8"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.ldVersion, tc.commit, tc.bi); got != tc.want {
				t.Fatalf("resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestInfo_ShortCommit(t *testing.T) {
	for commit, want := range map[string]string{
		"":                           "unknown",
		"0123456789abcdef0123":       "0123456789ab",
		"0123456789abcdef0123-dirty": "0123456789ab-dirty",
		"abc":                        "abc",
	} {
		if got := (Info{Commit: commit}).ShortCommit(); got != want {
			t.Errorf("ShortCommit(%q) = %q, want %q", commit, got, want)
		}
	}
}
