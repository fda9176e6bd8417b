package api

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// The server builds the index key from the query's text: a client finds
// a row by what it means, whatever bytes this build of the index makes of
// it, and a query the server cannot read is an error naming what is
// wrong, never an empty answer.
func TestRowsAreFoundByAQueryInText(t *testing.T) {
	db, maps := newTables(t)
	srv := httptest.NewServer(Handler(slog.New(slog.DiscardHandler), db, maps))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		query string
		code  int
		want  string // in the body
		lines int    // rows answered, for 200
	}{
		{"frontends", 200, `"address":"10.96.0.10:53/UDP"`, 1},
		{"frontends?address=10.96.0.10:53/UDP", 200, `"address":"10.96.0.10:53/UDP"`, 1},
		{"services?name=default/dns", 200, `"default/dns"`, 1},
		{"frontends?address=10.96.0.10:53/TCP", 200, "", 0}, // its twin: no such row
		{"frontends?address=10.96.0.10:53", 400, `table \"frontends\": index \"address\": key \"10.96.0.10:53\": address \"10.96.0.10:53\": missing protocol`, 0},
		{"frontends?addr=10.96.0.10:53/UDP", 400, `table \"frontends\": no index \"addr\" (it has address`, 0},
		{"frontends?address=10.96.0.10:53/UDP&service=default/dns", 400, "one index at a time", 0},
		{"fronts", 404, `no table \"fronts\" (there are `, 0},
	} {
		code, body := get(t, srv.URL+RowsPath+c.query)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %.300s, want %d and %s", c.query, code, body, c.code, c.want)
		}
		if code == 200 && strings.Count(body, `"obj":`) != c.lines {
			t.Errorf("%s: %d rows, want %d:\n%.300s", c.query, strings.Count(body, `"obj":`), c.lines, body)
		}
	}
}

// Every answer names the read API's version, and a client that speaks
// another is told so, with both versions, instead of being answered in a
// form it would misread.
func TestReadAPIVersionMismatchIsAnError(t *testing.T) {
	db, maps := newTables(t)
	srv := httptest.NewServer(Handler(slog.New(slog.DiscardHandler), db, maps))
	t.Cleanup(srv.Close)
	for _, v := range []string{"", strconv.Itoa(ReadAPIVersion), "99"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+RowsPath+"frontends", nil)
		if err != nil {
			t.Fatal(err)
		}
		if v != "" {
			req.Header.Set(VersionHeader, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(VersionHeader); got != strconv.Itoa(ReadAPIVersion) {
			t.Errorf("client version %q: the answer's %s is %q, want %d", v, VersionHeader, got, ReadAPIVersion)
		}
		want := http.StatusOK
		if v == "99" {
			want = http.StatusBadRequest
		}
		if resp.StatusCode != want {
			t.Errorf("client version %q: %s, want %d", v, resp.Status, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/statedb/dump/frontends", nil)
	req.Header.Set(VersionHeader, "99")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	resp.Body.Close()
	if want := "the client speaks lbstate read API version 99, this agent version 1"; resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body[:n]), want) {
		t.Errorf("a dump for a client of version 99: %s %q, want 400 and %q", resp.Status, body[:n], want)
	}
}
