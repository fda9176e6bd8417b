package clustermesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// SourceName is the name of the importer's source, lb.SourceKVStore (its
// initializer and metrics label), as Cell registers it; it writes as the
// source it runs as (reflectors.Source.ID).
const SourceName = "kvstore"

// DefaultSyncTimeout bounds the wait for a remote cluster's synced key:
// a cluster that never says it has written everything must not keep the
// local tables from initializing (and the reconciler from pruning).
const DefaultSyncTimeout = 30 * time.Second

// DefaultStaleTimeout is how long a disconnected cluster's backends stay
// (Cilium's agents keep them until the cluster is removed).
const DefaultStaleTimeout = 30 * time.Second

// Self is the local cluster: no remote may use its name or ID.
type Self struct {
	Name string
	ID   uint32
	// MaxConnectedClusters is the mesh's size (Cilium's
	// --max-connected-clusters): 255 (zero means 255) or 511. It bounds
	// every cluster ID, and in a mesh of 511 every remote must declare
	// 511 too, as Cilium demands: the two sizes split an identity's bits
	// differently.
	MaxConnectedClusters uint32
}

// maxConnected is MaxConnectedClusters, zero being Cilium's default.
func (s Self) maxConnected() uint32 {
	if s.MaxConnectedClusters == 0 {
		return DefaultMaxConnectedClusters
	}
	return s.MaxConnectedClusters
}

func (s Self) refuses(name string, id uint32) error {
	switch {
	case s.Name != "" && name == s.Name:
		return fmt.Errorf("remote cluster %s: refused: that is this cluster's name (--cluster-name)", name)
	case s.ID != 0 && id == s.ID:
		return fmt.Errorf("remote cluster %s: refused: cluster ID %d is this cluster's (--cluster-id)", name, id)
	case id > s.maxConnected():
		return fmt.Errorf("remote cluster %s: refused: cluster ID %d is above this mesh's --max-connected-clusters %d", name, id, s.maxConnected())
	}
	return nil
}

// refusesConfig checks a remote's cluster config against this
// cluster's as Cilium's ClusterInfo.ValidateRemoteConfig does: a mesh
// of 511 refuses a remote that does not declare 511 (a mesh of 255
// bounds only the remote's ID, in refuses).
func (s Self) refusesConfig(name string, cc *ClusterConfig) error {
	if s.maxConnected() != DefaultMaxConnectedClusters && cc.Capabilities.MaxConnectedClusters != s.maxConnected() {
		return fmt.Errorf("remote cluster %s: refused: it declares maxConnectedClusters %d, this cluster %d (--max-connected-clusters)",
			name, cc.Capabilities.MaxConnectedClusters, s.maxConnected())
	}
	return nil
}

// clusterConfig is what the exporter declares for this cluster.
func (s Self) clusterConfig() ClusterConfig {
	return ClusterConfig{ID: s.ID, Capabilities: ClusterCapabilities{
		SyncedCanaries: true, MaxConnectedClusters: s.maxConnected(), ServiceExportsEnabled: new(false),
	}}
}

// Remote is one remote cluster to import from.
type Remote struct {
	// Name is the cluster's name, as in its keys.
	Name string
	// ID is its cluster ID (1 to Self's MaxConnectedClusters). Zero: the ID its
	// cilium/cluster-config/<name> key declares, read at each connect.
	// Values must carry it, and its backends are removed by it.
	ID uint32
	// Etcd is how to reach its etcd. Its credentials are never logged.
	Etcd clientv3.Config
	// SyncTimeout replaces DefaultSyncTimeout, StaleTimeout
	// DefaultStaleTimeout, when set.
	SyncTimeout, StaleTimeout time.Duration
}

func (r *Remote) validate(self Self) error {
	switch {
	case r.Name == "" || len(r.Name) > 253 || strings.ContainsAny(r.Name, "/ "):
		return fmt.Errorf("remote cluster %q: name: empty, too long, or with a slash or space", r.Name)
	case r.ID > self.maxConnected():
		return fmt.Errorf("remote cluster %s: ID %d out of range 1-%d", r.Name, r.ID, self.maxConnected())
	case len(r.Etcd.Endpoints) == 0:
		return fmt.Errorf("remote cluster %s: no etcd endpoints", r.Name)
	}
	return self.refuses(r.Name, r.ID)
}

// Importer follows the services other clusters share and merges their
// backends into the local services of the same namespace and name.
// Run is its source body (reflectors.Register(p, lb.SourceKVStore, im.Run));
// Add, Update and Remove connect, reconnect and disconnect clusters
// while it runs (clustermesh.Cell calls them as the config directory
// changes).
type Importer struct {
	self     Self
	mu       sync.Mutex
	ctx      context.Context // Run's; nil until it starts
	src      *reflectors.Source
	conn     *connection // the source's connection, from its clusters'
	commits  *commits    // the clusters' writes, grouped
	clusters map[string]*cluster
	initial  []Remote
}

// NewImporter returns an importer of the given clusters, refusing any
// that claims to be self.
func NewImporter(self Self, remotes ...Remote) (*Importer, error) {
	seen := map[string]bool{}
	for i := range remotes {
		if err := remotes[i].validate(self); err != nil {
			return nil, err
		}
		if seen[remotes[i].Name] {
			return nil, fmt.Errorf("remote cluster %s: listed twice", remotes[i].Name)
		}
		seen[remotes[i].Name] = true
	}
	return &Importer{self: self, clusters: map[string]*cluster{}, initial: remotes}, nil
}

// Run connects to every cluster, marks the source synced once each has
// written its synced key (or its sync timeout passed), and follows them
// until ctx is done.
func (im *Importer) Run(ctx context.Context, s *reflectors.Source) error {
	im.Start(ctx, s)
	<-ctx.Done()
	return nil
}

// Start is Run without the wait: the clusters are followed until ctx is
// done.
func (im *Importer) Start(ctx context.Context, s *reflectors.Source) {
	im.mu.Lock()
	im.ctx, im.src, im.conn = ctx, s, newConnection(s)
	im.commits = &commits{src: s}
	var waits []<-chan struct{}
	for _, r := range im.initial {
		if _, running := im.clusters[r.Name]; !running {
			waits = append(waits, im.start(r).synced)
		}
	}
	im.mu.Unlock()
	im.conn.check()
	context.AfterFunc(ctx, im.stopTimers)
	go func() {
		for _, w := range waits {
			select {
			case <-w:
			case <-ctx.Done():
				return
			}
		}
		s.Synced()
	}()
}

// stopTimers stops every cluster's timers once the importer stops: its
// backends stay as they are.
func (im *Importer) stopTimers() {
	im.mu.Lock()
	defer im.mu.Unlock()
	for _, c := range im.clusters {
		c.stopTimers()
	}
}

// Add connects a cluster to a running importer.
func (im *Importer) Add(r Remote) error {
	if err := r.validate(im.self); err != nil {
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
	im.src.Log().Info("Remote cluster added", "cluster", r.Name, "endpoints", r.Etcd.Endpoints)
	return nil
}

// Update connects a cluster anew with r, or adds it. What the cluster
// offered stays, and the new connection resumes where the old one was:
// a reconnect to unchanged content changes nothing.
func (im *Importer) Update(r Remote) error {
	if err := r.validate(im.self); err != nil {
		return tables.AsInvalid(err)
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.ctx == nil {
		return errors.New("importer: not running")
	}
	c, found := im.clusters[r.Name]
	if !found {
		im.start(r)
		im.src.Log().Info("Remote cluster added", "cluster", r.Name, "endpoints", r.Etcd.Endpoints)
		return nil
	}
	c.cancel()
	<-c.done
	c.remote = r
	im.follow(c)
	im.src.Log().Info("Remote cluster's configuration changed, connecting again", "cluster", r.Name, "endpoints", r.Etcd.Endpoints)
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
	im.conn.leave(name)     // its outage is no longer the source's
	c.markSynced("removed") // nobody waits for a cluster that is gone
	if err := c.drop(); err != nil {
		return err
	}
	im.src.Log().Info("Remote cluster removed, with its backends", "cluster", name)
	return nil
}

// Connected lists the clusters followed.
func (im *Importer) Connected() []string {
	im.mu.Lock()
	defer im.mu.Unlock()
	return slices.Sorted(maps.Keys(im.clusters))
}

// start creates a cluster and its follower; im.mu is held.
func (im *Importer) start(r Remote) *cluster {
	c := &cluster{
		remote: r, src: im.src, self: im.self, conn: im.conn, commits: im.commits,
		log:     im.src.Log().With("cluster", r.Name),
		synced:  make(chan struct{}),
		written: map[lb.ServiceName]struct{}{},
		added:   time.Now(),
	}
	timeout := cmp.Or(r.SyncTimeout, DefaultSyncTimeout)
	c.sync = time.AfterFunc(timeout, func() {
		c.markSynced("timeout")
	})
	im.clusters[r.Name] = c
	im.conn.join(r.Name)
	im.follow(c)
	return c
}

// follow starts c's follower; im.mu is held.
func (im *Importer) follow(c *cluster) {
	ctx, cancel := context.WithCancel(im.ctx)
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(ctx)
}
