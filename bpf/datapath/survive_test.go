package datapath_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
)

// established is flows of one frontend and the backend each went to.
type established struct {
	flows []bpftest.Flow
	to    []netip.AddrPort
}

// establish sends the first packet of n flows to frontend.
func establish(t *testing.T, dp *bpf.Datapath, frontend string, n int) *established {
	t.Helper()
	e := &established{}
	for i := range n {
		f := bpftest.NewFlow(fmt.Sprintf("192.0.2.%d:%d", 1+i%200, 40000+i), frontend, lb.ProtoTCP)
		_, out := bpftest.Send(t, dp.Program("lb_tc_ingress"), f)
		e.flows, e.to = append(e.flows, f), append(e.to, out.Dst)
	}
	return e
}

// check sends another packet of every flow and fails unless it goes to
// the flow's backend.
func (e *established) check(t *testing.T, dp *bpf.Datapath, when string) {
	t.Helper()
	for i, f := range e.flows {
		verdict, out := bpftest.Send(t, dp.Program("lb_tc_ingress"), f)
		if verdict != 0 || out.Dst != e.to[i] {
			t.Fatalf("%s: %s -> %s went to %s (verdict %d), not its backend %s", when, f.Src, f.Dst, out.Dst, verdict, e.to[i])
		}
	}
}

// only keeps the flows whose backend is in keep.
func (e *established) only(keep []lb.BackendParams) {
	var flows []bpftest.Flow
	var to []netip.AddrPort
	for i, f := range e.flows {
		if slices.ContainsFunc(keep, func(b lb.BackendParams) bool { return b.Address.AddrPort() == e.to[i] }) {
			flows, to = append(flows, f), append(to, e.to[i])
		}
	}
	e.flows, e.to = flows, to
}

// Established flows keep their backend through 1,000 random changes of the
// service's other backends (added, removed, reweighted, terminating),
// with either algorithm, while the changes do move new flows.
func TestEstablishedFlowsKeepTheirBackendThroughChanges(t *testing.T) {
	for _, alg := range []lb.Algorithm{lb.AlgorithmRandom, lb.AlgorithmMaglev} {
		t.Run(alg.String(), func(t *testing.T) {
			maps := kernelMaps(t, 251)
			a := newAgent(t, maps, datapath.DefaultConfig)
			a.start()
			defer a.stop()
			kept := []lb.BackendParams{be("10.1.0.1:8080/TCP", 100), be("10.1.0.2:8080/TCP", 100)}
			var pool []lb.BackendParams
			for i := range 20 {
				pool = append(pool, be(fmt.Sprintf("10.2.0.%d:8080/TCP", i+1), 100))
			}
			current := map[int]lb.BackendParams{}
			for i := range 5 {
				current[i] = pool[i]
			}
			declare := func() {
				bes := slices.Clone(kept)
				for _, b := range current {
					bes = append(bes, b)
				}
				a.service("web", alg, []string{"10.96.0.1:80/TCP"}, bes...)
			}
			declare()
			dp := loadDatapath(t, maps)
			e := establish(t, dp, "10.96.0.1:80", 200)
			e.only(kept)
			if len(e.flows) < 10 {
				t.Fatalf("only %d of 200 flows went to the kept backends", len(e.flows))
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for change := range 1000 {
				i := rng.IntN(len(pool))
				b, present := current[i]
				switch op := rng.IntN(4); {
				case !present:
					current[i] = pool[i]
				case op == 0:
					delete(current, i)
				case op == 1:
					b.Weight = uint16(1 + rng.IntN(500))
					current[i] = b
				default:
					b.State = []lb.BackendState{lb.BackendActive, lb.BackendTerminating}[rng.IntN(2)]
					current[i] = b
				}
				declare()
				if change%10 == 9 {
					e.check(t, dp, fmt.Sprintf("after change %d", change+1))
				}
			}
			// The same clients, with new ports, are spread anew.
			fresh := establish(t, dp, "10.96.0.1:80", 200)
			moved := 0
			for _, to := range fresh.to {
				if !slices.ContainsFunc(kept, func(b lb.BackendParams) bool { return b.Address.AddrPort() == to }) {
					moved++
				}
			}
			if moved == 0 {
				t.Errorf("no new flow went to the changed backends: the test proves nothing")
			}
		})
	}
}

// Established flows keep their backend while it is terminating (it only
// keeps a standby slot), and it takes no new flows.
func TestEstablishedFlowsKeepATerminatingBackend(t *testing.T) {
	maps := kernelMaps(t, 251)
	a := newAgent(t, maps, datapath.DefaultConfig)
	a.start()
	defer a.stop()
	a.service("web", lb.AlgorithmMaglev, []string{"10.96.0.1:80/TCP"}, be("10.1.0.1:8080/TCP", 100), be("10.1.0.2:8080/TCP", 100))
	dp := loadDatapath(t, maps)
	e := establish(t, dp, "10.96.0.1:80", 100)
	terminating := be("10.1.0.1:8080/TCP", 100)
	terminating.State = lb.BackendTerminating
	a.service("web", lb.AlgorithmMaglev, []string{"10.96.0.1:80/TCP"}, terminating, be("10.1.0.2:8080/TCP", 100))
	if fe := a.frontend("10.96.0.1:80/TCP"); fe.Backends[1].Weight != 0 || fe.Backends[1].Address != terminating.Address {
		t.Fatalf("the terminating backend still takes new flows: %v", fe.Backends)
	}
	e.check(t, dp, "while terminating")
	for _, to := range establish(t, dp, "10.96.0.1:80", 300).to[100:] {
		if to == terminating.Address.AddrPort() {
			t.Fatal("a new flow went to the terminating backend")
		}
	}
}

// Established flows keep their backend across an agent restart: the new
// agent reopens the pinned maps, restores the IDs, and the conntrack
// entries still name the right backends, also after the service changes.
func TestEstablishedFlowsKeepTheirBackendAcrossARestart(t *testing.T) {
	for _, alg := range []lb.Algorithm{lb.AlgorithmRandom, lb.AlgorithmMaglev} {
		t.Run(alg.String(), func(t *testing.T) {
			cfg := bpftest.Config(t)
			cfg.LBMaglevTableSize = 251
			bes := []lb.BackendParams{be("10.1.0.1:8080/TCP", 100), be("10.1.0.2:8080/TCP", 100), be("10.1.0.3:8080/TCP", 100)}
			maps := bpftest.KernelMaps(t, cfg)
			a := newAgent(t, maps, datapath.DefaultConfig)
			a.start()
			a.service("web", alg, []string{"10.96.0.1:80/TCP"}, bes...)
			dp := loadDatapath(t, maps)
			e := establish(t, dp, "10.96.0.1:80", 100)
			a.stop()
			dp.Close()
			maps.Close()

			maps = bpftest.KernelMaps(t, cfg)
			a = newAgent(t, maps, datapath.DefaultConfig)
			// As a real source does: nothing is pruned before it declared
			// the service again, so its backends keep their IDs.
			synced, err := a.w.RegisterInitializer("test")
			if err != nil {
				t.Fatal(err)
			}
			a.start()
			defer a.stop()
			slices.Reverse(bes)
			a.service("web", alg, []string{"10.96.0.1:80/TCP"}, append(bes, be("10.1.0.4:8080/TCP", 300))...)
			a.write(func(txn statedb.WriteTxn) error { synced(txn); return nil })
			dp = loadDatapath(t, maps)
			e.check(t, dp, "after the restart")
		})
	}
}
