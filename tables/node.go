package tables

import (
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/lbstate/lbstate/lb"
)

// NodeDeclarationsTableName holds each source's declaration of the local
// node; the node table holds the one in force.
const NodeDeclarationsTableName = "node-declarations"

// NodeDeclaration is one source's view of the local node.
type NodeDeclaration struct {
	Source lb.Source `json:"source" yaml:"source"`
	Node   lb.Node   `json:"node" yaml:"node"`
}

func (d *NodeDeclaration) TableHeader() []string {
	return append([]string{"Source"}, (*lb.Node)(nil).TableHeader()...)
}

func (d *NodeDeclaration) TableRow() []string {
	return append([]string{d.Source.String()}, d.Node.TableRow()...)
}

// NodeDeclarationBySource is the primary index of node declarations. Its
// keys sort as sources rank, highest priority first.
var NodeDeclarationBySource = statedb.Index[*NodeDeclaration, lb.Source]{
	Name: "source",
	FromObject: func(d *NodeDeclaration) index.KeySet {
		return index.NewKeySet(sourceKey(d.Source))
	},
	FromKey: sourceKey,
	FromString: func(s string) (index.Key, error) {
		var src lb.Source
		if err := src.UnmarshalText([]byte(s)); err != nil {
			return nil, err
		}
		return sourceKey(src), nil
	},
	Unique: true,
}

// sourceKey inverts the priority so that keys sort highest first.
func sourceKey(s lb.Source) index.Key {
	r := ^s.Priority()
	return index.Key{byte(r >> 8), byte(r)}
}

// SetLocalNode records src's declaration of the node the agent runs on:
// its name (traffic policy Local, node hints), zone (zone hints), labels
// and addresses (NodePort frontends). As for services, the declaration of
// the highest-priority source is in force, whatever the order they come
// in: a manifests directory beside a cluster keeps its node.
func (w *Writer) SetLocalNode(txn statedb.WriteTxn, src lb.Source, node lb.Node) error {
	if node.Name == "" {
		return Invalidf("local node", "name", "empty")
	}
	if !src.Valid() {
		return Invalidf("local node "+node.Name, "source", "unknown source %s", src)
	}
	old, _, found := w.t.nodeDecls.Get(txn, NodeDeclarationBySource.Query(src))
	if found && old.Node.Equal(&node) {
		return nil
	}
	if _, _, err := w.t.nodeDecls.Insert(txn, &NodeDeclaration{Source: src, Node: node.Clone()}); err != nil {
		return err
	}
	for d := range w.t.nodeDecls.All(txn) { // highest priority first
		return w.setNodeInForce(txn, d.Node)
	}
	return nil
}

// setNodeInForce makes node the local node and re-selects what depends on
// what changed.
func (w *Writer) setNodeInForce(txn statedb.WriteTxn, node lb.Node) error {
	old, hadOld := w.localNode(txn)
	if hadOld && old.Equal(&node) {
		return nil
	}
	node = node.Clone()
	if err := w.t.node.DeleteAll(txn); err != nil {
		return err
	}
	if _, _, err := w.t.node.Insert(txn, &node); err != nil {
		return err
	}
	ch := w.begin(txn)
	if hadOld && old.Name == node.Name && old.Zone == node.Zone {
		// Addresses do not affect selection; labels, only through
		// topology keys.
		w.localLabelsChanged(ch, txn, old.Labels, node.Labels)
		return w.end(txn, ch)
	}
	for svc := range w.t.services.All(txn) {
		ch.refresh(svc.Name)
	}
	return w.end(txn, ch)
}
