package httpx

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rosterhq/roster/model"
)

// TestParseReadOptions_Table checks ?consistency, ?index and ?wait parsing.
func TestParseReadOptions_Table(t *testing.T) {
	tests := []struct {
		query string
		want  ReadOptions
		field string
	}{
		{"", ReadOptions{Mode: "linearizable", Wait: 5 * time.Minute}, ""},
		{"consistency=linearizable", ReadOptions{Mode: "linearizable", Wait: 5 * time.Minute}, ""},
		{"consistency=leader", ReadOptions{Mode: "leader", Wait: 5 * time.Minute}, ""},
		{"consistency=stale", ReadOptions{Mode: "stale", Wait: 5 * time.Minute}, ""},
		{"consistency=STALE", ReadOptions{}, "consistency"},
		{"consistency=strong", ReadOptions{}, "consistency"},
		{"consistency=", ReadOptions{}, "consistency"},
		{"index=0", ReadOptions{Mode: "linearizable", Blocking: true, Index: 0, Wait: 5 * time.Minute}, ""},
		{"index=42", ReadOptions{Mode: "linearizable", Blocking: true, Index: 42, Wait: 5 * time.Minute}, ""},
		{"index=42&wait=30s", ReadOptions{Mode: "linearizable", Blocking: true, Index: 42, Wait: 30 * time.Second}, ""},
		{"index=42&wait=1h", ReadOptions{Mode: "linearizable", Blocking: true, Index: 42, Wait: 5 * time.Minute}, ""},
		{"index=42&wait=250ms&consistency=stale", ReadOptions{Mode: "stale", Blocking: true, Index: 42, Wait: 250 * time.Millisecond}, ""},
		{"wait=30s", ReadOptions{Mode: "linearizable", Wait: 30 * time.Second}, ""},
		{"index=", ReadOptions{}, "index"},
		{"index=-1", ReadOptions{}, "index"},
		{"index=x", ReadOptions{}, "index"},
		{"index=18446744073709551616", ReadOptions{}, "index"},
		{"index=1&wait=30", ReadOptions{}, "wait"},
		{"index=1&wait=0s", ReadOptions{}, "wait"},
		{"index=1&wait=-5s", ReadOptions{}, "wait"},
		{"index=1&wait=", ReadOptions{}, "wait"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			o, err := ParseReadOptions(httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil), "linearizable", 5*time.Minute)
			if tc.field != "" {
				var ve *model.ValidationError
				if !errors.As(err, &ve) || ve.Field != tc.field {
					t.Fatalf("err %v, want field %q", err, tc.field)
				}
				return
			}
			if err != nil || o != tc.want {
				t.Fatalf("got %+v, %v; want %+v", o, err, tc.want)
			}
		})
	}
}
