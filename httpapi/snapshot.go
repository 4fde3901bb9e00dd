package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/snapshot"
)

// Defaults of SnapshotConfig.
const (
	DefaultSnapshotMaxBytes      = 4 << 30
	DefaultSnapshotMaxStateBytes = 16 << 30
)

// maxRefusedDrain bounds how much of a refused upload is read and discarded before the
// answer, so that a client still sending a small archive sees the answer rather than a
// reset connection.
const maxRefusedDrain = 64 << 20

// Snapshotter is what GET and PUT /v1/snapshot need from the Raft node
// (*raftnode.Node implements it).
type Snapshotter interface {
	// SnapshotState opens a consistent view of the local state and the Raft index and
	// term it reflects.
	SnapshotState() (*raftnode.StateSnapshot, error)
	// RestoreState replaces the cluster's state with a checked state file of size
	// bytes that reflects the log up to index; leader only. It returns the index of
	// the first write after the restore.
	RestoreState(ctx context.Context, index, term uint64, r io.Reader, size int64) (uint64, error)
}

// SnapshotConfig configures GET and PUT /v1/snapshot. The zero value takes the
// defaults; Config.MaxBodyBytes does not apply to these routes.
type SnapshotConfig struct {
	// Node takes and restores snapshots; nil means Config.Node when it implements
	// Snapshotter (else both routes answer 503).
	Node Snapshotter
	// Dir receives the state.db of an uploaded archive while it is checked
	// (os.TempDir() when empty). An upload is streamed there, never held in memory, so
	// Dir belongs on a disk with room for the largest state.
	Dir string
	// MaxBytes bounds an uploaded archive (default 4 GiB); a larger one is a 413.
	MaxBytes int64
	// MaxStateBytes bounds the state.db inside an uploaded archive (default 16 GiB); a
	// larger one is a 400, refused before it is extracted.
	MaxStateBytes int64
	// RestoreTimeout bounds the Raft restore once the archive is checked; 0 means no
	// bound. A restore cannot be stopped once it began, whatever happens to the client.
	RestoreTimeout time.Duration
}

// withDefaults fills the zero fields; node is Config.Node.
func (c SnapshotConfig) withDefaults(node Consensus) (SnapshotConfig, error) {
	if c.MaxBytes < 0 || c.MaxStateBytes < 0 || c.RestoreTimeout < 0 {
		return c, errors.New("httpapi: snapshot limits and timeout must not be negative")
	}
	if c.Node == nil {
		c.Node, _ = node.(Snapshotter)
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultSnapshotMaxBytes
	}
	if c.MaxStateBytes == 0 {
		c.MaxStateBytes = DefaultSnapshotMaxStateBytes
	}
	return c, nil
}

// snapshotRoutes serves the backup archive. The routes sit outside the write group:
// bodies are streamed (to disk, for a restore), never buffered, and neither the API's
// body limit nor its request timeout applies to them.
//
//	GET /v1/snapshot  — a fresh archive from the leader (?consistency=stale: this node's state)
//	PUT /v1/snapshot  — restore the cluster from an archive (leader; forwarded)
func (s *server) snapshotRoutes(r chi.Router) {
	h := &snapshotHandler{s: s, cfg: s.cfg.Snapshot}
	r.Get("/v1/snapshot", h.get)
	r.Put("/v1/snapshot", h.put)
}

// snapshotHandler serves the snapshot routes of one API handler.
type snapshotHandler struct {
	s   *server
	cfg SnapshotConfig
	// restoring is set from the start of an upload until its restore ended.
	restoring atomic.Bool
}

// get serves GET /v1/snapshot: a gzip(tar{meta.json, state.db, SHA256SUMS}) archive of
// a point-in-time view, streamed as it is produced. By default the leader serves it
// after a linearizable check, so it holds every write acknowledged before the request;
// ?consistency=stale serves this node's state (useful without a leader).
func (h *snapshotHandler) get(w http.ResponseWriter, r *http.Request) {
	s := h.s
	o, err := s.parseReadOptions(r)
	if err == nil && o.blocking {
		err = invalid("index", "a snapshot cannot be a blocking query")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if o.mode != api.ConsistencyStale && !s.node.IsLeader() {
		h.forward(w, r, h.serveGet)
		return
	}
	h.serveGet(w, r)
}

func (h *snapshotHandler) serveGet(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if h.cfg.Node == nil {
		s.writeError(w, r, fmt.Errorf("%w: this node does not serve snapshots", errUnavailable))
		return
	}
	o, _ := s.parseReadOptions(r) // checked by get
	s.setLeaderHeaders(w, o.mode)
	if err := s.reg.CheckConsistency(r.Context(), registry.Consistency(o.mode)); err != nil {
		if s.isNotLeader(err) && r.Header.Get(api.HeaderForwardedBy) == "" {
			s.metrics.forwardRetries.Inc()
			h.forward(w, r, nil)
			return
		}
		s.writeError(w, r, err)
		return
	}
	view, err := h.cfg.Node.SnapshotState()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer func() { _ = view.Close() }()
	counts := view.Counts()
	meta := snapshot.Meta{
		Index:         view.Index,
		Term:          view.Term,
		RosterVersion: s.cfg.Version,
		CreatedAt:     time.Now(),
		Counts: snapshot.Counts{
			Namespaces: counts.Namespaces,
			Services:   counts.Services,
			Instances:  counts.Instances,
		},
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/gzip")
	hdr.Set("Content-Disposition", fmt.Sprintf("attachment; filename=\"roster-%d.snap\"", meta.Index))
	hdr.Set("X-Content-Type-Options", "nosniff")
	setIndex(w, meta.Index)
	w.WriteHeader(http.StatusOK)
	if err := writeArchive(w, meta, view); err != nil {
		// The status is sent: cut the response short so the client sees a broken
		// (and, by its checksums, invalid) archive rather than a complete-looking one.
		s.log.Warn("snapshot download failed", "index", meta.Index, "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.Info("snapshot served", "index", meta.Index, "term", meta.Term, "state_bytes", view.Size(),
		"consistency", o.mode)
}

// writeArchive streams the archive of view to w. The view writes the state file into a
// pipe that snapshot.Write reads, so memory use does not depend on the state's size.
func writeArchive(w io.Writer, meta snapshot.Meta, view *raftnode.StateSnapshot) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := view.WriteTo(pw)
		_ = pw.CloseWithError(err) // nil: the reader sees EOF
	}()
	err := snapshot.Write(w, meta, pr, view.Size())
	// Unblock the view's writer if Write stopped early; the view may be closed only
	// once it returned.
	_ = pr.CloseWithError(errors.New("archive writer stopped"))
	<-done
	return err
}

// put serves PUT /v1/snapshot: restore the whole cluster from an archive. The leader
// streams the body to disk and checks the whole archive (format, checksums, a readable
// state file whose counts match meta.json) before anything changes; a bad archive is a
// 400 naming the member and the problem. A follower forwards the body, streamed, to
// the leader. While one restore runs (upload included), another is a 409.
func (h *snapshotHandler) put(w http.ResponseWriter, r *http.Request) {
	if !h.s.node.IsLeader() {
		h.forward(w, r, h.servePut)
		return
	}
	h.servePut(w, r)
}

func (h *snapshotHandler) servePut(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if h.cfg.Node == nil {
		h.refuseUnread(w, r, fmt.Errorf("%w: this node does not serve snapshots", errUnavailable))
		return
	}
	if !h.restoring.CompareAndSwap(false, true) {
		h.refuseUnread(w, r, fmt.Errorf("%w: another snapshot restore is in progress", model.ErrConflict))
		return
	}
	defer h.restoring.Store(false)
	idx, err := h.restore(w, r)
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	s.log.Warn("cluster restored from a snapshot archive", "index", idx)
	writeResult(w, idx)
}

// restore reads and checks the uploaded archive, then hands its state to Raft.
func (h *snapshotHandler) restore(w http.ResponseWriter, r *http.Request) (uint64, error) {
	s := h.s
	start := time.Now()
	ar, err := snapshot.Read(http.MaxBytesReader(w, r.Body, h.cfg.MaxBytes), snapshot.ReadOptions{
		Dir:          h.cfg.Dir,
		MaxStateSize: h.cfg.MaxStateBytes,
		Check:        snapshot.CheckState,
	})
	if err != nil {
		return 0, uploadError(err, h.cfg.MaxBytes)
	}
	defer func() { _ = ar.Close() }()
	f, err := os.Open(ar.StatePath)
	if err != nil {
		return 0, fmt.Errorf("open the uploaded state: %w", err)
	}
	defer func() { _ = f.Close() }()
	s.log.Warn("snapshot archive accepted; restoring", "index", ar.Meta.Index, "term", ar.Meta.Term,
		"roster_version", ar.Meta.RosterVersion, "created_at", ar.Meta.CreatedAt, "state_bytes", ar.Meta.Size,
		"upload", time.Since(start))

	// Once Raft has the state, the restore proceeds even if the client goes away.
	ctx := context.WithoutCancel(r.Context())
	if h.cfg.RestoreTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.cfg.RestoreTimeout)
		defer cancel()
	}
	return h.cfg.Node.RestoreState(ctx, ar.Meta.Index, ar.Meta.Term, f, ar.Meta.Size)
}

// uploadError turns an error of reading the uploaded archive into the API's errors: a
// bad archive is a 400 whose field is the archive member at fault ("snapshot" for the
// container itself), an archive over the limit a 413.
func uploadError(err error, limit int64) error {
	var fe *snapshot.FormatError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return fmt.Errorf("%w: a snapshot archive may have at most %d bytes", errBodyTooLarge, limit)
	case errors.As(err, &fe):
		field := fe.Member
		if field == "" {
			field = "snapshot"
		}
		return &model.ValidationError{Field: field, Message: fe.Error()}
	}
	return err
}

// refuse answers err after discarding (a bounded part of) what is left of the body.
func (h *snapshotHandler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.Body != nil {
		_, _ = io.CopyN(io.Discard, r.Body, maxRefusedDrain)
	}
	h.s.writeError(w, r, err)
}

// refuseUnread answers err for a request whose body was not read. A client that waits
// for "100 Continue" before sending the body (curl does for large uploads) gets the
// answer instead and sends nothing; any other client's body is discarded as by refuse.
func (h *snapshotHandler) refuseUnread(w http.ResponseWriter, r *http.Request, err error) {
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		h.s.writeError(w, r, err)
		return
	}
	h.refuse(w, r, err)
}

// forward sends r to the leader without buffering its body or bounding its duration:
// an archive is streamed through in both directions. It is one attempt (a body
// cannot be sent twice); if this node becomes the leader meanwhile, local serves r
// here (local nil: only another node will do).
func (h *snapshotHandler) forward(w http.ResponseWriter, r *http.Request, local http.HandlerFunc) {
	s := h.s
	if by := r.Header.Get(api.HeaderForwardedBy); by != "" {
		s.metrics.forwarded.WithLabelValues("loop").Inc()
		h.refuseUnread(w, r, fmt.Errorf("%w: %s is not the leader and the request was already forwarded by %s",
			errNotLeader, s.id, by))
		return
	}
	leader, err := s.awaitLeader(r.Context(), "", local != nil)
	if err != nil {
		s.metrics.forwarded.WithLabelValues("no_leader").Inc()
		h.refuseUnread(w, r, err)
		return
	}
	if leader.ID == s.id {
		local(w, r)
		return
	}
	target, err := api.BaseURL(leader.HTTPAddr)
	if err != nil {
		h.refuseUnread(w, r, fmt.Errorf("%w: leader %s: %v", errUnavailable, leader.ID, err))
		return
	}
	st := &proxyState{target: target, leaderID: leader.ID}
	out := r.Clone(context.WithValue(r.Context(), proxyStateKey{}, st)) // shares r.Body
	for _, name := range []string{api.HeaderServedBy, api.HeaderIndex, api.HeaderConsistency,
		api.HeaderKnownLeader, api.HeaderLastContact, api.HeaderNotLeader} {
		w.Header().Del(name)
	}
	s.proxy.ServeHTTP(w, out)
}
