package reconciler_test

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// failingMasters fails, while armed, every lb_services batch update that
// holds a master entry (slot 0); slot writes go through.
type failingMasters struct {
	bpf.Map[bpf.ServiceKey, bpf.ServiceValue]
	armed atomic.Bool
	fired atomic.Int32
}

func (f *failingMasters) BatchUpdate(ks []bpf.ServiceKey, vs []bpf.ServiceValue) error {
	if f.armed.Load() {
		for _, k := range ks {
			if k.Slot == 0 {
				f.fired.Add(1)
				return fmt.Errorf("%s: batch update: injected master failure", f.Name())
			}
		}
	}
	return f.Map.BatchUpdate(ks, vs)
}

// revNatsOf counts the lb_rev_nat entries that translate back to vip.
func revNatsOf(t *testing.T, m *bpf.Maps, vip lb.L3n4Addr) int {
	t.Helper()
	n, want := 0, netip.AddrPortFrom(vip.Addr(), vip.Port())
	if err := m.RevNat.Iterate(func(_ uint32, v bpf.RevNatValue) bool {
		if v.AddrPort() == want {
			n++
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A frontend whose master entry could not be written gets no reverse-NAT
// entry either: the write order (backends, slots, master, then rev-NAT)
// holds when a step fails, and the retry writes both. (writeMasters once
// wrote the rev-NAT entry of a frontend whose master had just failed.)
func TestNoRevNatWithoutItsMaster(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, raw *bpf.Maps, _ func() *bpf.Maps) {
		m := *raw
		flaky := &failingMasters{Map: raw.Services}
		flaky.armed.Store(true)
		m.Services = flaky
		a := newAgent(t, &m, nil)
		a.start(t)
		defer a.stop(t)
		vip := addr("10.96.11.1:80/TCP")
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "masterless", vip.String(), lb.AlgorithmRandom, false, be("10.8.1.1:8080/TCP"))
		})
		deadline := time.Now().Add(10 * time.Second)
		for flaky.fired.Load() < 2 { // the first try and a retry
			if time.Now().After(deadline) {
				t.Fatal("the injected master failure never fired twice")
			}
			time.Sleep(time.Millisecond)
		}
		if _, ok, _ := raw.Services.Lookup(bpf.NewServiceKey(vip, 0)); ok {
			t.Fatal("master written despite the injected failure")
		}
		if n := revNatsOf(t, raw, vip); n != 0 {
			t.Fatalf("%d rev-NAT entries for %s whose master failed, want 0:\n%s", n, vip, dumpText(t, raw))
		}
		flaky.armed.Store(false)
		a.waitDone(t, 30*time.Second)
		if _, ok, _ := raw.Services.Lookup(bpf.NewServiceKey(vip, 0)); !ok {
			t.Fatal("master missing after the retry")
		}
		if n := revNatsOf(t, raw, vip); n != 1 {
			t.Fatalf("%d rev-NAT entries for %s after the retry, want 1:\n%s", n, vip, dumpText(t, raw))
		}
	})
}
