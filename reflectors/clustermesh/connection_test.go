package clustermesh

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// sourceConnected is lbstate_source_connected{source="kvstore"}, or -1
// without one.
func sourceConnected(reg *prometheus.Registry) float64 {
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() != "lbstate_source_connected" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == SourceName {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// The kvstore source is connected while every remote cluster's watch is
// established: a stopped etcd makes it disconnected (gauge 0) with an
// error naming that cluster, its restart connected again (gauge 1); two
// clusters down are one outage, which lasts until both are back or the
// one still down is removed. Each outage is one WARN line and one INFO
// line, however often the clusters retry inside it.
func TestEtcdOutageDisconnectsTheSourceUntilEveryClusterWatches(t *testing.T) {
	_, cfg2, etcd2 := startEtcd(t)
	_, cfg3, etcd3 := startEtcd(t)
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := &syncbuf.Buffer{}
	reg := prometheus.NewRegistry()
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.NewTextHandler(log, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	im, err := NewImporter(Self{Name: "c1", ID: 1},
		// A short stale timeout: 1s requests, a dead etcd noticed in 1s.
		Remote{Name: "c2", ID: 2, Etcd: cfg2, SyncTimeout: time.Second, StaleTimeout: 3 * time.Second},
		Remote{Name: "c3", ID: 3, Etcd: cfg3, SyncTimeout: time.Second, StaleTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); im.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })

	gaugeIs := func(what string, want float64) {
		t.Helper()
		start := time.Now()
		waitFor(t, what, func() bool { return sourceConnected(reg) == want })
		t.Logf("%s: in %s", what, time.Since(start).Round(time.Millisecond))
	}
	outages := func(want int) {
		t.Helper()
		out := log.String()
		warn, info := strings.Count(out, `level=WARN msg="Source disconnected, retrying"`), strings.Count(out, `level=INFO msg="Source reconnected"`)
		if warn != want || info != want {
			t.Fatalf("%d WARN and %d INFO lines for %d outages, want %d each:\n%s", warn, info, want, want, out)
		}
	}
	gaugeIs("connected to both clusters", 1)

	etcd2.Stop()
	gaugeIs("disconnected with c2's etcd stopped", 0)
	if !strings.Contains(log.String(), `msg="Source disconnected, retrying" source=kvstore error="remote cluster c2: `) {
		t.Fatalf("the outage's WARN line does not name cluster c2:\n%s", log)
	}
	if err := etcd2.Restart(false); err != nil {
		t.Fatal(err)
	}
	gaugeIs("connected again with c2's etcd back", 1)
	outages(1)

	etcd2.Stop()
	etcd3.Stop()
	gaugeIs("disconnected with both etcds stopped", 0)
	if err := etcd2.Restart(false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c2 watching again", func() bool {
		im.conn.mu.Lock()
		defer im.conn.mu.Unlock()
		return im.conn.clusters["c2"].watching
	})
	if got := sourceConnected(reg); got != 0 {
		t.Fatalf("lbstate_source_connected = %v with c2 back but c3 still down, want 0", got)
	}
	if err := im.Remove("c3"); err != nil {
		t.Fatal(err)
	}
	gaugeIs("connected once the cluster still down is removed", 1)
	outages(2)
}

// reports records what a connection reports, one line each.
type reports []string

func (r *reports) Connected()             { *r = append(*r, "connected") }
func (r *reports) Disconnected(err error) { *r = append(*r, "disconnected: "+err.Error()) }

// The clusters' outcomes fold into one connection: starting reports
// nothing until every cluster watches; an outage shows the error of the
// cluster failing the longest, not the latest retry of another; a
// removed cluster stops counting, and one that has yet to watch keeps
// the outage on under its own name.
func TestClustersFoldIntoOneConnection(t *testing.T) {
	var got reports
	c := newConnection(&got)
	c.join("c2")
	c.join("c3")
	c.check()
	c.watching("c2")
	if len(got) != 0 {
		t.Fatalf("with c3 not watching yet: %q, want nothing reported", got)
	}
	c.watching("c3")
	c.watching("c3")
	c.failed("c2", errors.New("connection refused"))
	c.failed("c3", errors.New("heartbeat: deadline exceeded"))
	c.failed("c3", errors.New("connection refused"))
	c.watching("c2")
	c.join("c4")
	c.leave("c3")
	c.watching("c4")
	c.leave("c4")
	c.leave("c2")
	want := reports{
		"connected",
		"disconnected: remote cluster c2: connection refused",
		"disconnected: remote cluster c2: connection refused",
		"disconnected: remote cluster c2: connection refused",
		"disconnected: remote cluster c3: connection refused",
		"disconnected: remote cluster c4: not watching yet",
		"connected",
	}
	if !slices.Equal(got, want) {
		t.Errorf("reported:\n %q\nwant\n %q", got, want)
	}

	var none reports
	newConnection(&none).check()
	if !slices.Equal(none, reports{"connected"}) {
		t.Errorf("with no remote cluster: %q, want connected", none)
	}
}
