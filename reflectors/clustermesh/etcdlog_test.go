package clustermesh

import (
	"context"
	"log/slog"
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

// The etcd client's own log lines (its retries while etcd is away) come
// out of the source's logger, in the agent's format and with the
// cluster's name, not as zap's JSON on stderr. (They were once JSON lines
// in the middle of the agent's logfmt log.)
func TestEtcdClientLogsThroughTheSourceLogger(t *testing.T) {
	_, cfg, etcd := startEtcd(t)
	w, err := tables.New(statedb.New(), nil)
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
		Remote{Name: "c2", ID: 2, Etcd: cfg, SyncTimeout: time.Second, StaleTimeout: 3 * time.Second}) // 1s requests
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); im.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "connected to c2", func() bool { return sourceConnected(reg) == 1 })
	etcd.Stop()
	waitFor(t, "an etcd client line in the source's log", func() bool { return strings.Contains(log.String(), "logger=etcd-client") })
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "logger=etcd-client") {
			if !strings.HasPrefix(line, "time=") || !strings.Contains(line, "source=kvstore") || strings.Contains(line, `{"level"`) {
				t.Errorf("etcd client line not in the source's format, or without its source: %s", line)
			}
		}
	}
}
