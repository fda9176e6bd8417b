package bpf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ensureBPFFS mounts bpffs on the pin directory's parent exactly when the
// pins would otherwise land off bpffs and the parent is an empty
// directory; every refusal says how to fix it.
func TestBPFFSIsMountedOnlyOnAnEmptyParentOffBPFFS(t *testing.T) {
	const tmpfsMagic = 0x01021994
	for _, tc := range []struct {
		name string
		// setup makes the directories under root and returns the pin
		// directory and the directories on bpffs.
		setup    func(root string) (pinDir string, onBPFFS []string)
		mountErr error
		// wantMount is where bpffs must be mounted ("" for nowhere),
		// wantErr what the error must say ("" for none).
		wantMount string
		wantErr   []string
	}{{
		name: "pin directory on bpffs",
		setup: func(root string) (string, []string) {
			mkdir(t, root, "bpf/lbstate")
			return filepath.Join(root, "bpf/lbstate"), []string{filepath.Join(root, "bpf")}
		},
	}, {
		name: "nearest existing ancestor on bpffs",
		setup: func(root string) (string, []string) {
			mkdir(t, root, "bpf")
			return filepath.Join(root, "bpf/a/b/lbstate"), []string{filepath.Join(root, "bpf")}
		},
	}, {
		name: "empty parent off bpffs",
		setup: func(root string) (string, []string) {
			mkdir(t, root, "bpf")
			return filepath.Join(root, "bpf/lbstate"), nil
		},
		wantMount: "bpf",
	}, {
		name: "parent holding files",
		setup: func(root string) (string, []string) {
			mkdir(t, root, "bpf/other")
			return filepath.Join(root, "bpf/lbstate"), nil
		},
		wantErr: []string{"holds files", "mount -t bpf bpf ROOT/bpf"},
	}, {
		name: "pin directory off bpffs",
		setup: func(root string) (string, []string) {
			mkdir(t, root, "bpf/lbstate")
			return filepath.Join(root, "bpf/lbstate"), nil
		},
		wantErr: []string{"ROOT/bpf/lbstate is not on bpffs", "mount -t bpf bpf ROOT/bpf"},
	}, {
		name: "no parent",
		setup: func(root string) (string, []string) {
			return filepath.Join(root, "bpf/lbstate"), nil
		},
		wantErr: []string{"ROOT/bpf does not exist", "mkdir -p ROOT/bpf && mount -t bpf bpf ROOT/bpf"},
	}, {
		name: "mounting not permitted",
		setup: func(root string) (string, []string) {
			mkdir(t, root, "bpf")
			return filepath.Join(root, "bpf/lbstate"), nil
		},
		mountErr: unix.EPERM,
		wantErr:  []string{"not permitted", "run as root, or mount -t bpf bpf ROOT/bpf"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			pinDir, onBPFFS := tc.setup(root)
			var mountedOn []string
			b := bpffs{
				fsType: func(path string) (int64, error) {
					if _, err := os.Stat(path); err != nil {
						return 0, err
					}
					for _, dir := range onBPFFS {
						if path == dir || strings.HasPrefix(path, dir+"/") {
							return unix.BPF_FS_MAGIC, nil
						}
					}
					return tmpfsMagic, nil
				},
				mount: func(dir string) error {
					mountedOn = append(mountedOn, dir)
					return tc.mountErr
				},
			}
			got, err := b.ensure(pinDir)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("ensure(%s): %v", pinDir, err)
			}
			if err != nil {
				msg := strings.ReplaceAll(err.Error(), root, "ROOT")
				for _, want := range tc.wantErr {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not say %q", msg, want)
					}
				}
			} else if len(tc.wantErr) > 0 {
				t.Fatalf("ensure(%s) succeeded (mounted %q), want an error", pinDir, got)
			}
			wantMounted := []string(nil)
			if tc.wantMount != "" {
				wantMounted = []string{filepath.Join(root, tc.wantMount)}
			}
			if tc.mountErr != nil {
				wantMounted = []string{filepath.Dir(pinDir)}
			}
			if strings.Join(mountedOn, ",") != strings.Join(wantMounted, ",") {
				t.Errorf("mounted on %v, want %v", mountedOn, wantMounted)
			}
			if tc.wantMount != "" && got != filepath.Join(root, tc.wantMount) {
				t.Errorf("ensure returned %q, want %q", got, filepath.Join(root, tc.wantMount))
			}
		})
	}
}

// A statfs failure other than a missing directory is reported as is.
func TestBPFFSCheckReportsStatfsErrors(t *testing.T) {
	b := bpffs{
		fsType: func(string) (int64, error) { return 0, unix.EACCES },
		mount:  func(string) error { t.Fatal("mounted after a statfs error"); return nil },
	}
	if _, err := b.ensure("/x/lbstate"); !errors.Is(err, unix.EACCES) {
		t.Fatalf("ensure with statfs failing: %v, want EACCES", err)
	}
}

func mkdir(t *testing.T, root, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
		t.Fatal(err)
	}
}
