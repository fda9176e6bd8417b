package tables

import (
	"slices"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/lbstate/lbstate/lb"
)

// Topology keys (lb.ServiceParams.TopologyKeys) make a service's
// selection read the labels of the nodes its backends run on. The Writer
// keeps, for each such service and only for them, a row of the
// topology-services table: its keys and the nodes of its backends. A
// node's new labels then re-select exactly the services that have a
// backend on it and list a key whose value changed, in the caller's
// transaction, while services without topology keys pay nothing for it.

// TopologyService is a row of the topology-services table, which the
// Writer derives: a service with topology keys, and the nodes of its
// backends, whose labels its selection reads.
type TopologyService struct {
	Name  lb.ServiceName `json:"name" yaml:"name"`
	Keys  []string       `json:"keys" yaml:"keys"`
	Nodes []string       `json:"nodes,omitempty" yaml:"nodes,omitempty"`
}

func (t *TopologyService) TableHeader() []string { return []string{"Name", "Keys", "Nodes"} }

func (t *TopologyService) TableRow() []string {
	return []string{t.Name.String(), strings.Join(t.Keys, ","), strings.Join(t.Nodes, ", ")}
}

// NodeLabelsByName is the primary index of the node-labels table.
var NodeLabelsByName = byName(func(n *lb.NodeLabels) string { return n.Name })

// TopologyServiceByName is the primary index of topology-services.
var TopologyServiceByName = byServiceName("name", func(t *TopologyService) lb.ServiceName { return t.Name })

// TopologyServiceByNode finds the services with topology keys that have
// a backend on a node.
var TopologyServiceByNode = statedb.Index[*TopologyService, string]{
	Name: "node",
	FromObject: func(t *TopologyService) index.KeySet {
		keys := make([]index.Key, len(t.Nodes))
		for i, n := range t.Nodes {
			keys[i] = index.String(n)
		}
		return keySetOf(keys)
	},
	FromKey:    index.String,
	FromString: index.FromString,
}

// SetNodeLabels records the labels of a node of this cluster, which its
// backends (BackendParams.NodeName) have for topology keys. The services
// with a backend on it that list a key whose value changed are
// re-selected in txn. The local node's own labels are those of
// SetLocalNode, not these.
func (w *Writer) SetNodeLabels(txn statedb.WriteTxn, name string, labels map[string]string) error {
	if name == "" {
		return Invalidf("node labels", "name", "empty")
	}
	old, _, found := w.t.nodeLabels.Get(txn, NodeLabelsByName.Query(name))
	if found && old.Is(labels) {
		return nil
	}
	if _, _, err := w.t.nodeLabels.Insert(txn, lb.NewNodeLabels(name, labels)); err != nil {
		return err
	}
	return w.nodeChanged(txn, name, func(key string) bool {
		if !found {
			return true
		}
		v, had := old.Get(key)
		n, has := labels[key]
		return had != has || v != n
	})
}

// DeleteNode forgets a node's labels: its backends' node becomes
// unknown, which matches no topology key but "*".
func (w *Writer) DeleteNode(txn statedb.WriteTxn, name string) error {
	old, _, found := w.t.nodeLabels.Get(txn, NodeLabelsByName.Query(name))
	if !found {
		return nil
	}
	if _, _, err := w.t.nodeLabels.Delete(txn, old); err != nil {
		return err
	}
	return w.nodeChanged(txn, name, func(string) bool { return true })
}

// nodeChanged re-selects the services with a backend on node name that
// list a key for which changed is true (the hostname key compares names,
// which do not change).
func (w *Writer) nodeChanged(txn statedb.WriteTxn, name string, changed func(key string) bool) error {
	ch := w.begin(txn)
	for t := range w.t.topology.List(txn, TopologyServiceByNode.Query(name)) {
		if dependsOn(t.Keys, changed) {
			ch.refresh(t.Name)
		}
	}
	return w.end(txn, ch)
}

// localLabelsChanged re-selects the services with topology keys that
// list a label of the local node whose value changed.
func (w *Writer) localLabelsChanged(ch *changes, txn statedb.ReadTxn, before, after map[string]string) {
	changed := func(key string) bool {
		v, had := before[key]
		n, has := after[key]
		return had != has || v != n
	}
	for t := range w.t.topology.All(txn) {
		if dependsOn(t.Keys, changed) {
			ch.refresh(t.Name)
		}
	}
}

func dependsOn(keys []string, changed func(string) bool) bool {
	return slices.ContainsFunc(keys, func(k string) bool {
		return k != lb.TopologyKeyAny && k != lb.TopologyKeyHostname && changed(k)
	})
}

// topologyCandidates gives each candidate its node: the local node's
// declaration for backends on it (so that --k8s-node-zone and the like
// hold for both sides), else the node-labels row. Remote clusters'
// backends (a cluster ID) have no node here.
func (w *Writer) topologyCandidates(txn statedb.ReadTxn, ch *changes, cands []Candidate) {
	local := ch.localNode(w, txn)
	var localLabels *lb.NodeLabels
	for i := range cands {
		p := cands[i].Params
		switch {
		case p.NodeName == "" || p.Remote():
		case local != nil && p.NodeName == local.Name:
			if localLabels == nil {
				localLabels = lb.NewNodeLabels(local.Name, local.Labels)
			}
			cands[i].Node = localLabels
		default:
			cands[i].Node, _, _ = w.t.nodeLabels.Get(txn, NodeLabelsByName.Query(p.NodeName))
		}
	}
}

// trackTopology brings the topology-services row of a service up to
// date: its keys and its backends' nodes, or no row when its topology
// keys do not apply (none, or a redirect).
func (w *Writer) trackTopology(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, keys []string, cands []Candidate) {
	if len(keys) == 0 && w.t.topology.NumObjects(txn) == 0 {
		return // (nearly every service: no lookup)
	}
	old, _, found := w.t.topology.Get(txn, TopologyServiceByName.Query(name))
	if len(keys) == 0 {
		if found {
			_, _, err := w.t.topology.Delete(txn, old)
			ch.fail(err)
		}
		return
	}
	var nodes []string
	for _, c := range cands {
		if n := c.Params.NodeName; n != "" && !c.Params.Remote() {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if found && slices.Equal(old.Keys, keys) && slices.Equal(old.Nodes, nodes) {
		return
	}
	_, _, err := w.t.topology.Insert(txn, &TopologyService{Name: name, Keys: keys, Nodes: nodes})
	ch.fail(err)
}
