package tables

import (
	"fmt"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// A Batch selects a service's backends as the same calls made one by one
// do, through every call that changes a backend row after the service's
// own upsert and before the batch's flush (wrote.go keeps the rows that
// upsert wrote): other sources' upserts, sets and releases of the same
// service, other services' calls on the same addresses, cluster sets,
// a cluster's or a source's removal, sweeps, health verdicts, a
// service deleted and declared again, redirects and routes that read the
// other service's backends. Two services, three sources and three
// backend addresses: nearly every call meets a row another one wrote.
func TestBatchSelectsAsUnbatchedThroughEveryBackendRowChange(t *testing.T) {
	playBatches(t, 17000, 12, true, func(g *opGen, w, ref *Writer, txn, refTxn statedb.WriteTxn) (string, error) {
		desc, apply := g.rowChurnOp()
		if err := apply(w, txn); err != nil {
			return desc, fmt.Errorf("%s: %w", desc, err)
		}
		if err := apply(ref, refTxn); err != nil {
			return desc, fmt.Errorf("%s (unbatched): %w", desc, err)
		}
		return desc, nil
	})
}

var (
	churnNames    = []lb.ServiceName{lb.NewServiceName("default", "a"), lb.NewServiceName("default", "b")}
	churnSources  = []lb.Source{lb.SourceAPI, lb.SourceK8s, lb.SourceKVStore}
	churnFrontend = []lb.L3n4Addr{lb.MustParseL3n4Addr("10.96.1.1:80/TCP"), lb.MustParseL3n4Addr("10.96.1.2:80/TCP")}
	churnBackends = []lb.L3n4Addr{
		lb.MustParseL3n4Addr("10.1.0.1:80/TCP"), lb.MustParseL3n4Addr("10.1.0.2:80/TCP"), lb.MustParseL3n4Addr("10.1.0.3:80/TCP"),
	}
)

// churnBackendParams is a random subset of churnBackends of one cluster,
// each with a weight and state that tell one source's instance from
// another's in the frontend's backends; now and then out of order, or
// with an address listed twice.
func (g *opGen) churnBackendParams(cluster uint32) []lb.BackendParams {
	var out []lb.BackendParams
	for _, addr := range churnBackends {
		if g.next(3) == 0 {
			continue
		}
		out = append(out, lb.BackendParams{
			Address:   addr,
			Weight:    []uint16{0, 1, 7, 100}[g.next(4)],
			State:     lb.BackendState(g.next(3)), // active, terminating, quarantined
			ClusterID: cluster,
		})
	}
	if len(out) > 1 && g.next(4) == 0 { // any order, and an address twice: the last says
		out[0], out[len(out)-1] = out[len(out)-1], out[0]
		dup := out[g.next(len(out))]
		dup.Weight++
		out = append(out, dup)
	}
	return out
}

// rowChurnOp generates one call over the small universe of
// TestBatchSelectsAsUnbatchedThroughEveryBackendRowChange, mostly calls
// that write backend rows.
func (g *opGen) rowChurnOp() (string, func(*Writer, statedb.WriteTxn) error) {
	k := g.next(len(churnNames))
	name, other := churnNames[k], churnNames[1-k]
	src := churnSources[g.next(len(churnSources))]
	cluster := uint32(g.next(3))
	switch g.next(18) {
	case 0, 1:
		p := lb.ServiceParams{Name: name, Source: src,
			Frontends: []lb.FrontendParams{{Address: churnFrontend[k], Type: lb.SVCTypeClusterIP}}}
		if g.next(2) == 0 { // remote clusters' backends selected too
			p.Annotations = map[string]string{lb.AnnotationGlobal: "true"}
		}
		return fmt.Sprintf("UpsertService(%s, %s, global=%v)", name, src, p.IsGlobal()),
			func(w *Writer, txn statedb.WriteTxn) error { return w.UpsertService(txn, p) }
	case 2:
		return fmt.Sprintf("DeleteService(%s, %s)", name, src),
			func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteService(txn, name, src) }
	case 3, 4, 5:
		bs := g.churnBackendParams(0)
		return fmt.Sprintf("UpsertBackends(%s, %s, %v)", name, src, churnDesc(bs)),
			func(w *Writer, txn statedb.WriteTxn) error { return w.UpsertBackends(txn, name, src, bs...) }
	case 6:
		bs := g.churnBackendParams(0)
		return fmt.Sprintf("SetBackends(%s, %s, %v)", name, src, churnDesc(bs)),
			func(w *Writer, txn statedb.WriteTxn) error { return w.SetBackends(txn, name, src, bs...) }
	case 7:
		var addrs []lb.L3n4Addr
		for _, a := range churnBackends {
			if g.next(2) == 0 {
				addrs = append(addrs, a)
			}
		}
		return fmt.Sprintf("ReleaseBackends(%s, %s, %v)", name, src, addrs),
			func(w *Writer, txn statedb.WriteTxn) error { return w.ReleaseBackends(txn, name, src, addrs...) }
	case 8:
		bs := g.churnBackendParams(cluster)
		return fmt.Sprintf("SetClusterBackends(%s, %s, %d, %v)", name, src, cluster, churnDesc(bs)),
			func(w *Writer, txn statedb.WriteTxn) error {
				return w.SetClusterBackends(txn, name, src, cluster, bs...)
			}
	case 9:
		var sets []ClusterBackends
		for id := range uint32(3) {
			if g.next(2) == 0 {
				sets = append(sets, ClusterBackends{ClusterID: id, Backends: g.churnBackendParams(id)})
			}
		}
		return fmt.Sprintf("SetClustersBackends(%s, %s, %d sets)", name, src, len(sets)),
			func(w *Writer, txn statedb.WriteTxn) error { return w.SetClustersBackends(txn, name, src, sets...) }
	case 10:
		return fmt.Sprintf("DeleteSourceCluster(%s, %d)", src, cluster),
			func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteSourceCluster(txn, src, cluster) }
	case 11, 12:
		addr := churnBackends[g.next(len(churnBackends))]
		v := lb.HealthVerdict{Healthy: g.next(2) == 0}
		if g.next(2) == 0 { // details alone change too
			v.LastError, v.Since = "refused", time.Unix(1700000000+int64(g.next(2)), 0)
		}
		return fmt.Sprintf("SetBackendVerdict(%s, %+v)", addr, v),
			func(w *Writer, txn statedb.WriteTxn) error {
				if _, _, found := w.Backends().Get(txn, BackendByAddress.Query(addr)); !found {
					return nil // (refused as invalid, and the same unbatched)
				}
				return w.SetBackendVerdict(txn, addr, v)
			}
	case 13:
		return fmt.Sprintf("DeleteSource(%s)", src),
			func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteSource(txn, src) }
	case 14:
		what := []Contributions{AllContributions, Declarations, Redirects | Routes}[g.next(3)]
		return fmt.Sprintf("SweepSourceOf(%s, %b, keep %s)", src, what, other),
			func(w *Writer, txn statedb.WriteTxn) error {
				return w.SweepSourceOf(txn, src, what, func(n lb.ServiceName) bool { return n == other })
			}
	case 15:
		r := lb.Redirect{Source: src, To: other}
		return fmt.Sprintf("SetRedirect(%s -> %s, %s)", name, other, src),
			func(w *Writer, txn statedb.WriteTxn) error { return w.SetRedirect(txn, name, r) }
	case 16:
		r := lb.Route{Source: src, Name: "r", Backends: []lb.RouteBackend{{Service: other, Weight: 1}, {Service: name, Weight: uint32(g.next(2))}}}
		return fmt.Sprintf("SetRoute(%s -> %s, %s)", name, other, src),
			func(w *Writer, txn statedb.WriteTxn) error { return w.SetRoute(txn, name, r) }
	}
	return fmt.Sprintf("ClearRedirect+ClearRoute(%s, %s)", name, src),
		func(w *Writer, txn statedb.WriteTxn) error {
			if err := w.ClearRedirect(txn, name, src); err != nil {
				return err
			}
			return w.ClearRoute(txn, name, src, 0)
		}
}

// churnDesc prints backends as address=weight/state@cluster.
func churnDesc(bs []lb.BackendParams) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, fmt.Sprintf("%s=%d/%d@%d", b.Address, b.Weight, b.State, b.ClusterID))
	}
	return out
}
