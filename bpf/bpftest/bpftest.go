// Package bpftest gives tests kernel BPF maps pinned in a throwaway bpffs
// directory. Outside CI a test skips when the process may not create BPF
// maps; with LBSTATE_REQUIRE_BPF=1 (set by CI) it fails instead.
package bpftest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
)

// BPFFSRoot is where bpffs is expected to be mounted.
const BPFFSRoot = "/sys/fs/bpf"

// Available reports why the process cannot create BPF maps and pin them
// under BPFFSRoot, or nil if it can.
func Available() error { return probe() }

// Required reports whether CI demands kernel maps (LBSTATE_REQUIRE_BPF=1).
func Required() bool { return os.Getenv("LBSTATE_REQUIRE_BPF") == "1" }

// Require skips (or, with LBSTATE_REQUIRE_BPF=1, fails) the test unless
// the process can create BPF maps and pin them under BPFFSRoot.
func Require(t testing.TB) {
	t.Helper()
	if err := probe(); err != nil {
		if Required() {
			t.Fatalf("kernel BPF maps required (LBSTATE_REQUIRE_BPF=1): %v", err)
		}
		t.Skipf("kernel BPF maps unavailable: %v", err)
	}
}

func probe() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFSRoot, &st); err != nil {
		return fmt.Errorf("%s: %w", BPFFSRoot, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not bpffs (mount -t bpf bpf %s)", BPFFSRoot, BPFFSRoot)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("creating a BPF map: %w", err)
	}
	return m.Close()
}

// PinDir returns a fresh directory under bpffs, removed with its pins when
// the test ends.
func PinDir(t testing.TB) string {
	t.Helper()
	Require(t)
	dir, err := os.MkdirTemp(BPFFSRoot, "lbstate-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Config returns bpf.DefaultConfig pinned in a fresh directory (see
// PinDir).
func Config(t testing.TB) bpf.Config {
	cfg := bpf.DefaultConfig
	cfg.LBPinDir = filepath.Join(PinDir(t), "maps")
	return cfg
}

// KernelMaps opens kernel maps for cfg and closes them when the test ends.
func KernelMaps(t testing.TB, cfg bpf.Config) *bpf.Maps {
	t.Helper()
	Require(t)
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
