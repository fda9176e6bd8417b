package datapath_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
)

// randomClients returns n distinct-enough IPv4 clients, the same for a
// seed.
func randomClients(seed uint64, n int) []netip.AddrPort {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([]netip.AddrPort, n)
	for i := range out {
		v := rng.Uint64()
		out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}), uint16(v>>32)|1024)
	}
	return out
}

// runFlows sends a new flow from each client to frontend and returns
// where each went.
func runFlows(t *testing.T, r *bpftest.FlowRunner, clients []netip.AddrPort) []netip.AddrPort {
	t.Helper()
	out := make([]netip.AddrPort, len(clients))
	for i, c := range clients {
		verdict, dst, err := r.Run(c)
		if err != nil || verdict != 0 {
			t.Fatalf("flow from %s: verdict %d, %v", c, verdict, err)
		}
		out[i] = dst
	}
	return out
}

// 100,000 new flows through a weighted service land on its backends
// within one percentage point of their weights' shares, with either
// algorithm; the slots and tables are the reconciler's, from the Writer's
// weights.
func TestNewFlowsSplitByWeight(t *testing.T) {
	for _, alg := range []lb.Algorithm{lb.AlgorithmRandom, lb.AlgorithmMaglev} {
		for _, weights := range [][]uint16{{90, 10}, {1, 2, 3, 4}} {
			t.Run(fmt.Sprintf("%s/%v", alg, weights), func(t *testing.T) {
				maps := kernelMaps(t, 0)
				a := newAgent(t, maps, datapath.DefaultConfig)
				a.start()
				defer a.stop()
				var bes []lb.BackendParams
				var sum float64
				for i, w := range weights {
					bes = append(bes, be(fmt.Sprintf("10.1.0.%d:8080/TCP", i+1), w))
					sum += float64(w)
				}
				a.service("web", alg, []string{"10.96.0.1:80/TCP"}, bes...)
				dp := loadDatapath(t, maps)
				r := bpftest.NewFlowRunner(t, dp.Program("lb_tc_ingress"), addrPort("10.96.0.1:80"), lb.ProtoTCP)
				const n = 100000
				counts := map[netip.AddrPort]int{}
				for _, dst := range runFlows(t, r, randomClients(1, n)) {
					counts[dst]++
				}
				for i, w := range weights {
					b := addrPort(fmt.Sprintf("10.1.0.%d:8080", i+1))
					got, want := 100*float64(counts[b])/n, 100*float64(w)/sum
					t.Logf("%s: %.2f%% of new flows, weight's share %.2f%%", b, got, want)
					if math.Abs(got-want) > 1 {
						t.Errorf("%s took %.2f%% of new flows, want %.2f%% ± 1", b, got, want)
					}
				}
			})
		}
	}
}

// With Maglev, removing one of 10 backends moves the flows it had and at
// most 1% of the others' (new flows from the same clients, conntrack
// cleared).
func TestMaglevRemovingABackendMovesFewOtherFlows(t *testing.T) {
	maps := kernelMaps(t, 0)
	a := newAgent(t, maps, datapath.DefaultConfig)
	a.start()
	defer a.stop()
	var bes []lb.BackendParams
	for i := range 10 {
		bes = append(bes, be(fmt.Sprintf("10.1.0.%d:8080/TCP", i+1), 100))
	}
	a.service("web", lb.AlgorithmMaglev, []string{"10.96.0.1:80/TCP"}, bes...)
	dp := loadDatapath(t, maps)
	r := bpftest.NewFlowRunner(t, dp.Program("lb_tc_ingress"), addrPort("10.96.0.1:80"), lb.ProtoTCP)
	clients := randomClients(2, 100000)
	before := runFlows(t, r, clients)

	a.service("web", lb.AlgorithmMaglev, []string{"10.96.0.1:80/TCP"}, bes[1:]...)
	clearConntrack(t, maps)
	after := runFlows(t, r, clients)
	removed := bes[0].Address.AddrPort()
	others, moved := 0, 0
	for i := range clients {
		switch {
		case after[i] == removed:
			t.Fatalf("a new flow went to the removed backend")
		case before[i] != removed:
			others++
			if after[i] != before[i] {
				moved++
			}
		}
	}
	share := 100 * float64(moved) / float64(others)
	t.Logf("%d of %d flows of the remaining backends moved (%.2f%%)", moved, others, share)
	if share > 1 {
		t.Errorf("%d of %d flows of the remaining backends moved (%.2f%%), want at most 1%%", moved, others, share)
	}
}

// clearConntrack empties lb_ct, so that the next packets are new flows.
func clearConntrack(t *testing.T, maps *bpf.Maps) {
	t.Helper()
	var keys []bpf.CTKey
	if err := maps.Conntrack.Iterate(func(k bpf.CTKey, _ bpf.CTValue) bool { keys = append(keys, k); return true }); err != nil {
		t.Fatal(err)
	}
	if err := maps.Conntrack.BatchDelete(keys); err != nil {
		t.Fatal(err)
	}
}
