package registry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/prom"
	"github.com/rosterhq/roster/model"
)

// Forwarding. A write that reaches a node which is not the leader is handed to the
// leader here, typed: the registry encodes the write once, in the state machine's
// encoding (the command, wrapped in a CAS command when conditional), and sends it with
// the caller's token and request id over the servers' peer RPC (Peer; package peerrpc on
// the Raft port, under the cluster's mutual TLS). The leader's registry authenticates
// the token again and admits the write as if it had arrived there (ServeForwarded): the
// follower decides nothing, so there is no confused deputy, and the rules of admission
// are the leader's. The surfaces only translate: none of them sends anything to the
// leader itself.
//
// A forward that never reached a leader — none known, the leader's port refused the
// connection, or the leader answered that it no longer leads — was not applied: it
// waits for the next leader, up to LeaderHold, and is sent again. One that may have
// reached the leader and got no answer has an unknown outcome (ErrTimeout, or
// ErrUnavailable) and is never sent twice.

// Errors of the one vocabulary every surface renders: model's outcomes, which the
// consensus layer's and the store's errors wrap, and the transport's two of its own.
var (
	// ErrNotLeader: the write must be applied by the leader and this node is not it;
	// nothing was written.
	ErrNotLeader = model.ErrNotLeader
	// ErrNoLeader: no leader could be reached within the leader hold; nothing was
	// written (errors that wrap it also wrap ErrNotLeader).
	ErrNoLeader = model.ErrNoLeader
	// ErrNotSent marks a peer RPC that reached no leader (Peer.Forward): nothing was
	// applied, so it may be sent again.
	ErrNotSent = errors.New("not sent")
	// ErrLegacyLeader marks a leader of a release without the peer RPC (nothing was
	// sent): the surface hands the request over its own way during the rolling upgrade.
	ErrLegacyLeader = errors.New("the leader runs a release without the peer RPC")
	// ErrUnavailable: the write reached the leader, or may have, and no answer came:
	// its outcome is unknown (the consensus layer's lost leadership and shutdown are
	// cases of it).
	ErrUnavailable = model.ErrUnavailable
	// ErrTimeout: the write did not finish before its deadline; one that was handed to
	// the consensus layer may still be committed.
	ErrTimeout = model.ErrTimeout
)

// Forwarded is a write handed over by another server.
type Forwarded struct {
	// Command is the write in the state machine's encoding (fsm.Encode).
	Command []byte
	// Secret is the token the caller presented ("" for none, or with ACLs off).
	Secret string
	// RequestID is the caller's request id (for the logs of both nodes).
	RequestID string
	// From is the id of the server that forwards it.
	From string
}

// Peer carries forwarded writes and read-index requests to the leader (the server wires
// peerrpc).
type Peer interface {
	// Leader returns the id of the leader this node knows, ok false when it knows none.
	Leader() (id string, ok bool)
	// Forward sends f to the leader id and returns the index or the error its registry
	// answered (rebuilt so that errors.Is and errors.As see what the leader saw). An
	// error wrapping ErrNotSent reached no leader; one wrapping ErrLegacyLeader says the
	// leader cannot take it (nothing sent); any other error of the transport has an
	// unknown outcome.
	Forward(ctx context.Context, leader string, f Forwarded) (uint64, error)
	// ReadIndex asks the leader id for the index this node must have applied for a read
	// of its own state to be as consistent as mode (Linearizable: the leader confirmed
	// its leadership with a quorum after the request arrived; Leader: the leader's
	// state). Errors are classified as Forward's, but a read may always be asked again.
	ReadIndex(ctx context.Context, leader string, mode Consistency) (uint64, error)
}

// FollowerReads is what a registry with a Peer needs of the consensus layer besides
// Raft, to serve consistent reads on a follower (*raftnode.Node implements it).
type FollowerReads interface {
	// ReadIndex, on the leader, returns the index a read elsewhere must have applied:
	// confirmed with a quorum when linearizable, the leader's committed state otherwise.
	ReadIndex(ctx context.Context, linearizable bool) (uint64, error)
	// CatchUp returns once this node has applied every entry up to min.
	CatchUp(ctx context.Context, min uint64) error
}

// forwardPoll is how often a forward waiting for a leader checks for one.
const forwardPoll = 10 * time.Millisecond

// DefaultLeaderHold bounds how long a write waits for a leader to send it to.
const DefaultLeaderHold = 5 * time.Second

// forwardedKey carries the forwardedWrite a leader serves for another server.
type forwardedKey struct{}

// requestIDKey carries the request id of the caller (WithRequestID).
type requestIDKey struct{}

// WithRequestID returns ctx carrying the caller's request id, which a forwarded write
// takes to the leader.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id ctx carries ("" when none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// forwardMetrics counts forwarded writes.
type forwardMetrics struct {
	sent     *prometheus.CounterVec // by result, on the forwarding node
	served   *prometheus.CounterVec // by result, on the leader
	attempts prometheus.Counter
	moved    prometheus.Counter     // local writes refused as not-leader, then forwarded
	reads    *prometheus.CounterVec // read indexes asked, by result, on a follower
	readsSrv *prometheus.CounterVec // read indexes answered, by result, on the leader
}

func newForwardMetrics(reg prometheus.Registerer) (*forwardMetrics, error) {
	m := &forwardMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_registry_forwarded_total",
			Help: "Writes this node handed to the leader over the peer RPC, by result: ok (the leader answered, success or refusal), not_sent (no leader reached within the hold), legacy (a leader of an older release: handed over by the surface), unknown (no answer: outcome unknown).",
		}, []string{"result"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roster_registry_forwards_served_total",
			Help: "Writes other servers handed to this node as leader, by result: ok, refused (an error answered), bad (undecodable).",
		}, []string{"result"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roster_registry_forward_attempts_total",
			Help: "Peer RPC calls made to hand writes to the leader (more than roster_registry_forwarded_total when a write waited for a new leader).",
		}),
	}
	m.moved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "roster_registry_leader_moved_total",
		Help: "Writes this node began to apply as leader and handed to the new leader, because leadership moved before their entry was appended (nothing written).",
	})
	m.reads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "roster_registry_read_index_total",
		Help: "Consistent reads this node served from its own state after asking the leader for a read index, by result: ok, no_leader (none reached within the hold), legacy (a leader of an older release: the surface forwards the read), error (the leader refused, or this node did not catch up in time).",
	}, []string{"result"})
	m.readsSrv = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "roster_registry_read_index_served_total",
		Help: "Read indexes this node answered other servers as leader, by result: ok, refused.",
	}, []string{"result"})
	g := prom.On(reg)
	prom.Add(g, &m.sent, &m.served, &m.reads, &m.readsSrv)
	prom.Add(g, &m.attempts, &m.moved)
	if err := g.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// forward hands cmd to the leader when this node is not it and a Peer is configured:
// handled is false when the caller must go on locally (this node leads, or became the
// leader while the write waited, or the write is one the leader is serving for
// another node).
func (r *Registry) forward(ctx context.Context, cmd fsm.Command) (idx uint64, handled bool, err error) {
	if !r.forwards(ctx) {
		return 0, false, nil
	}
	data, err := fsm.Encode(cmd)
	if err != nil {
		return 0, true, fmt.Errorf("registry: encode command %s: %w", cmd.MessageType(), err)
	}
	f := Forwarded{Command: data, RequestID: RequestID(ctx), From: r.nodeID}
	if a := acl.FromContext(ctx); a != nil {
		f.Secret = a.Secret()
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout+r.leaderHold)
	defer cancel()
	var answer error
	local, why, last := r.untilLeader(ctx, !refusedHere(ctx), func(id string) (bool, error) {
		r.fwdMet.attempts.Inc()
		r.log.DebugContext(ctx, "handing the write to the leader", "leader", id, "command", cmd.MessageType().String())
		idx, answer = r.peer.Forward(ctx, id, f)
		switch err := answer; {
		case errors.Is(err, ErrLegacyLeader):
			r.fwdMet.sent.WithLabelValues("legacy").Inc()
		case errors.Is(err, ErrNotSent), isNotLeaderAnswer(err):
			return true, err // nothing applied: wait for the next leader
		case err != nil && !isAnswer(err):
			r.fwdMet.sent.WithLabelValues("unknown").Inc()
		default:
			r.fwdMet.sent.WithLabelValues("ok").Inc()
			if err == nil {
				r.noteForwarded(idx)
			}
		}
		return false, nil
	})
	switch {
	case local:
		return 0, false, nil
	case why != nil:
		r.fwdMet.sent.WithLabelValues("not_sent").Inc()
		return 0, true, noLeaderErr(last, why)
	}
	return idx, true, answer
}

// untilLeader calls try with the id of the leader this node knows, whenever it knows
// one other than itself, polling every forwardPoll, until try is done (again false:
// its outcome is the caller's), this node leads (local: the caller goes on here; only
// when allowLocal), or the leader hold or ctx ends: why then says so, and last is the
// error of the last try, which asked to try again. Writes and reads that need the
// leader wait for it here alike.
func (r *Registry) untilLeader(ctx context.Context, allowLocal bool, try func(id string) (again bool, err error)) (local bool, why, last error) {
	hold := time.NewTimer(r.leaderHold)
	defer hold.Stop()
	for {
		if allowLocal && r.raft.IsLeader() {
			return true, nil, nil
		}
		if id, ok := r.peer.Leader(); ok && id != r.nodeID {
			again, err := try(id)
			if !again {
				return false, nil, nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err(), last
		case <-hold.C:
			return false, fmt.Errorf("none reached within %s", r.leaderHold), last
		case <-time.After(forwardPoll):
		}
	}
}

// noLeaderErr is the error of a write that reached no leader: not applied.
func noLeaderErr(last, why error) error {
	if last != nil {
		return fmt.Errorf("%w: %v, so the write was not sent (not applied); last attempt: %w", ErrNoLeader, why, last)
	}
	return fmt.Errorf("%w: %v, so the write was not sent (not applied)", ErrNoLeader, why)
}

// Answered marks an error that is the leader's answer (Peer implementations wrap what
// the leader's registry returned in it), as opposed to a failure of the transport.
type Answered struct{ Err error }

func (a *Answered) Error() string { return a.Err.Error() }

// Unwrap returns the leader's error.
func (a *Answered) Unwrap() error { return a.Err }

func isAnswer(err error) bool {
	var a *Answered
	return errors.As(err, &a)
}

// isNotLeaderAnswer reports whether the leader answered that it no longer leads (before
// it applied anything).
func isNotLeaderAnswer(err error) bool { return isAnswer(err) && errors.Is(err, ErrNotLeader) }

// ServeForwarded serves a write another server handed to this node as leader: it
// authenticates the caller's token, decodes the write and runs it as this node's own
// surface would, with the same checks and admission; the answer is the write's index
// or its error.
func (r *Registry) ServeForwarded(ctx context.Context, f Forwarded) (uint64, error) {
	idx, err := r.serveForwarded(ctx, f)
	switch {
	case err == nil:
		r.fwdMet.served.WithLabelValues("ok").Inc()
	case errors.Is(err, errBadForward):
		r.fwdMet.served.WithLabelValues("bad").Inc()
	default:
		r.fwdMet.served.WithLabelValues("refused").Inc()
	}
	return idx, err
}

// errBadForward refuses a forwarded write this release cannot read (a 400: nothing written).
var errBadForward = fmt.Errorf("%w: bad forwarded write", model.ErrInvalid)

func (r *Registry) serveForwarded(ctx context.Context, f Forwarded) (uint64, error) {
	if !r.raft.IsLeader() {
		return 0, fmt.Errorf("%w: %s does not lead (any more)", ErrNotLeader, r.nodeID)
	}
	if r.aclOn || f.Secret != "" {
		a, err := r.Authenticate(f.Secret)
		if err != nil {
			return 0, err
		}
		ctx = acl.WithAuthorizer(ctx, a)
	}
	sent, write, cond, err := decodeForwarded(f.Command)
	if err != nil {
		return 0, err
	}
	ctx = context.WithValue(ctx, forwardedKey{}, forwardedWrite{cmd: sent, data: f.Command})
	if f.RequestID != "" {
		ctx = WithRequestID(ctx, f.RequestID)
	}
	switch c := write.(type) {
	case fsm.RegisterInstanceRequest:
		return r.RegisterInstance(ctx, c.Instance, cond)
	case fsm.UpdateInstanceRequest:
		return r.UpdateInstance(ctx, c.Ref, c.Patch, cond)
	case fsm.DeregisterInstanceRequest:
		return r.DeregisterInstance(ctx, c.Ref, cond)
	case fsm.SetHealthManualRequest:
		return r.SetInstanceHealth(ctx, c.Ref, c.Healthy)
	case fsm.UpsertServiceRequest:
		return r.UpsertService(ctx, c.Service, cond)
	case fsm.DeleteServiceRequest:
		return r.DeleteService(ctx, c.Key, cond)
	case fsm.UpsertClusterRequest:
		return r.UpsertCluster(ctx, c.Cluster, cond)
	case fsm.UpsertNamespaceRequest:
		return r.UpsertNamespace(ctx, c.Namespace)
	case fsm.DeleteNamespaceRequest:
		return r.DeleteNamespace(ctx, c.ID)
	case fsm.UpdateSettingsRequest:
		return r.UpdateSettings(ctx, c.Settings)
	case fsm.CreateTokenRequest:
		return r.createToken(ctx, c.Token)
	case fsm.DeleteTokenRequest:
		return r.deleteToken(ctx, c.AccessorID)
	default:
		return 0, fmt.Errorf("%w: %s is not a write a server forwards", errBadForward, write.MessageType())
	}
}

// forwardable are the writes a server forwards (forward's callers), by type. A leader
// answers a type missing here as a bad forward (400, nothing written): a type added
// here later must be forwarded only to leaders whose build serves it (gated like a new
// command type), or the follower's surface must hand it over its own way.
var forwardable = map[fsm.MessageType]fsm.Command{
	fsm.RegisterInstanceType:   fsm.RegisterInstanceRequest{},
	fsm.UpdateInstanceType:     fsm.UpdateInstanceRequest{},
	fsm.DeregisterInstanceType: fsm.DeregisterInstanceRequest{},
	fsm.SetHealthManualType:    fsm.SetHealthManualRequest{},
	fsm.UpsertServiceType:      fsm.UpsertServiceRequest{},
	fsm.DeleteServiceType:      fsm.DeleteServiceRequest{},
	fsm.UpsertClusterType:      fsm.UpsertClusterRequest{},
	fsm.UpsertNamespaceType:    fsm.UpsertNamespaceRequest{},
	fsm.DeleteNamespaceType:    fsm.DeleteNamespaceRequest{},
	fsm.UpdateSettingsType:     fsm.UpdateSettingsRequest{},
	fsm.CreateTokenType:        fsm.CreateTokenRequest{},
	fsm.DeleteTokenType:        fsm.DeleteTokenRequest{},
}

// decodeForwarded decodes a forwarded write once: the command as sent (sent: the CAS
// command of a conditional write), the write it carries and its condition.
func decodeForwarded(data []byte) (sent, write fsm.Command, cond Condition, err error) {
	if len(data) == 0 {
		return nil, nil, cond, fmt.Errorf("%w: no command", errBadForward)
	}
	t, payload := fsm.MessageType(data[0]), data[1:]
	if t == fsm.CASType {
		var c fsm.CASRequest
		if err := fsm.Decode(payload, &c); err != nil {
			return nil, nil, cond, fmt.Errorf("%w: %v", errBadForward, err)
		}
		sent, cond, t, payload = c, Condition{set: true, onService: c.OnService, index: c.Index}, c.Type, c.Payload
	}
	proto, ok := forwardable[t]
	if !ok {
		return nil, nil, cond, fmt.Errorf("%w: %s is not a write a server forwards", errBadForward, t)
	}
	if _, conditional := proto.(fsm.Conditional); cond.set && !conditional {
		return nil, nil, cond, fmt.Errorf("%w: %s cannot be conditional", errBadForward, t)
	}
	v := reflect.New(reflect.TypeOf(proto))
	if err := fsm.Decode(payload, v.Interface()); err != nil {
		return nil, nil, cond, fmt.Errorf("%w: %s: %v", errBadForward, t, err)
	}
	write = v.Elem().Interface().(fsm.Command)
	if sent == nil {
		sent = write
	}
	return sent, write, cond, nil
}

// conditional is cmd wrapped in a CAS command when cond is set: the form a write is
// forwarded and applied in.
func conditional(cmd fsm.Conditional, cond Condition) (fsm.Command, error) {
	if !cond.set {
		return cmd, nil
	}
	return fsm.NewCAS(cond.index, cond.onService, cmd)
}

// forwards reports whether a write in ctx goes to the leader: this node has a Peer,
// does not lead (or refused the write as not-leader while it still holds leadership:
// stopping, it hands leadership over), and is not serving the write for another server.
func (r *Registry) forwards(ctx context.Context) bool {
	return r.peer != nil && ctx.Value(forwardedKey{}) == nil && (refusedHere(ctx) || !r.raft.IsLeader())
}

// refusedHereKey marks a write this node refused as not-leader: it goes to another
// server, whatever this node's Raft says.
type refusedHereKey struct{}

func refusedHere(ctx context.Context) bool { return ctx.Value(refusedHereKey{}) != nil }

// forwardWrite is forward of cmd, made conditional on cond.
func (r *Registry) forwardWrite(ctx context.Context, cmd fsm.Conditional, cond Condition) (uint64, bool, error) {
	if !r.forwards(ctx) {
		return 0, false, nil
	}
	c, err := conditional(cmd, cond)
	if err != nil {
		return 0, true, err
	}
	return r.forward(ctx, c)
}

// forwardedWrite is a forwarded write as it arrived: decoded, and its bytes.
type forwardedWrite struct {
	cmd  fsm.Command
	data []byte
}

// forwardedEncoding returns the bytes a forwarded write arrived in when cmd, the command
// its admission built, is that write unchanged: the entry is then the forwarding node's
// encoding, and the write is encoded once on its whole way.
func forwardedEncoding(ctx context.Context, cmd fsm.Command) ([]byte, bool) {
	w, ok := ctx.Value(forwardedKey{}).(forwardedWrite)
	if !ok || !reflect.DeepEqual(w.cmd, cmd) {
		return nil, false
	}
	return w.data, true
}

// noteForwarded records the index of a write the leader acknowledged (LastForwarded).
func (r *Registry) noteForwarded(idx uint64) {
	for {
		cur := r.lastForwarded.Load()
		if idx <= cur || r.lastForwarded.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// LastForwarded is the highest index of a write this node handed to the leader and saw
// acknowledged: once this node has applied it, a read here sees every write made
// through this node.
func (r *Registry) LastForwarded() uint64 { return r.lastForwarded.Load() }

// readsAtLeader reports whether a consistent read here asks the leader for a read index:
// this node has a Peer and does not lead.
func (r *Registry) readsAtLeader() bool { return r.peer != nil && r.reads != nil && !r.raft.IsLeader() }

// followerRead makes this follower's state safe to read in mode: it asks the leader for
// a read index (waiting for a leader within the hold, as a write does) and waits until
// this node has applied it. A leader of an older release cannot answer: the error then
// wraps ErrLegacyLeader and ErrNotLeader, and the surface sends the read to the leader
// its own way. If this node becomes the leader meanwhile, the read is checked here.
func (r *Registry) followerRead(ctx context.Context, mode Consistency) error {
	var answer error
	local, why, last := r.untilLeader(ctx, true, func(id string) (bool, error) {
		idx, err := r.peer.ReadIndex(ctx, id, mode)
		switch {
		case err == nil:
			if answer = r.reads.CatchUp(ctx, idx); answer != nil {
				r.fwdMet.reads.WithLabelValues("error").Inc()
				return false, nil
			}
			r.fwdMet.reads.WithLabelValues("ok").Inc()
		case errors.Is(err, ErrLegacyLeader):
			r.fwdMet.reads.WithLabelValues("legacy").Inc()
			answer = fmt.Errorf("%w: %w", ErrNotLeader, err)
		case isAnswer(err) && !errors.Is(err, ErrNotLeader):
			r.fwdMet.reads.WithLabelValues("error").Inc()
			answer = err // the leader could not confirm: its error, as a local read's
		default:
			return true, err // not sent, not leading any more, or no answer: ask again
		}
		return false, nil
	})
	switch {
	case local:
		return r.localConsistency(ctx, mode)
	case why != nil:
		r.fwdMet.reads.WithLabelValues("no_leader").Inc()
		return noLeaderReadErr(last, why)
	}
	return answer
}

func noLeaderReadErr(last, why error) error {
	if last != nil {
		return fmt.Errorf("%w: %v, so a consistent read cannot be served; last attempt: %w", ErrNoLeader, why, last)
	}
	return fmt.Errorf("%w: %v, so a consistent read cannot be served", ErrNoLeader, why)
}

// ServeReadIndex answers, as leader, the index a read on another server must have
// applied to be as consistent as mode. The index reveals nothing of the data, and the
// caller checked the reader's permission before it asked.
func (r *Registry) ServeReadIndex(ctx context.Context, mode Consistency) (uint64, error) {
	idx, err := r.serveReadIndex(ctx, mode)
	if err != nil {
		r.fwdMet.readsSrv.WithLabelValues("refused").Inc()
	} else {
		r.fwdMet.readsSrv.WithLabelValues("ok").Inc()
	}
	return idx, err
}

func (r *Registry) serveReadIndex(ctx context.Context, mode Consistency) (uint64, error) {
	if !r.raft.IsLeader() {
		return 0, fmt.Errorf("%w: %s does not lead (any more)", ErrNotLeader, r.nodeID)
	}
	if r.reads == nil {
		return 0, fmt.Errorf("%w: this server serves no read indexes", model.ErrInvalid)
	}
	switch mode {
	case Linearizable, "":
		return r.reads.ReadIndex(ctx, true)
	case Leader:
		return r.reads.ReadIndex(ctx, false)
	default:
		return 0, model.Invalid("consistency", "a read index is for %q or %q reads, not %q", Linearizable, Leader, mode)
	}
}
