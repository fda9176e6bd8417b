package k8s

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// An established flow keeps its backend through a readiness flap: the
// endpoint that turns not ready keeps its lb_backends entry, under the
// same ID, in a standby slot, and takes new flows again once ready. Only
// leaving the slice deletes it. (Its entry was once deleted at the first
// failed probe, cutting every connection to it mid-stream.)
func TestEstablishedFlowKeepsItsBackendThroughReadinessFlap(t *testing.T) {
	for _, mode := range []string{"memory", "kernel"} {
		t.Run(mode, func(t *testing.T) {
			client := fake.NewClientset()
			maps := startPipeline(t, mode, client)
			ctx := context.Background()
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Port: 80}}},
			}
			if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			slice := flapSlice(true)
			if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			established := lb.MustParseL3n4Addr("10.0.0.1:8080/TCP")
			id := waitBackend(t, maps, established, "active", 2)

			for _, ready := range []bool{false, true, false} {
				if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, flapSlice(ready), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				state, takingNewFlows := "not-ready", uint16(1)
				if ready {
					state, takingNewFlows = "active", 2
				}
				if got := waitBackend(t, maps, established, state, takingNewFlows); got != id {
					t.Fatalf("ready=%v: backend %s has ID %d, was %d: established flows lost it", ready, established, got, id)
				}
			}

			gone := slice.DeepCopy()
			gone.Endpoints = gone.Endpoints[1:]
			if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, gone, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitMaps(t, maps, func(d *bpf.Dump) error {
				for _, b := range d.Backends {
					if b.L3n4Addr() == established {
						return fmt.Errorf("backend %d %s still there after it left the slice", b.ID, b.L3n4Addr())
					}
				}
				return nil
			})
		})
	}
}

// flapSlice is the slice of default/web: 10.0.0.1, ready or not, and
// 10.0.0.2, ready.
func flapSlice(ready bool) *discoveryv1.EndpointSlice {
	port := int32(8080)
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.0.0.2"}},
		},
	}
}

// waitBackend waits until addr is in lb_backends in state, and the
// frontend 10.96.0.1:80/TCP has takingNewFlows slots taking new flows and
// addr in one of its slots (a standby one when it takes no new flows). It
// returns addr's backend ID.
func waitBackend(t *testing.T, maps *bpf.Maps, addr lb.L3n4Addr, state string, takingNewFlows uint16) uint32 {
	t.Helper()
	var id uint32
	waitMaps(t, maps, func(d *bpf.Dump) error {
		id = 0
		for _, b := range d.Backends {
			if b.L3n4Addr() == addr && lb.BackendState(b.State).String() == state {
				id = b.ID
			}
		}
		if id == 0 {
			return fmt.Errorf("no backend %s in state %s: %+v", addr, state, d.Backends)
		}
		var count, slot uint16
		for _, s := range d.Services {
			switch {
			case s.Slot == 0:
				count = s.Count
			case s.BackendID == id:
				slot = s.Slot
			}
		}
		if count != takingNewFlows || slot == 0 || (state != "active") != (slot > count) {
			return fmt.Errorf("backend %d %s in slot %d, %d slots taking new flows: %+v", id, addr, slot, count, d.Services)
		}
		return nil
	})
	return id
}

// waitMaps waits until check accepts a dump of maps.
func waitMaps(t *testing.T, maps *bpf.Maps, check func(*bpf.Dump) error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := bpf.TakeDump(maps)
		if err == nil {
			err = check(d)
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startPipeline runs the Kubernetes source over client, with the tables,
// the reconciler and maps (memory or kernel), as an agent does.
func startPipeline(t *testing.T, mode string, client kubernetes.Interface) *bpf.Maps {
	var maps *bpf.Maps
	h := hive.New(
		statedb.Cell, job.Cell, cell.SimpleHealthCell,
		tables.Cell, bpf.Cell, reconciler.Cell, kubeapi.Cell, Cell,
		cell.Provide(func() kubernetes.Interface { return client }),
		cell.Invoke(func(m *bpf.Maps) { maps = m }),
	)
	hive.AddConfigOverride(h, func(c *kubeapi.NodeConfig) { c.K8sNodeName = "node-1" })
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = mode })
	if mode == "kernel" {
		pinDir := filepath.Join(bpftest.PinDir(t), "maps")
		hive.AddConfigOverride(h, func(c *bpf.Config) { c.LBPinDir = pinDir })
	}
	log := hivetest.Logger(t)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return maps
}
