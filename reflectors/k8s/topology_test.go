package k8s

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

func TestConvertTopologyKeys(t *testing.T) {
	for _, tc := range []struct {
		name       string
		meta, spec string
		keys       []string
		replaces   bool
		err        string
	}{
		{name: "absent"},
		{name: "ordered with fallback", meta: `  annotations: {lbstate.io/topology-keys: "kubernetes.io/hostname, topology.kubernetes.io/zone,*"}`,
			keys: []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone", "*"}},
		{name: "replaces trafficDistribution", meta: `  annotations: {lbstate.io/topology-keys: "topology.kubernetes.io/zone"}`,
			spec: "  trafficDistribution: PreferClose", keys: []string{"topology.kubernetes.io/zone"}, replaces: true},
		{name: "replaces topology-mode", meta: `  annotations: {lbstate.io/topology-keys: "a", service.kubernetes.io/topology-mode: Auto}`,
			keys: []string{"a"}, replaces: true},
		{name: "empty", meta: `  annotations: {lbstate.io/topology-keys: ""}`, err: "empty list"},
		{name: "empty key", meta: `  annotations: {lbstate.io/topology-keys: "a,,b"}`, err: "key 2: empty"},
		{name: "star not last", meta: `  annotations: {lbstate.io/topology-keys: "*,a"}`, err: `key 1: "*" must be the last key`},
		{name: "duplicate", meta: `  annotations: {lbstate.io/topology-keys: "a,b,a"}`, err: `key 3: "a" listed twice`},
		{name: "seventeen keys", meta: `  annotations: {lbstate.io/topology-keys: "` + strings.Repeat("k,", 16) + `z"}`, err: "17 keys, at most 16 allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, replaces, err := ConvertTopologyKeys(decodeService(t, serviceWith(tc.meta, tc.spec, "")))
			if tc.err != "" {
				want := "service default/web: annotation lbstate.io/topology-keys: "
				if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q...%q", err, want, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(keys, tc.keys) || replaces != tc.replaces {
				t.Fatalf("got %q, %v, %v; want %q, %v", keys, replaces, err, tc.keys, tc.replaces)
			}
		})
	}
}

// A bad topology-keys annotation is an error of the annotation: logged
// naming the Service, counted once (not again when the node's change
// converts every Service again), and the Service is declared without
// keys.
func TestBadTopologyKeysRejectOnlyTheAnnotation(t *testing.T) {
	var logs bytes.Buffer
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := reflectors.NewSource(w, lb.SourceK8s, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig
	cfg = cfg.WithNode("node-1")
	r, err := NewReflector(cfg, src, lb.SourceK8s)
	if err != nil {
		t.Fatal(err)
	}
	svc := decodeService(t, serviceWith(`  annotations: {lbstate.io/topology-keys: "*,zone"}`, "", ""))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	r.apply([]event{{obj: svc}})
	r.apply([]event{{obj: svc.DeepCopy()}, {obj: node}})
	if src.Errors() != 1 || strings.Count(logs.String(), "topology-keys") != 1 || !strings.Contains(logs.String(), "service default/web") {
		t.Errorf("%d errors, logs:\n%s", src.Errors(), logs.String())
	}
	s, _, found := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(lb.NewServiceName("default", "web")))
	if !found || len(s.Policy().TopologyKeys) != 0 {
		t.Fatalf("service found=%v, want it declared without topology keys", found)
	}
}

// Every Node's labels reach the node-labels table, from full Nodes (a
// manifests directory) and from the metadata informer's partial objects;
// a deleted Node's go.
func TestNodeLabelsFromEveryNode(t *testing.T) {
	w, db, cfg := newTestTables(t, "node-1")
	r := newTestReflector(t, cfg, w)
	full := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"zone": "a"}}}
	partial := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "node-3", Labels: map[string]string{"zone": "b"}}}
	r.apply([]event{{obj: full}, {obj: partial}})
	labels := func() map[string]string {
		out := map[string]string{}
		for n := range w.NodeLabels().All(db.ReadTxn()) {
			out[n.Name], _ = n.Get("zone")
		}
		return out
	}
	if got := labels(); len(got) != 2 || got["node-2"] != "a" || got["node-3"] != "b" {
		t.Fatalf("node labels: %v", got)
	}
	r.apply([]event{{obj: partial, deleted: true}})
	if got := labels(); len(got) != 1 || got["node-2"] != "a" {
		t.Fatalf("node labels after node-3 was deleted: %v", got)
	}
}
