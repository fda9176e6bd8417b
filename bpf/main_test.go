package bpf_test

import (
	"os"
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

func TestMain(m *testing.M) {
	bpftest.MaybeClient() // when the process is a test's client, it ends here
	os.Exit(m.Run())
}
