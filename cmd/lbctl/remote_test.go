package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
)

// demoPipeline runs the demo's manifests through the pipeline.
func demoPipeline(t *testing.T, algorithm string) *pipeline {
	t.Helper()
	p, err := startPipeline("../../examples/demo", "node-a", "", algorithm, 251, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

// serveAgent serves p's tables and maps as an agent does (package api),
// on loopback, and returns the URL to give --api.
func serveAgent(t *testing.T, p *pipeline) string {
	t.Helper()
	mux := http.NewServeMux()
	api.Register(mux, slog.New(slog.DiscardHandler), p.db, p.maps)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// agentAPI serves the tables and maps of the demo, as an agent would.
func agentAPI(t *testing.T) string {
	t.Helper()
	return serveAgent(t, demoPipeline(t, "random"))
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
	if len(fes) != 14 || fes[0].Policy == nil || fes[0].Service.IsZero() || len(fes[0].Backends) == 0 {
		t.Fatalf("decoded %d frontends, first %+v", len(fes), fes[0])
	}
}

// --watch prints the rows as they change.
func TestRemoteWatch(t *testing.T) {
	p := demoPipeline(t, "random")
	mux := http.NewServeMux()
	api.Register(mux, slog.New(slog.DiscardHandler), p.db, p.maps)
	srv := httptest.NewServer(mux)

	out := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run([]string{"frontends", "--api", srv.URL, "--watch"}, out, io.Discard) }()
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

// An agent that mounts the API under a prefix of its own server (package
// api's Handler behind http.StripPrefix) is read through --api naming the
// prefix: the same rows, maps and explanations as at the root.
func TestRemoteReadsAnAPIMountedUnderAPrefix(t *testing.T) {
	p := demoPipeline(t, "maglev")
	root := serveAgent(t, p)
	mux := http.NewServeMux()
	mux.Handle("/lb/", http.StripPrefix("/lb", api.Handler(slog.New(slog.DiscardHandler), p.db, p.maps)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, args := range [][]string{
		{"frontends"}, {"backends", "-o", "json"}, {"maps"},
		{"explain", "10.96.0.10:80/TCP", "--src", "192.0.2.77:40000"},
	} {
		var out [2]string
		for i, base := range []string{root, srv.URL + "/lb"} {
			var stdout, stderr bytes.Buffer
			if code := run(append(args, "--api", base), &stdout, &stderr); code != 0 {
				t.Fatalf("lbctl %v --api %s: exit %d: %s", args, base, code, stderr.String())
			}
			out[i] = stdout.String()
		}
		if out[0] == "" || out[0] != out[1] {
			t.Errorf("lbctl %v at the root:\n%s\nunder /lb:\n%s", args, out[0], out[1])
		}
	}
}
