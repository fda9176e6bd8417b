package routes

import (
	"context"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// maxBatch bounds the changes applied in one transaction.
const maxBatch = 500

// Controller applies the traffic splits (Gateway API routes on Services,
// SMI TrafficSplits) and ReferenceGrants a feed hands it (Push, Synced)
// as lb.Routes on their parent Services, through the Writer, as the
// source as: SetRoute and ClearRoute. The Writer keeps a route beside the
// service it splits, so a route may come before its Services, and
// removing it restores what was below. With a status table it keeps a
// row per object (Status), in the transaction that applies it.
type Controller struct {
	*reflectors.Queue // Push, Synced

	src   *reflectors.Source
	w     *tables.Writer
	as    lb.Source
	table statedb.RWTable[*Status] // nil: none kept

	// Owned by Run. objs and grants are the traffic splits and
	// ReferenceGrants (their last valid versions); applied the routes
	// last set on each parent, problems what was last reported of each
	// object (a lost parent port as "lost PARENT", whoever won it).
	// claims are the objects naming each parent; dirty the
	// parents whose objects changed since the routes were last planned,
	// gone the objects removed since; all asks for the whole plan (at
	// first, and when a grant changed). See prepareRoutes.
	objs     map[Key]*Object
	grants   map[Key]*ReferenceGrant
	applied  map[lb.ServiceName][]lb.Route
	problems map[Key][]string
	claims   map[lb.ServiceName]map[Key]struct{}
	dirty    map[lb.ServiceName]struct{}
	gone     map[Key]struct{}
	all      bool
	b        *reflectors.Batch // the batch being prepared
}

// NewController returns a controller writing as the source as through
// src's Writer, and its status rows into table (nil: none).
func NewController(src *reflectors.Source, as lb.Source, table statedb.RWTable[*Status]) *Controller {
	return &Controller{
		Queue: reflectors.NewQueue(1024, maxBatch),
		src:   src, w: src.Writer, as: as, table: table,
		objs: map[Key]*Object{}, grants: map[Key]*ReferenceGrant{}, applied: map[lb.ServiceName][]lb.Route{},
		problems: map[Key][]string{}, claims: map[lb.ServiceName]map[Key]struct{}{},
		dirty: map[lb.ServiceName]struct{}{}, gone: map[Key]struct{}{}, all: true,
	}
}

// Run calls feed in its own goroutine and applies what it pushes until
// ctx is done or feed fails. A write that fails other than by invalid
// input ends Run with its error, nothing of its batch committed (the
// source's job starts over with a new controller, which sweeps at its
// synced marker the routes it no longer holds). Run may be called once.
func (c *Controller) Run(ctx context.Context, feed func(ctx context.Context) error) error {
	return c.Queue.Run(ctx, feed, c.apply)
}

// apply records a batch and writes what it changed in one transaction.
func (c *Controller) apply(batch []reflectors.Event) error {
	c.b = reflectors.NewBatch(c.src)
	synced, changed := false, false
	for _, ev := range batch {
		if ev.Obj == nil {
			synced = synced || ev.Synced
			continue
		}
		if key, ok := KeyOf(ev.Obj); ok {
			c.prepareRouteObject(key, ev.Obj, ev.Deleted)
			changed = true
		}
	}
	if changed || synced {
		c.prepareRoutes(c.b.Call)
	}
	if synced {
		c.sweepRoutes(c.b.Call)
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

// check reports a Writer error about one object of the batch.
func (c *Controller) check(err error, object string) { c.b.Check(err, object) }

// fail reports invalid input.
func (c *Controller) fail(err error) { c.src.Reject(tables.AsInvalid(err)) }
