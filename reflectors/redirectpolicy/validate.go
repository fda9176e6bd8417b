package redirectpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/lbstate/lbstate/lb"
)

// port is a validated PortInfo.
type port struct {
	name  string
	num   uint16
	proto lb.Protocol
}

// spec is a validated Spec.
type spec struct {
	addr     netip.Addr      // addressMatcher, else invalid
	service  lb.ServiceName  // serviceMatcher, else zero
	frontend []port          // the frontend's toPorts (may be empty for a serviceMatcher)
	feField  string          // the field that holds them: spec.redirectFrontend.<matcher>.toPorts
	backend  []port          // the backend's toPorts
	selector labels.Selector // over the pods' labels
	skip     bool
}

// Validate checks a policy as Convert would, without pods: the error
// names the policy and the field.
func Validate(p *Policy) error {
	_, err := validate(p)
	return err
}

func validate(p *Policy) (spec, error) {
	var s spec
	errf := func(field, format string, args ...any) error {
		return fmt.Errorf("policy %s/%s: %s: %s", p.Namespace, p.Name, field, fmt.Sprintf(format, args...))
	}
	errAt := func(field string, err error) error {
		return fmt.Errorf("policy %s/%s: %s%w", p.Namespace, p.Name, field, err)
	}
	fe := p.Spec.RedirectFrontend
	var err error
	switch {
	case fe.AddressMatcher != nil && fe.ServiceMatcher != nil:
		return s, errf("spec.redirectFrontend", "both addressMatcher and serviceMatcher (want one)")
	case fe.AddressMatcher != nil:
		const field = "spec.redirectFrontend.addressMatcher"
		if s.addr, err = netip.ParseAddr(fe.AddressMatcher.IP); err != nil {
			return s, errf(field+".ip", "invalid IP %q", fe.AddressMatcher.IP)
		}
		s.addr = s.addr.Unmap()
		if why := unroutable(s.addr); why != "" {
			return s, errf(field+".ip", "%s is %s (no packet to a frontend carries it)", s.addr, why)
		}
		if len(fe.AddressMatcher.ToPorts) == 0 {
			return s, errf(field+".toPorts", "missing")
		}
		s.feField = field + ".toPorts"
		if s.frontend, err = parsePorts(fe.AddressMatcher.ToPorts); err != nil {
			return s, errAt(field+".toPorts", err)
		}
	case fe.ServiceMatcher != nil:
		const field = "spec.redirectFrontend.serviceMatcher"
		m := fe.ServiceMatcher
		if m.ServiceName == "" {
			return s, errf(field+".serviceName", "missing")
		}
		if m.Namespace != "" && m.Namespace != p.Namespace {
			return s, errf(field+".namespace", "%q is not the policy's namespace %q", m.Namespace, p.Namespace)
		}
		s.service = lb.NewServiceName(p.Namespace, m.ServiceName)
		s.feField = field + ".toPorts"
		if s.frontend, err = parsePorts(m.ToPorts); err != nil {
			return s, errAt(field+".toPorts", err)
		}
	default:
		return s, errf("spec.redirectFrontend", "neither addressMatcher nor serviceMatcher (want one)")
	}
	const be = "spec.redirectBackend"
	if len(p.Spec.RedirectBackend.ToPorts) == 0 {
		return s, errf(be+".toPorts", "missing")
	}
	if s.backend, err = parsePorts(p.Spec.RedirectBackend.ToPorts); err != nil {
		return s, errAt(be+".toPorts", err)
	}
	// Names pair the frontend's ports with the backend's; one port on
	// each side pairs without them. A frontend name the backend lacks
	// leaves that port unredirected (Convert reports it), as in Cilium:
	// the policy's other ports apply.
	if len(s.frontend) > 1 || len(s.backend) > 1 {
		for i, fp := range s.frontend {
			bp, ok := portNamed(s.backend, fp.name)
			if ok && bp.proto != fp.proto {
				return s, errf(fmt.Sprintf("spec.redirectFrontend.toPorts[%d].protocol", i), "%s, but %q is %s in %s.toPorts", fp.proto, fp.name, bp.proto, be)
			}
		}
	} else if len(s.frontend) == 1 && s.frontend[0].proto != s.backend[0].proto {
		return s, errf("spec.redirectFrontend.toPorts[0].protocol", "%s, but the backend port is %s", s.frontend[0].proto, s.backend[0].proto)
	}
	if s.selector, err = metav1.LabelSelectorAsSelector(&p.Spec.RedirectBackend.LocalEndpointSelector); err != nil {
		return s, errf(be+".localEndpointSelector", "%v", err)
	}
	s.skip = p.Spec.SkipRedirectFromBackend
	return s, nil
}

// unroutable names why a redirect cannot match address a, "" when it can:
// the addresses a backend may not have either (lb.BackendParams.Validate,
// and loopback as the API server refuses it in an EndpointSlice). An
// unspecified frontend would stand for every node address (the NodePort
// surrogate), and a pod's loopback never leaves the pod. Link-local stays
// allowed: 169.254.169.254 and node-local DNS on 169.254.20.10 are the
// classic redirects.
func unroutable(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsMulticast():
		return "a multicast address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	return ""
}

// parsePorts validates a toPorts list. Its error starts with the index
// and field ("[1].port: ...") for the caller to prefix.
func parsePorts(in []PortInfo) ([]port, error) {
	out := make([]port, 0, len(in))
	names := map[string]bool{}
	for i, pi := range in {
		n, err := strconv.ParseUint(pi.Port, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("[%d].port: %q is not a port number (1-65535)", i, pi.Port)
		}
		var proto lb.Protocol
		switch pi.Protocol {
		case "TCP":
			proto = lb.ProtoTCP
		case "UDP":
			proto = lb.ProtoUDP
		case "SCTP":
			proto = lb.ProtoSCTP
		default:
			return nil, fmt.Errorf("[%d].protocol: unknown protocol %q (want TCP, UDP or SCTP)", i, pi.Protocol)
		}
		if len(in) > 1 && pi.Name == "" {
			return nil, fmt.Errorf("[%d].name: missing (several ports need names)", i)
		}
		if names[pi.Name] {
			return nil, fmt.Errorf("[%d].name: %q repeated", i, pi.Name)
		}
		names[pi.Name] = true
		out = append(out, port{name: pi.Name, num: uint16(n), proto: proto})
	}
	return out, nil
}

func portNamed(ports []port, name string) (port, bool) {
	for _, p := range ports {
		if p.name == name {
			return p, true
		}
	}
	return port{}, false
}

// errNotInCIDRs is wrapped when an addressMatcher's address is outside
// the allowed ranges.
var errNotInCIDRs = errors.New("not in --lrp-address-matcher-cidrs")
