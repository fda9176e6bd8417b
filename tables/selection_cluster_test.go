package tables

import (
	"slices"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

func selRemote(id uint32) selOpt {
	return func(c *Candidate) { c.Remote, c.Params.ClusterID = true, id }
}

// Another cluster's backends join a service only where it is declared
// global here: a remote service alone never makes a local one take them.
func TestSelectBackendsTakesRemoteBackendsOnlyForGlobalServices(t *testing.T) {
	fe := selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
	cands := selCands(selBE("10.0.0.1:80/TCP"), selBE("10.2.0.1:80/TCP", selRemote(2)))
	tests := []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{"not annotated", nil, []string{"10.0.0.1:80/TCP"}},
		{"global false", map[string]string{lb.AnnotationGlobal: "false"}, []string{"10.0.0.1:80/TCP"}},
		{"global true", map[string]string{lb.AnnotationGlobal: "true"}, []string{"10.0.0.1:80/TCP", "10.2.0.1:80/TCP cluster=2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &lb.ServiceParams{Annotations: tt.annotations}
			var got []string
			for _, r := range SelectBackends(fe, svc, nil, false, cands) {
				got = append(got, selRefString(r))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A global service's cluster affinity prefers one side while it has an
// active backend (active and healthy); the other side stays listed with
// weight 0. Traffic policy Local comes before it, topology after it.
func TestSelectBackendsClusterAffinity(t *testing.T) {
	global := func(affinity string, opts ...func(*lb.ServiceParams)) *lb.ServiceParams {
		p := &lb.ServiceParams{Annotations: map[string]string{lb.AnnotationGlobal: "true", lb.AnnotationAffinity: affinity}}
		for _, o := range opts {
			o(p)
		}
		return p
	}
	intLocal := func(p *lb.ServiceParams) { p.IntTrafficPolicy = lb.TrafficPolicyLocal }
	sameZone := func(p *lb.ServiceParams) { p.TrafficDistribution = lb.TrafficDistributionPreferSameZone }
	fe := selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
	node := &lb.Node{Name: "node1", Zone: "zone-a"}
	local := selBE("10.0.0.1:80/TCP", selOnNode("node1"))
	remote := selBE("10.2.0.1:80/TCP", selRemote(2))

	const (
		localOn     = "10.0.0.1:80/TCP"
		localOff    = "10.0.0.1:80/TCP (weight=0)"
		remoteOn    = "10.2.0.1:80/TCP cluster=2"
		remoteOff   = "10.2.0.1:80/TCP (weight=0) cluster=2"
		localTermOf = "10.0.0.1:80/TCP (terminating weight=0)"
	)
	tests := []struct {
		name  string
		svc   *lb.ServiceParams
		cands []Candidate
		want  []string
	}{
		{"none uses both", global("none"), selCands(local, remote), []string{localOn, remoteOn}},
		{"no annotation uses both", global(""), selCands(local, remote), []string{localOn, remoteOn}},
		{"an invalid value is none", global("nearest"), selCands(local, remote), []string{localOn, remoteOn}},
		{"local benches the remote side", global("local"), selCands(local, remote), []string{localOn, remoteOff}},
		{"values are read in any case", global("Local"), selCands(local, remote), []string{localOn, remoteOff}},
		{"local without local backends uses remote ones", global("local"), selCands(remote), []string{remoteOn}},
		{
			"local whose backends all terminate uses remote ones",
			global("local"), selCands(selBE("10.0.0.1:80/TCP", selTerminating), remote),
			[]string{remoteOn, localTermOf},
		},
		{
			"local whose backend is unhealthy uses remote ones",
			global("local"), selCands(selBE("10.0.0.1:80/TCP", selUnhealthy), remote),
			[]string{remoteOn, "10.0.0.1:80/TCP (quarantined weight=0)"},
		},
		{
			"local with only terminating on both sides: the state tiers decide",
			global("local"), selCands(selBE("10.0.0.1:80/TCP", selTerminating), selBE("10.2.0.1:80/TCP", selRemote(2), selTerminating)),
			[]string{"10.0.0.1:80/TCP (terminating)", "10.2.0.1:80/TCP (terminating) cluster=2"},
		},
		{"remote benches the local side", global("remote"), selCands(local, remote), []string{remoteOn, localOff}},
		{
			"remote whose backends all terminate uses local ones",
			global("remote"), selCands(local, selBE("10.2.0.1:80/TCP", selRemote(2), selTerminating)),
			[]string{localOn, "10.2.0.1:80/TCP (terminating weight=0) cluster=2"},
		},
		{
			"remote in maintenance uses local ones",
			global("remote"), selCands(local, selBE("10.2.0.1:80/TCP", selRemote(2), selMaintenance)),
			[]string{localOn, "10.2.0.1:80/TCP (maintenance weight=0) cluster=2"},
		},
		{
			// Policy Local leaves only this node's backends (remote ones
			// have no node here) before the affinity looks.
			"traffic policy Local comes first",
			global("remote", intLocal), selCands(local, selBE("10.0.0.2:80/TCP", selOnNode("node2")), remote),
			[]string{localOn},
		},
		{
			// Without the affinity the unhinted remote backend would turn
			// the zone preference off (the Kubernetes safeguard).
			"topology picks within the preferred side",
			global("local", sameZone),
			selCands(
				selBE("10.0.0.1:80/TCP", selForZones("zone-a")),
				selBE("10.0.0.2:80/TCP", selForZones("zone-b")),
				remote,
			),
			[]string{localOn, remoteOff},
		},
		{
			"no affinity: the unhinted remote backend keeps every backend",
			global("none", sameZone),
			selCands(
				selBE("10.0.0.1:80/TCP", selForZones("zone-a")),
				selBE("10.0.0.2:80/TCP", selForZones("zone-b")),
				remote,
			),
			[]string{localOn, "10.0.0.2:80/TCP", remoteOn},
		},
		{
			"a service that is not global never takes remote backends",
			&lb.ServiceParams{Annotations: map[string]string{lb.AnnotationAffinity: "remote"}}, selCands(local, remote),
			[]string{localOn},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range SelectBackends(fe, tt.svc, node, false, tt.cands) {
				got = append(got, selRefString(r))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A redirect chose its backends: the affinity does not apply to them.
func TestSelectBackendsClusterAffinitySkipsRedirects(t *testing.T) {
	svc := &lb.ServiceParams{Annotations: map[string]string{lb.AnnotationGlobal: "true", lb.AnnotationAffinity: "local"}}
	fe := selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
	cands := selCands(selBE("10.0.0.1:80/TCP"), selBE("10.2.0.1:80/TCP", selRemote(2)))
	got := SelectBackends(fe, svc, nil, true, cands)
	if len(got) != 2 || got[0].Weight == 0 || got[1].Weight == 0 {
		t.Errorf("redirected frontend: got %v, want both backends taking new flows", got)
	}
}
