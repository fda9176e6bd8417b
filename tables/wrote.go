package tables

import (
	"slices"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// A service's frontends are selected again at the end of the call or
// Batch that changed its backends, from rows the call has just written:
// flush finds those rows where upsertBackends left them, not by a second
// lookup in the backends table (candidates of 100,000 services with ten
// backends: 0.11 -> 0.06 s of CPU). A service's record keeps where in
// changes.wroteRows its last upsertBackends put the rows it wrote.
//
// What a candidate reads of a row is the service's own instances and
// Unhealthy. Only calls for the service change its instances, and it is
// the last of them that counts: an upsertBackends replaces the record's
// rows, and a release of any of its rows drops them. Calls for another
// service rewrite a shared row with this service's instances as they
// were. What changes rows across services (a health verdict, a source's
// removal) moves changes.backendEpoch on, which drops every record's.

// wroteRange is where a record's rows are in changes.wroteRows, and the
// backendEpoch they were written in; n < 0: none.
type wroteRange struct {
	at, n int32
	epoch uint32
}

// noteWrote records that upsertBackends for a service wrote
// ch.wroteRows[start:]. A call that wrote nothing makes the service no
// record (a source listing its world again makes thousands of them in a
// batch).
func (ch *changes) noteWrote(name lb.ServiceName, start int) {
	if start == len(ch.wroteRows) {
		ch.dropWrote(name)
		return
	}
	t := &ch.touched[ch.at(name)]
	t.wrote = wroteRange{at: int32(start), n: int32(len(ch.wroteRows) - start), epoch: ch.backendEpoch}
}

// dropWrote forgets the rows written for a service: some changed since.
func (ch *changes) dropWrote(name lb.ServiceName) {
	if i, ok := ch.find(name); ok {
		ch.touched[i].wrote = wroteRange{n: -1}
	}
}

// wroteFor returns the rows recorded for record i, sorted by address
// (of one address, the last written last), or none.
func (ch *changes) wroteFor(i int32) []*lb.Backend {
	if i < 0 {
		return nil
	}
	r := ch.touched[i].wrote
	if r.n <= 0 || r.epoch != ch.backendEpoch {
		return nil
	}
	rows := ch.wroteRows[r.at : r.at+r.n]
	if !slices.IsSortedFunc(rows, byAddress) {
		slices.SortStableFunc(rows, byAddress)
	}
	return rows
}

func byAddress(a, b *lb.Backend) int { return a.Address.Compare(b.Address) }

// rowCandidates is candidates for the service of record i, whose rows
// recorded (wroteFor) are used as they are and the others looked up.
func (w *Writer) rowCandidates(txn statedb.ReadTxn, ch *changes, i int32, addrs []lb.L3n4Addr, cands []Candidate) []Candidate {
	name := ch.name(i)
	rows := ch.wroteFor(i)
	if len(rows) == 0 {
		return w.candidates(txn, name, addrs, cands, &ch.key)
	}
	j := 0
	for _, addr := range addrs {
		for j < len(rows) && rows[j].Address.Compare(addr) < 0 {
			j++
		}
		var b *lb.Backend
		for ; j < len(rows) && rows[j].Address == addr; j++ {
			b = rows[j] // the last of the address's, the newest
		}
		if b == nil {
			var found bool
			if b, found = w.backendAt(txn, addr, &ch.key); !found {
				continue
			}
		}
		cands = appendCandidate(cands, b, name)
	}
	return cands
}
