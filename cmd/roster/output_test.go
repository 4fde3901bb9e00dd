package main

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rosterhq/roster/api"
)

// terminalSafe fails if out holds a character a terminal could act on or hide: a
// control character other than the newline, a rune strconv.IsPrint refuses, or a byte
// that is not UTF-8.
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if r == utf8.RuneError && !strings.HasPrefix(out[i:], "\ufffd") {
			t.Fatalf("%s: invalid UTF-8 at byte %d: %q", what, i, out)
		}
		if r != '\n' && !strconv.IsPrint(r) {
			t.Fatalf("%s: raw %U at byte %d: %q", what, r, i, out)
		}
	}
}

// hostileInstances is an instance list as a registry filled by older versions or
// other clients may hold it: terminal escapes, a bidi override, a tab, a newline, a C1
// control, DEL and a zero-width space in metadata and names.
const hostileInstances = `{"service":{"name":"demo"},"index":9,"instances":[
 {"ip":"127.100.0.7","port":80,"cluster":"east\u001b[2J","weight":1,"enabled":true,"healthy":true,
  "metadata":{"k":"\u001b[31mred\u001b[0m","file":"\u202egnp.exe","tab":"a\tb","nl":"a\nb","c1":"\u009b31m","del":"\u007f","zw\u200b":"x"},"instanceId":"i1"}]}`

// TestInstances_TableEscapesControlCharacters checks `roster instances` prints data
// escaped, never raw: before, an escape sequence in metadata reached the terminal.
func TestInstances_TableEscapesControlCharacters(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET " + demoSvc + "/instances": {body: hostileInstances}})
	r := runCLI(t, nil, "instances", "demo", "--addr", f.addr())
	wantExit(t, r, 0)
	terminalSafe(t, "table", r.stdout)
	for _, want := range []string{`east\x1b[2J`, `k=\x1b[31mred\x1b[0m`, `file=\u202egnp.exe`, `tab=a\tb`, `nl=a\nb`,
		`c1=\u009b31m`, `del=\x7f`, `zw\u200b=x`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q lacks %q", r.stdout, want)
		}
	}
	if lines := strings.Count(r.stdout, "\n"); lines != 2 {
		t.Errorf("%d lines, want the header and one row: %q", lines, r.stdout)
	}
}

// TestInstances_JSONEscapesWhatEncodingJSONLeaves checks -o json escapes the runes
// encoding/json writes raw (DEL, C1 controls, bidi and zero-width characters) and
// still decodes to the same data.
func TestInstances_JSONEscapesWhatEncodingJSONLeaves(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET " + demoSvc + "/instances": {body: hostileInstances}})
	r := runCLI(t, nil, "instances", "demo", "--addr", f.addr(), "-o", "json")
	wantExit(t, r, 0)
	terminalSafe(t, "json", r.stdout)
	var got, want api.InstancesResponse
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if err := json.Unmarshal([]byte(hostileInstances), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// TestClientCommand_ErrorMessageEscaped checks an error message quoting data is
// printed escaped.
func TestClientCommand_ErrorMessageEscaped(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"DELETE " + demoSvc + "/instances/127.100.0.7:80": {status: 404,
			body: `{"error":{"code":"not_found","message":"service \u001b]0;pwned\u0007\u202e not found"}}`},
	})
	r := runCLI(t, nil, "deregister", "demo", "127.100.0.7:80", "--addr", f.addr())
	wantExit(t, r, 1)
	terminalSafe(t, "stderr", r.stderr)
	if want := `roster: service \x1b]0;pwned\a\u202e not found (404 not_found)` + "\n"; r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
}

// TestSafeText escapes exactly what a terminal could act on or hide.
func TestSafeText(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"plain text 1.0":       "plain text 1.0",
		"zamówienia Ωμέγα 😀":   "zamówienia Ωμέγα 😀",
		"a\x1b[31mb":           `a\x1b[31mb`,
		"a\tb\nc\rd":           `a\tb\nc\rd`,
		"\x00\x7f\u0085\u009b": `\x00\x7f\u0085\u009b`,
		"\u202e\u2066\u200e":   `\u202e\u2066\u200e`,
		"\u200b\ufeff\u00ad":   `\u200b\ufeff\u00ad`,
		"a\u00a0b\u2028":       `a\u00a0b\u2028`,
		"\xff\xc3(":            `\xff\xc3(`,
		`back\slash`:           `back\slash`,
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEscapeJSONText keeps JSON meaning and leaves nothing a terminal acts on.
func TestEscapeJSONText(t *testing.T) {
	for _, v := range []any{
		map[string]string{"k": "\u202e\u007f\u009b\u200b\U000E0001", "é": "😀", "\u2066": "x"},
		[]string{"plain", "\ufffd"},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out := escapeJSONText(b)
		terminalSafe(t, "escaped", string(out))
		var back any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		var orig any
		_ = json.Unmarshal(b, &orig)
		if !reflect.DeepEqual(back, orig) {
			t.Fatalf("%s decodes as %v, want %v", out, back, orig)
		}
	}
	// A byte that is not UTF-8 becomes what a decoder reads it as.
	if got := string(escapeJSONText([]byte("[\"a\xffb\"]"))); got != `["a\ufffdb"]` {
		t.Fatalf("%q", got)
	}
	if b := []byte(`{"a":"b"}`); &escapeJSONText(b)[0] != &b[0] {
		t.Fatal("clean JSON is copied")
	}
}
