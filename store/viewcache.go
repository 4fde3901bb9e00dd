package store

import (
	"container/list"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/prom"
	"github.com/rosterhq/roster/model"
)

// The read cache keeps the ServiceView of recently read services in memory, and beside
// each view the responses encoded from it (EncodedServiceView), so that a read that hits
// opens no read transaction and decodes nothing.
//
// An entry is the view of one service as of its last change. The commit that changes
// the service (anything that touches the service's watch key: its definition, clusters,
// instances, health, its deletion) removes the entry right after the bbolt commit and
// before the new applied index is published, so a read that waited for a write's index
// never finds the view from before it. A Restore raises the index floor; the cache
// drops everything when it sees a new floor, which it checks under the lock Restore
// swaps the file under. Each entry holds the store's watch channel of its service, which
// a hit adds to the caller's WatchSet: blocking queries wake exactly as after a read of
// the file.
//
// A read that misses fills the entry only if no commit invalidated anything since
// before its read transaction began; otherwise it answers from its own read and leaves
// the entry for the next reader. The watch channels entries hold stay in the store's
// watch registry until their service changes, one per service at most, evicted or not.

// DefaultReadCacheSize is the read cache's memory budget when Options.ReadCacheSize is 0.
const DefaultReadCacheSize = 64 << 20

// maxEncodedPerView bounds the encoded responses kept beside one view (one per filter).
const maxEncodedPerView = 16

// Cache layers, the label of the read cache's metrics.
const (
	layerView    = 0 // decoded ServiceViews
	layerEncoded = 1 // responses encoded from them
)

var layerNames = [2]string{"view", "encoded"}

// viewCache is the read cache: entries by service, least recently used evicted first
// when their estimated size passes max bytes.
type viewCache struct {
	max int64

	mu      sync.Mutex
	entries map[model.ServiceKey]*viewEntry
	lru     list.List // of *viewEntry, most recently used at the front
	bytes   [2]int64  // by layer
	// floor is the store's index floor the entries were read at.
	floor uint64
	// gen counts invalidations; a read that started before one does not fill.
	gen uint64

	hits, misses, evictions [2]atomic.Uint64
}

// viewEntry is the cached view of one service. Everything but encoded is immutable
// once the entry is in the cache; encoded is guarded by the cache's lock.
type viewEntry struct {
	key  model.ServiceKey
	idx  uint64
	view ServiceView
	// changed is the store's watch channel of the service, closed on its next change.
	changed <-chan struct{}
	// size and encodedSize are the estimated bytes of the view and of encoded.
	size, encodedSize int64
	encoded           map[string][]byte
	elem              *list.Element
}

func newViewCache(max int64) *viewCache {
	return &viewCache{max: max, entries: make(map[model.ServiceKey]*viewEntry)}
}

// lookup returns the entry of key read at floor, moved to the front, or nil. An
// entry whose watch channel is closed is stale (its service changed, see fill) and
// is dropped.
func (c *viewCache) lookup(key model.ServiceKey, floor uint64) *viewEntry {
	if floor != c.floor {
		c.dropAll()
		c.floor = floor
		return nil
	}
	e := c.entries[key]
	if e == nil {
		return nil
	}
	select {
	case <-e.changed:
		c.remove(e)
		return nil
	default:
	}
	c.lru.MoveToFront(e.elem)
	return e
}

// get returns the view of key, or nil on a miss, counting either.
func (c *viewCache) get(key model.ServiceKey, floor uint64) *viewEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.lookup(key, floor)
	c.count(layerView, e != nil)
	return e
}

// getEncoded returns the response encoded as variant from the view of key, and the
// view's entry; nil bytes on a miss of the encoded layer, a nil entry on a miss of both.
func (c *viewCache) getEncoded(key model.ServiceKey, floor uint64, variant string) (*viewEntry, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.lookup(key, floor)
	if e == nil {
		c.count(layerEncoded, false)
		c.count(layerView, false)
		return nil, nil
	}
	b, ok := e.encoded[variant]
	c.count(layerEncoded, ok)
	if !ok {
		c.count(layerView, true)
	}
	return e, b
}

func (c *viewCache) count(layer int, hit bool) {
	if hit {
		c.hits[layer].Add(1)
	} else {
		c.misses[layer].Add(1)
	}
}

// generation returns the invalidation count, sampled before a read that may fill.
func (c *viewCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// fill caches view v of key (index idx), read at floor by a read that sampled the
// invalidation count gen before its transaction began. It refuses, returning nil, when
// a commit invalidated anything since: v may predate that commit. The entry takes the
// service's current watch channel, which every later change of the service closes.
// That channel may also be about to close for a commit that invalidated before the read
// began (v already shows it) and has yet to fire its watches: lookup treats an entry
// whose channel is closed as absent, so the next read fills again.
func (c *viewCache) fill(w *watchRegistry, key model.ServiceKey, idx, floor, gen uint64, v ServiceView) *viewEntry {
	size := viewSize(v)
	if size > c.max {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || floor != c.floor {
		return nil
	}
	ch := w.channel(watchService(key))
	if old := c.entries[key]; old != nil {
		c.remove(old)
	}
	e := &viewEntry{key: key, idx: idx, view: v, changed: ch, size: size}
	e.elem = c.lru.PushFront(e)
	c.entries[key] = e
	c.bytes[layerView] += size
	c.evict()
	return e
}

// attach keeps b, the response encoded as variant from e's view, while e is cached.
func (c *viewCache) attach(e *viewEntry, variant string, b []byte) {
	size := int64(len(b) + len(variant))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.key] != e || len(e.encoded) >= maxEncodedPerView || e.size+e.encodedSize+size > c.max {
		return
	}
	if _, ok := e.encoded[variant]; ok {
		return
	}
	if e.encoded == nil {
		e.encoded = make(map[string][]byte, 2)
	}
	e.encoded[variant] = b
	e.encodedSize += size
	c.bytes[layerEncoded] += size
	c.evict()
}

// invalidate drops the entries of the services whose watch keys a commit touched.
func (c *viewCache) invalidate(touched map[string]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k := range touched {
		if key, ok := serviceOfWatchKey(k); ok {
			if e := c.entries[key]; e != nil {
				c.remove(e)
			}
		}
	}
}

// reset drops every entry (Close).
func (c *viewCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.dropAll()
}

func (c *viewCache) dropAll() {
	for _, e := range c.entries {
		c.remove(e)
	}
}

// evict removes least recently used entries until the cache fits its budget.
func (c *viewCache) evict() {
	for c.bytes[layerView]+c.bytes[layerEncoded] > c.max {
		back := c.lru.Back()
		if back == nil {
			return
		}
		e := back.Value.(*viewEntry)
		c.evictions[layerView].Add(1)
		c.evictions[layerEncoded].Add(uint64(len(e.encoded)))
		c.remove(e)
	}
}

func (c *viewCache) remove(e *viewEntry) {
	c.bytes[layerView] -= e.size
	c.bytes[layerEncoded] -= e.encodedSize
	c.lru.Remove(e.elem)
	delete(c.entries, e.key)
}

// usage returns the bytes held by layer.
func (c *viewCache) usage(layer int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes[layer]
}

// viewSize estimates the memory a view holds: its structs, strings and maps.
func viewSize(v ServiceView) int64 {
	const (
		mapOverhead   = 48
		entryOverhead = 16
	)
	mapSize := func(m map[string]string) int64 {
		if m == nil {
			return 0
		}
		n := int64(mapOverhead)
		for k, v := range m {
			n += entryOverhead + int64(2*unsafe.Sizeof("")) + int64(len(k)+len(v))
		}
		return n
	}
	n := int64(unsafe.Sizeof(viewEntry{})) + int64(len(v.Service.Namespace)+len(v.Service.Group)+len(v.Service.Name)) + mapSize(v.Service.Metadata)
	n += int64(cap(v.Clusters)) * int64(unsafe.Sizeof(model.Cluster{}))
	for _, c := range v.Clusters {
		hc := c.HealthCheck
		n += int64(len(c.Name)+len(hc.Path)+len(hc.TLSServerName)+len(hc.TLSCAPEM)+8*len(hc.ExpectedStatus)) +
			mapSize(c.Metadata) + mapSize(hc.Headers)
	}
	n += int64(cap(v.Instances)) * int64(unsafe.Sizeof(model.Instance{}))
	for _, in := range v.Instances {
		n += int64(len(in.IP)+len(in.Cluster)) + mapSize(in.Metadata)
	}
	return n
}

// readCacheCollectors are the read cache's metrics, read from its counters.
func (c *viewCache) collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for layer, name := range layerNames {
		labels := prometheus.Labels{"layer": name}
		out = append(out,
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "roster_read_cache_hits_total", Help: "Reads answered from the read cache, by layer (view: decoded services; encoded: whole responses).",
				ConstLabels: labels,
			}, func() float64 { return float64(c.hits[layer].Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "roster_read_cache_misses_total", Help: "Reads the read cache could not answer, by layer.",
				ConstLabels: labels,
			}, func() float64 { return float64(c.misses[layer].Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "roster_read_cache_evictions_total", Help: "Read cache items evicted to keep within --read-cache-size, by layer.",
				ConstLabels: labels,
			}, func() float64 { return float64(c.evictions[layer].Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "roster_read_cache_bytes", Help: "Estimated memory held by the read cache, by layer.",
				ConstLabels: labels,
			}, func() float64 { return float64(c.usage(layer)) }),
		)
	}
	return out
}

// RegisterMetrics registers the read cache's metrics with reg; nothing when the cache
// is off.
func (s *Store) RegisterMetrics(reg prometheus.Registerer) error {
	if s.views == nil || reg == nil {
		return nil
	}
	for _, col := range s.views.collectors() {
		if _, err := prom.Register(reg, col); err != nil {
			return err
		}
	}
	return nil
}

// ServiceView reads a service, its clusters (by name) and its instances (by IP, port)
// as of one point in time, with the service's ModifyIndex; model.ErrNotFound if the
// service does not exist. It is answered from the read cache when the service's view
// is there: the view returned is shared and must not be modified, nor the slices and
// maps in it.
func (s *Store) ServiceView(ws *WatchSet, key model.ServiceKey) (uint64, ServiceView, error) {
	if s.views == nil {
		return s.UncachedServiceView(ws, key)
	}
	e, _, err := s.cached(ws, key, "")
	if err != nil {
		return 0, ServiceView{}, err
	}
	if e != nil {
		return e.idx, e.view, nil
	}
	idx, v, _, err := s.readAndFill(ws, key)
	return idx, v, err
}

// EncodedServiceView returns encode's result for the service's view (ServiceView's
// index and view), computed once per change of the service and variant and kept
// beside the cached view: variant must name everything besides the view that the
// bytes depend on. The bytes returned are shared and must not be modified. An error
// of ServiceView or of encode is returned as it is and nothing is kept.
func (s *Store) EncodedServiceView(ws *WatchSet, key model.ServiceKey, variant string, encode func(uint64, ServiceView) ([]byte, error)) (uint64, []byte, error) {
	if s.views == nil {
		idx, v, err := s.UncachedServiceView(ws, key)
		if err != nil {
			return idx, nil, err
		}
		b, err := encode(idx, v)
		return idx, b, err
	}
	e, b, err := s.cached(ws, key, variant)
	if err != nil {
		return 0, nil, err
	}
	if b != nil {
		return e.idx, b, nil
	}
	var (
		idx uint64
		v   ServiceView
	)
	if e != nil {
		idx, v = e.idx, e.view
	} else if idx, v, e, err = s.readAndFill(ws, key); err != nil {
		return idx, nil, err
	}
	if b, err = encode(idx, v); err != nil {
		return idx, nil, err
	}
	if e != nil {
		s.views.attach(e, variant, b)
	}
	return idx, b, nil
}

// cached looks key up in the read cache, for the view alone (variant "") or for an
// encoded response too, and adds the entry's watch channel to ws on a hit. It holds
// the store's lock, so that the floor it compares is the one of the file being read.
func (s *Store) cached(ws *WatchSet, key model.ServiceKey, variant string) (*viewEntry, []byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	var (
		e *viewEntry
		b []byte
	)
	if variant == "" {
		e = s.views.get(key, s.floor)
	} else {
		e, b = s.views.getEncoded(key, s.floor, variant)
	}
	if e != nil && ws != nil {
		ws.Add(e.changed)
	}
	return e, b, nil
}

// readAndFill reads a service's view from the file and caches it when it may (see
// fill), returning the entry or nil.
func (s *Store) readAndFill(ws *WatchSet, key model.ServiceKey) (uint64, ServiceView, *viewEntry, error) {
	gen := s.views.generation()
	var e *viewEntry
	idx, v, err := s.serviceView(ws, key, func(r *reader, idx uint64, v ServiceView) {
		e = s.views.fill(s.watches, key, idx, r.s.floor, gen, v)
	})
	return idx, v, e, err
}

// UncachedServiceView is ServiceView read from the file, bypassing the read cache.
func (s *Store) UncachedServiceView(ws *WatchSet, key model.ServiceKey) (uint64, ServiceView, error) {
	return s.serviceView(ws, key, nil)
}

// serviceView reads a service's view in one read transaction and, when it exists,
// hands it to read (when not nil) inside that transaction.
func (s *Store) serviceView(ws *WatchSet, key model.ServiceKey, read func(r *reader, idx uint64, v ServiceView)) (uint64, ServiceView, error) {
	var (
		idx uint64
		v   ServiceView
	)
	err := s.view(ws, func(r *reader) error {
		var err error
		if idx, v.Service, err = r.service(key); err != nil {
			return err
		}
		if v.Clusters, err = r.clusterList(key); err != nil {
			return err
		}
		if v.Instances, err = r.instanceList(key); err != nil {
			return err
		}
		if read != nil {
			read(r, idx, v)
		}
		return nil
	})
	if err != nil {
		return idx, ServiceView{}, err
	}
	return idx, v, nil
}
