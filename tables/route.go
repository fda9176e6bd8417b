package tables

import (
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// routeBackends selects the backends of a frontend of svc that route
// covers: each backend service's own selection for the port the route
// names (as a redirect's: without the traffic policy and topology steps,
// which are the parent's), combined by SplitBackends. The parent's own
// backends are the frontend's Hidden ones, as under a redirect: they keep
// their datapath IDs and the flows they carry, so that clearing the route
// gives back exactly what was there before. A backend service that is
// missing, or has no such port, selects no backend, nor does a ref the
// source found invalid (RouteBackend.Rejected): its share is rejected (the second result, see SplitBackends). cands caches
// candidates by service (the parent's own are in it already).
func (w *Writer) routeBackends(txn statedb.ReadTxn, svc *lb.Service, fe lb.FrontendParams, route *lb.Route, cands map[lb.ServiceName][]Candidate) ([]lb.BackendRef, uint16) {
	policy := svc.Policy()
	port := policy.ServicePort(fe)
	proto := fe.Address.Protocol()
	groups := make([]SplitGroup, 0, len(route.Backends))
	for _, rb := range route.Backends {
		g := SplitGroup{Weight: rb.Weight}
		bp := policy
		if rb.Rejected {
			groups = append(groups, g) // invalid: its share is rejected
			continue
		}
		if rb.Service != svc.Name {
			bs, found := w.service(txn, rb.Service)
			if !found || bs.Policy() == nil {
				groups = append(groups, g) // missing: its share is rejected
				continue
			}
			bp = bs.Policy()
		}
		want := rb.Port
		if want == 0 {
			want = port
		}
		portName, ok := fe.PortName, rb.Service == svc.Name && want == port
		if !ok {
			portName, ok = bp.PortNameOf(want, proto)
		}
		if ok {
			c, read := cands[rb.Service]
			if !read {
				c = w.candidates(txn, rb.Service, w.backendAddrs(txn, rb.Service), nil, new(addrKeyBuf))
				cands[rb.Service] = c
			}
			sel := lb.FrontendParams{Address: fe.Address, Type: fe.Type, PortName: portName}
			g.Backends = SelectBackends(sel, bp, nil, true, c)
		}
		groups = append(groups, g)
	}
	return SplitBackends(groups)
}
