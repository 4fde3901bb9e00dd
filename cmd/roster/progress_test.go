package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// progressClock is a manually advanced clock for progressLine.
type progressClock struct{ t time.Time }

func (c *progressClock) now() time.Time          { return c.t }
func (c *progressClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestProgress_ReportsAtMostEvery500ms checks the reporting cadence and the content
// of a line: label, count, total, percentage, rate.
func TestProgress_ReportsAtMostEvery500ms(t *testing.T) {
	clock := &progressClock{t: time.Unix(1000, 0)}
	var out bytes.Buffer
	p := newProgressLineAt(&out, 10<<20, "saving", clock.now)

	steps := []struct {
		advance time.Duration
		write   int
		want    string // the new output, "" for none
	}{
		{advance: 100 * time.Millisecond, write: 1 << 20, want: ""},
		{advance: 399 * time.Millisecond, write: 1 << 20, want: ""},
		{advance: 1 * time.Millisecond, write: 1 << 20, want: "\rsaving: 3.0 MiB / 10.0 MiB (30%), 6.0 MiB/s"},
		{advance: 499 * time.Millisecond, write: 1 << 20, want: ""},
		{advance: 1 * time.Millisecond, write: 1 << 20, want: "\rsaving: 5.0 MiB / 10.0 MiB (50%), 5.0 MiB/s"},
		{advance: 2 * time.Second, write: 5 << 20, want: "\rsaving: 10.0 MiB / 10.0 MiB (100%), 3.3 MiB/s"},
	}
	for i, s := range steps {
		clock.advance(s.advance)
		before := out.Len()
		if n, err := p.Write(make([]byte, s.write)); n != s.write || err != nil {
			t.Fatalf("step %d: Write = %d, %v", i, n, err)
		}
		if got := out.String()[before:]; got != s.want {
			t.Errorf("step %d: printed %q, want %q", i, got, s.want)
		}
	}
	before := out.Len()
	p.Finish()
	if got, want := out.String()[before:], "\rsaving: 10.0 MiB / 10.0 MiB (100%), 3.3 MiB/s\n"; got != want {
		t.Errorf("Finish printed %q, want %q", got, want)
	}
}

// TestProgress_UnknownTotalAndShorterLines checks a line without a total, and that a
// shorter line blanks out the rest of the previous one.
func TestProgress_UnknownTotalAndShorterLines(t *testing.T) {
	clock := &progressClock{t: time.Unix(1000, 0)}
	var out bytes.Buffer
	p := newProgressLineAt(&out, 0, "restoring", clock.now)
	clock.advance(time.Second)
	_, _ = p.Write(make([]byte, 1500))
	p.label = "r"
	p.Finish()
	want := "\rrestoring: 1.5 KiB, 1.5 KiB/s" + "\rr: 1.5 KiB, 1.5 KiB/s" + strings.Repeat(" ", 8) + "\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}

// TestProgress_ReaderAndWriter checks that the wrappers pass data through unchanged
// and count it.
func TestProgress_ReaderAndWriter(t *testing.T) {
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p := newProgressLine(io.Discard, int64(len(data)), "copy")
	var dst bytes.Buffer
	if _, err := io.Copy(p.Writer(&dst), p.Reader(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.Bytes(), data) {
		t.Error("data changed on its way through")
	}
	if got := p.Count(); got != 2*int64(len(data)) {
		t.Errorf("Count = %d, want %d (read and written)", got, 2*len(data))
	}
}

// TestFormatBytes checks the unit choice.
func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {2 << 40, "2.0 TiB"}, {4096 << 40, "4096.0 TiB"},
	}
	for _, tc := range tests {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
