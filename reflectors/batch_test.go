package reflectors_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// A batch whose call meets invalid input rejects that object and commits
// the rest; one whose call meets any other error commits nothing.
func TestBatchCommitsPastInvalidInputAndNothingPastAnotherError(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := reflectors.NewSource(w, testSource, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	declare := func(b *reflectors.Batch, name, addr string) {
		b.Call(func(txn statedb.WriteTxn) {
			n := lb.NewServiceName("ns", name)
			b.Check(w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceAPI, Frontends: []lb.FrontendParams{
				{Address: lb.MustParseL3n4Addr(addr), Type: lb.SVCTypeClusterIP}}}), n.String())
		})
	}
	declared := func(name string) bool {
		_, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(lb.NewServiceName("ns", name)))
		return ok
	}

	b := reflectors.NewBatch(src)
	declare(b, "a", "10.96.0.1:80/TCP")
	b.Call(func(statedb.WriteTxn) { b.Check(tables.Invalidf("service ns/bad", "spec.ports", "no ports"), "ns/bad") })
	if err := b.Write(); err != nil {
		t.Fatalf("a batch with invalid input failed: %v", err)
	}
	if !declared("a") || src.Errors() != 1 {
		t.Fatalf("a declared %v with %d errors counted, want it declared and 1 error", declared("a"), src.Errors())
	}

	b = reflectors.NewBatch(src)
	declare(b, "b", "10.96.0.2:80/TCP")
	b.Call(func(statedb.WriteTxn) { b.Check(errors.New("map full"), "ns/b") })
	if err := b.Write(); err == nil || !strings.Contains(err.Error(), "map full") {
		t.Fatalf("error %v, want the internal error", err)
	}
	if declared("b") || src.Errors() != 1 {
		t.Fatalf("b declared %v with %d errors counted after an internal error, want nothing committed nor counted", declared("b"), src.Errors())
	}
}
