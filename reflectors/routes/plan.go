package routes

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/lb"
)

// Plan is what a set of objects asks for: the routes to set on each
// parent Service (at most one per port, Port 0 for every port) and each
// object's status.
type Plan struct {
	Routes map[lb.ServiceName][]lb.Route
	Status []Status

	// lost maps each losing object's conflict problems to the parent port
	// it lost ("ns/name:port"): the controller reports a loss once per
	// parent port, not again when only the winner's name changes.
	lost map[Key]map[string]string
}

// Status is what became of one object.
type Status struct {
	Source lb.Source `json:"source"`
	Key
	// Parents are the parents the object's split applies to: "ns/name" or
	// "ns/name:port".
	Parents []string `json:"parents,omitempty"`
	// Shares are the backends in force with their share of new flows.
	Shares []Share `json:"shares,omitempty"`
	// Problems are what is not applied, and why.
	Problems []string `json:"problems,omitempty"`

	// Generation is the object's metadata.generation this status is of.
	Generation int64 `json:"generation,omitempty"`
	// ParentRefs are what became of each parentRef to a Service (a
	// Gateway API route's, in the order written), and BackendRefs the
	// backendRefs of the rule in force: the facts a route's
	// status.parents says (reflectors/routestatus writes it).
	ParentRefs  []ParentRefStatus  `json:"parentRefs,omitempty"`
	BackendRefs []BackendRefStatus `json:"backendRefs,omitempty"`
	// DroppedRules are the problems of the rules not applied while
	// another rule is: the route is accepted, and partially invalid.
	DroppedRules []string `json:"droppedRules,omitempty"`
}

// ParentRefStatus is what became of one parentRef to a Service.
type ParentRefStatus struct {
	// Ref is the parentRef as written.
	Ref gwv1.ParentReference `json:"ref"`
	// Accepted: the object's split applies on the parent (on at least one
	// of its ports). If not, Reason (a gwv1.RouteConditionReason, or
	// ReasonConflicted) and Message say why.
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
}

// BackendRefStatus is one backendRef of the rule in force. Reason (a
// gwv1.RouteConditionReason: InvalidKind, RefNotPermitted) and Message
// say why it cannot resolve; with no Reason it resolves if Service
// exists, which is for the reader of the status to check.
type BackendRefStatus struct {
	Field   string         `json:"field"`
	Service lb.ServiceName `json:"service"`
	Reason  string         `json:"reason,omitempty"`
	Message string         `json:"message,omitempty"`
}

// ReasonConflicted is the Accepted condition's reason (lbstate's own; the
// Gateway API lets implementations add reasons) for a route that another,
// older route beats on every port of the parent.
const ReasonConflicted = "Conflicted"

// Share is a backend service's share of a split, in percent. Rejected:
// the ref is invalid (see its Problem) and the share is rejected.
type Share struct {
	Service  lb.ServiceName `json:"service"`
	Port     uint16         `json:"port,omitempty"`
	Weight   uint32         `json:"weight"`
	Percent  float64        `json:"percent"`
	Rejected bool           `json:"rejected,omitempty"`
}

// claim is one object's split on one parent port: its parents[parent].
type claim struct {
	obj      *Object
	parent   int
	port     uint16
	backends []lb.RouteBackend
}

// MakePlan decides the routes of objs with as as their source. Of two
// objects on one parent port (an object for every port competes on each
// port too), the older wins, then the one first by namespace, name and
// kind, as the Gateway API orders conflicting routes; the other is
// reported. A consumer route (in another namespace than its parent
// Service, for that namespace's clients only) cannot tell clients apart
// at a node's L4 balancer and is reported. A backendRef to another
// namespace needs a ReferenceGrant there; without one it is invalid and
// its share rejected, as the Gateway API says.
func MakePlan(objs []*Object, grants []*ReferenceGrant, as lb.Source) Plan {
	objs = slices.Clone(objs)
	slices.SortFunc(objs, func(a, b *Object) int {
		if !a.Created.Equal(b.Created) {
			return a.Created.Compare(b.Created)
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	plan := Plan{Routes: map[lb.ServiceName][]lb.Route{}, lost: map[Key]map[string]string{}}
	status := make(map[Key]*Status, len(objs))
	claims := map[lb.ServiceName][]claim{} // oldest first
	parents := map[Key]*parentOutcomes{}
	for _, o := range objs {
		st := &Status{Source: as, Key: o.Key, Problems: slices.Clone(o.Problems), Generation: o.Generation}
		status[o.Key] = st
		plan.Status = append(plan.Status, Status{}) // filled below
		out := newParentOutcomes(o)
		parents[o.Key] = out
		if o.Backends == nil {
			out.declineAll(gwv1.RouteReasonUnsupportedValue, "no rule applies at L4 (see the route's other problems): the route is not applied")
			continue
		}
		st.DroppedRules = droppedRules(o)
		backends := make([]lb.RouteBackend, 0, len(o.Backends))
		for _, b := range o.Backends {
			ref := BackendRefStatus{Field: b.Field, Service: lb.NewServiceName(b.Namespace, b.Name)}
			if b.Invalid {
				ref.Reason, ref.Message = string(gwv1.RouteReasonInvalidKind), b.Field+": not a Service"
				st.BackendRefs = append(st.BackendRefs, ref)
				backends = append(backends, lb.RouteBackend{Weight: b.Weight, Rejected: true})
				continue
			}
			rb := lb.RouteBackend{Service: lb.NewServiceName(b.Namespace, b.Name), Port: b.Port, Weight: b.Weight}
			if b.Namespace != o.Namespace && !granted(grants, o, b) {
				problem := fmt.Sprintf("%s: namespace %s: no ReferenceGrant there allows %s from %s: the ref's share (weight %d) is rejected",
					b.Field, b.Namespace, o.Kind, o.Namespace, b.Weight)
				st.Problems = append(st.Problems, problem)
				ref.Reason, ref.Message = string(gwv1.RouteReasonRefNotPermitted), problem
				rb.Rejected = true
			}
			st.BackendRefs = append(st.BackendRefs, ref)
			backends = append(backends, rb)
		}
		for i, p := range o.Parents {
			if p.Service.Namespace() != o.Namespace {
				problem := fmt.Sprintf("%s: service %s is in another namespace: a consumer route splits only its own namespace's clients, which L4 cannot tell apart: not applied",
					p.Field, p.Service)
				st.Problems = append(st.Problems, problem)
				out.decline(i, gwv1.RouteReasonUnsupportedValue, problem)
				continue
			}
			claims[p.Service] = append(claims[p.Service], claim{obj: o, parent: i, port: p.Port, backends: backends})
		}
	}
	for _, parent := range slices.SortedFunc(maps.Keys(claims), lb.ServiceName.Compare) {
		cs := claims[parent]
		ports := map[uint16]bool{0: true}
		for _, c := range cs {
			ports[c.port] = true
		}
		var all *claim // the winner for every port
		for i := range cs {
			if cs[i].port == 0 {
				all = &cs[i]
				break
			}
		}
		for _, port := range slices.Sorted(maps.Keys(ports)) {
			var win *claim
			for i := range cs {
				if cs[i].port == port || cs[i].port == 0 {
					win = &cs[i]
					break
				}
			}
			if win == nil {
				continue
			}
			parents[win.obj.Key].win(win.parent)
			for i := range cs {
				if c := &cs[i]; c != win && c.port == port {
					ls := status[c.obj.Key]
					lost := parentString(parent, port)
					problem := fmt.Sprintf("parent %s: %s is older (or first by name) and wins", lost, win.obj.Key)
					ls.Problems = append(ls.Problems, problem)
					if plan.lost[c.obj.Key] == nil {
						plan.lost[c.obj.Key] = map[string]string{}
					}
					plan.lost[c.obj.Key][problem] = lost
					parents[c.obj.Key].lose(c.parent, problem)
				}
			}
			if port != 0 && win == all {
				continue // the route for every port covers it
			}
			plan.Routes[parent] = append(plan.Routes[parent], lb.Route{Source: as, Name: win.obj.Kind + " " + win.obj.Namespace + "/" + win.obj.Name, Port: port, Backends: win.backends})
			st := status[win.obj.Key]
			st.Parents = append(st.Parents, parentString(parent, port))
			st.Shares = shares(win.backends)
		}
	}
	for i, o := range objs {
		st := status[o.Key]
		st.ParentRefs = parents[o.Key].statuses()
		plan.Status[i] = *st
	}
	return plan
}

// droppedRules returns the problems of o's dropped rules, in order.
func droppedRules(o *Object) []string {
	var out []string
	for _, rule := range o.Dropped {
		for _, p := range o.Problems {
			if strings.HasPrefix(p, rule+".") || strings.HasPrefix(p, rule+":") {
				out = append(out, p)
			}
		}
	}
	return out
}

func parentString(name lb.ServiceName, port uint16) string {
	if port == 0 {
		return name.String()
	}
	return name.String() + ":" + strconv.Itoa(int(port))
}

// granted reports whether a ReferenceGrant in b's namespace allows o's
// ref to it.
func granted(grants []*ReferenceGrant, o *Object, b Backend) bool {
	if o.Kind == "TrafficSplit" {
		return false // SMI names services of its own namespace only
	}
	return slices.ContainsFunc(grants, func(g *ReferenceGrant) bool {
		return g.Namespace == b.Namespace && g.Allows(o.Kind, o.Namespace, b.Name)
	})
}

// shares returns each backend's weight as a percentage of the sum.
func shares(backends []lb.RouteBackend) []Share {
	var sum float64
	for _, b := range backends {
		sum += float64(b.Weight)
	}
	out := make([]Share, len(backends))
	for i, b := range backends {
		out[i] = Share{Service: b.Service, Port: b.Port, Weight: b.Weight, Rejected: b.Rejected}
		if sum > 0 {
			out[i].Percent = 100 * float64(b.Weight) / sum
		}
	}
	return out
}

func (s Share) String() string {
	name := s.Service.String()
	if s.Port != 0 {
		name += ":" + strconv.Itoa(int(s.Port))
	}
	if s.Rejected {
		name = strings.TrimSpace("rejected " + name)
	}
	return name + " " + strconv.FormatFloat(s.Percent, 'f', -1, 64) + "%"
}

func (s *Status) TableHeader() []string {
	return []string{"Route", "Source", "Parents", "Shares", "NotApplied"}
}

func (s *Status) TableRow() []string {
	shares := make([]string, len(s.Shares))
	for i, sh := range s.Shares {
		shares[i] = sh.String()
	}
	return []string{s.Key.String(), s.Source.String(), strings.Join(s.Parents, ", "), strings.Join(shares, ", "), strings.Join(s.Problems, "; ")}
}
