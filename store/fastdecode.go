package store

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/rosterhq/roster/model"
)

// Instances are read far more often than anything else, and reflection-based decoding
// dominated the cost of a service read. instanceDecoder decodes the exact shape the
// value codec writes for an Instance (a msgpack map keyed by the JSON field names)
// without reflection. Anything it does not recognise — an unknown key, an unexpected
// type — makes it give up, and the generic codec decodes the record instead, so a
// field added to Instance is never silently dropped.
type instanceDecoder struct {
	codec valueCodec
	// last values of the strings that repeat across a service's instances, reused
	// instead of allocating a new string per record.
	ns, group, service, cluster string
	// metadata strings seen so far in this read (keys and values repeat across instances).
	interned map[string]string
}

// maxInterned bounds the metadata strings one decoder remembers.
const maxInterned = 512

var errFastPath = errors.New("record not in the fast path's shape")

func (d *instanceDecoder) decode(b []byte, in *model.Instance) error {
	if err := d.fast(b, in); err == nil {
		return nil
	}
	*in = model.Instance{}
	return d.codec.decode(b, in)
}

func (d *instanceDecoder) fast(b []byte, in *model.Instance) error {
	r := mpReader{b: b}
	n, ok := r.mapLen()
	if !ok {
		return errFastPath
	}
	for range n {
		key, ok := r.raw()
		if !ok {
			return errFastPath
		}
		switch string(key) {
		case "namespace":
			ok = r.internedStr(&d.ns, &in.Namespace)
		case "group":
			ok = r.internedStr(&d.group, &in.Group)
		case "service":
			ok = r.internedStr(&d.service, &in.Service)
		case "cluster":
			ok = r.internedStr(&d.cluster, &in.Cluster)
		case "ip":
			in.IP, ok = r.str()
		case "port":
			var v int64
			v, ok = r.int()
			in.Port = int(v)
		case "weight":
			in.Weight, ok = r.float()
		case "enabled":
			in.Enabled, ok = r.bool()
		case "healthy":
			in.Healthy, ok = r.bool()
		case "createIndex":
			var v int64
			v, ok = r.int()
			in.CreateIndex = uint64(v)
		case "modifyIndex":
			var v int64
			v, ok = r.int()
			in.ModifyIndex = uint64(v)
		case "unhealthySince":
			in.UnhealthySince, ok = r.int()
		case "metadata":
			in.Metadata, ok = r.strMap(d.intern)
		default:
			ok = false
		}
		if !ok {
			return errFastPath
		}
	}
	if r.i != len(b) {
		return errFastPath
	}
	return nil
}

// mpReader reads the msgpack subset the value codec writes. Every method reports false
// on anything else and leaves the record to the generic decoder.
type mpReader struct {
	b []byte
	i int
}

func (r *mpReader) byte1() (byte, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	r.i++
	return c, true
}

func (r *mpReader) next(n int) ([]byte, bool) {
	if n < 0 || len(r.b)-r.i < n {
		return nil, false
	}
	p := r.b[r.i : r.i+n]
	r.i += n
	return p, true
}

func (r *mpReader) uintN(n int) (uint64, bool) {
	p, ok := r.next(n)
	if !ok {
		return 0, false
	}
	switch n {
	case 1:
		return uint64(p[0]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), true
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), true
	default:
		return binary.BigEndian.Uint64(p), true
	}
}

// mapLen reads a map header; nil counts as an empty map.
func (r *mpReader) mapLen() (int, bool) {
	c, ok := r.byte1()
	if !ok {
		return 0, false
	}
	switch {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), true
	case c == 0xde:
		n, ok := r.uintN(2)
		return int(n), ok
	case c == 0xdf:
		n, ok := r.uintN(4)
		return int(n), ok
	case c == 0xc0:
		return 0, true
	}
	return 0, false
}

// raw reads a string (or binary) value and returns its bytes without copying.
func (r *mpReader) raw() ([]byte, bool) {
	c, ok := r.byte1()
	if !ok {
		return nil, false
	}
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n, ok = r.uintN(1)
	case c == 0xda || c == 0xc5:
		n, ok = r.uintN(2)
	case c == 0xdb || c == 0xc6:
		n, ok = r.uintN(4)
	default:
		return nil, false
	}
	if !ok || n > uint64(len(r.b)) {
		return nil, false
	}
	return r.next(int(n))
}

func (r *mpReader) str() (string, bool) {
	p, ok := r.raw()
	return string(p), ok
}

// internedStr reads a string into *dst, reusing *last when the bytes are equal.
func (r *mpReader) internedStr(last, dst *string) bool {
	p, ok := r.raw()
	if !ok {
		return false
	}
	if string(p) != *last {
		*last = string(p)
	}
	*dst = *last
	return true
}

func (r *mpReader) int() (int64, bool) {
	c, ok := r.byte1()
	if !ok {
		return 0, false
	}
	switch {
	case c <= 0x7f:
		return int64(c), true
	case c >= 0xe0:
		return int64(int8(c)), true
	case c >= 0xcc && c <= 0xcf:
		v, ok := r.uintN(1 << (c - 0xcc))
		if v > math.MaxInt64 {
			return 0, false
		}
		return int64(v), ok
	case c >= 0xd0 && c <= 0xd3:
		n := 1 << (c - 0xd0)
		v, ok := r.uintN(n)
		switch n {
		case 1:
			return int64(int8(v)), ok
		case 2:
			return int64(int16(v)), ok
		case 4:
			return int64(int32(v)), ok
		}
		return int64(v), ok
	}
	return 0, false
}

func (r *mpReader) float() (float64, bool) {
	c, ok := r.byte1()
	if !ok {
		return 0, false
	}
	switch c {
	case 0xcb:
		v, ok := r.uintN(8)
		return math.Float64frombits(v), ok
	case 0xca:
		v, ok := r.uintN(4)
		return float64(math.Float32frombits(uint32(v))), ok
	}
	return 0, false
}

func (r *mpReader) bool() (bool, bool) {
	c, ok := r.byte1()
	if !ok {
		return false, false
	}
	switch c {
	case 0xc2:
		return false, true
	case 0xc3:
		return true, true
	}
	return false, false
}

// intern returns a string equal to p, allocating only the first time it is seen.
func (d *instanceDecoder) intern(p []byte) string {
	if s, ok := d.interned[string(p)]; ok {
		return s
	}
	s := string(p)
	if d.interned == nil {
		d.interned = make(map[string]string, 16)
	}
	if len(d.interned) < maxInterned {
		d.interned[s] = s
	}
	return s
}

// strMap reads a map of strings, making each string with mk; nil and empty maps read as
// nil, as the store keeps them.
func (r *mpReader) strMap(mk func([]byte) string) (map[string]string, bool) {
	n, ok := r.mapLen()
	if !ok || n > len(r.b) {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	m := make(map[string]string, n)
	for range n {
		k, ok := r.raw()
		if !ok {
			return nil, false
		}
		v, ok := r.raw()
		if !ok {
			return nil, false
		}
		m[mk(k)] = mk(v)
	}
	return m, true
}
