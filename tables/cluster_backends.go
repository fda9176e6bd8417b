package tables

import (
	"fmt"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
)

// ClusterBackends is one cluster's whole set of a source's backends of a
// service, for SetClustersBackends.
type ClusterBackends struct {
	ClusterID uint32             // every backend must carry it
	Backends  []lb.BackendParams // nil: the cluster has none left
	Cause     *Cause             // what the history says caused it; nil: the transaction's (SetCause)
}

// SetClustersBackends is SetClusterBackends for several clusters at once,
// each set in the order given: the service's backends are looked at once
// for all of them, not once per cluster. Remote clusters publish the same
// global services and change them together (a port renamed everywhere, a
// rollout), and a service merged from ten clusters has over a hundred
// backends, each a lookup: a group of clusters' changes to one service
// costs one look instead of ten.
//
// The end result is that of SetClusterBackends called for each set in
// turn. If any set is invalid (a backend without the set's cluster ID, a
// cluster named twice), the call returns that error and changes nothing:
// a caller that wants the valid sets applied calls SetClusterBackends for
// each.
func (w *Writer) SetClustersBackends(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source, sets ...ClusterBackends) error {
	for i := range sets {
		if err := validateClusterBackends(name, src, &sets[i]); err != nil {
			return err
		}
		for j := range i {
			if sets[j].ClusterID == sets[i].ClusterID {
				return Invalidf(fmt.Sprintf("service %s (%s)", name, src), "clusterID", "cluster %d given twice", sets[i].ClusterID)
			}
		}
	}
	if len(sets) == 0 {
		return nil
	}
	ch := w.begin(txn)
	// One look at the service's backends finds the stale ones of every
	// set (each backend instance has one cluster); owner[i] is the set
	// whose cluster stale[i] is.
	// (Arrays on the stack for the usual few sets: SetClusterBackends,
	// one set, allocates nothing here.)
	var ownerBuf [32]int
	var keepBuf [4]smallset.Index[lb.BackendParams, lb.L3n4Addr]
	stale, owner, keep := ch.stale[:0], ownerBuf[:0], keepBuf[:0]
	for range sets {
		keep = append(keep, smallset.NewIndex(func(b *lb.BackendParams) lb.L3n4Addr { return b.Address }))
	}
	for _, addr := range w.backendAddrs(txn, name) {
		b, found := w.backendAt(txn, addr, &ch.key)
		if !found {
			continue
		}
		inst, ok := b.Instance(name, src)
		if !ok {
			continue
		}
		for i := range sets {
			if inst.Params.ClusterID == sets[i].ClusterID {
				if !keep[i].Has(sets[i].Backends, b.Address) && !listedBefore(sets, keep, i, b.Address) {
					stale, owner = append(stale, b), append(owner, i)
				}
				break
			}
		}
	}
	// Every set's release before any upsert: the rows found above are
	// those the tables held before the call, and a later set may list an
	// address an earlier one releases (a backend that moved between
	// clusters); one an earlier set lists is not released (listedBefore).
	cause := ch.cause
	var rowsBuf [16]*lb.Backend
	for i := range sets {
		rows := stale
		if len(sets) > 1 {
			rows = rowsBuf[:0]
			for k, o := range owner {
				if o == i {
					rows = append(rows, stale[k])
				}
			}
		}
		if len(rows) > 0 {
			ch.cause = sets[i].causeIn(ch, cause)
			w.releaseRows(txn, ch, name, src, rows)
		}
	}
	for i := range sets {
		ch.cause = sets[i].causeIn(ch, cause)
		w.upsertBackends(txn, ch, name, src, sets[i].Backends)
	}
	ch.cause = cause
	clear(rowsBuf[:])
	clear(stale) // no table objects kept alive in ch
	ch.stale = stale[:0]
	return w.end(txn, ch)
}

// listedBefore reports whether a set before sets[i] lists addr. Called
// in turn, that set would have taken the backend over from sets[i]'s
// cluster, whose set then finds it no longer its own and leaves it: a
// release here would delete the row and make it anew, without its
// health verdict, and name sets[i]'s cause for a change it did not make.
// (Only for a backend sets[i] drops: rare, and the sets are few.)
func listedBefore(sets []ClusterBackends, keep []smallset.Index[lb.BackendParams, lb.L3n4Addr], i int, addr lb.L3n4Addr) bool {
	for j := range i {
		if keep[j].Has(sets[j].Backends, addr) {
			return true
		}
	}
	return false
}

// validateClusterBackends reports a set with an invalid backend or one
// of another cluster.
func validateClusterBackends(name lb.ServiceName, src lb.Source, set *ClusterBackends) error {
	if err := validateBackends(name, src, set.Backends); err != nil {
		return err
	}
	for i := range set.Backends {
		if id := set.Backends[i].ClusterID; id != set.ClusterID {
			return Invalidf(fmt.Sprintf("service %s (%s)", name, src), "backend "+set.Backends[i].Address.String(), "clusterID %d, want %d", id, set.ClusterID)
		}
	}
	return nil
}

// causeIn is the cause the history records for the set: its own, or
// else the transaction's (otherwise); none without a history.
func (set *ClusterBackends) causeIn(ch *changes, otherwise *Cause) *Cause {
	if set.Cause == nil || ch.jt == nil {
		return otherwise
	}
	return set.Cause
}
