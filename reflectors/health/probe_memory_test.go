package health

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// endlessHeaderServer accepts connections on loopback and answers each
// request with a status line and then one header that never ends, until
// the client goes.
func endlessHeaderServer(t *testing.T) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				filler := bytes.Repeat([]byte("a"), 32<<10)
				if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nX-Endless: ")); err != nil {
					return
				}
				for {
					if _, err := c.Write(filler); err != nil {
						return
					}
				}
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// resetPeakRSS resets the process's peak RSS (clear_refs), or returns false if
// it may not.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is the process's peak resident set since the last reset, in
// bytes.
func peakRSS(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// Endpoints that answer "HTTP/1.1 200 OK" and then an endless header
// once took the agent from 95 MB to 2.9 GB in 5 s with 150 of them: the
// HTTP probe read up to 10 MiB of headers each. It now reads a few KiB,
// fails with a clear error, and 150 such probes at once allocate less
// than 50 MB, and grow the process's peak RSS by less than that.
func TestHTTPProbeOfEndlessHeadersIsBounded(t *testing.T) {
	if !resetPeakRSS() {
		t.Skip("cannot reset the peak RSS (/proc/self/clear_refs)")
	}
	const endpoints = 150
	addrs := make([]netip.AddrPort, endpoints)
	for i := range addrs {
		addrs[i] = endlessHeaderServer(t)
	}
	p := newHTTPProber()
	chk := check{kind: probeHTTP, path: "/", statusMin: 200, statusMax: 399}
	runtime.GC()
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	allocated := stats.TotalAlloc
	resetPeakRSS()
	before := peakRSS(t)

	errs := make([]error, endpoints)
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a guard: each ends at its header cap
			defer cancel()
			errs[i] = p.probe(ctx, a, &chk)
		}()
	}
	wg.Wait()
	grown := peakRSS(t) - before
	runtime.ReadMemStats(&stats)
	allocated = stats.TotalAlloc - allocated // the heap grew by no more than this
	t.Logf("peak RSS grew by %d KiB, %d KiB allocated, for %d probes; first error: %v", grown>>10, allocated>>10, endpoints, errs[0])
	if allocated >= 50<<20 {
		t.Errorf("%d MiB allocated for %d probes of endless headers, want < 50 MiB", allocated>>20, endpoints)
	}
	if grown >= 50<<20 && !raceEnabled {
		t.Errorf("peak RSS grew by %d MiB for %d probes of endless headers, want < 50 MiB", grown>>20, endpoints)
	}
	for i, err := range errs {
		if err == nil || !strings.Contains(describe(err), "headers exceeded") {
			t.Fatalf("probe of %s: %v, want the header cap's error", addrs[i], err)
		}
	}
}
