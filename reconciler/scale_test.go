package reconciler_test

import (
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// With the default map sizes, 100,000 services of 10 distinct backends
// each are all served: every frontend is Done and the kernel maps hold
// all of them, with no flag raised (issue 30: 10,000 of them did not
// fit). It takes about a minute and 250 MB of kernel memory, so it runs
// only with LBSTATE_SCALE=1; TestDefaultMapsHold100kServicesOf10Backends
// (bpf) checks the arithmetic in every run.
func TestDefaultMapsServe100kServicesOf10Backends(t *testing.T) {
	if os.Getenv("LBSTATE_SCALE") != "1" {
		t.Skip("a run at 100,000 x 10 on kernel maps: set LBSTATE_SCALE=1 (and LBSTATE_REQUIRE_BPF=1) to run it")
	}
	const services, backends, perTxn = 100_000, 10, 1000
	cfg := bpftest.Config(t) // bpf.DefaultConfig, pinned in a directory of the test's own
	maps := bpftest.KernelMaps(t, cfg)
	a := newAgent(t, maps, nil)
	a.start(t)
	defer a.stop(t)

	start := time.Now()
	for first := 0; first < services; first += perTxn {
		a.write(t, func(txn statedb.WriteTxn) error {
			for i := first; i < first+perTxn; i++ {
				if err := declareScaled(a, txn, i, backends); err != nil {
					return err
				}
			}
			return nil
		})
	}
	a.waitDone(t, 5*time.Minute)
	t.Logf("%d services x %d backends written and reconciled in %s", services, backends, time.Since(start).Round(time.Millisecond))

	for _, c := range []struct {
		name      string
		count     func() (int, error)
		want, max int
	}{
		{"lb_services", func() (int, error) { return bpf.Count(maps.Services) }, services * (1 + backends), int(cfg.LBServicesMax)},
		{"lb_backends", func() (int, error) { return bpf.Count(maps.Backends) }, services * backends, int(cfg.LBBackendsMax)},
		{"lb_rev_nat", func() (int, error) { return bpf.Count(maps.RevNat) }, services, int(cfg.LBRevNatMax)},
	} {
		n, err := c.count()
		if err != nil {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("%s holds %d entries, want %d", c.name, n, c.want)
		}
		t.Logf("%s: %d of %d entries", c.name, n, c.max)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("live heap %.0f MB", float64(ms.HeapAlloc)/1e6)
}

// declareScaled declares service i with a ClusterIP frontend and k
// backends that no other service has (the frontend and backend addresses
// of declareOne repeat past 256 services).
func declareScaled(a *agent, txn statedb.WriteTxn, i, k int) error {
	name := serviceName(i)
	fe := lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{172, 16 + byte(i>>16), byte(i >> 8), byte(i)}), 80, lb.ScopeExternal)
	if err := a.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
		return err
	}
	bes := make([]lb.BackendParams, k)
	for j := range bes {
		b := i*k + j
		bes[j] = lb.BackendParams{
			Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, byte(b >> 16), byte(b >> 8), byte(b)}), 8080, lb.ScopeExternal),
			Weight:  lb.DefaultBackendWeight,
		}
	}
	return a.w.SetBackends(txn, name, lb.SourceK8s, bes...)
}
