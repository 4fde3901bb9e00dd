package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/rosterhq/roster/model"
)

// Layout of the bbolt file. Every bucket is flat; keys are the names of the model's
// layers joined with a zero byte, which no validated name can contain, so that a
// prefix scan over "ns\x00group\x00service\x00" finds exactly one service's records
// and key order is (namespace, group, service, ...) order.
var (
	bucketMeta       = []byte("meta")
	bucketIndexes    = []byte("indexes")
	bucketNamespaces = []byte("namespaces")
	bucketServices   = []byte("services")
	bucketClusters   = []byte("clusters")
	bucketInstances  = []byte("instances")
	bucketMembers    = []byte("members")

	metaSchema   = []byte("schema")
	metaApplied  = []byte("applied")
	metaFloor    = []byte("floor")
	metaSettings = []byte("settings")
)

// allBuckets lists the buckets a valid state file has.
func allBuckets() [][]byte {
	return [][]byte{bucketMeta, bucketIndexes, bucketNamespaces, bucketServices, bucketClusters, bucketInstances, bucketMembers}
}

// schemaVersion is the layout version written to the meta bucket. A file with another
// version is refused with ErrCorrupt.
const schemaVersion uint64 = 1

const sep = '\x00'

// Keys of the indexes bucket.
const (
	indexNamespaces     = "namespaces"
	indexMembers        = "members"
	indexServicesPrefix = "services/"
)

func servicesIndexKey(ns string) string { return indexServicesPrefix + ns }

// Watch keys: one channel per watched item.
const (
	watchAll        = "all"
	watchNamespaces = "namespaces"
	watchMembers    = "members"
	watchSettings   = "settings"
)

func watchServiceList(ns string) string { return "services\x00" + ns }

func watchService(k model.ServiceKey) string {
	return "service\x00" + k.Namespace + "\x00" + k.Group + "\x00" + k.Service
}

// serviceOfWatchKey is the service whose watch key is k, and false for the keys of
// other items.
func serviceOfWatchKey(k string) (model.ServiceKey, bool) {
	rest, ok := strings.CutPrefix(k, "service\x00")
	if !ok {
		return model.ServiceKey{}, false
	}
	parts := strings.SplitN(rest, "\x00", 3)
	if len(parts) != 3 {
		return model.ServiceKey{}, false
	}
	return model.ServiceKey{Namespace: parts[0], Group: parts[1], Service: parts[2]}, true
}

// badKeyPart reports whether s cannot be part of a stored key (it would alias other keys).
func badKeyPart(parts ...string) bool {
	for _, p := range parts {
		if p == "" || strings.IndexByte(p, sep) >= 0 {
			return true
		}
	}
	return false
}

func appendPart(b []byte, s string) []byte {
	b = append(b, s...)
	return append(b, sep)
}

// serviceKey is ns\x00group\x00service.
func serviceKey(k model.ServiceKey) []byte {
	b := make([]byte, 0, len(k.Namespace)+len(k.Group)+len(k.Service)+2)
	b = appendPart(b, k.Namespace)
	b = appendPart(b, k.Group)
	return append(b, k.Service...)
}

// servicePrefix is ns\x00group\x00service\x00, the prefix of the service's clusters and instances.
func servicePrefix(k model.ServiceKey) []byte {
	b := make([]byte, 0, len(k.Namespace)+len(k.Group)+len(k.Service)+3+64)
	b = appendPart(b, k.Namespace)
	b = appendPart(b, k.Group)
	return appendPart(b, k.Service)
}

// namespacePrefix is ns\x00, or ns\x00group\x00 when group is set.
func namespacePrefix(ns, group string) []byte {
	b := appendPart(nil, ns)
	if group != "" {
		b = appendPart(b, group)
	}
	return b
}

// clusterKey is ns\x00group\x00service\x00cluster.
func clusterKey(k model.ServiceKey, name string) []byte {
	return append(servicePrefix(k), name...)
}

// instanceKey is ns\x00group\x00service\x00ip\x00 followed by the port as two big-endian
// bytes, so key order within a service is (IP, port).
func instanceKey(r model.InstanceRef) []byte {
	b := servicePrefix(r.ServiceKey())
	b = appendPart(b, r.IP)
	return binary.BigEndian.AppendUint16(b, uint16(r.Port))
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func readU64(b []byte) (uint64, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("index value of %d bytes: %w", len(b), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(b), nil
}

// valueCodec encodes stored values as canonical msgpack (map keys sorted), so that equal
// values have equal bytes and a no-op write is detected by comparing encodings.
type valueCodec struct {
	h *codec.MsgpackHandle
}

func newValueCodec() valueCodec {
	h := &codec.MsgpackHandle{}
	h.Canonical = true
	return valueCodec{h: h}
}

func (c valueCodec) encode(v any) ([]byte, error) {
	var b []byte
	if err := codec.NewEncoderBytes(&b, c.h).Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

func (c valueCodec) decode(b []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decode %T: %v: %w", v, r, ErrCorrupt)
		}
	}()
	if err := codec.NewDecoderBytes(b, c.h).Decode(v); err != nil {
		return fmt.Errorf("decode %T: %v: %w", v, err, ErrCorrupt)
	}
	return nil
}

// normalizeMap turns an empty map into nil, so nil and empty metadata store the same bytes.
func normalizeMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// serviceNameOfKey is the service name of a serviceKey: what follows its last separator.
func serviceNameOfKey(k []byte) string {
	return string(k[bytes.LastIndexByte(k, sep)+1:])
}
