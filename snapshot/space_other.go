//go:build !(linux || darwin || freebsd || dragonfly)

package snapshot

// statfsFree cannot measure free space here; the space checks are skipped, and the
// expansion and size limits still bound what an archive can write.
func statfsFree(string) (int64, error) { return 0, errSpaceUnknown }
