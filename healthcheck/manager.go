package healthcheck

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/rosterhq/roster/model"
)

// Manager runs one Prober per leadership term and serves the results of the current
// one. Its metrics are registered once and shared by every term.
type Manager struct {
	cfg Config
	src Source
	app Applier
	log *slog.Logger
	met *metrics
	// check runs the single probes a leader asks this node for (ProbeOnce).
	check *checker

	mu  sync.Mutex
	cur *Prober
}

// NewManager validates cfg (filling defaults) and registers the metrics on
// cfg.Registerer.
func NewManager(cfg Config, src Source, app Applier, logger *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil || app == nil {
		return nil, errors.New("healthcheck: NewManager needs a Source and an Applier")
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, src: src, app: app, log: logger, met: met, check: newChecker(cfg)}, nil
}

// Run probes for one leadership term: call it from the leadership observer with a
// context cancelled when leadership is lost. It returns once that context is done and
// the term's prober has stopped (it submits nothing afterwards).
func (m *Manager) Run(ctx context.Context) {
	p := newProber(m.cfg, m.src, m.app, m.log, m.met)
	m.mu.Lock()
	m.cur = p
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		if m.cur == p {
			m.cur = nil
		}
		m.mu.Unlock()
	}()
	p.Run(ctx)
}

// Results returns the current term's results for a service (see Prober.Results), or
// nil and false when no prober is running on this node.
func (m *Manager) Results(key model.ServiceKey) ([]Result, bool) {
	m.mu.Lock()
	p := m.cur
	m.mu.Unlock()
	if p == nil {
		return nil, false
	}
	return p.Results(key)
}
