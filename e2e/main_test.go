package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
)

// suiteEtcd stores every test cluster, each under a prefix of its own.
var suiteEtcd *embedetcd.Server

func TestMain(m *testing.M) {
	bpftest.MaybeClient() // a re-executed test binary acting as a client
	bpftest.Run(func() int { return run(m) })
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lbstate-e2e-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if suiteEtcd, err = embedetcd.Start(dir, nil); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting etcd:", err)
		return 1
	}
	defer suiteEtcd.Stop()
	return m.Run()
}
