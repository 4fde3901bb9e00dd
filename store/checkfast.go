package store

import (
	"encoding/binary"

	"github.com/rosterhq/roster/model"
)

// instanceKeyChecker checks instance records for CheckFile without building them.
// Instances are most of a large state, and decoding each into a model.Instance (its
// strings, its metadata map) cost a restore of 100,000 instances hundreds of megabytes
// of short-lived allocations per check. A record in the shape the value codec writes
// is read in place by the same rules as instanceDecoder's fast path, so it passes
// exactly when that path would decode it; any other record is decoded by instanceDecoder
// (its fast path, then the generic codec), as before.
type instanceKeyChecker struct {
	d   instanceDecoder
	key []byte // the last key built, reused
}

// key returns the key the record v belongs under (valid until the next call), or the
// error of decoding it.
func (c *instanceKeyChecker) keyOf(v []byte) ([]byte, error) {
	if k, ok := c.fastKey(v); ok {
		return k, nil
	}
	var in model.Instance
	if err := c.d.decode(v, &in); err != nil {
		return nil, err
	}
	return instanceKey(in.Ref()), nil
}

// fastKey reads a record in the fast path's shape and builds its key; false if the
// record is in any other shape.
func (c *instanceKeyChecker) fastKey(b []byte) ([]byte, bool) {
	r := mpReader{b: b}
	n, ok := r.mapLen()
	if !ok {
		return nil, false
	}
	var ns, group, service, ip []byte
	port := 0
	for range n {
		key, ok := r.raw()
		if !ok {
			return nil, false
		}
		switch string(key) {
		case "namespace":
			ns, ok = r.raw()
		case "group":
			group, ok = r.raw()
		case "service":
			service, ok = r.raw()
		case "ip":
			ip, ok = r.raw()
		case "cluster":
			_, ok = r.raw()
		case "port":
			var v int64
			v, ok = r.int()
			port = int(v)
		case "weight":
			_, ok = r.float()
		case "enabled", "healthy":
			_, ok = r.bool()
		case "createIndex", "modifyIndex", "unhealthySince":
			_, ok = r.int()
		case "metadata":
			ok = r.skipStrMap()
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	if r.i != len(b) {
		return nil, false
	}
	// instanceKey of the record's ref: a field left out reads as empty, as it decodes.
	k := append(c.key[:0], ns...)
	k = append(k, sep)
	k = append(k, group...)
	k = append(k, sep)
	k = append(k, service...)
	k = append(k, sep)
	k = append(k, ip...)
	k = append(k, sep)
	k = binary.BigEndian.AppendUint16(k, uint16(port))
	c.key = k
	return k, true
}
