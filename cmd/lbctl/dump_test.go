package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// stickyManifests add to the demo a service with ClientIP affinity and
// one with source ranges, so that explain's every branch is compared.
const stickyManifests = `apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: default}
spec:
  clusterIP: 10.96.7.1
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: guarded, namespace: default}
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  clusterIP: 10.96.7.2
  loadBalancerSourceRanges: [198.51.100.0/24]
  ports: [{port: 80}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.71}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: sticky-1
  namespace: default
  labels: {kubernetes.io/service-name: sticky}
addressType: IPv4
ports: [{port: 8080}]
endpoints:
- {addresses: [10.0.7.1]}
- {addresses: [10.0.7.2]}
- {addresses: [10.0.7.3]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: guarded-1
  namespace: default
  labels: {kubernetes.io/service-name: guarded}
addressType: IPv4
ports: [{port: 8080}]
endpoints:
- {addresses: [10.0.7.11]}
- {addresses: [10.0.7.12]}
`

// liveAgent is an agent in this process (lbstate.Cell over the
// manifests, kernel maps when the process may create them) serving the
// read API on loopback, as the example agent does.
type liveAgent struct {
	url   string
	maps  *bpf.Maps
	db    *statedb.DB
	fes   statedb.Table[*lb.Frontend]
	stop  func()
	flags *pflag.FlagSet
}

// startLiveAgent starts the agent with args (its flags) on dir.
func startLiveAgent(t *testing.T, dir string, args ...string) *liveAgent {
	t.Helper()
	a := &liveAgent{flags: pflag.NewFlagSet("agent", pflag.ContinueOnError)}
	var (
		w   *tables.Writer
		rec reconciler.Reconciler[*lb.Frontend]
		mux = http.NewServeMux()
	)
	h := hive.New(
		lbstate.Cell,
		cell.Invoke(func(log *slog.Logger, d *statedb.DB, wr *tables.Writer, m *bpf.Maps, fes statedb.Table[*lb.Frontend],
			r reconciler.Reconciler[*lb.Frontend], g prometheus.Gatherer) {
			a.db, w, a.maps, a.fes, rec = d, wr, m, fes, r
			api.Register(mux, log, d, m)
			api.RegisterAgent(mux, log, api.Agent{Version: "test-1.2.3", Flags: a.flags, Gatherer: g, History: wr.History()})
		}),
	)
	a.flags.String("kubeconfig", "", "an embedder's flag naming a file")
	a.flags.String("etcd-token", "", "an embedder's secret flag")
	h.RegisterFlags(a.flags)
	maps := "memory"
	if bpftest.Required() || bpftest.Available() == nil {
		bpftest.Require(t)
		maps = "kernel"
		args = append(args, "--lb-pin-dir", bpftest.Config(t).LBPinDir)
	}
	args = append(args, "--manifests", dir, "--k8s-node-name", "node-a", "--lb-maps", maps,
		"--lb-algorithm", "maglev", "--lb-maglev-table-size", "251",
		// Maps sized for the test: explain reads each whole, twice a flow.
		"--lb-services-max", "4096", "--lb-backends-max", "1024", "--lb-rev-nat-max", "1024",
		"--lb-maglev-max", "256", "--lb-affinity-max", "1024")
	if err := a.flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s maps", maps)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	a.url = srv.URL
	a.stop = func() {
		srv.Close()
		h.Stop(log, context.Background())
	}
	t.Cleanup(a.stop)
	if err := waitSettled(a.db, w, a.fes, rec); err != nil {
		t.Fatal(err)
	}
	return a
}

// secretFiles writes a clustermesh config whose client key and cert are
// real PEM, and a kubeconfig with a token; it returns the config
// directory, the kubeconfig's path, and the strings no dump may hold.
func secretFiles(t *testing.T, dir string) (mesh, kubeconfig string, secrets []string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dump-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	mesh = filepath.Join(dir, "mesh")
	os.Mkdir(mesh, 0o700)
	os.WriteFile(filepath.Join(dir, "client.key"), keyPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "client.crt"), certPEM, 0o600)
	os.WriteFile(filepath.Join(mesh, "cluster2"), fmt.Appendf(nil,
		"endpoints: [https://127.0.0.1:1]\ntrusted-ca-file: %[1]s/client.crt\ncert-file: %[1]s/client.crt\nkey-file: %[1]s/client.key\n", dir), 0o600)
	token := "kube-token-" + rand.Text()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	os.WriteFile(kubeconfig, []byte("users: [{name: u, user: {token: "+token+"}}]\n"), 0o600)
	// The key's body, in any line of its PEM, and the token.
	body := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")
	return mesh, kubeconfig, append(body[1:len(body)-1], token)
}

// lbctlOut runs lbctl with args and returns what it printed, failing the
// test when it fails.
func lbctlOut(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("lbctl %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

// A dump of a live agent answers, once the agent is gone, as the agent
// did: explain for 1,000 random flows (Maglev slots, affinity pins,
// source ranges), every listing command, maps, and simulate as simulate
// -f of the same manifests. It holds the node, the flags and the metrics,
// and none of the agent's secrets.
func TestDumpAnswersOfflineAsTheLiveAgent(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "manifests")
	os.Mkdir(dir, 0o755)
	for _, f := range []string{"node.yaml", "web.yaml", "ingress.yaml", "dns.yaml", "whoami.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/demo", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), data, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "sticky.yaml"), []byte(stickyManifests), 0o644)
	mesh, kubeconfig, secrets := secretFiles(t, tmp)
	token := "flag-token-" + rand.Text()
	agent := startLiveAgent(t, dir, "--cluster-name", "cluster1", "--cluster-id", "1",
		"--clustermesh-config", mesh, "--clustermesh-sync-timeout", "1s",
		"--kubeconfig", kubeconfig, "--etcd-token", token)
	secrets = append(secrets, token)

	// Affinity pins, as the datapath would have left them: one fresh,
	// one expired.
	sticky := lb.MustParseL3n4Addr("10.96.7.1:80/TCP")
	var fresh, expired netip.AddrPort
	for fe := range agent.fes.All(agent.db.ReadTxn()) {
		if fe.Address == sticky {
			now := bpf.MonotonicSeconds()
			fresh, expired = netip.MustParseAddrPort("10.9.9.1:1000"), netip.MustParseAddrPort("10.9.9.2:1000")
			b := fe.Backends[0].Address
			var id uint32
			agent.maps.Backends.Iterate(func(k uint32, v bpf.Backend) bool {
				if v.L3n4Addr() == b {
					id = k
				}
				return id == 0
			})
			for _, c := range []struct {
				client netip.AddrPort
				used   uint32
			}{{fresh, now - 5}, {expired, now - 5000}} {
				if err := agent.maps.Affinity.Update(bpf.AffinityKey{Client: c.client.Addr().As16(), RevNatID: fe.ID},
					bpf.AffinityValue{BackendID: id, LastUsed: c.used}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if !fresh.IsValid() {
		t.Fatal("no sticky frontend")
	}

	var phases []time.Duration
	archive := filepath.Join(tmp, "node-a.lbdump.tar.gz")
	lbctlOut(t, "dump", "--api", agent.url, "-o", archive)

	// What the live agent answers.
	listings := [][]string{{"frontends"}, {"services"}, {"backends"}, {"routes"}, {"redirects"},
		{"frontends", "-o", "json"}, {"backends", "-o", "yaml"}, {"maps"}, {"maps", "-o", "json"}}
	live := map[string]string{}
	for _, args := range listings {
		live[strings.Join(args, " ")] = lbctlOut(t, append(args, "--api", agent.url)...)
	}
	type flow struct{ fe, src string }
	var fes []*lb.Frontend
	for fe := range agent.fes.All(agent.db.ReadTxn()) {
		if fe.ID != 0 {
			fes = append(fes, fe)
		}
	}
	rng := mrand.New(mrand.NewPCG(29, 3))
	flows := []flow{{sticky.String(), fresh.String()}, {sticky.String(), expired.String()}}
	for len(flows) < 1000 {
		fe := fes[rng.IntN(len(fes))]
		src := ""
		if rng.IntN(10) > 0 { // a flow; now and then, the shares
			src = randomClient(rng, fe).String()
		}
		flows = append(flows, flow{fe.Address.String(), src})
	}
	explainArgs := func(f flow) []string {
		args := []string{"explain", f.fe}
		if f.src != "" {
			args = append(args, "--src", f.src)
		}
		return args
	}
	liveExplain := make([]string, len(flows))
	began := time.Now()
	defer func() { t.Logf("phases: %v", phases) }()
	for i, f := range flows {
		liveExplain[i] = lbctlOut(t, append(explainArgs(f), "--api", agent.url)...)
	}
	for i, want := range []string{"is pinned (for 600s) to backend", "pin to backend"} {
		if !strings.Contains(liveExplain[i], want) {
			t.Fatalf("live explain of %v does not say %q:\n%s", flows[i], want, liveExplain[i])
		}
	}

	phases = append(phases, time.Since(began))
	agent.stop() // the agent is gone; its kernel maps too
	if _, err := http.Get(agent.url + api.MapsPath); err == nil {
		t.Fatal("the agent still answers")
	}

	for _, args := range listings {
		key := strings.Join(args, " ")
		if got := lbctlOut(t, append(args, "--dump", archive)...); got != live[key] {
			t.Errorf("lbctl %s --dump:\n%s\nlive:\n%s", key, got, live[key])
		}
	}
	kinds := map[string]int{}
	began = time.Now()
	for i, f := range flows {
		got := lbctlOut(t, append(explainArgs(f), "--dump", archive)...)
		if got != liveExplain[i] {
			t.Fatalf("lbctl explain %s --src %s --dump:\n%s\nlive:\n%s", f.fe, f.src, got, liveExplain[i])
		}
		for _, k := range []string{"maglev: flow", "maglev: a flow", "affinity:", "source ranges:", "DROPPED"} {
			if strings.Contains(got, k) {
				kinds[k]++
			}
		}
	}
	phases = append(phases, time.Since(began))
	t.Logf("%d flows alike: %v", len(flows), kinds)
	if len(kinds) < 5 {
		t.Errorf("the flows missed a branch of explain: %v", kinds)
	}
	sim := []string{"simulate", "-o", "json"}
	if got, want := lbctlOut(t, append(sim, "--dump", archive)...), lbctlOut(t, append(sim, "-f", dir, "--lb-algorithm", "maglev", "--lb-maglev-table-size", "251")...); got != want {
		t.Errorf("simulate --dump:\n%s\nsimulate -f on the agent's manifests:\n%s", got, want)
	}

	entries := readArchive(t, archive)
	for name, want := range map[string]string{
		agentEntry:                `"version": "test-1.2.3"`,
		tablesDir + "node.json":   `"node-a"`,
		metricsEntry:              "lbstate_",
		historyEntry:              `"cause":"file Service default/guarded`,
		tablesDir + "routes.json": "[",
	} {
		if !strings.Contains(entries[name], want) {
			t.Errorf("%s does not hold %q:\n%.500s", name, want, entries[name])
		}
	}
	if got := lbctlOut(t, "history", "default/guarded", "--dump", archive); !strings.Contains(got, "file Service default/guarded") || !strings.Contains(got, "+10.0.7.11:8080/TCP") {
		t.Errorf("lbctl history default/guarded --dump:\n%s", got)
	}
	for _, want := range []string{`"name": "clustermesh-config",` + "\n      \"value\": \"" + mesh, `"value": "` + kubeconfig, `"name": "etcd-token",` + "\n      \"value\": \"[redacted]\""} {
		if !strings.Contains(entries[agentEntry], want) {
			t.Errorf("%s does not hold %q", agentEntry, want)
		}
	}
	for name, data := range entries {
		for _, s := range secrets {
			if strings.Contains(data, s) {
				t.Errorf("%s holds a secret: %q", name, s)
			}
		}
	}
}

// readArchive returns the entries of a tar.gz by name.
func readArchive(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	entries := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[hdr.Name] = string(data)
	}
}
