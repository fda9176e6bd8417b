// Package file is the manifests directory feed: a directory of
// Kubernetes manifests (several documents per file) served as a
// kubeapi.Feed, so that every source that reads Kubernetes kinds (the
// services of reflectors/k8s, local redirect policies, routes) works from
// it as from an API server, declaring as the file source, which outranks
// the cluster's (lb.Source). It follows edits, new files and deletions as
// they happen. Cell provides the feed of the directory named by
// --manifests.
//
// Bad input never takes down what works: only regular files (or links to
// them) up to a size cap are read; documents are decoded strictly, and an
// invalid one is reported (file, line, object, field) once per version of
// its file while the object's last valid version stays; each object
// carries where it is declared (kubeapi.AnnotationManifestOrigin), which
// the sources' own errors about it name; documents of
// kinds no subscriber reads are skipped. An edit costs the reading of the
// files that changed, not of the directory.
package file

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/lbstate/lbstate/internal/dirfollow"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Feed is a manifests directory as a kubeapi.Feed, with the identity
// lb.SourceFile. Run follows the directory; every subscriber is handed
// the objects of its kinds, and Synced once the directory was read whole.
type Feed struct {
	dir         string
	maxFileSize int64
	rep         *reflectors.Reporter
	fan         *kubeapi.Fanout

	mu      sync.Mutex
	wanted  map[string]kubeapi.FeedKind // by kind
	running bool

	// Owned by Run.
	dec        decoder
	files      map[string]*fileState        // every manifest file, by path
	owners     map[objectKey][]string       // the files declaring each object, in name order
	known      map[objectKey]runtime.Object // what the subscribers have been given
	walkFailed string                       // the last error walking the directory, reported
	links      dirfollow.Links              // dangling links, logged
}

var _ kubeapi.Feed = (*Feed)(nil)

// NewFeed returns the feed of dir (files of at most maxFileSize bytes),
// reporting bad input through rep.
func NewFeed(dir string, maxFileSize int64, rep *reflectors.Reporter) *Feed {
	return &Feed{
		dir: dir, maxFileSize: maxFileSize, rep: rep, fan: kubeapi.NewFanout(),
		wanted: map[string]kubeapi.FeedKind{},
		files:  map[string]*fileState{}, owners: map[objectKey][]string{}, known: map[objectKey]runtime.Object{},
		links: dirfollow.Links{Log: rep.Log(), What: "the manifests directory"},
	}
}

// Source is lb.SourceFile.
func (f *Feed) Source() lb.Source { return lb.SourceFile }

// AllowsLoopback is true: a directory may balance over the host's own
// processes.
func (f *Feed) AllowsLoopback() bool { return true }

// Want adds kinds to those the directory's documents are decoded as.
// Call it before Run.
func (f *Feed) Want(kinds ...kubeapi.FeedKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range kinds {
		f.wanted[k.Kind] = k
	}
}

// Subscribe implements kubeapi.Feed. A directory has no selectors: a
// subscriber of LocalPods or LocalNode gets every Pod or Node.
func (f *Feed) Subscribe(ctx context.Context, s kubeapi.Subscription) error {
	f.mu.Lock()
	for _, k := range s.Kinds {
		if _, ok := f.wanted[k.Kind]; !ok && f.running {
			f.mu.Unlock()
			return fmt.Errorf("manifests %s: kind %s was not wanted before the directory was read", f.dir, k.Kind)
		}
	}
	f.mu.Unlock()
	f.Want(s.Kinds...)
	f.fan.Subscribe(ctx, s)
	return nil
}

// Run reads the directory, hands its objects over, marks the feed synced
// once it was read whole, and follows changes until ctx is done.
func (f *Feed) Run(ctx context.Context) error {
	f.mu.Lock()
	f.running = true
	dec, err := newDecoder(f.wanted)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	f.dec = dec
	return f.follow(ctx)
}

// decoder decodes the kinds wanted: client-go's and the CRD-backed ones
// subscribers named.
type decoder struct {
	scheme *runtime.Scheme
	strict runtime.Decoder
	// reads are the kinds read, by the group and version they are read
	// in.
	reads map[string]string
	// clusterScoped kinds have no namespace to default.
	clusterScoped map[string]bool
}

func newDecoder(wanted map[string]kubeapi.FeedKind) (decoder, error) {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		return decoder{}, err
	}
	d := decoder{scheme: s, reads: map[string]string{}, clusterScoped: map[string]bool{}}
	for _, k := range wanted {
		if err := k.AddToScheme(s); err != nil {
			return decoder{}, fmt.Errorf("kind %s: %w", k.Kind, err)
		}
		if k.IsCRD() {
			d.reads[k.Kind] = k.Versions()[0].GroupVersion().String()
		} else if gv, ok := builtinKinds[k.Kind]; ok {
			d.reads[k.Kind] = gv
		}
		d.clusterScoped[k.Kind] = k.ClusterScoped
	}
	// Rejecting unknown and repeated fields, as `kubectl apply --validate`.
	d.strict = serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	return d, nil
}
