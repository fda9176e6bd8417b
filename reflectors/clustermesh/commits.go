package clustermesh

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// commits applies the writes of every cluster of an importer, grouping
// those that wait into one transaction (a group commit): while one
// transaction commits, the clusters whose watches answered meanwhile
// queue theirs, and the next transaction applies them all. Remote
// clusters publish the same global services, so their changes to one
// service arrive together; one Writer.Batch then refreshes the service,
// and the reconciler writes its frontend, once for all of them instead
// of once per cluster (a service with backends in ten clusters was
// refreshed ten times over a growing set of backends). The clusters of
// a group that replace their backends of one service do it in one
// Writer.SetClustersBackends call, which looks at the service's backends
// once for all of them.
//
// A cluster waits for its write, so its writes stay in the order of its
// revisions, and a cluster is never twice in one group.
type commits struct {
	src     *reflectors.Source
	mu      sync.Mutex // queue
	queue   []*writeRequest
	writing sync.Mutex // held by the one goroutine applying a group
}

// writeRequest is one cluster's write: the backends each local service
// gets from it (nil: none), what the history says caused it, and which
// services already have backends from it (the others need no release).
type writeRequest struct {
	cluster string
	id      uint32 // the cluster ID its backends carry
	next    map[lb.ServiceName][]lb.BackendParams
	written map[lb.ServiceName]struct{}
	cause   *tables.Cause

	// Set by the commit, before done is closed.
	rejected map[lb.ServiceName]bool
	err      error
	done     chan struct{}
}

// write applies r, with whatever other clusters queued meanwhile, and
// returns once it is committed (or failed: r.err).
func (g *commits) write(r *writeRequest) {
	r.done = make(chan struct{})
	g.mu.Lock()
	g.queue = append(g.queue, r)
	g.mu.Unlock()

	g.writing.Lock()
	g.mu.Lock()
	group := g.queue
	g.queue = nil
	g.mu.Unlock()
	if len(group) > 0 { // else the previous holder applied r with its group
		g.apply(group)
	}
	g.writing.Unlock()
	<-r.done
}

// apply writes a group in one transaction. If that fails for another
// reason than invalid input, each request is written again alone, so
// that one cluster's failure (its connection starts over) is not the
// others'.
func (g *commits) apply(group []*writeRequest) {
	err := g.commit(group)
	if err != nil && len(group) > 1 {
		for _, r := range group {
			r.err = g.commit([]*writeRequest{r})
			close(r.done)
		}
		return
	}
	for _, r := range group {
		r.err = err
		close(r.done)
	}
}

// commit writes the requests in one transaction: invalid input is
// rejected service by service and the rest committed; any other error
// aborts the transaction.
func (g *commits) commit(group []*writeRequest) error {
	w := g.src.Writer
	txn := w.WriteTxn()
	defer txn.Abort()
	for _, r := range group {
		r.rejected = nil
	}
	err := w.Batch(txn, func() error {
		if len(group) == 1 {
			r := group[0]
			w.SetCause(txn, r.cause)
			for name, backends := range r.next {
				if err := g.writeOne(txn, r, name, backends); err != nil {
					return err
				}
			}
			return nil
		}
		for name, ws := range byService(group) {
			if err := g.writeService(txn, name, ws); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	txn.Commit()
	return nil
}

// serviceWrite is one request's backends of a service.
type serviceWrite struct {
	r        *writeRequest
	backends []lb.BackendParams
}

// byService regroups a group's writes by the service they change.
func byService(group []*writeRequest) map[lb.ServiceName][]serviceWrite {
	n := 0
	for _, r := range group {
		n = max(n, len(r.next))
	}
	out := make(map[lb.ServiceName][]serviceWrite, n)
	for _, r := range group {
		for name, backends := range r.next {
			out[name] = append(out[name], serviceWrite{r, backends})
		}
	}
	return out
}

// writeService writes several clusters' backends of one service, with
// the result of one write after another in the group's order (of two
// clusters that offer one address, the later owns it). If one of them
// had backends there, they are one Writer call, which looks at the
// service's backends once for all of them: a cluster that had none is a
// set there too (it has nothing to release, and a set upserts), so that
// it keeps its place in the order. If one set is invalid, they are one
// call each, so that only that cluster's write is rejected; the call
// changed nothing, so none is applied twice. Without one that had
// backends there, each is upserted, with no look at the others.
func (g *commits) writeService(txn statedb.WriteTxn, name lb.ServiceName, ws []serviceWrite) error {
	w := g.src.Writer
	if len(ws) > 1 && slices.ContainsFunc(ws, func(sw serviceWrite) bool { return sw.had(name) }) {
		sets := make([]tables.ClusterBackends, 0, len(ws))
		for _, sw := range ws {
			if sw.had(name) || len(sw.backends) > 0 { // (else nothing to write)
				sets = append(sets, tables.ClusterBackends{ClusterID: sw.r.id, Backends: sw.backends, Cause: sw.r.cause})
			}
		}
		err := w.SetClustersBackends(txn, name, g.src.ID(), sets...)
		if !errors.Is(err, tables.ErrInvalid) {
			return err
		}
	}
	for _, sw := range ws {
		w.SetCause(txn, sw.r.cause)
		if err := g.writeOne(txn, sw.r, name, sw.backends); err != nil {
			return err
		}
	}
	return nil
}

// had reports whether the request's cluster had backends of a service
// before it.
func (sw serviceWrite) had(name lb.ServiceName) bool {
	_, had := sw.r.written[name]
	return had
}

// writeOne writes one cluster's backends of a service; invalid input
// is rejected and recorded in r.
func (g *commits) writeOne(txn statedb.WriteTxn, r *writeRequest, name lb.ServiceName, backends []lb.BackendParams) error {
	w := g.src.Writer
	var err error
	if _, had := r.written[name]; had {
		err = w.SetClusterBackends(txn, name, g.src.ID(), r.id, backends...)
	} else if len(backends) > 0 {
		// It has nothing there yet: nothing to release, and no need to
		// look at every backend the service has.
		err = w.UpsertBackends(txn, name, g.src.ID(), backends...)
	}
	if errors.Is(err, tables.ErrInvalid) {
		g.src.Reject(fmt.Errorf("remote cluster %s: %w", r.cluster, err))
		if r.rejected == nil {
			r.rejected = map[lb.ServiceName]bool{}
		}
		r.rejected[name] = true
		return nil
	}
	return err
}
