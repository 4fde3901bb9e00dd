package httpx

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
)

// TestLossyJSONString finds what encoding/json would silently turn into U+FFFD, and
// nothing else.
func TestLossyJSONString(t *testing.T) {
	for _, tc := range []struct {
		text string
		off  int
	}{
		{`{"a":"b"}`, -1},
		{`{"a":"é😀\u00e9\ud83d\ude00\\ud800\"\ufffd"}`, -1},
		{"{\"a\":\"\xff\"}", 6},
		{"{\"\xc3\":1}", 2},
		{"{\"a\":\"ok\",\"b\":\"x\xed\xa0\x80\"}", 16},
		{`{"a":"\ud800"}`, 6},
		{`{"a":"\udc00\ud800"}`, 6},
		{`{"a":"x\ud83dy"}`, 7},
		{`{"a":"\ud83d\u0041"}`, 6},
		{`{"a":"\ud83d\ud83d\ude00"}`, 6},
		{`{"a":"\uD83D\uDE00"}`, -1},
		{"{\"a\":1}\xff", -1}, // outside strings: the decoder's syntax error
		{`{"a":"\u12"}`, -1},  // malformed escape: likewise
	} {
		off, what := LossyJSONString([]byte(tc.text))
		if off != tc.off || (off >= 0) != (what != "") {
			t.Errorf("%q: offset %d (%s), want %d", tc.text, off, what, tc.off)
		}
		if off < 0 && utf8.Valid([]byte(tc.text)) && json.Valid([]byte(tc.text)) {
			// What it accepts, encoding/json decodes and encodes back without U+FFFD
			// appearing where there was none.
			var v any
			if err := json.Unmarshal([]byte(tc.text), &v); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(v)
			if strings.Count(string(b), "\ufffd") != strings.Count(tc.text, `\ufffd`) {
				t.Errorf("%q decodes lossily as %s", tc.text, b)
			}
		}
	}
}

// TestDecodeJSON_LossyStringsNameTheField checks a string that is not Unicode text is
// a 400 naming the field holding it, a map's keys and values named by the map.
func TestDecodeJSON_LossyStringsNameTheField(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{"{\"metadata\":{\"k\":\"\xff\"}}", "metadata"},
		{"{\"metadata\":{\"\xff\":\"v\"}}", "metadata"},
		{`{"metadata":{"k":"\ud800"}}`, "metadata"},
		{"{\"healthCheck\":{\"type\":\"TCP\",\"headers\":{\"a\":\"\xc3(\"}}}", "healthCheck.headers"},
		{"{\"healthCheck\":{\"path\":\"/\xff\"}}", "healthCheck.path"},
		{"{\"healthCheck\":{\"path\":\"/\xff\"},\"zz\":1}", "healthCheck.path"},
		{"{\"\xff\":1}", "body"},
		{"\"\xff\"", "body"},
		{"{\"healthCheck\":[\"\xff\"]}", "healthCheck"},
	} {
		var req api.ClusterRequest
		err := DecodeJSON([]byte(tc.body), &req)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Message, "Unicode") {
			t.Errorf("%q: %v, want a validation error naming %q", tc.body, err, tc.field)
		}
	}
	// Malformed before the bad bytes: the syntax error is what is reported; under an
	// unknown key, the unknown field.
	var req api.ClusterRequest
	err := DecodeJSON([]byte("{\"metadata\":{\"k\" 1, \"\xff\":1}}"), &req)
	var ve *model.ValidationError
	if !errors.As(err, &ve) || ve.Field != "body" || !strings.Contains(ve.Message, "malformed JSON") {
		t.Fatalf("%v, want the syntax error", err)
	}
	err = DecodeJSON([]byte("{\"nope\":\"\xff\"}"), &req)
	if !errors.As(err, &ve) || ve.Field != "nope" || !strings.Contains(ve.Message, "unknown field") {
		t.Fatalf("%v, want the unknown field", err)
	}
	// Arrays of structs are followed by index.
	var nested struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	err = DecodeJSON([]byte("{\"items\":[{\"name\":\"ok\"},{\"name\":\"\xff\"}]}"), &nested)
	if !errors.As(err, &ve) || ve.Field != "items[1].name" {
		t.Fatalf("%v, want items[1].name", err)
	}
}
