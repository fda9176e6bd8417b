package tables

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// A redirect limited to ClusterIP frontends and to some ports (a local
// redirect policy's serviceMatcher with toPorts) moves only those
// frontends to the target's backends; the others keep the service's own,
// and clearing the redirect restores exactly what was there.
func TestPartialRedirectCoversOnlyItsFrontends(t *testing.T) {
	w := newTestWriter(t)
	dns := lb.MustParseL3n4Addr("10.96.0.10:53/UDP")
	dnsTCP := lb.MustParseL3n4Addr("10.96.0.10:53/TCP")
	metrics := lb.MustParseL3n4Addr("10.96.0.10:9153/TCP")
	nodePort := lb.MustParseL3n4Addr("192.0.2.1:30053/UDP")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: nameA, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{
			{Address: dns, Type: lb.SVCTypeClusterIP, PortName: "dns"},
			{Address: dnsTCP, Type: lb.SVCTypeClusterIP, PortName: "dns-tcp"},
			{Address: metrics, Type: lb.SVCTypeClusterIP, PortName: "metrics"},
			{Address: nodePort, Type: lb.SVCTypeNodePort, PortName: "dns"},
		}}); err != nil {
			return err
		}
		if err := w.UpsertBackends(txn, nameA, lb.SourceK8s,
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:53/UDP"), Weight: 100}.WithPortNames("dns"),
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:53/TCP"), Weight: 100}.WithPortNames("dns-tcp"),
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:9153/TCP"), Weight: 100}.WithPortNames("metrics")); err != nil {
			return err
		}
		return w.UpsertBackends(txn, nameB, lb.SourceRedirect,
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.9.1:53/UDP"), Weight: 100}.WithPortNames("dns"),
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.9.1:53/TCP"), Weight: 100}.WithPortNames("dns-tcp"))
	})
	before := tablesState(w)

	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetRedirect(txn, nameA, lb.Redirect{Source: lb.SourceRedirect, To: nameB, ClusterIPOnly: true,
			Ports: []lb.RedirectPort{{Name: "dns"}, {Port: 53, Protocol: lb.ProtoTCP}}})
	})
	txn := w.db.ReadTxn()
	want := map[lb.L3n4Addr]string{
		dns:      "10.0.9.1:53/UDP",   // by name
		dnsTCP:   "10.0.9.1:53/TCP",   // by number and protocol
		metrics:  "10.0.0.1:9153/TCP", // not listed
		nodePort: "10.0.0.1:53/UDP",   // not a ClusterIP
	}
	for addr, backend := range want {
		fe, _, ok := w.Frontends().Get(txn, FrontendByAddress.Query(addr))
		if !ok || len(fe.Backends) != 1 || fe.Backends[0].Address.String() != backend {
			t.Errorf("frontend %s: backends %v, want only %s", addr, fe.Backends, backend)
		}
		if redirected := !fe.RedirectedTo().IsZero(); redirected != (backend[:7] == "10.0.9.") {
			t.Errorf("frontend %s: RedirectedTo %q", addr, fe.RedirectedTo())
		}
	}

	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.ClearRedirect(txn, nameA, lb.SourceRedirect) })
	if after := tablesState(w); after != before {
		t.Fatalf("clearing the redirect did not restore the tables:\n--- before\n%s--- after\n%s", before, after)
	}
}
