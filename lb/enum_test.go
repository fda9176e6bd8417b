package lb_test

import (
	"encoding"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// textEnum is a pointer to one of the package's enums.
type textEnum[T any] interface {
	*T
	encoding.TextMarshaler
	encoding.TextUnmarshaler
	fmt.Stringer
}

// checkEnum tests that each of names decodes (in any case) to the value at
// the same index of values and encodes back to the name, and that unknown
// names fail with an error that names the kind and lists every choice.
func checkEnum[T comparable, PT textEnum[T]](t *testing.T, kind string, names []string, values []T, bad []string) {
	t.Helper()
	if len(names) != len(values) {
		t.Fatalf("%d names for %d values", len(names), len(values))
	}
	seen := map[T]string{}
	for i, name := range names {
		for _, in := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			var v T
			if err := PT(&v).UnmarshalText([]byte(in)); err != nil {
				t.Errorf("UnmarshalText(%q): %v", in, err)
				continue
			}
			if v != values[i] {
				t.Errorf("UnmarshalText(%q) = %v, want %v", in, v, values[i])
			}
			text, err := PT(&v).MarshalText()
			if err != nil || string(text) != name {
				t.Errorf("MarshalText(%v) = %q, %v; want %q", v, text, err, name)
			}
			if s := PT(&v).String(); s != name {
				t.Errorf("String() = %q, want %q", s, name)
			}
		}
		if prev, dup := seen[values[i]]; dup {
			t.Errorf("%q and %q decode to the same value", prev, name)
		}
		seen[values[i]] = name
	}
	for _, in := range bad {
		var v T
		err := PT(&v).UnmarshalText([]byte(in))
		wantErr(t, err, "unknown "+kind, fmt.Sprintf("%q", in), strings.Join(names, ", "))
	}
}

func TestSVCType(t *testing.T) {
	checkEnum(t, "service type",
		[]string{"ClusterIP", "NodePort", "LoadBalancer", "ExternalIP", "HostPort", "LocalRedirect"},
		[]lb.SVCType{lb.SVCTypeClusterIP, lb.SVCTypeNodePort, lb.SVCTypeLoadBalancer,
			lb.SVCTypeExternalIP, lb.SVCTypeHostPort, lb.SVCTypeLocalRedirect},
		[]string{"", "Cluster IP", "ClusterIPs", "0", "1"})

	if got := lb.SVCType(0).String(); got != "service type(0)" {
		t.Errorf("SVCType(0).String() = %q", got)
	}
	if got := lb.SVCType(42).String(); got != "service type(42)" {
		t.Errorf("SVCType(42).String() = %q", got)
	}
	external := map[lb.SVCType]bool{
		lb.SVCTypeNodePort: true, lb.SVCTypeLoadBalancer: true,
		lb.SVCTypeExternalIP: true, lb.SVCTypeHostPort: true,
	}
	for v := lb.SVCType(0); v < 10; v++ {
		if v.IsExternal() != external[v] {
			t.Errorf("%v.IsExternal() = %v", v, v.IsExternal())
		}
	}
}

func TestTrafficPolicy(t *testing.T) {
	checkEnum(t, "traffic policy",
		[]string{"Cluster", "Local"},
		[]lb.TrafficPolicy{lb.TrafficPolicyCluster, lb.TrafficPolicyLocal},
		[]string{"", "Global", "Locale"})
	if got := lb.TrafficPolicy(2).String(); got != "traffic policy(2)" {
		t.Errorf("TrafficPolicy(2).String() = %q", got)
	}
}

func TestTrafficDistribution(t *testing.T) {
	checkEnum(t, "traffic distribution",
		[]string{"Default", "PreferSameZone", "PreferSameNode"},
		[]lb.TrafficDistribution{lb.TrafficDistributionDefault,
			lb.TrafficDistributionPreferSameZone, lb.TrafficDistributionPreferSameNode},
		[]string{"", "PreferZone", "PreferClosest"})

	for _, in := range []string{"PreferClose", "preferclose", "PREFERCLOSE"} {
		var d lb.TrafficDistribution
		if err := d.UnmarshalText([]byte(in)); err != nil || d != lb.TrafficDistributionPreferSameZone {
			t.Errorf("UnmarshalText(%q) = %v, %v; want PreferSameZone", in, d, err)
		}
		if text, _ := d.MarshalText(); string(text) != "PreferSameZone" {
			t.Errorf("PreferClose encodes as %q, want PreferSameZone", text)
		}
	}
}

func TestBackendState(t *testing.T) {
	checkEnum(t, "backend state",
		[]string{"active", "terminating", "quarantined", "maintenance", "not-ready"},
		[]lb.BackendState{lb.BackendActive, lb.BackendTerminating, lb.BackendQuarantined, lb.BackendMaintenance, lb.BackendNotReady},
		[]string{"", "ready", "terminated"})
}

func TestAlgorithm(t *testing.T) {
	checkEnum(t, "algorithm",
		[]string{"default", "random", "maglev"},
		[]lb.Algorithm{lb.AlgorithmDefault, lb.AlgorithmRandom, lb.AlgorithmMaglev},
		[]string{"", "roundrobin"})
}

func TestSource(t *testing.T) {
	names := []string{"api", "file", "k8s", "kvstore", "redirect"}
	values := []lb.Source{lb.SourceAPI, lb.SourceFile, lb.SourceK8s, lb.SourceKVStore, lb.SourceRedirect}
	checkEnum(t, "source", names, values, []string{"", "kube", "etcd"})

	for i, name := range names {
		got, err := lb.ParseSource(name)
		if err != nil || got != values[i] {
			t.Errorf("ParseSource(%q) = %v, %v; want %v", name, got, err, values[i])
		}
		if !got.Valid() {
			t.Errorf("%v.Valid() = false", got)
		}
	}
	_, err := lb.ParseSource("kube")
	wantErr(t, err, `unknown source "kube"`, "api, file, k8s, kvstore, redirect")

	for _, s := range []lb.Source{0, 6, 255} {
		if s.Valid() {
			t.Errorf("Source(%d).Valid() = true", s)
		}
	}
	if got := lb.Source(0).String(); got != "source(0)" {
		t.Errorf("Source(0).String() = %q", got)
	}
}

func TestSourcePriority(t *testing.T) {
	order := []lb.Source{lb.SourceAPI, lb.SourceFile, lb.SourceK8s, lb.SourceKVStore, lb.SourceRedirect}
	// Other tests register sources of their own: keep the built-ins.
	builtIn := slices.DeleteFunc(lb.Sources(), func(s lb.Source) bool { return !slices.Contains(order, s) })
	if len(builtIn) != len(order) {
		t.Fatalf("Sources = %v, want %v", builtIn, order)
	}
	for i := range order {
		if builtIn[i] != order[i] {
			t.Errorf("Sources[%d] = %v, want %v", i, builtIn[i], order[i])
		}
		for j := range order {
			if got, want := order[i].Outranks(order[j]), i < j; got != want {
				t.Errorf("%v.Outranks(%v) = %v, want %v", order[i], order[j], got, want)
			}
		}
	}
}
