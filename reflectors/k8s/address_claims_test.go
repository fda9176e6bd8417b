package k8s

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
)

func claimStrings(fes []lb.FrontendParams) []string {
	out := make([]string, len(fes))
	for i, f := range fes {
		out[i] = f.Address.String() + " " + f.Type.String() + " " + f.Claim.String()
	}
	slices.Sort(out)
	return out
}

// Each frontend says how it was claimed: addresses named for the Service
// explicitly, NodePorts as expansions onto the node's addresses, reserved
// inside the node-port range; and the Service's creation time comes
// along. (Without them the Writer decided contested addresses by the
// services' names.)
func TestServiceFrontendsSayHowTheyClaimTheirAddress(t *testing.T) {
	svc := decodeService(t, `
metadata: {name: web, namespace: default, creationTimestamp: "2024-05-01T12:00:00Z"}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.1
  externalIPs: [198.51.100.7]
  externalTrafficPolicy: Local
  ports:
  - {name: in-range, port: 80, nodePort: 30080}
  - {name: custom, port: 443, nodePort: 8443}
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}]
`)
	node := lb.Node{Name: "n1", Addresses: testNode.Addresses[:1]}
	for _, tc := range []struct {
		name  string
		opts  ServiceOptions
		port  string
		claim lb.Claim
	}{
		{"default range", ServiceOptions{Node: node}, ":30080/", lb.ClaimReservedNodePort},
		{"default range", ServiceOptions{Node: node}, ":8443/", lb.ClaimNodeAddress},
		{"custom range", ServiceOptions{Node: node, NodePortRange: PortRange{8000, 9000}}, ":30080/", lb.ClaimNodeAddress},
		{"custom range", ServiceOptions{Node: node, NodePortRange: PortRange{8000, 9000}}, ":8443/", lb.ClaimReservedNodePort},
	} {
		p, ok, unknown, err := ConvertService(svc, tc.opts)
		if err != nil || !ok || len(unknown) > 0 {
			t.Fatal(ok, unknown, err)
		}
		if !p.Created.Equal(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)) {
			t.Errorf("created %s", p.Created)
		}
		nodePorts := 0
		for _, fe := range p.Frontends {
			want := lb.ClaimExplicit
			if fe.Type == lb.SVCTypeNodePort {
				if !strings.Contains(fe.Address.String(), tc.port) {
					continue
				}
				want = tc.claim
				nodePorts++
			}
			if fe.Claim != want {
				t.Errorf("%s: %s %s claims %s, want %s", tc.name, fe.Address, fe.Type, fe.Claim, want)
			}
		}
		if nodePorts != 4 { // the node's address and 0.0.0.0, each with its internal twin
			t.Errorf("%s: %d NodePort frontends on %s: %q", tc.name, nodePorts, tc.port, claimStrings(p.Frontends))
		}
	}
}

// A host port is on the node's addresses only because the node has them,
// unless it names its hostIP.
func TestHostPortsClaimNodeAddressesUnlessTheyNameTheirIP(t *testing.T) {
	created := metav1.NewTime(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "svclb", Namespace: "kube-system", CreationTimestamp: created},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{ContainerPort: 80, HostPort: 80},
			{ContainerPort: 443, HostPort: 443, HostIP: "192.168.1.10"},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}},
	}
	params, _, ok, err := ConvertPod(pod, lb.Node{Name: "n1", Addresses: testNode.Addresses[:1]})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	want := []string{
		"0.0.0.0:80/TCP HostPort node-address",
		"192.168.1.10:443/TCP HostPort explicit",
		"192.168.1.10:80/TCP HostPort node-address",
	}
	if got := claimStrings(params.Frontends); !slices.Equal(got, want) {
		t.Errorf("frontends\n  got  %q\n  want %q", got, want)
	}
	if !params.Created.Equal(created.Time) {
		t.Errorf("created %s, want the pod's %s", params.Created, created)
	}
}

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]PortRange{
		"30000-32767": {30000, 32767}, " 8000 - 9000 ": {8000, 9000}, "80-80": {80, 80},
	} {
		if got, err := ParsePortRange(in); err != nil || got != want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"30000":       "want FIRST-LAST",
		"0-100":       `"0" is not a port`,
		"1-70000":     `"70000" is not a port`,
		"32767-30000": "32767 is after 30000",
	} {
		if _, err := ParsePortRange(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePortRange(%q): error %v, want one containing %q", in, err, want)
		}
	}
	cfg := DefaultConfig
	cfg, cfg.K8sNodePortRange = cfg.WithNode("n1"), "30000"
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "--k8s-node-port-range: ") {
		t.Errorf("a bad --k8s-node-port-range: %v", err)
	}
}
