package reconciler_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
)

// failingReads fails every read of every entry of a map.
type failingReads[K comparable, V any] struct{ bpf.Map[K, V] }

func (m failingReads[K, V]) Iterate(func(K, V) bool) error {
	return errors.New("injected read failure")
}

// Restore runs beside the sources' first listing, after the hive has
// started; when it fails (a pinned map it cannot read), the reconciler
// writes nothing (without what the maps held, a write would hand the
// IDs of live flows to others): every frontend fails with restore's
// error, and the hive is asked to shut down.
func TestFailedRestoreWritesNothing(t *testing.T) {
	raw := memoryMaps(t)
	a1 := newAgent(t, raw, nil)
	a1.start(t)
	a1.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a1.w, txn, "web", "10.96.18.1:80/TCP", lb.AlgorithmRandom, false, be("10.18.0.1:8080/TCP"))
	})
	a1.waitDone(t, 10*time.Second)
	a1.stop(t)
	before := dumpText(t, raw)

	maps := *raw
	maps.Backends = failingReads[uint32, bpf.Backend]{raw.Backends}
	var log syncbuf.Buffer
	a2 := newAgentLogging(t, &maps, nil, slog.New(slog.NewTextHandler(&log, nil)))
	a2.start(t)
	defer a2.stop(t)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", "10.96.18.1:80/TCP", lb.AlgorithmRandom, false, be("10.18.0.2:8080/TCP"))
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, failed := a2.statuses()
		if err := failed["10.96.18.1:80/TCP"]; strings.Contains(err, "injected read failure") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frontend did not fail with restore's error: %v", failed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := dumpText(t, raw); got != before {
		t.Errorf("the maps changed after a failed restore:\n--- before\n%s--- after\n%s", before, got)
	}
	if !strings.Contains(log.String(), "Restoring from the pinned maps failed") {
		t.Errorf("the failed restore was not logged:\n%s", log.String())
	}
}
