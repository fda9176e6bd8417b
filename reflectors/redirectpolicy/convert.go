package redirectpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/lbstate/lbstate/lb"
)

// Plan is what a policy asks of the Writer. Its pods are the backends of
// Target, a service of the policy's own. For an addressMatcher, Target
// also declares the LocalRedirect frontends; for a serviceMatcher,
// Service is redirected to Target (its ClusterIP frontends, the Ports
// listed or all).
type Plan struct {
	Policy    string         // namespace/name
	Created   time.Time      // the policy's creation time: the older of two wins a frontend
	Target    lb.ServiceName // namespace/name:lrp
	Service   lb.ServiceName // serviceMatcher's Service, else zero
	Ports     []lb.RedirectPort
	Frontends []lb.FrontendParams // addressMatcher's
	Backends  []lb.BackendParams
	// SkipFromBackend is the policy's skipRedirectFromBackend: the
	// redirect's lb.Redirect.SkipFromBackend.
	SkipFromBackend bool
}

// Options are the node's settings that policies are checked against.
type Options struct {
	// AddressCIDRs, if not empty, are the ranges an addressMatcher's
	// address must be in (--lrp-address-matcher-cidrs).
	AddressCIDRs []netip.Prefix
}

// TargetName names the service that holds a policy's pods.
func TargetName(namespace, policy string) lb.ServiceName {
	return lb.NewServiceName(namespace, policy+":lrp")
}

// Convert returns the plan of a policy given this node's pods. err is set
// for an invalid policy (nothing of it applies); problems are pods that
// lack a port the policy names: they serve the policy's other ports.
func Convert(p *Policy, pods []Pod, opts Options) (plan Plan, problems []error, err error) {
	s, err := validate(p)
	if err != nil {
		return Plan{}, nil, err
	}
	if s.addr.IsValid() && len(opts.AddressCIDRs) > 0 &&
		!slices.ContainsFunc(opts.AddressCIDRs, func(c netip.Prefix) bool { return c.Contains(s.addr) }) {
		return Plan{}, nil, fmt.Errorf("policy %s/%s: spec.redirectFrontend.addressMatcher.ip: %s %w", p.Namespace, p.Name, s.addr, errNotInCIDRs)
	}
	plan = Plan{
		Policy:          p.Namespace + "/" + p.Name,
		Created:         p.CreationTimestamp.Time,
		Target:          TargetName(p.Namespace, p.Name),
		Service:         s.service,
		SkipFromBackend: s.skip,
	}
	// With one port on each side, names are not needed to pair them:
	// the backends serve every frontend port of their protocol.
	paired := len(s.frontend) > 1 || len(s.backend) > 1
	for _, fp := range s.frontend {
		if s.addr.IsValid() {
			name := fp.name
			if !paired {
				name = ""
			}
			plan.Frontends = append(plan.Frontends, lb.FrontendParams{
				Address: lb.NewL3n4Addr(fp.proto, s.addr, fp.num, lb.ScopeExternal),
				Type:    lb.SVCTypeLocalRedirect,
				// A Service that has the address keeps it, whatever the
				// ages: the policy is reported and waits for it to go.
				Claim:    lb.ClaimRedirect,
				PortName: name,
			})
			continue
		}
		if fp.name != "" {
			plan.Ports = append(plan.Ports, lb.RedirectPort{Name: fp.name})
		} else {
			plan.Ports = append(plan.Ports, lb.RedirectPort{Port: fp.num, Protocol: fp.proto})
		}
	}
	for i := range pods {
		pod := &pods[i]
		if pod.Namespace != p.Namespace || !pod.Ready || len(pod.IPs) == 0 || !s.selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		for bi, bp := range s.backend {
			num := bp.num
			if bp.name != "" && paired {
				var ok bool
				if num, ok = pod.namedPort(bp.name, bp.proto); !ok {
					problems = append(problems, fmt.Errorf("policy %s: spec.redirectBackend.toPorts[%d].name: pod %s/%s has no %s container port %q",
						plan.Policy, bi, pod.Namespace, pod.Name, bp.proto, bp.name))
					continue
				}
			}
			var names []string
			if paired {
				names = []string{bp.name}
			}
			for _, ip := range pod.IPs {
				plan.Backends = append(plan.Backends, lb.BackendParams{
					Address:   lb.NewL3n4Addr(bp.proto, ip, num, lb.ScopeExternal),
					PortNames: names,
					Weight:    lb.DefaultBackendWeight,
				})
			}
		}
	}
	slices.SortFunc(plan.Backends, func(a, b lb.BackendParams) int { return a.Address.Compare(b.Address) })
	return plan, problems, nil
}
