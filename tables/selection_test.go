package tables

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// Helpers for the SelectBackends table. They are prefixed with "sel" so
// they do not collide with the package's other test helpers.

// selFE is a frontend of the given address (text form), type and port name.
func selFE(addr string, typ lb.SVCType, portName string) lb.FrontendParams {
	return lb.FrontendParams{Address: lb.MustParseL3n4Addr(addr), Type: typ, PortName: portName}
}

// selSvc is a service with the given traffic policies and distribution.
func selSvc(ext, internal lb.TrafficPolicy, td lb.TrafficDistribution) *lb.ServiceParams {
	return &lb.ServiceParams{ExtTrafficPolicy: ext, IntTrafficPolicy: internal, TrafficDistribution: td}
}

// selOpt adjusts a candidate built by selBE.
type selOpt func(*Candidate)

// selBE is a healthy active candidate of DefaultBackendWeight at addr,
// adjusted by opts.
func selBE(addr string, opts ...selOpt) Candidate {
	c := Candidate{Params: &lb.BackendParams{
		Address: lb.MustParseL3n4Addr(addr),
		Weight:  lb.DefaultBackendWeight,
	}}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func selPorts(names ...string) selOpt {
	return func(c *Candidate) { *c.Params = c.Params.WithPortNames(names...) }
}
func selWeight(w uint16) selOpt   { return func(c *Candidate) { c.Params.Weight = w } }
func selOnNode(n string) selOpt   { return func(c *Candidate) { c.Params.NodeName = n } }
func selInZone(z string) selOpt   { return func(c *Candidate) { c.Params.Zone = z } }
func selCluster(id uint32) selOpt { return func(c *Candidate) { c.Params.ClusterID = id } }
func selForZones(z ...string) selOpt {
	return func(c *Candidate) { *c.Params = c.Params.WithTopologyHints(z, c.Params.ForNodes()) }
}
func selForNodes(n ...string) selOpt {
	return func(c *Candidate) { *c.Params = c.Params.WithTopologyHints(c.Params.ForZones(), n) }
}

var (
	selTerminating = func(c *Candidate) { c.Params.State = lb.BackendTerminating }
	selQuarantined = func(c *Candidate) { c.Params.State = lb.BackendQuarantined }
	selMaintenance = func(c *Candidate) { c.Params.State = lb.BackendMaintenance }
	selNotReady    = func(c *Candidate) { c.Params.State = lb.BackendNotReady }
	selUnhealthy   = func(c *Candidate) { c.Unhealthy = true }
)

// selCands lists candidates.
func selCands(cs ...Candidate) []Candidate { return cs }

// selRefString prints a result compactly: BackendRef.String(), plus the
// carried fields String leaves out (cluster ID and zone) when they are set.
func selRefString(r lb.BackendRef) string {
	s := r.String()
	if r.ClusterID != 0 {
		s += " cluster=" + strconv.FormatUint(uint64(r.ClusterID), 10)
	}
	if r.Zone != 0 {
		s += " zone=" + r.Zone.String()
	}
	return s
}

type selCase struct {
	name       string
	fe         lb.FrontendParams
	svc        *lb.ServiceParams
	node       *lb.Node
	redirected bool
	cands      []Candidate
	want       []string // selRefString of each result, in order
}

// selCases returns the SelectBackends table. The fixtures are local so
// they cannot collide with the package's other tests.
func selCases() []selCase {
	var (
		// Services by policy and distribution.
		svcCluster      = selSvc(lb.TrafficPolicyCluster, lb.TrafficPolicyCluster, lb.TrafficDistributionDefault)
		svcExtLocal     = selSvc(lb.TrafficPolicyLocal, lb.TrafficPolicyCluster, lb.TrafficDistributionDefault)
		svcIntLocal     = selSvc(lb.TrafficPolicyCluster, lb.TrafficPolicyLocal, lb.TrafficDistributionDefault)
		svcBothLocal    = selSvc(lb.TrafficPolicyLocal, lb.TrafficPolicyLocal, lb.TrafficDistributionDefault)
		svcSameZone     = selSvc(lb.TrafficPolicyCluster, lb.TrafficPolicyCluster, lb.TrafficDistributionPreferSameZone)
		svcSameNode     = selSvc(lb.TrafficPolicyCluster, lb.TrafficPolicyCluster, lb.TrafficDistributionPreferSameNode)
		svcExtLocalZone = selSvc(lb.TrafficPolicyLocal, lb.TrafficPolicyCluster, lb.TrafficDistributionPreferSameZone)
		svcIntLocalZone = selSvc(lb.TrafficPolicyCluster, lb.TrafficPolicyLocal, lb.TrafficDistributionPreferSameZone)

		// Nodes.
		node1       = &lb.Node{Name: "node1", Zone: "zone-a"}
		node1NoZone = &lb.Node{Name: "node1"}
		nodeNoName  = &lb.Node{Zone: "zone-a"}

		// Frontends.
		feClusterIP  = selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
		feNodePort   = selFE("0.0.0.0:30080/TCP", lb.SVCTypeNodePort, "")
		feNodePortI  = selFE("0.0.0.0:30080/TCP/i", lb.SVCTypeNodePort, "")
		feLB         = selFE("192.0.2.10:80/TCP", lb.SVCTypeLoadBalancer, "")
		feExternalIP = selFE("198.51.100.1:80/TCP", lb.SVCTypeExternalIP, "")
		feHostPort   = selFE("0.0.0.0:8080/TCP", lb.SVCTypeHostPort, "")
		feLocalRedir = selFE("169.254.20.10:53/UDP", lb.SVCTypeLocalRedirect, "")
	)

	// localAndRemote is a candidate set for the traffic policy entries: one
	// backend on node1, one on node2 and one with no node.
	localAndRemote := selCands(
		selBE("10.0.0.2:80/TCP", selOnNode("node2")),
		selBE("10.0.0.1:80/TCP", selOnNode("node1")),
		selBE("10.0.0.3:80/TCP"),
	)

	allOfLocalAndRemote := []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP"}

	// zoneHinted is a candidate set for the topology entries, with node1 in
	// zone-a: .1 is hinted for zone-a, .2 for zone-b, .3 for both; .1 and .2
	// live on node1 and node2.
	zoneHinted := selCands(
		selBE("10.0.0.3:80/TCP", selForZones("zone-a", "zone-b")),
		selBE("10.0.0.2:80/TCP", selForZones("zone-b"), selOnNode("node2")),
		selBE("10.0.0.1:80/TCP", selForZones("zone-a"), selOnNode("node1")),
	)

	return []selCase{
		// Port name and protocol.
		{
			name: "no candidates", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: nil, want: nil,
		},
		{
			name: "unnamed frontend port matches backends without port names only", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selPorts("http")), selBE("10.0.0.1:80/TCP")),
			want:  []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "named port selects backends naming it and backends naming none",
			fe:   selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "http"), svc: svcCluster, node: node1,
			cands: selCands(
				selBE("10.0.0.1:8080/TCP", selPorts("http")),
				selBE("10.0.0.2:9090/TCP", selPorts("metrics")),
				selBE("10.0.0.3:80/TCP"),
			),
			want: []string{"10.0.0.1:8080/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "backend with several port names serves each of them",
			fe:   selFE("10.96.0.1:9090/TCP", lb.SVCTypeClusterIP, "metrics"), svc: svcCluster, node: node1,
			cands: selCands(
				selBE("10.0.0.1:8080/TCP", selPorts("http", "metrics")),
				selBE("10.0.0.2:8080/TCP", selPorts("http")),
				selBE("10.0.0.3:8080/TCP", selPorts("grpc", "metrics", "admin")),
			),
			want: []string{"10.0.0.1:8080/TCP", "10.0.0.3:8080/TCP"},
		},
		{
			name: "no candidate serves the port", fe: selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "dns"), svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selPorts("http"))),
			want:  nil,
		},
		{
			name: "TCP frontend excludes UDP backends", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/UDP"), selBE("10.0.0.2:80/TCP"), selBE("10.0.0.3:80/SCTP")),
			want:  []string{"10.0.0.2:80/TCP"},
		},
		{
			name: "ANY frontend includes backends of every protocol",
			fe:   selFE("10.96.0.1:53/ANY", lb.SVCTypeClusterIP, ""), svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:53/UDP"), selBE("10.0.0.1:53/TCP"), selBE("10.0.0.3:53/ANY")),
			want:  []string{"10.0.0.1:53/TCP", "10.0.0.2:53/UDP", "10.0.0.3:53/ANY"},
		},
		{
			name: "ANY backend serves a TCP or UDP frontend", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/ANY"), selBE("10.0.0.2:80/UDP")),
			want:  []string{"10.0.0.1:80/ANY"},
		},

		// State tiers.
		{
			name: "active only, own weights", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selWeight(50)), selBE("10.0.0.1:80/TCP")),
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP (weight=50)"},
		},
		{
			name: "active and terminating: terminating kept with weight 0, listed after", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selTerminating), selBE("10.0.0.2:80/TCP")),
			want:  []string{"10.0.0.2:80/TCP", "10.0.0.1:80/TCP (terminating weight=0)"},
		},
		{
			name: "terminating only: in rotation with their own weights", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selTerminating, selWeight(50)), selBE("10.0.0.1:80/TCP", selTerminating)),
			want:  []string{"10.0.0.1:80/TCP (terminating)", "10.0.0.2:80/TCP (terminating weight=50)"},
		},
		{
			name: "quarantined only: in rotation", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selQuarantined, selWeight(7)), selBE("10.0.0.1:80/TCP", selQuarantined)),
			want:  []string{"10.0.0.1:80/TCP (quarantined)", "10.0.0.2:80/TCP (quarantined weight=7)"},
		},
		{
			name: "active and quarantined: quarantined weight 0", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selQuarantined), selBE("10.0.0.2:80/TCP")),
			want:  []string{"10.0.0.2:80/TCP", "10.0.0.1:80/TCP (quarantined weight=0)"},
		},
		{
			name: "terminating and quarantined: terminating in rotation", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selQuarantined), selBE("10.0.0.2:80/TCP", selTerminating)),
			want:  []string{"10.0.0.2:80/TCP (terminating)", "10.0.0.1:80/TCP (quarantined weight=0)"},
		},
		{
			name: "unhealthy active counts as quarantined", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selUnhealthy), selBE("10.0.0.2:80/TCP")),
			want:  []string{"10.0.0.2:80/TCP", "10.0.0.1:80/TCP (quarantined weight=0)"},
		},
		{
			name: "unhealthy active is below terminating", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selUnhealthy), selBE("10.0.0.2:80/TCP", selTerminating)),
			want:  []string{"10.0.0.2:80/TCP (terminating)", "10.0.0.1:80/TCP (quarantined weight=0)"},
		},
		{
			name: "all active unhealthy: in rotation as quarantined", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selUnhealthy), selBE("10.0.0.1:80/TCP", selUnhealthy, selWeight(30))),
			want:  []string{"10.0.0.1:80/TCP (quarantined weight=30)", "10.0.0.2:80/TCP (quarantined)"},
		},
		{
			name: "unhealthy terminating stays terminating", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selTerminating, selUnhealthy)),
			want:  []string{"10.0.0.1:80/TCP (terminating)"},
		},
		{
			name: "maintenance beside active: weight 0", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selMaintenance), selBE("10.0.0.2:80/TCP")),
			want:  []string{"10.0.0.2:80/TCP", "10.0.0.1:80/TCP (maintenance weight=0)"},
		},
		{
			name: "maintenance beside quarantined: quarantined in rotation, maintenance weight 0", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selMaintenance), selBE("10.0.0.2:80/TCP", selQuarantined)),
			want:  []string{"10.0.0.2:80/TCP (quarantined)", "10.0.0.1:80/TCP (maintenance weight=0)"},
		},
		{
			name: "maintenance alone never takes new flows", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selMaintenance, selWeight(50)), selBE("10.0.0.1:80/TCP", selMaintenance)),
			want:  []string{"10.0.0.1:80/TCP (maintenance weight=0)", "10.0.0.2:80/TCP (maintenance weight=0)"},
		},
		{
			name: "not-ready beside active: weight 0, listed for its open flows", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selNotReady), selBE("10.0.0.2:80/TCP")),
			want:  []string{"10.0.0.2:80/TCP", "10.0.0.1:80/TCP (not-ready weight=0)"},
		},
		{
			name: "not-ready beside terminating: terminating in rotation", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selNotReady), selBE("10.0.0.2:80/TCP", selTerminating)),
			want:  []string{"10.0.0.2:80/TCP (terminating)", "10.0.0.1:80/TCP (not-ready weight=0)"},
		},
		{
			name: "not-ready beside quarantined: quarantined in rotation", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selNotReady), selBE("10.0.0.2:80/TCP", selUnhealthy)),
			want:  []string{"10.0.0.2:80/TCP (quarantined)", "10.0.0.1:80/TCP (not-ready weight=0)"},
		},
		{
			name: "not-ready alone never takes new flows, not even as the last backend", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selNotReady), selBE("10.0.0.1:80/TCP", selNotReady, selUnhealthy)),
			want:  []string{"10.0.0.1:80/TCP (not-ready weight=0)", "10.0.0.2:80/TCP (not-ready weight=0)"},
		},
		{
			name: "not-ready and maintenance: neither takes new flows", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selNotReady), selBE("10.0.0.1:80/TCP", selMaintenance)),
			want:  []string{"10.0.0.1:80/TCP (maintenance weight=0)", "10.0.0.2:80/TCP (not-ready weight=0)"},
		},
		{
			name: "weight 0 active stays weight 0 and does not promote terminating", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.2:80/TCP", selWeight(0)), selBE("10.0.0.1:80/TCP", selTerminating)),
			want:  []string{"10.0.0.1:80/TCP (terminating weight=0)", "10.0.0.2:80/TCP (weight=0)"},
		},
		{
			name: "weight 0 active is listed with the backends taking no new flows", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selWeight(0)),
				selBE("10.0.0.3:80/TCP"),
				selBE("10.0.0.2:80/TCP", selTerminating),
			),
			want: []string{"10.0.0.3:80/TCP", "10.0.0.1:80/TCP (weight=0)", "10.0.0.2:80/TCP (terminating weight=0)"},
		},

		// Ordering.
		{
			name: "taking new flows first, each group by address", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(
				selBE("10.0.0.10:80/TCP"),
				selBE("10.0.0.9:80/TCP", selTerminating),
				selBE("10.0.0.2:80/TCP"),
				selBE("10.0.0.1:80/TCP", selMaintenance),
			),
			want: []string{
				"10.0.0.2:80/TCP", "10.0.0.10:80/TCP",
				"10.0.0.1:80/TCP (maintenance weight=0)", "10.0.0.9:80/TCP (terminating weight=0)",
			},
		},
		{
			name: "IPv4 frontend uses only IPv4 backends", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("[2001:db8::1]:80/TCP"), selBE("10.0.0.1:80/TCP"), selBE("[::ffff:10.0.0.2]:80/TCP")),
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"},
		},
		{
			name: "IPv6 frontend uses only IPv6 backends, in address order", fe: selFE("[fd00::1]:80/TCP", lb.SVCTypeClusterIP, ""), svc: svcCluster, node: node1,
			cands: selCands(selBE("[2001:db8::2]:80/TCP", selTerminating), selBE("10.0.0.1:80/TCP"), selBE("[2001:db8::9]:80/TCP"), selBE("[2001:db8::1]:80/TCP")),
			want:  []string{"[2001:db8::1]:80/TCP", "[2001:db8::9]:80/TCP", "[2001:db8::2]:80/TCP (terminating weight=0)"},
		},
		{
			name: "same address sorted by port", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(selBE("10.0.0.1:8080/TCP"), selBE("10.0.0.1:443/TCP"), selBE("10.0.0.1:80/TCP")),
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.1:443/TCP", "10.0.0.1:8080/TCP"},
		},

		// Traffic policy.
		{
			name: "ExtTrafficPolicy Local: NodePort", fe: feNodePort, svc: svcExtLocal, node: node1,
			cands: localAndRemote, want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "ExtTrafficPolicy Local: LoadBalancer", fe: feLB, svc: svcExtLocal, node: node1,
			cands: localAndRemote, want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "ExtTrafficPolicy Local: ExternalIP", fe: feExternalIP, svc: svcExtLocal, node: node1,
			cands: localAndRemote, want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "ExtTrafficPolicy Local: HostPort", fe: feHostPort, svc: svcExtLocal, node: node1,
			cands: localAndRemote, want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "ExtTrafficPolicy Local does not apply to internal-scope NodePort", fe: feNodePortI, svc: svcExtLocal, node: node1,
			cands: localAndRemote, want: allOfLocalAndRemote,
		},
		{
			name: "IntTrafficPolicy Local applies to internal-scope NodePort", fe: feNodePortI, svc: svcIntLocal, node: node1,
			cands: localAndRemote, want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "IntTrafficPolicy Local does not apply to external-scope LoadBalancer", fe: feLB, svc: svcIntLocal, node: node1,
			cands: localAndRemote, want: allOfLocalAndRemote,
		},
		{
			name: "ClusterIP ignores ExtTrafficPolicy Local", fe: feClusterIP, svc: svcExtLocal, node: node1,
			cands: localAndRemote, want: allOfLocalAndRemote,
		},
		{
			name: "ClusterIP uses IntTrafficPolicy Local", fe: feClusterIP, svc: svcIntLocal, node: node1,
			cands: localAndRemote, want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "Local with nil node selects nothing", fe: feLB, svc: svcExtLocal, node: nil,
			cands: localAndRemote, want: nil,
		},
		{
			name: "Local with unnamed node selects nothing, not the backends without a node", fe: feClusterIP, svc: svcIntLocal, node: nodeNoName,
			cands: localAndRemote, want: nil,
		},
		{
			name: "Local without local backends selects nothing", fe: feLB, svc: svcExtLocal, node: &lb.Node{Name: "node9"},
			cands: localAndRemote, want: nil,
		},
		{
			name: "Local applies before state tiers: local terminating takes new flows", fe: feLB, svc: svcExtLocal, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOnNode("node1"), selTerminating), selBE("10.0.0.2:80/TCP", selOnNode("node2"))),
			want:  []string{"10.0.0.1:80/TCP (terminating)"},
		},
		{
			name: "LocalRedirect skips traffic policy", fe: feLocalRedir, svc: svcBothLocal, node: nil,
			cands: selCands(selBE("10.0.0.2:53/UDP", selOnNode("node2")), selBE("10.0.0.1:53/UDP")),
			want:  []string{"10.0.0.1:53/UDP", "10.0.0.2:53/UDP"},
		},
		{
			name: "redirected skips traffic policy", fe: feLB, svc: svcBothLocal, node: node1, redirected: true,
			cands: localAndRemote, want: allOfLocalAndRemote,
		},

		// Topology.
		{
			name: "PreferSameZone keeps active backends hinted for the node's zone", fe: feClusterIP, svc: svcSameZone, node: node1,
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "PreferSameZone applies to external frontends with policy Cluster", fe: feLB, svc: svcSameZone, node: node1,
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "PreferSameZone falls back to all when some active backend has no hints", fe: feClusterIP, svc: svcSameZone, node: node1,
			cands: append(slices.Clone(zoneHinted), selBE("10.0.0.4:80/TCP")),
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP", "10.0.0.4:80/TCP"},
		},
		{
			name: "PreferSameZone falls back to all when none is hinted for the zone", fe: feClusterIP, svc: svcSameZone,
			node:  &lb.Node{Name: "node1", Zone: "zone-c"},
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "node zone empty means no zone filtering", fe: feClusterIP, svc: svcSameZone, node: node1NoZone,
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "nil node means no zone filtering", fe: feClusterIP, svc: svcSameZone, node: nil,
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "hints ignored with TrafficDistributionDefault", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "hints ignored when ExtTrafficPolicy Local applies", fe: feLB, svc: svcExtLocalZone, node: &lb.Node{Name: "node2", Zone: "zone-a"},
			cands: zoneHinted, want: []string{"10.0.0.2:80/TCP"},
		},
		{
			name: "hints ignored when IntTrafficPolicy Local applies", fe: feClusterIP, svc: svcIntLocalZone, node: &lb.Node{Name: "node2", Zone: "zone-a"},
			cands: zoneHinted, want: []string{"10.0.0.2:80/TCP"},
		},
		{
			name: "hints apply to ClusterIP when only ExtTrafficPolicy is Local", fe: feClusterIP, svc: svcExtLocalZone, node: node1,
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "redirected skips topology", fe: feClusterIP, svc: svcSameZone, node: node1, redirected: true,
			cands: zoneHinted, want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "LocalRedirect skips topology", fe: feLocalRedir, svc: svcSameZone, node: node1,
			cands: selCands(selBE("10.0.0.2:53/UDP", selForZones("zone-b")), selBE("10.0.0.1:53/UDP", selForZones("zone-a"))),
			want:  []string{"10.0.0.1:53/UDP", "10.0.0.2:53/UDP"},
		},
		{
			name: "PreferSameNode uses ForNodes", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selForNodes("node1"), selForZones("zone-a")),
				selBE("10.0.0.2:80/TCP", selForNodes("node2"), selForZones("zone-a")),
				selBE("10.0.0.3:80/TCP", selForNodes("node2", "node1"), selForZones("zone-b")),
			),
			want: []string{"10.0.0.1:80/TCP", "10.0.0.3:80/TCP"},
		},
		{
			name: "PreferSameNode falls back to ForZones when none is hinted for the node", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selForNodes("node3"), selForZones("zone-a")),
				selBE("10.0.0.2:80/TCP", selForNodes("node2"), selForZones("zone-b")),
			),
			want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "PreferSameNode falls back to ForZones when some active backend has no node hints", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selForNodes("node1"), selForZones("zone-b")),
				selBE("10.0.0.2:80/TCP", selForZones("zone-a")),
				selBE("10.0.0.3:80/TCP", selForZones("zone-b")),
			),
			want: []string{"10.0.0.2:80/TCP"},
		},
		{
			name: "PreferSameNode falls back to all when neither node nor zone hints match", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selForNodes("node2"), selForZones("zone-b")),
				selBE("10.0.0.2:80/TCP", selForNodes("node3"), selForZones("zone-c")),
			),
			want: []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"},
		},
		{
			name: "PreferSameNode without node hints keeps the active backends on this node", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selOnNode("node1")),
				selBE("10.0.0.2:80/TCP", selOnNode("node2")),
				selBE("10.0.0.3:80/TCP", selOnNode("node1"), selWeight(50)),
				selBE("10.0.0.4:80/TCP"),
			),
			want: []string{"10.0.0.1:80/TCP", "10.0.0.3:80/TCP (weight=50)"},
		},
		{
			name: "PreferSameNode without node hints: a not-ready backend on this node does not count", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selOnNode("node1"), selNotReady),
				selBE("10.0.0.2:80/TCP", selOnNode("node2")),
				selBE("10.0.0.3:80/TCP", selOnNode("node3")),
			),
			want: []string{"10.0.0.2:80/TCP", "10.0.0.3:80/TCP", "10.0.0.1:80/TCP (not-ready weight=0)"},
		},
		{
			name: "PreferSameNode without node hints and none on this node falls back to all", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOnNode("node2")), selBE("10.0.0.2:80/TCP", selOnNode("node3"))),
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"},
		},
		{
			name: "PreferSameNode without node hints and none on this node falls back to zone hints", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selOnNode("node2"), selForZones("zone-a")),
				selBE("10.0.0.2:80/TCP", selOnNode("node3"), selForZones("zone-b")),
			),
			want: []string{"10.0.0.1:80/TCP"},
		},
		{
			name: "PreferSameNode: node hints, where present, decide over node names", fe: feClusterIP, svc: svcSameNode, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selOnNode("node1"), selForNodes("node2")),
				selBE("10.0.0.2:80/TCP", selOnNode("node2"), selForNodes("node1")),
			),
			want: []string{"10.0.0.2:80/TCP"},
		},
		{
			name: "PreferSameNode with a node without a name keeps all", fe: feClusterIP, svc: svcSameNode, node: nodeNoName,
			cands: selCands(selBE("10.0.0.1:80/TCP", selOnNode("")), selBE("10.0.0.2:80/TCP", selOnNode("node2"))),
			want:  []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"},
		},
		{
			name: "terminating backends are not removed by the hint filter", fe: feClusterIP, svc: svcSameZone, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selForZones("zone-b"), selTerminating),
				selBE("10.0.0.2:80/TCP", selForZones("zone-a")),
				selBE("10.0.0.3:80/TCP", selForZones("zone-b")),
				selBE("10.0.0.4:80/TCP", selTerminating),
			),
			want: []string{"10.0.0.2:80/TCP", "10.0.0.1:80/TCP (terminating weight=0)", "10.0.0.4:80/TCP (terminating weight=0)"},
		},
		{
			name: "unhealthy backend without hints does not disable the filter", fe: feClusterIP, svc: svcSameZone, node: node1,
			cands: selCands(
				selBE("10.0.0.1:80/TCP", selUnhealthy),
				selBE("10.0.0.2:80/TCP", selForZones("zone-a")),
				selBE("10.0.0.3:80/TCP", selForZones("zone-b")),
			),
			want: []string{"10.0.0.2:80/TCP", "10.0.0.1:80/TCP (quarantined weight=0)"},
		},
		{
			name: "backend of another port without hints does not disable the filter",
			fe:   selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "http"), svc: svcSameZone, node: node1,
			cands: selCands(
				selBE("10.0.0.1:9090/TCP", selPorts("metrics")),
				selBE("10.0.0.2:80/TCP", selPorts("http"), selForZones("zone-a")),
				selBE("10.0.0.3:80/TCP", selPorts("http"), selForZones("zone-b")),
			),
			want: []string{"10.0.0.2:80/TCP"},
		},

		// Carried fields.
		{
			name: "ClusterID and Zone are copied", fe: feClusterIP, svc: svcCluster, node: node1,
			cands: selCands(
				selBE("10.0.0.2:80/TCP", selCluster(7), selInZone("zone-b"), selWeight(200)),
				selBE("10.0.0.1:80/TCP", selCluster(3), selInZone("zone-a"), selTerminating),
			),
			want: []string{"10.0.0.2:80/TCP (weight=200) cluster=7 zone=zone-b", "10.0.0.1:80/TCP (terminating weight=0) cluster=3 zone=zone-a"},
		},
	}
}

func TestSelectBackends(t *testing.T) {
	for _, tc := range selCases() {
		t.Run(tc.name, func(t *testing.T) {
			// Snapshot the inputs: SelectBackends must not modify them.
			before := make([]lb.BackendParams, len(tc.cands))
			for i, c := range tc.cands {
				before[i] = *c.Params
			}
			svcBefore := *tc.svc

			refs := SelectBackends(tc.fe, tc.svc, tc.node, tc.redirected, tc.cands)
			var got []string
			for _, r := range refs {
				got = append(got, selRefString(r))
			}

			for i, c := range tc.cands {
				if !reflect.DeepEqual(*c.Params, before[i]) {
					t.Errorf("candidate %d modified: %+v, was %+v", i, *c.Params, before[i])
				}
			}
			if !reflect.DeepEqual(*tc.svc, svcBefore) {
				t.Errorf("service params modified")
			}

			if !slices.Equal(got, tc.want) {
				t.Errorf("SelectBackends:\n  got:  %q\n  want: %q", got, tc.want)
			}
		})
	}
}
