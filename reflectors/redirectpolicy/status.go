package redirectpolicy

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/lbstate/lbstate/lb"
)

// TableName is the name of the table of policies as this node applies
// them.
const TableName = "local-redirect-policies"

// Status is a row of the local-redirect-policies table: one source's
// policy as this node applies it. A source writes it in the transaction
// that applies the policy. It says what the policy is and which of this
// node's pods it selects; which frontends it redirects now is in the
// frontends table (Describe joins the two). Policies have no status in
// the API: each node's is here.
type Status struct {
	Source lb.Source `json:"source" yaml:"source"`
	Name   string    `json:"name" yaml:"name"` // namespace/name
	// Created is the policy's creation time: of two policies on one
	// frontend, the older applies.
	Created time.Time `json:"created,omitzero" yaml:"created,omitempty"`
	// Frontend is what the policy redirects, as it is written.
	Frontend string `json:"frontend" yaml:"frontend"`
	// Service is the serviceMatcher's Service; Addresses are the
	// addressMatcher's frontends.
	Service   lb.ServiceName `json:"service,omitzero" yaml:"service,omitempty"`
	Addresses []lb.L3n4Addr  `json:"addresses,omitempty" yaml:"addresses,omitempty"`
	// Target is the service that holds the policy's pods as backends.
	Target lb.ServiceName `json:"target" yaml:"target"`
	// Pods are this node's pods the policy selects.
	Pods []PodRef `json:"pods,omitempty" yaml:"pods,omitempty"`
	// Problems are pods that lack a port the policy names.
	Problems []string `json:"problems,omitempty" yaml:"problems,omitempty"`
	// LostTo names the older policy that redirects the same Service: this
	// one waits, and takes over when that one goes.
	LostTo string `json:"lostTo,omitempty" yaml:"lostTo,omitempty"`
	// Error is why the policy's latest version was rejected: its last
	// valid version, if any, applies.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
	// Valid is whether a valid version of the policy applies.
	Valid           bool `json:"valid" yaml:"valid"`
	SkipFromBackend bool `json:"skipRedirectFromBackend,omitempty" yaml:"skipRedirectFromBackend,omitempty"`
}

// key is the row's primary key: source, then namespace/name.
func (s *Status) key() index.Key { return statusKey(s.Source, s.Name) }

func statusKey(src lb.Source, name string) index.Key {
	return index.String(src.String() + ":" + name)
}

// StatusByName is the primary index of the table: "source:namespace/name"
// (the db/* script commands take that string).
var StatusByName = statedb.Index[*Status, string]{
	Name:       "name",
	FromObject: func(s *Status) index.KeySet { return index.NewKeySet(s.key()) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// NewTable creates the local-redirect-policies table and registers it
// with db.
func NewTable(db *statedb.DB) (statedb.RWTable[*Status], error) {
	return statedb.NewTable(db, TableName, StatusByName)
}

// StatusOf is the row of a policy given its rule and plan (rule nil for a
// policy never valid, err the latest version's error).
func StatusOf(src lb.Source, p *Policy, r *Rule, plan Plan, problems []error, lostTo string, err error) *Status {
	st := &Status{Source: src, Name: p.Namespace + "/" + p.Name, Created: p.CreationTimestamp.Time, LostTo: lostTo}
	if err != nil {
		st.Error = err.Error()
	}
	for _, e := range problems {
		st.Problems = append(st.Problems, e.Error())
	}
	if r == nil {
		return st
	}
	st.Valid = true
	st.Frontend = r.frontendString()
	st.Service, st.Target, st.Pods, st.SkipFromBackend = plan.Service, plan.Target, plan.Pods, plan.SkipFromBackend
	for _, fe := range plan.Frontends {
		st.Addresses = append(st.Addresses, fe.Address)
	}
	return st
}

// frontendString writes the policy's frontend as it is written:
// "address 169.254.20.10 53/UDP" or "service kube-system/kube-dns (all
// UDP ports)".
func (r *Rule) frontendString() string {
	ports := make([]string, len(r.s.frontend))
	for i, p := range r.s.frontend {
		ports[i] = fmt.Sprintf("%d/%s", p.num, p.proto)
		if p.name != "" {
			ports[i] = p.name + "=" + ports[i]
		}
	}
	if r.s.addr.IsValid() {
		return "address " + r.s.addr.String() + " " + strings.Join(ports, ",")
	}
	if len(ports) == 0 && len(r.s.backend) == 1 {
		return fmt.Sprintf("service %s (all %s ports)", r.s.service, r.s.backend[0].proto)
	}
	if len(ports) == 0 {
		names := make([]string, len(r.s.backend))
		for i, p := range r.s.backend {
			names[i] = p.name
		}
		return "service " + r.s.service.String() + " (ports " + strings.Join(names, ",") + ")"
	}
	return "service " + r.s.service.String() + " " + strings.Join(ports, ",")
}

// Report is a policy and what it does on this node: the frontends it
// redirects now and, when it redirects nothing to a pod that takes new
// flows, why.
type Report struct {
	*Status   `yaml:",inline"`
	Redirects []lb.L3n4Addr `json:"redirects" yaml:"redirects"`
	Why       []string      `json:"why,omitempty" yaml:"why,omitempty"`
}

// Describe joins policies' rows with the frontends table (all of its
// rows, or at least those of the policies' Services, Targets and
// addresses), one report per policy, in order.
func Describe(policies iter.Seq[*Status], frontends iter.Seq[*lb.Frontend]) []Report {
	sts := slices.Collect(policies)
	services := map[lb.ServiceName]bool{}
	addrs := map[lb.L3n4Addr]bool{}
	for _, st := range sts {
		services[st.Service], services[st.Target] = true, true
		for _, a := range st.Addresses {
			addrs[a] = true
		}
	}
	delete(services, lb.ServiceName{})
	bySvc := map[lb.ServiceName][]*lb.Frontend{}
	owners := map[lb.L3n4Addr]lb.ServiceName{}
	for fe := range frontends {
		if services[fe.Service] {
			bySvc[fe.Service] = append(bySvc[fe.Service], fe)
		}
		if addrs[fe.Address] {
			owners[fe.Address] = fe.Service
		}
	}
	out := make([]Report, len(sts))
	for i, st := range sts {
		out[i] = describe(st, bySvc, owners)
	}
	return out
}

func describe(st *Status, bySvc map[lb.ServiceName][]*lb.Frontend, owners map[lb.L3n4Addr]lb.ServiceName) Report {
	rep := Report{Status: st, Redirects: []lb.L3n4Addr{}}
	why := func(format string, args ...any) { rep.Why = append(rep.Why, fmt.Sprintf(format, args...)) }
	if !st.Valid {
		why("invalid: %s", st.Error)
		return rep
	}
	for _, fe := range bySvc[st.Target] {
		if fe.Type == lb.SVCTypeLocalRedirect {
			rep.Redirects = append(rep.Redirects, fe.Address)
		}
	}
	if !st.Service.IsZero() {
		for _, fe := range bySvc[st.Service] {
			if fe.RedirectedTo() == st.Target {
				rep.Redirects = append(rep.Redirects, fe.Address)
			}
		}
	}
	slices.SortFunc(rep.Redirects, lb.L3n4Addr.Compare)
	serving := slices.ContainsFunc(st.Pods, func(p PodRef) bool { return p.State == lb.BackendActive || p.State == lb.BackendTerminating })
	switch {
	case st.LostTo != "":
		why("service %s is redirected by the older policy %s", st.Service, st.LostTo)
	case !st.Service.IsZero() && len(bySvc[st.Service]) == 0:
		why("service %s has no frontends (not declared yet?)", st.Service)
	case !st.Service.IsZero() && len(rep.Redirects) == 0 && serving:
		why("service %s has no ClusterIP frontend on the policy's ports", st.Service)
	}
	for _, a := range st.Addresses {
		if owner, ok := owners[a]; ok && owner != st.Target {
			why("address %s is owned by service %s", a, owner)
		}
	}
	if st.Error != "" { // the last valid version applies
		why("latest version rejected, the last valid one applies: %s", st.Error)
	}
	for _, p := range st.Problems {
		why("%s", strings.TrimPrefix(p, "policy "+st.Name+": "))
	}
	switch {
	case len(st.Pods) == 0:
		why("no pod on this node in namespace %s matches the selector", strings.SplitN(st.Name, "/", 2)[0])
	case !serving:
		why("no selected pod is ready")
	}
	return rep
}

// TableHeader and TableRow print a row (db/show).
func (s *Status) TableHeader() []string {
	return []string{"Name", "Source", "Frontend", "Target", "Pods", "LostTo", "Error"}
}

func (s *Status) TableRow() []string {
	pods := make([]string, len(s.Pods))
	for i, p := range s.Pods {
		pods[i] = p.Name + " " + p.State.String()
	}
	return []string{s.Name, s.Source.String(), s.Frontend, s.Target.String(), strings.Join(pods, ", "), s.LostTo, s.Error}
}

// TableHeader and TableRow print a report as a table row (lbctl, lrp/list).
func (r Report) TableHeader() []string {
	return []string{"Name", "Source", "Frontend", "Redirects", "Pods", "Why"}
}

func (r Report) TableRow() []string {
	redirects := make([]string, len(r.Redirects))
	for i, a := range r.Redirects {
		redirects[i] = a.String()
	}
	pods := make([]string, len(r.Pods))
	for i, p := range r.Pods {
		pods[i] = p.Name
		if p.State != lb.BackendActive {
			pods[i] += " (" + p.State.String() + ")"
		}
	}
	frontend := r.Frontend
	if !r.Valid {
		frontend = "-"
	}
	return []string{r.Name, r.Source.String(), frontend, strings.Join(redirects, ", "), strings.Join(pods, ", "), strings.Join(r.Why, "; ")}
}
