package clustermesh

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The mesh size is checked as Cilium checks it: a mesh of 255 refuses a
// remote ID above 255 (wherever it comes from), a mesh of 511 refuses a
// remote that does not declare 511, and accepts one that does.
func TestImporterRefusesARemoteOfAnotherMeshSize(t *testing.T) {
	if _, err := NewImporter(Self{Name: "c1", ID: 1}, Remote{Name: "c2", ID: 300, Etcd: etcdNowhere}); err == nil || !strings.Contains(err.Error(), "out of range 1-255") {
		t.Errorf("remote ID 300 in a mesh of 255: %v", err)
	}
	if _, err := NewImporter(Self{Name: "c1", ID: 1, MaxConnectedClusters: 511}, Remote{Name: "c2", ID: 300, Etcd: etcdNowhere}); err != nil {
		t.Errorf("remote ID 300 in a mesh of 511: %v", err)
	}

	for _, tc := range []struct {
		name   string
		self   uint32 // MaxConnectedClusters
		config string // c2's cluster config
		web    string // c2's web, with its cluster ID
		refuse string // in the log; empty: merged
	}{
		{"ID above 255", 255, `{"id":300,"capabilities":{"maxConnectedClusters":511}}`, withID(300),
			"cluster ID 300 is above this mesh's --max-connected-clusters 255"},
		{"511 declares 255", 511, `{"id":2,"capabilities":{"maxConnectedClusters":255}}`, c2Web,
			"it declares maxConnectedClusters 255, this cluster 511 (--max-connected-clusters)"},
		{"511 declares nothing", 511, `{"id":2,"capabilities":{}}`, c2Web,
			"it declares maxConnectedClusters 0, this cluster 511"},
		{"511 meets 511", 511, `{"id":300,"capabilities":{"maxConnectedClusters":511}}`, withID(300), ""},
		{"255 meets 511", 255, `{"id":2,"capabilities":{"maxConnectedClusters":511}}`, c2Web, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, true)
			f.im.self.MaxConnectedClusters = tc.self
			f.im.initial[0].ID = 0 // from the cluster config
			f.put(ClusterConfigKey("c2"), tc.config)
			f.put(ServiceKey("c2", "default", "web"), tc.web)
			f.put(SyncedKey("c2"), "now")
			f.run(t)
			if tc.refuse == "" {
				eventually(t, "merged", webWithC2, func() []string { return backendsOf(f.w, f.db, "web") })
				return
			}
			waitForLog(t, f.log, tc.refuse)
			waitFor(t, "synced without it", f.src.IsSynced)
			if got := backendsOf(f.w, f.db, "web"); !slices.Equal(got, webAlone) {
				t.Fatalf("a refused cluster's backends were merged: %q", got)
			}
		})
	}
}

var etcdNowhere = clientv3.Config{Endpoints: []string{"http://127.0.0.1:1"}}

func withID(id int) string {
	return strings.Replace(c2Web, `"clusterID":2`, `"clusterID":`+strconv.Itoa(id), 1)
}
