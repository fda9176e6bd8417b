package tables

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lbstate/lbstate/internal/zonetest"
	"github.com/lbstate/lbstate/lb"
)

// A backend whose zone finds the process's table of zone names full
// keeps its place in the selection without a zone, and that is logged
// (with the service, the backend and the zone) and counted in
// lbstate_zone_names_refused_total, not lost without a word.
func TestBackendZoneRefusedByAFullZoneTableIsLoggedAndCounted(t *testing.T) {
	if !zonetest.Full(t) {
		return
	}
	refused := NewZoneRefusedCollector()
	before := testutil.ToFloat64(refused)
	if before == 0 {
		t.Fatalf("lbstate_zone_names_refused_total is 0 after %d names", 1<<16)
	}
	var logs bytes.Buffer
	w, err := New(statedb.New(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	web := lb.NewServiceName("default", "web")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{
			{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		return w.SetBackends(txn, web, lb.SourceK8s,
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.1.1:8080/TCP"), Weight: 100, Zone: "zone-late"})
	})
	fe, _, ok := w.Frontends().Get(w.db.ReadTxn(), FrontendByAddress.Query(lb.MustParseL3n4Addr("10.96.0.1:80/TCP")))
	if !ok || len(fe.Backends) != 1 || fe.Backends[0].Zone != 0 {
		t.Fatalf("frontend %v", fe)
	}
	if after := testutil.ToFloat64(refused); after <= before {
		t.Fatalf("lbstate_zone_names_refused_total %v, was %v", after, before)
	}
	for _, want := range []string{"default/web", "10.0.1.1:8080/TCP", "zone-late", "lbstate_zone_names_refused_total"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}
}
