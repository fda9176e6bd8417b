package bpftest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Environment of the processes Main starts.
const (
	// mountNSEnv is set in the test process Main runs in a mount
	// namespace of its own: the mounts it makes die with it.
	mountNSEnv = "LBSTATE_TEST_MOUNT_NS"
	// cgroupLogEnv names the file where that process lists the cgroups
	// it creates (Cgroup), relative to the cgroup2 root: the cgroup2
	// hierarchy outlives mounts and namespaces, so Main removes what a
	// killed test left.
	cgroupLogEnv = "LBSTATE_TEST_CGROUP_LOG"
	// sweepEnv makes the process remove the cgroups listed in the file
	// it names, in a mount namespace of its own, and exit.
	sweepEnv = "LBSTATE_TEST_CGROUP_SWEEP"
)

// Main runs the package's tests (m.Run) and exits with their status.
// Where it may (root, CAP_SYS_ADMIN), it runs them in a child process
// with a mount namespace of its own (its mounts private, as unshare(1)
// makes them): the bpffs and
// cgroup2 mounts of PinDir and Cgroup die with that process however it
// ends, also when it is killed (by go test's -timeout, say) before its
// cleanups ran, and Main then removes the cgroups it left. A package
// whose tests use PinDir or Cgroup calls it from TestMain:
//
//	func TestMain(m *testing.M) { bpftest.Main(m) }
func Main(m *testing.M) { Run(m.Run) }

// Run is Main for a TestMain that does more than m.Run: tests sets up
// what the tests share, runs them and returns the exit status; Run calls
// it in the process that runs the tests.
func Run(tests func() int) {
	if dir, ok := os.LookupEnv(sweepEnv); ok {
		os.Exit(sweepCgroups(dir))
	}
	if os.Getenv(mountNSEnv) != "" {
		os.Exit(tests())
	}
	os.Exit(runInMountNS(tests))
}

// runInMountNS runs this test binary again, with the same arguments, in
// a mount namespace of its own, and returns its exit status.
func runInMountNS(tests func() int) int {
	logDir, err := os.MkdirTemp("", "lbstate-test-cgroups-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bpftest.Main:", err)
		return 2
	}
	defer os.RemoveAll(logDir)
	// The tests' temporary directories go under logDir too: a test
	// killed before its cleanups ran (t.TempDir's among them) leaves
	// nothing in the system's temporary directory either.
	tmpDir := filepath.Join(logDir, "tmp")
	if err := os.Mkdir(tmpDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "bpftest.Main:", err)
		return 2
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), mountNSEnv+"=1", cgroupLogEnv+"="+filepath.Join(logDir, "cgroups"), "TMPDIR="+tmpDir)
	// Pdeathsig: if this process is killed, so is the test, and its
	// namespace with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	// The child gets the terminal's signals itself (one process group);
	// this one waits for it to act on them.
	if err := cmd.Start(); err != nil {
		// Not privileged to make a mount namespace: then not to mount
		// either, and the tests that mount skip or fail as they would
		// have, saying why.
		if !errors.Is(err, syscall.EPERM) {
			fmt.Fprintf(os.Stderr, "bpftest.Main: cannot run the tests in a mount namespace of their own: %v\n", err)
		}
		return tests()
	}
	// The tests get the signals this process gets (go test's SIGQUIT at
	// its timeout, for the goroutine dump; a SIGTERM to this pid): they
	// act on them, and this process waits for them to end.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM)
	go func() {
		for sig := range signals {
			cmd.Process.Signal(sig)
		}
	}()
	err = cmd.Wait()
	signal.Stop(signals)
	close(signals)
	code := 0
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal()) // as a shell reports it
			fmt.Fprintf(os.Stderr, "bpftest.Main: the tests' process ended: %v\n", exit)
		}
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "bpftest.Main: running the tests in a mount namespace of their own:", err)
		return 2
	}
	if sweepCgroupsLeft(filepath.Join(logDir, "cgroups")) && code == 0 {
		code = 1
	}
	return code
}

// sweepCgroupsLeft removes, in a helper process with a mount namespace of
// its own, the cgroups listed in log that still exist, and reports
// whether there were any (a test that ended normally removed its own).
func sweepCgroupsLeft(log string) bool {
	data, err := os.ReadFile(log)
	if err != nil || len(data) == 0 {
		return false
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), sweepEnv+"="+log)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if err := cmd.Run(); err != nil {
		if exit, ok := errors.AsType[*exec.ExitError](err); ok && exit.ExitCode() == 3 {
			return false // none was left
		}
		fmt.Fprintln(os.Stderr, "bpftest.Main: removing the cgroups the tests left:", err)
	}
	return true
}

// sweepCgroups mounts cgroup2 and removes the cgroups listed in log,
// killing what runs in them first; 3 when none was left.
func sweepCgroups(log string) int {
	root, err := os.MkdirTemp("", "lbstate-sweep-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.Remove(root)
	if err := unix.Mount("cgroup2", root, "cgroup2", 0, ""); err != nil {
		fmt.Fprintln(os.Stderr, "mounting cgroup2:", err)
		return 2
	}
	defer unix.Unmount(root, unix.MNT_DETACH)
	f, err := os.Open(log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer f.Close()
	left, status := 0, 3
	for sc := bufio.NewScanner(f); sc.Scan(); {
		rel := filepath.Clean(strings.TrimSpace(sc.Text()))
		if rel == "." || strings.HasPrefix(rel, "..") || !strings.HasPrefix(filepath.Base(rel), "lbstate-test-") {
			continue // not one of Cgroup's
		}
		dir := filepath.Join(root, rel)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		left++
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		if err := RemoveCgroup(dir); err != nil {
			fmt.Fprintf(os.Stderr, "bpftest.Main: cgroup %s left by the tests: %v\n", rel, err)
			status = 2
			continue
		}
		fmt.Fprintf(os.Stderr, "bpftest.Main: removed cgroup %s, left by the tests\n", rel)
	}
	if left > 0 && status == 3 {
		status = 0
	}
	return status
}

// logCgroup notes a cgroup Cgroup made, relative to its cgroup2 root, for
// Main to remove if the process dies with it.
func logCgroup(root, dir string) {
	log := os.Getenv(cgroupLogEnv)
	if log == "" {
		return
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return
	}
	f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, rel)
	f.Close()
}

// inOwnMountNS says whether PinDir's and Cgroup's mounts die with the
// process: Main runs the tests so where it may.
func inOwnMountNS() bool { return os.Getenv(mountNSEnv) != "" }
