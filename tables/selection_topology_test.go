package tables

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// Topology keys in SelectBackends: the ordered levels, strict lists, and
// how they compose with traffic policy, states and weights.

const (
	zoneKey   = "topology.kubernetes.io/zone"
	regionKey = "topology.kubernetes.io/region"
	rackKey   = "example.com/rack"
)

// topoNode is a node of the cluster: its name, rack, zone and region
// (an empty value leaves the label out).
func topoNode(name, rack, zone, region string) *lb.NodeLabels {
	labels := map[string]string{}
	for k, v := range map[string]string{rackKey: rack, zoneKey: zone, regionKey: region} {
		if v != "" {
			labels[k] = v
		}
	}
	return lb.NewNodeLabels(name, labels)
}

func topoLabels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func selOn(n *lb.NodeLabels) selOpt {
	return func(c *Candidate) { c.Node = n; c.Params.NodeName = n.Name }
}

func selSvcKeys(keys ...string) *lb.ServiceParams {
	return &lb.ServiceParams{TopologyKeys: keys}
}

type topoCase struct {
	name  string
	fe    lb.FrontendParams
	svc   *lb.ServiceParams
	node  *lb.Node
	cands []Candidate
	want  []string
	level string
}

func topoCases() []topoCase {
	var (
		// This node: node1, rack r1, zone a1 in region a.
		local = &lb.Node{Name: "node1", Zone: "a1", Labels: topoLabels(rackKey, "r1", zoneKey, "a1", regionKey, "a")}
		node1 = topoNode("node1", "r1", "a1", "a")
		node2 = topoNode("node2", "r1", "a1", "a") // same rack
		node3 = topoNode("node3", "r2", "a1", "a") // same zone
		node4 = topoNode("node4", "r3", "a2", "a") // same region
		node5 = topoNode("node5", "r4", "b1", "b") // elsewhere

		feCIP = selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
		feLB  = selFE("192.0.2.10:80/TCP", lb.SVCTypeLoadBalancer, "")

		hostZoneAny = selSvcKeys(lb.TopologyKeyHostname, zoneKey, lb.TopologyKeyAny)
		zoneStrict  = selSvcKeys(zoneKey)
		allLevels   = selSvcKeys(lb.TopologyKeyHostname, rackKey, zoneKey, regionKey, lb.TopologyKeyAny)
	)
	spread := selCands(
		selBE("10.0.0.1:80/TCP", selOn(node1)),
		selBE("10.0.0.2:80/TCP", selOn(node2)),
		selBE("10.0.0.3:80/TCP", selOn(node3)),
		selBE("10.0.0.4:80/TCP", selOn(node4)),
		selBE("10.0.0.5:80/TCP", selOn(node5)),
	)
	return []topoCase{
		{
			name: "this node's backends first", fe: feCIP, svc: allLevels, node: local, cands: spread,
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP (weight=0)", "10.0.0.3:80/TCP (weight=0)", "10.0.0.4:80/TCP (weight=0)", "10.0.0.5:80/TCP (weight=0)"},
			level: lb.TopologyKeyHostname,
		},
		{
			name: "then the rack", fe: feCIP, svc: allLevels, node: local, cands: spread[1:],
			want:  []string{"10.0.0.2:80/TCP", "10.0.0.3:80/TCP (weight=0)", "10.0.0.4:80/TCP (weight=0)", "10.0.0.5:80/TCP (weight=0)"},
			level: rackKey,
		},
		{
			name: "then the zone", fe: feCIP, svc: allLevels, node: local, cands: spread[2:],
			want:  []string{"10.0.0.3:80/TCP", "10.0.0.4:80/TCP (weight=0)", "10.0.0.5:80/TCP (weight=0)"},
			level: zoneKey,
		},
		{
			name: "then the region", fe: feCIP, svc: allLevels, node: local, cands: spread[3:],
			want:  []string{"10.0.0.4:80/TCP", "10.0.0.5:80/TCP (weight=0)"},
			level: regionKey,
		},
		{
			name: "then everything with *", fe: feCIP, svc: allLevels, node: local, cands: spread[4:],
			want: []string{"10.0.0.5:80/TCP"}, level: lb.TopologyKeyAny,
		},
		{
			name: "a level selects every backend sharing the value, across nodes", fe: feCIP, svc: selSvcKeys(zoneKey, lb.TopologyKeyAny), node: local, cands: spread,
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP", "10.0.0.4:80/TCP (weight=0)", "10.0.0.5:80/TCP (weight=0)"},
			level: zoneKey,
		},
		{
			name: "strict without a match: no backend takes new flows, all stay listed", fe: feCIP, svc: zoneStrict, node: local, cands: spread[3:],
			want:  []string{"10.0.0.4:80/TCP (weight=0)", "10.0.0.5:80/TCP (weight=0)"},
			level: lb.TopologyLevelNone,
		},
		{
			name: "strict with a match uses it", fe: feCIP, svc: zoneStrict, node: local, cands: spread[2:],
			want:  []string{"10.0.0.3:80/TCP", "10.0.0.4:80/TCP (weight=0)", "10.0.0.5:80/TCP (weight=0)"},
			level: zoneKey,
		},
		{
			name: "strict with no candidates", fe: feCIP, svc: zoneStrict, node: local, cands: nil,
			want: nil, level: lb.TopologyLevelNone,
		},
		{
			name: "a backend of unknown node matches no key", fe: feCIP, svc: hostZoneAny, node: local,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOnNode("node9")), selBE("10.0.0.5:80/TCP", selOn(node5))),
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.5:80/TCP"}, level: lb.TopologyKeyAny,
		},
		{
			name: "a backend of unknown node is left out by a strict list", fe: feCIP, svc: selSvcKeys(lb.TopologyKeyHostname, zoneKey), node: local,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOnNode("node1"))),
			want:  []string{"10.0.0.1:80/TCP (weight=0)"}, level: lb.TopologyLevelNone,
		},
		{
			name: "hostname compares node names, not the hostname label", fe: feCIP, svc: selSvcKeys(lb.TopologyKeyHostname), node: local,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOn(lb.NewNodeLabels("node1", map[string]string{lb.TopologyKeyHostname: "other"})))),
			want:  []string{"10.0.0.1:80/TCP"}, level: lb.TopologyKeyHostname,
		},
		{
			name: "a key this node has no label for is skipped", fe: feCIP, svc: selSvcKeys("example.com/row", zoneKey), node: local,
			cands: selCands(
				selBE("10.0.0.3:80/TCP", selOn(node3)),
				selBE("10.0.0.9:80/TCP", selOn(lb.NewNodeLabels("node9", map[string]string{"example.com/row": ""}))),
			),
			want: []string{"10.0.0.3:80/TCP", "10.0.0.9:80/TCP (weight=0)"}, level: zoneKey,
		},
		{
			name: "an empty label value matches the same empty value", fe: feCIP, svc: selSvcKeys("example.com/row"),
			node: &lb.Node{Name: "node1", Labels: map[string]string{"example.com/row": ""}},
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selOn(lb.NewNodeLabels("node8", map[string]string{"example.com/row": ""}))),
				selBE("10.0.0.2:80/TCP", selOn(node5)),
			),
			want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP (weight=0)"}, level: "example.com/row",
		},
		{
			name: "unknown local node: only * matches", fe: feCIP, svc: hostZoneAny, node: nil, cands: spread[:2],
			want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"}, level: lb.TopologyKeyAny,
		},
		{
			name: "unknown local node and a strict list: nothing", fe: feCIP, svc: zoneStrict, node: nil, cands: spread[:2],
			want: []string{"10.0.0.1:80/TCP (weight=0)", "10.0.0.2:80/TCP (weight=0)"}, level: lb.TopologyLevelNone,
		},

		// States within a level.
		{
			name: "a terminating backend in the level takes new flows before the next key", fe: feCIP, svc: hostZoneAny, node: local,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOn(node1), selTerminating), selBE("10.0.0.3:80/TCP", selOn(node3))),
			want:  []string{"10.0.0.1:80/TCP (terminating)", "10.0.0.3:80/TCP (weight=0)"}, level: lb.TopologyKeyHostname,
		},
		{
			name: "an unhealthy backend in the level counts as quarantined, and still holds the level", fe: feCIP, svc: hostZoneAny, node: local,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOn(node1), selUnhealthy), selBE("10.0.0.3:80/TCP", selOn(node3))),
			want:  []string{"10.0.0.1:80/TCP (quarantined)", "10.0.0.3:80/TCP (weight=0)"}, level: lb.TopologyKeyHostname,
		},
		{
			name: "active beats terminating within the level", fe: feCIP, svc: selSvcKeys(zoneKey), node: local,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOn(node1), selTerminating), selBE("10.0.0.3:80/TCP", selOn(node3))),
			want:  []string{"10.0.0.3:80/TCP", "10.0.0.1:80/TCP (terminating weight=0)"}, level: zoneKey,
		},
		{
			name: "a level of only not-ready and maintenance backends falls to the next key", fe: feCIP, svc: hostZoneAny, node: local,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selOn(node1), selNotReady),
				selBE("10.0.0.2:80/TCP", selOn(node1), selMaintenance),
				selBE("10.0.0.3:80/TCP", selOn(node3)),
			),
			want:  []string{"10.0.0.3:80/TCP", "10.0.0.1:80/TCP (not-ready weight=0)", "10.0.0.2:80/TCP (maintenance weight=0)"},
			level: zoneKey,
		},
		{
			name: "an active backend outside the level does not lift the level's terminating one", fe: feCIP, svc: zoneStrict, node: local,
			cands: selCands(selBE("10.0.0.3:80/TCP", selOn(node3), selTerminating), selBE("10.0.0.5:80/TCP", selOn(node5))),
			want:  []string{"10.0.0.3:80/TCP (terminating)", "10.0.0.5:80/TCP (weight=0)"}, level: zoneKey,
		},

		// Weights, policies, other settings.
		{
			name: "weights apply within the level", fe: feCIP, svc: selSvcKeys(zoneKey), node: local,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selOn(node1), selWeight(90)),
				selBE("10.0.0.3:80/TCP", selOn(node3), selWeight(10)),
				selBE("10.0.0.5:80/TCP", selOn(node5), selWeight(500)),
			),
			want:  []string{"10.0.0.1:80/TCP (weight=90)", "10.0.0.3:80/TCP (weight=10)", "10.0.0.5:80/TCP (weight=0)"},
			level: zoneKey,
		},
		{
			name: "topology keys win over trafficDistribution", fe: feCIP, node: local,
			svc: &lb.ServiceParams{TopologyKeys: []string{regionKey}, TrafficDistribution: lb.TrafficDistributionPreferSameZone},
			cands: selCands(
				selBE("10.0.0.3:80/TCP", selOn(node3), selForZones("b1")),
				selBE("10.0.0.4:80/TCP", selOn(node4), selForZones("a1")),
			),
			want: []string{"10.0.0.3:80/TCP", "10.0.0.4:80/TCP"}, level: regionKey,
		},
		{
			name: "traffic policy Local comes first: the keys do not apply", fe: feLB, node: local,
			svc:   &lb.ServiceParams{ExtTrafficPolicy: lb.TrafficPolicyLocal, TopologyKeys: []string{regionKey}},
			cands: spread, want: []string{"10.0.0.1:80/TCP"}, level: "",
		},
		{
			name: "keys apply to the internal twin of a Local external frontend", fe: selFE("0.0.0.0:30080/TCP/i", lb.SVCTypeNodePort, ""), node: local,
			svc:   &lb.ServiceParams{ExtTrafficPolicy: lb.TrafficPolicyLocal, TopologyKeys: []string{rackKey}},
			cands: spread[1:3], want: []string{"10.0.0.2:80/TCP", "10.0.0.3:80/TCP (weight=0)"}, level: rackKey,
		},
		{
			name: "LocalRedirect skips the keys", fe: selFE("169.254.20.10:80/TCP", lb.SVCTypeLocalRedirect, ""), node: local,
			svc: zoneStrict, cands: spread[3:], want: []string{"10.0.0.4:80/TCP", "10.0.0.5:80/TCP"}, level: "",
		},
		{
			name: "the port filter comes before the levels", fe: selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "http"), svc: hostZoneAny, node: local,
			cands: selCands(selBE("10.0.0.1:9090/TCP", selOn(node1), selPorts("metrics")), selBE("10.0.0.3:80/TCP", selOn(node3), selPorts("http"))),
			want:  []string{"10.0.0.3:80/TCP"}, level: zoneKey,
		},
	}
}

func TestSelectBackendsTopologyKeys(t *testing.T) {
	for _, tc := range topoCases() {
		t.Run(tc.name, func(t *testing.T) {
			refs, level := SelectBackendsLevel(tc.fe, tc.svc, tc.node, false, tc.cands)
			var got []string
			for _, r := range refs {
				got = append(got, selRefString(r))
			}
			if !slices.Equal(got, tc.want) || level != tc.level {
				t.Errorf("SelectBackendsLevel:\n  got:  %q level %q\n  want: %q level %q", got, level, tc.want, tc.level)
			}
		})
	}
}

// FuzzSelectBackendsTopology checks SelectBackends' properties with
// topology keys over random candidates, nodes and key lists: the result
// is a subset of the candidates; with "*" last and an active backend,
// some backend takes new flows; and every backend taking new flows at a
// key's level has this node's value for that key.
func FuzzSelectBackendsTopology(f *testing.F) {
	f.Add([]byte{0x13, 0x21, 0x40, 0x05, 0x77, 0x10, 0x32})
	f.Add([]byte{0x80, 0x01, 0x12, 0x23, 0x34, 0x45})
	f.Add([]byte{0xff, 0xfe, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77})
	local := &lb.Node{Name: "node0", Labels: map[string]string{zoneKey: "z0", regionKey: "r0", rackKey: "k0"}}
	keyPool := []string{lb.TopologyKeyHostname, rackKey, zoneKey, regionKey, "example.com/unset"}
	states := []lb.BackendState{lb.BackendActive, lb.BackendTerminating, lb.BackendQuarantined, lb.BackendMaintenance, lb.BackendNotReady}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		// The first byte chooses the keys (a subset of keyPool, in order,
		// and whether "*" ends them); each later byte is a backend.
		var keys []string
		for i, k := range keyPool {
			if data[0]&(1<<i) != 0 {
				keys = append(keys, k)
			}
		}
		withAny := data[0]&0x80 != 0
		if withAny {
			keys = append(keys, lb.TopologyKeyAny)
		}
		if len(keys) == 0 {
			return
		}
		var cands []Candidate
		addrs := map[lb.L3n4Addr]bool{}
		anyActive := false
		for i, b := range data[1:] {
			addr := lb.NewL3n4Addr(lb.ProtoTCP, netipFrom(i), 80, lb.ScopeExternal)
			p := &lb.BackendParams{Address: addr, Weight: uint16(b>>5) + 1, State: states[int(b&7)%len(states)]}
			var node *lb.NodeLabels
			if n := (b >> 3) & 3; n < 3 { // 3: unknown node
				// Nodes 0-2: node0 is this one; node1 shares its rack, zone
				// and region; node2 only its region.
				labels := map[string]string{regionKey: "r0"}
				if n < 2 {
					labels[zoneKey], labels[rackKey] = "z0", "k0"
				}
				node = lb.NewNodeLabels("node"+string(rune('0'+n)), labels)
				p.NodeName = node.Name
			}
			cands = append(cands, Candidate{Params: p, Node: node, Unhealthy: b&0x40 != 0 && b&0x20 != 0})
			addrs[addr] = true
			anyActive = anyActive || p.State == lb.BackendActive
		}
		svc := &lb.ServiceParams{TopologyKeys: keys}
		fe := selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
		refs, level := SelectBackendsLevel(fe, svc, local, false, cands)

		taking := 0
		for _, r := range refs {
			if !addrs[r.Address] {
				t.Fatalf("selected %s, not a candidate", r.Address)
			}
			delete(addrs, r.Address) // each at most once
			if r.Weight == 0 {
				continue
			}
			taking++
			if level == lb.TopologyKeyAny || level == lb.TopologyLevelNone {
				continue
			}
			i := slices.IndexFunc(cands, func(c Candidate) bool { return c.Params.Address == r.Address })
			want := local.Labels[level]
			if level == lb.TopologyKeyHostname {
				want = local.Name
			}
			if !sameTopology(cands[i].Node, level, want) {
				t.Fatalf("%s takes new flows at level %s but its node is %+v", r.Address, level, cands[i].Node)
			}
		}
		if withAny && anyActive && taking == 0 {
			t.Fatalf("keys %q end in * and a backend is active, but none takes new flows: %v (level %s)", keys, refs, level)
		}
		if level == lb.TopologyLevelNone && (withAny || taking > 0) {
			t.Fatalf("level none with keys %q, %d taking new flows", keys, taking)
		}
	})
}

// netipFrom returns a distinct IPv4 address for i.
func netipFrom(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
}
