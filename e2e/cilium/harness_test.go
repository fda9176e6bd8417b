// Package cilium checks lbstate's clustermesh against Cilium v1.20.2's
// own code, as a Cilium cluster meshed with an lbstate cluster runs it:
// Cilium's decoding, validators, cluster-config checks, watch-store
// manager and shared-services observer read what lbstate's exporter
// writes; Cilium's service converter and sync store write what lbstate's
// importer reads. Every test runs against a real etcd that demands
// client certificates.
package cilium

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cilium/cilium/operator/watchers"
	cmnamespace "github.com/cilium/cilium/pkg/clustermesh/namespace"
	cmtypes "github.com/cilium/cilium/pkg/clustermesh/types"
	k8sClient "github.com/cilium/cilium/pkg/k8s/client"
	"github.com/cilium/cilium/pkg/k8s/resource"
	slim_corev1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/api/core/v1"
	slim_discovery_v1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/api/discovery/v1"
	"github.com/cilium/cilium/pkg/kvstore"
	"github.com/cilium/cilium/pkg/kvstore/store"

	"github.com/lbstate/lbstate/reflectors/clustermesh"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
)

// meshes are the two sizes a Cilium mesh may have, each with a cluster
// ID only the larger one allows for the exporting cluster.
var meshes = []struct {
	name string
	max  uint32 // --max-connected-clusters
	id   uint32 // the exporting cluster's ID
}{
	{"255-cluster mesh", 255, 7},
	{"511-cluster mesh", 511, 400},
}

// setMeshSize sets Cilium's process-wide cluster ID bound, as an agent
// does at start from its --max-connected-clusters.
func setMeshSize(t *testing.T, max uint32) {
	t.Helper()
	if err := (cmtypes.ClusterInfo{MaxConnectedClusters: max}).InitClusterIDMax(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = (cmtypes.ClusterInfo{MaxConnectedClusters: 255}).InitClusterIDMax() })
}

// tlsEtcd is a real etcd demanding client certificates, and the etcd
// client config file (Cilium's and lbstate's format) that reaches it.
type tlsEtcd struct {
	srv        *embedetcd.Server
	configFile string
}

func startTLSEtcd(t *testing.T) *tlsEtcd {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := issue(t, dir, "ca", nil, nil, nil)
	issue(t, dir, "server", []net.IP{net.ParseIP("127.0.0.1")}, ca, caKey)
	issue(t, dir, "client", nil, ca, caKey)
	p := func(name string) string { return filepath.Join(dir, name) }
	srv, err := embedetcd.Start(t.TempDir(), &embedetcd.TLS{CertFile: p("server.crt"), KeyFile: p("server.key"), TrustedCAFile: p("ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	e := &tlsEtcd{srv: srv, configFile: p("etcd-config.yaml")}
	if err := srv.WriteClientConfig(e.configFile, &embedetcd.TLS{CertFile: p("client.crt"), KeyFile: p("client.key"), TrustedCAFile: p("ca.crt")}); err != nil {
		t.Fatal(err)
	}
	// Without a client certificate, the etcd refuses.
	cfg := e.lbstateConfig(t)
	cfg.TLS.Certificates = nil
	cfg.DialTimeout = 2 * time.Second
	cfg.Logger = zap.NewNop() // its retries would log the refusal
	if cli, err := clientv3.New(cfg); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = cli.Put(ctx, "probe", "x")
		cancel()
		cli.Close()
		if err == nil {
			t.Fatal("the etcd took a client without a certificate")
		}
	}
	return e
}

// lbstateConfig is the config file read as lbstate reads it.
func (e *tlsEtcd) lbstateConfig(t *testing.T) clientv3.Config {
	t.Helper()
	cfg, _, err := clustermesh.LoadEtcdFile(e.configFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// ciliumBackend is Cilium's etcd client on the same file, as an agent
// reads a cluster's file from its clustermesh config directory; its
// keys carry leases of leaseTTL.
func (e *tlsEtcd) ciliumBackend(t *testing.T, leaseTTL time.Duration) kvstore.BackendOperations {
	t.Helper()
	// The client lives as long as the context it is made with.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	backend, errc := kvstore.NewClient(ctx, slog.New(slog.DiscardHandler), kvstore.EtcdBackendName,
		map[string]string{kvstore.EtcdOptionConfig: e.configFile}, kvstore.ExtraOptions{LeaseTTL: leaseTTL})
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Cilium's etcd client: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Cilium's etcd client: not connected in 20s")
	}
	return backend
}

// issue writes NAME.crt and NAME.key: a CA's when ca is nil, else one
// it signed (a server's, with ips).
func issue(t *testing.T, dir, name string, ips []net.IP, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips,
	}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		name + ".crt": {Type: "CERTIFICATE", Bytes: der},
		name + ".key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// everyNamespaceGlobal is Cilium's namespace manager at its default,
// --clustermesh-default-global-namespace=true with no namespace
// annotated: the manager itself needs a Kubernetes namespace store.
type everyNamespaceGlobal struct{}

func (everyNamespaceGlobal) IsGlobalNamespaceByName(string) (bool, error)          { return true, nil }
func (everyNamespaceGlobal) IsGlobalNamespaceByObject(*slim_corev1.Namespace) bool { return true }

// ciliumConverter is Cilium's own service converter (operator/watchers,
// what its clustermesh-apiserver and operator export with) for cluster
// cinfo, taken from its cell: the sync loop around it is disabled, the
// converter is what it provides.
func ciliumConverter(t *testing.T, cinfo cmtypes.ClusterInfo) watchers.ClusterServiceConverter {
	t.Helper()
	var conv watchers.ClusterServiceConverter
	h := hive.New(
		job.Cell,
		cell.Provide(
			func() cmtypes.ClusterInfo { return cinfo },
			func() cmnamespace.Manager { return everyNamespaceGlobal{} },
			func() watchers.ServiceSyncConfig { return watchers.ServiceSyncConfig{Enabled: false} },
			func() k8sClient.Clientset { return nil },
			func() kvstore.Client { return nil },
			func() resource.Resource[*slim_corev1.Service] { return nil },
			func() resource.Resource[*slim_discovery_v1.EndpointSlice] { return nil },
			func() resource.Resource[*slim_corev1.Namespace] { return nil },
			func() store.Factory { return nil },
			func(r job.Registry) job.Group { return r.NewGroup(nil) },
		),
		watchers.ServiceSyncCell,
		cell.Invoke(func(c watchers.ClusterServiceConverter) { conv = c }),
	)
	if err := h.Populate(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("Cilium's converter: %v", err)
	}
	return conv
}

// ciliumStoreFactory is Cilium's kvstore store factory, with its metrics.
func ciliumStoreFactory() store.Factory {
	return store.NewFactory(slog.New(slog.DiscardHandler), store.MetricsProvider())
}

// waitFor polls cond until it holds, failing after d.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
