package healthcheck

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rosterhq/roster/internal/clock"
)

// Defaults and bounds of Config.
const (
	DefaultMaxConcurrent = 512
	MaxConcurrentLimit   = 1 << 16
	DefaultFlushInterval = 100 * time.Millisecond
	MaxFlushInterval     = 200 * time.Millisecond
	DefaultMaxBatch      = 256
	MaxBatchLimit        = 4096
	DefaultMaxBodyBytes  = 64 << 10
)

// Config tunes a Prober. The zero value is valid: Validate fills every zero field with
// its default.
type Config struct {
	// MaxConcurrent bounds the probes in flight at any moment (default 512, at most
	// 65536). Probes due while the bound is reached start late, in due order, as
	// earlier ones finish.
	MaxConcurrent int
	// FlushInterval is how long a health transition may wait to be batched with others
	// into one SetHealth command (default 100ms, at most 200ms).
	FlushInterval time.Duration
	// MaxBatch is the most transitions one SetHealth command carries; a batch that
	// reaches it is submitted without waiting for FlushInterval (default 256, at most
	// 4096, which keeps a Raft entry well under a megabyte).
	MaxBatch int
	// MaxBodyBytes caps how much of an HTTP probe's response body is read and
	// discarded (default 64 KiB); the rest is never read.
	MaxBodyBytes int64
	// Clock drives scheduling and batching (nil: the system clock). Probe timeouts and
	// latencies always use real time.
	Clock Clock
	// Policy decides which addresses may be probed (the zero Policy allows every
	// address; servers build it with ParsePolicy, whose deny list defaults to
	// DefaultProbeDeny). A refused probe fails with outcome "denied" and sends nothing.
	Policy Policy
	// Dial opens the connections of TCP and HTTP probes (nil: Policy.Dialer(), which
	// enforces the policy on every resolved address). An injected dialer only receives
	// addresses whose IP literal the policy allows; it must enforce the policy on the
	// addresses names resolve to (wrap Policy.Dialer()).
	Dial DialFunc
	// Registerer receives the prober's metrics (nil: metrics are kept but not exported).
	Registerer prometheus.Registerer
	// Confirmer asks the other voters to probe an instance once before a transition of
	// a cluster that confirms by majority is committed, which needs a majority of the
	// voters to see it (nil: the leader decides alone, as in a single-node cluster).
	Confirmer Confirmer
	// NodeID names this node in the vantages a confirmation reports.
	NodeID string
}

// Validate fills zero fields with their defaults and reports the first out-of-range
// value as an error wrapping ErrInvalidConfig.
func (c *Config) Validate() error {
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Clock == nil {
		c.Clock = SystemClock()
	}
	switch {
	case c.MaxConcurrent < 0 || c.MaxConcurrent > MaxConcurrentLimit:
		return fmt.Errorf("%w: MaxConcurrent must be between 1 and %d, got %d", ErrInvalidConfig, MaxConcurrentLimit, c.MaxConcurrent)
	case c.FlushInterval < 0 || c.FlushInterval > MaxFlushInterval:
		return fmt.Errorf("%w: FlushInterval must be between 0 and %s, got %s", ErrInvalidConfig, MaxFlushInterval, c.FlushInterval)
	case c.MaxBatch < 0 || c.MaxBatch > MaxBatchLimit:
		return fmt.Errorf("%w: MaxBatch must be between 1 and %d, got %d", ErrInvalidConfig, MaxBatchLimit, c.MaxBatch)
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("%w: MaxBodyBytes must be positive, got %d", ErrInvalidConfig, c.MaxBodyBytes)
	}
	return nil
}

// Clock is the time source of scheduling and batching (clock.System in production,
// a clock.Manual in tests).
type Clock = clock.Clock

// Timer is a one-shot timer of a Clock.
type Timer = clock.Timer

// SystemClock returns the Clock of the time package.
func SystemClock() Clock { return clock.System() }
