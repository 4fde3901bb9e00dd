package fsm

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// msgCodec encodes command payloads as canonical msgpack (map keys sorted), so one
// command always has the same bytes.
type msgCodec struct {
	h *codec.MsgpackHandle
}

func newMsgCodec() msgCodec {
	h := &codec.MsgpackHandle{}
	h.Canonical = true
	return msgCodec{h: h}
}

// Encode returns a log entry's data: the command's type byte, then the command as
// msgpack. The encoding of a given command is stable; fsm/testdata pins it for every
// command type.
func Encode(cmd Command) ([]byte, error) {
	encodes.Add(1)
	return sharedCodec.encode(cmd.MessageType(), cmd)
}

// encodes counts Encode's calls (Encodes).
var encodes atomic.Uint64

// Encodes is how many commands this process encoded: a test counts a write's encodings
// with it.
func Encodes() uint64 { return encodes.Load() }

// sharedCodec serves Encode and Decode: a handle caches what it learnt of each type, and
// handles are safe for concurrent use once configured.
var sharedCodec = newMsgCodec()

// Decode decodes payload — the bytes after an entry's type byte — into out, which must
// be a pointer. Malformed input, including trailing bytes, returns an error wrapping
// ErrDecode; it never panics.
func Decode(payload []byte, out any) error { return sharedCodec.decode(payload, out) }

func (c msgCodec) encode(t MessageType, msg any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, c.h).Encode(msg); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	return buf.Bytes(), nil
}

func (c msgCodec) decode(payload []byte, out any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w into %T: %v", ErrDecode, out, r)
		}
	}()
	if len(payload) == 0 {
		return fmt.Errorf("%w into %T: empty payload", ErrDecode, out)
	}
	d := codec.NewDecoderBytes(payload, c.h)
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("%w into %T: %v", ErrDecode, out, err)
	}
	if n := d.NumBytesRead(); n != len(payload) {
		return fmt.Errorf("%w into %T: %d trailing bytes", ErrDecode, out, len(payload)-n)
	}
	return nil
}
