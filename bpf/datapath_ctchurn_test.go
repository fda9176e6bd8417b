package bpf_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// With lb_ct at 1,024 entries, 300 idle established flows (300 entries,
// one each) and 5,000 short connections that open and close beside them, the idle
// flows keep their backends and their replies stay translated: closed
// flows move to the close timeout (1 s here) and the garbage collector
// (bpf.CollectConntrack, as the agent runs it) deletes them before the
// LRU has to evict live flows for room. Random algorithm over ten
// backends, so that a flow balanced anew would likely change backend.
// The connections come in batches of 100, each after the collector has
// made room for it, as a steady rate the collector keeps up with (about
// 50 a second: the map's room over the close timeout; the kernel's LRU
// evicts before it is quite full, as free entries sit in per-CPU lists,
// so the room kept is 850 entries, not 1,024). It takes about 100 s.
func TestTCConntrackUnderChurnKeepsIdleFlows(t *testing.T) {
	cfg := dpConfig()
	cfg.LBCTMax = 1024
	timeouts := bpf.DefaultCTTimeouts
	timeouts.Close = time.Second
	h := newDatapathOptions(t, cfg, bpf.DatapathOptions{CTTimeouts: timeouts})
	var slots []uint32
	for id := uint32(1); id <= 10; id++ {
		h.backend(id, fmt.Sprintf("10.1.0.%d:8080/TCP", id), lb.BackendActive)
		slots = append(slots, id)
	}
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: slots})
	// open runs a handshake and returns the backend's side of the flow.
	open := func(f tuple) tuple {
		_, out := h.sendTCP("lb_tc_ingress", f, "S")
		if verdict, back := h.sendTCP("lb_tc_egress", out.Reply(), "SA"); verdict != actOK || back != f.Reply() {
			t.Fatalf("the SYN-ACK of %v became %v (verdict %d)", f, back, verdict)
		}
		h.sendTCP("lb_tc_ingress", f, "A")
		return out
	}

	// perFlow: the entries of a flow, its one entry (lb.h).
	const idle, short, batch, perFlow = 300, 5000, 100, 1
	var idleFlows, idleTo []tuple
	for i := range idle {
		f := flow(fmt.Sprintf("10.0.1.%d:%d", 1+i%250, 30000+i), "10.96.0.1:80", lb.ProtoTCP)
		idleFlows, idleTo = append(idleFlows, f), append(idleTo, open(f))
	}

	var expired int
	collect := func() bpf.CTCollection {
		c, err := bpf.CollectConntrack(h.maps, h.maps.Conntrack)
		h.check(err)
		expired += c.Expired
		return c
	}
	for n := 0; n < short; n += batch {
		// Room for a batch: what is left beside the idle flows' entries
		// goes within the close timeout and a second.
		deadline := time.Now().Add(10 * time.Second)
		for c := collect(); c.Entries-c.Expired > perFlow*idle+batch/2; c = collect() {
			if time.Now().After(deadline) {
				t.Fatalf("after %d short connections, lb_ct holds %d entries, %d of them not expired", n, c.Entries, c.Entries-c.Expired)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for i := n; i < n+batch; i++ {
			f := flow(fmt.Sprintf("10.0.2.%d:%d", 1+i%250, 20000+i), "10.96.0.1:80", lb.ProtoTCP)
			out := open(f)
			h.sendTCP("lb_tc_ingress", f, "FA")
			h.sendTCP("lb_tc_egress", out.Reply(), "FA")
			h.sendTCP("lb_tc_ingress", f, "A")
		}
	}
	if expired < perFlow*short*9/10 {
		t.Errorf("the collector removed %d entries, want most of the short connections' %d", expired, perFlow*short)
	}

	moved, untranslated := 0, 0
	for i, f := range idleFlows {
		if _, out := h.sendTCP("lb_tc_ingress", f, "A"); out.Dst != idleTo[i].Dst {
			moved++
		}
		if verdict, back := h.sendTCP("lb_tc_egress", idleTo[i].Reply(), "A"); verdict != actOK || back.Src != f.Dst {
			untranslated++
		}
	}
	if moved+untranslated > 0 {
		t.Errorf("of %d idle established flows, %d changed backend and %d replies left untranslated", idle, moved, untranslated)
	}
}
