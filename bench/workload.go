package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Workload names.
const (
	WorkloadRegister   = "register"
	WorkloadDeregister = "deregister"
	WorkloadRead       = "read"
	WorkloadMixed      = "mixed"
	WorkloadWatch      = "watch"
)

// Workloads lists every workload name.
func Workloads() []string {
	return []string{WorkloadRegister, WorkloadDeregister, WorkloadRead, WorkloadMixed, WorkloadWatch}
}

// Spec describes one workload configuration (a point is a Spec at one concurrency).
type Spec struct {
	// Workload is one of Workloads().
	Workload string
	// Consistency is the read mode of read, mixed and watch (Linearizable, Leader, Stale).
	Consistency string
	// Instances is the size of the service read by the read workload (10, 100, ...).
	Instances int
	// Services is the number of services register/deregister spread over, and the number
	// of 10-instance services mixed reads and updates (0 = 100).
	Services int
	// ReadRatio is the share of reads in mixed (0 = 0.9).
	ReadRatio float64
	// Pool is the minimum number of instances deregister starts with; it registers more
	// (unmeasured) when fewer exist (0 = 2000).
	Pool int
	// RegisterLimit ends the register workload after this many registrations, warm-up
	// included (0: no limit, the point runs for its duration): the cluster then holds
	// exactly that many of the bench's instances unless some failed.
	RegisterLimit int
}

func (s *Spec) defaults() {
	if s.Services <= 0 {
		s.Services = 100
	}
	if s.ReadRatio <= 0 {
		s.ReadRatio = 0.9
	}
	if s.Pool <= 0 {
		s.Pool = 2000
	}
	if s.Instances <= 0 {
		s.Instances = 10
	}
	if s.Consistency == "" {
		s.Consistency = Linearizable
	}
}

// Plan is a prepared workload: the runner starts Workers workers calling Op.
type Plan struct {
	Workers int
	Op      Op
	// Observers are added to the runner's window observers.
	Observers []WindowObserver
	// Extra reports workload-specific numbers after the run (may be nil).
	Extra func() map[string]float64
	// Notes reports workload-specific remarks after the run, such as the last error of a
	// background watcher (may be nil); they are added to the result's error samples.
	Notes func() []string
	// Close releases what Prepare started (may be nil).
	Close func()
}

// Prepare sets the cluster up for spec (unmeasured) and returns the plan for the given
// concurrency. For watch, concurrency is the number of watchers and the plan has one
// writer worker.
func Prepare(ctx context.Context, c Client, spec Spec, concurrency int) (*Plan, error) {
	spec.defaults()
	switch spec.Workload {
	case WorkloadRegister:
		if err := prepareServices(ctx, c, svcNames("bench-svc-%03d", spec.Services)); err != nil {
			return nil, err
		}
		g := newAddrGen()
		limit := uint64(max(spec.RegisterLimit, 0))
		return &Plan{Workers: concurrency, Op: func(ctx context.Context, w int) error {
			k, gen := g.next(spec.Services)
			if limit > 0 && gen > limit {
				return ErrExhausted
			}
			_, err := c.Register(ctx, w, k, gen)
			return err
		}}, nil
	case WorkloadDeregister:
		return prepareDeregister(ctx, c, spec, concurrency)
	case WorkloadRead:
		svc := fmt.Sprintf("bench-read-%d", spec.Instances)
		if err := ensureService(ctx, c, svc, spec.Instances); err != nil {
			return nil, err
		}
		want := spec.Instances
		mode := spec.Consistency
		return &Plan{Workers: concurrency, Op: func(ctx context.Context, w int) error {
			_, n, err := c.Read(ctx, w, svc, mode)
			if err == nil && n != want {
				err = fmt.Errorf("read %d instances, want %d", n, want)
			}
			return err
		}}, nil
	case WorkloadMixed:
		return prepareMixed(ctx, c, spec, concurrency)
	case WorkloadWatch:
		return prepareWatch(ctx, c, spec, concurrency)
	default:
		return nil, fmt.Errorf("bench: unknown workload %q", spec.Workload)
	}
}

// addrGen hands out distinct instances: addresses 10.x.y.z from a random 24-bit start,
// one random port per generator, services in turn.
type addrGen struct {
	base uint32
	port int
	n    atomic.Uint64
}

func newAddrGen() *addrGen {
	var b [8]byte
	_, _ = rand.Read(b[:])
	v := binary.LittleEndian.Uint64(b[:])
	return &addrGen{base: uint32(v) & 0xffffff, port: 1024 + int((v>>32)%60000)}
}

// next returns a new instance and a generation number unique within the generator.
func (g *addrGen) next(services int) (InstanceKey, uint64) {
	n := g.n.Add(1) - 1
	a := (g.base + uint32(n)) & 0xffffff
	port := g.port + int(n>>24)
	if port > 65535 {
		port -= 64511
	}
	return InstanceKey{
		Service: fmt.Sprintf("bench-svc-%03d", n%uint64(services)),
		IP:      fmt.Sprintf("127.%d.%d.%d", a>>16, (a>>8)&0xff, a&0xff),
		Port:    port,
	}, n + 1
}

// fixedKey is the i-th instance of a set-up service: 127.250.x.y:8080 (loopback).
func fixedKey(service string, i int) InstanceKey {
	return InstanceKey{Service: service, IP: fmt.Sprintf("127.250.%d.%d", i/256, i%256), Port: 8080}
}

// svcNames formats n service names from a pattern with one %d verb.
func svcNames(pattern string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(pattern, i)
	}
	return out
}

// prepareServices calls PrepareService for every name, 16 at a time.
func prepareServices(ctx context.Context, c Client, names []string) error {
	fns := make([]func(ctx context.Context, w int) error, len(names))
	for i, name := range names {
		fns[i] = func(ctx context.Context, _ int) error { return c.PrepareService(ctx, name) }
	}
	if err := parallel(ctx, 16, fns); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// ensureService makes service hold exactly fixedKey(service, 0..n-1), writing only what
// differs.
func ensureService(ctx context.Context, c Client, service string, n int) error {
	if err := c.PrepareService(ctx, service); err != nil {
		return fmt.Errorf("setup %s: %w", service, err)
	}
	have, err := c.List(ctx, service)
	if err != nil {
		return fmt.Errorf("setup %s: %w", service, err)
	}
	want := make(map[InstanceKey]bool, n)
	var todo []func(ctx context.Context, w int) error
	for i := 0; i < n; i++ {
		want[fixedKey(service, i)] = true
	}
	present := map[InstanceKey]bool{}
	for _, k := range have {
		if want[k] {
			present[k] = true
			continue
		}
		k := k
		todo = append(todo, func(ctx context.Context, w int) error {
			_, err := c.Deregister(ctx, w, k)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return err
		})
	}
	for i := 0; i < n; i++ {
		k := fixedKey(service, i)
		if !present[k] {
			todo = append(todo, func(ctx context.Context, w int) error {
				_, err := c.Register(ctx, w, k, 1)
				return err
			})
		}
	}
	if err := parallel(ctx, 16, todo); err != nil {
		return fmt.Errorf("setup %s: %w", service, err)
	}
	return nil
}

// parallel runs fns on up to width goroutines and returns the first error.
func parallel(ctx context.Context, width int, fns []func(ctx context.Context, w int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < width && w < len(fns); w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(fns) {
					return
				}
				if err := fns[i](ctx, w); err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

func prepareDeregister(ctx context.Context, c Client, spec Spec, concurrency int) (*Plan, error) {
	var pool []InstanceKey
	for i := 0; i < spec.Services; i++ {
		ks, err := c.List(ctx, fmt.Sprintf("bench-svc-%03d", i))
		if err != nil {
			return nil, fmt.Errorf("setup deregister: %w", err)
		}
		pool = append(pool, ks...)
	}
	if missing := spec.Pool - len(pool); missing > 0 {
		if err := prepareServices(ctx, c, svcNames("bench-svc-%03d", spec.Services)); err != nil {
			return nil, err
		}
		g := newAddrGen()
		extra := make([]InstanceKey, missing)
		fns := make([]func(ctx context.Context, w int) error, missing)
		for i := range fns {
			k, gen := g.next(spec.Services)
			extra[i] = k
			fns[i] = func(ctx context.Context, w int) error {
				_, err := c.Register(ctx, w, k, gen)
				return err
			}
		}
		if err := parallel(ctx, 64, fns); err != nil {
			return nil, fmt.Errorf("setup deregister: %w", err)
		}
		pool = append(pool, extra...)
	}
	// Interleave services so that concurrent deletes touch different services, as the
	// registrations did.
	mrand.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	var pos atomic.Int64
	size := int64(len(pool))
	return &Plan{
		Workers: concurrency,
		Op: func(ctx context.Context, w int) error {
			i := pos.Add(1) - 1
			if i >= size {
				return ErrExhausted
			}
			_, err := c.Deregister(ctx, w, pool[i])
			return err
		},
		Extra: func() map[string]float64 {
			return map[string]float64{"pool": float64(size)}
		},
	}, nil
}

func prepareMixed(ctx context.Context, c Client, spec Spec, concurrency int) (*Plan, error) {
	const perService = 10
	names := make([]string, spec.Services)
	fns := make([]func(ctx context.Context, w int) error, spec.Services)
	for i := range names {
		names[i] = fmt.Sprintf("bench-mix-%03d", i)
		name := names[i]
		fns[i] = func(ctx context.Context, _ int) error { return ensureService(ctx, c, name, perService) }
	}
	if err := parallel(ctx, 8, fns); err != nil {
		return nil, err
	}
	rngs := make([]*mrand.Rand, concurrency)
	for i := range rngs {
		rngs[i] = mrand.New(mrand.NewPCG(uint64(i)+1, uint64(time.Now().UnixNano())))
	}
	var gen atomic.Uint64
	gen.Store(uint64(time.Now().UnixNano()))
	var reads, writes atomic.Uint64
	return &Plan{
		Workers: concurrency,
		Op: func(ctx context.Context, w int) error {
			r := rngs[w]
			svc := names[r.IntN(len(names))]
			if r.Float64() < spec.ReadRatio {
				reads.Add(1)
				_, n, err := c.Read(ctx, w, svc, spec.Consistency)
				if err == nil && n != perService {
					err = fmt.Errorf("read %d instances, want %d", n, perService)
				}
				return err
			}
			writes.Add(1)
			_, err := c.Register(ctx, w, fixedKey(svc, r.IntN(perService)), gen.Add(1))
			return err
		},
		Extra: func() map[string]float64 {
			return map[string]float64{"reads_issued": float64(reads.Load()), "writes_issued": float64(writes.Load())}
		},
	}, nil
}
