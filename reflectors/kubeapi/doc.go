// Package kubeapi holds the object feeds' plumbing, which every source of
// Kubernetes kinds shares: Feed (a stream of objects from one place: adds,
// updates, deletes and a synced marker), the kinds a source asks for
// (FeedKind), the API server's feed (APIFeed, provided by Cell with the
// local node's name, --k8s-node-name) and Fanout, which a feed that keeps
// its own objects (a manifests directory, reflectors/file) hands them
// out with:
//
//	feed.Want(kubeapi.Services(), kubeapi.LocalPods(node)) // before the hive starts
//	err := feed.Subscribe(ctx, kubeapi.Subscription{Kinds: kinds, Events: q, Invalid: reject, Connection: src})
//

// A Connection carries a source's lists and watches and tells the source
// (a Reporter: *reflectors.Source) whether it reaches the API server.
// client-go's reflector backs off from 800 ms up to 30 s with full
// jitter, and a SharedInformer does not let the backoff be set, so after
// an outage informers resumed 29-72 s after the API server was ready. A
// Connection's ListWatch keeps a list or watch that the API server did
// not answer (refused, reset, timed out, 502, 503) to itself: it reports
// the source disconnected and tries the same call again every 250 ms,
// doubling up to 1 s (plus up to a quarter of that in jitter), so the
// reflector never sees the error and resumes within about a second of
// the API server's return, from the resource version it had (a watch,
// not a relist, while the API server still has that version). Informers
// builds typed and metadata informers on it; CRDs builds its own when
// given one:
//
//	conn := kubeapi.NewConnection(src) // src: a *reflectors.Source
//	f := kubeapi.NewInformers(conn, client, dropUnused)
//	inf := f.Informer(gvr, &corev1.Service{}, list, watch)
//	f.Start(ctx.Done())
//	defer f.Shutdown()
//	crds.Connection = conn
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
