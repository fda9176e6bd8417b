package k8s

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// "Why did backend 10.0.0.1 leave frontend 10.96.0.1:80?" The history
// names the EndpointSlice update, with its resourceVersion, that removed
// it, and says the change reached the maps.
func TestHistoryNamesTheEndpointSliceUpdateThatRemovedABackend(t *testing.T) {
	client := fake.NewClientset()
	var w *tables.Writer
	h := hive.New(
		statedb.Cell, job.Cell, cell.SimpleHealthCell,
		tables.Cell, bpf.Cell, reconciler.Cell, kubeapi.Cell, Cell,
		cell.Provide(func() kubernetes.Interface { return client }),
		cell.Invoke(func(wr *tables.Writer) { w = wr }),
	)
	hive.AddConfigOverride(h, func(c *kubeapi.NodeConfig) { c.K8sNodeName = "node-1" })
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "memory" })
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })

	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, flapSlice(true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	waitHistory(t, w, fe, func(r tables.HistoryRecord) bool {
		return len(r.Added) == 2 || slices.ContainsFunc(r.Changed, isBackendLine)
	})

	gone := flapSlice(true)
	gone.Endpoints = gone.Endpoints[1:]
	gone.ResourceVersion = "4711"
	updated, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, gone, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := waitHistory(t, w, fe, func(r tables.HistoryRecord) bool {
		return len(r.Removed) == 1 && r.Outcome.State == tables.OutcomeDone
	})
	want := "k8s EndpointSlice default/web-1"
	if updated.ResourceVersion != "" {
		want += " resourceVersion " + updated.ResourceVersion
	}
	if r.Cause != want || !strings.HasPrefix(r.Removed[0], "10.0.0.1:8080/TCP") || r.Service.String() != "default/web" {
		t.Fatalf("why did 10.0.0.1 leave %s: %+v; want cause %q", fe, r, want)
	}
}

func isBackendLine(s string) bool { return strings.HasPrefix(s, "backend ") }

// waitHistory polls the history of fe until ok accepts its newest record.
func waitHistory(t *testing.T, w *tables.Writer, fe lb.L3n4Addr, ok func(tables.HistoryRecord) bool) tables.HistoryRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, watch := w.History().Records(tables.HistoryQuery{Frontend: fe})
		if len(recs) > 0 && ok(recs[len(recs)-1]) {
			return recs[len(recs)-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("history of %s: no matching record by the deadline: %+v", fe, recs)
		}
		select {
		case <-watch:
		case <-time.After(50 * time.Millisecond):
		}
	}
}
