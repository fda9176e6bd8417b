package redirectpolicy

import (
	"context"
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
	l *redirects
	b *reflectors.Batch // the batch being prepared
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
	c.b = reflectors.NewBatch(c.src)
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
	c.prepareRedirects(c.b.Call)
	if synced {
		c.b.Call(c.sweep)
	}
	var extra []statedb.TableMeta
	if c.table != nil {
		extra = append(extra, c.table)
	}
	if err := c.b.Write(extra...); err != nil {
		return err
	}
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

// check reports a Writer error about one object of the batch.
func (c *Controller) check(err error, object string) { c.b.Check(err, object) }

// fail reports invalid input.
func (c *Controller) fail(err error) { c.src.Reject(tables.AsInvalid(err)) }
