package bpf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// nobody is a user other than the tests' (root).
const nobody = 65534

// A pin directory that another user could have filled is refused, with
// an error saying why and how to fix it: the agent would restore IDs from
// the maps it finds there and program the datapath with them. (On a
// bpffs of mode 1777, another user created the pin directory before the
// agent, and on restart the agent silently made new empty maps with new
// IDs.)
func TestPinDirectoryAnotherUserCouldFillIsRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string
	}{
		{"owned by another user", func(t *testing.T, dir string) {
			mustDo(t, os.Mkdir(dir, 0o755))
			mustDo(t, os.Chown(dir, nobody, nobody))
		}, []string{"belongs to uid 65534", "rm -r " + "DIR", "chown"}},
		{"writable by others", func(t *testing.T, dir string) {
			mustDo(t, os.Mkdir(dir, 0o755))
			mustDo(t, os.Chmod(dir, 0o777))
		}, []string{"writable by its group or others", "chmod go-w DIR"}},
		{"writable by others, sticky", func(t *testing.T, dir string) {
			mustDo(t, os.Mkdir(dir, 0o755))
			mustDo(t, os.Chmod(dir, 0o777|os.ModeSticky))
		}, []string{"writable by its group or others", "chmod go-w DIR"}},
		{"holding another user's map", func(t *testing.T, dir string) {
			cfg := smallConfig()
			cfg.LBPinDir = dir
			m, err := bpf.NewKernelMaps(cfg)
			mustDo(t, err)
			m.Close()
			mustDo(t, os.Chown(filepath.Join(dir, "lb_services"), nobody, nobody))
		}, []string{"lb_services", "belongs to uid 65534"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.LBPinDir = filepath.Join(bpftest.PinDir(t), "maps")
			c.setup(t, cfg.LBPinDir)
			m, err := bpf.NewKernelMaps(cfg)
			if err == nil {
				m.Close()
				t.Fatal("the pin directory was used")
			}
			for _, want := range c.want {
				want = strings.ReplaceAll(want, "DIR", cfg.LBPinDir)
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// The pin directory the agent creates itself, on a bpffs of mode 1777,
// is accepted on every start.
func TestOwnPinDirectoryOnStickyBPFFSIsUsed(t *testing.T) {
	root := bpftest.PinDir(t)
	mustDo(t, os.Chmod(root, 0o777|os.ModeSticky))
	cfg := smallConfig()
	cfg.LBPinDir = filepath.Join(root, "lbstate")
	for range 2 {
		m, err := bpf.NewKernelMaps(cfg)
		mustDo(t, err)
		m.Close()
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
