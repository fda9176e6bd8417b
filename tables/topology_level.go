package tables

import "github.com/lbstate/lbstate/lb"

// topologyLevel walks a service's topology keys for this node and returns
// the level it selects ("*", a key, or lb.TopologyLevelNone) and which
// backends of pool are left out of it. nodes is parallel to pool.
//
// A key selects the backends whose node has this node's value for it
// (the node name for lb.TopologyKeyHostname); it is taken when one of
// them is usable: in a state that may take new flows (active,
// terminating, quarantined), so that the state tiers apply within the
// level before the next key is tried. A key this node has no value for
// selects nothing, and neither does a backend of unknown node.
func topologyLevel(pool []lb.BackendRef, nodes []*lb.NodeLabels, keys []string, local *lb.Node) (string, []bool) {
	outside := make([]bool, len(pool))
	for _, key := range keys {
		if key == lb.TopologyKeyAny {
			clear(outside) // an earlier key may have marked some
			return key, outside
		}
		want, ok := local.Labels[key]
		if key == lb.TopologyKeyHostname {
			want, ok = local.Name, local.Name != ""
		}
		if !ok {
			continue
		}
		usable := false
		for i, n := range nodes {
			outside[i] = !sameTopology(n, key, want)
			usable = usable || (!outside[i] && tier(pool[i].State) < tierNone)
		}
		if usable {
			return key, outside
		}
	}
	for i := range outside {
		outside[i] = true
	}
	return lb.TopologyLevelNone, outside
}

// sameTopology reports whether node n (nil: unknown) has value want for
// key.
func sameTopology(n *lb.NodeLabels, key, want string) bool {
	if n == nil {
		return false
	}
	if key == lb.TopologyKeyHostname {
		return n.Name == want
	}
	v, ok := n.Get(key)
	return ok && v == want
}
