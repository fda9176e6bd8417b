package lbstate_test

import (
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// TestMain runs the tests in a mount namespace of their own, so that the
// bpffs and cgroup2 mounts of kernel tests die with them (bpftest.Main).
func TestMain(m *testing.M) { bpftest.Main(m) }
