package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// agentAPI serves the tables of the demo, as an agent's API would.
func agentAPI(t *testing.T) string {
	t.Helper()
	p, err := startPipeline("../../examples/demo", "node-a", "", "random", 251, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	mux := http.NewServeMux()
	mux.Handle("/statedb/", http.StripPrefix("/statedb", p.db.HTTPHandler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/statedb"
}

func TestRemoteTablesGolden(t *testing.T) {
	api := agentAPI(t)
	for _, table := range []string{"services", "frontends", "backends"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{table, "--api", api}, &stdout, &stderr); code != 0 {
			t.Fatalf("lbctl %s: exit %d: %s", table, code, stderr.String())
		}
		golden(t, table+"-demo.txt", stdout.Bytes())
	}

	// JSON decodes back into the model.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"frontends", "--api", api, "-o", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var fes []*lb.Frontend
	if err := json.Unmarshal(stdout.Bytes(), &fes); err != nil {
		t.Fatal(err)
	}
	if len(fes) != 13 || fes[0].Policy == nil || fes[0].Service.IsZero() || len(fes[0].Backends) == 0 {
		t.Fatalf("decoded %d frontends, first %+v", len(fes), fes[0])
	}
}

func TestRemoteErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frontends", "--api", "http://127.0.0.1:1/statedb"}, "is the agent running?"},
		{[]string{"services", "--api", "not a url"}, `--api "not a url": want a URL`},
		{[]string{"backends", "--api", "http://127.0.0.1:1", "-o", "xml"}, ""},
		{[]string{"maps", "--pin-dir", "/nonexistent"}, "no pinned map lb_services in /nonexistent"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("lbctl %v: exit %d, stderr %q, want an error with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// lbctl maps prints the dump of the pinned maps.
func TestMapsCommand(t *testing.T) {
	cfg := bpftest.Config(t)
	m := bpftest.KernelMaps(t, cfg)
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	m.Backends.Update(1, bpf.NewBackend(lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP")}, 0))
	m.Services.Update(bpf.NewServiceKey(fe, 0), bpf.ServiceValue{RevNatID: 1, Count: 1, Type: 1, Algorithm: bpf.AlgorithmRandom})
	m.Services.Update(bpf.NewServiceKey(fe, 1), bpf.ServiceValue{BackendID: 1, RevNatID: 1})
	m.RevNat.Update(1, bpf.NewRevNatValue(fe))
	want, err := bpf.TakeDump(m)
	if err != nil {
		t.Fatal(err)
	}
	var wantText bytes.Buffer
	want.WriteText(&wantText)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"maps", "--pin-dir", cfg.LBPinDir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.String() != wantText.String() || !strings.Contains(stdout.String(), "service 10.96.0.1:80/TCP slot=1 backend=1") {
		t.Fatalf("lbctl maps:\n%s\nwant:\n%s", stdout.String(), wantText.String())
	}
}

// --watch prints the rows as they change.
func TestRemoteWatch(t *testing.T) {
	p, err := startPipeline("../../examples/demo", "node-a", "", "random", 251, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	mux := http.NewServeMux()
	mux.Handle("/statedb/", http.StripPrefix("/statedb", p.db.HTTPHandler()))
	srv := httptest.NewServer(mux)

	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run([]string{"frontends", "--api", srv.URL + "/statedb", "--watch"}, out, io.Discard) }()
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("watch never printed %q:\n%s", want, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("10.96.0.53:53/UDP") // the initial rows

	txn := p.w.WriteTxn()
	name := lb.NewServiceName("default", "late")
	if err := p.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceAPI,
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.9.9:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	waitFor("10.96.9.9:80/TCP")

	txn = p.w.WriteTxn()
	p.w.DeleteService(txn, name, lb.SourceAPI)
	txn.Commit()
	waitFor("- 10.96.9.9:80/TCP")

	srv.CloseClientConnections()
	srv.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end when the agent went away")
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
