//go:build linux

package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Report is the outcome of checking one history.
type Report struct {
	// Ops counts every recorded operation, by outcome.
	Ops, OK, NotFound, Unknown, Failed int
	// Checked counts the operations given to porcupine (resets and carried unknown
	// writes included); Partitions the per-service histories it checked.
	Checked, Partitions, Segments int
	// IndexChecked counts reads checked against the prefix their index names.
	IndexChecked int
	// Result is the worst porcupine result over the segments.
	Result porcupine.CheckResult
	// CheckTime is the time porcupine took.
	CheckTime time.Duration
	// Violations describes every failed check; empty when the history passed.
	Violations []string
	// infos are porcupine's linearization info per segment, for visualizations.
	infos []porcupine.LinearizationInfo
}

// Passed reports whether no check failed (an inconclusive porcupine result passes).
func (r Report) Passed() bool { return len(r.Violations) == 0 }

// String summarizes the report.
func (r Report) String() string {
	return fmt.Sprintf("%d ops (%d ok, %d not-found, %d unknown, %d failed); porcupine %s on %d ops in %d per-service histories, %d segment(s), %s; %d reads checked by index; %d violation(s)",
		r.Ops, r.OK, r.NotFound, r.Unknown, r.Failed, resultName(r.Result), r.Checked, r.Partitions, r.Segments,
		r.CheckTime.Round(time.Millisecond), r.IndexChecked, len(r.Violations))
}

func resultName(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "ILLEGAL"
	default:
		return "inconclusive (timeout)"
	}
}

// Check checks a history: porcupine on the linearizable operations of each segment,
// every read against the writes its index covers, and the minority windows.
// timeout bounds each porcupine run.
func Check(h *History, timeout time.Duration) Report {
	recs, windows, events, segments := h.Snapshot()
	var rep Report
	for _, r := range recs {
		rep.Ops++
		switch r.Out.Outcome {
		case OK:
			rep.OK++
		case NotFound:
			rep.NotFound++
		case Unknown:
			rep.Unknown++
		case Failed:
			rep.Failed++
		}
	}
	rep.Result = porcupine.Ok
	model := instanceSetModel()
	linOnly := segmentOps(recs, segments, false)
	withStale := segmentOps(recs, segments, true)
	for i, ops := range linOnly {
		rep.Segments++
		rep.Checked += len(ops)
		rep.Partitions += len(partitionByService(ops))
		start := time.Now()
		res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		rep.CheckTime += time.Since(start)
		if res == porcupine.Ok && !sameOps(ops, withStale[i]) {
			// The stale reads also show which unknown writes took effect, and by when:
			// a state a stale read shows is one the log produced, so it must fit a
			// linearization too.
			start = time.Now()
			res2, info2 := porcupine.CheckOperationsVerbose(model, withStale[i], timeout)
			rep.CheckTime += time.Since(start)
			if res2 == porcupine.Illegal {
				res, info = res2, info2
				rep.Violations = append(rep.Violations, fmt.Sprintf(
					"segment %d: stale reads show writes taking effect in a way no linearization of the linearizable operations allows (a stale read showed a state the log never produced?); pinned by stale reads: %s",
					i, strings.Join(first(stalePins(ops, withStale[i]), 10), "; ")))
			} else if res2 == porcupine.Unknown {
				res = res2
			}
		} else if res == porcupine.Illegal {
			rep.Violations = append(rep.Violations, fmt.Sprintf("segment %d: the linearizable operations are not linearizable (see the visualization)", i))
		}
		info.AddAnnotations(annotations(events))
		rep.infos = append(rep.infos, info)
		switch res {
		case porcupine.Illegal:
			rep.Result = porcupine.Illegal
		case porcupine.Unknown:
			if rep.Result == porcupine.Ok {
				rep.Result = porcupine.Unknown
			}
		}
	}
	cutoff := int64(1<<63 - 1)
	if len(segments) > 0 {
		cutoff = segments[0].Start
	}
	n, v := checkByIndex(recs, cutoff)
	rep.IndexChecked = n
	rep.Violations = append(rep.Violations, v...)
	rep.Violations = append(rep.Violations, checkMinority(recs, windows)...)
	return rep
}

// CarryWindow is how long after its invocation a write with an unknown outcome is
// assumed to be able to take effect, when it is carried over a snapshot restore. A
// server gives up on a request after its request timeout (10 s) plus, when forwarding,
// the leader hold (5 s); a fault holds a request in a paused node's socket for at most
// its hold time (3 s). Within a segment no such bound is assumed.
const CarryWindow = 20 * time.Second

// segmentOps splits the records into the porcupine histories of each segment. A write
// with an unknown outcome may take effect at any time after its invocation (its return
// is the end of the segment), unless a read of the segment showed its value: values are
// unique, so it took effect, before that read returned — the write then enters the
// history as successful, returning when the first such read returned (the "patching"
// of etcd's robustness tests; it keeps porcupine from searching every late position).
// A segment after a restore starts with a Reset per service to the archive's state;
// writes whose outcome is unknown may still take effect after the restore, so each one
// invoked less than CarryWindow before the restore ended is carried into the later
// segments as an unknown write that may land anywhere up to CarryWindow after its
// invocation.
func segmentOps(recs []Record, segments []Segment, staleObservations bool) [][]porcupine.Operation {
	sort.SliceStable(segments, func(i, j int) bool { return segments[i].Start < segments[j].Start })
	var last int64
	for _, r := range recs {
		last = max(last, r.Return)
	}
	end := last + 1
	bounds := make([]int64, 0, len(segments)+1) // end of each segment
	for _, s := range segments {
		bounds = append(bounds, s.Start)
	}
	bounds = append(bounds, end)

	out := make([][]porcupine.Operation, len(bounds))
	var pending []Record // unknown writes of earlier segments
	for k := range bounds {
		segEnd := bounds[k]
		var segStart int64
		var ops []porcupine.Operation
		if k > 0 {
			seg := segments[k-1]
			segStart = seg.End
			services := make([]int, 0, len(seg.Initial))
			for s := range seg.Initial {
				services = append(services, s)
			}
			sort.Ints(services)
			for _, s := range services {
				ops = append(ops, porcupine.Operation{ClientId: 0, Input: Input{Kind: Reset, Service: s, State: seg.Initial[s]},
					Call: seg.Start, Output: Output{Outcome: OK}, Return: seg.End, Metadata: opMeta{node: "restore"}})
			}
			for _, r := range pending {
				last := r.Call + int64(CarryWindow)
				if last <= seg.End {
					continue
				}
				ops = append(ops, porcupine.Operation{ClientId: r.Client, Input: r.In, Call: seg.End + 1,
					Output: r.Out, Return: min(segEnd, last), Metadata: opMeta{node: r.Node, err: "carried over the restore: " + r.Err}})
			}
		}
		seen := firstObservations(recs, segStart, segEnd, staleObservations)
		for _, r := range recs {
			if r.Call < segStart || r.Call >= segEnd || r.In.Kind == StaleRead || r.Out.Outcome == Failed {
				continue
			}
			if r.In.Kind == Read && r.Out.Outcome != OK {
				continue
			}
			ret, out, note := r.Return, r.Out, r.Err
			if r.Out.Outcome == Unknown {
				pending = append(pending, r)
				ret = segEnd
				if t, ok := seen[observation{r.In.Service, r.In.Port, r.In.Value}]; ok && r.In.Value != "" && t >= r.Call {
					// Only this write produces its value: a read that showed it proves the
					// write took effect before that read returned.
					ret, out.Outcome = t, OK
					note = fmt.Sprintf("outcome unknown to the client (%s); observed by a read returning at %s", r.Err, ts(t))
				}
			}
			ops = append(ops, porcupine.Operation{ClientId: r.Client, Input: r.In, Call: r.Call, Output: out,
				Return: ret, Metadata: opMeta{node: r.Node, index: r.Out.Index, err: note}})
		}
		out[k] = ops
	}
	return out
}

// sameOps reports whether two histories hold the same operations with the same
// outcomes and times.
func sameOps(a, b []porcupine.Operation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Return != b[i].Return || a[i].Output != b[i].Output {
			return false
		}
	}
	return true
}

// stalePins describes the operations that only stale reads pinned.
func stalePins(lin, all []porcupine.Operation) []string {
	var out []string
	for i := range all {
		if i < len(lin) && (lin[i].Return != all[i].Return || lin[i].Output != all[i].Output) {
			m, _ := all[i].Metadata.(opMeta)
			out = append(out, fmt.Sprintf("%s by client %d via %s invoked at %s, %s",
				describeOp(all[i].Input.(Input), lin[i].Output.(Output)), all[i].ClientId, m.node, ts(all[i].Call), m.err))
		}
	}
	return out
}

// first returns the first n strings of s, and a count of the rest.
func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}

// observation is a value a read showed on one instance.
type observation struct {
	svc, port int
	value     string
}

// firstObservations maps every value that a successful linearizable read (and, with
// stale set, stale read) invoked in [start, end) showed to the earliest return time of
// such a read.
func firstObservations(recs []Record, start, end int64, stale bool) map[observation]int64 {
	out := map[observation]int64{}
	for _, r := range recs {
		if r.Out.Outcome != OK || r.Call < start || r.Call >= end {
			continue
		}
		if r.In.Kind != Read && (r.In.Kind != StaleRead || !stale) {
			continue
		}
		for i, v := range r.Out.State {
			if v == "" {
				continue
			}
			k := observation{r.In.Service, i + 1, v}
			if t, ok := out[k]; !ok || r.Return < t {
				out[k] = r.Return
			}
		}
	}
	return out
}

func annotations(events []Event) []porcupine.Annotation {
	out := make([]porcupine.Annotation, 0, len(events))
	for _, e := range events {
		out = append(out, porcupine.Annotation{Tag: "faults", Start: e.At, End: max(e.End, e.At), Description: e.Description})
	}
	return out
}

// indexedWrite is an acknowledged write with its index.
type indexedWrite struct {
	index uint64
	value string // "" for a delete
}

// checkByIndex checks every successful read that returned before cutoff against the
// writes its X-Roster-Index covers. A read at index R of a service must show, for each
// instance, the value of the last acknowledged write to it with index ≤ R (absent if
// none) — or the value of a write with unknown outcome that could have been applied
// after that write and at or before R: one invoked before the read returned and whose
// index could exceed both that write's index and every index acknowledged before it
// was invoked. This holds for stale reads (any node, any lag) as for linearizable
// ones: every state a node serves is the state after some prefix of the log. Writes
// that share an index (coalesced into one entry) may have applied in either order.
// Reads after a restore (cutoff) are not checked: the restore resets the state under
// a new index floor.
func checkByIndex(recs []Record, cutoff int64) (int, []string) {
	type key struct{ svc, port int }
	acked := map[key][]indexedWrite{}
	var maybe = map[key][]Record{}
	type done struct {
		ret   int64
		index uint64
	}
	var completions []done
	for _, r := range recs {
		if !r.In.Kind.IsWrite() {
			continue
		}
		k := key{r.In.Service, r.In.Port}
		switch r.Out.Outcome {
		case OK:
			v := r.In.Value
			if r.In.Kind == Deregister {
				v = ""
			}
			acked[k] = append(acked[k], indexedWrite{index: r.Out.Index, value: v})
			completions = append(completions, done{r.Return, r.Out.Index})
		case Unknown:
			maybe[k] = append(maybe[k], r)
		}
	}
	for k := range acked {
		sort.Slice(acked[k], func(i, j int) bool { return acked[k][i].index < acked[k][j].index })
	}
	sort.Slice(completions, func(i, j int) bool { return completions[i].ret < completions[j].ret })
	prefixMax := make([]uint64, len(completions))
	var m uint64
	for i, c := range completions {
		m = max(m, c.index)
		prefixMax[i] = m
	}
	// lowerBound is the highest index acknowledged before t: a write invoked at t gets
	// a higher index, if any.
	lowerBound := func(t int64) uint64 {
		i := sort.Search(len(completions), func(i int) bool { return completions[i].ret >= t })
		if i == 0 {
			return 0
		}
		return prefixMax[i-1]
	}

	var violations []string
	checked := 0
	for _, r := range recs {
		if (r.In.Kind != Read && r.In.Kind != StaleRead) || r.Out.Outcome != OK || r.Return >= cutoff {
			continue
		}
		checked++
		R := r.Out.Index
		for p := 1; p <= MaxPorts; p++ {
			k := key{r.In.Service, p}
			got := r.Out.State[p-1]
			want, lastIdx := "", uint64(0)
			var sameIndex []string // the acknowledged values written at lastIdx
			for _, w := range acked[k] {
				if w.index > R {
					break
				}
				if w.index != lastIdx {
					sameIndex = sameIndex[:0]
				}
				want, lastIdx = w.value, w.index
				sameIndex = append(sameIndex, w.value)
			}
			// Writes coalesced into one entry share its index and apply in the order of
			// the batch, which no client sees: any of them may be the last.
			if got == want || (lastIdx > 0 && slices.Contains(sameIndex, got)) {
				continue
			}
			explained := false
			for _, w := range maybe[k] {
				v := w.In.Value
				if w.In.Kind == Deregister {
					v = ""
				}
				if v == got && w.Call < r.Return && max(lastIdx, lowerBound(w.Call)) < R {
					explained = true
					break
				}
			}
			if !explained {
				violations = append(violations, fmt.Sprintf(
					"%s of svc%d served by %s to client %d (call %s, return %s) at index %d shows :%d = %q; the acknowledged writes up to index %d leave %q (last at index %d)",
					r.In.Kind, r.In.Service, r.Node, r.Client, ts(r.Call), ts(r.Return), R, p, got, R, want, lastIdx))
			}
		}
	}
	return checked, violations
}

// checkMinority fails every write or linearizable read that a node on the minority
// side of a partition acknowledged (success or not-found) although it was invoked
// after the partition was in place and returned before it healed: such a node cannot
// reach a quorum.
func checkMinority(recs []Record, windows []Window) []string {
	var out []string
	for _, w := range windows {
		for _, r := range recs {
			if r.Node != w.Node || r.Call < w.Start || r.Return > w.End {
				continue
			}
			if !r.In.Kind.IsWrite() && r.In.Kind != Read {
				continue
			}
			if r.Out.Outcome == OK || r.Out.Outcome == NotFound {
				out = append(out, fmt.Sprintf("%s (index %d) served by %s to client %d while %s was in the minority [%s, %s]; call %s return %s",
					describeOp(r.In, r.Out), r.Out.Index, r.Node, r.Client, w.Node, ts(w.Start), ts(w.End), ts(r.Call), ts(r.Return)))
			}
		}
	}
	return out
}

func ts(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

// WriteArtifacts writes the porcupine visualization of each segment, the violations
// and the raw history into dir, and returns the files written.
func WriteArtifacts(dir string, h *History, rep Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	model := instanceSetModel()
	for i, info := range rep.infos {
		path := filepath.Join(dir, fmt.Sprintf("history-segment%d.html", i))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	vpath := filepath.Join(dir, "violations.txt")
	if err := os.WriteFile(vpath, []byte(rep.String()+"\n\n"+strings.Join(rep.Violations, "\n")+"\n"), 0o644); err != nil {
		return files, err
	}
	files = append(files, vpath)
	recs, windows, events, segments := h.Snapshot()
	raw, err := json.MarshalIndent(map[string]any{"records": recs, "windows": windows, "events": events, "segments": segments}, "", " ")
	if err != nil {
		return files, err
	}
	hpath := filepath.Join(dir, "history.json")
	if err := os.WriteFile(hpath, raw, 0o644); err != nil {
		return files, err
	}
	return append(files, hpath), nil
}
