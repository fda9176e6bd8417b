package tables

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// Of two sources declaring the local node (a manifests directory beside a
// cluster), the higher-priority one's is in force in either order, and
// the other's later updates change nothing.
func TestLocalNodeOfHighestPrioritySourceInForce(t *testing.T) {
	file := lb.Node{Name: "n1", Zone: "zone-a"}
	k8s := lb.Node{Name: "n1", Zone: "zone-b"}
	for _, order := range [][]lb.Source{{lb.SourceFile, lb.SourceK8s}, {lb.SourceK8s, lb.SourceFile}} {
		w := newTestWriter(t)
		for _, src := range order {
			node := map[lb.Source]lb.Node{lb.SourceFile: file, lb.SourceK8s: k8s}[src]
			mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.SetLocalNode(txn, src, node) })
		}
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			return w.SetLocalNode(txn, lb.SourceK8s, lb.Node{Name: "n1", Zone: "zone-c"})
		})
		n, ok := w.localNode(w.db.ReadTxn())
		if !ok || n.Zone != "zone-a" {
			t.Fatalf("order %v: local node %+v, want the file source's (zone-a)", order, n)
		}
	}
	w := newTestWriter(t)
	txn := w.WriteTxn()
	defer txn.Abort()
	if err := w.SetLocalNode(txn, lb.Source(201), file); err == nil {
		t.Fatal("an unknown source was accepted")
	}
}
