// Package lb is the load-balancing model: plain, immutable values for
// addresses, service names, services, frontends and backends, with their
// parsing, validation and printing. It does no I/O.
//
// Everything here is a value: copy it freely, and never change what a
// table row holds. Parse and String are inverses, and a zero value means
// "invalid" or "unset", never a real address or name.
//
// # Sources
//
// Every row says which source declared it (Source). A source is
// registered once, process-wide, with its name and priority
// (RegisterSource): its value is its priority, so rows stay small and
// compare sources with ==, Outranks and Compare without a lookup, and
// String, MarshalText and UnmarshalText use the name. The built-in
// sources (api, file, k8s, kvstore, redirect) are registered before any
// other; an embedder adds its own at priorities among them.
//
// # Equality
//
// The small values compare with == and serve as map and index keys:
// L3n4Addr, ServiceName, the enums (Protocol, Scope, SVCType, Source,
// BackendState, Algorithm, Claim, TrafficPolicy, TrafficDistribution,
// ClusterAffinity), FrontendParams, BackendRef, RedirectPort,
// RouteBackend, FrontendConflict and Label.
//
// The others need their Equal method:
//
//   - ServiceParams, Route, Redirect, ProxyRedirect, Node and
//     FrontendExtras hold slices or maps, so == does not compile.
//   - BackendParams (and BackendInstance, which holds one) compiles with
//     ==, but its port names and topology hints sit behind a pointer
//     shared by equal lists only while few distinct lists exist: two
//     equal params may differ under ==. Use BackendParams.Equal.
//   - HealthVerdict compiles with == but holds a time.Time: Equal
//     compares its Since as an instant.
//
// Service, Frontend, Backend and NodeLabels are table rows, compared by
// the tables that hold them, not by callers.
package lb
