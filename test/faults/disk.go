//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A node's own disk: a tmpfs of a fixed size mounted on the directory holding its data
// directory. Filling it makes every write of the node that needs a new block fail with
// ENOSPC, as on a real full disk; the rest of the machine is unaffected.

// DefaultDiskBytes is the size of each node's file system in the fault tests: room for
// a round's Raft log, state and snapshots several times over.
const DefaultDiskBytes = 512 << 20

// CanMountDisks reports whether this process may mount a tmpfs (it runs as root).
func CanMountDisks() bool { return os.Geteuid() == 0 }

// mountDisk mounts a tmpfs of size bytes on dir.
func mountDisk(dir string, size int64) error {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV,
		fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return fmt.Errorf("mount a %d-byte tmpfs on %s (the disk-full fault needs root): %w", size, dir, err)
	}
	return nil
}

// unmountDisk unmounts the tmpfs on dir after copying data (a directory inside it) to
// the disk beneath, where it takes data's place.
func unmountDisk(dir, data string) error {
	saved := dir + ".saved"
	if err := os.RemoveAll(saved); err != nil {
		return err
	}
	copyErr := copyTree(data, saved)
	if err := syscall.Unmount(dir, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if copyErr != nil {
		return fmt.Errorf("saving %s before unmounting: %w", data, copyErr)
	}
	if err := os.MkdirAll(filepath.Dir(data), 0o755); err != nil {
		return err
	}
	return os.Rename(saved, data)
}

// copyTree copies the directory src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		return copyFile(path, to)
	})
}

// fillDisk writes zeros into path until the file system holding it is full and returns
// how many bytes it wrote.
func fillDisk(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	for _, size := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, size)
		for {
			n, err := f.Write(buf)
			total += int64(n)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// DiskFull fills the file system of a random node (leader or follower) under the
// workload, then frees it. The node must notice: within diskFullNotice it reports not
// ready for a reason naming the failing write, and it stays up (no crash) for as long
// as the disk is full. The rest of the cluster keeps a quorum; the checker holds every
// acknowledged write to having happened, and the runner's wait for a healthy cluster
// after Heal proves the node recovers once the space is back.
type DiskFull struct {
	node   *Node
	filler string
	done   func()
}

// diskFullNotice bounds how long a node may report ready with a full disk under load.
const diskFullNotice = 20 * time.Second

// Name is "disk-full".
func (*DiskFull) Name() string { return "disk-full" }

// Inject fills a node's disk and waits until the node reports it.
func (f *DiskFull) Inject(ctx context.Context, env *Env) error {
	if _, err := env.leader(ctx); err != nil {
		return err
	}
	var nodes []*Node
	for _, n := range env.Cluster.Nodes {
		if n.Running() && !n.Paused() {
			nodes = append(nodes, n)
		}
	}
	n := nodes[env.Rand.IntN(len(nodes))]
	if n.disk == "" {
		return fmt.Errorf("%s has no file system of its own (ClusterConfig.DiskBytes)", n.ID)
	}
	role := "follower"
	if l, _ := env.leader(ctx); l == n {
		role = "leader"
	}
	f.node, f.filler = n, filepath.Join(n.disk, "filler")
	f.done = env.event(fmt.Sprintf("fill the disk of %s (%s)", n.ID, role))
	wrote, err := fillDisk(f.filler)
	if err != nil {
		return fmt.Errorf("filling the disk of %s: %w", n.ID, err)
	}
	env.Logf("fault: filled the disk of %s with %d MiB", n.ID, wrote>>20)

	deadline := time.Now().Add(diskFullNotice)
	var last string
	for {
		if !n.Running() {
			return fmt.Errorf("%s exited when its disk filled (see %s)", n.ID, n.LogPath)
		}
		if cl := n.Client(); cl != nil {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			r, err := cl.Ready(rctx)
			cancel()
			switch {
			case err != nil:
				last = err.Error()
			case r.Ready:
				last = "ready"
			case strings.Contains(r.Reason, "cannot"):
				env.Logf("fault: %s with a full disk is not ready: %s", n.ID, r.Reason)
				return nil
			default:
				last = "not ready: " + r.Reason
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not report its full disk within %s under load (last: %s)", n.ID, diskFullNotice, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Heal checks that the node is still up and frees its disk.
func (f *DiskFull) Heal(_ context.Context, env *Env) error {
	defer f.done()
	if err := os.Remove(f.filler); err != nil {
		return err
	}
	if !f.node.Running() {
		return fmt.Errorf("%s exited while its disk was full (see %s)", f.node.ID, f.node.LogPath)
	}
	env.Logf("fault: freed the disk of %s", f.node.ID)
	return nil
}
