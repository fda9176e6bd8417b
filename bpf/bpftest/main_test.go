package bpftest_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// cgroup it made.
func TestKilledTestsLeaveNoMountNorCgroup(t *testing.T) {
	bpftest.Require(t)
	cg := bpftest.Cgroup(t) // our own cgroup2 mount, to look into
	root := filepath.Dir(cg)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LBSTATE_TEST_MOUNT_NS=") && !strings.HasPrefix(kv, "LBSTATE_TEST_CGROUP_LOG=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMountsAndHangs$", "-test.timeout=5s", "-test.v")
	cmd.Env = append(env, hangEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the hanging test was not killed:\n%s", out)
	}
	var pinDir, cgroup string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "pindir="); ok {
			pinDir = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cgroup="); ok {
			cgroup = v
		}
	}
	if pinDir == "" || cgroup == "" {
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
	fmt.Printf("pindir=%s\ncgroup=%s\n", dir, filepath.Base(cg))
	time.Sleep(time.Minute)
}
