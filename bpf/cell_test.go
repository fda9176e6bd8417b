package bpf_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// startCell runs bpf.Cell with cfg and mode and returns its maps and log.
func startCell(t *testing.T, cfg bpf.Config, mode string) (*bpf.Maps, string) {
	t.Helper()
	var got *bpf.Maps
	h := hive.New(bpf.Cell, cell.Invoke(func(m *bpf.Maps) { got = m }))
	hive.AddConfigOverride(h, func(c *bpf.Config) { *c = cfg })
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = mode })
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatalf("start: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })
	return got, logs.String()
}

// On a machine without bpffs where the pins go, a root agent mounts bpffs
// on the pin directory's parent, says so, and uses kernel maps there.
func TestCellMountsBPFFSWhereThePinDirectoryNeedsIt(t *testing.T) {
	bpftest.Require(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting bpffs needs root")
	}
	parent := filepath.Join(t.TempDir(), "bpffs") // removed after the unmount: cleanups run last first
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(parent, unix.MNT_DETACH) })
	cfg := smallConfig()
	cfg.LBPinDir = filepath.Join(parent, "lbstate")
	m, logs := startCell(t, cfg, "auto")
	if m.Kind != "kernel" {
		t.Fatalf("got %s maps, want kernel; log:\n%s", m.Kind, logs)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
		t.Fatalf("%s is not bpffs after the cell started (statfs: %v)", parent, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.LBPinDir, "lb_services")); err != nil {
		t.Errorf("lb_services not pinned on the mounted bpffs: %v", err)
	}
	if !strings.Contains(logs, `level=INFO msg="Mounted bpffs`) || !strings.Contains(logs, "dir="+parent) {
		t.Errorf("no INFO line saying bpffs was mounted on %s; log:\n%s", parent, logs)
	}
}

// When auto mode cannot use kernel maps, it says why and how to fix it in
// one line, and uses in-memory maps.
func TestAutoModeFallsBackWithOneLineSayingHowToFixIt(t *testing.T) {
	parent := t.TempDir() // off bpffs, and not empty: nothing may be mounted over it
	if err := os.WriteFile(filepath.Join(parent, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := smallConfig()
	cfg.LBPinDir = filepath.Join(parent, "lbstate")
	m, logs := startCell(t, cfg, "auto")
	if m.Kind != "memory" {
		t.Fatalf("got %s maps, want memory; log:\n%s", m.Kind, logs)
	}
	var lines []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "module=lb-maps") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines of lb-maps, want 1:\n%s", len(lines), logs)
	}
	for _, want := range []string{"Cannot use kernel BPF maps, using in-memory maps", "mount -t bpf bpf " + parent} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %q does not say %q", lines[0], want)
		}
	}
}

// In kernel mode the same problem is an error, not a fallback.
func TestKernelModeFailsWhereNoBPFFSCanHoldThePins(t *testing.T) {
	parent := t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := smallConfig()
	cfg.LBPinDir = filepath.Join(parent, "lbstate")
	h := hive.New(bpf.Cell, cell.Invoke(func(*bpf.Maps) {}))
	hive.AddConfigOverride(h, func(c *bpf.Config) { *c = cfg })
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "kernel" })
	err := h.Populate(slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "mount -t bpf bpf "+parent) {
		t.Fatalf("kernel mode with no bpffs for the pins: %v, want an error saying how to mount it", err)
	}
}

// A pin directory the agent refuses (another user's, writable by others,
// held by another agent) is an error in auto mode too. Once, auto mode
// fell back to in-memory maps with one INFO line, and the agent ran and
// reported normally while nothing reached the kernel.
func TestAutoModeFailsOnARefusedPinDirectory(t *testing.T) {
	bpftest.Require(t)
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"owned by another user", func(t *testing.T, dir string) {
			mustDo(t, os.Mkdir(dir, 0o755))
			mustDo(t, os.Chown(dir, nobody, nobody))
		}, "belongs to uid 65534"},
		{"writable by others", func(t *testing.T, dir string) {
			mustDo(t, os.Mkdir(dir, 0o777))
			mustDo(t, os.Chmod(dir, 0o777))
		}, "writable by its group or others"},
		{"held by another agent", func(t *testing.T, dir string) {
			startPinHolder(t, dir)
		}, "is held by another agent, PID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.LBPinDir = filepath.Join(bpftest.PinDir(t), "maps")
			c.setup(t, cfg.LBPinDir)
			h := hive.New(bpf.Cell, cell.Invoke(func(*bpf.Maps) {}))
			hive.AddConfigOverride(h, func(c *bpf.Config) { *c = cfg })
			hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "auto" })
			var logs bytes.Buffer
			err := h.Populate(slog.New(slog.NewTextHandler(&logs, nil)))
			if err == nil {
				t.Fatalf("auto mode started on a refused pin directory; log:\n%s", logs.String())
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}
