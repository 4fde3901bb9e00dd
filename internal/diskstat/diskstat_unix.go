//go:build linux || darwin || freebsd || openbsd || netbsd

package diskstat

import "golang.org/x/sys/unix"

// Of returns the usage of the file system holding path.
func Of(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, err
	}
	bs := uint64(st.Bsize) //nolint:unconvert // the field's type differs by platform
	return Usage{Free: uint64(st.Bavail) * bs, Total: uint64(st.Blocks) * bs}, nil
}
