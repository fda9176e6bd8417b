// Package file is a source of load-balancing state that needs no cluster:
// a directory of Kubernetes manifests (Services, EndpointSlices, Nodes,
// Pods; several documents per file). It feeds the same reflector, and so
// the same conversions, as the Kubernetes source, declaring as the file
// source, and follows edits, new files and deletions as they happen. Cell
// serves the directory named by --manifests.
//
// Bad input never takes down what works: only regular files (or links to
// them) up to a size cap are read; documents are decoded strictly, and an
// invalid one is reported (file, line, object, field) once per version of
// its file while the object's last valid version stays; documents of
// other kinds are skipped. An edit costs the reading of the files that
// changed, not of the directory.
package file

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lbstate/lbstate/internal/dirfollow"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/k8s"
)

// source reads a manifests directory into a reflector.
type source struct {
	dir         string
	maxFileSize int64
	r           *k8s.Reflector
	src         *reflectors.Source

	files      map[string]*fileState        // every manifest file, by path
	owners     map[objectKey][]string       // the files declaring each object, in name order
	known      map[objectKey]runtime.Object // what the reflector has been given
	walkFailed string                       // the last error walking the directory, reported
	links      dirfollow.Links              // dangling links, logged
}

// newSource returns a source reading dir (files of at most maxFileSize
// bytes) as the file source, converting with cfg, reporting through src.
func newSource(dir string, maxFileSize int64, cfg k8s.Config, src *reflectors.Source) (*source, error) {
	r, err := k8s.NewReflector(cfg, src, lb.SourceFile)
	if err != nil {
		return nil, err
	}
	r.AcceptLoopbackEndpoints()
	return &source{
		dir: dir, maxFileSize: maxFileSize, r: r, src: src,
		files: map[string]*fileState{}, owners: map[objectKey][]string{}, known: map[objectKey]runtime.Object{},
		links: dirfollow.Links{Log: src.Log(), What: "the manifests directory"},
	}, nil
}

// run reads the directory, marks the source synced once that is applied,
// and follows changes until ctx is done.
func (s *source) run(ctx context.Context) error { return s.r.Run(ctx, s.follow) }
