package tables

import (
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// Candidate is a backend a frontend might use: the parameters in force for
// the frontend's service and the backend's health.
type Candidate struct {
	Params    *lb.BackendParams
	Unhealthy bool
	// Node is the backend's node as this cluster knows it, for services
	// with topology keys; nil when it is unknown (not seen yet, or a
	// remote cluster's backend), which matches no key but "*".
	Node *lb.NodeLabels
	// Remote is a backend of another cluster (lb.BackendParams.Remote:
	// its cluster ID, not the source that wrote it): used only by a
	// global service (lb.ServiceParams.IsGlobal).
	Remote bool
}

// SelectBackends picks the backends of one frontend from its service's
// candidates. It is a pure function of its inputs; node may be nil when
// the local node is not known yet.
//
// The steps, in order:
//  0. Clusters: another cluster's backends (Candidate.Remote) only for
//     a global service, whichever source declares it.
//  1. Port: the backend must be of the frontend's address family (IPv4 or
//     IPv6) and serve its port name and protocol.
//  2. Traffic policy Local (the one that applies to the frontend,
//     lb.ServiceParams.TrafficPolicyFor): only this node's backends.
//  3. Cluster affinity of a global service (lb.ServiceParams.ClusterAffinity):
//     with local, while a backend of this cluster left by steps 1-2 is
//     active (state active and healthy, as Cilium counts them), the
//     other clusters' backends are left out; with remote, the reverse;
//     with none, or when the preferred side has no active backend, both
//     go on. Those left out stay with weight 0, so that the flows they
//     carry can finish, and take no part in the steps below.
//  4. Topology, with policy Cluster. With TopologyKeys (which win over
//     TrafficDistribution), see topologyLevel: the first key at which
//     some usable backend's node shares this node's value selects
//     exactly those backends; "*" selects all; with no match and no "*",
//     none. The backends left out stay with weight 0, so that the flows
//     they carry (from before a node was relabelled) can finish.
//     With a TrafficDistribution instead: keep the
//     active backends hinted for this node (PreferSameNode) or its zone,
//     unless some active backend has no hints or none is hinted for us,
//     in which case all are kept (the Kubernetes safeguards).
//     PreferSameNode without any node hints keeps the active backends
//     whose NodeName is this node, if there are any: slices written
//     without forNodes hints still say where each endpoint runs.
//  5. State, within the selected set: the best tier present takes new flows: active, else
//     terminating, else quarantined (an unhealthy active backend counts as
//     quarantined). The others stay with weight 0, so the flows they carry
//     can finish; maintenance and not-ready backends never take new flows,
//     not even when nothing else is left.
//
// Redirected frontends (redirected is true) and LocalRedirect frontends
// skip steps 2 to 4: the redirect chose their backends.
//
// The result has the backends taking new flows first, each group sorted
// by address.
func SelectBackends(fe lb.FrontendParams, svc *lb.ServiceParams, node *lb.Node, redirected bool, cands []Candidate) []lb.BackendRef {
	refs, _ := SelectBackendsLevel(fe, svc, node, redirected, cands)
	return refs
}

// SelectBackendsLevel is SelectBackends that also returns the topology
// level it selected, as lb.Frontend.TopologyLevel records it: empty
// unless the service's topology keys applied.
func SelectBackendsLevel(fe lb.FrontendParams, svc *lb.ServiceParams, node *lb.Node, redirected bool, cands []Candidate) ([]lb.BackendRef, string) {
	return selectBackends(nil, fe, svc, node, redirected, cands)
}

// selectScratch is where the Writer's selections build their results,
// reused from one frontend to the next.
type selectScratch struct {
	pool  []lb.BackendRef
	hints []*lb.BackendParams
	// refusedZone is a backend whose zone the full table of zone names
	// gave no handle (lb.ZoneOf), for the Writer to log.
	refusedZone *lb.BackendParams
}

// release drops what the scratch space refers to (backend rows).
func (sc *selectScratch) release() {
	clear(sc.hints[:cap(sc.hints)])
	sc.pool, sc.hints, sc.refusedZone = sc.pool[:0], sc.hints[:0], nil
}

// selectBackends is SelectBackendsLevel, building its result in sc (when
// not nil; the result is valid until the next use of sc).
func selectBackends(sc *selectScratch, fe lb.FrontendParams, svc *lb.ServiceParams, node *lb.Node, redirected bool, cands []Candidate) ([]lb.BackendRef, string) {
	var local lb.Node
	if node != nil {
		local = *node
	}
	policy := svc.TrafficPolicyFor(fe)
	filtered := redirected || fe.Type == lb.SVCTypeLocalRedirect

	var pool []lb.BackendRef
	var hints []*lb.BackendParams
	if sc != nil {
		pool, hints = sc.pool[:0], sc.hints[:0]
	} else {
		pool = make([]lb.BackendRef, 0, len(cands))
		hints = make([]*lb.BackendParams, 0, len(cands))
	}
	var nodes []*lb.NodeLabels // parallel to pool, with topology keys only
	useKeys := !filtered && policy == lb.TrafficPolicyCluster && len(svc.TopologyKeys) > 0
	global := svc.IsGlobal()
	var remote []bool // parallel to pool, with a cluster affinity only
	affinity := lb.AffinityNone
	if global && !filtered {
		affinity = svc.ClusterAffinity()
	}
	for _, c := range cands {
		p := c.Params
		if c.Remote && !global {
			continue
		}
		if p.Address.Is4() != fe.Address.Is4() || !p.MatchesPort(fe.PortName, fe.Address.Protocol()) {
			continue
		}
		if !filtered && policy == lb.TrafficPolicyLocal && (local.Name == "" || p.NodeName != local.Name) {
			continue
		}
		state := p.State
		if state == lb.BackendActive && c.Unhealthy {
			state = lb.BackendQuarantined
		}
		zone := lb.ZoneOf(p.Zone)
		if zone == 0 && p.Zone != "" && sc != nil {
			sc.refusedZone = p
		}
		pool = append(pool, lb.BackendRef{
			Address: p.Address, Weight: p.Weight, State: state,
			ClusterID: p.ClusterID, Zone: zone,
		})
		hints = append(hints, p)
		if useKeys {
			nodes = append(nodes, c.Node)
		}
		if affinity != lb.AffinityNone {
			remote = append(remote, c.Remote)
		}
	}
	var benched []lb.BackendRef // left out by the cluster affinity
	if affinity != lb.AffinityNone {
		pool, hints, nodes, benched = applyAffinity(affinity, pool, hints, nodes, remote)
	}

	level := ""
	var outside []bool // with topology keys: left out of the selected level
	if useKeys {
		level, outside = topologyLevel(pool, nodes, svc.TopologyKeys, &local)
	} else if !filtered && policy == lb.TrafficPolicyCluster && svc.TrafficDistribution != lb.TrafficDistributionDefault {
		if keep := topologyFilter(pool, hints, svc.TrafficDistribution, &local); keep != nil {
			pool = slices.DeleteFunc(pool, func(r lb.BackendRef) bool {
				return r.State == lb.BackendActive && !keep[r.Address]
			})
		}
	}

	best := tierNone
	for i, r := range pool {
		if outside == nil || !outside[i] {
			best = min(best, tier(r.State))
		}
	}
	for i := range pool {
		if t := tier(pool[i].State); t != best || t == tierNone || (outside != nil && outside[i]) {
			pool[i].Weight = 0
		}
	}
	for _, r := range benched {
		r.Weight = 0
		pool = append(pool, r)
	}
	slices.SortFunc(pool, func(a, b lb.BackendRef) int {
		if (a.Weight > 0) != (b.Weight > 0) {
			if a.Weight > 0 {
				return -1
			}
			return 1
		}
		return a.Address.Compare(b.Address)
	})
	if sc != nil {
		sc.pool, sc.hints = pool, hints
	}
	return pool, level
}

// applyAffinity moves the backends of the side the affinity does not
// prefer from pool to benched, if the preferred side has an active
// backend. hints and nodes (nil without topology keys) and remote are
// parallel to pool, and stay so.
func applyAffinity(a lb.ClusterAffinity, pool []lb.BackendRef, hints []*lb.BackendParams, nodes []*lb.NodeLabels, remote []bool) ([]lb.BackendRef, []*lb.BackendParams, []*lb.NodeLabels, []lb.BackendRef) {
	preferRemote := a == lb.AffinityRemote
	found := false
	for i, r := range pool {
		if remote[i] == preferRemote && r.State == lb.BackendActive {
			found = true
			break
		}
	}
	if !found {
		return pool, hints, nodes, nil
	}
	var benched []lb.BackendRef
	n := 0
	for i, r := range pool {
		if remote[i] != preferRemote {
			benched = append(benched, r)
			continue
		}
		pool[n], hints[n] = r, hints[i]
		if nodes != nil {
			nodes[n] = nodes[i]
		}
		n++
	}
	if nodes != nil {
		nodes = nodes[:n]
	}
	return pool[:n], hints[:n], nodes, benched
}

const tierNone = 3

// tier orders states by preference. Maintenance and not-ready backends
// are never preferred: an operator took the one out of rotation, and
// Kubernetes the other (a failed readiness probe), so even a service with
// nothing else left must not send them new flows.
func tier(s lb.BackendState) int {
	switch s {
	case lb.BackendActive:
		return 0
	case lb.BackendTerminating:
		return 1
	case lb.BackendQuarantined:
		return 2
	}
	return tierNone
}

// topologyFilter returns the active backends to keep for this node, or nil
// to keep them all. pool and hints are parallel slices.
func topologyFilter(pool []lb.BackendRef, hints []*lb.BackendParams, mode lb.TrafficDistribution, node *lb.Node) map[lb.L3n4Addr]bool {
	if mode == lb.TrafficDistributionPreferSameNode {
		keep := hinted(pool, hints, node.Name, (*lb.BackendParams).ForNodes)
		if keep == nil && !anyNodeHints(pool, hints) {
			keep = onNode(pool, hints, node.Name)
		}
		if keep != nil {
			return keep
		}
	}
	return hinted(pool, hints, node.Zone, (*lb.BackendParams).ForZones)
}

// anyNodeHints reports whether some active backend has node hints.
func anyNodeHints(pool []lb.BackendRef, hints []*lb.BackendParams) bool {
	for i, r := range pool {
		if r.State == lb.BackendActive && len(hints[i].ForNodes()) > 0 {
			return true
		}
	}
	return false
}

// onNode returns the active backends that run on node name, or nil when
// name is empty or none does.
func onNode(pool []lb.BackendRef, hints []*lb.BackendParams, name string) map[lb.L3n4Addr]bool {
	if name == "" {
		return nil
	}
	var keep map[lb.L3n4Addr]bool
	for i, r := range pool {
		if r.State == lb.BackendActive && hints[i].NodeName == name {
			if keep == nil {
				keep = map[lb.L3n4Addr]bool{}
			}
			keep[r.Address] = true
		}
	}
	return keep
}

// hinted returns the active backends whose hints include want, or nil when
// want is empty, some active backend has no hints, or none matches.
func hinted(pool []lb.BackendRef, hints []*lb.BackendParams, want string, hintsOf func(*lb.BackendParams) []string) map[lb.L3n4Addr]bool {
	if want == "" {
		return nil
	}
	keep := map[lb.L3n4Addr]bool{}
	for i, r := range pool {
		if r.State != lb.BackendActive {
			continue
		}
		h := hintsOf(hints[i])
		if len(h) == 0 {
			return nil
		}
		if slices.Contains(h, want) {
			keep[r.Address] = true
		}
	}
	if len(keep) == 0 {
		return nil
	}
	return keep
}
