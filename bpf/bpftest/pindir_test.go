package bpftest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// Each PinDir is an empty directory on bpffs of its own, and is gone with
// its pins when the test ends.
func TestPinDirIsAFreshBPFFSGoneAfterTheTest(t *testing.T) {
	var dirs []string
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			dir := bpftest.PinDir(t)
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
				t.Fatalf("%s is not on bpffs (statfs: %v)", dir, err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), ".debug") { // a new bpffs may list the kernel's maps.debug, progs.debug
					t.Errorf("%s holds %s, want nothing of ours", dir, e.Name())
				}
			}
			// A pin the other PinDir must not see.
			if err := os.Mkdir(filepath.Join(dir, "mine"), 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, dir)
		})
	}
	if len(dirs) < 2 {
		return // skipped
	}
	if dirs[0] == dirs[1] {
		t.Errorf("two PinDirs share %s", dirs[0])
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after its test: %v", dir, err)
		}
	}
}
