package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// apiServerEnv names the kube-apiserver binary e2e/run built.
const apiServerEnv = "LBSTATE_KUBE_APISERVER"

// serviceCIDRs are the Service ranges of every test cluster (dual-stack).
const serviceCIDRs = "10.96.0.0/16,fd00:96::/112"

// apiServer is a real kube-apiserver process on loopback, storing its
// objects in the suite's etcd under a prefix of its own: each test has
// its own cluster, and a second server on the same prefix (started with
// another) serves the same cluster.
type apiServer struct {
	t       testing.TB
	dir     string // its certificates, keys and token file
	prefix  string // etcd prefix
	port    int
	cfg     *rest.Config
	logPath string

	mu  sync.Mutex
	cmd *exec.Cmd
}

const testToken = "lbstate-e2e-token"

// startAPIServer starts a kube-apiserver for the test and stops it when
// the test ends.
func startAPIServer(t testing.TB) *apiServer {
	t.Helper()
	dir := t.TempDir()
	s := &apiServer{t: t, dir: dir, prefix: "/" + strings.ReplaceAll(strings.Trim(dir, "/"), "/", "-")}
	if err := writeAPIServerFiles(dir); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// another starts a second API server of the same cluster (same etcd
// prefix and keys), on another port.
func (s *apiServer) another() *apiServer {
	s.t.Helper()
	o := &apiServer{t: s.t, dir: s.dir, prefix: s.prefix}
	o.start()
	s.t.Cleanup(o.stop)
	return o
}

func writeAPIServerFiles(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), keyPEM, 0o600); err != nil {
		return err
	}
	tokens := testToken + ",lbstate-e2e,lbstate-e2e,system:masters\n"
	return os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600)
}

// start runs the server on a fresh port and waits until it is ready.
func (s *apiServer) start() {
	s.t.Helper()
	bin := os.Getenv(apiServerEnv)
	if bin == "" {
		s.t.Fatalf("%s is not set: run the suite with e2e/run, which builds kube-apiserver", apiServerEnv)
	}
	if s.port == 0 {
		port, err := freePort()
		if err != nil {
			s.t.Fatal(err)
		}
		s.port = port
		s.logPath = filepath.Join(s.dir, fmt.Sprintf("kube-apiserver-%d.log", port))
	}
	certDir := filepath.Join(s.dir, fmt.Sprintf("certs-%d", s.port))
	cmd := exec.Command(bin,
		"--etcd-servers="+suiteEtcd.Endpoint(),
		"--etcd-prefix="+s.prefix,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(s.port),
		"--cert-dir="+certDir,
		"--service-cluster-ip-range="+serviceCIDRs,
		"--token-auth-file="+filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(s.dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(s.dir, "sa.key"),
		// Loopback cannot be published as the kubernetes Service's
		// endpoint; no controller-manager creates service accounts.
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
	)
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, killed with it; and killed if the test
	// binary dies. The death signal follows the thread that started it,
	// so that thread stays, locked, until the server exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		err := cmd.Start()
		started <- err
		if err == nil {
			cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		s.t.Fatalf("starting kube-apiserver: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	s.cfg = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", s.port),
		BearerToken:     testToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1, // no client-side rate limit: the suite writes fast
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		s.kill()
		s.t.Fatalf("kube-apiserver not ready (its log: %s): %v", s.logPath, err)
	}
}

// waitReady polls /readyz until it answers ok.
func (s *apiServer) waitReady(timeout time.Duration) error {
	client, err := rest.HTTPClientFor(s.cfg)
	if err != nil {
		return err
	}
	client.Timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		resp, err := client.Get(s.cfg.Host + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return last
}

// kill ends the server at once (SIGKILL): a SIGTERM'd API server keeps
// serving the watches it has for a minute, which is no outage.
func (s *apiServer) kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for range 500 { // the port is free once the process is gone
		if syscall.Kill(cmd.Process.Pid, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *apiServer) stop() { s.kill() }

// restart starts a killed server again on its port.
func (s *apiServer) restart() {
	s.t.Helper()
	s.start()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
