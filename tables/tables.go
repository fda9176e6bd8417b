package tables

import (
	"slices"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/lbstate/lbstate/lb"
)

// Table names, as db/show and the HTTP API know them.
const (
	ServicesTableName  = "services"
	FrontendsTableName = "frontends"
	BackendsTableName  = "backends"
	NodeTableName      = "node"
	// NodeLabelsTableName holds the labels of every node of the cluster
	// (Writer.SetNodeLabels); TopologyServicesTableName, the services
	// with topology keys and the nodes their selection reads.
	NodeLabelsTableName       = "node-labels"
	TopologyServicesTableName = "topology-services"
)

func serviceNameKey(n lb.ServiceName) index.Key { return index.String(n.String()) }

func serviceNameFromString(s string) (index.Key, error) {
	n, err := lb.ParseServiceName(s)
	if err != nil {
		return nil, err
	}
	return serviceNameKey(n), nil
}

// keySetOf is the key set of a non-unique index from a slice of keys,
// which may be empty. It builds against statedb v0.9, whose NewKeySet
// takes a first key apart, and against v0.8.3, which e2e/cilium pins
// because Cilium v1.20.2 does not compile against v0.9: so no NewKeySet
// of a spread slice and no EmptyKeySet. Several keys are rare (a conflict,
// a split); index.Seq copies them.
func keySetOf(keys []index.Key) index.KeySet {
	switch len(keys) {
	case 0:
		return index.KeySet{}
	case 1:
		return index.NewKeySet(keys[0])
	}
	return index.Seq(func(k index.Key) index.Key { return k }, slices.Values(keys))
}

// addrKey is the index key of frontends and backends: lb.L3n4Addr's Key
// without the 12 bytes that map an IPv4 address into IPv6. It sorts as Key
// does (the family byte comes first, and every IPv4 key had those bytes),
// and the indexes keep it: 9 bytes fit a 16-byte allocation where Key's 21
// take 24, for two keys per service.
func addrKey(a lb.L3n4Addr) index.Key {
	var buf addrKeyBuf
	return slices.Clone(buf.key(a))
}

// addrKeyBuf holds the index key of an address (addrKey), for a lookup
// that allocates none (Get: an iterator would keep the key while the
// buffer is reused).
type addrKeyBuf [lb.L3n4AddrKeyLen]byte

func (b *addrKeyBuf) key(a lb.L3n4Addr) index.Key {
	k := a.AppendKey(b[:0])
	if a.Is4() {
		k = append(k[:1], k[13:]...) // the family byte, then after ::ffff:
	}
	return k
}

func addrFromString(s string) (index.Key, error) {
	a, err := lb.ParseL3n4Addr(s)
	if err != nil {
		return nil, err
	}
	return addrKey(a), nil
}

// ServiceByName is the primary index of services.
var ServiceByName = byServiceName("name", func(s *lb.Service) lb.ServiceName { return s.Name })

// ServiceByConflict finds the services that declare a frontend address
// another service owns (their Conflicts). Together with the frontend row's
// owner they are every service that claims the address.
var ServiceByConflict = statedb.Index[*lb.Service, lb.L3n4Addr]{
	Name: "conflict",
	FromObject: func(s *lb.Service) index.KeySet {
		keys := make([]index.Key, len(s.Conflicts()))
		for i, c := range s.Conflicts() {
			keys[i] = addrKey(c.Address)
		}
		return keySetOf(keys)
	},
	FromKey:    addrKey,
	FromString: addrFromString,
}

// ServiceByRedirectTarget finds the services whose redirect in force
// points at a service.
var ServiceByRedirectTarget = statedb.Index[*lb.Service, lb.ServiceName]{
	Name: "redirect-to",
	FromObject: func(s *lb.Service) index.KeySet {
		if r := s.Redirect(); r != nil {
			return index.NewKeySet(serviceNameKey(r.To))
		}
		return index.KeySet{}
	},
	FromKey:    serviceNameKey,
	FromString: serviceNameFromString,
}

// ServiceByRouteTarget finds the services with a route that sends flows
// to a service (any of their routes, in force or not).
var ServiceByRouteTarget = statedb.Index[*lb.Service, lb.ServiceName]{
	Name: "route-to",
	FromObject: func(s *lb.Service) index.KeySet {
		var keys []index.Key
		for _, r := range s.Routes() {
			for _, b := range r.Backends {
				if !b.Rejected { // an invalid ref follows no service
					keys = append(keys, serviceNameKey(b.Service))
				}
			}
		}
		return keySetOf(keys)
	},
	FromKey:    serviceNameKey,
	FromString: serviceNameFromString,
}

// FrontendByAddress is the primary index of frontends.
var FrontendByAddress = statedb.Index[*lb.Frontend, lb.L3n4Addr]{
	Name: "address",
	FromObject: func(f *lb.Frontend) index.KeySet {
		return index.NewKeySet(storedAddrKey(f.Address))
	},
	FromKey:    addrKey,
	FromString: addrFromString,
	Unique:     true,
}

// BackendByAddress is the primary index of backends.
var BackendByAddress = statedb.Index[*lb.Backend, lb.L3n4Addr]{
	Name: "address",
	FromObject: func(b *lb.Backend) index.KeySet {
		return index.NewKeySet(storedAddrKey(b.Address))
	},
	FromKey:    addrKey,
	FromString: addrFromString,
	Unique:     true,
}

// NodeByName is the primary index of the node table.
var NodeByName = byName(func(n *lb.Node) string { return n.Name })

// byName is the primary index of a table of rows named by a string.
func byName[Obj any](name func(Obj) string) statedb.Index[Obj, string] {
	return statedb.Index[Obj, string]{
		Name: "name",
		FromObject: func(o Obj) index.KeySet {
			return index.NewKeySet(index.String(name(o)))
		},
		FromKey:    index.String,
		FromString: index.FromString,
		Unique:     true,
	}
}

// byServiceName is the primary index, called indexName, of a table with
// a row per service.
func byServiceName[Obj any](indexName string, name func(Obj) lb.ServiceName) statedb.Index[Obj, lb.ServiceName] {
	return statedb.Index[Obj, lb.ServiceName]{
		Name: indexName,
		FromObject: func(o Obj) index.KeySet {
			return index.NewKeySet(serviceNameKey(name(o)))
		},
		FromKey:    serviceNameKey,
		FromString: serviceNameFromString,
		Unique:     true,
	}
}

// tableSet holds the load-balancing tables, writable. Only the Writer
// writes them (and, through ReconcilerFrontends, a reconciler's status
// write-back); everyone else gets read-only statedb.Table views.
type tableSet struct {
	services  statedb.RWTable[*lb.Service]
	frontends statedb.RWTable[*lb.Frontend]
	backends  statedb.RWTable[*lb.Backend]
	orphans   statedb.RWTable[*OrphanBackends]
	node      statedb.RWTable[*lb.Node]
	nodeDecls statedb.RWTable[*NodeDeclaration]

	nodeLabels statedb.RWTable[*lb.NodeLabels]
	topology   statedb.RWTable[*TopologyService]
	sources    statedb.RWTable[*RegisteredSource] // not in all(): written on registration only
}

// newTableSet creates the tables and registers them with db.
func newTableSet(db *statedb.DB) (*tableSet, error) {
	var (
		t   tableSet
		err error
	)
	if t.services, err = statedb.NewTable(db, ServicesTableName,
		ServiceByName, ServiceByConflict, ServiceByRedirectTarget, ServiceByRouteTarget); err != nil {
		return nil, err
	}
	if t.frontends, err = statedb.NewTable(db, FrontendsTableName,
		FrontendByAddress); err != nil {
		return nil, err
	}
	if t.backends, err = statedb.NewTable(db, BackendsTableName,
		BackendByAddress); err != nil {
		return nil, err
	}
	if t.orphans, err = statedb.NewTable(db, OrphanBackendsTableName, OrphanBackendsByService); err != nil {
		return nil, err
	}
	if t.node, err = statedb.NewTable(db, NodeTableName, NodeByName); err != nil {
		return nil, err
	}
	if t.nodeDecls, err = statedb.NewTable(db, NodeDeclarationsTableName, NodeDeclarationBySource); err != nil {
		return nil, err
	}
	if t.nodeLabels, err = statedb.NewTable(db, NodeLabelsTableName, NodeLabelsByName); err != nil {
		return nil, err
	}
	if t.topology, err = statedb.NewTable(db, TopologyServicesTableName,
		TopologyServiceByName, TopologyServiceByNode); err != nil {
		return nil, err
	}
	if t.sources, err = statedb.NewTable(db, SourcesTableName, RegisteredSourceByName); err != nil {
		return nil, err
	}
	return &t, nil
}

func (t *tableSet) all() []statedb.TableMeta {
	return []statedb.TableMeta{t.services, t.frontends, t.backends, t.orphans, t.node, t.nodeDecls, t.nodeLabels, t.topology}
}

// ReconcilerFrontends is the frontends table, writable, for the one
// component that records how each frontend was reconciled (its Status and
// ID): statedb's reconciler needs an RWTable to write them back
// (reconciler.Register). tables.Cell provides it under this type of its
// own, not as a statedb.RWTable, so that no source picks it up by asking
// for the usual type. Sources change the tables through the Writer only.
type ReconcilerFrontends struct {
	table statedb.RWTable[*lb.Frontend]
}

// RWTable returns the writable frontends table, to pass to statedb's
// reconciler.Register. Write nothing into it but reconciliation status.
func (r ReconcilerFrontends) RWTable() statedb.RWTable[*lb.Frontend] { return r.table }
