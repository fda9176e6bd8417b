package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
)

// silentAgent accepts connections and never answers; closing stop ends
// them.
func silentAgent(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-stop; conn.Close() }()
		}
	}()
	return "http://" + ln.Addr().String()
}

// runWithin runs lbctl and fails if it has not returned within limit: it
// detects a hang.
func runWithin(t *testing.T, limit time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(args, &out, &errOut) }()
	select {
	case code = <-done:
	case <-time.After(limit):
		t.Fatalf("lbctl %v still running after %v", args, limit)
	}
	return code, out.String(), errOut.String()
}

// Against an agent that never answers, every command that reads the agent
// gives up after --timeout and says so. It once waited forever.
func TestAgentThatNeverAnswersTimesOut(t *testing.T) {
	api := silentAgent(t)
	for _, args := range [][]string{
		{"frontends", "--api", api, "--timeout", "200ms"},
		{"services", "--api", api, "--timeout", "200ms", "--watch"},
		{"maps", "--api", api, "--timeout", "200ms"},
		{"explain", "10.96.0.10:80/TCP", "--api", api, "--timeout", "200ms"},
	} {
		code, _, stderr := runWithin(t, 10*time.Second, args...)
		if want := "did not answer within 200ms (--timeout)"; code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("lbctl %v: exit %d, stderr %q; want exit 1 and %q", args, code, stderr, want)
		}
	}
}

// --timeout bounds how long the agent may take to answer, not how long a
// --watch stream lasts: a watch prints a change that comes long after.
func TestWatchOutlivesTimeout(t *testing.T) {
	p := demoPipeline(t, "random")
	srv := httptest.NewServer(http.StripPrefix("/statedb", p.db.HTTPHandler()))
	out := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"services", "--api", srv.URL, "--watch", "--timeout", "500ms"}, out, io.Discard)
	}()
	defer func() { // the watch ends when the agent goes away
		srv.CloseClientConnections()
		srv.Close()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "shop/web") {
		if time.Now().After(deadline) {
			t.Fatalf("the watch printed no rows:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // three timeouts of silence
	txn := p.w.WriteTxn()
	if err := p.w.DeleteSource(txn, lb.SourceFile); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	for !strings.Contains(out.String(), "- shop/web") {
		if time.Now().After(deadline) {
			t.Fatalf("the watch did not print the deletion a second after it opened:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An --api that is not the agent's (another server, or a path under which
// the agent serves nothing) is reported as such, with what it answered.
// It once said "cannot unmarshal number": the 404 of "404 page not found"
// decoded as JSON.
func TestAPIThatIsNotTheAgentsIsReported(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	agent := agentAPI(t)
	for _, api := range []string{other.URL, agent + "/elsewhere"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"frontends", "--api", api}, &stdout, &stderr)
		want := "/rows/frontends answered 404 Not Found: 404 page not found"
		if code != 1 || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "is --api the agent's address") {
			t.Errorf("--api %s: exit %d, stderr %q; want exit 1 and %q", api, code, stderr.String(), want)
		}
	}
}
