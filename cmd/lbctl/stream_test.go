package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// TestLbctlProcess is lbctl itself when LBCTL_TEST_ARGS is set: the
// memory test runs it as a child process to measure its peak RSS.
func TestLbctlProcess(t *testing.T) {
	argsJSON := os.Getenv("LBCTL_TEST_ARGS")
	if argsJSON == "" {
		t.Skip("only as a child process")
	}
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// lbctlPeakRSS runs lbctl with args in a child process, its output
// discarded, and returns its peak RSS in bytes.
func lbctlPeakRSS(t *testing.T, args ...string) int64 {
	t.Helper()
	argsJSON, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLbctlProcess$")
	cmd.Env = append(os.Environ(), "LBCTL_TEST_ARGS="+string(argsJSON), "GOGC=25") // peaks close to what is live
	cmd.Stdout, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("lbctl %v: %v\n%s", args, err, stderr.String())
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
}

// serveFrontends serves a frontends table of n rows, each with 10
// backends, made up as they are written: an agent whose table is larger
// than lbctl should hold.
func serveFrontends(t *testing.T, n int) string {
	t.Helper()
	policy := &lb.ServiceParams{Name: lb.NewServiceName("default", "web"), Source: lb.SourceK8s}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc := json.NewEncoder(w)
		for i := range n {
			fe := &lb.Frontend{
				FrontendParams: lb.FrontendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80, lb.ScopeExternal), Type: lb.SVCTypeClusterIP},
				Service:        policy.Name, Policy: policy,
			}
			for j := range 10 {
				fe.Backends = append(fe.Backends, lb.BackendRef{Address: lb.MustParseL3n4Addr(fmt.Sprintf("10.0.%d.%d:8080/TCP", j, i%256)), Weight: 100})
			}
			if err := enc.Encode(statedb.QueryResponse{Rev: uint64(i + 1), Obj: fe}); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// lbctl prints a table as it reads it: its memory does not grow with the
// table, in any output format. It once collected every row before
// printing the first.
func TestListingMemoryDoesNotGrowWithTable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs lbctl on large tables")
	}
	const small, large = 1000, 10000
	const maxGrowth = 8 << 20
	smallAPI, largeAPI := serveFrontends(t, small), serveFrontends(t, large)
	for _, format := range []string{"table", "json", "yaml"} {
		a := lbctlPeakRSS(t, "frontends", "--api", smallAPI, "-o", format)
		b := lbctlPeakRSS(t, "frontends", "--api", largeAPI, "-o", format)
		t.Logf("-o %s: peak RSS %d MB for %d frontends, %d MB for %d", format, a>>20, small, b>>20, large)
		if b-a > maxGrowth {
			t.Errorf("-o %s: lbctl's peak RSS grew by %d MB from %d to %d frontends (at most %d MB)", format, (b-a)>>20, small, large, maxGrowth>>20)
		}
	}
}
