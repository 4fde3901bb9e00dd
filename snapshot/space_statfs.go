//go:build linux || darwin || freebsd || dragonfly

package snapshot

import (
	"math"
	"syscall"
)

// statfsFree returns the bytes available to an unprivileged process on the file system
// of dir (f_bavail, not f_bfree: the blocks reserved for root are not ours to fill).
func statfsFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err // a bare errno: it names no path
	}
	// The field types differ between platforms; FreeBSD's f_bavail can be negative.
	avail, bsize := int64(st.Bavail), int64(st.Bsize)
	if avail <= 0 || bsize <= 0 {
		return 0, nil
	}
	if avail > math.MaxInt64/bsize {
		return math.MaxInt64, nil
	}
	return avail * bsize, nil
}
