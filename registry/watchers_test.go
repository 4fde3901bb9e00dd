package registry

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWatchers_Bound(t *testing.T) {
	reg := prometheus.NewRegistry()
	w, err := NewWatchers(2, reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !w.Acquire() {
			t.Fatalf("watcher %d of 2 was refused", i+1)
		}
	}
	if w.Acquire() {
		t.Fatal("a third watcher over a limit of 2 was taken")
	}
	if w.Held() != 2 || testutil.ToFloat64(w.refusals) != 1 {
		t.Fatalf("held %d, refused %v", w.Held(), testutil.ToFloat64(w.refusals))
	}
	w.Release()
	if !w.Acquire() {
		t.Fatal("a place given back was not taken again")
	}
	if err := w.refused(); !errors.Is(err, ErrTooManyWatchers) {
		t.Fatalf("refusal %v", err)
	}
	var none *Watchers
	if !none.Acquire() || none.Held() != 0 {
		t.Fatal("the nil bound refused")
	}
	none.Release()
	unbounded, err := NewWatchers(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if !unbounded.Acquire() {
			t.Fatal("an unbounded limit refused")
		}
	}
}
