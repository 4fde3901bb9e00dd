package sse

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// parsedEvent is an Event with its data copied.
type parsedEvent struct {
	Type, ID, Data string
}

// parseAll reads every event of body through a reader of the given buffer size; it
// returns them with the error that ended the stream.
func parseAll(r io.Reader, size int) (*Reader, []parsedEvent, error) {
	p := NewReader(r, size)
	var out []parsedEvent
	for {
		ev, err := p.Next()
		if err != nil {
			return p, out, err
		}
		out = append(out, parsedEvent{ev.Type, ev.ID, string(ev.Data)})
	}
}

func TestReader_ParsesTheStandardsCases(t *testing.T) {
	long := strings.Repeat("x", 5000)
	cases := []struct {
		name     string
		in       string
		want     []parsedEvent
		retry    time.Duration
		lastID   string
		comments uint64
	}{
		{name: "one event, LF",
			in:   "id: 42\nevent: instances\ndata: {\"index\":42}\n\n",
			want: []parsedEvent{{"instances", "42", `{"index":42}`}}, lastID: "42"},
		{name: "CRLF line endings",
			in:   "id: 7\r\nevent: instances\r\ndata: a\r\n\r\nid: 8\r\ndata: b\r\n\r\n",
			want: []parsedEvent{{"instances", "7", "a"}, {"message", "8", "b"}}, lastID: "8"},
		{name: "lone CR line endings",
			in:   "id: 1\revent: x\rdata: a\r\rdata: b\r\r",
			want: []parsedEvent{{"x", "1", "a"}, {"message", "1", "b"}}, lastID: "1"},
		{name: "mixed endings",
			in:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want: []parsedEvent{{"message", "", "a\nb\nc"}}},
		{name: "multi-line data keeps inner spaces",
			in:   "data: {\ndata:   \"index\": 5\ndata: }\n\n",
			want: []parsedEvent{{"message", "", "{\n  \"index\": 5\n}"}}},
		{name: "no space after colon, only one space removed",
			in:   "data:a\ndata:  b\n\n",
			want: []parsedEvent{{"message", "", "a\n b"}}},
		{name: "field without colon is an empty value",
			in:   "data\ndata\n\ndata: x\n\n",
			want: []parsedEvent{{"message", "", "\n"}, {"message", "", "x"}}},
		{name: "comments and keep-alives are skipped",
			in:       ": keep-alive\n:\nid: 3\n: between fields\ndata: x\n\n: keep-alive\n\n",
			want:     []parsedEvent{{"message", "3", "x"}},
			lastID:   "3",
			comments: 4},
		{name: "retry sets the reconnection time, bad values are ignored",
			in:    "retry: 1500\n\nretry: 12x\nretry:\nretry: -1\ndata: x\n\n",
			want:  []parsedEvent{{"message", "", "x"}},
			retry: 1500 * time.Millisecond},
		{name: "an event without data is not dispatched, its type does not leak",
			in:   "event: instances\nid: 9\n\ndata: y\n\n",
			want: []parsedEvent{{"message", "9", "y"}}, lastID: "9"},
		{name: "id persists across events and can be cleared",
			in:   "id: 10\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
			want: []parsedEvent{{"message", "10", "a"}, {"message", "10", "b"}, {"message", "", "c"}}},
		{name: "id with NUL is ignored",
			in:   "id: 4\ndata: a\n\nid: 5\x006\ndata: b\n\n",
			want: []parsedEvent{{"message", "4", "a"}, {"message", "4", "b"}}, lastID: "4"},
		{name: "unknown fields are ignored",
			in:   "foo: bar\nData: no\ndata: x\nevent : no\n\n",
			want: []parsedEvent{{"message", "", "x"}}},
		{name: "leading byte order mark",
			in:   "\xEF\xBB\xBFid: 1\ndata: x\n\n",
			want: []parsedEvent{{"message", "1", "x"}}, lastID: "1"},
		{name: "event cut off by the end of the stream is discarded",
			in:   "id: 1\ndata: a\n\nid: 2\ndata: b\n",
			want: []parsedEvent{{"message", "1", "a"}}, lastID: "2"},
		{name: "line longer than the buffer",
			in:   "id: 77\nevent: instances\ndata: " + long + "\ndata: " + long + "\n\n",
			want: []parsedEvent{{"instances", "77", long + "\n" + long}}, lastID: "77"},
		{name: "not_found event",
			in:   "id: 12\nevent: not_found\ndata: {\"error\":{\"code\":\"not_found\",\"message\":\"m\"}}\n\n",
			want: []parsedEvent{{"not_found", "12", `{"error":{"code":"not_found","message":"m"}}`}}, lastID: "12"},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tc := range cases {
		for rname, mk := range readers {
			for _, size := range []int{16, 64, 4096} {
				t.Run(fmt.Sprintf("%s/%s/%d", tc.name, rname, size), func(t *testing.T) {
					p, got, err := parseAll(mk(tc.in), size)
					if !errors.Is(err, io.EOF) {
						t.Fatalf("stream ended with %v, want io.EOF", err)
					}
					if !reflect.DeepEqual(got, tc.want) {
						t.Fatalf("events\n got %q\nwant %q", got, tc.want)
					}
					if p.Retry() != tc.retry {
						t.Errorf("retry %s, want %s", p.Retry(), tc.retry)
					}
					if tc.lastID != "" && p.LastEventID() != tc.lastID {
						t.Errorf("last event id %q, want %q", p.LastEventID(), tc.lastID)
					}
					if p.Comments() != tc.comments {
						t.Errorf("comments %d, want %d", p.Comments(), tc.comments)
					}
				})
			}
		}
	}
}

func TestReader_RejectsOversizedEvents(t *testing.T) {
	for name, in := range map[string]string{
		"line": "data: " + strings.Repeat("x", 300) + "\n\n",
		"data": strings.Repeat("data: "+strings.Repeat("x", 60)+"\n", 10) + "\n",
	} {
		p := NewReader(strings.NewReader(in), 16)
		p.max = 256
		if _, err := p.Next(); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: err %v, want ErrTooLarge", name, err)
		}
	}
}

// TestReader_DispatchesWithoutReadingAhead checks that an event ends at its blank line:
// a reader that must see the byte after a CR before dispatching would stall until the
// next event (15 s of keep-alive on a quiet service).
func TestReader_DispatchesWithoutReadingAhead(t *testing.T) {
	for _, tail := range []string{"\n\n", "\r\r", "\r\n\r\n"} {
		pr, pw := io.Pipe()
		p := NewReader(pr, 64)
		got := make(chan parsedEvent, 1)
		go func() {
			ev, err := p.Next()
			if err != nil {
				close(got)
				return
			}
			got <- parsedEvent{ev.Type, ev.ID, string(ev.Data)}
		}()
		go func() { _, _ = io.WriteString(pw, "id: 5\ndata: x"+tail) }()
		select {
		case ev := <-got:
			if ev != (parsedEvent{"message", "5", "x"}) {
				t.Errorf("tail %q: event %+v", tail, ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("tail %q: the event was not dispatched before more bytes came", tail)
		}
		_ = pw.Close()
	}
}
