package routes

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/lbstate/lbstate/lb"
)

var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

func decode(t *testing.T, doc string) runtime.Object {
	t.Helper()
	obj, _, err := decoder.Decode([]byte(doc), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func read(t *testing.T, doc string) *Object {
	t.Helper()
	o, err := Read(decode(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Invalid objects are refused as a whole, with the object and field
// named, as the API server's validation would refuse them.
func TestReadRejectsInvalidRoutesNamingTheField(t *testing.T) {
	tests := []struct{ doc, want string }{
		{`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{group: "", kind: Service, name: web}]
  rules: [{backendRefs: [{name: a, port: 80, weight: 1000001}]}]`,
			"HTTPRoute ns/r: spec.rules[0].backendRefs[0].weight: 1000001 is outside 0-1000000"},
		{`apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{group: apps, kind: Deployment, name: web}]
  rules: [{backendRefs: [{name: a, port: 80}]}]`,
			`TCPRoute ns/r: spec.parentRefs[0]: kind Deployment of group "apps": lbstate reads Service parents`},
		{`apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{group: "", kind: Service, name: dns}]
  rules: [{backendRefs: [{name: a}]}]`,
			"UDPRoute ns/r: spec.rules[0].backendRefs[0].port: missing"},
		{`apiVersion: split.smi-spec.io/v1alpha2
kind: TrafficSplit
metadata: {name: s, namespace: ns}
spec: {service: web, backends: [{service: a, weight: -1}]}`,
			"TrafficSplit ns/s: spec.backends[0].weight: -1 is outside 0-4294967295"},
		{`apiVersion: split.smi-spec.io/v1alpha4
kind: TrafficSplit
metadata: {name: s, namespace: ns}
spec: {backends: [{service: a, weight: 1}]}`,
			"TrafficSplit ns/s: spec.service: missing"},
	}
	for _, tt := range tests {
		_, err := Read(decode(t, tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want %q", err, tt.want)
		}
	}
}

// A Service parent may name the core group "core", as the Gateway API's
// mesh documentation does, or "" (the spec's own spelling).
func TestServiceParentOfGroupCoreIsAService(t *testing.T) {
	o, err := Read(decode(t, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: a, port: 80}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Parents) != 1 || o.Parents[0].Service != lb.NewServiceName("ns", "web") || o.Parents[0].Port != 80 {
		t.Errorf("parents %+v, want ns/web port 80", o.Parents)
	}
}

// What cannot apply at L4 is reported and left out, never half-applied:
// rules with L7 matches or filters, refs of other kinds (invalid: their
// share rejected), Gateway parents (not lbstate's); a catch-all rule
// applies.
func TestReadReportsWhatL4CannotApply(t *testing.T) {
	o := read(t, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs:
  - {name: gw}
  - {group: "", kind: Service, name: web, port: 80}
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: api, port: 80}]
  - matches: [{method: POST}]
    backendRefs: [{name: api, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {name: a, port: 8080, weight: 9}
    - {group: multicluster.x-k8s.io, kind: ServiceImport, name: b, port: 80}
  - backendRefs: [{name: c, port: 80}]`)
	if len(o.Parents) != 1 || o.Parents[0].Ref == nil || o.Parents[0].Ref.Name != "web" || o.Parents[0].Index != 1 ||
		(Parent{Service: o.Parents[0].Service, Port: o.Parents[0].Port, Field: o.Parents[0].Field}) != (Parent{Service: lb.NewServiceName("ns", "web"), Port: 80, Field: "spec.parentRefs[1]"}) {
		t.Errorf("parents %v, want ns/web:80 only", o.Parents)
	}
	if len(o.Backends) != 2 || o.Backends[0].Name != "a" || o.Backends[0].Weight != 9 || o.Backends[0].Port != 8080 || o.Backends[0].Invalid ||
		!o.Backends[1].Invalid || o.Backends[1].Weight != 1 {
		t.Errorf("backends %v, want the catch-all rule's a:8080 weight 9 and the ServiceImport's weight 1, invalid", o.Backends)
	}
	for _, want := range []string{
		"spec.rules[0].matches[0].path: cannot be decided per connection at L4",
		"spec.rules[1].matches[0].method: cannot be decided",
		"spec.rules[2].backendRefs[1]: kind ServiceImport",
		"spec.rules[3]: an earlier rule already takes every connection",
	} {
		if !strings.Contains(strings.Join(o.Problems, "\n"), want) {
			t.Errorf("problems %q lack %q", o.Problems, want)
		}
	}
}

// Every TrafficSplit version lbstate reads gives the same model; matches
// (v1alpha3 on) keep the split from applying.
func TestReadTrafficSplitVersions(t *testing.T) {
	for _, v := range SMIVersions {
		o := read(t, `apiVersion: split.smi-spec.io/`+v+`
kind: TrafficSplit
metadata: {name: s, namespace: ns}
spec: {service: web, backends: [{service: a, weight: 90}, {service: b, weight: 10}]}`)
		if len(o.Parents) != 1 || o.Parents[0].Service != lb.NewServiceName("ns", "web") || len(o.Backends) != 2 || o.Backends[1].Weight != 10 {
			t.Errorf("%s: read %+v", v, o)
		}
	}
	o := read(t, `apiVersion: split.smi-spec.io/v1alpha4
kind: TrafficSplit
metadata: {name: s, namespace: ns}
spec: {service: web, matches: [{kind: HTTPRouteGroup, name: canary-users}], backends: [{service: a, weight: 1}]}`)
	if o.Backends != nil || len(o.Problems) != 1 {
		t.Errorf("a split with matches: backends %v, problems %v", o.Backends, o.Problems)
	}
}

// Two routes on one parent: the older wins, then the first by name; a
// route on one port and one on every port share the rest; the loser is
// reported. Consumer routes and ungranted refs are reported; an
// ungranted ref's share is rejected.
func TestPlanPrecedenceGrantsAndConsumers(t *testing.T) {
	route := func(name, created, parent, extra string) *Object {
		return read(t, `apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: `+name+`, namespace: ns, creationTimestamp: "`+created+`"}
spec:
  parentRefs: [{group: "", kind: Service, `+parent+`}]
  rules: [{backendRefs: [{name: `+name+`, port: 80}`+extra+`]}]`)
	}
	objs := []*Object{
		route("b", "2026-01-01T00:00:00Z", "name: web", ""),
		route("a", "2026-01-02T00:00:00Z", "name: web", ""),
		route("c", "2025-12-31T00:00:00Z", "name: web, port: 443", ""),
		route("f", "2026-01-05T00:00:00Z", "name: web, port: 443", ""),
		route("d", "2026-01-03T00:00:00Z", "name: web, namespace: other", ""),
		route("e", "2026-01-04T00:00:00Z", "name: api", ", {name: x, namespace: other, port: 80}"),
	}
	plan := MakePlan(objs, nil, lb.SourceK8s)
	web := plan.Routes[lb.NewServiceName("ns", "web")]
	if len(web) != 2 || web[0].Name != "TCPRoute ns/b" || web[0].Port != 0 || web[1].Name != "TCPRoute ns/c" || web[1].Port != 443 {
		t.Fatalf("routes on ns/web: %v", web)
	}
	problems := map[string]string{}
	for _, st := range plan.Status {
		problems[st.Name] = strings.Join(st.Problems, "; ")
	}
	for name, want := range map[string]string{
		"a": "parent ns/web: TCPRoute ns/b is older",
		"f": "parent ns/web:443: TCPRoute ns/c is older",
		"d": "service other/web is in another namespace",
		"e": "namespace other: no ReferenceGrant there allows TCPRoute from ns",
	} {
		if !strings.Contains(problems[name], want) {
			t.Errorf("%s: problems %q, want %q", name, problems[name], want)
		}
	}
	// Ungranted, the ref stays with its weight, rejected.
	if api := plan.Routes[lb.NewServiceName("ns", "api")]; len(api) != 1 || len(api[0].Backends) != 2 || api[0].Backends[0].Rejected || !api[0].Backends[1].Rejected {
		t.Fatalf("ungranted: routes on ns/api %v, want the ref to other/x rejected", api)
	}
	grantDoc := decode(t, `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: TCPRoute, namespace: ns}]
  to: [{group: "", kind: Service, name: x}]`)
	grant, err := ReadGrant(grantDoc)
	if err != nil {
		t.Fatal(err)
	}
	plan = MakePlan(objs, []*ReferenceGrant{grant}, lb.SourceK8s)
	if api := plan.Routes[lb.NewServiceName("ns", "api")]; len(api) != 1 || len(api[0].Backends) != 2 || api[0].Backends[1].Rejected {
		t.Fatalf("granted: routes on ns/api %v, want both backends, neither rejected", api)
	}
}

// Read and MakePlan never panic, whatever a manifest says: an object is
// read or refused with an error naming it.
func FuzzRead(f *testing.F) {
	f.Add(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{group: "", kind: Service, name: web, port: 80}]
  rules: [{matches: [{path: {value: /}}], backendRefs: [{name: a, port: 80, weight: 3}, {name: b, namespace: o, port: 80}]}]`)
	f.Add(`apiVersion: split.smi-spec.io/v1alpha3
kind: TrafficSplit
metadata: {name: s}
spec: {service: web, backends: [{service: a, weight: 1}], matches: [{kind: HTTPRouteGroup, name: g}]}`)
	f.Add(`apiVersion: gateway.networking.k8s.io/v1alpha2
kind: GRPCRoute
metadata: {name: g, namespace: ns}
spec:
  parentRefs: [{group: "", kind: Service, name: web}]
  rules: [{matches: [{method: {service: x}}], backendRefs: [{name: a, port: 80}]}, {backendRefs: [{name: b, port: 80}]}]`)
	f.Fuzz(func(t *testing.T, doc string) {
		obj, _, err := decoder.Decode([]byte(doc), nil, nil)
		if err != nil {
			return
		}
		key, ok := KeyOf(obj)
		if !ok || key.Kind == "ReferenceGrant" {
			return
		}
		o, err := Read(obj)
		if err != nil {
			if !strings.HasPrefix(err.Error(), key.String()+": ") {
				t.Fatalf("error %q does not name %s", err, key)
			}
			return
		}
		plan := MakePlan([]*Object{o}, nil, lb.SourceK8s)
		if len(plan.Status) != 1 {
			t.Fatalf("%d statuses for one object", len(plan.Status))
		}
		for parent, rs := range plan.Routes {
			for _, r := range rs {
				if err := r.Validate(parent); err != nil && len(r.Backends) <= lb.MaxRouteBackends {
					t.Fatalf("the plan's route does not validate: %v", err)
				}
			}
		}
	})
}
