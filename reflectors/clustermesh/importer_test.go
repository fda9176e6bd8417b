package clustermesh

import (
	"context"
	"log/slog"
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

// c2Web is cluster c2's default/web: a dual-stack backend pair serving
// http and dns, shared.
const c2Web = `{"cluster":"c2","namespace":"default","name":"web","frontends":{},
 "backends":{
  "10.2.0.1":{"http":{"Protocol":"TCP","Port":8080},"dns":{"Protocol":"UDP","Port":53}},
  "fd00:2::1":{"http":{"Protocol":"TCP","Port":8080},"dns":{"Protocol":"UDP","Port":53}}},
 "labels":{},"selector":{},"includeExternal":true,"shared":true,"clusterID":2}`

// localWeb declares default/web here, global, dual-stack, two ports, with
// one local backend.
func localWeb(t *testing.T, w *tables.Writer, global bool, names ...string) {
	t.Helper()
	txn := w.WriteTxn()
	defer txn.Abort()
	for j, n := range names {
		p := lb.ServiceParams{Name: lb.NewServiceName("default", n), Source: lb.SourceK8s}
		if global {
			p.Annotations = map[string]string{lb.AnnotationGlobal: "true"}
		}
		for i, fe := range []string{"10.96.0.%d:80/TCP", "10.96.0.%d:53/UDP", "[fd00:96::%d]:80/TCP"} {
			addr := strings.Replace(fe, "%d", string(rune('4'+j)), 1)
			p.Frontends = append(p.Frontends, lb.FrontendParams{Address: lb.MustParseL3n4Addr(addr), Type: lb.SVCTypeClusterIP, PortName: []string{"http", "dns", "http"}[i]})
		}
		if err := w.UpsertService(txn, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.UpsertBackends(txn, lb.NewServiceName("default", names[0]), lb.SourceK8s,
		lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), Weight: 100}.WithPortNames("http")); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
}

// backendsOf lists, per frontend of a service, its selected backends.
func backendsOf(w *tables.Writer, db *statedb.DB, name string) []string {
	var out []string
	for fe := range w.FrontendsOf(db.ReadTxn(), lb.NewServiceName("default", name)) {
		var bs []string
		for _, b := range fe.Backends {
			bs = append(bs, b.Address.String())
		}
		out = append(out, fe.Address.String()+" -> "+strings.Join(bs, ","))
	}
	slices.Sort(out)
	return out
}

// eventually polls until got() equals want, or fails after 5s.
func eventually(t *testing.T, what string, want []string, got func() []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := got()
		if slices.Equal(g, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n got  %q\n want %q", what, g, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type fixture struct {
	db  *statedb.DB
	w   *tables.Writer
	src *reflectors.Source
	im  *Importer
	cli *clientv3.Client
	put func(key, value string)
	srv *embedetcd.Server
	log *syncbuf.Buffer
}

// newFixture starts a real etcd as cluster c2's, and an importer of it.
func newFixture(t *testing.T, global bool) *fixture {
	cli, cfg, srv := startEtcd(t)
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	localWeb(t, w, global, "web", "api")
	log := &syncbuf.Buffer{}
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.NewTextHandler(log, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	im, err := NewImporter(Self{Name: "c1", ID: 1}, Remote{Name: "c2", ID: 2, Etcd: cfg, SyncTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, w: w, src: src, im: im, cli: cli, srv: srv, log: log}
	f.put = func(key, value string) {
		t.Helper()
		if _, err := cli.Put(context.Background(), key, value); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.im.Run(ctx, f.src) }()
	t.Cleanup(func() { cancel(); <-done })
}

var (
	webAlone = []string{
		"10.96.0.4:53/UDP -> ",
		"10.96.0.4:80/TCP -> 10.0.0.1:8080/TCP",
		"[fd00:96::4]:80/TCP -> ",
	}
	webWithC2 = []string{
		"10.96.0.4:53/UDP -> 10.2.0.1:53/UDP",
		"10.96.0.4:80/TCP -> 10.0.0.1:8080/TCP,10.2.0.1:8080/TCP",
		"[fd00:96::4]:80/TCP -> [fd00:2::1]:8080/TCP",
	}
)

// A remote cluster's shared service joins the global local service of
// its name, port by port and family by family, and leaves when deleted;
// the source is synced only once the cluster's synced key is seen.
func TestImporterMergesRemoteBackendsIntoGlobalServices(t *testing.T) {
	f := newFixture(t, true)
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	f.run(t)

	eventually(t, "after the initial list", webWithC2, func() []string { return backendsOf(f.w, f.db, "web") })
	if f.src.IsSynced() {
		t.Fatal("synced before the cluster's synced key")
	}
	f.put(SyncedKey("c2"), `{}`)
	eventually(t, "synced", []string{"true"}, func() []string { return []string{map[bool]string{true: "true"}[f.src.IsSynced()]} })

	// A remote service with no local one creates nothing here.
	f.put(ServiceKey("c2", "default", "nothere"), strings.ReplaceAll(c2Web, `"web"`, `"nothere"`))
	f.put(ServiceKey("c2", "default", "web"), strings.Replace(c2Web, `"10.2.0.1"`, `"10.2.0.9"`, 1))
	eventually(t, "after an update", []string{
		"10.96.0.4:53/UDP -> 10.2.0.9:53/UDP",
		"10.96.0.4:80/TCP -> 10.0.0.1:8080/TCP,10.2.0.9:8080/TCP",
		"[fd00:96::4]:80/TCP -> [fd00:2::1]:8080/TCP",
	}, func() []string { return backendsOf(f.w, f.db, "web") })
	for fe := range f.w.FrontendsOf(f.db.ReadTxn(), lb.NewServiceName("default", "nothere")) {
		t.Errorf("a remote service alone created frontend %s", fe.Address)
	}

	if _, err := f.cli.Delete(context.Background(), ServiceKey("c2", "default", "web")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "after the remote delete", webAlone, func() []string { return backendsOf(f.w, f.db, "web") })
}

// A bad value is rejected alone, counted, and leaves the other
// services, and what the bad key offered before, as they were.
func TestImporterSkipsAndCountsBadValues(t *testing.T) {
	f := newFixture(t, true)
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	f.put(ServiceKey("c2", "default", "api"), `{"cluster":`)
	f.run(t)
	eventually(t, "web beside a bad api", webWithC2, func() []string { return backendsOf(f.w, f.db, "web") })
	bad := map[string]string{
		"a cluster that does not match its key": strings.Replace(c2Web, `"cluster":"c2"`, `"cluster":"c3"`, 1),
		"an unknown protocol":                   strings.Replace(c2Web, `"UDP"`, `"QUIC"`, 1),
		"an out-of-range cluster ID":            strings.Replace(c2Web, `"clusterID":2`, `"clusterID":600`, 1),
		"another cluster's ID":                  strings.Replace(c2Web, `"clusterID":2`, `"clusterID":3`, 1),
	}
	want := f.src.Errors()
	if want != 1 {
		t.Fatalf("errors after the initial list: %d, want 1 (the api value that is not JSON)", want)
	}
	for what, v := range bad {
		f.put(ServiceKey("c2", "default", "web"), v)
		want++
		eventually(t, what+": errors", []string{"counted"}, func() []string {
			return []string{map[bool]string{true: "counted"}[f.src.Errors() >= want]}
		})
		if got := backendsOf(f.w, f.db, "web"); !slices.Equal(got, webWithC2) {
			t.Errorf("%s changed web: %q", what, got)
		}
	}
}

// Remote backends reach only a service declared global here.
func TestImporterLeavesServicesThatAreNotGlobalAlone(t *testing.T) {
	f := newFixture(t, false)
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	f.put(SyncedKey("c2"), `{}`)
	f.run(t)
	eventually(t, "synced", []string{"true"}, func() []string { return []string{map[bool]string{true: "true"}[f.src.IsSynced()]} })
	if got := backendsOf(f.w, f.db, "web"); !slices.Equal(got, webAlone) {
		t.Fatalf("a service not global took remote backends: %q", got)
	}
}

// A disconnected cluster takes exactly its backends along.
func TestImporterRemoveTakesTheClustersBackendsOnly(t *testing.T) {
	f := newFixture(t, true)
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	f.run(t)
	eventually(t, "connected", webWithC2, func() []string { return backendsOf(f.w, f.db, "web") })
	if err := f.im.Remove("c2"); err != nil {
		t.Fatal(err)
	}
	if got := backendsOf(f.w, f.db, "web"); !slices.Equal(got, webAlone) {
		t.Fatalf("after disconnect: %q, want %q", got, webAlone)
	}
	if err := f.im.Remove("c2"); err == nil {
		t.Error("a second Remove succeeded")
	}
}

// An etcd that comes back within the stale timeout with the same content
// changes no row: the importer resumes its watch where it was.
func TestImporterReconnectToUnchangedContentChangesNoRow(t *testing.T) {
	f := newFixture(t, true)
	f.im.initial[0].StaleTimeout = 6 * time.Second // probes every second
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	f.run(t)
	eventually(t, "connected", webWithC2, func() []string { return backendsOf(f.w, f.db, "web") })
	txn := f.db.ReadTxn()
	fes, bes := f.w.Frontends().Revision(txn), f.w.Backends().Revision(txn)

	f.srv.Stop()
	waitForLog(t, f.log, "Remote cluster disconnected")
	if err := f.srv.Restart(false); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, f.log, "Remote cluster reconnected within the stale timeout")
	time.Sleep(500 * time.Millisecond) // what a list would have written by now
	txn = f.db.ReadTxn()
	if f.w.Frontends().Revision(txn) != fes || f.w.Backends().Revision(txn) != bes {
		t.Errorf("a reconnect to unchanged content wrote: frontends revision %d -> %d, backends %d -> %d",
			fes, f.w.Frontends().Revision(txn), bes, f.w.Backends().Revision(txn))
	}
	// The resumed watch sees what changes next.
	f.put(ServiceKey("c2", "default", "web"), strings.Replace(c2Web, `"10.2.0.1"`, `"10.2.0.9"`, 1))
	eventually(t, "after the reconnect", []string{
		"10.96.0.4:53/UDP -> 10.2.0.9:53/UDP",
		"10.96.0.4:80/TCP -> 10.0.0.1:8080/TCP,10.2.0.9:8080/TCP",
		"[fd00:96::4]:80/TCP -> [fd00:2::1]:8080/TCP",
	}, func() []string { return backendsOf(f.w, f.db, "web") })
}

// No remote may use this cluster's name or ID: the one that does is
// refused with an error naming the flag, and nobody waits for it.
func TestImporterRefusesThisClustersNameAndID(t *testing.T) {
	self := Self{Name: "c1", ID: 1}
	if _, err := NewImporter(self, Remote{Name: "c1", Etcd: clientv3.Config{Endpoints: []string{"http://127.0.0.1:1"}}}); err == nil || !strings.Contains(err.Error(), "--cluster-name") {
		t.Errorf("a remote named c1: %v", err)
	}
	f := newFixture(t, true)
	f.im.initial[0].ID = 0 // learned from its cluster-config key, which says 1
	f.put(ClusterConfigKey("c2"), `{"id":1,"capabilities":{}}`)
	f.put(ServiceKey("c2", "default", "web"), strings.Replace(c2Web, `"clusterID":2`, `"clusterID":1`, 1))
	f.run(t)
	waitForLog(t, f.log, "cluster ID 1 is this cluster's (--cluster-id)")
	eventually(t, "synced without it", []string{"true"}, func() []string { return []string{map[bool]string{true: "true"}[f.src.IsSynced()]} })
	if got := backendsOf(f.w, f.db, "web"); !slices.Equal(got, webAlone) {
		t.Fatalf("a refused cluster's backends were merged: %q", got)
	}
}

func waitForLog(t *testing.T, log *syncbuf.Buffer, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), msg) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", msg, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A cluster that never writes its synced key holds the initial sync
// only until its sync timeout, which is logged for it.
func TestImporterSyncTimeoutReleasesTheInitialSync(t *testing.T) {
	f := newFixture(t, true)
	f.im.initial[0].SyncTimeout = 300 * time.Millisecond
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	f.run(t)
	eventually(t, "listed", webWithC2, func() []string { return backendsOf(f.w, f.db, "web") })
	waitFor(t, "synced after the timeout", f.src.IsSynced)
	waitForLog(t, f.log, `msg="Remote cluster not synced in time, going on without it" source=kvstore cluster=c2 timeout=300ms`)
}
