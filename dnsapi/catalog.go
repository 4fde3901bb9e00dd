package dnsapi

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Store is what the DNS interface reads: the node's local state (*store.Store
// implements it). Every read is stale: it is this node's copy, as of the last entry
// it applied.
type Store interface {
	ServiceView(ws *store.WatchSet, key model.ServiceKey) (uint64, store.ServiceView, error)
	Namespaces(ws *store.WatchSet) (uint64, []model.Namespace, error)
	Services(ws *store.WatchSet, ns, group string, page, size int) (uint64, []model.Service, int, error)
	WatchAll(ws *store.WatchSet)
	AppliedIndex() uint64
}

// maxCachedLookups bounds the lookups one generation of the catalog remembers (names
// asked for that do not exist count too), so that random names cannot grow it.
const maxCachedLookups = 8192

// catalog answers "which service is this, and what are its instances" from the store,
// caching what it read until the state changes. A generation of cached lookups
// belongs to one applied index and one epoch, and is dropped when either moves:
//
//   - the applied index, which every entry the FSM applies raises right after its
//     commit, so a lookup never answers from a generation older than the entries
//     this node has applied;
//   - the epoch, which a goroutine (run) bumps after every commit the store's WatchAll
//     channel reports, restores included (a restored file may carry any applied
//     index) and writes that do not go through the FSM. The watch is re-armed before
//     the epoch is bumped, so a lookup made at epoch E read the state after E's watch
//     was armed: any later commit fires that watch and moves the epoch past E.
type catalog struct {
	st    Store
	epoch atomic.Uint64
	gen   atomic.Pointer[generation]
}

// generation holds the lookups made at one epoch.
type generation struct {
	epoch   uint64
	applied uint64
	mu      sync.RWMutex
	seen    map[model.ServiceKey]*service // nil value: no such service

	foldOnce sync.Once
	fold     *foldIndex
	foldErr  error
}

// service is one service as DNS answers it, parsed once per generation.
type service struct {
	key       model.ServiceKey
	threshold float64
	clusters  []string // every cluster's name, sorted
	instances []instance
}

// instance is one instance as DNS answers it.
type instance struct {
	cluster string
	addr    netip.Addr // valid for an instance whose address is an IP (IPv4-mapped: unmapped)
	host    string     // an instance whose address is a DNS name: that name, fully qualified
	port    uint16
	weight  float64
	enabled bool
	healthy bool
}

func newCatalog(st Store) *catalog {
	c := &catalog{st: st}
	c.gen.Store(&generation{seen: map[model.ServiceKey]*service{}})
	return c
}

// run moves the epoch after every commit until ctx is done or the store is closed.
func (c *catalog) run(ctx context.Context) {
	var last time.Time
	for ctx.Err() == nil {
		ws := store.NewWatchSet()
		c.st.WatchAll(ws)
		c.epoch.Add(1)
		if !ws.Wait(ctx) {
			return
		}
		// A closed store's watch fires at once, every time: stop rather than spin.
		// Checked only when wakes come close together, as they do then.
		now := time.Now()
		if now.Sub(last) < time.Millisecond {
			if _, _, err := c.st.Namespaces(nil); errors.Is(err, store.ErrClosed) {
				c.epoch.Add(1)
				return
			}
		}
		last = now
	}
}

// current returns the generation of the current applied index and epoch, starting a
// new one if needed. Both are read before anything the generation will cache.
func (c *catalog) current() *generation {
	e, a := c.epoch.Load(), c.st.AppliedIndex()
	g := c.gen.Load()
	if g.epoch >= e && g.applied == a {
		return g
	}
	ng := &generation{epoch: e, applied: a, seen: make(map[model.ServiceKey]*service, len(g.seen))}
	if c.gen.CompareAndSwap(g, ng) {
		return ng
	}
	if g = c.gen.Load(); g.epoch >= e && g.applied == a {
		return g
	}
	return ng // raced with another generation; answer from a private one
}

// lookup finds the service key names: the service with exactly that key if there is
// one, else the one service whose key matches it case-insensitively (ASCII letters,
// as DNS compares names). nil when there is none, or several.
func (c *catalog) lookup(key model.ServiceKey) (*service, error) {
	g := c.current()
	g.mu.RLock()
	svc, ok := g.seen[key]
	g.mu.RUnlock()
	if ok {
		return svc, nil
	}
	svc, err := c.resolve(g, key)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if len(g.seen) < maxCachedLookups {
		g.seen[key] = svc
	}
	g.mu.Unlock()
	return svc, nil
}

func (c *catalog) resolve(g *generation, key model.ServiceKey) (*service, error) {
	svc, err := c.read(key)
	if err == nil || !errors.Is(err, model.ErrNotFound) {
		return svc, err
	}
	f, err := g.foldIndex(c.st)
	if err != nil {
		return nil, err
	}
	keys := f.services[foldKey(key.Namespace, key.Group, key.Service)]
	if len(keys) != 1 {
		return nil, nil
	}
	svc, err = c.read(keys[0])
	if errors.Is(err, model.ErrNotFound) {
		return nil, nil
	}
	return svc, err
}

// read reads one service and its instances.
func (c *catalog) read(key model.ServiceKey) (*service, error) {
	_, v, err := c.st.ServiceView(nil, key)
	if err != nil {
		return nil, err
	}
	svc := &service{key: key, threshold: v.Service.ProtectThreshold, instances: make([]instance, 0, len(v.Instances))}
	for _, cl := range v.Clusters {
		svc.clusters = append(svc.clusters, cl.Name)
	}
	for _, in := range v.Instances {
		i := instance{cluster: in.Cluster, weight: in.Weight, enabled: in.Enabled, healthy: in.Healthy}
		if in.Port <= 0 || in.Port > 65535 {
			continue
		}
		i.port = uint16(in.Port)
		if a, err := netip.ParseAddr(in.IP); err == nil {
			if a.Zone() != "" {
				continue
			}
			i.addr = a.Unmap()
		} else {
			h := dns.Fqdn(in.IP)
			if _, ok := dns.IsDomainName(h); !ok {
				continue
			}
			i.host = h
		}
		if !slices.Contains(svc.clusters, in.Cluster) {
			svc.clusters = append(svc.clusters, in.Cluster)
		}
		svc.instances = append(svc.instances, i)
	}
	slices.Sort(svc.clusters)
	return svc, nil
}

// parentExists reports whether namespace ns (group "") or group group of ns has a
// service, comparing case-insensitively: then the name is an empty non-terminal.
func (c *catalog) parentExists(ns, group string) (bool, error) {
	f, err := c.current().foldIndex(c.st)
	if err != nil {
		return false, err
	}
	if group == "" {
		_, ok := f.namespaces[foldASCII(ns)]
		return ok, nil
	}
	_, ok := f.groups[foldKey(ns, group)]
	return ok, nil
}

// foldIndex maps case-folded names to what exists, for the lookups an exact read
// cannot answer. It is built once per generation, only when such a lookup comes.
type foldIndex struct {
	namespaces map[string]struct{}           // folded namespace (with at least a service)
	groups     map[string]struct{}           // foldKey(namespace, group)
	services   map[string][]model.ServiceKey // foldKey(namespace, group, service)
}

func (g *generation) foldIndex(st Store) (*foldIndex, error) {
	g.foldOnce.Do(func() { g.fold, g.foldErr = buildFold(st) })
	return g.fold, g.foldErr
}

func buildFold(st Store) (*foldIndex, error) {
	f := &foldIndex{namespaces: map[string]struct{}{}, groups: map[string]struct{}{}, services: map[string][]model.ServiceKey{}}
	_, nss, err := st.Namespaces(nil)
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		_, svcs, _, err := st.Services(nil, ns.ID, "", 1, 0)
		if errors.Is(err, model.ErrNotFound) {
			continue // deleted since the list was read
		}
		if err != nil {
			return nil, err
		}
		for _, s := range svcs {
			f.namespaces[foldASCII(s.Namespace)] = struct{}{}
			f.groups[foldKey(s.Namespace, s.Group)] = struct{}{}
			k := foldKey(s.Namespace, s.Group, s.Name)
			f.services[k] = append(f.services[k], s.Key())
		}
	}
	return f, nil
}

// foldKey joins case-folded names with a byte no name may contain.
func foldKey(names ...string) string {
	for i, n := range names {
		names[i] = foldASCII(n)
	}
	return strings.Join(names, "\x00")
}

// findCluster returns the service's cluster that name denotes: the one of exactly that
// name, else the only one equal to it case-insensitively.
func (s *service) findCluster(name string) (string, bool) {
	if _, ok := slices.BinarySearch(s.clusters, name); ok {
		return name, true
	}
	found := ""
	for _, c := range s.clusters {
		if equalFold(c, name) {
			if found != "" {
				return "", false
			}
			found = c
		}
	}
	return found, found != ""
}

// selectInstances returns the instances a query of cluster ("": every cluster)
// answers, by the same rule as the native API's ?healthy=true: the enabled healthy
// ones, unless the protect threshold is reached among the enabled ones
// (model.ProtectThresholdReached): then every enabled instance, healthy or not. The
// second result reports the threshold reached.
func (s *service) selectInstances(cluster string) ([]instance, bool) {
	var enabled, healthy int
	for i := range s.instances {
		in := &s.instances[i]
		if !in.enabled || (cluster != "" && in.cluster != cluster) {
			continue
		}
		enabled++
		if in.healthy {
			healthy++
		}
	}
	reached := model.ProtectThresholdReached(healthy, enabled, s.threshold)
	out := make([]instance, 0, enabled)
	for _, in := range s.instances {
		if in.enabled && (cluster == "" || in.cluster == cluster) && (in.healthy || reached) {
			out = append(out, in)
		}
	}
	return out, reached
}
