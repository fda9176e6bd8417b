package clustermesh

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// ciliumWeb is what Cilium's exporter writes for a dual-stack global
// service with two named ports, spelled as its store.go spells the
// fields (L4Addr's Protocol and Port have no JSON tags there).
const ciliumWeb = `{"cluster":"c1","namespace":"default","name":"web",` +
	`"frontends":{"10.96.0.4":{"dns":{"Protocol":"UDP","Port":53},"http":{"Protocol":"TCP","Port":80}},"fd00:96::4":{"http":{"Protocol":"TCP","Port":80}}},` +
	`"backends":{"10.0.0.1":{"dns":{"Protocol":"UDP","Port":53},"http":{"Protocol":"TCP","Port":8080}},"10.0.0.2":{"http":{"Protocol":"TCP","Port":8080}},"fd00::1":{"http":{"Protocol":"TCP","Port":8080}}},` +
	`"zones":{"10.0.0.1":{"zone":"zone-a","forZones":[{"name":"zone-a"}]}},` +
	`"labels":{},"selector":{},"includeExternal":true,"shared":true,"clusterID":1}`

// exporterTables holds a global dual-stack web with local backends (one
// terminating, exported as Cilium exports a serving one; one not ready
// and one quarantined, not exported) and one from a remote cluster (not
// ours to export).
func exporterTables(t *testing.T) (*statedb.DB, *tables.Writer) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	web := lb.NewServiceName("default", "web")
	txn := w.WriteTxn()
	defer txn.Abort()
	p := lb.ServiceParams{Name: web, Source: lb.SourceK8s, Annotations: map[string]string{lb.AnnotationGlobal: "true"}}
	for _, fe := range []struct{ addr, port string }{{"10.96.0.4:80/TCP", "http"}, {"10.96.0.4:53/UDP", "dns"}, {"[fd00:96::4]:80/TCP", "http"}} {
		p.Frontends = append(p.Frontends, lb.FrontendParams{Address: lb.MustParseL3n4Addr(fe.addr), Type: lb.SVCTypeClusterIP, PortName: fe.port})
	}
	p.Frontends = append(p.Frontends, lb.FrontendParams{Address: lb.MustParseL3n4Addr("192.168.1.1:30080/TCP"), Type: lb.SVCTypeNodePort, PortName: "http"})
	if err := w.UpsertService(txn, p); err != nil {
		t.Fatal(err)
	}
	b := func(addr string, ports ...string) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight}.WithPortNames(ports...)
	}
	zoned := b("10.0.0.1:8080/TCP", "http")
	zoned.Zone = "zone-a"
	zoned = zoned.WithTopologyHints([]string{"zone-a"}, nil)
	terminating := b("10.0.0.2:8080/TCP", "http")
	terminating.State = lb.BackendTerminating
	notReady := b("10.0.0.3:8080/TCP", "http")
	notReady.State = lb.BackendNotReady
	quarantined := b("10.0.0.4:8080/TCP", "http")
	quarantined.State = lb.BackendQuarantined
	if err := w.UpsertBackends(txn, web, lb.SourceK8s, zoned, b("10.0.0.1:53/UDP", "dns"), b("[fd00::1]:8080/TCP", "http"), terminating, notReady, quarantined); err != nil {
		t.Fatal(err)
	}
	remote := b("10.2.0.1:8080/TCP", "http")
	remote.ClusterID = 2
	if err := w.UpsertBackends(txn, web, lb.SourceKVStore, remote); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	return db, w
}

// The exporter's value for a service is Cilium's, byte for byte: its
// ClusterIPs, its active local backends under each port name, zones.
func TestExporterWritesCiliumsClusterService(t *testing.T) {
	db, w := exporterTables(t)
	e := &Exporter{Self: Self{Name: "c1", ID: 1}, Writer: w, DB: db}
	txn := db.ReadTxn()
	svc, _, _ := w.Services().Get(txn, tables.ServiceByName.Query(lb.NewServiceName("default", "web")))
	got, err := json.Marshal(e.ClusterService(txn, svc))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != ciliumWeb {
		t.Errorf("exported:\n%s\nwant (Cilium's spelling):\n%s", got, ciliumWeb)
	}
	// And our importer reads it back as what was exported.
	cs, err := DecodeService(ServiceKey("c1", "default", "web"), got)
	if err != nil {
		t.Fatal(err)
	}
	var back []string
	for _, b := range cs.LocalBackends() {
		back = append(back, b.Address.String()+" "+strings.Join(b.PortNames(), ",")+" "+b.Zone)
	}
	// Zones are per address in the format: the UDP port shares it.
	want := []string{"10.0.0.1:53/UDP dns zone-a", "10.0.0.1:8080/TCP http zone-a", "10.0.0.2:8080/TCP http ", "[fd00::1]:8080/TCP http "}
	if strings.Join(back, "|") != strings.Join(want, "|") {
		t.Errorf("read back %q, want %q", back, want)
	}
}

// The exporter writes the cluster's config, every global service and
// then the synced keys of every store a Cilium agent waits for, under a
// lease; afterwards it rewrites only what changed and deletes what is
// no longer global or shared; its keys expire once it stops renewing
// the lease.
func TestExporterPublishesUnderALease(t *testing.T) {
	cli, cfg, _ := startEtcd(t)
	db, w := exporterTables(t)
	e := &Exporter{Self: Self{Name: "c1", ID: 1}, Etcd: cfg, Writer: w, DB: db, Log: slog.New(slog.DiscardHandler), LeaseTTL: 2 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	get := func(key string) *clientv3.GetResponse {
		t.Helper()
		r, err := cli.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	deadline := time.Now().Add(10 * time.Second)
	for get(SyncedKey("c1")).Count == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no synced key in 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	web := get(ServiceKey("c1", "default", "web"))
	if web.Count != 1 || string(web.Kvs[0].Value) != ciliumWeb || web.Kvs[0].Lease == 0 {
		t.Fatalf("web: %v", web.Kvs)
	}
	for _, k := range SyncedKeys("c1") {
		if r := get(k); r.Count != 1 || r.Kvs[0].Lease != web.Kvs[0].Lease {
			t.Errorf("synced key %s: %v, want it under the lease of the services", k, r.Kvs)
		}
	}
	cc := get(ClusterConfigKey("c1"))
	const wantConfig = `{"id":1,"capabilities":{"syncedCanaries":true,"maxConnectedClusters":255,"serviceExportsEnabled":false}}`
	if cc.Count != 1 || string(cc.Kvs[0].Value) != wantConfig {
		t.Fatalf("cluster config: %v, want %s", cc.Kvs, wantConfig)
	}

	// A second global service: web is not written again.
	txn := w.WriteTxn()
	api := lb.ServiceParams{Name: lb.NewServiceName("default", "api"), Source: lb.SourceK8s, Annotations: map[string]string{lb.AnnotationGlobal: "true"},
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.5:9000/TCP"), Type: lb.SVCTypeClusterIP}}}
	if err := w.UpsertService(txn, api); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	waitFor(t, "api exported", func() bool { return get(ServiceKey("c1", "default", "api")).Count == 1 })
	if r := get(ServiceKey("c1", "default", "web")); r.Kvs[0].ModRevision != web.Kvs[0].ModRevision {
		t.Errorf("web rewritten (revision %d -> %d) though it did not change", web.Kvs[0].ModRevision, r.Kvs[0].ModRevision)
	}

	// api is no longer global, and web is no longer shared: both go.
	txn = w.WriteTxn()
	api.Annotations = nil
	if err := w.UpsertService(txn, api); err != nil {
		t.Fatal(err)
	}
	svc, _, _ := w.Services().Get(txn, tables.ServiceByName.Query(lb.NewServiceName("default", "web")))
	p := svc.Policy().Clone()
	p.Annotations = map[string]string{lb.AnnotationGlobal: "true", lb.AnnotationShared: "no"}
	if err := w.UpsertService(txn, p); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	waitFor(t, "api and web withdrawn", func() bool {
		return get(ServiceKey("c1", "default", "api")).Count == 0 && get(ServiceKey("c1", "default", "web")).Count == 0
	})

	// Stopped, the exporter's keys expire with its lease.
	cancel()
	<-done
	done <- nil
	waitFor(t, "keys expired", func() bool {
		r, err := cli.Get(context.Background(), "cilium/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 0
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in 15s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A headless global service (declared without frontends) is exported
// as Cilium exports it: no frontends, its backends.
func TestExporterPublishesHeadlessServicesBackends(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := lb.NewServiceName("default", "db")
	txn := w.WriteTxn()
	if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Annotations: map[string]string{lb.AnnotationGlobalAlias: "true"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.UpsertBackends(txn, name, lb.SourceK8s, lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.7:5432/TCP"), Weight: lb.DefaultBackendWeight}.WithPortNames("pg")); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	e := &Exporter{Self: Self{Name: "c1", ID: 1}, Writer: w, DB: db}
	rtxn := db.ReadTxn()
	svc, _, _ := w.Services().Get(rtxn, tables.ServiceByName.Query(name))
	got, _ := json.Marshal(e.ClusterService(rtxn, svc))
	const want = `{"cluster":"c1","namespace":"default","name":"db","frontends":{},` +
		`"backends":{"10.0.0.7":{"pg":{"Protocol":"TCP","Port":5432}}},` +
		`"labels":{},"selector":{},"includeExternal":true,"shared":true,"clusterID":1}`
	if string(got) != want {
		t.Errorf("exported:\n%s\nwant:\n%s", got, want)
	}
}
