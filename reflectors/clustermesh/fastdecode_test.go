package clustermesh

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// exportedValues are values as exporters write them: Cilium's spelling
// (webValue), encoding/json's output of ClusterService (ours and
// lbbench's), a service not shared, unnamed ports, both families.
func exportedValues(t testing.TB) map[string]string {
	marshal := func(s ClusterService) string {
		data, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	pc := func(name, proto string, port uint16) PortConfiguration {
		return PortConfiguration{name: {Protocol: proto, Port: port}}
	}
	bench := ClusterService{
		Cluster: "c2", Namespace: "default", Name: "web",
		Frontends: map[string]PortConfiguration{"10.96.0.4": pc("", "TCP", 80)},
		Backends: map[string]PortConfiguration{
			"10.2.0.1": pc("", "TCP", 8080), "10.2.0.2": pc("", "TCP", 8081), "fd00:2::1": pc("", "UDP", 53),
		},
		Labels: map[string]string{}, Selector: map[string]string{}, IncludeExternal: true, Shared: true, ClusterID: 2,
	}
	zoned := bench
	zoned.Backends = map[string]PortConfiguration{"10.2.0.1": {"http": {Protocol: "TCP", Port: 8080}, "metrics": {Protocol: "TCP", Port: 9090}}}
	zoned.Zones = map[string]BackendZone{"10.2.0.1": {Zone: "z1", ForZones: []ForZone{{Name: "z1"}, {Name: "z2"}}}}
	zoned.Hostnames = map[string]string{"10.2.0.1": "web-0"}
	notShared := bench
	notShared.Shared = false
	return map[string]string{
		"Cilium's spelling": webValue, "lbbench's": marshal(bench), "zones and hostnames": marshal(zoned),
		"not shared": marshal(notShared), "indented": strings.ReplaceAll(webValue, ",", ",\n\t "),
	}
}

// The fast decoder takes every value exporters write, and gives what
// the general path gives: otherwise it would be dead code, or wrong.
func TestDecodeFastTakesWhatExportersWrite(t *testing.T) {
	for what, value := range exportedValues(t) {
		name, backends, ok := decodeFast(new(fastDecoder), webKey, []byte(value), "c2", 2)
		if !ok {
			t.Errorf("%s: not taken by the fast path: %s", what, value)
			continue
		}
		wantName, want, err := decodeGeneral(webKey, []byte(value), "c2", 2)
		if err != nil || name != wantName || !equalBackends(backends, want) {
			t.Errorf("%s: fast %s %v, general %s %v (%v)", what, name, describeAll(backends), wantName, describeAll(want), err)
		}
	}
}

// What the fast path gives up on is left to encoding/json, which also
// names what is wrong: each of these would be read otherwise, or not at
// all, by encoding/json.
func TestDecodeFastLeavesTheUnusualToEncodingJSON(t *testing.T) {
	for what, value := range map[string]string{
		"a key in capitals":     strings.Replace(webValue, `"shared"`, `"Shared"`, 1),
		"an unknown key":        strings.Replace(webValue, `"shared"`, `"extra":[1,{"a":null}],"shared"`, 1),
		"a key twice":           strings.Replace(webValue, `"shared":true`, `"shared":false,"shared":true`, 1),
		"an escape":             strings.Replace(webValue, `"web"`, `"w\u0065b"`, 1),
		"a null":                strings.Replace(webValue, `"labels":{}`, `"labels":null`, 1),
		"a port as a float":     strings.Replace(webValue, `"Port":8080`, `"Port":8080.0`, 1),
		"an address twice":      strings.Replace(webValue, `"fd00::1"`, `"10.1.0.1"`, 1),
		"a mapped address too":  strings.Replace(webValue, `"fd00::1"`, `"::ffff:10.1.0.1"`, 1),
		"a port name twice":     strings.Replace(webValue, `"http-alt"`, `"http"`, 1),
		"an invalid port":       strings.Replace(webValue, `"Port":53`, `"Port":0`, 1),
		"another cluster's ID":  strings.Replace(webValue, `"clusterID":2`, `"clusterID":3`, 1),
		"data after the object": webValue + " {}",
		"not JSON":              `{"cluster":`,
	} {
		if _, _, ok := decodeFast(new(fastDecoder), webKey, []byte(value), "c2", 2); ok {
			t.Errorf("%s: taken by the fast path", what)
		}
	}
}

// Whatever the fast path takes, the general path takes too, with the
// same result.
func FuzzDecodeFastAgreesWithDecodeService(f *testing.F) {
	for _, v := range exportedValues(f) {
		f.Add(v)
	}
	f.Add(`{"cluster":"c2","namespace":"default","name":"web","backends":{"::ffff:10.0.0.1":{"a":{"Protocol":"ANY","Port":1},"":{"Protocol":"ANY","Port":1}}},"shared":true,"clusterID":2}`)
	f.Add(`{"cluster":"c2","namespace":"default","name":"web","backends":{"10.0.0.1":{"a":{"Protocol":"tcp","Port":65535}}},"zones":{"10.0.0.1":{"forZones":[]}},"shared":true,"clusterID":2}`)
	f.Fuzz(func(t *testing.T, value string) {
		name, backends, ok := decodeFast(new(fastDecoder), webKey, []byte(value), "c2", 2)
		if !ok {
			return
		}
		wantName, want, err := decodeGeneral(webKey, []byte(value), "c2", 2)
		if err != nil {
			t.Fatalf("the fast path took what the general one refuses (%v): %s", err, value)
		}
		if name != wantName || !equalBackends(backends, want) {
			t.Fatalf("fast %s %v, general %s %v: %s", name, describeAll(backends), wantName, describeAll(want), value)
		}
	})
}

func equalBackends(a, b []lb.BackendParams) bool {
	return slices.EqualFunc(a, b, func(x, y lb.BackendParams) bool { return x.Equal(&y) })
}

func describeAll(bs []lb.BackendParams) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = describe(b)
	}
	return out
}

// A remote service of ten backends, as lbbench -clusters publishes it.
func BenchmarkDecodeRemoteService(b *testing.B) {
	s := ClusterService{Cluster: "c2", Namespace: "default", Name: "web", Frontends: map[string]PortConfiguration{},
		Backends: map[string]PortConfiguration{}, Labels: map[string]string{}, Selector: map[string]string{},
		IncludeExternal: true, Shared: true, ClusterID: 2}
	for j := range 10 {
		s.Backends["10.2.0."+string(rune('0'+j))] = PortConfiguration{"": {Protocol: "TCP", Port: 8080}}
	}
	value, _ := json.Marshal(&s)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		var d fastDecoder
		for b.Loop() {
			if _, _, ok := decodeFast(&d, webKey, value, "c2", 2); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := decodeGeneral(webKey, value, "c2", 2); err != nil {
				b.Fatal(err)
			}
		}
	})
}
