package main

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

const explainManifests = `apiVersion: v1
kind: Service
metadata: {name: weighted, namespace: default}
spec: {clusterIP: 10.96.1.1, ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: weighted-1
  labels: {kubernetes.io/service-name: weighted}
  annotations: {lbstate.io/weights: "10.0.0.2=300"}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1]}, {addresses: [10.0.0.2]}]
---
apiVersion: v1
kind: Service
metadata: {name: guarded, namespace: default}
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  clusterIP: 10.96.1.2
  loadBalancerSourceRanges: [198.51.100.0/24]
  sessionAffinity: ClientIP
  ports: [{port: 443}]
status: {loadBalancer: {ingress: [{ip: 192.0.2.9}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: guarded-1
  labels: {kubernetes.io/service-name: guarded}
addressType: IPv4
ports: [{port: 8443}]
endpoints: [{addresses: [10.0.0.5]}, {addresses: [10.0.0.6]}]
`

func explainPipeline(t *testing.T, dir, algorithm string) *pipeline {
	t.Helper()
	p, err := startPipeline(dir, "node-a", "", algorithm, 251, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func explainText(t *testing.T, m *bpf.Maps, fe string, src string) string {
	t.Helper()
	var client *netip.AddrPort
	if src != "" {
		ap := netip.MustParseAddrPort(src)
		client = &ap
	}
	var out bytes.Buffer
	if err := explainFlow(&out, m, lb.MustParseL3n4Addr(fe), client); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// The Maglev position explain reports is the reference hash's slot, and
// the backend is the table's at that slot.
func TestExplainMaglevPosition(t *testing.T) {
	p := explainPipeline(t, "../../examples/demo", "random")
	fe := lb.MustParseL3n4Addr("10.96.0.10:80/TCP")
	master, _, _ := p.maps.Services.Lookup(bpf.NewServiceKey(fe, 0))
	table, ok, _ := p.maps.Maglev.Lookup(master.RevNatID)
	if !ok {
		t.Fatal("no Maglev table for the web service")
	}
	slotRe := regexp.MustCompile(`hashes to slot (\d+) of 251: backend (\d+) `)
	seen := map[uint32]bool{}
	for port := 40000; port < 40060; port++ {
		client := fmt.Sprintf("192.0.2.77:%d", port)
		out := explainText(t, p.maps, fe.String(), client)
		m := slotRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no slot in:\n%s", out)
		}
		slot, _ := strconv.Atoi(m[1])
		id, _ := strconv.Atoi(m[2])
		if want := bpf.MaglevSlot(netip.MustParseAddrPort(client), fe, 251); slot != want {
			t.Fatalf("%s: slot %d, the reference hash says %d", client, slot, want)
		}
		if uint32(id) != table[slot] {
			t.Fatalf("%s: backend %d, the table has %d at slot %d", client, id, table[slot], slot)
		}
		seen[uint32(id)] = true
	}
	if len(seen) < 2 {
		t.Errorf("60 flows all went to one backend: %v", seen)
	}
}

func TestExplainRandomSourceRangesAffinity(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte(explainManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	p := explainPipeline(t, dir, "random")

	// Weights 100 and 300: one slot and three.
	out := explainText(t, p.maps, "10.96.1.1:80/TCP", "")
	for _, want := range []string{"random: a new flow takes a random slot of 4:", "10.0.0.1:8080/TCP (active): 1 of 4 slots (25.0%)", "10.0.0.2:8080/TCP (active): 3 of 4 slots (75.0%)"} {
		if !strings.Contains(out, want) {
			t.Errorf("weighted service: want %q in:\n%s", want, out)
		}
	}

	// Source ranges on the LoadBalancer frontend.
	if out := explainText(t, p.maps, "192.0.2.9:443/TCP", "203.0.113.1:1000"); !strings.Contains(out, "203.0.113.1 is not in any range: DROPPED") {
		t.Errorf("outside the ranges:\n%s", out)
	}
	out = explainText(t, p.maps, "192.0.2.9:443/TCP", "198.51.100.20:1000")
	if !strings.Contains(out, "198.51.100.20 is allowed") || !strings.Contains(out, "is not pinned yet") {
		t.Errorf("inside the ranges, not yet pinned:\n%s", out)
	}

	// The datapath pinned the client: explain follows the pin.
	master, _, _ := p.maps.Services.Lookup(bpf.NewServiceKey(lb.MustParseL3n4Addr("192.0.2.9:443/TCP"), 0))
	slot2, _, _ := bpf.SlotBackend(p.maps.Services, lb.MustParseL3n4Addr("192.0.2.9:443/TCP"), master, 2)
	pin := func(backend, lastUsed uint32) {
		p.maps.Affinity.Update(bpf.AffinityKey{Client: netip.MustParseAddr("198.51.100.20").As16(), RevNatID: master.RevNatID},
			bpf.AffinityValue{BackendID: backend, LastUsed: lastUsed})
	}
	pin(slot2, monotonicSeconds())
	if out := explainText(t, p.maps, "192.0.2.9:443/TCP", "198.51.100.20:1000"); !strings.Contains(out, fmt.Sprintf("is pinned (for 10800s) to backend %d ", slot2)) {
		t.Errorf("pinned client:\n%s", out)
	}
	// As the datapath does: a pin older than the timeout, or to a backend
	// that takes no new flows, is replaced.
	pin(slot2, monotonicSeconds()-10801)
	if out := explainText(t, p.maps, "192.0.2.9:443/TCP", "198.51.100.20:1000"); !strings.Contains(out, "expired") {
		t.Errorf("expired pin:\n%s", out)
	}
	pin(999, monotonicSeconds())
	if out := explainText(t, p.maps, "192.0.2.9:443/TCP", "198.51.100.20:1000"); !strings.Contains(out, "pin to backend 999 is void") {
		t.Errorf("pin to a backend that is gone:\n%s", out)
	}
	// So is a pin to an active backend in none of the frontend's slots
	// that take new flows (another service's, or one its weight, a route
	// or a redirect took out).
	rotation := map[uint32]bool{}
	for slot := 1; slot <= int(master.Count); slot++ {
		id, _, _ := bpf.SlotBackend(p.maps.Services, lb.MustParseL3n4Addr("192.0.2.9:443/TCP"), master, slot)
		rotation[id] = true
	}
	var elsewhere uint32
	p.maps.Backends.Iterate(func(id uint32, b bpf.Backend) bool {
		if !rotation[id] && b.State == uint8(lb.BackendActive) {
			elsewhere = id
			return false
		}
		return true
	})
	if elsewhere == 0 {
		t.Fatal("no active backend outside the frontend's slots to pin to")
	}
	pin(elsewhere, monotonicSeconds())
	if out := explainText(t, p.maps, "192.0.2.9:443/TCP", "198.51.100.20:1000"); !strings.Contains(out, fmt.Sprintf("pin to backend %d is void", elsewhere)) {
		t.Errorf("pin to an active backend outside the frontend's new-flow slots:\n%s", out)
	}
}

func TestExplainGolden(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"explain", "10.96.0.10:80/TCP", "-f", "../../examples/demo", "--src", "192.0.2.77:40000"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	golden(t, "explain-demo.txt", stdout.Bytes())
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"explain", "-f", "../../examples/demo", "10.96.0.99:80/TCP"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "no service entry for 10.96.0.99:80/TCP") {
		t.Errorf("unknown frontend: exit %d, %s", code, stderr.String())
	}
}

const standbyOnlyManifests = `apiVersion: v1
kind: Service
metadata: {name: draining, namespace: default, annotations: {lbstate.io/algorithm: maglev}}
spec: {clusterIP: 10.96.2.1, ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: draining-1
  labels: {kubernetes.io/service-name: draining}
  annotations: {lbstate.io/weight: "0"}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1]}]
---
apiVersion: v1
kind: Service
metadata: {name: v6, namespace: default}
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  ipFamilies: [IPv6]
  clusterIP: fd00::10
  clusterIPs: [fd00::10]
  loadBalancerSourceRanges: [2001:db8::/32]
  ports: [{port: 443}]
status: {loadBalancer: {ingress: [{ip: "2001:db8:ff::9"}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: v6-1
  labels: {kubernetes.io/service-name: v6}
addressType: IPv6
ports: [{port: 8443}]
endpoints: [{addresses: ["fd00::1:5"]}]
`

// Given --src, explain does not ask for it. Once it did, for a Maglev
// frontend whose backends all take no new flows (weight 0).
func TestExplainWithSrcNeverAsksForSrc(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(standbyOnlyManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	p := explainPipeline(t, dir, "random")
	out := explainText(t, p.maps, "10.96.2.1:80/TCP", "192.0.2.1:1234")
	t.Logf("\n%s", out)
	if strings.Contains(out, "give --src") {
		t.Fatalf("explain with --src still asks for --src:\n%s", out)
	}
}
