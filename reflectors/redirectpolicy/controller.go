package redirectpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// maxBatch bounds the changes applied in one transaction.
const maxBatch = 500

// Controller applies the local redirect policies and this node's pods a
// feed hands it (Push, Synced) as redirects, through the Writer, as the
// source as: each policy's target service (TargetName) with the pods as
// backends, and, for a serviceMatcher, the redirect of the Service's
// frontends to it. The Writer keeps a redirect beside the service it
// redirects, so a policy may come before its Service, and removing it
// restores what was below. It keeps a status row per policy in its table.
type Controller struct {
	*reflectors.Queue // Push, Synced

	opts  Options
	node  string
	src   *reflectors.Source
	w     *tables.Writer
	as    lb.Source
	table statedb.RWTable[*Status]

	// Owned by Run.
	l        *redirects
	writeErr error // the first error of the batch being written that is not invalid input
}

// event is what a feed hands over.
type event = reflectors.Event

// objKey names a namespaced object (a policy or a pod).
type objKey struct{ namespace, name string }

// NewController returns a controller of the policies and pods of node,
// checked against opts, writing as the source as through src's Writer and
// its status rows into table (nil: none).
func NewController(opts Options, node string, src *reflectors.Source, as lb.Source, table statedb.RWTable[*Status]) *Controller {
	return &Controller{
		Queue: reflectors.NewQueue(1024, maxBatch),
		opts:  opts, node: node, src: src, w: src.Writer, as: as, table: table,
		l: newRedirects(opts),
	}
}

// Run calls feed in its own goroutine and applies what it pushes until
// ctx is done or feed fails. A write that fails other than by invalid
// input ends Run with its error, nothing of its batch committed (the
// source's job starts over with a new controller). Run may be called
// once.
func (c *Controller) Run(ctx context.Context, feed func(ctx context.Context) error) error {
	return c.Queue.Run(ctx, feed, c.apply)
}

// apply records a batch and writes what it changed in one transaction.
func (c *Controller) apply(batch []event) error {
	var calls []func(statedb.WriteTxn)
	call := func(f func(statedb.WriteTxn)) { calls = append(calls, f) }
	synced := false
	for _, ev := range batch {
		switch obj := ev.Obj.(type) {
		case *Policy:
			c.preparePolicy(obj, ev.Deleted)
		case *corev1.Pod:
			c.preparePodRedirects(obj, ev.Deleted)
		case nil:
			synced = synced || ev.Synced
		}
	}
	c.prepareRedirects(call)
	if synced {
		call(c.sweep)
	}
	var txn statedb.WriteTxn
	if c.table != nil {
		txn = c.w.WriteTxn(c.table)
	} else {
		txn = c.w.WriteTxn()
	}
	defer txn.Abort()
	c.writeErr = nil
	err := c.w.Batch(txn, func() error {
		for _, f := range calls {
			f(txn)
		}
		return nil
	})
	if c.writeErr != nil {
		err = c.writeErr
	}
	if err != nil {
		return fmt.Errorf("writing a batch of %d changes (aborted): %w", len(batch), err)
	}
	txn.Commit()
	if synced {
		c.src.Synced()
	}
	return nil
}

// sweep removes what this source wrote before (a run that started over)
// and no longer holds: redirects of services no policy of it redirects,
// target services of policies not in force, and status rows of policies
// it does not hold. What the other sources of its identity wrote stays.
func (c *Controller) sweep(txn statedb.WriteTxn) {
	redirected := map[lb.ServiceName]bool{}
	targets := map[lb.ServiceName]bool{}
	for _, ps := range c.l.policies {
		if ps.applied != nil {
			targets[ps.applied.Target] = true
			if !ps.applied.Service.IsZero() {
				redirected[ps.applied.Service] = true
			}
		}
	}
	c.check(c.w.SweepSourceOf(txn, c.as, tables.Redirects, func(n lb.ServiceName) bool { return redirected[n] }), "resync")
	c.check(c.w.SweepSourceOf(txn, c.as, tables.Declarations, func(n lb.ServiceName) bool {
		return !IsTargetName(n) || targets[n]
	}), "resync")
	c.sweepPolicyRows(txn)
}

// IsTargetName reports whether a service name is a policy's target
// (TargetName): no Kubernetes Service can have it.
func IsTargetName(n lb.ServiceName) bool { return strings.HasSuffix(n.Name(), targetSuffix) }

// check reports a Writer error about one object: invalid input is
// rejected; any other error is kept for apply, which aborts the batch.
func (c *Controller) check(err error, object string) {
	switch {
	case err == nil:
	case errors.Is(err, tables.ErrInvalid):
		c.src.Reject(fmt.Errorf("%s: %w", object, err))
	case c.writeErr == nil:
		c.writeErr = fmt.Errorf("%s: %w", object, err)
	}
}

// fail reports invalid input.
func (c *Controller) fail(err error) { c.src.Reject(tables.AsInvalid(err)) }
