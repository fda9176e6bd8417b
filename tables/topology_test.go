package tables

import (
	"testing"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lbstate/lbstate/lb"
)

// topoWriter has this node (node1, zone a), node2 in zone a and node3 in
// zone b, and three services: near (zone then *) with backends on node2
// and node3, far (zone, strict) with a backend on node3 only, and plain
// (no keys) with a backend on node2.
func topoWriter(t *testing.T) *Writer {
	w := newTestWriter(t)
	svc := func(name, addr string, keys ...string) lb.ServiceParams {
		return lb.ServiceParams{
			Name: lb.NewServiceName("default", name), Source: lb.SourceK8s, TopologyKeys: keys,
			Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr(addr), Type: lb.SVCTypeClusterIP}},
		}
	}
	be := func(addr, node string) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: 100, NodeName: node}
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		for _, err := range []error{
			w.SetLocalNode(txn, lb.SourceK8s, lb.Node{Name: "node1", Labels: map[string]string{zoneKey: "a"}}),
			w.SetNodeLabels(txn, "node2", map[string]string{zoneKey: "a"}),
			w.SetNodeLabels(txn, "node3", map[string]string{zoneKey: "b"}),
			w.UpsertService(txn, svc("near", "10.96.0.1:80/TCP", zoneKey, lb.TopologyKeyAny)),
			w.UpsertBackends(txn, lb.NewServiceName("default", "near"), lb.SourceK8s, be("10.0.0.2:80/TCP", "node2"), be("10.0.0.3:80/TCP", "node3")),
			w.UpsertService(txn, svc("far", "10.96.0.2:80/TCP", zoneKey)),
			w.UpsertBackends(txn, lb.NewServiceName("default", "far"), lb.SourceK8s, be("10.0.1.3:80/TCP", "node3")),
			w.UpsertService(txn, svc("plain", "10.96.0.3:80/TCP")),
			w.UpsertBackends(txn, lb.NewServiceName("default", "plain"), lb.SourceK8s, be("10.0.2.2:80/TCP", "node2")),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	return w
}

// frontendState returns a frontend's selected backends, topology level
// and revision.
func frontendState(t *testing.T, w *Writer, addr string) (string, string, statedb.Revision) {
	t.Helper()
	fe, rev, found := w.Frontends().Get(w.db.ReadTxn(), FrontendByAddress.Query(lb.MustParseL3n4Addr(addr)))
	if !found {
		t.Fatalf("frontend %s not found", addr)
	}
	return fe.TableRow()[4], fe.TopologyLevel(), rev
}

func TestNodeRelabelReselectsExactlyTheDependentFrontends(t *testing.T) {
	w := topoWriter(t)
	near, level, nearRev := frontendState(t, w, "10.96.0.1:80/TCP")
	if near != "10.0.0.2:80/TCP, 10.0.0.3:80/TCP (weight=0)" || level != zoneKey {
		t.Fatalf("near before: %q at %q", near, level)
	}
	far, level, farRev := frontendState(t, w, "10.96.0.2:80/TCP")
	if far != "10.0.1.3:80/TCP (weight=0)" || level != lb.TopologyLevelNone {
		t.Fatalf("far before: %q at %q", far, level)
	}
	_, _, plainRev := frontendState(t, w, "10.96.0.3:80/TCP")

	// node2 moves to zone b: near falls back to *, far and plain have no
	// backend on node2 that reads its labels.
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetNodeLabels(txn, "node2", map[string]string{zoneKey: "b"})
	})
	near, level, rev := frontendState(t, w, "10.96.0.1:80/TCP")
	if near != "10.0.0.2:80/TCP, 10.0.0.3:80/TCP" || level != lb.TopologyKeyAny || rev == nearRev {
		t.Errorf("near after node2 moved: %q at %q (rev %d, was %d)", near, level, rev, nearRev)
	}
	if _, _, rev := frontendState(t, w, "10.96.0.2:80/TCP"); rev != farRev {
		t.Errorf("far rewritten by a node it has no backend on")
	}
	if _, _, rev := frontendState(t, w, "10.96.0.3:80/TCP"); rev != plainRev {
		t.Errorf("plain (no topology keys) rewritten by a relabel")
	}

	// node3 moves to zone a: far takes its backend, in the same write.
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetNodeLabels(txn, "node3", map[string]string{zoneKey: "a"})
	})
	if far, level, _ := frontendState(t, w, "10.96.0.2:80/TCP"); far != "10.0.1.3:80/TCP" || level != zoneKey {
		t.Errorf("far after node3 moved into our zone: %q at %q", far, level)
	}
}

func TestNodeLabelNotInAnyKeyReselectsNothing(t *testing.T) {
	w := topoWriter(t)
	_, _, nearRev := frontendState(t, w, "10.96.0.1:80/TCP")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetNodeLabels(txn, "node2", map[string]string{zoneKey: "a", "example.com/rack": "r7"})
	})
	if _, _, rev := frontendState(t, w, "10.96.0.1:80/TCP"); rev != nearRev {
		t.Errorf("a label no service lists re-selected near")
	}
}

func TestDeletedNodeMatchesOnlyAny(t *testing.T) {
	w := topoWriter(t)
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.DeleteNode(txn, "node2") })
	near, level, _ := frontendState(t, w, "10.96.0.1:80/TCP")
	if near != "10.0.0.2:80/TCP, 10.0.0.3:80/TCP" || level != lb.TopologyKeyAny {
		t.Errorf("near after node2 was deleted: %q at %q", near, level)
	}
}

func TestLocalNodeRelabelReselectsServicesListingTheLabel(t *testing.T) {
	w := topoWriter(t)
	_, _, plainRev := frontendState(t, w, "10.96.0.3:80/TCP")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetLocalNode(txn, lb.SourceK8s, lb.Node{Name: "node1", Labels: map[string]string{zoneKey: "b"}})
	})
	if far, level, _ := frontendState(t, w, "10.96.0.2:80/TCP"); far != "10.0.1.3:80/TCP" || level != zoneKey {
		t.Errorf("far after this node moved to zone b: %q at %q", far, level)
	}
	if near, _, _ := frontendState(t, w, "10.96.0.1:80/TCP"); near != "10.0.0.3:80/TCP, 10.0.0.2:80/TCP (weight=0)" {
		t.Errorf("near after this node moved to zone b: %q", near)
	}
	if _, _, rev := frontendState(t, w, "10.96.0.3:80/TCP"); rev != plainRev {
		t.Errorf("plain (no topology keys) rewritten by a local relabel")
	}
}

func TestTopologyServicesTableFollowsKeysAndBackends(t *testing.T) {
	w := topoWriter(t)
	rows := func() map[string]string {
		out := map[string]string{}
		for r := range w.t.topology.All(w.db.ReadTxn()) {
			out[r.Name.String()] = r.TableRow()[1] + " on " + r.TableRow()[2]
		}
		return out
	}
	got := rows()
	if len(got) != 2 || got["default/near"] != "topology.kubernetes.io/zone,* on node2, node3" || got["default/far"] != "topology.kubernetes.io/zone on node3" {
		t.Fatalf("topology-services: %v", got)
	}
	// far drops its keys: it no longer reads node labels. near is
	// redirected and still does: the backends the redirect hides are
	// selected as without it, for when it goes.
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{
			Name: lb.NewServiceName("default", "far"), Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.2:80/TCP"), Type: lb.SVCTypeClusterIP}},
		}); err != nil {
			return err
		}
		return w.SetRedirect(txn, lb.NewServiceName("default", "near"), lb.Redirect{Source: lb.SourceK8s, To: lb.NewServiceName("default", "plain")})
	})
	if got := rows(); len(got) != 1 || got["default/near"] != "topology.kubernetes.io/zone,* on node2, node3" {
		t.Errorf("topology-services after far's keys stopped applying: %v", got)
	}
	if far, level, _ := frontendState(t, w, "10.96.0.2:80/TCP"); far != "10.0.1.3:80/TCP" || level != "" {
		t.Errorf("far without keys: %q at %q", far, level)
	}
}

func TestTopologyMetricCountsFrontendsWithoutBackends(t *testing.T) {
	w := topoWriter(t)
	c := NewTopologyCollector(w.db, w.Frontends())
	if got := testutil.ToFloat64(c); got != 1 { // far: strict, nothing in zone a
		t.Fatalf("gauge = %v, want 1", got)
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetNodeLabels(txn, "node3", map[string]string{zoneKey: "a"})
	})
	if got := testutil.ToFloat64(c); got != 0 {
		t.Fatalf("gauge after node3 joined our zone = %v, want 0", got)
	}
}
