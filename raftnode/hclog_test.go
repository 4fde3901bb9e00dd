package raftnode

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
)

type stringerArg struct{ hidden int }

func (s stringerArg) String() string { return "described" }

// hashicorp/raft's arguments reach a JSON handler as hclog would print them: Stringers
// and hclog.Fmt as text, errors by their message, and its "node" argument without
// clashing with the node id attribute.
func TestHCLogger_JSONArguments(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLogger(slog.New(slog.NewJSONHandler(&buf, nil)).With("node", "n1"), "raft")
	l.Info("entering candidate state", "node", stringerArg{1}, "term", 2, "count", hclog.Fmt("%d of %d", 1, 3),
		"error", errors.New("boom"))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	want := map[string]any{"msg": "entering candidate state", "logger": "raft", "node": "n1", "raft_node": "described",
		"term": 2.0, "count": "1 of 3", "error": "boom"}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %#v, want %#v (line %s)", k, rec[k], v, buf.String())
		}
	}
	if n := bytes.Count(buf.Bytes(), []byte(`"node":`)); n != 1 {
		t.Errorf("%d node keys in %s", n, buf.String())
	}
}
