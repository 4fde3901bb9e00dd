package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
)

// commandsCheckInterval is how long the computed newest type of all servers is reused.
const commandsCheckInterval = time.Second

// ErrUpgradeRequired refuses a write that some server of the cluster cannot apply, in
// any encoding, while a rolling upgrade is under way: nothing was written. Errors that
// wrap it are *UpgradeRequiredError.
var ErrUpgradeRequired = model.ErrUpgradeRequired

// ServerBuild is what a server says of its build: the release version and commit (empty
// for releases before servers reported them) and the newest command type it applies.
type ServerBuild struct {
	ID      string
	Version string
	Commit  string
	// NewestCommand is the newest command type the server applies: what it announced,
	// else what its member record says, else fsm.LegacyNewestType.
	NewestCommand uint8
	// Announced says whether the server announced its build to this node while it leads
	// (always true for this node itself).
	Announced bool
	// Unrecorded says the server has no member record (it never announced itself).
	Unrecorded bool
}

// Release describes the server's release for people: its version, or for a server that
// reports none what its newest command type tells.
func (b ServerBuild) Release() string {
	switch {
	case b.Version != "":
		return b.Version
	case fsm.MessageType(b.NewestCommand) < fsm.FirstAnnouncedType:
		return "a release before v0.2.0"
	default:
		return "a release before v0.3.0"
	}
}

// UpgradeRequiredError names the command that was refused and the servers that cannot
// apply it.
type UpgradeRequiredError struct {
	// Command is the refused command's type (0 for a snapshot restore); Required the
	// newest type a server must apply for it.
	Command  fsm.MessageType
	Required fsm.MessageType
	// Servers are the servers whose newest type is older than Required.
	Servers []ServerBuild
}

func (e *UpgradeRequiredError) Error() string {
	parts := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		parts[i] = fmt.Sprintf("%s runs %s (newest command type %d)", s.ID, s.Release(), s.NewestCommand)
	}
	what := fmt.Sprintf("%s (command type %d)", e.Command, uint8(e.Required))
	if e.Command == 0 {
		what = "a snapshot restore (a state this release wrote, which may hold what older ones do not know)"
	}
	them := "it"
	if len(e.Servers) > 1 {
		them = "them"
	}
	return fmt.Sprintf("upgrade in progress: %s and cannot apply %s; upgrade %s first", strings.Join(parts, ", "), what, them)
}

// Is makes errors.Is(err, ErrUpgradeRequired) true.
func (e *UpgradeRequiredError) Is(target error) bool { return target == ErrUpgradeRequired }

// commandGate tracks which command types every server applies. The leader learns each
// server's build from its announcements (Join), which every server sends once to each
// new leader; the member records keep the newest types across leaders once every
// server stores them (syncMembers).
type commandGate struct {
	mu sync.Mutex
	// announced is what servers announced to this node while it led, by id; it is
	// cleared when a leadership begins.
	announced map[string]ServerBuild
	checked   time.Time
	newest    uint8
}

// noteAnnouncement records what server b.ID announced to this leader.
func (g *commandGate) noteAnnouncement(b ServerBuild) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.announced == nil {
		g.announced = map[string]ServerBuild{}
	}
	if b.NewestCommand == 0 {
		b.NewestCommand = uint8(fsm.LegacyNewestType)
	}
	g.announced[b.ID] = b
	g.checked = time.Time{}
}

// forget drops the announcements (a new leadership starts from the member records).
func (g *commandGate) forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.announced, g.checked = nil, time.Time{}
}

// ServersApply reports whether every server of the latest configuration, voters and
// non-voters, applies command type t: the leader keeps to the types every server
// applies during a rolling upgrade (see Prepare). A server counts as applying what it
// announced to this leader, else what its member record says; a record without a newest
// type (written by or for a release before servers announced it) counts as
// fsm.LegacyNewestType, and a server without a record (one that never could announce
// itself: ACLs without TLS or a join token) as running this node's release — after the
// first seconds of a leadership (announceGrace), in which servers announce themselves.
// The answer is recomputed at most once a second and
// whenever a server announces itself. A server that joins later must be at least as
// new as the log it replicates.
func (n *Node) ServersApply(t fsm.MessageType) bool {
	return n.newestCommandOfAll() >= uint8(t)
}

func (n *Node) newestCommandOfAll() uint8 {
	g := &n.commands
	g.mu.Lock()
	if !g.checked.IsZero() && time.Since(g.checked) < commandsCheckInterval {
		defer g.mu.Unlock()
		return g.newest
	}
	g.mu.Unlock()
	newest, pending := n.newestOfAllNow()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.newest, g.checked = newest, time.Now()
	if pending {
		// A server may announce itself any moment (the first seconds of a leadership):
		// an answer that counts it as old must not outlive them.
		g.checked = time.Time{}
	}
	return newest
}

// newestOfAllNow computes what newestCommandOfAll caches, and whether a server counted
// is pending: unrecorded in the first seconds of a leadership.
func (n *Node) newestOfAllNow() (newest uint8, pending bool) {
	newest = n.newestOf(func(b ServerBuild) bool {
		if b.Unrecorded && !b.Announced && b.NewestCommand < uint8(n.sm.NewestType()) {
			pending = true
		}
		return true
	})
	return newest, pending
}

// invalidate drops the cached newest type of all servers.
func (g *commandGate) invalidate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.checked = time.Time{}
}

// newestCommandOfRecorded is the newest command type every server with a member record
// applies (this node's own newest when none is recorded).
func (n *Node) newestCommandOfRecorded() uint8 {
	return n.newestOf(func(b ServerBuild) bool { return !b.Unrecorded })
}

// newestOf is the newest command type this node and every server include selects
// apply; 0 when the configuration cannot be read.
func (n *Node) newestOf(include func(ServerBuild) bool) uint8 {
	builds, err := n.ServerBuilds()
	if err != nil {
		return 0
	}
	newest := uint8(n.sm.NewestType())
	for _, b := range builds {
		if include(b) {
			newest = min(newest, b.NewestCommand)
		}
	}
	return newest
}

// ServerBuilds returns the build of every server of the latest configuration, sorted by
// id: this node's own, and for the others what they announced to this node while it
// leads, completed from their member records.
func (n *Node) ServerBuilds() ([]ServerBuild, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.mapRaftErr(err)
	}
	n.commands.mu.Lock()
	announced := make(map[string]ServerBuild, len(n.commands.announced))
	for id, b := range n.commands.announced {
		announced[id] = b
	}
	n.commands.mu.Unlock()
	servers := f.Configuration().Servers
	out := make([]ServerBuild, 0, len(servers))
	inGrace := n.IsLeader() && time.Since(n.leadingSince()) < announceGrace
	for _, s := range servers {
		id := string(s.ID)
		if id == n.cfg.NodeID {
			out = append(out, n.ownBuild())
			continue
		}
		b := ServerBuild{ID: id, NewestCommand: uint8(fsm.LegacyNewestType)}
		switch rec, ok := n.member(id); {
		case !ok && inGrace:
			b.Unrecorded = true // it may yet announce itself: count it as old until then
		case !ok:
			// Every release records its servers (a server's first announcement, or its
			// join, writes its record): one without a record after the first seconds of
			// a leadership has never been able to announce itself — a cluster with ACLs
			// but neither TLS nor a join token — and is taken to run this node's release.
			b.NewestCommand, b.Unrecorded = uint8(n.sm.NewestType()), true
		case rec.NewestCommand != 0:
			b.NewestCommand = rec.NewestCommand
		}
		if a, ok := announced[id]; ok {
			b.Version, b.Commit, b.Announced = a.Version, a.Commit, true
			b.NewestCommand = max(b.NewestCommand, a.NewestCommand)
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ownBuild is this node's build.
func (n *Node) ownBuild() ServerBuild {
	return ServerBuild{ID: n.cfg.NodeID, Version: n.cfg.Build.Version, Commit: n.cfg.Build.Commit,
		NewestCommand: uint8(n.sm.NewestType()), Announced: true}
}

// LeaderLacks returns an *UpgradeRequiredError naming the leader when it is another
// server known, by its member record, to apply command types older than t only: a
// follower refuses a request for such a command instead of forwarding it to a leader
// that may ignore what it does not understand (a release before conditional writes
// would apply a ?cas= write unconditionally). It returns nil otherwise.
func (n *Node) LeaderLacks(t fsm.MessageType) error {
	_, id := n.raft.LeaderWithID()
	if id == "" || string(id) == n.cfg.NodeID {
		return nil
	}
	builds, err := n.ServerBuilds()
	if err != nil {
		return nil
	}
	for _, b := range builds {
		if b.ID == string(id) && b.NewestCommand < uint8(t) {
			return &UpgradeRequiredError{Command: t, Required: t, Servers: []ServerBuild{b}}
		}
	}
	return nil
}

// announceGrace is how long after a leadership begins a server that has not announced
// itself yet may still do so: every server announces itself to each new leader within
// registrarInterval of learning of it, so a server silent for announceGrace runs a
// release before announcements (its record says which) or is down.
const announceGrace = 2 * time.Second

// Prepare returns cmd as every server of the cluster applies it (fsm.ForServers: the
// command itself, or an older encoding with the same effect), or an
// *UpgradeRequiredError naming the servers that cannot apply it in any encoding. While a
// server lacking the type has not announced itself to this leadership yet (the first
// seconds of a leadership, or of a new cluster), Prepare waits for its announcement,
// bounded by ctx and announceGrace. Propose prepares every command it writes; a caller
// that encodes commands ahead (the elements of a BatchRequest) prepares them itself.
func (n *Node) Prepare(ctx context.Context, cmd fsm.Command) (fsm.Command, error) {
	var out fsm.Command
	err := n.whileAnnouncing(ctx, func() (err error) {
		out, err = n.prepareOnce(cmd)
		return err
	})
	return out, err
}

// requireServersApply returns nil once every server applies type t, or the
// *UpgradeRequiredError (a nil what: a snapshot restore) — waiting, like Prepare, for
// servers that may still announce themselves.
func (n *Node) requireServersApply(ctx context.Context, t fsm.MessageType) error {
	return n.whileAnnouncing(ctx, func() error {
		if n.ServersApply(t) {
			return nil
		}
		return n.upgradeErr(nil, t)
	})
}

// whileAnnouncing runs check until it succeeds, fails otherwise than for a server that
// has not announced itself to this leadership yet, or announceGrace (or ctx) runs out;
// it returns check's last answer.
func (n *Node) whileAnnouncing(ctx context.Context, check func() error) error {
	for stale, last := false, false; ; {
		err := check()
		var up *UpgradeRequiredError
		if errors.As(err, &up) && len(up.Servers) == 0 && !stale {
			// The cached answer is older than the servers' builds (one announced
			// itself or was upgraded within the last second): decide again from what
			// they say now.
			stale = true
			n.commands.invalidate()
			continue
		}
		if err == nil || !errors.As(err, &up) || !up.pending() {
			return err
		}
		left := time.Until(n.leadingSince().Add(announceGrace))
		if !n.IsLeader() {
			return err
		}
		if left <= 0 {
			if last {
				return err
			}
			// The grace ended between the check and now: a server still unrecorded
			// no longer counts as old (ServerBuilds), so decide once more.
			last = true
			n.commands.invalidate()
			continue
		}
		t := time.NewTimer(min(left, 50*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-n.ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		n.commands.invalidate() // recompute: the answer is cached for a second
	}
}

func (n *Node) prepareOnce(cmd fsm.Command) (fsm.Command, error) {
	if _, ok := cmd.(fsm.BatchRequest); ok {
		if !n.ServersApply(fsm.BatchType) {
			return nil, n.upgradeErr(cmd, fsm.BatchType)
		}
		return cmd, nil
	}
	newest := n.newestCommandOfAll()
	if _, ok := cmd.(fsm.UpsertMemberRequest); ok {
		// A member record keeps its newest type unless a recorded server of a release
		// before v0.2.0 would store it without: a server not recorded yet (a new
		// cluster's first seconds) does not count, or the records a new cluster writes at
		// once would lose their types and followers would take their leader for a
		// release before v0.2.0. A v0.1.x server recorded later gets the records
		// rewritten without the types (syncMembers).
		newest = n.newestCommandOfRecorded()
	}
	out, err := fsm.ForServers(cmd, fsm.MessageType(newest))
	if err != nil {
		return nil, n.upgradeErr(cmd, fsm.Required(cmd))
	}
	return out, nil
}

// upgradeErr is the *UpgradeRequiredError for cmd, which needs type required.
// A nil cmd is a snapshot restore.
func (n *Node) upgradeErr(cmd fsm.Command, required fsm.MessageType) error {
	e := &UpgradeRequiredError{Required: required}
	if cmd != nil {
		e.Command = cmd.MessageType()
	}
	builds, err := n.ServerBuilds()
	if err != nil {
		return fmt.Errorf("%w: every server must apply command type %d: %w", ErrUpgradeRequired, uint8(required), err)
	}
	for _, b := range builds {
		if b.NewestCommand < uint8(required) {
			e.Servers = append(e.Servers, b)
		}
	}
	return e
}

// pending reports whether a server the error names has not announced itself to this
// leadership (it may apply the command after all).
func (e *UpgradeRequiredError) pending() bool {
	for _, s := range e.Servers {
		if !s.Announced {
			return true
		}
	}
	return false
}

// syncInterval is how often the leader brings the member records' newest types in line
// with what the servers announced.
const syncInterval = time.Second

// syncMembers runs on the leader: it keeps every server's member record carrying the
// newest type the server announced, in the encoding every server stores alike (without
// it while a server of the first releases remains, which would drop the field and so
// store other bytes). Once the last such server is upgraded the records are rewritten
// with the types, so the next leader knows them without waiting for announcements.
func (n *Node) syncMembers(ctx context.Context) {
	for sleepCtx(ctx, syncInterval) {
		builds, err := n.ServerBuilds()
		if err != nil {
			continue
		}
		for _, b := range builds {
			rec, ok := n.member(b.ID)
			if !ok {
				continue // a server records its addresses by joining or announcing itself
			}
			want := rec
			want.NewestCommand = b.NewestCommand
			if b.NewestCommand <= uint8(fsm.LegacyNewestType) {
				want.NewestCommand = 0
			}
			cmd, err := n.prepareOnce(fsm.UpsertMemberRequest{Member: want})
			if err != nil || cmd.(fsm.UpsertMemberRequest).Member == rec {
				continue
			}
			if _, err := n.Apply(ctx, cmd); err != nil && ctx.Err() == nil {
				n.log.Warn("updating a member record's newest command type failed", "id", b.ID, "error", err)
			}
		}
	}
}

// refuseLeadershipWhileHalted hands leadership over at once when this node's state
// machine halted at an entry it cannot apply (it could never serve as leader), and
// says so.
func (n *Node) refuseLeadershipWhileHalted() bool {
	h := n.halted()
	if h == nil {
		return false
	}
	n.log.Error("this node cannot lead: its state machine stopped at an entry it cannot apply; handing leadership over",
		"index", h.Index, "type", h.Type.String())
	go func() {
		if err := n.raft.LeadershipTransfer().Error(); err != nil && !errors.Is(err, raft.ErrNotLeader) {
			n.log.Warn("handing leadership over failed", "error", err)
		}
	}()
	return true
}

// halted is the entry the state machine stopped at (nil: none).
func (n *Node) halted() *fsm.Halt {
	if h, ok := n.sm.(interface{ Halted() *fsm.Halt }); ok {
		return h.Halted()
	}
	return nil
}
