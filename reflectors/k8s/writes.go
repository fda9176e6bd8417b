package k8s

import (
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// writes are one batch's Writer calls, in order, and whether the batch
// held the synced marker. A service's calls (nearly all of a batch's)
// are values in services, not closures: a closure per call, with the
// service's declaration moved to the heap for it, was ~300 bytes of
// garbage per service, and a batch's buffers are used again (spare).
type writes struct {
	calls    []call
	services []serviceCall
	synced   bool
}

// call is one Writer call of a batch: fn, or if nil the service call
// services[svc].
type call struct {
	fn  func(statedb.WriteTxn)
	svc int
}

// serviceOp is what a serviceCall does.
type serviceOp uint8

const (
	declareService   serviceOp = iota // params (and proxy, if proxied)
	undeclareService                  // delete the declaration and the proxy redirect
	setBackends                       // backends
)

// serviceCall is one service's Writer call in a batch.
type serviceCall struct {
	op       serviceOp
	proxied  bool
	name     lb.ServiceName
	cause    *tables.Cause
	params   lb.ServiceParams
	proxy    lb.ProxyRedirect
	backends []lb.BackendParams
}

// add appends a call of fn.
func (ws *writes) add(fn func(statedb.WriteTxn)) {
	ws.calls = append(ws.calls, call{fn: fn})
}

// addService appends a service's call, to be filled in through the
// pointer returned (good until the next add).
func (ws *writes) addService(op serviceOp, name lb.ServiceName, cause *tables.Cause) *serviceCall {
	ws.calls = append(ws.calls, call{svc: len(ws.services)})
	ws.services = append(ws.services, serviceCall{op: op, name: name, cause: cause})
	return &ws.services[len(ws.services)-1]
}

// join appends o's calls after ws's.
func (ws *writes) join(o writes) {
	for _, c := range o.calls {
		if c.fn != nil {
			ws.add(c.fn)
		} else {
			*ws.addService(0, lb.ServiceName{}, nil) = o.services[c.svc]
		}
	}
	ws.synced = ws.synced || o.synced
}

// run makes the calls in order.
func (r *Reflector) run(ws *writes, txn statedb.WriteTxn) {
	for _, c := range ws.calls {
		if c.fn != nil {
			c.fn(txn)
			continue
		}
		s := &ws.services[c.svc]
		r.w.SetCause(txn, s.cause)
		switch s.op {
		case declareService:
			r.check(r.w.UpsertService(txn, s.params), s.name.String())
			if s.proxied {
				r.check(r.w.SetProxyRedirect(txn, s.name, s.proxy), s.name.String())
			} else {
				r.check(r.w.ClearProxyRedirect(txn, s.name, r.as), s.name.String())
			}
		case undeclareService:
			r.check(r.w.DeleteService(txn, s.name, r.as), s.name.String())
			r.check(r.w.ClearProxyRedirect(txn, s.name, r.as), s.name.String())
		case setBackends:
			r.check(r.w.SetBackends(txn, s.name, r.as, s.backends...), s.name.String())
		}
	}
}

// spareWrites is how many batches' buffers are kept for the next ones:
// as many as can be in flight (loop).
const spareWrites = 3

// maxSpareCalls bounds the buffers kept: a batch that touched every
// service (a node change) leaves its own to the collector.
const maxSpareCalls = 4096

// newWrites returns a batch's buffers, emptied, from an earlier batch
// when one was given back.
func (r *Reflector) newWrites() writes {
	select {
	case ws := <-r.spare:
		return ws
	default:
		return writes{}
	}
}

// giveBack keeps ws's buffers for a later batch. What they refer to
// (declarations, backends, causes) goes: the tables keep their own.
func (r *Reflector) giveBack(ws writes) {
	if cap(ws.calls) > maxSpareCalls || cap(ws.services) > maxSpareCalls {
		return
	}
	clear(ws.calls)
	clear(ws.services)
	ws = writes{calls: ws.calls[:0], services: ws.services[:0]}
	select {
	case r.spare <- ws:
	default:
	}
}
