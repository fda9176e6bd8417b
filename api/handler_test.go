package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Register mounts the tables and the maps beside the embedder's own
// handlers, which it leaves alone; without maps there is no /maps (404,
// which lbctl explains) and the tables are still served.
func TestRegisterMountsBesideTheEmbeddersHandlers(t *testing.T) {
	db, maps := newTables(t)
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name     string
		withMaps bool
	}{{"with maps", true}, {"without maps", false}} {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		if c.withMaps {
			Register(mux, log, db, maps)
		} else {
			Register(mux, log, db, nil)
		}
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		if code, body := get(t, srv.URL+"/healthz"); code != http.StatusOK || body != "ok" {
			t.Errorf("%s: the embedder's /healthz: %d %q", c.name, code, body)
		}
		if code, body := get(t, srv.URL+"/statedb/dump/frontends"); code != http.StatusOK || !strings.Contains(body, "10.96.0.10:53/UDP") {
			t.Errorf("%s: /statedb/dump/frontends: %d %.300s", c.name, code, body)
		}
		wantMaps := http.StatusNotFound
		if c.withMaps {
			wantMaps = http.StatusOK
		}
		if code, body := get(t, srv.URL+MapsPath); code != wantMaps {
			t.Errorf("%s: %s: %d %.300s, want %d", c.name, MapsPath, code, body, wantMaps)
		}
	}
}

// Handler under a prefix (http.StripPrefix) serves the same paths below
// it, and its limits still tell a stream from a plain request: a second
// watch over a limit of one is refused while plain requests go on.
func TestHandlerUnderAPrefixKeepsItsLimits(t *testing.T) {
	db, maps := newTables(t)
	limits := shortLimits
	limits.RequestTimeout = DefaultLimits.RequestTimeout // a loaded machine must not cut the dumps
	mux := http.NewServeMux()
	mux.Handle("/lb/", http.StripPrefix("/lb", limits.Handler(slog.New(slog.DiscardHandler), db, maps)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	if code, body := get(t, srv.URL+"/lb/statedb/dump/frontends"); code != http.StatusOK || !strings.Contains(body, "10.96.0.10:53/UDP") {
		t.Fatalf("/lb/statedb/dump/frontends: %d %.300s", code, body)
	}
	if code, _ := get(t, srv.URL+"/lb"+MapsPath); code != http.StatusOK {
		t.Fatalf("/lb%s: %d", MapsPath, code)
	}
	watch, err := http.Get(srv.URL + "/lb/statedb/changes/frontends")
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Body.Close()
	if watch.StatusCode != http.StatusOK {
		t.Fatalf("the first watch: %s", watch.Status)
	}
	if code, body := get(t, srv.URL+"/lb/statedb/changes/frontends"); code != http.StatusServiceUnavailable {
		t.Errorf("a second watch over a limit of 1: %d %.300s", code, body)
	}
	if code, _ := get(t, srv.URL+"/lb/statedb/dump"); code != http.StatusOK {
		t.Errorf("a plain request while the streams are full: %d", code)
	}
}
