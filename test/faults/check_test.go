//go:build linux

package faults

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// historyOf builds a history from records.
func historyOf(recs ...Record) *History {
	h := NewHistory()
	for _, r := range recs {
		h.Add(r)
	}
	return h
}

func put(port int, v string, out Outcome, idx uint64, call, ret int64) Record {
	return Record{Node: "n1", In: Input{Kind: Register, Port: port, Value: v}, Out: Output{Outcome: out, Index: idx}, Call: call, Return: ret}
}

func patch(port int, v string, out Outcome, idx uint64, call, ret int64) Record {
	return Record{Node: "n1", In: Input{Kind: Patch, Port: port, Value: v}, Out: Output{Outcome: out, Index: idx}, Call: call, Return: ret}
}

func del(port int, out Outcome, idx uint64, call, ret int64) Record {
	return Record{Node: "n1", In: Input{Kind: Deregister, Port: port}, Out: Output{Outcome: out, Index: idx}, Call: call, Return: ret}
}

func read(kind Kind, st SvcState, idx uint64, call, ret int64) Record {
	return Record{Node: "n2", In: Input{Kind: kind}, Out: Output{Outcome: OK, State: st, Index: idx}, Call: call, Return: ret}
}

func TestCheck_LinearizableHistoryPasses(t *testing.T) {
	h := historyOf(
		put(1, "a", OK, 5, 0, 10),
		read(Read, SvcState{"a"}, 5, 20, 30),
		patch(1, "b", OK, 6, 40, 50),
		put(2, "c", OK, 7, 45, 55),
		read(Read, SvcState{"b", "c"}, 7, 60, 70),
		del(1, OK, 8, 80, 90),
		patch(1, "x", NotFound, 9, 100, 110),
		del(1, NotFound, 10, 100, 110),
		read(Read, SvcState{"", "c"}, 8, 120, 130),
		read(StaleRead, SvcState{"a"}, 5, 120, 130),
		Record{Node: "n3", In: Input{Kind: Register, Port: 3, Value: "gone"}, Out: Output{Outcome: Failed}, Call: 1, Return: 2},
	)
	rep := Check(h, time.Minute)
	if !rep.Passed() || rep.Result != porcupine.Ok {
		t.Fatalf("a linearizable history failed: %s\n%s", rep, strings.Join(rep.Violations, "\n"))
	}
	if rep.Checked != 9 || rep.IndexChecked != 4 || rep.Failed != 1 {
		t.Fatalf("counts: %s", rep)
	}
}

func TestCheck_LostAcknowledgedWriteIsIllegal(t *testing.T) {
	h := historyOf(
		put(1, "a", OK, 5, 0, 10),
		read(Read, SvcState{}, 3, 20, 30),
	)
	rep := Check(h, time.Minute)
	if rep.Passed() || rep.Result != porcupine.Illegal {
		t.Fatalf("a read missing an acknowledged write passed: %s", rep)
	}
	dir := t.TempDir()
	files, err := WriteArtifacts(dir, h, rep)
	if err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, "history-segment0.html")
	if st, err := os.Stat(html); err != nil || st.Size() == 0 {
		t.Fatalf("no visualization among %v: %v", files, err)
	}
}

func TestCheck_UnknownWriteMayTakeEffectLate(t *testing.T) {
	late := historyOf(
		put(1, "a", Unknown, 0, 0, 10),
		read(Read, SvcState{}, 3, 20, 30),
		read(Read, SvcState{"a"}, 4, 40, 50),
	)
	if rep := Check(late, time.Minute); !rep.Passed() {
		t.Fatalf("an unknown write applied after the client gave up was refused: %s", rep)
	}
	never := historyOf(
		put(1, "a", Unknown, 0, 0, 10),
		read(Read, SvcState{}, 3, 20, 30),
	)
	if rep := Check(never, time.Minute); !rep.Passed() {
		t.Fatalf("an unknown write that never applied was refused: %s", rep)
	}
	undone := historyOf(
		put(1, "a", Unknown, 0, 0, 10),
		read(Read, SvcState{"a"}, 4, 20, 30),
		read(Read, SvcState{}, 4, 40, 50),
	)
	if rep := Check(undone, time.Minute); rep.Result != porcupine.Illegal {
		t.Fatalf("a write that disappeared after a read saw it passed: %s", rep)
	}
}

func TestCheck_ReadsMatchTheirIndex(t *testing.T) {
	base := []Record{
		put(1, "a", OK, 5, 0, 10),
		put(1, "b", OK, 9, 20, 30),
		put(2, "m", Unknown, 0, 35, 40),
	}
	tests := []struct {
		name string
		read Record
		ok   bool
	}{
		{"stale prefix", read(StaleRead, SvcState{"a"}, 7, 50, 60), true},
		{"before everything", read(StaleRead, SvcState{}, 2, 50, 60), true},
		{"latest", read(StaleRead, SvcState{"b"}, 9, 50, 60), true},
		{"unknown write after the acknowledged ones", read(StaleRead, SvcState{"b", "m"}, 11, 50, 60), true},
		{"misses a write its index covers", read(StaleRead, SvcState{"a"}, 9, 50, 60), false},
		{"shows a write past its index", read(StaleRead, SvcState{"b"}, 7, 50, 60), false},
		{"unknown write below an index acknowledged before it began", read(StaleRead, SvcState{"b", "m"}, 9, 50, 60), false},
		{"unknown write invoked after the read returned", read(StaleRead, SvcState{"b", "m"}, 11, 30, 34), false},
	}
	// Two writes to :1 coalesced into the entry at index 12: either may be the last.
	base = append(base, put(1, "c", OK, 12, 41, 45), put(1, "d", OK, 12, 41, 46))
	tests = append(tests, []struct {
		name string
		read Record
		ok   bool
	}{
		{"either write of one entry", read(StaleRead, SvcState{"c"}, 12, 50, 60), true},
		{"the other write of that entry", read(StaleRead, SvcState{"d"}, 12, 50, 60), true},
		{"a value from before the entry", read(StaleRead, SvcState{"b"}, 12, 50, 60), false},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, v := checkByIndex(append(append([]Record(nil), base...), tt.read), 1<<62)
			if n != 1 {
				t.Fatalf("checked %d reads", n)
			}
			if (len(v) == 0) != tt.ok {
				t.Fatalf("ok = %v, violations %v", len(v) == 0, v)
			}
		})
	}
}

func TestCheck_MinorityMustNotAcknowledge(t *testing.T) {
	h := historyOf(
		put(1, "a", Unknown, 0, 120, 150),
		read(StaleRead, SvcState{}, 1, 120, 130),
	)
	h.AddWindow(Window{Node: "n1", Start: 100, End: 200})
	h.AddWindow(Window{Node: "n2", Start: 100, End: 200})
	if rep := Check(h, time.Minute); !rep.Passed() {
		t.Fatalf("unknown writes and stale reads in the minority were refused: %v", rep.Violations)
	}
	h.Add(put(2, "b", OK, 7, 110, 160))
	h.Add(del(3, NotFound, 8, 110, 160))
	h.Add(read(Read, SvcState{"", "b"}, 7, 170, 180))
	rep := Check(h, time.Minute)
	if len(rep.Violations) != 3 {
		t.Fatalf("want 3 minority violations, got %v", rep.Violations)
	}
}

func TestCheck_RestoreStartsASegmentFromTheArchive(t *testing.T) {
	seg := Segment{Start: 100, End: 110, Initial: map[int]SvcState{0: {"z"}}}
	h := historyOf(
		put(1, "a", OK, 5, 0, 10),
		put(2, "q", Unknown, 0, 20, 30),
		read(Read, SvcState{"a"}, 5, 40, 50),
		read(Read, SvcState{"z"}, 90, 120, 130),
		read(Read, SvcState{"z", "q"}, 91, 140, 150),
	)
	h.AddSegment(seg)
	if rep := Check(h, time.Minute); !rep.Passed() || rep.Segments != 2 {
		t.Fatalf("restore history refused: %s %v", rep, rep.Violations)
	}
	h.Add(read(Read, SvcState{"a"}, 92, 160, 170))
	if rep := Check(h, time.Minute); rep.Result != porcupine.Illegal {
		t.Fatalf("a pre-restore state after the restore passed: %s", rep)
	}
}

func TestCheck_OldUnknownWritesAreNotCarriedOverARestore(t *testing.T) {
	restore := int64(2 * CarryWindow)
	seg := Segment{Start: restore, End: restore + 10, Initial: map[int]SvcState{0: {}}}
	recent := historyOf(
		put(1, "q", Unknown, 0, restore-int64(CarryWindow)/2, restore-int64(CarryWindow)/2+10),
		read(Read, SvcState{"q"}, 9, restore+20, restore+30),
	)
	recent.AddSegment(seg)
	if rep := Check(recent, time.Minute); !rep.Passed() {
		t.Fatalf("a recent unknown write taking effect after the restore was refused: %s", rep)
	}
	old := historyOf(
		put(1, "q", Unknown, 0, 0, 10),
		read(Read, SvcState{"q"}, 9, restore+20, restore+30),
	)
	old.AddSegment(seg)
	if rep := Check(old, time.Minute); rep.Result != porcupine.Illegal {
		t.Fatalf("a write invoked %s before the restore took effect after it, unnoticed: %s", CarryWindow*2, rep)
	}
}

func TestCheck_ObservedUnknownWritesArePinned(t *testing.T) {
	// Each unknown write takes effect long after its client gave up, after reads that
	// did not see it: unpinned, porcupine would have to try every late position of
	// every one of them.
	var recs []Record
	now := int64(0)
	var st SvcState
	for i := 0; i < 300; i++ {
		port := 1 + i%3
		v := "v" + strconv.Itoa(i)
		recs = append(recs, put(port, v, Unknown, 0, now, now+5))
		recs = append(recs, read(Read, st, 1, now+10, now+20))
		st[port-1] = v
		recs = append(recs, read(Read, st, 1, now+30, now+40))
		now += 50
	}
	start := time.Now()
	rep := Check(historyOf(recs...), 20*time.Second)
	if !rep.Passed() || rep.Result != porcupine.Ok {
		t.Fatalf("late unknown writes refused: %s", rep)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("checking took %s", d)
	}

	future := historyOf(
		read(StaleRead, SvcState{"a"}, 3, 0, 5),
		put(1, "a", Unknown, 0, 10, 20),
		read(Read, SvcState{"a"}, 4, 30, 40),
	)
	if rep := Check(future, time.Minute); rep.Passed() {
		t.Fatalf("a read that showed a value before its write was invoked passed: %s", rep)
	}
}

// TestCheck_StaleReadOfAnUncommittedWrite is the anomaly of round 704206978: a node that
// had lost leadership served, to a stale read, a write that never took effect; the
// linearizable reads around it are fine, and the stale read's index cannot rule out a
// commit, but no linearization lets the write take effect before the stale read
// returned and be absent from the linearizable read that followed.
func TestCheck_StaleReadOfAnUncommittedWrite(t *testing.T) {
	h := historyOf(
		put(2, "old", OK, 406, 0, 10),
		patch(2, "new", Unknown, 0, 20, 100),
		read(StaleRead, SvcState{"", "new"}, 430, 110, 115),
		read(Read, SvcState{"", "old"}, 416, 120, 130),
		del(2, OK, 467, 140, 150),
		read(Read, SvcState{}, 467, 160, 170),
	)
	rep := Check(h, time.Minute)
	if rep.Result != porcupine.Illegal || len(rep.Violations) != 1 || !strings.Contains(rep.Violations[0], "stale reads") {
		t.Fatalf("want one stale-read violation, got %s: %v", rep, rep.Violations)
	}
	// Without the stale read the history is fine.
	h2 := historyOf(
		put(2, "old", OK, 406, 0, 10),
		patch(2, "new", Unknown, 0, 20, 100),
		read(Read, SvcState{"", "old"}, 416, 120, 130),
		del(2, OK, 467, 140, 150),
		read(Read, SvcState{}, 467, 160, 170),
	)
	if rep := Check(h2, time.Minute); !rep.Passed() {
		t.Fatalf("the history without the stale read failed: %v", rep.Violations)
	}
}
