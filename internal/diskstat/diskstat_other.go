//go:build !(linux || darwin || freebsd || openbsd || netbsd)

package diskstat

// Of reports ErrUnsupported on this platform.
func Of(string) (Usage, error) { return Usage{}, ErrUnsupported }
