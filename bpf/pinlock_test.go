package bpf_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// startPinHolder runs this test binary as another agent holding kernel
// maps on dir, and returns it once they are open.
func startPinHolder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pinHolderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	mustDo(t, err)
	stdout, err := cmd.StdoutPipe()
	mustDo(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	mustDo(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("the holder did not open its maps: %q %v; stderr: %s", line, err, stderr.String())
	}
	return cmd
}

// Two agents on one pin directory once silently deleted each other's
// entries and handed out the same rev-NAT IDs: a second agent now refuses
// the directory while the first lives, naming it by its PID; once the
// first dies (kill -9, no cleanup), the next start succeeds.
func TestSecondAgentIsRefusedThePinDirectoryUntilTheHolderDies(t *testing.T) {
	bpftest.Require(t)
	cfg := smallConfig()
	cfg.LBPinDir = filepath.Join(bpftest.PinDir(t), "maps")
	holder := startPinHolder(t, cfg.LBPinDir)

	m, err := bpf.NewKernelMaps(cfg)
	if err == nil {
		m.Close()
		t.Fatal("a second agent opened the maps of a pin directory a live agent holds")
	}
	if !errors.Is(err, bpf.ErrPinDirInUse) {
		t.Errorf("error %q does not match ErrPinDirInUse", err)
	}
	for _, want := range []string{cfg.LBPinDir, "PID " + strconv.Itoa(holder.Process.Pid), "--lb-pin-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	mustDo(t, holder.Process.Kill())
	holder.Wait()
	m, err = bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	m.Close()
}

// Closing the maps releases the pin directory: an agent stopping and
// starting again in one process (as tests and restarts in place do) gets
// it back.
func TestClosedMapsReleaseThePinDirectory(t *testing.T) {
	bpftest.Require(t)
	cfg := smallConfig()
	cfg.LBPinDir = filepath.Join(bpftest.PinDir(t), "maps")
	for range 2 {
		m, err := bpf.NewKernelMaps(cfg)
		mustDo(t, err)
		mustDo(t, m.Close())
	}
}

// lbctl reads an agent's maps while it runs: OpenPinnedMaps takes no lock,
// but checks the pin directory's ownership as the agent does.
func TestOpenPinnedMapsReadsAHeldDirectoryButRefusesAForeignOne(t *testing.T) {
	dir := heldPinDir(t)
	m, err := bpf.OpenPinnedMaps(dir)
	if err != nil {
		t.Fatalf("lbctl could not read the maps of a running agent: %v", err)
	}
	m.Close()

	mustDo(t, os.Chown(filepath.Join(dir, "lb_services"), nobody, nobody))
	m, err = bpf.OpenPinnedMaps(dir)
	if err == nil {
		m.Close()
		t.Fatal("OpenPinnedMaps read a pin directory holding another user's map")
	}
	if !errors.Is(err, bpf.ErrPinDirUntrusted) || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("error %q: want ErrPinDirUntrusted naming the other user", err)
	}
}

// lbctl reading the maps of an agent of a version before lb_services_seq
// gets maps whose word reads 0 (no write counted), not a nil one.
func TestOpenPinnedMapsOfAnAgentBeforeTheWriteCounterReadsZero(t *testing.T) {
	dir := heldPinDir(t)
	mustDo(t, os.Remove(filepath.Join(dir, "lb_services_seq")))
	m, err := bpf.OpenPinnedMaps(dir)
	if err != nil {
		t.Fatalf("lbctl could not read the maps of an older agent: %v", err)
	}
	defer m.Close()
	if m.ServicesSeq == nil {
		t.Fatal("no ServicesSeq: a caller of Load panics")
	}
	if w := m.ServicesSeq.Load(); w != 0 {
		t.Errorf("the word of maps without lb_services_seq reads %#x, want 0", w)
	}
}

// heldPinDir returns the pin directory of maps an agent holds until the
// test ends.
func heldPinDir(t *testing.T) string {
	bpftest.Require(t)
	cfg := smallConfig()
	cfg.LBPinDir = filepath.Join(bpftest.PinDir(t), "maps")
	bpftest.KernelMaps(t, cfg)
	return cfg.LBPinDir
}
