package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressInterval is the shortest time between two progress lines.
const progressInterval = 500 * time.Millisecond

// progressLine counts the bytes that pass through it and reports the count and the
// average rate on one terminal line, rewritten in place (carriage return) at most
// every 500 ms. It is meant for an interactive terminal; see isTerminal. A
// progressLine is used by one goroutine at a time.
type progressLine struct {
	out     io.Writer
	total   int64
	label   string
	now     func() time.Time
	start   time.Time
	last    time.Time
	n       int64
	lineLen int
}

// progress returns a progress line on stderr when stderr is a terminal, else nil.
func (a *app) progress(total int64, label string) *progressLine {
	if f, ok := a.stderr.(*os.File); ok && isTerminal(f) {
		return newProgressLine(f, total, label)
	}
	return nil
}

// newProgressLine returns a progressLine that writes to out (normally os.Stderr). total
// is the expected number of bytes, used to show a percentage; 0 or less means unknown.
func newProgressLine(out io.Writer, total int64, label string) *progressLine {
	return newProgressLineAt(out, total, label, time.Now)
}

func newProgressLineAt(out io.Writer, total int64, label string, now func() time.Time) *progressLine {
	start := now()
	return &progressLine{out: out, total: total, label: label, now: now, start: start, last: start}
}

// Write counts len(b) bytes and never fails, so a progressLine can be placed in an
// io.MultiWriter or an io.TeeReader; it does not keep b. Output errors are ignored.
func (p *progressLine) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if t := p.now(); t.Sub(p.last) >= progressInterval {
		p.last = t
		p.print(t, "")
	}
	return len(b), nil
}

// Reader returns a reader that reads from r and counts every byte read.
func (p *progressLine) Reader(r io.Reader) io.Reader { return io.TeeReader(r, p) }

// Writer returns a writer that writes to w and counts every byte w accepted.
func (p *progressLine) Writer(w io.Writer) io.Writer { return &progressWriter{w: w, p: p} }

// Finish prints the final count and rate and ends the line.
func (p *progressLine) Finish() {
	p.print(p.now(), "\n")
}

// Count returns the number of bytes counted so far.
func (p *progressLine) Count() int64 { return p.n }

func (p *progressLine) print(t time.Time, end string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", p.label, formatBytes(p.n))
	if p.total > 0 {
		fmt.Fprintf(&b, " / %s (%d%%)", formatBytes(p.total), p.n*100/p.total)
	}
	if elapsed := t.Sub(p.start); elapsed > 0 {
		fmt.Fprintf(&b, ", %s/s", formatBytes(int64(float64(p.n)/elapsed.Seconds())))
	}
	line := b.String()
	pad := max(p.lineLen-len(line), 0) // blank out the rest of a longer previous line
	p.lineLen = len(line)
	fmt.Fprintf(p.out, "\r%s%s%s", line, strings.Repeat(" ", pad), end)
}

type progressWriter struct {
	w io.Writer
	p *progressLine
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	_, _ = pw.p.Write(b[:n])
	return n, err
}

// formatBytes formats n with a binary unit and one decimal, e.g. "12.3 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, suffix := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if v < unit || suffix == "TiB" {
			return fmt.Sprintf("%.1f %s", v, suffix)
		}
	}
	return fmt.Sprintf("%d B", n)
}
