package clustermesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/internal/zapslog"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

const (
	retryMin = 100 * time.Millisecond
	retryMax = 30 * time.Second
)

// errCompacted ends a watch whose revision etcd compacted away: the
// next connection lists again.
var errCompacted = errors.New("revision compacted, listing again")

// cluster follows one remote cluster's services. written names the local
// services it gave backends (the tables hold which: those of its cluster
// ID, and Writer.SetClusterBackends releases exactly the ones this cluster
// no longer offers).
//
// A lost connection keeps what was written: the next one resumes the
// watch from the last revision applied (a full list only when etcd
// compacted it, or is another etcd), so a reconnect to unchanged content
// writes nothing. A cluster away for longer than its stale timeout loses
// its backends then.
type cluster struct {
	src     *reflectors.Source
	commits *commits    // its writes, grouped with other clusters'
	conn    *connection // told when its watch is established or lost
	log     *slog.Logger
	self    Self          // the local cluster, which no remote may claim to be
	synced  chan struct{} // closed once the synced key was seen, or on timeout
	sync    *time.Timer   // the sync timeout
	once    sync.Once     // closes synced
	refused sync.Once     // counts a refusal once
	remote  Remote        // the follower's; replaced only while it is stopped
	cancel  context.CancelFunc
	done    chan struct{} // closed when the follower returns

	mu          sync.Mutex  // the follower and the stale timer
	dec         fastDecoder // the follower's scratch space
	written     map[lb.ServiceName]struct{}
	id          uint32 // the cluster ID the written backends carry
	rev         int64  // the last revision applied; 0: list first
	etcdID      uint64 // the etcd cluster rev belongs to
	lastContact time.Time
	added       time.Time   // when the importer started following it
	stale       *time.Timer // running while disconnected with backends written
}

// markSynced ends the wait for the cluster's initial sync, for a reason:
// "synced" (its synced key), "timeout" or "removed".
func (c *cluster) markSynced(reason string) {
	c.once.Do(func() {
		switch reason {
		case "synced":
			c.log.Info("Remote cluster synced")
		case "timeout":
			c.log.Warn("Remote cluster not synced in time, going on without it", "timeout", cmp.Or(c.remote.SyncTimeout, DefaultSyncTimeout))
		}
		close(c.synced)
	})
}

// staleTimeout is how long the cluster's backends outlive a lost
// connection.
func (c *cluster) staleTimeout() time.Duration {
	if c.remote.StaleTimeout > 0 {
		return c.remote.StaleTimeout
	}
	return DefaultStaleTimeout
}

// requestTimeout bounds one request; heartbeat is how often a quiet
// connection is checked. Both scale with the stale timeout so that a
// dead etcd is noticed well within it.
func (c *cluster) requestTimeout() time.Duration {
	return min(max(c.staleTimeout()/6, time.Second), 5*time.Second)
}

// listTimeout bounds a full list, which may be large.
const listTimeout = 30 * time.Second

func (c *cluster) heartbeat() time.Duration {
	return min(max(c.staleTimeout()/6, 100*time.Millisecond), 5*time.Second)
}

// run follows the cluster until ctx is done, connecting again after any
// failure (a lost connection, a compacted revision), with backoff.
func (c *cluster) run(ctx context.Context) {
	defer close(c.done)
	for wait := retryMin; ; wait = min(2*wait, retryMax) {
		connected, err := c.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			wait = retryMin
		}
		if !errors.Is(err, errCompacted) { // still connected: list at once
			c.disconnected()
			c.conn.failed(c.remote.Name, err)
		}
		// Endpoints only: the config holds credentials.
		c.log.Warn("Remote cluster unreachable or not ready, connecting again", "endpoints", c.remote.Etcd.Endpoints, "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// follow connects, lists the services (unless it can resume the watch)
// and the synced key, then watches both, until an error or ctx is done.
// connected says it got as far as watching.
func (c *cluster) follow(ctx context.Context) (connected bool, err error) {
	cfg := c.remote.Etcd
	cfg.Context = ctx
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = c.requestTimeout()
	}
	cfg.Logger = zapslog.New(c.log).Named("etcd-client") // the agent's log, not zap's JSON on stderr
	cli, err := clientv3.New(cfg)
	if err != nil {
		return false, err
	}
	defer cli.Close()
	request := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, c.requestTimeout()) }

	rctx, cancel := request()
	id, etcdID, err := c.clusterID(rctx, cli)
	cancel()
	if err != nil {
		return false, err
	}
	rev, err := c.connected(id, etcdID)
	if err != nil {
		return false, err
	}
	name := c.remote.Name
	prefix := ServicesPrefix + name + "/"
	if rev == 0 {
		rctx, cancel := context.WithTimeout(ctx, listTimeout)
		list, err := cli.Get(rctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			return false, fmt.Errorf("list %s: %w", prefix, err)
		}
		rev = list.Header.Revision
		if err := c.resync(list.Kvs, rev); err != nil {
			return false, err
		}
	}
	rctx, cancel = request()
	synced, err := cli.Get(rctx, SyncedKey(name), clientv3.WithRev(rev), clientv3.WithCountOnly())
	cancel()
	if errors.Is(err, rpctypes.ErrCompacted) {
		c.forget() // since the last revision applied
		return false, fmt.Errorf("get %s: %w", SyncedKey(name), errCompacted)
	}
	if err != nil {
		return false, fmt.Errorf("get %s: %w", SyncedKey(name), err)
	}
	if synced.Count > 0 {
		c.markSynced("synced")
	}

	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// Created: etcd answered the watch, which is what connected means.
	services := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
	syncedKey := cli.Watch(wctx, SyncedKey(name), clientv3.WithRev(rev+1))
	beat := time.NewTicker(c.heartbeat())
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case resp, ok := <-services:
			if err := c.watchErr(prefix, resp, ok); err != nil {
				return true, err
			}
			if resp.Created {
				// Its revision is etcd's current one, not what was applied.
				c.conn.watching(name)
				continue
			}
			if err := c.apply(resp.Events, resp.Header.Revision); err != nil {
				return true, err
			}
		case resp, ok := <-syncedKey:
			if err := c.watchErr(SyncedKey(name), resp, ok); err != nil {
				return true, err
			}
			if slices.ContainsFunc(resp.Events, func(e *clientv3.Event) bool { return e.Type == mvccpb.PUT }) {
				c.markSynced("synced")
			}
		case <-beat.C:
			rctx, cancel := request()
			_, err := cli.Get(rctx, SyncedKey(name), clientv3.WithCountOnly())
			cancel()
			if err != nil {
				return true, fmt.Errorf("heartbeat: %w", err)
			}
			c.contact()
		}
	}
}

func (c *cluster) watchErr(key string, resp clientv3.WatchResponse, ok bool) error {
	switch {
	case !ok:
		return fmt.Errorf("watch %s: closed", key)
	case resp.CompactRevision != 0:
		c.forget()
		return fmt.Errorf("watch %s: %w", key, errCompacted)
	case resp.Err() != nil:
		return fmt.Errorf("watch %s: %w", key, resp.Err())
	}
	c.contact()
	return nil
}

// clusterID is the remote's ID: the configured one, or else the one its
// cluster-config key declares; and the ID of the etcd cluster that
// answered. Our own name or ID is refused.
func (c *cluster) clusterID(ctx context.Context, cli *clientv3.Client) (uint32, uint64, error) {
	key := ClusterConfigKey(c.remote.Name)
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return 0, 0, fmt.Errorf("get %s: %w", key, err)
	}
	id := c.remote.ID
	var refused error
	if len(resp.Kvs) > 0 {
		cc, err := DecodeClusterConfig(key, resp.Kvs[0].Value)
		if err != nil {
			return 0, 0, err
		}
		if id != 0 && cc.ID != id {
			return 0, 0, fmt.Errorf("%s: id %d, but the cluster is configured as %d", key, cc.ID, id)
		}
		id = cc.ID
		refused = c.self.refusesConfig(c.remote.Name, cc)
	}
	if id == 0 {
		return 0, 0, fmt.Errorf("%s: not found, and no cluster ID configured: the cluster's ID is unknown", key)
	}
	if err := cmp.Or(c.self.refuses(c.remote.Name, id), refused); err != nil {
		c.markSynced("refused") // nobody waits for it
		c.refused.Do(func() { c.src.Reject(tables.AsInvalid(err)) })
		return 0, 0, err
	}
	return id, resp.Header.ClusterId, nil
}

// connected is called once a connection answered: it stops the stale
// timer and says from which revision to resume (0: list). Another
// cluster ID, or another etcd, drops what was written and lists anew.
func (c *cluster) connected(id uint32, etcdID uint64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale != nil {
		c.stale.Stop()
		c.stale = nil
		c.log.Info("Remote cluster reconnected within the stale timeout; its backends stayed")
	}
	c.lastContact = time.Now()
	if c.id != id || c.etcdID != etcdID {
		if c.id != 0 && c.id != id {
			c.log.Warn("Remote cluster's ID changed, replacing its backends", "from", c.id, "to", id)
			if err := c.dropLocked(fmt.Sprintf("cluster ID changed from %d to %d", c.id, id)); err != nil {
				return 0, err
			}
		}
		c.id, c.etcdID, c.rev = id, etcdID, 0
	}
	return c.rev, nil
}

func (c *cluster) contact() {
	c.mu.Lock()
	c.lastContact = time.Now()
	c.mu.Unlock()
}

// forget makes the next connection list again.
func (c *cluster) forget() {
	c.mu.Lock()
	c.rev = 0
	c.mu.Unlock()
}

// disconnected starts the stale timer, counted from the last contact,
// if backends were written.
func (c *cluster) disconnected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale != nil || len(c.written) == 0 {
		return
	}
	left := max(0, c.staleTimeout()-time.Since(c.lastContact))
	c.log.Warn("Remote cluster disconnected; its backends stay until it is back or the stale timeout passes", "in", left.Round(time.Millisecond))
	var t *time.Timer
	t = time.AfterFunc(left, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.stale != t {
			return // reconnected meanwhile
		}
		c.stale = nil
		if err := c.dropLocked(fmt.Sprintf("stale: no contact for %v (lease expired)", c.staleTimeout())); err != nil {
			// Not the input's fault; the next connection lists anew.
			c.log.Error("Removing a stale remote cluster's backends failed", "error", err)
			return
		}
		c.log.Warn("Remote cluster stale: its backends are removed", "after", c.staleTimeout())
	})
	c.stale = t
}

// drop removes every backend the cluster wrote, and stops its timers;
// the follower is stopped.
func (c *cluster) drop() error {
	c.stopTimers()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropLocked("removed from the configuration")
}

func (c *cluster) stopTimers() {
	c.sync.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale != nil {
		c.stale.Stop()
		c.stale = nil
	}
}

func (c *cluster) dropLocked(why string) error {
	if c.id != 0 {
		w := c.src.Writer
		txn := w.WriteTxn()
		w.SetCause(txn, c.cause(0, why))
		if err := w.DeleteSourceCluster(txn, c.src.ID(), c.id); err != nil {
			txn.Abort()
			return fmt.Errorf("remote cluster %s: %w", c.remote.Name, err)
		}
		txn.Commit()
	}
	clear(c.written)
	c.rev = 0
	return nil
}

// resync applies a full listing: every service listed is written, and
// what this cluster wrote before for services no longer listed (gone
// while we were disconnected) is released. A write that failed is
// returned (see write).
func (c *cluster) resync(kvs []*mvccpb.KeyValue, rev int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[lb.ServiceName][]lb.BackendParams{}
	bad := map[lb.ServiceName]bool{}
	for _, kv := range kvs {
		if name, backends, ok := c.decode(string(kv.Key), kv.Value); ok {
			next[name] = backends
		} else if !name.IsZero() {
			bad[name] = true // a bad value leaves what was there alone
		}
	}
	for name := range c.written {
		if _, found := next[name]; !found && !bad[name] {
			next[name] = nil
		}
	}
	if err := c.write(next, c.cause(rev, "listing")); err != nil {
		return err
	}
	c.rev = rev
	return nil
}

// apply applies one watch response's events in one transaction. A write
// that failed is returned (see write).
func (c *cluster) apply(events []*clientv3.Event, rev int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[lb.ServiceName][]lb.BackendParams{}
	for _, e := range events {
		key := string(e.Kv.Key)
		if e.Type == mvccpb.DELETE {
			if _, ns, n, err := ParseServiceKey(key); err == nil {
				next[lb.NewServiceName(ns, n)] = nil
			}
			continue
		}
		if name, backends, ok := c.decode(key, e.Kv.Value); ok {
			next[name] = backends
		}
	}
	if err := c.write(next, c.cause(rev, "")); err != nil {
		return err
	}
	c.rev = max(c.rev, rev)
	return nil
}

// decode turns one value into the local service it joins and the
// backends it offers; bad input is rejected alone, naming the key.
func (c *cluster) decode(key string, value []byte) (lb.ServiceName, []lb.BackendParams, bool) {
	name, offered, ok := decodeFast(&c.dec, key, value, c.remote.Name, c.id)
	if !ok {
		var err error
		if name, offered, err = decodeGeneral(key, value, c.remote.Name, c.id); err != nil {
			c.src.Reject(tables.AsInvalid(err))
			name = lb.ServiceName{}
			if _, ns, n, kerr := ParseServiceKey(key); kerr == nil {
				name = lb.NewServiceName(ns, n)
			}
			return name, nil, false
		}
	}
	backends := slices.DeleteFunc(offered, func(b lb.BackendParams) bool {
		err := b.Validate()
		if err != nil {
			c.src.Reject(&tables.InvalidError{Object: "key " + key, Err: err})
		}
		return err != nil
	})
	if len(backends) == 0 {
		backends = nil // none: what a service that offers nothing writes
	}
	return name, backends, true
}

// decodeGeneral is decode with encoding/json, for any value: the
// service's name and the backends it offers, or what is wrong with it.
func decodeGeneral(key string, value []byte, want string, wantID uint32) (lb.ServiceName, []lb.BackendParams, error) {
	s, err := DecodeService(key, value)
	if err == nil && s.Cluster != want {
		err = fmt.Errorf("key %s: cluster %q, want %q", key, s.Cluster, want)
	}
	if err == nil && s.ClusterID != wantID {
		err = fmt.Errorf("key %s: clusterID %d, want %d", key, s.ClusterID, wantID)
	}
	if err != nil {
		return lb.ServiceName{}, nil, err
	}
	return lb.NewServiceName(s.Namespace, s.Name), s.LocalBackends(), nil
}

// write makes each local service's backends from this cluster the given
// ones (nil: none), in a transaction it may share with other clusters
// (commits); c.mu is held. Invalid input is rejected service by service
// and the rest committed; any other error aborts the transaction and is
// returned, and the next connection lists anew (c.rev 0).
func (c *cluster) write(next map[lb.ServiceName][]lb.BackendParams, cause *tables.Cause) error {
	if len(next) == 0 {
		return nil
	}
	r := &writeRequest{cluster: c.remote.Name, id: c.id, next: next, written: c.written, cause: cause}
	c.commits.write(r)
	if r.err != nil {
		c.rev = 0
		return fmt.Errorf("remote cluster %s: writing backends (aborted): %w", c.remote.Name, r.err)
	}
	for name, backends := range next {
		if r.rejected[name] {
			continue // what was written before stays
		}
		if backends == nil {
			delete(c.written, name)
		} else {
			c.written[name] = struct{}{}
		}
	}
	return nil
}

// cause is what the history says this cluster's write applies: the
// remote cluster, its etcd revision (0: none) and why.
func (c *cluster) cause(rev int64, why string) *tables.Cause {
	cause := &tables.Cause{Source: c.src.ID().String(), Name: c.remote.Name, Detail: why}
	if rev > 0 {
		cause.Version = fmt.Sprintf("revision %d", rev)
	}
	return cause
}
