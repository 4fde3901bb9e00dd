//go:build !unix

package tlsutil

// setUmask does nothing where there is no umask.
func setUmask(int) int { return 0 }
