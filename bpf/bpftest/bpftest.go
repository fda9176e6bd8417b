// Package bpftest gives tests kernel BPF maps pinned in a bpffs of their
// own, and fault injection for in-memory maps (Faults).
//
// Run as root, PinDir mounts a private bpffs instance on a fresh temporary
// directory (each bpffs mount is an instance of its own, so tests never
// see each other's pins, nor an agent's) and unmounts it when the test
// ends. A process that may create BPF maps but not mount pins under
// /sys/fs/bpf when bpffs is mounted there. Otherwise kernel tests skip,
// and the first skip in a process prints one line saying why and how to
// run them; with LBSTATE_REQUIRE_BPF=1 (set by CI) they fail instead.
package bpftest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
)

// BPFFSRoot is where bpffs is conventionally mounted.
const BPFFSRoot = "/sys/fs/bpf"

// Available reports why the process cannot create BPF maps and pin them
// under BPFFSRoot, or nil if it can: for programs that pin there. Tests
// use Require and PinDir, which do not need BPFFSRoot.
func Available() error {
	if err := createMap(); err != nil {
		return err
	}
	return rootIsBPFFS()
}

// Required reports whether CI demands kernel maps (LBSTATE_REQUIRE_BPF=1).
func Required() bool { return os.Getenv("LBSTATE_REQUIRE_BPF") == "1" }

// Require skips (or, with LBSTATE_REQUIRE_BPF=1, fails) the test unless
// the process can create BPF maps and PinDir can give it a bpffs
// directory.
func Require(t testing.TB) {
	t.Helper()
	s := probed()
	if s.err == nil {
		return
	}
	if Required() {
		t.Fatalf("kernel BPF maps required (LBSTATE_REQUIRE_BPF=1): %v", s.err)
	}
	announceSkip.Do(func() {
		notice(fmt.Sprintf("lbstate: kernel BPF map tests skipped: %v; %s, or set LBSTATE_REQUIRE_BPF=1 to fail instead", s.err, s.fix))
	})
	t.Skipf("kernel BPF maps unavailable: %v (%s)", s.err, s.fix)
}

// PinDir returns a fresh, empty directory on bpffs, gone with its pins
// when the test ends.
func PinDir(t testing.TB) string {
	t.Helper()
	Require(t)
	if !probed().mount {
		dir, err := os.MkdirTemp(BPFFSRoot, "lbstate-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	requireOwnMountNS(t)
	dir := t.TempDir() // removed after the unmount below: cleanups run last first
	if err := mountBPFFS(dir); err != nil {
		t.Fatalf("mounting bpffs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's bpffs at %s: %v", dir, err)
		}
	})
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

// support is what the process may do, found out once.
type support struct {
	// err says why kernel maps are unavailable, fix how to make them
	// available; err is nil if they are.
	err error
	fix string
	// mount says whether PinDir mounts its own bpffs.
	mount bool
}

var (
	probed       = sync.OnceValue(probe)
	announceSkip sync.Once
)

func probe() support {
	if err := createMap(); err != nil {
		return support{err: err, fix: "run them as root (sudo go test ./...)"}
	}
	mountErr := probeMount()
	if mountErr == nil {
		return support{mount: true}
	}
	if err := rootIsBPFFS(); err != nil {
		return support{
			err: fmt.Errorf("%w, and mounting a bpffs of the tests' own failed: %w", err, mountErr),
			fix: fmt.Sprintf("run them as root, or mount -t bpf bpf %s", BPFFSRoot),
		}
	}
	return support{}
}

// createMap creates a map and opens it again by ID, as reading lb_maglev's
// inner maps does (which takes CAP_SYS_ADMIN, not only CAP_BPF).
func createMap() error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if errors.Is(err, unix.EPERM) {
		// cilium/ebpf points at MEMLOCK, which matters only before Linux
		// 5.11; missing privileges are the usual cause.
		return fmt.Errorf("creating a BPF map: %w", unix.EPERM)
	}
	if err != nil {
		return fmt.Errorf("creating a BPF map: %w", err)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return fmt.Errorf("reading a BPF map's info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return errors.New("the kernel does not give BPF map IDs")
	}
	byID, err := ebpf.NewMapFromID(id)
	if err != nil {
		return fmt.Errorf("opening a BPF map by ID: %w", err)
	}
	return byID.Close()
}

func rootIsBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFSRoot, &st); err != nil {
		return fmt.Errorf("%s: %w", BPFFSRoot, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not bpffs", BPFFSRoot)
	}
	return nil
}

// probeMount mounts a bpffs instance on a temporary directory and
// unmounts it, to learn whether PinDir may.
func probeMount() error {
	dir, err := os.MkdirTemp("", "lbstate-bpffs-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := mountBPFFS(dir); err != nil {
		return err
	}
	return unix.Unmount(dir, unix.MNT_DETACH)
}

func mountBPFFS(dir string) error {
	return unix.Mount("bpf", dir, "bpf", 0, "")
}

// notice prints a line where whoever runs the tests sees it: go test
// discards the output of a passing package unless -v, so the line goes to
// the controlling terminal when there is one, to stderr otherwise.
func notice(line string) {
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		fmt.Fprintln(tty, line)
		return
	}
	fmt.Fprintln(os.Stderr, line)
}

// PinIncompatibleMap replaces the map pinned as name in pinDir with an
// empty one whose values are 8 bytes larger: what a version with another
// layout of that map would have left there.
func PinIncompatibleMap(t testing.TB, pinDir, name string) {
	t.Helper()
	path := filepath.Join(pinDir, name)
	old, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &ebpf.MapSpec{
		Name: name, Type: old.Type(), KeySize: old.KeySize(), ValueSize: old.ValueSize() + 8,
		MaxEntries: old.MaxEntries(), Flags: old.Flags(),
	}
	old.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Pin(path); err != nil {
		t.Fatal(err)
	}
}

// requireOwnMountNS fails the test unless its mounts die with the process
// (Main), so that a test killed before its cleanups leaves none behind.
func requireOwnMountNS(t testing.TB) {
	t.Helper()
	if !inOwnMountNS() {
		t.Fatal("this test mounts bpffs or cgroup2: its package's TestMain must call bpftest.Main(m), which runs the tests in a mount namespace of their own")
	}
}
