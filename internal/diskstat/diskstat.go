// Package diskstat reports the free and total space of the file system holding a path.
package diskstat

import "errors"

// ErrUnsupported is returned where the platform cannot tell.
var ErrUnsupported = errors.New("diskstat: free space is unknown on this platform")

// Usage is the space of one file system, in bytes.
type Usage struct {
	// Free is what this process may still write (blocks available to unprivileged users).
	Free uint64
	// Total is the file system's size.
	Total uint64
}

// FreeFraction is Free/Total (1 when Total is 0).
func (u Usage) FreeFraction() float64 {
	if u.Total == 0 {
		return 1
	}
	return float64(u.Free) / float64(u.Total)
}
