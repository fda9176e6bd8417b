package clustermesh

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
)

const (
	retryMin = 100 * time.Millisecond
	retryMax = 30 * time.Second
)

// cluster follows one remote cluster's services. written is what it
// declared to each local service (the addresses only: the tables hold
// the rest), so that an update or a delete releases exactly the backends
// this cluster no longer offers.
type cluster struct {
	remote Remote
	src    *reflectors.Source
	cancel context.CancelFunc
	synced chan struct{} // closed once the synced key was seen, or on timeout
	done   chan struct{} // closed when run returns

	syncOnce sync.Once
	written  map[lb.ServiceName][]lb.L3n4Addr // only run's goroutine
}

func (c *cluster) markSynced() { c.syncOnce.Do(func() { close(c.synced) }) }

// run lists and watches until ctx is done, listing anew after any
// failure (a lost connection, a compacted revision), with backoff.
func (c *cluster) run(ctx context.Context) {
	defer close(c.done)
	timeout := c.remote.SyncTimeout
	if timeout == 0 {
		timeout = DefaultSyncTimeout
	}
	timer := time.AfterFunc(timeout, func() {
		c.src.Log().Warn("Remote cluster not synced in time, going on without it", "cluster", c.remote.Name, "timeout", timeout)
		c.markSynced()
	})
	defer timer.Stop()
	log := c.src.Log().With("cluster", c.remote.Name)
	for wait := retryMin; ; wait = min(2*wait, retryMax) {
		err := c.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		// Endpoints only: the config holds credentials.
		log.Warn("Remote cluster's etcd failed, connecting again", "endpoints", c.remote.Etcd.Endpoints, "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// follow connects, lists the services and the synced key, then watches
// both from the listed revision, until an error or ctx is done.
func (c *cluster) follow(ctx context.Context) error {
	cfg := c.remote.Etcd
	cfg.Context = ctx
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()

	prefix := ServicesPrefix + c.remote.Name + "/"
	list, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	rev := list.Header.Revision
	synced, err := cli.Get(ctx, SyncedKey(c.remote.Name), clientv3.WithRev(rev))
	if err != nil {
		return fmt.Errorf("get %s: %w", SyncedKey(c.remote.Name), err)
	}
	c.resync(list.Kvs)
	if synced.Count > 0 {
		c.markSynced()
	}

	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	services := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	syncedKey := cli.Watch(wctx, SyncedKey(c.remote.Name), clientv3.WithRev(rev+1))
	for {
		select {
		case <-ctx.Done():
			return nil
		case resp, ok := <-services:
			if !ok {
				return fmt.Errorf("watch %s: closed", prefix)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch %s: %w", prefix, err)
			}
			c.apply(resp.Events)
		case resp, ok := <-syncedKey:
			if !ok || resp.Err() != nil {
				return fmt.Errorf("watch %s: closed (%v)", SyncedKey(c.remote.Name), resp.Err())
			}
			if slices.ContainsFunc(resp.Events, func(e *clientv3.Event) bool { return e.Type == mvccpb.PUT }) {
				c.markSynced()
			}
		}
	}
}

// resync applies a full listing: every service listed is written, and
// what this cluster wrote before for services no longer listed (gone
// while we were disconnected) is released.
func (c *cluster) resync(kvs []*mvccpb.KeyValue) {
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
	c.write(next)
}

// apply applies one watch response's events in one transaction.
func (c *cluster) apply(events []*clientv3.Event) {
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
	c.write(next)
}

// decode turns one value into the local service it joins and the
// backends it offers; bad input is rejected alone, naming the key.
func (c *cluster) decode(key string, value []byte) (lb.ServiceName, []lb.BackendParams, bool) {
	s, err := DecodeService(key, value)
	if err == nil && s.Cluster != c.remote.Name {
		err = fmt.Errorf("key %s: cluster %q, want %q", key, s.Cluster, c.remote.Name)
	}
	if err == nil && s.ClusterID != c.remote.ID {
		err = fmt.Errorf("key %s: clusterID %d, want %d", key, s.ClusterID, c.remote.ID)
	}
	if err != nil {
		c.src.Reject(err)
		var name lb.ServiceName
		if _, ns, n, kerr := ParseServiceKey(key); kerr == nil {
			name = lb.NewServiceName(ns, n)
		}
		return name, nil, false
	}
	backends := slices.DeleteFunc(s.LocalBackends(), func(b lb.BackendParams) bool {
		err := b.Validate()
		if err != nil {
			c.src.Reject(fmt.Errorf("key %s: %w", key, err))
		}
		return err != nil
	})
	if len(backends) == 0 {
		backends = nil // none: what a service that offers nothing writes
	}
	return lb.NewServiceName(s.Namespace, s.Name), backends, true
}

// write makes each local service's backends from this cluster the given
// ones (nil: none), in one transaction.
func (c *cluster) write(next map[lb.ServiceName][]lb.BackendParams) {
	if len(next) == 0 {
		return
	}
	w := c.src.Writer
	txn := w.WriteTxn()
	defer txn.Abort()
	err := w.Batch(txn, func() error {
		for name, backends := range next {
			var gone []lb.L3n4Addr
			for _, old := range c.written[name] {
				if !slices.ContainsFunc(backends, func(b lb.BackendParams) bool { return b.Address == old }) {
					gone = append(gone, old)
				}
			}
			if err := w.ReleaseBackends(txn, name, lb.SourceKVStore, gone...); err != nil {
				return err
			}
			if err := w.UpsertBackends(txn, name, lb.SourceKVStore, backends...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Every backend was validated: this is a bug, not bad input.
		c.src.Reject(fmt.Errorf("remote cluster %s: %w", c.remote.Name, err))
		return
	}
	txn.Commit()
	for name, backends := range next {
		if backends == nil {
			delete(c.written, name)
		} else {
			addrs := make([]lb.L3n4Addr, len(backends))
			for i := range backends {
				addrs[i] = backends[i].Address
			}
			c.written[name] = addrs
		}
	}
}
