package store

import "github.com/rosterhq/roster/model"

// PeekCachedView returns what the read cache holds for key, as a read at the store's
// current floor would find it, without the lazy check of the entry's watch channel:
// it shows whether the commits themselves dropped the views they changed.
func PeekCachedView(s *Store, key model.ServiceKey) (uint64, ServiceView, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := s.views
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil || c.floor != s.floor {
		return 0, ServiceView{}, false
	}
	return e.idx, e.view, true
}

// WatchSetFired reports whether one of ws's channels is closed, without waiting.
func WatchSetFired(ws *WatchSet) bool {
	for ch := range ws.chans {
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}
