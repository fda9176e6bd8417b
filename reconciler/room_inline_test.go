package reconciler_test

import (
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
)

// With lb_services full at the inline line, a frontend growing from
// InlineSlots backends to one more needs the one entry of its new slot
// and waits for it (serving what it had), and another frontend shrinking
// from InlineSlots+1 to InlineSlots frees that entry, which the waiting
// one then takes: 1 + max(0, slots - InlineSlots) entries a frontend.
func TestGrowthAcrossTheInlineLineWaitsForTheOneEntryAShrinkFrees(t *testing.T) {
	k := bpf.InlineSlots
	cfg := smallMapsConfig()
	cfg.LBServicesMax = 4 // 1 + 1 + 2
	onBothMapKindsWith(t, cfg, func(t *testing.T, maps *bpf.Maps) {
		a := newAgent(t, maps, nil)
		a.start(t)
		defer a.stop(t)
		declare := func(sizes map[int]int) {
			a.write(t, func(txn statedb.WriteTxn) error {
				for i, n := range sizes {
					if err := declareFull(a, txn, i, n); err != nil {
						return err
					}
				}
				return nil
			})
		}
		all := []int{0, 1, 2}
		declare(map[int]int{0: k, 1: k, 2: k + 1})
		a.waitServed(t, maps, all, all)

		declare(map[int]int{0: k + 1})
		waitFor(t, 10*time.Second, "the grown frontend to wait for room", func() bool {
			_, failed := a.statuses()
			return failed[fullVIP(0)] != ""
		})
		if entries, slots := serviceEntries(t, maps, addr(fullVIP(0))); entries != 1 || len(slots) != k {
			t.Errorf("the waiting frontend: %d entries, %d slots; want what it had, 1 and %d\n%s", entries, len(slots), k, dumpText(t, maps))
		}

		declare(map[int]int{2: k})
		a.waitServed(t, maps, all, all)
		for i, want := range map[int]int{0: 2, 1: 1, 2: 1} {
			if entries, _ := serviceEntries(t, maps, addr(fullVIP(i))); entries != want {
				t.Errorf("service %d: %d lb_services entries, want %d\n%s", i, entries, want, dumpText(t, maps))
			}
		}
		checkAllCounted(t, a, maps)
	})
}
