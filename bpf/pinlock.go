package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// One pin directory, one agent: the reconciler restores IDs from every
// entry in it and prunes what its own frontends do not claim, so a second
// agent on the same directory silently deletes the first one's entries
// and hands out the same IDs. NewKernelMaps therefore holds an exclusive
// flock on the pin directory itself for as long as its Maps are open.
// bpffs takes flock on directories (it refuses regular files, so there is
// no lock file), the kernel drops the lock when its holder dies, so a
// crashed agent never blocks the next start, and nothing is written to
// the directory. The holder's PID, for the error, is read from
// /proc/locks rather than from a file the holder would have to keep.

// ErrPinDirInUse is wrapped by the error of NewKernelMaps when another
// live process holds the pin directory.
var ErrPinDirInUse = errors.New("pin directory in use")

// ErrPinDirUntrusted is wrapped by the error of NewKernelMaps when the pin
// directory, or a pin in it, could have been written by another user.
var ErrPinDirUntrusted = errors.New("pin directory not trusted")

// lockPinDir takes the pin directory's lock, or says who holds it. The
// returned file holds the lock until it is closed.
func lockPinDir(dir string) (*os.File, error) {
	f, err := os.Open(dir) // O_CLOEXEC: a child the agent starts does not inherit the lock
	if err != nil {
		return nil, fmt.Errorf("pin directory %s: lock: %w", dir, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return f, nil
	}
	defer f.Close()
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return nil, fmt.Errorf("pin directory %s: lock: %w", dir, err)
	}
	holder := "another process (its PID is not visible from here)"
	if pid := lockHolder(f); pid > 0 {
		holder = fmt.Sprintf("another agent, PID %d", pid)
		if pid == os.Getpid() {
			holder = fmt.Sprintf("this process (PID %d), whose earlier maps are still open", pid)
		}
	}
	return nil, fmt.Errorf("%w: %s is held by %s: two agents on one pin directory delete each other's entries and hand out the same IDs;"+
		" stop that agent, or give this one another --lb-pin-dir", ErrPinDirInUse, dir, holder)
}

// lockHolder returns the PID of the process that holds a flock on f's
// inode, according to /proc/locks; 0 if it cannot tell.
func lockHolder(f *os.File) int {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0
	}
	// /proc/locks names an inode as major:minor:inode, the device in hex.
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer locks.Close()
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"; a waiter's
		// line has "->" after its number, and more fields.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			return pid
		}
	}
	return 0
}

// unlock releases the pin directory; a second Close of the maps is no
// error.
func unlock(lock *os.File) error {
	if err := lock.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// untrustedError is a reason checkPinDir refuses a pin directory; it
// matches ErrPinDirUntrusted.
type untrustedError struct{ msg string }

func (e untrustedError) Error() string        { return e.msg }
func (e untrustedError) Is(target error) bool { return target == ErrPinDirUntrusted }
