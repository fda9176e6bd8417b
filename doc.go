// Package lbstate is an embeddable L4 load-balancing control plane:
// services, frontends and backends in StateDB tables, changed only through
// a Writer (package tables) by sources (package reflectors and below),
// written into eBPF maps by a reconciler, and served to a reference
// datapath. Each part is a hive cell; this package composes them.
//
// Cell is the whole agent, every part configured by its flags (or
// hive.AddConfigOverride); a part left unconfigured does nothing (no
// --manifests, no kubernetes.Interface, no --health, --lb-datapath none).
// Core is the tables, the maps and the reconciler with their runtime, for
// an agent that brings its own sources; add metrics.Cell, Datapath and
// any of Sources' cells to it as needed. Package api serves the tables and the maps to
// lbctl from the embedder's own HTTP server.
//
//	h := hive.New(lbstate.Cell, cell.Provide(func() kubeapi.Clients { return clients }))
//	h.RegisterFlags(flags) // --manifests, --k8s-*, --lb-*, --health*, --cluster-*, ...
//
// An agent whose hive already has statedb.Cell, job.Cell and a cell.Health
// provider composes tables.Cell, bpf.Cell and reconciler.Cell (and
// metrics.Cell) itself instead of Core.
package lbstate
