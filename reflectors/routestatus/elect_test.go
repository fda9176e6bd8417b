package routestatus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Two agents with one Lease: exactly one writes; when it stops (its
// context cancelled, the Lease released) the other takes over and writes
// what changed meanwhile, well within the lease duration.
func TestOneOfTwoWritersWritesAndTheOtherTakesOverWhenItStops(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("ns", "a")
	h.route(httpRoute("ns", "r1", 1, []gwv1.ParentReference{serviceParent("web")}, backend("", "a")))
	kube := fake.NewClientset()

	type agent struct {
		w       *Writer
		updates *atomic.Int64
		cancel  context.CancelFunc
		exited  chan struct{}
		err     error
		health  *cell.SimpleHealth
	}
	start := func(identity string) *agent {
		a := &agent{updates: new(atomic.Int64), exited: make(chan struct{})}
		health, simple := cell.NewSimpleHealth()
		a.health = simple
		a.w = h.writer(identity, countingClient{h.dyn, a.updates})
		ctx, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		go func() { defer close(a.exited); a.err = a.w.Run(ctx, kube.CoordinationV1(), health) }()
		t.Cleanup(func() { cancel(); <-a.exited })
		return a
	}
	agents := []*agent{start("agent-a"), start("agent-b")}
	leading := func(a *agent) bool { return testutil.ToFloat64(a.w.metrics.leader) == 1 }

	waitResolvedRefs(t, h, "ns", "r1", gwv1.RouteReasonResolvedRefs)
	h.route(httpRoute("ns", "r2", 1, []gwv1.ParentReference{serviceParent("web2")}, backend("", "a")))
	waitResolvedRefs(t, h, "ns", "r2", gwv1.RouteReasonResolvedRefs)
	var first, second *agent
	for i, a := range agents {
		if leading(a) {
			first, second = a, agents[1-i]
		}
	}
	if first == nil || leading(second) {
		t.Fatalf("leaders: agent-a %v, agent-b %v; want exactly one", leading(agents[0]), leading(agents[1]))
	}
	if first.health.Status != writing || second.health.Status != standingBy {
		t.Errorf("health: leader %q, other %q", first.health.Status, second.health.Status)
	}
	if first.updates.Load() != 2 || second.updates.Load() != 0 {
		t.Fatalf("status updates: leader %d, other %d; want 2 (r1, r2) and 0", first.updates.Load(), second.updates.Load())
	}
	lease, err := kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "lbstate-route-status", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != first.w.cfg.RouteStatusIdentity {
		t.Fatalf("lease %+v (%v), want held by the leader %s", lease, err, first.w.cfg.RouteStatusIdentity)
	}

	stopped := time.Now()
	first.cancel()
	if <-first.exited; first.err != nil {
		t.Fatal(first.err)
	}
	h.route(httpRoute("ns", "r3", 1, []gwv1.ParentReference{serviceParent("web3")}, backend("", "b")))
	waitResolvedRefs(t, h, "ns", "r3", gwv1.RouteReasonBackendNotFound)
	t.Logf("the other agent wrote %s after the leader stopped (lease duration %s)", time.Since(stopped).Round(time.Millisecond), first.w.cfg.RouteStatusLeaseDuration)
	if !leading(second) || leading(first) {
		t.Errorf("after the leader stopped: leading %v, stopped agent leading %v; want true, false", leading(second), leading(first))
	}
	if first.updates.Load() != 2 || second.updates.Load() != 1 {
		t.Errorf("status updates: stopped agent %d, new leader %d; want 2 and 1 (r3; r1 and r2 are as they should be)", first.updates.Load(), second.updates.Load())
	}
}
