package api

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// shortLimits are DefaultLimits with a request timeout a test can
// outlast, and small caps. Streams keep a long write timeout, so that a
// loaded machine does not cut them; testing that timeout takes its own.
var shortLimits = Limits{
	RequestTimeout:     300 * time.Millisecond,
	StreamWriteTimeout: 10 * time.Second,
	MaxBodyBytes:       1024,
	MaxRequests:        2,
	MaxStreams:         1,
	MaxMaglevTables:    2,
}

// serveLimited serves h within limits on loopback.
func serveLimited(t *testing.T, limits Limits, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(limits.Wrap(slog.New(slog.DiscardHandler), h))
	t.Cleanup(srv.Close)
	return srv.URL
}

// trickle writes a line every 50ms until a write fails, then says so on
// done.
func trickle(done chan<- error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for {
			_, err := io.WriteString(w, "tick\n")
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				done <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// A plain request is cut off at its deadline, while a stream that the
// client reads lives on past it: the API's timeouts do not cut watches.
func TestRequestDeadlineCutsPlainRequestsNotStreams(t *testing.T) {
	done := make(chan error, 2)
	url := serveLimited(t, shortLimits, trickle(done))

	resp, err := http.Get(url + "/statedb/dump")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) // ends when the server cuts it
	resp.Body.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a plain request outlived its deadline by 10s")
	}

	resp, err = http.Get(url + "/statedb/changes/frontends")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	buf := make([]byte, 64)
	for time.Since(start) < 4*shortLimits.RequestTimeout {
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatalf("the stream ended after %v (request timeout %v): %v", time.Since(start), shortLimits.RequestTimeout, err)
		}
	}
}

// A stream whose client stops reading is cut off once a write cannot get
// out within the stream's write timeout, instead of holding the handler
// (and StateDB's change tracker) forever.
func TestStreamToClientThatStopsReadingIsCutOff(t *testing.T) {
	done := make(chan error, 1)
	chunk := bytes.Repeat([]byte("x"), 1<<16)
	limits := shortLimits
	limits.StreamWriteTimeout = 300 * time.Millisecond
	url := serveLimited(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := w.Write(chunk); err != nil {
				done <- err
				return
			}
		}
	}))
	resp, err := http.Get(url + "/statedb/changes/frontends")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read
	select {
	case err := <-done:
		if !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("the stream ended with %v, want a write timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stream to a client that reads nothing was still open after 20s")
	}
}

// What one request can make the agent hold is bounded: its body, how many
// Maglev tables it asks for, and how many requests and streams are in
// flight at once.
func TestRequestsAreBounded(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	url := serveLimited(t, shortLimits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/statedb/changes/") {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-block
		}
	}))
	status := func(method, path, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("GET", "/statedb/query", strings.Repeat("x", 2048)); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 KiB body over a 1 KiB limit: %d", got)
	}
	if got := status("GET", "/maps?maglev=1&maglev=2&maglev=3", ""); got != http.StatusBadRequest {
		t.Errorf("3 Maglev tables over a limit of 2: %d", got)
	}
	if got := status("GET", "/maps?maglev=1&maglev=2", ""); got != http.StatusOK {
		t.Errorf("2 Maglev tables: %d", got)
	}
	if got := status("GET", "/statedb/changes/frontends", ""); got != http.StatusOK {
		t.Fatalf("the first stream: %d", got)
	}
	if got := status("GET", "/statedb/changes/frontends", ""); got != http.StatusServiceUnavailable {
		t.Errorf("a second stream over a limit of 1: %d", got)
	}
	if got := status("GET", "/statedb/dump", ""); got != http.StatusOK {
		t.Errorf("a plain request while the streams are full: %d", got)
	}
}

// StateDB's watch, through the limits, delivers changes made long after
// the plain requests' deadline.
func TestWatchThroughLimitsOutlivesRequestTimeout(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(shortLimits.Handler(slog.New(slog.DiscardHandler), db, maps))
	defer srv.Close()
	url := srv.URL
	resp, err := http.Get(url + "/statedb/changes/" + tables.FrontendsTableName)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	time.Sleep(3 * shortLimits.RequestTimeout)
	txn := w.WriteTxn()
	if err := w.UpsertService(txn, lb.ServiceParams{Name: lb.NewServiceName("default", "late"), Source: lb.SourceAPI,
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.9.9:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()

	got := make(chan string, 1)
	go func() {
		var seen []byte
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			seen = append(seen, buf[:n]...)
			if bytes.Contains(seen, []byte("10.96.9.9:80/TCP")) || err != nil {
				got <- string(seen)
				return
			}
		}
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, "10.96.9.9:80/TCP") {
			t.Fatalf("the watch ended without the change:\n%s", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not deliver the change in 10s")
	}
}
