// Package routestatus writes the status of Gateway API routes on
// Services (GAMMA): for each HTTPRoute, GRPCRoute, TCPRoute and UDPRoute
// the Kubernetes source holds, one status.parents entry per parentRef to
// a Service, under the controller name lbstate.io/mesh-controller
// (ControllerName), with conditions that observe the route's
// generation:
//
//   - Accepted: True/Accepted when the route's split applies on the
//     Service (on at least one of its ports); False/UnsupportedValue for a
//     parentRef lbstate cannot apply (a Service in another namespace, a
//     sectionName, a route none of whose rules applies at L4);
//     False/Conflicted (lbstate's own reason) when older routes take
//     every port it names.
//   - ResolvedRefs: True/ResolvedRefs, or False with the reason of the
//     first backendRef of the rule in force that does not resolve:
//     InvalidKind (not a Service), RefNotPermitted (another namespace
//     without a ReferenceGrant) or BackendNotFound (no source declares
//     the Service: headless and ExternalName Services count, since the
//     balancer has nothing of them). The message lists every such ref.
//   - PartiallyInvalid: True/UnsupportedValue on an accepted route some of
//     whose rules are not applied (L7 matches or filters, a TCPRoute's
//     later rules), with the spec's "Dropped Rule" message; absent
//     otherwise.
//
// Gateway parents are not lbstate's: their gateway controllers write
// them. Entries of other controllers are kept as they are; an entry of
// lbstate's for a parentRef the route no longer has is removed.
//
// The facts come from the routes table (routes.Status, which the
// Kubernetes source fills) and the services table, so this package is a
// peer of the sources that reads tables and writes only to the API
// server. Every agent computes the same status, once every source has
// synced (the services table is initialized); one writes it: the one
// holding a coordination.k8s.io Lease (client-go's leaderelection). A
// writer compares before it writes, so an unchanged status is never
// written, and on gaining the lease it reconciles every route once (the
// agent before it may have stopped mid-way), from one list per kind:
// only the routes whose status differs are read and written. Writes are rate limited
// (--route-status-qps) and failures retried with backoff.
//
// Traps: the agent needs RBAC to get and list the routes, to update
// their status subresource, and to get, create and update Leases in
// --route-status-lease-namespace. Two agents in one process (tests) need
// --route-status-identity each: the default, host name and process ID,
// would be the same. A route whose newest generation the
// source cannot read (an invalid update) keeps the status of the last
// valid one, with that generation as observedGeneration.
package routestatus
