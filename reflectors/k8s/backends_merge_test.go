package k8s

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// mergeBySearch is the merge backendsOf makes, written the plain way:
// each slice's backends (ConvertEndpointSlice) in order of slice name,
// an address seen before searched among those kept and given the better
// state, a new one appended.
func mergeBySearch(t *testing.T, slices_ []*discoveryv1.EndpointSlice) []lb.BackendParams {
	t.Helper()
	slices.SortFunc(slices_, func(a, b *discoveryv1.EndpointSlice) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	var out []lb.BackendParams
	for _, es := range slices_ {
		_, backends, errs, err := ConvertEndpointSlice(es)
		if err != nil || len(errs) > 0 {
			t.Fatalf("slice %s: %v %v", es.Name, err, errs)
		}
	next:
		for _, b := range backends {
			if got, want := b.PortNames(), portNamesOf(es, b.Address); !slices.Equal(got, want) {
				t.Fatalf("slice %s: backend %s has port names %q, want %q", es.Name, b.Address, got, want)
			}
			for i := range out {
				if out[i].Address == b.Address {
					if b.State < out[i].State {
						out[i] = b
					}
					continue next
				}
			}
			out = append(out, b)
		}
	}
	return out
}

// portNamesOf are the names es gives the port and protocol of a, in the
// order it lists them.
func portNamesOf(es *discoveryv1.EndpointSlice, a lb.L3n4Addr) []string {
	var names []string
	for _, p := range es.Ports {
		proto := lb.ProtoTCP
		if p.Protocol != nil && *p.Protocol == corev1.ProtocolUDP {
			proto = lb.ProtoUDP
		}
		if uint16(*p.Port) == a.Port() && proto == a.Protocol() && p.Name != nil && *p.Name != "" {
			names = append(names, *p.Name)
		}
	}
	return names
}

// randomSlices returns up to four slices of service ns/svc, IPv4 or IPv6,
// over a pool of addresses small enough that slices (and endpoints of
// one slice) repeat addresses, with up to 150 endpoints in all (past
// the 64 bits that spare backendsOf its searches), named and unnamed
// ports, topology hints, and every endpoint state.
func randomSlices(rng *rand.Rand) []*discoveryv1.EndpointSlice {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	p80, p53, p8080 := int32(80), int32(53), int32(8080)
	http, dns := "http", "dns"
	portSets := [][]discoveryv1.EndpointPort{
		{{Port: &p80}},
		{{Name: &http, Port: &p80, Protocol: &tcp}},
		{{Name: &http, Port: &p80}, {Name: &dns, Port: &p53, Protocol: &udp}},
		{{Port: &p8080}, {Name: &http, Port: &p8080}}, // one port under two names
	}
	ports := portSets[rng.IntN(len(portSets))] // the same for every slice: one service
	pool := 1 + rng.IntN(200)
	var out []*discoveryv1.EndpointSlice
	for s := range 1 + rng.IntN(4) {
		v6 := rng.IntN(3) == 0
		es := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("svc-%c", 'a'+rng.IntN(26)) + fmt.Sprint(s), Namespace: "ns", Labels: map[string]string{LabelServiceName: "svc"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       ports,
		}
		if v6 {
			es.AddressType = discoveryv1.AddressTypeIPv6
		}
		for range rng.IntN(40) {
			i := rng.IntN(pool)
			addr := fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
			if v6 {
				addr = fmt.Sprintf("fd00::1:%x", i+1)
			}
			bools := []*bool{nil, new(bool), new(bool)}
			*bools[2] = true
			ep := discoveryv1.Endpoint{
				Addresses: []string{addr},
				Conditions: discoveryv1.EndpointConditions{
					Ready: bools[rng.IntN(3)], Serving: bools[rng.IntN(3)], Terminating: bools[rng.IntN(3)],
				},
			}
			if rng.IntN(4) == 0 { // hints join the port names
				ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: fmt.Sprintf("z%d", rng.IntN(3))}}}
			}
			es.Endpoints = append(es.Endpoints, ep)
		}
		out = append(out, es)
	}
	return out
}

// backendsOf merges a service's slices as a plain search of the kept
// backends does, whatever the addresses' bits (addrBit) say: random
// slices that repeat addresses within and across them, IPv4 and IPv6,
// named ports, from a few backends to past 64 (all bits set), give the
// same backends, in the same order, in the same states, with the same
// port names.
func TestBackendsOfMergesAsASearchOfTheKeptOnesDoes(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 5))
		w, err := tables.New(statedb.New(), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := newTestReflector(t, DefaultConfig, w)
		in := randomSlices(rng)
		var events []event
		for _, es := range in {
			events = append(events, event{obj: es})
		}
		r.apply(events)
		e := r.services["ns/svc"]
		got := r.backendsOf(&e)
		want := mergeBySearch(t, slices.Clone(in))
		if !slices.EqualFunc(got, want, func(a, b lb.BackendParams) bool { return a.Equal(&b) }) {
			t.Fatalf("seed %d: backendsOf\n%v\nwant\n%v", seed, got, want)
		}
	}
}
