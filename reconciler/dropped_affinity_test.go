package reconciler_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// A backend ID that restore dropped leaves no affinity pin behind when
// its entry goes and the ID is freed (checkDropped): the datapath may
// have pinned clients to it while a slot still named it, after the
// prune, and a pin naming a freed ID would send its client to whichever
// backend takes the ID next in that frontend.
func TestDroppedBackendIDLeavesNoAffinityPin(t *testing.T) {
	defer reconciler.SetPruneRetry(20*time.Millisecond, 50*time.Millisecond)()
	raw := memoryMaps(t)
	x := addr("10.20.0.1:8080/TCP")
	vips := []lb.L3n4Addr{addr("10.96.20.1:80/TCP"), addr("10.96.20.2:80/TCP")}
	twoIDsOfOneAddress(t, raw, x, vips, 5, 9)
	maps, failing := failingServices(raw) // the slot naming the dropped ID stays
	a := newAgent(t, maps, nil)
	a.startWithTwoIDs(t, x, vips, nil)
	// After the prune, the datapath pins a client of each frontend to the
	// ID its slot names (which of the two restore dropped is not this
	// test's business).
	now := bpf.MonotonicSeconds()
	for i, id := range []uint32{5, 9} {
		k := bpf.AffinityKey{Client: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).As16(), RevNatID: uint32(3 + i)}
		mustDo(t, raw.Affinity.Update(k, bpf.AffinityValue{BackendID: id, LastUsed: now, Slot: 1}))
	}
	// The slots are rewritten to the ID kept; the other's entry goes.
	failing.armed.Store(false)
	var kept uint32
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := 0
		raw.Backends.Iterate(func(id uint32, _ bpf.Backend) bool { n, kept = n+1, id; return true })
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dropped ID's entry was never deleted:\n%s", dumpText(t, raw))
		}
	}
	mustDo(t, raw.Affinity.Iterate(func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		if v.BackendID != kept {
			t.Errorf("frontend %d keeps a pin to backend ID %d, freed (lb_backends holds %d alone)", k.RevNatID, v.BackendID, kept)
		}
		return true
	}))
}
