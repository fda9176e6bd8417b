package bpf_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// The first two packets of a UDP flow, run at once on two CPUs (two
// threads of a client sharing a socket, behind a veth each packet is
// handled on its sender's CPU), go to one backend, and a reply from it
// is translated. Both may find no entry and balance the flow; the one
// whose insert comes second finds the other's entry (BPF_NOEXIST fails)
// and takes its backend. It once wrote its own choice over the other's
// (BPF_ANY: "this flow's own"), so the flow's first packet went to one
// backend and the rest to another, and the first one's reply passed
// untranslated: 22,494 to 32,613 of 40,000 flows in three runs, with
// eight backends (about 27,000 balanced twice, 7 in 8 of them to two).
func TestTCGivesAFlowWhoseFirstPacketsRaceOnTwoCPUsOneBackend(t *testing.T) {
	cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs: each runs one of a flow's first two packets")
	}
	h := newDatapath(t, dpConfig())
	h.dnsFrontendOfEight()
	const flows = 40000
	pkts := make([][]byte, flows)
	for i := range pkts {
		pkts[i] = bpftest.Packet(t, flow(fmt.Sprintf("10.2.%d.%d:%d", i/250, i%250+1, 40000+i%1000), "10.96.0.10:53", lb.ProtoUDP), 16)
	}
	var (
		wg      sync.WaitGroup
		arrived [2]atomic.Int64 // the flows each side has started
		outs    [2][][]byte
		errs    [2]error
	)
	for side := range 2 {
		outs[side] = make([][]byte, flows)
		wg.Go(func() {
			onCPU(t, cpus[side], func() {
				for i := range flows {
					// Start flow i once the other side has too.
					arrived[side].Store(int64(i + 1))
					for arrived[1-side].Load() < int64(i+1) {
					}
					verdict, out, err := h.runIn("lb_tc_ingress", pkts[i])
					if err == nil && verdict != actOK {
						err = fmt.Errorf("flow %d: verdict %d", i, verdict)
					}
					if err != nil {
						errs[side] = err
						arrived[side].Store(flows) // free the other side
						return
					}
					outs[side][i] = out
				}
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	split, untranslated := 0, 0
	for i := range flows {
		a, b := decode(t, outs[0][i]), decode(t, outs[1][i])
		if a.Dst == b.Dst {
			continue
		}
		split++
		for _, to := range []tuple{a, b} {
			if _, back := h.sendUDP("lb_tc_egress", flow(to.Dst.String(), to.Src.String(), lb.ProtoUDP)); back.Src == to.Dst {
				untranslated++
			}
		}
	}
	var counted uint64
	for id := range uint32(8) {
		counted += h.counter(1, id+1).Flows
	}
	t.Logf("%d flows, each begun on two CPUs at once: %d counted as new", flows, counted)
	if split > 0 {
		t.Errorf("%d of %d flows sent their first two packets to two backends (%d replies passed untranslated)", split, flows, untranslated)
	}
	if counted != flows {
		t.Errorf("%d new flows counted, want %d: some were balanced, or counted, twice", counted, flows)
	}
}
