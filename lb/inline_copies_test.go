package lb_test

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/lbstate/lbstate/lb"
)

// A service row keeps one backend address inside itself: every copy
// (Clone and the With methods) keeps its own, so that changing a copy's
// addresses in place (as the Writer does to a row its batch inserted)
// leaves the original as it was, and the other way round; and a row
// keeps no slice of the caller's.
func TestServiceCopiesKeepTheirOwnBackendAddrs(t *testing.T) {
	a, b, c := lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), lb.MustParseL3n4Addr("10.0.0.2:80/TCP"), lb.MustParseL3n4Addr("10.0.0.3:80/TCP")
	name := lb.NewServiceName("ns", "svc")
	for _, addrs := range [][]lb.L3n4Addr{{a}, {a, b}} {
		in := slices.Clone(addrs)
		orig := (&lb.Service{Name: name}).WithBackendAddrs(in)
		in[0] = c
		copies := map[string]*lb.Service{
			"Clone":        orig.Clone(),
			"WithRedirect": orig.WithRedirect(lb.Redirect{Source: lb.SourceAPI, To: lb.NewServiceName("ns", "to")}),
			"WithParams":   orig.WithParams(lb.ServiceParams{Name: name, Source: lb.SourceK8s}),
			"WithRoute":    orig.WithRoute(lb.Route{Source: lb.SourceAPI, Name: "r"}),
		}
		for how, cp := range copies {
			for _, next := range [][]lb.L3n4Addr{{c}, {b, c}, nil} {
				cp.SetBackendAddrs(next)
				if got := orig.BackendAddrs(); !slices.Equal(got, addrs) {
					t.Errorf("%v: setting the addresses of a copy (%s) to %v changed the original's to %v", addrs, how, next, got)
				}
			}
		}
		copies["Clone"] = orig.Clone()
		orig.SetBackendAddrs([]lb.L3n4Addr{b})
		if got := copies["Clone"].BackendAddrs(); !slices.Equal(got, addrs) {
			t.Errorf("%v: setting the original's addresses changed its clone's to %v", addrs, got)
		}
	}
}

// A frontend row keeps one backend inside itself: its clone (the
// reconciler's, to set its status) keeps its own.
func TestFrontendCloneKeepsItsOwnBackend(t *testing.T) {
	r1 := lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: 1}
	r2 := lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.2:80/TCP"), Weight: 1}
	orig := &lb.Frontend{Service: lb.NewServiceName("ns", "svc")}
	orig.SetBackends([]lb.BackendRef{r1})
	c := orig.Clone()
	c.SetBackends([]lb.BackendRef{r2})
	if len(orig.Backends) != 1 || orig.Backends[0] != r1 {
		t.Errorf("setting the clone's backend changed the original's: %v", orig.Backends)
	}
	c = orig.Clone()
	orig.SetBackends([]lb.BackendRef{r2})
	if len(c.Backends) != 1 || c.Backends[0] != r1 {
		t.Errorf("setting the original's backend changed the clone's: %v", c.Backends)
	}
}

// A service row with its one backend address fits the allocator's 96-byte
// class (it took 112 when the addresses were a slice): one row per
// service, so 16 bytes a service.
func TestServiceRowFits96Bytes(t *testing.T) {
	if n := unsafe.Sizeof(lb.Service{}); n > 96 {
		t.Errorf("lb.Service is %d bytes, want at most 96", n)
	}
}

// A frontend row with its one backend inline fits the allocator's
// 192-byte class (208 when a BackendRef's zone was a string): the row is
// allocated twice a frontend (the Writer's, then the status write-back),
// and a frontend's list of backends costs a BackendRef each.
func TestFrontendRowFits192Bytes(t *testing.T) {
	if n := unsafe.Sizeof(lb.BackendRef{}); n > 32 {
		t.Errorf("lb.BackendRef is %d bytes, want at most 32", n)
	}
	if n := unsafe.Sizeof(lb.Frontend{}); n > 192 {
		t.Errorf("lb.Frontend is %d bytes, want at most 192", n)
	}
}
