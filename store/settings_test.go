package store

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestSettings_UpdateReopenAndRestore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{NoSync: true})
	mustDo(t, err)
	if idx, set, err := s.Settings(nil); err != nil || set != model.DefaultSettings() || idx != 1 {
		t.Fatalf("fresh settings %d %+v %v", idx, set, err)
	}
	mustDo(t, s.UpdateSettings(4, model.Settings{MetadataMaxBytes: 2048}))
	want := model.Settings{MetadataMaxBytes: 2048, ModifyIndex: 4}
	for _, ws := range []*WatchSet{nil, NewWatchSet()} {
		if idx, set, err := s.Settings(ws); err != nil || set != want || idx != 4 {
			t.Fatalf("after update (watch set %v): %d %+v %v", ws != nil, idx, set, err)
		}
	}
	// The same value again changes nothing.
	mustDo(t, s.UpdateSettings(5, model.Settings{MetadataMaxBytes: 2048}))
	if _, set, _ := s.Settings(nil); set != want {
		t.Fatalf("no-op update moved the settings: %+v", set)
	}
	assertField(t, s.UpdateSettings(6, model.Settings{MetadataMaxBytes: model.HardMaxMetadataBytes + 1}), "metadataMaxBytes")

	sn, err := s.Snapshot()
	mustDo(t, err)
	var buf bytes.Buffer
	_, err = sn.WriteTo(&buf)
	mustDo(t, err)
	mustDo(t, sn.Close())
	mustDo(t, s.UpdateSettings(7, model.Settings{MetadataMaxBytes: 512}))
	mustDo(t, s.Close())

	s, err = Open(path, Options{NoSync: true})
	mustDo(t, err)
	t.Cleanup(func() { _ = s.Close() })
	if _, set, _ := s.Settings(nil); set.MetadataMaxBytes != 512 || set.ModifyIndex != 7 {
		t.Fatalf("after reopen: %+v", set)
	}
	mustDo(t, s.Restore(&buf))
	if _, set, _ := s.Settings(nil); set != want {
		t.Fatalf("after restore: %+v, want the snapshot's %+v", set, want)
	}
}
