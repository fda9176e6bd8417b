package reconciler_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// plainMetric returns the value of an unlabelled metric in a scrape, -1
// if it is not there.
func plainMetric(scrape, name string) int {
	for _, line := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return int(f)
			}
		}
	}
	return -1
}

// A frontend waiting for room is one transition, however often it is
// retried: lbstate_map_full_total and lbstate_reconciler_errors_total
// count frontends that started failing, not tries, and
// lbstate_reconciler_waiting_frontends says how many wait. (Once, 10
// waiting frontends counted 1,153 in 53 minutes.)
func TestWaitingFrontendCountsOnceHoweverOftenRetried(t *testing.T) {
	cfg := smallMapsConfig()
	cfg.LBServicesMax = 10 // 5 of 7 services of two entries fit (master, and a slot past the inline ones)
	maps, err := bpf.NewMemoryMaps(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reconciler.SetRetryMinBackoff(5 * time.Millisecond)()
	a := newAgent(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = 10 * time.Millisecond })
	a.start(t)
	defer a.stop(t)
	all := []int{0, 1, 2, 3, 4, 5, 6}
	a.write(t, func(txn statedb.WriteTxn) error {
		for _, i := range all {
			if err := declareFull(a, txn, i, bpf.InlineSlots+1); err != nil {
				return err
			}
		}
		return nil
	})
	a.waitServed(t, maps, all[:5], all)

	// Each retry writes the frontend's status anew: wait for many.
	start := a.frontends.Revision(a.db.ReadTxn())
	deadline := time.Now().Add(20 * time.Second)
	for a.frontends.Revision(a.db.ReadTxn()) < start+40 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiting frontends were not retried: revision %d, from %d", a.frontends.Revision(a.db.ReadTxn()), start)
		}
		time.Sleep(5 * time.Millisecond) // polling, with the deadline above
	}
	check := func(full, errors, waiting int) {
		t.Helper()
		out := a.scrape(t)
		if got := metricValue(out, "lbstate_map_full_total", "lb_services"); got != full {
			t.Errorf(`lbstate_map_full_total{map="lb_services"} %d, want %d`, got, full)
		}
		if got := plainMetric(out, "lbstate_reconciler_errors_total"); got != errors {
			t.Errorf("lbstate_reconciler_errors_total %d, want %d", got, errors)
		}
		if got := plainMetric(out, "lbstate_reconciler_waiting_frontends"); got != waiting {
			t.Errorf("lbstate_reconciler_waiting_frontends %d, want %d", got, waiting)
		}
	}
	check(2, 2, 2)

	// One served goes: the oldest waiting one is served, one waits.
	a.write(t, func(txn statedb.WriteTxn) error {
		return a.w.DeleteService(txn, lb.NewServiceName("test", fmt.Sprintf("full-%d", 0)), lb.SourceK8s)
	})
	a.waitServed(t, maps, all[1:6], all[1:])
	check(2, 2, 1)
}

// A frontend waiting for an ID (lb_rev_nat's slots all held) that is
// deleted waits no more, and holds no slot: the next frontend gets it.
func TestDeletedFrontendWaitingForAnIDHoldsNothing(t *testing.T) {
	cfg := smallMapsConfig()
	cfg.LBRevNatMax = 2
	maps, err := bpf.NewMemoryMaps(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reconciler.SetRetryMinBackoff(time.Hour)()
	a := newAgent(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = time.Hour })
	a.start(t)
	defer a.stop(t)
	a.write(t, func(txn statedb.WriteTxn) error {
		for i := range 3 {
			if err := declareFull(a, txn, i, 1); err != nil {
				return err
			}
		}
		return nil
	})
	a.waitServed(t, maps, []int{0, 1}, []int{0, 1, 2})
	if got := plainMetric(a.scrape(t), "lbstate_reconciler_waiting_frontends"); got != 1 {
		t.Errorf("lbstate_reconciler_waiting_frontends %d, want 1", got)
	}
	del := func(i int) func(txn statedb.WriteTxn) error {
		return func(txn statedb.WriteTxn) error {
			return a.w.DeleteService(txn, lb.NewServiceName("test", fmt.Sprintf("full-%d", i)), lb.SourceK8s)
		}
	}
	a.write(t, del(2))
	a.waitServed(t, maps, []int{0, 1}, []int{0, 1})
	a.write(t, del(0))
	a.write(t, func(txn statedb.WriteTxn) error { return declareFull(a, txn, 3, 1) })
	a.waitServed(t, maps, []int{1, 3}, []int{1, 3})
	if got := plainMetric(a.scrape(t), "lbstate_reconciler_waiting_frontends"); got != 0 {
		t.Errorf("lbstate_reconciler_waiting_frontends %d, want 0", got)
	}
}
