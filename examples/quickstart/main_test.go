package main

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// The quickstart's declarations select per node: node-b in zone-b gets
// its own ingress backend and the zone-b DNS backend.
func TestDeclareSelectsForTheNode(t *testing.T) {
	w, err := tables.New(statedb.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := w.WriteTxn()
	if err := declare(w, txn, lb.Node{Name: "node-b", Zone: "zone-b"}); err != nil {
		t.Fatal(err)
	}
	rtxn := txn.Commit()
	for addr, want := range map[string]string{
		"0.0.0.0:30443/TCP": "10.0.2.5:8443/TCP",
		"10.96.0.53:53/UDP": "10.0.2.53:53/UDP",
	} {
		fe, _, found := w.Frontends().Get(rtxn, tables.FrontendByAddress.Query(lb.MustParseL3n4Addr(addr)))
		if !found {
			t.Fatalf("frontend %s missing", addr)
		}
		if len(fe.Backends) != 1 || fe.Backends[0].Address.String() != want {
			t.Errorf("frontend %s: backends %v, want [%s]", addr, fe.Backends, want)
		}
	}
}
