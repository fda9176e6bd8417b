package bpf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The pin directory is trusted: the reconciler restores IDs from the maps
// it finds there, and the datapath reads them. A directory another user
// could have filled (bpffs is often mode 1777, so anyone may create the
// pin directory before the agent does) is therefore refused, as are pins
// in it that another user owns or may write. The check is on the
// directory itself: its parent may be world-writable if it is sticky, as
// bpffs's root is, since others then cannot move the directory away.

// checkPinDir reports why dir, and the layout's pins in it, are not to
// be trusted, with how to fix it; nil if they are.
func checkPinDir(dir string) error {
	uid := os.Geteuid()
	if err := checkOwner(dir, "pin directory", uid, true); err != nil {
		return err
	}
	for _, d := range layout {
		path := filepath.Join(dir, d.name)
		if err := checkOwner(path, "pinned map", uid, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return checkParent(filepath.Dir(dir))
}

// checkOwner fails unless path belongs to uid and neither its group nor
// others may write it.
func checkOwner(path, what string, uid int, isDir bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	fix := fmt.Sprintf("remove it (rm -r %s) for the agent to create it anew, or chown %d %s", path, uid, path)
	if !isDir {
		fix = fmt.Sprintf("remove it (rm %s): the agent creates it anew, with new IDs", path)
	}
	if int(st.Uid) != uid {
		return untrustedError{fmt.Sprintf("%s %s belongs to uid %d, not to this process's uid %d: another user could have put maps there,"+
			" which the agent would take IDs from and program the datapath with; %s", what, path, st.Uid, uid, fix)}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return untrustedError{fmt.Sprintf("%s %s is writable by its group or others (mode %04o): another user could put maps there,"+
			" which the agent would take IDs from and program the datapath with; chmod go-w %s",
			what, path, fi.Mode().Perm()|stickyBit(fi.Mode()), path)}
	}
	return nil
}

// checkParent fails if others could move dir (the pin directory) away:
// its parent is writable by group or others and not sticky.
func checkParent(parent string) error {
	fi, err := os.Stat(parent)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return untrustedError{fmt.Sprintf("the pin directory's parent %s is writable by its group or others and not sticky (mode %04o):"+
			" another user could replace the pin directory; chmod +t %s, or choose another --lb-pin-dir", parent, fi.Mode().Perm(), parent)}
	}
	return nil
}

func stickyBit(m fs.FileMode) fs.FileMode {
	if m&fs.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}
