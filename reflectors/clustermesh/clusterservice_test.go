package clustermesh

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

const webKey = ServicesPrefix + "c2/default/web"

// webValue is a dual-stack, multi-port service as a Cilium exporter writes
// it: 10.1.0.1 serves "http" and "http-alt" on one port.
const webValue = `{"cluster":"c2","namespace":"default","name":"web",
 "frontends":{"10.96.0.10":{"http":{"Protocol":"TCP","Port":80}}},
 "backends":{
  "10.1.0.1":{"http":{"Protocol":"TCP","Port":8080},"http-alt":{"Protocol":"TCP","Port":8080},"dns":{"Protocol":"UDP","Port":53}},
  "fd00::1":{"http":{"Protocol":"TCP","Port":8080}}},
 "zones":{"10.1.0.1":{"zone":"z1","forZones":[{"name":"z1"}]}},
 "labels":{},"selector":{"app":"web"},"includeExternal":true,"shared":true,"clusterID":2}`

func TestDecodeServiceRejectsBadValuesNamingTheKey(t *testing.T) {
	tests := []struct {
		name, key, value, want string
	}{
		{"not JSON", webKey, `{"cluster":`, "unexpected end of JSON input"},
		{"data after the value", webKey, webValue + `{}`, "invalid character"},
		{"key of another cluster", ServicesPrefix + "c3/default/web", webValue, "value names c2/default/web"},
		{"key of another name", ServicesPrefix + "c2/default/api", webValue, "value names c2/default/web"},
		{"unknown protocol", webKey, strings.Replace(webValue, `"UDP"`, `"TPC"`, 1), `backends[10.1.0.1][dns]: Protocol: unknown protocol "TPC"`},
		{"cluster ID zero", webKey, strings.Replace(webValue, `"clusterID":2`, `"clusterID":0`, 1), "clusterID: 0 out of range"},
		{"cluster ID too large", webKey, strings.Replace(webValue, `"clusterID":2`, `"clusterID":512`, 1), "clusterID: 512 out of range"},
		{"bad backend address", webKey, strings.Replace(webValue, `"fd00::1"`, `"fd00::zz"`, 1), "backends[fd00::zz]"},
		{"zoned IPv6 address", webKey, strings.Replace(webValue, `"fd00::1"`, `"fe80::1%eth0"`, 1), "IPv6 zones"},
		{"port zero", webKey, strings.Replace(webValue, `"Port":53`, `"Port":0`, 1), "[dns]: Port: 0"},
		{"key too short", ServicesPrefix + "c2/web", webValue, "want " + ServicesPrefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeService(tt.key, []byte(tt.value))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("error %v: want one naming %q and containing %q", err, tt.key, tt.want)
			}
		})
	}
}

func TestLocalBackendsGroupPortNamesPerAddressAndCarryTheClusterID(t *testing.T) {
	s, err := DecodeService(webKey, []byte(webValue))
	if err != nil {
		t.Fatal(err)
	}
	got := s.LocalBackends()
	want := []string{
		"10.1.0.1:53/UDP [dns] cluster 2 zone z1 [z1]",
		"10.1.0.1:8080/TCP [http http-alt] cluster 2 zone z1 [z1]",
		"[fd00::1]:8080/TCP [http] cluster 2 zone  []",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d backends %v, want %v", len(got), got, want)
	}
	for i, b := range got {
		if s := describe(b); s != want[i] {
			t.Errorf("backend %d: got %q, want %q", i, s, want[i])
		}
		if err := b.Validate(); err != nil || b.Weight != lb.DefaultBackendWeight {
			t.Errorf("backend %d: %v, weight %d", i, err, b.Weight)
		}
	}
}

func describe(b lb.BackendParams) string {
	return fmt.Sprintf("%s %v cluster %d zone %s %v", b.Address, b.PortNames(), b.ClusterID, b.Zone, b.ForZones())
}

func TestLocalBackendsOfAServiceNotSharedAreNone(t *testing.T) {
	s, err := DecodeService(webKey, []byte(strings.Replace(webValue, `"shared":true`, `"shared":false`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.LocalBackends(); len(got) != 0 {
		t.Fatalf("a service not shared offered %v", got)
	}
}

func TestUnnamedPortServesEveryFrontend(t *testing.T) {
	v := strings.Replace(webValue, `"fd00::1":{"http"`, `"fd00::1":{""`, 1)
	s, err := DecodeService(webKey, []byte(v))
	if err != nil {
		t.Fatal(err)
	}
	b := s.LocalBackends()[2]
	if b.PortNames() != nil || !b.MatchesPort("anything", lb.ProtoTCP) {
		t.Fatalf("unnamed port gave %s", describe(b))
	}
}

func TestSyncedKeyIsCiliums(t *testing.T) {
	if got, want := SyncedKey("c2"), "cilium/synced/c2/cilium/state/services/v1"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// FuzzDecodeService: whatever etcd holds, decoding never panics, and what
// it accepts converts into backends the Writer accepts.
func FuzzDecodeService(f *testing.F) {
	f.Add(webKey, []byte(webValue))
	f.Add(webKey, []byte(`{"cluster":"c2","namespace":"default","name":"web","backends":{"::ffff:10.0.0.1":{"a":{"Protocol":"ANY","Port":1}}},"shared":true,"clusterID":511}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		s, err := DecodeService(key, value)
		if err != nil {
			return
		}
		for _, b := range s.LocalBackends() {
			if b.ClusterID != s.ClusterID {
				t.Fatalf("%s: cluster ID %d", describe(b), b.ClusterID)
			}
			if err := b.Validate(); err != nil && !strings.Contains(err.Error(), "address:") {
				t.Fatalf("%s: %v", describe(b), err)
			}
		}
	})
}
