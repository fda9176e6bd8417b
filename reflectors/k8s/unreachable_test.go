package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
)

// Endpoint addresses no other network namespace can reach are rejected,
// each naming its slice and address, while the slice's other endpoints
// serve: link-local always, loopback unless a manifests directory names
// it; multicast and broadcast are no backend of any source.
func TestUnreachableEndpointsRejectedAlone(t *testing.T) {
	for _, tc := range []struct {
		as       lb.Source
		accepted []string
	}{
		{lb.SourceK8s, []string{"10.0.0.1"}},
		{lb.SourceFile, []string{"10.0.0.1", "127.0.0.2"}},
	} {
		t.Run(tc.as.String(), func(t *testing.T) {
			w, db, cfg := newTestTables(t, "n1")
			r := newTestReflector(t, cfg, w)
			if tc.as == lb.SourceFile { // as the manifests source does
				r.AcceptLoopbackEndpoints()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go r.Run(ctx, func(context.Context) error { return nil })
			port := int32(80)
			r.Push(&discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{LabelServiceName: "web"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Port: &port}},
				Endpoints: []discoveryv1.Endpoint{
					{Addresses: []string{"10.0.0.1"}}, {Addresses: []string{"127.0.0.2"}}, {Addresses: []string{"169.254.1.1"}},
					{Addresses: []string{"224.0.0.5"}}, {Addresses: []string{"255.255.255.255"}},
				},
			}, false)
			var got []string
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				got = got[:0]
				for b := range w.Backends().All(db.ReadTxn()) {
					got = append(got, b.Address.Addr().String())
				}
				if len(got) == len(tc.accepted) && r.src.Errors() >= uint64(5-len(tc.accepted)) {
					break
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.accepted, " ") {
				t.Fatalf("backends %v, want %v", got, tc.accepted)
			}
			if n := r.src.Errors(); n != uint64(5-len(tc.accepted)) {
				t.Fatalf("%d errors reported, want one per rejected address", n)
			}
		})
	}
}
