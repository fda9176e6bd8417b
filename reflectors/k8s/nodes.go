package k8s

import (
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/tables"
)

// Every node's labels give the backends on it their topology values
// (lb.ServiceParams.TopologyKeys): a feed hands over every Node's
// (kubeapi.NodeLabels: from an API server, as metadata only).

// prepareNodeLabels records a node's labels (or that it is gone) as a
// Writer call. The Writer compares them with what it has, so an event
// that changed something else costs one lookup.
func (r *Reflector) prepareNodeLabels(call func(func(statedb.WriteTxn)), name string, labels map[string]string, deleted bool) {
	cause := &tables.Cause{Source: r.as.String(), Kind: "Node", Name: name}
	if deleted {
		cause.Detail = "deleted"
		call(func(txn statedb.WriteTxn) { r.w.SetCause(txn, cause); r.check(r.w.DeleteNode(txn, name), "node "+name) })
		return
	}
	cause.Detail = "labels"
	call(func(txn statedb.WriteTxn) {
		r.w.SetCause(txn, cause)
		r.check(r.w.SetNodeLabels(txn, name, labels), "node "+name)
	})
}
