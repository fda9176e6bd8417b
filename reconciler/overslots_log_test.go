package reconciler_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// A frontend that needs more backend slots than the datapath takes is
// logged with its service and the numbers once per count, not at every
// retry, and again when the count changes after it was written. (It was
// once in its status and the metrics only: a remote service of 190,214
// slots was never logged.)
func TestFrontendOverTheSlotLimitIsLoggedOncePerCount(t *testing.T) {
	raw := memoryMaps(t)
	var buf syncbuf.Buffer
	a := newAgentLogging(t, raw, func(c *reconciler.Config) {
		c.LBMaxWeightedSlots = 1 << 20 // weights alone decide the slots
		c.LBRetryMaxBackoff = 20 * time.Millisecond
	}, slog.New(slog.NewTextHandler(&buf, nil)))
	a.start(t)
	defer a.stop(t)
	vip := addr("10.96.12.1:80/TCP")
	declareWeights := func(w1, w2 uint16) {
		a.write(t, func(txn statedb.WriteTxn) error {
			b1, b2 := be("10.8.2.1:8080/TCP"), be("10.8.2.2:8080/TCP")
			b1.Weight, b2.Weight = w1, w2
			return upsert(a.w, txn, "wide", vip.String(), lb.AlgorithmRandom, false, b1, b2)
		})
	}
	const line = `msg="Frontend needs more backend slots than the datapath takes; not written until it needs fewer"`
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(buf.String(), "\n") {
			if strings.Contains(l, line) {
				out = append(out, l)
			}
		}
		return out
	}
	// waitRetried waits until the frontend has failed n more times.
	waitRetried := func(n int) {
		t.Helper()
		seen := map[uint64]bool{}
		deadline := time.Now().Add(10 * time.Second)
		for len(seen) < n {
			if time.Now().After(deadline) {
				t.Fatalf("the frontend failed %d times, want %d:\n%s", len(seen), n, buf.String())
			}
			fe, _, ok := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(vip))
			if ok && fe.Status.Kind == statedbreconciler.StatusKindError {
				seen[fe.Status.ID] = true
			}
			time.Sleep(time.Millisecond)
		}
	}

	declareWeights(1, 65535) // 65,536 slots
	waitRetried(4)
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], "service=test/wide frontend=10.96.12.1:80/TCP slots=65536 max=65535") {
		t.Fatalf("log lines %q, want one naming the service and the numbers", got)
	}
	declareWeights(2, 65535) // another count: logged again
	waitRetried(2)
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "slots=65537 max=65535") {
		t.Fatalf("log lines %q, want a second one with 65537 slots", got)
	}
	declareWeights(1, 65534) // fits: written
	a.waitDone(t, 10*time.Second)
	declareWeights(1, 65535) // over again: logged again
	waitRetried(1)
	if got := lines(); len(got) != 3 || !strings.Contains(got[2], "slots=65536") {
		t.Fatalf("log lines %q, want a third one once it no longer fits", got)
	}
}
