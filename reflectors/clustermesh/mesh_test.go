package clustermesh_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/clustermesh"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
	"github.com/lbstate/lbstate/tables"
)

var meshServices = flag.Int("mesh.services", 1000, "Global services each cluster of TestThreeClustersShareTheirBackends exports")

const meshBackends = 10 // per service and cluster

// agent is one cluster's agent: its own tables, a source declaring its
// global services and their backends, and the clustermesh Cell importing
// from the other two and exporting to the shared etcd.
type agent struct {
	h  *hive.Hive
	db *statedb.DB
	w  *tables.Writer
}

func startAgent(t *testing.T, id int, srv *embedetcd.Server, names []string) *agent {
	t.Helper()
	self := names[id-1]
	configDir := t.TempDir()
	for _, n := range names {
		if n != self {
			if err := srv.WriteClientConfig(filepath.Join(configDir, n), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	exportFile := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := srv.WriteClientConfig(exportFile, nil); err != nil {
		t.Fatal(err)
	}
	a := &agent{}
	a.h = hive.New(
		statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell, clustermesh.Cell,
		cell.Invoke(func(p reflectors.Params) error {
			return reflectors.Register(p, lb.SourceK8s, func(ctx context.Context, s *reflectors.Source) error {
				declareServices(s, id)
				s.Synced()
				<-ctx.Done()
				return nil
			})
		}),
		cell.Invoke(func(db *statedb.DB, w *tables.Writer) { a.db, a.w = db, w }),
	)
	hive.AddConfigOverride(a.h, func(c *clustermesh.Config) {
		c.ClusterName, c.ClusterID = self, uint32(id)
		c.ClustermeshConfig, c.ClustermeshExport = configDir, exportFile
		c.ClustermeshLeaseTTL, c.ClustermeshStaleTimeout = 2*time.Second, 3*time.Second
	})
	if err := a.h.Start(slog.New(slog.DiscardHandler), context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

// declareServices writes cluster id's global services svc-N, each with
// a ClusterIP (the same in every cluster) and meshBackends backends at
// 10.<id>.x.y.
func declareServices(s *reflectors.Source, id int) {
	w := s.Writer
	txn := w.WriteTxn()
	defer txn.Abort()
	err := w.Batch(txn, func() error {
		for i := range *meshServices {
			name := lb.NewServiceName("default", fmt.Sprintf("svc-%d", i))
			fe := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
			if err := w.UpsertService(txn, lb.ServiceParams{
				Name: name, Source: lb.SourceK8s, Annotations: map[string]string{lb.AnnotationGlobal: "true"},
				Frontends: []lb.FrontendParams{{Address: lb.NewL3n4Addr(lb.ProtoTCP, fe, 80, lb.ScopeExternal), Type: lb.SVCTypeClusterIP}},
			}); err != nil {
				return err
			}
			var bs []lb.BackendParams
			for j := range meshBackends {
				n := i*meshBackends + j
				addr := netip.AddrFrom4([4]byte{10, byte(id), byte(n >> 8), byte(n)})
				bs = append(bs, lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, addr, 8080, lb.ScopeExternal), Weight: lb.DefaultBackendWeight})
			}
			if err := w.UpsertBackends(txn, name, lb.SourceK8s, bs...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		panic(err) // every service above is valid
	}
	txn.Commit()
}

// frontendsWith counts the frontends selecting exactly want backends,
// none of them from a cluster in not.
func (a *agent) frontendsWith(want int, not uint32) int {
	n := 0
	txn := a.db.ReadTxn()
	for fe := range a.w.Frontends().All(txn) {
		if len(fe.Backends) != want {
			continue
		}
		ok := true
		for _, b := range fe.Backends {
			if b.ClusterID == not && not != 0 {
				ok = false
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// backendRevisions maps every backend row but those of cluster not to
// its revision.
func (a *agent) backendRevisions(not uint32) map[lb.L3n4Addr]statedb.Revision {
	out := map[lb.L3n4Addr]statedb.Revision{}
	for b, rev := range a.w.Backends().All(a.db.ReadTxn()) {
		if b.Address.Addr().As4()[1] != byte(not) {
			out[b.Address] = rev
		}
	}
	return out
}

// Three clusters' agents share one etcd: each exports its global
// services and imports the other two's, so every agent selects all 30
// backends of each service. When one cluster's agent dies, its keys
// expire with its lease and the others lose exactly its backends:
// every other backend row stays as it was.
func TestThreeClustersShareTheirBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("three agents with 1,000 services each")
	}
	srv, err := embedetcd.Start(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	names := []string{"c1", "c2", "c3"}
	start := time.Now()
	var agents []*agent
	for id := range len(names) {
		agents = append(agents, startAgent(t, id+1, srv, names))
	}
	for _, a := range agents[:2] {
		t.Cleanup(func() { a.h.Stop(slog.New(slog.DiscardHandler), context.Background()) })
	}

	all := 3 * meshBackends
	for i, a := range agents {
		waitUntil(t, 45*time.Second, func() string {
			if n := a.frontendsWith(all, 0); n != *meshServices {
				return fmt.Sprintf("agent %s: %d of %d frontends have %d backends", names[i], n, *meshServices, all)
			}
			return ""
		})
	}
	t.Logf("%d services x %d backends x 3 clusters merged in every agent in %s", *meshServices, meshBackends, time.Since(start).Round(time.Millisecond))

	before := []map[lb.L3n4Addr]statedb.Revision{agents[0].backendRevisions(3), agents[1].backendRevisions(3)}
	if err := agents[2].h.Stop(slog.New(slog.DiscardHandler), context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for i, a := range agents[:2] {
		waitUntil(t, 30*time.Second, func() string {
			if n := a.frontendsWith(2*meshBackends, 3); n != *meshServices {
				return fmt.Sprintf("agent %s: %d of %d frontends have the %d backends of c1 and c2 alone", names[i], n, *meshServices, 2*meshBackends)
			}
			return ""
		})
		after := a.backendRevisions(3)
		if len(after) != len(before[i]) {
			t.Errorf("agent %s: %d backend rows of c1 and c2, had %d", names[i], len(after), len(before[i]))
		}
		for addr, rev := range before[i] {
			if after[addr] != rev {
				t.Errorf("agent %s: backend %s moved (revision %d -> %d)", names[i], addr, rev, after[addr])
				break
			}
		}
		if n := len(a.backendRevisions(0)) - len(after); n != 0 {
			t.Errorf("agent %s: %d backend rows of c3 left", names[i], n)
		}
	}
	t.Logf("c3's backends gone from c1 and c2 %s after its agent stopped (lease TTL 2s)", time.Since(stopped).Round(time.Millisecond))
}

func waitUntil(t *testing.T, limit time.Duration, pending func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		msg := pending()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
