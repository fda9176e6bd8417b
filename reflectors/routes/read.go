// Package routes turns traffic splits, as users write them, into
// lb.Routes on the Services they split: Gateway API routes whose parent is
// a Service (GAMMA: TCPRoute, UDPRoute, HTTPRoute, GRPCRoute), with
// ReferenceGrants for backends in other namespaces, and SMI's
// TrafficSplit (v1alpha2 through v1alpha4, in lbstate's own types).
//
// Read normalizes one object; Plan is a pure function from every object
// to the routes to set and a status per object (what applies, each
// backend's share, what could not be applied and why, and, per Service
// parentRef and backendRef, the facts a route's status.parents says,
// which reflectors/routestatus writes). Cell is the routes source: one
// Controller per feed (kubeapi.Feed: the API server, a manifests
// directory) applies the plan through the Writer, as the feed's identity.
package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// GatewayGroup is the Gateway API's group.
const GatewayGroup = gwv1.GroupName

// MaxWeight is the largest weight the Gateway API allows a backendRef.
// SMI sets no bound; lbstate takes TrafficSplit weights up to
// math.MaxUint32 (lb.RouteBackend.Weight), reduced exactly as well.
const MaxWeight = 1_000_000

// AddToScheme registers the kinds Read reads: the Gateway API's route
// kinds and ReferenceGrant in every version the project publishes, and
// TrafficSplit.
func AddToScheme(s *runtime.Scheme) error {
	return errors.Join(gwv1.Install(s), gwv1beta1.Install(s), gwv1alpha2.Install(s), AddSMIToScheme(s))
}

// Key names an object Read reads.
type Key struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// Object is a traffic split, whatever its kind: the Services it splits
// and the backends of its one rule that applies at L4.
type Object struct {
	Key
	Created time.Time
	// Generation is the object's metadata.generation (0 from a manifest
	// without one): the one its route status observes.
	Generation int64
	Parents    []Parent
	// Declined are the Service parentRefs that are valid but cannot apply
	// (a sectionName), each with its Problem.
	Declined []Parent
	// Backends are the applicable rule's, in order; nil when no rule
	// applies.
	Backends []Backend
	// Dropped are the rules not applied ("spec.rules[1]"), each with its
	// Problems.
	Dropped []string
	// Origin is where a manifest declares the object
	// (kubeapi.AnnotationManifestOrigin), "" if none: its problems name it.
	Origin string
	// Problems are the parts that are not applied (rules with L7
	// matches, parents that are not Services, refs of unknown kinds),
	// each naming the field.
	Problems []string
}

// Parent is a Service an object splits, and the service port it is
// limited to (0: every port).
type Parent struct {
	Service lb.ServiceName
	Port    uint16
	// Field names the parentRef, for reports: "spec.parentRefs[0]".
	Field string
	// Ref is the parentRef as written (nil for a TrafficSplit's apex),
	// which the route's status.parents entry repeats, and Index its
	// position in spec.parentRefs.
	Ref   *gwv1.ParentReference
	Index int
	// Problem says why a Declined parent is not applied.
	Problem string
}

// Backend is one backendRef: a Service, its port (0: the parent's) and
// weight. Invalid says that the ref is not one that can resolve (a kind
// that is not a Service): its share is rejected.
type Backend struct {
	Namespace, Name string
	Port            uint16
	Weight          uint32
	Field           string
	Invalid         bool
}

// ReferenceGrant allows refs from some kinds of objects in other
// namespaces to objects in its namespace.
type ReferenceGrant struct {
	Namespace string
	Name      string
	From      []gwv1.ReferenceGrantFrom
	To        []gwv1.ReferenceGrantTo
}

// Allows reports whether the grant lets an object of kind in namespace
// from refer to Service name in the grant's namespace.
func (g *ReferenceGrant) Allows(kind, from, name string) bool {
	okFrom := slices.ContainsFunc(g.From, func(f gwv1.ReferenceGrantFrom) bool {
		return string(f.Group) == GatewayGroup && string(f.Kind) == kind && string(f.Namespace) == from
	})
	return okFrom && slices.ContainsFunc(g.To, func(t gwv1.ReferenceGrantTo) bool {
		return t.Group == "" && t.Kind == "Service" && (t.Name == nil || *t.Name == "" || string(*t.Name) == name)
	})
}

// KeyOf returns the key of an object Read reads, and whether it is one
// (a ReferenceGrant is: its kind is "ReferenceGrant").
func KeyOf(obj any) (Key, bool) {
	o, ok := obj.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok {
		return Key{}, false
	}
	kind := ""
	switch obj.(type) {
	case *gwv1.HTTPRoute, *gwv1beta1.HTTPRoute:
		kind = "HTTPRoute"
	case *gwv1.GRPCRoute, *gwv1alpha2.GRPCRoute:
		kind = "GRPCRoute"
	case *gwv1.TCPRoute, *gwv1alpha2.TCPRoute:
		kind = "TCPRoute"
	case *gwv1.UDPRoute, *gwv1alpha2.UDPRoute:
		kind = "UDPRoute"
	case *TrafficSplit:
		kind = "TrafficSplit"
	case *gwv1.ReferenceGrant, *gwv1beta1.ReferenceGrant, *gwv1alpha2.ReferenceGrant:
		kind = "ReferenceGrant"
	default:
		return Key{}, false
	}
	ns := o.GetNamespace()
	if ns == "" {
		ns = "default"
	}
	return Key{kind, ns, o.GetName()}, true
}

// ReadGrant reads a ReferenceGrant of any version.
func ReadGrant(obj any) (*ReferenceGrant, error) {
	key, _ := KeyOf(obj)
	var g gwv1.ReferenceGrant
	if err := convert(obj, &g); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return &ReferenceGrant{Namespace: key.Namespace, Name: key.Name, From: g.Spec.From, To: g.Spec.To}, nil
}

// Read normalizes a route or a TrafficSplit. An error names the object
// and field of what makes it invalid as a whole (the API server's
// validation would have refused it: a weight out of range, a Service
// backendRef without a port, a parentRef of an unknown kind); the parts
// that are valid but cannot apply at L4 are Problems.
func Read(obj any) (*Object, error) {
	key, ok := KeyOf(obj)
	if !ok || key.Kind == "ReferenceGrant" {
		return nil, fmt.Errorf("%T: not a route", obj)
	}
	o := &Object{Key: key, Created: obj.(interface{ GetCreationTimestamp() metav1.Time }).GetCreationTimestamp().Time, Origin: kubeapi.Origin(obj)}
	if g, ok := obj.(interface{ GetGeneration() int64 }); ok {
		o.Generation = g.GetGeneration()
	}
	var err error
	switch key.Kind {
	case "TrafficSplit":
		err = o.readSplit(obj.(*TrafficSplit))
	case "HTTPRoute":
		var r gwv1.HTTPRoute
		if err = convert(obj, &r); err == nil {
			err = o.readHTTP(&r)
		}
	case "GRPCRoute":
		var r gwv1.GRPCRoute
		if err = convert(obj, &r); err == nil {
			err = o.readGRPC(&r)
		}
	case "TCPRoute":
		var r gwv1.TCPRoute
		if err = convert(obj, &r); err == nil {
			err = o.readL4(r.Spec.CommonRouteSpec, len(r.Spec.Rules), func(i int) []gwv1.BackendRef { return r.Spec.Rules[i].BackendRefs })
		}
	case "UDPRoute":
		var r gwv1.UDPRoute
		if err = convert(obj, &r); err == nil {
			err = o.readL4(r.Spec.CommonRouteSpec, len(r.Spec.Rules), func(i int) []gwv1.BackendRef { return r.Spec.Rules[i].BackendRefs })
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return o, nil
}

// convert copies obj into out, a Gateway API v1 type of the same schema
// (the older versions' types are the same fields).
func convert(obj any, out any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func (o *Object) problem(format string, args ...any) {
	o.Problems = append(o.Problems, fmt.Sprintf(format, args...))
}

func (o *Object) readSplit(ts *TrafficSplit) error {
	if ts.Spec.Service == "" {
		return errors.New("spec.service: missing")
	}
	if len(ts.Spec.Matches) > 0 {
		o.problem("spec.matches: HTTP route groups cannot be told apart at L4: the split is not applied")
	}
	apex := lb.NewServiceName(o.Namespace, ts.Spec.Service)
	if err := apex.Validate(); err != nil {
		return fmt.Errorf("spec.service: %w", err)
	}
	o.Parents = []Parent{{Service: apex, Field: "spec.service"}}
	backends := make([]Backend, 0, len(ts.Spec.Backends))
	for i, b := range ts.Spec.Backends {
		field := "spec.backends[" + strconv.Itoa(i) + "]"
		if err := lb.NewServiceName(o.Namespace, b.Service).Validate(); err != nil {
			return fmt.Errorf("%s.service: %w", field, err)
		}
		if b.Weight < 0 || b.Weight > math.MaxUint32 {
			return fmt.Errorf("%s.weight: %d is outside 0-%d", field, b.Weight, uint32(math.MaxUint32))
		}
		backends = append(backends, Backend{Namespace: o.Namespace, Name: b.Service, Weight: uint32(b.Weight), Field: field})
	}
	if len(ts.Spec.Matches) == 0 {
		o.Backends = backends
	}
	return nil
}

// readParents reads the parentRefs: Services are kept (group "", or
// "core" as some of the Gateway API's own mesh examples write it, which
// Cilium accepts too); Gateways are not lbstate's (a gateway controller
// implements them) and are skipped; any other kind is an error.
func (o *Object) readParents(spec gwv1.CommonRouteSpec) error {
	for i, p := range spec.ParentRefs {
		field := "spec.parentRefs[" + strconv.Itoa(i) + "]"
		group, kind := GatewayGroup, "Gateway"
		if p.Group != nil {
			group = string(*p.Group)
		}
		if p.Kind != nil {
			kind = string(*p.Kind)
		}
		switch {
		case group == GatewayGroup && (kind == "Gateway" || kind == "ListenerSet"):
			continue
		case (group != "" && group != "core") || kind != "Service":
			return fmt.Errorf("%s: kind %s of group %q: lbstate reads Service parents (group \"\")", field, kind, group)
		}
		ns := o.Namespace
		if p.Namespace != nil && *p.Namespace != "" {
			ns = string(*p.Namespace)
		}
		if p.SectionName != nil && *p.SectionName != "" {
			problem := field + ".sectionName: a Service port is chosen by port, not by name: the parentRef is not applied"
			o.Problems = append(o.Problems, problem)
			o.Declined = append(o.Declined, Parent{Service: lb.NewServiceName(ns, string(p.Name)), Field: field, Ref: &p, Index: i, Problem: problem})
			continue
		}
		var port uint16
		if p.Port != nil {
			if *p.Port < 1 || *p.Port > 65535 {
				return fmt.Errorf("%s.port: %d is outside 1-65535", field, *p.Port)
			}
			port = uint16(*p.Port)
		}
		name := lb.NewServiceName(ns, string(p.Name))
		if err := name.Validate(); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		o.Parents = append(o.Parents, Parent{Service: name, Port: port, Field: field, Ref: &p, Index: i})
	}
	return nil
}

// readBackends reads the backendRefs of rule field. A ref of a kind
// other than Service is invalid: its share is rejected (a Problem); a
// weight out of range or a Service ref without a port is an error.
func (o *Object) readBackends(field string, refs []gwv1.BackendRef) ([]Backend, error) {
	out := make([]Backend, 0, len(refs))
	for i, r := range refs {
		f := field + ".backendRefs[" + strconv.Itoa(i) + "]"
		weight := int32(1)
		if r.Weight != nil {
			weight = *r.Weight
		}
		if weight < 0 || weight > MaxWeight {
			return nil, fmt.Errorf("%s.weight: %d is outside 0-%d", f, weight, MaxWeight)
		}
		group, kind := "", "Service"
		if r.Group != nil {
			group = string(*r.Group)
		}
		if r.Kind != nil {
			kind = string(*r.Kind)
		}
		if group != "" || kind != "Service" {
			o.problem("%s: kind %s of group %q is not a Service: its share (weight %d) is rejected", f, kind, group, weight)
			out = append(out, Backend{Weight: uint32(weight), Field: f, Invalid: true})
			continue
		}
		if r.Port == nil {
			return nil, fmt.Errorf("%s.port: missing (a Service backendRef needs one)", f)
		}
		if *r.Port < 1 || *r.Port > 65535 {
			return nil, fmt.Errorf("%s.port: %d is outside 1-65535", f, *r.Port)
		}
		ns := o.Namespace
		if r.Namespace != nil && *r.Namespace != "" {
			ns = string(*r.Namespace)
		}
		if err := lb.NewServiceName(ns, string(r.Name)).Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, Backend{Namespace: ns, Name: string(r.Name), Port: uint16(*r.Port), Weight: uint32(weight), Field: f})
	}
	return out, nil
}

// readL4 reads a TCPRoute or UDPRoute: every rule applies to every
// connection, so the first rule is the one in force and the others are
// reported.
func (o *Object) readL4(spec gwv1.CommonRouteSpec, rules int, refs func(int) []gwv1.BackendRef) error {
	if err := o.readParents(spec); err != nil {
		return err
	}
	applies := make([]bool, rules)
	for i := range applies {
		applies[i] = true
	}
	return o.readRules(rules, applies, refs)
}

// readRules keeps the backends of the first rule that applies at L4 and
// reports the others.
func (o *Object) readRules(rules int, applies []bool, refs func(int) []gwv1.BackendRef) error {
	found := false
	for i := range rules {
		field := "spec.rules[" + strconv.Itoa(i) + "]"
		backends, err := o.readBackends(field, refs(i))
		if err != nil {
			return err
		}
		switch {
		case !applies[i]:
			o.Dropped = append(o.Dropped, field)
		case found:
			o.problem("%s: an earlier rule already takes every connection: the rule is not applied", field)
			o.Dropped = append(o.Dropped, field)
		default:
			found, o.Backends = true, backends
		}
	}
	return nil
}

func (o *Object) readHTTP(r *gwv1.HTTPRoute) error {
	if err := o.readParents(r.Spec.CommonRouteSpec); err != nil {
		return err
	}
	applies := make([]bool, len(r.Spec.Rules))
	for i, rule := range r.Spec.Rules {
		applies[i] = o.catchAll(i, len(rule.Matches), func(j int) string { return httpMatchL7(rule.Matches[j]) })
		if len(rule.Filters) > 0 && applies[i] {
			o.problem("spec.rules[%d].filters: HTTP filters cannot apply at L4: the rule is not applied", i)
			applies[i] = false
		}
	}
	return o.readRules(len(r.Spec.Rules), applies, func(i int) []gwv1.BackendRef {
		refs := make([]gwv1.BackendRef, len(r.Spec.Rules[i].BackendRefs))
		for j, b := range r.Spec.Rules[i].BackendRefs {
			refs[j] = b.BackendRef
		}
		return refs
	})
}

func (o *Object) readGRPC(r *gwv1.GRPCRoute) error {
	if err := o.readParents(r.Spec.CommonRouteSpec); err != nil {
		return err
	}
	applies := make([]bool, len(r.Spec.Rules))
	for i, rule := range r.Spec.Rules {
		applies[i] = o.catchAll(i, len(rule.Matches), func(j int) string {
			m := rule.Matches[j]
			switch {
			case m.Method != nil:
				return "method"
			case len(m.Headers) > 0:
				return "headers"
			}
			return ""
		})
		if len(rule.Filters) > 0 && applies[i] {
			o.problem("spec.rules[%d].filters: gRPC filters cannot apply at L4: the rule is not applied", i)
			applies[i] = false
		}
	}
	return o.readRules(len(r.Spec.Rules), applies, func(i int) []gwv1.BackendRef {
		refs := make([]gwv1.BackendRef, len(r.Spec.Rules[i].BackendRefs))
		for j, b := range r.Spec.Rules[i].BackendRefs {
			refs[j] = b.BackendRef
		}
		return refs
	})
}

// catchAll reports whether rule i matches every request: it has no
// matches, or one match that l7 finds nothing to decide in. A rule any
// of whose matches needs L7 is reported and not applied.
func (o *Object) catchAll(i, matches int, l7 func(j int) string) bool {
	if matches == 0 {
		return true
	}
	for j := range matches {
		if what := l7(j); what != "" {
			o.problem("spec.rules[%d].matches[%d].%s: cannot be decided per connection at L4: the rule is not applied", i, j, what)
			return false
		}
	}
	return true
}

// httpMatchL7 returns the field of m that needs L7, or "" for a match of
// everything (no path, or the path prefix "/").
func httpMatchL7(m gwv1.HTTPRouteMatch) string {
	switch {
	case len(m.Headers) > 0:
		return "headers"
	case len(m.QueryParams) > 0:
		return "queryParams"
	case m.Method != nil:
		return "method"
	case m.Path != nil:
		t, v := gwv1.PathMatchPathPrefix, "/"
		if m.Path.Type != nil {
			t = *m.Path.Type
		}
		if m.Path.Value != nil {
			v = *m.Path.Value
		}
		if t != gwv1.PathMatchPathPrefix || v != "/" {
			return "path"
		}
	}
	return ""
}
