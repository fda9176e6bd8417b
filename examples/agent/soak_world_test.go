package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/reflectors/clustermesh"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
)

// soakWorld is everything the soak agent reads: a manifests directory,
// a clustermesh config directory with the remote clusters in one real
// etcd, the export config, the health endpoints, and beside each a FIFO
// and a link to /dev/zero that the agent must refuse without blocking or
// reading them.
type soakWorld struct {
	dir                 string // holds the others
	manifests, meshDir  string
	export              string // the --clustermesh-export config
	hostileFiles        []string
	etcd                *embedetcd.Server
	kv                  *clientv3.Client
	hostile             map[endpointKind][]*endpoint
	checked             []*endpoint // the good service's backends
	churn               map[int]int // churn service → its backends
	remote              string      // the remote cluster in the mesh now
	remoteID, remoteGen int
}

const (
	soakNS          = "soak"
	soakCluster     = "local"
	hostilePerKind  = 40
	checkedBackends = 4
	churnServices   = 8
	webVIP          = "10.96.2.1:80/TCP"
	checkedVIP      = "10.96.3.100:80/TCP"
	// The checked service's probes: a backend that fails is tripped
	// after 3 × 200ms (0.5-0.6s measured; 1-5s under -race on a
	// loaded machine), bounded by checkedTripBound; hostile probes
	// hold their slots 10s each, and probes queued behind them
	// without a share of the slots took 25-50s.
	checkedInterval = 200 * time.Millisecond
)

// checkedTripBound bounds how long the checked service's failing backend
// takes to trip.
func checkedTripBound() time.Duration {
	if raceEnabled {
		return 15 * time.Second
	}
	return 5 * time.Second
}

func newSoakWorld(t *testing.T) *soakWorld {
	t.Helper()
	w := &soakWorld{dir: t.TempDir(), hostile: map[endpointKind][]*endpoint{}, churn: map[int]int{}}
	w.manifests, w.meshDir = filepath.Join(w.dir, "manifests"), filepath.Join(w.dir, "clustermesh")
	for _, d := range []string{w.manifests, w.meshDir, filepath.Join(w.dir, "tls"), filepath.Join(w.dir, "export")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	// A FIFO and a link to /dev/zero in every directory the agent reads,
	// named as what it reads there; the TLS ones are named by configs.
	for _, d := range []struct{ dir, fifo, zero string }{
		{w.manifests, "fifo.yaml", "zero.yaml"},
		{w.meshDir, "fifo-cluster", "zero-cluster"},
		{filepath.Join(w.dir, "tls"), "ca.crt", "client.key"},
		{filepath.Join(w.dir, "export"), "fifo.yaml", "zero.yaml"},
	} {
		w.hostileFiles = append(w.hostileFiles, mkfifo(t, filepath.Join(d.dir, d.fifo)), zeroLink(t, filepath.Join(d.dir, d.zero)))
	}

	srv, err := embedetcd.Start(filepath.Join(w.dir, "etcd"), nil)
	must(t, err)
	t.Cleanup(srv.Stop)
	w.etcd = srv
	w.kv, err = clientv3.New(srv.ClientConfig())
	must(t, err)
	t.Cleanup(func() { w.kv.Close() })
	w.export = filepath.Join(w.dir, "export", "etcd.yaml")
	must(t, srv.WriteClientConfig(w.export, nil))
	// Cluster configs naming a FIFO and /dev/zero as their TLS files.
	tls := filepath.Join(w.dir, "tls")
	write(t, filepath.Join(w.meshDir, "badca-cluster"), fmt.Sprintf("endpoints:\n- %s\ntrusted-ca-file: %s\n", srv.Endpoint(), filepath.Join(tls, "ca.crt")))
	write(t, filepath.Join(w.meshDir, "badkey-cluster"), fmt.Sprintf("endpoints:\n- %s\ncert-file: %s\nkey-file: %s\n",
		srv.Endpoint(), filepath.Join(tls, "client.key"), filepath.Join(tls, "client.key")))

	for _, k := range hostileKinds {
		for range hostilePerKind {
			w.hostile[k] = append(w.hostile[k], startEndpoint(t, k))
		}
	}
	for range checkedBackends {
		w.checked = append(w.checked, startEndpoint(t, good))
	}
	write(t, filepath.Join(w.manifests, "health.yaml"), w.healthYAML(false))
	write(t, filepath.Join(w.manifests, "web.yaml"), webYAML)
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	must(t, syscall.Mkfifo(path, 0o644))
	return path
}

func zeroLink(t *testing.T, path string) string {
	t.Helper()
	must(t, os.Symlink("/dev/zero", path))
	return path
}

// write writes a file whole and renames it into place (hidden names are
// skipped by both directory followers), so that no reader sees half.
func write(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	must(t, os.WriteFile(tmp, []byte(content), 0o644))
	must(t, os.Rename(tmp, path))
}

// webYAML is the global service the remote clusters add backends to.
const webYAML = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: soak, annotations: {service.cilium.io/global: "true"}}
spec: {clusterIP: 10.96.2.1, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: soak, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.1.200.1]}, {addresses: [10.1.200.2]}]
`

// serviceYAML is a ClusterIP service on port 80 with annotations, and an
// EndpointSlice per backend (each its own port).
func serviceYAML(b *strings.Builder, name, clusterIP string, annotations map[string]string, backends []string) {
	fmt.Fprintf(b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: %s\n  annotations:\n", name, soakNS)
	for k, v := range annotations {
		fmt.Fprintf(b, "    %s: %q\n", k, v)
	}
	if len(annotations) == 0 {
		b.WriteString("    {}\n")
	}
	fmt.Fprintf(b, "spec: {clusterIP: %s, ports: [{name: http, port: 80}]}\n---\n", clusterIP)
	for i, be := range backends {
		ip, port, _ := strings.Cut(be, ":")
		fmt.Fprintf(b, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s-%d, namespace: %s, labels: {kubernetes.io/service-name: %s}}\n"+
			"addressType: IPv4\nports: [{name: http, port: %s, protocol: TCP}]\nendpoints: [{addresses: [%s]}]\n---\n", name, i, soakNS, name, port, ip)
	}
}

// healthYAML declares the checked service and, with hostile, a service
// per hostile kind, all probed by HTTP.
func (w *soakWorld) healthYAML(hostile bool) string {
	var b strings.Builder
	for i, k := range hostileKinds {
		if !hostile {
			break
		}
		serviceYAML(&b, "hostile-"+string(k), fmt.Sprintf("10.96.3.%d", i+1), map[string]string{
			"lbstate.io/health-check": "http", "lbstate.io/health-check-path": "/healthz",
			"lbstate.io/health-check-interval": "1s", "lbstate.io/health-check-timeout": "10s",
		}, addrs(w.hostile[k]))
	}
	serviceYAML(&b, "checked", "10.96.3.100", map[string]string{
		"lbstate.io/health-check": "http", "lbstate.io/health-check-path": "/healthz",
		"lbstate.io/health-check-interval": checkedInterval.String(), "lbstate.io/health-check-timeout": "1s",
	}, addrs(w.checked))
	return b.String()
}

func addrs(es []*endpoint) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.addr.String())
	}
	return out
}

// churnVIP is the frontend of churn service i.
func churnVIP(i int) string { return fmt.Sprintf("10.96.4.%d:80/TCP", i+1) }

// churnBackend is backend j of churn service i (not on loopback: never
// probed, as --health-networks says).
func churnBackend(i, j int) string { return fmt.Sprintf("10.1.%d.%d:8080", i, j+1) }

// changeManifests redeclares the churn services at random (some gone,
// the others with 1-6 backends), and leaves a new FIFO among them.
func (w *soakWorld) changeManifests(t *testing.T, r *rand.Rand, round int) {
	t.Helper()
	clear(w.churn)
	var b strings.Builder
	for i := range churnServices {
		if r.IntN(4) == 0 {
			continue
		}
		n := 1 + r.IntN(6)
		w.churn[i] = n
		var bes []string
		for j := range n {
			bes = append(bes, churnBackend(i, j))
		}
		serviceYAML(&b, fmt.Sprintf("churn-%d", i), strings.TrimSuffix(churnVIP(i), ":80/TCP"), nil, bes)
	}
	write(t, filepath.Join(w.manifests, "churn.yaml"), b.String())
	mkfifo(t, filepath.Join(w.manifests, fmt.Sprintf("fifo-%d.yaml", round)))
}

// changeRemote puts a new remote cluster in the mesh, with two backends
// for soak/web, and takes the previous one out: its config file is
// written once its keys are in etcd, as a remote's exporter and a
// mounted Secret would have it.
func (w *soakWorld) changeRemote(t *testing.T, round int) {
	t.Helper()
	prev := w.remote
	w.remoteGen++
	w.remote, w.remoteID = fmt.Sprintf("remote-%d", round), 1+w.remoteGen%200+1
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, _ := json.Marshal(clustermesh.ClusterConfig{ID: uint32(w.remoteID),
		Capabilities: clustermesh.ClusterCapabilities{SyncedCanaries: true, MaxConnectedClusters: 255}})
	svc, _ := json.Marshal(clustermesh.ClusterService{Cluster: w.remote, Namespace: soakNS, Name: "web",
		Backends: map[string]clustermesh.PortConfiguration{
			w.remoteBackend(0): {"http": {Protocol: "TCP", Port: 8080}},
			w.remoteBackend(1): {"http": {Protocol: "TCP", Port: 8080}},
		},
		Labels: map[string]string{}, Selector: map[string]string{}, IncludeExternal: true, Shared: true, ClusterID: uint32(w.remoteID)})
	for k, v := range map[string]string{
		clustermesh.ClusterConfigKey(w.remote):          string(cc),
		clustermesh.ServiceKey(w.remote, soakNS, "web"): string(svc),
		clustermesh.SyncedKey(w.remote):                 "synced",
	} {
		if _, err := w.kv.Put(ctx, k, v); err != nil {
			t.Fatalf("etcd: put %s: %v", k, err)
		}
	}
	must(t, w.etcd.WriteClientConfig(filepath.Join(w.meshDir, w.remote), nil))
	if prev != "" {
		must(t, os.Remove(filepath.Join(w.meshDir, prev)))
	}
	// The bad TLS configs written again: read again, refused again.
	for _, name := range []string{"badca-cluster", "badkey-cluster"} {
		data, err := os.ReadFile(filepath.Join(w.meshDir, name))
		must(t, err)
		write(t, filepath.Join(w.meshDir, name), string(data)+fmt.Sprintf("# round %d\n", round))
	}
}

// remoteBackend is the remote cluster's backend i of soak/web.
func (w *soakWorld) remoteBackend(i int) string {
	return fmt.Sprintf("10.2.%d.%d", w.remoteID, i+1)
}
