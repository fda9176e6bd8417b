package redirectpolicy

import (
	"fmt"
	"maps"
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
	// Pods are the pods the policy selects, with their backends' state.
	Pods []PodRef
	// Serving is whether any frontend is redirected: some port has a pod
	// that takes new flows. Without one, the policy's frontends go where
	// they would without it.
	Serving bool
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

// TargetName names the service that holds a policy's pods: NAME:lrp, a
// name no Kubernetes Service can have.
func TargetName(namespace, policy string) lb.ServiceName {
	return lb.NewServiceName(namespace, policy+targetSuffix)
}

const targetSuffix = ":lrp"

// Rule is a validated policy, ready to be converted against pods again
// and again without being parsed each time.
type Rule struct {
	policy *Policy
	s      spec
	opts   Options
}

// Compile validates a policy against the node's options: the error names
// the policy and the field.
func Compile(p *Policy, opts Options) (*Rule, error) {
	s, err := validate(p)
	if err != nil {
		return nil, err
	}
	if s.addr.IsValid() && len(opts.AddressCIDRs) > 0 &&
		!slices.ContainsFunc(opts.AddressCIDRs, func(c netip.Prefix) bool { return c.Contains(s.addr) }) {
		return nil, fmt.Errorf("policy %s/%s: spec.redirectFrontend.addressMatcher.ip: %s %w", p.Namespace, p.Name, s.addr, errNotInCIDRs)
	}
	return &Rule{policy: p, s: s, opts: opts}, nil
}

// Policy returns the policy the rule was compiled from.
func (r *Rule) Policy() *Policy { return r.policy }

// Service is the serviceMatcher's Service, or zero for an addressMatcher.
func (r *Rule) Service() lb.ServiceName { return r.s.service }

// IndexLabel is a "key=value" every pod the policy selects has (the first
// of its matchLabels), or "" when its selector has no matchLabels: a
// source can index pods and policies by it.
func (r *Rule) IndexLabel() string {
	m := r.policy.Spec.RedirectBackend.LocalEndpointSelector.MatchLabels
	if len(m) == 0 {
		return ""
	}
	k := slices.Min(slices.Collect(maps.Keys(m)))
	return k + "=" + m[k]
}

// Selects reports whether a pod is one of the policy's: in its namespace,
// matching its localEndpointSelector (whatever its readiness).
func (r *Rule) Selects(pod *Pod) bool {
	return pod != nil && pod.Namespace == r.policy.Namespace && r.s.selector.Matches(labels.Set(pod.Labels))
}

// Convert returns the plan of a policy given this node's pods. err is set
// for an invalid policy (nothing of it applies). problems are what the
// policy leaves out and applies without: a frontend port whose name the
// backend ports lack (that port is not redirected), a pod that lacks a
// container port the policy names (it serves the policy's other ports).
func Convert(p *Policy, pods []Pod, opts Options) (plan Plan, problems []error, err error) {
	r, err := Compile(p, opts)
	if err != nil {
		return Plan{}, nil, err
	}
	plan, problems = r.Convert(pods)
	return plan, problems, nil
}

// Convert returns the rule's plan given this node's pods (pods of other
// namespaces are skipped).
func (r *Rule) Convert(pods []Pod) (plan Plan, problems []error) {
	p, s := r.policy, r.s
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
	if paired {
		// A frontend port whose name no backend port has is left out,
		// not the policy: no pod can serve it, so it goes where it
		// would without the policy (below).
		for i, fp := range s.frontend {
			if _, ok := portNamed(s.backend, fp.name); !ok {
				problems = append(problems, fmt.Errorf("policy %s: %s[%d].name: %q has no port of that name in spec.redirectBackend.toPorts: port not redirected",
					plan.Policy, s.feField, i, fp.name))
			}
		}
	}
	serving := map[string]bool{} // backend port names with a pod taking new flows ("" unpaired)
	for i := range pods {
		pod := &pods[i]
		state, serves := pod.State()
		if !serves || len(pod.IPs) == 0 || !r.Selects(pod) {
			continue
		}
		plan.Pods = append(plan.Pods, PodRef{Name: pod.Name, IPs: pod.IPs, State: state})
		for bi, bp := range s.backend {
			num := bp.num
			// A pod that declares no ports is taken at the policy's
			// numbers; one that declares some must have the named one.
			if bp.name != "" && paired && len(pod.Ports) > 0 {
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
			if state == lb.BackendActive || state == lb.BackendTerminating {
				serving[portKey(paired, bp.name)] = true
			}
			for _, ip := range pod.IPs {
				plan.Backends = append(plan.Backends, lb.BackendParams{
					Address: lb.NewL3n4Addr(bp.proto, ip, num, lb.ScopeExternal),
					Weight:  lb.DefaultBackendWeight,
					State:   state,
				}.WithPortNames(names...))
			}
		}
	}
	// Only ports with a pod that takes new flows are redirected: the
	// others go where they would without the policy.
	for _, fp := range s.frontend {
		if !serving[portKey(paired, fp.name)] {
			continue
		}
		plan.Serving = true
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
	if len(s.frontend) == 0 { // a serviceMatcher of all the Service's ports
		if !paired {
			// The backend port serves the Service's ports of its protocol.
			if plan.Serving = serving[""]; plan.Serving {
				plan.Ports = []lb.RedirectPort{{Protocol: s.backend[0].proto}}
			}
		} else {
			// Named backend ports pair with the Service's port names.
			for _, bp := range s.backend {
				if serving[bp.name] {
					plan.Serving = true
					plan.Ports = append(plan.Ports, lb.RedirectPort{Name: bp.name})
				}
			}
		}
	}
	slices.SortFunc(plan.Backends, func(a, b lb.BackendParams) int { return a.Address.Compare(b.Address) })
	return plan, problems
}

// portKey names a backend port in the serving set: by name when ports
// pair by name, else "".
func portKey(paired bool, name string) string {
	if paired {
		return name
	}
	return ""
}
