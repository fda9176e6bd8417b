package datapath_test

import (
	"context"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// Real TCP connections from outside the node, open across an agent
// restart, keep talking to the backend they had: the old agent's programs
// go with it, the new one attaches them again over the same pinned maps,
// restores the IDs, and finds each connection's conntrack entry naming
// its backend, before its source declared anything and after it declared
// the same services, synced and pruned; it writes no map entry. Beside
// the web service, 1,000 services x 10 backends give restore and prune
// real work (the flows at 10,000 x 10 are
// TestEstablishedFlowsStayAcrossARestartAtScale's).
func TestOpenConnectionsKeepTheirBackendAcrossAnAgentRestart(t *testing.T) {
	e := newE2E(t)
	declareAll := func() {
		e.declare(100, 100, 100)
		declareScale(e.a, 1000, 10)
	}
	declareAll()
	var open []*persistent
	backends := map[string]bool{}
	for range 30 {
		p := dialPersistent(t, e.outside, lbIP+":80")
		open = append(open, p)
		backends[p.backend] = true
	}
	if len(backends) < 2 {
		t.Fatalf("30 connections all went to %v", backends)
	}

	e.a.stop()
	e.stopped = true
	e.a.maps.Close()
	e.a = newAgent(t, bpftest.KernelMaps(t, e.cfg), e.datapathConfig())
	synced, err := e.a.w.RegisterInitializer("test") // nothing is pruned before it synced
	if err != nil {
		t.Fatal(err)
	}
	if err := e.node.Do(func() error { return e.a.h.Start(e.a.log, context.Background()) }); err != nil {
		t.Fatal(err)
	}
	e.stopped = false
	ask := func(when string) {
		t.Helper()
		for _, p := range open {
			if got := p.ask(t); got != p.backend {
				t.Fatalf("%s: an open connection to %s now reaches %s", when, p.backend, got)
			}
		}
	}
	ask("restarted, before the source declared anything")
	declareAll()
	e.a.write(func(txn statedb.WriteTxn) error { synced(txn); return nil })
	deadline := time.Now().Add(time.Minute)
	for e.a.gatherOne("lbstate_reconciler_prune_duration_seconds")[""] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the restarted agent did not prune in a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	ask("after the restart, synced and pruned")
	for m, n := range e.a.gatherOne("lbstate_map_writes_total") {
		if n != 0 {
			t.Errorf("the restarted agent wrote %v entries of %s", n, m)
		}
	}
	if p := dialPersistent(t, e.outside, lbIP+":80"); !backends[p.backend] {
		t.Errorf("a new connection after the restart reached %q", p.backend)
	}
}
