package bpftest_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// TestMain runs the tests in a mount namespace of their own, so that the
// bpffs and cgroup2 mounts of kernel tests die with them (bpftest.Main).
func TestMain(m *testing.M) { bpftest.Main(m) }

// hangEnv makes TestHelperMountsAndHangs run: it is the test that the
// test below kills.
const hangEnv = "LBSTATE_TEST_HANG"

// A test process killed before its cleanups ran (here by go test's
// -timeout) leaves no bpffs or cgroup2 mount behind, and Main removes the
// cgroup it made and its temporary directories.
func TestKilledTestsLeaveNoMountNorCgroup(t *testing.T) {
	bpftest.Require(t)
	cg := bpftest.Cgroup(t) // our own cgroup2 mount, to look into
	root := filepath.Dir(cg)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMountsAndHangs$", "-test.timeout=5s", "-test.v")
	cmd.Env = append(outsideEnv(), hangEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the hanging test was not killed:\n%s", out)
	}
	var pinDir, cgroup, tmp string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "tmp="); ok {
			tmp = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "pindir="); ok {
			pinDir = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cgroup="); ok {
			cgroup = v
		}
	}
	if pinDir == "" || cgroup == "" || tmp == "" {
		t.Fatalf("the hanging test did not say what it made:\n%s", out)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), pinDir) {
		t.Errorf("bpffs at %s is still mounted after its test was killed", pinDir)
	}
	if _, err := os.Stat(filepath.Join(root, cgroup)); !os.IsNotExist(err) {
		t.Errorf("cgroup %s is still there after its test was killed (%v)\n%s", cgroup, err, out)
		bpftest.RemoveCgroup(filepath.Join(root, cgroup))
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the killed test's temporary directory %s is still there (%v)", tmp, err)
	}
	if !strings.Contains(string(out), "removed cgroup "+cgroup) {
		t.Errorf("Main did not say it removed the cgroup:\n%s", out)
	}
}

// TestHelperMountsAndHangs is the test the one above kills: it mounts a
// bpffs and a cgroup2, makes a cgroup, says where, and hangs.
func TestHelperMountsAndHangs(t *testing.T) {
	if os.Getenv(hangEnv) != "1" {
		t.Skip("run by TestKilledTestsLeaveNoMountNorCgroup")
	}
	dir := bpftest.PinDir(t)
	cg := bpftest.Cgroup(t)
	fmt.Printf("pindir=%s\ncgroup=%s\ntmp=%s\n", dir, filepath.Base(cg), t.TempDir())
	time.Sleep(time.Minute)
}

// A test process killed by a signal is reported as a shell reports it
// (128 + the signal), not as a test failure's 1.
func TestKilledTestsExitWithTheSignal(t *testing.T) {
	bpftest.Require(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperKillsItself$", "-test.v")
	cmd.Env = append(outsideEnv(), killEnv+"=1")
	out, err := cmd.CombinedOutput()
	exit, ok := errors.AsType[*exec.ExitError](err)
	if !ok || exit.ExitCode() != 128+int(syscall.SIGKILL) {
		t.Fatalf("tests killed by SIGKILL: %v, want exit status %d\n%s", err, 128+int(syscall.SIGKILL), out)
	}
	if !strings.Contains(string(out), "killed") {
		t.Errorf("Main did not say the tests were killed:\n%s", out)
	}
}

const killEnv = "LBSTATE_TEST_KILL_ITSELF"

// TestHelperKillsItself is the test the one above runs: its process
// kills itself.
func TestHelperKillsItself(t *testing.T) {
	if os.Getenv(killEnv) != "1" {
		t.Skip("run by TestKilledTestsExitWithTheSignal")
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute)
}

// outsideEnv is this process's environment as Main found it outside its
// mount namespace, so that a test binary run with it runs Main anew.
func outsideEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LBSTATE_TEST_MOUNT_NS=") && !strings.HasPrefix(kv, "LBSTATE_TEST_CGROUP_LOG=") {
			env = append(env, kv)
		}
	}
	return env
}
