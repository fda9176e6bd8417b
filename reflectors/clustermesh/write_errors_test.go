package clustermesh

import (
	"log/slog"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// A service the Writer finds invalid is rejected alone: counted, not
// remembered as written, and the other services of the same write are
// committed.
func TestClusterWriteRejectsAnInvalidServiceAloneAndCommitsTheRest(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{remote: Remote{Name: "c2"}, src: src, commits: &commits{src: src}, id: 2, log: src.Log(), written: map[lb.ServiceName]struct{}{}}
	good, bad := lb.NewServiceName("default", "web"), lb.NewServiceName("default", "a/b") // '/' in a name: invalid
	backend := lb.BackendParams{Address: lb.MustParseL3n4Addr("10.2.0.1:8080/TCP"), Weight: lb.DefaultBackendWeight, ClusterID: 2}
	c.mu.Lock()
	err = c.write(map[lb.ServiceName][]lb.BackendParams{good: {backend}, bad: {backend}}, c.cause(1, ""))
	c.mu.Unlock()
	if err != nil {
		t.Fatalf("write with one invalid service failed: %v", err)
	}
	if n := src.Errors(); n != 1 {
		t.Errorf("%d rejected, want 1", n)
	}
	if _, ok := c.written[bad]; ok {
		t.Error("the rejected service is remembered as written")
	}
	b, _, found := w.Backends().Get(db.ReadTxn(), tables.BackendByAddress.Query(backend.Address))
	if !found {
		t.Fatal("the valid service's backend was not committed")
	}
	if _, ok := b.Instance(good, lb.SourceKVStore); !ok {
		t.Errorf("backend %s has no instance for %s", backend.Address, good)
	}
}
