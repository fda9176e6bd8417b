package cilium

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cilium/cilium/pkg/clustermesh/clustercfg"
	serviceStore "github.com/cilium/cilium/pkg/clustermesh/store"
	cmtypes "github.com/cilium/cilium/pkg/clustermesh/types"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/clustermesh"
)

// A Cilium cluster's export, written by Cilium's own code (its cluster
// config, its service converter and sync store with their lease), is
// merged by lbstate's importer into the local global services: the
// backends Cilium exports (ready or serving: c2's terminating 10.2.0.2
// is active here, as in a Cilium agent) join, under the cluster ID
// Cilium declares; services not shared, not global or headless add
// nothing. When the Cilium cluster's lease expires, exactly its backends
// leave.
func TestOurImporterMergesWhatCiliumExports(t *testing.T) {
	for _, m := range meshes {
		t.Run(m.name, func(t *testing.T) { testImport(t, m.max, m.id) })
	}
}

func testImport(t *testing.T, max, id uint32) {
	setMeshSize(t, max)
	etcd := startTLSEtcd(t)
	const leaseTTL = 2 * time.Second
	backend := etcd.ciliumBackend(t, leaseTTL)
	closed := false
	t.Cleanup(func() {
		if !closed {
			backend.Close()
		}
	})
	ctx, stopCilium := context.WithCancel(context.Background())
	defer stopCilium()

	// Cluster c2 is Cilium's: its cluster config, and its services as
	// its clustermesh-apiserver writes them.
	if err := clustercfg.Set(ctx, "c2", cmtypes.CiliumClusterConfig{ID: id, Capabilities: cmtypes.CiliumClusterConfigCapabilities{
		SyncedCanaries: true, MaxConnectedClusters: max, ServiceExportsEnabled: new(false),
		EndpointSlicesExportMode: cmtypes.EndpointSlicesExportModeServicesAndEndpointSlices,
	}}, backend); err != nil {
		t.Fatal(err)
	}
	c2 := decodeObjects(t, clusterObjects(2))
	conv := ciliumConverter(t, cmtypes.ClusterInfo{Name: "c2", ID: id, MaxConnectedClusters: max})
	sync := ciliumStoreFactory().NewSyncStore("c2", backend, serviceStore.ServiceStorePrefix)
	syncDone := make(chan struct{})
	go func() { defer close(syncDone); sync.Run(ctx) }()
	for _, svc := range c2.slimServices {
		cs, upsert, err := conv.Convert(svc, c2.slicesOf)
		if err != nil {
			t.Fatal(err)
		}
		if upsert {
			if err := sync.UpsertKey(ctx, cs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sync.Synced(ctx); err != nil {
		t.Fatal(err)
	}

	// Cluster c1 is lbstate's, with the same objects and its own pods.
	db, w := lbstateTables(t, decodeObjects(t, clusterObjects(1)))
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	im, err := clustermesh.NewImporter(clustermesh.Self{Name: "c1", ID: 1, MaxConnectedClusters: max},
		clustermesh.Remote{Name: "c2", Etcd: etcd.lbstateConfig(t), SyncTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ictx, stopImporter := context.WithCancel(context.Background())
	imported := make(chan struct{})
	go func() { defer close(imported); im.Run(ictx, src) }()
	t.Cleanup(func() { stopImporter(); <-imported })

	c := fmt.Sprintf("(c%d)", id)
	want := map[string][]string{
		"web": {
			"10.96.0.10:53/UDP -> 10.1.0.1:5353/UDP(c0),10.2.0.1:5353/UDP" + c + ",10.2.0.2:5353/UDP" + c,
			"10.96.0.10:80/TCP -> 10.1.0.1:8080/TCP(c0),10.2.0.1:8080/TCP" + c + ",10.2.0.2:8080/TCP" + c,
			"[fd00:96::10]:53/UDP -> ",
			"[fd00:96::10]:80/TCP -> [fd00:1::1]:8080/TCP(c0),[fd00:2::1]:8080/TCP" + c,
		},
		"api":   {"10.96.0.20:9000/TCP -> 10.1.0.9:9000/TCP(c0),10.2.0.9:9000/TCP" + c},
		"local": {"10.96.0.30:80/TCP -> 10.1.0.30:80/TCP(c0)"},
		"plain": {"10.96.0.40:80/TCP -> 10.1.0.40:80/TCP(c0)"},
	}
	localOnly := map[string][]string{
		"web": {
			"10.96.0.10:53/UDP -> 10.1.0.1:5353/UDP(c0)",
			"10.96.0.10:80/TCP -> 10.1.0.1:8080/TCP(c0)",
			"[fd00:96::10]:53/UDP -> ",
			"[fd00:96::10]:80/TCP -> [fd00:1::1]:8080/TCP(c0)",
		},
		"api":   {"10.96.0.20:9000/TCP -> 10.1.0.9:9000/TCP(c0)"},
		"local": want["local"],
		"plain": want["plain"],
	}
	check := func(what string, want map[string][]string, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			ok := true
			for name, wb := range want {
				if !slices.Equal(selected(db, w, name), wb) {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				for name, wb := range want {
					t.Errorf("%s: shop/%s selects\n%q\nwant\n%q", what, name, selected(db, w, name), wb)
				}
				t.FailNow()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	check("Cilium's export merged", want, 10*time.Second)
	waitFor(t, "the kvstore source synced", 10*time.Second, src.IsSynced)

	// The Cilium cluster goes away without a word: its lease expires.
	stopCilium()
	<-syncDone
	backend.Close()
	closed = true
	stopped := time.Now()
	check("after the Cilium cluster's lease expired", localOnly, leaseTTL+10*time.Second)
	t.Logf("c2's backends left %s after its etcd client stopped (lease %s)", time.Since(stopped).Round(time.Millisecond), leaseTTL)
}
