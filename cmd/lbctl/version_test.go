package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lbstate/lbstate/api"
)

// lbctl reads rows by a query in text, naming the read API version it
// speaks, never by StateDB index keys it built itself: an agent whose
// indexes encode keys otherwise still finds the rows.
func TestLbctlReadsRowsByTextQueriesOfItsVersion(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	mux := http.NewServeMux()
	api.Register(mux, slog.New(slog.DiscardHandler), demoPipeline(t, "random").db, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" version="+r.Header.Get(api.VersionHeader))
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, cmd := range []string{"services", "frontends", "backends", "routes", "redirects"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{cmd, "--api", srv.URL}, &stdout, &stderr); code != 0 {
			t.Errorf("lbctl %s: exit %d: %s", cmd, code, stderr.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := " version=" + strconv.Itoa(api.ReadAPIVersion)
	for _, req := range seen {
		if !strings.HasPrefix(req, api.RowsPath) || !strings.HasSuffix(req, want) {
			t.Errorf("request %s: want %s<table>%s", req, api.RowsPath, want)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no requests")
	}
}

// Against an agent of another read API version, lbctl fails with what
// the agent says (both versions, and what to do), and against one older
// than the versioned API it says that may be what it is: never an empty
// listing.
func TestLbctlAgainstAnotherReadAPIVersionSaysSo(t *testing.T) {
	newer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.VersionHeader, "2")
		if r.Header.Get(api.VersionHeader) != "2" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"err":"the client speaks lbstate read API version 1, this agent version 2: use the lbctl (or client) of the agent's release"}`))
			return
		}
		w.Write([]byte(`{"obj":{}}` + "\n"))
	}))
	t.Cleanup(newer.Close)
	// An older agent serves StateDB's own API and nothing at RowsPath.
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/statedb/") {
			w.Write([]byte(`{"obj":{}}` + "\n"))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(older.Close)
	for _, c := range []struct{ name, url, want string }{
		{"newer", newer.URL, "the client speaks lbstate read API version 1, this agent version 2"},
		{"older", older.URL, "An agent older than this lbctl serves no lbstate read API version 1 at /rows/: use the lbctl of its release"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"frontends", "--api", c.url}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), c.want) || stdout.Len() > 0 {
			t.Errorf("%s agent: exit %d, stdout %q, stderr %q; want exit 1, nothing listed, and %q", c.name, code, stdout.String(), stderr.String(), c.want)
		}
	}
}
