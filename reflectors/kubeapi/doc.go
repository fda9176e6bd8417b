// Package kubeapi holds what every source that watches an API server
// shares.
//
// CRDs follows the CustomResourceDefinitions of the kinds a source reads
// (CiliumLocalRedirectPolicy, the Gateway API's routes and
// ReferenceGrant, SMI TrafficSplit): it starts a kind's informer when its
// CRD is Established and serves a version the source reads, moves it to
// a preferred version when the CRD starts serving one, and stops it when
// the CRD goes or serves none of them any more, handing the source a
// delete for every object the informer had given it. A source therefore
// sees a CRD installed or removed after it started without a restart,
// and a kind without its CRD does not hold up its initial sync:
//
//	crds, err := kubeapi.NewCRDs(dyn, client.Discovery(), log,
//		kubeapi.Kind{Name: "HTTPRoute", Versions: routeVersions, Handler: h})
//	go crds.Run(ctx)
//	cache.WaitForCacheSync(ctx.Done(), crds.HasSynced)
//
// Traps for an embedder:
//   - The agent needs list and watch on customresourcedefinitions
//     (apiextensions.k8s.io). Without them CRDs logs once and asks
//     discovery for the kinds' resources every DiscoveryInterval instead,
//     a few requests per poll. A kind the agent may not list is logged
//     once and does not hold up the initial sync; its informer keeps
//     trying.
//   - CRDs runs its own informers: their watch errors go to
//     WatchErrorHandler (a connection tracker's, say), not to a shared
//     informer factory's.
//   - A real API server deletes a CRD's objects before the CRD itself,
//     and the informer normally passes those deletes on first; CRDs
//     hands over a delete for whatever the informer still held when it
//     stopped (a CRD whose finalizer was removed by hand leaves its
//     objects behind in etcd, and its watch never says so), as a
//     cache.DeletedFinalStateUnknown.
//   - A fake dynamic client has no CRDs until a test creates them:
//     CRDObject builds one as an API server shows it, and CRDListKinds
//     is the list kind the fake needs.
package kubeapi
