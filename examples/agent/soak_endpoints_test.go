package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// endpointKind is how a soak health endpoint answers a probe: good ones
// answer 200 (or 503 while failing), the hostile ones are the answers that
// once starved the prober's slots or bloated its memory.
type endpointKind string

const (
	good      endpointKind = "good"
	silent    endpointKind = "silent"    // reads the request, never answers
	endless   endpointKind = "endless"   // a status line, then one header that never ends
	hugeBody  endpointKind = "huge-body" // 200 with a 100 MB body
	slowloris endpointKind = "slowloris" // a status line, then a header a byte at a time
	reset     endpointKind = "reset"     // accepts and resets at once
)

var hostileKinds = []endpointKind{silent, endless, hugeBody, slowloris, reset}

// filler is what the endless and huge-body endpoints write, shared so
// that the test's own side allocates nothing per probe.
var filler = bytes.Repeat([]byte("a"), 32<<10)

// endpoint is a loopback HTTP health endpoint of one kind; a good one
// fails its probes (503) while failing is set.
type endpoint struct {
	kind    endpointKind
	addr    netip.AddrPort
	failing atomic.Bool
}

// startEndpoint serves kind on a loopback port until the test ends, when
// its listener and every connection it holds are closed and its
// goroutines have returned.
func startEndpoint(t *testing.T, kind endpointKind) *endpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{kind: kind, addr: netip.MustParseAddrPort(ln.Addr().String())}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		done  = make(chan struct{})
	)
	t.Cleanup(func() {
		close(done)
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				e.answer(c, done)
			}()
		}
	}()
	return e
}

// answer answers one connection as the endpoint's kind does, until the
// client goes or the test ends.
func (e *endpoint) answer(c net.Conn, done <-chan struct{}) {
	if e.kind == reset {
		c.(*net.TCPConn).SetLinger(0)
		return
	}
	if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
		return
	}
	switch e.kind {
	case good:
		status := "200 OK"
		if e.failing.Load() {
			status = "503 Service Unavailable"
		}
		fmt.Fprintf(c, "HTTP/1.1 %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", status)
	case silent:
		c.Read(make([]byte, 1)) // until the prober gives up
	case endless:
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nX-Endless: ")); err != nil {
			return
		}
		for {
			if _, err := c.Write(filler); err != nil {
				return
			}
		}
	case hugeBody:
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", 100<<20); err != nil {
			return
		}
		for sent := 0; sent < 100<<20; sent += len(filler) {
			if _, err := c.Write(filler); err != nil {
				return
			}
		}
	case slowloris:
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nX-Slow: ")); err != nil {
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
		}
	}
}
