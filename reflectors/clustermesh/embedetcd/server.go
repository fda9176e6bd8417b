// Package embedetcd runs a real single-member etcd in the process, on
// loopback ports it picks, for tests, script tests and demos of the
// clustermesh: it can be stopped and started again on the same data and
// ports, started on a side port its importers do not know (to change and
// compact its data behind their back), and serve TLS with client
// certificates.
package embedetcd

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// TLS is what a server serves with: its certificate and key, and the CA
// that must have signed every client's certificate.
type TLS struct {
	CertFile, KeyFile, TrustedCAFile string
}

// Server is an embedded etcd.
type Server struct {
	dir  string
	tls  *TLS
	main url.URL // the client URL importers are given
	side url.URL // another, for changes behind their back
	peer url.URL

	mu sync.Mutex
	e  *embed.Etcd
}

// Start runs an etcd keeping its data in dir, with TLS if tls is set.
func Start(dir string, tls *TLS) (*Server, error) {
	scheme := "http"
	if tls != nil {
		scheme = "https"
	}
	var urls [3]url.URL
	for i := range urls {
		host, err := freePort()
		if err != nil {
			return nil, err
		}
		urls[i] = url.URL{Scheme: scheme, Host: host}
	}
	urls[2].Scheme = "http" // peers: none but itself
	s := &Server{dir: dir, tls: tls, main: urls[0], side: urls[1], peer: urls[2]}
	return s, s.start(s.main)
}

func (s *Server) start(client url.URL) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		return errors.New("etcd: already running")
	}
	cfg := embed.NewConfig()
	cfg.Dir = s.dir
	cfg.LogLevel = "fatal" // its shutdown logs errors that are not ours
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{s.peer}, []url.URL{s.peer}
	cfg.InitialCluster = cfg.Name + "=" + s.peer.String()
	if s.tls != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile: s.tls.CertFile, KeyFile: s.tls.KeyFile,
			TrustedCAFile: s.tls.TrustedCAFile, ClientCertAuth: true,
		}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		return errors.New("etcd: not ready in 20s")
	}
	s.e = e
	return nil
}

// Stop stops the server at once, as a crash would, without waiting for
// its clients to leave; its data stays.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		s.e.Server.HardStop()
		s.e.Close()
		s.e = nil
	}
}

// Restart starts the stopped server again on its own port; with side,
// on the side port instead, where only Endpoints' clients find it.
func (s *Server) Restart(side bool) error {
	if side {
		return s.start(s.side)
	}
	return s.start(s.main)
}

// Endpoint is the client URL importers are given.
func (s *Server) Endpoint() string { return s.main.String() }

// Endpoints are both client URLs: a client of both reaches the server
// on either port.
func (s *Server) Endpoints() []string { return []string{s.main.String(), s.side.String()} }

// WriteClientConfig writes an etcd client config file (the clustermesh
// format) for the main endpoint to path, naming the client's TLS files
// when given.
func (s *Server) WriteClientConfig(path string, client *TLS) error {
	var b strings.Builder
	fmt.Fprintf(&b, "endpoints:\n- %s\n", s.Endpoint())
	if client != nil {
		fmt.Fprintf(&b, "trusted-ca-file: %s\ncert-file: %s\nkey-file: %s\n", client.TrustedCAFile, client.CertFile, client.KeyFile)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Written whole and renamed, as a config tool would: a watcher never
	// sees half a file.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ClientConfig is a client config of both endpoints (plain; a TLS
// server needs the caller's certificate added).
func (s *Server) ClientConfig() clientv3.Config {
	return clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second}
}

// freePort picks a loopback port nobody listens on now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
