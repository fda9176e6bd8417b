package reconciler

import (
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// A backend's lb_backends value, built straight from the reconciler's
// address key, is the value bpf.NewBackend gives for the address the key
// was made from: IPv4, IPv4-mapped IPv6, IPv6, any protocol and port, and
// every field beside the address.
func TestBackendEntryFromItsKeyIsNewBackendsValue(t *testing.T) {
	v := beValue{clusterID: 7, state: lb.BackendTerminating, zone: 3}
	for _, s := range []string{
		"10.8.0.1:8080/TCP",
		"10.8.0.1:53/UDP",
		"[::ffff:10.8.0.2]:80/TCP",
		"[2001:db8::1]:443/SCTP",
		"10.8.0.3:65535/ANY/i",
	} {
		a := lb.MustParseL3n4Addr(s)
		be := backendState{key: keyOf(a)}
		want := bpf.NewBackend(lb.BackendRef{Address: a, State: v.state, ClusterID: v.clusterID}, v.zone)
		if got := be.entry(v); got != want {
			t.Errorf("%s: entry %+v, want %+v", s, got, want)
		}
	}
	var zero backendState
	if got, want := zero.entry(beValue{}), bpf.NewBackend(lb.BackendRef{}, 0); got != want {
		t.Errorf("zero address: entry %+v, want %+v", got, want)
	}
}
