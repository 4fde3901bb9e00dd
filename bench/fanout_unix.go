//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// ensureOpenFiles raises this process's soft open-file limit to need when the hard limit
// allows, and fails with what to do when it does not.
func ensureOpenFiles(need int, who string) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // unknown: the dials will say
	}
	if lim.Cur >= uint64(need) {
		return nil
	}
	if lim.Max >= uint64(need) {
		raised := lim
		raised.Cur = uint64(need)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			return nil
		}
	}
	return fmt.Errorf("bench: %s needs %d open files and may open %d (hard limit %d): raise it with ulimit -n %d",
		who, need, lim.Cur, lim.Max, need)
}
