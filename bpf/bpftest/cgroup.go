package bpftest

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup returns the path of a cgroup (v2) of the test's own: a child
// cgroup in a cgroup2 hierarchy the test mounts on a temporary directory,
// so that it works where the machine mounts cgroup v1 at /sys/fs/cgroup,
// and programs attached to it act only on the processes the test puts in
// it. The cgroup is removed, and the hierarchy unmounted, when the test
// ends: the test must have ended those processes.
func Cgroup(t testing.TB) string {
	t.Helper()
	Require(t)
	requireOwnMountNS(t)
	root := t.TempDir()
	if err := unix.Mount("cgroup2", root, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mounting cgroup2 on %s: %v", root, err)
	}
	dir, err := os.MkdirTemp(root, "lbstate-test-")
	if err != nil {
		unix.Unmount(root, unix.MNT_DETACH)
		t.Fatalf("creating the test's cgroup: %v", err)
	}
	logCgroup(root, dir)
	t.Cleanup(func() {
		if err := RemoveCgroup(dir); err != nil {
			t.Errorf("removing the test's cgroup: %v", err)
		}
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's cgroup2 at %s: %v", root, err)
		}
	})
	return dir
}

// RemoveCgroup removes a cgroup directory once its processes are gone: a
// process that just exited may leave it a moment later. The cgroup2
// hierarchy outlives its mounts, so a test removes what it created.
func RemoveCgroup(dir string) error {
	var err error
	for range 100 {
		if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}
