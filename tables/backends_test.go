package tables

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
)

// SetBackends releases exactly the source's backends it does not list,
// for a few backends (searched) and for many (indexed), and leaves
// another source's backends of the service alone.
func TestSetBackendsReleasesUnlisted(t *testing.T) {
	for _, n := range []int{3, smallset.Max + 8} {
		w := newTestWriter(t)
		name := lb.NewServiceName("ns", "svc")
		backend := func(i int) lb.BackendParams {
			return lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 80, lb.ScopeExternal), Weight: 100}
		}
		var all []lb.BackendParams
		for i := range n {
			all = append(all, backend(i))
		}
		other := backend(200)
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			if err := w.UpsertBackends(txn, name, lb.SourceAPI, other); err != nil {
				return err
			}
			return w.SetBackends(txn, name, lb.SourceK8s, all...)
		})
		// Keep every other one.
		var kept []lb.BackendParams
		for i := 0; i < n; i += 2 {
			kept = append(kept, all[i])
		}
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.SetBackends(txn, name, lb.SourceK8s, kept...) })

		txn := w.db.ReadTxn()
		got := map[string]bool{}
		for b := range w.BackendsOf(txn, name) {
			for _, inst := range b.Instances {
				got[fmt.Sprintf("%s %s", b.Address, inst.Source)] = true
			}
		}
		want := map[string]bool{fmt.Sprintf("%s %s", other.Address, lb.SourceAPI): true}
		for _, b := range kept {
			want[fmt.Sprintf("%s %s", b.Address, lb.SourceK8s)] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("n=%d: backends after SetBackends of every other one:\n got %v\nwant %v", n, got, want)
		}
	}
}

// A verdict's details (since when, the last error) are kept on the
// backend row, where lbctl shows them; changing only them leaves the
// frontends (and so the maps) alone.
func TestSetBackendVerdictKeepsDetailsOnTheRow(t *testing.T) {
	w := newTestWriter(t)
	name := lb.NewServiceName("ns", "svc")
	addr := lb.MustParseL3n4Addr("10.0.0.1:80/TCP")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		return w.UpsertBackends(txn, name, lb.SourceK8s, lb.BackendParams{Address: addr, Weight: 100})
	})
	since := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tripped := lb.HealthVerdict{Healthy: false, Since: since, LastError: "connect: connection refused"}
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.SetBackendVerdict(txn, addr, tripped) })
	feRev := w.Frontends().Revision(w.db.ReadTxn())

	again := tripped
	again.LastError = "timeout after 1s"
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.SetBackendVerdict(txn, addr, again) })
	txn := w.db.ReadTxn()
	if rev := w.Frontends().Revision(txn); rev != feRev {
		t.Errorf("frontends changed (revision %d -> %d) for a new last error alone", feRev, rev)
	}
	b, _, _ := w.Backends().Get(txn, BackendByAddress.Query(addr))
	if got := b.Verdict(); !got.Equal(again) {
		t.Errorf("backend row says %+v, want %+v", got, again)
	}
	if row := b.TableRow(); row[3] != "unhealthy" || row[4] != "2025-01-02T03:04:05Z" || row[5] != "timeout after 1s" {
		t.Errorf("table row %q", row)
	}
}
