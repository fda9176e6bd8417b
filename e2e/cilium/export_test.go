package cilium

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/cilium/pkg/clustermesh/clustercfg"
	"github.com/cilium/cilium/pkg/clustermesh/common"
	serviceStore "github.com/cilium/cilium/pkg/clustermesh/store"
	cmtypes "github.com/cilium/cilium/pkg/clustermesh/types"
	"github.com/cilium/cilium/pkg/kvstore"
	"github.com/cilium/cilium/pkg/kvstore/store"

	"github.com/lbstate/lbstate/reflectors/clustermesh"
)

// The stores a Cilium agent waits for in a remote cluster (its
// remoteCluster.Run registers them with the watch-store manager), and
// the ServiceExports store an operator with MCS-API waits for.
var ciliumStores = []string{
	"cilium/state/nodes/v1",
	"cilium/state/services/v1",
	"cilium/state/ip/v1",
	"cilium/state/identities/v1",
	"cilium/state/serviceexports/v1",
}

// documentedDifferences are the fields in which lbstate's export
// differs from Cilium's exporter on purpose (docs/clustermesh.md, "How
// the export differs from Cilium's"); the comparison blanks them.
var documentedDifferences = map[string]func(*serviceStore.ClusterService){
	"labels":    func(s *serviceStore.ClusterService) { s.Labels = map[string]string{} },
	"selector":  func(s *serviceStore.ClusterService) { s.Selector = map[string]string{} },
	"hostnames": func(s *serviceStore.ClusterService) { s.Hostnames = map[string]string{} },
}

// A Cilium agent meshed with an lbstate cluster reads its export with
// Cilium's own code: the cluster config passes Cilium's remote-config
// validation for the mesh size; every service key decodes with Cilium's
// validators and re-marshals byte for byte; the watch-store manager,
// with the shared-services observer on the services store, finds every
// store it waits for synced and marks the cluster ready within a
// second, logging no warning; the values are those Cilium's exporter
// makes of the same Service and EndpointSlices but for the documented
// differences; and when the exporter stops, its lease expires and the
// observer sees every service deleted.
func TestCiliumAgentSyncsOurExportAndMarksItReady(t *testing.T) {
	for _, m := range meshes {
		t.Run(m.name, func(t *testing.T) { testExport(t, m.max, m.id) })
	}
}

func testExport(t *testing.T, max, id uint32) {
	setMeshSize(t, max)
	etcd := startTLSEtcd(t)
	objs := decodeObjects(t, clusterObjects(1))
	db, w := lbstateTables(t, objs)
	const leaseTTL = 2 * time.Second
	e := &clustermesh.Exporter{
		Self: clustermesh.Self{Name: "c1", ID: id, MaxConnectedClusters: max},
		Etcd: etcd.lbstateConfig(t), Writer: w, DB: db, Log: slog.New(slog.DiscardHandler), LeaseTTL: leaseTTL,
	}
	ectx, stopExporter := context.WithCancel(context.Background())
	exported := make(chan error, 1)
	go func() { exported <- e.Run(ectx) }()
	t.Cleanup(func() { stopExporter(); <-exported })

	backend := etcd.ciliumBackend(t, 0)
	t.Cleanup(backend.Close)
	ctx := context.Background()
	// Written last: the exporter has written everything once it is there.
	waitFor(t, "the exporter's services synced key", 10*time.Second, func() bool {
		v, err := backend.Get(ctx, clustermesh.SyncedKey("c1"))
		return err == nil && v != nil
	})

	// The cluster config, as an agent's remote cluster reads and checks it.
	cfg, err := clustercfg.Get(ctx, "c1", backend)
	if err != nil {
		t.Fatal(err)
	}
	local := cmtypes.ClusterInfo{ID: 1, Name: "cilium-1", MaxConnectedClusters: max}
	if err := local.ValidateRemoteConfig(cfg); err != nil {
		t.Fatalf("Cilium refuses our cluster config %+v: %v", cfg, err)
	}
	if cfg.ID != id || !cfg.Capabilities.SyncedCanaries || cfg.Capabilities.MaxConnectedClusters != max ||
		cfg.Capabilities.ServiceExportsEnabled == nil || *cfg.Capabilities.ServiceExportsEnabled ||
		cfg.Capabilities.EndpointSlicesExportMode != cmtypes.EndpointSlicesExportModeServicesOnly || cfg.Capabilities.Cached {
		t.Errorf("cluster config %+v", cfg)
	}

	// Every key decodes with Cilium's validators and re-marshals as is,
	// and every key (synced keys, config) sits on one lease.
	validators := serviceStore.KeyCreator(serviceStore.ClusterNameValidator("c1"), serviceStore.NamespacedNameValidator(), serviceStore.ClusterIDValidator(&id))
	raw, err := backend.ListPrefix(ctx, "cilium/state/services/v1/c1/")
	if err != nil {
		t.Fatal(err)
	}
	all, err := backend.ListPrefix(ctx, "cilium/")
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64][]string{}
	for key, v := range all {
		if strings.HasPrefix(key, kvstore.InitLockPath+"/") {
			continue // Cilium's client's own quorum check, on its own lease
		}
		leases[v.LeaseID] = append(leases[v.LeaseID], key)
	}
	if _, none := leases[0]; len(leases) != 1 || none {
		t.Errorf("keys by lease %v, want all on one", leases)
	}
	for key, v := range raw {
		k := validators().(*serviceStore.ValidatingClusterService)
		if err := k.Unmarshal(strings.TrimPrefix(key, "cilium/state/services/v1/c1/"), v.Data); err != nil {
			t.Errorf("%s: Cilium refuses it: %v", key, err)
			continue
		}
		again, _ := k.Marshal()
		if !bytes.Equal(again, v.Data) {
			t.Errorf("%s: Cilium re-marshals\n%s\nas\n%s", key, v.Data, again)
		}
	}

	// An agent's watch-store manager: the services store with the
	// shared-services observer, the others empty.
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	factory := store.NewFactory(logger, store.MetricsProvider())
	obs := newServiceObserver(logger)
	synced := make(chan string, len(ciliumStores))
	onSync := func(prefix string) store.RWSOpt {
		return store.RWSWithOnSyncCallback(func(context.Context) { synced <- prefix })
	}
	mgr := factory.NewWatchStoreManager(backend, "c1")
	for _, prefix := range ciliumStores {
		var ws store.WatchStore
		if prefix == serviceStore.ServiceStorePrefix {
			ws = factory.NewWatchStore("c1", validators, obs.observer, onSync(prefix))
		} else {
			ws = factory.NewWatchStore("c1", store.KVPairCreator, nopObserver{}, onSync(prefix))
		}
		mgr.Register(prefix, func(ctx context.Context) { ws.Watch(ctx, backend, kvstore.JoinKey(prefix, "c1")) })
	}
	mctx, stopMgr := context.WithCancel(ctx)
	managed := make(chan struct{})
	start := time.Now()
	go func() { defer close(managed); mgr.Run(mctx) }()
	t.Cleanup(func() { stopMgr(); <-managed })
	pending := map[string]bool{}
	for _, p := range ciliumStores {
		pending[p] = true
	}
	deadline := time.After(time.Second)
	for len(pending) > 0 {
		select {
		case p := <-synced:
			delete(pending, p)
		case <-deadline:
			t.Fatalf("stores not synced within a second: %v\nCilium's log:\n%s", slices.Sorted(maps.Keys(pending)), logs.String())
		}
	}
	t.Logf("every store synced, the cluster ready, in %s", time.Since(start).Round(time.Millisecond))

	// The values: those of Cilium's exporter (the same services, the
	// headless one included), but for the documented differences.
	conv := ciliumConverter(t, cmtypes.ClusterInfo{Name: "c1", ID: id, MaxConnectedClusters: max})
	want := map[string]*serviceStore.ClusterService{}
	for _, svc := range objs.slimServices {
		cs, upsert, err := conv.Convert(svc, objs.slicesOf)
		if err != nil {
			t.Fatal(err)
		}
		if upsert {
			want[cs.GetKeyName()] = cs
		}
	}
	got := obs.snapshot()
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("the observer has %v, Cilium's exporter makes %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, w := range want {
		g, w := normalize(t, got[name]), normalize(t, w)
		differs := []string{}
		for field, blank := range documentedDifferences {
			g0, w0 := *g, *w
			blank(g)
			blank(w)
			if !reflect.DeepEqual(g0, *g) || !reflect.DeepEqual(w0, *w) {
				differs = append(differs, field)
			}
		}
		slices.Sort(differs)
		// web has labels, a selector and a hostname; api none: each
		// documented difference shows, and only where expected.
		if wantDiffers := map[string][]string{"c1/shop/web": {"hostnames", "labels", "selector"}}[name]; !slices.Equal(differs, wantDiffers) {
			t.Errorf("%s: differs in %v, want %v (keep the documented differences current)", name, differs, wantDiffers)
		}
		if !reflect.DeepEqual(g, w) {
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			t.Errorf("%s: ours\n%s\nCilium's exporter's\n%s", name, gj, wj)
		}
		t.Logf("%s: equal to Cilium's exporter's value but for %v", name, differs)
	}
	// Services with no labels, selector or hostnames: byte for byte.
	for _, name := range []string{"c1/shop/api", "c1/shop/db"} {
		b, _ := json.Marshal(want[name])
		if v := raw["cilium/state/services/v1/"+name]; !bytes.Equal(v.Data, b) {
			t.Errorf("%s: ours\n%s\nCilium's exporter's\n%s", name, v.Data, b)
		}
	}

	// The exporter stops: its lease expires, and the agent's observer
	// sees every service deleted.
	stopExporter()
	<-exported
	exported <- nil
	stopped := time.Now()
	waitFor(t, "every service deleted after the lease expired", leaseTTL+5*time.Second, func() bool { return len(obs.snapshot()) == 0 })
	t.Logf("services deleted %s after the exporter stopped (lease %s)", time.Since(stopped).Round(time.Millisecond), leaseTTL)
	if obs.deletes() != len(want) {
		t.Errorf("%d deletions, want %d", obs.deletes(), len(want))
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("Cilium logged: %s", line)
		}
	}
}

// normalize is a value as Cilium's decoding leaves it (every map made).
func normalize(t *testing.T, cs *serviceStore.ClusterService) *serviceStore.ClusterService {
	t.Helper()
	b, err := cs.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var out serviceStore.ClusterService
	if err := out.Unmarshal("", b); err != nil {
		t.Fatal(err)
	}
	return &out
}

// serviceObserver is Cilium's shared-services observer (with its global
// service cache), recording what it passes on.
type serviceObserver struct {
	observer store.Observer
	mu       sync.Mutex
	services map[string]*serviceStore.ClusterService
	deleted  int
}

func newServiceObserver(log *slog.Logger) *serviceObserver {
	o := &serviceObserver{services: map[string]*serviceStore.ClusterService{}}
	o.observer = common.NewSharedServicesObserver(log, common.NewGlobalServiceCache(log),
		func(cs *serviceStore.ClusterService) {
			o.mu.Lock()
			defer o.mu.Unlock()
			c := *cs
			o.services[cs.GetKeyName()] = &c
		},
		func(cs *serviceStore.ClusterService) {
			o.mu.Lock()
			defer o.mu.Unlock()
			delete(o.services, cs.GetKeyName())
			o.deleted++
		})
	return o
}

func (o *serviceObserver) snapshot() map[string]*serviceStore.ClusterService {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.services)
}

func (o *serviceObserver) deletes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deleted
}

type nopObserver struct{}

func (nopObserver) OnUpdate(store.Key)      {}
func (nopObserver) OnDelete(store.NamedKey) {}

// syncBuffer is a log buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
