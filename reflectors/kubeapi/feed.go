package kubeapi

import (
	"context"

	"github.com/cilium/hive/cell"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/lb"
)

// FeedsGroup is the hive value group of the feeds: a source that reads
// Kubernetes kinds takes them all (`group:"kubernetes-feeds"`) and runs
// once per feed, so that it works from the API server and from a
// manifests directory alike.
const FeedsGroup = "kubernetes-feeds"

// Feed is a stream of Kubernetes objects from one place: an API server
// (APIFeed) or a directory of manifests (reflectors/file). A source asks
// it for the kinds it reads and gets, for each object of them, an add or
// update and, when it goes, a delete, and once its initial state is
// handed over, a synced marker. The sources of one feed write with its
// identity (Source), so that a directory's declarations outrank the
// cluster's as lb.Source says.
type Feed interface {
	// Source is the identity the rows of this feed's sources carry
	// (lb.SourceK8s for the API server, lb.SourceFile for a directory).
	Source() lb.Source
	// AllowsLoopback reports whether the feed's endpoints may be on
	// loopback addresses: a directory may name them (a host without a
	// cluster balancing over its own processes); the API server rejects
	// them.
	AllowsLoopback() bool
	// Want declares kinds a subscriber will ask for. Call it before the
	// hive starts (a directory builds its decoder, an API feed its CRD
	// watch, from every kind wanted).
	Want(kinds ...FeedKind)
	// Subscribe hands s.Events the objects of s.Kinds until ctx is done:
	// an add for every object there is, then Synced once every one of
	// them was handed over, then every change, as it happens. It blocks
	// until ctx is done (nil) or the subscription fails. A subscriber
	// that subscribes again (its job started over) gets every object
	// again, and may sweep at its Synced what it no longer got.
	Subscribe(ctx context.Context, s Subscription) error
}

// Subscription is what a subscriber asks a feed for.
type Subscription struct {
	Kinds  []FeedKind
	Events Events
	// Invalid gets an object of the subscriber's kinds that cannot be
	// read (invalid input: the subscriber logs and counts it); its last
	// good version, if any, stays.
	Invalid func(error)
	// Connection, if set, is told whether the feed reaches its world
	// (*reflectors.Source is one).
	Connection Reporter
}

// Events get a subscription's objects. Push may block (the subscriber's
// queue is full): the feed waits.
type Events interface {
	// Push hands over one object that was added or changed (deleted
	// false) or removed (deleted true).
	Push(obj any, deleted bool)
	// Synced says that every object of the initial state was pushed.
	Synced()
}

// FeedKind is one kind of object a subscriber reads, as a feed serves it:
// a built-in kind (Services, EndpointSlices, LocalNode, NodeLabels,
// LocalPods) or a CRD-backed one (CRDKind). The objects a feed hands over
// are of the same Go types from every feed.
type FeedKind struct {
	// Kind is the kind's name, as a manifest's documents say it
	// ("Service", "HTTPRoute").
	Kind string
	// ClusterScoped kinds have no namespace (Node).
	ClusterScoped bool
	// key says which informer of an API feed serves the kind: two
	// subscribers of kinds with the same key share one.
	key string
	// informer builds the informer of a built-in kind.
	informer func(f *factories) cache.SharedIndexInformer
	// only, if set, is what of the informer's objects the kind is: the
	// API feed checks it too, as the field selector narrowing the
	// informer is the server's to apply, and one that ignores it (a fake
	// clientset) must not hand a subscriber of the local Node every Node
	// (a second stream of their labels beside NodeLabels', which once
	// kept a deleted node's labels in force).
	only func(obj any) bool
	// versions, for a CRD-backed kind: the resources it is read from,
	// preferred first.
	versions []schema.GroupVersionResource
	// convert reads a CRD-backed object from the API server into its Go
	// type (for a delete, only its name needs to be right).
	convert func(u *unstructured.Unstructured, deleted bool) (runtime.Object, error)
	// addToScheme registers a CRD-backed kind's Go types, for a
	// directory to decode.
	addToScheme func(*runtime.Scheme) error
}

// CRDKind is a CRD-backed kind: read from the first of versions (all of
// one group and resource, preferred first) whose CRD the API server
// serves, while it does (see CRDs), converted into its Go type by
// convert; a directory decodes it with the types addToScheme registers.
func CRDKind(kind string, versions []schema.GroupVersionResource, addToScheme func(*runtime.Scheme) error,
	convert func(u *unstructured.Unstructured, deleted bool) (runtime.Object, error)) FeedKind {
	return FeedKind{Kind: kind, key: "crd " + kind, versions: versions, convert: convert, addToScheme: addToScheme}
}

// IsCRD reports whether the kind is CRD-backed.
func (k FeedKind) IsCRD() bool { return k.versions != nil }

// Versions are a CRD-backed kind's resources, preferred first.
func (k FeedKind) Versions() []schema.GroupVersionResource { return k.versions }

// AddToScheme registers a CRD-backed kind's Go types in s (built-in
// kinds are client-go's scheme's).
func (k FeedKind) AddToScheme(s *runtime.Scheme) error {
	if k.addToScheme == nil {
		return nil
	}
	return k.addToScheme(s)
}

// FeedsOut provides feeds into FeedsGroup; a nil one is left out.
type FeedsOut struct {
	cell.Out

	Feeds []Feed `group:"kubernetes-feeds,flatten"`
}
