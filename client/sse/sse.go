// Package sse reads server-sent events (text/event-stream), as Roster's watch streams
// send them: the one parser of the Go client's watches and of roster-bench.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"
)

// Event is one event dispatched by a Reader. Data is valid until the next call of Next.
type Event struct {
	// Type is the event field of the event, "message" when it had none.
	Type string
	// ID is the stream's last event ID when the event was dispatched: an event without an
	// id field keeps the ID of the one before, as the standard says.
	ID string
	// Data is the event's data lines joined by "\n".
	Data []byte
}

// ErrTooLarge is returned when one line or one event's data exceeds the reader's bound.
var ErrTooLarge = errors.New("sse: event too large")

// MaxEvent bounds one line and one event's data (a service of 65,536 instances is a few
// MiB of JSON).
const MaxEvent = 64 << 20

// Reader parses a text/event-stream body as the WHATWG HTML standard's "Server-sent
// events" section specifies: lines end in CRLF, LF or a lone CR; a line starting with ":"
// is a comment; "field: value" with one optional space after the colon, a line without a
// colon is a field with an empty value; data lines accumulate (joined by "\n"), event sets
// the type, id the last event ID (ignored when it holds a NUL), retry the reconnection time
// (ignored unless all ASCII digits); an empty line dispatches the event, unless no data
// line came, and unknown fields are ignored. One leading byte order mark is skipped. An
// event cut off by the end of the stream is discarded. A lone CR is recognised without
// waiting for the next byte, so an event is dispatched as soon as its blank line arrives.
type Reader struct {
	r       *bufio.Reader
	max     int
	line    []byte // a line longer than what the bufio.Reader holds
	data    []byte
	typ     string
	lastID  string
	retry   time.Duration
	skipLF  bool // the last line ended in CR: a LF right after it belongs to that line ending
	started bool // the first line was read (byte order mark check done)
	// comments counts comment lines (": keep-alive").
	comments uint64
}

// NewReader reads events from r through a bufio.Reader of size bytes (bufio's minimum
// is 16). The buffer is the only per-stream read buffer besides the data of the event
// being assembled.
func NewReader(r io.Reader, size int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, size), max: MaxEvent}
}

// Retry is the reconnection time the stream last asked for with a retry field (0 when it
// never did).
func (p *Reader) Retry() time.Duration { return p.retry }

// LastEventID is the stream's last event ID, to send as Last-Event-ID when reconnecting.
func (p *Reader) LastEventID() string { return p.lastID }

// Comments is the number of comment lines read so far.
func (p *Reader) Comments() uint64 { return p.comments }

// Next returns the next event. It returns io.EOF at the end of the stream (discarding an
// unfinished event), ErrTooLarge when a line or an event exceeds the bound, or the
// underlying reader's error.
func (p *Reader) Next() (Event, error) {
	p.data = p.data[:0]
	p.typ = ""
	for {
		line, err := p.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if len(p.data) == 0 {
				p.typ = ""
				continue
			}
			typ := p.typ
			if typ == "" {
				typ = "message"
			}
			return Event{Type: typ, ID: p.lastID, Data: p.data[:len(p.data)-1]}, nil
		}
		if err := p.field(line); err != nil {
			return Event{}, err
		}
	}
}

// field processes one non-empty line.
func (p *Reader) field(line []byte) error {
	if line[0] == ':' {
		p.comments++
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if len(p.data)+len(value)+1 > p.max {
			return ErrTooLarge
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	case "event":
		p.typ = internEventType(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			p.lastID = string(value)
		}
	case "retry":
		if n, ok := asciiDigits(value); ok {
			p.retry = time.Duration(n) * time.Millisecond
		}
	}
	return nil
}

// internEventType returns the event types Roster sends without allocating.
func internEventType(v []byte) string {
	switch string(v) {
	case "instances":
		return "instances"
	case "services":
		return "services"
	case "not_found":
		return "not_found"
	}
	return string(v)
}

// asciiDigits parses a non-empty run of ASCII digits (bounded to avoid overflow).
func asciiDigits(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// readLine returns the next line without its terminator. The slice is valid until the
// next read.
func (p *Reader) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		if p.r.Buffered() == 0 {
			if _, err := p.r.Peek(1); err != nil {
				return nil, err
			}
		}
		buf, _ := p.r.Peek(p.r.Buffered())
		if p.skipLF {
			p.skipLF = false
			if buf[0] == '\n' {
				_, _ = p.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexByte(buf, '\n')
		head := buf
		if i >= 0 {
			head = buf[:i]
		}
		if j := bytes.IndexByte(head, '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			if len(p.line)+len(buf) > p.max {
				return nil, ErrTooLarge
			}
			p.line = append(p.line, buf...)
			_, _ = p.r.Discard(len(buf))
			continue
		}
		p.skipLF = buf[i] == '\r'
		var line []byte
		if len(p.line) == 0 {
			// The whole line is in the buffer: no copy. Discard does not overwrite it.
			line = buf[:i]
		} else {
			p.line = append(p.line, buf[:i]...)
			line = p.line
		}
		_, _ = p.r.Discard(i + 1)
		if !p.started {
			p.started = true
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		return line, nil
	}
}
