package datapath_test

import (
	"fmt"
	"math"
	"net/netip"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
)

// canary declares test/web (one backend of its own), test/primary (five
// backends) and test/canary (two), all with algorithm alg.
func canary(a *agent, alg lb.Algorithm) (primary, canaries map[netip.AddrPort]bool) {
	primary, canaries = map[netip.AddrPort]bool{}, map[netip.AddrPort]bool{}
	var pb, cb []lb.BackendParams
	for i := range 5 {
		b := be(fmt.Sprintf("10.1.0.%d:8080/TCP", i+1), 100)
		pb, primary[b.Address.AddrPort()] = append(pb, b), true
	}
	for i := range 2 {
		b := be(fmt.Sprintf("10.2.0.%d:8080/TCP", i+1), 100)
		cb, canaries[b.Address.AddrPort()] = append(cb, b), true
	}
	a.service("web", alg, []string{"10.96.0.1:80/TCP"}, be("10.0.0.1:8080/TCP", 100))
	a.service("primary", alg, []string{"10.96.0.2:80/TCP"}, pb...)
	a.service("canary", alg, []string{"10.96.0.3:80/TCP"}, cb...)
	return primary, canaries
}

// setSplit routes test/web: canaryWeight to test/canary, the rest of 100
// to test/primary.
func (a *agent) setSplit(canaryWeight uint32) {
	a.t.Helper()
	a.write(func(txn statedb.WriteTxn) error {
		return a.w.SetRoute(txn, lb.NewServiceName("test", "web"), lb.Route{Source: lb.SourceK8s, Name: "canary", Backends: []lb.RouteBackend{
			{Service: lb.NewServiceName("test", "primary"), Weight: 100 - canaryWeight},
			{Service: lb.NewServiceName("test", "canary"), Weight: canaryWeight},
		}})
	})
}

// 100,000 new flows through a 90/10 route land within one point of 90%
// on the primary's backends and 10% on the canary's, with either
// algorithm, and none on the parent's own backend (hidden: in the
// backends map, in no slot).
func TestRouteSplitsNewFlowsByServiceWeight(t *testing.T) {
	for _, alg := range []lb.Algorithm{lb.AlgorithmRandom, lb.AlgorithmMaglev} {
		t.Run(alg.String(), func(t *testing.T) {
			maps := kernelMaps(t, 0)
			a := newAgent(t, maps, datapath.DefaultConfig)
			a.start()
			defer a.stop()
			primary, canaries := canary(a, alg)
			a.setSplit(10)
			dp := loadDatapath(t, maps)
			r := bpftest.NewFlowRunner(t, dp.Program("lb_tc_ingress"), addrPort("10.96.0.1:80"), lb.ProtoTCP)
			const n = 100000
			var toPrimary, toCanary int
			for _, dst := range runFlows(t, r, randomClients(3, n)) {
				switch {
				case primary[dst]:
					toPrimary++
				case canaries[dst]:
					toCanary++
				default:
					t.Fatalf("a new flow went to %s, outside the split", dst)
				}
			}
			p, c := 100*float64(toPrimary)/n, 100*float64(toCanary)/n
			t.Logf("%s: primary %.2f%%, canary %.2f%%", alg, p, c)
			if math.Abs(p-90) > 1 || math.Abs(c-10) > 1 {
				t.Errorf("primary %.2f%%, canary %.2f%%, want 90 and 10 ± 1", p, c)
			}
		})
	}
}

// 100,000 new flows through a route whose 10% backendRef names a service
// that does not exist: about 10% (± 1 point) are rejected, dropped and
// counted as rejected drops, not given to the primary, which takes the
// other 90%, with either algorithm (the Gateway API's rule for an invalid
// backendRef).
func TestRouteRejectsTheShareOfAMissingService(t *testing.T) {
	for _, alg := range []lb.Algorithm{lb.AlgorithmRandom, lb.AlgorithmMaglev} {
		t.Run(alg.String(), func(t *testing.T) {
			maps := kernelMaps(t, 0)
			a := newAgent(t, maps, datapath.DefaultConfig)
			a.start()
			defer a.stop()
			primary, _ := canary(a, alg)
			a.write(func(txn statedb.WriteTxn) error {
				return a.w.SetRoute(txn, lb.NewServiceName("test", "web"), lb.Route{Source: lb.SourceK8s, Name: "canary", Backends: []lb.RouteBackend{
					{Service: lb.NewServiceName("test", "primary"), Weight: 90},
					{Service: lb.NewServiceName("test", "gone"), Weight: 10},
				}})
			})
			fe := a.frontend("10.96.0.1:80/TCP")
			dp := loadDatapath(t, maps)
			r := bpftest.NewFlowRunner(t, dp.Program("lb_tc_ingress"), addrPort("10.96.0.1:80"), lb.ProtoTCP)
			const n = 100000
			var toPrimary, rejected uint64
			for _, c := range randomClients(5, n) {
				verdict, dst, err := r.Run(c)
				switch {
				case err != nil:
					t.Fatal(err)
				case verdict == tcActShot:
					rejected++
				case verdict == 0 && primary[dst]:
					toPrimary++
				default:
					t.Fatalf("flow from %s: verdict %d, to %s", c, verdict, dst)
				}
			}
			p, rj := 100*float64(toPrimary)/n, 100*float64(rejected)/n
			t.Logf("%s: primary %.2f%%, rejected %.2f%%", alg, p, rj)
			if math.Abs(p-90) > 1 || math.Abs(rj-10) > 1 {
				t.Errorf("primary %.2f%%, rejected %.2f%%, want 90 and 10 ± 1", p, rj)
			}
			v, _, err := maps.Drops.Lookup(bpf.DropKey{RevNatID: fe.ID, Reason: bpf.DropRejected})
			if err != nil {
				t.Fatal(err)
			}
			var drops uint64
			for _, c := range v {
				drops += c
			}
			if drops != rejected {
				t.Errorf("%d rejected drops counted, want %d", drops, rejected)
			}
		})
	}
}

// tcActShot is TC_ACT_SHOT, the tc program's verdict for a dropped packet.
const tcActShot = 2

// A canary shift of 10% → 20% → 50% → 100% with Maglev moves flows from
// the primary to the canary only, about as many as the shift asks, and
// almost no others: a flow that stays on its side keeps its backend.
func TestMaglevCanaryShiftMovesOnlyTheFlowsItMust(t *testing.T) {
	maps := kernelMaps(t, 0)
	a := newAgent(t, maps, datapath.DefaultConfig)
	a.start()
	defer a.stop()
	primary, canaries := canary(a, lb.AlgorithmMaglev)
	a.setSplit(10)
	dp := loadDatapath(t, maps)
	r := bpftest.NewFlowRunner(t, dp.Program("lb_tc_ingress"), addrPort("10.96.0.1:80"), lb.ProtoTCP)
	const n = 100000
	clients := randomClients(4, n)
	before := runFlows(t, r, clients)
	prev := uint32(10)
	for _, next := range []uint32{20, 50, 100} {
		a.setSplit(next)
		clearConntrack(t, maps)
		after := runFlows(t, r, clients)
		var toCanary, needless int
		for i := range clients {
			switch {
			case after[i] == before[i]:
			case primary[before[i]] && canaries[after[i]]:
				toCanary++
			default:
				needless++ // back to the primary, or within one side
			}
		}
		moved, must := 100*float64(toCanary)/n, float64(next-prev)
		extra := 100 * float64(needless) / n
		t.Logf("%d%% → %d%%: %.2f%% of flows moved to the canary (the shift is %.0f points), %.2f%% moved needlessly", prev, next, moved, must, extra)
		if math.Abs(moved-must) > 1 {
			t.Errorf("%d%% → %d%%: %.2f%% of flows moved to the canary, want %.0f ± 1", prev, next, moved, must)
		}
		if extra > 1 {
			t.Errorf("%d%% → %d%%: %.2f%% of flows moved needlessly, want at most 1%%", prev, next, extra)
		}
		before, prev = after, next
	}
}
