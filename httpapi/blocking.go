package httpapi

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/rosterhq/roster/store"
)

// blockingRead runs fn once for a plain read. For a blocking query it runs fn until the
// index it returns is above o.index, waiting on the watches fn registered between runs,
// and returns the current data when the wait (plus jitter up to wait/16) ends first.
// Errors end the query at once.
func (s *server) blockingRead(ctx context.Context, o readOptions, fn func(ws *store.WatchSet) (uint64, error)) (uint64, error) {
	if !o.blocking {
		return fn(nil)
	}
	ctx, cancel := context.WithTimeout(ctx, withJitter(o.wait))
	defer cancel()
	for {
		ws := store.NewWatchSet()
		idx, err := fn(ws)
		if err != nil || idx > o.index {
			return idx, err
		}
		if !ws.Wait(ctx) {
			return idx, nil
		}
	}
}

// withJitter adds a random duration up to d/16, so that many clients blocked with the
// same wait do not all come back at once.
func withJitter(d time.Duration) time.Duration {
	if j := int64(d / 16); j > 0 {
		return d + time.Duration(rand.Int64N(j))
	}
	return d
}
