package bpf_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A read of a master whose re-check fails tries again (the flow is
// balanced as if nothing happened); one whose every try fails gives up:
// the flow is dropped and counted as torn-master, never balanced on the
// copy it could not trust.
func TestTCRetriesAChangedMasterThenDropsTheFlow(t *testing.T) {
	for _, c := range []struct {
		failing  uint32 // tries of every read that fail
		balanced bool
	}{{0, true}, {1, true}, {2, true}, {3, false}, {4, false}} {
		t.Run(fmt.Sprintf("%d-failing", c.failing), func(t *testing.T) {
			h := newDatapathOptions(t, dpConfig(), bpf.WithMasterRechecks(bpf.DefaultDatapathOptions, c.failing))
			h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
			h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
			h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1, 2}})
			for port := 40000; port < 40010; port++ {
				f := flow(fmt.Sprintf("10.0.0.1:%d", port), "10.96.0.1:80", lb.ProtoTCP)
				verdict, out := h.send("lb_tc_ingress", f)
				switch {
				case c.balanced && (verdict != actOK || !slices.Contains([]string{"10.1.0.1:8080", "10.1.0.2:8080"}, out.Dst.String())):
					t.Fatalf("%v: verdict %d to %s, want it balanced to a backend", f, verdict, out.Dst)
				case !c.balanced && verdict != actShot:
					t.Fatalf("%v: verdict %d to %s, want it dropped", f, verdict, out.Dst)
				}
			}
			torn := h.drops(0, bpf.DropTornMaster)
			if want := map[bool]uint64{true: 0, false: 10}[c.balanced]; torn != want {
				t.Errorf("%d flows dropped as %s, want %d", torn, bpf.DropReasons[bpf.DropTornMaster], want)
			}
			if n := h.counter(1, 1).Flows + h.counter(1, 2).Flows; c.balanced != (n == 10) || !c.balanced && n != 0 {
				t.Errorf("%d flows counted to the frontend's backends", n)
			}
		})
	}
}

// A connect() whose frontend's master changed under every read of it is
// refused and counted as torn-master, never sent on the copy; one whose
// reads succeed on a later try reaches a backend.
func TestSocketLBRefusesAConnectWhoseMasterKeepsChanging(t *testing.T) {
	for _, c := range []struct {
		failing uint32
		want    string
	}{{2, "b1 10.96.0.10:80"}, {3, "refused 10.96.0.10:80"}} {
		t.Run(fmt.Sprintf("%d-failing", c.failing), func(t *testing.T) {
			s := newSockSetupOptions(t, bpf.WithMasterRechecks(bpf.DefaultDatapathOptions, c.failing))
			s.frontend(testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: []uint32{1}})
			lines := bpftest.RunClient(t, s.cg, s.ns, "tcp 10.96.0.10:80 2")
			if want := []string{c.want, c.want}; !slices.Equal(lines, want) {
				t.Errorf("the client saw %q, want %q", lines, want)
			}
			torn := s.drops(0, bpf.DropTornMaster)
			if want := map[bool]uint64{true: 2, false: 0}[strings.HasPrefix(c.want, "refused")]; torn != want {
				t.Errorf("%d connects dropped as %s, want %d", torn, bpf.DropReasons[bpf.DropTornMaster], want)
			}
		})
	}
}

// A slot's entry past the inline ones that names another frontend (an
// element the kernel reused for another frontend's slot under the read)
// is no backend of this one: the flows that land on it are dropped as
// missing-entry, never sent to the other frontend's backend.
func TestTCIgnoresASlotEntryOfAnotherFrontend(t *testing.T) {
	h := newDatapath(t, dpConfig())
	var slots []uint32
	for i := range uint32(bpf.InlineSlots + 1) {
		h.backend(i+1, fmt.Sprintf("10.1.0.%d:8080/TCP", i+1), lb.BackendActive)
		slots = append(slots, i+1)
	}
	h.backend(99, "10.2.0.99:8080/TCP", lb.BackendActive)
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	h.frontend(testFrontend{addr: fe.String(), id: 1, slots: slots})
	// Slot 17's entry as the kernel could hand it over: another
	// frontend's (ID 2) backend.
	h.check(h.maps.Services.Update(bpf.NewServiceKey(fe, bpf.InlineSlots+1), bpf.ServiceValue{BackendID: 99, RevNatID: 2}))
	const n = 400
	for port := range n {
		f := flow(fmt.Sprintf("10.0.0.1:%d", 20000+port), "10.96.0.1:80", lb.ProtoTCP)
		verdict, out := h.send("lb_tc_ingress", f)
		if verdict == actOK && out.Dst.String() == "10.2.0.99:8080" {
			t.Fatalf("%v went to the other frontend's backend", f)
		}
	}
	// A flow lands on slot 17 with probability 1/17: 400 flows miss it
	// with probability (16/17)^400, about 3e-11.
	if missing := h.drops(1, bpf.DropMissingEntry); missing == 0 {
		t.Errorf("no flow landed on slot %d (dropped as missing-entry) in %d", bpf.InlineSlots+1, n)
	}
}
