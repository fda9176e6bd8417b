package reconciler_test

// Room in maps that someone else writes too.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// When someone else deletes entries from a map, the frontends waiting
// for room in it get that room: a frontend is not refused on counts that
// the other writer made wrong. (The counts once only grew on the
// kernel's word, when another writer's entries filled the map, and never
// came down when that writer deleted them: the waiting frontends were
// refused on the counts' word until the next prune, half an hour on.)
func TestRoomSomeoneElseFreesGoesToTheWaitingFrontends(t *testing.T) {
	cfg := smallMapsConfig()
	cfg.LBServicesMax = 10 // 5 services of two entries (master, and a slot past the inline ones)
	onBothMapKindsWith(t, cfg, func(t *testing.T, maps *bpf.Maps) {
		a := newAgent(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = 200 * time.Millisecond })
		// A source that never syncs: no prune deletes the other writer's
		// entries, only their writer does.
		if _, err := a.w.RegisterInitializer("k8s"); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		defer a.stop(t)

		// Another writer takes 6 of the 10 entries.
		var foreign []bpf.ServiceKey
		for i := range 6 {
			k := bpf.NewServiceKey(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 99, 0, byte(i)}), 80, lb.ScopeExternal), 0)
			mustDo(t, maps.Services.Update(k, bpf.ServiceValue{RevNatID: 1000 + uint32(i)}))
			foreign = append(foreign, k)
		}
		all := []int{0, 1, 2, 3, 4}
		a.write(t, func(txn statedb.WriteTxn) error {
			for _, i := range all {
				if err := declareFull(a, txn, i, bpf.InlineSlots+1); err != nil {
					return err
				}
			}
			return nil
		})
		// The kernel says full: two are served, the others wait.
		deadline := time.Now().Add(20 * time.Second)
		for {
			done, failed := a.statuses()
			if len(done) == 2 && len(failed) == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("served %v, failed %v; want 2 served, 3 waiting\n%s", done, failed, dumpText(t, maps))
			}
			time.Sleep(10 * time.Millisecond)
		}

		// The other writer deletes its entries: every frontend fits.
		mustDo(t, maps.Services.BatchDelete(foreign))
		a.waitServed(t, maps, all, all)
		if got, want := metricValue(a.scrape(t), "lbstate_map_entries", "lb_services"), 2*len(all); got != want {
			t.Errorf("lbstate_map_entries{map=\"lb_services\"} %d, want %d", got, want)
		}
	})
}
