package clustermesh

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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
	"github.com/lbstate/lbstate/tables"
)

// pki is a CA the test makes, and files of certificates it signed.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	p.ca, p.caKey = p.issue(t, "ca", nil, true)
	return p
}

// issue makes a certificate (a server's with ips), writes NAME.crt and
// NAME.key, and returns it.
func (p *pki) issue(t *testing.T, name string, ips []net.IP, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
	}
	parent, signer := tmpl, key
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		parent, signer = p.ca, p.caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, kind string, b []byte) {
		if err := os.WriteFile(filepath.Join(p.dir, file), pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".crt", "CERTIFICATE", der)
	write(name+".key", "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// An etcd that demands client certificates is reached with the files a
// clustermesh config names, and not without them; no credential reaches
// the log.
func TestImporterConnectsWithClientCertificates(t *testing.T) {
	p := newPKI(t)
	p.issue(t, "server", []net.IP{net.ParseIP("127.0.0.1")}, false)
	p.issue(t, "client", nil, false)
	srv, err := embedetcd.Start(t.TempDir(), &embedetcd.TLS{
		CertFile: p.path("server.crt"), KeyFile: p.path("server.key"), TrustedCAFile: p.path("ca.crt"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)

	configDir := t.TempDir()
	client := &embedetcd.TLS{CertFile: p.path("client.crt"), KeyFile: p.path("client.key"), TrustedCAFile: p.path("ca.crt")}
	if err := srv.WriteClientConfig(filepath.Join(configDir, "c2"), client); err != nil {
		t.Fatal(err)
	}
	withCert, _, err := LoadEtcdFile(filepath.Join(configDir, "c2"))
	if err != nil {
		t.Fatal(err)
	}
	noCert := withCert
	noCert.TLS = withCert.TLS.Clone()
	noCert.TLS.Certificates = nil

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put := func(cfg clientv3.Config, key, value string) error {
		cfg.DialTimeout = 2 * time.Second
		cli, err := clientv3.New(cfg)
		if err != nil {
			return err
		}
		defer cli.Close()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err = cli.Put(rctx, key, value)
		return err
	}
	if err := put(noCert, "probe", "x"); err == nil {
		t.Fatal("the etcd took a client without a certificate")
	}
	for k, v := range map[string]string{
		ClusterConfigKey("c2"):             `{"id":2,"capabilities":{"syncedCanaries":true}}`,
		ServiceKey("c2", "default", "web"): c2Web,
		SyncedKey("c2"):                    "now",
	} {
		if err := put(withCert, k, v); err != nil {
			t.Fatal(err)
		}
	}

	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	localWeb(t, w, true, "web")
	log := &syncbuf.Buffer{}
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	if err != nil {
		t.Fatal(err)
	}
	im, err := NewImporter(Self{Name: "c1", ID: 1}, Remote{Name: "c2", Etcd: withCert})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); im.Run(rctx, src) }()
	t.Cleanup(func() { stop(); <-done })
	eventually(t, "over TLS", webWithC2, func() []string { return backendsOf(w, db, "web") })
	waitFor(t, "synced over TLS", src.IsSynced)

	keyPEM, _ := os.ReadFile(p.path("client.key"))
	for _, secret := range []string{"PRIVATE KEY", strings.Split(string(keyPEM), "\n")[1]} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, log)
		}
	}
	if !slices.Contains(withCert.Endpoints, srv.Endpoint()) || !strings.HasPrefix(srv.Endpoint(), "https://") {
		t.Errorf("endpoints %v, server %s: want the https endpoint", withCert.Endpoints, srv.Endpoint())
	}
}
