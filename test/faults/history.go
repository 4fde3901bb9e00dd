//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
)

// MaxPorts bounds the instances per service the model tracks.
const MaxPorts = 4

// SvcState is the model's state of one service: the metadata value "v" of the
// instance on each port (index 0 is port 1), "" when that instance is absent. It is a
// comparable value, so porcupine can compare and hash it.
type SvcState [MaxPorts]string

// String lists the present instances, for visualizations: "{1:c0-3 3:c2-9}".
func (s SvcState) String() string {
	var parts []string
	for i, v := range s {
		if v != "" {
			parts = append(parts, fmt.Sprintf("%d:%s", i+1, v))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Kind is an operation of the workload.
type Kind uint8

// Operation kinds.
const (
	// Register is PUT .../instances/{ip}:{port} with metadata {"v": value}.
	Register Kind = iota
	// Patch is PATCH .../instances/{ip}:{port} with metadata {"v": value}.
	Patch
	// Deregister is DELETE .../instances/{ip}:{port}.
	Deregister
	// Read is a linearizable GET .../instances.
	Read
	// StaleRead is GET .../instances?consistency=stale.
	StaleRead
	// Reset sets a service's state: the first operation of a history segment that
	// starts from a known state (after a snapshot restore).
	Reset
)

func (k Kind) String() string {
	return [...]string{"put", "patch", "delete", "read", "stale-read", "reset"}[k]
}

// IsWrite reports whether k changes state.
func (k Kind) IsWrite() bool { return k == Register || k == Patch || k == Deregister }

// Outcome is what the client learned about an operation.
type Outcome uint8

// Outcomes.
const (
	// OK: the operation took effect (writes) or returned a state (reads).
	OK Outcome = iota
	// NotFound: a patch or delete found no instance (it changed nothing).
	NotFound
	// Unknown: the request failed in a way that does not say whether it took effect
	// (timeout, lost connection, 5xx after the request reached the cluster).
	Unknown
	// Failed: the request certainly had no effect (the node was not reachable, or
	// the cluster answered that it did not apply it: 503 not_leader, no_leader or
	// storage_failure). Such
	// operations are left out of the checked history.
	Failed
)

func (o Outcome) String() string {
	return [...]string{"ok", "not-found", "unknown", "failed"}[o]
}

// Input is what an operation asked for.
type Input struct {
	Kind    Kind
	Service int
	// Port is 1..MaxPorts.
	Port  int
	Value string
	// State is the state a Reset sets.
	State SvcState
}

// Output is what an operation returned.
type Output struct {
	Outcome Outcome
	// State is the state a read returned.
	State SvcState
	// Index is the write's index, or a read's X-Roster-Index.
	Index uint64
}

// Record is one completed operation.
type Record struct {
	// OpID is unique per operation; its requests carry it in HeaderOpID.
	OpID   string
	Client int
	Node   string
	In     Input
	Out    Output
	// Call and Return are nanoseconds on the history's monotonic clock.
	Call, Return int64
	Err          string
}

// Window is a period during which a node was on the minority side of a partition.
type Window struct {
	Node       string
	Start, End int64
}

// Event is a fault injection or healing, shown in visualizations.
type Event struct {
	At          int64
	End         int64
	Description string
}

// Segment starts a part of the history that is checked on its own: after a snapshot
// restore, the state is the archive's, whatever happened before.
type Segment struct {
	// Start and End bound the restore: operations invoked before Start belong to the
	// previous segment, those invoked after End to this one.
	Start, End int64
	// Initial is each service's state at the start.
	Initial map[int]SvcState
}

// History collects the records of a run. It is safe for concurrent use.
type History struct {
	base time.Time

	mu       sync.Mutex
	records  []Record
	windows  []Window
	events   []Event
	segments []Segment
}

// NewHistory starts a history whose clock starts now.
func NewHistory() *History { return &History{base: time.Now()} }

// Now reads the history's monotonic clock.
func (h *History) Now() int64 { return int64(time.Since(h.base)) }

// Add records a completed operation.
func (h *History) Add(r Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
}

// AddWindow records a minority window.
func (h *History) AddWindow(w Window) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.windows = append(h.windows, w)
}

// AddEvent records a fault event.
func (h *History) AddEvent(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

// AddSegment starts a new segment.
func (h *History) AddSegment(s Segment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.segments = append(h.segments, s)
}

// ResolveUndelivered turns unknown outcomes into failed ones where the network proves
// that the operation had no effect: the node the client asked answered that forwarding
// to the leader failed (so it had not applied the request itself: a node forwards only
// as a follower, or after its own Apply refused as not-leader), and no HTTP proxy ever
// passed the operation's request on to another node. It returns how many it resolved.
func (h *History) ResolveUndelivered(delivered func(id string) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i := range h.records {
		r := &h.records[i]
		if r.Out.Outcome != Unknown || r.OpID == "" || !strings.Contains(r.Err, "forwarding to the leader") || delivered(r.OpID) {
			continue
		}
		r.Out.Outcome = Failed
		r.Err += " [never delivered to another node]"
		n++
	}
	return n
}

// Snapshot returns copies of everything recorded, records sorted by call time.
func (h *History) Snapshot() ([]Record, []Window, []Event, []Segment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	recs := append([]Record(nil), h.records...)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Call < recs[j].Call })
	return recs, append([]Window(nil), h.windows...), append([]Event(nil), h.events...), append([]Segment(nil), h.segments...)
}

// classify turns a write's error into its outcome.
func classify(err error) Outcome {
	if err == nil {
		return OK
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return Failed // nothing was sent
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Code == api.CodeNotFound:
			return NotFound
		case ae.Status == http.StatusServiceUnavailable &&
			(ae.Code == api.CodeNotLeader || ae.Code == api.CodeNoLeader || ae.Code == api.CodeStorage):
			// The API documents that such a 503 was not applied (storage_failure: the
			// leader could not log the write, and nothing else saw it).
			return Failed
		}
	}
	return Unknown
}

// isClientBug reports whether err says the workload sent a malformed request.
func isClientBug(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnsupportedMediaType ||
		ae.Status == http.StatusMethodNotAllowed)
}

// withTimeout bounds ctx by the workload's client timeout.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, ClientTimeout)
}
