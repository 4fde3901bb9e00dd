package healthcheck

import "time"

// firstRetry is the first wait of a rescan that failed; submissions start from
// FlushInterval instead.
const firstRetry = 100 * time.Millisecond

// backoff spaces the retries of something that fails (a SetHealth or AutoDeregister
// submission, a rescan of the instances): each failure doubles the wait, from at least a
// floor up to maxRetryBackoff, and a success starts it over. The zero value has no wait.
type backoff struct {
	wait time.Duration
	at   time.Time // no retry before this
}

// failed records a failure at now and returns the wait before the next attempt.
func (b *backoff) failed(now time.Time, floor time.Duration) time.Duration {
	b.wait = min(max(2*b.wait, floor), maxRetryBackoff)
	b.at = now.Add(b.wait)
	return b.wait
}

// succeeded starts the backoff over.
func (b *backoff) succeeded() { *b = backoff{} }

// holds reports whether an attempt at now must still wait.
func (b *backoff) holds(now time.Time) bool { return now.Before(b.at) }
