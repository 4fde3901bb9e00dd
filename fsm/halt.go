package fsm

import (
	"fmt"

	"github.com/rosterhq/roster/buildinfo"
)

// HaltReason says why a state machine stopped applying (Halt.Reason).
type HaltReason string

// Halt reasons.
const (
	// HaltNeedsUpgrade: the entry is of a command type newer than this build; a build
	// that applies it resumes from it.
	HaltNeedsUpgrade HaltReason = "needs_upgrade"
	// HaltUndecodable: the entry is empty or its payload cannot be decoded (a corrupt log,
	// or an encoding of a newer build).
	HaltUndecodable HaltReason = "undecodable_entry"
)

// Halt is the committed entry a state machine cannot apply. Nothing after it is applied
// until the process restarts; it is also the error the decoding of that entry returns.
type Halt struct {
	// Index is the entry's index; Type its command type (0 for an empty entry).
	Index uint64
	Type  MessageType
	// Reason is why it cannot be applied; Err the decoding error, if any.
	Reason HaltReason
	Err    error
	// Newest is the newest command type this build applies.
	Newest MessageType
}

func (h *Halt) Error() string {
	switch h.Reason {
	case HaltNeedsUpgrade:
		return fmt.Sprintf("needs upgrade: committed entry %d is a %s command (type %d), which this build (%s, newest command type %d) cannot apply",
			h.Index, h.Type, uint8(h.Type&^IgnoreUnknownFlag), buildinfo.Get().Version, h.Newest)
	default:
		return fmt.Sprintf("committed entry %d (%s) cannot be decoded by this build (%s): %v",
			h.Index, h.Type, buildinfo.Get().Version, h.Err)
	}
}

func (h *Halt) Unwrap() error { return h.Err }

// Halted returns the entry this state machine stopped at, or nil. Once set it stays set
// until the process restarts.
func (f *FSM) Halted() *Halt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.halt
}

// setHalt records h and logs it once, loudly.
func (f *FSM) setHalt(h *Halt) {
	h.Newest = f.newest
	f.mu.Lock()
	first := f.halt == nil
	if first {
		f.halt = h
	}
	f.mu.Unlock()
	if !first {
		return
	}
	switch h.Reason {
	case HaltNeedsUpgrade:
		f.logger.Error("applying stopped: a committed entry needs a newer Roster; this node keeps its data as it is, serves no reads and reports needs_upgrade until it is restarted on a release that applies the entry",
			"index", h.Index, "type", h.Type.String(), "type_number", uint8(h.Type&^IgnoreUnknownFlag),
			"newest_type", uint8(f.newest), "version", buildinfo.Get().Version)
	default:
		f.logger.Error("applying stopped: a committed entry cannot be decoded; this node keeps its data as it is and serves no reads",
			"index", h.Index, "type", h.Type.String(), "error", h.Err, "version", buildinfo.Get().Version)
	}
}

// stopped reports whether Stop was called.
func (f *FSM) stopped() bool {
	select {
	case <-f.stop:
		return true
	default:
		return false
	}
}
