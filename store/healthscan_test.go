package store

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/rosterhq/roster/model"
)

// fillHealthScan registers n instances over 3 services and 2 clusters per service,
// with metadata, some made unhealthy (with and without a recorded time) and some
// updated after their registration.
func fillHealthScan(t testing.TB, s *Store, n int) {
	t.Helper()
	idx := uint64(0)
	mustDo(t, s.Update(func(tx *Txn) error {
		for sv := range 3 {
			key := model.ServiceKey{Namespace: "ns" + fmt.Sprint(sv%2), Group: "g", Service: fmt.Sprintf("svc-%d", sv)}
			idx++
			if err := tx.UpsertCluster(idx, model.Cluster{Namespace: key.Namespace, Group: key.Group, Service: key.Service,
				Name: "web", HealthCheck: model.HealthCheck{Type: model.CheckHTTP, Path: fmt.Sprintf("/h%d", sv)}}); err != nil {
				return err
			}
		}
		for i := range n {
			sv := i % 3
			idx++
			in := model.Instance{
				Namespace: "ns" + fmt.Sprint(sv%2), Group: "g", Service: fmt.Sprintf("svc-%d", sv),
				IP: fmt.Sprintf("127.1.%d.%d", i/250, i%250+1), Port: 8000 + i%7, Cluster: model.DefaultCluster,
				Weight: 1.5, Enabled: i%5 != 0, Healthy: true,
				Metadata: map[string]string{"version": fmt.Sprint("v", i%4), "zone": "z"},
			}
			if i%2 == 1 {
				in.Cluster = "web"
			}
			if i%11 == 0 {
				in.Metadata = nil
			}
			if err := tx.RegisterInstance(idx, in); err != nil {
				return err
			}
		}
		return nil
	}))
	// Some health changes and updates after the registrations.
	var ups []model.HealthUpdate
	for i := 0; i < n; i += 4 {
		sv := i % 3
		ups = append(ups, model.HealthUpdate{Ref: model.InstanceRef{Namespace: "ns" + fmt.Sprint(sv%2), Group: "g",
			Service: fmt.Sprintf("svc-%d", sv), IP: fmt.Sprintf("127.1.%d.%d", i/250, i%250+1), Port: 8000 + i%7},
			Epoch: uint64(3 + i + 1)}) // the index that registered it
	}
	idx++
	_, err := s.SetHealthAt(idx, ups[:len(ups)/2], 1_700_000_000_000)
	mustDo(t, err)
	idx++
	_, err = s.SetHealth(idx, ups[len(ups)/2:])
	mustDo(t, err)
}

func TestForEachInstanceHealth_MatchesForEachInstance(t *testing.T) {
	s := mustNewStore(t)
	fillHealthScan(t, s, 600)

	type rec struct {
		ih InstanceHealth
		hc model.HealthCheck
	}
	var want []rec
	mustDo(t, s.ForEachInstance(func(in model.Instance, hc model.HealthCheck) bool {
		want = append(want, rec{HealthOf(in), hc})
		return true
	}))
	var got []rec
	specs := map[string]*model.HealthCheck{}
	mustDo(t, s.ForEachInstanceHealth(func(ih InstanceHealth, hc *model.HealthCheck) bool {
		got = append(got, rec{ih, *hc})
		// One spec value per cluster, shared by its instances.
		k := ih.Ref.ServiceKey().String() + "/" + ih.Cluster
		if p, ok := specs[k]; ok && p != hc {
			t.Errorf("%s: a second spec value for the same cluster", k)
		}
		specs[k] = hc
		return true
	}))
	if len(want) != 600 {
		t.Fatalf("ForEachInstance gave %d instances", len(want))
	}
	if !reflect.DeepEqual(got, want) {
		for i := range min(len(got), len(want)) {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("record %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	unhealthy, stamped := 0, 0
	for _, r := range got {
		if !r.ih.Healthy {
			unhealthy++
		}
		if r.ih.UnhealthySince != 0 {
			stamped++
		}
	}
	if unhealthy != 150 || stamped != 75 || len(specs) != 6 {
		t.Fatalf("%d unhealthy, %d with a time, %d clusters: the fixture did not cover what it should", unhealthy, stamped, len(specs))
	}

	calls := 0
	mustDo(t, s.ForEachInstanceHealth(func(InstanceHealth, *model.HealthCheck) bool { calls++; return false }))
	if calls != 1 {
		t.Fatalf("fn called %d times after returning false, want 1", calls)
	}
}

// A record in a shape the fast path does not know (here an extra field, as a newer
// version could write) is decoded by the generic codec, never misread.
func TestHealthDecoder_FallsBackOnUnknownShape(t *testing.T) {
	c := newValueCodec()
	in := testInstance("127.1.2.3", 80)
	in.CreateIndex, in.ModifyIndex, in.Healthy, in.UnhealthySince = 3, 9, false, 42
	type newer struct {
		model.Instance
		Extra string `json:"extra"`
	}
	for name, v := range map[string]any{"current": in, "newer": newer{in, "x"}} {
		b, err := c.encode(v)
		mustDo(t, err)
		var d healthDecoder
		var ih InstanceHealth
		fast := d.fast(b, &ih)
		if fast != (name == "current") {
			t.Errorf("%s: fast path taken = %v", name, fast)
		}
		mustDo(t, d.decode(c, b, &ih))
		if want := HealthOf(in); ih != want {
			t.Errorf("%s: decoded %+v, want %+v", name, ih, want)
		}
	}
	// The fast path leaves truncated and garbage records to the generic codec.
	b, err := c.encode(in)
	mustDo(t, err)
	for _, bad := range [][]byte{b[:len(b)-3], {0xc1}, append(append([]byte{}, b...), 0x00)} {
		var d healthDecoder
		var ih InstanceHealth
		if d.fast(bad, &ih) {
			t.Errorf("fast path accepted a malformed record % x", bad)
		}
	}
	var d healthDecoder
	var ih InstanceHealth
	if err := d.decode(c, b[:len(b)-3], &ih); err == nil {
		t.Errorf("a truncated record decoded as %+v", ih)
	}
}

// BenchmarkForEachInstanceHealth scans 10,000 instances: allocations per scan are
// about one per instance (its IP), against a whole model.Instance, its metadata map
// and a copy of its cluster's spec for ForEachInstance.
func BenchmarkForEachInstanceHealth(b *testing.B) {
	s := mustNewStore(b)
	fillHealthScan(b, s, 10_000)
	b.Run("ForEachInstanceHealth", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			mustDo(b, s.ForEachInstanceHealth(func(InstanceHealth, *model.HealthCheck) bool { n++; return true }))
			if n != 10_000 {
				b.Fatal(n)
			}
		}
	})
	b.Run("ForEachInstance", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			mustDo(b, s.ForEachInstance(func(model.Instance, model.HealthCheck) bool { n++; return true }))
			if n != 10_000 {
				b.Fatal(n)
			}
		}
	})
}
