package snapshot

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on the numbers of meta.json. Read refuses an archive that exceeds one of them
// before it extracts anything, and Write refuses to produce one. Each is far above
// anything a real cluster reaches, and each keeps the arithmetic done later with the
// value exact and free of overflow.
const (
	// MaxIndex bounds the Raft index an archive reflects. A restore makes it the index
	// of a Raft snapshot and appends the log after it, so Raft computes index+1,
	// index+2, ... from it for the rest of the cluster's life, and the store serves it
	// as X-Roster-Index. 2^53-1 is the largest integer a JSON number holds exactly in
	// every client (an IEEE double), and it leaves 2^63-2^53 indexes of headroom below
	// the int64 range: a cluster writing a million entries a second would take 285
	// years to reach it.
	MaxIndex = 1<<53 - 1
	// MaxRestoreIndex bounds the index of an archive a restore accepts: half of
	// MaxIndex, 2^52-1. A restore moves the cluster's log past the archive's index, and
	// the cluster's own archives must stay within MaxIndex: what remains above a
	// restored index (2^52 entries, 142 years at a million a second) is the cluster's
	// room to keep writing and saving valid archives. raftnode.RestoreState enforces it.
	MaxRestoreIndex = MaxIndex >> 1
	// MaxTerm bounds the Raft term an archive records, for the same reasons as
	// MaxIndex (a restore does not adopt the term, but it is displayed and logged).
	MaxTerm = 1<<53 - 1
	// MaxStateSize bounds the size of state.db, whatever the reader's own limit: 1 TiB,
	// a thousand times the largest state Roster is sized for. Sums of a few sizes stay
	// far from overflowing an int64.
	MaxStateSize = 1 << 40
	// MaxCount bounds each of counts.namespaces, counts.services and counts.instances:
	// 2^31-1 fits an int on every platform Go supports, and two billion instances
	// would need a state far above MaxStateSize.
	MaxCount = 1<<31 - 1
	// MaxRosterVersionLen bounds rosterVersion, in bytes. It is printed by inspect and
	// logged by a restore, so it must also be printable text.
	MaxRosterVersionLen = 128
)

// The range of createdAt: from the Unix epoch (where a machine without a clock starts)
// to the year 2262 (2262-04-11 is where time.Time.UnixNano overflows an int64).
var (
	minCreatedAt = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxCreatedAt = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// checkBounds checks the fields of m against the limits above; the message names the
// field as it appears in meta.json.
func (m Meta) checkBounds() error {
	switch {
	case m.Index > MaxIndex:
		return aboveLimit("index", m.Index, MaxIndex)
	case m.Term > MaxTerm:
		return aboveLimit("term", m.Term, MaxTerm)
	case m.Size > MaxStateSize:
		return aboveLimit("size", uint64(m.Size), MaxStateSize)
	case m.Counts.Namespaces > MaxCount:
		return aboveLimit("counts.namespaces", uint64(m.Counts.Namespaces), MaxCount)
	case m.Counts.Services > MaxCount:
		return aboveLimit("counts.services", uint64(m.Counts.Services), MaxCount)
	case m.Counts.Instances > MaxCount:
		return aboveLimit("counts.instances", uint64(m.Counts.Instances), MaxCount)
	case m.CreatedAt.Before(minCreatedAt) || !m.CreatedAt.Before(maxCreatedAt):
		return fmt.Errorf("field \"createdAt\" is %s, outside the range from %s to %s",
			m.CreatedAt.UTC().Format(time.RFC3339), minCreatedAt.Format(time.RFC3339), maxCreatedAt.Format(time.RFC3339))
	case len(m.RosterVersion) > MaxRosterVersionLen:
		return fmt.Errorf("field \"rosterVersion\" is %d bytes long, more than the limit of %d", len(m.RosterVersion), MaxRosterVersionLen)
	case !printable(m.RosterVersion):
		return fmt.Errorf("field \"rosterVersion\" holds non-printable characters: %q", m.RosterVersion)
	}
	return nil
}

func aboveLimit(field string, v, limit uint64) error {
	return fmt.Errorf("field %q is %d, above the limit of %d", field, v, limit)
}

// printable reports whether s is valid UTF-8 without control or other non-printable
// characters, so that it can be shown on a terminal as it is.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
