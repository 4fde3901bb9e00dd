package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
)

// oldKeyOf is how CheckFile checked an instance record before instanceKeyChecker: decode
// it whole, then build its key.
func oldKeyOf(c valueCodec, v []byte) ([]byte, error) {
	d := instanceDecoder{codec: c}
	var in model.Instance
	if err := d.decode(v, &in); err != nil {
		return nil, err
	}
	return instanceKey(in.Ref()), nil
}

// The in-place check accepts exactly the records the decoding check accepted and gives
// each the same key: valid records of every shape, and thousands of damaged ones.
func TestInstanceKeyChecker_AgreesWithDecoding(t *testing.T) {
	c := newValueCodec()
	var records [][]byte
	add := func(v any) {
		b, err := c.encode(v)
		mustDo(t, err)
		records = append(records, b)
	}
	base := testInstance("127.1.2.3", 8080)
	base.CreateIndex, base.ModifyIndex = 7, 9
	add(base)
	noMeta := base
	noMeta.Metadata = nil
	add(noMeta)
	unhealthy := base
	unhealthy.Healthy, unhealthy.UnhealthySince, unhealthy.Port = false, 1_700_000_000_000, 70000 // port past uint16
	add(unhealthy)
	big := base
	big.Metadata = map[string]string{}
	for i := range 40 {
		big.Metadata[fmt.Sprint("key-", i)] = fmt.Sprint(bytes.Repeat([]byte("v"), i*7))
	}
	add(big)
	type newer struct {
		model.Instance
		Extra string `json:"extra"`
	}
	add(newer{base, "x"}) // not the fast shape: decoded by the generic codec
	add(map[string]any{"ip": "127.0.0.1"})
	add(map[string]any{"ip": 12})

	rng := rand.New(rand.NewPCG(1, 2))
	valid := len(records)
	for i := range 5000 {
		b := append([]byte(nil), records[i%valid]...)
		switch i % 3 {
		case 0: // flip bytes
			for range 1 + rng.IntN(3) {
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			}
		case 1: // truncate
			b = b[:rng.IntN(len(b))]
		case 2: // append garbage
			b = append(b, byte(rng.Uint32()))
		}
		records = append(records, b)
	}
	var ic instanceKeyChecker
	ic.d.codec = c
	accepted := 0
	for i, v := range records {
		want, werr := oldKeyOf(c, v)
		got, gerr := ic.keyOf(v)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("record %d (% x): decoding error %v, in-place error %v", i, v, werr, gerr)
		}
		if werr == nil {
			accepted++
			if !bytes.Equal(got, want) {
				t.Fatalf("record %d (% x): key %q, want %q", i, v, got, want)
			}
		}
	}
	if accepted <= valid {
		t.Fatalf("only %d records accepted: the damaged ones did not exercise the comparison", accepted)
	}
}

// A state file whose instance record sits under another key, or does not decode, still
// fails the check.
func TestCheckFile_RejectsMisplacedAndUndecodableInstances(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, s *Store){
		"misplaced": func(t *testing.T, s *Store) {
			rawPut(t, s, bucketInstances, instanceKey(testInstance("127.1.1.1", 80).Ref()), mustEncode(t, testInstance("127.1.1.2", 80)))
		},
		"undecodable": func(t *testing.T, s *Store) {
			rawPut(t, s, bucketInstances, instanceKey(testInstance("127.1.1.1", 80).Ref()), []byte{0x81, 0xa2, 'i', 'p'})
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s := mustOpenAt(t, path)
			mustDo(t, s.RegisterInstance(1, testInstance("127.1.1.1", 80)))
			damage(t, s)
			mustDo(t, s.Close())
			if _, _, err := CheckFile(path); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("CheckFile = %v, want ErrCorrupt", err)
			}
		})
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := newValueCodec().encode(v)
	mustDo(t, err)
	return b
}

// rawPut writes a value under a key of a bucket, bypassing the store's checks.
func rawPut(t *testing.T, s *Store, bucket, key, value []byte) {
	t.Helper()
	mustDo(t, s.db.Update(func(btx *bolt.Tx) error { return btx.Bucket(bucket).Put(key, value) }))
}

// BenchmarkCheckFile checks a state file of 10,000 instances, as a restore does on each
// node (and the archive check on the leader).
func BenchmarkCheckFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	s := mustOpenAt(b, path)
	fillHealthScan(b, s, 10_000)
	mustDo(b, s.Close())
	b.ReportAllocs()
	for b.Loop() {
		counts, _, err := CheckFile(path)
		if err != nil || counts.Instances != 10_000 {
			b.Fatal(counts, err)
		}
	}
}
