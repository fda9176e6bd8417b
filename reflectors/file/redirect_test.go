package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

const kubeDNSYAML = `apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: kube-dns-1, namespace: kube-system, labels: {kubernetes.io/service-name: kube-dns}}
addressType: IPv4
ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
endpoints: [{addresses: [10.0.0.1]}]
`

const localDNSPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: $NAME, namespace: kube-system, labels: {k8s-app: node-local-dns}}
spec:
  nodeName: $NODE
  containers: [{name: dns, ports: [{name: dns, containerPort: 5353, protocol: UDP}, {name: dns-tcp, containerPort: 5353, protocol: TCP}]}]
status:
  podIPs: [{ip: $IP}]
  conditions: [{type: Ready, status: "$READY"}]
`

const redirectDNSYAML = `apiVersion: cilium.io/v2
kind: CiliumLocalRedirectPolicy
metadata: {name: nodelocaldns, namespace: kube-system}
spec:
  redirectFrontend:
    serviceMatcher:
      serviceName: kube-dns
      namespace: kube-system
  redirectBackend:
    localEndpointSelector: {matchLabels: {k8s-app: node-local-dns}}
    toPorts: [{port: "53", name: dns, protocol: UDP}, {port: "53", name: dns-tcp, protocol: TCP}]
---
apiVersion: cilium.io/v2
kind: CiliumLocalRedirectPolicy
metadata: {name: metadata, namespace: kube-system}
spec:
  redirectFrontend:
    addressMatcher: {ip: 169.254.169.254, toPorts: [{port: "80", protocol: TCP}]}
  redirectBackend:
    localEndpointSelector: {matchLabels: {k8s-app: node-local-dns}}
    toPorts: [{port: "8080", protocol: TCP}]
`

func localDNSPod(name, node, ip, ready string) string {
	return strings.NewReplacer("$NAME", name, "$NODE", node, "$IP", ip, "$READY", ready).Replace(localDNSPodYAML)
}

// Local redirect policies from the manifests directory send kube-dns's
// ClusterIP and a metadata address to the ready pods on this node; when
// the only pod goes unready the frontends go where they would without the
// policies, and removing the policies restores the tables exactly.
func TestRedirectPoliciesFromManifestsRedirectAndRestore(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "dns.yaml"), kubeDNSYAML)
	write(t, filepath.Join(dir, "pods.yaml"), localDNSPod("local-a", "node-1", "10.0.1.1", "True")+"---\n"+
		localDNSPod("elsewhere", "node-2", "10.0.2.1", "True"))
	s, w, db, _, _ := startSource(t, dir, slog.New(slog.DiscardHandler))
	original := []string{"10.96.0.10:53/TCP -> 10.0.0.1:53/TCP", "10.96.0.10:53/UDP -> 10.0.0.1:53/UDP"}
	frontends(t, db, w, original)

	write(t, filepath.Join(dir, "lrp.yaml"), redirectDNSYAML)
	frontends(t, db, w, []string{
		"10.96.0.10:53/TCP -> 10.0.1.1:5353/TCP", "10.96.0.10:53/UDP -> 10.0.1.1:5353/UDP",
		"169.254.169.254:80/TCP -> 10.0.1.1:8080/TCP",
	})

	write(t, filepath.Join(dir, "pods.yaml"), localDNSPod("local-a", "node-1", "10.0.1.1", "False"))
	frontends(t, db, w, original) // no pod takes new flows: as without the policies

	// An invalid edit keeps the last valid version in force.
	write(t, filepath.Join(dir, "pods.yaml"), localDNSPod("local-a", "node-1", "10.0.1.1", "True"))
	errs := s.Errors()
	write(t, filepath.Join(dir, "lrp.yaml"), strings.Replace(redirectDNSYAML, "169.254.169.254", "169.254.169.300", 1))
	frontends(t, db, w, []string{
		"10.96.0.10:53/TCP -> 10.0.1.1:5353/TCP", "10.96.0.10:53/UDP -> 10.0.1.1:5353/UDP",
		"169.254.169.254:80/TCP -> 10.0.1.1:8080/TCP",
	})
	if s.Errors() == errs {
		t.Error("the invalid policy was not reported")
	}

	if err := os.Remove(filepath.Join(dir, "lrp.yaml")); err != nil {
		t.Fatal(err)
	}
	frontends(t, db, w, original)
	for svc := range w.Services().All(db.ReadTxn()) {
		if len(svc.Redirects()) > 0 || strings.HasSuffix(svc.Name.Name(), ":lrp") {
			t.Errorf("left behind after the policies went: %s redirects %v", svc.Name, svc.Redirects())
		}
	}
}

// addressPolicy is an addressMatcher policy on ip:53/UDP to the local DNS
// pods, created at created.
func addressPolicy(name, ip, created string) string {
	return strings.NewReplacer("$NAME", name, "$IP", ip, "$CREATED", created).Replace(`apiVersion: cilium.io/v2
kind: CiliumLocalRedirectPolicy
metadata: {name: $NAME, namespace: kube-system, creationTimestamp: "$CREATED"}
spec:
  redirectFrontend:
    addressMatcher: {ip: $IP, toPorts: [{port: "53", protocol: UDP}]}
  redirectBackend:
    localEndpointSelector: {matchLabels: {k8s-app: node-local-dns}}
    toPorts: [{port: "5353", protocol: UDP}]
`)
}

// An addressMatcher on a Service's ClusterIP does not take it over, even
// when the policy is older than the Service; the policy gets the address
// once the Service goes. Of two policies on one address, the older has it.
func TestAddressPolicyYieldsToServiceAndOlderPolicy(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "dns.yaml"), strings.Replace(kubeDNSYAML,
		"metadata: {name: kube-dns, namespace: kube-system}", `metadata: {name: kube-dns, namespace: kube-system, creationTimestamp: "2025-01-01T00:00:00Z"}`, 1))
	write(t, filepath.Join(dir, "pods.yaml"), localDNSPod("local-a", "node-1", "10.0.1.1", "True"))
	write(t, filepath.Join(dir, "lrp.yaml"), addressPolicy("on-clusterip", "10.96.0.10", "2020-01-01T00:00:00Z")+"---\n"+
		addressPolicy("newer", "169.254.20.10", "2024-01-01T00:00:00Z")+"---\n"+
		addressPolicy("older", "169.254.20.10", "2023-01-01T00:00:00Z"))
	_, w, db, _, _ := startSource(t, dir, slog.New(slog.DiscardHandler))
	frontends(t, db, w, []string{
		"10.96.0.10:53/TCP -> 10.0.0.1:53/TCP", "10.96.0.10:53/UDP -> 10.0.0.1:53/UDP",
		"169.254.20.10:53/UDP -> 10.0.1.1:5353/UDP",
	})
	owner := func(addr string) string {
		fe, _, _ := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr(addr)))
		return fe.Service.String()
	}
	if got := owner("169.254.20.10:53/UDP"); got != "kube-system/older:lrp" {
		t.Errorf("169.254.20.10:53/UDP is %s's, want the older policy's", got)
	}
	if got := owner("10.96.0.10:53/UDP"); got != "kube-system/kube-dns" {
		t.Errorf("the ClusterIP is %s's, want kube-dns's", got)
	}

	write(t, filepath.Join(dir, "dns.yaml"), "")
	frontends(t, db, w, []string{"10.96.0.10:53/UDP -> 10.0.1.1:5353/UDP", "169.254.20.10:53/UDP -> 10.0.1.1:5353/UDP"})
}
