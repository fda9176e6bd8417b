package bpf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Kernel maps are pinned on bpffs, which a fresh machine may not have
// mounted. Like Cilium's agent at /sys/fs/bpf, the cell mounts bpffs on
// the pin directory's parent when that is an empty directory off bpffs and
// the process may mount (root, or CAP_SYS_ADMIN). It never mounts over
// files, and never unmounts: the pins must outlive the agent.

// bpffs is what ensureBPFFS needs of the system; tests replace it.
type bpffs struct {
	// fsType returns the magic number of the file system holding path.
	fsType func(path string) (int64, error)
	mount  func(dir string) error
}

var systemBPFFS = bpffs{
	fsType: func(path string) (int64, error) {
		var st unix.Statfs_t
		err := unix.Statfs(path, &st)
		return int64(st.Type), err
	},
	mount: func(dir string) error { return unix.Mount("bpf", dir, "bpf", 0, "") },
}

// ensure makes sure that pins in pinDir land on bpffs, mounting it on
// pinDir's parent if need be. It returns where it mounted bpffs, "" if it
// did not; its errors say how to fix the problem.
func (b bpffs) ensure(pinDir string) (mounted string, err error) {
	pinDir = filepath.Clean(pinDir)
	// The nearest existing directory decides where the pins would go.
	existing := pinDir
	for {
		typ, err := b.fsType(existing)
		if err == nil {
			if typ == unix.BPF_FS_MAGIC {
				return "", nil
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(existing) == existing {
			return "", fmt.Errorf("pin directory %s: %w", pinDir, err)
		}
		existing = filepath.Dir(existing)
	}
	target := filepath.Dir(pinDir)
	fix := fmt.Sprintf("mount -t bpf bpf %s, or choose an --lb-pin-dir on bpffs", target)
	switch existing {
	case pinDir:
		return "", fmt.Errorf("pin directory %s is not on bpffs (%s)", pinDir, fix)
	case target:
	default:
		return "", fmt.Errorf("pin directory %s is not on bpffs, and %s does not exist to mount bpffs on (mkdir -p %s && %s)",
			pinDir, target, target, fix)
	}
	entries, err := os.ReadDir(target)
	if err != nil {
		return "", fmt.Errorf("pin directory %s: %w", pinDir, err)
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("pin directory %s is not on bpffs, and %s holds files that mounting bpffs there would hide (%s)",
			pinDir, target, fix)
	}
	if err := b.mount(target); err != nil {
		if errors.Is(err, unix.EPERM) {
			return "", fmt.Errorf("%s is not bpffs, and mounting bpffs there is not permitted: %w (run as root, or %s)", target, err, fix)
		}
		return "", fmt.Errorf("mounting bpffs on %s: %w (%s)", target, err, fix)
	}
	return target, nil
}
