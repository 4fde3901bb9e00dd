package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestEnvName_UpperSnake(t *testing.T) {
	cases := map[string]string{
		"http-addr":          "ROSTER_HTTP_ADDR",
		"node-id":            "ROSTER_NODE_ID",
		"metadata-max-bytes": "ROSTER_METADATA_MAX_BYTES",
		"addr":               "ROSTER_ADDR",
	}
	for flag, want := range cases {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q) = %q, want %q", flag, got, want)
		}
	}
}

func TestBindEnv_FlagWinsOverEnvWinsOverDefault(t *testing.T) {
	type values struct {
		httpAddr string
		maxBytes int
		wait     time.Duration
		enabled  bool
		clusters []string
	}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    values
		wantErr string
	}{
		{
			name: "defaults without env",
			want: values{httpAddr: ":8848", maxBytes: 1024, wait: time.Second, enabled: true},
		},
		{
			name: "env sets unset flags",
			env: map[string]string{
				"ROSTER_HTTP_ADDR":          "0.0.0.0:9000",
				"ROSTER_METADATA_MAX_BYTES": "4096",
				"ROSTER_WAIT":               "3s",
				"ROSTER_ENABLED":            "false",
				"ROSTER_CLUSTER":            "a,b",
			},
			want: values{httpAddr: "0.0.0.0:9000", maxBytes: 4096, wait: 3 * time.Second, enabled: false, clusters: []string{"a", "b"}},
		},
		{
			name: "flag wins over env",
			args: []string{"--http-addr", ":1111", "--enabled=true", "--cluster", "c"},
			env:  map[string]string{"ROSTER_HTTP_ADDR": ":2222", "ROSTER_ENABLED": "false", "ROSTER_CLUSTER": "a,b", "ROSTER_METADATA_MAX_BYTES": "7"},
			want: values{httpAddr: ":1111", maxBytes: 7, wait: time.Second, enabled: true, clusters: []string{"c"}},
		},
		{
			name: "empty env value is a value",
			env:  map[string]string{"ROSTER_HTTP_ADDR": ""},
			want: values{httpAddr: "", maxBytes: 1024, wait: time.Second, enabled: true},
		},
		{
			name: "other prefixes and names are ignored",
			env:  map[string]string{"HTTP_ADDR": ":1", "ROSTER_HTTPADDR": ":2", "roster_http_addr": ":3"},
			want: values{httpAddr: ":8848", maxBytes: 1024, wait: time.Second, enabled: true},
		},
		{
			name:    "unparsable env names the variable",
			env:     map[string]string{"ROSTER_METADATA_MAX_BYTES": "lots"},
			wantErr: `ROSTER_METADATA_MAX_BYTES="lots"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got values
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.StringVar(&got.httpAddr, "http-addr", ":8848", "")
			fs.IntVar(&got.maxBytes, "metadata-max-bytes", 1024, "")
			fs.DurationVar(&got.wait, "wait", time.Second, "")
			fs.BoolVar(&got.enabled, "enabled", true, "")
			fs.StringSliceVar(&got.clusters, "cluster", nil, "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := bindEnv(fs, mapEnv(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.httpAddr != tc.want.httpAddr || got.maxBytes != tc.want.maxBytes || got.wait != tc.want.wait ||
				got.enabled != tc.want.enabled || strings.Join(got.clusters, ",") != strings.Join(tc.want.clusters, ",") {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBindEnv_HelpFlagIgnored(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	help := fs.Bool("help", false, "")
	if err := bindEnv(fs, mapEnv(map[string]string{"ROSTER_HELP": "true"})); err != nil {
		t.Fatal(err)
	}
	if *help {
		t.Fatal("ROSTER_HELP set --help")
	}
}
