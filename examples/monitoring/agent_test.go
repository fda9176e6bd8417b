package monitoring

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// agent is an agent composed as examples/agent composes it
// (lbstate.Cell), configured by its flags.
type agent struct {
	t         *testing.T
	h         *hive.Hive
	log       *slog.Logger
	db        *statedb.DB
	frontends statedb.Table[*lb.Frontend]
	rec       statedbreconciler.Reconciler[*lb.Frontend]
	registry  *prometheus.Registry
}

// noKube is examples/agent's kubeClients without a kubeconfig: the
// Kubernetes cells run on the manifests feed only.
type noKube struct {
	cell.Out

	Client   kubernetes.Interface
	Metadata metadata.Interface
	Dynamic  dynamic.Interface
}

func newAgent(t *testing.T, args ...string) *agent {
	t.Helper()
	a := &agent{t: t, log: hivetest.Logger(t, hivetest.LogLevel(slog.LevelWarn))}
	a.h = hive.New(
		lbstate.Cell,
		cell.Provide(func() noKube { return noKube{} }),
		cell.Invoke(func(db *statedb.DB, fes statedb.Table[*lb.Frontend], r statedbreconciler.Reconciler[*lb.Frontend], reg *prometheus.Registry) {
			a.db, a.frontends, a.rec, a.registry = db, fes, r, reg
		}),
	)
	flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	a.h.RegisterFlags(flags)
	if err := flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	return a
}

// start starts the agent on the calling goroutine's thread inside ns (the
// datapath finds and attaches to its devices there), or where it is.
func (a *agent) start(do func(func() error) error) {
	a.t.Helper()
	if do == nil {
		do = func(fn func() error) error { return fn() }
	}
	if err := do(func() error { return a.h.Start(a.log, context.Background()) }); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { a.h.Stop(a.log, context.Background()) })
}

// waitFor polls the frontends table until ok holds for it, then waits
// until the reconciler has written it into the maps.
func (a *agent) waitFor(what string, ok func(txn statedb.ReadTxn) bool) {
	a.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(a.db.ReadTxn()) {
		if time.Now().After(deadline) {
			var b strings.Builder
			for fe := range a.frontends.All(a.db.ReadTxn()) {
				fmt.Fprintf(&b, "\n\t%s %s route=%q %v", fe.Address, fe.Service, fe.RoutedBy(), fe.Backends)
			}
			a.t.Fatalf("the tables never had %s; the frontends:%s", what, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := reconciler.WaitReconciled(ctx, a.rec, a.frontends.Revision(a.db.ReadTxn())); err != nil {
		a.t.Fatal(err)
	}
}

// frontend returns the frontend at addr, or nil.
func (a *agent) frontend(txn statedb.ReadTxn, addr string) *lb.Frontend {
	fe, _, _ := a.frontends.Get(txn, tables.FrontendByAddress.Query(lb.MustParseL3n4Addr(addr)))
	return fe
}

// serveMetrics serves the agent's registry on a loopback port of the
// root namespace, as examples/agent does, and returns its address.
func (a *agent) serveMetrics() string {
	a.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(a.registry))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	a.t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// copyDir copies the manifests of dir into a new directory of the test.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// probedService is shop/probed: TCP-checked backends on loopback
// addresses of the root namespace, up (a listener of the test) and down
// (nobody listens), on port.
func probedService(up, down string, port int) string {
	return fmt.Sprintf(`# Written by the test: health-checked backends on loopback.
apiVersion: v1
kind: Service
metadata:
  name: probed
  namespace: shop
  annotations: {lbstate.io/health-check: tcp}
spec:
  clusterIP: 10.96.0.30
  ports: [{name: tcp, port: 80, targetPort: %[3]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: probed-1
  namespace: shop
  labels: {kubernetes.io/service-name: probed}
addressType: IPv4
ports: [{name: tcp, port: %[3]d, protocol: TCP}]
endpoints:
- {addresses: [%[1]s], nodeName: node-a}
- {addresses: [%[2]s], nodeName: node-a}
`, up, down, port)
}
