package lbstate

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/clustermesh"
	"github.com/lbstate/lbstate/reflectors/file"
	"github.com/lbstate/lbstate/reflectors/health"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/reflectors/routestatus"
	"github.com/lbstate/lbstate/tables"
)

// Cell is a complete agent: Core, its metrics (one Prometheus registry
// that every cell registers in: metrics.Cell), Datapath and Sources.
// Groups, not modules, so that every cell keeps its own module name in
// the log.
var Cell = cell.Group(
	Core,
	metrics.Cell,
	Datapath,
	Sources,
)

// Core is the control plane without sources: StateDB, supervised jobs,
// health, the tables and their Writer, the maps (kernel or in-memory,
// --lb-maps) and the reconciler that writes the tables into them. A
// source of the embedder's own registers with reflectors.Register beside
// it. Metrics are not part of it (lbbench measures without them): with
// metrics.Cell beside it, every cell registers its collectors there and
// StateDB reports every write transaction to it.
var Core = cell.Group(
	statedb.Cell,
	job.Cell,
	cell.SimpleHealthCell,
	tables.Cell,
	bpf.Cell,
	reconciler.Cell,
)

// Datapath is the reference datapath: it attaches nothing unless
// --lb-datapath says where, and serves its traffic counters as metrics.
// It needs Core.
var Datapath = datapath.Cell

// Sources are the library's feeds and sources, one cell each; each does
// nothing until configured. They need Core. The Kubernetes-kind sources
// (services, redirect policies, routes) read every feed of Kubernetes
// objects: the API server's (kubeapi.Cell, given a kubernetes.Interface,
// and metadata and dynamic clients: see kubeapi.Clients) and a manifests
// directory's (file.Cell).
var Sources = cell.Group(
	kubeapi.Cell,        // the API server's feed, with a kubernetes.Interface; --k8s-node-name
	file.Cell,           // a manifests directory's feed: --manifests
	k8s.Cell,            // Services, EndpointSlices, Nodes, Pods' host ports, from every feed
	redirectpolicy.Cell, // local redirect policies, from every feed
	routes.Cell,         // traffic-split routes and their status table, from every feed
	routestatus.Cell,    // routes' status.parents in the API server: --route-status, with kubernetes and dynamic clients
	health.Cell,         // health checking: --health, --health-passive
	clustermesh.Cell,    // global services over etcd: --cluster-name, --cluster-id, --clustermesh-*
)
