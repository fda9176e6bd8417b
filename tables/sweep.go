package tables

import (
	"errors"
	"slices"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// Contributions are the kinds of rows a source writes about services. The
// sources of one Kubernetes feed (services, local redirect policies,
// routes) share the feed's identity, and each sweeps only its own kind
// (SweepSourceOf), so that none removes what another wrote.
type Contributions uint8

const (
	// Declarations are UpsertService's, with the backends set under the
	// same name (SetBackends, UpsertBackends).
	Declarations Contributions = 1 << iota
	// Redirects are SetRedirect's.
	Redirects
	// ProxyRedirects are SetProxyRedirect's.
	ProxyRedirects
	// Routes are SetRoute's.
	Routes

	// AllContributions are every kind: what DeleteSource and SweepSource
	// remove.
	AllContributions = Declarations | Redirects | ProxyRedirects | Routes
)

// SweepSourceOf is SweepSource limited to the contributions of the kinds
// what names: what src contributed of them to the services keep does not
// keep is removed, and everything else stays.
func (w *Writer) SweepSourceOf(txn statedb.WriteTxn, src lb.Source, what Contributions, keep func(lb.ServiceName) bool) error {
	if keep == nil {
		return errors.New("sweep: keep is nil (DeleteSource removes everything)")
	}
	return w.deleteSourceWhere(txn, src, what, keep)
}

// in reports whether s holds a contribution of src of these kinds.
func (c Contributions) in(s *lb.Service, src lb.Source) bool {
	return (c&Declarations != 0 && slices.ContainsFunc(s.Params, func(p lb.ServiceParams) bool { return p.Source == src })) ||
		(c&Redirects != 0 && slices.ContainsFunc(s.Redirects(), func(r lb.Redirect) bool { return r.Source == src })) ||
		(c&ProxyRedirects != 0 && slices.ContainsFunc(s.ProxyRedirects(), func(pr lb.ProxyRedirect) bool { return pr.Source == src })) ||
		(c&Routes != 0 && slices.ContainsFunc(s.Routes(), func(r lb.Route) bool { return r.Source == src }))
}

// without returns s without src's contributions of these kinds.
func (c Contributions) without(s *lb.Service, src lb.Source) *lb.Service {
	if c&Declarations != 0 {
		s = s.WithoutSource(src)
	}
	if c&Redirects != 0 {
		s = s.WithoutRedirect(src)
	}
	if c&ProxyRedirects != 0 {
		s = s.WithoutProxyRedirect(src)
	}
	if c&Routes != 0 {
		s = s.WithoutRoutes(src)
	}
	return s
}
