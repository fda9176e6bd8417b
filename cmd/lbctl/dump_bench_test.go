package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// BenchmarkDump100kServices writes the dump of an agent holding 100,000
// services of 10 backends each (1M backends) in in-memory maps sized for
// them, through the read API on loopback: the bound docs/lbctl.md gives.
// It reports the archive's size. The services are declared once, before
// the timer starts (about a minute on a loaded machine).
//
//	go test ./cmd/lbctl -run '^$' -bench Dump100k -benchtime 3x
func BenchmarkDump100kServices(b *testing.B) {
	const services, perService = 100_000, 10
	var (
		db   *statedb.DB
		w    *tables.Writer
		fes  statedb.Table[*lb.Frontend]
		rec  reconciler.Reconciler[*lb.Frontend]
		mux  = http.NewServeMux()
		logs = slog.New(slog.NewTextHandler(io.Discard, nil))
	)
	h := hive.New(
		lbstate.Cell,
		cell.Invoke(func(d *statedb.DB, wr *tables.Writer, m *bpf.Maps, t statedb.Table[*lb.Frontend],
			r reconciler.Reconciler[*lb.Frontend], g prometheus.Gatherer) {
			db, w, fes, rec = d, wr, t, r
			api.Register(mux, logs, d, m)
			api.RegisterAgent(mux, logs, api.Agent{Gatherer: g})
		}),
	)
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "memory" })
	hive.AddConfigOverride(h, func(c *bpf.Config) {
		c.LBServicesMax, c.LBBackendsMax = services*(1+perService)+1024, services*perService+1024
		c.LBRevNatMax, c.LBMaglevMax = services+1024, 1024
	})
	if err := h.Start(logs, context.Background()); err != nil {
		b.Fatal(err)
	}
	defer h.Stop(logs, context.Background())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	const perTxn = 1000
	for start := 0; start < services; start += perTxn {
		txn := w.WriteTxn()
		err := w.Batch(txn, func() error {
			for s := start; s < start+perTxn; s++ {
				name := lb.NewServiceName("bench", fmt.Sprintf("svc-%d", s))
				fe := lb.MustParseL3n4Addr(fmt.Sprintf("10.%d.%d.%d:80/TCP", 96+s>>16, (s>>8)&255, s&255))
				if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceAPI,
					Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
					return err
				}
				bes := make([]lb.BackendParams, perService)
				for j := range bes {
					n := s*perService + j
					bes[j] = lb.BackendParams{Address: lb.MustParseL3n4Addr(fmt.Sprintf("172.%d.%d.%d:8080/TCP", 16+n>>16, (n>>8)&255, n&255)),
						Weight: lb.DefaultBackendWeight}
				}
				if err := w.SetBackends(txn, name, lb.SourceAPI, bes...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			txn.Abort()
			b.Fatal(err)
		}
		txn.Commit()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := lbreconciler.WaitReconciled(ctx, rec, fes.Revision(db.ReadTxn())); err != nil {
		b.Fatal(err)
	}

	c, err := newAgentClient(srv.URL, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "dump.tar.gz")
	var size int64
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		os.Remove(path)
		if size, err = writeDump(c, path, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	// CPU time (agent and lbctl: one process here) says what a loaded
	// machine's wall clock cannot.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(size)/(1<<20), "MiB/archive")
	b.StopTimer()
	b.ReportMetric(float64(entriesSize(b, path))/(1<<20), "MiB/uncompressed")
}

// entriesSize is the sum of the sizes of the archive's entries.
func entriesSize(b *testing.B, path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var n int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %d bytes", hdr.Name, hdr.Size)
		n += hdr.Size
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
