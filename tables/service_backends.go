package tables

import (
	"iter"
	"slices"
	"strconv"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// A service's backends are found by their addresses, which the service's
// row keeps (lb.Service.BackendAddrs), not by an index of backends by
// service: a StateDB index entry costs every backend a leaf, a key and a
// watch channel (~210 bytes), an address in the row 32. Backends whose
// service has no row (they arrived before it, or it is not declared at
// all) have their addresses kept aside, in the orphan-backends table,
// until a row for the service appears and takes them over.

// OrphanBackendsTableName is the table of the backend addresses of
// services that have no row in the services table.
const OrphanBackendsTableName = "orphan-backends"

// OrphanBackends are the addresses of the backends of a service that has
// no row in the services table, sorted.
type OrphanBackends struct {
	Service lb.ServiceName `json:"service" yaml:"service"`
	Addrs   []lb.L3n4Addr  `json:"addrs" yaml:"addrs"`
}

func (o *OrphanBackends) TableHeader() []string { return []string{"Service", "Backends"} }

func (o *OrphanBackends) TableRow() []string {
	return []string{o.Service.String(), strconv.Itoa(len(o.Addrs))}
}

// OrphanBackendsByService is the primary index of orphan-backends.
var OrphanBackendsByService = byServiceName("service", func(o *OrphanBackends) lb.ServiceName { return o.Service })

// BackendsOf yields the backends that have an instance for a service,
// from any source, in the order of their addresses.
func (w *Writer) BackendsOf(txn statedb.ReadTxn, name lb.ServiceName) iter.Seq[*lb.Backend] {
	return w.backendsAt(txn, w.backendAddrs(txn, name), new(addrKeyBuf))
}

// backendsAt yields the backends rows at addrs in txn, looking each up
// with its key in buf.
func (w *Writer) backendsAt(txn statedb.ReadTxn, addrs []lb.L3n4Addr, buf *addrKeyBuf) iter.Seq[*lb.Backend] {
	return func(yield func(*lb.Backend) bool) {
		for _, addr := range addrs {
			if b, found := w.backendAt(txn, addr, buf); found && !yield(b) {
				return
			}
		}
	}
}

// backendAt and frontendAt look the row at an address up.
func (w *Writer) backendAt(txn statedb.ReadTxn, addr lb.L3n4Addr, buf *addrKeyBuf) (*lb.Backend, bool) {
	b, _, found := w.t.backends.Get(txn, BackendByAddress.QueryFromKey(buf.key(addr)))
	return b, found
}

func (w *Writer) frontendAt(txn statedb.ReadTxn, addr lb.L3n4Addr, buf *addrKeyBuf) (*lb.Frontend, bool) {
	fe, _, found := w.t.frontends.Get(txn, FrontendByAddress.QueryFromKey(buf.key(addr)))
	return fe, found
}

// backendAddrs returns the addresses of a service's backends: from its
// row, or else from those kept aside (orphanAddrs).
func (w *Writer) backendAddrs(txn statedb.ReadTxn, name lb.ServiceName) []lb.L3n4Addr {
	if s, found := w.service(txn, name); found {
		return s.BackendAddrs()
	}
	return w.orphanAddrs(txn, name)
}

// orphanAddrs returns the backend addresses kept aside for a service
// without a row: in orphan-backends, or in a Batch under way in txn, as
// the batch left them (setOrphanAddrs).
func (w *Writer) orphanAddrs(txn statedb.ReadTxn, name lb.ServiceName) []lb.L3n4Addr {
	if b := w.batch.Load(); b != nil && statedb.ReadTxn(b.txn) == txn {
		if addrs, ok := b.ch.orphansOf(name); ok {
			return addrs
		}
	}
	if w.t.orphans.NumObjects(txn) == 0 { // nearly always: spares building the key
		return nil
	}
	if o, _, found := w.t.orphans.Get(txn, OrphanBackendsByService.Query(name)); found {
		return o.Addrs
	}
	return nil
}

// setOrphanAddrs keeps a copy of addrs aside for a service without a row
// (none when empty). A Batch keeps them in ch until its end (writeOrphans
// in flush): a service deleted before its backends are released, or given
// backends before it is declared, in one batch, so costs no row.
func (w *Writer) setOrphanAddrs(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, addrs []lb.L3n4Addr) {
	w.keepOrphanAddrs(txn, ch, name, slices.Clip(slices.Clone(addrs)))
}

// keepOrphanAddrs is setOrphanAddrs with addrs that no one changes (the
// addresses of a service row that is not written): a Batch keeps them
// without a copy.
func (w *Writer) keepOrphanAddrs(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, addrs []lb.L3n4Addr) {
	if ch.batched {
		ch.setOrphans(name, slices.Clip(addrs))
		return
	}
	w.writeOrphans(txn, ch, name, addrs)
}

// writeOrphans makes orphan-backends hold addrs for a service.
func (w *Writer) writeOrphans(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, addrs []lb.L3n4Addr) {
	if len(addrs) == 0 && w.t.orphans.NumObjects(txn) == 0 { // a deleted service's backends went with it
		return
	}
	o, _, found := w.t.orphans.Get(txn, OrphanBackendsByService.Query(name))
	var err error
	switch {
	case len(addrs) > 0 && (!found || !slices.Equal(o.Addrs, addrs)):
		_, _, err = w.t.orphans.Insert(txn, &OrphanBackends{Service: name, Addrs: slices.Clone(addrs)})
	case len(addrs) == 0 && found:
		_, _, err = w.t.orphans.Delete(txn, o)
	}
	ch.fail(err)
}

// hasRow reports whether a service is kept as a row of the services
// table: it is declared or has an override.
func hasRow(s *lb.Service) bool { return len(s.Params) > 0 || s.Overridden() }

// changeBackendAddrs adds and removes addresses of a service's backends,
// in its row or in orphan-backends.
func (w *Writer) changeBackendAddrs(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, added, removed []lb.L3n4Addr) {
	if len(added) == 0 && len(removed) == 0 {
		return
	}
	svc, found := w.service(txn, name)
	var cur []lb.L3n4Addr
	if found {
		cur = svc.BackendAddrs()
	} else {
		cur = w.orphanAddrs(txn, name)
	}
	ch.mergedAddrs = mergeAddrs(ch.mergedAddrs[:0], cur, added, removed)
	next := ch.mergedAddrs
	switch _, own := ch.fresh[svc]; {
	case !found:
		w.setOrphanAddrs(txn, ch, name, next)
	case own:
		svc.SetBackendAddrs(next) // the batch's own row: no copy to insert
	default:
		ch.fail(w.insertService(txn, ch, svc.WithBackendAddrs(next)))
	}
}

// mergeAddrs sets buf to the sorted addresses of cur (sorted) and added,
// without those in removed. added and removed are sorted in place. A
// merge, not a sort of everything: a service with backends in ten
// clusters gets a few addresses at a time added to a hundred; and
// removed is walked beside them, not searched for each address (a
// remote cluster's release of ten of a service's 110 addresses was four
// comparisons an address).
func mergeAddrs(buf, cur, added, removed []lb.L3n4Addr) []lb.L3n4Addr {
	slices.SortFunc(added, lb.L3n4Addr.Compare)
	slices.SortFunc(removed, lb.L3n4Addr.Compare)
	next := buf
	i, j, k := 0, 0, 0
	for i < len(cur) || j < len(added) {
		var a lb.L3n4Addr
		switch c := 0; {
		case j == len(added):
			a, i = cur[i], i+1
		case i == len(cur):
			a, j = added[j], j+1
		default:
			c = cur[i].Compare(added[j])
			switch {
			case c < 0:
				a, i = cur[i], i+1
			case c > 0:
				a, j = added[j], j+1
			default:
				a, i, j = cur[i], i+1, j+1
			}
		}
		if n := len(next); n > 0 && next[n-1] == a {
			continue // added twice
		}
		// The addresses come in order: removed's below a are behind.
		for k < len(removed) && removed[k].Compare(a) < 0 {
			k++
		}
		if k < len(removed) && removed[k] == a {
			continue
		}
		next = append(next, a)
	}
	return next
}

// moveBackendAddrs keeps the backend addresses of a service whose row
// comes or goes: next (about to be written) takes over the addresses kept
// aside when its row is new (old is nil or has no row), and a row about to
// be deleted leaves its addresses aside. It returns the row to write.
func (w *Writer) moveBackendAddrs(txn statedb.WriteTxn, ch *changes, old, next *lb.Service) *lb.Service {
	switch {
	case hasRow(next) && (old == nil || !hasRow(old)):
		if addrs := w.orphanAddrs(txn, next.Name); len(addrs) > 0 {
			next = next.WithBackendAddrs(addrs)
			w.setOrphanAddrs(txn, ch, next.Name, nil)
		}
	case !hasRow(next) && len(next.BackendAddrs()) > 0:
		// next is not written, and its addresses stay as they are.
		w.keepOrphanAddrs(txn, ch, next.Name, next.BackendAddrs())
	}
	return next
}
