package httpx

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
)

// TestDecodeJSON_Strict checks strict decoding: each failure is a validation error
// naming the field (nested unknown fields by their dotted path).
func TestDecodeJSON_Strict(t *testing.T) {
	tests := []struct {
		body  string
		field string // "" = decodes
	}{
		{``, ""},
		{`  `, ""},
		{`{}`, ""},
		{`{"healthCheck":{"type":"TCP"},"metadata":{"a":"b"}}`, ""},
		{`{"HealthCheck":{"Type":"TCP"}}`, ""},
		{`{"x":1}`, "x"},
		{`{"healthCheck":{"zz":1}}`, "healthCheck.zz"},
		{`{"healthCheck":{"type":"TCP","headers":{"a":"b"},"bad":true}}`, "healthCheck.bad"},
		{`{"healthCheck":{"rise":"two"}}`, "healthCheck.rise"},
		{`{"healthCheck":{"expectedStatus":["200"]}}`, "healthCheck.expectedStatus"},
		{`{"metadata":[]}`, "metadata"},
		{`{"healthCheck":`, "body"},
		{`{"healthCheck":{}} []`, "body"},
		{`"text"`, "body"},
		{`nul`, "body"},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			var req api.ClusterRequest
			err := DecodeJSON([]byte(tc.body), &req)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				return
			}
			var ve *model.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("err %v, want a validation error naming %q", err, tc.field)
			}
		})
	}
}

// TestUnknownFieldPath_FollowsEmbeddedAndSlices checks the path finder on embedded
// structs and arrays of objects.
func TestUnknownFieldPath_FollowsEmbeddedAndSlices(t *testing.T) {
	type inner struct {
		A int `json:"a"`
	}
	type outer struct {
		inner
		List []inner `json:"list"`
		Skip int     `json:"-"`
	}
	var o outer
	for body, want := range map[string]string{
		`{"a":1}`:                    "",
		`{"list":[{"a":1},{"b":2}]}`: "list[1].b",
		`{"Skip":1}`:                 "Skip",
	} {
		if got := unknownFieldPath([]byte(body), reflect.TypeOf(&o)); got != want {
			t.Fatalf("%s: %q, want %q", body, got, want)
		}
	}
}
