package clustermesh

import (
	"fmt"
	"sync"
)

// reporter is told whether the remote clusters are reached
// (*reflectors.Source is one). Its methods are called one at a time, in
// order.
type reporter interface {
	Connected()
	Disconnected(err error)
}

// connection folds the remote clusters' connections into the source's
// one: the kvstore source is connected while every cluster followed
// watches its etcd, and disconnected while any does not, with the error
// of the cluster failing the longest (the error shown changes when what
// fails changes, not at every other cluster's retry). A cluster not yet
// watching for the first time keeps the source from being connected but
// does not disconnect it: starting is no outage. A removed cluster no
// longer counts.
//
// Its own lock, not the importer's: Update holds that one while it
// waits for a follower, which may be reporting.
type connection struct {
	report reporter

	mu        sync.Mutex
	clusters  map[string]*clusterConn
	seq       uint64
	connected bool // Connected was reported last
	down      bool // Disconnected was: an outage is on
}

// clusterConn is one cluster's last outcome.
type clusterConn struct {
	watching bool   // its watch is established
	err      error  // its last connection failed with err
	since    uint64 // when (seq) it started failing
}

func newConnection(r reporter) *connection {
	return &connection{report: r, clusters: map[string]*clusterConn{}}
}

// check reports what holds now (Connected with no cluster at all).
func (c *connection) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updateLocked()
}

// join counts a cluster that has not watched yet.
func (c *connection) join(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.clusters[name]; !ok {
		c.clusters[name] = &clusterConn{}
	}
}

// leave stops counting a removed cluster: the others may be all
// connected now.
func (c *connection) leave(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.clusters, name)
	c.updateLocked()
}

// watching: the cluster's watch is established.
func (c *connection) watching(name string) { c.settle(name, nil) }

// failed: the cluster's connection failed or broke with err.
func (c *connection) failed(name string, err error) {
	c.settle(name, fmt.Errorf("remote cluster %s: %w", name, err))
}

func (c *connection) settle(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.clusters[name]
	if m == nil {
		return // removed meanwhile
	}
	c.seq++
	if err != nil && m.err == nil {
		m.since = c.seq
	}
	m.watching, m.err = err == nil, err
	c.updateLocked()
}

// updateLocked reports Disconnected with the error of the cluster
// failing the longest, if any; else Connected once every cluster
// watches (with none configured, at once: nothing is unreached). An
// outage whose failing clusters were removed lasts while another has
// yet to watch, with an error naming that one, not a removed cluster.
func (c *connection) updateLocked() {
	var failing *clusterConn
	pending := ""
	for name, m := range c.clusters {
		switch {
		case m.err != nil:
			if failing == nil || m.since < failing.since {
				failing = m
			}
		case !m.watching && (pending == "" || name < pending):
			pending = name
		}
	}
	switch {
	case failing != nil:
		c.connected, c.down = false, true
		c.report.Disconnected(failing.err)
	case pending != "" && c.down:
		c.report.Disconnected(fmt.Errorf("remote cluster %s: not watching yet", pending))
	case pending == "" && !c.connected:
		c.connected, c.down = true, false
		c.report.Connected()
	}
}
