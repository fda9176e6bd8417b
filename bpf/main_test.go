package bpf_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

func TestMain(m *testing.M) {
	bpftest.MaybeClient() // when the process is a test's client, it ends here
	maybePinHolder()
	bpftest.Main(m)
}

// pinHolderEnv names the pin directory a child process opens kernel maps
// on, standing for another agent (see startPinHolder).
const pinHolderEnv = "LBSTATE_TEST_PIN_HOLDER"

// maybePinHolder opens kernel maps on the pin directory named by
// pinHolderEnv, says "ready", and keeps them open until its stdin closes
// or it is killed.
func maybePinHolder() {
	dir, ok := os.LookupEnv(pinHolderEnv)
	if !ok {
		return
	}
	cfg := smallConfig()
	cfg.LBPinDir = dir
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	m.Close()
	os.Exit(0)
}
