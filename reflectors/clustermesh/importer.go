package clustermesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
)

// SourceName is the importer's name as a source: its initializer and
// metrics label. It writes as lb.SourceKVStore.
const SourceName = "kvstore"

// DefaultSyncTimeout bounds the wait for a remote cluster's synced key:
// a cluster that never says it has written everything must not keep the
// local tables from initializing (and the reconciler from pruning).
const DefaultSyncTimeout = 30 * time.Second

// Remote is one remote cluster to import from.
type Remote struct {
	// Name is the cluster's name, as in its keys.
	Name string
	// ID is its cluster ID (1-MaxClusterID); values must carry it, and
	// its backends are removed by it when the cluster is.
	ID uint32
	// Etcd is how to reach its etcd. Its credentials are never logged.
	Etcd clientv3.Config
	// SyncTimeout replaces DefaultSyncTimeout when set.
	SyncTimeout time.Duration
}

func (r *Remote) validate() error {
	switch {
	case r.Name == "" || len(r.Name) > 253:
		return fmt.Errorf("remote cluster %q: name: empty or too long", r.Name)
	case r.ID == 0 || r.ID > MaxClusterID:
		return fmt.Errorf("remote cluster %s: ID %d out of range 1-%d", r.Name, r.ID, MaxClusterID)
	case len(r.Etcd.Endpoints) == 0:
		return fmt.Errorf("remote cluster %s: no etcd endpoints", r.Name)
	}
	return nil
}

// Importer follows the services other clusters share and merges their
// backends into the local services of the same namespace and name.
// Run is its source body (reflectors.Register(p, SourceName, im.Run));
// Add and Remove connect and disconnect clusters while it runs.
type Importer struct {
	mu       sync.Mutex
	ctx      context.Context // Run's; nil until it starts
	src      *reflectors.Source
	clusters map[string]*cluster
	initial  []Remote
}

// NewImporter returns an importer of the given clusters.
func NewImporter(remotes ...Remote) (*Importer, error) {
	seen := map[string]bool{}
	for i := range remotes {
		if err := remotes[i].validate(); err != nil {
			return nil, err
		}
		if seen[remotes[i].Name] {
			return nil, fmt.Errorf("remote cluster %s: listed twice", remotes[i].Name)
		}
		seen[remotes[i].Name] = true
	}
	return &Importer{clusters: map[string]*cluster{}, initial: remotes}, nil
}

// Run connects to every cluster, marks the source synced once each has
// written its synced key (or its sync timeout passed), and follows them
// until ctx is done.
func (im *Importer) Run(ctx context.Context, s *reflectors.Source) error {
	im.mu.Lock()
	im.ctx, im.src = ctx, s
	var waits []<-chan struct{}
	for _, r := range im.initial {
		if _, running := im.clusters[r.Name]; !running {
			waits = append(waits, im.start(r).synced)
		}
	}
	im.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return nil
		}
	}
	s.Synced()
	<-ctx.Done()
	return nil
}

// Add connects a cluster to a running importer.
func (im *Importer) Add(r Remote) error {
	if err := r.validate(); err != nil {
		return err
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.ctx == nil {
		return errors.New("importer: not running")
	}
	if _, found := im.clusters[r.Name]; found {
		return fmt.Errorf("remote cluster %s: already connected", r.Name)
	}
	im.start(r)
	return nil
}

// Remove disconnects a cluster and removes every backend it offered,
// and nothing else. It returns once they are gone.
func (im *Importer) Remove(name string) error {
	im.mu.Lock()
	c, found := im.clusters[name]
	delete(im.clusters, name)
	im.mu.Unlock()
	if !found {
		return fmt.Errorf("remote cluster %s: not connected", name)
	}
	c.cancel()
	<-c.done
	w := im.src.Writer
	txn := w.WriteTxn()
	if err := w.DeleteSourceCluster(txn, lb.SourceKVStore, c.remote.ID); err != nil {
		txn.Abort()
		return fmt.Errorf("remote cluster %s: %w", name, err)
	}
	txn.Commit()
	im.src.Log().Info("Remote cluster disconnected", "cluster", name)
	return nil
}

// start runs a cluster's follower; im.mu is held.
func (im *Importer) start(r Remote) *cluster {
	ctx, cancel := context.WithCancel(im.ctx)
	c := &cluster{
		remote: r, src: im.src, cancel: cancel,
		synced: make(chan struct{}), done: make(chan struct{}),
		written: map[lb.ServiceName][]lb.L3n4Addr{},
	}
	im.clusters[r.Name] = c
	go c.run(ctx)
	return c
}
