package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/snapshot"
)

// Defaults of SnapshotConfig.
const (
	DefaultSnapshotMaxBytes      = 4 << 30
	DefaultSnapshotMaxStateBytes = 16 << 30
	// DefaultSnapshotUploadIdle is how long an upload may send nothing before it is cut
	// off: far longer than any pause of a working connection, short enough that a
	// stalled client does not keep a connection and a partial file for long.
	DefaultSnapshotUploadIdle = 30 * time.Second
	// DefaultSnapshotUploadMinRate is the lowest average rate of an upload after its
	// first DefaultSnapshotUploadIdle: 16 KiB/s, a 100 MiB archive in under two hours.
	// Any real link is far faster; a client trickling bytes to stay under the idle
	// timeout is not.
	DefaultSnapshotUploadMinRate = 16 << 10
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
	// AdoptIdentity rewrites a state file about to be restored so that it carries this
	// cluster's id and member table, not those of the cluster it was saved from, and
	// the cluster's current ACL state unless archiveACL; usedArchive reports whether the
	// file's ACL state is the archive's.
	AdoptIdentity(statePath string, archiveACL bool) (usedArchive bool, err error)
}

// SnapshotConfig configures GET and PUT /v1/snapshot. The zero value takes the
// defaults; Config.MaxBodyBytes does not apply to these routes.
type SnapshotConfig struct {
	// Node takes and restores snapshots; nil means Config.Node when it implements
	// Snapshotter (else both routes answer 503).
	Node Snapshotter
	// Dir receives the state.db of an uploaded archive while it is checked
	// (os.TempDir() when empty). An upload is streamed there, never held in memory; how
	// much it may write is bounded by MaxStateBytes, MaxExpansion and MinFreeBytes.
	Dir string
	// MaxBytes bounds an uploaded archive (default 4 GiB); a larger one is a 413.
	MaxBytes int64
	// MaxStateBytes bounds the state.db inside an uploaded archive (default 16 GiB); a
	// larger one is a 400, refused before it is extracted.
	MaxStateBytes int64
	// MaxExpansion bounds how many times larger than the uploaded bytes the extracted
	// state.db may grow (default snapshot.DefaultMaxExpansion, 256): a gzip bomb is a
	// 400, cut off before it writes more than that.
	MaxExpansion int64
	// MinFreeBytes is the free space an upload leaves on the file system of Dir
	// (default snapshot.DefaultMinFree: 512 MiB, or an eighth of a smaller disk): an
	// archive whose state.db does not fit
	// beyond it is a 413, refused before extraction or as soon as the disk fills up
	// while it is written.
	MinFreeBytes int64
	// UploadIdleTimeout cuts off an upload that sends nothing for this long (default
	// DefaultSnapshotUploadIdle, 30s), with a 408.
	UploadIdleTimeout time.Duration
	// UploadMinRate is the lowest average rate, in bytes per second, of an upload once
	// its first UploadIdleTimeout has passed (default DefaultSnapshotUploadMinRate,
	// 16 KiB/s); a slower one is cut off with a 408.
	UploadMinRate int64
	// RestoreTimeout bounds the Raft restore once the archive is checked; 0 means no
	// bound. A restore cannot be stopped once it began, whatever happens to the client.
	RestoreTimeout time.Duration
}

// withDefaults fills the zero fields; node is Config.Node.
func (c SnapshotConfig) withDefaults(node Consensus) (SnapshotConfig, error) {
	if c.MaxBytes < 0 || c.MaxStateBytes < 0 || c.MaxExpansion < 0 || c.MinFreeBytes < 0 ||
		c.UploadIdleTimeout < 0 || c.UploadMinRate < 0 || c.RestoreTimeout < 0 {
		return c, errors.New("httpapi: snapshot limits and timeouts must not be negative")
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
	if c.MaxExpansion == 0 {
		c.MaxExpansion = snapshot.DefaultMaxExpansion
	}
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = snapshot.DefaultMinFree
	}
	if c.UploadIdleTimeout == 0 {
		c.UploadIdleTimeout = DefaultSnapshotUploadIdle
	}
	if c.UploadMinRate == 0 {
		c.UploadMinRate = DefaultSnapshotUploadMinRate
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
	// restoring is set while a verified archive is being restored through Raft: from
	// the moment it is handed over until the restore ended. An upload being received
	// or checked does not hold it, so a slow client cannot block other restores.
	restoring atomic.Bool
}

// get serves GET /v1/snapshot: a gzip(tar{meta.json, state.db, SHA256SUMS}) archive of
// a point-in-time view, streamed as it is produced. By default the leader serves it
// after a linearizable check, so it holds every write acknowledged before the request;
// ?consistency=stale serves this node's state (useful without a leader).
func (h *snapshotHandler) get(w http.ResponseWriter, r *http.Request) {
	s := h.s
	o, err := s.parseReadOptions(r)
	if err == nil && o.Blocking {
		err = invalid("index", "a snapshot cannot be a blocking query")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if o.Mode != api.ConsistencyStale && !s.node.IsLeader() {
		h.s.fwd.ForwardStream(w, r, h.serveGet, h.refuseUnread, h.s.writeError)
		return
	}
	h.serveGet(w, r)
}

func (h *snapshotHandler) serveGet(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if h.cfg.Node == nil {
		s.writeError(w, r, fmt.Errorf("%w: this node does not serve snapshots", httpx.ErrUnavailable))
		return
	}
	o, _ := s.parseReadOptions(r) // checked by get
	httpx.SetLeaderHeaders(w, s.node, o.Mode)
	if err := s.reg.CheckConsistency(r.Context(), registry.Consistency(o.Mode)); err != nil {
		if httpx.IsNotLeader(err) && r.Header.Get(api.HeaderForwardedBy) == "" {
			s.fwd.Retried()
			h.s.fwd.ForwardStream(w, r, nil, h.refuseUnread, h.s.writeError)
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
		s.log.WarnContext(r.Context(), "snapshot download failed", "index", meta.Index, "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.InfoContext(r.Context(), "snapshot served", "index", meta.Index, "term", meta.Term, "state_bytes", view.Size(),
		"consistency", o.Mode)
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
// streams the body to disk and checks the whole archive (format, bounds, checksums, a
// readable state file whose counts match meta.json) before anything changes; a bad
// archive is a 400 naming the member and the problem. A follower forwards the body,
// streamed, to the leader. Either way the upload is paced: one that stalls or trickles
// is cut off with a 408. Only a fully verified archive competes for the restore: when
// another restore is running at that moment, the answer is a 409.
//
// ?acl= says whose ACL state the restored cluster has: "cluster" (the default) keeps
// the cluster's tokens and bootstrap whatever the archive holds, so that a restore never
// grants ACL rights its caller lacks; "archive" restores the archive's and needs
// acl: write. The answer says which it did (api.SnapshotRestoreResult).
func (h *snapshotHandler) put(w http.ResponseWriter, r *http.Request) {
	if _, err := h.aclChoice(r); err != nil {
		h.refuseUnread(w, r, err)
		return
	}
	up := h.pace(w, r)
	defer up.finish()
	if !h.s.node.IsLeader() {
		h.s.fwd.ForwardStream(w, r, h.servePut, h.refuseUnread, func(w http.ResponseWriter, r *http.Request, err error) {
			if up.err != nil {
				// The client, not the leader, failed the forwarded request.
				err = up.err
			}
			h.writeError(w, r, err)
		})
		return
	}
	h.servePut(w, r)
}

func (h *snapshotHandler) servePut(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if h.cfg.Node == nil {
		h.refuseUnread(w, r, fmt.Errorf("%w: this node does not serve snapshots", httpx.ErrUnavailable))
		return
	}
	archiveACL, err := h.aclChoice(r)
	if err != nil {
		h.refuseUnread(w, r, err)
		return
	}
	start := time.Now()
	ar, err := h.receive(w, r)
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	defer func() { _ = ar.Close() }()
	s.log.WarnContext(r.Context(), "snapshot archive received and verified", "index", ar.Meta.Index, "term", ar.Meta.Term,
		"roster_version", ar.Meta.RosterVersion, "created_at", ar.Meta.CreatedAt, "state_bytes", ar.Meta.Size,
		"upload", time.Since(start))
	if !h.restoring.CompareAndSwap(false, true) {
		h.writeError(w, r, fmt.Errorf("%w: another snapshot restore is in progress", model.ErrConflict))
		return
	}
	defer h.restoring.Store(false)
	idx, usedArchive, err := h.restore(r, ar, archiveACL)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res := api.SnapshotRestoreResult{Index: idx, ACL: api.RestoreACLCluster}
	if usedArchive {
		res.ACL = api.RestoreACLArchive
	}
	s.log.WarnContext(r.Context(), "cluster restored from a snapshot archive", "index", idx, "acl", res.ACL)
	setIndex(w, idx)
	writeJSON(w, http.StatusOK, res)
}

// aclChoice parses ?acl=: false for "cluster" (or absent), true for "archive", which
// needs acl: write (403 naming it); anything else is a 400 naming "acl".
func (h *snapshotHandler) aclChoice(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("acl"); v {
	case "", api.RestoreACLCluster:
		return false, nil
	case api.RestoreACLArchive:
		if err := h.s.reg.Authorize(r.Context(), acl.ACLWrite); err != nil {
			return false, fmt.Errorf("restoring the archive's tokens (?acl=archive) needs acl: write: %w", err)
		}
		return true, nil
	default:
		return false, invalid("acl", "must be %q (keep the cluster's tokens, the default) or %q (restore the archive's; needs acl: write), got %q",
			api.RestoreACLCluster, api.RestoreACLArchive, v)
	}
}

// receive reads the whole uploaded archive and checks it, its state.db extracted into
// cfg.Dir. It takes no lock: any number of uploads may be received at once, each
// bounded in size, in expansion, in the disk space it may use, and in time.
func (h *snapshotHandler) receive(w http.ResponseWriter, r *http.Request) (*snapshot.Archive, error) {
	body := r.Body
	if up, ok := body.(*pacedBody); ok {
		defer up.finish()
	}
	ar, err := snapshot.Read(http.MaxBytesReader(w, body, h.cfg.MaxBytes), snapshot.ReadOptions{
		Dir:          h.cfg.Dir,
		MaxStateSize: h.cfg.MaxStateBytes,
		MaxExpansion: h.cfg.MaxExpansion,
		ArchiveSize:  r.ContentLength, // -1 when unknown: the bound is then checked as the body arrives
		MinFree:      h.cfg.MinFreeBytes,
		Check:        snapshot.CheckState,
	})
	if err != nil {
		return nil, h.uploadError(err)
	}
	return ar, nil
}

// restore hands the state of a verified archive to Raft, with the cluster's ACL state
// unless archiveACL; usedArchive reports whether the ACL state restored is the archive's.
func (h *snapshotHandler) restore(r *http.Request, ar *snapshot.Archive, archiveACL bool) (idx uint64, usedArchive bool, err error) {
	// The archive may come from another cluster: the restored state keeps this cluster's
	// identity and members, so that no node ever talks to addresses read from it.
	if usedArchive, err = h.cfg.Node.AdoptIdentity(ar.StatePath, archiveACL); err != nil {
		return 0, false, fmt.Errorf("giving the archive's state this cluster's identity: %w", err)
	}
	f, err := os.Open(ar.StatePath)
	if err != nil {
		return 0, false, fmt.Errorf("opening the verified state: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("opening the verified state: %w", err)
	}
	// Once Raft has the state, the restore proceeds even if the client goes away.
	ctx := context.WithoutCancel(r.Context())
	if h.cfg.RestoreTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.cfg.RestoreTimeout)
		defer cancel()
	}
	idx, err = h.cfg.Node.RestoreState(ctx, ar.Meta.Index, ar.Meta.Term, f, info.Size())
	return idx, usedArchive, err
}

// uploadError turns an error of reading the uploaded archive into the API's errors: a
// bad archive is a 400 whose field is the archive member at fault ("snapshot" for the
// container itself), an archive over the limit or beyond the free disk space a 413, an
// upload cut off for its pace a 408 (see writeError).
func (h *snapshotHandler) uploadError(err error) error {
	var fe *snapshot.FormatError
	var mbe *http.MaxBytesError
	var slow *uploadTooSlow
	switch {
	case errors.As(err, &slow):
		return slow
	case errors.As(err, &mbe):
		return fmt.Errorf("%w: a snapshot archive may have at most %d bytes", httpx.ErrBodyTooLarge, h.cfg.MaxBytes)
	case errors.As(err, &fe):
		field := fe.Member
		if field == "" {
			field = "snapshot"
		}
		return &model.ValidationError{Field: field, Message: fe.Error()}
	case errors.Is(err, snapshot.ErrNoSpace):
		// The message of the snapshot package names no path.
		return fmt.Errorf("%w: this node cannot take in the archive: %v", httpx.ErrBodyTooLarge, err)
	}
	return err
}

// writeError answers err for PUT /v1/snapshot. An upload cut off for its pace is a 408
// (the connection is closed: its body was not read to the end). An internal error is
// logged and answered without its details, which may name the node's files: a client
// has no business learning the server's paths.
func (h *snapshotHandler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var slow *uploadTooSlow
	if errors.As(err, &slow) {
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestTimeout, api.ErrorBody{Error: api.Error{Code: api.CodeTimeout, Message: slow.Error()}})
		return
	}
	if status, _, _ := httpx.Classify(err); status == http.StatusInternalServerError {
		h.s.log.ErrorContext(r.Context(), "snapshot restore failed", "method", r.Method, "path", r.URL.Path, "err", err)
		err = fmt.Errorf("snapshot restore failed on node %s: internal error (its log has the details)", h.s.cfg.NodeID)
	}
	h.s.writeError(w, r, err)
}

// refuse answers err after discarding (a bounded part of) what is left of the body.
// The body is still paced, so a stalled client does not hold the handler here either.
func (h *snapshotHandler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var slow *uploadTooSlow
	if r.Body != nil && !errors.As(err, &slow) {
		_, _ = io.CopyN(io.Discard, r.Body, maxRefusedDrain)
	}
	h.writeError(w, r, err)
}

// refuseUnread answers err for a request whose body was not read. A client that waits
// for "100 Continue" before sending the body (curl does for large uploads) gets the
// answer instead and sends nothing; any other client's body is discarded as by refuse.
func (h *snapshotHandler) refuseUnread(w http.ResponseWriter, r *http.Request, err error) {
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		h.writeError(w, r, err)
		return
	}
	h.refuse(w, r, err)
}

// pace replaces r.Body with a pacedBody and returns it. Every read of the body then
// has a deadline on the connection (http.ResponseController.SetReadDeadline): the
// upload must deliver something within UploadIdleTimeout, and, once the first
// UploadIdleTimeout has passed, keep an average of UploadMinRate. This holds on a
// follower, which streams the body on to the leader and so ties the leader's read to
// the client's pace, as on the leader.
func (h *snapshotHandler) pace(w http.ResponseWriter, r *http.Request) *pacedBody {
	p := &pacedBody{
		body:    r.Body,
		rc:      http.NewResponseController(w),
		idle:    h.cfg.UploadIdleTimeout,
		minRate: h.cfg.UploadMinRate,
		now:     time.Now,
	}
	p.start = p.now()
	r.Body = p
	return p
}

// pacedBody is a request body whose reads are bounded in time; see pace.
type pacedBody struct {
	body    io.ReadCloser
	rc      interface{ SetReadDeadline(time.Time) error }
	idle    time.Duration
	minRate int64 // bytes per second
	now     func() time.Time

	start time.Time
	n     int64          // bytes read so far
	err   *uploadTooSlow // set once the upload was cut off
	eof   atomic.Bool    // the whole body was read
	ended atomic.Bool    // the handler returned (finish)
}

// uploadTooSlow is the error of an upload cut off for its pace.
type uploadTooSlow struct {
	stalled  bool // nothing arrived for idle, rather than too little on average
	idle     time.Duration
	n        int64
	elapsed  time.Duration
	minRate  int64
	deadline error // the connection's error, for the log
}

func (e *uploadTooSlow) Error() string {
	if e.stalled {
		return fmt.Sprintf("the snapshot upload stalled: nothing arrived for %s (%d bytes received in %s)",
			e.idle, e.n, e.elapsed.Round(time.Millisecond))
	}
	return fmt.Sprintf("the snapshot upload is too slow: %d bytes in %s, below the minimum average of %d bytes/s "+
		"expected after the first %s", e.n, e.elapsed.Round(time.Millisecond), e.minRate, e.idle)
}

func (e *uploadTooSlow) Unwrap() error { return e.deadline }

// latest returns when the next byte must have arrived for the average rate to stay at
// least minRate after the first idle period.
func (p *pacedBody) latest() time.Time {
	return p.start.Add(p.idle + time.Duration(float64(p.n)/float64(p.minRate)*float64(time.Second)))
}

func (p *pacedBody) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.ended.Load() {
		return 0, errAnswered
	}
	now := p.now()
	deadline, stalled := now.Add(p.idle), true
	if l := p.latest(); l.Before(deadline) {
		// An upload that never sent a byte stalled, whichever deadline comes first.
		deadline, stalled = l, p.n == 0
	}
	if !now.Before(deadline) {
		return 0, p.cut(now, stalled, nil)
	}
	// Not every ResponseWriter supports deadlines (a recorder in tests); the rate is
	// then still checked after each read.
	_ = p.rc.SetReadDeadline(deadline)
	n, err := p.body.Read(b)
	p.n += int64(n)
	switch {
	case err != nil && isTimeout(err):
		return n, p.cut(p.now(), stalled, err)
	case err == io.EOF:
		p.eof.Store(true)
		p.done()
	case err == nil && !p.now().Before(p.latest()):
		// Data arrived, but too late for the average (possible when the connection
		// cannot take a deadline).
		return n, p.cut(p.now(), false, nil)
	}
	return n, err
}

func (p *pacedBody) cut(now time.Time, stalled bool, cause error) error {
	p.err = &uploadTooSlow{stalled: stalled, idle: p.idle, n: p.n, elapsed: now.Sub(p.start), minRate: p.minRate, deadline: cause}
	return p.err
}

// done lifts the read deadline once the body was read, so that the server's own read
// of the connection (which net/http starts after the body) does not time out while the
// archive is checked and restored.
func (p *pacedBody) done() { _ = p.rc.SetReadDeadline(time.Time{}) }

// finish is deferred by the handlers that read the body. A body read to its end keeps
// no deadline (done). One that was not — the leader answered before the upload ended,
// or the archive was refused part-way — gets a deadline in the past: a read still in
// flight (a follower's forwarding writes the body from a goroutine of its own, which
// net/http's response must wait for) ends now instead of waiting on a client that
// stalls, and net/http closes the connection instead of draining the rest.
func (p *pacedBody) finish() {
	if p.eof.Load() {
		p.done()
		return
	}
	p.ended.Store(true)
	_ = p.rc.SetReadDeadline(time.Unix(1, 0))
}

// errAnswered ends the reads of an upload whose request was already answered.
var errAnswered = errors.New("the upload was answered before it ended")

func (p *pacedBody) Close() error { return p.body.Close() }

// isTimeout reports whether err is a connection's read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
