package health

import (
	"maps"
	"slices"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// usage is which frontends use which backends (every backend a frontend
// lists, taking new flows or not), and each service's check as its
// annotations set it: the set of backends to check, and how.
type usage struct {
	frontends map[lb.L3n4Addr]*lb.Frontend   // as last seen
	users     map[lb.L3n4Addr][]*lb.Frontend // backend -> the frontends listing it
	services  map[lb.ServiceName]*serviceUse
}

// serviceUse is a service that owns frontends here, and its check.
type serviceUse struct {
	policy    *lb.ServiceParams
	check     check
	frontends int
}

func newUsage() usage {
	return usage{
		frontends: map[lb.L3n4Addr]*lb.Frontend{},
		users:     map[lb.L3n4Addr][]*lb.Frontend{},
		services:  map[lb.ServiceName]*serviceUse{},
	}
}

// sameUse reports whether two versions of a frontend use the same
// backends the same way: most changes of a frontend row are the
// reconciler's status, or a backend's weight, which change nothing here.
func sameUse(a, b *lb.Frontend) bool {
	return a.Service == b.Service && a.Policy == b.Policy &&
		slices.EqualFunc(a.Backends, b.Backends, func(x, y lb.BackendRef) bool { return x.Address == y.Address })
}

// frontendChanged follows one change of the frontends table: the
// backends it stopped or started listing are checked again for whether,
// and how, they are to be probed.
func (c *checker) frontendChanged(r *runState, fe *lb.Frontend, deleted bool, now time.Time) {
	u := &r.usage
	old := u.frontends[fe.Address]
	if !deleted && old != nil && sameUse(old, fe) {
		u.frontends[fe.Address] = fe
		return
	}
	var affected []lb.L3n4Addr
	if !deleted {
		// Held before the old version is let go, so that a service's
		// annotations are not parsed (and their errors logged) again.
		c.holdService(r, fe)
	}
	if old != nil {
		for _, b := range old.Backends {
			u.users[b.Address] = slices.DeleteFunc(u.users[b.Address], func(f *lb.Frontend) bool { return f.Address == old.Address })
			affected = append(affected, b.Address)
		}
		if e := u.services[old.Service]; e != nil {
			if e.frontends--; e.frontends == 0 {
				delete(u.services, old.Service)
			}
		}
		delete(u.frontends, old.Address)
	}
	if !deleted {
		u.frontends[fe.Address] = fe
		for _, b := range fe.Backends {
			u.users[b.Address] = append(u.users[b.Address], fe)
			affected = append(affected, b.Address)
		}
	}
	for _, b := range affected {
		c.refreshTarget(r, b, now)
	}
}

// holdService counts a frontend of its service and parses the service's
// annotations when they changed; a bad value is rejected (logged with
// the service, counted) and the default applies.
func (c *checker) holdService(r *runState, fe *lb.Frontend) {
	e := r.usage.services[fe.Service]
	if e == nil {
		e = &serviceUse{check: c.cfg.defaults}
		r.usage.services[fe.Service] = e
	}
	e.frontends++
	if e.policy == fe.Policy || fe.Policy == nil {
		return
	}
	if e.policy == nil || !maps.Equal(e.policy.Annotations, fe.Policy.Annotations) {
		var errs []error
		e.check, errs = serviceCheck(fe.Policy, c.cfg.defaults)
		for _, err := range errs {
			r.src.Reject(tables.AsInvalid(err))
		}
	}
	e.policy = fe.Policy
}

// resolve is how a backend is to be checked: the check of the first
// service, by name, that names a probe kind, else of the first service
// (else def); the services that use it, for its log lines; and the one
// whose check it follows, which its probes are charged to (fairshare.go).
func (r *runState) resolve(b lb.L3n4Addr, def check) (names []lb.ServiceName, chk check, owner lb.ServiceName) {
	for _, fe := range r.usage.users[b] {
		if !slices.Contains(names, fe.Service) {
			names = append(names, fe.Service)
		}
	}
	slices.SortFunc(names, lb.ServiceName.Compare)
	chosen, owner := def, names[0]
	if e := r.usage.services[names[0]]; e != nil {
		chosen = e.check
	}
	for _, n := range names {
		if e := r.usage.services[n]; e != nil && e.check.explicit {
			chosen, owner = e.check, n
			break
		}
	}
	return names, chosen.forBackend(b), owner
}
